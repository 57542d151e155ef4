/* SPDX-License-Identifier: MIT */
/*
 * rpc-remove.c: tide.v1.Jobs/Remove: deletes ended jobs — those named, and
 * with all_ended every ended job of the caller's own — through
 * lifecycle.c's REMOVE task, which answers with the jobs and the bytes
 * freed. Every named job is checked before anything is deleted: one that
 * is unknown, not the caller's to control or not ended fails the call.
 *
 * Threads: main thread only (jobs.c's DESIGN section).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/jobs-impl.h"

/* Whether j is among the first n of chosen. */
static bool chosen_already(struct job *const *chosen, size_t n, const struct job *j)
{
    for (size_t i = 0; i < n; i++) {
        if (chosen[i] == j)
            return true;
    }
    return false;
}

void tided_rpc_remove(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__RemoveJobsRequest *req = (Tide__V1__RemoveJobsRequest *)request;
    const struct tided_identity *who = tided_call_identity(call);
    struct tided_jobs *jobs = d->jobs;
    struct job **chosen = NULL;
    size_t n = 0;

    if (who->read_only) {
        tided_call_fail(call, GRPC_STATUS_PERMISSION_DENIED,
                        "a monitor token may only get, list and watch jobs");
        goto out;
    }
    if (req->n_job_ids == 0 && !req->all_ended) {
        tided_call_fail(call, GRPC_STATUS_INVALID_ARGUMENT,
                        "RemoveJobsRequest: name jobs in job_ids, or set all_ended");
        goto out;
    }
    chosen = calloc(req->n_job_ids + jobs->n_jobs + 1, sizeof(*chosen));
    if (!chosen) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < req->n_job_ids; i++) {
        struct job *j = tided__job_for_call(d, call, req->job_ids[i], true);
        if (!j)
            goto out;
        if (!tided__job_terminal(j)) {
            tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION,
                            "job %s is %s: only ended jobs (DONE, FAILED, CANCELLED) can be "
                            "removed; cancel it first",
                            j->id, tided__job_state_name(j->state));
            goto out;
        }
        if (!chosen_already(chosen, n, j))
            chosen[n++] = j;
    }
    if (req->all_ended) {
        /* The caller's own jobs, an admin's too: prune never reaches into other users' jobs. */
        for (size_t i = 0; i < jobs->n_jobs; i++) {
            struct job *j = jobs->jobs[i];
            if (j->owner == who->uid && tided__job_terminal(j) && !j->removing &&
                !chosen_already(chosen, n, j))
                chosen[n++] = j;
        }
    }
    TIDE_LOG_INFO("%s removes %zu ended job(s)", who->peer, n);
    tided__jobs_remove(d, chosen, n, call);
out:
    free(chosen);
    protobuf_c_message_free_unpacked(request, NULL);
}
