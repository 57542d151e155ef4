/* SPDX-License-Identifier: MIT */
/*
 * attention.c: CPU kernels for Attention and AttentionGrad, fused attention
 * that never holds the [Sq, Sk] score matrix (FlashAttention).
 *
 * Attention(q, k, v) -> o, lse. Per head, o = softmax(q k^T * scale + mask) v,
 * where the causal mask hides key j from query i when j > i; lse is each
 * row's log-sum-exp of the scaled, masked scores. A task owns one block of
 * query rows of one head and walks the keys block by block: a GEMM gives the
 * block's scores S = Q_blk K_blk^T, then each row keeps a running maximum m
 * and a running sum l of exp(s - m) and rescales its accumulator by
 * exp(m_old - m_new) whenever the maximum grows (the online softmax), and a
 * second GEMM adds P V_blk to the accumulator; at the end o = acc / l and
 * lse = m + log(l).
 *
 * AttentionGrad(q, k, v, o, lse, do) -> dq, dk, dv recomputes the scores
 * from q, k and lse: P = exp(S - lse), D_i = rowsum(do_i * o_i),
 * dS = P * (dP - D_i) with dP = do v^T; dq = dS k * scale,
 * dk = dS^T q * scale, dv = P^T do. One task owns one head, so it owns that
 * head's dq, dk and dv and needs no atomics: for each key block, in order,
 * it walks the query blocks in order, and for each pair two GEMMs give S and
 * dP and three add P^T do to dv, dS^T q to dk and dS k to dq.
 *
 * Precision and determinism: the GEMMs are OpenBLAS's cblas_sgemm, single
 * threaded inside the pool (parallel.c), with float accumulators that are
 * written once per block pair; each row's statistics (m, l, D_i, and the
 * differences that go into exp) are double. Every task visits its blocks in
 * a fixed order, and the task boundaries depend on the shapes only, so the
 * bits do not depend on the thread count. The backward pass has one task
 * per head (B * H of them), enough for the pool at any batch size used to
 * train; a single head of a long sequence runs on one thread.
 *
 * Workspace: per thread, the forward pass holds one block's accumulator
 * (BQ rows of D floats), its scores (BQ * BK floats) and each row's m and l;
 * the backward pass holds P and dS of one block pair (2 * BQ * BK floats) and
 * D of BQ rows. So O((block * D + block^2) * threads), never O(Sq * Sk).
 */
#include "kernels/cpu/cpu-impl.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* Query rows per block, keys per block. */
#define BQ 64
#define BK 64

/* The block sizes actually used: a short sequence gets one block of its length. */
static int64_t query_block(const struct tide__kernel_attention *a)
{
    return a->sq < BQ ? a->sq : BQ;
}

static int64_t key_block(const struct tide__kernel_attention *a)
{
    return a->sk < BK ? a->sk : BK;
}

static int64_t blocks(int64_t n, int64_t block)
{
    return block > 0 ? (n + block - 1) / block : 0;
}

/*
 * Bytes of one thread's scratch, forward and backward; the parts are laid
 * out doubles first, so every part stays aligned, and a slot is a whole
 * number of 64-byte lines, so every slot starts aligned too (and no two
 * threads share a cache line).
 */
static uint64_t slot_lines(uint64_t bytes)
{
    return (bytes + 63) / 64 * 64;
}

static uint64_t forward_slot(const struct tide__kernel_attention *a)
{
    int64_t bq = query_block(a), bk = key_block(a);
    return slot_lines((uint64_t)(2 * bq) * sizeof(double) +
                      (uint64_t)(bq * a->d + bq * bk) * sizeof(float));
}

static uint64_t backward_slot(const struct tide__kernel_attention *a)
{
    int64_t bq = query_block(a), bk = key_block(a);
    return slot_lines((uint64_t)bq * sizeof(double) + (uint64_t)(2 * bq * bk) * sizeof(float));
}

static int64_t forward_tasks(const struct tide__kernel_attention *a)
{
    return a->heads * blocks(a->sq, query_block(a));
}

static int64_t backward_tasks(const struct tide__kernel_attention *a)
{
    return a->heads;
}

/* One slot per thread that can work at once (the pool's size when the plan is made). */
static uint64_t workspace_for(uint64_t slot_bytes, int64_t tasks)
{
    int64_t slots = tasks < tide__cpu_workers() ? tasks : tide__cpu_workers();
    if (slots < 1)
        slots = 1;
    return (uint64_t)slots * slot_bytes;
}

uint64_t tide__cpu_attention_workspace(const struct tide_graph *graph, const struct tide_node *node)
{
    if (!node->outputs || node->n_inputs < 2)
        return 0;
    struct tide__kernel_attention a;
    tide__kernel_attention_shape(node, &tide_graph_input(graph, node, 0)->shape,
                                 &tide_graph_input(graph, node, 1)->shape, &a);
    if (node->op == TIDE_OP_ATTENTION)
        return workspace_for(forward_slot(&a), forward_tasks(&a));
    return workspace_for(backward_slot(&a), backward_tasks(&a));
}

/*
 * Checks that the workspace holds at least one slot of slot bytes and that
 * the head size d fits cblas_sgemm, and returns how many threads the
 * workspace lets work at once.
 */
static enum tide_status attention_slots(const struct tide_kernel_args *args, int64_t d,
                                        uint64_t slot, int *max_workers, struct tide_error *err)
{
    enum tide_status st = tide__cpu_expect_workspace(args, slot, err);
    if (st != TIDE_OK)
        return st;
    if (!tide__cpu_fits_blas_int(d, BQ, BK))
        return tide_node_error(err, TIDE_LIMIT, args->node,
                               "the head size exceeds what cblas_sgemm can index");
    int workers = tide__cpu_workers();
    if (args->workspace_bytes / slot < (uint64_t)workers)
        workers = (int)(args->workspace_bytes / slot);
    *max_workers = workers;
    return TIDE_OK;
}

/* One kernel's operands, shared by its tasks. */
struct attention_job {
    struct tide__kernel_attention a;
    const float *q, *k, *v, *o, *lse, *dout;
    float *out, *out_lse, *dq, *dk, *dv;
    char *scratch; /* one slot per worker */
    uint64_t slot; /* bytes per slot */
    int64_t q_blocks, k_blocks;
};

/* The last key (exclusive) that query row i sees, within [0, end). */
static int64_t key_end(const struct tide__kernel_attention *a, int64_t i, int64_t end)
{
    return a->causal && i + 1 < end ? i + 1 : end;
}

/*
 * c [m, n] (row stride ldc) = beta c + a b, with a [m, k] or its transpose
 * and b likewise. BLAS wants every stride at least 1, even where a head of
 * size 0 makes it 0 (the product is then empty or all zeros).
 */
static void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                 const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    lda = lda > 1 ? lda : 1;
    ldb = ldb > 1 ? ldb : 1;
    ldc = ldc > 1 ? ldc : 1;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/* ============================================================================
 * Attention
 * ========================================================================== */

/* Query block task % q_blocks of head task / q_blocks. */
static void forward_task(void *ctx, int64_t task, int worker)
{
    const struct attention_job *j = ctx;
    const struct tide__kernel_attention *a = &j->a;
    int64_t head = task / j->q_blocks, bq = query_block(a), bk = key_block(a), d = a->d;
    int64_t i0 = task % j->q_blocks * bq, i1 = i0 + bq < a->sq ? i0 + bq : a->sq, rows = i1 - i0;
    const float *q = j->q + head * a->sq * d, *k = j->k + head * a->sk * d;
    const float *v = j->v + head * a->sk * d;
    double *m = (double *)(j->scratch + (uint64_t)worker * j->slot), *l = m + bq;
    float *acc = (float *)(l + bq), *s = acc + bq * d;

    memset(acc, 0, (size_t)(bq * d) * sizeof(float));
    for (int64_t r = 0; r < bq; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
    }
    /* Causal: the block's last row sees keys up to i1 - 1, so later key blocks are skipped. */
    int64_t keys = a->causal ? i1 : a->sk;
    for (int64_t j0 = 0; j0 < keys; j0 += bk) {
        int64_t j1 = j0 + bk < a->sk ? j0 + bk : a->sk, cols = j1 - j0;
        gemm(false, true, rows, cols, d, q + i0 * d, d, k + j0 * d, d, 0.0f, s, bk);
        for (int64_t r = 0; r < rows; r++) {
            int64_t jn = key_end(a, i0 + r, j1) - j0;
            float *p = s + r * bk;
            if (jn <= 0) {
                memset(p, 0, (size_t)cols * sizeof(float));
                continue;
            }
            double block_max = -INFINITY;
            for (int64_t c = 0; c < jn; c++) {
                double x = a->scale * p[c];
                block_max = x > block_max ? x : block_max;
            }
            double m_new = block_max > m[r] ? block_max : m[r];
            float correction = (float)exp(m[r] - m_new); /* 0 on the first block: m is -inf */
            double sum = 0;
            for (int64_t c = 0; c < jn; c++) {
                p[c] = expf((float)(a->scale * p[c] - m_new));
                sum += p[c];
            }
            for (int64_t c = jn; c < cols; c++)
                p[c] = 0;
            float *row = acc + r * d;
            for (int64_t c = 0; c < d; c++)
                row[c] *= correction;
            l[r] = l[r] * correction + sum;
            m[r] = m_new;
        }
        gemm(false, false, rows, d, cols, s, bk, v + j0 * d, d, 1.0f, acc, d);
    }
    float *o = j->out + head * a->sq * d, *lse = j->out_lse + head * a->sq;
    for (int64_t r = 0; r < rows; r++) {
        double inv = 1.0 / l[r];
        for (int64_t c = 0; c < d; c++)
            o[(i0 + r) * d + c] = (float)(acc[r * d + c] * inv);
        lse[i0 + r] = (float)(m[r] + log(l[r]));
    }
}

/* Attention(q, k, v) -> o, lse: one task per (head, block of query rows). */
enum tide_status tide__cpu_ATTENTION(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct attention_job job = {0};
    tide__kernel_attention_setup(args, &job.a);
    int workers = 1;
    job.slot = forward_slot(&job.a);
    enum tide_status st = attention_slots(args, job.a.d, job.slot, &workers, err);
    if (st != TIDE_OK)
        return st;
    job.q = tide__cpu_in(args, 0);
    job.k = tide__cpu_in(args, 1);
    job.v = tide__cpu_in(args, 2);
    job.out = tide__cpu_out(args, 0);
    job.out_lse = tide__cpu_out(args, 1);
    job.scratch = args->workspace;
    job.q_blocks = blocks(job.a.sq, query_block(&job.a));
    tide__cpu_parallel(forward_tasks(&job.a), workers, forward_task, &job);
    return TIDE_OK;
}

/* ============================================================================
 * AttentionGrad
 * ========================================================================== */

/* dq, dk and dv of head task: key blocks in order, and for each the query blocks in order. */
static void head_grad_task(void *ctx, int64_t task, int worker)
{
    const struct attention_job *j = ctx;
    const struct tide__kernel_attention *a = &j->a;
    int64_t head = task, bq = query_block(a), bk = key_block(a), d = a->d;
    int64_t qoff = head * a->sq * d, koff = head * a->sk * d;
    const float *q = j->q + qoff, *o = j->o + qoff, *dout = j->dout + qoff;
    const float *k = j->k + koff, *v = j->v + koff, *lse = j->lse + head * a->sq;
    float *dq = j->dq + qoff, *dk = j->dk + koff, *dv = j->dv + koff;
    double *di = (double *)(j->scratch + (uint64_t)worker * j->slot);
    float *p = (float *)(di + bq), *ds = p + bq * bk;

    memset(dq, 0, (size_t)(a->sq * d) * sizeof(float));
    memset(dk, 0, (size_t)(a->sk * d) * sizeof(float));
    memset(dv, 0, (size_t)(a->sk * d) * sizeof(float));
    for (int64_t j0 = 0; j0 < a->sk; j0 += bk) {
        int64_t j1 = j0 + bk < a->sk ? j0 + bk : a->sk, cols = j1 - j0;
        /* Causal: query blocks that end before j0 see none of these keys. */
        for (int64_t i0 = a->causal ? j0 / bq * bq : 0; i0 < a->sq; i0 += bq) {
            int64_t i1 = i0 + bq < a->sq ? i0 + bq : a->sq, rows = i1 - i0;
            gemm(false, true, rows, cols, d, q + i0 * d, d, k + j0 * d, d, 0.0f, p, bk);
            gemm(false, true, rows, cols, d, dout + i0 * d, d, v + j0 * d, d, 0.0f, ds, bk);
            for (int64_t r = 0; r < rows; r++) {
                int64_t i = i0 + r, jn = key_end(a, i, j1) - j0;
                const float *doi = dout + i * d, *oi = o + i * d;
                double dsum = 0;
                for (int64_t c = 0; c < d; c++)
                    dsum += (double)doi[c] * oi[c];
                di[r] = dsum;
                float *pr = p + r * bk, *dsr = ds + r * bk;
                int64_t c = 0;
                for (; c < jn; c++) {
                    float pc = expf((float)(a->scale * pr[c] - (double)lse[i]));
                    pr[c] = pc;
                    dsr[c] = (float)(pc * (dsr[c] - di[r]) * a->scale);
                }
                for (; c < cols; c++)
                    pr[c] = dsr[c] = 0;
            }
            gemm(true, false, cols, d, rows, p, bk, dout + i0 * d, d, 1.0f, dv + j0 * d, d);
            gemm(true, false, cols, d, rows, ds, bk, q + i0 * d, d, 1.0f, dk + j0 * d, d);
            gemm(false, false, rows, d, cols, ds, bk, k + j0 * d, d, 1.0f, dq + i0 * d, d);
        }
    }
}

/* AttentionGrad(q, k, v, o, lse, do) -> dq, dk, dv: one task per head. */
enum tide_status tide__cpu_ATTENTION_GRAD(const struct tide_kernel_args *args,
                                          struct tide_error *err)
{
    struct attention_job job = {0};
    tide__kernel_attention_setup(args, &job.a);
    int workers = 1;
    job.slot = backward_slot(&job.a);
    enum tide_status st = attention_slots(args, job.a.d, job.slot, &workers, err);
    if (st != TIDE_OK)
        return st;
    job.q = tide__cpu_in(args, 0);
    job.k = tide__cpu_in(args, 1);
    job.v = tide__cpu_in(args, 2);
    job.o = tide__cpu_in(args, 3);
    job.lse = tide__cpu_in(args, 4);
    job.dout = tide__cpu_in(args, 5);
    job.dq = tide__cpu_out(args, 0);
    job.dk = tide__cpu_out(args, 1);
    job.dv = tide__cpu_out(args, 2);
    job.scratch = args->workspace;
    tide__cpu_parallel(backward_tasks(&job.a), workers, head_grad_task, &job);
    return TIDE_OK;
}
