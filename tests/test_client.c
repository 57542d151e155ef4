/* SPDX-License-Identifier: MIT */
/*
 * test_client.c: libtide's graph builder, models and datasets.
 *
 * Builder graphs are serialized and unpacked again with protobuf-c, and every
 * node of every graph here is checked against tide's op table (graph/ops.def,
 * included as an X-macro: the table, not the graph library) — op names,
 * arity, attribute names, types and required attributes — so the builder
 * cannot drift from what the daemon imports. A sample of bad nodes is built
 * both with the builder and as a wire message for the daemon's import
 * (graph/import.c), and the two errors must be equal word for word. Models
 * are checked for exact node and parameter counts (ResNet-50 against the
 * published 25,557,032), the language models against the formulas of
 * tide/models.h.
 * Dataset tests read the real Fashion-MNIST files and skip when the package
 * is not installed; the files are also read raw here to cross-check. So do
 * the corpus tests with Debian's fortunes package.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "graph/import.h"
#include "tide/tide.h"
#include "tide/v1/tide.pb-c.h"
#include "float_assert.h"

/* ============================================================================
 * The op table, from graph/ops.def
 * ========================================================================== */

#define DEF_INT    TIDE__V1__ATTR_VALUE__VALUE_I
#define DEF_FLOAT  TIDE__V1__ATTR_VALUE__VALUE_F
#define DEF_BOOL   TIDE__V1__ATTR_VALUE__VALUE_B
#define DEF_STRING TIDE__V1__ATTR_VALUE__VALUE_S
#define DEF_DTYPE  TIDE__V1__ATTR_VALUE__VALUE_DTYPE
#define DEF_SHAPE  TIDE__V1__ATTR_VALUE__VALUE_SHAPE
#define DEF_TENSOR TIDE__V1__ATTR_VALUE__VALUE_TENSOR
#define DEF_INTS   TIDE__V1__ATTR_VALUE__VALUE_INTS
#define DEF_FLOATS TIDE__V1__ATTR_VALUE__VALUE_FLOATS

struct def_attr {
    const char *name;
    int value_case;
    int required;
};

struct def_op {
    const char *name;
    int min_in, max_in, n_out;
    struct def_attr attrs[12];
};

#define A(ID, NAME, TYPE, REQUIRED, DEFAULT) {#NAME, DEF_##TYPE, REQUIRED},
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE_RULE, INFER, GRAD, FLAGS)                   \
    {NAME, MIN_IN, MAX_IN, N_OUT, {TIDE_ATTRS_##ID(A){NULL, 0, 0}}},
static const struct def_op def_ops[] = {
#include "graph/ops.def"
};
#undef TIDE_OP
#undef A

static const struct def_op *def_op_find(const char *name)
{
    for (size_t i = 0; i < sizeof(def_ops) / sizeof(def_ops[0]); i++) {
        if (strcmp(def_ops[i].name, name) == 0)
            return &def_ops[i];
    }
    return NULL;
}

/* ============================================================================
 * Helpers
 * ========================================================================== */

/* Serializes b (which must hold no error) and unpacks the bytes again. */
static Tide__V1__Graph *roundtrip(tide_builder *b)
{
    uint8_t *bytes = NULL;
    size_t len = 0;
    int rc = tide_builder_serialize(b, &bytes, &len);
    if (rc != 0)
        fail_msg("serialize failed: %s", tide_builder_error(b));
    assert_non_null(bytes);
    Tide__V1__Graph *g = tide__v1__graph__unpack(NULL, len, bytes);
    free(bytes);
    assert_non_null(g);
    assert_int_equal(g->n_nodes, (size_t)tide_builder_node_count(b));
    return g;
}

/* Fails unless the daemon's importer takes g (the graph a builder test made). */
static void expect_daemon_imports(const Tide__V1__Graph *g)
{
    struct tide_graph *imported = NULL;
    struct tide_error err = {0};
    if (tide_graph_import_message(g, NULL, &imported, &err) != TIDE_OK)
        fail_msg("import: %s", err.message);
    tide_graph_free(imported);
}

static const Tide__V1__Node *node_named(const Tide__V1__Graph *g, const char *name)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (strcmp(g->nodes[i]->name, name) == 0)
            return g->nodes[i];
    }
    fail_msg("no node \"%s\" in the graph", name);
    return NULL;
}

static const Tide__V1__AttrValue *attr_of(const Tide__V1__Node *n, const char *key)
{
    for (size_t i = 0; i < n->n_attrs; i++) {
        if (strcmp(n->attrs[i]->key, key) == 0)
            return n->attrs[i]->value;
    }
    fail_msg("node \"%s\" has no attribute \"%s\"", n->name, key);
    return NULL;
}

static void expect_ints(const Tide__V1__AttrValue *v, size_t n, const int64_t *want)
{
    assert_int_equal(v->value_case, TIDE__V1__ATTR_VALUE__VALUE_INTS);
    assert_int_equal(v->ints->n_values, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v->ints->values[i], want[i]);
}

static void expect_shape(const tide_builder *b, tide_ref r, int32_t rank, const int64_t *want)
{
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    int32_t got_rank = -1;
    assert_int_equal(tide_builder_shape(b, r, dims, &got_rank), 0);
    assert_int_equal(got_rank, rank);
    for (int32_t i = 0; i < rank; i++)
        assert_int_equal(dims[i], want[i]);
}

static bool contains(const char *haystack, const char *needle)
{
    return haystack && strstr(haystack, needle) != NULL;
}

#define assert_contains(haystack, needle)                                                          \
    do {                                                                                           \
        const char *h_ = (haystack);                                                               \
        if (!contains(h_, (needle)))                                                               \
            fail_msg("\"%s\" does not contain \"%s\"", h_ ? h_ : "(NULL)", (needle));              \
    } while (0)

/*
 * Checks every node of g against ops.def: the op exists, its data inputs are
 * within its arity, each names an earlier node (and an output it has), its
 * control inputs come last, its attributes are listed with the right type
 * and the required ones are present; names are unique.
 */
static void check_against_op_table(const Tide__V1__Graph *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const Tide__V1__Node *n = g->nodes[i];
        const struct def_op *op = def_op_find(n->op);
        if (!op)
            fail_msg("node \"%s\": op \"%s\" is not in ops.def", n->name, n->op);
        size_t data = 0;
        bool control_seen = false;
        for (size_t k = 0; k < n->n_inputs; k++) {
            const char *in = n->inputs[k];
            bool control = in[0] == '^';
            if (!control) {
                if (control_seen)
                    fail_msg("node \"%s\": data input after a control input", n->name);
                data++;
            }
            control_seen |= control;
            char name[300];
            snprintf(name, sizeof(name), "%s", control ? in + 1 : in);
            int output = 0;
            char *colon = strrchr(name, ':');
            if (colon) {
                output = atoi(colon + 1);
                *colon = '\0';
            }
            size_t j = 0;
            while (j < g->n_nodes && strcmp(g->nodes[j]->name, name) != 0)
                j++;
            if (j == g->n_nodes)
                fail_msg("node \"%s\": input \"%s\" names no node", n->name, in);
            if (!control && j >= i)
                fail_msg("node \"%s\": input \"%s\" is not an earlier node", n->name, in);
            if (output >= def_op_find(g->nodes[j]->op)->n_out)
                fail_msg("node \"%s\": input \"%s\" names a missing output", n->name, in);
        }
        if ((int)data < op->min_in || (op->max_in >= 0 && (int)data > op->max_in))
            fail_msg("node \"%s\" (%s): %zu data inputs, ops.def wants %d to %d", n->name, n->op,
                     data, op->min_in, op->max_in);
        for (size_t k = 0; k < n->n_attrs; k++) {
            const struct def_attr *a = op->attrs;
            while (a->name && strcmp(a->name, n->attrs[k]->key) != 0)
                a++;
            if (!a->name)
                fail_msg("node \"%s\" (%s): attribute \"%s\" is not in ops.def", n->name, n->op,
                         n->attrs[k]->key);
            if ((int)n->attrs[k]->value->value_case != a->value_case)
                fail_msg("node \"%s\" (%s): attribute \"%s\" has case %d, ops.def wants %d",
                         n->name, n->op, a->name, (int)n->attrs[k]->value->value_case,
                         a->value_case);
        }
        for (const struct def_attr *a = op->attrs; a->name; a++) {
            bool present = false;
            for (size_t k = 0; k < n->n_attrs; k++)
                present |= strcmp(n->attrs[k]->key, a->name) == 0;
            if (a->required && !present)
                fail_msg("node \"%s\" (%s): required attribute \"%s\" is missing", n->name, n->op,
                         a->name);
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(g->nodes[j]->name, n->name) == 0)
                fail_msg("node name \"%s\" appears twice", n->name);
        }
    }
}

/* Counts nodes whose op is op and whose name contains part (NULL: any name). */
static int count_ops(const Tide__V1__Graph *g, const char *op, const char *part)
{
    int n = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (strcmp(g->nodes[i]->op, op) == 0 && (!part || strstr(g->nodes[i]->name, part)))
            n++;
    }
    return n;
}

/* ============================================================================
 * Builder: serialization
 * ========================================================================== */

static void test_builder_serializes_a_dense_graph(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    int64_t x_dims[] = {4, 3}, w_dims[] = {3, 2}, b_dims[] = {2}, y_dims[] = {4};
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, x_dims);
    tide_ref y = tide_builder_placeholder(b, "y", TIDE_DT_INT32, 1, y_dims);
    tide_ref w = tide_builder_variable(b, "w", 2, w_dims, "glorot_uniform", 0.5f, true);
    tide_ref bias = tide_builder_variable(b, "bias", 1, b_dims, "zeros", 1.0f, false);
    tide_ref h = tide_builder_matmul(b, "mm", x, w, false, false);
    tide_ref logits = tide_builder_bias_add(b, NULL, h, bias);
    tide_ref xent = tide_builder_softmax_cross_entropy(b, NULL, logits, y);
    tide_ref loss = tide_builder_reduce_mean(b, "loss", xent, NULL, 0, false);
    assert_null(tide_builder_error(b));
    assert_int_equal(loss.id, 7);
    assert_int_equal(tide_builder_node_count(b), 8);
    assert_int_equal(tide_builder_parameter_count(b), 6); /* bias is not trainable */
    assert_string_equal(tide_builder_name(b, logits), "bias_add_0");
    assert_string_equal(tide_builder_op(b, xent), "SoftmaxCrossEntropy");
    assert_int_equal(tide_builder_find(b, "mm").id, h.id);
    assert_int_equal(tide_builder_find(b, "nope").id, -1);
    assert_int_equal(tide_builder_dtype(b, y), TIDE_DT_INT32);
    expect_shape(b, loss, 0, NULL);
    expect_shape(b, xent, 1, (int64_t[]){4});

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(g->version, 1);

    const Tide__V1__Node *n = g->nodes[0];
    assert_string_equal(n->name, "x");
    assert_string_equal(n->op, "Placeholder");
    assert_int_equal(n->n_inputs, 0);
    assert_int_equal(n->n_attrs, 2);
    assert_int_equal(attr_of(n, "dtype")->value_case, TIDE__V1__ATTR_VALUE__VALUE_DTYPE);
    assert_int_equal(attr_of(n, "dtype")->dtype, TIDE__V1__DATA_TYPE__DT_FLOAT32);
    const Tide__V1__TensorShape *shape = attr_of(n, "shape")->shape;
    assert_int_equal(shape->n_dims, 2);
    assert_int_equal(shape->dims[0], 4);
    assert_int_equal(shape->dims[1], 3);
    assert_int_equal(attr_of(node_named(g, "y"), "dtype")->dtype, TIDE__V1__DATA_TYPE__DT_INT32);

    n = node_named(g, "w");
    assert_string_equal(n->op, "Variable");
    assert_string_equal(attr_of(n, "init")->s, "glorot_uniform");
    assert_true(attr_of(n, "scale")->f == 0.5f);
    assert_int_equal(attr_of(n, "trainable")->value_case, TIDE__V1__ATTR_VALUE__VALUE_B);
    assert_true(attr_of(n, "trainable")->b);
    assert_false(attr_of(node_named(g, "bias"), "trainable")->b);
    assert_int_equal(attr_of(n, "dtype")->dtype, TIDE__V1__DATA_TYPE__DT_FLOAT32);

    n = node_named(g, "mm");
    assert_string_equal(n->op, "MatMul");
    assert_int_equal(n->n_inputs, 2);
    assert_string_equal(n->inputs[0], "x");
    assert_string_equal(n->inputs[1], "w");
    assert_int_equal(attr_of(n, "transpose_a")->value_case, TIDE__V1__ATTR_VALUE__VALUE_B);
    assert_false(attr_of(n, "transpose_a")->b);
    assert_false(attr_of(n, "transpose_b")->b);

    n = node_named(g, "bias_add_0");
    assert_string_equal(n->op, "BiasAdd");
    assert_string_equal(n->inputs[0], "mm");
    assert_string_equal(n->inputs[1], "bias");

    n = node_named(g, "loss");
    assert_string_equal(n->op, "ReduceMean");
    assert_string_equal(n->inputs[0], "softmax_cross_entropy_0");
    expect_ints(attr_of(n, "axes"), 0, NULL);
    assert_false(attr_of(n, "keep_dims")->b);

    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);
}

static void test_builder_writes_window_attrs_outputs_and_control_edges(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    int64_t x_dims[] = {2, 3, 9, 9}, w_dims[] = {8, 3, 3, 3}, c_dims[] = {8};
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 4, x_dims);
    tide_ref w = tide_builder_variable(b, "w", 4, w_dims, "he_normal", 1.0f, true);
    tide_ref conv = tide_builder_conv2d(b, "conv", x, w, 2, 1, 1, 0);
    tide_ref gamma = tide_builder_variable(b, "gamma", 1, c_dims, "ones", 1.0f, true);
    tide_ref beta = tide_builder_variable(b, "beta", 1, c_dims, "zeros", 1.0f, true);
    tide_ref bn = tide_builder_batch_norm(b, "bn", conv, gamma, beta, 1e-3f);
    tide_ref mean = tide_builder_output(b, bn, 1);
    tide_ref inv_std = tide_builder_output(b, bn, 2);
    tide_ref pool = tide_builder_max_pool2d(b, "pool", bn, 3, 2, 2, 1, 1, 0);
    tide_ref avg = tide_builder_avg_pool2d(b, "avg", pool, 2, 2, 1, 1, 0, 0);
    tide_ref m = tide_builder_identity(b, "mean", mean);
    tide_ref s = tide_builder_mul(b, "scaled", m, inv_std);
    assert_int_equal(tide_builder_control_edge(b, avg, s), 0);
    assert_int_equal(tide_builder_control_edge(b, avg, s), 0); /* twice is once */
    assert_int_equal(tide_builder_control_edge(b, s, x), 0);
    assert_null(tide_builder_error(b));

    /* Conv: (9 + 2 - 3) / 2 + 1 = 5 rows, (9 - 3) / 1 + 1 = 7 columns. */
    expect_shape(b, conv, 4, (int64_t[]){2, 8, 5, 7});
    expect_shape(b, mean, 1, (int64_t[]){8});
    /* Pool 3x2, strides 2x1, pads 1x0: (5 + 2 - 3) / 2 + 1 = 3, (7 - 2) / 1 + 1 = 6. */
    expect_shape(b, pool, 4, (int64_t[]){2, 8, 3, 6});
    expect_shape(b, avg, 4, (int64_t[]){2, 8, 2, 5});

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "conv");
    expect_ints(attr_of(n, "strides"), 2, (int64_t[]){2, 1});
    expect_ints(attr_of(n, "pads"), 2, (int64_t[]){1, 0});
    for (size_t i = 0; i < n->n_attrs; i++) /* one group: the default, not written */
        assert_string_not_equal(n->attrs[i]->key, "group");
    n = node_named(g, "pool");
    assert_string_equal(n->op, "MaxPool2D");
    expect_ints(attr_of(n, "ksize"), 2, (int64_t[]){3, 2});
    expect_ints(attr_of(n, "strides"), 2, (int64_t[]){2, 1});
    expect_ints(attr_of(n, "pads"), 2, (int64_t[]){1, 0});
    assert_string_equal(node_named(g, "avg")->op, "AvgPool2D");
    n = node_named(g, "bn");
    assert_string_equal(n->op, "BatchNorm");
    assert_true(attr_of(n, "epsilon")->f == 1e-3f);
    assert_int_equal(n->n_inputs, 3);
    assert_string_equal(node_named(g, "mean")->inputs[0], "bn:1");
    n = node_named(g, "scaled");
    assert_int_equal(n->n_inputs, 3);
    assert_string_equal(n->inputs[0], "mean");
    assert_string_equal(n->inputs[1], "bn:2");
    assert_string_equal(n->inputs[2], "^x");
    n = node_named(g, "avg");
    assert_int_equal(n->n_inputs, 2);
    assert_string_equal(n->inputs[0], "pool");
    assert_string_equal(n->inputs[1], "^scaled");
    tide__v1__graph__free_unpacked(g, NULL);

    /* An edge that closes a cycle is refused: avg already runs after scaled. */
    assert_int_equal(tide_builder_control_edge(b, s, avg), -1);
    assert_contains(tide_builder_error(b), "cycle");
    tide_builder_free(b);
}

/* A grouped and a depthwise convolution: their shapes, the group on the wire, and a refusal. */
static void test_builder_writes_grouped_conv(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 4, (int64_t[]){2, 6, 9, 9});
    tide_ref w = tide_builder_variable(b, "w", 4, (int64_t[]){4, 3, 3, 3}, "ones", 1.0f, true);
    tide_ref dw = tide_builder_variable(b, "dw", 4, (int64_t[]){6, 1, 3, 3}, "ones", 1.0f, true);
    tide_ref grouped = tide_builder_conv2d_grouped(b, "grouped", x, w, 1, 1, 1, 1, 2);
    tide_ref depthwise = tide_builder_conv2d_grouped(b, "depthwise", x, dw, 2, 2, 1, 1, 6);
    assert_null(tide_builder_error(b));
    expect_shape(b, grouped, 4, (int64_t[]){2, 4, 9, 9});
    expect_shape(b, depthwise, 4, (int64_t[]){2, 6, 5, 5});
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(attr_of(node_named(g, "grouped"), "group")->i, 2);
    assert_int_equal(attr_of(node_named(g, "depthwise"), "group")->i, 6);
    tide__v1__graph__free_unpacked(g, NULL);

    /* 4 groups do not divide 6 channels: infer's refusal, in the builder's error. */
    assert_int_equal(tide_builder_conv2d_grouped(b, "bad", x, dw, 1, 1, 0, 0, 4).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"bad\" (Conv2D): attribute \"group\" 4 does not divide the 6 "
                        "channels of input 0 (x) [2, 6, 9, 9]");
    tide_builder_free(b);
}

/*
 * A dilated convolution and its transposed one: their shapes, the dilations
 * on the wire (absent at 1, so dense graphs serialize as before), and
 * infer's refusal of a dilated window larger than the input.
 */
static void test_builder_writes_dilated_conv(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 4, (int64_t[]){2, 6, 17, 12});
    tide_ref w = tide_builder_variable(b, "w", 4, (int64_t[]){4, 3, 3, 3}, "ones", 1.0f, true);
    /* H: (17 + 2 * 2 - 9) / 2 + 1 = 7; W: (12 + 2 * 1 - 5) / 1 + 1 = 10, in 2 groups. */
    tide_ref atrous = tide_builder_conv2d_dilated(b, "atrous", x, w, 2, 1, 2, 1, 4, 2, 2);
    tide_ref dense = tide_builder_conv2d_dilated(b, "dense", x, w, 1, 1, 1, 1, 1, 1, 2);
    /* The transpose of atrous: [2, 4, 7, 10] back to [2, 6, 17, 12]. */
    tide_ref back =
        tide_builder_conv2d_transpose_dilated(b, "back", atrous, w, 2, 1, 2, 1, 4, 2, 17, 12, 2);
    assert_null(tide_builder_error(b));
    expect_shape(b, atrous, 4, (int64_t[]){2, 4, 7, 10});
    expect_shape(b, dense, 4, (int64_t[]){2, 4, 17, 12});
    expect_shape(b, back, 4, (int64_t[]){2, 6, 17, 12});
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    expect_ints(attr_of(node_named(g, "atrous"), "dilations"), 2, (int64_t[]){4, 2});
    expect_ints(attr_of(node_named(g, "back"), "dilations"), 2, (int64_t[]){4, 2});
    assert_string_equal(node_named(g, "back")->op, "Conv2DBackpropInput");
    const Tide__V1__Node *n = node_named(g, "dense");
    for (size_t i = 0; i < n->n_attrs; i++) /* dilations of 1: the default, not written */
        assert_string_not_equal(n->attrs[i]->key, "dilations");
    tide__v1__graph__free_unpacked(g, NULL);

    /* 3 taps 9 apart span 19 rows, more than 17 + 2 * 0. */
    assert_int_equal(tide_builder_conv2d_dilated(b, "bad", x, w, 1, 1, 0, 0, 9, 1, 2).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"bad\" (Conv2D): kernel height 3 dilated by 9 spans more than the "
                        "padded input height 17 + 2 * 0 = 17 (input 0 (x) is [2, 6, 17, 12])");
    tide_builder_free(b);
}

static void test_builder_writes_values_and_shape_ops(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    int64_t dims[] = {2, 3};
    const float values[] = {1, 2, 3, 4, 5, 6};
    const int32_t ints[] = {7, 8};
    tide_ref v = tide_builder_variable_value(b, "v", 2, dims, values);
    tide_ref k = tide_builder_constant(b, "k", TIDE_DT_INT32, 1, (int64_t[]){2}, ints);
    tide_ref c = tide_builder_constant(b, "c", TIDE_DT_FLOAT32, 2, dims, values);
    tide_ref sum = tide_builder_add(b, NULL, v, c);
    tide_ref diff = tide_builder_sub(b, NULL, sum,
                                     tide_builder_reduce_sum(b, "rs", c, (int64_t[]){0}, 1, true));
    tide_ref cat = tide_builder_concat(b, "cat", (tide_ref[]){v, diff, c}, 3, -1);
    tide_ref sl = tide_builder_slice(b, "sl", cat, (int64_t[]){1, 2}, (int64_t[]){-1, 4}, 2);
    tide_ref rs = tide_builder_reshape(b, "rs2", sl, 3, (int64_t[]){2, -1, 1});
    tide_ref sm = tide_builder_softmax(b, "sm", tide_builder_tanh(b, NULL, rs), -2);
    tide_ref sg = tide_builder_sigmoid(b, NULL, sm);
    tide_ref mean = tide_builder_reduce_mean(b, "rm", sg, (int64_t[]){-1, 0}, 2, false);
    tide_ref many[10];
    for (int i = 0; i < 10; i++)
        many[i] = i % 2 ? v : c;
    tide_ref wide = tide_builder_concat(b, "wide", many, 10, 0);
    assert_null(tide_builder_error(b));
    expect_shape(b, wide, 2, (int64_t[]){20, 3});
    assert_int_equal(tide_builder_parameter_count(b), 6);
    expect_shape(b, tide_builder_find(b, "rs"), 2, (int64_t[]){1, 3});
    expect_shape(b, cat, 2, (int64_t[]){2, 9});
    expect_shape(b, sl, 2, (int64_t[]){1, 4});
    expect_shape(b, rs, 3, (int64_t[]){2, 2, 1});
    expect_shape(b, mean, 1, (int64_t[]){2});
    assert_int_equal(tide_builder_dtype(b, k), TIDE_DT_INT32);

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "v");
    assert_string_equal(attr_of(n, "init")->s, "value");
    const Tide__V1__Tensor *t = attr_of(n, "value")->tensor;
    assert_int_equal(t->dtype, TIDE__V1__DATA_TYPE__DT_FLOAT32);
    assert_int_equal(t->shape->n_dims, 2);
    assert_int_equal(t->data.len, sizeof(values));
    assert_memory_equal(t->data.data, values, sizeof(values));
    t = attr_of(node_named(g, "k"), "value")->tensor;
    assert_int_equal(t->dtype, TIDE__V1__DATA_TYPE__DT_INT32);
    assert_memory_equal(t->data.data, ints, sizeof(ints));
    n = node_named(g, "cat");
    assert_int_equal(n->n_inputs, 3);
    assert_string_equal(n->inputs[1], "sub_0");
    assert_int_equal(attr_of(n, "axis")->i, -1);
    n = node_named(g, "sl");
    expect_ints(attr_of(n, "begin"), 2, (int64_t[]){1, 2});
    expect_ints(attr_of(n, "size"), 2, (int64_t[]){-1, 4});
    expect_ints(attr_of(node_named(g, "rs2"), "shape"), 3, (int64_t[]){2, -1, 1});
    assert_int_equal(attr_of(node_named(g, "sm"), "axis")->i, -2);
    n = node_named(g, "rs");
    expect_ints(attr_of(n, "axes"), 1, (int64_t[]){0});
    assert_true(attr_of(n, "keep_dims")->b);
    expect_ints(attr_of(node_named(g, "rm"), "axes"), 2, (int64_t[]){-1, 0});
    n = node_named(g, "wide");
    assert_int_equal(n->n_inputs, 10);
    assert_string_equal(n->inputs[0], "c");
    assert_string_equal(n->inputs[9], "v");
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);
}

/* ============================================================================
 * Builder: errors, names, shapes
 * ========================================================================== */

static void test_builder_errors_are_sticky(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    int64_t good[] = {2, 3}, bad[] = {2, -3};
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, good);
    assert_int_equal(x.id, 0);
    tide_ref y = tide_builder_placeholder(b, "y", TIDE_DT_FLOAT32, 2, bad);
    assert_int_equal(y.id, -1);
    const char *first = tide_builder_error(b);
    assert_string_equal(first, "node \"y\" (Placeholder): attribute \"shape\" [2, -3] has negative "
                               "dimension -3 at axis 1");

    /* Later calls do nothing and keep the first message. */
    char copy[512];
    snprintf(copy, sizeof(copy), "%s", first);
    assert_int_equal(tide_builder_relu(b, "r", x).id, -1);
    assert_int_equal(tide_builder_variable(b, "v", 2, good, "zeros", 1, true).id, -1);
    assert_int_equal(tide_builder_push_scope(b, "s"), -1);
    assert_int_equal(tide_builder_control_edge(b, x, x), -1);
    assert_int_equal(tide_builder_node_count(b), 1);
    assert_string_equal(tide_builder_error(b), copy);
    uint8_t *bytes = (uint8_t *)1;
    size_t len = 99;
    assert_int_equal(tide_builder_serialize(b, &bytes, &len), -1);
    assert_null(bytes);
    assert_int_equal(len, 0);
    tide_builder_free(b);

    /* A ref that names no node. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, good);
    assert_int_equal(tide_builder_add(b, "sum", x, (tide_ref){42, 0}).id, -1);
    assert_contains(tide_builder_error(b),
                    "node \"sum\" (Add): input 1 (y) is ref {id 42, output 0}");
    assert_contains(tide_builder_error(b), "names no node (the builder has 1)");
    tide_builder_free(b);

    /* TIDE_REF_NONE passed on, and an output the node does not have. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, good);
    assert_int_equal(tide_builder_relu(b, NULL, TIDE_REF_NONE).id, -1);
    assert_contains(tide_builder_error(b), "the call that made it failed");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, good);
    assert_int_equal(tide_builder_output(b, x, 1).id, -1);
    assert_contains(tide_builder_error(b), "Placeholder \"x\" has 1 output, so output 1");
    tide_builder_free(b);

    /* Shape and dtype mistakes name the numbers. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, good);
    tide_ref w = tide_builder_variable(b, "w", 2, (int64_t[]){4, 5}, "zeros", 1, true);
    assert_int_equal(tide_builder_matmul(b, "mm", x, w, false, false).id, -1);
    assert_string_equal(tide_builder_error(b), "node \"mm\" (MatMul): inner dimensions 3 and 4 "
                                               "differ (a is [2, 3], b is [4, 5])");
    tide_builder_free(b);
    b = tide_builder_new();
    tide_ref labels = tide_builder_placeholder(b, "l", TIDE_DT_INT32, 1, (int64_t[]){2});
    assert_int_equal(tide_builder_relu(b, "r", labels).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"r\" (Relu): input 0 (\"l\") is int32, wants float32");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 4, (int64_t[]){1, 1, 2, 2});
    w = tide_builder_variable(b, "w", 4, (int64_t[]){1, 1, 3, 3}, "zeros", 1, true);
    assert_int_equal(tide_builder_conv2d(b, "c", x, w, 1, 1, 0, 0).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"c\" (Conv2D): kernel height 3 is larger than the padded input "
                        "height 2 + 2 * 0 = 2 (input 0 (x) is [1, 1, 2, 2])");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, good);
    assert_int_equal(tide_builder_reshape(b, "r", x, 2, (int64_t[]){4, -1}).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"r\" (Reshape): attribute \"shape\" [4, -1]: input 0 [2, 3] has 6 "
                        "elements, not a multiple of 4");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_variable(b, "v", 1, good, "gaussian", 1, true).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"v\" (Variable): attribute \"init\" is \"gaussian\", wants one of "
                        "zeros, ones, constant, normal, uniform, glorot_uniform, he_normal, value");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_placeholder(b, "p", (enum tide_data_type)7, 0, NULL).id, -1);
    assert_string_equal(tide_builder_error(b), "node \"p\" (Placeholder): dtype is 7, wants "
                                               "TIDE_DT_FLOAT32 (1) or TIDE_DT_INT32 (2)");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_placeholder(b, "p", TIDE_DT_FLOAT32, 9, good).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"p\" (Placeholder): shape has rank 9, wants 0 to 8");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_placeholder(b, "p", TIDE_DT_FLOAT32, 2, NULL).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"p\" (Placeholder): shape has rank 2 but its dims pointer is NULL");
    tide_builder_free(b);

    /* A NULL builder never crashes. */
    assert_int_equal(tide_builder_placeholder(NULL, "x", TIDE_DT_FLOAT32, 2, good).id, -1);
    assert_int_equal(tide_builder_node_count(NULL), 0);
    assert_non_null(tide_builder_error(NULL));
    assert_int_equal(tide_builder_serialize(NULL, &bytes, &len), -1);
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    int32_t rank;
    assert_int_equal(tide_builder_shape(NULL, x, dims, &rank), -1);
    assert_null(tide_builder_name(NULL, x));
    tide_builder_free(NULL);
}

static void test_builder_names_and_scopes(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, NULL, TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    assert_string_equal(tide_builder_name(b, x), "placeholder_0");
    tide_ref r0 = tide_builder_relu(b, NULL, x);
    tide_ref r1 = tide_builder_relu(b, NULL, r0);
    tide_builder_relu(b, "relu_2", r1); /* a given name takes the next automatic one */
    tide_ref r3 = tide_builder_relu(b, NULL, r1);
    assert_string_equal(tide_builder_name(b, r0), "relu_0");
    assert_string_equal(tide_builder_name(b, r1), "relu_1");
    assert_string_equal(tide_builder_name(b, r3), "relu_3");

    assert_int_equal(tide_builder_push_scope(b, "layer1"), 0);
    assert_int_equal(tide_builder_push_scope(b, "conv"), 0);
    tide_ref s0 = tide_builder_relu(b, NULL, x);
    tide_ref s1 = tide_builder_relu(b, "act", x);
    assert_int_equal(tide_builder_pop_scope(b), 0);
    tide_ref s2 = tide_builder_relu(b, NULL, x);
    assert_int_equal(tide_builder_pop_scope(b), 0);
    assert_int_equal(tide_builder_push_scope(b, "layer2/conv"), 0);
    tide_ref s3 = tide_builder_relu(b, NULL, x);
    assert_int_equal(tide_builder_pop_scope(b), 0);
    tide_ref s4 = tide_builder_sigmoid(b, NULL, x);
    assert_null(tide_builder_error(b));
    assert_string_equal(tide_builder_name(b, s0), "layer1/conv/relu_0");
    assert_string_equal(tide_builder_name(b, s1), "layer1/conv/act");
    assert_string_equal(tide_builder_name(b, s2), "layer1/relu_0");
    assert_string_equal(tide_builder_name(b, s3), "layer2/conv/relu_0");
    assert_string_equal(tide_builder_name(b, s4), "sigmoid_0");
    assert_int_equal(tide_builder_find(b, "layer1/conv/act").id, s1.id);

    /* All unique, and the daemon's table accepts them. */
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    tide__v1__graph__free_unpacked(g, NULL);

    /* Duplicates and bad names are errors. */
    assert_int_equal(tide_builder_relu(b, "relu_1", x).id, -1);
    assert_contains(tide_builder_error(b), "duplicate node name \"relu_1\"");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_placeholder(b, "a b", TIDE_DT_FLOAT32, 0, NULL).id, -1);
    assert_contains(tide_builder_error(b), "node name \"a b\"");
    assert_contains(tide_builder_error(b), "[A-Za-z0-9_./-]");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_pop_scope(b), -1);
    assert_contains(tide_builder_error(b), "no name scope is open");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_builder_push_scope(b, "a//b"), -1);
    assert_contains(tide_builder_error(b), "name scope \"a//b\" is invalid");
    tide_builder_free(b);
    b = tide_builder_new();
    char long_name[300];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(tide_builder_placeholder(b, long_name, TIDE_DT_FLOAT32, 0, NULL).id, -1);
    assert_contains(tide_builder_error(b), "want 1 to 256 bytes");
    tide_builder_free(b);
}

static void test_builder_tracks_shapes(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 4, (int64_t[]){8, 3, 32, 32});
    tide_ref w = tide_builder_variable(b, "w", 4, (int64_t[]){16, 3, 5, 5}, "he_normal", 1, true);
    tide_ref c = tide_builder_conv2d(b, NULL, x, w, 1, 1, 2, 2);
    expect_shape(b, c, 4, (int64_t[]){8, 16, 32, 32});
    tide_ref p = tide_builder_max_pool2d(b, NULL, c, 3, 3, 2, 2, 1, 1);
    expect_shape(b, p, 4, (int64_t[]){8, 16, 16, 16});
    tide_ref w2 = tide_builder_variable(b, "w2", 4, (int64_t[]){4, 16, 3, 3}, "he_normal", 1, 1);
    tide_ref c2 = tide_builder_conv2d(b, NULL, p, w2, 2, 2, 0, 0);
    expect_shape(b, c2, 4, (int64_t[]){8, 4, 7, 7});
    tide_ref a = tide_builder_avg_pool2d(b, NULL, c2, 2, 2, 2, 2, 0, 0);
    expect_shape(b, a, 4, (int64_t[]){8, 4, 3, 3});
    tide_ref flat = tide_builder_reshape(b, NULL, a, 2, (int64_t[]){8, -1});
    expect_shape(b, flat, 2, (int64_t[]){8, 36});
    tide_ref g = tide_builder_global_avg_pool(b, NULL, c2);
    expect_shape(b, g, 2, (int64_t[]){8, 4});
    tide_ref t = tide_builder_matmul(b, NULL, flat, flat, true, false);
    expect_shape(b, t, 2, (int64_t[]){36, 36});
    tide_ref bc = tide_builder_add(
        b, NULL, g,
        tide_builder_reshape(
            b, NULL, tide_builder_slice(b, NULL, g, (int64_t[]){0, 0}, (int64_t[]){1, -1}, 2), 1,
            (int64_t[]){4}));
    expect_shape(b, bc, 2, (int64_t[]){8, 4});
    tide_ref r = tide_builder_reduce_sum(b, NULL, c2, (int64_t[]){1, -1}, 2, true);
    expect_shape(b, r, 4, (int64_t[]){8, 1, 7, 1});
    assert_null(tide_builder_error(b));
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    int32_t rank;
    assert_int_equal(tide_builder_shape(b, (tide_ref){999, 0}, dims, &rank), -1);
    assert_int_equal(tide_builder_shape(b, (tide_ref){c.id, 1}, dims, &rank), -1);
    assert_null(tide_builder_error(b)); /* queries do not record errors */
    tide_builder_free(b);
}

/* ============================================================================
 * Models
 * ========================================================================== */

static void test_model_mlp(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    const int64_t hidden[] = {128, 64};
    tide_ref logits = tide_model_mlp(b, 32, 784, hidden, 2, 10);
    assert_null(tide_builder_error(b));
    assert_string_equal(tide_builder_name(b, logits), "logits");
    expect_shape(b, logits, 2, (int64_t[]){32, 10});
    expect_shape(b, tide_builder_find(b, "loss"), 0, NULL);
    expect_shape(b, tide_builder_find(b, "images"), 4, (int64_t[]){32, 1, 1, 784});
    expect_shape(b, tide_builder_find(b, "labels"), 1, (int64_t[]){32});
    /* 784*128 + 128 + 128*64 + 64 + 64*10 + 10. */
    assert_int_equal(tide_builder_parameter_count(b), 109386);
    /* 2 placeholders, flatten, 3 layers of (w, b, matmul, bias_add), 2 relus, xent, loss. */
    assert_int_equal(tide_builder_node_count(b), 2 + 1 + 3 * 4 + 2 + 2);

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(count_ops(g, "MatMul", NULL), 3);
    assert_int_equal(count_ops(g, "Relu", NULL), 2);
    const Tide__V1__Node *n = node_named(g, "fc1/w");
    assert_string_equal(attr_of(n, "init")->s, "glorot_uniform");
    assert_int_equal(attr_of(n, "shape")->shape->dims[0], 784);
    assert_string_equal(attr_of(node_named(g, "fc_out/b"), "init")->s, "zeros");
    n = node_named(g, "loss");
    assert_string_equal(n->op, "ReduceMean");
    assert_string_equal(n->inputs[0], "xent");
    n = node_named(g, "xent");
    assert_string_equal(n->op, "SoftmaxCrossEntropy");
    assert_string_equal(n->inputs[0], "logits");
    assert_string_equal(n->inputs[1], "labels");
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* No hidden layer: a linear classifier; bad sizes are builder errors. */
    b = tide_builder_new();
    tide_model_mlp(b, 4, 10, NULL, 0, 3);
    assert_null(tide_builder_error(b));
    assert_int_equal(tide_builder_parameter_count(b), 10 * 3 + 3);
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_model_mlp(b, 0, 10, NULL, 0, 3).id, -1);
    assert_contains(tide_builder_error(b), "tide_model_mlp: batch is 0, wants 1 or more");
    tide_builder_free(b);
    b = tide_builder_new();
    assert_int_equal(tide_model_mlp(b, 4, 10, (int64_t[]){5, -2}, 2, 3).id, -1);
    assert_contains(tide_builder_error(b), "hidden[1] is -2");
    tide_builder_free(b);
}

static void test_model_cnn(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_cnn(b, 64, 1, 28, 28, 10);
    assert_null(tide_builder_error(b));
    expect_shape(b, logits, 2, (int64_t[]){64, 10});
    expect_shape(b, tide_builder_find(b, "images"), 4, (int64_t[]){64, 1, 28, 28});
    expect_shape(b, tide_builder_find(b, "flatten"), 2, (int64_t[]){64, 32 * 7 * 7});
    /* conv1 16*1*9 + 16, conv2 32*16*9 + 32, fc1 1568*128 + 128, fc_out 128*10 + 10. */
    assert_int_equal(tide_builder_parameter_count(b), 160 + 4640 + 200832 + 1290);
    /* 2 placeholders; 2 x (w, b, conv, bias_add, relu, pool); flatten; fc1 4 + relu; fc_out 4;
     * xent, loss. */
    assert_int_equal(tide_builder_node_count(b), 2 + 12 + 1 + 5 + 4 + 2);
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(count_ops(g, "Conv2D", NULL), 2);
    assert_int_equal(count_ops(g, "MaxPool2D", NULL), 2);
    assert_string_equal(attr_of(node_named(g, "conv1/w"), "init")->s, "he_normal");
    expect_ints(attr_of(node_named(g, "conv2/conv2d_0"), "pads"), 2, (int64_t[]){1, 1});
    expect_ints(attr_of(node_named(g, "conv2/max_pool2d_0"), "ksize"), 2, (int64_t[]){2, 2});
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Any image size: 3 x 32 x 32 flattens to 32 * 8 * 8. */
    b = tide_builder_new();
    tide_model_cnn(b, 2, 3, 32, 32, 100);
    assert_null(tide_builder_error(b));
    expect_shape(b, tide_builder_find(b, "flatten"), 2, (int64_t[]){2, 2048});
    tide_builder_free(b);
}

/* Checks a ResNet's depth, node count, shapes and table conformance. */
static void check_resnet(int64_t image_size, int32_t n, int64_t width, int64_t classes)
{
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_resnet(b, 2, 3, image_size, classes, n, width);
    assert_null(tide_builder_error(b));
    expect_shape(b, logits, 2, (int64_t[]){2, classes});
    expect_shape(b, tide_builder_find(b, "pool"), 2, (int64_t[]){2, 32 * width});
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);

    int convs = count_ops(g, "Conv2D", NULL), projections = count_ops(g, "Conv2D", "shortcut");
    int dense = count_ops(g, "MatMul", NULL);
    assert_int_equal(projections, 4);
    assert_int_equal(dense, 1);
    assert_int_equal(convs - projections + dense, tide_model_resnet_depth(n));
    assert_int_equal(count_ops(g, "BatchNorm", NULL), convs);
    assert_int_equal(count_ops(g, "Add", NULL), 10 + n);
    bool imagenet_stem = image_size >= 64;
    assert_int_equal(count_ops(g, "MaxPool2D", NULL), imagenet_stem ? 1 : 0);
    /* Placeholders 2; stem conv_bn 5 + relu (+ pool); each block 3 conv_bn of 5, 2 inner
     * relus, add, relu; 4 projections of 5; GlobalAvgPool; fc_out 4; xent, loss. */
    int blocks = 10 + n;
    assert_int_equal((int)g->n_nodes,
                     2 + 6 + (imagenet_stem ? 1 : 0) + 19 * blocks + 4 * 5 + 1 + 4 + 2);
    const Tide__V1__Node *stem = node_named(g, "stem/conv2d_0");
    expect_ints(attr_of(stem, "strides"), 2, imagenet_stem ? (int64_t[]){2, 2} : (int64_t[]){1, 1});
    /* Stride 2 sits on the 3x3 convolution of the first block of stages 2 to 4. */
    expect_ints(attr_of(node_named(g, "stage2/block0/conv2/conv2d_0"), "strides"), 2,
                (int64_t[]){2, 2});
    expect_ints(attr_of(node_named(g, "stage2/block0/shortcut/conv2d_0"), "strides"), 2,
                (int64_t[]){2, 2});
    expect_ints(attr_of(node_named(g, "stage1/block0/shortcut/conv2d_0"), "strides"), 2,
                (int64_t[]){1, 1});
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);
}

static void test_model_resnet(void **state)
{
    (void)state;
    assert_int_equal(tide_model_resnet_depth(2), 38);
    assert_int_equal(tide_model_resnet_depth(6), 50);
    assert_int_equal(tide_model_resnet_depth(23), 101);
    assert_int_equal(tide_model_resnet_depth(0), -1);
    check_resnet(32, 2, 16, 10);
    check_resnet(64, 1, 8, 5);
    check_resnet(7, 3, 4, 2); /* odd sizes shrink alike on both paths */

    /* ResNet-50 on ImageNet has the published 25,557,032 parameters. */
    tide_builder *b = tide_builder_new();
    tide_model_resnet(b, 1, 3, 224, 1000, 6, 64);
    assert_null(tide_builder_error(b));
    assert_int_equal(tide_builder_parameter_count(b), 25557032);
    expect_shape(b, tide_builder_find(b, "stem/max_pool2d_0"), 4, (int64_t[]){1, 64, 56, 56});
    expect_shape(b, tide_builder_find(b, "stage4/block2/relu_0"), 4, (int64_t[]){1, 2048, 7, 7});
    tide_builder_free(b);

    b = tide_builder_new();
    assert_int_equal(tide_model_resnet(b, 1, 3, 32, 10, 0, 16).id, -1);
    assert_contains(tide_builder_error(b), "n (stage 3) is 0");
    tide_builder_free(b);

    /* One model per builder: a second one collides on "images". */
    b = tide_builder_new();
    tide_model_cnn(b, 1, 1, 28, 28, 10);
    assert_int_equal(tide_model_cnn(b, 1, 1, 28, 28, 10).id, -1);
    assert_contains(tide_builder_error(b), "duplicate node name \"images\"");
    tide_builder_free(b);
}

/* The unrolled LSTM: shapes, parameters, the zero initial state and the forget-gate bias. */
static void test_model_lstm(void **state)
{
    (void)state;
    enum { B = 4, S = 5, F = 3, H = 6, C = 7 };
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_lstm(b, B, S, F, H, 2, C);
    assert_null(tide_builder_error(b));
    expect_shape(b, logits, 2, (int64_t[]){B, C});
    expect_shape(b, tide_builder_find(b, "images"), 4, (int64_t[]){B, 1, S, F});
    expect_shape(b, tide_builder_find(b, "sequence"), 2, (int64_t[]){B, S * F});
    expect_shape(b, tide_builder_find(b, "lstm1/t0/gates"), 2, (int64_t[]){B, 4 * H});
    expect_shape(b, tide_builder_find(b, "lstm2/t4/h"), 2, (int64_t[]){B, H});
    expect_shape(b, tide_builder_find(b, "lstm2/t4/c"), 2, (int64_t[]){B, H});
    /* Layer 1: (3 + 6) * 24 + 24; layer 2: (6 + 6) * 24 + 24; fc_out: 6 * 7 + 7. */
    assert_int_equal(tide_builder_parameter_count(b), 240 + 312 + 49);
    /*
     * 2 placeholders, sequence, S input slices; per layer w, b, then step 0 (w_in, matmul,
     * gates, 4 slices, i, g, o, c, tanh, h) and S - 1 steps that add concat, f, and the mul and
     * add of f * c_{t-1}; fc_out 4; xent, loss.
     */
    assert_int_equal(tide_builder_node_count(b), 3 + S + 2 * (2 + 13 + (S - 1) * 16) + 4 + 2);

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(count_ops(g, "MatMul", NULL), 2 * S + 1);
    assert_int_equal(count_ops(g, "Sigmoid", NULL), 2 * (3 * S - 1));
    /* Step 0 has no state: the input rows of w, and no forget gate. */
    const Tide__V1__Node *n = node_named(g, "lstm1/t0/w_in");
    assert_string_equal(n->op, "Slice");
    assert_string_equal(n->inputs[0], "lstm1/w");
    expect_ints(attr_of(n, "size"), 2, (int64_t[]){F, 4 * H});
    assert_int_equal(tide_builder_find(b, "lstm1/t0/f").id, -1);
    assert_string_equal(node_named(g, "lstm1/t0/c")->op, "Mul");
    /* Later steps: [x_t, h_{t-1}]; layer 2's x_t is layer 1's h_t. */
    n = node_named(g, "lstm2/t3/c");
    assert_string_equal(n->op, "Add");
    n = node_named(g, node_named(g, "lstm2/t3/gates")->inputs[0]);
    assert_string_equal(n->op, "MatMul");
    assert_string_equal(n->inputs[1], "lstm2/w");
    n = node_named(g, n->inputs[0]);
    assert_string_equal(n->op, "Concat");
    assert_string_equal(n->inputs[0], "lstm1/t3/h");
    assert_string_equal(n->inputs[1], "lstm2/t2/h");
    /* The head reads the last step of the top layer. */
    assert_string_equal(node_named(g, node_named(g, "logits")->inputs[0])->inputs[0],
                        "lstm2/t4/h");
    /* PyTorch's uniform initialiser; biases 0 but the forget gate's (the second quarter), 1. */
    n = node_named(g, "lstm1/w");
    assert_string_equal(attr_of(n, "init")->s, "uniform");
    assert_float_equal(attr_of(n, "scale")->f, 1 / sqrt(H), 1e-7);
    const Tide__V1__Tensor *t = attr_of(node_named(g, "lstm2/b"), "value")->tensor;
    assert_int_equal(t->data.len, 4 * H * sizeof(float));
    for (int j = 0; j < 4 * H; j++) {
        float v;
        memcpy(&v, t->data.data + j * sizeof(float), sizeof(v));
        assert_true(v == (j >= H && j < 2 * H ? 1.0f : 0.0f));
    }
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    b = tide_builder_new();
    assert_int_equal(tide_model_lstm(b, B, S, F, H, 0, C).id, -1);
    assert_contains(tide_builder_error(b), "tide_model_lstm: layers is 0, wants 1 or more");
    tide_builder_free(b);
}

/* ============================================================================
 * Datasets
 * ========================================================================== */

/* Opens a Fashion-MNIST split, or skips the test when the package is not installed. */
static tide_dataset *open_fashion(const char *split)
{
    char err[512];
    tide_dataset *ds = NULL;
    int rc = tide_dataset_open("fashion-mnist", NULL, split, &ds, err, sizeof(err));
    if (rc == TIDE_DATASET_NOT_FOUND) {
        print_message("skipping: %s\n", err);
        skip();
    }
    if (rc != 0)
        fail_msg("open: %s", err);
    return ds;
}

/* Reads n bytes at offset off of the (gzip) file path. */
static void read_raw(const char *path, long off, uint8_t *out, unsigned n)
{
    gzFile f = gzopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(gzseek(f, off, SEEK_SET), off);
    assert_int_equal(gzread(f, out, n), (int)n);
    gzclose(f);
}

static void test_fashion_mnist_train(void **state)
{
    (void)state;
    tide_dataset *ds = open_fashion("train");
    assert_int_equal(tide_dataset_count(ds), 60000);
    assert_int_equal(tide_dataset_channels(ds), 1);
    assert_int_equal(tide_dataset_height(ds), 28);
    assert_int_equal(tide_dataset_width(ds), 28);
    assert_int_equal(tide_dataset_classes(ds), 10);

    /* The first label and the first image agree with the raw file bytes. */
    uint8_t raw_label, raw_pixels[784];
    read_raw(TIDE_DATASET_FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz", 8, &raw_label, 1);
    read_raw(TIDE_DATASET_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", 16, raw_pixels, 784);
    float image[784];
    int32_t label = -1;
    assert_int_equal(tide_dataset_example(ds, 0, image, &label), 0);
    assert_int_equal(label, raw_label);
    for (int i = 0; i < 784; i++)
        assert_true(image[i] == (float)raw_pixels[i] / 255.0f);
    assert_int_equal(tide_dataset_example(ds, 60000, image, &label), TIDE_DATASET_INVALID);

    /* Every label is a class, every pixel lies in [0, 1], and the classes are balanced. */
    int histogram[10] = {0};
    float lo = 1, hi = 0;
    for (int64_t i = 0; i < 60000; i++) {
        assert_int_equal(tide_dataset_example(ds, i, image, &label), 0);
        assert_in_range(label, 0, 9);
        histogram[label]++;
        for (int j = 0; j < 784; j++) {
            lo = image[j] < lo ? image[j] : lo;
            hi = image[j] > hi ? image[j] : hi;
        }
    }
    assert_true(lo == 0.0f && hi == 1.0f);
    for (int k = 0; k < 10; k++)
        assert_int_equal(histogram[k], 6000);

    /* One seed gives one order; another seed another; each epoch a new one. */
    tide_dataset_iter *a, *b2, *c;
    char err[256];
    assert_int_equal(tide_dataset_iter_new(ds, 64, 7, TIDE_DATASET_SHUFFLE, &a, err, 256), 0);
    assert_int_equal(tide_dataset_iter_new(ds, 64, 7, TIDE_DATASET_SHUFFLE, &b2, err, 256), 0);
    assert_int_equal(tide_dataset_iter_new(ds, 64, 8, TIDE_DATASET_SHUFFLE, &c, err, 256), 0);
    static float ia[64 * 784], ib[64 * 784], ic[64 * 784];
    int32_t la[64], lb[64], lc[64];
    assert_int_equal(tide_dataset_iter_next(a, ia, la), 64);
    assert_int_equal(tide_dataset_iter_next(b2, ib, lb), 64);
    assert_int_equal(tide_dataset_iter_next(c, ic, lc), 64);
    assert_memory_equal(ia, ib, sizeof(ia));
    assert_memory_equal(la, lb, sizeof(la));
    assert_memory_not_equal(ia, ic, sizeof(ia));
    assert_memory_not_equal(la, lc, sizeof(la));

    /* An epoch is 937 full batches; then 0, and epoch 1 starts in another order. */
    int64_t batches = 1, got;
    while ((got = tide_dataset_iter_next(a, ia, la)) > 0) {
        assert_int_equal(got, 64);
        batches++;
    }
    assert_int_equal(batches, 937);
    assert_int_equal(tide_dataset_iter_epoch(a), 1);
    assert_int_equal(tide_dataset_iter_next(a, ia, la), 64);
    assert_memory_not_equal(ia, ib, sizeof(ia));

    tide_dataset_iter_free(a);
    tide_dataset_iter_free(b2);
    tide_dataset_iter_free(c);
    tide_dataset_free(ds);
}

static void test_fashion_mnist_test_split(void **state)
{
    (void)state;
    tide_dataset *ds = open_fashion("test");
    assert_int_equal(tide_dataset_count(ds), 10000);
    uint8_t raw_label;
    read_raw(TIDE_DATASET_FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz", 8, &raw_label, 1);
    int32_t label;
    assert_int_equal(tide_dataset_example(ds, 0, NULL, &label), 0);
    assert_int_equal(label, raw_label);

    /* Unshuffled with the short last batch kept: 156 full batches and one of 16, padded. */
    tide_dataset_iter *it;
    char err[256];
    assert_int_equal(tide_dataset_iter_new(ds, 64, 0, TIDE_DATASET_KEEP_LAST, &it, err, 256), 0);
    static float images[64 * 784];
    int32_t labels[64];
    int histogram[10] = {0};
    int64_t got, batches = 0, seen = 0;
    while ((got = tide_dataset_iter_next(it, images, labels)) > 0) {
        if (batches == 0)
            assert_int_equal(labels[0], raw_label);
        for (int64_t i = 0; i < got; i++)
            histogram[labels[i]]++;
        seen += got;
        batches++;
        if (got < 64) {
            assert_int_equal(got, 16);
            assert_int_equal(labels[16], raw_label); /* padding repeats the first example */
        }
    }
    assert_int_equal(batches, 157);
    assert_int_equal(seen, 10000);
    for (int k = 0; k < 10; k++)
        assert_int_equal(histogram[k], 1000);
    tide_dataset_iter_free(it);

    assert_int_equal(tide_dataset_iter_new(ds, 20000, 0, 0, &it, err, 256), TIDE_DATASET_INVALID);
    assert_contains(err, "batch 20000 is larger than the dataset's 10000 examples");
    tide_dataset_free(ds);
}

/* Writes n bytes to path, gzip-compressed. */
static void write_gz(const char *path, const uint8_t *bytes, unsigned n)
{
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, bytes, n), (int)n);
    gzclose(f);
}

static void test_fashion_mnist_errors(void **state)
{
    (void)state;
    char err[512];
    tide_dataset *ds = (tide_dataset *)1;
    int rc = tide_dataset_open("fashion-mnist", "/nonexistent/tide-data", "train", &ds, err,
                               sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_NOT_FOUND);
    assert_null(ds);
    assert_contains(err, "/nonexistent/tide-data");
    assert_contains(err, "apt install dataset-fashion-mnist");
    assert_int_equal(tide_dataset_open("mnist", NULL, "train", &ds, err, sizeof(err)),
                     TIDE_DATASET_NOT_FOUND);
    assert_contains(err, "unknown dataset \"mnist\"");
    assert_int_equal(tide_dataset_open("fashion-mnist", NULL, "valid", &ds, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_contains(err, "unknown split \"valid\"");

    /* A directory with bad files: each problem is named with its numbers. */
    char dir[] = "/tmp/tide-test-client-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char labels_path[256], images_path[256];
    snprintf(labels_path, sizeof(labels_path), "%s/t10k-labels-idx1-ubyte.gz", dir);
    snprintf(images_path, sizeof(images_path), "%s/t10k-images-idx3-ubyte.gz", dir);

    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_NOT_FOUND);
    assert_contains(err, labels_path);
    assert_contains(err, "No such file");

    const uint8_t swapped[] = {0, 0, 8, 3, 0, 0, 0, 2, 1, 2};
    write_gz(labels_path, swapped, sizeof(swapped));
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_INVALID);
    assert_contains(err, "IDX magic 0x00000803, wants 0x00000801");

    const uint8_t short_labels[] = {0, 0, 8, 1, 0, 0, 0, 3, 1, 2};
    write_gz(labels_path, short_labels, sizeof(short_labels));
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_INVALID);
    assert_contains(err, "truncated: the labels end after 2 of 3 bytes");

    const uint8_t bad_label[] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 12};
    write_gz(labels_path, bad_label, sizeof(bad_label));
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_INVALID);
    assert_contains(err, "label 12 at index 1 is out of range 0..9");

    const uint8_t good_labels[] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 2};
    write_gz(labels_path, good_labels, sizeof(good_labels));
    uint8_t images[16 + 2 * 784] = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28};
    images[16] = 255;
    write_gz(images_path, images, 16 + 784); /* one image short */
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_INVALID);
    assert_contains(err, "truncated: the pixels end after 784 of 1568 bytes");
    images[15] = 27;
    write_gz(images_path, images, sizeof(images));
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_INVALID);
    assert_contains(err, "images of 28x27 pixels, wants 28x28");
    images[15] = 28;
    images[7] = 3; /* three images, two labels: the sizes disagree */
    uint8_t three[16 + 3 * 784] = {0};
    memcpy(three, images, sizeof(images));
    write_gz(images_path, three, sizeof(three));
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, TIDE_DATASET_INVALID);
    assert_contains(err, "holds 3 images but");
    assert_contains(err, "holds 2 labels");

    /* Put right, the tiny dataset opens and reads back. */
    images[7] = 2;
    write_gz(images_path, images, sizeof(images));
    rc = tide_dataset_open("fashion-mnist", dir, "test", &ds, err, sizeof(err));
    assert_int_equal(rc, 0);
    assert_int_equal(tide_dataset_count(ds), 2);
    float image[784];
    int32_t label;
    assert_int_equal(tide_dataset_example(ds, 1, image, &label), 0);
    assert_int_equal(label, 2);
    assert_true(image[0] == 0.0f);
    assert_int_equal(tide_dataset_example(ds, 0, image, &label), 0);
    assert_true(image[0] == 1.0f);
    tide_dataset_free(ds);

    unlink(labels_path);
    unlink(images_path);
    rmdir(dir);
}

static void test_synthetic_dataset(void **state)
{
    (void)state;
    char err[256];
    tide_dataset *a, *b, *c, *test;
    assert_int_equal(tide_dataset_open("synthetic", NULL, "train", &a, err, sizeof(err)), 0);
    assert_int_equal(tide_dataset_open("synthetic", NULL, "train", &b, err, sizeof(err)), 0);
    assert_int_equal(tide_dataset_open("synthetic", NULL, "test", &test, err, sizeof(err)), 0);
    assert_int_equal(tide_dataset_count(a), 60000);
    assert_int_equal(tide_dataset_count(test), 10000);
    assert_int_equal(tide_dataset_classes(a), 10);
    struct tide_synthetic_options o = {.count = 1000, .seed = 99};
    assert_int_equal(tide_dataset_open_synthetic(&o, "train", &c, err, sizeof(err)), 0);

    float xa[784], xb[784], xc[784];
    int32_t ya, yb, yc;
    int differ_seed = 0, differ_split = 0;
    int histogram[10] = {0};
    for (int64_t i = 0; i < 1000; i++) {
        assert_int_equal(tide_dataset_example(a, i, xa, &ya), 0);
        assert_int_equal(tide_dataset_example(b, i, xb, &yb), 0);
        assert_memory_equal(xa, xb, sizeof(xa));
        assert_int_equal(ya, yb);
        assert_in_range(ya, 0, 9);
        histogram[ya]++;
        for (int j = 0; j < 784; j++)
            assert_true(xa[j] >= 0.0f && xa[j] < 1.0f);
        assert_int_equal(tide_dataset_example(c, i, xc, &yc), 0);
        differ_seed += memcmp(xa, xc, sizeof(xa)) != 0;
        assert_int_equal(tide_dataset_example(test, i, xc, &yc), 0);
        differ_split += memcmp(xa, xc, sizeof(xa)) != 0;
    }
    assert_int_equal(differ_seed, 1000);
    assert_int_equal(differ_split, 1000);
    for (int k = 0; k < 10; k++)
        assert_true(histogram[k] > 30); /* every class occurs: the rule is not degenerate */

    /* The label is a linear rule of the pixels: the same pixels, the same label (no index). */
    int32_t y1, y2;
    assert_int_equal(tide_dataset_example(a, 12345, NULL, &y1), 0);
    assert_int_equal(tide_dataset_example(a, 12345, xa, &y2), 0);
    assert_int_equal(y1, y2);

    /* Shuffled batches are deterministic too; a tiny dataset pads with KEEP_LAST. */
    tide_dataset_iter *i1, *i2;
    assert_int_equal(tide_dataset_iter_new(c, 10, 3, TIDE_DATASET_SHUFFLE, &i1, err, 256), 0);
    assert_int_equal(tide_dataset_iter_new(c, 10, 3, TIDE_DATASET_SHUFFLE, &i2, err, 256), 0);
    static float ba[10 * 784], bb[10 * 784];
    int32_t la[10], lb[10];
    for (int k = 0; k < 5; k++) {
        assert_int_equal(tide_dataset_iter_next(i1, ba, la), 10);
        assert_int_equal(tide_dataset_iter_next(i2, bb, lb), 10);
        assert_memory_equal(ba, bb, sizeof(ba));
        assert_memory_equal(la, lb, sizeof(la));
    }
    tide_dataset_iter_free(i1);
    tide_dataset_iter_free(i2);

    struct tide_synthetic_options tiny = {
        .count = 3, .channels = 3, .height = 4, .width = 5, .classes = 4, .seed = 1};
    tide_dataset *t;
    assert_int_equal(tide_dataset_open_synthetic(&tiny, "test", &t, err, sizeof(err)), 0);
    assert_int_equal(tide_dataset_iter_new(t, 8, 0, 0, &i1, err, 256), TIDE_DATASET_INVALID);
    assert_int_equal(tide_dataset_iter_new(t, 8, 0, TIDE_DATASET_KEEP_LAST, &i1, err, 256), 0);
    float tb[8 * 60];
    int32_t tl[8];
    assert_int_equal(tide_dataset_iter_next(i1, tb, tl), 3);
    for (int k = 3; k < 8; k++) {
        assert_int_equal(tl[k], tl[k % 3]);
        assert_memory_equal(tb + k * 60, tb + (k % 3) * 60, 60 * sizeof(float));
    }
    assert_int_equal(tide_dataset_iter_next(i1, tb, tl), 0);
    assert_int_equal(tide_dataset_iter_next(i1, tb, tl), 3);
    tide_dataset_iter_free(i1);
    tide_dataset_free(t);

    struct tide_synthetic_options bad = {.classes = -1};
    assert_int_equal(tide_dataset_open_synthetic(&bad, "train", &t, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_contains(err, "classes -1");
    tide_dataset_free(a);
    tide_dataset_free(b);
    tide_dataset_free(c);
    tide_dataset_free(test);
}

/*
 * The synthetic rule is learnable: a linear classifier fitted to the train
 * split by a few epochs of plain softmax regression in this test beats chance
 * (10%) by far on the test split.
 */
static void test_synthetic_dataset_is_learnable(void **state)
{
    (void)state;
    char err[256];
    struct tide_synthetic_options o = {.count = 4000, .seed = 5};
    tide_dataset *train, *test;
    assert_int_equal(tide_dataset_open_synthetic(&o, "train", &train, err, sizeof(err)), 0);
    o.count = 1000;
    assert_int_equal(tide_dataset_open_synthetic(&o, "test", &test, err, sizeof(err)), 0);
    static float w[10][785];
    memset(w, 0, sizeof(w));
    float x[784];
    int32_t y;
    for (int epoch = 0; epoch < 5; epoch++) {
        for (int64_t i = 0; i < 4000; i++) {
            tide_dataset_example(train, i, x, &y);
            float logits[10], max = -1e30f, sum = 0;
            for (int k = 0; k < 10; k++) {
                logits[k] = w[k][784];
                for (int j = 0; j < 784; j++)
                    logits[k] += w[k][j] * (x[j] - 0.5f);
                max = logits[k] > max ? logits[k] : max;
            }
            for (int k = 0; k < 10; k++)
                sum += logits[k] = expf(logits[k] - max);
            for (int k = 0; k < 10; k++) {
                float g = logits[k] / sum - (k == y ? 1.0f : 0.0f);
                for (int j = 0; j < 784; j++)
                    w[k][j] -= 0.05f * g * (x[j] - 0.5f);
                w[k][784] -= 0.05f * g;
            }
        }
    }
    int correct = 0;
    for (int64_t i = 0; i < 1000; i++) {
        tide_dataset_example(test, i, x, &y);
        int best = 0;
        float best_score = -1e30f;
        for (int k = 0; k < 10; k++) {
            float s = w[k][784];
            for (int j = 0; j < 784; j++)
                s += w[k][j] * (x[j] - 0.5f);
            if (s > best_score) {
                best_score = s;
                best = k;
            }
        }
        correct += best == y;
    }
    print_message("synthetic: linear classifier test accuracy %.3f\n", correct / 1000.0);
    assert_true(correct > 500);
    tide_dataset_free(train);
    tide_dataset_free(test);
}

/* ============================================================================
 * Text corpora (the language models' fortunes)
 * ========================================================================== */

/* Opens a fortunes split, or skips the test when the package is not installed. */
static tide_corpus *open_fortunes(const char *split)
{
    char err[512];
    tide_corpus *c = NULL;
    int rc = tide_corpus_open("fortunes", NULL, split, &c, err, sizeof(err));
    if (rc == TIDE_DATASET_NOT_FOUND) {
        print_message("skipping: %s\n", err);
        skip();
    }
    if (rc != 0)
        fail_msg("open: %s", err);
    return c;
}

/* Reads n bytes at offset off (negative: from the end) of the file path. */
static void read_plain(const char *path, long off, uint8_t *out, size_t n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, off, off < 0 ? SEEK_END : SEEK_SET), 0);
    assert_int_equal(fread(out, 1, n, f), n);
    fclose(f);
}

static void test_fortunes_corpus(void **state)
{
    (void)state;
    tide_corpus *train = open_fortunes("train"), *test = open_fortunes("test");
    int64_t total = tide_corpus_total_size(train);
    print_message("fortunes: %d files, %" PRId64 " bytes: %" PRId64 " train, %" PRId64
                  " held out\n",
                  tide_corpus_files(train), total, tide_corpus_size(train),
                  tide_corpus_size(test));
    /* Debian's fortunes 1:1.99.1-7.3 has 43 files of 2,576,674 bytes; other versions differ a little. */
    assert_in_range(total, 2000000, 3500000);
    assert_in_range(tide_corpus_files(train), 30, 60);
    assert_int_equal(tide_corpus_total_size(test), total);
    assert_int_equal(tide_corpus_size(train), total * 9 / 10);
    assert_int_equal(tide_corpus_size(test), total - total * 9 / 10);

    /* Name order: train starts with "art", the held-out split ends with "zippy". */
    uint8_t raw[64];
    read_plain(TIDE_CORPUS_FORTUNES_DIR "/art", 0, raw, sizeof(raw));
    assert_memory_equal(tide_corpus_bytes(train), raw, sizeof(raw));
    read_plain(TIDE_CORPUS_FORTUNES_DIR "/zippy", -(long)sizeof(raw), raw, sizeof(raw));
    assert_memory_equal(tide_corpus_bytes(test) + tide_corpus_size(test) - sizeof(raw), raw,
                        sizeof(raw));

    /* Random windows: the label is the next byte; one seed, one sequence; another, another. */
    enum { B = 4, S = 128 };
    int32_t ta[B * S], la[B * S], tb[B * S], lb[B * S], tc[B * S], lc[B * S];
    tide_corpus_iter *a, *b, *c;
    char err[256];
    assert_int_equal(tide_corpus_iter_new(train, B, S, 7, TIDE_CORPUS_RANDOM, &a, err, 256), 0);
    assert_int_equal(tide_corpus_iter_new(train, B, S, 7, TIDE_CORPUS_RANDOM, &b, err, 256), 0);
    assert_int_equal(tide_corpus_iter_new(train, B, S, 8, TIDE_CORPUS_RANDOM, &c, err, 256), 0);
    for (int step = 0; step < 3; step++) {
        assert_int_equal(tide_corpus_iter_next(a, ta, la), B);
        assert_int_equal(tide_corpus_iter_next(b, tb, lb), B);
        assert_int_equal(tide_corpus_iter_next(c, tc, lc), B);
        assert_memory_equal(ta, tb, sizeof(ta));
        assert_memory_equal(la, lb, sizeof(la));
        assert_memory_not_equal(ta, tc, sizeof(ta));
        for (int r = 0; r < B; r++) {
            for (int i = 0; i + 1 < S; i++)
                assert_int_equal(la[r * S + i], ta[r * S + i + 1]);
            for (int i = 0; i < S; i++)
                assert_in_range(ta[r * S + i], 0, TIDE_CORPUS_VOCAB - 1);
        }
    }
    /* Over many draws, windows start all over the split, near both ends too. */
    const uint8_t *bytes = tide_corpus_bytes(train);
    int64_t size = tide_corpus_size(train), lowest = size, highest = 0;
    for (int step = 0; step < 500; step++) {
        tide_corpus_iter_next(a, ta, la);
        for (int r = 0; r < B; r++) {
            /* Find the window by its bytes: a 128-byte string of the corpus is all but unique. */
            uint8_t window[S + 1];
            for (int i = 0; i < S; i++)
                window[i] = (uint8_t)ta[r * S + i];
            window[S] = (uint8_t)la[r * S + S - 1];
            const uint8_t *at = memmem(bytes, (size_t)size, window, S + 1);
            assert_non_null(at);
            int64_t start = at - bytes;
            lowest = start < lowest ? start : lowest;
            highest = start > highest ? start : highest;
        }
    }
    assert_true(lowest < size / 100 && highest > size - size / 100);
    tide_corpus_iter_free(a);
    tide_corpus_iter_free(b);
    tide_corpus_iter_free(c);

    /* Consecutive windows of the held-out split: every one once, the last batch padded. */
    int64_t windows = tide_corpus_windows(test, S);
    assert_int_equal(windows, (tide_corpus_size(test) - 1) / S);
    assert_int_equal(tide_corpus_iter_new(test, B, S, 0, 0, &a, err, 256), 0);
    const uint8_t *held = tide_corpus_bytes(test);
    int64_t seen = 0, got;
    while ((got = tide_corpus_iter_next(a, ta, la)) > 0) {
        for (int64_t r = 0; r < B; r++) {
            int64_t window = r < got ? seen + r : r - got;
            for (int i = 0; i < S; i++) {
                assert_int_equal(ta[r * S + i], held[window * S + i]);
                assert_int_equal(la[r * S + i], held[window * S + i + 1]);
            }
        }
        seen += got;
    }
    assert_int_equal(seen, windows);
    assert_int_equal(tide_corpus_iter_next(a, ta, la), B); /* the next epoch starts over */
    for (int i = 0; i < S; i++)
        assert_int_equal(ta[i], held[i]);
    tide_corpus_iter_free(a);
    tide_corpus_free(train);
    tide_corpus_free(test);
}

/* Writes len bytes of text to dir/name. */
static void write_text(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

static void test_corpus_files_and_errors(void **state)
{
    (void)state;
    char err[512];
    tide_corpus *c = (tide_corpus *)1;
    assert_int_equal(tide_corpus_open("fortunes", "/nonexistent/tide-corpus", "train", &c, err,
                                      sizeof(err)),
                     TIDE_DATASET_NOT_FOUND);
    assert_null(c);
    assert_contains(err, "/nonexistent/tide-corpus does not exist");
    assert_contains(err, "apt install fortunes");
    assert_int_equal(tide_corpus_open("shakespeare", NULL, "train", &c, err, sizeof(err)),
                     TIDE_DATASET_NOT_FOUND);
    assert_contains(err, "unknown corpus \"shakespeare\"");
    assert_int_equal(tide_corpus_open("fortunes", NULL, "valid", &c, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_contains(err, "unknown split \"valid\"");

    /* Only names without a '.' count, in strcmp order; directories are skipped. */
    char dir[] = "/tmp/tide-test-client-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(tide_corpus_open("fortunes", dir, "train", &c, err, sizeof(err)),
                     TIDE_DATASET_NOT_FOUND);
    assert_contains(err, "holds 0 files without an extension, 0 bytes");
    write_text(dir, "b", "0123");
    assert_int_equal(tide_corpus_open("fortunes", dir, "train", &c, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_contains(err, "holds 1 files without an extension, 4 bytes in all; a corpus wants "
                         "at least 11");
    write_text(dir, "B", "ABCDEFGHIJ"); /* 'B' sorts before 'b' in every locale's strcmp */
    write_text(dir, "b.dat", "not text");
    write_text(dir, "a.u8", "not text either");
    write_text(dir, ".hidden", "nor this");
    write_text(dir, "z", "xyz!");
    char sub[600];
    snprintf(sub, sizeof(sub), "%s/d", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    tide_corpus *train, *test;
    assert_int_equal(tide_corpus_open("fortunes", dir, "train", &train, err, sizeof(err)), 0);
    assert_int_equal(tide_corpus_open("fortunes", dir, "test", &test, err, sizeof(err)), 0);
    /* "ABCDEFGHIJ0123xyz!": 18 bytes, 16 for training, 2 held out. */
    assert_int_equal(tide_corpus_files(train), 3);
    assert_int_equal(tide_corpus_total_size(train), 18);
    assert_int_equal(tide_corpus_size(train), 16);
    assert_memory_equal(tide_corpus_bytes(train), "ABCDEFGHIJ0123xy", 16);
    assert_int_equal(tide_corpus_size(test), 2);
    assert_memory_equal(tide_corpus_bytes(test), "z!", 2);
    assert_int_equal(tide_corpus_windows(train, 5), 3);
    assert_int_equal(tide_corpus_windows(test, 1), 1);

    /* Windows longer than the split, and other bad arguments, name the numbers. */
    tide_corpus_iter *it = (tide_corpus_iter *)1;
    assert_int_equal(tide_corpus_iter_new(test, 1, 2, 0, 0, &it, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_null(it);
    assert_contains(err, "seq_len is 2, wants 1 to 1 (a window of the split's 2 bytes");
    assert_int_equal(tide_corpus_iter_new(train, 0, 4, 0, 0, &it, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_contains(err, "batch is 0, wants 1 to 2^31");
    assert_int_equal(tide_corpus_iter_new(train, 1, 4, 0, 4u, &it, err, sizeof(err)),
                     TIDE_DATASET_INVALID);
    assert_contains(err, "unknown flags 0x4");

    /* Three windows of 5 in batches of 2: 2, then 1 padded with window 0, then 0. */
    assert_int_equal(tide_corpus_iter_new(train, 2, 5, 0, 0, &it, err, sizeof(err)), 0);
    int32_t tokens[10], labels[10];
    assert_int_equal(tide_corpus_iter_next(it, tokens, labels), 2);
    assert_int_equal(tokens[5], 'F');
    assert_int_equal(labels[9], '0');
    assert_int_equal(tide_corpus_iter_next(it, tokens, labels), 1);
    assert_int_equal(tokens[0], '0');
    assert_int_equal(labels[4], 'y');
    assert_int_equal(tokens[5], 'A');
    assert_int_equal(tide_corpus_iter_next(it, tokens, labels), 0);
    assert_int_equal(tide_corpus_iter_next(NULL, tokens, labels), -1);
    tide_corpus_iter_free(it);

    /* Random windows of 14 in 16 bytes start at 0 or 1, both drawn. */
    assert_int_equal(tide_corpus_iter_new(train, 8, 14, 3, TIDE_CORPUS_RANDOM, &it, err,
                                          sizeof(err)), 0);
    int32_t t8[8 * 14], l8[8 * 14];
    int starts[2] = {0, 0};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(tide_corpus_iter_next(it, t8, l8), 8);
        for (int r = 0; r < 8; r++) {
            assert_true(t8[r * 14] == 'A' || t8[r * 14] == 'B');
            starts[t8[r * 14] - 'A']++;
        }
    }
    assert_true(starts[0] > 0 && starts[1] > 0);
    tide_corpus_iter_free(it);
    tide_corpus_free(train);
    tide_corpus_free(test);

    rmdir(sub);
    const char *names[] = {"b", "B", "b.dat", "a.u8", ".hidden", "z"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[600];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

/* ============================================================================
 * Language models (transformer, moe)
 * ========================================================================== */

/* The Transformer's parameters by the formula of tide/models.h. */
static int64_t transformer_parameters(int64_t v, int64_t s, int64_t d, int64_t layers)
{
    return v * d + s * d + layers * (12 * d * d + 13 * d) + 2 * d + d * v + v;
}

static void test_model_transformer(void **state)
{
    (void)state;
    struct tide_model_lm_options o = tide_model_lm_options_default();
    assert_int_equal(o.batch, 32);
    assert_int_equal(o.seq_len, 128);
    assert_int_equal(o.vocab, 256);
    assert_int_equal(o.d_model, 128);
    assert_int_equal(o.layers, 4);
    assert_int_equal(o.heads, 4);
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_transformer(b, &o);
    assert_null(tide_builder_error(b));
    expect_shape(b, logits, 2, (int64_t[]){32 * 128, 256});
    expect_shape(b, tide_builder_find(b, TIDE_MODEL_TOKENS), 2, (int64_t[]){32, 128});
    expect_shape(b, tide_builder_find(b, TIDE_MODEL_LABELS), 2, (int64_t[]){32, 128});
    assert_int_equal(tide_builder_dtype(b, tide_builder_find(b, TIDE_MODEL_TOKENS)),
                     TIDE_DT_INT32);
    expect_shape(b, tide_builder_find(b, TIDE_MODEL_TOKEN_LOSS), 1, (int64_t[]){32 * 128});
    expect_shape(b, tide_builder_find(b, TIDE_MODEL_LOSS), 0, NULL);
    assert_int_equal(tide_builder_parameter_count(b), 875520);
    assert_int_equal(tide_builder_parameter_count(b), transformer_parameters(256, 128, 128, 4));
    expect_shape(b, tide_builder_find(b, "block3/mlp/fc1/w"), 2, (int64_t[]){128, 512});
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(count_ops(g, "Attention", NULL), 4);
    assert_int_equal(count_ops(g, "LayerNorm", NULL), 2 * 4 + 1);
    assert_int_equal(count_ops(g, "Gelu", NULL), 4);
    assert_int_equal(count_ops(g, "Gather", NULL), 1);
    assert_int_equal(count_ops(g, "Dropout", NULL), 0); /* the default rate is 0: no node */
    assert_int_equal(count_ops(g, "Transpose", NULL), 4 * 4);
    /* PyTorch's initialisation: embeddings N(0, 1), weights U(+-1 / sqrt(fan_in)). */
    assert_string_equal(attr_of(node_named(g, "embed/w"), "init")->s, "normal");
    assert_true(attr_of(node_named(g, "embed/w"), "scale")->f == 1.0f);
    assert_string_equal(attr_of(node_named(g, "block2/attn/q/w"), "init")->s, "uniform");
    assert_true(attr_of(node_named(g, "block2/attn/q/w"), "scale")->f == 1.0f / sqrtf(128));
    assert_true(attr_of(node_named(g, "block2/mlp/fc2/w"), "scale")->f == 1.0f / sqrtf(512));
    /* Attention: causal, scale 0 (1 / sqrt of the head's 32 features). */
    const Tide__V1__Node *attention = NULL;
    for (size_t i = 0; i < g->n_nodes && !attention; i++)
        if (strcmp(g->nodes[i]->op, "Attention") == 0)
            attention = g->nodes[i];
    assert_non_null(attention);
    assert_true(attr_of(attention, "causal")->b);
    assert_true(attr_of(attention, "scale")->f == 0.0f);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Other sizes, with Dropout: the same formula; three Dropouts per block plus one. */
    o = (struct tide_model_lm_options){.batch = 3, .seq_len = 16, .vocab = 300, .d_model = 24,
                                 .layers = 2, .heads = 3, .dropout = 0.1f};
    b = tide_builder_new();
    logits = tide_model_transformer(b, &o);
    assert_null(tide_builder_error(b));
    expect_shape(b, logits, 2, (int64_t[]){48, 300});
    assert_int_equal(tide_builder_parameter_count(b), transformer_parameters(300, 16, 24, 2));
    g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(count_ops(g, "Dropout", NULL), 1 + 2 * 2);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Bad sizes name the field and the numbers. */
    struct {
        struct tide_model_lm_options o;
        const char *message;
    } bad[] = {
        {{.batch = 1, .seq_len = 8, .vocab = 256, .d_model = 10, .layers = 1, .heads = 4},
         "transformer: d_model 10 is not a multiple of heads 4"},
        {{.batch = 1, .seq_len = 0, .vocab = 256, .d_model = 8, .layers = 1, .heads = 2},
         "transformer: seq_len is 0, wants 1 or more"},
        {{.batch = 1, .seq_len = 8, .vocab = 256, .d_model = 8, .layers = 1, .heads = 2,
          .dropout = 1.0f},
         "transformer: dropout is 1, wants 0 <= rate < 1"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b = tide_builder_new();
        assert_int_equal(tide_model_transformer(b, &bad[i].o).id, -1);
        assert_contains(tide_builder_error(b), bad[i].message);
        tide_builder_free(b);
    }
}

static void test_model_moe(void **state)
{
    (void)state;
    /* The capacity: ceil(factor * tokens * 2 / experts). */
    assert_int_equal(tide_model_moe_capacity(4096, 8, 1.25), 1280);
    assert_int_equal(tide_model_moe_capacity(10, 3, 1.0), 7);
    assert_int_equal(tide_model_moe_capacity(10, 3, 0.01), 1);
    assert_int_equal(tide_model_moe_capacity(10, 3, 0), -1);
    assert_int_equal(tide_model_moe_capacity(0, 3, 1), -1);
    assert_int_equal(tide_model_moe_capacity(10, 3, NAN), -1);

    struct tide_model_lm_options o = tide_model_lm_options_default();
    assert_int_equal(o.experts, 8);
    assert_true(o.capacity_factor == 1.25);
    assert_true(o.aux_loss_weight == 0.01f);
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_moe(b, &o);
    assert_null(tide_builder_error(b));
    expect_shape(b, logits, 2, (int64_t[]){4096, 256});
    int64_t d = 128, e = 8;
    int64_t per_layer = 4 * d * d + 8 * d + d * e + e * (8 * d * d + 5 * d);
    assert_int_equal(tide_builder_parameter_count(b),
                     transformer_parameters(256, 128, 128, 4) - 4 * (12 * d * d + 13 * d) +
                         4 * per_layer);
    /* The experts see their 1280 slots each, never all 4096 tokens, with weights of their own. */
    for (int x = 0; x < 8; x++) {
        char name[64];
        snprintf(name, sizeof(name), "block0/moe/expert%d/dispatch", x);
        expect_shape(b, tide_builder_find(b, name), 2, (int64_t[]){1280, 128});
        snprintf(name, sizeof(name), "block3/moe/expert%d/fc1/w", x);
        expect_shape(b, tide_builder_find(b, name), 2, (int64_t[]){128, 512});
        snprintf(name, sizeof(name), "block3/moe/expert%d/fc2/w", x);
        expect_shape(b, tide_builder_find(b, name), 2, (int64_t[]){512, 128});
    }
    expect_shape(b, tide_builder_find(b, "block0/moe/experts"), 2, (int64_t[]){8 * 1280, 128});
    Tide__V1__Graph *weights = roundtrip(b);
    assert_true(attr_of(node_named(weights, "block0/moe/expert7/fc2/w"), "scale")->f ==
                1.0f / sqrtf(512));
    tide__v1__graph__free_unpacked(weights, NULL);
    expect_shape(b, tide_builder_find(b, "block0/moe/combine"), 3, (int64_t[]){4096, 2, 128});
    expect_shape(b, tide_builder_find(b, "block0/moe/share"), 1, (int64_t[]){8});
    expect_shape(b, tide_builder_find(b, TIDE_MODEL_LM_LOSS), 0, NULL);
    expect_shape(b, tide_builder_find(b, TIDE_MODEL_AUX_LOSS), 0, NULL);
    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    assert_int_equal(count_ops(g, "MoeRoute", NULL), 4);
    assert_int_equal(count_ops(g, "TopK", NULL), 4);
    assert_int_equal(count_ops(g, "BatchMatMul", NULL), 0);
    /*
     * The MatMuls: q, k, v, out and the gate per block, two per expert over
     * its own slots, and the head: no expert runs on every token.
     */
    assert_int_equal(count_ops(g, "MatMul", NULL), (5 + 2 * 8) * 4 + 1);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    b = tide_builder_new();
    o.capacity_factor = -1;
    assert_int_equal(tide_model_moe(b, &o).id, -1);
    assert_contains(tide_builder_error(b), "moe: capacity_factor is -1, wants a finite number > 0");
    tide_builder_free(b);
    b = tide_builder_new();
    o = tide_model_lm_options_default();
    o.experts = 0;
    assert_int_equal(tide_model_moe(b, &o).id, -1);
    assert_contains(tide_builder_error(b), "moe: experts is 0, wants 1 or more");
    tide_builder_free(b);
    b = tide_builder_new();
    o.experts = 1;
    assert_int_equal(tide_model_moe(b, &o).id, -1);
    assert_contains(tide_builder_error(b), "moe: experts is 1, wants 2 or more (each token is "
                                           "routed to its 2 best)");
    tide_builder_free(b);
}

/* The issue's two examples: the builder reports the daemon's infer words. */
static void test_builder_reports_the_daemons_words(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref a = tide_builder_placeholder(b, "a", TIDE_DT_FLOAT32, 2, (int64_t[]){4, 3});
    tide_ref m = tide_builder_placeholder(b, "m", TIDE_DT_FLOAT32, 2, (int64_t[]){2, 2});
    assert_int_equal(tide_builder_matmul(b, "mm", a, m, false, false).id, -1);
    assert_contains(tide_builder_error(b), "node \"mm\" (MatMul): inner dimensions 3 and 2 differ "
                                           "(a is [4, 3], b is [2, 2])");
    tide_builder_free(b);

    b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 4, (int64_t[]){1, 1, 2, 2});
    tide_ref w = tide_builder_variable(b, "w", 4, (int64_t[]){1, 1, 5, 5}, "zeros", 1, true);
    assert_int_equal(tide_builder_conv2d(b, "cv", x, w, 1, 1, 0, 0).id, -1);
    assert_contains(tide_builder_error(b), "node \"cv\" (Conv2D): kernel height 5 is larger than "
                                           "the padded input height 2 + 2 * 0 = 2");
    /* Nothing can be sent after it. */
    uint8_t *bytes = NULL;
    size_t len = 0;
    assert_int_equal(tide_builder_serialize(b, &bytes, &len), -1);
    tide_builder_free(b);
}

/* One attribute of a hand-written wire node: 'i' int, 'b' bool, 'f' float, 'l' int list. */
struct wire_attr {
    const char *key;
    char type;
    int32_t n;
    int64_t v[4];
    float f;
};

/* A bad node, written by hand as the daemon would receive it. */
struct bad_node {
    const char *name;
    const char *op;
    const char *inputs[3];
    struct wire_attr attrs[3];
};

/* The placeholders every bad node reads: name, dtype, shape. */
static tide_builder *bad_node_sources(void)
{
    static const struct {
        const char *name;
        enum tide_data_type dtype;
        int32_t rank;
        int64_t dims[4];
    } src[] = {
        {"a", TIDE_DT_FLOAT32, 2, {4, 3}},
        {"m", TIDE_DT_FLOAT32, 2, {2, 2}},
        {"x4", TIDE_DT_FLOAT32, 4, {1, 1, 2, 2}},
        {"w5", TIDE_DT_FLOAT32, 4, {1, 1, 5, 5}},
        {"x", TIDE_DT_FLOAT32, 2, {2, 3}},
        {"y", TIDE_DT_FLOAT32, 1, {4}},
        {"l", TIDE_DT_INT32, 1, {2}},
        {"fl", TIDE_DT_FLOAT32, 1, {2}},
        {"x44", TIDE_DT_FLOAT32, 4, {1, 1, 4, 4}},
        {"g", TIDE_DT_FLOAT32, 1, {3}},
        {"g4", TIDE_DT_FLOAT32, 1, {4}},
    };
    tide_builder *b = tide_builder_new();
    for (size_t i = 0; i < sizeof(src) / sizeof(src[0]); i++)
        tide_builder_placeholder(b, src[i].name, src[i].dtype, src[i].rank, src[i].dims);
    assert_null(tide_builder_error(b));
    return b;
}

static const struct bad_node bad_nodes[] = {
    {"mm",
     "MatMul",
     {"a", "m"},
     {{"transpose_a", 'b', 0, {0}, 0}, {"transpose_b", 'b', 0, {0}, 0}}},
    {"cv", "Conv2D", {"x4", "w5"}, {{"strides", 'l', 2, {1, 1}, 0}, {"pads", 'l', 2, {0, 0}, 0}}},
    {"sum", "Add", {"x", "y"}, {{NULL, 0, 0, {0}, 0}}},
    {"r", "Relu", {"l"}, {{NULL, 0, 0, {0}, 0}}},
    {"rs", "Reshape", {"x"}, {{"shape", 'l', 2, {4, -1}, 0}}},
    {"sm", "Softmax", {"x"}, {{"axis", 'i', 0, {2}, 0}}},
    {"mp",
     "MaxPool2D",
     {"x44"},
     {{"ksize", 'l', 2, {2, 2}, 0}, {"strides", 'l', 2, {1, 1}, 0}, {"pads", 'l', 2, {2, 0}, 0}}},
    {"bn", "BatchNorm", {"x", "g", "g4"}, {{"epsilon", 'f', 0, {0}, 1e-5f}}},
    {"bn0", "BatchNorm", {"x", "g", "g"}, {{"epsilon", 'f', 0, {0}, 0}}},
    {"xent", "SoftmaxCrossEntropy", {"x", "fl"}, {{NULL, 0, 0, {0}, 0}}},
    {"sl", "Slice", {"x"}, {{"begin", 'l', 2, {1, 0}, 0}, {"size", 'l', 2, {2, 3}, 0}}},
    {"cat", "Concat", {"x", "a"}, {{"axis", 'i', 0, {1}, 0}}},
    {"bias", "BiasAdd", {"x", "y"}, {{NULL, 0, 0, {0}, 0}}},
};

/* Adds bad_nodes[i] to b with the builder's API. */
static tide_ref add_bad_node(tide_builder *b, size_t i)
{
    const struct bad_node *n = &bad_nodes[i];
    tide_ref in[3];
    for (int k = 0; k < 3; k++)
        in[k] = n->inputs[k] ? tide_builder_find(b, n->inputs[k]) : TIDE_REF_NONE;
    const int64_t *l0 = n->attrs[0].v, *l1 = n->attrs[1].v, *l2 = n->attrs[2].v;
    if (strcmp(n->op, "MatMul") == 0)
        return tide_builder_matmul(b, n->name, in[0], in[1], false, false);
    if (strcmp(n->op, "Conv2D") == 0)
        return tide_builder_conv2d(b, n->name, in[0], in[1], l0[0], l0[1], l1[0], l1[1]);
    if (strcmp(n->op, "Add") == 0)
        return tide_builder_add(b, n->name, in[0], in[1]);
    if (strcmp(n->op, "Relu") == 0)
        return tide_builder_relu(b, n->name, in[0]);
    if (strcmp(n->op, "Reshape") == 0)
        return tide_builder_reshape(b, n->name, in[0], n->attrs[0].n, l0);
    if (strcmp(n->op, "Softmax") == 0)
        return tide_builder_softmax(b, n->name, in[0], l0[0]);
    if (strcmp(n->op, "MaxPool2D") == 0)
        return tide_builder_max_pool2d(b, n->name, in[0], l0[0], l0[1], l1[0], l1[1], l2[0], l2[1]);
    if (strcmp(n->op, "BatchNorm") == 0)
        return tide_builder_batch_norm(b, n->name, in[0], in[1], in[2], n->attrs[0].f);
    if (strcmp(n->op, "SoftmaxCrossEntropy") == 0)
        return tide_builder_softmax_cross_entropy(b, n->name, in[0], in[1]);
    if (strcmp(n->op, "Slice") == 0)
        return tide_builder_slice(b, n->name, in[0], l0, l1, n->attrs[0].n);
    if (strcmp(n->op, "Concat") == 0)
        return tide_builder_concat(b, n->name, in, 2, l0[0]);
    if (strcmp(n->op, "BiasAdd") == 0)
        return tide_builder_bias_add(b, n->name, in[0], in[1]);
    fail_msg("no builder call for %s", n->op);
    return TIDE_REF_NONE;
}

/*
 * The daemon's import error for graph g plus bad_nodes[i] written by hand,
 * copied into out.
 */
static void import_error_with(const Tide__V1__Graph *g, size_t i, char *out, size_t size)
{
    const struct bad_node *n = &bad_nodes[i];
    Tide__V1__Node node = TIDE__V1__NODE__INIT;
    Tide__V1__Node__AttrsEntry entries[3], *entry_ptrs[3];
    Tide__V1__AttrValue values[3];
    Tide__V1__AttrValue__IntList lists[3];
    node.name = (char *)n->name;
    node.op = (char *)n->op;
    node.inputs = (char **)n->inputs;
    while (node.n_inputs < 3 && n->inputs[node.n_inputs])
        node.n_inputs++;
    for (size_t k = 0; k < 3 && n->attrs[k].key; k++) {
        const struct wire_attr *a = &n->attrs[k];
        tide__v1__node__attrs_entry__init(&entries[k]);
        tide__v1__attr_value__init(&values[k]);
        entries[k].key = (char *)a->key;
        entries[k].value = &values[k];
        switch (a->type) {
        case 'i':
            values[k].value_case = TIDE__V1__ATTR_VALUE__VALUE_I;
            values[k].i = a->v[0];
            break;
        case 'b':
            values[k].value_case = TIDE__V1__ATTR_VALUE__VALUE_B;
            values[k].b = a->v[0] != 0;
            break;
        case 'f':
            values[k].value_case = TIDE__V1__ATTR_VALUE__VALUE_F;
            values[k].f = a->f;
            break;
        default:
            tide__v1__attr_value__int_list__init(&lists[k]);
            lists[k].n_values = (size_t)a->n;
            lists[k].values = (int64_t *)a->v;
            values[k].value_case = TIDE__V1__ATTR_VALUE__VALUE_INTS;
            values[k].ints = &lists[k];
        }
        entry_ptrs[k] = &entries[k];
        node.n_attrs = k + 1;
    }
    node.attrs = entry_ptrs;

    Tide__V1__Node **nodes = calloc(g->n_nodes + 1, sizeof(*nodes));
    assert_non_null(nodes);
    memcpy(nodes, g->nodes, g->n_nodes * sizeof(*nodes));
    nodes[g->n_nodes] = &node;
    Tide__V1__Graph with = *g;
    with.n_nodes = g->n_nodes + 1;
    with.nodes = nodes;
    struct tide_graph *imported = NULL;
    struct tide_error err = {0};
    enum tide_status st = tide_graph_import_message(&with, NULL, &imported, &err);
    free(nodes);
    if (st == TIDE_OK)
        fail_msg("import accepted bad node %s", n->name);
    snprintf(out, size, "%s", err.message);
}

/* For each bad node, the builder's error equals the daemon's import error of the same graph. */
static void test_builder_errors_equal_import_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_nodes) / sizeof(bad_nodes[0]); i++) {
        tide_builder *b = bad_node_sources();
        Tide__V1__Graph *g = roundtrip(b);
        char daemon[512];
        import_error_with(g, i, daemon, sizeof(daemon));
        tide__v1__graph__free_unpacked(g, NULL);

        assert_int_equal(add_bad_node(b, i).id, -1);
        const char *builder = tide_builder_error(b);
        if (!builder || strcmp(builder, daemon) != 0)
            fail_msg("%s:\n  builder: %s\n  import:  %s", bad_nodes[i].name,
                     builder ? builder : "(none)", daemon);
        /* The error is the node's own, not a by-product of the test's setup. */
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "node \"%s\" (%s): ", bad_nodes[i].name, bad_nodes[i].op);
        assert_int_equal(strncmp(builder, prefix, strlen(prefix)), 0);
        tide_builder_free(b);
    }
}

/* ---- Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) ---- */

/*
 * The element-wise math builders: wire op, inputs in order, automatic
 * names, shapes (broadcast for Div, Max, Min and Pow), and the daemon's words
 * for a refused node.
 */
static void test_builder_math_ops(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, (int64_t[]){2, 1, 5});
    tide_ref y = tide_builder_placeholder(b, "y", TIDE_DT_FLOAT32, 2, (int64_t[]){3, 1});
    static const char *const unary_ops[] = {"Exp", "Log", "Sqrt", "Gelu"};
    tide_ref u[4] = {tide_builder_exp(b, NULL, x), tide_builder_log(b, NULL, x),
                     tide_builder_sqrt(b, "root", x), tide_builder_gelu(b, NULL, x)};
    tide_ref d = tide_builder_div(b, NULL, x, y);
    tide_ref mx = tide_builder_max(b, "mx", y, x);
    tide_ref mn = tide_builder_min(b, NULL, x, y);
    tide_ref pw = tide_builder_pow(b, NULL, y, x);
    assert_null(tide_builder_error(b));
    for (int i = 0; i < 4; i++)
        expect_shape(b, u[i], 3, (int64_t[]){2, 1, 5});
    expect_shape(b, d, 3, (int64_t[]){2, 3, 5});
    expect_shape(b, mx, 3, (int64_t[]){2, 3, 5});
    expect_shape(b, mn, 3, (int64_t[]){2, 3, 5});
    expect_shape(b, pw, 3, (int64_t[]){2, 3, 5});
    assert_string_equal(tide_builder_name(b, u[0]), "exp_0");
    assert_string_equal(tide_builder_name(b, u[1]), "log_0");
    assert_string_equal(tide_builder_name(b, u[2]), "root");
    assert_string_equal(tide_builder_name(b, u[3]), "gelu_0");
    assert_string_equal(tide_builder_name(b, d), "div_0");
    assert_string_equal(tide_builder_name(b, mn), "min_0");
    assert_string_equal(tide_builder_name(b, pw), "pow_0");

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    for (int i = 0; i < 4; i++) {
        const Tide__V1__Node *n = node_named(g, tide_builder_name(b, u[i]));
        assert_string_equal(n->op, unary_ops[i]);
        assert_int_equal(n->n_inputs, 1);
        assert_string_equal(n->inputs[0], "x");
        assert_int_equal(n->n_attrs, 0);
    }
    static const struct {
        const char *name, *op, *in0, *in1;
    } binary[] = {{"div_0", "Div", "x", "y"},
                  {"mx", "Max", "y", "x"},
                  {"min_0", "Min", "x", "y"},
                  {"pow_0", "Pow", "y", "x"}};
    for (int i = 0; i < 4; i++) {
        const Tide__V1__Node *n = node_named(g, binary[i].name);
        assert_string_equal(n->op, binary[i].op);
        assert_int_equal(n->n_inputs, 2);
        assert_string_equal(n->inputs[0], binary[i].in0);
        assert_string_equal(n->inputs[1], binary[i].in1);
    }
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Shapes that do not broadcast, and an int32 input: the daemon's words. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){2, 3});
    y = tide_builder_placeholder(b, "y", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_max(b, "m", x, y).id, -1);
    assert_contains(tide_builder_error(b), "node \"m\" (Max): input shapes [2, 3] and [4] do not "
                                           "broadcast: dimensions 3 and 4 differ");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){2, 3});
    tide_ref e = tide_builder_placeholder(b, "e", TIDE_DT_INT32, 0, NULL);
    assert_int_equal(tide_builder_pow(b, "p", x, e).id, -1);
    assert_contains(tide_builder_error(b), "node \"p\" (Pow): input 1 (\"e\") is int32, wants "
                                           "float32");
    tide_builder_free(b);
    b = tide_builder_new();
    tide_ref l = tide_builder_placeholder(b, "l", TIDE_DT_INT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_log(b, "lg", l).id, -1);
    assert_contains(tide_builder_error(b), "node \"lg\" (Log): input 0 (\"l\") is int32, wants "
                                           "float32");
    tide_builder_free(b);
}

/* ---- Masks computed from data (Cast, Compare, Select) ---- */

/*
 * Cast, Compare and Select through the builder: dtypes and broadcast shapes
 * inferred as the daemon does, "to" and "mode" on the wire as the enums'
 * numbers, a graph the daemon imports; bad values refused in its words.
 */
static void test_builder_masks(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref ids = tide_builder_placeholder(b, "ids", TIDE_DT_INT32, 2, (int64_t[]){2, 5});
    tide_ref scores = tide_builder_placeholder(b, "scores", TIDE_DT_FLOAT32, 4,
                                               (int64_t[]){2, 3, 5, 5});
    tide_ref zero = tide_builder_constant(b, "zero", TIDE_DT_INT32, 0, NULL, (int32_t[]){0});
    tide_ref keep = tide_builder_compare(b, "keep", ids, zero, TIDE_COMPARE_NOT_EQUAL);
    tide_ref mask = tide_builder_reshape(b, "mask", keep, 4, (int64_t[]){2, 1, 1, 5});
    tide_ref ninf =
        tide_builder_constant(b, "ninf", TIDE_DT_FLOAT32, 0, NULL, (float[]){-INFINITY});
    tide_ref masked = tide_builder_select(b, "masked", mask, scores, ninf);
    tide_ref as_float = tide_builder_cast(b, NULL, ids, TIDE_DT_FLOAT32);
    tide_ref as_int = tide_builder_cast(b, "as_int", scores, TIDE_DT_INT32);
    tide_ref ge = tide_builder_compare(b, NULL, as_float, mask, TIDE_COMPARE_GREATER_EQUAL);
    assert_null(tide_builder_error(b));
    expect_shape(b, keep, 2, (int64_t[]){2, 5});
    assert_int_equal(tide_builder_dtype(b, keep), TIDE_DT_FLOAT32);
    expect_shape(b, masked, 4, (int64_t[]){2, 3, 5, 5});
    expect_shape(b, as_float, 2, (int64_t[]){2, 5});
    assert_int_equal(tide_builder_dtype(b, as_float), TIDE_DT_FLOAT32);
    assert_int_equal(tide_builder_dtype(b, as_int), TIDE_DT_INT32);
    expect_shape(b, ge, 4, (int64_t[]){2, 1, 2, 5}); /* [2, 5] against [2, 1, 1, 5] */
    assert_string_equal(tide_builder_name(b, as_float), "cast_0");
    assert_string_equal(tide_builder_name(b, ge), "compare_0");

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "keep");
    assert_string_equal(n->op, "Compare");
    assert_int_equal(n->n_inputs, 2);
    assert_string_equal(n->inputs[0], "ids");
    assert_string_equal(n->inputs[1], "zero");
    assert_int_equal(attr_of(n, "mode")->i, TIDE_COMPARE_NOT_EQUAL);
    assert_int_equal(attr_of(node_named(g, "compare_0"), "mode")->i, 5);
    n = node_named(g, "masked");
    assert_string_equal(n->op, "Select");
    assert_int_equal(n->n_inputs, 3);
    assert_string_equal(n->inputs[0], "mask");
    assert_string_equal(n->inputs[1], "scores");
    assert_string_equal(n->inputs[2], "ninf");
    assert_int_equal(n->n_attrs, 0);
    n = node_named(g, "as_int");
    assert_string_equal(n->op, "Cast");
    assert_int_equal(attr_of(n, "to")->i, 2);
    assert_int_equal(attr_of(node_named(g, "cast_0"), "to")->i, 1);
    expect_daemon_imports(g);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Refusals, in the daemon's words. */
    b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_cast(b, "c", x, (enum tide_data_type)7).id, -1);
    assert_contains(tide_builder_error(b),
                    "node \"c\" (Cast): attribute \"to\" is 7, wants 1 (float32) or 2 (int32)");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_compare(b, "m", x, x, (enum tide_compare_mode)6).id, -1);
    assert_contains(tide_builder_error(b), "node \"m\" (Compare): attribute \"mode\" is 6, wants 0 "
                                           "to 5");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    tide_ref l = tide_builder_placeholder(b, "l", TIDE_DT_INT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_compare(b, "m", x, l, TIDE_COMPARE_EQUAL).id, -1);
    assert_contains(tide_builder_error(b), "node \"m\" (Compare): input 0 (x) is float32 and input "
                                           "1 (y) is int32");
    tide_builder_free(b);
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    tide_ref y = tide_builder_placeholder(b, "y", TIDE_DT_FLOAT32, 1, (int64_t[]){3});
    assert_int_equal(tide_builder_select(b, "s", x, x, y).id, -1);
    assert_contains(tide_builder_error(b), "node \"s\" (Select): input shapes [4] (cond), [4] (x) "
                                           "and [3] (y) do not broadcast");
    tide_builder_free(b);
}

/* ---- Trigonometric and hyperbolic functions (Trig) ---- */

/*
 * Trig through the builder: x's shape for each fn, "fn" on the wire as the
 * enum's number, automatic names, a graph the daemon imports; an fn outside
 * the enum and an int32 x refused in its words.
 */
static void test_builder_trig(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){3, 8});
    tide_ref refs[TIDE_TRIG_ATANH + 1];
    for (int fn = TIDE_TRIG_SIN; fn <= TIDE_TRIG_ATANH; fn++)
        refs[fn] = tide_builder_trig(b, fn == TIDE_TRIG_COS ? "angle_cos" : NULL, x,
                                     (enum tide_trig_fn)fn);
    assert_null(tide_builder_error(b));
    for (int fn = TIDE_TRIG_SIN; fn <= TIDE_TRIG_ATANH; fn++) {
        expect_shape(b, refs[fn], 2, (int64_t[]){3, 8});
        assert_int_equal(tide_builder_dtype(b, refs[fn]), TIDE_DT_FLOAT32);
    }
    assert_string_equal(tide_builder_name(b, refs[TIDE_TRIG_SIN]), "trig_0");
    assert_string_equal(tide_builder_name(b, refs[TIDE_TRIG_ATANH]), "trig_9");

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "angle_cos");
    assert_string_equal(n->op, "Trig");
    assert_int_equal(n->n_inputs, 1);
    assert_string_equal(n->inputs[0], "x");
    assert_int_equal(attr_of(n, "fn")->i, TIDE_TRIG_COS);
    assert_int_equal(attr_of(node_named(g, "trig_0"), "fn")->i, 0);
    assert_int_equal(attr_of(node_named(g, "trig_9"), "fn")->i, 10);
    expect_daemon_imports(g);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Refusals, in the daemon's words. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_trig(b, "t", x, (enum tide_trig_fn)11).id, -1);
    assert_contains(tide_builder_error(b), "node \"t\" (Trig): attribute \"fn\" is 11, wants 0 "
                                           "to 10 (sin, cos, tan, asin, acos, atan, sinh, cosh, "
                                           "asinh, acosh, atanh)");
    tide_builder_free(b);
    b = tide_builder_new();
    tide_ref l = tide_builder_placeholder(b, "l", TIDE_DT_INT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_trig(b, "t", l, TIDE_TRIG_SIN).id, -1);
    assert_contains(tide_builder_error(b), "node \"t\" (Trig): input 0 (\"l\") is int32, wants "
                                           "float32");
    tide_builder_free(b);
}

/* ---- Rounding to integral values (Round) ---- */

/*
 * Round through the builder: x's shape for each mode, "mode" on the wire as
 * the enum's number, automatic names, a graph the daemon imports; a mode
 * outside the enum and an int32 x refused in its words.
 */
static void test_builder_round(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){3, 8});
    tide_ref refs[TIDE_ROUND_TRUNC + 1];
    for (int mode = TIDE_ROUND_FLOOR; mode <= TIDE_ROUND_TRUNC; mode++)
        refs[mode] = tide_builder_round(b, mode == TIDE_ROUND_HALF_TO_EVEN ? "bucket" : NULL, x,
                                        (enum tide_round_mode)mode);
    assert_null(tide_builder_error(b));
    for (int mode = TIDE_ROUND_FLOOR; mode <= TIDE_ROUND_TRUNC; mode++) {
        expect_shape(b, refs[mode], 2, (int64_t[]){3, 8});
        assert_int_equal(tide_builder_dtype(b, refs[mode]), TIDE_DT_FLOAT32);
    }
    assert_string_equal(tide_builder_name(b, refs[TIDE_ROUND_FLOOR]), "round_0");
    assert_string_equal(tide_builder_name(b, refs[TIDE_ROUND_TRUNC]), "round_2");

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "bucket");
    assert_string_equal(n->op, "Round");
    assert_int_equal(n->n_inputs, 1);
    assert_string_equal(n->inputs[0], "x");
    assert_int_equal(attr_of(n, "mode")->i, 2);
    assert_int_equal(attr_of(node_named(g, "round_0"), "mode")->i, 0);
    assert_int_equal(attr_of(node_named(g, "round_1"), "mode")->i, 1);
    assert_int_equal(attr_of(node_named(g, "round_2"), "mode")->i, 3);
    expect_daemon_imports(g);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* Refusals, in the daemon's words. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_round(b, "r", x, (enum tide_round_mode)4).id, -1);
    assert_contains(tide_builder_error(b), "node \"r\" (Round): attribute \"mode\" is 4, wants 0 "
                                           "to 3 (floor, ceil, half to even, toward zero)");
    tide_builder_free(b);
    b = tide_builder_new();
    tide_ref l = tide_builder_placeholder(b, "l", TIDE_DT_INT32, 1, (int64_t[]){4});
    assert_int_equal(tide_builder_round(b, "r", l, TIDE_ROUND_FLOOR).id, -1);
    assert_contains(tide_builder_error(b), "node \"r\" (Round): input 0 (\"l\") is int32, wants "
                                           "float32");
    tide_builder_free(b);
}

/* ---- Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose) ---- */

/*
 * BatchMatMul and Transpose through the builder: shapes inferred as the
 * daemon does, attributes on the wire as given, a graph the daemon imports;
 * bad shapes and permutations refused in the daemon's words, and the
 * builder's own argument checks (a NULL or too long perm).
 */
static void test_builder_batch_matmul_and_transpose(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, (int64_t[]){2, 6, 8});
    tide_ref w = tide_builder_variable(b, "w", 2, (int64_t[]){8, 12}, "glorot_uniform", 1, true);
    tide_ref ids = tide_builder_placeholder(b, "ids", TIDE_DT_INT32, 2, (int64_t[]){2, 6});
    tide_ref h = tide_builder_batch_matmul(b, "h", x, w, false, false); /* [2, 6, 12] */
    tide_ref heads = tide_builder_reshape(b, "heads", h, 4, (int64_t[]){2, 6, 3, 4});
    tide_ref q =
        tide_builder_transpose(b, "q", heads, (int64_t[]){0, 2, 1, 3}, 4);       /* [2, 3, 6, 4] */
    tide_ref scores = tide_builder_batch_matmul(b, "scores", q, q, false, true); /* [2, 3, 6, 6] */
    tide_ref auto_named = tide_builder_transpose(b, NULL, ids, (int64_t[]){1, 0}, 2);
    assert_null(tide_builder_error(b));
    expect_shape(b, h, 3, (int64_t[]){2, 6, 12});
    expect_shape(b, q, 4, (int64_t[]){2, 3, 6, 4});
    expect_shape(b, scores, 4, (int64_t[]){2, 3, 6, 6});
    expect_shape(b, auto_named, 2, (int64_t[]){6, 2});
    assert_int_equal(tide_builder_dtype(b, auto_named), TIDE_DT_INT32);

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "scores");
    assert_string_equal(n->op, "BatchMatMul");
    assert_false(attr_of(n, "transpose_a")->b);
    assert_true(attr_of(n, "transpose_b")->b);
    n = node_named(g, "q");
    assert_string_equal(n->op, "Transpose");
    expect_ints(attr_of(n, "perm"), 4, (int64_t[]){0, 2, 1, 3});
    n = node_named(g, "transpose_0");
    assert_string_equal(n->inputs[0], "ids");
    expect_daemon_imports(g);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, (int64_t[]){2, 6, 8});
    tide_ref y = tide_builder_placeholder(b, "y", TIDE_DT_FLOAT32, 3, (int64_t[]){3, 8, 4});
    assert_int_equal(tide_builder_batch_matmul(b, "bad", x, y, false, false).id, -1);
    assert_string_equal(tide_builder_error(b),
                        "node \"bad\" (BatchMatMul): batch dimensions [2] of a [2, 6, 8] and [3] "
                        "of b [3, 8, 4] do not broadcast: dimensions 2 and 3 differ and neither "
                        "is 1");
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, (int64_t[]){2, 6, 8});
    assert_int_equal(tide_builder_transpose(b, "bad", x, (int64_t[]){0, 1, 1}, 3).id, -1);
    assert_string_equal(tide_builder_error(b), "node \"bad\" (Transpose): attribute \"perm\" "
                                               "[0, 1, 1] names axis 1 twice, wants a permutation "
                                               "of 0 to 2");
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, (int64_t[]){2, 6, 8});
    assert_int_equal(tide_builder_transpose(b, "bad", x, NULL, 3).id, -1);
    assert_contains(tide_builder_error(b), "perm has 3 entries but its pointer is NULL");
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, (int64_t[]){2, 6, 8});
    assert_int_equal(tide_builder_transpose(b, "bad", x, (int64_t[9]){0}, 9).id, -1);
    assert_contains(tide_builder_error(b), "perm has 9 entries, wants 0 to 8");
    tide_builder_free(b);
}

/* ---- Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing) ---- */

/*
 * The routing of a Mixture-of-Experts layer as the MoE model writes it:
 * shapes and dtypes tracked through TopK, MoeRoute and both Gathers, the
 * attributes on the wire, and a graph the daemon imports as it is.
 */
static void test_builder_moe_routing(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){6, 4});
    tide_ref wg = tide_builder_variable(b, "wg", 2, (int64_t[]){4, 3}, "glorot_uniform", 1, true);
    tide_ref probs =
        tide_builder_softmax(b, NULL, tide_builder_matmul(b, NULL, x, wg, false, false), -1);
    tide_ref top = tide_builder_top_k(b, "top", probs, 2);
    tide_ref idx = tide_builder_output(b, top, 1);
    expect_shape(b, top, 2, (int64_t[]){6, 2});
    expect_shape(b, idx, 2, (int64_t[]){6, 2});
    assert_int_equal(tide_builder_dtype(b, top), TIDE_DT_FLOAT32);
    assert_int_equal(tide_builder_dtype(b, idx), TIDE_DT_INT32);

    tide_ref route = tide_builder_moe_route(b, "route", idx, 3, 4);
    tide_ref combine = tide_builder_output(b, route, 1);
    expect_shape(b, route, 1, (int64_t[]){12});
    expect_shape(b, combine, 2, (int64_t[]){6, 2});
    assert_int_equal(tide_builder_dtype(b, route), TIDE_DT_INT32);
    assert_int_equal(tide_builder_dtype(b, combine), TIDE_DT_INT32);

    const float zeros[4] = {0};
    tide_ref zero_row =
        tide_builder_constant(b, "zero_row", TIDE_DT_FLOAT32, 2, (int64_t[]){1, 4}, zeros);
    tide_ref padded = tide_builder_concat(b, NULL, (tide_ref[]){x, zero_row}, 2, 0);
    tide_ref expert_in = tide_builder_gather(b, "expert_in", padded, route);
    expect_shape(b, expert_in, 2, (int64_t[]){12, 4});
    tide_ref back = tide_builder_gather(
        b, "back", tide_builder_concat(b, NULL, (tide_ref[]){expert_in, zero_row}, 2, 0), combine);
    expect_shape(b, back, 3, (int64_t[]){6, 2, 4});
    assert_null(tide_builder_error(b));

    Tide__V1__Graph *g = roundtrip(b);
    assert_string_equal(node_named(g, "top")->op, "TopK");
    assert_int_equal(attr_of(node_named(g, "top"), "k")->i, 2);
    const Tide__V1__Node *r = node_named(g, "route");
    assert_string_equal(r->op, "MoeRoute");
    assert_int_equal(attr_of(r, "experts")->i, 3);
    assert_int_equal(attr_of(r, "capacity")->i, 4);
    assert_string_equal(r->inputs[0], "top:1");
    const Tide__V1__Node *gb = node_named(g, "back");
    assert_string_equal(gb->op, "Gather");
    assert_string_equal(gb->inputs[1], "route:1");
    expect_daemon_imports(g);
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);
}

/* The builder refuses what the daemon would, in its words. */
static void test_builder_index_errors(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){6, 3});
    assert_int_equal(tide_builder_top_k(b, "top", x, 4).id, -1);
    assert_contains(tide_builder_error(b), "node \"top\" (TopK): attribute \"k\" is 4, wants 1 to "
                                           "3 (the last dimension of input 0 (x) [6, 3])");
    tide_builder_free(b);

    b = tide_builder_new();
    tide_ref ids = tide_builder_placeholder(b, "ids", TIDE_DT_INT32, 2, (int64_t[]){6, 2});
    assert_int_equal(tide_builder_moe_route(b, "route", ids, 0, 4).id, -1);
    assert_contains(tide_builder_error(b),
                    "node \"route\" (MoeRoute): attribute \"experts\" is 0, wants 1 to");
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){6, 3});
    assert_int_equal(tide_builder_gather(b, "g", x, x).id, -1);
    assert_contains(tide_builder_error(b),
                    "node \"g\" (Gather): input 1 (ids) is float32, wants int32");
    tide_builder_free(b);
}

/* ---- Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout) ---- */

/* LayerNorm and Dropout: shapes, attributes and outputs on the wire, and the daemon's refusals. */
static void test_builder_layer_norm_and_dropout(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    int64_t x_dims[] = {4, 6, 16}, f_dims[] = {16};
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, x_dims);
    tide_ref gain = tide_builder_variable(b, "gain", 1, f_dims, "ones", 1.0f, true);
    tide_ref bias = tide_builder_variable(b, "bias", 1, f_dims, "zeros", 1.0f, true);
    tide_ref ln = tide_builder_layer_norm(b, "ln", x, gain, bias, 1e-6f);
    tide_ref mean = tide_builder_output(b, ln, 1);
    tide_ref inv_std = tide_builder_output(b, ln, 2);
    tide_ref drop = tide_builder_dropout(b, "drop", ln, 0.1f, 17);
    tide_ref stats = tide_builder_mul(b, "stats", mean, inv_std);
    assert_null(tide_builder_error(b));
    expect_shape(b, ln, 3, (int64_t[]){4, 6, 16});
    expect_shape(b, mean, 2, (int64_t[]){4, 6});
    expect_shape(b, inv_std, 2, (int64_t[]){4, 6});
    expect_shape(b, drop, 3, (int64_t[]){4, 6, 16});
    expect_shape(b, stats, 2, (int64_t[]){4, 6});

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "ln");
    assert_string_equal(n->op, "LayerNorm");
    assert_int_equal(n->n_inputs, 3);
    assert_string_equal(n->inputs[1], "gain");
    assert_string_equal(n->inputs[2], "bias");
    assert_true(attr_of(n, "epsilon")->f == 1e-6f);
    n = node_named(g, "drop");
    assert_string_equal(n->op, "Dropout");
    assert_string_equal(n->inputs[0], "ln");
    assert_true(attr_of(n, "rate")->f == 0.1f);
    assert_int_equal(attr_of(n, "seed")->i, 17);
    n = node_named(g, "stats");
    assert_string_equal(n->inputs[0], "ln:1");
    assert_string_equal(n->inputs[1], "ln:2");
    tide__v1__graph__free_unpacked(g, NULL);
    tide_builder_free(b);

    /* The builder refuses with the daemon's words, naming the node and the numbers. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, x_dims);
    assert_int_equal(tide_builder_dropout(b, "drop", x, 1.0f, 0).id, -1);
    assert_contains(tide_builder_error(b), "node \"drop\" (Dropout)");
    assert_contains(tide_builder_error(b), "attribute \"rate\" is 1, wants a value in [0, 1)");
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, x_dims);
    int64_t wrong[] = {6};
    gain = tide_builder_variable(b, "gain", 1, wrong, "ones", 1.0f, true);
    assert_int_equal(tide_builder_layer_norm(b, "ln", x, gain, gain, 1e-5f).id, -1);
    assert_contains(tide_builder_error(b), "node \"ln\" (LayerNorm)");
    assert_contains(tide_builder_error(b), "input 1 (gain) has shape [6], wants [16]");
    tide_builder_free(b);

    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 3, x_dims);
    gain = tide_builder_variable(b, "gain", 1, f_dims, "ones", 1.0f, true);
    assert_int_equal(tide_builder_layer_norm(b, "ln", x, gain, gain, 0.0f).id, -1);
    assert_contains(tide_builder_error(b), "attribute \"epsilon\" is 0, wants a finite value > 0");
    tide_builder_free(b);
}

/* ---- Sequence-model ops: fused attention (Attention) ---- */

/* tide_builder_attention: o and lse shapes, its attributes on the wire, the daemon's refusals. */
static void test_builder_attention(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    int64_t q_dims[] = {2, 4, 16, 8}, k_dims[] = {2, 4, 24, 8};
    tide_ref q = tide_builder_placeholder(b, "q", TIDE_DT_FLOAT32, 4, q_dims);
    tide_ref k = tide_builder_placeholder(b, "k", TIDE_DT_FLOAT32, 4, k_dims);
    tide_ref self = tide_builder_attention(b, NULL, q, q, q, true, 0.0f);
    tide_ref cross = tide_builder_attention(b, "cross", q, k, k, false, 0.25f);
    tide_ref lse = tide_builder_output(b, cross, 1);
    tide_ref sum = tide_builder_add(b, "sum", self, cross);
    assert_null(tide_builder_error(b));
    expect_shape(b, self, 4, (int64_t[]){2, 4, 16, 8});
    expect_shape(b, cross, 4, (int64_t[]){2, 4, 16, 8});
    expect_shape(b, lse, 3, (int64_t[]){2, 4, 16});
    expect_shape(b, sum, 4, (int64_t[]){2, 4, 16, 8});

    Tide__V1__Graph *g = roundtrip(b);
    check_against_op_table(g);
    const Tide__V1__Node *n = node_named(g, "attention_0");
    assert_string_equal(n->op, "Attention");
    assert_int_equal(n->n_inputs, 3);
    assert_true(attr_of(n, "causal")->b);
    assert_true(attr_of(n, "scale")->f == 0.0f);
    n = node_named(g, "cross");
    assert_false(attr_of(n, "causal")->b);
    assert_true(attr_of(n, "scale")->f == 0.25f);
    assert_string_equal(n->inputs[1], "k");
    tide__v1__graph__free_unpacked(g, NULL);

    /* Causal attention of 16 queries over 24 keys is refused in the daemon's words. */
    assert_int_equal(tide_builder_attention(b, "bad", q, k, k, true, 0.0f).id, -1);
    assert_contains(tide_builder_error(b),
                    "node \"bad\" (Attention): attribute \"causal\" is set, so input 0 (q) "
                    "[2, 4, 16, 8] and input 1 (k) [2, 4, 24, 8] must have the same sequence "
                    "length (Sq 16, Sk 24)");
    tide_builder_free(b);

    b = tide_builder_new();
    q = tide_builder_placeholder(b, "q", TIDE_DT_FLOAT32, 4, q_dims);
    assert_int_equal(tide_builder_attention(b, "bad", q, q, q, true, -1.0f).id, -1);
    assert_contains(tide_builder_error(b), "attribute \"scale\" is -1, wants 0 (for 1/sqrt(D))");
    tide_builder_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_serializes_a_dense_graph),
        cmocka_unit_test(test_builder_writes_window_attrs_outputs_and_control_edges),
        cmocka_unit_test(test_builder_writes_grouped_conv),
        cmocka_unit_test(test_builder_writes_dilated_conv),
        cmocka_unit_test(test_builder_writes_values_and_shape_ops),
        cmocka_unit_test(test_builder_errors_are_sticky),
        cmocka_unit_test(test_builder_reports_the_daemons_words),
        cmocka_unit_test(test_builder_errors_equal_import_errors),
        cmocka_unit_test(test_builder_names_and_scopes),
        cmocka_unit_test(test_builder_tracks_shapes),
        cmocka_unit_test(test_model_mlp),
        cmocka_unit_test(test_model_cnn),
        cmocka_unit_test(test_model_resnet),
        cmocka_unit_test(test_model_lstm),
        /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
        cmocka_unit_test(test_builder_math_ops),
        cmocka_unit_test(test_builder_masks),
        cmocka_unit_test(test_builder_trig),
        cmocka_unit_test(test_builder_round),

        /* batched products and axis permutation (BatchMatMul, Transpose) */
        cmocka_unit_test(test_builder_batch_matmul_and_transpose),

        /* indexing (Gather, TopK, Mixture-of-Experts routing) */
        cmocka_unit_test(test_builder_moe_routing),
        cmocka_unit_test(test_builder_index_errors),

        /* normalisation and regularisation (LayerNorm, Dropout) */
        cmocka_unit_test(test_builder_layer_norm_and_dropout),

        /* fused attention (Attention) */
        cmocka_unit_test(test_builder_attention),

        cmocka_unit_test(test_fashion_mnist_train),
        cmocka_unit_test(test_fashion_mnist_test_split),
        cmocka_unit_test(test_fashion_mnist_errors),
        cmocka_unit_test(test_synthetic_dataset),
        cmocka_unit_test(test_synthetic_dataset_is_learnable),
        /* text corpora (the language models' fortunes) */
        cmocka_unit_test(test_fortunes_corpus),
        cmocka_unit_test(test_corpus_files_and_errors),
        /* language models (transformer, moe) */
        cmocka_unit_test(test_model_transformer),
        cmocka_unit_test(test_model_moe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
