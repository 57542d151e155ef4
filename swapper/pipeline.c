/* SPDX-License-Identifier: MIT */
/*
 * pipeline.c: one memory policy applied to a graph, and what it costs.
 *
 * tide__apply runs the passes in order on a graph that tide__planner_init
 * partitioned (or a clone of it, for a trial):
 *
 *  1. placement (placement/placement.h): homes of Variables and Consts,
 *     Fetch and WriteBack;
 *  2. the memory actions (actions.c): each feature map handed to the action
 *     that claims it — SwapOut and SwapIn for far uses (swap.c), nothing
 *     for a tensor that stays put;
 *  3. the final order: the partitioner's depth-first order, kept as it is,
 *     with the inserted nodes merged in by key (a load at the start of its
 *     partition, a SwapOut or WriteBack right after the node it follows;
 *     ties in the order of insertion). Host-homed sources go first: they
 *     do no device work and hold no device memory, and there a Fetch can
 *     read them from any position;
 *  4. streams (H2D for Placeholders, Fetch and SwapIn; D2H for SwapOut and
 *     WriteBack; compute for the rest) and homes (host for host-homed
 *     sources and SwapOut outputs; device for the rest);
 *  5. memplan, with the caller's alignment and workspace sizes, and the
 *     caller's pins mapped onto the grown graph (original ids never change:
 *     the passes only append nodes).
 *
 * The passes read the partitioning of the original graph and never change
 * the order of original nodes, so every trial of a search shares one
 * partitioning, and a trial on a clone builds exactly the plan that applying
 * the same choice to the graph itself builds.
 */
#include "swapper/swapper-impl.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_ALIGNMENT 256

/* ============================================================================
 * The planner
 * ========================================================================== */

uint64_t tide__align(const struct tide__planner *pl, uint64_t bytes)
{
    uint64_t rem = bytes % pl->alignment;
    if (rem == 0)
        return bytes;
    if (bytes > UINT64_MAX - (pl->alignment - rem))
        return UINT64_MAX;
    return bytes + (pl->alignment - rem);
}

static bool is_homed_source(enum tide_op op)
{
    return op == TIDE_OP_VARIABLE || op == TIDE_OP_CONST;
}

/* What each output may become (enum tide__tensor_kind). */
static void classify(struct tide__planner *pl)
{
    const struct tide_graph *g = pl->graph;
    const struct tide_partitioning *p = &pl->part;
    const uint8_t *pinned = pl->env->pinned;
    for (uint32_t t = 0; t < p->n_tensors; t++) {
        struct tide_edge e = p->tensors[t].tensor;
        const struct tide_node *node = &g->nodes[e.node];
        uint8_t kind;
        if (is_homed_source(node->op))
            kind = TIDE__TENSOR_STATE;
        else if (node->op == TIDE_OP_SWAP_OUT)
            kind = TIDE__TENSOR_HOST;
        else if (pinned && pinned[e.node])
            kind = TIDE__TENSOR_PERSISTENT;
        else if ((tide_op_info(node->op)->flags & TIDE_OP_F_MEMORY) ||
                 node->outputs[e.output].nbytes == 0)
            kind = TIDE__TENSOR_FIXED;
        else
            kind = TIDE__TENSOR_FEATURE;
        pl->kinds[t] = kind;
    }
    /* A tensor an update writes in place must stay where the update finds it. */
    for (uint32_t v = 0; v < pl->n_original; v++) {
        const struct tide_node *node = &g->nodes[v];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            uint32_t t = p->tensor_of[node->inputs[i].node] + node->inputs[i].output;
            if (tide_place_input_written(node, i) && pl->kinds[t] == TIDE__TENSOR_FEATURE)
                pl->kinds[t] = TIDE__TENSOR_FIXED;
        }
    }
}

/*
 * The length of arrays indexed like the partitioning's uses (use_writes,
 * use_overwrites, pulled: a tensor's uses start at its uses minus the first
 * tensor's). The tensors carve one array in order of production, counting
 * every input edge (partitioner.c), and a node that reads one tensor twice
 * (Mul(x, x)) keeps one use of its two slots: the array has gaps, so the
 * sum of n_uses is short of the span.
 */
static size_t use_span(const struct tide_partitioning *part)
{
    if (part->n_tensors == 0)
        return 0;
    const struct tide_tensor_life *last = &part->tensors[part->n_tensors - 1];
    return (size_t)(last->uses - part->tensors[0].uses) + last->n_uses;
}

enum tide_status tide__planner_init(struct tide__planner *pl, struct tide_graph *graph,
                                    uint32_t partition_size, const struct tide_plan_env *env,
                                    struct tide_error *err)
{
    memset(pl, 0, sizeof(*pl));
    pl->graph = graph;
    pl->env = env;
    pl->alignment = env->alignment ? env->alignment : DEFAULT_ALIGNMENT;
    pl->n_original = graph->n_nodes;
    enum tide_status st = tide_partition(graph, partition_size, &pl->part, err);
    if (st != TIDE_OK)
        return st;
    uint32_t n = graph->n_nodes;
    uint32_t most_uses = 0;
    for (uint32_t t = 0; t < pl->part.n_tensors; t++)
        most_uses = pl->part.tensors[t].n_uses > most_uses ? pl->part.tensors[t].n_uses : most_uses;
    pl->workspace = calloc((size_t)n + 1, sizeof(*pl->workspace));
    pl->kinds = malloc((size_t)pl->part.n_tensors + 1);
    pl->delta = malloc(((size_t)n * 4 + 4) * sizeof(*pl->delta));
    pl->groups = malloc(((size_t)most_uses + 1) * sizeof(*pl->groups));
    pl->input_groups = malloc(((size_t)most_uses + 1) * sizeof(*pl->input_groups));
    pl->ends = calloc((size_t)n * 4 + 4, 1);
    pl->ended = malloc(((size_t)n * 4 + 4) * sizeof(*pl->ended));
    pl->overwrites = malloc((size_t)n + 1);
    pl->tensor_bytes = malloc(((size_t)pl->part.n_tensors + 1) * sizeof(*pl->tensor_bytes));
    pl->tensor_aligned = malloc(((size_t)pl->part.n_tensors + 1) * sizeof(*pl->tensor_aligned));
    pl->workspace_at = malloc(((size_t)n + 1) * sizeof(*pl->workspace_at));
    size_t n_uses = use_span(&pl->part);
    pl->use_writes = calloc(n_uses + 1, 1);
    pl->use_overwrites = calloc(n_uses + 1, 1);
    pl->pulled = malloc((n_uses + 1) * sizeof(*pl->pulled));
    if (!pl->pulled || !pl->workspace || !pl->kinds || !pl->delta || !pl->groups ||
        !pl->input_groups || !pl->tensor_bytes || !pl->tensor_aligned || !pl->workspace_at ||
        !pl->use_writes || !pl->use_overwrites || !pl->ends || !pl->ended || !pl->overwrites) {
        tide__planner_release(pl);
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory planning %u nodes", n);
    }
    for (uint32_t v = 0; v < n && env->workspace_bytes; v++)
        pl->workspace[v] = env->workspace_bytes(env->workspace_ctx, graph, &graph->nodes[v]);
    for (uint32_t i = 0; i < pl->part.n_order; i++)
        pl->workspace_at[i] = tide__align(pl, pl->workspace[pl->part.order[i]]);
    for (uint32_t t = 0; t < pl->part.n_tensors; t++) {
        struct tide_edge e = pl->part.tensors[t].tensor;
        pl->tensor_bytes[t] = graph->nodes[e.node].outputs[e.output].nbytes;
        pl->tensor_aligned[t] = tide__align(pl, pl->tensor_bytes[t]);
    }
    classify(pl);
    for (uint32_t t = 0; t < pl->part.n_tensors; t++) {
        const struct tide_tensor_life *life = &pl->part.tensors[t];
        if (pl->kinds[t] != TIDE__TENSOR_STATE)
            continue;
        size_t base = (size_t)(life->uses - pl->part.tensors[0].uses);
        for (uint32_t u = 0; u < life->n_uses; u++) {
            const struct tide_node *node = &graph->nodes[life->uses[u]];
            for (uint32_t i = 0; i < node->n_inputs; i++) {
                if (node->inputs[i].node == life->tensor.node &&
                    node->inputs[i].output == life->tensor.output &&
                    tide_place_input_written(node, i))
                    pl->use_writes[base + u] = 1;
            }
        }
    }
    for (uint32_t t = 0; t < pl->part.n_tensors; t++) {
        const struct tide_tensor_life *life = &pl->part.tensors[t];
        size_t base = (size_t)(life->uses - pl->part.tensors[0].uses);
        for (uint32_t u = 0; u < life->n_uses; u++)
            pl->use_overwrites[base + u] = tide__overwrites_input(pl, life->uses[u], t);
    }
    return TIDE_OK;
}

/* A malloc'd copy of n bytes of from (never NULL for n 0, unless out of memory). */
static void *copy_bytes(const void *from, size_t n)
{
    void *p = malloc(n + 1);
    if (p && n)
        memcpy(p, from, n);
    return p;
}

enum tide_status tide__planner_init_from(struct tide__planner *pl, const struct tide__planner *base,
                                         uint32_t partition_size, struct tide_error *err)
{
    memset(pl, 0, sizeof(*pl));
    pl->graph = base->graph;
    pl->env = base->env;
    pl->alignment = base->alignment;
    pl->n_original = base->n_original;
    enum tide_status st = tide_partition_resize(&base->part, partition_size, &pl->part, err);
    if (st != TIDE_OK)
        return st;
    size_t n = base->n_original, n_tensors = base->part.n_tensors;
    size_t n_uses = use_span(&base->part), most_uses = 0;
    for (uint32_t t = 0; t < n_tensors; t++) {
        most_uses = base->part.tensors[t].n_uses > most_uses ? base->part.tensors[t].n_uses
                                                             : most_uses;
    }
    pl->delta = malloc((n * 4 + 4) * sizeof(*pl->delta));
    pl->groups = malloc((most_uses + 1) * sizeof(*pl->groups));
    pl->input_groups = malloc((most_uses + 1) * sizeof(*pl->input_groups));
    pl->ends = calloc(n * 4 + 4, 1);
    pl->ended = malloc((n * 4 + 4) * sizeof(*pl->ended));
    pl->overwrites = malloc(n + 1);
    pl->workspace = copy_bytes(base->workspace, n * sizeof(*pl->workspace));
    pl->kinds = copy_bytes(base->kinds, n_tensors);
    pl->tensor_bytes = copy_bytes(base->tensor_bytes, n_tensors * sizeof(*pl->tensor_bytes));
    pl->tensor_aligned = copy_bytes(base->tensor_aligned, n_tensors * sizeof(*pl->tensor_aligned));
    pl->workspace_at = copy_bytes(base->workspace_at, n * sizeof(*pl->workspace_at));
    pl->use_writes = copy_bytes(base->use_writes, n_uses);
    pl->use_overwrites = copy_bytes(base->use_overwrites, n_uses);
    pl->pulled = malloc((n_uses + 1) * sizeof(*pl->pulled));
    if (!pl->pulled || !pl->delta || !pl->groups || !pl->input_groups || !pl->workspace ||
        !pl->kinds || !pl->tensor_bytes || !pl->tensor_aligned || !pl->workspace_at ||
        !pl->use_writes || !pl->use_overwrites || !pl->ends || !pl->ended || !pl->overwrites) {
        tide__planner_release(pl);
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory planning %zu nodes", n);
    }
    return TIDE_OK;
}

void tide__planner_stamp(const struct tide__planner *pl)
{
    const struct tide_partitioning *p = &pl->part;
    for (uint32_t i = 0; i < p->n_order; i++)
        pl->graph->nodes[p->order[i]].partition = (int32_t)(i / p->partition_size);
}

void tide__planner_release(struct tide__planner *pl)
{
    if (!pl)
        return;
    tide_partitioning_release(&pl->part);
    free(pl->workspace);
    free(pl->kinds);
    free(pl->delta);
    free(pl->groups);
    free(pl->input_groups);
    free(pl->ends);
    free(pl->ended);
    free(pl->overwrites);
    free(pl->tensor_bytes);
    free(pl->tensor_aligned);
    free(pl->workspace_at);
    free(pl->use_writes);
    free(pl->use_overwrites);
    free(pl->pulled);
    memset(pl, 0, sizeof(*pl));
}

/* ============================================================================
 * Order, streams, homes
 * ========================================================================== */

struct keyed {
    uint64_t key;
    uint32_t seq; /* order of insertion: breaks ties */
    uint32_t node;
};

static int compare_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool is_host_source(const struct tide_node *node)
{
    return is_homed_source(node->op) && node->outputs[0].home == TIDE_HOME_HOST;
}

/* The final order (see the file comment); sets the partition of every node it moves or adds. */
static enum tide_status build_order(const struct tide__planner *pl, struct tide_graph *graph,
                                    const struct tide_place_insertions *inserted, uint32_t *order,
                                    struct tide_error *err)
{
    const struct tide_partitioning *p = &pl->part;
    struct keyed *sorted = malloc(((size_t)inserted->n + 1) * sizeof(*sorted));
    if (!sorted)
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory ordering %u nodes",
                              graph->n_nodes);
    for (uint32_t i = 0; i < inserted->n; i++) {
        const struct tide_place_insertion *ins = &inserted->items[i];
        sorted[i] = (struct keyed){ins->key, i, ins->node};
        graph->nodes[ins->node].partition = (int32_t)ins->partition;
    }
    qsort(sorted, inserted->n, sizeof(*sorted), compare_keyed);

    uint32_t emitted = 0;
    for (uint32_t i = 0; i < p->n_order; i++) {
        struct tide_node *node = &graph->nodes[p->order[i]];
        if (is_host_source(node)) {
            order[emitted++] = p->order[i];
            node->partition = 0;
        }
    }
    uint32_t j = 0;
    for (uint32_t i = 0; i < p->n_order; i++) {
        uint64_t key = tide_place_key_at(i);
        while (j < inserted->n && sorted[j].key < key)
            order[emitted++] = sorted[j++].node;
        if (!is_host_source(&graph->nodes[p->order[i]]))
            order[emitted++] = p->order[i];
    }
    while (j < inserted->n)
        order[emitted++] = sorted[j++].node;
    free(sorted);
    if (emitted != graph->n_nodes)
        return tide_error_set(err, TIDE_INTERNAL, "swapper: the order has %u of %u nodes", emitted,
                              graph->n_nodes);
    return TIDE_OK;
}

/* Streams and homes of every node, as swapper.h's contract says. */
static void annotate(struct tide_graph *graph)
{
    for (uint32_t v = 0; v < graph->n_nodes; v++) {
        struct tide_node *node = &graph->nodes[v];
        switch (node->op) {
        case TIDE_OP_PLACEHOLDER:
        case TIDE_OP_FETCH:
        case TIDE_OP_SWAP_IN:
            node->stream = TIDE_STREAM_H2D;
            break;
        case TIDE_OP_SWAP_OUT:
        case TIDE_OP_WRITE_BACK:
            node->stream = TIDE_STREAM_D2H;
            break;
        default:
            node->stream = TIDE_STREAM_COMPUTE;
            break;
        }
        for (uint32_t k = 0; k < node->n_outputs; k++) {
            struct tide_output *out = &node->outputs[k];
            /* Placement homed the sources; everything else but a SwapOut's copy is on device. */
            if (!is_homed_source(node->op))
                out->home = node->op == TIDE_OP_SWAP_OUT ? TIDE_HOME_HOST : TIDE_HOME_DEVICE;
            out->offset = out->home == TIDE_HOME_HOST ? TIDE_NO_OFFSET : 0;
        }
    }
}

/* The planner's cached workspace sizes for original nodes; the backend's for inserted ones. */
static uint64_t cached_workspace(void *ctx, const struct tide_graph *graph,
                                 const struct tide_node *node)
{
    const struct tide__planner *pl = ctx;
    uint32_t id = (uint32_t)(node - graph->nodes);
    if (id < pl->n_original)
        return pl->workspace[id];
    if (!pl->env->workspace_bytes)
        return 0;
    return pl->env->workspace_bytes(pl->env->workspace_ctx, graph, node);
}

enum tide_status tide__rewrite(const struct tide__planner *pl, struct tide_graph *graph,
                               const struct tide__choice *choice, uint32_t **order,
                               struct tide__moved *moved, struct tide_error *err)
{
    struct tide__moved unused;
    if (!moved)
        moved = &unused;
    memset(moved, 0, sizeof(*moved));
    *order = NULL;
    if (graph->n_nodes != pl->n_original)
        return tide_error_set(err, TIDE_INTERNAL,
                              "swapper: the graph has %u nodes, its partitioning %u",
                              graph->n_nodes, pl->n_original);

    struct tide_place_insertions inserted = {0};
    struct tide_place_options po = {.host = choice->vars_host,
                                    .threshold = choice->var_threshold,
                                    .prefetch = choice->prefetch};
    if (choice->recompute) {
        tide__recompute_pulls(pl, choice);
        po.pulled = pl->pulled;
    }
    struct tide_place_report placed;
    enum tide_status st = tide_place(graph, &pl->part, &po, &inserted, &placed, err);
    moved->fetch = placed.fetch_bytes;
    moved->write_back = placed.write_back_bytes;
    if (st == TIDE_OK)
        st = tide__actions_rewrite(graph, pl, choice, &inserted, moved, err);
    if (st == TIDE_OK) {
        *order = malloc(((size_t)graph->n_nodes + 1) * sizeof(**order));
        if (!*order)
            st = tide_error_set(err, TIDE_NOMEM, "swapper: out of memory ordering %u nodes",
                                graph->n_nodes);
    }
    if (st == TIDE_OK)
        st = build_order(pl, graph, &inserted, *order, err);
    if (st == TIDE_OK)
        annotate(graph);
    tide_place_insertions_release(&inserted);
    if (st != TIDE_OK) {
        free(*order);
        *order = NULL;
    }
    return st;
}

enum tide_status tide__apply(const struct tide__planner *pl, struct tide_graph *graph,
                             const struct tide__choice *choice, struct tide_memplan *plan,
                             struct tide__moved *moved, struct tide_error *err)
{
    memset(plan, 0, sizeof(*plan));
    uint32_t *order;
    enum tide_status st = tide__rewrite(pl, graph, choice, &order, moved, err);
    if (st != TIDE_OK)
        return st;
    uint32_t n = graph->n_nodes;
    uint8_t *pinned = calloc((size_t)n + 1, 1);
    if (!pinned) {
        free(order);
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory for %u pins", n);
    }
    if (pl->env->pinned)
        memcpy(pinned, pl->env->pinned, pl->n_original);
    struct tide_memplan_options mo = {.alignment = pl->alignment,
                                      .workspace_bytes = cached_workspace,
                                      .workspace_ctx = (void *)pl,
                                      .pinned = pinned};
    st = tide_memplan_build(graph, order, n, &mo, plan, err);
    free(order);
    free(pinned);
    return st;
}

enum tide_status tide__adopt(const struct tide__planner *pl, struct tide_graph *graph,
                             const struct tide__choice *choice, const struct tide_graph *built,
                             const struct tide_memplan *plan, struct tide_error *err)
{
    uint32_t *order;
    enum tide_status st = tide__rewrite(pl, graph, choice, &order, NULL, err);
    if (st != TIDE_OK)
        return st;
    /* The passes are deterministic: anything else is our bug. */
    if (graph->n_nodes != built->n_nodes || plan->n_order != graph->n_nodes ||
        memcmp(order, plan->order, (size_t)graph->n_nodes * sizeof(*order)) != 0) {
        free(order);
        return tide_error_set(err, TIDE_INTERNAL,
                              "swapper: the plan of %u nodes differs from its trial's (%u nodes)",
                              graph->n_nodes, built->n_nodes);
    }
    free(order);
    /* What memplan wrote: offsets into the outputs, and reuse edges. */
    for (uint32_t v = 0; v < graph->n_nodes && st == TIDE_OK; v++) {
        struct tide_node *node = &graph->nodes[v];
        const struct tide_node *twin = &built->nodes[v];
        for (uint32_t k = 0; k < node->n_outputs; k++)
            node->outputs[k] = twin->outputs[k];
        for (uint32_t c = node->n_controls; c < twin->n_controls && st == TIDE_OK; c++)
            st = tide_graph_add_control(graph, v, twin->controls[c], err);
    }
    return st;
}

/* ============================================================================
 * Reports
 * ========================================================================== */

/* live[p]: the bytes of plan's regions alive at position p, persistent ones included. */
static uint64_t *live_profile(const struct tide_memplan *plan)
{
    uint64_t *live = calloc((size_t)plan->n_order + 2, sizeof(*live));
    if (!live)
        return NULL;
    /* Unsigned wrap-around makes the differences come out right in the prefix sum. */
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        if (tide_memplan_own_first(&plan->regions[r]) > plan->regions[r].last)
            continue;
        live[tide_memplan_own_first(&plan->regions[r])] += plan->regions[r].bytes;
        live[plan->regions[r].last + 1] -= plan->regions[r].bytes;
    }
    for (uint32_t p = 1; p < plan->n_order; p++)
        live[p] += live[p - 1];
    return live;
}

uint32_t tide__peak_node(const struct tide_graph *graph, const struct tide_memplan *plan)
{
    if (plan->n_order == 0)
        return TIDE_NO_NODE;
    uint64_t *live = live_profile(plan);
    uint32_t at = 0;
    for (uint32_t p = 1; live && p < plan->n_order; p++) {
        if (live[p] > live[at])
            at = p;
    }
    free(live);
    for (uint32_t p = at; p < plan->n_order; p++) {
        if (!(tide_op_info(graph->nodes[plan->order[p]].op)->flags & TIDE_OP_F_MEMORY))
            return plan->order[p];
    }
    for (uint32_t p = at + 1; p-- > 0;) {
        if (!(tide_op_info(graph->nodes[plan->order[p]].op)->flags & TIDE_OP_F_MEMORY))
            return plan->order[p];
    }
    return plan->order[at];
}

enum tide_status tide__report_fill(const struct tide__planner *pl, const struct tide_graph *graph,
                                   const struct tide_memplan *plan, struct tide_plan_report *report,
                                   struct tide_error *err)
{
    uint32_t n_parts = pl->part.n_partitions;
    free(report->partitions);
    report->partitions = calloc((size_t)n_parts + 1, sizeof(*report->partitions));
    uint64_t *live = live_profile(plan);
    if (!report->partitions || !live) {
        free(live);
        return tide_error_set(err, TIDE_NOMEM, "swapper: out of memory for the plan report");
    }
    report->n_partitions = n_parts;
    report->nodes = graph->n_nodes;
    report->predicted_peak_bytes = plan->peak_bytes;
    report->swap_in_bytes = report->swap_out_bytes = 0;
    report->fetch_bytes = report->write_back_bytes = report->host_bytes = 0;
    report->recompute_bytes = 0;
    report->recompute_ms = 0;
    for (uint32_t i = 0; i < n_parts; i++)
        report->partitions[i].peak_node = TIDE_NO_NODE;

    for (uint32_t p = 0; p < plan->n_order; p++) {
        uint32_t v = plan->order[p];
        const struct tide_node *node = &graph->nodes[v];
        if (node->partition < 0 || (uint32_t)node->partition >= n_parts)
            continue;
        struct tide_partition_report *part = &report->partitions[node->partition];
        if (part->nodes == 0 || live[p] > part->resident_bytes) {
            part->resident_bytes = live[p];
            part->peak_node = v;
        }
        part->nodes++;
        uint64_t bytes = node->n_inputs ? tide_graph_input(graph, node, 0)->nbytes : 0;
        if (v >= pl->n_original && !(tide_op_info(node->op)->flags & TIDE_OP_F_MEMORY)) {
            /* A recomputed copy (recompute.c). */
            for (uint32_t k = 0; k < node->n_outputs; k++)
                report->recompute_bytes += node->outputs[k].nbytes;
            report->recompute_ms += tide_recompute_cost_ms(graph, node, NULL);
        }
        switch (node->op) {
        case TIDE_OP_FETCH:
            part->fetch_bytes += bytes;
            break;
        case TIDE_OP_WRITE_BACK:
            part->write_back_bytes += bytes;
            break;
        case TIDE_OP_SWAP_OUT:
            part->swap_out_bytes += bytes;
            break;
        case TIDE_OP_SWAP_IN:
            part->swap_in_bytes += bytes;
            break;
        default:
            break;
        }
    }
    for (uint32_t i = 0; i < n_parts; i++) {
        report->swap_in_bytes += report->partitions[i].swap_in_bytes;
        report->swap_out_bytes += report->partitions[i].swap_out_bytes;
        report->fetch_bytes += report->partitions[i].fetch_bytes;
        report->write_back_bytes += report->partitions[i].write_back_bytes;
    }
    /* memplan's host plan: the homes of host-homed outputs, swap slots included. */
    report->host_bytes = plan->host_home_bytes;
    report->host_arena_bytes = plan->host_bytes;
    free(live);
    return TIDE_OK;
}
