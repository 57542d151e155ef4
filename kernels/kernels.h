/* SPDX-License-Identifier: MIT */
/*
 * kernels.h: the interface between the executor and the kernels of a backend.
 *
 * One kernel per compute op of graph/ops.def, in a table indexed by enum
 * tide_op and generated from ops.def, so no op can be forgotten: a missing
 * kernel is a link error. Source ops (Placeholder, Variable, Const) and the
 * memory ops (Fetch, WriteBack, SwapOut, SwapIn) have no kernel: the executor
 * implements them as copies, and their table entries are NULL.
 *
 * A kernel reads its inputs and writes its outputs through tensor views that
 * point into the job's arena (device memory of the backend: host memory on the
 * CPU backend). It never allocates: scratch space comes from the workspace the
 * memory planner reserved, workspace_bytes() of the same table saying how much.
 * What a kernel needs from its backend besides memory (the stream to enqueue
 * on, library handles) comes in args->stream, never from global or
 * thread-local state, so any thread may launch on any stream.
 * UPDATE ops (ApplySGD, ApplyMomentum, ApplyAdam) write inputs[0] (and their
 * optimizer state inputs) in place.
 *
 * CPU kernels are the reference: plain C, OpenBLAS for GEMM, oneDNN for the
 * convolutions where built with it, deterministic — the same inputs give the
 * same bits whatever the thread count.
 *
 * Example usage (what the CPU backend does for one node):
 *
 *     tide_kernel_fn fn = tide_cpu_kernels.fn[node->op];
 *     enum tide_status st = fn(&args, &err); // args.stream is NULL on the CPU
 */
#ifndef TIDE_KERNELS_KERNELS_H
#define TIDE_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor as a kernel sees it: data in the backend's device memory. */
struct tide_tensor_view {
    void *data;
    enum tide_dtype dtype;
    struct tide_shape shape;
    uint64_t nbytes;
};

struct tide_kernel_args {
    const struct tide_node *node; /* op and attributes (after tide_graph_infer) */
    uint32_t n_inputs;
    const struct tide_tensor_view *inputs;
    uint32_t n_outputs;
    const struct tide_tensor_view *outputs;
    void *workspace; /* workspace_bytes(node) bytes, or NULL when 0 */
    uint64_t workspace_bytes;
    /*
     * The backend's stream for this launch, opaque to the executor: the
     * backend's launch sets it on its own copy of the args before it calls
     * the kernel. CPU: NULL (the kernels' pool is process-wide). CUDA: a
     * struct tide_cuda_launch (kernels/cuda/kernels_cuda.h), the cudaStream_t
     * with the cuBLAS and cuDNN handles bound to it.
     */
    void *stream;
    /* The executor's 1-based step counter, read when the kernel runs (Adam). */
    const uint64_t *step;
    /* The job's seed (the executor's options), which keys Dropout's masks. */
    uint64_t seed;
    /*
     * Whether the running step trains (tide_executor_step) rather than
     * evaluates (a masked step, where Dropout is the identity); read when
     * the kernel runs, like step. NULL, as in args built by hand, is an
     * evaluation.
     */
    const bool *training;
};

typedef enum tide_status (*tide_kernel_fn)(const struct tide_kernel_args *args,
                                           struct tide_error *err);

struct tide_kernel_table {
    const char *name;
    tide_kernel_fn fn[TIDE_OP_COUNT];
    /*
     * Scratch bytes a node's kernel needs (im2col buffers, ...); 0 for most.
     * stream is what args->stream would be (CUDA: a struct tide_cuda_launch
     * whose cuDNN handle sizes the convolutions; CPU: NULL).
     */
    uint64_t (*workspace_bytes)(void *stream, const struct tide_graph *graph,
                                const struct tide_node *node);
};

/* The CPU kernels (kernels/cpu). */
extern const struct tide_kernel_table tide_cpu_kernels;

/*
 * Fills a Variable's initial value into dst (host memory, node's output 0
 * nbytes), from its init/scale/seed/value attributes and the job's seed.
 * Deterministic: a counter-based generator keyed by (job seed, the node's
 * seed attribute, the node's name), independent of threads and order.
 *   zeros, ones, constant (= scale), value (the value attribute),
 *   normal (mean 0, stddev scale), uniform ([-scale, scale)),
 *   glorot_uniform (uniform with limit scale*sqrt(6/(fan_in+fan_out))),
 *   he_normal (normal with stddev scale*sqrt(2/fan_in)).
 * fan_in/fan_out: rank 2 [in, out]; rank 4 [K, C, R, S]: fan_in = C*R*S,
 * fan_out = K*R*S; rank 1: fan_in = fan_out = dims[0].
 */
enum tide_status tide_variable_init(const struct tide_node *node, uint64_t job_seed, void *dst,
                                    struct tide_error *err);

/*
 * Sets the number of threads of the CPU kernels' pool, the caller included,
 * at most 64 (0: OpenBLAS's count at start-up, which is the number of cores
 * unless OPENBLAS_NUM_THREADS says otherwise). OpenBLAS itself always runs on one thread, because its threaded
 * sgemm gives different bits at different thread counts; the pool splits
 * work at boundaries that depend only on tensor shapes, so the thread count
 * changes speed, never results. Safe to call at any time.
 */
void tide_cpu_kernels_set_threads(int threads);

/*
 * Whether this build of the CPU kernels can run Conv2D, MaxPool2D, the
 * average pools, BatchNorm and their gradients (but MaxPool2DGrad's) through
 * oneDNN: built with libdnnl, its CPU engine started, and not turned off by
 * TIDE_CPU_ONEDNN=0 at the first use (which no later call undoes).
 */
bool tide_cpu_kernels_onednn_available(void);

/*
 * Turns oneDNN on or off (on by default where available, off when
 * TIDE_CPU_ONEDNN=0 is in the environment). Off, the CPU kernels' own
 * convolutions (im2col + sgemm), pools and batch norms run every case, as
 * they do where oneDNN has no primitive or is not chosen. Takes effect for
 * workspace sizes asked after the call: switch before a plan is made, not
 * between planning and running it.
 */
void tide_cpu_kernels_use_onednn(bool on);

/*
 * Sends pooling (MaxPool2D, AvgPool2D, GlobalAvgPool and the average pools'
 * gradients) and BatchNorm (and BatchNormGrad) through oneDNN for every
 * shape it has a primitive for (on), rather than only for the shapes where
 * it measured faster than the CPU kernels' own (off, the default; on when
 * TIDE_CPU_ONEDNN=all is in the environment). Tests use it to compare the
 * two on every case. Has no effect while oneDNN is off. As for
 * tide_cpu_kernels_use_onednn, switch before a plan is made, not between
 * planning and running it.
 */
void tide_cpu_kernels_onednn_everywhere(bool on);

/*
 * How many kernel calls of op (Conv2D, Conv2DBackpropInput,
 * Conv2DBackpropFilter, MaxPool2D, AvgPool2D, AvgPool2DGrad, GlobalAvgPool,
 * GlobalAvgPoolGrad, BatchNorm, BatchNormGrad) oneDNN has run in this
 * process: tests use it to see that a case really took oneDNN's path. 0 for
 * other ops, and without oneDNN.
 */
uint64_t tide_cpu_kernels_onednn_runs(enum tide_op op);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_KERNELS_H */
