/* SPDX-License-Identifier: MIT */
/*
 * pool.c: MaxPool2D, AvgPool2D, AvgPool2DGrad, GlobalAvgPool and
 * GlobalAvgPoolGrad as oneDNN primitives (pooling_forward with
 * dnnl_pooling_max or dnnl_pooling_avg_exclude_padding, pooling_backward
 * with the latter), fp32, on tide's NCHW tensors. MaxPool2DGrad stays tide's
 * own scatter through the argmax (kernels/cpu/pool.c).
 *
 * Semantics: tide's average pools count only the cells inside the input in
 * a window's divisor (kernels/cpu/pool.c), which is oneDNN's
 * avg_exclude_padding. A global pool is an average pool whose window is the
 * whole plane (no padding, one output cell), its [N, C] output the same
 * bytes as [N, C, 1, 1]. oneDNN sums a window in float where tide's kernel
 * sums in double, so the two differ by float rounding (test_backend_ops
 * compares them within a tolerance); the gradient spreads dy / count over
 * the window as tide's does.
 *
 * MaxPool2D runs as forward_training, so oneDNN writes its workspace: per
 * output, the position of the maximum in the kernel window (kh * KW + kw,
 * padding counted; u8, or s32 for windows of more than 256 cells, as the
 * workspace's descriptor says), in y's nchw layout. Each piece's task turns
 * its positions into tide's argmax (the index in the plane) right after the
 * primitive, and redoes with tide's code the windows where oneDNN's answer
 * may differ (positions_to_argmax says which), so y and argmax are tide's
 * bits for every input, -inf and NaN included.
 *
 * When: by default, average pools of 16 channels or more whose window is
 * smaller than the plane, where oneDNN took a third to an eighth of tide's
 * time on the project's 2-core VM, and max pools of 16 channels or more
 * whose windows overlap or pad (ResNet-50's stem), where it took a fifth to
 * a half; tide's kernels keep the rest (pool_faster says why).
 * TIDE_CPU_ONEDNN=all (or
 * tide_cpu_kernels_onednn_everywhere) sends every shape here, which is how
 * the tests compare both.
 *
 * Layouts: plain nchw for every operand. oneDNN's jit pooling transposes
 * nchw into its blocked layout in its scratchpad; no copies of tide's.
 *
 * Threads and determinism: as conv.c. The batch is cut into pieces of
 * consecutive images (at most TASKS, boundaries from the shapes only), each
 * piece one task of the kernels' pool (kernels/cpu/parallel.c) running a
 * single-threaded primitive (OpenMP set to one thread) on its images, which
 * no other piece touches. So --threads bounds oneDNN, and neither the
 * thread count nor which thread runs a piece changes a bit.
 *
 * Workspace: the primitives run in user scratchpad mode, so every byte they
 * use is in the planned workspace: one slot per thread that can work at
 * once (the pool's size when the plan is made), each the larger of the two
 * piece sizes' scratchpad and, for max pooling, the piece's positions,
 * which are turned into the argmax before the slot is used again. A
 * workspace planned for fewer threads runs on as many as it has slots for.
 * Where oneDNN is not chosen the workspace stays 0: a MaxPool2D with one
 * cannot be recomputed by the planner (swapper/recompute.c).
 *
 * Primitive cache: common.c's, keyed by (forward or backward, average or
 * max, a piece's geometry); created when the memory plan asks for the
 * node's workspace. A max pooling's entry also holds the tables of the
 * positions' pass (each window's corner, each position's cell).
 */
#include "kernels/onednn/onednn-impl.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu-impl.h"

/* Most pieces a batch is cut into (fewer when it has fewer images). */
#define TASKS 8

/* The pooling of one piece: its images and the window; what the cache is keyed by. */
struct key {
    int32_t backward; /* 0: pooling_forward, 1: pooling_backward (the average pools' only) */
    int32_t max;      /* 1: dnnl_pooling_max (MaxPool2D), 0: avg_exclude_padding */
    int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
};

struct entry {
    struct key key;
    bool ok; /* false: oneDNN has no primitive for the case */
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t x, y, scratchpad;
    dnnl_memory_desc_t ws; /* max pooling: oneDNN's max positions, y's shape, u8 or s32 */
    bool ws_s32;           /* the positions are s32 (else u8) */
    int32_t *corners;      /* u8 positions: each window's corner in the plane (padding counted) */
    int32_t ws_cell[256];  /* u8 positions: position -> its cell's offset from the corner */
    uint64_t ws_offset;    /* where the positions lie in a thread's slot: after the scratchpad */
    uint64_t workspace;    /* a thread's slot: the scratchpad, then the positions, each aligned */
};

/*
 * Whether max pooling's workspace e->ws is what piece_task reads: per
 * output, in y's plain nchw layout, the position in the kernel window (kh *
 * KW + kw, padding counted) of the maximum, as u8 or s32. For u8
 * positions, fills positions_to_argmax's tables: each window's corner in
 * the plane, each position's cell from the corner.
 */
static bool ws_usable(struct entry *e, const dnnl_dims_t yd)
{
    dnnl_data_type_t type = e->ws.data_type;
    dnnl_memory_desc_t want;
    if ((type != dnnl_u8 && type != dnnl_s32) ||
        dnnl_memory_desc_init_by_tag(&want, 4, yd, type, dnnl_nchw) != dnnl_success ||
        !dnnl_memory_desc_equal(&want, &e->ws))
        return false;
    const struct key *k = &e->key;
    if (k->h * k->w > INT32_MAX)
        return false; /* tide's argmax is an int32 index in the plane */
    e->ws_s32 = type == dnnl_s32;
    if (e->ws_s32 || k->kh * k->kw > 256)
        return true; /* no tables: window by window (piece_task) */
    for (int64_t i = 0; i < k->kh * k->kw; i++)
        e->ws_cell[i] = (int32_t)(i / k->kw * k->w + i % k->kw);
    e->corners = malloc((size_t)(k->oh * k->ow) * sizeof(int32_t)); /* lives as the entry */
    for (int64_t oh = 0; e->corners && oh < k->oh; oh++)
        for (int64_t ow = 0; ow < k->ow; ow++)
            e->corners[oh * k->ow + ow] =
                (int32_t)((oh * k->sh - k->ph) * k->w + ow * k->sw - k->pw);
    return e->corners != NULL;
}

/* Fills e (its key set) with the primitive; e->ok says whether there is one. */
static void entry_build(void *entry)
{
    struct entry *e = entry;
    const struct key *k = &e->key;
    dnnl_dims_t xd = {k->n, k->c, k->h, k->w}, yd = {k->n, k->c, k->oh, k->ow};
    dnnl_dims_t strides = {k->sh, k->sw}, kernel = {k->kh, k->kw}, pad_l = {k->ph, k->pw};
    /* oneDNN's right padding: what the output size formula leaves past the last window. */
    dnnl_dims_t pad_r = {(k->oh - 1) * k->sh + k->kh - k->h - k->ph,
                         (k->ow - 1) * k->sw + k->kw - k->w - k->pw};
    dnnl_alg_kind_t alg = k->max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    dnnl_primitive_attr_t attr = tide__onednn_attr_new();
    dnnl_pooling_desc_t fwd_d, bwd_d;
    dnnl_primitive_desc_t pd = NULL;
    e->ok = false;
    if (!attr)
        return;
    bool ok =
        dnnl_memory_desc_init_by_tag(&e->x, 4, xd, dnnl_f32, dnnl_nchw) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&e->y, 4, yd, dnnl_f32, dnnl_nchw) == dnnl_success &&
        dnnl_pooling_forward_desc_init(&fwd_d, dnnl_forward_training, alg, &e->x, &e->y, strides,
                                       kernel, pad_l, pad_r) == dnnl_success &&
        (!k->backward || (!k->max && /* MaxPool2DGrad is tide's own scatter */
                          dnnl_pooling_backward_desc_init(&bwd_d, alg, &e->x, &e->y, strides,
                                                          kernel, pad_l, pad_r) == dnnl_success)) &&
        (pd = tide__onednn_pass_pd(&fwd_d, k->backward ? &bwd_d : NULL, attr)) != NULL;
    if (ok) {
        e->scratchpad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        e->ws = *dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0);
        e->ws_offset = tide__onednn_align(dnnl_memory_desc_get_size(&e->scratchpad));
        e->workspace = e->ws_offset + tide__onednn_align(dnnl_memory_desc_get_size(&e->ws));
        /* Average pooling has no workspace of its own; max pooling's is its positions. */
        ok = (k->max ? ws_usable(e, yd) : dnnl_memory_desc_get_size(&e->ws) == 0) &&
             dnnl_primitive_create(&e->primitive, pd) == dnnl_success;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    e->ok = ok;
}

/* node's pooling from x to y (see onednn.h) as oneDNN sees it; false if it cannot. */
static bool pool_geometry(const struct tide_node *node, const struct tide_shape *x,
                          const struct tide_shape *y, struct key *k)
{
    memset(k, 0, sizeof(*k)); /* padding too: keys are compared with memcmp */
    if (x->rank != 4)
        return false;
    k->n = x->dims[0], k->c = x->dims[1], k->h = x->dims[2], k->w = x->dims[3];
    switch (node->op) {
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_AVG_POOL2D_GRAD: {
        struct tide__kernel_pool p;
        tide__kernel_pool_setup(node, x, y, &p);
        k->backward = node->op == TIDE_OP_AVG_POOL2D_GRAD;
        k->max = node->op == TIDE_OP_MAX_POOL2D;
        k->oh = p.oh, k->ow = p.ow, k->kh = p.kh, k->kw = p.kw;
        k->sh = p.sh, k->sw = p.sw, k->ph = p.ph, k->pw = p.pw;
        break;
    }
    case TIDE_OP_GLOBAL_AVG_POOL:
    case TIDE_OP_GLOBAL_AVG_POOL_GRAD:
        /* The window is the plane: one output cell, no padding. */
        k->backward = node->op == TIDE_OP_GLOBAL_AVG_POOL_GRAD;
        k->oh = k->ow = 1, k->kh = k->h, k->kw = k->w, k->sh = k->sw = 1;
        break;
    default:
        return false;
    }
    return k->n > 0 && k->c > 0 && k->h > 0 && k->w > 0 && k->oh > 0 && k->ow > 0 && k->kh > 0 &&
           k->kw > 0 && k->sh > 0 && k->sw > 0;
}

/*
 * Whether oneDNN is the faster for these shapes: a rule on the shapes only,
 * so the plan's workspace and the run agree. Measured with tide-bench
 * cpu-ops on the project's 2-core VM (docs/benchmarks.md, "oneDNN pooling
 * and BatchNorm"), at 1 and 2 threads alike.
 *
 * Max pools, positions' pass included: where the windows overlap or pad,
 * tide's kernel is scalar and oneDNN took 0.19 to 0.48 of its time with 16
 * channels or more (ResNet-50's stem, 16x64x112x112 3x3 s2 p1: 11.8 ms
 * against 27.5); with 3 channels (oneDNN's simple nchw loop) 7 times as
 * long. Where the windows tile the input, tide's vectorised 2x2 path keeps
 * them: 16x16x32x32 took 1.6 times as long through oneDNN, and since a
 * row's last windows run as one more vector block, the CNN's two pools
 * (64x32x28x28, 64x64x14x14) 1.2 to 1.5 times as long; tide's kernel also
 * keeps such a MaxPool2D recomputable.
 *
 * Average pools: with 16 channels or more, oneDNN's jit pooling (channel
 * blocks of 16) took 0.12 to 0.3 of tide's time forward and backward
 * (16x64x32x32 3x3: 0.77 ms against 5.8; at 16x16x8x8 still 0.5 to 0.9);
 * with 3 channels it falls back to a plain loop or pads the blocks and took
 * 1.2 to 5 times as long. A window as
 * large as the plane (the global pools, or an AvgPool2D like one) took 1.1
 * to 3.4 times as long as tide's row sums and fills (16x2048x7x7: 0.35 ms
 * against 0.32 forward, 0.43 against 0.13 backward), so tide keeps those.
 */
static bool pool_faster(const struct key *k)
{
    if (k->max) /* windows that overlap or pad: where tide's max pooling is scalar */
        return k->c >= 16 && !(k->sh == k->kh && k->sw == k->kw && k->ph == 0 && k->pw == 0);
    return k->c >= 16 && (k->kh < k->h || k->kw < k->w);
}

/* How a batch is cut, and what each piece's primitive needs. */
struct pieces {
    int64_t tasks;             /* pieces; piece t is images [t*n/tasks, (t+1)*n/tasks) */
    const struct entry *small; /* the primitive of a piece of n/tasks images */
    const struct entry *large; /* of n/tasks + 1 images (== small when tasks divides n) */
    uint64_t slot;             /* one thread's: the scratchpad (and max pooling's positions) */
};

/* The cut of k's batch and its primitives; false when oneDNN is not to run it. */
static bool pieces_choose(const struct key *whole, struct pieces *p)
{
    if (!tide__onednn_enabled() || !(tide__onednn_everywhere() || pool_faster(whole)))
        return false;
    p->tasks = whole->n < TASKS ? whole->n : TASKS;
    struct key k = *whole;
    k.n = whole->n / p->tasks;
    p->small = tide__onednn_cache_get(&k, sizeof(k), sizeof(struct entry), entry_build);
    p->large = p->small;
    if (whole->n % p->tasks != 0) {
        k.n++;
        p->large = tide__onednn_cache_get(&k, sizeof(k), sizeof(struct entry), entry_build);
    }
    if (!p->small || !p->small->ok || !p->large || !p->large->ok)
        return false;
    p->slot = p->small->workspace > p->large->workspace ? p->small->workspace : p->large->workspace;
    return true;
}

bool tide__onednn_pool_workspace(const struct tide_node *node, const struct tide_shape *x,
                                 const struct tide_shape *y, uint64_t *bytes)
{
    struct key k;
    struct pieces pieces;
    if (!pool_geometry(node, x, y, &k) || !pieces_choose(&k, &pieces))
        return false;
    int64_t slots = pieces.tasks < tide__cpu_workers() ? pieces.tasks : tide__cpu_workers();
    *bytes = (uint64_t)slots * pieces.slot;
    return true;
}

/* ============================================================================
 * Execution
 * ========================================================================== */

/* One pooling's pieces, shared by its tasks. */
struct job {
    struct key k;
    struct pieces p;
    char *in, *out;  /* x and y, or dy and dx */
    int32_t *argmax; /* MaxPool2D's second output */
    char *slots;     /* one per worker */
    pthread_mutex_t lock;
    dnnl_status_t status; /* the first failure */
    const char *failed;
};

/*
 * Max pooling's positions ws (u8 or s32, as e says) of a piece's planes
 * into tide's argmax: the position's row and column in the window, plus the
 * window's corner, as an index in the plane. A window where oneDNN's answer
 * may not be tide's is made again by tide's code: oneDNN starts a window's
 * maximum at the lowest float with its position at 0 (the corner, padding
 * or not), and ignores NaNs, where tide's maximum starts at -inf and its
 * argmax at the first cell (so a NaN there is the argmax). So a window is
 * redone where y is not above -FLT_MAX (every cell -FLT_MAX, -inf or NaN),
 * or where its first cell is NaN. In every other window oneDNN's position
 * is a cell of the clipped window (it visits no other), and the first
 * maximum is the same cell both ways (strict comparisons in row-major order,
 * from the first cell or from below every cell), so the bits are tide's for
 * every input.
 *
 * Speed: a plane whose y are all above -FLT_MAX, and whose windows' first
 * rows hold no NaN, takes one flat loop of table look-ups (the window's
 * corner, the position's cell); other planes, and s32 positions, go window
 * by window.
 */
static void positions_to_argmax(const struct entry *e, const void *ws, const float *x, float *y,
                                int32_t *argmax, int64_t planes)
{
    const struct key *k = &e->key;
    const struct tide__kernel_pool pool = {.planes = planes,
                                           .h = k->h,
                                           .w = k->w,
                                           .oh = k->oh,
                                           .ow = k->ow,
                                           .kh = k->kh,
                                           .kw = k->kw,
                                           .sh = k->sh,
                                           .sw = k->sw,
                                           .ph = k->ph,
                                           .pw = k->pw};
    int64_t outputs = k->oh * k->ow;
    /* The columns that the windows' first cells lie in: [0, w_last]. */
    int64_t w_last = (k->ow - 1) * k->sw - k->pw;
    w_last = w_last < 0 ? 0 : w_last;
    for (int64_t pl = 0; pl < planes; pl++) {
        const float *xp = x + pl * k->h * k->w;
        float *yp = y + pl * outputs;
        int32_t *ap = argmax + pl * outputs;
        bool fast = e->corners != NULL;
        if (fast) {
            int bad = 0;
            for (int64_t o = 0; o < outputs; o++)
                bad |= !(yp[o] > -FLT_MAX);
            for (int64_t oh = 0; oh < k->oh; oh++) {
                int64_t top = oh * k->sh - k->ph;
                const float *first = xp + (top < 0 ? 0 : top) * k->w;
                for (int64_t w = 0; w <= w_last; w++)
                    bad |= first[w] != first[w];
            }
            fast = !bad;
        }
        if (fast) {
            const uint8_t *pos = (const uint8_t *)ws + pl * outputs;
            for (int64_t o = 0; o < outputs; o++)
                ap[o] = e->corners[o] + e->ws_cell[pos[o]];
            continue;
        }
        for (int64_t oh = 0; oh < k->oh; oh++) {
            for (int64_t ow = 0; ow < k->ow; ow++) {
                int64_t o = oh * k->ow + ow, top = oh * k->sh - k->ph, left = ow * k->sw - k->pw;
                int64_t h0 = top < 0 ? 0 : top, w0 = left < 0 ? 0 : left;
                int64_t i = e->ws_s32 ? ((const int32_t *)ws)[pl * outputs + o]
                                      : ((const uint8_t *)ws)[pl * outputs + o];
                if (yp[o] > -FLT_MAX && !isnan(xp[h0 * k->w + w0]) && i >= 0 && i < k->kh * k->kw)
                    ap[o] = (int32_t)((top + i / k->kw) * k->w + left + i % k->kw);
                else
                    tide__cpu_max_pool_window(xp, &pool, oh, ow, &yp[o], &ap[o]);
            }
        }
    }
}

/* Piece t: images [first, last) through the primitive of its size, in slot worker. */
static void piece_task(void *ctx, int64_t t, int worker)
{
    struct job *j = ctx;
    int64_t first = t * j->k.n / j->p.tasks, last = (t + 1) * j->k.n / j->p.tasks;
    const struct entry *e = last - first == j->p.small->key.n ? j->p.small : j->p.large;
    uint64_t x_image = (uint64_t)(j->k.c * j->k.h * j->k.w) * sizeof(float);
    uint64_t y_image = (uint64_t)(j->k.c * j->k.oh * j->k.ow) * sizeof(float);
    char *x = (j->k.backward ? j->out : j->in) + (uint64_t)first * x_image;
    char *y = (j->k.backward ? j->in : j->out) + (uint64_t)first * y_image;
    char *slot = j->slots + (uint64_t)worker * j->p.slot;
    struct tide__onednn_arg args[4] = {
        {j->k.backward ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC, &e->x, x},
        {j->k.backward ? DNNL_ARG_DIFF_DST : DNNL_ARG_DST, &e->y, y},
        {DNNL_ARG_SCRATCHPAD, &e->scratchpad, slot},
        {DNNL_ARG_WORKSPACE, &e->ws, slot + e->ws_offset}, /* max pooling's positions */
    };
    const char *failed = NULL;
    dnnl_status_t s = tide__onednn_execute(e->primitive, args, 4, &failed);
    if (s == dnnl_success && j->k.max)
        positions_to_argmax(e, slot + e->ws_offset, (const float *)x, (float *)y,
                            j->argmax + (uint64_t)first * (uint64_t)(j->k.c * j->k.oh * j->k.ow),
                            (last - first) * j->k.c);
    if (s != dnnl_success)
        tide__onednn_record_failure(&j->lock, &j->status, &j->failed, s, failed);
}

enum tide_status tide__onednn_pool_run(const struct tide_kernel_args *args,
                                       const struct tide_shape *x, const struct tide_shape *y,
                                       bool *ran, struct tide_error *err)
{
    *ran = false;
    struct job j = {.status = dnnl_success};
    if (!pool_geometry(args->node, x, y, &j.k) || !pieces_choose(&j.k, &j.p))
        return TIDE_OK;
    /* As many threads as the workspace has slots for (a plan made for fewer has fewer). */
    uint64_t have = args->workspace ? args->workspace_bytes : 0;
    if (have < j.p.slot)
        return TIDE_OK; /* not planned for oneDNN: tide's kernel needs no workspace */
    int workers = tide__cpu_workers();
    if (j.p.slot > 0 && have / j.p.slot < (uint64_t)workers)
        workers = (int)(have / j.p.slot);
    j.in = args->inputs[0].data;
    j.out = args->outputs[0].data;
    j.argmax = j.k.max ? args->outputs[1].data : NULL;
    j.slots = args->workspace;
    pthread_mutex_init(&j.lock, NULL);
    *ran = true;
    tide__onednn_count_run(args->node->op);
    tide__cpu_parallel(j.p.tasks, workers, piece_task, &j);
    pthread_mutex_destroy(&j.lock);
    if (j.status != dnnl_success)
        return tide_node_error(err, TIDE_INTERNAL, args->node,
                               "oneDNN: %s of the pooling (%" PRId64 " images of %" PRId64
                               " channels, %" PRId64 "x%" PRId64 ") failed with status %d",
                               j.failed, j.k.n, j.k.c, j.k.h, j.k.w, (int)j.status);
    return TIDE_OK;
}
