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

#include <string.h>

/* Identity and Reshape: the same bytes, a new region. */
static enum tide_status copy_input(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_same_size(args, 0);
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

/*
 * Concat(x0, x1, ...; axis): for each index of the axes before `axis`, the
 * inputs' blocks are copied one after the other.
 */
enum tide_status tide__cpu_CONCAT(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *ys = &args->outputs[0].shape;
    size_t esize = tide__kernel_element_size(args);
    int32_t axis = tide__kernel_concat_axis(args);
    int64_t outer, len, inner;
    tide__kernel_split_axis(ys, axis, &outer, &len, &inner);

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

/* Slice(x; begin, size): the output view's dims are the normalised sizes. */
enum tide_status tide__cpu_SLICE(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape, *ys = &args->outputs[0].shape;
    size_t esize = tide__kernel_element_size(args);
    tide__kernel_check_box(args, TIDE_ATTR_SLICE_begin, xs, ys);
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
    size_t esize = tide__kernel_element_size(args);
    tide__kernel_check_box(args, TIDE_ATTR_SLICE_GRAD_begin, dxs, dys);
    if (args->outputs[0].nbytes > 0)
        memset(args->outputs[0].data, 0, args->outputs[0].nbytes);
    static const int64_t zeros[TIDE_MAX_RANK] = {0};
    const int64_t *begin = args->node->attrs[TIDE_ATTR_SLICE_GRAD_begin].ints.v;
    copy_box(args->outputs[0].data, dxs->dims, begin, args->inputs[0].data, dys->dims, zeros,
             dys->dims, dys->rank, esize);
    return TIDE_OK;
}
