/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/main.c: tidectl's entry point. Holds the verb table (the
 * order `tidectl --help` lists the commands in), the help texts of tidectl
 * itself, and main(): find the command word, parse every option in one
 * pass, check the positional arguments, connect for the verbs that want a
 * client, and run the verb. How the pieces fit, and how to add a command:
 * tidectl.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidectl.h"

/* Every command, in the order `tidectl --help` lists them. */
static const struct tidectl_verb *const verbs[] = {
    &tidectl_verb_status, &tidectl_verb_plan,       &tidectl_verb_train,  &tidectl_verb_jobs,
    &tidectl_verb_queue,  &tidectl_verb_priority,   &tidectl_verb_get,    &tidectl_verb_watch,
    &tidectl_verb_cancel, &tidectl_verb_checkpoint, &tidectl_verb_rm,     &tidectl_verb_prune,
    &tidectl_verb_trace,  &tidectl_verb_top,        &tidectl_verb_export, /* weights out */
    &tidectl_verb_help,
};

#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

const struct tidectl_verb *tidectl_find_verb(const char *name)
{
    for (size_t i = 0; i < N_VERBS; i++)
        if (strcmp(verbs[i]->name, name) == 0)
            return verbs[i];
    return NULL;
}

void tidectl_usage_main(FILE *out)
{
    fprintf(out,
            "NAME\n"
            "  tidectl - control the tide training daemon\n"
            "\n"
            "SYNOPSIS\n"
            "  tidectl [--socket PATH | --connect HOST:PORT [--token T] [--ca FILE]] [--json]\n"
            "          COMMAND [OPTIONS] [ARGS]\n"
            "\n"
            "DESCRIPTION\n"
            "  tidectl talks to tided, the daemon that owns this machine's GPU, over its Unix\n"
            "  socket (or TCP with TLS): it submits and trains models larger than the GPU's\n"
            "  memory, shows memory plans, lists, watches, checkpoints, cancels and removes\n"
            "  jobs.\n"
            "\n"
            "COMMANDS\n");
    for (size_t i = 0; i < N_VERBS; i++)
        fprintf(out, "  %-11s %s\n", verbs[i]->name, verbs[i]->summary);
    fprintf(out,
            "\n"
            "  `tidectl COMMAND --help` describes each command and its options.\n"
            "\n"
            "GLOBAL OPTIONS\n"
            "  --socket PATH            The daemon's Unix socket (default $TIDE_SOCKET, else\n"
            "                           " TIDECTL_DEFAULT_SOCKET ").\n"
            "  --connect HOST:PORT      Use TCP with TLS instead.\n"
            "  --token T                Bearer token for --connect (default $TIDE_TOKEN).\n"
            "  --ca FILE                PEM certificates that sign the daemon's (default: the\n"
            "                           system's).\n"
            "  --server-name NAME       The name the daemon's certificate must carry.\n"
            "  --json                   Machine-readable output: one JSON object per line.\n"
            "  --timeout SECONDS        Deadline of each request (default 120).\n"
            "  -h, --help               This text.\n"
            "  --version                tidectl's version.\n"
            "\n"
            "EXIT STATUS\n"
            "  0 success; 1 the daemon refused or failed (the message names the gRPC code);\n"
            "  2 usage error; 3 cannot connect to the daemon; 130 interrupted by Ctrl-C\n"
            "  (143 by SIGTERM) after a clean stop.\n"
            "\n"
            "ENVIRONMENT\n"
            "  TIDE_SOCKET, TIDE_TOKEN  Defaults of --socket and --token.\n"
            "\n"
            "EXAMPLES\n"
            "  tidectl status\n"
            "  tidectl plan --model cnn --batch 64 --swap off\n"
            "  tidectl train --model cnn --dataset fashion-mnist --epochs 1 --budget 10M\n"
            "  tidectl --json jobs | jq .state\n"
            "  tidectl trace j-0123456789abcdef --steps 3 -o trace.json\n"
            "  tidectl top\n");
}

void tidectl_usage_verb(FILE *out, const struct tidectl_verb *verb)
{
    fprintf(out,
            "NAME\n  tidectl %s - %s\n\nSYNOPSIS\n  tidectl [GLOBAL OPTIONS] %s\n\n%s\n"
            "GLOBAL OPTIONS\n  --socket PATH, --connect HOST:PORT, --token T, --ca FILE, --json,\n"
            "  --timeout SECONDS: see `tidectl --help`.\n\n"
            "EXIT STATUS\n  0 success; 1 daemon error; 2 usage error; 3 cannot connect; 130 Ctrl-C.\n",
            verb->name, verb->summary, verb->synopsis, verb->help);
}

int main(int argc, char **argv)
{
    struct tidectl_options o = {
        .socket = getenv("TIDE_SOCKET") && *getenv("TIDE_SOCKET") ? getenv("TIDE_SOCKET")
                                                                  : TIDECTL_DEFAULT_SOCKET,
        .token = getenv("TIDE_TOKEN") && *getenv("TIDE_TOKEN") ? getenv("TIDE_TOKEN") : NULL,
        .timeout_s = 120,
        .model = "cnn",
        .width = 16,
        .dropout = -1,
        .device = -1,
        .swap = TIDE_JOB_SWAP_AUTO,
        .vars_home = TIDE_JOB_VARS_HOME_AUTO,
        .optimizer = TIDE_JOB_OPTIMIZER_MOMENTUM,
        .seed = 1,
        .stride = 1,
        .interval_s = 1,
    };
    /*
     * gRPC logs transport failures (a TLS handshake, a refused connection)
     * to stderr by itself; tidectl reports them in its own words. Set
     * GRPC_VERBOSITY to see them anyway.
     */
    setenv("GRPC_VERBOSITY", "NONE", 0);
    int index;
    const struct tidectl_verb *verb = tidectl_scan_verb(argc, argv, &index);
    if (!verb && index >= 0) {
        fprintf(stderr, "tidectl: no command \"%s\" (see tidectl --help)\n", argv[index]);
        return TIDECTL_EXIT_USAGE;
    }
    int rc = tidectl_parse_options(argc, argv, verb, &o);
    if (rc != TIDECTL_EXIT_OK)
        return rc;
    tidectl_json = o.json;
    tidectl_local_daemon = o.connect == NULL;
    if (!verb) {
        tidectl_usage_main(stderr);
        return TIDECTL_EXIT_USAGE;
    }
    /* Drop the command word from the positional arguments. */
    if (o.n_args == 0 || strcmp(o.args[0], verb->name) != 0)
        return tidectl_usage_error(verb->name, "the command must come before its arguments");
    o.args++;
    o.n_args--;
    if (o.n_args < verb->min_args)
        return tidectl_usage_error(verb->name, "missing argument: tidectl %s", verb->synopsis);
    if (o.n_args > verb->max_args)
        return tidectl_usage_error(verb->name, "unexpected argument \"%s\"",
                                   o.args[verb->max_args]);
    if (strcmp(o.model, "resnet") == 0 && o.depth == 0)
        o.depth = 38;
    if (!verb->connects) {
        rc = verb->run(verb, &o, NULL);
    } else {
        tide_client *c = tidectl_connect(&o, &rc);
        if (!c)
            return rc;
        rc = verb->run(verb, &o, c);
        tide_client_free(c);
    }
    /*
     * A verb that caught Ctrl-C (train, watch, top) stopped cleanly, but the
     * shell must still learn it was interrupted: 128 + the signal, as if it
     * had died of it (130 for SIGINT).
     */
    if (rc == TIDECTL_EXIT_OK && tidectl_interrupts)
        rc = 128 + tidectl_last_signal;
    return rc;
}
