/* SPDX-License-Identifier: MIT */
/*
 * daemon.h: tided's one server struct and what the daemon's modules share.
 *
 * The daemon is these modules around one libev loop on the main thread:
 *
 *   config.c  the option table: file, flags, --help, SIGHUP reload
 *   server.c  gRPC C core plumbing: the method table, calls, the
 *             completion-queue thread (with auth.c: peer identity, TLS and
 *             tokens; listen.c: the Unix socket; health.c:
 *             grpc.health.v1.Health; their shared structs in server-impl.h)
 *   jobs.c    the job manager: admission, the state machine, watchers, the
 *             task table; the tide.v1.Jobs / tide.v1.Daemon RPCs are one file
 *             per verb (rpc-<verb>.c); their shared structs in jobs-impl.h
 *   lifecycle.c  parking idle jobs and resuming them; the housekeeping cron
 *   worker.c  the compile thread and one executor thread per device: every
 *             session call (compile, step, eval, read variables, checkpoint)
 *             and all disk writes
 *   devices.c the devices served (a backend each), the budgets admitted to
 *             each, and the choice of a device for a job
 *   spec.c    a JobSpec checked and turned into session options, feed and
 *             fetch specs, and the wire's plan report
 *   store.c   atomic files under the state directory, and job records
 *   metrics.c what tided counts (steps, step times, losses, RPCs) and the
 *             immutable snapshots other threads read it through
 *             (metrics-export.c: as Prometheus text and JSON)
 *   http.c    the HTTP listener (libmicrohttpd): /metrics, /api/, the dashboard
 *   main.c    start-up, signals, sd_notify, the watchdog, graceful shutdown
 *
 * Threads (see each file's DESIGN section): the main thread owns the loop,
 * every job, every call and every grpc_call_start_batch; the completion-
 * queue thread and the worker thread talk to it only through a locked queue
 * plus ev_async_send (STYLE.md rule 8).
 *
 * Example usage (what every module does with the one daemon struct):
 *
 *     void tided_rpc_status(struct tided_daemon *d, struct tided_call *call, ...)
 *     {
 *         st.device_total_bytes = d->device_bytes;
 *         st.default_job_budget_bytes = d->config.default_budget;
 *         if (d->phase != TIDED_SERVING) ...
 *     }
 */
#ifndef TIDE_DAEMON_DAEMON_H
#define TIDE_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/config.h"
#include "graph/graph.h"
#include "runtime/backend.h"

struct ev_loop;
struct tided_server;
struct tided_worker;
struct tided_jobs;
struct tided_metrics;
struct tided_http;
struct tided_devices;

#define TIDED_VERSION "0.1.0"

/* Where the daemon is in its life; only the main thread reads or writes it. */
enum tided_phase {
    TIDED_SERVING = 0,  /* normal operation */
    TIDED_DRAINING = 1, /* SIGTERM: no new work; steps finish, jobs are checkpointed */
    TIDED_STOPPING = 2, /* jobs are quiet: gRPC is shutting down */
};

struct tided_daemon {
    /* ---- configuration ---- */
    struct tided_config config; /* loaded at start; SIGHUP swaps reloadable fields */
    int argc;                   /* kept for SIGHUP reload */
    char **argv;

    /* ---- the event loop (main thread) ---- */
    struct ev_loop *loop; /* libev's default loop */

    /* ---- the devices ---- */
    struct tided_devices *devices;    /* devices.c: a backend each; a job's session is on one */
    struct tide_backend *backend;     /* the first device's: dry-run plans ask it for workspaces */
    char device_name[128];            /* the first device's */
    uint64_t device_bytes;            /* what the devices offer jobs, all of them together */
    uint64_t device_largest_bytes;    /* the largest device's: no job budget above it can fit */
    struct tide_graph_limits limits;  /* from max-graph-nodes, max-tensor-bytes */

    /* ---- modules ---- */
    struct tided_server *server;
    struct tided_worker *worker;
    struct tided_jobs *jobs;
    struct tided_metrics *metrics; /* counters and snapshots for the HTTP listener */
    struct tided_http *http;       /* metrics-listen: NULL when off */

    /* ---- lifecycle ---- */
    enum tided_phase phase;
    int64_t started_us; /* Unix time in microseconds */
    int exit_code;
};

/* Unix time in microseconds. */
int64_t tided_now_us(void);

/* Called by the jobs module when the last job task finished during DRAINING. */
void tided_daemon_jobs_quiet(struct tided_daemon *daemon);

/* Called by the server when gRPC has shut down completely: the loop may end. */
void tided_daemon_server_finished(struct tided_daemon *daemon);

/* Refreshes systemd's STATUS= line (no-op outside systemd). */
void tided_daemon_notify_status(struct tided_daemon *daemon);

#endif /* TIDE_DAEMON_DAEMON_H */
