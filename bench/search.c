/* SPDX-License-Identifier: MIT */
/*
 * search.c: what tide-bench's capacity searches share (depth.c, max.c).
 *
 * A search asks "does the plan fit?" of a size (ResNet n, a batch, a
 * sequence length): it
 * doubles the size from 1 until a plan does not fit, then bisects between
 * the last that fit and the first that did not, so it plans about
 * 2 * log2(answer) times. Planning runs nothing; the one real training step
 * that confirms the answer (tide_bench_train_step) is the only execution.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "tide/dataset.h"
#include "tide/models.h"

int64_t tide_bench_largest(int64_t max, int (*fits)(void *ctx, int64_t size), void *ctx,
                           bool *capped)
{
    *capped = false;
    int r = fits(ctx, 1);
    if (r <= 0)
        return r < 0 ? -1 : 0;
    int64_t good = 1, bad = 0;
    while (good < max) {
        int64_t n = good > max / 2 ? max : good * 2;
        r = fits(ctx, n);
        if (r < 0)
            return -1;
        if (!r) {
            bad = n;
            break;
        }
        good = n;
    }
    if (!bad) {
        *capped = true; /* max itself fits */
        return good;
    }
    while (bad - good > 1) {
        int64_t mid = good + (bad - good) / 2;
        r = fits(ctx, mid);
        if (r < 0)
            return -1;
        if (r)
            good = mid;
        else
            bad = mid;
    }
    return good;
}

int tide_bench_train_step(const char *what, const uint8_t *bytes, size_t len, int64_t batch,
                          int64_t c, int64_t h, int64_t w, uint64_t seed,
                          const struct tide_train_options *train,
                          const struct tide_memory_policy *policy, enum tide_math math,
                          struct tide_backend *backend, uint64_t *high_water, uint64_t *peak,
                          double *ms)
{
    /* The fetches of tide_bench_plan, so that the step runs the plan the search found. */
    static const char *const fetches[] = {TIDE_MODEL_LOGITS};
    char text[256];
    tide_dataset *ds = NULL;
    tide_dataset_iter *it = NULL;
    struct tide_synthetic_options so = {.channels = c, .height = h, .width = w, .seed = seed};
    struct tide_session *session = NULL;
    float *images = NULL;
    int32_t *labels = NULL;
    struct tide_error err = {0};
    int rc = -1;
    if (tide_dataset_open_synthetic(&so, "train", &ds, text, sizeof(text)) != 0 ||
        tide_dataset_iter_new(ds, batch, 1, 0, &it, text, sizeof(text)) != 0) {
        fprintf(stderr, "tide-bench %s: %s\n", what, text);
        goto out;
    }
    int64_t image_floats = batch * c * h * w;
    images = malloc((size_t)image_floats * sizeof(float));
    labels = malloc((size_t)batch * sizeof(int32_t));
    if (!images || !labels) {
        fprintf(stderr, "tide-bench %s: out of memory for a batch of %lld images\n", what,
                (long long)batch);
        goto out;
    }
    tide_dataset_iter_next(it, images, labels);
    struct tide_session_options opt = tide_session_options_default();
    opt.backend = backend;
    opt.budget_bytes = policy->budget_bytes;
    opt.memory = policy;
    opt.train = train;
    opt.seed = seed;
    opt.math = math;
    opt.fetches = fetches;
    opt.n_fetches = 1;
    struct tide_step_stats stats;
    if (tide_session_new(bytes, len, &opt, &session, &err) != TIDE_OK ||
        tide_session_feed(session, TIDE_MODEL_IMAGES, images, (uint64_t)image_floats * 4, &err) !=
            TIDE_OK ||
        tide_session_feed(session, TIDE_MODEL_LABELS, labels, (uint64_t)batch * 4, &err) !=
            TIDE_OK ||
        tide_session_step(session, &stats, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench %s: confirming step: %s\n", what, err.message);
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
    return rc;
}
