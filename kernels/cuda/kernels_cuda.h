/* SPDX-License-Identifier: MIT */
/*
 * kernels_cuda.h: the CUDA kernels (kernels/cuda) as the CUDA backend sees
 * them, and the check macros every CUDA, cuBLAS and cuDNN call goes through.
 *
 * The table tide_cuda_kernels has the type of the CPU one (kernels.h) and is
 * generated from graph/ops.def the same way, with the same NULL entries for
 * the source and memory ops. A CUDA kernel needs more than its arguments: the
 * stream to enqueue on and the cuBLAS and cuDNN handles bound to that stream.
 * The backend passes them in a struct tide_cuda_launch as args->stream (the
 * field kernels.h keeps opaque), on its own copy of the executor's args,
 * then calls the table's function, which enqueues its work and returns; it
 * never waits for the device. There is no thread-local state: two threads
 * may launch on two streams at once. Called with args->stream NULL, a kernel
 * fails with TIDE_STATE; workspace_bytes takes the same context as its first
 * argument and answers 0 without one for the ops whose workspace only cuDNN
 * can size (the launch then fails with the numbers).
 *
 * Data faults. Some faults can only be seen on the device, where the data is:
 * a label outside [0, C) in SoftmaxCrossEntropy, an index outside its range
 * in Gather, GatherGrad, TopKGrad or MoeRoute. A kernel that checks such a
 * thing writes the first fault into the stream's fault record (pinned host
 * memory mapped into the device) with the tag of its launch, and sets
 * launch->fault_armed so that the backend remembers which node had that tag.
 * The backend reads the record after the stream has drained (stream_sync) and
 * turns it into the stream's error, naming the node. The kernel itself never
 * reads out of bounds: a faulty example gets NaN.
 *
 * Check macros. Each evaluates the call once and gives an enum tide_status:
 * TIDE_OK on success; otherwise it logs the call, its file and line and the
 * library's error string, fills err (which may be NULL) with the same, and
 * gives TIDE_NOMEM for an allocation failure, TIDE_UNSUPPORTED for a
 * configuration the library does not support, TIDE_DEVICE for the rest. They
 * never abort: the daemon must survive a failed kernel or an out-of-memory.
 *
 * Only CUDA builds compile this header (it includes the CUDA headers): the
 * runtime's CUDA backend, the CUDA kernels and the GPU benchmarks.
 *
 * Example usage (what the CUDA backend does for one launch):
 *
 *     struct tide_cuda_launch launch = {.stream = s, .cublas = b, .cudnn = d,
 *                                       .fault = fault, .tag = tag};
 *     struct tide_kernel_args with_stream = *args;
 *     with_stream.stream = &launch;
 *     enum tide_status st = tide_cuda_kernels.fn[node->op](&with_stream, &err);
 *
 *     st = TIDE_CUDA_CHECK(&err, cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, s));
 */
#ifndef TIDE_KERNELS_CUDA_KERNELS_CUDA_H
#define TIDE_KERNELS_CUDA_KERNELS_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA kernels. */
extern const struct tide_kernel_table tide_cuda_kernels;

/* ============================================================================
 * Launch context
 * ========================================================================== */

/* Kinds of data fault a kernel can report from the device. */
enum tide_cuda_fault_code {
    TIDE_CUDA_FAULT_NONE = 0,
    TIDE_CUDA_FAULT_LABEL = 1, /* labels[index] = value is outside [0, limit) */
    TIDE_CUDA_FAULT_INDEX = 2, /* an int32 index input's [index] = value is outside [0, limit) */
    TIDE_CUDA_FAULT_SIGNED_INDEX = 3, /* likewise, outside [-limit, limit) (GatherElements) */
};

/*
 * The first data fault on a stream since it was last synchronised. The
 * device writes it (code last, after a fence); the host reads it after the
 * stream has drained and clears it.
 */
struct tide_cuda_fault {
    int32_t code; /* enum tide_cuda_fault_code; TIDE_CUDA_FAULT_NONE when clear */
    uint32_t tag; /* the tag of the launch that found it */
    int64_t index;
    int64_t value;
    int64_t limit;
};

/*
 * What a CUDA kernel needs besides its tensors, passed as args->stream; the
 * backend owns every member and the struct lives for the one launch call.
 */
struct tide_cuda_launch {
    cudaStream_t stream;           /* where the kernel enqueues its work */
    cublasHandle_t cublas;         /* bound to stream */
    cudnnHandle_t cudnn;           /* bound to stream (or, for workspace queries, to none) */
    struct tide_cuda_fault *fault; /* the stream's fault record, as a device pointer */
    uint32_t tag;                  /* this launch's tag, for the fault record */
    bool fault_armed;              /* set by a kernel that may write the fault record */
};

/*
 * Enqueues a fill of words 32-bit words at dst (device memory, 4-byte
 * aligned) with pattern on stream; returns the launch's error.
 */
cudaError_t tide_cuda_fill32(void *dst, uint32_t pattern, uint64_t words, cudaStream_t stream);

/* ============================================================================
 * Check macros
 * ========================================================================== */

/*
 * The functions behind the macros: rc is the call's result, call its text.
 * Each returns TIDE_OK for success, else logs, fills err and maps rc.
 */
enum tide_status tide__cuda_check(cudaError_t rc, const char *call, const char *file, int line,
                                  struct tide_error *err);
enum tide_status tide__cublas_check(cublasStatus_t rc, const char *call, const char *file, int line,
                                    struct tide_error *err);
enum tide_status tide__cudnn_check(cudnnStatus_t rc, const char *call, const char *file, int line,
                                   struct tide_error *err);

#define TIDE_CUDA_CHECK(err, call)   tide__cuda_check((call), #call, __FILE__, __LINE__, (err))
#define TIDE_CUBLAS_CHECK(err, call) tide__cublas_check((call), #call, __FILE__, __LINE__, (err))
#define TIDE_CUDNN_CHECK(err, call)  tide__cudnn_check((call), #call, __FILE__, __LINE__, (err))

/* Maps a CUDA error to a status without logging (for results that are expected). */
enum tide_status tide__cuda_status(cudaError_t rc);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CUDA_KERNELS_CUDA_H */
