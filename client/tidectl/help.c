/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/help.c: `tidectl help [COMMAND]`: the same as `tidectl
 * --help` or `tidectl COMMAND --help`.
 */
#include <stdio.h>

#include "tidectl.h"

static int run_help(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *client)
{
    (void)client;
    (void)verb;
    if (o->n_args == 0) {
        tidectl_usage_main(stdout);
        return TIDECTL_EXIT_OK;
    }
    const struct tidectl_verb *which = tidectl_find_verb(o->args[0]);
    if (!which)
        return tidectl_usage_error(NULL, "no command \"%s\"", o->args[0]);
    tidectl_usage_verb(stdout, which);
    return TIDECTL_EXIT_OK;
}

const struct tidectl_verb tidectl_verb_help = {
    .name = "help",
    .run = run_help,
    .min_args = 0,
    .max_args = 1,
    .synopsis = "help [COMMAND]",
    .summary = "show help on tidectl or a command",
    .help = "DESCRIPTION\n"
            "  The same as `tidectl --help` or `tidectl COMMAND --help`.\n",
};
