/* SPDX-License-Identifier: MIT */
/*
 * conv.c: Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter as oneDNN
 * primitives (convolution_forward, convolution_backward_data,
 * convolution_backward_weights), fp32, on tide's NCHW / KCRS tensors.
 *
 * Layouts: tide stores activations as NCHW and filters as KCRS (oneDNN's
 * nchw and oihw). oneDNN's direct convolutions (jit:avx512_core, jit:avx2)
 * want channel-blocked layouts (nChw16c, ...); on plain layouts it picks its
 * im2col + GEMM implementation. Measured on this project's 2-core VM (AVX-512)
 * the direct kernels are about twice as fast, and the reorders to and from
 * the blocked layouts cost a few percent of that, so by default the primitive
 * is created with format "any" and each operand whose chosen layout is not
 * the plain one is reordered into (inputs) or out of (the output) a blocked
 * copy in the workspace. TIDE_CPU_ONEDNN=plain keeps every operand plain
 * (no copies: less workspace, slower); TIDE_CPU_ONEDNN=0 turns oneDNN off.
 *
 * Workspace: the primitives run in user scratchpad mode
 * (dnnl_scratchpad_mode_user), so every byte they use is in the workspace the
 * memory plan reserved: the largest scratchpad of the convolution and its
 * reorders (they run one after another), then the blocked copies, each at a
 * 64-byte aligned offset. tide__onednn_conv_workspace reports that sum, so
 * the plan stays exact.
 *
 * Primitive cache: one entry per (op, geometry, layout policy, thread count),
 * created the first time the memory plan asks for the node's workspace (the
 * compile-time hook; a kernel called without a plan creates it on first use)
 * and kept for the life of the process: a training job has a handful of
 * convolution shapes, and re-creating a primitive costs about a millisecond.
 * The thread count is part of the key because oneDNN fixes a primitive's
 * thread count, and with it its scratchpad and how its filter gradient
 * sums over the batch, when it creates the primitive.
 *
 * Threads: Debian's libdnnl runs on OpenMP (libgomp). OpenMP's thread count
 * is a setting of the calling thread, so every creation and execution here
 * first calls omp_set_num_threads with the pool's thread count
 * (tide__cpu_workers, which --threads sets): --threads 1 means one core.
 * The kernels' own pool sleeps meanwhile (kernels run one at a time on a
 * stream). A primitive's cache entry and its oneDNN objects are read-only
 * once made, so executor threads of several jobs may run the same primitive
 * at once; each call makes its own memory objects and stream.
 *
 * Determinism: at a fixed thread count a primitive gives the same bits on
 * every run (oneDNN splits work by its thread count only). Across thread
 * counts the filter gradient differs in the last bits (its sum over images
 * is split by thread), unlike the fallback, which is the same at any count;
 * tests compare runs at one thread count (see test_kernels.c).
 *
 * Threads and state: cache.lock guards the cache list; entries are never
 * changed after they are published, and never freed.
 */
#include "kernels/onednn/onednn.h"

#include <inttypes.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu-impl.h"

/* Offsets of the blocked copies in the workspace are multiples of this. */
#define ALIGN 64

/* How the primitive's operands are laid out. */
enum layout {
    LAYOUT_BLOCKED, /* oneDNN chooses; reorders into workspace copies */
    LAYOUT_PLAIN,   /* nchw / oihw, no copies */
};

/* The settings, from TIDE_CPU_ONEDNN at the first use; the switch can be flipped later. */
static pthread_once_t settings_once = PTHREAD_ONCE_INIT;
static atomic_bool enabled;
static enum layout layout_policy = LAYOUT_BLOCKED;
static dnnl_engine_t engine;

static void settings_init(void)
{
    const char *env = getenv("TIDE_CPU_ONEDNN");
    bool on = true;
    if (env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0))
        on = false;
    if (env && strcmp(env, "plain") == 0)
        layout_policy = LAYOUT_PLAIN;
    if (on && dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        on = false; /* no CPU engine: the fallback runs everything */
    atomic_store(&enabled, on);
}

bool tide__onednn_enabled(void)
{
    pthread_once(&settings_once, settings_init);
    return atomic_load(&enabled) && engine != NULL;
}

void tide_cpu_kernels_use_onednn(bool on)
{
    pthread_once(&settings_once, settings_init);
    atomic_store(&enabled, on);
}

bool tide_cpu_kernels_onednn_available(void)
{
    pthread_once(&settings_once, settings_init);
    return engine != NULL;
}

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
    struct tide__kernel_conv g;
    enum layout layout;
    int threads;
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

/* Memory descriptors of x, w and y with format tag fmt (any, or the plain ones if 0). */
static bool conv_mds(const struct tide__kernel_conv *g, bool any, dnnl_memory_desc_t *x,
                     dnnl_memory_desc_t *w, dnnl_memory_desc_t *y)
{
    dnnl_dims_t xd = {g->n, g->c, g->h, g->w}, wd = {g->k, g->c, g->r, g->s};
    dnnl_dims_t yd = {g->n, g->k, g->oh, g->ow};
    return dnnl_memory_desc_init_by_tag(x, 4, xd, dnnl_f32,
                                        any ? dnnl_format_tag_any : dnnl_nchw) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(w, 4, wd, dnnl_f32,
                                        any ? dnnl_format_tag_any : dnnl_oihw) == dnnl_success &&
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
    /* oneDNN's right padding: what the output size formula leaves past the last window. */
    dnnl_dims_t pad_r = {(g->oh - 1) * g->sh + g->r - g->h - g->ph,
                         (g->ow - 1) * g->sw + g->s - g->w - g->pw};
    dnnl_convolution_desc_t fwd_d, d;
    dnnl_primitive_desc_t fwd = NULL, pd = NULL;
    if (dnnl_convolution_forward_desc_init(&fwd_d, dnnl_forward_training, dnnl_convolution_direct,
                                           &x, &w, NULL, &y, strides, pad_l,
                                           pad_r) != dnnl_success ||
        dnnl_primitive_desc_create(&fwd, &fwd_d, attr, engine, NULL) != dnnl_success)
        return NULL;
    if (key->op == TIDE_OP_CONV2D)
        return fwd;
    dnnl_status_t s;
    if (key->op == TIDE_OP_CONV2D_BACKPROP_INPUT)
        s = dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &x, &w, &y,
                                                     strides, pad_l, pad_r);
    else
        s = dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &x, &w, NULL,
                                                        &y, strides, pad_l, pad_r);
    if (s == dnnl_success && dnnl_primitive_desc_create(&pd, &d, attr, engine, fwd) != dnnl_success)
        pd = NULL;
    dnnl_primitive_desc_destroy(fwd);
    return pd;
}

/* A reorder primitive from src to dst with a user scratchpad, or NULL. */
static dnnl_primitive_t make_reorder(const dnnl_memory_desc_t *src, const dnnl_memory_desc_t *dst,
                                     const_dnnl_primitive_attr_t attr,
                                     dnnl_memory_desc_t *scratchpad)
{
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t p = NULL;
    if (dnnl_reorder_primitive_desc_create(&pd, src, engine, dst, engine, attr) != dnnl_success)
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
    dnnl_primitive_attr_t attr;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success)
        return;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) == dnnl_success)
        pd = conv_pd(&e->key, attr);
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

/* The cache entry of key, created (with the calling thread's OpenMP count set) if new. */
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
            omp_set_num_threads(key->threads);
            entry_build(e);
            e->next = cache.head;
            cache.head = e;
        }
    }
    pthread_mutex_unlock(&cache.lock);
    return e;
}

static void key_make(struct key *key, enum tide_op op, const struct tide__kernel_conv *g,
                     int threads)
{
    memset(key, 0, sizeof(*key)); /* padding too: keys are compared with memcmp */
    key->op = op;
    key->g = *g;
    key->layout = layout_policy;
    key->threads = threads;
}

/* Whether oneDNN may be asked about g at all: every dimension at least 1. */
static bool geometry_usable(const struct tide__kernel_conv *g)
{
    return g->n > 0 && g->c > 0 && g->h > 0 && g->w > 0 && g->k > 0 && g->r > 0 && g->s > 0 &&
           g->oh > 0 && g->ow > 0;
}

bool tide__onednn_conv_workspace(enum tide_op op, const struct tide__kernel_conv *g,
                                 uint64_t *bytes)
{
    if (!tide__onednn_enabled() || !geometry_usable(g))
        return false;
    struct key key;
    key_make(&key, op, g, tide__cpu_workers());
    const struct entry *e = entry_get(&key);
    if (!e || !e->ok)
        return false;
    *bytes = e->workspace;
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

/* Runs e on args; the memory objects live for this call only. */
static enum tide_status entry_run(const struct entry *e, const struct tide_kernel_args *args,
                                  struct tide_error *err)
{
    enum tide_status st = TIDE_OK;
    dnnl_status_t s;
    dnnl_stream_t stream = NULL;
    dnnl_memory_t plain[3] = {NULL, NULL, NULL}, used[3] = {NULL, NULL, NULL};
    dnnl_memory_t scratch = NULL, reorder_scratch[3] = {NULL, NULL, NULL};
    char *ws = args->workspace;
    const char *call = "dnnl_stream_create";

    omp_set_num_threads(e->key.threads);
    s = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    for (int i = 0; s == dnnl_success && i < 3; i++) {
        const struct operand *o = &e->operands[i];
        void *data = o->slot == SLOT_OUT0 ? args->outputs[0].data
                                          : args->inputs[o->slot == SLOT_IN0 ? 0 : 1].data;
        call = "dnnl_memory_create";
        s = dnnl_memory_create(&plain[i], &o->plain, engine, data);
        if (s == dnnl_success && o->reorder) {
            s = dnnl_memory_create(&used[i], &o->md, engine, ws + o->offset);
            if (s == dnnl_success)
                s = dnnl_memory_create(&reorder_scratch[i], &e->reorder_scratchpad_md[i], engine,
                                       ws);
        }
    }
    if (s == dnnl_success)
        s = dnnl_memory_create(&scratch, &e->scratchpad_md, engine, ws);

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
        st = dnnl_failed(args, call, s, err);

    for (int i = 0; i < 3; i++) {
        memory_free(plain[i]);
        memory_free(used[i]);
        memory_free(reorder_scratch[i]);
    }
    memory_free(scratch);
    if (stream)
        dnnl_stream_destroy(stream);
    return st;
}

enum tide_status tide__onednn_conv_run(const struct tide_kernel_args *args,
                                       const struct tide__kernel_conv *g, bool *ran,
                                       struct tide_error *err)
{
    *ran = false;
    if (!tide__onednn_enabled() || !geometry_usable(g))
        return TIDE_OK;
    /* The most threads whose workspace fits what the plan reserved (a plan made for fewer). */
    for (int threads = tide__cpu_workers(); threads >= 1; threads--) {
        struct key key;
        key_make(&key, args->node->op, g, threads);
        const struct entry *e = entry_get(&key);
        if (!e || !e->ok)
            return TIDE_OK;
        if (e->workspace > 0 && (!args->workspace || args->workspace_bytes < e->workspace))
            continue;
        *ran = true;
        return entry_run(e, args, err);
    }
    return TIDE_OK;
}
