/* SPDX-License-Identifier: MIT */
/*
 * attention.c: CPU kernels for Attention and AttentionGrad, fused attention
 * that never holds the [Sq, Sk] score matrix (FlashAttention).
 *
 * Attention(q, k, v) -> o, lse. Per head, o = softmax(q k^T * scale + mask) v,
 * where the causal mask hides key j from query i when j > i; lse is each
 * row's log-sum-exp of the scaled, masked scores. A task owns one block of
 * query rows of one head and walks the keys block by block, keeping for each
 * row a running maximum m, a running sum l of exp(s - m) and an accumulator
 * of p v, rescaled by exp(m_old - m_new) whenever the maximum grows (the
 * online softmax); at the end o = acc / l and lse = m + log(l). A key block
 * stays in cache while the task's rows pass over it.
 *
 * AttentionGrad(q, k, v, o, lse, do) -> dq, dk, dv recomputes the scores
 * from q, k and lse: P = exp(S - lse), D_i = rowsum(do_i * o_i),
 * dS = P * (dP - D_i) with dP = do v^T; dq = dS k * scale,
 * dk = dS^T q * scale, dv = P^T do. Two passes, neither with atomics: one
 * task per (head, key block) sums dk and dv over the query rows in order,
 * then one task per (head, query block) sums dq over the keys in order.
 * D_i is recomputed where it is needed (D multiply-adds, against the
 * Sk * D of the row's scores), so the passes share nothing.
 *
 * Precision and determinism: dot products, exponentials and accumulators are
 * double, rounded to float once per output element; every task visits its
 * rows and keys in a fixed order, and the task boundaries depend on the
 * shapes only, so the bits do not depend on the thread count.
 *
 * Workspace: per thread, the accumulators of one block (forward: BQ rows of
 * D doubles, their m and l, BK scores; backward: dk and dv of BK keys), so
 * O(block * D * threads), never O(Sq * Sk).
 */
#include "kernels/cpu/cpu-impl.h"

#include <math.h>
#include <string.h>

/* Query rows per forward and dq task, keys per block (and per dk/dv task). */
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

/* Doubles of one thread's scratch: forward and backward. */
static uint64_t forward_slot(const struct tide__kernel_attention *a)
{
    return (uint64_t)(query_block(a) * (a->d + 2) + key_block(a));
}

static uint64_t backward_slot(const struct tide__kernel_attention *a)
{
    return (uint64_t)(2 * key_block(a) * a->d + a->d);
}

static int64_t forward_tasks(const struct tide__kernel_attention *a)
{
    return a->heads * blocks(a->sq, query_block(a));
}

/* The larger of the two backward passes' task counts. */
static int64_t backward_tasks(const struct tide__kernel_attention *a)
{
    int64_t kv = a->heads * blocks(a->sk, key_block(a));
    int64_t q = a->heads * blocks(a->sq, query_block(a));
    return kv > q ? kv : q;
}

/* One slot per thread that can work at once (the pool's size when the plan is made). */
static uint64_t workspace_for(uint64_t slot_doubles, int64_t tasks)
{
    int64_t slots = tasks < tide__cpu_workers() ? tasks : tide__cpu_workers();
    if (slots < 1)
        slots = 1;
    return (uint64_t)slots * slot_doubles * sizeof(double);
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
 * Checks that the workspace holds at least one slot of slot_doubles and
 * returns how many threads it lets work at once.
 */
static enum tide_status attention_slots(const struct tide_kernel_args *args, uint64_t slot_doubles,
                                        int *max_workers, struct tide_error *err)
{
    uint64_t slot = slot_doubles * sizeof(double);
    enum tide_status st = tide__cpu_expect_workspace(args, slot, err);
    if (st != TIDE_OK)
        return st;
    int workers = tide__cpu_workers();
    if (args->workspace_bytes / slot < (uint64_t)workers)
        workers = (int)(args->workspace_bytes / slot);
    *max_workers = workers;
    return TIDE_OK;
}

static double dot(const float *x, const float *y, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i] * y[i];
    return sum;
}

/* One kernel's operands, shared by its tasks. */
struct attention_job {
    struct tide__kernel_attention a;
    const float *q, *k, *v, *o, *lse, *dout;
    float *out, *out_lse, *dq, *dk, *dv;
    double *scratch; /* one slot per worker */
    uint64_t slot;   /* doubles per slot */
    int64_t q_blocks, k_blocks;
};

/* The last key (exclusive) that query row i sees, within [0, end). */
static int64_t key_end(const struct tide__kernel_attention *a, int64_t i, int64_t end)
{
    return a->causal && i + 1 < end ? i + 1 : end;
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
    int64_t i0 = task % j->q_blocks * bq, i1 = i0 + bq < a->sq ? i0 + bq : a->sq;
    const float *q = j->q + head * a->sq * d, *k = j->k + head * a->sk * d;
    const float *v = j->v + head * a->sk * d;
    double *acc = j->scratch + (uint64_t)worker * j->slot;
    double *m = acc + bq * d, *l = m + bq, *s = l + bq;

    memset(acc, 0, (size_t)(bq * d) * sizeof(double));
    for (int64_t r = 0; r < bq; r++) {
        m[r] = -INFINITY;
        l[r] = 0;
    }
    /* Causal: the block's last row sees keys up to i1 - 1, so later key blocks are skipped. */
    int64_t keys = a->causal ? i1 : a->sk;
    for (int64_t j0 = 0; j0 < keys; j0 += bk) {
        int64_t j1 = j0 + bk < a->sk ? j0 + bk : a->sk;
        for (int64_t i = i0; i < i1; i++) {
            int64_t r = i - i0, jn = key_end(a, i, j1);
            if (jn <= j0)
                continue;
            double block_max = -INFINITY;
            for (int64_t jj = j0; jj < jn; jj++) {
                double x = a->scale * dot(q + i * d, k + jj * d, d);
                s[jj - j0] = x;
                block_max = x > block_max ? x : block_max;
            }
            double m_new = block_max > m[r] ? block_max : m[r];
            double correction = exp(m[r] - m_new); /* 0 on the first block: m is -inf */
            double *row = acc + r * d;
            for (int64_t c = 0; c < d; c++)
                row[c] *= correction;
            double sum = 0;
            for (int64_t jj = j0; jj < jn; jj++) {
                double p = exp(s[jj - j0] - m_new);
                const float *vj = v + jj * d;
                sum += p;
                for (int64_t c = 0; c < d; c++)
                    row[c] += p * vj[c];
            }
            l[r] = l[r] * correction + sum;
            m[r] = m_new;
        }
    }
    float *o = j->out + head * a->sq * d, *lse = j->out_lse + head * a->sq;
    for (int64_t i = i0; i < i1; i++) {
        int64_t r = i - i0;
        for (int64_t c = 0; c < d; c++)
            o[i * d + c] = (float)(acc[r * d + c] / l[r]);
        lse[i] = (float)(m[r] + log(l[r]));
    }
}

/* Attention(q, k, v) -> o, lse: one task per (head, block of query rows). */
enum tide_status tide__cpu_ATTENTION(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct attention_job job = {0};
    tide__kernel_attention_setup(args, &job.a);
    int workers;
    job.slot = forward_slot(&job.a);
    enum tide_status st = attention_slots(args, job.slot, &workers, err);
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

/* dk and dv of key block task % k_blocks of head task / k_blocks, summed over the rows in order. */
static void key_grad_task(void *ctx, int64_t task, int worker)
{
    const struct attention_job *j = ctx;
    const struct tide__kernel_attention *a = &j->a;
    int64_t head = task / j->k_blocks, bk = key_block(a), d = a->d;
    int64_t j0 = task % j->k_blocks * bk, j1 = j0 + bk < a->sk ? j0 + bk : a->sk;
    int64_t qoff = head * a->sq * d, koff = head * a->sk * d;
    const float *q = j->q + qoff, *o = j->o + qoff, *dout = j->dout + qoff;
    const float *k = j->k + koff, *v = j->v + koff, *lse = j->lse + head * a->sq;
    double *dk = j->scratch + (uint64_t)worker * j->slot, *dv = dk + bk * d;

    memset(dk, 0, (size_t)(2 * bk * d) * sizeof(double));
    /* Causal: rows before j0 see none of these keys. */
    for (int64_t i = a->causal ? j0 : 0; i < a->sq; i++) {
        int64_t jn = key_end(a, i, j1);
        const float *qi = q + i * d, *doi = dout + i * d;
        double di = dot(doi, o + i * d, d);
        for (int64_t jj = j0; jj < jn; jj++) {
            double p = exp(a->scale * dot(qi, k + jj * d, d) - (double)lse[i]);
            double ds = p * (dot(doi, v + jj * d, d) - di) * a->scale;
            double *dkj = dk + (jj - j0) * d, *dvj = dv + (jj - j0) * d;
            for (int64_t c = 0; c < d; c++) {
                dvj[c] += p * doi[c];
                dkj[c] += ds * qi[c];
            }
        }
    }
    float *out_dk = j->dk + koff, *out_dv = j->dv + koff;
    for (int64_t x = 0; x < (j1 - j0) * d; x++) {
        out_dk[j0 * d + x] = (float)dk[x];
        out_dv[j0 * d + x] = (float)dv[x];
    }
}

/* dq of query block task % q_blocks of head task / q_blocks: each row over its keys in order. */
static void query_grad_task(void *ctx, int64_t task, int worker)
{
    const struct attention_job *j = ctx;
    const struct tide__kernel_attention *a = &j->a;
    int64_t head = task / j->q_blocks, bq = query_block(a), d = a->d;
    int64_t i0 = task % j->q_blocks * bq, i1 = i0 + bq < a->sq ? i0 + bq : a->sq;
    int64_t qoff = head * a->sq * d, koff = head * a->sk * d;
    const float *q = j->q + qoff, *o = j->o + qoff, *dout = j->dout + qoff;
    const float *k = j->k + koff, *v = j->v + koff, *lse = j->lse + head * a->sq;
    double *acc = j->scratch + (uint64_t)worker * j->slot;
    float *dq = j->dq + qoff;

    for (int64_t i = i0; i < i1; i++) {
        const float *qi = q + i * d, *doi = dout + i * d;
        double di = dot(doi, o + i * d, d);
        memset(acc, 0, (size_t)d * sizeof(double));
        for (int64_t jj = 0, jn = key_end(a, i, a->sk); jj < jn; jj++) {
            double p = exp(a->scale * dot(qi, k + jj * d, d) - (double)lse[i]);
            double ds = p * (dot(doi, v + jj * d, d) - di);
            const float *kj = k + jj * d;
            for (int64_t c = 0; c < d; c++)
                acc[c] += ds * kj[c];
        }
        for (int64_t c = 0; c < d; c++)
            dq[i * d + c] = (float)(acc[c] * a->scale);
    }
}

/*
 * AttentionGrad(q, k, v, o, lse, do) -> dq, dk, dv: one pass of tasks per
 * (head, key block) for dk and dv, then one per (head, query block) for dq.
 */
enum tide_status tide__cpu_ATTENTION_GRAD(const struct tide_kernel_args *args,
                                          struct tide_error *err)
{
    struct attention_job job = {0};
    tide__kernel_attention_setup(args, &job.a);
    int workers;
    job.slot = backward_slot(&job.a);
    enum tide_status st = attention_slots(args, job.slot, &workers, err);
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
    job.q_blocks = blocks(job.a.sq, query_block(&job.a));
    job.k_blocks = blocks(job.a.sk, key_block(&job.a));
    tide__cpu_parallel(job.a.heads * job.k_blocks, workers, key_grad_task, &job);
    tide__cpu_parallel(job.a.heads * job.q_blocks, workers, query_grad_task, &job);
    return TIDE_OK;
}
