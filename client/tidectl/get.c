/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/get.c: `tidectl get JOB`: everything the daemon knows about
 * one job, its plan summary included.
 */
#include <inttypes.h>
#include <stdio.h>

#include "tidectl.h"

static void print_job(const struct tide_job_info *j)
{
    char b1[32], b2[32], t1[64], t2[64];
    printf("job %s\n", j->id);
    printf("  name              %s\n", j->name);
    char user[64];
    printf("  owner             %s (uid %" PRIu32 ")\n",
           tidectl_fmt_user(j->owner_uid, user, sizeof(user)), j->owner_uid);
    printf("  state             %s%s%s\n", tide_job_state_name(j->state), j->message[0] ? ": " : "",
           j->message);
    printf("  steps             %" PRIu64 " (last checkpoint at step %" PRIu64 ")\n", j->steps,
           j->last_checkpoint_step);
    printf("  last loss         %.6f\n", (double)j->last_loss);
    printf("  device memory     %s high water of a %s budget on device %" PRIu32 "\n",
           tidectl_fmt_bytes(j->device_high_water_bytes, b1, sizeof(b1)),
           tidectl_fmt_bytes(j->device_budget_bytes, b2, sizeof(b2)), j->device);
    printf("  host memory       %s\n", tidectl_fmt_bytes(j->host_bytes, b1, sizeof(b1)));
    printf("  copied so far     %s host to device, %s device to host\n",
           tidectl_fmt_bytes(j->h2d_bytes_total, b1, sizeof(b1)),
           tidectl_fmt_bytes(j->d2h_bytes_total, b2, sizeof(b2)));
    printf("  step rate         %.2f steps/s\n", j->steps_per_second);
    printf("  created, updated  %s, %s\n", tidectl_fmt_time_us(j->created_us, t1, sizeof(t1)),
           tidectl_fmt_time_us(j->updated_us, t2, sizeof(t2)));
    if (j->has_plan) {
        printf("plan\n");
        tidectl_print_plan(&j->plan, false);
    }
}

static int run_get(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    struct tide_job_info j;
    int rc = TIDECTL_EXIT_OK;
    if (tide_client_get(c, o->args[0], &j) != 0) {
        rc = tidectl_client_error(c, verb->name, TIDECTL_EXIT_RUNTIME);
    } else if (o->json) {
        rc = tidectl_json_print_line(tidectl_json_job(&j));
    } else {
        print_job(&j);
    }
    return rc;
}

const struct tidectl_verb tidectl_verb_get = {
    .name = "get",
    .run = run_get,
    .connects = true,
    .min_args = 1,
    .max_args = 1,
    .synopsis = "get JOB",
    .summary = "show one job",
    .help = "DESCRIPTION\n"
            "  Shows everything the daemon knows about JOB, its plan summary included.\n",
};
