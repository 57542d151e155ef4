/* SPDX-License-Identifier: MIT */
/*
 * partitioner.h: depth-first order, fixed-size partitions, tensor liveness.
 *
 * The first compile pass. It orders the graph depth-first
 * (tide_graph_dfs_order: every node right after its last input, so results
 * are consumed while they are fresh; each optimizer update and the weight
 * gradient only it reads as soon as their inputs are done, so a layer's
 * weights are updated next to its input gradient, not at the end of the
 * step), cuts the order into partitions of partition_size consecutive
 * nodes, and records for every output the partition that produces it and
 * the partitions that use it. The memory passes decide from that liveness
 * what to home on the host and what to swap (Wei et al.: a tensor whose
 * next use is more than `threshold` partitions away is swapped out after
 * its producer and in before that use).
 *
 * Writes node->partition for every node. A pure function of the graph and
 * the partition size; it allocates its result, freed with
 * tide_partitioning_release.
 *
 * Example usage:
 *
 *     struct tide_partitioning p;
 *     tide_partition(graph, 64, &p, &err);
 *     for (uint32_t t = 0; t < p.n_tensors; t++)
 *         if (tide_tensor_gap(&p, t) > 2) ...;
 *     tide_partitioning_release(&p);
 */
#ifndef TIDE_PARTITIONER_PARTITIONER_H
#define TIDE_PARTITIONER_PARTITIONER_H

#include <stdint.h>

#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One node output and where it is used, in partition indices. */
struct tide_tensor_life {
    struct tide_edge tensor; /* producer and output index */
    uint32_t produced;       /* partition of the producer */
    uint32_t n_uses;
    uint32_t *uses;          /* consumer node ids, in order position */
    uint32_t *use_partitions; /* partition of each use, non-decreasing */
};

struct tide_partitioning {
    uint32_t partition_size;
    uint32_t n_partitions;
    uint32_t n_order;
    uint32_t *order;    /* depth-first order */
    uint32_t *position; /* node id -> position in order */
    uint32_t n_tensors;
    struct tide_tensor_life *tensors; /* every output of every node, in order of production */
    uint32_t *tensor_of; /* node id -> index of its output 0 in tensors (outputs are consecutive) */
};

/*
 * Orders and partitions the graph; partition_size >= 1 (0 is refused).
 * Refuses a cyclic graph naming a node on the cycle.
 */
enum tide_status tide_partition(struct tide_graph *graph, uint32_t partition_size,
                                struct tide_partitioning *out, struct tide_error *err);

/*
 * The partitioning of the same graph at another partition size, from src
 * (tide_partition's result) without walking the graph: the order, positions
 * and uses are src's, the partitions recomputed. Equal, field by field, to
 * tide_partition(graph, partition_size) — except that node->partition is
 * left as it is (the caller writes it when it uses this partitioning).
 */
enum tide_status tide_partition_resize(const struct tide_partitioning *src, uint32_t partition_size,
                                       struct tide_partitioning *out, struct tide_error *err);

void tide_partitioning_release(struct tide_partitioning *p);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_PARTITIONER_PARTITIONER_H */
