/* SPDX-License-Identifier: MIT */
/*
 * onnx_builder.c: small ONNX ModelProtos for the tests (onnx_builder.h),
 * built over the generated protobuf-c structs and packed by protobuf-c.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_builder.h"

/* The attributes one node holds. */
#define NODE_MAX_ATTRIBUTES 8

void *tide_test_onnx_own(struct tide_test_onnx *m, size_t size)
{
    void *p = calloc(1, size ? size : 1);
    assert_non_null(p);
    assert_true(m->n_owned < (int)(sizeof(m->owned) / sizeof(m->owned[0])));
    m->owned[m->n_owned++] = p;
    return p;
}

char *tide_test_onnx_own_str(struct tide_test_onnx *m, const char *s)
{
    char *p = tide_test_onnx_own(m, strlen(s) + 1);
    memcpy(p, s, strlen(s));
    return p;
}

struct tide_test_onnx *tide_test_onnx_new(int64_t opset)
{
    struct tide_test_onnx *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->model.has_ir_version = true;
    m->model.ir_version = 8;
    m->opset.has_version = true;
    m->opset.version = opset;
    m->opset.domain = tide_test_onnx_own_str(m, "");
    m->opsets[0] = &m->opset;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.graph = &m->graph;
    m->graph.name = tide_test_onnx_own_str(m, "g");
    m->graph.node = m->nodes;
    m->graph.input = m->inputs;
    m->graph.output = m->outputs;
    m->graph.initializer = m->inits;
    return m;
}

void tide_test_onnx_free(struct tide_test_onnx *m)
{
    if (!m)
        return;
    for (int k = 0; k < m->n_owned; k++)
        free(m->owned[k]);
    free(m);
}

/* A value's name and, for rank >= 0, its tensor type (dimension dynamic_at the dim_param "N"). */
static Onnx__ValueInfoProto *value_info(struct tide_test_onnx *m, const char *name,
                                        int32_t elem_type, int32_t rank, const int64_t *dims,
                                        int32_t dynamic_at)
{
    Onnx__ValueInfoProto *v = tide_test_onnx_own(m, sizeof(*v));
    onnx__value_info_proto__init(v);
    v->name = tide_test_onnx_own_str(m, name);
    if (rank < 0)
        return v;
    Onnx__TypeProto *t = tide_test_onnx_own(m, sizeof(*t));
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = tide_test_onnx_own(m, sizeof(*tt));
    onnx__type_proto__tensor__init(tt);
    Onnx__TensorShapeProto *shape = tide_test_onnx_own(m, sizeof(*shape));
    onnx__tensor_shape_proto__init(shape);
    Onnx__TensorShapeProto__Dimension **d = tide_test_onnx_own(m, sizeof(*d) * (size_t)rank);
    for (int32_t k = 0; k < rank; k++) {
        d[k] = tide_test_onnx_own(m, sizeof(**d));
        onnx__tensor_shape_proto__dimension__init(d[k]);
        if (k == dynamic_at) {
            d[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d[k]->dim_param = tide_test_onnx_own_str(m, "N");
        } else {
            d[k]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d[k]->dim_value = dims[k];
        }
    }
    shape->n_dim = (size_t)rank;
    shape->dim = d;
    tt->has_elem_type = true;
    tt->elem_type = elem_type;
    tt->shape = shape;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->type = t;
    return v;
}

void tide_test_onnx_input(struct tide_test_onnx *m, const char *name, int32_t elem_type,
                          int32_t rank, const int64_t *dims, int32_t dynamic_at)
{
    assert_true(m->graph.n_input < TIDE_TEST_ONNX_MAX);
    m->inputs[m->graph.n_input++] = value_info(m, name, elem_type, rank, dims, dynamic_at);
}

void tide_test_onnx_dynamic(struct tide_test_onnx *m, const char *input, int32_t axis,
                            const char *dim_param)
{
    for (size_t k = 0; k < m->graph.n_input; k++) {
        if (strcmp(m->inputs[k]->name, input) != 0)
            continue;
        Onnx__TensorShapeProto *shape = m->inputs[k]->type->tensor_type->shape;
        assert_true(axis >= 0 && (size_t)axis < shape->n_dim);
        Onnx__TensorShapeProto__Dimension *d = shape->dim[axis];
        /* dim_value and dim_param share a union (a oneof): set the one value_case names. */
        d->value_case = dim_param ? ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                                  : ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE__NOT_SET;
        d->dim_value = 0;
        if (dim_param)
            d->dim_param = tide_test_onnx_own_str(m, dim_param);
        return;
    }
    fail_msg("no graph input \"%s\"", input);
}

void tide_test_onnx_output(struct tide_test_onnx *m, const char *name)
{
    assert_true(m->graph.n_output < TIDE_TEST_ONNX_MAX);
    m->outputs[m->graph.n_output++] = value_info(m, name, 0, -1, NULL, -1);
}

Onnx__TensorProto *tide_test_onnx_tensor(struct tide_test_onnx *m, const char *name, int32_t type,
                                         int32_t rank, const int64_t *dims, const void *data)
{
    assert_true(type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
                type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE ||
                type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64);
    Onnx__TensorProto *t = tide_test_onnx_own(m, sizeof(*t));
    onnx__tensor_proto__init(t);
    t->name = tide_test_onnx_own_str(m, name);
    t->has_data_type = true;
    t->data_type = type;
    t->n_dims = (size_t)rank;
    t->dims = tide_test_onnx_own(m, sizeof(int64_t) * (size_t)rank);
    int64_t n = 1;
    for (int32_t k = 0; k < rank; k++)
        t->dims[k] = dims[k], n *= dims[k];
    size_t elem = type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ? sizeof(float) : sizeof(int64_t);
    _Static_assert(sizeof(double) == sizeof(int64_t), "a double takes an int64's bytes");
    void *values = tide_test_onnx_own(m, elem * (size_t)n);
    if (data)
        memcpy(values, data, elem * (size_t)n);
    if (type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT) {
        t->n_float_data = (size_t)n;
        t->float_data = values;
    } else if (type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE) {
        t->n_double_data = (size_t)n;
        t->double_data = values;
    } else {
        t->n_int64_data = (size_t)n;
        t->int64_data = values;
    }
    return t;
}

void tide_test_onnx_init_f(struct tide_test_onnx *m, const char *name, int32_t rank,
                           const int64_t *dims, const float *data)
{
    assert_true(m->graph.n_initializer < TIDE_TEST_ONNX_MAX);
    m->inits[m->graph.n_initializer++] =
        tide_test_onnx_tensor(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims, data);
}

void tide_test_onnx_init_i(struct tide_test_onnx *m, const char *name, int32_t rank,
                           const int64_t *dims, const int64_t *data)
{
    assert_true(m->graph.n_initializer < TIDE_TEST_ONNX_MAX);
    m->inits[m->graph.n_initializer++] =
        tide_test_onnx_tensor(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, rank, dims, data);
}

/* A copy of the NULL-terminated names that the model owns; *n gets their count. */
static char **own_names(struct tide_test_onnx *m, const char *const *names, size_t *n)
{
    for (*n = 0; names[*n]; (*n)++)
        ;
    char **copy = tide_test_onnx_own(m, sizeof(char *) * (*n + 1));
    for (size_t k = 0; k < *n; k++)
        copy[k] = tide_test_onnx_own_str(m, names[k]);
    return copy;
}

Onnx__NodeProto *tide_test_onnx_node(struct tide_test_onnx *m, const char *op, const char *name,
                                     const char *const *ins, const char *const *outs)
{
    assert_true(m->graph.n_node < TIDE_TEST_ONNX_MAX);
    Onnx__NodeProto *n = tide_test_onnx_own(m, sizeof(*n));
    onnx__node_proto__init(n);
    n->op_type = tide_test_onnx_own_str(m, op);
    n->name = tide_test_onnx_own_str(m, name);
    n->input = own_names(m, ins, &n->n_input);
    n->output = own_names(m, outs, &n->n_output);
    n->attribute = tide_test_onnx_own(m, sizeof(Onnx__AttributeProto *) * NODE_MAX_ATTRIBUTES);
    m->nodes[m->graph.n_node++] = n;
    return n;
}

Onnx__AttributeProto *tide_test_onnx_attr(struct tide_test_onnx *m, Onnx__NodeProto *n,
                                          const char *name)
{
    assert_true(n->n_attribute < NODE_MAX_ATTRIBUTES);
    Onnx__AttributeProto *a = tide_test_onnx_own(m, sizeof(*a));
    onnx__attribute_proto__init(a);
    a->name = tide_test_onnx_own_str(m, name);
    n->attribute[n->n_attribute++] = a;
    return a;
}

void tide_test_onnx_attr_i(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                           int64_t v)
{
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, name);
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    a->has_i = true;
    a->i = v;
}

void tide_test_onnx_attr_f(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name, float v)
{
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, name);
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    a->has_f = true;
    a->f = v;
}

void tide_test_onnx_attr_s(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                           const char *v)
{
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, name);
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    a->has_s = true;
    a->s.data = (uint8_t *)tide_test_onnx_own_str(m, v);
    a->s.len = strlen(v);
}

void tide_test_onnx_attr_ints(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                              size_t count, const int64_t *v)
{
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, name);
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    a->n_ints = count;
    a->ints = tide_test_onnx_own(m, count ? count * sizeof(int64_t) : 1);
    if (count)
        memcpy(a->ints, v, count * sizeof(int64_t));
}

void tide_test_onnx_attr_t(struct tide_test_onnx *m, Onnx__NodeProto *n, const char *name,
                           Onnx__TensorProto *t)
{
    Onnx__AttributeProto *a = tide_test_onnx_attr(m, n, name);
    a->has_type = true;
    a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    a->t = t;
}

Onnx__FunctionProto *tide_test_onnx_function(struct tide_test_onnx *m, const char *domain,
                                             const char *name, size_t n_nodes,
                                             const char *const *ins, const char *const *outs)
{
    assert_true(m->model.n_functions < TIDE_TEST_ONNX_MAX && n_nodes <= m->graph.n_node);
    Onnx__FunctionProto *f = tide_test_onnx_own(m, sizeof(*f));
    onnx__function_proto__init(f);
    f->domain = tide_test_onnx_own_str(m, domain);
    f->name = tide_test_onnx_own_str(m, name);
    f->input = own_names(m, ins, &f->n_input);
    f->output = own_names(m, outs, &f->n_output);
    f->node = tide_test_onnx_own(m, sizeof(Onnx__NodeProto *) * (n_nodes + 1));
    m->graph.n_node -= n_nodes;
    memcpy(f->node, m->nodes + m->graph.n_node, sizeof(Onnx__NodeProto *) * n_nodes);
    f->n_node = n_nodes;
    m->functions[m->model.n_functions++] = f;
    m->model.functions = m->functions;
    return f;
}

uint8_t *tide_test_onnx_pack(struct tide_test_onnx *m, size_t *len)
{
    *len = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *bytes = malloc(*len ? *len : 1);
    assert_non_null(bytes);
    onnx__model_proto__pack(&m->model, bytes);
    return bytes;
}

struct tide_test_onnx *tide_test_onnx_rgb_gemm(void)
{
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, (int64_t[]){4, 3, 8, 8},
                         -1);
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){192, 3}, NULL);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, NULL);
    tide_test_onnx_node(m, "Flatten", "flat", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("f"));
    tide_test_onnx_node(m, "Gemm", "Gemm", TIDE_TEST_NAMES("f", "W", "b"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    return m;
}

struct tide_test_onnx *tide_test_onnx_seq_linear(int64_t features, int64_t classes, int64_t seq)
{
    struct tide_test_onnx *m = tide_test_onnx_new(17);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 3,
                         (int64_t[]){0, 0, features}, -1);
    tide_test_onnx_dynamic(m, "x", 0, "batch");
    tide_test_onnx_dynamic(m, "x", 1, "seq");
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){seq > 0 ? seq * features : features, classes},
                          NULL);
    const char *in = "x";
    if (seq > 0) {
        tide_test_onnx_node(m, "Flatten", "flat", TIDE_TEST_NAMES("x"), TIDE_TEST_NAMES("xf"));
        in = "xf";
    }
    tide_test_onnx_node(m, "MatMul", "mm", TIDE_TEST_NAMES(in, "W"), TIDE_TEST_NAMES("logits"));
    tide_test_onnx_output(m, "logits");
    return m;
}

struct tide_test_onnx *tide_test_onnx_masked_pair(int64_t batch, int64_t features)
{
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    int64_t dims[2] = {batch, features};
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, dims, -1);
    tide_test_onnx_input(m, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, dims, -1);
    tide_test_onnx_init_i(m, "zero", 0, NULL, (int64_t[]){0});
    Onnx__NodeProto *c = tide_test_onnx_node(m, "Constant", "fzero_c", TIDE_TEST_NAMES(NULL),
                                             TIDE_TEST_NAMES("fzero"));
    tide_test_onnx_attr_t(
        m, c, "value",
        tide_test_onnx_tensor(m, "", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 0, NULL, (float[]){0}));
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){features, 3}, NULL);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){3}, NULL);
    tide_test_onnx_node(m, "Equal", "eq", TIDE_TEST_NAMES("mask", "zero"), TIDE_TEST_NAMES("pad"));
    tide_test_onnx_node(m, "Where", "where", TIDE_TEST_NAMES("pad", "fzero", "x"),
                        TIDE_TEST_NAMES("kept"));
    tide_test_onnx_node(m, "Gemm", "Gemm", TIDE_TEST_NAMES("kept", "W", "b"),
                        TIDE_TEST_NAMES("logits"));
    tide_test_onnx_output(m, "logits");
    return m;
}

void tide_test_onnx_masked_pair_data(int64_t n, int64_t features, float *x, int64_t *mask,
                                     int64_t *labels)
{
    uint64_t seed = 11;
    for (int64_t i = 0; i < n * features; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)(seed >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
        mask[i] = (seed >> 20) % 4 != 0; /* a quarter of the features dropped */
    }
    for (int64_t i = 0; i < n; i++) {
        float a = mask[i * features] ? x[i * features] : 0,
              b = mask[i * features + 1] ? x[i * features + 1] : 0;
        labels[i] = a == 0 && b == 0 ? 2 : a > b ? 0 : 1;
    }
}
