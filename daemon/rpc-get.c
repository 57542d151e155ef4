/* SPDX-License-Identifier: MIT */
/*
 * rpc-get.c: tide.v1.Jobs/Get: one job's JobInfo, with its plan.
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

void tided_rpc_get(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__GetJobRequest *req = (Tide__V1__GetJobRequest *)request;
    struct job *j = tided__job_for_call(d, call, req->job_id, false);
    if (j) {
        Tide__V1__JobInfo info;
        tided__job_info(j, &info, true);
        tided_call_reply(call, &info.base);
    }
    protobuf_c_message_free_unpacked(request, NULL);
}
