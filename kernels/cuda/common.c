/* SPDX-License-Identifier: MIT */
/*
 * common.c: what the CUDA kernels share: the launch context read from the
 * kernel's args, the check functions behind TIDE_CUDA_CHECK and its
 * siblings, the workspace guard (cuDNN may want more than a failed query
 * planned), and the broadcast and reduction plans that the device half walks.
 * What infer guarantees is asserted by kernels/check.c, as on the CPU.
 *
 * Threads: everything here is pure; a kernel's stream and handles come in
 * its args, so the executor's threads may launch on different streams at once.
 */
#include "kernels/cuda/cuda-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

/* ============================================================================
 * The launch context
 * ========================================================================== */

enum tide_status tide__cuda_context(const struct tide_kernel_args *args,
                                    struct tide_cuda_launch **launch, struct tide_error *err)
{
    *launch = args->stream;
    if (*launch)
        return TIDE_OK;
    return tide_node_error(err, TIDE_STATE, args->node,
                           "a CUDA kernel was called without its stream (args->stream is NULL)");
}

enum tide_status tide__cuda_blas_math(const struct tide_kernel_args *args,
                                      struct tide_cuda_launch *launch, struct tide_error *err)
{
    cublasMath_t mode = tide_node_math(args->node) == TIDE_MATH_TF32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                     : CUBLAS_DEFAULT_MATH;
    return TIDE_CUBLAS_CHECK(err, cublasSetMathMode(launch->cublas, mode));
}

/* ============================================================================
 * Check functions
 * ========================================================================== */

/* The file's base name: messages say "conv.c:120", not the build machine's paths. */
static const char *base_name(const char *file)
{
    const char *slash = strrchr(file, '/');
    return slash ? slash + 1 : file;
}

/* Logs and records one failed call; returns status. */
static enum tide_status report(enum tide_status status, const char *library_error, const char *call,
                               const char *file, int line, struct tide_error *err)
{
    tide_log_write(TIDE_LOG_ERROR, file, line, "%s failed: %s", call, library_error);
    return tide_error_set(err, status, "%s failed at %s:%d: %s", call, base_name(file), line,
                          library_error);
}

enum tide_status tide__cuda_status(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess:
        return TIDE_OK;
    case cudaErrorMemoryAllocation:
        return TIDE_NOMEM;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
        return TIDE_INVALID;
    case cudaErrorNotReady:
        return TIDE_UNAVAILABLE;
    case cudaErrorNotSupported:
        return TIDE_UNSUPPORTED;
    default:
        return TIDE_DEVICE;
    }
}

enum tide_status tide__cuda_check(cudaError_t rc, const char *call, const char *file, int line,
                                  struct tide_error *err)
{
    if (rc == cudaSuccess)
        return TIDE_OK;
    /*
     * Reset the thread's last error, which the runtime also set: otherwise
     * the next launcher's cudaGetLastError() would blame its kernel for this
     * failure. An error that corrupts the context stays, as it must.
     */
    (void)cudaGetLastError();
    char text[160];
    snprintf(text, sizeof(text), "%s (%s)", cudaGetErrorString(rc), cudaGetErrorName(rc));
    return report(tide__cuda_status(rc), text, call, file, line, err);
}

enum tide_status tide__cublas_check(cublasStatus_t rc, const char *call, const char *file, int line,
                                    struct tide_error *err)
{
    if (rc == CUBLAS_STATUS_SUCCESS)
        return TIDE_OK;
    enum tide_status st = TIDE_DEVICE;
    if (rc == CUBLAS_STATUS_ALLOC_FAILED)
        st = TIDE_NOMEM;
    else if (rc == CUBLAS_STATUS_NOT_SUPPORTED || rc == CUBLAS_STATUS_ARCH_MISMATCH)
        st = TIDE_UNSUPPORTED;
    else if (rc == CUBLAS_STATUS_INVALID_VALUE)
        st = TIDE_INVALID;
    char text[160];
    snprintf(text, sizeof(text), "%s (%s)", cublasGetStatusString(rc), cublasGetStatusName(rc));
    return report(st, text, call, file, line, err);
}

enum tide_status tide__cudnn_check(cudnnStatus_t rc, const char *call, const char *file, int line,
                                   struct tide_error *err)
{
    if (rc == CUDNN_STATUS_SUCCESS)
        return TIDE_OK;
    enum tide_status st = TIDE_DEVICE;
    if (rc == CUDNN_STATUS_ALLOC_FAILED)
        st = TIDE_NOMEM;
    else if (rc == CUDNN_STATUS_NOT_SUPPORTED)
        st = TIDE_UNSUPPORTED;
    else if (rc == CUDNN_STATUS_BAD_PARAM)
        st = TIDE_INVALID;
    return report(st, cudnnGetErrorString(rc), call, file, line, err);
}

/* ============================================================================
 * The workspace guard
 * ========================================================================== */

enum tide_status tide__cuda_expect_workspace(const struct tide_kernel_args *args, uint64_t need,
                                             struct tide_error *err)
{
    if (need == 0 || (args->workspace && args->workspace_bytes >= need))
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, args->node,
                           "the kernel needs %" PRIu64 " bytes of workspace, but got %" PRIu64,
                           need, args->workspace ? args->workspace_bytes : 0);
}

/* ============================================================================
 * Plans
 * ========================================================================== */

bool tide__cuda_broadcast_plan(struct tide__cuda_broadcast *plan, const struct tide_shape *out,
                               const struct tide_shape *const *ins, int n_in)
{
    int32_t rank = out->rank;
    int64_t full[TIDE_CUDA_BROADCAST_INPUTS][TIDE_MAX_RANK];
    assert(n_in >= 1 && n_in <= TIDE_CUDA_BROADCAST_INPUTS);
    memset(plan, 0, sizeof(*plan));
    for (int k = 0; k < n_in; k++) {
        const struct tide_shape *in = ins[k];
        if (in->rank > rank)
            return false;
        int64_t stride = 1;
        for (int32_t d = rank - 1; d >= 0; d--) {
            int32_t src = d - (rank - in->rank);
            int64_t dim = src >= 0 ? in->dims[src] : 1;
            if (dim != 1 && dim != out->dims[d])
                return false;
            full[k][d] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
    /* Drop axes of size 1; merge an axis into the previous one where every input allows it. */
    for (int32_t d = 0; d < rank; d++) {
        int64_t dim = out->dims[d];
        if (dim == 1)
            continue;
        int32_t r = plan->rank;
        bool merge = r > 0;
        for (int k = 0; merge && k < n_in; k++)
            merge = plan->strides[k][r - 1] == full[k][d] * dim;
        if (merge) {
            plan->dims[r - 1] *= dim;
            for (int k = 0; k < n_in; k++)
                plan->strides[k][r - 1] = full[k][d];
        } else {
            plan->dims[r] = dim;
            for (int k = 0; k < n_in; k++)
                plan->strides[k][r] = full[k][d];
            plan->rank++;
        }
    }
    return true;
}

void tide__cuda_reduce_plan(struct tide__cuda_reduce *plan, const struct tide_shape *xs,
                            const bool *reduced)
{
    /* Merge runs of neighbouring axes of one kind; an axis's stride is its inner neighbour's. */
    int64_t dims[TIDE_MAX_RANK], strides[TIDE_MAX_RANK];
    bool red[TIDE_MAX_RANK];
    int32_t rank = 0;
    for (int32_t d = 0; d < xs->rank; d++) {
        if (xs->dims[d] == 1)
            continue;
        if (rank > 0 && red[rank - 1] == reduced[d]) {
            dims[rank - 1] *= xs->dims[d];
        } else {
            dims[rank] = xs->dims[d];
            red[rank] = reduced[d];
            rank++;
        }
    }
    int64_t stride = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        strides[d] = stride;
        stride *= dims[d];
    }
    memset(plan, 0, sizeof(*plan));
    plan->n_out = 1;
    plan->n_reduced = 1;
    for (int32_t d = 0; d < rank; d++) {
        if (red[d]) {
            plan->reduced_dims[plan->reduced_rank] = dims[d];
            plan->reduced_strides[plan->reduced_rank++] = strides[d];
            plan->n_reduced *= dims[d];
        } else {
            plan->kept_dims[plan->kept_rank] = dims[d];
            plan->kept_strides[plan->kept_rank++] = strides[d];
            plan->n_out *= dims[d];
        }
    }
    /* A dim of 0 is never dropped, so an empty input gives n_out or n_reduced 0 as it should. */
}
