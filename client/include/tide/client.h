/* SPDX-License-Identifier: MIT */
/*
 * tide/client.h: libtide's RPC client, the public C API for talking to the
 * tide daemon (`tided`) over gRPC without touching gRPC or protobuf.
 *
 * A client is one connection to one daemon: a Unix socket on the same
 * machine ("unix:/run/tide/tided.sock", where the daemon knows the caller by
 * its uid) or TCP with TLS and a bearer token ("gpu1.example:7070"). Through
 * it a program submits training jobs — a graph from the builder
 * (tide/graph.h, tide/models.h), what to minimise and a memory policy —,
 * asks for a job's memory plan without running it, streams batches into a
 * job and gets one result per step back, watches jobs, lists, cancels,
 * checkpoints and traces them, reads their variables, and asks the daemon
 * for its status.
 *
 * Results. Every function that talks to the daemon returns 0 on success, or
 * the gRPC status code of the failure (a positive enum tide_code:
 * TIDE_CODE_NOT_FOUND for an unknown job, TIDE_CODE_INVALID_ARGUMENT for a
 * bad graph, ...). The client then also keeps the code and the daemon's
 * message ("graph: node 'fc1/matmul_0': ...") until its next call:
 * tide_client_error_code() and tide_client_error_message(). Failures found
 * before anything is sent — a NULL argument, a spec without a graph — are
 * reported the same way, with TIDE_CODE_INVALID_ARGUMENT and a message
 * starting with "libtide:". A function that takes a callback and fails
 * before the call starts never calls the callback.
 *
 * Time limits. Unary calls have a deadline (tide_client_options.call_timeout_ms,
 * 120 s by default); a call that passes it fails with
 * TIDE_CODE_DEADLINE_EXCEEDED. Streams (train, watch) have none of their own:
 * they last as long as there are batches or events, but a stream timeout
 * bounds the wait for any single message when one is set.
 *
 * Training and flow control. tide_client_train() runs the bidirectional
 * Train stream with one message in flight each way: while the daemon runs
 * step k, the next batch (k + 1) is already on its way, and nothing more is
 * sent until step k's result has come back. So the feed callback for step
 * k + 1 runs before the step callback of step k — a program that needs a
 * batch's labels when its result comes (to score accuracy) keeps the last
 * two batches — and the daemon never waits on the network between steps.
 *
 * Threads. A client belongs to one thread at a time, as a builder does: the
 * last error is the client's, and callbacks run on the calling thread,
 * inside the call. Programs that work in parallel (train two jobs at once,
 * watch while training) connect once per thread; each client has its own
 * connection. gRPC's own threads never call into user code.
 *
 * Ownership. tide_client_connect() hands out a client, even when it fails
 * (so that the error can be read), which the caller frees with
 * tide_client_free(); every free function accepts NULL. Strings and arrays
 * passed in are only read during the call. Structs filled in for the caller
 * (job info, status, checkpoint) hold no pointers and need no freeing, except
 * a plan report's partition list and memory timeline (tide_job_plan_report_clear())
 * and a trace's JSON (tide_job_trace_clear()). Arrays returned
 * through pointer arguments (job lists) are malloc'd and freed with free().
 * Pointers passed to callbacks (step results, events, their tensors and
 * strings) are valid only until the callback returns: copy what you keep.
 *
 * Example usage:
 *
 *     #include <tide/tide.h>
 *     #include <tide/client.h>
 *
 *     static int feed(void *user, tide_feeds *feeds)
 *     {
 *         struct my_data *d = user;
 *         if (d->step++ == 100)
 *             return 0;                             // stop after 100 steps
 *         int64_t image_dims[] = {64, 1, 28, 28}, label_dims[] = {64};
 *         tide_feeds_set(feeds, "images", TIDE_DT_FLOAT32, 4, image_dims, d->images);
 *         tide_feeds_set(feeds, "labels", TIDE_DT_INT32, 1, label_dims, d->labels);
 *         return 1;
 *     }
 *
 *     static int on_step(void *user, const struct tide_step_result *r)
 *     {
 *         printf("step %llu loss %.4f\n", (unsigned long long)r->step, r->loss);
 *         return 0;                                 // keep going
 *     }
 *
 *     tide_client *c;
 *     if (tide_client_connect("unix:/run/tide/tided.sock", NULL, &c) != 0)
 *         die("%s", tide_client_error_message(c));  // c is freed below either way
 *
 *     tide_builder *b = tide_builder_new();
 *     tide_model_cnn(b, 64, 1, 28, 28, 10);
 *     struct tide_job_spec spec;
 *     tide_job_spec_init(&spec);                    // loss "loss", feeds images + labels
 *     tide_builder_serialize(b, &spec.graph, &spec.graph_len);
 *     spec.budget_bytes = 10 << 20;                 // the daemon swaps to fit 10 MiB
 *
 *     struct tide_job_info job;
 *     if (tide_client_submit(c, &spec, &job) != 0)
 *         fprintf(stderr, "%s: %s\n", tide_code_name(tide_client_error_code(c)),
 *                 tide_client_error_message(c));
 *     else
 *         tide_client_train(c, job.id, feed, on_step, &data);
 *     free(spec.graph);
 *     tide_builder_free(b);
 *     tide_client_free(c);
 */
#ifndef TIDE_CLIENT_H
#define TIDE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tide/graph.h"
#include "tide/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Types
 * ========================================================================== */

/* A connection to one daemon. Opaque; see tide_client_connect(). */
typedef struct tide_client tide_client;

/* The feeds of one step, filled by a feed callback. Opaque; see tide_feeds_set(). */
typedef struct tide_feeds tide_feeds;

/* Variables read from a job. Opaque; see tide_client_read_variables(). */
typedef struct tide_variables tide_variables;

/*
 * Result codes: gRPC's status codes, with their numbers, as the daemon sends
 * them. The daemon uses INVALID_ARGUMENT (a bad graph or message; the message
 * names the node), NOT_FOUND (an unknown job), PERMISSION_DENIED (another
 * user's job), RESOURCE_EXHAUSTED (over a budget, refused admission, or a
 * message too large), FAILED_PRECONDITION (the job is in the wrong state) and
 * UNAVAILABLE (the daemon is shutting down, or cannot be reached).
 */
enum tide_code {
    TIDE_CODE_OK = 0,
    TIDE_CODE_CANCELLED = 1,
    TIDE_CODE_UNKNOWN = 2,
    TIDE_CODE_INVALID_ARGUMENT = 3,
    TIDE_CODE_DEADLINE_EXCEEDED = 4,
    TIDE_CODE_NOT_FOUND = 5,
    TIDE_CODE_ALREADY_EXISTS = 6,
    TIDE_CODE_PERMISSION_DENIED = 7,
    TIDE_CODE_RESOURCE_EXHAUSTED = 8,
    TIDE_CODE_FAILED_PRECONDITION = 9,
    TIDE_CODE_ABORTED = 10,
    TIDE_CODE_OUT_OF_RANGE = 11,
    TIDE_CODE_UNIMPLEMENTED = 12,
    TIDE_CODE_INTERNAL = 13,
    TIDE_CODE_UNAVAILABLE = 14,
    TIDE_CODE_DATA_LOSS = 15,
    TIDE_CODE_UNAUTHENTICATED = 16,
};

/* Returns a code's gRPC name ("NOT_FOUND"), or "UNKNOWN_CODE" for a number that is none. */
const char *tide_code_name(int code);

/* The longest job id, name and message the structs below hold, NUL included. */
#define TIDE_JOB_ID_MAX      128
#define TIDE_JOB_NAME_MAX    256
#define TIDE_JOB_MESSAGE_MAX 1024

/* A job's life; the numbers are tide.v1.JobState's. */
enum tide_job_state {
    TIDE_JOB_UNSPECIFIED = 0,
    TIDE_JOB_SUBMITTED = 1, /* accepted, not yet compiled */
    TIDE_JOB_COMPILING = 2, /* being planned */
    TIDE_JOB_READY = 3,     /* planned, waiting for batches */
    TIDE_JOB_RUNNING = 4,   /* a Train stream is feeding it */
    TIDE_JOB_DONE = 5,
    TIDE_JOB_FAILED = 6, /* see the job's message */
    TIDE_JOB_CANCELLED = 7,
    TIDE_JOB_PARKED = 8, /* idle: checkpointed, device memory released; Train resumes it */
    TIDE_JOB_QUEUED = 9, /* waiting for room on the device (or preempted); Train waits too */
};

/* Returns a state's name in lower case ("running"), or "unknown". */
const char *tide_job_state_name(enum tide_job_state state);

/* Optimizers a job trains with. */
enum tide_job_optimizer {
    TIDE_JOB_OPTIMIZER_SGD = 0,
    TIDE_JOB_OPTIMIZER_MOMENTUM = 1,
    TIDE_JOB_OPTIMIZER_ADAM = 2,
};

/* Swap modes; the numbers are tide.v1.SwapMode's. */
enum tide_job_swap {
    TIDE_JOB_SWAP_AUTO = 0, /* swap only what the budget needs */
    TIDE_JOB_SWAP_ON = 1,   /* swap every tensor whose next use is past the threshold */
    TIDE_JOB_SWAP_OFF = 2,  /* keep every feature map resident */
};

/* Where Variables live; the numbers are tide.v1.VarsHome's. */
enum tide_job_vars_home {
    TIDE_JOB_VARS_HOME_AUTO = 0,   /* host memory only when the budget needs it */
    TIDE_JOB_VARS_HOME_HOST = 1,   /* fetched before use, written back after update */
    TIDE_JOB_VARS_HOME_DEVICE = 2, /* resident for the life of the job */
};

/*
 * How to reach the daemon. A zeroed struct, or NULL, gives the defaults;
 * only TCP targets use the TLS fields.
 */
struct tide_client_options {
    const char *token;           /* bearer token sent with every call over TLS; NULL: none */
    const char *ca_file;         /* PEM roots that sign the daemon's certificate; NULL: system */
    const char *cert_file;       /* client certificate (PEM) for mutual TLS; NULL: none */
    const char *key_file;        /* its private key (PEM) */
    const char *server_name;     /* the name the certificate must carry; NULL: the target's host */
    bool insecure;               /* TCP without TLS (loopback tests only); tokens are refused */
    uint32_t connect_timeout_ms; /* how long connecting may take; 0: 5000 */
    uint32_t call_timeout_ms;    /* deadline of every unary call; 0: 120000 */
    uint32_t stream_timeout_ms;  /* longest wait for one stream message; 0: no limit */
};

/*
 * What to train and how; the fields of tide.v1.JobSpec. Fill it with
 * tide_job_spec_init() first, then set what differs. Nothing in it is owned
 * by libtide: the pointers are only read during the call that takes the spec.
 */
struct tide_job_spec {
    const char *name; /* shown in listings; NULL: none */
    uint8_t *graph;   /* the bytes of a tide.v1.Graph (tide_builder_serialize) */
    size_t graph_len;

    const char *loss; /* the scalar to minimise; default "loss" (TIDE_MODEL_LOSS) */
    enum tide_job_optimizer optimizer; /* default momentum */
    float learning_rate;               /* default 0.02 */
    float momentum;                    /* momentum: default 0.9 */
    bool nesterov;                     /* momentum */
    float beta1, beta2, epsilon;       /* Adam; 0 means 0.9, 0.999, 1e-8 */
    float clip_norm;                   /* clip gradients' global L2 norm; 0: off */
    const char *const *variables;      /* names to train; n_variables 0: every trainable one */
    size_t n_variables;

    const char *const *feeds; /* Placeholders fed every step; default images, labels */
    size_t n_feeds;
    const char *const *fetches; /* outputs returned with every step ("logits", "node:1") */
    size_t n_fetches;

    uint64_t budget_bytes;             /* the job's device arena; 0: the daemon's default */
    uint32_t partition_size;           /* nodes per partition; 0: auto, the planner picks */
    enum tide_job_swap swap;           /* default auto */
    uint32_t swap_threshold;           /* partitions; 0: the daemon's default */
    uint32_t prefetch_distance;        /* partitions; 0: the daemon's default */
    enum tide_job_vars_home vars_home; /* default auto */
    bool autotune; /* search threshold and prefetch by simulation; default true */
    /*
     * The memory actions beyond keep and swap; the numbers are
     * tide.v1.RecomputeMode's: 0 by the device (default: 1 on a GPU, 3 on
     * the CPU backend), 1 recompute cheap feature maps where that moves
     * fewer bytes, 2 Chen et al.'s sqrt(n) checkpointing (no swapping),
     * 3 keep or swap only.
     */
    int recompute;

    uint64_t checkpoint_every; /* write a checkpoint every N steps; 0: only when asked */
    uint32_t checkpoint_keep;  /* checkpoints kept per job; 0: 2 (the newest and the one before) */
    const char *resume_from;   /* a job id whose last checkpoint initialises the variables */
    uint64_t seed;             /* seed of the variable initialisers */
    /* The device the plan is for: "cpu", "h100", "h200"; NULL or "": the daemon's own. */
    const char *device_profile;
    /*
     * The math of the convolutions and matrix products that do not set their
     * own "math" attribute: "fp32" (NULL or "": plain float32) or "tf32" (a GPU
     * may multiply on TF32 tensor cores: faster, 10-bit mantissas, still the
     * same bits every run; the CPU computes float32). The daemon checks it.
     */
    const char *math;
    /*
     * Admission priority, -1000 to 1000 (0 the default): higher is admitted
     * first and may preempt lower jobs; above 0 only for root and tided's
     * admin-group.
     */
    int32_t priority;

    bool has_device; /* run on device (an index of tide_daemon_status.devices); false: any */
    uint32_t device; /* the daemon refuses one it does not have, naming how many it has */
};

/* One partition of a plan (tide.v1.PartitionReport). */
struct tide_job_partition_report {
    uint32_t index;
    uint32_t nodes;
    uint64_t resident_bytes; /* live in the arena while the partition runs */
    uint64_t swap_in_bytes;
    uint64_t swap_out_bytes;
    uint64_t fetch_bytes;
    uint64_t write_back_bytes;
    char peak_node[TIDE_BUILDER_MAX_NAME + 1]; /* the node with the largest working set */
};

/*
 * A job's memory plan (tide.v1.PlanReport). partitions and timeline are
 * filled by tide_client_plan() only (empty in job info; the timeline is
 * empty too when the plan does not fit) and freed by
 * tide_job_plan_report_clear().
 */
struct tide_job_plan_report {
    uint32_t nodes; /* after the memory passes */
    uint64_t budget_bytes;
    uint64_t predicted_peak_bytes;
    bool fits;
    uint64_t min_budget_bytes; /* when it does not fit: the smallest budget that would */
    char min_budget_node[TIDE_BUILDER_MAX_NAME + 1]; /* ... and the node that sets it */
    uint64_t swap_in_bytes;                          /* per step */
    uint64_t swap_out_bytes;
    uint64_t fetch_bytes;
    uint64_t write_back_bytes;
    uint32_t partition_size; /* what the swapper settled on */
    uint32_t swap_threshold;
    uint32_t prefetch_distance;
    uint64_t host_bytes;                /* host memory the plan needs */
    uint64_t plan_us;                   /* planning time, autotune included */
    char message[TIDE_JOB_MESSAGE_MAX]; /* why it does not fit */
    uint32_t n_partitions;
    struct tide_job_partition_report *partitions;
    struct tide_memory_timeline timeline; /* device memory over the schedule (tide/timeline.h) */
    uint64_t floor_bytes; /* the largest single kernel's working set: no budget below fits */
    char floor_node[TIDE_BUILDER_MAX_NAME + 1]; /* ... and that kernel */
    double predicted_step_ms;                   /* the step predicted on device_profile's device */
    double predicted_stall_ms;                  /* ... of which compute waits for copies */
    char device_profile[16];                    /* "cpu", "h100", "h200" */
    uint64_t host_budget_bytes; /* the host memory the plan had to fit (0: no limit) */
    uint64_t recompute_bytes; /* bytes the plan's recompute copies make again per step */
    double recompute_ms;      /* ... and their estimated time on the compute stream */
    uint32_t products;        /* convolutions and matrix products in the graph */
    uint32_t tf32_products;   /* ... of which in math tf32 */
};

/* What the daemon knows about a job (tide.v1.JobInfo). */
struct tide_job_info {
    char id[TIDE_JOB_ID_MAX];
    char name[TIDE_JOB_NAME_MAX];
    uint32_t owner_uid;
    enum tide_job_state state;
    uint64_t steps; /* training steps done */
    float last_loss;
    uint64_t device_budget_bytes;
    uint64_t device_high_water_bytes;
    uint64_t host_bytes;
    uint64_t h2d_bytes_total; /* host-to-device copies so far (swap-ins, fetches, batches) */
    uint64_t d2h_bytes_total; /* device-to-host copies so far (swap-outs, write-backs) */
    double steps_per_second;
    int64_t created_us; /* Unix time in microseconds */
    int64_t updated_us;
    char message[TIDE_JOB_MESSAGE_MAX]; /* why the job failed or was cancelled */
    uint64_t last_checkpoint_step;
    bool has_plan; /* plan holds the job's plan (without partitions) */
    struct tide_job_plan_report plan;
    uint32_t queue_position; /* QUEUED: its place in the admission order, 1 first; else 0 */
    int32_t priority;        /* the job's admission priority (0 the default) */
    int64_t queued_us;       /* when it last entered the queue (Unix microseconds); 0: never */
    uint32_t device; /* the device it runs on, or last ran on (tide_daemon_status.devices) */
};

/* A tensor handed to a callback or read from a job. */
struct tide_tensor {
    const char *name;
    enum tide_data_type dtype;
    int32_t rank;
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    const void *data; /* little-endian, row-major, aligned for dtype */
    size_t bytes;
};

/* The result of one step (tide.v1.StepResult). */
struct tide_step_result {
    uint64_t step; /* the job's step count after this step */
    float loss;
    uint64_t step_us;
    uint64_t device_high_water_bytes;
    uint64_t h2d_bytes; /* copied host to device during the step */
    uint64_t d2h_bytes; /* copied device to host during the step */
    uint64_t stall_us;  /* time the compute stream waited on copies */
    bool eval_only;     /* a forward-only step: variables unchanged */
    uint32_t n_fetches;
    const struct tide_tensor *fetches; /* the spec's fetches, in its order */
};

/* Returns the fetch called name in r, or NULL when r holds none by that name. */
const struct tide_tensor *tide_step_result_fetch(const struct tide_step_result *r,
                                                 const char *name);

/* Kinds of job events; the numbers are tide.v1.JobEvent.Kind's. */
enum tide_event_kind {
    TIDE_EVENT_STATE = 1,      /* the job changed state */
    TIDE_EVENT_STEP = 2,       /* a step finished */
    TIDE_EVENT_CHECKPOINT = 3, /* a checkpoint was written */
    TIDE_EVENT_LOG = 4,        /* a message from the daemon about the job */
    TIDE_EVENT_PREEMPTED = 5,  /* parked for a higher-priority job; it waits QUEUED */
    TIDE_EVENT_RESUMED = 6,    /* a preempted job was admitted again and continues */
};

/* One event of a watch (tide.v1.JobEvent). */
struct tide_job_event {
    enum tide_event_kind kind;
    const struct tide_job_info *job;     /* the job after the event */
    const struct tide_step_result *step; /* for TIDE_EVENT_STEP, else NULL */
    const char *message;                 /* "" when none */
    int64_t time_us;                     /* Unix time in microseconds */
};

/* The most devices tide_daemon_status lists (what one tided serves at most). */
#define TIDE_DEVICES_MAX 64

/* One device a daemon serves (tide.v1.DeviceStatus). */
struct tide_device_status {
    uint32_t index; /* what tide_job_spec.device and tide_job_info.device name */
    char name[128];
    uint64_t total_bytes;    /* what it offers jobs */
    uint64_t reserved_bytes; /* the sum of the budgets admitted to it */
    uint64_t used_bytes;     /* high water of its running jobs' arenas */
    uint32_t jobs;           /* jobs holding a budget on it */
};

/* The daemon's state (tide.v1.DaemonStatus), jobs aside. */
struct tide_daemon_status {
    char version[64];
    char backend[16]; /* "cpu" or "cuda" */
    char device_name[256];
    uint64_t device_total_bytes;
    uint64_t device_used_bytes;     /* high water of the running jobs' arenas */
    uint64_t device_reserved_bytes; /* the sum of admitted jobs' budgets */
    uint64_t host_pool_bytes;
    uint64_t host_pool_used_bytes;
    int64_t started_us;
    uint64_t max_job_budget_bytes;
    uint64_t default_job_budget_bytes;
    /* Every device, by index; the device_* fields above are their sums. */
    size_t n_devices;
    struct tide_device_status devices[TIDE_DEVICES_MAX];
};

/* Where a checkpoint went (tide.v1.CheckpointResponse). */
struct tide_checkpoint_info {
    uint64_t step;
    char path[4096]; /* on the daemon's machine, under its state directory */
    uint64_t bytes;
};

/*
 * A trace of a job's steps (tide.v1.TraceReply): Chrome Trace Event JSON,
 * which ui.perfetto.dev and chrome://tracing open. Filled by
 * tide_client_trace(); free the JSON with tide_job_trace_clear().
 */
struct tide_job_trace {
    char *json;      /* malloc'd, json_len bytes and a NUL */
    size_t json_len;
    uint32_t steps;  /* training steps traced (evaluations between them are in it too) */
    uint64_t first_step, last_step; /* the job's numbers of the first and last of them */
};

/*
 * What tide_client_remove() and tide_client_prune() deleted. Free job_ids
 * with tide_removal_clear().
 */
struct tide_removal {
    size_t n_jobs;                    /* the jobs deleted */
    char (*job_ids)[TIDE_JOB_ID_MAX]; /* malloc'd: their ids, n_jobs of them (NULL if none) */
    uint64_t bytes_freed;             /* what their files held on the daemon's disk */
};

/*
 * Called by tide_client_train() before each step to fill feeds, which start
 * empty every time. Returns a positive value to send the step, 0 to stop
 * (the steps already sent still finish and are reported), or a negative
 * value to abandon the stream at once (train then returns TIDE_CODE_CANCELLED).
 */
typedef int (*tide_feed_fn)(void *user, tide_feeds *feeds);

/*
 * Called by tide_client_train() with each step's result, in step order.
 * Returns 0 to go on, or non-zero to stop feeding (as if the feed callback
 * had returned 0).
 */
typedef int (*tide_step_fn)(void *user, const struct tide_step_result *result);

/* Called by tide_client_watch() with each event. Returns 0 to go on, non-zero to stop. */
typedef int (*tide_event_fn)(void *user, const struct tide_job_event *event);

/* ============================================================================
 * Connecting
 * ========================================================================== */

/*
 * Connects to the daemon at target: "unix:/path/to/socket" (or a path
 * starting with '/'), or "host:port" over TLS (see tide_client_options;
 * options may be NULL). Waits up to connect_timeout_ms until the daemon
 * answers. Returns 0 and sets *out; or a code — TIDE_CODE_UNAVAILABLE when
 * nothing answers, with a message naming the target and suggesting to check
 * that tided runs — and still sets *out to a client that holds the error, to
 * be freed with tide_client_free(). *out is NULL only when memory ran out.
 */
int tide_client_connect(const char *target, const struct tide_client_options *options,
                        tide_client **out);

/* Closes the connection and frees the client. NULL is a no-op. */
void tide_client_free(tide_client *c);

/* Returns the target the client was connected to, as given. */
const char *tide_client_target(const tide_client *c);

/* Returns the code of the client's last call: 0 after a success. */
int tide_client_error_code(const tide_client *c);

/*
 * Returns the message of the client's last failed call (the daemon's, or
 * libtide's for local failures), or "" after a success. The string belongs
 * to the client and changes with its next call.
 */
const char *tide_client_error_message(const tide_client *c);

/* ============================================================================
 * Jobs
 * ========================================================================== */

/*
 * Fills spec with the defaults: loss "loss", feeds "images" and "labels",
 * momentum 0.9 at learning rate 0.02, swap auto with autotune, the daemon's
 * default budget, seed 1; no graph.
 */
void tide_job_spec_init(struct tide_job_spec *spec);

/*
 * Submits a job: the daemon imports and checks the graph (an error names
 * the node), compiles the plan for the job's budget and admits the job, or
 * refuses it (RESOURCE_EXHAUSTED, with the numbers). Returns 0 and fills
 * *job (which may be NULL) with the new job, whose id the other calls take.
 *
 * Weights of any size: a Submit is one message, which the daemon caps at
 * its max-message (256 MiB by default), so the value of every float32
 * Variable given by value (tide_builder_variable_value) of 64 KiB or more
 * goes apart. The graph is sent without those values, the job names them
 * as its streamed Variables (JobSpec.streamed_variables), and once it is
 * admitted they follow in a WriteVariables stream, in chunks of under
 * 1 MiB that the daemon writes straight into the job's memory; the call
 * returns when they are all written. Nothing is copied on the way: the
 * chunks point into spec->graph. If the stream fails, the job is cancelled
 * and the error says why. With resume_from set the graph goes as it is
 * (the checkpoint gives the values).
 */
int tide_client_submit(tide_client *c, const struct tide_job_spec *spec, struct tide_job_info *job);

/*
 * As tide_client_submit(), from the bytes of a tide.v1.JobSpec made
 * elsewhere, sent as they are: values in its graph count against
 * max-message, and streamed_variables it names are the caller's to write.
 */
int tide_client_submit_bytes(tide_client *c, const void *job_spec, size_t len,
                             struct tide_job_info *job);

/*
 * Compiles spec without running it and fills *report with the plan:
 * predicted peak, bytes swapped per step, the partitions, and whether it
 * fits the budget (a plan that does not fit is a result, not an error),
 * and when it fits, its memory timeline (what `tidectl plan --svg` draws).
 * The graph goes without the values tide_client_submit() would stream: a
 * plan needs none. Free the report's partitions and timeline with
 * tide_job_plan_report_clear().
 */
int tide_client_plan(tide_client *c, const struct tide_job_spec *spec,
                     struct tide_job_plan_report *report);

/* As tide_client_plan(), from the bytes of a tide.v1.JobSpec. */
int tide_client_plan_bytes(tide_client *c, const void *job_spec, size_t len,
                           struct tide_job_plan_report *report);

/* Frees a plan report's partition list and timeline and zeroes the report. NULL is a no-op. */
void tide_job_plan_report_clear(struct tide_job_plan_report *report);

/*
 * Trains job_id: opens the Train stream, then calls feed for each step's
 * batch and on_step (which may be NULL) with each result, until feed
 * returns 0 or on_step non-zero and every step sent has been reported, or
 * the daemon ends the stream. See "Training and flow control" above for
 * the order of the callbacks. Returns 0, or the code the daemon ended the
 * stream with (FAILED_PRECONDITION when the job cannot train now, a bad
 * batch's INVALID_ARGUMENT naming the feed).
 */
int tide_client_train(tide_client *c, const char *job_id, tide_feed_fn feed, tide_step_fn on_step,
                      void *user);

/*
 * Finishes job_id: the daemon writes a final checkpoint, releases the job's
 * device budget and marks it DONE (TrainRequest.finish). Its variables stay
 * readable with tide_client_read_variables(), and a new job with
 * resume_from set to job_id continues from them. Call it when training is
 * over; a job that is only left alone stays READY and holds its budget.
 * Returns 0, or FAILED_PRECONDITION when the job is compiling, being
 * trained by another stream, or has ended already.
 */
int tide_client_finish(tide_client *c, const char *job_id);

/*
 * Sets the feed called name for the step being filled: a tensor of dtype
 * with rank dims, whose product(dims) elements are copied from data.
 * Returns 0, or -1 for a bad argument or no memory (the train call then
 * fails with that message).
 */
int tide_feeds_set(tide_feeds *feeds, const char *name, enum tide_data_type dtype, int32_t rank,
                   const int64_t *dims, const void *data);

/*
 * As tide_feeds_set() without the copy: returns a buffer of product(dims)
 * elements for the caller to fill before the callback returns, or NULL for
 * a bad argument or no memory. The buffer is reused from step to step.
 */
void *tide_feeds_buffer(tide_feeds *feeds, const char *name, enum tide_data_type dtype,
                        int32_t rank, const int64_t *dims);

/* Makes the step being filled forward-only (evaluation): no gradients, no updates. */
void tide_feeds_set_eval_only(tide_feeds *feeds, bool eval_only);

/*
 * Watches one job (job_id) or every job the caller may see (job_id NULL or
 * ""), calling on_event with each event, a STEP event at most once per
 * step_stride steps (0: every step). Returns 0 when on_event stops the watch
 * or the daemon ends it, else the code it ended with.
 */
int tide_client_watch(tide_client *c, const char *job_id, uint32_t step_stride,
                      tide_event_fn on_event, void *user);

/*
 * Lists the caller's jobs, or every job when all is set (admins and
 * monitors only). Returns 0 and sets *jobs to a malloc'd array of *n_jobs
 * entries (NULL when there are none) that the caller frees with free().
 */
int tide_client_list(tide_client *c, bool all, struct tide_job_info **jobs, size_t *n_jobs);

/* Fills *job with what the daemon knows about job_id. */
int tide_client_get(tide_client *c, const char *job_id, struct tide_job_info *job);

/* Cancels job_id; fills *job (which may be NULL) with the job after it. */
int tide_client_cancel(tide_client *c, const char *job_id, struct tide_job_info *job);

/*
 * Sets job_id's admission priority (-1000 to 1000; above 0 only for root
 * and the daemon's admin-group, PERMISSION_DENIED otherwise): a queued job
 * moves in the queue, and may preempt lower jobs at once. Fills *job (which
 * may be NULL) with the job after it.
 */
int tide_client_set_priority(tide_client *c, const char *job_id, int32_t priority,
                             struct tide_job_info *job);

/*
 * Writes a checkpoint of job_id's variables and optimizer state now; fills
 * *checkpoint (which may be NULL) with its step, path and size.
 */
int tide_client_checkpoint(tide_client *c, const char *job_id,
                           struct tide_checkpoint_info *checkpoint);

/*
 * Traces job_id's next steps training steps (1 to 100): the daemon records
 * them as the job runs them and answers once they have, so the call waits
 * for as long as that takes, within its deadline (call_timeout_ms). Fills
 * *trace, to be freed with tide_job_trace_clear(). Fails with ABORTED when
 * the job ends before its steps ran, DEADLINE_EXCEEDED when they do not
 * run in time (the daemon then stops tracing), FAILED_PRECONDITION when the
 * job has ended or another trace of it is under way. Its owner and admins
 * may trace a job.
 */
int tide_client_trace(tide_client *c, const char *job_id, uint32_t steps,
                      struct tide_job_trace *trace);

/* Frees a trace's JSON and zeroes the trace. NULL is a no-op. */
void tide_job_trace_clear(struct tide_job_trace *trace);

/*
 * Deletes the ended jobs (done, failed or cancelled) job_ids[0 .. n_job_ids
 * - 1]: their files on the daemon (spec, state, checkpoints) and their
 * entries, so that no call finds them any more. Every job is checked
 * before anything is deleted: FAILED_PRECONDITION (naming the job and its
 * state) when one has not ended, NOT_FOUND or PERMISSION_DENIED as for
 * tide_client_cancel(). Fills *removal (which may be NULL) with what went.
 * Its owner and admins may remove a job; the daemon also removes ended
 * jobs by itself after its retain-ended time.
 */
int tide_client_remove(tide_client *c, const char *const *job_ids, size_t n_job_ids,
                       struct tide_removal *removal);

/* Deletes every ended job of the caller's own, as tide_client_remove() does. */
int tide_client_prune(tide_client *c, struct tide_removal *removal);

/* Frees a removal's job ids and zeroes it. NULL is a no-op. */
void tide_removal_clear(struct tide_removal *removal);

/*
 * Reads the current values of job_id's Variables called names[0 ..
 * n_names - 1] (n_names 0: every Variable, optimizer state excluded).
 * Returns 0 and sets *out to a set that the caller frees with
 * tide_variables_free(). Weights of any size: the bytes come in pages of
 * 32 MiB (a paged ReadVariables), so no message is larger; if the job
 * trains between two pages the read starts over, and after three tries
 * fails with ABORTED (read a job's variables between its steps).
 */
int tide_client_read_variables(tide_client *c, const char *job_id, const char *const *names,
                               size_t n_names, tide_variables **out);

/* The step the variables were read at; 0 for NULL. */
uint64_t tide_variables_step(const tide_variables *v);

/* The number of variables in the set; 0 for NULL. */
size_t tide_variables_count(const tide_variables *v);

/* The i-th variable (0 .. count - 1), or NULL; it lives as long as the set. */
const struct tide_tensor *tide_variables_at(const tide_variables *v, size_t i);

/* The variable called name, or NULL; it lives as long as the set. */
const struct tide_tensor *tide_variables_find(const tide_variables *v, const char *name);

/* Frees a set of variables. NULL is a no-op. */
void tide_variables_free(tide_variables *v);

/* ============================================================================
 * The daemon
 * ========================================================================== */

/*
 * Fills *status with the daemon's device, memory and budgets; with jobs
 * non-NULL, also sets *jobs to a malloc'd array of the *n_jobs jobs the
 * daemon reports (freed with free()).
 */
int tide_client_status(tide_client *c, struct tide_daemon_status *status,
                       struct tide_job_info **jobs, size_t *n_jobs);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_CLIENT_H */
