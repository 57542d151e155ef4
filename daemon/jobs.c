/* SPDX-License-Identifier: MIT */
/*
 * jobs.c: the job manager: the state machine, admission, watchers and the
 * table that routes each worker result to its RPC file (the RPCs themselves
 * are in rpc-<verb>.c, job records in store.c; jobs-impl.h lists the files).
 *
 * DESIGN
 *
 * Threads: everything here runs on the main thread — the RPC handlers (from
 * server.c's completion events), the worker's results (tided_jobs_task_done)
 * and the shutdown steps (from main.c's signal watchers). No lock is taken:
 * the worker sees a job only through the inputs copied or lent into a task,
 * and the job keeps what it lent (the session, the fetch specs, the loss
 * name) unchanged until the task comes back.
 *
 * Per job, the main thread keeps at most one step with the worker and one
 * batch staged behind it; it posts the Train stream's next RECV_MESSAGE only
 * when the staging slot is free, and hands the worker the next step only
 * when fewer than two StepResults wait to be written to the client. So a
 * job holds at most two batches and two results in memory however fast the
 * client sends or slowly it reads, and gRPC's flow control pushes back on
 * the client.
 *
 * Calls held across worker tasks (Submit waiting for its compilation, Plan,
 * ReadVariables, Checkpoint) are owned by their task: if the client goes
 * away, the call's done callback clears task->call, and the result is
 * dropped when it comes. Train and Watch calls are owned by their job and
 * watcher the same way.
 *
 * Files: <state-dir>/jobs/<id>/spec.pb at submission, info.pb (a JobInfo
 * without the plan) at each state change and checkpoint, and a checkpoint on
 * request, every CheckpointPolicy.every_steps steps and at shutdown: it is
 * written as checkpoint-<step>.pb, checkpoint.pb becomes the same file (the
 * one resume_from and ReadVariables read), and the oldest checkpoint-*.pb
 * beyond CheckpointPolicy.keep are deleted. All are written by the worker,
 * in order with the steps.
 */
#include "daemon/jobs.h"

#include <ctype.h>
#include <stdarg.h>
#include <sys/random.h>
#include <time.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/devices.h"
#include "daemon/jobs-impl.h"
#include "daemon/store.h"

const char *tided__job_state_name(Tide__V1__JobState s)
{
    switch (s) {
    case STATE(SUBMITTED):
        return "SUBMITTED";
    case STATE(COMPILING):
        return "COMPILING";
    case STATE(READY):
        return "READY";
    case STATE(RUNNING):
        return "RUNNING";
    case STATE(DONE):
        return "DONE";
    case STATE(FAILED):
        return "FAILED";
    case STATE(CANCELLED):
        return "CANCELLED";
    case STATE(PARKED):
        return "PARKED";
    case STATE(QUEUED):
        return "QUEUED";
    default:
        return "UNSPECIFIED";
    }
}

bool tided__job_terminal(const struct job *j)
{
    return j->state == STATE(DONE) || j->state == STATE(FAILED) || j->state == STATE(CANCELLED);
}

/* Ready or running, with a session: the job can step, read and checkpoint. */
bool tided__job_live(const struct job *j)
{
    return j->session && (j->state == STATE(READY) || j->state == STATE(RUNNING));
}

/* Copies a wire string for quoting: printable ASCII only, cut at 64 bytes. */
const char *tided__shown(const char *s, char *buf, size_t size)
{
    size_t n = 0;
    if (!s)
        s = "";
    for (; *s && n < 64 && n + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        buf[n++] = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
    }
    if (*s && n + 4 <= size) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

int64_t tided_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void tided__job_info(const struct job *j, Tide__V1__JobInfo *info, bool with_plan)
{
    tide__v1__job_info__init(info);
    info->id = (char *)j->id;
    info->name = j->name ? j->name : (char *)"";
    info->owner_uid = j->owner;
    info->state = j->state;
    info->steps = j->steps;
    info->last_loss = j->last_loss;
    info->device_budget_bytes = j->budget;
    info->device_high_water_bytes = j->high_water;
    info->host_bytes = j->host_bytes;
    info->h2d_bytes_total = j->h2d_total;
    info->d2h_bytes_total = j->d2h_total;
    info->steps_per_second = j->state == STATE(RUNNING) ? j->steps_per_second : 0.0;
    info->created_us = j->created_us;
    info->updated_us = j->updated_us;
    info->message = (char *)j->message;
    info->last_checkpoint_step = j->last_checkpoint_step;
    info->plan = with_plan ? j->plan : NULL;
    info->queue_position = tided__queue_position(j->daemon, j);
    info->priority = j->priority;
    info->queued_us = j->queued_us;
    info->device = j->device;
}

bool tided__job_may_see(const struct tided_identity *who, const struct job *j)
{
    return tided_identity_may_see(who, j->owner);
}

bool tided__job_may_control(const struct tided_identity *who, const struct job *j)
{
    return !who->read_only && tided__job_may_see(who, j);
}

void tided__watcher_remove(struct tided_jobs *jobs, struct watcher *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        jobs->watchers = w->next;
    if (w->next)
        w->next->prev = w->prev;
    free(w);
}

/* Sends an event about job to every watcher that may see it. */
void tided__job_emit(struct tided_daemon *d, struct job *j, Tide__V1__JobEvent__Kind kind,
                     const Tide__V1__StepResult *step, const char *message)
{
    struct tided_jobs *jobs = d->jobs;
    Tide__V1__JobInfo info;
    tided__job_info(j, &info, false);
    Tide__V1__JobEvent ev = TIDE__V1__JOB_EVENT__INIT;
    ev.kind = kind;
    ev.job = &info;
    ev.step = (Tide__V1__StepResult *)step;
    ev.message = (char *)(message ? message : "");
    ev.time_us = tided_now_us();
    struct watcher *next;
    for (struct watcher *w = jobs->watchers; w; w = next) {
        next = w->next;
        if (w->job ? w->job != j : !tided__job_may_see(&w->who, j))
            continue;
        if (kind == TIDE__V1__JOB_EVENT__KIND__STEP && step && w->stride > 1 &&
            step->step % w->stride != 0)
            continue;
        /* STEP events of one job replace each other while the client is behind. */
        tided_call_write(w->call, &ev.base, kind == TIDE__V1__JOB_EVENT__KIND__STEP ? j : NULL);
        if (tided_call_pending_writes(w->call) > WATCH_QUEUE_MAX) {
            tided_call_abort(w->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                             "watch: the client reads events too slowly");
            tided_call_set_owner(w->call, NULL, NULL);
            tided__watcher_remove(jobs, w);
            continue;
        }
        if (w->job && kind == TIDE__V1__JOB_EVENT__KIND__STATE && tided__job_terminal(j)) {
            tided_call_finish(w->call);
            tided_call_set_owner(w->call, NULL, NULL);
            tided__watcher_remove(jobs, w);
        }
    }
}

void tided__task_submit(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    if (j) {
        j->tasks++;
        t->device = j->device; /* a job's tasks keep their order on its device's thread */
    }
    d->jobs->tasks++;
    tided_worker_submit(d->worker, t);
}

void tided__job_set_state(struct tided_daemon *d, struct job *j, Tide__V1__JobState state,
                          const char *format, ...)
{
    Tide__V1__JobState old = j->state;
    if (format) {
        va_list args;
        va_start(args, format);
        vsnprintf(j->message, sizeof(j->message), format, args);
        va_end(args);
    }
    j->state = state;
    j->updated_us = tided_now_us();
    if (state == STATE(READY))
        j->idle_since_us = j->updated_us;
    if (tided__job_terminal(j)) {
        tided__trace_job_ended(j);
        tided__writes_job_ended(j);
        tided__queue_forget(j);
    }
    TIDE_LOG_INFO("job %s: %s -> %s%s%s", j->id, tided__job_state_name(old),
                  tided__job_state_name(state), j->message[0] && format ? ": " : "",
                  format ? j->message : "");
    tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__STATE, NULL, format ? j->message : NULL);
    /* READY <-> RUNNING flips are not worth an fsync; everything else is. */
    bool flip = (old == STATE(READY) && state == STATE(RUNNING)) ||
                (old == STATE(RUNNING) && state == STATE(READY));
    if (!flip)
        tided__store_persist_job(d, j);
    tided_daemon_notify_status(d);
    if (!flip)
        tided__queue_admit(d); /* it may have left the queue or given room back */
}

static void release_reservation(struct tided_daemon *d, struct job *j)
{
    if (j->reserved) {
        d->jobs->reserved -= j->budget;
        tided_devices_release(d->devices, j->device, j->budget);
        j->reserved = false;
        tided__queue_admit(d);
    }
}

/*
 * Hands the session back: optionally a checkpoint first, then FREE, both
 * queued behind the job's step in flight. The budget is released at once:
 * a compilation submitted from now on runs after the FREE.
 */
void tided__job_release_session(struct tided_daemon *d, struct job *j, bool checkpoint)
{
    if (!j->session) {
        release_reservation(d, j);
        return;
    }
    if (checkpoint) {
        struct tided_task *t = tided_task_new(TIDED_TASK_CHECKPOINT, j);
        if (t && (t->checkpoint.dir = strdup(j->dir))) {
            t->session = j->session;
            t->checkpoint.step = j->dispatched;
            t->checkpoint.keep = j->keep_checkpoints;
            t->checkpoint.final = true;
            tided__task_submit(d, t);
            j->final_checkpoint_queued = true;
        } else {
            tided_task_free(t);
            TIDE_LOG_ERROR("job %s: out of memory for its final checkpoint", j->id);
        }
    }
    struct tided_task *f = tided_task_new(TIDED_TASK_FREE, j);
    if (!f) {
        TIDE_LOG_ERROR("job %s: out of memory freeing its session; it leaks", j->id);
    } else {
        f->session = j->session;
        tided__task_submit(d, f);
    }
    j->session = NULL;
    release_reservation(d, j);
}

void tided__batch_free(struct batch *b)
{
    if (!b)
        return;
    if (b->message)
        tide__v1__train_request__free_unpacked(b->message, NULL);
    free(b->names);
    free(b->data);
    free(b->bytes);
    free(b);
}

/* Ends the job's Train stream (if any) with a status and forgets it. */
void tided__job_detach_train(struct job *j, grpc_status_code code, const char *message)
{
    tided__batch_free(j->staged);
    j->staged = NULL;
    j->reading = false;
    j->half_closed = false;
    j->finishing = false;
    if (!j->train)
        return;
    struct tided_call *c = j->train;
    j->train = NULL;
    tided_call_set_owner(c, NULL, NULL);
    if (code == GRPC_STATUS_OK)
        tided_call_finish(c);
    else
        tided_call_fail(c, code, "%s", message);
}

static void check_quiet(struct tided_daemon *d)
{
    struct tided_jobs *jobs = d->jobs;
    if (d->phase == TIDED_DRAINING && jobs->tasks == 0 && !jobs->quiet_reported) {
        jobs->quiet_reported = true;
        tided_daemon_jobs_quiet(d);
    }
}

void tided__job_fail(struct tided_daemon *d, struct job *j, enum tide_status status,
                     const char *message)
{
    char text[600];
    snprintf(text, sizeof(text), "%s", message && message[0] ? message : tide_strerror(status));
    tided__job_detach_train(j, tided_grpc_code(status), text);
    tided__job_release_session(d, j, false);
    tided__job_set_state(d, j, STATE(FAILED), "%s", text);
}

/* SIGTERM: a final checkpoint and DONE, or FAILED without one (jobs-impl.h). */
void tided__job_stop_for_shutdown(struct tided_daemon *d, struct job *j)
{
    char text[256];
    if (j->streamed_incomplete > 0) {
        /* A checkpoint of half its values would resume as if they were whole: none. */
        tided__job_fail(d, j, TIDE_UNAVAILABLE,
                        "tided shut down before the job's streamed values were complete; submit "
                        "it again");
        return;
    }
    snprintf(text, sizeof(text),
             "tided is shutting down; job %s was checkpointed at step %" PRIu64
             " (resume it with resume_from)",
             j->id, j->dispatched);
    tided__job_detach_train(j, GRPC_STATUS_UNAVAILABLE, text);
    tided__job_release_session(d, j, true);
    tided__job_set_state(d, j, STATE(DONE),
                         "stopped by tided's shutdown at step %" PRIu64
                         "; resume it with resume_from",
                         j->dispatched);
}

struct job *tided__job_find(struct tided_jobs *jobs, const char *id)
{
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        if (strcmp(jobs->jobs[i]->id, id) == 0)
            return jobs->jobs[i];
    }
    return NULL;
}

bool tided__job_id_valid(const char *id)
{
    if (strlen(id) != 18 || id[0] != 'j' || id[1] != '-')
        return false;
    for (int i = 2; i < 18; i++) {
        if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i]))
            return false;
    }
    return true;
}

struct job *tided__job_add(struct tided_jobs *jobs, const char *id)
{
    if (jobs->n_jobs == jobs->cap_jobs) {
        size_t cap = jobs->cap_jobs ? jobs->cap_jobs * 2 : 16;
        struct job **grown = realloc(jobs->jobs, cap * sizeof(*grown));
        if (!grown)
            return NULL;
        jobs->jobs = grown;
        jobs->cap_jobs = cap;
    }
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->daemon = jobs->daemon;
    snprintf(j->id, sizeof(j->id), "%s", id);
    j->dir = tided_path_join(jobs->jobs_dir, id);
    if (!j->dir) {
        free(j);
        return NULL;
    }
    jobs->jobs[jobs->n_jobs++] = j;
    return j;
}

void tided__job_free(struct job *j)
{
    /* The worker has been joined: this thread is the only one left to free a session. */
    tide_session_free(j->session);
    tided__batch_free(j->staged);
    tided__queue_forget(j);
    free(j->name);
    free(j->dir);
    free(j->loss);
    tided_tensor_specs_free(j->feeds, j->n_feeds);
    tided_tensor_specs_free(j->fetches, j->n_fetches);
    tided_tensor_specs_free(j->streamed, j->n_streamed);
    free(j->streamed_written);
    if (j->user_variables) {
        for (uint32_t i = 0; i < j->n_user_variables; i++)
            free(j->user_variables[i]);
        free(j->user_variables);
    }
    tided_plan_report_free(j->plan);
    tided_metrics_blob_release(j->trace);
    tided_metrics_blob_release(j->plan_svg);
    tided_job_metrics_free(j->metrics);
    free(j);
}

int tided__job_new_id(struct tided_jobs *jobs, char id[24])
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t r;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
            return -1;
        snprintf(id, 24, "j-%016" PRIx64, r);
        if (!tided__job_find(jobs, id))
            return 0;
    }
    return -1;
}

static int compare_created(const void *a, const void *b)
{
    const struct job *x = *(struct job *const *)a, *y = *(struct job *const *)b;
    return x->created_us < y->created_us ? -1 : x->created_us > y->created_us;
}

struct tided_jobs *tided_jobs_new(struct tided_daemon *d, char *error, size_t size)
{
    struct tided_jobs *jobs = calloc(1, sizeof(*jobs));
    if (!jobs || !(jobs->jobs_dir = tided_path_join(d->config.state_dir, "jobs"))) {
        free(jobs);
        snprintf(error, size, "out of memory");
        return NULL;
    }
    jobs->daemon = d;
    struct tide_error err = {0};
    if (tided_store_mkdirs(jobs->jobs_dir, &err) != TIDE_OK) {
        snprintf(error, size, "state-dir: %s", err.message);
        free(jobs->jobs_dir);
        free(jobs);
        return NULL;
    }
    /* Before reading any job: a second daemon must not mark the first's jobs FAILED. */
    jobs->lock_fd = tided_store_lock(d->config.state_dir, error, size);
    if (jobs->lock_fd < 0) {
        free(jobs->jobs_dir);
        free(jobs);
        return NULL;
    }
    DIR *dir = opendir(jobs->jobs_dir);
    if (!dir) {
        snprintf(error, size, "state-dir: cannot list %s: %s", jobs->jobs_dir, strerror(errno));
        close(jobs->lock_fd);
        free(jobs->jobs_dir);
        free(jobs);
        return NULL;
    }
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (tided__job_id_valid(e->d_name))
            tided__store_load_job(jobs, e->d_name);
    }
    closedir(dir);
    if (jobs->n_jobs > 1)
        qsort(jobs->jobs, jobs->n_jobs, sizeof(*jobs->jobs), compare_created);
    if (jobs->n_jobs)
        TIDE_LOG_INFO("state: %zu job(s) of earlier runs in %s", jobs->n_jobs, jobs->jobs_dir);
    return jobs;
}

void tided_jobs_free(struct tided_jobs *jobs)
{
    if (!jobs)
        return;
    while (jobs->watchers)
        tided__watcher_remove(jobs, jobs->watchers);
    for (size_t i = 0; i < jobs->n_jobs; i++)
        tided__job_free(jobs->jobs[i]);
    free(jobs->jobs);
    free(jobs->jobs_dir);
    free(jobs->usage);
    if (jobs->lock_fd >= 0)
        close(jobs->lock_fd);
    free(jobs);
}

/* Finds the job a call names and checks the caller may act on it; fails the call if not. */
struct job *tided__job_for_call(struct tided_daemon *d, struct tided_call *call, const char *id,
                                bool control)
{
    char buf[80];
    const struct tided_identity *who = tided_call_identity(call);
    if (!id || !id[0]) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "job_id: empty");
        return NULL;
    }
    struct job *j = tided__job_find(d->jobs, id);
    if (!j || j->removing) {
        tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "no job \"%s\"",
                        tided__shown(id, buf, sizeof(buf)));
        return NULL;
    }
    if (!tided__job_may_see(who, j)) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "job %s belongs to uid %u; %s may not access it", j->id, j->owner,
                        who->peer);
        return NULL;
    }
    bool controls = tided__job_may_control(who, j);
    if (control && !controls) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
        return NULL;
    }
    if (controls)
        j->contact_us = tided_now_us(); /* someone who may train it is still about */
    return j;
}

/*
 * The call waiting for t ended before its answer. A submission's client that
 * leaves while its job compiles (it disconnected, was interrupted, or its
 * deadline passed) never learns the job's id and was told the submission
 * failed: the job is cancelled, rather than left READY with its budget until
 * idle-timeout parks it.
 */
static void task_call_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call;
    struct tided_task *t = owner;
    t->call = NULL;
    struct job *j = t->job;
    if (cancelled && t->kind == TIDED_TASK_COMPILE && j && j->compiling == t && !j->resuming &&
        !tided__job_terminal(j)) {
        TIDE_LOG_INFO("job %s: its submitter left while it compiled: cancelled", j->id);
        tided__job_cancel(j->daemon, j,
                          "cancelled: its submitter left before the reply (disconnected, "
                          "interrupted or past its deadline)");
    }
}

static const struct tided_call_ops task_call_ops = {.done = task_call_done};

/* Ties call to t: the result answers it, unless the client left first. */
void tided__task_wait(struct tided_task *t, struct tided_call *call)
{
    t->call = call;
    tided_call_set_owner(call, &task_call_ops, t);
}

/* Takes call back from t to answer it now. */
struct tided_call *tided__task_take_call(struct tided_task *t)
{
    struct tided_call *c = t->call;
    if (c)
        tided_call_set_owner(c, NULL, NULL);
    t->call = NULL;
    return c;
}

/*
 * Admission, step 1: the budget of a job that asks for asked bytes (0: the
 * default budget), checked against the largest job budget.
 */
enum tide_status tided__job_budget(struct tided_daemon *d, uint64_t asked, uint64_t *budget,
                                   struct tide_error *err)
{
    char a[32], b[32];
    *budget = asked ? asked : d->config.default_budget;
    uint64_t max = d->config.max_budget ? d->config.max_budget : d->device_largest_bytes;
    if (*budget > max)
        return tide_error_set(err, TIDE_DOES_NOT_FIT,
                              "memory.device_budget_bytes: %" PRIu64 " bytes (%s) is more than the "
                              "largest job budget, %" PRIu64 " bytes (%s)",
                              *budget, tided_format_bytes(*budget, a, sizeof(a)), max,
                              tided_format_bytes(max, b, sizeof(b)));
    return TIDE_OK;
}

/*
 * Admission, step 2: the device where budget fits in what it has left (the
 * sum of a device's admitted budgets never exceeds it); devices.c chooses.
 */
enum tide_status tided__jobs_admit(struct tided_daemon *d, uint64_t budget, int64_t asked,
                                   uint32_t *device, struct tide_error *err)
{
    return tided_devices_choose(d->devices, budget, asked, device, err);
}

/*
 * A job that asks for a device: the device exists (else TIDE_INVALID, naming
 * how many there are) and could ever hold budget (else TIDE_DOES_NOT_FIT), so
 * that it is refused at once rather than queued for room that never comes.
 */
enum tide_status tided__job_device_holds(struct tided_daemon *d, uint64_t budget, int64_t asked,
                                         struct tide_error *err)
{
    const struct tided_devices *devs = d->devices;
    char a[32], b[32];
    if (asked < 0)
        return TIDE_OK;
    if (asked >= (int64_t)devs->n)
        return tide_error_set(err, TIDE_INVALID,
                              "device: %" PRId64 " is not a device of this tided, which has %u "
                              "(0 to %u)",
                              asked, devs->n, devs->n - 1);
    uint64_t total = devs->devices[asked].total_bytes;
    if (budget > total)
        return tide_error_set(err, TIDE_DOES_NOT_FIT,
                              "the job's budget of %" PRIu64 " bytes (%s) is more than device %" PRId64
                              " has: %" PRIu64 " bytes (%s)",
                              budget, tided_format_bytes(budget, a, sizeof(a)), asked, total,
                              tided_format_bytes(total, b, sizeof(b)));
    return TIDE_OK;
}

void tided__job_reserve(struct tided_daemon *d, struct job *j, uint32_t device)
{
    j->device = device;
    j->reserved = true;
    d->jobs->reserved += j->budget;
    tided_devices_reserve(d->devices, device, j->budget);
}

struct tide_backend *tided__job_backend(struct tided_daemon *d, const struct job *j)
{
    return d->devices->devices[j->device].backend;
}

bool tided__host_pool_fits(struct tided_daemon *d, const struct job *j, char *text, size_t size)
{
    uint64_t pool = d->config.host_pool;
    if (!pool)
        return true;
    uint64_t used = 0;
    for (size_t i = 0; i < d->jobs->n_jobs; i++) {
        const struct job *o = d->jobs->jobs[i];
        if (o != j && o->session)
            used += o->host_bytes;
    }
    if (used + j->host_bytes <= pool)
        return true;
    char a[32];
    snprintf(text, size,
             "the plan needs %" PRIu64 " bytes of host memory; the host pool has %" PRIu64
             " of %" PRIu64 " bytes (%s) left",
             j->host_bytes, pool - (used < pool ? used : pool), pool,
             tided_format_bytes(pool, a, sizeof(a)));
    return false;
}

uint64_t tided__device_used_bytes(struct tided_daemon *d)
{
    uint64_t used = 0;
    for (size_t i = 0; i < d->jobs->n_jobs; i++) {
        const struct job *j = d->jobs->jobs[i];
        if (j->session)
            used += j->high_water;
    }
    return used;
}

uint64_t tided__device_used_bytes_on(struct tided_daemon *d, uint32_t device)
{
    uint64_t used = 0;
    for (size_t i = 0; i < d->jobs->n_jobs; i++) {
        const struct job *j = d->jobs->jobs[i];
        if (j->session && j->device == device)
            used += j->high_water;
    }
    return used;
}

/* JobInfos of the jobs who may see (all of them, or the caller's own). */
Tide__V1__JobInfo **tided__jobs_visible(struct tided_daemon *d, const struct tided_identity *who,
                                        bool all, size_t *n, Tide__V1__JobInfo **storage)
{
    struct tided_jobs *jobs = d->jobs;
    *storage = calloc(jobs->n_jobs + 1, sizeof(**storage));
    Tide__V1__JobInfo **ptrs = calloc(jobs->n_jobs + 1, sizeof(*ptrs));
    *n = 0;
    if (!*storage || !ptrs) {
        free(*storage);
        free(ptrs);
        *storage = NULL;
        return NULL;
    }
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *j = jobs->jobs[i];
        if (j->removing || (all ? !tided__job_may_see(who, j) : j->owner != who->uid))
            continue;
        tided__job_info(j, &(*storage)[*n], false);
        ptrs[*n] = &(*storage)[*n];
        (*n)++;
    }
    return ptrs;
}

static void persist_done(struct tided_daemon *d, struct tided_task *t)
{
    (void)d;
    const struct job *j = t->job;
    if (t->status != TIDE_OK)
        TIDE_LOG_ERROR("job %s: cannot save its state: %s", j ? j->id : "?", t->err.message);
}

/*
 * The main thread's side of each task kind: what its result does (NULL:
 * nothing). The worker's side is the same kind's row in worker.c's table.
 */
static void (*const task_done[TIDED_TASK_KINDS])(struct tided_daemon *d, struct tided_task *t) = {
    [TIDED_TASK_COMPILE] = tided__compile_done,
    [TIDED_TASK_PLAN] = tided__plan_done,
    [TIDED_TASK_STEP] = tided__step_done,
    [TIDED_TASK_READ_VARIABLES] = tided__read_done,
    [TIDED_TASK_CHECKPOINT] = tided__checkpoint_done,
    [TIDED_TASK_PERSIST] = persist_done,
    [TIDED_TASK_FREE] = NULL,
    [TIDED_TASK_REMOVE] = tided__remove_done,
    [TIDED_TASK_WRITE_VARIABLE] = tided__write_done,
};

void tided_jobs_task_done(void *context, struct tided_task *t)
{
    struct tided_daemon *d = context;
    struct job *j = t->job;
    if (j)
        j->tasks--;
    if (j && j->compiling == t)
        j->compiling = NULL;
    d->jobs->tasks--;
    if (task_done[t->kind])
        task_done[t->kind](d, t);
    if (t->call) /* a result nobody took: answer rather than leave the client waiting */
        tided_call_fail(tided__task_take_call(t), GRPC_STATUS_INTERNAL,
                        "tided lost this call's result");
    if (t->session && t->kind == TIDED_TASK_COMPILE) {
        /* A session no job took (cannot happen; never leak device memory over it). */
        struct tided_task *f = tided_task_new(TIDED_TASK_FREE, NULL);
        if (f) {
            f->session = t->session;
            f->device = t->device;
            tided__task_submit(d, f);
        }
        t->session = NULL;
    }
    tided_task_free(t);
    if (j && j->removed && j->tasks == 0)
        tided__job_forget(d->jobs, j);
    check_quiet(d);
}

void tided_jobs_drain(struct tided_daemon *d)
{
    struct tided_jobs *jobs = d->jobs;
    tided_worker_refuse_compiles(d->worker);
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        struct job *j = jobs->jobs[i];
        tided__batch_free(j->staged); /* only the running step finishes */
        j->staged = NULL;
        /* A parked job has its checkpoint already; it ends DONE like the live ones. */
        if ((tided__job_live(j) && !j->step_in_flight) || j->state == STATE(PARKED))
            tided__job_stop_for_shutdown(d, j);
        else if (j->state == STATE(QUEUED))
            tided__queue_stop_for_shutdown(d, j);
    }
    check_quiet(d);
}

void tided_jobs_summary(struct tided_daemon *d, char *buf, size_t size)
{
    struct tided_jobs *jobs = d->jobs;
    uint32_t running = 0, ready = 0, parked = 0, queued = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        running += jobs->jobs[i]->state == STATE(RUNNING);
        ready += jobs->jobs[i]->state == STATE(READY);
        parked += jobs->jobs[i]->state == STATE(PARKED);
        queued += jobs->jobs[i]->state == STATE(QUEUED);
    }
    char a[32], b[32];
    snprintf(buf, size,
             "%u running, %u ready, %u parked, %u queued, %zu known; %s of %s reserved on %u "
             "device(s)",
             running, ready, parked, queued, jobs->n_jobs,
             tided_format_bytes(jobs->reserved, a, sizeof(a)),
             tided_format_bytes(d->device_bytes, b, sizeof(b)), d->devices ? d->devices->n : 0);
}
