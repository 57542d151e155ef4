/* SPDX-License-Identifier: MIT */
/*
 * norm.c: the host half of BatchNorm (training mode) and BatchNormGrad on
 * CUDA, over x [N, C, H, W] or [N, C] with statistics per channel over N, H
 * and W. The checks are the CPU kernels' (kernels/cpu/norm.c); the device
 * half (reduce.cu) gives each channel one block and sums in double.
 */
#include "kernels/cuda/cuda-impl.h"

/* The shape of a batch-norm input: N runs of hw values per channel. */
struct batch {
    int64_t n, c, hw;
};

static enum tide_status batch_setup(const struct tide_kernel_args *args, uint32_t x_index,
                                    struct batch *b, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[x_index].shape;
    if (xs->rank != 4 && xs->rank != 2)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "input %u (x) has rank %d, wants [N, C, H, W] or [N, C]", x_index,
                               xs->rank);
    b->n = xs->dims[0];
    b->c = xs->dims[1];
    b->hw = xs->rank == 4 ? xs->dims[2] * xs->dims[3] : 1;
    /* Every other input is [C] or x's shape; every output too. */
    for (uint32_t i = 0; i < args->n_inputs; i++) {
        int64_t n = tide__cuda_numel(&args->inputs[i]);
        if (n != b->c && args->inputs[i].nbytes != args->inputs[x_index].nbytes)
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "input %u is neither one value per channel nor x's shape", i);
    }
    for (uint32_t i = 0; i < args->n_outputs; i++) {
        int64_t n = tide__cuda_numel(&args->outputs[i]);
        if (n != (i == 0 ? b->n * b->c * b->hw : b->c))
            return tide_node_error(err, TIDE_INVALID, args->node, "output %u has the wrong size",
                                   i);
    }
    return TIDE_OK;
}

/* BatchNorm(x, gamma, beta; epsilon) -> y, mean [C], inv_std [C]. */
enum tide_status tide__cuda_BATCH_NORM(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct batch b;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = batch_setup(args, 0, &b, err);
    if (st != TIDE_OK)
        return st;
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
    struct batch b;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = batch_setup(args, 1, &b, err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_batch_norm_grad(launch->stream, tide__cuda_in(args, 0),
                                               tide__cuda_in(args, 1), tide__cuda_in(args, 2),
                                               tide__cuda_in(args, 3), tide__cuda_in(args, 4),
                                               tide__cuda_out(args, 0), tide__cuda_out(args, 1),
                                               tide__cuda_out(args, 2), b.n, b.c, b.hw));
}
