/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/prune.c: `tidectl prune`: deletes every ended job of the
 * caller's, as `tidectl rm` does, and says how many and the bytes freed.
 */
#include <stdio.h>

#include "tidectl.h"

static int run_prune(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_removal r;
    if (tide_client_prune(c, &r) != 0)
        return tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    int rc = tidectl_print_removal(&r, o->json);
    tide_removal_clear(&r);
    return rc;
}

const struct tidectl_verb tidectl_verb_prune = {
    .name = "prune",
    .run = run_prune,
    .connects = true,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "prune",
    .summary = "delete all your ended jobs and their files",
    .help = "DESCRIPTION\n"
            "  Deletes every job of yours that has ended (done, failed or cancelled), as\n"
            "  `tidectl rm` does, and prints each job removed, how many and the bytes\n"
            "  freed. Live jobs (compiling, ready, running, parked) are kept. An admin\n"
            "  prunes their own jobs too; other users' jobs go with `rm JOB`.\n",
};
