/* SPDX-License-Identifier: MIT */
/*
 * shape.c: the host half of the CUDA kernels that move elements without
 * arithmetic: Identity, Reshape, Concat, Slice and SliceGrad. They keep
 * input 0's dtype, so they work with the element size of the view's dtype
 * and serve int32 tensors as well as float32 ones, as on the CPU
 * (kernels/cpu/shape.c).
 *
 * Identity and Reshape are one cudaMemcpyAsync; Concat is one
 * cudaMemcpy2DAsync per input (rows of the input's block, pitched in the
 * output); Slice and SliceGrad copy a box with the kernel of shape.cu.
 */
#include "kernels/cuda/cuda-impl.h"

#include <inttypes.h>

/* The largest pitch this file hands to cudaMemcpy2DAsync; wider rows go through copy_box. */
#define MAX_PITCH ((uint64_t)1 << 30)

/* Identity and Reshape: the same bytes, a new region. */
static enum tide_status copy_input(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = tide__cuda_expect_same_size(args, 0, err);
    if (st != TIDE_OK || args->outputs[0].nbytes == 0 ||
        args->outputs[0].data == args->inputs[0].data)
        return st;
    return TIDE_CUDA_CHECK(err, cudaMemcpyAsync(args->outputs[0].data, args->inputs[0].data,
                                                args->outputs[0].nbytes, cudaMemcpyDeviceToDevice,
                                                launch->stream));
}

enum tide_status tide__cuda_IDENTITY(const struct tide_kernel_args *args, struct tide_error *err)
{
    return copy_input(args, err);
}

enum tide_status tide__cuda_RESHAPE(const struct tide_kernel_args *args, struct tide_error *err)
{
    return copy_input(args, err);
}

/* The element size of output 0's dtype, or a refusal for an unknown dtype. */
static enum tide_status element_size(const struct tide_kernel_args *args, size_t *size,
                                     struct tide_error *err)
{
    *size = tide_dtype_size(args->outputs[0].dtype);
    if (*size == 0)
        return tide_node_error(err, TIDE_INVALID, args->node, "output 0 has invalid dtype %d",
                               (int)args->outputs[0].dtype);
    return TIDE_OK;
}

/* A box of src (dims src_dims, from src_begin) onto dst (dims dst_dims, at dst_begin). */
static struct tide__cuda_box make_box(int32_t rank, const int64_t *box, const int64_t *src_dims,
                                      const int64_t *src_begin, const int64_t *dst_dims,
                                      const int64_t *dst_begin)
{
    struct tide__cuda_box b = {.rank = rank};
    for (int32_t d = 0; d < rank; d++) {
        b.box[d] = box[d];
        b.src_dims[d] = src_dims[d];
        b.src_begin[d] = src_begin[d];
        b.dst_dims[d] = dst_dims[d];
        b.dst_begin[d] = dst_begin[d];
    }
    return b;
}

/*
 * Concat(x0, x1, ...; axis): for each index of the axes before axis, the
 * inputs' blocks lie one after the other in the output.
 */
enum tide_status tide__cuda_CONCAT(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *ys = &args->outputs[0].shape;
    size_t esize;
    int32_t axis;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = element_size(args, &esize, err);
    if (st == TIDE_OK)
        st = tide__kernel_axis(args, "axis", args->node->attrs[TIDE_ATTR_CONCAT_axis].i, ys, &axis,
                             err);
    if (st != TIDE_OK)
        return st;
    int64_t outer, len, inner;
    tide__kernel_split_axis(ys, axis, &outer, &len, &inner);

    int64_t sum = 0;
    for (uint32_t i = 0; i < args->n_inputs; i++) {
        const struct tide_shape *xs = &args->inputs[i].shape;
        bool fits = xs->rank == ys->rank;
        for (int32_t d = 0; fits && d < ys->rank; d++)
            fits = d == axis || xs->dims[d] == ys->dims[d];
        if (!fits)
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "input %u does not match the output except along axis %d", i,
                                   axis);
        sum += xs->dims[axis];
    }
    if (sum != len)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "the inputs add up to %" PRId64
                               " along axis %d, the output has %" PRId64,
                               sum, axis, len);
    if (outer == 0)
        return TIDE_OK;

    uint64_t pitch = (uint64_t)(len * inner) * esize, offset = 0;
    for (uint32_t i = 0; i < args->n_inputs && st == TIDE_OK; i++) {
        const struct tide_shape *xs = &args->inputs[i].shape;
        uint64_t width = (uint64_t)(xs->dims[axis] * inner) * esize;
        char *dst = (char *)args->outputs[0].data + offset;
        if (width == 0)
            continue;
        if (outer == 1) {
            st = TIDE_CUDA_CHECK(err, cudaMemcpyAsync(dst, args->inputs[i].data, width,
                                                      cudaMemcpyDeviceToDevice, launch->stream));
        } else if (pitch <= MAX_PITCH) {
            st = TIDE_CUDA_CHECK(err, cudaMemcpy2DAsync(dst, pitch, args->inputs[i].data, width,
                                                        width, (size_t)outer,
                                                        cudaMemcpyDeviceToDevice, launch->stream));
        } else {
            int64_t zeros[TIDE_MAX_RANK] = {0}, at[TIDE_MAX_RANK] = {0};
            at[axis] = (int64_t)(offset / esize / (uint64_t)inner);
            struct tide__cuda_box box = make_box(ys->rank, xs->dims, xs->dims, zeros, ys->dims, at);
            st = TIDE_CUDA_CHECK(err,
                                 tide__cuda_launch_copy_box(launch->stream, args->outputs[0].data,
                                                            args->inputs[i].data, &box, esize));
        }
        offset += width;
    }
    return st;
}

/*
 * Checks that begin (the INTS attribute k) holds one entry per axis of outer
 * and that the box of inner's dims placed at begin lies inside outer.
 */
static enum tide_status check_box(const struct tide_kernel_args *args, int k,
                                  const struct tide_shape *outer, const struct tide_shape *inner,
                                  struct tide_error *err)
{
    const struct tide_attr_value *begin = &args->node->attrs[k];
    if (begin->ints.n != outer->rank || inner->rank != outer->rank)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "attribute \"begin\" has %d entries, wants %d (one per axis)",
                               begin->ints.n, outer->rank);
    for (int32_t d = 0; d < outer->rank; d++) {
        int64_t b = begin->ints.v[d];
        if (b < 0 || b > outer->dims[d] || inner->dims[d] > outer->dims[d] - b)
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "begin %" PRId64 " + size %" PRId64 " exceeds dimension %" PRId64
                                   " at axis %d",
                                   b, inner->dims[d], outer->dims[d], d);
    }
    return TIDE_OK;
}

/* Slice(x; begin, size): the output view's dims are the normalised sizes. */
enum tide_status tide__cuda_SLICE(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *xs = &args->inputs[0].shape, *ys = &args->outputs[0].shape;
    size_t esize;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = element_size(args, &esize, err);
    if (st == TIDE_OK)
        st = check_box(args, TIDE_ATTR_SLICE_begin, xs, ys, err);
    if (st != TIDE_OK)
        return st;
    static const int64_t zeros[TIDE_MAX_RANK] = {0};
    struct tide__cuda_box box =
        make_box(ys->rank, ys->dims, xs->dims, args->node->attrs[TIDE_ATTR_SLICE_begin].ints.v,
                 ys->dims, zeros);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_copy_box(launch->stream, args->outputs[0].data,
                                                           args->inputs[0].data, &box, esize));
}

/* SliceGrad(dy; begin, shape): zeros of shape with dy placed at begin. */
enum tide_status tide__cuda_SLICE_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *dys = &args->inputs[0].shape, *dxs = &args->outputs[0].shape;
    size_t esize;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = element_size(args, &esize, err);
    if (st == TIDE_OK)
        st = check_box(args, TIDE_ATTR_SLICE_GRAD_begin, dxs, dys, err);
    if (st != TIDE_OK)
        return st;
    if (args->outputs[0].nbytes > 0)
        st = TIDE_CUDA_CHECK(err, cudaMemsetAsync(args->outputs[0].data, 0, args->outputs[0].nbytes,
                                                  launch->stream));
    if (st != TIDE_OK)
        return st;
    static const int64_t zeros[TIDE_MAX_RANK] = {0};
    struct tide__cuda_box box = make_box(dys->rank, dys->dims, dys->dims, zeros, dxs->dims,
                                         args->node->attrs[TIDE_ATTR_SLICE_GRAD_begin].ints.v);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_copy_box(launch->stream, args->outputs[0].data,
                                                           args->inputs[0].data, &box, esize));
}
