/* SPDX-License-Identifier: MIT */
/*
 * backend.h: the public face of a device backend (CPU, CUDA).
 *
 * A backend is a const table of function pointers next to a context pointer,
 * as in ggml-backend; the table lives in the private runtime/backend-impl.h,
 * which only runtime/backend.c and the backends themselves (runtime/cpu,
 * runtime/cuda) include, as ggml keeps its backend table private. Everyone else
 * (the executor, the session, the daemon, tests, benchmarks) holds an opaque
 * struct tide_backend and calls the checked wrappers below, which check
 * their arguments, then dispatch. Entries marked optional may be NULL; the
 * wrapper then does the documented fallback or returns TIDE_UNSUPPORTED, and
 * tide_backend_has_* says beforehand whether a backend has one.
 *
 * Semantics follow CUDA streams and events, so one executor drives every
 * backend:
 *  - Work enqueued on one stream runs in order; streams run concurrently.
 *  - event_record(ev, s) marks the point in s reached by work enqueued so far;
 *    event_wait(s, ev) makes later work on s wait until that point is reached;
 *    an event may be recorded again (it then refers to the new point).
 *  - Enqueue calls return at once; a failure of enqueued work (a kernel error)
 *    is sticky on the stream and returned by stream_sync, with its message.
 *  - Memory: one device arena per job (arena_alloc), pinned host memory from
 *    host_alloc. Pointers into the arena are device pointers.
 *
 * Ownership: the caller frees what it creates (streams, events, arenas, host
 * buffers) with the matching _free before tide_backend_free. The kernel args
 * passed to launch must stay valid until the stream has run the launch.
 *
 * Example usage:
 *
 *     struct tide_backend *b;
 *     tide_backend_create("cpu", &(struct tide_backend_options){.device_bytes = 1 << 30}, &b, &err);
 *     struct tide_stream *s; tide_backend_stream_new(b, &s, &err);
 *     tide_backend_launch(b, s, &args);
 *     tide_backend_stream_sync(b, s, &err);
 *     tide_backend_stream_free(b, s);
 *     tide_backend_free(b);
 */
#ifndef TIDE_RUNTIME_BACKEND_H
#define TIDE_RUNTIME_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tide_stream;
struct tide_event;

/*
 * A backend: opaque outside runtime/backend.c and the backend implementations,
 * which see its vtable in runtime/backend-impl.h. Everything else goes
 * through the checked wrappers below.
 */
struct tide_backend;

/* How the CPU backend runs its streams (tide_backend_options.cpu_streams). */
enum tide_cpu_streams {
    /* The environment's TIDE_CPU_STREAMS ("inline" or "threads") if set, else inline. */
    TIDE_CPU_STREAMS_DEFAULT = 0,
    /*
     * No thread per stream: a stream's work runs on the thread that waits
     * for it (stream_sync, event_sync or event_query, or a stream's wait on
     * an event of another stream), in the order enqueued, so a step runs on
     * the thread that synchronises it, without a hand-off between threads.
     * Copies then do not overlap kernels; the kernels' own threads still run.
     */
    TIDE_CPU_STREAMS_INLINE,
    /*
     * One worker thread per stream, as a GPU runs streams side by side:
     * copies overlap kernels, and a missing event between streams is a data
     * race that ThreadSanitizer reports. Each hand-off between threads costs
     * a wake-up (tens of microseconds on a virtual machine).
     */
    TIDE_CPU_STREAMS_THREADS,
};

struct tide_backend_options {
    /* CPU: the emulated device's memory (0: 4 GiB). CUDA: ignored (the GPU's). */
    uint64_t device_bytes;
    /*
     * CPU: the most threads the kernels run on at once (0: one per core):
     * the thread that runs the stream (inline streams: the one that waits
     * for it; threaded: the stream's worker) plus threads - 1 workers of the kernels'
     * pool. Every library the kernels call is held within it too: OpenBLAS
     * runs on one thread (its threaded GEMM is not reproducible across
     * thread counts; kernels/cpu/parallel.c), and oneDNN is not used.
     * Both the pool and OpenBLAS's thread count are process-wide, not per
     * backend: creating a CPU backend sizes the pool for the whole process,
     * so the last one created decides, and the OpenBLAS setting holds for
     * any other code in the process that calls OpenBLAS. Negative: refused.
     */
    int threads;
    /* CPU: inline streams or a thread per stream (see enum tide_cpu_streams). */
    enum tide_cpu_streams cpu_streams;
    /* CUDA: device ordinal. */
    int device;
};

/*
 * Creates a backend by name: "cpu", "cuda", or "auto" (CUDA when it is built
 * and a GPU is present, else CPU). Returns TIDE_UNSUPPORTED for "cuda" in a
 * build without it, TIDE_DEVICE when no GPU can be used, with the reason.
 */
enum tide_status tide_backend_create(const char *name, const struct tide_backend_options *options,
                                     struct tide_backend **out, struct tide_error *err);
/*
 * How many devices the backend named name ("cpu" or "cuda", as
 * tide_backend_name says) can open, each by its ordinal in
 * tide_backend_options.device: cuda asks cudaGetDeviceCount (TIDE_DEVICE
 * with the runtime's words when it fails); cpu says 1, since an emulated
 * device is made per backend and how many is the caller's choice.
 */
enum tide_status tide_backend_device_count(const char *name, int *count, struct tide_error *err);
/* Frees the backend. NULL is a no-op. */
void tide_backend_free(struct tide_backend *backend);

/* The registry's entry points for each backend (CUDA only in CUDA builds). */
enum tide_status tide_backend_cpu_new(const struct tide_backend_options *options,
                                      struct tide_backend **out, struct tide_error *err);

/* Thin checked wrappers over the iface, one per entry. */
const char *tide_backend_name(const struct tide_backend *backend);
void tide_backend_device_info(struct tide_backend *backend, char *name, size_t name_size,
                              uint64_t *total_bytes);
enum tide_status tide_backend_arena_alloc(struct tide_backend *backend, uint64_t bytes, void **base,
                                          struct tide_error *err);
void tide_backend_arena_free(struct tide_backend *backend, void *base);
enum tide_status tide_backend_host_alloc(struct tide_backend *backend, uint64_t bytes, void **ptr,
                                         struct tide_error *err);
void tide_backend_host_free(struct tide_backend *backend, void *ptr);
/*
 * The successful tide_backend_host_alloc calls of this process so far, on
 * every backend, and (when bytes is not NULL) the bytes they asked for,
 * frees not subtracted: tests read it around creation and steps to check
 * that a job allocates its host memory once.
 */
uint64_t tide_backend_host_alloc_count(uint64_t *bytes);
enum tide_status tide_backend_stream_new(struct tide_backend *backend, struct tide_stream **stream,
                                         struct tide_error *err);
void tide_backend_stream_free(struct tide_backend *backend, struct tide_stream *stream);
enum tide_status tide_backend_stream_sync(struct tide_backend *backend, struct tide_stream *stream,
                                          struct tide_error *err);
enum tide_status tide_backend_event_new(struct tide_backend *backend, struct tide_event **event,
                                        struct tide_error *err);
void tide_backend_event_free(struct tide_backend *backend, struct tide_event *event);
enum tide_status tide_backend_event_record(struct tide_backend *backend, struct tide_event *event,
                                           struct tide_stream *stream);
enum tide_status tide_backend_event_wait(struct tide_backend *backend, struct tide_stream *stream,
                                         struct tide_event *event);
enum tide_status tide_backend_event_query(struct tide_backend *backend, struct tide_event *event,
                                          bool *done);
enum tide_status tide_backend_event_sync(struct tide_backend *backend, struct tide_event *event);
enum tide_status tide_backend_event_elapsed(struct tide_backend *backend, struct tide_event *start,
                                            struct tide_event *end, double *ms);
enum tide_status tide_backend_copy_h2d(struct tide_backend *backend, void *dst, const void *src,
                                       uint64_t bytes, struct tide_stream *stream);
enum tide_status tide_backend_copy_d2h(struct tide_backend *backend, void *dst, const void *src,
                                       uint64_t bytes, struct tide_stream *stream);
enum tide_status tide_backend_copy_d2d(struct tide_backend *backend, void *dst, const void *src,
                                       uint64_t bytes, struct tide_stream *stream);
enum tide_status tide_backend_fill32(struct tide_backend *backend, void *dst, uint32_t pattern,
                                     uint64_t bytes, struct tide_stream *stream);
/* Whether the backend implements the optional fill32 (poison mode needs it). */
bool tide_backend_has_fill32(const struct tide_backend *backend);
/* Whether the backend implements the optional event_elapsed (profiling needs it). */
bool tide_backend_has_event_elapsed(const struct tide_backend *backend);
enum tide_status tide_backend_launch(struct tide_backend *backend, struct tide_stream *stream,
                                     const struct tide_kernel_args *args);
/*
 * Whether the backend can run node of graph: it has a kernel for the node's
 * op, or the op is one the executor implements with copies (the sources and
 * the memory ops). False for a NULL backend or node, or an op out of range.
 */
bool tide_backend_supports_op(struct tide_backend *backend, const struct tide_graph *graph,
                              const struct tide_node *node);

/*
 * Refuses a graph with a node the backend cannot run: TIDE_UNSUPPORTED, and
 * err names the first such node, its op and the backend ("node \"x\" (Foo):
 * the cuda backend has no kernel for Foo"). The session and the executor
 * call it when they compile a job, so that the refusal comes before any
 * memory is planned or allocated, not at the first step.
 */
enum tide_status tide_backend_check_graph(struct tide_backend *backend,
                                          const struct tide_graph *graph, struct tide_error *err);

uint64_t tide_backend_workspace_bytes(struct tide_backend *backend, const struct tide_graph *graph,
                                      const struct tide_node *node);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_BACKEND_H */
