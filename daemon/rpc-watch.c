/* SPDX-License-Identifier: MIT */
/*
 * rpc-watch.c: tide.v1.Jobs/Watch: a server stream of JobEvents (the watchers live in jobs.c,
 * which emits the events).
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

static void watch_done(void *owner, struct tided_call *call, bool cancelled)
{
    (void)call, (void)cancelled;
    struct watcher *w = owner;
    tided__watcher_remove(w->daemon->jobs, w);
}

static const struct tided_call_ops watch_ops = {.done = watch_done};

void tided_rpc_watch(struct tided_daemon *d, struct tided_call *call, ProtobufCMessage *request)
{
    Tide__V1__WatchRequest *req = (Tide__V1__WatchRequest *)request;
    struct tided_jobs *jobs = d->jobs;
    struct job *j = NULL;
    if (req->job_id[0] && !(j = tided__job_for_call(d, call, req->job_id, false))) {
        protobuf_c_message_free_unpacked(request, NULL);
        return;
    }
    struct watcher *w = calloc(1, sizeof(*w));
    if (!w) {
        tided_call_fail(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        protobuf_c_message_free_unpacked(request, NULL);
        return;
    }
    w->daemon = d;
    w->call = call;
    w->job = j;
    w->stride = req->step_stride;
    w->who = *tided_call_identity(call);
    protobuf_c_message_free_unpacked(request, NULL);
    w->next = jobs->watchers;
    if (jobs->watchers)
        jobs->watchers->prev = w;
    jobs->watchers = w;
    tided_call_set_owner(call, &watch_ops, w);

    /* Start with where things stand: a STATE event per job watched. */
    Tide__V1__JobInfo info;
    Tide__V1__JobEvent ev = TIDE__V1__JOB_EVENT__INIT;
    ev.kind = TIDE__V1__JOB_EVENT__KIND__STATE;
    ev.job = &info;
    ev.time_us = tided_now_us();
    for (size_t i = 0; i < jobs->n_jobs; i++) {
        const struct job *x = jobs->jobs[i];
        if (j ? x != j : x->removing || !tided__job_may_see(&w->who, x))
            continue;
        tided__job_info(x, &info, false);
        ev.message = (char *)x->message;
        tided_call_write(call, &ev.base, NULL);
    }
    if (j && tided__job_terminal(j)) {
        tided_call_finish(call);
        tided_call_set_owner(call, NULL, NULL);
        tided__watcher_remove(jobs, w);
    }
}
