/* SPDX-License-Identifier: MIT */
/*
 * memplan.h: a fixed arena offset for every device tensor, before anything runs.
 *
 * Graphs are static, so the whole schedule is known ahead: given an execution
 * order, each device-homed output lives from its producer's position to its
 * last reader's position, and each node's kernel workspace lives at the
 * node's position only. memplan places every such interval in one arena,
 * greedily by size (largest first, each at the lowest offset that does not
 * overlap an interval alive at the same time), as TFLite's arena planner and
 * ggml-alloc do. No allocator runs on the hot path, and the predicted peak —
 * the largest offset + size — is exactly the arena the job uses.
 *
 * Persistent tensors (Variables, Consts, and anything the caller pins) live
 * across steps: their interval is the whole order, and they are placed first.
 *
 * In place: an element-wise node (TIDE_OP_F_INPLACE) that is the last reader
 * of an input of its output's size writes its output over that input, so the
 * two regions share one offset (region.inplace_of) and together count once.
 *
 * The host arena: memplan also lays out the job's one host buffer, which the
 * executor allocates once (pinned on CUDA) and never again. It holds the
 * homes of host-homed outputs (Variables, Consts and optimizer state homed on
 * the host, and SwapOut outputs: the swap slots), a staging buffer per
 * Placeholder (the feed is copied there, then to the device), and one scratch
 * buffer through which device-homed Variables and Consts get their initial
 * values. Host buffers live for the whole job, so they are packed back to
 * back in order of position (scratch last), each aligned, and never share
 * addresses: a swap slot is written on the d2h stream and read on the h2d
 * stream, so sharing slots by lifetime would need the reuse edges above for
 * host memory too.
 *
 * Reuse edges: when a tensor's region overlaps an earlier occupant's, the new
 * producer must not start before every reader of the old occupant finished. On
 * one stream that holds by order; across streams memplan adds a control edge
 * from each other stream's latest reader to the new producer, which the executor turns into an
 * event. Offsets are written into graph->nodes[v].outputs[k].offset.
 *
 * Example usage:
 *
 *     struct tide_memplan plan;
 *     struct tide_memplan_options opt = {.alignment = 256, .backend = b};
 *     tide_memplan_build(graph, order, n, &opt, &plan, &err);
 *     printf("peak %llu\n", plan.peak_bytes);
 *     tide_memplan_release(&plan);
 */
#ifndef TIDE_MEMPLAN_MEMPLAN_H
#define TIDE_MEMPLAN_MEMPLAN_H

#include <stdint.h>

#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TIDE_NO_OFFSET UINT64_MAX
/* struct tide_memplan_region.inplace_of of a region that takes over no other. */
#define TIDE_MEMPLAN_NO_REGION UINT32_MAX

/* Every host buffer's offset and size in the host arena is a multiple of this. */
#define TIDE_MEMPLAN_HOST_ALIGNMENT 64

/* struct tide_memplan_host_buffer.output of a Placeholder's staging buffer. */
#define TIDE_MEMPLAN_STAGING UINT32_MAX
/* struct tide_memplan_host_buffer.node of the initial values' scratch buffer. */
#define TIDE_MEMPLAN_SCRATCH UINT32_MAX

struct tide_memplan_options {
    /* Offsets and sizes are rounded up to this (0: 256, CUDA-friendly). */
    uint64_t alignment;
    /* Scratch bytes per node; NULL: none. ctx is passed through. */
    uint64_t (*workspace_bytes)(void *ctx, const struct tide_graph *graph,
                                const struct tide_node *node);
    void *workspace_ctx;
    /* Nodes whose outputs live across steps besides Variables and Consts (may be NULL). */
    const uint8_t *pinned; /* graph->n_nodes flags */
};

/* One device-resident interval of the plan. */
struct tide_memplan_region {
    uint32_t node;     /* producer (or the node whose workspace it is) */
    uint32_t output;   /* output index, or UINT32_MAX for a workspace */
    uint32_t first;    /* position in order where it becomes alive */
    uint32_t last;     /* position of its last reader (inclusive) */
    uint64_t offset;
    uint64_t bytes;    /* rounded to alignment */
    uint8_t persistent;
    /*
     * The region whose memory this output takes over (TIDE_MEMPLAN_NO_REGION:
     * none): the producer's op may overwrite that input (INPLACE) and is its
     * last reader, so both have one offset and that region dies here as
     * this one is born.
     */
    uint32_t inplace_of;
};

/*
 * The first position at which region r holds bytes of its own: its first,
 * or the next for a region written in place over another (at its first it
 * is the other's memory, counted there). Above r->last when it holds none
 * of its own. What counts live bytes per position counts from here.
 */
static inline uint32_t tide_memplan_own_first(const struct tide_memplan_region *r)
{
    return r->first + (r->inplace_of != TIDE_MEMPLAN_NO_REGION);
}

/* One buffer of the host arena. */
struct tide_memplan_host_buffer {
    uint32_t node;   /* the owner, or TIDE_MEMPLAN_SCRATCH */
    uint32_t output; /* the host-homed output, or TIDE_MEMPLAN_STAGING */
    uint64_t offset; /* in the host arena */
    uint64_t bytes;  /* rounded to TIDE_MEMPLAN_HOST_ALIGNMENT, at least one alignment */
};

struct tide_memplan {
    uint64_t peak_bytes; /* max offset + bytes: the arena needed */
    uint64_t persistent_bytes;
    uint32_t n_order;
    uint32_t *order; /* the execution order, copied */
    uint32_t *position; /* node id -> position in order (UINT32_MAX if absent) */
    uint32_t n_regions;
    struct tide_memplan_region *regions;
    uint64_t *workspace_offset; /* per node id; TIDE_NO_OFFSET when none */
    uint64_t *workspace_bytes;  /* per node id */
    /* Per position: the regions that die after it (for the executor's accounting). */
    uint32_t *death_offsets; /* n_order + 1 */
    uint32_t *deaths;        /* region indices */
    uint32_t reuse_edges;    /* control edges added */
    /* The host arena (see the top of this file). */
    uint64_t host_bytes;      /* the host arena's size: the one host allocation of the job */
    uint64_t host_home_bytes; /* the host-homed outputs' own bytes, unaligned: homes and swap */
    uint32_t n_host_buffers;
    struct tide_memplan_host_buffer *host_buffers; /* in order of offset */
};

/*
 * Plans the graph in the given order (every node once, topological). Writes
 * offsets into the graph's outputs whose home is TIDE_HOME_DEVICE and adds
 * cross-stream reuse edges; lays out the host arena (plan->host_buffers),
 * whose offsets stay in the plan. The result is freed with
 * tide_memplan_release.
 */
enum tide_status tide_memplan_build(struct tide_graph *graph, const uint32_t *order, uint32_t n,
                                    const struct tide_memplan_options *options,
                                    struct tide_memplan *out, struct tide_error *err);

/* Frees what tide_memplan_build allocated and zeroes the plan. NULL is a no-op. */
void tide_memplan_release(struct tide_memplan *plan);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MEMPLAN_MEMPLAN_H */
