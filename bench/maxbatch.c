/* SPDX-License-Identifier: MIT */
/*
 * maxbatch.c: tide-bench maxbatch — how much larger a batch trains with the
 * automatic plan than with everything resident.
 *
 * At a fixed model and device budget, it finds by search over the batch
 * (tide_bench_largest: 1, 2, 4, ... until a plan does not fit, then
 * bisection) the largest batch whose plan fits with swap off and with the
 * automatic plan (swap auto, autotuned). The policies are those of
 * `tide-bench plan --swap off` and of `tide-bench plan`, so that a plan at
 * the answer fits and one at the answer + 1 does not. Planning runs
 * nothing; only --confirm trains one step, at the automatic plan's batch,
 * and checks that the measured high water stays within the budget.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench-json.h"
#include "bench/bench.h"
#include "runtime/session.h"
#include "tide/models.h"

/* The largest batch searched; a plan that still fits here ends the search with an error. */
#define MAXBATCH_LIMIT (INT64_C(1) << 20)

struct search {
    const struct bench_options *o;
    struct tide_backend *backend;
    struct tide_train_options train;
    struct tide_memory_policy policy;
    int64_t c, h, w; /* an input image's shape (tide_bench_input_shape) */
    int plans;
    uint64_t host_bytes; /* of the last plan that fit: the answer's, as sizes that fit only grow */
    uint64_t peak_bytes;
};

/* The model at this batch (tide_bench_build_model). */
static uint8_t *build_at(const struct search *s, int64_t batch, size_t *len)
{
    struct bench_options o = *s->o;
    o.batch = batch;
    return tide_bench_build_model(&o, s->c, s->h, s->w, 10, len);
}

/* 1 when the model's training plan at this batch fits under s->policy, 0 when not, -1 on error. */
static int fits(void *ctx, int64_t batch)
{
    struct search *s = ctx;
    size_t len;
    uint8_t *bytes = build_at(s, batch, &len);
    if (!bytes)
        return -1;
    struct tide_session *session = NULL;
    struct tide_error err = {0};
    enum tide_status st =
        tide_bench_plan(bytes, len, &s->train, &s->policy, s->backend, &session, &err);
    s->plans++;
    fprintf(stderr, "  batch %7" PRId64 ": %s", batch,
            st == TIDE_OK ? "fits" : st == TIDE_DOES_NOT_FIT ? "does not fit" : "error");
    const struct tide_plan_report *r = session ? tide_session_plan_report(session) : NULL;
    if (r)
        fprintf(stderr, ", peak %.1f MiB, planned in %.0f ms\n",
                (double)r->predicted_peak_bytes / (1 << 20), r->plan_ms);
    else
        fprintf(stderr, ": %s\n", err.message);
    if (st == TIDE_OK) {
        s->host_bytes = r->host_bytes;
        s->peak_bytes = r->predicted_peak_bytes;
    }
    tide_session_free(session);
    free(bytes);
    return st == TIDE_OK ? 1 : st == TIDE_DOES_NOT_FIT ? 0 : -1;
}

/* The largest batch that fits under s->policy (0: not even 1), or -1 after saying why. */
static int64_t largest(struct search *s, const char *name)
{
    bool capped;
    s->host_bytes = s->peak_bytes = 0;
    fprintf(stderr, "%s:\n", name);
    int64_t batch = tide_bench_largest(MAXBATCH_LIMIT, fits, s, &capped);
    if (batch >= 0 && capped) {
        fprintf(stderr,
                "tide-bench maxbatch: %s: the plan still fits at the batch limit %" PRId64
                " within %" PRIu64 " bytes; the largest batch is above the limit (try a smaller "
                "--budget)\n",
                name, MAXBATCH_LIMIT, s->o->budget);
        return -1;
    }
    return batch;
}

int tide_bench_maxbatch(const struct bench_options *o)
{
    if (!o->budget) {
        fprintf(stderr, "tide-bench maxbatch: --budget BYTES is required (e.g. --budget 64M)\n");
        return 2;
    }
    bool resnet = strcmp(o->model, "resnet") == 0;
    struct search s = {.o = o};
    tide_bench_input_shape(o, &s.c, &s.h, &s.w);
    struct tide_error err = {0};
    if (tide_bench_train_options(o->optimizer, o->lr, &s.train) != 0)
        return 2;
    /* The pool's size sets the convolutions' workspace, so it is part of the plan. */
    if (tide_backend_create(o->backend, &(struct tide_backend_options){.threads = o->threads},
                            &s.backend, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench maxbatch: %s\n", err.message);
        return 1;
    }
    int rc = 1;
    if (resnet)
        fprintf(stderr, "tide-bench maxbatch: ResNet-%d, width %" PRId64 ", %" PRId64 "x%" PRId64
                ", budget %" PRIu64 " bytes (%.1f MiB)\n", o->depth, o->width, o->image_size,
                o->image_size, o->budget, (double)o->budget / (1 << 20));
    else
        fprintf(stderr, "tide-bench maxbatch: %s, budget %" PRIu64 " bytes (%.1f MiB)\n",
                o->model, o->budget, (double)o->budget / (1 << 20));

    struct bench_options off = *o;
    off.swap = "off";
    s.policy = tide_bench_memory_policy(&off);
    int64_t batch_off = largest(&s, "swap off (as plan --swap off)");
    struct bench_options automatic = *o;
    automatic.swap = NULL;
    s.policy = tide_bench_memory_policy(&automatic);
    int64_t batch_auto = largest(&s, "automatic plan (as plan)");
    if (batch_off < 0 || batch_auto < 0)
        goto out;
    if (batch_auto == 0) {
        fprintf(stderr, "tide-bench maxbatch: not even batch 1 fits within %" PRIu64
                " bytes with the automatic plan\n", o->budget);
        goto out;
    }
    uint64_t host_bytes = s.host_bytes, peak_bytes = s.peak_bytes;
    /* No batch fits with swap off: there is no ratio to give (null in the JSON line). */
    double ratio = batch_off ? (double)batch_auto / (double)batch_off : NAN;
    printf("largest batch of %s within %" PRIu64 " bytes (%.1f MiB): swap off %" PRId64
           ", automatic plan %" PRId64 " (%.2fx); %d plans searched\n",
           resnet ? "resnet" : o->model, o->budget, (double)o->budget / (1 << 20), batch_off,
           batch_auto, ratio, s.plans);
    printf("automatic plan at batch %" PRId64 ": predicted peak %" PRIu64 " bytes, host %" PRIu64
           " bytes (%.1f MiB)\n", batch_auto, peak_bytes, host_bytes,
           (double)host_bytes / (1 << 20));
    rc = 0;
    uint64_t high_water = 0, confirmed_peak = 0;
    double step_ms = 0;
    if (o->confirm) {
        fprintf(stderr, "confirming one training step at batch %" PRId64
                " with the automatic plan...\n", batch_auto);
        size_t len;
        uint8_t *bytes = build_at(&s, batch_auto, &len);
        if (!bytes || tide_bench_train_step("maxbatch", bytes, len, batch_auto, s.c, s.h, s.w,
                                            o->seed, &s.train, &s.policy, s.backend,
                                            &high_water, &confirmed_peak, &step_ms) != 0) {
            free(bytes);
            rc = 1;
            goto out;
        }
        free(bytes);
        printf("confirmed: one step at batch %" PRId64 " took %.0f ms, high water %" PRIu64
               " bytes (plan %" PRIu64 ", budget %" PRIu64 ")\n", batch_auto, step_ms, high_water,
               confirmed_peak, o->budget);
        if (high_water > o->budget) {
            fprintf(stderr, "tide-bench maxbatch: the step's high water %" PRIu64
                    " bytes is over the budget of %" PRIu64 " bytes\n", high_water, o->budget);
            rc = 1;
        }
    }
    if (o->json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_string(line, "model", o->model);
        if (resnet) {
            tide_bench_json_set_int(line, "depth", o->depth);
            tide_bench_json_set_int(line, "width", o->width);
            tide_bench_json_set_int(line, "image_size", o->image_size);
        }
        tide_bench_json_set_uint(line, "budget_bytes", o->budget);
        tide_bench_json_set_int(line, "batch_swap_off", batch_off);
        tide_bench_json_set_int(line, "batch_auto", batch_auto);
        tide_bench_json_set_fixed(line, "ratio", ratio, 3);
        tide_bench_json_set_uint(line, "predicted_peak_bytes", peak_bytes);
        tide_bench_json_set_uint(line, "host_bytes", host_bytes);
        tide_bench_json_set_int(line, "plans", s.plans);
        if (o->confirm) {
            tide_bench_json_set_uint(line, "confirmed_high_water_bytes", high_water);
            tide_bench_json_set_fixed(line, "confirm_step_ms", step_ms, 1);
        }
        if (tide_bench_json_print_line(line) != 0)
            rc = 1;
    }
out:
    tide_backend_free(s.backend);
    return rc;
}
