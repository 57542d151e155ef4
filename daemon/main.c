/* SPDX-License-Identifier: MIT */
/*
 * main.c: tided's start-up, signals, systemd notification and shutdown.
 *
 * Start-up: configuration (exit 2 on a bad one), SIGPIPE ignored, the state
 * directory and the jobs of earlier runs, a backend per device (devices.c:
 * every GPU, or --cpu-devices emulated devices of --device-memory bytes),
 * grpc_init, the worker threads (one per device), the server (gRPC, the Unix socket, TCP with
 * TLS when configured), the signal and timer watchers, then READY=1 and the
 * libev loop on this thread until shutdown.
 *
 * Graceful shutdown (SIGTERM, SIGINT), in three steps driven by callbacks:
 *   1. DRAINING: stop accepting connections; new calls get UNAVAILABLE;
 *      Train streams stop reading; running steps finish; every live job is
 *      checkpointed and marked DONE (jobs.c). When no worker task is left,
 *   2. STOPPING: open calls end with UNAVAILABLE and gRPC shuts down as the
 *      notes prescribe (server.c). When the last call context is gone and
 *      the completion queue is drained,
 *   3. the loop ends; gRPC's server and queue are destroyed, the worker is
 *      joined, the backend freed, grpc_shutdown called, and tided exits 0.
 * A second SIGTERM or SIGINT exits at once with status 1.
 *
 * DESIGN
 *
 * Threads: this file starts none itself; it creates the worker (worker.c)
 * and the server's completion-queue thread (server.c), both after their
 * ev_async watchers are started, as libev requires. The signal watchers,
 * the watchdog and cron timers and everything they call run on the main thread.
 * The watchdog reads the worker's progress through an atomic
 * (tided_worker_healthy).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>
#include <grpc/grpc.h>
#include <systemd/sd-daemon.h>

#include "common/log.h"
#include "daemon/config.h"
#include "daemon/daemon.h"
#include "daemon/devices.h"
#include "daemon/http.h"
#include "daemon/jobs.h"
#include "daemon/metrics.h"
#include "daemon/server.h"
#include "daemon/worker.h"
#include "picture/picture.h"
#include "runtime/profile.h"

static ev_signal sigterm_watcher, sigint_watcher, sighup_watcher;
static ev_timer watchdog_timer;
static ev_timer cron_timer;

/* How often the housekeeping cron (tided_jobs_cron) runs, in seconds. */
#define TIDED_CRON_INTERVAL_S 1.0

void tided_daemon_notify_status(struct tided_daemon *d)
{
    if (!d->jobs)
        return;
    char summary[256];
    tided_jobs_summary(d, summary, sizeof(summary));
    sd_notifyf(0, "STATUS=%s: %s", d->phase == TIDED_SERVING ? "serving" : "shutting down",
               summary);
}

void tided_daemon_jobs_quiet(struct tided_daemon *d)
{
    TIDE_LOG_INFO("every job is saved; shutting gRPC down");
    d->phase = TIDED_STOPPING;
    tided_server_shutdown(d->server);
}

void tided_daemon_server_finished(struct tided_daemon *d)
{
    TIDE_LOG_DEBUG("gRPC is down; leaving the loop");
    ev_break(d->loop, EVBREAK_ALL);
}

static void on_stop_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop, (void)revents;
    struct tided_daemon *d = w->data;
    if (d->phase != TIDED_SERVING) {
        TIDE_LOG_WARN("second %s: exiting now, without waiting for the jobs",
                      w->signum == SIGINT ? "SIGINT" : "SIGTERM");
        _exit(TIDED_EXIT_FAILURE);
    }
    TIDE_LOG_INFO("%s: stopping gracefully (steps finish, jobs are checkpointed)",
                  w->signum == SIGINT ? "SIGINT" : "SIGTERM");
    d->phase = TIDED_DRAINING;
    sd_notify(0, "STOPPING=1");
    tided_daemon_notify_status(d);
    tided_server_stop_accepting(d->server);
    tided_jobs_drain(d); /* tided_daemon_jobs_quiet runs when the last task is back */
}

static void on_reload_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    (void)loop, (void)revents;
    struct tided_daemon *d = w->data;
    char error[1024];
    sd_notify(0, "RELOADING=1");
    TIDE_LOG_INFO("SIGHUP: reloading %s", d->config.config_file ? d->config.config_file
                                                                 : "the flags (no file)");
    if (tided_config_reload(d->argc, d->argv, &d->config, error, sizeof(error)) !=
        TIDED_CONFIG_OK) {
        TIDE_LOG_ERROR("reload: %s; keeping the current settings", error);
    } else {
        enum tide_log_level level;
        if (tide_log_parse_level(d->config.log_level, &level) == 0)
            tide_log_set_level(level);
        if (tided_server_reload_tokens(d->server, error, sizeof(error)) != 0)
            TIDE_LOG_ERROR("reload: %s; keeping the current tokens", error);
    }
    sd_notify(0, "READY=1");
    tided_daemon_notify_status(d);
}

static void on_watchdog(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    struct tided_daemon *d = w->data;
    /* The loop runs (this timer fired); the worker must not be stuck on one task. */
    if (tided_worker_healthy(d->worker, (int64_t)d->config.stall_timeout * 1000000))
        sd_notify(0, "WATCHDOG=1");
    else
        TIDE_LOG_ERROR("the worker has been busy with one task for more than %" PRIu64
                       " s; withholding the watchdog ping",
                       d->config.stall_timeout);
}

/* Housekeeping: parks idle jobs, removes expired ended ones (lifecycle.c). */
static void on_cron(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop, (void)revents;
    tided_jobs_cron(w->data);
}

int main(int argc, char **argv)
{
    static struct tided_daemon daemon;
    struct tided_daemon *d = &daemon;
    char error[1024];
    int rc = TIDED_EXIT_FAILURE;

    switch (tided_config_load(argc, argv, &d->config, error, sizeof(error))) {
    case TIDED_CONFIG_OK:
        break;
    case TIDED_CONFIG_EXIT:
        return TIDED_EXIT_OK;
    default:
        fprintf(stderr, "tided: %s\n", error);
        return TIDED_EXIT_USAGE;
    }
    enum tide_log_level level = TIDE_LOG_INFO;
    tide_log_parse_level(d->config.log_level, &level);
    tide_log_set_level(level);
    d->argc = argc;
    d->argv = argv;
    signal(SIGPIPE, SIG_IGN);

    d->loop = ev_default_loop(EVFLAG_AUTO);
    if (!d->loop) {
        fprintf(stderr, "tided: cannot create the event loop\n");
        tided_config_release(&d->config);
        return TIDED_EXIT_FAILURE;
    }
    d->started_us = tided_now_us();
    d->limits = (struct tide_graph_limits){.max_nodes = (uint32_t)d->config.max_graph_nodes,
                                           .max_tensor_bytes = d->config.max_tensor_bytes};
    TIDE_LOG_INFO("tided %s starting (config %s)", TIDED_VERSION,
                  d->config.config_file ? d->config.config_file : "none");

    d->jobs = tided_jobs_new(d, error, sizeof(error));
    if (!d->jobs) {
        TIDE_LOG_ERROR("%s", error);
        goto out_config;
    }
    d->metrics = tided_metrics_new(d, error, sizeof(error));
    if (!d->metrics) {
        TIDE_LOG_ERROR("%s", error);
        goto out_jobs;
    }

    d->devices = tided_devices_open(&d->config, error, sizeof(error));
    if (!d->devices) {
        TIDE_LOG_ERROR("%s", error);
        goto out_jobs;
    }
    d->backend = d->devices->devices[0].backend;
    snprintf(d->device_name, sizeof(d->device_name), "%s", d->devices->devices[0].name);
    d->device_bytes = tided_devices_total_bytes(d->devices);
    d->device_largest_bytes = tided_devices_largest_bytes(d->devices);
    char a[32], b[32], c[32];
    for (uint32_t i = 0; i < d->devices->n; i++)
        TIDE_LOG_INFO("device %u: %s backend, %s, %s", i, tide_backend_name(d->backend),
                      d->devices->devices[i].name,
                      tided_format_bytes(d->devices->devices[i].total_bytes, a, sizeof(a)));
    TIDE_LOG_INFO(
        "%u device(s); jobs get %s by default, at most %s", d->devices->n,
        tided_format_bytes(d->config.default_budget, b, sizeof(b)),
        tided_format_bytes(d->config.max_budget ? d->config.max_budget : d->device_largest_bytes, c,
                           sizeof(c)));
    tided_format_bytes(d->device_largest_bytes, a, sizeof(a));
    if (d->config.default_budget > d->device_largest_bytes)
        TIDE_LOG_WARN("default-budget (%s) is larger than the largest device (%s): jobs without a "
                      "budget of their own will be refused",
                      b, a);
    /* The time model's profile of this device: measured now, once, not at the first plan. */
    struct tide_device_profile profile;
    struct tide_error err = {0};
    if (tide_device_profile_local(d->backend, &profile, &err) == TIDE_OK)
        TIDE_LOG_INFO("device profile %s: %.1f GFLOP/s, memory %.1f GB/s, copies %.1f GB/s; "
                      "host budget %s per job",
                      profile.name, profile.compute_flops / 1e9, profile.memory_bytes_per_s / 1e9,
                      profile.copy_bytes_per_s / 1e9,
                      tided_format_bytes(tided_config_host_budget(&d->config), a, sizeof(a)));
    else
        TIDE_LOG_WARN("device profile: %s (the first plan measures it again)", err.message);

    grpc_init();
    d->worker =
        tided_worker_new(d->loop, d->devices->n, tided_jobs_task_done, d, error, sizeof(error));
    if (!d->worker) {
        TIDE_LOG_ERROR("%s", error);
        goto out_grpc;
    }
    d->server = tided_server_new(d, error, sizeof(error));
    if (!d->server) {
        TIDE_LOG_ERROR("%s", error);
        goto out_worker;
    }
    if (tided_server_start(d->server, error, sizeof(error)) != 0) {
        TIDE_LOG_ERROR("%s", error);
        goto out_server;
    }
    if (d->config.metrics_listen[0] && !(d->http = tided_http_start(d, error, sizeof(error)))) {
        TIDE_LOG_ERROR("%s", error);
        goto out_server;
    }

    ev_signal_init(&sigterm_watcher, on_stop_signal, SIGTERM);
    ev_signal_init(&sigint_watcher, on_stop_signal, SIGINT);
    ev_signal_init(&sighup_watcher, on_reload_signal, SIGHUP);
    sigterm_watcher.data = sigint_watcher.data = sighup_watcher.data = d;
    ev_signal_start(d->loop, &sigterm_watcher);
    ev_signal_start(d->loop, &sigint_watcher);
    ev_signal_start(d->loop, &sighup_watcher);

    uint64_t watchdog_usec = 0;
    if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
        double every = (double)watchdog_usec / 2e6;
        ev_timer_init(&watchdog_timer, on_watchdog, every, every);
        watchdog_timer.data = d;
        ev_timer_start(d->loop, &watchdog_timer);
        TIDE_LOG_INFO("systemd watchdog: pinging every %.1f s", every);
    }

    ev_timer_init(&cron_timer, on_cron, TIDED_CRON_INTERVAL_S, TIDED_CRON_INTERVAL_S);
    cron_timer.data = d;
    ev_timer_start(d->loop, &cron_timer);

    sd_notify(0, "READY=1");
    tided_daemon_notify_status(d);
    TIDE_LOG_INFO("ready");
    ev_run(d->loop, 0);
    ev_signal_stop(d->loop, &sigterm_watcher);
    ev_signal_stop(d->loop, &sigint_watcher);
    ev_signal_stop(d->loop, &sighup_watcher);
    ev_timer_stop(d->loop, &watchdog_timer);
    ev_timer_stop(d->loop, &cron_timer);
    rc = d->exit_code;
    tided_metrics_close(d->metrics); /* requests waiting for a snapshot get none */
    tided_http_stop(d->http);        /* before the server: its threads check tokens there */
    d->http = NULL;

out_server:
    tided_server_free(d->server);
    d->server = NULL;
out_worker:
    tided_worker_free(d->worker); /* joins; hands back what was still running */
    d->worker = NULL;
out_grpc:
    grpc_shutdown();
    tided_devices_free(d->devices); /* the device threads are joined */
    d->devices = NULL;
    d->backend = NULL;
    tide_picture_shutdown(); /* the worker, which draws plan pictures, is joined */
out_jobs:
    tided_jobs_free(d->jobs);
    d->jobs = NULL;
    tided_metrics_free(d->metrics);
    d->metrics = NULL;
out_config:
    TIDE_LOG_INFO("tided exits with status %d", rc);
    tided_config_release(&d->config);
    ev_loop_destroy(d->loop);
    return rc;
}
