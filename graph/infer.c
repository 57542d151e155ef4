/* SPDX-License-Identifier: MIT */
/* infer.c: placeholder until the infer functions land. */
#include "graph/graph-impl.h"

enum tide_status tide__infer_add_n(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_apply_adam(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_apply_momentum(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_apply_sgd(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_avg_pool2d_grad(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_batch_norm(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_batch_norm_grad(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_bias_add(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_bias_add_grad(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_broadcast(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_broadcast_to(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_concat(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_constant(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_conv2d(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_conv2d_backprop_filter(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_conv2d_backprop_input(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_global_avg_pool(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_global_avg_pool_grad(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_identity(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_matmul(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_placeholder(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_pool2d(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_reduce(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_reshape(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_same_as_0(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_same_as_1(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_sink(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_slice(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_slice_grad(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_softmax(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_softmax_xent(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_softmax_xent_grad(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_sum_to_shape(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_unary(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}

enum tide_status tide__infer_variable(struct tide_graph *graph, struct tide_node *node, struct tide_error *err)
{
    (void)graph;
    return tide_node_error(err, TIDE_UNSUPPORTED, node, "infer not implemented");
}
