/* SPDX-License-Identifier: MIT */
/*
 * matmul.c: the CUDA MatMul kernel, y = op(a) x op(b), one cublasSgemm.
 *
 * cuBLAS is column-major and tide row-major. A row-major matrix read as
 * column-major is its transpose, so the row-major y [m, n] = op(a) op(b) is
 * the column-major y^T [n, m] = op(b)^T op(a)^T: cublasSgemm with the
 * operands swapped, the same transpose flags, and each operand's row length
 * as its leading dimension. No copy, no transpose kernel.
 *
 * Determinism and precision: the backend gives each stream's handle a fixed
 * workspace and no atomics, and each launch sets the math mode of the node's
 * "math" attribute (fp32: plain FP32; tf32: TF32 tensor cores), so cuBLAS
 * picks the same kernel and gives the same bits every run.
 */
#include "kernels/cuda/cuda-impl.h"

#include <assert.h>
#include <limits.h>

static bool fits_int(int64_t a, int64_t b, int64_t c)
{
    return a >= 0 && a <= INT_MAX && b >= 0 && b <= INT_MAX && c >= 0 && c <= INT_MAX;
}

enum tide_status tide__cuda_MATMUL(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape *as = &args->inputs[0].shape, *bs = &args->inputs[1].shape;
    const struct tide_shape *ys = &args->outputs[0].shape;
    bool ta = args->node->attrs[TIDE_ATTR_MATMUL_transpose_a].b;
    bool tb = args->node->attrs[TIDE_ATTR_MATMUL_transpose_b].b;
    /* Infer guarantees rank-2 a, b and y and inner dimensions that agree. */
    assert(as->rank == 2 && bs->rank == 2 && ys->rank == 2);
    int64_t m = as->dims[ta ? 1 : 0], k = as->dims[ta ? 0 : 1];
    int64_t n = bs->dims[tb ? 0 : 1];
    assert(k == bs->dims[tb ? 1 : 0] && ys->dims[0] == m && ys->dims[1] == n);
    (void)ys;
    if (!fits_int(m, n, k) || !fits_int(as->dims[1], bs->dims[1], 0))
        return tide_node_error(err, TIDE_LIMIT, args->node,
                               "a dimension exceeds what cublasSgemm can index");
    if (m == 0 || n == 0)
        return TIDE_OK;
    float *y = tide__cuda_out(args, 0);
    if (k == 0)
        return TIDE_CUDA_CHECK(
            err, cudaMemsetAsync(y, 0, (size_t)(m * n) * sizeof(float), launch->stream));
    st = tide__cuda_blas_math(args, launch, err);
    if (st != TIDE_OK)
        return st;
    const float alpha = 1.0f, beta = 0.0f;
    int lda = (int)as->dims[1], ldb = (int)bs->dims[1];
    return TIDE_CUBLAS_CHECK(err, cublasSgemm(launch->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                              ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                                              (int)k, &alpha, tide__cuda_in(args, 1), ldb,
                                              tide__cuda_in(args, 0), lda, &beta, y, (int)n));
}
