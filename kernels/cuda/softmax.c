/* SPDX-License-Identifier: MIT */
/*
 * softmax.c: the host half of Softmax, SoftmaxGrad, SoftmaxCrossEntropy and
 * SoftmaxCrossEntropyGrad on CUDA (device half: softmax.cu).
 *
 * The CPU kernels refuse a label outside [0, C) before they write anything.
 * Here the labels are on the device, so the cross-entropy kernels enqueue a
 * check first that writes the first bad label into the stream's fault
 * record; the backend turns it into the stream's error at stream_sync, with
 * the node's name, the example and the label, as the CPU's message does.
 */
#include "kernels/cuda/cuda-impl.h"

#include <assert.h>

enum tide_status tide__cuda_SOFTMAX(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *xs = &args->inputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    int32_t axis = tide__kernel_axis(args->node->attrs[TIDE_ATTR_SOFTMAX_axis].i, xs);
    int64_t outer, len, inner;
    tide__kernel_split_axis(xs, axis, &outer, &len, &inner);
    return TIDE_CUDA_CHECK(err,
                           tide__cuda_launch_softmax(launch->stream, tide__cuda_in(args, 0),
                                                     tide__cuda_out(args, 0), outer, len, inner));
}

/* SoftmaxGrad(dy, y; axis): dx = y * (dy - sum(dy * y)) along axis. */
enum tide_status tide__cuda_SOFTMAX_GRAD(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *ys = &args->inputs[1].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    tide__kernel_same_size(args, 1);
    int32_t axis = tide__kernel_axis(args->node->attrs[TIDE_ATTR_SOFTMAX_GRAD_axis].i, ys);
    int64_t outer, len, inner;
    tide__kernel_split_axis(ys, axis, &outer, &len, &inner);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_softmax_grad(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                                    tide__cuda_out(args, 0), outer, len, inner));
}

/* Logits [N, C] and int32 labels [N], as infer guarantees; sets n and c. */
static void labels_shape(const struct tide_kernel_args *args, int64_t *n, int64_t *c)
{
    const struct tide_shape *ls = &args->inputs[0].shape;
    assert(ls->rank == 2 && args->inputs[1].dtype == TIDE_DTYPE_INT32 &&
           tide__cuda_numel(&args->inputs[1]) == ls->dims[0]);
    *n = ls->dims[0];
    *c = ls->dims[1];
}

/* Enqueues the check of every label against [0, c) into the stream's fault record. */
static enum tide_status labels_check(const struct tide_kernel_args *args,
                                     struct tide_cuda_launch *launch, int64_t n, int64_t c,
                                     struct tide_error *err)
{
    if (!launch->fault || n == 0)
        return TIDE_OK;
    enum tide_status st =
        TIDE_CUDA_CHECK(err, tide__cuda_launch_check_labels(launch->stream, args->inputs[1].data, n,
                                                            c, launch->fault, launch->tag));
    if (st == TIDE_OK)
        launch->fault_armed = true;
    return st;
}

/* SoftmaxCrossEntropy(logits, labels) -> loss[n] = logsumexp(logits[n]) - logits[n][label]. */
enum tide_status tide__cuda_SOFTMAX_CROSS_ENTROPY(const struct tide_kernel_args *args,
                                                  struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    int64_t n, c;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    labels_shape(args, &n, &c);
    st = labels_check(args, launch, n, c, err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_softmax_xent(launch->stream, tide__cuda_in(args, 0),
                                            args->inputs[1].data, tide__cuda_out(args, 0), n, c));
}

/*
 * SoftmaxCrossEntropyGrad(logits, labels, dloss) ->
 * dlogits[n, c] = dloss[n] * (softmax(logits[n])[c] - (c == label[n])).
 */
enum tide_status tide__cuda_SOFTMAX_CROSS_ENTROPY_GRAD(const struct tide_kernel_args *args,
                                                       struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    int64_t n, c;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    labels_shape(args, &n, &c);
    tide__kernel_same_size(args, 0);
    assert(tide__cuda_numel(&args->inputs[2]) == n);
    st = labels_check(args, launch, n, c, err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_softmax_xent_grad(
                                    launch->stream, tide__cuda_in(args, 0), args->inputs[1].data,
                                    tide__cuda_in(args, 2), tide__cuda_out(args, 0), n, c));
}
