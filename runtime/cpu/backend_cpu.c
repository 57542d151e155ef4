/* SPDX-License-Identifier: MIT */
/*
 * backend_cpu.c: the CPU backend, an emulated device with the semantics of
 * CUDA streams and events.
 *
 * The CPU backend is always built. It is the reference for results (its
 * kernels are deterministic) and the place where ordering bugs of the
 * executor show up: it runs streams concurrently on real threads, so a
 * missing event between a producer and a consumer on two streams is a data
 * race that ThreadSanitizer reports in CI, where on a GPU it would be a
 * silent, rare wrong result.
 *
 * DESIGN
 * ------
 *
 * Memory. The emulated device has options->device_bytes (4 GiB by default).
 * An arena is one allocation of exactly the bytes asked for (page-aligned,
 * not zeroed, like cudaMalloc), so AddressSanitizer catches a kernel that
 * writes past the end of the job's arena. The backend keeps the list of live
 * arenas and their sum under a mutex, and refuses an arena that would take
 * the sum past the device's size, with the numbers. Host ("pinned") memory is
 * plain 64-byte-aligned memory and is not accounted: the daemon's host pool
 * does that.
 *
 * Two ways to run streams (tide_backend_options.cpu_streams, or the
 * environment's TIDE_CPU_STREAMS): inline, the default, and threads.
 *
 * Inline streams have no thread. Enqueue calls append to the stream's queue
 * as below and return; the items run on whichever thread needs them done:
 * stream_sync runs the stream's queue up to its target, event_sync and
 * event_query run the stream that recorded the event up to its marker, and a
 * WAIT item, run on some thread, runs the recording stream up to the marker
 * it waits for (each pending generation remembers its stream and the item
 * count at which its marker completes). stream_free runs what is left. So
 * the executor's step — enqueue everything, then synchronise compute, h2d
 * and d2h — runs on the executor's own thread, each stream in its order,
 * switching stream where an event says so, with no wake-up of another
 * thread: on a virtual machine each such hand-off costs tens of
 * microseconds, several times a step (the MLP of issue 16 spent a quarter
 * of its step in them). Copies no longer overlap kernels; on this backend
 * they share the same cores anyway, and --threads 1 then means one core. One
 * thread runs a stream's items at a time (running, under the stream's
 * mutex; another thread that needs the same stream waits in done_cond), so
 * a stream's order holds even when two threads synchronise it. A thread
 * never waits for a stream it is running itself: a wait refers to earlier
 * work only (below), so the streams it runs through are each at an earlier
 * point than the one that waits.
 *
 * Threaded streams. Each stream is one worker thread and a FIFO queue (a ring of
 * items under the stream's mutex, with two condition variables: work_cond
 * wakes the worker, done_cond wakes host threads in stream_sync once the
 * least of their targets is completed, not after every item). Enqueue
 * calls (launch, copies, fill32, event record and wait) append an item and
 * return at once. The worker pops items in order and runs each one without
 * holding the stream's mutex, so work on one stream runs in order and
 * streams run concurrently. Items and their sequence: every item gets a
 * number when it is enqueued (enqueued++) and counts as done when its worker
 * finishes it (completed++); stream_sync waits until completed reaches the
 * value enqueued had when it was called, as cudaStreamSynchronize waits for
 * work issued before it.
 *
 * Events. An event is a generation counter. event_record(ev, s) increments
 * ev->recorded at enqueue time, adds that generation to ev->pending and
 * enqueues a marker carrying it; the worker of s removes the generation from
 * pending when it runs the marker ("reached") and stamps the time
 * (CLOCK_MONOTONIC) for event_elapsed. On an idle stream (every item
 * enqueued is completed) the record is reached at once, stamped by the
 * caller, and nothing is enqueued: as with CUDA, the time then includes the
 * wait for the worker to pick up the next item. event_wait(s2, ev) captures
 * ev->recorded at call time; if that generation is still pending it enqueues
 * a wait item, and the worker of s2 blocks on ev's condition variable until
 * the generation leaves pending. Pending is a set rather than a single
 * counter so that an event re-recorded on another stream stays exact: a
 * later generation reached first does not release a wait on an earlier one.
 * Generation 0 means "never recorded" and is never pending, so an event that
 * was never recorded counts as reached, as in CUDA (cudaStreamWaitEvent on
 * such an event is a no-op and cudaEventQuery reports success): a wait or
 * query must not block on something nobody has asked to happen.
 * event_query and event_sync refer to the latest record, as in CUDA.
 *
 * Deadlock freedom: a wait captures a generation whose marker has already
 * been enqueued (record holds the stream's mutex from the increment to the
 * push, and wait takes the same locks in the same order, stream then event),
 * markers always run, even on a failed stream, and a worker never holds its
 * stream's mutex while it runs an item. So every wait is on work enqueued
 * earlier, and the graph of waits has no cycle.
 *
 * Lifetime of events. An event holds one reference for its owner and one per
 * queued item that names it; event_free drops the owner's, and whoever drops
 * the last one destroys it. So an event may be freed while a marker or a
 * wait on it is still queued, as CUDA allows.
 *
 * Sticky errors. When a kernel fails (or has no CPU kernel), the worker
 * stores its status and message in the stream (the first failure wins) and
 * skips later launches, copies and fills on that stream until stream_sync
 * returns the error and clears it. Markers and waits still run on a failed
 * stream, so no other stream waits forever on it, and a stream that waits
 * before recording still passes on its ordering to the streams behind it.
 *
 * Threads, and what each touches (threaded streams; with inline streams the
 * host threads do the workers' part, one at a time per stream):
 *  - Host threads (the executor's; any thread, but the caller serialises
 *    calls on one stream): everything through the iface. They take the
 *    backend's mutex (arena list), a stream's mutex (queue, counters, error)
 *    and an event's mutex (generations, references, time).
 *  - One worker per stream: pops its own stream's queue and writes its
 *    counters and error under its mutex; runs kernels and copies on memory
 *    that the caller owns, with no lock held; takes events' mutexes for
 *    markers and waits. It never touches the arena list.
 *  - The CPU kernels' pool (kernels/cpu/parallel.c) is process-wide and
 *    sized by tide_backend_cpu_new; kernels on two streams at once share it
 *    (one of them runs its tasks on its own worker), with the same results.
 * Lock order: stream, then event. The backend's mutex is never held with
 * another. Worker threads block every signal, so signals reach the daemon's
 * main thread (the libev loop).
 */
#include "runtime/cpu/backend_cpu.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "runtime/backend-impl.h"

_Static_assert(SIZE_MAX >= UINT64_MAX, "the CPU backend needs a 64-bit size_t");

/* The emulated device's size when options->device_bytes is 0. */
#define CPU_DEFAULT_DEVICE_BYTES (UINT64_C(4) << 30)
/* Alignments of arenas (a page, like cudaMalloc's) and of host buffers. */
#define CPU_ARENA_ALIGN 4096
#define CPU_HOST_ALIGN  64
/* The device's name in device_info. */
#define CPU_DEVICE_NAME "cpu (emulated device)"

/* ============================================================================
 * Types
 * ========================================================================== */

struct cpu_arena {
    void *base;
    uint64_t bytes;
};

struct cpu_backend {
    /* Immutable after creation. */
    const struct tide_kernel_table *kernels; /* what launch dispatches to */
    uint64_t device_bytes;                   /* the emulated device's size */
    bool inline_streams;                     /* streams without workers (see DESIGN) */

    /* Arenas, under mutex. */
    pthread_mutex_t mutex;
    struct cpu_arena *arenas; /* live arenas, unordered */
    size_t n_arenas;
    size_t cap_arenas;
    uint64_t in_use; /* sum of the live arenas' bytes */

    atomic_uint next_stream_id; /* names worker threads "tide-cpu-s<id>" */
};

enum cpu_item_kind {
    CPU_ITEM_LAUNCH,
    CPU_ITEM_COPY,
    CPU_ITEM_FILL32,
    CPU_ITEM_RECORD,
    CPU_ITEM_WAIT,
};

/* One unit of work in a stream's queue. */
struct cpu_item {
    enum cpu_item_kind kind;
    union {
        const struct tide_kernel_args *args; /* LAUNCH: the caller's, valid until run */
        struct {
            void *dst;
            const void *src;
            uint64_t bytes;
        } copy; /* COPY */
        struct {
            void *dst;
            uint32_t pattern;
            uint64_t bytes;
        } fill; /* FILL32 */
        struct {
            struct tide_event *event; /* holds a reference */
            uint64_t generation;
        } marker; /* RECORD, WAIT */
    };
};

/*
 * A record not reached yet: its generation, and where its marker sits (the
 * stream, and the stream's item count once the marker is done), which is
 * what an inline stream's waiter runs up to.
 */
struct cpu_pending {
    uint64_t generation;
    struct tide_stream *stream;
    uint64_t seq;
};

struct tide_event {
    pthread_mutex_t mutex;
    pthread_cond_t reached_cond; /* broadcast whenever a generation is reached */
    uint64_t recorded;           /* the latest record's generation; 0: never recorded */
    struct cpu_pending *pending; /* generations recorded but not reached yet */
    size_t n_pending;
    size_t cap_pending;
    uint64_t time_generation; /* the latest generation reached; its time below */
    struct timespec time;     /* when time_generation was reached */
    unsigned refs;            /* the owner's, plus one per queued item naming it */
};

struct tide_stream {
    /* Immutable after creation. */
    struct cpu_backend *backend;
    pthread_t thread; /* the worker (threaded streams) */
    unsigned id;

    /* Everything below is under mutex. */
    pthread_mutex_t mutex;
    pthread_cond_t work_cond; /* the worker waits here for items or stopping */
    pthread_cond_t done_cond; /* stream_sync waits here for completed to advance */
    struct cpu_item *ring;    /* the queue: count items from head, wrapping at cap */
    size_t cap;
    size_t head;
    size_t count;
    uint64_t enqueued;       /* items ever enqueued */
    uint64_t completed;      /* items ever finished by the worker */
    uint64_t sync_target;    /* the least target of a waiting stream_sync; UINT64_MAX: none */
    bool stopping;           /* stream_free: drain the queue, then exit */
    bool running;            /* inline: a thread is running this stream's head item */
    pthread_t runner;        /* inline: that thread */
    unsigned waiters;        /* inline: threads waiting in done_cond for running to clear */
    struct tide_error error; /* the sticky error; status TIDE_OK when none */
};

/* ============================================================================
 * Events
 * ========================================================================== */

/* generation's entry in pending, or NULL when it is reached (or never recorded). */
static const struct cpu_pending *event_find_pending_locked(const struct tide_event *event,
                                                           uint64_t generation)
{
    for (size_t i = 0; i < event->n_pending; i++)
        if (event->pending[i].generation == generation)
            return &event->pending[i];
    return NULL;
}

/* Whether generation is recorded and not reached yet; with event->mutex held. */
static bool event_pending_locked(const struct tide_event *event, uint64_t generation)
{
    return event_find_pending_locked(event, generation) != NULL;
}

static void event_destroy(struct tide_event *event)
{
    pthread_cond_destroy(&event->reached_cond);
    pthread_mutex_destroy(&event->mutex);
    free(event->pending);
    free(event);
}

/* Drops a reference (event->mutex held); unlocks, and destroys the event if it was the last. */
static void event_unref_unlock(struct tide_event *event)
{
    assert(event->refs > 0);
    bool last = --event->refs == 0;
    pthread_mutex_unlock(&event->mutex);
    if (last)
        event_destroy(event);
}

/* The worker's side of a marker: generation is reached now. */
static void event_reach(struct tide_event *event, uint64_t generation)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&event->mutex);
    for (size_t i = 0; i < event->n_pending; i++) {
        if (event->pending[i].generation == generation) {
            event->pending[i] = event->pending[--event->n_pending];
            break;
        }
    }
    if (generation > event->time_generation) {
        event->time_generation = generation;
        event->time = now;
    }
    pthread_cond_broadcast(&event->reached_cond);
    event_unref_unlock(event);
}

static void stream_run_until(struct tide_stream *stream, uint64_t target);

/*
 * Waits until generation is reached, with event->mutex held (it is released
 * meanwhile). A generation recorded on an inline stream is reached by running
 * that stream up to its marker here, on this thread; one recorded on a
 * threaded stream, by its worker.
 */
static void event_wait_reached_locked(struct tide_event *event, uint64_t generation)
{
    const struct cpu_pending *p;
    while ((p = event_find_pending_locked(event, generation)) != NULL) {
        if (p->stream->backend->inline_streams) {
            struct tide_stream *stream = p->stream;
            uint64_t seq = p->seq;
            pthread_mutex_unlock(&event->mutex);
            stream_run_until(stream, seq);
            pthread_mutex_lock(&event->mutex);
        } else {
            pthread_cond_wait(&event->reached_cond, &event->mutex);
        }
    }
}

/* The worker's side of a wait: blocks until generation is reached. */
static void event_block(struct tide_event *event, uint64_t generation)
{
    pthread_mutex_lock(&event->mutex);
    event_wait_reached_locked(event, generation);
    event_unref_unlock(event);
}

/* ============================================================================
 * Streams: the queue and the worker
 * ========================================================================== */

/* Makes room for one more item, with stream->mutex held. */
static enum tide_status stream_reserve_locked(struct tide_stream *stream)
{
    if (stream->count < stream->cap)
        return TIDE_OK;
    size_t cap = stream->cap ? stream->cap * 2 : 64;
    struct cpu_item *ring = malloc(cap * sizeof(*ring));
    if (!ring)
        return TIDE_NOMEM;
    for (size_t i = 0; i < stream->count; i++)
        ring[i] = stream->ring[(stream->head + i) % stream->cap];
    free(stream->ring);
    stream->ring = ring;
    stream->cap = cap;
    stream->head = 0;
    return TIDE_OK;
}

/* Appends an item after stream_reserve_locked succeeded, with stream->mutex held. */
static void stream_push_locked(struct tide_stream *stream, const struct cpu_item *item)
{
    assert(stream->count < stream->cap);
    stream->ring[(stream->head + stream->count) % stream->cap] = *item;
    stream->count++;
    stream->enqueued++;
    if (!stream->backend->inline_streams)
        pthread_cond_signal(&stream->work_cond);
}

/* Enqueues an item that holds no reference. */
static enum tide_status stream_push(struct tide_stream *stream, const struct cpu_item *item)
{
    pthread_mutex_lock(&stream->mutex);
    enum tide_status st = stream_reserve_locked(stream);
    if (st == TIDE_OK)
        stream_push_locked(stream, item);
    pthread_mutex_unlock(&stream->mutex);
    return st;
}

/* Runs a kernel; on failure, err names the node. */
static enum tide_status run_launch(const struct tide_kernel_table *kernels,
                                   const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_node *node = args->node;
    const char *op = tide_op_info(node->op)->name;
    const char *name = node->name ? node->name : "";
    tide_kernel_fn fn = kernels->fn[node->op];
    if (!fn)
        return tide_error_set(err, TIDE_UNSUPPORTED, "no CPU kernel for op %s (node \"%s\")", op,
                              name);
    enum tide_status st = fn(args, err);
    if (st == TIDE_OK)
        return TIDE_OK;
    /*
     * Kernels name the node themselves (tide_node_error); one that does not
     * still gets it named here, since the stream's error is all the executor
     * sees of a failure that happened long after the launch returned.
     */
    if (err->message[0] == '\0')
        tide_error_set(err, st, "node \"%s\" (%s): kernel failed: %s", name, op, tide_strerror(st));
    else if (!strstr(err->message, name))
        tide_error_prefix(err, "node \"%s\" (%s)", name, op);
    err->status = st;
    return st;
}

/* Fills bytes / 4 words at dst with pattern; dst need not be aligned. */
static void fill_words(void *dst, uint32_t pattern, uint64_t bytes)
{
    unsigned char *p = dst;
    uint64_t words = bytes / 4;
    for (uint64_t i = 0; i < words; i++)
        memcpy(p + 4 * i, &pattern, 4);
}

/*
 * Runs one item. On a failed stream, launches, copies and fills are skipped;
 * markers and waits always run (see DESIGN).
 */
static enum tide_status run_item(struct tide_stream *stream, const struct cpu_item *item,
                                 bool failed, struct tide_error *err)
{
    switch (item->kind) {
    case CPU_ITEM_LAUNCH:
        if (!failed)
            return run_launch(stream->backend->kernels, item->args, err);
        return TIDE_OK;
    case CPU_ITEM_COPY:
        /* memmove: a device-to-device copy within one arena may overlap. */
        if (!failed)
            memmove(item->copy.dst, item->copy.src, (size_t)item->copy.bytes);
        return TIDE_OK;
    case CPU_ITEM_FILL32:
        if (!failed)
            fill_words(item->fill.dst, item->fill.pattern, item->fill.bytes);
        return TIDE_OK;
    case CPU_ITEM_RECORD:
        event_reach(item->marker.event, item->marker.generation);
        return TIDE_OK;
    case CPU_ITEM_WAIT:
        event_block(item->marker.event, item->marker.generation);
        return TIDE_OK;
    }
    return TIDE_OK;
}

/*
 * Pops the head item and runs it without the stream's mutex (held on entry
 * and on return); the first failure becomes the stream's sticky error.
 */
static void run_head_locked(struct tide_stream *stream)
{
    struct cpu_item item = stream->ring[stream->head];
    stream->head = (stream->head + 1) % stream->cap;
    stream->count--;
    bool failed = stream->error.status != TIDE_OK;
    pthread_mutex_unlock(&stream->mutex);

    struct tide_error item_err = {.status = TIDE_OK};
    enum tide_status st = run_item(stream, &item, failed, &item_err);

    pthread_mutex_lock(&stream->mutex);
    if (st != TIDE_OK && stream->error.status == TIDE_OK)
        stream->error = item_err;
    stream->completed++;
}

static void *stream_main(void *arg)
{
    struct tide_stream *stream = arg;
    pthread_mutex_lock(&stream->mutex);
    for (;;) {
        while (stream->count == 0 && !stream->stopping)
            pthread_cond_wait(&stream->work_cond, &stream->mutex);
        if (stream->count == 0)
            break; /* stopping, and drained */
        run_head_locked(stream);
        /* Wake stream_sync only when a waiter's target is reached, not once per item. */
        if (stream->completed >= stream->sync_target) {
            stream->sync_target = UINT64_MAX;
            pthread_cond_broadcast(&stream->done_cond);
        }
    }
    pthread_mutex_unlock(&stream->mutex);
    return NULL;
}

/*
 * An inline stream's runner: runs its items on the calling thread, in order,
 * until target items are completed. One thread runs a stream's items at a
 * time (running); another that needs the same stream waits for it. A WAIT
 * item runs the stream that records its event up to the marker
 * (event_block), so a step's work runs on the thread that synchronises it,
 * stream by stream as the events demand, with no hand-off between threads.
 */
static void stream_run_until(struct tide_stream *stream, uint64_t target)
{
    pthread_mutex_lock(&stream->mutex);
    while (stream->completed < target) {
        if (stream->running) {
            /* Never this thread: waits only go back to earlier work (see DESIGN). */
            assert(!pthread_equal(stream->runner, pthread_self()));
            stream->waiters++;
            pthread_cond_wait(&stream->done_cond, &stream->mutex);
            stream->waiters--;
            continue;
        }
        assert(stream->count > 0);
        stream->running = true;
        stream->runner = pthread_self();
        run_head_locked(stream);
        stream->running = false;
        if (stream->waiters > 0)
            pthread_cond_broadcast(&stream->done_cond);
    }
    pthread_mutex_unlock(&stream->mutex);
}

/* ============================================================================
 * The iface: memory
 * ========================================================================== */

static void cpu_device_info(void *context, char *name, size_t name_size, uint64_t *total_bytes)
{
    struct cpu_backend *cpu = context;
    if (name && name_size > 0)
        snprintf(name, name_size, "%s", CPU_DEVICE_NAME);
    if (total_bytes)
        *total_bytes = cpu->device_bytes;
}

static enum tide_status cpu_arena_alloc(void *context, uint64_t bytes, void **base,
                                        struct tide_error *err)
{
    struct cpu_backend *cpu = context;
    enum tide_status st = TIDE_OK;
    void *p = NULL;
    pthread_mutex_lock(&cpu->mutex);
    if (bytes > cpu->device_bytes - cpu->in_use) {
        st = tide_error_set(err, TIDE_NOMEM,
                            "arena of %" PRIu64 " bytes does not fit the emulated device: %" PRIu64
                            " of %" PRIu64 " bytes in use, %" PRIu64 " free",
                            bytes, cpu->in_use, cpu->device_bytes, cpu->device_bytes - cpu->in_use);
        goto out;
    }
    if (cpu->n_arenas == cpu->cap_arenas) {
        size_t cap = cpu->cap_arenas ? cpu->cap_arenas * 2 : 8;
        struct cpu_arena *arenas = realloc(cpu->arenas, cap * sizeof(*arenas));
        if (!arenas) {
            st = tide_error_set(err, TIDE_NOMEM, "out of memory for the arena list");
            goto out;
        }
        cpu->arenas = arenas;
        cpu->cap_arenas = cap;
    }
    int rc = posix_memalign(&p, CPU_ARENA_ALIGN, (size_t)bytes);
    if (rc != 0) {
        st = tide_error_set(err, TIDE_NOMEM,
                            "arena of %" PRIu64 " bytes: the host could not allocate it (%s)",
                            bytes, strerror(rc));
        goto out;
    }
    cpu->arenas[cpu->n_arenas++] = (struct cpu_arena){.base = p, .bytes = bytes};
    cpu->in_use += bytes;
    *base = p;
out:
    pthread_mutex_unlock(&cpu->mutex);
    return st;
}

static void cpu_arena_free(void *context, void *base)
{
    struct cpu_backend *cpu = context;
    bool found = false;
    pthread_mutex_lock(&cpu->mutex);
    for (size_t i = 0; i < cpu->n_arenas; i++) {
        if (cpu->arenas[i].base == base) {
            cpu->in_use -= cpu->arenas[i].bytes;
            cpu->arenas[i] = cpu->arenas[--cpu->n_arenas];
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&cpu->mutex);
    if (found)
        free(base);
    else
        TIDE_LOG_ERROR("cpu backend: arena_free of %p, which is not a live arena; ignored", base);
}

static enum tide_status cpu_host_alloc(void *context, uint64_t bytes, void **ptr,
                                       struct tide_error *err)
{
    void *p = NULL;
    int rc = posix_memalign(&p, CPU_HOST_ALIGN, (size_t)bytes);
    if (rc != 0)
        return tide_error_set(err, TIDE_NOMEM, "host buffer of %" PRIu64 " bytes: %s", bytes,
                              strerror(rc));
    *ptr = p;
    return TIDE_OK;
}

static void cpu_host_free(void *context, void *ptr)
{
    free(ptr);
}

/* ============================================================================
 * The iface: streams
 * ========================================================================== */

static enum tide_status cpu_stream_new(void *context, struct tide_stream **out,
                                       struct tide_error *err)
{
    struct cpu_backend *cpu = context;
    struct tide_stream *stream = calloc(1, sizeof(*stream));
    if (!stream)
        return tide_error_set(err, TIDE_NOMEM, "out of memory for a stream");
    stream->backend = cpu;
    stream->id = atomic_fetch_add(&cpu->next_stream_id, 1);
    stream->error.status = TIDE_OK;
    stream->sync_target = UINT64_MAX;
    pthread_mutex_init(&stream->mutex, NULL);
    pthread_cond_init(&stream->work_cond, NULL);
    pthread_cond_init(&stream->done_cond, NULL);
    if (cpu->inline_streams) {
        *out = stream;
        return TIDE_OK;
    }

    /* The worker inherits a mask that blocks every signal: they are the main thread's. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&stream->thread, NULL, stream_main, stream);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&stream->done_cond);
        pthread_cond_destroy(&stream->work_cond);
        pthread_mutex_destroy(&stream->mutex);
        free(stream);
        return tide_error_set(err, TIDE_INTERNAL, "cannot start a stream's worker thread: %s",
                              strerror(rc));
    }
    char name[16];
    snprintf(name, sizeof(name), "tide-cpu-s%u", stream->id % 10000);
    pthread_setname_np(stream->thread, name);
    *out = stream;
    return TIDE_OK;
}

static void cpu_stream_free(void *context, struct tide_stream *stream)
{
    if (stream->backend->inline_streams) {
        /* Work nobody waited for still runs, as a worker would drain its queue. */
        pthread_mutex_lock(&stream->mutex);
        uint64_t target = stream->enqueued;
        pthread_mutex_unlock(&stream->mutex);
        stream_run_until(stream, target);
    } else {
        pthread_mutex_lock(&stream->mutex);
        stream->stopping = true;
        pthread_cond_signal(&stream->work_cond);
        pthread_mutex_unlock(&stream->mutex);
        pthread_join(stream->thread, NULL);
    }

    /* The worker has exited: nothing else touches the stream now. */
    if (stream->error.status != TIDE_OK)
        TIDE_LOG_WARN("cpu backend: stream %u freed with an error nobody synced: %s", stream->id,
                      stream->error.message);
    pthread_cond_destroy(&stream->done_cond);
    pthread_cond_destroy(&stream->work_cond);
    pthread_mutex_destroy(&stream->mutex);
    free(stream->ring);
    free(stream);
}

static enum tide_status cpu_stream_sync(void *context, struct tide_stream *stream,
                                        struct tide_error *err)
{
    pthread_mutex_lock(&stream->mutex);
    uint64_t target = stream->enqueued;
    if (stream->backend->inline_streams) {
        pthread_mutex_unlock(&stream->mutex);
        stream_run_until(stream, target);
        pthread_mutex_lock(&stream->mutex);
    }
    while (stream->completed < target) {
        /* Every waiter woken short of its target sets it again. */
        if (target < stream->sync_target)
            stream->sync_target = target;
        pthread_cond_wait(&stream->done_cond, &stream->mutex);
    }
    struct tide_error sticky = stream->error;
    stream->error.status = TIDE_OK;
    stream->error.message[0] = '\0';
    pthread_mutex_unlock(&stream->mutex);
    if (sticky.status == TIDE_OK)
        return TIDE_OK;
    if (err)
        *err = sticky;
    return sticky.status;
}

/* ============================================================================
 * The iface: events
 * ========================================================================== */

static enum tide_status cpu_event_new(void *context, struct tide_event **out,
                                      struct tide_error *err)
{
    struct tide_event *event = calloc(1, sizeof(*event));
    if (!event)
        return tide_error_set(err, TIDE_NOMEM, "out of memory for an event");
    pthread_mutex_init(&event->mutex, NULL);
    pthread_cond_init(&event->reached_cond, NULL);
    event->refs = 1;
    *out = event;
    return TIDE_OK;
}

static void cpu_event_free(void *context, struct tide_event *event)
{
    pthread_mutex_lock(&event->mutex);
    event_unref_unlock(event);
}

static enum tide_status cpu_event_record(void *context, struct tide_event *event,
                                         struct tide_stream *stream)
{
    /*
     * The stream's mutex is held from the increment to the push, so a wait
     * that sees the new generation is enqueued after its marker (see DESIGN).
     */
    pthread_mutex_lock(&stream->mutex);
    enum tide_status st = TIDE_OK;
    if (stream->completed == stream->enqueued) {
        /*
         * An idle stream (nothing queued, nothing running) has reached the
         * marker already: stamp it here rather than wake the worker for it.
         * Profiled and traced steps record three events per position, and a
         * wake per marker cost more than the work on small kernels.
         */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        pthread_mutex_lock(&event->mutex);
        uint64_t generation = ++event->recorded;
        event->time_generation = generation;
        event->time = now;
        pthread_cond_broadcast(&event->reached_cond);
        pthread_mutex_unlock(&event->mutex);
        goto out;
    }
    st = stream_reserve_locked(stream);
    if (st != TIDE_OK)
        goto out;
    pthread_mutex_lock(&event->mutex);
    if (event->n_pending == event->cap_pending) {
        size_t cap = event->cap_pending ? event->cap_pending * 2 : 4;
        struct cpu_pending *pending = realloc(event->pending, cap * sizeof(*pending));
        if (!pending) {
            pthread_mutex_unlock(&event->mutex);
            st = TIDE_NOMEM;
            goto out;
        }
        event->pending = pending;
        event->cap_pending = cap;
    }
    uint64_t generation = ++event->recorded;
    /* The marker will be item number enqueued + 1 of the stream. */
    event->pending[event->n_pending++] = (struct cpu_pending){
        .generation = generation, .stream = stream, .seq = stream->enqueued + 1};
    event->refs++;
    pthread_mutex_unlock(&event->mutex);
    stream_push_locked(stream, &(struct cpu_item){
                                   .kind = CPU_ITEM_RECORD,
                                   .marker = {.event = event, .generation = generation},
                               });
out:
    pthread_mutex_unlock(&stream->mutex);
    return st;
}

static enum tide_status cpu_event_wait(void *context, struct tide_stream *stream,
                                       struct tide_event *event)
{
    pthread_mutex_lock(&stream->mutex);
    enum tide_status st = stream_reserve_locked(stream);
    if (st != TIDE_OK)
        goto out;
    pthread_mutex_lock(&event->mutex);
    uint64_t generation = event->recorded;
    /* A generation already reached (or 0, never recorded) needs no wait. */
    bool needed = event_pending_locked(event, generation);
    if (needed)
        event->refs++;
    pthread_mutex_unlock(&event->mutex);
    if (needed)
        stream_push_locked(stream, &(struct cpu_item){
                                       .kind = CPU_ITEM_WAIT,
                                       .marker = {.event = event, .generation = generation},
                                   });
out:
    pthread_mutex_unlock(&stream->mutex);
    return st;
}

static enum tide_status cpu_event_query(void *context, struct tide_event *event, bool *done)
{
    pthread_mutex_lock(&event->mutex);
    const struct cpu_pending *p = event_find_pending_locked(event, event->recorded);
    if (p && p->stream->backend->inline_streams)
        event_wait_reached_locked(event, event->recorded); /* nothing else would run it */
    *done = !event_pending_locked(event, event->recorded);
    pthread_mutex_unlock(&event->mutex);
    return TIDE_OK;
}

static enum tide_status cpu_event_sync(void *context, struct tide_event *event)
{
    pthread_mutex_lock(&event->mutex);
    event_wait_reached_locked(event, event->recorded);
    pthread_mutex_unlock(&event->mutex);
    return TIDE_OK;
}

/*
 * The time at which the event's latest record was reached: TIDE_STATE if it
 * was never recorded, TIDE_UNAVAILABLE if it is not reached yet (CUDA's
 * cudaErrorNotReady).
 */
static enum tide_status event_time(struct tide_event *event, struct timespec *time)
{
    enum tide_status st = TIDE_OK;
    pthread_mutex_lock(&event->mutex);
    if (event->recorded == 0)
        st = TIDE_STATE;
    else if (event_pending_locked(event, event->recorded))
        st = TIDE_UNAVAILABLE;
    else
        *time = event->time; /* reached, so time_generation == recorded */
    pthread_mutex_unlock(&event->mutex);
    return st;
}

static enum tide_status cpu_event_elapsed(void *context, struct tide_event *start,
                                          struct tide_event *end, double *ms)
{
    struct timespec t0, t1;
    enum tide_status st = event_time(start, &t0);
    if (st == TIDE_OK)
        st = event_time(end, &t1);
    if (st != TIDE_OK)
        return st;
    *ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    return TIDE_OK;
}

/* ============================================================================
 * The iface: copies, fills and kernels
 * ========================================================================== */

static enum tide_status cpu_copy(struct tide_stream *stream, void *dst, const void *src,
                                 uint64_t bytes)
{
    return stream_push(stream, &(struct cpu_item){
                                   .kind = CPU_ITEM_COPY,
                                   .copy = {.dst = dst, .src = src, .bytes = bytes},
                               });
}

static enum tide_status cpu_copy_h2d(void *context, void *dst_device, const void *src_host,
                                     uint64_t bytes, struct tide_stream *stream)
{
    return cpu_copy(stream, dst_device, src_host, bytes);
}

static enum tide_status cpu_copy_d2h(void *context, void *dst_host, const void *src_device,
                                     uint64_t bytes, struct tide_stream *stream)
{
    return cpu_copy(stream, dst_host, src_device, bytes);
}

static enum tide_status cpu_copy_d2d(void *context, void *dst_device, const void *src_device,
                                     uint64_t bytes, struct tide_stream *stream)
{
    return cpu_copy(stream, dst_device, src_device, bytes);
}

static enum tide_status cpu_fill32(void *context, void *dst_device, uint32_t pattern,
                                   uint64_t bytes, struct tide_stream *stream)
{
    return stream_push(stream, &(struct cpu_item){
                                   .kind = CPU_ITEM_FILL32,
                                   .fill = {.dst = dst_device, .pattern = pattern, .bytes = bytes},
                               });
}

static enum tide_status cpu_launch(void *context, struct tide_stream *stream,
                                   const struct tide_kernel_args *args)
{
    return stream_push(stream, &(struct cpu_item){.kind = CPU_ITEM_LAUNCH, .args = args});
}

/* The sources and the memory ops are the executor's copies; every other op needs a kernel. */
static bool cpu_supports_op(void *context, const struct tide_graph *graph,
                            const struct tide_node *node)
{
    struct cpu_backend *cpu = context;
    if (tide_op_info(node->op)->flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY))
        return true;
    return cpu->kernels->fn[node->op] != NULL;
}

static uint64_t cpu_workspace_bytes(void *context, const struct tide_graph *graph,
                                    const struct tide_node *node)
{
    struct cpu_backend *cpu = context;
    if (!cpu->kernels->workspace_bytes)
        return 0;
    return cpu->kernels->workspace_bytes(NULL, graph, node);
}

/* ============================================================================
 * Creation
 * ========================================================================== */

static void cpu_free(void *context)
{
    struct cpu_backend *cpu = context;
    if (cpu->n_arenas > 0) {
        TIDE_LOG_WARN("cpu backend: freed with %zu arenas live (%" PRIu64 " bytes); freeing them",
                      cpu->n_arenas, cpu->in_use);
        for (size_t i = 0; i < cpu->n_arenas; i++)
            free(cpu->arenas[i].base);
    }
    free(cpu->arenas);
    pthread_mutex_destroy(&cpu->mutex);
    free(cpu);
}

static const struct tide_backend_iface cpu_iface = {
    .name = "cpu",
    .free = cpu_free,
    .device_info = cpu_device_info,
    .arena_alloc = cpu_arena_alloc,
    .arena_free = cpu_arena_free,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .stream_new = cpu_stream_new,
    .stream_free = cpu_stream_free,
    .stream_sync = cpu_stream_sync,
    .event_new = cpu_event_new,
    .event_free = cpu_event_free,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_query = cpu_event_query,
    .event_sync = cpu_event_sync,
    .event_elapsed = cpu_event_elapsed,
    .copy_h2d = cpu_copy_h2d,
    .copy_d2h = cpu_copy_d2h,
    .copy_d2d = cpu_copy_d2d,
    .fill32 = cpu_fill32,
    .launch = cpu_launch,
    .supports_op = cpu_supports_op,
    .workspace_bytes = cpu_workspace_bytes,
};

enum tide_status tide__backend_cpu_new_with_kernels(const struct tide_backend_options *options,
                                                    const struct tide_kernel_table *kernels,
                                                    struct tide_backend **out,
                                                    struct tide_error *err)
{
    if (!out || !kernels)
        return tide_error_set(err, TIDE_INVALID, "cpu backend: out and kernels must not be NULL");
    *out = NULL;
    struct tide_backend_options defaults = {0};
    if (!options)
        options = &defaults;
    if (options->threads < 0)
        return tide_error_set(err, TIDE_INVALID,
                              "cpu backend: threads is %d; want 0 (the default) or more",
                              options->threads);

    enum tide_cpu_streams streams = options->cpu_streams;
    if (streams == TIDE_CPU_STREAMS_DEFAULT) {
        const char *env = getenv("TIDE_CPU_STREAMS");
        if (!env || !*env || strcmp(env, "inline") == 0)
            streams = TIDE_CPU_STREAMS_INLINE;
        else if (strcmp(env, "threads") == 0)
            streams = TIDE_CPU_STREAMS_THREADS;
        else
            return tide_error_set(err, TIDE_INVALID,
                                  "cpu backend: TIDE_CPU_STREAMS is \"%s\"; want inline or threads",
                                  env);
    } else if (streams != TIDE_CPU_STREAMS_INLINE && streams != TIDE_CPU_STREAMS_THREADS) {
        return tide_error_set(err, TIDE_INVALID, "cpu backend: cpu_streams is %d; want 0, 1 or 2",
                              (int)streams);
    }

    struct tide_backend *backend = calloc(1, sizeof(*backend));
    struct cpu_backend *cpu = calloc(1, sizeof(*cpu));
    if (!backend || !cpu) {
        free(backend);
        free(cpu);
        return tide_error_set(err, TIDE_NOMEM, "out of memory for the cpu backend");
    }
    cpu->kernels = kernels;
    cpu->device_bytes = options->device_bytes ? options->device_bytes : CPU_DEFAULT_DEVICE_BYTES;
    cpu->inline_streams = streams == TIDE_CPU_STREAMS_INLINE;
    pthread_mutex_init(&cpu->mutex, NULL);
    atomic_init(&cpu->next_stream_id, 0);

    /* tide_backend_free frees the context through the iface, then the handle. */
    backend->iface = &cpu_iface;
    backend->context = cpu;
    *out = backend;
    return TIDE_OK;
}

enum tide_status tide_backend_cpu_new(const struct tide_backend_options *options,
                                      struct tide_backend **out, struct tide_error *err)
{
    enum tide_status st = tide__backend_cpu_new_with_kernels(options, &tide_cpu_kernels, out, err);
    /*
     * The kernels' pool is process-wide (kernels/cpu/parallel.c), and starts
     * only when told: size it here, 0 meaning one thread per core.
     */
    if (st == TIDE_OK)
        tide_cpu_kernels_set_threads(options ? options->threads : 0);
    return st;
}
