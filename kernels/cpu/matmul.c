/* SPDX-License-Identifier: MIT */
/*
 * matmul.c: the CPU MatMul kernel, y = op(a) x op(b), where op transposes
 * when transpose_a / transpose_b is set.
 *
 * A large product is split into blocks of rows of y (or of columns, when y
 * is wider than tall), one single-threaded cblas_sgemm per block, run on the
 * pool of parallel.c. The blocks depend on the shapes only, never on the
 * thread count, so neither does the result (OpenBLAS's own threading does
 * not have that property; see parallel.c).
 */
#include "kernels/cpu/cpu-impl.h"

#include <assert.h>
#include <cblas.h>
#include <string.h>

/* Below this many multiply-adds the product is one GEMM: waking threads would cost more. */
#define PARALLEL_MIN_MACS (1 << 20)
/* The most blocks a product is split into, and the fewest rows (or columns) in one. */
#define MAX_BLOCKS 16
#define MIN_BLOCK  64

/* One product and how it is split. */
struct matmul_job {
    bool ta, tb;
    int m, n, k, lda, ldb;
    const float *a, *b;
    float *y;
    bool split_rows; /* blocks of rows of y; else blocks of columns */
    int64_t block;   /* rows or columns per block */
};

static void matmul_block(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct matmul_job *j = ctx;
    int64_t dim = j->split_rows ? j->m : j->n;
    int64_t lo = task * j->block, hi = lo + j->block < dim ? lo + j->block : dim;
    const float *a = j->a, *b = j->b;
    float *y = j->y;
    int m = j->m, n = j->n;
    if (j->split_rows) {
        a += j->ta ? lo : lo * j->lda; /* rows of op(a): columns of a when transposed */
        y += lo * j->n;
        m = (int)(hi - lo);
    } else {
        b += j->tb ? lo * j->ldb : lo; /* columns of op(b): rows of b when transposed */
        y += lo;
        n = (int)(hi - lo);
    }
    cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans, j->tb ? CblasTrans : CblasNoTrans,
                m, n, j->k, 1.0f, a, j->lda, b, j->ldb, 0.0f, y, j->n);
}

enum tide_status tide__cpu_MATMUL(const struct tide_kernel_args *args, struct tide_error *err)
{
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
    if (!tide__cpu_fits_blas_int(m, n, k))
        return tide_node_error(err, TIDE_LIMIT, args->node,
                               "a dimension exceeds what cblas_sgemm can index");
    if (m == 0 || n == 0)
        return TIDE_OK;
    float *y = tide__cpu_out(args, 0);
    if (k == 0) {
        memset(y, 0, (size_t)(m * n) * sizeof(float));
        return TIDE_OK;
    }
    struct matmul_job job = {
        .ta = ta,
        .tb = tb,
        .m = (int)m,
        .n = (int)n,
        .k = (int)k,
        .lda = (int)as->dims[1],
        .ldb = (int)bs->dims[1],
        .a = tide__cpu_in(args, 0),
        .b = tide__cpu_in(args, 1),
        .y = y,
        .split_rows = m >= n,
    };
    int64_t dim = job.split_rows ? m : n, blocks = 1;
    if ((double)m * (double)n * (double)k >= PARALLEL_MIN_MACS) {
        blocks = (dim + MIN_BLOCK - 1) / MIN_BLOCK;
        blocks = blocks < MAX_BLOCKS ? blocks : MAX_BLOCKS;
    }
    job.block = ((dim + blocks - 1) / blocks + 15) / 16 * 16;
    tide__cpu_blas_init();
    tide__cpu_parallel((dim + job.block - 1) / job.block, tide__cpu_workers(), matmul_block, &job);
    return TIDE_OK;
}
