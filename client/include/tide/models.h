/* SPDX-License-Identifier: MIT */
/*
 * tide/models.h: ready-made image classifiers (the LSTM reads an image as a
 * sequence of rows), written with the graph builder (tide/graph.h).
 *
 * Every model adds a whole training graph to a builder:
 *
 *   - the Placeholder "images", float32 [B, C, H, W] (NCHW), and the
 *     Placeholder "labels", int32 [B] (class indices), which the client feeds
 *     on every step;
 *   - the network, its Variables named by layer ("conv1/w", "fc1/b",
 *     "stage2/block0/conv2/bn/gamma");
 *   - "logits", float32 [B, classes], the value the model returns a ref to;
 *   - "loss", the scalar ReduceMean(SoftmaxCrossEntropy(logits, labels)),
 *     which a job names as what to minimise.
 *
 * So a builder holds at most one model. Weights of dense layers are
 * Variables [in, out] with "glorot_uniform" init, of convolutions [K, C, R, S]
 * with "he_normal"; biases and BatchNorm's beta start at "zeros", its gamma
 * at "ones". A model that cannot be built (a bad size, an image too small
 * for its strides, a name already taken) records the builder's sticky error
 * and returns TIDE_REF_NONE; nothing here allocates anything the caller must
 * free beyond the builder itself.
 *
 * Example usage:
 *
 *     tide_builder *b = tide_builder_new();
 *     tide_ref logits = tide_model_cnn(b, 64, 1, 28, 28, 10);
 *     uint8_t *bytes;
 *     size_t len;
 *     if (logits.id < 0 || tide_builder_serialize(b, &bytes, &len) != 0)
 *         fprintf(stderr, "model: %s\n", tide_builder_error(b));
 *     // submit bytes with loss = TIDE_MODEL_LOSS and feeds TIDE_MODEL_IMAGES, TIDE_MODEL_LABELS
 */
#ifndef TIDE_MODELS_H
#define TIDE_MODELS_H

#include <stdint.h>

#include "tide/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The names of the nodes every model adds. */
#define TIDE_MODEL_IMAGES "images" /* Placeholder, float32 [B, C, H, W] */
#define TIDE_MODEL_LABELS "labels" /* Placeholder, int32 [B] */
#define TIDE_MODEL_LOGITS "logits" /* float32 [B, classes] */
#define TIDE_MODEL_LOSS   "loss"   /* float32 scalar, the mean cross-entropy */

/*
 * A multi-layer perceptron on batch rows of in_features values. images is
 * [batch, 1, 1, in_features] — feed any [batch, C, H, W] data with C * H * W
 * = in_features, the bytes are the same — and is reshaped to [batch,
 * in_features]. Then n_hidden dense layers ("fc1", "fc2", ...) of hidden[i]
 * units, each MatMul + BiasAdd + Relu, and a last dense layer ("fc_out") to
 * classes logits. The parameter count is the sum over consecutive widths
 * (in_features, hidden..., classes) of in * out + out. hidden may be NULL
 * when n_hidden is 0. Returns the logits.
 */
tide_ref tide_model_mlp(tide_builder *b, int64_t batch, int64_t in_features, const int64_t *hidden,
                        int32_t n_hidden, int64_t classes);

/*
 * A small convolutional network, sized for 28x28 Fashion-MNIST (channels 1,
 * classes 10) but built for any image: conv1 3x3 pad 1 to 16 channels, Relu,
 * 2x2 max pool; conv2 3x3 pad 1 to 32 channels, Relu, 2x2 max pool; reshape
 * to [batch, 32 * H/4 * W/4]; dense "fc1" of 128 units with Relu; dense
 * "fc_out" to classes. Convolutions have biases (BiasAdd). For 28x28x1 it has
 * 206,922 parameters and about 1.2 million multiply-adds per image forward,
 * so an epoch of Fashion-MNIST trains on two CPU cores in minutes. After one
 * epoch at batch 64 with momentum 0.9, an independent reference
 * implementation of this network and these initialisers reached 0.868 test
 * accuracy at learning rate 0.01, 0.873 at 0.02 and 0.863 at 0.05.
 * Returns the logits.
 */
tide_ref tide_model_cnn(tide_builder *b, int64_t batch, int64_t channels, int64_t height,
                        int64_t width, int64_t classes);

/*
 * The number of weighted layers (convolutions on the main path, plus the
 * dense layer) of tide_model_resnet with n blocks in its third stage:
 * 3 * (10 + n) + 2 — 3 * (3 + 4 + n + 3) bottleneck convolutions, the stem
 * convolution and the classifier, as the ResNet papers count depth (n = 6
 * is ResNet-50, n = 23 ResNet-101). Projection shortcuts are not counted.
 * Returns -1 for n < 1.
 */
int32_t tide_model_resnet_depth(int32_t n);

/*
 * A ResNet of bottleneck blocks on square images of image_size pixels, with
 * stages of 3, 4, n and 3 blocks (see tide_model_resnet_depth) and base width
 * `width` (64 in the papers).
 *
 *   - Stem ("stem"): for image_size >= 64, conv 7x7 stride 2 pad 3 to width
 *     channels, BatchNorm, Relu, then max pool 3x3 stride 2 pad 1 (the
 *     ImageNet stem); for smaller images, conv 3x3 stride 1 pad 1, BatchNorm,
 *     Relu (the CIFAR stem).
 *   - Stage s (1..4, "stage<s>/block<i>"), with w = width * 2^(s-1): each
 *     block is conv 1x1 to w, BatchNorm, Relu; conv 3x3 pad 1 to w, BatchNorm,
 *     Relu; conv 1x1 to 4w, BatchNorm; plus the shortcut; then Relu. The
 *     first block of stages 2 to 4 has stride 2, on its 3x3 convolution (as
 *     in "ResNet v1.5"). Where the block changes the shape (the first block
 *     of every stage), the shortcut is a projection ("shortcut": conv 1x1
 *     with the block's stride to 4w, then BatchNorm), else the identity.
 *   - Head: GlobalAvgPool to [batch, 32 * width], dense "fc_out" to classes.
 *
 * Convolutions have no bias (BatchNorm follows each). BatchNorm runs in
 * training mode with epsilon 1e-5. The image must survive the strides: at
 * least 1 pixel after them, which every image_size >= 1 does. Returns the
 * logits.
 */
tide_ref tide_model_resnet(tide_builder *b, int64_t batch, int64_t channels, int64_t image_size,
                           int64_t classes, int32_t n, int64_t width);

/*
 * A stacked, unrolled LSTM classifier (DeepSpeech-like), reading each image
 * as a sequence: images is [batch, 1, seq_len, features], row t being time
 * step t (Fashion-MNIST read row by row is seq_len 28 of 28 features). The
 * placeholder is reshaped to [batch, seq_len * features] and sliced into
 * the steps' [batch, features] inputs.
 *
 * Layer l ("lstm<l>", 1 .. layers) has one weight "w" [in + hidden, 4 *
 * hidden] and one bias "b" [4 * hidden], in + hidden being its input's and
 * its state's width (in is features for the first layer, hidden above it).
 * At step t ("lstm<l>/t<t>") the gates are [x_t, h_{t-1}] (Concat) times w
 * plus b, sliced into the input gate i, forget gate f, cell candidate g and
 * output gate o, in that order (PyTorch's), each [batch, hidden]:
 *
 *     c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
 *     h_t = sigmoid(o) * tanh(c_t)
 *
 * The state starts at zero, so step 0 multiplies x_0 by the input rows of w
 * alone (a Slice of w) and has no forget term. h_t is the next layer's x_t.
 * Weights start uniform in [-1/sqrt(hidden), 1/sqrt(hidden)], as PyTorch's
 * LSTM; biases at zero, except the forget gate's at 1, so that the cell
 * keeps its state at first and gradients reach early steps (common practice
 * since Gers et al., 2000, and Jozefowicz et al., 2015). A dense layer
 * ("fc_out") maps the last layer's last h to classes logits.
 *
 * Parameters: the sum over layers of (in + hidden) * 4 * hidden + 4 *
 * hidden, plus hidden * classes + classes (81,674 for one layer of 128 on
 * 28 features and 10 classes). After one epoch of Fashion-MNIST at batch 64
 * with Adam, PyTorch's one-layer LSTM of 128 reached 0.80 test accuracy at
 * learning rate 0.001 and 0.82 at 0.003. Returns the logits.
 */
tide_ref tide_model_lstm(tide_builder *b, int64_t batch, int64_t seq_len, int64_t features,
                         int64_t hidden, int32_t layers, int64_t classes);

/*
 * Adam's learning rate for tide_model_lstm, tidectl's and tide-bench's
 * default: one layer of 128 at batch 64 reached 0.847 test accuracy after
 * one epoch of Fashion-MNIST with it (seeds 1 and 2), 0.827 at 0.001.
 */
#define TIDE_MODEL_LSTM_LEARNING_RATE 0.003

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MODELS_H */
