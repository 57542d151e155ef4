/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: the collector (fed on the main thread) and the snapshots other
 * threads read; metrics.h says what is counted and who owns what.
 *
 * DESIGN
 *
 * Threads and what each touches:
 *  - The main thread owns the collector's RPC table, every job and its
 *    struct tided_job_metrics. It builds snapshots in async_cb, reading the
 *    jobs directly, and publishes them under `mutex`.
 *  - Any other thread (the HTTP listener's) calls tided_metrics_acquire:
 *    under `mutex` it takes a ticket, then ev_async_sends the loop and
 *    waits on `published` until a snapshot built for a ticket at least as
 *    new as its own is out (`served`). It never reads a job or the RPC
 *    table: only `tickets`, `served`, `closing` and `snapshot` (all under
 *    `mutex`) and the snapshots, which are immutable.
 *  - Reference counts of snapshots and loss histories are atomics: a
 *    snapshot may be released on any thread, and the last release frees it.
 *
 * The main thread does not block on readers: publishing swaps one pointer
 * under the mutex. A reader that the main thread does not serve within
 * ACQUIRE_TIMEOUT_S (a loop stuck somewhere) gets the last snapshot built,
 * so a scrape shows stale numbers rather than hanging.
 */
#include "daemon/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

#include "common/log.h"
#include "daemon/devices.h"
#include "daemon/jobs-impl.h"

/* How long a reader waits for the main thread to build its snapshot. */
#define ACQUIRE_TIMEOUT_S 5

const double tided_metrics_step_buckets[TIDED_METRICS_STEP_BUCKETS] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};

/* What a job's metrics keep beyond its struct job. Main thread only. */
struct tided_job_metrics {
    char user[64];
    uint64_t step_buckets[TIDED_METRICS_STEP_BUCKETS];
    uint64_t step_count;
    double step_seconds_sum;
    double last_step_seconds;
    double stall_seconds;
    /* The loss ring, allocated at the first training loss. */
    uint64_t *ring_steps;
    float *ring_values;
    size_t ring_next, ring_n;
    uint64_t appended; /* losses ever appended */
    /* The ring as the last snapshot copied it, shared while appended == shared_at. */
    struct tided_metrics_losses *shared;
    uint64_t shared_at;
};

struct rpc_row {
    char method[96];
    int code;
    uint64_t count;
};

struct tided_metrics {
    struct tided_daemon *daemon;

    /* ---- main thread ---- */
    struct rpc_row *rpcs;
    size_t n_rpcs, cap_rpcs;
    ev_async async;

    /* ---- the hand-off (mutex) ---- */
    pthread_mutex_t mutex;
    pthread_cond_t published;
    uint64_t tickets; /* requests so far */
    uint64_t served;  /* every ticket up to this one has a snapshot built after it */
    bool closing;
    struct tided_metrics_snapshot *snapshot; /* the latest; the collector holds one reference */
};

/* ============================================================================
 * Small helpers
 * ========================================================================== */

const char *tided_metrics_state_name(int state)
{
    return tided__job_state_name((Tide__V1__JobState)state);
}

const char *tided_metrics_code_name(int code)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]))
        return "UNKNOWN";
    return names[code];
}

/* The length of the valid UTF-8 sequence at s, or 0 when it is not one. */
static size_t utf8_sequence(const unsigned char *s)
{
    if (s[0] < 0x80)
        return 1;
    size_t n;
    uint32_t min, c;
    if ((s[0] & 0xe0) == 0xc0)
        n = 2, min = 0x80, c = s[0] & 0x1f;
    else if ((s[0] & 0xf0) == 0xe0)
        n = 3, min = 0x800, c = s[0] & 0x0f;
    else if ((s[0] & 0xf8) == 0xf0)
        n = 4, min = 0x10000, c = s[0] & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0; /* also stops at the terminating NUL */
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    return n;
}

/*
 * A malloc'd copy of s that is valid UTF-8: each byte that does not start
 * a valid sequence becomes U+FFFD. Names and messages come from clients and
 * files; Prometheus and JSON both want UTF-8.
 */
static char *utf8_dup(const char *s)
{
    if (!s)
        s = "";
    size_t len = strlen(s);
    char *out = malloc(len * 3 + 1); /* each byte at worst becomes three */
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t n = 0;
    while (*p) {
        size_t k = utf8_sequence(p);
        if (k == 0) {
            memcpy(out + n, "\xef\xbf\xbd", 3);
            n += 3;
            p++;
        } else {
            memcpy(out + n, p, k);
            n += k;
            p += k;
        }
    }
    out[n] = '\0';
    return out;
}

struct tided_metrics_blob *tided_metrics_blob_new(const void *data, size_t len)
{
    struct tided_metrics_blob *b = malloc(sizeof(*b) + len + 1);
    if (!b)
        return NULL;
    atomic_init(&b->refs, 1);
    b->first_step = b->last_step = 0;
    b->len = len;
    if (len)
        memcpy(b->data, data, len);
    b->data[len] = '\0';
    return b;
}

struct tided_metrics_blob *tided_metrics_blob_ref(struct tided_metrics_blob *b)
{
    if (b)
        atomic_fetch_add(&b->refs, 1);
    return b;
}

void tided_metrics_blob_release(struct tided_metrics_blob *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1)
        free(b);
}

static void losses_release(struct tided_metrics_losses *l)
{
    if (!l || atomic_fetch_sub(&l->refs, 1) != 1)
        return;
    free(l->steps);
    free(l->values);
    free(l);
}

/* ============================================================================
 * Feeding (main thread)
 * ========================================================================== */

/* The job's metrics, made at first use; NULL on OOM (the job then goes uncounted). */
static struct tided_job_metrics *job_metrics(struct job *j)
{
    if (j->metrics)
        return j->metrics;
    struct tided_job_metrics *jm = calloc(1, sizeof(*jm));
    if (!jm) {
        TIDE_LOG_WARN("job %s: out of memory for its metrics", j->id);
        return NULL;
    }
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwuid_r((uid_t)j->owner, &pw, buf, sizeof(buf), &found) == 0 && found &&
        strlen(found->pw_name) < sizeof(jm->user))
        snprintf(jm->user, sizeof(jm->user), "%s", found->pw_name);
    else
        snprintf(jm->user, sizeof(jm->user), "%" PRIu32, j->owner);
    j->metrics = jm;
    return jm;
}

void tided_metrics_job_step(struct tided_metrics *m, struct job *j, const Tide__V1__StepResult *r)
{
    if (!m)
        return;
    struct tided_job_metrics *jm = job_metrics(j);
    if (!jm)
        return;
    jm->stall_seconds += (double)r->stall_us / 1e6;
    if (r->eval_only)
        return;
    double seconds = (double)r->step_us / 1e6;
    for (int i = 0; i < TIDED_METRICS_STEP_BUCKETS; i++) {
        if (seconds <= tided_metrics_step_buckets[i]) {
            jm->step_buckets[i]++;
            break;
        }
    }
    jm->step_count++;
    jm->step_seconds_sum += seconds;
    jm->last_step_seconds = seconds;
    if (!j->loss)
        return;
    if (!jm->ring_steps) {
        jm->ring_steps = calloc(TIDED_METRICS_LOSS_HISTORY, sizeof(*jm->ring_steps));
        jm->ring_values = calloc(TIDED_METRICS_LOSS_HISTORY, sizeof(*jm->ring_values));
        if (!jm->ring_steps || !jm->ring_values) {
            free(jm->ring_steps);
            free(jm->ring_values);
            jm->ring_steps = NULL;
            jm->ring_values = NULL;
            return;
        }
    }
    jm->ring_steps[jm->ring_next] = r->step;
    jm->ring_values[jm->ring_next] = r->loss;
    jm->ring_next = (jm->ring_next + 1) % TIDED_METRICS_LOSS_HISTORY;
    if (jm->ring_n < TIDED_METRICS_LOSS_HISTORY)
        jm->ring_n++;
    jm->appended++;
}

void tided_metrics_rpc_done(struct tided_metrics *m, const char *method, int code)
{
    if (!m)
        return;
    if (!method)
        method = "unknown";
    for (size_t i = 0; i < m->n_rpcs; i++) {
        if (m->rpcs[i].code == code && strcmp(m->rpcs[i].method, method) == 0) {
            m->rpcs[i].count++;
            return;
        }
    }
    if (m->n_rpcs == m->cap_rpcs) {
        size_t cap = m->cap_rpcs ? m->cap_rpcs * 2 : 32;
        struct rpc_row *grown = realloc(m->rpcs, cap * sizeof(*grown));
        if (!grown)
            return;
        m->rpcs = grown;
        m->cap_rpcs = cap;
    }
    struct rpc_row *row = &m->rpcs[m->n_rpcs++];
    snprintf(row->method, sizeof(row->method), "%s", method);
    row->code = code;
    row->count = 1;
}

void tided_job_metrics_free(struct tided_job_metrics *jm)
{
    if (!jm)
        return;
    losses_release(jm->shared);
    free(jm->ring_steps);
    free(jm->ring_values);
    free(jm);
}

/* ============================================================================
 * Snapshots (built on the main thread)
 * ========================================================================== */

void tided_metrics_snapshot_release(struct tided_metrics_snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (size_t i = 0; i < s->n_jobs; i++) {
        free(s->jobs[i].name);
        free(s->jobs[i].message);
        losses_release(s->jobs[i].losses);
        tided_metrics_blob_release(s->jobs[i].plan_svg);
        tided_metrics_blob_release(s->jobs[i].trace);
    }
    free(s->jobs);
    free(s->rpcs);
    free(s->devices);
    free(s);
}

/* The job's losses oldest first, shared with the last snapshot when no step came since. */
static struct tided_metrics_losses *job_losses(struct tided_job_metrics *jm)
{
    if (!jm || jm->ring_n == 0)
        return NULL;
    if (!jm->shared || jm->shared_at != jm->appended) {
        struct tided_metrics_losses *l = calloc(1, sizeof(*l));
        if (l) {
            l->steps = malloc(jm->ring_n * sizeof(*l->steps));
            l->values = malloc(jm->ring_n * sizeof(*l->values));
        }
        if (!l || !l->steps || !l->values) {
            if (l) {
                free(l->steps);
                free(l->values);
                free(l);
            }
            return NULL;
        }
        atomic_init(&l->refs, 1);
        l->n = jm->ring_n;
        size_t first =
            (jm->ring_next + TIDED_METRICS_LOSS_HISTORY - jm->ring_n) % TIDED_METRICS_LOSS_HISTORY;
        for (size_t i = 0; i < l->n; i++) {
            size_t k = (first + i) % TIDED_METRICS_LOSS_HISTORY;
            l->steps[i] = jm->ring_steps[k];
            l->values[i] = jm->ring_values[k];
        }
        losses_release(jm->shared);
        jm->shared = l;
        jm->shared_at = jm->appended;
    }
    atomic_fetch_add(&jm->shared->refs, 1);
    return jm->shared;
}

static bool fill_job(struct tided_metrics_job *v, struct job *j, const char *backend)
{
    struct tided_job_metrics *jm = job_metrics(j);
    snprintf(v->id, sizeof(v->id), "%s", j->id);
    snprintf(v->device, sizeof(v->device), "%.12s:%" PRIu32, backend, j->device);
    v->name = utf8_dup(j->name);
    v->message = utf8_dup(j->message);
    if (!v->name || !v->message)
        return false;
    if (jm)
        snprintf(v->user, sizeof(v->user), "%s", jm->user);
    else
        snprintf(v->user, sizeof(v->user), "%" PRIu32, j->owner);
    v->owner = j->owner;
    v->state = (int)j->state;
    /* A job of an earlier run does not know its loss's name, but its record kept the loss. */
    v->has_loss = j->loss != NULL || j->last_loss != 0.0f;
    v->steps = j->steps;
    v->last_loss = j->last_loss;
    v->budget_bytes = j->budget;
    v->high_water_bytes = j->high_water;
    v->host_bytes = j->host_bytes;
    v->swap_in_bytes = j->h2d_total;
    v->swap_out_bytes = j->d2h_total;
    v->steps_per_second = j->state == STATE(RUNNING) ? j->steps_per_second : 0.0;
    v->created_us = j->created_us;
    v->updated_us = j->updated_us;
    v->plan_svg = tided_metrics_blob_ref(j->plan_svg);
    v->trace = tided_metrics_blob_ref(j->trace);
    if (jm) {
        v->stall_seconds = jm->stall_seconds;
        v->last_step_seconds = jm->last_step_seconds;
        memcpy(v->step_buckets, jm->step_buckets, sizeof(v->step_buckets));
        v->step_count = jm->step_count;
        v->step_seconds_sum = jm->step_seconds_sum;
        v->losses = job_losses(jm);
    }
    return true;
}

static struct tided_metrics_snapshot *build(struct tided_metrics *m)
{
    struct tided_daemon *d = m->daemon;
    struct tided_jobs *jobs = d->jobs;
    struct tided_metrics_snapshot *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->built_us = tided_now_us();
    s->started_us = d->started_us;
    s->serving = d->phase == TIDED_SERVING;
    snprintf(s->version, sizeof(s->version), "%s", TIDED_VERSION);
    snprintf(s->backend, sizeof(s->backend), "%s", tide_backend_name(d->backend));
    snprintf(s->device, sizeof(s->device), "%s:0", s->backend);
    char *device_name = utf8_dup(d->device_name);
    snprintf(s->device_name, sizeof(s->device_name), "%s", device_name ? device_name : "");
    free(device_name);
    s->device_total_bytes = d->device_bytes;
    s->device_reserved_bytes = jobs->reserved;
    s->device_used_bytes = tided__device_used_bytes(d);
    s->default_budget_bytes = d->config.default_budget;
    s->max_budget_bytes = d->config.max_budget ? d->config.max_budget : d->device_largest_bytes;
    s->queue_length = jobs->tasks;
    s->rpcs = calloc(m->n_rpcs + 1, sizeof(*s->rpcs));
    s->jobs = calloc(jobs->n_jobs + 1, sizeof(*s->jobs));
    s->devices = calloc(d->devices->n, sizeof(*s->devices));
    if (!s->rpcs || !s->jobs || !s->devices) {
        tided_metrics_snapshot_release(s);
        return NULL;
    }
    s->n_devices = d->devices->n;
    for (uint32_t i = 0; i < d->devices->n; i++) {
        const struct tided_device *dev = &d->devices->devices[i];
        struct tided_metrics_device *v = &s->devices[i];
        snprintf(v->id, sizeof(v->id), "%.12s:%u", s->backend, i);
        char *name = utf8_dup(dev->name);
        snprintf(v->name, sizeof(v->name), "%s", name ? name : "");
        free(name);
        v->total_bytes = dev->total_bytes;
        v->reserved_bytes = dev->reserved_bytes;
        v->used_bytes = tided__device_used_bytes_on(d, i);
    }
    for (size_t i = 0; i < m->n_rpcs; i++) {
        snprintf(s->rpcs[i].method, sizeof(s->rpcs[i].method), "%s", m->rpcs[i].method);
        s->rpcs[i].code = m->rpcs[i].code;
        s->rpcs[i].count = m->rpcs[i].count;
    }
    s->n_rpcs = m->n_rpcs;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        bool ok = fill_job(&s->jobs[i], jobs->jobs[i], s->backend);
        s->n_jobs = i + 1; /* so that release frees what fill_job made */
        if (!ok) {
            tided_metrics_snapshot_release(s);
            return NULL;
        }
    }
    return s;
}

/* A reader asked for a snapshot: build one that covers every ticket taken so far. */
static void async_cb(struct ev_loop *loop, ev_async *w, int revents)
{
    (void)loop, (void)revents;
    struct tided_metrics *m = w->data;
    pthread_mutex_lock(&m->mutex);
    uint64_t covered = m->tickets;
    bool wanted = covered > m->served;
    pthread_mutex_unlock(&m->mutex);
    if (!wanted)
        return;
    struct tided_metrics_snapshot *fresh = build(m);
    if (!fresh)
        TIDE_LOG_WARN("metrics: out of memory for a snapshot; readers get the previous one");
    pthread_mutex_lock(&m->mutex);
    struct tided_metrics_snapshot *old = fresh ? m->snapshot : NULL;
    if (fresh)
        m->snapshot = fresh;
    m->served = covered;
    pthread_cond_broadcast(&m->published);
    pthread_mutex_unlock(&m->mutex);
    tided_metrics_snapshot_release(old);
}

/* ============================================================================
 * Life cycle and readers
 * ========================================================================== */

struct tided_metrics *tided_metrics_new(struct tided_daemon *d, char *error, size_t size)
{
    struct tided_metrics *m = calloc(1, sizeof(*m));
    if (!m) {
        snprintf(error, size, "out of memory for the metrics");
        return NULL;
    }
    m->daemon = d;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_mutex_init(&m->mutex, NULL);
    pthread_cond_init(&m->published, &attr);
    pthread_condattr_destroy(&attr);
    ev_async_init(&m->async, async_cb);
    m->async.data = m;
    ev_async_start(d->loop, &m->async);
    return m;
}

void tided_metrics_free(struct tided_metrics *m)
{
    if (!m)
        return;
    ev_async_stop(m->daemon->loop, &m->async);
    tided_metrics_snapshot_release(m->snapshot);
    pthread_mutex_destroy(&m->mutex);
    pthread_cond_destroy(&m->published);
    free(m->rpcs);
    free(m);
}

void tided_metrics_close(struct tided_metrics *m)
{
    pthread_mutex_lock(&m->mutex);
    m->closing = true;
    pthread_cond_broadcast(&m->published);
    pthread_mutex_unlock(&m->mutex);
}

struct tided_metrics_snapshot *tided_metrics_acquire(struct tided_metrics *m, char *error,
                                                     size_t size)
{
    pthread_mutex_lock(&m->mutex);
    if (m->closing) {
        pthread_mutex_unlock(&m->mutex);
        snprintf(error, size, "tided is stopping");
        return NULL;
    }
    uint64_t ticket = ++m->tickets;
    pthread_mutex_unlock(&m->mutex);
    ev_async_send(m->daemon->loop, &m->async);

    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ACQUIRE_TIMEOUT_S;
    bool timed_out = false;
    pthread_mutex_lock(&m->mutex);
    while (m->served < ticket && !m->closing && !timed_out)
        timed_out = pthread_cond_timedwait(&m->published, &m->mutex, &deadline) == ETIMEDOUT;
    struct tided_metrics_snapshot *s = m->snapshot;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&m->mutex);
    if (timed_out)
        TIDE_LOG_WARN("metrics: the main loop did not build a snapshot within %d s; %s",
                      ACQUIRE_TIMEOUT_S, s ? "serving the previous one" : "none to serve");
    if (!s)
        snprintf(error, size, "no metrics snapshot: %s",
                 timed_out ? "tided's main loop did not answer in time" : "out of memory");
    return s;
}
