/* SPDX-License-Identifier: MIT */
/*
 * rpc-list.c: tide.v1.Jobs/List: the caller's jobs, or every job for admins and monitors.
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

void tided_rpc_list(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__ListJobsRequest *req = (Tide__V1__ListJobsRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    Tide__V1__JobInfo *storage;
    size_t n;
    /* all is for admins and monitors; anyone else gets their own jobs. */
    Tide__V1__JobInfo **ptrs = tided__jobs_visible(d, who, req->all && who->admin, &n, &storage);
    if (!ptrs) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    } else {
        Tide__V1__ListJobsResponse resp = TIDE__V1__LIST_JOBS_RESPONSE__INIT;
        resp.n_jobs = n;
        resp.jobs = ptrs;
        tided_call_reply(call, &resp.base);
    }
    free(ptrs);
    free(storage);
    protobuf_c_message_free_unpacked(request, NULL);
}
