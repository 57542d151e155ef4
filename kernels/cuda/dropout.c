/* SPDX-License-Identifier: MIT */
/*
 * dropout.c: the host half of Dropout and DropoutGrad on CUDA. The mask's key,
 * threshold and scale are computed here with kernels/dropout-hash.h, as the
 * CPU kernels (kernels/cpu/dropout.c) compute them; the device half
 * (dropout.cu) decides each element with the same header, so both backends
 * draw the same mask bit for bit. In an evaluation step both ops are one
 * cudaMemcpyAsync.
 */
#include "kernels/cuda/norm-seq.h"
#include "kernels/dropout-hash.h"

/* y = x * mask / (1 - rate) for the Dropout node whose name and seed are given. */
static enum tide_status dropout(const struct tide_kernel_args *args, const char *name, int64_t seed,
                                double rate, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    int64_t n = tide__cuda_numel(&args->outputs[0]);
    if (n == 0)
        return TIDE_OK;
    if (!args->training || !*args->training) {
        if (args->outputs[0].data == args->inputs[0].data)
            return TIDE_OK;
        return TIDE_CUDA_CHECK(err, cudaMemcpyAsync(args->outputs[0].data, args->inputs[0].data,
                                                    args->outputs[0].nbytes,
                                                    cudaMemcpyDeviceToDevice, launch->stream));
    }
    if (!args->step)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "needs the executor's step counter in a training step, got none");
    uint64_t key =
        tide__dropout_step_key(args->seed, *args->step, tide__dropout_node_key(name, seed));
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_dropout(launch->stream, tide__cuda_in(args, 0),
                                                          tide__cuda_out(args, 0), n, key,
                                                          tide__dropout_threshold(rate),
                                                          (float)(1.0 / (1.0 - rate))));
}

/* Dropout(x; rate, seed) -> y. */
enum tide_status tide__cuda_DROPOUT(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_attr_value *attrs = args->node->attrs;
    return dropout(args, args->node->name, attrs[TIDE_ATTR_DROPOUT_seed].i,
                   attrs[TIDE_ATTR_DROPOUT_rate].f, err);
}

/* DropoutGrad(dy; rate, seed, forward) -> dx = dy * mask / (1 - rate), forward's mask. */
enum tide_status tide__cuda_DROPOUT_GRAD(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    const struct tide_attr_value *attrs = args->node->attrs;
    return dropout(args, attrs[TIDE_ATTR_DROPOUT_GRAD_forward].s,
                   attrs[TIDE_ATTR_DROPOUT_GRAD_seed].i, attrs[TIDE_ATTR_DROPOUT_GRAD_rate].f, err);
}
