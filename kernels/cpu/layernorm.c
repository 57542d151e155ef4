/* SPDX-License-Identifier: MIT */
/*
 * layernorm.c: CPU kernels for LayerNorm and LayerNormGrad, over the last
 * axis of x, seen as rows of D contiguous elements (kernels/layernorm.h).
 *
 * Each row's mean and biased variance are computed in two passes with double
 * accumulators, as BatchNorm's are (kernels/cpu/norm.c), and the rows are
 * range jobs (tide__cpu_parallel_for), each row computed whole by one thread.
 * LayerNormGrad's dgain and dbias sum over the rows: they are a second range
 * job over the columns, each column summed in row order by one thread. So no
 * result depends on the thread count.
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/layernorm.h"

#include <math.h>

/* Columns summed together in one sweep over the rows by LayerNormGrad's dgain and dbias. */
#define COLUMN_BLOCK 256

/* Sum of (x[j] - mean)^2 over a row, in double with four partial sums. */
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

/* What the pieces of a LayerNorm or LayerNormGrad range job share. */
struct layer_norm_job {
    const struct tide_kernel_args *args;
    struct tide__layer_norm_rows g;
};

/* LayerNorm of rows [begin, end): y = (x - mean) * inv_std * gain + bias. */
static void layer_norm_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct layer_norm_job *job = ctx;
    const struct tide_kernel_args *args = job->args;
    const int64_t d = job->g.d;
    const double eps = args->node->attrs[TIDE_ATTR_LAYER_NORM_epsilon].f;
    const float *x = tide__cpu_in(args, 0), *gain = tide__cpu_in(args, 1);
    const float *bias = tide__cpu_in(args, 2);
    float *y = tide__cpu_out(args, 0), *mean_out = tide__cpu_out(args, 1);
    float *inv_out = tide__cpu_out(args, 2);
    for (int64_t r = begin; r < end; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double mean = tide__cpu_sum_row(xr, d) / (double)d;
        double inv_std = 1.0 / sqrt(sum_sq_dev(xr, d, mean) / (double)d + eps);
        mean_out[r] = (float)mean;
        inv_out[r] = (float)inv_std;
        float mu = (float)mean, inv = (float)inv_std;
        for (int64_t j = 0; j < d; j++)
            yr[j] = (xr[j] - mu) * inv * gain[j] + bias[j];
    }
}

/* LayerNorm(x, gain, bias; epsilon) -> y, mean, inv_std (one per row). */
enum tide_status tide__cpu_LAYER_NORM(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct layer_norm_job job = {.args = args, .g = tide__layer_norm_setup(args, 0)};
    tide__cpu_parallel_for(job.g.rows, tide__cpu_grain(job.g.d), layer_norm_range, &job);
    return TIDE_OK;
}

/*
 * dx of rows [begin, end). With xhat = (x - mean) * inv_std and g = gain * dy
 * (per element), over a row of D:
 *   dx = inv_std * (g - sum(g) / D - xhat * sum(g * xhat) / D).
 */
static void layer_norm_dx_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct layer_norm_job *job = ctx;
    const struct tide_kernel_args *args = job->args;
    const int64_t d = job->g.d;
    const float *dy = tide__cpu_in(args, 0), *x = tide__cpu_in(args, 1);
    const float *gain = tide__cpu_in(args, 2), *mean_in = tide__cpu_in(args, 3);
    const float *inv_in = tide__cpu_in(args, 4);
    float *dx = tide__cpu_out(args, 0);
    for (int64_t r = begin; r < end; r++) {
        const float *dyr = dy + r * d, *xr = x + r * d;
        float *dxr = dx + r * d;
        double mu = mean_in[r], inv = inv_in[r];
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < d; j++) {
            double g = (double)gain[j] * dyr[j];
            sum_g += g;
            sum_gx += g * ((xr[j] - mu) * inv);
        }
        double mean_g = sum_g / (double)d, mean_gx = sum_gx / (double)d;
        for (int64_t j = 0; j < d; j++) {
            double xhat = (xr[j] - mu) * inv;
            dxr[j] = (float)(inv * ((double)gain[j] * dyr[j] - mean_g - xhat * mean_gx));
        }
    }
}

/*
 * dgain and dbias of columns [begin, end): dgain = sum over rows of dy * xhat,
 * dbias = sum over rows of dy, each column summed in row order. The columns
 * go in blocks of COLUMN_BLOCK, one sweep over the rows each, so the reads
 * run along rows.
 */
static void layer_norm_dgain_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct layer_norm_job *job = ctx;
    const struct tide_kernel_args *args = job->args;
    const int64_t d = job->g.d, rows = job->g.rows;
    const float *dy = tide__cpu_in(args, 0), *x = tide__cpu_in(args, 1);
    const float *mean_in = tide__cpu_in(args, 3), *inv_in = tide__cpu_in(args, 4);
    float *dgain = tide__cpu_out(args, 1), *dbias = tide__cpu_out(args, 2);
    for (int64_t c0 = begin; c0 < end; c0 += COLUMN_BLOCK) {
        int64_t n = end - c0 < COLUMN_BLOCK ? end - c0 : COLUMN_BLOCK;
        double sum_dyx[COLUMN_BLOCK] = {0}, sum_dy[COLUMN_BLOCK] = {0};
        for (int64_t r = 0; r < rows; r++) {
            const float *dyr = dy + r * d + c0, *xr = x + r * d + c0;
            double mu = mean_in[r], inv = inv_in[r];
            for (int64_t j = 0; j < n; j++) {
                sum_dyx[j] += dyr[j] * ((xr[j] - mu) * inv);
                sum_dy[j] += dyr[j];
            }
        }
        for (int64_t j = 0; j < n; j++) {
            dgain[c0 + j] = (float)sum_dyx[j];
            dbias[c0 + j] = (float)sum_dy[j];
        }
    }
}

/* LayerNormGrad(dy, x, gain, mean, inv_std) -> dx, dgain, dbias. */
enum tide_status tide__cpu_LAYER_NORM_GRAD(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    struct layer_norm_job job = {.args = args, .g = tide__layer_norm_setup(args, 1)};
    tide__cpu_parallel_for(job.g.rows, tide__cpu_grain(job.g.d), layer_norm_dx_range, &job);
    /* At least 64 columns a piece, so that each sweep over the rows reads whole cache lines. */
    int64_t columns = tide__cpu_grain(job.g.rows);
    tide__cpu_parallel_for(job.g.d, columns < 64 ? 64 : columns, layer_norm_dgain_range, &job);
    return TIDE_OK;
}
