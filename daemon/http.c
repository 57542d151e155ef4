/* SPDX-License-Identifier: MIT */
/*
 * http.c: the HTTP listener for /metrics, /api/ and the dashboard (see
 * http.h for what it serves and who may see what).
 *
 * DESIGN
 *
 * Threads and what each touches:
 *  - The main thread binds the socket, starts libmicrohttpd (tided_http_start)
 *    and stops it (tided_http_stop, which joins its threads). It owns
 *    struct tided_http; nothing in it changes while the listener runs.
 *  - libmicrohttpd's threads (a pool of HTTP_THREADS, each polling the
 *    listening socket and its own connections) run on_request. Each request checks its token
 *    with tided_server_authorize (the token table under its mutex), takes
 *    a metrics snapshot with tided_metrics_acquire (a ticket under the
 *    collector's mutex and ev_async_send: the main thread builds it) and
 *    renders it. They read d->server and d->metrics, pointers fixed before
 *    the listener starts and valid until it stops, and nothing else of the
 *    daemon: never a job, the configuration (SIGHUP rewrites it) or the loop.
 *
 * The socket is made here rather than by libmicrohttpd, so that a bind
 * error says why (errno) and names the option.
 */
#include "daemon/http.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/log.h"
#include "daemon/config.h"
#include "daemon/jobs-impl.h" /* tided__shown only: this file never touches a job */
#include "daemon/metrics.h"
#include "daemon/server.h"

/* Bounds of the listener (http.h). */
#define HTTP_CONNECTIONS        64
#define HTTP_CONNECTIONS_PER_IP 32
#define HTTP_TIMEOUT_S          30
#define HTTP_MEMORY             (32 * 1024)
#define HTTP_THREADS            2

struct tided_http {
    struct tided_daemon *daemon;
    struct MHD_Daemon *mhd;
    char *cert, *key; /* the TLS pair (PEM), kept while libmicrohttpd runs */
    char where[64];   /* metrics-listen, for logs */
    atomic_bool running;
};

/* ============================================================================
 * Responses
 * ========================================================================== */

/*
 * The dashboard may run only its own script and style, talk only to tided,
 * and not be framed; it sends no Referer (its address may carry the token).
 */
static const char page_policy[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                                  "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                                  "form-action 'none'; frame-ancestors 'none'";

/* Adds tided's usual headers to r and queues it (r is released either way). */
static enum MHD_Result queue(struct MHD_Connection *connection, unsigned status,
                             const char *content_type, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (status == MHD_HTTP_UNAUTHORIZED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"tided\"");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result result = MHD_queue_response(connection, status, r);
    MHD_destroy_response(r);
    return result;
}

/* Answers with a malloc'd body, which libmicrohttpd frees. */
static enum MHD_Result respond(struct MHD_Connection *connection, unsigned status,
                               const char *content_type, char *body, size_t size)
{
    struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(size, body, free);
    if (!r)
        free(body);
    return queue(connection, status, content_type, r);
}

/* Answers with one of the dashboard's embedded files, under the page's policy. */
static enum MHD_Result respond_asset(struct MHD_Connection *connection,
                                     const struct tided_http_asset *a)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->size, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (r) {
        MHD_add_response_header(r, "Content-Security-Policy", page_policy);
        MHD_add_response_header(r, "X-Frame-Options", "DENY");
        MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    }
    return queue(connection, MHD_HTTP_OK, a->content_type, r);
}

/* A short plain-text answer: "tided: <message>\n". */
static enum MHD_Result respond_text(struct MHD_Connection *connection, unsigned status,
                                    const char *format, ...) __attribute__((format(printf, 3, 4)));

static enum MHD_Result respond_text(struct MHD_Connection *connection, unsigned status,
                                    const char *format, ...)
{
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    char *body = NULL;
    int n = asprintf(&body, "tided: %s\n", message);
    if (n < 0)
        return MHD_NO;
    return respond(connection, status, "text/plain; charset=utf-8", body, (size_t)n);
}

/* ============================================================================
 * Routes
 * ========================================================================== */

/* What one data endpoint renders from a snapshot for a viewer; NULL on OOM. */
typedef char *(*render_fn)(const struct tided_metrics_snapshot *s,
                           const struct tided_identity *viewer, const char *role, size_t *len);

static char *render_metrics(const struct tided_metrics_snapshot *s,
                            const struct tided_identity *viewer, const char *role, size_t *len)
{
    (void)role;
    return tided_metrics_prometheus(s, viewer, len);
}

static char *render_status(const struct tided_metrics_snapshot *s,
                           const struct tided_identity *viewer, const char *role, size_t *len)
{
    return tided_metrics_status_json(s, viewer, role, len);
}

static char *render_jobs(const struct tided_metrics_snapshot *s,
                         const struct tided_identity *viewer, const char *role, size_t *len)
{
    (void)role;
    return tided_metrics_jobs_json(s, viewer, len);
}

/* The endpoints that serve data: each needs a token when the daemon has a token file. */
static const struct route {
    const char *path;
    const char *content_type;
    render_fn render;
} routes[] = {
    {"/metrics", "text/plain; version=0.0.4; charset=utf-8", render_metrics},
    {"/api/status", "application/json", render_status},
    {"/api/jobs", "application/json", render_jobs},
};

/*
 * A job's own pages, /api/jobs/<id>/plan.svg and /api/jobs/<id>/trace.json:
 * which one url names (0: none of them), and the id in id.
 */
enum job_page { JOB_PAGE_NONE, JOB_PAGE_PLAN_SVG, JOB_PAGE_TRACE };

static enum job_page job_page_of(const char *url, char *id, size_t id_size)
{
    static const char prefix[] = "/api/jobs/";
    if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
        return JOB_PAGE_NONE;
    const char *start = url + sizeof(prefix) - 1, *slash = strchr(start, '/');
    if (!slash || slash == start || (size_t)(slash - start) >= id_size)
        return JOB_PAGE_NONE;
    enum job_page page = strcmp(slash, "/plan.svg") == 0     ? JOB_PAGE_PLAN_SVG
                         : strcmp(slash, "/trace.json") == 0 ? JOB_PAGE_TRACE
                                                             : JOB_PAGE_NONE;
    memcpy(id, start, (size_t)(slash - start));
    id[slash - start] = '\0';
    return page;
}

/*
 * Serves a job's plan picture or latest trace from a snapshot, to a viewer
 * who may see the job (others get the same 404 as for a job that does not
 * exist, so that ids cannot be probed).
 */
static enum MHD_Result respond_job_page(struct MHD_Connection *connection,
                                        const struct tided_metrics_snapshot *s,
                                        const struct tided_identity *viewer, const char *id,
                                        enum job_page page)
{
    char shown[80];
    tided__shown(id, shown, sizeof(shown));
    const struct tided_metrics_job *j = NULL;
    for (size_t i = 0; i < s->n_jobs && !j; i++) {
        if (strcmp(s->jobs[i].id, id) == 0 && tided_identity_may_see(viewer, s->jobs[i].owner))
            j = &s->jobs[i];
    }
    if (!j)
        return respond_text(connection, MHD_HTTP_NOT_FOUND, "no job %s that you may see", shown);
    const struct tided_metrics_blob *b = page == JOB_PAGE_PLAN_SVG ? j->plan_svg : j->trace;
    if (!b)
        return respond_text(connection, MHD_HTTP_NOT_FOUND,
                            page == JOB_PAGE_PLAN_SVG
                                ? "job %s has no plan picture (it was not compiled by this tided)"
                                : "job %s has no trace yet: record one with tidectl trace %s",
                            shown, shown);
    char *body = malloc(b->len ? b->len : 1);
    if (!body)
        return MHD_NO;
    memcpy(body, b->data, b->len);
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback(b->len, body, free);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (page == JOB_PAGE_TRACE) {
        /* A file to open in ui.perfetto.dev, not a page to show. */
        char disposition[120];
        snprintf(disposition, sizeof(disposition), "attachment; filename=\"trace-%s.json\"",
                 j->id);
        MHD_add_response_header(r, "Content-Disposition", disposition);
    } else {
        /* The picture is ours, but an SVG is a document: it may run nothing and load nothing. */
        MHD_add_response_header(r, "Content-Security-Policy", "default-src 'none'; style-src "
                                                              "'unsafe-inline'");
    }
    return queue(connection, MHD_HTTP_OK,
                 page == JOB_PAGE_TRACE ? "application/json" : "image/svg+xml", r);
}

/* ============================================================================
 * Requests (libmicrohttpd's threads)
 * ========================================================================== */

/*
 * Who is asking: a token's identity, or anonymous without a token file.
 * NULL role: the request was answered 401, with *answered the result.
 */
static const char *identify(struct tided_http *h, struct MHD_Connection *connection,
                            struct tided_identity *viewer, enum MHD_Result *answered)
{
    const char *header =
        MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *why = NULL;
    switch (tided_server_authorize(h->daemon->server, header, header ? strlen(header) : 0, viewer,
                                   &why)) {
    case TIDED_AUTH_OK:
        return viewer->read_only ? "monitor" : "submit";
    case TIDED_AUTH_NO_TOKENS:
        /* Loopback only (config.c): the operator chose to show every job to local users. */
        *viewer = (struct tided_identity){
            .uid = UINT32_MAX, .gid = UINT32_MAX, .pid = -1, .admin = true, .read_only = true};
        snprintf(viewer->peer, sizeof(viewer->peer), "anonymous (no token file)");
        return "anonymous";
    default:
        *answered = respond_text(connection, MHD_HTTP_UNAUTHORIZED,
                                 "%s; send \"Authorization: Bearer TOKEN\" with a token of "
                                 "tided's token file (monitor tokens see every job)",
                                 why);
        return NULL;
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **request_state)
{
    (void)version, (void)upload_data, (void)upload_data_size, (void)request_state;
    struct tided_http *h = cls;
    char shown_method[80], shown_url[80];
    tided__shown(method, shown_method, sizeof(shown_method)); /* the client's bytes, for logs */
    tided__shown(url, shown_url, sizeof(shown_url));
    TIDE_LOG_DEBUG("http: %s %s", shown_method, shown_url);
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return respond_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
                            "method %s is not allowed: tided's HTTP listener is read-only "
                            "(GET, HEAD)",
                            shown_method);
    for (size_t i = 0; i < tided_http_n_assets; i++) {
        const struct tided_http_asset *a = &tided_http_assets[i];
        if (strcmp(url, a->path) == 0)
            return respond_asset(connection, a);
    }
    const struct route *route = NULL;
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]) && !route; i++) {
        if (strcmp(url, routes[i].path) == 0)
            route = &routes[i];
    }
    char job_id[32];
    enum job_page page = route ? JOB_PAGE_NONE : job_page_of(url, job_id, sizeof(job_id));
    if (!route && page == JOB_PAGE_NONE)
        return respond_text(connection, MHD_HTTP_NOT_FOUND,
                            "no such page; tided serves /, /trace.html?job=ID, /metrics, "
                            "/api/status, /api/jobs, /api/jobs/ID/plan.svg and "
                            "/api/jobs/ID/trace.json");

    struct tided_identity viewer;
    enum MHD_Result answered = MHD_NO;
    const char *role = identify(h, connection, &viewer, &answered);
    if (!role)
        return answered; /* 401 */
    char error[256];
    struct tided_metrics_snapshot *s =
        tided_metrics_acquire(h->daemon->metrics, error, sizeof(error));
    if (!s)
        return respond_text(connection, MHD_HTTP_SERVICE_UNAVAILABLE, "%s", error);
    if (page != JOB_PAGE_NONE) {
        enum MHD_Result result = respond_job_page(connection, s, &viewer, job_id, page);
        tided_metrics_snapshot_release(s);
        return result;
    }
    size_t len = 0;
    char *body = route->render(s, &viewer, role, &len);
    tided_metrics_snapshot_release(s);
    if (!body)
        return respond_text(connection, MHD_HTTP_INTERNAL_SERVER_ERROR,
                            "out of memory rendering %s", route->path);
    return respond(connection, MHD_HTTP_OK, route->content_type, body, len);
}

/* libmicrohttpd's messages: warnings while starting, debug once serving (clients' errors). */
static void on_log(void *cls, const char *format, va_list args)
{
    struct tided_http *h = cls;
    char message[512];
    vsnprintf(message, sizeof(message), format, args);
    size_t n = strlen(message);
    while (n > 0 && (message[n - 1] == '\n' || message[n - 1] == '\r'))
        message[--n] = '\0';
    if (atomic_load(&h->running))
        TIDE_LOG_DEBUG("http: %s", message);
    else
        TIDE_LOG_WARN("http: %s", message);
}

/* ============================================================================
 * Life cycle (main thread)
 * ========================================================================== */

/* Creates, binds and listens on the socket of address; -1 with error naming the cause. */
static int open_socket(const char *where, const struct tided_listen_address *address, char *error,
                       size_t size)
{
    int fd = socket(address->address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(error, size, "metrics-listen = %s: cannot make a socket: %s", where,
                 strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (address->address.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&address->address, address->length) != 0) {
        snprintf(error, size, "metrics-listen = %s: cannot bind it: %s", where, strerror(errno));
        close(fd);
        return -1;
    }
    if (listen(fd, 64) != 0) {
        snprintf(error, size, "metrics-listen = %s: cannot listen: %s", where, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

struct tided_http *tided_http_start(struct tided_daemon *d, char *error, size_t size)
{
    const struct tided_config *cfg = &d->config;
    struct tided_listen_address address;
    if (tided_parse_listen_address(cfg->metrics_listen, &address) != 0) {
        snprintf(error, size, "metrics-listen = %s: not HOST:PORT", cfg->metrics_listen);
        return NULL;
    }
    struct tided_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(error, size, "out of memory for the HTTP listener");
        return NULL;
    }
    h->daemon = d;
    snprintf(h->where, sizeof(h->where), "%s", cfg->metrics_listen);
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    bool tls = cfg->tls_cert[0] && cfg->tls_key[0];
    if (tls) {
        if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
            snprintf(error, size,
                     "metrics-listen = %s: this libmicrohttpd has no TLS support, "
                     "and tls-cert and tls-key are set",
                     h->where);
            free(h);
            return NULL;
        }
        char why[512];
        if (tided_tls_pair_load(cfg, &h->cert, &h->key, why, sizeof(why)) != 0) {
            snprintf(error, size, "metrics-listen = %s: HTTPS: %s", h->where, why);
            free(h);
            return NULL;
        }
        flags |= MHD_USE_TLS;
    }
    if (address.address.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    int fd = open_socket(h->where, &address, error, size);
    if (fd < 0) {
        tided_tls_pair_free(h->cert, h->key);
        free(h);
        return NULL;
    }
    /*
     * The logger comes first so that start-up messages go to it. The TLS
     * options end the list when there is no TLS. libmicrohttpd owns fd from
     * here on: it closes it when it fails to start and when it stops.
     */
    h->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, on_log, h,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)HTTP_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)HTTP_CONNECTIONS_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_MEMORY, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)HTTP_THREADS, tls ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, h->key,
        MHD_OPTION_HTTPS_MEM_CERT, h->cert, MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(error, size,
                 "metrics-listen = %s: libmicrohttpd did not start (its reason is logged above%s)",
                 h->where, tls ? "; are tls-cert and tls-key a matching PEM pair?" : "");
        tided_tls_pair_free(h->cert, h->key);
        free(h);
        return NULL;
    }
    atomic_store(&h->running, true);
    TIDE_LOG_INFO("serving %s on %s: the dashboard at /, traces at /trace.html?job=ID, "
                  "/metrics, /api/status, /api/jobs",
                  tls ? "HTTPS" : "HTTP", h->where);
    if (!cfg->tokens[0])
        TIDE_LOG_WARN("metrics-listen = %s without a token file: every local user who connects "
                      "sees every job's metrics (set tokens to require a bearer token)",
                      h->where);
    return h;
}

void tided_http_stop(struct tided_http *h)
{
    if (!h)
        return;
    /* MHD_stop_daemon also closes the listening socket it was given. */
    MHD_stop_daemon(h->mhd);
    tided_tls_pair_free(h->cert, h->key);
    free(h);
}
