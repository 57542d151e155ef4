/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/queue.c: `tidectl queue`: the queued jobs in admission
 * order (position, job, owner, priority, budget, waiting since), as a table
 * or one JSON line per job. An admin sees every user's; anyone else their
 * own, with their places in the whole queue.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include "tidectl.h"

static int by_position(const void *a, const void *b)
{
    const struct tide_job_info *x = a, *y = b;
    return (x->queue_position > y->queue_position) - (x->queue_position < y->queue_position);
}

static int run_queue(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_job_info *jobs;
    size_t n;
    if (tide_client_list(c, true, &jobs, &n) != 0)
        return tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    size_t queued = 0;
    for (size_t i = 0; i < n; i++) {
        if (jobs[i].state == TIDE_JOB_QUEUED)
            jobs[queued++] = jobs[i];
    }
    qsort(jobs, queued, sizeof(*jobs), by_position);
    int rc = TIDECTL_EXIT_OK;
    if (o->json) {
        for (size_t i = 0; i < queued; i++) {
            if (tidectl_json_print_line(tidectl_json_job(&jobs[i])) != TIDECTL_EXIT_OK)
                rc = TIDECTL_EXIT_RUNTIME;
        }
        free(jobs);
        return rc;
    }
    if (queued == 0) {
        printf("no queued jobs\n");
        free(jobs);
        return rc;
    }
    struct timeval now;
    gettimeofday(&now, NULL);
    int64_t now_us = (int64_t)now.tv_sec * 1000000 + now.tv_usec;
    printf("%4s %-20s %-18s %-8s %8s %10s %-19s %8s\n", "POS", "ID", "NAME", "OWNER", "PRIORITY",
           "BUDGET", "WAITING SINCE", "WAITED");
    for (size_t i = 0; i < queued; i++) {
        const struct tide_job_info *j = &jobs[i];
        char b[32], t[64], w[32], user[64];
        printf("%4" PRIu32 " %-20s %-18.18s %-8.8s %8" PRId32 " %10s %-19s %8s\n",
               j->queue_position, j->id, j->name,
               tidectl_fmt_user(j->owner_uid, user, sizeof(user)), j->priority,
               tidectl_fmt_bytes(j->device_budget_bytes, b, sizeof(b)),
               tidectl_fmt_time_us(j->queued_us, t, sizeof(t)),
               tidectl_fmt_duration((double)(now_us - j->queued_us) / 1e6, w, sizeof(w)));
    }
    free(jobs);
    return rc;
}

const struct tidectl_verb tidectl_verb_queue = {
    .name = "queue",
    .run = run_queue,
    .connects = true,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "queue",
    .summary = "list the jobs waiting for room on the device, in admission order",
    .help = "DESCRIPTION\n"
            "  Lists the queued jobs in the order tided admits them: position, id, name,\n"
            "  owner, priority, budget, when each entered the queue and how long it has\n"
            "  waited. A job waits QUEUED when its budget fits the device but not what is\n"
            "  left now, or when a job ahead of it waits; jobs preempted by a higher\n"
            "  priority wait here too. The order is priority (higher first), then fair\n"
            "  share (the user whose jobs held the fewest device-byte-seconds over the\n"
            "  daemon's fair-share-window first), then arrival. Admins see every user's\n"
            "  queued jobs; anyone else their own, with their places in the whole queue.\n"
            "  With --json, one line per job (tidectl jobs --json's fields, queue_position,\n"
            "  priority and queued_us among them).\n",
};
