/* SPDX-License-Identifier: MIT */
/*
 * layernorm.c: the host half of LayerNorm and LayerNormGrad on CUDA, over the
 * last axis of x (rows of D elements). The checks are the CPU kernels'
 * (kernels/layernorm.h); the device half (layernorm.cu) gives each row one
 * block and sums in double, and sums dgain and dbias with one thread per
 * column in row order.
 */
#include "kernels/cuda/norm-seq.h"
#include "kernels/layernorm.h"

/* LayerNorm(x, gain, bias; epsilon) -> y, mean, inv_std (one per row). */
enum tide_status tide__cuda_LAYER_NORM(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    struct tide__layer_norm_rows g = tide__layer_norm_setup(args, 0);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_layer_norm(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                                    tide__cuda_in(args, 2), tide__cuda_out(args, 0),
                                    tide__cuda_out(args, 1), tide__cuda_out(args, 2), g.rows, g.d,
                                    args->node->attrs[TIDE_ATTR_LAYER_NORM_epsilon].f));
}

/* LayerNormGrad(dy, x, gain, mean, inv_std) -> dx, dgain, dbias; formulas: kernels/cpu/layernorm.c.
 */
enum tide_status tide__cuda_LAYER_NORM_GRAD(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    struct tide__layer_norm_rows g = tide__layer_norm_setup(args, 1);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_layer_norm_grad(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                                    tide__cuda_in(args, 2), tide__cuda_in(args, 3),
                                    tide__cuda_in(args, 4), tide__cuda_out(args, 0),
                                    tide__cuda_out(args, 1), tide__cuda_out(args, 2), g.rows, g.d));
}
