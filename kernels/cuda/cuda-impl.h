/* SPDX-License-Identifier: MIT */
/*
 * cuda-impl.h: declarations shared by the CUDA kernels (kernels/cuda) only.
 *
 * The kernels come in two halves. The host half (the .c files, plain C)
 * asserts what infer guarantees about views and attributes with the CPU
 * kernels' helpers (kernels/check.h), computes the geometry, calls cuBLAS
 * and cuDNN, and calls the device half through the launchers declared
 * below. The device half (the .cu files) holds the
 * __global__ functions and one extern "C" launcher each, which takes plain
 * numbers and pointers, enqueues on the given stream and returns
 * cudaGetLastError(); the host half checks that with TIDE_CUDA_CHECK. So
 * every check and every message lives in C compiled with the project's
 * warnings, and nvcc compiles only device code.
 *
 * Every compute op of graph/ops.def has a host kernel tide__cuda_<ID>; the
 * declarations are generated below and table.c collects the definitions into
 * tide_cuda_kernels, so an op added to ops.def without a CUDA kernel is a
 * link error.
 *
 * Determinism: no kernel adds floats with atomics. A sum is either one
 * thread's loop in a fixed order or a tree over a block whose size depends
 * on the shapes only, accumulated in double as on the CPU. cuBLAS runs with
 * a fixed workspace per stream and no atomics; cuDNN runs with fixed
 * deterministic algorithms. Both use FP32 math, or TF32 tensor cores for a
 * node whose "math" attribute is tf32 (graph.h). So the same inputs give
 * the same bits on every run on the same GPU model and library versions.
 */
#ifndef TIDE_KERNELS_CUDA_IMPL_H
#define TIDE_KERNELS_CUDA_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/check.h"
#include "kernels/cuda/kernels_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Plain structs passed by value to the device half
 * ========================================================================== */

#define TIDE_CUDA_MAX_RANK 8

/* The most inputs a broadcast carries: Select's three. */
#define TIDE_CUDA_BROADCAST_INPUTS 3

/*
 * A row-major traversal of an output of `rank` merged axes with up to three
 * inputs broadcast to it: element strides of each input, 0 along broadcast
 * axes (and for inputs past those planned). rank 0 is a single element.
 */
struct tide__cuda_broadcast {
    int32_t rank;
    int64_t dims[TIDE_CUDA_MAX_RANK];
    int64_t strides[TIDE_CUDA_BROADCAST_INPUTS][TIDE_CUDA_MAX_RANK];
};

/*
 * A sum over some axes of a row-major input: output element o (row-major
 * over the kept axes) sums, over every index r of the reduced axes (row-major),
 * the input element at kept_offset(o) + reduced_offset(r). Adjacent axes of
 * the same kind are merged and axes of size 1 dropped.
 */
struct tide__cuda_reduce {
    int32_t kept_rank, reduced_rank;
    int64_t kept_dims[TIDE_CUDA_MAX_RANK], kept_strides[TIDE_CUDA_MAX_RANK];
    int64_t reduced_dims[TIDE_CUDA_MAX_RANK], reduced_strides[TIDE_CUDA_MAX_RANK];
    int64_t n_out;     /* product of the kept dims */
    int64_t n_reduced; /* product of the reduced dims */
};

/* A 2-D window slid over planes [h, w] (NCHW with planes = N*C); pads are symmetric. */
struct tide__cuda_pool {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
};

/* A box of box[d] elements copied from src at src_begin to dst at dst_begin. */
struct tide__cuda_box {
    int32_t rank;
    int64_t box[TIDE_CUDA_MAX_RANK];
    int64_t src_dims[TIDE_CUDA_MAX_RANK], src_begin[TIDE_CUDA_MAX_RANK];
    int64_t dst_dims[TIDE_CUDA_MAX_RANK], dst_begin[TIDE_CUDA_MAX_RANK];
};

enum tide__cuda_binary_op {
    TIDE__CUDA_ADD,
    TIDE__CUDA_SUB,
    TIDE__CUDA_MUL,
    TIDE__CUDA_COPY_A, /* BroadcastTo: y = a */
};

enum tide__cuda_unary_op {
    TIDE__CUDA_RELU,
    TIDE__CUDA_SIGMOID,
    TIDE__CUDA_TANH,
    TIDE__CUDA_NEG,
    TIDE__CUDA_SCALE,
    TIDE__CUDA_RELU_GRAD, /* gradients read dy (x) and the forward output (y) */
    TIDE__CUDA_SIGMOID_GRAD,
    TIDE__CUDA_TANH_GRAD,
};

/* AddN adds this many inputs per launch (the pointers travel as a kernel parameter). */
#define TIDE_CUDA_ADD_N_CHUNK 16

struct tide__cuda_pointers {
    const float *p[TIDE_CUDA_ADD_N_CHUNK];
};

/* ============================================================================
 * Launchers (the .cu files): each enqueues on stream and returns cudaGetLastError()
 * ========================================================================== */

/* elementwise.cu */
cudaError_t tide__cuda_launch_binary(cudaStream_t stream, enum tide__cuda_binary_op op,
                                     const float *a, const float *b, float *y, int64_t n,
                                     const struct tide__cuda_broadcast *plan);
cudaError_t tide__cuda_launch_unary(cudaStream_t stream, enum tide__cuda_unary_op op,
                                    const float *x, const float *y_forward, float *out, int64_t n,
                                    float scale);
/* y = (first ? 0 : y) + xs.p[0] + ... + xs.p[count - 1], added left to right. */
cudaError_t tide__cuda_launch_add_n(cudaStream_t stream, struct tide__cuda_pointers xs, int count,
                                    bool first, float *y, int64_t n);
cudaError_t tide__cuda_launch_bias_add(cudaStream_t stream, const float *x, const float *bias,
                                       float *y, int64_t outer, int64_t channels, int64_t inner);
/* dx[plane * hw + j] = dy[plane] / (float)hw. */
cudaError_t tide__cuda_launch_spread(cudaStream_t stream, const float *dy, float *dx,
                                     int64_t planes, int64_t hw);
cudaError_t tide__cuda_launch_sgd(cudaStream_t stream, float *var, const float *grad, int64_t n,
                                  float lr);
cudaError_t tide__cuda_launch_momentum(cudaStream_t stream, float *var, float *accum,
                                       const float *grad, int64_t n, float lr, float momentum,
                                       bool nesterov);
cudaError_t tide__cuda_launch_adam(cudaStream_t stream, float *var, float *m, float *v,
                                   const float *grad, int64_t n, float lr, float beta1, float beta2,
                                   float one_minus_b1, float one_minus_b2, float inv_correction1,
                                   float inv_correction2, float eps);

/* reduce.cu: y[o] = (float)(sum / divisor), or (float)sum when divisor is 0. */
cudaError_t tide__cuda_launch_reduce(cudaStream_t stream, const float *x, float *y,
                                     const struct tide__cuda_reduce *plan, double divisor);
cudaError_t tide__cuda_launch_batch_norm(cudaStream_t stream, const float *x, const float *gamma,
                                         const float *beta, float *y, float *mean, float *inv_std,
                                         int64_t n, int64_t c, int64_t hw, double epsilon);
cudaError_t tide__cuda_launch_batch_norm_grad(cudaStream_t stream, const float *dy, const float *x,
                                              const float *gamma, const float *mean,
                                              const float *inv_std, float *dx, float *dgamma,
                                              float *dbeta, int64_t n, int64_t c, int64_t hw);

/* softmax.cu */
cudaError_t tide__cuda_launch_softmax(cudaStream_t stream, const float *x, float *y, int64_t outer,
                                      int64_t len, int64_t inner);
cudaError_t tide__cuda_launch_softmax_grad(cudaStream_t stream, const float *dy, const float *y,
                                           float *dx, int64_t outer, int64_t len, int64_t inner);
/* Writes the first label outside [0, c) into *fault (if it is clear) with tag. */
cudaError_t tide__cuda_launch_check_labels(cudaStream_t stream, const int32_t *labels, int64_t n,
                                           int64_t c, struct tide_cuda_fault *fault, uint32_t tag);
cudaError_t tide__cuda_launch_softmax_xent(cudaStream_t stream, const float *logits,
                                           const int32_t *labels, float *loss, int64_t n,
                                           int64_t c);
cudaError_t tide__cuda_launch_softmax_xent_grad(cudaStream_t stream, const float *logits,
                                                const int32_t *labels, const float *dloss,
                                                float *dx, int64_t n, int64_t c);

/* pool.cu; argmax: MaxPool2D's second output, one int32 per element of y. */
cudaError_t tide__cuda_launch_max_pool(cudaStream_t stream, const struct tide__cuda_pool *p,
                                       const float *x, float *y, int32_t *argmax);
cudaError_t tide__cuda_launch_avg_pool(cudaStream_t stream, const struct tide__cuda_pool *p,
                                       const float *x, float *y);
cudaError_t tide__cuda_launch_max_pool_grad(cudaStream_t stream, const struct tide__cuda_pool *p,
                                            const float *dy, const int32_t *argmax, float *dx);
cudaError_t tide__cuda_launch_avg_pool_grad(cudaStream_t stream, const struct tide__cuda_pool *p,
                                            const float *dy, float *dx);

/* conv.cu; Conv2DBackpropFilter of a depthwise convolution (tide__cuda_conv_depthwise). */
cudaError_t tide__cuda_launch_depthwise_filter_grad(cudaStream_t stream,
                                                    const struct tide__kernel_conv *cv,
                                                    const float *x, const float *dy, float *dw);

/*
 * attention.cu: Attention and AttentionGrad of geometry a; scratch is the
 * workspace of tide__cuda_attention_workspace.
 */
cudaError_t tide__cuda_launch_attention(cudaStream_t stream, const struct tide__kernel_attention *a,
                                        const float *q, const float *k, const float *v, float *o,
                                        float *lse, void *scratch);
cudaError_t tide__cuda_launch_attention_grad(cudaStream_t stream,
                                             const struct tide__kernel_attention *a, const float *q,
                                             const float *k, const float *v, const float *o,
                                             const float *lse, const float *dout, float *dq,
                                             float *dk, float *dv, void *scratch);

/* shape.cu: copies a box of elements of esize bytes (1, 2, 4 or 8). */
cudaError_t tide__cuda_launch_copy_box(cudaStream_t stream, void *dst, const void *src,
                                       const struct tide__cuda_box *box, size_t esize);

/* batch.cu: y[i] = x[offset of y's element i in t], elements of esize bytes (1, 2, 4 or 8). */
cudaError_t tide__cuda_launch_transpose(cudaStream_t stream, void *y, const void *x,
                                        const struct tide__kernel_transpose *t, size_t esize);

/*
 * index.cu. check_indices writes the first entry of v[0..n) outside
 * [0, limit) into *fault (if it is clear) with tag; the kernels after it
 * never index with such an entry. start and pos (GatherGrad) are its
 * workspace: rows + 1 and n_ids int64; filled (MoeRoute): experts int64.
 */
cudaError_t tide__cuda_launch_check_indices(cudaStream_t stream, const int32_t *v, int64_t n,
                                            int64_t limit, struct tide_cuda_fault *fault,
                                            uint32_t tag);
cudaError_t tide__cuda_launch_gather(cudaStream_t stream, const float *table, const int32_t *ids,
                                     float *y, int64_t rows, int64_t row, int64_t n_ids);
cudaError_t tide__cuda_launch_gather_grad(cudaStream_t stream, const float *dy, const int32_t *ids,
                                          float *dx, int64_t rows, int64_t row, int64_t n_ids,
                                          int64_t *start, int64_t *pos);
/*
 * check_signed_indices: as check_indices, for GatherElements' indices: the
 * first entry outside [-limit, limit) that is not ignore (the fault's code
 * TIDE_CUDA_FAULT_SIGNED_INDEX). gather_elements: y (n_indices elements) of
 * data; gather_elements_grad: dx of g's data shape (every element written).
 */
cudaError_t tide__cuda_launch_check_signed_indices(cudaStream_t stream, const int32_t *v, int64_t n,
                                                   int64_t limit, int64_t ignore,
                                                   struct tide_cuda_fault *fault, uint32_t tag);
cudaError_t tide__cuda_launch_gather_elements(cudaStream_t stream, const float *data,
                                              const int32_t *indices, float *y,
                                              const struct tide__kernel_gather_elements *g,
                                              int64_t n_indices);
cudaError_t tide__cuda_launch_gather_elements_grad(cudaStream_t stream, const float *dy,
                                                   const int32_t *indices, float *dx,
                                                   const struct tide__kernel_gather_elements *g);
cudaError_t tide__cuda_launch_top_k(cudaStream_t stream, const float *x, float *values,
                                    int32_t *indices, int64_t rows, int64_t n, int64_t k);
cudaError_t tide__cuda_launch_top_k_grad(cudaStream_t stream, const float *dvalues,
                                         const int32_t *indices, float *dx, int64_t rows, int64_t n,
                                         int64_t k);
cudaError_t tide__cuda_launch_moe_route(cudaStream_t stream, const int32_t *choice,
                                        int32_t *dispatch, int32_t *combine, int64_t tokens,
                                        int64_t k, int64_t experts, int64_t capacity,
                                        int64_t *filled);

/* ============================================================================
 * Host kernels and helpers (the .c files)
 * ========================================================================== */

/* One kernel per op; source and memory ops are declared too but never defined or referenced. */
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                        \
    enum tide_status tide__cuda_##ID(const struct tide_kernel_args *args, struct tide_error *err);
#include "graph/ops.def"
#undef TIDE_OP

/*
 * The launch context of args (args->stream, set by the CUDA backend's
 * launch); refuses a call without one (TIDE_STATE, naming the node).
 */
enum tide_status tide__cuda_context(const struct tide_kernel_args *args,
                                    struct tide_cuda_launch **launch, struct tide_error *err);

/*
 * Sets the math mode of the launch's cuBLAS handle for args->node's "math"
 * attribute: CUBLAS_DEFAULT_MATH for fp32 (plain FP32), CUBLAS_TF32_TENSOR_OP_MATH
 * for tf32. Every GEMM launch sets it, so no launch inherits another's mode.
 */
enum tide_status tide__cuda_blas_math(const struct tide_kernel_args *args,
                                      struct tide_cuda_launch *launch, struct tide_error *err);

/* Input i and output i as float32 device pointers. */
static inline const float *tide__cuda_in(const struct tide_kernel_args *args, uint32_t i)
{
    return (const float *)args->inputs[i].data;
}

static inline float *tide__cuda_out(const struct tide_kernel_args *args, uint32_t i)
{
    return (float *)args->outputs[i].data;
}

static inline int64_t tide__cuda_numel(const struct tide_tensor_view *view)
{
    return tide_shape_numel(&view->shape);
}

/* Refuses the call unless the workspace holds at least need bytes. */
enum tide_status tide__cuda_expect_workspace(const struct tide_kernel_args *args, uint64_t need,
                                             struct tide_error *err);

/*
 * Plans the traversal of out with inputs ins[0..n_in) (n_in is 1 to
 * TIDE_CUDA_BROADCAST_INPUTS) by NumPy rules; false if an input does not
 * broadcast to out.
 */
bool tide__cuda_broadcast_plan(struct tide__cuda_broadcast *plan, const struct tide_shape *out,
                               const struct tide_shape *const *ins, int n_in);

/*
 * Plans a sum of x (shape xs) over the axes marked in reduced; false if a
 * merged rank exceeds TIDE_CUDA_MAX_RANK (it cannot).
 */
void tide__cuda_reduce_plan(struct tide__cuda_reduce *plan, const struct tide_shape *xs,
                            const bool *reduced);

/* Conv2D and its gradients (conv.c): the cuDNN workspace of the node's algorithm. */
uint64_t tide__cuda_conv_workspace(struct tide_cuda_launch *launch, const struct tide_graph *graph,
                                   const struct tide_node *node);

/* Attention and AttentionGrad (attention.c): double accumulators, O(S * D) per head. */
uint64_t tide__cuda_attention_workspace(const struct tide_graph *graph,
                                        const struct tide_node *node);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CUDA_IMPL_H */
