/* SPDX-License-Identifier: MIT */
/*
 * executor.c: runs a planned graph once per step on a backend's streams.
 *
 * The executor is the last stage of the pipeline: everything it does was
 * decided by the passes before it (each node's stream, each tensor's home
 * and arena offset, the order, the memory ops, the reuse edges), so a step is
 * one walk over the order that enqueues work and never decides, allocates or
 * waits for the device until the end.
 *
 * DESIGN
 * ------
 *
 * Threads. One host thread (the caller's: the daemon's executor thread, a
 * test, tide-bench) drives an executor; nothing here is locked, and two
 * threads must not call into one executor at once. The backend runs the work
 * on its own threads (CUDA: the device; the CPU backend: one worker per
 * stream, or with inline streams, its default, the host thread itself when
 * it synchronises the step). The executor's state is touched by the host thread only, except:
 *  - the arena, the kernel arguments, the placeholders' staging buffers and
 *    the host buffers (homes of host-homed Variables and Consts, swapped-out
 *    copies), which the backend's workers read and write while a step runs.
 *    The host thread writes staging buffers (feed), host homes
 *    (write_variable) and kernel arguments (creation) only while no step is
 *    in flight: every step ends with all streams synchronised.
 *  - the step counter, which kernels read through args.step (Adam's bias
 *    correction, Dropout's masks), and whether the step trains, read through
 *    args.training (Dropout is the identity in a masked, evaluation step).
 *    The host thread changes both only between steps.
 *
 * Streams. Each executor owns three backend streams: compute, h2d and d2h
 * (enum tide_stream_id). A node runs on the stream its annotation names
 * (node->stream): the memory passes put Placeholders, Fetch and SwapIn on
 * h2d, SwapOut and WriteBack on d2h and everything else on compute (without
 * them, the session puts Placeholders on h2d and the rest on compute). Work
 * on one stream runs in the order it was enqueued, which is the plan's
 * order, so a dependency between two nodes of one stream needs nothing.
 *
 * Host memory. The job's host memory is one arena that memplan laid out
 * (memplan/memplan.h: homes of host-homed outputs, Placeholders' staging
 * buffers, the scratch for initial values), allocated with one
 * tide_backend_host_alloc at creation (pinned on CUDA) and freed with the
 * executor: no step allocates host memory.
 *
 * Memory ops (swapper/swapper.h is the contract). Host-homed outputs —
 * Variables and Consts with home HOST, SwapOut outputs — have their home in
 * the host arena; host-homed Variables are initialised there and Consts
 * copied there. Every memory op is one async copy on its stream:
 *  - Fetch(v):      h2d, v's host home -> the Fetch's output region;
 *  - SwapIn(s):     h2d, the SwapOut's host buffer -> the SwapIn's region;
 *  - SwapOut(t):    d2h, t's region -> the SwapOut's host buffer;
 *  - WriteBack(f):  d2h, f's region -> the host home of node->subject.
 * A kernel never reads host memory: an input homed on the host is refused at
 * creation (a missing Fetch or SwapIn is a planner bug). A WriteBack also
 * waits for every update (Apply*) that reads its tensor, so the copy can
 * never overtake the in-place update it writes back, whether or not the
 * planner drew that control edge.
 *
 * Pipelining falls out of the order and the streams: a Fetch or SwapIn sits
 * at the start of the partition `prefetch` before its consumer, so the h2d
 * stream copies it while compute still works on the partitions in between;
 * a SwapOut right after its producer copies out on d2h while compute goes
 * on. The host thread only enqueues; nothing in a step blocks it until the
 * final synchronisation.
 *
 * Events. A dependency that crosses streams (a data or control input whose
 * producer runs on another stream) is an event: the producer records its
 * event on its stream right after its work, and the consumer's stream waits
 * on it right before the consumer's work. Most such waits are implied by
 * others, and a full step issues only the needed ones: at creation the
 * executor replays the order with a vector clock per stream (for stream S
 * and stream T, the latest position of T known complete at S's current
 * point, through waits and through what T itself had waited for at that
 * point). A consumer then waits at most once per other stream, on the latest
 * producer it needs there, and only if S's clock does not already cover it;
 * only the producers so named record their events. In practice that is a
 * few waits per partition rather than one per edge: the first kernel of a
 * partition waits for the copies prefetched for it, the next ones mostly
 * need nothing (the CNN of tide_model_cnn with Variables on the host and
 * swapping at partition size 7: 48 waits and events per step for 162
 * cross-stream edges). Events are
 * created once and re-recorded every step (a wait refers to the latest
 * record, which in a step always precedes the wait since producers come
 * first in the order). Memplan's reuse edges are control edges like any
 * other, so a region taken over across streams is ordered the same way.
 *
 * A masked step (evaluation) runs a subset, so a wait that a full step
 * leaves out because a later point of the same stream covers it may be
 * needed there (that later point may not run). Masked steps therefore keep
 * every cross-stream dependency, record the events of every node that runs,
 * and skip at run time only the waits that an earlier wait of the same step
 * on the same stream already covers.
 *
 * Ordering within one position of the order, for node v on stream s:
 *  1. v's output regions and workspace become alive (accounting, below);
 *  2. s waits on the events of v's cross-stream dependencies;
 *  3. v's work is enqueued on s (a kernel or a copy);
 *  4. the regions whose last reader is v die; in poison mode, s first waits
 *     for the readers of those regions on the other streams (a region read
 *     by a SwapOut on d2h and by kernels on compute has readers on both,
 *     and the last one by position is not the last one to finish), then
 *     each is filled with a NaN pattern on s, right behind v;
 *  5. v's event, if it has one, is recorded on s.
 * Recording after the poison fills matters: a producer on another stream
 * that takes over a dead region waits on the event of the region's latest
 * reader on each stream but its own (memplan's reuse edges, one per stream),
 * so it cannot start before the fill has finished and overwrite its fresh
 * data with poison.
 *
 * Step boundaries. A step ends by synchronising the three streams, so the
 * next step starts from an idle device, feeds may be restaged, host homes
 * may be read and written, and no event from one step is waited on in the
 * next. A kernel failure is sticky on its stream (the backend skips that
 * stream's later work) and comes back from the sync; the step fails with the
 * kernel's message (which names the node) prefixed by the step number, and
 * the executor stays usable: the next step runs normally.
 *
 * Accounting. As the walk enqueues, it replays the plan's lifetimes: a region
 * becomes alive at its producer and dies after its last reader's position.
 * Live regions are kept in a treap keyed by offset (nodes preallocated, one
 * per region, so a step allocates nothing); inserting a region that overlaps
 * a live one is a planner bug and fails the step with TIDE_INTERNAL naming
 * both. The largest live offset + size is the step's measured high-water
 * mark, which must equal the plan's peak. Persistent regions (device-homed
 * Variables and Consts, pinned outputs) are alive from creation on.
 * Host-homed tensors take no arena space.
 *
 * Statistics. h2d_bytes and d2h_bytes count the copies a step ran
 * (Placeholders, Fetch and SwapIn; SwapOut and WriteBack). stall_ms is
 * measured in every step, on a backend that can time its events: a compute
 * position that depends on a memory op (a Fetch or SwapIn it reads, or a
 * SwapOut or WriteBack whose region it takes over) records an event right
 * before its waits and one right after, and the time between them is the
 * time compute sat blocked on the copy streams. That is two events per such
 * position — a few per partition, none in a plan that moves nothing, whose
 * stall is then exactly 0 (a Placeholder's feed is input, not a copy the
 * planner chose, and is not counted). Waits before poison fills are not
 * counted.
 *
 * Tracing (runtime/trace.h). While a recording is set
 * (tide_executor_trace_start), a step records the profiling events too
 * (profile mode's: around each position's work, and before a waiting compute
 * position's waits) plus one base event per stream before anything else,
 * and the walk notes, after each position's births, the device bytes in use
 * (the live region with the largest offset ends highest, since live regions
 * never overlap: the right spine of the treap). After the final
 * synchronisation it reads every event's time against the base events and
 * appends the step to the recording: a slice per position that ran, a wait
 * slice where compute was blocked, a flow from each Fetch and SwapIn to its
 * first consumer, and a sample of device and host bytes in use per position.
 * Each birth enlarges the largest end at most to itself, so the samples'
 * maximum is exactly the step's high-water mark. The first start creates
 * the profiling events if profile mode did not, the base events and a few
 * per-position arrays (first consumers, swap slot bytes), once; a step with
 * tracing off tests one pointer and records nothing.
 *
 * Ownership: the executor borrows the graph (kernel arguments point at its
 * nodes) and the backend, which must outlive it; it copies what it needs of
 * the plan. It owns its arena, its host arena, streams and events.
 */
#include "runtime/executor.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/trace.h"

#define N_STREAMS 3
/* A quiet NaN with a payload: what a read-after-free reads in poison mode. */
#define POISON_PATTERN 0x7fc00001u
#define NIL            UINT32_MAX

/* What a position of the order does in a step. */
enum exec_kind {
    EXEC_NOTHING = 0, /* Variable, Const: persistent (in the arena or the host), nothing to run */
    EXEC_COPY_IN = 1, /* Placeholder: h2d copy from its staging buffer */
    EXEC_KERNEL = 2,  /* a compute op */
    EXEC_H2D = 3,     /* Fetch, SwapIn: h2d copy from a host buffer into the arena */
    EXEC_D2H = 4,     /* SwapOut, WriteBack: d2h copy from the arena into a host buffer */
};

/* A run of node ids in ex->deps or ex->waits. */
struct span {
    uint32_t begin;
    uint32_t count;
};

struct exec_position {
    uint32_t node;
    uint8_t kind;        /* enum exec_kind */
    uint8_t stream;      /* enum tide_stream_id */
    uint8_t record_full; /* a full step records the node's event: a reduced wait names it */
    struct tide_kernel_args args;
    /* Copies (COPY_IN, H2D, D2H). */
    void *copy_dst;
    const void *copy_src;
    uint64_t copy_bytes;
    /* Every cross-stream dependency, for masked steps (into ex->deps). */
    struct span deps_before; /* producers of inputs, control inputs, updates (WriteBack) */
    struct span deps_poison; /* other-stream readers of the regions poisoned here */
    /* The waits a full step issues (into ex->waits), at most one per other stream each. */
    struct span waits_before;
    struct span waits_poison;
    struct span births; /* into ex->births: regions that become alive here */
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
    struct tide_event **events; /* per node id; NULL: no cross-stream dependant */

    /* The step program, built once. */
    struct exec_position *positions; /* n_order */
    uint32_t *deps;                  /* node ids, see struct exec_position */
    uint32_t *waits;                 /* node ids, see struct exec_position */
    uint32_t *births;
    struct tide_tensor_view *views; /* every position's inputs, then outputs */
    uint32_t *output_region;        /* per (node, output): region index or NIL (host-homed) */
    uint32_t *output_region_base;   /* per node id: index into output_region */
    uint32_t *position;             /* per node id: position, or NIL */

    /* Host memory: one arena, laid out by memplan; the pointers below point into it. */
    uint8_t *host_arena; /* the plan's host_bytes (NULL when 0) */
    uint8_t *scratch;    /* initial values of device-homed Variables and Consts, or NULL */
    void **staging;      /* per node id: the feed buffer, for Placeholders in the plan */
    void **host_home;    /* per node id: output 0's host buffer, for host-homed outputs */
    uint8_t *fed;        /* per node id */
    uint8_t *produced;   /* per node id: ran in a completed step */

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
    /* The high water while each partition's positions were enqueued (partition_of). */
    uint64_t *partition_high_water;
    uint32_t n_partitions;

    /*
     * Profiling (options.profile): events around each position's work, one
     * more before a compute position's waits (stall), and the results.
     */
    struct tide_event **profile_start;
    struct tide_event **profile_end;
    struct tide_event **profile_wait;
    double *node_ms; /* per node id */

    /*
     * The stall, measured every step (see DESIGN, "Statistics"): per
     * position, events recorded right before and right after the waits of
     * a compute position that depends on a memory op; NULL elsewhere, and
     * the arrays NULL when the backend cannot time its events.
     */
    struct tide_event **stall_begin;
    struct tide_event **stall_end;

    /*
     * Tracing (see DESIGN): the recording steps append to (NULL: off), and
     * what the first start built, kept for later ones.
     */
    struct tide_trace *trace;
    bool trace_prepared;
    struct tide_event *trace_base[N_STREAMS]; /* recorded first on each stream of a traced step */
    uint64_t *trace_device;    /* per position: device bytes in use after its births */
    uint32_t *trace_slice;     /* per position: its slice in the step being recorded, or NIL */
    uint32_t *trace_flow_to;   /* per position: a Fetch's or SwapIn's first consumer, or NIL */
    int64_t *trace_host_delta; /* per position: + the slot a SwapOut fills, - the slot freed after
                                  its last SwapIn */
    uint64_t trace_host_base;  /* host homes and staging buffers: live all step */
    uint64_t trace_device_end; /* device bytes in use after the last position */

    uint64_t step; /* 1-based count of steps run; kernels read it */
    bool training; /* the running step is a full one, not a masked evaluation; kernels read it */
};

/* ============================================================================
 * Small helpers
 * ========================================================================== */

/* The host's monotonic clock, in nanoseconds (the time base of traces, too). */
static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
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

/* The largest live offset + bytes: live regions never overlap, so the rightmost ends last. */
static uint64_t treap_top(const struct tide_executor *ex)
{
    uint32_t last = NIL;
    for (uint32_t t = ex->treap_root; t != NIL; t = ex->treap_right[t])
        last = t;
    return last == NIL ? 0 : ex->regions[last].offset + ex->regions[last].bytes;
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

/*
 * Marks region r alive at position p; a clash is a planner bug. A region
 * written in place over an input (inplace_of) takes that input's memory
 * over: the input leaves the live set here, unpoisoned (its death at p then
 * finds it gone), and the two count once.
 */
static enum tide_status region_born(struct tide_executor *ex, uint32_t r, uint32_t p,
                                    struct tide_error *err)
{
    uint32_t clash, q = ex->regions[r].inplace_of;
    if (q != TIDE_MEMPLAN_NO_REGION && ex->alive[q]) {
        ex->alive[q] = 0;
        if (ex->regions[q].bytes)
            treap_erase(ex, q);
    }
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

/* The top of the live regions: the end of the one at the highest offset (they never overlap). */
static uint64_t live_top(const struct tide_executor *ex)
{
    uint32_t last = NIL;
    for (uint32_t t = ex->treap_root; t != NIL; t = ex->treap_right[t])
        last = t;
    return last == NIL ? 0 : ex->regions[last].offset + ex->regions[last].bytes;
}

/*
 * A node's partition for the per-partition high water; one without (a plan
 * made without a memory policy) counts in partition 0, as the memory
 * timeline counts it (swapper/timeline.c).
 */
static uint32_t partition_of(const struct tide_node *node)
{
    return node->partition < 0 ? 0 : (uint32_t)node->partition;
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

/* The region of output k of node v, or NIL when it is homed on the host. */
static uint32_t region_of(const struct tide_executor *ex, uint32_t v, uint32_t k)
{
    return ex->output_region[ex->output_region_base[v] + k];
}

/* Whether input i of node reads a host-homed tensor. */
static bool input_on_host(const struct tide_executor *ex, const struct tide_node *node, uint32_t i)
{
    return region_of(ex, node->inputs[i].node, node->inputs[i].output) == NIL;
}

/* Checks a memory op's input and what it copies; sets the position's kind. */
static enum tide_status classify_memory_op(struct tide_executor *ex, const struct tide_node *node,
                                           struct exec_position *pos, struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    if (node->n_inputs != 1)
        return tide_node_error(err, TIDE_INVALID, node, "has %u inputs; a memory op copies one",
                               node->n_inputs);
    const struct tide_node *src = &g->nodes[node->inputs[0].node];
    uint64_t in_bytes = tide_graph_input(g, node, 0)->nbytes;
    uint64_t out_bytes = node->n_outputs ? node->outputs[0].nbytes : in_bytes;
    switch (node->op) {
    case TIDE_OP_FETCH:
        if ((src->op != TIDE_OP_VARIABLE && src->op != TIDE_OP_CONST) ||
            !input_on_host(ex, node, 0))
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input \"%s\" (%s) is not a host-homed Variable or Const: "
                                   "there is nothing to fetch",
                                   src->name, tide_op_info(src->op)->name);
        pos->kind = EXEC_H2D;
        break;
    case TIDE_OP_SWAP_IN:
        if (src->op != TIDE_OP_SWAP_OUT)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input \"%s\" (%s) is not a SwapOut: there is nothing to "
                                   "swap in",
                                   src->name, tide_op_info(src->op)->name);
        pos->kind = EXEC_H2D;
        break;
    case TIDE_OP_SWAP_OUT:
    case TIDE_OP_WRITE_BACK:
        if (input_on_host(ex, node, 0))
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input \"%s\" is homed in host memory: there is nothing to copy "
                                   "out",
                                   src->name);
        pos->kind = EXEC_D2H;
        break;
    default:
        return tide_node_error(err, TIDE_INTERNAL, node, "is not a memory op");
    }
    if (node->op == TIDE_OP_WRITE_BACK) {
        uint32_t subject = node->subject;
        if (subject >= g->n_nodes || g->nodes[subject].op != TIDE_OP_VARIABLE ||
            ex->position[subject] == NIL || region_of(ex, subject, 0) != NIL)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "its subject is not a host-homed Variable of the plan: there "
                                   "is nowhere to write back to");
        out_bytes = g->nodes[subject].outputs[0].nbytes;
    }
    if (in_bytes != out_bytes)
        return tide_node_error(err, TIDE_INVALID, node,
                               "copies %" PRIu64 " bytes into %" PRIu64 " bytes", in_bytes,
                               out_bytes);
    return TIDE_OK;
}

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
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        const struct tide_edge *e = &node->inputs[i];
        if (e->node >= g->n_nodes || ex->position[e->node] == NIL ||
            ex->position[e->node] >= ex->position[v])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u is not produced earlier in the plan", i);
    }
    /* Only persistent sources and swapped-out copies live in host memory. */
    bool may_be_host =
        node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST || node->op == TIDE_OP_SWAP_OUT;
    for (uint32_t k = 0; k < node->n_outputs; k++) {
        uint32_t r = region_of(ex, v, k);
        if (r == NIL && node->outputs[k].home != TIDE_HOME_HOST)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "output %u is homed on the device but has no region in the "
                                   "memory plan",
                                   k);
        if (r == NIL && !may_be_host)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "output %u is homed in host memory; only Variables, Consts "
                                   "and SwapOut outputs can be",
                                   k);
        if (r != NIL && node->op == TIDE_OP_SWAP_OUT)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "output %u is homed on the device; a SwapOut's output is its "
                                   "host copy",
                                   k);
    }
    pos->node = v;
    pos->stream = node->stream;
    if (node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST) {
        pos->kind = EXEC_NOTHING;
        return TIDE_OK;
    }
    if (node->op == TIDE_OP_PLACEHOLDER) {
        pos->kind = EXEC_COPY_IN;
        return TIDE_OK;
    }
    if (info->flags & TIDE_OP_F_MEMORY)
        return classify_memory_op(ex, node, pos, err);
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        if (input_on_host(ex, node, i))
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u (\"%s\") is homed in host memory: a kernel reads "
                                   "device memory only (is a Fetch or SwapIn missing?)",
                                   i, g->nodes[node->inputs[i].node].name);
    }
    pos->kind = EXEC_KERNEL;
    return TIDE_OK;
}

static void view_of(const struct tide_executor *ex, uint32_t v, uint32_t k,
                    struct tide_tensor_view *view)
{
    const struct tide_output *out = &ex->graph->nodes[v].outputs[k];
    uint32_t r = region_of(ex, v, k);
    if (r == NIL)
        view->data = ex->host_home[v];
    else
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
        /* In place: over an earlier region of its size and offset that dies where it is born. */
        const struct tide_memplan_region *over =
            region->inplace_of < r ? &plan->regions[region->inplace_of] : NULL;
        if (region->inplace_of != TIDE_MEMPLAN_NO_REGION &&
            (!over || over->persistent || region->persistent || over->offset != region->offset ||
             over->bytes != region->bytes || over->last != region->first))
            return tide_node_error(err, TIDE_INVALID, node,
                                   "output %u is planned in place over region %u, which it cannot "
                                   "take over",
                                   region->output, region->inplace_of);
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

/* The largest initial value that goes to the device through the scratch buffer. */
static uint64_t scratch_needed(const struct tide_executor *ex)
{
    uint64_t largest = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        uint32_t v = ex->positions[p].node;
        const struct tide_node *node = &ex->graph->nodes[v];
        if ((node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST) &&
            region_of(ex, v, 0) != NIL && node->outputs[0].nbytes > largest)
            largest = node->outputs[0].nbytes;
    }
    return largest;
}

/*
 * Allocates the host arena, once, and points the staging buffers of
 * Placeholders, the host homes and the scratch buffer into it, checking each
 * buffer of the plan against the graph.
 */
static enum tide_status alloc_host(struct tide_executor *ex, const struct tide_memplan *plan,
                                   struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    if (plan->host_bytes) {
        void *base = NULL;
        enum tide_status st = tide_backend_host_alloc(ex->backend, plan->host_bytes, &base, err);
        if (st != TIDE_OK)
            return st;
        ex->host_arena = base;
    }
    uint64_t scratch_bytes = 0;
    for (uint32_t i = 0; i < plan->n_host_buffers; i++) {
        const struct tide_memplan_host_buffer *b = &plan->host_buffers[i];
        if (b->offset > plan->host_bytes || b->bytes > plan->host_bytes - b->offset)
            return tide_error_set(err, TIDE_INVALID,
                                  "executor: host buffer %u of the plan (%" PRIu64
                                  " bytes at %" PRIu64 ") lies outside its host arena of %" PRIu64
                                  " bytes",
                                  i, b->bytes, b->offset, plan->host_bytes);
        if (b->node == TIDE_MEMPLAN_SCRATCH) {
            ex->scratch = ex->host_arena + b->offset;
            scratch_bytes = b->bytes;
            continue;
        }
        if (b->node >= g->n_nodes || ex->position[b->node] == NIL)
            return tide_error_set(err, TIDE_INVALID,
                                  "executor: host buffer %u of the plan names node id %u, which "
                                  "is not in the plan",
                                  i, b->node);
        const struct tide_node *node = &g->nodes[b->node];
        /* Only output 0 of a node can be read as a host home (classify checks who has one). */
        if (b->output != TIDE_MEMPLAN_STAGING && b->output != 0)
            continue;
        if (node->n_outputs == 0 || b->bytes < node->outputs[0].nbytes)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "has a host buffer of %" PRIu64 " bytes in the memory plan, "
                                   "less than its output's %" PRIu64,
                                   b->bytes, node->n_outputs ? node->outputs[0].nbytes : 0);
        if (b->output == TIDE_MEMPLAN_STAGING)
            ex->staging[b->node] = ex->host_arena + b->offset;
        else
            ex->host_home[b->node] = ex->host_arena + b->offset;
    }
    for (uint32_t p = 0; p < ex->n_order; p++) {
        uint32_t v = ex->positions[p].node;
        const struct tide_node *node = &g->nodes[v];
        if (ex->positions[p].kind == EXEC_COPY_IN && !ex->staging[v])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "has no staging buffer in the memory plan's host arena");
        if (node->n_outputs == 1 && region_of(ex, v, 0) == NIL && !ex->host_home[v])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "is homed in host memory but has no home in the memory "
                                   "plan's host arena");
    }
    uint64_t needed = scratch_needed(ex);
    if (needed > scratch_bytes)
        return tide_error_set(err, TIDE_INVALID,
                              "executor: the memory plan's scratch buffer has %" PRIu64
                              " bytes; initial values need %" PRIu64,
                              scratch_bytes, needed);
    return TIDE_OK;
}

/* A growable array of node ids, for building the step program at creation. */
struct id_list {
    uint32_t *ids;
    size_t n;
    size_t cap;
};

static bool id_list_push(struct id_list *list, uint32_t id)
{
    if (list->n == list->cap) {
        size_t cap = list->cap ? list->cap * 2 : 256;
        uint32_t *ids = realloc(list->ids, cap * sizeof(*ids));
        if (!ids)
            return false;
        list->ids = ids;
        list->cap = cap;
    }
    list->ids[list->n++] = id;
    return true;
}

/*
 * Adds u to position p's dependencies when it does work on another stream;
 * tag dedupes within one list (seen[u] == tag: already in it).
 */
static bool add_dep(const struct tide_executor *ex, struct id_list *deps, uint32_t *seen,
                    uint32_t tag, uint32_t p, uint32_t u)
{
    const struct exec_position *from = &ex->positions[ex->position[u]];
    if (from->kind == EXEC_NOTHING || from->stream == ex->positions[p].stream || seen[u] == tag)
        return true;
    seen[u] = tag;
    return id_list_push(deps, u);
}

/*
 * The waits a full step needs for one dependency list of a position on
 * stream s (see DESIGN): per other stream, the latest dependency there, if
 * s's clock does not cover it already, and not if the other candidate's
 * clock covers it. Merges the waited points' clocks into s's clock and marks
 * their producers as recording in full steps.
 */
static enum tide_status reduce_waits(struct tide_executor *ex, struct span deps, uint8_t s,
                                     uint32_t clock[N_STREAMS],
                                     const uint32_t (*snapshot)[N_STREAMS], struct id_list *waits,
                                     struct span *out)
{
    uint32_t best[N_STREAMS] = {0}; /* 1 + the latest needed position, per stream */
    for (uint32_t i = 0; i < deps.count; i++) {
        uint32_t q = ex->position[ex->deps[deps.begin + i]];
        uint8_t t = ex->positions[q].stream;
        if (q + 1 > clock[t] && q + 1 > best[t])
            best[t] = q + 1;
    }
    for (int t = 0; t < N_STREAMS; t++) {
        for (int other = 0; other < N_STREAMS && best[t]; other++) {
            if (other != t && best[other] && snapshot[best[other] - 1][t] >= best[t])
                best[t] = 0;
        }
    }
    out->begin = (uint32_t)waits->n;
    for (int t = 0; t < N_STREAMS; t++) {
        if (!best[t] || t == s)
            continue;
        uint32_t q = best[t] - 1;
        if (!id_list_push(waits, ex->positions[q].node))
            return TIDE_NOMEM;
        ex->positions[q].record_full = 1;
        for (int k = 0; k < N_STREAMS; k++) {
            if (snapshot[q][k] > clock[k])
                clock[k] = snapshot[q][k];
        }
    }
    out->count = (uint32_t)(waits->n - out->begin);
    return TIDE_OK;
}

/*
 * Poison mode: for each region, its readers in order of position (CSR over
 * regions), so that a position can wait for the other streams' readers of
 * the regions it poisons.
 */
static enum tide_status build_readers(const struct tide_executor *ex, uint32_t **offsets_out,
                                      uint32_t **readers_out)
{
    const struct tide_graph *g = ex->graph;
    uint32_t *offsets = xcalloc((size_t)ex->n_regions + 2, sizeof(*offsets));
    size_t total = 0;
    for (uint32_t p = 0; p < ex->n_order; p++)
        total += g->nodes[ex->positions[p].node].n_inputs;
    uint32_t *readers = xcalloc(total, sizeof(*readers));
    uint32_t *fill = xcalloc((size_t)ex->n_regions + 1, sizeof(*fill));
    if (!offsets || !readers || !fill) {
        free(offsets);
        free(readers);
        free(fill);
        return TIDE_NOMEM;
    }
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct tide_node *node = &g->nodes[ex->positions[p].node];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            uint32_t r = region_of(ex, node->inputs[i].node, node->inputs[i].output);
            if (r != NIL)
                offsets[r + 1]++;
        }
    }
    for (uint32_t r = 0; r < ex->n_regions; r++)
        offsets[r + 1] += offsets[r];
    memcpy(fill, offsets, (size_t)ex->n_regions * sizeof(*fill));
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct tide_node *node = &g->nodes[ex->positions[p].node];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            uint32_t r = region_of(ex, node->inputs[i].node, node->inputs[i].output);
            if (r != NIL)
                readers[fill[r]++] = p;
        }
    }
    free(fill);
    *offsets_out = offsets;
    *readers_out = readers;
    return TIDE_OK;
}

/* Builds every position's kernel arguments, copies, dependencies, waits and births. */
static enum tide_status build_program(struct tide_executor *ex, const struct tide_memplan *plan,
                                      struct tide_error *err)
{
    struct tide_graph *g = ex->graph;
    uint64_t n_views = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct tide_node *node = &g->nodes[plan->order[p]];
        n_views += node->n_inputs + node->n_outputs;
    }
    struct id_list deps = {0}, waits = {0};
    struct tide_graph_users users = {0};
    uint32_t *reader_offsets = NULL, *readers = NULL;
    ex->views = xcalloc(n_views, sizeof(*ex->views));
    ex->births = xcalloc(ex->n_regions, sizeof(*ex->births));
    ex->events = xcalloc(g->n_nodes, sizeof(*ex->events));
    uint32_t *seen = xcalloc(g->n_nodes, sizeof(*seen));
    uint32_t *birth_count = xcalloc((size_t)ex->n_order + 1, sizeof(*birth_count));
    uint32_t(*snapshot)[N_STREAMS] = xcalloc(ex->n_order, sizeof(*snapshot));
    enum tide_status st = TIDE_OK;
    if (!ex->views || !ex->births || !ex->events || !seen || !birth_count || !snapshot ||
        tide_graph_users_build(g, &users) != TIDE_OK ||
        (ex->options.poison && build_readers(ex, &reader_offsets, &readers) != TIDE_OK)) {
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
        ex->positions[p].births.begin = next;
        next += birth_count[p];
    }
    for (uint32_t r = 0; r < ex->n_regions; r++) {
        if (ex->regions[r].persistent)
            continue;
        struct exec_position *pos = &ex->positions[ex->regions[r].first];
        ex->births[pos->births.begin + pos->births.count++] = r;
    }

    /* Kernel arguments, copies and dependency lists. */
    size_t view = 0;
    for (uint32_t p = 0; p < ex->n_order && st == TIDE_OK; p++) {
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
        args->seed = ex->options.seed;
        args->training = &ex->training;
        if (pos->kind == EXEC_COPY_IN) {
            pos->copy_src = ex->staging[v];
            pos->copy_dst = args->outputs[0].data;
            pos->copy_bytes = args->outputs[0].nbytes;
        } else if (pos->kind == EXEC_H2D || pos->kind == EXEC_D2H) {
            pos->copy_src = args->inputs[0].data;
            pos->copy_dst = node->op == TIDE_OP_WRITE_BACK ? ex->host_home[node->subject]
                                                           : args->outputs[0].data;
            pos->copy_bytes = args->inputs[0].nbytes;
        }

        /* Cross-stream inputs and control inputs, once each. */
        pos->deps_before.begin = (uint32_t)deps.n;
        uint32_t tag = 2 * p + 1;
        for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
            uint32_t u =
                i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
            if (u >= g->n_nodes || ex->position[u] == NIL || ex->position[u] >= p) {
                st = tide_node_error(err, TIDE_INVALID, node,
                                     "control input %u does not run earlier in the plan",
                                     i - node->n_inputs);
                goto out;
            }
            if (!add_dep(ex, &deps, seen, tag, p, u))
                st = TIDE_NOMEM;
        }
        /* A WriteBack runs after every earlier update of the tensor it copies. */
        if (node->op == TIDE_OP_WRITE_BACK) {
            uint32_t f = node->inputs[0].node;
            for (uint32_t i = users.offsets[f]; i < users.offsets[f + 1] && st == TIDE_OK; i++) {
                uint32_t w = users.users[i];
                if ((tide_op_info(g->nodes[w].op)->flags & TIDE_OP_F_UPDATE) &&
                    ex->position[w] != NIL && ex->position[w] < p &&
                    !add_dep(ex, &deps, seen, tag, p, w))
                    st = TIDE_NOMEM;
            }
        }
        pos->deps_before.count = (uint32_t)(deps.n - pos->deps_before.begin);

        /* Poison mode: the other streams' readers of the regions that die here. */
        pos->deps_poison.begin = (uint32_t)deps.n;
        for (uint32_t i = plan->death_offsets[p];
             ex->options.poison && i < plan->death_offsets[p + 1] && st == TIDE_OK; i++) {
            uint32_t r = ex->deaths[i];
            if (ex->regions[r].bytes == 0)
                continue;
            /* Latest first: in a masked step the first reader that ran covers the rest. */
            for (uint32_t j = reader_offsets[r + 1]; j-- > reader_offsets[r] && st == TIDE_OK;) {
                if (!add_dep(ex, &deps, seen, tag + 1, p, ex->positions[readers[j]].node))
                    st = TIDE_NOMEM;
            }
        }
        pos->deps_poison.count = (uint32_t)(deps.n - pos->deps_poison.begin);
    }
    if (st == TIDE_NOMEM)
        tide_error_set(err, st, "executor: out of memory for the dependency lists");
    if (st != TIDE_OK)
        goto out;
    ex->deps = deps.ids;
    deps.ids = NULL;

    /* Replay the order with a vector clock per stream to find the waits a full step needs. */
    uint32_t clock[N_STREAMS][N_STREAMS] = {{0}};
    for (uint32_t p = 0; p < ex->n_order && st == TIDE_OK; p++) {
        struct exec_position *pos = &ex->positions[p];
        if (pos->kind == EXEC_NOTHING)
            continue;
        uint8_t s = pos->stream;
        st = reduce_waits(ex, pos->deps_before, s, clock[s], (const uint32_t(*)[N_STREAMS])snapshot,
                          &waits, &pos->waits_before);
        clock[s][s] = p + 1;
        if (st == TIDE_OK)
            st = reduce_waits(ex, pos->deps_poison, s, clock[s],
                              (const uint32_t(*)[N_STREAMS])snapshot, &waits, &pos->waits_poison);
        memcpy(snapshot[p], clock[s], sizeof(snapshot[p]));
    }
    if (st != TIDE_OK) {
        st = tide_error_set(err, st, "executor: out of memory for the wait lists");
        goto out;
    }
    ex->waits = waits.ids;
    waits.ids = NULL;

    /* One event per node that some dependency names. */
    for (size_t i = 0; i < deps.n && st == TIDE_OK; i++) {
        uint32_t u = ex->deps[i];
        if (!ex->events[u])
            st = tide_backend_event_new(ex->backend, &ex->events[u], err);
    }
out:
    free(deps.ids);
    free(waits.ids);
    tide_graph_users_free(&users);
    free(reader_offsets);
    free(readers);
    free(seen);
    free(birth_count);
    free(snapshot);
    return st;
}

/* Copies Consts and initial Variable values into their homes, in the arena or on the host. */
static enum tide_status init_persistent(struct tide_executor *ex, struct tide_error *err)
{
    struct tide_graph *g = ex->graph;
    uint8_t *scratch = ex->scratch; /* in the host arena: alloc_host checked its size */
    enum tide_status st = TIDE_OK;
    struct tide_stream *h2d = ex->streams[TIDE_STREAM_H2D];
    for (uint32_t p = 0; p < ex->n_order && st == TIDE_OK; p++) {
        uint32_t v = ex->positions[p].node;
        const struct tide_node *node = &g->nodes[v];
        uint64_t nbytes = node->outputs[0].nbytes;
        if ((node->op != TIDE_OP_VARIABLE && node->op != TIDE_OP_CONST) || nbytes == 0)
            continue;
        /* A host-homed value is written in place; a device-homed one goes through scratch. */
        void *dst = ex->host_home[v] ? ex->host_home[v] : scratch;
        if (node->op == TIDE_OP_VARIABLE) {
            st = tide_variable_init(node, ex->options.seed, dst, err);
        } else {
            const struct tide_const_tensor *t = node->attrs[TIDE_ATTR_CONST_value].tensor;
            if (!t || t->nbytes != nbytes)
                st = tide_node_error(err, TIDE_INVALID, node,
                                     "value has %" PRIu64 " bytes, the output %" PRIu64,
                                     t ? t->nbytes : 0, nbytes);
            else
                memcpy(dst, t->data, nbytes);
        }
        if (st != TIDE_OK || ex->host_home[v])
            continue;
        uint32_t r = region_of(ex, v, 0);
        st = tide_backend_copy_h2d(ex->backend, ex->arena + ex->regions[r].offset, scratch, nbytes,
                                   h2d);
        /* The scratch buffer is reused: wait for the copy before refilling it. */
        enum tide_status sync = tide_backend_stream_sync(ex->backend, h2d, err);
        if (st == TIDE_OK)
            st = sync;
        else
            tide_node_error(err, st, node, "copying the initial value to the device failed");
    }
    return st;
}

/* Profiling events: around each position's work, and before a compute position's waits. */
static enum tide_status create_profile_events(struct tide_executor *ex, struct tide_error *err)
{
    ex->profile_start = xcalloc(ex->n_order, sizeof(*ex->profile_start));
    ex->profile_end = xcalloc(ex->n_order, sizeof(*ex->profile_end));
    ex->profile_wait = xcalloc(ex->n_order, sizeof(*ex->profile_wait));
    ex->node_ms = xcalloc(ex->n_nodes, sizeof(*ex->node_ms));
    if (!ex->profile_start || !ex->profile_end || !ex->profile_wait || !ex->node_ms)
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory for profiling");
    enum tide_status st = TIDE_OK;
    for (uint32_t p = 0; p < ex->n_order && st == TIDE_OK; p++) {
        const struct exec_position *pos = &ex->positions[p];
        if (pos->kind == EXEC_NOTHING)
            continue;
        st = tide_backend_event_new(ex->backend, &ex->profile_start[p], err);
        if (st == TIDE_OK)
            st = tide_backend_event_new(ex->backend, &ex->profile_end[p], err);
        if (st == TIDE_OK && pos->stream == TIDE_STREAM_COMPUTE && pos->deps_before.count)
            st = tide_backend_event_new(ex->backend, &ex->profile_wait[p], err);
    }
    return st;
}

/* Whether the position is on compute and depends on a memory op (it may stall on a copy). */
static bool waits_on_copies(const struct tide_executor *ex, const struct exec_position *pos)
{
    if (pos->stream != TIDE_STREAM_COMPUTE || pos->kind == EXEC_NOTHING)
        return false;
    for (uint32_t i = 0; i < pos->deps_before.count; i++) {
        uint32_t u = ex->deps[pos->deps_before.begin + i];
        if (tide_op_info(ex->graph->nodes[u].op)->flags & TIDE_OP_F_MEMORY)
            return true;
    }
    return false;
}

/* The stall events of the positions that may wait on copies (see DESIGN, "Statistics"). */
static enum tide_status create_stall_events(struct tide_executor *ex, struct tide_error *err)
{
    if (!tide_backend_has_event_elapsed(ex->backend))
        return TIDE_OK;
    ex->stall_begin = xcalloc(ex->n_order, sizeof(*ex->stall_begin));
    ex->stall_end = xcalloc(ex->n_order, sizeof(*ex->stall_end));
    if (!ex->stall_begin || !ex->stall_end)
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory for the stall events");
    enum tide_status st = TIDE_OK;
    for (uint32_t p = 0; p < ex->n_order && st == TIDE_OK; p++) {
        if (!waits_on_copies(ex, &ex->positions[p]))
            continue;
        st = tide_backend_event_new(ex->backend, &ex->stall_begin[p], err);
        if (st == TIDE_OK)
            st = tide_backend_event_new(ex->backend, &ex->stall_end[p], err);
    }
    return st;
}

/* Frees the profiling events and their arrays (at the end, or when creating them failed). */
static void free_profile_events(struct tide_executor *ex)
{
    struct tide_backend *b = ex->backend;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        if (ex->profile_start && ex->profile_start[p])
            tide_backend_event_free(b, ex->profile_start[p]);
        if (ex->profile_end && ex->profile_end[p])
            tide_backend_event_free(b, ex->profile_end[p]);
        if (ex->profile_wait && ex->profile_wait[p])
            tide_backend_event_free(b, ex->profile_wait[p]);
    }
    free(ex->profile_start);
    free(ex->profile_end);
    free(ex->profile_wait);
    free(ex->node_ms);
    ex->profile_start = ex->profile_end = ex->profile_wait = NULL;
    ex->node_ms = NULL;
}

/* Frees the stall events and their arrays. */
static void free_stall_events(struct tide_executor *ex)
{
    for (uint32_t p = 0; ex->stall_begin && p < ex->n_order; p++) {
        if (ex->stall_begin[p])
            tide_backend_event_free(ex->backend, ex->stall_begin[p]);
        if (ex->stall_end[p])
            tide_backend_event_free(ex->backend, ex->stall_end[p]);
    }
    free(ex->stall_begin);
    free(ex->stall_end);
    ex->stall_begin = ex->stall_end = NULL;
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
    if (ex->options.poison && !tide_backend_has_fill32(ex->backend))
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
    ex->host_home = xcalloc(n, sizeof(*ex->host_home));
    ex->fed = xcalloc(n, 1);
    ex->produced = xcalloc(n, 1);
    ex->treap_left = xcalloc(plan->n_regions, sizeof(*ex->treap_left));
    ex->treap_right = xcalloc(plan->n_regions, sizeof(*ex->treap_right));
    ex->treap_priority = xcalloc(plan->n_regions, sizeof(*ex->treap_priority));
    ex->alive = xcalloc(plan->n_regions, 1);
    ex->persistent = xcalloc(plan->n_regions, sizeof(*ex->persistent));
    if (!ex->regions || !ex->death_offsets || !ex->deaths || !ex->positions || !ex->position ||
        !ex->output_region_base || !ex->staging || !ex->host_home || !ex->fed || !ex->produced ||
        !ex->treap_left || !ex->treap_right || !ex->treap_priority || !ex->alive || !ex->persistent)
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
    for (uint32_t p = 0; p < plan->n_order; p++) {
        if (plan->death_offsets[p] > plan->death_offsets[p + 1])
            return tide_error_set(err, TIDE_INVALID,
                                  "executor: the plan's death lists are invalid");
    }
    for (uint32_t v = 0; v < n; v++)
        ex->position[v] = NIL;
    for (uint32_t p = 0; p < plan->n_order; p++) {
        uint32_t v = plan->order[p];
        if (v >= n || ex->position[v] != NIL)
            return tide_error_set(err, TIDE_INVALID, "executor: plan position %u is invalid", p);
        ex->position[v] = p;
        if (partition_of(&ex->graph->nodes[v]) >= ex->n_partitions)
            ex->n_partitions = partition_of(&ex->graph->nodes[v]) + 1;
    }
    ex->partition_high_water = xcalloc(ex->n_partitions, sizeof(*ex->partition_high_water));
    if (!ex->partition_high_water)
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory for %u partitions",
                              ex->n_partitions);
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

    /* Device and host resources, then the program that uses them. */
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
    st = alloc_host(ex, plan, err);
    if (st == TIDE_OK)
        st = build_program(ex, plan, err);
    if (st == TIDE_OK && ex->options.profile)
        st = create_profile_events(ex, err);
    if (st == TIDE_OK)
        st = create_stall_events(ex, err);
    if (st != TIDE_OK)
        return st;
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
    /* A node the backend cannot run is refused now, naming its op, not at the first step. */
    enum tide_status st = tide_backend_check_graph(backend, graph, err);
    if (st != TIDE_OK)
        return st;
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
    st = create(ex, plan, err);
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
    free_profile_events(ex);
    free_stall_events(ex);
    for (int s = 0; s < N_STREAMS; s++) {
        if (ex->trace_base[s])
            tide_backend_event_free(b, ex->trace_base[s]);
    }
    if (ex->host_arena)
        tide_backend_host_free(b, ex->host_arena);
    for (int s = 0; s < N_STREAMS; s++) {
        if (ex->streams[s])
            tide_backend_stream_free(b, ex->streams[s]);
    }
    if (ex->arena)
        tide_backend_arena_free(b, ex->arena);
    free(ex->regions);
    free(ex->partition_high_water);
    free(ex->death_offsets);
    free(ex->deaths);
    free(ex->events);
    free(ex->positions);
    free(ex->deps);
    free(ex->waits);
    free(ex->births);
    free(ex->views);
    free(ex->output_region);
    free(ex->output_region_base);
    free(ex->position);
    free(ex->staging);
    free(ex->host_home);
    free(ex->fed);
    free(ex->produced);
    free(ex->treap_left);
    free(ex->treap_right);
    free(ex->treap_priority);
    free(ex->alive);
    free(ex->persistent);
    free(ex->trace_device);
    free(ex->trace_slice);
    free(ex->trace_flow_to);
    free(ex->trace_host_delta);
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

/* Enqueues a position's work on its stream, between the accounting steps. */
static enum tide_status enqueue(struct tide_executor *ex, const struct exec_position *pos,
                                struct tide_error *err)
{
    struct tide_stream *stream = ex->streams[pos->stream];
    const struct tide_node *node = pos->args.node;
    switch (pos->kind) {
    case EXEC_COPY_IN:
    case EXEC_H2D:
        if (!pos->copy_bytes)
            return TIDE_OK;
        return enqueue_check(tide_backend_copy_h2d(ex->backend, pos->copy_dst, pos->copy_src,
                                                   pos->copy_bytes, stream),
                             node, "the h2d copy", err);
    case EXEC_D2H:
        if (!pos->copy_bytes)
            return TIDE_OK;
        return enqueue_check(tide_backend_copy_d2h(ex->backend, pos->copy_dst, pos->copy_src,
                                                   pos->copy_bytes, stream),
                             node, "the d2h copy", err);
    default:
        return enqueue_check(tide_backend_launch(ex->backend, stream, &pos->args), node,
                             "the launch", err);
    }
}

/*
 * Makes a position's stream wait for its cross-stream dependencies: in a
 * full step, the reduced waits; in a masked step, every dependency that ran
 * and that no earlier wait of the step on this stream covers (waited[t]:
 * 1 + the latest position of stream t waited for).
 */
static enum tide_status issue_waits(struct tide_executor *ex, const struct exec_position *pos,
                                    const uint8_t *mask, struct span deps, struct span waits,
                                    uint32_t waited[N_STREAMS], struct tide_error *err)
{
    struct tide_backend *b = ex->backend;
    struct tide_stream *stream = ex->streams[pos->stream];
    enum tide_status st = TIDE_OK;
    if (!mask) {
        for (uint32_t i = 0; i < waits.count && st == TIDE_OK; i++)
            st = tide_backend_event_wait(b, stream, ex->events[ex->waits[waits.begin + i]]);
    } else {
        for (uint32_t i = 0; i < deps.count && st == TIDE_OK; i++) {
            uint32_t u = ex->deps[deps.begin + i];
            uint32_t q = ex->position[u];
            uint8_t t = ex->positions[q].stream;
            if (!mask[u] || waited[t] > q)
                continue;
            st = tide_backend_event_wait(b, stream, ex->events[u]);
            waited[t] = q + 1;
        }
    }
    return enqueue_check(st, pos->args.node, "waiting for an event", err);
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

/* Whether a step records the profiling events: in profile mode, and while tracing. */
static bool timed(const struct tide_executor *ex)
{
    return ex->options.profile || ex->trace;
}

/* Whether a compute position recorded its stall event in this step (see create_profile_events). */
static bool stall_recorded(const struct tide_executor *ex, const struct exec_position *pos,
                           uint32_t p, bool runs, const uint8_t *mask)
{
    return runs && timed(ex) && ex->profile_wait && ex->profile_wait[p] &&
           (mask ? pos->deps_before.count : pos->waits_before.count) > 0;
}

/* Whether a position recorded its stall events in this step (see create_stall_events). */
static bool stall_timed(const struct tide_executor *ex, const struct exec_position *pos, uint32_t p,
                        bool runs, const uint8_t *mask)
{
    return runs && ex->stall_begin && ex->stall_begin[p] &&
           (mask ? pos->deps_before.count : pos->waits_before.count) > 0;
}

/* The time compute sat blocked on copies in a completed step (see DESIGN, "Statistics"). */
static double collect_stall(struct tide_executor *ex, const uint8_t *mask)
{
    double stall = 0;
    for (uint32_t p = 0; ex->stall_begin && p < ex->n_order; p++) {
        const struct exec_position *pos = &ex->positions[p];
        bool runs = pos->kind != EXEC_NOTHING && (!mask || mask[pos->node]);
        double blocked = 0;
        if (stall_timed(ex, pos, p, runs, mask) &&
            tide_backend_event_elapsed(ex->backend, ex->stall_begin[p], ex->stall_end[p],
                                       &blocked) == TIDE_OK &&
            blocked > 0)
            stall += blocked;
    }
    return stall;
}

/* Per-node times, after a completed profiled step. */
static void collect_profile(struct tide_executor *ex, const uint8_t *mask)
{
    struct tide_backend *b = ex->backend;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct exec_position *pos = &ex->positions[p];
        uint32_t v = pos->node;
        bool runs = pos->kind != EXEC_NOTHING && (!mask || mask[v]);
        double ms = 0;
        if (runs && ex->profile_start[p] &&
            tide_backend_event_elapsed(b, ex->profile_start[p], ex->profile_end[p], &ms) != TIDE_OK)
            ms = 0;
        ex->node_ms[v] = ms;
    }
}

/* ============================================================================
 * Tracing (see DESIGN)
 * ========================================================================== */

/*
 * What tracing needs beyond profile mode, built at the first start: the
 * profiling events (unless profile mode made them), one base event per
 * stream, each Fetch's and SwapIn's first consumer, and the host bytes that
 * each position makes live or frees.
 */
static enum tide_status trace_prepare(struct tide_executor *ex, struct tide_error *err)
{
    if (ex->trace_prepared)
        return TIDE_OK;
    const struct tide_graph *g = ex->graph;
    uint32_t n = ex->n_order;
    enum tide_status st = TIDE_OK;
    if (!ex->profile_start) {
        st = create_profile_events(ex, err);
        if (st != TIDE_OK) {
            free_profile_events(ex);
            return st;
        }
    }
    for (int s = 0; s < N_STREAMS && st == TIDE_OK; s++) {
        if (!ex->trace_base[s])
            st = tide_backend_event_new(ex->backend, &ex->trace_base[s], err);
    }
    if (st != TIDE_OK)
        return st;
    if (!ex->trace_device) {
        ex->trace_device = xcalloc(n, sizeof(*ex->trace_device));
        ex->trace_slice = xcalloc(n, sizeof(*ex->trace_slice));
        ex->trace_flow_to = xcalloc(n, sizeof(*ex->trace_flow_to));
        ex->trace_host_delta = xcalloc(n, sizeof(*ex->trace_host_delta));
    }
    uint32_t *first_use = xcalloc(ex->n_nodes, sizeof(*first_use));
    uint32_t *last_swap_in = xcalloc(ex->n_nodes, sizeof(*last_swap_in));
    if (!ex->trace_device || !ex->trace_slice || !ex->trace_flow_to || !ex->trace_host_delta ||
        !first_use || !last_swap_in) {
        free(first_use);
        free(last_swap_in);
        return tide_error_set(err, TIDE_NOMEM, "executor: out of memory for tracing %u positions",
                              n);
    }
    memset(first_use, 0xff, ex->n_nodes * sizeof(*first_use));
    memset(last_swap_in, 0xff, ex->n_nodes * sizeof(*last_swap_in));
    for (uint32_t p = 0; p < n; p++) {
        const struct tide_node *node = &g->nodes[ex->positions[p].node];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            uint32_t u = node->inputs[i].node;
            if (first_use[u] == NIL)
                first_use[u] = p;
            if (node->op == TIDE_OP_SWAP_IN)
                last_swap_in[u] = p;
        }
    }
    ex->trace_host_base = 0;
    memset(ex->trace_host_delta, 0, n * sizeof(*ex->trace_host_delta));
    for (uint32_t p = 0; p < n; p++) {
        uint32_t v = ex->positions[p].node;
        const struct tide_node *node = &g->nodes[v];
        uint64_t bytes = node->n_outputs ? node->outputs[0].nbytes : 0;
        bool copies_in = node->op == TIDE_OP_FETCH || node->op == TIDE_OP_SWAP_IN;
        ex->trace_flow_to[p] = copies_in ? first_use[v] : NIL;
        if ((node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST) && ex->host_home[v])
            ex->trace_host_base += bytes;
        else if (node->op == TIDE_OP_PLACEHOLDER && ex->staging[v])
            ex->trace_host_base += bytes;
        else if (node->op == TIDE_OP_SWAP_OUT) {
            ex->trace_host_delta[p] += (int64_t)bytes;
            if (last_swap_in[v] != NIL)
                ex->trace_host_delta[last_swap_in[v]] -= (int64_t)bytes;
        }
    }
    free(first_use);
    free(last_swap_in);
    ex->trace_prepared = true;
    return TIDE_OK;
}

enum tide_status tide_executor_trace_start(struct tide_executor *ex, struct tide_trace *trace,
                                           struct tide_error *err)
{
    if (!trace)
        return tide_error_set(err, TIDE_INVALID, "trace: the recording is NULL");
    if (tide_trace_graph(trace) != ex->graph)
        return tide_error_set(err, TIDE_INVALID,
                              "trace: the recording was made for another graph than the "
                              "executor's");
    if (!tide_backend_has_event_elapsed(ex->backend))
        return tide_error_set(err, TIDE_UNSUPPORTED,
                              "trace: the %s backend cannot time its events (no event_elapsed), "
                              "so its steps cannot be traced",
                              tide_backend_name(ex->backend));
    enum tide_status st = trace_prepare(ex, err);
    if (st != TIDE_OK)
        return st;
    ex->trace = trace;
    return TIDE_OK;
}

void tide_executor_trace_stop(struct tide_executor *ex)
{
    ex->trace = NULL;
}

/*
 * The time of a reached event in the step's device time: nanoseconds since
 * the earliest base event (first_ms: its time from base event 0), clamped
 * to the step's host span; -1 when the backend cannot say.
 */
static int64_t device_ns(struct tide_executor *ex, struct tide_event *event, double first_ms,
                         int64_t span_ns)
{
    double ms;
    if (!event ||
        tide_backend_event_elapsed(ex->backend, ex->trace_base[0], event, &ms) != TIDE_OK)
        return -1;
    int64_t ns = llround((ms - first_ms) * 1e6);
    return ns < 0 ? 0 : ns > span_ns ? span_ns : ns;
}

/* Appends a completed step to the recording (see DESIGN); begin and end are host times. */
static void collect_trace(struct tide_executor *ex, const uint8_t *mask, int64_t begin_ns,
                          int64_t end_ns)
{
    struct tide_trace *trace = ex->trace;
    int64_t span = end_ns - begin_ns;
    double first = 0;
    for (int s = 1; s < N_STREAMS; s++) {
        double ms;
        if (tide_backend_event_elapsed(ex->backend, ex->trace_base[0], ex->trace_base[s], &ms) ==
                TIDE_OK &&
            ms < first)
            first = ms;
    }
    tide_trace_step_begin(trace, ex->step, mask != NULL, begin_ns);
    uint64_t host = ex->trace_host_base;
    int64_t last_ts = 0;
    for (uint32_t p = 0; p < ex->n_order; p++) {
        const struct exec_position *pos = &ex->positions[p];
        ex->trace_slice[p] = NIL;
        if (pos->kind == EXEC_NOTHING || (mask && !mask[pos->node]))
            continue;
        int64_t start = device_ns(ex, ex->profile_start[p], first, span);
        int64_t end = device_ns(ex, ex->profile_end[p], first, span);
        if (start >= 0 && end >= start) {
            if (stall_recorded(ex, pos, p, true, mask)) {
                int64_t wait = device_ns(ex, ex->profile_wait[p], first, span);
                if (wait >= 0 && wait < start)
                    tide_trace_add_slice(trace, &(struct tide_trace_slice){
                                                    .node = pos->node,
                                                    .stream = pos->stream,
                                                    .kind = TIDE_TRACE_WAIT,
                                                    .start_ns = wait,
                                                    .dur_ns = start - wait,
                                                });
            }
            ex->trace_slice[p] = tide_trace_add_slice(
                trace, &(struct tide_trace_slice){
                           .node = pos->node,
                           .stream = pos->stream,
                           .kind = TIDE_TRACE_WORK,
                           .start_ns = start,
                           .dur_ns = end - start,
                           .bytes = pos->kind == EXEC_KERNEL ? 0 : pos->copy_bytes,
                       });
            if (start > last_ts)
                last_ts = start;
        }
        int64_t delta = ex->trace_host_delta[p];
        if (delta > 0)
            host += (uint64_t)delta;
        tide_trace_add_counter(trace, last_ts, ex->trace_device[p], host);
        if (delta < 0)
            host -= (uint64_t)-delta;
    }
    for (uint32_t p = 0; p < ex->n_order; p++) {
        uint32_t q = ex->trace_flow_to[p];
        if (q != NIL && ex->trace_slice[p] != NIL && ex->trace_slice[q] != NIL)
            tide_trace_add_flow(trace, ex->trace_slice[p], ex->trace_slice[q]);
    }
    tide_trace_add_counter(trace, span > last_ts ? span : last_ts, ex->trace_device_end, host);
    tide_trace_step_end(trace, end_ns);
}

/* ============================================================================
 * Running a step
 * ========================================================================== */

static enum tide_status run_step(struct tide_executor *ex, const uint8_t *mask,
                                 struct tide_step_stats *stats, struct tide_error *err)
{
    enum tide_status st = check_step(ex, mask, err);
    if (st != TIDE_OK)
        return st;
    int64_t t0 = now_ns();
    if (!mask)
        ex->step++;
    ex->training = !mask;
    accounting_reset(ex);
    memset(ex->partition_high_water, 0, ex->n_partitions * sizeof(*ex->partition_high_water));
    uint64_t h2d_bytes = 0, d2h_bytes = 0;
    uint32_t waited[N_STREAMS][N_STREAMS] = {{0}}; /* masked steps only */
    struct tide_backend *b = ex->backend;
    bool timing = timed(ex);
    for (int s = 0; s < N_STREAMS && ex->trace && st == TIDE_OK; s++) {
        st = tide_backend_event_record(b, ex->trace_base[s], ex->streams[s]);
        if (st != TIDE_OK)
            tide_error_set(err, st, "recording the trace's base event on stream %d failed: %s", s,
                           tide_strerror(st));
    }
    uint32_t p = 0;
    for (; p < ex->n_order && st == TIDE_OK; p++) {
        const struct exec_position *pos = &ex->positions[p];
        uint32_t v = pos->node;
        struct tide_stream *stream = ex->streams[pos->stream];
        bool runs = pos->kind != EXEC_NOTHING && (!mask || mask[v]);
        const struct tide_node *node = &ex->graph->nodes[v];
        if (runs) {
            for (uint32_t i = 0; i < pos->births.count && st == TIDE_OK; i++)
                st = region_born(ex, ex->births[pos->births.begin + i], p, err);
            if (ex->trace)
                ex->trace_device[p] = treap_top(ex);
            if (st == TIDE_OK && stall_recorded(ex, pos, p, runs, mask))
                st = enqueue_check(tide_backend_event_record(b, ex->profile_wait[p], stream), node,
                                   "recording a profiling event", err);
            bool stall = stall_timed(ex, pos, p, runs, mask);
            if (st == TIDE_OK && stall)
                st = enqueue_check(tide_backend_event_record(b, ex->stall_begin[p], stream), node,
                                   "recording a stall event", err);
            if (st == TIDE_OK)
                st = issue_waits(ex, pos, mask, pos->deps_before, pos->waits_before,
                                 waited[pos->stream], err);
            if (st == TIDE_OK && stall)
                st = enqueue_check(tide_backend_event_record(b, ex->stall_end[p], stream), node,
                                   "recording a stall event", err);
            if (st == TIDE_OK && timing)
                st = enqueue_check(tide_backend_event_record(b, ex->profile_start[p], stream), node,
                                   "recording a profiling event", err);
            if (st == TIDE_OK)
                st = enqueue(ex, pos, err);
            if (st == TIDE_OK && timing)
                st = enqueue_check(tide_backend_event_record(b, ex->profile_end[p], stream), node,
                                   "recording a profiling event", err);
            if (pos->kind == EXEC_D2H)
                d2h_bytes += pos->copy_bytes;
            else if (pos->kind != EXEC_KERNEL)
                h2d_bytes += pos->copy_bytes;
        }
        /* Its partition's high water: what is live while it runs, before anything dies. */
        uint64_t top = live_top(ex), *part_top = &ex->partition_high_water[partition_of(node)];
        if (top > *part_top)
            *part_top = top;
        /* Regions whose last reader is this position die, even when it did not run. */
        uint32_t deaths_begin = ex->death_offsets[p], deaths_end = ex->death_offsets[p + 1];
        if (ex->options.poison && deaths_begin < deaths_end && st == TIDE_OK)
            st = issue_waits(ex, pos, mask, pos->deps_poison, pos->waits_poison,
                             waited[pos->stream], err);
        for (uint32_t i = deaths_begin; i < deaths_end && st == TIDE_OK; i++) {
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
        if (runs && st == TIDE_OK && ex->events[v] && (mask || pos->record_full))
            st = enqueue_check(tide_backend_event_record(b, ex->events[v], stream), node,
                               "recording its event", err);
    }
    if (ex->trace)
        ex->trace_device_end = treap_top(ex);
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
    double stall_ms = collect_stall(ex, mask);
    if (ex->options.profile && ex->node_ms)
        collect_profile(ex, mask);
    /* The step's time includes reading the events, so that what tracing costs shows. */
    if (ex->trace)
        collect_trace(ex, mask, t0, now_ns());
    if (stats) {
        memset(stats, 0, sizeof(*stats));
        stats->step = ex->step;
        stats->step_ms = (double)(now_ns() - t0) / 1e6;
        stats->high_water_bytes = ex->high_water;
        stats->partition_high_water_bytes = ex->partition_high_water;
        stats->n_partitions = ex->n_partitions;
        stats->h2d_bytes = h2d_bytes;
        stats->d2h_bytes = d2h_bytes;
        stats->stall_ms = stall_ms;
        stats->node_ms = ex->options.profile && tide_backend_has_event_elapsed(b) ? ex->node_ms : NULL;
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

/* Whether output k of node v is a host-homed Variable or Const (its home outlives steps). */
static bool host_persistent(const struct tide_executor *ex, uint32_t v, uint32_t k)
{
    const struct tide_node *node = &ex->graph->nodes[v];
    return ex->position[v] != NIL && k == 0 && ex->host_home[v] &&
           (node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST);
}

/* The checks both reads share: output is kept between steps and has a value; out-params say where. */
static enum tide_status readable(struct tide_executor *ex, struct tide_edge output,
                                 const struct tide_node **out, bool *on_host, uint32_t *region,
                                 struct tide_error *err)
{
    const struct tide_graph *g = ex->graph;
    if (output.node >= ex->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "read: node id %u of %u", output.node,
                              ex->n_nodes);
    const struct tide_node *node = &g->nodes[output.node];
    if (output.output >= node->n_outputs)
        return tide_node_error(err, TIDE_INVALID, node, "read: it has no output %u", output.output);
    *on_host = host_persistent(ex, output.node, output.output);
    uint32_t r = ex->position[output.node] == NIL ? NIL : region_of(ex, output.node, output.output);
    if (!*on_host && (r == NIL || !ex->regions[r].persistent))
        return tide_node_error(err, TIDE_STATE, node,
                               "output %u is not kept after a step (only Variables, Consts and "
                               "pinned outputs are): fetch it to read it",
                               output.output);
    if (node->op != TIDE_OP_VARIABLE && node->op != TIDE_OP_CONST && !ex->produced[output.node])
        return tide_node_error(err, TIDE_STATE, node, "has not run yet: nothing to read");
    *out = node;
    *region = r;
    return TIDE_OK;
}

/* Copies bytes [offset, offset + bytes) of a readable output (checked by the caller). */
static enum tide_status read_checked(struct tide_executor *ex, struct tide_edge output,
                                     const struct tide_node *node, bool on_host, uint32_t r,
                                     uint64_t offset, void *dst, uint64_t bytes,
                                     struct tide_error *err)
{
    if (bytes == 0)
        return TIDE_OK;
    /* No step is in flight, so a host home holds the value the last step wrote back. */
    if (on_host) {
        memcpy(dst, (const uint8_t *)ex->host_home[output.node] + offset, bytes);
        return TIDE_OK;
    }
    struct tide_stream *d2h = ex->streams[TIDE_STREAM_D2H];
    enum tide_status st = tide_backend_copy_d2h(
        ex->backend, dst, ex->arena + ex->regions[r].offset + offset, bytes, d2h);
    enum tide_status sync = tide_backend_stream_sync(ex->backend, d2h, err);
    if (st != TIDE_OK)
        return tide_node_error(err, st, node, "read: the copy failed: %s", tide_strerror(st));
    return sync;
}

enum tide_status tide_executor_read(struct tide_executor *ex, struct tide_edge output, void *dst,
                                    uint64_t bytes, struct tide_error *err)
{
    const struct tide_node *node = NULL;
    bool on_host = false;
    uint32_t r = NIL;
    enum tide_status st = readable(ex, output, &node, &on_host, &r, err);
    if (st != TIDE_OK)
        return st;
    uint64_t nbytes = node->outputs[output.output].nbytes;
    if (bytes != nbytes) {
        char shape[160];
        return tide_node_error(
            err, TIDE_INVALID, node, "read of %" PRIu64 " bytes, output %u has %" PRIu64 " (%s %s)",
            bytes, output.output, nbytes, tide_dtype_name(node->outputs[output.output].dtype),
            tide_shape_format(&node->outputs[output.output].shape, shape, sizeof(shape)));
    }
    return read_checked(ex, output, node, on_host, r, 0, dst, bytes, err);
}

enum tide_status tide_executor_read_range(struct tide_executor *ex, struct tide_edge output,
                                          uint64_t offset, void *dst, uint64_t bytes,
                                          struct tide_error *err)
{
    const struct tide_node *node = NULL;
    bool on_host = false;
    uint32_t r = NIL;
    enum tide_status st = readable(ex, output, &node, &on_host, &r, err);
    if (st != TIDE_OK)
        return st;
    uint64_t nbytes = node->outputs[output.output].nbytes;
    if (offset > nbytes || bytes > nbytes - offset)
        return tide_node_error(err, TIDE_INVALID, node,
                               "read of bytes %" PRIu64 " to %" PRIu64 ": output %u has %" PRIu64,
                               offset, offset + bytes, output.output, nbytes);
    return read_checked(ex, output, node, on_host, r, offset, dst, bytes, err);
}

/* The checks both writes share: variable is a Variable of the plan; *out gets its node. */
static enum tide_status writable_variable(struct tide_executor *ex, uint32_t variable,
                                          const struct tide_node **out, struct tide_error *err)
{
    if (variable >= ex->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "write: node id %u of %u", variable, ex->n_nodes);
    const struct tide_node *node = &ex->graph->nodes[variable];
    if (node->op != TIDE_OP_VARIABLE)
        return tide_node_error(err, TIDE_INVALID, node, "is not a Variable: it cannot be written");
    if (ex->position[variable] == NIL)
        return tide_node_error(err, TIDE_INVALID, node, "is not in the plan");
    *out = node;
    return TIDE_OK;
}

enum tide_status tide_executor_write_variable(struct tide_executor *ex, uint32_t variable,
                                              const void *src, uint64_t bytes,
                                              struct tide_error *err)
{
    const struct tide_node *node = NULL;
    enum tide_status st = writable_variable(ex, variable, &node, err);
    if (st != TIDE_OK)
        return st;
    uint64_t nbytes = node->outputs[0].nbytes;
    if (bytes != nbytes) {
        char shape[160];
        return tide_node_error(err, TIDE_INVALID, node,
                               "write of %" PRIu64 " bytes, the Variable has %" PRIu64 " (%s %s)",
                               bytes, nbytes, tide_dtype_name(node->outputs[0].dtype),
                               tide_shape_format(&node->outputs[0].shape, shape, sizeof(shape)));
    }
    return tide_executor_write_variable_range(ex, variable, 0, src, bytes, err);
}

enum tide_status tide_executor_write_variable_range(struct tide_executor *ex, uint32_t variable,
                                                    uint64_t offset, const void *src,
                                                    uint64_t bytes, struct tide_error *err)
{
    const struct tide_node *node = NULL;
    enum tide_status st = writable_variable(ex, variable, &node, err);
    if (st != TIDE_OK)
        return st;
    uint64_t nbytes = node->outputs[0].nbytes;
    if (offset > nbytes || bytes > nbytes - offset)
        return tide_node_error(err, TIDE_INVALID, node,
                               "write of bytes %" PRIu64 " to %" PRIu64
                               ": the Variable has %" PRIu64,
                               offset, offset + bytes, nbytes);
    if (bytes == 0)
        return TIDE_OK;
    /* A host-homed Variable is fetched from its home at its next use: write the home. */
    if (host_persistent(ex, variable, 0)) {
        memcpy((uint8_t *)ex->host_home[variable] + offset, src, bytes);
        return TIDE_OK;
    }
    uint32_t r = region_of(ex, variable, 0);
    struct tide_stream *h2d = ex->streams[TIDE_STREAM_H2D];
    st = tide_backend_copy_h2d(ex->backend, ex->arena + ex->regions[r].offset + offset, src, bytes,
                               h2d);
    enum tide_status sync = tide_backend_stream_sync(ex->backend, h2d, err);
    if (st != TIDE_OK)
        return tide_node_error(err, st, node, "write: the copy failed: %s", tide_strerror(st));
    return sync;
}

uint64_t tide_executor_steps(const struct tide_executor *ex)
{
    return ex->step;
}

enum tide_status tide_executor_set_step(struct tide_executor *ex, uint64_t steps,
                                        struct tide_error *err)
{
    if (steps == UINT64_MAX)
        return tide_error_set(err, TIDE_INVALID, "set step: %" PRIu64 " leaves no next step",
                              steps);
    /* No step is in flight: each one ends with every stream synchronised. */
    ex->step = steps;
    return TIDE_OK;
}
