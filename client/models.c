/* SPDX-License-Identifier: MIT */
/*
 * models.c: image classifiers built with the graph builder (tide/models.h):
 * the MLP, the CNN, the ResNet and the unrolled LSTM.
 *
 * Each model is a straight list of builder calls. The builder's errors are
 * sticky, so the layers below do not check each call: after a failure every
 * later call is a no-op returning TIDE_REF_NONE, and the model returns
 * whatever the last call gave. Layer helpers open a name scope for their
 * variables and ops ("conv1/w", "conv1/conv2d_0") and close it again, also
 * after a failure (pop does nothing then).
 */
#include "tide/models.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/builder-impl.h"

/* BatchNorm's epsilon, as in the ResNet papers' frameworks. */
#define BN_EPSILON 1e-5f

/* ============================================================================
 * Layers
 * ========================================================================== */

/* The size of axis `axis` of ref's output, or 0 when ref names no output. */
static int64_t dim_of(const tide_builder *b, tide_ref ref, int32_t axis)
{
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    int32_t rank;
    if (tide_builder_shape(b, ref, dims, &rank) != 0 || axis >= rank)
        return 0;
    return dims[axis];
}

/*
 * A dense layer in scope `scope`: x [N, in] times w [in, units]
 * (glorot_uniform), plus bias [units] (zeros). The BiasAdd is named out_name
 * outside the scope when out_name is given ("logits").
 */
static tide_ref dense(tide_builder *b, const char *scope, tide_ref x, int64_t units,
                      const char *out_name)
{
    int64_t in = dim_of(b, x, 1);
    int64_t w_dims[2] = {in, units}, b_dims[1] = {units};
    tide_builder_push_scope(b, scope);
    tide_ref w = tide_builder_variable(b, "w", 2, w_dims, "glorot_uniform", 1.0f, true);
    tide_ref bias = tide_builder_variable(b, "b", 1, b_dims, "zeros", 1.0f, true);
    tide_ref y = tide_builder_matmul(b, NULL, x, w, false, false);
    if (!out_name)
        y = tide_builder_bias_add(b, NULL, y, bias);
    tide_builder_pop_scope(b);
    if (out_name)
        y = tide_builder_bias_add(b, out_name, y, bias);
    return y;
}

/*
 * A convolution in the current scope: filter "w" [out_channels, C, k, k]
 * (he_normal), stride and pad on both axes, and a bias "b" (zeros) when
 * with_bias is set.
 */
static tide_ref conv(tide_builder *b, tide_ref x, int64_t out_channels, int64_t k, int64_t stride,
                     int64_t pad, bool with_bias)
{
    int64_t w_dims[4] = {out_channels, dim_of(b, x, 1), k, k}, b_dims[1] = {out_channels};
    tide_ref w = tide_builder_variable(b, "w", 4, w_dims, "he_normal", 1.0f, true);
    tide_ref y = tide_builder_conv2d(b, NULL, x, w, stride, stride, pad, pad);
    if (with_bias) {
        tide_ref bias = tide_builder_variable(b, "b", 1, b_dims, "zeros", 1.0f, true);
        y = tide_builder_bias_add(b, NULL, y, bias);
    }
    return y;
}

/* BatchNorm of x in scope "bn" of the current scope: gamma (ones) and beta (zeros), [C]. */
static tide_ref batch_norm(tide_builder *b, tide_ref x)
{
    int64_t c_dims[1] = {dim_of(b, x, 1)};
    tide_builder_push_scope(b, "bn");
    tide_ref gamma = tide_builder_variable(b, "gamma", 1, c_dims, "ones", 1.0f, true);
    tide_ref beta = tide_builder_variable(b, "beta", 1, c_dims, "zeros", 1.0f, true);
    tide_ref y = tide_builder_batch_norm(b, NULL, x, gamma, beta, BN_EPSILON);
    tide_builder_pop_scope(b);
    return y;
}

/* Conv (no bias) + BatchNorm, + Relu when relu is set, all in scope `scope`. */
static tide_ref conv_bn(tide_builder *b, const char *scope, tide_ref x, int64_t out_channels,
                        int64_t k, int64_t stride, int64_t pad, bool relu)
{
    tide_builder_push_scope(b, scope);
    tide_ref y = batch_norm(b, conv(b, x, out_channels, k, stride, pad, false));
    if (relu)
        y = tide_builder_relu(b, NULL, y);
    tide_builder_pop_scope(b);
    return y;
}

/* ============================================================================
 * Inputs and loss
 * ========================================================================== */

/* Checks that every size is at least 1, recording an error about `model` otherwise. */
static bool sizes_valid(tide_builder *b, const char *model, const char *const *names,
                        const int64_t *values, int n)
{
    if (!b || tide_builder_error(b))
        return false;
    for (int i = 0; i < n; i++) {
        if (values[i] < 1) {
            tide__builder_set_error(b, "%s: %s is %" PRId64 ", wants 1 or more", model, names[i],
                                    values[i]);
            return false;
        }
    }
    return true;
}

/* The "labels" placeholder [batch] int32. */
static tide_ref labels_placeholder(tide_builder *b, int64_t batch)
{
    return tide_builder_placeholder(b, TIDE_MODEL_LABELS, TIDE_DT_INT32, 1, &batch);
}

/* "loss" = ReduceMean(SoftmaxCrossEntropy(logits, labels)); returns logits. */
static tide_ref add_loss(tide_builder *b, tide_ref logits, tide_ref labels)
{
    tide_ref xent = tide_builder_softmax_cross_entropy(b, "xent", logits, labels);
    tide_ref loss = tide_builder_reduce_mean(b, TIDE_MODEL_LOSS, xent, NULL, 0, false);
    return loss.id < 0 ? TIDE_REF_NONE : logits;
}

/* ============================================================================
 * Models
 * ========================================================================== */

tide_ref tide_model_mlp(tide_builder *b, int64_t batch, int64_t in_features, const int64_t *hidden,
                        int32_t n_hidden, int64_t classes)
{
    static const char *const names[] = {"batch", "in_features", "classes"};
    const int64_t values[] = {batch, in_features, classes};
    if (!sizes_valid(b, "tide_model_mlp", names, values, 3))
        return TIDE_REF_NONE;
    if (n_hidden < 0 || (n_hidden > 0 && !hidden)) {
        tide__builder_set_error(b,
                                "tide_model_mlp: n_hidden is %d with hidden %s, wants n_hidden "
                                ">= 0 and hidden non-NULL when n_hidden > 0",
                                (int)n_hidden, hidden ? "non-NULL" : "NULL");
        return TIDE_REF_NONE;
    }
    for (int32_t i = 0; i < n_hidden; i++) {
        if (hidden[i] < 1) {
            tide__builder_set_error(b, "tide_model_mlp: hidden[%d] is %" PRId64 ", wants 1 or more",
                                    (int)i, hidden[i]);
            return TIDE_REF_NONE;
        }
    }

    int64_t image_dims[4] = {batch, 1, 1, in_features}, flat[2] = {batch, in_features};
    tide_ref images =
        tide_builder_placeholder(b, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, 4, image_dims);
    tide_ref labels = labels_placeholder(b, batch);
    tide_ref x = tide_builder_reshape(b, "flatten", images, 2, flat);
    for (int32_t i = 0; i < n_hidden; i++) {
        char scope[32];
        snprintf(scope, sizeof(scope), "fc%d", (int)i + 1);
        x = dense(b, scope, x, hidden[i], NULL);
        tide_builder_push_scope(b, scope);
        x = tide_builder_relu(b, NULL, x);
        tide_builder_pop_scope(b);
    }
    tide_ref logits = dense(b, "fc_out", x, classes, TIDE_MODEL_LOGITS);
    return add_loss(b, logits, labels);
}

tide_ref tide_model_cnn(tide_builder *b, int64_t batch, int64_t channels, int64_t height,
                        int64_t width, int64_t classes)
{
    static const char *const names[] = {"batch", "channels", "height", "width", "classes"};
    const int64_t values[] = {batch, channels, height, width, classes};
    if (!sizes_valid(b, "tide_model_cnn", names, values, 5))
        return TIDE_REF_NONE;

    int64_t image_dims[4] = {batch, channels, height, width};
    tide_ref images =
        tide_builder_placeholder(b, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, 4, image_dims);
    tide_ref labels = labels_placeholder(b, batch);

    tide_builder_push_scope(b, "conv1");
    tide_ref x = tide_builder_relu(b, NULL, conv(b, images, 16, 3, 1, 1, true));
    x = tide_builder_max_pool2d(b, NULL, x, 2, 2, 2, 2, 0, 0);
    tide_builder_pop_scope(b);

    tide_builder_push_scope(b, "conv2");
    x = tide_builder_relu(b, NULL, conv(b, x, 32, 3, 1, 1, true));
    x = tide_builder_max_pool2d(b, NULL, x, 2, 2, 2, 2, 0, 0);
    tide_builder_pop_scope(b);

    /* Flatten whatever the pools left: [N, 32, H/4, W/4] -> [N, 32 * H/4 * W/4]. */
    int64_t flat[2] = {batch, -1};
    x = tide_builder_reshape(b, "flatten", x, 2, flat);
    x = dense(b, "fc1", x, 128, NULL);
    tide_builder_push_scope(b, "fc1");
    x = tide_builder_relu(b, NULL, x);
    tide_builder_pop_scope(b);
    tide_ref logits = dense(b, "fc_out", x, classes, TIDE_MODEL_LOGITS);
    return add_loss(b, logits, labels);
}

int32_t tide_model_resnet_depth(int32_t n)
{
    if (n < 1 || n > (INT32_MAX - 2) / 3 - 10)
        return -1;
    return 3 * (10 + n) + 2;
}

/*
 * One bottleneck block in scope `scope`: 1x1 to w, 3x3 (stride) to w, 1x1
 * to 4w, BatchNorm after each, Relu after the first two; the shortcut is a
 * projection when the block changes x's shape; then Add and Relu.
 */
static tide_ref bottleneck(tide_builder *b, const char *scope, tide_ref x, int64_t w,
                           int64_t stride)
{
    int64_t in_channels = dim_of(b, x, 1);
    tide_builder_push_scope(b, scope);
    tide_ref y = conv_bn(b, "conv1", x, w, 1, 1, 0, true);
    y = conv_bn(b, "conv2", y, w, 3, stride, 1, true);
    y = conv_bn(b, "conv3", y, 4 * w, 1, 1, 0, false);
    tide_ref shortcut = x;
    if (stride != 1 || in_channels != 4 * w)
        shortcut = conv_bn(b, "shortcut", x, 4 * w, 1, stride, 0, false);
    y = tide_builder_add(b, NULL, y, shortcut);
    y = tide_builder_relu(b, NULL, y);
    tide_builder_pop_scope(b);
    return y;
}

tide_ref tide_model_resnet(tide_builder *b, int64_t batch, int64_t channels, int64_t image_size,
                           int64_t classes, int32_t n, int64_t width)
{
    static const char *const names[] = {"batch",   "channels",    "image_size",
                                        "classes", "n (stage 3)", "width"};
    const int64_t values[] = {batch, channels, image_size, classes, n, width};
    if (!sizes_valid(b, "tide_model_resnet", names, values, 6))
        return TIDE_REF_NONE;
    if (width > (INT64_C(1) << 32) || tide_model_resnet_depth(n) < 0) {
        tide__builder_set_error(b, "tide_model_resnet: width %" PRId64 " or n %d is too large",
                                width, (int)n);
        return TIDE_REF_NONE;
    }

    int64_t image_dims[4] = {batch, channels, image_size, image_size};
    tide_ref images =
        tide_builder_placeholder(b, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, 4, image_dims);
    tide_ref labels = labels_placeholder(b, batch);

    tide_ref x;
    if (image_size >= 64) {
        x = conv_bn(b, "stem", images, width, 7, 2, 3, true);
        tide_builder_push_scope(b, "stem");
        x = tide_builder_max_pool2d(b, NULL, x, 3, 3, 2, 2, 1, 1);
        tide_builder_pop_scope(b);
    } else {
        x = conv_bn(b, "stem", images, width, 3, 1, 1, true);
    }

    const int32_t blocks[4] = {3, 4, n, 3};
    for (int s = 0; s < 4; s++) {
        char stage[32];
        snprintf(stage, sizeof(stage), "stage%d", s + 1);
        tide_builder_push_scope(b, stage);
        for (int32_t i = 0; i < blocks[s]; i++) {
            char block[32];
            snprintf(block, sizeof(block), "block%d", (int)i);
            x = bottleneck(b, block, x, width << s, s > 0 && i == 0 ? 2 : 1);
        }
        tide_builder_pop_scope(b);
    }

    x = tide_builder_global_avg_pool(b, "pool", x);
    tide_ref logits = dense(b, "fc_out", x, classes, TIDE_MODEL_LOGITS);
    return add_loss(b, logits, labels);
}

/*
 * One step of an LSTM layer in scope "t<t>" of the layer's scope: the gates
 * from x [batch, in] and, after step 0, the previous h and c [batch,
 * hidden]; writes the new h and c. w is [in + hidden, 4 * hidden], bias
 * [4 * hidden], the gates i, f, g, o in that order.
 */
static void lstm_step(tide_builder *b, int64_t t, tide_ref x, tide_ref w, tide_ref bias, int64_t in,
                      int64_t hidden, tide_ref *h, tide_ref *c)
{
    char scope[32];
    snprintf(scope, sizeof(scope), "t%" PRId64, t);
    tide_builder_push_scope(b, scope);
    tide_ref z;
    if (t == 0) {
        /* h_{-1} is zero: only w's input rows count. */
        int64_t begin[2] = {0, 0}, size[2] = {in, 4 * hidden};
        tide_ref w_in = tide_builder_slice(b, "w_in", w, begin, size, 2);
        z = tide_builder_matmul(b, NULL, x, w_in, false, false);
    } else {
        tide_ref xh[2] = {x, *h};
        z = tide_builder_matmul(b, NULL, tide_builder_concat(b, NULL, xh, 2, 1), w, false, false);
    }
    z = tide_builder_bias_add(b, "gates", z, bias);
    tide_ref gate[4];
    for (int k = 0; k < 4; k++) {
        int64_t begin[2] = {0, k * hidden}, size[2] = {-1, hidden};
        gate[k] = tide_builder_slice(b, NULL, z, begin, size, 2);
    }
    tide_ref i = tide_builder_sigmoid(b, "i", gate[0]);
    tide_ref g = tide_builder_tanh(b, "g", gate[2]);
    tide_ref o = tide_builder_sigmoid(b, "o", gate[3]);
    if (t == 0) {
        *c = tide_builder_mul(b, "c", i, g);
    } else {
        tide_ref f = tide_builder_sigmoid(b, "f", gate[1]);
        tide_ref ig = tide_builder_mul(b, NULL, i, g);
        *c = tide_builder_add(b, "c", tide_builder_mul(b, NULL, f, *c), ig);
    }
    *h = tide_builder_mul(b, "h", o, tide_builder_tanh(b, NULL, *c));
    tide_builder_pop_scope(b);
}

tide_ref tide_model_lstm(tide_builder *b, int64_t batch, int64_t seq_len, int64_t features,
                         int64_t hidden, int32_t layers, int64_t classes)
{
    static const char *const names[] = {"batch",  "seq_len", "features",
                                        "hidden", "layers",  "classes"};
    const int64_t values[] = {batch, seq_len, features, hidden, layers, classes};
    if (!sizes_valid(b, "tide_model_lstm", names, values, 6))
        return TIDE_REF_NONE;
    /* Keeps (in + hidden) * 4 * hidden and seq_len * features far from overflowing. */
    if (hidden > (INT64_C(1) << 24) || features > (INT64_C(1) << 24) ||
        seq_len > (INT64_C(1) << 24)) {
        tide__builder_set_error(b,
                                "tide_model_lstm: hidden %" PRId64 ", features %" PRId64
                                " or seq_len %" PRId64 " is over the limit of %" PRId64,
                                hidden, features, seq_len, INT64_C(1) << 24);
        return TIDE_REF_NONE;
    }

    int64_t image_dims[4] = {batch, 1, seq_len, features}, flat[2] = {batch, seq_len * features};
    tide_ref images =
        tide_builder_placeholder(b, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, 4, image_dims);
    tide_ref labels = labels_placeholder(b, batch);
    tide_ref sequence = tide_builder_reshape(b, "sequence", images, 2, flat);

    /* The forget gate's bias starts at 1, the others at 0. */
    float *bias_init = calloc((size_t)(4 * hidden), sizeof(float));
    /* h of the layer below at every step; the steps' inputs for layer 1. */
    tide_ref *xs = malloc((size_t)seq_len * sizeof(*xs));
    if (!bias_init || !xs) {
        free(bias_init);
        free(xs);
        tide__builder_set_error(b, "tide_model_lstm: out of memory for %" PRId64 " steps", seq_len);
        return TIDE_REF_NONE;
    }
    for (int64_t j = hidden; j < 2 * hidden; j++)
        bias_init[j] = 1.0f;
    tide_builder_push_scope(b, "input");
    for (int64_t t = 0; t < seq_len; t++) {
        int64_t begin[2] = {0, t * features}, size[2] = {-1, features};
        xs[t] = tide_builder_slice(b, NULL, sequence, begin, size, 2);
    }
    tide_builder_pop_scope(b);

    tide_ref h = TIDE_REF_NONE;
    for (int32_t l = 0; l < layers; l++) {
        int64_t in = l == 0 ? features : hidden;
        int64_t w_dims[2] = {in + hidden, 4 * hidden}, b_dims[1] = {4 * hidden};
        char scope[32];
        snprintf(scope, sizeof(scope), "lstm%d", (int)l + 1);
        tide_builder_push_scope(b, scope);
        tide_ref w = tide_builder_variable(b, "w", 2, w_dims, "uniform",
                                           (float)(1.0 / sqrt((double)hidden)), true);
        tide_ref bias = tide_builder_variable_value(b, "b", 1, b_dims, bias_init);
        tide_ref c = TIDE_REF_NONE;
        h = TIDE_REF_NONE;
        for (int64_t t = 0; t < seq_len; t++) {
            lstm_step(b, t, xs[t], w, bias, in, hidden, &h, &c);
            xs[t] = h;
        }
        tide_builder_pop_scope(b);
    }
    free(bias_init);
    free(xs);
    tide_ref logits = dense(b, "fc_out", h, classes, TIDE_MODEL_LOGITS);
    return add_loss(b, logits, labels);
}
