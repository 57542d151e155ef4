/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c: what happens to jobs nobody is training — idle jobs are
 * parked and resumed by their next Train stream, ended jobs are removed on
 * request (rpc-remove.c) or after retain-ended — and the housekeeping cron
 * that drives it.
 *
 * DESIGN
 *
 * Threads: main thread only, like the rest of the job manager (jobs.c's
 * DESIGN section). main.c's cron timer calls tided_jobs_cron once a second
 * while tided serves, as Redis's serverCron does its housekeeping.
 *
 * Parking. A job READY for idle-timeout seconds, with nothing of its own
 * in flight (no step, no task, no Trace call waiting, no WriteVariables
 * stream) and every streamed value whole, is parked: a
 * CHECKPOINT of every Variable of its session (optimizer state included)
 * and a FREE go to the worker, its budget goes back to admission at once,
 * and its state is PARKED. The job keeps what its compilation told the
 * main thread (feeds, fetches, loss name, plan report), so that Get, List,
 * ReadVariables (from the checkpoint) and the next Train's first batch
 * need no session.
 *
 * Resuming. A Train stream for a parked job re-admits its budget (or is
 * refused with RESOURCE_EXHAUSTED and the numbers, the job staying parked)
 * and hands the worker a COMPILE that reads spec.pb back and restores
 * checkpoint.pb, the step count included, exactly as resume_from does; the
 * job is COMPILING meanwhile, its stream attached with its first batch
 * staged. The worker runs tasks in order, so this COMPILE runs after the
 * parking's CHECKPOINT and FREE even when the stream came at once. The
 * restored checkpoint must be the parking's own step; anything else fails
 * the job rather than continue from other variables. Then the job is
 * RUNNING and the stream goes on: the steps it runs are those it would
 * have run without the parking, bit for bit (tests/test_lifecycle.c).
 *
 * Removing. Only ended jobs are removed: their directories go in one
 * REMOVE task, and they are marked removing at once, so that every call
 * (tided__job_for_call), List and Watch see no such job from then on and
 * nothing more is written for them. The worker runs the jobs' earlier
 * tasks first (a final checkpoint, a ReadVariables from it); a job is
 * freed when the REMOVE is back and no task holds it any more (a FREE made
 * after the REMOVE, when a compilation comes back cancelled, may). A job
 * whose directory could not be deleted stays listed, for the error to be
 * seen.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"
#include "daemon/jobs.h"
#include "daemon/store.h"

/* ============================================================================
 * Parking
 * ========================================================================== */

/*
 * READY with a session and nothing of its own in flight: parking it cannot
 * race anything. A job whose streamed values are incomplete is left alone:
 * parked, it would have no session for its next WriteVariables stream.
 */
static bool parkable(const struct job *j)
{
    return j->state == STATE(READY) && j->session && !j->resuming && !j->train &&
           !j->step_in_flight && !j->staged && !j->trace_call && j->tasks == 0 && !j->writing &&
           j->streamed_incomplete == 0;
}

static void park(struct tided_daemon *d, struct job *j, int64_t idle_s)
{
    char a[32];
    uint64_t budget = j->budget;
    tided__job_release_session(d, j, true); /* CHECKPOINT, then FREE; the budget now */
    tided__job_set_state(
        d, j, STATE(PARKED),
        "idle for %" PRId64 " s (idle-timeout %" PRIu64 " s): parked at step %" PRIu64
        ", checkpointed, its %s budget released; its next Train resumes it",
        idle_s, d->config.idle_timeout, j->dispatched, tided_format_bytes(budget, a, sizeof(a)));
}

static void park_idle_jobs(struct tided_daemon *d, int64_t now)
{
    if (!d->config.idle_timeout)
        return;
    int64_t timeout_us = (int64_t)d->config.idle_timeout * 1000000;
    struct tided_jobs *jobs = d->jobs;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        struct job *j = jobs->jobs[i];
        if (parkable(j) && now - j->idle_since_us >= timeout_us)
            park(d, j, (now - j->idle_since_us) / 1000000);
    }
}

/* ============================================================================
 * Resuming
 * ========================================================================== */

enum tide_status tided__job_unpark(struct tided_daemon *d, struct job *j, struct tide_error *err)
{
    uint32_t device;
    enum tide_status st = tided__jobs_admit(d, j->budget, j->asked_device, &device, err);
    if (st != TIDE_OK)
        return st;
    struct tided_task *t = tided_task_new(TIDED_TASK_COMPILE, j);
    if (!t || !(t->compile.dir = strdup(j->dir)) ||
        !(t->compile.spec_path = tided_path_join(j->dir, "spec.pb")) ||
        !(t->compile.restore_path = tided_path_join(j->dir, "checkpoint.pb"))) {
        tided_task_free(t);
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    /* Maybe another device than before: the checkpoint, not the arena, carries the job over. */
    tided__job_reserve(d, j, device);
    t->compile.backend = tided__job_backend(d, j);
    t->compile.limits = d->limits;
    t->compile.budget = j->budget;
    t->compile.host_budget = tided_config_host_budget(&d->config);
    j->resuming = true;
    tided__task_submit(d, t);
    tided__job_set_state(d, j, STATE(COMPILING), "resuming from its checkpoint at step %" PRIu64,
                         j->dispatched);
    return TIDE_OK;
}

void tided__resume_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    char text[600];
    j->resuming = false;
    /* The session, if any, is the job's from here: every way out below releases it. */
    j->session = t->session;
    t->session = NULL;

    if (tided__job_terminal(j)) {
        /* Cancelled (or failed) while it compiled: its budget went already. */
        tided__job_release_session(d, j, false);
        return;
    }
    if (d->phase != TIDED_SERVING) {
        /* Nothing ran since the parking: its checkpoint is the job. */
        tided__job_detach_train(j, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        tided__job_release_session(d, j, false);
        tided__job_set_state(d, j, STATE(DONE),
                             "stopped by tided's shutdown at step %" PRIu64
                             "; resume it with resume_from",
                             j->dispatched);
        return;
    }
    if (t->status != TIDE_OK) {
        snprintf(text, sizeof(text), "cannot resume from its checkpoint: %s",
                 t->err.message[0] ? t->err.message : tide_strerror(t->status));
        tided__job_fail(d, j, t->status, text);
        return;
    }
    if (t->compile.restored_step != j->dispatched) {
        snprintf(text, sizeof(text),
                 "cannot resume: its checkpoint is at step %" PRIu64 ", not at step %" PRIu64
                 " where it was parked",
                 t->compile.restored_step, j->dispatched);
        tided__job_fail(d, j, TIDE_INTERNAL, text);
        return;
    }
    if (!tided__host_pool_fits(d, j, text, sizeof(text))) {
        /* Not now; it stays parked, its checkpoint untouched. */
        tided__job_detach_train(j, GRPC_STATUS_RESOURCE_EXHAUSTED, text);
        tided__job_release_session(d, j, false);
        tided__job_set_state(d, j, STATE(PARKED), "parked at step %" PRIu64 "; resuming failed: %s",
                             j->dispatched, text);
        return;
    }
    TIDE_LOG_INFO("job %s: resumed at step %" PRIu64 " (%u variable(s) restored)", j->id,
                  j->dispatched, t->compile.restored_variables);
    tided__train_resume(d, j);
}

/* ============================================================================
 * Removing ended jobs
 * ========================================================================== */

void tided__jobs_remove(struct tided_daemon *d, struct job *const *jobs, size_t n,
                        struct tided_call *call)
{
    if (n == 0) {
        if (call) {
            Tide__V1__RemoveJobsResponse resp = TIDE__V1__REMOVE_JOBS_RESPONSE__INIT;
            tided_call_reply(call, &resp.base);
        }
        return;
    }
    struct tided_task *t = tided_task_new(TIDED_TASK_REMOVE, NULL);
    if (t) {
        t->remove.dirs = calloc(n, sizeof(char *));
        t->remove.ids = calloc(n, sizeof(char *));
    }
    bool ok = t && t->remove.dirs && t->remove.ids;
    for (size_t i = 0; ok && i < n; i++) {
        t->remove.dirs[i] = strdup(jobs[i]->dir);
        t->remove.ids[i] = strdup(jobs[i]->id);
        t->remove.n_dirs = (uint32_t)i + 1;
        ok = t->remove.dirs[i] && t->remove.ids[i];
    }
    if (!ok) {
        tided_task_free(t);
        if (call)
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        /* Nothing more is written for it (a final checkpoint's info.pb included). */
        jobs[i]->removing = true;
        jobs[i]->no_files = true;
    }
    if (call)
        tided__task_wait(t, call);
    tided__task_submit(d, t);
}

void tided__job_forget(struct tided_jobs *jobs, struct job *j)
{
    size_t keep = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        if (jobs->jobs[i] != j)
            jobs->jobs[keep++] = jobs->jobs[i];
    }
    jobs->n_jobs = keep;
    tided__job_free(j);
}

void tided__remove_done(struct tided_daemon *d, struct tided_task *t)
{
    struct tided_call *call = tided__task_take_call(t);
    char a[32];
    if (t->status != TIDE_OK)
        TIDE_LOG_WARN("%s", t->err.message);
    for (uint32_t i = 0; t->remove.ids && i < t->remove.n_dirs; i++) {
        struct job *j = tided__job_find(d->jobs, t->remove.ids[i]);
        if (!j || !j->removing)
            continue;
        if (i >= t->remove.n_removed) {
            j->removing = false; /* listed again, for the error to be seen and retried */
            continue;
        }
        TIDE_LOG_INFO("job %s: removed", j->id);
        /* A task made after the REMOVE (a cancelled compilation's FREE) may still hold it. */
        j->removed = true;
        if (j->tasks == 0)
            tided__job_forget(d->jobs, j);
    }
    if (t->remove.ids)
        TIDE_LOG_INFO("removed %u ended job(s), %s freed", t->remove.n_removed,
                      tided_format_bytes(t->remove.bytes, a, sizeof(a)));
    if (!call)
        return;
    if (t->status != TIDE_OK) {
        tided_call_fail(call, tided_grpc_code(t->status), "removed %u of %u job(s), then: %s",
                        t->remove.n_removed, t->remove.n_dirs, t->err.message);
        return;
    }
    Tide__V1__RemoveJobsResponse resp = TIDE__V1__REMOVE_JOBS_RESPONSE__INIT;
    resp.n_job_ids = t->remove.n_removed;
    resp.job_ids = t->remove.ids;
    resp.bytes_freed = t->remove.bytes;
    tided_call_reply(call, &resp.base);
}

/* Ended jobs older than retain-ended go the way of `tidectl rm`. */
static void expire_ended_jobs(struct tided_daemon *d, int64_t now)
{
    if (!d->config.retain_ended)
        return;
    int64_t retain_us = (int64_t)d->config.retain_ended * 1000000;
    struct tided_jobs *jobs = d->jobs;
    struct job **expired = NULL;
    size_t n = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        struct job *j = jobs->jobs[i];
        if (!tided__job_terminal(j) || j->removing || now - j->updated_us < retain_us)
            continue;
        if (!expired && !(expired = calloc(jobs->n_jobs, sizeof(*expired)))) {
            TIDE_LOG_ERROR("out of memory expiring ended jobs");
            return;
        }
        TIDE_LOG_INFO("job %s: ended %" PRId64 " s ago (retain-ended %" PRIu64 " s); removing it",
                      j->id, (now - j->updated_us) / 1000000, d->config.retain_ended);
        expired[n++] = j;
    }
    tided__jobs_remove(d, expired, n, NULL);
    free(expired);
}

/* ============================================================================
 * The cron
 * ========================================================================== */

void tided_jobs_cron(struct tided_daemon *d)
{
    if (d->phase != TIDED_SERVING)
        return;
    int64_t now = tided_now_us();
    park_idle_jobs(d, now);
    expire_ended_jobs(d, now);
    tided__queue_cron(d, now);
}
