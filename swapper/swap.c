/* SPDX-License-Identifier: MIT */
/*
 * swap.c: SwapOut and SwapIn for feature maps used far from where they are
 * made.
 *
 * Wei et al. ("TensorFlowMem"): a partition may produce a tensor that a
 * partition many steps later consumes; the tensor is offloaded to host
 * memory and prefetched shortly before it is needed, and because partitions
 * run in sequence it is easy to say where the SwapOut and SwapIn go. Here
 * the uses of a feature map are split by tide_place_group_uses with the
 * producer as the first use: the production group keeps reading the tensor
 * itself (in a training graph, the next layer's forward use), and every
 * later group (the backward uses) gets one SwapIn. So a tensor is swapped
 * out once, right after its producer — its device copy then dies at its
 * last near use — and swapped in once per far group, at the start of the
 * partition prefetch_distance partitions before the group's first use.
 * Prefetching earlier overlaps the copy with more compute but holds the
 * copy longer: memplan's region of a SwapIn output starts at the SwapIn.
 *
 * Only feature maps move (tide__tensor_kind FEATURE): not Variables or
 * Consts (placement's), not outputs of memory ops, not what the caller
 * pinned, not a tensor an update writes in place, not an empty tensor.
 */
#include "swapper/swapper-impl.h"

#include <stdlib.h>

/* Points the uses of group g at the SwapIn output instead of the original tensor. */
static void rewire(struct tide_graph *graph, const struct tide_tensor_life *life,
                   const struct tide_use_group *g, struct tide_edge from, uint32_t to)
{
    for (uint32_t u = g->first; u < g->first + g->n_uses; u++) {
        struct tide_node *node = &graph->nodes[life->uses[u]];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            if (node->inputs[i].node == from.node && node->inputs[i].output == from.output)
                node->inputs[i] = (struct tide_edge){to, 0};
        }
    }
}

enum tide_status tide__swap(struct tide_graph *graph, const struct tide__planner *pl,
                            uint32_t threshold, uint32_t prefetch,
                            struct tide_place_insertions *inserted, struct tide__moved *moved,
                            struct tide_error *err)
{
    const struct tide_partitioning *p = &pl->part;
    if (threshold == TIDE__NEVER)
        return TIDE_OK;
    uint32_t most_uses = 0;
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        if (pl->kinds[t] == TIDE__TENSOR_FEATURE && p->tensors[t].n_uses > most_uses)
            most_uses = p->tensors[t].n_uses;
    }
    struct tide_use_group *groups = malloc(((size_t)most_uses + 1) * sizeof(*groups));
    if (!groups)
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory");

    enum tide_status st = TIDE_OK;
    /* Tensors in order of production, so that ids and names are the same on every run. */
    for (uint32_t t = 0; st == TIDE_OK && t < p->n_tensors; t++) {
        if (pl->kinds[t] != TIDE__TENSOR_FEATURE)
            continue;
        const struct tide_tensor_life *life = &p->tensors[t];
        uint32_t n_groups = tide_place_group_uses(life, threshold, prefetch, true, groups);
        if (n_groups < 2)
            continue;
        struct tide_edge tensor = life->tensor;
        uint64_t bytes = graph->nodes[tensor.node].outputs[tensor.output].nbytes;
        uint32_t swap_out;
        st = tide_place_add_memory_node(graph, TIDE_OP_SWAP_OUT, "swapout", tensor, tensor, -1,
                                        &swap_out, err);
        if (st == TIDE_OK)
            st = tide_place_insertions_push(inserted, swap_out, life->produced,
                                            tide_place_key_after(p->position[tensor.node]), err);
        if (st != TIDE_OK)
            break;
        moved->swap_out += bytes;
        for (uint32_t g = 1; st == TIDE_OK && g < n_groups; g++) {
            uint32_t swap_in;
            uint32_t load = groups[g].load_partition;
            st = tide_place_add_memory_node(graph, TIDE_OP_SWAP_IN, "swapin",
                                            (struct tide_edge){swap_out, 0}, tensor, g, &swap_in,
                                            err);
            if (st == TIDE_OK)
                st = tide_place_insertions_push(
                    inserted, swap_in, load, tide_place_key_before(load * p->partition_size), err);
            if (st != TIDE_OK)
                break;
            rewire(graph, life, &groups[g], tensor, swap_in);
            moved->swap_in += bytes;
        }
    }
    free(groups);
    return st;
}
