/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/train.c: `tidectl train`: the one long-running command.
 * Builds a model with libtide's builders, submits it, streams batches from a
 * dataset into the job (tide_client_train() keeps one batch in flight each
 * way), draws a progress bar on stderr, then scores the test split with
 * forward-only steps. A language model (transformer, moe) is fed windows
 * of its corpus instead, and scored by its held-out loss: the mean of the
 * fetched per-token losses over every held-out window.
 *
 * The labels of the batches in flight wait in a small ring, since results
 * come back in the order batches went out. SIGINT/SIGTERM (counted in
 * tidectl_interrupts): the first stops feeding and lets the steps in flight
 * finish, the second abandons the stream.
 */
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tide/dataset-files.h"
#include "tide/models.h"
#include "tidectl.h"

/* Labels of the batches in flight: results come back in the order batches went out. */
#define RING 4

struct train_state {
    const struct tidectl_options *o;
    const struct tidectl_model *m;
    struct tide_job_info job;
    tide_dataset_iter *train_it, *test_it;
    tide_corpus_iter *corpus_train_it, *corpus_test_it; /* language models */
    int64_t seq_len;                                     /* language models; 1 otherwise */
    int64_t total_steps;    /* training steps to send */
    int64_t sent_train;     /* training batches sent */
    int64_t sent, received; /* all batches, for the ring */
    int32_t *labels[RING];  /* the labels of batch k are in labels[k % RING] ([B, S] for LMs) */
    int64_t real[RING];     /* real examples of batch k (eval's last batch is short) */
    bool eval_phase, eval_done;
    /* progress */
    double start_s, last_draw_s, window_start_s;
    int64_t window_start_step;
    double rate;        /* training steps per second, over a recent window */
    int64_t done_train; /* training results received */
    struct tide_step_result last;
    double last_accuracy;
    uint64_t max_high_water;
    uint64_t copy_bytes_total;
    bool tty;
    bool bar_drawn;
    bool json_failed; /* a --json line could not be written: exit 1 at the end */
    /* evaluation */
    int64_t eval_correct, eval_seen; /* eval_seen: examples */
    int64_t eval_labels;             /* labels scored: examples, or a language model's tokens */
    double eval_loss_sum;
    int64_t eval_steps;
    double eval_token_loss_sum; /* language models: the held-out tokens' losses */
    int64_t eval_windows;
};

/*
 * The sum of the first n windows' token losses in the step's fetched
 * "xent" [B * S], or NAN when the step did not bring it.
 */
static double token_loss_sum(const struct train_state *t, const struct tide_step_result *r,
                             int64_t n)
{
    const struct tide_tensor *xent = tide_step_result_fetch(r, t->m->fetch);
    size_t want = (size_t)(t->o->batch * t->seq_len) * sizeof(float);
    if (!xent || xent->dtype != TIDE_DT_FLOAT32 || xent->bytes != want)
        return NAN;
    const float *v = xent->data;
    double sum = 0;
    for (int64_t i = 0; i < n * t->seq_len; i++)
        sum += v[i];
    return sum;
}

static int64_t argmax_row(const float *row, int32_t n)
{
    int64_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* Labels an example: 1, or an ONNX language model's S (its labels [B, S], logits [B, S, V]). */
static int64_t label_positions(const struct train_state *t)
{
    const struct tide_onnx_training *x = t->m->onnx;
    return x && x->batch > 0 && x->labels.elements > x->batch ? x->labels.elements / x->batch : 1;
}

/*
 * Counts the correct predictions among the first n examples' rows of the step's logits (a row
 * per label: per position for a language model), or -1.
 */
static int64_t count_correct(const struct train_state *t, const struct tide_step_result *r,
                             const int32_t *labels, int64_t n)
{
    const struct tide_tensor *logits = tide_step_result_fetch(r, t->m->logits);
    int64_t positions = label_positions(t);
    size_t want = (size_t)(t->o->batch * positions) * (size_t)t->m->classes * sizeof(float);
    if (!logits || logits->dtype != TIDE_DT_FLOAT32 || logits->bytes != want)
        return -1;
    const float *rows = logits->data;
    int64_t correct = 0;
    for (int64_t i = 0; i < n * positions; i++)
        correct += argmax_row(rows + i * t->m->classes, t->m->classes) == labels[i];
    return correct;
}

static void draw_progress(struct train_state *t, bool final)
{
    double now = tidectl_now_s();
    if (!final && now - t->last_draw_s < (t->tty ? 0.1 : 10.0))
        return;
    t->last_draw_s = now;
    const struct tide_step_result *r = &t->last;
    int64_t step = t->done_train;
    double frac = t->total_steps ? (double)step / (double)t->total_steps : 0;
    char bar[32];
    int width = 20, filled = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '=' : ' ';
    if (filled > 0 && filled < width)
        bar[filled - 1] = '>';
    bar[width] = '\0';
    char hw[32], budget[32], eta[32];
    double mb_per_step = (double)(r->h2d_bytes + r->d2h_bytes) / 1e6;
    double left = t->rate > 0 ? (double)(t->total_steps - step) / t->rate : NAN;
    char acc[32] = "";
    if (!t->m->language_model)
        snprintf(acc, sizeof(acc), " acc %.3f", t->last_accuracy);
    fprintf(stderr,
            "%s[%s] %" PRId64 "/%" PRId64 " loss %.4f%s | dev %s/%s | swap %.1f MB/step | "
            "%.1f step/s | ETA %s%s",
            t->tty ? "\r\033[K" : "", bar, step, t->total_steps, (double)r->loss, acc,
            tidectl_fmt_bytes(r->device_high_water_bytes, hw, sizeof(hw)),
            tidectl_fmt_bytes(t->job.device_budget_bytes, budget, sizeof(budget)), mb_per_step,
            t->rate, tidectl_fmt_duration(left, eta, sizeof(eta)), t->tty ? "" : "\n");
    t->bar_drawn = t->tty;
    if (final && t->tty) {
        fputc('\n', stderr);
        t->bar_drawn = false;
    }
    fflush(stderr);
}

/*
 * The next batch of a dataset into images and labels: int32 class labels,
 * or the float targets an ONNX model's loss takes (--loss mse, or none with
 * a float labels input; the build checked that the files hold such), in
 * the same 4-byte slots.
 */
static int64_t next_batch(const struct train_state *t, tide_dataset_iter *it, void *const *inputs,
                          int32_t *labels)
{
    /* --onnx --data: one file per model input, into inputs[k], from one permutation. */
    if (t->m->onnx && t->o->data)
        return tide_dataset_iter_next_inputs(it, inputs, labels);
    if (t->m->onnx && t->m->onnx->labels.dtype == TIDE_DT_FLOAT32)
        return tide_dataset_iter_next_targets(it, inputs[0], (float *)(void *)labels);
    return tide_dataset_iter_next(it, inputs[0], labels);
}

static int train_feed(void *user, tide_feeds *feeds)
{
    struct train_state *t = user;
    if (tidectl_interrupts > 1)
        return -1; /* abandon the stream */
    if (tidectl_interrupts == 1)
        return 0; /* let the steps in flight finish; no evaluation either */
    int32_t *labels = t->labels[t->sent % RING];
    int64_t label_dims[1] = {t->o->batch};
    if (!t->eval_phase && t->sent_train >= t->total_steps) {
        if (t->o->no_eval || !(t->test_it || t->corpus_test_it))
            return 0;
        t->eval_phase = true;
    }
    if (t->m->language_model) {
        /* Windows of the corpus: tokens and next-byte labels, [B, S] each. */
        int32_t *tokens = tide_feeds_buffer(feeds, t->m->images, TIDE_DT_INT32, t->m->image_rank,
                                            t->m->image_dims);
        if (!tokens)
            return -1;
        int64_t n;
        if (!t->eval_phase) {
            n = tide_corpus_iter_next(t->corpus_train_it, tokens, labels);
            t->sent_train++;
        } else {
            n = tide_corpus_iter_next(t->corpus_test_it, tokens, labels);
            if (n <= 0) {
                t->eval_done = true;
                return 0;
            }
            tide_feeds_set_eval_only(feeds, true);
        }
        if (n <= 0 || tide_feeds_set(feeds, t->m->labels, TIDE_DT_INT32, t->m->image_rank,
                                     t->m->image_dims, labels) != 0)
            return -1;
        t->real[t->sent % RING] = n;
        t->sent++;
        return 1;
    }
    /* The images, or an ONNX model's inputs, each of its own kind and shape. */
    void *inputs[TIDE_ONNX_MAX_INPUTS];
    const struct tide_onnx_training *x = t->m->onnx;
    int32_t n_inputs = x && t->o->data ? x->n_inputs : 1;
    for (int32_t k = 0; k < n_inputs; k++) {
        inputs[k] = x && t->o->data
                        ? tide_feeds_buffer(feeds, x->inputs[k].name, x->inputs[k].dtype,
                                            x->inputs[k].rank, x->inputs[k].dims)
                        : tide_feeds_buffer(feeds, t->m->images, TIDE_DT_FLOAT32,
                                            t->m->image_rank, t->m->image_dims);
        if (!inputs[k])
            return -1;
    }
    int64_t n;
    if (!t->eval_phase) {
        n = next_batch(t, t->train_it, inputs, labels);
        if (n == 0) /* a new epoch */
            n = next_batch(t, t->train_it, inputs, labels);
        t->sent_train++;
    } else {
        n = next_batch(t, t->test_it, inputs, labels);
        if (n <= 0) {
            t->eval_done = true;
            return 0;
        }
        tide_feeds_set_eval_only(feeds, true);
    }
    if (n <= 0)
        return -1;
    /* An ONNX model's labels are its loss's: [B] classes, [B, ...] targets or its own input. */
    const struct tide_onnx_tensor *onnx_labels = t->m->onnx ? &t->m->onnx->labels : NULL;
    int rc = onnx_labels
                 ? tide_feeds_set(feeds, t->m->labels, onnx_labels->dtype, onnx_labels->rank,
                                  onnx_labels->dims, labels)
                 : tide_feeds_set(feeds, t->m->labels, TIDE_DT_INT32, 1, label_dims, labels);
    if (rc != 0)
        return -1;
    t->real[t->sent % RING] = n;
    t->sent++;
    return 1;
}

static int train_step(void *user, const struct tide_step_result *r)
{
    struct train_state *t = user;
    int64_t k = t->received++;
    const int32_t *labels = t->labels[k % RING];
    int64_t n = t->real[k % RING];
    int64_t correct = t->m->language_model ? -1 : count_correct(t, r, labels, n);
    if (r->eval_only) {
        t->eval_steps++;
        t->eval_loss_sum += (double)r->loss * (double)n;
        if (t->m->language_model) {
            t->eval_token_loss_sum += token_loss_sum(t, r, n);
            t->eval_windows += n;
        }
        if (correct >= 0) {
            t->eval_correct += correct;
            t->eval_seen += n;
            t->eval_labels += n * label_positions(t);
        }
    } else {
        t->done_train++;
        t->last = *r;
        t->last.fetches = NULL;
        t->last.n_fetches = 0;
        t->last_accuracy =
            correct >= 0 && n > 0 ? (double)correct / (double)(n * label_positions(t)) : NAN;
        if (r->device_high_water_bytes > t->max_high_water)
            t->max_high_water = r->device_high_water_bytes;
        t->copy_bytes_total += r->h2d_bytes + r->d2h_bytes;
        /*
         * Steps per second over a window of the last few seconds, so that
         * the rate follows changes (another job starting) without jitter.
         */
        double now = tidectl_now_s();
        double dt = now - t->window_start_s;
        if (dt > 0 && (dt >= 0.5 || t->rate == 0) && t->done_train > t->window_start_step)
            t->rate = (double)(t->done_train - t->window_start_step) / dt;
        if (dt >= 5.0) {
            t->window_start_s = now;
            t->window_start_step = t->done_train;
        }
    }
    if (t->o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "event", "step");
        tidectl_json_set_string(line, "job", t->job.id);
        tidectl_json_set(line, "result", tidectl_json_step(r));
        if (!t->m->language_model)
            tidectl_json_set_double(
                line, "batch_accuracy",
                correct >= 0 && n > 0 ? (double)correct / (double)(n * label_positions(t)) : NAN);
        if (tidectl_json_print_line(line) != TIDECTL_EXIT_OK)
            t->json_failed = true;
    }
    if (!r->eval_only && (t->tty || !t->o->json))
        draw_progress(t, t->done_train == t->total_steps);
    if (r->eval_only && t->tty && !t->o->json) {
        fprintf(stderr, "\r\033[Kevaluating: %" PRId64 " %s batches", t->eval_steps,
                t->m->language_model ? "held-out" : "test");
        fflush(stderr);
    }
    return 0;
}

/*
 * The job waits QUEUED: says so on stderr, with its position (again when it
 * moves), and polls until the daemon admits it. Here, not in a Train stream
 * held by the daemon, so that Ctrl-C is seen at once: it cancels the job,
 * which never ran. TIDECTL_EXIT_OK once admitted; a job that ended while
 * queued (cancelled, or tided shut down) is an error naming its state.
 */
static int wait_for_admission(tide_client *c, struct tide_job_info *job)
{
    uint32_t shown = 0;
    while (job->state == TIDE_JOB_QUEUED) {
        if (job->queue_position != shown) {
            shown = job->queue_position;
            fprintf(stderr, "job %s: queued (position %" PRIu32 "): %s\n", job->id, shown,
                    job->message);
            fflush(stderr);
        }
        for (int i = 0; i < 10 && !tidectl_interrupts; i++)
            poll(NULL, 0, 50); /* 0.5 s between polls, Ctrl-C seen within 50 ms */
        if (tidectl_interrupts) {
            if (tide_client_cancel(c, job->id, NULL) != 0)
                return tidectl_client_error(c, "train: cancelling the queued job",
                                            TIDECTL_EXIT_RUNTIME);
            fprintf(stderr, "job %s: cancelled while queued\n", job->id);
            return 128 + tidectl_last_signal;
        }
        if (tide_client_get(c, job->id, job) != 0)
            return tidectl_client_error(c, "train: waiting in the queue", TIDECTL_EXIT_RUNTIME);
    }
    if (job->state == TIDE_JOB_DONE || job->state == TIDE_JOB_FAILED ||
        job->state == TIDE_JOB_CANCELLED) {
        fprintf(stderr, "tidectl: train: job %s ended while queued (%s): %s\n", job->id,
                tide_job_state_name(job->state), job->message);
        return TIDECTL_EXIT_RUNTIME;
    }
    fprintf(stderr, "job %s: admitted (%s)\n", job->id, job->message);
    return TIDECTL_EXIT_OK;
}

static int run_train(const struct tidectl_verb *verb, struct tidectl_options *o,
                     tide_client *client)
{
    (void)client;
    tide_dataset *train = NULL, *test = NULL;
    tide_corpus *corpus_train = NULL, *corpus_test = NULL;
    bool lm = tidectl_language_model(o);
    int64_t ch = 0, h = 0, w = 0;
    int rc;
    if (lm) {
        rc = tidectl_open_corpus(o, "train", &corpus_train);
        if (rc == TIDECTL_EXIT_OK && !o->no_eval)
            rc = tidectl_open_corpus(o, "test", &corpus_test);
    } else if (o->data) {
        rc = tidectl_open_files(o, &train, o->no_eval ? NULL : &test, &ch, &h, &w);
    } else {
        rc = tidectl_open_dataset(o, "train", &train);
        if (rc == TIDECTL_EXIT_OK && !o->no_eval)
            rc = tidectl_open_dataset(o, "test", &test);
        ch = tide_dataset_channels(train), h = tide_dataset_height(train);
        w = tide_dataset_width(train);
    }
    if (rc != TIDECTL_EXIT_OK) {
        tide_dataset_free(train);
        tide_corpus_free(corpus_train);
        return rc;
    }
    struct tidectl_model m;
    /* A language model's sizes are all in o: it reads tokens, not images. */
    rc = tidectl_build_model(o, ch, h, w, lm ? 0 : tide_dataset_classes(train),
                             o->data ? train : NULL, &m);
    if (rc == TIDECTL_EXIT_OK && o->data && !o->onnx &&
        (rc = tidectl_check_files_input(train, &m)) != 0)
        tidectl_model_clear(&m);
    if (rc != TIDECTL_EXIT_OK) {
        tide_dataset_free(train);
        tide_dataset_free(test);
        tide_corpus_free(corpus_train);
        tide_corpus_free(corpus_test);
        return rc;
    }
    o->batch = m.batch; /* an ONNX model's own */
    const char *model_name = o->onnx ? o->onnx : o->model;
    struct train_state t;
    memset(&t, 0, sizeof(t));
    t.o = o;
    t.m = &m;
    t.tty = isatty(STDERR_FILENO);
    t.seq_len = lm ? m.image_dims[1] : 1;
    char err[512];
    /* An epoch of a language model: as many tokens as the train split, in random windows. */
    int64_t examples = lm ? tide_corpus_windows(corpus_train, t.seq_len)
                          : tide_dataset_count(train);
    int64_t per_epoch = examples / o->batch;
    if (per_epoch < 1) {
        rc = tidectl_usage_error(
            verb->name, "--batch %" PRId64 " is larger than the dataset (%" PRId64 " %s)",
            o->batch, examples, lm ? "windows" : "examples");
        goto out;
    }
    t.total_steps = o->steps ? o->steps : (o->epochs ? o->epochs : 1) * per_epoch;
    if (lm ? tide_corpus_iter_new(corpus_train, o->batch, t.seq_len, o->seed, TIDE_CORPUS_RANDOM,
                                  &t.corpus_train_it, err, sizeof(err)) != 0 ||
                 (corpus_test && tide_corpus_iter_new(corpus_test, o->batch, t.seq_len, 0, 0,
                                                      &t.corpus_test_it, err, sizeof(err)) != 0)
           : tide_dataset_iter_new(train, o->batch, o->seed, TIDE_DATASET_SHUFFLE, &t.train_it,
                                   err, sizeof(err)) != 0 ||
                 (test && tide_dataset_iter_new(test, o->batch, 0, TIDE_DATASET_KEEP_LAST,
                                                &t.test_it, err, sizeof(err)) != 0)) {
        fprintf(stderr, "tidectl: train: %s\n", err);
        rc = TIDECTL_EXIT_RUNTIME;
        goto out;
    }
    for (int i = 0; i < RING; i++) {
        /* Room for a batch's labels: [B, S] tokens, or an ONNX model's loss's. */
        int64_t slots = o->batch * t.seq_len;
        if (m.onnx && m.onnx->labels.elements > slots)
            slots = m.onnx->labels.elements;
        t.labels[i] = calloc((size_t)slots, sizeof(int32_t));
        if (!t.labels[i]) {
            fprintf(stderr, "tidectl: out of memory\n");
            rc = TIDECTL_EXIT_RUNTIME;
            goto out;
        }
    }

    tide_client *c = tidectl_connect(o, &rc);
    if (!c)
        goto out;
    struct tide_job_spec spec;
    char name[TIDE_JOB_NAME_MAX];
    tidectl_make_spec(o, &m, name, sizeof(name), &spec);
    if (tide_client_submit(c, &spec, &t.job) != 0) {
        rc = tidectl_client_error(c, "train: submit", TIDECTL_EXIT_RUNTIME);
        tide_client_free(c);
        goto out;
    }
    char b1[32], b2[32], b3[32], b4[32];
    if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "event", "submitted");
        tidectl_json_set(line, "job", tidectl_json_job(&t.job));
        tidectl_json_set_string(line, "model", model_name);
        tidectl_json_set_int(line, "parameters", m.parameters);
        tidectl_json_set_int(line, "batch", o->batch);
        tidectl_json_set_int(line, "total_steps", t.total_steps);
        if (tidectl_json_print_line(line) != TIDECTL_EXIT_OK)
            t.json_failed = true;
    }
    if (!o->json || t.tty) {
        fprintf(stderr,
                "job %s: %s, %" PRId64 " parameters, batch %" PRId64 ", %" PRId64 " steps on %s\n",
                t.job.id, model_name, m.parameters, o->batch, t.total_steps,
                o->data ? o->data : o->dataset);
        if (t.job.has_plan)
            fprintf(stderr,
                    "plan: budget %s, predicted peak %s, per step swap %s in / %s out, "
                    "%" PRIu32 " nodes\n",
                    tidectl_fmt_bytes(t.job.plan.budget_bytes, b1, sizeof(b1)),
                    tidectl_fmt_bytes(t.job.plan.predicted_peak_bytes, b2, sizeof(b2)),
                    tidectl_fmt_bytes(t.job.plan.swap_in_bytes, b3, sizeof(b3)),
                    tidectl_fmt_bytes(t.job.plan.swap_out_bytes, b4, sizeof(b4)), t.job.plan.nodes);
    }

    tidectl_install_signals();
    if (t.job.state == TIDE_JOB_QUEUED && (rc = wait_for_admission(c, &t.job)) != TIDECTL_EXIT_OK) {
        tide_client_free(c);
        goto out;
    }
    t.start_s = t.window_start_s = tidectl_now_s();
    int code = tide_client_train(c, t.job.id, train_feed, train_step, &t);
    double elapsed = tidectl_now_s() - t.start_s;
    if (t.bar_drawn)
        fputc('\n', stderr);
    if (code != 0) {
        rc = tidectl_client_error(c, "train", TIDECTL_EXIT_RUNTIME);
        tide_client_free(c);
        goto out;
    }
    /* Training is over: the daemon checkpoints the job and gives its budget back. */
    if (!o->keep && tide_client_finish(c, t.job.id) != 0) {
        rc = tidectl_client_error(c, "train: finishing the job", TIDECTL_EXIT_RUNTIME);
        tide_client_free(c);
        goto out;
    }
    double test_accuracy = t.eval_labels ? (double)t.eval_correct / (double)t.eval_labels : NAN;
    double test_loss = t.eval_seen ? t.eval_loss_sum / (double)t.eval_seen : NAN;
    double heldout_loss =
        t.eval_windows ? t.eval_token_loss_sum / (double)(t.eval_windows * t.seq_len) : NAN;
    struct tide_job_info after;
    bool have_after = tide_client_get(c, t.job.id, &after) == 0;
    if (o->json) {
        struct json_object *line = tidectl_json_object();
        tidectl_json_set_string(line, "event", "done");
        tidectl_json_set_string(line, "job", t.job.id);
        tidectl_json_set_int(line, "steps", t.done_train);
        tidectl_json_set_bool(line, "interrupted", tidectl_interrupts != 0);
        tidectl_json_set_double(line, "seconds", elapsed);
        tidectl_json_set_double(line, "final_loss", t.done_train ? (double)t.last.loss : NAN);
        if (lm) {
            tidectl_json_set_int(line, "heldout_windows", t.eval_windows);
            tidectl_json_set_double(line, "heldout_loss", heldout_loss);
        } else {
            tidectl_json_set_int(line, "test_examples", t.eval_seen);
            tidectl_json_set_double(line, "test_accuracy", test_accuracy);
            tidectl_json_set_double(line, "test_loss", test_loss);
        }
        tidectl_json_set_uint(line, "device_high_water_bytes", t.max_high_water);
        tidectl_json_set_uint(line, "copy_bytes_total", t.copy_bytes_total);
        if (have_after)
            tidectl_json_set_string(line, "state", tide_job_state_name(after.state));
        if (tidectl_json_print_line(line) != TIDECTL_EXIT_OK)
            t.json_failed = true;
    } else {
        if (t.eval_steps && t.tty)
            fputc('\n', stderr);
        printf("job %s: %" PRId64 " steps in %s%s, final loss %.4f\n", t.job.id, t.done_train,
               tidectl_fmt_duration(elapsed, b1, sizeof(b1)),
               tidectl_interrupts ? " (interrupted)" : "", (double)t.last.loss);
        printf("device memory high water %s of a %s budget; %.1f MB copied host<->device per "
               "step\n",
               tidectl_fmt_bytes(t.max_high_water, b2, sizeof(b2)),
               tidectl_fmt_bytes(t.job.device_budget_bytes, b3, sizeof(b3)),
               t.done_train ? (double)t.copy_bytes_total / 1e6 / (double)t.done_train : 0.0);
        if (t.eval_seen)
            printf("test accuracy %.4f (%" PRId64 " examples), test loss %.4f\n", test_accuracy,
                   t.eval_seen, test_loss);
        if (t.eval_windows)
            printf("held-out loss %.4f nats/byte (%" PRId64 " windows of %" PRId64 " bytes)\n",
                   heldout_loss, t.eval_windows, t.seq_len);
    }
    if (t.json_failed)
        rc = TIDECTL_EXIT_RUNTIME;
    tide_client_free(c);
out:
    for (int i = 0; i < RING; i++)
        free(t.labels[i]);
    tide_dataset_iter_free(t.train_it);
    tide_dataset_iter_free(t.test_it);
    tide_dataset_free(train);
    tide_dataset_free(test);
    tide_corpus_iter_free(t.corpus_train_it);
    tide_corpus_iter_free(t.corpus_test_it);
    tide_corpus_free(corpus_train);
    tide_corpus_free(corpus_test);
    tidectl_model_clear(&m);
    return rc;
}

static const int accepts[] = {TIDECTL_MODEL_OPTIONS,
                              TIDECTL_OPT_STEPS,
                              TIDECTL_OPT_EPOCHS,
                              TIDECTL_OPT_CHECKPOINT_EVERY,
                              TIDECTL_OPT_RESUME,
                              TIDECTL_OPT_NO_EVAL,
                              TIDECTL_OPT_KEEP,
                              TIDECTL_OPT_PRIORITY,
                              TIDECTL_OPT_DEVICE,
                              0};

const struct tidectl_verb tidectl_verb_train = {
    .name = "train",
    .run = run_train,
    .accepts = accepts,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "train [MODEL OPTIONS | --onnx FILE [--output NAME] [--loss xent|mse|none]] "
                "[--data X --labels Y [--test-data X2 --test-labels Y2]] "
                "[--epochs E | --steps S] [--checkpoint-every N] [--resume JOB] [--keep] "
                "[--priority N] [--device N]",
    .summary = "submit a model and train it on a dataset, with a progress bar",
    .help = "DESCRIPTION\n"
            "  Builds the model with libtide's builders (or imports --onnx FILE and adds the\n"
            "  --loss on its --output), submits it as a job, and streams\n"
            "  batches of the dataset's train split (or of --data and --labels) into it. A\n"
            "  progress bar on stderr shows step/total, the loss and accuracy of the latest\n"
            "  training batch (from the fetched logits; no accuracy for transformer and\n"
            "  moe), the device memory high water against the budget, the swap traffic\n"
            "  (bytes copied between host and device) per step, steps per second and the\n"
            "  time left. Then the test split (--test-data and --test-labels with --data)\n"
            "  is scored with forward-only steps and the test accuracy printed (for\n"
            "  transformer and moe: the held-out loss, the mean cross-entropy of every\n"
            "  held-out byte in nats, over consecutive windows of the corpus's last 10 %).\n"
            "  Then the job is finished: the daemon checkpoints it, gives its device budget\n"
            "  back and marks it DONE; `get` still shows it, --resume JOB continues from its\n"
            "  checkpoint and `export JOB --npz` writes its weights. --keep leaves it READY\n"
            "  instead.\n"
            "  When the device has no room for the budget now, the job waits QUEUED:\n"
            "  stderr says \"queued (position N)\" and training starts once tided admits\n"
            "  it (`tidectl queue` shows the order); Ctrl-C while it waits cancels it. A\n"
            "  job preempted by a higher priority pauses and goes on by itself, bit for\n"
            "  bit, when room returns.\n"
            "  Ctrl-C once stops after the steps in flight (the job is finished as above,\n"
            "  unless --keep); twice abandons the stream and leaves the job READY.\n"
            "  With --json, stdout gets a \"submitted\" line, one \"step\" line per step and a\n"
            "  \"done\" line.\n"
            "\n"
            "OPTIONS\n"
            "  --epochs E               Train E passes over the train split (default 1).\n"
            "  --steps S                Train S steps instead.\n"
            "  --checkpoint-every N     Have the daemon checkpoint every N steps.\n"
            "  --resume JOB             Start from the last checkpoint of job JOB (same model).\n"
            "  --no-eval                Skip the test split.\n"
            "  --priority N             Admission priority, -1000 to 1000 (default 0):\n"
            "                           higher is admitted first and may preempt lower\n"
            "                           jobs. Above 0 only for root and the admin group.\n"
            "  --keep                   Leave the job READY, holding its budget, for more\n"
            "                           Train streams (default: finish it). After the\n"
            "                           daemon's idle-timeout it is parked: checkpointed,\n"
            "                           its budget released until its next Train stream.\n"
            "  --device N               Run on the daemon's device N (`tidectl status` lists\n"
            "                           them; default: the one whose free memory fits the\n"
            "                           budget most tightly). Refused when the daemon has no\n"
            "                           device N, or that device has no room for the budget.\n"
            "\n" TIDECTL_MODEL_HELP,
};
