/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/watch.c: `tidectl watch [JOB]`: follows a job's (or every
 * visible job's) events — state changes, steps, checkpoints, the daemon's
 * messages — until the daemon ends the stream or Ctrl-C.
 */
#include <inttypes.h>
#include <stdio.h>

#include "tidectl.h"

static const char *event_kind_name(enum tide_event_kind kind)
{
    switch (kind) {
    case TIDE_EVENT_STATE:
        return "state";
    case TIDE_EVENT_STEP:
        return "step";
    case TIDE_EVENT_CHECKPOINT:
        return "checkpoint";
    case TIDE_EVENT_LOG:
        return "log";
    case TIDE_EVENT_PREEMPTED:
        return "preempted";
    case TIDE_EVENT_RESUMED:
        return "resumed";
    }
    return "unknown";
}

static int watch_event(void *user, const struct tide_job_event *e)
{
    const struct tidectl_options *o = user;
    if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "event", event_kind_name(e->kind));
        tidectl_json_set_int(line, "time_us", e->time_us);
        tidectl_json_set_string(line, "message", e->message);
        tidectl_json_set(line, "job", tidectl_json_job(e->job));
        if (e->step)
            tidectl_json_set(line, "step", tidectl_json_step(e->step));
        tidectl_json_print_line(line);
        return 0;
    }
    char t[64], b1[32];
    tidectl_fmt_time_us(e->time_us, t, sizeof(t));
    switch (e->kind) {
    case TIDE_EVENT_STEP:
        if (e->step)
            printf("%s %s step %" PRIu64 "%s loss %.4f dev %s swap %.1f MB %.1f ms\n", t,
                   e->job->id, e->step->step, e->step->eval_only ? " (eval)" : "",
                   (double)e->step->loss,
                   tidectl_fmt_bytes(e->step->device_high_water_bytes, b1, sizeof(b1)),
                   (double)(e->step->h2d_bytes + e->step->d2h_bytes) / 1e6,
                   (double)e->step->step_us / 1000.0);
        break;
    case TIDE_EVENT_STATE:
        printf("%s %s state %s%s%s\n", t, e->job->id, tide_job_state_name(e->job->state),
               e->message[0] ? ": " : "", e->message);
        break;
    case TIDE_EVENT_CHECKPOINT:
        printf("%s %s checkpoint at step %" PRIu64 "%s%s\n", t, e->job->id,
               e->job->last_checkpoint_step, e->message[0] ? ": " : "", e->message);
        break;
    case TIDE_EVENT_PREEMPTED:
    case TIDE_EVENT_RESUMED:
        printf("%s %s %s: %s\n", t, e->job->id,
               e->kind == TIDE_EVENT_PREEMPTED ? "PREEMPTED" : "RESUMED", e->message);
        break;
    default:
        printf("%s %s %s\n", t, e->job->id, e->message);
        break;
    }
    fflush(stdout);
    return 0;
}

static int run_watch(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    int rc = TIDECTL_EXIT_OK;
    if (tide_client_watch(c, o->n_args ? o->args[0] : NULL, o->stride, watch_event, o) != 0)
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    return rc;
}

static const int accepts[] = {TIDECTL_OPT_STRIDE, 0};

const struct tidectl_verb tidectl_verb_watch = {
    .name = "watch",
    .run = run_watch,
    .connects = true,
    .accepts = accepts,
    .min_args = 0,
    .max_args = 1,
    .synopsis = "watch [JOB] [--stride N]",
    .summary = "follow a job's (or every job's) events",
    .help = "DESCRIPTION\n"
            "  Prints JOB's events as they happen — state changes, steps, checkpoints and\n"
            "  the daemon's messages — until the daemon ends the stream or Ctrl-C. Without\n"
            "  JOB, every job you may see.\n"
            "\n"
            "OPTIONS\n"
            "  --stride N               Report at most one step in N (default 1: every step).\n",
};
