/* SPDX-License-Identifier: MIT */
/*
 * autodiff.h: turns a forward graph into a training graph.
 *
 * Given the loss (a scalar float32 node output) and the Variables to train,
 * tide_autodiff appends to the graph: the gradient of the loss with respect
 * to every trained Variable (reverse mode, one gradient function per op, in
 * the GRAD column of graph/ops.def; several contributions to one tensor are
 * summed with AddN), the optimizer's state Variables (Momentum's accumulator,
 * Adam's m and v: init zeros, not trainable) and one update node per trained
 * Variable (ApplySGD, ApplyMomentum or ApplyAdam). Each update node gets
 * control edges from every other reader of its Variable, so the update runs
 * after the step's last read of the old value — which is what lets the
 * depth-first order (tide_graph_dfs_order) run it as soon as its gradient is
 * complete rather than at the end of the step. The graph is re-inferred.
 *
 * Names of added nodes are derived from the forward names ("grad/conv1/w",
 * "adam/m/conv1/w"), so they are stable across runs and readable in plans.
 *
 * Example usage:
 *
 *     struct tide_train_options t = {.loss = "loss", .optimizer = TIDE_OPTIMIZER_SGD,
 *                                    .learning_rate = 0.1f};
 *     struct tide_autodiff_result r;
 *     if (tide_autodiff(graph, &t, &r, &err) != TIDE_OK) ...;
 *     ...
 *     tide_autodiff_result_release(&r);
 */
#ifndef TIDE_GRAPH_AUTODIFF_H
#define TIDE_GRAPH_AUTODIFF_H

#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tide_optimizer {
    TIDE_OPTIMIZER_SGD = 0,
    TIDE_OPTIMIZER_MOMENTUM = 1,
    TIDE_OPTIMIZER_ADAM = 2,
};

struct tide_train_options {
    const char *loss; /* "node" or "node:k"; must be a float32 scalar */
    enum tide_optimizer optimizer;
    float learning_rate;
    float momentum; /* Momentum */
    bool nesterov;  /* Momentum */
    float beta1;    /* Adam; 0 means 0.9 */
    float beta2;    /* Adam; 0 means 0.999 */
    float epsilon;  /* Adam; 0 means 1e-8 */
    /* Variables to train by name; n_variables 0: every trainable Variable. */
    const char *const *variables;
    uint32_t n_variables;
};

struct tide_autodiff_trained {
    uint32_t variable; /* the Variable's id */
    struct tide_edge gradient;
    uint32_t update;   /* the Apply* node */
};

struct tide_autodiff_result {
    struct tide_edge loss;
    uint32_t n_trained;
    struct tide_autodiff_trained *trained; /* malloc'd */
};

/*
 * Appends gradients, optimizer state and updates to graph (see above).
 * Refuses, naming the node: an unknown or non-scalar loss, a named variable
 * that is not a Variable, no trainable Variable reachable from the loss, a
 * differentiable path through an op without a gradient.
 */
enum tide_status tide_autodiff(struct tide_graph *graph, const struct tide_train_options *options,
                               struct tide_autodiff_result *out, struct tide_error *err);

/*
 * Appends only the gradients of loss w.r.t. the given edges (no optimizer):
 * grads[i] receives the gradient edge of wrt[i]. For tests and tools.
 */
enum tide_status tide_autodiff_gradients(struct tide_graph *graph, struct tide_edge loss,
                                         const struct tide_edge *wrt, uint32_t n,
                                         struct tide_edge *grads, struct tide_error *err);

void tide_autodiff_result_release(struct tide_autodiff_result *result);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_GRAPH_AUTODIFF_H */
