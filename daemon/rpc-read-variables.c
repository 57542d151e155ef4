/* SPDX-License-Identifier: MIT */
/*
 * rpc-read-variables.c: tide.v1.Jobs/ReadVariables: the READ_VARIABLES task, from the live
 * session or the job's last checkpoint, and its answer.
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

void tided_rpc_read_variables(struct tided_daemon *d, struct tided_call *call,
                              ProtobufCMessage *request)
{
    Tide__V1__ReadVariablesRequest *req = (Tide__V1__ReadVariablesRequest *)request;
    struct job *j = tided__job_for_call(d, call, req->job_id, true);
    struct tided_task *t = NULL;
    if (!j)
        goto out;
    /*
     * A parked job's variables are its checkpoint's (queued behind the parking's checkpoint);
     * so are a finished job's, also while its final checkpoint is still being written: the
     * worker runs tasks in order, so this read comes after it.
     */
    bool from_file = (tided__job_terminal(j) && (j->has_checkpoint || j->final_checkpoint_queued)) ||
                     j->state == STATE(PARKED) || j->resuming;
    if (!tided__job_live(j) && !from_file) {
        tided_call_fail(call, GRPC_STATUS_FAILED_PRECONDITION, "job %s is %s%s", j->id,
                        tided__job_state_name(j->state),
                        tided__job_terminal(j) ? " and has no checkpoint to read variables from"
                                               : ": its variables do not exist yet");
        goto out;
    }
    t = tided_task_new(TIDED_TASK_READ_VARIABLES, j);
    if (!t)
        goto oom;
    if (req->n_names) {
        t->read.names = calloc(req->n_names, sizeof(char *));
        if (!t->read.names)
            goto oom;
        for (size_t i = 0; i < req->n_names; i++) {
            if (!(t->read.names[i] = strdup(req->names[i])))
                goto oom;
            t->read.n_names++;
        }
    }
    t->read.offset = req->offset;
    t->read.max_bytes = req->max_bytes < TIDED_READ_PAGE_MAX ? req->max_bytes : TIDED_READ_PAGE_MAX;
    t->read.defaults = j->user_variables;
    t->read.n_defaults = j->n_user_variables;
    if (tided__job_live(j)) {
        t->session = j->session;
        t->read.step = j->dispatched;
    } else {
        t->read.checkpoint_path = tided_path_join(j->dir, "checkpoint.pb");
        t->read.spec_path = tided_path_join(j->dir, "spec.pb");
        if (!t->read.checkpoint_path || !t->read.spec_path)
            goto oom;
    }
    tided__task_wait(t, call);
    tided__task_submit(d, t);
    goto out;
oom:
    tided_task_free(t);
    tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
out:
    protobuf_c_message_free_unpacked(request, NULL);
}

void tided__read_done(struct tided_daemon *d, struct tided_task *t)
{
    (void)d;
    struct tided_call *call = tided__task_take_call(t);
    if (!call)
        return;
    if (t->status != TIDE_OK)
        tided_call_fail_status(call, t->status, t->err.message);
    else
        tided_call_reply_packed(call, t->read.packed.data, t->read.packed.len);
}
