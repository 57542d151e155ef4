/* SPDX-License-Identifier: MIT */
/*
 * batch.c: the host half of Transpose on CUDA (device half: batch.cu).
 *
 * Transpose is one cudaMemcpyAsync when the permutation moves nothing (after
 * axes of 1 are dropped and neighbours merged), else the kernel of batch.cu.
 *
 * Determinism: the transpose only copies.
 */
#include "kernels/cuda/cuda-impl.h"

enum tide_status tide__cuda_TRANSPOSE(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    struct tide__kernel_transpose t;
    tide__kernel_transpose_setup(args, &t);
    if (args->outputs[0].nbytes == 0)
        return TIDE_OK;
    if (t.rank == 1 && t.strides[0] == 1)
        return TIDE_CUDA_CHECK(err, cudaMemcpyAsync(args->outputs[0].data, args->inputs[0].data,
                                                    args->outputs[0].nbytes,
                                                    cudaMemcpyDeviceToDevice, launch->stream));
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_transpose(launch->stream, args->outputs[0].data,
                                                            args->inputs[0].data, &t,
                                                            tide__kernel_element_size(args)));
}
