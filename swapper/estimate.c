/* SPDX-License-Identifier: MIT */
/*
 * estimate.c: a memory policy simulated on the partitioning alone.
 *
 * Le et al. (LMS) tune swap parameters by simulating the rewritten graph's
 * execution rather than running it. Our plans are static, so a simulation
 * can be exact: tide__estimate derives, for one choice, the same intervals
 * that tide__apply + memplan would place — from the same use groups
 * (tide_place_group_uses) — without cloning or rewriting anything, in time
 * linear in the graph. Positions are keys (placement.h): the node at
 * position p of the depth-first order is 4p + 1, a load at the start of the
 * partition starting at p is 4p, a SwapOut or WriteBack after p is 4p + 2.
 * The final order sorts by key, so an interval in keys covers exactly the
 * nodes its memplan region covers in positions.
 *
 *  - persistent (device-homed Variables and Consts, pinned tensors): alive
 *    everywhere;
 *  - a feature map: what the memory action that claims it says
 *    (tide__action_pick; KEEP in actions.c: from its producer to its last
 *    use, or only at its producer when nothing reads it; SWAP in swap.c);
 *  - a tensor that may not move (FIXED): as KEEP says;
 *  - a host-homed source: each Fetch output from the Fetch to its group's
 *    last use, or to the WriteBack right after it;
 *  - a kernel's workspace: at the kernel only (inserted memory ops are taken
 *    to need none);
 *  - in place: where a node may overwrite an input tensor
 *    (tide__overwrites_input) and an interval of that tensor ends at the
 *    node, memplan writes the node's output over it (the copy it reads is
 *    its last reader's), so the output is not counted at that key.
 *
 * The largest sum over keys is the most bytes the plan holds at once; at
 * that point its regions are pairwise disjoint in memplan's arena, so it
 * bounds memplan's peak from below, and the search uses it to discard a
 * choice without building it (tests check it against memplan). One
 * exception: the links of a recompute chain (recompute.c), and the outputs
 * of recompute copies that nothing reads (MaxPool2D's second), live one
 * after the other at one key and are counted at once, so a choice that
 * recomputes in chains, or both outputs of a MaxPool2D, may be
 * overestimated by their bytes (and skipped where it would just fit).
 */
#include "swapper/swapper-impl.h"

#include <string.h>

/* True if a use in group g writes the source in place (so a WriteBack follows it). */
static bool group_writes(const struct tide__planner *pl, const struct tide_tensor_life *life,
                         const struct tide_use_group *g)
{
    const uint8_t *writes = pl->use_writes + (life->uses - pl->part.tensors[0].uses);
    for (uint32_t u = g->first; u < g->first + g->n_uses; u++) {
        if (writes[u])
            return true;
    }
    return false;
}

bool tide__overwrites_input(const struct tide__planner *pl, uint32_t v, uint32_t t)
{
    const struct tide_graph *g = pl->graph;
    const struct tide_node *node = &g->nodes[v];
    const struct tide_partitioning *p = &pl->part;
    if (!(tide_op_info(node->op)->flags & TIDE_OP_F_INPLACE) || v >= pl->n_original)
        return false;
    uint32_t out = p->tensor_of[v];
    if ((pl->kinds[t] != TIDE__TENSOR_FEATURE && pl->kinds[t] != TIDE__TENSOR_FIXED) ||
        (pl->kinds[out] != TIDE__TENSOR_FEATURE && pl->kinds[out] != TIDE__TENSOR_FIXED) ||
        pl->tensor_aligned[t] == 0)
        return false;
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        if (p->tensor_of[node->inputs[i].node] + node->inputs[i].output == t &&
            tide_graph_may_overwrite(g, node, i))
            return true;
    }
    return false;
}

/* Marks the nodes that overwrite t where one of its intervals (listed in live) ends. */
static void mark_overwrites(struct tide__planner *pl, uint32_t t, struct tide__live *live)
{
    const struct tide_partitioning *p = &pl->part;
    const struct tide_tensor_life *life = &p->tensors[t];
    const uint8_t *may = pl->use_overwrites + (life->uses - p->tensors[0].uses);
    for (uint32_t u = 0; u < life->n_uses; u++) {
        uint32_t at = p->position[life->uses[u]];
        if (may[u] && live->ends[tide_place_key_at(at)])
            pl->overwrites[at] = 1;
    }
    for (uint32_t i = 0; i < live->n_ended; i++)
        live->ends[live->ended[i]] = 0;
    live->n_ended = 0;
}

void tide__estimate(struct tide__planner *pl, const struct tide__choice *choice,
                    struct tide__estimate *out)
{
    const struct tide_partitioning *p = &pl->part;
    uint32_t n = p->n_order;
    uint32_t size = p->partition_size;
    int64_t *delta = pl->delta;
    struct tide__live intervals = {.delta = delta};
    struct tide_use_group *groups = pl->groups;
    uint64_t persistent = 0;
    memset(out, 0, sizeof(*out));
    memset(delta, 0, ((size_t)n * 4 + 4) * sizeof(*delta));
    memset(pl->overwrites, 0, n);
    if (choice->recompute)
        tide__recompute_pulls(pl, choice);

    for (uint32_t i = 0; i < n; i++) {
        uint64_t ws = pl->workspace_at[i];
        if (ws)
            tide__live_add(&intervals, tide_place_key_at(i), tide_place_key_at(i), ws);
    }
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        const struct tide_tensor_life *life = &p->tensors[t];
        uint64_t raw = pl->tensor_bytes[t];
        uint64_t bytes = pl->tensor_aligned[t];
        uint32_t n_groups;
        switch (pl->kinds[t]) {
        case TIDE__TENSOR_HOST:
            break;
        case TIDE__TENSOR_PERSISTENT:
            persistent += bytes;
            break;
        case TIDE__TENSOR_STATE:
            if (!choice->vars_host) {
                persistent += bytes;
                break;
            }
            n_groups =
                tide_place_group_uses(life, choice->var_threshold, choice->prefetch, false, groups);
            for (uint32_t g = 0; g < n_groups; g++) {
                uint32_t end = p->position[life->uses[groups[g].first + groups[g].n_uses - 1]];
                bool writes = group_writes(pl, life, &groups[g]);
                uint32_t at = groups[g].load_partition * size;
                uint32_t use = (uint32_t)(life->uses - p->tensors[0].uses) + groups[g].first;
                if (choice->recompute && pl->pulled[use] < at)
                    at = pl->pulled[use];
                tide__live_add(&intervals, tide_place_key_before(at),
                               writes ? tide_place_key_after(end) : tide_place_key_at(end), bytes);
                out->moved.fetch += raw;
                out->moved.write_back += writes ? raw : 0;
            }
            break;
        case TIDE__TENSOR_FEATURE: {
            struct tide__action_tensor at;
            tide__action_tensor_init(&at, pl, choice, t, groups);
            enum tide__action_id a = tide__action_pick(&at);
            intervals.ends = pl->ends;
            intervals.ended = pl->ended;
            tide__memory_actions[a]->estimate(&at, &intervals, &out->moved.actions[a]);
            mark_overwrites(pl, t, &intervals);
            intervals.ends = NULL;
            break;
        }
        default: { /* TIDE__TENSOR_FIXED: on the device from producer to last use */
            struct tide__action_tensor at;
            tide__action_tensor_init(&at, pl, choice, t, NULL);
            intervals.ends = pl->ends;
            intervals.ended = pl->ended;
            tide__action_keep.estimate(&at, &intervals, &out->moved.actions[TIDE__ACTION_KEEP]);
            mark_overwrites(pl, t, &intervals);
            intervals.ends = NULL;
            break;
        }
        }
    }
    /* An output written over its input shares the input's bytes at its producer. */
    for (uint32_t i = 0; i < n; i++) {
        if (!pl->overwrites[i])
            continue;
        uint64_t key = tide_place_key_at(i);
        int64_t bytes = (int64_t)pl->tensor_aligned[p->tensor_of[p->order[i]]];
        delta[key] -= bytes;
        delta[key + 1] += bytes;
    }
    int64_t live = 0, most = 0;
    for (size_t k = 0; k < (size_t)n * 4 + 3; k++) {
        live += delta[k];
        if (live > most)
            most = live;
    }
    out->live_bytes = persistent + (uint64_t)most;
}
