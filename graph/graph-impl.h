/* SPDX-License-Identifier: MIT */
/*
 * graph-impl.h: declarations shared by the files of graph/ only.
 * The infer functions named in ops.def live in infer.c.
 */
#ifndef TIDE_GRAPH_IMPL_H
#define TIDE_GRAPH_IMPL_H

#include "graph/graph.h"

#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                 \
    enum tide_status tide__infer_##INFER(struct tide_graph *graph, struct tide_node *node, \
                                         struct tide_error *err);
#include "graph/ops.def"
#undef TIDE_OP

/* Sets output k of node to dtype and shape, computing nbytes; checks limits. */
enum tide_status tide__set_output(struct tide_graph *graph, struct tide_node *node, uint32_t k,
                                  enum tide_dtype dtype, const struct tide_shape *shape,
                                  struct tide_error *err);

/* The limits of the tide_graph_infer call in progress (set by it). */
extern _Thread_local const struct tide_graph_limits *tide__infer_limits;

/* The i-th predecessor (data inputs first, then controls) of a node. */
static inline uint32_t tide__node_pred(const struct tide_node *node, uint32_t i)
{
    return i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
}

static inline uint32_t tide__node_n_preds(const struct tide_node *node)
{
    return node->n_inputs + node->n_controls;
}

/*
 * Early updates (early.c): writes into order the plain depth-first order
 * base (every node of graph once) with each optimizer update, and what only
 * it reads, moved up to where its inputs are done. users is graph's.
 * TIDE_NOMEM when out of memory; TIDE_INTERNAL, saying which, when the
 * pass finds one of its own invariants broken (order is then not usable).
 */
enum tide_status tide__graph_early_updates(const struct tide_graph *graph,
                                           const struct tide_graph_users *users,
                                           const uint32_t *base, uint32_t *order,
                                           struct tide_error *err);

#endif /* TIDE_GRAPH_IMPL_H */
