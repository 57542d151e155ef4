/* SPDX-License-Identifier: MIT */
/*
 * jobs.c: the job manager and the tide.v1.Jobs and tide.v1.Daemon RPCs.
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
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include <ev.h>

#include "common/log.h"
#include "daemon/server.h"
#include "daemon/store.h"
#include "graph/import.h"

/* A Watch whose client has this many events waiting is cut off. */
#define WATCH_QUEUE_MAX 1024
/* Results waiting to be written before a job's next step is held back. */
#define TRAIN_RESULTS_MAX 2
/*
 * Ended jobs without a checkpoint kept in memory for Get and List; older
 * ones are forgotten (with their files) as new jobs come, so that a user
 * submitting bad graphs in a loop cannot grow the daemon without bound.
 */
#define ENDED_JOBS_KEPT 1000

#define STATE(x) TIDE__V1__JOB_STATE__JOB_##x

/* A batch received and checked, in JobSpec.feeds order; the message holds the bytes. */
struct batch {
    Tide__V1__TrainRequest *message;
    bool eval;
    const char **names;
    const void **data;
    uint64_t *bytes;
};

struct job {
    struct tided_daemon *daemon; /* for call callbacks, whose owner is the job */
    char id[24];     /* "j-" + 16 hex digits */
    char *name;
    uint32_t owner;
    Tide__V1__JobState state;
    char message[512]; /* why it failed, was cancelled or stopped */
    int64_t created_us, updated_us;
    char *dir;          /* <state-dir>/jobs/<id> */

    /* ---- admission ---- */
    uint64_t budget;
    bool reserved;      /* budget counted in jobs->reserved */

    /* ---- compiled (lent to worker tasks; unchanged until freed at exit) ---- */
    struct tide_session *session; /* NULL before compilation and after release */
    char *loss;                   /* NULL: a forward-only job */
    uint32_t n_feeds;
    struct tided_tensor_spec *feeds;
    uint32_t n_fetches;
    struct tided_tensor_spec *fetches;
    uint32_t n_user_variables;
    char **user_variables;        /* NULL for jobs of a previous run */
    Tide__V1__PlanReport *plan;
    uint64_t host_bytes;
    uint64_t every_steps;         /* CheckpointPolicy.every_steps */
    uint32_t keep_checkpoints;    /* CheckpointPolicy.keep (0 means 1) */

    /* ---- progress ---- */
    uint64_t steps;      /* training steps done, those of the resumed checkpoint included */
    uint64_t dispatched; /* training steps handed to the worker (steps + the one running) */
    float last_loss;
    uint64_t high_water, h2d_total, d2h_total;
    double steps_per_second;
    int64_t last_step_us;
    bool has_checkpoint;
    uint64_t last_checkpoint_step;
    bool no_files;       /* its directory was removed: nothing more is written */

    /* ---- calls and the Train stream ---- */
    struct tided_call *train; /* the attached stream, NULL if none */
    struct batch *staged;     /* the next batch */
    bool step_in_flight;
    bool reading;             /* a RECV_MESSAGE is posted */
    bool half_closed;         /* the client said it sent its last batch */
    uint32_t tasks;           /* worker tasks in flight for this job */
};

struct watcher {
    struct tided_daemon *daemon;
    struct watcher *prev, *next;
    struct tided_call *call;
    struct job *job;  /* NULL: every job the caller may see */
    uint32_t stride;  /* STEP events when step % stride == 0 */
    struct tided_identity who;
};

struct tided_jobs {
    struct tided_daemon *daemon;
    struct job **jobs; /* in creation order */
    size_t n_jobs, cap_jobs;
    struct watcher *watchers;
    uint64_t reserved; /* sum of admitted budgets */
    uint32_t tasks;    /* worker tasks in flight, all jobs and plans */
    bool quiet_reported;
    char *jobs_dir;
};

static const char *state_name(Tide__V1__JobState s)
{
    switch (s) {
    case STATE(SUBMITTED): return "SUBMITTED";
    case STATE(COMPILING): return "COMPILING";
    case STATE(READY): return "READY";
    case STATE(RUNNING): return "RUNNING";
    case STATE(DONE): return "DONE";
    case STATE(FAILED): return "FAILED";
    case STATE(CANCELLED): return "CANCELLED";
    default: return "UNSPECIFIED";
    }
}

static bool terminal(const struct job *j)
{
    return j->state == STATE(DONE) || j->state == STATE(FAILED) || j->state == STATE(CANCELLED);
}

/* Ready or running, with a session: the job can step, read and checkpoint. */
static bool live(const struct job *j)
{
    return j->session && (j->state == STATE(READY) || j->state == STATE(RUNNING));
}

/* Copies a wire string for quoting: printable ASCII only, cut at 64 bytes. */
static const char *shown(const char *s, char *buf, size_t size)
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

/* ============================================================================
 * Job info, events, persistence
 * ========================================================================== */

static void job_info(const struct job *j, Tide__V1__JobInfo *info, bool with_plan)
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
}

static bool may_see(const struct tided_identity *who, const struct job *j)
{
    return who->admin || who->uid == j->owner;
}

static bool may_control(const struct tided_identity *who, const struct job *j)
{
    return !who->read_only && may_see(who, j);
}

static void watcher_remove(struct tided_jobs *jobs, struct watcher *w)
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
static void emit(struct tided_daemon *d, struct job *j, Tide__V1__JobEvent__Kind kind,
                 const Tide__V1__StepResult *step, const char *message)
{
    struct tided_jobs *jobs = d->jobs;
    Tide__V1__JobInfo info;
    job_info(j, &info, false);
    Tide__V1__JobEvent ev = TIDE__V1__JOB_EVENT__INIT;
    ev.kind = kind;
    ev.job = &info;
    ev.step = (Tide__V1__StepResult *)step;
    ev.message = (char *)(message ? message : "");
    ev.time_us = tided_now_us();
    struct watcher *next;
    for (struct watcher *w = jobs->watchers; w; w = next) {
        next = w->next;
        if (w->job ? w->job != j : !may_see(&w->who, j))
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
            watcher_remove(jobs, w);
            continue;
        }
        if (w->job && kind == TIDE__V1__JOB_EVENT__KIND__STATE && terminal(j)) {
            tided_call_finish(w->call);
            tided_call_set_owner(w->call, NULL, NULL);
            watcher_remove(jobs, w);
        }
    }
}

static void submit_task(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    if (j)
        j->tasks++;
    d->jobs->tasks++;
    tided_worker_submit(d->worker, t);
}

/* Writes info.pb through the worker (in order with the job's other tasks). */
static void persist(struct tided_daemon *d, struct job *j)
{
    if (j->no_files)
        return;
    Tide__V1__JobInfo info;
    job_info(j, &info, false);
    struct tided_task *t = tided_task_new(TIDED_TASK_PERSIST, j);
    if (t) {
        t->persist.dir = strdup(j->dir);
        t->persist.name = strdup("info.pb");
        size_t n = tide__v1__job_info__get_packed_size(&info);
        t->persist.data.data = malloc(n ? n : 1);
        if (t->persist.dir && t->persist.name && t->persist.data.data) {
            t->persist.data.len = tide__v1__job_info__pack(&info, t->persist.data.data);
            submit_task(d, t);
            return;
        }
        tided_task_free(t);
    }
    TIDE_LOG_ERROR("job %s: out of memory saving its state", j->id);
}

static void set_state(struct tided_daemon *d, struct job *j, Tide__V1__JobState state,
                      const char *format, ...) __attribute__((format(printf, 4, 5)));

static void set_state(struct tided_daemon *d, struct job *j, Tide__V1__JobState state,
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
    TIDE_LOG_INFO("job %s: %s -> %s%s%s", j->id, state_name(old), state_name(state),
                  j->message[0] && format ? ": " : "", format ? j->message : "");
    emit(d, j, TIDE__V1__JOB_EVENT__KIND__STATE, NULL, format ? j->message : NULL);
    /* READY <-> RUNNING flips are not worth an fsync; everything else is. */
    bool flip = (old == STATE(READY) && state == STATE(RUNNING)) ||
                (old == STATE(RUNNING) && state == STATE(READY));
    if (!flip)
        persist(d, j);
    tided_daemon_notify_status(d);
}

static void release_reservation(struct tided_daemon *d, struct job *j)
{
    if (j->reserved) {
        d->jobs->reserved -= j->budget;
        j->reserved = false;
    }
}

/*
 * Hands the session back: optionally a checkpoint first, then FREE, both
 * queued behind the job's step in flight. The budget is released at once:
 * a compilation submitted from now on runs after the FREE.
 */
static void release_session(struct tided_daemon *d, struct job *j, bool checkpoint)
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
            submit_task(d, t);
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
        submit_task(d, f);
    }
    j->session = NULL;
    release_reservation(d, j);
}

static void batch_free(struct batch *b)
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
static void detach_train(struct job *j, grpc_status_code code, const char *message)
{
    batch_free(j->staged);
    j->staged = NULL;
    j->reading = false;
    j->half_closed = false;
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

static void fail_job(struct tided_daemon *d, struct job *j, enum tide_status status,
                     const char *message)
{
    char text[600];
    snprintf(text, sizeof(text), "%s", message && message[0] ? message : tide_strerror(status));
    detach_train(j, tided_grpc_code(status), text);
    release_session(d, j, false);
    set_state(d, j, STATE(FAILED), "%s", text);
}

/* The client half-closed and every step ran: the stream ends OK, the job waits for more. */
static void end_train(struct tided_daemon *d, struct job *j)
{
    detach_train(j, GRPC_STATUS_OK, NULL);
    set_state(d, j, STATE(READY), NULL);
}

/* SIGTERM: a final checkpoint, then DONE with a note for resume_from. */
static void stop_for_shutdown(struct tided_daemon *d, struct job *j)
{
    char text[256];
    snprintf(text, sizeof(text),
             "tided is shutting down; job %s was checkpointed at step %" PRIu64
             " (resume it with resume_from)",
             j->id, j->dispatched);
    detach_train(j, GRPC_STATUS_UNAVAILABLE, text);
    release_session(d, j, true);
    set_state(d, j, STATE(DONE), "stopped by tided's shutdown at step %" PRIu64
                                 "; resume it with resume_from",
              j->dispatched);
}

/* ============================================================================
 * Jobs: creation, lookup, the state directory
 * ========================================================================== */

static struct job *find_job(struct tided_jobs *jobs, const char *id)
{
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        if (strcmp(jobs->jobs[i]->id, id) == 0)
            return jobs->jobs[i];
    }
    return NULL;
}

static bool valid_id(const char *id)
{
    if (strlen(id) != 18 || id[0] != 'j' || id[1] != '-')
        return false;
    for (int i = 2; i < 18; i++) {
        if (!isxdigit((unsigned char)id[i]) || isupper((unsigned char)id[i]))
            return false;
    }
    return true;
}

static struct job *job_add(struct tided_jobs *jobs, const char *id)
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

static void job_free(struct job *j)
{
    /* The worker has been joined: this thread is the only one left to free a session. */
    tide_session_free(j->session);
    batch_free(j->staged);
    free(j->name);
    free(j->dir);
    free(j->loss);
    tided_tensor_specs_free(j->feeds, j->n_feeds);
    tided_tensor_specs_free(j->fetches, j->n_fetches);
    if (j->user_variables) {
        for (uint32_t i = 0; i < j->n_user_variables; i++)
            free(j->user_variables[i]);
        free(j->user_variables);
    }
    tided_plan_report_free(j->plan);
    free(j);
}

static int new_id(struct tided_jobs *jobs, char id[24])
{
    for (int attempt = 0; attempt < 8; attempt++) {
        uint64_t r;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
            return -1;
        snprintf(id, 24, "j-%016" PRIx64, r);
        if (!find_job(jobs, id))
            return 0;
    }
    return -1;
}

/* Lists one job of a previous run from its info.pb. */
static void load_job(struct tided_jobs *jobs, const char *id)
{
    char *dir = tided_path_join(jobs->jobs_dir, id);
    char *info_path = dir ? tided_path_join(dir, "info.pb") : NULL;
    char *ck_path = dir ? tided_path_join(dir, "checkpoint.pb") : NULL;
    struct tide_error err = {0};
    Tide__V1__JobInfo *info =
        info_path ? (Tide__V1__JobInfo *)tided_store_read_message(
                        info_path, &tide__v1__job_info__descriptor, &err)
                  : NULL;
    if (!info) {
        TIDE_LOG_WARN("state: skipping %s: %s", dir ? dir : id, err.message);
        goto out;
    }
    struct job *j = job_add(jobs, id);
    if (!j) {
        TIDE_LOG_ERROR("state: out of memory listing %s", id);
        goto out;
    }
    j->name = strdup(info->name ? info->name : "");
    j->owner = info->owner_uid;
    j->created_us = info->created_us;
    j->updated_us = info->updated_us;
    j->budget = info->device_budget_bytes;
    j->steps = j->dispatched = info->steps;
    j->last_loss = info->last_loss;
    j->high_water = info->device_high_water_bytes;
    j->host_bytes = info->host_bytes;
    j->h2d_total = info->h2d_bytes_total;
    j->d2h_total = info->d2h_bytes_total;
    snprintf(j->message, sizeof(j->message), "%s", info->message ? info->message : "");
    uint64_t step = 0;
    struct stat sb;
    if (ck_path && stat(ck_path, &sb) == 0 && tided_store_peek_step(ck_path, &step) == 0) {
        j->has_checkpoint = true;
        j->last_checkpoint_step = step;
    }
    j->state = info->state;
    if (!terminal(j)) {
        /* The daemon died under it (kill -9, power): what is on disk is what is left. */
        j->state = STATE(FAILED);
        if (j->has_checkpoint)
            snprintf(j->message, sizeof(j->message),
                     "tided stopped while the job was %s; its last checkpoint is at step %" PRIu64
                     " (resume it with resume_from)",
                     state_name(info->state), step);
        else
            snprintf(j->message, sizeof(j->message),
                     "tided stopped while the job was %s; it has no checkpoint",
                     state_name(info->state));
    }
    TIDE_LOG_DEBUG("state: job %s (%s, uid %u, %s%s)", j->id, j->name, j->owner,
                   state_name(j->state), j->has_checkpoint ? ", checkpoint" : "");
out:
    if (info)
        tide__v1__job_info__free_unpacked(info, NULL);
    free(ck_path);
    free(info_path);
    free(dir);
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
    DIR *dir = opendir(jobs->jobs_dir);
    if (!dir) {
        snprintf(error, size, "state-dir: cannot list %s: %s", jobs->jobs_dir, strerror(errno));
        free(jobs->jobs_dir);
        free(jobs);
        return NULL;
    }
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (valid_id(e->d_name))
            load_job(jobs, e->d_name);
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
        watcher_remove(jobs, jobs->watchers);
    for (size_t i = 0; i < jobs->n_jobs; i++)
        job_free(jobs->jobs[i]);
    free(jobs->jobs);
    free(jobs->jobs_dir);
    free(jobs);
}

/* Finds the job a call names and checks the caller may act on it; fails the call if not. */
static struct job *job_for_call(struct tided_daemon *d, struct tided_call *call, const char *id,
                                bool control)
{
    char buf[80];
    const struct tided_identity *who = tided_call_identity(call);
    if (!id || !id[0]) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "job_id: empty");
        return NULL;
    }
    struct job *j = find_job(d->jobs, id);
    if (!j) {
        tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "no job \"%s\"", shown(id, buf, sizeof(buf)));
        return NULL;
    }
    if (!may_see(who, j)) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "job %s belongs to uid %u; %s may not access it", j->id, j->owner,
                        who->peer);
        return NULL;
    }
    if (control && !may_control(who, j)) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
        return NULL;
    }
    return j;
}

/* ============================================================================
 * Calls waiting for a task
 * ========================================================================== */

static void task_call_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call, (void)cancelled;
    struct tided_task *t = owner;
    t->call = NULL;
}

static const struct tided_call_ops task_call_ops = {.done = task_call_done};

/* Ties call to t: the result answers it, unless the client left first. */
static void wait_for_task(struct tided_task *t, struct tided_call *call)
{
    t->call = call;
    tided_call_set_owner(call, &task_call_ops, t);
}

/* Takes call back from t to answer it now. */
static struct tided_call *take_call(struct tided_task *t)
{
    struct tided_call *c = t->call;
    if (c)
        tided_call_set_owner(c, NULL, NULL);
    t->call = NULL;
    return c;
}

/* Deletes a job's directory through the worker; the job writes nothing more. */
static void remove_files(struct tided_daemon *d, struct job *j)
{
    struct tided_task *t = tided_task_new(TIDED_TASK_REMOVE, NULL);
    if (t && (t->persist.dir = strdup(j->dir))) {
        submit_task(d, t);
        j->no_files = true;
    } else {
        tided_task_free(t);
    }
}

/*
 * Forgets the oldest ended jobs without a checkpoint beyond ENDED_JOBS_KEPT.
 * Called when a job is submitted, when no caller holds a job pointer.
 */
static void forget_old_jobs(struct tided_daemon *d)
{
    struct tided_jobs *jobs = d->jobs;
    size_t ended = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++)
        ended += terminal(jobs->jobs[i]) && !jobs->jobs[i]->has_checkpoint;
    size_t keep = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        struct job *j = jobs->jobs[i];
        if (ended > ENDED_JOBS_KEPT && terminal(j) && !j->has_checkpoint && j->tasks == 0) {
            TIDE_LOG_DEBUG("job %s: forgotten (%zu ended jobs are kept)", j->id,
                           (size_t)ENDED_JOBS_KEPT);
            if (!j->no_files)
                remove_files(d, j);
            job_free(j);
            ended--;
            continue;
        }
        jobs->jobs[keep++] = j;
    }
    jobs->n_jobs = keep;
}

/* ============================================================================
 * Submit and Plan
 * ========================================================================== */

/* The budget a spec asks for, checked against the largest job budget. */
static bool budget_for(struct tided_daemon *d, struct tided_call *call,
                       const Tide__V1__JobSpec *spec, uint64_t *budget)
{
    char a[32], b[32];
    *budget = spec->memory && spec->memory->device_budget_bytes ? spec->memory->device_budget_bytes
                                                                 : d->config.default_budget;
    uint64_t max = d->config.max_budget ? d->config.max_budget : d->device_bytes;
    if (*budget > max) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "memory.device_budget_bytes: %" PRIu64 " bytes (%s) is more than the "
                        "largest job budget, %" PRIu64 " bytes (%s)",
                        *budget, tided_format_bytes(*budget, a, sizeof(a)), max,
                        tided_format_bytes(max, b, sizeof(b)));
        return false;
    }
    return true;
}

static uint32_t live_jobs(struct tided_jobs *jobs)
{
    uint32_t n = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++)
        n += jobs->jobs[i]->reserved;
    return n;
}

void tided_rpc_submit(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__SubmitRequest *req = (Tide__V1__SubmitRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    struct tided_jobs *jobs = d->jobs;
    char a[32], b[32], c[32], buf[80];
    const Tide__V1__JobSpec *spec = req->spec;
    struct tided_task *t = NULL;
    char *restore_path = NULL;
    uint64_t budget;

    if (who->read_only) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
        goto out;
    }
    forget_old_jobs(d);
    if (!spec || !spec->graph) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "SubmitRequest.spec%s: missing",
                        spec ? ".graph" : "");
        goto out;
    }
    if (strlen(spec->name) > 256) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "spec.name: longer than 256 bytes");
        goto out;
    }
    if (!budget_for(d, call, spec, &budget))
        goto out;
    if (budget > d->device_bytes - jobs->reserved) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "the job's budget of %" PRIu64 " bytes (%s) does not fit on the device: "
                        "%" PRIu64 " of %" PRIu64 " bytes (%s of %s) are reserved by %u job(s), "
                        "%" PRIu64 " bytes (%s) are free",
                        budget, tided_format_bytes(budget, a, sizeof(a)), jobs->reserved,
                        d->device_bytes, tided_format_bytes(jobs->reserved, b, sizeof(b)),
                        tided_format_bytes(d->device_bytes, c, sizeof(c)), live_jobs(jobs),
                        d->device_bytes - jobs->reserved,
                        tided_format_bytes(d->device_bytes - jobs->reserved, buf, sizeof(buf)));
        goto out;
    }
    if (spec->resume_from && spec->resume_from[0]) {
        const char *rid = spec->resume_from;
        if (!valid_id(rid)) {
            tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                            "resume_from: \"%s\" is not a job id (j-<16 hex digits>)",
                            shown(rid, buf, sizeof(buf)));
            goto out;
        }
        struct job *from = find_job(jobs, rid);
        char *dir = tided_path_join(jobs->jobs_dir, rid);
        restore_path = dir ? tided_path_join(dir, "checkpoint.pb") : NULL;
        free(dir);
        if (!restore_path) {
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
        if (from && !may_control(who, from)) {
            tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                            "resume_from: job %s belongs to uid %u", from->id, from->owner);
            goto out;
        }
        struct stat sb;
        if (!from || stat(restore_path, &sb) != 0) {
            tided_call_fail(call, GRPC_STATUS_NOT_FOUND,
                            "resume_from %s: no checkpoint at %s", rid, restore_path);
            goto out;
        }
    }

    char id[24];
    struct job *j = NULL;
    if (new_id(jobs, id) != 0 || !(j = job_add(jobs, id))) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "cannot create a job: %s",
                        j ? "out of memory" : "no random id");
        goto out;
    }
    j->name = strdup(spec->name);
    j->owner = who->uid;
    j->created_us = j->updated_us = tided_now_us();
    j->budget = budget;
    j->reserved = true;
    jobs->reserved += budget;
    j->every_steps = spec->checkpoint ? spec->checkpoint->every_steps : 0;
    j->keep_checkpoints = spec->checkpoint ? spec->checkpoint->keep : 0;
    j->state = STATE(SUBMITTED);
    TIDE_LOG_INFO("job %s \"%s\" submitted by %s, budget %s", j->id,
                  shown(spec->name, buf, sizeof(buf)), who->peer,
                  tided_format_bytes(budget, a, sizeof(a)));

    t = tided_task_new(TIDED_TASK_COMPILE, j);
    if (!t || !j->name || !(t->compile.dir = strdup(j->dir))) {
        tided_task_free(t);
        t = NULL;
        remove_files(d, j);
        fail_job(d, j, TIDE_NOMEM, "out of memory");
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    t->compile.request = request;
    request = NULL; /* the task owns it now */
    t->compile.spec = spec;
    t->compile.backend = d->backend;
    t->compile.limits = d->limits;
    t->compile.budget = budget;
    t->compile.restore_path = restore_path;
    restore_path = NULL;
    j->state = STATE(COMPILING);
    Tide__V1__JobInfo info;
    job_info(j, &info, false);
    size_t n = tide__v1__job_info__get_packed_size(&info);
    t->compile.info.data = malloc(n ? n : 1);
    if (t->compile.info.data)
        t->compile.info.len = tide__v1__job_info__pack(&info, t->compile.info.data);
    emit(d, j, TIDE__V1__JOB_EVENT__KIND__STATE, NULL, NULL);
    wait_for_task(t, call);
    submit_task(d, t);
    tided_daemon_notify_status(d);
out:
    free(restore_path);
    if (request)
        protobuf_c_message_free_unpacked(request, NULL);
}

static void compile_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    struct tided_call *call = take_call(t);
    char a[32], b[32];

    if (j->state == STATE(CANCELLED)) {
        if (t->session) {
            j->session = t->session;
            t->session = NULL;
        }
        release_session(d, j, false);
        if (call)
            tided_call_fail(call, GRPC_STATUS_CANCELLED, "job %s was cancelled while compiling",
                            j->id);
        return;
    }
    if (t->status != TIDE_OK) {
        char text[600];
        snprintf(text, sizeof(text), "%s", t->err.message[0] ? t->err.message
                                                             : tide_strerror(t->status));
        /* It never ran: nothing on disk is worth keeping (the spec may be large). */
        remove_files(d, j);
        fail_job(d, j, t->status, text);
        if (call)
            tided_call_fail_status(call, t->status, text);
        return;
    }
    /* Keep what the job needs from the compilation; the spec goes with the task. */
    j->session = t->session;
    t->session = NULL;
    j->loss = t->compile.loss;
    t->compile.loss = NULL;
    j->n_feeds = t->compile.n_feeds;
    j->feeds = t->compile.feeds;
    t->compile.feeds = NULL;
    j->n_fetches = t->compile.n_fetches;
    j->fetches = t->compile.fetches;
    t->compile.fetches = NULL;
    j->n_user_variables = t->compile.n_user_variables;
    j->user_variables = t->compile.user_variables;
    t->compile.user_variables = NULL;
    j->plan = t->compile.plan;
    t->compile.plan = NULL;
    j->host_bytes = j->plan ? j->plan->host_bytes : 0;
    j->steps = j->dispatched = t->compile.restored_step;

    if (d->phase != TIDED_SERVING) {
        release_session(d, j, false);
        remove_files(d, j);
        set_state(d, j, STATE(FAILED), "tided shut down before the job could start; submit it "
                                       "again");
        if (call)
            tided_call_fail(call, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        return;
    }
    if (d->config.host_pool) {
        uint64_t used = 0;
        for (size_t i = 0; i < d->jobs->n_jobs; i++) {
            const struct job *o = d->jobs->jobs[i];
            if (o != j && o->session)
                used += o->host_bytes;
        }
        if (used + j->host_bytes > d->config.host_pool) {
            char text[300];
            snprintf(text, sizeof(text),
                     "the plan needs %" PRIu64 " bytes of host memory; the host pool has %" PRIu64
                     " of %" PRIu64 " bytes (%s) left",
                     j->host_bytes, d->config.host_pool - (used < d->config.host_pool ? used : 0),
                     d->config.host_pool, tided_format_bytes(d->config.host_pool, a, sizeof(a)));
            remove_files(d, j);
            fail_job(d, j, TIDE_DOES_NOT_FIT, text);
            if (call)
                tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", text);
            return;
        }
    }
    if (t->compile.restore_path)
        TIDE_LOG_INFO("job %s: restored %u variable(s) at step %" PRIu64 " from %s", j->id,
                      t->compile.restored_variables, t->compile.restored_step,
                      t->compile.restore_path);
    TIDE_LOG_INFO("job %s: planned: peak %s of a %s budget", j->id,
                  tided_format_bytes(j->plan ? j->plan->predicted_peak_bytes : 0, a, sizeof(a)),
                  tided_format_bytes(j->budget, b, sizeof(b)));
    set_state(d, j, STATE(READY), NULL);
    if (call) {
        Tide__V1__JobInfo info;
        job_info(j, &info, true);
        Tide__V1__SubmitResponse resp = TIDE__V1__SUBMIT_RESPONSE__INIT;
        resp.job = &info;
        tided_call_reply(call, &resp.base);
    }
}

void tided_rpc_plan(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__PlanRequest *req = (Tide__V1__PlanRequest *)request;
    uint64_t budget;
    if (tided_call_identity(call)->read_only) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
    } else if (!req->spec || !req->spec->graph) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "PlanRequest.spec%s: missing",
                        req->spec ? ".graph" : "");
    } else if (budget_for(d, call, req->spec, &budget)) {
        struct tided_task *t = tided_task_new(TIDED_TASK_PLAN, NULL);
        if (!t) {
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        } else {
            t->compile.request = request;
            t->compile.spec = req->spec;
            t->compile.backend = d->backend;
            t->compile.limits = d->limits;
            t->compile.budget = budget;
            wait_for_task(t, call);
            submit_task(d, t);
            return;
        }
    }
    protobuf_c_message_free_unpacked(request, NULL);
}

static void plan_done(struct tided_daemon *d, struct tided_task *t)
{
    (void)d;
    struct tided_call *call = take_call(t);
    if (!call)
        return;
    if (t->status != TIDE_OK)
        tided_call_fail_status(call, t->status, t->err.message);
    else
        tided_call_reply_packed(call, t->compile.packed.data, t->compile.packed.len);
}

/* ============================================================================
 * Train
 * ========================================================================== */

static void pump_train(struct tided_daemon *d, struct job *j);

/* Checks a TrainRequest's feeds against the job's placeholders; NULL and error if wrong. */
static struct batch *batch_new(struct job *j, Tide__V1__TrainRequest *m, char *error, size_t size)
{
    char a[96], b[96], buf[80];
    struct batch *bt = calloc(1, sizeof(*bt));
    if (bt) {
        bt->names = calloc(j->n_feeds + 1, sizeof(*bt->names));
        bt->data = calloc(j->n_feeds + 1, sizeof(*bt->data));
        bt->bytes = calloc(j->n_feeds + 1, sizeof(*bt->bytes));
    }
    if (!bt || !bt->names || !bt->data || !bt->bytes) {
        snprintf(error, size, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < m->n_feeds; k++) {
        const Tide__V1__NamedTensor *nt = m->feeds[k];
        uint32_t i = 0;
        while (i < j->n_feeds && strcmp(j->feeds[i].name, nt->name) != 0)
            i++;
        if (i == j->n_feeds) {
            snprintf(error, size, "feed \"%s\": not a placeholder the job feeds (JobSpec.feeds)",
                     shown(nt->name, buf, sizeof(buf)));
            goto fail;
        }
        if (bt->names[i]) {
            snprintf(error, size, "feed \"%s\": given twice in one TrainRequest", j->feeds[i].name);
            goto fail;
        }
        struct tide_const_tensor value;
        struct tide_error err = {0};
        char what[300];
        snprintf(what, sizeof(what), "feed \"%s\"", j->feeds[i].name);
        if (tide_tensor_from_proto(nt->tensor, NULL, &value, what, &err) != TIDE_OK) {
            snprintf(error, size, "%s", err.message);
            goto fail;
        }
        const struct tided_tensor_spec *want = &j->feeds[i];
        if (value.dtype != want->dtype) {
            snprintf(error, size, "feed \"%s\": dtype %s does not match the placeholder's %s",
                     want->name, tide_dtype_name(value.dtype), tide_dtype_name(want->dtype));
            goto fail;
        }
        if (!tide_shape_equal(&value.shape, &want->shape)) {
            snprintf(error, size, "feed \"%s\": shape %s does not match the placeholder's %s",
                     want->name, tide_shape_format(&value.shape, a, sizeof(a)),
                     tide_shape_format(&want->shape, b, sizeof(b)));
            goto fail;
        }
        bt->names[i] = want->name;
        bt->data[i] = value.data;
        bt->bytes[i] = value.nbytes;
    }
    for (uint32_t i = 0; i < j->n_feeds; i++) {
        if (!bt->names[i]) {
            snprintf(error, size, "feed \"%s\": missing from the TrainRequest (every step feeds "
                                  "every JobSpec.feeds entry)",
                     j->feeds[i].name);
            goto fail;
        }
    }
    bt->message = m;
    bt->eval = m->eval_only;
    return bt;
fail:
    batch_free(bt);
    return NULL;
}

/* Hands the staged batch to the worker. */
static void dispatch_step(struct tided_daemon *d, struct job *j)
{
    struct batch *bt = j->staged;
    struct tided_task *t = tided_task_new(TIDED_TASK_STEP, j);
    if (!t) {
        fail_job(d, j, TIDE_NOMEM, "out of memory for a step");
        return;
    }
    j->staged = NULL;
    t->session = j->session;
    t->step.batch = bt->message;
    t->step.n_feeds = j->n_feeds;
    t->step.feed_names = bt->names;
    t->step.feed_data = bt->data;
    t->step.feed_bytes = bt->bytes;
    t->step.eval = bt->eval;
    t->step.loss = j->loss;
    t->step.n_fetches = j->n_fetches;
    t->step.fetches = j->fetches;
    free(bt);
    if (!t->step.eval)
        j->dispatched++;
    j->step_in_flight = true;
    submit_task(d, t);
}

/* Moves the Train stream along: run what is staged, read the next, or finish. */
static void pump_train(struct tided_daemon *d, struct job *j)
{
    if (!j->train || j->state != STATE(RUNNING))
        return;
    if (!j->step_in_flight && j->staged &&
        tided_call_pending_writes(j->train) < TRAIN_RESULTS_MAX)
        dispatch_step(d, j);
    if (!j->train)
        return;
    if (!j->staged && !j->half_closed && !j->reading && d->phase == TIDED_SERVING) {
        j->reading = true;
        tided_call_read(j->train);
    }
    if (j->half_closed && !j->staged && !j->step_in_flight)
        end_train(d, j);
}

static void train_message(void *owner, struct tided_call *call, ProtobufCMessage *message)
{
    (void)call;
    struct job *j = owner;
    struct tided_daemon *d = j->daemon;
    j->reading = false;
    if (!message) {
        j->half_closed = true;
        pump_train(d, j);
        return;
    }
    Tide__V1__TrainRequest *m = (Tide__V1__TrainRequest *)message;
    char error[600], buf[80];
    if (m->job_id[0] && strcmp(m->job_id, j->id) != 0) {
        snprintf(error, sizeof(error), "TrainRequest.job_id \"%s\": this stream trains %s",
                 shown(m->job_id, buf, sizeof(buf)), j->id);
        tide__v1__train_request__free_unpacked(m, NULL);
        detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
    } else {
        struct batch *bt = batch_new(j, m, error, sizeof(error));
        if (!bt) {
            tide__v1__train_request__free_unpacked(m, NULL);
            detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
        } else {
            j->staged = bt;
        }
    }
    if (!j->train && !j->step_in_flight && j->state == STATE(RUNNING))
        set_state(d, j, STATE(READY), NULL);
    pump_train(d, j);
}

static void train_drained(void *owner, struct tided_call *call)
{
    (void)call;
    struct job *j = owner;
    pump_train(j->daemon, j);
}

static void train_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call;
    struct job *j = owner;
    struct tided_daemon *d = j->daemon;
    TIDE_LOG_INFO("job %s: the Train stream ended (%s)", j->id,
                  cancelled ? "the client went away" : "closed");
    j->train = NULL;
    batch_free(j->staged);
    j->staged = NULL;
    j->reading = false;
    j->half_closed = false;
    if (j->state == STATE(RUNNING) && !j->step_in_flight)
        set_state(d, j, STATE(READY), NULL);
}

static const struct tided_call_ops train_ops = {
    .message = train_message,
    .drained = train_drained,
    .done = train_done,
};

void tided_rpc_train(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__TrainRequest *m = (Tide__V1__TrainRequest *)request;
    if (d->phase != TIDED_SERVING) {
        /* The stream opened before SIGTERM, its first message came after. */
        tided_call_fail(call, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        if (m)
            tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    if (!m) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                        "Train: the first TrainRequest must name the job (job_id)");
        return;
    }
    struct job *j = job_for_call(d, call, m->job_id, true);
    if (!j) {
        tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    const char *why = NULL;
    switch (j->state) {
    case STATE(READY):
        break;
    case STATE(RUNNING):
        why = "is being trained by another stream";
        break;
    case STATE(SUBMITTED):
    case STATE(COMPILING):
        why = "is still compiling";
        break;
    default:
        why = "has ended";
        break;
    }
    if (why || !j->session) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s %s (%s)", j->id,
                        why ? why : "has no session", state_name(j->state));
        tide__v1__train_request__free_unpacked(m, NULL);
        return;
    }
    j->train = call;
    j->half_closed = false;
    j->reading = false;
    j->last_step_us = 0; /* the time between streams is no step's */
    tided_call_set_owner(call, &train_ops, j);
    set_state(d, j, STATE(RUNNING), NULL);
    TIDE_LOG_DEBUG("job %s: Train stream from %s", j->id, tided_call_identity(call)->peer);
    if (m->n_feeds > 0) {
        /* The first message may carry a batch too. */
        char error[600];
        struct batch *bt = batch_new(j, m, error, sizeof(error));
        if (!bt) {
            tide__v1__train_request__free_unpacked(m, NULL);
            detach_train(j, GRPC_STATUS_INVALID_ARGUMENT, error);
            set_state(d, j, STATE(READY), NULL);
            return;
        }
        j->staged = bt;
    } else {
        tide__v1__train_request__free_unpacked(m, NULL);
    }
    pump_train(d, j);
}

static void step_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    j->step_in_flight = false;
    if (terminal(j))
        return; /* cancelled (or failed) while the step ran; its results have no reader */
    if (t->status != TIDE_OK) {
        TIDE_LOG_WARN("job %s: step failed: %s", j->id, t->err.message);
        fail_job(d, j, t->status, t->err.message);
        return;
    }
    const struct tide_step_stats *s = &t->step.stats;
    int64_t now = tided_now_us();
    if (!t->step.eval) {
        j->steps++;
        if (j->loss)
            j->last_loss = t->step.loss_value;
        double rate = 0;
        if (j->last_step_us && now > j->last_step_us)
            rate = 1e6 / (double)(now - j->last_step_us);
        else if (s->step_ms > 0)
            rate = 1e3 / s->step_ms;
        j->steps_per_second = j->steps_per_second > 0 ? 0.8 * j->steps_per_second + 0.2 * rate
                                                      : rate;
        j->last_step_us = now;
    }
    if (s->high_water_bytes > j->high_water)
        j->high_water = s->high_water_bytes;
    j->h2d_total += s->h2d_bytes;
    j->d2h_total += s->d2h_bytes;
    j->updated_us = now;

    Tide__V1__StepResult r = TIDE__V1__STEP_RESULT__INIT;
    r.step = j->steps;
    r.loss = t->step.loss_value;
    r.step_us = (uint64_t)(s->step_ms * 1000.0);
    r.device_high_water_bytes = s->high_water_bytes;
    r.h2d_bytes = s->h2d_bytes;
    r.d2h_bytes = s->d2h_bytes;
    r.stall_us = (uint64_t)(s->stall_ms * 1000.0);
    r.eval_only = t->step.eval;
    emit(d, j, TIDE__V1__JOB_EVENT__KIND__STEP, &r, NULL);

    if (j->train) {
        struct tided_named_tensor *nts = calloc(j->n_fetches + 1, sizeof(*nts));
        Tide__V1__NamedTensor **ptrs = calloc(j->n_fetches + 1, sizeof(*ptrs));
        if (nts && ptrs) {
            for (uint32_t i = 0; i < j->n_fetches; i++) {
                const struct tided_tensor_spec *f = &j->fetches[i];
                tided_named_tensor_fill(&nts[i], f->name, f->dtype, &f->shape,
                                        t->step.fetch_data[i], f->nbytes);
                ptrs[i] = &nts[i].named;
            }
            r.n_fetches = j->n_fetches;
            r.fetches = ptrs;
            tided_call_write(j->train, &r.base, NULL);
        } else {
            detach_train(j, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory for a StepResult");
        }
        free(nts);
        free(ptrs);
    }

    if (!t->step.eval && j->every_steps && j->steps % j->every_steps == 0) {
        struct tided_task *c = tided_task_new(TIDED_TASK_CHECKPOINT, j);
        if (c && (c->checkpoint.dir = strdup(j->dir))) {
            c->session = j->session;
            c->checkpoint.step = j->dispatched;
            c->checkpoint.keep = j->keep_checkpoints;
            submit_task(d, c);
        } else {
            tided_task_free(c);
        }
    }
    if (d->phase != TIDED_SERVING) {
        stop_for_shutdown(d, j);
        return;
    }
    if (!j->train) {
        if (j->state == STATE(RUNNING))
            set_state(d, j, STATE(READY), NULL);
        return;
    }
    pump_train(d, j);
}

/* ============================================================================
 * Get, List, Cancel, Status
 * ========================================================================== */

void tided_rpc_get(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__GetJobRequest *req = (Tide__V1__GetJobRequest *)request;
    struct job *j = job_for_call(d, call, req->job_id, false);
    if (j) {
        Tide__V1__JobInfo info;
        job_info(j, &info, true);
        tided_call_reply(call, &info.base);
    }
    protobuf_c_message_free_unpacked(request, NULL);
}

/* JobInfos of the jobs who may see (all of them, or the caller's own). */
static Tide__V1__JobInfo **visible_jobs(struct tided_daemon *d, const struct tided_identity *who,
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
        if (all ? !may_see(who, j) : j->owner != who->uid)
            continue;
        job_info(j, &(*storage)[*n], false);
        ptrs[*n] = &(*storage)[*n];
        (*n)++;
    }
    return ptrs;
}

void tided_rpc_list(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__ListJobsRequest *req = (Tide__V1__ListJobsRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    Tide__V1__JobInfo *storage;
    size_t n;
    /* all is for admins and monitors; anyone else gets their own jobs. */
    Tide__V1__JobInfo **ptrs = visible_jobs(d, who, req->all && who->admin, &n, &storage);
    if (!ptrs) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        Tide__V1__ListJobsResponse resp = TIDE__V1__LIST_JOBS_RESPONSE__INIT;
        resp.n_jobs = n;
        resp.jobs = ptrs;
        tided_call_reply(call, &resp.base);
    }
    free(ptrs);
    free(storage);
    protobuf_c_message_free_unpacked(request, NULL);
}

void tided_rpc_cancel(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__CancelJobRequest *req = (Tide__V1__CancelJobRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    struct job *j = job_for_call(d, call, req->job_id, true);
    if (j && terminal(j)) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s has already ended (%s)",
                        j->id, state_name(j->state));
    } else if (j) {
        char text[128];
        snprintf(text, sizeof(text), "job %s was cancelled by uid %u", j->id, who->uid);
        detach_train(j, GRPC_STATUS_CANCELLED, text);
        bool compiling = j->state == STATE(COMPILING) || j->state == STATE(SUBMITTED);
        if (!compiling)
            release_session(d, j, false); /* behind the step in flight, if any */
        set_state(d, j, STATE(CANCELLED), "cancelled by uid %u", who->uid);
        Tide__V1__JobInfo info;
        job_info(j, &info, false);
        tided_call_reply(call, &info.base);
    }
    protobuf_c_message_free_unpacked(request, NULL);
}

void tided_rpc_status(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    const struct tided_identity *who = tided_call_identity(call);
    struct tided_jobs *jobs = d->jobs;
    Tide__V1__DaemonStatus st = TIDE__V1__DAEMON_STATUS__INIT;
    st.version = (char *)TIDED_VERSION;
    st.backend = (char *)tide_backend_name(d->backend);
    st.device_name = d->device_name;
    st.device_total_bytes = d->device_bytes;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *j = jobs->jobs[i];
        if (j->session) {
            st.device_used_bytes += j->high_water;
            st.host_pool_used_bytes += j->host_bytes;
        }
    }
    st.device_reserved_bytes = jobs->reserved;
    st.host_pool_bytes = d->config.host_pool;
    st.started_us = d->started_us;
    st.max_job_budget_bytes = d->config.max_budget ? d->config.max_budget : d->device_bytes;
    st.default_job_budget_bytes = d->config.default_budget;
    Tide__V1__JobInfo *storage;
    size_t n;
    Tide__V1__JobInfo **ptrs = visible_jobs(d, who, true, &n, &storage);
    if (!ptrs) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        st.n_jobs = n;
        st.jobs = ptrs;
        tided_call_reply(call, &st.base);
    }
    free(ptrs);
    free(storage);
    protobuf_c_message_free_unpacked(request, NULL);
}

/* ============================================================================
 * Watch
 * ========================================================================== */

static void watch_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call, (void)cancelled;
    struct watcher *w = owner;
    watcher_remove(w->daemon->jobs, w);
}

static const struct tided_call_ops watch_ops = {.done = watch_done};

void tided_rpc_watch(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__WatchRequest *req = (Tide__V1__WatchRequest *)request;
    struct tided_jobs *jobs = d->jobs;
    struct job *j = NULL;
    if (req->job_id[0] && !(j = job_for_call(d, call, req->job_id, false))) {
        protobuf_c_message_free_unpacked(request, NULL);
        return;
    }
    struct watcher *w = calloc(1, sizeof(*w));
    if (!w) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        protobuf_c_message_free_unpacked(request, NULL);
        return;
    }
    w->daemon = d;
    w->call = call;
    w->job = j;
    w->stride = req->step_stride;
    w->who = *tided_call_identity(call);
    protobuf_c_message_free_unpacked(request, NULL);
    w->next = jobs->watchers;
    if (jobs->watchers)
        jobs->watchers->prev = w;
    jobs->watchers = w;
    tided_call_set_owner(call, &watch_ops, w);

    /* Start with where things stand: a STATE event per job watched. */
    Tide__V1__JobInfo info;
    Tide__V1__JobEvent ev = TIDE__V1__JOB_EVENT__INIT;
    ev.kind = TIDE__V1__JOB_EVENT__KIND__STATE;
    ev.job = &info;
    ev.time_us = tided_now_us();
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *x = jobs->jobs[i];
        if (j ? x != j : !may_see(&w->who, x))
            continue;
        job_info(x, &info, false);
        ev.message = (char *)x->message;
        tided_call_write(call, &ev.base, NULL);
    }
    if (j && terminal(j)) {
        tided_call_finish(call);
        tided_call_set_owner(call, NULL, NULL);
        watcher_remove(jobs, w);
    }
}

/* ============================================================================
 * ReadVariables and Checkpoint
 * ========================================================================== */

void tided_rpc_read_variables(struct tided_daemon *d, struct tided_call *call,
                              ProtobufCMessage *request)
{
    Tide__V1__ReadVariablesRequest *req = (Tide__V1__ReadVariablesRequest *)request;
    struct job *j = job_for_call(d, call, req->job_id, true);
    struct tided_task *t = NULL;
    if (!j)
        goto out;
    if (!live(j) && !(terminal(j) && j->has_checkpoint)) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s is %s%s", j->id,
                        state_name(j->state),
                        terminal(j) ? " and has no checkpoint to read variables from"
                                    : ": its variables do not exist yet");
        goto out;
    }
    t = tided_task_new(TIDED_TASK_READ_VARIABLES, j);
    if (!t)
        goto oom;
    if (req->n_names) {
        t->read.names = calloc(req->n_names, sizeof(char *));
        if (!t->read.names)
            goto oom;
        for (size_t i = 0; i < req->n_names; i++) {
            if (!(t->read.names[i] = strdup(req->names[i])))
                goto oom;
            t->read.n_names++;
        }
    }
    t->read.defaults = j->user_variables;
    t->read.n_defaults = j->n_user_variables;
    if (live(j)) {
        t->session = j->session;
        t->read.step = j->dispatched;
    } else {
        t->read.checkpoint_path = tided_path_join(j->dir, "checkpoint.pb");
        t->read.spec_path = tided_path_join(j->dir, "spec.pb");
        if (!t->read.checkpoint_path || !t->read.spec_path)
            goto oom;
    }
    wait_for_task(t, call);
    submit_task(d, t);
    goto out;
oom:
    tided_task_free(t);
    tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
out:
    protobuf_c_message_free_unpacked(request, NULL);
}

static void read_done(struct tided_daemon *d, struct tided_task *t)
{
    (void)d;
    struct tided_call *call = take_call(t);
    if (!call)
        return;
    if (t->status != TIDE_OK)
        tided_call_fail_status(call, t->status, t->err.message);
    else
        tided_call_reply_packed(call, t->read.packed.data, t->read.packed.len);
}

void tided_rpc_checkpoint(struct tided_daemon *d, struct tided_call *call,
                          ProtobufCMessage *request)
{
    Tide__V1__CheckpointRequest *req = (Tide__V1__CheckpointRequest *)request;
    struct job *j = job_for_call(d, call, req->job_id, true);
    if (!j)
        goto out;
    if (live(j)) {
        struct tided_task *t = tided_task_new(TIDED_TASK_CHECKPOINT, j);
        if (!t || !(t->checkpoint.dir = strdup(j->dir))) {
            tided_task_free(t);
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
        t->session = j->session;
        t->checkpoint.step = j->dispatched;
        t->checkpoint.keep = j->keep_checkpoints;
        wait_for_task(t, call);
        submit_task(d, t);
    } else if (terminal(j) && j->has_checkpoint) {
        /* The job's variables cannot change any more: its last checkpoint is the answer. */
        char *path = tided_path_join(j->dir, "checkpoint.pb");
        struct stat sb;
        if (!path || stat(path, &sb) != 0) {
            tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "job %s: its checkpoint %s is gone",
                            j->id, path ? path : "");
        } else {
            Tide__V1__CheckpointResponse resp = TIDE__V1__CHECKPOINT_RESPONSE__INIT;
            resp.step = j->last_checkpoint_step;
            resp.path = path;
            resp.bytes = (uint64_t)sb.st_size;
            tided_call_reply(call, &resp.base);
        }
        free(path);
    } else {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s is %s%s", j->id,
                        state_name(j->state),
                        terminal(j) ? " and has no checkpoint" : ": there is nothing to save yet");
    }
out:
    protobuf_c_message_free_unpacked(request, NULL);
}

static void checkpoint_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    struct tided_call *call = take_call(t);
    if (t->status != TIDE_OK) {
        TIDE_LOG_ERROR("job %s: checkpoint failed: %s", j->id, t->err.message);
        if (call)
            tided_call_fail_status(call, t->status, t->err.message);
        return;
    }
    j->has_checkpoint = true;
    j->last_checkpoint_step = t->checkpoint.step;
    TIDE_LOG_INFO("job %s: checkpoint at step %" PRIu64 " (%" PRIu64 " bytes)", j->id,
                  t->checkpoint.step, t->checkpoint.bytes);
    char text[64];
    snprintf(text, sizeof(text), "checkpoint at step %" PRIu64, t->checkpoint.step);
    emit(d, j, TIDE__V1__JOB_EVENT__KIND__CHECKPOINT, NULL, text);
    persist(d, j);
    if (call) {
        Tide__V1__CheckpointResponse resp = TIDE__V1__CHECKPOINT_RESPONSE__INIT;
        resp.step = t->checkpoint.step;
        resp.path = t->checkpoint.path;
        resp.bytes = t->checkpoint.bytes;
        tided_call_reply(call, &resp.base);
    }
}

/* ============================================================================
 * Worker results and shutdown
 * ========================================================================== */

void tided_jobs_task_done(void *context, struct tided_task *t)
{
    struct tided_daemon *d = context;
    struct job *j = t->job;
    if (j)
        j->tasks--;
    d->jobs->tasks--;
    switch (t->kind) {
    case TIDED_TASK_COMPILE:
        compile_done(d, t);
        break;
    case TIDED_TASK_PLAN:
        plan_done(d, t);
        break;
    case TIDED_TASK_STEP:
        step_done(d, t);
        break;
    case TIDED_TASK_READ_VARIABLES:
        read_done(d, t);
        break;
    case TIDED_TASK_CHECKPOINT:
        checkpoint_done(d, t);
        break;
    case TIDED_TASK_PERSIST:
        if (t->status != TIDE_OK)
            TIDE_LOG_ERROR("job %s: cannot save its state: %s", j ? j->id : "?",
                           t->err.message);
        break;
    case TIDED_TASK_REMOVE:
        if (t->status != TIDE_OK)
            TIDE_LOG_WARN("%s", t->err.message);
        break;
    case TIDED_TASK_FREE:
        break;
    }
    if (t->call) /* a result nobody took: answer rather than leave the client waiting */
        tided_call_fail(take_call(t), GRPC_STATUS_INTERNAL, "tided lost this call's result");
    if (t->session && t->kind == TIDED_TASK_COMPILE) {
        /* A session no job took (cannot happen; never leak device memory over it). */
        struct tided_task *f = tided_task_new(TIDED_TASK_FREE, NULL);
        if (f) {
            f->session = t->session;
            submit_task(d, f);
        }
        t->session = NULL;
    }
    tided_task_free(t);
    check_quiet(d);
}

void tided_jobs_drain(struct tided_daemon *d)
{
    struct tided_jobs *jobs = d->jobs;
    tided_worker_refuse_compiles(d->worker);
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        struct job *j = jobs->jobs[i];
        batch_free(j->staged); /* only the running step finishes */
        j->staged = NULL;
        if (live(j) && !j->step_in_flight)
            stop_for_shutdown(d, j);
    }
    check_quiet(d);
}

void tided_jobs_summary(struct tided_daemon *d, char *buf, size_t size)
{
    struct tided_jobs *jobs = d->jobs;
    uint32_t running = 0, ready = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        running += jobs->jobs[i]->state == STATE(RUNNING);
        ready += jobs->jobs[i]->state == STATE(READY);
    }
    char a[32], b[32];
    snprintf(buf, size, "%u running, %u ready, %zu known; %s of %s reserved", running, ready,
             jobs->n_jobs, tided_format_bytes(jobs->reserved, a, sizeof(a)),
             tided_format_bytes(d->device_bytes, b, sizeof(b)));
}
