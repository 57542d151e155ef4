/* SPDX-License-Identifier: MIT */
/*
 * table.c: the CUDA kernel table and its workspace sizes.
 *
 * The table is generated from graph/ops.def as the CPU one is: entry
 * TIDE_OP_<ID> is tide__cuda_<ID>. The seven ops the executor implements
 * itself (the sources and the memory ops) are mapped to NULL before the
 * table is expanded; every other op must have a CUDA kernel or the link
 * fails.
 *
 * Workspaces: Conv2D and its gradients need what cuDNN says their
 * algorithm needs (computed with the cuDNN handle of the launch context the
 * backend passes in);
 * MaxPool2DGrad needs one int32 per element of dy for the windows' argmax.
 * The reductions need none: their partial sums live in registers and shared
 * memory.
 */
#include "kernels/cuda/cuda-impl.h"

/* Ops without a kernel: the executor copies, initialises or moves their data. */
#define tide__cuda_PLACEHOLDER NULL
#define tide__cuda_VARIABLE    NULL
#define tide__cuda_CONST       NULL
#define tide__cuda_FETCH       NULL
#define tide__cuda_WRITE_BACK  NULL
#define tide__cuda_SWAP_OUT    NULL
#define tide__cuda_SWAP_IN     NULL

static uint64_t cuda_workspace_bytes(void *stream, const struct tide_graph *graph,
                                     const struct tide_node *node)
{
    switch (node->op) {
    case TIDE_OP_CONV2D:
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
    case TIDE_OP_CONV2D_BACKPROP_FILTER:
        return tide__cuda_conv_workspace(stream, graph, node);
    /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */

    /* batched products and axis permutation (BatchMatMul, Transpose) */

    /* indexing (Gather, TopK, Mixture-of-Experts routing) */
    case TIDE_OP_GATHER_GRAD:
    case TIDE_OP_MOE_ROUTE:
        return tide__kernel_index_workspace(
            node, tide_shape_numel(&tide_graph_input(graph, node, node->n_inputs - 1)->shape));

    /* normalisation and regularisation (LayerNorm, Dropout) */

    /* fused attention (Attention) */
    case TIDE_OP_ATTENTION:
    case TIDE_OP_ATTENTION_GRAD:
        return tide__cuda_attention_workspace(graph, node);

    default:
        return 0;
    }
}

const struct tide_kernel_table tide_cuda_kernels = {
    .name = "cuda",
    .fn =
        {
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                        \
    [TIDE_OP_##ID] = tide__cuda_##ID,
#include "graph/ops.def"
#undef TIDE_OP
        },
    .workspace_bytes = cuda_workspace_bytes,
};
