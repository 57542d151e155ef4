/* SPDX-License-Identifier: MIT */
/*
 * early.c: early updates, the last step of the depth-first order
 * (tide_graph_dfs_order in topo.c).
 *
 * In the plain depth-first order an optimizer update (an op with
 * TIDE_OP_F_UPDATE) is a sink that the search reaches from its own root, so
 * after the first update's search has walked the whole backward chain every
 * other update — and its weight gradient — comes at the very end of the
 * step: the layer's output gradient and its saved input wait (or are
 * swapped out and in again) until then, and a host-homed weight is fetched
 * once more for the update. This pass moves them up instead.
 *
 * Three kinds of node, from the graph alone:
 *  - forward: an ancestor (data or control) of a sink that is no update,
 *    such as the loss;
 *  - owned by update u: a node whose every user is u or owned by u — what
 *    only u's gradient needs (the weight gradient, its sums, Adam's m and v);
 *  - anything else (the backward chain shared by several updates).
 * An owned node is "pullable" when it derives from forward nodes and
 * sources only (a Reshape of a saved activation for the weight gradient,
 * the optimizer state): it is ready once those are emitted, but emitting it
 * then would hold its result from the forward pass to the backward one, so
 * it is only pulled in, just before the node that needs it. Every other
 * owned node, and the update itself, is "eager": it is emitted the moment
 * its last input that is neither a source nor pullable is emitted (pullable
 * inputs ready), its pullable inputs just before it, depth-first.
 *
 * The pass walks the plain order and emits each node not yet emitted; each
 * emission may make eager nodes ready, which are emitted at once. Nodes only
 * ever move earlier, and only to where all their inputs are emitted, so the
 * order stays topological: an update still follows every node with a
 * control edge into it — autodiff gives it one from every reader of its
 * Variable — and every other order is kept. For a convolution k that reads
 * W, the backward pass becomes: the output gradient dY, the weight gradient
 * (dY and the saved input), the input gradient (dY and W, the last reader of
 * W), the update of W. The arithmetic of every node is unchanged; only when
 * it runs moves. A graph without updates keeps the plain order.
 *
 * Linear in nodes and edges: two sweeps over the plain order to classify,
 * and each edge is counted off once.
 */
#include "graph/graph-impl.h"

#include <stdlib.h>
#include <string.h>

struct frame {
    uint32_t node;
    uint32_t next; /* next predecessor to visit */
};

#define NO_OWNER UINT32_MAX

enum {
    KIND_OTHER = 0,
    KIND_PULLABLE = 1,
    KIND_EAGER = 2,
};

struct early {
    const struct tide_graph *graph;
    const struct tide_graph_users *users;
    uint8_t *kind;
    uint32_t *pending; /* eager and pullable: inputs from non-sources not yet done */
    uint8_t *done;     /* emitted; for pullable nodes: ready (inputs done) */
    uint8_t *emitted;
    uint32_t *work; /* eager nodes made ready, FIFO; each enters once */
    uint32_t head, tail;
    uint32_t *ready; /* scratch stack of pullable nodes made ready */
    struct frame *stack;
    uint32_t *order;
    uint32_t n_emitted;
    /*
     * The first of the pass's own invariants found broken (NULL: none): a
     * node counted off twice, a missing input that readiness did not count,
     * or a node emitted twice. Checked in every build, not only by assert:
     * the order would run a node before its input, so the pass then fails
     * with TIDE_INTERNAL instead of handing it on.
     */
    const char *broken;
};

static bool is_update(const struct tide_graph *graph, uint32_t v)
{
    return (tide_op_info(graph->nodes[v].op)->flags & TIDE_OP_F_UPDATE) != 0;
}

/*
 * v is done (an emitted node, or a pullable node whose inputs are done):
 * counts it off the eager and pullable nodes that read it, cascading through
 * pullable readers; eager ones that reach zero join the work list.
 */
static void early_done(struct early *e, uint32_t v)
{
    /* Sources are not counted: nothing waits for them. */
    if (tide__node_n_preds(&e->graph->nodes[v]) == 0)
        return;
    uint32_t depth = 0;
    e->ready[depth++] = v;
    while (depth) {
        uint32_t x = e->ready[--depth];
        const struct tide_graph_users *users = e->users;
        for (uint32_t i = users->offsets[x]; i < users->offsets[x + 1]; i++) {
            uint32_t u = users->users[i];
            if (e->kind[u] == KIND_OTHER || e->done[u])
                continue;
            if (e->pending[u] == 0) {
                e->broken = e->broken ? e->broken : "a node's inputs counted off twice";
                continue;
            }
            if (--e->pending[u])
                continue;
            e->done[u] = e->kind[u] == KIND_PULLABLE;
            if (e->kind[u] == KIND_PULLABLE)
                e->ready[depth++] = u;
            else
                e->work[e->tail++] = u;
        }
    }
}

static void early_emit(struct early *e, uint32_t v)
{
    if (e->n_emitted == e->graph->n_nodes) {
        e->broken = e->broken ? e->broken : "more nodes emitted than the graph has";
        return;
    }
    e->order[e->n_emitted++] = v;
    e->emitted[v] = 1;
    /* A pullable node was counted off its readers when it became ready. */
    if (e->kind[v] != KIND_PULLABLE) {
        e->done[v] = 1;
        early_done(e, v);
    }
}

/* Emits eager node v after its inputs not yet emitted (sources and ready pullable nodes). */
static void early_pull(struct early *e, uint32_t v)
{
    uint32_t depth = 0;
    e->stack[depth++] = (struct frame){v, 0};
    e->emitted[v] = 2; /* on the stack */
    while (depth) {
        struct frame *f = &e->stack[depth - 1];
        const struct tide_node *node = &e->graph->nodes[f->node];
        if (f->next == tide__node_n_preds(node)) {
            early_emit(e, f->node);
            depth--;
            continue;
        }
        uint32_t p = tide__node_pred(node, f->next++);
        if (e->emitted[p])
            continue;
        /* Only what readiness counted as done can be missing here. */
        if (tide__node_n_preds(&e->graph->nodes[p]) != 0 &&
            !(e->kind[p] == KIND_PULLABLE && e->done[p]))
            e->broken = e->broken ? e->broken : "an input emitted before it was ready";
        e->emitted[p] = 2;
        e->stack[depth++] = (struct frame){p, 0};
    }
}

enum tide_status tide__graph_early_updates(const struct tide_graph *graph,
                                           const struct tide_graph_users *users,
                                           const uint32_t *base, uint32_t *order,
                                           struct tide_error *err)
{
    uint32_t n = graph->n_nodes;
    bool any = false;
    for (uint32_t v = 0; v < n && !any; v++)
        any = is_update(graph, v);
    if (!any) {
        memcpy(order, base, (size_t)n * sizeof(*order));
        return TIDE_OK;
    }
    struct early e = {.graph = graph, .users = users, .order = order};
    uint8_t *forward = calloc((size_t)n + 1, 1);
    uint32_t *owner = malloc(((size_t)n + 1) * sizeof(*owner));
    e.kind = calloc((size_t)n + 1, 1);
    e.pending = calloc((size_t)n + 1, sizeof(*e.pending));
    e.done = calloc((size_t)n + 1, 1);
    e.emitted = calloc((size_t)n + 1, 1);
    e.work = malloc(((size_t)n + 1) * sizeof(*e.work));
    e.ready = malloc(((size_t)n + 1) * sizeof(*e.ready));
    e.stack = malloc(((size_t)n + 1) * sizeof(*e.stack));
    bool ok = forward && owner && e.kind && e.pending && e.done && e.emitted && e.work && e.ready &&
              e.stack;
    if (!ok)
        goto out;

    /* Users before their inputs: forward and owner. */
    for (uint32_t i = n; i-- > 0;) {
        uint32_t v = base[i];
        uint32_t first = users->offsets[v], end = users->offsets[v + 1];
        if (is_update(graph, v)) {
            owner[v] = v;
            continue;
        }
        forward[v] = first == end;
        owner[v] = first == end ? NO_OWNER : owner[users->users[first]];
        for (uint32_t u = first; u < end; u++) {
            uint32_t w = users->users[u];
            forward[v] = forward[v] || forward[w];
            if (owner[w] != owner[v])
                owner[v] = NO_OWNER;
        }
    }
    /* Inputs before their users: kinds and counts. */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = base[i];
        const struct tide_node *node = &graph->nodes[v];
        if (owner[v] == NO_OWNER)
            continue;
        bool pullable = !is_update(graph, v);
        for (uint32_t j = 0; j < tide__node_n_preds(node); j++) {
            uint32_t p = tide__node_pred(node, j);
            if (tide__node_n_preds(&graph->nodes[p]) == 0)
                continue;
            e.pending[v]++;
            pullable = pullable && (forward[p] || e.kind[p] == KIND_PULLABLE);
        }
        e.kind[v] = pullable ? KIND_PULLABLE : KIND_EAGER;
    }
    /*
     * Pullable nodes of sources alone (the optimizer state, its sources) are
     * ready now. One that an earlier one's cascade made ready is done
     * already: counting it off its readers again would make an update ready
     * before its other inputs (such as the forward reader of its Variable).
     */
    for (uint32_t v = 0; v < n; v++) {
        if (e.kind[v] == KIND_PULLABLE && e.pending[v] == 0 && !e.done[v]) {
            e.done[v] = 1;
            early_done(&e, v);
        }
    }
    for (uint32_t i = 0; i <= n; i++) {
        while (e.head < e.tail) {
            uint32_t v = e.work[e.head++];
            if (!e.emitted[v])
                early_pull(&e, v);
        }
        if (i < n && !e.emitted[base[i]])
            early_emit(&e, base[i]);
    }
    if (!e.broken && e.n_emitted != n)
        e.broken = "nodes left out of the order";
out:
    free(forward);
    free(owner);
    free(e.kind);
    free(e.pending);
    free(e.done);
    free(e.emitted);
    free(e.work);
    free(e.ready);
    free(e.stack);
    if (!ok)
        return tide_error_set(err, TIDE_NOMEM, "out of memory ordering %u nodes", n);
    if (e.broken)
        return tide_error_set(err, TIDE_INTERNAL,
                              "early updates: %s (%u of %u nodes emitted); the graph's order is "
                              "not usable",
                              e.broken, e.n_emitted, n);
    return TIDE_OK;
}
