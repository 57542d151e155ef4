/* SPDX-License-Identifier: MIT */
/*
 * spec.h: a job's wire messages to its session and back.
 *
 * A Submit or Plan request carries a tide.v1.JobSpec; the worker turns it
 * into what runtime/session.h takes (the imported graph, training options, a
 * memory policy, the session options) and validates every field on the way,
 * with an error that names the field and the numbers. After the session is
 * planned, the job keeps the names, types and shapes of its feeds, fetches
 * and Variables, and the client gets a tide.v1.PlanReport built from the
 * planner's report. All of that translation is here, apart from the worker
 * thread (worker.c), so that it can be tested without a daemon.
 *
 * Threads: the functions keep no state; the worker thread calls them.
 *
 * Ownership: a struct tided_spec_setup and the session options made from it
 * borrow the JobSpec's strings, so the spec must outlive both. Feed and
 * fetch specs are freed with tided_tensor_specs_free, plan reports with
 * tided_plan_report_free (both declared in worker.h, defined in spec.c).
 *
 * Example usage:
 *
 *     struct tided_spec_setup setup;
 *     struct tide_graph *g = NULL;
 *     st = tided_spec_import(spec, &limits, &g, &err);
 *     if (st == TIDE_OK) st = tided_spec_setup(spec, budget, &setup, &err);
 *     if (st == TIDE_OK) st = tided_spec_check_feeds(spec, g, &feeds, &n_feeds, &err);
 *     struct tide_session_options o =
 *         tided_spec_session_options(spec, &setup, backend, budget, &limits);
 *     st = tide_session_new_graph(g, &o, &session, &err);
 */
#ifndef TIDE_DAEMON_SPEC_H
#define TIDE_DAEMON_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "daemon/worker.h"
#include "graph/autodiff.h"
#include "graph/import.h"
#include "runtime/session.h"
#include "swapper/swapper.h"
#include "tide/v1/tide.pb-c.h"

/* What a JobSpec becomes for tide_session_new_graph, besides the graph. */
struct tided_spec_setup {
    bool training;                    /* spec.train names a loss */
    struct tide_train_options train;  /* valid when training; borrows the spec's strings */
    struct tide_memory_policy policy; /* the defaults, overridden by spec.memory */
    enum tide_math math;              /* spec.math; fp32 when empty */
};

/*
 * Imports spec.graph under limits into *graph (the caller frees it):
 * TIDE_INVALID when the spec has no graph, otherwise the importer's status
 * and message, which name the node and the field.
 */
enum tide_status tided_spec_import(const Tide__V1__JobSpec *spec,
                                   const struct tide_graph_limits *limits,
                                   struct tide_graph **graph, struct tide_error *err);

/*
 * Validates spec.train and spec.memory and fills *out, the memory policy's
 * budget set to budget. TIDE_INVALID names the field and the value (an
 * optimizer's learning rate that is not a positive number, a momentum
 * outside [0, 1), no optimizer, an optimizer without a loss, an unknown
 * swap or vars_home mode, a math other than fp32 or tf32); TIDE_UNSUPPORTED
 * for a clip_norm other than 0.
 */
enum tide_status tided_spec_setup(const Tide__V1__JobSpec *spec, uint64_t budget,
                                  struct tided_spec_setup *out, struct tide_error *err);

/*
 * The session options for spec under setup: the daemon's backend
 * (borrowed), the job's budget and graph limits (borrowed), the spec's seed
 * and fetches (borrowed). Always with a memory policy: the daemon plans
 * every job under its budget.
 */
struct tide_session_options tided_spec_session_options(const Tide__V1__JobSpec *spec,
                                                       const struct tided_spec_setup *setup,
                                                       struct tide_backend *backend,
                                                       uint64_t budget,
                                                       const struct tide_graph_limits *limits);

/*
 * Checks spec.feeds against the graph's Placeholders: each names a
 * Placeholder, once, and every Placeholder is fed. *feeds gets one spec per
 * feed, in the spec's order, and *n_feeds their count; on failure they hold
 * the ones filled so far (free them with tided_tensor_specs_free either way).
 */
enum tide_status tided_spec_check_feeds(const Tide__V1__JobSpec *spec,
                                        const struct tide_graph *graph,
                                        struct tided_tensor_spec **feeds, uint32_t *n_feeds,
                                        struct tide_error *err);

/*
 * What Compile and Plan both check before the session (the worker's path,
 * and the fuzzer's, tests/fuzz/fuzz_rpc.c): the graph (tided_spec_import)
 * first, since a bad graph is the error a client most needs to hear about,
 * then spec.train and spec.memory (tided_spec_setup, into *setup), the feeds
 * (tided_spec_check_feeds), spec.streamed_variables (tided_spec_streamed)
 * and, when user_variables is not NULL, the names of the graph's Variables
 * (tided_spec_user_variables). Every refusal is
 * TIDE_INVALID unless out of memory or unsupported. *graph, *feeds and
 * *user_variables are the caller's to free, also on failure.
 */
enum tide_status tided_spec_prepare(const Tide__V1__JobSpec *spec,
                                    const struct tide_graph_limits *limits, uint64_t budget,
                                    struct tided_spec_setup *setup, struct tide_graph **graph,
                                    struct tided_tensor_spec **feeds, uint32_t *n_feeds,
                                    char ***user_variables, uint32_t *n_user_variables,
                                    struct tide_error *err);

/*
 * What spec.streamed_variables must not come with: resume_from, whose
 * checkpoint gives every value. TIDE_INVALID saying so; Submit checks it
 * before it looks for the checkpoint, tided_spec_streamed again.
 */
enum tide_status tided_spec_streamed_alone(const Tide__V1__JobSpec *spec, struct tide_error *err);

/*
 * Checks spec.streamed_variables against the graph as imported: each names
 * a float32 Variable, once, and resume_from is not set with them; a
 * refusal is TIDE_INVALID naming the entry. With streamed not NULL,
 * *streamed gets one spec per entry, in the spec's order, and *n_streamed
 * their count, as tided_spec_check_feeds does for feeds.
 */
enum tide_status tided_spec_streamed(const Tide__V1__JobSpec *spec, const struct tide_graph *graph,
                                     struct tided_tensor_spec **streamed, uint32_t *n_streamed,
                                     struct tide_error *err);

/*
 * The specs of spec.fetches ("node" or "node:k") in the planned graph, in
 * the spec's order; as tided_spec_check_feeds for *fetches and *n_fetches.
 * TIDE_INVALID names a fetch that is not an output of the graph.
 */
enum tide_status tided_spec_fetches(const Tide__V1__JobSpec *spec, const struct tide_graph *graph,
                                    struct tided_tensor_spec **fetches, uint32_t *n_fetches,
                                    struct tide_error *err);

/*
 * The names of the graph's Variables, in node order: call it on the graph
 * as imported, before autodiff adds optimizer state. *names (owned: each
 * string and the array) holds the ones copied so far also on failure.
 */
enum tide_status tided_spec_user_variables(const struct tide_graph *graph, char ***names,
                                           uint32_t *n_names, struct tide_error *err);

/*
 * The wire PlanReport of the planner's report, node names from graph (NULL:
 * none, for a report without a plan), and the memory timeline of plan, the
 * graph's memplan (NULL, for a plan that does not fit: no timeline). NULL
 * when out of memory; free with tided_plan_report_free.
 */
Tide__V1__PlanReport *tided_spec_plan_report(const struct tide_plan_report *report,
                                             const struct tide_graph *graph,
                                             const struct tide_memplan *plan);

#endif /* TIDE_DAEMON_SPEC_H */
