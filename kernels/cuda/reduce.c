/* SPDX-License-Identifier: MIT */
/*
 * reduce.c: the host half of the CUDA kernels that sum over a set of axes:
 * ReduceSum, ReduceMean, SumToShape and BiasAddGrad. Each works out which
 * axes it reduces with the helpers the CPU kernels use (kernels/check.c),
 * then hands one plan (common.c) to the device half
 * (reduce.cu), which sums in double in a fixed order.
 */
#include "kernels/cuda/cuda-impl.h"

#include <assert.h>
#include <inttypes.h>

/* A float NaN, what the CPU's NAN is: the mean of no elements. */
#define NAN_BITS 0x7fc00000u

/*
 * Sums input 0 over the axes marked in reduced into output 0, divided by
 * divisor unless it is 0; infer made the output one element per combination
 * of kept dims.
 */
static enum tide_status reduce_into_output(const struct tide_kernel_args *args, const bool *reduced,
                                           double divisor, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape *xs = &args->inputs[0].shape;
    (void)tide__kernel_reduce_output(args, reduced);
    struct tide__cuda_reduce plan;
    tide__cuda_reduce_plan(&plan, xs, reduced);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_reduce(launch->stream, tide__cuda_in(args, 0),
                                                         tide__cuda_out(args, 0), &plan, divisor));
}


enum tide_status tide__cuda_REDUCE_SUM(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool reduced[TIDE_MAX_RANK];
    (void)tide__kernel_reduce_mask(args, TIDE_ATTR_REDUCE_SUM_axes, reduced);
    return reduce_into_output(args, reduced, 0, err);
}

/* The mean of no elements is 0 / 0, NaN, as in NumPy and on the CPU. */
enum tide_status tide__cuda_REDUCE_MEAN(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool reduced[TIDE_MAX_RANK];
    double count = tide__kernel_reduce_mask(args, TIDE_ATTR_REDUCE_MEAN_axes, reduced);
    if (count == 0) {
        struct tide_cuda_launch *launch;
        enum tide_status st = tide__cuda_context(args, &launch, err);
        if (st != TIDE_OK)
            return st;
        int64_t n = tide__cuda_numel(&args->outputs[0]);
        return TIDE_CUDA_CHECK(
            err, tide_cuda_fill32(args->outputs[0].data, NAN_BITS, (uint64_t)n, launch->stream));
    }
    return reduce_into_output(args, reduced, count, err);
}

/*
 * SumToShape(x; shape): sums x over the axes along which shape (the output,
 * its trailing axes aligned with x's) was broadcast.
 */
enum tide_status tide__cuda_SUM_TO_SHAPE(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    bool reduced[TIDE_MAX_RANK];
    tide__kernel_sum_to_shape_mask(args, reduced);
    return reduce_into_output(args, reduced, 0, err);
}

/* BiasAddGrad(dy [N, C, ...]) -> [C]: the sum over every axis but 1. */
enum tide_status tide__cuda_BIAS_ADD_GRAD(const struct tide_kernel_args *args,
                                          struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    assert(xs->rank >= 2);
    bool reduced[TIDE_MAX_RANK];
    for (int32_t d = 0; d < xs->rank; d++)
        reduced[d] = d != 1;
    return reduce_into_output(args, reduced, 0, err);
}

/* GlobalAvgPool(x [N, C, H, W]) -> [N, C]: the mean of each plane, a sum over H and W. */
enum tide_status tide__cuda_GLOBAL_AVG_POOL(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    assert(xs->rank == 4 && tide__cuda_numel(&args->outputs[0]) == xs->dims[0] * xs->dims[1]);
    int64_t hw = xs->dims[2] * xs->dims[3];
    if (hw == 0) {
        /* The mean of an empty plane: 0 / 0 on the CPU too. */
        struct tide_cuda_launch *launch;
        enum tide_status st = tide__cuda_context(args, &launch, err);
        if (st != TIDE_OK)
            return st;
        return TIDE_CUDA_CHECK(err, tide_cuda_fill32(args->outputs[0].data, NAN_BITS,
                                                     (uint64_t)(xs->dims[0] * xs->dims[1]),
                                                     launch->stream));
    }
    static const bool reduced[4] = {false, false, true, true};
    return reduce_into_output(args, reduced, (double)hw, err);
}

/* GlobalAvgPoolGrad(dy [N, C]; input_shape) -> dx [N, C, H, W] = dy / (H * W) on every cell. */
enum tide_status tide__cuda_GLOBAL_AVG_POOL_GRAD(const struct tide_kernel_args *args,
                                                 struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape *xs = &args->outputs[0].shape;
    assert(xs->rank == 4 && tide__cuda_numel(&args->inputs[0]) == xs->dims[0] * xs->dims[1]);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_spread(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_out(args, 0),
                                    xs->dims[0] * xs->dims[1], xs->dims[2] * xs->dims[3]));
}
