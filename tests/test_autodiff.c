/* SPDX-License-Identifier: MIT */
/*
 * test_autodiff.c: reverse-mode autodiff and the optimizer's update nodes.
 *
 * Two kinds of test. The structural ones need only shape inference: they
 * check which nodes autodiff appends, their names, inputs and attributes, the
 * optimizer state Variables, the control edges that order updates after
 * reads, determinism, and the refusals with their messages.
 *
 * The gradient check runs every differentiable op of ops.def through the CPU
 * session: the op's float inputs are Variables with seeded random values, the
 * loss is ReduceSum(Mul(y, R)) with R a Const of random weights, and each
 * element of each analytic gradient (tide_autodiff_gradients, run by a
 * session) is compared with a central finite difference of the same forward
 * graph, in which the inputs are Placeholders fed perturbed values (the
 * session has no call to overwrite a Variable, so one forward session serves
 * every perturbation).
 *
 * Last, a small classifier trains through a session with each optimizer:
 * the first update follows the optimizer's rule and the loss falls.
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
#include "runtime/session.h"
#include "float_assert.h"

/* ============================================================================
 * Graph building
 * ========================================================================== */

static struct tide_edge edge_of(uint32_t id)
{
    return (struct tide_edge){id, 0};
}

static uint32_t node_in(struct tide_graph *g, enum tide_op op, const char *name,
                        const struct tide_edge *in, uint32_t n)
{
    struct tide_error err = {0};
    uint32_t id;
    if (tide_graph_add_node(g, op, name, &id, &err) != TIDE_OK)
        fail_msg("add %s: %s", name, err.message);
    if (n && tide_graph_set_inputs(g, id, in, n, &err) != TIDE_OK)
        fail_msg("inputs of %s: %s", name, err.message);
    return id;
}

static uint32_t op1(struct tide_graph *g, enum tide_op op, const char *name, uint32_t a)
{
    struct tide_edge in[1] = {edge_of(a)};
    return node_in(g, op, name, in, 1);
}

static uint32_t op2(struct tide_graph *g, enum tide_op op, const char *name, uint32_t a, uint32_t b)
{
    struct tide_edge in[2] = {edge_of(a), edge_of(b)};
    return node_in(g, op, name, in, 2);
}

static struct tide_shape shape_of(int32_t rank, const int64_t *dims)
{
    return tide_shape_make(rank, dims);
}

/* A float32 Variable; value NULL keeps the default initialiser. */
static uint32_t variable(struct tide_graph *g, const char *name, int32_t rank, const int64_t *dims,
                         const float *value)
{
    uint32_t id = node_in(g, TIDE_OP_VARIABLE, name, NULL, 0);
    struct tide_shape s = shape_of(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_VARIABLE_shape, &s);
    if (value) {
        assert_int_equal(tide_attr_set_string(g, id, TIDE_ATTR_VARIABLE_init, "value"), TIDE_OK);
        assert_int_equal(tide_attr_set_tensor(g, id, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_FLOAT32,
                                              &s, value,
                                              (uint64_t)tide_shape_numel(&s) * sizeof(float)),
                         TIDE_OK);
    }
    return id;
}

static uint32_t placeholder(struct tide_graph *g, const char *name, enum tide_dtype dtype,
                            int32_t rank, const int64_t *dims)
{
    uint32_t id = node_in(g, TIDE_OP_PLACEHOLDER, name, NULL, 0);
    struct tide_shape s = shape_of(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, dtype);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &s);
    return id;
}

static uint32_t constant(struct tide_graph *g, const char *name, enum tide_dtype dtype,
                         int32_t rank, const int64_t *dims, const void *data)
{
    uint32_t id = node_in(g, TIDE_OP_CONST, name, NULL, 0);
    struct tide_shape s = shape_of(rank, dims);
    assert_int_equal(tide_attr_set_tensor(g, id, TIDE_ATTR_CONST_value, dtype, &s, data,
                                          (uint64_t)tide_shape_numel(&s) * 4),
                     TIDE_OK);
    return id;
}

static uint32_t reduce_sum_all(struct tide_graph *g, const char *name, uint32_t x)
{
    return op1(g, TIDE_OP_REDUCE_SUM, name, x);
}

static void infer_ok(struct tide_graph *g)
{
    struct tide_error err = {0};
    if (tide_graph_infer(g, NULL, &err) != TIDE_OK)
        fail_msg("infer: %s", err.message);
}

static uint32_t find(const struct tide_graph *g, const char *name)
{
    uint32_t id = tide_graph_find(g, name);
    if (id == TIDE_NO_NODE)
        fail_msg("no node \"%s\"", name);
    return id;
}

static bool has_control(const struct tide_graph *g, uint32_t id, uint32_t after)
{
    for (uint32_t i = 0; i < g->nodes[id].n_controls; i++) {
        if (g->nodes[id].controls[i] == after)
            return true;
    }
    return false;
}

/*
 * The classifier used by the structural tests:
 *   x [4, 3] (Placeholder), labels [4] (int32 Placeholder), w [3, 2], b [2]
 *   logits = BiasAdd(MatMul(x, w), b);  loss = ReduceMean(SoftmaxCrossEntropy(logits, labels))
 */
static struct tide_graph *classifier(void)
{
    struct tide_graph *g = tide_graph_new();
    int64_t xd[2] = {4, 3}, wd[2] = {3, 2}, bd[1] = {2}, ld[1] = {4};
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, xd);
    uint32_t labels = placeholder(g, "labels", TIDE_DTYPE_INT32, 1, ld);
    uint32_t w = variable(g, "w", 2, wd, NULL);
    uint32_t b = variable(g, "b", 1, bd, NULL);
    uint32_t mm = op2(g, TIDE_OP_MATMUL, "fc", x, w);
    uint32_t logits = op2(g, TIDE_OP_BIAS_ADD, "logits", mm, b);
    uint32_t xent = op2(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", logits, labels);
    op1(g, TIDE_OP_REDUCE_MEAN, "loss", xent);
    infer_ok(g);
    return g;
}

static struct tide_train_options sgd(const char *loss)
{
    return (struct tide_train_options){
        .loss = loss, .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.1f};
}

/* ============================================================================
 * Structural tests
 * ========================================================================== */

static void test_sgd_structure(void **state)
{
    (void)state;
    struct tide_graph *g = classifier();
    uint32_t n_forward = g->n_nodes;
    struct tide_train_options o = sgd("loss");
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);

    uint32_t w = find(g, "w"), b = find(g, "b"), fc = find(g, "fc"), logits = find(g, "logits");
    assert_int_equal(r.loss.node, find(g, "loss"));
    assert_int_equal(r.loss.output, 0);
    assert_int_equal(r.n_trained, 2);
    assert_int_equal(r.trained[0].variable, w); /* id order */
    assert_int_equal(r.trained[1].variable, b);

    /* The gradients carry the Variables' names; no copy is made for them. */
    uint32_t gw = find(g, "grad/w"), gb = find(g, "grad/b");
    assert_int_equal(r.trained[0].gradient.node, gw);
    assert_int_equal(r.trained[1].gradient.node, gb);
    assert_int_equal(g->nodes[gw].op, TIDE_OP_MATMUL);
    assert_true(g->nodes[gw].attrs[TIDE_ATTR_MATMUL_transpose_a].b);
    assert_int_equal(g->nodes[gw].inputs[0].node, find(g, "x"));
    assert_int_equal(g->nodes[gb].op, TIDE_OP_BIAS_ADD_GRAD);

    /* The chain from the seed: ReduceMean -> SoftmaxCrossEntropyGrad. */
    uint32_t seed = find(g, "grad/loss/seed");
    assert_int_equal(g->nodes[seed].op, TIDE_OP_CONST);
    assert_int_equal(g->nodes[seed].outputs[0].shape.rank, 0);
    assert_true(*(float *)g->nodes[seed].attrs[TIDE_ATTR_CONST_value].tensor->data == 1.0f);
    uint32_t dlogits = find(g, "grad/xent/logits");
    assert_int_equal(g->nodes[dlogits].op, TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD);
    assert_int_equal(g->nodes[dlogits].inputs[0].node, logits);
    assert_int_equal(g->nodes[dlogits].inputs[1].node, find(g, "labels"));
    assert_int_equal(g->nodes[find(g, "grad/loss/x_scaled")].op, TIDE_OP_SCALE);
    assert_int_equal(g->nodes[find(g, "grad/loss/x")].op, TIDE_OP_BROADCAST_TO);

    /* Nothing for the Placeholders, the labels, or the inputs of x. */
    assert_int_equal(tide_graph_find(g, "grad/x"), TIDE_NO_NODE);
    assert_int_equal(tide_graph_find(g, "grad/labels"), TIDE_NO_NODE);
    assert_int_equal(tide_graph_find(g, "grad/fc/a"), TIDE_NO_NODE);

    /* Updates: ApplySGD(var, grad) with the learning rate, after every reader of var. */
    uint32_t uw = find(g, "sgd/update/w"), ub = find(g, "sgd/update/b");
    assert_int_equal(r.trained[0].update, uw);
    assert_int_equal(r.trained[1].update, ub);
    assert_int_equal(g->nodes[uw].op, TIDE_OP_APPLY_SGD);
    assert_int_equal(g->nodes[uw].n_inputs, 2);
    assert_int_equal(g->nodes[uw].inputs[0].node, w);
    assert_int_equal(g->nodes[uw].inputs[1].node, gw);
    assert_float_equal(g->nodes[uw].attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f, 0.1, 1e-7);
    assert_true(has_control(g, uw, fc));
    assert_true(has_control(g, ub, logits));
    assert_int_equal(g->nodes[uw].n_controls, 1);

    /* Every appended node is inferred. */
    for (uint32_t v = n_forward; v < g->n_nodes; v++) {
        for (uint32_t k = 0; k < g->nodes[v].n_outputs; k++)
            assert_int_equal(g->nodes[v].outputs[k].dtype, TIDE_DTYPE_FLOAT32);
    }
    assert_true(tide_shape_equal(&g->nodes[gw].outputs[0].shape, &g->nodes[w].outputs[0].shape));
    tide_autodiff_result_release(&r);
    assert_null(r.trained);
    tide_autodiff_result_release(NULL);
    tide_graph_free(g);
}

static void test_momentum_state(void **state)
{
    (void)state;
    struct tide_graph *g = classifier();
    struct tide_train_options o = {.loss = "loss",
                                   .optimizer = TIDE_OPTIMIZER_MOMENTUM,
                                   .learning_rate = 0.05f,
                                   .momentum = 0.9f,
                                   .nesterov = true};
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    uint32_t w = find(g, "w"), accum = find(g, "momentum/accum/w");
    const struct tide_node *a = &g->nodes[accum];
    assert_int_equal(a->op, TIDE_OP_VARIABLE);
    assert_false(a->attrs[TIDE_ATTR_VARIABLE_trainable].b);
    assert_string_equal(a->attrs[TIDE_ATTR_VARIABLE_init].s, "zeros");
    assert_true(tide_shape_equal(&a->outputs[0].shape, &g->nodes[w].outputs[0].shape));
    const struct tide_node *u = &g->nodes[find(g, "momentum/update/w")];
    assert_int_equal(u->op, TIDE_OP_APPLY_MOMENTUM);
    assert_int_equal(u->n_inputs, 3);
    assert_int_equal(u->inputs[0].node, w);
    assert_int_equal(u->inputs[1].node, accum);
    assert_int_equal(u->inputs[2].node, find(g, "grad/w"));
    assert_float_equal(u->attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f, 0.05, 1e-7);
    assert_float_equal(u->attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f, 0.9, 1e-7);
    assert_true(u->attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b);
    find(g, "momentum/accum/b");
    /* The state is not itself trained. */
    assert_int_equal(r.n_trained, 2);
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

static void test_adam_state(void **state)
{
    (void)state;
    for (int explicit_betas = 0; explicit_betas < 2; explicit_betas++) {
        struct tide_graph *g = classifier();
        struct tide_train_options o = {
            .loss = "loss", .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 1e-3f};
        if (explicit_betas) {
            o.beta1 = 0.5f;
            o.beta2 = 0.75f;
            o.epsilon = 1e-4f;
        }
        struct tide_autodiff_result r;
        struct tide_error err = {0};
        if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
            fail_msg("autodiff: %s", err.message);
        uint32_t b = find(g, "b"), m = find(g, "adam/m/b"), v = find(g, "adam/v/b");
        for (int i = 0; i < 2; i++) {
            const struct tide_node *s = &g->nodes[i ? v : m];
            assert_int_equal(s->op, TIDE_OP_VARIABLE);
            assert_false(s->attrs[TIDE_ATTR_VARIABLE_trainable].b);
            assert_string_equal(s->attrs[TIDE_ATTR_VARIABLE_init].s, "zeros");
            assert_int_equal(s->outputs[0].shape.rank, 1);
            assert_int_equal(s->outputs[0].shape.dims[0], 2);
        }
        const struct tide_node *u = &g->nodes[find(g, "adam/update/b")];
        assert_int_equal(u->op, TIDE_OP_APPLY_ADAM);
        assert_int_equal(u->n_inputs, 4);
        assert_int_equal(u->inputs[0].node, b);
        assert_int_equal(u->inputs[1].node, m);
        assert_int_equal(u->inputs[2].node, v);
        assert_int_equal(u->inputs[3].node, find(g, "grad/b"));
        assert_float_equal(u->attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f, 1e-3, 1e-9);
        assert_float_equal(u->attrs[TIDE_ATTR_APPLY_ADAM_beta1].f, explicit_betas ? 0.5 : 0.9,
                           1e-7);
        assert_float_equal(u->attrs[TIDE_ATTR_APPLY_ADAM_beta2].f, explicit_betas ? 0.75 : 0.999,
                           1e-7);
        assert_float_equal(u->attrs[TIDE_ATTR_APPLY_ADAM_epsilon].f, explicit_betas ? 1e-4 : 1e-8,
                           1e-11);
        find(g, "adam/m/w");
        find(g, "adam/v/w");
        tide_autodiff_result_release(&r);
        tide_graph_free(g);
    }
}

/*
 * w is read by two forward nodes and, through MatMul's gradient for its other
 * input, by a gradient node: the update runs after all three. x is read twice
 * (Mul(x, x) and the MatMul), so its gradient is AddN of three contributions.
 */
static void test_control_edges_and_accumulation(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    int64_t d[2] = {2, 2};
    uint32_t x = variable(g, "x", 2, d, NULL);
    uint32_t w = variable(g, "w", 2, d, NULL);
    uint32_t sq = op2(g, TIDE_OP_MUL, "sq", x, x);
    uint32_t mm = op2(g, TIDE_OP_MATMUL, "mm", sq, w);
    uint32_t tw = op1(g, TIDE_OP_TANH, "tw", w);
    uint32_t sum = op2(g, TIDE_OP_ADD, "sum", mm, tw);
    uint32_t xy = op2(g, TIDE_OP_ADD, "xy", sum, x);
    reduce_sum_all(g, "loss", xy);
    infer_ok(g);

    struct tide_train_options o = sgd("loss");
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    uint32_t uw = find(g, "sgd/update/w"), ux = find(g, "sgd/update/x");
    uint32_t da = find(g, "grad/mm/a"); /* MatMul(dy, w; transpose_b) reads w */
    assert_int_equal(g->nodes[da].inputs[1].node, w);
    assert_true(has_control(g, uw, mm));
    assert_true(has_control(g, uw, tw));
    assert_true(has_control(g, uw, da));
    assert_int_equal(g->nodes[uw].n_controls, 3);
    /* x's readers: sq (once, though it reads x twice), xy, and Mul(dy, x) for each of sq's. */
    uint32_t sq_a = find(g, "grad/sq/a"), sq_b = find(g, "grad/sq/b");
    assert_true(has_control(g, ux, sq));
    assert_true(has_control(g, ux, xy));
    assert_true(has_control(g, ux, sq_a));
    assert_true(has_control(g, ux, sq_b));
    assert_int_equal(g->nodes[ux].n_controls, 4);

    /* grad/x sums, in reverse topological order then input order: xy's, then sq's a and b. */
    uint32_t gx = find(g, "grad/x");
    assert_int_equal(g->nodes[gx].op, TIDE_OP_ADD_N);
    assert_int_equal(g->nodes[gx].n_inputs, 3);
    assert_int_equal(g->nodes[gx].inputs[1].node, sq_a);
    assert_int_equal(g->nodes[gx].inputs[2].node, sq_b);
    /* w's two contributions: mm's b, then tw's TanhGrad (mm is later in Kahn's order). */
    uint32_t gw = find(g, "grad/w");
    assert_int_equal(g->nodes[gw].op, TIDE_OP_ADD_N);
    assert_int_equal(g->nodes[gw].n_inputs, 2);
    assert_int_equal(g->nodes[gw].inputs[0].node, find(g, "grad/mm/b"));
    assert_int_equal(g->nodes[gw].inputs[1].node, find(g, "grad/tw/x"));
    assert_int_equal(g->nodes[find(g, "grad/tw/x")].op, TIDE_OP_TANH_GRAD);
    (void)sum;
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

/* Two graphs built the same way get the same appended nodes, names and edges. */
/*
 * A weight read at every step of a 20-step recurrence gets 21 contributions:
 * summed in groups of at most 8 as they come (two "grad/w/partial" AddNs,
 * each the first term of the next group), each contribution in exactly one
 * group, and the last AddN named grad/w. Few contributions stay one AddN
 * (test_control_edges_and_accumulation).
 */
static void test_long_sums_in_groups(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    int64_t d[2] = {2, 2};
    uint32_t w = variable(g, "w", 2, d, NULL);
    uint32_t h = w;
    for (int t = 0; t < 20; t++) {
        char sum[32], out[32];
        snprintf(sum, sizeof(sum), "a%d", t);
        snprintf(out, sizeof(out), "h%d", t);
        h = op1(g, TIDE_OP_TANH, out, op2(g, TIDE_OP_ADD, sum, h, w));
    }
    reduce_sum_all(g, "loss", h);
    infer_ok(g);
    struct tide_train_options o = sgd("loss");
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);

    /* 21 contributions: 8 -> partial; partial + 7 -> partial_1; partial_1 + 6 -> grad/w. */
    const struct tide_node *sum = &g->nodes[find(g, "grad/w")];
    const struct tide_node *p1 = &g->nodes[find(g, "grad/w/partial_1")];
    const struct tide_node *p0 = &g->nodes[find(g, "grad/w/partial")];
    assert_int_equal(sum->op, TIDE_OP_ADD_N);
    assert_int_equal(sum->n_inputs, 7);
    assert_int_equal(sum->inputs[0].node, find(g, "grad/w/partial_1"));
    assert_int_equal(p1->op, TIDE_OP_ADD_N);
    assert_int_equal(p1->n_inputs, 8);
    assert_int_equal(p1->inputs[0].node, find(g, "grad/w/partial"));
    assert_int_equal(p0->n_inputs, 8);
    /* Every Add passes its dy, TanhGrad's, on to w: once from each, twice from a0 = w + w. */
    uint32_t seen = 0;
    const struct tide_node *groups[3] = {p0, p1, sum};
    for (int i = 0; i < 3; i++) {
        for (uint32_t k = i ? 1 : 0; k < groups[i]->n_inputs; k++) {
            const char *name = g->nodes[groups[i]->inputs[k].node].name;
            if (strncmp(name, "grad/h", 6) != 0 ||
                g->nodes[groups[i]->inputs[k].node].op != TIDE_OP_TANH_GRAD)
                fail_msg("grad/w sums \"%s\", not the gradient of a Tanh", name);
            seen++;
        }
    }
    assert_int_equal(seen, 21);
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

static void test_deterministic(void **state)
{
    (void)state;
    struct tide_graph *g[2];
    for (int i = 0; i < 2; i++) {
        g[i] = classifier();
        struct tide_train_options o = {
            .loss = "loss", .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 1e-3f};
        struct tide_autodiff_result r;
        struct tide_error err = {0};
        if (tide_autodiff(g[i], &o, &r, &err) != TIDE_OK)
            fail_msg("autodiff: %s", err.message);
        tide_autodiff_result_release(&r);
    }
    assert_int_equal(g[0]->n_nodes, g[1]->n_nodes);
    for (uint32_t v = 0; v < g[0]->n_nodes; v++) {
        const struct tide_node *a = &g[0]->nodes[v], *b = &g[1]->nodes[v];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->op, b->op);
        assert_int_equal(a->n_inputs, b->n_inputs);
        assert_memory_equal(a->inputs, b->inputs, a->n_inputs * sizeof(*a->inputs));
        assert_int_equal(a->n_controls, b->n_controls);
        if (a->n_controls)
            assert_memory_equal(a->controls, b->controls, a->n_controls * sizeof(*a->controls));
    }
    tide_graph_free(g[0]);
    tide_graph_free(g[1]);
}

/*
 * A forward node already called "grad/w" pushes w's gradient to "grad/w_1";
 * a gradient that arrives by pass-through (Add of equal shapes) gets an
 * Identity to carry its name; the loss may be named "node:k".
 */
static void test_names(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    int64_t d[1] = {3};
    uint32_t w = variable(g, "w", 1, d, NULL);
    uint32_t b = variable(g, "b", 1, d, NULL);
    uint32_t taken = op1(g, TIDE_OP_RELU, "grad/w", w);
    uint32_t sum = op2(g, TIDE_OP_ADD, "sum", taken, b);
    uint32_t loss = reduce_sum_all(g, "loss", sum);
    infer_ok(g);
    struct tide_train_options o = sgd("loss:0");
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    assert_int_equal(r.loss.node, loss);
    assert_int_equal(r.n_trained, 2);
    uint32_t gw = find(g, "grad/w_1");
    assert_int_equal(r.trained[0].gradient.node, gw);
    assert_int_equal(g->nodes[gw].op, TIDE_OP_RELU_GRAD);
    /* b's gradient is dy of sum, which is loss's BroadcastTo: an Identity names it. */
    uint32_t gb = find(g, "grad/b");
    assert_int_equal(g->nodes[gb].op, TIDE_OP_IDENTITY);
    assert_int_equal(g->nodes[gb].inputs[0].node, find(g, "grad/loss/x"));
    /* The gradient reaching "grad/w" (the Relu) is named after the node: no clash. */
    assert_int_equal(g->nodes[gw].inputs[0].node, find(g, "grad/loss/x"));
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

/* Only the named Variables are trained; unreached Variables are left alone. */
static void test_variable_selection(void **state)
{
    (void)state;
    struct tide_graph *g = classifier();
    int64_t d[1] = {5};
    variable(g, "unused", 1, d, NULL);
    infer_ok(g);
    const char *names[] = {"b", "b"};
    struct tide_train_options o = sgd("loss");
    o.variables = names;
    o.n_variables = 2;
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    assert_int_equal(r.n_trained, 1);
    assert_int_equal(r.trained[0].variable, find(g, "b"));
    assert_int_equal(tide_graph_find(g, "grad/w"), TIDE_NO_NODE);
    assert_int_equal(tide_graph_find(g, "sgd/update/w"), TIDE_NO_NODE);
    tide_autodiff_result_release(&r);
    tide_graph_free(g);

    /* Every trainable Variable: the one the loss does not read gets no update. */
    g = classifier();
    variable(g, "unused", 1, d, NULL);
    o = sgd("loss");
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    assert_int_equal(r.n_trained, 2);
    assert_int_equal(tide_graph_find(g, "sgd/update/unused"), TIDE_NO_NODE);
    assert_int_equal(tide_graph_find(g, "grad/unused"), TIDE_NO_NODE);
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

/* Expects tide_autodiff to refuse with status and a message containing each of the texts. */
static void expect_refusal(struct tide_graph *g, const struct tide_train_options *o,
                           enum tide_status status, const char *text1, const char *text2)
{
    uint32_t n = g->n_nodes;
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    enum tide_status st = tide_autodiff(g, o, &r, &err);
    if (st != status)
        fail_msg("want %s, got %s: %s", tide_status_name(status), tide_status_name(st),
                 err.message);
    if (!strstr(err.message, text1) || (text2 && !strstr(err.message, text2)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err.message, text1, text2 ? text2 : "");
    assert_int_equal(r.n_trained, 0);
    assert_null(r.trained);
    /* Refusals happen before anything is appended. */
    assert_int_equal(g->n_nodes, n);
}

static void test_errors(void **state)
{
    (void)state;
    struct tide_graph *g = classifier();
    struct tide_train_options o = sgd("nope");
    expect_refusal(g, &o, TIDE_NOT_FOUND, "loss \"nope\" is not a node of the graph", NULL);
    o.loss = "xent";
    expect_refusal(g, &o, TIDE_INVALID, "node \"xent\" (SoftmaxCrossEntropy)",
                   "float32 of shape [4], wants a float32 scalar");
    o.loss = "loss:1";
    expect_refusal(g, &o, TIDE_INVALID, "node \"loss\" (ReduceMean)", "names output 1");
    o.loss = "loss:x";
    expect_refusal(g, &o, TIDE_INVALID, "loss \"loss:x\"", "not a number");

    const char *missing[] = {"w", "ghost"};
    o = sgd("loss");
    o.variables = missing;
    o.n_variables = 2;
    expect_refusal(g, &o, TIDE_NOT_FOUND, "variable \"ghost\" to train is not a node", NULL);
    const char *not_var[] = {"fc"};
    o.variables = not_var;
    o.n_variables = 1;
    expect_refusal(g, &o, TIDE_INVALID, "node \"fc\" (MatMul)", "not a Variable");
    const char *placeholder_var[] = {"x"};
    o.variables = placeholder_var;
    expect_refusal(g, &o, TIDE_INVALID, "node \"x\" (Placeholder)", "not a Variable");

    o = sgd("loss");
    o.learning_rate = 0;
    expect_refusal(g, &o, TIDE_INVALID, "learning_rate is 0", NULL);
    o = sgd("loss");
    o.optimizer = TIDE_OPTIMIZER_ADAM;
    o.beta1 = 1.0f;
    expect_refusal(g, &o, TIDE_INVALID, "Adam betas", NULL);
    tide_graph_free(g);

    /* No trainable Variable reaches the loss. */
    g = tide_graph_new();
    int64_t d[1] = {3};
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 1, d);
    uint32_t frozen = variable(g, "frozen", 1, d, NULL);
    tide_attr_set_bool(g, frozen, TIDE_ATTR_VARIABLE_trainable, false);
    variable(g, "elsewhere", 1, d, NULL);
    reduce_sum_all(g, "loss", op2(g, TIDE_OP_MUL, "xf", x, frozen));
    infer_ok(g);
    o = sgd("loss");
    expect_refusal(g, &o, TIDE_INVALID, "loss \"loss\" does not depend on any trainable Variable",
                   NULL);
    const char *frozen_name[] = {"frozen"};
    o.variables = frozen_name;
    o.n_variables = 1;
    expect_refusal(g, &o, TIDE_INVALID, "node \"frozen\" (Variable)", "\"trainable\" is false");
    tide_graph_free(g);

    /* An op without a gradient on the path, and BatchNorm's statistics. */
    g = tide_graph_new();
    int64_t bd[2] = {4, 3};
    uint32_t w = variable(g, "w", 1, d, NULL);
    uint32_t y = variable(g, "y", 1, d, NULL);
    uint32_t rg = op2(g, TIDE_OP_RELU_GRAD, "rg", w, y);
    reduce_sum_all(g, "loss", rg);
    uint32_t bx = variable(g, "bx", 2, bd, NULL);
    struct tide_edge bn_in[3] = {edge_of(bx), edge_of(w), edge_of(y)};
    uint32_t bn = node_in(g, TIDE_OP_BATCH_NORM, "bn", bn_in, 3);
    struct tide_edge mean = {bn, 1};
    uint32_t sm = node_in(g, TIDE_OP_REDUCE_SUM, "stat_loss", &mean, 1);
    reduce_sum_all(g, "y_loss", bn);
    uint32_t both = op2(g, TIDE_OP_ADD, "both", sm, find(g, "y_loss"));
    (void)both;
    infer_ok(g);
    o = sgd("loss");
    expect_refusal(g, &o, TIDE_UNSUPPORTED, "node \"rg\" (ReluGrad): has no gradient",
                   "from \"w\" to the loss \"loss\"");
    o.loss = "both";
    expect_refusal(g, &o, TIDE_UNSUPPORTED, "node \"bn\" (BatchNorm)", "output 1 (mean)");
    /* Through output 0 only, BatchNorm is fine. */
    o.loss = "y_loss";
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    assert_int_equal(r.n_trained, 3); /* bx, w (gamma), y (beta) */
    assert_int_equal(g->nodes[find(g, "grad/bn/backprop")].op, TIDE_OP_BATCH_NORM_GRAD);
    assert_int_equal(g->nodes[find(g, "grad/w")].op, TIDE_OP_IDENTITY);
    assert_int_equal(g->nodes[find(g, "grad/w")].inputs[0].output, 1);
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

/* tide_autodiff_gradients: any float edges, an unreached one gets no gradient. */
static void test_gradients_api(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    int64_t d[2] = {2, 3};
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, d);
    uint32_t c = placeholder(g, "c", TIDE_DTYPE_FLOAT32, 2, d);
    uint32_t s = op1(g, TIDE_OP_SIGMOID, "s", x);
    uint32_t loss = reduce_sum_all(g, "loss", s);
    uint32_t n_forward = g->n_nodes;
    infer_ok(g);
    struct tide_edge wrt[3] = {edge_of(s), edge_of(x), edge_of(c)}, grads[3];
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(loss), wrt, 3, grads, &err) != TIDE_OK)
        fail_msg("gradients: %s", err.message);
    assert_int_equal(grads[0].node, find(g, "grad/s"));
    assert_int_equal(grads[1].node, find(g, "grad/x"));
    assert_int_equal(g->nodes[grads[1].node].op, TIDE_OP_SIGMOID_GRAD);
    assert_int_equal(g->nodes[grads[1].node].inputs[0].node, grads[0].node);
    assert_int_equal(grads[2].node, TIDE_NO_NODE);
    /* No optimizer. */
    for (uint32_t v = n_forward; v < g->n_nodes; v++)
        assert_false(tide_op_info(g->nodes[v].op)->flags & TIDE_OP_F_UPDATE);
    tide_graph_free(g);

    /* A loss that depends on none of the edges. */
    g = tide_graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, d);
    c = placeholder(g, "c", TIDE_DTYPE_FLOAT32, 2, d);
    loss = reduce_sum_all(g, "loss", x);
    infer_ok(g);
    wrt[0] = edge_of(c);
    assert_int_equal(tide_autodiff_gradients(g, edge_of(loss), wrt, 1, grads, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "does not depend on any of the 1 given outputs"));
    tide_graph_free(g);
}

/*
 * Identity and the memory ops pass the gradient through unchanged; w's
 * gradient is then the loss's BroadcastTo, named by an Identity.
 */
static void test_pass_through(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    int64_t d[2] = {2, 3};
    uint32_t w = variable(g, "w", 2, d, NULL);
    uint32_t v = op1(g, TIDE_OP_IDENTITY, "id", w);
    v = op1(g, TIDE_OP_FETCH, "fetch", v);
    v = op1(g, TIDE_OP_SWAP_OUT, "out", v);
    v = op1(g, TIDE_OP_SWAP_IN, "in", v);
    uint32_t loss = reduce_sum_all(g, "loss", v);
    infer_ok(g);
    uint32_t n_forward = g->n_nodes;
    struct tide_edge wrt = edge_of(w), grad;
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(loss), &wrt, 1, &grad, &err) != TIDE_OK)
        fail_msg("gradients: %s", err.message);
    /* The seed, the Reshape and BroadcastTo of ReduceSum, and grad/w: nothing else. */
    assert_int_equal(g->n_nodes, n_forward + 4);
    assert_int_equal(grad.node, find(g, "grad/w"));
    assert_int_equal(g->nodes[grad.node].op, TIDE_OP_IDENTITY);
    assert_int_equal(g->nodes[grad.node].inputs[0].node, find(g, "grad/loss/x"));
    assert_int_equal(g->nodes[find(g, "grad/loss/x_kept")].op, TIDE_OP_RESHAPE);
    tide_graph_free(g);
}

/* ============================================================================
 * Gradient check
 * ========================================================================== */

/*
 * Tolerance: |analytic - numeric| <= 1e-3 * max(1, |numeric|) per element.
 * The forward runs in float32; the loss sum(y * R) is accumulated on the host
 * in double from the fetched y, and the central difference uses h = 1e-2 *
 * max(1, |x|), divided by the float difference of the perturbed values
 * actually fed. Float rounding of y (~6e-8 relative) over a few dozen terms
 * then contributes about 1e-5 to the quotient, and the truncation error
 * h^2 f'''/6 up to about 1e-4: the worst case seen is 1.5e-4, BatchNorm over
 * a batch of 4 rows, whose statistics move most per perturbation; most ops
 * stay below 1e-5 (TIDE_GC_VERBOSE=1 prints each case's worst). 1e-3 still
 * catches any wrong term, sign or factor of a gradient, which errs by O(1).
 */
#define GC_TOLERANCE  1e-3
#define GC_MAX_INPUTS 4

enum gc_fill {
    GC_UNIFORM,  /* [-1, 1) */
    GC_AWAY,     /* |x| in [0.2, 1): no kink within a perturbation (Relu) */
    GC_DISTINCT, /* a shuffle of multiples of 0.05: no tie within a perturbation (MaxPool) */
    GC_BETWEEN,  /* GC_DISTINCT shifted by 0.025: no tie with a GC_DISTINCT input (Max, Min) */
    GC_POSITIVE, /* [0.5, 1.5): inside the domain of Log and Sqrt, away from 0 (Div) */
};

struct gc_input {
    int32_t rank;
    int64_t dims[4];
    enum gc_fill fill;
};

struct gc_case {
    const char *name;
    uint32_t n_inputs;
    struct gc_input in[GC_MAX_INPUTS];
    /* Appends the op under test, called "y", reading in[0..n_inputs); returns its id. */
    uint32_t (*build)(struct tide_graph *g, const uint32_t *in);
};

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static double rng_uniform(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-52 - 1.0;
}

static uint64_t seed_of(const char *name)
{
    uint64_t h = 1469598103934665603ull;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211ull;
    return h;
}

static void fill_values(float *v, int64_t n, enum gc_fill fill, uint64_t *rng)
{
    if (fill == GC_DISTINCT || fill == GC_BETWEEN) {
        double shift = fill == GC_BETWEEN ? 0.025 : 0.0;
        for (int64_t i = 0; i < n; i++)
            v[i] = (float)(0.05 * (double)(i - n / 2) + shift);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(rng_next(rng) % (uint64_t)(i + 1));
            float t = v[i];
            v[i] = v[j];
            v[j] = t;
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double u = rng_uniform(rng);
        if (fill == GC_AWAY)
            u = (u < 0 ? -1 : 1) * (0.2 + 0.8 * fabs(u));
        else if (fill == GC_POSITIVE)
            u = 1.0 + 0.5 * u;
        v[i] = (float)u;
    }
}

static int64_t numel_of(const struct gc_input *in)
{
    struct tide_shape s = shape_of(in->rank, in->dims);
    return tide_shape_numel(&s);
}

/*
 * Builds the case's graph: inputs "in0".. (Variables holding values, or
 * Placeholders), the op "y", "r" (Const R), "yr" = Mul(y, r) and "loss" =
 * ReduceSum(yr). R is drawn from rng once y's shape is known; *r and *n_r
 * receive it (malloc'd) when r is not NULL, else r_values is used.
 */
static struct tide_graph *gc_graph(const struct gc_case *c, float *const *values, bool as_variables,
                                   uint64_t *rng, float **r, int64_t *n_r, const float *r_values)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t in[GC_MAX_INPUTS];
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        char name[16];
        snprintf(name, sizeof(name), "in%u", i);
        in[i] = as_variables
                    ? variable(g, name, c->in[i].rank, c->in[i].dims, values[i])
                    : placeholder(g, name, TIDE_DTYPE_FLOAT32, c->in[i].rank, c->in[i].dims);
    }
    uint32_t y = c->build(g, in);
    assert_string_equal(g->nodes[y].name, "y");
    infer_ok(g);
    struct tide_shape ys = g->nodes[y].outputs[0].shape;
    int64_t n = tide_shape_numel(&ys);
    if (r) {
        *r = malloc((size_t)n * sizeof(float) + 1);
        assert_non_null(*r);
        fill_values(*r, n, GC_UNIFORM, rng);
        *n_r = n;
        r_values = *r;
    }
    uint32_t rc = constant(g, "r", TIDE_DTYPE_FLOAT32, ys.rank, ys.dims, r_values);
    reduce_sum_all(g, "loss", op2(g, TIDE_OP_MUL, "yr", y, rc));
    infer_ok(g);
    return g;
}

static struct tide_session *gc_session(struct tide_graph *g, const char *const *fetches,
                                       uint32_t n_fetches, const char *what)
{
    struct tide_session_options o = tide_session_options_default();
    o.fetches = fetches;
    o.n_fetches = n_fetches;
    o.poison = true;
    struct tide_session *s = NULL;
    struct tide_error err = {0};
    if (tide_session_new_graph(g, &o, &s, &err) != TIDE_OK)
        fail_msg("%s: session: %s", what, err.message);
    return s;
}

static void gc_fetch(struct tide_session *s, const char *name, float *dst, int64_t n,
                     const char *what)
{
    struct tide_error err = {0};
    if (tide_session_fetch(s, name, dst, (uint64_t)n * sizeof(float), &err) != TIDE_OK)
        fail_msg("%s: fetch %s: %s", what, name, err.message);
}

/* The loss sum(y * r) from the fetched y, in double. */
static double host_loss(const float *y, const float *r, int64_t n)
{
    double sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)y[i] * (double)r[i];
    return sum;
}

/* Runs one case; returns the number of elements out of tolerance (each printed). */
static int gc_run(const struct gc_case *c)
{
    uint64_t rng = seed_of(c->name);
    float *values[GC_MAX_INPUTS] = {0};
    int64_t n_in[GC_MAX_INPUTS] = {0};
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        n_in[i] = numel_of(&c->in[i]);
        values[i] = malloc((size_t)n_in[i] * sizeof(float) + 1);
        assert_non_null(values[i]);
        fill_values(values[i], n_in[i], c->in[i].fill, &rng);
    }

    /* Analytic: the gradient graph with Variables, run once. */
    float *r = NULL;
    int64_t n_y = 0;
    struct tide_graph *g = gc_graph(c, values, true, &rng, &r, &n_y, NULL);
    struct tide_edge wrt[GC_MAX_INPUTS], grads[GC_MAX_INPUTS];
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        char name[16];
        snprintf(name, sizeof(name), "in%u", i);
        wrt[i] = edge_of(find(g, name));
    }
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(find(g, "loss")), wrt, c->n_inputs, grads, &err) !=
        TIDE_OK)
        fail_msg("%s: autodiff: %s", c->name, err.message);
    char names[GC_MAX_INPUTS][TIDE_MAX_NAME + 16];
    const char *fetches[GC_MAX_INPUTS + 2];
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        assert_int_not_equal(grads[i].node, TIDE_NO_NODE);
        snprintf(names[i], sizeof(names[i]), "%s:%u", g->nodes[grads[i].node].name,
                 grads[i].output);
        fetches[i] = names[i];
    }
    fetches[c->n_inputs] = "y";
    fetches[c->n_inputs + 1] = "loss";
    struct tide_session *s = gc_session(g, fetches, c->n_inputs + 2, c->name);
    if (tide_session_step(s, NULL, &err) != TIDE_OK)
        fail_msg("%s: step: %s", c->name, err.message);
    float *analytic[GC_MAX_INPUTS];
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        analytic[i] = malloc((size_t)n_in[i] * sizeof(float) + 1);
        assert_non_null(analytic[i]);
        gc_fetch(s, names[i], analytic[i], n_in[i], c->name);
    }
    float *y = malloc((size_t)n_y * sizeof(float) + 1);
    float loss;
    assert_non_null(y);
    gc_fetch(s, "y", y, n_y, c->name);
    gc_fetch(s, "loss", &loss, 1, c->name);
    double l0 = host_loss(y, r, n_y);
    /* The graph's float ReduceSum(Mul) agrees with the host's double sum. */
    if (fabs((double)loss - l0) > 1e-4 * fmax(1, fabs(l0)))
        fail_msg("%s: graph loss %.9g, host loss %.9g", c->name, (double)loss, l0);
    tide_session_free(s);

    /* Numeric: the same forward graph with Placeholders, fed perturbed values. */
    g = gc_graph(c, values, false, NULL, NULL, NULL, r);
    const char *forward_fetches[2] = {"y", "loss"};
    s = gc_session(g, forward_fetches, 2, c->name);
    int failures = 0;
    double worst = 0;
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        for (int64_t j = 0; j < n_in[i]; j++) {
            float x = values[i][j];
            double h = 1e-2 * fmax(1.0, fabs((double)x));
            float xs[2] = {(float)(x + h), (float)(x - h)};
            double l[2];
            for (int side = 0; side < 2; side++) {
                values[i][j] = xs[side];
                for (uint32_t k = 0; k < c->n_inputs; k++) {
                    char name[16];
                    snprintf(name, sizeof(name), "in%u", k);
                    if (tide_session_feed(s, name, values[k], (uint64_t)n_in[k] * sizeof(float),
                                          &err) != TIDE_OK)
                        fail_msg("%s: feed: %s", c->name, err.message);
                }
                if (tide_session_step(s, NULL, &err) != TIDE_OK)
                    fail_msg("%s: step: %s", c->name, err.message);
                gc_fetch(s, "y", y, n_y, c->name);
                l[side] = host_loss(y, r, n_y);
            }
            values[i][j] = x;
            double numeric = (l[0] - l[1]) / ((double)xs[0] - (double)xs[1]);
            double a = analytic[i][j];
            double error = fabs(a - numeric) / fmax(1.0, fabs(numeric));
            if (error > worst)
                worst = error;
            if (!(error <= GC_TOLERANCE)) {
                if (failures < 8)
                    print_error("%s: d loss / d in%u[%lld]: analytic %.7g, numeric %.7g\n", c->name,
                                i, (long long)j, a, numeric);
                failures++;
            }
        }
    }
    if (getenv("TIDE_GC_VERBOSE"))
        print_message("%-24s worst relative error %.3g\n", c->name, worst);
    tide_session_free(s);
    for (uint32_t i = 0; i < c->n_inputs; i++) {
        free(values[i]);
        free(analytic[i]);
    }
    free(r);
    free(y);
    return failures;
}

/* ---- the ops under test ------------------------------------------------- */

static uint32_t build_identity(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_IDENTITY, "y", in[0]);
}

static uint32_t build_matmul(struct tide_graph *g, const uint32_t *in, bool ta, bool tb)
{
    uint32_t y = op2(g, TIDE_OP_MATMUL, "y", in[0], in[1]);
    tide_attr_set_bool(g, y, TIDE_ATTR_MATMUL_transpose_a, ta);
    tide_attr_set_bool(g, y, TIDE_ATTR_MATMUL_transpose_b, tb);
    return y;
}

static uint32_t build_matmul_nn(struct tide_graph *g, const uint32_t *in)
{
    return build_matmul(g, in, false, false);
}

static uint32_t build_matmul_nt(struct tide_graph *g, const uint32_t *in)
{
    return build_matmul(g, in, false, true);
}

static uint32_t build_matmul_tn(struct tide_graph *g, const uint32_t *in)
{
    return build_matmul(g, in, true, false);
}

static uint32_t build_matmul_tt(struct tide_graph *g, const uint32_t *in)
{
    return build_matmul(g, in, true, true);
}

static uint32_t build_add(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_ADD, "y", in[0], in[1]);
}

static uint32_t build_sub(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_SUB, "y", in[0], in[1]);
}

static uint32_t build_mul(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_MUL, "y", in[0], in[1]);
}

/* Mul(x, x): two contributions to one input, summed by AddN. */
static uint32_t build_square(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_MUL, "y", in[0], in[0]);
}

static uint32_t build_bias_add(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_BIAS_ADD, "y", in[0], in[1]);
}

static uint32_t build_relu(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_RELU, "y", in[0]);
}

static uint32_t build_sigmoid(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_SIGMOID, "y", in[0]);
}

static uint32_t build_tanh(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_TANH, "y", in[0]);
}

static uint32_t build_softmax(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_SOFTMAX, "y", in[0]);
}

static uint32_t build_softmax_axis0(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = op1(g, TIDE_OP_SOFTMAX, "y", in[0]);
    tide_attr_set_int(g, y, TIDE_ATTR_SOFTMAX_axis, 0);
    return y;
}

static uint32_t build_softmax_xent(struct tide_graph *g, const uint32_t *in)
{
    int64_t n = g->nodes[in[0]].attrs[TIDE_ATTR_VARIABLE_shape].shape.dims[0];
    int32_t labels[8] = {1, 0, 3, 2, 1, 3, 0, 2};
    assert_true(n <= 8);
    uint32_t l = constant(g, "labels", TIDE_DTYPE_INT32, 1, &n, labels);
    return op2(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "y", in[0], l);
}

/* A reduction with axes (n_axes 0: all) and keep_dims. */
static uint32_t build_reduce(struct tide_graph *g, const uint32_t *in, enum tide_op op,
                             const int64_t *axes, int32_t n_axes, bool keep)
{
    uint32_t y = op1(g, op, "y", in[0]);
    int k_axes = op == TIDE_OP_REDUCE_SUM ? TIDE_ATTR_REDUCE_SUM_axes : TIDE_ATTR_REDUCE_MEAN_axes;
    int k_keep =
        op == TIDE_OP_REDUCE_SUM ? TIDE_ATTR_REDUCE_SUM_keep_dims : TIDE_ATTR_REDUCE_MEAN_keep_dims;
    if (n_axes)
        tide_attr_set_ints(g, y, k_axes, axes, n_axes);
    tide_attr_set_bool(g, y, k_keep, keep);
    return y;
}

static const int64_t axis_1[1] = {1}, axes_0_2[2] = {0, 2}, axis_last[1] = {-1};

static uint32_t build_sum_all(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_SUM, NULL, 0, false);
}

static uint32_t build_sum_all_keep(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_SUM, NULL, 0, true);
}

static uint32_t build_sum_1_keep(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_SUM, axis_1, 1, true);
}

static uint32_t build_sum_02(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_SUM, axes_0_2, 2, false);
}

static uint32_t build_sum_last(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_SUM, axis_last, 1, false);
}

static uint32_t build_mean_all(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_MEAN, NULL, 0, false);
}

static uint32_t build_mean_1_keep(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_MEAN, axis_1, 1, true);
}

static uint32_t build_mean_02(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_MEAN, axes_0_2, 2, false);
}

static uint32_t build_mean_last_keep(struct tide_graph *g, const uint32_t *in)
{
    return build_reduce(g, in, TIDE_OP_REDUCE_MEAN, axis_last, 1, true);
}

static uint32_t build_reshape(struct tide_graph *g, const uint32_t *in)
{
    static const int64_t shape[3] = {3, -1, 2};
    uint32_t y = op1(g, TIDE_OP_RESHAPE, "y", in[0]);
    tide_attr_set_ints(g, y, TIDE_ATTR_RESHAPE_shape, shape, 3);
    return y;
}

static uint32_t build_concat(struct tide_graph *g, const uint32_t *in, uint32_t n, int64_t axis)
{
    struct tide_edge e[GC_MAX_INPUTS];
    for (uint32_t i = 0; i < n; i++)
        e[i] = edge_of(in[i]);
    uint32_t y = node_in(g, TIDE_OP_CONCAT, "y", e, n);
    tide_attr_set_int(g, y, TIDE_ATTR_CONCAT_axis, axis);
    return y;
}

static uint32_t build_concat_axis1(struct tide_graph *g, const uint32_t *in)
{
    return build_concat(g, in, 3, 1);
}

static uint32_t build_concat_axis0(struct tide_graph *g, const uint32_t *in)
{
    return build_concat(g, in, 2, -2);
}

static uint32_t build_slice(struct tide_graph *g, const uint32_t *in)
{
    static const int64_t begin[2] = {1, 1}, size[2] = {2, -1};
    uint32_t y = op1(g, TIDE_OP_SLICE, "y", in[0]);
    tide_attr_set_ints(g, y, TIDE_ATTR_SLICE_begin, begin, 2);
    tide_attr_set_ints(g, y, TIDE_ATTR_SLICE_size, size, 2);
    return y;
}

/* x [3, 1] to [2, 3, 4]: a leading axis added and a size-1 axis widened. */
static uint32_t build_broadcast_to(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = op1(g, TIDE_OP_BROADCAST_TO, "y", in[0]);
    struct tide_shape s = {.rank = 3, .dims = {2, 3, 4}};
    tide_attr_set_shape(g, y, TIDE_ATTR_BROADCAST_TO_shape, &s);
    return y;
}

/* x [2, 3] to its own shape: the gradient passes through. */
static uint32_t build_broadcast_to_same(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = op1(g, TIDE_OP_BROADCAST_TO, "y", in[0]);
    struct tide_shape s = {.rank = 2, .dims = {2, 3}};
    tide_attr_set_shape(g, y, TIDE_ATTR_BROADCAST_TO_shape, &s);
    return y;
}

static uint32_t build_conv(struct tide_graph *g, const uint32_t *in, int64_t stride, int64_t pad,
                           int64_t group)
{
    int64_t strides[2] = {stride, stride}, pads[2] = {pad, pad};
    uint32_t y = op2(g, TIDE_OP_CONV2D, "y", in[0], in[1]);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_strides, strides, 2);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_pads, pads, 2);
    tide_attr_set_int(g, y, TIDE_ATTR_CONV2D_group, group);
    return y;
}

static uint32_t build_conv_s2p1(struct tide_graph *g, const uint32_t *in)
{
    return build_conv(g, in, 2, 1, 1);
}

static uint32_t build_conv_s1p0(struct tide_graph *g, const uint32_t *in)
{
    return build_conv(g, in, 1, 0, 1);
}

static uint32_t build_conv_group2(struct tide_graph *g, const uint32_t *in)
{
    return build_conv(g, in, 1, 1, 2);
}

static uint32_t build_conv_depthwise(struct tide_graph *g, const uint32_t *in)
{
    return build_conv(g, in, 2, 1, 3);
}

/* x [2, 2, 7, 6], w [3, 2, 3, 2], stride 2, pad 1, dilations [2, 3]: y [2, 3, 3, 3]. */
static uint32_t build_conv_dilated(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = build_conv(g, in, 2, 1, 1);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_dilations, (const int64_t[]){2, 3}, 2);
    return y;
}

/* x [1, 4, 6, 6], w [4, 2, 3, 3] in 2 groups, pad 2, dilation 2: y [1, 4, 6, 6]. */
static uint32_t build_conv_dilated_group2(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = build_conv(g, in, 1, 2, 2);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_dilations, (const int64_t[]){2, 2}, 2);
    return y;
}

/*
 * The transposed convolution (ONNX's ConvTranspose): a [N, K, OH, OW] and w
 * [K, C, R, S] make y of the input_shape [N, C, H, W]; rows of y past the
 * last window (an ONNX output_padding) get no contribution.
 */
static uint32_t build_conv_transpose(struct tide_graph *g, const uint32_t *in, int64_t stride,
                                     int64_t pad, const int64_t *y_dims, int64_t group)
{
    int64_t strides[2] = {stride, stride}, pads[2] = {pad, pad};
    uint32_t y = op2(g, TIDE_OP_CONV2D_BACKPROP_INPUT, "y", in[0], in[1]);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, strides, 2);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads, pads, 2);
    struct tide_shape shape = {.rank = 4};
    memcpy(shape.dims, y_dims, 4 * sizeof(int64_t));
    tide_attr_set_shape(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, &shape);
    if (group != 1)
        tide_attr_set_int(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_group, group);
    return y;
}

/* a [1, 3, 3, 3], w [3, 2, 3, 3], stride 2, pad 1: y [1, 2, 6, 6] (one output_padding row). */
static uint32_t build_conv_transpose_s2p1(struct tide_graph *g, const uint32_t *in)
{
    return build_conv_transpose(g, in, 2, 1, (const int64_t[]){1, 2, 6, 6}, 1);
}

/* a [2, 2, 3, 3], w [2, 3, 2, 2], stride 1, pad 0: y [2, 3, 4, 4]. */
static uint32_t build_conv_transpose_s1p0(struct tide_graph *g, const uint32_t *in)
{
    return build_conv_transpose(g, in, 1, 0, (const int64_t[]){2, 3, 4, 4}, 1);
}

/* a [1, 4, 3, 3], w [4, 3, 3, 3] in 2 groups, stride 2, pad 1: y [1, 6, 5, 5]. */
static uint32_t build_conv_transpose_group2(struct tide_graph *g, const uint32_t *in)
{
    return build_conv_transpose(g, in, 2, 1, (const int64_t[]){1, 6, 5, 5}, 2);
}

/*
 * a [1, 3, 3, 3], w [3, 2, 3, 3], stride 2, pad 1, dilation 2: y [1, 2, 8, 8]
 * (the Conv2D of 8 rows under a 5-row window gives 3; its last row gets no
 * contribution).
 */
static uint32_t build_conv_transpose_dilated(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = build_conv_transpose(g, in, 2, 1, (const int64_t[]){1, 2, 8, 8}, 1);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations, (const int64_t[]){2, 2}, 2);
    return y;
}

static uint32_t build_pool(struct tide_graph *g, const uint32_t *in, enum tide_op op, int64_t k,
                           int64_t stride, int64_t pad)
{
    int64_t ksize[2] = {k, k}, strides[2] = {stride, stride}, pads[2] = {pad, pad};
    uint32_t y = op1(g, op, "y", in[0]);
    bool max = op == TIDE_OP_MAX_POOL2D;
    tide_attr_set_ints(g, y, max ? TIDE_ATTR_MAX_POOL2D_ksize : TIDE_ATTR_AVG_POOL2D_ksize, ksize,
                       2);
    tide_attr_set_ints(g, y, max ? TIDE_ATTR_MAX_POOL2D_strides : TIDE_ATTR_AVG_POOL2D_strides,
                       strides, 2);
    tide_attr_set_ints(g, y, max ? TIDE_ATTR_MAX_POOL2D_pads : TIDE_ATTR_AVG_POOL2D_pads, pads, 2);
    return y;
}

static uint32_t build_max_k2s2(struct tide_graph *g, const uint32_t *in)
{
    return build_pool(g, in, TIDE_OP_MAX_POOL2D, 2, 2, 0);
}

static uint32_t build_max_k3s2p1(struct tide_graph *g, const uint32_t *in)
{
    return build_pool(g, in, TIDE_OP_MAX_POOL2D, 3, 2, 1);
}

static uint32_t build_avg_k3s2p1(struct tide_graph *g, const uint32_t *in)
{
    return build_pool(g, in, TIDE_OP_AVG_POOL2D, 3, 2, 1);
}

static uint32_t build_avg_k2s1(struct tide_graph *g, const uint32_t *in)
{
    return build_pool(g, in, TIDE_OP_AVG_POOL2D, 2, 1, 0);
}

static uint32_t build_global_avg_pool(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_GLOBAL_AVG_POOL, "y", in[0]);
}

static uint32_t build_batch_norm(struct tide_graph *g, const uint32_t *in)
{
    struct tide_edge e[3] = {edge_of(in[0]), edge_of(in[1]), edge_of(in[2])};
    return node_in(g, TIDE_OP_BATCH_NORM, "y", e, 3);
}

static uint32_t build_neg(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_NEG, "y", in[0]);
}

static uint32_t build_scale(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = op1(g, TIDE_OP_SCALE, "y", in[0]);
    tide_attr_set_float(g, y, TIDE_ATTR_SCALE_scale, -2.5);
    return y;
}

static uint32_t build_add_n(struct tide_graph *g, const uint32_t *in)
{
    struct tide_edge e[3] = {edge_of(in[0]), edge_of(in[1]), edge_of(in[2])};
    return node_in(g, TIDE_OP_ADD_N, "y", e, 3);
}

/* ---- Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) ---- */

static uint32_t build_exp(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_EXP, "y", in[0]);
}

static uint32_t build_log(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_LOG, "y", in[0]);
}

static uint32_t build_sqrt(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_SQRT, "y", in[0]);
}

static uint32_t build_erf(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_ERF, "y", in[0]);
}

static uint32_t build_gelu(struct tide_graph *g, const uint32_t *in)
{
    return op1(g, TIDE_OP_GELU, "y", in[0]);
}

/* Gelu of 3x: inputs over [-3, 3), where the tanh saturates and the cubic term counts. */
static uint32_t build_gelu_wide(struct tide_graph *g, const uint32_t *in)
{
    uint32_t x3 = op1(g, TIDE_OP_SCALE, "x3", in[0]);
    tide_attr_set_float(g, x3, TIDE_ATTR_SCALE_scale, 3.0);
    return op1(g, TIDE_OP_GELU, "y", x3);
}

static uint32_t build_div(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_DIV, "y", in[0], in[1]);
}

/* x / x: both gradients reach the one input, and cancel. */
static uint32_t build_div_self(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_DIV, "y", in[0], in[0]);
}

static uint32_t build_max(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_MAX, "y", in[0], in[1]);
}

static uint32_t build_min(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_MIN, "y", in[0], in[1]);
}

/*
 * The other operand a Const [4] (multiples of 0.05 plus 0.025, so never tied
 * with a GC_DISTINCT input): only one of MaxGrad's (MinGrad's) outputs is read.
 */
static uint32_t build_select_const(struct tide_graph *g, const uint32_t *in, enum tide_op op,
                                   bool const_first)
{
    static const float values[4] = {-0.075f, 0.125f, -0.025f, 0.025f};
    uint32_t k = constant(g, "k", TIDE_DTYPE_FLOAT32, 1, (const int64_t[]){4}, values);
    return const_first ? op2(g, op, "y", k, in[0]) : op2(g, op, "y", in[0], k);
}

static uint32_t build_max_const_b(struct tide_graph *g, const uint32_t *in)
{
    return build_select_const(g, in, TIDE_OP_MAX, false);
}

static uint32_t build_min_const_a(struct tide_graph *g, const uint32_t *in)
{
    return build_select_const(g, in, TIDE_OP_MIN, true);
}

static uint32_t build_pow(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_POW, "y", in[0], in[1]);
}

/* x^x: both gradients reach the one input, x^x (log x + 1) together. */
static uint32_t build_pow_self(struct tide_graph *g, const uint32_t *in)
{
    return op2(g, TIDE_OP_POW, "y", in[0], in[0]);
}

/*
 * x [3, 4] of either sign to a Const exponent [4] of integers, 0 among
 * them: only PowGrad's da is read, exact in sign for negative bases, and 0
 * under the exponent 0.
 */
static uint32_t build_pow_integral(struct tide_graph *g, const uint32_t *in)
{
    static const float exponents[4] = {2.0f, 3.0f, 0.0f, 1.0f};
    uint32_t k = constant(g, "k", TIDE_DTYPE_FLOAT32, 1, (const int64_t[]){4}, exponents);
    return op2(g, TIDE_OP_POW, "y", in[0], k);
}

/* Inputs of this family's gc_cases: grids for Max and Min, positive values for Log, Sqrt, Div. */
// clang-format off
#define MATH_DISTINCT2(A, B) {2, {A, B}, GC_DISTINCT}
#define MATH_BETWEEN1(A) {1, {A}, GC_BETWEEN}
#define MATH_BETWEEN2(A, B) {2, {A, B}, GC_BETWEEN}
#define MATH_POSITIVE0 {0, {0}, GC_POSITIVE}
#define MATH_POSITIVE1(A) {1, {A}, GC_POSITIVE}
#define MATH_POSITIVE2(A, B) {2, {A, B}, GC_POSITIVE}
// clang-format on

/* ---- Masks: Cast, Compare, Select ---- */

static uint32_t cast_to(struct tide_graph *g, const char *name, uint32_t x, enum tide_dtype to)
{
    uint32_t id = op1(g, TIDE_OP_CAST, name, x);
    tide_attr_set_int(g, id, TIDE_ATTR_CAST_to, to);
    return id;
}

static uint32_t compare(struct tide_graph *g, const char *name, uint32_t a, uint32_t b,
                        enum tide_comparison mode)
{
    uint32_t id = op2(g, TIDE_OP_COMPARE, name, a, b);
    tide_attr_set_int(g, id, TIDE_ATTR_COMPARE_mode, mode);
    return id;
}

static uint32_t select3(struct tide_graph *g, const char *name, uint32_t cond, uint32_t x,
                        uint32_t y)
{
    struct tide_edge in[3] = {edge_of(cond), edge_of(x), edge_of(y)};
    return node_in(g, TIDE_OP_SELECT, name, in, 3);
}

/* Cast float32 -> float32: the identity's gradient. */
static uint32_t build_cast(struct tide_graph *g, const uint32_t *in)
{
    return cast_to(g, "y", in[0], TIDE_DTYPE_FLOAT32);
}

/* x + Cast(Cast(x, int32), float32): the path through int32 adds nothing, so dy / dx is 1. */
static uint32_t build_cast_int_path(struct tide_graph *g, const uint32_t *in)
{
    uint32_t i = cast_to(g, "to_int", in[0], TIDE_DTYPE_INT32);
    uint32_t f = cast_to(g, "to_float", i, TIDE_DTYPE_FLOAT32);
    return op2(g, TIDE_OP_ADD, "y", in[0], f);
}

/* A Const cond [3, 4]: 0 and -0 take y; 1, 2, -1 and NaN take x. */
static uint32_t build_select(struct tide_graph *g, const uint32_t *in)
{
    static const float cond[12] = {1, 0, NAN, -0.0f, 2, 0, 1, 1, 0, -1, 0, 1};
    uint32_t c = constant(g, "cond", TIDE_DTYPE_FLOAT32, 2, (const int64_t[]){3, 4}, cond);
    return select3(g, "y", c, in[0], in[1]);
}

/* cond [3, 1] and x or y broadcast to [3, 4]: their gradients are summed back. */
static uint32_t build_select_rows(struct tide_graph *g, const uint32_t *in)
{
    static const float cond[3] = {1, 0, NAN};
    uint32_t c = constant(g, "cond", TIDE_DTYPE_FLOAT32, 2, (const int64_t[]){3, 1}, cond);
    return select3(g, "y", c, in[0], in[1]);
}

/* The mask from data: Select(x > k, x, y); the Compare gives x no gradient of its own. */
static uint32_t build_select_masked(struct tide_graph *g, const uint32_t *in)
{
    static const float values[4] = {-0.075f, 0.125f, -0.025f, 0.025f};
    uint32_t k = constant(g, "k", TIDE_DTYPE_FLOAT32, 1, (const int64_t[]){4}, values);
    uint32_t mask = compare(g, "mask", in[0], k, TIDE_COMPARISON_GREATER);
    return select3(g, "y", mask, in[0], in[1]);
}

/*
 * Trig(a x + b; fn), with a and b putting x in [-1, 1) where fn's derivative
 * is smooth: [-2, 2) for the functions defined everywhere, [-0.7, 0.7) for
 * asin, acos and atanh (their derivatives grow without bound at +-1), [1.5,
 * 2.5) for acosh (defined from 1), [-1, 1) for tan (away from pi / 2).
 */
static uint32_t build_trig(struct tide_graph *g, const uint32_t *in, int fn, double a, double b)
{
    uint32_t ax = op1(g, TIDE_OP_SCALE, "ax", in[0]);
    tide_attr_set_float(g, ax, TIDE_ATTR_SCALE_scale, a);
    uint32_t arg = ax;
    if (b != 0.0) {
        float bf = (float)b;
        arg = op2(g, TIDE_OP_ADD, "ax_b", ax, constant(g, "b", TIDE_DTYPE_FLOAT32, 0, NULL, &bf));
    }
    uint32_t y = op1(g, TIDE_OP_TRIG, "y", arg);
    tide_attr_set_int(g, y, TIDE_ATTR_TRIG_fn, fn);
    return y;
}

#define BUILD_TRIG(NAME, FN, A, B)                                                                 \
    static uint32_t build_trig_##NAME(struct tide_graph *g, const uint32_t *in)                    \
    {                                                                                              \
        return build_trig(g, in, FN, A, B);                                                        \
    }
// clang-format off
BUILD_TRIG(sin, TIDE_TRIG_FUNCTION_SIN, 2.0, 0.0)
BUILD_TRIG(cos, TIDE_TRIG_FUNCTION_COS, 2.0, 0.0)
BUILD_TRIG(tan, TIDE_TRIG_FUNCTION_TAN, 1.0, 0.0)
BUILD_TRIG(asin, TIDE_TRIG_FUNCTION_ASIN, 0.7, 0.0)
BUILD_TRIG(acos, TIDE_TRIG_FUNCTION_ACOS, 0.7, 0.0)
BUILD_TRIG(atan, TIDE_TRIG_FUNCTION_ATAN, 2.0, 0.0)
BUILD_TRIG(sinh, TIDE_TRIG_FUNCTION_SINH, 2.0, 0.0)
BUILD_TRIG(cosh, TIDE_TRIG_FUNCTION_COSH, 2.0, 0.0)
BUILD_TRIG(asinh, TIDE_TRIG_FUNCTION_ASINH, 2.0, 0.0)
BUILD_TRIG(acosh, TIDE_TRIG_FUNCTION_ACOSH, 0.5, 2.0)
BUILD_TRIG(atanh, TIDE_TRIG_FUNCTION_ATANH, 0.7, 0.0)
// clang-format on
#undef BUILD_TRIG

/* ---- Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose) ---- */

static uint32_t build_batch_matmul(struct tide_graph *g, const uint32_t *in, bool ta, bool tb)
{
    uint32_t y = op2(g, TIDE_OP_BATCH_MATMUL, "y", in[0], in[1]);
    tide_attr_set_bool(g, y, TIDE_ATTR_BATCH_MATMUL_transpose_a, ta);
    tide_attr_set_bool(g, y, TIDE_ATTR_BATCH_MATMUL_transpose_b, tb);
    return y;
}

static uint32_t build_batch_matmul_nn(struct tide_graph *g, const uint32_t *in)
{
    return build_batch_matmul(g, in, false, false);
}

static uint32_t build_batch_matmul_nt(struct tide_graph *g, const uint32_t *in)
{
    return build_batch_matmul(g, in, false, true);
}

static uint32_t build_batch_matmul_tn(struct tide_graph *g, const uint32_t *in)
{
    return build_batch_matmul(g, in, true, false);
}

static uint32_t build_batch_matmul_tt(struct tide_graph *g, const uint32_t *in)
{
    return build_batch_matmul(g, in, true, true);
}

static uint32_t build_transpose(struct tide_graph *g, const uint32_t *in, const int64_t *perm,
                                int32_t rank)
{
    uint32_t y = op1(g, TIDE_OP_TRANSPOSE, "y", in[0]);
    tide_attr_set_ints(g, y, TIDE_ATTR_TRANSPOSE_perm, perm, rank);
    return y;
}

/* [2, 3, 4] -> [4, 2, 3]: the inverse permutation differs from the permutation. */
static uint32_t build_transpose_rotate(struct tide_graph *g, const uint32_t *in)
{
    return build_transpose(g, in, (const int64_t[]){2, 0, 1}, 3);
}

/* [2, 3, 4, 2] -> [2, 4, 3, 2]: the attention heads' swap, the last axis kept. */
static uint32_t build_transpose_heads(struct tide_graph *g, const uint32_t *in)
{
    return build_transpose(g, in, (const int64_t[]){0, 2, 1, 3}, 4);
}

/*
 * The gradient of a rank-2 b under a batched a is one MatMul of a and dy
 * seen as rows, not a batched product summed away; the batched forms of the
 * other cases end in SumToShape exactly where an input's batch was broadcast.
 */
static void test_batch_matmul_gradient_nodes(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t a = variable(g, "a", 3, (const int64_t[]){2, 3, 4}, NULL);
    uint32_t w = variable(g, "w", 2, (const int64_t[]){4, 5}, NULL);
    uint32_t c = variable(g, "c", 4, (const int64_t[]){2, 1, 5, 6}, NULL);
    uint32_t y = op2(g, TIDE_OP_BATCH_MATMUL, "y", a, w); /* [2, 3, 5] */
    uint32_t z = op2(g, TIDE_OP_BATCH_MATMUL, "z", y, c); /* [2, 2, 3, 6] */
    uint32_t loss = reduce_sum_all(g, "loss", z);
    infer_ok(g);
    struct tide_edge wrt[3] = {edge_of(a), edge_of(w), edge_of(c)}, grads[3];
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(loss), wrt, 3, grads, &err) != TIDE_OK)
        fail_msg("gradients: %s", err.message);
    uint32_t dw = grads[1].node;
    assert_int_equal(g->nodes[dw].op, TIDE_OP_MATMUL);
    assert_true(g->nodes[dw].attrs[TIDE_ATTR_MATMUL_transpose_a].b);
    assert_int_equal(g->nodes[find(g, "grad/y/a_rows")].op, TIDE_OP_RESHAPE);
    assert_int_equal(g->nodes[find(g, "grad/y/dy_rows")].op, TIDE_OP_RESHAPE);
    /* a's batch is y's: no sum. */
    assert_int_equal(g->nodes[grads[0].node].op, TIDE_OP_BATCH_MATMUL);
    /* y [2, 3, 5] against z's batch [2, 2]: summed back; so is c [2, 1, 5, 6]. */
    assert_int_equal(g->nodes[find(g, "grad/z/a_full")].op, TIDE_OP_BATCH_MATMUL);
    assert_int_equal(g->nodes[find(g, "grad/z/b_full")].op, TIDE_OP_BATCH_MATMUL);
    assert_int_equal(g->nodes[grads[2].node].op, TIDE_OP_SUM_TO_SHAPE);
    assert_int_equal(g->nodes[grads[2].node].outputs[0].shape.rank, 4);
    assert_int_equal(g->nodes[grads[2].node].outputs[0].shape.dims[1], 1);
    tide_graph_free(g);
}

/* Whether node id has an explicit "math" attribute of value math. */
static bool math_is(const struct tide_graph *g, uint32_t id, const char *math)
{
    int k = tide_op_math_attr(g->nodes[id].op);
    return k >= 0 && g->nodes[id].attrs[k].present && strcmp(g->nodes[id].attrs[k].s, math) == 0;
}

/*
 * A product that sets its math passes it to the products its gradient makes
 * (the convolution's two gradients; a BatchMatMul's MatMul over rows and its
 * BatchMatMuls); one that does not leaves theirs unset, for a job's math.
 */
static void test_math_inherited(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = variable(g, "x", 4, (const int64_t[]){1, 2, 5, 5}, NULL);
    uint32_t w = variable(g, "w", 4, (const int64_t[]){3, 2, 3, 3}, NULL);
    uint32_t a = variable(g, "a", 3, (const int64_t[]){2, 3, 4}, NULL);
    uint32_t v = variable(g, "v", 2, (const int64_t[]){4, 5}, NULL);
    uint32_t p = variable(g, "p", 2, (const int64_t[]){6, 4}, NULL);
    uint32_t q = variable(g, "q", 2, (const int64_t[]){4, 2}, NULL);
    uint32_t conv = op2(g, TIDE_OP_CONV2D, "conv", x, w);
    assert_int_equal(tide_attr_set_string(g, conv, TIDE_ATTR_CONV2D_math, "tf32"), TIDE_OK);
    uint32_t bmm = op2(g, TIDE_OP_BATCH_MATMUL, "bmm", a, v);
    assert_int_equal(tide_attr_set_string(g, bmm, TIDE_ATTR_BATCH_MATMUL_math, "tf32"), TIDE_OK);
    uint32_t mm = op2(g, TIDE_OP_MATMUL, "mm", p, q); /* no math of its own */
    uint32_t s1 = reduce_sum_all(g, "s1", conv), s2 = reduce_sum_all(g, "s2", bmm);
    uint32_t s3 = reduce_sum_all(g, "s3", mm);
    uint32_t s12 = op2(g, TIDE_OP_ADD, "s12", s1, s2);
    uint32_t loss = op2(g, TIDE_OP_ADD, "loss", s12, s3);
    infer_ok(g);
    struct tide_edge wrt[6] = {edge_of(x), edge_of(w), edge_of(a),
                               edge_of(v), edge_of(p), edge_of(q)},
                     grads[6];
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(loss), wrt, 6, grads, &err) != TIDE_OK)
        fail_msg("gradients: %s", err.message);
    assert_int_equal(g->nodes[grads[0].node].op, TIDE_OP_CONV2D_BACKPROP_INPUT);
    assert_true(math_is(g, grads[0].node, "tf32"));
    assert_int_equal(g->nodes[grads[1].node].op, TIDE_OP_CONV2D_BACKPROP_FILTER);
    assert_true(math_is(g, grads[1].node, "tf32"));
    assert_int_equal(g->nodes[grads[2].node].op, TIDE_OP_BATCH_MATMUL);
    assert_true(math_is(g, grads[2].node, "tf32"));
    assert_int_equal(g->nodes[grads[3].node].op, TIDE_OP_MATMUL); /* over a's rows */
    assert_true(math_is(g, grads[3].node, "tf32"));
    for (int i = 4; i < 6; i++) {
        assert_int_equal(g->nodes[grads[i].node].op, TIDE_OP_MATMUL);
        assert_false(g->nodes[grads[i].node].attrs[TIDE_ATTR_MATMUL_math].present);
        assert_int_equal(tide_node_math(&g->nodes[grads[i].node]), TIDE_MATH_FP32);
    }
    infer_ok(g);
    tide_graph_free(g);
}

/* ---- Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing) ---- */

/* Gather with repeated ids, so that GatherGrad must add rows up; row 2 is never picked. */
static uint32_t build_gather(struct tide_graph *g, const uint32_t *in)
{
    static const int64_t dims[2] = {2, 3};
    static const int32_t ids[6] = {4, 1, 4, 0, 4, 1};
    uint32_t c = constant(g, "ids", TIDE_DTYPE_INT32, 2, dims, ids);
    return op2(g, TIDE_OP_GATHER, "y", in[0], c);
}

/* A scalar id into a rank-3 table: y is one [2, 3] slice. */
static uint32_t build_gather_scalar(struct tide_graph *g, const uint32_t *in)
{
    static const int32_t id = 2;
    uint32_t c = constant(g, "id", TIDE_DTYPE_INT32, 0, NULL, &id);
    return op2(g, TIDE_OP_GATHER, "y", in[0], c);
}

/*
 * GatherElements along axis 1 of a [3, 4] input: indices [3, 3] with a
 * repeat in row 0 (its gradient adds up), a negative index, and row 2's 3s
 * ignored (no gradient); column 3 of in0 is picked only where ignored.
 */
static uint32_t build_gather_elements(struct tide_graph *g, const uint32_t *in)
{
    static const int64_t dims[2] = {3, 3};
    static const int32_t idx[9] = {1, 1, 0, -2, 0, 1, 3, 2, 3};
    uint32_t c = constant(g, "idx", TIDE_DTYPE_INT32, 2, dims, idx);
    uint32_t y = op2(g, TIDE_OP_GATHER_ELEMENTS, "y", in[0], c);
    tide_attr_set_int(g, y, TIDE_ATTR_GATHER_ELEMENTS_axis, 1);
    tide_attr_set_int(g, y, TIDE_ATTR_GATHER_ELEMENTS_ignore_index, 3);
    return y;
}

/* Along axis 0 of a [3, 2, 2] input, indices [4, 1, 2]: more than data along the axis, fewer on
 * axis 1. */
static uint32_t build_gather_elements_axis0(struct tide_graph *g, const uint32_t *in)
{
    static const int64_t dims[3] = {4, 1, 2};
    static const int32_t idx[8] = {2, 0, -1, 1, 0, 0, 1, -3};
    uint32_t c = constant(g, "idx", TIDE_DTYPE_INT32, 3, dims, idx);
    return op2(g, TIDE_OP_GATHER_ELEMENTS, "y", in[0], c);
}

static uint32_t build_top_k(struct tide_graph *g, const uint32_t *in, int64_t k)
{
    uint32_t y = op1(g, TIDE_OP_TOP_K, "y", in[0]);
    tide_attr_set_int(g, y, TIDE_ATTR_TOP_K_k, k);
    return y;
}

static uint32_t build_top_k_2(struct tide_graph *g, const uint32_t *in)
{
    return build_top_k(g, in, 2);
}

static uint32_t build_top_k_all(struct tide_graph *g, const uint32_t *in)
{
    return build_top_k(g, in, 5);
}

/*
 * A Mixture-of-Experts layer as the MoE model builds it, with Tanh as every
 * expert: tokens x [5, 3] (in0) are routed by TopK(Softmax(gate logits
 * [5, 4] (in1)), 2) over 4 experts of capacity 2, so some choices are
 * dropped; the experts' outputs come back through Gather by combine,
 * weighted by the top-k probabilities and summed over k. Distinct logits
 * keep the routing fixed under the perturbations.
 */
static uint32_t build_moe_layer(struct tide_graph *g, const uint32_t *in)
{
    static const float zeros[3] = {0, 0, 0};
    static const int64_t zero_dims[2] = {1, 3}, weight_shape[3] = {5, 2, 1}, k_axis = 1;
    uint32_t probs = op1(g, TIDE_OP_SOFTMAX, "probs", in[1]);
    uint32_t top = op1(g, TIDE_OP_TOP_K, "top", probs);
    tide_attr_set_int(g, top, TIDE_ATTR_TOP_K_k, 2);
    struct tide_edge top_indices = {top, 1};
    uint32_t route = node_in(g, TIDE_OP_MOE_ROUTE, "route", &top_indices, 1);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 4);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, 2);
    uint32_t zero_row = constant(g, "zero_row", TIDE_DTYPE_FLOAT32, 2, zero_dims, zeros);

    struct tide_edge x_rows[2] = {edge_of(in[0]), edge_of(zero_row)};
    uint32_t x_padded = node_in(g, TIDE_OP_CONCAT, "x_padded", x_rows, 2);
    tide_attr_set_int(g, x_padded, TIDE_ATTR_CONCAT_axis, 0);
    struct tide_edge dispatch[2] = {edge_of(x_padded), {route, 0}};
    uint32_t expert_in = node_in(g, TIDE_OP_GATHER, "expert_in", dispatch, 2);
    uint32_t expert_out = op1(g, TIDE_OP_TANH, "expert_out", expert_in);

    struct tide_edge out_rows[2] = {edge_of(expert_out), edge_of(zero_row)};
    uint32_t out_padded = node_in(g, TIDE_OP_CONCAT, "out_padded", out_rows, 2);
    tide_attr_set_int(g, out_padded, TIDE_ATTR_CONCAT_axis, 0);
    struct tide_edge combine[2] = {edge_of(out_padded), {route, 1}};
    uint32_t back = node_in(g, TIDE_OP_GATHER, "back", combine, 2);
    uint32_t weights = op1(g, TIDE_OP_RESHAPE, "weights", top);
    tide_attr_set_ints(g, weights, TIDE_ATTR_RESHAPE_shape, weight_shape, 3);
    uint32_t weighted = op2(g, TIDE_OP_MUL, "weighted", back, weights);
    uint32_t y = op1(g, TIDE_OP_REDUCE_SUM, "y", weighted);
    tide_attr_set_ints(g, y, TIDE_ATTR_REDUCE_SUM_axes, &k_axis, 1);
    return y;
}

/* ---- Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout) ---- */

static uint32_t build_layer_norm(struct tide_graph *g, const uint32_t *in)
{
    struct tide_edge e[3] = {edge_of(in[0]), edge_of(in[1]), edge_of(in[2])};
    return node_in(g, TIDE_OP_LAYER_NORM, "y", e, 3);
}

/*
 * Dropout at rate 0, where the mask keeps everything: the harness steps once
 * per evaluation of the loss, and each step draws another mask, so a finite
 * difference at rate > 0 would compare two masks.
 * check_dropout_through_autodiff checks the gradient at rate 0.3 against the
 * forward mask of the same step.
 */
static uint32_t build_dropout(struct tide_graph *g, const uint32_t *in)
{
    uint32_t y = op1(g, TIDE_OP_DROPOUT, "y", in[0]);
    tide_attr_set_float(g, y, TIDE_ATTR_DROPOUT_rate, 0.0);
    tide_attr_set_int(g, y, TIDE_ATTR_DROPOUT_seed, 3);
    return y;
}

/*
 * Dropout through autodiff and a real session: x (fed) -> Dropout "drop"
 * (rate 0.3) -> loss = ReduceSum(drop * r), so d loss / d x = r * mask /
 * (1 - rate). In one training step the gradient's mask is the forward's;
 * re-running a step number gives the same mask; another step another;
 * evaluation is the identity; the thread count changes no bit.
 */
static struct tide_session *dropout_session(uint64_t seed, int threads, const float *x,
                                            const float *r, int64_t n, char *grad_name)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t xp = placeholder(g, "x", TIDE_DTYPE_FLOAT32, 1, &n);
    uint32_t drop = op1(g, TIDE_OP_DROPOUT, "drop", xp);
    tide_attr_set_float(g, drop, TIDE_ATTR_DROPOUT_rate, 0.3);
    uint32_t rc = constant(g, "r", TIDE_DTYPE_FLOAT32, 1, &n, r);
    reduce_sum_all(g, "loss", op2(g, TIDE_OP_MUL, "dr", drop, rc));
    infer_ok(g);
    struct tide_edge wrt = edge_of(xp), grad;
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(find(g, "loss")), &wrt, 1, &grad, &err) != TIDE_OK)
        fail_msg("dropout: autodiff: %s", err.message);
    const struct tide_node *dg = &g->nodes[grad.node]; /* "grad/x", the wrt edge's name */
    assert_int_equal(dg->op, TIDE_OP_DROPOUT_GRAD);
    assert_string_equal(dg->attrs[TIDE_ATTR_DROPOUT_GRAD_forward].s, "drop");
    assert_true(dg->attrs[TIDE_ATTR_DROPOUT_GRAD_rate].f == 0.3);
    snprintf(grad_name, TIDE_MAX_NAME + 16, "%s:%u", g->nodes[grad.node].name, grad.output);
    const char *fetches[2] = {"drop", grad_name};
    struct tide_session_options o = tide_session_options_default();
    o.fetches = fetches;
    o.n_fetches = 2;
    o.seed = seed;
    o.threads = threads;
    o.poison = true;
    struct tide_session *s = NULL;
    if (tide_session_new_graph(g, &o, &s, &err) != TIDE_OK)
        fail_msg("dropout: session: %s", err.message);
    if (tide_session_feed(s, "x", x, (uint64_t)n * sizeof(float), &err) != TIDE_OK)
        fail_msg("dropout: feed: %s", err.message);
    return s;
}

/* One step (training) or evaluation of s, fetching the forward y and the gradient dx. */
static void dropout_run(struct tide_session *s, bool train, const char *grad_name, float *y,
                        float *dx, int64_t n)
{
    struct tide_error err = {0};
    enum tide_status st =
        train ? tide_session_step(s, NULL, &err) : tide_session_eval(s, NULL, &err);
    if (st != TIDE_OK)
        fail_msg("dropout: %s: %s", train ? "step" : "eval", err.message);
    gc_fetch(s, "drop", y, n, "dropout");
    gc_fetch(s, grad_name, dx, n, "dropout");
}

static void check_dropout_through_autodiff(void)
{
    enum { N = 100000 };
    const float scale = (float)(1.0 / (1.0 - 0.3));
    float *x = malloc(N * sizeof(float)), *r = malloc(N * sizeof(float));
    float *y1 = malloc(N * sizeof(float)), *d1 = malloc(N * sizeof(float));
    float *y2 = malloc(N * sizeof(float)), *d2 = malloc(N * sizeof(float));
    assert_true(x && r && y1 && d1 && y2 && d2);
    uint64_t rng = seed_of("dropout");
    fill_values(x, N, GC_AWAY, &rng); /* no zeros: a 0 in y is a dropped element */
    fill_values(r, N, GC_UNIFORM, &rng);
    char grad_name[TIDE_MAX_NAME + 16];
    struct tide_session *s = dropout_session(7, 1, x, r, N, grad_name);

    /* Step 1: the kept fraction, the scale, and the gradient's mask is the forward's. */
    dropout_run(s, true, grad_name, y1, d1, N);
    int64_t kept = 0;
    for (int64_t i = 0; i < N; i++) {
        bool keep = y1[i] != 0;
        kept += keep;
        float want_y = keep ? x[i] * scale : 0.0f, want_dx = keep ? r[i] * scale : 0.0f;
        if (y1[i] != want_y || d1[i] != want_dx)
            fail_msg("dropout: element %lld: y %.9g (x %.9g), dx %.9g (r %.9g), scale %.9g",
                     (long long)i, y1[i], x[i], d1[i], r[i], scale);
    }
    if (fabs((double)kept / N - 0.7) > 0.01)
        fail_msg("dropout kept %lld of %d elements at rate 0.3", (long long)kept, N);

    /* Step 2: another mask. */
    dropout_run(s, true, grad_name, y2, d2, N);
    int64_t differ = 0;
    for (int64_t i = 0; i < N; i++)
        differ += (y1[i] == 0) != (y2[i] == 0);
    if (differ < N / 5)
        fail_msg("dropout: steps 1 and 2 differ in %lld of %d mask elements", (long long)differ, N);

    /* Step 1 again (as a resumed job, or a recompute, would run it): the same bits. */
    struct tide_error err = {0};
    assert_int_equal(tide_session_set_step(s, 0, &err), TIDE_OK);
    dropout_run(s, true, grad_name, y2, d2, N);
    assert_memory_equal(y1, y2, N * sizeof(float));
    assert_memory_equal(d1, d2, N * sizeof(float));

    /* Evaluation: the identity (and so is its gradient). */
    dropout_run(s, false, grad_name, y2, d2, N);
    assert_memory_equal(y2, x, N * sizeof(float));
    assert_memory_equal(d2, r, N * sizeof(float));
    tide_session_free(s);

    /* Four threads: the same bits as one. */
    s = dropout_session(7, 4, x, r, N, grad_name);
    dropout_run(s, true, grad_name, y2, d2, N);
    assert_memory_equal(y1, y2, N * sizeof(float));
    assert_memory_equal(d1, d2, N * sizeof(float));
    tide_session_free(s);

    /* Another job seed: another mask. */
    s = dropout_session(8, 1, x, r, N, grad_name);
    dropout_run(s, true, grad_name, y2, d2, N);
    differ = 0;
    for (int64_t i = 0; i < N; i++)
        differ += (y1[i] == 0) != (y2[i] == 0);
    assert_true(differ >= N / 5);
    tide_session_free(s);
    free(x), free(r), free(y1), free(d1), free(y2), free(d2);
}

/* A loss on LayerNorm's statistics has no gradient (as BatchNorm's); through y it is fine. */
static void check_layer_norm_statistics(void)
{
    struct tide_error err = {0};
    struct tide_graph *g = tide_graph_new();
    int64_t xd[2] = {4, 3}, cd = 3;
    uint32_t lx = variable(g, "lx", 2, xd, NULL);
    uint32_t gain = variable(g, "gain", 1, &cd, NULL), bias = variable(g, "bias", 1, &cd, NULL);
    struct tide_edge ln_in[3] = {edge_of(lx), edge_of(gain), edge_of(bias)};
    uint32_t ln = node_in(g, TIDE_OP_LAYER_NORM, "ln", ln_in, 3);
    struct tide_edge inv_std = {ln, 2};
    uint32_t stat = node_in(g, TIDE_OP_REDUCE_SUM, "stat_loss", &inv_std, 1);
    op2(g, TIDE_OP_ADD, "both", stat, reduce_sum_all(g, "y_loss", ln));
    infer_ok(g);
    struct tide_train_options o = sgd("both");
    expect_refusal(g, &o, TIDE_UNSUPPORTED, "node \"ln\" (LayerNorm)", "output 2 (inv_std)");
    o.loss = "y_loss";
    struct tide_autodiff_result res;
    if (tide_autodiff(g, &o, &res, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    assert_int_equal(res.n_trained, 3);
    assert_int_equal(g->nodes[find(g, "grad/ln/backprop")].op, TIDE_OP_LAYER_NORM_GRAD);
    tide_autodiff_result_release(&res);
    tide_graph_free(g);
}

static void test_norm_ops_through_autodiff(void **state)
{
    (void)state;
    check_layer_norm_statistics();
    check_dropout_through_autodiff();
}

/* ---- Sequence-model ops: fused attention (Attention) ---- */

static uint32_t build_attention(struct tide_graph *g, const uint32_t *in, bool causal, double scale)
{
    struct tide_edge e[3] = {edge_of(in[0]), edge_of(in[1]), edge_of(in[2])};
    uint32_t y = node_in(g, TIDE_OP_ATTENTION, "y", e, 3);
    tide_attr_set_bool(g, y, TIDE_ATTR_ATTENTION_causal, causal);
    tide_attr_set_float(g, y, TIDE_ATTR_ATTENTION_scale, scale);
    return y;
}

static uint32_t build_attention_causal(struct tide_graph *g, const uint32_t *in)
{
    return build_attention(g, in, true, 0);
}

static uint32_t build_attention_cross(struct tide_graph *g, const uint32_t *in)
{
    return build_attention(g, in, false, 0.8);
}

/*
 * Attention against its unfused composition, through real sessions:
 * BatchMatMul(q, k^T), Scale, the causal mask (Add of a Const of 0 and
 * -1e9), Softmax, BatchMatMul(P, v); the same outputs and, by autodiff, the
 * same gradients of sum(o * r) with respect to q, k and v, within 1e-5.
 */
enum { CMP_B = 2, CMP_H = 2, CMP_S = 7, CMP_D = 5, CMP_N = CMP_B * CMP_H * CMP_S * CMP_D };

static void attention_composed_run(bool fused, bool causal, float *const *values, const float *r,
                                   float *out)
{
    struct tide_graph *g = tide_graph_new();
    const int64_t dims[4] = {CMP_B, CMP_H, CMP_S, CMP_D};
    uint32_t q = variable(g, "q", 4, dims, values[0]), k = variable(g, "k", 4, dims, values[1]);
    uint32_t v = variable(g, "v", 4, dims, values[2]);
    uint32_t o;
    if (fused) {
        struct tide_edge in[3] = {edge_of(q), edge_of(k), edge_of(v)};
        o = node_in(g, TIDE_OP_ATTENTION, "o", in, 3);
        tide_attr_set_bool(g, o, TIDE_ATTR_ATTENTION_causal, causal);
    } else {
        uint32_t s = op2(g, TIDE_OP_BATCH_MATMUL, "s", q, k);
        tide_attr_set_bool(g, s, TIDE_ATTR_BATCH_MATMUL_transpose_b, true);
        uint32_t scaled = op1(g, TIDE_OP_SCALE, "scaled", s);
        tide_attr_set_float(g, scaled, TIDE_ATTR_SCALE_scale, 1.0 / sqrt((double)CMP_D));
        float mask[CMP_S * CMP_S];
        for (int i = 0; i < CMP_S; i++) {
            for (int j = 0; j < CMP_S; j++)
                mask[i * CMP_S + j] = causal && j > i ? -1e9f : 0.0f;
        }
        const int64_t mask_dims[2] = {CMP_S, CMP_S};
        uint32_t masked = op2(g, TIDE_OP_ADD, "masked", scaled,
                              constant(g, "mask", TIDE_DTYPE_FLOAT32, 2, mask_dims, mask));
        uint32_t p = op1(g, TIDE_OP_SOFTMAX, "p", masked);
        o = op2(g, TIDE_OP_BATCH_MATMUL, "o", p, v);
    }
    uint32_t rc = constant(g, "r", TIDE_DTYPE_FLOAT32, 4, dims, r);
    uint32_t loss = reduce_sum_all(g, "loss", op2(g, TIDE_OP_MUL, "or", o, rc));
    infer_ok(g);
    struct tide_edge wrt[3] = {edge_of(q), edge_of(k), edge_of(v)}, grads[3];
    struct tide_error err = {0};
    if (tide_autodiff_gradients(g, edge_of(loss), wrt, 3, grads, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    char names[3][TIDE_MAX_NAME + 16];
    const char *fetches[4] = {"o", names[0], names[1], names[2]};
    for (int i = 0; i < 3; i++)
        snprintf(names[i], sizeof(names[i]), "%s:%u", g->nodes[grads[i].node].name,
                 grads[i].output);
    struct tide_session *s = gc_session(g, fetches, 4, fused ? "fused" : "composed");
    if (tide_session_step(s, NULL, &err) != TIDE_OK)
        fail_msg("step: %s", err.message);
    for (int i = 0; i < 4; i++)
        gc_fetch(s, fetches[i], out + i * CMP_N, CMP_N, fused ? "fused" : "composed");
    tide_session_free(s);
}

static void test_attention_equals_composition(void **state)
{
    (void)state;
    static const char *const what[4] = {"o", "dq", "dk", "dv"};
    float *values[3], r[CMP_N];
    uint64_t rng = seed_of("attention composition");
    for (int i = 0; i < 3; i++) {
        values[i] = malloc(CMP_N * sizeof(float));
        assert_non_null(values[i]);
        fill_values(values[i], CMP_N, GC_UNIFORM, &rng);
    }
    for (int i = 0; i < CMP_N; i++)
        values[0][i] *= 3; /* scores far from uniform */
    fill_values(r, CMP_N, GC_UNIFORM, &rng);
    float *fused = malloc(4 * CMP_N * sizeof(float)), *composed = malloc(4 * CMP_N * sizeof(float));
    assert_non_null(fused);
    assert_non_null(composed);
    for (int causal = 0; causal < 2; causal++) {
        attention_composed_run(true, causal, values, r, fused);
        attention_composed_run(false, causal, values, r, composed);
        for (int t = 0; t < 4; t++) {
            for (int i = 0; i < CMP_N; i++) {
                double a = fused[t * CMP_N + i], b = composed[t * CMP_N + i];
                if (!(fabs(a - b) <= 1e-5 * fmax(1.0, fabs(b))))
                    fail_msg("%s attention %s[%d]: fused %.9g, composed %.9g",
                             causal ? "causal" : "full", what[t], i, a, b);
            }
        }
    }
    free(fused);
    free(composed);
    for (int i = 0; i < 3; i++)
        free(values[i]);
}

/*
 * Attention's lse has no gradient: a loss that reads it is refused, naming
 * the node and the output; through o alone autodiff emits one AttentionGrad.
 */
static void test_attention_lse_refused(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    int64_t d[4] = {1, 2, 3, 4};
    uint32_t q = variable(g, "q", 4, d, NULL);
    struct tide_edge in[3] = {edge_of(q), edge_of(q), edge_of(q)};
    uint32_t att = node_in(g, TIDE_OP_ATTENTION, "att", in, 3);
    struct tide_edge lse = {att, 1};
    uint32_t lse_sum = node_in(g, TIDE_OP_REDUCE_SUM, "lse_loss", &lse, 1);
    uint32_t o_sum = reduce_sum_all(g, "o_loss", att);
    op2(g, TIDE_OP_ADD, "both", lse_sum, o_sum);
    infer_ok(g);
    struct tide_train_options o = sgd("both");
    expect_refusal(g, &o, TIDE_UNSUPPORTED, "node \"att\" (Attention)",
                   "the loss \"both\" depends on output 1 (lse), which has no gradient; only "
                   "output 0 (o) is differentiable");
    o.loss = "o_loss";
    struct tide_autodiff_result r;
    struct tide_error err = {0};
    if (tide_autodiff(g, &o, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    uint32_t grad = find(g, "grad/att/backprop");
    assert_int_equal(g->nodes[grad].op, TIDE_OP_ATTENTION_GRAD);
    assert_true(g->nodes[grad].attrs[TIDE_ATTR_ATTENTION_GRAD_causal].b);
    assert_int_equal(g->nodes[grad].inputs[4].node, att);
    assert_int_equal(g->nodes[grad].inputs[4].output, 1);
    tide_autodiff_result_release(&r);
    tide_graph_free(g);
}

/*
 * A small classifier, so that gradients flow through a chain:
 * y = SoftmaxCrossEntropy(MatMul(Tanh(BiasAdd(MatMul(x, w1), b1)), w2), labels).
 */
static uint32_t build_mlp(struct tide_graph *g, const uint32_t *in)
{
    uint32_t h = op2(g, TIDE_OP_BIAS_ADD, "h", op2(g, TIDE_OP_MATMUL, "xw1", in[0], in[1]), in[2]);
    uint32_t logits = op2(g, TIDE_OP_MATMUL, "logits", op1(g, TIDE_OP_TANH, "t", h), in[3]);
    int64_t n = 4;
    int32_t labels[4] = {2, 0, 1, 2};
    uint32_t l = constant(g, "labels", TIDE_DTYPE_INT32, 1, &n, labels);
    return op2(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "y", logits, l);
}

/*
 * A recurrence that reads x at every one of 20 steps, as an unrolled RNN reads
 * its weights: h = Tanh(h + x), from h = x. x gets 21 contributions, more
 * than one AddN sums (autodiff.c's SUM_FAN_IN), so they are summed in groups.
 */
static uint32_t build_recurrence(struct tide_graph *g, const uint32_t *in)
{
    uint32_t h = in[0];
    for (int t = 0; t < 20; t++) {
        char sum[32], out[32];
        snprintf(sum, sizeof(sum), "a%d", t);
        snprintf(out, sizeof(out), "h%d", t);
        h = op1(g, TIDE_OP_TANH, t == 19 ? "y" : out, op2(g, TIDE_OP_ADD, sum, h, in[0]));
    }
    return h;
}

/* One case per line reads as a table. */
// clang-format off
#define IN1(A) 1, {A}
#define IN2(A, B) 2, {A, B}
#define IN3(A, B, C) 3, {A, B, C}
#define IN4(A, B, C, D) 4, {A, B, C, D}
#define T0 {0, {0}, GC_UNIFORM}
#define T1(A) {1, {A}, GC_UNIFORM}
#define T2(A, B) {2, {A, B}, GC_UNIFORM}
#define T3(A, B, C) {3, {A, B, C}, GC_UNIFORM}
#define T4(A, B, C, D) {4, {A, B, C, D}, GC_UNIFORM}
#define AWAY2(A, B) {2, {A, B}, GC_AWAY}
#define DISTINCT4(A, B, C, D) {4, {A, B, C, D}, GC_DISTINCT}

static const struct gc_case gc_cases[] = {
    {"Identity", IN1(T2(2, 3)), build_identity},
    {"MatMul", IN2(T2(2, 3), T2(3, 4)), build_matmul_nn},
    {"MatMul_b^T", IN2(T2(2, 3), T2(4, 3)), build_matmul_nt},
    {"MatMul_a^T", IN2(T2(3, 2), T2(3, 4)), build_matmul_tn},
    {"MatMul_a^T_b^T", IN2(T2(3, 2), T2(4, 3)), build_matmul_tt},
    {"Add", IN2(T2(2, 3), T2(2, 3)), build_add},
    {"Add_broadcast_row", IN2(T2(2, 3), T1(3)), build_add},
    {"Add_broadcast_both", IN2(T3(2, 1, 3), T2(4, 1)), build_add},
    {"Sub", IN2(T2(2, 3), T2(2, 3)), build_sub},
    {"Sub_broadcast_a", IN2(T1(3), T2(2, 3)), build_sub},
    {"Sub_broadcast_b", IN2(T2(2, 3), T2(2, 1)), build_sub},
    {"Mul", IN2(T2(2, 3), T2(2, 3)), build_mul},
    {"Mul_broadcast_both", IN2(T2(2, 1), T2(1, 3)), build_mul},
    {"Mul_scalar", IN2(T2(2, 3), T0), build_mul},
    {"Mul_self", IN1(T2(2, 3)), build_square},
    {"BiasAdd", IN2(T2(2, 3), T1(3)), build_bias_add},
    {"BiasAdd_NCHW", IN2(T4(2, 3, 2, 2), T1(3)), build_bias_add},
    {"Relu", IN1(AWAY2(3, 5)), build_relu},
    {"Sigmoid", IN1(T2(2, 5)), build_sigmoid},
    {"Tanh", IN1(T2(2, 5)), build_tanh},
    {"Softmax", IN1(T2(2, 4)), build_softmax},
    {"Softmax_axis0", IN1(T2(3, 2)), build_softmax_axis0},
    {"SoftmaxCrossEntropy", IN1(T2(3, 4)), build_softmax_xent},
    {"ReduceSum_all", IN1(T3(2, 3, 4)), build_sum_all},
    {"ReduceSum_all_keep", IN1(T2(2, 3)), build_sum_all_keep},
    {"ReduceSum_1_keep", IN1(T3(2, 3, 4)), build_sum_1_keep},
    {"ReduceSum_0_2", IN1(T3(2, 3, 4)), build_sum_02},
    {"ReduceSum_-1", IN1(T3(2, 3, 4)), build_sum_last},
    {"ReduceMean_all", IN1(T3(2, 3, 4)), build_mean_all},
    {"ReduceMean_1_keep", IN1(T3(2, 3, 4)), build_mean_1_keep},
    {"ReduceMean_0_2", IN1(T3(2, 3, 4)), build_mean_02},
    {"ReduceMean_-1_keep", IN1(T3(2, 3, 4)), build_mean_last_keep},
    {"Reshape", IN1(T2(2, 6)), build_reshape},
    {"Concat_axis1", IN3(T2(2, 1), T2(2, 2), T2(2, 3)), build_concat_axis1},
    {"Concat_axis-2", IN2(T2(1, 3), T2(2, 3)), build_concat_axis0},
    {"Slice", IN1(T2(3, 4)), build_slice},
    {"BroadcastTo", IN1(T2(3, 1)), build_broadcast_to},
    {"BroadcastTo_scalar", IN1(T0), build_broadcast_to},
    {"BroadcastTo_same", IN1(T2(2, 3)), build_broadcast_to_same},
    {"Conv2D_s2_p1", IN2(T4(1, 2, 5, 5), T4(3, 2, 3, 3)), build_conv_s2p1},
    {"Conv2D_s1_p0", IN2(T4(2, 2, 4, 4), T4(2, 2, 2, 2)), build_conv_s1p0},
    {"Conv2DBackpropInput_s2_p1", IN2(T4(1, 3, 3, 3), T4(3, 2, 3, 3)), build_conv_transpose_s2p1},
    {"Conv2DBackpropInput_s1_p0", IN2(T4(2, 2, 3, 3), T4(2, 3, 2, 2)), build_conv_transpose_s1p0},
    {"Conv2DBackpropInput_group2", IN2(T4(1, 4, 3, 3), T4(4, 3, 3, 3)), build_conv_transpose_group2},
    {"Conv2D_group2", IN2(T4(2, 4, 4, 4), T4(6, 2, 3, 3)), build_conv_group2},
    {"Conv2D_depthwise", IN2(T4(1, 3, 5, 5), T4(6, 1, 3, 3)), build_conv_depthwise},
    {"Conv2D_dilated", IN2(T4(2, 2, 7, 6), T4(3, 2, 3, 2)), build_conv_dilated},
    {"Conv2D_dilated_group2", IN2(T4(1, 4, 6, 6), T4(4, 2, 3, 3)), build_conv_dilated_group2},
    {"Conv2DBackpropInput_dilated", IN2(T4(1, 3, 3, 3), T4(3, 2, 3, 3)),
     build_conv_transpose_dilated},
    {"MaxPool2D_k2_s2", IN1(DISTINCT4(1, 2, 4, 4)), build_max_k2s2},
    {"MaxPool2D_k3_s2_p1", IN1(DISTINCT4(1, 2, 5, 5)), build_max_k3s2p1},
    {"AvgPool2D_k3_s2_p1", IN1(T4(1, 2, 4, 4)), build_avg_k3s2p1},
    {"AvgPool2D_k2_s1", IN1(T4(1, 2, 3, 3)), build_avg_k2s1},
    {"GlobalAvgPool", IN1(T4(2, 3, 2, 2)), build_global_avg_pool},
    {"BatchNorm_NCHW", IN3(T4(2, 3, 2, 2), T1(3), T1(3)), build_batch_norm},
    {"BatchNorm_NC", IN3(T2(4, 3), T1(3), T1(3)), build_batch_norm},
    {"Neg", IN1(T2(2, 3)), build_neg},
    {"Scale", IN1(T2(2, 3)), build_scale},
    {"AddN", IN3(T2(2, 3), T2(2, 3), T2(2, 3)), build_add_n},
    /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
    {"Exp", IN1(T2(2, 5)), build_exp},
    {"Log", IN1(MATH_POSITIVE2(2, 5)), build_log},
    {"Sqrt", IN1(MATH_POSITIVE2(2, 5)), build_sqrt},
    {"Gelu", IN1(T2(2, 5)), build_gelu},
    {"Erf", IN1(T2(2, 5)), build_erf},
    {"Gelu_wide", IN1(T2(3, 4)), build_gelu_wide},
    {"Div", IN2(T2(2, 3), MATH_POSITIVE2(2, 3)), build_div},
    {"Div_broadcast_b", IN2(T2(2, 3), MATH_POSITIVE1(3)), build_div},
    {"Div_broadcast_both", IN2(T3(2, 1, 3), MATH_POSITIVE2(4, 1)), build_div},
    {"Div_scalar_a", IN2(T0, MATH_POSITIVE2(2, 3)), build_div},
    {"Div_self", IN1(MATH_POSITIVE2(2, 3)), build_div_self},
    {"Max", IN2(MATH_DISTINCT2(3, 4), MATH_BETWEEN2(3, 4)), build_max},
    {"Max_broadcast_b", IN2(MATH_DISTINCT2(3, 4), MATH_BETWEEN1(4)), build_max},
    {"Max_broadcast_both", IN2(MATH_BETWEEN2(3, 1), MATH_DISTINCT2(1, 4)), build_max},
    {"Min", IN2(MATH_DISTINCT2(3, 4), MATH_BETWEEN2(3, 4)), build_min},
    {"Min_broadcast_a", IN2(MATH_BETWEEN1(4), MATH_DISTINCT2(3, 4)), build_min},
    {"Min_broadcast_both", IN2(MATH_DISTINCT2(3, 1), MATH_BETWEEN2(1, 4)), build_min},
    {"Max_const_b", IN1(MATH_DISTINCT2(3, 4)), build_max_const_b},
    {"Min_const_a", IN1(MATH_DISTINCT2(3, 4)), build_min_const_a},
    {"Pow", IN2(MATH_POSITIVE2(2, 3), T2(2, 3)), build_pow},
    {"Pow_broadcast_b", IN2(MATH_POSITIVE2(2, 3), T1(3)), build_pow},
    {"Pow_broadcast_both", IN2(MATH_POSITIVE2(3, 1), T2(1, 4)), build_pow},
    {"Pow_scalar_b", IN2(MATH_POSITIVE2(4, 3), T0), build_pow},
    {"Pow_scalar_a", IN2(MATH_POSITIVE0, T2(2, 3)), build_pow},
    {"Pow_self", IN1(MATH_POSITIVE2(2, 3)), build_pow_self},
    {"Pow_integral_exponent", IN1(T2(3, 4)), build_pow_integral},
    {"Cast", IN1(T2(2, 3)), build_cast},
    {"Cast_int_path", IN1(MATH_DISTINCT2(2, 3)), build_cast_int_path},
    {"Select", IN2(T2(3, 4), T2(3, 4)), build_select},
    {"Select_broadcast_x", IN2(T2(1, 4), T2(3, 4)), build_select_rows},
    {"Select_broadcast_y", IN2(T2(3, 4), T0), build_select_rows},
    {"Select_broadcast_both", IN2(T1(4), T2(3, 1)), build_select_rows},
    {"Select_masked", IN2(MATH_DISTINCT2(3, 4), T2(3, 4)), build_select_masked},
    {"Trig_sin", IN1(T2(2, 5)), build_trig_sin},
    {"Trig_cos", IN1(T2(2, 5)), build_trig_cos},
    {"Trig_tan", IN1(T2(2, 5)), build_trig_tan},
    {"Trig_asin", IN1(T2(2, 5)), build_trig_asin},
    {"Trig_acos", IN1(T2(2, 5)), build_trig_acos},
    {"Trig_atan", IN1(T2(2, 5)), build_trig_atan},
    {"Trig_sinh", IN1(T2(2, 5)), build_trig_sinh},
    {"Trig_cosh", IN1(T2(2, 5)), build_trig_cosh},
    {"Trig_asinh", IN1(T2(2, 5)), build_trig_asinh},
    {"Trig_acosh", IN1(T2(2, 5)), build_trig_acosh},
    {"Trig_atanh", IN1(T2(2, 5)), build_trig_atanh},

    /* batched products and axis permutation (BatchMatMul, Transpose) */
    {"BatchMatMul", IN2(T3(2, 3, 4), T3(2, 4, 5)), build_batch_matmul_nn},
    {"BatchMatMul_b^T", IN2(T3(2, 3, 4), T3(2, 5, 4)), build_batch_matmul_nt},
    {"BatchMatMul_a^T", IN2(T3(2, 4, 3), T3(2, 4, 5)), build_batch_matmul_tn},
    {"BatchMatMul_a^T_b^T", IN2(T3(2, 4, 3), T3(2, 5, 4)), build_batch_matmul_tt},
    {"BatchMatMul_weight", IN2(T3(2, 3, 4), T2(4, 5)), build_batch_matmul_nn},
    {"BatchMatMul_weight_b^T", IN2(T3(2, 3, 4), T2(5, 4)), build_batch_matmul_nt},
    {"BatchMatMul_weight_a^T", IN2(T3(2, 4, 3), T2(4, 5)), build_batch_matmul_tn},
    {"BatchMatMul_left_rank2", IN2(T2(3, 4), T3(2, 4, 5)), build_batch_matmul_nn},
    {"BatchMatMul_broadcast_both", IN2(T4(2, 1, 3, 4), T3(3, 4, 2)), build_batch_matmul_nn},
    {"BatchMatMul_broadcast_a^T_b^T", IN2(T4(3, 1, 4, 3), T3(2, 2, 4)), build_batch_matmul_tt},
    {"BatchMatMul_rank2", IN2(T2(2, 3), T2(3, 4)), build_batch_matmul_nn},
    {"Transpose", IN1(T3(2, 3, 4)), build_transpose_rotate},
    {"Transpose_heads", IN1(T4(2, 3, 4, 2)), build_transpose_heads},

    /* indexing (Gather, TopK, Mixture-of-Experts routing) */
    {"Gather", IN1(T2(5, 3)), build_gather},
    {"Gather_scalar_id", IN1(T3(4, 2, 3)), build_gather_scalar},
    {"Gather_moe_layer", 2, {T2(5, 3), {2, {5, 4}, GC_DISTINCT}}, build_moe_layer},
    {"GatherElements", IN1(T2(3, 4)), build_gather_elements},
    {"GatherElements_axis0", IN1(T3(3, 2, 2)), build_gather_elements_axis0},
    {"TopK", IN1(DISTINCT4(2, 1, 3, 5)), build_top_k_2},
    {"TopK_all", IN1(DISTINCT4(1, 1, 2, 5)), build_top_k_all},

    /* normalisation and regularisation (LayerNorm, Dropout) */
    {"LayerNorm_3d", IN3(T3(2, 3, 4), T1(4), T1(4)), build_layer_norm},
    {"LayerNorm_rank1", IN3(T1(6), T1(6), T1(6)), build_layer_norm},
    {"LayerNorm_wide", IN3(T2(2, 17), T1(17), T1(17)), build_layer_norm},
    {"Dropout_rate0", IN1(T2(3, 5)), build_dropout},

    /* fused attention (Attention) */
    {"Attention_causal", IN3(T4(1, 2, 3, 4), T4(1, 2, 3, 4), T4(1, 2, 3, 4)), build_attention_causal},
    {"Attention_cross", IN3(T4(2, 1, 2, 3), T4(2, 1, 4, 3), T4(2, 1, 4, 3)), build_attention_cross},

    {"MLP", IN4(T2(4, 3), T2(3, 5), T1(5), T2(5, 3)), build_mlp},
    {"Recurrence", IN1(T2(2, 3)), build_recurrence},
};
// clang-format on
#undef IN1
#undef IN2
#undef IN3
#undef IN4
#undef T0
#undef T1
#undef T2
#undef T3
#undef T4
#undef AWAY2
#undef DISTINCT4

static void test_gradient_check(void **state)
{
    (void)state;
    int failed_cases = 0;
    for (size_t i = 0; i < sizeof(gc_cases) / sizeof(gc_cases[0]); i++) {
        int failures = gc_run(&gc_cases[i]);
        if (failures) {
            print_error("%s: %d elements out of tolerance\n", gc_cases[i].name, failures);
            failed_cases++;
        }
    }
    if (failed_cases)
        fail_msg("%d of %zu gradient checks failed", failed_cases,
                 sizeof(gc_cases) / sizeof(gc_cases[0]));
}

/*
 * A Variable w feeds both a Compare and the loss: loss = sum(w * (w > 0)).
 * The Compare's path contributes nothing (no node is made for it, nothing is
 * refused), so d loss / d w is the mask itself. A Variable whose only paths
 * to the loss cross a Compare or a Cast to int32 does not reach it.
 */
static void test_mask_paths(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    static const float wv[6] = {-1.5f, 2.0f, 0.0f, 3.25f, -0.0f, 0.5f};
    static const float zero = 0.0f;
    uint32_t w = variable(g, "w", 1, (const int64_t[]){6}, wv);
    uint32_t v = variable(g, "v", 1, (const int64_t[]){6}, wv);
    uint32_t u = variable(g, "u", 1, (const int64_t[]){6}, wv);
    uint32_t z = constant(g, "zero", TIDE_DTYPE_FLOAT32, 0, NULL, &zero);
    uint32_t mask = compare(g, "mask", w, z, TIDE_COMPARISON_GREATER);
    uint32_t masked = op2(g, TIDE_OP_MUL, "masked", w, mask);
    /* v only through a Compare, u only through a Cast to int32 and back. */
    uint32_t v_mask = compare(g, "v_mask", v, z, TIDE_COMPARISON_LESS);
    uint32_t u_int = cast_to(g, "u_int", u, TIDE_DTYPE_INT32);
    uint32_t u_back = cast_to(g, "u_back", u_int, TIDE_DTYPE_FLOAT32);
    uint32_t sum = op2(g, TIDE_OP_ADD, "sum", masked, v_mask);
    sum = op2(g, TIDE_OP_ADD, "sum2", sum, u_back);
    uint32_t loss = reduce_sum_all(g, "loss", sum);
    struct tide_error err = {0};
    const uint32_t n_forward = g->n_nodes;
    struct tide_edge wrt[3] = {edge_of(w), edge_of(v), edge_of(u)}, grads[3];
    if (tide_autodiff_gradients(g, edge_of(loss), wrt, 3, grads, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    assert_int_not_equal(grads[0].node, TIDE_NO_NODE);
    assert_int_equal(grads[1].node, TIDE_NO_NODE);
    assert_int_equal(grads[2].node, TIDE_NO_NODE);
    for (uint32_t id = n_forward; id < g->n_nodes; id++) {
        const char *name = g->nodes[id].name;
        if (strstr(name, "mask/") || strstr(name, "u_int") || strstr(name, "u_back") ||
            strstr(name, "grad/v") || strstr(name, "grad/u"))
            fail_msg("node \"%s\" was made for a path without a gradient", name);
    }
    char gname[TIDE_MAX_NAME + 16];
    snprintf(gname, sizeof(gname), "%s:%u", g->nodes[grads[0].node].name, grads[0].output);
    const char *fetches[1] = {gname};
    struct tide_session *s = gc_session(g, fetches, 1, "mask paths");
    if (tide_session_step(s, NULL, &err) != TIDE_OK)
        fail_msg("step: %s", err.message);
    float dw[6];
    gc_fetch(s, gname, dw, 6, "mask paths");
    static const float want[6] = {0, 1, 0, 1, 0, 1};
    for (int i = 0; i < 6; i++) {
        if (dw[i] != want[i])
            fail_msg("d loss / d w[%d] is %g, want %g", i, dw[i], want[i]);
    }
    tide_session_free(s);
}

/*
 * Round takes no gradient (PyTorch's round, floor, ceil and trunc give
 * zeros): loss = sum(Round(x) * w + x * v + Floor(u)). d loss / d w is
 * Round(x) (half to even: [0, 2, 2, -0, -2, 3]), d loss / d v is x, and
 * d loss / d x is v alone: the path through Round adds nothing, and no
 * node is made for it. u, whose only path crosses a Round, does not reach
 * the loss.
 */
static void test_round_paths(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    static const float xv[6] = {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.75f};
    static const float wv[6] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
    static const float vv[6] = {-1.0f, 0.25f, 2.0f, -3.0f, 0.5f, 1.5f};
    static const float uv[6] = {0.25f, -1.75f, 3.5f, 0.0f, 9.0f, -0.5f};
    const int64_t dims[1] = {6};
    uint32_t x = variable(g, "x", 1, dims, xv), w = variable(g, "w", 1, dims, wv);
    uint32_t v = variable(g, "v", 1, dims, vv), u = variable(g, "u", 1, dims, uv);
    uint32_t rounded = op1(g, TIDE_OP_ROUND, "rounded", x);
    tide_attr_set_int(g, rounded, TIDE_ATTR_ROUND_mode, TIDE_ROUNDING_HALF_TO_EVEN);
    uint32_t floored = op1(g, TIDE_OP_ROUND, "floored", u);
    tide_attr_set_int(g, floored, TIDE_ATTR_ROUND_mode, TIDE_ROUNDING_FLOOR);
    uint32_t y = op2(g, TIDE_OP_ADD, "y", op2(g, TIDE_OP_MUL, "rw", rounded, w),
                     op2(g, TIDE_OP_MUL, "xv", x, v));
    y = op2(g, TIDE_OP_ADD, "y2", y, floored);
    uint32_t loss = reduce_sum_all(g, "loss", y);
    struct tide_error err = {0};
    const uint32_t n_forward = g->n_nodes;
    struct tide_edge wrt[4] = {edge_of(x), edge_of(w), edge_of(v), edge_of(u)}, grads[4];
    if (tide_autodiff_gradients(g, edge_of(loss), wrt, 4, grads, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    for (int k = 0; k < 3; k++)
        assert_int_not_equal(grads[k].node, TIDE_NO_NODE);
    assert_int_equal(grads[3].node, TIDE_NO_NODE);
    for (uint32_t id = n_forward; id < g->n_nodes; id++) {
        const char *name = g->nodes[id].name;
        if (strstr(name, "rounded") || strstr(name, "floored") || strstr(name, "grad/u"))
            fail_msg("node \"%s\" was made for a path without a gradient", name);
    }
    char names[3][TIDE_MAX_NAME + 16];
    const char *fetches[3];
    for (int k = 0; k < 3; k++) {
        snprintf(names[k], sizeof(names[k]), "%s:%u", g->nodes[grads[k].node].name,
                 grads[k].output);
        fetches[k] = names[k];
    }
    struct tide_session *s = gc_session(g, fetches, 3, "round paths");
    if (tide_session_step(s, NULL, &err) != TIDE_OK)
        fail_msg("step: %s", err.message);
    float got[3][6];
    static const float round_x[6] = {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 3.0f};
    const float *want[3] = {vv, round_x, xv};
    static const char *const of[3] = {"x", "w", "v"};
    for (int k = 0; k < 3; k++) {
        gc_fetch(s, names[k], got[k], 6, "round paths");
        for (int i = 0; i < 6; i++) {
            if (got[k][i] != want[k][i])
                fail_msg("d loss / d %s[%d] is %g, want %g", of[k], i, got[k][i], want[k][i]);
        }
    }
    tide_session_free(s);
}

/* Every op with a gradient in ops.def has a case above (by its wire name as a prefix). */
static void test_gradient_check_covers_every_op(void **state)
{
    (void)state;
    static const enum tide_op with_grad[] = {
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS) TIDE_OP_##ID,
#include "graph/ops.def"
#undef TIDE_OP
    };
    /* Memory ops pass gradients through like Identity; the passes insert them, not users. */
    for (size_t i = 0; i < sizeof(with_grad) / sizeof(with_grad[0]); i++) {
        enum tide_op op = with_grad[i];
        uint32_t flags = tide_op_info(op)->flags;
        if (flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY | TIDE_OP_F_UPDATE))
            continue;
        const char *name = tide_op_info(op)->name;
        size_t len = strlen(name);
        bool covered = false;
        for (size_t c = 0; c < sizeof(gc_cases) / sizeof(gc_cases[0]) && !covered; c++) {
            const char *cn = gc_cases[c].name;
            covered = strncmp(cn, name, len) == 0 && (cn[len] == '\0' || cn[len] == '_');
        }
        /* Ops without a gradient are the backward helpers; they need no case. */
        bool differentiable = false;
        switch (op) {
#define TIDE__GRAD_none 0
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                        \
    case TIDE_OP_##ID:                                                                             \
        differentiable = strcmp(#GRAD, "none") != 0;                                               \
        break;
#include "graph/ops.def"
#undef TIDE_OP
#undef TIDE__GRAD_none
        default:
            break;
        }
        if (differentiable && !covered)
            fail_msg("op %s has a gradient but no gradient-check case", name);
    }
}

/* ============================================================================
 * Training through a session
 * ========================================================================== */

/*
 * The session runs tide_autodiff itself: for each optimizer, the first step
 * moves w exactly as the optimizer's rule says from that step's gradient
 * (SGD and Momentum: w - lr * g, the accumulator starting at zero; Adam:
 * w - lr * g / (|g| + eps) after bias correction, m and v starting at zero),
 * and thirty steps lower the loss.
 */
static void test_training_session(void **state)
{
    (void)state;
    static const enum tide_optimizer optimizers[3] = {TIDE_OPTIMIZER_SGD, TIDE_OPTIMIZER_MOMENTUM,
                                                      TIDE_OPTIMIZER_ADAM};
    for (int k = 0; k < 3; k++) {
        uint64_t rng = 42;
        float xv[8 * 3], w1v[3 * 5], b1v[5], w2v[5 * 3];
        int32_t labels[8] = {0, 1, 2, 0, 1, 2, 2, 1};
        fill_values(xv, 24, GC_UNIFORM, &rng);
        fill_values(w1v, 15, GC_UNIFORM, &rng);
        fill_values(b1v, 5, GC_UNIFORM, &rng);
        fill_values(w2v, 15, GC_UNIFORM, &rng);
        struct tide_graph *g = tide_graph_new();
        int64_t xd[2] = {8, 3}, w1d[2] = {3, 5}, b1d[1] = {5}, w2d[2] = {5, 3}, ld[1] = {8};
        uint32_t x = constant(g, "x", TIDE_DTYPE_FLOAT32, 2, xd, xv);
        uint32_t l = constant(g, "labels", TIDE_DTYPE_INT32, 1, ld, labels);
        uint32_t w1 = variable(g, "w1", 2, w1d, w1v);
        uint32_t b1 = variable(g, "b1", 1, b1d, b1v);
        uint32_t w2 = variable(g, "w2", 2, w2d, w2v);
        uint32_t h = op1(g, TIDE_OP_TANH, "h",
                         op2(g, TIDE_OP_BIAS_ADD, "hb", op2(g, TIDE_OP_MATMUL, "xw1", x, w1), b1));
        uint32_t logits = op2(g, TIDE_OP_MATMUL, "logits", h, w2);
        op1(g, TIDE_OP_REDUCE_MEAN, "loss",
            op2(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", logits, l));
        infer_ok(g);

        struct tide_train_options t = {.loss = "loss",
                                       .optimizer = optimizers[k],
                                       .learning_rate =
                                           optimizers[k] == TIDE_OPTIMIZER_ADAM ? 0.05f : 0.5f,
                                       .momentum = 0.9f};
        const char *fetches[1] = {"grad/w1"};
        struct tide_session_options o = tide_session_options_default();
        o.train = &t;
        o.fetches = fetches;
        o.n_fetches = 1;
        o.poison = true;
        struct tide_session *s;
        struct tide_error err = {0};
        if (tide_session_new_graph(g, &o, &s, &err) != TIDE_OK)
            fail_msg("session: %s", err.message);
        assert_non_null(tide_session_training(s));
        assert_int_equal(tide_session_training(s)->n_trained, 3);

        float before[15], after[15], grad[15], loss, first_loss = 0;
        gc_fetch(s, "w1", before, 15, "train");
        for (int step = 0; step < 30; step++) {
            if (tide_session_step(s, NULL, &err) != TIDE_OK)
                fail_msg("step %d: %s", step, err.message);
            gc_fetch(s, "loss", &loss, 1, "train");
            if (step == 0) {
                first_loss = loss;
                gc_fetch(s, "grad/w1", grad, 15, "train");
                gc_fetch(s, "w1", after, 15, "train");
                for (int i = 0; i < 15; i++) {
                    double want =
                        optimizers[k] == TIDE_OPTIMIZER_ADAM
                            ? before[i] - t.learning_rate * grad[i] / (fabs(grad[i]) + 1e-8)
                            : before[i] - t.learning_rate * grad[i];
                    if (fabs(after[i] - want) > 1e-5 * fmax(1, fabs(want)))
                        fail_msg("optimizer %d: w1[%d] is %.8g after one step, wants %.8g "
                                 "(before %.8g, gradient %.8g)",
                                 k, i, (double)after[i], want, (double)before[i], (double)grad[i]);
                }
            }
        }
        if (!(loss < 0.8f * first_loss))
            fail_msg("optimizer %d: loss went from %g to %g in 30 steps", k, (double)first_loss,
                     (double)loss);
        tide_session_free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_structure),
        cmocka_unit_test(test_momentum_state),
        cmocka_unit_test(test_adam_state),
        cmocka_unit_test(test_control_edges_and_accumulation),
        cmocka_unit_test(test_long_sums_in_groups),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_batch_matmul_gradient_nodes),
        cmocka_unit_test(test_math_inherited),
        cmocka_unit_test(test_variable_selection),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_gradients_api),
        cmocka_unit_test(test_pass_through),
        cmocka_unit_test(test_gradient_check_covers_every_op),
        cmocka_unit_test(test_mask_paths),
        cmocka_unit_test(test_round_paths),
        cmocka_unit_test(test_gradient_check),
        cmocka_unit_test(test_attention_lse_refused),
        cmocka_unit_test(test_attention_equals_composition),
        cmocka_unit_test(test_training_session),
        cmocka_unit_test(test_norm_ops_through_autodiff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
