/* SPDX-License-Identifier: MIT */
/*
 * swapper-impl.h: what the files of swapper/ share.
 *
 *   swap.c      the swap pass: SwapOut and SwapIn for far uses of feature maps
 *   pipeline.c  one policy applied to a graph: placement, swap, the final
 *               order, streams and homes, memplan; and the report
 *   estimate.c  the same policy simulated without touching a graph: the
 *               bytes it moves and the most bytes it holds at once
 *   swapper.c   tide_plan_memory: admission, candidates, the search
 *
 * A planner holds what every trial of one tide_plan_memory call shares: the
 * partitioning of the caller's graph (the memory passes never change the
 * original nodes' order, only add nodes around them), the backend's
 * workspace sizes, and what kind of tensor each output is.
 */
#ifndef TIDE_SWAPPER_SWAPPER_IMPL_H
#define TIDE_SWAPPER_SWAPPER_IMPL_H

#include "partitioner/partitioner.h"
#include "placement/placement.h"
#include "swapper/swapper.h"

/* A threshold that never splits a use group: swapping off. */
#define TIDE__NEVER UINT32_MAX

/* What the memory passes may do with a tensor (an output of an original node). */
enum tide__tensor_kind {
    TIDE__TENSOR_STATE,      /* a Variable's or Const's: homed by placement */
    TIDE__TENSOR_PERSISTENT, /* pinned by the caller: alive across steps on the device */
    TIDE__TENSOR_FIXED,      /* on the device from producer to last use, never swapped */
    TIDE__TENSOR_FEATURE,    /* a feature map: the swapper may move it */
    TIDE__TENSOR_HOST,       /* homed on the host (a SwapOut's output from the wire) */
};

/* One point of the search space: what placement and the swapper do. */
struct tide__choice {
    bool vars_host;
    uint32_t var_threshold;  /* splits Fetch groups */
    uint32_t swap_threshold; /* splits feature maps' uses; TIDE__NEVER: no swapping */
    uint32_t prefetch;
};

/* Bytes a plan moves per step. */
struct tide__moved {
    uint64_t swap_in;
    uint64_t swap_out;
    uint64_t fetch;
    uint64_t write_back;
};

static inline uint64_t tide__moved_total(const struct tide__moved *m)
{
    return m->swap_in + m->swap_out + m->fetch + m->write_back;
}

struct tide__planner {
    struct tide_graph *graph;        /* the caller's, partitioned and not yet rewritten */
    const struct tide_plan_env *env; /* never NULL */
    uint64_t alignment;
    uint32_t n_original; /* nodes before the memory passes */
    struct tide_partitioning part;
    uint64_t *workspace; /* per original node: the backend's scratch bytes */
    uint8_t *kinds;      /* per tensor of part: enum tide__tensor_kind */
    /* Scratch of tide__estimate. */
    int64_t *delta; /* 4 * n_original + 4 keys */
    struct tide_use_group *groups;
};

/*
 * Partitions graph (writing node->partition), asks env for every node's
 * workspace once, and classifies every output. The planner keeps pointers to
 * graph and env, which must outlive it.
 */
enum tide_status tide__planner_init(struct tide__planner *pl, struct tide_graph *graph,
                                    uint32_t partition_size, const struct tide_plan_env *env,
                                    struct tide_error *err);
/* Frees what init allocated; NULL is a no-op. */
void tide__planner_release(struct tide__planner *pl);

/* bytes rounded up to the planner's alignment (saturating). */
uint64_t tide__align(const struct tide__planner *pl, uint64_t bytes);

/*
 * The swap pass on graph (the planner's graph or a clone of it, with
 * placement already applied): SwapOut/SwapIn for every feature map with a
 * use more than threshold partitions after the previous one.
 */
enum tide_status tide__swap(struct tide_graph *graph, const struct tide__planner *pl,
                            uint32_t threshold, uint32_t prefetch,
                            struct tide_place_insertions *inserted, struct tide__moved *moved,
                            struct tide_error *err);

/*
 * Placement, swap, the final order, streams and homes for one choice on
 * graph (the planner's graph or a clone of it); *order gets the final order
 * (malloc'd, graph->n_nodes ids). moved may be NULL.
 */
enum tide_status tide__rewrite(const struct tide__planner *pl, struct tide_graph *graph,
                               const struct tide__choice *choice, uint32_t **order,
                               struct tide__moved *moved, struct tide_error *err);

/* tide__rewrite, then memplan: the whole pipeline. plan is released by the caller. */
enum tide_status tide__apply(const struct tide__planner *pl, struct tide_graph *graph,
                             const struct tide__choice *choice, struct tide_memplan *plan,
                             struct tide__moved *moved, struct tide_error *err);

/*
 * Applies to graph a choice already built on a clone of it (built, with its
 * plan): tide__rewrite, then what memplan wrote into the clone — output
 * offsets and reuse edges — copied over, so that plan (which refers to node
 * ids only) serves graph as it stands. Saves a second memplan run, the most
 * expensive step on big swapped graphs.
 */
enum tide_status tide__adopt(const struct tide__planner *pl, struct tide_graph *graph,
                             const struct tide__choice *choice, const struct tide_graph *built,
                             const struct tide_memplan *plan, struct tide_error *err);

/*
 * Fills report's partitions, totals, host bytes and peak from an applied
 * graph and its plan. Returns TIDE_NOMEM only.
 */
enum tide_status tide__report_fill(const struct tide__planner *pl, const struct tide_graph *graph,
                                   const struct tide_memplan *plan, struct tide_plan_report *report,
                                   struct tide_error *err);

/*
 * The position of plan's order where the most bytes are live, moved to the
 * first kernel (not a memory op) at or after it: the node whose working set
 * the peak is about.
 */
uint32_t tide__peak_node(const struct tide_graph *graph, const struct tide_memplan *plan);

/* What tide__estimate predicts for a choice. */
struct tide__estimate {
    uint64_t live_bytes; /* the most bytes live at once: memplan's peak is at least this */
    struct tide__moved moved;
};

/*
 * Simulates a choice on the planner's partitioning without building it:
 * the same intervals memplan would place (workspaces of inserted memory ops
 * taken as 0), so live_bytes is exactly the most bytes memplan's plan holds
 * at once, a lower bound of its peak. Linear in the graph, no allocation.
 */
void tide__estimate(struct tide__planner *pl, const struct tide__choice *choice,
                    struct tide__estimate *out);

#endif /* TIDE_SWAPPER_SWAPPER_IMPL_H */
