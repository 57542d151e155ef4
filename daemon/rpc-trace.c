/* SPDX-License-Identifier: MIT */
/*
 * rpc-trace.c: tide.v1.Jobs/Trace: arms tracing for a job's next training
 * steps and answers with their Chrome trace (runtime/trace.h) once they have
 * run; and the job's latest trace, for whoever shows it (tided_jobs_trace).
 *
 * Tracing rides on STEP tasks rather than a task kind of its own, since
 * only the step itself can record what it does: the call arms the job
 * (trace_left steps to go), each step dispatched while armed is marked
 * traced (tided__trace_dispatch), the worker starts, continues and ends
 * the session's recording with those steps, and the last one comes back
 * with the JSON, which the job keeps and the call gets. Evaluations that
 * run between the traced training steps are recorded too; only training
 * steps count. One Trace call per job at a time.
 *
 * The call ends early when the job ends (ABORTED, with the job's state and
 * message), and when the client goes away or its deadline passes, which
 * disarms the job: the next step goes to the worker untraced and the
 * worker stops recording.
 *
 * Threads: main thread only (jobs.c's DESIGN section); the recording itself
 * lives in the session, on the worker thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"
#include "daemon/metrics.h"
#include "daemon/jobs.h"

/* Forgets the armed trace (the call, if any, is the caller's to end). */
static void disarm(struct job *j)
{
    if (j->trace_call)
        tided_call_set_owner(j->trace_call, NULL, NULL);
    j->trace_call = NULL;
    j->trace_left = 0;
    j->trace_asked = 0;
    j->trace_started = false;
    j->trace_first_step = 0;
}

static void trace_call_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call;
    struct job *j = owner;
    TIDE_LOG_INFO("job %s: the Trace call of %u steps ended before they ran (%s); tracing is off",
                  j->id, j->trace_asked,
                  cancelled ? "the client went away or its deadline passed" : "closed");
    j->trace_call = NULL;
    disarm(j);
}

static const struct tided_call_ops trace_ops = {.done = trace_call_done};

void tided_rpc_trace(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__TraceRequest *req = (Tide__V1__TraceRequest *)request;
    /* Tracing observes: whoever may watch the job (its owner, an admin) may trace it. */
    struct job *j = tided__job_for_call(d, call, req->job_id, false);
    if (!j)
        goto out;
    if (req->steps < 1 || req->steps > TRACE_STEPS_MAX) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                        "steps: %u; a trace covers 1 to %d training steps", req->steps,
                        TRACE_STEPS_MAX);
    } else if (d->phase != TIDED_SERVING) {
        tided_call_fail(call, GRPC_STATUS_UNAVAILABLE, "tided is shutting down");
    } else if (tided__job_terminal(j)) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION,
                        "job %s has ended (%s): it runs no more steps to trace", j->id,
                        tided__job_state_name(j->state));
    } else if (j->trace_call) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION,
                        "job %s is already being traced for another call (%u of %u steps to "
                        "go); one trace at a time",
                        j->id, j->trace_left, j->trace_asked);
    } else {
        disarm(j);
        j->trace_call = call;
        j->trace_asked = req->steps;
        j->trace_left = req->steps;
        tided_call_set_owner(call, &trace_ops, j);
        TIDE_LOG_INFO("job %s: tracing its next %u training steps for %s", j->id, req->steps,
                      tided_call_identity(call)->peer);
    }
out:
    protobuf_c_message_free_unpacked(request, NULL);
}

void tided__trace_dispatch(struct job *j, struct tided_task *t)
{
    if (!j->trace_left)
        return; /* untraced: the worker stops a recording a vanished call left behind */
    t->step.trace = true;
    t->step.trace_begin = !j->trace_started;
    t->step.trace_max_bytes = TRACE_BYTES_MAX;
    j->trace_started = true;
    if (t->step.eval)
        return;
    if (!j->trace_first_step)
        j->trace_first_step = j->dispatched;
    if (--j->trace_left == 0)
        t->step.trace_end = true;
}

void tided__trace_step_done(struct tided_daemon *d, struct job *j, struct tided_task *t)
{
    (void)d;
    if (!t->step.trace)
        return;
    struct tided_call *call = j->trace_call;
    if (t->step.trace_status != TIDE_OK) {
        TIDE_LOG_WARN("job %s: tracing failed: %s", j->id, t->step.trace_err.message);
        disarm(j);
        if (call)
            tided_call_fail_status(call, t->step.trace_status, t->step.trace_err.message);
        return;
    }
    if (!t->step.trace_end)
        return;
    /* Shared with the dashboard's snapshots, which may still hold the previous one. */
    struct tided_metrics_blob *trace =
        tided_metrics_blob_new(t->step.trace_json, t->step.trace_len);
    free(t->step.trace_json);
    t->step.trace_json = NULL;
    if (!trace) {
        disarm(j);
        if (call)
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                            "out of memory keeping the trace of job %s", j->id);
        return;
    }
    trace->first_step = j->trace_first_step;
    trace->last_step = j->steps;
    tided_metrics_blob_release(j->trace);
    j->trace = trace;
    uint32_t steps = j->trace_asked;
    TIDE_LOG_INFO("job %s: traced steps %" PRIu64 " to %" PRIu64 " (%zu bytes of JSON)", j->id,
                  trace->first_step, trace->last_step, trace->len);
    disarm(j);
    if (!call)
        return; /* the caller left; the trace stays for tided_jobs_trace */
    Tide__V1__TraceReply reply = TIDE__V1__TRACE_REPLY__INIT;
    reply.trace_json.data = (uint8_t *)trace->data;
    reply.trace_json.len = trace->len;
    reply.steps = steps;
    reply.first_step = trace->first_step;
    reply.last_step = trace->last_step;
    tided_call_reply(call, &reply.base);
}

void tided__trace_job_ended(struct job *j)
{
    struct tided_call *call = j->trace_call;
    uint32_t asked = j->trace_asked, left = j->trace_left;
    disarm(j);
    tided_metrics_blob_release(j->trace);
    j->trace = NULL;
    if (call)
        tided_call_fail(call, GRPC_STATUS_ABORTED,
                        "job %s ended (%s%s%s) before the %u steps of its trace had run (%u "
                        "had been started)",
                        j->id, tided__job_state_name(j->state), j->message[0] ? ": " : "",
                        j->message, asked, asked - left);
}

const char *tided_jobs_trace(struct tided_daemon *d, const char *job_id, size_t *len,
                             uint64_t *first_step, uint64_t *last_step)
{
    const struct job *j = job_id ? tided__job_find(d->jobs, job_id) : NULL;
    if (!j || !j->trace)
        return NULL;
    *len = j->trace->len;
    if (first_step)
        *first_step = j->trace->first_step;
    if (last_step)
        *last_step = j->trace->last_step;
    return j->trace->data;
}
