/* SPDX-License-Identifier: MIT */
/*
 * session.c: one job's in-process pipeline, from graph bytes to steps.
 *
 * A session strings together the stages the daemon runs for a job: import
 * (validation, shape inference), autodiff when training, then the memory
 * pipeline, and an executor on a backend. It then maps names to node ids for
 * feeds and fetches, and keeps the evaluation mask: the nodes the fetches
 * depend on.
 *
 * The memory pipeline has two forms:
 *  - With a memory policy (options->memory), tide_plan_memory
 *    (swapper/swapper.h) partitions the graph, homes Variables, Consts and
 *    optimizer state on the host or the device, inserts Fetch, WriteBack,
 *    SwapOut and SwapIn, annotates streams and homes and plans the arena
 *    under the policy's budget (options->budget_bytes overrides it when
 *    set), with the backend's workspace sizes and the fetches pinned. A plan
 *    that cannot fit fails creation with TIDE_DOES_NOT_FIT and the planner's
 *    message, which names the node and the numbers: that is admission
 *    control. The executor's arena is the policy's budget, or the plan's
 *    peak when the budget is 0 (no limit).
 *  - Without one, everything is resident on the device: the depth-first
 *    order, Placeholders on the h2d stream and everything else on compute,
 *    every tensor homed on the device, and memplan directly.
 *
 * A plan-only session (options->plan_only) stops after the memory pipeline:
 * it has no executor, so it holds no device arena, and everything that runs
 * or touches tensors refuses with TIDE_STATE. tide_session_plan makes one
 * and hands it out also when the plan does not fit, so that the caller reads
 * the refused plan's report from the one pipeline instead of running the
 * stages again for it. tide_session_instantiate later gives a plan-only
 * session whose plan fits its executor: the seam between the CPU-only
 * planning and the device, which the daemon runs on two threads. A caller's
 * cancellation hook (options->cancelled) is polled between the passes.
 *
 * What can be fetched: the fetches named at creation, the loss when
 * training, and every Variable. They are pinned in the memory plan (alive
 * across steps), so reading them after a step reads that step's values; a
 * Variable homed on the host is read from its home, which the step's
 * WriteBack has brought up to date.
 *
 * Threads: like the executor, a session is driven by one thread at a time.
 *
 * Ownership: the session owns its graph (also when tide_session_new_graph
 * fails: it frees the graph then), the plan, the executor, the autodiff
 * result, its trace recording, and the backend unless the caller passed one
 * in options.
 */
#include "runtime/session.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import.h"
#include "runtime/profile.h"

struct tide_session {
    struct tide_graph *graph;
    struct tide_backend *backend;
    bool owns_backend;
    struct tide_memplan plan;       /* without a memory policy */
    struct tide_memory_plan memory; /* with one: its memplan and report */
    bool has_memory_plan;
    const struct tide_memplan *memplan; /* the one the executor runs */
    struct tide_executor *executor;
    bool training;
    struct tide_autodiff_result trained; /* valid when training */
    struct tide_edge *fetches;           /* the named fetches, then the loss */
    uint32_t n_fetches;
    uint8_t *eval_mask; /* per node id: an ancestor of a fetch */
    bool plan_only;     /* no executor: see tide_session_options.plan_only */
    struct tide_executor_options executor_options; /* for tide_session_instantiate */
    struct tide_trace *trace; /* the latest recording, NULL before the first trace */
};

struct tide_session_options tide_session_options_default(void)
{
    return (struct tide_session_options){.backend_name = "cpu"};
}

/* ============================================================================
 * Creation
 * ========================================================================== */

static uint64_t backend_workspace(void *ctx, const struct tide_graph *graph,
                                  const struct tide_node *node)
{
    return tide_backend_workspace_bytes(ctx, graph, node);
}

/*
 * Marks the evaluation mask: the fetches and their ancestors along data and
 * control inputs, never an update node. Control inputs count because
 * besides autodiff's (on update nodes only, which no fetch depends on) they
 * are memplan's reuse edges: a producer that takes over a region must still
 * wait for the previous occupant's last reader, so that reader has to run.
 * Update nodes are left out even then: an evaluation must not train.
 */
static enum tide_status build_eval_mask(struct tide_session *s, struct tide_error *err)
{
    const struct tide_graph *g = s->graph;
    s->eval_mask = calloc((size_t)g->n_nodes + 1, 1);
    uint32_t *stack = malloc(((size_t)g->n_nodes + 1) * sizeof(*stack));
    if (!s->eval_mask || !stack) {
        free(stack);
        return tide_error_set(err, TIDE_NOMEM, "session: out of memory");
    }
    uint32_t depth = 0;
    for (uint32_t i = 0; i < s->n_fetches; i++) {
        uint32_t v = s->fetches[i].node;
        if (!s->eval_mask[v]) {
            s->eval_mask[v] = 1;
            stack[depth++] = v;
        }
    }
    while (depth) {
        const struct tide_node *node = &g->nodes[stack[--depth]];
        for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
            uint32_t u =
                i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
            if (s->eval_mask[u] || (tide_op_info(g->nodes[u].op)->flags & TIDE_OP_F_UPDATE))
                continue;
            s->eval_mask[u] = 1;
            stack[depth++] = u;
        }
    }
    free(stack);
    return TIDE_OK;
}

/*
 * Everything resident: the depth-first order, Placeholders on the h2d
 * stream and everything else on compute, every output homed on the device.
 */
static enum tide_status plan_resident(struct tide_session *s, const uint8_t *pinned,
                                      struct tide_error *err)
{
    struct tide_graph *g = s->graph;
    uint32_t n = g->n_nodes;
    uint32_t *order = malloc(((size_t)n + 1) * sizeof(*order));
    if (!order)
        return tide_error_set(err, TIDE_NOMEM, "session: out of memory for %u nodes", n);
    enum tide_status st = tide_graph_dfs_order(g, order, err);
    for (uint32_t v = 0; v < n; v++) {
        struct tide_node *node = &g->nodes[v];
        node->stream = node->op == TIDE_OP_PLACEHOLDER ? TIDE_STREAM_H2D : TIDE_STREAM_COMPUTE;
        for (uint32_t k = 0; k < node->n_outputs; k++)
            node->outputs[k].home = TIDE_HOME_DEVICE;
    }
    if (st == TIDE_OK) {
        struct tide_memplan_options mo = {
            .workspace_bytes = backend_workspace, .workspace_ctx = s->backend, .pinned = pinned};
        st = tide_memplan_build(g, order, n, &mo, &s->plan, err);
    }
    free(order);
    if (st == TIDE_OK)
        s->memplan = &s->plan;
    return st;
}

/*
 * The memory pipeline under the caller's policy, with budget (0: no limit)
 * in place of the policy's. The planner's refusal (TIDE_DOES_NOT_FIT, with
 * the node and the numbers) is the session's.
 */
static enum tide_status plan_with_policy(struct tide_session *s,
                                         const struct tide_session_options *o, uint64_t budget,
                                         const uint8_t *pinned, struct tide_error *err)
{
    struct tide_memory_policy policy = *o->memory;
    policy.budget_bytes = budget;
    policy.cancelled = o->cancelled;
    policy.cancel_context = o->cancel_context;
    /* Without a profile, the plan is for this backend's device (measured once per process). */
    struct tide_device_profile local;
    if (!policy.profile) {
        enum tide_status st = tide_device_profile_local(s->backend, &local, err);
        if (st != TIDE_OK)
            return st;
        policy.profile = &local;
    }
    struct tide_plan_env env = {
        .workspace_bytes = backend_workspace, .workspace_ctx = s->backend, .pinned = pinned};
    enum tide_status st = tide_plan_memory(s->graph, &policy, &env, &s->memory, err);
    /* Released with the session, also when refused (a refused plan still has its report). */
    s->has_memory_plan = true;
    if (st == TIDE_OK)
        s->memplan = &s->memory.memplan;
    return st;
}

/* TIDE_CANCELLED when the caller's cancellation hook says so. */
static enum tide_status check_cancelled(const struct tide_session_options *o, const char *before,
                                        struct tide_error *err)
{
    if (o->cancelled && o->cancelled(o->cancel_context))
        return tide_error_set(err, TIDE_CANCELLED, "session: cancelled before %s", before);
    return TIDE_OK;
}

/* The executor over the session's plan; then the evaluation mask. */
static enum tide_status instantiate(struct tide_session *s, struct tide_error *err)
{
    enum tide_status st =
        tide_executor_new(s->graph, s->memplan, s->backend, &s->executor_options, &s->executor, err);
    if (st != TIDE_OK)
        return st;
    st = build_eval_mask(s, err);
    if (st != TIDE_OK) {
        tide_executor_free(s->executor);
        s->executor = NULL;
        free(s->eval_mask);
        s->eval_mask = NULL;
        return st;
    }
    s->plan_only = false;
    return TIDE_OK;
}

static enum tide_status setup(struct tide_session *s, const struct tide_session_options *o,
                              struct tide_error *err)
{
    struct tide_graph *g = s->graph;
    enum tide_status st = check_cancelled(o, "autodiff", err);
    if (st != TIDE_OK)
        return st;

    if (o->train) {
        st = tide_autodiff(g, o->train, &s->trained, err);
        if (st != TIDE_OK)
            return st;
        s->training = true;
    }
    if (o->math != TIDE_MATH_FP32 && tide_graph_set_math(g, o->math) != TIDE_OK)
        return tide_error_set(err, TIDE_NOMEM, "session: out of memory");

    /* Fetches: the named ones, then the loss. */
    s->fetches = calloc((size_t)o->n_fetches + 1, sizeof(*s->fetches));
    if (!s->fetches)
        return tide_error_set(err, TIDE_NOMEM, "session: out of memory");
    if (o->n_fetches && !o->fetches)
        return tide_error_set(err, TIDE_INVALID, "session: n_fetches is %u but fetches is NULL",
                              o->n_fetches);
    for (uint32_t i = 0; i < o->n_fetches; i++) {
        st = tide_graph_resolve_ref(g, o->fetches[i], "fetch", &s->fetches[s->n_fetches++], err);
        if (st != TIDE_OK)
            return st;
    }
    if (s->training)
        s->fetches[s->n_fetches++] = s->trained.loss;

    /* The fetches are pinned: alive across steps, so they can be read after one. */
    uint32_t n = g->n_nodes;
    uint8_t *pinned = calloc((size_t)n + 1, 1);
    if (!pinned)
        return tide_error_set(err, TIDE_NOMEM, "session: out of memory for %u nodes", n);
    for (uint32_t i = 0; i < s->n_fetches; i++)
        pinned[s->fetches[i].node] = 1;

    /* The backend, whose kernels say how much workspace each node needs. */
    uint64_t budget = o->budget_bytes;
    if (!budget && o->memory)
        budget = o->memory->budget_bytes;
    st = TIDE_OK;
    if (o->backend) {
        s->backend = o->backend;
    } else {
        struct tide_backend_options bo = {.device_bytes = budget, .threads = o->threads};
        st = tide_backend_create(o->backend_name ? o->backend_name : "cpu", &bo, &s->backend, err);
        s->owns_backend = st == TIDE_OK;
    }
    s->plan_only = o->plan_only;
    /* An op the backend lacks is refused at compile, before any planning. */
    if (st == TIDE_OK)
        st = check_cancelled(o, "the backend check", err);
    if (st == TIDE_OK)
        st = tide_backend_check_graph(s->backend, g, err);
    if (st == TIDE_OK)
        st = check_cancelled(o, "the memory plan", err);
    if (st == TIDE_OK && o->memory)
        st = plan_with_policy(s, o, budget, pinned, err);
    else if (st == TIDE_OK)
        st = plan_resident(s, pinned, err);
    free(pinned);
    if (st != TIDE_OK)
        return st;
    s->executor_options = (struct tide_executor_options){
        .budget_bytes = budget ? budget : s->memplan->peak_bytes,
        .seed = o->seed,
        .poison = o->poison,
        .profile = o->profile,
    };
    if (s->plan_only)
        return TIDE_OK;
    st = check_cancelled(o, "the executor", err);
    return st == TIDE_OK ? instantiate(s, err) : st;
}

/*
 * Creates a session on graph (taken, also on failure). keep_refused: hand
 * the session out also when its plan does not fit (tide_session_plan).
 */
static enum tide_status create(struct tide_graph *graph, const struct tide_session_options *options,
                               bool keep_refused, struct tide_session **out,
                               struct tide_error *err)
{
    *out = NULL;
    if (!graph)
        return tide_error_set(err, TIDE_INVALID, "session: the graph is NULL");
    struct tide_session *s = calloc(1, sizeof(*s));
    if (!s) {
        tide_graph_free(graph);
        return tide_error_set(err, TIDE_NOMEM, "session: out of memory");
    }
    s->graph = graph;
    struct tide_session_options o = options ? *options : tide_session_options_default();
    if (keep_refused)
        o.plan_only = true;
    enum tide_status st = setup(s, &o, err);
    if (st != TIDE_OK && !(keep_refused && st == TIDE_DOES_NOT_FIT)) {
        tide_session_free(s);
        return st;
    }
    *out = s;
    return st;
}

/* Imports serialized tide.v1.Graph bytes, then creates as create() does. */
static enum tide_status import_and_create(const void *graph_bytes, size_t len,
                                          const struct tide_session_options *options,
                                          bool plan, struct tide_session **out,
                                          struct tide_error *err)
{
    *out = NULL;
    struct tide_graph *graph = NULL;
    enum tide_status st =
        tide_graph_import(graph_bytes, len, options ? options->limits : NULL, &graph, err);
    if (st != TIDE_OK)
        return st;
    return create(graph, options, plan, out, err);
}

enum tide_status tide_session_new_graph(struct tide_graph *graph,
                                        const struct tide_session_options *options,
                                        struct tide_session **out, struct tide_error *err)
{
    return create(graph, options, false, out, err);
}

enum tide_status tide_session_new(const void *graph_bytes, size_t len,
                                  const struct tide_session_options *options,
                                  struct tide_session **out, struct tide_error *err)
{
    return import_and_create(graph_bytes, len, options, false, out, err);
}

enum tide_status tide_session_plan_graph(struct tide_graph *graph,
                                         const struct tide_session_options *options,
                                         struct tide_session **out, struct tide_error *err)
{
    return create(graph, options, true, out, err);
}

enum tide_status tide_session_plan(const void *graph_bytes, size_t len,
                                   const struct tide_session_options *options,
                                   struct tide_session **out, struct tide_error *err)
{
    return import_and_create(graph_bytes, len, options, true, out, err);
}

enum tide_status tide_session_instantiate(struct tide_session *session, struct tide_error *err)
{
    if (!session)
        return tide_error_set(err, TIDE_INVALID, "session: NULL");
    if (!session->plan_only || !session->memplan)
        return tide_error_set(err, TIDE_STATE, "session: %s",
                              session->plan_only ? "its plan does not fit; nothing to instantiate"
                                                 : "it already has an executor");
    return instantiate(session, err);
}

void tide_session_free(struct tide_session *session)
{
    if (!session)
        return;
    tide_executor_free(session->executor);
    tide_trace_free(session->trace); /* after the executor that records into it */
    tide_memplan_release(&session->plan);
    if (session->has_memory_plan)
        tide_memory_plan_release(&session->memory);
    if (session->owns_backend)
        tide_backend_free(session->backend);
    if (session->training)
        tide_autodiff_result_release(&session->trained);
    tide_graph_free(session->graph);
    free(session->fetches);
    free(session->eval_mask);
    free(session);
}

/* ============================================================================
 * Steps, feeds and fetches
 * ========================================================================== */

/* TIDE_STATE for a call that needs the executor when the session is plan-only. */
static enum tide_status check_runnable(const struct tide_session *session, const char *what,
                                       struct tide_error *err)
{
    if (!session->plan_only)
        return TIDE_OK;
    return tide_error_set(err, TIDE_STATE,
                          "%s: the session was created plan-only, so it has no executor", what);
}

enum tide_status tide_session_feed(struct tide_session *session, const char *placeholder,
                                   const void *data, uint64_t bytes, struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "feed", err);
    if (st != TIDE_OK)
        return st;
    if (!placeholder)
        return tide_error_set(err, TIDE_INVALID, "feed: the placeholder's name is NULL");
    uint32_t id = tide_graph_find(session->graph, placeholder);
    if (id == TIDE_NO_NODE)
        return tide_error_set(err, TIDE_NOT_FOUND, "feed: no placeholder is called \"%s\"",
                              placeholder);
    return tide_executor_feed(session->executor, id, data, bytes, err);
}

enum tide_status tide_session_step(struct tide_session *session, struct tide_step_stats *stats,
                                   struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "step", err);
    return st != TIDE_OK ? st : tide_executor_step(session->executor, stats, err);
}

enum tide_status tide_session_eval(struct tide_session *session, struct tide_step_stats *stats,
                                   struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "eval", err);
    return st != TIDE_OK ? st
                         : tide_executor_step_masked(session->executor, session->eval_mask, stats,
                                                     err);
}

enum tide_status tide_session_fetch(struct tide_session *session, const char *name, void *dst,
                                    uint64_t bytes, struct tide_error *err)
{
    struct tide_edge edge;
    enum tide_status st = check_runnable(session, "fetch", err);
    if (st == TIDE_OK)
        st = tide_graph_resolve_ref(session->graph, name, "fetch", &edge, err);
    if (st != TIDE_OK)
        return st;
    bool fetchable = session->graph->nodes[edge.node].op == TIDE_OP_VARIABLE;
    /* Every output of a fetched node is pinned, so any of them can be read. */
    for (uint32_t i = 0; i < session->n_fetches && !fetchable; i++)
        fetchable = session->fetches[i].node == edge.node;
    if (!fetchable)
        return tide_error_set(err, TIDE_NOT_FOUND,
                              "fetch \"%s\": not among the session's fetches (nor the loss, nor "
                              "a Variable); name it in the options' fetches",
                              name);
    return tide_executor_read(session->executor, edge, dst, bytes, err);
}

enum tide_status tide_session_read_variable_range(struct tide_session *session, const char *name,
                                                  uint64_t offset, void *dst, uint64_t bytes,
                                                  struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "read variable", err);
    if (st != TIDE_OK)
        return st;
    uint32_t id = tide_graph_find(session->graph, name);
    if (id == TIDE_NO_NODE || session->graph->nodes[id].op != TIDE_OP_VARIABLE)
        return tide_error_set(err, TIDE_NOT_FOUND, "read variable \"%s\": %s", name,
                              id == TIDE_NO_NODE ? "no such node" : "not a Variable");
    return tide_executor_read_range(session->executor, (struct tide_edge){id, 0}, offset, dst,
                                    bytes, err);
}

enum tide_status tide_session_write_variable(struct tide_session *session, const char *name,
                                             const void *data, uint64_t bytes,
                                             struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "write variable", err);
    if (st != TIDE_OK)
        return st;
    uint32_t id = tide_graph_find(session->graph, name);
    if (id == TIDE_NO_NODE || session->graph->nodes[id].op != TIDE_OP_VARIABLE)
        return tide_error_set(err, TIDE_NOT_FOUND, "write variable \"%s\": %s", name,
                              id == TIDE_NO_NODE ? "no such node" : "not a Variable");
    return tide_executor_write_variable(session->executor, id, data, bytes, err);
}

enum tide_status tide_session_write_variable_range(struct tide_session *session, const char *name,
                                                   uint64_t offset, const void *data,
                                                   uint64_t bytes, struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "write variable", err);
    if (st != TIDE_OK)
        return st;
    uint32_t id = tide_graph_find(session->graph, name);
    if (id == TIDE_NO_NODE || session->graph->nodes[id].op != TIDE_OP_VARIABLE)
        return tide_error_set(err, TIDE_NOT_FOUND, "write variable \"%s\": %s", name,
                              id == TIDE_NO_NODE ? "no such node" : "not a Variable");
    return tide_executor_write_variable_range(session->executor, id, offset, data, bytes, err);
}

enum tide_status tide_session_set_step(struct tide_session *session, uint64_t steps,
                                       struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "set step", err);
    return st != TIDE_OK ? st : tide_executor_set_step(session->executor, steps, err);
}

enum tide_status tide_session_trace_start(struct tide_session *session, struct tide_error *err)
{
    enum tide_status st = check_runnable(session, "trace", err);
    if (st != TIDE_OK)
        return st;
    if (session->trace) {
        tide_executor_trace_stop(session->executor);
        tide_trace_clear(session->trace);
    } else {
        st = tide_trace_new(session->graph, &session->trace, err);
        if (st != TIDE_OK)
            return st;
    }
    return tide_executor_trace_start(session->executor, session->trace, err);
}

void tide_session_trace_stop(struct tide_session *session)
{
    if (session->executor)
        tide_executor_trace_stop(session->executor);
}

const struct tide_trace *tide_session_trace(const struct tide_session *session)
{
    return session->trace;
}

const struct tide_graph *tide_session_graph(const struct tide_session *session)
{
    return session->graph;
}

const struct tide_memplan *tide_session_memplan(const struct tide_session *session)
{
    return session->memplan;
}

const struct tide_autodiff_result *tide_session_training(const struct tide_session *session)
{
    return session->training ? &session->trained : NULL;
}

const struct tide_plan_report *tide_session_plan_report(const struct tide_session *session)
{
    return session->has_memory_plan ? &session->memory.report : NULL;
}
