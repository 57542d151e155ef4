/* SPDX-License-Identifier: MIT */
/*
 * placement.h: where Variables and Consts live, and the Fetch and WriteBack
 * nodes that bring them to the device and back.
 *
 * The second compile pass, after the partitioner. Wei et al. ("TensorFlowMem")
 * place stateful Variable and Constant operations in host memory and load
 * their values to the GPU only when needed: parameters and optimizer state
 * then cost device memory only around their uses instead of for the whole
 * step. tide_place does that for every Variable (optimizer state included:
 * those are Variables with trainable = false) and every Const when told to
 * home them on the host:
 *
 *  - the source's output gets home TIDE_HOME_HOST;
 *  - its uses are split into groups exactly as the swapper splits the uses
 *    of a feature map: a use more than `threshold` partitions after the
 *    previous use starts a new group. One Fetch serves a group, so uses close
 *    together share one copy (fewer Fetches, fewer bytes), and a long gap —
 *    the forward use of a weight and its backward uses — frees the copy in
 *    between;
 *  - the Fetch ("fetch/<var>/<k>", input 0 the source, stream H2D) sits at
 *    the start of the partition `prefetch` partitions before the group's
 *    first use, never in or before the partition of the previous group's
 *    last use (a copy there would only double the bytes held), and the
 *    group's consumers read the Fetch output instead of the source;
 *  - when a consumer in the group is an update (TIDE_OP_F_UPDATE, which
 *    writes every input but the last — the gradient — in place), the update
 *    writes the Fetch output, and a WriteBack ("writeback/<var>", stream D2H)
 *    right after the group's last reader copies it back to the host home. It
 *    has control edges from every reader of that Fetch output, and any later
 *    Fetch of the same source in the step has a control edge from it, so no
 *    copy reads a stale host value.
 *
 * With home on the device nothing changes: the outputs stay
 * TIDE_HOME_DEVICE and memplan keeps them alive across steps.
 *
 * Inserted nodes are only appended to the graph (ids of existing nodes do
 * not change), and each gets a key that says where it goes in the final
 * order: the node at position p of the depth-first order has key 4p + 1, a
 * load at the start of the partition that begins at position p has key 4p,
 * and a node right after position p has key 4p + 2. The swapper adds its
 * SwapOut and SwapIn nodes to the same list and merges it with the
 * depth-first order (swapper/swapper.h). A host-homed source does no device
 * work and holds no device memory, so the final order moves it to the front:
 * a Fetch may then prefetch it as early as it likes.
 *
 * The pass reads the liveness of the partitioning, which it does not
 * change: feature maps and their uses are the same before and after it.
 *
 * Example usage:
 *
 *     struct tide_place_insertions ins = {0};
 *     struct tide_place_options o = {.host = true, .threshold = 1, .prefetch = 1};
 *     struct tide_place_report r;
 *     if (tide_place(graph, &partitioning, &o, &ins, &r, &err) != TIDE_OK) ...;
 *     ... ins.items[i].node goes at key ins.items[i].key ...
 *     tide_place_insertions_release(&ins);
 */
#ifndef TIDE_PLACEMENT_PLACEMENT_H
#define TIDE_PLACEMENT_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "partitioner/partitioner.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Keys: where inserted nodes go in the final order
 * ========================================================================== */

/* A load at the start of the partition that begins at position p. */
static inline uint64_t tide_place_key_before(uint32_t p)
{
    return (uint64_t)p * 4;
}

/* The node at position p of the depth-first order. */
static inline uint64_t tide_place_key_at(uint32_t p)
{
    return (uint64_t)p * 4 + 1;
}

/* A node right after the one at position p. */
static inline uint64_t tide_place_key_after(uint32_t p)
{
    return (uint64_t)p * 4 + 2;
}

struct tide_place_insertion {
    uint32_t node;      /* the inserted node's id */
    uint32_t partition; /* its partition */
    uint64_t key;       /* where it goes (see above); ties keep the order of insertion */
};

/* A growing list of inserted nodes; zero-initialise it, free it with _release. */
struct tide_place_insertions {
    struct tide_place_insertion *items;
    uint32_t n;
    uint32_t cap;
};

/* Appends an inserted node with its partition and key; TIDE_NOMEM if the list cannot grow. */
enum tide_status tide_place_insertions_push(struct tide_place_insertions *list, uint32_t node,
                                            uint32_t partition, uint64_t key,
                                            struct tide_error *err);
/* Frees the list's items and empties it; NULL is a no-op. */
void tide_place_insertions_release(struct tide_place_insertions *list);

/* ============================================================================
 * Use groups (shared with the swapper)
 * ========================================================================== */

/* Consecutive uses of one tensor that share one copy on the device. */
struct tide_use_group {
    uint32_t first;          /* index of its first use in the tensor's use list */
    uint32_t n_uses;         /* 0 only for the production group of a feature map */
    uint32_t load_partition; /* where its Fetch or SwapIn goes */
};

/*
 * Splits the uses of a tensor into groups: a use more than threshold
 * partitions after the previous use starts a new group (UINT32_MAX: never).
 * With from_production, the producer counts as the first "use" and group 0
 * is the production group, which keeps reading the tensor itself (it may
 * hold no use at all); without it (a host-homed source), every group needs
 * a load. Each loaded group's load_partition is its first use's partition
 * minus prefetch, but not before the partition after the previous group's
 * last use (or the producer's): a load there would only hold two copies at
 * once. Writes at most life->n_uses + 1 groups and returns how many.
 */
uint32_t tide_place_group_uses(const struct tide_tensor_life *life, uint32_t threshold,
                               uint32_t prefetch, bool from_production,
                               struct tide_use_group *groups);

/* True if input i of node is written in place: an update's inputs but the gradient (the last). */
bool tide_place_input_written(const struct tide_node *node, uint32_t i);

/*
 * Appends a memory node (Fetch, SwapOut, SwapIn or WriteBack) reading
 * `input`, with node->subject = subject.node and, when the op has an output,
 * the input's dtype and shape as its output's (these ops copy, so nothing
 * needs inferring). The name is "<prefix>/<subject>[.<k>][/<index>]": the
 * subject node's name, ".<k>" when the subject is its output k > 0 (':' is
 * not allowed in names), and "/<index>" unless index < 0. A name that is too
 * long uses "node<id>" for the subject; a taken one gets a "-<n>" suffix.
 */
enum tide_status tide_place_add_memory_node(struct tide_graph *graph, enum tide_op op,
                                            const char *prefix, struct tide_edge input,
                                            struct tide_edge subject, int64_t index, uint32_t *id,
                                            struct tide_error *err);

/* ============================================================================
 * The pass
 * ========================================================================== */

struct tide_place_options {
    bool host;          /* true: home Variables and Consts on the host; false: on the device */
    uint32_t threshold; /* partitions between uses that split Fetch groups (UINT32_MAX: never) */
    uint32_t prefetch;  /* Fetch this many partitions before a group's first use */
    /*
     * May be NULL. Per use (indexed as the partitioning's use arrays, from
     * tensors[0].uses): a position (the start of a partition) where the
     * group that starts at that use is read already, when it is before the
     * group's load (the swapper's recomputed copies); UINT32_MAX: none. The
     * group's Fetch goes there.
     */
    const uint32_t *pulled;
};

/* What tide_place inserted, in bytes per step. */
struct tide_place_report {
    uint32_t fetches;
    uint32_t write_backs;
    uint64_t fetch_bytes;
    uint64_t write_back_bytes;
    uint64_t host_bytes; /* host homes of Variables and Consts */
};

/*
 * Homes the graph's Variables and Consts (see above), appending Fetch and
 * WriteBack nodes to graph and to inserted. partitioning must be
 * tide_partition's result for graph as it was before any memory pass (the
 * pass reads its order, positions and use lists). Sets the homes of the
 * sources' outputs, node->subject and node->partition of inserted nodes;
 * streams, the other homes and the final order are the swapper's.
 * Returns TIDE_NOMEM (or a name error) with the graph partly rewritten:
 * callers plan on a clone or give up the graph.
 */
enum tide_status tide_place(struct tide_graph *graph, const struct tide_partitioning *partitioning,
                            const struct tide_place_options *options,
                            struct tide_place_insertions *inserted,
                            struct tide_place_report *report, struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_PLACEMENT_PLACEMENT_H */
