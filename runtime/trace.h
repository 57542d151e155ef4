/* SPDX-License-Identifier: MIT */
/*
 * trace.h: step traces: what ran on which stream and when, in the steps of a
 * job, and the device and host memory in use meanwhile, written out as Chrome
 * Trace Event JSON that ui.perfetto.dev and chrome://tracing open.
 *
 * A struct tide_trace is a recording. The executor is the one place that
 * appends to it: while tracing is on (tide_executor_trace_start), each step
 * it runs, full or masked, adds what its profiling events measured (see
 * executor.c, "Tracing"). tide_trace_json writes the recording out; tide-bench
 * (train --trace) and tided (Jobs.Trace) both call it, and a client only
 * ever sees the bytes.
 *
 * What one traced step holds:
 *  - a slice per position that ran: its node (name, op, partition), its
 *    stream (compute, h2d, d2h), its start and duration, and for copies the
 *    bytes moved;
 *  - a "wait" slice before a compute position whose stream sat waiting for
 *    copies (the stall that tide_step_stats.stall_ms sums), when it waited;
 *  - a flow from each SwapIn and Fetch to its first consumer;
 *  - counter samples of two series, one per position that ran and one at
 *    the end of the step:
 *      device bytes in use: the executor's region accounting, after the
 *        position's regions became alive: the largest live offset + bytes
 *        in the job's arena. Its maximum over a step is exactly that step's
 *        tide_step_stats.high_water_bytes.
 *      host bytes in use: the bytes of the job's host arena that hold live
 *        data: the homes of host-homed Variables and Consts (optimizer state
 *        included) and the Placeholders' staging buffers (the fed batch),
 *        which hold data for the whole step, plus each swap slot from its
 *        SwapOut's position to its last SwapIn's (or to the end of the step
 *        when that does not run). The scratch buffer, used at creation only,
 *        is not counted.
 * The writer adds, per step and per stream track, a slice for the step and
 * one for each run of the same partition on that track, enclosing the
 * position slices, so that the tracks fold by step and by partition.
 *
 * Times are nanoseconds since the recording's time base: the host's
 * monotonic clock when its first step began. A step's slices are placed at
 * the host time its step began plus their device time since the step's
 * first event (the earliest of one base event per stream), so every slice of
 * a step lies within the step's host time span and steps never overlap, on
 * either backend. Counter samples are placed at the start of their
 * position's slice, kept in plan order (never before the previous sample).
 *
 * JSON: {"traceEvents":[...],"displayTimeUnit":"ms"}; process and thread
 * name metadata ("M") name one process "tide" and its tracks compute, h2d
 * and d2h; slices are complete events ("X"), flows "s"/"f" pairs, counters
 * "C" events named "device" and "host" with one series "bytes in use".
 * Timestamps are microseconds with three decimals (nanoseconds exactly).
 *
 * Errors while recording (out of memory) never fail a step: they are kept
 * in the recording, and tide_trace_json returns the first one.
 *
 * Ownership: the caller of tide_trace_new owns the recording and frees it
 * with tide_trace_free. It borrows the graph, which must outlive it.
 * Threads: one thread at a time (the thread that drives the executor).
 *
 * Example usage:
 *
 *     struct tide_trace *trace;
 *     tide_trace_new(graph, &trace, &err);
 *     tide_executor_trace_start(ex, trace, &err);
 *     tide_executor_step(ex, &stats, &err);            // recorded
 *     tide_executor_trace_stop(ex);
 *     char *json; size_t len;
 *     if (tide_trace_json(trace, 0, &json, &len, &err) == TIDE_OK)
 *         fwrite(json, 1, len, file), free(json);
 *     tide_trace_free(trace);
 */
#ifndef TIDE_RUNTIME_TRACE_H
#define TIDE_RUNTIME_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "graph/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A recording of traced steps. Opaque. */
struct tide_trace;

/* What a slice is. */
enum tide_trace_slice_kind {
    TIDE_TRACE_WORK = 0, /* a position's kernel or copy */
    TIDE_TRACE_WAIT = 1, /* its stream waiting for other streams before it */
};

/* One slice, as the executor records it. */
struct tide_trace_slice {
    uint32_t node;   /* node id in the recording's graph */
    uint8_t stream;  /* enum tide_stream_id */
    uint8_t kind;    /* enum tide_trace_slice_kind */
    int64_t start_ns; /* since the start of its step (tide_trace_step_begin) */
    int64_t dur_ns;
    uint64_t bytes; /* bytes copied; 0 for kernels and waits */
};

/* A new, empty recording of steps of graph (borrowed). */
enum tide_status tide_trace_new(const struct tide_graph *graph, struct tide_trace **out,
                                struct tide_error *err);

/* Frees the recording. NULL is a no-op. */
void tide_trace_free(struct tide_trace *trace);

/* Empties the recording (and its error) for reuse; the next step sets a new time base. */
void tide_trace_clear(struct tide_trace *trace);

/* The graph the recording names nodes of. */
const struct tide_graph *tide_trace_graph(const struct tide_trace *trace);

/* Steps recorded (full and masked), and how many of them were full steps. */
uint32_t tide_trace_steps(const struct tide_trace *trace, uint32_t *full_steps);

/* Slices, flows and counter samples recorded (for tests and reports). */
void tide_trace_counts(const struct tide_trace *trace, size_t *slices, size_t *flows,
                       size_t *counters);

/*
 * Recording, for the executor. A step is step_begin, then its slices, flows
 * and counter samples, then step_end; times of slices and samples are
 * nanoseconds since step_begin's host_ns (CLOCK_MONOTONIC). Out of memory
 * is kept in the recording (see the header comment) and makes the rest of
 * the recording a no-op.
 */
void tide_trace_step_begin(struct tide_trace *trace, uint64_t step, bool masked, int64_t host_ns);
/* Adds a slice; returns its index among the step's slices, or UINT32_MAX after an error. */
uint32_t tide_trace_add_slice(struct tide_trace *trace, const struct tide_trace_slice *slice);
/* Adds a flow between two slices of the current step (indices from tide_trace_add_slice). */
void tide_trace_add_flow(struct tide_trace *trace, uint32_t from, uint32_t to);
/* Adds a sample of both counter series. */
void tide_trace_add_counter(struct tide_trace *trace, int64_t ts_ns, uint64_t device_bytes,
                            uint64_t host_bytes);
void tide_trace_step_end(struct tide_trace *trace, int64_t host_ns);

/*
 * Writes the recording as Chrome Trace Event JSON into a malloc'd buffer,
 * NUL-terminated, that the caller frees: *json and its length *len.
 * TIDE_LIMIT, naming both sizes, when it would exceed max_bytes (0: no
 * limit); TIDE_NOMEM; or the recording's own error.
 */
enum tide_status tide_trace_json(const struct tide_trace *trace, size_t max_bytes, char **json,
                                 size_t *len, struct tide_error *err);

/* tide_trace_json into a file (created or truncated); TIDE_IO names the file and the reason. */
enum tide_status tide_trace_write_file(const struct tide_trace *trace, const char *path,
                                       struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_TRACE_H */
