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
    tide__kernel_same_size(args, 0);
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
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    size_t esize = tide__kernel_element_size(args);
    int32_t axis = tide__kernel_concat_axis(args);
    int64_t outer, len, inner;
    tide__kernel_split_axis(ys, axis, &outer, &len, &inner);
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

/* Slice(x; begin, size): the output view's dims are the normalised sizes. */
enum tide_status tide__cuda_SLICE(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *xs = &args->inputs[0].shape, *ys = &args->outputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    size_t esize = tide__kernel_element_size(args);
    tide__kernel_check_box(args, TIDE_ATTR_SLICE_begin, xs, ys);
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
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    size_t esize = tide__kernel_element_size(args);
    tide__kernel_check_box(args, TIDE_ATTR_SLICE_GRAD_begin, dxs, dys);
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
