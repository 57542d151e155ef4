/* SPDX-License-Identifier: MIT */
/*
 * rpc-checkpoint.c: tide.v1.Jobs/Checkpoint: the CHECKPOINT task (or the last checkpoint of an
 * ended job) and its result, which every checkpoint of a job comes back
 * through.
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

void tided_rpc_checkpoint(struct tided_daemon *d, struct tided_call *call,
                          ProtobufCMessage *request)
{
    Tide__V1__CheckpointRequest *req = (Tide__V1__CheckpointRequest *)request;
    struct job *j = tided__job_for_call(d, call, req->job_id, true);
    if (!j)
        goto out;
    if (tided__job_live(j)) {
        struct tided_task *t = tided_task_new(TIDED_TASK_CHECKPOINT, j);
        if (!t || !(t->checkpoint.dir = strdup(j->dir))) {
            tided_task_free(t);
            tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            goto out;
        }
        t->session = j->session;
        t->checkpoint.step = j->dispatched;
        t->checkpoint.keep = j->keep_checkpoints;
        tided__task_wait(t, call);
        tided__task_submit(d, t);
    } else if ((tided__job_terminal(j) && j->has_checkpoint) ||
               (j->state == STATE(PARKED) && j->has_checkpoint &&
                j->last_checkpoint_step == j->dispatched)) {
        /*
         * The job's variables cannot change (any more, or until it resumes): its last
         * checkpoint is the answer. A parked job's is the one parking wrote.
         */
        char *path = tided_path_join(j->dir, "checkpoint.pb");
        struct stat sb;
        if (!path || stat(path, &sb) != 0) {
            tided_call_fail(call, GRPC_STATUS_NOT_FOUND, "job %s: its checkpoint %s is gone", j->id,
                            path ? path : "");
        } else {
            Tide__V1__CheckpointResponse resp = TIDE__V1__CHECKPOINT_RESPONSE__INIT;
            resp.step = j->last_checkpoint_step;
            resp.path = path;
            resp.bytes = (uint64_t)sb.st_size;
            tided_call_reply(call, &resp.base);
        }
        free(path);
    } else if (j->state == STATE(PARKED)) {
        tided_call_fail(call, GRPC_STATUS_UNAVAILABLE,
                        "job %s is being parked: its checkpoint at step %" PRIu64
                        " is still being written",
                        j->id, j->dispatched);
    } else {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s is %s%s", j->id,
                        tided__job_state_name(j->state),
                        tided__job_terminal(j) ? " and has no checkpoint"
                                               : ": there is nothing to save yet");
    }
out:
    protobuf_c_message_free_unpacked(request, NULL);
}

void tided__checkpoint_done(struct tided_daemon *d, struct tided_task *t)
{
    struct job *j = t->job;
    if (t->checkpoint.final)
        j->final_checkpoint_queued = false;
    struct tided_call *call = tided__task_take_call(t);
    if (t->status != TIDE_OK) {
        TIDE_LOG_ERROR("job %s: checkpoint failed: %s", j->id, t->err.message);
        if (call)
            tided_call_fail_status(call, t->status, t->err.message);
        /* Parking's checkpoint is all a parked job has: without it it cannot resume. */
        if (j->state == STATE(PARKED) || j->resuming) {
            char text[600];
            snprintf(text, sizeof(text), "parking: its checkpoint at step %" PRIu64 " failed: %s",
                     t->checkpoint.step, t->err.message);
            tided__job_fail(d, j, t->status, text);
        }
        return;
    }
    j->has_checkpoint = true;
    j->last_checkpoint_step = t->checkpoint.step;
    TIDE_LOG_INFO("job %s: checkpoint at step %" PRIu64 " (%" PRIu64 " bytes)", j->id,
                  t->checkpoint.step, t->checkpoint.bytes);
    char text[64];
    snprintf(text, sizeof(text), "checkpoint at step %" PRIu64, t->checkpoint.step);
    tided__job_emit(d, j, TIDE__V1__JOB_EVENT__KIND__CHECKPOINT, NULL, text);
    tided__store_persist_job(d, j);
    if (call) {
        Tide__V1__CheckpointResponse resp = TIDE__V1__CHECKPOINT_RESPONSE__INIT;
        resp.step = t->checkpoint.step;
        resp.path = t->checkpoint.path;
        resp.bytes = t->checkpoint.bytes;
        tided_call_reply(call, &resp.base);
    }
}
