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
 *
 * Max pooling whose windows tile the input (stride = window, no padding: the
 * CNN's 2x2 pools) takes a path of its own: no window needs clipping. It
 * compares the cells in the same order with the same strict comparisons, so
 * it gives the bits of the general path, in about half its time for the CNN
 * (perf: 239 samples against 135).
 *
 * MaxPool2D writes, beside each maximum, its argmax: the index in the plane
 * of the window's first maximum in row-major order (found with the strict
 * comparisons from the window's first cell that the gradient used when it
 * searched x itself), and MaxPool2DGrad reads those indices instead of x.
 * Whether the indices are kept from the forward pass or made again by a
 * recompute copy of the MaxPool2D is the planner's choice (swapper/). An
 * index outside its plane (a graph may feed MaxPool2DGrad any int32 tensor)
 * is refused, never written through.
 *
 * oneDNN first for MaxPool2D and the average pools: where tide was built
 * with it and a rule on the shapes says it is the faster
 * (kernels/onednn/pool.c: max pools whose windows overlap or pad, average
 * pools of 16 channels or more), the MaxPool2D, AvgPool2D and GlobalAvgPool
 * kernels and the average pools' gradients hand the op to it; what follows
 * is the fallback, and what runs every other case. MaxPool2D through oneDNN
 * gives the bits of the code below (onednn/pool.c turns oneDNN's max
 * positions into this argmax, and redoes with tide__cpu_max_pool_window the
 * windows where oneDNN's would differ).
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/onednn/onednn.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
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
    int32_t *argmax;          /* MaxPool2D's second output */
    const int32_t *argmax_in; /* MaxPool2DGrad's second input */
    atomic_bool bad_index;    /* MaxPool2DGrad: an argmax outside its plane was skipped */
    void (*plane)(struct pool_job *job, int64_t plane);
};

/* Planes per task: planes are independent, so the split changes nothing but the speed. */
#define PLANES_PER_TASK 16

static void pool_task(void *ctx, int64_t task, int worker)
{
    (void)worker;
    struct pool_job *job = ctx;
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

/*
 * The window's maximum (from -inf, so that NaNs never win it) and its argmax
 * (window_argmax's: from the first cell, strict comparisons).
 */
static inline void max_pool_window(const float *xp, const struct tide__kernel_pool *p, int64_t oh,
                                   int64_t ow, float *y, int32_t *argmax)
{
    struct clip c = pool_clip(p, oh, ow);
    float m = -INFINITY;
    for (int64_t h = c.h0; h < c.h1; h++) {
        const float *row = xp + h * p->w;
        for (int64_t w = c.w0; w < c.w1; w++)
            m = row[w] > m ? row[w] : m;
    }
    *y = m;
    *argmax = (int32_t)window_argmax(xp, p->w, &c);
}

void tide__cpu_max_pool_window(const float *plane, const struct tide__kernel_pool *p, int64_t oh,
                               int64_t ow, float *y, int32_t *argmax)
{
    max_pool_window(plane, p, oh, ow, y, argmax);
}

static void max_pool_plane(struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    float *yp = job->y + pl * p->oh * p->ow;
    int32_t *ap = job->argmax + pl * p->oh * p->ow;
    for (int64_t oh = 0; oh < p->oh; oh++)
        for (int64_t ow = 0; ow < p->ow; ow++)
            max_pool_window(xp, p, oh, ow, &yp[oh * p->ow + ow], &ap[oh * p->ow + ow]);
}

/* Whether the windows tile the input: every window inside it, no cell in two windows. */
static bool pool_tiles(const struct tide__kernel_pool *p)
{
    return p->sh == p->kh && p->sw == p->kw && p->ph == 0 && p->pw == 0;
}

/* One cell of a tiled window: the maximum's and the argmax's comparisons, as max_pool_plane's. */
#define TILE_CELL(value, index)                                                                    \
    do {                                                                                           \
        float v_ = (value);                                                                        \
        m = v_ > m ? v_ : m;                                                                       \
        bool above_ = v_ > best;                                                                   \
        best = above_ ? v_ : best;                                                                 \
        best_i = above_ ? (index) : best_i;                                                        \
    } while (0)

/* Four floats, four int32s: GCC and Clang vector extensions, lane by lane. */
typedef float float4 __attribute__((vector_size(16)));
typedef int32_t int4 __attribute__((vector_size(16)));

static inline float4 load4(const float *p)
{
    float4 v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* Lanes of a where mask is set (all ones), else of b. */
static inline float4 select4(int4 mask, float4 a, float4 b)
{
    return (float4)((mask & (int4)a) | (~mask & (int4)b));
}

/*
 * Windows ow .. ow + 3 of a row of 2x2 windows that tile the input: the
 * cells of rows top and top + width of plane xp, deinterleaved into the
 * windows' four cells, then TILE_CELL's comparisons lane by lane (the
 * maximum from -inf, the argmax from the first cell, strict), so every lane
 * gets the scalar loop's bits.
 */
static inline void max_pool_block_2x2(const float *xp, int64_t top, int32_t width, int64_t ow,
                                      float *yr, int32_t *ar)
{
    const float *t = xp + top + 2 * ow, *b = t + width;
    const int4 right = {1, 1, 1, 1}, below = {width, width, width, width};
    float4 t0 = load4(t), t1 = load4(t + 4), b0 = load4(b), b1 = load4(b + 4);
    float4 c0 = __builtin_shufflevector(t0, t1, 0, 2, 4, 6);
    float4 c1 = __builtin_shufflevector(t0, t1, 1, 3, 5, 7);
    float4 c2 = __builtin_shufflevector(b0, b1, 0, 2, 4, 6);
    float4 c3 = __builtin_shufflevector(b0, b1, 1, 3, 5, 7);
    float4 m = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    m = select4(c0 > m, c0, m);
    m = select4(c1 > m, c1, m);
    m = select4(c2 > m, c2, m);
    m = select4(c3 > m, c3, m);
    float4 best = c0;
    int4 off = {0, 0, 0, 0}, above;
    above = c1 > best;
    best = select4(above, c1, best);
    off = (above & right) | (~above & off);
    above = c2 > best;
    best = select4(above, c2, best);
    off = (above & below) | (~above & off);
    above = c3 > best;
    off = (above & (below + right)) | (~above & off);
    int32_t first = (int32_t)(top + 2 * ow);
    int4 index = {first, first + 2, first + 4, first + 6};
    index += off;
    memcpy(yr + ow, &m, sizeof(m));
    memcpy(ar + ow, &index, sizeof(index));
}

/*
 * A row of ow_count 2x2 windows that tile the input (2 * ow_count <= width),
 * four at a time; a last block that overlaps the one before it ends the row
 * (its windows written twice, with the same bits). Returns how many windows
 * it wrote: all of them, or none for a row of fewer than four (the caller's
 * scalar loop does those).
 */
static int64_t max_pool_row_2x2(const float *xp, int64_t top, int64_t width, int64_t ow_count,
                                float *yr, int32_t *ar)
{
    if (ow_count < 4 || width > INT32_MAX || 2 * ow_count > width)
        return 0;
    int64_t ow = 0;
    for (; ow + 4 <= ow_count; ow += 4)
        max_pool_block_2x2(xp, top, (int32_t)width, ow, yr, ar);
    if (ow < ow_count)
        max_pool_block_2x2(xp, top, (int32_t)width, ow_count - 4, yr, ar);
    return ow_count;
}

/* max_pool_plane for windows that tile the input: no clipping, the same comparisons. */
static void max_pool_plane_tiled(struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const float *xp = job->x + pl * p->h * p->w;
    float *yp = job->y + pl * p->oh * p->ow;
    int32_t *ap = job->argmax + pl * p->oh * p->ow;
    for (int64_t oh = 0; oh < p->oh; oh++) {
        int64_t top = oh * p->kh * p->w;
        float *yr = yp + oh * p->ow;
        int32_t *ar = ap + oh * p->ow;
        if (p->kh == 2 && p->kw == 2) {
            /* The CNN's case, unrolled: the cells in row-major order, as below. */
            int64_t bottom = top + p->w, ow = max_pool_row_2x2(xp, top, p->w, p->ow, yr, ar);
            for (; ow < p->ow; ow++) {
                int64_t i = top + 2 * ow, j = bottom + 2 * ow, best_i = i;
                float m = -INFINITY, best = xp[i];
                TILE_CELL(xp[i], i);
                TILE_CELL(xp[i + 1], i + 1);
                TILE_CELL(xp[j], j);
                TILE_CELL(xp[j + 1], j + 1);
                yr[ow] = m;
                ar[ow] = (int32_t)best_i;
            }
            continue;
        }
        for (int64_t ow = 0; ow < p->ow; ow++) {
            int64_t first = top + ow * p->kw, best_i = first;
            float m = -INFINITY, best = xp[first];
            for (int64_t h = 0; h < p->kh; h++)
                for (int64_t w = 0; w < p->kw; w++)
                    TILE_CELL(xp[first + h * p->w + w], first + h * p->w + w);
            yr[ow] = m;
            ar[ow] = (int32_t)best_i;
        }
    }
}

#undef TILE_CELL

/* MaxPool2D(x) -> y, argmax; oneDNN first, where it is chosen (kernels/onednn/pool.c). */
enum tide_status tide__cpu_MAX_POOL2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool ran;
    enum tide_status st =
        tide__onednn_pool_run(args, &args->inputs[0].shape, &args->outputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    struct pool_job job = {
        .x = tide__cpu_in(args, 0), .y = tide__cpu_out(args, 0), .argmax = args->outputs[1].data};
    tide__kernel_pool_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape, &job.p);
    job.plane = pool_tiles(&job.p) ? max_pool_plane_tiled : max_pool_plane;
    pool_run(&job);
    return TIDE_OK;
}

/* The divisor counts only the cells inside the input. */
static void avg_pool_plane(struct pool_job *job, int64_t pl)
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
    enum tide_status st =
        tide__onednn_pool_run(args, &args->inputs[0].shape, &args->outputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    struct pool_job job = {
        .x = tide__cpu_in(args, 0), .y = tide__cpu_out(args, 0), .plane = avg_pool_plane};
    tide__kernel_pool_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape, &job.p);
    pool_run(&job);
    return TIDE_OK;
}

/*
 * Each dy goes to the cell its argmax names; overlapping windows add up in
 * window order. An index outside the plane is skipped and flagged.
 */
static void max_pool_grad_plane(struct pool_job *job, int64_t pl)
{
    const struct tide__kernel_pool *p = &job->p;
    const int32_t *ap = job->argmax_in + pl * p->oh * p->ow;
    const float *dyp = job->dy + pl * p->oh * p->ow;
    float *dxp = job->dx + pl * p->h * p->w;
    int64_t cells = p->h * p->w, outputs = p->oh * p->ow;
    memset(dxp, 0, (size_t)cells * sizeof(float));
    for (int64_t o = 0; o < outputs; o++) {
        if (ap[o] < 0 || ap[o] >= cells) {
            atomic_store_explicit(&job->bad_index, true, memory_order_relaxed);
            continue;
        }
        dxp[ap[o]] += dyp[o];
    }
}

/*
 * The first argmax of MaxPool2DGrad's input 1 outside its plane, as an
 * error (a serial pass, run only when a task flagged one).
 */
static enum tide_status bad_argmax(const struct tide_kernel_args *args, const struct pool_job *job,
                                   struct tide_error *err)
{
    const struct tide__kernel_pool *p = &job->p;
    int64_t n = p->planes * p->oh * p->ow, cells = p->h * p->w;
    for (int64_t i = 0; i < n; i++) {
        if (job->argmax_in[i] < 0 || job->argmax_in[i] >= cells)
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "input 1 (argmax): index %" PRId32 " at position %" PRId64
                                   " is outside its plane of %" PRId64 " x %" PRId64 " cells",
                                   job->argmax_in[i], i, p->h, p->w);
    }
    return TIDE_OK;
}

/* MaxPool2DGrad(dy, argmax; input_shape) -> dx. */
enum tide_status tide__cpu_MAX_POOL2D_GRAD(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    struct pool_job job = {.dy = tide__cpu_in(args, 0),
                           .argmax_in = args->inputs[1].data,
                           .dx = tide__cpu_out(args, 0),
                           .plane = max_pool_grad_plane};
    tide__kernel_pool_setup(args->node, &args->outputs[0].shape, &args->inputs[0].shape, &job.p);
    atomic_init(&job.bad_index, false);
    pool_run(&job);
    return atomic_load(&job.bad_index) ? bad_argmax(args, &job, err) : TIDE_OK;
}

/* Each dy is spread evenly over the real cells of its window. */
static void avg_pool_grad_plane(struct pool_job *job, int64_t pl)
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
    enum tide_status st =
        tide__onednn_pool_run(args, &args->outputs[0].shape, &args->inputs[0].shape, &ran, err);
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
