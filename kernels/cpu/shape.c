/* SPDX-License-Identifier: MIT */
/*
 * shape.c: CPU kernels that move elements without arithmetic: Identity,
 * Reshape, Concat, Slice and SliceGrad.
 *
 * These ops keep input 0's dtype (the SAME rule of ops.def), so they work on
 * bytes with the element size of the view's dtype and serve int32 tensors
 * (labels) as well as float32 ones. The output is always a separate region
 * from the inputs.
 */
#include "kernels/cpu/cpu-impl.h"

#include <inttypes.h>
#include <string.h>

/* Identity and Reshape: the same bytes, a new region. */
static enum tide_status copy_input(const struct tide_kernel_args *args, struct tide_error *err)
{
    enum tide_status st = tide__cpu_expect_same_size(args, 0, err);
    if (st != TIDE_OK)
        return st;
    if (args->outputs[0].nbytes > 0 && args->outputs[0].data != args->inputs[0].data)
        memcpy(args->outputs[0].data, args->inputs[0].data, args->outputs[0].nbytes);
    return TIDE_OK;
}

enum tide_status tide__cpu_IDENTITY(const struct tide_kernel_args *args, struct tide_error *err)
{
    return copy_input(args, err);
}

enum tide_status tide__cpu_RESHAPE(const struct tide_kernel_args *args, struct tide_error *err)
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

/*
 * Concat(x0, x1, ...; axis): for each index of the axes before `axis`, the
 * inputs' blocks are copied one after the other.
 */
enum tide_status tide__cpu_CONCAT(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *ys = &args->outputs[0].shape;
    size_t esize;
    int32_t axis;
    enum tide_status st = element_size(args, &esize, err);
    if (st == TIDE_OK)
        st = tide__kernel_axis(args, "axis", args->node->attrs[TIDE_ATTR_CONCAT_axis].i, ys, &axis,
                            err);
    if (st != TIDE_OK)
        return st;
    int64_t outer, len, inner;
    tide__kernel_split_axis(ys, axis, &outer, &len, &inner);

    /* Each input must match the output except along axis, and the lengths must add up. */
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

    char *dst = args->outputs[0].data;
    for (int64_t o = 0; o < outer; o++) {
        for (uint32_t i = 0; i < args->n_inputs; i++) {
            size_t block = (size_t)(args->inputs[i].shape.dims[axis] * inner) * esize;
            if (block == 0)
                continue;
            memcpy(dst, (const char *)args->inputs[i].data + (size_t)o * block, block);
            dst += block;
        }
    }
    return TIDE_OK;
}

/*
 * Copies a box of box[] elements per axis from src (dims src_dims) starting
 * at src_begin to dst (dims dst_dims) starting at dst_begin. The trailing
 * axes that the box covers fully in both tensors are merged into one
 * contiguous memcpy per row.
 */
static void copy_box(char *dst, const int64_t *dst_dims, const int64_t *dst_begin, const char *src,
                     const int64_t *src_dims, const int64_t *src_begin, const int64_t *box,
                     int32_t rank, size_t esize)
{
    for (int32_t d = 0; d < rank; d++) {
        if (box[d] == 0)
            return;
    }
    /* Byte strides of both tensors. */
    size_t src_stride[TIDE_MAX_RANK], dst_stride[TIDE_MAX_RANK];
    size_t ss = esize, ds = esize;
    for (int32_t d = rank - 1; d >= 0; d--) {
        src_stride[d] = ss;
        dst_stride[d] = ds;
        ss *= (size_t)src_dims[d];
        ds *= (size_t)dst_dims[d];
    }
    const char *s = src;
    char *t = dst;
    for (int32_t d = 0; d < rank; d++) {
        s += (size_t)src_begin[d] * src_stride[d];
        t += (size_t)dst_begin[d] * dst_stride[d];
    }
    /* Axes first..rank-1 form one contiguous row in both tensors. */
    int32_t first = rank;
    size_t row = esize;
    while (first > 0) {
        row *= (size_t)box[first - 1];
        first--;
        if (box[first] != src_dims[first] || box[first] != dst_dims[first])
            break;
    }
    int64_t rows = 1;
    for (int32_t d = 0; d < first; d++)
        rows *= box[d];
    int64_t index[TIDE_MAX_RANK] = {0};
    for (int64_t r = 0; r < rows; r++) {
        memcpy(t, s, row);
        for (int32_t d = first - 1; d >= 0; d--) {
            s += src_stride[d];
            t += dst_stride[d];
            if (++index[d] < box[d])
                break;
            index[d] = 0;
            s -= src_stride[d] * (size_t)box[d];
            t -= dst_stride[d] * (size_t)box[d];
        }
    }
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
enum tide_status tide__cpu_SLICE(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape, *ys = &args->outputs[0].shape;
    size_t esize;
    enum tide_status st = element_size(args, &esize, err);
    if (st == TIDE_OK)
        st = check_box(args, TIDE_ATTR_SLICE_begin, xs, ys, err);
    if (st != TIDE_OK)
        return st;
    static const int64_t zeros[TIDE_MAX_RANK] = {0};
    const int64_t *begin = args->node->attrs[TIDE_ATTR_SLICE_begin].ints.v;
    copy_box(args->outputs[0].data, ys->dims, zeros, args->inputs[0].data, xs->dims, begin,
             ys->dims, ys->rank, esize);
    return TIDE_OK;
}

/* SliceGrad(dy; begin, shape): zeros of shape with dy placed at begin. */
enum tide_status tide__cpu_SLICE_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *dys = &args->inputs[0].shape, *dxs = &args->outputs[0].shape;
    size_t esize;
    enum tide_status st = element_size(args, &esize, err);
    if (st == TIDE_OK)
        st = check_box(args, TIDE_ATTR_SLICE_GRAD_begin, dxs, dys, err);
    if (st != TIDE_OK)
        return st;
    if (args->outputs[0].nbytes > 0)
        memset(args->outputs[0].data, 0, args->outputs[0].nbytes);
    static const int64_t zeros[TIDE_MAX_RANK] = {0};
    const int64_t *begin = args->node->attrs[TIDE_ATTR_SLICE_GRAD_begin].ints.v;
    copy_box(args->outputs[0].data, dxs->dims, begin, args->inputs[0].data, dys->dims, zeros,
             dys->dims, dys->rank, esize);
    return TIDE_OK;
}
