/* SPDX-License-Identifier: MIT */
/*
 * pool.c: the host half of MaxPool2D, AvgPool2D and their gradients on CUDA
 * (device half and the reasons for custom kernels: pool.cu). The geometry
 * is the CPU kernels' (kernels/check.c).
 */
#include "kernels/cuda/cuda-impl.h"

/* The shared geometry (kernels/check.c), in the device launchers' struct. */
static void pool_setup(const struct tide_node *node, const struct tide_shape *x,
                       const struct tide_shape *y, struct tide__cuda_pool *p)
{
    struct tide__kernel_pool g;
    tide__kernel_pool_setup(node, x, y, &g);
    *p = (struct tide__cuda_pool){.planes = g.planes,
                                  .h = g.h,
                                  .w = g.w,
                                  .oh = g.oh,
                                  .ow = g.ow,
                                  .kh = g.kh,
                                  .kw = g.kw,
                                  .sh = g.sh,
                                  .sw = g.sw,
                                  .ph = g.ph,
                                  .pw = g.pw};
}

enum tide_status tide__cuda_MAX_POOL2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__cuda_pool p;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    pool_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape, &p);
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_max_pool(launch->stream, &p, tide__cuda_in(args, 0),
                                        tide__cuda_out(args, 0), (int32_t *)args->outputs[1].data));
}

enum tide_status tide__cuda_AVG_POOL2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__cuda_pool p;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    pool_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape, &p);
    return TIDE_CUDA_CHECK(err,
                           tide__cuda_launch_avg_pool(launch->stream, &p, tide__cuda_in(args, 0),
                                                      tide__cuda_out(args, 0)));
}

/* MaxPool2DGrad(dy, argmax; input_shape) -> dx. */
enum tide_status tide__cuda_MAX_POOL2D_GRAD(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__cuda_pool p;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    pool_setup(args->node, &args->outputs[0].shape, &args->inputs[0].shape, &p);
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_max_pool_grad(launch->stream, &p, tide__cuda_in(args, 0),
                                             (const int32_t *)args->inputs[1].data,
                                             tide__cuda_out(args, 0)));
}

/* AvgPool2DGrad(dy; input_shape) -> dx. */
enum tide_status tide__cuda_AVG_POOL2D_GRAD(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__cuda_pool p;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    pool_setup(args->node, &args->outputs[0].shape, &args->inputs[0].shape, &p);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_avg_pool_grad(launch->stream, &p,
                                                                tide__cuda_in(args, 0),
                                                                tide__cuda_out(args, 0)));
}
