/* SPDX-License-Identifier: MIT */
/*
 * trace-overhead.c: what recording a step trace costs, measured inside one
 * run (tide-bench train --trace-overhead K).
 *
 * Separate runs with and without --trace differ by more than the trace
 * costs on a shared machine: other processes come and go between them. So
 * one run alternates blocks of K steps with the recorder off and on, in the
 * order off on on off, off on on off, ... (each pair of blocks sits next to
 * its partner and the order flips every pair, which cancels a steady drift),
 * and compares each "on" block with the "off" block beside it. The figure is
 * the median over pairs of on / off - 1 — a paired, robust measure. Each
 * "on" block records a trace from its first step to its last
 * (tide_session_trace_start begins a new one, as `tidectl trace` does).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"

struct tide_bench_trace_ab {
    int64_t block;      /* steps per block */
    double *block_ms;   /* mean step time of each block */
    int64_t n_blocks;
    int64_t cap;
    double sum_ms;      /* of the current block */
    int64_t in_block;
};

/* Block b's recorder is on for the pattern off on on off: b % 4 is 1 or 2. */
static bool block_on(int64_t b)
{
    return b % 4 == 1 || b % 4 == 2;
}

struct tide_bench_trace_ab *tide_bench_trace_ab_new(int64_t block, int64_t steps)
{
    struct tide_bench_trace_ab *ab = calloc(1, sizeof(*ab));
    if (!ab)
        return NULL;
    ab->block = block;
    ab->cap = steps / block + 1;
    ab->block_ms = calloc((size_t)ab->cap, sizeof(double));
    if (!ab->block_ms) {
        free(ab);
        return NULL;
    }
    return ab;
}

void tide_bench_trace_ab_free(struct tide_bench_trace_ab *ab)
{
    if (ab)
        free(ab->block_ms);
    free(ab);
}

enum tide_status tide_bench_trace_ab_before_step(struct tide_bench_trace_ab *ab,
                                                 struct tide_session *s, struct tide_error *err)
{
    if (ab->in_block == 0 && block_on(ab->n_blocks))
        return tide_session_trace_start(s, err);
    return TIDE_OK;
}

void tide_bench_trace_ab_after_step(struct tide_bench_trace_ab *ab, struct tide_session *s,
                                    double step_ms)
{
    ab->sum_ms += step_ms;
    if (++ab->in_block < ab->block)
        return;
    if (block_on(ab->n_blocks))
        tide_session_trace_stop(s);
    if (ab->n_blocks < ab->cap)
        ab->block_ms[ab->n_blocks++] = ab->sum_ms / (double)ab->block;
    ab->sum_ms = 0;
    ab->in_block = 0;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof(*v), compare_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int tide_bench_trace_ab_result(struct tide_bench_trace_ab *ab, struct tide_bench_trace_ab_figures *f)
{
    /* Pairs: blocks (0,1), (2,3), ... — one off and one on in each. */
    int64_t pairs = ab->n_blocks / 2;
    if (pairs < 1)
        return -1;
    double *ratio = malloc((size_t)pairs * sizeof(double));
    double *off = malloc((size_t)pairs * sizeof(double));
    double *on = malloc((size_t)pairs * sizeof(double));
    if (!ratio || !off || !on) {
        free(ratio);
        free(off);
        free(on);
        return -1;
    }
    for (int64_t p = 0; p < pairs; p++) {
        int64_t a = 2 * p, b = 2 * p + 1;
        double on_ms = block_on(a) ? ab->block_ms[a] : ab->block_ms[b];
        double off_ms = block_on(a) ? ab->block_ms[b] : ab->block_ms[a];
        ratio[p] = on_ms / off_ms;
        off[p] = off_ms;
        on[p] = on_ms;
    }
    f->pairs = pairs;
    f->off_ms = median(off, pairs);
    f->on_ms = median(on, pairs);
    f->overhead_percent = 100.0 * (median(ratio, pairs) - 1.0);
    free(ratio);
    free(off);
    free(on);
    return 0;
}
