/* SPDX-License-Identifier: MIT */
/*
 * conv.c: Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter as oneDNN
 * primitives (convolution_forward, convolution_backward_data,
 * convolution_backward_weights), fp32, on tide's NCHW / KCRS tensors.
 *
 * Layouts: tide stores activations as NCHW and filters as KCRS (oneDNN's
 * nchw and oihw; a grouped convolution's filter [K, C / G, R, S] is oneDNN's
 * 5-D goihw [G, K / G, C / G, R, S], the same bytes). oneDNN's direct convolutions (jit:avx512_core, jit:avx2)
 * want channel-blocked layouts (nChw16c, ...); on plain layouts it picks its
 * im2col + GEMM implementation. Measured on this project's 2-core VM (AVX-512)
 * the direct kernels are about twice as fast, and the reorders to and from
 * the blocked layouts cost a few percent of that, so by default the primitive
 * is created with format "any" and each operand whose chosen layout is not
 * the plain one is reordered into (inputs) or out of (the output) a blocked
 * copy in the workspace. TIDE_CPU_ONEDNN=plain keeps every operand plain
 * (no copies: less workspace, slower); TIDE_CPU_ONEDNN=0 turns oneDNN off.
 *
 * Workspace limit: a layout is used only if one thread's slot (below) is no
 * larger than the caller's slot_limit (kernels/cpu/conv.c's conv_slot_limit:
 * one im2col matrix of the fallback, or up to the node's largest tensor for
 * the shapes where oneDNN is much the faster), else the plain layout under
 * the same test, else the fallback. The choice depends on the shapes only.
 *
 * Threads and determinism: the batch is cut into pieces of consecutive
 * images (TASKS of them, or more where smaller pieces are needed to fit the
 * workspace limit below) whose boundaries depend on the shapes only, and
 * each piece is one task of the kernels' pool (kernels/cpu/parallel.c) that
 * runs a single-threaded oneDNN primitive for its images. So --threads
 * bounds oneDNN too (its OpenMP thread count is set to 1 on every thread
 * that creates or runs a primitive: Debian's libdnnl runs on OpenMP, whose
 * thread count is a setting of the calling thread); a task that a busy
 * worker does not pick up is run by another, where an OpenMP team would wait
 * for its slowest thread (measured here: 2 threads of a loaded 2-core VM
 * took ten times as long as 1); and which thread runs a piece never changes
 * its bits. Conv2D and Conv2DBackpropInput write disjoint images per piece.
 * Conv2DBackpropFilter sums over images: piece 0 writes dw, pieces 1.. write
 * partial sums in the workspace, added to dw in piece order, as the
 * fallback's filter groups are. The result depends on the shapes and the
 * data only, at any thread count.
 *
 * Workspace: the primitives run in user scratchpad mode
 * (dnnl_scratchpad_mode_user), so every byte they use is in the workspace the
 * memory plan reserved: the filter gradient's partial sums, then one slot
 * per thread that can work at once (the pool's size when the plan is made),
 * each holding the largest scratchpad of a piece's convolution and its
 * reorders (they run one after another) and the piece's blocked copies, at
 * 64-byte aligned offsets. tide__onednn_conv_workspace reports that sum, so
 * the plan stays exact; a kernel given a workspace planned for fewer threads
 * runs on as many as it has slots for.
 *
 * Primitive cache: one entry per (op, geometry of a piece, layout policy),
 * created the first time the memory plan asks for the node's workspace (the
 * compile-time hook; a kernel called without a plan creates it on first use)
 * and kept for the life of the process: a training job has a handful of
 * convolution shapes, and creating a primitive costs about a millisecond.
 * An entry and its oneDNN objects are read-only once made, so several
 * threads may run one primitive at once, each with its own scratchpad slot,
 * memory objects and stream.
 *
 * Threads and state: cache.lock guards the cache list; entries are never
 * changed after they are published, and never freed. A job's tasks write
 * disjoint images, slots and partials; a failed task records the first
 * oneDNN status under job.lock.
 */
#include "kernels/onednn/onednn-impl.h"

#include <inttypes.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu-impl.h"

/* Offsets of the blocked copies in the workspace are multiples of this. */
#define ALIGN 64

/* Most pieces a batch is cut into (fewer when it has fewer images). */
#define TASKS 8

/* How the primitive's operands are laid out. */
enum layout {
    LAYOUT_BLOCKED, /* oneDNN chooses; reorders into workspace copies */
    LAYOUT_PLAIN,   /* nchw / oihw, no copies */
};

/* ============================================================================
 * Primitives
 * ========================================================================== */

/* Which tensor of tide's kernel args an operand is. */
enum slot { SLOT_IN0, SLOT_IN1, SLOT_OUT0 };

/* One operand of a primitive: where it comes from, and its blocked copy if any. */
struct operand {
    int arg;               /* DNNL_ARG_SRC, ... */
    enum slot slot;        /* tide's tensor */
    dnnl_memory_desc_t md; /* the layout the primitive takes */
    dnnl_memory_desc_t plain;
    dnnl_primitive_t
        reorder;     /* plain -> md for inputs, md -> plain for the output; NULL if equal */
    uint64_t offset; /* the copy's offset in the workspace */
};

struct key {
    enum tide_op op;
    struct tide__kernel_conv g; /* of one piece: n is its images */
    enum layout layout;
};

struct entry {
    struct key key;
    bool ok; /* false: oneDNN has no primitive for the case */
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t scratchpad_md; /* the convolution's */
    dnnl_memory_desc_t reorder_scratchpad_md[3];
    uint64_t workspace; /* scratchpad region, then the copies */
    struct operand operands[3];
    struct entry *next;
};

static struct {
    pthread_mutex_t lock;
    struct entry *head;
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t align_up(uint64_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* The three operands of op, in tide's order of kernel arguments (see graph/ops.def). */
static void operand_roles(enum tide_op op, int arg[3], enum slot slot[3], char shape[3])
{
    switch (op) {
    case TIDE_OP_CONV2D: /* (x, w) -> y */
        arg[0] = DNNL_ARG_SRC, arg[1] = DNNL_ARG_WEIGHTS, arg[2] = DNNL_ARG_DST;
        shape[0] = 'x', shape[1] = 'w', shape[2] = 'y';
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT: /* (dy, w) -> dx */
        arg[0] = DNNL_ARG_DIFF_DST, arg[1] = DNNL_ARG_WEIGHTS, arg[2] = DNNL_ARG_DIFF_SRC;
        shape[0] = 'y', shape[1] = 'w', shape[2] = 'x';
        break;
    default: /* Conv2DBackpropFilter: (x, dy) -> dw */
        arg[0] = DNNL_ARG_SRC, arg[1] = DNNL_ARG_DIFF_DST, arg[2] = DNNL_ARG_DIFF_WEIGHTS;
        shape[0] = 'x', shape[1] = 'y', shape[2] = 'w';
        break;
    }
    slot[0] = SLOT_IN0, slot[1] = SLOT_IN1, slot[2] = SLOT_OUT0;
}

/* Elements of the filter w [K, C / group, R, S]. */
static int64_t filter_elements(const struct tide__kernel_conv *g)
{
    return g->k * (g->c / g->group) * g->r * g->s;
}

/*
 * Memory descriptors of x, w and y, in oneDNN's choice of layout (any) or
 * the plain ones. A grouped convolution's filter is 5-D for oneDNN,
 * [G, K / G, C / G, R, S] (goihw): the same bytes as tide's [K, C / G, R, S].
 */
static bool conv_mds(const struct tide__kernel_conv *g, bool any, dnnl_memory_desc_t *x,
                     dnnl_memory_desc_t *w, dnnl_memory_desc_t *y)
{
    dnnl_dims_t xd = {g->n, g->c, g->h, g->w}, wd = {g->k, g->c, g->r, g->s};
    dnnl_dims_t gwd = {g->group, g->k / g->group, g->c / g->group, g->r, g->s};
    dnnl_dims_t yd = {g->n, g->k, g->oh, g->ow};
    bool grouped = g->group > 1;
    dnnl_format_tag_t wtag = any ? dnnl_format_tag_any : grouped ? dnnl_goihw : dnnl_oihw;
    return dnnl_memory_desc_init_by_tag(x, 4, xd, dnnl_f32,
                                        any ? dnnl_format_tag_any : dnnl_nchw) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(w, grouped ? 5 : 4, grouped ? gwd : wd, dnnl_f32, wtag) ==
               dnnl_success &&
           dnnl_memory_desc_init_by_tag(y, 4, yd, dnnl_f32,
                                        any ? dnnl_format_tag_any : dnnl_nchw) == dnnl_success;
}

/*
 * Creates the primitive descriptor of key's convolution (the backward ones
 * need the forward one as a hint) with a user scratchpad. Returns NULL when
 * oneDNN has no implementation.
 */
static dnnl_primitive_desc_t conv_pd(const struct key *key, const_dnnl_primitive_attr_t attr)
{
    const struct tide__kernel_conv *g = &key->g;
    dnnl_memory_desc_t x, w, y;
    if (!conv_mds(g, key->layout == LAYOUT_BLOCKED, &x, &w, &y))
        return NULL;
    dnnl_dims_t strides = {g->sh, g->sw}, pad_l = {g->ph, g->pw};
    /* oneDNN counts a dilation as the cells skipped between taps: 0 is a dense filter. */
    dnnl_dims_t dilates = {g->dh - 1, g->dw - 1};
    /*
     * oneDNN's right padding: what the output size formula leaves past the
     * last window, which spans (R - 1) * dh + 1 rows.
     */
    dnnl_dims_t pad_r = {(g->oh - 1) * g->sh + (g->r - 1) * g->dh + 1 - g->h - g->ph,
                         (g->ow - 1) * g->sw + (g->s - 1) * g->dw + 1 - g->w - g->pw};
    dnnl_convolution_desc_t fwd_d, d;
    if (dnnl_dilated_convolution_forward_desc_init(&fwd_d, dnnl_forward_training,
                                                   dnnl_convolution_direct, &x, &w, NULL, &y,
                                                   strides, dilates, pad_l, pad_r) != dnnl_success)
        return NULL;
    if (key->op == TIDE_OP_CONV2D)
        return tide__onednn_pass_pd(&fwd_d, NULL, attr);
    dnnl_status_t s;
    if (key->op == TIDE_OP_CONV2D_BACKPROP_INPUT)
        s = dnnl_dilated_convolution_backward_data_desc_init(
            &d, dnnl_convolution_direct, &x, &w, &y, strides, dilates, pad_l, pad_r);
    else
        s = dnnl_dilated_convolution_backward_weights_desc_init(
            &d, dnnl_convolution_direct, &x, &w, NULL, &y, strides, dilates, pad_l, pad_r);
    return s == dnnl_success ? tide__onednn_pass_pd(&fwd_d, &d, attr) : NULL;
}

/* A reorder primitive from src to dst with a user scratchpad, or NULL. */
static dnnl_primitive_t make_reorder(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                                     const_dnnl_primitive_attr_t attr,
                                     dnnl_memory_desc_t *scratchpad)
{
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p = NULL;
    if (dnnl_reorder_primitive_desc_create(&pd, src, tide__onednn_engine(), dst,
                                           tide__onednn_engine(), attr) != dnnl_success)
        return NULL;
    *scratchpad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (dnnl_primitive_create(&p, pd) != dnnl_success)
        p = NULL;
    dnnl_primitive_desc_destroy(pd);
    return p;
}

/* Fills e (its key set) with the primitive, the reorders and the workspace layout; e->ok says. */
static void entry_build(struct entry *e)
{
    e->ok = false;
    dnnl_primitive_attr_t attr = tide__onednn_attr_new();
    if (!attr)
        return;
    dnnl_primitive_desc_t pd = conv_pd(&e->key, attr);
    if (!pd) {
        dnnl_primitive_attr_destroy(attr);
        return;
    }
    e->scratchpad_md = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    uint64_t scratch = dnnl_memory_desc_get_size(&e->scratchpad_md);

    int arg[3];
    enum slot slot[3];
    char shape[3];
    operand_roles(e->key.op, arg, slot, shape);
    dnnl_memory_desc_t px, pw, py;
    bool ok = conv_mds(&e->key.g, false, &px, &pw, &py);
    uint64_t copies = 0;
    for (int i = 0; ok && i < 3; i++) {
        struct operand *o = &e->operands[i];
        o->arg = arg[i];
        o->slot = slot[i];
        o->plain = shape[i] == 'x' ? px : shape[i] == 'w' ? pw : py;
        o->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg[i]);
        o->reorder = NULL;
        memset(&e->reorder_scratchpad_md[i], 0, sizeof(e->reorder_scratchpad_md[i]));
        if (dnnl_memory_desc_equal(&o->md, &o->plain))
            continue;
        o->reorder = slot[i] == SLOT_OUT0
                         ? make_reorder(&o->md, &o->plain, attr, &e->reorder_scratchpad_md[i])
                         : make_reorder(&o->plain, &o->md, attr, &e->reorder_scratchpad_md[i]);
        if (!o->reorder) {
            ok = false;
            break;
        }
        uint64_t rs = dnnl_memory_desc_get_size(&e->reorder_scratchpad_md[i]);
        if (rs > scratch)
            scratch = rs;
        o->offset = copies; /* relative to the copies' region until the scratchpad is sized */
        copies += align_up(dnnl_memory_desc_get_size(&o->md));
    }
    if (ok && dnnl_primitive_create(&e->primitive, pd) != dnnl_success)
        ok = false;
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    if (!ok) {
        for (int i = 0; i < 3; i++)
            if (e->operands[i].reorder)
                dnnl_primitive_destroy(e->operands[i].reorder);
        return;
    }
    uint64_t base = align_up(scratch);
    for (int i = 0; i < 3; i++)
        e->operands[i].offset += base;
    e->workspace = base + copies;
    e->ok = true;
}

/* The cache entry of key, created (single-threaded: see the file's header) if new. */
static const struct entry *entry_get(const struct key *key)
{
    pthread_mutex_lock(&cache.lock);
    struct entry *e;
    for (e = cache.head; e; e = e->next)
        if (memcmp(&e->key, key, sizeof(*key)) == 0)
            break;
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (e) {
            e->key = *key;
            omp_set_num_threads(1);
            entry_build(e);
            e->next = cache.head;
            cache.head = e;
        }
    }
    pthread_mutex_unlock(&cache.lock);
    return e;
}

/* Whether oneDNN may be asked about g at all: every dimension at least 1. */
static bool geometry_usable(const struct tide__kernel_conv *g)
{
    return g->n > 0 && g->c > 0 && g->h > 0 && g->w > 0 && g->k > 0 && g->r > 0 && g->s > 0 &&
           g->oh > 0 && g->ow > 0;
}

/* How op's batch of g->n images is cut, and what each piece's primitive needs. */
struct pieces {
    int64_t tasks;             /* pieces; piece t is images [t*n/tasks, (t+1)*n/tasks) */
    const struct entry *small; /* the primitive of a piece of n/tasks images */
    const struct entry *large; /* of n/tasks + 1 images (== small when tasks divides n) */
    uint64_t partials;         /* Conv2DBackpropFilter: bytes of pieces 1..'s sums */
    uint64_t slot;             /* one thread's scratchpad and copies */
};

/* The cut of g's batch and its primitives; false when oneDNN has no primitive for a piece. */
static bool pieces_get(enum tide_op op, const struct tide__kernel_conv *g, enum layout layout,
                       int64_t tasks, struct pieces *p)
{
    p->tasks = tasks;
    struct key key;
    memset(&key, 0, sizeof(key)); /* padding too: keys are compared with memcmp */
    key.op = op;
    key.g = *g;
    key.layout = layout;
    key.g.n = g->n / p->tasks;
    p->small = entry_get(&key);
    p->large = p->small;
    if (g->n % p->tasks != 0) {
        key.g.n++;
        p->large = entry_get(&key);
    }
    if (!p->small || !p->small->ok || !p->large || !p->large->ok)
        return false;
    p->partials = 0;
    if (op == TIDE_OP_CONV2D_BACKPROP_FILTER)
        p->partials = (uint64_t)(p->tasks - 1) * (uint64_t)filter_elements(g) * sizeof(float);
    p->slot = p->small->workspace > p->large->workspace ? p->small->workspace : p->large->workspace;
    return true;
}

/*
 * The pieces of the first layout (blocked, then plain; plain only under
 * TIDE_CPU_ONEDNN=plain) and the largest pieces (at most TASKS of them, else
 * fewer images each, down to one: smaller copies) whose slot is at most
 * slot_limit bytes: a choice
 * that depends on the shapes only, so every thread count runs the same
 * primitives and gets the same bits. False when none qualifies.
 */
static bool pieces_choose(enum tide_op op, const struct tide__kernel_conv *g, uint64_t slot_limit,
                          struct pieces *p)
{
    if (!tide__onednn_enabled() || !geometry_usable(g))
        return false;
    int64_t fewest = g->n < TASKS ? g->n : TASKS;
    for (int l = tide__onednn_plain_layouts() ? LAYOUT_PLAIN : LAYOUT_BLOCKED; l <= LAYOUT_PLAIN;
         l++) {
        /*
         * Images per piece from n / TASKS down to 1, halving (the filter gradient: n / TASKS
         * only): a handful of primitives per shape, also for a batch of thousands, whose every
         * piece size would cost a primitive each and make planning quadratic in the batch.
         */
        for (int64_t per = (g->n + fewest - 1) / fewest; per >= 1;
             per = per == 1 ? 0 : (per + 1) / 2) {
            int64_t tasks = op == TIDE_OP_CONV2D_BACKPROP_FILTER ? fewest : (g->n + per - 1) / per;
            if (pieces_get(op, g, (enum layout)l, tasks, p) && p->slot <= slot_limit)
                return true;
            if (op == TIDE_OP_CONV2D_BACKPROP_FILTER)
                break; /* more pieces would need more partial sums than the fallback's */
        }
    }
    return false;
}

bool tide__onednn_conv_workspace(enum tide_op op, const struct tide__kernel_conv *g,
                                 uint64_t slot_limit, uint64_t *bytes)
{
    struct pieces p;
    if (!pieces_choose(op, g, slot_limit, &p))
        return false;
    int64_t slots = p.tasks < tide__cpu_workers() ? p.tasks : tide__cpu_workers();
    *bytes = p.partials + (uint64_t)slots * p.slot;
    return true;
}

/* ============================================================================
 * Execution
 * ========================================================================== */

/* Fails the kernel with oneDNN's status s from call. */
static enum tide_status dnnl_failed(const struct tide_kernel_args *args, const char *call,
                                    dnnl_status_t s, struct tide_error *err)
{
    return tide_node_error(err, TIDE_INTERNAL, args->node, "oneDNN: %s failed with status %d", call,
                           (int)s);
}

static void memory_free(dnnl_memory_t m)
{
    if (m)
        dnnl_memory_destroy(m);
}

/*
 * Runs e on the operands data[0..2] (in tide's order) with workspace slot ws;
 * the memory objects live for this call only. On a failure returns oneDNN's
 * status and names the call in *call.
 */
static dnnl_status_t entry_run(const struct entry *e, void *const data_of[3], char *ws,
                               const char **failed)
{
    dnnl_status_t s;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t plain[3] = {NULL, NULL, NULL}, used[3] = {NULL, NULL, NULL};
    dnnl_memory_t scratch = NULL, reorder_scratch[3] = {NULL, NULL, NULL};
    const char *call = "dnnl_stream_create";

    omp_set_num_threads(1);
    s = dnnl_stream_create(&stream, tide__onednn_engine(), dnnl_stream_default_flags);
    for (int i = 0; s == dnnl_success && i < 3; i++) {
        const struct operand *o = &e->operands[i];
        void *data = data_of[o->slot];
        call = "dnnl_memory_create";
        s = dnnl_memory_create(&plain[i], &o->plain, tide__onednn_engine(), data);
        if (s == dnnl_success && o->reorder) {
            s = dnnl_memory_create(&used[i], &o->md, tide__onednn_engine(), ws + o->offset);
            if (s == dnnl_success)
                s = dnnl_memory_create(&reorder_scratch[i], &e->reorder_scratchpad_md[i],
                                       tide__onednn_engine(), ws);
        }
    }
    if (s == dnnl_success)
        s = dnnl_memory_create(&scratch, &e->scratchpad_md, tide__onednn_engine(), ws);

    /* The inputs into their blocked copies, the convolution, its output back to plain. */
    for (int i = 0; s == dnnl_success && i < 2; i++) {
        if (!e->operands[i].reorder)
            continue;
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, plain[i]},
                                {DNNL_ARG_TO, used[i]},
                                {DNNL_ARG_SCRATCHPAD, reorder_scratch[i]}};
        call = "reorder of an input";
        s = dnnl_primitive_execute(e->operands[i].reorder, stream, 3, a);
    }
    if (s == dnnl_success) {
        dnnl_exec_arg_t a[4];
        for (int i = 0; i < 3; i++)
            a[i] = (dnnl_exec_arg_t){e->operands[i].arg, used[i] ? used[i] : plain[i]};
        a[3] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
        call = "the convolution";
        s = dnnl_primitive_execute(e->primitive, stream, 4, a);
    }
    if (s == dnnl_success && e->operands[2].reorder) {
        dnnl_exec_arg_t a[3] = {{DNNL_ARG_FROM, used[2]},
                                {DNNL_ARG_TO, plain[2]},
                                {DNNL_ARG_SCRATCHPAD, reorder_scratch[2]}};
        call = "reorder of the output";
        s = dnnl_primitive_execute(e->operands[2].reorder, stream, 3, a);
    }
    if (s == dnnl_success) {
        call = "dnnl_stream_wait";
        s = dnnl_stream_wait(stream);
    }
    if (s != dnnl_success)
        *failed = call;

    for (int i = 0; i < 3; i++) {
        memory_free(plain[i]);
        memory_free(used[i]);
        memory_free(reorder_scratch[i]);
    }
    memory_free(scratch);
    if (stream)
        dnnl_stream_destroy(stream);
    return s;
}

/* One convolution's pieces, shared by its tasks. */
struct job {
    const struct tide__kernel_conv *g;
    enum tide_op op;
    struct pieces p;
    char *in0, *in1, *out0; /* tide's operands */
    char *partials;         /* Conv2DBackpropFilter: pieces 1.. */
    char *slots;            /* one per worker */
    pthread_mutex_t lock;
    dnnl_status_t status; /* the first failure */
    const char *failed;
};

/* Bytes of one image of the tensor with shape letter x (input), y (output). */
static uint64_t image_bytes(const struct tide__kernel_conv *g, char shape)
{
    return (uint64_t)(shape == 'x' ? g->c * g->h * g->w : g->k * g->oh * g->ow) * sizeof(float);
}

/* Piece t: images [first, last) through the primitive of its size, in slot worker. */
static void piece_task(void *ctx, int64_t t, int worker)
{
    struct job *j = ctx;
    const struct tide__kernel_conv *g = j->g;
    int64_t first = t * g->n / j->p.tasks, last = (t + 1) * g->n / j->p.tasks;
    const struct entry *e = last - first == j->p.small->key.g.n ? j->p.small : j->p.large;
    int arg[3];
    enum slot slot[3];
    char shape[3];
    operand_roles(j->op, arg, slot, shape);
    char *base[3] = {j->in0, j->in1, j->out0};
    void *data[3];
    for (int i = 0; i < 3; i++) {
        if (shape[i] == 'w') /* the filter, or the filter gradient's piece sum */
            data[i] = slot[i] == SLOT_OUT0 && t > 0
                          ? j->partials +
                                (uint64_t)(t - 1) * (uint64_t)filter_elements(g) * sizeof(float)
                          : base[i];
        else
            data[i] = base[i] + (uint64_t)first * image_bytes(g, shape[i]);
    }
    const char *failed = NULL;
    dnnl_status_t s = entry_run(e, data, j->slots + (uint64_t)worker * j->p.slot, &failed);
    if (s != dnnl_success)
        tide__onednn_record_failure(&j->lock, &j->status, &j->failed, s, failed);
}

enum tide_status tide__onednn_conv_run(const struct tide_kernel_args *args,
                                       const struct tide__kernel_conv *g, uint64_t slot_limit,
                                       bool *ran, struct tide_error *err)
{
    *ran = false;
    struct job j = {.g = g, .op = args->node->op, .status = dnnl_success};
    if (!pieces_choose(j.op, g, slot_limit, &j.p))
        return TIDE_OK;
    /* As many threads as the workspace has slots for (a plan made for fewer has fewer). */
    uint64_t have = args->workspace ? args->workspace_bytes : 0;
    if (have < j.p.partials + j.p.slot)
        return TIDE_OK; /* not planned for oneDNN: the fallback checks its own workspace */
    int workers = tide__cpu_workers();
    if (j.p.slot > 0 && (have - j.p.partials) / j.p.slot < (uint64_t)workers)
        workers = (int)((have - j.p.partials) / j.p.slot);
    j.in0 = args->inputs[0].data;
    j.in1 = args->inputs[1].data;
    j.out0 = args->outputs[0].data;
    j.partials = args->workspace;
    j.slots = (char *)args->workspace + j.p.partials;
    pthread_mutex_init(&j.lock, NULL);
    *ran = true;
    tide__onednn_count_run(j.op);
    tide__cpu_parallel(j.p.tasks, workers, piece_task, &j);
    pthread_mutex_destroy(&j.lock);
    if (j.status != dnnl_success)
        return dnnl_failed(args, j.failed, j.status, err);
    if (j.op == TIDE_OP_CONV2D_BACKPROP_FILTER) {
        int64_t size = filter_elements(g);
        float *dw = args->outputs[0].data;
        for (int64_t t = 1; t < j.p.tasks; t++) {
            const float *part = (const float *)j.partials + (t - 1) * size;
            for (int64_t i = 0; i < size; i++)
                dw[i] += part[i];
        }
    }
    return TIDE_OK;
}
