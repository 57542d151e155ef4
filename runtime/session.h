/* SPDX-License-Identifier: MIT */
/*
 * session.h: one job's whole in-process path, from graph to steps.
 *
 * A session runs the same pipeline as the daemon: import (validation and
 * shape inference), autodiff when training, the depth-first order, stream
 * assignment, the memory plan, then an executor on a backend. tide-bench,
 * the tests and the daemon's job manager all go through it, so the
 * in-process path and the remote path are one path from the graph on.
 *
 * Example usage:
 *
 *     struct tide_session_options o = tide_session_options_default();
 *     o.train = &train;  o.budget_bytes = 256 << 20;
 *     o.fetches = (const char *[]){"logits"};  o.n_fetches = 1;
 *     struct tide_session *s;
 *     if (tide_session_new(bytes, len, &o, &s, &err) != TIDE_OK) ...;
 *     tide_session_feed(s, "x", images, nbytes, &err);
 *     tide_session_feed(s, "labels", labels, nbytes, &err);
 *     tide_session_step(s, &stats, &err);
 *     tide_session_fetch(s, "loss", &loss, sizeof(loss), &err);
 *     tide_session_free(s);
 *
 *     // A trace of the next steps (runtime/trace.h).
 *     tide_session_trace_start(s, &err);
 *     tide_session_step(s, &stats, &err);
 *     tide_session_trace_stop(s);
 *     tide_trace_write_file(tide_session_trace(s), "trace.json", &err);
 *
 *     // A dry run: the report, whether or not the plan fits.
 *     enum tide_status st = tide_session_plan(bytes, len, &o, &s, &err);
 *     if (st == TIDE_OK || st == TIDE_DOES_NOT_FIT)
 *         print(tide_session_plan_report(s)), tide_session_free(s);
 */
#ifndef TIDE_RUNTIME_SESSION_H
#define TIDE_RUNTIME_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "graph/autodiff.h"
#include "graph/graph.h"
#include "memplan/memplan.h"
#include "runtime/backend.h"
#include "runtime/executor.h"
#include "runtime/trace.h"
#include "swapper/swapper.h"

#ifdef __cplusplus
extern "C" {
#endif

struct tide_session;

struct tide_session_options {
    /* The backend to run on; NULL: the session creates one by backend_name. */
    struct tide_backend *backend;
    const char *backend_name; /* "cpu" (default), "cuda", "auto" */
    /*
     * When the session creates its backend: the CPU kernels' threads (0: one
     * per core), as tide_backend_options.threads, which says what they bound.
     * Ignored when backend is given: it was sized when it was created.
     */
    int threads;
    /* The job's device budget; 0: the plan's peak (no limit). */
    uint64_t budget_bytes;
    /*
     * The memory policy (budget_bytes above overrides its budget when set).
     * NULL: everything resident on the device (swap off, vars on device),
     * ordered depth-first, as before the memory passes.
     */
    const struct tide_memory_policy *memory;
    uint64_t seed;
    bool poison;
    bool profile;
    /* Training: NULL runs the forward graph only. */
    const struct tide_train_options *train;
    /* Outputs ("node" or "node:k") readable after every step. The loss is always. */
    const char *const *fetches;
    uint32_t n_fetches;
    const struct tide_graph_limits *limits; /* NULL: defaults */
    /*
     * The job's math (graph.h): TIDE_MATH_TF32 lets every convolution and
     * matrix product that does not set its own "math" attribute, and the
     * gradients autodiff makes of them, run on a GPU's TF32 tensor cores.
     * The CPU backend computes float32 either way.
     */
    enum tide_math math;
    /*
     * Plan only: import, autodiff and the memory plan run as usual (a plan
     * that does not fit fails tide_session_new with TIDE_DOES_NOT_FIT; use
     * tide_session_plan to get its report), but no executor is created, so
     * no device arena is allocated and no Variable is initialised. Such a
     * session answers the graph, plan and report queries; feed, step, eval,
     * fetch, write_variable and set_step return TIDE_STATE.
     */
    bool plan_only;
    /*
     * Optional: polled between the pipeline's passes (autodiff, the backend
     * check, the memory plan, the executor); when it returns true, creation
     * stops there with TIDE_CANCELLED. Called on the creating thread with
     * cancel_context; it must be cheap and thread-safe (an atomic load).
     */
    bool (*cancelled)(void *cancel_context);
    void *cancel_context;
};

struct tide_session_options tide_session_options_default(void);

/* A session from serialized tide.v1.Graph bytes. */
enum tide_status tide_session_new(const void *graph_bytes, size_t len,
                                  const struct tide_session_options *options,
                                  struct tide_session **out, struct tide_error *err);
/* A session that takes ownership of an already-imported graph. */
enum tide_status tide_session_new_graph(struct tide_graph *graph,
                                        const struct tide_session_options *options,
                                        struct tide_session **out, struct tide_error *err);
void tide_session_free(struct tide_session *session);

/*
 * Plans a job without running it, and reports also when the plan does not
 * fit: the one entry point for dry runs and admission reports (the daemon's
 * Plan, tide-bench plan and depth). It runs what tide_session_new runs, as a
 * plan-only session (options->plan_only is taken as true), and returns
 * TIDE_OK when the plan fits or TIDE_DOES_NOT_FIT when it does not. In both
 * cases *out is the plan-only session, which the caller frees:
 * tide_session_plan_report gives the planner's report (fits, the smallest
 * budget that fits and the node that sets it) and tide_session_graph the
 * planned graph whose nodes it names; when it does not fit, err holds the
 * planner's full message and tide_session_memplan is NULL. Any other status
 * leaves *out NULL, with err saying why.
 */
enum tide_status tide_session_plan(const void *graph_bytes, size_t len,
                                   const struct tide_session_options *options,
                                   struct tide_session **out, struct tide_error *err);
/* tide_session_plan for an already-imported graph, whose ownership it takes (also on failure). */
enum tide_status tide_session_plan_graph(struct tide_graph *graph,
                                         const struct tide_session_options *options,
                                         struct tide_session **out, struct tide_error *err);

/*
 * Gives a plan-only session (options.plan_only) its executor, as
 * tide_session_new would have: allocates the device arena and initialises
 * the Variables, with the seed, poison, profile and budget of the options
 * the session was made with. The planning half (import, autodiff, the
 * memory plan) touches no device, so it can run on one thread and this half
 * on the thread that drives the device (the daemon's compile and device
 * threads). TIDE_STATE when the session already has an executor or its plan
 * did not fit; on any failure the session stays plan-only.
 */
enum tide_status tide_session_instantiate(struct tide_session *session, struct tide_error *err);
/* Stages a Placeholder's value for the next step, by name; the byte count must match. */
enum tide_status tide_session_feed(struct tide_session *session, const char *placeholder,
                                   const void *data, uint64_t bytes, struct tide_error *err);
enum tide_status tide_session_step(struct tide_session *session, struct tide_step_stats *stats,
                                   struct tide_error *err);
/*
 * Runs the forward part only — the nodes the fetches depend on — with the
 * current variables: no gradients, no updates, the step count unchanged.
 */
enum tide_status tide_session_eval(struct tide_session *session, struct tide_step_stats *stats,
                                   struct tide_error *err);
/* Copies a fetched output (or a Variable, by name) after a step. */
enum tide_status tide_session_fetch(struct tide_session *session, const char *name, void *dst,
                                    uint64_t bytes, struct tide_error *err);

/*
 * Copies bytes [offset, offset + bytes) of a Variable's current value, by
 * name, between steps: a page of a value too large to read in one piece
 * (the daemon's paged ReadVariables). TIDE_INVALID when the range passes
 * its end.
 */
enum tide_status tide_session_read_variable_range(struct tide_session *session, const char *name,
                                                  uint64_t offset, void *dst, uint64_t bytes,
                                                  struct tide_error *err);

/*
 * Overwrites a Variable's value by name (checkpoint restore), between steps;
 * the byte count must match. Optimizer state Variables too.
 */
enum tide_status tide_session_write_variable(struct tide_session *session, const char *name,
                                             const void *data, uint64_t bytes,
                                             struct tide_error *err);

/*
 * Overwrites bytes [offset, offset + bytes) of a Variable's value, by name,
 * between steps: a value that arrives in chunks (the daemon's
 * WriteVariables) goes straight to the Variable's home, never through a
 * copy of the whole. TIDE_INVALID when the range passes its end.
 */
enum tide_status tide_session_write_variable_range(struct tide_session *session, const char *name,
                                                   uint64_t offset, const void *data,
                                                   uint64_t bytes, struct tide_error *err);

/*
 * Sets the count of steps already run, after restoring a checkpoint taken at
 * that step, so that the next step is number steps + 1 and Adam's bias
 * correction continues instead of starting over. Call it between steps.
 */
enum tide_status tide_session_set_step(struct tide_session *session, uint64_t steps,
                                       struct tide_error *err);

/*
 * Step tracing (runtime/trace.h). tide_session_trace_start begins a new
 * recording, owned by the session (the previous one is emptied): every step
 * and evaluation from then on appends to it until tide_session_trace_stop.
 * Either may be called between any two steps. TIDE_UNSUPPORTED when the
 * backend cannot time its events, TIDE_STATE for a plan-only session.
 */
enum tide_status tide_session_trace_start(struct tide_session *session, struct tide_error *err);
/* Stops recording; the recording keeps what it has. A no-op when not tracing. */
void tide_session_trace_stop(struct tide_session *session);
/* The latest recording (valid until the next start or the session is freed), or NULL if none. */
const struct tide_trace *tide_session_trace(const struct tide_session *session);

/*
 * The planned graph, its memory plan and the autodiff result (owned by the
 * session). The memory plan is NULL for a session from tide_session_plan
 * whose plan does not fit.
 */
const struct tide_graph *tide_session_graph(const struct tide_session *session);
const struct tide_memplan *tide_session_memplan(const struct tide_session *session);
const struct tide_autodiff_result *tide_session_training(const struct tide_session *session);
/* The plan report (partitions, bytes moved, peak, fits); NULL without a memory policy. */
const struct tide_plan_report *tide_session_plan_report(const struct tide_session *session);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_SESSION_H */
