/* SPDX-License-Identifier: MIT */
/*
 * test_onnx.c: ONNX import (onnx/, tide/onnx.h). Models are built with
 * tests/onnx_builder.h (the protobuf-c structs generated from onnx.proto),
 * imported into a builder, checked (ops, shapes, values) and run forward on
 * the CPU backend; bad models must be refused with the exact message.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "onnx.pb-c.h"
#include "onnx_builder.h"
#include "runtime/session.h"
#include "tide/client.h"
#include "tide/graph.h"
#include "tide/onnx.h"
#include "float_assert.h"

/* ============================================================================
 * Import and run
 * ========================================================================== */

/* Imports m into a new builder; asserts success. */
static tide_builder *import_ok(struct tide_test_onnx *m, const struct tide_onnx_options *o,
                               struct tide_onnx_result *r)
{
    size_t len;
    uint8_t *bytes = tide_test_onnx_pack(m, &len);
    tide_builder *b = tide_builder_new();
    char err[512];
    int rc = tide_onnx_import(b, bytes, len, o, r, err, sizeof(err));
    free(bytes);
    if (rc != 0)
        fail_msg("import: %s", err);
    return b;
}

/* Imports m and asserts the import fails with exactly want. */
static void import_fails(struct tide_test_onnx *m, const struct tide_onnx_options *o,
                         const char *want)
{
    size_t len;
    uint8_t *bytes = tide_test_onnx_pack(m, &len);
    tide_builder *b = tide_builder_new();
    char err[512];
    struct tide_onnx_result r;
    assert_int_equal(tide_onnx_import(b, bytes, len, o, &r, err, sizeof(err)), -1);
    assert_string_equal(err, want);
    assert_null(r.inputs);
    assert_int_equal(r.n_outputs, 0);
    free(bytes);
    tide_builder_free(b);
}

static void expect_values(struct tide_test_onnx *m, const float *x, size_t n_x, int32_t rank,
                          const int64_t *dims, const float *want, size_t n_want);

/* Runs b forward: feeds float input data to the first input, fetches the first output. */
static void run_forward(tide_builder *b, const struct tide_onnx_result *r, const void *in,
                        size_t in_bytes, float *out, size_t out_count)
{
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    const char *fetch = tide_builder_name(b, r->outputs[0]);
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.fetches = &fetch;
    o.n_fetches = 1;
    struct tide_session *s;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &o, &s, &err) != TIDE_OK)
        fail_msg("session: %s", err.message);
    free(graph);
    assert_int_equal(tide_session_feed(s, tide_builder_name(b, r->inputs[0]), in, in_bytes, &err),
                     TIDE_OK);
    struct tide_step_stats stats;
    if (tide_session_eval(s, &stats, &err) != TIDE_OK)
        fail_msg("eval: %s", err.message);
    assert_int_equal(tide_session_fetch(s, fetch, out, out_count * sizeof(float), &err), TIDE_OK);
    tide_session_free(s);
}

static void assert_shape(tide_builder *b, tide_ref ref, int32_t rank, const int64_t *dims)
{
    int64_t got[TIDE_BUILDER_MAX_RANK];
    int32_t got_rank;
    assert_int_equal(tide_builder_shape(b, ref, got, &got_rank), 0);
    assert_int_equal(got_rank, rank);
    for (int32_t k = 0; k < rank; k++)
        assert_int_equal(got[k], dims[k]);
}

/*
 * Imports m (one float input x, one output y; the float initializer frozen, when not NULL, as a
 * constant), adds loss = mean(y^2), runs one SGD step of learning rate 0.1 on x and fetches the
 * Variable var (count floats) after it; m stays m's.
 */
static void train_one_step_frozen(struct tide_test_onnx *m, const float *x, size_t x_bytes,
                                  const char *frozen, const char *var, float *out, size_t count)
{
    struct tide_onnx_result r;
    struct tide_onnx_options io = {.frozen = &frozen, .n_frozen = frozen ? 1 : 0};
    tide_builder *b = import_ok(m, &io, &r);
    tide_ref loss = tide_builder_reduce_mean(
        b, "loss", tide_builder_mul(b, NULL, r.outputs[0], r.outputs[0]), NULL, 0, false);
    assert_true(loss.id >= 0);
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    struct tide_train_options train = {
        .loss = "loss", .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.1f};
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.train = &train;
    struct tide_session *sess;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &o, &sess, &err) != TIDE_OK)
        fail_msg("training session: %s", err.message);
    free(graph);
    struct tide_step_stats stats;
    assert_int_equal(tide_session_feed(sess, tide_builder_name(b, r.inputs[0]), x, x_bytes, &err),
                     TIDE_OK);
    if (tide_session_step(sess, &stats, &err) != TIDE_OK)
        fail_msg("step: %s", err.message);
    assert_int_equal(tide_session_fetch(sess, var, out, count * sizeof(float), &err), TIDE_OK);
    tide_session_free(sess);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
}

/* train_one_step_frozen with nothing frozen. */
static void train_one_step(struct tide_test_onnx *m, const float *x, size_t x_bytes,
                           const char *var, float *out, size_t count)
{
    train_one_step_frozen(m, x, x_bytes, NULL, var, out, count);
}

/* ============================================================================
 * Tests
 * ========================================================================== */

/* Gemm + Relu: inputs, Variables with their values, named outputs, the numbers; then a loss. */
static void test_gemm_relu_forward_and_loss(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "input:0", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3},
                         -1);
    float w[6] = {1, -1, 0.5f, 2, -0.5f, 1};
    float bias[2] = {0.25f, -3};
    tide_test_onnx_init_f(m, "fc.weight", 2, (int64_t[]){2, 3}, w);
    tide_test_onnx_init_f(m, "fc.bias", 1, (int64_t[]){2}, bias);
    Onnx__NodeProto *g = tide_test_onnx_node(
        m, "Gemm", "fc", TIDE_TEST_NAMES("input:0", "fc.weight", "fc.bias"), TIDE_TEST_NAMES("h"));
    tide_test_onnx_attr_i(m, g, "transB", 1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("h"), TIDE_TEST_NAMES("logits"));
    tide_test_onnx_output(m, "logits");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_int_equal(r.n_inputs, 1);
    assert_int_equal(r.n_outputs, 1);
    assert_int_equal(r.opset, 13);
    assert_string_equal(tide_builder_name(b, r.inputs[0]), "input_0");
    assert_string_equal(tide_builder_op(b, r.inputs[0]), "Placeholder");
    assert_string_equal(tide_builder_name(b, r.outputs[0]), "logits");
    assert_string_equal(tide_builder_op(b, r.outputs[0]), "Identity");
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 2});
    tide_ref wref = tide_builder_find(b, "fc.weight");
    assert_string_equal(tide_builder_op(b, wref), "Variable");
    assert_int_equal(tide_builder_parameter_count(b), 8);

    float x[6] = {1, 2, 3, -1, 0, 4};
    float y[4];
    run_forward(b, &r, x, sizeof(x), y, 4);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++) {
            float want = bias[j];
            for (int k = 0; k < 3; k++)
                want += x[i * 3 + k] * w[j * 3 + k];
            want = want > 0 ? want : 0;
            assert_float_equal(y[i * 2 + j], want, 1e-6);
        }
    }
    /* The caller names the prediction output and adds a loss on it. */
    tide_ref labels = tide_builder_placeholder(b, "labels", TIDE_DT_INT32, 1, (int64_t[]){2});
    tide_ref xent = tide_builder_softmax_cross_entropy(b, NULL, r.outputs[0], labels);
    tide_ref loss = tide_builder_reduce_mean(b, "loss", xent, NULL, 0, false);
    assert_true(loss.id >= 0);
    assert_null(tide_builder_error(b));

    /* ... and trains it: the imported weights get gradients and updates. */
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    struct tide_train_options train = {
        .loss = "loss", .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.5f};
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.train = &train;
    struct tide_session *s;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &o, &s, &err) != TIDE_OK)
        fail_msg("training session: %s", err.message);
    free(graph);
    int32_t y_labels[2] = {0, 1};
    float first = 0, last = 0;
    for (int step = 0; step < 20; step++) {
        struct tide_step_stats stats;
        assert_int_equal(tide_session_feed(s, "input_0", x, sizeof(x), &err), TIDE_OK);
        assert_int_equal(tide_session_feed(s, "labels", y_labels, sizeof(y_labels), &err), TIDE_OK);
        if (tide_session_step(s, &stats, &err) != TIDE_OK)
            fail_msg("step: %s", err.message);
        assert_int_equal(tide_session_fetch(s, "loss", &last, sizeof(last), &err), TIDE_OK);
        if (step == 0)
            first = last;
    }
    assert_true(last < first - 0.1f);
    float w_after[6];
    assert_int_equal(tide_session_fetch(s, "fc.weight", w_after, sizeof(w_after), &err), TIDE_OK);
    assert_true(memcmp(w_after, w, sizeof(w)) != 0);
    tide_session_free(s);
    tide_onnx_result_free(&r);
    tide_onnx_result_free(&r); /* zeroed: freeing again is a no-op */
    tide_onnx_result_free(NULL);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape folds to a static Reshape. */
static void test_shape_chain_folds(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){2, 3, 4}, -1);
    tide_test_onnx_init_i(m, "zero", 0, NULL, (int64_t[]){0});
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){0});
    Onnx__NodeProto *constant = tide_test_onnx_node(m, "Constant", "k", TIDE_TEST_NAMES(NULL),
                                                    TIDE_TEST_NAMES("minus_one"));
    tide_test_onnx_attr_t(m, constant, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1,
                                                (int64_t[]){1}, (int64_t[]){-1}));
    tide_test_onnx_node(m, "Shape", "shape", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("s"));
    tide_test_onnx_node(m, "Gather", "first", TIDE_TEST_NAMES("s", "zero"), TIDE_TEST_NAMES("n"));
    tide_test_onnx_node(m, "Unsqueeze", "unsq", TIDE_TEST_NAMES("n", "axes"),
                        TIDE_TEST_NAMES("n1"));
    Onnx__NodeProto *cat = tide_test_onnx_node(
        m, "Concat", "cat", TIDE_TEST_NAMES("n1", "minus_one"), TIDE_TEST_NAMES("target"));
    tide_test_onnx_attr_i(m, cat, "axis", 0);
    tide_test_onnx_node(m, "Reshape", "flat", TIDE_TEST_NAMES("x", "target"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 12});
    /* Placeholder, Reshape, Identity: the shape computation left nothing in the graph. */
    assert_int_equal(tide_builder_node_count(b), 3);
    float x[24], y[24];
    for (int k = 0; k < 24; k++)
        x[k] = (float)k;
    run_forward(b, &r, x, sizeof(x), y, 24);
    for (int k = 0; k < 24; k++)
        assert_float_equal(y[k], x[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * One constant read by several folded nodes, as PyTorch shares a size
 * Constant between layers (examples/onnx/gpt.onnx): folding one reader
 * leaves the constant whole for the next. Unsqueeze used to take the
 * constant's values for its output and free them, so the second reader
 * copied from NULL.
 */
static void test_shared_constant_folds_twice(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){6}, -1);
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){0});
    Onnx__NodeProto *constant =
        tide_test_onnx_node(m, "Constant", "k", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("three"));
    tide_test_onnx_attr_t(m, constant, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0,
                                                NULL, (int64_t[]){3}));
    Onnx__NodeProto *two =
        tide_test_onnx_node(m, "Constant", "k2", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("two"));
    tide_test_onnx_attr_t(m, two, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0,
                                                NULL, (int64_t[]){2}));
    tide_test_onnx_node(m, "Unsqueeze", "u1", TIDE_TEST_NAMES("two", "axes"), TIDE_TEST_NAMES("a"));
    tide_test_onnx_node(m, "Unsqueeze", "u2", TIDE_TEST_NAMES("three", "axes"),
                        TIDE_TEST_NAMES("b"));
    Onnx__NodeProto *cast =
        tide_test_onnx_node(m, "Cast", "c", TIDE_TEST_NAMES("two"), TIDE_TEST_NAMES("two_again"));
    tide_test_onnx_attr_i(m, cast, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    tide_test_onnx_node(m, "Unsqueeze", "u3", TIDE_TEST_NAMES("two", "axes"), TIDE_TEST_NAMES("c"));
    Onnx__NodeProto *cat = tide_test_onnx_node(m, "Concat", "cat", TIDE_TEST_NAMES("c", "b"),
                                               TIDE_TEST_NAMES("target"));
    tide_test_onnx_attr_i(m, cat, "axis", 0);
    tide_test_onnx_node(m, "Reshape", "r", TIDE_TEST_NAMES("x", "target"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 3});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* masked_fill as PyTorch exports it: Equal of constants and Where, folded to an exact mask. */
static void test_causal_mask_where(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "scores", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 2},
                         -1);
    /* torch.tril(torch.ones(2, 2)) == 0, exported without constant folding. */
    Onnx__NodeProto *ones =
        tide_test_onnx_node(m, "Constant", "ones", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("ones"));
    tide_test_onnx_attr_t(m, ones, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2,
                                                (int64_t[]){2, 2}, (float[]){1, 1, 1, 1}));
    Onnx__NodeProto *tril =
        tide_test_onnx_node(m, "Trilu", "tril", TIDE_TEST_NAMES("ones"), TIDE_TEST_NAMES("tril"));
    tide_test_onnx_attr_i(m, tril, "upper", 0);
    tide_test_onnx_init_f(m, "zero", 0, NULL, (float[]){0});
    tide_test_onnx_init_f(m, "fill", 0, NULL, (float[]){-INFINITY});
    tide_test_onnx_node(m, "Equal", "eq", TIDE_TEST_NAMES("tril", "zero"),
                        TIDE_TEST_NAMES("masked"));
    tide_test_onnx_node(m, "Where", "where", TIDE_TEST_NAMES("masked", "fill", "scores"),
                        TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    const char *frozen[] = {"fill", "zero"};
    struct tide_onnx_options o = {.frozen = frozen, .n_frozen = 2};
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, &o, &r);
    float x[4] = {0.5f, 7, -2, 3}, y[4];
    run_forward(b, &r, x, sizeof(x), y, 4);
    assert_float_equal(y[0], 0.5f, 0);
    assert_true(isinf(y[1]) && y[1] < 0);
    assert_float_equal(y[2], -2, 0);
    assert_float_equal(y[3], 3, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * Identity and Unsqueeze on constants fold into copies (an integer shape and
 * a float bias): the Reshape still sees the shape, the Add the bias's values
 * in the new shape. (A node whose output has its input's name is refused:
 * test_missing_input.)
 */
static void test_constant_copies(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){0});
    Onnx__NodeProto *k =
        tide_test_onnx_node(m, "Constant", "k", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("s"));
    tide_test_onnx_attr_t(m, k, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1,
                                                (int64_t[]){2}, (int64_t[]){3, 2}));
    tide_test_onnx_node(m, "Identity", "id1", TIDE_TEST_NAMES("s"), TIDE_TEST_NAMES("s2"));
    tide_test_onnx_node(m, "Reshape", "r", TIDE_TEST_NAMES("x", "s2"), TIDE_TEST_NAMES("xr"));
    Onnx__NodeProto *bias =
        tide_test_onnx_node(m, "Constant", "kb", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("c"));
    tide_test_onnx_attr_t(m, bias, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1,
                                                (int64_t[]){2}, (float[]){10, 20}));
    tide_test_onnx_node(m, "Identity", "id3", TIDE_TEST_NAMES("c"), TIDE_TEST_NAMES("c1"));
    tide_test_onnx_node(m, "Unsqueeze", "u", TIDE_TEST_NAMES("c1", "axes"), TIDE_TEST_NAMES("c2"));
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("xr", "c2"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){3, 2});
    assert_int_equal(r.n_variables, 0); /* the bias stayed a constant */
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6];
    run_forward(b, &r, x, sizeof(x), y, 6);
    for (int i = 0; i < 6; i++)
        assert_float_equal(y[i], x[i] + (i % 2 ? 20 : 10), 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* frozen float initializers become Consts; int64 ones int32 Consts; too large is refused. */
static void test_initializers(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 2}, -1);
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){2, 2}, (float[]){1, 0, 0, 1});
    tide_test_onnx_node(m, "MatMul", "mm", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    const char *frozen[] = {"w"};
    struct tide_onnx_options o = {.frozen = frozen, .n_frozen = 1};
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, &o, &r);
    assert_string_equal(tide_builder_op(b, tide_builder_find(b, "w")), "Const");
    assert_int_equal(tide_builder_parameter_count(b), 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* A trainable initializer seen through Unsqueeze stays a Variable (the Unsqueeze becomes a
     * Reshape node); folding it into a constant would silently freeze the weight. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 2}, -1);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){2}, (float[]){1, 2});
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){0});
    tide_test_onnx_node(m, "Unsqueeze", "row", TIDE_TEST_NAMES("w", "axes"), TIDE_TEST_NAMES("w2"));
    tide_test_onnx_node(m, "Add", "sum", TIDE_TEST_NAMES("x", "w2"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    b = import_ok(m, NULL, &r);
    assert_string_equal(tide_builder_op(b, tide_builder_find(b, "w")), "Variable");
    assert_int_equal(tide_builder_parameter_count(b), 2);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "table", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){4, 2},
                         -1);
    tide_test_onnx_init_i(m, "ids", 1, (int64_t[]){2}, (int64_t[]){3, (int64_t)1 << 40});
    tide_test_onnx_node(m, "Gather", "emb", TIDE_TEST_NAMES("table", "ids"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node emb (Gather, opset 13): index 1099511627776 is out of range for "
                 "size 4");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_init_i(m, "big", 1, (int64_t[]){2}, (int64_t[]){1, (int64_t)1 << 33});
    tide_test_onnx_output(m, "big");
    import_fails(m, NULL, "\"big\": value 8589934592 at 1 does not fit in tide's int32");
    tide_test_onnx_free(m);
}

/* A dynamic dimension is an error naming the input, unless a batch size stands in for it. */
static void test_dynamic_batch(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(17);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){0, 3}, 0);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "graph input \"x\" has a dynamic dimension 0 (N): tide needs static "
                 "shapes; set a batch size in the import options");
    struct tide_onnx_options o = {.batch_size = 5};
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, &o, &r);
    assert_shape(b, r.inputs[0], 2, (int64_t[]){5, 3});
    assert_shape(b, r.outputs[0], 2, (int64_t[]){5, 3});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * Dynamic dimensions by name (PyTorch's dynamic_axes {0: "batch", 1: "seq"}): the batch size
 * stands for dimension 0 and for its name wherever else it appears; any other takes its size
 * from dims, by name, or is refused naming the input, the dimension and the name; a name in
 * dims that no input has is refused listing theirs.
 */
static void test_dynamic_dims_by_name(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(17);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){0, 0, 3}, -1);
    tide_test_onnx_dynamic(m, "x", 0, "batch");
    tide_test_onnx_dynamic(m, "x", 1, "seq");
    tide_test_onnx_input(m, "w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 0}, -1);
    tide_test_onnx_dynamic(m, "w", 1, "batch"); /* the batch's name, not at dimension 0 */
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_node(m, "Relu", "act2", TIDE_TEST_NAMES("w"), TIDE_TEST_NAMES("z"));
    tide_test_onnx_output(m, "y");
    tide_test_onnx_output(m, "z");

    struct tide_onnx_options o = {.batch_size = 5};
    import_fails(m, &o,
                 "graph input \"x\" has a dynamic dimension 1 (seq) that is not the batch: give "
                 "its size by name in the import options (tidectl and tide-bench: --dim seq=N)");
    struct tide_onnx_dim dims[] = {{"seq", 4}, {"heads", 2}};
    o.dims = dims, o.n_dims = 1;
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, &o, &r);
    assert_shape(b, r.inputs[0], 3, (int64_t[]){5, 4, 3});
    assert_shape(b, r.inputs[1], 2, (int64_t[]){2, 5});
    tide_onnx_result_free(&r);
    tide_builder_free(b);

    /* Without a batch size, the batch is refused as before. */
    o.batch_size = 0;
    import_fails(m, &o,
                 "graph input \"x\" has a dynamic dimension 0 (batch): tide needs static "
                 "shapes; set a batch size in the import options");
    /* A name no input has is refused, listing theirs. */
    o.batch_size = 5, o.n_dims = 2;
    import_fails(m, &o,
                 "dimension \"heads\" (size 2) is not a dynamic dimension of the model's inputs "
                 "(theirs: \"batch\", \"seq\")");
    /* dims names the batch too, before batch_size. */
    struct tide_onnx_dim both[] = {{"seq", 4}, {"batch", 7}};
    o.dims = both, o.n_dims = 2;
    b = import_ok(m, &o, &r);
    assert_shape(b, r.inputs[0], 3, (int64_t[]){7, 4, 3});
    assert_shape(b, r.inputs[1], 2, (int64_t[]){2, 7});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    /* A size out of range, and a dims entry without a name. */
    struct tide_onnx_dim bad[] = {{"seq", 0}};
    o.dims = bad, o.n_dims = 1;
    import_fails(m, &o,
                 "dimension 0 of the options (\"seq\", size 0): a size must be 1 to 2147483647");
    bad[0] = (struct tide_onnx_dim){NULL, 3};
    import_fails(m, &o, "dimension 0 of the options (\"\", size 3): it has no name");
    tide_test_onnx_free(m);

    /* A dynamic dimension without a name that is not dimension 0 cannot be sized. */
    m = tide_test_onnx_new(17);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 0}, -1);
    tide_test_onnx_dynamic(m, "x", 1, NULL);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    o = (struct tide_onnx_options){.batch_size = 5};
    import_fails(m, &o,
                 "graph input \"x\" has a dynamic dimension 1 without a name, and it is not the "
                 "batch (dimension 0): export the model with that dimension static or named");
    /* With no named dynamic dimension at all, a dims entry says so. */
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(17);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_dim seq[] = {{"seq", 4}};
    o.dims = seq, o.n_dims = 1;
    import_fails(m, &o,
                 "dimension \"seq\" (size 4) is not a dynamic dimension of the model's inputs "
                 "(they have no named dynamic dimension)");
    tide_test_onnx_free(m);
}

/* A shape computed from data cannot be folded: refused naming the node and the input. */
static void test_dynamic_shape_refused(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_input(m, "s", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Reshape", "r", TIDE_TEST_NAMES("x", "s"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node r (Reshape, opset 13): the shape (input \"s\") must be a constant "
                 "known at import");
    tide_test_onnx_free(m);

    /* A folded constant has a size limit, and a shape whose element count overflows is named. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "huge", 1, (int64_t[]){2},
                          (int64_t[]){(int64_t)1 << 20, (int64_t)1 << 20});
    tide_test_onnx_node(m, "ConstantOfShape", "big", TIDE_TEST_NAMES("huge"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node big (ConstantOfShape, opset 13): a constant of 1099511627776 "
                 "elements is more than the import folds (33554432)");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    Onnx__TensorProto *t =
        tide_test_onnx_tensor(m, "w", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){0});
    t->n_dims = 2;
    t->dims = tide_test_onnx_own(m, 2 * sizeof(int64_t));
    t->dims[0] = t->dims[1] = (int64_t)1 << 40;
    m->inits[m->graph.n_initializer++] = t;
    tide_test_onnx_output(m, "w");
    import_fails(m, NULL, "initializer \"w\": 9223372036854775807 elements are too many");
    tide_test_onnx_free(m);
}

static void test_unsupported_op_and_opset(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_node(m, "Unique", "u", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "node u (Unique, opset 13): op Unique is not supported");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(0);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "opset 0 is not supported (tide imports opsets 1 to 27)");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(28);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_output(m, "x");
    import_fails(m, NULL, "opset 28 is not supported (tide imports opsets 1 to 27)");
    tide_test_onnx_free(m);

    /* A zero stride is refused before any arithmetic divides by it (fuzz_onnx found this with
     * auto_pad SAME_UPPER), and so is a negative pad. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, (int64_t[]){1, 1, 5, 5},
                         -1);
    Onnx__NodeProto *p =
        tide_test_onnx_node(m, "AveragePool", "pool", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    Onnx__AttributeProto *k = tide_test_onnx_attr(m, p, "kernel_shape");
    k->n_ints = 2;
    k->ints = tide_test_onnx_own(m, 2 * sizeof(int64_t));
    k->ints[0] = k->ints[1] = 3;
    Onnx__AttributeProto *strides = tide_test_onnx_attr(m, p, "strides");
    strides->n_ints = 2;
    strides->ints = tide_test_onnx_own(m, 2 * sizeof(int64_t));
    strides->ints[0] = 0, strides->ints[1] = 64;
    Onnx__AttributeProto *auto_pad = tide_test_onnx_attr(m, p, "auto_pad");
    auto_pad->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    auto_pad->s.data = (uint8_t *)tide_test_onnx_own_str(m, "SAME_UPPER");
    auto_pad->s.len = strlen("SAME_UPPER");
    auto_pad->has_s = 1;
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "node pool (AveragePool, opset 13): strides[0] is 0, not in 1..2147483647");
    strides->ints[0] = 1;
    auto_pad->s.len = strlen("SAME");
    import_fails(m, NULL,
                 "node pool (AveragePool, opset 13): auto_pad is not NOTSET, VALID, SAME_UPPER "
                 "or SAME_LOWER");
    auto_pad->has_s = 0;
    Onnx__AttributeProto *pads = tide_test_onnx_attr(m, p, "pads");
    pads->n_ints = 4;
    pads->ints = tide_test_onnx_own(m, 4 * sizeof(int64_t));
    pads->ints[0] = pads->ints[2] = -1, pads->ints[1] = pads->ints[3] = 0;
    import_fails(m, NULL, "node pool (AveragePool, opset 13): pads[0] is -1, not in 0..2147483647");
    tide_test_onnx_free(m);
}

static void test_missing_input(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Add", "sum", TIDE_TEST_NAMES("x", "nothing"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node sum (Add, opset 13): input \"nothing\" is produced by no node, "
                 "initializer or graph input");
    tide_test_onnx_free(m);

    /*
     * A node that writes a value it reads, or one output twice: ONNX assigns
     * each value once. fuzz_onnx found the first as a use after free (Add's
     * folding freed its input a when its output replaced it).
     */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "a", 1, (int64_t[]){2}, (int64_t[]){1, 2});
    tide_test_onnx_init_i(m, "b", 1, (int64_t[]){2}, (int64_t[]){3, 4});
    tide_test_onnx_node(m, "Add", "sum", TIDE_TEST_NAMES("a", "b"), TIDE_TEST_NAMES("a"));
    tide_test_onnx_output(m, "a");
    import_fails(m, NULL,
                 "node sum (Add, opset 13): output 0 \"a\" is also its input 0 (ONNX assigns "
                 "each value once)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_node(m, "Split", "halves", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y", "y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node halves (Split, opset 13): outputs 0 and 1 are both \"y\" (ONNX assigns "
                 "each value once)");
    tide_test_onnx_free(m);

    /* A required input left out, or given as "" (ONNX's absent optional input). */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Add", "sum", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "node sum (Add, opset 13): input 1 is required");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Mul", "product", TIDE_TEST_NAMES("", "x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "node product (Mul, opset 13): input 0 is required");
    tide_test_onnx_free(m);

    /* A graph output that nothing produces. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    tide_test_onnx_output(m, "z");
    import_fails(m, NULL, "graph output \"z\" is produced by no node, initializer or input");
    tide_test_onnx_free(m);

    /*
     * An output tide does not compute (a training Dropout's mask), read by a node or as a graph
     * output. In inference nothing is dropped: the mask is all true.
     */
    for (int training = 1; training >= 0; training--) {
        m = tide_test_onnx_new(13);
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
        tide_test_onnx_init_f(m, "ratio", 0, NULL, (float[]){0.5f});
        tide_test_onnx_init_i(m, "mode", 0, NULL, (int64_t[]){training});
        tide_test_onnx_node(m, "Dropout", "drop", TIDE_TEST_NAMES("x", "ratio", "mode"),
                            TIDE_TEST_NAMES("y", "mask"));
        Onnx__NodeProto *use =
            tide_test_onnx_node(m, "Cast", "use", TIDE_TEST_NAMES("mask"), TIDE_TEST_NAMES("m"));
        tide_test_onnx_attr_i(m, use, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
        tide_test_onnx_output(m, "m");
        if (training) {
            import_fails(m, NULL,
                         "node use (Cast, opset 13): input \"mask\" is a Dropout mask, which "
                         "tide does not give");
            tide_test_onnx_free(m);
        } else {
            expect_values(m, (float[]){3, -2}, 2, 1, (int64_t[]){2}, (float[]){1, 1}, 2);
        }
    }
    /* A mask nothing reads (every Dropout of PyTorch's exports names one) is not made, however
     * large: [64, 1024, 1024] is more than the import folds. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3,
                         (int64_t[]){64, 1024, 1024}, -1);
    tide_test_onnx_node(m, "Dropout", "drop", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y", "mask"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder_free(import_ok(m, NULL, &r));
    tide_onnx_result_free(&r);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_init_i(m, "mode", 0, NULL, (int64_t[]){1});
    tide_test_onnx_node(m, "Dropout", "drop", TIDE_TEST_NAMES("x", "", "mode"),
                        TIDE_TEST_NAMES("y", "mask"));
    tide_test_onnx_output(m, "y");
    tide_test_onnx_output(m, "mask");
    import_fails(m, NULL, "graph output \"mask\" is a Dropout mask, which tide does not give");
    tide_test_onnx_free(m);
}

/* Graph inputs tide cannot feed: no tensor type, no shape, an element type or a rank it lacks. */
static void test_graph_inputs_refused(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", 0, -1, NULL, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "graph input \"x\" is not a tensor");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, -1);
    m->inputs[0]->type->tensor_type->shape = NULL;
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "graph input \"x\" has no shape; tide needs static shapes");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "graph input \"x\" has element type 11; tide takes float, int32, int64 and "
                 "bool");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 9,
                         (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 2}, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "graph input \"x\" has rank 9, more than tide's 8");
    tide_test_onnx_free(m);
}

/* GELU as PyTorch exports nn.GELU(): x * 0.5 * (1 + Erf(x / sqrt 2)), exact through tide's Erf. */
static void test_erf_gelu(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){5}, -1);
    Onnx__NodeProto *k =
        tide_test_onnx_node(m, "Constant", "sqrt2", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("s2"));
    tide_test_onnx_attr_t(m, k, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0,
                                                NULL, (float[]){1.41421353816986083984375f}));
    k = tide_test_onnx_node(m, "Constant", "one", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("c1"));
    tide_test_onnx_attr_t(
        m, k, "value",
        tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){1}));
    k = tide_test_onnx_node(m, "Constant", "half", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("c05"));
    tide_test_onnx_attr_t(m, k, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0,
                                                NULL, (float[]){0.5f}));
    tide_test_onnx_node(m, "Div", "div", TIDE_TEST_NAMES("x", "s2"), TIDE_TEST_NAMES("scaled"));
    tide_test_onnx_node(m, "Erf", "erf", TIDE_TEST_NAMES("scaled"), TIDE_TEST_NAMES("e"));
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("e", "c1"), TIDE_TEST_NAMES("e1"));
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "e1"), TIDE_TEST_NAMES("xe"));
    tide_test_onnx_node(m, "Mul", "mul_half", TIDE_TEST_NAMES("xe", "c05"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    float x[5] = {-3, -0.5f, 0, 1, 2.5f}, y[5];
    run_forward(b, &r, x, sizeof(x), y, 5);
    for (int i = 0; i < 5; i++) {
        double want = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
        assert_float_equal(y[i], want, 1e-6 * fabs(want) + 1e-7);
    }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* As run_forward, but fetches every output k (float32) into outs[k] of counts[k] elements. */
static void run_forward_all(tide_builder *b, const struct tide_onnx_result *r, const void *in,
                            size_t in_bytes, float **outs, const size_t *counts)
{
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    const char *fetches[8];
    for (int32_t k = 0; k < r->n_outputs; k++)
        fetches[k] = tide_builder_name(b, r->outputs[k]);
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.fetches = fetches;
    o.n_fetches = (uint32_t)r->n_outputs;
    struct tide_session *s;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &o, &s, &err) != TIDE_OK)
        fail_msg("session: %s", err.message);
    free(graph);
    assert_int_equal(tide_session_feed(s, tide_builder_name(b, r->inputs[0]), in, in_bytes, &err),
                     TIDE_OK);
    struct tide_step_stats stats;
    if (tide_session_eval(s, &stats, &err) != TIDE_OK)
        fail_msg("eval: %s", err.message);
    for (int32_t k = 0; k < r->n_outputs; k++)
        assert_int_equal(
            tide_session_fetch(s, fetches[k], outs[k], counts[k] * sizeof(float), &err), TIDE_OK);
    tide_session_free(s);
}

static double sigmoid_ref(double v)
{
    return 1.0 / (1.0 + exp(-v));
}

/*
 * A bidirectional LSTM with bias, initial state and peepholes, unrolled at import, against
 * ONNX's equations computed here in double: Y, Y_h and Y_c.
 */
static void test_lstm_bidirectional(void **state)
{
    (void)state;
    enum { S = 3, B = 2, I = 2, H = 2, D = 2 };
    float x[S * B * I], w[D * 4 * H * I], r[D * 4 * H * H], bias[D * 8 * H], h0[D * B * H],
        c0[D * B * H], p[D * 3 * H];
    float *all[] = {x, w, r, bias, h0, c0, p};
    size_t sizes[] = {S * B * I, D * 4 * H * I, D * 4 * H * H, D * 8 * H,
                      D * B * H, D * B * H,     D * 3 * H};
    uint32_t seed = 7;
    for (int a = 0; a < 7; a++)
        for (size_t k = 0; k < sizes[a]; k++) {
            seed = seed * 1103515245u + 12345u;
            all[a][k] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
        }
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){S, B, I}, -1);
    tide_test_onnx_init_f(m, "W", 3, (int64_t[]){D, 4 * H, I}, w);
    tide_test_onnx_init_f(m, "R", 3, (int64_t[]){D, 4 * H, H}, r);
    tide_test_onnx_init_f(m, "B", 2, (int64_t[]){D, 8 * H}, bias);
    tide_test_onnx_init_f(m, "h0", 3, (int64_t[]){D, B, H}, h0);
    tide_test_onnx_init_f(m, "c0", 3, (int64_t[]){D, B, H}, c0);
    tide_test_onnx_init_f(m, "P", 2, (int64_t[]){D, 3 * H}, p);
    Onnx__NodeProto *n = tide_test_onnx_node(
        m, "LSTM", "lstm", TIDE_TEST_NAMES("x", "W", "R", "B", "", "h0", "c0", "P"),
        TIDE_TEST_NAMES("Y", "Yh", "Yc"));
    tide_test_onnx_attr_i(m, n, "hidden_size", H);
    Onnx__AttributeProto *dir = tide_test_onnx_attr(m, n, "direction");
    dir->has_s = true;
    dir->s.data = (uint8_t *)tide_test_onnx_own_str(m, "bidirectional");
    dir->s.len = strlen("bidirectional");
    tide_test_onnx_output(m, "Y");
    tide_test_onnx_output(m, "Yh");
    tide_test_onnx_output(m, "Yc");
    struct tide_onnx_result res;
    tide_builder *b = import_ok(m, NULL, &res);
    assert_shape(b, res.outputs[0], 4, (int64_t[]){S, D, B, H});
    assert_shape(b, res.outputs[1], 3, (int64_t[]){D, B, H});
    float y[S * D * B * H], yh[D * B * H], yc[D * B * H];
    float *outs[] = {y, yh, yc};
    size_t counts[] = {S * D * B * H, D * B * H, D * B * H};
    run_forward_all(b, &res, x, sizeof(x), outs, counts);

    for (int d = 0; d < D; d++) {
        double hs[B][H], cs[B][H];
        for (int bb = 0; bb < B; bb++)
            for (int j = 0; j < H; j++)
                hs[bb][j] = h0[(d * B + bb) * H + j], cs[bb][j] = c0[(d * B + bb) * H + j];
        for (int step = 0; step < S; step++) {
            int t = d == 1 ? S - 1 - step : step;
            double nh[B][H], nc[B][H];
            for (int bb = 0; bb < B; bb++) {
                for (int j = 0; j < H; j++) {
                    double g[4];
                    for (int q = 0; q < 4; q++) {
                        int row = q * H + j;
                        double v = bias[d * 8 * H + row] + bias[d * 8 * H + 4 * H + row];
                        for (int k = 0; k < I; k++)
                            v += x[(t * B + bb) * I + k] * w[(d * 4 * H + row) * I + k];
                        for (int k = 0; k < H; k++)
                            v += hs[bb][k] * r[(d * 4 * H + row) * H + k];
                        g[q] = v;
                    }
                    double it = sigmoid_ref(g[0] + p[d * 3 * H + j] * cs[bb][j]);
                    double ft = sigmoid_ref(g[2] + p[d * 3 * H + 2 * H + j] * cs[bb][j]);
                    double ct = ft * cs[bb][j] + it * tanh(g[3]);
                    double ot = sigmoid_ref(g[1] + p[d * 3 * H + H + j] * ct);
                    nc[bb][j] = ct;
                    nh[bb][j] = ot * tanh(ct);
                }
            }
            for (int bb = 0; bb < B; bb++)
                for (int j = 0; j < H; j++) {
                    hs[bb][j] = nh[bb][j], cs[bb][j] = nc[bb][j];
                    assert_float_equal(y[((t * D + d) * B + bb) * H + j], hs[bb][j], 1e-5);
                }
        }
        for (int bb = 0; bb < B; bb++)
            for (int j = 0; j < H; j++) {
                assert_float_equal(yh[(d * B + bb) * H + j], hs[bb][j], 1e-5);
                assert_float_equal(yc[(d * B + bb) * H + j], cs[bb][j], 1e-5);
            }
    }
    tide_onnx_result_free(&res);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* A GRU with bias and initial state, linear_before_reset 0 and 1, against ONNX's equations. */
static void test_gru(void **state)
{
    (void)state;
    enum { S = 3, B = 2, I = 3, H = 2 };
    for (int lbr = 0; lbr < 2; lbr++) {
        float x[S * B * I], w[3 * H * I], r[3 * H * H], bias[6 * H], h0[B * H];
        float *all[] = {x, w, r, bias, h0};
        size_t sizes[] = {S * B * I, 3 * H * I, 3 * H * H, 6 * H, B * H};
        uint32_t seed = 11 + (uint32_t)lbr;
        for (int a = 0; a < 5; a++)
            for (size_t k = 0; k < sizes[a]; k++) {
                seed = seed * 1103515245u + 12345u;
                all[a][k] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
            }
        struct tide_test_onnx *m = tide_test_onnx_new(14);
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){S, B, I},
                             -1);
        tide_test_onnx_init_f(m, "W", 3, (int64_t[]){1, 3 * H, I}, w);
        tide_test_onnx_init_f(m, "R", 3, (int64_t[]){1, 3 * H, H}, r);
        tide_test_onnx_init_f(m, "B", 2, (int64_t[]){1, 6 * H}, bias);
        tide_test_onnx_init_f(m, "h0", 3, (int64_t[]){1, B, H}, h0);
        Onnx__NodeProto *n =
            tide_test_onnx_node(m, "GRU", "gru", TIDE_TEST_NAMES("x", "W", "R", "B", "", "h0"),
                                TIDE_TEST_NAMES("Y", "Yh"));
        tide_test_onnx_attr_i(m, n, "hidden_size", H);
        tide_test_onnx_attr_i(m, n, "linear_before_reset", lbr);
        tide_test_onnx_output(m, "Y");
        tide_test_onnx_output(m, "Yh");
        struct tide_onnx_result res;
        tide_builder *b = import_ok(m, NULL, &res);
        float y[S * B * H], yh[B * H];
        float *outs[] = {y, yh};
        size_t counts[] = {S * B * H, B * H};
        run_forward_all(b, &res, x, sizeof(x), outs, counts);
        double hs[B][H];
        for (int bb = 0; bb < B; bb++)
            for (int j = 0; j < H; j++)
                hs[bb][j] = h0[bb * H + j];
        for (int t = 0; t < S; t++) {
            double nh[B][H];
            for (int bb = 0; bb < B; bb++) {
                double xw[3][H], hr[3][H];
                for (int q = 0; q < 3; q++)
                    for (int j = 0; j < H; j++) {
                        xw[q][j] = bias[q * H + j];
                        hr[q][j] = bias[3 * H + q * H + j];
                        for (int k = 0; k < I; k++)
                            xw[q][j] += x[(t * B + bb) * I + k] * w[(q * H + j) * I + k];
                        for (int k = 0; k < H; k++)
                            hr[q][j] += hs[bb][k] * r[(q * H + j) * H + k];
                    }
                for (int j = 0; j < H; j++) {
                    double z = sigmoid_ref(xw[0][j] + hr[0][j]);
                    double rt = sigmoid_ref(xw[1][j] + hr[1][j]);
                    double cand;
                    if (lbr) {
                        cand = tanh(xw[2][j] + rt * hr[2][j]);
                    } else {
                        double v = xw[2][j] + bias[3 * H + 2 * H + j];
                        for (int k = 0; k < H; k++) {
                            double reset_h = sigmoid_ref(xw[1][k] + hr[1][k]) * hs[bb][k];
                            v += reset_h * r[(2 * H + j) * H + k];
                        }
                        cand = tanh(v);
                    }
                    nh[bb][j] = (1 - z) * cand + z * hs[bb][j];
                }
            }
            for (int bb = 0; bb < B; bb++)
                for (int j = 0; j < H; j++) {
                    hs[bb][j] = nh[bb][j];
                    assert_float_equal(y[(t * B + bb) * H + j], hs[bb][j], 1e-5);
                }
        }
        for (int bb = 0; bb < B; bb++)
            for (int j = 0; j < H; j++)
                assert_float_equal(yh[bb * H + j], hs[bb][j], 1e-5);
        tide_onnx_result_free(&res);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
}

static Onnx__NodeProto *one_node(struct tide_test_onnx *m, const char *op, int32_t r,
                                 const int64_t *d, const char *const *ins);

/* ReduceMax, ReduceMin and ArgMax through TopK: ties give the first index, as NumPy's; with
 * select_last_index 1, the last (row 0's two 3s: index 1, then 2). */
static void test_reduce_max_and_arg_max(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "ReduceMax", "max", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("mx"));
    Onnx__AttributeProto *axes = tide_test_onnx_attr(m, n, "axes");
    axes->n_ints = 1;
    axes->ints = tide_test_onnx_own(m, sizeof(int64_t));
    axes->ints[0] = 1;
    tide_test_onnx_attr_i(m, n, "keepdims", 0);
    n = tide_test_onnx_node(m, "ArgMax", "argmax", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("am"));
    tide_test_onnx_attr_i(m, n, "axis", 1);
    tide_test_onnx_node(m, "ReduceMin", "min", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("mn"));
    n = tide_test_onnx_node(m, "ArgMax", "argmax_last", TIDE_TEST_NAMES("x"),
                            TIDE_TEST_NAMES("aml"));
    tide_test_onnx_attr_i(m, n, "axis", -1);
    tide_test_onnx_attr_i(m, n, "keepdims", 0);
    tide_test_onnx_attr_i(m, n, "select_last_index", 1);
    n = tide_test_onnx_node(m, "ArgMin", "argmin_last", TIDE_TEST_NAMES("x"),
                            TIDE_TEST_NAMES("anl"));
    tide_test_onnx_attr_i(m, n, "axis", 0);
    tide_test_onnx_attr_i(m, n, "select_last_index", 1);
    tide_test_onnx_output(m, "mx");
    tide_test_onnx_output(m, "am");
    tide_test_onnx_output(m, "mn");
    tide_test_onnx_output(m, "aml");
    tide_test_onnx_output(m, "anl");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 1, (int64_t[]){2});
    assert_shape(b, r.outputs[1], 2, (int64_t[]){2, 1});
    assert_int_equal(tide_builder_dtype(b, r.outputs[1]), TIDE_DT_INT32);
    assert_shape(b, r.outputs[2], 2, (int64_t[]){1, 1});
    assert_shape(b, r.outputs[3], 1, (int64_t[]){2});
    assert_shape(b, r.outputs[4], 2, (int64_t[]){1, 3});
    assert_int_equal(tide_builder_dtype(b, r.outputs[4]), TIDE_DT_INT32);
    float x[6] = {1, 3, 3, -1, -5, -2}, mx[2], mn[1];
    int32_t am[2], aml[2], anl[3];
    float *outs[] = {mx, (float *)am, mn, (float *)aml, (float *)anl};
    size_t counts[] = {2, 2, 1, 2, 3};
    run_forward_all(b, &r, x, sizeof(x), outs, counts);
    assert_int_equal(aml[0], 2);
    assert_int_equal(aml[1], 0);
    assert_int_equal(anl[0], 1);
    assert_int_equal(anl[1], 1);
    assert_int_equal(anl[2], 1);
    assert_float_equal(mx[0], 3, 0);
    assert_float_equal(mx[1], -1, 0);
    assert_int_equal(am[0], 1);
    assert_int_equal(am[1], 0);
    assert_float_equal(mn[0], -5, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    n = one_node(m, "ArgMax", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "select_last_index", 2);
    import_fails(m, NULL, "node n (ArgMax, opset 13): select_last_index is 2, wants 0 or 1");
    tide_test_onnx_free(m);
}

/* ============================================================================
 * Opsets before 11: each op's version is the newest at or below the opset
 * ========================================================================== */

/* A model of one node op over x (float, rank r, dims d) and y: the node is returned. */
static Onnx__NodeProto *one_node(struct tide_test_onnx *m, const char *op, int32_t r,
                                 const int64_t *d, const char *const *ins)
{
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, r, d, -1);
    Onnx__NodeProto *n = tide_test_onnx_node(m, op, "n", ins, TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    return n;
}

/* Add-6 with broadcast 1 lines B up with A at axis; B's dims are A's there. */
static void test_legacy_broadcast(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, (float[]){10, 20, 30});
    Onnx__NodeProto *n = one_node(m, "Add", 3, (int64_t[]){2, 3, 2}, TIDE_TEST_NAMES("x", "b"));
    tide_test_onnx_attr_i(m, n, "broadcast", 1);
    tide_test_onnx_attr_i(m, n, "axis", 1);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_int_equal(r.opset, 6);
    assert_shape(b, r.outputs[0], 3, (int64_t[]){2, 3, 2});
    float x[12], y[12];
    for (int k = 0; k < 12; k++)
        x[k] = (float)k;
    run_forward(b, &r, x, sizeof(x), y, 12);
    for (int k = 0; k < 12; k++)
        assert_float_equal(y[k], (float)k + 10.0f * (float)(k / 2 % 3 + 1), 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Without axis, B is A's trailing dims, as NumPy has it. */
    m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, (float[]){1, 2});
    n = one_node(m, "Mul", 3, (int64_t[]){2, 3, 2}, TIDE_TEST_NAMES("x", "b"));
    tide_test_onnx_attr_i(m, n, "broadcast", 1);
    b = import_ok(m, NULL, &r);
    run_forward(b, &r, x, sizeof(x), y, 12);
    for (int k = 0; k < 12; k++)
        assert_float_equal(y[k], (float)k * (float)(k % 2 + 1), 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* broadcast 0 wants one shape; B must fit A at axis. */
    m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, NULL);
    one_node(m, "Add", 3, (int64_t[]){2, 3, 2}, TIDE_TEST_NAMES("x", "b"));
    import_fails(m, NULL,
                 "node n (Add, opset 6): input shapes [2, 3, 2] and [3] differ and broadcast is 0");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, NULL);
    n = one_node(m, "Sub", 3, (int64_t[]){2, 3, 2}, TIDE_TEST_NAMES("x", "b"));
    tide_test_onnx_attr_i(m, n, "broadcast", 1);
    tide_test_onnx_attr_i(m, n, "axis", 2);
    import_fails(m, NULL,
                 "node n (Sub, opset 6): B's shape [3] does not match A's [2, 3, 2] at axis 2");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "b", 2, (int64_t[]){3, 2}, NULL);
    n = one_node(m, "Div", 3, (int64_t[]){2, 3, 2}, TIDE_TEST_NAMES("x", "b"));
    tide_test_onnx_attr_i(m, n, "broadcast", 1);
    tide_test_onnx_attr_i(m, n, "axis", 2);
    import_fails(m, NULL,
                 "node n (Div, opset 6): B's shape [3, 2] does not fit A's [2, 3, 2] at axis 2");
    tide_test_onnx_free(m);

    /* From version 7 on, NumPy broadcasting: the same B of [3] against [2, 3, 2] is refused by
     * tide's shape inference, and [2] is broadcast without any attribute. */
    m = tide_test_onnx_new(7);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, (float[]){1, 2});
    one_node(m, "Mul", 3, (int64_t[]){2, 3, 2}, TIDE_TEST_NAMES("x", "b"));
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 3, (int64_t[]){2, 3, 2});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Max, Min, Sum and Mean before version 8 take one shape. */
    m = tide_test_onnx_new(7);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, NULL);
    one_node(m, "Max", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "b"));
    import_fails(m, NULL,
                 "node n (Max, opset 7): inputs 0 and 1 have shapes [2, 3] and [3] (before "
                 "version 8 they must be the same)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(8);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, NULL);
    one_node(m, "Mean", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "b", "x"));
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 3});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* Versions tide does not import, and ops the opset does not have yet. */
static void test_op_versions(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(5);
    Onnx__NodeProto *n = one_node(m, "Cast", 1, (int64_t[]){2}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    import_fails(m, NULL, "node n (Cast, opset 5): Cast-1 is not supported (tide imports Cast-6 "
                          "and later)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(6);
    n = one_node(m, "Cast", 1, (int64_t[]){2}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(8);
    one_node(m, "Erf", 1, (int64_t[]){2}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL, "node n (Erf, opset 8): Erf does not exist in opset 8 (ONNX added it in "
                          "opset 9)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(6);
    one_node(m, "LSTM", 3, (int64_t[]){1, 1, 1}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL, "node n (LSTM, opset 6): LSTM-1 is not supported (tide imports LSTM-7 "
                          "and later)");
    tide_test_onnx_free(m);
}

/* Attributes that later versions made inputs, and their defaults. */
static void test_legacy_attributes(void **state)
{
    (void)state;
    float x[6] = {1, -4, 3, 0.5f, 2, -1}, y[6];
    struct tide_onnx_result r;

    /* TopK-1: k is an attribute. */
    struct tide_test_onnx *m = tide_test_onnx_new(9);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "TopK", "n", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y", "i"));
    tide_test_onnx_output(m, "y");
    tide_test_onnx_attr_i(m, n, "k", 2);
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 2});
    run_forward(b, &r, x, sizeof(x), y, 4);
    assert_float_equal(y[0], 3, 0);
    assert_float_equal(y[1], 1, 0);
    assert_float_equal(y[2], 2, 0);
    assert_float_equal(y[3], 0.5f, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(9);
    one_node(m, "TopK", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL, "node n (TopK, opset 9): attribute k is required");
    tide_test_onnx_free(m);

    /* Slice-1: starts, ends and axes are attributes. */
    m = tide_test_onnx_new(9);
    n = one_node(m, "Slice", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "starts", 1, (int64_t[]){1});
    tide_test_onnx_attr_ints(m, n, "ends", 1, (int64_t[]){-1});
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){1});
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 1});
    run_forward(b, &r, x, sizeof(x), y, 2);
    assert_float_equal(y[0], -4, 0);
    assert_float_equal(y[1], 2, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(9);
    n = one_node(m, "Slice", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "ends", 1, (int64_t[]){1});
    import_fails(m, NULL, "node n (Slice, opset 9): attribute starts is required");
    tide_test_onnx_free(m);

    /* Clip-6: min and max are attributes. */
    m = tide_test_onnx_new(6);
    n = one_node(m, "Clip", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_f(m, n, "min", -1.5f);
    tide_test_onnx_attr_f(m, n, "max", 2.5f);
    b = import_ok(m, NULL, &r);
    run_forward(b, &r, x, sizeof(x), y, 6);
    float clipped[6] = {1, -1.5f, 2.5f, 0.5f, 2, -1};
    for (int k = 0; k < 6; k++)
        assert_float_equal(y[k], clipped[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Reshape-1: the shape is an attribute. Concat-1: axis defaults to 1 (Concat-4 wants it). */
    m = tide_test_onnx_new(3);
    n = one_node(m, "Reshape", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "shape", 2, (int64_t[]){3, -1});
    n->output[0] = tide_test_onnx_own_str(m, "r");
    tide_test_onnx_node(m, "Concat", "cat", TIDE_TEST_NAMES("r", "r"), TIDE_TEST_NAMES("y"));
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){3, 4});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    m->opset.version = 4;
    import_fails(m, NULL, "node cat (Concat, opset 4): attribute axis is required");
    tide_test_onnx_free(m);
}

/* BatchNormalization-6 trains unless is_test; Dropout-6 drops unless is_test; Gemm-6's C. */
static void test_legacy_modes(void **state)
{
    (void)state;
    struct tide_onnx_result r;
    const char *bn_ins[] = {"x", "g", "b", "mean", "var", NULL};
    for (int is_test = 0; is_test <= 1; is_test++) {
        struct tide_test_onnx *m = tide_test_onnx_new(6);
        tide_test_onnx_init_f(m, "g", 1, (int64_t[]){2}, (float[]){1, 1});
        tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, (float[]){0, 0});
        tide_test_onnx_init_f(m, "mean", 1, (int64_t[]){2}, (float[]){1, 2});
        tide_test_onnx_init_f(m, "var", 1, (int64_t[]){2}, (float[]){3.75f, 0});
        Onnx__NodeProto *n = one_node(m, "BatchNormalization", 4, (int64_t[]){2, 2, 1, 1}, bn_ins);
        tide_test_onnx_attr_i(m, n, "is_test", is_test);
        tide_test_onnx_attr_f(m, n, "epsilon", 0.25f);
        tide_test_onnx_attr_f(m, n, "momentum", 0.5f); /* no part of either mode's output */
        tide_builder *b = import_ok(m, NULL, &r);
        assert_int_equal(r.inference_batch_norms, is_test); /* counted for tools to note */
        float x[4] = {1, 5, 3, -1}, y[4];
        run_forward(b, &r, x, sizeof(x), y, 4);
        if (is_test) {
            /* The running statistics: (x - mean) / sqrt(var + 0.25), sqrt 2 and 0.5. */
            assert_float_equal(y[0], 0, 0);
            assert_float_equal(y[1], 6, 0);
            assert_float_equal(y[2], 1, 0);
            assert_float_equal(y[3], -6, 0);
        } else {
            /* Each channel's two values normalised by the batch (variance 1 and 9, epsilon
             * 0.25). */
            assert_float_equal(y[0], -1 / sqrt(1.25), 1e-6);
            assert_float_equal(y[2], 1 / sqrt(1.25), 1e-6);
            assert_float_equal(y[1], 3 / sqrt(9.25), 1e-6);
            assert_float_equal(y[3], -3 / sqrt(9.25), 1e-6);
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
    struct tide_test_onnx *m = tide_test_onnx_new(7);
    tide_test_onnx_init_f(m, "g", 1, (int64_t[]){2}, NULL);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, NULL);
    tide_test_onnx_init_f(m, "mean", 1, (int64_t[]){2}, NULL);
    tide_test_onnx_init_f(m, "var", 1, (int64_t[]){2}, NULL);
    Onnx__NodeProto *n = one_node(m, "BatchNormalization", 4, (int64_t[]){2, 2, 1, 1}, bn_ins);
    tide_test_onnx_attr_i(m, n, "spatial", 0);
    import_fails(m, NULL,
                 "node n (BatchNormalization, opset 7): spatial 0 (statistics per element, not "
                 "per channel) is not supported");
    tide_test_onnx_free(m);

    for (int is_test = 0; is_test <= 1; is_test++) {
        m = tide_test_onnx_new(6);
        n = one_node(m, "Dropout", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
        tide_test_onnx_attr_f(m, n, "ratio", 0.25f);
        tide_test_onnx_attr_i(m, n, "is_test", is_test);
        tide_builder *b = import_ok(m, NULL, &r);
        tide_ref drop = tide_builder_find(b, "onnx/dropout_0");
        if (is_test)
            assert_null(tide_builder_op(b, drop));
        else
            assert_string_equal(tide_builder_op(b, drop), "Dropout");
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }

    /* Gemm-6: C of another shape than the product's wants broadcast 1. */
    for (int broadcast = 0; broadcast <= 1; broadcast++) {
        m = tide_test_onnx_new(6);
        tide_test_onnx_init_f(m, "w", 2, (int64_t[]){3, 2}, NULL);
        tide_test_onnx_init_f(m, "c", 1, (int64_t[]){2}, NULL);
        n = one_node(m, "Gemm", 2, (int64_t[]){4, 3}, TIDE_TEST_NAMES("x", "w", "c"));
        tide_test_onnx_attr_i(m, n, "broadcast", broadcast);
        if (broadcast) {
            tide_builder *b = import_ok(m, NULL, &r);
            assert_shape(b, r.outputs[0], 2, (int64_t[]){4, 2});
            tide_onnx_result_free(&r);
            tide_builder_free(b);
        } else {
            import_fails(m, NULL,
                         "node n (Gemm, opset 6): C has shape [2], not the product's [4, 2], and "
                         "broadcast is 0");
        }
        tide_test_onnx_free(m);
    }

    /* PRelu-6: a slope per channel of x (axis 1), or one. */
    m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "s", 1, (int64_t[]){4}, NULL);
    one_node(m, "PRelu", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "s"));
    import_fails(m, NULL,
                 "node n (PRelu, opset 6): slope of shape [4] is neither one value nor one per "
                 "channel of x's [2, 3]");
    tide_test_onnx_free(m);
}

/* Imports m (input x, output y), adds loss = mean(y^2), runs one SGD step of 0.1 on x and then
 * y forward on x again with the stepped weights (count floats). */
static void bn_step_then_forward(struct tide_test_onnx *m, const float *x, size_t x_bytes,
                                 float *out, size_t count)
{
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    tide_ref loss = tide_builder_reduce_mean(
        b, "loss", tide_builder_mul(b, NULL, r.outputs[0], r.outputs[0]), NULL, 0, false);
    assert_true(loss.id >= 0);
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    const char *fetch = tide_builder_name(b, r.outputs[0]);
    const char *input = tide_builder_name(b, r.inputs[0]);
    struct tide_train_options train = {
        .loss = "loss", .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.1f};
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.train = &train;
    o.fetches = &fetch;
    o.n_fetches = 1;
    struct tide_session *sess;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &o, &sess, &err) != TIDE_OK)
        fail_msg("training session: %s", err.message);
    free(graph);
    struct tide_step_stats stats;
    assert_int_equal(tide_session_feed(sess, input, x, x_bytes, &err), TIDE_OK);
    if (tide_session_step(sess, &stats, &err) != TIDE_OK)
        fail_msg("step: %s", err.message);
    assert_int_equal(tide_session_feed(sess, input, x, x_bytes, &err), TIDE_OK);
    if (tide_session_eval(sess, &stats, &err) != TIDE_OK)
        fail_msg("eval: %s", err.message);
    assert_int_equal(tide_session_fetch(sess, fetch, out, count * sizeof(float), &err), TIDE_OK);
    tide_session_free(sess);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
}

/* Y of inference-mode BatchNormalization at x[i] of channel ch, in double from the floats. */
/*
 * One inference-mode BatchNormalization of x (shape dims, 3 channels at dim 1, 12 values) at
 * opset over fixed statistics, run forward: y = (x - mean) / sqrt(var + epsilon) * s + bias per
 * channel; epsilon < 0 leaves the attribute out (ONNX's 1e-5).
 */
static void check_bn_inference(int64_t opset, int32_t rank, const int64_t *dims, float epsilon)
{
    static const float s[3] = {1.5f, -0.75f, 2}, bias[3] = {0.1f, -2, 0.5f};
    static const float mean[3] = {0.3f, -1.2f, 4}, var[3] = {0.8f, 2.5f, 0.05f};
    static const float x[12] = {1, -2, 0.5f, 3, 4.25f, -0.5f, 2, 0, -3, 1.75f, 5, 3.5f};
    struct tide_test_onnx *m = tide_test_onnx_new(opset);
    tide_test_onnx_init_f(m, "s", 1, (int64_t[]){3}, s);
    tide_test_onnx_init_f(m, "bias", 1, (int64_t[]){3}, bias);
    tide_test_onnx_init_f(m, "mean", 1, (int64_t[]){3}, mean);
    tide_test_onnx_init_f(m, "var", 1, (int64_t[]){3}, var);
    Onnx__NodeProto *n = one_node(m, "BatchNormalization", rank, dims,
                                  TIDE_TEST_NAMES("x", "s", "bias", "mean", "var"));
    if (epsilon >= 0)
        tide_test_onnx_attr_f(m, n, "epsilon", epsilon);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], rank, dims);
    float y[12];
    run_forward(b, &r, x, sizeof(x), y, 12);
    int64_t inner = 1; /* the elements of one channel of one example */
    for (int32_t a = 2; a < rank; a++)
        inner *= dims[a];
    double eps = epsilon >= 0 ? epsilon : 1e-5f;
    for (int k = 0; k < 12; k++) {
        int ch = (int)(k / inner % 3);
        assert_float_equal(
            y[k], ((double)x[k] - mean[ch]) / sqrt((double)var[ch] + eps) * s[ch] + bias[ch], 1e-5);
    }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * Inference-mode BatchNormalization (training_mode 0, or no statistics out before 14): the
 * frozen statistics per channel, at rank 4 and rank 2 (BatchNorm1d after a Linear); trained as
 * PyTorch trains a model in eval mode (scale, B and what feeds X move, the statistics are
 * constants, and written back unchanged); the shapes refused.
 */
static void test_batch_norm_inference(void **state)
{
    (void)state;
    /* Rank 4, [2, 3, 2, 1], opset 15; rank 2, [4, 3], opset 9 (one output: inference). */
    check_bn_inference(15, 4, (int64_t[]){2, 3, 2, 1}, 0.01f);
    check_bn_inference(9, 2, (int64_t[]){4, 3}, -1);
    struct tide_onnx_result r;

    /*
     * x [2, 2] -> MatMul W -> BatchNormalization (epsilon 0.25) -> y, loss mean(y^2), one SGD
     * step of 0.1. An Identity reads "mean" before the BatchNormalization does: the statistics
     * are constants whichever node reads them first. By hand, with sqrt(var + 0.25) = 2, 0.5:
     *   h = x W = [2.5 3; 0 2], z = (h - mean) / sd = [0.75 1; -0.5 -1],
     *   y = z s + B = [1.75 0.5; -0.75 1.5], dL/dy = y / 2 = [0.875 0.25; -0.375 0.75];
     *   dB = [0.5 1], ds = sum dy z = [0.84375 -0.5],
     *   dh = dy s / sd = [0.875 -0.25; -0.375 -0.75], dW = x^T dh = [1.25 0.5; 1.5625 -0.875].
     */
    const float w0[4] = {0.5f, -1, 1, 2}, s0[2] = {2, -0.5f}, b0[2] = {0.25f, 1};
    const float mean0[2] = {1, 2.5f}, var0[2] = {3.75f, 0};
    const float xs[4] = {1, 2, -1, 0.5f};
    struct tide_test_onnx *m = tide_test_onnx_new(15);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 2}, -1);
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){2, 2}, w0);
    tide_test_onnx_init_f(m, "s", 1, (int64_t[]){2}, s0);
    tide_test_onnx_init_f(m, "B", 1, (int64_t[]){2}, b0);
    tide_test_onnx_init_f(m, "mean", 1, (int64_t[]){2}, mean0);
    tide_test_onnx_init_f(m, "var", 1, (int64_t[]){2}, var0);
    tide_test_onnx_node(m, "Identity", "peek", TIDE_TEST_NAMES("mean"), TIDE_TEST_NAMES("seen"));
    tide_test_onnx_node(m, "MatMul", "fc", TIDE_TEST_NAMES("x", "W"), TIDE_TEST_NAMES("h"));
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "BatchNormalization", "bn",
                            TIDE_TEST_NAMES("h", "s", "B", "mean", "var"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_f(m, n, "epsilon", 0.25f);
    tide_test_onnx_output(m, "y");
    tide_builder *b = import_ok(m, NULL, &r);
    assert_string_equal(tide_builder_op(b, tide_builder_find(b, "mean")), "Const");
    assert_string_equal(tide_builder_op(b, tide_builder_find(b, "var")), "Const");
    assert_string_equal(tide_builder_op(b, tide_builder_find(b, "s")), "Variable");
    assert_int_equal(r.n_variables, 3);
    assert_int_equal(tide_builder_parameter_count(b), 8);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    const struct {
        const char *name;
        float want[4];
        size_t count;
    } after[] = {
        {"W", {0.5f - 0.125f, -1 - 0.05f, 1 - 0.15625f, 2 + 0.0875f}, 4},
        {"s", {2 - 0.084375f, -0.5f + 0.05f}, 2},
        {"B", {0.25f - 0.05f, 1 - 0.1f}, 2},
    };
    for (size_t k = 0; k < sizeof(after) / sizeof(after[0]); k++) {
        float got[4];
        train_one_step(m, xs, sizeof(xs), after[k].name, got, after[k].count);
        for (size_t i = 0; i < after[k].count; i++)
            if (fabsf(got[i] - after[k].want[i]) > 1e-6f)
                fail_msg("%s[%zu] is %.9g after the step, want %.9g", after[k].name, i, got[i],
                         after[k].want[i]);
    }
    /* y after the step: the moved W, s and B over the statistics as they were. */
    float y_after[4];
    bn_step_then_forward(m, xs, sizeof(xs), y_after, 4);
    for (int i = 0; i < 2; i++) {
        for (int ch = 0; ch < 2; ch++) {
            double h = (double)xs[2 * i] * after[0].want[ch] +
                       (double)xs[2 * i + 1] * after[0].want[2 + ch];
            double want = (h - mean0[ch]) / sqrt((double)var0[ch] + 0.25) * after[1].want[ch] +
                          after[2].want[ch];
            assert_float_equal(y_after[2 * i + ch], want, 1e-5);
        }
    }

    /* Written back: the three Variables replaced, the statistics byte for byte as they were. */
    const float w1[4] = {9, 8, 7, 6};
    struct tide_tensor values[3] = {
        {.name = "W", .dtype = TIDE_DT_FLOAT32, .rank = 2, .dims = {2, 2}, .data = w1, 16},
        {.name = "s", .dtype = TIDE_DT_FLOAT32, .rank = 1, .dims = {2}, .data = w1, 8},
        {.name = "B", .dtype = TIDE_DT_FLOAT32, .rank = 1, .dims = {2}, .data = w1, 8},
    };
    size_t len, out_len, replaced;
    uint8_t *bytes = tide_test_onnx_pack(m, &len), *out;
    char err[256];
    if (tide_onnx_with_values(bytes, len, NULL, 0, values, 3, &out, &out_len, &replaced, err,
                              sizeof(err)) != 0)
        fail_msg("with values: %s", err);
    assert_int_equal(replaced, 3);
    Onnx__ModelProto *back = onnx__model_proto__unpack(NULL, out_len, out);
    assert_non_null(back);
    assert_int_equal(back->graph->n_initializer, m->graph.n_initializer);
    for (size_t k = 0; k < back->graph->n_initializer; k++) {
        const Onnx__TensorProto *was = m->graph.initializer[k], *now = back->graph->initializer[k];
        assert_string_equal(now->name, was->name);
        uint8_t pw[64], pn[64];
        assert_true(onnx__tensor_proto__get_packed_size(was) <= sizeof(pw));
        assert_true(onnx__tensor_proto__get_packed_size(now) <= sizeof(pn));
        size_t lw = onnx__tensor_proto__pack(was, pw), ln = onnx__tensor_proto__pack(now, pn);
        bool statistic = strcmp(was->name, "mean") == 0 || strcmp(was->name, "var") == 0;
        assert_int_equal(lw == ln && memcmp(pw, pn, lw) == 0, statistic);
    }
    onnx__model_proto__free_unpacked(back, NULL);
    free(out);
    free(bytes);
    tide_test_onnx_free(m);

    /* Each of scale, B, mean and var must hold X's C values, and X have N and C. */
    const char *const role[4] = {"scale", "B", "mean", "var"};
    const char *const names[4] = {"s", "bias", "mean", "var"};
    for (int k = 0; k < 4; k++) {
        m = tide_test_onnx_new(15);
        for (int i = 0; i < 4; i++)
            tide_test_onnx_init_f(m, names[i], i == k ? 2 : 1,
                                  i == k ? (int64_t[]){1, 3} : (int64_t[]){3}, NULL);
        one_node(m, "BatchNormalization", 4, (int64_t[]){2, 3, 2, 1},
                 TIDE_TEST_NAMES("x", "s", "bias", "mean", "var"));
        char want[256];
        snprintf(want, sizeof(want),
                 "node n (BatchNormalization, opset 15): %s \"%s\" has shape [1, 3], want [3]: "
                 "one value per channel (dim 1 of X's [2, 3, 2, 1])",
                 role[k], names[k]);
        import_fails(m, NULL, want);
        tide_test_onnx_free(m);
    }
    m = tide_test_onnx_new(14);
    tide_test_onnx_init_f(m, "s", 1, (int64_t[]){3}, NULL);
    tide_test_onnx_init_f(m, "bias", 1, (int64_t[]){3}, NULL);
    tide_test_onnx_init_f(m, "mean", 1, (int64_t[]){4}, NULL);
    tide_test_onnx_init_f(m, "var", 1, (int64_t[]){3}, NULL);
    one_node(m, "BatchNormalization", 3, (int64_t[]){2, 3, 5},
             TIDE_TEST_NAMES("x", "s", "bias", "mean", "var"));
    import_fails(m, NULL,
                 "node n (BatchNormalization, opset 14): mean \"mean\" has shape [4], want [3]: "
                 "one value per channel (dim 1 of X's [2, 3, 5])");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(15);
    for (int i = 0; i < 4; i++)
        tide_test_onnx_init_f(m, names[i], 1, (int64_t[]){3}, NULL);
    one_node(m, "BatchNormalization", 1, (int64_t[]){3},
             TIDE_TEST_NAMES("x", "s", "bias", "mean", "var"));
    import_fails(m, NULL,
                 "node n (BatchNormalization, opset 15): X has rank 1, wants N, C and any "
                 "further axes");
    tide_test_onnx_free(m);
}

/*
 * Training-mode BatchNormalization at ranks 3 (BatchNorm1d over a sequence, [N, C, L]) and 5
 * (BatchNorm3d): each channel normalised by the batch's mean and biased variance over N and
 * every further axis, as at ranks 2 and 4; tide's BatchNorm takes those, the import reshapes.
 */
static void test_batch_norm_training_ranks(void **state)
{
    (void)state;
    static const float s[3] = {1.5f, -0.75f, 2}, bias[3] = {0.1f, -2, 0.5f};
    static const float x[12] = {1, -2, 0.5f, 3, 4.25f, -0.5f, 2, 0, -3, 1.75f, 5, 3.5f};
    static const int64_t shapes[2][5] = {{2, 3, 2}, {2, 3, 1, 2, 1}};
    for (int k = 0; k < 2; k++) {
        int32_t rank = k == 0 ? 3 : 5;
        const int64_t *dims = shapes[k];
        struct tide_test_onnx *m = tide_test_onnx_new(15);
        tide_test_onnx_init_f(m, "s", 1, (int64_t[]){3}, s);
        tide_test_onnx_init_f(m, "bias", 1, (int64_t[]){3}, bias);
        tide_test_onnx_init_f(m, "mean", 1, (int64_t[]){3}, NULL);
        tide_test_onnx_init_f(m, "var", 1, (int64_t[]){3}, NULL);
        Onnx__NodeProto *n = one_node(m, "BatchNormalization", rank, dims,
                                      TIDE_TEST_NAMES("x", "s", "bias", "mean", "var"));
        tide_test_onnx_attr_i(m, n, "training_mode", 1);
        tide_test_onnx_attr_f(m, n, "epsilon", 0.01f);
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_int_equal(r.inference_batch_norms, 0);
        assert_shape(b, r.outputs[0], rank, dims);
        float y[12];
        run_forward(b, &r, x, sizeof(x), y, 12);
        /* Channel ch holds x[n * 6 + ch * 2 + j] for n, j in {0, 1}. */
        for (int ch = 0; ch < 3; ch++) {
            double mean = 0, var = 0;
            for (int i = 0; i < 4; i++)
                mean += x[(i / 2) * 6 + ch * 2 + i % 2] / 4.0;
            for (int i = 0; i < 4; i++) {
                double d = x[(i / 2) * 6 + ch * 2 + i % 2] - mean;
                var += d * d / 4;
            }
            for (int i = 0; i < 4; i++) {
                int at = (i / 2) * 6 + ch * 2 + i % 2;
                assert_float_equal(y[at], (x[at] - mean) / sqrt(var + 0.01) * s[ch] + bias[ch],
                                   1e-5);
            }
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
}

/* A node of the graph, or of a function's body, that calls function lib.fn. */
static Onnx__NodeProto *call_node(struct tide_test_onnx *m, const char *fn, const char *name,
                                  const char *const *ins, const char *const *outs)
{
    Onnx__NodeProto *n = tide_test_onnx_node(m, fn, name, ins, outs);
    n->domain = tide_test_onnx_own_str(m, "lib");
    return n;
}

/* An attribute of n that takes the value of the calling node's attribute ref. */
static void attr_ref(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                     const char *ref)
{
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, name);
    a->ref_attr_name = tide_test_onnx_own_str(m, ref);
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
}

/* y = LeakyRelu(v, slope) of y's 3 columns, for the expected values. */
static void affine_leaky(const float *v, const float *w, const float *bias, float slope, float *y)
{
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 3; j++) {
            float t = bias[j];
            for (int k = 0; k < 3; k++)
                t += v[i * 3 + k] * w[k * 3 + j];
            y[i * 3 + j] = slope < 0 || t >= 0 ? t : slope * t;
        }
    }
}

/*
 * Model-local functions (PyTorch's export_modules_as_functions): calls are inlined, nested calls
 * too, each call's own values kept apart (every function names its inner value "t", and so
 * does the graph), attributes passed through ref_attr_name at two levels. Refused: a recursion,
 * a call with more inputs than the function has, a function at another opset; a node inside a
 * function is named with its call in messages.
 */
static void test_local_functions(void **state)
{
    (void)state;
    static const float x[6] = {1, -2, 0.5f, 3, -1, 2};
    static const float w[9] = {0.5f, -1, 0.25f, 1, 0.5f, -0.5f, -0.25f, 2, 1};
    static const float bias[3] = {0.1f, -0.2f, 0.3f};
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){3, 3}, w);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, bias);
    /* lib.Affine(x, w, b) = x w + b; lib.Act(x) = LeakyRelu(x, alpha = slope). */
    tide_test_onnx_node(m, "MatMul", "mm", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("t"));
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("t", "b"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_function(m, "lib", "Affine", 2, TIDE_TEST_NAMES("x", "w", "b"),
                            TIDE_TEST_NAMES("y"));
    Onnx__NodeProto *act =
        tide_test_onnx_node(m, "LeakyRelu", "leaky", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    attr_ref(m, act, "alpha", "slope");
    tide_test_onnx_function(m, "lib", "Act", 1, TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    /* lib.Block(x, w, b) = Act(Affine(x, w, b)), its slope passed on. */
    call_node(m, "Affine", "affine", TIDE_TEST_NAMES("x", "w", "b"), TIDE_TEST_NAMES("t"));
    attr_ref(m, call_node(m, "Act", "act", TIDE_TEST_NAMES("t"), TIDE_TEST_NAMES("y")), "slope",
             "slope");
    tide_test_onnx_function(m, "lib", "Block", 2, TIDE_TEST_NAMES("x", "w", "b"),
                            TIDE_TEST_NAMES("y"));
    /* The graph: Affine(Block(Block(x, slope 0.5), slope 0.25)). */
    tide_test_onnx_attr_f(
        m, call_node(m, "Block", "b1", TIDE_TEST_NAMES("x", "W", "b"), TIDE_TEST_NAMES("t")),
        "slope", 0.5f);
    tide_test_onnx_attr_f(
        m, call_node(m, "Block", "b2", TIDE_TEST_NAMES("t", "W", "b"), TIDE_TEST_NAMES("u")),
        "slope", 0.25f);
    call_node(m, "Affine", "head", TIDE_TEST_NAMES("u", "W", "b"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float h[6], u[6], want[6];
    affine_leaky(x, w, bias, 0.5f, h);
    affine_leaky(h, w, bias, 0.25f, u);
    affine_leaky(u, w, bias, -1, want);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_int_equal(r.n_variables, 2); /* W and b, read by every call */
    float y[6];
    run_forward(b, &r, x, sizeof(x), y, 6);
    for (int k = 0; k < 6; k++)
        assert_float_equal(y[k], want[k], 1e-5);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* A function that calls itself. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
    call_node(m, "Again", "again", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_function(m, "lib", "Again", 1, TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    call_node(m, "Again", "first", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node first#0/again#1/again#2/again#3/again#4/again#5/again#6/again#7/again#8/"
                 "again#9/again#10/again#11/again#12/again#13/again#14/again#15/again#16/again#17/"
                 "again#18/again#19/again#20/again#21/again#22/again#23/again#24/again#25/"
                 "again#26/again#27/again#28/again#29/again#30/again#31/again (Again, opset 13): "
                 "function Again calls functions 32 deep (a recursion?)");
    tide_test_onnx_free(m);

    /* More inputs than the function takes; a function at another opset; a bad inner node. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
    tide_test_onnx_node(m, "Relu", "relu", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    Onnx__FunctionProto *f =
        tide_test_onnx_function(m, "lib", "R", 1, TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    call_node(m, "R", "r", TIDE_TEST_NAMES("x", "x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node r (R, opset 13): 2 inputs and 1 outputs; function R takes 1 and gives 1");
    m->nodes[0]->n_input = 1;
    Onnx__OperatorSetIdProto *older = tide_test_onnx_own(m, sizeof(*older));
    onnx__operator_set_id_proto__init(older);
    older->domain = tide_test_onnx_own_str(m, "");
    older->has_version = true;
    older->version = 11;
    Onnx__OperatorSetIdProto **imports = tide_test_onnx_own(m, sizeof(*imports));
    imports[0] = older;
    f->n_opset_import = 1;
    f->opset_import = imports;
    import_fails(m, NULL,
                 "node r (R, opset 13): function R imports opset 11 of the default "
                 "domain, the model 13; tide imports a model at one opset");
    older->version = 13;
    f->node[0]->op_type = tide_test_onnx_own_str(m, "Relux");
    import_fails(m, NULL, "node r#0/relu (Relux, opset 13): op Relux is not supported");
    tide_test_onnx_free(m);

    /* Each of 24 functions calls the next twice: 2^23 Relus are refused before they are made. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
    for (int k = 23; k >= 0; k--) {
        char name[8], next[8];
        snprintf(name, sizeof(name), "F%d", k);
        snprintf(next, sizeof(next), "F%d", k + 1);
        if (k == 23) {
            tide_test_onnx_node(m, "Relu", "relu", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
        } else {
            call_node(m, next, "a", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("t"));
            call_node(m, next, "b", TIDE_TEST_NAMES("t"), TIDE_TEST_NAMES("y"));
        }
        tide_test_onnx_function(m, "lib", name, k == 23 ? 1 : 2, TIDE_TEST_NAMES("x"),
                                TIDE_TEST_NAMES("y"));
    }
    call_node(m, "F0", "top", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "inlining the model's functions takes more than 64 MiB");
    tide_test_onnx_free(m);
}

/*
 * Clip-11 on with bounds that are not constants: min a trained initializer (a Variable), max
 * computed in the graph (half of ReduceMax(x)); min greater than max makes every value max.
 */
static void test_clip_tensor_bounds(void **state)
{
    (void)state;
    static const float x[6] = {1, -4, 3, 0.5f, 2, -1};
    for (int big_min = 0; big_min <= 1; big_min++) {
        struct tide_test_onnx *m = tide_test_onnx_new(13);
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3},
                             -1);
        tide_test_onnx_init_f(m, "lo", 0, NULL, (float[]){big_min ? 2.0f : 0.25f});
        tide_test_onnx_init_f(m, "half", 0, NULL, (float[]){0.5f});
        Onnx__NodeProto *top =
            tide_test_onnx_node(m, "ReduceMax", "top", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("t"));
        tide_test_onnx_attr_i(m, top, "keepdims", 0);
        tide_test_onnx_node(m, "Mul", "hi", TIDE_TEST_NAMES("t", "half"), TIDE_TEST_NAMES("hi"));
        tide_test_onnx_node(m, "Clip", "clip", TIDE_TEST_NAMES("x", "lo", "hi"),
                            TIDE_TEST_NAMES("y"));
        tide_test_onnx_output(m, "y");
        struct tide_onnx_options o = {.frozen = (const char *const[]){"half"}, .n_frozen = 1};
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, &o, &r);
        assert_int_equal(r.n_variables, 1); /* lo */
        float y[6];
        run_forward(b, &r, x, sizeof(x), y, 6);
        static const float want[2][6] = {{1, 0.25f, 1.5f, 0.5f, 1.5f, 0.25f},
                                         {1.5f, 1.5f, 1.5f, 1.5f, 1.5f, 1.5f}};
        for (int k = 0; k < 6; k++)
            assert_float_equal(y[k], want[big_min][k], 0);
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
}

/*
 * Gather along axis 1 of [2, 3, 2] with indices computed in the graph: the ArgMax over axis 0
 * of x[0] ([[1, 2], [9, 0], [3, 3]]) is [1, 2]; y[i, k, j] = x[i, ids[k], j], the axis moved
 * first and back around tide's Gather.
 */
static void test_gather_axis_graph_indices(void **state)
{
    (void)state;
    static const float x[12] = {1, 2, 9, 0, 3, 3, -1, -2, 4, 4, 0, 1};
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){2, 3, 2}, -1);
    tide_test_onnx_init_i(m, "zero", 1, (int64_t[]){1}, (int64_t[]){0});
    tide_test_onnx_node(m, "Gather", "first", TIDE_TEST_NAMES("x", "zero"), TIDE_TEST_NAMES("x0"));
    tide_test_onnx_node(m, "Squeeze", "squeeze", TIDE_TEST_NAMES("x0", "zero"),
                        TIDE_TEST_NAMES("rows"));
    Onnx__NodeProto *am =
        tide_test_onnx_node(m, "ArgMax", "am", TIDE_TEST_NAMES("rows"), TIDE_TEST_NAMES("ids"));
    tide_test_onnx_attr_i(m, am, "axis", 0);
    tide_test_onnx_attr_i(m, am, "keepdims", 0);
    Onnx__NodeProto *g =
        tide_test_onnx_node(m, "Gather", "g", TIDE_TEST_NAMES("x", "ids"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, g, "axis", 1);
    tide_test_onnx_output(m, "y");
    static const int ids[2] = {1, 2};
    float want[8];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++)
            for (int j = 0; j < 2; j++)
                want[(i * 2 + k) * 2 + j] = x[(i * 3 + ids[k]) * 2 + j];
    expect_values(m, x, 12, 3, (int64_t[]){2, 2, 2}, want, 8);
}

/* Opsets 18 on: reductions take their axes as an input, Split-18's num_outputs, Gelu-20. */
static void test_opsets_18_on(void **state)
{
    (void)state;
    float x[6] = {1, -4, 3, 0.5f, 2, -1}, y[6];
    struct tide_onnx_result r;
    struct tide_test_onnx *m = tide_test_onnx_new(18);
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){1});
    Onnx__NodeProto *n =
        one_node(m, "ReduceMean", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "axes"));
    tide_test_onnx_attr_i(m, n, "keepdims", 0);
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 1, (int64_t[]){2});
    run_forward(b, &r, x, sizeof(x), y, 2);
    assert_float_equal(y[0], 0, 1e-6);
    assert_float_equal(y[1], 0.5f, 1e-6);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(20);
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){0});
    one_node(m, "ReduceMax", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "axes"));
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){1, 3});
    run_forward(b, &r, x, sizeof(x), y, 3);
    assert_float_equal(y[0], 1, 0);
    assert_float_equal(y[1], 2, 0);
    assert_float_equal(y[2], 3, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* No axes and noop_with_empty_axes: x itself. */
    m = tide_test_onnx_new(18);
    n = one_node(m, "ReduceL2", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "noop_with_empty_axes", 1);
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 3});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(18);
    n = one_node(m, "ReduceMin", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){1});
    import_fails(m, NULL,
                 "node n (ReduceMin, opset 18): axes is an input from ReduceMin-18 on, not an "
                 "attribute");
    tide_test_onnx_free(m);

    /* Split-18: num_outputs parts, the last one smaller. */
    m = tide_test_onnx_new(18);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){1, 10}, -1);
    n = tide_test_onnx_node(m, "Split", "n", TIDE_TEST_NAMES("x"),
                            TIDE_TEST_NAMES("a", "b", "c", "d"));
    tide_test_onnx_attr_i(m, n, "axis", 1);
    tide_test_onnx_attr_i(m, n, "num_outputs", 4);
    tide_test_onnx_output(m, "a");
    tide_test_onnx_output(m, "d");
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){1, 3});
    assert_shape(b, r.outputs[1], 2, (int64_t[]){1, 1});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    n->attribute[1]->i = 3;
    import_fails(m, NULL, "node n (Split, opset 18): num_outputs is 3, but the node has 4 outputs");
    n->attribute[1]->i = INT64_MAX;
    import_fails(m, NULL,
                 "node n (Split, opset 18): num_outputs is 9223372036854775807, but the node has "
                 "4 outputs");
    /* 5 in 4 parts of ceil(5 / 4) = 2 would leave the last one -1. */
    n->attribute[1]->i = 4;
    m->graph.input[0]->type->tensor_type->shape->dim[1]->dim_value = 5;
    import_fails(m, NULL,
                 "node n (Split, opset 18): axis 1 of size 5 does not split in 4 parts of 2");
    tide_test_onnx_free(m);

    /* Gelu-20, exact and tanh forms, against float64 references. */
    float gx[6] = {-3, -1, -0.25f, 0, 0.5f, 2};
    for (int tanh_form = 0; tanh_form <= 1; tanh_form++) {
        m = tide_test_onnx_new(20);
        n = one_node(m, "Gelu", 1, (int64_t[]){6}, TIDE_TEST_NAMES("x"));
        if (tanh_form) {
            Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, "approximate");
            a->has_type = true;
            a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
            a->has_s = true;
            a->s.data = (uint8_t *)tide_test_onnx_own_str(m, "tanh");
            a->s.len = 4;
        }
        b = import_ok(m, NULL, &r);
        run_forward(b, &r, gx, sizeof(gx), y, 6);
        for (int k = 0; k < 6; k++) {
            double v = gx[k];
            double want = tanh_form ? 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                                    : 0.5 * v * (1 + erf(v / sqrt(2.0)));
            assert_float_equal(y[k], want, 1e-6);
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
    m = tide_test_onnx_new(19);
    one_node(m, "Gelu", 1, (int64_t[]){6}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL,
                 "node n (Gelu, opset 19): Gelu does not exist in opset 19 (ONNX added it in "
                 "opset 20)");
    tide_test_onnx_free(m);
}

/* InstanceNormalization and GlobalMaxPool, as compositions of tide's ops. */
static void test_instance_norm_global_max_pool(void **state)
{
    (void)state;
    /* x [1, 2, 1, 3]: channel 0 is 1 2 6, channel 1 is -1 -1 2. */
    float x[6] = {1, 2, 6, -1, -1, 2}, y[6];
    struct tide_onnx_result r;
    struct tide_test_onnx *m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "s", 1, (int64_t[]){2}, (float[]){2, 1});
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, (float[]){0, 10});
    Onnx__NodeProto *n = one_node(m, "InstanceNormalization", 4, (int64_t[]){1, 2, 1, 3},
                                  TIDE_TEST_NAMES("x", "s", "b"));
    tide_test_onnx_attr_f(m, n, "epsilon", 0.01f);
    tide_builder *b = import_ok(m, NULL, &r);
    run_forward(b, &r, x, sizeof(x), y, 6);
    for (int ch = 0; ch < 2; ch++) {
        double mean = 0, var = 0;
        for (int k = 0; k < 3; k++)
            mean += x[ch * 3 + k] / 3.0;
        for (int k = 0; k < 3; k++)
            var += (x[ch * 3 + k] - mean) * (x[ch * 3 + k] - mean) / 3.0;
        for (int k = 0; k < 3; k++)
            assert_float_equal(y[ch * 3 + k],
                               (ch ? 1 : 2) * (x[ch * 3 + k] - mean) / sqrt(var + 0.01) +
                                   (ch ? 10 : 0),
                               1e-5);
    }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(6);
    tide_test_onnx_init_f(m, "s", 1, (int64_t[]){3}, NULL);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, NULL);
    one_node(m, "InstanceNormalization", 4, (int64_t[]){1, 2, 1, 3},
             TIDE_TEST_NAMES("x", "s", "b"));
    import_fails(m, NULL,
                 "node n (InstanceNormalization, opset 6): scale and B must hold one value per "
                 "channel (2)");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(1);
    one_node(m, "GlobalMaxPool", 4, (int64_t[]){1, 2, 1, 3}, TIDE_TEST_NAMES("x"));
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 4, (int64_t[]){1, 2, 1, 1});
    run_forward(b, &r, x, sizeof(x), y, 2);
    assert_float_equal(y[0], 6, 0);
    assert_float_equal(y[1], 2, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(1);
    one_node(m, "GlobalMaxPool", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL,
                 "node n (GlobalMaxPool, opset 1): x has rank 2, wants N, C and at least one "
                 "spatial axis");
    tide_test_onnx_free(m);

    /*
     * Both train: x -> InstanceNormalization -> GlobalMaxPool -> loss mean(y^2) over 2, so
     * dL/dy_c = y_c = s_c xhat_c + b_c, with xhat_c the normalised maximum of channel c (6 and 2
     * are unique): one SGD step moves b_c by -0.1 y_c and s_c by -0.1 y_c xhat_c.
     */
    const double xhat[2] = {3 / sqrt(14.0 / 3 + 1e-5), 2 / sqrt(2 + 1e-5)};
    const float s0[2] = {2, 1}, b0[2] = {0, 10};
    for (int fetch_bias = 0; fetch_bias < 2; fetch_bias++) {
        m = tide_test_onnx_new(6);
        tide_test_onnx_init_f(m, "s", 1, (int64_t[]){2}, s0);
        tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, b0);
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4,
                             (int64_t[]){1, 2, 1, 3}, -1);
        tide_test_onnx_node(m, "InstanceNormalization", "in", TIDE_TEST_NAMES("x", "s", "b"),
                            TIDE_TEST_NAMES("h"));
        tide_test_onnx_node(m, "GlobalMaxPool", "gmp", TIDE_TEST_NAMES("h"), TIDE_TEST_NAMES("y"));
        tide_test_onnx_output(m, "y");
        float after[2];
        train_one_step(m, x, sizeof(x), fetch_bias ? "b" : "s", after, 2);
        for (int ch = 0; ch < 2; ch++) {
            double yc = s0[ch] * xhat[ch] + b0[ch];
            double want = fetch_bias ? b0[ch] - 0.1 * yc : s0[ch] - 0.1 * yc * xhat[ch];
            assert_float_equal(after[ch], want, 1e-5);
        }
        tide_test_onnx_free(m);
    }
}

/* Imports m (one input x, one output), checks the output's shape, runs x forward and compares
 * with want (within 1e-6); frees m. */
static void expect_values(struct tide_test_onnx *m, const float *x, size_t n_x, int32_t rank,
                          const int64_t *dims, const float *want, size_t n_want)
{
    struct tide_onnx_result r;
    float y[64];
    assert_true(n_want <= 64);
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], rank, dims);
    run_forward(b, &r, x, n_x * sizeof(float), y, n_want);
    for (size_t k = 0; k < n_want; k++) {
        /* Equal (infinities too), both NaN, or within 1e-6; a NaN against a number fails. */
        bool same =
            y[k] == want[k] || (isnan(y[k]) && isnan(want[k])) || fabsf(y[k] - want[k]) <= 1e-6f;
        if (!same)
            fail_msg("output %zu is %.9g, want %.9g", k, y[k], want[k]);
    }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/* Resize and Upsample: nearest, linear and their coordinate modes against ONNX's worked
 * examples and values computed by hand; the refusals. */
static void test_resize(void **state)
{
    (void)state;
    const float x4[4] = {1, 2, 3, 4}, x8[8] = {1, 2, 3, 4, 5, 6, 7, 8};

    /* Nearest, scales [1, 1, 2, 3]: each element repeated 2 x 3 times (ONNX's example). */
    const float rep[24] = {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4};
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2, 3});
    one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "", "scales"));
    expect_values(m, x4, 4, 4, (int64_t[]){1, 1, 4, 6}, rep, 24);
    /* The same as Upsample-9 (scales an input) and Upsample-7 (an attribute). */
    m = tide_test_onnx_new(9);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2, 3});
    one_node(m, "Upsample", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "scales"));
    expect_values(m, x4, 4, 4, (int64_t[]){1, 1, 4, 6}, rep, 24);
    m = tide_test_onnx_new(7);
    Onnx__NodeProto *n = one_node(m, "Upsample", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x"));
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, "scales");
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    a->n_floats = 4;
    a->floats = tide_test_onnx_own(m, 4 * sizeof(float));
    a->floats[0] = a->floats[1] = 1, a->floats[2] = 2, a->floats[3] = 3;
    expect_values(m, x4, 4, 4, (int64_t[]){1, 1, 4, 6}, rep, 24);

    /* Linear, half_pixel (the default) and align_corners, 2 x 2 to 4 x 4 (ONNX's examples). */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2, 2});
    n = one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "", "scales"));
    tide_test_onnx_attr_s(m, n, "mode", "linear");
    expect_values(m, x4, 4, 4, (int64_t[]){1, 1, 4, 4},
                  (float[]){1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f,
                            3, 3.25f, 3.75f, 4},
                  16);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2, 2});
    n = one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "", "scales"));
    tide_test_onnx_attr_s(m, n, "mode", "linear");
    tide_test_onnx_attr_s(m, n, "coordinate_transformation_mode", "align_corners");
    float third = 1.0f / 3, ac[16];
    for (int i = 0; i < 4; i++) /* x_original = o / 3 on both axes: 1 + 2 row + col */
        for (int j = 0; j < 4; j++)
            ac[i * 4 + j] = 1 + 2 * i * third + j * third;
    expect_values(m, x4, 4, 4, (int64_t[]){1, 1, 4, 4}, ac, 16);

    /* Downsampling by sizes, nearest: 2 x 4 to 1 x 2 picks 1 and 3 (ONNX's example). */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "sizes", 1, (int64_t[]){4}, (int64_t[]){1, 1, 1, 2});
    one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 4}, TIDE_TEST_NAMES("x", "", "", "sizes"));
    expect_values(m, x8, 8, 4, (int64_t[]){1, 1, 1, 2}, (float[]){1, 3}, 2);
    /* Rank 1, 4 to 3, asymmetric: x_original 0, 4/3, 8/3; nearest_mode ceil takes 0, 2, 3,
     * round_prefer_floor 0, 1, 3; Resize-11 with an empty scales and a roi it does not read. */
    const float x10[4] = {10, 20, 30, 40};
    for (int ceil_mode = 0; ceil_mode <= 1; ceil_mode++) {
        m = tide_test_onnx_new(11);
        tide_test_onnx_init_f(m, "roi", 1, (int64_t[]){0}, NULL);
        tide_test_onnx_init_f(m, "none", 1, (int64_t[]){0}, NULL);
        tide_test_onnx_init_i(m, "sizes", 1, (int64_t[]){1}, (int64_t[]){3});
        n = one_node(m, "Resize", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "roi", "none", "sizes"));
        tide_test_onnx_attr_s(m, n, "coordinate_transformation_mode", "asymmetric");
        if (ceil_mode)
            tide_test_onnx_attr_s(m, n, "nearest_mode", "ceil");
        expect_values(m, x10, 4, 1, (int64_t[]){3},
                      ceil_mode ? (float[]){10, 30, 40} : (float[]){10, 20, 40}, 3);
    }
    /* Resize-10 linear (asymmetric): x_original 0, 0.5, 1, 1.5 reads 1, 2, 3, and 3 past the
     * edge. */
    m = tide_test_onnx_new(10);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){2}, (float[]){1, 2});
    n = one_node(m, "Resize", 2, (int64_t[]){1, 2}, TIDE_TEST_NAMES("x", "scales"));
    tide_test_onnx_attr_s(m, n, "mode", "linear");
    expect_values(m, (float[]){1, 3}, 2, 2, (int64_t[]){1, 4}, (float[]){1, 2, 3, 3}, 4);
    /* Resize-18's axes: scales for axis -1 only; pytorch_half_pixel, linear, 4 to 2 reads
     * x_original 0.5 and 2.5. */
    m = tide_test_onnx_new(18);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){1}, (float[]){0.5f});
    n = one_node(m, "Resize", 2, (int64_t[]){2, 4}, TIDE_TEST_NAMES("x", "", "scales"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){-1});
    tide_test_onnx_attr_s(m, n, "mode", "linear");
    tide_test_onnx_attr_s(m, n, "coordinate_transformation_mode", "pytorch_half_pixel");
    expect_values(m, x8, 8, 2, (int64_t[]){2, 2}, (float[]){1.5f, 3.5f, 5.5f, 7.5f}, 4);

    /* Refusals, each naming the problem. */
    m = tide_test_onnx_new(13);
    one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "", "s"));
    tide_test_onnx_input(m, "s", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){4}, -1);
    import_fails(m, NULL,
                 "node n (Resize, opset 13): scales (input \"s\") must be a constant known at "
                 "import");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 2, 2});
    n = one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "", "scales"));
    tide_test_onnx_attr_s(m, n, "mode", "bicubic");
    import_fails(
        m, NULL,
        "node n (Resize, opset 13): mode \"bicubic\" is not one of nearest, linear, cubic");
    n->attribute[0]->s.data = (uint8_t *)tide_test_onnx_own_str(m, "cubic");
    n->attribute[0]->s.len = strlen("cubic");
    tide_test_onnx_attr_s(m, n, "coordinate_transformation_mode", "tf_crop_and_resize");
    import_fails(m, NULL,
                 "node n (Resize, opset 13): coordinate_transformation_mode tf_crop_and_resize is "
                 "not supported");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){3}, (float[]){1, 2, 2});
    tide_test_onnx_init_i(m, "sizes", 1, (int64_t[]){4}, (int64_t[]){1, 1, 4, 4});
    n = one_node(m, "Resize", 4, (int64_t[]){1, 1, 2, 2},
                 TIDE_TEST_NAMES("x", "", "scales", "sizes"));
    import_fails(m, NULL,
                 "node n (Resize, opset 13): scales and sizes are both given; Resize "
                 "takes one");
    n->input[3] = tide_test_onnx_own_str(m, "");
    import_fails(m, NULL, "node n (Resize, opset 13): scales holds 3 values for 4 axes");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(9);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){4}, (float[]){1, 1, 1.5f, 2});
    one_node(m, "Upsample", 4, (int64_t[]){1, 1, 2, 2}, TIDE_TEST_NAMES("x", "scales"));
    import_fails(m, NULL,
                 "node n (Upsample, opset 9): mode nearest with the fractional scale 1.5 "
                 "(scales[2]) is not supported: ONNX defines its rounding from Resize-11 on");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){2}, (float[]){1, 0.1f});
    one_node(m, "Resize", 2, (int64_t[]){1, 4}, TIDE_TEST_NAMES("x", "", "scales"));
    import_fails(m, NULL,
                 "node n (Resize, opset 13): axis 1 of size 4 would have 0 elements, not 1 to "
                 "8388608");
    tide_test_onnx_free(m);

    /* Training through Resize: h = x * w, y = linear Resize of h, 2 to 4 (half_pixel reads
     * x_original -0.25, 0.25, 0.75, 1.25), loss the mean of y^2. With x = 1 and w = (2, 4),
     * y = (2, 2.5, 3.5, 4), d loss / d y = y / 2 = (1, 1.25, 1.75, 2), and the weights carry
     * it back: d loss / d w = (1 + 0.75 * 1.25 + 0.25 * 1.75, 0.25 * 1.25 + 0.75 * 1.75 + 2)
     * = (2.375, 3.625). One SGD step of 0.1 moves w to (1.7625, 3.6375). */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){1, 2}, (float[]){2, 4});
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){2}, (float[]){1, 2});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){1, 2}, -1);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("h"));
    n = tide_test_onnx_node(m, "Resize", "resize", TIDE_TEST_NAMES("h", "", "scales"),
                            TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_s(m, n, "mode", "linear");
    tide_test_onnx_output(m, "y");
    float w[2];
    train_one_step(m, (float[]){1, 1}, 2 * sizeof(float), "w", w, 2);
    assert_float_equal(w[0], 2 - 0.1 * 2.375, 1e-6);
    assert_float_equal(w[1], 4 - 0.1 * 3.625, 1e-6);
    tide_test_onnx_free(m);
}
/* Pad: constant, reflect, edge and wrap against ONNX's examples and numpy.pad's values
 * (ONNX's reference); negative pads, Pad-18's axes; the refusals; training through it. */
static void test_pad(void **state)
{
    (void)state;
    /* ONNX's example: [[1, 1.2], [2.3, 3.4], [4.5, 5.7]], pads [0, 2, 0, 0]. */
    const float ex[6] = {1, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f};
    const float want[3][12] = {
        {0, 0, 1, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f},                /* constant */
        {1, 1.2f, 1, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f}, /* reflect */
        {1, 1, 1, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f},    /* edge */
    };
    const char *const modes[3] = {"constant", "reflect", "edge"};
    for (int k = 0; k < 3; k++) {
        struct tide_test_onnx *m = tide_test_onnx_new(13);
        tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){4}, (int64_t[]){0, 2, 0, 0});
        Onnx__NodeProto *n = one_node(m, "Pad", 2, (int64_t[]){3, 2}, TIDE_TEST_NAMES("x", "pads"));
        tide_test_onnx_attr_s(m, n, "mode", modes[k]);
        expect_values(m, ex, 6, 2, (int64_t[]){3, 4}, want[k], 12);
    }
    /* Pad-2: pads and value as attributes, on both axes. */
    const float x6[6] = {1, 2, 3, 4, 5, 6};
    struct tide_test_onnx *m = tide_test_onnx_new(2);
    Onnx__NodeProto *n = one_node(m, "Pad", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){0, 1, 1, 2});
    tide_test_onnx_attr_f(m, n, "value", 2.5f);
    float v = 2.5f;
    expect_values(m, x6, 6, 2, (int64_t[]){3, 6},
                  (float[]){v, 1, 2, 3, v, v, v, 4, 5, 6, v, v, v, v, v, v, v, v}, 18);
    /* Reflect longer than the axis repeats the mirror, as numpy.pad: [1, 2, 3, 4] padded 5
     * and 3. */
    const float x4[4] = {1, 2, 3, 4};
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){2}, (int64_t[]){5, 3});
    n = one_node(m, "Pad", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "pads"));
    tide_test_onnx_attr_s(m, n, "mode", "reflect");
    expect_values(m, x4, 4, 1, (int64_t[]){12}, (float[]){2, 3, 4, 3, 2, 1, 2, 3, 4, 3, 2, 1}, 12);
    /* Negative pads remove: constant (-1, 1) with constant_value 9, then edge (2, -2) pads
     * what is left of [1, 2]. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){2}, (int64_t[]){-1, 1});
    tide_test_onnx_init_f(m, "value", 0, NULL, (float[]){9});
    one_node(m, "Pad", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "pads", "value"));
    expect_values(m, x4, 4, 1, (int64_t[]){4}, (float[]){2, 3, 4, 9}, 4);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){2}, (int64_t[]){2, -2});
    n = one_node(m, "Pad", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "pads"));
    tide_test_onnx_attr_s(m, n, "mode", "edge");
    expect_values(m, x4, 4, 1, (int64_t[]){4}, (float[]){1, 1, 1, 2}, 4);
    /* Pad-18's axes: the last axis only, edge; Pad-19's wrap: [1, 2, 3] padded 2 and 1. */
    m = tide_test_onnx_new(18);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){2}, (int64_t[]){1, 1});
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){1}, (int64_t[]){-1});
    n = one_node(m, "Pad", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "pads", "", "axes"));
    tide_test_onnx_attr_s(m, n, "mode", "edge");
    expect_values(m, x6, 6, 2, (int64_t[]){2, 5}, (float[]){1, 1, 2, 3, 3, 4, 4, 5, 6, 6}, 10);
    m = tide_test_onnx_new(19);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){2}, (int64_t[]){2, 1});
    n = one_node(m, "Pad", 1, (int64_t[]){3}, TIDE_TEST_NAMES("x", "pads"));
    tide_test_onnx_attr_s(m, n, "mode", "wrap");
    expect_values(m, x6, 3, 1, (int64_t[]){6}, (float[]){2, 3, 1, 2, 3, 1}, 6);

    /* Refusals, each naming the problem. */
    m = tide_test_onnx_new(13);
    one_node(m, "Pad", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "p"));
    tide_test_onnx_input(m, "p", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){2}, -1);
    import_fails(m, NULL,
                 "node n (Pad, opset 13): pads (input \"p\") must be a constant known at import");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){2}, (int64_t[]){-3, -1});
    n = one_node(m, "Pad", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "pads"));
    import_fails(m, NULL,
                 "node n (Pad, opset 13): pads -3 and -1 leave no element of axis 0 "
                 "(size 4)");
    tide_test_onnx_attr_s(m, n, "mode", "wrap");
    import_fails(m, NULL,
                 "node n (Pad, opset 13): mode wrap is not in Pad-13 (it came with "
                 "Pad-19)");
    n->attribute[0]->s.data = (uint8_t *)tide_test_onnx_own_str(m, "symmetric");
    n->attribute[0]->s.len = strlen("symmetric");
    import_fails(m, NULL,
                 "node n (Pad, opset 13): mode \"symmetric\" is not one of constant, reflect, "
                 "edge, wrap");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){3}, (int64_t[]){1, 1, 1});
    one_node(m, "Pad", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "pads"));
    import_fails(m, NULL, "node n (Pad, opset 13): pads holds 3 values for 1 axes (wants 2)");
    tide_test_onnx_free(m);

    /* Training through Resize and Pad: h = x * w, r = linear Resize of h, 2 to 4 (as in
     * test_resize: r = (2, 2.5, 3.5, 4)), y = r padded 1 and 1 by edge, (2, 2, 2.5, 3.5, 4,
     * 4), loss the mean of y^2. d loss / d y = y / 3; edge adds the copies up: d loss / d r =
     * (4, 2.5, 3.5, 8) / 3; Resize's weights carry it to h: d loss / d w = ((4 + 0.75 * 2.5 +
     * 0.25 * 3.5) / 3, (0.25 * 2.5 + 0.75 * 3.5 + 8) / 3) = (2.25, 3.75). One SGD step of
     * 0.1 moves w to (1.775, 3.625). */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){1, 2}, (float[]){2, 4});
    tide_test_onnx_init_f(m, "scales", 1, (int64_t[]){2}, (float[]){1, 2});
    tide_test_onnx_init_i(m, "pads", 1, (int64_t[]){4}, (int64_t[]){0, 1, 0, 1});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){1, 2}, -1);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("h"));
    n = tide_test_onnx_node(m, "Resize", "resize", TIDE_TEST_NAMES("h", "", "scales"),
                            TIDE_TEST_NAMES("r"));
    tide_test_onnx_attr_s(m, n, "mode", "linear");
    n = tide_test_onnx_node(m, "Pad", "pad", TIDE_TEST_NAMES("r", "pads"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_s(m, n, "mode", "edge");
    tide_test_onnx_output(m, "y");
    float w[2];
    train_one_step(m, (float[]){1, 1}, 2 * sizeof(float), "w", w, 2);
    assert_float_equal(w[0], 2 - 0.1 * 2.25, 1e-6);
    assert_float_equal(w[1], 4 - 0.1 * 3.75, 1e-6);
    tide_test_onnx_free(m);
    /* Constant padding trains too (Concat's gradient): y = (5, h0, h1), d loss / d h = 2 h / 3
     * = (4 / 3, 8 / 3). */
    m = tide_test_onnx_new(2);
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){1, 2}, (float[]){2, 4});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){1, 2}, -1);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("h"));
    n = tide_test_onnx_node(m, "Pad", "pad", TIDE_TEST_NAMES("h"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){0, 1, 0, 0});
    tide_test_onnx_attr_f(m, n, "value", 5);
    tide_test_onnx_output(m, "y");
    train_one_step(m, (float[]){1, 1}, 2 * sizeof(float), "w", w, 2);
    assert_float_equal(w[0], 2 - 0.1 * 4 / 3, 1e-6);
    assert_float_equal(w[1], 4 - 0.1 * 8 / 3, 1e-6);
    tide_test_onnx_free(m);
}

/*
 * ConvTranspose by its definition: every input cell x[n, i, ih, iw] adds
 * x * w[i, o, r, s] at full position (ih * stride + r, iw * stride + s) of
 * output channel o; the output is the full result from begin pad pb on,
 * oh x ow long (rows past the full result are zero). g, when not NULL, is
 * the loss's gradient with respect to y: then dw (not y) is accumulated.
 */
struct ct_geometry {
    int64_t n, ci, h, w, co, k, stride, pb, oh, ow;
    int64_t group; /* 1: dense; else ci and co divide by it and w is [ci, co / group, k, k] */
};

static void conv_transpose_ref(const struct ct_geometry *c, const float *x, const float *w,
                               const float *g, float *y, double *dw)
{
    if (y)
        memset(y, 0, (size_t)(c->n * c->co * c->oh * c->ow) * sizeof(float));
    for (int64_t n = 0; n < c->n; n++)
        for (int64_t i = 0; i < c->ci; i++)
            for (int64_t ih = 0; ih < c->h; ih++)
                for (int64_t iw = 0; iw < c->w; iw++)
                    for (int64_t o = 0; o < c->co; o++)
                        for (int64_t r = 0; r < c->k; r++)
                            for (int64_t q = 0; q < c->k; q++) {
                                int64_t groups = c->group > 1 ? c->group : 1;
                                int64_t cog = c->co / groups, gi = i / (c->ci / groups);
                                int64_t y0 = ih * c->stride + r - c->pb,
                                        y1 = iw * c->stride + q - c->pb;
                                if (o / cog != gi || y0 < 0 || y0 >= c->oh || y1 < 0 || y1 >= c->ow)
                                    continue;
                                int64_t xi = ((n * c->ci + i) * c->h + ih) * c->w + iw;
                                int64_t wi = ((i * cog + o % cog) * c->k + r) * c->k + q;
                                int64_t yi = ((n * c->co + o) * c->oh + y0) * c->ow + y1;
                                if (g)
                                    dw[wi] += (double)x[xi] * g[yi];
                                else
                                    y[yi] += x[xi] * w[wi];
                            }
}

/* A ConvTranspose model over x [n, ci, h, w] with weight "w" [ci, co, k, k] (values wv). */
static Onnx__NodeProto *conv_transpose_model(struct tide_test_onnx *m, const struct ct_geometry *c,
                                             const float *wv)
{
    int64_t groups = c->group > 1 ? c->group : 1;
    tide_test_onnx_init_f(m, "w", 4, (int64_t[]){c->ci, c->co / groups, c->k, c->k}, wv);
    Onnx__NodeProto *n = one_node(m, "ConvTranspose", 4, (int64_t[]){c->n, c->ci, c->h, c->w},
                                  TIDE_TEST_NAMES("x", "w"));
    if (groups > 1)
        tide_test_onnx_attr_i(m, n, "group", groups);
    return n;
}

/*
 * Imports m (a ConvTranspose built by conv_transpose_model, its attributes set), runs it on
 * x and compares the output's shape and values with conv_transpose_ref; frees m.
 */
static void expect_conv_transpose(struct tide_test_onnx *m, const struct ct_geometry *c,
                                  const float *x, const float *w)
{
    int64_t count = c->n * c->co * c->oh * c->ow;
    float *y = malloc((size_t)count * sizeof(float)), *want = malloc((size_t)count * sizeof(float));
    assert_non_null(y);
    assert_non_null(want);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 4, (int64_t[]){c->n, c->co, c->oh, c->ow});
    run_forward(b, &r, x, (size_t)(c->n * c->ci * c->h * c->w) * sizeof(float), y, (size_t)count);
    conv_transpose_ref(c, x, w, NULL, want, NULL);
    for (int64_t k = 0; k < count; k++)
        assert_float_equal(y[k], want[k], 1e-5);
    free(y);
    free(want);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

static void test_conv_transpose(void **state)
{
    (void)state;
    /* w has room for the grouped case's [4, 3, 3, 3]; the others read its first 54. */
    float x[2 * 2 * 3 * 3], w[4 * 3 * 3 * 3], want[2 * 3 * 6 * 6];
    for (int k = 0; k < 36; k++)
        x[k] = (float)((k * 7) % 11) - 5.0f;
    for (int k = 0; k < 108; k++)
        w[k] = (float)((k * 5) % 9) * 0.25f - 1.0f;

    /* Stride 2, pads 1 and output_padding 1: 2 * (3 - 1) + 3 + 1 - 2 = 6 per axis. */
    struct ct_geometry c = {2, 2, 3, 3, 3, 3, 2, 1, 6, 6, 1};
    struct tide_test_onnx *m = tide_test_onnx_new(11);
    Onnx__NodeProto *n = conv_transpose_model(m, &c, w);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tide_test_onnx_attr_ints(m, n, "output_padding", 2, (int64_t[]){1, 1});
    expect_conv_transpose(m, &c, x, w);

    /* A larger end pad: the output is cropped from a longer one (3 + 2 - 0 - 2 = 3). */
    struct ct_geometry crop = {1, 1, 3, 3, 1, 3, 1, 0, 3, 3, 1};
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &crop, w);
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){0, 0, 2, 2});
    expect_conv_transpose(m, &crop, x, w);

    /* output_shape one longer than the result (2 * 2 + 3 = 7): a zero row and column at the end. */
    struct ct_geometry longer = {1, 1, 3, 3, 1, 3, 2, 0, 8, 8, 1};
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &longer, w);
    tide_test_onnx_attr_ints(m, n, "output_shape", 2, (int64_t[]){8, 8});
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    expect_conv_transpose(m, &longer, x, w);

    /* A larger begin pad: the whole result, cropped from the begin pad on. */
    struct ct_geometry start = {1, 1, 3, 3, 1, 3, 1, 2, 3, 3, 1};
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &start, w);
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){2, 2, 0, 0});
    expect_conv_transpose(m, &start, x, w);

    /* In 2 groups: input channels 0-1 make outputs 0-2, 2-3 make 3-5 (w [4, 3, 3, 3]). */
    struct ct_geometry grouped = {1, 4, 3, 3, 6, 3, 2, 1, 5, 5, 2};
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &grouped, w);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    expect_conv_transpose(m, &grouped, x, w);

    /* Refusals name the attribute and the numbers. */
    struct ct_geometry dense = {1, 4, 3, 3, 3, 3, 2, 1, 5, 5, 1};
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &dense, w);
    tide_test_onnx_attr_i(m, n, "group", 3);
    import_fails(m, NULL,
                 "node n (ConvTranspose, opset 11): the input has 4 channels; the weight [4, 3, "
                 "3, 3] wants 4 in 3 groups");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &crop, w);
    tide_test_onnx_attr_ints(m, n, "output_shape", 2, (int64_t[]){6, 5});
    import_fails(m, NULL,
                 "node n (ConvTranspose, opset 11): the output's H of 6 from begin pad 0 runs "
                 "past the 5 that input 3, kernel 3 and stride 1 give");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &c, w);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "output_padding", 2, (int64_t[]){1, 2});
    import_fails(m, NULL,
                 "node n (ConvTranspose, opset 11): output_padding[1] is 2, not in 0..1 (less "
                 "than the stride)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &c, w);
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){3, 3, 3, 3});
    import_fails(m, NULL,
                 "node n (ConvTranspose, opset 11): the output's H would be -1 (pads too large "
                 "for input 3, kernel 3, stride 1)");
    tide_test_onnx_free(m);

    /*
     * It trains: loss = mean(y^2), one SGD step at lr 0.1 moves w by -0.1 dL/dw, where
     * dL/dw[i, o, r, s] = sum of x * dL/dy over the cells that w[i, o, r, s] connects.
     */
    m = tide_test_onnx_new(11);
    n = conv_transpose_model(m, &c, w);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tide_test_onnx_attr_ints(m, n, "output_padding", 2, (int64_t[]){1, 1});
    float w_after[54], g[216];
    double dw[54] = {0};
    train_one_step(m, x, sizeof(x), "w", w_after, 54);
    conv_transpose_ref(&c, x, w, NULL, want, NULL);
    for (int k = 0; k < 216; k++)
        g[k] = 2.0f * want[k] / 216.0f;
    conv_transpose_ref(&c, x, w, g, NULL, dw);
    int moved = 0;
    for (int k = 0; k < 54; k++) {
        assert_float_equal(w_after[k], w[k] - 0.1 * dw[k], 1e-5);
        moved += w_after[k] != w[k];
    }
    assert_true(moved > 40);
    tide_test_onnx_free(m);
}

/* 1-D pooling: [N, C, L] with a window of k along L, as 2-D pooling of [N, C, 1, L]. */
static void test_pool_1d(void **state)
{
    (void)state;
    /* x [1, 2, 5]; window 3, stride 2, pad 1: windows over [-1, 1], [1, 3], [3, 5]. */
    float x[10] = {1, 5, 2, 8, 3, -4, -1, -6, -2, -3}, y[6];
    static const float want_max[6] = {5, 8, 8, -1, -1, -2};
    static const float want_avg[6] = {3, 5, 5.5f, -2.5f, -3, -2.5f};
    for (int is_max = 0; is_max < 2; is_max++) {
        struct tide_test_onnx *m = tide_test_onnx_new(11);
        Onnx__NodeProto *n = one_node(m, is_max ? "MaxPool" : "AveragePool", 3,
                                      (int64_t[]){1, 2, 5}, TIDE_TEST_NAMES("x"));
        tide_test_onnx_attr_ints(m, n, "kernel_shape", 1, (int64_t[]){3});
        tide_test_onnx_attr_ints(m, n, "strides", 1, (int64_t[]){2});
        tide_test_onnx_attr_ints(m, n, "pads", 2, (int64_t[]){1, 1});
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_shape(b, r.outputs[0], 3, (int64_t[]){1, 2, 3});
        run_forward(b, &r, x, sizeof(x), y, 6);
        for (int k = 0; k < 6; k++)
            assert_float_equal(y[k], is_max ? want_max[k] : want_avg[k], 1e-6);
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
    struct tide_test_onnx *m = tide_test_onnx_new(11);
    Onnx__NodeProto *n = one_node(m, "MaxPool", 3, (int64_t[]){1, 2, 5}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "kernel_shape", 1, (int64_t[]){9});
    tide_test_onnx_attr_ints(m, n, "pads", 2, (int64_t[]){0, 1});
    import_fails(m, NULL,
                 "node n (MaxPool, opset 11): the kernel's 9 is more than the padded input's 6");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    n = one_node(m, "MaxPool", 4, (int64_t[]){1, 2, 5, 5}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "kernel_shape", 1, (int64_t[]){3});
    import_fails(m, NULL,
                 "node n (MaxPool, opset 11): only 1-D windows (a rank-3 input) are supported, "
                 "got rank 4");
    tide_test_onnx_free(m);
}

/* ============================================================================
 * GatherElements, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss's weights and ignore_index
 * ========================================================================== */

static void test_gather_elements_import(void **state)
{
    (void)state;
    /* x [2, 3] along axis -1 (1): a negative index counts from the end. */
    float x[6] = {10, 11, 12, 20, 21, 22}, y[6];
    struct tide_onnx_result r;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "idx", 2, (int64_t[]){2, 3}, (int64_t[]){2, -1, 0, 1, 1, -3});
    Onnx__NodeProto *n = one_node(m, "GatherElements", 2, (int64_t[]){2, 3},
                                  TIDE_TEST_NAMES("x", "idx"));
    tide_test_onnx_attr_i(m, n, "axis", -1);
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 3});
    run_forward(b, &r, x, sizeof(x), y, 6);
    const float want[6] = {12, 12, 10, 21, 21, 20};
    for (int k = 0; k < 6; k++)
        assert_float_equal(y[k], want[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Axis 0 with indices [1, 3] (fewer rows than x). */
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_i(m, "idx", 2, (int64_t[]){1, 3}, (int64_t[]){1, 0, 1});
    one_node(m, "GatherElements", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "idx"));
    b = import_ok(m, NULL, &r);
    run_forward(b, &r, x, sizeof(x), y, 3);
    assert_float_equal(y[0], 20, 0);
    assert_float_equal(y[1], 11, 0);
    assert_float_equal(y[2], 22, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "idx", 2, (int64_t[]){2, 3}, NULL);
    n = one_node(m, "GatherElements", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "idx"));
    tide_test_onnx_attr_i(m, n, "axis", 2);
    import_fails(m, NULL, "node n (GatherElements, opset 13): axis 2 is out of range for rank 2");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(10);
    tide_test_onnx_init_i(m, "idx", 2, (int64_t[]){2, 3}, NULL);
    one_node(m, "GatherElements", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "idx"));
    import_fails(m, NULL,
                 "node n (GatherElements, opset 10): GatherElements does not exist in opset 10 "
                 "(ONNX added it in opset 11)");
    tide_test_onnx_free(m);
}

/*
 * One NegativeLogLikelihoodLoss (or SoftmaxCrossEntropyLoss: op) node over x
 * (float input of shape xd), the int64 target tgt of shape td, and the class
 * weights w (frozen; NULL: none); ignore (INT64_MIN: none), reduction (NULL:
 * the default). Runs it forward and returns output 0 in out.
 */
static void run_loss(const char *op, int32_t xr, const int64_t *xd, const float *x, int32_t tr,
                     const int64_t *td, const int64_t *tgt, int64_t classes, const float *w,
                     int64_t ignore, const char *reduction, float *out, size_t out_count)
{
    struct tide_onnx_result r;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "t", tr, td, tgt);
    if (w)
        tide_test_onnx_init_f(m, "w", 1, &classes, w);
    Onnx__NodeProto *n = one_node(m, op, xr, xd,
                                  w ? TIDE_TEST_NAMES("x", "t", "w") : TIDE_TEST_NAMES("x", "t"));
    if (ignore != INT64_MIN)
        tide_test_onnx_attr_i(m, n, "ignore_index", ignore);
    if (reduction)
        tide_test_onnx_attr_s(m, n, "reduction", reduction);
    const char *frozen[] = {"w"};
    struct tide_onnx_options o = {.frozen = frozen, .n_frozen = 1};
    tide_builder *b = import_ok(m, &o, &r);
    int64_t n_x = 1;
    for (int32_t k = 0; k < xr; k++)
        n_x *= xd[k];
    run_forward(b, &r, x, (size_t)n_x * sizeof(float), out, out_count);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

static void test_nll_loss(void **state)
{
    (void)state;
    /* [N, C] = [3, 4] log-probabilities; targets 2, 0, 3; weights 0.5 1 2 4. */
    const float x[12] = {-1.0f, -2.0f, -0.5f, -3.0f, -0.1f, -1.5f,
                         -2.5f, -4.0f, -2.0f, -1.0f, -3.0f, -0.25f};
    const int64_t t[3] = {2, 0, 3}, xd[2] = {3, 4};
    const float w[4] = {0.5f, 1, 2, 4};
    const char *nll = "NegativeLogLikelihoodLoss";
    float y[4];
    /* No weights, no ignore_index: the mean of 0.5, 0.1, 0.25. */
    run_loss(nll, 2, xd, x, 1, (int64_t[]){3}, t, 4, NULL, INT64_MIN, NULL, y, 1);
    assert_float_equal(y[0], 0.85 / 3, 1e-6);
    /* ignore_index 0 drops row 1: (0.5 + 0.25) / 2 targets, not 3. */
    run_loss(nll, 2, xd, x, 1, (int64_t[]){3}, t, 4, NULL, 0, "mean", y, 1);
    assert_float_equal(y[0], 0.375, 1e-6);
    /* Weights and ignore_index: none gives 0.5 * 2, 0, 0.25 * 4; mean divides by 2 + 4 (row 1
     * weighs nothing), sum does not. */
    run_loss(nll, 2, xd, x, 1, (int64_t[]){3}, t, 4, w, 0, "none", y, 3);
    assert_float_equal(y[0], 1.0, 1e-6);
    assert_float_equal(y[1], 0.0, 0);
    assert_float_equal(y[2], 1.0, 1e-6);
    run_loss(nll, 2, xd, x, 1, (int64_t[]){3}, t, 4, w, 0, "mean", y, 1);
    assert_float_equal(y[0], 2.0 / 6.0, 1e-6);
    run_loss(nll, 2, xd, x, 1, (int64_t[]){3}, t, 4, w, 0, "sum", y, 1);
    assert_float_equal(y[0], 2.0, 1e-6);
    /* Weights without ignore_index: (0.5 * 2 + 0.1 * 0.5 + 0.25 * 4) / (2 + 0.5 + 4). */
    run_loss(nll, 2, xd, x, 1, (int64_t[]){3}, t, 4, w, INT64_MIN, NULL, y, 1);
    assert_float_equal(y[0], 2.05 / 6.5, 1e-6);

    /* [N, C, d1] = [2, 3, 2], ONNX's own example: targets [[2, 1], [0, 2]], weights 0.2 0.3 0.1. */
    const float x3[12] = {1, 2, 2, 2, 3, 2, 0, 1, 2, 2, 1, 2};
    const int64_t t3[4] = {2, 1, 0, 2}, xd3[3] = {2, 3, 2}, td3[2] = {2, 2};
    const float w3[3] = {0.2f, 0.3f, 0.1f};
    run_loss(nll, 3, xd3, x3, 2, td3, t3, 3, NULL, INT64_MIN, "none", y, 4);
    assert_float_equal(y[0], -3, 0);
    assert_float_equal(y[1], -2, 0);
    assert_float_equal(y[2], 0, 0);
    assert_float_equal(y[3], -2, 0);
    /* -(3 * 0.1 + 2 * 0.3 + 0 * 0.2 + 2 * 0.1) = -1.1 over weights 0.7 */
    run_loss(nll, 3, xd3, x3, 2, td3, t3, 3, w3, INT64_MIN, "sum", y, 1);
    assert_float_equal(y[0], -1.1, 1e-6);
    run_loss(nll, 3, xd3, x3, 2, td3, t3, 3, w3, INT64_MIN, "mean", y, 1);
    assert_float_equal(y[0], -1.1 / 0.7, 1e-6);
    /* ignore_index 1 drops [0][1] (-0.6 and its weight 0.3): -0.5 / 0.4. */
    run_loss(nll, 3, xd3, x3, 2, td3, t3, 3, w3, 1, "mean", y, 1);
    assert_float_equal(y[0], -1.25, 1e-6);
    /* A negative ignore_index, as PyTorch's -100, with every other target in range. */
    const int64_t t3n[4] = {2, -100, -100, 2};
    run_loss(nll, 3, xd3, x3, 2, td3, t3n, 3, NULL, -100, "mean", y, 1);
    assert_float_equal(y[0], -2.5, 1e-6);

    /* Refusals: a target of the wrong shape, weights of the wrong size, an unknown reduction. */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "t", 1, (int64_t[]){4}, NULL);
    one_node(m, nll, 2, xd, TIDE_TEST_NAMES("x", "t"));
    import_fails(m, NULL,
                 "node n (NegativeLogLikelihoodLoss, opset 13): the target [4] does not fit the "
                 "input [3, 4]: wants [N, d1, ...], the input's shape without axis 1");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "t", 1, (int64_t[]){3}, NULL);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){3}, NULL);
    one_node(m, nll, 2, xd, TIDE_TEST_NAMES("x", "t", "w"));
    import_fails(m, NULL,
                 "node n (NegativeLogLikelihoodLoss, opset 13): the weights have shape [3], wants "
                 "[4] (one per class)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "t", 1, (int64_t[]){3}, NULL);
    Onnx__NodeProto *n = one_node(m, nll, 2, xd, TIDE_TEST_NAMES("x", "t"));
    tide_test_onnx_attr_s(m, n, "reduction", "max");
    import_fails(m, NULL,
                 "node n (NegativeLogLikelihoodLoss, opset 13): reduction must be none, sum or "
                 "mean");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_i(m, "t", 1, (int64_t[]){3}, NULL);
    one_node(m, nll, 2, xd, TIDE_TEST_NAMES("x", "t"));
    import_fails(m, NULL,
                 "node n (NegativeLogLikelihoodLoss, opset 11): NegativeLogLikelihoodLoss does "
                 "not exist in opset 11 (ONNX added it in opset 12)");
    tide_test_onnx_free(m);
}

/* SoftmaxCrossEntropyLoss with weights and ignore_index: NLL of LogSoftmax, log_prob too. */
static void test_softmax_cross_entropy_loss_weights(void **state)
{
    (void)state;
    const float x[6] = {1, 2, 3, 1, 1, 1};
    const int64_t t[2] = {2, 1}, xd[2] = {2, 3};
    const float w[3] = {1, 2, 3};
    float y[6];
    double lse0 = log(exp(1.0) + exp(2.0) + exp(3.0)), lse1 = log(3 * exp(1.0));
    /* Row 1 is ignored: mean = 3 (lse0 - 3) / 3. */
    run_loss("SoftmaxCrossEntropyLoss", 2, xd, x, 1, (int64_t[]){2}, t, 3, w, 1, NULL, y, 1);
    assert_float_equal(y[0], lse0 - 3, 1e-6);
    /* Weights alone: (3 (lse0 - 3) + 2 (lse1 - 1)) / (3 + 2). */
    run_loss("SoftmaxCrossEntropyLoss", 2, xd, x, 1, (int64_t[]){2}, t, 3, w, INT64_MIN, "mean",
             y, 1);
    assert_float_equal(y[0], (3 * (lse0 - 3) + 2 * (lse1 - 1)) / 5, 1e-6);

    /* log_prob, output 1, is LogSoftmax over the classes. */
    struct tide_onnx_result r;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "t", 1, (int64_t[]){2}, t);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, xd, -1);
    Onnx__NodeProto *n = tide_test_onnx_node(m, "SoftmaxCrossEntropyLoss", "n",
                                             TIDE_TEST_NAMES("x", "t"),
                                             TIDE_TEST_NAMES("loss", "log_prob"));
    tide_test_onnx_attr_i(m, n, "ignore_index", 2);
    tide_test_onnx_attr_s(m, n, "reduction", "none");
    tide_test_onnx_output(m, "loss");
    tide_test_onnx_output(m, "log_prob");
    tide_builder *b = import_ok(m, NULL, &r);
    float loss[2], lp[6];
    run_forward_all(b, &r, x, sizeof(x), (float *[]){loss, lp}, (size_t[]){2, 6});
    assert_float_equal(loss[0], 0, 0); /* ignored */
    assert_float_equal(loss[1], lse1 - 1, 1e-6);
    for (int k = 0; k < 6; k++)
        assert_float_equal(lp[k], x[k] - (k < 3 ? lse0 : lse1), 1e-6);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * One SGD step through NegativeLogLikelihoodLoss (weights, ignore_index, mean):
 * lp = x + b, b an initializer (trainable), w frozen. d loss / d b[n][c] is -w[t_n] / W
 * at the target (W: the weights of the targets not ignored) and 0 elsewhere,
 * so the step raises each kept target's log-probability by lr w[t_n] / W and
 * leaves the ignored row and the other classes alone.
 */
static void test_nll_loss_trains(void **state)
{
    (void)state;
    const float x[9] = {-1, -2, -3, -0.5f, -1.5f, -2.5f, -2, -1, -0.5f};
    const float b0[9] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f, 0.9f};
    struct tide_onnx_result r;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "b", 2, (int64_t[]){3, 3}, b0);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){3}, (float[]){1, 2, 4});
    tide_test_onnx_init_i(m, "t", 1, (int64_t[]){3}, (int64_t[]){0, 2, 1});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){3, 3}, -1);
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("x", "b"), TIDE_TEST_NAMES("lp"));
    Onnx__NodeProto *n = tide_test_onnx_node(m, "NegativeLogLikelihoodLoss", "nll",
                                             TIDE_TEST_NAMES("lp", "t", "w"),
                                             TIDE_TEST_NAMES("loss"));
    tide_test_onnx_attr_i(m, n, "ignore_index", 0);
    tide_test_onnx_output(m, "loss");
    const char *frozen[] = {"w"};
    struct tide_onnx_options o = {.frozen = frozen, .n_frozen = 1};
    tide_builder *b = import_ok(m, &o, &r);
    assert_int_equal(r.n_variables, 1);
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    struct tide_train_options train = {.loss = tide_builder_name(b, r.outputs[0]),
                                       .optimizer = TIDE_OPTIMIZER_SGD,
                                       .learning_rate = 0.5f};
    struct tide_session_options so = tide_session_options_default();
    so.threads = 1;
    so.train = &train;
    struct tide_session *sess;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &so, &sess, &err) != TIDE_OK)
        fail_msg("training session: %s", err.message);
    free(graph);
    struct tide_step_stats stats;
    assert_int_equal(tide_session_feed(sess, tide_builder_name(b, r.inputs[0]), x, sizeof(x), &err),
                     TIDE_OK);
    if (tide_session_step(sess, &stats, &err) != TIDE_OK)
        fail_msg("step: %s", err.message);
    float after[9];
    assert_int_equal(tide_session_fetch(sess, r.variables[0].name, after, sizeof(after), &err),
                     TIDE_OK);
    /* Row 0's target 0 is ignored, so W = w[2] + w[1] = 6: b[1][2] rises by 0.5 * 4 / 6 and
     * b[2][1] by 0.5 * 2 / 6; nothing else moves. */
    const double want[9] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6 + 2.0 / 6, 0.7, 0.8 + 1.0 / 6, 0.9};
    for (int k = 0; k < 9; k++)
        assert_float_equal(after[k], want[k], 1e-6);
    tide_session_free(sess);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * Conv of x [N, C, H, W] with W [M, C / group, kH, kW] and B [M] (or none),
 * strides s and symmetric pads p, in double: output channel m reads input
 * channels [m / (M / group) * C / group, ..) only.
 */
static void reference_conv(const int64_t *xd, const float *x, const int64_t *wd, const float *w,
                           const float *bias, int64_t group, int64_t s, int64_t p, int64_t oh,
                           int64_t ow, double *y)
{
    int64_t cg = xd[1] / group, mg = wd[0] / group;
    for (int64_t n = 0; n < xd[0]; n++)
        for (int64_t m = 0; m < wd[0]; m++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double sum = bias ? bias[m] : 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < wd[2]; r++)
                            for (int64_t q = 0; q < wd[3]; q++) {
                                int64_t ih = i * s - p + r, iw = j * s - p + q;
                                if (ih < 0 || ih >= xd[2] || iw < 0 || iw >= xd[3])
                                    continue;
                                int64_t xc = m / mg * cg + c;
                                sum += (double)x[((n * xd[1] + xc) * xd[2] + ih) * xd[3] + iw] *
                                       w[((m * cg + c) * wd[2] + r) * wd[3] + q];
                            }
                    y[((n * wd[0] + m) * oh + i) * ow + j] = sum;
                }
}

/* A Conv node of opset 11 over input x with weight W (and B if bias), group, strides and pads. */
static Onnx__NodeProto *conv_model(struct tide_test_onnx *m, const int64_t *xd, const int64_t *wd,
                                   const float *w, const float *bias, int64_t group, int64_t s,
                                   int64_t p)
{
    tide_test_onnx_init_f(m, "W", 4, wd, w);
    if (bias)
        tide_test_onnx_init_f(m, "B", 1, wd, bias);
    Onnx__NodeProto *n = one_node(m, "Conv", 4, xd,
                                  bias ? TIDE_TEST_NAMES("x", "W", "B") : TIDE_TEST_NAMES("x", "W"));
    tide_test_onnx_attr_i(m, n, "group", group);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){s, s});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){p, p, p, p});
    return n;
}

/* Grouped and depthwise Conv (group > 1), against a float64 reference loop; bad groups refused. */
static void test_grouped_conv(void **state)
{
    (void)state;
    static const struct {
        int64_t x[4], w[4], group, stride, pad, oh, ow;
        bool bias;
    } cases[] = {
        {{2, 4, 5, 5}, {6, 2, 3, 3}, 2, 1, 1, 5, 5, true},   /* 2 groups of 2 channels, 3 maps */
        {{1, 3, 6, 6}, {3, 1, 3, 3}, 3, 2, 1, 3, 3, false},  /* depthwise, strided */
        {{2, 2, 4, 4}, {6, 1, 3, 3}, 2, 1, 0, 2, 2, true},   /* depthwise, 3 maps per channel */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const int64_t *xd = cases[i].x, *wd = cases[i].w;
        int64_t nx = xd[0] * xd[1] * xd[2] * xd[3], nw = wd[0] * wd[1] * wd[2] * wd[3];
        int64_t ny = xd[0] * wd[0] * cases[i].oh * cases[i].ow;
        float *x = malloc((size_t)nx * sizeof(float)), *w = malloc((size_t)nw * sizeof(float));
        float *y = malloc((size_t)ny * sizeof(float)), bias[6];
        double *want = malloc((size_t)ny * sizeof(double));
        assert_true(x && w && y && want);
        for (int64_t k = 0; k < nx; k++)
            x[k] = (float)((k * 37) % 17 - 8) / 8.0f;
        for (int64_t k = 0; k < nw; k++)
            w[k] = (float)((k * 11) % 13 - 6) / 6.0f;
        for (int64_t k = 0; k < wd[0]; k++)
            bias[k] = 0.5f * (float)k - 1.0f;
        struct tide_test_onnx *m = tide_test_onnx_new(11);
        conv_model(m, xd, wd, w, cases[i].bias ? bias : NULL, cases[i].group, cases[i].stride,
                   cases[i].pad);
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_shape(b, r.outputs[0], 4, (int64_t[]){xd[0], wd[0], cases[i].oh, cases[i].ow});
        run_forward(b, &r, x, (size_t)nx * sizeof(float), y, (size_t)ny);
        reference_conv(xd, x, wd, w, cases[i].bias ? bias : NULL, cases[i].group,
                       cases[i].stride, cases[i].pad, cases[i].oh, cases[i].ow, want);
        for (int64_t k = 0; k < ny; k++)
            if (!(fabs(y[k] - want[k]) <= 1e-5 + 1e-4 * fabs(want[k])))
                fail_msg("case %zu: y[%lld] is %.9g, want %.9g", i, (long long)k, y[k], want[k]);
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
        free(x), free(w), free(y), free(want);
    }

    /* Groups that do not divide the channels, a group below 1, and a weight of other channels. */
    struct tide_test_onnx *m = tide_test_onnx_new(11);
    conv_model(m, (int64_t[]){1, 4, 5, 5}, (int64_t[]){6, 1, 3, 3}, NULL, NULL, 3, 1, 0);
    import_fails(m, NULL,
                 "node n (Conv, opset 11): group 3 must divide the input's 4 channels and the "
                 "weight's 6 feature maps");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    conv_model(m, (int64_t[]){1, 4, 5, 5}, (int64_t[]){4, 1, 3, 3}, NULL, NULL, 0, 1, 0);
    import_fails(m, NULL, "node n (Conv, opset 11): group is 0, not 1 or more");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    conv_model(m, (int64_t[]){1, 4, 5, 5}, (int64_t[]){6, 1, 3, 3}, NULL, NULL, 2, 1, 0);
    import_fails(m, NULL,
                 "node n (Conv, opset 11): the weight's channel dimension is 1, but the input's 4 "
                 "channels in 2 groups want 2");
    tide_test_onnx_free(m);
}

/* 1-D Conv and ConvTranspose: [N, C, L] as 2-D of [N, C, 1, L], against reference loops. */
static void test_conv_1d(void **state)
{
    (void)state;
    /* Conv: x [2, 4, 7], w [6, 2, 3] in 2 groups, stride 2, pads 1: L' = (7 + 2 - 3) / 2 + 1. */
    float x[2 * 4 * 7], w[6 * 2 * 3], bias[6] = {0.5f, -1, 2, 0, 1, -0.25f}, y[2 * 6 * 4];
    for (int k = 0; k < 56; k++)
        x[k] = (float)((k * 5) % 13) * 0.5f - 3.0f;
    for (int k = 0; k < 36; k++)
        w[k] = (float)((k * 7) % 10) * 0.2f - 1.0f;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 3, (int64_t[]){6, 2, 3}, w);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){6}, bias);
    Onnx__NodeProto *n =
        one_node(m, "Conv", 3, (int64_t[]){2, 4, 7}, TIDE_TEST_NAMES("x", "w", "b"));
    tide_test_onnx_attr_i(m, n, "group", 2);
    tide_test_onnx_attr_ints(m, n, "strides", 1, (int64_t[]){2});
    tide_test_onnx_attr_ints(m, n, "pads", 2, (int64_t[]){1, 1});
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 3, (int64_t[]){2, 6, 4});
    run_forward(b, &r, x, sizeof(x), y, 48);
    for (int nn = 0; nn < 2; nn++)
        for (int o = 0; o < 6; o++)
            for (int l = 0; l < 4; l++) {
                double want = bias[o];
                for (int ci = 0; ci < 2; ci++)
                    for (int t = 0; t < 3; t++) {
                        int at = l * 2 - 1 + t, c_in = (o / 3) * 2 + ci;
                        if (at >= 0 && at < 7)
                            want += (double)x[(nn * 4 + c_in) * 7 + at] * w[(o * 2 + ci) * 3 + t];
                    }
                assert_float_equal(y[(nn * 6 + o) * 4 + l], want, 1e-5);
            }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* ConvTranspose: x [1, 2, 4], w [2, 3, 3], stride 2, output_padding 1: L' = 2 * 3 + 3 + 1. */
    float yt[3 * 10];
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 3, (int64_t[]){2, 3, 3}, w);
    n = one_node(m, "ConvTranspose", 3, (int64_t[]){1, 2, 4}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_ints(m, n, "strides", 1, (int64_t[]){2});
    tide_test_onnx_attr_ints(m, n, "output_padding", 1, (int64_t[]){1});
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 3, (int64_t[]){1, 3, 10});
    run_forward(b, &r, x, 8 * sizeof(float), yt, 30);
    double want_t[30] = {0};
    for (int i = 0; i < 2; i++)
        for (int l = 0; l < 4; l++)
            for (int o = 0; o < 3; o++)
                for (int t = 0; t < 3; t++)
                    want_t[o * 10 + l * 2 + t] += (double)x[i * 4 + l] * w[(i * 3 + o) * 3 + t];
    for (int k = 0; k < 30; k++)
        assert_float_equal(yt[k], want_t[k], 1e-5);
    assert_float_equal(yt[9], 0, 0); /* the output_padding element */
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 3, (int64_t[]){6, 2, 3}, w);
    n = one_node(m, "Conv", 3, (int64_t[]){2, 4, 7}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_i(m, n, "group", 2);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    import_fails(m, NULL, "node n (Conv, opset 13): strides holds 2 values, not 1");
    tide_test_onnx_free(m);
}

/*
 * A dilated 2-D convolution by its definition, in float64: tap (r, q) of
 * output (i, j) reads input (i * sh - ph + r * dh, j * sw - pw + q * dw), in
 * channel groups; bias may be NULL. x [N, C, H, W], w [M, C / group, R, S].
 */
struct dil_geometry {
    int64_t x[4], w[4], group, sh, sw, ph, pw, dh, dw, oh, ow;
};

static void dilated_conv_ref(const struct dil_geometry *g, const float *x, const float *w,
                             const float *bias, double *y)
{
    int64_t cg = g->x[1] / g->group, mg = g->w[0] / g->group;
    for (int64_t n = 0; n < g->x[0]; n++)
        for (int64_t m = 0; m < g->w[0]; m++)
            for (int64_t i = 0; i < g->oh; i++)
                for (int64_t j = 0; j < g->ow; j++) {
                    double sum = bias ? bias[m] : 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < g->w[2]; r++)
                            for (int64_t q = 0; q < g->w[3]; q++) {
                                int64_t ih = i * g->sh - g->ph + r * g->dh;
                                int64_t iw = j * g->sw - g->pw + q * g->dw;
                                if (ih < 0 || ih >= g->x[2] || iw < 0 || iw >= g->x[3])
                                    continue;
                                int64_t xc = m / mg * cg + c;
                                sum += (double)x[((n * g->x[1] + xc) * g->x[2] + ih) * g->x[3] +
                                                 iw] *
                                       w[((m * cg + c) * g->w[2] + r) * g->w[3] + q];
                            }
                    y[((n * g->w[0] + m) * g->oh + i) * g->ow + j] = sum;
                }
}

/* Fills n values of v with a fixed pattern in [-1, 1). */
static void dil_fill(float *v, int64_t n, int64_t mul, int64_t mod)
{
    for (int64_t k = 0; k < n; k++)
        v[k] = (float)((k * mul) % mod) * 2.0f / (float)mod - 1.0f;
}

/*
 * Dilated Conv (DeepLab's atrous 2-D, WaveNet's 1-D) and ConvTranspose against float64
 * reference loops; auto_pad over the dilated span; a dilated 1-D Conv trains; the refusals.
 */
static void test_dilated_conv(void **state)
{
    (void)state;
    /*
     * 2-D: x [2, 4, 9, 8], W [6, 2, 3, 3] in 2 groups with bias, strides [1, 2], pads [2, 3],
     * dilations [2, 3]: OH = (9 + 4 - 5) / 1 + 1 = 9, OW = (8 + 6 - 7) / 2 + 1 = 4.
     */
    struct dil_geometry g = {{2, 4, 9, 8}, {6, 2, 3, 3}, 2, 1, 2, 2, 3, 2, 3, 9, 4};
    float x[2 * 4 * 9 * 8], w[6 * 2 * 3 * 3], bias[6] = {0.5f, -1, 0.25f, 2, 0, -0.75f};
    float y[2 * 6 * 9 * 4];
    double want[2 * 6 * 9 * 4];
    dil_fill(x, 576, 37, 17);
    dil_fill(w, 108, 11, 13);
    struct tide_test_onnx *m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "W", 4, g.w, w);
    tide_test_onnx_init_f(m, "B", 1, g.w, bias);
    Onnx__NodeProto *n = one_node(m, "Conv", 4, g.x, TIDE_TEST_NAMES("x", "W", "B"));
    tide_test_onnx_attr_i(m, n, "group", 2);
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){1, 2});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){2, 3, 2, 3});
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){2, 3});
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 4, (int64_t[]){2, 6, 9, 4});
    run_forward(b, &r, x, sizeof(x), y, 432);
    dilated_conv_ref(&g, x, w, bias, want);
    for (int k = 0; k < 432; k++)
        if (!(fabs(y[k] - want[k]) <= 1e-5 + 1e-4 * fabs(want[k])))
            fail_msg("2-D: y[%d] is %.9g, want %.9g", k, y[k], want[k]);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /*
     * auto_pad SAME_UPPER pads for the dilated span (ONNX's rule): x [1, 2, 7, 7], W [3, 2, 3,
     * 3], dilations [2, 2] span 5, so 4 pad cells per axis, 2 a side, and the output stays 7 x 7
     * (the undilated kernel would give 1 a side and 5 x 5).
     */
    struct dil_geometry same = {{1, 2, 7, 7}, {3, 2, 3, 3}, 1, 1, 1, 2, 2, 2, 2, 7, 7};
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "W", 4, same.w, w);
    n = one_node(m, "Conv", 4, same.x, TIDE_TEST_NAMES("x", "W"));
    tide_test_onnx_attr_s(m, n, "auto_pad", "SAME_UPPER");
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){2, 2});
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 4, (int64_t[]){1, 3, 7, 7});
    run_forward(b, &r, x, 98 * sizeof(float), y, 147);
    dilated_conv_ref(&same, x, w, NULL, want);
    for (int k = 0; k < 147; k++)
        if (!(fabs(y[k] - want[k]) <= 1e-5 + 1e-4 * fabs(want[k])))
            fail_msg("SAME_UPPER: y[%d] is %.9g, want %.9g", k, y[k], want[k]);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* 1-D (WaveNet): x [2, 3, 16], W [4, 3, 2], dilation 4 with bias: L' = 16 - 5 + 1 = 12. */
    struct dil_geometry wave = {{2, 3, 1, 16}, {4, 3, 1, 2}, 1, 1, 1, 0, 0, 1, 4, 1, 12};
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "W", 3, (int64_t[]){4, 3, 2}, w);
    tide_test_onnx_init_f(m, "B", 1, (int64_t[]){4}, bias);
    n = one_node(m, "Conv", 3, (int64_t[]){2, 3, 16}, TIDE_TEST_NAMES("x", "W", "B"));
    tide_test_onnx_attr_ints(m, n, "dilations", 1, (int64_t[]){4});
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 3, (int64_t[]){2, 4, 12});
    run_forward(b, &r, x, 96 * sizeof(float), y, 96);
    dilated_conv_ref(&wave, x, w, bias, want);
    for (int k = 0; k < 96; k++)
        if (!(fabs(y[k] - want[k]) <= 1e-5 + 1e-4 * fabs(want[k])))
            fail_msg("1-D: y[%d] is %.9g, want %.9g", k, y[k], want[k]);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /*
     * It trains: loss = mean(y^2) over the 96 outputs, so dL/dw[m, c, t] = sum over n, l of
     * 2 y[n, m, l] / 96 * x[n, c, l + 4 t]; one SGD step of 0.1.
     */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 3, (int64_t[]){4, 3, 2}, w);
    n = one_node(m, "Conv", 3, (int64_t[]){2, 3, 16}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_ints(m, n, "dilations", 1, (int64_t[]){4});
    float trained[24];
    train_one_step(m, x, 96 * sizeof(float), "w", trained, 24);
    dilated_conv_ref(&wave, x, w, NULL, want);
    for (int mm = 0; mm < 4; mm++)
        for (int c = 0; c < 3; c++)
            for (int t = 0; t < 2; t++) {
                double grad = 0;
                for (int nn = 0; nn < 2; nn++)
                    for (int l = 0; l < 12; l++)
                        grad += 2 * want[(nn * 4 + mm) * 12 + l] / 96 *
                                x[(nn * 3 + c) * 16 + l + 4 * t];
                int wi = (mm * 3 + c) * 2 + t;
                assert_float_equal(trained[wi], w[wi] - 0.1 * grad, 1e-6);
            }
    tide_test_onnx_free(m);

    /*
     * ConvTranspose: x [1, 2, 3, 3], w [2, 3, 3, 3], strides 2, dilations 2, pads 1,
     * output_padding 1: 2 * (3 - 1) + (3 - 1) * 2 + 1 + 1 - 2 = 8 per axis; input cell (ih,
     * iw) adds x * w[i, o, r, q] at (ih * 2 + r * 2 - 1, iw * 2 + q * 2 - 1).
     */
    float yt[3 * 8 * 8];
    double want_t[3 * 8 * 8] = {0};
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "w", 4, (int64_t[]){2, 3, 3, 3}, w);
    n = one_node(m, "ConvTranspose", 4, (int64_t[]){1, 2, 3, 3}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){1, 1, 1, 1});
    tide_test_onnx_attr_ints(m, n, "output_padding", 2, (int64_t[]){1, 1});
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 4, (int64_t[]){1, 3, 8, 8});
    run_forward(b, &r, x, 18 * sizeof(float), yt, 192);
    for (int i = 0; i < 2; i++)
        for (int ih = 0; ih < 3; ih++)
            for (int iw = 0; iw < 3; iw++)
                for (int o = 0; o < 3; o++)
                    for (int rr = 0; rr < 3; rr++)
                        for (int q = 0; q < 3; q++) {
                            int y0 = ih * 2 + rr * 2 - 1, y1 = iw * 2 + q * 2 - 1;
                            double xw = (double)x[(i * 3 + ih) * 3 + iw] *
                                        w[((i * 3 + o) * 3 + rr) * 3 + q];
                            if (y0 >= 0 && y0 < 8 && y1 >= 0 && y1 < 8)
                                want_t[(o * 8 + y0) * 8 + y1] += xw;
                        }
    for (int k = 0; k < 192; k++)
        assert_float_equal(yt[k], want_t[k], 1e-5);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Refusals: a dilation below 1, one of the wrong count, a span longer than the input. */
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "W", 4, same.w, w);
    n = one_node(m, "Conv", 4, same.x, TIDE_TEST_NAMES("x", "W"));
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){1, 0});
    import_fails(m, NULL, "node n (Conv, opset 11): dilations[1] is 0, not in 1..2147483647");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "W", 4, same.w, w);
    n = one_node(m, "Conv", 4, same.x, TIDE_TEST_NAMES("x", "W"));
    tide_test_onnx_attr_ints(m, n, "dilations", 1, (int64_t[]){2});
    import_fails(m, NULL, "node n (Conv, opset 11): dilations holds 1 values, not 2");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "W", 4, same.w, w);
    n = one_node(m, "Conv", 4, same.x, TIDE_TEST_NAMES("x", "W"));
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){4, 1});
    import_fails(m, NULL,
                 "node n (Conv, opset 11): node \"onnx/conv2d_0\" (Conv2D): kernel height 3 "
                 "dilated by 4 spans more than the padded input height 7 + 2 * 0 = 7 (input 0 "
                 "(x) is [1, 2, 7, 7])");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    tide_test_onnx_init_f(m, "w", 4, (int64_t[]){2, 3, 3, 3}, w);
    n = one_node(m, "ConvTranspose", 4, (int64_t[]){1, 2, 3, 3}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){-1, 2});
    import_fails(m, NULL,
                 "node n (ConvTranspose, opset 11): dilations[0] is -1, not in 1..2147483647");
    tide_test_onnx_free(m);
    /* The pools still refuse dilations, by name. */
    m = tide_test_onnx_new(12);
    n = one_node(m, "MaxPool", 4, same.x, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "kernel_shape", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "dilations", 2, (int64_t[]){2, 2});
    import_fails(m, NULL, "node n (MaxPool, opset 12): dilations other than 1 are not supported");
    tide_test_onnx_free(m);
}

/*
 * Slice with steps: on constants (a reversed shape list, folded at import) and on tensors
 * (a Gather of the picked indices along each stepped axis), which train.
 */
static void test_slice_steps(void **state)
{
    (void)state;
    /* x [3, 5] sliced rows 2..0 backwards (step -1) and columns 0, 2, 4 (step 2). */
    float x[15], y[9];
    for (int k = 0; k < 15; k++)
        x[k] = (float)k;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "starts", 1, (int64_t[]){2}, (int64_t[]){-1, 0});
    tide_test_onnx_init_i(m, "ends", 1, (int64_t[]){2}, (int64_t[]){INT64_MIN, 100});
    tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){2}, (int64_t[]){0, 1});
    tide_test_onnx_init_i(m, "steps", 1, (int64_t[]){2}, (int64_t[]){-1, 2});
    one_node(m, "Slice", 2, (int64_t[]){3, 5},
             TIDE_TEST_NAMES("x", "starts", "ends", "axes", "steps"));
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){3, 3});
    run_forward(b, &r, x, sizeof(x), y, 9);
    static const float want[9] = {10, 12, 14, 5, 7, 9, 0, 2, 4};
    for (int k = 0; k < 9; k++)
        assert_float_equal(y[k], want[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* A constant [6, 2, 99] reversed from its second-last element: the shape [2, 6]. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "dims", 1, (int64_t[]){3}, (int64_t[]){6, 2, 99});
    tide_test_onnx_init_i(m, "s0", 1, (int64_t[]){1}, (int64_t[]){-2});
    tide_test_onnx_init_i(m, "e0", 1, (int64_t[]){1}, (int64_t[]){-INT64_MAX});
    tide_test_onnx_init_i(m, "a0", 1, (int64_t[]){1}, (int64_t[]){0});
    tide_test_onnx_init_i(m, "st0", 1, (int64_t[]){1}, (int64_t[]){-1});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){3, 4}, -1);
    tide_test_onnx_node(m, "Slice", "s", TIDE_TEST_NAMES("dims", "s0", "e0", "a0", "st0"),
                        TIDE_TEST_NAMES("shape"));
    tide_test_onnx_node(m, "Reshape", "r", TIDE_TEST_NAMES("x", "shape"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 6});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Training: v [2, 4] (a Variable) sliced columns 3 and 1 (step -2), times x [2, 2]; loss
     * mean(y^2) over 4 elements, so each picked v moves by -0.1 * y * x / 2 and the rest stay. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "v", 2, (int64_t[]){2, 4}, (float[]){1, 2, 3, 4, 5, 6, 7, 8});
    tide_test_onnx_init_i(m, "s1", 1, (int64_t[]){1}, (int64_t[]){3});
    tide_test_onnx_init_i(m, "e1", 1, (int64_t[]){1}, (int64_t[]){0});
    tide_test_onnx_init_i(m, "a1", 1, (int64_t[]){1}, (int64_t[]){1});
    tide_test_onnx_init_i(m, "st1", 1, (int64_t[]){1}, (int64_t[]){-2});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 2}, -1);
    tide_test_onnx_node(m, "Slice", "s", TIDE_TEST_NAMES("v", "s1", "e1", "a1", "st1"),
                        TIDE_TEST_NAMES("p"));
    tide_test_onnx_node(m, "Mul", "m", TIDE_TEST_NAMES("p", "x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float v[8], xs[4] = {1, -1, 0.5f, 2};
    train_one_step(m, xs, sizeof(xs), "v", v, 8);
    /* p = [[4, 2], [8, 6]], y = p * x = [[4, -2], [4, 12]]; dL/dp = y * x / 2. */
    static const float want_v[8] = {1, 2 - 0.1f * -2 * -1 / 2.0f, 3, 4 - 0.1f * 4 * 1 / 2.0f,
                                    5, 6 - 0.1f * 12 * 2 / 2.0f,  7, 8 - 0.1f * 4 * 0.5f / 2.0f};
    for (int k = 0; k < 8; k++)
        assert_float_equal(v[k], want_v[k], 1e-6);
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "s1", 1, (int64_t[]){1}, (int64_t[]){0});
    tide_test_onnx_init_i(m, "e1", 1, (int64_t[]){1}, (int64_t[]){3});
    tide_test_onnx_init_i(m, "a1", 1, (int64_t[]){1}, (int64_t[]){1});
    tide_test_onnx_init_i(m, "st1", 1, (int64_t[]){1}, (int64_t[]){0});
    one_node(m, "Slice", 2, (int64_t[]){3, 5}, TIDE_TEST_NAMES("x", "s1", "e1", "a1", "st1"));
    import_fails(m, NULL,
                 "node n (Slice, opset 13): steps[0] is 0, not a non-zero value in "
                 "-2147483647..2147483647");
    tide_test_onnx_free(m);
}

/*
 * A pooling window by its definition, on one [h, w] plane: output (i, j) covers rows
 * [i s - pb0, i s - pb0 + k) and columns alike; max over the cells inside the input, or
 * their sum divided by the cells inside the input (count_pads false) or inside [-pb, in + pe)
 * (count_pads true). oh and ow are the output's size.
 */
struct pool_case {
    int64_t h, w, k, s, pb[2], pe[2], oh, ow;
    bool is_max, count_pads;
};

static double pool_ref(const struct pool_case *p, const float *x, int64_t i, int64_t j)
{
    int64_t r0 = i * p->s - p->pb[0], c0 = j * p->s - p->pb[1], count = 0;
    double acc = p->is_max ? -INFINITY : 0;
    for (int64_t r = r0; r < r0 + p->k; r++)
        for (int64_t q = c0; q < c0 + p->k; q++) {
            bool inside = r >= 0 && r < p->h && q >= 0 && q < p->w;
            bool padded =
                r >= -p->pb[0] && r < p->h + p->pe[0] && q >= -p->pb[1] && q < p->w + p->pe[1];
            count += p->count_pads ? padded : inside;
            if (inside)
                acc = p->is_max ? fmax(acc, x[r * p->w + q]) : acc + x[r * p->w + q];
        }
    return p->is_max ? acc : acc / (double)count;
}

static Onnx__NodeProto *pool_model(struct tide_test_onnx *m, const struct pool_case *p)
{
    Onnx__NodeProto *n = one_node(m, p->is_max ? "MaxPool" : "AveragePool", 4,
                                  (int64_t[]){1, 1, p->h, p->w}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "kernel_shape", 2, (int64_t[]){p->k, p->k});
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){p->s, p->s});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){p->pb[0], p->pb[1], p->pe[0], p->pe[1]});
    return n;
}

/*
 * Pads that differ between the sides, ceil_mode and count_include_pad: pools against their
 * definition, a Conv against a reference loop, and one SGD step through a rescaled average.
 */
static void test_window_pads(void **state)
{
    (void)state;
    float x[5 * 6], y[64];
    for (int k = 0; k < 30; k++)
        x[k] = (float)((k * 7) % 11) - 4.5f;
    static const struct pool_case cases[] = {
        /* One more pad at one end: (5 + 1 - 3) / 2 + 1 = 2 rows, (6 + 1 - 3) / 2 + 1 = 3
         * columns; max and both averages. */
        {5, 6, 3, 2, {0, 0}, {1, 1}, 2, 3, true, false},
        {5, 6, 3, 2, {0, 0}, {1, 1}, 2, 3, false, false},
        {5, 6, 3, 2, {1, 0}, {0, 1}, 2, 3, false, true},
        /* count_include_pad with even pads, floor sizes. */
        {5, 6, 3, 1, {1, 1}, {1, 1}, 5, 6, false, true},
        /* ceil_mode: (5 - 2) / 2 rounds up to 2, so 3 rows; (6 + 1 - 2) / 2 to 3, so 4 columns. */
        {5, 6, 2, 2, {0, 1}, {0, 0}, 3, 4, true, false},
        {5, 6, 2, 2, {0, 1}, {0, 0}, 3, 4, false, false},
        {5, 6, 2, 2, {0, 1}, {0, 0}, 3, 4, false, true},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct pool_case *p = &cases[c];
        struct tide_test_onnx *m = tide_test_onnx_new(13);
        Onnx__NodeProto *n = pool_model(m, p);
        bool ceil_mode = c >= 4;
        if (ceil_mode)
            tide_test_onnx_attr_i(m, n, "ceil_mode", 1);
        if (p->count_pads)
            tide_test_onnx_attr_i(m, n, "count_include_pad", 1);
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_shape(b, r.outputs[0], 4, (int64_t[]){1, 1, p->oh, p->ow});
        run_forward(b, &r, x, sizeof(x), y, (size_t)(p->oh * p->ow));
        for (int64_t i = 0; i < p->oh; i++)
            for (int64_t j = 0; j < p->ow; j++)
                if (fabs(y[i * p->ow + j] - pool_ref(p, x, i, j)) > 1e-5)
                    fail_msg("case %zu: output (%" PRId64 ", %" PRId64 ") is %.9g, want %.9g", c, i,
                             j, y[i * p->ow + j], pool_ref(p, x, i, j));
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }

    /* A window over an axis past int32 is refused before any size is computed from it. */
    struct tide_test_onnx *big = tide_test_onnx_new(13);
    Onnx__NodeProto *bn =
        one_node(big, "MaxPool", 4, (int64_t[]){1, 1, 2, 3000000000}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(big, bn, "kernel_shape", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_i(big, bn, "ceil_mode", 1);
    import_fails(big, NULL,
                 "node n (MaxPool, opset 13): spatial axis 1 of the input is 3000000000 long, "
                 "over 2147483647");
    tide_test_onnx_free(big);

    /* Conv with auto_pad SAME_UPPER at stride 2 on 5 x 6: pads [1, 0] before, [1, 1] after. */
    float w[9];
    for (int k = 0; k < 9; k++)
        w[k] = (float)(k % 4) - 1.5f;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 4, (int64_t[]){1, 1, 3, 3}, w);
    Onnx__NodeProto *n = one_node(m, "Conv", 4, (int64_t[]){1, 1, 5, 6}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_s(m, n, "auto_pad", "SAME_UPPER");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 4, (int64_t[]){1, 1, 3, 3});
    run_forward(b, &r, x, sizeof(x), y, 9);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double want = 0;
            for (int rr = 0; rr < 3; rr++)
                for (int q = 0; q < 3; q++) {
                    int at_r = i * 2 - 1 + rr, at_c = j * 2 + q; /* begin pads 1 (H), 0 (W) */
                    if (at_r >= 0 && at_r < 5 && at_c >= 0 && at_c < 6)
                        want += (double)x[at_r * 6 + at_c] * w[rr * 3 + q];
                }
            assert_float_equal(y[i * 3 + j], want, 1e-5);
        }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /*
     * Training: y = AveragePool(v * x) with v a Variable [1, 1, 5, 6], ceil_mode and
     * count_include_pad (case 6); loss = mean(y^2) over 12 outputs. Each v cell moves by
     * -0.1 * x * (sum over the windows holding it of 2 y / 12 / divisor).
     */
    const struct pool_case *p = &cases[6];
    float v0[30], v[30];
    for (int k = 0; k < 30; k++)
        v0[k] = 1.0f + 0.1f * (float)(k % 5);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "v", 4, (int64_t[]){1, 1, 5, 6}, v0);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, (int64_t[]){1, 1, 5, 6},
                         -1);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("v", "x"), TIDE_TEST_NAMES("vx"));
    n = tide_test_onnx_node(m, "AveragePool", "pool", TIDE_TEST_NAMES("vx"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_ints(m, n, "kernel_shape", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "strides", 2, (int64_t[]){2, 2});
    tide_test_onnx_attr_ints(m, n, "pads", 4, (int64_t[]){0, 1, 0, 0});
    tide_test_onnx_attr_i(m, n, "ceil_mode", 1);
    tide_test_onnx_attr_i(m, n, "count_include_pad", 1);
    tide_test_onnx_output(m, "y");
    train_one_step(m, x, sizeof(x), "v", v, 30);
    float vx[30];
    double grad[30] = {0};
    for (int k = 0; k < 30; k++)
        vx[k] = v0[k] * x[k];
    for (int64_t i = 0; i < p->oh; i++)
        for (int64_t j = 0; j < p->ow; j++) {
            double yo = pool_ref(p, vx, i, j), count = 0;
            int64_t r0 = i * p->s - p->pb[0], c0 = j * p->s - p->pb[1];
            for (int64_t rr = r0; rr < r0 + p->k; rr++)
                for (int64_t q = c0; q < c0 + p->k; q++)
                    count += rr >= -p->pb[0] && rr < p->h + p->pe[0] && q >= -p->pb[1] &&
                             q < p->w + p->pe[1];
            for (int64_t rr = r0; rr < r0 + p->k; rr++)
                for (int64_t q = c0; q < c0 + p->k; q++)
                    if (rr >= 0 && rr < p->h && q >= 0 && q < p->w)
                        grad[rr * p->w + q] += 2 * yo / 12.0 / count * x[rr * p->w + q];
        }
    for (int k = 0; k < 30; k++)
        assert_float_equal(v[k], v0[k] - 0.1 * grad[k], 1e-6);
    tide_test_onnx_free(m);
}

/* Pow with any constant exponent, HardSwish, Mish and LRN against their formulas. */
static void test_pow_activations_lrn(void **state)
{
    (void)state;
    float x[6] = {-2.5f, -1, 0, 0.5f, 1.25f, 3}, y[6];
    static const float exps[] = {3, -2, 1.5f, 0, 7, -0.5f, 1};
    for (size_t e = 0; e < sizeof(exps) / sizeof(exps[0]); e++) {
        struct tide_test_onnx *m = tide_test_onnx_new(13);
        tide_test_onnx_init_f(m, "p", 0, NULL, &exps[e]);
        one_node(m, "Pow", 1, (int64_t[]){6}, TIDE_TEST_NAMES("x", "p"));
        struct tide_onnx_result r;
        /* The exponent is a float initializer: frozen, so it is a constant. */
        struct tide_onnx_options o = {.frozen = (const char *const[]){"p"}, .n_frozen = 1};
        tide_builder *b = import_ok(m, &o, &r);
        run_forward(b, &r, x, sizeof(x), y, 6);
        for (int k = 0; k < 6; k++) {
            float want = powf(x[k], exps[e]);
            if (isnan(want))
                assert_true(isnan(y[k]));
            else if (isinf(want))
                assert_true(isinf(y[k]) && (y[k] > 0) == (want > 0));
            else if (fabsf(y[k] - want) > 1e-5f + 1e-5f * fabsf(want))
                fail_msg("Pow exponent %g at %g: %.9g, want %.9g", exps[e], x[k], y[k], want);
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
    for (int op = 0; op < 2; op++) {
        struct tide_test_onnx *m = tide_test_onnx_new(op ? 18 : 14);
        one_node(m, op ? "Mish" : "HardSwish", 1, (int64_t[]){6}, TIDE_TEST_NAMES("x"));
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        run_forward(b, &r, x, sizeof(x), y, 6);
        for (int k = 0; k < 6; k++) {
            double v = x[k];
            double want = op ? v * tanh(log1p(exp(v))) : v * fmax(0, fmin(1, v / 6 + 0.5));
            assert_float_equal(y[k], want, 1e-6);
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }

    /* LRN over x [1, 5, 1, 2], size 4 (one channel before, two after), against its formula. */
    float lx[10], ly[10];
    for (int k = 0; k < 10; k++)
        lx[k] = (float)k - 3.5f;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    Onnx__NodeProto *n = one_node(m, "LRN", 4, (int64_t[]){1, 5, 1, 2}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "size", 4);
    tide_test_onnx_attr_f(m, n, "alpha", 0.3f);
    tide_test_onnx_attr_f(m, n, "beta", 0.6f);
    tide_test_onnx_attr_f(m, n, "bias", 2.0f);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    run_forward(b, &r, lx, sizeof(lx), ly, 10);
    for (int ch = 0; ch < 5; ch++)
        for (int pos = 0; pos < 2; pos++) {
            double sum = 0;
            for (int i = ch - 1; i <= ch + 2; i++)
                if (i >= 0 && i < 5)
                    sum += (double)lx[i * 2 + pos] * lx[i * 2 + pos];
            double want = lx[ch * 2 + pos] / pow(2.0 + 0.3 / 4 * sum, 0.6);
            assert_float_equal(ly[ch * 2 + pos], want, 1e-5);
        }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    n = one_node(m, "LRN", 4, (int64_t[]){1, 5, 1, 2}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "size", 0);
    import_fails(m, NULL, "node n (LRN, opset 13): size is 0, not in 1..2147483647");
    tide_test_onnx_free(m);

    /* Pow trains: y = (v x)^3, loss mean(y^2) over 2, so v moves by -0.1 * 3 y (v x)^2 x. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "v", 1, (int64_t[]){2}, (float[]){0.5f, -1});
    tide_test_onnx_init_f(m, "p", 0, NULL, (float[]){3});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("v", "x"), TIDE_TEST_NAMES("vx"));
    tide_test_onnx_node(m, "Pow", "pow", TIDE_TEST_NAMES("vx", "p"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float v[3];
    train_one_step_frozen(m, (float[]){2, 0.5f}, 2 * sizeof(float), "p", "v", v, 2);
    /* vx = 1, -0.5; y = 1, -0.125. */
    assert_float_equal(v[0], 0.5 - 0.1 * 3 * 1 * 1 * 2, 1e-6);
    assert_float_equal(v[1], -1 - 0.1 * 3 * -0.125 * 0.25 * 0.5, 1e-6);
    tide_test_onnx_free(m);
}

/*
 * Pow of two tensors: x [2, 3] ^ y [3], both graph inputs, against powf
 * (negative bases with integral exponents, 0^0, 0^-1, a fractional power of
 * a negative base); a trainable exponent initializer p [1] (GeM pooling's)
 * takes one SGD step by its gradient, a zero base contributing 0 to it as
 * in PyTorch; integer bases and exponents are refused, naming them.
 */
static void test_pow_tensors(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(15);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_input(m, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
    tide_test_onnx_node(m, "Pow", "pow", TIDE_TEST_NAMES("x", "y"), TIDE_TEST_NAMES("z"));
    tide_test_onnx_output(m, "z");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 3});
    uint8_t *graph;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &graph, &len), 0);
    const char *fetch = tide_builder_name(b, r.outputs[0]);
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.fetches = &fetch;
    o.n_fetches = 1;
    struct tide_session *s;
    struct tide_error err = {0};
    if (tide_session_new(graph, len, &o, &s, &err) != TIDE_OK)
        fail_msg("session: %s", err.message);
    free(graph);
    const float x[6] = {-2, 0, 0, -3, 1.5f, -4}, y[3] = {3, 0, -1.5f};
    assert_int_equal(tide_session_feed(s, tide_builder_name(b, r.inputs[0]), x, sizeof(x), &err),
                     TIDE_OK);
    assert_int_equal(tide_session_feed(s, tide_builder_name(b, r.inputs[1]), y, sizeof(y), &err),
                     TIDE_OK);
    struct tide_step_stats stats;
    if (tide_session_eval(s, &stats, &err) != TIDE_OK)
        fail_msg("eval: %s", err.message);
    float z[6];
    assert_int_equal(tide_session_fetch(s, fetch, z, sizeof(z), &err), TIDE_OK);
    for (int k = 0; k < 6; k++) {
        float want = powf(x[k], y[k % 3]);
        if (isnan(want) ? !isnan(z[k]) : memcmp(&z[k], &want, sizeof(float)) != 0)
            fail_msg("Pow %g ^ %g is %.9g, want %.9g", x[k], y[k % 3], z[k], want);
    }
    assert_true(z[0] == -8 && z[1] == 1 && z[2] == INFINITY && z[3] == -27 && z[4] == 1 &&
                isnan(z[5]));
    tide_session_free(s);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /*
     * y = x^p with p = 3 an initializer, trained; loss mean(y^2) over 4, so
     * dL/dp = (2 / 4) sum y_k * y_k ln x_k, and x = 0 adds 0 (not 0 * -inf).
     */
    m = tide_test_onnx_new(15);
    tide_test_onnx_init_f(m, "p", 1, (int64_t[]){1}, (float[]){3});
    one_node(m, "Pow", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "p"));
    const float xp[4] = {0.5f, 0, 1.25f, 2};
    float p_after;
    train_one_step(m, xp, sizeof(xp), "p", &p_after, 1);
    double grad = 0;
    for (int k = 0; k < 4; k++)
        if (xp[k] != 0)
            grad += 0.5 * pow(xp[k], 6) * log(xp[k]);
    assert_true(grad > 1); /* a step the test can see */
    /* Not assert_float_equal, which a NaN passes. */
    if (!(fabs(p_after - (3 - 0.1 * grad)) <= 1e-5))
        fail_msg("p after one step is %.9g, want %.9g", p_after, 3 - 0.1 * grad);
    tide_test_onnx_free(m);

    /* Integer tensors: the base, then the exponent, named. */
    for (int k = 0; k < 2; k++) {
        m = tide_test_onnx_new(15);
        tide_test_onnx_input(
            m, "x", k ? ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT : ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
            1, (int64_t[]){3}, -1);
        tide_test_onnx_input(
            m, "e", k ? ONNX__TENSOR_PROTO__DATA_TYPE__INT64 : ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
            1, (int64_t[]){3}, -1);
        tide_test_onnx_node(m, "Pow", "pw", TIDE_TEST_NAMES("x", "e"), TIDE_TEST_NAMES("z"));
        tide_test_onnx_output(m, "z");
        import_fails(m, NULL,
                     k ? "node pw (Pow, opset 15): input 1 (\"e\", the exponent) is an integer "
                         "tensor; Pow of tensors computed in the graph is float32 only"
                       : "node pw (Pow, opset 15): input 0 (\"x\", the base) is an integer "
                         "tensor; Pow of tensors computed in the graph is float32 only");
        tide_test_onnx_free(m);
    }
}

/*
 * 3-D windows, against their definitions: Conv (2 groups, strides, pads, bias; and one SGD
 * step, whose weight update is -lr dL/dw worked out by loops) and the pools (ceil_mode and
 * count_include_pad through the depth).
 */
struct conv3d_case {
    int64_t n, c, d, h, w, k, group, kd, kh, kw, s[3], p[3], od, oh, ow;
};

/* y = conv3d(x, w) + b; with g not NULL, dw += the weight gradient for dL/dy = g instead. */
static void conv3d_ref(const struct conv3d_case *q, const float *x, const float *w, const float *b,
                       float *y, const float *g, double *dw)
{
    int64_t cg = q->c / q->group, kg = q->k / q->group;
    for (int64_t n = 0; n < q->n; n++)
        for (int64_t k = 0; k < q->k; k++)
            for (int64_t od = 0; od < q->od; od++)
                for (int64_t oh = 0; oh < q->oh; oh++)
                    for (int64_t ow = 0; ow < q->ow; ow++) {
                        int64_t yi = (((n * q->k + k) * q->od + od) * q->oh + oh) * q->ow + ow;
                        double acc = b ? b[k] : 0;
                        for (int64_t ci = 0; ci < cg; ci++)
                            for (int64_t t = 0; t < q->kd; t++)
                                for (int64_t r = 0; r < q->kh; r++)
                                    for (int64_t u = 0; u < q->kw; u++) {
                                        int64_t zd = od * q->s[0] - q->p[0] + t,
                                                zh = oh * q->s[1] - q->p[1] + r,
                                                zw = ow * q->s[2] - q->p[2] + u;
                                        if (zd < 0 || zd >= q->d || zh < 0 || zh >= q->h ||
                                            zw < 0 || zw >= q->w)
                                            continue;
                                        int64_t c = (k / kg) * cg + ci;
                                        int64_t xi =
                                            (((n * q->c + c) * q->d + zd) * q->h + zh) * q->w + zw;
                                        int64_t wi =
                                            (((k * cg + ci) * q->kd + t) * q->kh + r) * q->kw + u;
                                        if (g)
                                            dw[wi] += (double)g[yi] * x[xi];
                                        else
                                            acc += (double)x[xi] * w[wi];
                                    }
                        if (!g)
                            y[yi] = (float)acc;
                    }
}

static void test_windows_3d(void **state)
{
    (void)state;
    /* x [1, 4, 5, 4, 3], w [6, 2, 3, 2, 2] in 2 groups, strides 2, 1, 2, pads 1, 0, 1. */
    static const struct conv3d_case q = {1, 4, 5,         4,         3, 6, 2, 3,
                                         2, 2, {2, 1, 2}, {1, 0, 1}, 3, 3, 2};
    float x[240], w[144], bias[6] = {0.25f, -0.5f, 1, 0, -1, 0.5f}, y[108], want[108];
    for (int k = 0; k < 240; k++)
        x[k] = (float)((k * 7) % 17) * 0.25f - 2.0f;
    for (int k = 0; k < 144; k++)
        w[k] = (float)((k * 5) % 11) * 0.1f - 0.5f;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "w", 5, (int64_t[]){6, 2, 3, 2, 2}, w);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){6}, bias);
    Onnx__NodeProto *n =
        one_node(m, "Conv", 5, (int64_t[]){1, 4, 5, 4, 3}, TIDE_TEST_NAMES("x", "w", "b"));
    tide_test_onnx_attr_i(m, n, "group", 2);
    tide_test_onnx_attr_ints(m, n, "strides", 3, q.s);
    tide_test_onnx_attr_ints(m, n, "pads", 6, (int64_t[]){1, 0, 1, 1, 0, 1});
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 5, (int64_t[]){1, 6, 3, 3, 2});
    run_forward(b, &r, x, sizeof(x), y, 108);
    conv3d_ref(&q, x, w, bias, want, NULL, NULL);
    for (int k = 0; k < 108; k++)
        assert_float_equal(y[k], want[k], 1e-5);
    tide_onnx_result_free(&r);
    tide_builder_free(b);

    /* auto_pad SAME_UPPER: pads 1 and 1 in depth but 0 and 1 on H and W (even_pads' uneven
     * part, a Concat of zeros); the output is ceil(5 / 2) x 4 x ceil(3 / 2). */
    static const struct conv3d_case same = {1, 4, 5, 4, 3, 6, 2, 3, 2, 2, {2, 1, 2}, {1, 0, 0},
                                            3, 4, 2};
    float ys[144], wants[144];
    struct tide_test_onnx *ms = tide_test_onnx_new(13);
    tide_test_onnx_init_f(ms, "w", 5, (int64_t[]){6, 2, 3, 2, 2}, w);
    n = one_node(ms, "Conv", 5, (int64_t[]){1, 4, 5, 4, 3}, TIDE_TEST_NAMES("x", "w"));
    tide_test_onnx_attr_i(ms, n, "group", 2);
    tide_test_onnx_attr_ints(ms, n, "strides", 3, same.s);
    tide_test_onnx_attr_s(ms, n, "auto_pad", "SAME_UPPER");
    tide_builder *bs = import_ok(ms, NULL, &r);
    assert_shape(bs, r.outputs[0], 5, (int64_t[]){1, 6, 3, 4, 2});
    run_forward(bs, &r, x, sizeof(x), ys, 144);
    conv3d_ref(&same, x, w, NULL, wants, NULL, NULL);
    for (int k = 0; k < 144; k++)
        assert_float_equal(ys[k], wants[k], 1e-5);
    tide_onnx_result_free(&r);
    tide_builder_free(bs);
    tide_test_onnx_free(ms);

    /* It trains: loss mean(y^2) over 108 outputs; SGD at 0.1 moves w by -0.1 dL/dw. */
    float w_after[144], g[108];
    double dw[144] = {0};
    train_one_step(m, x, sizeof(x), "w", w_after, 144);
    for (int k = 0; k < 108; k++)
        g[k] = 2.0f * want[k] / 108.0f;
    conv3d_ref(&q, x, w, NULL, NULL, g, dw);
    for (int k = 0; k < 144; k++)
        assert_float_equal(w_after[k], w[k] - 0.1 * dw[k], 1e-5);
    tide_test_onnx_free(m);

    /* Pools over x's first channel [1, 1, 5, 4, 3]: window 2 x 3 x 2, strides 2, ceil_mode. */
    for (int is_max = 0; is_max < 2; is_max++) {
        for (int count_pads = 0; count_pads < 2 - is_max; count_pads++) {
            m = tide_test_onnx_new(13);
            n = one_node(m, is_max ? "MaxPool" : "AveragePool", 5, (int64_t[]){1, 1, 5, 4, 3},
                         TIDE_TEST_NAMES("x"));
            tide_test_onnx_attr_ints(m, n, "kernel_shape", 3, (int64_t[]){2, 3, 2});
            tide_test_onnx_attr_ints(m, n, "strides", 3, (int64_t[]){2, 2, 2});
            tide_test_onnx_attr_ints(m, n, "pads", 6, (int64_t[]){1, 1, 0, 0, 1, 1});
            tide_test_onnx_attr_i(m, n, "ceil_mode", 1);
            if (count_pads)
                tide_test_onnx_attr_i(m, n, "count_include_pad", 1);
            b = import_ok(m, NULL, &r);
            /* depth: (5 + 1 - 2) / 2 rounds to 2, so 3; rows (4 + 2 - 3) / 2 to 2, so 3;
             * columns (3 + 1 - 2) / 2 = 1, so 2. */
            assert_shape(b, r.outputs[0], 5, (int64_t[]){1, 1, 3, 3, 2});
            run_forward(b, &r, x, 60 * sizeof(float), y, 18);
            static const int64_t pb[3] = {1, 1, 0}, pe[3] = {0, 1, 1},
                                 in[3] = {5, 4, 3};
            for (int64_t o = 0; o < 18; o++) {
                int64_t at[3] = {o / 6, o / 2 % 3, o % 2}, cells = 0;
                double acc = is_max ? -INFINITY : 0;
                for (int64_t t = 0; t < 12; t++) {
                    int64_t z[3] = {at[0] * 2 - pb[0] + t / 6, at[1] * 2 - pb[1] + t / 2 % 3,
                                    at[2] * 2 - pb[2] + t % 2};
                    bool inside = true, padded = true;
                    for (int a = 0; a < 3; a++) {
                        inside &= z[a] >= 0 && z[a] < in[a];
                        padded &= z[a] >= -pb[a] && z[a] < in[a] + pe[a];
                    }
                    cells += count_pads ? padded : inside;
                    if (inside) {
                        float v = x[(z[0] * 4 + z[1]) * 3 + z[2]];
                        acc = is_max ? fmax(acc, v) : acc + v;
                    }
                }
                double expect = is_max ? acc : acc / (double)cells;
                if (fabs(y[o] - expect) > 1e-5)
                    fail_msg("%s count_pads %d: output %" PRId64 " is %.9g, want %.9g",
                             is_max ? "MaxPool" : "AveragePool", count_pads, o, y[o], expect);
            }
            tide_onnx_result_free(&r);
            tide_builder_free(b);
            tide_test_onnx_free(m);
        }
    }
}

/* Expand on a tensor: forward values, and one SGD step through its gradient (BroadcastTo's:
 * dy summed over the broadcast axes). */
static void test_expand_trains(void **state)
{
    (void)state;
    /* x [3, 1] expanded to [2, 3, 2]: a leading axis added, the last widened. */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "shape", 1, (int64_t[]){3}, (int64_t[]){2, 1, 2});
    one_node(m, "Expand", 2, (int64_t[]){3, 1}, TIDE_TEST_NAMES("x", "shape"));
    static const float want[12] = {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3};
    expect_values(m, (float[]){1, 2, 3}, 3, 3, (int64_t[]){2, 3, 2}, want, 12);

    /* v [3, 1] (a Variable) expanded to [2, 3, 2], times x; loss mean(y^2) over 12 elements:
     * dL/dv[i] = sum over the 4 copies of v[i] of 2 y x / 12 = v[i] * sum(x^2) / 6 there. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "v", 2, (int64_t[]){3, 1}, (float[]){1, -2, 3});
    tide_test_onnx_init_i(m, "shape", 1, (int64_t[]){3}, (int64_t[]){2, 3, 2});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){2, 3, 2},
                         -1);
    tide_test_onnx_node(m, "Expand", "e", TIDE_TEST_NAMES("v", "shape"), TIDE_TEST_NAMES("p"));
    tide_test_onnx_node(m, "Mul", "m", TIDE_TEST_NAMES("p", "x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float x[12], v[3];
    for (int k = 0; k < 12; k++)
        x[k] = 0.25f * (float)(k % 5) - 0.5f;
    train_one_step(m, x, sizeof(x), "v", v, 3);
    static const float v0[3] = {1, -2, 3};
    for (int i = 0; i < 3; i++) {
        double sq = 0;
        for (int a = 0; a < 2; a++)
            for (int j = 0; j < 2; j++)
                sq += (double)x[a * 6 + i * 2 + j] * x[a * 6 + i * 2 + j];
        assert_float_equal(v[i], v0[i] - 0.1 * v0[i] * sq / 6, 1e-6);
    }
    tide_test_onnx_free(m);
}

/* A Constant node named name holding a float tensor. */
static void float_constant(struct tide_test_onnx *m, const char *name, int32_t rank,
                           const int64_t *dims, const float *data)
{
    Onnx__NodeProto *k =
        tide_test_onnx_node(m, "Constant", name, TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES(name));
    tide_test_onnx_attr_t(m, k, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank,
                                                dims, data));
}

/* Tile: values against numpy.tile's by hand, the rounds of 3 tiled axes, Tile-1's tiles and
 * axis, the constant fold, one SGD step through it (BroadcastTo's gradient sums the copies);
 * the refusals. */
static void test_tile(void **state)
{
    (void)state;
    /* x [2, 3] = 0..5 tiled [2, 2]: rows [0 1 2 0 1 2] and [3 4 5 3 4 5], twice. */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){2}, (int64_t[]){2, 2});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "reps"));
    static const float want[24] = {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5,
                                   0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5};
    expect_values(m, (float[]){0, 1, 2, 3, 4, 5}, 6, 2, (int64_t[]){4, 6}, want, 24);

    /* Rank 5, every axis tiled: two rounds (3 axes, then 2; in one, the broadcast would have
     * rank 10). y at each coordinate is x at the coordinate modulo x's dims [1, 2, 1, 1, 2]. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){5}, (int64_t[]){2, 2, 2, 2, 2});
    one_node(m, "Tile", 5, (int64_t[]){1, 2, 1, 1, 2}, TIDE_TEST_NAMES("x", "reps"));
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 5, (int64_t[]){2, 4, 2, 2, 4});
    float y5[128];
    run_forward(b, &r, (float[]){0, 1, 10, 11}, 4 * sizeof(float), y5, 128);
    for (int k = 0; k < 128; k++) {
        int w = k % 4, ch = k / 16 % 4; /* axes 1 and 4 carry x */
        assert_float_equal(y5[k], 10 * (ch % 2) + w % 2, 0);
    }
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Tile-1: tiles 3 along axis 1 (int64 scalars), and as floats holding integers. */
    for (int as_float = 0; as_float < 2; as_float++) {
        m = tide_test_onnx_new(1);
        if (as_float) {
            float_constant(m, "tiles", 0, NULL, (float[]){3});
            float_constant(m, "axis", 0, NULL, (float[]){-1});
        } else {
            tide_test_onnx_init_i(m, "tiles", 0, NULL, (int64_t[]){3});
            tide_test_onnx_init_i(m, "axis", 0, NULL, (int64_t[]){1});
        }
        one_node(m, "Tile", 2, (int64_t[]){2, 2}, TIDE_TEST_NAMES("x", "tiles", "axis"));
        static const float want1[12] = {1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4};
        expect_values(m, (float[]){1, 2, 3, 4}, 4, 2, (int64_t[]){2, 6}, want1, 12);
    }

    /* On a constant it folds: Tile([[1], [2]], [1, 3]) + x. */
    m = tide_test_onnx_new(13);
    float_constant(m, "k", 2, (int64_t[]){2, 1}, (float[]){1, 2});
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){2}, (int64_t[]){1, 3});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_node(m, "Tile", "t", TIDE_TEST_NAMES("k", "reps"), TIDE_TEST_NAMES("kt"));
    tide_test_onnx_node(m, "Add", "a", TIDE_TEST_NAMES("x", "kt"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    static const float want_fold[6] = {1.5f, 1.5f, 1.5f, 2.5f, 2.5f, 2.5f};
    expect_values(m, (float[]){0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f}, 6, 2, (int64_t[]){2, 3},
                  want_fold, 6);

    /* Training: v [1, 2] (a Variable) tiled [2, 3] to [2, 6], times x; loss mean(y^2) over 12:
     * dL/dv[j] = sum over v[j]'s 6 copies (columns j, j + 2, j + 4) of 2 y x / 12. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "v", 2, (int64_t[]){1, 2}, (float[]){2, -1});
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){2}, (int64_t[]){2, 3});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 6}, -1);
    tide_test_onnx_node(m, "Tile", "t", TIDE_TEST_NAMES("v", "reps"), TIDE_TEST_NAMES("p"));
    tide_test_onnx_node(m, "Mul", "m", TIDE_TEST_NAMES("p", "x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float x[12], v[2];
    for (int k = 0; k < 12; k++)
        x[k] = 0.5f * (float)(k % 7) - 1;
    train_one_step(m, x, sizeof(x), "v", v, 2);
    static const float v0[2] = {2, -1};
    for (int j = 0; j < 2; j++) {
        double sq = 0;
        for (int k = j; k < 12; k += 2)
            sq += (double)x[k] * x[k];
        assert_float_equal(v[j], v0[j] - 0.1 * v0[j] * sq / 6, 1e-6);
    }
    tide_test_onnx_free(m);

    /* Refusals. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){1}, (int64_t[]){2});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "reps"));
    import_fails(m, NULL, "node n (Tile, opset 13): repeats holds 1 values for an input of rank 2");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){2}, (int64_t[]){1, -2});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "reps"));
    import_fails(m, NULL, "node n (Tile, opset 13): repeats[1] is -2, negative");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "reps", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){2}, -1);
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "reps"));
    import_fails(m, NULL,
                 "node n (Tile, opset 13): repeats (input \"reps\") must be a constant known at "
                 "import");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "reps", 1, (int64_t[]){2}, (int64_t[]){INT64_MAX, 1});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "reps"));
    import_fails(m, NULL,
                 "node n (Tile, opset 13): axis 0 of size 2 repeated 9223372036854775807 times "
                 "overflows");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(1);
    tide_test_onnx_init_i(m, "tiles", 1, (int64_t[]){2}, (int64_t[]){2, 2});
    tide_test_onnx_init_i(m, "axis", 0, NULL, (int64_t[]){0});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "tiles", "axis"));
    import_fails(m, NULL, "node n (Tile, opset 1): tiles (input \"tiles\") holds 2 values, not 1");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(1);
    tide_test_onnx_init_i(m, "tiles", 0, NULL, (int64_t[]){2});
    float_constant(m, "axis", 0, NULL, (float[]){0.5f});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "tiles", "axis"));
    import_fails(m, NULL, "node n (Tile, opset 1): axis (input \"axis\") is 0.5, not an integer");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(1);
    tide_test_onnx_init_i(m, "tiles", 0, NULL, (int64_t[]){2});
    tide_test_onnx_init_i(m, "axis", 0, NULL, (int64_t[]){2});
    one_node(m, "Tile", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x", "tiles", "axis"));
    import_fails(m, NULL, "node n (Tile, opset 1): axis 2 is out of range for rank 2");
    tide_test_onnx_free(m);
}

/* DepthToSpace (DCR and CRD) and SpaceToDepth against ONNX's formulas worked by hand, a round
 * trip, one SGD step through DepthToSpace; the refusals. */
static void test_depth_space(void **state)
{
    (void)state;
    /* x [1, 4, 1, 2], channels [0 1], [2 3], [4 5], [6 7], blocksize 2: y[0][0][2h + i][2w + j]
     * is channel 2i + j at (h, w), so rows [0 2 1 3] and [4 6 5 7]. */
    static const float seq[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_attr_i(m, one_node(m, "DepthToSpace", 4, (int64_t[]){1, 4, 1, 2},
                                      TIDE_TEST_NAMES("x")),
                          "blocksize", 2);
    static const float interleaved[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    expect_values(m, seq, 8, 4, (int64_t[]){1, 1, 2, 4}, interleaved, 8);

    /* x [1, 8, 1, 1] = 0..7, blocksize 2 to [1, 2, 2, 2]: DCR reads channel 4i + 2j + c
     * (blocks outermost), CRD 4c + 2i + j (depth outermost, so the order stays). */
    static const float dcr[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int crd = 0; crd < 2; crd++) {
        m = tide_test_onnx_new(13);
        Onnx__NodeProto *n =
            one_node(m, "DepthToSpace", 4, (int64_t[]){1, 8, 1, 1}, TIDE_TEST_NAMES("x"));
        tide_test_onnx_attr_i(m, n, "blocksize", 2);
        tide_test_onnx_attr_s(m, n, "mode", crd ? "CRD" : "DCR");
        expect_values(m, seq, 8, 4, (int64_t[]){1, 2, 2, 2}, crd ? seq : dcr, 8);
    }
    /* DepthToSpace-1 has no mode: DCR. */
    m = tide_test_onnx_new(1);
    tide_test_onnx_attr_i(m, one_node(m, "DepthToSpace", 4, (int64_t[]){1, 8, 1, 1},
                                      TIDE_TEST_NAMES("x")),
                          "blocksize", 2);
    expect_values(m, seq, 8, 4, (int64_t[]){1, 2, 2, 2}, dcr, 8);

    /* SpaceToDepth of x [1, 1, 2, 4] = rows [0 1 2 3], [4 5 6 7]: channel 2i + j at (h, w) is
     * x[2h + i][2w + j], so channels [0 2], [1 3], [4 6], [5 7]. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_attr_i(m, one_node(m, "SpaceToDepth", 4, (int64_t[]){1, 1, 2, 4},
                                      TIDE_TEST_NAMES("x")),
                          "blocksize", 2);
    expect_values(m, seq, 8, 4, (int64_t[]){1, 4, 1, 2}, interleaved, 8);

    /* SpaceToDepth undoes DepthToSpace (DCR): x [2, 4, 1, 2] comes back. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, (int64_t[]){2, 4, 1, 2},
                         -1);
    tide_test_onnx_attr_i(
        m, tide_test_onnx_node(m, "DepthToSpace", "d", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("s")),
        "blocksize", 2);
    tide_test_onnx_attr_i(
        m, tide_test_onnx_node(m, "SpaceToDepth", "e", TIDE_TEST_NAMES("s"), TIDE_TEST_NAMES("y")),
        "blocksize", 2);
    tide_test_onnx_output(m, "y");
    expect_values(m, seq, 16, 4, (int64_t[]){2, 4, 1, 2}, seq, 16);

    /* Training: v [1, 8, 1, 1] (a Variable) through DepthToSpace DCR, times x; loss mean(y^2)
     * over 8: y[k] = v[src[k]] x[k], so v[src[k]] moves by -0.1 * 2 y[k] x[k] / 8. */
    m = tide_test_onnx_new(13);
    static const float v0[8] = {1, -2, 3, -4, 5, -6, 7, -8};
    tide_test_onnx_init_f(m, "v", 4, (int64_t[]){1, 8, 1, 1}, v0);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, (int64_t[]){1, 2, 2, 2},
                         -1);
    tide_test_onnx_attr_i(
        m, tide_test_onnx_node(m, "DepthToSpace", "d", TIDE_TEST_NAMES("v"), TIDE_TEST_NAMES("p")),
        "blocksize", 2);
    tide_test_onnx_node(m, "Mul", "m", TIDE_TEST_NAMES("p", "x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    static const float x[8] = {0.5f, -1, 1.5f, 2, -0.25f, 1, 3, -2};
    float v[8];
    train_one_step(m, x, sizeof(x), "v", v, 8);
    static const int src[8] = {0, 2, 4, 6, 1, 3, 5, 7};
    for (int k = 0; k < 8; k++)
        assert_float_equal(v[src[k]], v0[src[k]] - 0.1 * v0[src[k]] * x[k] * x[k] / 4, 1e-6);
    tide_test_onnx_free(m);

    /* Refusals. */
    static const struct {
        const char *op;
        int32_t rank;
        int64_t dims[4];
        int64_t blocksize; /* 0: absent */
        const char *mode;
        const char *want;
    } bad[] = {
        {"DepthToSpace", 3, {4, 2, 2}, 2, NULL,
         "node n (DepthToSpace, opset 13): input 0 has shape [4, 2, 2]; DepthToSpace takes [N, "
         "C, H, W]"},
        {"SpaceToDepth", 4, {1, 1, 2, 2}, 0, NULL,
         "node n (SpaceToDepth, opset 13): attribute blocksize is required"},
        {"DepthToSpace", 4, {1, 4, 2, 2}, -1, NULL,
         "node n (DepthToSpace, opset 13): blocksize -1 is not positive"},
        {"DepthToSpace", 4, {1, 6, 2, 2}, 2, NULL,
         "node n (DepthToSpace, opset 13): input 0's 6 channels are not a multiple of blocksize "
         "2 squared"},
        {"DepthToSpace", 4, {1, 4, 2, 2}, 2, "RDC",
         "node n (DepthToSpace, opset 13): mode \"RDC\" is not one of DCR, CRD"},
        {"SpaceToDepth", 4, {1, 1, 4, 3}, 2, NULL,
         "node n (SpaceToDepth, opset 13): input 0's H 4 and W 3 are not both multiples of "
         "blocksize 2"},
        {"DepthToSpace", 4, {1, 4, 1, 1}, INT64_MAX, NULL,
         "node n (DepthToSpace, opset 13): input 0's 4 channels are not a multiple of blocksize "
         "9223372036854775807 squared"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        m = tide_test_onnx_new(13);
        Onnx__NodeProto *n = one_node(m, bad[k].op, bad[k].rank, bad[k].dims, TIDE_TEST_NAMES("x"));
        if (bad[k].blocksize)
            tide_test_onnx_attr_i(m, n, "blocksize", bad[k].blocksize);
        if (bad[k].mode)
            tide_test_onnx_attr_s(m, n, "mode", bad[k].mode);
        import_fails(m, NULL, bad[k].want);
        tide_test_onnx_free(m);
    }
}

/*
 * Model: cond = op(a, b) of int64 constants (with Not after it when negate), then
 * y = Where(cond, x, -x) on x [4] = 1..4; imports, runs and compares y with want's signs.
 */
static void expect_condition(const char *op, const int64_t *a, const int64_t *b, bool negate,
                             const float *want)
{
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "a", 1, (int64_t[]){4}, a);
    tide_test_onnx_init_i(m, "b", 1, (int64_t[]){4}, b);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){4}, -1);
    tide_test_onnx_node(m, op, "c", TIDE_TEST_NAMES("a", "b"), TIDE_TEST_NAMES("c0"));
    if (negate)
        tide_test_onnx_node(m, "Not", "not", TIDE_TEST_NAMES("c0"), TIDE_TEST_NAMES("c1"));
    tide_test_onnx_node(m, "Neg", "neg", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("nx"));
    tide_test_onnx_node(m, "Where", "w", TIDE_TEST_NAMES(negate ? "c1" : "c0", "x", "nx"),
                        TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    expect_values(m, (float[]){1, 2, 3, 4}, 4, 1, (int64_t[]){4}, want, 4);
}

/*
 * Log, Sqrt and Exp of constants folded, so that T5's relative-position buckets import: integer
 * indices from Cast(Log(distance)) with Min, Add and Where, where log(0) = -inf Casts to
 * INT64_MIN (x86's, PyTorch's and NumPy's value) on the branch Where drops. Then Gather.
 */
static void test_float_math_folded_for_indices(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    static const char *const casts[3][2] = {{"l", "li"}, {"s", "si"}, {"e", "ei"}};
    float_constant(m, "d", 1, (int64_t[]){4}, (float[]){0, 1, 2, 8});
    float_constant(m, "q", 1, (int64_t[]){4}, (float[]){9, 1, 4, 0.25f});
    float_constant(m, "p", 1, (int64_t[]){4}, (float[]){0, 1, 0.5f, 0});
    tide_test_onnx_node(m, "Log", "log", TIDE_TEST_NAMES("d"), TIDE_TEST_NAMES("l"));
    tide_test_onnx_node(m, "Sqrt", "sqrt", TIDE_TEST_NAMES("q"), TIDE_TEST_NAMES("s"));
    tide_test_onnx_node(m, "Exp", "exp", TIDE_TEST_NAMES("p"), TIDE_TEST_NAMES("e"));
    for (int k = 0; k < 3; k++) {
        Onnx__NodeProto *n = tide_test_onnx_node(
            m, "Cast", casts[k][1], TIDE_TEST_NAMES(casts[k][0]), TIDE_TEST_NAMES(casts[k][1]));
        tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    }
    /* li = [INT64_MIN, 0, 0, 2], si = [3, 1, 2, 0], ei = [1, 2, 1, 1]. */
    tide_test_onnx_init_i(m, "zero", 1, (int64_t[]){1}, (int64_t[]){0});
    tide_test_onnx_init_i(m, "three", 1, (int64_t[]){1}, (int64_t[]){3});
    tide_test_onnx_node(m, "Less", "neg", TIDE_TEST_NAMES("li", "zero"), TIDE_TEST_NAMES("c"));
    tide_test_onnx_node(m, "Where", "w", TIDE_TEST_NAMES("c", "si", "li"), TIDE_TEST_NAMES("k"));
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("k", "ei"), TIDE_TEST_NAMES("k1"));
    tide_test_onnx_node(m, "Min", "min", TIDE_TEST_NAMES("k1", "three"), TIDE_TEST_NAMES("ids"));
    /* k = [3, 0, 0, 2], k1 = [4, 2, 1, 3], ids = [3, 2, 1, 3]. */
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){4}, -1);
    tide_test_onnx_node(m, "Gather", "g", TIDE_TEST_NAMES("x", "ids"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    expect_values(m, (float[]){10, 20, 30, 40}, 4, 1, (int64_t[]){4}, (float[]){40, 30, 20, 40}, 4);
}

/* Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Not folded on constants (a mask feeding
 * Where); on tensors refused by name, as Equal is. */
static void test_comparisons_fold(void **state)
{
    (void)state;
    static const int64_t a[4] = {1, 5, 3, INT64_MAX - 1}, b[4] = {3, 3, 3, INT64_MAX};
    /* a < b: [1 0 0 1] (INT64_MAX - 1 < INT64_MAX compared as integers, not as doubles). */
    expect_condition("Less", a, b, false, (float[]){1, -2, -3, 4});
    expect_condition("Greater", a, b, false, (float[]){-1, 2, -3, -4});
    expect_condition("LessOrEqual", a, b, false, (float[]){1, -2, 3, 4});
    expect_condition("GreaterOrEqual", a, b, false, (float[]){-1, 2, 3, -4});
    expect_condition("Less", a, b, true, (float[]){-1, 2, 3, -4});
    /* And and Or of bools: a != 0 and b != 0 are all true, so And is all, Or too; with
     * zeros: [0 1 0 1] and [0 0 1 1] give And [0 0 0 1], Or [0 1 1 1]. */
    static const int64_t p[4] = {0, 1, 0, 1}, q[4] = {0, 0, 1, 1};
    expect_condition("And", p, q, false, (float[]){-1, -2, -3, 4});
    expect_condition("Or", p, q, false, (float[]){-1, 2, 3, 4});
    expect_condition("Or", p, q, true, (float[]){1, -2, -3, -4});

    /* Float constants compare as floats: [0.5, -1] < [0.25, 0] is [0 1]. */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    float_constant(m, "a", 1, (int64_t[]){2}, (float[]){0.5f, -1});
    float_constant(m, "b", 1, (int64_t[]){2}, (float[]){0.25f, 0});
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Less", "c", TIDE_TEST_NAMES("a", "b"), TIDE_TEST_NAMES("c0"));
    tide_test_onnx_node(m, "Neg", "neg", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("nx"));
    tide_test_onnx_node(m, "Where", "w", TIDE_TEST_NAMES("c0", "x", "nx"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    expect_values(m, (float[]){1, 2}, 2, 1, (int64_t[]){2}, (float[]){-1, 2}, 2);

    /* Refusals: operands of two types, a float operand of And, Not of a float tensor. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "b", 1, (int64_t[]){1}, (int64_t[]){0});
    one_node(m, "GreaterOrEqual", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "b"));
    import_fails(m, NULL,
                 "node n (GreaterOrEqual, opset 13): inputs 0 and 1 are float and integer "
                 "tensors; GreaterOrEqual compares two of one type");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    float_constant(m, "f", 1, (int64_t[]){1}, (float[]){1});
    one_node(m, "And", 1, (int64_t[]){4}, TIDE_TEST_NAMES("f", "f"));
    import_fails(m, NULL, "node n (And, opset 13): input 0 (\"f\") is a float constant; And takes "
                          "bool inputs");
    tide_test_onnx_free(m);
    /* A float condition of Where (a malformed model): refused, not read as integers. */
    m = tide_test_onnx_new(13);
    float_constant(m, "f", 1, (int64_t[]){1}, (float[]){1});
    one_node(m, "Where", 1, (int64_t[]){4}, TIDE_TEST_NAMES("f", "x", "x"));
    import_fails(m, NULL, "node n (Where, opset 13): the condition (input \"f\") is a float "
                          "constant; Where takes a bool condition");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    one_node(m, "Not", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL,
                 "node n (Not, opset 13): input 0 (\"x\") is not a bool tensor; Not takes bool "
                 "inputs");
    tide_test_onnx_free(m);
}

/*
 * Neg and Abs of integer constants fold, as ONNX's LayerNormalization
 * function body negates its axis to size the reduced shape: here a Reshape
 * target [-(-2), |-12|] = [2, 12]; -INT64_MIN wraps to INT64_MIN (numpy's
 * answer) and |INT64_MIN| too, seen through Equal feeding Where. An integer
 * tensor computed in the graph is still refused by name.
 */
static void test_int_neg_abs_fold(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3, (int64_t[]){2, 3, 4}, -1);
    tide_test_onnx_init_i(m, "a", 1, (int64_t[]){1}, (int64_t[]){-2});
    tide_test_onnx_init_i(m, "b", 1, (int64_t[]){1}, (int64_t[]){-12});
    tide_test_onnx_node(m, "Neg", "neg", TIDE_TEST_NAMES("a"), TIDE_TEST_NAMES("na"));
    tide_test_onnx_node(m, "Abs", "abs", TIDE_TEST_NAMES("b"), TIDE_TEST_NAMES("ab"));
    Onnx__NodeProto *cat =
        tide_test_onnx_node(m, "Concat", "cat", TIDE_TEST_NAMES("na", "ab"), TIDE_TEST_NAMES("t"));
    tide_test_onnx_attr_i(m, cat, "axis", 0);
    tide_test_onnx_node(m, "Reshape", "flat", TIDE_TEST_NAMES("x", "t"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 12});
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* [INT64_MIN, 5, -7]: Neg gives [INT64_MIN, -5, 7], Abs [INT64_MIN, 5, 7]; equal to the
     * input at [1 0 0] and [1 1 0]. */
    for (int abs = 0; abs < 2; abs++) {
        m = tide_test_onnx_new(13);
        tide_test_onnx_init_i(m, "a", 1, (int64_t[]){3}, (int64_t[]){INT64_MIN, 5, -7});
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
        tide_test_onnx_node(m, abs ? "Abs" : "Neg", "u", TIDE_TEST_NAMES("a"),
                            TIDE_TEST_NAMES("ua"));
        tide_test_onnx_node(m, "Equal", "eq", TIDE_TEST_NAMES("ua", "a"), TIDE_TEST_NAMES("c"));
        tide_test_onnx_node(m, "Neg", "nx", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("mx"));
        tide_test_onnx_node(m, "Where", "w", TIDE_TEST_NAMES("c", "x", "mx"), TIDE_TEST_NAMES("y"));
        tide_test_onnx_output(m, "y");
        expect_values(m, (float[]){1, 2, 3}, 3, 1, (int64_t[]){3},
                      abs ? (float[]){1, 2, -3} : (float[]){1, -2, -3}, 3);
    }

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){3}, -1);
    tide_test_onnx_node(m, "Neg", "n", TIDE_TEST_NAMES("ids"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node n (Neg, opset 13): input 0 is an integer tensor; tide computes this op in "
                 "float32 only");
    tide_test_onnx_free(m);
}

/* y = x + Cast(Mod(a, b)) for int constants a and b, or x + Mod(a, b) for float ones;
 * fmod -1: no attribute. */
static struct tide_test_onnx *mod_plus_x(int64_t fmod, int64_t n, bool is_float, const void *a,
                                         const void *b)
{
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){n}, -1);
    if (is_float) { /* Constants: float initializers are Variables, never folded */
        float_constant(m, "a", 1, (int64_t[]){n}, a);
        float_constant(m, "b", 1, (int64_t[]){n}, b);
    } else {
        tide_test_onnx_init_i(m, "a", 1, (int64_t[]){n}, a);
        tide_test_onnx_init_i(m, "b", 1, (int64_t[]){n}, b);
    }
    Onnx__NodeProto *mod =
        tide_test_onnx_node(m, "Mod", "n", TIDE_TEST_NAMES("a", "b"), TIDE_TEST_NAMES("r"));
    if (fmod >= 0)
        tide_test_onnx_attr_i(m, mod, "fmod", fmod);
    if (!is_float) {
        Onnx__NodeProto *cast =
            tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("r"), TIDE_TEST_NAMES("rf"));
        tide_test_onnx_attr_i(m, cast, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    }
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("x", is_float ? "r" : "rf"),
                        TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    return m;
}

/*
 * Mod of constants folds (a Swin Transformer's window shifts): integers
 * take the divisor's sign with fmod 0 (Python's %) and the dividend's with
 * fmod 1 (C's), INT64_MIN mod -1 is 0; floats are fmodf. Refused: Mod of a
 * graph input, float with fmod 0, an integer divisor of zero.
 */
static void test_mod_fold(void **state)
{
    (void)state;
    static const int64_t a[6] = {-7, 7, -7, 7, 6, INT64_MIN}, b[6] = {3, 3, -3, -3, 3, -1};
    static const float zeros[6] = {0};
    struct tide_test_onnx *m = mod_plus_x(-1, 6, false, a, b);
    expect_values(m, zeros, 6, 1, (int64_t[]){6}, (float[]){2, 1, -1, -2, 0, 0}, 6);
    m = mod_plus_x(1, 6, false, a, b);
    expect_values(m, zeros, 6, 1, (int64_t[]){6}, (float[]){-1, 1, -1, 1, 0, 0}, 6);
    m = mod_plus_x(1, 2, true, (float[]){5.5f, -5.5f}, (float[]){2, 2});
    expect_values(m, (float[]){1, 1}, 2, 1, (int64_t[]){2}, (float[]){2.5f, -0.5f}, 2);

    m = mod_plus_x(0, 2, true, (float[]){5.5f, -5.5f}, (float[]){2, 2});
    import_fails(m, NULL,
                 "node n (Mod, opset 13): fmod 0 on float tensors (ONNX requires fmod 1 for "
                 "them)");
    tide_test_onnx_free(m);
    m = mod_plus_x(-1, 2, false, (int64_t[]){1, 2}, (int64_t[]){1, 0});
    import_fails(m, NULL, "node n (Mod, opset 13): integer Mod by zero (element 1 of input 1)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){1}, (float[]){2});
    Onnx__NodeProto *n = one_node(m, "Mod", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "b"));
    tide_test_onnx_attr_i(m, n, "fmod", 1);
    import_fails(m, NULL,
                 "node n (Mod, opset 13): Mod of tensors computed in the graph is not supported "
                 "(only of constants, which are folded)");
    tide_test_onnx_free(m);
}

/* x [2, 3] + ScatterND(data, indices, updates) of constants, at opset 18. */
static struct tide_test_onnx *scattered(const char *reduction, int32_t ri, const int64_t *di,
                                        const int64_t *ids, int32_t ru, const int64_t *du,
                                        const float *updates)
{
    struct tide_test_onnx *m = tide_test_onnx_new(18);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    float_constant(m, "data", 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6});
    tide_test_onnx_init_i(m, "ids", ri, di, ids);
    float_constant(m, "upd", ru, du, updates);
    Onnx__NodeProto *n = tide_test_onnx_node(
        m, "ScatterND", "n", TIDE_TEST_NAMES("data", "ids", "upd"), TIDE_TEST_NAMES("s"));
    if (reduction)
        tide_test_onnx_attr_s(m, n, "reduction", reduction);
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("x", "s"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    return m;
}

/*
 * ScatterND of constants folds (the attention mask a Swin Transformer
 * builds by indexed assignment): whole rows by [[1], [0]] (swapped),
 * elements by pairs with reduction add (one element twice), mul, max and
 * min, a negative index from the end. Refused: an index out of range,
 * updates of the wrong shape, a scatter into a graph input.
 */
static void test_scatter_nd_fold(void **state)
{
    (void)state;
    static const float zeros[6] = {0};
    const int64_t two[2] = {2, 1}, pairs[2] = {3, 2}, three[1] = {3};
    struct tide_test_onnx *m = scattered(NULL, 2, two, (int64_t[]){1, 0}, 2, (int64_t[]){2, 3},
                                         (float[]){10, 20, 30, 40, 50, 60});
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){40, 50, 60, 10, 20, 30}, 6);
    /* (0, 2) gets 7 and 9, (1, 0) gets 8 (written -1, -3). */
    const int64_t ids[6] = {0, 2, -1, -3, 0, 2};
    const float upd[3] = {7, 8, 9};
    m = scattered("add", 2, pairs, ids, 1, three, upd);
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){1, 2, 19, 12, 5, 6}, 6);
    m = scattered("mul", 2, pairs, ids, 1, three, upd);
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){1, 2, 189, 32, 5, 6}, 6);
    m = scattered("max", 2, pairs, ids, 1, three, (float[]){2, 1, 9});
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){1, 2, 9, 4, 5, 6}, 6);
    m = scattered("min", 2, pairs, ids, 1, three, (float[]){2, 1, 9});
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){1, 2, 2, 1, 5, 6}, 6);
    m = scattered(NULL, 2, pairs, ids, 1, three, upd); /* none: the last write wins */
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){1, 2, 9, 8, 5, 6}, 6);

    m = scattered(NULL, 2, two, (int64_t[]){2, 0}, 2, (int64_t[]){2, 3}, zeros);
    import_fails(m, NULL,
                 "node n (ScatterND, opset 18): index 2 (tuple 0, axis 0) is out of range [-2, 2)");
    tide_test_onnx_free(m);
    m = scattered(NULL, 2, two, (int64_t[]){1, 0}, 2, (int64_t[]){3, 2}, zeros);
    import_fails(m, NULL,
                 "node n (ScatterND, opset 18): updates are [3, 2]; indices and data make them "
                 "[2, 3]");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(18);
    tide_test_onnx_init_i(m, "ids", 2, two, (int64_t[]){1, 0});
    tide_test_onnx_init_f(m, "upd", 2, (int64_t[]){2, 4}, NULL);
    one_node(m, "ScatterND", 2, (int64_t[]){2, 4}, TIDE_TEST_NAMES("x", "ids", "upd"));
    import_fails(m, NULL,
                 "node n (ScatterND, opset 18): ScatterND into or of tensors computed in the graph "
                 "is not supported (only of constants, which are folded)");
    tide_test_onnx_free(m);
}

/*
 * A padding mask computed from an int attention_mask input, as exporters write it: PyTorch's
 * nn.MultiheadAttention (Equal to 0, Where of -inf and 0) and Hugging Face's (Cast to float,
 * (1 - mask) * -10000), added to scores before Softmax. Masked positions get probability 0;
 * the others the Softmax of the unmasked scores alone.
 */
static void test_padding_mask(void **state)
{
    (void)state;
    static const float scores[8] = {0.5f, -1, 2, 3, 1, 0, 4, 5};
    static const int32_t mask[8] = {1, 1, 1, 0, 1, 1, 0, 0};
    float want[8] = {0};
    for (int row = 0; row < 2; row++) {
        double sum = 0;
        for (int k = 0; k < 4; k++)
            sum += mask[row * 4 + k] ? exp(scores[row * 4 + k]) : 0;
        for (int k = 0; k < 4; k++)
            want[row * 4 + k] = mask[row * 4 + k] ? (float)(exp(scores[row * 4 + k]) / sum) : 0;
    }
    for (int style = 0; style < 2; style++) {
        struct tide_test_onnx *m = tide_test_onnx_new(14);
        tide_test_onnx_input(m, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, (int64_t[]){2, 4},
                             -1);
        float_constant(m, "scores", 2, (int64_t[]){2, 4}, scores);
        if (style == 0) {
            tide_test_onnx_init_i(m, "zero", 0, NULL, (int64_t[]){0});
            float_constant(m, "ninf", 0, NULL, (float[]){-INFINITY});
            float_constant(m, "fzero", 0, NULL, (float[]){0});
            tide_test_onnx_node(m, "Equal", "eq", TIDE_TEST_NAMES("mask", "zero"),
                                TIDE_TEST_NAMES("pad"));
            tide_test_onnx_node(m, "Where", "w", TIDE_TEST_NAMES("pad", "ninf", "fzero"),
                                TIDE_TEST_NAMES("bias"));
        } else {
            float_constant(m, "one", 0, NULL, (float[]){1});
            float_constant(m, "big", 0, NULL, (float[]){-10000});
            Onnx__NodeProto *n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("mask"),
                                                     TIDE_TEST_NAMES("maskf"));
            tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
            tide_test_onnx_node(m, "Sub", "sub", TIDE_TEST_NAMES("one", "maskf"),
                                TIDE_TEST_NAMES("inv"));
            tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("inv", "big"),
                                TIDE_TEST_NAMES("bias"));
        }
        tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("scores", "bias"),
                            TIDE_TEST_NAMES("s"));
        Onnx__NodeProto *sm =
            tide_test_onnx_node(m, "Softmax", "sm", TIDE_TEST_NAMES("s"), TIDE_TEST_NAMES("p"));
        tide_test_onnx_attr_i(m, sm, "axis", -1);
        tide_test_onnx_output(m, "p");
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_false(r.input_bool[0]);
        assert_false(r.output_bool[0]);
        float p[8];
        run_forward(b, &r, mask, sizeof(mask), p, 8);
        for (int k = 0; k < 8; k++) {
            if (fabsf(p[k] - want[k]) > 1e-6f)
                fail_msg("style %d: p[%d] is %.9g, want %.9g", style, k, p[k], want[k]);
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
}

/*
 * Comparisons, And, Or, Xor, Not and Cast to bool on tensors give masks (float32 0 / 1), and a
 * bool output says so; a Concat of masks is a mask. Cast float -> int truncates toward zero and
 * saturates, as NumPy's astype does within int32.
 */
static void test_masks_on_tensors(void **state)
{
    (void)state;
    static const float x[6] = {-2, -0.5f, 0, 0.5f, 2, 0.75f};
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){6}, -1);
    float_constant(m, "zero", 0, NULL, (float[]){0});
    float_constant(m, "one", 0, NULL, (float[]){1});
    tide_test_onnx_node(m, "Greater", "gt", TIDE_TEST_NAMES("x", "zero"), TIDE_TEST_NAMES("a"));
    tide_test_onnx_node(m, "Less", "lt", TIDE_TEST_NAMES("x", "one"), TIDE_TEST_NAMES("b"));
    tide_test_onnx_node(m, "And", "and", TIDE_TEST_NAMES("a", "b"), TIDE_TEST_NAMES("c0"));
    tide_test_onnx_node(m, "Not", "not", TIDE_TEST_NAMES("a"), TIDE_TEST_NAMES("na"));
    tide_test_onnx_node(m, "Or", "or", TIDE_TEST_NAMES("na", "b"), TIDE_TEST_NAMES("c1"));
    tide_test_onnx_node(m, "Xor", "xor", TIDE_TEST_NAMES("a", "b"), TIDE_TEST_NAMES("c2"));
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "Cast", "tobool", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("c3"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL);
    n = tide_test_onnx_node(m, "Concat", "cat", TIDE_TEST_NAMES("c0", "c1", "c2", "c3"),
                            TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, n, "axis", 0);
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_true(r.output_bool[0]);
    assert_false(r.input_bool[0]);
    /* a = x > 0: 000111; b = x < 1: 111101. */
    static const float want[24] = {0, 0, 0, 1, 0, 1,  /* a and b */
                                   1, 1, 1, 1, 0, 1,  /* (not a) or b */
                                   1, 1, 1, 0, 1, 0,  /* a xor b */
                                   1, 1, 0, 1, 1, 1}; /* x != 0 */
    float y[24];
    run_forward(b, &r, x, sizeof(x), y, 24);
    for (int k = 0; k < 24; k++)
        assert_float_equal(y[k], want[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Cast to int64 and back. */
    static const float big[6] = {-2.75f, -0.5f, 0.5f, 2.75f, 3e9f, -3e9f};
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){6}, -1);
    n = tide_test_onnx_node(m, "Cast", "toint", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("i"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    n = tide_test_onnx_node(m, "Cast", "tofloat", TIDE_TEST_NAMES("i"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    tide_test_onnx_output(m, "y");
    expect_values(m, big, 6, 1, (int64_t[]){6},
                  (float[]){-2, 0, 0, 2, 2147483648.0f, -2147483648.0f}, 6);

    /* A bool graph input is a float32 Placeholder fed 0 and 1. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "c", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL, 1, (int64_t[]){4}, -1);
    float_constant(m, "p", 1, (int64_t[]){4}, (float[]){1, 2, 3, 4});
    float_constant(m, "q", 1, (int64_t[]){4}, (float[]){-1, -2, -3, -4});
    tide_test_onnx_node(m, "Where", "w", TIDE_TEST_NAMES("c", "p", "q"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    b = import_ok(m, NULL, &r);
    assert_true(r.input_bool[0]);
    assert_false(r.output_bool[0]);
    run_forward(b, &r, (float[]){1, 0, 0, 1}, 4 * sizeof(float), y, 4);
    static const float picked[4] = {1, -2, -3, 4};
    for (int k = 0; k < 4; k++)
        assert_float_equal(y[k], picked[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Refusals: a float tensor where bools go, integer sides of a computed Where, operands of
     * two types. */
    m = tide_test_onnx_new(13);
    one_node(m, "And", 1, (int64_t[]){4}, TIDE_TEST_NAMES("x", "x"));
    import_fails(m, NULL,
                 "node n (And, opset 13): input 0 (\"x\") is not a bool tensor; And "
                 "takes bool inputs");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){4}, -1);
    float_constant(m, "zero", 0, NULL, (float[]){0});
    tide_test_onnx_init_i(m, "i", 1, (int64_t[]){4}, (int64_t[]){1, 2, 3, 4});
    tide_test_onnx_node(m, "Greater", "gt", TIDE_TEST_NAMES("x", "zero"), TIDE_TEST_NAMES("c"));
    tide_test_onnx_node(m, "Where", "n", TIDE_TEST_NAMES("c", "i", "i"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node n (Where, opset 13): Where of integer tensors is supported only "
                 "with a constant condition (tide's Select is float32)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){4}, -1);
    float_constant(m, "f", 0, NULL, (float[]){0});
    tide_test_onnx_node(m, "Equal", "n", TIDE_TEST_NAMES("x", "f"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node n (Equal, opset 13): inputs 0 and 1 are integer and float "
                 "tensors; Equal compares two of one type");
    tide_test_onnx_free(m);
}

/*
 * Gather along an axis other than 0 with constant indices (BERT's x[:, 0]): a scalar index
 * drops the axis, a list takes its place; one SGD step reaches only the picked column.
 */
static void test_gather_axis_constant_ids(void **state)
{
    (void)state;
    float x[24];
    for (int k = 0; k < 24; k++)
        x[k] = (float)k;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "i", 0, NULL, (int64_t[]){-3});
    Onnx__NodeProto *n = one_node(m, "Gather", 3, (int64_t[]){2, 3, 4}, TIDE_TEST_NAMES("x", "i"));
    tide_test_onnx_attr_i(m, n, "axis", 1);
    expect_values(m, x, 24, 2, (int64_t[]){2, 4}, (float[]){0, 1, 2, 3, 12, 13, 14, 15}, 8);
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_i(m, "i", 1, (int64_t[]){2}, (int64_t[]){2, 0});
    n = one_node(m, "Gather", 3, (int64_t[]){2, 3, 4}, TIDE_TEST_NAMES("x", "i"));
    tide_test_onnx_attr_i(m, n, "axis", -1);
    expect_values(m, x, 24, 3, (int64_t[]){2, 3, 2},
                  (float[]){2, 0, 6, 4, 10, 8, 14, 12, 18, 16, 22, 20}, 12);

    /* x [2, 3] times w, column 1 picked: y = [2, 1.25], dL/dw there y * x = [4, 6.25]. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){2, 3}, (float[]){0.5f, 1, -1, 2, 0.25f, 3});
    tide_test_onnx_init_i(m, "i", 1, (int64_t[]){1}, (int64_t[]){1});
    tide_test_onnx_node(m, "Mul", "xw", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("xw"));
    n = tide_test_onnx_node(m, "Gather", "g", TIDE_TEST_NAMES("xw", "i"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, n, "axis", 1);
    tide_test_onnx_output(m, "y");
    float w[6];
    train_one_step(m, (float[]){1, 2, 3, 4, 5, 6}, 6 * sizeof(float), "w", w, 6);
    static const float want[6] = {0.5f, 0.6f, -1, 2, -0.375f, 3};
    for (int k = 0; k < 6; k++)
        assert_float_equal(w[k], want[k], 1e-6);
    tide_test_onnx_free(m);
}

/* EyeLike: ones on diagonal k of the input's shape (a constant: the input's values are not
 * read), of the input's type or dtype's; a tensor of rank 3 is refused. */
static void test_eye_like(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    Onnx__NodeProto *n = one_node(m, "EyeLike", 2, (int64_t[]){3, 4}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "k", 1);
    float x[12] = {0};
    expect_values(m, x, 12, 2, (int64_t[]){3, 4}, (float[]){0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1},
                  12);
    m = tide_test_onnx_new(13);
    n = one_node(m, "EyeLike", 2, (int64_t[]){3, 2}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "k", -1);
    tide_test_onnx_attr_i(m, n, "dtype", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_int_equal(tide_builder_dtype(b, r.outputs[0]), TIDE_DT_INT32);
    int32_t y[6];
    run_forward(b, &r, x, 6 * sizeof(float), (float *)y, 6);
    static const int32_t want[6] = {0, 0, 1, 0, 0, 1};
    for (int k = 0; k < 6; k++)
        assert_int_equal(y[k], want[k]);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    one_node(m, "EyeLike", 3, (int64_t[]){2, 2, 2}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL, "node n (EyeLike, opset 13): input 0 has rank 3; EyeLike takes a matrix");
    tide_test_onnx_free(m);
}

/* Runs m (one float input x, one output) on x and returns the output's first n values in y. */
static void forward_once(struct tide_test_onnx *m, const float *x, size_t n_x, float *y, size_t n,
                         bool *output_bool)
{
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    run_forward(b, &r, x, n_x * sizeof(float), y, n);
    if (output_bool)
        *output_bool = r.output_bool[0];
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
}

/*
 * The ops that select by masks: ThresholdedRelu, Shrink, Sign (NaN stays
 * NaN, -0 gives 0), IsNaN and IsInf (bool outputs), Hardmax (opset 13 along
 * an axis; opset 11 over the matrix split at the axis), OneHot (a negative
 * index from the end, one out of range all off, integer values); one SGD
 * step through ThresholdedRelu reaches only the elements above alpha.
 */
static void test_mask_selections(void **state)
{
    (void)state;
    float y[16];
    bool is_bool;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    Onnx__NodeProto *n = one_node(m, "Shrink", 1, (int64_t[]){5}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_f(m, n, "lambd", 1.5f);
    tide_test_onnx_attr_f(m, n, "bias", 0.5f);
    expect_values(m, (float[]){-3, -1, 0, 1, 2}, 5, 1, (int64_t[]){5},
                  (float[]){-2.5f, 0, 0, 0, 1.5f}, 5);

    m = tide_test_onnx_new(13);
    one_node(m, "Sign", 1, (int64_t[]){5}, TIDE_TEST_NAMES("x"));
    forward_once(m, (float[]){-2, 0, 3, NAN, -0.0f}, 5, y, 5, NULL);
    assert_float_equal(y[0], -1, 0);
    assert_float_equal(y[1], 0, 0);
    assert_float_equal(y[2], 1, 0);
    assert_true(isnan(y[3]));
    assert_float_equal(y[4], 0, 0);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){4}, -1);
    tide_test_onnx_node(m, "IsNaN", "nan", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("a"));
    tide_test_onnx_node(m, "IsInf", "inf", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("b"));
    n = tide_test_onnx_node(m, "IsInf", "pinf", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("c"));
    tide_test_onnx_attr_i(m, n, "detect_negative", 0);
    n = tide_test_onnx_node(m, "Concat", "cat", TIDE_TEST_NAMES("a", "b", "c"),
                            TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, n, "axis", 0);
    tide_test_onnx_output(m, "y");
    forward_once(m, (float[]){1, NAN, INFINITY, -INFINITY}, 4, y, 12, &is_bool);
    assert_true(is_bool);
    static const float flags[12] = {0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0};
    for (int k = 0; k < 12; k++)
        assert_float_equal(y[k], flags[k], 0);

    static const float x6[6] = {1, 3, 3, -1, -5, -2};
    m = tide_test_onnx_new(13);
    n = one_node(m, "Hardmax", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    expect_values(m, x6, 6, 2, (int64_t[]){2, 3}, (float[]){0, 1, 0, 1, 0, 0}, 6);
    m = tide_test_onnx_new(11);
    n = one_node(m, "Hardmax", 2, (int64_t[]){2, 3}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_i(m, n, "axis", 0);
    expect_values(m, x6, 6, 2, (int64_t[]){2, 3}, (float[]){0, 1, 0, 0, 0, 0}, 6);

    m = tide_test_onnx_new(11);
    tide_test_onnx_input(m, "i", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){3}, -1);
    tide_test_onnx_init_i(m, "depth", 0, NULL, (int64_t[]){4});
    float_constant(m, "values", 1, (int64_t[]){2}, (float[]){0.5f, 2});
    tide_test_onnx_node(m, "OneHot", "oh", TIDE_TEST_NAMES("i", "depth", "values"),
                        TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){3, 4});
    run_forward(b, &r, (int32_t[]){1, -1, 5}, 3 * sizeof(int32_t), y, 12);
    static const float hot[12] = {0.5f, 2, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 2, 0.5f, 0.5f, 0.5f, 0.5f};
    for (int k = 0; k < 12; k++)
        assert_float_equal(y[k], hot[k], 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(11);
    tide_test_onnx_input(m, "i", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){3}, -1);
    tide_test_onnx_init_i(m, "depth", 0, NULL, (int64_t[]){4});
    tide_test_onnx_init_i(m, "values", 1, (int64_t[]){2}, (int64_t[]){0, 7});
    n = tide_test_onnx_node(m, "OneHot", "oh", TIDE_TEST_NAMES("i", "depth", "values"),
                            TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, n, "axis", 0);
    tide_test_onnx_output(m, "y");
    b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){4, 3});
    assert_int_equal(tide_builder_dtype(b, r.outputs[0]), TIDE_DT_INT32);
    int32_t iy[12];
    run_forward(b, &r, (int32_t[]){1, -1, 5}, 3 * sizeof(int32_t), (float *)iy, 12);
    static const int32_t ihot[12] = {0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 7, 0};
    for (int k = 0; k < 12; k++)
        assert_int_equal(iy[k], ihot[k]);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* A depth past what the import folds as constant positions is refused, not allocated. */
    m = tide_test_onnx_new(11);
    tide_test_onnx_input(m, "i", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){3}, -1);
    tide_test_onnx_init_i(m, "depth", 0, NULL, (int64_t[]){(int64_t)1 << 26});
    float_constant(m, "values", 1, (int64_t[]){2}, (float[]){0, 1});
    tide_test_onnx_node(m, "OneHot", "oh", TIDE_TEST_NAMES("i", "depth", "values"),
                        TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node oh (OneHot, opset 11): 67108864 positions along an axis are more "
                 "than the import folds (33554432)");
    tide_test_onnx_free(m);

    /* ThresholdedRelu(x w), alpha 1: x w = [0.5, 2, 6], y = [0, 2, 6], dL/dy = 2 y / 3,
     * dL/dw = dL/dy x = [0, 8/3, 12], so w - 0.1 dL/dw = [0.5, 1 - 0.8/3, 0.8]. */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){3}, (float[]){0.5f, 1, 2});
    tide_test_onnx_node(m, "Mul", "xw", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("xw"));
    tide_test_onnx_node(m, "ThresholdedRelu", "t", TIDE_TEST_NAMES("xw"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float w[3];
    train_one_step(m, (float[]){1, 2, 3}, 3 * sizeof(float), "w", w, 3);
    assert_float_equal(w[0], 0.5f, 0);
    assert_float_equal(w[1], 1 - 0.8f / 3, 1e-6);
    assert_float_equal(w[2], 0.8f, 1e-6);
    tide_test_onnx_free(m);
}

/*
 * A graph input without a name (a model the ONNX fuzzer made; a Shape node
 * reads "x", which no input is named): refused by name, where the import once
 * looked each input up by its name to say whether it was bool and read
 * through a NULL record.
 */
static void test_unnamed_graph_input(void **state)
{
    (void)state;
    static const uint8_t model[] = {
        0x08, 0x08, 0x12, 0x0c, 0x62, 0x61, 0x63, 0x6b, 0x01, 0x00, 0x00, 0x00, 0x52, 0x65, 0x73,
        0xef, 0x3a, 0x5b, 0x0a, 0x1b, 0x0a, 0x01, 0x78, 0x12, 0x01, 0x79, 0x22, 0x05, 0x53, 0x68,
        0x61, 0x70, 0x65, 0x2a, 0x0c, 0x0a, 0x05, 0x73, 0x74, 0x61, 0x72, 0x74, 0x18, 0x01, 0xa0,
        0x01, 0x02, 0x12, 0x12, 0x74, 0x65, 0x73, 0x74, 0x5f, 0x73, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x03, 0x72, 0x74, 0x5f, 0x31, 0x5a, 0x17, 0x1a, 0x01, 0x78, 0x12, 0x12, 0x0a,
        0x10, 0x08, 0x01, 0x12, 0x0c, 0x0a, 0x02, 0x08, 0x03, 0x0a, 0x02, 0x08, 0x04, 0x0a, 0x02,
        0x08, 0x05, 0x62, 0x0f, 0x0a, 0x01, 0x79, 0x12, 0x0a, 0x0a, 0x08, 0x08, 0x07, 0x12, 0x04,
        0x0a, 0x02, 0x08, 0x02, 0x42, 0x04, 0x0a, 0x00, 0x10, 0x0f,
    };
    tide_builder *b = tide_builder_new();
    struct tide_onnx_result r;
    char err[512];
    assert_int_equal(tide_onnx_import(b, model, sizeof(model), NULL, &r, err, sizeof(err)), -1);
    assert_string_equal(err, "node (unnamed) (Shape, opset 15): input \"x\" is produced by no "
                             "node, initializer or graph input");
    tide_builder_free(b);
}

/*
 * One SGD step through Where with a condition computed from a Variable: y = Where(x w > 0,
 * x w, -w), loss mean(y^2). The condition passes no gradient; each side gets dy where it
 * was chosen. x = [1, -2, 3, 0.5], w = [0.5, 0.25, -1, 2]: x w = [0.5, -0.5, -3, 1], so
 * y = [0.5, -0.25, 1, 1], dL/dy = y / 2, dL/dw = [0.25 * 1, -0.125 * -1, 0.5 * -1,
 * 0.5 * 0.5] and w - 0.1 dL/dw = [0.475, 0.2375, -0.95, 1.975].
 */
static void test_where_computed_trains(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){4}, -1);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){4}, (float[]){0.5f, 0.25f, -1, 2});
    float_constant(m, "zero", 0, NULL, (float[]){0});
    tide_test_onnx_node(m, "Mul", "xw", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("xw"));
    tide_test_onnx_node(m, "Greater", "gt", TIDE_TEST_NAMES("xw", "zero"), TIDE_TEST_NAMES("c"));
    tide_test_onnx_node(m, "Neg", "neg", TIDE_TEST_NAMES("w"), TIDE_TEST_NAMES("nw"));
    tide_test_onnx_node(m, "Where", "where", TIDE_TEST_NAMES("c", "xw", "nw"),
                        TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float w[4];
    train_one_step(m, (float[]){1, -2, 3, 0.5f}, 4 * sizeof(float), "w", w, 4);
    static const float want[4] = {0.475f, 0.2375f, -0.95f, 1.975f};
    for (int k = 0; k < 4; k++)
        assert_float_equal(w[k], want[k], 1e-6);
    tide_test_onnx_free(m);
}

/* ReduceProd: a Mul tree over the reduced elements (odd counts carried), exact at zeros and
 * negative values; it trains through Mul's gradient. */
static void test_reduce_prod(void **state)
{
    (void)state;
    /* x [2, 5, 2]: the product over axis 1 (5 elements: one carried each round but the last). */
    float x[20], y[4];
    for (int k = 0; k < 20; k++)
        x[k] = (k % 3 == 0 ? -0.5f : 1.25f) + (float)(k % 4) * 0.25f;
    x[13] = 0; /* one product is 0 */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    Onnx__NodeProto *n = one_node(m, "ReduceProd", 3, (int64_t[]){2, 5, 2}, TIDE_TEST_NAMES("x"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){-2});
    tide_test_onnx_attr_i(m, n, "keepdims", 0);
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, NULL, &r);
    assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 2});
    run_forward(b, &r, x, sizeof(x), y, 4);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
            double want = 1;
            for (int k = 0; k < 5; k++)
                want *= x[(i * 5 + k) * 2 + j];
            assert_float_equal(y[i * 2 + j], want, 1e-6);
        }
    assert_float_equal(y[2 + 1], 0, 0);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Training: y_i = prod_k (v x)_ik over 3; loss mean(y^2) over 2, so v_ik moves by
     * -0.1 * y_i * prod_{l != k} (v x)_il * x_ik. Row 1 holds a 0: its y and gradient are 0. */
    float v0[6] = {0.5f, -2, 1.5f, 3, 0, -1}, v[6], xs[6] = {2, 0.5f, -1, 1, 4, 0.25f};
    m = tide_test_onnx_new(13);
    tide_test_onnx_init_f(m, "v", 2, (int64_t[]){2, 3}, v0);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3}, -1);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("v", "x"), TIDE_TEST_NAMES("vx"));
    n = tide_test_onnx_node(m, "ReduceProd", "prod", TIDE_TEST_NAMES("vx"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){1});
    tide_test_onnx_output(m, "y");
    train_one_step(m, xs, sizeof(xs), "v", v, 6);
    for (int i = 0; i < 2; i++) {
        double yi = 1;
        for (int k = 0; k < 3; k++)
            yi *= (double)v0[i * 3 + k] * xs[i * 3 + k];
        for (int k = 0; k < 3; k++) {
            double others = 1;
            for (int l = 0; l < 3; l++)
                if (l != k)
                    others *= (double)v0[i * 3 + l] * xs[i * 3 + l];
            assert_float_equal(v[i * 3 + k], v0[i * 3 + k] - 0.1 * yi * others * xs[i * 3 + k],
                               1e-6);
        }
    }
    tide_test_onnx_free(m);
}

static void test_bad_bytes(void **state)
{
    (void)state;
    char err[512];
    tide_builder *b = tide_builder_new();

    /* Truncated: a valid model less its last byte. */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Relu", "act", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    size_t len;
    uint8_t *bytes = tide_test_onnx_pack(m, &len);
    char want[256];
    snprintf(want, sizeof(want),
             "not an ONNX model: %zu bytes that do not parse as an onnx.ModelProto (truncated, or "
             "another format)",
             len - 1);
    assert_int_equal(tide_onnx_import(b, bytes, len - 1, NULL, NULL, err, sizeof(err)), -1);
    assert_string_equal(err, want);
    free(bytes);
    tide_test_onnx_free(m);

    /* Random bytes. */
    const uint8_t noise[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x13, 0x37};
    assert_int_equal(tide_onnx_import(b, noise, sizeof(noise), NULL, NULL, err, sizeof(err)), -1);
    assert_string_equal(err, "not an ONNX model: 7 bytes that do not parse as an onnx.ModelProto "
                             "(truncated, or another format)");

    /* A tide graph is not an ONNX model. */
    tide_builder *g = tide_builder_new();
    tide_builder_relu(g, "r", tide_builder_placeholder(g, "x", TIDE_DT_FLOAT32, 1, (int64_t[]){2}));
    uint8_t *graph;
    size_t graph_len;
    assert_int_equal(tide_builder_serialize(g, &graph, &graph_len), 0);
    assert_int_equal(tide_onnx_import(b, graph, graph_len, NULL, NULL, err, sizeof(err)), -1);
    snprintf(want, sizeof(want),
             "not an ONNX model: %zu bytes that do not parse as an onnx.ModelProto (truncated, or "
             "another format)",
             graph_len);
    assert_string_equal(err, want);
    free(graph);
    tide_builder_free(g);

    /* Nothing at all. */
    assert_int_equal(tide_onnx_import(b, NULL, 0, NULL, NULL, err, sizeof(err)), -1);
    assert_string_equal(err, "not an ONNX model: the message has no graph or no ir_version and "
                             "opset");
    assert_int_equal(tide_onnx_import(NULL, noise, 1, NULL, NULL, err, sizeof(err)), -1);
    assert_string_equal(err, "the builder is NULL");
    /* The builder was left untouched by every failure. */
    assert_int_equal(tide_builder_node_count(b), 0);
    tide_builder_free(b);
}

/*
 * Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh: each imports as tide's Trig
 * and gives libm's double function rounded to float (NaN outside the domain); each is refused
 * before the opset that added it, and on an integer tensor. One SGD step through Sin of x w, w a
 * trainable initializer (a rotary embedding's angle): x = [1, 2], w = [0.5, 0.25], so both
 * angles are 0.5, y = sin(0.5) twice, loss mean(y^2), dL/dw_k = y cos(0.5) x_k = sin(1) / 2 x_k
 * = 0.420735492 x_k, and w - 0.1 dL/dw = [0.457926451, 0.166852902].
 */
static void test_trig_ops(void **state)
{
    (void)state;
    static const struct {
        const char *op;
        int64_t since;
        double (*f)(double);
        float x[6];
    } cases[] = {
        {"Sin", 7, sin, {-3, -0.5f, 0, 0.25f, 1, 10}},
        {"Cos", 7, cos, {-3, -0.5f, 0, 0.25f, 1, 10}},
        {"Tan", 7, tan, {-1.5f, -0.5f, 0, 0.25f, 1, 1.5f}},
        {"Asin", 7, asin, {-1, -0.5f, 0, 0.25f, 1, 1.5f}},
        {"Acos", 7, acos, {-1, -0.5f, 0, 0.25f, 1, 1.5f}},
        {"Atan", 7, atan, {-100, -0.5f, 0, 0.25f, 1, 100}},
        {"Sinh", 9, sinh, {-5, -0.5f, 0, 0.25f, 1, 5}},
        {"Cosh", 9, cosh, {-5, -0.5f, 0, 0.25f, 1, 5}},
        {"Asinh", 9, asinh, {-100, -0.5f, 0, 0.25f, 1, 100}},
        {"Acosh", 9, acosh, {0.5f, 1, 1.5f, 2, 10, 100}},
        {"Atanh", 9, atanh, {-1, -0.5f, 0, 0.25f, 0.9f, 2}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct tide_test_onnx *m = tide_test_onnx_new(13);
        one_node(m, cases[k].op, 1, (int64_t[]){6}, TIDE_TEST_NAMES("x"));
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_shape(b, r.outputs[0], 1, (int64_t[]){6});
        assert_string_equal(tide_builder_op(b, tide_builder_find(b, "onnx/trig_0")), "Trig");
        float y[6];
        run_forward(b, &r, cases[k].x, sizeof(cases[k].x), y, 6);
        for (int i = 0; i < 6; i++) {
            float want = (float)cases[k].f((double)cases[k].x[i]);
            if (isnan(want) ? !isnan(y[i]) : memcmp(&y[i], &want, sizeof(float)) != 0)
                fail_msg("%s(%g) is %.9g, want %.9g", cases[k].op, cases[k].x[i], y[i], want);
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);

        /* Before the opset that added it. */
        m = tide_test_onnx_new(cases[k].since - 1);
        one_node(m, cases[k].op, 1, (int64_t[]){6}, TIDE_TEST_NAMES("x"));
        char want[160];
        snprintf(want, sizeof(want),
                 "node n (%s, opset %" PRId64 "): %s does not exist in opset %" PRId64
                 " (ONNX added it in opset %" PRId64 ")",
                 cases[k].op, cases[k].since - 1, cases[k].op, cases[k].since - 1, cases[k].since);
        import_fails(m, NULL, want);
        tide_test_onnx_free(m);
    }
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Cos", "n", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL, "node n (Cos, opset 13): input 0 is an integer tensor; tide computes this "
                          "op in float32 only");
    tide_test_onnx_free(m);

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){2}, (float[]){0.5f, 0.25f});
    tide_test_onnx_node(m, "Mul", "xw", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("xw"));
    tide_test_onnx_node(m, "Sin", "sin", TIDE_TEST_NAMES("xw"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float w[2];
    train_one_step(m, (float[]){1, 2}, 2 * sizeof(float), "w", w, 2);
    assert_float_equal(w[0], 0.5 - 0.1 * 0.42073549240394825, 1e-7);
    assert_float_equal(w[1], 0.25 - 0.2 * 0.42073549240394825, 1e-7);
    tide_test_onnx_free(m);
}

/*
 * Floor, Ceil and Round: each imports as tide's Round at every version of the op, with values
 * worked by hand, the sign of each zero included: Round halves to even (-2.5 -> -2, -1.5 -> -2,
 * 0.5 -> 0, 1.5 -> 2, 2.5 -> 2), Ceil(-0.5) is -0; 1e10, inf and NaN pass. Round is refused
 * before opset 11, an integer tensor always. On a Constant each folds, so that Cast and Reshape
 * read a known shape and the graph keeps only the Reshape: Round([2.5, 3.5]) = [2, 4], Floor([2.7,
 * 4.2]) = [2, 4], Ceil([1.2, 3.5]) = [2, 4]. One SGD step through Floor(x w) + x v, w and v
 * trainable initializers: x = [1, 2], w = [1.25, 0.75], v = [0.5, -0.25] give y = [1, 1] + [0.5,
 * -0.5] = [1.5, 0.5]; loss mean(y^2), so dL/dv_k = y_k x_k = [1.5, 1] and v becomes [0.35,
 * -0.35]; w, whose gradient through Floor is 0 (PyTorch's too), keeps its bits.
 */
static void test_round_ops(void **state)
{
    (void)state;
    enum { N = 12 };
    static const float x[N] = {-2.5f, -1.5f, -0.5f, -0.0f, 0.5f,     1.5f,
                               2.5f,  2.7f,  -2.7f, 1e10f, INFINITY, NAN};
    static const struct {
        const char *op;
        int64_t versions[3];
        float want[N];
    } cases[] = {
        {"Floor", {1, 6, 13}, {-3, -2, -1, -0.0f, 0, 1, 2, 2, -3, 1e10f, INFINITY, NAN}},
        {"Ceil", {1, 6, 13}, {-2, -1, -0.0f, -0.0f, 1, 2, 3, 3, -2, 1e10f, INFINITY, NAN}},
        {"Round", {11, 22, 0}, {-2, -2, -0.0f, -0.0f, 0, 2, 2, 3, -3, 1e10f, INFINITY, NAN}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        for (int v = 0; v < 3 && cases[k].versions[v]; v++) {
            struct tide_test_onnx *m = tide_test_onnx_new(cases[k].versions[v]);
            one_node(m, cases[k].op, 1, (int64_t[]){N}, TIDE_TEST_NAMES("x"));
            struct tide_onnx_result r;
            tide_builder *b = import_ok(m, NULL, &r);
            assert_shape(b, r.outputs[0], 1, (int64_t[]){N});
            assert_string_equal(tide_builder_op(b, tide_builder_find(b, "onnx/round_0")), "Round");
            float y[N];
            run_forward(b, &r, x, sizeof(x), y, N);
            for (int i = 0; i < N; i++) {
                float want = cases[k].want[i];
                if (isnan(want) ? !isnan(y[i]) : memcmp(&y[i], &want, sizeof(float)) != 0)
                    fail_msg("%s-%" PRId64 "(%g) is %.9g, want %.9g", cases[k].op,
                             cases[k].versions[v], x[i], y[i], want);
            }
            tide_onnx_result_free(&r);
            tide_builder_free(b);
            tide_test_onnx_free(m);
        }
    }
    struct tide_test_onnx *m = tide_test_onnx_new(10);
    one_node(m, "Round", 1, (int64_t[]){N}, TIDE_TEST_NAMES("x"));
    import_fails(m, NULL,
                 "node n (Round, opset 10): Round does not exist in opset 10 (ONNX added it in "
                 "opset 11)");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){2}, -1);
    tide_test_onnx_node(m, "Floor", "n", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node n (Floor, opset 13): input 0 is an integer tensor; tide computes "
                 "this op in float32 only");
    tide_test_onnx_free(m);

    /* Folded on a Constant: the shape a Reshape reads. */
    static const struct {
        const char *op;
        float k[2];
    } folds[] = {{"Round", {2.5f, 3.5f}}, {"Floor", {2.7f, 4.2f}}, {"Ceil", {1.2f, 3.5f}}};
    for (size_t k = 0; k < sizeof(folds) / sizeof(folds[0]); k++) {
        m = tide_test_onnx_new(13);
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){8}, -1);
        Onnx__NodeProto *constant =
            tide_test_onnx_node(m, "Constant", "k", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("k"));
        tide_test_onnx_attr_t(m, constant, "value",
                              tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1,
                                                    (int64_t[]){2}, folds[k].k));
        tide_test_onnx_node(m, folds[k].op, "r", TIDE_TEST_NAMES("k"), TIDE_TEST_NAMES("rk"));
        Onnx__NodeProto *cast =
            tide_test_onnx_node(m, "Cast", "c", TIDE_TEST_NAMES("rk"), TIDE_TEST_NAMES("shape"));
        tide_test_onnx_attr_i(m, cast, "to", ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
        tide_test_onnx_node(m, "Reshape", "rs", TIDE_TEST_NAMES("x", "shape"),
                            TIDE_TEST_NAMES("y"));
        tide_test_onnx_output(m, "y");
        struct tide_onnx_result r;
        tide_builder *b = import_ok(m, NULL, &r);
        assert_shape(b, r.outputs[0], 2, (int64_t[]){2, 4});
        /* Placeholder, Reshape, Identity: no Round node. */
        assert_int_equal(tide_builder_node_count(b), 3);
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }

    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_init_f(m, "w", 1, (int64_t[]){2}, (float[]){1.25f, 0.75f});
    tide_test_onnx_init_f(m, "v", 1, (int64_t[]){2}, (float[]){0.5f, -0.25f});
    tide_test_onnx_node(m, "Mul", "xw", TIDE_TEST_NAMES("x", "w"), TIDE_TEST_NAMES("xw"));
    tide_test_onnx_node(m, "Floor", "floor", TIDE_TEST_NAMES("xw"), TIDE_TEST_NAMES("f"));
    tide_test_onnx_node(m, "Mul", "xv", TIDE_TEST_NAMES("x", "v"), TIDE_TEST_NAMES("xv"));
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("f", "xv"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float w[2], v[2];
    train_one_step(m, (float[]){1, 2}, 2 * sizeof(float), "v", v, 2);
    assert_float_equal(v[0], 0.5 - 0.1 * 1.5, 1e-7);
    assert_float_equal(v[1], -0.25 - 0.1 * 1.0, 1e-7);
    train_one_step(m, (float[]){1, 2}, 2 * sizeof(float), "w", w, 2);
    assert_true(w[0] == 1.25f && w[1] == 0.75f);
    tide_test_onnx_free(m);
}

/* The tensor t's double_data moved to raw_data, little-endian, as PyTorch writes its constants. */
static void double_to_raw(struct tide_test_onnx *m, Onnx__TensorProto *t)
{
    uint8_t *raw = tide_test_onnx_own(m, 8 * t->n_double_data);
    for (size_t k = 0; k < t->n_double_data; k++) {
        uint64_t u;
        memcpy(&u, &t->double_data[k], 8);
        for (int i = 0; i < 8; i++)
            raw[8 * k + (size_t)i] = (uint8_t)(u >> (8 * i));
    }
    t->has_raw_data = true;
    t->raw_data.data = raw;
    t->raw_data.len = 8 * t->n_double_data;
    t->n_double_data = 0;
    t->double_data = NULL;
}

/* A Constant node named name holding a double tensor in raw_data. */
static void double_constant(struct tide_test_onnx *m, const char *name, int32_t rank,
                            const int64_t *dims, const double *data)
{
    Onnx__NodeProto *k =
        tide_test_onnx_node(m, "Constant", name, TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES(name));
    Onnx__TensorProto *t =
        tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, rank, dims, data);
    double_to_raw(m, t);
    tide_test_onnx_attr_t(m, k, "value", t);
}

/*
 * float64 constants are narrowed to float32: F.normalize(x, dim=-1) as PyTorch exports it
 * (x / Expand(Clip(ReduceL2(x), Cast(Constant double 1e-12)))), where a zero row stays 0 and a
 * row of norm 2e-13 is divided by 1e-12; a frozen double initializer (double_data) is a float32
 * constant, an unfrozen one is refused (PyTorch would train it in float64), and a finite double
 * beyond float32's range is refused naming the node or initializer and the value.
 */
static void test_double_constants(void **state)
{
    (void)state;
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){4, 4}, -1);
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "ReduceL2", "l2", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("norm"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){-1});
    double_constant(m, "eps", 0, NULL, (double[]){1e-12});
    n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("eps"), TIDE_TEST_NAMES("eps_f"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    tide_test_onnx_node(m, "Clip", "clip", TIDE_TEST_NAMES("norm", "eps_f", ""),
                        TIDE_TEST_NAMES("clipped"));
    tide_test_onnx_node(m, "Shape", "shape", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("s"));
    tide_test_onnx_node(m, "Expand", "expand", TIDE_TEST_NAMES("clipped", "s"),
                        TIDE_TEST_NAMES("denominator"));
    tide_test_onnx_node(m, "Div", "div", TIDE_TEST_NAMES("x", "denominator"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    static const float x[16] = {1,      2,       2,      4,      0, 0, 0,  0,
                                1e-13f, -1e-13f, 1e-13f, 1e-13f, 3, 0, -4, 0};
    float want[16];
    for (int i = 0; i < 4; i++) {
        double sq = 0;
        for (int j = 0; j < 4; j++)
            sq += (double)x[i * 4 + j] * x[i * 4 + j];
        for (int j = 0; j < 4; j++)
            want[i * 4 + j] = (float)(x[i * 4 + j] / fmax(sqrt(sq), 1e-12));
    }
    assert_float_equal(want[8], 0.1, 1e-6); /* the row of norm 2e-13 is divided by 1e-12 */
    expect_values(m, x, 16, 2, (int64_t[]){4, 4}, want, 16);

    /* A double initializer: refused as a weight, a float32 constant when frozen. */
    m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){3}, -1);
    assert_true(m->graph.n_initializer < TIDE_TEST_ONNX_MAX);
    m->inits[m->graph.n_initializer++] =
        tide_test_onnx_tensor(m, "scale", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, 1, (int64_t[]){3},
                              (double[]){0.5, -3.25, 0.1});
    n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("scale"), TIDE_TEST_NAMES("s"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "s"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "initializer \"scale\" is float64: tide trains float32 weights only (export the "
                 "model in float32, or list it as frozen to use it as a float32 constant)");
    const char *frozen = "scale";
    struct tide_onnx_options o = {.frozen = &frozen, .n_frozen = 1};
    struct tide_onnx_result r;
    tide_builder *b = import_ok(m, &o, &r);
    assert_int_equal(tide_builder_parameter_count(b), 0);
    float y[3];
    run_forward(b, &r, (float[]){2, 1, 10}, 3 * sizeof(float), y, 3);
    assert_true(y[0] == 1.0f && y[1] == -3.25f && y[2] == 10 * 0.1f);
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    tide_test_onnx_free(m);

    /* Finite doubles past float32's range. */
    m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    double_constant(m, "big", 1, (int64_t[]){2}, (double[]){3.4e38, -1e39});
    n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("big"), TIDE_TEST_NAMES("b"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "b"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node big (Constant, opset 14): attribute value: double -1e+39 at 1 is outside "
                 "float32's range, which tide computes in");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    m->inits[m->graph.n_initializer++] = tide_test_onnx_tensor(
        m, "huge", ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE, 1, (int64_t[]){2}, (double[]){1e300, 0});
    tide_test_onnx_node(m, "Mul", "mul", TIDE_TEST_NAMES("x", "huge"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, &o,
                 "initializer \"huge\": double 1e+300 at 0 is outside float32's range, which tide "
                 "computes in");
    tide_test_onnx_free(m);
}

/*
 * y = x + Cast(op(c)) for the int64 initializer c [2, 3] = {2, -3, 4, 5, 1, -6}: axes (n_axes -1:
 * none) an input from ReduceSum-13 and the others' 18, else an attribute; keepdims and
 * noop_with_empty_axes -1 when absent; x float of the result's shape.
 */
static struct tide_test_onnx *int_reduced(const char *op, int64_t opset, const int64_t *data,
                                          int64_t n_axes, const int64_t *axes, int64_t keepdims,
                                          int64_t noop, int32_t out_rank, const int64_t *out_dims)
{
    struct tide_test_onnx *m = tide_test_onnx_new(opset);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, out_rank, out_dims, -1);
    tide_test_onnx_init_i(m, "c", 2, (int64_t[]){2, 3}, data);
    bool axes_input = opset >= (strcmp(op, "ReduceSum") == 0 ? 13 : 18);
    if (n_axes >= 0 && axes_input)
        tide_test_onnx_init_i(m, "axes", 1, (int64_t[]){n_axes}, axes);
    Onnx__NodeProto *n = tide_test_onnx_node(
        m, op, "n", n_axes >= 0 && axes_input ? TIDE_TEST_NAMES("c", "axes") : TIDE_TEST_NAMES("c"),
        TIDE_TEST_NAMES("r"));
    if (n_axes >= 0 && !axes_input)
        tide_test_onnx_attr_ints(m, n, "axes", (size_t)n_axes, axes);
    if (keepdims >= 0)
        tide_test_onnx_attr_i(m, n, "keepdims", keepdims);
    if (noop >= 0)
        tide_test_onnx_attr_i(m, n, "noop_with_empty_axes", noop);
    n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("r"), TIDE_TEST_NAMES("rf"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("x", "rf"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    return m;
}

/*
 * ReduceProd, ReduceSum, ReduceMax and ReduceMin of integer constants fold on the host (axes,
 * keepdims, noop_with_empty_axes; overflow refused), and x.var(-1) + x.std(-1) as PyTorch
 * exports them (the count n as ReduceProd(Gather(Shape(x), [-1])), then mean((x - mean)^2) * n
 * / (n - 1)) give the unbiased variance.
 */
static void test_reduce_int_constants(void **state)
{
    (void)state;
    static const int64_t c[6] = {2, -3, 4, 5, 1, -6};
    static const float zeros[6] = {0};
    struct tide_test_onnx *m = int_reduced("ReduceProd", 14, c, -1, NULL, 0, -1, 0, NULL);
    expect_values(m, zeros, 1, 0, NULL, (float[]){720}, 1);
    m = int_reduced("ReduceProd", 14, c, 1, (int64_t[]){1}, -1, -1, 2, (int64_t[]){2, 1});
    expect_values(m, zeros, 2, 2, (int64_t[]){2, 1}, (float[]){-24, -30}, 2);
    m = int_reduced("ReduceSum", 13, c, 1, (int64_t[]){0}, 0, -1, 1, (int64_t[]){3});
    expect_values(m, zeros, 3, 1, (int64_t[]){3}, (float[]){7, -2, -2}, 3);
    m = int_reduced("ReduceMax", 13, c, 1, (int64_t[]){-1}, 0, -1, 1, (int64_t[]){2});
    expect_values(m, zeros, 2, 1, (int64_t[]){2}, (float[]){4, 5}, 2);
    m = int_reduced("ReduceMin", 18, c, 2, (int64_t[]){1, 0}, 1, -1, 2, (int64_t[]){1, 1});
    expect_values(m, zeros, 1, 2, (int64_t[]){1, 1}, (float[]){-6}, 1);
    m = int_reduced("ReduceMin", 11, c, 1, (int64_t[]){0}, 1, -1, 2, (int64_t[]){1, 3});
    expect_values(m, zeros, 3, 2, (int64_t[]){1, 3}, (float[]){2, -3, -6}, 3);
    m = int_reduced("ReduceSum", 13, c, -1, NULL, -1, 1, 2, (int64_t[]){2, 3});
    expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, (float[]){2, -3, 4, 5, 1, -6}, 6);
    m = int_reduced("ReduceSum", 13, c, -1, NULL, 0, -1, 0, NULL);
    expect_values(m, zeros, 1, 0, NULL, (float[]){3}, 1);

    m = int_reduced("ReduceProd", 14, (int64_t[]){1, (int64_t)1 << 40, 1, 1, (int64_t)1 << 23, 1},
                    -1, NULL, 0, -1, 0, NULL);
    import_fails(m, NULL,
                 "node n (ReduceProd, opset 14): the product of \"c\" overflows int64 at element 0 "
                 "of the result");
    tide_test_onnx_free(m);
    m = int_reduced("ReduceSum", 13, (int64_t[]){1, 2, 3, INT64_MAX, 0, 1}, 1, (int64_t[]){1}, 0,
                    -1, 1, (int64_t[]){2});
    import_fails(m, NULL,
                 "node n (ReduceSum, opset 13): the sum of \"c\" overflows int64 at element 1 of "
                 "the result");
    tide_test_onnx_free(m);
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, (int64_t[]){2}, -1);
    tide_test_onnx_init_i(m, "c", 2, (int64_t[]){2, 0}, NULL);
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "ReduceMax", "n", TIDE_TEST_NAMES("c"), TIDE_TEST_NAMES("r"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){1});
    tide_test_onnx_attr_i(m, n, "keepdims", 0);
    tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("x", "r"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    import_fails(m, NULL,
                 "node n (ReduceMax, opset 13): ReduceMax of no elements (a reduced axis of \"c\" "
                 "is empty)");
    tide_test_onnx_free(m);

    /* y = x.var(-1, keepdim=True) + x.std(-1, keepdim=True) for x [3, 5], as exported. */
    m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){3, 5}, -1);
    n = tide_test_onnx_node(m, "ReduceMean", "mean", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("mu"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){-1});
    tide_test_onnx_node(m, "Shape", "shape", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("s"));
    Onnx__NodeProto *k =
        tide_test_onnx_node(m, "Constant", "last", TIDE_TEST_NAMES(NULL), TIDE_TEST_NAMES("last"));
    tide_test_onnx_attr_t(m, k, "value",
                          tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1,
                                                (int64_t[]){1}, (int64_t[]){-1}));
    n = tide_test_onnx_node(m, "Gather", "gather", TIDE_TEST_NAMES("s", "last"),
                            TIDE_TEST_NAMES("len"));
    tide_test_onnx_attr_i(m, n, "axis", 0);
    n = tide_test_onnx_node(m, "ReduceProd", "prod", TIDE_TEST_NAMES("len"), TIDE_TEST_NAMES("nr"));
    tide_test_onnx_attr_i(m, n, "keepdims", 0);
    tide_test_onnx_node(m, "Sub", "d", TIDE_TEST_NAMES("x", "mu"), TIDE_TEST_NAMES("d"));
    tide_test_onnx_node(m, "Mul", "sq", TIDE_TEST_NAMES("d", "d"), TIDE_TEST_NAMES("sq"));
    n = tide_test_onnx_node(m, "ReduceMean", "mean2", TIDE_TEST_NAMES("sq"), TIDE_TEST_NAMES("m2"));
    tide_test_onnx_attr_ints(m, n, "axes", 1, (int64_t[]){-1});
    n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("nr"), TIDE_TEST_NAMES("nf"));
    tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
    tide_test_onnx_node(m, "Mul", "times_n", TIDE_TEST_NAMES("m2", "nf"), TIDE_TEST_NAMES("ss"));
    float_constant(m, "one", 0, NULL, (float[]){1});
    tide_test_onnx_node(m, "Sub", "n_1", TIDE_TEST_NAMES("nf", "one"), TIDE_TEST_NAMES("nm1"));
    tide_test_onnx_node(m, "Div", "var", TIDE_TEST_NAMES("ss", "nm1"), TIDE_TEST_NAMES("var"));
    tide_test_onnx_node(m, "Sqrt", "std", TIDE_TEST_NAMES("var"), TIDE_TEST_NAMES("std"));
    tide_test_onnx_node(m, "Add", "y", TIDE_TEST_NAMES("var", "std"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    float x[15], want[3];
    for (int i = 0; i < 15; i++)
        x[i] = 0.5f * (float)((i * 7) % 11) - 2;
    for (int i = 0; i < 3; i++) {
        double mean = 0, ss = 0;
        for (int j = 0; j < 5; j++)
            mean += x[i * 5 + j] / 5.0;
        for (int j = 0; j < 5; j++)
            ss += (x[i * 5 + j] - mean) * (x[i * 5 + j] - mean);
        want[i] = (float)(ss / 4 + sqrt(ss / 4));
    }
    expect_values(m, x, 15, 2, (int64_t[]){3, 1}, want, 3);
}

/* An Einsum case: the equation, the same with every index spelt out and the output explicit
 * (the reference's), and the operands' shapes. */
struct einsum_case {
    const char *equation, *spelt;
    int n;
    int32_t rank[3];
    int64_t dims[3][4];
};

/* Operand k's element i in the Einsum tests. */
static float einsum_operand(int k, int64_t i)
{
    return 0.25f * (float)((i * 7 + k * 3) % 9) - 1;
}

/*
 * The Einsum e by plain loops over every combination of its indices: y (as
 * many as the output holds, *n_y), and g, the gradient of mean(y^2) with
 * respect to operand 1 (when there is one).
 */
static void einsum_reference(const struct einsum_case *e, double *y, int64_t *n_y, double *g)
{
    const char *terms[4];
    size_t lens[4];
    int n_terms = 0;
    for (const char *p = e->spelt;; p++) {
        const char *end = p + strcspn(p, ",-");
        terms[n_terms] = p, lens[n_terms++] = (size_t)(end - p);
        if (*end == 0)
            break;
        p = *end == '-' ? end + 1 : end;
    }
    assert_int_equal(n_terms, e->n + 1);
    int64_t size[128] = {0};
    char letters[16];
    int n_letters = 0;
    for (int k = 0; k < e->n; k++)
        for (size_t a = 0; a < lens[k]; a++) {
            unsigned char ch = (unsigned char)terms[k][a];
            if (size[ch] == 0)
                letters[n_letters++] = (char)ch;
            size[ch] = e->dims[k][a];
        }
    int64_t combos = 1, operand_size[3] = {1, 1, 1};
    for (int l = 0; l < n_letters; l++)
        combos *= size[(unsigned char)letters[l]];
    *n_y = 1;
    for (size_t a = 0; a < lens[e->n]; a++)
        *n_y *= size[(unsigned char)terms[e->n][a]];
    for (int k = 0; k < e->n; k++)
        for (int32_t a = 0; a < e->rank[k]; a++)
            operand_size[k] *= e->dims[k][a];
    memset(y, 0, sizeof(double) * (size_t)*n_y);
    if (g)
        memset(g, 0, sizeof(double) * (size_t)operand_size[1]);
    for (int pass = 0; pass < (g ? 2 : 1); pass++) {
        for (int64_t combo = 0; combo < combos; combo++) {
            int64_t value[128], rest = combo, at[4];
            for (int l = n_letters - 1; l >= 0; l--) {
                value[(unsigned char)letters[l]] = rest % size[(unsigned char)letters[l]];
                rest /= size[(unsigned char)letters[l]];
            }
            for (int k = 0; k <= e->n; k++) {
                at[k] = 0;
                for (size_t a = 0; a < lens[k]; a++) {
                    unsigned char ch = (unsigned char)terms[k][a];
                    at[k] = at[k] * size[ch] + value[ch];
                }
            }
            double product = 1, others = 1;
            for (int k = 0; k < e->n; k++) {
                product *= einsum_operand(k, at[k]);
                others *= k == 1 ? 1 : einsum_operand(k, at[k]);
            }
            if (pass == 0)
                y[at[e->n]] += product;
            else
                g[at[1]] += 2 * y[at[e->n]] / (double)*n_y * others;
        }
    }
}

/* The model of e: operand 0 the graph input x, the others float initializers w1, w2. */
static struct tide_test_onnx *einsum_model(const struct einsum_case *e)
{
    static const char *const names[3] = {"x", "w1", "w2"};
    struct tide_test_onnx *m = tide_test_onnx_new(12);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, e->rank[0], e->dims[0], -1);
    for (int k = 1; k < e->n; k++) {
        float w[128];
        int64_t count = 1;
        for (int32_t a = 0; a < e->rank[k]; a++)
            count *= e->dims[k][a];
        assert_true(count <= 128);
        for (int64_t i = 0; i < count; i++)
            w[i] = einsum_operand(k, i);
        tide_test_onnx_init_f(m, names[k], e->rank[k], e->dims[k], w);
    }
    Onnx__NodeProto *n = tide_test_onnx_node(m, "Einsum", "e",
                                             e->n == 1   ? TIDE_TEST_NAMES("x")
                                             : e->n == 2 ? TIDE_TEST_NAMES("x", "w1")
                                                         : TIDE_TEST_NAMES("x", "w1", "w2"),
                                             TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_s(m, n, "equation", e->equation);
    tide_test_onnx_output(m, "y");
    return m;
}

/*
 * Einsum against plain loops over all its indices: batch, contracted and
 * free indices, an index summed out of one operand first, outer and inner
 * products, element-wise and batched outer products (a Mul), one operand (transpose, a full sum),
 * "...", three operands, the implicit output (ASCII order: upper case first); one SGD step through
 * every product of two or more operands checks the gradient of operand 1.
 * Refused: a diagonal, sizes that would broadcast, an output index in no
 * input.
 */
static void test_einsum(void **state)
{
    (void)state;
    static const struct einsum_case cases[] = {
        {"bij,jk->bik", "bij,jk->bik", 2, {3, 2}, {{2, 3, 4}, {4, 5}}},
        {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", 2, {4, 4}, {{2, 2, 3, 4}, {2, 2, 5, 4}}},
        {"bhqk,bhkd->bhqd", "bhqk,bhkd->bhqd", 2, {4, 4}, {{2, 2, 3, 5}, {2, 2, 5, 4}}},
        {"i,j->ij", "i,j->ij", 2, {1, 1}, {{3}, {4}}},
        {"bi,bi->b", "bi,bi->b", 2, {2, 2}, {{3, 5}, {3, 5}}},
        {"ij->ji", "ij->ji", 1, {2}, {{3, 4}}},
        {"bij->", "bij->", 1, {3}, {{2, 3, 4}}},
        {"bij -> jb", "bij->jb", 1, {3}, {{2, 3, 4}}},
        {"...ij,...jk->...ik", "xyij,xyjk->xyik", 2, {4, 4}, {{2, 3, 2, 4}, {2, 3, 4, 3}}},
        {"...ij,jk", "xij,jk->xik", 2, {3, 2}, {{2, 3, 4}, {4, 2}}},
        {"ab,bc,cd->ad", "ab,bc,cd->ad", 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 5}}},
        {"bn,anm,bm->ba", "bn,anm,bm->ba", 3, {2, 3, 2}, {{2, 3}, {4, 3, 2}, {2, 2}}},
        {"ij,jk", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 2}}},
        {"ba,Bc", "ba,Bc->Babc", 2, {2, 2}, {{2, 3}, {4, 2}}},
        {"bij,jk->bk", "bij,jk->bk", 2, {3, 2}, {{2, 3, 4}, {4, 5}}},
        /* Nothing contracted: a broadcasting Mul. */
        {"bi,bi->bi", "bi,bi->bi", 2, {2, 2}, {{3, 5}, {3, 5}}},
        {"bi,bj->bji", "bi,bj->bji", 2, {2, 2}, {{3, 4}, {3, 2}}},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct einsum_case *e = &cases[c];
        double want[128], grad[128];
        int64_t n_y, n_x = 1;
        einsum_reference(e, want, &n_y, e->n > 1 ? grad : NULL);
        for (int32_t a = 0; a < e->rank[0]; a++)
            n_x *= e->dims[0][a];
        float x[128], y[128];
        for (int64_t i = 0; i < n_x; i++)
            x[i] = einsum_operand(0, i);
        struct tide_test_onnx *m = einsum_model(e);
        forward_once(m, x, (size_t)n_x, y, (size_t)n_y, NULL);
        for (int64_t i = 0; i < n_y; i++) {
            if (fabs(y[i] - want[i]) > 1e-5 * (1 + fabs(want[i])))
                fail_msg("%s: y[%" PRId64 "] is %.9g, want %.9g", e->equation, i, y[i], want[i]);
        }
        if (e->n == 1)
            continue;
        int64_t n_w = 1;
        for (int32_t a = 0; a < e->rank[1]; a++)
            n_w *= e->dims[1][a];
        float w[128];
        m = einsum_model(e);
        train_one_step(m, x, (size_t)n_x * sizeof(float), "w1", w, (size_t)n_w);
        tide_test_onnx_free(m);
        for (int64_t i = 0; i < n_w; i++) {
            double after = einsum_operand(1, i) - 0.1 * grad[i];
            if (fabs(w[i] - after) > 1e-5 * (1 + fabs(after)))
                fail_msg("%s: w1[%" PRId64 "] is %.9g after a step, want %.9g", e->equation, i,
                         w[i], after);
        }
    }

    static const struct {
        const char *equation;
        int n;
        int32_t rank[2];
        int64_t dims[2][2];
        const char *want;
    } refused[] = {
        {"ii->i",
         1,
         {2},
         {{3, 3}},
         "node e (Einsum, opset 12): equation \"ii->i\": index 'i' appears twice in input 0 (a "
         "diagonal), which tide does not lower"},
        {"ij,jk->ik",
         2,
         {2, 2},
         {{2, 3}, {1, 4}},
         "node e (Einsum, opset 12): equation \"ij,jk->ik\": index 'j' is 3 in input 0 and 1 in "
         "input 1 (tide does not broadcast Einsum's indices)"},
        {"ij,jk->iz",
         2,
         {2, 2},
         {{2, 3}, {3, 4}},
         "node e (Einsum, opset 12): equation \"ij,jk->iz\": output index 'z' is in no input"},
        {"ijk,jk->ik",
         2,
         {2, 2},
         {{2, 3}, {3, 4}},
         "node e (Einsum, opset 12): equation \"ijk,jk->ik\": input 0 has rank 2, its term 3 "
         "indices"},
    };
    for (size_t c = 0; c < sizeof(refused) / sizeof(refused[0]); c++) {
        struct einsum_case e = {refused[c].equation,
                                NULL,
                                refused[c].n,
                                {refused[c].rank[0], refused[c].rank[1]},
                                {{refused[c].dims[0][0], refused[c].dims[0][1]},
                                 {refused[c].dims[1][0], refused[c].dims[1][1]}}};
        struct tide_test_onnx *m = einsum_model(&e);
        import_fails(m, NULL, refused[c].want);
        tide_test_onnx_free(m);
    }
}

/* y = CumSum(x, axis) with exclusive and reverse (-1: absent), x a float graph input [rows,
 * cols] and axis an int64 initializer. */
static struct tide_test_onnx *cum_sum_model(int64_t rows, int64_t cols, int64_t axis,
                                            int64_t exclusive, int64_t reverse)
{
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){rows, cols},
                         -1);
    tide_test_onnx_init_i(m, "axis", 0, NULL, &axis);
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "CumSum", "c", TIDE_TEST_NAMES("x", "axis"), TIDE_TEST_NAMES("y"));
    if (exclusive >= 0)
        tide_test_onnx_attr_i(m, n, "exclusive", exclusive);
    if (reverse >= 0)
        tide_test_onnx_attr_i(m, n, "reverse", reverse);
    tide_test_onnx_output(m, "y");
    return m;
}

/* Whether CumSum adds element i into the result at j along its axis. */
static bool cum_sum_takes(int64_t i, int64_t j, bool exclusive, bool reverse)
{
    return reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
}

/*
 * CumSum: the four exclusive / reverse combinations along both axes of a
 * [3, 4] input against loops (axis 1 given as -1 once), one SGD step
 * through the reversed exclusive sum along axis 0 (the gradient of the
 * scan's Slices, Adds and Concats), an integer constant folded, an axis of
 * 3000, infinities, one element; refused: an axis computed in the graph,
 * an int64 overflow.
 */
static void test_cum_sum(void **state)
{
    (void)state;
    float x[12];
    for (int k = 0; k < 12; k++)
        x[k] = 0.5f * (float)((k * 5) % 7) - 1.25f;
    for (int axis = 0; axis < 2; axis++) {
        for (int combo = 0; combo < 4; combo++) {
            bool exclusive = combo & 1, reverse = combo & 2;
            float want[12];
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 4; j++) {
                    double sum = 0;
                    for (int k = 0; k < (axis ? 4 : 3); k++) {
                        if (cum_sum_takes(k, axis ? j : i, exclusive, reverse))
                            sum += x[axis ? i * 4 + k : k * 4 + j];
                    }
                    want[i * 4 + j] = (float)sum;
                }
            struct tide_test_onnx *m = cum_sum_model(3, 4, axis && combo == 3 ? -1 : axis,
                                                     combo ? exclusive : -1, combo ? reverse : -1);
            expect_values(m, x, 12, 2, (int64_t[]){3, 4}, want, 12);
        }
    }

    /* y = CumSum(w x) along axis 0, exclusive and reversed: y[i, j] = sum over i' > i of
     * (w x)[i', j]; loss mean(y^2) over 12, so w[i', j] moves by -0.1 x[i', j] * sum over
     * i < i' of y[i, j] / 6. */
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){3, 4}, -1);
    float w0[12], w[12];
    for (int k = 0; k < 12; k++)
        w0[k] = 0.25f * (float)(k % 5) - 0.5f;
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){3, 4}, w0);
    tide_test_onnx_init_i(m, "axis", 0, NULL, (int64_t[]){0});
    tide_test_onnx_node(m, "Mul", "wx", TIDE_TEST_NAMES("w", "x"), TIDE_TEST_NAMES("wx"));
    Onnx__NodeProto *n =
        tide_test_onnx_node(m, "CumSum", "c", TIDE_TEST_NAMES("wx", "axis"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_attr_i(m, n, "exclusive", 1);
    tide_test_onnx_attr_i(m, n, "reverse", 1);
    tide_test_onnx_output(m, "y");
    train_one_step(m, x, sizeof(x), "w", w, 12);
    tide_test_onnx_free(m);
    double y[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            y[i * 4 + j] = 0;
            for (int k = i + 1; k < 3; k++)
                y[i * 4 + j] += (double)w0[k * 4 + j] * x[k * 4 + j];
        }
    for (int k = 0; k < 3; k++)
        for (int j = 0; j < 4; j++) {
            double dy = 0;
            for (int i = 0; i < k; i++)
                dy += y[i * 4 + j] / 6;
            assert_float_equal(w[k * 4 + j], w0[k * 4 + j] - 0.1 * x[k * 4 + j] * dy, 1e-6);
        }

    /* An integer constant: y = x + Cast(CumSum(c)), folded. */
    static const struct {
        int64_t axis, exclusive, reverse;
        float want[6];
    } folds[] = {
        {0, 0, 0, {1, 2, 3, 5, 7, 9}},
        {1, 0, 1, {6, 5, 3, 15, 11, 6}},
        {-1, 1, 1, {5, 3, 0, 11, 6, 0}},
    };
    for (size_t f = 0; f < sizeof(folds) / sizeof(folds[0]); f++) {
        m = tide_test_onnx_new(14);
        tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){2, 3},
                             -1);
        tide_test_onnx_init_i(m, "c", 2, (int64_t[]){2, 3}, (int64_t[]){1, 2, 3, 4, 5, 6});
        tide_test_onnx_init_i(m, "axis", 1, (int64_t[]){1}, &folds[f].axis);
        n = tide_test_onnx_node(m, "CumSum", "c", TIDE_TEST_NAMES("c", "axis"),
                                TIDE_TEST_NAMES("s"));
        tide_test_onnx_attr_i(m, n, "exclusive", folds[f].exclusive);
        tide_test_onnx_attr_i(m, n, "reverse", folds[f].reverse);
        n = tide_test_onnx_node(m, "Cast", "cast", TIDE_TEST_NAMES("s"), TIDE_TEST_NAMES("sf"));
        tide_test_onnx_attr_i(m, n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
        tide_test_onnx_node(m, "Add", "add", TIDE_TEST_NAMES("x", "sf"), TIDE_TEST_NAMES("y"));
        tide_test_onnx_output(m, "y");
        if (f == 0) {
            m->inits[0]->int64_data[4] = INT64_MAX;
            import_fails(m, NULL,
                         "node c (CumSum, opset 14): the running sum of \"c\" overflows int64 at "
                         "element 4");
            m->inits[0]->int64_data[4] = 5;
        }
        static const float zeros[6] = {0};
        expect_values(m, zeros, 6, 2, (int64_t[]){2, 3}, folds[f].want, 6);
    }

    /* A long axis (3000 elements, 12 rounds of the scan), every combination, against sums in
     * double; and an infinity reaches only the sums that include it: [1, inf, 2] gives
     * [1, inf, inf] (and [inf, inf, 2] reversed), as PyTorch's; one element, exclusive, is 0. */
    enum { LONG = 3000 };
    float *xs = malloc(2 * LONG * sizeof(float)), *ys = malloc(2 * LONG * sizeof(float));
    assert_true(xs && ys);
    for (int64_t k = 0; k < 2 * LONG; k++)
        xs[k] = (float)((k * 7919) % 201 - 100) / 64.0f;
    for (int combo = 0; combo < 4; combo++) {
        bool exclusive = combo & 1, reverse = combo & 2;
        struct tide_onnx_result r;
        m = cum_sum_model(2, LONG, 1, exclusive, reverse);
        tide_builder *b = import_ok(m, NULL, &r);
        run_forward(b, &r, xs, 2 * LONG * sizeof(float), ys, 2 * LONG);
        for (int64_t row = 0; row < 2; row++) {
            for (int64_t j = 0; j < LONG; j++) {
                double want = 0;
                for (int64_t i = 0; i < LONG; i++)
                    if (cum_sum_takes(i, j, exclusive, reverse))
                        want += xs[row * LONG + i];
                assert_float_equal(ys[row * LONG + j], want, 1e-3);
            }
        }
        tide_onnx_result_free(&r);
        tide_builder_free(b);
        tide_test_onnx_free(m);
    }
    free(xs);
    free(ys);
    m = cum_sum_model(1, 3, 1, -1, -1);
    expect_values(m, (float[]){1, INFINITY, 2}, 3, 2, (int64_t[]){1, 3},
                  (float[]){1, INFINITY, INFINITY}, 3);
    m = cum_sum_model(1, 3, 1, -1, 1);
    expect_values(m, (float[]){1, INFINITY, 2}, 3, 2, (int64_t[]){1, 3},
                  (float[]){INFINITY, INFINITY, 2}, 3);
    m = cum_sum_model(2, 1, 1, 1, 1);
    expect_values(m, (float[]){5, -3}, 2, 2, (int64_t[]){2, 1}, (float[]){0, 0}, 2);

    m = cum_sum_model(2, 3, 0, -1, -1);
    m->graph.n_initializer = 0;
    tide_test_onnx_input(m, "axis", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 0, NULL, -1);
    import_fails(m, NULL,
                 "node c (CumSum, opset 14): the axis (input \"axis\") must be a constant known at "
                 "import");
    tide_test_onnx_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_relu_forward_and_loss),
        cmocka_unit_test(test_shape_chain_folds),
        cmocka_unit_test(test_shared_constant_folds_twice),
        cmocka_unit_test(test_causal_mask_where),
        cmocka_unit_test(test_constant_copies),
        cmocka_unit_test(test_initializers),
        cmocka_unit_test(test_dynamic_batch),
        cmocka_unit_test(test_dynamic_dims_by_name),
        cmocka_unit_test(test_dynamic_shape_refused),
        cmocka_unit_test(test_unsupported_op_and_opset),
        cmocka_unit_test(test_missing_input),
        cmocka_unit_test(test_graph_inputs_refused),
        cmocka_unit_test(test_erf_gelu),
        cmocka_unit_test(test_lstm_bidirectional),
        cmocka_unit_test(test_gru),
        cmocka_unit_test(test_reduce_max_and_arg_max),
        cmocka_unit_test(test_legacy_broadcast),
        cmocka_unit_test(test_op_versions),
        cmocka_unit_test(test_legacy_attributes),
        cmocka_unit_test(test_legacy_modes),
        cmocka_unit_test(test_batch_norm_inference),
        cmocka_unit_test(test_batch_norm_training_ranks),
        cmocka_unit_test(test_local_functions),
        cmocka_unit_test(test_clip_tensor_bounds),
        cmocka_unit_test(test_gather_axis_graph_indices),
        cmocka_unit_test(test_opsets_18_on),
        cmocka_unit_test(test_instance_norm_global_max_pool),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_conv_transpose),
        cmocka_unit_test(test_pool_1d),
        cmocka_unit_test(test_gather_elements_import),
        cmocka_unit_test(test_nll_loss),
        cmocka_unit_test(test_softmax_cross_entropy_loss_weights),
        cmocka_unit_test(test_nll_loss_trains),
        cmocka_unit_test(test_grouped_conv),
        cmocka_unit_test(test_conv_1d),
        cmocka_unit_test(test_dilated_conv),
        cmocka_unit_test(test_slice_steps),
        cmocka_unit_test(test_window_pads),
        cmocka_unit_test(test_pow_activations_lrn),
        cmocka_unit_test(test_pow_tensors),
        cmocka_unit_test(test_windows_3d),
        cmocka_unit_test(test_expand_trains),
        cmocka_unit_test(test_tile),
        cmocka_unit_test(test_depth_space),
        cmocka_unit_test(test_comparisons_fold),
        cmocka_unit_test(test_float_math_folded_for_indices),
        cmocka_unit_test(test_int_neg_abs_fold),
        cmocka_unit_test(test_mod_fold),
        cmocka_unit_test(test_scatter_nd_fold),
        cmocka_unit_test(test_padding_mask),
        cmocka_unit_test(test_masks_on_tensors),
        cmocka_unit_test(test_where_computed_trains),
        cmocka_unit_test(test_gather_axis_constant_ids),
        cmocka_unit_test(test_eye_like),
        cmocka_unit_test(test_mask_selections),
        cmocka_unit_test(test_unnamed_graph_input),
        cmocka_unit_test(test_reduce_prod),
        cmocka_unit_test(test_bad_bytes),
        cmocka_unit_test(test_trig_ops),
        cmocka_unit_test(test_round_ops),
        cmocka_unit_test(test_double_constants),
        cmocka_unit_test(test_reduce_int_constants),
        cmocka_unit_test(test_einsum),
        cmocka_unit_test(test_cum_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
