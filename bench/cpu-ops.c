/* SPDX-License-Identifier: MIT */
/*
 * cpu-ops.c: tide-bench cpu-ops — the CPU backend's pooling and BatchNorm
 * kernels against oneDNN's, side by side, at the shapes of tide's models.
 *
 *   tide-bench cpu-ops [--threads T[,T...]] [--reps R] [--only SUBSTRING]
 *
 * Each case is one node (MaxPool2D, AvgPool2D, GlobalAvgPool, BatchNorm and
 * their gradients but MaxPool2DGrad) on random data, run through the CPU kernel table as the
 * executor runs it: the workspace from the table's workspace_bytes (so
 * oneDNN's primitives are made before the clock starts), then the kernel.
 * For each thread count, the two kernels (oneDNN forced with
 * tide_cpu_kernels_onednn_everywhere, and tide's own with oneDNN off)
 * alternate R times after a warm-up run each, and the line gives the
 * fastest run of each and their ratio: on a shared machine the fastest run
 * is the one least disturbed. The shapes: ResNet-38 (width 16, batch 16,
 * 32x32 images), ResNet-50 (width 64, batch 16, 224x224), the CNN's max
 * pools (batch 64, 28x28 images), and average pools of the sizes such a
 * network would have (no built-in model has one).
 * kernels/onednn/pool.c and norm.c choose by these figures
 * (docs/benchmarks.md, "oneDNN pooling and BatchNorm").
 *
 * Threads: the caller's, and the kernels' pool.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "graph/graph.h"
#include "kernels/kernels.h"

#define MAX_IO      5
#define MAX_ATTRS   8
#define MAX_THREADS 8

/* One node and its tensors. */
struct op {
    char name[64];
    struct tide_node node;
    struct tide_attr_value attrs[MAX_ATTRS];
    struct tide_edge edges[MAX_IO];
    struct tide_output outputs[MAX_IO];
    struct tide_node producers[MAX_IO];
    struct tide_output produced[MAX_IO];
    struct tide_tensor_view in[MAX_IO], out[MAX_IO];
    uint32_t n_in, n_out;
};

static void op_init(struct op *o, enum tide_op op, const char *name)
{
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "%s", name);
    const struct tide_op_info *info = tide_op_info(op);
    o->node.op = op;
    o->node.name = o->name;
    o->node.attrs = o->attrs;
    o->node.device = "";
    for (uint32_t k = 0; k < info->n_attrs && k < MAX_ATTRS; k++) {
        if (info->attrs[k].type == TIDE_ATTR_TYPE_FLOAT)
            o->attrs[k].f = info->attrs[k].default_float;
        else
            o->attrs[k].i = info->attrs[k].default_int;
    }
}

static void set_pair(struct op *o, int k, int64_t a, int64_t b)
{
    o->attrs[k].present = true;
    o->attrs[k].ints.n = 2;
    o->attrs[k].ints.v[0] = a;
    o->attrs[k].ints.v[1] = b;
}

/* A float tensor of random values in [lo, hi) (an input) or of 0xff bytes (an output). */
static struct tide_tensor_view tensor(int32_t rank, const int64_t *dims, float lo, float hi,
                                      bool random)
{
    struct tide_tensor_view v = {.dtype = TIDE_DTYPE_FLOAT32, .shape = tide_shape_make(rank, dims)};
    int64_t n = tide_shape_numel(&v.shape);
    v.nbytes = (uint64_t)n * sizeof(float);
    float *data = aligned_alloc(64, (v.nbytes + 63) / 64 * 64);
    if (!data) {
        fprintf(stderr, "tide-bench cpu-ops: out of memory for %" PRIu64 " bytes\n", v.nbytes);
        exit(1);
    }
    uint32_t state = 12345u + (uint32_t)n;
    for (int64_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        data[i] = random ? lo + (hi - lo) * (float)((state >> 8) * (1.0 / 16777216.0)) : 0.0f;
    }
    v.data = data;
    return v;
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static void add_in(struct op *o, int32_t rank, const int64_t *dims, float lo, float hi)
{
    o->in[o->n_in++] = tensor(rank, dims, lo, hi, true);
}

static void add_out(struct op *o, int32_t rank, const int64_t *dims)
{
    o->out[o->n_out++] = tensor(rank, dims, 0, 0, false);
}

/* An int32 output (MaxPool2D's argmax): the float tensor's bytes, the other dtype. */
static void add_out_int32(struct op *o, int32_t rank, const int64_t *dims)
{
    add_out(o, rank, dims);
    o->out[o->n_out - 1].dtype = TIDE_DTYPE_INT32;
}

static void op_free(struct op *o)
{
    for (uint32_t i = 0; i < o->n_in; i++)
        free(o->in[i].data);
    for (uint32_t i = 0; i < o->n_out; i++)
        free(o->out[i].data);
}

/* Runs o once with a fresh workspace of what the table asks; returns the kernel's ms. */
static double run_once(struct op *o)
{
    for (uint32_t i = 0; i < o->n_in; i++) {
        o->produced[i] = (struct tide_output){
            .dtype = TIDE_DTYPE_FLOAT32, .shape = o->in[i].shape, .nbytes = o->in[i].nbytes};
        o->producers[i] = (struct tide_node){.op = TIDE_OP_PLACEHOLDER,
                                             .name = "producer",
                                             .n_outputs = 1,
                                             .outputs = &o->produced[i]};
        o->edges[i] = (struct tide_edge){i, 0};
    }
    for (uint32_t i = 0; i < o->n_out; i++)
        o->outputs[i] = (struct tide_output){
            .dtype = o->out[i].dtype, .shape = o->out[i].shape, .nbytes = o->out[i].nbytes};
    o->node.n_inputs = o->n_in;
    o->node.inputs = o->edges;
    o->node.n_outputs = o->n_out;
    o->node.outputs = o->outputs;
    struct tide_graph graph = {.nodes = o->producers, .n_nodes = o->n_in};
    uint64_t ws = tide_cpu_kernels.workspace_bytes(NULL, &graph, &o->node);
    void *workspace = ws ? aligned_alloc(64, (ws + 63) / 64 * 64) : NULL;
    if (ws && workspace)
        memset(workspace, 0, ws);
    struct tide_kernel_args args = {.node = &o->node,
                                    .n_inputs = o->n_in,
                                    .inputs = o->in,
                                    .n_outputs = o->n_out,
                                    .outputs = o->out,
                                    .workspace = workspace,
                                    .workspace_bytes = workspace ? ws : 0};
    struct tide_error err = {0};
    double t0 = tide_bench_now_ms();
    enum tide_status st = tide_cpu_kernels.fn[o->node.op](&args, &err);
    double t = tide_bench_now_ms() - t0;
    free(workspace);
    if (st != TIDE_OK) {
        fprintf(stderr, "tide-bench cpu-ops: %s: %s\n", o->name, err.message);
        exit(1);
    }
    return t;
}

/* The fastest of reps runs of o through oneDNN (forced) and through tide's own kernel. */
static void measure(struct op *o, int threads, int reps, double *onednn_ms, double *own_ms,
                    bool *onednn_ran)
{
    tide_cpu_kernels_set_threads(threads);
    *onednn_ms = *own_ms = 1e300;
    uint64_t before = tide_cpu_kernels_onednn_runs(o->node.op);
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up (primitives made, pages touched) */
        for (int which = 0; which < 2; which++) {
            tide_cpu_kernels_use_onednn(which == 0);
            tide_cpu_kernels_onednn_everywhere(which == 0);
            double t = run_once(o);
            double *best = which == 0 ? onednn_ms : own_ms;
            if (r >= 0 && t < *best)
                *best = t;
        }
    }
    *onednn_ran = tide_cpu_kernels_onednn_runs(o->node.op) - before == (uint64_t)reps + 1;
    tide_cpu_kernels_use_onednn(true);
    tide_cpu_kernels_onednn_everywhere(false);
}

/* Builds case i of the table below into o; false past the last. */
static bool build_case(int i, struct op *o)
{
    /* BatchNorm shapes: ResNet-38 (w16, b16, 32x32), then ResNet-50 (w64, b16, 224x224). */
    static const int64_t bn[][4] = {
        {16, 16, 32, 32},   {16, 64, 32, 32},  {16, 32, 16, 16},   {16, 128, 16, 16},
        {16, 64, 8, 8},     {16, 256, 8, 8},   {16, 128, 4, 4},    {16, 512, 4, 4},
        {16, 64, 112, 112}, {16, 64, 56, 56},  {16, 256, 56, 56},  {16, 128, 28, 28},
        {16, 512, 28, 28},  {16, 256, 14, 14}, {16, 1024, 14, 14}, {16, 512, 7, 7},
        {16, 2048, 7, 7},
    };
    /* Global pools: ResNet-38's and ResNet-50's last feature maps. */
    static const int64_t global[][4] = {{16, 512, 4, 4}, {16, 2048, 7, 7}};
    /* Average pools: x [N, C, H, W], window, stride, pad. */
    static const int64_t avg[][7] = {
        {16, 64, 32, 32, 2, 2, 0}, {16, 64, 32, 32, 3, 1, 1}, {16, 256, 14, 14, 3, 2, 1},
        {16, 512, 7, 7, 3, 1, 1},  {16, 16, 8, 8, 2, 2, 0},   {16, 3, 32, 32, 2, 2, 0},
        {2, 3, 8, 8, 3, 2, 1},     {2, 3, 5, 5, 3, 1, 1},
    };
    /*
     * Max pools: the CNN's two (2x2 stride 2, batch 64), ResNet-50's stem (3x3 s2 p1), and
     * overlapping, small and 3-channel windows.
     */
    static const int64_t max[][7] = {
        {64, 32, 28, 28, 2, 2, 0}, {64, 64, 14, 14, 2, 2, 0}, {16, 64, 112, 112, 3, 2, 1},
        {16, 64, 56, 56, 3, 2, 1}, {16, 32, 16, 16, 3, 1, 1}, {16, 16, 32, 32, 2, 2, 0},
        {16, 3, 32, 32, 3, 2, 1},
    };
    const int n_bn = (int)(sizeof(bn) / sizeof(bn[0])), n_global = 2;
    const int n_avg = (int)(sizeof(avg) / sizeof(avg[0])),
              n_max = (int)(sizeof(max) / sizeof(max[0]));
    char name[64];
    if (i < 2 * n_bn) {
        const int64_t *d = bn[i / 2];
        bool grad = i % 2;
        snprintf(name, sizeof(name), "%s %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64,
                 grad ? "BatchNormGrad" : "BatchNorm", d[0], d[1], d[2], d[3]);
        op_init(o, grad ? TIDE_OP_BATCH_NORM_GRAD : TIDE_OP_BATCH_NORM, name);
        if (grad)
            add_in(o, 4, d, -1, 1); /* dy */
        add_in(o, 4, d, 2.5f, 3.5f);
        add_in(o, 1, DIMS(d[1]), 0.5f, 1.5f);  /* gamma */
        add_in(o, 1, DIMS(d[1]), -0.1f, 0.1f); /* beta, or the mean */
        if (grad)
            add_in(o, 1, DIMS(d[1]), 1.0f, 2.0f); /* inv_std */
        add_out(o, 4, d);
        add_out(o, 1, DIMS(d[1]));
        add_out(o, 1, DIMS(d[1]));
        return true;
    }
    i -= 2 * n_bn;
    if (i < 2 * n_global) {
        const int64_t *d = global[i / 2];
        bool grad = i % 2;
        snprintf(name, sizeof(name), "%s %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64,
                 grad ? "GlobalAvgPoolGrad" : "GlobalAvgPool", d[0], d[1], d[2], d[3]);
        op_init(o, grad ? TIDE_OP_GLOBAL_AVG_POOL_GRAD : TIDE_OP_GLOBAL_AVG_POOL, name);
        if (grad) {
            o->attrs[TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape].present = true;
            o->attrs[TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape].shape = tide_shape_make(4, d);
            add_in(o, 2, DIMS(d[0], d[1]), -1, 1);
            add_out(o, 4, d);
        } else {
            add_in(o, 4, d, -1, 1);
            add_out(o, 2, DIMS(d[0], d[1]));
        }
        return true;
    }
    i -= 2 * n_global;
    if (i < 2 * n_avg) {
        const int64_t *a = avg[i / 2];
        bool grad = i % 2;
        int64_t oh = (a[2] + 2 * a[6] - a[4]) / a[5] + 1, ow = (a[3] + 2 * a[6] - a[4]) / a[5] + 1;
        snprintf(name, sizeof(name),
                 "%s %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " k%" PRId64 "s%" PRId64
                 "p%" PRId64,
                 grad ? "AvgPool2DGrad" : "AvgPool2D", a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        op_init(o, grad ? TIDE_OP_AVG_POOL2D_GRAD : TIDE_OP_AVG_POOL2D, name);
        int k = grad ? TIDE_ATTR_AVG_POOL2D_GRAD_ksize : TIDE_ATTR_AVG_POOL2D_ksize;
        int s = grad ? TIDE_ATTR_AVG_POOL2D_GRAD_strides : TIDE_ATTR_AVG_POOL2D_strides;
        int p = grad ? TIDE_ATTR_AVG_POOL2D_GRAD_pads : TIDE_ATTR_AVG_POOL2D_pads;
        set_pair(o, k, a[4], a[4]);
        set_pair(o, s, a[5], a[5]);
        set_pair(o, p, a[6], a[6]);
        if (grad) {
            o->attrs[TIDE_ATTR_AVG_POOL2D_GRAD_input_shape].present = true;
            o->attrs[TIDE_ATTR_AVG_POOL2D_GRAD_input_shape].shape = tide_shape_make(4, a);
            add_in(o, 4, DIMS(a[0], a[1], oh, ow), -1, 1);
            add_out(o, 4, a);
        } else {
            add_in(o, 4, a, -1, 1);
            add_out(o, 4, DIMS(a[0], a[1], oh, ow));
        }
        return true;
    }
    i -= 2 * n_avg;
    if (i < n_max) {
        const int64_t *a = max[i];
        int64_t oh = (a[2] + 2 * a[6] - a[4]) / a[5] + 1, ow = (a[3] + 2 * a[6] - a[4]) / a[5] + 1;
        snprintf(name, sizeof(name),
                 "MaxPool2D %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " k%" PRId64 "s%" PRId64
                 "p%" PRId64,
                 a[0], a[1], a[2], a[3], a[4], a[5], a[6]);
        op_init(o, TIDE_OP_MAX_POOL2D, name);
        set_pair(o, TIDE_ATTR_MAX_POOL2D_ksize, a[4], a[4]);
        set_pair(o, TIDE_ATTR_MAX_POOL2D_strides, a[5], a[5]);
        set_pair(o, TIDE_ATTR_MAX_POOL2D_pads, a[6], a[6]);
        add_in(o, 4, a, -1, 1);
        add_out(o, 4, DIMS(a[0], a[1], oh, ow));
        add_out_int32(o, 4, DIMS(a[0], a[1], oh, ow)); /* argmax */
        return true;
    }
    return false;
}

int tide_bench_cpu_ops(int argc, char **argv)
{
    int threads[MAX_THREADS] = {1, 2}, n_threads = 2, reps = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
            n_threads = 0;
            for (char *s = argv[++i]; *s && n_threads < MAX_THREADS; s++) {
                threads[n_threads++] = (int)strtol(s, &s, 10);
                if (threads[n_threads - 1] < 1 || threads[n_threads - 1] > 64 ||
                    (*s && *s != ',')) {
                    fprintf(stderr, "tide-bench cpu-ops: --threads wants 1 to 64, "
                                    "comma-separated\n");
                    return 2;
                }
                if (!*s)
                    break;
            }
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            reps = atoi(argv[++i]);
            if (reps < 1 || reps > 1000) {
                fprintf(stderr, "tide-bench cpu-ops: --reps wants 1 to 1000\n");
                return 2;
            }
        } else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "usage: tide-bench cpu-ops [--threads T[,T...]] [--reps R] "
                            "[--only SUBSTRING]\n");
            return 2;
        }
    }
    if (!tide_cpu_kernels_onednn_available()) {
        fprintf(stderr, "tide-bench cpu-ops: no oneDNN (not built with it, or "
                        "TIDE_CPU_ONEDNN=0)\n");
        return 1;
    }
    printf("%-40s %7s %10s %10s %7s\n", "case", "threads", "tide ms", "oneDNN ms", "ratio");
    struct op o;
    for (int i = 0; build_case(i, &o); i++) {
        if (only && !strstr(o.name, only)) {
            op_free(&o);
            continue;
        }
        for (int t = 0; t < n_threads; t++) {
            double onednn_ms, own_ms;
            bool ran;
            measure(&o, threads[t], reps, &onednn_ms, &own_ms, &ran);
            if (!ran)
                printf("%-40s %7d %10.3f %10s %7s\n", o.name, threads[t], own_ms, "none", "-");
            else
                printf("%-40s %7d %10.3f %10.3f %7.2f\n", o.name, threads[t], own_ms, onednn_ms,
                       onednn_ms / own_ms);
            fflush(stdout);
        }
        op_free(&o);
    }
    tide_cpu_kernels_set_threads(0);
    return 0;
}
