/* SPDX-License-Identifier: MIT */
/*
 * attention.c: the host half of Attention and AttentionGrad on CUDA (device
 * half: attention.cu).
 *
 * The geometry and its checks are the CPU kernels' (kernels/check.h). The
 * workspace holds double accumulators, one row of D per query row (forward,
 * dq) or key row (dk, dv), and the backward's D_i = rowsum(do * o): O(S * D)
 * per head, never O(Sq * Sk).
 */
#include "kernels/cuda/cuda-impl.h"

/* Doubles of the workspace: see attention.cu for its layout. */
static uint64_t attention_workspace_doubles(const struct tide__kernel_attention *a, bool grad)
{
    uint64_t q_rows = (uint64_t)(a->heads * a->sq), k_rows = (uint64_t)(a->heads * a->sk);
    uint64_t d = (uint64_t)a->d;
    if (!grad)
        return q_rows * d;
    return q_rows + 2 * k_rows * d + q_rows * d;
}

uint64_t tide__cuda_attention_workspace(const struct tide_graph *graph,
                                        const struct tide_node *node)
{
    if (!node->outputs || node->n_inputs < 2)
        return 0;
    struct tide__kernel_attention a;
    tide__kernel_attention_shape(node, &tide_graph_input(graph, node, 0)->shape,
                                 &tide_graph_input(graph, node, 1)->shape, &a);
    return attention_workspace_doubles(&a, node->op == TIDE_OP_ATTENTION_GRAD) * sizeof(double);
}

/* Attention(q, k, v) -> o, lse. */
enum tide_status tide__cuda_ATTENTION(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_attention a;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_attention_setup(args, &a);
    st = tide__cuda_expect_workspace(args, attention_workspace_doubles(&a, false) * sizeof(double),
                                     err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_attention(launch->stream, &a, tide__cuda_in(args, 0),
                                         tide__cuda_in(args, 1), tide__cuda_in(args, 2),
                                         tide__cuda_out(args, 0), tide__cuda_out(args, 1),
                                         args->workspace));
}

/* AttentionGrad(q, k, v, o, lse, do) -> dq, dk, dv. */
enum tide_status tide__cuda_ATTENTION_GRAD(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_attention a;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_attention_setup(args, &a);
    st = tide__cuda_expect_workspace(args, attention_workspace_doubles(&a, true) * sizeof(double),
                                     err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_attention_grad(
                 launch->stream, &a, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                 tide__cuda_in(args, 2), tide__cuda_in(args, 3), tide__cuda_in(args, 4),
                 tide__cuda_in(args, 5), tide__cuda_out(args, 0), tide__cuda_out(args, 1),
                 tide__cuda_out(args, 2), args->workspace));
}
