/* SPDX-License-Identifier: MIT */
/*
 * worker.c: the executor thread (see worker.h).
 *
 * DESIGN
 *
 * Threads and what each touches:
 *  - The main thread fills a task, pushes it on `queue` (under `mutex`) and
 *    signals `wake`. It later receives the task back in async_cb, which
 *    drains `done` (under `mutex`) and calls the done callback per task.
 *  - The worker thread pops tasks from `queue`, runs them, pushes them on
 *    `done` and calls ev_async_send — the one libev call that is safe off
 *    the loop thread; it coalesces, so async_cb drains the whole list. While
 *    a task runs, the worker alone touches the task and the session in it;
 *    it never reads a job or a call.
 *  - `busy_since_us` (atomic) is written by the worker and read by the
 *    watchdog on the main thread.
 *
 * Sessions: a session is driven by one thread at a time; here always this
 * one, from tide_session_new_graph to tide_session_free, so the executor's
 * and backend's per-session state needs no locks of ours.
 *
 * Ordering: tasks run in submission order. The job manager relies on it: a
 * checkpoint submitted after a step sees that step's variables, a FREE
 * after a step frees the session once the step is done, and a compilation
 * submitted after a FREE finds the freed arena back on the device.
 *
 * Plan runs the session plan-only (tide_session_options.plan_only): the
 * memory passes without an executor, so a dry run allocates no arena and
 * works however full the device is.
 *
 * resume_from restores every Variable the checkpoint holds, optimizer state
 * included, once the session exists, then sets the session's step count to
 * the checkpoint's step so that Adam's bias correction continues.
 */
#include "daemon/worker.h"

#include <ev.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "daemon/store.h"
#include "graph/import.h"
#include "swapper/swapper.h"

struct tided_worker {
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t wake;
    struct tided_task *queue_head, *queue_tail; /* to run (mutex) */
    struct tided_task *done_head, *done_tail;   /* ran (mutex) */
    bool stop;                                  /* (mutex) */
    atomic_bool refuse_compiles;
    _Atomic int64_t busy_since_us; /* 0: idle (monotonic clock) */
    struct ev_loop *loop;
    ev_async async;
    tided_task_done_fn done_fn;
    void *context;
    bool started;
};

static int64_t monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ============================================================================
 * Tasks
 * ========================================================================== */

struct tided_task *tided_task_new(enum tided_task_kind kind, void *job)
{
    struct tided_task *t = calloc(1, sizeof(*t));
    if (t) {
        t->kind = kind;
        t->job = job;
    }
    return t;
}

void tided_tensor_specs_free(struct tided_tensor_spec *specs, uint32_t n)
{
    if (!specs)
        return;
    for (uint32_t i = 0; i < n; i++)
        free(specs[i].name);
    free(specs);
}

void tided_plan_report_free(Tide__V1__PlanReport *report)
{
    if (!report)
        return;
    for (size_t i = 0; i < report->n_partitions; i++) {
        if (report->partitions[i]->peak_node != protobuf_c_empty_string)
            free(report->partitions[i]->peak_node);
        free(report->partitions[i]);
    }
    free(report->partitions);
    if (report->min_budget_node != protobuf_c_empty_string)
        free(report->min_budget_node);
    if (report->message != protobuf_c_empty_string)
        free(report->message);
    free(report);
}

static void free_strings(char **v, uint32_t n)
{
    if (!v)
        return;
    for (uint32_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* What a COMPILE or PLAN task owns. */
static void free_compile(struct tided_task *t)
{
    if (t->compile.request)
        protobuf_c_message_free_unpacked(t->compile.request, NULL);
    free(t->compile.dir);
    free(t->compile.restore_path);
    free(t->compile.info.data);
    free(t->compile.loss);
    tided_tensor_specs_free(t->compile.feeds, t->compile.n_feeds);
    tided_tensor_specs_free(t->compile.fetches, t->compile.n_fetches);
    free_strings(t->compile.user_variables, t->compile.n_user_variables);
    tided_plan_report_free(t->compile.plan);
    free(t->compile.packed.data);
}

/* What a STEP task owns. */
static void free_step(struct tided_task *t)
{
    if (t->step.batch)
        protobuf_c_message_free_unpacked(&t->step.batch->base, NULL);
    free(t->step.feed_names);
    free(t->step.feed_data);
    free(t->step.feed_bytes);
    if (t->step.fetch_data) {
        for (uint32_t i = 0; i < t->step.n_fetches; i++)
            free(t->step.fetch_data[i]);
        free(t->step.fetch_data);
    }
}

/* What a READ_VARIABLES task owns. */
static void free_read(struct tided_task *t)
{
    free(t->read.checkpoint_path);
    free(t->read.spec_path);
    free_strings(t->read.names, t->read.n_names);
    free(t->read.packed.data);
}

/* What a CHECKPOINT task owns. */
static void free_checkpoint(struct tided_task *t)
{
    free(t->checkpoint.dir);
    free(t->checkpoint.path);
}

/* What a PERSIST or REMOVE task owns. */
static void free_persist(struct tided_task *t)
{
    free(t->persist.dir);
    free(t->persist.name);
    free(t->persist.data.data);
}

/* ============================================================================
 * Helpers: names, tensors, packing
 * ========================================================================== */

static char *xstrdup(const char *s)
{
    return strdup(s ? s : "");
}

/* Resolves "node" or "node:k" in graph; NOT_FOUND / INVALID with a message naming it. */
static enum tide_status resolve_output(const struct tide_graph *g, const char *name,
                                       const char *what, struct tide_edge *edge,
                                       struct tide_error *err)
{
    char base[TIDE_MAX_NAME + 1];
    const char *colon = strrchr(name, ':');
    size_t len = colon ? (size_t)(colon - name) : strlen(name);
    uint32_t output = 0;
    if (colon) {
        const char *d = colon + 1;
        if (*d == '\0' || strspn(d, "0123456789") != strlen(d) || strlen(d) > 9)
            return tide_error_set(err, TIDE_INVALID, "%s \"%s\": want \"node\" or \"node:k\"",
                                  what, name);
        output = (uint32_t)strtoul(d, NULL, 10);
    }
    if (len == 0 || len > TIDE_MAX_NAME)
        return tide_error_set(err, TIDE_INVALID, "%s \"%s\": no such node", what, name);
    memcpy(base, name, len);
    base[len] = '\0';
    uint32_t id = tide_graph_find(g, base);
    if (id == TIDE_NO_NODE)
        return tide_error_set(err, TIDE_INVALID, "%s \"%s\": no node is called \"%s\"", what,
                              name, base);
    if (output >= g->nodes[id].n_outputs)
        return tide_error_set(err, TIDE_INVALID, "%s \"%s\": node \"%s\" (%s) has %u output(s)",
                              what, name, base, tide_op_info(g->nodes[id].op)->name,
                              g->nodes[id].n_outputs);
    *edge = (struct tide_edge){id, output};
    return TIDE_OK;
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

void tided_named_tensor_fill(struct tided_named_tensor *nt, const char *name, enum tide_dtype dtype,
                             const struct tide_shape *shape, const void *data, uint64_t nbytes)
{
    tide__v1__named_tensor__init(&nt->named);
    tide__v1__tensor__init(&nt->tensor);
    tide__v1__tensor_shape__init(&nt->shape);
    for (int32_t i = 0; i < shape->rank && i < TIDE_MAX_RANK; i++)
        nt->dims[i] = shape->dims[i];
    nt->shape.n_dims = (size_t)(shape->rank > 0 ? shape->rank : 0);
    nt->shape.dims = nt->dims;
    nt->tensor.dtype = (Tide__V1__DataType)dtype;
    nt->tensor.shape = &nt->shape;
    nt->tensor.data.len = (size_t)nbytes;
    nt->tensor.data.data = (uint8_t *)data;
    nt->named.name = (char *)name;
    nt->named.tensor = &nt->tensor;
}

static enum tide_status pack(const ProtobufCMessage *m, ProtobufCBinaryData *out,
                             struct tide_error *err)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    out->data = malloc(n ? n : 1);
    if (!out->data)
        return tide_error_set(err, TIDE_NOMEM, "out of memory packing %zu bytes", n);
    out->len = protobuf_c_message_pack(m, out->data);
    return TIDE_OK;
}

/* ============================================================================
 * Compile and plan
 * ========================================================================== */

/* What a JobSpec becomes for tide_session_new_graph. */
struct setup {
    bool training;
    struct tide_train_options train;
    struct tide_memory_policy policy;
};

static enum tide_status check_rate(float lr, const char *field, struct tide_error *err)
{
    if (!(isfinite(lr) && lr > 0.0f))
        return tide_error_set(err, TIDE_INVALID, "%s must be a positive number, got %g", field,
                              (double)lr);
    return TIDE_OK;
}

static enum tide_status build_setup(const Tide__V1__JobSpec *spec, uint64_t budget,
                                    struct setup *s, struct tide_error *err)
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
    return TIDE_OK;
}

static uint64_t backend_workspace(void *ctx, const struct tide_graph *g, const struct tide_node *n)
{
    return tide_backend_workspace_bytes(ctx, g, n);
}

static const char *node_name(const struct tide_graph *g, uint32_t id)
{
    return g && id < g->n_nodes ? g->nodes[id].name : "";
}

/* Builds the wire PlanReport from the planner's report; node names from g. */
static Tide__V1__PlanReport *report_from_plan(const struct tide_plan_report *r,
                                              const struct tide_graph *g)
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
    p->swap_in_bytes = r->swap_in_bytes;
    p->swap_out_bytes = r->swap_out_bytes;
    p->fetch_bytes = r->fetch_bytes;
    p->write_back_bytes = r->write_back_bytes;
    p->partition_size = r->chosen.partition_size;
    p->swap_threshold = r->chosen.swap_threshold;
    p->prefetch_distance = r->chosen.prefetch_distance;
    p->host_bytes = r->host_bytes;
    p->plan_us = (uint64_t)(r->plan_ms * 1000.0);
    p->message = xstrdup(r->message);
    return p;
}

/*
 * The planner's report from the session. The daemon always plans under a
 * memory policy, so the session has one; NULL only when out of memory.
 */
static Tide__V1__PlanReport *report_from_session(const struct tide_session *s)
{
    const struct tide_plan_report *r = tide_session_plan_report(s);
    return r ? report_from_plan(r, tide_session_graph(s)) : NULL;
}

/*
 * The report of a plan that does not fit: runs import, autodiff and the
 * memory passes without an executor, for the planner's numbers (smallest
 * budget, the node that sets it). NULL when the passes cannot say more.
 */
static Tide__V1__PlanReport *report_not_fitting(const Tide__V1__JobSpec *spec,
                                                const struct setup *setup,
                                                struct tide_backend *backend,
                                                const struct tide_graph_limits *limits)
{
    struct tide_error err = {0};
    struct tide_graph *g = NULL;
    Tide__V1__PlanReport *p = NULL;
    if (tide_graph_import_message(spec->graph, limits, &g, &err) != TIDE_OK)
        return NULL;
    struct tide_autodiff_result ad = {0};
    bool trained = false;
    if (setup->training) {
        if (tide_autodiff(g, &setup->train, &ad, &err) != TIDE_OK)
            goto out;
        trained = true;
    }
    /* Pinned as the session pins them: the fetches and the loss live across steps. */
    uint8_t *pinned = calloc((size_t)g->n_nodes + 1, 1);
    if (!pinned)
        goto out;
    for (size_t i = 0; i < spec->n_fetches; i++) {
        struct tide_edge e;
        if (resolve_output(g, spec->fetches[i], "fetch", &e, &err) != TIDE_OK) {
            free(pinned);
            goto out;
        }
        pinned[e.node] = 1;
    }
    if (trained)
        pinned[ad.loss.node] = 1;
    struct tide_plan_env env = {
        .workspace_bytes = backend_workspace, .workspace_ctx = backend, .pinned = pinned};
    struct tide_memory_plan mp;
    memset(&mp, 0, sizeof(mp));
    enum tide_status st = tide_plan_memory(g, &setup->policy, &env, &mp, &err);
    if (st == TIDE_OK || st == TIDE_DOES_NOT_FIT)
        p = report_from_plan(&mp.report, g);
    tide_memory_plan_release(&mp);
    free(pinned);
out:
    if (trained)
        tide_autodiff_result_release(&ad);
    tide_graph_free(g);
    return p;
}

/* Checks the spec's feeds against the graph's Placeholders; fills the feed specs. */
static enum tide_status check_feeds(const Tide__V1__JobSpec *spec, const struct tide_graph *g,
                                    struct tided_task *t, struct tide_error *err)
{
    t->compile.feeds = calloc(spec->n_feeds ? spec->n_feeds : 1, sizeof(*t->compile.feeds));
    if (!t->compile.feeds)
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
                                               &t->compile.feeds[t->compile.n_feeds], err);
        if (st != TIDE_OK)
            return st;
        t->compile.n_feeds++;
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

static enum tide_status collect_user_variables(const struct tide_graph *g, struct tided_task *t,
                                               struct tide_error *err)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        n += g->nodes[v].op == TIDE_OP_VARIABLE;
    t->compile.user_variables = calloc(n ? n : 1, sizeof(char *));
    if (!t->compile.user_variables)
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op != TIDE_OP_VARIABLE)
            continue;
        char *name = strdup(g->nodes[v].name);
        if (!name)
            return tide_error_set(err, TIDE_NOMEM, "out of memory");
        t->compile.user_variables[t->compile.n_user_variables++] = name;
    }
    return TIDE_OK;
}

/* Checks a checkpoint's tensor against a Variable of the graph; value gets the bytes. */
static enum tide_status check_restored(const struct tide_graph *g, uint32_t id,
                                       const Tide__V1__NamedTensor *nt,
                                       struct tide_const_tensor *value, struct tide_error *err)
{
    char a[96], b[96];
    enum tide_status st = tide_tensor_from_proto(nt->tensor, NULL, value, nt->name, err);
    if (st != TIDE_OK)
        return tide_error_prefix(err, "resume_from");
    const struct tide_output *o = &g->nodes[id].outputs[0];
    if (value->dtype != o->dtype || !tide_shape_equal(&value->shape, &o->shape))
        return tide_error_set(err, TIDE_INVALID,
                              "resume_from: variable \"%s\" is %s %s in the checkpoint but %s %s "
                              "in this graph",
                              nt->name, tide_dtype_name(value->dtype),
                              tide_shape_format(&value->shape, a, sizeof(a)),
                              tide_dtype_name(o->dtype),
                              tide_shape_format(&o->shape, b, sizeof(b)));
    return TIDE_OK;
}

static uint32_t find_variable(const struct tide_graph *g, const char *name)
{
    uint32_t id = name ? tide_graph_find(g, name) : TIDE_NO_NODE;
    return id != TIDE_NO_NODE && g->nodes[id].op == TIDE_OP_VARIABLE ? id : TIDE_NO_NODE;
}

/* After the session exists: overwrites every Variable the checkpoint holds, optimizer state too. */
static enum tide_status write_variables(struct tide_session *s,
                                        const Tide__V1__ReadVariablesResponse *ck,
                                        uint32_t *restored, struct tide_error *err)
{
    const struct tide_graph *g = tide_session_graph(s);
    for (size_t i = 0; i < ck->n_variables; i++) {
        const Tide__V1__NamedTensor *nt = ck->variables[i];
        uint32_t id = find_variable(g, nt->name);
        if (id == TIDE_NO_NODE) {
            TIDE_LOG_DEBUG("resume_from: the graph has no Variable \"%s\"; skipped",
                           nt->name ? nt->name : "");
            continue;
        }
        struct tide_const_tensor value;
        enum tide_status st = check_restored(g, id, nt, &value, err);
        if (st == TIDE_OK)
            st = tide_session_write_variable(s, nt->name, value.data, value.nbytes, err);
        if (st != TIDE_OK)
            return st;
        (*restored)++;
    }
    return TIDE_OK;
}

static void run_compile(struct tided_task *t)
{
    const Tide__V1__JobSpec *spec = t->compile.spec;
    struct tide_error *err = &t->err;
    enum tide_status st;

    /* Persist first, so that a crash while compiling still leaves the spec. */
    st = tided_store_mkdirs(t->compile.dir, err);
    if (st == TIDE_OK)
        st = tided_store_write_message(t->compile.dir, "spec.pb", &spec->base, NULL, err);
    if (st == TIDE_OK)
        st = tided_store_write(t->compile.dir, "info.pb", t->compile.info.data,
                               t->compile.info.len, err);
    if (st != TIDE_OK) {
        tide_error_prefix(err, "cannot save the job");
        t->status = TIDE_INTERNAL;
        return;
    }

    /* The graph first: a bad graph is the error a client most needs to hear about. */
    struct setup setup;
    struct tide_graph *g = NULL;
    Tide__V1__ReadVariablesResponse *ck = NULL;
    st = spec->graph ? tide_graph_import_message(spec->graph, &t->compile.limits, &g, err)
                     : tide_error_set(err, TIDE_INVALID, "spec.graph: missing");
    if (st == TIDE_OK)
        st = build_setup(spec, t->compile.budget, &setup, err);
    if (st == TIDE_OK)
        st = check_feeds(spec, g, t, err);
    if (st == TIDE_OK)
        st = collect_user_variables(g, t, err);
    if (st != TIDE_OK)
        st = st == TIDE_NOMEM || st == TIDE_UNSUPPORTED ? st : TIDE_INVALID;
    if (st == TIDE_OK && t->compile.restore_path) {
        struct tide_error e = {0};
        ck = (Tide__V1__ReadVariablesResponse *)tided_store_read_message(
            t->compile.restore_path, &tide__v1__read_variables_response__descriptor, &e);
        if (!ck)
            st = tide_error_set(err, e.status == TIDE_NOT_FOUND ? TIDE_NOT_FOUND : TIDE_INTERNAL,
                                "resume_from: %s", e.message);
    }
    if (st != TIDE_OK) {
        tide_graph_free(g);
        if (ck)
            tide__v1__read_variables_response__free_unpacked(ck, NULL);
        t->status = st;
        return;
    }

    struct tide_session_options o = tide_session_options_default();
    o.backend = t->compile.backend;
    o.budget_bytes = t->compile.budget;
    o.memory = &setup.policy;
    o.seed = spec->seed;
    o.train = setup.training ? &setup.train : NULL;
    o.fetches = (const char *const *)spec->fetches;
    o.n_fetches = (uint32_t)spec->n_fetches;
    o.limits = &t->compile.limits;
    st = tide_session_new_graph(g, &o, &t->session, err); /* takes g, also on failure */
    if (st != TIDE_OK) {
        if (ck)
            tide__v1__read_variables_response__free_unpacked(ck, NULL);
        /* A name the spec got wrong is a bad argument, not a missing resource. */
        t->status = st == TIDE_NOT_FOUND ? TIDE_INVALID : st;
        return;
    }
    const struct tide_graph *sg = tide_session_graph(t->session);

    t->compile.fetches = calloc(spec->n_fetches ? spec->n_fetches : 1, sizeof(*t->compile.fetches));
    st = t->compile.fetches ? TIDE_OK : tide_error_set(err, TIDE_NOMEM, "out of memory");
    for (size_t i = 0; i < spec->n_fetches && st == TIDE_OK; i++) {
        struct tide_edge e;
        st = resolve_output(sg, spec->fetches[i], "fetch", &e, err);
        if (st == TIDE_OK)
            st = spec_from_output(sg, spec->fetches[i], e, &t->compile.fetches[i], err);
        if (st == TIDE_OK)
            t->compile.n_fetches++;
    }
    if (st == TIDE_OK && setup.training) {
        t->compile.loss = strdup(setup.train.loss);
        if (!t->compile.loss)
            st = tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    if (st == TIDE_OK) {
        t->compile.plan = report_from_session(t->session);
        if (!t->compile.plan)
            st = tide_error_set(err, TIDE_NOMEM, "out of memory for the plan report");
    }
    if (st == TIDE_OK && ck) {
        st = write_variables(t->session, ck, &t->compile.restored_variables, err);
        /* The step count continues from the checkpoint's, for Adam's bias correction. */
        if (st == TIDE_OK)
            st = tide_session_set_step(t->session, ck->step, err);
        if (st == TIDE_OK)
            t->compile.restored_step = ck->step;
    }
    if (ck)
        tide__v1__read_variables_response__free_unpacked(ck, NULL);
    if (st != TIDE_OK) {
        tide_session_free(t->session);
        t->session = NULL;
    }
    t->status = st;
}

static void run_plan(struct tided_task *t)
{
    const Tide__V1__JobSpec *spec = t->compile.spec;
    struct tide_error *err = &t->err;
    struct setup setup;
    struct tide_graph *g = NULL;
    enum tide_status st =
        spec->graph ? tide_graph_import_message(spec->graph, &t->compile.limits, &g, err)
                    : tide_error_set(err, TIDE_INVALID, "spec.graph: missing");
    if (st == TIDE_OK)
        st = build_setup(spec, t->compile.budget, &setup, err);
    if (st == TIDE_OK)
        st = check_feeds(spec, g, t, err);
    if (st != TIDE_OK) {
        tide_graph_free(g);
        t->status = st == TIDE_NOMEM || st == TIDE_UNSUPPORTED ? st : TIDE_INVALID;
        return;
    }
    struct tide_session_options o = tide_session_options_default();
    o.backend = t->compile.backend;
    o.budget_bytes = t->compile.budget;
    o.memory = &setup.policy;
    o.seed = spec->seed;
    o.train = setup.training ? &setup.train : NULL;
    o.fetches = (const char *const *)spec->fetches;
    o.n_fetches = (uint32_t)spec->n_fetches;
    o.limits = &t->compile.limits;
    o.plan_only = true; /* no executor: a dry run must not allocate the arena */
    struct tide_session *s = NULL;
    Tide__V1__PlanReport *report = NULL;
    st = tide_session_new_graph(g, &o, &s, err);
    if (st == TIDE_OK) {
        report = report_from_session(s);
        tide_session_free(s);
    } else if (st == TIDE_DOES_NOT_FIT) {
        /* Not an error for a dry run: the report says why, with the planner's numbers. */
        report = report_not_fitting(spec, &setup, t->compile.backend, &t->compile.limits);
        if (!report) {
            struct tide_plan_report bare = {.budget_bytes = t->compile.budget,
                                            .chosen = setup.policy};
            report = report_from_plan(&bare, NULL);
        }
        if (report) {
            report->fits = false;
            if (report->message != protobuf_c_empty_string)
                free(report->message);
            report->message = xstrdup(err->message);
        }
        tide_error_clear(err);
        st = TIDE_OK;
    } else {
        t->status = st == TIDE_NOT_FOUND ? TIDE_INVALID : st;
        return;
    }
    if (!report) {
        t->status = tide_error_set(err, TIDE_NOMEM, "out of memory for the plan report");
        return;
    }
    t->status = pack(&report->base, &t->compile.packed, err);
    tided_plan_report_free(report);
}

/* ============================================================================
 * Steps
 * ========================================================================== */

static void run_step(struct tided_task *t)
{
    struct tide_error *err = &t->err;
    enum tide_status st = TIDE_OK;
    for (uint32_t i = 0; i < t->step.n_feeds && st == TIDE_OK; i++)
        st = tide_session_feed(t->session, t->step.feed_names[i], t->step.feed_data[i],
                               t->step.feed_bytes[i], err);
    if (st == TIDE_OK)
        st = t->step.eval ? tide_session_eval(t->session, &t->step.stats, err)
                          : tide_session_step(t->session, &t->step.stats, err);
    t->step.stats.node_ms = NULL; /* valid only until the next step */
    if (st == TIDE_OK && t->step.loss)
        st = tide_session_fetch(t->session, t->step.loss, &t->step.loss_value,
                                sizeof(t->step.loss_value), err);
    if (st == TIDE_OK && t->step.n_fetches) {
        t->step.fetch_data = calloc(t->step.n_fetches, sizeof(void *));
        if (!t->step.fetch_data)
            st = tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < t->step.n_fetches && st == TIDE_OK; i++) {
        const struct tided_tensor_spec *f = &t->step.fetches[i];
        t->step.fetch_data[i] = malloc(f->nbytes ? f->nbytes : 1);
        if (!t->step.fetch_data[i])
            st = tide_error_set(err, TIDE_NOMEM, "out of memory for fetch \"%s\"", f->name);
        else
            st = tide_session_fetch(t->session, f->name, t->step.fetch_data[i], f->nbytes, err);
    }
    t->status = st;
}

/* ============================================================================
 * Variables and checkpoints
 * ========================================================================== */

/* Variables read from a session into wire tensors; freed with variables_release. */
struct variables {
    uint32_t n;
    struct tided_named_tensor *tensors;
    Tide__V1__NamedTensor **ptrs;
    void **data;
};

static void variables_release(struct variables *v)
{
    if (v->data) {
        for (uint32_t i = 0; i < v->n; i++)
            free(v->data[i]);
    }
    free(v->data);
    free(v->tensors);
    free(v->ptrs);
    memset(v, 0, sizeof(*v));
}

/* Reads the Variables named in ids (node ids of the session graph). */
static enum tide_status variables_read(struct tide_session *s, const uint32_t *ids, uint32_t n,
                                       struct variables *v, struct tide_error *err)
{
    const struct tide_graph *g = tide_session_graph(s);
    memset(v, 0, sizeof(*v));
    v->tensors = calloc(n ? n : 1, sizeof(*v->tensors));
    v->ptrs = calloc(n ? n : 1, sizeof(*v->ptrs));
    v->data = calloc(n ? n : 1, sizeof(*v->data));
    if (!v->tensors || !v->ptrs || !v->data) {
        variables_release(v);
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct tide_node *node = &g->nodes[ids[i]];
        const struct tide_output *o = &node->outputs[0];
        v->data[i] = malloc(o->nbytes ? o->nbytes : 1);
        v->n = i + 1;
        if (!v->data[i]) {
            variables_release(v);
            return tide_error_set(err, TIDE_NOMEM, "out of memory for variable \"%s\"",
                                  node->name);
        }
        enum tide_status st = tide_session_fetch(s, node->name, v->data[i], o->nbytes, err);
        if (st != TIDE_OK) {
            variables_release(v);
            return st;
        }
        tided_named_tensor_fill(&v->tensors[i], node->name, o->dtype, &o->shape, v->data[i],
                                o->nbytes);
        v->ptrs[i] = &v->tensors[i].named;
    }
    return TIDE_OK;
}

/*
 * Writes checkpoint-<step>.pb atomically, makes checkpoint.pb (what resume
 * and ReadVariables read) the same file by an atomic hard link, or a second
 * copy where the file system has no hard links, then deletes the oldest
 * checkpoint-<step>.pb beyond the policy's keep. A crash at any point leaves
 * checkpoint.pb whole: the previous one or the new one.
 */
static enum tide_status write_checkpoint(struct tided_task *t, const ProtobufCMessage *msg)
{
    const char *dir = t->checkpoint.dir;
    char name[64];
    snprintf(name, sizeof(name), "checkpoint-%" PRIu64 ".pb", t->checkpoint.step);
    enum tide_status st = tided_store_write_message(dir, name, msg, &t->checkpoint.bytes, &t->err);
    if (st != TIDE_OK)
        return st;
    st = tided_store_link(dir, name, "checkpoint.pb", &t->err);
    if (st == TIDE_UNSUPPORTED) {
        TIDE_LOG_DEBUG("%s; writing a copy instead", t->err.message);
        tide_error_clear(&t->err);
        st = tided_store_write_message(dir, "checkpoint.pb", msg, NULL, &t->err);
    }
    if (st != TIDE_OK)
        return st;
    /* The checkpoint is safe by now: failing to delete old ones only costs disk. */
    struct tide_error e = {0};
    if (tided_store_prune_checkpoints(dir, t->checkpoint.keep, &e) != TIDE_OK)
        TIDE_LOG_WARN("cannot delete old checkpoints: %s", e.message);
    return TIDE_OK;
}

static void run_checkpoint(struct tided_task *t)
{
    const struct tide_graph *g = tide_session_graph(t->session);
    uint32_t *ids = malloc(((size_t)g->n_nodes + 1) * sizeof(*ids));
    if (!ids) {
        t->status = tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
        return;
    }
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op == TIDE_OP_VARIABLE)
            ids[n++] = v;
    }
    struct variables vars;
    enum tide_status st = variables_read(t->session, ids, n, &vars, &t->err);
    free(ids);
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = t->checkpoint.step;
        msg.n_variables = vars.n;
        msg.variables = vars.ptrs;
        st = write_checkpoint(t, &msg.base);
        variables_release(&vars);
    }
    if (st == TIDE_OK) {
        t->checkpoint.path = tided_path_join(t->checkpoint.dir, "checkpoint.pb");
        if (!t->checkpoint.path)
            st = tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
    }
    t->status = st;
}

/* The Variables of a spec.pb's graph, by the op name on the wire. */
static char **spec_variables(const char *path, uint32_t *n)
{
    struct tide_error e = {0};
    *n = 0;
    Tide__V1__JobSpec *spec =
        (Tide__V1__JobSpec *)tided_store_read_message(path, &tide__v1__job_spec__descriptor, &e);
    if (!spec)
        return NULL;
    char **names = NULL;
    if (spec->graph) {
        names = calloc(spec->graph->n_nodes + 1, sizeof(char *));
        for (size_t i = 0; names && i < spec->graph->n_nodes; i++) {
            const Tide__V1__Node *node = spec->graph->nodes[i];
            if (node->op && strcmp(node->op, "Variable") == 0 && node->name)
                names[(*n)++] = strdup(node->name);
        }
    }
    tide__v1__job_spec__free_unpacked(spec, NULL);
    return names;
}

static void read_from_session(struct tided_task *t)
{
    const struct tide_graph *g = tide_session_graph(t->session);
    uint32_t n = t->read.n_names ? t->read.n_names : t->read.n_defaults;
    char *const *names = t->read.n_names ? t->read.names : t->read.defaults;
    uint32_t *ids = calloc(n ? n : 1, sizeof(*ids));
    if (!ids) {
        t->status = tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
        return;
    }
    enum tide_status st = TIDE_OK;
    for (uint32_t i = 0; i < n && st == TIDE_OK; i++) {
        ids[i] = tide_graph_find(g, names[i]);
        if (ids[i] == TIDE_NO_NODE || g->nodes[ids[i]].op != TIDE_OP_VARIABLE)
            st = tide_error_set(&t->err, TIDE_NOT_FOUND, "the job has no Variable called \"%s\"",
                                names[i]);
    }
    struct variables vars;
    if (st == TIDE_OK)
        st = variables_read(t->session, ids, n, &vars, &t->err);
    free(ids);
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = t->read.step;
        msg.n_variables = vars.n;
        msg.variables = vars.ptrs;
        st = pack(&msg.base, &t->read.packed, &t->err);
        variables_release(&vars);
    }
    t->status = st;
}

static void read_from_checkpoint(struct tided_task *t)
{
    struct tide_error e = {0};
    Tide__V1__ReadVariablesResponse *ck = (Tide__V1__ReadVariablesResponse *)
        tided_store_read_message(t->read.checkpoint_path,
                                 &tide__v1__read_variables_response__descriptor, &e);
    if (!ck) {
        t->status = tide_error_set(&t->err, e.status == TIDE_NOT_FOUND ? TIDE_NOT_FOUND
                                                                       : TIDE_INTERNAL,
                                   "%s", e.message);
        return;
    }
    /* The names to return: requested, the job's user variables, or spec.pb's. */
    uint32_t n = t->read.n_names ? t->read.n_names : t->read.n_defaults;
    char *const *names = t->read.n_names ? t->read.names : t->read.defaults;
    char **loaded = NULL;
    uint32_t n_loaded = 0;
    bool strict = t->read.n_names > 0;
    if (!t->read.n_names && !t->read.defaults && t->read.spec_path) {
        loaded = spec_variables(t->read.spec_path, &n_loaded);
        names = loaded;
        n = n_loaded;
    }
    Tide__V1__NamedTensor **subset = calloc(ck->n_variables + 1, sizeof(*subset));
    size_t m = 0;
    enum tide_status st = subset ? TIDE_OK : tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
    if (st == TIDE_OK && !names) {
        /* Nothing says which are the user's: all of them. */
        for (size_t i = 0; i < ck->n_variables; i++)
            subset[m++] = ck->variables[i];
    }
    for (uint32_t i = 0; names && i < n && st == TIDE_OK; i++) {
        bool found = false;
        for (size_t j = 0; j < ck->n_variables && !found; j++) {
            if (ck->variables[j]->name && strcmp(ck->variables[j]->name, names[i]) == 0) {
                subset[m++] = ck->variables[j];
                found = true;
            }
        }
        if (!found && strict)
            st = tide_error_set(&t->err, TIDE_NOT_FOUND,
                                "variable \"%s\" is not in the checkpoint %s", names[i],
                                t->read.checkpoint_path);
    }
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = ck->step;
        msg.n_variables = m;
        msg.variables = subset;
        st = pack(&msg.base, &t->read.packed, &t->err);
    }
    free(subset);
    free_strings(loaded, n_loaded);
    tide__v1__read_variables_response__free_unpacked(ck, NULL);
    t->status = st;
}

/* ============================================================================
 * The thread
 * ========================================================================== */

/* COMPILE and PLAN come back UNAVAILABLE once the daemon drains. */
static bool refused(struct tided_worker *w, struct tided_task *t)
{
    if (!atomic_load(&w->refuse_compiles))
        return false;
    t->status = tide_error_set(&t->err, TIDE_UNAVAILABLE, "tided is shutting down");
    return true;
}

static void run_compile_task(struct tided_worker *w, struct tided_task *t)
{
    if (!refused(w, t))
        run_compile(t);
}

static void run_plan_task(struct tided_worker *w, struct tided_task *t)
{
    if (!refused(w, t))
        run_plan(t);
}

static void run_step_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    run_step(t);
}

static void run_read_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    if (t->session)
        read_from_session(t);
    else
        read_from_checkpoint(t);
}

static void run_checkpoint_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    run_checkpoint(t);
}

static void run_persist_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    t->status = tided_store_mkdirs(t->persist.dir, &t->err);
    if (t->status == TIDE_OK)
        t->status = tided_store_write(t->persist.dir, t->persist.name, t->persist.data.data,
                                      t->persist.data.len, &t->err);
}

static void run_free_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    tide_session_free(t->session);
    t->session = NULL;
}

static void run_remove_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    t->status = tided_store_remove_dir(t->persist.dir, &t->err);
}

/*
 * The worker's side of each task kind: run it (worker thread) and free what
 * the task owns for it (NULL: nothing). What the main thread does with the
 * result is the same kind's row in jobs.c's table. A kind is one row in each.
 */
static const struct {
    void (*run)(struct tided_worker *w, struct tided_task *t);
    void (*free)(struct tided_task *t);
} task_kinds[TIDED_TASK_KINDS] = {
    [TIDED_TASK_COMPILE] = {run_compile_task, free_compile},
    [TIDED_TASK_PLAN] = {run_plan_task, free_compile},
    [TIDED_TASK_STEP] = {run_step_task, free_step},
    [TIDED_TASK_READ_VARIABLES] = {run_read_task, free_read},
    [TIDED_TASK_CHECKPOINT] = {run_checkpoint_task, free_checkpoint},
    [TIDED_TASK_PERSIST] = {run_persist_task, free_persist},
    [TIDED_TASK_FREE] = {run_free_task, NULL},
    [TIDED_TASK_REMOVE] = {run_remove_task, free_persist},
};

void tided_task_free(struct tided_task *t)
{
    if (!t)
        return;
    if (task_kinds[t->kind].free)
        task_kinds[t->kind].free(t);
    free(t);
}

static void run(struct tided_worker *w, struct tided_task *t)
{
    t->status = TIDE_OK;
    task_kinds[t->kind].run(w, t);
}

static void *worker_main(void *arg)
{
    struct tided_worker *w = arg;
    pthread_mutex_lock(&w->mutex);
    for (;;) {
        while (!w->queue_head && !w->stop)
            pthread_cond_wait(&w->wake, &w->mutex);
        struct tided_task *t = w->queue_head;
        if (!t)
            break; /* stop, and nothing left to run */
        w->queue_head = t->next;
        if (!w->queue_head)
            w->queue_tail = NULL;
        t->next = NULL;
        atomic_store(&w->busy_since_us, monotonic_us());
        pthread_mutex_unlock(&w->mutex);

        run(w, t);

        pthread_mutex_lock(&w->mutex);
        atomic_store(&w->busy_since_us, 0);
        if (w->done_tail)
            w->done_tail->next = t;
        else
            w->done_head = t;
        w->done_tail = t;
        ev_async_send(w->loop, &w->async);
    }
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}

/* Main thread: hands every task that came back to the done callback. */
static void deliver(struct tided_worker *w)
{
    pthread_mutex_lock(&w->mutex);
    struct tided_task *t = w->done_head;
    w->done_head = w->done_tail = NULL;
    pthread_mutex_unlock(&w->mutex);
    while (t) {
        struct tided_task *next = t->next;
        t->next = NULL;
        w->done_fn(w->context, t);
        t = next;
    }
}

static void async_cb(struct ev_loop *loop, ev_async *watcher, int revents)
{
    (void)loop, (void)revents;
    deliver(watcher->data);
}

struct tided_worker *tided_worker_new(struct ev_loop *loop, tided_task_done_fn done,
                                      void *context, char *error, size_t error_size)
{
    struct tided_worker *w = calloc(1, sizeof(*w));
    if (!w) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->mutex, NULL);
    pthread_cond_init(&w->wake, NULL);
    w->loop = loop;
    w->done_fn = done;
    w->context = context;
    ev_async_init(&w->async, async_cb);
    w->async.data = w;
    ev_set_priority(&w->async, EV_MAXPRI);
    ev_async_start(loop, &w->async); /* before the thread exists */
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
        snprintf(error, error_size, "cannot start the worker thread: %s", strerror(rc));
        ev_async_stop(loop, &w->async);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->mutex);
        free(w);
        return NULL;
    }
    w->started = true;
    return w;
}

void tided_worker_submit(struct tided_worker *w, struct tided_task *t)
{
    t->next = NULL;
    pthread_mutex_lock(&w->mutex);
    if (w->queue_tail)
        w->queue_tail->next = t;
    else
        w->queue_head = t;
    w->queue_tail = t;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mutex);
}

void tided_worker_refuse_compiles(struct tided_worker *w)
{
    atomic_store(&w->refuse_compiles, true);
}

bool tided_worker_healthy(struct tided_worker *w, int64_t stall_us)
{
    int64_t since = atomic_load(&w->busy_since_us);
    return since == 0 || monotonic_us() - since < stall_us;
}

void tided_worker_free(struct tided_worker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mutex);
    w->stop = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->thread, NULL);
    deliver(w);
    ev_async_stop(w->loop, &w->async);
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->mutex);
    free(w);
}
