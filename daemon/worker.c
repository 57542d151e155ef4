/* SPDX-License-Identifier: MIT */
/*
 * worker.c: the device thread and the compile thread (see worker.h).
 *
 * It holds the threads and the task run functions; what a JobSpec becomes
 * for the session, and the PlanReport a plan becomes, are in spec.c.
 *
 * DESIGN
 *
 * A compile thread and one device thread per device (devices.h), so that
 * one user's big graph does not hold another's steps, and a job on one
 * device never waits for a step on another:
 *  - The compile thread runs PLAN tasks and the planning half of COMPILE
 *    tasks (run_compile_plan): the spec saved, the graph imported, autodiff,
 *    the memory plan — a plan-only session, which touches no device. A
 *    planned COMPILE then joins the device thread's queue.
 *  - A device thread runs every task for its device (tided_task.device)
 *    that touches a session, in the order they reach its queue: STEP,
 *    CHECKPOINT, READ_VARIABLES, WRITE_VARIABLE, FREE, PERSIST, REMOVE, and
 *    the instantiating half of COMPILE (run_compile_instantiate: the
 *    executor, so the arena and the initial Variables, then resume_from).
 *    The job manager gives every task of a job its device, so a job's tasks
 *    keep their order; different devices' threads run side by side, each
 *    on its own backend.
 *
 * Threads and what each touches:
 *  - The main thread fills a task and pushes it (under `mutex`) on
 *    `compile_head` (PLAN, COMPILE, REMOVE) or its device's `lanes[].head`
 *    (the rest) and signals that thread. It later receives the task back
 *    in async_cb, which drains `done` (under `mutex`) and calls the done
 *    callback per task.
 *  - The compile and device threads pop their queue, run the task, and push
 *    it on `done` (or a planned COMPILE, a REMOVE, on its lane) and call
 *    ev_async_send — the one libev call that is safe off the loop thread;
 *    it coalesces, so async_cb drains the whole list. While a task runs, the
 *    thread running it alone touches the task and the session in it; they
 *    never read a job or a call.
 *  - `cancel` in a task (atomic) is set by the main thread (Cancel) and
 *    `refuse_compiles` (atomic) when the daemon drains; the session polls
 *    both between its passes (tide_session_options.cancelled), so a
 *    compilation stops at its next pass and comes back CANCELLED, or
 *    UNAVAILABLE while draining.
 *  - Each lane's `busy_since_us` (atomic) is written by its device thread
 *    and read by the watchdog on the main thread. A long compilation is not
 *    a stall. Each lane's `completed` (mutex) counts the tasks it ran.
 *  - A device's backend is shared: the compile thread asks it only for
 *    workspace sizes and op support (read-only; the CUDA backend locks its
 *    planning handle), that device's thread runs it.
 *
 * Sessions: a session is driven by one thread at a time: the compile
 * thread until it is planned, then (handed over under `mutex`) the device
 * thread until tide_session_free, so the executor's and backend's
 * per-session state needs no locks of ours.
 *
 * Ordering: tasks on a device thread run in the order they reach its
 * queue, which is submission order except for COMPILE, which reaches it
 * when planned. The job manager relies on it: a checkpoint submitted after
 * a step sees that step's variables, a FREE after a step frees the session
 * once the step is done, and a compilation submitted after a FREE finds the
 * freed arena back on the device (the FREE is queued first). Compilations
 * are planned one at a time in submission order. A REMOVE passes through
 * the compile thread first, so that no compilation submitted before it
 * saves a spec into a directory it has deleted; it then runs on the first
 * device's thread once every other device's thread has run the tasks
 * submitted before it (the fence it took at submission: each lane's count
 * of submitted tasks), so that a final checkpoint or a read of a job on any
 * device comes first. The main thread submits
 * nothing for a job while its COMPILE is in flight but PERSIST (info.pb)
 * and, on Cancel, nothing more; a cancelled compilation's done callback
 * saves info.pb again, as the planning half may have saved its own after.
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
#include "daemon/worker-impl.h"

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

/* One device's thread and queue. */
struct lane {
    struct tided_worker *worker;
    uint32_t device;
    pthread_t thread;
    bool started;
    pthread_cond_t wake;
    struct tided_task *head, *tail; /* to run on this device's thread (mutex) */
    uint64_t submitted;             /* tasks pushed on this lane so far (mutex) */
    uint64_t completed;             /* ... and run (mutex) */
    _Atomic int64_t busy_since_us;  /* 0: idle (monotonic clock) */
};

struct tided_worker {
    pthread_mutex_t mutex;
    pthread_cond_t progress; /* a lane completed a task (a REMOVE's fence waits on it) */
    uint32_t n_lanes;
    struct lane *lanes; /* one per device */
    pthread_t compile_thread;
    pthread_cond_t compile_wake;
    struct tided_task *compile_head, *compile_tail; /* to plan on the compile thread (mutex) */
    struct tided_task *done_head, *done_tail;       /* ran (mutex) */
    bool stop;                                      /* device threads: drain, then exit (mutex) */
    bool stop_compiles;                             /* compile thread: drain, then exit (mutex) */
    atomic_bool refuse_compiles;
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

void tided__free_strings(char **v, uint32_t n)
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
    free(t->compile.spec_path);
    free(t->compile.info.data);
    free(t->compile.loss);
    tided_tensor_specs_free(t->compile.feeds, t->compile.n_feeds);
    tided_tensor_specs_free(t->compile.fetches, t->compile.n_fetches);
    tided__free_strings(t->compile.user_variables, t->compile.n_user_variables);
    tided_tensor_specs_free(t->compile.streamed, t->compile.n_streamed);
    tided_plan_report_free(t->compile.plan);
    free(t->compile.plan_svg);
    free(t->compile.packed.data);
    if (t->compile.checkpoint)
        tide__v1__read_variables_response__free_unpacked(t->compile.checkpoint, NULL);
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
    tided__free_strings(t->read.names, t->read.n_names);
    free(t->read.packed.data);
}

/* What a CHECKPOINT task owns. */
static void free_checkpoint(struct tided_task *t)
{
    free(t->checkpoint.dir);
    free(t->checkpoint.path);
}

/* What a PERSIST task owns. */
static void free_persist(struct tided_task *t)
{
    free(t->persist.dir);
    free(t->persist.name);
    free(t->persist.data.data);
}

/* What a WRITE_VARIABLE task owns. */
static void free_write(struct tided_task *t)
{
    if (t->write.chunk)
        tide__v1__variable_chunk__free_unpacked(t->write.chunk, NULL);
}

/* What a REMOVE task owns. */
static void free_remove(struct tided_task *t)
{
    tided__free_strings(t->remove.dirs, t->remove.n_dirs);
    tided__free_strings(t->remove.ids, t->remove.n_dirs);
    free(t->remove.fence);
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

enum tide_status tided__pack(const ProtobufCMessage *m, ProtobufCBinaryData *out,
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
    enum tide_status st = tided_spec_prepare(t->compile.spec, &t->compile.limits, t->compile.budget,
                                             setup, graph, &t->compile.feeds, &t->compile.n_feeds,
                                             compile ? &t->compile.user_variables : NULL,
                                             &t->compile.n_user_variables, &t->err);
    setup->policy.host_budget_bytes = t->compile.host_budget;
    return st;
}

/* The session's cancellation hook: Cancel, or the daemon draining. */
static bool compile_cancelled(void *context)
{
    const struct tided_task *t = context;
    return atomic_load(&t->cancel) || (t->refusing && atomic_load(t->refusing));
}

/* Why a compilation stopped early: UNAVAILABLE while draining, else CANCELLED. */
static enum tide_status compile_stopped(struct tided_task *t)
{
    tide_error_clear(&t->err);
    if (t->refusing && atomic_load(t->refusing))
        return tide_error_set(&t->err, TIDE_UNAVAILABLE, "tided is shutting down");
    return tide_error_set(&t->err, TIDE_CANCELLED, "the compilation was cancelled");
}

/*
 * Where the JobSpec comes from: a parked job's is read back from its
 * spec.pb; a new job's is saved first, so that a crash while compiling
 * still leaves it.
 */
static enum tide_status load_or_save_spec(struct tided_task *t)
{
    struct tide_error *err = &t->err;
    enum tide_status st;
    if (t->compile.spec_path) {
        struct tide_error e = {0};
        t->compile.request = tided_store_read_message(t->compile.spec_path,
                                                      &tide__v1__job_spec__descriptor, &e);
        if (!t->compile.request)
            return tide_error_set(err, e.status == TIDE_NOMEM ? TIDE_NOMEM : TIDE_INTERNAL,
                                  "cannot read the job's spec back: %s", e.message);
        t->compile.spec = (const Tide__V1__JobSpec *)t->compile.request;
        return TIDE_OK;
    }
    if (compile_cancelled(t)) /* nothing to save for a job already cancelled */
        return compile_stopped(t);
    st = tided_store_mkdirs(t->compile.dir, err);
    if (st == TIDE_OK)
        st = tided_store_write_message(t->compile.dir, "spec.pb", &t->compile.spec->base, NULL,
                                       err);
    if (st == TIDE_OK)
        st = tided_store_write(t->compile.dir, "info.pb", t->compile.info.data,
                               t->compile.info.len, err);
    if (st != TIDE_OK) {
        tide_error_prefix(err, "cannot save the job");
        return TIDE_INTERNAL;
    }
    return TIDE_OK;
}

/*
 * COMPILE, first half (compile thread): everything that does not touch the
 * device — the spec saved, the graph imported, the checkpoint read, a
 * plan-only session (autodiff, the memory plan), the fetches, the report
 * and the picture. On success the task goes on to run_compile_instantiate.
 */
static void run_compile_plan(struct tided_task *t)
{
    struct tide_error *err = &t->err;
    enum tide_status st = load_or_save_spec(t);
    if (st != TIDE_OK) {
        t->status = st;
        return;
    }
    const Tide__V1__JobSpec *spec = t->compile.spec;

    struct tided_spec_setup setup;
    struct tide_graph *g = NULL;
    st = prepare(t, &setup, &g);
    if (st == TIDE_OK && compile_cancelled(t))
        st = compile_stopped(t);
    if (st == TIDE_OK && t->compile.restore_path) {
        struct tide_error e = {0};
        t->compile.checkpoint = tided_store_read_checkpoint(t->compile.restore_path, &e);
        if (!t->compile.checkpoint)
            st = tide_error_set(err, e.status == TIDE_NOT_FOUND ? TIDE_NOT_FOUND : TIDE_INTERNAL,
                                "resume_from: %s", e.message);
    }
    if (st != TIDE_OK) {
        tide_graph_free(g);
        t->status = st;
        return;
    }

    struct tide_session_options o = tided_spec_session_options(
        spec, &setup, t->compile.backend, t->compile.budget, &t->compile.limits);
    o.plan_only = true; /* the executor is the device thread's: run_compile_instantiate */
    o.cancelled = compile_cancelled;
    o.cancel_context = t;
    st = tide_session_new_graph(g, &o, &t->session, err); /* takes g, also on failure */
    if (st == TIDE_CANCELLED) {
        t->status = compile_stopped(t);
        return;
    }
    if (st != TIDE_OK) {
        /* A name the spec got wrong is a bad argument, not a missing resource. */
        t->status = st == TIDE_NOT_FOUND ? TIDE_INVALID : st;
        return;
    }
    const struct tide_graph *sg = tide_session_graph(t->session);

    st = tided_spec_fetches(spec, sg, &t->compile.fetches, &t->compile.n_fetches, err);
    if (st == TIDE_OK)
        st = tided_spec_streamed(spec, sg, &t->compile.streamed, &t->compile.n_streamed, err);
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
    if (st == TIDE_OK && !t->compile.spec_path)
        draw_plan(t, spec->name);
    if (st != TIDE_OK) {
        tide_session_free(t->session);
        t->session = NULL;
    }
    t->status = st;
}

/*
 * COMPILE, second half (device thread, in order with the other tasks): the
 * executor (the arena, the Variables initialised), then resume_from's
 * Variables and step count. A compilation cancelled meanwhile stops here,
 * before it takes any device memory.
 */
static void run_compile_instantiate(struct tided_task *t)
{
    struct tide_error *err = &t->err;
    enum tide_status st = compile_cancelled(t) ? compile_stopped(t) : TIDE_OK;
    if (st == TIDE_OK)
        st = tide_session_instantiate(t->session, err);
    const Tide__V1__ReadVariablesResponse *ck = t->compile.checkpoint;
    if (st == TIDE_OK && ck) {
        st = write_variables(t->session, ck, &t->compile.restored_variables, err);
        /* The step count continues from the checkpoint's, for Adam's bias correction. */
        if (st == TIDE_OK)
            st = tide_session_set_step(t->session, ck->step, err);
        if (st == TIDE_OK)
            t->compile.restored_step = ck->step;
    }
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
    o.cancelled = compile_cancelled;
    o.cancel_context = t;
    struct tide_session *s = NULL;
    st = tide_session_plan_graph(g, &o, &s, err);
    if (st == TIDE_CANCELLED) {
        t->status = compile_stopped(t);
        return;
    }
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
    t->status = tided__pack(&report->base, &t->compile.packed, err);
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

/* Compile thread: the planning half; device thread: the instantiating half. */
static void run_compile_task(struct tided_worker *w, struct tided_task *t)
{
    t->refusing = &w->refuse_compiles;
    if (!t->past_compile_thread) {
        if (!refused(w, t))
            run_compile_plan(t);
    } else {
        run_compile_instantiate(t);
    }
}

/* Compile thread only: a dry run never touches the device. */
static void run_plan_task(struct tided_worker *w, struct tided_task *t)
{
    t->refusing = &w->refuse_compiles;
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
        tided__task_read_session(t);
    else
        tided__task_read_checkpoint(t);
}

static void run_checkpoint_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    tided__task_checkpoint(t);
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

/* One chunk of a streamed Variable, straight into its home (the main thread checked its range). */
static void run_write_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    const Tide__V1__VariableChunk *c = t->write.chunk;
    t->status = tide_session_write_variable_range(t->session, c->name, c->offset, c->data.data,
                                                  c->data.len, &t->err);
}

/* Deletes the directories in order, up to the first that cannot be deleted. */
static void run_remove_task(struct tided_worker *w, struct tided_task *t)
{
    (void)w;
    t->status = TIDE_OK;
    for (uint32_t i = 0; i < t->remove.n_dirs && t->status == TIDE_OK; i++) {
        uint64_t bytes = 0;
        t->status = tided_store_remove_dir(t->remove.dirs[i], &bytes, &t->err);
        t->remove.bytes += bytes;
        if (t->status == TIDE_OK)
            t->remove.n_removed = i + 1;
    }
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
    [TIDED_TASK_REMOVE] = {run_remove_task, free_remove},
    [TIDED_TASK_WRITE_VARIABLE] = {run_write_task, free_write},
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

/*
 * Whether a task goes to the compile thread: a PLAN, a COMPILE still to
 * plan, or a REMOVE still to pass it (so that no compilation submitted
 * before it writes into a directory it has deleted).
 */
static bool on_compile_thread(const struct tided_task *t)
{
    return t->kind == TIDED_TASK_PLAN ||
           ((t->kind == TIDED_TASK_COMPILE || t->kind == TIDED_TASK_REMOVE) &&
            !t->past_compile_thread);
}

static void push(struct tided_task **head, struct tided_task **tail, struct tided_task *t)
{
    t->next = NULL;
    if (*tail)
        (*tail)->next = t;
    else
        *head = t;
    *tail = t;
}

static struct tided_task *pop(struct tided_task **head, struct tided_task **tail)
{
    struct tided_task *t = *head;
    if (t) {
        *head = t->next;
        if (!*head)
            *tail = NULL;
        t->next = NULL;
    }
    return t;
}

/*
 * With the mutex held: the lane of a task's device. A device past the
 * lanes (a job of an earlier run on more devices: its files only) goes to
 * the first.
 */
static struct lane *lane_of(struct tided_worker *w, const struct tided_task *t)
{
    return &w->lanes[t->device < w->n_lanes ? t->device : 0];
}

/* With the mutex held: queues t on its device's thread. */
static void push_lane(struct tided_worker *w, struct tided_task *t)
{
    struct lane *l = lane_of(w, t);
    push(&l->head, &l->tail, t);
    l->submitted++;
    pthread_cond_signal(&l->wake);
}

/*
 * With the mutex held, on a device thread: waits until every other lane
 * has run the tasks submitted before a REMOVE (its fence).
 */
static void wait_fence(struct tided_worker *w, const struct lane *self, const struct tided_task *t)
{
    if (!t->remove.fence)
        return;
    for (uint32_t i = 0; i < w->n_lanes; i++) {
        const struct lane *l = &w->lanes[i];
        while (l != self && l->completed < t->remove.fence[i])
            pthread_cond_wait(&w->progress, &w->mutex);
    }
}

/* With the mutex held: hands a task back to the main thread. */
static void hand_back(struct tided_worker *w, struct tided_task *t)
{
    push(&w->done_head, &w->done_tail, t);
    ev_async_send(w->loop, &w->async);
}

/* A device thread: every task of its device that touches a session, in submission order. */
static void *worker_main(void *arg)
{
    struct lane *l = arg;
    struct tided_worker *w = l->worker;
    pthread_mutex_lock(&w->mutex);
    for (;;) {
        while (!l->head && !w->stop)
            pthread_cond_wait(&l->wake, &w->mutex);
        struct tided_task *t = pop(&l->head, &l->tail);
        if (!t)
            break; /* stop, and nothing left to run */
        if (t->kind == TIDED_TASK_REMOVE)
            wait_fence(w, l, t);
        atomic_store(&l->busy_since_us, monotonic_us());
        pthread_mutex_unlock(&w->mutex);

        run(w, t);

        pthread_mutex_lock(&w->mutex);
        atomic_store(&l->busy_since_us, 0);
        l->completed++;
        pthread_cond_broadcast(&w->progress);
        hand_back(w, t);
    }
    pthread_mutex_unlock(&w->mutex);
    return NULL;
}

/*
 * The compile thread: PLAN tasks, and the planning half of COMPILE tasks,
 * which then join the device thread's queue behind whatever was submitted
 * meanwhile (so a FREE submitted before them has run when they instantiate).
 * A REMOVE only passes through, on to the device thread.
 */
static void *compile_main(void *arg)
{
    struct tided_worker *w = arg;
    pthread_mutex_lock(&w->mutex);
    for (;;) {
        while (!w->compile_head && !w->stop_compiles)
            pthread_cond_wait(&w->compile_wake, &w->mutex);
        struct tided_task *t = pop(&w->compile_head, &w->compile_tail);
        if (!t)
            break;
        pthread_mutex_unlock(&w->mutex);

        if (t->kind != TIDED_TASK_REMOVE)
            run(w, t);
        t->past_compile_thread = t->kind == TIDED_TASK_REMOVE || (t->kind == TIDED_TASK_COMPILE &&
                                                                  t->status == TIDE_OK);

        pthread_mutex_lock(&w->mutex);
        if (t->past_compile_thread) {
            /* Counted when submitted (the fence of a REMOVE behind it waits for it). */
            struct lane *l = lane_of(w, t);
            push(&l->head, &l->tail, t);
            pthread_cond_signal(&l->wake);
        } else {
            if (t->kind == TIDED_TASK_COMPILE) {
                /* Counted on its lane when submitted, it ends here: no fence waits for it. */
                lane_of(w, t)->completed++;
                pthread_cond_broadcast(&w->progress);
            }
            hand_back(w, t);
        }
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

static void destroy(struct tided_worker *w)
{
    ev_async_stop(w->loop, &w->async);
    pthread_cond_destroy(&w->compile_wake);
    for (uint32_t i = 0; i < w->n_lanes; i++)
        pthread_cond_destroy(&w->lanes[i].wake);
    pthread_cond_destroy(&w->progress);
    pthread_mutex_destroy(&w->mutex);
    free(w->lanes);
    free(w);
}

/* Stops and joins the compile thread, then the started device threads (which it feeds). */
static void stop_threads(struct tided_worker *w)
{
    pthread_mutex_lock(&w->mutex);
    w->stop_compiles = true;
    pthread_cond_signal(&w->compile_wake);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->compile_thread, NULL);
    pthread_mutex_lock(&w->mutex);
    w->stop = true;
    for (uint32_t i = 0; i < w->n_lanes; i++)
        pthread_cond_signal(&w->lanes[i].wake);
    pthread_mutex_unlock(&w->mutex);
    for (uint32_t i = 0; i < w->n_lanes; i++) {
        if (w->lanes[i].started)
            pthread_join(w->lanes[i].thread, NULL);
    }
}

struct tided_worker *tided_worker_new(struct ev_loop *loop, uint32_t n_devices,
                                      tided_task_done_fn done, void *context, char *error,
                                      size_t error_size)
{
    struct tided_worker *w = calloc(1, sizeof(*w));
    if (w)
        w->lanes = calloc(n_devices ? n_devices : 1, sizeof(*w->lanes));
    if (!w || !w->lanes) {
        free(w);
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    w->n_lanes = n_devices ? n_devices : 1;
    pthread_mutex_init(&w->mutex, NULL);
    pthread_cond_init(&w->progress, NULL);
    for (uint32_t i = 0; i < w->n_lanes; i++) {
        w->lanes[i].worker = w;
        w->lanes[i].device = i;
        pthread_cond_init(&w->lanes[i].wake, NULL);
    }
    pthread_cond_init(&w->compile_wake, NULL);
    w->loop = loop;
    w->done_fn = done;
    w->context = context;
    ev_async_init(&w->async, async_cb);
    w->async.data = w;
    ev_set_priority(&w->async, EV_MAXPRI);
    ev_async_start(loop, &w->async); /* before the threads exist */
    int rc = pthread_create(&w->compile_thread, NULL, compile_main, w);
    if (rc != 0) {
        snprintf(error, error_size, "cannot start the compile thread: %s", strerror(rc));
        destroy(w);
        return NULL;
    }
    for (uint32_t i = 0; i < w->n_lanes; i++) {
        rc = pthread_create(&w->lanes[i].thread, NULL, worker_main, &w->lanes[i]);
        if (rc != 0) {
            snprintf(error, error_size, "cannot start the thread of device %u: %s", i,
                     strerror(rc));
            stop_threads(w);
            destroy(w);
            return NULL;
        }
        w->lanes[i].started = true;
    }
    w->started = true;
    return w;
}

void tided_worker_submit(struct tided_worker *w, struct tided_task *t)
{
    pthread_mutex_lock(&w->mutex);
    if (t->kind == TIDED_TASK_REMOVE && !t->past_compile_thread && w->n_lanes > 1) {
        /* Its fence: the tasks every lane has been given so far (NULL: out of memory, none). */
        t->remove.fence = calloc(w->n_lanes, sizeof(*t->remove.fence));
        for (uint32_t i = 0; t->remove.fence && i < w->n_lanes; i++)
            t->remove.fence[i] = w->lanes[i].submitted;
        if (!t->remove.fence)
            TIDE_LOG_WARN("out of memory for a removal's fence; it waits for one device only");
        t->device = 0;
    }
    if (on_compile_thread(t)) {
        /* A COMPILE or REMOVE counts on its lane now: a later REMOVE's fence waits for it. */
        if (t->kind != TIDED_TASK_PLAN)
            lane_of(w, t)->submitted++;
        push(&w->compile_head, &w->compile_tail, t);
        pthread_cond_signal(&w->compile_wake);
    } else {
        push_lane(w, t);
    }
    pthread_mutex_unlock(&w->mutex);
}

void tided_worker_refuse_compiles(struct tided_worker *w)
{
    atomic_store(&w->refuse_compiles, true);
}

void tided_task_cancel(struct tided_task *t)
{
    if (t)
        atomic_store(&t->cancel, true);
}

bool tided_worker_healthy(struct tided_worker *w, int64_t stall_us)
{
    int64_t now = monotonic_us();
    for (uint32_t i = 0; i < w->n_lanes; i++) {
        int64_t since = atomic_load(&w->lanes[i].busy_since_us);
        if (since != 0 && now - since >= stall_us)
            return false;
    }
    return true;
}

void tided_worker_free(struct tided_worker *w)
{
    if (!w)
        return;
    stop_threads(w);
    deliver(w);
    destroy(w);
}
