/* SPDX-License-Identifier: MIT */
/*
 * rpc-set-priority.c: tide.v1.Jobs/SetPriority: changes a job's admission
 * priority (the rule is queue.c's, the same as Submit's), then runs
 * admission, since a queued job may now go first or preempt its way in.
 *
 * Threads: main thread only (jobs.c's DESIGN section).
 */
#include <inttypes.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"

void tided_rpc_set_priority(struct tided_daemon *d, struct tided_call *call,
                            ProtobufCMessage *request)
{
    Tide__V1__SetPriorityRequest *req = (Tide__V1__SetPriorityRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    struct tide_error err = {0};
    struct job *j = tided__job_for_call(d, call, req->job_id, true);
    if (!j) {
        /* tided__job_for_call answered. */
    } else if (tided__job_terminal(j)) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s has already ended (%s)",
                        j->id, tided__job_state_name(j->state));
    } else if (tided__queue_check_priority(who, req->priority, "priority", &err) != TIDE_OK) {
        tided_call_fail_status(call, err.status, err.message);
    } else {
        TIDE_LOG_INFO("job %s: priority %" PRId32 " -> %" PRId32 " by %s", j->id, j->priority,
                      req->priority, who->peer);
        j->priority = req->priority;
        tided__store_persist_job(d, j);
        tided__queue_admit(d);
        Tide__V1__JobInfo info;
        tided__job_info(j, &info, false);
        tided_call_reply(call, &info.base);
    }
    protobuf_c_message_free_unpacked(request, NULL);
}
