/* SPDX-License-Identifier: MIT */
/*
 * daemon_stubs.c: the daemon's callbacks that the job layer calls (main.c
 * defines them; the fuzzers and their seed writers link tided_core without
 * main.c). Nothing here runs the event loop or the job layer, so a call is
 * a bug in the harness: it aborts, naming the callback.
 */
#include <stdio.h>
#include <stdlib.h>

#include "daemon/daemon.h"

static _Noreturn void unexpected(const char *name)
{
    fprintf(stderr, "daemon_stubs.c: %s called: the fuzzers never run the daemon\n", name);
    abort();
}

void tided_daemon_jobs_quiet(struct tided_daemon *daemon)
{
    (void)daemon;
    unexpected("tided_daemon_jobs_quiet");
}

void tided_daemon_server_finished(struct tided_daemon *daemon)
{
    (void)daemon;
    unexpected("tided_daemon_server_finished");
}

void tided_daemon_notify_status(struct tided_daemon *daemon)
{
    (void)daemon;
    unexpected("tided_daemon_notify_status");
}
