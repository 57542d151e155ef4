/* SPDX-License-Identifier: MIT */
/*
 * backend-impl.h: the backend vtable, private to the runtime's backends.
 *
 * runtime/backend.h gives everyone an opaque struct tide_backend and checked
 * wrappers; this header says what is behind it, for the code that implements
 * or dispatches to a backend: runtime/backend.c (the registry and the
 * wrappers), runtime/cpu and runtime/cuda (the two backends), and tests that
 * build a backend of their own. Nothing else includes it, so a change to the
 * table is a change to those files only, as ggml keeps its backend table in
 * a private header apart from its public one.
 *
 * The semantics of each entry (streams, events, sticky errors, ownership)
 * are those documented for its wrapper in runtime/backend.h.
 *
 * Example usage (a backend's constructor):
 *
 *     static const struct tide_backend_iface my_iface = {.name = "mine", .free = my_free, ...};
 *     backend->iface = &my_iface;
 *     backend->context = mine;
 */
#ifndef TIDE_RUNTIME_BACKEND_IMPL_H
#define TIDE_RUNTIME_BACKEND_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "runtime/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The table a backend implements. Every entry takes the backend's context
 * first. Entries are required unless marked optional; the wrappers in
 * runtime/backend.c have already checked the arguments (no NULL handles or
 * pointers, sizes that mean something) when an entry is called.
 */
struct tide_backend_iface {
    const char *name; /* "cpu", "cuda" */
    void (*free)(void *context);

    /* The device's name and the bytes it offers jobs. */
    void (*device_info)(void *context, char *name, size_t name_size, uint64_t *total_bytes);

    enum tide_status (*arena_alloc)(void *context, uint64_t bytes, void **base,
                                    struct tide_error *err);
    void (*arena_free)(void *context, void *base);
    /* Pinned host memory (CPU: plain aligned memory). */
    enum tide_status (*host_alloc)(void *context, uint64_t bytes, void **ptr,
                                   struct tide_error *err);
    void (*host_free)(void *context, void *ptr);

    enum tide_status (*stream_new)(void *context, struct tide_stream **stream,
                                   struct tide_error *err);
    void (*stream_free)(void *context, struct tide_stream *stream);
    /* Waits for all work on the stream; returns (and clears) its sticky error. */
    enum tide_status (*stream_sync)(void *context, struct tide_stream *stream,
                                    struct tide_error *err);

    enum tide_status (*event_new)(void *context, struct tide_event **event,
                                  struct tide_error *err);
    void (*event_free)(void *context, struct tide_event *event);
    enum tide_status (*event_record)(void *context, struct tide_event *event,
                                     struct tide_stream *stream);
    enum tide_status (*event_wait)(void *context, struct tide_stream *stream,
                                   struct tide_event *event);
    /* *done = whether the recorded point has been reached. */
    enum tide_status (*event_query)(void *context, struct tide_event *event, bool *done);
    enum tide_status (*event_sync)(void *context, struct tide_event *event);
    /* Optional: milliseconds between two reached events. */
    enum tide_status (*event_elapsed)(void *context, struct tide_event *start,
                                      struct tide_event *end, double *ms);

    enum tide_status (*copy_h2d)(void *context, void *dst_device, const void *src_host,
                                 uint64_t bytes, struct tide_stream *stream);
    enum tide_status (*copy_d2h)(void *context, void *dst_host, const void *src_device,
                                 uint64_t bytes, struct tide_stream *stream);
    enum tide_status (*copy_d2d)(void *context, void *dst_device, const void *src_device,
                                 uint64_t bytes, struct tide_stream *stream);
    /* Optional: fill device bytes with a repeated 32-bit pattern (poison mode). */
    enum tide_status (*fill32)(void *context, void *dst_device, uint32_t pattern, uint64_t bytes,
                               struct tide_stream *stream);

    /* Runs the node's kernel on the stream. */
    enum tide_status (*launch)(void *context, struct tide_stream *stream,
                               const struct tide_kernel_args *args);
    /*
     * Whether the backend can run the node: a kernel for its op, or an op
     * the executor implements itself with copies (sources and memory ops).
     * Asked for every node when a job is compiled, so that a graph with an
     * op the backend lacks is refused then, naming the op, not at its
     * first step.
     */
    bool (*supports_op)(void *context, const struct tide_graph *graph,
                        const struct tide_node *node);
    /* Scratch bytes the node's kernel needs on this backend. */
    uint64_t (*workspace_bytes)(void *context, const struct tide_graph *graph,
                                const struct tide_node *node);
};

/*
 * A backend: its table and its context. The backend's constructor allocates
 * this handle (malloc) and its context; tide_backend_free frees the context
 * through iface->free, then the handle.
 */
struct tide_backend {
    const struct tide_backend_iface *iface;
    void *context;
};

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_BACKEND_IMPL_H */
