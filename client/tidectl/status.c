/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/status.c: `tidectl status`: the daemon's version, backend
 * and devices, its device memory (total, reserved by admitted jobs, in use;
 * in all, then per device),
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
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "version", s.version);
        tidectl_json_set_string(line, "backend", s.backend);
        tidectl_json_set_string(line, "device_name", s.device_name);
        tidectl_json_set_uint(line, "device_total_bytes", s.device_total_bytes);
        tidectl_json_set_uint(line, "device_used_bytes", s.device_used_bytes);
        tidectl_json_set_uint(line, "device_reserved_bytes", s.device_reserved_bytes);
        tidectl_json_set_uint(line, "host_pool_bytes", s.host_pool_bytes);
        tidectl_json_set_uint(line, "host_pool_used_bytes", s.host_pool_used_bytes);
        tidectl_json_set_int(line, "started_us", s.started_us);
        tidectl_json_set_uint(line, "max_job_budget_bytes", s.max_job_budget_bytes);
        tidectl_json_set_uint(line, "default_job_budget_bytes", s.default_job_budget_bytes);
        struct json_object *devices = tidectl_json_array();
        for (size_t i = 0; i < s.n_devices; i++) {
            struct json_object *dev = tidectl_json_object();
            tidectl_json_set_uint(dev, "index", s.devices[i].index);
            tidectl_json_set_string(dev, "name", s.devices[i].name);
            tidectl_json_set_uint(dev, "total_bytes", s.devices[i].total_bytes);
            tidectl_json_set_uint(dev, "reserved_bytes", s.devices[i].reserved_bytes);
            tidectl_json_set_uint(dev, "used_bytes", s.devices[i].used_bytes);
            tidectl_json_set_uint(dev, "jobs", s.devices[i].jobs);
            tidectl_json_append(devices, dev);
        }
        tidectl_json_set(line, "devices", devices);
        struct json_object *list = tidectl_json_array();
        for (size_t i = 0; i < n; i++)
            tidectl_json_append(list, tidectl_json_job(&jobs[i]));
        tidectl_json_set(line, "jobs", list);
        rc = tidectl_json_print_line(line);
    } else {
        char b1[32], b2[32], b3[32], b4[32], b5[32], t[64];
        printf("tided %s on %s\n", s.version, tide_client_target(c));
        printf("  backend         %s (%s)\n", s.backend, s.device_name);
        printf("  device memory   %s total, %s reserved by jobs, %s in use\n",
               tidectl_fmt_bytes(s.device_total_bytes, b1, sizeof(b1)),
               tidectl_fmt_bytes(s.device_reserved_bytes, b2, sizeof(b2)),
               tidectl_fmt_bytes(s.device_used_bytes, b3, sizeof(b3)));
        for (size_t i = 0; i < s.n_devices; i++)
            printf("  device %-8" PRIu32 " %s total, %s reserved by %" PRIu32 " job(s), %s in use "
                   "(%s)\n",
                   s.devices[i].index, tidectl_fmt_bytes(s.devices[i].total_bytes, b1, sizeof(b1)),
                   tidectl_fmt_bytes(s.devices[i].reserved_bytes, b2, sizeof(b2)),
                   s.devices[i].jobs, tidectl_fmt_bytes(s.devices[i].used_bytes, b3, sizeof(b3)),
                   s.devices[i].name);
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
            "  Asks the daemon for its version, backend and devices, the device memory it has\n"
            "  (total, reserved by admitted jobs' budgets, in use by running jobs; in all,\n"
            "  then per device), its host pool and its budget limits, and lists the jobs it\n"
            "  reports (DEV: the device each runs on). With --json, \"devices\" lists each\n"
            "  device's index, name, total_bytes, reserved_bytes and used_bytes.\n",
};
