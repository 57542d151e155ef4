/* SPDX-License-Identifier: MIT */
/*
 * executor.h: runs an annotated, planned graph once per step on a backend.
 *
 * The executor needs nothing but the annotated graph (each node's stream,
 * each output's home and offset) and the memory plan (order, workspaces,
 * lifetimes). At creation it allocates the job's arena (exactly the budget)
 * and its host arena (exactly the plan's host_bytes, in one
 * tide_backend_host_alloc: the homes of host-homed tensors, see
 * swapper/swapper.h, the Placeholders' staging buffers and a scratch buffer,
 * laid out by memplan/memplan.h), copies Consts in, initialises Variables
 * (tide_variable_init, seeded) in their homes, and builds every node's kernel
 * arguments once: nothing is allocated per step.
 *
 * Each step enqueues the plan in order: Placeholders are copied from the
 * staged feeds on the h2d stream, kernels run on the compute stream, memory
 * ops on their stream; a dependency that crosses streams becomes an event.
 * Region accounting follows the plan as executed: a region becomes alive when
 * its producer is enqueued and dies after its last reader; the executor
 * checks that no two live regions overlap and records the high-water mark
 * (largest live offset + bytes). In poison mode a dead region is filled with
 * a NaN pattern on the stream of its last reader, once its readers on the
 * other streams have finished too, so a read-after-free breaks results
 * instead of passing by luck.
 *
 * Threads: one thread (the caller's) drives an executor; backend streams do
 * the work. Not thread-safe.
 *
 * Example usage:
 *
 *     struct tide_executor *ex;
 *     tide_executor_new(graph, &plan, backend, &opts, &ex, &err);
 *     tide_executor_feed(ex, x_id, images, bytes, &err);
 *     tide_executor_step(ex, &stats, &err);
 *     tide_executor_read(ex, (struct tide_edge){loss_id, 0}, &loss, 4, &err);
 *     tide_executor_free(ex);
 */
#ifndef TIDE_RUNTIME_EXECUTOR_H
#define TIDE_RUNTIME_EXECUTOR_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "memplan/memplan.h"
#include "runtime/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tide_executor;

struct tide_executor_options {
    /* The device arena's size; must be >= the plan's peak. */
    uint64_t budget_bytes;
    /* Seed for Variable initialisers. */
    uint64_t seed;
    /* Fill dead regions with NaN (debug). */
    bool poison;
    /* Record per-node times in the stats (costs an event per node). */
    bool profile;
};

struct tide_step_stats {
    uint64_t step;            /* 1-based */
    double step_ms;
    uint64_t high_water_bytes; /* largest live offset + bytes seen this step */
    /*
     * Per partition (node->partition; a node without one counts in 0): the
     * largest live offset + bytes while its positions ran, which equals the
     * plan's arena_top_bytes of that partition (tide/timeline.h). Valid
     * until the next step.
     */
    const uint64_t *partition_high_water_bytes;
    uint32_t n_partitions;
    uint64_t h2d_bytes;
    uint64_t d2h_bytes;
    double stall_ms;          /* compute stream waiting on copies, every step (0: none) */
    const double *node_ms;    /* per node id when profiled, else NULL; valid until next step */
};

enum tide_status tide_executor_new(struct tide_graph *graph, const struct tide_memplan *plan,
                                   struct tide_backend *backend,
                                   const struct tide_executor_options *options,
                                   struct tide_executor **out, struct tide_error *err);
/* Frees the executor, its arena, streams and events. NULL is a no-op. */
void tide_executor_free(struct tide_executor *ex);

/* Stages the next step's value of a Placeholder (copied; exact byte count). */
enum tide_status tide_executor_feed(struct tide_executor *ex, uint32_t placeholder,
                                    const void *data, uint64_t bytes, struct tide_error *err);

/* Runs one step to completion. A kernel failure fails the step with its message. */
enum tide_status tide_executor_step(struct tide_executor *ex, struct tide_step_stats *stats,
                                    struct tide_error *err);

/*
 * Runs only the nodes with mask[id] != 0 (an ancestor-closed subset, e.g. the
 * forward pass for evaluation); the step counter does not advance and no
 * update runs unless masked in. stats->step is the current count.
 */
enum tide_status tide_executor_step_masked(struct tide_executor *ex, const uint8_t *mask,
                                           struct tide_step_stats *stats, struct tide_error *err);

/*
 * Copies an output of the last step (or a Variable's current value) to host
 * memory. The output must still be alive at the end of the step: Variables,
 * Consts, and outputs marked with tide_executor_keep before the first step.
 */
enum tide_status tide_executor_read(struct tide_executor *ex, struct tide_edge output, void *dst,
                                    uint64_t bytes, struct tide_error *err);

/*
 * Copies bytes [offset, offset + bytes) of what tide_executor_read would
 * copy (a page of a large Variable). TIDE_INVALID when the range passes
 * the output's end.
 */
enum tide_status tide_executor_read_range(struct tide_executor *ex, struct tide_edge output,
                                          uint64_t offset, void *dst, uint64_t bytes,
                                          struct tide_error *err);

/* Overwrites a Variable's value (checkpoint restore). */
enum tide_status tide_executor_write_variable(struct tide_executor *ex, uint32_t variable,
                                              const void *src, uint64_t bytes,
                                              struct tide_error *err);

/*
 * Overwrites bytes [offset, offset + bytes) of a Variable's value (a value
 * streamed in chunks): in place in its host home, or copied to its region
 * of the arena. TIDE_INVALID when the range passes the Variable's end.
 */
enum tide_status tide_executor_write_variable_range(struct tide_executor *ex, uint32_t variable,
                                                    uint64_t offset, const void *src,
                                                    uint64_t bytes, struct tide_error *err);

/* The steps run so far. */
uint64_t tide_executor_steps(const struct tide_executor *ex);

/* A recording of traced steps (runtime/trace.h). */
struct tide_trace;

/*
 * Turns step tracing on: from the next step on, every step (full and
 * masked) appends its slices, flows and memory counters to trace, until
 * tide_executor_trace_stop. The caller owns trace, made for this
 * executor's graph, and keeps it until tracing stops or the executor is
 * freed. Call it between steps, as often as wanted; a second start switches
 * to the new recording. Positions are timed with profile mode's events: the
 * first start creates them (and a few arrays), once, if profile mode has
 * not; tracing never allocates host memory through the backend. While it
 * is off, steps record nothing and cost what they cost before.
 * TIDE_UNSUPPORTED when the backend cannot time events (event_elapsed);
 * TIDE_INVALID when trace records another graph.
 */
enum tide_status tide_executor_trace_start(struct tide_executor *ex, struct tide_trace *trace,
                                           struct tide_error *err);

/* Turns step tracing off; the recording keeps what it has. A no-op when it is off. */
void tide_executor_trace_stop(struct tide_executor *ex);

/*
 * Sets the count of steps already run, for resuming from a checkpoint taken
 * after that many steps: the next step is number steps + 1, and kernels that
 * read the step (Adam's bias correction) continue where the checkpoint left
 * off instead of starting over. Like every call, it runs between steps (the
 * executor is driven by one thread and each step runs to completion).
 * TIDE_INVALID when steps is UINT64_MAX, which leaves no next step.
 */
enum tide_status tide_executor_set_step(struct tide_executor *ex, uint64_t steps,
                                        struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_EXECUTOR_H */
