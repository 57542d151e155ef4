/* SPDX-License-Identifier: MIT */
/*
 * calibrate.c: the CPU backend's own kernels timed once, per op, against
 * the time model (tide__profile_calibrate_ops, runtime/profile.h).
 *
 * The time model (swapper/timemodel.h) costs a kernel as the larger of its
 * FLOPs over the profile's GEMM rate and its bytes over the streaming
 * bandwidth. The CPU backend's kernels miss both by an amount that depends
 * on the op more than on the shape: BatchNorm and its gradient walk each
 * channel's map more than once with per-channel reductions and take a few
 * times the streaming-add time of their bytes (2.5 to 3.5 times before
 * their kernels prefetched each channel's runs), and the convolutions'
 * patch matrices and three GEMM shapes reach other fractions of the one
 * sgemm shape the profile measures. One rate for every op under-predicted
 * ResNet-38's step by a quarter to a third (docs/benchmarks.md).
 *
 * So the local profile runs the training step of one residual block —
 * Conv2D, BatchNorm, Relu, Conv2D, BatchNorm, Add, Relu, ReduceMean, their
 * gradients and Momentum updates, built with the graph library and
 * autodiff as a job's graph is — on the backend, at the first and last
 * stage shapes of the CIFAR ResNets (batch 16; 16 channels of 32 x 32 and
 * 64 of 8 x 8; 3 x 3 filters), and keeps per op the ratio of the measured
 * time to the model's, summed over both (profile->op_scale), which
 * tide_time_node_ms multiplies in. Ops the blocks lack, and those with too
 * little work in them to time, keep the model as it is (scale 0: 1).
 *
 * Each kernel is timed as the process's CPU time from its launch to the
 * stream's sync, the best of RUNS: the work of every thread the backend's
 * pool lends it, summed, which a busy machine disturbs far less than wall
 * time (a kernel that waits for a core costs no CPU time meanwhile). The
 * profile's other figures are single-thread rates, so the model predicts a
 * step's CPU time, as before. About 80 ms of CPU, once per process.
 *
 * Threads: the caller's, and the backend's stream worker and pool while a
 * kernel runs; call it while nothing else in the process runs kernels, or
 * their CPU time is counted too (profile.c does so once, at start).
 */
#include "runtime/profile.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/autodiff.h"

#define BATCH 16
#define RUNS  3
#define ALIGN 256

/*
 * The blocks timed: the first and last stages of the CIFAR ResNets, 16
 * channels of 32 x 32 and 64 of 8 x 8 (the same FLOPs per convolution on a
 * quarter of the elements): small maps cost the kernels more per element.
 */
static const struct {
    int64_t channels, side;
} shapes[] = {{16, 32}, {64, 8}};

/* The least modelled time, summed over an op's nodes, that gets the op a scale. */
#define MIN_MODEL_MS 0.02

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ============================================================================
 * The block
 * ========================================================================== */

static enum tide_status add(struct tide_graph *g, enum tide_op op, const char *name,
                            const struct tide_edge *inputs, uint32_t n, uint32_t *id,
                            struct tide_error *err)
{
    enum tide_status st = tide_graph_add_node(g, op, name, id, err);
    if (st == TIDE_OK && n)
        st = tide_graph_set_inputs(g, *id, inputs, n, err);
    return st;
}

static enum tide_status variable(struct tide_graph *g, const char *name, int32_t rank,
                                 const int64_t *dims, uint32_t *id, struct tide_error *err)
{
    enum tide_status st = add(g, TIDE_OP_VARIABLE, name, NULL, 0, id, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape shape = {.rank = rank};
    memcpy(shape.dims, dims, (size_t)rank * sizeof(*dims));
    tide_attr_set_dtype(g, *id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, *id, TIDE_ATTR_VARIABLE_shape, &shape);
    return TIDE_OK;
}

/* Conv2D (3 x 3, stride 1, pad 1) of x by a new filter, BatchNorm; *out is the normalised map. */
static enum tide_status conv_bn(struct tide_graph *g, const char *prefix, struct tide_edge x,
                                int64_t n, struct tide_edge *out, struct tide_error *err)
{
    const int64_t filter[] = {n, n, 3, 3}, channels[] = {n};
    static const int64_t ones[] = {1, 1};
    char name[64];
    uint32_t w, gamma, beta, conv, bn;
    snprintf(name, sizeof(name), "%s/w", prefix);
    enum tide_status st = variable(g, name, 4, filter, &w, err);
    snprintf(name, sizeof(name), "%s/gamma", prefix);
    if (st == TIDE_OK)
        st = variable(g, name, 1, channels, &gamma, err);
    snprintf(name, sizeof(name), "%s/beta", prefix);
    if (st == TIDE_OK)
        st = variable(g, name, 1, channels, &beta, err);
    snprintf(name, sizeof(name), "%s/conv", prefix);
    if (st == TIDE_OK)
        st = add(g, TIDE_OP_CONV2D, name, (struct tide_edge[]){x, {w, 0}}, 2, &conv, err);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_strides, ones, 2);
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_pads, ones, 2);
    snprintf(name, sizeof(name), "%s/bn", prefix);
    st = add(g, TIDE_OP_BATCH_NORM, name, (struct tide_edge[]){{conv, 0}, {gamma, 0}, {beta, 0}}, 3,
             &bn, err);
    *out = (struct tide_edge){bn, 0};
    return st;
}

/* One residual block of channels maps side x side and its training step (Momentum), inferred. */
static enum tide_status build_block(struct tide_graph *g, int64_t channels, int64_t side,
                                    struct tide_error *err)
{
    const int64_t image[] = {BATCH, channels, side, side};
    uint32_t x, relu1, sum, relu2, loss;
    struct tide_edge bn1, bn2;
    enum tide_status st = add(g, TIDE_OP_PLACEHOLDER, "x", NULL, 0, &x, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape shape = {.rank = 4};
    memcpy(shape.dims, image, sizeof(image));
    tide_attr_set_dtype(g, x, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, x, TIDE_ATTR_PLACEHOLDER_shape, &shape);
    st = conv_bn(g, "a", (struct tide_edge){x, 0}, channels, &bn1, err);
    if (st == TIDE_OK)
        st = add(g, TIDE_OP_RELU, "a/relu", &bn1, 1, &relu1, err);
    if (st == TIDE_OK)
        st = conv_bn(g, "b", (struct tide_edge){relu1, 0}, channels, &bn2, err);
    if (st == TIDE_OK)
        st = add(g, TIDE_OP_ADD, "sum", (struct tide_edge[]){bn2, {relu1, 0}}, 2, &sum, err);
    if (st == TIDE_OK)
        st = add(g, TIDE_OP_RELU, "relu", &(struct tide_edge){sum, 0}, 1, &relu2, err);
    if (st == TIDE_OK)
        st = add(g, TIDE_OP_REDUCE_MEAN, "loss", &(struct tide_edge){relu2, 0}, 1, &loss, err);
    if (st == TIDE_OK)
        st = tide_graph_infer(g, NULL, err);
    if (st != TIDE_OK)
        return st;
    struct tide_train_options train = {.loss = "loss",
                                       .optimizer = TIDE_OPTIMIZER_MOMENTUM,
                                       .learning_rate = 0.01f,
                                       .momentum = 0.9f};
    struct tide_autodiff_result result;
    st = tide_autodiff(g, &train, &result, err);
    if (st == TIDE_OK)
        tide_autodiff_result_release(&result);
    return st;
}

/* ============================================================================
 * Running it
 * ========================================================================== */

static uint64_t align_up(uint64_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* What one pass over the block needs: an output's place in the arena, per node and output. */
struct layout {
    uint64_t *offset; /* per node: its first output's offset; later outputs follow, aligned */
    uint64_t workspace_at, total;
};

static void *view_data(void *base, const struct layout *l, const struct tide_graph *g,
                       struct tide_edge e)
{
    uint64_t at = l->offset[e.node];
    for (uint32_t k = 0; k < e.output; k++)
        at += align_up(g->nodes[e.node].outputs[k].nbytes);
    return (char *)base + at;
}

static struct tide_tensor_view view(void *base, const struct layout *l, const struct tide_graph *g,
                                    struct tide_edge e)
{
    const struct tide_output *o = &g->nodes[e.node].outputs[e.output];
    return (struct tide_tensor_view){.data = view_data(base, l, g, e),
                                     .dtype = o->dtype,
                                     .shape = o->shape,
                                     .nbytes = o->nbytes};
}

#define MAX_IO 8

/* Launches node v and waits for it; *ms gets the process CPU time it took. */
static enum tide_status run_node(struct tide_backend *b, struct tide_stream *s, void *base,
                                 const struct layout *l, const struct tide_graph *g, uint32_t v,
                                 double *ms, struct tide_error *err)
{
    static const uint64_t step = 1;
    static const bool training = true;
    const struct tide_node *node = &g->nodes[v];
    struct tide_tensor_view ins[MAX_IO], outs[MAX_IO];
    if (node->n_inputs > MAX_IO || node->n_outputs > MAX_IO)
        return tide_error_set(err, TIDE_INTERNAL,
                              "device profile: node \"%s\" has %u inputs and %u outputs, "
                              "the calibration handles %d",
                              node->name, node->n_inputs, node->n_outputs, MAX_IO);
    for (uint32_t i = 0; i < node->n_inputs; i++)
        ins[i] = view(base, l, g, node->inputs[i]);
    for (uint32_t k = 0; k < node->n_outputs; k++)
        outs[k] = view(base, l, g, (struct tide_edge){v, k});
    uint64_t ws = tide_backend_workspace_bytes(b, g, node);
    struct tide_kernel_args args = {.node = node,
                                    .n_inputs = node->n_inputs,
                                    .inputs = ins,
                                    .n_outputs = node->n_outputs,
                                    .outputs = outs,
                                    .workspace = ws ? (char *)base + l->workspace_at : NULL,
                                    .workspace_bytes = ws,
                                    .step = &step,
                                    .training = &training};
    double t0 = cpu_ms();
    enum tide_status st = tide_backend_launch(b, s, &args);
    /* Always drain: the arguments live on this stack frame. */
    enum tide_status sync = tide_backend_stream_sync(b, s, err);
    *ms = cpu_ms() - t0;
    if (st != TIDE_OK)
        return tide_error_set(err, st, "device profile: launching node \"%s\" failed: %s",
                              node->name, tide_strerror(st));
    return sync;
}

/* Places every output, then the largest workspace, in one arena. */
static enum tide_status lay_out(struct tide_backend *b, const struct tide_graph *g,
                                struct layout *l, struct tide_error *err)
{
    l->offset = calloc((size_t)g->n_nodes + 1, sizeof(*l->offset));
    if (!l->offset)
        return tide_error_set(err, TIDE_NOMEM, "device profile: out of memory");
    uint64_t at = 0, workspace = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        const struct tide_node *node = &g->nodes[v];
        l->offset[v] = at;
        for (uint32_t k = 0; k < node->n_outputs; k++)
            at += align_up(node->outputs[k].nbytes);
        uint64_t ws = tide_backend_workspace_bytes(b, g, node);
        workspace = ws > workspace ? ws : workspace;
    }
    l->workspace_at = at;
    l->total = at + align_up(workspace) + ALIGN;
    return TIDE_OK;
}

/* Small values of both signs everywhere (Relu and its gradient see both branches). */
static void fill(float *data, uint64_t bytes)
{
    uint32_t state = 12345;
    for (uint64_t i = 0; i < bytes / sizeof(float); i++) {
        state = state * 1664525u + 1013904223u;
        data[i] = ((float)(state >> 8) / 16777216.0f - 0.5f) * 0.25f;
    }
}

/*
 * Runs the block of `channels` channels on side x side maps and adds, per
 * op, the model's time on plain (no scales, no launch) to model[] and the
 * measured time to measured[].
 */
static enum tide_status calibrate_block(struct tide_backend *backend,
                                        const struct tide_device_profile *plain, int64_t channels,
                                        int64_t side, double *model, double *measured,
                                        struct tide_error *err)
{
    struct tide_graph *g = tide_graph_new();
    struct layout l = {0};
    struct tide_stream *s = NULL;
    void *base = NULL;
    uint32_t *order = NULL;
    double *best = NULL;
    if (!g)
        return tide_error_set(err, TIDE_NOMEM, "device profile: out of memory");
    enum tide_status st = build_block(g, channels, side, err);
    if (st == TIDE_OK) {
        order = malloc(((size_t)g->n_nodes + 1) * sizeof(*order));
        best = malloc(((size_t)g->n_nodes + 1) * sizeof(*best));
        if (!order || !best)
            st = tide_error_set(err, TIDE_NOMEM, "device profile: out of memory");
    }
    if (st == TIDE_OK)
        st = tide_graph_dfs_order(g, order, err);
    if (st == TIDE_OK)
        st = lay_out(backend, g, &l, err);
    /*
     * The CPU backend's device memory is host memory: the block's tensors
     * live outside the backend's emulated device, whose budget may be a
     * job's (a session's backend) and far smaller.
     */
    if (st == TIDE_OK && !(base = aligned_alloc(ALIGN, l.total)))
        st = tide_error_set(err, TIDE_NOMEM, "device profile: out of memory for %" PRIu64 " bytes",
                            l.total);
    if (st == TIDE_OK) {
        fill(base, l.total);
        st = tide_backend_stream_new(backend, &s, err);
    }
    for (int r = 0; r <= RUNS && st == TIDE_OK; r++) { /* run 0 warms up */
        for (uint32_t p = 0; p < g->n_nodes && st == TIDE_OK; p++) {
            uint32_t v = order[p];
            if (tide_op_info(g->nodes[v].op)->flags & TIDE_OP_F_SOURCE)
                continue;
            double ms = 0;
            st = run_node(backend, s, base, &l, g, v, &ms, err);
            if (r == 1 || (r > 1 && ms < best[v]))
                best[v] = ms;
        }
    }
    if (st == TIDE_OK) {
        /*
         * The cheapest kernel's time (the gradient of a bias, a Reshape: no
         * work to speak of) is the round trip of a launch and a sync, which
         * every timing here includes and a step, queueing its kernels back
         * to back (0.1 us each), does not pay; it comes off every kernel's.
         */
        double round_trip = -1;
        for (uint32_t v = 0; v < g->n_nodes; v++) {
            if (!(tide_op_info(g->nodes[v].op)->flags & TIDE_OP_F_SOURCE) &&
                (round_trip < 0 || best[v] < round_trip))
                round_trip = best[v];
        }
        for (uint32_t v = 0; v < g->n_nodes; v++) {
            const struct tide_node *node = &g->nodes[v];
            if (tide_op_info(node->op)->flags & TIDE_OP_F_SOURCE)
                continue;
            model[node->op] += tide_time_node_ms(plain, g, node);
            measured[node->op] += best[v] > round_trip ? best[v] - round_trip : 0;
        }
    }
    if (s)
        tide_backend_stream_free(backend, s);
    free(base);
    free(l.offset);
    free(order);
    free(best);
    tide_graph_free(g);
    return st;
}

enum tide_status tide__profile_calibrate_ops(struct tide_backend *backend,
                                             struct tide_device_profile *profile,
                                             struct tide_error *err)
{
    struct tide_device_profile plain = *profile;
    memset(plain.op_scale, 0, sizeof(plain.op_scale));
    plain.launch_us = 0;
    double model[TIDE_OP_COUNT] = {0}, measured[TIDE_OP_COUNT] = {0};
    enum tide_status st = TIDE_OK;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]) && st == TIDE_OK; i++)
        st = calibrate_block(backend, &plain, shapes[i].channels, shapes[i].side, model, measured,
                             err);
    /* An op with too little work to time (the blocks' tiny tensors) keeps the model's time. */
    for (int op = 0; op < TIDE_OP_COUNT && st == TIDE_OK; op++) {
        if (model[op] >= MIN_MODEL_MS && measured[op] > 0)
            profile->op_scale[op] = measured[op] / model[op];
    }
    return st;
}
