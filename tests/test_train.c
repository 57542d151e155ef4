/* SPDX-License-Identifier: MIT */
/*
 * test_train.c: training through a session, end to end (issue 3's
 * acceptance): models from libtide's builder, batches from its datasets,
 * import, autodiff, memplan and the executor on the CPU backend.
 *
 *  (a) The CNN learns Fashion-MNIST: 300 steps of batch 32, Momentum 0.9,
 *      learning rate 0.02; the mean loss of the last 50 steps is below a
 *      bound measured with a wide margin. Skipped when Debian's
 *      dataset-fashion-mnist is not installed.
 *  (b) Training is deterministic: two runs with the same seed give
 *      bit-identical Variables (every one, optimizer state included, read by
 *      name), also when the CPU kernels' pool has 1 thread in one run and 2
 *      in the other.
 *  (c) Every step's measured device high-water mark equals memplan's
 *      prediction.
 *  (d) An MLP learns the synthetic dataset (a random linear labelling).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "swapper/swapper.h"
#include "tide/dataset.h"
#include "tide/models.h"

/*
 * (a): the mean loss of the last 50 of 300 steps must be below this. Measured
 * at 0.45 to 0.55 over seeds 1 to 6 (1.06 to 1.29 over the first 50 steps).
 */
#define FASHION_STEPS      300
#define FASHION_BATCH      32
#define FASHION_WINDOW     50
#define FASHION_LOSS_BOUND 0.75
/*
 * (d): the mean loss of the last 20 of 400 steps must be below this fraction
 * of the first 20's. Measured at 0.48 to 0.53 over seeds 1 to 6 (from 2.3,
 * chance level for 10 classes, to 1.1 to 1.2).
 */
#define MLP_LOSS_RATIO 0.7

static void check(enum tide_status st, const struct tide_error *err)
{
    if (st != TIDE_OK)
        fail_msg("%s: %s", tide_status_name(st), err->message);
}

/* ============================================================================
 * A training run
 * ========================================================================== */

struct run {
    struct tide_session *session;
    tide_dataset_iter *it;
    float *images;
    int32_t *labels;
    uint64_t image_bytes, label_bytes;
};

/*
 * A session training the model in bytes on ds, batch examples per step,
 * shuffled from seed; backend NULL: the session's own (threads: one per core).
 */
static void run_new(struct run *r, const uint8_t *bytes, size_t len,
                    const struct tide_train_options *train, const tide_dataset *ds, int64_t batch,
                    uint64_t seed, struct tide_backend *backend)
{
    memset(r, 0, sizeof(*r));
    struct tide_session_options o = tide_session_options_default();
    o.train = train;
    o.seed = seed;
    o.backend = backend;
    struct tide_error err = {0};
    check(tide_session_new(bytes, len, &o, &r->session, &err), &err);
    char msg[256];
    if (tide_dataset_iter_new(ds, batch, seed, TIDE_DATASET_SHUFFLE, &r->it, msg, sizeof(msg)) != 0)
        fail_msg("%s", msg);
    int64_t per_example =
        tide_dataset_channels(ds) * tide_dataset_height(ds) * tide_dataset_width(ds);
    r->image_bytes = (uint64_t)(batch * per_example) * sizeof(float);
    r->label_bytes = (uint64_t)batch * sizeof(int32_t);
    r->images = malloc(r->image_bytes);
    r->labels = malloc(r->label_bytes);
}

/* One step on the next batch; returns its loss. Checks invariant (c). */
static float run_step(struct run *r)
{
    if (tide_dataset_iter_next(r->it, r->images, r->labels) == 0)
        assert_true(tide_dataset_iter_next(r->it, r->images, r->labels) > 0);
    struct tide_error err = {0};
    check(tide_session_feed(r->session, TIDE_MODEL_IMAGES, r->images, r->image_bytes, &err), &err);
    check(tide_session_feed(r->session, TIDE_MODEL_LABELS, r->labels, r->label_bytes, &err), &err);
    struct tide_step_stats stats;
    check(tide_session_step(r->session, &stats, &err), &err);
    assert_int_equal(stats.high_water_bytes, tide_session_memplan(r->session)->peak_bytes);
    float loss;
    check(tide_session_fetch(r->session, TIDE_MODEL_LOSS, &loss, sizeof(loss), &err), &err);
    if (!isfinite(loss))
        fail_msg("step %llu: the loss is %f", (unsigned long long)stats.step, (double)loss);
    return loss;
}

static void run_free(struct run *r)
{
    tide_session_free(r->session);
    tide_dataset_iter_free(r->it);
    free(r->images);
    free(r->labels);
}

/* Every Variable of the session, concatenated in node id order (malloc'd; *bytes gets the size). */
static uint8_t *read_variables(struct tide_session *s, uint64_t *bytes, uint32_t *count)
{
    const struct tide_graph *g = tide_session_graph(s);
    uint64_t total = 0;
    *count = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op == TIDE_OP_VARIABLE)
            total += g->nodes[v].outputs[0].nbytes;
    }
    uint8_t *data = malloc(total + 1);
    uint64_t at = 0;
    struct tide_error err = {0};
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        const struct tide_node *node = &g->nodes[v];
        if (node->op != TIDE_OP_VARIABLE)
            continue;
        check(tide_session_fetch(s, node->name, data + at, node->outputs[0].nbytes, &err), &err);
        at += node->outputs[0].nbytes;
        (*count)++;
    }
    *bytes = total;
    return data;
}

static uint8_t *cnn_bytes(int64_t batch, size_t *len)
{
    tide_builder *b = tide_builder_new();
    uint8_t *bytes = NULL;
    if (tide_model_cnn(b, batch, 1, 28, 28, 10).id < 0 || tide_builder_serialize(b, &bytes, len))
        fail_msg("cnn: %s", tide_builder_error(b));
    tide_builder_free(b);
    return bytes;
}

static const struct tide_train_options momentum = {.loss = TIDE_MODEL_LOSS,
                                                   .optimizer = TIDE_OPTIMIZER_MOMENTUM,
                                                   .learning_rate = 0.02f,
                                                   .momentum = 0.9f};

/* ============================================================================
 * Tests
 * ========================================================================== */

/* (a) and (c): the CNN learns Fashion-MNIST. */
static void test_cnn_learns_fashion_mnist(void **state)
{
    (void)state;
    char msg[512];
    tide_dataset *train;
    if (tide_dataset_open("fashion-mnist", NULL, "train", &train, msg, sizeof(msg)) != 0) {
        print_message("skipped: %s\n", msg);
        skip();
    }
    size_t len;
    uint8_t *bytes = cnn_bytes(FASHION_BATCH, &len);
    struct run r;
    run_new(&r, bytes, len, &momentum, train, FASHION_BATCH, 1, NULL);
    double first = 0, last = 0;
    for (int step = 0; step < FASHION_STEPS; step++) {
        float loss = run_step(&r);
        if (step < FASHION_WINDOW)
            first += loss / FASHION_WINDOW;
        if (step >= FASHION_STEPS - FASHION_WINDOW)
            last += loss / FASHION_WINDOW;
    }
    print_message("cnn on fashion-mnist: mean loss %.4f over the first %d steps, %.4f over the "
                  "last %d (bound %.2f)\n",
                  first, FASHION_WINDOW, last, FASHION_WINDOW, FASHION_LOSS_BOUND);
    assert_true(last < FASHION_LOSS_BOUND);
    assert_true(last < first);
    run_free(&r);
    free(bytes);
    tide_dataset_free(train);
}

/* (b) and (c): the same seed gives the same bits, at 1 and at 2 kernel threads. */
static void test_deterministic_across_runs_and_threads(void **state)
{
    (void)state;
    char msg[256];
    tide_dataset *ds;
    struct tide_synthetic_options so = {.count = 1024, .seed = 5};
    if (tide_dataset_open_synthetic(&so, "train", &ds, msg, sizeof(msg)) != 0)
        fail_msg("%s", msg);
    size_t len;
    uint8_t *bytes = cnn_bytes(16, &len);
    static const int threads[3] = {2, 2, 1};
    uint8_t *vars[3];
    uint64_t size[3];
    uint32_t count[3];
    for (int i = 0; i < 3; i++) {
        struct tide_backend *backend;
        struct tide_error err = {0};
        struct tide_backend_options bo = {.threads = threads[i]};
        check(tide_backend_cpu_new(&bo, &backend, &err), &err);
        struct run r;
        run_new(&r, bytes, len, &momentum, ds, 16, 11, backend);
        for (int step = 0; step < 20; step++)
            run_step(&r);
        vars[i] = read_variables(r.session, &size[i], &count[i]);
        run_free(&r);
        tide_backend_free(backend);
    }
    /* The CNN's 8 trained Variables and their 8 accumulators. */
    assert_int_equal(count[0], 16);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(count[i], count[0]);
        assert_int_equal(size[i], size[0]);
        if (memcmp(vars[i], vars[0], size[0]) != 0)
            fail_msg("run %d (%d kernel threads) differs from run 0 (%d)", i, threads[i],
                     threads[0]);
    }
    for (int i = 0; i < 3; i++)
        free(vars[i]);
    free(bytes);
    tide_dataset_free(ds);
}

/* (d) and (c): an MLP learns the synthetic dataset. */
static void test_mlp_learns_synthetic(void **state)
{
    (void)state;
    char msg[256];
    tide_dataset *ds;
    struct tide_synthetic_options so = {.count = 4096, .height = 8, .width = 8, .seed = 3};
    if (tide_dataset_open_synthetic(&so, "train", &ds, msg, sizeof(msg)) != 0)
        fail_msg("%s", msg);
    tide_builder *b = tide_builder_new();
    const int64_t hidden[1] = {64};
    uint8_t *bytes = NULL;
    size_t len;
    if (tide_model_mlp(b, 32, 64, hidden, 1, 10).id < 0 || tide_builder_serialize(b, &bytes, &len))
        fail_msg("mlp: %s", tide_builder_error(b));
    tide_builder_free(b);
    struct tide_train_options sgd = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.1f};
    struct run r;
    run_new(&r, bytes, len, &sgd, ds, 32, 9, NULL);
    double first = 0, last = 0;
    for (int step = 0; step < 400; step++) {
        float loss = run_step(&r);
        if (step < 20)
            first += loss / 20;
        if (step >= 380)
            last += loss / 20;
    }
    print_message("mlp on synthetic data: mean loss %.4f over the first 20 steps, %.4f over the "
                  "last 20\n",
                  first, last);
    assert_true(last < MLP_LOSS_RATIO * first);
    run_free(&r);
    free(bytes);
    tide_dataset_free(ds);
}

/* A serialized MLP of batch 4, 64 inputs, one hidden layer of 16, 10 classes. */
static uint8_t *small_mlp(size_t *len)
{
    tide_builder *b = tide_builder_new();
    const int64_t hidden[1] = {16};
    uint8_t *bytes = NULL;
    if (tide_model_mlp(b, 4, 64, hidden, 1, 10).id < 0 || tide_builder_serialize(b, &bytes, len))
        fail_msg("mlp: %s", tide_builder_error(b));
    tide_builder_free(b);
    return bytes;
}

/*
 * A plan-only session plans memory like any other, but has no executor:
 * whatever would run or touch tensors refuses with TIDE_STATE, saying why.
 */
static void test_plan_only(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes = small_mlp(&len);
    struct tide_train_options adam = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 0.01f};
    struct tide_memory_policy policy = tide_memory_policy_default();
    struct tide_session_options o = tide_session_options_default();
    o.train = &adam;
    o.memory = &policy;
    o.plan_only = true;
    struct tide_error err = {0};
    struct tide_session *s;
    check(tide_session_new(bytes, len, &o, &s, &err), &err);
    assert_non_null(tide_session_memplan(s));
    assert_true(tide_session_memplan(s)->peak_bytes > 0);
    assert_non_null(tide_session_plan_report(s));
    float x[4 * 64];
    memset(x, 0, sizeof(x));
    assert_int_equal(tide_session_feed(s, TIDE_MODEL_IMAGES, x, sizeof(x), &err), TIDE_STATE);
    assert_non_null(strstr(err.message, "plan-only"));
    assert_int_equal(tide_session_step(s, NULL, &err), TIDE_STATE);
    assert_int_equal(tide_session_eval(s, NULL, &err), TIDE_STATE);
    float loss;
    assert_int_equal(tide_session_fetch(s, TIDE_MODEL_LOSS, &loss, sizeof(loss), &err),
                     TIDE_STATE);
    assert_int_equal(tide_session_set_step(s, 3, &err), TIDE_STATE);
    tide_session_free(s);
    free(bytes);
}

/*
 * The two halves of creation, as the daemon runs them on two threads: a
 * plan-only session given its executor by tide_session_instantiate trains
 * exactly as a session created whole with the same options (same seed: same
 * initial Variables, same loss and Variables after a step), and a second
 * instantiate is refused.
 */
static void test_instantiate_matches_new(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes = small_mlp(&len);
    struct tide_train_options adam = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 0.01f};
    struct tide_memory_policy policy = tide_memory_policy_default();
    struct tide_session_options o = tide_session_options_default();
    o.train = &adam;
    o.memory = &policy;
    o.seed = 11;
    struct tide_error err = {0};
    struct tide_session *whole, *halves;
    check(tide_session_new(bytes, len, &o, &whole, &err), &err);
    o.plan_only = true;
    check(tide_session_new(bytes, len, &o, &halves, &err), &err);
    check(tide_session_instantiate(halves, &err), &err);
    assert_int_equal(tide_session_instantiate(halves, &err), TIDE_STATE);
    assert_non_null(strstr(err.message, "already has an executor"));

    float x[4 * 64];
    int32_t labels[4] = {1, 3, 5, 7};
    for (int i = 0; i < 4 * 64; i++)
        x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    struct tide_session *both[2] = {whole, halves};
    float loss[2];
    for (int k = 0; k < 2; k++) {
        check(tide_session_feed(both[k], TIDE_MODEL_IMAGES, x, sizeof(x), &err), &err);
        check(tide_session_feed(both[k], TIDE_MODEL_LABELS, labels, sizeof(labels), &err), &err);
        check(tide_session_step(both[k], NULL, &err), &err);
        check(tide_session_fetch(both[k], TIDE_MODEL_LOSS, &loss[k], sizeof(float), &err), &err);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof(float));
    const struct tide_graph *g = tide_session_graph(whole);
    uint32_t compared = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        const struct tide_node *node = &g->nodes[v];
        if (node->op != TIDE_OP_VARIABLE)
            continue;
        uint64_t n = node->outputs[0].nbytes;
        uint8_t *a = malloc(n), *c = malloc(n);
        assert_non_null(a);
        assert_non_null(c);
        check(tide_session_fetch(whole, node->name, a, n, &err), &err);
        check(tide_session_fetch(halves, node->name, c, n, &err), &err);
        if (memcmp(a, c, n) != 0)
            fail_msg("Variable %s differs after one step", node->name);
        free(a);
        free(c);
        compared++;
    }
    assert_true(compared >= 4); /* two layers' weights and biases, and Adam's state */
    tide_session_free(whole);
    tide_session_free(halves);
    free(bytes);
}

/*
 * A job's math: under TIDE_MATH_TF32 every MatMul of the trained graph, the
 * forward ones and those autodiff made, carries "tf32"; the CPU computes
 * float32 either way, so one step gives the loss and Variables of fp32 bit
 * for bit.
 */
static void test_job_math(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes = small_mlp(&len);
    struct tide_train_options adam = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 0.01f};
    struct tide_session_options o = tide_session_options_default();
    o.train = &adam;
    o.seed = 5;
    struct tide_error err = {0};
    struct tide_session *s[2];
    check(tide_session_new(bytes, len, &o, &s[0], &err), &err);
    o.math = TIDE_MATH_TF32;
    check(tide_session_new(bytes, len, &o, &s[1], &err), &err);

    uint32_t products[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        const struct tide_graph *g = tide_session_graph(s[k]);
        for (uint32_t v = 0; v < g->n_nodes; v++) {
            if (g->nodes[v].op != TIDE_OP_MATMUL)
                continue;
            products[k]++;
            assert_int_equal(tide_node_math(&g->nodes[v]), k ? TIDE_MATH_TF32 : TIDE_MATH_FP32);
        }
    }
    assert_int_equal(products[0], products[1]);
    assert_true(products[1] >= 5); /* two layers forward, and their gradients */

    float x[4 * 64];
    int32_t labels[4] = {0, 2, 4, 6};
    for (int i = 0; i < 4 * 64; i++)
        x[i] = (float)((i * 13) % 7) / 7.0f - 0.5f;
    float loss[2];
    for (int k = 0; k < 2; k++) {
        check(tide_session_feed(s[k], TIDE_MODEL_IMAGES, x, sizeof(x), &err), &err);
        check(tide_session_feed(s[k], TIDE_MODEL_LABELS, labels, sizeof(labels), &err), &err);
        check(tide_session_step(s[k], NULL, &err), &err);
        check(tide_session_step(s[k], NULL, &err), &err);
        check(tide_session_fetch(s[k], TIDE_MODEL_LOSS, &loss[k], sizeof(float), &err), &err);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof(float));
    tide_session_free(s[0]);
    tide_session_free(s[1]);
    free(bytes);
}

static bool cancel_after(void *context)
{
    int *polls_left = context;
    return (*polls_left)-- <= 0;
}

/*
 * The cancellation hook stops creation between passes with TIDE_CANCELLED
 * and no session, whichever pass it stops before; never polled: the plan
 * completes as usual.
 */
static void test_cancel_between_passes(void **state)
{
    (void)state;
    size_t len;
    uint8_t *bytes = small_mlp(&len);
    struct tide_train_options sgd = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.1f};
    struct tide_memory_policy policy = tide_memory_policy_default();
    struct tide_session_options o = tide_session_options_default();
    o.train = &sgd;
    o.memory = &policy;
    o.cancelled = cancel_after;
    struct tide_error err = {0};
    int polls = 0;
    /* Creation polls before each of its four passes; cancel before each in turn. */
    for (int allowed = 0; allowed < 4; allowed++) {
        struct tide_session *s = (struct tide_session *)&polls; /* overwritten with NULL */
        int polls_left = allowed;
        o.cancel_context = &polls_left;
        assert_int_equal(tide_session_new(bytes, len, &o, &s, &err), TIDE_CANCELLED);
        assert_null(s);
        assert_non_null(strstr(err.message, "cancelled before"));
        tide_error_clear(&err);
    }
    int polls_left = 4; /* every poll answered "go on" */
    o.cancel_context = &polls_left;
    struct tide_session *s;
    check(tide_session_new(bytes, len, &o, &s, &err), &err);
    assert_int_equal(polls_left, 0);
    tide_session_free(s);
    free(bytes);
}

/*
 * tide_session_plan reports whether or not the plan fits: under a budget
 * too small it returns TIDE_DOES_NOT_FIT with the session still handed out,
 * its report not fitting with the smallest budget that fits, the node that
 * sets it (a node of the planned graph) and the planner's message, which is
 * also err's; and with that smallest budget the same call fits. tide_session_new
 * under the small budget is refused with the same message and no session.
 */
static void test_plan_reports_when_not_fitting(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    const int64_t hidden[1] = {256};
    uint8_t *bytes = NULL;
    size_t len;
    if (tide_model_mlp(b, 32, 256, hidden, 1, 10).id < 0 ||
        tide_builder_serialize(b, &bytes, &len))
        fail_msg("mlp: %s", tide_builder_error(b));
    tide_builder_free(b);
    struct tide_train_options adam = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 0.01f};
    struct tide_memory_policy policy = tide_memory_policy_default();
    struct tide_session_options o = tide_session_options_default();
    o.train = &adam;
    o.memory = &policy;
    o.budget_bytes = 4096;
    struct tide_error err = {0};
    struct tide_session *s = NULL;
    assert_int_equal(tide_session_plan(bytes, len, &o, &s, &err), TIDE_DOES_NOT_FIT);
    assert_non_null(s);
    assert_null(tide_session_memplan(s));
    const struct tide_plan_report *r = tide_session_plan_report(s);
    assert_non_null(r);
    assert_false(r->fits);
    assert_int_equal(r->budget_bytes, 4096);
    assert_true(r->min_budget_bytes > 4096);
    assert_true(r->min_budget_node < tide_session_graph(s)->n_nodes);
    assert_true(r->message[0] != '\0');
    assert_int_equal(strncmp(r->message, err.message, strlen(r->message)), 0);
    char message[sizeof(err.message)];
    memcpy(message, err.message, sizeof(message));
    uint64_t min_budget = r->min_budget_bytes;
    float x[32 * 256];
    memset(x, 0, sizeof(x));
    assert_int_equal(tide_session_feed(s, TIDE_MODEL_IMAGES, x, sizeof(x), &err), TIDE_STATE);
    tide_session_free(s);

    struct tide_error refused = {0};
    s = (struct tide_session *)&refused; /* overwritten with NULL */
    assert_int_equal(tide_session_new(bytes, len, &o, &s, &refused), TIDE_DOES_NOT_FIT);
    assert_null(s);
    assert_string_equal(refused.message, message);

    o.budget_bytes = min_budget;
    check(tide_session_plan(bytes, len, &o, &s, &err), &err);
    assert_non_null(s);
    assert_true(tide_session_plan_report(s)->fits);
    assert_non_null(tide_session_memplan(s));
    assert_true(tide_session_memplan(s)->peak_bytes <= min_budget);
    tide_session_free(s);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_learns_fashion_mnist),
        cmocka_unit_test(test_deterministic_across_runs_and_threads),
        cmocka_unit_test(test_mlp_learns_synthetic),
        cmocka_unit_test(test_plan_only),
        cmocka_unit_test(test_job_math),
        cmocka_unit_test(test_instantiate_matches_new),
        cmocka_unit_test(test_cancel_between_passes),
        cmocka_unit_test(test_plan_reports_when_not_fitting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
