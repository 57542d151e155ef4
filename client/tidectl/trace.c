/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/trace.c: `tidectl trace JOB [--steps N] [-o FILE]`: has the
 * daemon trace the job's next training steps and writes the Chrome trace it
 * answers with to a file, for ui.perfetto.dev or chrome://tracing. The
 * daemon makes the JSON; tidectl only writes its bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tidectl.h"

/* Reports a failure of tidectl's own (not the daemon's), also as a JSON line under --json. */
static int local_error(const char *what, const char *path, const char *reason)
{
    fprintf(stderr, "tidectl: trace: %s %s: %s\n", what, path, reason);
    if (tidectl_json) {
        char message[4400];
        snprintf(message, sizeof(message), "%s %s: %s", what, path, reason);
        tidectl_json_print_error("FILE", -1, message, TIDECTL_EXIT_RUNTIME);
    }
    return TIDECTL_EXIT_RUNTIME;
}

static int run_trace(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    const char *job = o->args[0];
    char default_path[128];
    const char *path = o->output;
    if (!path) {
        snprintf(default_path, sizeof(default_path), "trace-%.100s.json", job);
        path = default_path;
    }
    /* Before the steps run: a file that cannot be written should not cost a wait. */
    FILE *f = fopen(path, "w");
    if (!f)
        return local_error("cannot create", path, strerror(errno));
    uint32_t steps = o->steps ? (uint32_t)(o->steps > UINT32_MAX ? UINT32_MAX : o->steps) : 1;
    struct tide_job_trace t;
    if (tide_client_trace(c, job, steps, &t) != 0) {
        fclose(f);
        unlink(path);
        return tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    }
    size_t written = fwrite(t.json, 1, t.json_len, f);
    int write_errno = errno;
    int closed = fclose(f);
    if (written != t.json_len || closed != 0) {
        tide_job_trace_clear(&t);
        return local_error("cannot write", path, strerror(written != t.json_len ? write_errno : errno));
    }
    if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "job", job);
        tidectl_json_set_uint(line, "steps", t.steps);
        tidectl_json_set_uint(line, "first_step", t.first_step);
        tidectl_json_set_uint(line, "last_step", t.last_step);
        tidectl_json_set_string(line, "path", path);
        tidectl_json_set_uint(line, "bytes", t.json_len);
        int rc = tidectl_json_print_line(line);
        tide_job_trace_clear(&t);
        return rc;
    } else {
        char b[32];
        printf("job %s: steps %" PRIu64 " to %" PRIu64 " traced, %s written to %s (open it in "
               "ui.perfetto.dev or chrome://tracing)\n",
               job, t.first_step, t.last_step, tidectl_fmt_bytes(t.json_len, b, sizeof(b)), path);
    }
    tide_job_trace_clear(&t);
    return TIDECTL_EXIT_OK;
}

static const int trace_options[] = {TIDECTL_OPT_STEPS, TIDECTL_OPT_OUTPUT, 0};

const struct tidectl_verb tidectl_verb_trace = {
    .name = "trace",
    .run = run_trace,
    .connects = true,
    .accepts = trace_options,
    .min_args = 1,
    .max_args = 1,
    .synopsis = "trace JOB [--steps N] [-o FILE]",
    .summary = "record a job's next steps as a Chrome trace",
    .help = "DESCRIPTION\n"
            "  Has the daemon trace JOB's next N training steps and writes the trace to FILE\n"
            "  as Chrome Trace Event JSON, which ui.perfetto.dev and chrome://tracing open:\n"
            "  every kernel and copy on the compute, h2d and d2h tracks, grouped by step and\n"
            "  partition, arrows from each swap-in and fetch to its first use, and the device\n"
            "  and host bytes in use. It waits until the steps have run, so the job must be\n"
            "  training (tidectl train) for it to finish, and at most --timeout seconds. Only\n"
            "  the job's owner or an admin may; one trace of a job at a time.\n"
            "\n"
            "OPTIONS\n"
            "  --steps N                Training steps to trace, 1 to 100 (default 1).\n"
            "  -o, --output FILE        Where to write the trace (default trace-JOB.json).\n",
};
