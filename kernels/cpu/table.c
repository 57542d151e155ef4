/* SPDX-License-Identifier: MIT */
/*
 * table.c: the CPU kernel table and its workspace sizes.
 *
 * The table is generated from graph/ops.def: entry TIDE_OP_<ID> is
 * tide__cpu_<ID>. The seven ops the executor implements itself (the sources
 * and the memory ops) are mapped to NULL by the macros below before the table
 * is expanded; every other op must have a kernel or the link fails.
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/onednn/onednn.h"

/* Ops without a kernel: the executor copies, initialises or moves their data. */
#define tide__cpu_PLACEHOLDER NULL
#define tide__cpu_VARIABLE    NULL
#define tide__cpu_CONST       NULL
#define tide__cpu_FETCH       NULL
#define tide__cpu_WRITE_BACK  NULL
#define tide__cpu_SWAP_OUT    NULL
#define tide__cpu_SWAP_IN     NULL

/*
 * The pools' and batch norms' workspace: 0 for tide's own kernels, oneDNN's
 * where it runs them (kernels/onednn/pool.c and norm.c choose by shape). A
 * MaxPool2D with a workspace cannot be recomputed (swapper/recompute.c), so
 * pool.c chooses oneDNN for it by default only where it is much the faster.
 */
static uint64_t onednn_workspace(const struct tide_graph *graph, const struct tide_node *node)
{
    if (!node->outputs || node->n_outputs < 1 || node->n_inputs < 1)
        return 0;
    const struct tide_shape *in0 = &tide_graph_input(graph, node, 0)->shape;
    const struct tide_shape *out0 = &node->outputs[0].shape;
    uint64_t bytes = 0;
    switch (node->op) {
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_GLOBAL_AVG_POOL: /* x -> y */
        return tide__onednn_pool_workspace(node, in0, out0, &bytes) ? bytes : 0;
    case TIDE_OP_AVG_POOL2D_GRAD:
    case TIDE_OP_GLOBAL_AVG_POOL_GRAD: /* dy -> dx */
        return tide__onednn_pool_workspace(node, out0, in0, &bytes) ? bytes : 0;
    default: /* BatchNorm (x, gamma, beta), BatchNormGrad (dy, x, ...): dy has x's shape */
        return tide__onednn_batch_norm_workspace(node, in0, &bytes) ? bytes : 0;
    }
}

static uint64_t cpu_workspace_bytes(void *stream, const struct tide_graph *graph,
                                    const struct tide_node *node)
{
    switch (node->op) {
    case TIDE_OP_CONV2D:
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
    case TIDE_OP_CONV2D_BACKPROP_FILTER:
        return tide__cpu_conv_workspace(graph, node);
    case TIDE_OP_REDUCE_SUM:
    case TIDE_OP_REDUCE_MEAN:
    case TIDE_OP_SUM_TO_SHAPE:
    case TIDE_OP_BIAS_ADD_GRAD:
        return tide__cpu_reduce_workspace(graph, node);
    /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */

    /* batched products and axis permutation (BatchMatMul, Transpose) */

    /* indexing (Gather, TopK, Mixture-of-Experts routing) */
    case TIDE_OP_GATHER_GRAD:
    case TIDE_OP_MOE_ROUTE:
        return tide__kernel_index_workspace(
            node, tide_shape_numel(&tide_graph_input(graph, node, node->n_inputs - 1)->shape));

    /* pooling and batch norm, where oneDNN runs them */
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_AVG_POOL2D_GRAD:
    case TIDE_OP_GLOBAL_AVG_POOL:
    case TIDE_OP_GLOBAL_AVG_POOL_GRAD:
    case TIDE_OP_BATCH_NORM:
    case TIDE_OP_BATCH_NORM_GRAD:
        return onednn_workspace(graph, node);

    /* normalisation and regularisation (LayerNorm, Dropout) */

    /* fused attention (Attention) */
    case TIDE_OP_ATTENTION:
    case TIDE_OP_ATTENTION_GRAD:
        return tide__cpu_attention_workspace(graph, node);

    default:
        return 0;
    }
}

const struct tide_kernel_table tide_cpu_kernels = {
    .name = "cpu",
    .fn =
        {
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                        \
    [TIDE_OP_##ID] = tide__cpu_##ID,
#include "graph/ops.def"
#undef TIDE_OP
        },
    .workspace_bytes = cpu_workspace_bytes,
};
