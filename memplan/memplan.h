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
};

/*
 * Plans the graph in the given order (every node once, topological). Writes
 * offsets into the graph's outputs whose home is TIDE_HOME_DEVICE and adds
 * cross-stream reuse edges. The result is freed with tide_memplan_release.
 */
enum tide_status tide_memplan_build(struct tide_graph *graph, const uint32_t *order, uint32_t n,
                                    const struct tide_memplan_options *options,
                                    struct tide_memplan *out, struct tide_error *err);

void tide_memplan_release(struct tide_memplan *plan);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_MEMPLAN_MEMPLAN_H */
