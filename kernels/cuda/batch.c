/* SPDX-License-Identifier: MIT */
/*
 * batch.c: the host half of BatchMatMul and Transpose on CUDA (device half:
 * batch.cu).
 *
 * BatchMatMul is cuBLAS, with MatMul's operand swap (kernels/cuda/matmul.c:
 * the row-major y = op(a) op(b) is the column-major y^T = op(b)^T op(a)^T).
 * When each operand's matrices lie a fixed distance apart from one entry to
 * the next — every batch entry present (a matrix apart), or none (0 apart:
 * the same matrix for every entry, as a rank-2 weight) — the whole batch is
 * one cublasSgemmStridedBatched. Other broadcasts ([2, 1] against [1, 3]
 * batch dims) take one cublasSgemm per entry, at the offsets the shared
 * geometry (kernels/check.h) gives the CPU kernel too.
 *
 * Transpose is one cudaMemcpyAsync when the permutation moves nothing (after
 * axes of 1 are dropped and neighbours merged), else the kernel of batch.cu.
 *
 * Determinism: cuBLAS as for MatMul (fixed workspace, no atomics, FP32); the
 * transpose only copies.
 */
#include "kernels/cuda/cuda-impl.h"

#include <limits.h>

static bool fits_int(int64_t a, int64_t b, int64_t c)
{
    return a >= 0 && a <= INT_MAX && b >= 0 && b <= INT_MAX && c >= 0 && c <= INT_MAX;
}

enum tide_status tide__cuda_BATCH_MATMUL(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    struct tide__kernel_bmm g;
    tide__kernel_bmm_setup(args, &g);
    if (!fits_int(g.m, g.n, g.k) || !fits_int(g.lda, g.ldb, 0))
        return tide_node_error(err, TIDE_LIMIT, args->node,
                               "a dimension exceeds what cublasSgemm can index");
    if (g.m == 0 || g.n == 0 || g.n_batch == 0)
        return TIDE_OK;
    float *y = tide__cuda_out(args, 0);
    if (g.k == 0)
        return TIDE_CUDA_CHECK(err, cudaMemsetAsync(y, 0, args->outputs[0].nbytes, launch->stream));
    st = tide__cuda_blas_math(args, launch, err);
    if (st != TIDE_OK)
        return st;
    const float alpha = 1.0f, beta = 0.0f;
    const float *a = tide__cuda_in(args, 0), *b = tide__cuda_in(args, 1);
    cublasOperation_t op_a = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_b = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (g.a_step >= 0 && g.b_step >= 0 && g.n_batch <= INT_MAX)
        return TIDE_CUBLAS_CHECK(
            err, cublasSgemmStridedBatched(launch->cublas, op_b, op_a, (int)g.n, (int)g.m, (int)g.k,
                                           &alpha, b, (int)g.ldb, g.b_step, a, (int)g.lda, g.a_step,
                                           &beta, y, (int)g.n, g.m * g.n, (int)g.n_batch));
    for (int64_t p = 0; p < g.n_batch; p++) {
        int64_t a_offset, b_offset;
        tide__kernel_bmm_offsets(&g, p, &a_offset, &b_offset);
        st = TIDE_CUBLAS_CHECK(err,
                               cublasSgemm(launch->cublas, op_b, op_a, (int)g.n, (int)g.m, (int)g.k,
                                           &alpha, b + b_offset, (int)g.ldb, a + a_offset,
                                           (int)g.lda, &beta, y + p * g.m * g.n, (int)g.n));
        if (st != TIDE_OK)
            return st;
    }
    return TIDE_OK;
}

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
