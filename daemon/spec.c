/* SPDX-License-Identifier: MIT */
/*
 * spec.c: a job's wire messages to its session and back (see spec.h).
 *
 * The JobSpec's own fields (train, memory, feeds) are checked here, each
 * error naming the field and the value, before the session runs the
 * pipeline on what this file produced (runtime/session.c); the graph is
 * checked by the importer, the fetches by the session.
 *
 * tided_tensor_specs_free and tided_plan_report_free are declared in
 * worker.h, which the job manager includes; they are defined here, next to
 * the code that allocates what they free.
 */
#include "daemon/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "runtime/profile.h"

/* ============================================================================
 * Names, tensor specs and reports
 * ========================================================================== */

void tided_tensor_specs_free(struct tided_tensor_spec *specs, uint32_t n)
{
    if (!specs)
        return;
    for (uint32_t i = 0; i < n; i++)
        free(specs[i].name);
    free(specs);
}

static void timeline_message_free(Tide__V1__MemoryTimeline *m)
{
    if (!m)
        return;
    free(m->point_first);
    free(m->point_last);
    free(m->point_position);
    free(m->variables_bytes);
    free(m->activations_bytes);
    free(m->swapped_in_bytes);
    free(m->workspace_bytes);
    free(m->partition_first);
    free(m->partition_last);
    free(m->partition_arena_top_bytes);
    free(m->swap_out_positions);
    free(m->swap_in_positions);
    free(m);
}

void tided_plan_report_free(Tide__V1__PlanReport *report)
{
    if (!report)
        return;
    timeline_message_free(report->timeline);
    for (size_t i = 0; i < report->n_partitions; i++) {
        if (report->partitions[i]->peak_node != protobuf_c_empty_string)
            free(report->partitions[i]->peak_node);
        free(report->partitions[i]);
    }
    free(report->partitions);
    if (report->min_budget_node != protobuf_c_empty_string)
        free(report->min_budget_node);
    if (report->floor_node != protobuf_c_empty_string)
        free(report->floor_node);
    if (report->device_profile != protobuf_c_empty_string)
        free(report->device_profile);
    if (report->message != protobuf_c_empty_string)
        free(report->message);
    free(report);
}

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

/* Resolves a fetch (graph.h's rule); an unknown one is an invalid field of the spec. */
static enum tide_status resolve_output(const struct tide_graph *g, const char *name,
                                       const char *what, struct tide_edge *edge,
                                       struct tide_error *err)
{
    enum tide_status st = tide_graph_resolve_ref(g, name, what, edge, err);
    if (st == TIDE_NOT_FOUND && err)
        err->status = TIDE_INVALID;
    return st == TIDE_NOT_FOUND ? TIDE_INVALID : st;
}

static enum tide_status spec_from_output(const struct tide_graph *g, const char *name,
                                         struct tide_edge e, struct tided_tensor_spec *out,
                                         struct tide_error *err)
{
    const struct tide_output *o = &g->nodes[e.node].outputs[e.output];
    out->name = strdup(name);
    out->dtype = o->dtype;
    out->shape = o->shape;
    out->nbytes = o->nbytes;
    return out->name ? TIDE_OK : tide_error_set(err, TIDE_NOMEM, "out of memory");
}

/* The wire MemoryTimeline of a timeline (tide/timeline.h); NULL when out of memory. */
static Tide__V1__MemoryTimeline *timeline_message(const struct tide_memory_timeline *t)
{
    Tide__V1__MemoryTimeline *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    tide__v1__memory_timeline__init(m);
    size_t points = t->n_points, parts = t->n_partitions;
    m->point_first = calloc(points + 1, sizeof(*m->point_first));
    m->point_last = calloc(points + 1, sizeof(*m->point_last));
    m->point_position = calloc(points + 1, sizeof(*m->point_position));
    m->variables_bytes = calloc(points + 1, sizeof(*m->variables_bytes));
    m->activations_bytes = calloc(points + 1, sizeof(*m->activations_bytes));
    m->swapped_in_bytes = calloc(points + 1, sizeof(*m->swapped_in_bytes));
    m->workspace_bytes = calloc(points + 1, sizeof(*m->workspace_bytes));
    m->partition_first = calloc(parts + 1, sizeof(*m->partition_first));
    m->partition_last = calloc(parts + 1, sizeof(*m->partition_last));
    m->partition_arena_top_bytes = calloc(parts + 1, sizeof(*m->partition_arena_top_bytes));
    m->swap_out_positions = calloc(t->n_swap_outs + 1, sizeof(*m->swap_out_positions));
    m->swap_in_positions = calloc(t->n_swap_ins + 1, sizeof(*m->swap_in_positions));
    if (!m->point_first || !m->point_last || !m->point_position || !m->variables_bytes ||
        !m->activations_bytes || !m->swapped_in_bytes || !m->workspace_bytes ||
        !m->partition_first || !m->partition_last || !m->partition_arena_top_bytes ||
        !m->swap_out_positions || !m->swap_in_positions) {
        timeline_message_free(m);
        return NULL;
    }
    m->positions = t->n_positions;
    m->budget_bytes = t->budget_bytes;
    m->predicted_peak_bytes = t->predicted_peak_bytes;
    m->live_peak_bytes = t->live_peak_bytes;
    m->n_point_first = m->n_point_last = m->n_point_position = points;
    m->n_variables_bytes = m->n_activations_bytes = points;
    m->n_swapped_in_bytes = m->n_workspace_bytes = points;
    for (size_t i = 0; i < points; i++) {
        const struct tide_memory_timeline_point *pt = &t->points[i];
        m->point_first[i] = pt->first;
        m->point_last[i] = pt->last;
        m->point_position[i] = pt->position;
        m->variables_bytes[i] = pt->bytes[TIDE_MEMORY_VARIABLES];
        m->activations_bytes[i] = pt->bytes[TIDE_MEMORY_ACTIVATIONS];
        m->swapped_in_bytes[i] = pt->bytes[TIDE_MEMORY_SWAPPED_IN];
        m->workspace_bytes[i] = pt->bytes[TIDE_MEMORY_WORKSPACE];
    }
    m->n_partition_first = m->n_partition_last = m->n_partition_arena_top_bytes = parts;
    for (size_t i = 0; i < parts; i++) {
        m->partition_first[i] = t->partitions[i].first;
        m->partition_last[i] = t->partitions[i].last;
        m->partition_arena_top_bytes[i] = t->partitions[i].arena_top_bytes;
    }
    m->n_swap_out_positions = t->n_swap_outs;
    if (t->n_swap_outs)
        memcpy(m->swap_out_positions, t->swap_outs, t->n_swap_outs * sizeof(*t->swap_outs));
    m->n_swap_in_positions = t->n_swap_ins;
    if (t->n_swap_ins)
        memcpy(m->swap_in_positions, t->swap_ins, t->n_swap_ins * sizeof(*t->swap_ins));
    return m;
}

static const char *node_name(const struct tide_graph *g, uint32_t id)
{
    return g && id < g->n_nodes ? g->nodes[id].name : "";
}

Tide__V1__PlanReport *tided_spec_plan_report(const struct tide_plan_report *r,
                                             const struct tide_graph *g,
                                             const struct tide_memplan *plan)
{
    Tide__V1__PlanReport *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    tide__v1__plan_report__init(p);
    p->partitions = calloc(r->n_partitions ? r->n_partitions : 1, sizeof(*p->partitions));
    if (!p->partitions) {
        free(p);
        return NULL;
    }
    for (uint32_t i = 0; i < r->n_partitions; i++) {
        Tide__V1__PartitionReport *q = calloc(1, sizeof(*q));
        if (!q)
            break;
        tide__v1__partition_report__init(q);
        const struct tide_partition_report *src = &r->partitions[i];
        q->index = i;
        q->nodes = src->nodes;
        q->resident_bytes = src->resident_bytes;
        q->swap_in_bytes = src->swap_in_bytes;
        q->swap_out_bytes = src->swap_out_bytes;
        q->fetch_bytes = src->fetch_bytes;
        q->write_back_bytes = src->write_back_bytes;
        q->peak_node = xstrdup(node_name(g, src->peak_node));
        p->partitions[p->n_partitions++] = q;
    }
    p->nodes = r->nodes;
    p->budget_bytes = r->budget_bytes;
    p->predicted_peak_bytes = r->predicted_peak_bytes;
    p->fits = r->fits;
    p->min_budget_bytes = r->min_budget_bytes;
    p->min_budget_node = xstrdup(r->fits ? "" : node_name(g, r->min_budget_node));
    p->floor_bytes = r->floor_bytes;
    p->floor_node = xstrdup(node_name(g, r->floor_node));
    p->predicted_step_ms = r->predicted_step_ms;
    p->predicted_stall_ms = r->predicted_stall_ms;
    p->device_profile = xstrdup(r->profile);
    p->host_budget_bytes = r->host_budget_bytes;
    p->recompute_bytes = r->recompute_bytes;
    p->recompute_ms = r->recompute_ms;
    for (uint32_t v = 0; g && v < g->n_nodes; v++) {
        if (tide_op_math_attr(g->nodes[v].op) < 0)
            continue;
        p->products++;
        p->tf32_products += tide_node_math(&g->nodes[v]) == TIDE_MATH_TF32;
    }
    p->swap_in_bytes = r->swap_in_bytes;
    p->swap_out_bytes = r->swap_out_bytes;
    p->fetch_bytes = r->fetch_bytes;
    p->write_back_bytes = r->write_back_bytes;
    p->partition_size = r->chosen.partition_size;
    p->swap_threshold = r->chosen.swap_threshold;
    p->prefetch_distance = r->chosen.prefetch_distance;
    p->host_bytes = r->host_arena_bytes; /* what the job allocates: staging included */
    p->plan_us = (uint64_t)(r->plan_ms * 1000.0);
    p->message = xstrdup(r->message);
    if (g && plan) {
        struct tide_memory_timeline t;
        struct tide_error err = {0};
        if (tide_memory_timeline_build(g, plan, r->budget_bytes, 0, &t, &err) == TIDE_OK)
            p->timeline = timeline_message(&t);
        else
            TIDE_LOG_ERROR("plan report: %s", err.message); /* the session's own plan: a bug */
        tide_memory_timeline_clear(&t);
        if (!p->timeline) {
            tided_plan_report_free(p);
            return NULL;
        }
    }
    return p;
}

/* ============================================================================
 * JobSpec to session options
 * ========================================================================== */

enum tide_status tided_spec_import(const Tide__V1__JobSpec *spec,
                                   const struct tide_graph_limits *limits,
                                   struct tide_graph **graph, struct tide_error *err)
{
    *graph = NULL;
    if (!spec->graph)
        return tide_error_set(err, TIDE_INVALID, "spec.graph: missing");
    if (spec->graph->n_nodes == 0)
        return tide_error_set(err, TIDE_INVALID,
                              "spec.graph: has no nodes; a job needs a graph to run");
    return tide_graph_import_message(spec->graph, limits, graph, err);
}

static enum tide_status check_rate(float lr, const char *field, struct tide_error *err)
{
    if (!(isfinite(lr) && lr > 0.0f))
        return tide_error_set(err, TIDE_INVALID, "%s must be a positive number, got %g", field,
                              (double)lr);
    return TIDE_OK;
}

enum tide_status tided_spec_setup(const Tide__V1__JobSpec *spec, uint64_t budget,
                                  struct tided_spec_setup *s, struct tide_error *err)
{
    memset(s, 0, sizeof(*s));
    const Tide__V1__TrainSpec *t = spec->train;
    if (t && t->loss && t->loss[0]) {
        s->training = true;
        s->train.loss = t->loss;
        s->train.variables = (const char *const *)t->variables;
        s->train.n_variables = (uint32_t)t->n_variables;
        enum tide_status st = TIDE_OK;
        switch (t->optimizer_case) {
        case TIDE__V1__TRAIN_SPEC__OPTIMIZER_SGD:
            s->train.optimizer = TIDE_OPTIMIZER_SGD;
            s->train.learning_rate = t->sgd->learning_rate;
            st = check_rate(t->sgd->learning_rate, "train.sgd.learning_rate", err);
            break;
        case TIDE__V1__TRAIN_SPEC__OPTIMIZER_MOMENTUM:
            s->train.optimizer = TIDE_OPTIMIZER_MOMENTUM;
            s->train.learning_rate = t->momentum->learning_rate;
            s->train.momentum = t->momentum->momentum;
            s->train.nesterov = t->momentum->nesterov;
            st = check_rate(t->momentum->learning_rate, "train.momentum.learning_rate", err);
            if (st == TIDE_OK && !(t->momentum->momentum >= 0.0f && t->momentum->momentum < 1.0f))
                st = tide_error_set(err, TIDE_INVALID,
                                    "train.momentum.momentum must be in [0, 1), got %g",
                                    (double)t->momentum->momentum);
            break;
        case TIDE__V1__TRAIN_SPEC__OPTIMIZER_ADAM:
            s->train.optimizer = TIDE_OPTIMIZER_ADAM;
            s->train.learning_rate = t->adam->learning_rate;
            s->train.beta1 = t->adam->beta1;
            s->train.beta2 = t->adam->beta2;
            s->train.epsilon = t->adam->epsilon;
            st = check_rate(t->adam->learning_rate, "train.adam.learning_rate", err);
            break;
        default:
            st = tide_error_set(err, TIDE_INVALID,
                                "train.optimizer: none is set; set one of sgd, momentum or adam");
            break;
        }
        if (st != TIDE_OK)
            return st;
        if (t->clip_norm != 0.0f)
            return tide_error_set(err, TIDE_UNSUPPORTED,
                                  "train.clip_norm (%g): gradient clipping is not supported yet; "
                                  "leave it 0",
                                  (double)t->clip_norm);
    } else if (t && t->optimizer_case != TIDE__V1__TRAIN_SPEC__OPTIMIZER__NOT_SET) {
        return tide_error_set(err, TIDE_INVALID,
                              "train.loss: empty, but an optimizer is set; name the node to "
                              "minimise");
    }

    s->policy = tide_memory_policy_default();
    s->policy.budget_bytes = budget;
    const Tide__V1__MemoryPolicy *m = spec->memory;
    if (m) {
        if ((unsigned)m->swap > 2)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory.swap: unknown mode %d (want SWAP_AUTO, SWAP_ON or "
                                  "SWAP_OFF)",
                                  (int)m->swap);
        if ((unsigned)m->vars_home > 2)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory.vars_home: unknown value %d (want VARS_HOME_AUTO, "
                                  "VARS_HOME_HOST or VARS_HOME_DEVICE)",
                                  (int)m->vars_home);
        if ((unsigned)m->recompute > 3)
            return tide_error_set(err, TIDE_INVALID,
                                  "memory.recompute: unknown mode %d (want RECOMPUTE_DEVICE, "
                                  "RECOMPUTE_AUTO, RECOMPUTE_CHECKPOINT_SQRT or RECOMPUTE_OFF)",
                                  (int)m->recompute);
        s->policy.recompute = (enum tide_recompute_mode)m->recompute;
        if (m->partition_size)
            s->policy.partition_size = m->partition_size;
        s->policy.swap = (enum tide_swap_mode)m->swap;
        if (m->swap_threshold)
            s->policy.swap_threshold = m->swap_threshold;
        if (m->prefetch_distance)
            s->policy.prefetch_distance = m->prefetch_distance;
        s->policy.vars_home = (enum tide_vars_home)m->vars_home;
        s->policy.autotune = m->autotune;
    }
    s->math = TIDE_MATH_FP32;
    if (spec->math && spec->math[0] && tide_math_parse(spec->math, &s->math, err) != TIDE_OK)
        return TIDE_INVALID; /* 'math "bf16": wants fp32 or tf32' */
    enum tide_status st = tide_device_profile_find(spec->device_profile, &s->policy.profile, err);
    if (st != TIDE_OK)
        tide_error_prefix(err, "device_profile");
    return st;
}

struct tide_session_options tided_spec_session_options(const Tide__V1__JobSpec *spec,
                                                       const struct tided_spec_setup *setup,
                                                       struct tide_backend *backend,
                                                       uint64_t budget,
                                                       const struct tide_graph_limits *limits)
{
    struct tide_session_options o = tide_session_options_default();
    o.backend = backend;
    o.budget_bytes = budget;
    o.memory = &setup->policy;
    o.seed = spec->seed;
    o.math = setup->math;
    o.train = setup->training ? &setup->train : NULL;
    o.fetches = (const char *const *)spec->fetches;
    o.n_fetches = (uint32_t)spec->n_fetches;
    o.limits = limits;
    return o;
}

/* ============================================================================
 * Feeds, fetches and Variables
 * ========================================================================== */

enum tide_status tided_spec_check_feeds(const Tide__V1__JobSpec *spec, const struct tide_graph *g,
                                        struct tided_tensor_spec **feeds, uint32_t *n_feeds,
                                        struct tide_error *err)
{
    *n_feeds = 0;
    *feeds = calloc(spec->n_feeds ? spec->n_feeds : 1, sizeof(**feeds));
    if (!*feeds)
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    for (size_t i = 0; i < spec->n_feeds; i++) {
        const char *name = spec->feeds[i];
        uint32_t id = tide_graph_find(g, name);
        if (id == TIDE_NO_NODE)
            return tide_error_set(err, TIDE_INVALID, "feeds[%zu] \"%s\": no node is called that",
                                  i, name);
        if (g->nodes[id].op != TIDE_OP_PLACEHOLDER)
            return tide_error_set(err, TIDE_INVALID,
                                  "feeds[%zu] \"%s\": node \"%s\" is a %s, not a Placeholder", i,
                                  name, name, tide_op_info(g->nodes[id].op)->name);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(spec->feeds[j], name) == 0)
                return tide_error_set(err, TIDE_INVALID, "feeds[%zu] \"%s\": listed twice", i,
                                      name);
        }
        enum tide_status st = spec_from_output(g, name, (struct tide_edge){id, 0},
                                               &(*feeds)[*n_feeds], err);
        if (st != TIDE_OK)
            return st;
        (*n_feeds)++;
    }
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op != TIDE_OP_PLACEHOLDER)
            continue;
        bool fed = false;
        for (size_t i = 0; i < spec->n_feeds && !fed; i++)
            fed = strcmp(spec->feeds[i], g->nodes[v].name) == 0;
        if (!fed)
            return tide_node_error(err, TIDE_INVALID, &g->nodes[v],
                                   "is not fed: list it in spec.feeds");
    }
    return TIDE_OK;
}

enum tide_status tided_spec_streamed_alone(const Tide__V1__JobSpec *spec, struct tide_error *err)
{
    if (spec->n_streamed_variables && spec->resume_from && spec->resume_from[0])
        return tide_error_set(err, TIDE_INVALID,
                              "streamed_variables and resume_from: the checkpoint of resume_from "
                              "gives every Variable's value; stream none with it");
    return TIDE_OK;
}

enum tide_status tided_spec_streamed(const Tide__V1__JobSpec *spec, const struct tide_graph *g,
                                     struct tided_tensor_spec **streamed, uint32_t *n_streamed,
                                     struct tide_error *err)
{
    if (streamed) {
        *n_streamed = 0;
        *streamed =
            calloc(spec->n_streamed_variables ? spec->n_streamed_variables : 1, sizeof(**streamed));
        if (!*streamed)
            return tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    enum tide_status st = tided_spec_streamed_alone(spec, err);
    if (st != TIDE_OK)
        return st;
    for (size_t i = 0; i < spec->n_streamed_variables; i++) {
        const char *name = spec->streamed_variables[i];
        uint32_t id = tide_graph_find(g, name);
        if (id == TIDE_NO_NODE)
            return tide_error_set(err, TIDE_INVALID,
                                  "streamed_variables[%zu] \"%s\": no node is called that", i,
                                  name);
        const struct tide_node *node = &g->nodes[id];
        if (node->op != TIDE_OP_VARIABLE)
            return tide_error_set(err, TIDE_INVALID,
                                  "streamed_variables[%zu] \"%s\": node \"%s\" is a %s, not a "
                                  "Variable",
                                  i, name, name, tide_op_info(node->op)->name);
        if (node->outputs[0].dtype != TIDE_DTYPE_FLOAT32)
            return tide_error_set(err, TIDE_INVALID,
                                  "streamed_variables[%zu] \"%s\": a %s Variable; only float32 "
                                  "ones are streamed",
                                  i, name, tide_dtype_name(node->outputs[0].dtype));
        for (size_t j = 0; j < i; j++) {
            if (strcmp(spec->streamed_variables[j], name) == 0)
                return tide_error_set(err, TIDE_INVALID,
                                      "streamed_variables[%zu] \"%s\": listed twice", i, name);
        }
        if (!streamed)
            continue;
        st = spec_from_output(g, name, (struct tide_edge){id, 0}, &(*streamed)[*n_streamed], err);
        if (st != TIDE_OK)
            return st;
        (*n_streamed)++;
    }
    return TIDE_OK;
}

enum tide_status tided_spec_fetches(const Tide__V1__JobSpec *spec, const struct tide_graph *g,
                                    struct tided_tensor_spec **fetches, uint32_t *n_fetches,
                                    struct tide_error *err)
{
    *n_fetches = 0;
    *fetches = calloc(spec->n_fetches ? spec->n_fetches : 1, sizeof(**fetches));
    enum tide_status st = *fetches ? TIDE_OK : tide_error_set(err, TIDE_NOMEM, "out of memory");
    for (size_t i = 0; i < spec->n_fetches && st == TIDE_OK; i++) {
        struct tide_edge e;
        st = resolve_output(g, spec->fetches[i], "fetch", &e, err);
        if (st == TIDE_OK)
            st = spec_from_output(g, spec->fetches[i], e, &(*fetches)[i], err);
        if (st == TIDE_OK)
            (*n_fetches)++;
    }
    return st;
}

enum tide_status tided_spec_user_variables(const struct tide_graph *g, char ***names,
                                           uint32_t *n_names, struct tide_error *err)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        n += g->nodes[v].op == TIDE_OP_VARIABLE;
    *n_names = 0;
    *names = calloc(n ? n : 1, sizeof(char *));
    if (!*names)
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op != TIDE_OP_VARIABLE)
            continue;
        char *name = strdup(g->nodes[v].name);
        if (!name)
            return tide_error_set(err, TIDE_NOMEM, "out of memory");
        (*names)[(*n_names)++] = name;
    }
    return TIDE_OK;
}

enum tide_status tided_spec_prepare(const Tide__V1__JobSpec *spec,
                                    const struct tide_graph_limits *limits, uint64_t budget,
                                    struct tided_spec_setup *setup, struct tide_graph **graph,
                                    struct tided_tensor_spec **feeds, uint32_t *n_feeds,
                                    char ***user_variables, uint32_t *n_user_variables,
                                    struct tide_error *err)
{
    enum tide_status st = tided_spec_import(spec, limits, graph, err);
    if (st == TIDE_OK)
        st = tided_spec_setup(spec, budget, setup, err);
    if (st == TIDE_OK)
        st = tided_spec_check_feeds(spec, *graph, feeds, n_feeds, err);
    if (st == TIDE_OK)
        st = tided_spec_streamed(spec, *graph, NULL, NULL, err);
    if (st == TIDE_OK && user_variables)
        st = tided_spec_user_variables(*graph, user_variables, n_user_variables, err);
    if (st != TIDE_OK)
        st = st == TIDE_NOMEM || st == TIDE_UNSUPPORTED ? st : TIDE_INVALID;
    return st;
}
