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
#include "tide/dataset.h"
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

/* 1 when ResNet-n's training plan fits under s->policy, 0 when not, -1 on error. */
static int fits(struct search *s, int32_t n)
{
    size_t len;
    uint8_t *bytes = tide_bench_build_model("resnet", s->o->batch, 3, s->o->image_size,
                                            s->o->image_size, 10, tide_model_resnet_depth(n),
                                            s->o->width, &len);
    if (!bytes)
        return -1;
    struct tide_session *session = NULL;
    struct tide_error err = {0};
    enum tide_status st =
        tide_bench_plan(bytes, len, &s->train, &s->policy, s->backend, &session, &err);
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

/* The largest n in [1, DEPTH_N_MAX] that fits (0: none), by doubling then bisection. */
static int32_t deepest(struct search *s)
{
    int r = fits(s, 1);
    if (r <= 0)
        return r < 0 ? -1 : 0;
    int32_t good = 1, bad = 0;
    for (int32_t n = 2; n <= DEPTH_N_MAX; n *= 2) {
        r = fits(s, n);
        if (r < 0)
            return -1;
        if (!r) {
            bad = n;
            break;
        }
        good = n;
    }
    if (!bad)
        return good; /* capped */
    while (bad - good > 1) {
        int32_t mid = good + (bad - good) / 2;
        r = fits(s, mid);
        if (r < 0)
            return -1;
        if (r)
            good = mid;
        else
            bad = mid;
    }
    return good;
}

/* One real training step of ResNet-n under the policy; the measured high-water mark. */
static int confirm(struct search *s, int32_t n, uint64_t *high_water, uint64_t *peak, double *ms)
{
    size_t len;
    uint8_t *bytes = tide_bench_build_model("resnet", s->o->batch, 3, s->o->image_size,
                                            s->o->image_size, 10, tide_model_resnet_depth(n),
                                            s->o->width, &len);
    if (!bytes)
        return -1;
    char text[256];
    tide_dataset *ds = NULL;
    tide_dataset_iter *it = NULL;
    struct tide_synthetic_options so = {.channels = 3, .height = s->o->image_size,
                                        .width = s->o->image_size, .seed = s->o->seed};
    struct tide_session *session = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    struct tide_error err = {0};
    int rc = -1;
    if (tide_dataset_open_synthetic(&so, "train", &ds, text, sizeof(text)) != 0 ||
        tide_dataset_iter_new(ds, s->o->batch, 1, 0, &it, text, sizeof(text)) != 0) {
        fprintf(stderr, "tide-bench depth: %s\n", text);
        goto out;
    }
    int64_t image_floats = s->o->batch * 3 * s->o->image_size * s->o->image_size;
    images = malloc((size_t)image_floats * sizeof(float));
    labels = malloc((size_t)s->o->batch * sizeof(int32_t));
    if (!images || !labels)
        goto out;
    tide_dataset_iter_next(it, images, labels);
    struct tide_session_options opt = tide_session_options_default();
    opt.backend = s->backend;
    opt.budget_bytes = s->o->budget;
    opt.memory = &s->policy;
    opt.train = &s->train;
    opt.seed = s->o->seed;
    struct tide_step_stats stats;
    if (tide_session_new(bytes, len, &opt, &session, &err) != TIDE_OK ||
        tide_session_feed(session, TIDE_MODEL_IMAGES, images, (uint64_t)image_floats * 4, &err) !=
            TIDE_OK ||
        tide_session_feed(session, TIDE_MODEL_LABELS, labels, (uint64_t)s->o->batch * 4, &err) !=
            TIDE_OK ||
        tide_session_step(session, &stats, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench depth: confirming step: %s\n", err.message);
        goto out;
    }
    *high_water = stats.high_water_bytes;
    *peak = tide_session_memplan(session)->peak_bytes;
    *ms = stats.step_ms;
    rc = 0;
out:
    tide_session_free(session);
    tide_dataset_iter_free(it);
    tide_dataset_free(ds);
    free(images);
    free(labels);
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
    int32_t n_off = deepest(&s);
    s.policy.swap = TIDE_SWAP_AUTO;
    s.policy.vars_home = TIDE_VARS_HOME_AUTO;
    s.policy.autotune = true;
    fprintf(stderr, "swap auto (autotuned):\n");
    int32_t n_auto = deepest(&s);
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
           depth_auto, n_auto == DEPTH_N_MAX ? " (search cap)" : "", ratio);
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
        tide_bench_json_set_bool(line, "capped", n_auto == DEPTH_N_MAX);
        if (tide_bench_json_print_line(line) != 0)
            rc = 1;
    }
out:
    tide_backend_free(s.backend);
    return rc;
}
