/* SPDX-License-Identifier: MIT */
/*
 * rpc-submit.c: tide.v1.Jobs/Submit: admission (the budget against the largest job budget and
 * what the device has left, resume_from), then the COMPILE task; its result
 * makes the job READY or FAILED and answers the call.
 *
 * Threads: main thread only (jobs.c's DESIGN section).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"
#include "daemon/spec.h"
#include "daemon/store.h"

void tided_rpc_submit(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__SubmitRequest *req = (Tide__V1__SubmitRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    struct tided_jobs *jobs = d->jobs;
    char a[32], buf[80];
    const Tide__V1__JobSpec *spec = req->spec;
    char *restore_path = NULL;
    uint64_t budget;
    uint32_t device = 0;
    int64_t asked = spec && spec->device ? (int64_t)spec->device->index : -1;
    enum tide_status st;
    struct tide_error err = {0};

    if (who->read_only) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
        goto out;
    }
    tided__store_forget_old_jobs(d);
    if (!spec || !spec->graph) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "SubmitRequest.spec%s: missing",
                        spec ? ".graph" : "");
        goto out;
    }
    if (strlen(spec->name) > 256) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "spec.name: longer than 256 bytes");
        goto out;
    }
    st = tided__job_budget(d, spec->memory ? spec->memory->device_budget_bytes : 0, &budget, &err);
    if (st == TIDE_OK && asked >= 0)
        st = tided__job_device_holds(d, budget, asked, &err);
    if (st != TIDE_OK) {
        /* No such device is a bad argument; no room is a resource. */
        tided_call_fail(call,
                        st == TIDE_INVALID ? GRPC_STATUS_INVALID_ARGUMENT
                                           : GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "%s", err.message);
        goto out;
    }
    if (tided__queue_check_submit(d, who, spec->priority, budget, &err) != TIDE_OK) {
        tided_call_fail_status(call, err.status, err.message);
        goto out;
    }
    /* A budget that fits the device but not now (or behind queued jobs) waits QUEUED. */
    bool queue = tided__queue_must_wait(d, who->uid, spec->priority, budget, asked);
    if (queue && spec->n_streamed_variables > 0) {
        if (tided__jobs_admit(d, budget, asked, &device, &err) == TIDE_OK)
            snprintf(err.message, sizeof(err.message), "queued jobs go before it");
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                        "%s; a job with streamed_variables is not queued (its values are written "
                        "between Submit and Train): submit it when there is room",
                        err.message);
        goto out;
    }
    if (tided_spec_streamed_alone(spec, &err) != TIDE_OK) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "%s", err.message);
        goto out;
    }
    if (spec->resume_from && spec->resume_from[0]) {
        const char *rid = spec->resume_from;
        if (!tided__job_id_valid(rid)) {
            tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                            "resume_from: \"%s\" is not a job id (j-<16 hex digits>)",
                            tided__shown(rid, buf, sizeof(buf)));
            goto out;
        }
        struct job *from = tided__job_find(jobs, rid);
        char *dir = tided_path_join(jobs->jobs_dir, rid);
        restore_path = dir ? tided_path_join(dir, "checkpoint.pb") : NULL;
        free(dir);
        if (!restore_path) {
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
        if (from && !tided__job_may_control(who, from)) {
            tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                            "resume_from: job %s belongs to uid %u", from->id, from->owner);
            goto out;
        }
        struct stat sb;
        if (!from || stat(restore_path, &sb) != 0) {
            tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "resume_from %s: no checkpoint at %s", rid,
                            restore_path);
            goto out;
        }
    }

    char id[24];
    struct job *j = NULL;
    if (tided__job_new_id(jobs, id) != 0 || !(j = tided__job_add(jobs, id))) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "cannot create a job: %s",
                        j ? "out of memory" : "no random id");
        goto out;
    }
    j->name = strdup(spec->name);
    j->owner = who->uid;
    j->created_us = j->updated_us = j->contact_us = tided_now_us();
    j->budget = budget;
    j->priority = spec->priority;
    j->asked_device = asked;
    j->every_steps = spec->checkpoint ? spec->checkpoint->every_steps : 0;
    j->keep_checkpoints = spec->checkpoint ? spec->checkpoint->keep : 0;
    j->state = STATE(SUBMITTED);
    TIDE_LOG_INFO("job %s \"%s\" submitted by %s, budget %s", j->id,
                  tided__shown(spec->name, buf, sizeof(buf)), who->peer,
                  tided_format_bytes(budget, a, sizeof(a)));

    if (!j->name) {
        tided__job_fail(d, j, TIDE_NOMEM, "out of memory");
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    if (queue) {
        tided__queue_add(d, j, req, restore_path);
        request = NULL; /* the job owns them until it is admitted */
        restore_path = NULL;
        tided__queue_admit(d); /* a higher priority may preempt its way in at once */
        Tide__V1__JobInfo info;
        tided__job_info(j, &info, false);
        Tide__V1__SubmitResponse resp = TIDE__V1__SUBMIT_RESPONSE__INIT;
        resp.job = &info;
        tided_call_reply(call, &resp.base);
        goto out;
    }
    /* It does not wait, so it fits now: on the device admission picks. */
    if (tided__jobs_admit(d, budget, asked, &device, &err) != TIDE_OK) {
        tided__job_fail(d, j, err.status, err.message);
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", err.message);
        goto out;
    }
    tided__job_reserve(d, j, device);
    tided__submit_compile(d, j, req, restore_path, call);
    request = NULL;
    restore_path = NULL;
out:
    free(restore_path);
    if (request)
        protobuf_c_message_free_unpacked(request, NULL);
}

void tided__submit_compile(struct tided_daemon *d, struct job *j, Tide__V1__SubmitRequest *request,
                           char *restore_path, struct tided_call *call)
{
    struct tided_task *t = tided_task_new(TIDED_TASK_COMPILE, j);
    if (!t || !(t->compile.dir = strdup(j->dir))) {
        tided_task_free(t);
        tide__v1__submit_request__free_unpacked(request, NULL);
        free(restore_path);
        tided__store_remove_job(d, j);
        tided__job_fail(d, j, TIDE_NOMEM, "out of memory");
        if (call)
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    t->compile.request = &request->base; /* the task owns it now */
    t->compile.spec = request->spec;
    t->compile.backend = tided__job_backend(d, j);
    t->compile.limits = d->limits;
    t->compile.budget = j->budget;
    t->compile.host_budget = tided_config_host_budget(&d->config);
    t->compile.restore_path = restore_path;
    j->state = STATE(COMPILING);
    Tide__V1__JobInfo info;
    tided__job_info(j, &info, false);
    size_t n = tide__v1__job_info__get_packed_size(&info);
    t->compile.info.data = malloc(n ? n : 1);
    if (t->compile.info.data)
        t->compile.info.len = tide__v1__job_info__pack(&info, t->compile.info.data);
    if (!j->late_start) /* an admitted job told its watchers already */
        tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__STATE, NULL, NULL);
    if (call)
        tided__task_wait(t, call);
    j->compiling = t;
    tided__task_submit(d, t);
    tided_daemon_notify_status(d);
}

void tided__compile_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    if (j->resuming) {
        tided__resume_done(d, t);
        return;
    }
    struct tided_call *call = tided__task_take_call(t);
    char a[32], b[32];

    if (j->state == STATE(CANCELLED)) {
        if (t->session) {
            j->session = t->session;
            t->session = NULL;
        }
        tided__job_release_session(d, j, false);
        /* The compile thread may have saved info.pb after Cancel's: save it again. */
        tided__store_persist_job(d, j);
        if (call)
            tided_call_fail(call, GRPC_STATUS_CANCELLED, "job %s was cancelled while compiling",
                            j->id);
        return;
    }
    if (t->status != TIDE_OK) {
        char text[600];
        snprintf(text, sizeof(text), "%s",
                 t->err.message[0] ? t->err.message : tide_strerror(t->status));
        /* It never ran: nothing on disk is worth keeping (the spec may be large). */
        tided__store_remove_job(d, j);
        tided__job_fail(d, j, t->status, text);
        if (call)
            tided_call_fail_status(call, t->status, text);
        return;
    }
    /* Keep what the job needs from the compilation; the spec goes with the task. */
    j->session = t->session;
    t->session = NULL;
    j->loss = t->compile.loss;
    t->compile.loss = NULL;
    j->n_feeds = t->compile.n_feeds;
    j->feeds = t->compile.feeds;
    t->compile.feeds = NULL;
    j->n_fetches = t->compile.n_fetches;
    j->fetches = t->compile.fetches;
    t->compile.fetches = NULL;
    j->n_user_variables = t->compile.n_user_variables;
    j->user_variables = t->compile.user_variables;
    t->compile.user_variables = NULL;
    j->plan = t->compile.plan;
    t->compile.plan = NULL;
    j->n_streamed = t->compile.n_streamed;
    j->streamed = t->compile.streamed;
    t->compile.streamed = NULL;
    j->streamed_written = calloc(j->n_streamed ? j->n_streamed : 1, sizeof(*j->streamed_written));
    if (!j->streamed_written) {
        tided__store_remove_job(d, j);
        tided__job_fail(d, j, TIDE_NOMEM, "out of memory");
        if (call)
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    for (uint32_t i = 0; i < j->n_streamed; i++)
        j->streamed_incomplete += j->streamed[i].nbytes > 0;
    if (t->compile.plan_svg)
        j->plan_svg = tided_metrics_blob_new(t->compile.plan_svg, t->compile.plan_svg_len);
    j->host_bytes = j->plan ? j->plan->host_bytes : 0;
    j->steps = j->dispatched = t->compile.restored_step;

    if (d->phase != TIDED_SERVING) {
        tided__job_detach_train(j, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        tided__job_release_session(d, j, false);
        tided__store_remove_job(d, j);
        tided__job_set_state(d, j, STATE(FAILED),
                             "tided shut down before the job could start; submit it "
                             "again");
        if (call)
            tided_call_fail(call, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
        return;
    }
    char text[300];
    if (!tided__host_pool_fits(d, j, text, sizeof(text))) {
        tided__store_remove_job(d, j);
        tided__job_fail(d, j, TIDE_DOES_NOT_FIT, text);
        if (call)
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", text);
        return;
    }
    if (t->compile.restore_path)
        TIDE_LOG_INFO("job %s: restored %u variable(s) at step %" PRIu64 " from %s", j->id,
                      t->compile.restored_variables, t->compile.restored_step,
                      t->compile.restore_path);
    TIDE_LOG_INFO("job %s: planned: peak %s of a %s budget", j->id,
                  tided_format_bytes(j->plan ? j->plan->predicted_peak_bytes : 0, a, sizeof(a)),
                  tided_format_bytes(j->budget, b, sizeof(b)));
    /* READY; RUNNING when a Train stream waits for a job admitted from the queue. */
    tided__train_resume(d, j);
    /*
     * Admitted from the queue with no Train stream waiting: idle since its
     * owner last called about it (Submit, Get, ...), not since now, so that
     * the job of a client that died while it waited gives its budget back at
     * the next idle check instead of holding it for another idle-timeout.
     */
    if (!call && j->late_start && j->state == STATE(READY) && j->contact_us < j->idle_since_us)
        j->idle_since_us = j->contact_us;
    if (call) {
        Tide__V1__JobInfo info;
        tided__job_info(j, &info, true);
        Tide__V1__SubmitResponse resp = TIDE__V1__SUBMIT_RESPONSE__INIT;
        resp.job = &info;
        tided_call_reply(call, &resp.base);
    }
}
