/* SPDX-License-Identifier: MIT */
/*
 * onnx_builder.h: small ONNX models built by hand for the tests that need
 * them (test_onnx imports them, test_bench writes them for tide-bench
 * train --onnx), with the protobuf-c structs generated from Debian's
 * onnx.proto. One copy of the ModelProto plumbing instead of one per test.
 *
 * A model has one opset of the default domain and at most
 * TIDE_TEST_ONNX_MAX nodes, graph inputs, graph outputs and initializers.
 * Everything the builder allocates (names, dims, tensors, attributes; also
 * what a test allocates with tide_test_onnx_own) belongs to the model and is
 * freed by tide_test_onnx_free. The structs are plain: a test may reach into
 * them to make a model the helpers cannot (a tensor with absurd dims, an
 * attribute of another type). Failures are cmocka assertions.
 *
 * Example usage:
 *
 *     struct tide_test_onnx *m = tide_test_onnx_new(13);
 *     tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2,
 *                          (int64_t[]){2, 3}, -1);
 *     tide_test_onnx_init_f(m, "W", 2, (int64_t[]){3, 4}, NULL);  // zeros
 *     tide_test_onnx_node(m, "MatMul", "mm", TIDE_TEST_NAMES("x", "W"), TIDE_TEST_NAMES("y"));
 *     tide_test_onnx_output(m, "y");
 *     size_t len;
 *     uint8_t *bytes = tide_test_onnx_pack(m, &len);  // malloc'd; the caller frees it
 *     tide_test_onnx_free(m);
 */
#ifndef TIDE_TESTS_ONNX_BUILDER_H
#define TIDE_TESTS_ONNX_BUILDER_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"

/* The most nodes, inputs, outputs and initializers one model holds. */
#define TIDE_TEST_ONNX_MAX 32

struct tide_test_onnx {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto *nodes[TIDE_TEST_ONNX_MAX];
    Onnx__ValueInfoProto *inputs[TIDE_TEST_ONNX_MAX], *outputs[TIDE_TEST_ONNX_MAX];
    Onnx__TensorProto *inits[TIDE_TEST_ONNX_MAX];
    Onnx__FunctionProto *functions[TIDE_TEST_ONNX_MAX];
    void *owned[TIDE_TEST_ONNX_MAX * 64]; /* everything calloc'd, freed by tide_test_onnx_free */
    int n_owned;
};

/* A NULL-terminated list of names, as tide_test_onnx_node takes its inputs and outputs. */
#define TIDE_TEST_NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* An empty model (IR version 8, graph "g") importing opset of the default domain. */
struct tide_test_onnx *tide_test_onnx_new(int64_t opset);

/* Frees the model and everything it owns; NULL is a no-op. */
void tide_test_onnx_free(struct tide_test_onnx *m);

/* size zeroed bytes that the model owns. */
void *tide_test_onnx_own(struct tide_test_onnx *m, size_t size);

/* A copy of s that the model owns. */
char *tide_test_onnx_own_str(struct tide_test_onnx *m, const char *s);

/*
 * A graph input of elem_type (an ONNX__TENSOR_PROTO__DATA_TYPE__*) and the
 * shape dims[0..rank); dimension dynamic_at (-1: none) is the dim_param "N"
 * instead. rank -1 gives an input without a type.
 */
void tide_test_onnx_input(struct tide_test_onnx *m, const char *name, int32_t elem_type,
                          int32_t rank, const int64_t *dims, int32_t dynamic_at);

/*
 * Makes dimension axis of the graph input called input dynamic: named
 * dim_param, or without a value or name when dim_param is NULL.
 */
void tide_test_onnx_dynamic(struct tide_test_onnx *m, const char *input, int32_t axis,
                            const char *dim_param);

/* A graph output, without a type (the importer infers it). */
void tide_test_onnx_output(struct tide_test_onnx *m, const char *name);

/*
 * A tensor of type FLOAT (data: floats), DOUBLE (doubles) or INT64 (int64_t
 * values) and the shape dims[0..rank), owned by the model but in no list of it: for a
 * Constant's value attribute, or an initializer a test changes first. data
 * NULL gives zeros.
 */
Onnx__TensorProto *tide_test_onnx_tensor(struct tide_test_onnx *m, const char *name, int32_t type,
                                         int32_t rank, const int64_t *dims, const void *data);

/* A float initializer (data NULL: zeros). */
void tide_test_onnx_init_f(struct tide_test_onnx *m, const char *name, int32_t rank,
                           const int64_t *dims, const float *data);

/* An int64 initializer. */
void tide_test_onnx_init_i(struct tide_test_onnx *m, const char *name, int32_t rank,
                           const int64_t *dims, const int64_t *data);

/* A node of op named name; ins and outs are TIDE_TEST_NAMES lists. Up to 8 attributes. */
Onnx__NodeProto *tide_test_onnx_node(struct tide_test_onnx *m, const char *op, const char *name,
                                     const char *const *ins, const char *const *outs);

/* An attribute of n, named and otherwise empty: the caller sets its type and value. */
Onnx__AttributeProto *tide_test_onnx_attr(struct tide_test_onnx *m, Onnx__NodeProto *n,
                                          const char *name);

/* An INT attribute of n. */
void tide_test_onnx_attr_i(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                           int64_t v);

/* A FLOAT attribute of n. */
void tide_test_onnx_attr_f(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name, float v);

/* A STRING attribute of n (v copied). */
void tide_test_onnx_attr_s(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                           const char *v);

/* An INTS attribute of n: count values copied from v. */
void tide_test_onnx_attr_ints(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                              size_t count, const int64_t *v);

/* A TENSOR attribute of n (t from tide_test_onnx_tensor). */
void tide_test_onnx_attr_t(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                           Onnx__TensorProto *t);

/*
 * Moves the model's last n_nodes graph nodes into a new model-local function
 * domain.name (ModelProto.functions) with formal inputs ins and outputs outs
 * (NULL-terminated); a node of the graph or of another function calls it
 * with op type name and that domain (set the node's domain field).
 */
Onnx__FunctionProto *tide_test_onnx_function(struct tide_test_onnx *m, const char *domain,
                                             const char *name, size_t n_nodes,
                                             const char *const *ins, const char *const *outs);

/* The model's bytes, malloc'd (the caller frees them), their count in *len. */
uint8_t *tide_test_onnx_pack(struct tide_test_onnx *m, size_t *len);

/*
 * The fixture of the tests that train a model of two graph inputs
 * (test_bench, test_daemon): x float [batch, features] and mask int64 of the
 * same shape, logits [batch, 3] = Gemm(Where(mask == 0, 0, x), W, b), W and
 * b initializers of zeros.
 */
struct tide_test_onnx *tide_test_onnx_masked_pair(int64_t batch, int64_t features);

/*
 * A model exported with dynamic_axes {0: "batch", 1: "seq"}: x float [batch, seq, features]
 * times W [features, classes] (zeros), logits [batch, seq, classes]; or, with seq > 0 (the one
 * length it is built for), Flatten(x) times W [seq * features, classes], logits [batch,
 * classes]. The fixture of the tests of --dim (test_onnx_training, test_bench, test_daemon).
 */
struct tide_test_onnx *tide_test_onnx_seq_linear(int64_t features, int64_t classes, int64_t seq);

/*
 * The fixture of the tests that train an --onnx model on synthetic data of
 * its own shape (test_bench, test_daemon): x float [4, 3, 8, 8], logits
 * [4, 3] = Gemm(Flatten(x), W, b), W [192, 3] and b [3] zeros (579
 * parameters).
 */
struct tide_test_onnx *tide_test_onnx_rgb_gemm(void);

/*
 * n examples for it, from a fixed LCG: x uniform in [-1, 1), a quarter of
 * the mask 0, and each label the class of the larger kept feature of the
 * first two (0 or 1), or 2 when both are dropped.
 */
void tide_test_onnx_masked_pair_data(int64_t n, int64_t features, float *x, int64_t *mask,
                                     int64_t *labels);

#endif
