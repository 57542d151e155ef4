/* SPDX-License-Identifier: MIT */
/*
 * executor.c: runs a planned graph once per step on a backend's streams.
 *
 * The executor is the last stage of the pipeline: everything it does was
 * decided by the passes before it (each node's stream, each tensor's arena
 * offset, the order, the reuse edges), so a step is one walk over the order
 * that enqueues work and never decides, allocates or waits for the device
 * until the end.
 *
 * DESIGN
 * ------
 *
 * Threads. One host thread (the caller's: the daemon's executor thread, a
 * test, tide-bench) drives an executor; nothing here is locked, and two
 * threads must not call into one executor at once. The backend runs the work
 * on its own threads (the CPU backend: one worker per stream; CUDA: the
 * device). The executor's state is touched by the host thread only, except:
 *  - the arena, the kernel arguments and the placeholders' staging buffers,
 *    which the backend's workers read (and the arena, write) while a step
 *    runs. The host thread writes the staging buffers (feed) and kernel
 *    arguments (creation) only while no step is in flight: every step ends
 *    with all streams synchronised.
 *  - the step counter, which kernels read through args.step (Adam's bias
 *    correction). The host thread changes it only between steps.
 *
 * Streams. Each executor owns three backend streams: compute, h2d and d2h
 * (enum tide_stream). A node runs on the stream its annotation names
 * (node->stream); the session puts Placeholders on h2d and everything else
 * on compute. Work on one stream runs in the order it was enqueued, which is
 * the plan's order, so a dependency between two nodes of one stream needs
 * nothing.
 *
 * Events. A dependency that crosses streams (a data or control input whose
 * producer runs on another stream) is an event: the producer records it on
 * its stream right after its work, and the consumer's stream waits on it
 * right before the consumer's work. Each producer with at least one
 * cross-stream user owns one event, created once and re-recorded every step
 * (a wait refers to the latest record, which in a step always precedes the
 * wait since producers come first in the order). Memplan's reuse edges are
 * control edges like any other, so a region taken over across streams is
 * ordered the same way.
 *
 * Ordering within one position of the order, for node v on stream s:
 *  1. v's output regions and workspace become alive (accounting, below);
 *  2. s waits on the events of v's cross-stream inputs;
 *  3. v's work is enqueued on s (a kernel, or a Placeholder's h2d copy);
 *  4. the regions whose last reader is v die; in poison mode each is filled
 *     with a NaN pattern on s, right behind v;
 *  5. v's event, if it has one, is recorded on s.
 * Recording after the poison fills matters: a producer on another stream
 * that takes over a dead region waits on that event, so it cannot start
 * before the fill has finished and overwrite its fresh data with poison.
 *
 * Step boundaries. A step ends by synchronising the three streams, so the
 * next step starts from an idle device, feeds may be restaged, and no event
 * from one step is waited on in the next. A kernel failure is sticky on its
 * stream (the backend skips that stream's later work) and comes back from
 * the sync; the step fails with the kernel's message (which names the node)
 * prefixed by the step number, and the executor stays usable: the next
 * step runs normally.
 *
 * Accounting. As the walk enqueues, it replays the plan's lifetimes: a region
 * becomes alive at its producer and dies after its last reader's position.
 * Live regions are kept in a treap keyed by offset (nodes preallocated, one
 * per region, so a step allocates nothing); inserting a region that overlaps
 * a live one is a planner bug and fails the step with TIDE_INTERNAL naming
 * both. The largest live offset + size is the step's measured high-water
 * mark, which must equal the plan's peak. Persistent regions (Variables,
 * Consts, pinned outputs) are alive from creation on.
 *
 * Ownership: the executor borrows the graph (kernel arguments point at its
 * nodes) and the backend, which must outlive it; it copies what it needs of
 * the plan. It owns its arena, streams, events and staging buffers.
 */
#include "runtime/executor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N_STREAMS 3
/* A quiet NaN with a payload: what a read-after-free reads in poison mode. */
#define POISON_PATTERN 0x7fc00001u
#define NIL            UINT32_MAX

/* What a position of the order does in a step. */
enum exec_kind {
    EXEC_NOTHING = 0, /* Variable, Const: persistent, nothing to run */
    EXEC_COPY_IN = 1, /* Placeholder: h2d copy from its staging buffer */
    EXEC_KERNEL = 2,  /* a compute op */
};

struct exec_position {
    uint32_t node;
    uint8_t kind;   /* enum exec_kind */
    uint8_t stream; /* enum tide_stream */
    struct tide_kernel_args args;
    uint32_t wait_begin; /* into ex->waits: producer ids of cross-stream inputs */
    uint32_t wait_count;
    uint32_t birth_begin; /* into ex->births: regions that become alive here */
    uint32_t birth_count;
};

struct tide_executor {
    /* Borrowed. */
    struct tide_graph *graph;
    struct tide_backend *backend;
    struct tide_executor_options options;

    /* The plan, copied. */
    uint32_t n_nodes; /* the graph's node count at creation: the size of per-node arrays */
    uint32_t n_order;
    uint32_t n_regions;
    struct tide_memplan_region *regions;
    uint32_t *death_offsets; /* n_order + 1 */
    uint32_t *deaths;
    uint64_t peak_bytes;

    /* Device state. */
    uint8_t *arena; /* budget_bytes of device memory (NULL when 0) */
    struct tide_stream *streams[N_STREAMS];
    struct tide_event **events; /* per node id; NULL: no cross-stream user */

    /* The step program, built once. */
    struct exec_position *positions; /* n_order */
    uint32_t *waits;
    uint32_t *births;
    struct tide_tensor_view *views; /* every position's inputs, then outputs */
    uint32_t *output_region;        /* per (node, output): region index or NIL */
    uint32_t *output_region_base;   /* per node id: index into output_region */
    uint32_t *position;             /* per node id: position, or NIL */

    /* Placeholders. */
    void **staging;    /* per node id: host buffer, for Placeholders in the plan */
    uint8_t *fed;      /* per node id */
    uint8_t *produced; /* per node id: ran in a completed step */

    /* Accounting: a treap of live regions keyed by offset. */
    uint32_t *treap_left;
    uint32_t *treap_right;
    uint32_t *treap_priority;
    uint32_t treap_root;
    uint8_t *alive;       /* per region */
    uint32_t *persistent; /* persistent region indices */
    uint32_t n_persistent;
    uint64_t persistent_top;
    uint64_t high_water;

    /* Profiling (options.profile): two events per position and the results. */
    struct tide_event **profile_start;
    struct tide_event **profile_end;
    double *node_ms; /* per node id */

    uint64_t step; /* 1-based count of steps run; kernels read it */
};

/* ============================================================================
 * Small helpers
 * ========================================================================== */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void *xcalloc(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

/* "output 0 of \"conv1\"" or "the workspace of \"conv1\"", for messages. */
static void describe_region(const struct tide_executor *ex, uint32_t r, char *buf, size_t size)
{
    const struct tide_memplan_region *region = &ex->regions[r];
    const char *name = ex->graph->nodes[region->node].name;
    if (region->output == UINT32_MAX)
        snprintf(buf, size, "the workspace of \"%s\" [%" PRIu64 ", %" PRIu64 ")", name,
                 region->offset, region->offset + region->bytes);
    else
        snprintf(buf, size, "output %u of \"%s\" [%" PRIu64 ", %" PRIu64 ")", region->output, name,
                 region->offset, region->offset + region->bytes);
}

/* ============================================================================
 * Accounting: live regions in a treap keyed by offset
 * ========================================================================== */

static uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Splits t into regions with offset < key (*lo) and >= key (*hi). */
static void treap_split(struct tide_executor *ex, uint32_t t, uint64_t key, uint32_t *lo,
                        uint32_t *hi)
{
    if (t == NIL) {
        *lo = *hi = NIL;
        return;
    }
    if (ex->regions[t].offset < key) {
        treap_split(ex, ex->treap_right[t], key, &ex->treap_right[t], hi);
        *lo = t;
    } else {
        treap_split(ex, ex->treap_left[t], key, lo, &ex->treap_left[t]);
        *hi = t;
    }
}

/* Joins two treaps where every key of a is below every key of b. */
static uint32_t treap_merge(struct tide_executor *ex, uint32_t a, uint32_t b)
{
    if (a == NIL)
        return b;
    if (b == NIL)
        return a;
    if (ex->treap_priority[a] > ex->treap_priority[b]) {
        ex->treap_right[a] = treap_merge(ex, ex->treap_right[a], b);
        return a;
    }
    ex->treap_left[b] = treap_merge(ex, a, ex->treap_left[b]);
    return b;
}

static void treap_reset(struct tide_executor *ex)
{
    ex->treap_root = NIL;
}

/*
 * Makes region r alive. Live regions never overlap, so the only candidates
 * for an overlap are the live neighbours by offset: the last one starting at
 * or below r and the first one starting above it. On an overlap, *clash gets
 * the live region and r stays dead.
 */
static bool treap_insert(struct tide_executor *ex, uint32_t r, uint32_t *clash)
{
    uint64_t start = ex->regions[r].offset;
    uint64_t end = start + ex->regions[r].bytes;
    uint32_t below = NIL, above = NIL;
    for (uint32_t t = ex->treap_root; t != NIL;) {
        if (ex->regions[t].offset <= start) {
            below = t;
            t = ex->treap_right[t];
        } else {
            above = t;
            t = ex->treap_left[t];
        }
    }
    if (below != NIL && ex->regions[below].offset + ex->regions[below].bytes > start) {
        *clash = below;
        return false;
    }
    if (above != NIL && ex->regions[above].offset < end) {
        *clash = above;
        return false;
    }
    uint32_t lo, hi;
    ex->treap_left[r] = ex->treap_right[r] = NIL;
    treap_split(ex, ex->treap_root, start, &lo, &hi);
    ex->treap_root = treap_merge(ex, treap_merge(ex, lo, r), hi);
    if (end > ex->high_water)
        ex->high_water = end;
    return true;
}

static void treap_erase(struct tide_executor *ex, uint32_t r)
{
    uint64_t key = ex->regions[r].offset;
    uint32_t lo, mid, hi;
    treap_split(ex, ex->treap_root, key, &lo, &mid);
    treap_split(ex, mid, key + 1, &mid, &hi);
    /* mid is r alone: live regions have distinct offsets. */
    ex->treap_root = treap_merge(ex, lo, hi);
}

/* Marks region r alive at position p; a clash is a planner bug. */
static enum tide_status region_born(struct tide_executor *ex, uint32_t r, uint32_t p,
                                    struct tide_error *err)
{
    uint32_t clash;
    if (ex->regions[r].bytes && !treap_insert(ex, r, &clash)) {
        char a[TIDE_MAX_NAME + 96], b[TIDE_MAX_NAME + 96];
        describe_region(ex, r, a, sizeof(a));
        describe_region(ex, clash, b, sizeof(b));
        return tide_error_set(err, TIDE_INTERNAL,
                              "memory plan violated at position %u: %s overlaps %s, which is "
                              "still alive",
                              p, a, b);
    }
    ex->alive[r] = 1;
    return TIDE_OK;
}

/* Starts a step's accounting: only the persistent regions are alive. */
static void accounting_reset(struct tide_executor *ex)
{
    for (uint32_t r = 0; r < ex->n_regions; r++)
        ex->alive[r] = ex->regions[r].persistent;
    treap_reset(ex);
    ex->high_water = 0;
    for (uint32_t i = 0; i < ex->n_persistent; i++) {
        uint32_t clash;
        uint32_t r = ex->persistent[i];
        if (ex->regions[r].bytes)
            treap_insert(ex, r, &clash); /* checked at creation */
    }
    ex->high_water = ex->persistent_top;
}

/* ============================================================================
 * Creation
 * ========================================================================== */

/* Checks that the executor can run node v, and what it does. */
static enum tide_status classify(struct tide_executor *ex, uint32_t v, struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    const struct tide_node *node = &g->nodes[v];
    const struct tide_op_info *info = tide_op_info(node->op);
    struct exec_position *pos = &ex->positions[ex->position[v]];
    if (node->stream >= N_STREAMS)
        return tide_node_error(err, TIDE_INVALID, node, "has stream %u; there are %d", node->stream,
                               N_STREAMS);
    if (info->flags & TIDE_OP_F_MEMORY)
        return tide_node_error(err, TIDE_UNSUPPORTED, node,
                               "memory ops are not supported by this executor yet");
    for (uint32_t k = 0; k < node->n_outputs; k++) {
        if (ex->output_region[ex->output_region_base[v] + k] == NIL)
            return tide_node_error(err, TIDE_UNSUPPORTED, node,
                                   "output %u is not in device memory (home %s); host-homed "
                                   "tensors need Fetch/WriteBack, which this executor does not "
                                   "run yet",
                                   k, node->outputs[k].home == TIDE_HOME_HOST ? "host" : "?");
    }
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        const struct tide_edge *e = &node->inputs[i];
        if (e->node >= g->n_nodes || ex->position[e->node] == NIL ||
            ex->position[e->node] >= ex->position[v])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u is not produced earlier in the plan", i);
    }
    pos->node = v;
    pos->stream = node->stream;
    if (node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST)
        pos->kind = EXEC_NOTHING;
    else if (node->op == TIDE_OP_PLACEHOLDER)
        pos->kind = EXEC_COPY_IN;
    else
        pos->kind = EXEC_KERNEL;
    return TIDE_OK;
}

static void view_of(const struct tide_executor *ex, uint32_t v, uint32_t k,
                    struct tide_tensor_view *view)
{
    const struct tide_output *out = &ex->graph->nodes[v].outputs[k];
    uint32_t r = ex->output_region[ex->output_region_base[v] + k];
    view->data = ex->arena ? ex->arena + ex->regions[r].offset : NULL;
    view->dtype = out->dtype;
    view->shape = out->shape;
    view->nbytes = out->nbytes;
}

/* Maps the plan's regions onto nodes and checks them against the graph. */
static enum tide_status map_regions(struct tide_executor *ex, const struct tide_memplan *plan,
                                    struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    uint64_t total_outputs = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        ex->output_region_base[v] = (uint32_t)total_outputs;
        total_outputs += g->nodes[v].n_outputs;
    }
    ex->output_region = xcalloc(total_outputs, sizeof(*ex->output_region));
    if (!ex->output_region)
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory");
    memset(ex->output_region, 0xff, total_outputs * sizeof(*ex->output_region));
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        const struct tide_memplan_region *region = &plan->regions[r];
        if (region->node >= g->n_nodes || ex->position[region->node] == NIL ||
            region->first > region->last || region->last >= plan->n_order ||
            region->offset > plan->peak_bytes || region->bytes > plan->peak_bytes - region->offset)
            return tide_error_set(err, TIDE_INVALID, "executor: region %u of the plan is invalid",
                                  r);
        const struct tide_node *node = &g->nodes[region->node];
        if (region->output == UINT32_MAX) {
            if (plan->workspace_offset[region->node] != region->offset)
                return tide_node_error(err, TIDE_INVALID, node,
                                       "workspace offset differs from its plan region");
            continue;
        }
        if (region->output >= node->n_outputs)
            return tide_error_set(err, TIDE_INVALID, "executor: region %u of the plan is invalid",
                                  r);
        const struct tide_output *out = &node->outputs[region->output];
        if (out->home != TIDE_HOME_DEVICE || out->offset != region->offset ||
            out->nbytes > region->bytes)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "output %u does not match the memory plan (the graph changed "
                                   "after planning?)",
                                   region->output);
        ex->output_region[ex->output_region_base[region->node] + region->output] = r;
    }
    return TIDE_OK;
}

/* Builds every position's kernel arguments, waits and births. */
static enum tide_status build_program(struct tide_executor *ex, const struct tide_memplan *plan,
                                      struct tide_error *err)
{
    struct tide_graph *g = ex->graph;
    uint64_t n_views = 0, n_waits = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct tide_node *node = &g->nodes[plan->order[p]];
        n_views += node->n_inputs + node->n_outputs;
        n_waits += node->n_inputs + node->n_controls;
    }
    ex->views = xcalloc(n_views, sizeof(*ex->views));
    ex->waits = xcalloc(n_waits, sizeof(*ex->waits));
    ex->births = xcalloc(ex->n_regions, sizeof(*ex->births));
    ex->events = xcalloc(g->n_nodes, sizeof(*ex->events));
    uint32_t *seen = xcalloc(g->n_nodes, sizeof(*seen));
    uint32_t *birth_count = xcalloc((size_t)ex->n_order + 1, sizeof(*birth_count));
    enum tide_status st = TIDE_OK;
    if (!ex->views || !ex->waits || !ex->births || !ex->events || !seen || !birth_count) {
        st = tide_error_set(err, TIDE_NOMEM, "executor: out of memory");
        goto out;
    }

    /* Births: non-persistent regions, grouped by first position. */
    for (uint32_t r = 0; r < ex->n_regions; r++) {
        if (!ex->regions[r].persistent)
            birth_count[ex->regions[r].first]++;
    }
    uint32_t next = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        ex->positions[p].birth_begin = next;
        next += birth_count[p];
    }
    for (uint32_t r = 0; r < ex->n_regions; r++) {
        if (ex->regions[r].persistent)
            continue;
        struct exec_position *pos = &ex->positions[ex->regions[r].first];
        ex->births[pos->birth_begin + pos->birth_count++] = r;
    }

    size_t view = 0, wait = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        struct exec_position *pos = &ex->positions[p];
        uint32_t v = pos->node;
        const struct tide_node *node = &g->nodes[v];
        struct tide_kernel_args *args = &pos->args;
        args->node = node;
        args->n_inputs = node->n_inputs;
        args->inputs = &ex->views[view];
        for (uint32_t i = 0; i < node->n_inputs; i++)
            view_of(ex, node->inputs[i].node, node->inputs[i].output, &ex->views[view++]);
        args->n_outputs = node->n_outputs;
        args->outputs = &ex->views[view];
        for (uint32_t k = 0; k < node->n_outputs; k++)
            view_of(ex, v, k, &ex->views[view++]);
        args->workspace_bytes = plan->workspace_bytes[v];
        args->workspace =
            args->workspace_bytes && ex->arena ? ex->arena + plan->workspace_offset[v] : NULL;
        args->step = &ex->step;

        /* Cross-stream inputs, once each; sources that run nothing need no wait. */
        pos->wait_begin = (uint32_t)wait;
        for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
            uint32_t u =
                i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
            if (u >= g->n_nodes || ex->position[u] == NIL || ex->position[u] >= p) {
                st = tide_node_error(err, TIDE_INVALID, node,
                                     "control input %u does not run earlier in the plan",
                                     i - node->n_inputs);
                goto out;
            }
            const struct exec_position *from = &ex->positions[ex->position[u]];
            if (from->kind == EXEC_NOTHING || from->stream == pos->stream || seen[u] == p + 1)
                continue;
            seen[u] = p + 1;
            ex->waits[wait++] = u;
            if (!ex->events[u]) {
                st = tide_backend_event_new(ex->backend, &ex->events[u], err);
                if (st != TIDE_OK)
                    goto out;
            }
        }
        pos->wait_count = (uint32_t)(wait - pos->wait_begin);
    }
out:
    free(seen);
    free(birth_count);
    return st;
}

/* Copies Consts and initial Variable values into their regions. */
static enum tide_status init_persistent(struct tide_executor *ex, struct tide_error *err)
{
    struct tide_graph *g = ex->graph;
    uint64_t largest = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct tide_node *node = &g->nodes[ex->positions[p].node];
        if ((node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST) &&
            node->outputs[0].nbytes > largest)
            largest = node->outputs[0].nbytes;
    }
    if (largest == 0)
        return TIDE_OK;
    void *scratch = NULL;
    enum tide_status st = tide_backend_host_alloc(ex->backend, largest, &scratch, err);
    if (st != TIDE_OK)
        return st;
    struct tide_stream *h2d = ex->streams[TIDE_STREAM_H2D];
    for (uint32_t p = 0; p < ex->n_order && st == TIDE_OK; p++) {
        uint32_t v = ex->positions[p].node;
        const struct tide_node *node = &g->nodes[v];
        uint64_t nbytes = node->outputs[0].nbytes;
        if ((node->op != TIDE_OP_VARIABLE && node->op != TIDE_OP_CONST) || nbytes == 0)
            continue;
        if (node->op == TIDE_OP_VARIABLE) {
            st = tide_variable_init(node, ex->options.seed, scratch, err);
        } else {
            const struct tide_const_tensor *t = node->attrs[TIDE_ATTR_CONST_value].tensor;
            if (!t || t->nbytes != nbytes)
                st = tide_node_error(err, TIDE_INVALID, node,
                                     "value has %" PRIu64 " bytes, the output %" PRIu64,
                                     t ? t->nbytes : 0, nbytes);
            else
                memcpy(scratch, t->data, nbytes);
        }
        if (st != TIDE_OK)
            break;
        uint32_t r = ex->output_region[ex->output_region_base[v]];
        st = tide_backend_copy_h2d(ex->backend, ex->arena + ex->regions[r].offset, scratch, nbytes,
                                   h2d);
        /* The scratch buffer is reused: wait for the copy before refilling it. */
        enum tide_status sync = tide_backend_stream_sync(ex->backend, h2d, err);
        if (st == TIDE_OK)
            st = sync;
        else
            tide_node_error(err, st, node, "copying the initial value to the device failed");
    }
    tide_backend_host_free(ex->backend, scratch);
    return st;
}

static enum tide_status create(struct tide_executor *ex, const struct tide_memplan *plan,
                               struct tide_error *err)
{
    struct tide_graph *g = ex->graph;
    uint32_t n = g->n_nodes;
    enum tide_status st;

    if (plan->n_order > n)
        return tide_error_set(err, TIDE_INVALID, "executor: the plan has %u positions for %u nodes",
                              plan->n_order, n);
    if (ex->options.budget_bytes < plan->peak_bytes)
        return tide_error_set(err, TIDE_DOES_NOT_FIT,
                              "the memory plan needs %" PRIu64 " bytes of device memory, the "
                              "budget is %" PRIu64 " bytes",
                              plan->peak_bytes, ex->options.budget_bytes);
    if (ex->options.poison && !ex->backend->iface->fill32)
        return tide_error_set(err, TIDE_UNSUPPORTED, "poison mode: the %s backend cannot fill",
                              tide_backend_name(ex->backend));

    /* Copy what we need of the plan. */
    ex->n_nodes = n;
    ex->n_order = plan->n_order;
    ex->n_regions = plan->n_regions;
    ex->peak_bytes = plan->peak_bytes;
    ex->regions = xcalloc(plan->n_regions, sizeof(*ex->regions));
    ex->death_offsets = xcalloc((size_t)plan->n_order + 1, sizeof(*ex->death_offsets));
    ex->deaths = xcalloc(plan->n_regions, sizeof(*ex->deaths));
    ex->positions = xcalloc(plan->n_order, sizeof(*ex->positions));
    ex->position = xcalloc(n, sizeof(*ex->position));
    ex->output_region_base = xcalloc(n, sizeof(*ex->output_region_base));
    ex->staging = xcalloc(n, sizeof(*ex->staging));
    ex->fed = xcalloc(n, 1);
    ex->produced = xcalloc(n, 1);
    ex->treap_left = xcalloc(plan->n_regions, sizeof(*ex->treap_left));
    ex->treap_right = xcalloc(plan->n_regions, sizeof(*ex->treap_right));
    ex->treap_priority = xcalloc(plan->n_regions, sizeof(*ex->treap_priority));
    ex->alive = xcalloc(plan->n_regions, 1);
    ex->persistent = xcalloc(plan->n_regions, sizeof(*ex->persistent));
    if (!ex->regions || !ex->death_offsets || !ex->deaths || !ex->positions || !ex->position ||
        !ex->output_region_base || !ex->staging || !ex->fed || !ex->produced || !ex->treap_left ||
        !ex->treap_right || !ex->treap_priority || !ex->alive || !ex->persistent)
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory for %u nodes", n);
    if (plan->n_regions)
        memcpy(ex->regions, plan->regions, plan->n_regions * sizeof(*ex->regions));
    memcpy(ex->death_offsets, plan->death_offsets,
           ((size_t)plan->n_order + 1) * sizeof(*ex->death_offsets));
    if (plan->death_offsets[plan->n_order] > plan->n_regions)
        return tide_error_set(err, TIDE_INVALID, "executor: the plan's death lists are invalid");
    if (plan->n_regions)
        memcpy(ex->deaths, plan->deaths, plan->death_offsets[plan->n_order] * sizeof(*ex->deaths));
    for (uint32_t i = 0; i < plan->death_offsets[plan->n_order]; i++) {
        if (ex->deaths[i] >= plan->n_regions)
            return tide_error_set(err, TIDE_INVALID, "executor: a death list is invalid");
    }
    for (uint32_t v = 0; v < n; v++)
        ex->position[v] = NIL;
    for (uint32_t p = 0; p < plan->n_order; p++) {
        uint32_t v = plan->order[p];
        if (v >= n || ex->position[v] != NIL)
            return tide_error_set(err, TIDE_INVALID, "executor: plan position %u is invalid", p);
        ex->position[v] = p;
    }
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        ex->treap_priority[r] = hash32(r);
        if (plan->regions[r].persistent) {
            ex->persistent[ex->n_persistent++] = r;
            uint64_t end = plan->regions[r].offset + plan->regions[r].bytes;
            if (end > ex->persistent_top)
                ex->persistent_top = end;
        }
    }
    st = map_regions(ex, plan, err);
    for (uint32_t p = 0; st == TIDE_OK && p < plan->n_order; p++)
        st = classify(ex, plan->order[p], err);
    if (st != TIDE_OK)
        return st;

    /* Persistent regions are alive from now on; they must not overlap each other. */
    treap_reset(ex);
    for (uint32_t i = 0; i < ex->n_persistent; i++) {
        st = region_born(ex, ex->persistent[i], 0, err);
        if (st != TIDE_OK)
            return st;
    }

    /* Device resources. */
    if (ex->options.budget_bytes) {
        void *base = NULL;
        st = tide_backend_arena_alloc(ex->backend, ex->options.budget_bytes, &base, err);
        if (st != TIDE_OK)
            return st;
        ex->arena = base;
    }
    for (int s = 0; s < N_STREAMS; s++) {
        st = tide_backend_stream_new(ex->backend, &ex->streams[s], err);
        if (st != TIDE_OK)
            return st;
    }
    st = build_program(ex, plan, err);
    if (st != TIDE_OK)
        return st;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct exec_position *pos = &ex->positions[p];
        if (pos->kind != EXEC_COPY_IN)
            continue;
        uint64_t nbytes = g->nodes[pos->node].outputs[0].nbytes;
        st =
            tide_backend_host_alloc(ex->backend, nbytes ? nbytes : 1, &ex->staging[pos->node], err);
        if (st != TIDE_OK)
            return st;
    }
    if (ex->options.profile) {
        ex->profile_start = xcalloc(ex->n_order, sizeof(*ex->profile_start));
        ex->profile_end = xcalloc(ex->n_order, sizeof(*ex->profile_end));
        ex->node_ms = xcalloc(n, sizeof(*ex->node_ms));
        if (!ex->profile_start || !ex->profile_end || !ex->node_ms)
            return tide_error_set(err, TIDE_NOMEM, "executor: out of memory for profiling");
        for (uint32_t p = 0; p < ex->n_order; p++) {
            if (ex->positions[p].kind == EXEC_NOTHING)
                continue;
            st = tide_backend_event_new(ex->backend, &ex->profile_start[p], err);
            if (st == TIDE_OK)
                st = tide_backend_event_new(ex->backend, &ex->profile_end[p], err);
            if (st != TIDE_OK)
                return st;
        }
    }
    return init_persistent(ex, err);
}

enum tide_status tide_executor_new(struct tide_graph *graph, const struct tide_memplan *plan,
                                   struct tide_backend *backend,
                                   const struct tide_executor_options *options,
                                   struct tide_executor **out, struct tide_error *err)
{
    *out = NULL;
    if (!graph || !plan || !backend)
        return tide_error_set(err, TIDE_INVALID, "executor: graph, plan and backend are needed");
    struct tide_executor *ex = calloc(1, sizeof(*ex));
    if (!ex)
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory");
    ex->graph = graph;
    ex->backend = backend;
    if (options)
        ex->options = *options;
    else
        ex->options.budget_bytes = plan->peak_bytes;
    ex->treap_root = NIL;
    enum tide_status st = create(ex, plan, err);
    if (st != TIDE_OK) {
        tide_executor_free(ex);
        return st;
    }
    *out = ex;
    return TIDE_OK;
}

void tide_executor_free(struct tide_executor *ex)
{
    if (!ex)
        return;
    struct tide_backend *b = ex->backend;
    /* Nothing may still run on memory we are about to free. */
    for (int s = 0; s < N_STREAMS; s++) {
        if (ex->streams[s])
            tide_backend_stream_sync(b, ex->streams[s], NULL);
    }
    if (ex->events) {
        for (uint32_t v = 0; v < ex->n_nodes; v++) {
            if (ex->events[v])
                tide_backend_event_free(b, ex->events[v]);
        }
    }
    for (uint32_t p = 0; p < ex->n_order; p++) {
        if (ex->profile_start && ex->profile_start[p])
            tide_backend_event_free(b, ex->profile_start[p]);
        if (ex->profile_end && ex->profile_end[p])
            tide_backend_event_free(b, ex->profile_end[p]);
    }
    if (ex->staging) {
        for (uint32_t v = 0; v < ex->n_nodes; v++) {
            if (ex->staging[v])
                tide_backend_host_free(b, ex->staging[v]);
        }
    }
    for (int s = 0; s < N_STREAMS; s++) {
        if (ex->streams[s])
            tide_backend_stream_free(b, ex->streams[s]);
    }
    if (ex->arena)
        tide_backend_arena_free(b, ex->arena);
    free(ex->regions);
    free(ex->death_offsets);
    free(ex->deaths);
    free(ex->events);
    free(ex->positions);
    free(ex->waits);
    free(ex->births);
    free(ex->views);
    free(ex->output_region);
    free(ex->output_region_base);
    free(ex->position);
    free(ex->staging);
    free(ex->fed);
    free(ex->produced);
    free(ex->treap_left);
    free(ex->treap_right);
    free(ex->treap_priority);
    free(ex->alive);
    free(ex->persistent);
    free(ex->profile_start);
    free(ex->profile_end);
    free(ex->node_ms);
    free(ex);
}

/* ============================================================================
 * Steps
 * ========================================================================== */

enum tide_status tide_executor_feed(struct tide_executor *ex, uint32_t placeholder,
                                    const void *data, uint64_t bytes, struct tide_error *err)
{
    if (placeholder >= ex->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "feed: node id %u of %u", placeholder,
                              ex->n_nodes);
    const struct tide_node *node = &ex->graph->nodes[placeholder];
    if (node->op != TIDE_OP_PLACEHOLDER)
        return tide_node_error(err, TIDE_INVALID, node, "is not a Placeholder: it cannot be fed");
    if (!ex->staging[placeholder])
        return tide_node_error(err, TIDE_INVALID, node, "is not in the plan: it cannot be fed");
    const struct tide_output *out = &node->outputs[0];
    if (bytes != out->nbytes) {
        char shape[160];
        return tide_node_error(err, TIDE_INVALID, node,
                               "fed %" PRIu64 " bytes, wants %" PRIu64 " (%s %s)", bytes,
                               out->nbytes, tide_dtype_name(out->dtype),
                               tide_shape_format(&out->shape, shape, sizeof(shape)));
    }
    if (bytes && !data)
        return tide_node_error(err, TIDE_INVALID, node, "fed NULL data");
    if (bytes)
        memcpy(ex->staging[placeholder], data, bytes);
    ex->fed[placeholder] = 1;
    return TIDE_OK;
}

/* Checks, before anything is enqueued, what would make the step fail early. */
static enum tide_status check_step(const struct tide_executor *ex, const uint8_t *mask,
                                   struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct exec_position *pos = &ex->positions[p];
        if (mask && !mask[pos->node])
            continue;
        const struct tide_node *node = &g->nodes[pos->node];
        if (pos->kind == EXEC_COPY_IN && !ex->fed[pos->node])
            return tide_node_error(err, TIDE_STATE, node, "has not been fed");
        if (!mask)
            continue;
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            uint32_t u = node->inputs[i].node;
            if (!mask[u] && ex->positions[ex->position[u]].kind != EXEC_NOTHING)
                return tide_node_error(err, TIDE_INVALID, node,
                                       "is in the step's mask but its input \"%s\" is not",
                                       g->nodes[u].name);
        }
    }
    return TIDE_OK;
}

/* Names the node when an enqueue call of the backend fails (they carry no message). */
static enum tide_status enqueue_check(enum tide_status st, const struct tide_node *node,
                                      const char *what, struct tide_error *err)
{
    if (st == TIDE_OK)
        return TIDE_OK;
    return tide_node_error(err, st, node, "%s failed: %s", what, tide_strerror(st));
}

/* Enqueues position p's work on its stream, between the accounting steps. */
static enum tide_status enqueue(struct tide_executor *ex, const struct exec_position *pos,
                                uint64_t *h2d_bytes, struct tide_error *err)
{
    struct tide_stream *stream = ex->streams[pos->stream];
    const struct tide_node *node = pos->args.node;
    enum tide_status st = TIDE_OK;
    if (pos->kind == EXEC_COPY_IN) {
        const struct tide_tensor_view *out = &pos->args.outputs[0];
        if (out->nbytes)
            st = tide_backend_copy_h2d(ex->backend, out->data, ex->staging[pos->node], out->nbytes,
                                       stream);
        *h2d_bytes += out->nbytes;
    } else {
        st = tide_backend_launch(ex->backend, stream, &pos->args);
    }
    return enqueue_check(st, node, pos->kind == EXEC_COPY_IN ? "the h2d copy" : "the launch", err);
}

/* Syncs every stream; returns the first sticky error. */
static enum tide_status sync_all(struct tide_executor *ex, struct tide_error *err)
{
    enum tide_status first = TIDE_OK;
    for (int s = 0; s < N_STREAMS; s++) {
        struct tide_error stream_err = {0};
        enum tide_status st = tide_backend_stream_sync(ex->backend, ex->streams[s], &stream_err);
        if (st != TIDE_OK && first == TIDE_OK) {
            first = st;
            if (err)
                *err = stream_err;
        }
    }
    return first;
}

static enum tide_status run_step(struct tide_executor *ex, const uint8_t *mask,
                                 struct tide_step_stats *stats, struct tide_error *err)
{
    enum tide_status st = check_step(ex, mask, err);
    if (st != TIDE_OK)
        return st;
    double t0 = now_ms();
    if (!mask)
        ex->step++;
    accounting_reset(ex);
    uint64_t h2d_bytes = 0;
    struct tide_backend *b = ex->backend;
    uint32_t p = 0;
    for (; p < ex->n_order && st == TIDE_OK; p++) {
        const struct exec_position *pos = &ex->positions[p];
        uint32_t v = pos->node;
        struct tide_stream *stream = ex->streams[pos->stream];
        bool runs = pos->kind != EXEC_NOTHING && (!mask || mask[v]);
        const struct tide_node *node = &ex->graph->nodes[v];
        if (runs) {
            for (uint32_t i = 0; i < pos->birth_count && st == TIDE_OK; i++)
                st = region_born(ex, ex->births[pos->birth_begin + i], p, err);
            for (uint32_t i = 0; i < pos->wait_count && st == TIDE_OK; i++) {
                uint32_t u = ex->waits[pos->wait_begin + i];
                if (!mask || mask[u])
                    st = enqueue_check(tide_backend_event_wait(b, stream, ex->events[u]), node,
                                       "waiting for an event", err);
            }
            if (st == TIDE_OK && ex->profile_start)
                st = enqueue_check(tide_backend_event_record(b, ex->profile_start[p], stream), node,
                                   "recording a profiling event", err);
            if (st == TIDE_OK)
                st = enqueue(ex, pos, &h2d_bytes, err);
            if (st == TIDE_OK && ex->profile_end)
                st = enqueue_check(tide_backend_event_record(b, ex->profile_end[p], stream), node,
                                   "recording a profiling event", err);
        }
        /* Regions whose last reader is this position die, even when it did not run. */
        for (uint32_t i = ex->death_offsets[p]; i < ex->death_offsets[p + 1] && st == TIDE_OK;
             i++) {
            uint32_t r = ex->deaths[i];
            if (!ex->alive[r])
                continue;
            ex->alive[r] = 0;
            if (ex->regions[r].bytes == 0)
                continue;
            treap_erase(ex, r);
            if (ex->options.poison)
                st = enqueue_check(tide_backend_fill32(b, ex->arena + ex->regions[r].offset,
                                                       POISON_PATTERN,
                                                       ex->regions[r].bytes & ~(uint64_t)3, stream),
                                   node, "poisoning a dead region", err);
        }
        if (runs && st == TIDE_OK && ex->events[v])
            st = enqueue_check(tide_backend_event_record(b, ex->events[v], stream), node,
                               "recording its event", err);
    }
    /* Always drain the streams: work in flight uses the arena and the arguments. */
    struct tide_error sync_err = {0};
    enum tide_status sync = sync_all(ex, &sync_err);
    if (st == TIDE_OK && sync != TIDE_OK) {
        st = sync;
        if (err)
            *err = sync_err;
    }
    if (st != TIDE_OK) {
        if (mask)
            tide_error_prefix(err, "evaluation after step %" PRIu64, ex->step);
        else
            tide_error_prefix(err, "step %" PRIu64, ex->step);
        return st;
    }
    for (p = 0; p < ex->n_order; p++) {
        uint32_t v = ex->positions[p].node;
        if (!mask || mask[v])
            ex->produced[v] = 1;
    }
    if (ex->options.profile && ex->node_ms) {
        for (p = 0; p < ex->n_order; p++) {
            uint32_t v = ex->positions[p].node;
            double ms = 0;
            if (ex->profile_start[p] && (!mask || mask[v]) &&
                tide_backend_event_elapsed(b, ex->profile_start[p], ex->profile_end[p], &ms) !=
                    TIDE_OK)
                ms = 0;
            ex->node_ms[v] = ms;
        }
    }
    if (stats) {
        memset(stats, 0, sizeof(*stats));
        stats->step = ex->step;
        stats->step_ms = now_ms() - t0;
        stats->high_water_bytes = ex->high_water;
        stats->h2d_bytes = h2d_bytes;
        stats->d2h_bytes = 0;
        stats->stall_ms = 0;
        stats->node_ms = ex->options.profile && b->iface->event_elapsed ? ex->node_ms : NULL;
    }
    return TIDE_OK;
}

enum tide_status tide_executor_step(struct tide_executor *ex, struct tide_step_stats *stats,
                                    struct tide_error *err)
{
    return run_step(ex, NULL, stats, err);
}

enum tide_status tide_executor_step_masked(struct tide_executor *ex, const uint8_t *mask,
                                           struct tide_step_stats *stats, struct tide_error *err)
{
    if (!mask)
        return tide_error_set(err, TIDE_INVALID, "step_masked: the mask is NULL");
    return run_step(ex, mask, stats, err);
}

/* ============================================================================
 * Reading and writing tensors between steps
 * ========================================================================== */

enum tide_status tide_executor_read(struct tide_executor *ex, struct tide_edge output, void *dst,
                                    uint64_t bytes, struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    if (output.node >= ex->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "read: node id %u of %u", output.node,
                              ex->n_nodes);
    const struct tide_node *node = &g->nodes[output.node];
    if (output.output >= node->n_outputs)
        return tide_node_error(err, TIDE_INVALID, node, "read: it has no output %u", output.output);
    uint32_t r = ex->position[output.node] == NIL
                     ? NIL
                     : ex->output_region[ex->output_region_base[output.node] + output.output];
    if (r == NIL || !ex->regions[r].persistent)
        return tide_node_error(err, TIDE_STATE, node,
                               "output %u is not kept after a step (only Variables, Consts and "
                               "pinned outputs are): fetch it to read it",
                               output.output);
    if (node->op != TIDE_OP_VARIABLE && node->op != TIDE_OP_CONST && !ex->produced[output.node])
        return tide_node_error(err, TIDE_STATE, node, "has not run yet: nothing to read");
    uint64_t nbytes = node->outputs[output.output].nbytes;
    if (bytes != nbytes) {
        char shape[160];
        return tide_node_error(
            err, TIDE_INVALID, node, "read of %" PRIu64 " bytes, output %u has %" PRIu64 " (%s %s)",
            bytes, output.output, nbytes, tide_dtype_name(node->outputs[output.output].dtype),
            tide_shape_format(&node->outputs[output.output].shape, shape, sizeof(shape)));
    }
    if (nbytes == 0)
        return TIDE_OK;
    struct tide_stream *d2h = ex->streams[TIDE_STREAM_D2H];
    enum tide_status st =
        tide_backend_copy_d2h(ex->backend, dst, ex->arena + ex->regions[r].offset, nbytes, d2h);
    enum tide_status sync = tide_backend_stream_sync(ex->backend, d2h, err);
    if (st != TIDE_OK)
        return tide_node_error(err, st, node, "read: the copy failed: %s", tide_strerror(st));
    return sync;
}

enum tide_status tide_executor_write_variable(struct tide_executor *ex, uint32_t variable,
                                              const void *src, uint64_t bytes,
                                              struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    if (variable >= ex->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "write: node id %u of %u", variable, ex->n_nodes);
    const struct tide_node *node = &g->nodes[variable];
    if (node->op != TIDE_OP_VARIABLE)
        return tide_node_error(err, TIDE_INVALID, node, "is not a Variable: it cannot be written");
    if (ex->position[variable] == NIL)
        return tide_node_error(err, TIDE_INVALID, node, "is not in the plan");
    uint64_t nbytes = node->outputs[0].nbytes;
    if (bytes != nbytes) {
        char shape[160];
        return tide_node_error(err, TIDE_INVALID, node,
                               "write of %" PRIu64 " bytes, the Variable has %" PRIu64 " (%s %s)",
                               bytes, nbytes, tide_dtype_name(node->outputs[0].dtype),
                               tide_shape_format(&node->outputs[0].shape, shape, sizeof(shape)));
    }
    if (nbytes == 0)
        return TIDE_OK;
    uint32_t r = ex->output_region[ex->output_region_base[variable]];
    struct tide_stream *h2d = ex->streams[TIDE_STREAM_H2D];
    enum tide_status st =
        tide_backend_copy_h2d(ex->backend, ex->arena + ex->regions[r].offset, src, nbytes, h2d);
    enum tide_status sync = tide_backend_stream_sync(ex->backend, h2d, err);
    if (st != TIDE_OK)
        return tide_node_error(err, st, node, "write: the copy failed: %s", tide_strerror(st));
    return sync;
}

uint64_t tide_executor_steps(const struct tide_executor *ex)
{
    return ex->step;
}
