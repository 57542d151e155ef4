/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/checkpoint.c: `tidectl checkpoint JOB`: has the daemon write
 * the job's variables and optimizer state now, and prints the step, path and
 * size.
 */
#include <inttypes.h>
#include <stdio.h>

#include "tidectl.h"

static int run_checkpoint(const struct tidectl_verb *verb, struct tidectl_options *o,
                          tide_client *c)
{
    struct tide_checkpoint_info k;
    int rc = TIDECTL_EXIT_OK;
    if (tide_client_checkpoint(c, o->args[0], &k) != 0) {
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    } else if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "job", o->args[0]);
        tidectl_json_set_uint(line, "step", k.step);
        tidectl_json_set_string(line, "path", k.path);
        tidectl_json_set_uint(line, "bytes", k.bytes);
        rc = tidectl_json_print_line(line);
    } else {
        char b[32];
        printf("job %s: checkpoint of step %" PRIu64 " written to %s (%s)\n", o->args[0], k.step,
               k.path, tidectl_fmt_bytes(k.bytes, b, sizeof(b)));
    }
    return rc;
}

const struct tidectl_verb tidectl_verb_checkpoint = {
    .name = "checkpoint",
    .run = run_checkpoint,
    .connects = true,
    .min_args = 1,
    .max_args = 1,
    .synopsis = "checkpoint JOB",
    .summary = "write a checkpoint of a job now",
    .help = "DESCRIPTION\n"
            "  Has the daemon write JOB's variables and optimizer state to its state\n"
            "  directory now, and prints the step, path and size. A later job can start from\n"
            "  it with `train --resume JOB`, also after the daemon restarted.\n",
};
