/* SPDX-License-Identifier: MIT */
/*
 * swapper-impl.h: what the files of swapper/ share.
 *
 *   actions.def the memory actions, one line each (keep, swap)
 *   actions.c   the action table, and the driver that gives every feature
 *               map to the first action that claims it (KEEP: stay put)
 *   swap.c      the SWAP action: SwapOut and SwapIn for far uses of feature maps
 *   recompute.c the RECOMPUTE action: a cheap producer run again before far uses
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
    uint32_t swap_threshold; /* splits feature maps' uses into near and far groups, which a
                                memory action (swap) may take; TIDE__NEVER: none is far */
    uint32_t prefetch;
    bool recompute; /* the RECOMPUTE action may take far groups of cheap tensors (recompute.c) */
    bool no_swap;   /* SWAP takes nothing: a far group not recomputed is kept (checkpoint-sqrt) */
    /*
     * RECOMPUTE takes only tensors of at most this many aligned bytes (0: any
     * size): a copy holds its tensor, its chain's links and its pulled
     * inputs at once, which at tight budgets only small tensors can afford.
     */
    uint64_t recompute_limit;
};

/* Memory actions, generated from actions.def: TIDE__ACTION_KEEP, TIDE__ACTION_SWAP, ... */
enum tide__action_id {
#define TIDE_MEMORY_ACTION(ID, name) TIDE__ACTION_##ID,
#include "swapper/actions.def"
#undef TIDE_MEMORY_ACTION
    TIDE__ACTION_COUNT
};

/*
 * What one action costs per step, summed over the tensors it handles:
 * bytes copied each way between device and host, and bytes of outputs made
 * again by kernels run a second time (what a recompute action pays in
 * compute instead of copies; keep and swap leave it 0).
 */
struct tide__action_cost {
    uint64_t to_device;
    uint64_t to_host;
    uint64_t remade;
};

/* What a plan costs per step: each action's, and placement's Fetch and WriteBack. */
struct tide__moved {
    struct tide__action_cost actions[TIDE__ACTION_COUNT];
    uint64_t fetch;
    uint64_t write_back;
};

/* Bytes copied between host and device per step, over every action and placement. */
static inline uint64_t tide__moved_total(const struct tide__moved *m)
{
    uint64_t sum = m->fetch + m->write_back;
    for (int a = 0; a < TIDE__ACTION_COUNT; a++)
        sum += m->actions[a].to_device + m->actions[a].to_host;
    return sum;
}

/* Bytes made again by kernels per step, over every action. */
static inline uint64_t tide__moved_remade(const struct tide__moved *m)
{
    uint64_t sum = 0;
    for (int a = 0; a < TIDE__ACTION_COUNT; a++)
        sum += m->actions[a].remade;
    return sum;
}

struct tide__planner {
    struct tide_graph *graph;        /* the caller's, partitioned and not yet rewritten */
    const struct tide_plan_env *env; /* never NULL */
    uint64_t alignment;
    uint32_t n_original; /* nodes before the memory passes */
    struct tide_partitioning part;
    uint64_t *workspace; /* per original node: the backend's scratch bytes */
    uint8_t *kinds;      /* per tensor of part: enum tide__tensor_kind */
    /*
     * Per tensor of part: its bytes, and rounded to the alignment; per
     * position of part's order: the workspace rounded. Read by every
     * simulation, which would otherwise chase the graph's nodes each time.
     */
    uint64_t *tensor_bytes;
    uint64_t *tensor_aligned;
    uint64_t *workspace_at;
    /*
     * Per use of a Variable or Const (indexed as part's use arrays, from
     * tensors[0].uses): 1 when the use writes it in place (an update).
     */
    uint8_t *use_writes;
    /*
     * Per use of any tensor (indexed as use_writes): 1 when its node may
     * write its output over the tensor (tide__overwrites_input), which
     * depends on the graph alone; the simulation asks it of every use
     * where an interval ends, on every candidate.
     */
    uint8_t *use_overwrites;
    /* Scratch of tide__estimate. */
    int64_t *delta; /* 4 * n_original + 4 keys */
    struct tide_use_group *groups;
    /*
     * Scratch of the RECOMPUTE action's claims (recompute.c), which splits
     * the uses of a producer's inputs while groups holds the tensor's own.
     */
    struct tide_use_group *input_groups;
    /*
     * Per use (indexed as use_writes), under a choice with RECOMPUTE: the
     * earliest position at which a recomputed copy reads the far group that
     * starts at that use, when that is before the group's own load
     * (UINT32_MAX: none). Written by tide__recompute_pulls.
     */
    uint32_t *pulled;
    uint8_t *ends;       /* 4 * n_original + 4 keys: 1 where an interval of one tensor ends */
    uint32_t *ended;     /* those keys, to clear them */
    uint8_t *overwrites; /* per position: 1 when the node there writes over an input it frees */
};

/*
 * Whether original node v may write its output over tensor t, an input of
 * it (tide_graph_may_overwrite), as memplan does where v is the last reader
 * of t's copy: both are feature maps or fixed tensors (never a Variable's,
 * a Const's or a pinned one) and t is not empty.
 */
bool tide__overwrites_input(const struct tide__planner *pl, uint32_t v, uint32_t t);

/*
 * Partitions graph (writing node->partition), asks env for every node's
 * workspace once, and classifies every output. The planner keeps pointers to
 * graph and env, which must outlive it.
 */
enum tide_status tide__planner_init(struct tide__planner *pl, struct tide_graph *graph,
                                    uint32_t partition_size, const struct tide_plan_env *env,
                                    struct tide_error *err);
/*
 * A planner like base (same graph and env) at another partition size, from
 * base's partitioning, workspaces and kinds without walking the graph
 * again (tide_partition_resize). Leaves node->partition as it is.
 */
enum tide_status tide__planner_init_from(struct tide__planner *pl, const struct tide__planner *base,
                                         uint32_t partition_size, struct tide_error *err);
/* Frees what init allocated; NULL is a no-op. */
void tide__planner_release(struct tide__planner *pl);

/*
 * Writes pl's partition of every original node into node->partition of the
 * planner's graph: planners of several partition sizes share one graph, and
 * a trial's clone or the final plan must carry the partitions of its own.
 */
void tide__planner_stamp(const struct tide__planner *pl);

/* bytes rounded up to the planner's alignment (saturating). */
uint64_t tide__align(const struct tide__planner *pl, uint64_t bytes);

/*
 * Placement, the memory actions, the final order, streams and homes for one choice on
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

/* ============================================================================
 * Memory actions
 *
 * A memory action is what the planner does with one feature map (an output
 * the classification above calls TIDE__TENSOR_FEATURE): keep it on the
 * device from its producer to its last use, swap it out and back in for its
 * far uses, and — next — recompute it from its producer's inputs before its
 * far uses. Each is one line of actions.def and one struct tide__memory_action
 * (tide__action_<name>), which says everything the planner needs:
 *
 *   claims    whether it takes the tensor under a choice. The table is asked
 *             in the order of actions.def and the first action that claims a
 *             tensor gets it; KEEP, last, claims everything.
 *   estimate  its effect on liveness — the device intervals, in keys
 *             (placement.h), of the tensor and of whatever the action adds
 *             (a SwapIn's output, a recomputed copy) — and its cost per step,
 *             for the simulation (estimate.c) that scores every candidate.
 *   rewrite   its nodes in the graph: what to insert, where (a key of the
 *             final order), and which consumers read the new nodes. NULL
 *             when the action inserts nothing (KEEP).
 *
 * estimate and rewrite must agree exactly: the same intervals that memplan
 * places for the rewritten graph, the same cost (test_swapper checks both
 * for every action on every choice it tries).
 * ========================================================================== */

/* One feature map under one choice: everything an action may read about it. */
struct tide__action_tensor {
    const struct tide__planner *pl; /* graph, partitioning, workspaces, kinds */
    const struct tide__choice *choice;
    uint32_t tensor;                     /* index into pl->part.tensors */
    const struct tide_tensor_life *life; /* producer (life->tensor), uses and their partitions */
    uint32_t made;                       /* position of the producer in pl->part.order */
    uint64_t bytes;                      /* nbytes, as copies move it */
    uint64_t aligned;                    /* nbytes rounded as memplan places it */
    /*
     * The uses split at choice->swap_threshold, the producer first
     * (tide_place_group_uses): group 0 is near the producer, every later
     * group is far. n_groups is 1 when no use is far (or the threshold is
     * TIDE__NEVER, groups then left unset).
     */
    const struct tide_use_group *groups;
    uint32_t n_groups;
};

/* The device intervals of a simulated plan, in keys (estimate.c owns the array). */
struct tide__live {
    int64_t *delta; /* 4 * n_order + 4 entries: += bytes at first, -= bytes after last */
    /* When not NULL: ends[key] is set where an interval ends, and the key listed in ended. */
    uint8_t *ends;
    uint32_t *ended;
    uint32_t n_ended;
};

/* Adds bytes live from key first to key last, both included. */
static inline void tide__live_add(struct tide__live *live, uint64_t first, uint64_t last,
                                  uint64_t bytes)
{
    live->delta[first] += (int64_t)bytes;
    live->delta[last + 1] -= (int64_t)bytes;
    if (live->ends && !live->ends[last]) {
        live->ends[last] = 1;
        live->ended[live->n_ended++] = (uint32_t)last;
    }
}

struct tide__memory_action {
    const char *name; /* lower case, as in actions.def */
    bool (*claims)(const struct tide__action_tensor *t);
    void (*estimate)(const struct tide__action_tensor *t, struct tide__live *live,
                     struct tide__action_cost *cost);
    /* May be NULL: the action inserts nothing. */
    enum tide_status (*rewrite)(const struct tide__action_tensor *t, struct tide_graph *graph,
                                struct tide_place_insertions *inserted,
                                struct tide__action_cost *cost, struct tide_error *err);
};

/* Each action's entry, defined in the file that implements it (see actions.def). */
#define TIDE_MEMORY_ACTION(ID, name) extern const struct tide__memory_action tide__action_##name;
#include "swapper/actions.def"
#undef TIDE_MEMORY_ACTION

/* The table, indexed by enum tide__action_id. */
extern const struct tide__memory_action *const tide__memory_actions[TIDE__ACTION_COUNT];

/*
 * Describes tensor `tensor` of the planner under choice: groups is scratch
 * of at least n_uses + 1 entries that the split is written to (NULL: no
 * split, n_groups 1 — enough for KEEP).
 */
void tide__action_tensor_init(struct tide__action_tensor *t, const struct tide__planner *pl,
                              const struct tide__choice *choice, uint32_t tensor,
                              struct tide_use_group *groups);

/* The action that handles t: the first in the table that claims it. */
enum tide__action_id tide__action_pick(const struct tide__action_tensor *t);

/*
 * The life of input i of t's producer (NULL past its inputs): what an action
 * that runs the producer again must keep, or bring back, until then.
 */
const struct tide_tensor_life *tide__action_input_life(const struct tide__action_tensor *t,
                                                       uint32_t i);

/*
 * Points the uses of group g of life that read from at to instead (a SwapIn's
 * or a recomputed copy's output).
 */
void tide__action_rewire(struct tide_graph *graph, const struct tide_tensor_life *life,
                         const struct tide_use_group *g, struct tide_edge from,
                         struct tide_edge to);

/*
 * Where far group g of t is loaded (a SwapIn's position, the start of a
 * partition): its load partition's start, or earlier where a recomputed
 * copy of a later tensor reads it there (pl->pulled; recompute.c). Inline:
 * every simulation asks it for every far group.
 */
static inline uint32_t tide__action_load_position(const struct tide__action_tensor *t, uint32_t g)
{
    const struct tide__planner *pl = t->pl;
    uint32_t at = t->groups[g].load_partition * pl->part.partition_size;
    if (t->choice->recompute) {
        uint32_t use = (uint32_t)(t->life->uses - pl->part.tensors[0].uses) + t->groups[g].first;
        if (pl->pulled[use] < at)
            at = pl->pulled[use];
    }
    return at;
}

/*
 * Fills pl->pulled for choice (recompute.c, "Pulled loads"): run before a
 * simulation or a rewrite of a choice with RECOMPUTE, which read it through
 * tide__action_load_position. Linear in the graph.
 */
void tide__recompute_pulls(const struct tide__planner *pl, const struct tide__choice *choice);

/*
 * The memory actions on graph (the planner's or a clone, placement already
 * applied): each feature map, in order of production, is handed to the
 * action that claims it, which inserts its nodes; their costs are added to
 * moved.
 */
enum tide_status tide__actions_rewrite(struct tide_graph *graph, const struct tide__planner *pl,
                                       const struct tide__choice *choice,
                                       struct tide_place_insertions *inserted,
                                       struct tide__moved *moved, struct tide_error *err);

#endif /* TIDE_SWAPPER_SWAPPER_IMPL_H */
