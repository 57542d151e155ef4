/* SPDX-License-Identifier: MIT */
/*
 * jobs-impl.h: the job manager's structs and the internal functions that
 * its files share; only the daemon's job files include it.
 *
 *   jobs.c               the state machine, admission, watchers, the task
 *                        table (which function takes each task kind's result)
 *   lifecycle.c          parking idle jobs, resuming them, removing ended jobs, the
 *                        housekeeping cron
 *   queue.c              the queue of jobs waiting for room, quotas, priorities,
 *                        preemption (queue-order.c: the admission order, pure)
 *   store.c              job records: info.pb, listing earlier runs' jobs,
 *                        deleting and forgetting ended jobs
 *   rpc-<verb>.c         one file per RPC of tide.v1.Jobs and tide.v1.Daemon:
 *                        decode and check the request, call the job layer,
 *                        encode the answer (and take the worker's result)
 *
 * Threads: main thread only (see jobs.c's DESIGN section).
 *
 * Example usage (an RPC handler):
 *
 *     struct job *j = tided__job_for_call(d, call, req->job_id, true);
 *     if (j && tided__job_live(j)) { ... tided__task_wait(t, call); tided__task_submit(d, t); }
 */
#ifndef TIDE_DAEMON_JOBS_IMPL_H
#define TIDE_DAEMON_JOBS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/worker.h"
#include "tide/v1/tide.pb-c.h"

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
/*
 * Jobs.Trace: the most training steps one trace covers, and the largest
 * trace JSON the worker writes (a bigger one fails the call with LIMIT).
 */
#define TRACE_STEPS_MAX 100
#define TRACE_BYTES_MAX (UINT64_C(256) << 20)

/* The largest page of a paged ReadVariables (ReadVariablesRequest.max_bytes is capped to it). */
#define TIDED_READ_PAGE_MAX (UINT64_C(64) << 20)

#define STATE(x) TIDE__V1__JOB_STATE__JOB_##x

/*
 * A batch received and checked, in JobSpec.feeds order; the message holds the
 * bytes. names is NULL for a batch not checked yet: one that came with the
 * Train stream of a job that was not compiled yet (tided__train_resume).
 */
struct batch {
    Tide__V1__TrainRequest *message;
    bool eval;
    const char **names;
    const void **data;
    uint64_t *bytes;
};

struct job {
    struct tided_daemon *daemon; /* for call callbacks, whose owner is the job */
    char id[24];                 /* "j-" + 16 hex digits */
    char *name;
    uint32_t owner;
    Tide__V1__JobState state;
    char message[512]; /* why it failed, was cancelled or stopped */
    int64_t created_us, updated_us;
    char *dir; /* <state-dir>/jobs/<id> */

    /* ---- admission ---- */
    uint64_t budget;
    bool reserved;        /* budget counted in jobs->reserved and on its device */
    uint32_t device;      /* where it runs, or last ran; its tasks go to this device's thread */
    int64_t asked_device; /* JobSpec.device, or -1: any (re-admission honours it too) */

    /* ---- compiled (lent to worker tasks; unchanged until freed at exit) ---- */
    struct tide_session *session; /* NULL before compilation and after release */
    char *loss;                   /* NULL: a forward-only job */
    uint32_t n_feeds;
    struct tided_tensor_spec *feeds;
    uint32_t n_fetches;
    struct tided_tensor_spec *fetches;
    uint32_t n_user_variables;
    char **user_variables; /* NULL for jobs of a previous run */
    Tide__V1__PlanReport *plan;
    uint64_t host_bytes;
    uint64_t every_steps;      /* CheckpointPolicy.every_steps */
    uint32_t keep_checkpoints; /* CheckpointPolicy.keep (0 means 1) */

    /* ---- progress ---- */
    uint64_t steps;      /* training steps done, those of the resumed checkpoint included */
    uint64_t dispatched; /* training steps handed to the worker (steps + the one running) */
    float last_loss;
    uint64_t high_water, h2d_total, d2h_total;
    double steps_per_second;
    int64_t last_step_us;
    bool has_checkpoint;
    /* The session's release queued a final checkpoint that has not finished yet. */
    bool final_checkpoint_queued;
    uint64_t last_checkpoint_step;
    bool no_files; /* no directory (removed, or queued and never compiled): nothing is written */

    /* ---- lifecycle.c: parking ---- */
    int64_t idle_since_us; /* when it last became READY; idle-timeout counts from here */
    int64_t contact_us;    /* its owner's (or an admin's) last call about it: Submit, Get, ... */
    bool resuming;         /* a parked job's COMPILE is with the worker */
    bool removing;         /* ended, its REMOVE with the worker: calls see no such job */
    bool removed;          /* its files are gone: forgotten when its last task is back */

    /* ---- queue.c: waiting for room, priorities, preemption ---- */
    int32_t priority;
    int64_t queued_us;  /* when it last entered the queue; 0 if never */
    uint64_t queue_seq; /* arrival order among queued jobs (ties of queued_us) */
    /* QUEUED at Submit: its request (owned) and resume_from's checkpoint, compiled on admission. */
    Tide__V1__SubmitRequest *queued_request;
    char *queued_restore_path;
    bool late_start; /* compiled on admission, after Submit answered: a Train stream may wait */
    bool preempted;  /* QUEUED after a preemption: its checkpoint is restored on admission */
    bool preempting; /* to be parked for a higher-priority job once its step is back */

    /* ---- calls and the Train stream ---- */
    struct tided_call *train; /* the attached stream, NULL if none */
    struct batch *staged;     /* the next batch */
    bool step_in_flight;
    bool reading;     /* a RECV_MESSAGE is posted */
    bool half_closed; /* the client said it sent its last batch */
    bool finishing;   /* ... with TrainRequest.finish: the job ends after its last step */
    uint32_t tasks;   /* worker tasks in flight for this job */
    struct tided_task *compiling; /* its COMPILE in flight (for Cancel), or NULL */

    /* ---- tracing (rpc-trace.c) ---- */
    struct tided_call *trace_call; /* the Trace call waiting for its steps, NULL if none */
    uint32_t trace_asked;          /* the training steps it asked for */
    uint32_t trace_left;           /* of those, not handed to the worker yet; 0: none armed */
    bool trace_started;            /* a traced step went to the worker: the next ones append */
    uint64_t trace_first_step;     /* the job's number of the first traced step, 0 before it */
    /* The latest trace (tided_jobs_trace; its first and last training steps inside), or NULL. */
    struct tided_metrics_blob *trace;

    /* ---- rpc-write-variables.c: JobSpec.streamed_variables ---- */
    uint32_t n_streamed;
    struct tided_tensor_spec *streamed; /* in the spec's order */
    uint64_t *streamed_written;         /* per streamed Variable: its bytes written, from 0 */
    uint32_t streamed_incomplete;       /* how many are not whole yet: no step runs until 0 */
    struct tided_call *writing;         /* the WriteVariables stream attached, NULL if none */
    uint64_t writing_bytes;             /* what that stream wrote so far */
    bool write_in_flight;               /* its chunk is with the worker */

    /* The plan's memory picture (SVG), drawn at compile; NULL if none. */
    struct tided_metrics_blob *plan_svg;

    /* ---- metrics.c: step times, stalls, recent losses (NULL until first needed) ---- */
    struct tided_job_metrics *metrics;
};

struct watcher {
    struct tided_daemon *daemon;
    struct watcher *prev, *next;
    struct tided_call *call;
    struct job *job; /* NULL: every job the caller may see */
    uint32_t stride; /* STEP events when step % stride == 0 */
    struct tided_identity who;
};

struct tided_jobs {
    struct tided_daemon *daemon;
    struct job **jobs; /* in creation order */
    size_t n_jobs, cap_jobs;
    struct watcher *watchers;
    uint64_t reserved; /* sum of admitted budgets, over every device */
    uint32_t tasks;    /* worker tasks in flight, all jobs and plans */
    bool quiet_reported;
    char *jobs_dir;
    int lock_fd; /* tided_store_lock's hold on the state directory */

    /* ---- queue.c ---- */
    struct tided_queue_usage *usage; /* per uid: decayed device-byte-seconds */
    size_t n_usage, cap_usage;
    int64_t usage_us;  /* when usage was last brought up to date */
    uint64_t next_seq; /* the next job's queue_seq */
    bool admitting;    /* tided__queue_admit is running (it is not re-entered) */
};

/* ---- jobs.c ---- */

/* The state's name without the enum prefix ("READY"). */
const char *tided__job_state_name(Tide__V1__JobState s);

/* Whether the job has ended: DONE, FAILED or CANCELLED. */
bool tided__job_terminal(const struct job *j);

/* Ready or running, with a session: the job can step, read and checkpoint. */
bool tided__job_live(const struct job *j);

/* Copies a wire string for quoting: printable ASCII only, cut at 64 bytes. */
const char *tided__shown(const char *s, char *buf, size_t size);

/* Points info at the job's fields (borrowed); the plan only when with_plan. */
void tided__job_info(const struct job *j, Tide__V1__JobInfo *info, bool with_plan);

/* Whether who may get, list and watch the job: its owner or an admin. */
bool tided__job_may_see(const struct tided_identity *who, const struct job *j);

/* Whether who may train, cancel, read or checkpoint the job (not a monitor). */
bool tided__job_may_control(const struct tided_identity *who, const struct job *j);

/* Unlinks and frees a watcher (its call is the caller's to end). */
void tided__watcher_remove(struct tided_jobs *jobs, struct watcher *w);

/* Sends an event about job to every watcher that may see it. */
void tided__job_emit(struct tided_daemon *d, struct job *j, Tide__V1__JobEvent__Kind kind,
                     const Tide__V1__StepResult *step, const char *message);

/* Hands a task to the worker, counting it for the job and for the drain. */
void tided__task_submit(struct tided_daemon *d, struct tided_task *t);

/*
 * Moves the job to state (message from format when not NULL), tells the
 * watchers and saves info.pb unless it is a READY <-> RUNNING flip.
 */
void tided__job_set_state(struct tided_daemon *d, struct job *j, Tide__V1__JobState state,
                          const char *format, ...) __attribute__((format(printf, 4, 5)));

/*
 * Hands the session back: optionally a checkpoint first, then FREE, both
 * queued behind the job's step in flight. The budget is released at once:
 * a compilation submitted from now on runs after the FREE.
 */
void tided__job_release_session(struct tided_daemon *d, struct job *j, bool checkpoint);

/*
 * The checks a TrainRequest's feeds pass before a step (rpc-train.c), apart
 * from the job so that the fuzzer (tests/fuzz/fuzz_rpc.c) runs them too: each
 * feed names one of feeds, once, with a tensor of its dtype and shape, and
 * every one of feeds is given. names, data and bytes (n_feeds entries each,
 * zeroed by the caller) get each feed's name (borrowed from feeds), bytes
 * (borrowed from m) and length in feeds' order. false with a message in
 * error naming the feed otherwise.
 */
bool tided__train_check_feeds(const struct tided_tensor_spec *feeds, uint32_t n_feeds,
                              const Tide__V1__TrainRequest *m, const char **names,
                              const void **data, uint64_t *bytes, char *error, size_t size);

/* Frees a staged batch and its message. NULL is a no-op. */
void tided__batch_free(struct batch *b);

/* Ends the job's Train stream (if any) with a status and forgets it. */
void tided__job_detach_train(struct job *j, grpc_status_code code, const char *message);

/*
 * Cancels the job (not ended): ends its stream, releases its session behind
 * the step in flight or abandons its compilation, CANCELLED with why
 * ("cancelled by uid 1000"), which also ends the stream's message.
 */
void tided__job_cancel(struct tided_daemon *d, struct job *j, const char *why);

/* Fails the job: ends its stream, releases its session, FAILED with message. */
void tided__job_fail(struct tided_daemon *d, struct job *j, enum tide_status status,
                     const char *message);

/*
 * SIGTERM: a final checkpoint, then DONE with a note for resume_from; a job
 * whose streamed values are incomplete fails instead, without a checkpoint.
 */
void tided__job_stop_for_shutdown(struct tided_daemon *d, struct job *j);

/* The job with id, or NULL. */
struct job *tided__job_find(struct tided_jobs *jobs, const char *id);

/* Whether id has the form of a job id: "j-" and 16 lower-case hex digits. */
bool tided__job_id_valid(const char *id);

/* Appends a zeroed job with id and its directory path; NULL on OOM. */
struct job *tided__job_add(struct tided_jobs *jobs, const char *id);

/* Frees a job and what it owns (its session too: the worker is gone). */
void tided__job_free(struct job *j);

/* A fresh random job id not in use; -1 when none could be made. */
int tided__job_new_id(struct tided_jobs *jobs, char id[24]);

/* Finds the job a call names and checks the caller may act on it; fails the call if not. */
struct job *tided__job_for_call(struct tided_daemon *d, struct tided_call *call, const char *id,
                                bool control);

/* Ties call to t: the result answers it, unless the client left first. */
void tided__task_wait(struct tided_task *t, struct tided_call *call);

/* Takes call back from t to answer it now. */
struct tided_call *tided__task_take_call(struct tided_task *t);

/*
 * Admission, step 1: the budget of a job that asks for asked bytes (0: the
 * default budget), checked against the largest job budget; TIDE_DOES_NOT_FIT
 * with err saying both numbers when it is larger.
 */
enum tide_status tided__job_budget(struct tided_daemon *d, uint64_t asked, uint64_t *budget,
                                   struct tide_error *err);

/*
 * Admission, step 2: the device where budget fits now — asked (>= 0), or
 * the best fit among every device (asked < 0; devices.h) — in *device.
 * TIDE_DOES_NOT_FIT with err saying what is reserved, by how many jobs, and
 * what is free (on each device); TIDE_INVALID naming the device count for
 * an asked device that does not exist. Nothing is reserved: see
 * tided__job_reserve.
 */
enum tide_status tided__jobs_admit(struct tided_daemon *d, uint64_t budget, int64_t asked,
                                   uint32_t *device, struct tide_error *err);
/* A device asked for exists (TIDE_INVALID) and could ever hold budget (TIDE_DOES_NOT_FIT). */
enum tide_status tided__job_device_holds(struct tided_daemon *d, uint64_t budget, int64_t asked,
                                         struct tide_error *err);

/* Admission, step 3: the job's budget is counted on device (from tided__jobs_admit). */
void tided__job_reserve(struct tided_daemon *d, struct job *j, uint32_t device);

/* The backend of the job's device, for its COMPILE. */
struct tide_backend *tided__job_backend(struct tided_daemon *d, const struct job *j);

/*
 * Device bytes in use: the high-water marks of the jobs holding a session
 * (what their plans touch at their peak; the rest of each budget is
 * reserved but idle). Status and the metrics report it.
 */
uint64_t tided__device_used_bytes(struct tided_daemon *d);

/* The same, of the jobs on one device. */
uint64_t tided__device_used_bytes_on(struct tided_daemon *d, uint32_t device);

/* JobInfos of the jobs who may see (all of them, or the caller's own). */
Tide__V1__JobInfo **tided__jobs_visible(struct tided_daemon *d, const struct tided_identity *who,
                                        bool all, size_t *n, Tide__V1__JobInfo **storage);

/*
 * Whether the plan of j (host_bytes) fits in the host pool next to the other
 * jobs holding a session; false with text saying the numbers when not.
 */
bool tided__host_pool_fits(struct tided_daemon *d, const struct job *j, char *text, size_t size);

/* ---- lifecycle.c: parking idle jobs and resuming them ---- */

/*
 * A Train stream for a PARKED job: re-admits its budget (TIDE_DOES_NOT_FIT
 * with err saying the numbers when it does not fit now) and hands the
 * worker a COMPILE from its spec.pb that restores its checkpoint; the job
 * is COMPILING until tided__resume_done.
 */
enum tide_status tided__job_unpark(struct tided_daemon *d, struct job *j, struct tide_error *err);

/* rpc-submit.c's COMPILE result, for a job that tided__job_unpark resumes. */
void tided__resume_done(struct tided_daemon *d, struct tided_task *t);

/*
 * Deletes the files of n ended jobs through one REMOVE task, then forgets
 * them (tided__remove_done); from now on calls see no such jobs. The task
 * answers call (may be NULL) with a RemoveJobsResponse.
 */
void tided__jobs_remove(struct tided_daemon *d, struct job *const *jobs, size_t n,
                        struct tided_call *call);

/* jobs.c's task table: a REMOVE task came back. */
void tided__remove_done(struct tided_daemon *d, struct tided_task *t);

/* Drops a removed job from the job table and frees it; once no task holds it. */
void tided__job_forget(struct tided_jobs *jobs, struct job *j);

/* ---- queue.c: the queue, quotas, priorities and preemption ---- */

/*
 * Submit's checks before admission: the priority (-1000 to 1000; above 0
 * only for an admin) and the quotas (quota-uid-*, quota-groups) with the
 * new job's budget counted; TIDE_INVALID, TIDE_PERMISSION or TIDE_LIMIT
 * (RESOURCE_EXHAUSTED on the wire) with err naming the field or quota, the uid or group
 * and the numbers.
 */
enum tide_status tided__queue_check_submit(struct tided_daemon *d, const struct tided_identity *who,
                                           int32_t priority, uint64_t budget,
                                           struct tide_error *err);

/*
 * The priority rule, for Submit and SetPriority: -1000 to 1000, above the
 * default 0 only for root and admin-group; TIDE_INVALID or TIDE_PERMISSION
 * with err naming field and the numbers otherwise.
 */
enum tide_status tided__queue_check_priority(const struct tided_identity *who, int32_t priority,
                                             const char *field, struct tide_error *err);

/*
 * Whether a new job of owner and priority must wait: its budget does not
 * fit now (tided__jobs_admit) or a queued job goes before it.
 */
bool tided__queue_must_wait(struct tided_daemon *d, uint32_t owner, int32_t priority,
                            uint64_t budget, int64_t asked);

/*
 * Puts a submitted job in the queue (QUEUED, no files yet); it takes
 * request and restore_path (may be NULL) and compiles them on admission.
 */
void tided__queue_add(struct tided_daemon *d, struct job *j, Tide__V1__SubmitRequest *request,
                      char *restore_path);

/*
 * Admits queued jobs in order while the first fits (preempting
 * lower-priority jobs when that makes room for it). Called wherever a
 * budget is released or a job leaves the queue; it does not re-enter.
 */
void tided__queue_admit(struct tided_daemon *d);

/* The job's place in the admission order (1 first); 0 when it is not QUEUED. */
uint32_t tided__queue_position(struct tided_daemon *d, const struct job *j);

/* A job marked preempting has no step in flight now: parks it (rpc-train.c's pump). */
void tided__queue_preempt_now(struct tided_daemon *d, struct job *j);

/* The job ended or left the queue for good: frees what the queue kept for it. */
void tided__queue_forget(struct job *j);

/* SIGTERM: a queued job ends (DONE from its checkpoint when preempted, else FAILED). */
void tided__queue_stop_for_shutdown(struct tided_daemon *d, struct job *j);

/* The cron's part: brings every uid's usage up to date (decay, then the reserved budgets). */
void tided__queue_cron(struct tided_daemon *d, int64_t now);

/*
 * rpc-submit.c: hands the worker the COMPILE of a new job (owning request
 * and restore_path); call (may be NULL) gets the SubmitResponse.
 */
void tided__submit_compile(struct tided_daemon *d, struct job *j, Tide__V1__SubmitRequest *request,
                           char *restore_path, struct tided_call *call);

/* ---- rpc-train.c ---- */

/*
 * A resumed job has its session again: RUNNING, and its Train stream goes
 * on, if one is still attached; READY otherwise.
 */
void tided__train_resume(struct tided_daemon *d, struct job *j);

/* ---- store.c (job records) ---- */

/* Writes info.pb through the worker (in order with the job's other tasks). */
void tided__store_persist_job(struct tided_daemon *d, struct job *j);

/* Lists one job of a previous run from its info.pb. */
void tided__store_load_job(struct tided_jobs *jobs, const char *id);

/* Deletes a job's directory through the worker; the job writes nothing more. */
void tided__store_remove_job(struct tided_daemon *d, struct job *j);

/*
 * Forgets the oldest ended jobs without a checkpoint beyond ENDED_JOBS_KEPT.
 * Called when a job is submitted, when no caller holds a job pointer.
 */
void tided__store_forget_old_jobs(struct tided_daemon *d);

/* ---- rpc-<verb>.c: what each task kind's result does (jobs.c's task table) ---- */

/* rpc-submit.c: a COMPILE task came back. */
void tided__compile_done(struct tided_daemon *d, struct tided_task *t);

/* rpc-plan.c: a PLAN task came back. */
void tided__plan_done(struct tided_daemon *d, struct tided_task *t);

/* rpc-train.c: a STEP task came back. */
void tided__step_done(struct tided_daemon *d, struct tided_task *t);

/* rpc-read-variables.c: a READ_VARIABLES task came back. */
void tided__read_done(struct tided_daemon *d, struct tided_task *t);

/* rpc-checkpoint.c: a CHECKPOINT task came back (requested or periodic). */
void tided__checkpoint_done(struct tided_daemon *d, struct tided_task *t);

/* rpc-write-variables.c: a WRITE_VARIABLE task came back. */
void tided__write_done(struct tided_daemon *d, struct tided_task *t);

/* ---- rpc-write-variables.c ---- */

/* The largest VariableChunk.data tided takes; clients send less (libtide: under 1 MiB). */
#define TIDED_CHUNK_BYTES_MAX (UINT64_C(4) << 20)

/*
 * The checks a VariableChunk passes before it is written, apart from the job
 * so that the fuzzer (tests/fuzz/fuzz_rpc.c) runs them too: it names one of
 * streamed (n_streamed entries, written[i] bytes of each written so far),
 * and holds 1 byte to TIDED_CHUNK_BYTES_MAX that start where that
 * Variable's written bytes end and stay inside it. *index gets the
 * Variable. false otherwise, with *code (NOT_FOUND for a name that is not
 * streamed, which says whether it is one of variables, the job's other
 * Variables; OUT_OF_RANGE past the end; INVALID_ARGUMENT for the rest) and
 * a message in error naming the Variable and the offsets.
 */
bool tided__write_check_chunk(const char *job_id, const struct tided_tensor_spec *streamed,
                              uint32_t n_streamed, const uint64_t *written,
                              char *const *variables, uint32_t n_variables,
                              const Tide__V1__VariableChunk *m, uint32_t *index,
                              grpc_status_code *code, char *error, size_t size);

/*
 * Whether the job's streamed Variables are all whole; when not, text gets
 * "w (0 of 324000000 bytes), ..." naming each incomplete one (for Train's
 * refusal).
 */
bool tided__streamed_complete(const struct job *j, char *text, size_t size);

/* The job ended: fails its WriteVariables stream, if any, saying why. */
void tided__writes_job_ended(struct job *j);

/* ---- rpc-trace.c: tracing rides on STEP tasks ---- */

/* Marks a STEP task about to go to the worker as traced, if a trace is armed (after dispatched++). */
void tided__trace_dispatch(struct job *j, struct tided_task *t);

/* A successful STEP task came back: keeps a finished trace and answers the Trace call. */
void tided__trace_step_done(struct tided_daemon *d, struct job *j, struct tided_task *t);

/* The job ended: fails a waiting Trace call (ABORTED, saying why) and drops its trace. */
void tided__trace_job_ended(struct job *j);

#endif /* TIDE_DAEMON_JOBS_IMPL_H */
