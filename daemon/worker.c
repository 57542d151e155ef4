/* SPDX-License-Identifier: MIT */
/*
 * worker.c: the executor thread (see worker.h).
 *
 * It holds the thread and the task run functions; what a JobSpec becomes
 * for the session, and the PlanReport a plan becomes, are in spec.c.
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
 * Plan runs the session plan-only (tide_session_plan_graph): the memory
 * passes without an executor, so a dry run allocates no arena and works
 * however full the device is; a plan that does not fit still comes back
 * with the session's report.
 *
 * resume_from restores every Variable the checkpoint holds, optimizer state
 * included, once the session exists, then sets the session's step count to
 * the checkpoint's step so that Adam's bias correction continues.
 */
#include "daemon/worker.h"

#include <ev.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "daemon/spec.h"
#include "daemon/store.h"
#include "picture/picture.h"
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
    free(t->compile.plan_svg);
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
    free(t->step.trace_json);
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

/*
 * The planner's report from the session. The daemon always plans under a
 * memory policy, so the session has one; NULL only when out of memory.
 */
static Tide__V1__PlanReport *report_from_session(const struct tide_session *s)
{
    const struct tide_plan_report *r = tide_session_plan_report(s);
    return r ? tided_spec_plan_report(r, tide_session_graph(s), tide_session_memplan(s)) : NULL;
}

/*
 * The compiled plan's memory picture, for the dashboard (daemon/http.c).
 * Best effort: a failure costs the picture, never the job, and is logged.
 */
static void draw_plan(struct tided_task *t, const char *job_name)
{
    const struct tide_memplan *plan = tide_session_memplan(t->session);
    if (!plan)
        return;
    struct tide_memory_timeline timeline;
    struct tide_error e = {0};
    if (tide_memory_timeline_build(tide_session_graph(t->session), plan, t->compile.budget, 0,
                                   &timeline, &e) != TIDE_OK) {
        TIDE_LOG_WARN("plan picture: %s", e.message);
        return;
    }
    char title[200];
    snprintf(title, sizeof(title), "%.120s: device memory over one step",
             job_name && job_name[0] ? job_name : "job");
    struct tide_picture_options options = {.title = title};
    if (tide_picture_svg_buffer(&timeline, &options, &t->compile.plan_svg,
                                &t->compile.plan_svg_len, &e) != TIDE_OK)
        TIDE_LOG_WARN("plan picture: %s", e.message);
    tide_memory_timeline_clear(&timeline);
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

/* What Compile and Plan both check before the session (tided_spec_prepare). */
static enum tide_status prepare(struct tided_task *t, struct tided_spec_setup *setup,
                                struct tide_graph **graph)
{
    bool compile = t->kind == TIDED_TASK_COMPILE;
    return tided_spec_prepare(t->compile.spec, &t->compile.limits, t->compile.budget, setup, graph,
                              &t->compile.feeds, &t->compile.n_feeds,
                              compile ? &t->compile.user_variables : NULL,
                              &t->compile.n_user_variables, &t->err);
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

    struct tided_spec_setup setup;
    struct tide_graph *g = NULL;
    Tide__V1__ReadVariablesResponse *ck = NULL;
    st = prepare(t, &setup, &g);
    if (st == TIDE_OK && t->compile.restore_path) {
        struct tide_error e = {0};
        ck = tided_store_read_checkpoint(t->compile.restore_path, &e);
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

    struct tide_session_options o = tided_spec_session_options(
        spec, &setup, t->compile.backend, t->compile.budget, &t->compile.limits);
    st = tide_session_new_graph(g, &o, &t->session, err); /* takes g, also on failure */
    if (st != TIDE_OK) {
        if (ck)
            tide__v1__read_variables_response__free_unpacked(ck, NULL);
        /* A name the spec got wrong is a bad argument, not a missing resource. */
        t->status = st == TIDE_NOT_FOUND ? TIDE_INVALID : st;
        return;
    }
    const struct tide_graph *sg = tide_session_graph(t->session);

    st = tided_spec_fetches(spec, sg, &t->compile.fetches, &t->compile.n_fetches, err);
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
    if (st == TIDE_OK)
        draw_plan(t, spec->name);
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
    struct tided_spec_setup setup;
    struct tide_graph *g = NULL;
    enum tide_status st = prepare(t, &setup, &g);
    if (st != TIDE_OK) {
        tide_graph_free(g);
        t->status = st;
        return;
    }
    struct tide_session_options o = tided_spec_session_options(
        spec, &setup, t->compile.backend, t->compile.budget, &t->compile.limits);
    /* Plan-only: a dry run must not allocate the arena; a refused plan still has its report. */
    struct tide_session *s = NULL;
    st = tide_session_plan_graph(g, &o, &s, err);
    if (st != TIDE_OK && st != TIDE_DOES_NOT_FIT) {
        t->status = st == TIDE_NOT_FOUND ? TIDE_INVALID : st;
        return;
    }
    const struct tide_plan_report *r = tide_session_plan_report(s);
    struct tide_plan_report bare = {.budget_bytes = t->compile.budget, .chosen = setup.policy};
    Tide__V1__PlanReport *report =
        r ? tided_spec_plan_report(r, tide_session_graph(s), tide_session_memplan(s))
          : tided_spec_plan_report(&bare, NULL, NULL);
    if (report && st == TIDE_DOES_NOT_FIT) {
        /* Not an error for a dry run: the report says why, in the planner's full words. */
        report->fits = false;
        if (report->message != protobuf_c_empty_string)
            free(report->message);
        report->message = strdup(err->message);
    }
    tide_error_clear(err);
    tide_session_free(s);
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

/*
 * Tracing rides on steps (the job layer arms it, rpc-trace.c): a traced step
 * starts a recording or appends to it, an untraced one stops it, and the
 * last traced step writes it out. A tracing failure is the trace's, not the
 * step's: the step runs untraced.
 */
static void trace_before_step(struct tided_task *t)
{
    if (!t->step.trace)
        tide_session_trace_stop(t->session);
    else if (t->step.trace_begin)
        t->step.trace_status = tide_session_trace_start(t->session, &t->step.trace_err);
}

static void trace_after_step(struct tided_task *t)
{
    if (!t->step.trace || !t->step.trace_end || t->step.trace_status != TIDE_OK)
        return;
    tide_session_trace_stop(t->session);
    t->step.trace_status =
        tide_trace_json(tide_session_trace(t->session), t->step.trace_max_bytes,
                        &t->step.trace_json, &t->step.trace_len, &t->step.trace_err);
}

static void run_step(struct tided_task *t)
{
    struct tide_error *err = &t->err;
    enum tide_status st = TIDE_OK;
    trace_before_step(t);
    for (uint32_t i = 0; i < t->step.n_feeds && st == TIDE_OK; i++)
        st = tide_session_feed(t->session, t->step.feed_names[i], t->step.feed_data[i],
                               t->step.feed_bytes[i], err);
    if (st == TIDE_OK)
        st = t->step.eval ? tide_session_eval(t->session, &t->step.stats, err)
                          : tide_session_step(t->session, &t->step.stats, err);
    /* Valid only until the next step. */
    t->step.stats.node_ms = NULL;
    t->step.stats.partition_high_water_bytes = NULL;
    if (st == TIDE_OK)
        trace_after_step(t);
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
static enum tide_status write_checkpoint(struct tided_task *t,
                                        const Tide__V1__ReadVariablesResponse *msg)
{
    const char *dir = t->checkpoint.dir;
    char name[64];
    snprintf(name, sizeof(name), "checkpoint-%" PRIu64 ".pb", t->checkpoint.step);
    enum tide_status st =
        tided_store_write_checkpoint(dir, name, msg, &t->checkpoint.bytes, &t->err);
    if (st != TIDE_OK)
        return st;
    st = tided_store_link(dir, name, "checkpoint.pb", &t->err);
    if (st == TIDE_UNSUPPORTED) {
        TIDE_LOG_DEBUG("%s; writing a copy instead", t->err.message);
        tide_error_clear(&t->err);
        st = tided_store_write_checkpoint(dir, "checkpoint.pb", msg, NULL, &t->err);
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
        st = write_checkpoint(t, &msg);
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
    Tide__V1__ReadVariablesResponse *ck = tided_store_read_checkpoint(t->read.checkpoint_path, &e);
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
