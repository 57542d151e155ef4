/* SPDX-License-Identifier: MIT */
/*
 * test_executor.c: the executor on the CPU backend, with the real kernels.
 *
 * A small MLP (MatMul, BiasAdd, Relu, Tanh, SoftmaxCrossEntropy, ReduceMean)
 * is built with the IR API, inferred, ordered, annotated as the session
 * does (Placeholders on the h2d stream, the rest on compute), planned and
 * run. The results are checked against a naive double-precision forward pass
 * over the Variables' values read back from the device; the accounting
 * against the plan's peak; poison mode against plain mode, bit for bit; and
 * the failure paths (budget, missing feed, kernel error, planner bug).
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

#include <time.h>

#include "graph/graph.h"
#include "memplan/memplan.h"
#include "runtime/backend.h"
#include "runtime/cpu/backend_cpu.h"
#include "runtime/executor.h"
#include "float_assert.h"

#define BATCH   4
#define IN      3
#define HIDDEN  5
#define CLASSES 2

/* ============================================================================
 * The MLP and its harness
 * ========================================================================== */

struct mlp {
    struct tide_graph *graph;
    struct tide_memplan plan;
    struct tide_backend *backend;
    struct tide_executor *ex;
    uint32_t x, labels, w1, b1, w2, w3;
    uint32_t relu, logits, xent, loss;
};

static void check(enum tide_status st, const struct tide_error *err)
{
    if (st != TIDE_OK)
        fail_msg("%s: %s", tide_status_name(st), err->message);
}

static uint32_t node(struct tide_graph *g, enum tide_op op, const char *name, uint32_t n_inputs,
                     const uint32_t *inputs)
{
    uint32_t id;
    struct tide_error err = {0};
    check(tide_graph_add_node(g, op, name, &id, &err), &err);
    struct tide_edge edges[4];
    for (uint32_t i = 0; i < n_inputs; i++)
        edges[i] = (struct tide_edge){inputs[i], 0};
    check(tide_graph_set_inputs(g, id, edges, n_inputs, &err), &err);
    return id;
}

static uint32_t variable(struct tide_graph *g, const char *name, int32_t rank, int64_t d0,
                         int64_t d1, const char *init)
{
    uint32_t id = node(g, TIDE_OP_VARIABLE, name, 0, NULL);
    int64_t dims[2] = {d0, d1};
    struct tide_shape shape = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_VARIABLE_shape, &shape);
    assert_int_equal(tide_attr_set_string(g, id, TIDE_ATTR_VARIABLE_init, init), TIDE_OK);
    return id;
}

static uint32_t placeholder(struct tide_graph *g, const char *name, enum tide_dtype dtype,
                            int32_t rank, int64_t d0, int64_t d1)
{
    uint32_t id = node(g, TIDE_OP_PLACEHOLDER, name, 0, NULL);
    int64_t dims[2] = {d0, d1};
    struct tide_shape shape = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, dtype);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &shape);
    return id;
}

/* Builds, infers and annotates the MLP; returns the graph in m. */
static void mlp_graph(struct mlp *m)
{
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    m->graph = g;
    m->x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, BATCH, IN);
    m->w1 = variable(g, "w1", 2, IN, HIDDEN, "glorot_uniform");
    m->b1 = variable(g, "b1", 1, HIDDEN, 0, "normal");
    tide_attr_set_float(g, m->b1, TIDE_ATTR_VARIABLE_scale, 0.5);
    uint32_t mm1 = node(g, TIDE_OP_MATMUL, "mm1", 2, (uint32_t[]){m->x, m->w1});
    uint32_t h1 = node(g, TIDE_OP_BIAS_ADD, "h1", 2, (uint32_t[]){mm1, m->b1});
    m->relu = node(g, TIDE_OP_RELU, "relu1", 1, &h1);
    m->w2 = variable(g, "w2", 2, HIDDEN, HIDDEN, "glorot_uniform");
    uint32_t mm2 = node(g, TIDE_OP_MATMUL, "mm2", 2, (uint32_t[]){m->relu, m->w2});
    uint32_t t2 = node(g, TIDE_OP_TANH, "tanh2", 1, &mm2);
    m->w3 = variable(g, "w3", 2, HIDDEN, CLASSES, "glorot_uniform");
    m->logits = node(g, TIDE_OP_MATMUL, "logits", 2, (uint32_t[]){t2, m->w3});
    m->labels = placeholder(g, "labels", TIDE_DTYPE_INT32, 1, BATCH, 0);
    m->xent = node(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", 2, (uint32_t[]){m->logits, m->labels});
    m->loss = node(g, TIDE_OP_REDUCE_MEAN, "loss", 1, &m->xent);
    struct tide_error err = {0};
    check(tide_graph_infer(g, NULL, &err), &err);
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        g->nodes[v].stream =
            g->nodes[v].op == TIDE_OP_PLACEHOLDER ? TIDE_STREAM_H2D : TIDE_STREAM_COMPUTE;
        for (uint32_t k = 0; k < g->nodes[v].n_outputs; k++)
            g->nodes[v].outputs[k].home = TIDE_HOME_DEVICE;
    }
}

static uint64_t workspace(void *ctx, const struct tide_graph *graph, const struct tide_node *n)
{
    return tide_backend_workspace_bytes(ctx, graph, n);
}

/* Orders and plans the graph, pinning logits and loss; creates the backend. */
static void mlp_plan(struct mlp *m)
{
    struct tide_error err = {0};
    struct tide_graph *g = m->graph;
    check(tide_backend_cpu_new(NULL, &m->backend, &err), &err);
    uint32_t *order = malloc(g->n_nodes * sizeof(*order));
    check(tide_graph_dfs_order(g, order, &err), &err);
    uint8_t *pinned = calloc(g->n_nodes, 1);
    pinned[m->logits] = pinned[m->loss] = 1;
    struct tide_memplan_options opt = {
        .workspace_bytes = workspace, .workspace_ctx = m->backend, .pinned = pinned};
    check(tide_memplan_build(g, order, g->n_nodes, &opt, &m->plan, &err), &err);
    free(order);
    free(pinned);
}

static void mlp_new(struct mlp *m, bool poison, uint64_t budget)
{
    memset(m, 0, sizeof(*m));
    mlp_graph(m);
    mlp_plan(m);
    struct tide_executor_options o = {
        .budget_bytes = budget ? budget : m->plan.peak_bytes, .seed = 42, .poison = poison};
    struct tide_error err = {0};
    check(tide_executor_new(m->graph, &m->plan, m->backend, &o, &m->ex, &err), &err);
}

static void mlp_free(struct mlp *m)
{
    tide_executor_free(m->ex);
    tide_memplan_release(&m->plan);
    tide_backend_free(m->backend);
    tide_graph_free(m->graph);
}

/* Deterministic inputs for step s. */
static void batch(int s, float *x, int32_t *labels)
{
    for (int i = 0; i < BATCH * IN; i++)
        x[i] = (float)sin(0.7 * i + 1.3 * s) * 2.0f;
    for (int i = 0; i < BATCH; i++)
        labels[i] = (i + s) % CLASSES;
}

static void feed(struct mlp *m, const float *x, const int32_t *labels)
{
    struct tide_error err = {0};
    check(tide_executor_feed(m->ex, m->x, x, BATCH * IN * sizeof(float), &err), &err);
    check(tide_executor_feed(m->ex, m->labels, labels, BATCH * sizeof(int32_t), &err), &err);
}

static void read_var(struct mlp *m, uint32_t id, float *dst, size_t n)
{
    struct tide_error err = {0};
    check(tide_executor_read(m->ex, (struct tide_edge){id, 0}, dst, n * sizeof(float), &err), &err);
}

/* The forward pass in double precision, from the device's variable values. */
static void reference(struct mlp *m, const float *x, const int32_t *labels, double *logits,
                      double *loss)
{
    float w1[IN * HIDDEN], b1[HIDDEN], w2[HIDDEN * HIDDEN], w3[HIDDEN * CLASSES];
    read_var(m, m->w1, w1, IN * HIDDEN);
    read_var(m, m->b1, b1, HIDDEN);
    read_var(m, m->w2, w2, HIDDEN * HIDDEN);
    read_var(m, m->w3, w3, HIDDEN * CLASSES);
    *loss = 0;
    for (int n = 0; n < BATCH; n++) {
        double h[HIDDEN], t[HIDDEN];
        for (int j = 0; j < HIDDEN; j++) {
            double a = b1[j];
            for (int i = 0; i < IN; i++)
                a += (double)x[n * IN + i] * w1[i * HIDDEN + j];
            h[j] = a > 0 ? a : 0;
        }
        for (int j = 0; j < HIDDEN; j++) {
            double a = 0;
            for (int i = 0; i < HIDDEN; i++)
                a += h[i] * w2[i * HIDDEN + j];
            t[j] = tanh(a);
        }
        double max = -INFINITY;
        for (int c = 0; c < CLASSES; c++) {
            double a = 0;
            for (int i = 0; i < HIDDEN; i++)
                a += t[i] * w3[i * CLASSES + c];
            logits[n * CLASSES + c] = a;
            if (a > max)
                max = a;
        }
        double sum = 0;
        for (int c = 0; c < CLASSES; c++)
            sum += exp(logits[n * CLASSES + c] - max);
        *loss += max + log(sum) - logits[n * CLASSES + labels[n]];
    }
    *loss /= BATCH;
}

/* ============================================================================
 * Tests
 * ========================================================================== */

static void test_mlp_matches_reference(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, false, 0);
    struct tide_error err = {0};
    /* The variables are initialised, and not all zero. */
    float w1[IN * HIDDEN];
    read_var(&m, m.w1, w1, IN * HIDDEN);
    double norm = 0;
    for (int i = 0; i < IN * HIDDEN; i++)
        norm += fabs(w1[i]);
    assert_true(norm > 0.1);

    for (int s = 1; s <= 3; s++) {
        float x[BATCH * IN];
        int32_t labels[BATCH];
        batch(s, x, labels);
        feed(&m, x, labels);
        struct tide_step_stats stats;
        check(tide_executor_step(m.ex, &stats, &err), &err);
        assert_int_equal(stats.step, s);
        assert_int_equal(tide_executor_steps(m.ex), s);
        /* The measured high-water mark is the plan's prediction, exactly. */
        assert_int_equal(stats.high_water_bytes, m.plan.peak_bytes);
        assert_int_equal(stats.h2d_bytes, BATCH * IN * sizeof(float) + BATCH * sizeof(int32_t));
        assert_null(stats.node_ms);
        assert_true(stats.step_ms >= 0);

        float logits[BATCH * CLASSES], loss;
        check(
            tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits, sizeof(logits), &err),
            &err);
        check(tide_executor_read(m.ex, (struct tide_edge){m.loss, 0}, &loss, sizeof(loss), &err),
              &err);
        double want_logits[BATCH * CLASSES], want_loss;
        reference(&m, x, labels, want_logits, &want_loss);
        for (int i = 0; i < BATCH * CLASSES; i++)
            assert_float_equal(logits[i], want_logits[i], 1e-5);
        assert_float_equal(loss, want_loss, 1e-5);
        assert_true(loss > 0);
    }
    mlp_free(&m);
}

/* Poisoning dead regions changes nothing: no kernel reads a region after it died. */
static void test_poison_identical(void **state)
{
    (void)state;
    float out[2][3][BATCH * CLASSES + 1];
    for (int poison = 0; poison < 2; poison++) {
        struct mlp m;
        mlp_new(&m, poison, 0);
        struct tide_error err = {0};
        for (int s = 0; s < 3; s++) {
            float x[BATCH * IN];
            int32_t labels[BATCH];
            batch(s, x, labels);
            feed(&m, x, labels);
            struct tide_step_stats stats;
            check(tide_executor_step(m.ex, &stats, &err), &err);
            assert_int_equal(stats.high_water_bytes, m.plan.peak_bytes);
            check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, out[poison][s],
                                     BATCH * CLASSES * sizeof(float), &err),
                  &err);
            check(tide_executor_read(m.ex, (struct tide_edge){m.loss, 0},
                                     &out[poison][s][BATCH * CLASSES], sizeof(float), &err),
                  &err);
            for (int i = 0; i <= BATCH * CLASSES; i++)
                assert_false(isnan(out[poison][s][i]));
        }
        mlp_free(&m);
    }
    assert_memory_equal(out[0], out[1], sizeof(out[0]));
}

/* A region that is read after it died reads poison in poison mode. */
static void test_poison_catches_read_after_free(void **state)
{
    (void)state;
    struct mlp m;
    memset(&m, 0, sizeof(m));
    mlp_graph(&m);
    mlp_plan(&m);
    /*
     * Plant a planner bug: make relu1's region die right after it is produced,
     * although mm2 reads it later. Only the death list changes: offsets stay
     * disjoint, so the accounting sees nothing, and only poison can tell.
     */
    uint32_t r = 0;
    while (m.plan.regions[r].node != m.relu || m.plan.regions[r].output != 0)
        r++;
    uint32_t born = m.plan.regions[r].first, died = m.plan.regions[r].last;
    assert_true(died > born);
    uint32_t *deaths = m.plan.deaths, *offsets = m.plan.death_offsets;
    uint32_t at = offsets[died];
    while (deaths[at] != r)
        at++;
    /* Move the entry from died's list to born's list, shifting the ones between. */
    memmove(&deaths[offsets[born + 1] + 1], &deaths[offsets[born + 1]],
            (at - offsets[born + 1]) * sizeof(*deaths));
    deaths[offsets[born + 1]] = r;
    for (uint32_t p = born + 1; p <= died; p++)
        offsets[p]++;

    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(0, x, labels);
    float logits[BATCH * CLASSES];
    struct tide_error err = {0};
    struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes, .poison = true};
    check(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &err), &err);
    feed(&m, x, labels);
    check(tide_executor_step(m.ex, NULL, &err), &err);
    check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits, sizeof(logits), &err),
          &err);
    bool any_nan = false;
    for (int i = 0; i < BATCH * CLASSES; i++)
        any_nan |= isnan(logits[i]);
    assert_true(any_nan);
    mlp_free(&m);
}

static void test_budget_below_peak(void **state)
{
    (void)state;
    struct mlp m;
    memset(&m, 0, sizeof(m));
    mlp_graph(&m);
    mlp_plan(&m);
    struct tide_error err = {0};
    struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes - 1};
    assert_int_equal(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &err),
                     TIDE_DOES_NOT_FIT);
    assert_null(m.ex);
    char want[64];
    snprintf(want, sizeof(want), "%llu", (unsigned long long)m.plan.peak_bytes);
    assert_non_null(strstr(err.message, want));
    snprintf(want, sizeof(want), "%llu", (unsigned long long)m.plan.peak_bytes - 1);
    assert_non_null(strstr(err.message, want));
    /* A larger budget is fine: the arena is the budget, the plan uses its peak. */
    o.budget_bytes = m.plan.peak_bytes + 4096;
    check(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &err), &err);
    mlp_free(&m);
}

static void test_missing_and_bad_feeds(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, false, 0);
    struct tide_error err = {0};
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(0, x, labels);
    check(tide_executor_feed(m.ex, m.x, x, sizeof(x), &err), &err);
    assert_int_equal(tide_executor_step(m.ex, NULL, &err), TIDE_STATE);
    assert_non_null(strstr(err.message, "\"labels\""));
    assert_int_equal(tide_executor_steps(m.ex), 0);

    /* Wrong size: both numbers and the shape. */
    assert_int_equal(tide_executor_feed(m.ex, m.x, x, sizeof(x) - 4, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "44"));
    assert_non_null(strstr(err.message, "48"));
    assert_non_null(strstr(err.message, "[4, 3]"));
    /* Not a placeholder. */
    assert_int_equal(tide_executor_feed(m.ex, m.w1, x, sizeof(x), &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"w1\""));

    check(tide_executor_feed(m.ex, m.labels, labels, sizeof(labels), &err), &err);
    check(tide_executor_step(m.ex, NULL, &err), &err);
    assert_int_equal(tide_executor_steps(m.ex), 1);
    mlp_free(&m);
}

/* A failing kernel fails its step, naming the node; the next step runs normally. */
static void test_kernel_error_then_recovery(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, true, 0);
    struct tide_error err = {0};
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(1, x, labels);
    labels[2] = 7; /* only 2 classes */
    feed(&m, x, labels);
    assert_int_not_equal(tide_executor_step(m.ex, NULL, &err), TIDE_OK);
    assert_non_null(strstr(err.message, "step 1"));
    assert_non_null(strstr(err.message, "\"xent\""));

    batch(1, x, labels);
    feed(&m, x, labels);
    struct tide_step_stats stats;
    check(tide_executor_step(m.ex, &stats, &err), &err);
    assert_int_equal(stats.step, 2);
    assert_int_equal(stats.high_water_bytes, m.plan.peak_bytes);
    float loss;
    check(tide_executor_read(m.ex, (struct tide_edge){m.loss, 0}, &loss, sizeof(loss), &err), &err);
    double want_logits[BATCH * CLASSES], want_loss;
    reference(&m, x, labels, want_logits, &want_loss);
    assert_float_equal(loss, want_loss, 1e-5);
    mlp_free(&m);
}

static void test_read_rules(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, false, 0);
    struct tide_error err = {0};
    float buf[BATCH * HIDDEN];
    /* A pinned output before any step: nothing to read yet. */
    assert_int_equal(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, buf,
                                        BATCH * CLASSES * sizeof(float), &err),
                     TIDE_STATE);
    assert_non_null(strstr(err.message, "\"logits\""));
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(0, x, labels);
    feed(&m, x, labels);
    check(tide_executor_step(m.ex, NULL, &err), &err);
    /* An intermediate is not kept. */
    assert_int_equal(
        tide_executor_read(m.ex, (struct tide_edge){m.relu, 0}, buf, sizeof(buf), &err),
        TIDE_STATE);
    assert_non_null(strstr(err.message, "\"relu1\""));
    /* Wrong size. */
    assert_int_equal(tide_executor_read(m.ex, (struct tide_edge){m.loss, 0}, buf, 8, &err),
                     TIDE_INVALID);
    mlp_free(&m);
}

static void test_write_variable(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, false, 0);
    struct tide_error err = {0};
    float w3[HIDDEN * CLASSES], back[HIDDEN * CLASSES];
    for (int i = 0; i < HIDDEN * CLASSES; i++)
        w3[i] = 0.25f * (float)i - 1.0f;
    check(tide_executor_write_variable(m.ex, m.w3, w3, sizeof(w3), &err), &err);
    read_var(&m, m.w3, back, HIDDEN * CLASSES);
    assert_memory_equal(w3, back, sizeof(w3));
    assert_int_equal(tide_executor_write_variable(m.ex, m.x, w3, sizeof(w3), &err), TIDE_INVALID);
    assert_int_equal(tide_executor_write_variable(m.ex, m.w3, w3, 4, &err), TIDE_INVALID);

    /* The written value is what the next step computes with. */
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(2, x, labels);
    feed(&m, x, labels);
    check(tide_executor_step(m.ex, NULL, &err), &err);
    float logits[BATCH * CLASSES];
    check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits, sizeof(logits), &err),
          &err);
    double want_logits[BATCH * CLASSES], want_loss;
    reference(&m, x, labels, want_logits, &want_loss);
    for (int i = 0; i < BATCH * CLASSES; i++)
        assert_float_equal(logits[i], want_logits[i], 1e-5);
    mlp_free(&m);
}

/* set_step continues the count: the next step is one past it, as after a resume. */
static void test_set_step(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, false, 0);
    struct tide_error err = {0};
    check(tide_executor_set_step(m.ex, 5, &err), &err);
    assert_int_equal(tide_executor_steps(m.ex), 5);
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(4, x, labels);
    feed(&m, x, labels);
    struct tide_step_stats stats;
    check(tide_executor_step(m.ex, &stats, &err), &err);
    assert_int_equal(stats.step, 6);
    assert_int_equal(tide_executor_steps(m.ex), 6);
    /* A count with no next step is refused and changes nothing. */
    assert_int_equal(tide_executor_set_step(m.ex, UINT64_MAX, &err), TIDE_INVALID);
    assert_int_equal(tide_executor_steps(m.ex), 6);
    mlp_free(&m);
}

/* A masked step runs the ancestors of logits only: no labels needed, no step counted. */
static void test_masked_step(void **state)
{
    (void)state;
    struct mlp m;
    mlp_new(&m, true, 0);
    struct tide_error err = {0};
    uint8_t *mask = calloc(m.graph->n_nodes, 1);
    const char *names[] = {"x", "mm1", "h1", "relu1", "mm2", "tanh2", "logits"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        mask[tide_graph_find(m.graph, names[i])] = 1;
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(3, x, labels);
    check(tide_executor_feed(m.ex, m.x, x, sizeof(x), &err), &err);
    struct tide_step_stats stats;
    check(tide_executor_step_masked(m.ex, mask, &stats, &err), &err);
    assert_int_equal(stats.step, 0);
    assert_int_equal(tide_executor_steps(m.ex), 0);
    assert_true(stats.high_water_bytes <= m.plan.peak_bytes);
    float logits[BATCH * CLASSES];
    check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits, sizeof(logits), &err),
          &err);
    double want_logits[BATCH * CLASSES], want_loss;
    reference(&m, x, labels, want_logits, &want_loss);
    for (int i = 0; i < BATCH * CLASSES; i++)
        assert_float_equal(logits[i], want_logits[i], 1e-5);

    /* A mask that is not closed under inputs is refused, naming both nodes. */
    mask[tide_graph_find(m.graph, "mm1")] = 0;
    assert_int_equal(tide_executor_step_masked(m.ex, mask, NULL, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"h1\""));
    assert_non_null(strstr(err.message, "\"mm1\""));
    free(mask);
    mlp_free(&m);
}

/* Two live regions that overlap are a planner bug: the step fails naming both. */
static void test_planner_bug_detected(void **state)
{
    (void)state;
    struct mlp m;
    memset(&m, 0, sizeof(m));
    mlp_graph(&m);
    mlp_plan(&m);
    /* Move relu1's output onto its input h1's region: both are alive at relu1. */
    uint32_t h1 = tide_graph_find(m.graph, "h1");
    struct tide_memplan_region *rr = NULL, *rh = NULL;
    for (uint32_t r = 0; r < m.plan.n_regions; r++) {
        if (m.plan.regions[r].node == m.relu && m.plan.regions[r].output == 0)
            rr = &m.plan.regions[r];
        if (m.plan.regions[r].node == h1 && m.plan.regions[r].output == 0)
            rh = &m.plan.regions[r];
    }
    assert_non_null(rr);
    assert_non_null(rh);
    rr->offset = rh->offset;
    rr->inplace_of = TIDE_MEMPLAN_NO_REGION; /* not taking h1 over: both alive, overlapping */
    m.graph->nodes[m.relu].outputs[0].offset = rh->offset;
    struct tide_error err = {0};
    struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes};
    check(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &err), &err);
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(0, x, labels);
    feed(&m, x, labels);
    assert_int_equal(tide_executor_step(m.ex, NULL, &err), TIDE_INTERNAL);
    assert_non_null(strstr(err.message, "\"relu1\""));
    assert_non_null(strstr(err.message, "\"h1\""));
    mlp_free(&m);
}

/* Profiling fills per-node times for the nodes that ran. */
static void test_profile(void **state)
{
    (void)state;
    struct mlp m;
    memset(&m, 0, sizeof(m));
    mlp_graph(&m);
    mlp_plan(&m);
    struct tide_error err = {0};
    struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes, .profile = true};
    check(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &err), &err);
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(0, x, labels);
    feed(&m, x, labels);
    struct tide_step_stats stats;
    check(tide_executor_step(m.ex, &stats, &err), &err);
    assert_non_null(stats.node_ms);
    for (uint32_t v = 0; v < m.graph->n_nodes; v++)
        assert_true(stats.node_ms[v] >= 0);
    mlp_free(&m);
}

/* ============================================================================
 * Memory ops
 * ========================================================================== */

/* Like assert_float_equal, but a NaN fails (cmocka's passes it: NaN compares false). */
#define assert_close(a, b, tolerance)                                                              \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tolerance)))                                                       \
            fail_msg("%s is %.9g, want %.9g", #a, a_, b_);                                         \
    } while (0)

/* Appends a memory op reading edge in, shaped like it, on a stream, with a home. */
static uint32_t memory_op(struct tide_graph *g, enum tide_op op, const char *name,
                          struct tide_edge in, uint8_t stream, uint8_t home, uint32_t subject)
{
    uint32_t id;
    struct tide_error err = {0};
    check(tide_graph_add_node(g, op, name, &id, &err), &err);
    check(tide_graph_set_inputs(g, id, &in, 1, &err), &err);
    struct tide_node *n = &g->nodes[id];
    const struct tide_output *src = &g->nodes[in.node].outputs[in.output];
    for (uint32_t k = 0; k < n->n_outputs; k++) {
        n->outputs[k].dtype = src->dtype;
        n->outputs[k].shape = src->shape;
        n->outputs[k].nbytes = src->nbytes;
        n->outputs[k].home = home;
    }
    n->stream = stream;
    n->subject = subject;
    return id;
}

/* Makes every data input of the nodes before `before` that reads from read to instead. */
static void rewire(struct tide_graph *g, uint32_t before, uint32_t from, uint32_t to)
{
    for (uint32_t v = 0; v < before; v++) {
        for (uint32_t i = 0; i < g->nodes[v].n_inputs; i++) {
            if (g->nodes[v].inputs[i].node == from)
                g->nodes[v].inputs[i] = (struct tide_edge){to, 0};
        }
    }
}

/*
 * The MLP as the memory passes would leave it: every Variable homed on the
 * host and read through a Fetch on the h2d stream, and relu1 swapped out on
 * d2h and back in on h2d before mm2 reads it.
 */
static void mlp_memory_graph(struct mlp *m)
{
    mlp_graph(m);
    struct tide_graph *g = m->graph;
    uint32_t vars[4] = {m->w1, m->b1, m->w2, m->w3};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof(name), "fetch/%s", g->nodes[vars[i]].name);
        g->nodes[vars[i]].outputs[0].home = TIDE_HOME_HOST;
        uint32_t f = memory_op(g, TIDE_OP_FETCH, name, (struct tide_edge){vars[i], 0},
                               TIDE_STREAM_H2D, TIDE_HOME_DEVICE, vars[i]);
        rewire(g, f, vars[i], f);
    }
    uint32_t so = memory_op(g, TIDE_OP_SWAP_OUT, "swap_out/relu1", (struct tide_edge){m->relu, 0},
                            TIDE_STREAM_D2H, TIDE_HOME_HOST, m->relu);
    uint32_t si = memory_op(g, TIDE_OP_SWAP_IN, "swap_in/relu1", (struct tide_edge){so, 0},
                            TIDE_STREAM_H2D, TIDE_HOME_DEVICE, m->relu);
    rewire(g, so, m->relu, si);
    /* No tide_graph_infer from here on: it would reset the homes. */
}

static void mlp_memory_new(struct mlp *m, bool poison, bool profile)
{
    memset(m, 0, sizeof(*m));
    mlp_memory_graph(m);
    mlp_plan(m);
    struct tide_executor_options o = {
        .budget_bytes = m->plan.peak_bytes, .seed = 42, .poison = poison, .profile = profile};
    struct tide_error err = {0};
    check(tide_executor_new(m->graph, &m->plan, m->backend, &o, &m->ex, &err), &err);
}

/* Fetched Variables and a swapped feature map: the reference results, the planned copies. */
static void test_memory_ops_match_reference(void **state)
{
    (void)state;
    float out[2][3][BATCH * CLASSES + 1];
    for (int poison = 0; poison < 2; poison++) {
        struct mlp m;
        mlp_memory_new(&m, poison, false);
        /* Host homes take no arena space: only feature maps, fetched copies and pins. */
        for (uint32_t r = 0; r < m.plan.n_regions; r++)
            assert_int_not_equal(m.graph->nodes[m.plan.regions[r].node].op, TIDE_OP_VARIABLE);
        struct tide_error err = {0};
        for (int s = 0; s < 3; s++) {
            float x[BATCH * IN];
            int32_t labels[BATCH];
            batch(s, x, labels);
            feed(&m, x, labels);
            struct tide_step_stats stats;
            check(tide_executor_step(m.ex, &stats, &err), &err);
            assert_int_equal(stats.high_water_bytes, m.plan.peak_bytes);
            uint64_t weights = (IN * HIDDEN + HIDDEN + HIDDEN * HIDDEN + HIDDEN * CLASSES) * 4;
            uint64_t relu = BATCH * HIDDEN * 4;
            assert_int_equal(stats.h2d_bytes, sizeof(x) + sizeof(labels) + weights + relu);
            assert_int_equal(stats.d2h_bytes, relu);
            float *logits = out[poison][s];
            check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits,
                                     BATCH * CLASSES * sizeof(float), &err),
                  &err);
            check(tide_executor_read(m.ex, (struct tide_edge){m.loss, 0}, &logits[BATCH * CLASSES],
                                     sizeof(float), &err),
                  &err);
            double want_logits[BATCH * CLASSES], want_loss;
            reference(&m, x, labels, want_logits, &want_loss);
            for (int i = 0; i < BATCH * CLASSES; i++)
                assert_close(logits[i], want_logits[i], 1e-5);
            assert_close(logits[BATCH * CLASSES], want_loss, 1e-5);
        }
        mlp_free(&m);
    }
    assert_memory_equal(out[0], out[1], sizeof(out[0]));
}

/* Host-homed Variables are read and written in their homes, and a step fetches the new value. */
static void test_memory_ops_host_variables(void **state)
{
    (void)state;
    struct mlp m;
    mlp_memory_new(&m, true, false);
    struct tide_error err = {0};
    float w3[HIDDEN * CLASSES], back[HIDDEN * CLASSES];
    for (int i = 0; i < HIDDEN * CLASSES; i++)
        w3[i] = 0.125f * (float)i - 0.5f;
    check(tide_executor_write_variable(m.ex, m.w3, w3, sizeof(w3), &err), &err);
    read_var(&m, m.w3, back, HIDDEN * CLASSES);
    assert_memory_equal(w3, back, sizeof(w3));
    /* A swapped-out copy is not kept: it cannot be read. */
    uint32_t so = tide_graph_find(m.graph, "swap_out/relu1");
    float relu[BATCH * HIDDEN];
    assert_int_equal(tide_executor_read(m.ex, (struct tide_edge){so, 0}, relu, sizeof(relu), &err),
                     TIDE_STATE);

    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(4, x, labels);
    feed(&m, x, labels);
    check(tide_executor_step(m.ex, NULL, &err), &err);
    float logits[BATCH * CLASSES];
    check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits, sizeof(logits), &err),
          &err);
    double want_logits[BATCH * CLASSES], want_loss;
    reference(&m, x, labels, want_logits, &want_loss);
    for (int i = 0; i < BATCH * CLASSES; i++)
        assert_close(logits[i], want_logits[i], 1e-5);

    /* A masked step (the forward pass to the logits) runs its Fetches and swaps too. */
    uint8_t *mask = calloc(m.graph->n_nodes, 1);
    const char *names[] = {"x",
                           "mm1",
                           "h1",
                           "relu1",
                           "mm2",
                           "tanh2",
                           "logits",
                           "fetch/w1",
                           "fetch/b1",
                           "fetch/w2",
                           "fetch/w3",
                           "swap_out/relu1",
                           "swap_in/relu1"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        mask[tide_graph_find(m.graph, names[i])] = 1;
    batch(5, x, labels);
    check(tide_executor_feed(m.ex, m.x, x, sizeof(x), &err), &err);
    struct tide_step_stats stats;
    check(tide_executor_step_masked(m.ex, mask, &stats, &err), &err);
    assert_int_equal(stats.d2h_bytes, BATCH * HIDDEN * 4);
    check(tide_executor_read(m.ex, (struct tide_edge){m.logits, 0}, logits, sizeof(logits), &err),
          &err);
    reference(&m, x, labels, want_logits, &want_loss);
    for (int i = 0; i < BATCH * CLASSES; i++)
        assert_close(logits[i], want_logits[i], 1e-5);
    free(mask);
    mlp_free(&m);
}

/*
 * A value written in pieces (a streamed Variable) lands where each piece
 * says, on the device (the plain MLP) and in its host home (the memory
 * passes' MLP), and reads back in pieces; a piece past the end is refused
 * and writes nothing.
 */
static void test_write_variable_range(void **state)
{
    (void)state;
    for (int host = 0; host < 2; host++) {
        struct mlp m;
        if (host) {
            memset(&m, 0, sizeof(m));
            mlp_memory_graph(&m);
            mlp_plan(&m);
            struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes, .seed = 42};
            struct tide_error e = {0};
            check(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &e), &e);
        } else {
            mlp_new(&m, false, 0);
        }
        struct tide_error err = {0};
        float w3[HIDDEN * CLASSES], back[HIDDEN * CLASSES];
        for (int i = 0; i < HIDDEN * CLASSES; i++)
            w3[i] = 0.5f * (float)i + 3.0f;
        const uint64_t bytes = sizeof(w3), cut1 = 12, cut2 = bytes / 2 + 4;
        /* Out of order, as nothing but the daemon's checks asks for order. */
        check(tide_executor_write_variable_range(m.ex, m.w3, cut2, (uint8_t *)w3 + cut2,
                                                 bytes - cut2, &err),
              &err);
        check(tide_executor_write_variable_range(m.ex, m.w3, 0, w3, cut1, &err), &err);
        check(tide_executor_write_variable_range(m.ex, m.w3, cut1, (uint8_t *)w3 + cut1,
                                                 cut2 - cut1, &err),
              &err);
        check(tide_executor_write_variable_range(m.ex, m.w3, bytes, w3, 0, &err), &err);
        read_var(&m, m.w3, back, HIDDEN * CLASSES);
        assert_memory_equal(w3, back, bytes);
        /* And read back in pieces (a paged ReadVariables). */
        memset(back, 0, sizeof(back));
        struct tide_edge w3_out = {m.w3, 0};
        check(tide_executor_read_range(m.ex, w3_out, cut1, (uint8_t *)back + cut1, cut2 - cut1,
                                       &err),
              &err);
        assert_memory_equal((uint8_t *)w3 + cut1, (uint8_t *)back + cut1, cut2 - cut1);
        assert_true(back[0] == 0.0f);
        assert_int_equal(tide_executor_read_range(m.ex, w3_out, cut2, back, bytes, &err),
                         TIDE_INVALID);
        assert_int_equal(tide_executor_write_variable_range(m.ex, m.w3, bytes - 4, w3, 8, &err),
                         TIDE_INVALID);
        assert_non_null(strstr(err.message, "the Variable has"));
        assert_int_equal(tide_executor_write_variable_range(m.ex, m.w3, UINT64_MAX, w3, 8, &err),
                         TIDE_INVALID);
        assert_int_equal(tide_executor_write_variable_range(m.ex, m.x, 0, w3, 4, &err),
                         TIDE_INVALID);
        read_var(&m, m.w3, back, HIDDEN * CLASSES);
        assert_memory_equal(w3, back, bytes);
        mlp_free(&m);
    }
}

/*
 * The host arena: creation makes exactly one host allocation, of the plan's
 * host_bytes, and holds every host home, staging buffer and swap slot of the
 * plan in it; steps (full and masked) and feeds allocate no host memory.
 */
static void test_host_arena_allocated_once(void **state)
{
    (void)state;
    struct mlp m;
    memset(&m, 0, sizeof(m));
    mlp_memory_graph(&m);
    mlp_plan(&m);
    /* Homes of w1, b1, w2, w3 and the swap slot of relu1, staging of x and labels. */
    assert_int_equal(m.plan.n_host_buffers, 7);
    uint64_t homes = (IN * HIDDEN + HIDDEN + HIDDEN * HIDDEN + HIDDEN * CLASSES) * 4;
    assert_int_equal(m.plan.host_home_bytes, homes + BATCH * HIDDEN * 4);
    uint64_t bytes0, bytes1, bytes;
    uint64_t count0 = tide_backend_host_alloc_count(&bytes0);
    struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes, .seed = 42};
    struct tide_error err = {0};
    check(tide_executor_new(m.graph, &m.plan, m.backend, &o, &m.ex, &err), &err);
    uint64_t count1 = tide_backend_host_alloc_count(&bytes1);
    assert_int_equal(count1 - count0, 1);
    assert_int_equal(bytes1 - bytes0, m.plan.host_bytes);
    for (int s = 0; s < 4; s++) {
        float x[BATCH * IN];
        int32_t labels[BATCH];
        batch(s, x, labels);
        feed(&m, x, labels);
        struct tide_step_stats stats;
        check(tide_executor_step(m.ex, &stats, &err), &err);
        assert_int_equal(stats.high_water_bytes, m.plan.peak_bytes);
        assert_int_equal(tide_backend_host_alloc_count(&bytes), count1);
        assert_int_equal(bytes, bytes1);
    }
    uint8_t *mask = calloc(m.graph->n_nodes, 1);
    assert_non_null(mask);
    memset(mask, 1, m.graph->n_nodes);
    check(tide_executor_step_masked(m.ex, mask, NULL, &err), &err);
    free(mask);
    assert_int_equal(tide_backend_host_alloc_count(NULL), count1);
    mlp_free(&m);
}

/* Profiling times memory ops like kernels, and reports the compute stream's stall. */
static void test_memory_ops_profile(void **state)
{
    (void)state;
    struct mlp m;
    mlp_memory_new(&m, false, true);
    struct tide_error err = {0};
    float x[BATCH * IN];
    int32_t labels[BATCH];
    batch(0, x, labels);
    feed(&m, x, labels);
    struct tide_step_stats stats;
    check(tide_executor_step(m.ex, &stats, &err), &err);
    assert_non_null(stats.node_ms);
    assert_true(stats.stall_ms >= 0);
    assert_true(stats.node_ms[tide_graph_find(m.graph, "swap_in/relu1")] >= 0);
    mlp_free(&m);
}

/* What the executor refuses: kernels reading host memory, memory ops on the wrong tensors. */
static void test_memory_ops_refused(void **state)
{
    (void)state;
    struct tide_error err = {0};
    for (int c = 0; c < 4; c++) {
        struct mlp m;
        memset(&m, 0, sizeof(m));
        mlp_memory_graph(&m);
        struct tide_graph *g = m.graph;
        uint32_t f1 = tide_graph_find(g, "fetch/w1");
        uint32_t so = tide_graph_find(g, "swap_out/relu1");
        uint32_t si = tide_graph_find(g, "swap_in/relu1");
        const char *want = NULL;
        if (c == 0) {
            /* mm1 reads the host-homed w1 directly: a Fetch is missing. */
            g->nodes[tide_graph_find(g, "mm1")].inputs[1] = (struct tide_edge){m.w1, 0};
            want = "\"mm1\"";
        } else if (c == 1) {
            /* A Fetch of a device tensor. */
            g->nodes[f1].inputs[0] = (struct tide_edge){m.x, 0};
            want = "\"fetch/w1\"";
        } else if (c == 2) {
            /* A SwapIn of something that was not swapped out. */
            g->nodes[si].inputs[0] = (struct tide_edge){m.relu, 0};
            want = "\"swap_in/relu1\"";
        } else {
            /* A SwapOut whose output is on the device. */
            g->nodes[so].outputs[0].home = TIDE_HOME_DEVICE;
            want = "\"swap_out/relu1\"";
        }
        mlp_plan(&m);
        struct tide_executor_options o = {.budget_bytes = m.plan.peak_bytes};
        assert_int_equal(tide_executor_new(g, &m.plan, m.backend, &o, &m.ex, &err), TIDE_INVALID);
        assert_non_null(strstr(err.message, want));
        mlp_free(&m);
    }
}

/* ============================================================================
 * Orderings, with a slow kernel
 * ========================================================================== */

#define SLOW_MS 60

static struct tide_kernel_table slow_kernels;

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ApplySGD and Tanh as usual, but only after SLOW_MS. */
static enum tide_status slow_apply_sgd(const struct tide_kernel_args *args, struct tide_error *err)
{
    sleep_ms(SLOW_MS);
    return tide_cpu_kernels.fn[TIDE_OP_APPLY_SGD](args, err);
}

static enum tide_status slow_tanh(const struct tide_kernel_args *args, struct tide_error *err)
{
    sleep_ms(SLOW_MS);
    return tide_cpu_kernels.fn[TIDE_OP_TANH](args, err);
}

static struct tide_backend *slow_backend(void)
{
    slow_kernels = tide_cpu_kernels;
    slow_kernels.name = "slow";
    slow_kernels.fn[TIDE_OP_APPLY_SGD] = slow_apply_sgd;
    slow_kernels.fn[TIDE_OP_TANH] = slow_tanh;
    struct tide_backend *b;
    struct tide_error err = {0};
    check(tide__backend_cpu_new_with_kernels(NULL, &slow_kernels, &b, &err), &err);
    return b;
}

/* Plans g in id order (which the tests below build topologically) and runs one step. */
static struct tide_executor *run_in_id_order(struct tide_graph *g, struct tide_backend *b,
                                             struct tide_memplan *plan, const uint8_t *pinned,
                                             bool poison)
{
    uint32_t order[16];
    for (uint32_t v = 0; v < g->n_nodes; v++)
        order[v] = v;
    struct tide_error err = {0};
    struct tide_memplan_options mo = {.pinned = pinned};
    check(tide_memplan_build(g, order, g->n_nodes, &mo, plan, &err), &err);
    struct tide_executor *ex;
    struct tide_executor_options o = {
        .budget_bytes = plan->peak_bytes, .seed = 3, .poison = poison};
    check(tide_executor_new(g, plan, b, &o, &ex, &err), &err);
    return ex;
}

/*
 * w is homed on the host; f = Fetch(w) on h2d; a slow ApplySGD updates f in
 * place on compute; WriteBack(f) on d2h copies it home. No control edge
 * orders the WriteBack after the update — it reads only f — yet it must not
 * copy before the update has written: the executor orders a WriteBack after
 * every update of its tensor.
 */
static void test_write_back_waits_for_update(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t w = variable(g, "w", 2, 3, 2, "glorot_uniform");
    uint32_t grad = placeholder(g, "grad", TIDE_DTYPE_FLOAT32, 2, 3, 2);
    struct tide_error err = {0};
    check(tide_graph_infer(g, NULL, &err), &err);
    g->nodes[w].outputs[0].home = TIDE_HOME_HOST;
    g->nodes[grad].stream = TIDE_STREAM_H2D;
    uint32_t f = memory_op(g, TIDE_OP_FETCH, "fetch/w", (struct tide_edge){w, 0}, TIDE_STREAM_H2D,
                           TIDE_HOME_DEVICE, w);
    uint32_t update = node(g, TIDE_OP_APPLY_SGD, "update", 2, (uint32_t[]){f, grad});
    tide_attr_set_float(g, update, TIDE_ATTR_APPLY_SGD_learning_rate, 1.0);
    uint32_t wb = memory_op(g, TIDE_OP_WRITE_BACK, "write_back/w", (struct tide_edge){f, 0},
                            TIDE_STREAM_D2H, TIDE_HOME_DEVICE, w);
    assert_int_equal(g->nodes[wb].n_controls, 0);

    struct tide_backend *b = slow_backend();
    struct tide_memplan plan;
    struct tide_executor *ex = run_in_id_order(g, b, &plan, NULL, true);
    float before[6], after[6], gradient[6] = {1, 2, 3, 4, 5, 6};
    check(tide_executor_read(ex, (struct tide_edge){w, 0}, before, sizeof(before), &err), &err);
    check(tide_executor_feed(ex, grad, gradient, sizeof(gradient), &err), &err);
    struct tide_step_stats stats;
    check(tide_executor_step(ex, &stats, &err), &err);
    assert_int_equal(stats.h2d_bytes, 2 * sizeof(gradient));
    assert_int_equal(stats.d2h_bytes, sizeof(gradient));
    check(tide_executor_read(ex, (struct tide_edge){w, 0}, after, sizeof(after), &err), &err);
    for (int i = 0; i < 6; i++)
        assert_true(after[i] == before[i] - gradient[i]);
    tide_executor_free(ex);
    tide_memplan_release(&plan);
    tide_backend_free(b);
    tide_graph_free(g);
}

/*
 * t = Relu(x) is read by a slow Tanh on compute and then, last by position,
 * by a SwapOut on d2h. In poison mode t dies at the SwapOut, on d2h, which
 * reaches that point long before the Tanh has read t: the poison must wait
 * for the other stream's reader, or the Tanh reads NaN. (Nothing swaps t
 * back in here: a SwapIn taking over t's old addresses would refill them
 * with the very same bytes and hide the poison.)
 */
static void test_poison_waits_for_every_reader(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, BATCH, HIDDEN);
    uint32_t t = node(g, TIDE_OP_RELU, "t", 1, &x);
    uint32_t slow = node(g, TIDE_OP_TANH, "slow", 1, &t);
    struct tide_error err = {0};
    check(tide_graph_infer(g, NULL, &err), &err);
    g->nodes[x].stream = TIDE_STREAM_H2D;
    uint32_t so = memory_op(g, TIDE_OP_SWAP_OUT, "swap_out/t", (struct tide_edge){t, 0},
                            TIDE_STREAM_D2H, TIDE_HOME_HOST, t);
    uint8_t pinned[8] = {0};
    pinned[slow] = 1;

    struct tide_backend *b = slow_backend();
    struct tide_memplan plan;
    struct tide_executor *ex = run_in_id_order(g, b, &plan, pinned, true);
    /* t's last reader by position is the SwapOut, on d2h. */
    assert_int_equal(plan.regions[1].node, t);
    assert_int_equal(plan.order[plan.regions[1].last], so);
    float in[BATCH * HIDDEN], out[BATCH * HIDDEN];
    for (int i = 0; i < BATCH * HIDDEN; i++)
        in[i] = 0.1f * (float)(i - 7);
    check(tide_executor_feed(ex, x, in, sizeof(in), &err), &err);
    struct tide_step_stats stats;
    check(tide_executor_step(ex, &stats, &err), &err);
    assert_int_equal(stats.d2h_bytes, sizeof(in));
    check(tide_executor_read(ex, (struct tide_edge){slow, 0}, out, sizeof(out), &err), &err);
    for (int i = 0; i < BATCH * HIDDEN; i++)
        assert_close(out[i], tanhf(in[i] > 0 ? in[i] : 0), 1e-6);
    tide_executor_free(ex);
    tide_memplan_release(&plan);
    tide_backend_free(b);
    tide_graph_free(g);
}

/*
 * A chain x -> relu -> neg of 32 MiB tensors, with relu's output swapped
 * out and back in before neg when swapped: compute then has nothing to do
 * between relu and neg but wait for the SwapOut and the SwapIn (64 MiB of
 * copies), so the step must stall.
 */
static void stall_chain(bool swapped, struct tide_step_stats *stats)
{
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, 1024, 8192);
    uint32_t relu = node(g, TIDE_OP_RELU, "relu", 1, &x);
    uint32_t neg = node(g, TIDE_OP_NEG, "neg", 1, &relu);
    struct tide_error err = {0};
    check(tide_graph_infer(g, NULL, &err), &err);
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        g->nodes[v].stream =
            g->nodes[v].op == TIDE_OP_PLACEHOLDER ? TIDE_STREAM_H2D : TIDE_STREAM_COMPUTE;
        g->nodes[v].outputs[0].home = TIDE_HOME_DEVICE;
    }
    if (swapped) {
        uint32_t so = memory_op(g, TIDE_OP_SWAP_OUT, "swap_out/relu", (struct tide_edge){relu, 0},
                                TIDE_STREAM_D2H, TIDE_HOME_HOST, relu);
        uint32_t si = memory_op(g, TIDE_OP_SWAP_IN, "swap_in/relu", (struct tide_edge){so, 0},
                                TIDE_STREAM_H2D, TIDE_HOME_DEVICE, relu);
        rewire(g, so, relu, si);
    }
    struct tide_backend *b = NULL;
    check(tide_backend_cpu_new(NULL, &b, &err), &err);
    uint32_t *order = malloc(g->n_nodes * sizeof(*order));
    assert_non_null(order);
    check(tide_graph_dfs_order(g, order, &err), &err);
    uint8_t *pinned = calloc(g->n_nodes, 1);
    assert_non_null(pinned);
    pinned[neg] = 1;
    struct tide_memplan plan;
    struct tide_memplan_options opt = {
        .workspace_bytes = workspace, .workspace_ctx = b, .pinned = pinned};
    check(tide_memplan_build(g, order, g->n_nodes, &opt, &plan, &err), &err);
    struct tide_executor *ex = NULL;
    struct tide_executor_options o = {.budget_bytes = plan.peak_bytes};
    check(tide_executor_new(g, &plan, b, &o, &ex, &err), &err);
    size_t n = 1024 * 8192;
    float *data = malloc(n * sizeof(*data));
    assert_non_null(data);
    for (size_t i = 0; i < n; i++)
        data[i] = (float)(i % 13) - 6.0f;
    check(tide_executor_feed(ex, x, data, n * sizeof(*data), &err), &err);
    check(tide_executor_step(ex, stats, &err), &err);
    /* The values came through the copies. */
    float *out = malloc(n * sizeof(*out));
    assert_non_null(out);
    check(tide_executor_read(ex, (struct tide_edge){neg, 0}, out, n * sizeof(*out), &err), &err);
    for (size_t i = 0; i < n; i++) {
        if (out[i] != -(data[i] > 0 ? data[i] : 0.0f))
            fail_msg("neg[%zu] is %g, want %g", i, out[i], -(data[i] > 0 ? data[i] : 0.0f));
    }
    free(out);
    free(data);
    free(order);
    free(pinned);
    tide_executor_free(ex);
    tide_memplan_release(&plan);
    tide_backend_free(b);
    tide_graph_free(g);
}

/* stall_ms is measured in every step: > 0 when compute waits for a swap-in, 0 without copies. */
static void test_stall_measured(void **state)
{
    (void)state;
    struct tide_step_stats stats;
    stall_chain(true, &stats);
    assert_int_equal(stats.d2h_bytes, 32u << 20);
    if (!(stats.stall_ms > 0 && stats.stall_ms <= stats.step_ms))
        fail_msg("swapped: stall %.6f ms in a step of %.3f ms, want 0 < stall <= step",
                 stats.stall_ms, stats.step_ms);
    /* What stall_us carries (daemon/rpc-train.c): at least a microsecond. */
    assert_true((uint64_t)(stats.stall_ms * 1000.0) > 0);
    stall_chain(false, &stats);
    assert_int_equal(stats.d2h_bytes, 0);
    assert_true(stats.stall_ms == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mlp_matches_reference),
        cmocka_unit_test(test_poison_identical),
        cmocka_unit_test(test_poison_catches_read_after_free),
        cmocka_unit_test(test_budget_below_peak),
        cmocka_unit_test(test_missing_and_bad_feeds),
        cmocka_unit_test(test_kernel_error_then_recovery),
        cmocka_unit_test(test_read_rules),
        cmocka_unit_test(test_write_variable),
        cmocka_unit_test(test_write_variable_range),
        cmocka_unit_test(test_set_step),
        cmocka_unit_test(test_masked_step),
        cmocka_unit_test(test_planner_bug_detected),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_memory_ops_match_reference),
        cmocka_unit_test(test_memory_ops_host_variables),
        cmocka_unit_test(test_memory_ops_profile),
        cmocka_unit_test(test_host_arena_allocated_once),
        cmocka_unit_test(test_memory_ops_refused),
        cmocka_unit_test(test_write_back_waits_for_update),
        cmocka_unit_test(test_poison_waits_for_every_reader),
        cmocka_unit_test(test_stall_measured),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
