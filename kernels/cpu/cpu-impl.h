/* SPDX-License-Identifier: MIT */
/*
 * cpu-impl.h: declarations shared by the CPU kernels (kernels/cpu/ *.c) only.
 *
 * Every compute op of graph/ops.def has a kernel named tide__cpu_<ID>, where
 * <ID> is the op's enum suffix (tide__cpu_MATMUL for TIDE_OP_MATMUL). The
 * declarations are generated below from the op table, and table.c collects
 * the definitions into tide_cpu_kernels the same way, so an op added to
 * ops.def without a CPU kernel is a link error rather than a NULL pointer
 * found at run time.
 *
 * The helpers here serve several kernel files: typed access to tensor views,
 * the workspace guard, the 2-D window of convolution, and a deterministic row
 * sum. What infer guarantees about shapes and attributes is not re-derived
 * here: kernels/check.h asserts it, for the CPU and CUDA kernels alike.
 * Files keep their own private helpers (broadcasting in elementwise.c, axis
 * reduction in reduce.c) static.
 *
 * Determinism: every kernel visits its elements in a fixed order and
 * accumulates sums in double, so the same inputs give the same bits on every
 * run. Kernels split their work into tasks whose boundaries depend on shapes
 * only and run them on the pool of parallel.c: the GEMM-based ones by images
 * and blocks, the element-wise ones by fixed pieces of their elements, the
 * reductions and BatchNorm by output elements (channels), each of which is
 * summed whole by one task in the same order as on one thread. OpenBLAS
 * itself runs single-threaded, since its threaded GEMM is not reproducible
 * across thread counts (see parallel.c).
 */
#ifndef TIDE_KERNELS_CPU_IMPL_H
#define TIDE_KERNELS_CPU_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/check.h"
#include "kernels/kernels.h"

/* One kernel per op; source and memory ops are declared too but never defined or referenced. */
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                        \
    enum tide_status tide__cpu_##ID(const struct tide_kernel_args *args, struct tide_error *err);
#include "graph/ops.def"
#undef TIDE_OP

/* ============================================================================
 * Views
 * ========================================================================== */

/* Input i of a kernel as float32 data. */
static inline const float *tide__cpu_in(const struct tide_kernel_args *args, uint32_t i)
{
    return (const float *)args->inputs[i].data;
}

/* Output i of a kernel as float32 data. */
static inline float *tide__cpu_out(const struct tide_kernel_args *args, uint32_t i)
{
    return (float *)args->outputs[i].data;
}

/* Elements of a view (its shape was validated by infer, so the product does not overflow). */
static inline int64_t tide__cpu_numel(const struct tide_tensor_view *view)
{
    return tide_shape_numel(&view->shape);
}

/*
 * Refuses the call unless the workspace holds at least `need` bytes: the
 * executor passes what the plan reserved, which a caller outside the
 * executor may not.
 */
enum tide_status tide__cpu_expect_workspace(const struct tide_kernel_args *args, uint64_t need,
                                            struct tide_error *err);

/* Whether every value fits the int that cblas_sgemm takes for dimensions and strides. */
bool tide__cpu_fits_blas_int(int64_t a, int64_t b, int64_t c);

/* ============================================================================
 * Arithmetic
 * ========================================================================== */

/*
 * Sum of x[0..n) in double, with four partial sums combined in a fixed way:
 * deterministic, and about four times faster than one dependent chain.
 */
double tide__cpu_sum_row(const float *x, int64_t n);

/* ============================================================================
 * Broadcasting binary ops (elementwise.c)
 * ========================================================================== */

/*
 * One row of a broadcast over two inputs: output elements first .. first + n
 * (row-major), whose operands are a[j * sa] and b[j * sb] for j < n, each
 * stride 0 or 1. ctx is the caller's, read only.
 */
typedef void (*tide__cpu_broadcast_row_fn)(const void *ctx, const float *a, int64_t sa,
                                           const float *b, int64_t sb, int64_t first, int64_t n);

/*
 * Calls row for every row of out with a (shape a_shape) and b (b_shape)
 * broadcast to it by NumPy rules, as infer checked: adjacent axes that
 * broadcast alike are merged, so a row is as long as it can be. Rows run on
 * the pool in pieces that depend on the shapes only; equal shapes are one
 * row, cut into pieces.
 */
void tide__cpu_broadcast_rows(const struct tide_shape *out, const struct tide_shape *a_shape,
                              const float *a, const struct tide_shape *b_shape, const float *b,
                              tide__cpu_broadcast_row_fn row, const void *ctx);

/*
 * One row of a broadcast over three inputs (Select): output elements first ..
 * first + n, whose operands are in[k][j * strides[k]] for j < n, each stride
 * 0 or 1.
 */
typedef void (*tide__cpu_broadcast_row3_fn)(const void *ctx, const float *const *in,
                                            const int64_t *strides, int64_t first, int64_t n);

/* tide__cpu_broadcast_rows for three inputs, shapes[k] the shape of in[k]. */
void tide__cpu_broadcast_rows3(const struct tide_shape *out, const struct tide_shape *const *shapes,
                               const float *const *in, tide__cpu_broadcast_row3_fn row,
                               const void *ctx);

/*
 * The body of a row function: z[j] = EXPR for j < n, x and y being the
 * operands a[j * sa] and b[j * sb], written once per stride pattern so that
 * each is a plain loop the compiler can vectorise.
 */
#define TIDE__CPU_BINARY_ROW(EXPR)                                                                 \
    do {                                                                                           \
        if (sa && sb) {                                                                            \
            for (int64_t j = 0; j < n; j++) {                                                      \
                float x = a[j], y = b[j];                                                          \
                z[j] = (EXPR);                                                                     \
            }                                                                                      \
        } else if (sa) {                                                                           \
            float y = b[0];                                                                        \
            for (int64_t j = 0; j < n; j++) {                                                      \
                float x = a[j];                                                                    \
                z[j] = (EXPR);                                                                     \
            }                                                                                      \
        } else if (sb) {                                                                           \
            float x = a[0];                                                                        \
            for (int64_t j = 0; j < n; j++) {                                                      \
                float y = b[j];                                                                    \
                z[j] = (EXPR);                                                                     \
            }                                                                                      \
        } else {                                                                                   \
            float x = a[0], y = b[0], v = (EXPR);                                                  \
            for (int64_t j = 0; j < n; j++)                                                        \
                z[j] = v;                                                                          \
        }                                                                                          \
    } while (0)

/* ============================================================================
 * 2-D windows (Conv2D and the pools)
 * ========================================================================== */

/* A window slid over the H and W axes of an NCHW tensor. */
struct tide__cpu_window {
    int64_t kh, kw; /* window (kernel) height and width */
    int64_t sh, sw; /* strides */
    int64_t ph, pw; /* symmetric zero padding */
};

/*
 * MaxPool2D's answer for one window (output oh, ow of a plane of p): its
 * maximum, from -inf so that NaNs never win it, into *y, and its argmax (the
 * plane index of the first maximum in row-major order, from the window's
 * first cell, strict comparisons) into *argmax, as tide's kernels compute
 * them (pool.c). kernels/onednn/pool.c redoes with it the windows where
 * oneDNN's answer may differ.
 */
void tide__cpu_max_pool_window(const float *plane, const struct tide__kernel_pool *p, int64_t oh,
                               int64_t ow, float *y, int32_t *argmax);

/* ============================================================================
 * Threads (parallel.c)
 * ========================================================================== */

/* One task of a parallel job; worker is 0 .. max_workers-1 (e.g. a workspace slot). */
typedef void (*tide__cpu_task_fn)(void *ctx, int64_t task, int worker);

/*
 * Runs fn(ctx, task, worker) for every task in 0..n_tasks-1, spread over at
 * most max_workers threads of the pool (the caller is worker 0), and returns
 * when all are done. Tasks must write disjoint memory; which worker runs a
 * task must not change its result. Runs everything on the caller when the
 * pool has no workers or another kernel is using it.
 */
void tide__cpu_parallel(int64_t n_tasks, int max_workers, tide__cpu_task_fn fn, void *ctx);

/* Threads a parallel job may use, the caller included (1 until set_threads starts workers). */
int tide__cpu_workers(void);

/*
 * Elements one piece of a range job covers (see tide__cpu_parallel_for): 64
 * KiB of floats, enough that handing the piece to another thread (a futex
 * wake and a report back, some tens of microseconds) costs less than it saves.
 */
#define TIDE__CPU_GRAIN 16384

/* What a range job runs: items [begin, end) of its range; ctx is read only. */
typedef void (*tide__cpu_range_fn)(const void *ctx, int64_t begin, int64_t end);

/*
 * Runs fn over [0, n) in consecutive pieces of grain items (the last one
 * shorter), spread over the pool as the tasks of tide__cpu_parallel. The
 * pieces depend on n and grain only, never on the thread count, so a kernel
 * whose pieces write disjoint outputs, each in a fixed order, gives the same
 * bits on any number of threads. A range of one piece runs on the caller and
 * wakes no thread: small kernels cost no more than before the pool.
 */
void tide__cpu_parallel_for(int64_t n, int64_t grain, tide__cpu_range_fn fn, const void *ctx);

/* The grain for items of item_elements elements each: about TIDE__CPU_GRAIN elements. */
static inline int64_t tide__cpu_grain(int64_t item_elements)
{
    if (item_elements >= TIDE__CPU_GRAIN)
        return 1;
    return TIDE__CPU_GRAIN / (item_elements > 0 ? item_elements : 1);
}

/*
 * Pins OpenBLAS to one thread (its threaded GEMM is not reproducible across
 * thread counts); every kernel that calls OpenBLAS calls this first. Cheap
 * after the first call.
 */
void tide__cpu_blas_init(void);

/* ============================================================================
 * Workspace sizes (table.c dispatches to these)
 * ========================================================================== */

/* Conv2D and its two gradients: one image's im2col matrix, or 0 for a 1x1 pointwise filter. */
uint64_t tide__cpu_conv_workspace(const struct tide_graph *graph, const struct tide_node *node);

/* ReduceSum, ReduceMean, SumToShape, BiasAddGrad: one double accumulator per output element. */
uint64_t tide__cpu_reduce_workspace(const struct tide_graph *graph, const struct tide_node *node);

/* Attention and AttentionGrad: one block's accumulators per thread (attention.c). */
uint64_t tide__cpu_attention_workspace(const struct tide_graph *graph,
                                       const struct tide_node *node);

#endif /* TIDE_KERNELS_CPU_IMPL_H */
