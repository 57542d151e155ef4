/* SPDX-License-Identifier: MIT */
/*
 * metrics.h: what tided counts about itself, in one place, and the
 * immutable snapshots that other threads read it through.
 *
 * The job layer and the server feed the collector on the main thread: each
 * step result (step time into a histogram, stall time, the loss into a ring
 * of the last TIDED_METRICS_LOSS_HISTORY training steps) and each finished
 * RPC (by method and gRPC code). Everything else a snapshot holds — the
 * device's bytes, the queue, each job's state, steps, budget, high water
 * and copy totals — the collector reads from the jobs themselves when it
 * builds the snapshot, so that the numbers cannot drift from what Status
 * and List report.
 *
 * A snapshot is built on the main thread when another thread asks for one
 * (tided_metrics_acquire: a ticket under the collector's mutex plus
 * ev_async_send, then a wait on a condition variable), so that it is never
 * older than the request and nothing is built while nobody looks. Requests
 * that arrive together share one build. The snapshot is immutable and
 * reference-counted; the loss history of a job that did not step since the
 * last build is shared between snapshots rather than copied.
 *
 * Threads: tided_metrics_new, _free, _job_step, _rpc_done and
 * tided_job_metrics_free run on the main thread and touch the collector's
 * tables and the jobs. tided_metrics_acquire, tided_metrics_snapshot_release
 * and tided_metrics_close may run on any thread; they touch only the
 * hand-off (tickets, the published snapshot, the closing flag) under the
 * collector's mutex, and reference counts (atomics). A snapshot's contents
 * are read-only for everyone.
 *
 * Ownership: the daemon owns the collector (tided_metrics_free after every
 * reader is gone); each job owns its struct tided_job_metrics (freed with
 * the job); a reader owns the snapshot references it acquired.
 *
 * Example usage:
 *
 *     d->metrics = tided_metrics_new(d, error, sizeof(error));   // main thread
 *     tided_metrics_job_step(d->metrics, job, &step_result);     // from the STEP task's result
 *
 *     struct tided_metrics_snapshot *s = tided_metrics_acquire(m, error, sizeof(error));
 *     if (s) { ... read s->jobs[i] ...; tided_metrics_snapshot_release(s); }  // any thread
 */
#ifndef TIDE_DAEMON_METRICS_H
#define TIDE_DAEMON_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "tide/v1/tide.pb-c.h"

struct job;
struct tided_identity;
struct tided_metrics;
struct tided_job_metrics;

/* Training losses kept per job for the dashboard's curve. */
#define TIDED_METRICS_LOSS_HISTORY 1000

/* Upper bounds (seconds) of the step-time histogram's buckets; +Inf follows. */
#define TIDED_METRICS_STEP_BUCKETS 15
extern const double tided_metrics_step_buckets[TIDED_METRICS_STEP_BUCKETS];

/* The JobState values a job can be in (1 to 9): the values of tide_job_state's label. */
#define TIDED_METRICS_FIRST_STATE 1
#define TIDED_METRICS_LAST_STATE  9

/* A job's recent training losses, oldest first (immutable, shared between snapshots). */
struct tided_metrics_losses {
    atomic_int refs;
    size_t n;
    uint64_t *steps;
    float *values;
};

/*
 * Bytes a job made once and snapshots share (its plan picture, its latest
 * trace): immutable, reference-counted, freed by the last holder.
 */
struct tided_metrics_blob {
    atomic_int refs;
    uint64_t first_step, last_step; /* a trace's training steps; 0 for a picture */
    size_t len;
    char data[]; /* len bytes, then a NUL */
};

/* A blob holding a copy of len bytes of data (one reference); NULL when out of memory. */
struct tided_metrics_blob *tided_metrics_blob_new(const void *data, size_t len);

/* Another reference to b (NULL stays NULL). */
struct tided_metrics_blob *tided_metrics_blob_ref(struct tided_metrics_blob *b);

/* Drops a reference; the last frees the blob. NULL is a no-op. Any thread. */
void tided_metrics_blob_release(struct tided_metrics_blob *b);

/* One device as a snapshot saw it. */
struct tided_metrics_device {
    char id[24]; /* "cpu:0", "cuda:1": the backend and the device's index */
    char name[128];
    uint64_t total_bytes, reserved_bytes, used_bytes;
};

/* One job as a snapshot saw it. Strings are valid UTF-8. */
struct tided_metrics_job {
    char id[24];
    char device[24]; /* where it runs or last ran, as tided_metrics_device.id */
    char *name;
    char user[64]; /* the owner's user name, or the uid in decimal */
    uint32_t owner;
    int state; /* a Tide__V1__JobState; tided_metrics_state_name names it */
    char *message;
    bool has_loss; /* a training job (forward-only jobs have no loss) */
    uint64_t steps;
    float last_loss;
    uint64_t budget_bytes, high_water_bytes, host_bytes;
    uint64_t swap_in_bytes, swap_out_bytes; /* host-to-device and device-to-host copies */
    double stall_seconds;
    double steps_per_second;
    double last_step_seconds;
    uint64_t step_buckets[TIDED_METRICS_STEP_BUCKETS]; /* per bucket, not cumulative */
    uint64_t step_count;                               /* steps timed by this daemon */
    double step_seconds_sum;
    int64_t created_us, updated_us;
    struct tided_metrics_losses *losses; /* NULL: no training step yet */
    struct tided_metrics_blob *plan_svg; /* the plan's memory picture; NULL: none */
    struct tided_metrics_blob *trace;    /* the latest trace (Jobs.Trace); NULL: none yet */
};

/* The RPCs that ended with one gRPC code. */
struct tided_metrics_rpc {
    char method[96]; /* "tide.v1.Jobs/Submit", or "unknown" for paths tided does not serve */
    int code;        /* grpc_status_code */
    uint64_t count;
};

/* The daemon at one moment. */
struct tided_metrics_snapshot {
    atomic_int refs;
    int64_t built_us;
    int64_t started_us;
    bool serving; /* false once a graceful shutdown began */
    char version[16];
    char backend[16];
    char device[24]; /* the first device: "cpu:0", "cuda:0" */
    char device_name[128];
    uint64_t device_total_bytes, device_reserved_bytes, device_used_bytes; /* every device's sums */
    size_t n_devices;
    struct tided_metrics_device *devices; /* by index */
    uint64_t default_budget_bytes, max_budget_bytes;
    uint64_t queue_length; /* worker tasks handed over and not yet back */
    size_t n_rpcs;
    struct tided_metrics_rpc *rpcs;
    size_t n_jobs;
    struct tided_metrics_job *jobs; /* in creation order */
};

/* ---- main thread ---- */

/*
 * Creates the collector and starts its ev_async watcher on the daemon's
 * loop (call before any thread that acquires snapshots starts). NULL with
 * error filled on failure.
 */
struct tided_metrics *tided_metrics_new(struct tided_daemon *daemon, char *error,
                                        size_t error_size);

/* Stops the watcher and frees the collector; after every reader is gone. NULL is a no-op. */
void tided_metrics_free(struct tided_metrics *metrics);

/* Counts a step's result of job (training or eval). metrics may be NULL. */
void tided_metrics_job_step(struct tided_metrics *metrics, struct job *job,
                            const Tide__V1__StepResult *result);

/* Counts a finished RPC: method without the leading slash, or NULL for an unknown path. */
void tided_metrics_rpc_done(struct tided_metrics *metrics, const char *method, int code);

/* Frees what a job's metrics keep. NULL is a no-op. */
void tided_job_metrics_free(struct tided_job_metrics *job_metrics);

/* ---- any thread ---- */

/*
 * A snapshot built after this call began, or — when the main thread does
 * not answer within 5 s — the last one built (NULL with error filled when
 * there is none, or after tided_metrics_close). Release it when done.
 */
struct tided_metrics_snapshot *tided_metrics_acquire(struct tided_metrics *metrics, char *error,
                                                     size_t error_size);

/* Drops a reference; the last one frees the snapshot. NULL is a no-op. */
void tided_metrics_snapshot_release(struct tided_metrics_snapshot *snapshot);

/* Wakes every waiting reader and refuses new ones: the daemon is stopping. */
void tided_metrics_close(struct tided_metrics *metrics);

/* ---- any thread: metrics-export.c ---- */

/*
 * The snapshot in Prometheus's text exposition format 0.0.4: the
 * daemon-wide series and those of the jobs viewer may see
 * (tided_identity_may_see). malloc'd, *len bytes; NULL on OOM.
 */
char *tided_metrics_prometheus(const struct tided_metrics_snapshot *snapshot,
                               const struct tided_identity *viewer, size_t *len);

/*
 * The dashboard's JSON (docs/metrics.md): the device, the queue and the
 * viewer's job counts by state, with role naming the viewer ("monitor",
 * "submit", "anonymous"); and every job the viewer may see with its recent
 * losses. malloc'd, *len bytes; NULL on OOM.
 */
char *tided_metrics_status_json(const struct tided_metrics_snapshot *snapshot,
                                const struct tided_identity *viewer, const char *role, size_t *len);
char *tided_metrics_jobs_json(const struct tided_metrics_snapshot *snapshot,
                              const struct tided_identity *viewer, size_t *len);

/* A JobState's name ("RUNNING"), as Get and List show it. */
const char *tided_metrics_state_name(int state);

/* The name of a gRPC status code ("OK", "NOT_FOUND"), "UNKNOWN" when out of range. */
const char *tided_metrics_code_name(int code);

#endif /* TIDE_DAEMON_METRICS_H */
