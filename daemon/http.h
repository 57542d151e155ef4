/* SPDX-License-Identifier: MIT */
/*
 * http.h: tided's HTTP listener (libmicrohttpd) for Prometheus and people:
 *
 *   GET /metrics       the metrics in Prometheus's text format 0.0.4
 *   GET /api/status    the device, the queue, job counts by state (JSON)
 *   GET /api/jobs      every job the viewer may see, with recent losses (JSON)
 *   GET /              the dashboard (daemon/dashboard/: index.html, dashboard.css,
 *                      common.js and dashboard.js, embedded at build time), which
 *                      polls /api/
 *   GET /api/jobs/ID/plan.svg    the memory picture of a job's plan
 *   GET /api/jobs/ID/trace.json  a job's latest trace (tidectl trace), Chrome trace JSON
 *   GET /trace.html?job=ID       the trace viewer (trace.html, trace.css and trace.js,
 *                      embedded likewise), which draws the job's trace.json
 *
 * Security. It listens only where metrics-listen says; config.c refuses an
 * address other than loopback unless TLS (tls-cert, tls-key: then it
 * serves HTTPS, on loopback too) and a token file are configured. With a
 * token file, /metrics and /api/ want "Authorization: Bearer TOKEN" (401
 * otherwise): a monitor token sees every job, a submit token the jobs of
 * its UID, as over gRPC. The dashboard's files hold no data and are
 * served to anyone who reaches the listener: a browser cannot put a header
 * on the request its address bar makes, so the page takes the token from
 * its URL fragment (/#token=TOKEN, which browsers never send) and sends it
 * as a header on its own requests. Without a token file (so on loopback only),
 * nobody can be identified over TCP and every job is shown to whoever
 * connects: the viewer is "anonymous" with a monitor's view, and tided
 * says so in its log at start.
 *
 * Bounds: at most HTTP_CONNECTIONS connections (HTTP_CONNECTIONS_PER_IP
 * from one address), idle connections closed after HTTP_TIMEOUT_S, request
 * headers within HTTP_MEMORY bytes; only GET and HEAD (405 otherwise),
 * unknown paths 404.
 *
 * Threads: libmicrohttpd's own (a pool of HTTP_THREADS, each polling the
 * listening socket and its connections) answer requests. They read metrics snapshots (tided_metrics_acquire: a ticket
 * and ev_async_send to the main thread) and check tokens
 * (tided_server_authorize, under the token mutex); they never touch a job,
 * the configuration or the loop. tided_http_start and tided_http_stop run
 * on the main thread.
 *
 * Example usage (main.c):
 *
 *     if (d->config.metrics_listen[0] && !(d->http = tided_http_start(d, error, size)))
 *         ... fail start-up with error ...
 *     ...
 *     tided_metrics_close(d->metrics);   // wakes requests waiting for a snapshot
 *     tided_http_stop(d->http);          // joins libmicrohttpd's threads
 */
#ifndef TIDE_DAEMON_HTTP_H
#define TIDE_DAEMON_HTTP_H

#include <stddef.h>

#include "daemon/daemon.h"

struct tided_http;

/*
 * Binds metrics-listen, reads the TLS pair when configured and starts
 * serving; needs daemon->server started (its tokens loaded) and
 * daemon->metrics. NULL with error naming the option and the cause.
 */
struct tided_http *tided_http_start(struct tided_daemon *daemon, char *error, size_t error_size);

/* Stops serving and joins the listener's threads. NULL is a no-op. */
void tided_http_stop(struct tided_http *http);

/* A file of the dashboard, embedded at build time (dashboard-assets.c, from embed.cmake). */
struct tided_http_asset {
    const char *path; /* "/", "/dashboard.js" */
    const char *content_type;
    const unsigned char *data;
    size_t size;
};
extern const struct tided_http_asset tided_http_assets[];
extern const size_t tided_http_n_assets;

#endif /* TIDE_DAEMON_HTTP_H */
