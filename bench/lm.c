/* SPDX-License-Identifier: MIT */
/*
 * lm.c: tide-bench for the language models (tide_model_transformer,
 * tide_model_moe): their graphs under the command line's sizes, and
 * `train` on the fortunes corpus (tide_corpus).
 *
 * Training draws random windows of the train split from --seed; after the
 * last step the held-out split is scored in consecutive windows with
 * forward-only steps (tide_session_eval: Dropout off, nothing updated). The
 * held-out loss is the mean cross-entropy over every token of every
 * held-out window, in nats per byte: each step fetches "xent", the loss of
 * each token, and the short last batch counts only its real windows.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench-json.h"
#include "bench/bench.h"
#include "runtime/session.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/models.h"

bool tide_bench_is_lm(const char *model)
{
    return strcmp(model, "transformer") == 0 || strcmp(model, "moe") == 0;
}

const char *const *tide_bench_fetches(const char *model, uint32_t *n)
{
    static const char *const image[] = {TIDE_MODEL_LOGITS};
    static const char *const transformer[] = {TIDE_MODEL_TOKEN_LOSS};
    static const char *const moe[] = {TIDE_MODEL_TOKEN_LOSS, TIDE_MODEL_LM_LOSS,
                                      TIDE_MODEL_AUX_LOSS};
    if (strcmp(model, "transformer") == 0) {
        *n = 1;
        return transformer;
    }
    if (strcmp(model, "moe") == 0) {
        *n = 3;
        return moe;
    }
    *n = 1;
    return image;
}

/* The model's sizes: the options' non-zero values over the defaults. */
static struct tide_model_lm_options lm_options(const struct bench_options *o)
{
    return tide_model_lm_options_with(&(struct tide_model_lm_options){
        .batch = o->batch,
        .seq_len = o->seq_len,
        .vocab = o->vocab,
        .d_model = o->d_model,
        .layers = (int32_t)o->layers,
        .heads = (int32_t)o->heads,
        .dropout = (float)o->dropout,
        .experts = o->experts,
        .capacity_factor = o->capacity_factor,
    });
}

uint8_t *tide_bench_build_lm(const struct bench_options *o, size_t *len, int64_t *parameters)
{
    tide_builder *b = tide_builder_new();
    if (!b) {
        fprintf(stderr, "tide-bench: out of memory\n");
        return NULL;
    }
    struct tide_model_lm_options m = lm_options(o);
    tide_ref logits =
        strcmp(o->model, "moe") == 0 ? tide_model_moe(b, &m) : tide_model_transformer(b, &m);
    uint8_t *bytes = NULL;
    if (logits.id < 0 || tide_builder_serialize(b, &bytes, len) != 0) {
        fprintf(stderr, "tide-bench: building %s: %s\n", o->model, tide_builder_error(b));
        bytes = NULL;
    }
    if (parameters)
        *parameters = tide_builder_parameter_count(b);
    tide_builder_free(b);
    return bytes;
}

/* Feeds one batch of windows: tokens and labels, [batch, seq_len] int32 each. */
static enum tide_status feed(struct tide_session *s, const int32_t *tokens, const int32_t *labels,
                             uint64_t bytes, struct tide_error *err)
{
    enum tide_status st = tide_session_feed(s, TIDE_MODEL_TOKENS, tokens, bytes, err);
    return st == TIDE_OK ? tide_session_feed(s, TIDE_MODEL_LABELS, labels, bytes, err) : st;
}

/*
 * The held-out loss: the mean of every held-out token's cross-entropy, over
 * the split's consecutive windows, with the session's current variables.
 * *windows gets how many windows it scored.
 */
static int heldout_loss(struct tide_session *s, const struct tide_model_lm_options *m,
                        const tide_corpus *test, int32_t *tokens, int32_t *labels, float *xent,
                        double *loss, int64_t *windows)
{
    char err_text[512];
    tide_corpus_iter *it;
    if (tide_corpus_iter_new(test, m->batch, m->seq_len, 0, 0, &it, err_text, sizeof(err_text)) !=
        0) {
        fprintf(stderr, "tide-bench: held-out split: %s\n", err_text);
        return -1;
    }
    uint64_t bytes = (uint64_t)(m->batch * m->seq_len) * sizeof(int32_t);
    double sum = 0;
    int64_t seen = 0, real;
    struct tide_error err = {0};
    while ((real = tide_corpus_iter_next(it, tokens, labels)) > 0) {
        struct tide_step_stats stats;
        if (feed(s, tokens, labels, bytes, &err) != TIDE_OK ||
            tide_session_eval(s, &stats, &err) != TIDE_OK ||
            tide_session_fetch(s, TIDE_MODEL_TOKEN_LOSS, xent, bytes, &err) != TIDE_OK) {
            fprintf(stderr, "tide-bench: held-out evaluation: %s\n", err.message);
            tide_corpus_iter_free(it);
            return -1;
        }
        /* Row-major [batch * seq_len]: the real windows are the first real * seq_len tokens. */
        for (int64_t i = 0; i < real * m->seq_len; i++)
            sum += xent[i];
        seen += real;
    }
    tide_corpus_iter_free(it);
    *windows = seen;
    *loss = seen ? sum / (double)(seen * m->seq_len) : NAN;
    return 0;
}

static int open_corpus(const struct bench_options *o, const char *split, tide_corpus **out)
{
    char err[512];
    int rc = tide_corpus_open(o->dataset, NULL, split, out, err, sizeof(err));
    if (rc != 0)
        fprintf(stderr, "tide-bench: %s\n", err);
    return rc;
}

int tide_bench_train_lm(const struct bench_options *o)
{
    if (o->svg || o->png || o->trace_overhead) {
        fprintf(stderr,
                "tide-bench: --svg, --png and --trace-overhead apply to the image models "
                "only, not to --model %s\n",
                o->model);
        return 2;
    }
    tide_corpus *train = NULL, *test = NULL;
    if (open_corpus(o, "train", &train) != 0)
        return 1;
    if (!o->no_eval && open_corpus(o, "test", &test) != 0) {
        tide_corpus_free(train);
        return 1;
    }
    struct tide_model_lm_options m = lm_options(o);
    bool moe = strcmp(o->model, "moe") == 0;
    int rc = 1;
    struct tide_session *s = NULL;
    tide_corpus_iter *it = NULL;
    int32_t *tokens = NULL, *labels = NULL;
    float *xent = NULL;
    size_t len;
    int64_t parameters = 0;
    uint8_t *bytes = tide_bench_build_lm(o, &len, &parameters);
    if (!bytes)
        goto out;

    struct tide_train_options train_opts;
    if (tide_bench_train_options(o->optimizer, o->lr, &train_opts) != 0)
        goto out;
    struct tide_memory_policy policy = tide_bench_memory_policy(o);
    uint32_t n_fetches;
    const char *const *fetches = tide_bench_fetches(o->model, &n_fetches);
    struct tide_session_options so = tide_session_options_default();
    so.backend_name = o->backend;
    so.threads = o->threads;
    so.budget_bytes = o->budget;
    so.seed = o->seed;
    so.math = o->math;
    so.poison = o->poison;
    so.train = &train_opts;
    if (o->budget || o->swap)
        so.memory = &policy;
    so.fetches = fetches;
    so.n_fetches = n_fetches;
    struct tide_error err = {0};
    double t0 = tide_bench_now_ms();
    if (tide_session_new(bytes, len, &so, &s, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        goto out;
    }
    double compile_ms = tide_bench_now_ms() - t0;
    const struct tide_memplan *plan = tide_session_memplan(s);
    const struct tide_graph *graph = tide_session_graph(s);

    size_t n_tokens = (size_t)(m.batch * m.seq_len);
    tokens = malloc(n_tokens * sizeof(int32_t));
    labels = malloc(n_tokens * sizeof(int32_t));
    xent = malloc(n_tokens * sizeof(float));
    if (!tokens || !labels || !xent) {
        fprintf(stderr, "tide-bench: out of memory for batch buffers\n");
        goto out;
    }
    char err_text[512];
    if (tide_corpus_iter_new(train, m.batch, m.seq_len, o->seed, TIDE_CORPUS_RANDOM, &it, err_text,
                             sizeof(err_text)) != 0) {
        fprintf(stderr, "tide-bench: %s\n", err_text);
        goto out;
    }
    /* An epoch: as many tokens as the train split has, in random windows. */
    int64_t per_epoch = tide_corpus_windows(train, m.seq_len) / m.batch;
    if (per_epoch < 1)
        per_epoch = 1;
    int64_t steps = o->epochs ? o->epochs * per_epoch : o->steps;
    fprintf(stderr,
            "tide-bench: %s on %s, batch %" PRId64 " x %" PRId64 " tokens, %" PRId64
            " parameters, %" PRId64 " steps (%.2f epochs), %u nodes, predicted peak %.1f MiB, "
            "compiled in %.0f ms\n",
            o->model, o->dataset, m.batch, m.seq_len, parameters, steps,
            (double)steps / (double)per_epoch, graph->n_nodes, (double)plan->peak_bytes / (1 << 20),
            compile_ms);
    if (o->trace && tide_session_trace_start(s, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: --trace: %s\n", err.message);
        goto out;
    }

    uint64_t batch_bytes = n_tokens * sizeof(int32_t);
    double step_ms_sum = 0, loss_sum = 0, train_start = tide_bench_now_ms(),
           cpu_start = tide_bench_process_cpu_s();
    float loss = NAN, lm_loss = NAN, aux_loss = NAN, first_loss = NAN;
    uint64_t high_water = 0;
    int64_t window = 0;
    for (int64_t step = 0; step < steps; step++) {
        tide_corpus_iter_next(it, tokens, labels);
        struct tide_step_stats stats;
        if (feed(s, tokens, labels, batch_bytes, &err) != TIDE_OK ||
            tide_session_step(s, &stats, &err) != TIDE_OK ||
            tide_session_fetch(s, TIDE_MODEL_LOSS, &loss, sizeof(loss), &err) != TIDE_OK ||
            (moe && (tide_session_fetch(s, TIDE_MODEL_LM_LOSS, &lm_loss, sizeof(lm_loss), &err) !=
                         TIDE_OK ||
                     tide_session_fetch(s, TIDE_MODEL_AUX_LOSS, &aux_loss, sizeof(aux_loss),
                                        &err) != TIDE_OK))) {
            fprintf(stderr, "\ntide-bench: step %" PRId64 ": %s\n", step + 1, err.message);
            goto out;
        }
        if (!isfinite(loss)) {
            fprintf(stderr, "\ntide-bench: step %" PRId64 ": loss is %f; lower --lr\n", step + 1,
                    (double)loss);
            goto out;
        }
        if (step == 0)
            first_loss = loss;
        step_ms_sum += stats.step_ms;
        if (stats.high_water_bytes > high_water)
            high_water = stats.high_water_bytes;
        loss_sum += loss;
        window++;
        if ((step + 1) % 25 == 0 || step + 1 == steps) {
            double elapsed = (tide_bench_now_ms() - train_start) / 1e3;
            double eta = elapsed / (double)(step + 1) * (double)(steps - step - 1);
            fprintf(stderr,
                    "\rstep %6" PRId64 "/%" PRId64 "  loss %.4f  %.1f ms/step  %.0f s elapsed, "
                    "%.0f s left   ",
                    step + 1, steps, loss_sum / (double)window, step_ms_sum / (double)(step + 1),
                    elapsed, eta);
            loss_sum = 0;
            window = 0;
        }
    }
    fprintf(stderr, "\n");
    double train_s = (tide_bench_now_ms() - train_start) / 1e3;
    double train_cpu_s = tide_bench_process_cpu_s() - cpu_start;
    if (o->trace) {
        tide_session_trace_stop(s);
        if (tide_trace_write_file(tide_session_trace(s), o->trace, &err) != TIDE_OK) {
            fprintf(stderr, "tide-bench: --trace: %s\n", err.message);
            goto out;
        }
        fprintf(stderr, "tide-bench: trace of the training steps written to %s\n", o->trace);
    }
    double heldout = NAN;
    int64_t heldout_windows = 0;
    double eval_start = tide_bench_now_ms();
    if (!o->no_eval &&
        heldout_loss(s, &m, test, tokens, labels, xent, &heldout, &heldout_windows) != 0)
        goto out;
    double eval_s = (tide_bench_now_ms() - eval_start) / 1e3;

    printf("model %s, dataset %s, batch %" PRId64 ", seq_len %" PRId64 ", steps %" PRId64
           ", %" PRId64 " parameters\n",
           o->model, o->dataset, m.batch, m.seq_len, steps, parameters);
    if (moe)
        printf("first loss %.4f, loss %.4f (cross-entropy %.4f, load balance %.4f)\n",
               (double)first_loss, (double)loss, (double)lm_loss, (double)aux_loss);
    else
        printf("first loss %.4f, loss %.4f\n", (double)first_loss, (double)loss);
    if (o->no_eval)
        printf("held-out split skipped (--no-eval)\n");
    else
        printf("held-out loss %.4f nats/byte over %" PRId64 " windows of %" PRId64 " bytes\n",
               heldout, heldout_windows, m.seq_len);
    printf("step %.2f ms mean, train %.1f s (cpu %.1f s), eval %.1f s\n",
           step_ms_sum / (double)steps, train_s, train_cpu_s, eval_s);
    printf("device high-water %" PRIu64 " bytes, predicted peak %" PRIu64 " bytes\n", high_water,
           plan->peak_bytes);
    rc = 0;
    if (o->json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_string(line, "model", o->model);
        tide_bench_json_set_string(line, "math", tide_math_name(o->math));
        tide_bench_json_set_string(line, "dataset", o->dataset);
        tide_bench_json_set_int(line, "batch", m.batch);
        tide_bench_json_set_int(line, "seq_len", m.seq_len);
        tide_bench_json_set_int(line, "steps", steps);
        tide_bench_json_set_int(line, "parameters", parameters);
        tide_bench_json_set_fixed(line, "first_loss", (double)first_loss, 6);
        tide_bench_json_set_fixed(line, "loss", (double)loss, 6);
        if (moe) {
            tide_bench_json_set_fixed(line, "lm_loss", (double)lm_loss, 6);
            tide_bench_json_set_fixed(line, "aux_loss", (double)aux_loss, 6);
        }
        if (!o->no_eval) {
            tide_bench_json_set_fixed(line, "heldout_loss", heldout, 6);
            tide_bench_json_set_int(line, "heldout_windows", heldout_windows);
        }
        tide_bench_json_set_fixed(line, "step_ms_mean", step_ms_sum / (double)steps, 3);
        tide_bench_json_set_fixed(line, "train_seconds", train_s, 3);
        tide_bench_json_set_fixed(line, "train_cpu_seconds", train_cpu_s, 3);
        tide_bench_json_set_fixed(line, "eval_seconds", eval_s, 3);
        tide_bench_json_set_fixed(line, "compile_ms", compile_ms, 1);
        tide_bench_json_set_uint(line, "nodes", graph->n_nodes);
        tide_bench_json_set_uint(line, "device_high_water_bytes", high_water);
        tide_bench_json_set_uint(line, "predicted_peak_bytes", plan->peak_bytes);
        rc = tide_bench_json_print_line(line);
    }
out:
    tide_corpus_iter_free(it);
    tide_session_free(s);
    free(bytes);
    free(tokens);
    free(labels);
    free(xent);
    tide_corpus_free(train);
    tide_corpus_free(test);
    return rc;
}
