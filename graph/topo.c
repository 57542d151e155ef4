/* SPDX-License-Identifier: MIT */
/*
 * topo.c: orders of a graph's nodes and cycle detection.
 *
 * Both orders are topological (every node after its data and control
 * inputs); they differ in what they optimise:
 *  - topo: Kahn's algorithm, FIFO from the sources in id order. Used by
 *    validation because it needs no recursion and finds every node.
 *  - dfs: the partitioner's order. A post-order depth-first search along
 *    inputs, started from each sink in id order: a node is emitted right
 *    after the last of its inputs, so a Variable or a Placeholder comes just
 *    before its first consumer and each subtree finishes before the next one
 *    starts — results are consumed while fresh, as in Wei et al. Then early
 *    updates (early.c) move each optimizer update, and the weight gradient
 *    that only it reads, up to where their inputs are complete.
 * Every search here is iterative with an explicit stack: a 100,000-node chain
 * from the wire must not overflow the C stack.
 */
#include "graph/graph-impl.h"

#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * Users
 * ========================================================================== */

enum tide_status tide_graph_users_build(const struct tide_graph *graph,
                                        struct tide_graph_users *users)
{
    uint32_t n = graph->n_nodes;
    size_t edges = 0;
    for (uint32_t v = 0; v < n; v++)
        edges += (size_t)graph->nodes[v].n_inputs + graph->nodes[v].n_controls;
    users->offsets = calloc((size_t)n + 1, sizeof(*users->offsets));
    users->users = malloc((edges + 1) * sizeof(*users->users));
    if (!users->offsets || !users->users) {
        tide_graph_users_free(users);
        return TIDE_NOMEM;
    }
    for (uint32_t v = 0; v < n; v++) {
        const struct tide_node *node = &graph->nodes[v];
        for (uint32_t i = 0; i < node->n_inputs; i++)
            users->offsets[node->inputs[i].node + 1]++;
        for (uint32_t i = 0; i < node->n_controls; i++)
            users->offsets[node->controls[i] + 1]++;
    }
    for (uint32_t v = 0; v < n; v++)
        users->offsets[v + 1] += users->offsets[v];
    uint32_t *fill = malloc(((size_t)n + 1) * sizeof(*fill));
    if (!fill) {
        tide_graph_users_free(users);
        return TIDE_NOMEM;
    }
    memcpy(fill, users->offsets, ((size_t)n + 1) * sizeof(*fill));
    for (uint32_t v = 0; v < n; v++) {
        const struct tide_node *node = &graph->nodes[v];
        for (uint32_t i = 0; i < node->n_inputs; i++)
            users->users[fill[node->inputs[i].node]++] = v;
        for (uint32_t i = 0; i < node->n_controls; i++)
            users->users[fill[node->controls[i]]++] = v;
    }
    free(fill);
    return TIDE_OK;
}

void tide_graph_users_free(struct tide_graph_users *users)
{
    if (!users)
        return;
    free(users->offsets);
    free(users->users);
    users->offsets = NULL;
    users->users = NULL;
}

static enum tide_status cycle_error(const struct tide_graph *graph, struct tide_error *err)
{
    uint32_t v = tide_graph_find_cycle(graph);
    if (v == TIDE_NO_NODE)
        return tide_error_set(err, TIDE_INTERNAL, "graph order failed without a cycle");
    return tide_node_error(err, TIDE_INVALID, &graph->nodes[v], "is on a cycle");
}

/* ============================================================================
 * Cycle detection: iterative DFS along inputs with three colours
 * ========================================================================== */

enum { WHITE = 0, GREY = 1, BLACK = 2 };

struct frame {
    uint32_t node;
    uint32_t next; /* next predecessor to visit */
};

uint32_t tide_graph_find_cycle(const struct tide_graph *graph)
{
    uint32_t n = graph->n_nodes;
    uint8_t *colour = calloc((size_t)n + 1, 1);
    struct frame *stack = malloc(((size_t)n + 1) * sizeof(*stack));
    uint32_t found = TIDE_NO_NODE;
    if (!colour || !stack)
        goto out;
    for (uint32_t root = 0; root < n && found == TIDE_NO_NODE; root++) {
        if (colour[root] != WHITE)
            continue;
        uint32_t depth = 0;
        stack[depth++] = (struct frame){root, 0};
        colour[root] = GREY;
        while (depth && found == TIDE_NO_NODE) {
            struct frame *f = &stack[depth - 1];
            const struct tide_node *node = &graph->nodes[f->node];
            if (f->next == tide__node_n_preds(node)) {
                colour[f->node] = BLACK;
                depth--;
                continue;
            }
            uint32_t p = tide__node_pred(node, f->next++);
            if (p >= n)
                continue;
            if (colour[p] == GREY)
                found = p;
            else if (colour[p] == WHITE) {
                colour[p] = GREY;
                stack[depth++] = (struct frame){p, 0};
            }
        }
    }
out:
    free(colour);
    free(stack);
    return found;
}

/* ============================================================================
 * Orders
 * ========================================================================== */

enum tide_status tide_graph_topo_order(const struct tide_graph *graph, uint32_t *order,
                                       struct tide_error *err)
{
    uint32_t n = graph->n_nodes;
    struct tide_graph_users users;
    uint32_t *pending = calloc((size_t)n + 1, sizeof(*pending));
    if (!pending || tide_graph_users_build(graph, &users) != TIDE_OK) {
        free(pending);
        return tide_error_set(err, TIDE_NOMEM, "out of memory ordering %u nodes", n);
    }
    uint32_t head = 0, tail = 0;
    for (uint32_t v = 0; v < n; v++) {
        pending[v] = tide__node_n_preds(&graph->nodes[v]);
        if (pending[v] == 0)
            order[tail++] = v;
    }
    while (head < tail) {
        uint32_t v = order[head++];
        for (uint32_t u = users.offsets[v]; u < users.offsets[v + 1]; u++) {
            uint32_t w = users.users[u];
            if (--pending[w] == 0)
                order[tail++] = w;
        }
    }
    free(pending);
    tide_graph_users_free(&users);
    if (tail != n)
        return cycle_error(graph, err);
    return TIDE_OK;
}

/* The plain depth-first order (see the file comment) into order. */
static void dfs_base(const struct tide_graph *graph, const struct tide_graph_users *users,
                     uint8_t *seen, struct frame *stack, uint32_t *order)
{
    uint32_t n = graph->n_nodes;
    uint32_t emitted = 0;
    /* Two passes: sinks first (the normal case), then anything left (none when acyclic). */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t root = 0; root < n; root++) {
            if (seen[root])
                continue;
            if (pass == 0 && users->offsets[root] != users->offsets[root + 1])
                continue;
            uint32_t depth = 0;
            stack[depth++] = (struct frame){root, 0};
            seen[root] = 1;
            while (depth) {
                struct frame *f = &stack[depth - 1];
                const struct tide_node *node = &graph->nodes[f->node];
                if (f->next == tide__node_n_preds(node)) {
                    order[emitted++] = f->node;
                    depth--;
                    continue;
                }
                uint32_t p = tide__node_pred(node, f->next++);
                if (!seen[p]) {
                    seen[p] = 1;
                    stack[depth++] = (struct frame){p, 0};
                }
            }
        }
    }
}

/* The plain order into order, early updates when early; the graph is acyclic. */
static enum tide_status dfs_order(const struct tide_graph *graph, bool early, uint32_t *order,
                                  struct tide_error *err)
{
    uint32_t n = graph->n_nodes;
    if (tide_graph_find_cycle(graph) != TIDE_NO_NODE)
        return cycle_error(graph, err);
    struct tide_graph_users users;
    uint8_t *seen = calloc((size_t)n + 1, 1);
    struct frame *stack = malloc(((size_t)n + 1) * sizeof(*stack));
    uint32_t *base = early ? malloc(((size_t)n + 1) * sizeof(*base)) : order;
    if (!seen || !stack || !base || tide_graph_users_build(graph, &users) != TIDE_OK) {
        free(seen);
        free(stack);
        if (base != order)
            free(base);
        return tide_error_set(err, TIDE_NOMEM, "out of memory ordering %u nodes", n);
    }
    dfs_base(graph, &users, seen, stack, base);
    enum tide_status st =
        early ? tide__graph_early_updates(graph, &users, base, order, err) : TIDE_OK;
    free(seen);
    free(stack);
    if (base != order)
        free(base);
    tide_graph_users_free(&users);
    return st;
}

enum tide_status tide_graph_dfs_order(const struct tide_graph *graph, uint32_t *order,
                                      struct tide_error *err)
{
    return dfs_order(graph, true, order, err);
}

enum tide_status tide_graph_dfs_order_late_updates(const struct tide_graph *graph, uint32_t *order,
                                                   struct tide_error *err)
{
    return dfs_order(graph, false, order, err);
}
