/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/jobs.c: `tidectl jobs`: lists your jobs (every user's with
 * --all) as a table or one JSON line per job.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tidectl.h"

static int run_jobs(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_job_info *jobs;
    size_t n;
    int rc = TIDECTL_EXIT_OK;
    if (tide_client_list(c, o->all, &jobs, &n) != 0) {
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    } else if (o->json) {
        for (size_t i = 0; i < n; i++)
            if (tidectl_json_print_line(tidectl_json_job(&jobs[i])) != TIDECTL_EXIT_OK)
                rc = TIDECTL_EXIT_RUNTIME;
        free(jobs);
    } else {
        tidectl_print_jobs_table(jobs, n);
        free(jobs);
    }
    return rc;
}

static const int accepts[] = {TIDECTL_OPT_ALL, 0};

const struct tidectl_verb tidectl_verb_jobs = {
    .name = "jobs",
    .run = run_jobs,
    .connects = true,
    .accepts = accepts,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "jobs [--all]",
    .summary = "list jobs",
    .help = "DESCRIPTION\n"
            "  Lists your jobs: id, name, owner, state, steps, last loss, budget, device high\n"
            "  water, host-device traffic and step rate.\n"
            "\n"
            "OPTIONS\n"
            "  --all                    Every user's jobs (admins and monitors only).\n",
};
