/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/rm.c: `tidectl rm JOB...`: deletes ended jobs (their files
 * on the daemon and their entries) and says what went and how many bytes
 * that freed.
 */
#include <inttypes.h>
#include <stdio.h>

#include "tidectl.h"

static int run_rm(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_removal r;
    if (tide_client_remove(c, (const char *const *)o->args, (size_t)o->n_args, &r) != 0)
        return tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    int rc = tidectl_print_removal(&r, o->json);
    tide_removal_clear(&r);
    return rc;
}

const struct tidectl_verb tidectl_verb_rm = {
    .name = "rm",
    .run = run_rm,
    .connects = true,
    .min_args = 1,
    .max_args = 1000,
    .synopsis = "rm JOB...",
    .summary = "delete ended jobs and their files",
    .help = "DESCRIPTION\n"
            "  Deletes each JOB, which must have ended (done, failed or cancelled): its\n"
            "  files in the daemon's state directory (spec, state, checkpoints) and its\n"
            "  entry, so that `jobs` no longer lists it and `train --resume` can no longer\n"
            "  start from it. Prints each job removed and the bytes freed. Every JOB is\n"
            "  checked first: if one is unknown, not yours or still live (cancel it\n"
            "  first), nothing is removed. Only its owner or an admin may remove a job.\n"
            "  The daemon removes ended jobs by itself after its retain-ended time\n"
            "  (default 7 days).\n",
};
