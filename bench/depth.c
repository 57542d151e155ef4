/* SPDX-License-Identifier: MIT */
/*
 * depth.c: tide-bench depth — how much deeper a ResNet trains with swapping.
 *
 * At a fixed batch, image size and device budget, it finds by search over n
 * (ResNet depth 3*(10+n)+2) the deepest model whose plan fits with swap off
 * (everything resident) and with swap auto (the memory pipeline with
 * autotune), then trains one real step at the swap-auto maximum to confirm it
 * runs within the budget and that the measured high-water mark equals the
 * plan. Planning runs nothing, so the search is cheap; the confirming step
 * is the only execution. The seed paper (Wei et al.) reached 1916 vs 504
 * layers (3.8x).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench-json.h"
#include "bench/bench.h"
#include "runtime/session.h"
#include "tide/models.h"

/* The deepest n we try: 3*(10+n)+2 = 3,104 layers (planning time grows with depth). */
#define DEPTH_N_MAX 1024

struct search {
    const struct bench_options *o;
    struct tide_backend *backend;
    struct tide_train_options train;
    struct tide_memory_policy policy;
    int plans;
};

/* ResNet-n at the search's batch, width and image size (tide_bench_build_model). */
static uint8_t *build_resnet(const struct search *s, int32_t n, size_t *len)
{
    struct bench_options o = *s->o;
    o.model = "resnet";
    o.depth = tide_model_resnet_depth(n);
    return tide_bench_build_model(&o, 3, o.image_size, o.image_size, 10, len);
}

/* 1 when ResNet-n's training plan fits under s->policy, 0 when not, -1 on error. */
static int fits(void *ctx, int64_t size)
{
    struct search *s = ctx;
    int32_t n = (int32_t)size;
    size_t len;
    uint8_t *bytes = build_resnet(s, n, &len);
    if (!bytes)
        return -1;
    struct tide_session *session = NULL;
    struct tide_error err = {0};
    enum tide_status st =
        tide_bench_plan("resnet", bytes, len, &s->train, &s->policy, s->o->math, s->backend,
                        &session, &err);
    s->plans++;
    fprintf(stderr, "  depth %5d (n %4d): %s", tide_model_resnet_depth(n), n,
            st == TIDE_OK ? "fits" : st == TIDE_DOES_NOT_FIT ? "does not fit" : "error");
    const struct tide_plan_report *r = session ? tide_session_plan_report(session) : NULL;
    if (r)
        fprintf(stderr, ", peak %.1f MiB, planned in %.0f ms\n",
                (double)r->predicted_peak_bytes / (1 << 20), r->plan_ms);
    else
        fprintf(stderr, ": %s\n", err.message);
    tide_session_free(session);
    free(bytes);
    return st == TIDE_OK ? 1 : st == TIDE_DOES_NOT_FIT ? 0 : -1;
}

/* The largest n in [1, DEPTH_N_MAX] that fits (0: none; -1: an error). */
static int32_t deepest(struct search *s, bool *capped)
{
    return (int32_t)tide_bench_largest(DEPTH_N_MAX, fits, s, capped);
}

/* One real training step of ResNet-n under the policy; the measured high-water mark. */
static int confirm(struct search *s, int32_t n, uint64_t *high_water, uint64_t *peak, double *ms)
{
    size_t len;
    uint8_t *bytes = build_resnet(s, n, &len);
    if (!bytes)
        return -1;
    int rc = tide_bench_train_step("depth", bytes, len, s->o->batch, 3, s->o->image_size,
                                   s->o->image_size, s->o->seed, &s->train, &s->policy,
                                   s->o->math, s->backend, high_water, peak, ms);
    free(bytes);
    return rc;
}

int tide_bench_depth(const struct bench_options *o)
{
    struct search s = {.o = o};
    struct tide_error err = {0};
    if (tide_bench_train_options(o->optimizer, o->lr, &s.train) != 0)
        return 2;
    if (tide_backend_create(o->backend, &(struct tide_backend_options){.threads = o->threads},
                            &s.backend, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench depth: %s\n", err.message);
        return 1;
    }
    int rc = 1;
    fprintf(stderr, "tide-bench depth: ResNet, batch %" PRId64 ", %" PRId64 "x%" PRId64
                    ", width %" PRId64 ", budget %.0f MiB\n",
            o->batch, o->image_size, o->image_size, o->width, (double)o->budget / (1 << 20));

    s.policy = tide_memory_policy_default();
    s.policy.budget_bytes = o->budget;
    if (o->partition_size)
        s.policy.partition_size = o->partition_size;
    s.policy.swap = TIDE_SWAP_OFF;
    s.policy.vars_home = TIDE_VARS_HOME_DEVICE;
    fprintf(stderr, "swap off (everything resident):\n");
    bool capped;
    int32_t n_off = deepest(&s, &capped);
    s.policy.swap = TIDE_SWAP_AUTO;
    s.policy.vars_home = TIDE_VARS_HOME_AUTO;
    s.policy.autotune = true;
    fprintf(stderr, "swap auto (autotuned):\n");
    int32_t n_auto = deepest(&s, &capped);
    if (n_off < 0 || n_auto < 0 || n_auto == 0)
        goto out;
    int depth_off = n_off ? tide_model_resnet_depth(n_off) : 0;
    int depth_auto = tide_model_resnet_depth(n_auto);
    double ratio = depth_off ? (double)depth_auto / depth_off : 0;
    fprintf(stderr, "confirming one training step at depth %d with swap auto...\n", depth_auto);
    uint64_t high_water = 0, peak = 0;
    double step_ms = 0;
    if (confirm(&s, n_auto, &high_water, &peak, &step_ms) != 0)
        goto out;
    printf("deepest ResNet within %.0f MiB at batch %" PRId64 ", %" PRId64 "x%" PRId64
           ": swap off %d layers, swap auto %d layers%s (%.2fx)\n",
           (double)o->budget / (1 << 20), o->batch, o->image_size, o->image_size, depth_off,
           depth_auto, capped ? " (search cap)" : "", ratio);
    printf("confirmed: one step at %d layers took %.0f ms, high-water %" PRIu64
           " bytes (plan %" PRIu64 ", budget %" PRIu64 "); %d plans searched\n",
           depth_auto, step_ms, high_water, peak, o->budget, s.plans);
    rc = high_water <= o->budget ? 0 : 1;
    if (o->json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_int(line, "depth_swap_off", depth_off);
        tide_bench_json_set_int(line, "depth_swap_auto", depth_auto);
        tide_bench_json_set_fixed(line, "ratio", ratio, 3);
        tide_bench_json_set_uint(line, "budget_bytes", o->budget);
        tide_bench_json_set_uint(line, "confirmed_high_water_bytes", high_water);
        tide_bench_json_set_uint(line, "predicted_peak_bytes", peak);
        tide_bench_json_set_int(line, "batch", o->batch);
        tide_bench_json_set_int(line, "image_size", o->image_size);
        tide_bench_json_set_int(line, "width", o->width);
        tide_bench_json_set_fixed(line, "confirm_step_ms", step_ms, 1);
        tide_bench_json_set_bool(line, "capped", capped);
        if (tide_bench_json_print_line(line) != 0)
            rc = 1;
    }
out:
    tide_backend_free(s.backend);
    return rc;
}
