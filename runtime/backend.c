/* SPDX-License-Identifier: MIT */
/*
 * backend.c: the backend registry and the checked wrappers over the iface.
 *
 * The registry maps a name ("cpu", "cuda", "auto") to a backend's
 * constructor. It is the one place in C sources where the CUDA build shows:
 * the CUDA entry exists only when the build defines TIDE_HAVE_CUDA, so a
 * build without CUDA answers "cuda" with TIDE_UNSUPPORTED and a reason
 * instead of failing to link.
 *
 * The wrappers check their arguments (NULL handles and pointers, sizes that
 * mean nothing) and return TIDE_INVALID, so a bug in a caller becomes a
 * status rather than a crash in a worker thread; then they dispatch. An
 * optional iface entry that a backend leaves NULL gives TIDE_UNSUPPORTED.
 *
 * Ownership: a backend's constructor allocates the struct tide_backend
 * handle (malloc) and its context; tide_backend_free frees the context
 * through iface->free, then the handle.
 */
#include "runtime/backend-impl.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * The registry
 * ========================================================================== */

typedef enum tide_status (*backend_new_fn)(const struct tide_backend_options *options,
                                           struct tide_backend **out, struct tide_error *err);

typedef enum tide_status (*backend_count_fn)(int *count, struct tide_error *err);

#ifdef TIDE_HAVE_CUDA
/* runtime/cuda: in CUDA builds only. */
enum tide_status tide_backend_cuda_new(const struct tide_backend_options *options,
                                       struct tide_backend **out, struct tide_error *err);
enum tide_status tide_backend_cuda_count(int *count, struct tide_error *err);
#endif

/* The CPU backend emulates one device per backend; how many to make is the caller's choice. */
static enum tide_status cpu_count(int *count, struct tide_error *err)
{
    (void)err;
    *count = 1;
    return TIDE_OK;
}

struct backend_entry {
    const char *name;
    backend_new_fn create;
    backend_count_fn count;
};

/* In order of preference for "auto". */
static const struct backend_entry registry[] = {
#ifdef TIDE_HAVE_CUDA
    {"cuda", tide_backend_cuda_new, tide_backend_cuda_count},
#endif
    {"cpu", tide_backend_cpu_new, cpu_count},
};

#define REGISTRY_SIZE (sizeof(registry) / sizeof(registry[0]))

/* Every name tide_backend_create knows, built or not, for messages. */
#define BACKEND_NAMES "\"cpu\", \"cuda\" or \"auto\""

static const struct backend_entry *registry_find(const char *name)
{
    for (size_t i = 0; i < REGISTRY_SIZE; i++)
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

/*
 * "auto": the first entry that can be created. A backend that is built but
 * cannot run here (no GPU: TIDE_DEVICE) gives way to the next; any other
 * failure is returned as it is.
 */
static enum tide_status backend_create_auto(const struct tide_backend_options *options,
                                            struct tide_backend **out, struct tide_error *err)
{
    enum tide_status st = TIDE_UNSUPPORTED;
    for (size_t i = 0; i < REGISTRY_SIZE; i++) {
        st = registry[i].create(options, out, err);
        if (st != TIDE_DEVICE)
            return st;
    }
    return st;
}

enum tide_status tide_backend_create(const char *name, const struct tide_backend_options *options,
                                     struct tide_backend **out, struct tide_error *err)
{
    if (!out)
        return tide_error_set(err, TIDE_INVALID, "tide_backend_create: out is NULL");
    *out = NULL;
    if (!name)
        return tide_error_set(err, TIDE_INVALID, "backend name is NULL; want " BACKEND_NAMES);
    if (strcmp(name, "auto") == 0)
        return backend_create_auto(options, out, err);
    const struct backend_entry *entry = registry_find(name);
    if (entry)
        return entry->create(options, out, err);
    if (strcmp(name, "cuda") == 0)
        return tide_error_set(err, TIDE_UNSUPPORTED, "tide was built without CUDA");
    return tide_error_set(err, TIDE_INVALID, "unknown backend \"%s\"; want " BACKEND_NAMES, name);
}

enum tide_status tide_backend_device_count(const char *name, int *count, struct tide_error *err)
{
    if (!name || !count)
        return tide_error_set(err, TIDE_INVALID,
                              "tide_backend_device_count: name or count is NULL");
    *count = 0;
    const struct backend_entry *entry = registry_find(name);
    if (entry)
        return entry->count(count, err);
    if (strcmp(name, "cuda") == 0)
        return tide_error_set(err, TIDE_UNSUPPORTED, "tide was built without CUDA");
    return tide_error_set(err, TIDE_INVALID, "unknown backend \"%s\"; want \"cpu\" or \"cuda\"",
                          name);
}

void tide_backend_free(struct tide_backend *backend)
{
    if (!backend)
        return;
    backend->iface->free(backend->context);
    free(backend);
}

/* ============================================================================
 * Checked wrappers
 * ========================================================================== */

const char *tide_backend_name(const struct tide_backend *backend)
{
    return backend ? backend->iface->name : "none";
}

void tide_backend_device_info(struct tide_backend *backend, char *name, size_t name_size,
                              uint64_t *total_bytes)
{
    if (!backend) {
        if (name && name_size > 0)
            name[0] = '\0';
        if (total_bytes)
            *total_bytes = 0;
        return;
    }
    backend->iface->device_info(backend->context, name, name_size, total_bytes);
}

enum tide_status tide_backend_arena_alloc(struct tide_backend *backend, uint64_t bytes, void **base,
                                          struct tide_error *err)
{
    if (!backend || !base)
        return tide_error_set(err, TIDE_INVALID, "arena_alloc: backend and base must not be NULL");
    *base = NULL;
    if (bytes == 0)
        return tide_error_set(err, TIDE_INVALID, "arena_alloc: an arena of 0 bytes");
    return backend->iface->arena_alloc(backend->context, bytes, base, err);
}

void tide_backend_arena_free(struct tide_backend *backend, void *base)
{
    if (backend && base)
        backend->iface->arena_free(backend->context, base);
}

/* Successful host allocations and their bytes, process-wide (tide_backend_host_alloc_count). */
static _Atomic uint64_t host_allocs;
static _Atomic uint64_t host_alloc_bytes;

uint64_t tide_backend_host_alloc_count(uint64_t *bytes)
{
    if (bytes)
        *bytes = atomic_load_explicit(&host_alloc_bytes, memory_order_relaxed);
    return atomic_load_explicit(&host_allocs, memory_order_relaxed);
}

enum tide_status tide_backend_host_alloc(struct tide_backend *backend, uint64_t bytes, void **ptr,
                                         struct tide_error *err)
{
    if (!backend || !ptr)
        return tide_error_set(err, TIDE_INVALID, "host_alloc: backend and ptr must not be NULL");
    *ptr = NULL;
    if (bytes == 0)
        return tide_error_set(err, TIDE_INVALID, "host_alloc: a buffer of 0 bytes");
    enum tide_status st = backend->iface->host_alloc(backend->context, bytes, ptr, err);
    if (st == TIDE_OK) {
        atomic_fetch_add_explicit(&host_allocs, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&host_alloc_bytes, bytes, memory_order_relaxed);
    }
    return st;
}

void tide_backend_host_free(struct tide_backend *backend, void *ptr)
{
    if (backend && ptr)
        backend->iface->host_free(backend->context, ptr);
}

enum tide_status tide_backend_stream_new(struct tide_backend *backend, struct tide_stream **stream,
                                         struct tide_error *err)
{
    if (!backend || !stream)
        return tide_error_set(err, TIDE_INVALID, "stream_new: backend and stream must not be NULL");
    *stream = NULL;
    return backend->iface->stream_new(backend->context, stream, err);
}

void tide_backend_stream_free(struct tide_backend *backend, struct tide_stream *stream)
{
    if (backend && stream)
        backend->iface->stream_free(backend->context, stream);
}

enum tide_status tide_backend_stream_sync(struct tide_backend *backend, struct tide_stream *stream,
                                          struct tide_error *err)
{
    if (!backend || !stream)
        return tide_error_set(err, TIDE_INVALID,
                              "stream_sync: backend and stream must not be NULL");
    return backend->iface->stream_sync(backend->context, stream, err);
}

enum tide_status tide_backend_event_new(struct tide_backend *backend, struct tide_event **event,
                                        struct tide_error *err)
{
    if (!backend || !event)
        return tide_error_set(err, TIDE_INVALID, "event_new: backend and event must not be NULL");
    *event = NULL;
    return backend->iface->event_new(backend->context, event, err);
}

void tide_backend_event_free(struct tide_backend *backend, struct tide_event *event)
{
    if (backend && event)
        backend->iface->event_free(backend->context, event);
}

enum tide_status tide_backend_event_record(struct tide_backend *backend, struct tide_event *event,
                                           struct tide_stream *stream)
{
    if (!backend || !event || !stream)
        return TIDE_INVALID;
    return backend->iface->event_record(backend->context, event, stream);
}

enum tide_status tide_backend_event_wait(struct tide_backend *backend, struct tide_stream *stream,
                                         struct tide_event *event)
{
    if (!backend || !stream || !event)
        return TIDE_INVALID;
    return backend->iface->event_wait(backend->context, stream, event);
}

enum tide_status tide_backend_event_query(struct tide_backend *backend, struct tide_event *event,
                                          bool *done)
{
    if (!backend || !event || !done)
        return TIDE_INVALID;
    return backend->iface->event_query(backend->context, event, done);
}

enum tide_status tide_backend_event_sync(struct tide_backend *backend, struct tide_event *event)
{
    if (!backend || !event)
        return TIDE_INVALID;
    return backend->iface->event_sync(backend->context, event);
}

enum tide_status tide_backend_event_elapsed(struct tide_backend *backend, struct tide_event *start,
                                            struct tide_event *end, double *ms)
{
    if (!backend || !start || !end || !ms)
        return TIDE_INVALID;
    if (!backend->iface->event_elapsed)
        return TIDE_UNSUPPORTED;
    return backend->iface->event_elapsed(backend->context, start, end, ms);
}

/*
 * Copies of 0 bytes are valid and do nothing, as cudaMemcpyAsync: an empty
 * tensor needs no special case in the executor. The pointers must still be
 * non-NULL, since a NULL there is a bug whatever the size.
 */
enum tide_status tide_backend_copy_h2d(struct tide_backend *backend, void *dst, const void *src,
                                       uint64_t bytes, struct tide_stream *stream)
{
    if (!backend || !dst || !src || !stream)
        return TIDE_INVALID;
    if (bytes == 0)
        return TIDE_OK;
    return backend->iface->copy_h2d(backend->context, dst, src, bytes, stream);
}

enum tide_status tide_backend_copy_d2h(struct tide_backend *backend, void *dst, const void *src,
                                       uint64_t bytes, struct tide_stream *stream)
{
    if (!backend || !dst || !src || !stream)
        return TIDE_INVALID;
    if (bytes == 0)
        return TIDE_OK;
    return backend->iface->copy_d2h(backend->context, dst, src, bytes, stream);
}

enum tide_status tide_backend_copy_d2d(struct tide_backend *backend, void *dst, const void *src,
                                       uint64_t bytes, struct tide_stream *stream)
{
    if (!backend || !dst || !src || !stream)
        return TIDE_INVALID;
    if (bytes == 0)
        return TIDE_OK;
    return backend->iface->copy_d2d(backend->context, dst, src, bytes, stream);
}

/*
 * fill32 writes whole 32-bit words at a 4-byte-aligned address, as
 * cuMemsetD32Async does; anything else is refused rather than leaving a
 * ragged tail unpoisoned.
 */
enum tide_status tide_backend_fill32(struct tide_backend *backend, void *dst, uint32_t pattern,
                                     uint64_t bytes, struct tide_stream *stream)
{
    if (!backend || !dst || !stream)
        return TIDE_INVALID;
    if (bytes % 4 != 0 || (uintptr_t)dst % 4 != 0)
        return TIDE_INVALID;
    if (!backend->iface->fill32)
        return TIDE_UNSUPPORTED;
    if (bytes == 0)
        return TIDE_OK;
    return backend->iface->fill32(backend->context, dst, pattern, bytes, stream);
}

bool tide_backend_has_fill32(const struct tide_backend *backend)
{
    return backend && backend->iface->fill32;
}

bool tide_backend_has_event_elapsed(const struct tide_backend *backend)
{
    return backend && backend->iface->event_elapsed;
}

enum tide_status tide_backend_launch(struct tide_backend *backend, struct tide_stream *stream,
                                     const struct tide_kernel_args *args)
{
    if (!backend || !stream || !args || !args->node)
        return TIDE_INVALID;
    if ((unsigned)args->node->op >= TIDE_OP_COUNT)
        return TIDE_INVALID;
    if ((args->n_inputs > 0 && !args->inputs) || (args->n_outputs > 0 && !args->outputs))
        return TIDE_INVALID;
    if (args->workspace_bytes > 0 && !args->workspace)
        return TIDE_INVALID;
    return backend->iface->launch(backend->context, stream, args);
}

bool tide_backend_supports_op(struct tide_backend *backend, const struct tide_graph *graph,
                              const struct tide_node *node)
{
    if (!backend || !node || (unsigned)node->op >= TIDE_OP_COUNT)
        return false;
    return backend->iface->supports_op(backend->context, graph, node);
}

enum tide_status tide_backend_check_graph(struct tide_backend *backend,
                                          const struct tide_graph *graph, struct tide_error *err)
{
    if (!backend || !graph)
        return tide_error_set(err, TIDE_INVALID, "check_graph: backend and graph must not be NULL");
    for (uint32_t v = 0; v < graph->n_nodes; v++) {
        const struct tide_node *node = &graph->nodes[v];
        if (!tide_backend_supports_op(backend, graph, node)) {
            const char *op =
                (unsigned)node->op < TIDE_OP_COUNT ? tide_op_info(node->op)->name : "an unknown op";
            return tide_node_error(err, TIDE_UNSUPPORTED, node,
                                   "the %s backend has no kernel for %s", backend->iface->name, op);
        }
    }
    return TIDE_OK;
}

uint64_t tide_backend_workspace_bytes(struct tide_backend *backend, const struct tide_graph *graph,
                                      const struct tide_node *node)
{
    if (!backend || !node || (unsigned)node->op >= TIDE_OP_COUNT)
        return 0;
    return backend->iface->workspace_bytes(backend->context, graph, node);
}
