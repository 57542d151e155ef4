/* SPDX-License-Identifier: MIT */
/*
 * pool.c: AvgPool2D, AvgPool2DGrad, GlobalAvgPool and GlobalAvgPoolGrad as
 * oneDNN primitives (pooling_forward, pooling_backward with
 * dnnl_pooling_avg_exclude_padding), fp32, on tide's NCHW tensors.
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
 * When: by default, average pools of 16 channels or more whose window is
 * smaller than the plane, where oneDNN took a third to an eighth of tide's
 * time on the project's 2-core VM; tide's kernels keep the rest
 * (pool_faster says why). TIDE_CPU_ONEDNN=all (or
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
 * once (the pool's size when the plan is made), each the larger scratchpad
 * of the two piece sizes. A workspace planned for fewer threads runs on as
 * many as it has slots for.
 *
 * Primitive cache: common.c's, keyed by (forward or backward, a piece's
 * geometry); created when the memory plan asks for the node's workspace.
 */
#include "kernels/onednn/onednn-impl.h"

#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "kernels/cpu/cpu-impl.h"

/* Most pieces a batch is cut into (fewer when it has fewer images). */
#define TASKS 8

/* The pooling of one piece: its images and the window; what the cache is keyed by. */
struct key {
    int32_t backward; /* 0: pooling_forward (AvgPool2D, GlobalAvgPool), 1: pooling_backward */
    int32_t padding;  /* zero: keys are compared with memcmp */
    int64_t n, c, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
};

struct entry {
    struct key key;
    bool ok; /* false: oneDNN has no primitive for the case */
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t x, y, scratchpad;
    uint64_t workspace; /* the scratchpad, aligned */
};

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
    dnnl_primitive_attr_t attr = tide__onednn_attr_new();
    dnnl_pooling_desc_t fwd_d, bwd_d;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    e->ok = false;
    if (!attr)
        return;
    bool ok =
        dnnl_memory_desc_init_by_tag(&e->x, 4, xd, dnnl_f32, dnnl_nchw) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&e->y, 4, yd, dnnl_f32, dnnl_nchw) == dnnl_success &&
        dnnl_pooling_forward_desc_init(&fwd_d, dnnl_forward_training,
                                       dnnl_pooling_avg_exclude_padding, &e->x, &e->y, strides,
                                       kernel, pad_l, pad_r) == dnnl_success &&
        dnnl_primitive_desc_create(&fwd, &fwd_d, attr, tide__onednn_engine(), NULL) == dnnl_success;
    if (ok && k->backward) {
        ok = dnnl_pooling_backward_desc_init(&bwd_d, dnnl_pooling_avg_exclude_padding, &e->x, &e->y,
                                             strides, kernel, pad_l, pad_r) == dnnl_success &&
             dnnl_primitive_desc_create(&pd, &bwd_d, attr, tide__onednn_engine(), fwd) ==
                 dnnl_success;
    } else if (ok) {
        pd = fwd;
        fwd = NULL;
    }
    if (ok) {
        e->scratchpad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        e->workspace = tide__onednn_align(dnnl_memory_desc_get_size(&e->scratchpad));
        /* Average pooling has no workspace of its own (max pooling's argmax would be one). */
        ok = dnnl_memory_desc_get_size(
                 dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0)) == 0 &&
             dnnl_primitive_create(&e->primitive, pd) == dnnl_success;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (fwd)
        dnnl_primitive_desc_destroy(fwd);
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
    case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_AVG_POOL2D_GRAD: {
        struct tide__kernel_pool p;
        tide__kernel_pool_setup(node, x, y, &p);
        k->backward = node->op == TIDE_OP_AVG_POOL2D_GRAD;
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
 * and BatchNorm"), at 1 and 2 threads alike: with 16 channels or more,
 * oneDNN's jit pooling (channel blocks of 16) took 0.12 to 0.3 of tide's
 * time forward and backward (16x64x32x32 3x3: 0.77 ms against 5.8; at
 * 16x16x8x8 still 0.5 to 0.9); with 3 channels it falls back to a plain
 * loop or pads the blocks and took 1.2 to 5 times as long. A window as
 * large as the plane (the global pools, or an AvgPool2D like one) took 1.1
 * to 3.4 times as long as tide's row sums and fills (16x2048x7x7: 0.35 ms
 * against 0.32 forward, 0.43 against 0.13 backward), so tide keeps those.
 */
static bool pool_faster(const struct key *k)
{
    return k->c >= 16 && (k->kh < k->h || k->kw < k->w);
}

/* How a batch is cut, and what each piece's primitive needs. */
struct pieces {
    int64_t tasks;             /* pieces; piece t is images [t*n/tasks, (t+1)*n/tasks) */
    const struct entry *small; /* the primitive of a piece of n/tasks images */
    const struct entry *large; /* of n/tasks + 1 images (== small when tasks divides n) */
    uint64_t slot;             /* one thread's scratchpad */
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
    char *in, *out; /* x and y, or dy and dx */
    char *slots;    /* one per worker */
    pthread_mutex_t lock;
    dnnl_status_t status; /* the first failure */
    const char *failed;
};

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
    struct tide__onednn_arg args[3] = {
        {j->k.backward ? DNNL_ARG_DIFF_SRC : DNNL_ARG_SRC, &e->x, x},
        {j->k.backward ? DNNL_ARG_DIFF_DST : DNNL_ARG_DST, &e->y, y},
        {DNNL_ARG_SCRATCHPAD, &e->scratchpad, j->slots + (uint64_t)worker * j->p.slot},
    };
    const char *failed = NULL;
    dnnl_status_t s = tide__onednn_execute(e->primitive, args, 3, &failed);
    if (s != dnnl_success) {
        pthread_mutex_lock(&j->lock);
        if (j->status == dnnl_success) {
            j->status = s;
            j->failed = failed;
        }
        pthread_mutex_unlock(&j->lock);
    }
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
