/* SPDX-License-Identifier: MIT */
/*
 * actions.c: the table of memory actions, the KEEP action, and the driver
 * that hands each feature map to the action that claims it.
 *
 * A feature map is handled by exactly one action per choice: the first in
 * actions.def whose claims() is true. The simulation (estimate.c) and the
 * rewrite (tide__actions_rewrite, below, called by pipeline.c) both ask
 * tide__action_pick, so they always agree on who does what; the actions'
 * own estimate() and rewrite() agree on the rest. Adding an action touches
 * neither this file's driver nor estimate.c, pipeline.c or swapper.c.
 *
 * KEEP lives here because it is the fallback, not a policy: the tensor stays
 * on the device from its producer to its last use, inserting nothing.
 */
#include "swapper/swapper-impl.h"

#include <stdlib.h>

const struct tide__memory_action *const tide__memory_actions[TIDE__ACTION_COUNT] = {
#define TIDE_MEMORY_ACTION(ID, name) [TIDE__ACTION_##ID] = &tide__action_##name,
#include "swapper/actions.def"
#undef TIDE_MEMORY_ACTION
};

/* ============================================================================
 * KEEP
 * ========================================================================== */

static bool keep_claims(const struct tide__action_tensor *t)
{
    (void)t;
    return true;
}

/* From the producer to the last use, or only at the producer when nothing reads it. */
static void keep_estimate(const struct tide__action_tensor *t, struct tide__live *live,
                          struct tide__action_cost *cost)
{
    (void)cost;
    const struct tide_partitioning *p = &t->pl->part;
    const struct tide_tensor_life *life = t->life;
    uint32_t last = life->n_uses ? p->position[life->uses[life->n_uses - 1]] : t->made;
    tide__live_add(live, tide_place_key_at(t->made), tide_place_key_at(last), t->aligned);
}

const struct tide__memory_action tide__action_keep = {
    .name = "keep",
    .claims = keep_claims,
    .estimate = keep_estimate,
    .rewrite = NULL,
};

/* ============================================================================
 * The driver
 * ========================================================================== */

void tide__action_tensor_init(struct tide__action_tensor *t, const struct tide__planner *pl,
                              const struct tide__choice *choice, uint32_t tensor,
                              struct tide_use_group *groups)
{
    const struct tide_partitioning *p = &pl->part;
    const struct tide_tensor_life *life = &p->tensors[tensor];
    *t = (struct tide__action_tensor){
        .pl = pl,
        .choice = choice,
        .tensor = tensor,
        .life = life,
        .made = p->position[life->tensor.node],
        .bytes = pl->tensor_bytes[tensor],
        .aligned = pl->tensor_aligned[tensor],
        .groups = groups,
        .n_groups = 1,
    };
    if (groups && choice->swap_threshold != TIDE__NEVER)
        t->n_groups =
            tide_place_group_uses(life, choice->swap_threshold, choice->prefetch, true, groups);
}

enum tide__action_id tide__action_pick(const struct tide__action_tensor *t)
{
    for (int a = 0; a < TIDE__ACTION_COUNT; a++) {
        if (tide__memory_actions[a]->claims(t))
            return (enum tide__action_id)a;
    }
    return TIDE__ACTION_KEEP;
}

void tide__action_rewire(struct tide_graph *graph, const struct tide_tensor_life *life,
                         const struct tide_use_group *g, struct tide_edge from, struct tide_edge to)
{
    for (uint32_t u = g->first; u < g->first + g->n_uses; u++) {
        struct tide_node *node = &graph->nodes[life->uses[u]];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            if (node->inputs[i].node == from.node && node->inputs[i].output == from.output)
                node->inputs[i] = to;
        }
    }
}

const struct tide_tensor_life *tide__action_input_life(const struct tide__action_tensor *t,
                                                       uint32_t i)
{
    const struct tide_node *producer = &t->pl->graph->nodes[t->life->tensor.node];
    if (i >= producer->n_inputs)
        return NULL;
    struct tide_edge in = producer->inputs[i];
    return &t->pl->part.tensors[t->pl->part.tensor_of[in.node] + in.output];
}

enum tide_status tide__actions_rewrite(struct tide_graph *graph, const struct tide__planner *pl,
                                       const struct tide__choice *choice,
                                       struct tide_place_insertions *inserted,
                                       struct tide__moved *moved, struct tide_error *err)
{
    const struct tide_partitioning *p = &pl->part;
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
        struct tide__action_tensor at;
        tide__action_tensor_init(&at, pl, choice, t, groups);
        enum tide__action_id a = tide__action_pick(&at);
        if (tide__memory_actions[a]->rewrite)
            st = tide__memory_actions[a]->rewrite(&at, graph, inserted, &moved->actions[a], err);
    }
    free(groups);
    return st;
}
