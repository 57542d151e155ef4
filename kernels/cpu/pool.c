/* SPDX-License-Identifier: MIT */
/*
 * pool.c: CPU kernels for MaxPool2D, AvgPool2D and GlobalAvgPool over NCHW
 * tensors, and their gradients.
 *
 * A window is clipped to the input before it is visited, so padding cells
 * are never read: for max pooling they never win (as if they held -inf), and
 * for average pooling they are not counted in the divisor. Infer keeps pads
 * below the window size, so every clipped window holds at least one cell;
 * the kernels check that again rather than divide by zero.
 *
 * The gradients accumulate into a zeroed dx in the same fixed window order
 * as the forward pass, so overlapping windows give the same bits every run.
 * Planes ([H, W] of one image and channel) are independent: the pooling ops
 * spread them over the pool of parallel.c, which cannot change a result.
 * MaxPool2DGrad routes each dy to the first maximum of its window in
 * row-major order, the cell the forward pass's strict comparison keeps.
 *
 * Max pooling whose windows tile the input (stride = window, no padding: the
 * CNN's 2x2 pools) takes a path of its own: no window needs clipping, and
 * each input cell is in at most one window, so the gradient writes dx cell by
 * cell instead of accumulating. It compares the cells in the same order with
 * the same strict comparisons, so it gives the bits of the general path, in
 * about half its time for the CNN (perf: 239 samples against 135). The
 * gradient still finds the argmax again: MaxPool2D has no output for saved
 * indices (issue 16, item 5).
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/onednn/onednn.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* A window clipped to the input: rows [h0, h1), columns [w0, w1). */
struct clip {
    int64_t h0, h1, w0, w1;
};

/* The window of output (oh, ow), clipped to the input. */
static struct clip pool_clip(const struct tide__kernel_pool *p, int64_t oh, int64_t ow)
{
    int64_t h = oh * p->sh - p->ph, w = ow * p->sw - p->pw;
    struct clip c = {h, h + p->kh, w, w + p->kw};
    c.h0 = c.h0 < 0 ? 0 : c.h0;
    c.w0 = c.w0 < 0 ? 0 : c.w0;
    c.h1 = c.h1 > p->h ? p->h : c.h1;
    c.w1 = c.w1 > p->w ? p->w : c.w1;
    return c;
}

/* Index (in the plane) of the first maximum of a clipped window, in row-major order. */
static int64_t window_argmax(const float *plane, int64_t width, const struct clip *c)
{
    int64_t best_i = c->h0 * width + c->w0;
    float best = plane[best_i];
    for (int64_t h = c->h0; h < c->h1; h++) {
        for (int64_t w = c->w0; w < c->w1; w++) {
            float v = plane[h * width + w];
            if (v > best) {
                best = v;
                best_i = h * width + w;
            }
        }
    }
    return best_i;
}

/* One pooling op's operands, shared by its tasks; plane computes one [H, W] plane. */
struct pool_job {
    struct tide__kernel_pool p;
    const float *x, *dy;
    float *y, *dx;
    void (*plane)(const struct pool_job *job, int64_t plane);
};

/* Planes per task: planes are independent, so the split changes nothing but the speed. */
#define PLANES_PER_TASK 16

static void pool_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    const struct pool_job *job = ctx;
    int64_t last = (task + 1) * PLANES_PER_TASK;
    if (last > job->p.planes)
        last = job->p.planes;
    for (int64_t pl = task * PLANES_PER_TASK; pl < last; pl++)
        job->plane(job, pl);
}

/* Runs job->plane on every plane, spread over the pool. */
static void pool_run(struct pool_job *job)
{
    int64_t tasks = (job->p.planes + PLANES_PER_TASK - 1) / PLANES_PER_TASK;
    tide__cpu_parallel(tasks, tide__cpu_workers(), pool_task, job);
}

static void max_pool_plane(const struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    float *yp = job->y + pl * p->oh * p->ow;
    for (int64_t oh = 0; oh < p->oh; oh++) {
        for (int64_t ow = 0; ow < p->ow; ow++) {
            struct clip c = pool_clip(p, oh, ow);
            float m = -INFINITY;
            for (int64_t h = c.h0; h < c.h1; h++) {
                const float *row = xp + h * p->w;
                for (int64_t w = c.w0; w < c.w1; w++)
                    m = row[w] > m ? row[w] : m;
            }
            yp[oh * p->ow + ow] = m;
        }
    }
}

/* Whether the windows tile the input: every window inside it, no cell in two windows. */
static bool pool_tiles(const struct tide__kernel_pool *p)
{
    return p->sh == p->kh && p->sw == p->kw && p->ph == 0 && p->pw == 0;
}

/* max_pool_plane for windows that tile the input: no clipping, the same comparisons. */
static void max_pool_plane_tiled(const struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    float *yp = job->y + pl * p->oh * p->ow;
    for (int64_t oh = 0; oh < p->oh; oh++) {
        const float *top = xp + oh * p->kh * p->w;
        float *yr = yp + oh * p->ow;
        if (p->kh == 2 && p->kw == 2) {
            /* The CNN's case, unrolled: the cells in row-major order, as below. */
            const float *bottom = top + p->w;
            for (int64_t ow = 0; ow < p->ow; ow++) {
                float m = -INFINITY;
                m = top[2 * ow] > m ? top[2 * ow] : m;
                m = top[2 * ow + 1] > m ? top[2 * ow + 1] : m;
                m = bottom[2 * ow] > m ? bottom[2 * ow] : m;
                m = bottom[2 * ow + 1] > m ? bottom[2 * ow + 1] : m;
                yr[ow] = m;
            }
            continue;
        }
        for (int64_t ow = 0; ow < p->ow; ow++) {
            const float *cell = top + ow * p->kw;
            float m = -INFINITY;
            for (int64_t h = 0; h < p->kh; h++)
                for (int64_t w = 0; w < p->kw; w++)
                    m = cell[h * p->w + w] > m ? cell[h * p->w + w] : m;
            yr[ow] = m;
        }
    }
}

enum tide_status tide__cpu_MAX_POOL2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct pool_job job = {.x = tide__cpu_in(args, 0), .y = tide__cpu_out(args, 0)};
    tide__kernel_pool_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape, &job.p);
    job.plane = pool_tiles(&job.p) ? max_pool_plane_tiled : max_pool_plane;
    pool_run(&job);
    return TIDE_OK;
}

/* The divisor counts only the cells inside the input. */
static void avg_pool_plane(const struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    float *yp = job->y + pl * p->oh * p->ow;
    for (int64_t oh = 0; oh < p->oh; oh++) {
        for (int64_t ow = 0; ow < p->ow; ow++) {
            struct clip c = pool_clip(p, oh, ow);
            double sum = 0;
            for (int64_t h = c.h0; h < c.h1; h++) {
                const float *row = xp + h * p->w;
                for (int64_t w = c.w0; w < c.w1; w++)
                    sum += row[w];
            }
            yp[oh * p->ow + ow] = (float)(sum / (double)((c.h1 - c.h0) * (c.w1 - c.w0)));
        }
    }
}

/* oneDNN first, for the shapes where it is the faster (kernels/onednn/pool.c). */
enum tide_status tide__cpu_AVG_POOL2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool ran;
    enum tide_status st = tide__onednn_pool_run(args, &args->inputs[0].shape,
                                                &args->outputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    struct pool_job job = {
        .x = tide__cpu_in(args, 0), .y = tide__cpu_out(args, 0), .plane = avg_pool_plane};
    tide__kernel_pool_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape, &job.p);
    pool_run(&job);
    return TIDE_OK;
}

/* Each dy goes to the first maximum of its window; overlapping windows add up in window order. */
static void max_pool_grad_plane(const struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    const float *dyp = job->dy + pl * p->oh * p->ow;
    float *dxp = job->dx + pl * p->h * p->w;
    memset(dxp, 0, (size_t)(p->h * p->w) * sizeof(float));
    for (int64_t oh = 0; oh < p->oh; oh++) {
        for (int64_t ow = 0; ow < p->ow; ow++) {
            struct clip c = pool_clip(p, oh, ow);
            dxp[window_argmax(xp, p->w, &c)] += dyp[oh * p->ow + ow];
        }
    }
}

/*
 * max_pool_grad_plane for windows that tile the input: each window's first
 * maximum, found with the same strict comparisons in the same order, gets
 * 0 + dy (what accumulating into the zeroed dx gives, -0 included).
 */
static void max_pool_grad_plane_tiled(const struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    const float *dyp = job->dy + pl * p->oh * p->ow;
    float *dxp = job->dx + pl * p->h * p->w;
    memset(dxp, 0, (size_t)(p->h * p->w) * sizeof(float));
    for (int64_t oh = 0; oh < p->oh; oh++) {
        int64_t top = oh * p->kh * p->w;
        for (int64_t ow = 0; ow < p->ow; ow++) {
            int64_t first = top + ow * p->kw, best_i = first;
            float best = xp[first];
            for (int64_t h = 0; h < p->kh; h++) {
                for (int64_t w = 0; w < p->kw; w++) {
                    int64_t i = first + h * p->w + w;
                    bool above = xp[i] > best;
                    best = above ? xp[i] : best;
                    best_i = above ? i : best_i;
                }
            }
            dxp[best_i] = 0.0f + dyp[oh * p->ow + ow];
        }
    }
}

/* MaxPool2DGrad(x, dy) -> dx. */
enum tide_status tide__cpu_MAX_POOL2D_GRAD(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    struct pool_job job = {
        .x = tide__cpu_in(args, 0), .dy = tide__cpu_in(args, 1), .dx = tide__cpu_out(args, 0)};
    tide__kernel_pool_setup(args->node, &args->inputs[0].shape, &args->inputs[1].shape, &job.p);
    job.plane = pool_tiles(&job.p) ? max_pool_grad_plane_tiled : max_pool_grad_plane;
    tide__kernel_same_size(args, 0);
    pool_run(&job);
    return TIDE_OK;
}

/* Each dy is spread evenly over the real cells of its window. */
static void avg_pool_grad_plane(const struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *dyp = job->dy + pl * p->oh * p->ow;
    float *dxp = job->dx + pl * p->h * p->w;
    memset(dxp, 0, (size_t)(p->h * p->w) * sizeof(float));
    for (int64_t oh = 0; oh < p->oh; oh++) {
        for (int64_t ow = 0; ow < p->ow; ow++) {
            struct clip c = pool_clip(p, oh, ow);
            float g = dyp[oh * p->ow + ow] / (float)((c.h1 - c.h0) * (c.w1 - c.w0));
            for (int64_t h = c.h0; h < c.h1; h++) {
                float *row = dxp + h * p->w;
                for (int64_t w = c.w0; w < c.w1; w++)
                    row[w] += g;
            }
        }
    }
}

/* AvgPool2DGrad(dy; input_shape) -> dx; oneDNN first, as AvgPool2D. */
enum tide_status tide__cpu_AVG_POOL2D_GRAD(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    bool ran;
    enum tide_status st = tide__onednn_pool_run(args, &args->outputs[0].shape,
                                                &args->inputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    struct pool_job job = {
        .dy = tide__cpu_in(args, 0), .dx = tide__cpu_out(args, 0), .plane = avg_pool_grad_plane};
    tide__kernel_pool_setup(args->node, &args->outputs[0].shape, &args->inputs[0].shape, &job.p);
    pool_run(&job);
    return TIDE_OK;
}

/* The global pools' operands, shared by the pieces of their range jobs over planes. */
struct global_job {
    const float *in;
    float *out;
    int64_t hw; /* cells of a plane */
};

static void global_avg_pool_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct global_job *job = ctx;
    for (int64_t pl = begin; pl < end; pl++)
        job->out[pl] =
            (float)(tide__cpu_sum_row(job->in + pl * job->hw, job->hw) / (double)job->hw);
}

/* GlobalAvgPool(x [N, C, H, W]) -> [N, C]: the mean of each plane; oneDNN first, as AvgPool2D. */
enum tide_status tide__cpu_GLOBAL_AVG_POOL(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    bool ran;
    enum tide_status st = tide__onednn_pool_run(args, xs, &args->outputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    assert(xs->rank == 4 && tide__cpu_numel(&args->outputs[0]) == xs->dims[0] * xs->dims[1]);
    struct global_job job = {.in = tide__cpu_in(args, 0),
                             .out = tide__cpu_out(args, 0),
                             .hw = xs->dims[2] * xs->dims[3]};
    tide__cpu_parallel_for(xs->dims[0] * xs->dims[1], tide__cpu_grain(job.hw),
                           global_avg_pool_range, &job);
    return TIDE_OK;
}

static void global_avg_pool_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct global_job *job = ctx;
    for (int64_t pl = begin; pl < end; pl++) {
        float g = job->in[pl] / (float)job->hw;
        float *row = job->out + pl * job->hw;
        for (int64_t j = 0; j < job->hw; j++)
            row[j] = g;
    }
}

/*
 * GlobalAvgPoolGrad(dy [N, C]; input_shape) -> dx [N, C, H, W] = dy / (H * W) on every cell;
 * oneDNN first, as AvgPool2D.
 */
enum tide_status tide__cpu_GLOBAL_AVG_POOL_GRAD(const struct tide_kernel_args *args,
                                                struct tide_error *err)
{
    const struct tide_shape *xs = &args->outputs[0].shape;
    bool ran;
    enum tide_status st = tide__onednn_pool_run(args, xs, &args->inputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    assert(xs->rank == 4 && tide__cpu_numel(&args->inputs[0]) == xs->dims[0] * xs->dims[1]);
    struct global_job job = {.in = tide__cpu_in(args, 0),
                             .out = tide__cpu_out(args, 0),
                             .hw = xs->dims[2] * xs->dims[3]};
    tide__cpu_parallel_for(xs->dims[0] * xs->dims[1], tide__cpu_grain(job.hw),
                           global_avg_pool_grad_range, &job);
    return TIDE_OK;
}
