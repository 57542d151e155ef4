/* SPDX-License-Identifier: MIT */
/*
 * norm.c: the host half of BatchNorm (training mode) and BatchNormGrad on
 * CUDA, over x [N, C, H, W] or [N, C] with statistics per channel over N, H
 * and W. The checks are the CPU kernels' (kernels/cpu/norm.c); the device
 * half (reduce.cu) gives each channel one block and sums in double.
 */
#include "kernels/cuda/cuda-impl.h"

/* BatchNorm(x, gamma, beta; epsilon) -> y, mean [C], inv_std [C]. */
enum tide_status tide__cuda_BATCH_NORM(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_batch b;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_batch_setup(args, 0, &b);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_batch_norm(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                                    tide__cuda_in(args, 2), tide__cuda_out(args, 0),
                                    tide__cuda_out(args, 1), tide__cuda_out(args, 2), b.n, b.c,
                                    b.hw, args->node->attrs[TIDE_ATTR_BATCH_NORM_epsilon].f));
}

/* BatchNormGrad(dy, x, gamma, mean, inv_std) -> dx, dgamma, dbeta; formulas: kernels/cpu/norm.c. */
enum tide_status tide__cuda_BATCH_NORM_GRAD(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_batch b;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_batch_setup(args, 1, &b);
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_batch_norm_grad(launch->stream, tide__cuda_in(args, 0),
                                               tide__cuda_in(args, 1), tide__cuda_in(args, 2),
                                               tide__cuda_in(args, 3), tide__cuda_in(args, 4),
                                               tide__cuda_out(args, 0), tide__cuda_out(args, 1),
                                               tide__cuda_out(args, 2), b.n, b.c, b.hw));
}
