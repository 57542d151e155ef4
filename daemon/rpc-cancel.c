/* SPDX-License-Identifier: MIT */
/*
 * rpc-cancel.c: tide.v1.Jobs/Cancel: ends the Train stream, releases the session behind the
 * step in flight (or abandons the compilation in flight) and marks the job CANCELLED.
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

void tided__job_cancel(struct tided_daemon *d, struct job *j, const char *why)
{
    char text[640];
    snprintf(text, sizeof(text), "job %s was %s", j->id, why);
    tided__job_detach_train(j, GRPC_STATUS_CANCELLED, text);
    bool compiling = j->state == STATE(COMPILING) || j->state == STATE(SUBMITTED);
    if (!compiling)
        tided__job_release_session(d, j, false); /* behind the step in flight, if any */
    else
        tided_task_cancel(j->compiling); /* it stops at its next pass (worker.c) */
    tided__job_set_state(d, j, STATE(CANCELLED), "%s", why);
}

void tided_rpc_cancel(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__CancelJobRequest *req = (Tide__V1__CancelJobRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    struct job *j = tided__job_for_call(d, call, req->job_id, true);
    if (j && tided__job_terminal(j)) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s has already ended (%s)",
                        j->id, tided__job_state_name(j->state));
    } else if (j) {
        char why[64];
        snprintf(why, sizeof(why), "cancelled by uid %u", who->uid);
        tided__job_cancel(d, j, why);
        Tide__V1__JobInfo info;
        tided__job_info(j, &info, false);
        tided_call_reply(call, &info.base);
    }
    protobuf_c_message_free_unpacked(request, NULL);
}
