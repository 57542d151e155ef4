/* SPDX-License-Identifier: MIT */
/*
 * rpc-plan.c: tide.v1.Jobs/Plan: the PLAN task (a plan report, nothing kept) and its answer.
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
#include "daemon/store.h"

void tided_rpc_plan(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__PlanRequest *req = (Tide__V1__PlanRequest *)request;
    uint64_t budget;
    struct tide_error err = {0};
    if (tided_call_identity(call)->read_only) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
    } else if (!req->spec || !req->spec->graph) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT, "PlanRequest.spec%s: missing",
                        req->spec ? ".graph" : "");
    } else if (tided__job_budget(d, req->spec->memory ? req->spec->memory->device_budget_bytes : 0,
                                 &budget, &err) != TIDE_OK) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "%s", err.message);
    } else {
        struct tided_task *t = tided_task_new(TIDED_TASK_PLAN, NULL);
        if (!t) {
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        } else {
            t->compile.request = request;
            t->compile.spec = req->spec;
            t->compile.backend = d->backend;
            t->compile.limits = d->limits;
            t->compile.budget = budget;
            t->compile.host_budget = tided_config_host_budget(&d->config);
            tided__task_wait(t, call);
            tided__task_submit(d, t);
            return;
        }
    }
    protobuf_c_message_free_unpacked(request, NULL);
}

void tided__plan_done(struct tided_daemon *d, struct tided_task *t)
{
    (void)d;
    struct tided_call *call = tided__task_take_call(t);
    if (!call)
        return;
    if (t->status != TIDE_OK)
        tided_call_fail_status(call, t->status, t->err.message);
    else
        tided_call_reply_packed(call, t->compile.packed.data, t->compile.packed.len);
}
