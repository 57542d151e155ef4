/* SPDX-License-Identifier: MIT */
/*
 * pool.c: the host half of MaxPool2D, AvgPool2D and their gradients on CUDA
 * (device half and the reasons for custom kernels: pool.cu). The geometry
 * is the CPU kernels' (kernels/check.c).
 */
#include "kernels/cuda/cuda-impl.h"

#include <inttypes.h>

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
    return TIDE_CUDA_CHECK(err,
                           tide__cuda_launch_max_pool(launch->stream, &p, tide__cuda_in(args, 0),
                                                      tide__cuda_out(args, 0)));
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

/* One int32 argmax per element of dy (input 1), the window's index into its plane. */
uint64_t tide__cuda_pool_workspace(const struct tide_graph *graph, const struct tide_node *node)
{
    if (node->op != TIDE_OP_MAX_POOL2D_GRAD || node->n_inputs < 2)
        return 0;
    int64_t n = tide_shape_numel(&tide_graph_input(graph, node, 1)->shape);
    return n > 0 ? (uint64_t)n * sizeof(int32_t) : 0;
}

/* MaxPool2DGrad(x, dy) -> dx. */
enum tide_status tide__cuda_MAX_POOL2D_GRAD(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__cuda_pool p;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    pool_setup(args->node, &args->inputs[0].shape, &args->inputs[1].shape, &p);
    tide__kernel_same_size(args, 0);
    if (p.h * p.w > INT32_MAX)
        st = tide_node_error(err, TIDE_LIMIT, args->node,
                             "planes of %" PRId64 " x %" PRId64 " cells exceed the int32 argmax",
                             p.h, p.w);
    if (st == TIDE_OK)
        st = tide__cuda_expect_workspace(args, (uint64_t)(p.planes * p.oh * p.ow) * sizeof(int32_t),
                                         err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_max_pool_grad(launch->stream, &p, tide__cuda_in(args, 0),
                                             tide__cuda_in(args, 1), tide__cuda_out(args, 0),
                                             args->workspace));
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
