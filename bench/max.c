/* SPDX-License-Identifier: MIT */
/*
 * max.c: tide-bench max — how much larger a model trains with the automatic
 * plan than with everything resident — and maxbatch, its --vary batch.
 *
 * At a fixed model and device budget, it finds by search over one size
 * (tide_bench_largest: 1, 2, 4, ... until a plan does not fit, then
 * bisection) the largest value whose plan fits with swap off and with the
 * automatic plan (swap auto, autotuned). The size is the batch, the depth,
 * the sequence length or the number of experts, as --vary says; the other
 * sizes stay as the flags set them. The policies are those of
 * `tide-bench plan --swap off` and of `tide-bench plan`, so that a plan at
 * the answer fits and one at the answer + 1 does not. Planning runs
 * nothing; only --confirm trains one step, at the automatic plan's value,
 * and checks that the measured high water stays within the budget.
 *
 * Which size applies to which model is one table (axes, below): a row per
 * size and model, saying how a value sets the model's options. Adding a
 * model's size is one row.
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

/* ============================================================================
 * What can vary
 * ========================================================================== */

/* One size that max can vary, for one model. */
struct axis {
    const char *vary;  /* its --vary name */
    const char *model; /* the --model it applies to; NULL: every model */
    const char *field; /* the size's name in progress lines and the JSON line */
    int64_t limit;     /* the largest value searched; a plan that fits there is an error */
    /* Sets the size to v in o. */
    void (*set)(struct bench_options *o, int64_t v);
    /* The value reported for v (ResNet layers for the blocks n); NULL: v itself. */
    int64_t (*shown)(int64_t v);
};

static void set_batch(struct bench_options *o, int64_t v)
{
    o->batch = v;
}

static void set_resnet_blocks(struct bench_options *o, int64_t v)
{
    o->depth = tide_model_resnet_depth((int32_t)v);
}

static int64_t resnet_layers(int64_t n)
{
    return tide_model_resnet_depth((int32_t)n);
}

static void set_layers(struct bench_options *o, int64_t v)
{
    o->layers = (int32_t)v;
}

static void set_seq_len(struct bench_options *o, int64_t v)
{
    o->seq_len = v;
}

/* The MoE model routes each token to 2 experts, so the search's 1, 2, 4, ... are 2, 3, 5, ... */
static void set_experts(struct bench_options *o, int64_t v)
{
    o->experts = v + 1;
}

static int64_t experts_shown(int64_t v)
{
    return v + 1;
}

/*
 * ResNet's depth varies its third stage's blocks n (depth 3 * (10 + n) + 2,
 * up to 3,104 layers, as `tide-bench depth`). The limits keep a search under
 * a few minutes of planning; an LSTM's graph has about 48 nodes per layer and
 * step, so long ones meet the IR's limit of a million nodes first, which
 * ends the search with that error.
 */
static const struct axis axes[] = {
    {"batch", NULL, "batch", INT64_C(1) << 20, set_batch, NULL},
    {"depth", "resnet", "depth", 1024, set_resnet_blocks, resnet_layers},
    {"depth", "lstm", "layers", 1024, set_layers, NULL},
    {"seq", "lstm", "seq_len", INT64_C(1) << 20, set_seq_len, NULL},
    {"depth", "transformer", "layers", 1024, set_layers, NULL},
    {"seq", "transformer", "seq_len", INT64_C(1) << 20, set_seq_len, NULL},
    {"depth", "moe", "layers", 1024, set_layers, NULL},
    {"seq", "moe", "seq_len", INT64_C(1) << 20, set_seq_len, NULL},
    {"experts", "moe", "experts", INT64_C(1) << 16, set_experts, experts_shown},
};

/* The row of o->vary for o->model, or NULL after saying which sizes the model has. */
static const struct axis *find_axis(const struct bench_options *o)
{
    if (o->onnx && strcmp(o->vary, "batch") != 0) {
        fprintf(stderr,
                "tide-bench max: --vary %s does not apply to an --onnx model, which can "
                "vary: batch\n",
                o->vary);
        return NULL;
    }
    if (o->onnx)
        return &axes[0];
    static const char *const known[] = {"batch", "depth", "seq", "experts"};
    bool is_known = false;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        is_known |= strcmp(o->vary, known[i]) == 0;
    for (size_t i = 0; is_known && i < sizeof(axes) / sizeof(axes[0]); i++) {
        if (strcmp(axes[i].vary, o->vary) == 0 &&
            (!axes[i].model || strcmp(axes[i].model, o->model) == 0))
            return &axes[i];
    }
    char list[128] = "";
    for (size_t i = 0; i < sizeof(axes) / sizeof(axes[0]); i++) {
        if (axes[i].model && strcmp(axes[i].model, o->model) != 0)
            continue;
        strncat(list, list[0] ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, axes[i].vary, sizeof(list) - strlen(list) - 1);
    }
    if (!is_known)
        fprintf(stderr, "tide-bench max: --vary must be batch, depth, seq or experts, got \"%s\"\n",
                o->vary);
    else
        fprintf(stderr,
                "tide-bench max: --vary %s does not apply to --model %s, which can vary: "
                "%s\n",
                o->vary, o->model, list);
    return NULL;
}

static int64_t shown(const struct axis *a, int64_t v)
{
    return a->shown ? a->shown(v) : v;
}

/* ============================================================================
 * The search
 * ========================================================================== */

struct search {
    const struct bench_options *o;
    const struct axis *axis;
    struct tide_backend *backend;
    struct tide_train_options train;
    struct tide_memory_policy policy;
    int plans;
    /*
     * The policy's answer is bounded by one of the graph's limits (a larger
     * value builds a graph over tide_graph_limits_default's node count, say),
     * not by the budget: such a value counts as not fitting, and the report
     * says so, with the first such refusal (limit_message).
     */
    bool limited;
    char limit_message[TIDE_ERROR_MESSAGE_MAX];
    uint64_t host_bytes; /* of the last plan that fit: the answer's, as sizes that fit only grow */
    uint64_t peak_bytes;
};

/* The model at value v of the search's size: its options, input shape and graph bytes. */
static uint8_t *build_at(const struct search *s, int64_t v, struct bench_options *o, int64_t *c,
                         int64_t *h, int64_t *w, size_t *len)
{
    *o = *s->o;
    s->axis->set(o, v);
    tide_bench_input_shape(o, c, h, w);
    return tide_bench_build_model(o, *c, *h, *w, 10, len);
}

/*
 * An --onnx model's plan at batch v, as tide_bench_plan's: its prediction output fetched, its
 * loss minimised. A model whose batch is static is refused (every v would be the same model).
 */
static enum tide_status plan_onnx_at(struct search *s, int64_t v, struct tide_session **session,
                                     struct tide_error *err, bool *refused)
{
    struct tide_onnx_training t;
    *refused = true;
    if (tide_bench_onnx_training(s->o, v, &t) != 0)
        return TIDE_INVALID;
    if (t.batch != v) {
        fprintf(stderr,
                "tide-bench max: %s has a static batch of %" PRId64 ": --vary batch needs a "
                "model exported with a dynamic batch dimension (torch.onnx.export's "
                "dynamic_axes)\n",
                s->o->onnx, t.batch);
        tide_onnx_training_free(&t);
        return TIDE_INVALID;
    }
    *refused = false;
    struct tide_train_options train = s->train;
    train.loss = t.loss;
    const char *const fetches[] = {t.output.name};
    enum tide_status st = tide_bench_plan_fetching(
        fetches, 1, t.graph, t.graph_len, &train, &s->policy, s->o->math, s->backend, session, err);
    tide_onnx_training_free(&t);
    return st;
}

/* 1 when the model's training plan at value v fits under s->policy, 0 when not, -1 on error. */
static int fits(void *ctx, int64_t v)
{
    struct search *s = ctx;
    struct bench_options o;
    struct tide_session *session = NULL;
    struct tide_error err = {0};
    enum tide_status st;
    uint8_t *bytes = NULL;
    if (s->o->onnx) {
        bool refused;
        st = plan_onnx_at(s, v, &session, &err, &refused);
        if (refused)
            return -1;
    } else {
        int64_t c, h, w;
        size_t len;
        bytes = build_at(s, v, &o, &c, &h, &w, &len);
        if (!bytes)
            return -1;
        st = tide_bench_plan(o.model, bytes, len, &s->train, &s->policy, o.math, s->backend,
                             &session, &err);
    }
    s->plans++;
    fprintf(stderr, "  %s %7" PRId64 ": %s", s->axis->field, shown(s->axis, v),
            st == TIDE_OK             ? "fits"
            : st == TIDE_DOES_NOT_FIT ? "does not fit"
            : st == TIDE_LIMIT        ? "over a graph limit, counted as not fitting"
                                      : "error");
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
    if (st == TIDE_LIMIT && !s->limited) {
        s->limited = true;
        snprintf(s->limit_message, sizeof(s->limit_message), "%s", err.message);
    }
    tide_session_free(session);
    free(bytes);
    return st == TIDE_OK ? 1 : st == TIDE_DOES_NOT_FIT || st == TIDE_LIMIT ? 0 : -1;
}

/* The largest value that fits under s->policy (0: not even 1), or -1 after saying why. */
static int64_t largest(struct search *s, const char *command, const char *name)
{
    bool capped;
    s->host_bytes = s->peak_bytes = 0;
    s->limited = false;
    fprintf(stderr, "%s:\n", name);
    int64_t v = tide_bench_largest(s->axis->limit, fits, s, &capped);
    if (v >= 0 && capped) {
        fprintf(stderr,
                "tide-bench %s: %s: the plan still fits at the %s limit %" PRId64 " within %" PRIu64
                " bytes; the largest %s is above the limit (try a smaller "
                "--budget)\n",
                command, name, s->axis->field, shown(s->axis, s->axis->limit), s->o->budget,
                s->axis->field);
        return -1;
    }
    return v;
}

/* ============================================================================
 * Reports
 * ========================================================================== */

/* Says on stderr which model, sizes and budget the search is about. */
static void print_model(const struct bench_options *o, const char *command)
{
    fprintf(stderr, "tide-bench %s: ", command);
    if (o->onnx)
        fprintf(stderr, "%s, ", o->onnx);
    else if (strcmp(o->model, "resnet") == 0)
        fprintf(stderr, "ResNet-%d, width %" PRId64 ", %" PRId64 "x%" PRId64 ", ", o->depth,
                o->width, o->image_size, o->image_size);
    else if (strcmp(o->model, "lstm") == 0)
        fprintf(stderr, "LSTM of %d layer%s of %" PRId64 ", %" PRId64 " steps, ", (int)o->layers,
                o->layers == 1 ? "" : "s", o->hidden, o->seq_len);
    else
        fprintf(stderr, "%s, ", o->model);
    fprintf(stderr, "batch %" PRId64 ", budget %" PRIu64 " bytes (%.1f MiB), varying %s\n",
            o->batch, o->budget, (double)o->budget / (1 << 20), o->vary);
}

/* The model's sizes in the JSON line, but for the one that varies (field). */
static void json_sizes(struct json_object *line, const struct bench_options *o, const char *field)
{
    const struct {
        const char *model, *name;
        int64_t value;
    } sizes[] = {
        {NULL, "batch", o->batch},       {"resnet", "depth", o->depth},
        {"resnet", "width", o->width},   {"resnet", "image_size", o->image_size},
        {"lstm", "seq_len", o->seq_len}, {"lstm", "hidden", o->hidden},
        {"lstm", "layers", o->layers},
    };
    /* The language models' sizes, as the model uses them (a zero is the default). */
    struct tide_model_lm_options lm = tide_model_lm_options_default();
    const struct {
        const char *name;
        int64_t value, fallback;
        bool moe_only;
    } lm_sizes[] = {
        {"seq_len", o->seq_len, lm.seq_len, false}, {"layers", o->layers, lm.layers, false},
        {"d_model", o->d_model, lm.d_model, false}, {"heads", o->heads, lm.heads, false},
        {"experts", o->experts, lm.experts, true},
    };
    bool is_moe = strcmp(o->model, "moe") == 0;
    for (size_t i = 0; tide_bench_is_lm(o->model) && i < sizeof(lm_sizes) / sizeof(lm_sizes[0]);
         i++) {
        if ((!lm_sizes[i].moe_only || is_moe) && strcmp(lm_sizes[i].name, field) != 0)
            tide_bench_json_set_int(line, lm_sizes[i].name,
                                    lm_sizes[i].value ? lm_sizes[i].value : lm_sizes[i].fallback);
    }
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if ((!sizes[i].model || strcmp(sizes[i].model, o->model) == 0) &&
            strcmp(sizes[i].name, field) != 0)
            tide_bench_json_set_int(line, sizes[i].name, sizes[i].value);
    }
}

/*
 * max, or maxbatch when legacy is set: maxbatch's JSON line keeps the
 * fields it had before max (batch_swap_off, batch_auto; no vary, no batch).
 */
static int run(const struct bench_options *o, const char *command, bool legacy)
{
    if (!o->budget) {
        fprintf(stderr, "tide-bench %s: --budget BYTES is required (e.g. --budget 64M)\n", command);
        return 2;
    }
    if (!o->vary) {
        fprintf(stderr, "tide-bench max: --vary batch|depth|seq|experts is required\n");
        return 2;
    }
    struct bench_options named;
    if (o->onnx) { /* reports name the file */
        named = *o;
        named.model = o->onnx;
        o = &named;
    }
    struct search s = {.o = o, .axis = find_axis(o)};
    if (!s.axis)
        return 2;
    if (o->confirm && o->onnx) {
        fprintf(stderr,
                "tide-bench %s: --confirm trains a step of a built-in model; for an "
                "--onnx model run train --dataset synthetic at the batch found\n",
                command);
        return 2;
    }
    if (o->confirm && tide_bench_is_lm(o->model)) {
        fprintf(stderr, "tide-bench %s: --confirm trains a step on images; --model %s reads "
                        "tokens (run train at the value found instead)\n", command, o->model);
        return 2;
    }
    struct tide_error err = {0};
    if (tide_bench_train_options(o->optimizer, o->lr, &s.train) != 0)
        return 2;
    /* The pool's size sets the convolutions' workspace, so it is part of the plan. */
    if (tide_backend_create(o->backend, &(struct tide_backend_options){.threads = o->threads},
                            &s.backend, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench %s: %s\n", command, err.message);
        return 1;
    }
    int rc = 1;
    print_model(o, command);

    struct bench_options off = *o;
    off.swap = "off";
    off.policy = NULL; /* the baseline: swap off is keep only, whatever --policy says */
    s.policy = tide_bench_memory_policy(&off);
    int64_t off_value = largest(&s, command, "swap off (as plan --swap off)");
    if (off_value < 0)
        goto out;
    bool off_limited = s.limited;
    char off_message[TIDE_ERROR_MESSAGE_MAX];
    snprintf(off_message, sizeof(off_message), "%s", s.limit_message);
    struct bench_options automatic = *o;
    automatic.swap = NULL;
    s.policy = tide_bench_memory_policy(&automatic);
    int64_t auto_value = largest(&s, command, "automatic plan (as plan)");
    if (off_value < 0 || auto_value < 0)
        goto out;
    if (auto_value == 0) {
        fprintf(stderr,
                "tide-bench %s: not even %s %" PRId64 " fits within %" PRIu64
                " bytes with the automatic plan\n",
                command, s.axis->field, shown(s.axis, 1), o->budget);
        goto out;
    }
    uint64_t host_bytes = s.host_bytes, peak_bytes = s.peak_bytes;
    bool auto_limited = s.limited;
    int64_t shown_off = off_value ? shown(s.axis, off_value) : 0;
    int64_t shown_auto = shown(s.axis, auto_value);
    /* Nothing fits with swap off: there is no ratio to give (null in the JSON line). */
    double ratio = shown_off ? (double)shown_auto / (double)shown_off : NAN;
    if (shown_off)
        printf("largest %s of %s within %" PRIu64 " bytes (%.1f MiB): swap off %" PRId64
               ", automatic plan %" PRId64 " (%.2fx); %d plans searched\n",
               s.axis->field, o->model, o->budget, (double)o->budget / (1 << 20), shown_off,
               shown_auto, ratio, s.plans);
    else
        printf("largest %s of %s within %" PRIu64 " bytes (%.1f MiB): swap off none (not even "
               "%s %" PRId64 " fits, so no ratio), automatic plan %" PRId64
               "; %d plans searched\n",
               s.axis->field, o->model, o->budget, (double)o->budget / (1 << 20), s.axis->field,
               shown(s.axis, 1), shown_auto, s.plans);
    if (off_limited)
        printf("a graph limit, not the budget, stopped the swap-off search: %s\n", off_message);
    if (auto_limited)
        printf("a graph limit, not the budget, stopped the automatic plan's search: %s\n",
               s.limit_message);
    printf("automatic plan at %s %" PRId64 ": predicted peak %" PRIu64 " bytes, host %" PRIu64
           " bytes (%.1f MiB)\n",
           s.axis->field, shown_auto, peak_bytes, host_bytes, (double)host_bytes / (1 << 20));
    rc = 0;
    uint64_t high_water = 0, confirmed_peak = 0;
    double step_ms = 0;
    if (o->confirm) {
        fprintf(stderr,
                "confirming one training step at %s %" PRId64 " with the automatic plan...\n",
                s.axis->field, shown_auto);
        struct bench_options at;
        int64_t c, h, w;
        size_t len;
        uint8_t *bytes = build_at(&s, auto_value, &at, &c, &h, &w, &len);
        if (!bytes || tide_bench_train_step(command, bytes, len, at.batch, c, h, w, o->seed,
                                            &s.train, &s.policy, o->math, s.backend, &high_water,
                                            &confirmed_peak, &step_ms) != 0) {
            free(bytes);
            rc = 1;
            goto out;
        }
        free(bytes);
        printf("confirmed: one step at %s %" PRId64 " took %.0f ms, high water %" PRIu64
               " bytes (plan %" PRIu64 ", budget %" PRIu64 ")\n",
               s.axis->field, shown_auto, step_ms, high_water, confirmed_peak, o->budget);
        if (high_water > o->budget) {
            fprintf(stderr,
                    "tide-bench %s: the step's high water %" PRIu64
                    " bytes is over the budget of %" PRIu64 " bytes\n",
                    command, high_water, o->budget);
            rc = 1;
        }
    }
    if (o->json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_string(line, "model", o->model);
        if (legacy) {
            json_sizes(line, o, "batch");
            tide_bench_json_set_uint(line, "budget_bytes", o->budget);
            tide_bench_json_set_int(line, "batch_swap_off", shown_off);
            tide_bench_json_set_int(line, "batch_auto", shown_auto);
        } else {
            tide_bench_json_set_string(line, "vary", o->vary);
            json_sizes(line, o, s.axis->field);
            tide_bench_json_set_uint(line, "budget_bytes", o->budget);
            tide_bench_json_set_int(line, "value_swap_off", shown_off);
            tide_bench_json_set_int(line, "value_auto", shown_auto);
        }
        tide_bench_json_set_fixed(line, "ratio", ratio, 3);
        tide_bench_json_set_uint(line, "predicted_peak_bytes", peak_bytes);
        tide_bench_json_set_uint(line, "host_bytes", host_bytes);
        tide_bench_json_set_int(line, "plans", s.plans);
        /* true where a graph limit (its node count), not the budget, ended a search */
        if (!legacy) {
            tide_bench_json_set_bool(line, "graph_limited_swap_off", off_limited);
            tide_bench_json_set_bool(line, "graph_limited_auto", auto_limited);
        }
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

int tide_bench_max(const struct bench_options *o)
{
    return run(o, "max", false);
}

int tide_bench_maxbatch(const struct bench_options *o)
{
    struct bench_options batch = *o;
    batch.vary = "batch";
    return run(&batch, "maxbatch", true);
}
