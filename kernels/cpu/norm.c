/* SPDX-License-Identifier: MIT */
/*
 * norm.c: CPU kernels for BatchNorm (training mode) and BatchNormGrad, over
 * x [N, C, H, W] or [N, C], with statistics per channel over N, H and W.
 *
 * The mean and the biased variance are computed in two passes with double
 * accumulators (the one-pass E[x^2] - E[x]^2 loses every digit when the mean
 * is large against the spread). Channel c's elements are the N runs of H*W
 * contiguous values at (n * C + c) * H*W, summed run after run in a fixed
 * order, so the statistics are deterministic.
 *
 * Channels are independent: both kernels are range jobs over them
 * (tide__cpu_parallel_for), each channel computed whole by one thread in the
 * order above, so the thread count never changes a bit.
 */
#include "kernels/cpu/cpu-impl.h"

#include <math.h>

/* Sum of (x[j] - mean)^2 over a run, in double with four partial sums. */
static double sum_sq_dev(const float *x, int64_t n, double mean)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        double d0 = x[j] - mean, d1 = x[j + 1] - mean, d2 = x[j + 2] - mean, d3 = x[j + 3] - mean;
        s0 += d0 * d0;
        s1 += d1 * d1;
        s2 += d2 * d2;
        s3 += d3 * d3;
    }
    for (; j < n; j++) {
        double d = x[j] - mean;
        s0 += d * d;
    }
    return (s0 + s1) + (s2 + s3);
}

/* Sum of dy[j] * (x[j] - mean) over a run, in double with four partial sums. */
static double sum_dy_dev(const float *dy, const float *x, int64_t n, double mean)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += dy[j] * (x[j] - mean);
        s1 += dy[j + 1] * (x[j + 1] - mean);
        s2 += dy[j + 2] * (x[j + 2] - mean);
        s3 += dy[j + 3] * (x[j + 3] - mean);
    }
    for (; j < n; j++)
        s0 += dy[j] * (x[j] - mean);
    return (s0 + s1) + (s2 + s3);
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
        double sum = 0;
        for (int64_t n = 0; n < b.n; n++)
            sum += tide__cpu_sum_row(x + (n * b.c + c) * b.hw, b.hw);
        double mean = sum / m;
        double sq = 0;
        for (int64_t n = 0; n < b.n; n++)
            sq += sum_sq_dev(x + (n * b.c + c) * b.hw, b.hw, mean);
        double inv_std = 1.0 / sqrt(sq / m + eps);
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
        double sum_dy = 0, sum_dy_xc = 0;
        for (int64_t n = 0; n < b.n; n++) {
            int64_t base = (n * b.c + c) * b.hw;
            sum_dy += tide__cpu_sum_row(dy + base, b.hw);
            sum_dy_xc += sum_dy_dev(dy + base, x + base, b.hw, mu);
        }
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
    struct norm_job job = {.args = args};
    tide__kernel_batch_setup(args, 1, &job.b);
    tide__cpu_parallel_for(job.b.c, tide__cpu_grain(job.b.n * job.b.hw), batch_norm_grad_range,
                           &job);
    return TIDE_OK;
}
