/* SPDX-License-Identifier: MIT */
/*
 * conv.c: the CUDA kernels for Conv2D and its gradients Conv2DBackpropInput
 * and Conv2DBackpropFilter, NCHW input x [N, C, H, W], KCRS filter
 * w [K, C, R, S], output y [N, K, OH, OW], symmetric zero padding, through
 * cuDNN's convolution API (cudnnConvolutionForward, BackwardData,
 * BackwardFilter: the cudnn_cnn library of cuDNN 9).
 *
 * Determinism and precision. Each op tries a fixed list of algorithms that
 * cuDNN documents as deterministic, in order, and takes the first whose
 * workspace query succeeds: IMPLICIT_PRECOMP_GEMM (then IMPLICIT_GEMM, GEMM)
 * forward, BWD_DATA_ALGO_1 (then FFT_TILING), BWD_FILTER_ALGO_1 (then
 * FFT_TILING). Never the algorithms that accumulate with atomics
 * (BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0 and _3). The choice depends only on
 * the shapes and the GPU, so workspace_bytes (at planning time, with the
 * backend's planning handle) and the launch (with the stream's handle) agree.
 * The math type is CUDNN_FMA_MATH: plain FP32, no TF32 tensor cores, so the
 * results stay within float rounding of the CPU's.
 *
 * Descriptors are made and destroyed per call: host work of a few
 * microseconds against kernels of much more, and no cache to keep coherent.
 */
#include "kernels/cuda/cuda-impl.h"

#include <inttypes.h>
#include <limits.h>

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
static enum tide_status conv_desc_make(const struct tide__kernel_conv *cv, struct conv_desc *d,
                                       struct tide_error *err)
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
        st = TIDE_CUDNN_CHECK(err, cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT,
                                                              CUDNN_TENSOR_NCHW, (int)cv->k,
                                                              (int)cv->c, (int)cv->r, (int)cv->s));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnSetConvolution2dDescriptor(
                                       d->conv, (int)cv->ph, (int)cv->pw, (int)cv->sh, (int)cv->sw,
                                       1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH));
    if (st != TIDE_OK)
        conv_desc_destroy(d);
    return st;
}

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

/*
 * The first algorithm of op's list that cuDNN supports for d (its index in
 * the list) and its workspace. The queries of algorithms that do not apply
 * are expected to fail, so they are not logged; when none applies, the last
 * failure is reported as TIDE_UNSUPPORTED.
 */
static enum tide_status conv_choose(cudnnHandle_t handle, const struct tide_node *node,
                                    const struct conv_desc *d, int *algo, size_t *workspace,
                                    struct tide_error *err)
{
    cudnnStatus_t rc = CUDNN_STATUS_NOT_SUPPORTED;
    switch (node->op) {
    case TIDE_OP_CONV2D:
        for (size_t i = 0; i < COUNT(fwd_algos); i++) {
            rc = cudnnGetConvolutionForwardWorkspaceSize(handle, d->x, d->w, d->conv, d->y,
                                                         fwd_algos[i], workspace);
            if (rc == CUDNN_STATUS_SUCCESS) {
                *algo = (int)i;
                return TIDE_OK;
            }
        }
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        for (size_t i = 0; i < COUNT(bwd_data_algos); i++) {
            rc = cudnnGetConvolutionBackwardDataWorkspaceSize(handle, d->w, d->y, d->conv, d->x,
                                                              bwd_data_algos[i], workspace);
            if (rc == CUDNN_STATUS_SUCCESS) {
                *algo = (int)i;
                return TIDE_OK;
            }
        }
        break;
    default:
        for (size_t i = 0; i < COUNT(bwd_filter_algos); i++) {
            rc = cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, d->x, d->y, d->conv, d->w,
                                                                bwd_filter_algos[i], workspace);
            if (rc == CUDNN_STATUS_SUCCESS) {
                *algo = (int)i;
                return TIDE_OK;
            }
        }
        break;
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

uint64_t tide__cuda_conv_workspace(struct tide_cuda_launch *launch, const struct tide_graph *graph,
                                   const struct tide_node *node)
{
    const struct tide_shape *x, *w, *y;
    struct tide__kernel_conv cv;
    if (!launch || !launch->cudnn || !conv_shapes(graph, node, &x, &w, &y) ||
        conv_setup(node, x, w, y, &cv, NULL) != TIDE_OK || conv_empty(&cv))
        return 0; /* the kernel reports the fault when it runs */
    struct conv_desc d;
    if (conv_desc_make(&cv, &d, NULL) != TIDE_OK)
        return 0;
    int algo;
    size_t bytes = 0;
    if (conv_choose(launch->cudnn, node, &d, &algo, &bytes, NULL) != TIDE_OK)
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
    enum tide_status st = conv_desc_make(cv, &d, err);
    if (st != TIDE_OK)
        return st;
    int algo = 0;
    size_t need = 0;
    st = conv_choose(launch->cudnn, args->node, &d, &algo, &need, err);
    if (st == TIDE_OK)
        st = tide__cuda_expect_workspace(args, need, err);
    const float alpha = 1.0f, beta = 0.0f;
    void *ws = need ? args->workspace : NULL;
    if (st == TIDE_OK) {
        switch (args->node->op) {
        case TIDE_OP_CONV2D:
            st = TIDE_CUDNN_CHECK(err, cudnnConvolutionForward(launch->cudnn, &alpha, d.x, x, d.w,
                                                               w, d.conv, fwd_algos[algo], ws, need,
                                                               &beta, d.y, out));
            break;
        case TIDE_OP_CONV2D_BACKPROP_INPUT:
            st = TIDE_CUDNN_CHECK(
                err, cudnnConvolutionBackwardData(launch->cudnn, &alpha, d.w, w, d.y, y, d.conv,
                                                  bwd_data_algos[algo], ws, need, &beta, d.x, out));
            break;
        default:
            st = TIDE_CUDNN_CHECK(err, cudnnConvolutionBackwardFilter(
                                           launch->cudnn, &alpha, d.x, x, d.y, y, d.conv,
                                           bwd_filter_algos[algo], ws, need, &beta, d.w, out));
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
    return conv_run(args, launch, &cv, args->inputs[0].data, NULL, args->inputs[1].data,
                    args->outputs[0].data, err);
}
