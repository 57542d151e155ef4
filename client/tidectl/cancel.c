/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/cancel.c: `tidectl cancel JOB`: cancels a job and prints the
 * state it ended in.
 */
#include <inttypes.h>
#include <stdio.h>

#include "tidectl.h"

static int run_cancel(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_job_info j;
    int rc = TIDECTL_EXIT_OK;
    if (tide_client_cancel(c, o->args[0], &j) != 0) {
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    } else if (o->json) {
        rc = tidectl_json_print_line(tidectl_json_job(&j));
    } else {
        printf("job %s: %s after %" PRIu64 " steps\n", j.id, tide_job_state_name(j.state), j.steps);
    }
    return rc;
}

const struct tidectl_verb tidectl_verb_cancel = {
    .name = "cancel",
    .run = run_cancel,
    .connects = true,
    .min_args = 1,
    .max_args = 1,
    .synopsis = "cancel JOB",
    .summary = "cancel a job",
    .help = "DESCRIPTION\n"
            "  Cancels JOB: a stream training it ends, its device memory is released. Only\n"
            "  its owner or an admin may.\n",
};
