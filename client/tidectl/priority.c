/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/priority.c: `tidectl priority JOB N`: sets a job's
 * admission priority and prints where it stands after the change.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tidectl.h"

static int run_priority(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(o->args[1], &end, 10);
    if (end == o->args[1] || *end || errno || n < -1000 || n > 1000)
        return tidectl_usage_error(
            verb->name, "N wants a whole number from -1000 to 1000, got \"%s\"", o->args[1]);
    struct tide_job_info j;
    if (tide_client_set_priority(c, o->args[0], (int32_t)n, &j) != 0)
        return tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    if (o->json)
        return tidectl_json_print_line(tidectl_json_job(&j));
    if (j.state == TIDE_JOB_QUEUED)
        printf("job %s: priority %" PRId32 ", queued (position %" PRIu32 ")\n", j.id, j.priority,
               j.queue_position);
    else
        printf("job %s: priority %" PRId32 ", %s\n", j.id, j.priority,
               tide_job_state_name(j.state));
    return TIDECTL_EXIT_OK;
}

const struct tidectl_verb tidectl_verb_priority = {
    .name = "priority",
    .run = run_priority,
    .connects = true,
    .min_args = 2,
    .max_args = 2,
    .synopsis = "priority JOB N",
    .summary = "change a job's admission priority",
    .help = "DESCRIPTION\n"
            "  Sets JOB's admission priority to N, -1000 to 1000 (0 is the default; write a\n"
            "  negative N after --, as in `tidectl priority JOB -- -5`). Its owner may lower\n"
            "  it to 0 or below; only root and members of tided's admin-group may set it\n"
            "  above 0. A queued job moves in the queue at once (`tidectl queue`), and a job\n"
            "  that now outranks running ones may preempt them: they are parked between\n"
            "  steps and resume by themselves, bit for bit, when room returns.\n",
};
