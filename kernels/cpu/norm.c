/* SPDX-License-Identifier: MIT */
/*
 * norm.c: CPU kernels for BatchNorm (training mode) and BatchNormGrad, over
 * x [N, C, H, W] or [N, C], with statistics per channel over N, H and W.
 *
 * The mean and the biased variance are computed in two passes (the one-pass
 * E[x^2] - E[x]^2 loses every digit when the mean is large against the
 * spread), each in float lanes flushed into double accumulators (below);
 * BatchNormGrad's two sums, of dy and of dy * (x - mean), share one pass.
 * The first pass over a channel prefetches its next run (add_run says why).
 * Channel c's elements are the N runs of H*W contiguous values at
 * (n * C + c) * H*W, summed run after run in a fixed order, so the
 * statistics are deterministic.
 *
 * Channels are independent: both kernels are range jobs over them
 * (tide__cpu_parallel_for), each channel computed whole by one thread in the
 * order above, so the thread count never changes a bit.
 *
 * oneDNN first: where it is the faster for the shapes (kernels/onednn/norm.c
 * says which), or for every shape under TIDE_CPU_ONEDNN=all, both kernels
 * hand the op to oneDNN; what follows is the fallback.
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/onednn/onednn.h"

#include <math.h>
#include <string.h>

/*
 * Per-channel sums in float lanes, flushed into double.
 *
 * Each reduction adds a run's blocks of LANES consecutive elements into
 * LANES float partial sums (four vectors of four, kept in registers, so
 * the loop runs at vector width instead of one double add per element,
 * with four chains of adds in flight), and every FLUSH blocks, and at
 * the end of each run, adds those partial sums into LANES double ones. A
 * float partial sum thus adds at most FLUSH terms before it is rounded
 * into double, which bounds its relative error to about FLUSH * 2^-24
 * (2e-6) of the terms' magnitudes, and the channel's total over N*H*W
 * elements is summed in double as before. Elements past a run's last whole
 * block go straight into a double. Which lane an element joins depends on
 * its index in the run only, never on addresses or threads, so the sums
 * stay deterministic.
 */
#define LANES 16 /* four vectors of four floats */
#define FLUSH 32 /* blocks of LANES added in float before they go into double */

/* Four floats; GCC and Clang vector extensions, so that the arithmetic is lane by lane. */
typedef float float4 __attribute__((vector_size(16)));

static inline float4 load4(const float *p)
{
    float4 v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* One running sum: double lanes of the stretches added so far, and the tails. */
struct lane_sum {
    double d[LANES];
    double tail;
};

static void lane_sum_init(struct lane_sum *s)
{
    memset(s, 0, sizeof(*s));
}

/* Adds a stretch's float lanes f[0..3] into the double ones. */
static inline void lane_sum_flush(struct lane_sum *s, float4 f0, float4 f1, float4 f2, float4 f3)
{
    for (int l = 0; l < 4; l++) {
        s->d[l] += f0[l];
        s->d[4 + l] += f1[l];
        s->d[8 + l] += f2[l];
        s->d[12 + l] += f3[l];
    }
}

/* The sum: double lanes added pairwise in a fixed tree, then the tails. */
static double lane_sum_total(const struct lane_sum *s)
{
    double t[LANES];
    memcpy(t, s->d, sizeof(t));
    for (int width = LANES / 2; width >= 1; width /= 2)
        for (int l = 0; l < width; l++)
            t[l] += t[l + width];
    return t[0] + s->tail;
}

/* The end (exclusive) of the stretch of whole blocks from j: at most FLUSH blocks. */
static inline int64_t stretch_end(int64_t j, int64_t n)
{
    int64_t end = j + (int64_t)FLUSH * LANES;
    return end < n ? end : n;
}

/*
 * s += the run x[0, n), prefetching the run the caller reads next, next[0, n)
 * (NULL: none). A channel's runs lie C*H*W floats apart, and a run of a few
 * KiB is a page or two: the hardware prefetchers, which stop at page
 * boundaries, start over cold on every run, and the first pass over a
 * channel waited on memory most of its time.
 */
static void add_run(struct lane_sum *s, const float *x, const float *next, int64_t n)
{
    int64_t j = 0;
    while (j + LANES <= n) {
        float4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int64_t end = stretch_end(j, n); j + LANES <= end; j += LANES) {
            if (next)
                __builtin_prefetch(next + j);
            a0 += load4(x + j);
            a1 += load4(x + j + 4);
            a2 += load4(x + j + 8);
            a3 += load4(x + j + 12);
        }
        lane_sum_flush(s, a0, a1, a2, a3);
    }
    for (; j < n; j++)
        s->tail += x[j];
}

/* s += (x[j] - mean)^2 over the run x[0, n). */
static void add_run_sq_dev(struct lane_sum *s, const float *x, int64_t n, float mean)
{
    const float4 mu = {mean, mean, mean, mean};
    int64_t j = 0;
    while (j + LANES <= n) {
        float4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int64_t end = stretch_end(j, n); j + LANES <= end; j += LANES) {
            float4 d0 = load4(x + j) - mu, d1 = load4(x + j + 4) - mu;
            float4 d2 = load4(x + j + 8) - mu, d3 = load4(x + j + 12) - mu;
            a0 += d0 * d0;
            a1 += d1 * d1;
            a2 += d2 * d2;
            a3 += d3 * d3;
        }
        lane_sum_flush(s, a0, a1, a2, a3);
    }
    for (; j < n; j++) {
        float d = x[j] - mean;
        s->tail += (double)(d * d);
    }
}

/*
 * sum_dy += dy[j], sum_dy_dev += dy[j] * (x[j] - mean) over the runs dy, x [0, n), in one
 * pass, prefetching the next runs (NULL: none) as add_run does.
 */
static void add_run_dy(struct lane_sum *sum_dy, struct lane_sum *sum_dy_dev, const float *dy,
                       const float *x, const float *dy_next, const float *x_next, int64_t n,
                       float mean)
{
    const float4 mu = {mean, mean, mean, mean};
    int64_t j = 0;
    while (j + LANES <= n) {
        float4 g0 = {0}, g1 = {0}, g2 = {0}, g3 = {0};
        float4 p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0};
        for (int64_t end = stretch_end(j, n); j + LANES <= end; j += LANES) {
            if (dy_next) {
                __builtin_prefetch(dy_next + j);
                __builtin_prefetch(x_next + j);
            }
            float4 e0 = load4(dy + j), e1 = load4(dy + j + 4);
            float4 e2 = load4(dy + j + 8), e3 = load4(dy + j + 12);
            g0 += e0;
            g1 += e1;
            g2 += e2;
            g3 += e3;
            p0 += e0 * (load4(x + j) - mu);
            p1 += e1 * (load4(x + j + 4) - mu);
            p2 += e2 * (load4(x + j + 8) - mu);
            p3 += e3 * (load4(x + j + 12) - mu);
        }
        lane_sum_flush(sum_dy, g0, g1, g2, g3);
        lane_sum_flush(sum_dy_dev, p0, p1, p2, p3);
    }
    for (; j < n; j++) {
        sum_dy->tail += dy[j];
        sum_dy_dev->tail += (double)(dy[j] * (x[j] - mean));
    }
}

/* What the pieces of a BatchNorm or BatchNormGrad range job over channels share. */
struct norm_job {
    const struct tide_kernel_args *args;
    struct tide__kernel_batch b;
};

/* BatchNorm of channels [begin, end). */
static void batch_norm_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct norm_job *job = ctx;
    const struct tide_kernel_args *args = job->args;
    const struct tide__kernel_batch b = job->b;
    const double eps = args->node->attrs[TIDE_ATTR_BATCH_NORM_epsilon].f;
    const float *x = tide__cpu_in(args, 0), *gamma = tide__cpu_in(args, 1);
    const float *beta = tide__cpu_in(args, 2);
    float *y = tide__cpu_out(args, 0), *mean_out = tide__cpu_out(args, 1);
    float *inv_out = tide__cpu_out(args, 2);
    double m = (double)(b.n * b.hw);
    for (int64_t c = begin; c < end; c++) {
        struct lane_sum s;
        lane_sum_init(&s);
        for (int64_t n = 0; n < b.n; n++)
            add_run(&s, x + (n * b.c + c) * b.hw,
                    n + 1 < b.n ? x + ((n + 1) * b.c + c) * b.hw : NULL, b.hw);
        double mean = lane_sum_total(&s) / m;
        /* The deviations from the mean rounded to float: off by at most half an ulp of it. */
        lane_sum_init(&s);
        for (int64_t n = 0; n < b.n; n++)
            add_run_sq_dev(&s, x + (n * b.c + c) * b.hw, b.hw, (float)mean);
        double inv_std = 1.0 / sqrt(lane_sum_total(&s) / m + eps);
        mean_out[c] = (float)mean;
        inv_out[c] = (float)inv_std;

        float mu = (float)mean, scale = (float)(gamma[c] * inv_std), shift = beta[c];
        for (int64_t n = 0; n < b.n; n++) {
            const float *xr = x + (n * b.c + c) * b.hw;
            float *yr = y + (n * b.c + c) * b.hw;
            for (int64_t j = 0; j < b.hw; j++)
                yr[j] = (xr[j] - mu) * scale + shift;
        }
    }
}

/* BatchNorm(x, gamma, beta; epsilon) -> y, mean [C], inv_std [C]. */
enum tide_status tide__cpu_BATCH_NORM(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool ran;
    enum tide_status st = tide__onednn_batch_norm_run(args, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    struct norm_job job = {.args = args};
    tide__kernel_batch_setup(args, 0, &job.b);
    tide__cpu_parallel_for(job.b.c, tide__cpu_grain(job.b.n * job.b.hw), batch_norm_range, &job);
    return TIDE_OK;
}

/*
 * BatchNormGrad(dy, x, gamma, mean, inv_std) -> dx, dgamma, dbeta, with
 * xhat = (x - mean) * inv_std, M = N*H*W:
 *   dbeta = sum dy, dgamma = sum dy * xhat,
 *   dx = gamma * inv_std / M * (M * dy - dbeta - xhat * dgamma).
 */
static void batch_norm_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct norm_job *job = ctx;
    const struct tide_kernel_args *args = job->args;
    const struct tide__kernel_batch b = job->b;
    const float *dy = tide__cpu_in(args, 0), *x = tide__cpu_in(args, 1);
    const float *gamma = tide__cpu_in(args, 2), *mean_in = tide__cpu_in(args, 3);
    const float *inv_in = tide__cpu_in(args, 4);
    float *dx = tide__cpu_out(args, 0), *dgamma_out = tide__cpu_out(args, 1);
    float *dbeta_out = tide__cpu_out(args, 2);
    double m = (double)(b.n * b.hw);
    for (int64_t c = begin; c < end; c++) {
        float mu = mean_in[c], inv_std = inv_in[c];
        struct lane_sum s_dy, s_dy_xc;
        lane_sum_init(&s_dy);
        lane_sum_init(&s_dy_xc);
        for (int64_t n = 0; n < b.n; n++) {
            int64_t base = (n * b.c + c) * b.hw;
            bool more = n + 1 < b.n;
            add_run_dy(&s_dy, &s_dy_xc, dy + base, x + base, more ? dy + base + b.c * b.hw : NULL,
                       more ? x + base + b.c * b.hw : NULL, b.hw, mu);
        }
        double sum_dy = lane_sum_total(&s_dy), sum_dy_xc = lane_sum_total(&s_dy_xc);
        double dgamma = sum_dy_xc * inv_std;
        dgamma_out[c] = (float)dgamma;
        dbeta_out[c] = (float)sum_dy;

        float k = (float)(gamma[c] * (double)inv_std / m), fm = (float)m;
        float fdbeta = (float)sum_dy, fdgamma = (float)dgamma;
        for (int64_t n = 0; n < b.n; n++) {
            int64_t base = (n * b.c + c) * b.hw;
            const float *dyr = dy + base, *xr = x + base;
            float *dxr = dx + base;
            for (int64_t j = 0; j < b.hw; j++) {
                float xhat = (xr[j] - mu) * inv_std;
                dxr[j] = k * (fm * dyr[j] - fdbeta - xhat * fdgamma);
            }
        }
    }
}

enum tide_status tide__cpu_BATCH_NORM_GRAD(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    bool ran;
    enum tide_status st = tide__onednn_batch_norm_run(args, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    struct norm_job job = {.args = args};
    tide__kernel_batch_setup(args, 1, &job.b);
    tide__cpu_parallel_for(job.b.c, tide__cpu_grain(job.b.n * job.b.hw), batch_norm_grad_range,
                           &job);
    return TIDE_OK;
}
