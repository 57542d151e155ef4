/* SPDX-License-Identifier: MIT */
/*
 * test_infer.c: shape and dtype inference of every op (graph/infer.c), driven
 * through tide_graph_infer (and tide_graph_infer_node, one node at a time).
 *
 * Each test builds small graphs with the IR builder API: placeholders of given
 * shapes feeding the op under test. Passing cases check the exact dtype and
 * shape of every output (and nbytes for some); refused cases check the status
 * and that the message names the failing node and holds the key words and
 * numbers. The last test checks that every op in ops.def had at least one
 * passing and one refused case.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "graph/graph.h"

/* The graph under test and the limits to infer it with (NULL: defaults); reset per test. */
static struct tide_graph *g;
static const struct tide_graph_limits *limits;

/* Which ops had a checked passing case and a checked refusal, across all tests. */
static bool covered_ok[TIDE_OP_COUNT];
static bool covered_bad[TIDE_OP_COUNT];

static int setup(void **state)
{
    (void)state;
    g = tide_graph_new();
    limits = NULL;
    return g ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tide_graph_free(g);
    g = NULL;
    return 0;
}

/* Starts over with an empty graph within one test. */
static void reset(void)
{
    teardown(NULL);
    assert_int_equal(setup(NULL), 0);
}

/* ============================================================================
 * Builders
 * ========================================================================== */

#define DIMS(...)  ((const int64_t[]){__VA_ARGS__})
#define COUNT(...) ((int32_t)(sizeof(DIMS(__VA_ARGS__)) / sizeof(int64_t)))
/* A shape literal: SHAPE(2, 3). SCALAR is the rank-0 shape. */
#define SHAPE(...) tide_shape_make(COUNT(__VA_ARGS__), DIMS(__VA_ARGS__))
#define SCALAR     tide_shape_make(0, NULL)
/* An INTS attribute value: tide_attr_set_ints(g, id, k, LIST(1, 2)). */
#define LIST(...) DIMS(__VA_ARGS__), COUNT(__VA_ARGS__)

/* Adds a node of op reading output 0 of each of ids: OP(TIDE_OP_ADD, "sum", a, b). */
#define OP(op, name, ...)                                                                          \
    add_op((op), (name), (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t)),   \
           (const uint32_t[]){__VA_ARGS__})

static uint32_t add_node(enum tide_op op, const char *name)
{
    struct tide_error err = {0};
    uint32_t id;
    enum tide_status st = tide_graph_add_node(g, op, name, &id, &err);
    if (st != TIDE_OK)
        fail_msg("adding %s: %s", name, err.message);
    return id;
}

static void set_edges(uint32_t id, const struct tide_edge *edges, uint32_t n)
{
    struct tide_error err = {0};
    assert_int_equal(tide_graph_set_inputs(g, id, edges, n, &err), TIDE_OK);
}

static uint32_t add_op(enum tide_op op, const char *name, uint32_t n, const uint32_t *inputs)
{
    uint32_t id = add_node(op, name);
    struct tide_edge edges[8];
    assert_true(n <= 8);
    for (uint32_t i = 0; i < n; i++)
        edges[i] = (struct tide_edge){inputs[i], 0};
    set_edges(id, edges, n);
    return id;
}

static uint32_t placeholder_of(const char *name, enum tide_dtype dtype, struct tide_shape shape)
{
    uint32_t id = add_node(TIDE_OP_PLACEHOLDER, name);
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, dtype);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &shape);
    return id;
}

/* A float32 placeholder. */
static uint32_t ph(const char *name, struct tide_shape shape)
{
    return placeholder_of(name, TIDE_DTYPE_FLOAT32, shape);
}

/* A float32 Variable with the default init. */
static uint32_t var(const char *name, struct tide_shape shape)
{
    uint32_t id = add_node(TIDE_OP_VARIABLE, name);
    tide_attr_set_dtype(g, id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_VARIABLE_shape, &shape);
    return id;
}

static void set_shape(uint32_t id, int k, struct tide_shape shape)
{
    tide_attr_set_shape(g, id, k, &shape);
}

static void set_string(uint32_t id, int k, const char *s)
{
    assert_int_equal(tide_attr_set_string(g, id, k, s), TIDE_OK);
}

/* Sets a tensor attribute of zeros with the given byte count. */
static void set_tensor(uint32_t id, int k, enum tide_dtype dtype, struct tide_shape shape,
                       uint64_t nbytes)
{
    static const uint8_t zeros[1024];
    assert_true(nbytes <= sizeof(zeros));
    assert_int_equal(tide_attr_set_tensor(g, id, k, dtype, &shape, zeros, nbytes), TIDE_OK);
}

/* ============================================================================
 * Expectations
 * ========================================================================== */

static void infer_ok(void)
{
    struct tide_error err = {0};
    enum tide_status st = tide_graph_infer(g, limits, &err);
    if (st != TIDE_OK)
        fail_msg("infer failed with %s: %s", tide_status_name(st), err.message);
}

/* Output k of node id must be dtype and shape. */
static void expect_out(uint32_t id, uint32_t k, enum tide_dtype dtype, struct tide_shape want)
{
    const struct tide_node *node = &g->nodes[id];
    assert_true(k < node->n_outputs);
    const struct tide_output *out = &node->outputs[k];
    char got_text[200], want_text[200];
    if (out->dtype != dtype || !tide_shape_equal(&out->shape, &want))
        fail_msg("node %s output %u is %s %s, want %s %s", node->name, k,
                 tide_dtype_name(out->dtype), tide_shape_format(&out->shape, got_text, 200),
                 tide_dtype_name(dtype), tide_shape_format(&want, want_text, 200));
    covered_ok[node->op] = true;
}

static void expect_f32(uint32_t id, struct tide_shape want)
{
    expect_out(id, 0, TIDE_DTYPE_FLOAT32, want);
}

static void expect_nbytes(uint32_t id, uint32_t k, uint64_t nbytes)
{
    assert_int_equal(g->nodes[id].outputs[k].nbytes, nbytes);
}

/* For ops without outputs (WriteBack, Apply*): inference passed and set nothing. */
static void expect_no_outputs(uint32_t id)
{
    assert_int_equal(g->nodes[id].n_outputs, 0);
    covered_ok[g->nodes[id].op] = true;
}

/* An INTS attribute of node id must hold exactly the given list (after normalisation). */
static void expect_ints(uint32_t id, int k, const int64_t *want, int32_t n)
{
    const struct tide_attr_value *a = &g->nodes[id].attrs[k];
    assert_int_equal(a->ints.n, n);
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(a->ints.v[i], want[i]);
}

/*
 * Infers, expecting status want; the message must name node `name` (with its
 * op) and contain every string of the NULL-terminated list that follows.
 */
static void infer_fails_v(enum tide_status want, const char *name, ...)
{
    struct tide_error err = {0};
    enum tide_status st = tide_graph_infer(g, limits, &err);
    if (st != want)
        fail_msg("infer gave %s, want %s; message: %s", tide_status_name(st),
                 tide_status_name(want), err.message);
    uint32_t id = tide_graph_find(g, name);
    assert_int_not_equal(id, TIDE_NO_NODE);
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "node \"%s\" (%s): ", name,
             tide_op_info(g->nodes[id].op)->name);
    if (strncmp(err.message, prefix, strlen(prefix)) != 0)
        fail_msg("message does not start with '%s': %s", prefix, err.message);
    va_list args;
    va_start(args, name);
    for (const char *s = va_arg(args, const char *); s; s = va_arg(args, const char *)) {
        if (!strstr(err.message, s)) {
            va_end(args);
            fail_msg("message lacks '%s': %s", s, err.message);
        }
    }
    va_end(args);
    covered_bad[g->nodes[id].op] = true;
}

#define FAILS(status, name, ...) infer_fails_v((status), (name), __VA_ARGS__, NULL)

/* ============================================================================
 * Sources
 * ========================================================================== */

static void test_placeholder(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3));
    uint32_t labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(4));
    uint32_t s = ph("s", SCALAR);
    uint32_t empty = ph("empty", SHAPE(0, 7));
    infer_ok();
    expect_f32(x, SHAPE(2, 3));
    expect_nbytes(x, 0, 24);
    expect_out(labels, 0, TIDE_DTYPE_INT32, SHAPE(4));
    expect_nbytes(labels, 0, 16);
    expect_f32(s, SCALAR);
    expect_nbytes(s, 0, 4);
    expect_f32(empty, SHAPE(0, 7));
    expect_nbytes(empty, 0, 0);

    reset();
    ph("neg", SHAPE(2, -3));
    FAILS(TIDE_INVALID, "neg", "negative dimension -3", "[2, -3]");

    reset();
    placeholder_of("bad_dtype", TIDE_DTYPE_INVALID, SHAPE(2));
    FAILS(TIDE_INVALID, "bad_dtype", "\"dtype\"", "invalid", "float32 or int32");
}

static void test_tensor_byte_limits(void **state)
{
    (void)state;
    ph("huge", SHAPE((int64_t)1 << 40, (int64_t)1 << 40));
    FAILS(TIDE_LIMIT, "huge", "overflows", "[1099511627776, 1099511627776]");

    /* Default limit: 16 GiB per tensor; 2^32 floats are exactly 16 GiB, one more row is over. */
    reset();
    ph("at_limit", SHAPE((int64_t)1 << 32));
    infer_ok();
    expect_nbytes(tide_graph_find(g, "at_limit"), 0, (uint64_t)16 << 30);

    reset();
    struct tide_graph_limits small = tide_graph_limits_default();
    small.max_tensor_bytes = 1000;
    limits = &small;
    uint32_t x = ph("x", SHAPE(10, 25)); /* 1000 bytes: at the limit */
    infer_ok();
    expect_nbytes(x, 0, 1000);
    uint32_t y = ph("y", SHAPE(16, 16)); /* 1024 bytes */
    (void)y;
    FAILS(TIDE_LIMIT, "y", "1024", "1000", "[16, 16]");

    /* The limit applies to computed outputs too, not just sources. */
    reset();
    limits = &small;
    uint32_t a = ph("a", SHAPE(16, 1)), b = ph("b", SHAPE(1, 16));
    OP(TIDE_OP_MATMUL, "outer", a, b);
    FAILS(TIDE_LIMIT, "outer", "1024", "1000");
}

static void test_variable(void **state)
{
    (void)state;
    uint32_t w = var("w", SHAPE(3, 4));
    uint32_t v = var("v", SHAPE(2));
    set_string(v, TIDE_ATTR_VARIABLE_init, "value");
    set_tensor(v, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_FLOAT32, SHAPE(2), 8);
    uint32_t z = var("z", SHAPE(5));
    set_string(z, TIDE_ATTR_VARIABLE_init, "zeros");
    infer_ok();
    expect_f32(w, SHAPE(3, 4));
    expect_nbytes(w, 0, 48);
    expect_f32(v, SHAPE(2));
    expect_f32(z, SHAPE(5));

    reset();
    v = var("v", SHAPE(3, 4));
    set_string(v, TIDE_ATTR_VARIABLE_init, "value");
    set_tensor(v, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_FLOAT32, SHAPE(4, 3), 48);
    FAILS(TIDE_INVALID, "v", "\"value\"", "[4, 3]", "[3, 4]");

    reset();
    v = var("v", SHAPE(2));
    set_string(v, TIDE_ATTR_VARIABLE_init, "value");
    set_tensor(v, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_INT32, SHAPE(2), 8);
    FAILS(TIDE_INVALID, "v", "int32", "float32");

    reset();
    v = var("v", SHAPE(2));
    set_string(v, TIDE_ATTR_VARIABLE_init, "value");
    FAILS(TIDE_INVALID, "v", "init \"value\" needs attribute \"value\"");

    reset();
    v = var("v", SHAPE(2));
    set_tensor(v, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_FLOAT32, SHAPE(2), 8);
    FAILS(TIDE_INVALID, "v", "\"value\" is set", "glorot_uniform");

    reset();
    v = var("v", SHAPE(2));
    set_string(v, TIDE_ATTR_VARIABLE_init, "value");
    set_tensor(v, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_FLOAT32, SHAPE(2), 4);
    FAILS(TIDE_INVALID, "v", "holds 4 bytes", "needs 8");

    reset();
    v = var("v", SHAPE(2));
    set_string(v, TIDE_ATTR_VARIABLE_init, "gaussian");
    FAILS(TIDE_INVALID, "v", "\"gaussian\"", "he_normal");

    reset();
    v = var("v", SHAPE(2));
    tide_attr_set_dtype(g, v, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_INT32);
    FAILS(TIDE_INVALID, "v", "\"dtype\" is int32", "wants float32");

    reset();
    var("v", SHAPE(2, -1));
    FAILS(TIDE_INVALID, "v", "negative dimension -1");
}

static void test_const(void **state)
{
    (void)state;
    uint32_t c = add_node(TIDE_OP_CONST, "c");
    set_tensor(c, TIDE_ATTR_CONST_value, TIDE_DTYPE_INT32, SHAPE(2, 2), 16);
    uint32_t s = add_node(TIDE_OP_CONST, "s");
    set_tensor(s, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32, SCALAR, 4);
    infer_ok();
    expect_out(c, 0, TIDE_DTYPE_INT32, SHAPE(2, 2));
    expect_nbytes(c, 0, 16);
    expect_f32(s, SCALAR);

    reset();
    c = add_node(TIDE_OP_CONST, "c");
    set_tensor(c, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32, SHAPE(2, 2), 12);
    FAILS(TIDE_INVALID, "c", "holds 12 bytes", "float32", "[2, 2]", "needs 16");

    reset();
    add_node(TIDE_OP_CONST, "c");
    FAILS(TIDE_INVALID, "c", "missing required attribute \"value\"");
}

/* ============================================================================
 * Element-wise ops
 * ========================================================================== */

static void test_identity_and_memory_ops(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_IDENTITY, TIDE_OP_FETCH, TIDE_OP_SWAP_OUT,
                                       TIDE_OP_SWAP_IN};
    uint32_t x = placeholder_of("x", TIDE_DTYPE_INT32, SHAPE(5, 2));
    uint32_t ids[4];
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "op%d", i);
        ids[i] = OP(ops[i], name, x);
    }
    uint32_t wb = OP(TIDE_OP_WRITE_BACK, "wb", ids[3]);
    infer_ok();
    for (int i = 0; i < 4; i++) {
        expect_out(ids[i], 0, TIDE_DTYPE_INT32, SHAPE(5, 2));
        expect_nbytes(ids[i], 0, 40);
    }
    expect_no_outputs(wb);

    /* These ops have no shape rules; their refusals are arity. */
    for (int i = 0; i < 4; i++) {
        reset();
        x = ph("x", SHAPE(2));
        OP(ops[i], "bad", x, x);
        FAILS(TIDE_INVALID, "bad", "has 2 data inputs, wants 1");
    }
    reset();
    add_op(TIDE_OP_WRITE_BACK, "bad", 0, NULL);
    FAILS(TIDE_INVALID, "bad", "has 0 data inputs, wants 1");
}

static void test_unary(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_RELU, TIDE_OP_SIGMOID, TIDE_OP_TANH, TIDE_OP_NEG,
                                       TIDE_OP_SCALE};
    uint32_t x = ph("x", SHAPE(2, 3, 4));
    uint32_t ids[5];
    char name[16];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "op%d", i);
        ids[i] = OP(ops[i], name, x);
    }
    tide_attr_set_float(g, ids[4], TIDE_ATTR_SCALE_scale, 0.5);
    infer_ok();
    for (int i = 0; i < 5; i++)
        expect_f32(ids[i], SHAPE(2, 3, 4));

    for (int i = 0; i < 4; i++) {
        reset();
        x = placeholder_of("x", TIDE_DTYPE_INT32, SHAPE(2));
        OP(ops[i], "bad", x);
        FAILS(TIDE_INVALID, "bad", "input 0 (\"x\") is int32, wants float32");
    }
    reset();
    x = ph("x", SHAPE(2));
    uint32_t s = OP(TIDE_OP_SCALE, "bad", x);
    tide_attr_set_float(g, s, TIDE_ATTR_SCALE_scale, INFINITY);
    FAILS(TIDE_INVALID, "bad", "attribute \"scale\" is inf", "finite");
}

static void test_broadcast(void **state)
{
    (void)state;
    uint32_t a = ph("a", SHAPE(2, 3, 4)), b = ph("b", SHAPE(4));
    uint32_t c = ph("c", SHAPE(2, 1, 4)), d = ph("d", SHAPE(3, 1));
    uint32_t s = ph("s", SCALAR), e = ph("e", SHAPE(0, 1)), f = ph("f", SHAPE(1, 5));
    uint32_t add = OP(TIDE_OP_ADD, "add", a, b);
    uint32_t sub = OP(TIDE_OP_SUB, "sub", c, d);
    uint32_t mul = OP(TIDE_OP_MUL, "mul", s, d);
    uint32_t zero = OP(TIDE_OP_ADD, "zero", e, f);
    uint32_t rev = OP(TIDE_OP_MUL, "rev", b, a);
    infer_ok();
    expect_f32(add, SHAPE(2, 3, 4));
    expect_f32(sub, SHAPE(2, 3, 4));
    expect_f32(mul, SHAPE(3, 1));
    expect_f32(zero, SHAPE(0, 5));
    expect_f32(rev, SHAPE(2, 3, 4));

    static const enum tide_op ops[] = {TIDE_OP_ADD, TIDE_OP_SUB, TIDE_OP_MUL};
    for (int i = 0; i < 3; i++) {
        reset();
        a = ph("a", SHAPE(2, 3));
        b = ph("b", SHAPE(4, 3));
        OP(ops[i], "bad", a, b);
        FAILS(TIDE_INVALID, "bad", "[2, 3]", "[4, 3]", "do not broadcast", "2 and 4");
    }
}

static void test_add_n(void **state)
{
    (void)state;
    uint32_t a = ph("a", SHAPE(2, 3)), b = ph("b", SHAPE(2, 3)), c = ph("c", SHAPE(2, 3));
    uint32_t one = OP(TIDE_OP_ADD_N, "one", a);
    uint32_t three = OP(TIDE_OP_ADD_N, "three", a, b, c);
    infer_ok();
    expect_f32(one, SHAPE(2, 3));
    expect_f32(three, SHAPE(2, 3));

    reset();
    a = ph("a", SHAPE(2, 3));
    b = ph("b", SHAPE(1, 3));
    OP(TIDE_OP_ADD_N, "bad", a, a, b);
    FAILS(TIDE_INVALID, "bad", "input 2 (term) has shape [1, 3], wants [2, 3]", "not broadcast");
}

static void test_elementwise_grads(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_RELU_GRAD, TIDE_OP_SIGMOID_GRAD, TIDE_OP_TANH_GRAD,
                                       TIDE_OP_SOFTMAX_GRAD};
    uint32_t dy = ph("dy", SHAPE(2, 5)), y = ph("y", SHAPE(2, 5));
    uint32_t ids[4];
    char name[16];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof(name), "op%d", i);
        ids[i] = OP(ops[i], name, dy, y);
    }
    infer_ok();
    for (int i = 0; i < 4; i++)
        expect_f32(ids[i], SHAPE(2, 5));
    assert_int_equal(g->nodes[ids[3]].attrs[TIDE_ATTR_SOFTMAX_GRAD_axis].i, 1);

    for (int i = 0; i < 4; i++) {
        reset();
        dy = ph("dy", SHAPE(2, 4));
        y = ph("y", SHAPE(2, 5));
        OP(ops[i], "bad", dy, y);
        FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 4], wants [2, 5]");
    }
    reset();
    dy = ph("dy", SHAPE(2, 5));
    uint32_t sg = OP(TIDE_OP_SOFTMAX_GRAD, "bad", dy, dy);
    tide_attr_set_int(g, sg, TIDE_ATTR_SOFTMAX_GRAD_axis, 2);
    FAILS(TIDE_INVALID, "bad", "axis 2", "-2 to 1");
}

/* ============================================================================
 * Linear algebra, bias, softmax
 * ========================================================================== */

static void test_matmul(void **state)
{
    (void)state;
    uint32_t a = ph("a", SHAPE(2, 4)), b = ph("b", SHAPE(4, 5));
    uint32_t at = ph("at", SHAPE(4, 2)), bt = ph("bt", SHAPE(5, 4));
    uint32_t plain = OP(TIDE_OP_MATMUL, "plain", a, b);
    uint32_t ta = OP(TIDE_OP_MATMUL, "ta", at, b);
    tide_attr_set_bool(g, ta, TIDE_ATTR_MATMUL_transpose_a, true);
    uint32_t tb = OP(TIDE_OP_MATMUL, "tb", a, bt);
    tide_attr_set_bool(g, tb, TIDE_ATTR_MATMUL_transpose_b, true);
    uint32_t both = OP(TIDE_OP_MATMUL, "both", at, bt);
    tide_attr_set_bool(g, both, TIDE_ATTR_MATMUL_transpose_a, true);
    tide_attr_set_bool(g, both, TIDE_ATTR_MATMUL_transpose_b, true);
    infer_ok();
    expect_f32(plain, SHAPE(2, 5));
    expect_nbytes(plain, 0, 40);
    expect_f32(ta, SHAPE(2, 5));
    expect_f32(tb, SHAPE(2, 5));
    expect_f32(both, SHAPE(2, 5));

    reset();
    a = ph("a", SHAPE(2, 4));
    b = ph("b", SHAPE(3, 5));
    OP(TIDE_OP_MATMUL, "mm", a, b);
    FAILS(TIDE_INVALID, "mm", "inner dimensions 4 and 3 differ", "a is [2, 4]", "b is [3, 5]");

    reset();
    a = ph("a", SHAPE(2, 4));
    b = ph("b", SHAPE(4, 5));
    uint32_t mm = OP(TIDE_OP_MATMUL, "mm", a, b);
    tide_attr_set_bool(g, mm, TIDE_ATTR_MATMUL_transpose_a, true);
    FAILS(TIDE_INVALID, "mm", "inner dimensions 2 and 4 differ", "[2, 4] transposed");

    reset();
    a = ph("a", SHAPE(2, 3, 4));
    b = ph("b", SHAPE(4, 5));
    OP(TIDE_OP_MATMUL, "mm", a, b);
    FAILS(TIDE_INVALID, "mm", "input 0 (a) has shape [2, 3, 4], wants rank 2");
}

/*
 * The "math" attribute of the products (Conv2D, its gradients, MatMul,
 * BatchMatMul): fp32 by default, tf32 accepted, anything else refused naming
 * the node and the value; tide_node_math reads it, tide_graph_set_math gives
 * a job's math to the nodes that do not set their own.
 */
static void test_math(void **state)
{
    (void)state;
    uint32_t a = ph("a", SHAPE(2, 4)), b = ph("b", SHAPE(4, 5));
    uint32_t plain = OP(TIDE_OP_MATMUL, "plain", a, b);
    uint32_t fast = OP(TIDE_OP_MATMUL, "fast", a, b);
    assert_int_equal(tide_attr_set_string(g, fast, TIDE_ATTR_MATMUL_math, "tf32"), TIDE_OK);
    uint32_t exact = OP(TIDE_OP_MATMUL, "exact", a, b);
    assert_int_equal(tide_attr_set_string(g, exact, TIDE_ATTR_MATMUL_math, "fp32"), TIDE_OK);
    uint32_t x = ph("x", SHAPE(1, 3, 8, 8)), w = ph("w", SHAPE(4, 3, 3, 3));
    uint32_t conv = OP(TIDE_OP_CONV2D, "conv", x, w);
    uint32_t relu = OP(TIDE_OP_RELU, "relu", conv);
    infer_ok();
    assert_int_equal(tide_node_math(&g->nodes[plain]), TIDE_MATH_FP32);
    assert_int_equal(tide_node_math(&g->nodes[fast]), TIDE_MATH_TF32);
    assert_int_equal(tide_node_math(&g->nodes[relu]), TIDE_MATH_FP32); /* no attribute */
    assert_int_equal(tide_op_math_attr(TIDE_OP_RELU), -1);

    /* A job's tf32: the nodes without their own math get it; "exact" keeps fp32. */
    assert_int_equal(tide_graph_set_math(g, TIDE_MATH_TF32), TIDE_OK);
    assert_int_equal(tide_node_math(&g->nodes[plain]), TIDE_MATH_TF32);
    assert_int_equal(tide_node_math(&g->nodes[conv]), TIDE_MATH_TF32);
    assert_int_equal(tide_node_math(&g->nodes[exact]), TIDE_MATH_FP32);
    infer_ok();

    struct tide_error err = {0};
    enum tide_math m = TIDE_MATH_FP32;
    assert_int_equal(tide_math_parse("tf32", &m, &err), TIDE_OK);
    assert_int_equal(m, TIDE_MATH_TF32);
    assert_int_equal(tide_math_parse("TF32", &m, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "math \"TF32\": wants fp32 or tf32"));
    assert_int_equal(tide_math_parse(NULL, &m, &err), TIDE_INVALID);

    static const enum tide_op ops[] = {TIDE_OP_CONV2D, TIDE_OP_MATMUL};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        reset();
        uint32_t id;
        if (ops[i] == TIDE_OP_CONV2D) {
            x = ph("x", SHAPE(1, 3, 8, 8));
            w = ph("w", SHAPE(4, 3, 3, 3));
            id = OP(TIDE_OP_CONV2D, "bad", x, w);
        } else {
            a = ph("a", SHAPE(2, 4));
            b = ph("b", SHAPE(4, 5));
            id = OP(TIDE_OP_MATMUL, "bad", a, b);
        }
        assert_int_equal(tide_attr_set_string(g, id, tide_op_math_attr(ops[i]), "bf16"), TIDE_OK);
        FAILS(TIDE_INVALID, "bad", "attribute \"math\" is \"bf16\", wants fp32 or tf32");
    }
}

static void test_bias_add(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 4, 4)), b = ph("b", SHAPE(3));
    uint32_t x2 = ph("x2", SHAPE(8, 10)), b2 = ph("b2", SHAPE(10));
    uint32_t nchw = OP(TIDE_OP_BIAS_ADD, "nchw", x, b);
    uint32_t nc = OP(TIDE_OP_BIAS_ADD, "nc", x2, b2);
    uint32_t grad = OP(TIDE_OP_BIAS_ADD_GRAD, "grad", nchw);
    infer_ok();
    expect_f32(nchw, SHAPE(2, 3, 4, 4));
    expect_f32(nc, SHAPE(8, 10));
    expect_f32(grad, SHAPE(3));

    reset();
    x = ph("x", SHAPE(2, 3, 4, 4));
    b = ph("b", SHAPE(4));
    OP(TIDE_OP_BIAS_ADD, "bad", x, b);
    FAILS(TIDE_INVALID, "bad", "input 1 (bias) has shape [4], wants [3]", "[2, 3, 4, 4]");

    reset();
    x = ph("x", SHAPE(5));
    OP(TIDE_OP_BIAS_ADD, "bad", x, x);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [5], wants rank 2 or more");

    reset();
    x = ph("x", SHAPE(5));
    OP(TIDE_OP_BIAS_ADD_GRAD, "bad", x);
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [5], wants rank 2 or more");
}

static void test_softmax(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 5));
    uint32_t last = OP(TIDE_OP_SOFTMAX, "last", x);
    uint32_t first = OP(TIDE_OP_SOFTMAX, "first", x);
    tide_attr_set_int(g, first, TIDE_ATTR_SOFTMAX_axis, -2);
    infer_ok();
    expect_f32(last, SHAPE(2, 5));
    expect_f32(first, SHAPE(2, 5));
    assert_int_equal(g->nodes[last].attrs[TIDE_ATTR_SOFTMAX_axis].i, 1);
    assert_int_equal(g->nodes[first].attrs[TIDE_ATTR_SOFTMAX_axis].i, 0);

    reset();
    x = ph("x", SHAPE(2, 5));
    uint32_t s = OP(TIDE_OP_SOFTMAX, "bad", x);
    tide_attr_set_int(g, s, TIDE_ATTR_SOFTMAX_axis, 2);
    FAILS(TIDE_INVALID, "bad", "axis 2", "[2, 5]", "-2 to 1");

    reset();
    x = ph("x", SCALAR);
    OP(TIDE_OP_SOFTMAX, "bad", x);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [], wants rank 1 or more");
}

static void test_softmax_cross_entropy(void **state)
{
    (void)state;
    uint32_t logits = ph("logits", SHAPE(4, 10));
    uint32_t labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(4));
    uint32_t loss = OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY, "loss", logits, labels);
    uint32_t dloss = ph("dloss", SHAPE(4));
    uint32_t grad = OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD, "grad", logits, labels, dloss);
    infer_ok();
    expect_f32(loss, SHAPE(4));
    expect_nbytes(loss, 0, 16);
    expect_f32(grad, SHAPE(4, 10));

    reset();
    logits = ph("logits", SHAPE(4, 10));
    labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(3));
    OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY, "bad", logits, labels);
    FAILS(TIDE_INVALID, "bad", "input 1 (labels) has shape [3], wants [4]", "[4, 10]");

    reset();
    logits = ph("logits", SHAPE(4, 10));
    labels = ph("labels", SHAPE(4));
    OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY, "bad", logits, labels);
    FAILS(TIDE_INVALID, "bad", "input 1 (labels) is float32, wants int32");

    reset();
    logits = placeholder_of("logits", TIDE_DTYPE_INT32, SHAPE(4, 10));
    labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(4));
    OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY, "bad", logits, labels);
    FAILS(TIDE_INVALID, "bad", "input 0 (logits) is int32, wants float32");

    reset();
    logits = ph("logits", SHAPE(4, 0));
    labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(4));
    OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY, "bad", logits, labels);
    FAILS(TIDE_INVALID, "bad", "[4, 0] has no classes");

    reset();
    logits = ph("logits", SHAPE(4, 10));
    labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(4));
    dloss = ph("dloss", SHAPE(5));
    OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD, "bad", logits, labels, dloss);
    FAILS(TIDE_INVALID, "bad", "input 2 (dloss) has shape [5], wants [4]");
}

/* ============================================================================
 * Shape ops
 * ========================================================================== */

static void test_reduce(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 4));
    uint32_t sum = OP(TIDE_OP_REDUCE_SUM, "sum", x);
    tide_attr_set_ints(g, sum, TIDE_ATTR_REDUCE_SUM_axes, LIST(-1, 0));
    uint32_t keep = OP(TIDE_OP_REDUCE_SUM, "keep", x);
    tide_attr_set_ints(g, keep, TIDE_ATTR_REDUCE_SUM_axes, LIST(2, 0));
    tide_attr_set_bool(g, keep, TIDE_ATTR_REDUCE_SUM_keep_dims, true);
    uint32_t all = OP(TIDE_OP_REDUCE_MEAN, "all", x);
    uint32_t all_keep = OP(TIDE_OP_REDUCE_MEAN, "all_keep", x);
    tide_attr_set_bool(g, all_keep, TIDE_ATTR_REDUCE_MEAN_keep_dims, true);
    infer_ok();
    expect_f32(sum, SHAPE(3));
    expect_ints(sum, TIDE_ATTR_REDUCE_SUM_axes, LIST(0, 2));
    expect_f32(keep, SHAPE(1, 3, 1));
    expect_ints(keep, TIDE_ATTR_REDUCE_SUM_axes, LIST(0, 2));
    expect_f32(all, SCALAR);
    expect_nbytes(all, 0, 4);
    expect_ints(all, TIDE_ATTR_REDUCE_MEAN_axes, LIST(0, 1, 2));
    expect_f32(all_keep, SHAPE(1, 1, 1));

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    uint32_t r = OP(TIDE_OP_REDUCE_SUM, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_REDUCE_SUM_axes, LIST(0, 3));
    FAILS(TIDE_INVALID, "bad", "\"axes\" names axis 3", "out of range", "[2, 3, 4]", "-3 to 2");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    r = OP(TIDE_OP_REDUCE_SUM, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_REDUCE_SUM_axes, LIST(1, -2));
    FAILS(TIDE_INVALID, "bad", "[1, -2] names axis 1 twice");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    r = OP(TIDE_OP_REDUCE_MEAN, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_REDUCE_MEAN_axes, LIST(-4));
    FAILS(TIDE_INVALID, "bad", "axis -4", "out of range");
}

static void test_reshape(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 4));
    uint32_t i = placeholder_of("i", TIDE_DTYPE_INT32, SHAPE(4, 6));
    uint32_t infer = OP(TIDE_OP_RESHAPE, "infer", x);
    tide_attr_set_ints(g, infer, TIDE_ATTR_RESHAPE_shape, LIST(6, -1));
    uint32_t flat = OP(TIDE_OP_RESHAPE, "flat", i);
    tide_attr_set_ints(g, flat, TIDE_ATTR_RESHAPE_shape, LIST(24));
    uint32_t one = ph("one", SHAPE(1, 1));
    uint32_t scalar = OP(TIDE_OP_RESHAPE, "scalar", one);
    tide_attr_set_ints(g, scalar, TIDE_ATTR_RESHAPE_shape, NULL, 0);
    infer_ok();
    expect_f32(infer, SHAPE(6, 4));
    expect_out(flat, 0, TIDE_DTYPE_INT32, SHAPE(24));
    expect_f32(scalar, SCALAR);

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    uint32_t r = OP(TIDE_OP_RESHAPE, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_RESHAPE_shape, LIST(5, 5));
    FAILS(TIDE_INVALID, "bad", "[5, 5] has 25 elements", "[2, 3, 4] has 24");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    r = OP(TIDE_OP_RESHAPE, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_RESHAPE_shape, LIST(-1, 2, -1));
    FAILS(TIDE_INVALID, "bad", "more than one -1");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    r = OP(TIDE_OP_RESHAPE, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_RESHAPE_shape, LIST(5, -1));
    FAILS(TIDE_INVALID, "bad", "24 elements, not a multiple of 5");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    r = OP(TIDE_OP_RESHAPE, "bad", x);
    tide_attr_set_ints(g, r, TIDE_ATTR_RESHAPE_shape, LIST(24, -2));
    FAILS(TIDE_INVALID, "bad", "has -2 at index 1");
}

static void test_concat(void **state)
{
    (void)state;
    uint32_t a = ph("a", SHAPE(2, 3)), b = ph("b", SHAPE(2, 5)), c = ph("c", SHAPE(4, 3));
    uint32_t cols = OP(TIDE_OP_CONCAT, "cols", a, b);
    tide_attr_set_int(g, cols, TIDE_ATTR_CONCAT_axis, -1);
    uint32_t rows = OP(TIDE_OP_CONCAT, "rows", a, c, a);
    tide_attr_set_int(g, rows, TIDE_ATTR_CONCAT_axis, 0);
    infer_ok();
    expect_f32(cols, SHAPE(2, 8));
    assert_int_equal(g->nodes[cols].attrs[TIDE_ATTR_CONCAT_axis].i, 1);
    expect_f32(rows, SHAPE(8, 3));

    reset();
    a = ph("a", SHAPE(2, 3));
    b = ph("b", SHAPE(3, 3));
    uint32_t cat = OP(TIDE_OP_CONCAT, "bad", a, b);
    tide_attr_set_int(g, cat, TIDE_ATTR_CONCAT_axis, 1);
    FAILS(TIDE_INVALID, "bad", "input 1 has shape [3, 3]", "[2, 3] except along axis 1");

    reset();
    a = ph("a", SHAPE(2, 3));
    cat = OP(TIDE_OP_CONCAT, "bad", a, a);
    tide_attr_set_int(g, cat, TIDE_ATTR_CONCAT_axis, 2);
    FAILS(TIDE_INVALID, "bad", "axis 2", "out of range");
}

static void test_slice(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(4, 5, 6));
    uint32_t s = OP(TIDE_OP_SLICE, "s", x);
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_begin, LIST(1, 0, 2));
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_size, LIST(2, -1, 4));
    infer_ok();
    expect_f32(s, SHAPE(2, 5, 4));
    expect_ints(s, TIDE_ATTR_SLICE_size, LIST(2, 5, 4));

    reset();
    x = ph("x", SHAPE(4, 5, 6));
    s = OP(TIDE_OP_SLICE, "bad", x);
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_begin, LIST(3, 0, 0));
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_size, LIST(2, 1, 1));
    FAILS(TIDE_INVALID, "bad", "begin 3 + size 2 exceeds dimension 4 at axis 0", "[4, 5, 6]");

    reset();
    x = ph("x", SHAPE(4, 5, 6));
    s = OP(TIDE_OP_SLICE, "bad", x);
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_begin, LIST(0, 6, 0));
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_size, LIST(1, -1, 1));
    FAILS(TIDE_INVALID, "bad", "begin 6", "exceeds dimension 5 at axis 1");

    reset();
    x = ph("x", SHAPE(4, 5, 6));
    s = OP(TIDE_OP_SLICE, "bad", x);
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_begin, LIST(0, 0));
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_size, LIST(1, 1, 1));
    FAILS(TIDE_INVALID, "bad", "\"begin\" [0, 0] has 2 entries, wants 3");

    reset();
    x = ph("x", SHAPE(4, 5, 6));
    s = OP(TIDE_OP_SLICE, "bad", x);
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_begin, LIST(-1, 0, 0));
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_size, LIST(1, 1, 1));
    FAILS(TIDE_INVALID, "bad", "\"begin\" is -1 at axis 0");
}

static void test_slice_grad(void **state)
{
    (void)state;
    uint32_t dy = ph("dy", SHAPE(2, 5, 3));
    uint32_t sg = OP(TIDE_OP_SLICE_GRAD, "sg", dy);
    tide_attr_set_ints(g, sg, TIDE_ATTR_SLICE_GRAD_begin, LIST(1, 0, 3));
    set_shape(sg, TIDE_ATTR_SLICE_GRAD_shape, SHAPE(4, 5, 6));
    infer_ok();
    expect_f32(sg, SHAPE(4, 5, 6));

    reset();
    dy = ph("dy", SHAPE(2, 5, 3));
    sg = OP(TIDE_OP_SLICE_GRAD, "bad", dy);
    tide_attr_set_ints(g, sg, TIDE_ATTR_SLICE_GRAD_begin, LIST(3, 0, 0));
    set_shape(sg, TIDE_ATTR_SLICE_GRAD_shape, SHAPE(4, 5, 6));
    FAILS(TIDE_INVALID, "bad", "begin 3", "exceeds dimension 4 at axis 0", "[4, 5, 6]");

    reset();
    dy = ph("dy", SHAPE(2, 5));
    sg = OP(TIDE_OP_SLICE_GRAD, "bad", dy);
    tide_attr_set_ints(g, sg, TIDE_ATTR_SLICE_GRAD_begin, LIST(0, 0));
    set_shape(sg, TIDE_ATTR_SLICE_GRAD_shape, SHAPE(4, 5, 6));
    FAILS(TIDE_INVALID, "bad", "[4, 5, 6] has rank 3", "[2, 5] has rank 2");
}

static void test_sum_to_shape_and_broadcast_to(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 4));
    uint32_t sum = OP(TIDE_OP_SUM_TO_SHAPE, "sum", x);
    set_shape(sum, TIDE_ATTR_SUM_TO_SHAPE_shape, SHAPE(3, 1));
    uint32_t total = OP(TIDE_OP_SUM_TO_SHAPE, "total", x);
    set_shape(total, TIDE_ATTR_SUM_TO_SHAPE_shape, SCALAR);
    uint32_t y = ph("y", SHAPE(3, 1));
    uint32_t bc = OP(TIDE_OP_BROADCAST_TO, "bc", y);
    set_shape(bc, TIDE_ATTR_BROADCAST_TO_shape, SHAPE(2, 3, 4));
    infer_ok();
    expect_f32(sum, SHAPE(3, 1));
    expect_f32(total, SCALAR);
    expect_f32(bc, SHAPE(2, 3, 4));
    expect_nbytes(bc, 0, 96);

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    sum = OP(TIDE_OP_SUM_TO_SHAPE, "bad", x);
    set_shape(sum, TIDE_ATTR_SUM_TO_SHAPE_shape, SHAPE(2, 4));
    FAILS(TIDE_INVALID, "bad", "[2, 4] does not broadcast to input 0 [2, 3, 4]");

    reset();
    x = ph("x", SHAPE(2, 3));
    bc = OP(TIDE_OP_BROADCAST_TO, "bad", x);
    set_shape(bc, TIDE_ATTR_BROADCAST_TO_shape, SHAPE(3, 3));
    FAILS(TIDE_INVALID, "bad", "input 0 [2, 3] does not broadcast to attribute \"shape\" [3, 3]");

    /* Broadcasting never drops axes. */
    reset();
    x = ph("x", SHAPE(1, 2, 3));
    bc = OP(TIDE_OP_BROADCAST_TO, "bad", x);
    set_shape(bc, TIDE_ATTR_BROADCAST_TO_shape, SHAPE(2, 3));
    FAILS(TIDE_INVALID, "bad", "[1, 2, 3] does not broadcast", "[2, 3]");
}

/* ============================================================================
 * Convolution and pooling
 * ========================================================================== */

static void test_conv2d(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 32, 32)), w = ph("w", SHAPE(16, 3, 5, 5));
    uint32_t plain = OP(TIDE_OP_CONV2D, "plain", x, w);
    uint32_t strided = OP(TIDE_OP_CONV2D, "strided", x, w);
    tide_attr_set_ints(g, strided, TIDE_ATTR_CONV2D_strides, LIST(2, 2));
    tide_attr_set_ints(g, strided, TIDE_ATTR_CONV2D_pads, LIST(2, 2));
    uint32_t x2 = ph("x2", SHAPE(1, 3, 10, 7)), w2 = ph("w2", SHAPE(4, 3, 3, 2));
    uint32_t odd = OP(TIDE_OP_CONV2D, "odd", x2, w2);
    tide_attr_set_ints(g, odd, TIDE_ATTR_CONV2D_strides, LIST(3, 2));
    tide_attr_set_ints(g, odd, TIDE_ATTR_CONV2D_pads, LIST(1, 0));
    infer_ok();
    expect_f32(plain, SHAPE(2, 16, 28, 28));
    expect_nbytes(plain, 0, (uint64_t)2 * 16 * 28 * 28 * 4);
    expect_ints(plain, TIDE_ATTR_CONV2D_strides, LIST(1, 1));
    expect_ints(plain, TIDE_ATTR_CONV2D_pads, LIST(0, 0));
    expect_f32(strided, SHAPE(2, 16, 16, 16));
    expect_f32(odd, SHAPE(1, 4, 4, 3));

    reset();
    x = ph("x", SHAPE(2, 3, 32, 32));
    w = ph("w", SHAPE(16, 4, 5, 5));
    OP(TIDE_OP_CONV2D, "bad", x, w);
    FAILS(TIDE_INVALID, "bad", "[2, 3, 32, 32] has 3 channels", "[16, 4, 5, 5] wants 4");

    reset();
    x = ph("x", SHAPE(1, 1, 3, 3));
    w = ph("w", SHAPE(1, 1, 5, 5));
    OP(TIDE_OP_CONV2D, "bad", x, w);
    FAILS(TIDE_INVALID, "bad",
          "kernel height 5 is larger than the padded input height 3 + 2 * 0 = 3", "[1, 1, 3, 3]");

    reset();
    x = ph("x", SHAPE(1, 1, 3, 3));
    w = ph("w", SHAPE(1, 1, 5, 5));
    uint32_t c = OP(TIDE_OP_CONV2D, "padded", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_pads, LIST(1, 1));
    infer_ok();
    expect_f32(c, SHAPE(1, 1, 1, 1));

    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_strides, LIST(1, 0));
    FAILS(TIDE_INVALID, "bad", "\"strides\" [1, 0] has width 0, wants 1 or more");

    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_strides, LIST(1, 1, 1));
    FAILS(TIDE_INVALID, "bad", "\"strides\" [1, 1, 1] has 3 entries, wants 2");

    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_pads, LIST(-1, 0));
    FAILS(TIDE_INVALID, "bad", "\"pads\" [-1, 0] has height -1, wants 0 or more");

    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_pads, LIST(INT64_MAX / 2, 0));
    FAILS(TIDE_INVALID, "bad", "too large");

    reset();
    x = ph("x", SHAPE(8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    OP(TIDE_OP_CONV2D, "bad", x, w);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [8, 8], wants rank 4 [N, C, H, W]");
}

static void test_conv2d_backprop(void **state)
{
    (void)state;
    uint32_t dy = ph("dy", SHAPE(2, 16, 16, 16)), w = ph("w", SHAPE(16, 3, 5, 5));
    uint32_t dx = OP(TIDE_OP_CONV2D_BACKPROP_INPUT, "dx", dy, w);
    set_shape(dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, SHAPE(2, 3, 32, 32));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, LIST(2, 2));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads, LIST(2, 2));
    uint32_t x = ph("x", SHAPE(2, 3, 32, 32)), dy1 = ph("dy1", SHAPE(2, 16, 28, 28));
    uint32_t dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "dw", x, dy1);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(16, 3, 5, 5));
    infer_ok();
    expect_f32(dx, SHAPE(2, 3, 32, 32));
    expect_f32(dw, SHAPE(16, 3, 5, 5));
    expect_nbytes(dw, 0, 16 * 3 * 5 * 5 * 4);
    expect_ints(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides, LIST(1, 1));

    reset();
    dy = ph("dy", SHAPE(2, 16, 15, 15));
    w = ph("w", SHAPE(16, 3, 5, 5));
    dx = OP(TIDE_OP_CONV2D_BACKPROP_INPUT, "bad", dy, w);
    set_shape(dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, SHAPE(2, 3, 32, 32));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, LIST(2, 2));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads, LIST(2, 2));
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 16, 15, 15], wants [2, 16, 16, 16]",
          "[2, 3, 32, 32]", "[16, 3, 5, 5]");

    reset();
    x = ph("x", SHAPE(2, 3, 32, 32));
    dy = ph("dy", SHAPE(2, 16, 28, 28));
    dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "bad", x, dy);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(16, 4, 5, 5));
    FAILS(TIDE_INVALID, "bad", "has 3 channels", "\"filter_shape\" [16, 4, 5, 5] wants 4");

    reset();
    x = ph("x", SHAPE(2, 3, 32, 32));
    dy = ph("dy", SHAPE(2, 16, 28, 28));
    dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "bad", x, dy);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(8, 3, 5, 5));
    FAILS(TIDE_INVALID, "bad", "input 1 (dy) has shape [2, 16, 28, 28], wants [2, 8, 28, 28]");
}

/* Conv2D's group and its gradients': shapes, and the refusals naming the numbers. */
static void test_conv2d_group(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 6, 8, 8)), w = ph("w", SHAPE(4, 3, 3, 3));
    uint32_t grouped = OP(TIDE_OP_CONV2D, "grouped", x, w);
    tide_attr_set_int(g, grouped, TIDE_ATTR_CONV2D_group, 2);
    uint32_t dwise = ph("dwise_w", SHAPE(12, 1, 3, 3));
    uint32_t depthwise = OP(TIDE_OP_CONV2D, "depthwise", x, dwise);
    tide_attr_set_int(g, depthwise, TIDE_ATTR_CONV2D_group, 6);
    tide_attr_set_ints(g, depthwise, TIDE_ATTR_CONV2D_strides, LIST(2, 2));
    tide_attr_set_ints(g, depthwise, TIDE_ATTR_CONV2D_pads, LIST(1, 1));
    uint32_t dy = ph("dy", SHAPE(2, 4, 6, 6));
    uint32_t dx = OP(TIDE_OP_CONV2D_BACKPROP_INPUT, "dx", dy, w);
    set_shape(dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, SHAPE(2, 6, 8, 8));
    tide_attr_set_int(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_group, 2);
    uint32_t dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "dw", x, dy);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(4, 3, 3, 3));
    tide_attr_set_int(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_group, 2);
    uint32_t plain = OP(TIDE_OP_CONV2D, "plain", x, ph("w6", SHAPE(4, 6, 3, 3)));
    infer_ok();
    expect_f32(grouped, SHAPE(2, 4, 6, 6));
    expect_f32(depthwise, SHAPE(2, 12, 4, 4));
    expect_f32(dx, SHAPE(2, 6, 8, 8));
    expect_f32(dw, SHAPE(4, 3, 3, 3));
    assert_int_equal(g->nodes[plain].attrs[TIDE_ATTR_CONV2D_group].i, 1); /* the default */

    /* The filter's channels must be C / group, which with group 1 reads as before. */
    reset();
    x = ph("x", SHAPE(2, 6, 8, 8));
    w = ph("w", SHAPE(4, 6, 3, 3));
    grouped = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_int(g, grouped, TIDE_ATTR_CONV2D_group, 2);
    FAILS(TIDE_INVALID, "bad", "[2, 6, 8, 8] has 6 channels, 3 per group of 2",
          "[4, 6, 3, 3] wants 6 per group");

    reset();
    x = ph("x", SHAPE(2, 6, 8, 8));
    w = ph("w", SHAPE(4, 1, 3, 3));
    grouped = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_int(g, grouped, TIDE_ATTR_CONV2D_group, 4);
    FAILS(TIDE_INVALID, "bad", "attribute \"group\" 4 does not divide the 6 channels",
          "input 0 (x) [2, 6, 8, 8]");

    reset();
    x = ph("x", SHAPE(2, 6, 8, 8));
    w = ph("w", SHAPE(4, 2, 3, 3));
    grouped = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_int(g, grouped, TIDE_ATTR_CONV2D_group, 3);
    FAILS(TIDE_INVALID, "bad", "attribute \"group\" 3 does not divide the 4 filters",
          "input 1 (w) [4, 2, 3, 3]");

    static const int64_t below[] = {0, -2, INT64_MIN};
    for (size_t i = 0; i < sizeof(below) / sizeof(below[0]); i++) {
        reset();
        x = ph("x", SHAPE(2, 6, 8, 8));
        w = ph("w", SHAPE(4, 6, 3, 3));
        grouped = OP(TIDE_OP_CONV2D, "bad", x, w);
        tide_attr_set_int(g, grouped, TIDE_ATTR_CONV2D_group, below[i]);
        char want[64];
        snprintf(want, sizeof(want), "attribute \"group\" is %" PRId64 ", wants 1 or more",
                 below[i]);
        FAILS(TIDE_INVALID, "bad", want);
    }

    /* The gradients check their group against the shape attribute they are given. */
    reset();
    dy = ph("dy", SHAPE(2, 4, 6, 6));
    w = ph("w", SHAPE(4, 3, 3, 3));
    dx = OP(TIDE_OP_CONV2D_BACKPROP_INPUT, "bad", dy, w);
    set_shape(dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, SHAPE(2, 6, 8, 8));
    FAILS(TIDE_INVALID, "bad", "attribute \"input_shape\" [2, 6, 8, 8] has 6 channels",
          "input 1 (w) [4, 3, 3, 3] wants 3");

    reset();
    x = ph("x", SHAPE(2, 6, 8, 8));
    dy = ph("dy", SHAPE(2, 4, 6, 6));
    dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "bad", x, dy);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(4, 3, 3, 3));
    tide_attr_set_int(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_group, 4);
    FAILS(TIDE_INVALID, "bad", "attribute \"group\" 4 does not divide the 6 channels");
}

/*
 * Conv2D's dilations and its gradients': O = (I + 2 pad - ((k - 1) d + 1)) /
 * stride + 1, and the refusals naming the numbers.
 */
static void test_conv2d_dilations(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 4, 17, 12)), w = ph("w", SHAPE(6, 4, 3, 3));
    uint32_t dilated = OP(TIDE_OP_CONV2D, "dilated", x, w);
    tide_attr_set_ints(g, dilated, TIDE_ATTR_CONV2D_dilations, LIST(2, 3));
    /* height: (17 + 2 * 1 - 5) / 2 + 1 = 8; width: (12 + 0 - 7) / 1 + 1 = 6 */
    uint32_t mixed = OP(TIDE_OP_CONV2D, "mixed", x, w);
    tide_attr_set_ints(g, mixed, TIDE_ATTR_CONV2D_dilations, LIST(2, 3));
    tide_attr_set_ints(g, mixed, TIDE_ATTR_CONV2D_strides, LIST(2, 1));
    tide_attr_set_ints(g, mixed, TIDE_ATTR_CONV2D_pads, LIST(1, 0));
    /* A 1x1 filter reads one cell at any dilation. */
    uint32_t point = OP(TIDE_OP_CONV2D, "point", x, ph("w1", SHAPE(6, 4, 1, 1)));
    tide_attr_set_ints(g, point, TIDE_ATTR_CONV2D_dilations, LIST(1000, 1000));
    uint32_t dy = ph("dy", SHAPE(2, 6, 8, 6));
    uint32_t dx = OP(TIDE_OP_CONV2D_BACKPROP_INPUT, "dx", dy, w);
    set_shape(dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, SHAPE(2, 4, 17, 12));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, LIST(2, 1));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads, LIST(1, 0));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations, LIST(2, 3));
    uint32_t dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "dw", x, dy);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(6, 4, 3, 3));
    tide_attr_set_ints(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides, LIST(2, 1));
    tide_attr_set_ints(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads, LIST(1, 0));
    tide_attr_set_ints(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations, LIST(2, 3));
    uint32_t plain = OP(TIDE_OP_CONV2D, "plain", x, w);
    infer_ok();
    expect_f32(dilated, SHAPE(2, 6, 13, 6));
    expect_f32(mixed, SHAPE(2, 6, 8, 6));
    expect_f32(point, SHAPE(2, 6, 17, 12));
    expect_f32(dx, SHAPE(2, 4, 17, 12));
    expect_f32(dw, SHAPE(6, 4, 3, 3));
    expect_ints(plain, TIDE_ATTR_CONV2D_dilations, LIST(1, 1)); /* the default, written back */

    /* The dilated window must fit the padded input: 3 taps 5 apart span 11 > 8 + 2. */
    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    uint32_t c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_dilations, LIST(1, 5));
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_pads, LIST(1, 1));
    FAILS(TIDE_INVALID, "bad",
          "kernel width 3 dilated by 5 spans more than the padded input width 8 + 2 * 1 = 10",
          "input 0 (x) is [1, 1, 8, 8]");

    /* Exactly fitting: 3 taps 4 apart span 9 = 7 + 2 * 1. */
    reset();
    x = ph("x", SHAPE(1, 1, 7, 7));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "fits", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_dilations, LIST(4, 4));
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_pads, LIST(1, 1));
    infer_ok();
    expect_f32(c, SHAPE(1, 1, 1, 1));

    /* A dilation whose span would overflow int64 is refused, not wrapped. */
    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_dilations, LIST(INT64_MAX, 1));
    FAILS(TIDE_INVALID, "bad", "kernel height 3 dilated by 9223372036854775807 spans more");

    static const int64_t below[][2] = {{0, 1}, {1, -2}, {INT64_MIN, 1}};
    static const char *const want[] = {
        "\"dilations\" [0, 1] has height 0, wants 1 or more",
        "\"dilations\" [1, -2] has width -2, wants 1 or more",
        "\"dilations\" [-9223372036854775808, 1] has height -9223372036854775808, wants 1 or more",
    };
    for (size_t i = 0; i < sizeof(below) / sizeof(below[0]); i++) {
        reset();
        x = ph("x", SHAPE(1, 1, 8, 8));
        w = ph("w", SHAPE(1, 1, 3, 3));
        c = OP(TIDE_OP_CONV2D, "bad", x, w);
        tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_dilations, below[i], 2);
        FAILS(TIDE_INVALID, "bad", want[i]);
    }

    reset();
    x = ph("x", SHAPE(1, 1, 8, 8));
    w = ph("w", SHAPE(1, 1, 3, 3));
    c = OP(TIDE_OP_CONV2D, "bad", x, w);
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_dilations, LIST(2));
    FAILS(TIDE_INVALID, "bad", "\"dilations\" [2] has 1 entries, wants 2");

    /* The gradients check dy against the dilated forward's output. */
    reset();
    dy = ph("dy", SHAPE(2, 6, 15, 10));
    w = ph("w", SHAPE(6, 4, 3, 3));
    dx = OP(TIDE_OP_CONV2D_BACKPROP_INPUT, "bad", dy, w);
    set_shape(dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, SHAPE(2, 4, 17, 12));
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations, LIST(2, 2));
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 6, 15, 10], wants [2, 6, 13, 8]");

    reset();
    x = ph("x", SHAPE(2, 4, 17, 12));
    dy = ph("dy", SHAPE(2, 6, 15, 10));
    dw = OP(TIDE_OP_CONV2D_BACKPROP_FILTER, "bad", x, dy);
    set_shape(dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, SHAPE(6, 4, 3, 3));
    tide_attr_set_ints(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations, LIST(3, 1));
    FAILS(TIDE_INVALID, "bad", "input 1 (dy) has shape [2, 6, 15, 10], wants [2, 6, 11, 10]");
}

static void test_pool2d(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 8, 8));
    uint32_t mp = OP(TIDE_OP_MAX_POOL2D, "mp", x);
    tide_attr_set_ints(g, mp, TIDE_ATTR_MAX_POOL2D_ksize, LIST(2, 2));
    uint32_t ap = OP(TIDE_OP_AVG_POOL2D, "ap", x);
    tide_attr_set_ints(g, ap, TIDE_ATTR_AVG_POOL2D_ksize, LIST(3, 3));
    tide_attr_set_ints(g, ap, TIDE_ATTR_AVG_POOL2D_strides, LIST(1, 1));
    tide_attr_set_ints(g, ap, TIDE_ATTR_AVG_POOL2D_pads, LIST(1, 1));
    uint32_t odd = OP(TIDE_OP_MAX_POOL2D, "odd", x);
    tide_attr_set_ints(g, odd, TIDE_ATTR_MAX_POOL2D_ksize, LIST(3, 2));
    infer_ok();
    expect_f32(mp, SHAPE(2, 3, 4, 4));
    expect_out(mp, 1, TIDE_DTYPE_INT32, SHAPE(2, 3, 4, 4)); /* argmax */
    expect_ints(mp, TIDE_ATTR_MAX_POOL2D_strides, LIST(2, 2));
    expect_ints(mp, TIDE_ATTR_MAX_POOL2D_pads, LIST(0, 0));
    expect_f32(ap, SHAPE(2, 3, 8, 8));
    expect_f32(odd, SHAPE(2, 3, 2, 4));
    expect_ints(odd, TIDE_ATTR_MAX_POOL2D_strides, LIST(3, 2));

    reset();
    x = ph("x", SHAPE(2, 3, 8, 8));
    mp = OP(TIDE_OP_MAX_POOL2D, "bad", x);
    tide_attr_set_ints(g, mp, TIDE_ATTR_MAX_POOL2D_ksize, LIST(2, 2));
    tide_attr_set_ints(g, mp, TIDE_ATTR_MAX_POOL2D_pads, LIST(0, 2));
    FAILS(TIDE_INVALID, "bad", "\"pads\" [0, 2] has width 2, wants less than the kernel width 2");

    reset();
    x = ph("x", SHAPE(2, 3, 8, 8));
    mp = OP(TIDE_OP_MAX_POOL2D, "bad", x);
    tide_attr_set_ints(g, mp, TIDE_ATTR_MAX_POOL2D_ksize, LIST(9, 2));
    FAILS(TIDE_INVALID, "bad", "kernel height 9 is larger than the padded input height 8");

    reset();
    x = ph("x", SHAPE(1, 1, 65536, 32769));
    mp = OP(TIDE_OP_MAX_POOL2D, "bad", x);
    tide_attr_set_ints(g, mp, TIDE_ATTR_MAX_POOL2D_ksize, LIST(2, 2));
    FAILS(TIDE_LIMIT, "bad", "planes of 65536 x 32769 cells, more than the int32 argmax can index");

    reset();
    x = placeholder_of("x", TIDE_DTYPE_INT32, SHAPE(2, 3, 8, 8));
    mp = OP(TIDE_OP_MAX_POOL2D, "bad", x);
    tide_attr_set_ints(g, mp, TIDE_ATTR_MAX_POOL2D_ksize, LIST(2, 2));
    FAILS(TIDE_INVALID, "bad", "input 0 (x)", "float32");

    reset();
    x = ph("x", SHAPE(2, 3, 8, 8));
    ap = OP(TIDE_OP_AVG_POOL2D, "bad", x);
    tide_attr_set_ints(g, ap, TIDE_ATTR_AVG_POOL2D_ksize, LIST(2));
    FAILS(TIDE_INVALID, "bad", "\"ksize\" [2] has 1 entries, wants 2");

    reset();
    x = ph("x", SHAPE(2, 3, 8, 8));
    ap = OP(TIDE_OP_AVG_POOL2D, "bad", x);
    tide_attr_set_ints(g, ap, TIDE_ATTR_AVG_POOL2D_ksize, LIST(0, 2));
    FAILS(TIDE_INVALID, "bad", "\"ksize\" [0, 2] has height 0, wants 1 or more");

    reset();
    x = ph("x", SHAPE(3, 8, 8));
    ap = OP(TIDE_OP_AVG_POOL2D, "bad", x);
    tide_attr_set_ints(g, ap, TIDE_ATTR_AVG_POOL2D_ksize, LIST(2, 2));
    FAILS(TIDE_INVALID, "bad", "[3, 8, 8], wants rank 4");
}

static void test_pool2d_grads(void **state)
{
    (void)state;
    uint32_t dy = ph("dy", SHAPE(2, 3, 4, 4));
    uint32_t am = placeholder_of("argmax", TIDE_DTYPE_INT32, SHAPE(2, 3, 4, 4));
    uint32_t mg = OP(TIDE_OP_MAX_POOL2D_GRAD, "mg", dy, am);
    tide_attr_set_ints(g, mg, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, LIST(2, 2));
    set_shape(mg, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, SHAPE(2, 3, 8, 8));
    uint32_t ag = OP(TIDE_OP_AVG_POOL2D_GRAD, "ag", dy);
    tide_attr_set_ints(g, ag, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, LIST(2, 2));
    set_shape(ag, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, SHAPE(2, 3, 8, 8));
    infer_ok();
    expect_f32(mg, SHAPE(2, 3, 8, 8));
    expect_ints(mg, TIDE_ATTR_MAX_POOL2D_GRAD_strides, LIST(2, 2));
    expect_ints(mg, TIDE_ATTR_MAX_POOL2D_GRAD_pads, LIST(0, 0));
    expect_f32(ag, SHAPE(2, 3, 8, 8));
    expect_ints(ag, TIDE_ATTR_AVG_POOL2D_GRAD_strides, LIST(2, 2));

    reset();
    dy = ph("dy", SHAPE(2, 3, 8, 8));
    am = placeholder_of("argmax", TIDE_DTYPE_INT32, SHAPE(2, 3, 4, 4));
    mg = OP(TIDE_OP_MAX_POOL2D_GRAD, "bad", dy, am);
    tide_attr_set_ints(g, mg, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, LIST(2, 2));
    set_shape(mg, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, SHAPE(2, 3, 8, 8));
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 3, 8, 8], wants [2, 3, 4, 4]");

    reset();
    dy = ph("dy", SHAPE(2, 3, 4, 4));
    mg = OP(TIDE_OP_MAX_POOL2D_GRAD, "bad", dy, dy);
    tide_attr_set_ints(g, mg, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, LIST(2, 2));
    set_shape(mg, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, SHAPE(2, 3, 8, 8));
    FAILS(TIDE_INVALID, "bad", "input 1 (argmax)", "int32");

    reset();
    dy = ph("dy", SHAPE(2, 3, 4, 4));
    am = placeholder_of("argmax", TIDE_DTYPE_INT32, SHAPE(2, 3, 4, 4));
    mg = OP(TIDE_OP_MAX_POOL2D_GRAD, "bad", dy, am);
    tide_attr_set_ints(g, mg, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, LIST(2, 2));
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"input_shape\"");

    reset();
    dy = ph("dy", SHAPE(2, 3, 3, 3));
    ag = OP(TIDE_OP_AVG_POOL2D_GRAD, "bad", dy);
    tide_attr_set_ints(g, ag, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, LIST(2, 2));
    set_shape(ag, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, SHAPE(2, 3, 8, 8));
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 3, 3, 3], wants [2, 3, 4, 4]",
          "[2, 3, 8, 8]");

    reset();
    dy = ph("dy", SHAPE(2, 3, 4, 4));
    ag = OP(TIDE_OP_AVG_POOL2D_GRAD, "bad", dy);
    tide_attr_set_ints(g, ag, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, LIST(2, 2));
    set_shape(ag, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, SHAPE(2, 3, -8, 8));
    FAILS(TIDE_INVALID, "bad", "\"input_shape\" [2, 3, -8, 8] has negative dimension -8");
}

static void test_global_avg_pool(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 7, 7));
    uint32_t gp = OP(TIDE_OP_GLOBAL_AVG_POOL, "gp", x);
    uint32_t gg = OP(TIDE_OP_GLOBAL_AVG_POOL_GRAD, "gg", gp);
    set_shape(gg, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, SHAPE(2, 3, 7, 7));
    infer_ok();
    expect_f32(gp, SHAPE(2, 3));
    expect_nbytes(gp, 0, 24);
    expect_f32(gg, SHAPE(2, 3, 7, 7));

    reset();
    x = ph("x", SHAPE(2, 3));
    OP(TIDE_OP_GLOBAL_AVG_POOL, "bad", x);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [2, 3], wants rank 4");

    reset();
    x = ph("dy", SHAPE(2, 4));
    gg = OP(TIDE_OP_GLOBAL_AVG_POOL_GRAD, "bad", x);
    set_shape(gg, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, SHAPE(2, 3, 7, 7));
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 4], wants [2, 3]", "[2, 3, 7, 7]");
}

/* ============================================================================
 * Batch normalisation
 * ========================================================================== */

static void test_batch_norm(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 4, 4)), gamma = ph("gamma", SHAPE(3)),
             beta = ph("beta", SHAPE(3));
    uint32_t bn = OP(TIDE_OP_BATCH_NORM, "bn", x, gamma, beta);
    uint32_t x2 = ph("x2", SHAPE(8, 5)), c5 = ph("c5", SHAPE(5));
    uint32_t bn2 = OP(TIDE_OP_BATCH_NORM, "bn2", x2, c5, c5);
    uint32_t dy = ph("dy", SHAPE(2, 3, 4, 4));
    uint32_t bng = add_node(TIDE_OP_BATCH_NORM_GRAD, "bng");
    set_edges(bng, (const struct tide_edge[]){{dy, 0}, {x, 0}, {gamma, 0}, {bn, 1}, {bn, 2}}, 5);
    infer_ok();
    expect_f32(bn, SHAPE(2, 3, 4, 4));
    expect_out(bn, 1, TIDE_DTYPE_FLOAT32, SHAPE(3));
    expect_out(bn, 2, TIDE_DTYPE_FLOAT32, SHAPE(3));
    expect_nbytes(bn, 2, 12);
    expect_f32(bn2, SHAPE(8, 5));
    expect_out(bn2, 1, TIDE_DTYPE_FLOAT32, SHAPE(5));
    expect_f32(bng, SHAPE(2, 3, 4, 4));
    expect_out(bng, 1, TIDE_DTYPE_FLOAT32, SHAPE(3));
    expect_out(bng, 2, TIDE_DTYPE_FLOAT32, SHAPE(3));

    reset();
    x = ph("x", SHAPE(2, 3, 4, 4));
    gamma = ph("gamma", SHAPE(4));
    beta = ph("beta", SHAPE(3));
    OP(TIDE_OP_BATCH_NORM, "bad", x, gamma, beta);
    FAILS(TIDE_INVALID, "bad", "input 1 (gamma) has shape [4], wants [3]", "[2, 3, 4, 4]");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    gamma = ph("gamma", SHAPE(3));
    OP(TIDE_OP_BATCH_NORM, "bad", x, gamma, gamma);
    FAILS(TIDE_INVALID, "bad", "[2, 3, 4], wants rank 4 [N, C, H, W] or rank 2 [N, C]");

    reset();
    x = ph("x", SHAPE(2, 3));
    gamma = ph("gamma", SHAPE(3));
    bn = OP(TIDE_OP_BATCH_NORM, "bad", x, gamma, gamma);
    tide_attr_set_float(g, bn, TIDE_ATTR_BATCH_NORM_epsilon, 0.0);
    FAILS(TIDE_INVALID, "bad", "attribute \"epsilon\" is 0, wants a finite value > 0");

    reset();
    x = ph("x", SHAPE(2, 3));
    dy = ph("dy", SHAPE(2, 4));
    gamma = ph("gamma", SHAPE(3));
    OP(TIDE_OP_BATCH_NORM_GRAD, "bad", dy, x, gamma, gamma, gamma);
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 4], wants [2, 3]");

    reset();
    x = ph("x", SHAPE(2, 3));
    gamma = ph("gamma", SHAPE(3));
    uint32_t two = ph("two", SHAPE(2));
    OP(TIDE_OP_BATCH_NORM_GRAD, "bad", x, x, gamma, gamma, two);
    FAILS(TIDE_INVALID, "bad", "input 4 (inv_std) has shape [2], wants [3]");
}

/* ============================================================================
 * Optimizer updates
 * ========================================================================== */

static void test_apply(void **state)
{
    (void)state;
    uint32_t w = var("w", SHAPE(3, 4)), accum = var("accum", SHAPE(3, 4));
    uint32_t m = var("m", SHAPE(3, 4)), v = var("v", SHAPE(3, 4));
    uint32_t grad = ph("grad", SHAPE(3, 4));
    uint32_t sgd = OP(TIDE_OP_APPLY_SGD, "sgd", w, grad);
    tide_attr_set_float(g, sgd, TIDE_ATTR_APPLY_SGD_learning_rate, 0.1);
    uint32_t mom = OP(TIDE_OP_APPLY_MOMENTUM, "mom", w, accum, grad);
    tide_attr_set_float(g, mom, TIDE_ATTR_APPLY_MOMENTUM_learning_rate, 0.1);
    tide_attr_set_float(g, mom, TIDE_ATTR_APPLY_MOMENTUM_momentum, 0.9);
    uint32_t adam = OP(TIDE_OP_APPLY_ADAM, "adam", w, m, v, grad);
    tide_attr_set_float(g, adam, TIDE_ATTR_APPLY_ADAM_learning_rate, 1e-3);
    infer_ok();
    expect_no_outputs(sgd);
    expect_no_outputs(mom);
    expect_no_outputs(adam);

    reset();
    uint32_t x = ph("x", SHAPE(3, 4));
    grad = ph("grad", SHAPE(3, 4));
    sgd = OP(TIDE_OP_APPLY_SGD, "bad", x, grad);
    tide_attr_set_float(g, sgd, TIDE_ATTR_APPLY_SGD_learning_rate, 0.1);
    FAILS(TIDE_INVALID, "bad", "input 0 (var) must be a Variable", "\"x\" is a Placeholder");

    reset();
    w = var("w", SHAPE(3, 4));
    grad = ph("grad", SHAPE(4, 3));
    sgd = OP(TIDE_OP_APPLY_SGD, "bad", w, grad);
    tide_attr_set_float(g, sgd, TIDE_ATTR_APPLY_SGD_learning_rate, 0.1);
    FAILS(TIDE_INVALID, "bad", "input 1 (grad) has shape [4, 3], wants [3, 4]");

    reset();
    w = var("w", SHAPE(3, 4));
    grad = ph("grad", SHAPE(3, 4));
    sgd = OP(TIDE_OP_APPLY_SGD, "bad", w, grad);
    tide_attr_set_float(g, sgd, TIDE_ATTR_APPLY_SGD_learning_rate, -0.1);
    FAILS(TIDE_INVALID, "bad", "\"learning_rate\" is -0.1, wants a finite value > 0");

    reset();
    w = var("w", SHAPE(3, 4));
    grad = ph("grad", SHAPE(3, 4));
    mom = OP(TIDE_OP_APPLY_MOMENTUM, "bad", w, grad, grad);
    tide_attr_set_float(g, mom, TIDE_ATTR_APPLY_MOMENTUM_learning_rate, 0.1);
    tide_attr_set_float(g, mom, TIDE_ATTR_APPLY_MOMENTUM_momentum, 0.9);
    FAILS(TIDE_INVALID, "bad", "input 1 (accum) must be a Variable", "\"grad\" is a Placeholder");

    reset();
    w = var("w", SHAPE(3, 4));
    m = var("m", SHAPE(3, 4));
    grad = ph("grad", SHAPE(3, 4));
    adam = OP(TIDE_OP_APPLY_ADAM, "bad", w, m, grad, grad);
    tide_attr_set_float(g, adam, TIDE_ATTR_APPLY_ADAM_learning_rate, 1e-3);
    FAILS(TIDE_INVALID, "bad", "input 2 (v) must be a Variable");

    reset();
    w = var("w", SHAPE(3, 4));
    m = var("m", SHAPE(3, 4));
    grad = ph("grad", SHAPE(3, 4));
    adam = OP(TIDE_OP_APPLY_ADAM, "bad", w, m, m, grad);
    tide_attr_set_float(g, adam, TIDE_ATTR_APPLY_ADAM_learning_rate, 1e-3);
    FAILS(TIDE_INVALID, "bad", "input 1 (m) and input 2 (v) are the same Variable \"m\"");

    reset();
    w = var("w", SHAPE(3, 4));
    m = var("m", SHAPE(3, 4));
    v = var("v", SHAPE(3, 4));
    grad = ph("grad", SHAPE(3, 4));
    adam = OP(TIDE_OP_APPLY_ADAM, "bad", w, m, v, grad);
    tide_attr_set_float(g, adam, TIDE_ATTR_APPLY_ADAM_learning_rate, 1e-3);
    tide_attr_set_float(g, adam, TIDE_ATTR_APPLY_ADAM_beta1, 1.0);
    FAILS(TIDE_INVALID, "bad", "\"beta1\" is 1, wants a value in [0, 1)");

    reset();
    w = var("w", SHAPE(3, 4));
    m = var("m", SHAPE(3, 4));
    v = var("v", SHAPE(2, 4));
    grad = ph("grad", SHAPE(3, 4));
    adam = OP(TIDE_OP_APPLY_ADAM, "bad", w, m, v, grad);
    tide_attr_set_float(g, adam, TIDE_ATTR_APPLY_ADAM_learning_rate, 1e-3);
    FAILS(TIDE_INVALID, "bad", "input 2 (v) has shape [2, 4], wants [3, 4]");
}

/* ============================================================================
 * A whole model, and the coverage check
 * ========================================================================== */

/* A small CNN classifier end to end: shapes flow through every layer. */
/* ---- Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) ---- */

static void test_math_unary(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_EXP, TIDE_OP_LOG, TIDE_OP_SQRT, TIDE_OP_GELU,
                                       TIDE_OP_ERF};
    uint32_t x = ph("x", SHAPE(2, 3, 4)), s = ph("s", SCALAR), e = ph("e", SHAPE(0, 7));
    uint32_t ids[5][3];
    char name[16];
    for (int i = 0; i < 5; i++) {
        const uint32_t inputs[3] = {x, s, e};
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof(name), "op%d_%d", i, k);
            ids[i][k] = OP(ops[i], name, inputs[k]);
        }
    }
    infer_ok();
    for (int i = 0; i < 5; i++) {
        expect_f32(ids[i][0], SHAPE(2, 3, 4));
        expect_f32(ids[i][1], SCALAR);
        expect_f32(ids[i][2], SHAPE(0, 7));
        assert_true(tide_op_info(ops[i])->flags & TIDE_OP_F_CHEAP);
    }

    for (int i = 0; i < 5; i++) {
        reset();
        x = placeholder_of("x", TIDE_DTYPE_INT32, SHAPE(2));
        OP(ops[i], "bad", x);
        FAILS(TIDE_INVALID, "bad", "input 0 (\"x\") is int32, wants float32");
        reset();
        x = ph("x", SHAPE(2));
        OP(ops[i], "bad", x, x);
        FAILS(TIDE_INVALID, "bad", "has 2 data inputs, wants 1");
    }
}

static void test_math_binary(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_DIV, TIDE_OP_MAX, TIDE_OP_MIN, TIDE_OP_POW};
    enum { N_OPS = sizeof(ops) / sizeof(ops[0]) };
    uint32_t a = ph("a", SHAPE(2, 3, 4)), b = ph("b", SHAPE(4)), c = ph("c", SHAPE(2, 1, 4));
    uint32_t d = ph("d", SHAPE(3, 1)), s = ph("s", SCALAR);
    uint32_t ids[N_OPS][4];
    char name[16];
    for (int i = 0; i < N_OPS; i++) {
        snprintf(name, sizeof(name), "op%d_ab", i);
        ids[i][0] = OP(ops[i], name, a, b);
        snprintf(name, sizeof(name), "op%d_ba", i);
        ids[i][1] = OP(ops[i], name, b, a);
        snprintf(name, sizeof(name), "op%d_cd", i);
        ids[i][2] = OP(ops[i], name, c, d);
        snprintf(name, sizeof(name), "op%d_sd", i);
        ids[i][3] = OP(ops[i], name, s, d);
    }
    infer_ok();
    for (int i = 0; i < N_OPS; i++) {
        expect_f32(ids[i][0], SHAPE(2, 3, 4));
        expect_f32(ids[i][1], SHAPE(2, 3, 4));
        expect_f32(ids[i][2], SHAPE(2, 3, 4));
        expect_f32(ids[i][3], SHAPE(3, 1));
        assert_true(tide_op_info(ops[i])->flags & TIDE_OP_F_CHEAP);
    }

    for (int i = 0; i < N_OPS; i++) {
        reset();
        a = ph("a", SHAPE(2, 3));
        b = ph("b", SHAPE(4, 3));
        OP(ops[i], "bad", a, b);
        FAILS(TIDE_INVALID, "bad", "[2, 3]", "[4, 3]", "do not broadcast", "2 and 4");
        reset();
        a = ph("a", SHAPE(2, 3));
        b = placeholder_of("b", TIDE_DTYPE_INT32, SHAPE(3));
        OP(ops[i], "bad", a, b);
        FAILS(TIDE_INVALID, "bad", "input 1 (\"b\") is int32, wants float32");
    }
}

static void test_math_grads(void **state)
{
    (void)state;
    uint32_t dy = ph("dy", SHAPE(2, 5)), x = ph("x", SHAPE(2, 5));
    uint32_t gelu = OP(TIDE_OP_GELU_GRAD, "gelu", dy, x);
    uint32_t a = ph("a", SHAPE(2, 1, 5)), b = ph("b", SHAPE(3, 1)), gy = ph("gy", SHAPE(2, 3, 5));
    uint32_t max = OP(TIDE_OP_MAX_GRAD, "max", a, b, gy);
    uint32_t min = OP(TIDE_OP_MIN_GRAD, "min", b, a, gy);
    uint32_t pw = OP(TIDE_OP_POW_GRAD, "pow", a, b, gy);
    infer_ok();
    expect_f32(gelu, SHAPE(2, 5));
    for (uint32_t k = 0; k < 2; k++) {
        expect_out(max, k, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 5));
        expect_out(min, k, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 5));
        expect_out(pw, k, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 5));
    }

    reset();
    dy = ph("dy", SHAPE(2, 4));
    x = ph("x", SHAPE(2, 5));
    OP(TIDE_OP_GELU_GRAD, "bad", dy, x);
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 4], wants [2, 5]",
          "the shape of input 1 (x)");

    static const enum tide_op select_ops[] = {TIDE_OP_MAX_GRAD, TIDE_OP_MIN_GRAD, TIDE_OP_POW_GRAD};
    for (int i = 0; i < 3; i++) {
        reset();
        a = ph("a", SHAPE(2, 3));
        b = ph("b", SHAPE(3));
        gy = ph("gy", SHAPE(3));
        OP(select_ops[i], "bad", a, b, gy);
        FAILS(TIDE_INVALID, "bad", "input 2 (dy) has shape [3], wants [2, 3]",
              "the broadcast of input 0 (a) [2, 3] and input 1 (b) [3]");
        reset();
        a = ph("a", SHAPE(2, 3));
        b = ph("b", SHAPE(2));
        gy = ph("gy", SHAPE(2, 3));
        OP(select_ops[i], "bad", a, b, gy);
        FAILS(TIDE_INVALID, "bad", "[2, 3]", "[2]", "do not broadcast", "3 and 2");
        reset();
        a = ph("a", SHAPE(2, 3));
        OP(select_ops[i], "bad", a, a);
        FAILS(TIDE_INVALID, "bad", "has 2 data inputs, wants 3");
    }
}

/*
 * The mask ops: Cast to either dtype from either, Compare of two float32 or
 * two int32 inputs broadcast (a float32 output), Select of three broadcast
 * inputs; each refusal names the value, the dtypes or the shapes.
 */
static void test_masks(void **state)
{
    (void)state;
    uint32_t f = ph("f", SHAPE(2, 3)), i = placeholder_of("i", TIDE_DTYPE_INT32, SHAPE(2, 1, 3));
    uint32_t cast[4];
    const uint32_t from[4] = {f, f, i, i};
    const enum tide_dtype to[4] = {TIDE_DTYPE_FLOAT32, TIDE_DTYPE_INT32, TIDE_DTYPE_FLOAT32,
                                   TIDE_DTYPE_INT32};
    for (int k = 0; k < 4; k++) {
        char name[16];
        snprintf(name, sizeof(name), "cast%d", k);
        cast[k] = OP(TIDE_OP_CAST, name, from[k]);
        tide_attr_set_int(g, cast[k], TIDE_ATTR_CAST_to, to[k]);
    }
    uint32_t j = placeholder_of("j", TIDE_DTYPE_INT32, SHAPE(3));
    uint32_t cmp_f = OP(TIDE_OP_COMPARE, "cmp_f", f, f);
    tide_attr_set_int(g, cmp_f, TIDE_ATTR_COMPARE_mode, TIDE_COMPARISON_GREATER_EQUAL);
    uint32_t cmp_i = OP(TIDE_OP_COMPARE, "cmp_i", j, i); /* [3] against [2, 1, 3] */
    tide_attr_set_int(g, cmp_i, TIDE_ATTR_COMPARE_mode, TIDE_COMPARISON_NOT_EQUAL);
    uint32_t cond = ph("cond", SHAPE(4, 1, 1)), x = ph("x", SHAPE(3)), s = ph("s", SCALAR);
    uint32_t sel = OP(TIDE_OP_SELECT, "sel", cond, x, s);
    uint32_t sel2 = OP(TIDE_OP_SELECT, "sel2", s, f, cond);
    infer_ok();
    expect_f32(cast[0], SHAPE(2, 3));
    expect_out(cast[1], 0, TIDE_DTYPE_INT32, SHAPE(2, 3));
    expect_out(cast[2], 0, TIDE_DTYPE_FLOAT32, SHAPE(2, 1, 3));
    expect_out(cast[3], 0, TIDE_DTYPE_INT32, SHAPE(2, 1, 3));
    expect_f32(cmp_f, SHAPE(2, 3));
    expect_f32(cmp_i, SHAPE(2, 1, 3));
    expect_f32(sel, SHAPE(4, 1, 3));
    expect_f32(sel2, SHAPE(4, 2, 3));
    static const enum tide_op ops[] = {TIDE_OP_CAST, TIDE_OP_COMPARE, TIDE_OP_SELECT};
    for (int k = 0; k < 3; k++)
        assert_true(tide_op_info(ops[k])->flags & TIDE_OP_F_CHEAP);

    /* Cast to a dtype that is not float32 or int32, and without "to". */
    const int64_t bad_to[3] = {0, 3, -1};
    for (int k = 0; k < 3; k++) {
        reset();
        f = ph("f", SHAPE(2));
        uint32_t bad = OP(TIDE_OP_CAST, "bad", f);
        tide_attr_set_int(g, bad, TIDE_ATTR_CAST_to, bad_to[k]);
        char want[64];
        snprintf(want, sizeof(want), "attribute \"to\" is %d, wants 1 (float32) or 2 (int32)",
                 (int)bad_to[k]);
        FAILS(TIDE_INVALID, "bad", want);
    }
    reset();
    f = ph("f", SHAPE(2));
    OP(TIDE_OP_CAST, "bad", f);
    FAILS(TIDE_INVALID, "bad", "\"to\"");

    /* Compare: a mode out of range, mixed dtypes, shapes that do not broadcast. */
    const int64_t bad_mode[2] = {-1, 6};
    for (int k = 0; k < 2; k++) {
        reset();
        f = ph("f", SHAPE(2));
        uint32_t bad = OP(TIDE_OP_COMPARE, "bad", f, f);
        tide_attr_set_int(g, bad, TIDE_ATTR_COMPARE_mode, bad_mode[k]);
        char want[64];
        snprintf(want, sizeof(want), "attribute \"mode\" is %d, wants 0 to 5", (int)bad_mode[k]);
        FAILS(TIDE_INVALID, "bad", want);
    }
    reset();
    f = ph("f", SHAPE(3));
    j = placeholder_of("j", TIDE_DTYPE_INT32, SHAPE(3));
    uint32_t bad = OP(TIDE_OP_COMPARE, "bad", f, j);
    tide_attr_set_int(g, bad, TIDE_ATTR_COMPARE_mode, TIDE_COMPARISON_EQUAL);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) is float32 and input 1 (y) is int32",
          "wants both float32 or both int32");
    reset();
    f = ph("f", SHAPE(2, 3));
    x = ph("x", SHAPE(4));
    bad = OP(TIDE_OP_COMPARE, "bad", f, x);
    tide_attr_set_int(g, bad, TIDE_ATTR_COMPARE_mode, TIDE_COMPARISON_LESS);
    FAILS(TIDE_INVALID, "bad", "[2, 3]", "[4]", "do not broadcast", "3 and 4");

    /* Select: shapes that do not broadcast (each pair), an int32 input, two inputs. */
    const struct tide_shape shapes[3][3] = {{SHAPE(2, 3), SHAPE(4), SHAPE(3)},
                                            {SHAPE(3), SHAPE(2, 3), SHAPE(5)},
                                            {SHAPE(2, 1), SHAPE(7), SHAPE(3, 1)}};
    const char *const want[3][3] = {{"[2, 3] (cond), [4] (x) and [3] (y)", "3 and 4"},
                                    {"[3] (cond), [2, 3] (x) and [5] (y)", "3 and 5"},
                                    {"[2, 1] (cond), [7] (x) and [3, 1] (y)", "2 and 3"}};
    for (int k = 0; k < 3; k++) {
        reset();
        cond = ph("cond", shapes[k][0]);
        x = ph("x", shapes[k][1]);
        uint32_t y = ph("y", shapes[k][2]);
        OP(TIDE_OP_SELECT, "bad", cond, x, y);
        FAILS(TIDE_INVALID, "bad", want[k][0], "do not broadcast", want[k][1]);
    }
    reset();
    cond = placeholder_of("cond", TIDE_DTYPE_INT32, SHAPE(3));
    x = ph("x", SHAPE(3));
    OP(TIDE_OP_SELECT, "bad", cond, x, x);
    FAILS(TIDE_INVALID, "bad", "input 0 (\"cond\") is int32, wants float32");
    reset();
    x = ph("x", SHAPE(3));
    OP(TIDE_OP_SELECT, "bad", x, x);
    FAILS(TIDE_INVALID, "bad", "has 2 data inputs, wants 3");
}

/* ---- Element-wise ops of an enum attribute: Trig, TrigGrad, Round ---- */

/*
 * An op of one float32 x and an enum attribute attr (values 0 .. count - 1):
 * each value keeps x's shape, float32, for x [2, 3, 4], a scalar and [0, 7]
 * (one graph, inferred at once), and the op is cheap and in place; -1, count
 * and 1000 are refused naming the value and the meanings (from first to
 * last), no attribute by its name, and an int32 x by its dtype.
 */
static void check_enum_unary(enum tide_op op, int attr, const char *attr_name, int count,
                             const char *first, const char *last)
{
    reset();
    uint32_t x = ph("x", SHAPE(2, 3, 4)), s = ph("s", SCALAR), e = ph("e", SHAPE(0, 7));
    uint32_t ids[16][3];
    assert_true(count <= 16);
    for (int v = 0; v < count; v++) {
        const uint32_t inputs[3] = {x, s, e};
        for (int k = 0; k < 3; k++) {
            char name[16];
            snprintf(name, sizeof(name), "op%d_%d", v, k);
            ids[v][k] = OP(op, name, inputs[k]);
            tide_attr_set_int(g, ids[v][k], attr, v);
        }
    }
    infer_ok();
    for (int v = 0; v < count; v++) {
        expect_f32(ids[v][0], SHAPE(2, 3, 4));
        expect_f32(ids[v][1], SCALAR);
        expect_f32(ids[v][2], SHAPE(0, 7));
    }
    assert_true(tide_op_info(op)->flags & TIDE_OP_F_CHEAP &&
                tide_op_info(op)->flags & TIDE_OP_F_INPLACE);
    const int64_t bad_values[3] = {-1, count, 1000};
    for (int k = 0; k < 3; k++) {
        char want[96];
        snprintf(want, sizeof(want), "attribute \"%s\" is %d, wants 0 to %d (%s", attr_name,
                 (int)bad_values[k], count - 1, first);
        reset();
        x = ph("x", SHAPE(2));
        uint32_t bad = OP(op, "bad", x);
        tide_attr_set_int(g, bad, attr, bad_values[k]);
        FAILS(TIDE_INVALID, "bad", want, last);
    }
    char quoted[32];
    snprintf(quoted, sizeof(quoted), "\"%s\"", attr_name);
    reset();
    x = ph("x", SHAPE(2));
    OP(op, "bad", x);
    FAILS(TIDE_INVALID, "bad", quoted);
    reset();
    uint32_t i = placeholder_of("i", TIDE_DTYPE_INT32, SHAPE(2));
    uint32_t bad = OP(op, "bad", i);
    tide_attr_set_int(g, bad, attr, 0);
    FAILS(TIDE_INVALID, "bad", "input 0 (\"i\") is int32, wants float32");
}

/*
 * Trig as above for every fn; TrigGrad wants dy of x's shape and refuses an
 * fn out of range as Trig does.
 */
static void test_trig(void **state)
{
    (void)state;
    check_enum_unary(TIDE_OP_TRIG, TIDE_ATTR_TRIG_fn, "fn", TIDE_TRIG_FUNCTION_COUNT, "sin, cos,",
                     "acosh, atanh)");
    reset();
    uint32_t x = ph("x", SHAPE(2, 3, 4)), dy = ph("dy", SHAPE(2, 3, 4));
    uint32_t grad = OP(TIDE_OP_TRIG_GRAD, "grad", dy, x);
    tide_attr_set_int(g, grad, TIDE_ATTR_TRIG_GRAD_fn, TIDE_TRIG_FUNCTION_ATANH);
    infer_ok();
    expect_f32(grad, SHAPE(2, 3, 4));
    assert_true(tide_op_info(TIDE_OP_TRIG_GRAD)->flags & TIDE_OP_F_CHEAP &&
                tide_op_info(TIDE_OP_TRIG_GRAD)->flags & TIDE_OP_F_INPLACE);
    const int64_t bad_fn[3] = {-1, 11, 1000};
    for (int k = 0; k < 3; k++) {
        char want[64];
        snprintf(want, sizeof(want), "attribute \"fn\" is %d, wants 0 to 10 (sin, cos,",
                 (int)bad_fn[k]);
        reset();
        x = ph("x", SHAPE(2));
        uint32_t bad = OP(TIDE_OP_TRIG_GRAD, "bad", x, x);
        tide_attr_set_int(g, bad, TIDE_ATTR_TRIG_GRAD_fn, bad_fn[k]);
        FAILS(TIDE_INVALID, "bad", want);
    }
    reset();
    dy = ph("dy", SHAPE(2, 4));
    x = ph("x", SHAPE(2, 5));
    uint32_t bad = OP(TIDE_OP_TRIG_GRAD, "bad", dy, x);
    tide_attr_set_int(g, bad, TIDE_ATTR_TRIG_GRAD_fn, TIDE_TRIG_FUNCTION_COS);
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 4], wants [2, 5]",
          "the shape of input 1 (x)");
}

/* Round as above for every mode. */
static void test_round(void **state)
{
    (void)state;
    check_enum_unary(TIDE_OP_ROUND, TIDE_ATTR_ROUND_mode, "mode", TIDE_ROUNDING_COUNT,
                     "floor, ceil,", "half to even, toward zero)");
}

/* ---- Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose) ---- */

static void test_batch_matmul(void **state)
{
    (void)state;
    uint32_t a = ph("a", SHAPE(2, 3, 4)), w = ph("w", SHAPE(4, 5)), b = ph("b", SHAPE(2, 4, 5));
    uint32_t at = ph("at", SHAPE(2, 4, 3)), bt = ph("bt", SHAPE(2, 5, 4));
    uint32_t a4 = ph("a4", SHAPE(6, 1, 3, 4)), b4 = ph("b4", SHAPE(7, 4, 5));
    uint32_t m2 = ph("m2", SHAPE(3, 4));
    uint32_t plain = OP(TIDE_OP_BATCH_MATMUL, "plain", a, b);
    uint32_t weight = OP(TIDE_OP_BATCH_MATMUL, "weight", a, w);
    uint32_t left = OP(TIDE_OP_BATCH_MATMUL, "left", m2, b);
    uint32_t ta = OP(TIDE_OP_BATCH_MATMUL, "ta", at, b);
    tide_attr_set_bool(g, ta, TIDE_ATTR_BATCH_MATMUL_transpose_a, true);
    uint32_t tb = OP(TIDE_OP_BATCH_MATMUL, "tb", a, bt);
    tide_attr_set_bool(g, tb, TIDE_ATTR_BATCH_MATMUL_transpose_b, true);
    uint32_t both = OP(TIDE_OP_BATCH_MATMUL, "both", at, bt);
    tide_attr_set_bool(g, both, TIDE_ATTR_BATCH_MATMUL_transpose_a, true);
    tide_attr_set_bool(g, both, TIDE_ATTR_BATCH_MATMUL_transpose_b, true);
    uint32_t bcast = OP(TIDE_OP_BATCH_MATMUL, "bcast", a4, b4);
    uint32_t rank2 = OP(TIDE_OP_BATCH_MATMUL, "rank2", m2, w);
    infer_ok();
    expect_f32(plain, SHAPE(2, 3, 5));
    expect_nbytes(plain, 0, 120);
    expect_f32(weight, SHAPE(2, 3, 5));
    expect_f32(left, SHAPE(2, 3, 5));
    expect_f32(ta, SHAPE(2, 3, 5));
    expect_f32(tb, SHAPE(2, 3, 5));
    expect_f32(both, SHAPE(2, 3, 5));
    expect_f32(bcast, SHAPE(6, 7, 3, 5));
    expect_f32(rank2, SHAPE(3, 5));

    reset();
    a = ph("a", SHAPE(2, 3, 4));
    b = ph("b", SHAPE(2, 3, 5));
    OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    FAILS(TIDE_INVALID, "bmm", "inner dimensions 4 and 3 differ", "a is [2, 3, 4]",
          "b is [2, 3, 5]");

    reset();
    a = ph("a", SHAPE(2, 3, 4));
    b = ph("b", SHAPE(2, 4, 5));
    uint32_t bmm = OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    tide_attr_set_bool(g, bmm, TIDE_ATTR_BATCH_MATMUL_transpose_a, true);
    FAILS(TIDE_INVALID, "bmm", "inner dimensions 3 and 4 differ", "a is [2, 3, 4] transposed",
          "b is [2, 4, 5])");

    reset();
    a = ph("a", SHAPE(2, 3, 4));
    b = ph("b", SHAPE(3, 4, 5));
    OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    FAILS(TIDE_INVALID, "bmm",
          "batch dimensions [2] of a [2, 3, 4] and [3] of b [3, 4, 5] do not "
          "broadcast: dimensions 2 and 3 differ and neither is 1");

    reset();
    a = ph("a", SHAPE(4, 2, 3, 4));
    b = ph("b", SHAPE(5, 1, 4, 5));
    OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    FAILS(TIDE_INVALID, "bmm", "batch dimensions [4, 2] of a", "[5, 1] of b",
          "dimensions 4 and 5 differ");

    reset();
    a = ph("a", SHAPE(4));
    b = ph("b", SHAPE(4, 5));
    OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    FAILS(TIDE_INVALID, "bmm", "input 0 (a) has shape [4], wants rank 2 or more [..., M, K]");

    reset();
    a = ph("a", SHAPE(3, 4));
    b = ph("b", SCALAR);
    bmm = OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    tide_attr_set_bool(g, bmm, TIDE_ATTR_BATCH_MATMUL_transpose_b, true);
    FAILS(TIDE_INVALID, "bmm", "input 1 (b) has shape [], wants rank 2 or more [..., N, K]");

    reset();
    a = ph("a", SHAPE(3, 4));
    b = placeholder_of("b", TIDE_DTYPE_INT32, SHAPE(4, 5));
    OP(TIDE_OP_BATCH_MATMUL, "bmm", a, b);
    FAILS(TIDE_INVALID, "bmm", "input 1 (\"b\") is int32, wants float32");

    /* The output's limit applies: [2, 16, 16] floats are 2048 bytes. */
    reset();
    struct tide_graph_limits small = tide_graph_limits_default();
    small.max_tensor_bytes = 1024;
    limits = &small;
    a = ph("a", SHAPE(2, 16, 1));
    b = ph("b", SHAPE(1, 16));
    OP(TIDE_OP_BATCH_MATMUL, "outer", a, b);
    FAILS(TIDE_LIMIT, "outer", "[2, 16, 16]", "2048", "1024");
}

static void test_transpose(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 4, 5));
    uint32_t ids = placeholder_of("ids", TIDE_DTYPE_INT32, SHAPE(6, 7));
    uint32_t s = ph("s", SCALAR);
    uint32_t heads = OP(TIDE_OP_TRANSPOSE, "heads", x);
    tide_attr_set_ints(g, heads, TIDE_ATTR_TRANSPOSE_perm, LIST(0, 2, 1, 3));
    uint32_t rot = OP(TIDE_OP_TRANSPOSE, "rot", x);
    tide_attr_set_ints(g, rot, TIDE_ATTR_TRANSPOSE_perm, LIST(3, 0, 1, 2));
    uint32_t same = OP(TIDE_OP_TRANSPOSE, "same", x);
    tide_attr_set_ints(g, same, TIDE_ATTR_TRANSPOSE_perm, LIST(0, 1, 2, 3));
    uint32_t t_ids = OP(TIDE_OP_TRANSPOSE, "t_ids", ids);
    tide_attr_set_ints(g, t_ids, TIDE_ATTR_TRANSPOSE_perm, LIST(1, 0));
    uint32_t t_s = OP(TIDE_OP_TRANSPOSE, "t_s", s);
    tide_attr_set_ints(g, t_s, TIDE_ATTR_TRANSPOSE_perm, NULL, 0);
    infer_ok();
    expect_f32(heads, SHAPE(2, 4, 3, 5));
    expect_f32(rot, SHAPE(5, 2, 3, 4));
    expect_f32(same, SHAPE(2, 3, 4, 5));
    expect_out(t_ids, 0, TIDE_DTYPE_INT32, SHAPE(7, 6));
    expect_nbytes(t_ids, 0, 168);
    expect_f32(t_s, SCALAR);
    /* perm is left as given: there is nothing to normalise. */
    expect_ints(rot, TIDE_ATTR_TRANSPOSE_perm, LIST(3, 0, 1, 2));

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    uint32_t t = OP(TIDE_OP_TRANSPOSE, "bad", x);
    tide_attr_set_ints(g, t, TIDE_ATTR_TRANSPOSE_perm, LIST(1, 0));
    FAILS(TIDE_INVALID, "bad",
          "attribute \"perm\" [1, 0] has 2 entries, wants 3 (one per axis of "
          "input 0 [2, 3, 4])");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    t = OP(TIDE_OP_TRANSPOSE, "bad", x);
    tide_attr_set_ints(g, t, TIDE_ATTR_TRANSPOSE_perm, LIST(0, 2, 0));
    FAILS(TIDE_INVALID, "bad",
          "attribute \"perm\" [0, 2, 0] names axis 0 twice, wants a "
          "permutation of 0 to 2");

    reset();
    x = ph("x", SHAPE(2, 3, 4));
    t = OP(TIDE_OP_TRANSPOSE, "bad", x);
    tide_attr_set_ints(g, t, TIDE_ATTR_TRANSPOSE_perm, LIST(0, 3, 1));
    FAILS(TIDE_INVALID, "bad",
          "attribute \"perm\" [0, 3, 1] has 3 at index 1, out of range for "
          "input 0 [2, 3, 4] (wants 0 to 2)");

    reset();
    x = ph("x", SHAPE(2, 3));
    t = OP(TIDE_OP_TRANSPOSE, "bad", x);
    tide_attr_set_ints(g, t, TIDE_ATTR_TRANSPOSE_perm, LIST(-1, 0));
    FAILS(TIDE_INVALID, "bad", "has -1 at index 0, out of range", "(wants 0 to 1)");

    /* perm is required. */
    reset();
    x = ph("x", SHAPE(2, 3));
    OP(TIDE_OP_TRANSPOSE, "bad", x);
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"perm\"");
}

/* ---- Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing) ---- */

static uint32_t int_ph(const char *name, struct tide_shape shape)
{
    return placeholder_of(name, TIDE_DTYPE_INT32, shape);
}

static void test_gather(void **state)
{
    (void)state;
    uint32_t table = ph("table", SHAPE(10, 4, 3));
    uint32_t ids = int_ph("ids", SHAPE(2, 5));
    uint32_t one = int_ph("one", SCALAR);
    uint32_t vec = ph("vec", SHAPE(7));
    uint32_t y = OP(TIDE_OP_GATHER, "y", table, ids);
    uint32_t row = OP(TIDE_OP_GATHER, "row", table, one);
    uint32_t picks = OP(TIDE_OP_GATHER, "picks", vec, ids);
    infer_ok();
    expect_f32(y, SHAPE(2, 5, 4, 3));
    expect_nbytes(y, 0, 2 * 5 * 4 * 3 * 4);
    expect_f32(row, SHAPE(4, 3));
    expect_f32(picks, SHAPE(2, 5));

    reset();
    table = ph("table", SCALAR);
    ids = int_ph("ids", SHAPE(3));
    OP(TIDE_OP_GATHER, "bad", table, ids);
    FAILS(TIDE_INVALID, "bad", "input 0 (table) has shape [], wants rank 1 or more [N, ...]");

    reset();
    table = ph("table", SHAPE(10, 4));
    ids = ph("ids", SHAPE(3));
    OP(TIDE_OP_GATHER, "bad", table, ids);
    FAILS(TIDE_INVALID, "bad", "input 1 (ids) is float32, wants int32");

    reset();
    table = int_ph("table", SHAPE(10, 4));
    ids = int_ph("ids", SHAPE(3));
    OP(TIDE_OP_GATHER, "bad", table, ids);
    FAILS(TIDE_INVALID, "bad", "input 0 (table) is int32, wants float32");

    reset();
    table = ph("table", SHAPE(10, 2, 2, 2, 2));
    ids = int_ph("ids", SHAPE(1, 1, 1, 1, 1));
    OP(TIDE_OP_GATHER, "bad", table, ids);
    FAILS(TIDE_INVALID, "bad", "the output would have rank 9", "[1, 1, 1, 1, 1]",
          "[10, 2, 2, 2, 2]", "the limit is 8");
}

static void test_gather_grad(void **state)
{
    (void)state;
    uint32_t dy = ph("dy", SHAPE(2, 5, 4, 3));
    uint32_t ids = int_ph("ids", SHAPE(2, 5));
    uint32_t grad = OP(TIDE_OP_GATHER_GRAD, "grad", dy, ids);
    tide_attr_set_int(g, grad, TIDE_ATTR_GATHER_GRAD_num_rows, 10);
    uint32_t one = int_ph("one", SCALAR);
    uint32_t dy1 = ph("dy1", SHAPE(3));
    uint32_t grad1 = OP(TIDE_OP_GATHER_GRAD, "grad1", dy1, one);
    tide_attr_set_int(g, grad1, TIDE_ATTR_GATHER_GRAD_num_rows, 6);
    infer_ok();
    expect_f32(grad, SHAPE(10, 4, 3));
    expect_f32(grad1, SHAPE(6, 3));

    reset();
    dy = ph("dy", SHAPE(2, 4, 3));
    ids = int_ph("ids", SHAPE(2, 5));
    grad = OP(TIDE_OP_GATHER_GRAD, "bad", dy, ids);
    tide_attr_set_int(g, grad, TIDE_ATTR_GATHER_GRAD_num_rows, 10);
    FAILS(TIDE_INVALID, "bad",
          "input 0 (dy) has shape [2, 4, 3], wants it to start with the "
          "shape [2, 5] of input 1 (ids)");

    reset();
    dy = ph("dy", SHAPE(2, 3));
    ids = int_ph("ids", SHAPE(2));
    grad = OP(TIDE_OP_GATHER_GRAD, "bad", dy, ids);
    tide_attr_set_int(g, grad, TIDE_ATTR_GATHER_GRAD_num_rows, -1);
    FAILS(TIDE_INVALID, "bad", "attribute \"num_rows\" is -1, wants 0 to");

    reset();
    dy = ph("dy", SHAPE(2, 3));
    ids = int_ph("ids", SHAPE(2));
    OP(TIDE_OP_GATHER_GRAD, "bad", dy, ids);
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"num_rows\"");

    reset();
    dy = ph("dy", SHAPE(2, 3));
    ids = ph("ids", SHAPE(2));
    grad = OP(TIDE_OP_GATHER_GRAD, "bad", dy, ids);
    tide_attr_set_int(g, grad, TIDE_ATTR_GATHER_GRAD_num_rows, 4);
    FAILS(TIDE_INVALID, "bad", "input 1 (ids) is float32, wants int32");

    /* A scalar id and a rank-8 dy would make a rank-9 gradient. */
    reset();
    dy = ph("dy", SHAPE(1, 1, 1, 1, 1, 1, 1, 1));
    ids = int_ph("ids", SCALAR);
    grad = OP(TIDE_OP_GATHER_GRAD, "bad", dy, ids);
    tide_attr_set_int(g, grad, TIDE_ATTR_GATHER_GRAD_num_rows, 4);
    FAILS(TIDE_INVALID, "bad", "the output would have rank 9", "the limit is 8");
}

static void test_gather_elements(void **state)
{
    (void)state;
    /* Along axis 1, indices longer than data there and shorter on axis 0. */
    uint32_t data = ph("data", SHAPE(4, 3, 5));
    uint32_t idx = int_ph("idx", SHAPE(2, 7, 5));
    uint32_t y = OP(TIDE_OP_GATHER_ELEMENTS, "y", data, idx);
    tide_attr_set_int(g, y, TIDE_ATTR_GATHER_ELEMENTS_axis, 1);
    uint32_t v = ph("v", SHAPE(6));
    uint32_t picks = int_ph("picks", SHAPE(9));
    uint32_t y1 = OP(TIDE_OP_GATHER_ELEMENTS, "y1", v, picks); /* axis 0 by default */
    tide_attr_set_int(g, y1, TIDE_ATTR_GATHER_ELEMENTS_ignore_index, -100);
    infer_ok();
    expect_f32(y, SHAPE(2, 7, 5));
    expect_f32(y1, SHAPE(9));

    reset();
    data = ph("data", SHAPE(4, 3));
    idx = int_ph("idx", SHAPE(4, 3));
    y = OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    tide_attr_set_int(g, y, TIDE_ATTR_GATHER_ELEMENTS_axis, 2);
    FAILS(TIDE_INVALID, "bad",
          "attribute \"axis\" is 2, wants 0 to 1 (input 0 (data) has shape [4, 3])");

    reset();
    data = ph("data", SHAPE(4, 3));
    idx = int_ph("idx", SHAPE(4, 3));
    y = OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    tide_attr_set_int(g, y, TIDE_ATTR_GATHER_ELEMENTS_axis, -1);
    FAILS(TIDE_INVALID, "bad", "attribute \"axis\" is -1, wants 0 to 1");

    reset();
    data = ph("data", SHAPE(4, 3));
    idx = int_ph("idx", SHAPE(12));
    OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    FAILS(TIDE_INVALID, "bad",
          "input 1 (indices) has shape [12], wants rank 2, the rank of input 0 (data) [4, 3]");

    reset();
    data = ph("data", SHAPE(4, 3));
    idx = int_ph("idx", SHAPE(9, 4));
    OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    FAILS(TIDE_INVALID, "bad",
          "input 1 (indices) [9, 4] has 4 elements along axis 1, more than the 3 of input 0 "
          "(data) [4, 3] (only axis 0 may differ)");

    reset();
    data = ph("data", SCALAR);
    idx = int_ph("idx", SCALAR);
    OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    FAILS(TIDE_INVALID, "bad", "input 0 (data) has shape [], wants rank 1 or more");

    reset();
    data = ph("data", SHAPE(4, 3));
    idx = ph("idx", SHAPE(4, 3));
    OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    FAILS(TIDE_INVALID, "bad", "input 1 (indices) is float32, wants int32");

    reset();
    data = int_ph("data", SHAPE(4, 3));
    idx = int_ph("idx", SHAPE(4, 3));
    OP(TIDE_OP_GATHER_ELEMENTS, "bad", data, idx);
    FAILS(TIDE_INVALID, "bad", "input 0 (data) is int32, wants float32");
}

static void test_gather_elements_grad(void **state)
{
    (void)state;
    uint32_t dy = ph("dy", SHAPE(2, 7, 5));
    uint32_t idx = int_ph("idx", SHAPE(2, 7, 5));
    uint32_t dx = OP(TIDE_OP_GATHER_ELEMENTS_GRAD, "dx", dy, idx);
    tide_attr_set_int(g, dx, TIDE_ATTR_GATHER_ELEMENTS_GRAD_axis, 1);
    set_shape(dx, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, SHAPE(4, 3, 5));
    infer_ok();
    expect_f32(dx, SHAPE(4, 3, 5));

    reset();
    dy = ph("dy", SHAPE(2, 3));
    idx = int_ph("idx", SHAPE(2, 3));
    OP(TIDE_OP_GATHER_ELEMENTS_GRAD, "bad", dy, idx);
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"shape\"");

    reset();
    dy = ph("dy", SHAPE(2, 3));
    idx = int_ph("idx", SHAPE(3, 2));
    dx = OP(TIDE_OP_GATHER_ELEMENTS_GRAD, "bad", dy, idx);
    set_shape(dx, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, SHAPE(4, 3));
    FAILS(TIDE_INVALID, "bad", "input 1 (indices) has shape [3, 2], wants [2, 3]");

    reset();
    dy = ph("dy", SHAPE(2, 3));
    idx = int_ph("idx", SHAPE(2, 3));
    dx = OP(TIDE_OP_GATHER_ELEMENTS_GRAD, "bad", dy, idx);
    set_shape(dx, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, SHAPE(4, 2));
    FAILS(TIDE_INVALID, "bad",
          "input 0 (dy) [2, 3] has 3 elements along axis 1, more than the 2 of attribute "
          "\"shape\" [4, 2]");

    reset();
    dy = ph("dy", SHAPE(2, 3));
    idx = int_ph("idx", SHAPE(2, 3));
    dx = OP(TIDE_OP_GATHER_ELEMENTS_GRAD, "bad", dy, idx);
    set_shape(dx, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, SHAPE(4, -3));
    FAILS(TIDE_INVALID, "bad", "attribute \"shape\" [4, -3] has negative dimension -3 at axis 1");
}

static void test_top_k(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(3, 4, 10));
    uint32_t top = OP(TIDE_OP_TOP_K, "top", x);
    tide_attr_set_int(g, top, TIDE_ATTR_TOP_K_k, 2);
    uint32_t v = ph("v", SHAPE(5));
    uint32_t all = OP(TIDE_OP_TOP_K, "all", v);
    tide_attr_set_int(g, all, TIDE_ATTR_TOP_K_k, 5);
    infer_ok();
    expect_f32(top, SHAPE(3, 4, 2));
    expect_out(top, 1, TIDE_DTYPE_INT32, SHAPE(3, 4, 2));
    expect_nbytes(top, 1, 3 * 4 * 2 * 4);
    expect_f32(all, SHAPE(5));
    expect_out(all, 1, TIDE_DTYPE_INT32, SHAPE(5));

    reset();
    x = ph("x", SHAPE(3, 4));
    top = OP(TIDE_OP_TOP_K, "bad", x);
    tide_attr_set_int(g, top, TIDE_ATTR_TOP_K_k, 5);
    FAILS(TIDE_INVALID, "bad", "attribute \"k\" is 5, wants 1 to 4",
          "the last dimension of input 0 (x) [3, 4]");

    reset();
    x = ph("x", SHAPE(3, 4));
    top = OP(TIDE_OP_TOP_K, "bad", x);
    tide_attr_set_int(g, top, TIDE_ATTR_TOP_K_k, 0);
    FAILS(TIDE_INVALID, "bad", "attribute \"k\" is 0, wants 1 to 4");

    reset();
    x = ph("x", SHAPE(3, 4));
    OP(TIDE_OP_TOP_K, "bad", x);
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"k\"");

    reset();
    x = ph("x", SCALAR);
    top = OP(TIDE_OP_TOP_K, "bad", x);
    tide_attr_set_int(g, top, TIDE_ATTR_TOP_K_k, 1);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [], wants rank 1 or more");

    reset();
    x = int_ph("x", SHAPE(4));
    top = OP(TIDE_OP_TOP_K, "bad", x);
    tide_attr_set_int(g, top, TIDE_ATTR_TOP_K_k, 1);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) is int32, wants float32");
}

static void test_top_k_grad(void **state)
{
    (void)state;
    uint32_t dv = ph("dv", SHAPE(3, 2));
    uint32_t idx = int_ph("idx", SHAPE(3, 2));
    uint32_t grad = OP(TIDE_OP_TOP_K_GRAD, "grad", dv, idx);
    set_shape(grad, TIDE_ATTR_TOP_K_GRAD_shape, SHAPE(3, 7));
    infer_ok();
    expect_f32(grad, SHAPE(3, 7));

    reset();
    dv = ph("dv", SHAPE(3, 2));
    idx = int_ph("idx", SHAPE(3, 2));
    grad = OP(TIDE_OP_TOP_K_GRAD, "bad", dv, idx);
    set_shape(grad, TIDE_ATTR_TOP_K_GRAD_shape, SHAPE(4, 7));
    FAILS(TIDE_INVALID, "bad", "attribute \"shape\" [4, 7] does not fit input 0 (dvalues) [3, 2]");

    reset();
    dv = ph("dv", SHAPE(3, 2));
    idx = int_ph("idx", SHAPE(3, 2));
    grad = OP(TIDE_OP_TOP_K_GRAD, "bad", dv, idx);
    set_shape(grad, TIDE_ATTR_TOP_K_GRAD_shape, SHAPE(3, 1));
    FAILS(TIDE_INVALID, "bad", "a last dimension of at least 2");

    reset();
    dv = ph("dv", SHAPE(3, 2));
    idx = int_ph("idx", SHAPE(3, 3));
    grad = OP(TIDE_OP_TOP_K_GRAD, "bad", dv, idx);
    set_shape(grad, TIDE_ATTR_TOP_K_GRAD_shape, SHAPE(3, 7));
    FAILS(TIDE_INVALID, "bad", "input 1 (indices) has shape [3, 3], wants [3, 2]");

    reset();
    dv = ph("dv", SHAPE(3, 2));
    idx = ph("idx", SHAPE(3, 2));
    grad = OP(TIDE_OP_TOP_K_GRAD, "bad", dv, idx);
    set_shape(grad, TIDE_ATTR_TOP_K_GRAD_shape, SHAPE(3, 7));
    FAILS(TIDE_INVALID, "bad", "input 1 (indices) is float32, wants int32");

    reset();
    dv = ph("dv", SHAPE(3, 2));
    idx = int_ph("idx", SHAPE(3, 2));
    grad = OP(TIDE_OP_TOP_K_GRAD, "bad", dv, idx);
    set_shape(grad, TIDE_ATTR_TOP_K_GRAD_shape, SHAPE(3, -7));
    FAILS(TIDE_INVALID, "bad", "attribute \"shape\" [3, -7] has negative dimension -7");
}

static void test_moe_route(void **state)
{
    (void)state;
    uint32_t idx = int_ph("idx", SHAPE(6, 2));
    uint32_t route = OP(TIDE_OP_MOE_ROUTE, "route", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 4);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, 3);
    infer_ok();
    expect_out(route, 0, TIDE_DTYPE_INT32, SHAPE(12));
    expect_out(route, 1, TIDE_DTYPE_INT32, SHAPE(6, 2));
    expect_nbytes(route, 0, 48);

    reset();
    idx = int_ph("idx", SHAPE(6));
    route = OP(TIDE_OP_MOE_ROUTE, "bad", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 4);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, 3);
    FAILS(TIDE_INVALID, "bad", "input 0 (indices) has shape [6], wants rank 2 [T, k]");

    reset();
    idx = ph("idx", SHAPE(6, 2));
    route = OP(TIDE_OP_MOE_ROUTE, "bad", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 4);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, 3);
    FAILS(TIDE_INVALID, "bad", "input 0 (indices) is float32, wants int32");

    reset();
    idx = int_ph("idx", SHAPE(6, 2));
    route = OP(TIDE_OP_MOE_ROUTE, "bad", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 0);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, 3);
    FAILS(TIDE_INVALID, "bad", "attribute \"experts\" is 0, wants 1 to 2147483647");

    reset();
    idx = int_ph("idx", SHAPE(6, 2));
    route = OP(TIDE_OP_MOE_ROUTE, "bad", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 4);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, -2);
    FAILS(TIDE_INVALID, "bad", "attribute \"capacity\" is -2, wants 1 to 2147483647");

    reset();
    idx = int_ph("idx", SHAPE(6, 2));
    route = OP(TIDE_OP_MOE_ROUTE, "bad", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 65536);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_capacity, 65536);
    FAILS(TIDE_INVALID, "bad", "experts * capacity = 65536 * 65536 slots", "2147483647");

    reset();
    idx = int_ph("idx", SHAPE(6, 2));
    route = OP(TIDE_OP_MOE_ROUTE, "bad", idx);
    tide_attr_set_int(g, route, TIDE_ATTR_MOE_ROUTE_experts, 4);
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"capacity\"");
}

/* ---- Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout) ---- */

static void test_layer_norm(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 5, 8)), gain = ph("gain", SHAPE(8)), bias = ph("bias", SHAPE(8));
    uint32_t ln = OP(TIDE_OP_LAYER_NORM, "ln", x, gain, bias);
    uint32_t v = ph("v", SHAPE(3)), g3 = ph("g3", SHAPE(3));
    uint32_t ln1 = OP(TIDE_OP_LAYER_NORM, "ln1", v, g3, g3);
    uint32_t dy = ph("dy", SHAPE(2, 5, 8));
    uint32_t lng = add_node(TIDE_OP_LAYER_NORM_GRAD, "lng");
    set_edges(lng, (const struct tide_edge[]){{dy, 0}, {x, 0}, {gain, 0}, {ln, 1}, {ln, 2}}, 5);
    infer_ok();
    expect_f32(ln, SHAPE(2, 5, 8));
    expect_out(ln, 1, TIDE_DTYPE_FLOAT32, SHAPE(2, 5));
    expect_out(ln, 2, TIDE_DTYPE_FLOAT32, SHAPE(2, 5));
    expect_nbytes(ln, 2, 40);
    expect_f32(ln1, SHAPE(3));
    expect_out(ln1, 1, TIDE_DTYPE_FLOAT32, SCALAR); /* a rank-1 x has one row */
    expect_out(ln1, 2, TIDE_DTYPE_FLOAT32, SCALAR);
    expect_f32(lng, SHAPE(2, 5, 8));
    expect_out(lng, 1, TIDE_DTYPE_FLOAT32, SHAPE(8));
    expect_out(lng, 2, TIDE_DTYPE_FLOAT32, SHAPE(8));

    reset();
    x = ph("x", SHAPE(4, 6));
    gain = ph("gain", SHAPE(4));
    bias = ph("bias", SHAPE(6));
    OP(TIDE_OP_LAYER_NORM, "bad", x, gain, bias);
    FAILS(TIDE_INVALID, "bad", "input 1 (gain) has shape [4], wants [6]",
          "one per element of the last axis of input 0 (x) [4, 6]");

    reset();
    x = ph("x", SHAPE(4, 6));
    gain = ph("gain", SHAPE(6));
    bias = ph("bias", SHAPE(1, 6));
    OP(TIDE_OP_LAYER_NORM, "bad", x, gain, bias);
    FAILS(TIDE_INVALID, "bad", "input 2 (bias) has shape [1, 6], wants [6]");

    reset();
    x = ph("x", SCALAR);
    gain = ph("gain", SHAPE(1));
    OP(TIDE_OP_LAYER_NORM, "bad", x, gain, gain);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [], wants rank 1 or more [..., D]");

    reset();
    x = ph("x", SHAPE(3, 0));
    gain = ph("gain", SHAPE(0));
    OP(TIDE_OP_LAYER_NORM, "bad", x, gain, gain);
    FAILS(TIDE_INVALID, "bad", "input 0 (x) has shape [3, 0], wants a last axis",
          "of 1 or more elements");

    reset();
    uint32_t ids = placeholder_of("ids", TIDE_DTYPE_INT32, SHAPE(2, 3));
    gain = ph("gain", SHAPE(3));
    OP(TIDE_OP_LAYER_NORM, "bad", ids, gain, gain);
    FAILS(TIDE_INVALID, "bad", "input 0", "is int32, wants float32");

    const double bad_eps[] = {0.0, -1e-5, INFINITY, NAN};
    const char *const bad_eps_text[] = {"is 0,", "is -1e-05,", "is inf,", "is nan,"};
    for (int i = 0; i < 4; i++) {
        reset();
        x = ph("x", SHAPE(2, 3));
        gain = ph("gain", SHAPE(3));
        ln = OP(TIDE_OP_LAYER_NORM, "bad", x, gain, gain);
        tide_attr_set_float(g, ln, TIDE_ATTR_LAYER_NORM_epsilon, bad_eps[i]);
        FAILS(TIDE_INVALID, "bad", "attribute \"epsilon\"", bad_eps_text[i],
              "wants a finite value > 0");
    }

    /* LayerNormGrad: dy must match x, the statistics one per row. */
    reset();
    x = ph("x", SHAPE(2, 5, 8));
    gain = ph("gain", SHAPE(8));
    dy = ph("dy", SHAPE(2, 5, 7));
    uint32_t rows = ph("rows", SHAPE(2, 5));
    lng = add_node(TIDE_OP_LAYER_NORM_GRAD, "bad");
    set_edges(lng, (const struct tide_edge[]){{dy, 0}, {x, 0}, {gain, 0}, {rows, 0}, {rows, 0}}, 5);
    FAILS(TIDE_INVALID, "bad", "input 0 (dy) has shape [2, 5, 7], wants [2, 5, 8]",
          "the shape of input 1 (x)");

    reset();
    x = ph("x", SHAPE(2, 5, 8));
    gain = ph("gain", SHAPE(8));
    rows = ph("rows", SHAPE(2, 5));
    uint32_t cols = ph("cols", SHAPE(8));
    lng = add_node(TIDE_OP_LAYER_NORM_GRAD, "bad");
    set_edges(lng, (const struct tide_edge[]){{x, 0}, {x, 0}, {gain, 0}, {rows, 0}, {cols, 0}}, 5);
    FAILS(TIDE_INVALID, "bad", "input 4 (inv_std) has shape [8], wants [2, 5]",
          "one per row of input 1 (x) [2, 5, 8], its shape without the last axis");

    reset();
    x = ph("x", SHAPE(2, 5, 8));
    gain = ph("gain", SHAPE(5));
    rows = ph("rows", SHAPE(2, 5));
    lng = add_node(TIDE_OP_LAYER_NORM_GRAD, "bad");
    set_edges(lng, (const struct tide_edge[]){{x, 0}, {x, 0}, {gain, 0}, {rows, 0}, {rows, 0}}, 5);
    FAILS(TIDE_INVALID, "bad", "input 2 (gain) has shape [5], wants [8]");
}

static void test_dropout(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(4, 7)), s = ph("s", SCALAR);
    uint32_t d = OP(TIDE_OP_DROPOUT, "d", x);
    tide_attr_set_float(g, d, TIDE_ATTR_DROPOUT_rate, 0.3);
    uint32_t d0 = OP(TIDE_OP_DROPOUT, "d0", s);
    tide_attr_set_float(g, d0, TIDE_ATTR_DROPOUT_rate, 0.0);
    tide_attr_set_int(g, d0, TIDE_ATTR_DROPOUT_seed, -7);
    uint32_t dg = OP(TIDE_OP_DROPOUT_GRAD, "dg", x);
    tide_attr_set_float(g, dg, TIDE_ATTR_DROPOUT_GRAD_rate, 0.3);
    set_string(dg, TIDE_ATTR_DROPOUT_GRAD_forward, "d");
    infer_ok();
    expect_f32(d, SHAPE(4, 7));
    expect_f32(d0, SCALAR);
    expect_f32(dg, SHAPE(4, 7));

    const double bad_rate[] = {1.0, -0.1, 1.5, NAN};
    const char *const bad_rate_text[] = {"is 1,", "is -0.1,", "is 1.5,", "is nan,"};
    for (int i = 0; i < 4; i++) {
        reset();
        x = ph("x", SHAPE(4, 7));
        d = OP(TIDE_OP_DROPOUT, "bad", x);
        tide_attr_set_float(g, d, TIDE_ATTR_DROPOUT_rate, bad_rate[i]);
        FAILS(TIDE_INVALID, "bad", "attribute \"rate\"", bad_rate_text[i],
              "wants a value in [0, 1)");
    }

    reset();
    x = ph("x", SHAPE(4, 7));
    OP(TIDE_OP_DROPOUT, "bad", x);
    FAILS(TIDE_INVALID, "bad", "missing required attribute \"rate\"");

    reset();
    uint32_t ids = placeholder_of("ids", TIDE_DTYPE_INT32, SHAPE(3));
    d = OP(TIDE_OP_DROPOUT, "bad", ids);
    tide_attr_set_float(g, d, TIDE_ATTR_DROPOUT_rate, 0.5);
    FAILS(TIDE_INVALID, "bad", "input 0", "is int32, wants float32");

    reset();
    x = ph("x", SHAPE(4, 7));
    dg = OP(TIDE_OP_DROPOUT_GRAD, "bad", x);
    tide_attr_set_float(g, dg, TIDE_ATTR_DROPOUT_GRAD_rate, 0.5);
    set_string(dg, TIDE_ATTR_DROPOUT_GRAD_forward, "");
    FAILS(TIDE_INVALID, "bad", "attribute \"forward\" is empty",
          "the name of the Dropout node whose mask this regenerates");

    reset();
    x = ph("x", SHAPE(4, 7));
    dg = OP(TIDE_OP_DROPOUT_GRAD, "bad", x);
    tide_attr_set_float(g, dg, TIDE_ATTR_DROPOUT_GRAD_rate, 1.0);
    set_string(dg, TIDE_ATTR_DROPOUT_GRAD_forward, "d");
    FAILS(TIDE_INVALID, "bad", "attribute \"rate\" is 1, wants a value in [0, 1)");
}

/* ---- Sequence-model ops: fused attention (Attention) ---- */

static void test_attention(void **state)
{
    (void)state;
    uint32_t q = ph("q", SHAPE(2, 3, 5, 8)), k = ph("k", SHAPE(2, 3, 5, 8)),
             v = ph("v", SHAPE(2, 3, 5, 8));
    uint32_t att = OP(TIDE_OP_ATTENTION, "att", q, k, v);
    /* Not causal, Sq != Sk, an explicit scale. */
    uint32_t k7 = ph("k7", SHAPE(2, 3, 7, 8)), v7 = ph("v7", SHAPE(2, 3, 7, 8));
    uint32_t cross = OP(TIDE_OP_ATTENTION, "cross", q, k7, v7);
    tide_attr_set_bool(g, cross, TIDE_ATTR_ATTENTION_causal, false);
    tide_attr_set_float(g, cross, TIDE_ATTR_ATTENTION_scale, 0.5);
    uint32_t grad = add_node(TIDE_OP_ATTENTION_GRAD, "grad");
    set_edges(grad,
              (const struct tide_edge[]){{q, 0}, {k7, 0}, {v7, 0}, {cross, 0}, {cross, 1}, {q, 0}},
              6);
    tide_attr_set_bool(g, grad, TIDE_ATTR_ATTENTION_GRAD_causal, false);
    infer_ok();
    expect_f32(att, SHAPE(2, 3, 5, 8));
    expect_out(att, 1, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 5));
    expect_nbytes(att, 1, 2 * 3 * 5 * 4);
    expect_f32(cross, SHAPE(2, 3, 5, 8));
    expect_out(cross, 1, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 5));
    expect_f32(grad, SHAPE(2, 3, 5, 8));
    expect_out(grad, 1, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 7, 8));
    expect_out(grad, 2, TIDE_DTYPE_FLOAT32, SHAPE(2, 3, 7, 8));

    reset();
    q = ph("q", SHAPE(3, 5, 8));
    OP(TIDE_OP_ATTENTION, "bad", q, q, q);
    FAILS(TIDE_INVALID, "bad", "input 0 (q) has shape [3, 5, 8], wants rank 4 [B, H, Sq, D]");

    reset();
    q = ph("q", SHAPE(2, 3, 5, 8));
    k = ph("k", SHAPE(2, 3, 5, 8, 1));
    OP(TIDE_OP_ATTENTION, "bad", q, k, k);
    FAILS(TIDE_INVALID, "bad", "input 1 (k) has shape [2, 3, 5, 8, 1], wants rank 4 [B, H, Sk, D]");

    reset();
    q = ph("q", SHAPE(2, 3, 5, 8));
    k = ph("k", SHAPE(2, 4, 5, 8));
    OP(TIDE_OP_ATTENTION, "bad", q, k, k);
    FAILS(TIDE_INVALID, "bad",
          "input 1 (k) has shape [2, 4, 5, 8], wants [B, H, Sk, D] with the B, H and D of input 0 "
          "(q) [2, 3, 5, 8]");

    reset();
    q = ph("q", SHAPE(2, 3, 5, 8));
    k = ph("k", SHAPE(2, 3, 5, 4));
    OP(TIDE_OP_ATTENTION, "bad", q, k, k);
    FAILS(TIDE_INVALID, "bad", "input 1 (k) has shape [2, 3, 5, 4]", "of input 0 (q) [2, 3, 5, 8]");

    reset();
    q = ph("q", SHAPE(2, 3, 5, 8));
    v = ph("v", SHAPE(2, 3, 6, 8));
    OP(TIDE_OP_ATTENTION, "bad", q, q, v);
    FAILS(TIDE_INVALID, "bad",
          "input 2 (v) has shape [2, 3, 6, 8], wants [2, 3, 5, 8] (the shape of input 1 (k))");

    reset();
    q = ph("q", SHAPE(2, 3, 5, 0));
    OP(TIDE_OP_ATTENTION, "bad", q, q, q);
    FAILS(TIDE_INVALID, "bad", "input 0 (q) [2, 3, 5, 0] has head dimension D 0, wants at least 1");

    reset();
    q = ph("q", SHAPE(2, 3, 5, 8));
    k = ph("k", SHAPE(2, 3, 0, 8));
    att = OP(TIDE_OP_ATTENTION, "bad", q, k, k);
    tide_attr_set_bool(g, att, TIDE_ATTR_ATTENTION_causal, false);
    FAILS(TIDE_INVALID, "bad", "input 1 (k) [2, 3, 0, 8] has no keys (Sk is 0), wants at least 1");

    /* Causal (the default) wants Sq == Sk. */
    reset();
    q = ph("q", SHAPE(2, 3, 5, 8));
    k = ph("k", SHAPE(2, 3, 7, 8));
    OP(TIDE_OP_ATTENTION, "bad", q, k, k);
    FAILS(TIDE_INVALID, "bad",
          "attribute \"causal\" is set, so input 0 (q) [2, 3, 5, 8] and input 1 (k) [2, 3, 7, 8] "
          "must have the same sequence length (Sq 5, Sk 7)");

    const double bad_scales[] = {-1.0, INFINITY, NAN};
    const char *const bad_texts[] = {"is -1,", "is inf,", "is nan,"};
    for (int i = 0; i < 3; i++) {
        reset();
        q = ph("q", SHAPE(1, 1, 2, 2));
        att = OP(TIDE_OP_ATTENTION, "bad", q, q, q);
        tide_attr_set_float(g, att, TIDE_ATTR_ATTENTION_scale, bad_scales[i]);
        FAILS(TIDE_INVALID, "bad", "attribute \"scale\"", bad_texts[i],
              "wants 0 (for 1/sqrt(D)) or a finite value > 0");
    }

    reset();
    q = placeholder_of("q", TIDE_DTYPE_INT32, SHAPE(1, 1, 2, 2));
    OP(TIDE_OP_ATTENTION, "bad", q, q, q);
    FAILS(TIDE_INVALID, "bad", "input 0 (\"q\") is int32, wants float32");

    /* AttentionGrad: o and do have q's shape, lse one per row. */
    reset();
    q = ph("q", SHAPE(1, 2, 4, 3));
    uint32_t lse = ph("lse", SHAPE(1, 2, 4)), o2 = ph("o2", SHAPE(1, 2, 4, 2));
    OP(TIDE_OP_ATTENTION_GRAD, "bad", q, q, q, o2, lse, q);
    FAILS(TIDE_INVALID, "bad",
          "input 3 (o) has shape [1, 2, 4, 2], wants [1, 2, 4, 3] (the shape of input 0 (q))");

    reset();
    q = ph("q", SHAPE(1, 2, 4, 3));
    lse = ph("lse", SHAPE(1, 2, 3));
    OP(TIDE_OP_ATTENTION_GRAD, "bad", q, q, q, q, lse, q);
    FAILS(TIDE_INVALID, "bad",
          "input 4 (lse) has shape [1, 2, 3], wants [1, 2, 4] (one per row of input 0 (q) "
          "[1, 2, 4, 3])");

    reset();
    q = ph("q", SHAPE(1, 2, 4, 3));
    lse = ph("lse", SHAPE(1, 2, 4));
    uint32_t dout = ph("do", SHAPE(1, 2, 5, 3));
    OP(TIDE_OP_ATTENTION_GRAD, "bad", q, q, q, q, lse, dout);
    FAILS(TIDE_INVALID, "bad", "input 5 (do) has shape [1, 2, 5, 3], wants [1, 2, 4, 3]");

    reset();
    q = ph("q", SHAPE(1, 2, 4, 3));
    k = ph("k", SHAPE(1, 2, 6, 3));
    lse = ph("lse", SHAPE(1, 2, 4));
    OP(TIDE_OP_ATTENTION_GRAD, "bad", q, k, k, q, lse, q);
    FAILS(TIDE_INVALID, "bad", "attribute \"causal\" is set", "(Sq 4, Sk 6)");
}

static void test_small_cnn(void **state)
{
    (void)state;
    uint32_t images = ph("images", SHAPE(8, 1, 28, 28));
    uint32_t labels = placeholder_of("labels", TIDE_DTYPE_INT32, SHAPE(8));
    uint32_t k1 = var("k1", SHAPE(6, 1, 5, 5));
    uint32_t conv = OP(TIDE_OP_CONV2D, "conv1", images, k1);
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_pads, LIST(2, 2));
    uint32_t relu = OP(TIDE_OP_RELU, "relu1", conv);
    uint32_t pool = OP(TIDE_OP_MAX_POOL2D, "pool1", relu);
    tide_attr_set_ints(g, pool, TIDE_ATTR_MAX_POOL2D_ksize, LIST(2, 2));
    uint32_t flat = OP(TIDE_OP_RESHAPE, "flat", pool);
    tide_attr_set_ints(g, flat, TIDE_ATTR_RESHAPE_shape, LIST(8, -1));
    uint32_t w = var("w", SHAPE(6 * 14 * 14, 10)), b = var("b", SHAPE(10));
    uint32_t fc = OP(TIDE_OP_MATMUL, "fc", flat, w);
    uint32_t logits = OP(TIDE_OP_BIAS_ADD, "logits", fc, b);
    uint32_t loss = OP(TIDE_OP_SOFTMAX_CROSS_ENTROPY, "loss", logits, labels);
    uint32_t mean = OP(TIDE_OP_REDUCE_MEAN, "mean", loss);
    infer_ok();
    expect_f32(conv, SHAPE(8, 6, 28, 28));
    expect_f32(pool, SHAPE(8, 6, 14, 14));
    expect_f32(flat, SHAPE(8, 1176));
    expect_f32(logits, SHAPE(8, 10));
    expect_f32(loss, SHAPE(8));
    expect_f32(mean, SCALAR);
}

/* The passes re-run inference after rewriting a graph: normalised attributes must infer again. */
static void test_infer_twice(void **state)
{
    (void)state;
    uint32_t x = ph("x", SHAPE(2, 3, 8, 8));
    uint32_t r = OP(TIDE_OP_REDUCE_SUM, "r", x);
    uint32_t s = OP(TIDE_OP_SLICE, "s", x);
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_begin, LIST(0, 1, 0, 0));
    tide_attr_set_ints(g, s, TIDE_ATTR_SLICE_size, LIST(-1, -1, 4, -1));
    uint32_t p = OP(TIDE_OP_AVG_POOL2D, "p", s);
    tide_attr_set_ints(g, p, TIDE_ATTR_AVG_POOL2D_ksize, LIST(2, 4));
    uint32_t sm = OP(TIDE_OP_SOFTMAX, "sm", p);
    for (int round = 0; round < 2; round++) {
        infer_ok();
        expect_f32(r, SCALAR);
        expect_ints(r, TIDE_ATTR_REDUCE_SUM_axes, LIST(0, 1, 2, 3));
        expect_f32(s, SHAPE(2, 2, 4, 8));
        expect_ints(s, TIDE_ATTR_SLICE_size, LIST(2, 2, 4, 8));
        expect_f32(p, SHAPE(2, 2, 2, 2));
        expect_ints(p, TIDE_ATTR_AVG_POOL2D_strides, LIST(2, 4));
        expect_f32(sm, SHAPE(2, 2, 2, 2));
        assert_int_equal(g->nodes[sm].attrs[TIDE_ATTR_SOFTMAX_axis].i, 3);
    }
}

/*
 * tide_graph_infer_node checks one node as tide_graph_infer does in its walk,
 * with the same messages: a node at a time, as libtide's builder adds them.
 */
static void test_infer_node(void **state)
{
    (void)state;
    struct tide_error one = {0}, whole = {0};
    uint32_t a = ph("a", SHAPE(4, 3));
    uint32_t b = ph("b", SHAPE(2, 2));
    assert_int_equal(tide_graph_infer_node(g, a, NULL, &one), TIDE_OK);
    assert_int_equal(tide_graph_infer_node(g, b, NULL, &one), TIDE_OK);
    assert_int_equal(g->nodes[a].outputs[0].dtype, TIDE_DTYPE_FLOAT32);
    assert_int_equal(g->nodes[a].outputs[0].nbytes, 48);

    /* A shape fault: the same message as the whole-graph walk. */
    uint32_t mm = OP(TIDE_OP_MATMUL, "mm", a, b);
    assert_int_equal(tide_graph_infer_node(g, mm, NULL, &one), TIDE_INVALID);
    assert_string_equal(one.message, "node \"mm\" (MatMul): inner dimensions 3 and 2 differ (a is "
                                     "[4, 3], b is [2, 2])");
    assert_int_equal(tide_graph_infer(g, NULL, &whole), TIDE_INVALID);
    assert_string_equal(one.message, whole.message);

    /* Structure (arity) and dtype rules are checked too. */
    reset();
    uint32_t x = ph("x", SHAPE(2, 3));
    uint32_t l = placeholder_of("l", TIDE_DTYPE_INT32, SHAPE(2));
    assert_int_equal(tide_graph_infer_node(g, x, NULL, &one), TIDE_OK);
    assert_int_equal(tide_graph_infer_node(g, l, NULL, &one), TIDE_OK);
    uint32_t r = add_node(TIDE_OP_RELU, "r");
    assert_int_equal(tide_graph_infer_node(g, r, NULL, &one), TIDE_INVALID);
    assert_string_equal(one.message, "node \"r\" (Relu): has 0 data inputs, wants 1");
    set_edges(r, &(struct tide_edge){l, 0}, 1);
    assert_int_equal(tide_graph_infer_node(g, r, NULL, &one), TIDE_INVALID);
    assert_string_equal(one.message, "node \"r\" (Relu): input 0 (\"l\") is int32, wants float32");
    set_edges(r, &(struct tide_edge){x, 0}, 1);
    assert_int_equal(tide_graph_infer_node(g, r, NULL, &one), TIDE_OK);
    assert_int_equal(g->nodes[r].outputs[0].shape.dims[1], 3);

    /* The limits apply, and an id out of range is refused. */
    struct tide_graph_limits small = {.max_nodes = 100, .max_tensor_bytes = 16};
    uint32_t big = ph("big", SHAPE(5));
    assert_int_equal(tide_graph_infer_node(g, big, &small, &one), TIDE_LIMIT);
    assert_non_null(strstr(one.message, "node \"big\" (Placeholder): output 0 of shape [5] is 20 "
                                        "bytes, over the limit of 16 bytes per tensor"));
    assert_int_equal(tide_graph_infer_node(g, g->n_nodes, NULL, &one), TIDE_INVALID);
}

static void test_every_op_covered(void **state)
{
    (void)state;
    char missing[2048] = "";
    for (int op = 0; op < TIDE_OP_COUNT; op++) {
        const char *name = tide_op_info((enum tide_op)op)->name;
        size_t used = strlen(missing);
        if (!covered_ok[op])
            snprintf(missing + used, sizeof(missing) - used, " %s(pass)", name);
        used = strlen(missing);
        if (!covered_bad[op])
            snprintf(missing + used, sizeof(missing) - used, " %s(refusal)", name);
    }
    if (missing[0])
        fail_msg("ops without a checked case:%s", missing);
}

#define TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        TEST(test_placeholder),
        TEST(test_tensor_byte_limits),
        TEST(test_variable),
        TEST(test_const),
        TEST(test_identity_and_memory_ops),
        TEST(test_unary),
        TEST(test_broadcast),
        TEST(test_add_n),
        TEST(test_elementwise_grads),
        TEST(test_matmul),
        TEST(test_math),
        TEST(test_bias_add),
        TEST(test_softmax),
        TEST(test_softmax_cross_entropy),
        TEST(test_reduce),
        TEST(test_reshape),
        TEST(test_concat),
        TEST(test_slice),
        TEST(test_slice_grad),
        TEST(test_sum_to_shape_and_broadcast_to),
        TEST(test_conv2d),
        TEST(test_conv2d_backprop),
        TEST(test_conv2d_group),
        TEST(test_conv2d_dilations),
        TEST(test_pool2d),
        TEST(test_pool2d_grads),
        TEST(test_global_avg_pool),
        TEST(test_batch_norm),
        TEST(test_apply),
        /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
        TEST(test_math_unary),
        TEST(test_math_binary),
        TEST(test_math_grads),
        TEST(test_masks),
        TEST(test_trig),
        TEST(test_round),

        /* batched products and axis permutation (BatchMatMul, Transpose) */
        TEST(test_batch_matmul),
        TEST(test_transpose),

        /* indexing (Gather, TopK, Mixture-of-Experts routing) */
        TEST(test_gather),
        TEST(test_gather_grad),
        TEST(test_gather_elements),
        TEST(test_gather_elements_grad),
        TEST(test_top_k),
        TEST(test_top_k_grad),
        TEST(test_moe_route),

        /* normalisation and regularisation (LayerNorm, Dropout) */
        TEST(test_layer_norm),
        TEST(test_dropout),

        /* fused attention (Attention) */
        TEST(test_attention),

        TEST(test_small_cnn),
        TEST(test_infer_twice),
        TEST(test_infer_node),
        /* Last: relies on the cases above having run. */
        TEST(test_every_op_covered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
