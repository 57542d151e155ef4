/* SPDX-License-Identifier: MIT */
/*
 * worker.h: the executor threads — one per device — that drive sessions.
 *
 * Every call into a job's session (create it from a JobSpec, feed and step
 * it, evaluate, read its variables, checkpoint, free it) and every write to
 * the state directory is a task, for one device (tided_task.device). The
 * main thread fills a task's inputs and submits it; the thread of the
 * task's device runs that device's tasks one at a time in submission order and
 * hands each back, outputs filled, through a locked queue and ev_async_send;
 * the done callback then runs on the main thread. Because the main thread
 * submits at most one step per job and submits a job's next step only when
 * the previous one came back, FIFO order is round-robin between the jobs
 * that have a batch ready, at step granularity.
 *
 * Ownership: a task belongs to the main thread until tided_worker_submit,
 * to the worker until it comes back, and to the main thread again after;
 * tided_task_free frees it and everything it owns (the request message,
 * outputs) but never a session. Inputs marked "borrowed" must stay valid and
 * unchanged until the task comes back.
 *
 * Example usage:
 *
 *     struct tided_task *t = tided_task_new(TIDED_TASK_STEP, job);
 *     t->session = job->session;  t->step.batch = batch;  ...
 *     tided_worker_submit(worker, t);
 *     ...   // later, on the main thread: done(ctx, t); tided_task_free(t);
 */
#ifndef TIDE_DAEMON_WORKER_H
#define TIDE_DAEMON_WORKER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/status.h"
#include "graph/graph.h"
#include "runtime/session.h"
#include "tide/v1/tide.pb-c.h"

struct ev_loop;
struct tided_call;
struct tided_worker;

enum tided_task_kind {
    TIDED_TASK_COMPILE,        /* JobSpec (or spec.pb) -> session (and restore a checkpoint) */
    TIDED_TASK_PLAN,           /* JobSpec -> packed PlanReport, nothing kept */
    TIDED_TASK_STEP,           /* feed a batch, step or eval, read the loss and fetches */
    TIDED_TASK_READ_VARIABLES, /* packed ReadVariablesResponse, from a session or a file */
    TIDED_TASK_CHECKPOINT,     /* every Variable to checkpoint-<step>.pb and checkpoint.pb */
    TIDED_TASK_PERSIST,        /* write bytes to a file atomically */
    TIDED_TASK_FREE,           /* tide_session_free */
    TIDED_TASK_REMOVE,         /* delete job directories (remove.dirs) */
    TIDED_TASK_WRITE_VARIABLE, /* a WriteVariables chunk into a Variable of the session */
    TIDED_TASK_KINDS           /* the number of kinds: the rows of the task tables */
};

/*
 * A task kind is one row in worker.c's table (run it on the worker thread,
 * free what the task owns for it) and one in jobs.c's (what the main thread
 * does with the result); adding a kind is an enum line, the two rows and the
 * union member it needs below.
 */

/* A named tensor's type, as the job's placeholders and fetches have it. */
struct tided_tensor_spec {
    char *name;
    enum tide_dtype dtype;
    struct tide_shape shape;
    uint64_t nbytes;
};

struct tided_task {
    enum tided_task_kind kind;
    struct tided_task *next; /* the link of whichever queue holds it */
    uint32_t device; /* whose thread runs it (devices.h's index); a job's tasks, its device */

    /* Main thread only; the worker never reads these. */
    void *job;               /* the job the task is for (NULL for Plan) */
    struct tided_call *call; /* the RPC waiting for the result, NULL if none or gone */

    /* The result. */
    enum tide_status status;
    struct tide_error err;

    /*
     * COMPILE and PLAN: set by tided_task_cancel (main thread), read by the
     * compile and device threads between passes. past_compile_thread: a
     * COMPILE planned, or a REMOVE that has waited for the compilations
     * before it, is on its way to the device thread (written by the compile
     * thread, then read by the device thread; never the main thread's).
     */
    atomic_bool cancel;
    bool past_compile_thread;
    const atomic_bool *refusing; /* the worker's refuse_compiles, while planning */

    /* COMPILE out; STEP, READ_VARIABLES, CHECKPOINT and FREE in. */
    struct tide_session *session;

    union {
        struct {
            /* In. */
            ProtobufCMessage *request;      /* owned: a SubmitRequest or PlanRequest */
            const Tide__V1__JobSpec *spec;  /* inside request */
            struct tide_backend *backend;   /* borrowed */
            struct tide_graph_limits limits;
            uint64_t budget;
            uint64_t host_budget; /* of the plan (tided_config_host_budget) */
            char *dir;            /* owned: the job's directory (COMPILE); spec.pb goes there */
            char *restore_path;   /* owned: checkpoint.pb to restore, or NULL */
            /*
             * Owned: a parked job's spec.pb, or NULL. When set, the JobSpec is
             * read from it (into request and spec), nothing is written to dir
             * and no plan picture is drawn: the job has them from its first
             * compilation.
             */
            char *spec_path;
            ProtobufCBinaryData info; /* owned: packed JobInfo for info.pb (COMPILE) */
            /* Owned: resume_from's checkpoint, read while planning, written once instantiated. */
            Tide__V1__ReadVariablesResponse *checkpoint;
            /* Out (COMPILE). */
            char *loss;           /* NULL: a forward-only job */
            uint32_t n_feeds;
            struct tided_tensor_spec *feeds;
            uint32_t n_fetches;
            struct tided_tensor_spec *fetches;
            uint32_t n_user_variables; /* the spec graph's Variables (optimizer state excluded) */
            char **user_variables;
            uint32_t n_streamed; /* JobSpec.streamed_variables, in its order */
            struct tided_tensor_spec *streamed;
            Tide__V1__PlanReport *plan; /* free with tided_plan_report_free */
            char *plan_svg;             /* owned: the plan's memory picture, or NULL */
            size_t plan_svg_len;
            uint64_t restored_step;
            uint32_t restored_variables;
            /* Out (PLAN). */
            ProtobufCBinaryData packed;
        } compile; /* COMPILE and PLAN */
        struct {
            /* In. */
            Tide__V1__TrainRequest *batch; /* owned: holds the feeds' bytes */
            uint32_t n_feeds;
            const char **feed_names;  /* owned array; strings borrowed */
            const void **feed_data;   /* owned array; data inside batch */
            uint64_t *feed_bytes;     /* owned */
            bool eval;
            const char *loss;         /* borrowed; NULL: no loss */
            uint32_t n_fetches;
            const struct tided_tensor_spec *fetches; /* borrowed */
            bool trace;               /* record this step in the session's trace; false: stop */
            bool trace_begin;         /* in a new recording: the first step of a trace */
            bool trace_end;           /* then stop and write the recording out as JSON */
            uint64_t trace_max_bytes; /* the largest JSON to write */
            /* Out. */
            struct tide_step_stats stats;
            float loss_value;
            void **fetch_data;        /* owned: n_fetches buffers */
            enum tide_status trace_status; /* why tracing failed (the step still ran), or OK */
            struct tide_error trace_err;
            char *trace_json;              /* owned: the trace, when trace_end */
            size_t trace_len;
        } step;
        struct {
            /* In: session, or (when NULL) checkpoint_path. */
            char *checkpoint_path;       /* owned */
            char *spec_path;             /* owned: spec.pb, for default names without defaults */
            uint32_t n_names;            /* requested; 0: the defaults */
            char **names;                /* owned */
            uint32_t n_defaults;
            char *const *defaults;       /* borrowed: the job's user variables, may be NULL */
            uint64_t step;
            uint64_t offset;             /* a paged read (max_bytes > 0): where the page starts */
            uint64_t max_bytes;          /* ... and its most bytes; 0: every byte, in the tensors */
            /* Out. */
            ProtobufCBinaryData packed;  /* owned: a ReadVariablesResponse */
        } read;
        struct {
            /* In. */
            char *dir;     /* owned */
            uint64_t step;
            uint32_t keep; /* checkpoint-<step>.pb files to keep; 0 means 1 */
            bool final;    /* queued by the session's release (job->final_checkpoint_queued) */
            /* Out. */
            char *path;    /* owned */
            uint64_t bytes;
        } checkpoint;
        struct {
            char *dir;     /* owned */
            char *name;    /* owned */
            ProtobufCBinaryData data; /* owned */
        } persist;
        struct {
            /* In. */
            uint32_t n_dirs;
            char **dirs;   /* owned: job directories, deleted in order */
            char **ids;    /* owned, NULL or n_dirs: the jobs to forget once deleted */
            /* Worker only: each device's tasks submitted before it, which run first. */
            uint64_t *fence;
            /* Out. */
            uint32_t n_removed; /* dirs[0 .. n_removed - 1] are gone (all of them unless an error) */
            uint64_t bytes;     /* what their files held */
        } remove;
        struct {
            /* In: the Variable's name, the offset and the bytes. */
            Tide__V1__VariableChunk *chunk; /* owned */
        } write;
    };
};

/* A NamedTensor with its Tensor and TensorShape in one block, for building messages. */
struct tided_named_tensor {
    Tide__V1__NamedTensor named;
    Tide__V1__Tensor tensor;
    Tide__V1__TensorShape shape;
    int64_t dims[TIDE_MAX_RANK];
};

/* Points nt at name and data (borrowed: they must outlive the message's packing). */
void tided_named_tensor_fill(struct tided_named_tensor *nt, const char *name, enum tide_dtype dtype,
                             const struct tide_shape *shape, const void *data, uint64_t nbytes);

/* Called on the main thread for each task that came back; the callee frees the task. */
typedef void (*tided_task_done_fn)(void *context, struct tided_task *task);

/* A zeroed task of kind for job (may be NULL); NULL on OOM. */
struct tided_task *tided_task_new(enum tided_task_kind kind, void *job);
/* Frees the task and what it owns (never the session). NULL is a no-op. */
void tided_task_free(struct tided_task *task);
/* Frees a PlanReport built by the worker. NULL is a no-op. */
void tided_plan_report_free(Tide__V1__PlanReport *report);
void tided_tensor_specs_free(struct tided_tensor_spec *specs, uint32_t n);

/*
 * Starts the compile thread and one thread per device (n_devices, at least
 * 1). Call on the main thread, with the loop, before any task is
 * submitted. Returns NULL with error filled on failure.
 */
struct tided_worker *tided_worker_new(struct ev_loop *loop, uint32_t n_devices,
                                      tided_task_done_fn done, void *context, char *error,
                                      size_t error_size);

/* Queues a task (main thread). */
void tided_worker_submit(struct tided_worker *worker, struct tided_task *task);

/*
 * From now on COMPILE and PLAN tasks come back UNAVAILABLE without running,
 * and those running stop at their next pass (within a second).
 */
void tided_worker_refuse_compiles(struct tided_worker *worker);

/*
 * Asks a submitted COMPILE or PLAN task to stop at its next pass; it then
 * comes back TIDE_CANCELLED (the session, if any, freed). Main thread, on a
 * task not yet handed back; a task past its compilation finishes as usual.
 */
void tided_task_cancel(struct tided_task *task);

/*
 * Whether the worker is making progress: each device thread idle, or busy
 * with one task for less than stall_us. For the systemd watchdog. Any thread.
 */
bool tided_worker_healthy(struct tided_worker *worker, int64_t stall_us);

/*
 * Lets the thread finish every queued task, joins it, hands back what came
 * back (done callbacks run here, on the calling main thread) and frees the
 * worker. NULL is a no-op.
 */
void tided_worker_free(struct tided_worker *worker);

#endif /* TIDE_DAEMON_WORKER_H */
