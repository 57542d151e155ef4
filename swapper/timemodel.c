/* SPDX-License-Identifier: MIT */
/*
 * timemodel.c: per-node costs from FLOPs and bytes, the published device
 * profiles, and the replay of a planned order on the executor's three
 * streams (timemodel.h).
 *
 * The published profiles. tide's CUDA kernels compute in plain FP32 by
 * default: cublasSgemm in its default math mode and cuDNN with
 * CUDNN_FMA_MATH, no TF32 tensor cores (kernels/cuda/cuda-impl.h: the same
 * inputs give the same bits). A job may ask for TF32 (graph.h's math): its
 * products' compute time is divided by tf32_speedup, 1.7, what tide's
 * kernels measured on our H200 (docs/benchmarks.md, "TF32 math": traces of
 * ResNet-50's convolutions, 31.0-38.2 ms a step in fp32 against 18.1 in
 * tf32, and of the Transformer's MatMuls, 1.27 against 0.80 ms), not the
 * peaks' 7.4x (495 against 67 TFLOP/s dense).
 * So the compute figure is the FP32 non-tensor peak, 67 TFLOP/s
 * on both the H100 SXM and the H200 (the 989 TFLOP/s headline is dense
 * BF16 on tensor cores, which tide does not use). Memory bandwidth is HBM3's
 * 3.35 TB/s (H100 SXM) and HBM3e's 4.8 TB/s (H200). Copies run over PCIe
 * Gen5 x16: 55 GB/s each way, as measured with cudaMemcpyAsync on pinned
 * memory on our H200 (docs/benchmarks.md, "On a GPU"); the H100 box is
 * taken to have the same link. A kernel launch costs about 5 us.
 *
 * Threads: no state; every function may be called from any thread.
 */
#include "swapper/timemodel.h"

#include <stdlib.h>
#include <string.h>

static const struct tide_device_profile published[] = {
    {.name = "h100",
     .compute_flops = 67e12,
     .memory_bytes_per_s = 3.35e12,
     .copy_bytes_per_s = 55e9,
     .launch_us = 5,
     .tf32_speedup = 1.7},
    {.name = "h200",
     .compute_flops = 67e12,
     .memory_bytes_per_s = 4.8e12,
     .copy_bytes_per_s = 55e9,
     .launch_us = 5,
     .tf32_speedup = 1.7},
};

const struct tide_device_profile *tide_device_profile_named(const char *name)
{
    for (size_t i = 0; name && i < sizeof(published) / sizeof(published[0]); i++) {
        if (strcmp(published[i].name, name) == 0)
            return &published[i];
    }
    return NULL;
}

/* ============================================================================
 * Work per node
 * ========================================================================== */

static double numel(const struct tide_shape *shape)
{
    int64_t n = tide_shape_numel(shape);
    return n < 0 ? 0 : (double)n;
}

static const struct tide_shape *input_shape(const struct tide_graph *g, const struct tide_node *n,
                                            uint32_t i)
{
    return &tide_graph_input(g, n, i)->shape;
}

/* The contracted length of a (batched) matrix product's first operand. */
static double contracted(const struct tide_shape *a, bool transpose_a)
{
    if (a->rank < 2)
        return a->rank == 1 ? (double)a->dims[0] : 1;
    return (double)a->dims[transpose_a ? a->rank - 2 : a->rank - 1];
}

/*
 * A filter [K, C / G, R, S]'s products per output element: C / G * R * S
 * (an output channel sees its group's C / G input channels only, so a
 * grouped convolution's FLOPs are the dense one's divided by G).
 */
static double per_output(const struct tide_shape *w)
{
    return w->rank == 4 ? (double)w->dims[1] * (double)w->dims[2] * (double)w->dims[3] : 1;
}

/* Attention over q [B, H, Sq, D] and k [B, H, Sk, D]: the products of S = QK^T and PV. */
static double attention_flops(const struct tide_shape *q, const struct tide_shape *k, bool causal)
{
    if (q->rank != 4 || k->rank != 4)
        return numel(q);
    double f = 4.0 * (double)q->dims[0] * (double)q->dims[1] * (double)q->dims[2] *
               (double)k->dims[2] * (double)q->dims[3];
    return causal ? f / 2 : f;
}

/*
 * The patch matrix of a convolution (im2col, or col2im backwards) with y
 * elements of forward output under filter w [K, C / group, R, S]: C*R*S rows
 * per output position (every group's), written once and read once by the
 * GEMMs. A 1x1 filter needs none (the input is the matrix).
 */
static double patch_bytes(double y, const struct tide_shape *w, int64_t group)
{
    if (w->rank != 4 || (w->dims[2] == 1 && w->dims[3] == 1) || w->dims[0] < 1)
        return 0;
    return 2.0 * sizeof(float) * y / (double)w->dims[0] * per_output(w) * (double)group;
}

static double formula_flops(const struct tide_graph *g, const struct tide_node *n, double out)
{
    switch (n->op) {
    case TIDE_OP_MATMUL:
        return 2.0 * out *
               contracted(input_shape(g, n, 0), n->attrs[TIDE_ATTR_MATMUL_transpose_a].b);
    case TIDE_OP_BATCH_MATMUL:
        return 2.0 * out *
               contracted(input_shape(g, n, 0), n->attrs[TIDE_ATTR_BATCH_MATMUL_transpose_a].b);
    case TIDE_OP_CONV2D:
        return 2.0 * out * per_output(input_shape(g, n, 1));
    case TIDE_OP_CONV2D_BACKPROP_INPUT: /* dy [N, K, P, Q], w: as many products as forward */
        return 2.0 * numel(input_shape(g, n, 0)) * per_output(input_shape(g, n, 1));
    case TIDE_OP_CONV2D_BACKPROP_FILTER: /* x, dy, filter_shape attribute */
        return 2.0 * numel(input_shape(g, n, 1)) *
               per_output(&n->attrs[TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape].shape);
    case TIDE_OP_ATTENTION:
        return attention_flops(input_shape(g, n, 0), input_shape(g, n, 1),
                               n->attrs[TIDE_ATTR_ATTENTION_causal].b);
    case TIDE_OP_ATTENTION_GRAD: /* five products per block pair against the forward's two */
        return 2.5 * attention_flops(input_shape(g, n, 0), input_shape(g, n, 1),
                                     n->attrs[TIDE_ATTR_ATTENTION_GRAD_causal].b);
    default:
        return out; /* element-wise and reductions: bound by their bytes */
    }
}

struct tide_node_work tide_time_node_work(const struct tide_graph *graph,
                                          const struct tide_node *node)
{
    struct tide_node_work w = {0};
    double out = 0;
    for (uint32_t k = 0; k < node->n_outputs; k++) {
        w.bytes += (double)node->outputs[k].nbytes;
        out += numel(&node->outputs[k].shape);
    }
    uint32_t flags = tide_op_info(node->op)->flags;
    if (flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY))
        return w; /* a copy (or nothing): its bytes are its outputs' */
    for (uint32_t i = 0; i < node->n_inputs; i++)
        w.bytes += (double)tide_graph_input(graph, node, i)->nbytes;
    w.flops = formula_flops(graph, node, out);
    if (node->op == TIDE_OP_CONV2D)
        w.bytes +=
            patch_bytes(out, input_shape(graph, node, 1), node->attrs[TIDE_ATTR_CONV2D_group].i);
    else if (node->op == TIDE_OP_CONV2D_BACKPROP_INPUT)
        w.bytes += patch_bytes(numel(input_shape(graph, node, 0)), input_shape(graph, node, 1),
                               node->attrs[TIDE_ATTR_CONV2D_BACKPROP_INPUT_group].i);
    else if (node->op == TIDE_OP_CONV2D_BACKPROP_FILTER)
        w.bytes += patch_bytes(numel(input_shape(graph, node, 1)),
                               &node->attrs[TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape].shape,
                               node->attrs[TIDE_ATTR_CONV2D_BACKPROP_FILTER_group].i);
    return w;
}

double tide_time_node_ms(const struct tide_device_profile *profile, const struct tide_graph *graph,
                         const struct tide_node *node)
{
    if (node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST)
        return 0;
    struct tide_node_work w = tide_time_node_work(graph, node);
    double launch = profile->launch_us / 1e3;
    if (node->op == TIDE_OP_PLACEHOLDER || (tide_op_info(node->op)->flags & TIDE_OP_F_MEMORY))
        return launch + w.bytes / profile->copy_bytes_per_s * 1e3;
    double compute = w.flops / profile->compute_flops;
    if (profile->tf32_speedup > 1 && tide_node_math(node) == TIDE_MATH_TF32)
        compute /= profile->tf32_speedup;
    double memory = w.bytes / profile->memory_bytes_per_s;
    double scale = profile->op_scale[node->op] > 0 ? profile->op_scale[node->op] : 1;
    return launch + (compute > memory ? compute : memory) * scale * 1e3;
}

/* ============================================================================
 * The replay
 * ========================================================================== */

enum tide_status tide_time_predict(const struct tide_graph *graph, const uint32_t *order,
                                   uint32_t n, const struct tide_device_profile *profile,
                                   struct tide_time_prediction *out, struct tide_error *err)
{
    memset(out, 0, sizeof(*out));
    double *finish = calloc(graph->n_nodes ? graph->n_nodes : 1, sizeof(*finish));
    if (!finish)
        return tide_error_set(err, TIDE_NOMEM, "time model: out of memory for %u nodes",
                              graph->n_nodes);
    double free_at[3] = {0};
    double *busy[3] = {&out->compute_ms, &out->h2d_ms, &out->d2h_ms};
    for (uint32_t p = 0; p < n; p++) {
        if (order[p] >= graph->n_nodes) {
            free(finish);
            memset(out, 0, sizeof(*out));
            return tide_error_set(err, TIDE_INVALID,
                                  "time model: position %u names node %u of a graph of %u", p,
                                  order[p], graph->n_nodes);
        }
        const struct tide_node *node = &graph->nodes[order[p]];
        int s = node->stream <= TIDE_STREAM_D2H ? node->stream : TIDE_STREAM_COMPUTE;
        bool copy = tide_op_info(node->op)->flags & TIDE_OP_F_MEMORY;
        double ms = tide_time_node_ms(profile, graph, node);
        if (profile->copies_share_compute) {
            /* One timeline: compute waits for every copy it runs in turn. */
            *busy[s] += ms;
            if (copy && s == TIDE_STREAM_H2D)
                out->stall_ms += ms;
            free_at[0] += ms;
            finish[order[p]] = free_at[0];
            out->step_ms = free_at[0];
            continue;
        }
        /* When its inputs are ready, and when the last memory op among them is. */
        double ready = 0, copied = 0;
        for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
            uint32_t u =
                i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
            if (u >= graph->n_nodes)
                continue;
            if (finish[u] > ready)
                ready = finish[u];
            if ((tide_op_info(graph->nodes[u].op)->flags & TIDE_OP_F_MEMORY) && finish[u] > copied)
                copied = finish[u];
        }
        double start = free_at[s] > ready ? free_at[s] : ready;
        /* Compute idle for a copy: from when it was free to when the copy was done. */
        if (s == TIDE_STREAM_COMPUTE && copied > free_at[s]) {
            double other = free_at[s];
            for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
                uint32_t u =
                    i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
                if (u < graph->n_nodes &&
                    !(tide_op_info(graph->nodes[u].op)->flags & TIDE_OP_F_MEMORY) &&
                    finish[u] > other)
                    other = finish[u];
            }
            if (copied > other)
                out->stall_ms += copied - other;
        }
        finish[order[p]] = start + ms;
        free_at[s] = start + ms;
        *busy[s] += ms;
        if (start + ms > out->step_ms)
            out->step_ms = start + ms;
    }
    free(finish);
    return TIDE_OK;
}
