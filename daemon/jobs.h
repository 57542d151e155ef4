/* SPDX-License-Identifier: MIT */
/*
 * jobs.h: the job manager — admission, the state machine, Train streams,
 * Watch, checkpoints and the state directory.
 *
 *   SUBMITTED -> COMPILING -> READY <-> RUNNING -> DONE | FAILED | CANCELLED
 *   SUBMITTED -> QUEUED -> COMPILING -> READY | RUNNING        (queue.c)
 *                               READY -> PARKED -> COMPILING -> RUNNING
 *                     RUNNING | READY -> QUEUED -> COMPILING -> RUNNING  (preempted)
 *
 * A job is admitted when its budget is at most the largest job budget and
 * fits in what a device has left (the sum of a device's admitted budgets
 * never exceeds it; devices.c picks the device, best fit, or takes the one
 * the job asks for); the worker then compiles it on that device. It is RUNNING while a
 * Train stream is attached and READY between streams, so a job trains over
 * as many streams as its client likes, the step count going on: a stream
 * the client half-closes ends OK after its last step, a client that goes
 * away ends it too. The job keeps its budget until it is finished,
 * cancelled or fails, or until it has been READY for idle-timeout: then
 * it is parked (lifecycle.c), checkpointed with its budget given back, and
 * its next Train stream resumes it. A graceful shutdown checkpoints it and lists it as DONE, so
 * that a job submitted after the restart can resume_from it. A failed step fails only its own job.
 *
 * Files: jobs.c holds the state machine, admission, watchers and the task
 * table; each RPC is in rpc-<verb>.c (declared in server.h); job records
 * are in store.c; jobs-impl.h has the structs they share.
 *
 * Threads: main thread only (worker results arrive through
 * tided_jobs_task_done). See jobs.c.
 *
 * Example usage (main.c):
 *
 *     d->jobs = tided_jobs_new(d, error, sizeof(error));      // lists earlier runs' jobs
 *     d->worker = tided_worker_new(d->loop, d->devices->n, tided_jobs_task_done, d, ...);
 *     ...
 *     tided_jobs_drain(d);        // on SIGTERM; tided_daemon_jobs_quiet follows
 *     ...
 *     tided_worker_free(d->worker);
 *     tided_jobs_free(d->jobs);
 */
#ifndef TIDE_DAEMON_JOBS_H
#define TIDE_DAEMON_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "daemon/worker.h"

/*
 * Creates the job manager: makes <state-dir>/jobs and lists the jobs found
 * there (from a previous run) as finished. NULL with error filled on failure.
 */
struct tided_jobs *tided_jobs_new(struct tided_daemon *daemon, char *error, size_t error_size);

/* Frees every job; after the worker stopped. NULL is a no-op. */
void tided_jobs_free(struct tided_jobs *jobs);

/* The worker's done callback (context: the daemon). */
void tided_jobs_task_done(void *context, struct tided_task *task);

/*
 * SIGTERM: refuses new compilations, stops reading Train streams, lets the
 * running steps finish, then checkpoints every live job and marks it DONE.
 * tided_daemon_jobs_quiet runs once no task is left.
 */
void tided_jobs_drain(struct tided_daemon *daemon);

/*
 * Housekeeping, from main.c's cron timer once a second while serving:
 * parks jobs idle longer than idle-timeout and removes jobs ended longer
 * ago than retain-ended (lifecycle.c).
 */
void tided_jobs_cron(struct tided_daemon *daemon);

/* A one-line summary for systemd's STATUS=. */
void tided_jobs_summary(struct tided_daemon *daemon, char *buf, size_t size);

/*
 * The latest trace that Jobs.Trace recorded of job_id: Chrome Trace Event
 * JSON of *len bytes, owned by the job and valid until the job's next trace
 * completes or the job ends (a job's trace is dropped when it ends, so that
 * ended jobs hold no traces); *first_step and *last_step (either may be
 * NULL) get the job's numbers of its first and last training step. NULL
 * when there is no such job or it has no trace. Main thread only.
 */
const char *tided_jobs_trace(struct tided_daemon *daemon, const char *job_id, size_t *len,
                             uint64_t *first_step, uint64_t *last_step);

#endif /* TIDE_DAEMON_JOBS_H */
