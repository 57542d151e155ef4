/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/status.c: `tidectl status`: the daemon's version, backend
 * and device, its device memory (total, reserved by admitted jobs, in use),
 * host pool and budget limits, and the table of the jobs it reports.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tidectl.h"

static int run_status(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_daemon_status s;
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    int rc = TIDECTL_EXIT_OK;
    if (tide_client_status(c, &s, &jobs, &n) != 0) {
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    } else if (o->json) {
        printf("{\"version\":");
        tidectl_json_string(stdout, s.version);
        printf(",\"backend\":");
        tidectl_json_string(stdout, s.backend);
        printf(",\"device_name\":");
        tidectl_json_string(stdout, s.device_name);
        printf(",\"device_total_bytes\":%" PRIu64 ",\"device_used_bytes\":%" PRIu64
               ",\"device_reserved_bytes\":%" PRIu64 ",\"host_pool_bytes\":%" PRIu64
               ",\"host_pool_used_bytes\":%" PRIu64 ",\"started_us\":%" PRId64
               ",\"max_job_budget_bytes\":%" PRIu64 ",\"default_job_budget_bytes\":%" PRIu64
               ",\"jobs\":[",
               s.device_total_bytes, s.device_used_bytes, s.device_reserved_bytes,
               s.host_pool_bytes, s.host_pool_used_bytes, s.started_us, s.max_job_budget_bytes,
               s.default_job_budget_bytes);
        for (size_t i = 0; i < n; i++) {
            if (i)
                putchar(',');
            tidectl_json_job(stdout, &jobs[i]);
        }
        printf("]}");
        tidectl_json_end_line();
    } else {
        char b1[32], b2[32], b3[32], b4[32], b5[32], t[64];
        printf("tided %s on %s\n", s.version, tide_client_target(c));
        printf("  backend         %s (%s)\n", s.backend, s.device_name);
        printf("  device memory   %s total, %s reserved by jobs, %s in use\n",
               tidectl_fmt_bytes(s.device_total_bytes, b1, sizeof(b1)),
               tidectl_fmt_bytes(s.device_reserved_bytes, b2, sizeof(b2)),
               tidectl_fmt_bytes(s.device_used_bytes, b3, sizeof(b3)));
        if (s.host_pool_bytes)
            printf("  host pool       %s, %s used\n",
                   tidectl_fmt_bytes(s.host_pool_bytes, b4, sizeof(b4)),
                   tidectl_fmt_bytes(s.host_pool_used_bytes, b5, sizeof(b5)));
        else
            printf("  host pool       unlimited, %s used\n",
                   tidectl_fmt_bytes(s.host_pool_used_bytes, b5, sizeof(b5)));
        printf("  job budgets     default %s, max %s\n",
               tidectl_fmt_bytes(s.default_job_budget_bytes, b1, sizeof(b1)),
               s.max_job_budget_bytes ? tidectl_fmt_bytes(s.max_job_budget_bytes, b2, sizeof(b2))
                                      : "the device");
        printf("  started         %s\n\n", tidectl_fmt_time_us(s.started_us, t, sizeof(t)));
        tidectl_print_jobs_table(jobs, n);
    }
    free(jobs);
    return rc;
}

const struct tidectl_verb tidectl_verb_status = {
    .name = "status",
    .run = run_status,
    .connects = true,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "status",
    .summary = "show the daemon's device, memory and jobs",
    .help = "DESCRIPTION\n"
            "  Asks the daemon for its version, backend and device, the device memory it has\n"
            "  (total, reserved by admitted jobs' budgets, in use by running jobs), its host\n"
            "  pool and its budget limits, and lists the jobs it reports.\n",
};
