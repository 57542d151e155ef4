/* SPDX-License-Identifier: MIT */
/*
 * swap.c: the SWAP memory action — SwapOut and SwapIn for feature maps used
 * far from where they are made (an entry of actions.def).
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
 * pinned, not a tensor an update writes in place, not an empty tensor. SWAP
 * claims every feature map with a far group (unless the choice forbids
 * swapping: checkpoint-sqrt keeps what it does not recompute); the driver
 * (actions.c) offers it only feature maps.
 */
#include "swapper/swapper-impl.h"

static bool swap_claims(const struct tide__action_tensor *t)
{
    return t->n_groups >= 2 && !t->choice->no_swap;
}

/*
 * The tensor from its producer to its last near use or its SwapOut,
 * whichever is later; each far group's SwapIn output from the SwapIn to the
 * group's last use.
 */
static void swap_estimate(const struct tide__action_tensor *t, struct tide__live *live,
                          struct tide__action_cost *cost)
{
    const struct tide_partitioning *p = &t->pl->part;
    const struct tide_tensor_life *life = t->life;
    const struct tide_use_group *groups = t->groups;
    uint64_t near_end = tide_place_key_after(t->made);
    if (groups[0].n_uses) {
        uint32_t near_last = p->position[life->uses[groups[0].n_uses - 1]];
        if (tide_place_key_at(near_last) > near_end)
            near_end = tide_place_key_at(near_last);
    }
    tide__live_add(live, tide_place_key_at(t->made), near_end, t->aligned);
    cost->to_host += t->bytes;
    for (uint32_t g = 1; g < t->n_groups; g++) {
        uint32_t end = p->position[life->uses[groups[g].first + groups[g].n_uses - 1]];
        tide__live_add(live, tide_place_key_before(tide__action_load_position(t, g)),
                       tide_place_key_at(end), t->aligned);
        cost->to_device += t->bytes;
    }
}

/* One SwapOut after the producer; one SwapIn per far group, at its load partition. */
static enum tide_status swap_rewrite(const struct tide__action_tensor *t, struct tide_graph *graph,
                                     struct tide_place_insertions *inserted,
                                     struct tide__action_cost *cost, struct tide_error *err)
{
    const struct tide_partitioning *p = &t->pl->part;
    const struct tide_tensor_life *life = t->life;
    struct tide_edge tensor = life->tensor;
    uint32_t swap_out;
    enum tide_status st = tide_place_add_memory_node(graph, TIDE_OP_SWAP_OUT, "swapout", tensor,
                                                     tensor, -1, &swap_out, err);
    if (st == TIDE_OK)
        st = tide_place_insertions_push(inserted, swap_out, life->produced,
                                        tide_place_key_after(p->position[tensor.node]), err);
    if (st != TIDE_OK)
        return st;
    cost->to_host += t->bytes;
    for (uint32_t g = 1; g < t->n_groups; g++) {
        uint32_t swap_in;
        uint32_t at = tide__action_load_position(t, g);
        st = tide_place_add_memory_node(graph, TIDE_OP_SWAP_IN, "swapin",
                                        (struct tide_edge){swap_out, 0}, tensor, g, &swap_in, err);
        if (st == TIDE_OK)
            st = tide_place_insertions_push(inserted, swap_in, at / p->partition_size,
                                            tide_place_key_before(at), err);
        if (st != TIDE_OK)
            return st;
        tide__action_rewire(graph, life, &t->groups[g], tensor, (struct tide_edge){swap_in, 0});
        cost->to_device += t->bytes;
    }
    return TIDE_OK;
}

const struct tide__memory_action tide__action_swap = {
    .name = "swap",
    .claims = swap_claims,
    .estimate = swap_estimate,
    .rewrite = swap_rewrite,
};
