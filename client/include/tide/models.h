/* SPDX-License-Identifier: MIT */
/*
 * tide/models.h: ready-made image classifiers (the LSTM reads an image as a
 * sequence of rows), and (at the end) language models, written with the
 * graph builder (tide/graph.h).
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

/* ============================================================================
 * Language models (models-lm.c)
 *
 * Decoder-only Transformers over token ids, trained to predict each next
 * token. They add, instead of "images":
 *
 *   - the Placeholder "tokens", int32 [B, S] (ids in 0 .. vocab - 1), and
 *     "labels", int32 [B, S]: each token's next token (tide_corpus windows);
 *   - "logits", float32 [B * S, vocab]: row b * S + s predicts labels[b][s];
 *   - "xent", float32 [B * S]: each token's cross-entropy in nats, whose
 *     mean over a held-out split is the held-out loss (nats per token, per
 *     byte for byte-level text);
 *   - "loss": the mean of "xent" over the batch's tokens; for the MoE model,
 *     that mean ("lm_loss") plus the weighted load-balancing loss
 *     ("aux_loss").
 *
 * Variables, initialised as PyTorch's nn.Embedding, nn.Linear and
 * nn.LayerNorm start (biases at zero): "embed/w" [vocab, D] and "pos/w" [S,
 * D] (normal, stddev 1); every weight uniform in +-1 / sqrt(fan_in), fan_in
 * being the rows of its (each expert's) matrix; gains "ones". Per block l,
 * "block<l>/ln1/gain" and "/bias" [D], "block<l>/attn/{q,k,v,out}/{w,b}"
 * ([D, D], [D]), "block<l>/ln2/..." and either "block<l>/mlp/fc1/{w,b}"
 * [D, 4D], [4D] and "block<l>/mlp/fc2/{w,b}" [4D, D], [D] or the MoE
 * layer's "block<l>/moe/gate/w" [D, E], "block<l>/moe/experts/w1" [E, D,
 * 4D], "b1" [E, 1, 4D], "w2" [E, 4D, D], "b2" [E, 1, D]; then "ln_f/..."
 * [D] and "head/w" [D, vocab], "head/b" [vocab]. So the Transformer has
 *   vocab * D + S * D + layers * (12 D^2 + 13 D) + 2 D + D * vocab + vocab
 * parameters (875,520 at the defaults), and the MoE model, per layer,
 * E * (8 D^2 + 5 D) + D * E + 4 D^2 + 8 D in place of 12 D^2 + 13 D.
 * ========================================================================== */

/* The names of the nodes the language models add (and "labels", "logits", "loss" above). */
#define TIDE_MODEL_TOKENS     "tokens"   /* Placeholder, int32 [B, S] */
#define TIDE_MODEL_TOKEN_LOSS "xent"     /* float32 [B * S], each token's cross-entropy */
#define TIDE_MODEL_LM_LOSS    "lm_loss"  /* MoE: float32 scalar, the mean of "xent" */
#define TIDE_MODEL_AUX_LOSS   "aux_loss" /* MoE: float32 scalar, the weighted balance loss */

/*
 * The default Dropout rate of the language models: after the embeddings and
 * on each block's two residual branches. 0 adds no Dropout node at all. It
 * is 0 because the models here train for a few hundred steps on a corpus
 * they never see twice (300 steps of 32 x 128 tokens are half an epoch of
 * fortunes), where Dropout only slows the fall of the held-out loss.
 */
#define TIDE_MODEL_LM_DROPOUT 0.0f

/* The sizes of a language model; start from tide_model_lm_options_default(). */
struct tide_model_lm_options {
    int64_t batch;          /* windows per batch, B (default 32) */
    int64_t seq_len;        /* tokens per window, S (128) */
    int64_t vocab;          /* token ids (256: bytes) */
    int64_t d_model;        /* features, D (128); a multiple of heads */
    int32_t layers;         /* blocks (4) */
    int32_t heads;          /* attention heads (4) */
    float dropout;          /* rate in [0, 1) (TIDE_MODEL_LM_DROPOUT) */
    int64_t experts;        /* MoE: experts per layer, E (8) */
    double capacity_factor; /* MoE: slots per expert, see tide_model_moe_capacity (1.25) */
    float aux_loss_weight;  /* MoE: weight of the load-balancing loss (0.01) */
};

/* The default sizes, as listed in struct tide_model_lm_options. */
struct tide_model_lm_options tide_model_lm_options_default(void);

/*
 * The defaults with each size that flags sets in their place, as tidectl and
 * tide-bench read their command lines: flags' batch always; seq_len, vocab,
 * d_model, layers, heads and experts when not 0; capacity_factor when > 0;
 * dropout when >= 0 (a command line's -1: not given). aux_loss_weight stays
 * the default's.
 */
struct tide_model_lm_options tide_model_lm_options_with(const struct tide_model_lm_options *flags);

/*
 * A decoder-only Transformer language model: token embedding (Gather) plus
 * learned positions; `layers` pre-LayerNorm blocks, each x += Dropout(causal
 * fused Attention(LN(x))) with `heads` heads, scale 1/sqrt(D / heads), and
 * x += Dropout(MLP(LN(x))), the MLP being dense to 4 D, Gelu, dense to D;
 * a final LayerNorm and the projection to vocab logits. LayerNorm's epsilon
 * is 1e-5. Returns the logits.
 */
tide_ref tide_model_transformer(tide_builder *b, const struct tide_model_lm_options *options);

/*
 * The Transformer with each MLP replaced by a Mixture-of-Experts layer of
 * `experts` experts, each an MLP of the same shape: a softmax gate [D, E]
 * (no bias), each token routed to its top-2 experts (MoeRoute: first
 * choices before second ones, earlier tokens first; a choice that finds its
 * expert's tide_model_moe_capacity slots full is dropped), the experts run
 * as BatchMatMuls over their slots only, and each token's output the sum of
 * its kept choices' outputs times their gate probabilities. The load
 * balance of each layer is E * sum_e f_e * P_e (Switch Transformer), f_e
 * the share of tokens whose first choice is e and P_e the mean gate
 * probability of e; "aux_loss" is aux_loss_weight times its sum over the
 * layers. Returns the logits.
 */
tide_ref tide_model_moe(tide_builder *b, const struct tide_model_lm_options *options);

/*
 * The slots of each expert: ceil(capacity_factor * tokens * 2 / experts),
 * so that a capacity_factor of 1 fits perfectly balanced top-2 routing.
 * Returns -1 for sizes < 1, a factor that is not finite and > 0, or more
 * than 2^31 - 1 slots.
 */
int64_t tide_model_moe_capacity(int64_t tokens, int64_t experts, double capacity_factor);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MODELS_H */
