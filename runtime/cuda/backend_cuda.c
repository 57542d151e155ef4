/* SPDX-License-Identifier: MIT */
/*
 * backend_cuda.c: the CUDA backend: one GPU behind the iface of
 * runtime/backend.h, with the semantics the CPU backend emulates
 * (runtime/cpu/backend_cpu.c) taken from CUDA itself.
 *
 * DESIGN
 * ------
 *
 * Memory. An arena is one cudaMalloc of exactly the bytes asked for. The
 * backend offers jobs the memory that was free on the GPU when it was
 * created, less a headroom for what it allocates outside arenas (each
 * stream's cuBLAS workspace and the libraries' own buffers); it keeps the
 * list of live arenas and their sum under its mutex, and refuses an arena
 * that would take the sum past the offer, with the numbers, as the CPU
 * backend does for its emulated device. Host memory is pinned
 * (cudaHostAlloc, portable), so copies from and to it are asynchronous DMA;
 * the daemon's host pool sits on top and allocates once.
 *
 * Streams. A tide stream is a CUDA stream created non-blocking (it never
 * synchronises with the legacy default stream), with its own cuBLAS handle
 * and cuDNN handle bound to it. The cuBLAS handle gets a fixed workspace
 * (cublasSetWorkspace; 32 MiB on Hopper and later, 4 MiB before, NVIDIA's
 * recommendation), the default FP32 math mode (each GEMM launch sets its
 * node's: kernels/cuda/common.c) and no atomics, so its GEMMs are
 * reproducible bit for bit without CUBLAS_WORKSPACE_CONFIG.
 * Launch passes the stream, the handles and the stream's fault record to the
 * kernel of tide_cuda_kernels in its args (args->stream, a struct
 * tide_cuda_launch on the launch's own copy of the args), and the kernel
 * enqueues its work: a launch returns as soon as the work is enqueued, like
 * every enqueue call here.
 *
 * Events are CUDA events with timing, so they order streams
 * (cudaStreamWaitEvent) and time them (cudaEventElapsedTime). An event that
 * was never recorded counts as reached, in CUDA as on the CPU backend.
 *
 * Sticky errors. A stream has one error, set by the first failure of work
 * enqueued on it: a kernel that refuses its arguments, a CUDA, cuBLAS or
 * cuDNN call that fails while enqueueing (the check macros log its call, file
 * and line), a kernel without a CUDA implementation. Enqueue calls still
 * return TIDE_OK, as on the CPU backend, so that the message, which names the
 * node, reaches the executor through stream_sync; later launches, copies and
 * fills on that stream are skipped until then, while event records and waits
 * still go through so no other stream waits forever. Faults only the device
 * can see (a label out of range) go to the stream's fault record, in mapped
 * pinned memory: stream_sync reads it once the stream has drained and names
 * the node that found it (the launch's tag indexes the stream's list of
 * launches that may write the record). stream_sync also returns what
 * cudaStreamSynchronize reports (an asynchronous fault of a kernel). It
 * returns the earliest failure and clears the stream's state. Nothing here
 * aborts: the daemon must survive a failed kernel or an out-of-memory.
 *
 * Threads, and what each touches:
 *  - Host threads call the iface. The caller serialises calls on one stream
 *    (as on the CPU backend), so a stream's own fields (its error, fault
 *    sites, handles) need no lock; kernels get them in their args, so
 *    nothing is thread-local.
 *  - The backend's mutex guards the arena list and the planning cuDNN handle
 *    (workspace queries may come from any thread).
 *  - Every entry that calls CUDA first makes the backend's device current
 *    (cudaSetDevice is per thread and cheap when already current), so any
 *    host thread may drive the backend.
 * There are no threads of our own: CUDA streams are the workers.
 */
#include "runtime/cuda/backend_cuda.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runtime/backend-impl.h"
#include "kernels/cuda/kernels_cuda.h"

/* What the backend keeps out of the offer: cuBLAS workspaces, library buffers. */
#define CUDA_HEADROOM_MAX (UINT64_C(1) << 30)
#define CUDA_HEADROOM_MIN (UINT64_C(256) << 20)
/* cuBLAS workspace per stream: NVIDIA's recommendation for Hopper and later, and before. */
#define CUBLAS_WORKSPACE_HOPPER (UINT64_C(32) << 20)
#define CUBLAS_WORKSPACE_OLDER  (UINT64_C(4) << 20)

/* ============================================================================
 * Types
 * ========================================================================== */

struct cuda_arena {
    void *base;
    uint64_t bytes;
};

struct cuda_backend {
    /* Immutable after creation. */
    int device;
    char name[256];            /* "NVIDIA H100 80GB HBM3 (cuda:0, sm_90)" */
    uint64_t offered;          /* the bytes jobs' arenas may take in all */
    uint64_t cublas_workspace; /* bytes of each stream's cuBLAS workspace */

    /* Under mutex. */
    pthread_mutex_t mutex;
    cudnnHandle_t planning; /* workspace queries: bound to no stream */
    struct cuda_arena *arenas;
    size_t n_arenas;
    size_t cap_arenas;
    uint64_t in_use; /* sum of the live arenas' bytes */
};

/* A launch that may write the fault record, remembered until stream_sync. */
struct fault_site {
    enum tide_op op;
    char name[TIDE_MAX_NAME + 1];
};

struct tide_stream {
    struct cuda_backend *backend;
    cudaStream_t stream;
    cublasHandle_t cublas;
    cudnnHandle_t cudnn;
    void *cublas_workspace;               /* device memory, fixed for the handle's life */
    struct tide_cuda_fault *fault_host;   /* mapped pinned memory: the host's view */
    struct tide_cuda_fault *fault_device; /* the same record as the device addresses it */
    struct fault_site *sites;             /* site i has tag i */
    uint32_t n_sites;
    uint32_t cap_sites;
    struct tide_error error; /* the sticky error; status TIDE_OK when none */
};

struct tide_event {
    cudaEvent_t event;
    bool recorded; /* ever recorded: elapsed times need both ends */
};

/* ============================================================================
 * Helpers
 * ========================================================================== */

/* Makes the backend's device current for the calling thread. */
static enum tide_status cuda_enter(const struct cuda_backend *cuda, struct tide_error *err)
{
    return TIDE_CUDA_CHECK(err, cudaSetDevice(cuda->device));
}

/* Records err as the stream's sticky error unless it already has one. */
static void stream_fail(struct tide_stream *stream, const struct tide_error *err)
{
    if (stream->error.status != TIDE_OK)
        return;
    stream->error = *err;
    if (stream->error.status == TIDE_OK)
        stream->error.status = TIDE_INTERNAL;
}

/* Records the result of an enqueue: a failure becomes sticky; the caller returns TIDE_OK. */
static enum tide_status stream_enqueued(struct tide_stream *stream, enum tide_status st,
                                        struct tide_error *err)
{
    if (st != TIDE_OK) {
        err->status = st;
        stream_fail(stream, err);
    }
    return TIDE_OK;
}

/* ============================================================================
 * The iface: memory
 * ========================================================================== */

static void cuda_device_info(void *context, char *name, size_t name_size, uint64_t *total_bytes)
{
    struct cuda_backend *cuda = context;
    if (name && name_size > 0)
        snprintf(name, name_size, "%s", cuda->name);
    if (total_bytes)
        *total_bytes = cuda->offered;
}

static enum tide_status cuda_arena_alloc(void *context, uint64_t bytes, void **base,
                                         struct tide_error *err)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = TIDE_OK;
    pthread_mutex_lock(&cuda->mutex);
    if (bytes > cuda->offered - cuda->in_use) {
        st = tide_error_set(err, TIDE_NOMEM,
                            "arena of %" PRIu64 " bytes does not fit the GPU's offer: %" PRIu64
                            " of %" PRIu64 " bytes in use, %" PRIu64 " free",
                            bytes, cuda->in_use, cuda->offered, cuda->offered - cuda->in_use);
        goto out;
    }
    if (cuda->n_arenas == cuda->cap_arenas) {
        size_t cap = cuda->cap_arenas ? cuda->cap_arenas * 2 : 8;
        struct cuda_arena *arenas = realloc(cuda->arenas, cap * sizeof(*arenas));
        if (!arenas) {
            st = tide_error_set(err, TIDE_NOMEM, "out of memory for the arena list");
            goto out;
        }
        cuda->arenas = arenas;
        cuda->cap_arenas = cap;
    }
    void *p = NULL;
    st = cuda_enter(cuda, err);
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaMalloc(&p, (size_t)bytes));
    if (st != TIDE_OK) {
        tide_error_prefix(err, "arena of %" PRIu64 " bytes", bytes);
        goto out;
    }
    cuda->arenas[cuda->n_arenas++] = (struct cuda_arena){.base = p, .bytes = bytes};
    cuda->in_use += bytes;
    *base = p;
out:
    pthread_mutex_unlock(&cuda->mutex);
    return st;
}

static void cuda_arena_free(void *context, void *base)
{
    struct cuda_backend *cuda = context;
    bool found = false;
    pthread_mutex_lock(&cuda->mutex);
    for (size_t i = 0; i < cuda->n_arenas; i++) {
        if (cuda->arenas[i].base == base) {
            cuda->in_use -= cuda->arenas[i].bytes;
            cuda->arenas[i] = cuda->arenas[--cuda->n_arenas];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&cuda->mutex);
    if (!found) {
        TIDE_LOG_ERROR("cuda backend: arena_free of %p, which is not a live arena; ignored", base);
        return;
    }
    /* cudaFree waits for work using the memory; a failure is logged and the memory lost. */
    if (cuda_enter(cuda, NULL) == TIDE_OK)
        (void)TIDE_CUDA_CHECK(NULL, cudaFree(base));
}

static enum tide_status cuda_host_alloc(void *context, uint64_t bytes, void **ptr,
                                        struct tide_error *err)
{
    struct cuda_backend *cuda = context;
    void *p = NULL;
    enum tide_status st = cuda_enter(cuda, err);
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaHostAlloc(&p, (size_t)bytes, cudaHostAllocPortable));
    if (st != TIDE_OK)
        return tide_error_prefix(err, "pinned host buffer of %" PRIu64 " bytes", bytes);
    *ptr = p;
    return TIDE_OK;
}

static void cuda_host_free(void *context, void *ptr)
{
    struct cuda_backend *cuda = context;
    if (cuda_enter(cuda, NULL) == TIDE_OK)
        (void)TIDE_CUDA_CHECK(NULL, cudaFreeHost(ptr));
}

/* ============================================================================
 * The iface: streams
 * ========================================================================== */

/* Releases whatever a stream holds; every member may be unset. Waits for its work first. */
static void stream_destroy(struct tide_stream *stream)
{
    if (stream->stream)
        (void)TIDE_CUDA_CHECK(NULL, cudaStreamSynchronize(stream->stream));
    if (stream->cudnn)
        (void)TIDE_CUDNN_CHECK(NULL, cudnnDestroy(stream->cudnn));
    if (stream->cublas)
        (void)TIDE_CUBLAS_CHECK(NULL, cublasDestroy(stream->cublas));
    if (stream->cublas_workspace)
        (void)TIDE_CUDA_CHECK(NULL, cudaFree(stream->cublas_workspace));
    if (stream->stream)
        (void)TIDE_CUDA_CHECK(NULL, cudaStreamDestroy(stream->stream));
    if (stream->fault_host)
        (void)TIDE_CUDA_CHECK(NULL, cudaFreeHost(stream->fault_host));
    free(stream->sites);
    free(stream);
}

static enum tide_status cuda_stream_new(void *context, struct tide_stream **out,
                                        struct tide_error *err)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = cuda_enter(cuda, err);
    if (st != TIDE_OK)
        return st;
    struct tide_stream *stream = calloc(1, sizeof(*stream));
    if (!stream)
        return tide_error_set(err, TIDE_NOMEM, "out of memory for a stream");
    stream->backend = cuda;
    stream->error.status = TIDE_OK;

    st = TIDE_CUDA_CHECK(err, cudaStreamCreateWithFlags(&stream->stream, cudaStreamNonBlocking));
    /* cuBLAS: bound to the stream, a fixed workspace, plain FP32 math, no atomics. */
    if (st == TIDE_OK)
        st = TIDE_CUBLAS_CHECK(err, cublasCreate(&stream->cublas));
    if (st == TIDE_OK)
        st = TIDE_CUBLAS_CHECK(err, cublasSetStream(stream->cublas, stream->stream));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err,
                             cudaMalloc(&stream->cublas_workspace, (size_t)cuda->cublas_workspace));
    if (st == TIDE_OK)
        st = TIDE_CUBLAS_CHECK(err, cublasSetWorkspace(stream->cublas, stream->cublas_workspace,
                                                       (size_t)cuda->cublas_workspace));
    if (st == TIDE_OK)
        st = TIDE_CUBLAS_CHECK(err, cublasSetMathMode(stream->cublas, CUBLAS_DEFAULT_MATH));
    if (st == TIDE_OK)
        st = TIDE_CUBLAS_CHECK(err,
                               cublasSetAtomicsMode(stream->cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
    if (st == TIDE_OK)
        st = TIDE_CUBLAS_CHECK(err, cublasSetPointerMode(stream->cublas, CUBLAS_POINTER_MODE_HOST));
    /* cuDNN: bound to the stream. */
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnCreate(&stream->cudnn));
    if (st == TIDE_OK)
        st = TIDE_CUDNN_CHECK(err, cudnnSetStream(stream->cudnn, stream->stream));
    /* The fault record: pinned host memory the device writes to. */
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaHostAlloc((void **)&stream->fault_host,
                                                sizeof(*stream->fault_host),
                                                cudaHostAllocMapped | cudaHostAllocPortable));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(
            err, cudaHostGetDevicePointer((void **)&stream->fault_device, stream->fault_host, 0));
    if (st != TIDE_OK) {
        tide_error_prefix(err, "cuda backend: creating a stream");
        stream_destroy(stream);
        return st;
    }
    memset(stream->fault_host, 0, sizeof(*stream->fault_host));
    *out = stream;
    return TIDE_OK;
}

static void cuda_stream_free(void *context, struct tide_stream *stream)
{
    struct cuda_backend *cuda = context;
    if (stream->error.status != TIDE_OK)
        TIDE_LOG_WARN("cuda backend: stream freed with an error nobody synced: %s",
                      stream->error.message);
    (void)cuda_enter(cuda, NULL);
    stream_destroy(stream);
}

/* The stream's device fault, if any, as an error naming the node; clears the record. */
static enum tide_status stream_take_fault(struct tide_stream *stream, struct tide_error *err)
{
    volatile struct tide_cuda_fault *fault = stream->fault_host;
    if (fault->code == TIDE_CUDA_FAULT_NONE)
        return TIDE_OK;
    int32_t code = fault->code;
    uint32_t tag = fault->tag;
    int64_t index = fault->index, value = fault->value, limit = fault->limit;
    memset((void *)stream->fault_host, 0, sizeof(*stream->fault_host));
    const char *name = tag < stream->n_sites ? stream->sites[tag].name : "?";
    const char *op = tag < stream->n_sites ? tide_op_info(stream->sites[tag].op)->name : "?";
    if (code == TIDE_CUDA_FAULT_LABEL)
        return tide_error_set(err, TIDE_INVALID,
                              "node \"%s\" (%s): label %" PRId64 " of example %" PRId64
                              " is out of range [0, %" PRId64 ")",
                              name, op, value, index, limit);
    if (code == TIDE_CUDA_FAULT_INDEX)
        return tide_error_set(err, TIDE_INVALID,
                              "node \"%s\" (%s): index %" PRId64 " at position %" PRId64
                              " is out of range [0, %" PRId64 ")",
                              name, op, value, index, limit);
    if (code == TIDE_CUDA_FAULT_SIGNED_INDEX)
        return tide_error_set(err, TIDE_INVALID,
                              "node \"%s\" (%s): index %" PRId64 " at position %" PRId64
                              " is out of range [%" PRId64 ", %" PRId64 ")",
                              name, op, value, index, -limit, limit);
    return tide_error_set(err, TIDE_INTERNAL, "node \"%s\" (%s): unknown device fault %" PRId32,
                          name, op, code);
}

static enum tide_status cuda_stream_sync(void *context, struct tide_stream *stream,
                                         struct tide_error *err)
{
    struct cuda_backend *cuda = context;
    struct tide_error sync_err = {0}, fault_err = {0};
    enum tide_status sync = cuda_enter(cuda, &sync_err);
    if (sync == TIDE_OK)
        sync = TIDE_CUDA_CHECK(&sync_err, cudaStreamSynchronize(stream->stream));
    /*
     * The earliest failure wins. A device fault came from a launch before any
     * enqueue failure (launches after one are skipped); an asynchronous CUDA
     * error is the least precise, so it comes last.
     */
    enum tide_status fault = stream_take_fault(stream, &fault_err);
    struct tide_error sticky = stream->error;
    stream->error = (struct tide_error){.status = TIDE_OK};
    stream->n_sites = 0;
    const struct tide_error *first = fault != TIDE_OK           ? &fault_err
                                     : sticky.status != TIDE_OK ? &sticky
                                     : sync != TIDE_OK          ? &sync_err
                                                                : NULL;
    if (!first)
        return TIDE_OK;
    if (err)
        *err = *first;
    return first->status;
}

/* ============================================================================
 * The iface: events
 * ========================================================================== */

static enum tide_status cuda_event_new(void *context, struct tide_event **out,
                                       struct tide_error *err)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = cuda_enter(cuda, err);
    if (st != TIDE_OK)
        return st;
    struct tide_event *event = calloc(1, sizeof(*event));
    if (!event)
        return tide_error_set(err, TIDE_NOMEM, "out of memory for an event");
    st = TIDE_CUDA_CHECK(err, cudaEventCreate(&event->event));
    if (st != TIDE_OK) {
        free(event);
        return st;
    }
    *out = event;
    return TIDE_OK;
}

/* CUDA releases an event's resources once the work it waits for is done. */
static void cuda_event_free(void *context, struct tide_event *event)
{
    struct cuda_backend *cuda = context;
    if (cuda_enter(cuda, NULL) == TIDE_OK)
        (void)TIDE_CUDA_CHECK(NULL, cudaEventDestroy(event->event));
    free(event);
}

static enum tide_status cuda_event_record(void *context, struct tide_event *event,
                                          struct tide_stream *stream)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = cuda_enter(cuda, NULL);
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(NULL, cudaEventRecord(event->event, stream->stream));
    if (st == TIDE_OK)
        event->recorded = true;
    return st;
}

static enum tide_status cuda_event_wait(void *context, struct tide_stream *stream,
                                        struct tide_event *event)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = cuda_enter(cuda, NULL);
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(NULL, cudaStreamWaitEvent(stream->stream, event->event, 0));
    return st;
}

/* Whether the event's latest record is reached; cudaErrorNotReady is an answer, not an error. */
static enum tide_status event_reached(struct tide_event *event, bool *done)
{
    cudaError_t rc = cudaEventQuery(event->event);
    if (rc == cudaErrorNotReady) {
        (void)cudaGetLastError(); /* not an error: clear it for the next launcher */
        *done = false;
        return TIDE_OK;
    }
    *done = rc == cudaSuccess;
    return tide__cuda_check(rc, "cudaEventQuery(event->event)", __FILE__, __LINE__, NULL);
}

static enum tide_status cuda_event_query(void *context, struct tide_event *event, bool *done)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = cuda_enter(cuda, NULL);
    if (st != TIDE_OK)
        return st;
    return event_reached(event, done);
}

static enum tide_status cuda_event_sync(void *context, struct tide_event *event)
{
    struct cuda_backend *cuda = context;
    enum tide_status st = cuda_enter(cuda, NULL);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(NULL, cudaEventSynchronize(event->event));
}

/*
 * Milliseconds between two reached events: TIDE_STATE if either was never
 * recorded, TIDE_UNAVAILABLE if either is not reached yet, as on the CPU.
 */
static enum tide_status cuda_event_elapsed(void *context, struct tide_event *start,
                                           struct tide_event *end, double *ms)
{
    struct cuda_backend *cuda = context;
    if (!start->recorded || !end->recorded)
        return TIDE_STATE;
    bool start_done = false, end_done = false;
    enum tide_status st = cuda_enter(cuda, NULL);
    if (st == TIDE_OK)
        st = event_reached(start, &start_done);
    if (st == TIDE_OK)
        st = event_reached(end, &end_done);
    if (st != TIDE_OK)
        return st;
    if (!start_done || !end_done)
        return TIDE_UNAVAILABLE;
    float elapsed = 0;
    st = TIDE_CUDA_CHECK(NULL, cudaEventElapsedTime(&elapsed, start->event, end->event));
    if (st == TIDE_OK)
        *ms = elapsed;
    return st;
}

/* ============================================================================
 * The iface: copies, fills and kernels
 * ========================================================================== */

static enum tide_status cuda_copy(struct tide_stream *stream, void *dst, const void *src,
                                  uint64_t bytes, enum cudaMemcpyKind kind)
{
    if (stream->error.status != TIDE_OK)
        return TIDE_OK; /* skipped until stream_sync, as on the CPU backend */
    struct tide_error err = {0};
    enum tide_status st = cuda_enter(stream->backend, &err);
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(&err, cudaMemcpyAsync(dst, src, (size_t)bytes, kind, stream->stream));
    return stream_enqueued(stream, st, &err);
}

static enum tide_status cuda_copy_h2d(void *context, void *dst_device, const void *src_host,
                                      uint64_t bytes, struct tide_stream *stream)
{
    return cuda_copy(stream, dst_device, src_host, bytes, cudaMemcpyHostToDevice);
}

static enum tide_status cuda_copy_d2h(void *context, void *dst_host, const void *src_device,
                                      uint64_t bytes, struct tide_stream *stream)
{
    return cuda_copy(stream, dst_host, src_device, bytes, cudaMemcpyDeviceToHost);
}

static enum tide_status cuda_copy_d2d(void *context, void *dst_device, const void *src_device,
                                      uint64_t bytes, struct tide_stream *stream)
{
    return cuda_copy(stream, dst_device, src_device, bytes, cudaMemcpyDeviceToDevice);
}

static enum tide_status cuda_fill32(void *context, void *dst_device, uint32_t pattern,
                                    uint64_t bytes, struct tide_stream *stream)
{
    if (stream->error.status != TIDE_OK)
        return TIDE_OK;
    struct tide_error err = {0};
    enum tide_status st = cuda_enter(stream->backend, &err);
    if (st == TIDE_OK)
        st =
            TIDE_CUDA_CHECK(&err, tide_cuda_fill32(dst_device, pattern, bytes / 4, stream->stream));
    return stream_enqueued(stream, st, &err);
}

/* Remembers the node of a launch that may write the fault record; its tag is the index. */
static enum tide_status stream_add_site(struct tide_stream *stream, const struct tide_node *node,
                                        struct tide_error *err)
{
    if (stream->n_sites == stream->cap_sites) {
        uint32_t cap = stream->cap_sites ? stream->cap_sites * 2 : 16;
        struct fault_site *sites = realloc(stream->sites, cap * sizeof(*sites));
        if (!sites)
            return tide_error_set(err, TIDE_NOMEM, "out of memory for the stream's fault sites");
        stream->sites = sites;
        stream->cap_sites = cap;
    }
    struct fault_site *site = &stream->sites[stream->n_sites++];
    site->op = node->op;
    snprintf(site->name, sizeof(site->name), "%s", node->name ? node->name : "");
    return TIDE_OK;
}

static enum tide_status cuda_launch(void *context, struct tide_stream *stream,
                                    const struct tide_kernel_args *args)
{
    struct cuda_backend *cuda = context;
    if (stream->error.status != TIDE_OK)
        return TIDE_OK; /* skipped until stream_sync, as on the CPU backend */
    const struct tide_node *node = args->node;
    const char *op = tide_op_info(node->op)->name;
    const char *name = node->name ? node->name : "";
    struct tide_error err = {0};
    enum tide_status st;
    tide_kernel_fn fn = tide_cuda_kernels.fn[node->op];
    if (!fn) {
        st = tide_error_set(&err, TIDE_UNSUPPORTED, "no CUDA kernel for op %s (node \"%s\")", op,
                            name);
        return stream_enqueued(stream, st, &err);
    }
    if (stream->n_sites == UINT32_MAX)
        return stream_enqueued(stream,
                               tide_error_set(&err, TIDE_LIMIT,
                                              "too many launches "
                                              "with data checks before a stream_sync"),
                               &err);
    st = cuda_enter(cuda, &err);
    if (st == TIDE_OK) {
        struct tide_cuda_launch launch = {
            .stream = stream->stream,
            .cublas = stream->cublas,
            .cudnn = stream->cudnn,
            .fault = stream->fault_device,
            .tag = stream->n_sites,
        };
        struct tide_kernel_args with_stream = *args;
        with_stream.stream = &launch;
        st = fn(&with_stream, &err);
        /* Even a launch that failed after arming may have enqueued its check. */
        if (launch.fault_armed) {
            enum tide_status site = stream_add_site(stream, node, &err);
            if (st == TIDE_OK)
                st = site;
        }
    }
    if (st != TIDE_OK) {
        /* Name the node, as the CPU backend does: the stream's error is all the executor sees. */
        if (err.message[0] == '\0')
            tide_error_set(&err, st, "node \"%s\" (%s): kernel failed: %s", name, op,
                           tide_strerror(st));
        else if (!strstr(err.message, name))
            tide_error_prefix(&err, "node \"%s\" (%s)", name, op);
    }
    return stream_enqueued(stream, st, &err);
}

/* The sources and the memory ops are the executor's copies; every other op needs a kernel. */
static bool cuda_supports_op(void *context, const struct tide_graph *graph,
                             const struct tide_node *node)
{
    if (tide_op_info(node->op)->flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY))
        return true;
    return tide_cuda_kernels.fn[node->op] != NULL;
}

/*
 * Workspace sizes come from the kernel table; cuDNN's need a handle, so the
 * backend passes its planning handle (no stream) for the query.
 */
static uint64_t cuda_workspace_bytes(void *context, const struct tide_graph *graph,
                                     const struct tide_node *node)
{
    struct cuda_backend *cuda = context;
    uint64_t bytes = 0;
    pthread_mutex_lock(&cuda->mutex);
    if (cuda_enter(cuda, NULL) == TIDE_OK) {
        struct tide_cuda_launch launch = {.cudnn = cuda->planning};
        bytes = tide_cuda_kernels.workspace_bytes(&launch, graph, node);
    }
    pthread_mutex_unlock(&cuda->mutex);
    return bytes;
}

/* ============================================================================
 * Creation
 * ========================================================================== */

static void cuda_free(void *context)
{
    struct cuda_backend *cuda = context;
    bool entered = cuda_enter(cuda, NULL) == TIDE_OK;
    if (cuda->n_arenas > 0) {
        TIDE_LOG_WARN("cuda backend: freed with %zu arenas live (%" PRIu64 " bytes); freeing them",
                      cuda->n_arenas, cuda->in_use);
        for (size_t i = 0; entered && i < cuda->n_arenas; i++)
            (void)TIDE_CUDA_CHECK(NULL, cudaFree(cuda->arenas[i].base));
    }
    if (entered && cuda->planning)
        (void)TIDE_CUDNN_CHECK(NULL, cudnnDestroy(cuda->planning));
    free(cuda->arenas);
    pthread_mutex_destroy(&cuda->mutex);
    free(cuda);
}

static const struct tide_backend_iface cuda_iface = {
    .name = "cuda",
    .free = cuda_free,
    .device_info = cuda_device_info,
    .arena_alloc = cuda_arena_alloc,
    .arena_free = cuda_arena_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_new = cuda_stream_new,
    .stream_free = cuda_stream_free,
    .stream_sync = cuda_stream_sync,
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
    .event_elapsed = cuda_event_elapsed,
    .copy_h2d = cuda_copy_h2d,
    .copy_d2h = cuda_copy_d2h,
    .copy_d2d = cuda_copy_d2d,
    .fill32 = cuda_fill32,
    .launch = cuda_launch,
    .supports_op = cuda_supports_op,
    .workspace_bytes = cuda_workspace_bytes,
};

/*
 * Finds the device: TIDE_DEVICE, with the runtime's words, when there is no
 * usable GPU. That is the expected answer on a machine without one ("auto"
 * asks on every CPU-only start), so it is logged at info level, not as an
 * error.
 */
static enum tide_status cuda_probe(int device, struct tide_error *err)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        TIDE_LOG_INFO("cuda backend: no usable GPU: cudaGetDeviceCount: %s (%s)",
                      cudaGetErrorString(rc), cudaGetErrorName(rc));
        return tide_error_set(err, TIDE_DEVICE, "cudaGetDeviceCount failed: %s (%s)",
                              cudaGetErrorString(rc), cudaGetErrorName(rc));
    }
    if (count == 0)
        return tide_error_set(err, TIDE_DEVICE, "cudaGetDeviceCount found no CUDA device");
    if (device >= count)
        return tide_error_set(err, TIDE_DEVICE, "device %d asked for, but there are only %d",
                              device, count);
    return TIDE_OK;
}

/* backend.c's registry: how many devices cudaGetDeviceCount reports. */
enum tide_status tide_backend_cuda_count(int *count, struct tide_error *err);

enum tide_status tide_backend_cuda_count(int *count, struct tide_error *err)
{
    *count = 0;
    cudaError_t rc = cudaGetDeviceCount(count);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        *count = 0;
        return tide_error_set(err, TIDE_DEVICE, "cudaGetDeviceCount failed: %s (%s)",
                              cudaGetErrorString(rc), cudaGetErrorName(rc));
    }
    return TIDE_OK;
}

enum tide_status tide_backend_cuda_new(const struct tide_backend_options *options,
                                       struct tide_backend **out, struct tide_error *err)
{
    if (!out)
        return tide_error_set(err, TIDE_INVALID, "cuda backend: out is NULL");
    *out = NULL;
    int device = options ? options->device : 0;
    if (device < 0)
        return tide_error_set(err, TIDE_INVALID, "cuda backend: device is %d; want 0 or more",
                              device);
    enum tide_status st = cuda_probe(device, err);
    if (st != TIDE_OK)
        return st;

    /* A device that exists but cannot be used (busy, prohibited) is also "no GPU here". */
    st = TIDE_CUDA_CHECK(err, cudaSetDevice(device));
    struct cudaDeviceProp prop;
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaGetDeviceProperties(&prop, device));
    size_t free_bytes = 0, total_bytes = 0;
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaMemGetInfo(&free_bytes, &total_bytes));
    if (st != TIDE_OK) {
        st = st == TIDE_NOMEM ? TIDE_NOMEM : TIDE_DEVICE;
        if (err)
            err->status = st;
        tide_error_prefix(err, "cuda backend: device %d cannot be used", device);
        return st;
    }

    struct tide_backend *backend = calloc(1, sizeof(*backend));
    struct cuda_backend *cuda = calloc(1, sizeof(*cuda));
    if (!backend || !cuda) {
        free(backend);
        free(cuda);
        return tide_error_set(err, TIDE_NOMEM, "out of memory for the cuda backend");
    }
    cuda->device = device;
    snprintf(cuda->name, sizeof(cuda->name), "%.200s (cuda:%d, sm_%d%d)", prop.name, device,
             prop.major, prop.minor);
    uint64_t headroom = (uint64_t)free_bytes / 16;
    headroom = headroom < CUDA_HEADROOM_MIN   ? CUDA_HEADROOM_MIN
               : headroom > CUDA_HEADROOM_MAX ? CUDA_HEADROOM_MAX
                                              : headroom;
    cuda->offered = (uint64_t)free_bytes > headroom ? (uint64_t)free_bytes - headroom : 0;
    cuda->cublas_workspace = prop.major >= 9 ? CUBLAS_WORKSPACE_HOPPER : CUBLAS_WORKSPACE_OLDER;
    pthread_mutex_init(&cuda->mutex, NULL);
    st = TIDE_CUDNN_CHECK(err, cudnnCreate(&cuda->planning));
    if (st != TIDE_OK) {
        tide_error_prefix(err, "cuda backend: cuDNN cannot start on %s", cuda->name);
        cuda_free(cuda);
        free(backend);
        return st;
    }
    TIDE_LOG_INFO("cuda backend: %s, %" PRIu64 " of %zu bytes offered to jobs, cuDNN %zu, "
                  "cuBLAS workspace %" PRIu64 " bytes per stream",
                  cuda->name, cuda->offered, total_bytes, cudnnGetVersion(),
                  cuda->cublas_workspace);

    /* tide_backend_free frees the context through the iface, then the handle. */
    backend->iface = &cuda_iface;
    backend->context = cuda;
    *out = backend;
    return TIDE_OK;
}
