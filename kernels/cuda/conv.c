/* SPDX-License-Identifier: MIT */
/*
 * conv.c: the CUDA kernels for Conv2D and its gradients Conv2DBackpropInput
 * and Conv2DBackpropFilter, NCHW input x [N, C, H, W], KCRS filter
 * w [K, C / G, R, S] (G channel groups: the filter descriptor holds C / G
 * channels and the convolution descriptor the group count), output
 * y [N, K, OH, OW], symmetric zero padding, through cuDNN's convolution API
 * (cudnnConvolutionForward, BackwardData, BackwardFilter: the cudnn_cnn
 * library of cuDNN 9).
 *
 * Determinism and precision. Each op takes the first algorithm of cuDNN's
 * heuristic ranking for its shape (cudnnGetConvolution*Algorithm_v7) that
 * cuDNN marks CUDNN_DETERMINISTIC and whose workspace is at most the largest
 * of the node's tensors, and falls back to a fixed list when none does
 * (conv_choose). Never an algorithm that accumulates with atomics. The
 * choice depends only on the shapes, the GPU and cuDNN, so workspace_bytes
 * (at planning time, with the backend's planning handle) and the launch
 * (with the stream's handle) agree; it is cached per shape, math and device.
 * The math type follows the node's "math" attribute: fp32 (the default) is
 * CUDNN_FMA_MATH, plain FP32 without tensor cores, so the results stay within
 * float rounding of the CPU's; tf32 lets cuDNN multiply on TF32 tensor cores
 * (10-bit mantissas, FP32 sums): CUDNN_DEFAULT_MATH for the ranking, then the
 * math type the chosen algorithm runs with, never one that converts down to
 * FP16 or BF16. The choice is made the same way, so still the same bits on
 * every run. tf32 also allows a workspace of 4x the node's largest tensor,
 * not 1x: on the H200 that is cuDNN's first choice for every ResNet-50
 * shape, and together they take its step from 38.6 to about 17 ms
 * (docs/benchmarks.md).
 *
 * Descriptors are made and destroyed per call: host work of a few
 * microseconds against kernels of much more.
 *
 * One exception: under fp32, the filter gradient of a depthwise convolution
 * (a filter per channel) with at least 1,024 taps runs tide's own kernel
 * (conv.cu), as cuDNN's deterministic FP32 algorithms are slow for most such
 * shapes (conv_own_kernel).
 */
#include "kernels/cuda/cuda-impl.h"

#include "common/log.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <string.h>

/* The shared geometry (kernels/check.c) plus cuDNN's own limits. */
static enum tide_status conv_setup(const struct tide_node *node, const struct tide_shape *x,
                                   const struct tide_shape *w, const struct tide_shape *y,
                                   struct tide__kernel_conv *cv, struct tide_error *err)
{
    tide__kernel_conv_setup(node, x, w, y, cv);
    /* cuDNN's legacy API takes int dims and indexes each tensor with 32 bits. */
    int64_t nx = tide_shape_numel(x), nw = tide_shape_numel(w), ny = tide_shape_numel(y);
    if (nx > INT_MAX || nw > INT_MAX || ny > INT_MAX)
        return tide_node_error(err, TIDE_LIMIT, node,
                               "a tensor of %" PRId64 ", %" PRId64 " or %" PRId64
                               " elements exceeds what cuDNN's convolution can index",
                               nx, nw, ny);
    /* Its pads, strides and dilations are ints too (a dilation of a single tap is 1 here). */
    if (cv->ph > INT_MAX || cv->pw > INT_MAX || cv->sh > INT_MAX || cv->sw > INT_MAX ||
        cv->dh > INT_MAX || cv->dw > INT_MAX)
        return tide_node_error(err, TIDE_LIMIT, node,
                               "pads [%" PRId64 ", %" PRId64 "], strides [%" PRId64 ", %" PRId64
                               "] or dilations [%" PRId64 ", %" PRId64
                               "] exceed what cuDNN's convolution takes (%d)",
                               cv->ph, cv->pw, cv->sh, cv->sw, cv->dh, cv->dw, INT_MAX);
    return TIDE_OK;
}

/* Whether the convolution has no work for cuDNN (an empty tensor: the callers handle it). */
static bool conv_empty(const struct tide__kernel_conv *cv)
{
    return cv->n == 0 || cv->c == 0 || cv->h == 0 || cv->w == 0 || cv->k == 0 || cv->oh == 0 ||
           cv->ow == 0;
}

/* ============================================================================
 * Descriptors and algorithms
 * ========================================================================== */

struct conv_desc {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

static void conv_desc_destroy(struct conv_desc *d)
{
    /* Destroying a NULL descriptor is a no-op in cuDNN; the results carry nothing to act on. */
    if (d->conv)
        (void)TIDE_CUDNN_CHECK(NULL, cudnnDestroyConvolutionDescriptor(d->conv));
    if (d->w)
        (void)TIDE_CUDNN_CHECK(NULL, cudnnDestroyFilterDescriptor(d->w));
    if (d->y)
        (void)TIDE_CUDNN_CHECK(NULL, cudnnDestroyTensorDescriptor(d->y));
    if (d->x)
        (void)TIDE_CUDNN_CHECK(NULL, cudnnDestroyTensorDescriptor(d->x));
}

/* Describes a non-empty convolution; on failure, destroys what it made. */
static enum tide_status conv_desc_make(const struct tide__kernel_conv *cv, enum tide_math math,
                                       struct conv_desc *d, struct tide_error *err)
{
    *d = (struct conv_desc){0};
    enum tide_status st = TIDE_CUDNN_CHECK(err, cudnnCreateTensorDescriptor(&d->x));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnCreateTensorDescriptor(&d->y));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnCreateFilterDescriptor(&d->w));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnCreateConvolutionDescriptor(&d->conv));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW,
                                                              CUDNN_DATA_FLOAT, (int)cv->n,
                                                              (int)cv->c, (int)cv->h, (int)cv->w));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(
            err, cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, (int)cv->n,
                                            (int)cv->k, (int)cv->oh, (int)cv->ow));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(
            err, cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, (int)cv->k,
                                            (int)(cv->c / cv->group), (int)cv->r, (int)cv->s));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(
            err, cudnnSetConvolution2dDescriptor(d->conv, (int)cv->ph, (int)cv->pw, (int)cv->sh,
                                                 (int)cv->sw, (int)cv->dh, (int)cv->dw,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnSetConvolutionGroupCount(d->conv, (int)cv->group));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnSetConvolutionMathType(d->conv, math == TIDE_MATH_TF32
                                                                            ? CUDNN_DEFAULT_MATH
                                                                            : CUDNN_FMA_MATH));
    if (st != TIDE_OK)
        conv_desc_destroy(d);
    return st;
}

/*
 * The fallback lists, each in order: deterministic algorithms only, never
 * those that accumulate with atomics (BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0
 * and _3).
 */
static const cudnnConvolutionFwdAlgo_t fwd_algos[] = {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
};
static const cudnnConvolutionBwdDataAlgo_t bwd_data_algos[] = {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1,
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
};
static const cudnnConvolutionBwdFilterAlgo_t bwd_filter_algos[] = {
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1,
    CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Algorithm i of op's fallback list (a cudnnConvolution*Algo_t), or -1 past its end. */
static int conv_fallback(enum tide_op op, size_t i)
{
    switch (op) {
    case TIDE_OP_CONV2D:
        return i < COUNT(fwd_algos) ? (int)fwd_algos[i] : -1;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        return i < COUNT(bwd_data_algos) ? (int)bwd_data_algos[i] : -1;
    default:
        return i < COUNT(bwd_filter_algos) ? (int)bwd_filter_algos[i] : -1;
    }
}

/* cuDNN's workspace query for algorithm algo (a cudnnConvolution*Algo_t) of node's op. */
static cudnnStatus_t conv_query(cudnnHandle_t handle, const struct tide_node *node,
                                const struct conv_desc *d, int algo, size_t *workspace)
{
    switch (node->op) {
    case TIDE_OP_CONV2D:
        return cudnnGetConvolutionForwardWorkspaceSize(handle, d->x, d->w, d->conv, d->y,
                                                       (cudnnConvolutionFwdAlgo_t)algo, workspace);
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        return cudnnGetConvolutionBackwardDataWorkspaceSize(
            handle, d->w, d->y, d->conv, d->x, (cudnnConvolutionBwdDataAlgo_t)algo, workspace);
    default:
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(
            handle, d->x, d->y, d->conv, d->w, (cudnnConvolutionBwdFilterAlgo_t)algo, workspace);
    }
}

/* One algorithm of cuDNN's ranking: the fields of its cudnnConvolution*AlgoPerf_t that matter. */
struct conv_ranked {
    int algo;
    cudnnStatus_t status;
    cudnnDeterminism_t determinism;
    cudnnMathType_t math_type; /* what the algorithm runs with: the descriptor must say it */
    size_t memory;
};

#define CONV_RANKED_MAX 16

/*
 * cuDNN's heuristic ranking of node's algorithms for d, fastest first
 * (cudnnGetConvolution*Algorithm_v7: a model of the GPU, nothing is run or
 * timed, so every process on the same GPU and cuDNN gets the same ranking).
 * Returns how many it filled; 0 when the query fails.
 */
static int conv_rank(cudnnHandle_t handle, const struct tide_node *node, const struct conv_desc *d,
                     struct conv_ranked *out)
{
    int n = 0;
/* Runs QUERY (a cudnnGetConvolution*Algorithm_v7) with its descriptors; copies its PERF_Ts. */
#define CONV_RANK(PERF_T, QUERY, ...)                                                              \
    do {                                                                                           \
        PERF_T perf[CONV_RANKED_MAX];                                                              \
        if (QUERY(handle, __VA_ARGS__, CONV_RANKED_MAX, &n, perf) != CUDNN_STATUS_SUCCESS)         \
            return 0;                                                                              \
        for (int i = 0; i < n && i < CONV_RANKED_MAX; i++)                                         \
            out[i] = (struct conv_ranked){(int)perf[i].algo, perf[i].status, perf[i].determinism,  \
                                          perf[i].mathType, perf[i].memory};                       \
    } while (0)
    switch (node->op) {
    case TIDE_OP_CONV2D:
        CONV_RANK(cudnnConvolutionFwdAlgoPerf_t, cudnnGetConvolutionForwardAlgorithm_v7, d->x, d->w,
                  d->conv, d->y);
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        CONV_RANK(cudnnConvolutionBwdDataAlgoPerf_t, cudnnGetConvolutionBackwardDataAlgorithm_v7,
                  d->w, d->y, d->conv, d->x);
        break;
    default:
        CONV_RANK(cudnnConvolutionBwdFilterAlgoPerf_t,
                  cudnnGetConvolutionBackwardFilterAlgorithm_v7, d->x, d->y, d->conv, d->w);
        break;
    }
#undef CONV_RANK
    return n < 0 ? 0 : n > CONV_RANKED_MAX ? CONV_RANKED_MAX : n;
}

/*
 * The choice for one convolution, cached per op, geometry, math and device: the
 * heuristic query costs more host time than the launch itself, and a step
 * of ResNet-50 launches 158 convolutions of 20-odd shapes.
 */
struct conv_choice {
    int op, device, math;
    struct tide__kernel_conv cv;
    int algo;
    cudnnMathType_t math_type; /* the descriptor's math type for algo */
    size_t workspace;
};

#define CONV_CACHE_MAX 1024
static pthread_mutex_t conv_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conv_choice conv_cache[CONV_CACHE_MAX];
static size_t conv_cache_used;

static bool conv_cache_get(struct conv_choice *c)
{
    bool found = false;
    pthread_mutex_lock(&conv_cache_lock);
    for (size_t i = 0; i < conv_cache_used && !found; i++) {
        const struct conv_choice *e = &conv_cache[i];
        if (e->op == c->op && e->device == c->device && e->math == c->math &&
            !memcmp(&e->cv, &c->cv, sizeof c->cv)) {
            *c = *e;
            found = true;
        }
    }
    pthread_mutex_unlock(&conv_cache_lock);
    return found;
}

/* Remembers c unless the cache is full (the query then runs again: slower, never wrong). */
static void conv_cache_put(const struct conv_choice *c)
{
    pthread_mutex_lock(&conv_cache_lock);
    if (conv_cache_used < CONV_CACHE_MAX)
        conv_cache[conv_cache_used++] = *c;
    pthread_mutex_unlock(&conv_cache_lock);
}

/*
 * The algorithm for node's convolution d (a cudnnConvolution*Algo_t) and its
 * workspace: the first of cuDNN's heuristic ranking that is deterministic
 * (CUDNN_DETERMINISTIC: no atomics, the same bits every run), supported,
 * and needs no more workspace than the largest of the node's three tensors
 * (so that the choice at most doubles what the node already holds, and a
 * plan's floor moves little; 4x under tf32); when none qualifies or the
 * ranking fails, the first of the fixed list that cuDNN supports. The ranking depends only on
 * the shapes, the GPU and cuDNN, so workspace_bytes (at planning time, with
 * the backend's planning handle) and the launch (with the stream's handle)
 * agree. When nothing applies, the last failure is reported as
 * TIDE_UNSUPPORTED.
 */
static enum tide_status conv_choose(cudnnHandle_t handle, const struct tide_node *node,
                                    const struct tide__kernel_conv *cv, const struct conv_desc *d,
                                    int *algo, size_t *workspace, struct tide_error *err)
{
    struct conv_choice c;
    memset(&c, 0, sizeof c); /* the key is compared with memcmp */
    c.op = (int)node->op;
    c.math = (int)tide_node_math(node);
    c.cv = *cv;
    if (cudaGetDevice(&c.device) != cudaSuccess)
        c.device = -1;
    /*
     * Under tf32 the ranking lists each algorithm with the math type it runs
     * with (tensor op, FMA), which the descriptor must then carry: launched
     * with another, cuDNN refuses it (CUDNN_STATUS_BAD_PARAM). Algorithms
     * that would convert FP32 down to FP16 or BF16 are never taken. Under fp32
     * the descriptor stays CUDNN_FMA_MATH, as conv_desc_make set it.
     */
    bool tf32 = c.math == TIDE_MATH_TF32;
    c.math_type = tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    if (conv_cache_get(&c)) {
        *algo = c.algo;
        *workspace = c.workspace;
        return TIDE_CUDNN_CHECK(err, cudnnSetConvolutionMathType(d->conv, c.math_type));
    }

    uint64_t cap = (uint64_t)(cv->n * cv->c * cv->h * cv->w);
    if ((uint64_t)(cv->n * cv->k * cv->oh * cv->ow) > cap)
        cap = (uint64_t)(cv->n * cv->k * cv->oh * cv->ow);
    if ((uint64_t)(cv->k * cv->c * cv->r * cv->s) > cap)
        cap = (uint64_t)(cv->k * cv->c * cv->r * cv->s);
    cap *= sizeof(float) * (tf32 ? 4 : 1);

    struct conv_ranked ranked[CONV_RANKED_MAX];
    int n = conv_rank(handle, node, d, ranked);
    cudnnStatus_t rc = CUDNN_STATUS_NOT_SUPPORTED;
    bool chosen = false;
    for (int i = 0; i < n && !chosen; i++) {
        if (ranked[i].status != CUDNN_STATUS_SUCCESS ||
            ranked[i].determinism != CUDNN_DETERMINISTIC || ranked[i].memory > cap ||
            (tf32 && ranked[i].math_type == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
            continue;
        if (tf32) {
            rc = cudnnSetConvolutionMathType(d->conv, ranked[i].math_type);
            if (rc != CUDNN_STATUS_SUCCESS)
                continue;
        }
        rc = conv_query(handle, node, d, ranked[i].algo, &c.workspace);
        if (rc == CUDNN_STATUS_SUCCESS && c.workspace <= cap) {
            c.algo = ranked[i].algo;
            if (tf32)
                c.math_type = ranked[i].math_type;
            chosen = true;
        }
    }
    /* The fallback list runs with the descriptor's own math type. */
    bool fallback = !chosen;
    if (fallback && tf32) {
        rc = cudnnSetConvolutionMathType(d->conv, c.math_type);
        fallback = rc == CUDNN_STATUS_SUCCESS;
    }
    for (size_t i = 0; fallback && !chosen && conv_fallback(node->op, i) >= 0; i++) {
        int a = conv_fallback(node->op, i);
        rc = conv_query(handle, node, d, a, &c.workspace);
        if (rc == CUDNN_STATUS_SUCCESS) {
            c.algo = a;
            chosen = true;
        }
    }
    if (chosen) {
        TIDE_LOG_DEBUG("cuda conv: %s of x [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                       "], w [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                       "]: algorithm %d, math type %d, workspace %zu bytes (cap %" PRIu64 ")",
                       tide_op_info(node->op)->name, cv->n, cv->c, cv->h, cv->w, cv->k, cv->c,
                       cv->r, cv->s, c.algo, (int)c.math_type, c.workspace, cap);
        conv_cache_put(&c);
        *algo = c.algo;
        *workspace = c.workspace;
        return TIDE_OK;
    }
    enum tide_status st =
        tide__cudnn_check(rc, "cudnnGetConvolution*WorkspaceSize", __FILE__, __LINE__, err);
    tide_error_prefix(err, "node \"%s\" (%s): no deterministic cuDNN algorithm for this shape",
                      node->name ? node->name : "", tide_op_info(node->op)->name);
    return st == TIDE_INVALID ? TIDE_UNSUPPORTED : st;
}

/* The shapes of x, w and y of a convolution node of graph, wherever they live for its op. */
static bool conv_shapes(const struct tide_graph *graph, const struct tide_node *node,
                        const struct tide_shape **x, const struct tide_shape **w,
                        const struct tide_shape **y)
{
    if (!node->outputs || node->n_outputs < 1 || node->n_inputs < 2)
        return false;
    switch (node->op) {
    case TIDE_OP_CONV2D:
        *x = &tide_graph_input(graph, node, 0)->shape;
        *w = &tide_graph_input(graph, node, 1)->shape;
        *y = &node->outputs[0].shape;
        return true;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        *x = &node->outputs[0].shape;
        *w = &tide_graph_input(graph, node, 1)->shape;
        *y = &tide_graph_input(graph, node, 0)->shape;
        return true;
    case TIDE_OP_CONV2D_BACKPROP_FILTER:
        *x = &tide_graph_input(graph, node, 0)->shape;
        *w = &node->outputs[0].shape;
        *y = &tide_graph_input(graph, node, 1)->shape;
        return true;
    default:
        return false;
    }
}

/*
 * Whether node's Conv2DBackpropFilter of cv runs conv.cu's kernel: one filter
 * per channel, fp32 math, and at least 1,024 taps (K x R x S), the kernel's
 * blocks, so that they fill the GPU. Measured on an H200 (cuDNN 9, MobileNet
 * v2 at batch 32, 2026-11-26; docs/benchmarks.md): cuDNN's deterministic FP32
 * choice took 2 to 27 ms for the shapes of 144 channels and more (1,296 taps
 * and more), the kernel 0.1 to 0.6 ms; at 32 channels of 112 x 112 (288 taps
 * of 401,408 products each) cuDNN took 0.14 ms and the kernel 0.91. Under
 * tf32, cuDNN's choice was fast at every shape (at most 0.5 ms) and stays.
 */
static bool conv_own_kernel(const struct tide_node *node, const struct tide__kernel_conv *cv)
{
    return node->op == TIDE_OP_CONV2D_BACKPROP_FILTER && tide_node_math(node) == TIDE_MATH_FP32 &&
           cv->group > 1 && cv->group == cv->c && cv->k == cv->c && cv->k * cv->r * cv->s >= 1024;
}

uint64_t tide__cuda_conv_workspace(struct tide_cuda_launch *launch, const struct tide_graph *graph,
                                   const struct tide_node *node)
{
    const struct tide_shape *x, *w, *y;
    struct tide__kernel_conv cv;
    if (!launch || !launch->cudnn || !conv_shapes(graph, node, &x, &w, &y) ||
        conv_setup(node, x, w, y, &cv, NULL) != TIDE_OK || conv_empty(&cv))
        return 0; /* the kernel reports the fault when it runs */
    if (conv_own_kernel(node, &cv))
        return 0; /* conv.cu's kernel needs none */
    struct conv_desc d;
    if (conv_desc_make(&cv, tide_node_math(node), &d, NULL) != TIDE_OK)
        return 0;
    int algo;
    size_t bytes = 0;
    if (conv_choose(launch->cudnn, node, &cv, &d, &algo, &bytes, NULL) != TIDE_OK)
        bytes = 0;
    conv_desc_destroy(&d);
    return bytes;
}

/* ============================================================================
 * Kernels
 * ========================================================================== */

/*
 * Runs the convolution op of args on cuDNN: x, w and y are the node's
 * tensors by role (inputs or outputs, depending on the op).
 */
static enum tide_status conv_run(const struct tide_kernel_args *args,
                                 struct tide_cuda_launch *launch,
                                 const struct tide__kernel_conv *cv, const void *x, const void *w,
                                 const void *y, void *out, struct tide_error *err)
{
    struct conv_desc d;
    enum tide_status st = conv_desc_make(cv, tide_node_math(args->node), &d, err);
    if (st != TIDE_OK)
        return st;
    int algo = 0;
    size_t need = 0;
    st = conv_choose(launch->cudnn, args->node, cv, &d, &algo, &need, err);
    if (st == TIDE_OK)
        st = tide__cuda_expect_workspace(args, need, err);
    const float alpha = 1.0f, beta = 0.0f;
    void *ws = need ? args->workspace : NULL;
    if (st == TIDE_OK) {
        switch (args->node->op) {
        case TIDE_OP_CONV2D:
            st = TIDE_CUDNN_CHECK(err,
                                  cudnnConvolutionForward(launch->cudnn, &alpha, d.x, x, d.w, w,
                                                          d.conv, (cudnnConvolutionFwdAlgo_t)algo,
                                                          ws, need, &beta, d.y, out));
            break;
        case TIDE_OP_CONV2D_BACKPROP_INPUT:
            st = TIDE_CUDNN_CHECK(
                err, cudnnConvolutionBackwardData(launch->cudnn, &alpha, d.w, w, d.y, y, d.conv,
                                                  (cudnnConvolutionBwdDataAlgo_t)algo, ws, need,
                                                  &beta, d.x, out));
            break;
        default:
            st = TIDE_CUDNN_CHECK(
                err, cudnnConvolutionBackwardFilter(launch->cudnn, &alpha, d.x, x, d.y, y, d.conv,
                                                    (cudnnConvolutionBwdFilterAlgo_t)algo, ws, need,
                                                    &beta, d.w, out));
            break;
        }
    }
    conv_desc_destroy(&d);
    return st;
}

/* Zeroes an output when an empty tensor leaves nothing to compute but the output is not empty. */
static enum tide_status zero_output(const struct tide_kernel_args *args,
                                    struct tide_cuda_launch *launch, struct tide_error *err)
{
    if (args->outputs[0].nbytes == 0)
        return TIDE_OK;
    return TIDE_CUDA_CHECK(
        err, cudaMemsetAsync(args->outputs[0].data, 0, args->outputs[0].nbytes, launch->stream));
}

/* Conv2D(x, w) -> y. */
enum tide_status tide__cuda_CONV2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_conv cv;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = conv_setup(args->node, &args->inputs[0].shape, &args->inputs[1].shape,
                        &args->outputs[0].shape, &cv, err);
    if (st != TIDE_OK)
        return st;
    if (conv_empty(&cv))
        return zero_output(args, launch, err);
    return conv_run(args, launch, &cv, args->inputs[0].data, args->inputs[1].data, NULL,
                    args->outputs[0].data, err);
}

/* Conv2DBackpropInput(dy, w; input_shape) -> dx. */
enum tide_status tide__cuda_CONV2D_BACKPROP_INPUT(const struct tide_kernel_args *args,
                                                  struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_conv cv;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = conv_setup(args->node, &args->outputs[0].shape, &args->inputs[1].shape,
                        &args->inputs[0].shape, &cv, err);
    if (st != TIDE_OK)
        return st;
    if (conv_empty(&cv))
        return zero_output(args, launch, err);
    return conv_run(args, launch, &cv, NULL, args->inputs[1].data, args->inputs[0].data,
                    args->outputs[0].data, err);
}

/* Conv2DBackpropFilter(x, dy; filter_shape) -> dw. */
enum tide_status tide__cuda_CONV2D_BACKPROP_FILTER(const struct tide_kernel_args *args,
                                                   struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_conv cv;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st == TIDE_OK)
        st = conv_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape,
                        &args->inputs[1].shape, &cv, err);
    if (st != TIDE_OK)
        return st;
    if (conv_empty(&cv))
        return zero_output(args, launch, err);
    if (conv_own_kernel(args->node, &cv))
        return TIDE_CUDA_CHECK(err, tide__cuda_launch_depthwise_filter_grad(
                                        launch->stream, &cv, tide__cuda_in(args, 0),
                                        tide__cuda_in(args, 1), tide__cuda_out(args, 0)));
    return conv_run(args, launch, &cv, args->inputs[0].data, NULL, args->inputs[1].data,
                    args->outputs[0].data, err);
}
