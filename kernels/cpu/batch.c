/* SPDX-License-Identifier: MIT */
/*
 * batch.c: the CPU kernels of BatchMatMul and Transpose.
 *
 * BatchMatMul is one single-threaded cblas_sgemm per batch entry, or per
 * block of rows (columns, when y is wider than tall) of an entry when there
 * are too few entries to keep the pool busy and each is large. The entries
 * and blocks are the items of one range job on the pool of parallel.c; how
 * many items there are, and how many go in one piece, depends on the shapes
 * only, and every element of y is written by one GEMM, so the result has the
 * same bits on any number of threads (as for MatMul, kernels/cpu/matmul.c).
 *
 * Transpose copies elements by their size (any dtype: float32 and int32 are
 * moved as 4-byte words, never as floats), one output row (the last axis of
 * y, after tide__kernel_transpose_setup merged the axes) at a time, rows
 * spread over the pool. When y's last axis is x's last axis too, a row is
 * contiguous in x and one memcpy; otherwise it is gathered with x's stride.
 */
#include "kernels/cpu/cpu-impl.h"

#include <cblas.h>
#include <string.h>

/* Below this many multiply-adds an entry is not split: waking threads would cost more. */
#define SPLIT_MIN_MACS (1 << 20)
/* Entries are split until there are about this many blocks, none with fewer rows than MIN_BLOCK. */
#define TARGET_BLOCKS 16
#define MIN_BLOCK     64

/* ============================================================================
 * BatchMatMul
 * ========================================================================== */

struct bmm_job {
    struct tide__kernel_bmm g;
    const float *a, *b;
    float *y;
    bool split_rows; /* blocks of rows of y; else blocks of columns */
    int64_t block;   /* rows or columns per block */
    int64_t blocks;  /* blocks per batch entry */
};

/* Items [begin, end): item i is block i % blocks of batch entry i / blocks. */
static void bmm_items(const void *ctx, int64_t begin, int64_t end)
{
    const struct bmm_job *j = ctx;
    const struct tide__kernel_bmm *g = &j->g;
    for (int64_t item = begin; item < end; item++) {
        int64_t p = item / j->blocks, lo = item % j->blocks * j->block;
        int64_t a_off, b_off;
        tide__kernel_bmm_offsets(g, p, &a_off, &b_off);
        const float *a = j->a + a_off, *b = j->b + b_off;
        float *y = j->y + p * g->m * g->n;
        int64_t m = g->m, n = g->n;
        if (j->split_rows) {
            int64_t hi = lo + j->block < m ? lo + j->block : m;
            a += g->ta ? lo : lo * g->lda; /* rows of op(a): columns of a when transposed */
            y += lo * g->n;
            m = hi - lo;
        } else {
            int64_t hi = lo + j->block < n ? lo + j->block : n;
            b += g->tb ? lo * g->ldb : lo; /* columns of op(b): rows of b when transposed */
            y += lo;
            n = hi - lo;
        }
        cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                    g->tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)g->k, 1.0f, a,
                    (int)g->lda, b, (int)g->ldb, 0.0f, y, (int)g->n);
    }
}

enum tide_status tide__cpu_BATCH_MATMUL(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct bmm_job job = {.a = tide__cpu_in(args, 0), .b = tide__cpu_in(args, 1)};
    struct tide__kernel_bmm *g = &job.g;
    tide__kernel_bmm_setup(args, g);
    if (!tide__cpu_fits_blas_int(g->m, g->n, g->k))
        return tide_node_error(err, TIDE_LIMIT, args->node,
                               "a dimension exceeds what cblas_sgemm can index");
    if (g->m == 0 || g->n == 0 || g->n_batch == 0)
        return TIDE_OK;
    job.y = tide__cpu_out(args, 0);
    if (g->k == 0) {
        memset(job.y, 0, args->outputs[0].nbytes);
        return TIDE_OK;
    }

    /* Split each entry only when the entries alone leave threads idle and each is large. */
    double macs = (double)g->m * (double)g->n * (double)g->k;
    job.split_rows = g->m >= g->n;
    int64_t dim = job.split_rows ? g->m : g->n;
    job.blocks = 1;
    if (g->n_batch < TARGET_BLOCKS && macs >= SPLIT_MIN_MACS) {
        int64_t want = (TARGET_BLOCKS + g->n_batch - 1) / g->n_batch;
        int64_t most = (dim + MIN_BLOCK - 1) / MIN_BLOCK;
        job.blocks = want < most ? want : most;
    }
    job.block = ((dim + job.blocks - 1) / job.blocks + 15) / 16 * 16;
    job.blocks = (dim + job.block - 1) / job.block;
    /* Small entries go several to a piece, about SPLIT_MIN_MACS multiply-adds each. */
    int64_t grain = 1;
    if (job.blocks == 1 && macs < SPLIT_MIN_MACS)
        grain = (int64_t)(SPLIT_MIN_MACS / macs);
    tide__cpu_blas_init();
    tide__cpu_parallel_for(g->n_batch * job.blocks, grain, bmm_items, &job);
    return TIDE_OK;
}

/* ============================================================================
 * Transpose
 * ========================================================================== */

struct transpose_job {
    struct tide__kernel_transpose t;
    const char *x;
    char *y;
    size_t esize;
    int64_t row; /* elements per row of y: its last (merged) axis */
};

/* Gathers n elements of esize bytes from x, stride apart, into y. */
static void gather(char *y, const char *x, int64_t n, int64_t stride, size_t esize)
{
    if (esize == 4) {
        uint32_t *dst = (uint32_t *)y;
        const uint32_t *src = (const uint32_t *)x;
        for (int64_t j = 0; j < n; j++)
            dst[j] = src[j * stride];
        return;
    }
    for (int64_t j = 0; j < n; j++)
        memcpy(y + (size_t)j * esize, x + (size_t)(j * stride) * esize, esize);
}

/* Rows [begin, end) of y. */
static void transpose_rows(const void *ctx, int64_t begin, int64_t end)
{
    const struct transpose_job *j = ctx;
    const struct tide__kernel_transpose *t = &j->t;
    int32_t outer = t->rank - 1;
    int64_t inner_stride = t->strides[outer];
    /* The index of row `begin` along the outer axes, and where it starts in x. */
    int64_t index[TIDE_MAX_RANK], base = 0, rest = begin;
    for (int32_t d = outer - 1; d >= 0; d--) {
        index[d] = rest % t->dims[d];
        rest /= t->dims[d];
        base += index[d] * t->strides[d];
    }
    size_t row_bytes = (size_t)j->row * j->esize;
    for (int64_t r = begin; r < end; r++) {
        char *dst = j->y + (size_t)r * row_bytes;
        const char *src = j->x + (size_t)base * j->esize;
        if (inner_stride == 1)
            memcpy(dst, src, row_bytes);
        else
            gather(dst, src, j->row, inner_stride, j->esize);
        for (int32_t d = outer - 1; d >= 0; d--) {
            base += t->strides[d];
            if (++index[d] < t->dims[d])
                break;
            base -= index[d] * t->strides[d];
            index[d] = 0;
        }
    }
}

enum tide_status tide__cpu_TRANSPOSE(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_same_size(args, 0);
    struct transpose_job job = {
        .x = args->inputs[0].data,
        .y = args->outputs[0].data,
        .esize = tide__kernel_element_size(args),
    };
    tide__kernel_transpose_setup(args, &job.t);
    int64_t numel = tide__cpu_numel(&args->outputs[0]);
    if (numel == 0)
        return TIDE_OK;
    job.row = job.t.dims[job.t.rank - 1];
    tide__cpu_parallel_for(numel / job.row, tide__cpu_grain(job.row), transpose_rows, &job);
    return TIDE_OK;
}
