/* SPDX-License-Identifier: MIT */
/*
 * queue.c: what a shared device does when it is full — jobs wait QUEUED
 * instead of failing, quotas per user and per group, priorities, and
 * preemption of lower-priority jobs.
 *
 * DESIGN
 *
 * Threads: main thread only, like the rest of the job manager (jobs.c's
 * DESIGN section).
 *
 * The queue. A submitted job whose budget fits the device but not what is
 * left now (tided__jobs_admit says whether it fits: what that means is the
 * admission's business, not the queue's), or that a queued job goes
 * before, is not compiled: Submit answers at once with the job QUEUED and
 * its position, and the job keeps its SubmitRequest until it is admitted.
 * It has no files until then, so that nothing on disk outlives a job that
 * never ran. The queue is no list of its own: it is the jobs in state
 * QUEUED, put in order when asked (tided_queue_order): priority, then fair
 * share (the owner with the fewest device-byte-seconds over the last
 * fair-share-window, decayed exponentially, goes first), then arrival.
 *
 * Admission (tided__queue_admit) runs wherever a budget is released or a
 * job's state changes, and once a second from the cron: it admits queued
 * jobs in order while the first one fits, and stops at the first that does
 * not, so that a large job is not starved by small ones behind it. An
 * admitted job is compiled as Submit would have done it, its Submit call
 * long answered; a Train stream that came meanwhile waits with its first
 * batch staged, and goes on once the job is READY (tided__train_resume).
 *
 * Preemption. When the first queued job does not fit and jobs of a lower
 * priority hold enough budget to make room, the lowest of them (the most
 * recently created first among equals) are parked between steps: a
 * checkpoint of their variables and optimizer state, their session freed
 * and their budget given back, as lifecycle.c parks an idle job. A job with
 * a step in flight is marked preempting and parked when the step is back.
 * A preempted job waits QUEUED itself, its Train stream attached and
 * paused; admitted again, it recompiles and restores its checkpoint
 * (tided__job_unpark) and continues bit for bit. Watchers get a PREEMPTED
 * and a RESUMED event.
 *
 * Quotas are checked at Submit against every job not ended of the uid (or
 * of the group's members), parked and queued ones included: a parked job
 * will want its budget back.
 */
#include "daemon/queue.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>

#include "common/log.h"
#include "daemon/devices.h"
#include "daemon/jobs-impl.h"

/* Priorities a JobSpec may ask for; above the default only for an admin. */
#define PRIORITY_MIN     (-1000)
#define PRIORITY_MAX     1000
#define PRIORITY_DEFAULT 0

/* One uid's recent use of the device. */
struct tided_queue_usage {
    uint32_t uid;
    double byte_seconds; /* device-byte-seconds, decayed by fair-share-window */
};

/* ============================================================================
 * Fair share: each uid's device-byte-seconds
 * ========================================================================== */

static double usage_of(const struct tided_jobs *jobs, uint32_t uid)
{
    for (size_t i = 0; i < jobs->n_usage; i++) {
        if (jobs->usage[i].uid == uid)
            return jobs->usage[i].byte_seconds;
    }
    return 0;
}

static struct tided_queue_usage *usage_slot(struct tided_jobs *jobs, uint32_t uid)
{
    for (size_t i = 0; i < jobs->n_usage; i++) {
        if (jobs->usage[i].uid == uid)
            return &jobs->usage[i];
    }
    if (jobs->n_usage == jobs->cap_usage) {
        size_t cap = jobs->cap_usage ? jobs->cap_usage * 2 : 8;
        struct tided_queue_usage *grown = realloc(jobs->usage, cap * sizeof(*grown));
        if (!grown)
            return NULL;
        jobs->usage = grown;
        jobs->cap_usage = cap;
    }
    struct tided_queue_usage *u = &jobs->usage[jobs->n_usage++];
    u->uid = uid;
    u->byte_seconds = 0;
    return u;
}

void tided__queue_cron(struct tided_daemon *d, int64_t now)
{
    struct tided_jobs *jobs = d->jobs;
    if (jobs->usage_us == 0 || now <= jobs->usage_us) {
        jobs->usage_us = now;
        return;
    }
    double dt = (double)(now - jobs->usage_us) / 1e6;
    jobs->usage_us = now;
    double decay = exp(-dt / (double)d->config.fair_share_window);
    for (size_t i = 0; i < jobs->n_usage; i++)
        jobs->usage[i].byte_seconds *= decay;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *j = jobs->jobs[i];
        if (!j->reserved)
            continue;
        struct tided_queue_usage *u = usage_slot(jobs, j->owner);
        if (u)
            u->byte_seconds += (double)j->budget * dt;
    }
    tided__queue_admit(d);
}

/* ============================================================================
 * Queued jobs in order
 * ========================================================================== */

static void entry_of(const struct tided_jobs *jobs, const struct job *j,
                     struct tided_queue_entry *e)
{
    *e = (struct tided_queue_entry){
        .uid = j->owner,
        .priority = j->priority,
        .usage = usage_of(jobs, j->owner),
        .queued_us = j->queued_us,
        .seq = j->queue_seq,
        .item = (void *)j,
    };
}

/* The queued jobs in admission order, plus room for one more entry; NULL with *n 0 if none. */
static struct tided_queue_entry *queued_in_order(const struct tided_jobs *jobs, size_t *n)
{
    *n = 0;
    struct tided_queue_entry *e = NULL;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *j = jobs->jobs[i];
        if (j->state != STATE(QUEUED) || j->removing)
            continue;
        if (!e && !(e = calloc(jobs->n_jobs + 1, sizeof(*e)))) {
            TIDE_LOG_ERROR("out of memory ordering the queue");
            return NULL;
        }
        entry_of(jobs, j, &e[(*n)++]);
    }
    tided_queue_order(e, *n);
    return e;
}

uint32_t tided__queue_position(struct tided_daemon *d, const struct job *j)
{
    if (j->state != STATE(QUEUED))
        return 0;
    size_t n;
    struct tided_queue_entry *e = queued_in_order(d->jobs, &n);
    uint32_t position = 0;
    for (size_t i = 0; i < n && !position; i++) {
        if (e[i].item == j)
            position = (uint32_t)i + 1;
    }
    free(e);
    return position;
}

bool tided__queue_must_wait(struct tided_daemon *d, uint32_t owner, int32_t priority,
                            uint64_t budget, int64_t asked)
{
    struct tide_error err = {0};
    uint32_t device;
    if (tided__jobs_admit(d, budget, asked, &device, &err) != TIDE_OK)
        return true;
    struct tided_jobs *jobs = d->jobs;
    size_t n;
    struct tided_queue_entry *e = queued_in_order(jobs, &n);
    if (n == 0)
        return false;
    struct tided_queue_entry me = {
        .uid = owner,
        .priority = priority,
        .usage = usage_of(jobs, owner),
        .queued_us = tided_now_us(),
        .seq = jobs->next_seq,
    };
    /* It goes first only if it sorts before the queue's first job. */
    bool wait = tided_queue_compare(&me, &e[0]) > 0;
    free(e);
    return wait;
}

/* ============================================================================
 * Submit's checks: priority and quotas
 * ========================================================================== */

/* The device budget and the number of the jobs not ended whose owner passes member. */
static void count_jobs(const struct tided_jobs *jobs, bool (*member)(uint32_t uid, uint32_t arg),
                       uint32_t arg, uint64_t *bytes, uint32_t *n)
{
    *bytes = 0;
    *n = 0;
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *j = jobs->jobs[i];
        if (tided__job_terminal(j) || j->removing || !member(j->owner, arg))
            continue;
        *bytes += j->budget;
        (*n)++;
    }
}

static bool same_uid(uint32_t uid, uint32_t arg)
{
    return uid == arg;
}

static bool in_group(uint32_t uid, uint32_t gid)
{
    return tided_uid_in_group(uid, gid);
}

/* err for a quota that the new job would pass; TIDE_OK when none. */
static enum tide_status check_quota(const char *quota, const char *who, uint64_t max_bytes,
                                    uint32_t max_jobs, uint64_t bytes, uint32_t n, uint64_t budget,
                                    struct tide_error *err)
{
    char a[32], b[32], c[32];
    if (max_jobs && n + 1 > max_jobs)
        return tide_error_set(err, TIDE_LIMIT,
                              "quota %s: %s has %" PRIu32
                              " job(s) not ended, and the quota is %" PRIu32
                              " job(s); cancel, finish or remove one first",
                              quota, who, n, max_jobs);
    if (max_bytes && (bytes > max_bytes || budget > max_bytes - bytes))
        return tide_error_set(err, TIDE_LIMIT,
                              "quota %s: %s's jobs not ended hold %" PRIu64 " bytes (%s) of "
                              "device budget; this job's %" PRIu64 " bytes (%s) would pass the "
                              "quota of %" PRIu64 " bytes (%s)",
                              quota, who, bytes, tided_format_bytes(bytes, a, sizeof(a)), budget,
                              tided_format_bytes(budget, b, sizeof(b)), max_bytes,
                              tided_format_bytes(max_bytes, c, sizeof(c)));
    return TIDE_OK;
}

enum tide_status tided__queue_check_priority(const struct tided_identity *who, int32_t priority,
                                             const char *field, struct tide_error *err)
{
    if (priority < PRIORITY_MIN || priority > PRIORITY_MAX)
        return tide_error_set(err, TIDE_INVALID, "%s: %" PRId32 " is outside %d to %d", field,
                              priority, PRIORITY_MIN, PRIORITY_MAX);
    if (priority > PRIORITY_DEFAULT && !who->admin)
        return tide_error_set(err, TIDE_PERMISSION,
                              "%s: %" PRId32 " is above the default %d; only root and members "
                              "of tided's admin-group may raise a priority (%s may lower it)",
                              field, priority, PRIORITY_DEFAULT, who->peer);
    return TIDE_OK;
}

enum tide_status tided__queue_check_submit(struct tided_daemon *d, const struct tided_identity *who,
                                           int32_t priority, uint64_t budget,
                                           struct tide_error *err)
{
    if (tided__queue_check_priority(who, priority, "spec.priority", err) != TIDE_OK)
        return err->status;
    const struct tided_config *cf = &d->config;
    uint64_t bytes;
    uint32_t n;
    char name[96];
    enum tide_status st;
    if (cf->quota_uid_bytes || cf->quota_uid_jobs) {
        count_jobs(d->jobs, same_uid, who->uid, &bytes, &n);
        snprintf(name, sizeof(name), "uid %" PRIu32, who->uid);
        st = check_quota("quota-uid-jobs", name, 0, (uint32_t)cf->quota_uid_jobs, bytes, n, budget,
                         err);
        if (st == TIDE_OK)
            st =
                check_quota("quota-uid-bytes", name, cf->quota_uid_bytes, 0, bytes, n, budget, err);
        if (st != TIDE_OK)
            return st;
    }
    if (!cf->quota_groups[0])
        return TIDE_OK;
    struct tided_quota_group *groups = NULL;
    size_t n_groups = 0;
    char error[256];
    if (tided_quota_groups_parse(cf->quota_groups, &groups, &n_groups, error, sizeof(error)) != 0)
        return tide_error_set(err, TIDE_INTERNAL, "%s", error); /* config.c checked it */
    st = TIDE_OK;
    for (size_t i = 0; i < n_groups && st == TIDE_OK; i++) {
        struct group gr, *found = NULL;
        char buf[4096];
        if (getgrnam_r(groups[i].name, &gr, buf, sizeof(buf), &found) != 0 || !found) {
            TIDE_LOG_WARN("quota-groups: no group \"%s\"; its quota is not applied",
                          groups[i].name);
            continue;
        }
        uint32_t gid = (uint32_t)found->gr_gid;
        if (who->gid != gid && !tided_uid_in_group(who->uid, gid))
            continue;
        count_jobs(d->jobs, in_group, gid, &bytes, &n);
        char quota[96];
        snprintf(quota, sizeof(quota), "quota-groups %s", groups[i].name);
        snprintf(name, sizeof(name), "group %s (uid %" PRIu32 " is a member)", groups[i].name,
                 who->uid);
        st = check_quota(quota, name, groups[i].bytes, groups[i].jobs, bytes, n, budget, err);
    }
    free(groups);
    return st;
}

/* ============================================================================
 * Queueing and admitting
 * ========================================================================== */

static void enter_queue(struct tided_daemon *d, struct job *j)
{
    j->queued_us = tided_now_us();
    j->queue_seq = d->jobs->next_seq++;
}

void tided__queue_add(struct tided_daemon *d, struct job *j, Tide__V1__SubmitRequest *request,
                      char *restore_path)
{
    char a[32];
    j->queued_request = request;
    j->queued_restore_path = restore_path;
    j->no_files = true; /* until it is admitted and compiled */
    enter_queue(d, j);
    j->state = STATE(QUEUED);
    j->updated_us = j->queued_us;
    snprintf(j->message, sizeof(j->message), "waiting for %s of device memory",
             tided_format_bytes(j->budget, a, sizeof(a)));
    TIDE_LOG_INFO("job %s: QUEUED at position %" PRIu32 ": %s", j->id, tided__queue_position(d, j),
                  j->message);
    tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__STATE, NULL, j->message);
    tided_daemon_notify_status(d);
}

/* The first queued job fits now: hands it to the worker. */
static void start(struct tided_daemon *d, struct job *j)
{
    double waited = (double)(tided_now_us() - j->queued_us) / 1e6;
    struct tide_error err = {0};
    if (j->preempted) {
        char text[160];
        snprintf(text, sizeof(text),
                 "admitted again after %.1f s in the queue; resuming at step %" PRIu64, waited,
                 j->dispatched);
        j->preempted = false;
        tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__RESUMED, NULL, text);
        if (tided__job_unpark(d, j, &err) != TIDE_OK)
            tided__job_fail(d, j, err.status, err.message);
        return;
    }
    uint32_t device;
    if (tided__jobs_admit(d, j->budget, j->asked_device, &device, &err) != TIDE_OK) {
        tided__job_fail(d, j, err.status, err.message); /* the caller saw it fit: not reached */
        return;
    }
    tided__job_reserve(d, j, device);
    j->late_start = true;
    j->state = STATE(COMPILING);
    j->updated_us = tided_now_us();
    snprintf(j->message, sizeof(j->message), "admitted after %.1f s in the queue", waited);
    TIDE_LOG_INFO("job %s: QUEUED -> COMPILING: %s", j->id, j->message);
    tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__STATE, NULL, j->message);
    /* The COMPILE saves spec.pb and info.pb first: from here the job has files. */
    j->no_files = false;
    Tide__V1__SubmitRequest *request = j->queued_request;
    char *restore_path = j->queued_restore_path;
    j->queued_request = NULL;
    j->queued_restore_path = NULL;
    tided__submit_compile(d, j, request, restore_path, NULL);
}

/* Whether j may be parked now or after its step for a job of a higher priority. */
static bool preemptible(const struct job *j, int32_t priority)
{
    return j->reserved && j->session && j->priority < priority && !j->resuming &&
           (j->state == STATE(READY) || j->state == STATE(RUNNING)) && !j->trace_call &&
           !j->writing && j->streamed_incomplete == 0 && !j->no_files;
}

static int compare_victims(const void *a, const void *b)
{
    const struct job *x = *(struct job *const *)a, *y = *(struct job *const *)b;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    return (x->created_us < y->created_us) - (x->created_us > y->created_us);
}

/*
 * The first queued job, head, does not fit: parks lower-priority jobs to
 * make room, if they can, on one device (the one head asks for, or the one
 * where the fewest bytes must be preempted; a job's budget is room only on
 * its own device). true when the room is there now (every victim was parked
 * at once); false when it is not, or when victims finish their step first
 * (they run admission again when they are parked).
 */
static bool preempt_for(struct tided_daemon *d, const struct job *head)
{
    struct tided_jobs *jobs = d->jobs;
    const struct tided_devices *devs = d->devices;
    struct job **victims = calloc(jobs->n_jobs + 1, sizeof(*victims));
    if (!victims)
        return false;
    uint32_t first = 0, last = devs->n;
    if (head->asked_device >= 0 && head->asked_device < (int64_t)devs->n)
        first = (uint32_t)head->asked_device, last = first + 1;
    bool found = false;
    uint32_t best = 0;
    uint64_t best_bytes = 0, best_coming = 0;
    for (uint32_t dev = first; dev < last; dev++) {
        const struct tided_device *dv = &devs->devices[dev];
        uint64_t free_now =
            dv->total_bytes > dv->reserved_bytes ? dv->total_bytes - dv->reserved_bytes : 0;
        uint64_t coming = 0;
        for (size_t i = 0; i < jobs->n_jobs; i++) {
            const struct job *j = jobs->jobs[i];
            if (j->preempting && j->device == dev)
                coming += j->budget;
        }
        if (free_now + coming >= head->budget) {
            free(victims);
            return false; /* the room is on its way */
        }
        size_t n = 0;
        for (size_t i = 0; i < jobs->n_jobs; i++) {
            struct job *j = jobs->jobs[i];
            if (j->device == dev && !j->preempting && preemptible(j, head->priority))
                victims[n++] = j;
        }
        qsort(victims, n, sizeof(*victims), compare_victims);
        uint64_t room = free_now + coming, taken = 0;
        for (size_t k = 0; k < n && room < head->budget; k++)
            room += victims[k]->budget, taken += victims[k]->budget;
        if (room >= head->budget && (!found || taken < best_bytes))
            found = true, best = dev, best_bytes = taken, best_coming = coming;
    }
    bool now = false;
    if (found) {
        size_t n = 0;
        for (size_t i = 0; i < jobs->n_jobs; i++) {
            struct job *j = jobs->jobs[i];
            if (j->device == best && !j->preempting && preemptible(j, head->priority))
                victims[n++] = j;
        }
        qsort(victims, n, sizeof(*victims), compare_victims);
        const struct tided_device *dv = &devs->devices[best];
        uint64_t room = best_coming;
        room += dv->total_bytes > dv->reserved_bytes ? dv->total_bytes - dv->reserved_bytes : 0;
        now = best_coming == 0;
        for (size_t k = 0; k < n && room < head->budget; k++) {
            struct job *v = victims[k];
            room += v->budget;
            TIDE_LOG_INFO("job %s (priority %" PRId32 ", device %u): preempted for job %s "
                          "(priority %" PRId32 ")",
                          v->id, v->priority, best, head->id, head->priority);
            v->preempting = true;
            if (v->step_in_flight)
                now = false;
            else
                tided__queue_preempt_now(d, v);
        }
    }
    free(victims);
    return now;
}

void tided__queue_admit(struct tided_daemon *d)
{
    struct tided_jobs *jobs = d->jobs;
    if (!jobs || jobs->admitting || d->phase != TIDED_SERVING)
        return;
    jobs->admitting = true;
    for (;;) {
        size_t n;
        struct tided_queue_entry *e = queued_in_order(jobs, &n);
        struct job *head = n ? e[0].item : NULL;
        free(e);
        if (!head)
            break;
        struct tide_error err = {0};
        uint32_t device;
        if (tided__jobs_admit(d, head->budget, head->asked_device, &device, &err) == TIDE_OK)
            start(d, head);
        else if (!preempt_for(d, head))
            break;
    }
    jobs->admitting = false;
}

void tided__queue_preempt_now(struct tided_daemon *d, struct job *j)
{
    char a[32];
    j->preempting = false;
    if (!tided__job_live(j) || j->step_in_flight)
        return; /* it ended meanwhile (or is not back yet: called again then) */
    uint64_t step = j->dispatched;
    tided__job_release_session(d, j, true); /* CHECKPOINT, then FREE; the budget now */
    j->preempted = true;
    enter_queue(d, j);
    char text[300];
    snprintf(text, sizeof(text),
             "preempted at step %" PRIu64 " by a job of a higher priority: checkpointed, its %s "
             "budget released; it resumes by itself when room returns",
             step, tided_format_bytes(j->budget, a, sizeof(a)));
    tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__PREEMPTED, NULL, text);
    tided__job_set_state(d, j, STATE(QUEUED), "%s", text);
}

void tided__queue_forget(struct job *j)
{
    if (j->queued_request)
        tide__v1__submit_request__free_unpacked(j->queued_request, NULL);
    j->queued_request = NULL;
    free(j->queued_restore_path);
    j->queued_restore_path = NULL;
    j->preempting = false;
}

void tided__queue_stop_for_shutdown(struct tided_daemon *d, struct job *j)
{
    if (j->preempted) {
        /* Its checkpoint is the job, as a parked job's is. */
        tided__job_stop_for_shutdown(d, j);
        return;
    }
    tided__job_fail(d, j, TIDE_UNAVAILABLE,
                    "tided shut down while the job was queued; submit it again");
}
