/* SPDX-License-Identifier: MIT */
/*
 * timeline.c: a finished plan turned into its memory timeline
 * (tide/timeline.h): the bytes live at each position of the schedule by
 * category, the partitions with the top of the arena while each runs, and
 * where the swaps are — what a memory picture draws.
 *
 * Everything is read off memplan's regions, the same intervals the executor
 * replays: a region is live at the positions first..last, and is a
 * workspace (output UINT32_MAX), a variable (produced by a Variable, a
 * Const or a Fetch), swapped in (produced by a SwapIn), or an activation.
 * Live bytes per category come from one difference array per category and
 * a prefix sum; the top of the arena at each position (the largest
 * offset + bytes of a live region) from a segment tree over positions that
 * takes a "max" over each region's interval. Both are linear or n log n in
 * the plan, so the daemon builds a timeline for every plan it reports.
 */
#include "swapper/swapper.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static enum tide_memory_category category_of(const struct tide_graph *graph,
                                             const struct tide_memplan_region *r)
{
    if (r->output == UINT32_MAX)
        return TIDE_MEMORY_WORKSPACE;
    switch (graph->nodes[r->node].op) {
    case TIDE_OP_VARIABLE:
    case TIDE_OP_CONST:
    case TIDE_OP_FETCH:
        return TIDE_MEMORY_VARIABLES;
    case TIDE_OP_SWAP_IN:
        return TIDE_MEMORY_SWAPPED_IN;
    default:
        return TIDE_MEMORY_ACTIVATIONS;
    }
}

/* A node's partition; nodes that have none (a plan without a memory policy) count in 0. */
static uint32_t partition_of(const struct tide_graph *graph, uint32_t v)
{
    int32_t part = graph->nodes[v].partition;
    return part < 0 ? 0 : (uint32_t)part;
}

/* Every region names a node of graph and an interval of the order; else graph is not plan's. */
static enum tide_status check_plan(const struct tide_graph *graph, const struct tide_memplan *plan,
                                   struct tide_error *err)
{
    for (uint32_t p = 0; p < plan->n_order; p++) {
        if (plan->order[p] >= graph->n_nodes)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory timeline: position %u of the plan runs node %u, but the "
                                  "graph has %u nodes",
                                  p, plan->order[p], graph->n_nodes);
    }
    for (uint32_t i = 0; i < plan->n_regions; i++) {
        const struct tide_memplan_region *r = &plan->regions[i];
        if (r->node >= graph->n_nodes || r->first > r->last || r->last >= plan->n_order)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory timeline: region %u (node %u, positions %u..%u) does not "
                                  "fit a graph of %u nodes and an order of %u positions",
                                  i, r->node, r->first, r->last, graph->n_nodes, plan->n_order);
    }
    return TIDE_OK;
}

/*
 * live[c * (n + 1) + p]: the bytes of category c live at position p. The
 * differences wrap around in unsigned arithmetic and come out right in the
 * prefix sum. A region written in place counts from tide_memplan_own_first.
 */
static void live_by_category(const struct tide_graph *graph, const struct tide_memplan *plan,
                             uint64_t *live)
{
    uint32_t n = plan->n_order;
    for (uint32_t i = 0; i < plan->n_regions; i++) {
        const struct tide_memplan_region *r = &plan->regions[i];
        uint64_t *row = live + (size_t)category_of(graph, r) * (n + 1);
        uint32_t first = tide_memplan_own_first(r);
        if (first > r->last)
            continue;
        row[first] += r->bytes;
        row[r->last + 1] -= r->bytes;
    }
    for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++) {
        uint64_t *row = live + (size_t)c * (n + 1);
        for (uint32_t p = 1; p < n; p++)
            row[p] += row[p - 1];
    }
}

/*
 * top[p]: the largest offset + bytes of a region live at position p (0 when
 * none is). tree holds 2n entries: leaves at n..2n-1; a "max" over an
 * interval lands on O(log n) nodes, and a leaf's value is the largest on
 * its path to the root.
 */
static void arena_top(const struct tide_memplan *plan, uint64_t *tree, uint64_t *top)
{
    uint32_t n = plan->n_order;
    for (uint32_t i = 0; i < plan->n_regions; i++) {
        const struct tide_memplan_region *r = &plan->regions[i];
        if (r->bytes == 0)
            continue; /* nothing of the arena in use */
        uint64_t end = r->offset + r->bytes;
        for (size_t lo = (size_t)r->first + n, hi = (size_t)r->last + n + 1; lo < hi;
             lo >>= 1, hi >>= 1) {
            if (lo & 1) {
                if (tree[lo] < end)
                    tree[lo] = end;
                lo++;
            }
            if (hi & 1) {
                hi--;
                if (tree[hi] < end)
                    tree[hi] = end;
            }
        }
    }
    for (uint32_t p = 0; p < n; p++) {
        uint64_t best = 0;
        for (size_t i = (size_t)p + n; i >= 1; i >>= 1) {
            if (tree[i] > best)
                best = tree[i];
        }
        top[p] = best;
    }
}

static uint64_t sum_at(const uint64_t *live, uint32_t n, uint32_t p)
{
    uint64_t sum = 0;
    for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++)
        sum += live[(size_t)c * (n + 1) + p];
    return sum;
}

/* Buckets of positions, each point the bucket's position with the most bytes live. */
static void fill_points(const uint64_t *live, uint32_t n, struct tide_memory_timeline *t)
{
    for (uint32_t b = 0; b < t->n_points; b++) {
        struct tide_memory_timeline_point *pt = &t->points[b];
        pt->first = (uint32_t)((uint64_t)b * n / t->n_points);
        pt->last = (uint32_t)((uint64_t)(b + 1) * n / t->n_points) - 1;
        pt->position = pt->first;
        uint64_t best = sum_at(live, n, pt->first);
        for (uint32_t p = pt->first + 1; p <= pt->last; p++) {
            uint64_t sum = sum_at(live, n, p);
            if (sum > best) {
                best = sum;
                pt->position = p;
            }
        }
        for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++)
            pt->bytes[c] = live[(size_t)c * (n + 1) + pt->position];
        if (best > t->live_peak_bytes)
            t->live_peak_bytes = best;
    }
}

static void fill_partitions(const struct tide_graph *graph, const struct tide_memplan *plan,
                            const uint64_t *top, struct tide_memory_timeline *t)
{
    for (uint32_t i = 0; i < t->n_partitions; i++)
        t->partitions[i].first = UINT32_MAX;
    for (uint32_t p = 0; p < plan->n_order; p++) {
        struct tide_memory_timeline_partition *part =
            &t->partitions[partition_of(graph, plan->order[p])];
        if (part->first == UINT32_MAX)
            part->first = p;
        part->last = p;
        if (top[p] > part->arena_top_bytes)
            part->arena_top_bytes = top[p];
    }
    /* A partition that holds no node (none should) is empty at the position of the one before. */
    for (uint32_t i = 0; i < t->n_partitions; i++) {
        if (t->partitions[i].first == UINT32_MAX)
            t->partitions[i].first = t->partitions[i].last = i ? t->partitions[i - 1].last : 0;
    }
}

enum tide_status tide_memory_timeline_build(const struct tide_graph *graph,
                                            const struct tide_memplan *plan, uint64_t budget_bytes,
                                            uint32_t max_points, struct tide_memory_timeline *out,
                                            struct tide_error *err)
{
    if (!out)
        return tide_error_set(err, TIDE_INVALID, "memory timeline: out is NULL");
    memset(out, 0, sizeof(*out));
    if (!graph || !plan)
        return tide_error_set(err, TIDE_INVALID, "memory timeline: %s is NULL",
                              graph ? "the plan" : "the graph");
    enum tide_status st = check_plan(graph, plan, err);
    if (st != TIDE_OK)
        return st;
    uint32_t n = plan->n_order;
    out->budget_bytes = budget_bytes;
    out->predicted_peak_bytes = plan->peak_bytes;
    if (n == 0)
        return TIDE_OK;
    if (max_points == 0)
        max_points = TIDE_MEMORY_TIMELINE_MAX_POINTS;

    out->n_positions = n;
    out->n_points = n < max_points ? n : max_points;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t part = partition_of(graph, plan->order[p]);
        if (part + 1 > out->n_partitions)
            out->n_partitions = part + 1;
        enum tide_op op = graph->nodes[plan->order[p]].op;
        out->n_swap_outs += op == TIDE_OP_SWAP_OUT;
        out->n_swap_ins += op == TIDE_OP_SWAP_IN;
    }
    uint64_t *live = calloc((size_t)TIDE_MEMORY_CATEGORY_COUNT * (n + 1), sizeof(*live));
    uint64_t *tree = calloc((size_t)2 * n, sizeof(*tree));
    uint64_t *top = calloc(n, sizeof(*top));
    out->points = calloc(out->n_points, sizeof(*out->points));
    out->partitions = calloc(out->n_partitions, sizeof(*out->partitions));
    out->swap_outs = calloc(out->n_swap_outs + 1, sizeof(*out->swap_outs));
    out->swap_ins = calloc(out->n_swap_ins + 1, sizeof(*out->swap_ins));
    if (!live || !tree || !top || !out->points || !out->partitions || !out->swap_outs ||
        !out->swap_ins) {
        free(live);
        free(tree);
        free(top);
        tide_memory_timeline_clear(out);
        return tide_error_set(err, TIDE_NOMEM,
                              "memory timeline: out of memory for %u positions and %u regions", n,
                              plan->n_regions);
    }

    live_by_category(graph, plan, live);
    fill_points(live, n, out);
    arena_top(plan, tree, top);
    fill_partitions(graph, plan, top, out);
    uint32_t outs = 0, ins = 0;
    for (uint32_t p = 0; p < n; p++) {
        enum tide_op op = graph->nodes[plan->order[p]].op;
        if (op == TIDE_OP_SWAP_OUT)
            out->swap_outs[outs++] = p;
        else if (op == TIDE_OP_SWAP_IN)
            out->swap_ins[ins++] = p;
    }
    free(live);
    free(tree);
    free(top);
    return TIDE_OK;
}
