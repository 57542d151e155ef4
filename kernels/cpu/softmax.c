/* SPDX-License-Identifier: MIT */
/*
 * softmax.c: CPU kernels for Softmax, SoftmaxGrad, SoftmaxCrossEntropy and
 * SoftmaxCrossEntropyGrad.
 *
 * Softmax subtracts the maximum of each lane before exponentiating, so large
 * logits do not overflow; sums are accumulated in double. A lane is the run
 * of elements along the softmax axis: contiguous when the axis is the last
 * one (the common case), strided by the product of the later dims otherwise.
 *
 * The cross-entropy kernels check every label before they write anything;
 * a label outside [0, C) is refused with a message naming the node, the
 * example and the label, since it usually means the data set and the model
 * disagree on the number of classes.
 */
#include "kernels/cpu/cpu-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>

/* The maximum of a lane of len elements, stride apart. */
static float lane_max(const float *x, int64_t len, int64_t stride)
{
    float m = -INFINITY;
    for (int64_t j = 0; j < len; j++) {
        float v = x[j * stride];
        m = v > m ? v : m;
    }
    return m;
}

/* y = softmax(x) along one lane. */
static void softmax_lane(const float *x, float *y, int64_t len, int64_t stride)
{
    float m = lane_max(x, len, stride);
    double sum = 0;
    for (int64_t j = 0; j < len; j++) {
        float e = expf(x[j * stride] - m);
        y[j * stride] = e;
        sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < len; j++)
        y[j * stride] *= inv;
}

enum tide_status tide__cpu_SOFTMAX(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    tide__kernel_same_size(args, 0);
    int32_t axis = tide__kernel_axis(args->node->attrs[TIDE_ATTR_SOFTMAX_axis].i, xs);
    int64_t outer, len, inner;
    tide__kernel_split_axis(xs, axis, &outer, &len, &inner);
    const float *x = tide__cpu_in(args, 0);
    float *y = tide__cpu_out(args, 0);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            softmax_lane(x + base, y + base, len, inner);
        }
    }
    return TIDE_OK;
}

/* SoftmaxGrad(dy, y; axis): dx = y * (dy - sum(dy * y)) along axis. */
enum tide_status tide__cpu_SOFTMAX_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *ys = &args->inputs[1].shape;
    tide__kernel_same_size(args, 0);
    tide__kernel_same_size(args, 1);
    int32_t axis = tide__kernel_axis(args->node->attrs[TIDE_ATTR_SOFTMAX_GRAD_axis].i, ys);
    int64_t outer, len, inner;
    tide__kernel_split_axis(ys, axis, &outer, &len, &inner);
    const float *dy = tide__cpu_in(args, 0), *y = tide__cpu_in(args, 1);
    float *dx = tide__cpu_out(args, 0);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double dot = 0;
            for (int64_t j = 0; j < len; j++)
                dot += (double)dy[base + j * inner] * y[base + j * inner];
            float d = (float)dot;
            for (int64_t j = 0; j < len; j++) {
                int64_t k = base + j * inner;
                dx[k] = y[k] * (dy[k] - d);
            }
        }
    }
    return TIDE_OK;
}

/*
 * Checks logits [N, C] against labels [N] and every label against [0, C);
 * sets n and c.
 */
static enum tide_status check_labels(const struct tide_kernel_args *args, int64_t *n, int64_t *c,
                                     struct tide_error *err)
{
    const struct tide_shape *ls = &args->inputs[0].shape;
    /* Infer guarantees logits [N, C] and int32 labels [N]; only the labels' values are data. */
    assert(ls->rank == 2 && args->inputs[1].dtype == TIDE_DTYPE_INT32 &&
           tide__cpu_numel(&args->inputs[1]) == ls->dims[0]);
    *n = ls->dims[0];
    *c = ls->dims[1];
    const int32_t *labels = args->inputs[1].data;
    for (int64_t i = 0; i < *n; i++) {
        if (labels[i] < 0 || labels[i] >= *c)
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "label %" PRId32 " of example %" PRId64
                                   " is out of range [0, %" PRId64 ")",
                                   labels[i], i, *c);
    }
    return TIDE_OK;
}

/* SoftmaxCrossEntropy(logits, labels) -> loss[n] = logsumexp(logits[n]) - logits[n][label]. */
enum tide_status tide__cpu_SOFTMAX_CROSS_ENTROPY(const struct tide_kernel_args *args,
                                                 struct tide_error *err)
{
    int64_t n, c;
    enum tide_status st = check_labels(args, &n, &c, err);
    if (st != TIDE_OK)
        return st;
    const float *logits = tide__cpu_in(args, 0);
    const int32_t *labels = args->inputs[1].data;
    float *loss = tide__cpu_out(args, 0);
    for (int64_t i = 0; i < n; i++) {
        const float *x = logits + i * c;
        float m = lane_max(x, c, 1);
        double sum = 0;
        for (int64_t j = 0; j < c; j++)
            sum += expf(x[j] - m);
        loss[i] = (float)((double)m + log(sum) - (double)x[labels[i]]);
    }
    return TIDE_OK;
}

/*
 * SoftmaxCrossEntropyGrad(logits, labels, dloss) ->
 * dlogits[n, c] = dloss[n] * (softmax(logits[n])[c] - (c == label[n])).
 */
enum tide_status tide__cpu_SOFTMAX_CROSS_ENTROPY_GRAD(const struct tide_kernel_args *args,
                                                      struct tide_error *err)
{
    int64_t n, c;
    enum tide_status st = check_labels(args, &n, &c, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    assert(tide__cpu_numel(&args->inputs[2]) == n);
    const float *logits = tide__cpu_in(args, 0), *dloss = tide__cpu_in(args, 2);
    const int32_t *labels = args->inputs[1].data;
    float *dx = tide__cpu_out(args, 0);
    for (int64_t i = 0; i < n; i++) {
        softmax_lane(logits + i * c, dx + i * c, c, 1);
        float g = dloss[i];
        float *row = dx + i * c;
        row[labels[i]] -= 1.0f;
        for (int64_t j = 0; j < c; j++)
            row[j] *= g;
    }
    return TIDE_OK;
}
