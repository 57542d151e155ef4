/* SPDX-License-Identifier: MIT */
/*
 * test_import.c: tide.v1.Graph import and export (graph/import.c, graph/export.c).
 *
 * The tests build tide.v1.Graph messages directly in C with a small builder
 * (gnode(graph, name, op, IN(inputs...), attributes..., NULL)), pack them to
 * bytes and import the bytes, so that every case goes through the same wire
 * path as the daemon. Each refused graph is checked for its status and for
 * the key content of its message, the offending node's name included.
 * Round trips build IR graphs with the builder API, export, import and
 * compare node by node, then check that a second export gives the same bytes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import.h"

/* The builder's arena: created and freed around each test. */
static struct tide_arena *A;

static int setup(void **state)
{
    (void)state;
    A = tide_arena_new(0);
    return A ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    tide_arena_free(A);
    A = NULL;
    return 0;
}

/* ============================================================================
 * A builder of tide.v1.Graph messages
 * ========================================================================== */

/* A NULL-terminated list of input strings. */
#define IN(...) ((const char *[]){__VA_ARGS__, NULL})
#define NO_IN   ((const char *[]){NULL})
/* Literal int64 / float lists for attribute values. */
#define I64S(...) (int64_t[]){__VA_ARGS__}, (size_t)(sizeof((int64_t[]){__VA_ARGS__}) / 8)
#define F32S(...) (float[]){__VA_ARGS__}, (size_t)(sizeof((float[]){__VA_ARGS__}) / 4)

static void *balloc(size_t size)
{
    void *p = tide_arena_alloc(A, size);
    assert_non_null(p);
    return p;
}

static Tide__V1__Graph *gmsg(void)
{
    Tide__V1__Graph *g = balloc(sizeof(*g));
    tide__v1__graph__init(g);
    g->nodes = balloc(256 * sizeof(*g->nodes));
    return g;
}

static Tide__V1__AttrValue *av_new(Tide__V1__AttrValue__ValueCase value_case)
{
    Tide__V1__AttrValue *v = balloc(sizeof(*v));
    tide__v1__attr_value__init(v);
    v->value_case = value_case;
    return v;
}

static Tide__V1__AttrValue *av_int(int64_t i)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_I);
    v->i = i;
    return v;
}

static Tide__V1__AttrValue *av_float(float f)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_F);
    v->f = f;
    return v;
}

static Tide__V1__AttrValue *av_bool(bool b)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_B);
    v->b = b;
    return v;
}

static Tide__V1__AttrValue *av_string(const char *s)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_S);
    v->s = tide_arena_strdup(A, s);
    return v;
}

static Tide__V1__AttrValue *av_dtype(int dtype)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_DTYPE);
    v->dtype = (Tide__V1__DataType)dtype;
    return v;
}

static Tide__V1__TensorShape *wire_shape(const int64_t *dims, size_t n)
{
    Tide__V1__TensorShape *s = balloc(sizeof(*s));
    tide__v1__tensor_shape__init(s);
    s->n_dims = n;
    s->dims = balloc(n * sizeof(int64_t) + 1);
    if (n)
        memcpy(s->dims, dims, n * sizeof(int64_t));
    return s;
}

static Tide__V1__AttrValue *av_shape(const int64_t *dims, size_t n)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_SHAPE);
    v->shape = wire_shape(dims, n);
    return v;
}

static Tide__V1__AttrValue *av_ints(const int64_t *values, size_t n)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_INTS);
    v->ints = balloc(sizeof(*v->ints));
    tide__v1__attr_value__int_list__init(v->ints);
    v->ints->n_values = n;
    v->ints->values = balloc(n * sizeof(int64_t) + 1);
    memcpy(v->ints->values, values, n * sizeof(int64_t));
    return v;
}

static Tide__V1__AttrValue *av_floats(const float *values, size_t n)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_FLOATS);
    v->floats = balloc(sizeof(*v->floats));
    tide__v1__attr_value__float_list__init(v->floats);
    v->floats->n_values = n;
    v->floats->values = balloc(n * sizeof(float) + 1);
    memcpy(v->floats->values, values, n * sizeof(float));
    return v;
}

/* A tensor attribute with data_len bytes of a simple pattern, whatever the shape says. */
static Tide__V1__AttrValue *av_tensor(int dtype, const int64_t *dims, size_t n, size_t data_len)
{
    Tide__V1__AttrValue *v = av_new(TIDE__V1__ATTR_VALUE__VALUE_TENSOR);
    v->tensor = balloc(sizeof(*v->tensor));
    tide__v1__tensor__init(v->tensor);
    v->tensor->dtype = (Tide__V1__DataType)dtype;
    v->tensor->shape = wire_shape(dims, n);
    v->tensor->data.len = data_len;
    v->tensor->data.data = balloc(data_len);
    for (size_t i = 0; i < data_len; i++)
        v->tensor->data.data[i] = (uint8_t)(i * 7);
    return v;
}

/*
 * Appends a node: name, op, a NULL-terminated input list, then (key, value)
 * attribute pairs ending with NULL.
 */
static Tide__V1__Node *gnode(Tide__V1__Graph *g, const char *name, const char *op,
                             const char **inputs, ...)
{
    assert_true(g->n_nodes < 256);
    Tide__V1__Node *n = balloc(sizeof(*n));
    tide__v1__node__init(n);
    n->name = tide_arena_strdup(A, name);
    n->op = tide_arena_strdup(A, op);
    size_t n_inputs = 0;
    while (inputs[n_inputs])
        n_inputs++;
    n->inputs = balloc((n_inputs + 1) * sizeof(char *));
    for (size_t i = 0; i < n_inputs; i++)
        n->inputs[i] = tide_arena_strdup(A, inputs[i]);
    n->n_inputs = n_inputs;
    n->attrs = balloc(16 * sizeof(*n->attrs));
    va_list args;
    va_start(args, inputs);
    for (const char *key; (key = va_arg(args, const char *)) != NULL;) {
        Tide__V1__Node__AttrsEntry *e = balloc(sizeof(*e));
        tide__v1__node__attrs_entry__init(e);
        e->key = tide_arena_strdup(A, key);
        e->value = va_arg(args, Tide__V1__AttrValue *);
        assert_true(n->n_attrs < 16);
        n->attrs[n->n_attrs++] = e;
    }
    va_end(args);
    g->nodes[g->n_nodes++] = n;
    return n;
}

/* A float32 Placeholder of the given shape. */
static void gplaceholder(Tide__V1__Graph *g, const char *name, int dtype, const int64_t *dims,
                         size_t n)
{
    gnode(g, name, "Placeholder", NO_IN, "dtype", av_dtype(dtype), "shape", av_shape(dims, n),
          NULL);
}

static uint8_t *pack(const Tide__V1__Graph *g, size_t *len)
{
    *len = tide__v1__graph__get_packed_size(g);
    uint8_t *buf = balloc(*len + 1);
    assert_int_equal(tide__v1__graph__pack(g, buf), *len);
    return buf;
}

/* Packs the message and imports the bytes. */
static enum tide_status import_msg(const Tide__V1__Graph *g, const struct tide_graph_limits *limits,
                                   struct tide_graph **out, struct tide_error *err)
{
    size_t len;
    uint8_t *buf = pack(g, &len);
    tide_error_clear(err);
    return tide_graph_import(buf, len, limits, out, err);
}

/*
 * Imports g with limits (NULL: defaults), expects status and a message that
 * holds every one of the NULL-terminated strings that follow.
 */
static void expect_refused(const Tide__V1__Graph *g, const struct tide_graph_limits *limits,
                           enum tide_status status, ...)
{
    struct tide_graph *out = (struct tide_graph *)&out;
    struct tide_error err;
    enum tide_status st = import_msg(g, limits, &out, &err);
    print_message("  -> %s: %s\n", tide_status_name(st), err.message);
    assert_null(out);
    assert_int_equal(st, status);
    assert_int_equal(err.status, status);
    va_list args;
    va_start(args, status);
    for (const char *want; (want = va_arg(args, const char *)) != NULL;) {
        if (!strstr(err.message, want))
            fail_msg("message \"%s\" lacks \"%s\"", err.message, want);
    }
    va_end(args);
}

/* Imports g and expects success; returns the graph. */
static struct tide_graph *expect_imported(const Tide__V1__Graph *g)
{
    struct tide_graph *out = NULL;
    struct tide_error err;
    enum tide_status st = import_msg(g, NULL, &out, &err);
    if (st != TIDE_OK)
        fail_msg("import: %s: %s", tide_status_name(st), err.message);
    assert_non_null(out);
    return out;
}

/* ============================================================================
 * IR graphs for the round trips
 * ========================================================================== */

static uint32_t add(struct tide_graph *g, enum tide_op op, const char *name,
                    const struct tide_edge *inputs, uint32_t n_inputs)
{
    uint32_t id;
    struct tide_error err;
    assert_int_equal(tide_graph_add_node(g, op, name, &id, &err), TIDE_OK);
    if (n_inputs)
        assert_int_equal(tide_graph_set_inputs(g, id, inputs, n_inputs, &err), TIDE_OK);
    return id;
}

/* A literal edge list, as (edges, n) arguments. */
#define EDGES(...)                                                                                 \
    (struct tide_edge[]){__VA_ARGS__}, (uint32_t)(sizeof((struct tide_edge[]){__VA_ARGS__}) / 8)

static uint32_t add_placeholder(struct tide_graph *g, const char *name, enum tide_dtype dtype,
                                int32_t rank, const int64_t *dims)
{
    uint32_t id = add(g, TIDE_OP_PLACEHOLDER, name, NULL, 0);
    struct tide_shape shape = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, dtype);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &shape);
    return id;
}

static uint32_t add_variable(struct tide_graph *g, const char *name, int32_t rank,
                             const int64_t *dims, const char *init)
{
    uint32_t id = add(g, TIDE_OP_VARIABLE, name, NULL, 0);
    struct tide_shape shape = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_VARIABLE_shape, &shape);
    if (init)
        assert_int_equal(tide_attr_set_string(g, id, TIDE_ATTR_VARIABLE_init, init), TIDE_OK);
    return id;
}

/* x[4,8] -> MatMul(w1) -> BiasAdd(b1) -> Relu -> MatMul(w2^T, a Const) -> xent(labels) -> mean. */
static struct tide_graph *build_mlp(void)
{
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    uint32_t x = add_placeholder(g, "x", TIDE_DTYPE_FLOAT32, 2, (int64_t[]){4, 8});
    uint32_t labels = add_placeholder(g, "labels", TIDE_DTYPE_INT32, 1, (int64_t[]){4});
    uint32_t w1 = add_variable(g, "layer1/w", 2, (int64_t[]){8, 16}, "glorot_uniform");
    tide_attr_set_int(g, w1, TIDE_ATTR_VARIABLE_seed, 42);
    tide_attr_set_float(g, w1, TIDE_ATTR_VARIABLE_scale, 0.5);

    /* A Variable initialised from a value tensor. */
    uint32_t b1 = add_variable(g, "layer1/b", 1, (int64_t[]){16}, "value");
    float b1_value[16];
    for (int i = 0; i < 16; i++)
        b1_value[i] = 0.25f * (float)i - 1.0f;
    struct tide_shape b1_shape = tide_shape_make(1, (int64_t[]){16});
    assert_int_equal(tide_attr_set_tensor(g, b1, TIDE_ATTR_VARIABLE_value, TIDE_DTYPE_FLOAT32,
                                          &b1_shape, b1_value, sizeof(b1_value)),
                     TIDE_OK);
    tide_attr_set_bool(g, b1, TIDE_ATTR_VARIABLE_trainable, false);

    uint32_t mm1 = add(g, TIDE_OP_MATMUL, "layer1/matmul", EDGES({x, 0}, {w1, 0}));
    uint32_t h1 = add(g, TIDE_OP_BIAS_ADD, "layer1/bias", EDGES({mm1, 0}, {b1, 0}));
    uint32_t r1 = add(g, TIDE_OP_RELU, "layer1/relu", EDGES({h1, 0}));

    /* A Const [10, 16] used transposed. */
    uint32_t w2 = add(g, TIDE_OP_CONST, "layer2.w", NULL, 0);
    float w2_value[10 * 16];
    for (int i = 0; i < 10 * 16; i++)
        w2_value[i] = 0.01f * (float)i;
    struct tide_shape w2_shape = tide_shape_make(2, (int64_t[]){10, 16});
    assert_int_equal(tide_attr_set_tensor(g, w2, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32,
                                          &w2_shape, w2_value, sizeof(w2_value)),
                     TIDE_OK);
    uint32_t logits = add(g, TIDE_OP_MATMUL, "logits", EDGES({r1, 0}, {w2, 0}));
    tide_attr_set_bool(g, logits, TIDE_ATTR_MATMUL_transpose_b, true);

    uint32_t xent = add(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", EDGES({logits, 0}, {labels, 0}));
    uint32_t loss = add(g, TIDE_OP_REDUCE_MEAN, "loss", EDGES({xent, 0}));
    struct tide_error err;
    /* A control edge: the loss runs after the first layer's Relu. */
    assert_int_equal(tide_graph_add_control(g, loss, r1, &err), TIDE_OK);
    assert_int_equal(tide_graph_add_control(g, loss, labels, &err), TIDE_OK);
    return g;
}

/* img[2,3,8,8] -> Conv2D -> Relu -> MaxPool2D -> Reshape -> MatMul -> xent -> mean. */
static struct tide_graph *build_cnn(void)
{
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    uint32_t img = add_placeholder(g, "img", TIDE_DTYPE_FLOAT32, 4, (int64_t[]){2, 3, 8, 8});
    uint32_t labels = add_placeholder(g, "labels", TIDE_DTYPE_INT32, 1, (int64_t[]){2});
    uint32_t k = add_variable(g, "conv1/k", 4, (int64_t[]){4, 3, 3, 3}, "he_normal");
    uint32_t conv = add(g, TIDE_OP_CONV2D, "conv1", EDGES({img, 0}, {k, 0}));
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_strides, (int64_t[]){1, 1}, 2);
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_pads, (int64_t[]){1, 1}, 2);
    uint32_t relu = add(g, TIDE_OP_RELU, "conv1/relu", EDGES({conv, 0}));
    uint32_t pool = add(g, TIDE_OP_MAX_POOL2D, "pool1", EDGES({relu, 0}));
    tide_attr_set_ints(g, pool, TIDE_ATTR_MAX_POOL2D_ksize, (int64_t[]){2, 2}, 2);
    tide_attr_set_ints(g, pool, TIDE_ATTR_MAX_POOL2D_strides, (int64_t[]){2, 2}, 2);
    uint32_t flat = add(g, TIDE_OP_RESHAPE, "flat", EDGES({pool, 0}));
    tide_attr_set_ints(g, flat, TIDE_ATTR_RESHAPE_shape, (int64_t[]){2, -1}, 2);
    uint32_t fc = add_variable(g, "fc/w", 2, (int64_t[]){64, 10}, NULL);
    uint32_t logits = add(g, TIDE_OP_MATMUL, "fc", EDGES({flat, 0}, {fc, 0}));
    uint32_t xent = add(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", EDGES({logits, 0}, {labels, 0}));
    uint32_t loss = add(g, TIDE_OP_REDUCE_MEAN, "loss", EDGES({xent, 0}));
    tide_attr_set_ints(g, loss, TIDE_ATTR_REDUCE_MEAN_axes, (int64_t[]){0}, 1);
    struct tide_error err;
    assert_int_equal(tide_graph_add_control(g, fc, conv, &err), TIDE_OK);
    return g;
}

static void assert_attr_equal(const struct tide_attr_spec *spec, const struct tide_attr_value *a,
                              const struct tide_attr_value *b)
{
    assert_int_equal(a->present, b->present);
    if (!a->present)
        return;
    switch (spec->type) {
    case TIDE_ATTR_TYPE_INT:
        assert_int_equal(a->i, b->i);
        break;
    case TIDE_ATTR_TYPE_FLOAT:
        /* The wire carries floats: compare at float precision. */
        assert_true((float)a->f == (float)b->f);
        break;
    case TIDE_ATTR_TYPE_BOOL:
        assert_int_equal(a->b, b->b);
        break;
    case TIDE_ATTR_TYPE_STRING:
        assert_string_equal(a->s, b->s);
        break;
    case TIDE_ATTR_TYPE_DTYPE:
        assert_int_equal(a->dtype, b->dtype);
        break;
    case TIDE_ATTR_TYPE_SHAPE:
        assert_true(tide_shape_equal(&a->shape, &b->shape));
        break;
    case TIDE_ATTR_TYPE_TENSOR:
        assert_non_null(a->tensor);
        assert_non_null(b->tensor);
        assert_int_equal(a->tensor->dtype, b->tensor->dtype);
        assert_true(tide_shape_equal(&a->tensor->shape, &b->tensor->shape));
        assert_int_equal(a->tensor->nbytes, b->tensor->nbytes);
        assert_memory_equal(a->tensor->data, b->tensor->data, a->tensor->nbytes);
        break;
    case TIDE_ATTR_TYPE_INTS:
        assert_int_equal(a->ints.n, b->ints.n);
        for (int32_t i = 0; i < a->ints.n; i++)
            assert_int_equal(a->ints.v[i], b->ints.v[i]);
        break;
    case TIDE_ATTR_TYPE_FLOATS:
        assert_int_equal(a->floats.n, b->floats.n);
        for (int32_t i = 0; i < a->floats.n; i++)
            assert_true(a->floats.v[i] == b->floats.v[i]);
        break;
    }
}

/* Node by node: names, ops, edges, controls, attributes, outputs. */
static void assert_graphs_equal(const struct tide_graph *a, const struct tide_graph *b)
{
    assert_int_equal(a->n_nodes, b->n_nodes);
    assert_int_equal(a->version, b->version);
    for (uint32_t id = 0; id < a->n_nodes; id++) {
        const struct tide_node *na = &a->nodes[id], *nb = &b->nodes[id];
        assert_string_equal(na->name, nb->name);
        assert_int_equal(na->op, nb->op);
        assert_string_equal(na->device, nb->device);
        assert_int_equal(na->n_inputs, nb->n_inputs);
        for (uint32_t i = 0; i < na->n_inputs; i++) {
            assert_int_equal(na->inputs[i].node, nb->inputs[i].node);
            assert_int_equal(na->inputs[i].output, nb->inputs[i].output);
        }
        assert_int_equal(na->n_controls, nb->n_controls);
        for (uint32_t i = 0; i < na->n_controls; i++)
            assert_int_equal(na->controls[i], nb->controls[i]);
        const struct tide_op_info *info = tide_op_info(na->op);
        for (uint32_t k = 0; k < info->n_attrs; k++)
            assert_attr_equal(&info->attrs[k], &na->attrs[k], &nb->attrs[k]);
        assert_int_equal(na->n_outputs, nb->n_outputs);
        for (uint32_t k = 0; k < na->n_outputs; k++) {
            assert_int_equal(na->outputs[k].dtype, nb->outputs[k].dtype);
            assert_true(tide_shape_equal(&na->outputs[k].shape, &nb->outputs[k].shape));
            assert_int_equal(na->outputs[k].nbytes, nb->outputs[k].nbytes);
        }
    }
}

/* Infers g, exports, imports, compares; then checks export(import(export(g))) == export(g). */
static void round_trip(struct tide_graph *g)
{
    struct tide_error err;
    enum tide_status st = tide_graph_infer(g, NULL, &err);
    if (st != TIDE_OK)
        fail_msg("infer: %s", err.message);

    void *bytes;
    size_t len;
    assert_int_equal(tide_graph_export(g, &bytes, &len, &err), TIDE_OK);
    assert_true(len > 0);
    struct tide_graph *back = NULL;
    st = tide_graph_import(bytes, len, NULL, &back, &err);
    if (st != TIDE_OK)
        fail_msg("import: %s", err.message);
    assert_graphs_equal(g, back);

    void *bytes2;
    size_t len2;
    assert_int_equal(tide_graph_export(back, &bytes2, &len2, &err), TIDE_OK);
    assert_int_equal(len2, len);
    assert_memory_equal(bytes2, bytes, len);

    free(bytes);
    free(bytes2);
    tide_graph_free(back);
}

/* ============================================================================
 * Round trips
 * ========================================================================== */

static void test_round_trip_mlp(void **state)
{
    (void)state;
    struct tide_graph *g = build_mlp();
    round_trip(g);
    /* The shapes that import inferred are the MLP's. */
    uint32_t logits = tide_graph_find(g, "logits");
    assert_int_not_equal(logits, TIDE_NO_NODE);
    assert_int_equal(g->nodes[logits].outputs[0].shape.rank, 2);
    assert_int_equal(g->nodes[logits].outputs[0].shape.dims[0], 4);
    assert_int_equal(g->nodes[logits].outputs[0].shape.dims[1], 10);
    assert_int_equal(g->nodes[logits].outputs[0].nbytes, 4 * 10 * 4);
    tide_graph_free(g);
}

static void test_round_trip_cnn(void **state)
{
    (void)state;
    struct tide_graph *g = build_cnn();
    round_trip(g);
    uint32_t pool = tide_graph_find(g, "pool1");
    assert_int_equal(g->nodes[pool].outputs[0].shape.rank, 4);
    assert_int_equal(g->nodes[pool].outputs[0].shape.dims[1], 4);
    assert_int_equal(g->nodes[pool].outputs[0].shape.dims[2], 4);
    uint32_t flat = tide_graph_find(g, "flat");
    assert_int_equal(g->nodes[flat].outputs[0].shape.dims[1], 64);
    tide_graph_free(g);
}

/* The wire form that export writes: inputs, controls, attributes only where present. */
static void test_export_wire_form(void **state)
{
    (void)state;
    struct tide_graph *g = build_mlp();
    struct tide_arena *arena = tide_arena_new(0);
    Tide__V1__Graph *m;
    struct tide_error err;
    assert_int_equal(tide_graph_export_message(g, arena, &m, &err), TIDE_OK);
    assert_int_equal(m->n_nodes, g->n_nodes);
    assert_int_equal(m->version, 1);
    const Tide__V1__Node *loss = m->nodes[tide_graph_find(g, "loss")];
    assert_string_equal(loss->op, "ReduceMean");
    assert_int_equal(loss->n_inputs, 3);
    assert_string_equal(loss->inputs[0], "xent");
    assert_string_equal(loss->inputs[1], "^layer1/relu");
    assert_string_equal(loss->inputs[2], "^labels");
    const Tide__V1__Node *logits = m->nodes[tide_graph_find(g, "logits")];
    assert_int_equal(logits->n_attrs, 1);
    assert_string_equal(logits->attrs[0]->key, "transpose_b");
    assert_int_equal(logits->attrs[0]->value->value_case, TIDE__V1__ATTR_VALUE__VALUE_B);
    assert_true(logits->attrs[0]->value->b);
    const Tide__V1__Node *w2 = m->nodes[tide_graph_find(g, "layer2.w")];
    assert_int_equal(w2->n_attrs, 1);
    const Tide__V1__Tensor *t = w2->attrs[0]->value->tensor;
    assert_int_equal(t->dtype, TIDE__V1__DATA_TYPE__DT_FLOAT32);
    assert_int_equal(t->shape->n_dims, 2);
    assert_int_equal(t->data.len, 10 * 16 * 4);
    tide_arena_free(arena);
    tide_graph_free(g);
}

/* "name:k" for an output other than 0, via BatchNorm's second output. */
static void test_round_trip_output_index(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2, 3, 4, 4));
    gplaceholder(m, "gamma", 1, I64S(3));
    gplaceholder(m, "beta", 1, I64S(3));
    gnode(m, "bn", "BatchNorm", IN("x", "gamma", "beta"), NULL);
    gnode(m, "mean", "Identity", IN("bn:1"), NULL);
    gnode(m, "rstd", "Neg", IN("bn:2"), NULL);
    struct tide_graph *g = expect_imported(m);
    uint32_t mean = tide_graph_find(g, "mean");
    assert_int_equal(g->nodes[mean].inputs[0].output, 1);
    assert_int_equal(g->nodes[mean].outputs[0].shape.rank, 1);
    assert_int_equal(g->nodes[mean].outputs[0].shape.dims[0], 3);

    struct tide_arena *arena = tide_arena_new(0);
    Tide__V1__Graph *back;
    struct tide_error err;
    assert_int_equal(tide_graph_export_message(g, arena, &back, &err), TIDE_OK);
    assert_string_equal(back->nodes[mean]->inputs[0], "bn:1");
    assert_string_equal(back->nodes[tide_graph_find(g, "bn")]->inputs[0], "x");
    tide_arena_free(arena);
    tide_graph_free(g);
}

/* A data input may repeat (Mul(x, x)); version 0 means 1; a device hint survives. */
static void test_import_accepts(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2, 3));
    Tide__V1__Node *sq = gnode(m, "sq", "Mul", IN("x", "x:0"), NULL);
    sq->device = tide_arena_strdup(A, "cuda:0");
    gnode(m, "sm", "Softmax", IN("sq"), "axis", av_int(-1), NULL);
    gnode(m, "v", "Variable", NO_IN, "dtype", av_dtype(1), "shape", av_shape(I64S(3)), "init",
          av_string("zeros"), NULL);
    m->version = 0;
    struct tide_graph *g = expect_imported(m);
    assert_string_equal(g->nodes[tide_graph_find(g, "v")].attrs[TIDE_ATTR_VARIABLE_init].s,
                        "zeros");
    /* Infer may normalise the axis (-1 to 1), but the attribute stays present. */
    assert_true(g->nodes[tide_graph_find(g, "sm")].attrs[TIDE_ATTR_SOFTMAX_axis].present);
    assert_int_equal(g->version, 1);
    uint32_t id = tide_graph_find(g, "sq");
    assert_int_equal(g->nodes[id].n_inputs, 2);
    assert_string_equal(g->nodes[id].device, "cuda:0");
    assert_string_equal(g->nodes[tide_graph_find(g, "x")].device, "");
    tide_graph_free(g);

    /* An empty message is an empty graph. */
    struct tide_graph *empty = NULL;
    struct tide_error err;
    assert_int_equal(tide_graph_import("", 0, NULL, &empty, &err), TIDE_OK);
    assert_non_null(empty);
    assert_int_equal(empty->n_nodes, 0);
    tide_graph_free(empty);
}

/* ============================================================================
 * Refused graphs: structure
 * ========================================================================== */

static void test_unknown_op(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "y", "Foo", IN("x"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"y\"", "unknown op \"Foo\"", NULL);
}

static void test_missing_input(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "y", "Add", IN("x"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"y\" (Add)", "1 data input", "wants 2", NULL);
}

static void test_too_many_inputs(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "r", "Relu", IN("x", "x"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"r\" (Relu)", "2 data inputs", "wants 1", NULL);
}

static void test_duplicate_input(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gplaceholder(m, "z", 1, I64S(2));
    gnode(m, "y", "Relu", IN("x", "^z", "^x", "^z"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"y\" (Relu)", "input 3 \"^z\"", "duplicate input",
                   NULL);
}

static void test_dangling_input(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "y", "Add", IN("x", "nope"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"y\" (Add): input 1 \"nope\" does not name a node",
                   NULL);

    m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "y", "Relu", IN("x", "^nope"), NULL);
    expect_refused(m, NULL, TIDE_INVALID,
                   "node \"y\" (Relu): input 1 \"^nope\" does not name a node", NULL);
}

static void test_duplicate_name(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gplaceholder(m, "a", 1, I64S(2));
    gplaceholder(m, "b", 1, I64S(2));
    gnode(m, "x", "Relu", IN("a"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "duplicate node name \"x\" (nodes 0 and 3)", NULL);
}

static void test_invalid_name(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gplaceholder(m, "bad name\n\x01", 1, I64S(2));
    expect_refused(m, NULL, TIDE_INVALID, "node 1: name \"bad name??\"", "invalid", NULL);

    char long_name[400];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    m = gmsg();
    gplaceholder(m, long_name, 1, I64S(2));
    expect_refused(m, NULL, TIDE_INVALID, "node 0: name \"nnnn", "...\" (399 bytes)", NULL);

    m = gmsg();
    gplaceholder(m, "", 1, I64S(2));
    expect_refused(m, NULL, TIDE_INVALID, "node 0: name \"\" (0 bytes)", NULL);
}

static void test_cycle(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "a", "Add", IN("x", "c"), NULL);
    gnode(m, "b", "Relu", IN("a"), NULL);
    gnode(m, "c", "Relu", IN("b"), NULL);
    gnode(m, "out", "Relu", IN("c"), NULL);
    struct tide_graph *out = NULL;
    struct tide_error err;
    assert_int_equal(import_msg(m, NULL, &out, &err), TIDE_INVALID);
    assert_null(out);
    print_message("  -> %s\n", err.message);
    assert_non_null(strstr(err.message, "cycle"));
    assert_true(strstr(err.message, "\"a\"") || strstr(err.message, "\"b\"") ||
                strstr(err.message, "\"c\""));

    /* A self-loop, by data and by control edge. */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "s", "Add", IN("x", "s"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "\"s\"", "cycle", NULL);
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "s", "Relu", IN("x", "^s"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "\"s\"", "cycle", NULL);
}

static void test_bad_input_syntax(void **state)
{
    (void)state;
    const char *bad[] = {"x:", "x:-1",  "x:1a", "x:+1", "x:99999999999",
                         ":0", "x:0:0", "^x:0", "^",    ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("input \"%s\"\n", bad[i]);
        Tide__V1__Graph *m = gmsg();
        gplaceholder(m, "x", 1, I64S(2));
        gnode(m, "y", "Relu", IN(bad[i]), NULL);
        expect_refused(m, NULL, TIDE_INVALID, "node \"y\" (Relu): input 0", NULL);
    }
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gnode(m, "y", "Relu", IN("x:1a"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "input 0 \"x:1a\" is malformed", NULL);
}

static void test_data_after_control(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    gplaceholder(m, "z", 1, I64S(2));
    gnode(m, "y", "Add", IN("x", "^z", "x"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"y\" (Add): input 2 \"x\"",
                   "data input after a control input", NULL);
}

static void test_output_index_out_of_range(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2, 3, 4, 4));
    gplaceholder(m, "gamma", 1, I64S(3));
    gplaceholder(m, "beta", 1, I64S(3));
    gnode(m, "bn", "BatchNorm", IN("x", "gamma", "beta"), NULL);
    gnode(m, "y", "Relu", IN("bn:5"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"y\" (Relu): input 0 \"bn:5\"",
                   "output 5 of \"bn\" (BatchNorm), which has 3 outputs", NULL);
}

static void test_version(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    m->version = 2;
    expect_refused(m, NULL, TIDE_UNSUPPORTED, "version 2", NULL);
}

/* ============================================================================
 * Refused graphs: attributes
 * ========================================================================== */

static void test_missing_attribute(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gnode(m, "x", "Placeholder", NO_IN, "dtype", av_dtype(1), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (Placeholder)",
                   "missing required attribute \"shape\"", NULL);
}

static void test_ill_typed_attribute(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(1, 1, 4, 4));
    gplaceholder(m, "k", 1, I64S(1, 1, 3, 3));
    gnode(m, "conv", "Conv2D", IN("x", "k"), "strides", av_float(1.0f), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"conv\" (Conv2D)",
                   "attribute \"strides\" is float, wants ints", NULL);

    /* An entry without a value. */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(1, 1, 4, 4));
    gnode(m, "r", "Softmax", IN("x"), "axis", av_new(TIDE__V1__ATTR_VALUE__VALUE__NOT_SET), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"r\" (Softmax)", "\"axis\" has no value", NULL);
}

static void test_unknown_attribute(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "a", 1, I64S(2, 2));
    gnode(m, "x", "MatMul", IN("a", "a"), "foo", av_bool(true), NULL);
    expect_refused(m, NULL, TIDE_INVALID,
                   "node \"x\" (MatMul): unknown attribute \"foo\"; MatMul takes transpose_a, "
                   "transpose_b",
                   NULL);
    m = gmsg();
    gplaceholder(m, "a", 1, I64S(2, 2));
    gnode(m, "r", "Relu", IN("a"), "alpha", av_float(0.1f), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"r\" (Relu): unknown attribute \"alpha\"",
                   "no attributes", NULL);
}

static void test_duplicate_attribute(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "a", 1, I64S(2, 2));
    gnode(m, "x", "MatMul", IN("a", "a"), "transpose_a", av_bool(true), "transpose_a",
          av_bool(false), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (MatMul)", "\"transpose_a\" is given twice",
                   NULL);
}

static void test_attribute_limits(void **state)
{
    (void)state;
    /* Lists longer than TIDE_MAX_LIST. */
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(1, 1, 4, 4));
    gnode(m, "r", "Reshape", IN("x"), "shape", av_ints(I64S(1, 1, 1, 1, 1, 1, 1, 1, 16)), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"r\" (Reshape)", "\"shape\" has 9 values",
                   "limit is 8", NULL);

    /* A shape of rank 9. */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(1, 1, 1, 1, 1, 1, 1, 1, 1));
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (Placeholder)", "rank 9", "limit is 8", NULL);

    /* An unknown dtype value. */
    m = gmsg();
    gplaceholder(m, "x", 7, I64S(2));
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (Placeholder)", "invalid dtype 7", NULL);
    m = gmsg();
    gplaceholder(m, "x", 0, I64S(2));
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (Placeholder)", "invalid dtype 0", NULL);

    /* Floats are checked too (AvgPool takes none, so use a list on an INTS slot the wrong way). */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(1, 1, 4, 4));
    gnode(m, "p", "MaxPool2D", IN("x"), "ksize", av_floats(F32S(2.0f, 2.0f)), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"p\" (MaxPool2D)",
                   "attribute \"ksize\" is floats, wants ints", NULL);

    /* A device hint with a control byte. */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    m->nodes[0]->device = tide_arena_strdup(A, "cuda\n0");
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (Placeholder)", "device \"cuda?0\"", NULL);
}

/* ============================================================================
 * Refused graphs: dtypes, shapes, sizes, limits
 * ========================================================================== */

static void test_dtype_mismatch(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "ids", 2, I64S(4, 8));
    gplaceholder(m, "w", 1, I64S(8, 2));
    gnode(m, "mm", "MatMul", IN("ids", "w"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"mm\" (MatMul)", "int32", "float32", NULL);
}

static void test_shape_mismatch(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "a", 1, I64S(4, 8));
    gplaceholder(m, "b", 1, I64S(7, 3));
    gnode(m, "mm", "MatMul", IN("a", "b"), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"mm\" (MatMul)", "[4, 8]", "[7, 3]", NULL);
}

static void test_negative_dim(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(2, -3));
    expect_refused(m, NULL, TIDE_INVALID, "node \"x\" (Placeholder)", "negative dimension -3",
                   NULL);

    m = gmsg();
    gnode(m, "c", "Const", NO_IN, "value", av_tensor(1, I64S(-1, 2), 8), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"c\" (Const) attribute \"value\"",
                   "negative dimension -1", NULL);
}

static void test_size_overflow(void **state)
{
    (void)state;
    /* A Placeholder whose byte size overflows 64 bits: refused by infer. */
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "x", 1, I64S(INT64_C(1) << 40, INT64_C(1) << 40));
    expect_refused(m, NULL, TIDE_LIMIT, "node \"x\" (Placeholder)", NULL);

    /* One that fits int64 elements but not bytes. */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(INT64_C(1) << 61, 2));
    expect_refused(m, NULL, TIDE_LIMIT, "node \"x\" (Placeholder)", NULL);

    /* A Const tensor whose byte size overflows: refused at import, before any allocation. */
    m = gmsg();
    gnode(m, "c", "Const", NO_IN, "value",
          av_tensor(1, I64S(INT64_C(1) << 32, INT64_C(1) << 32, 4), 16), NULL);
    expect_refused(m, NULL, TIDE_LIMIT, "node \"c\" (Const) attribute \"value\"", "overflows",
                   NULL);
}

static void test_tensor_limit(void **state)
{
    (void)state;
    struct tide_graph_limits limits = tide_graph_limits_default();
    limits.max_tensor_bytes = 1024;

    Tide__V1__Graph *m = gmsg();
    gnode(m, "c", "Const", NO_IN, "value", av_tensor(1, I64S(16, 32), 16 * 32 * 4), NULL);
    expect_refused(m, &limits, TIDE_LIMIT, "node \"c\" (Const)", "2048 bytes",
                   "limit of 1024 bytes", NULL);

    /* The same limit applies to inferred outputs. */
    m = gmsg();
    gplaceholder(m, "x", 1, I64S(16, 32));
    expect_refused(m, &limits, TIDE_LIMIT, "node \"x\" (Placeholder)", "2048 bytes", "1024", NULL);

    /* And at the limit, it passes. */
    m = gmsg();
    gnode(m, "c", "Const", NO_IN, "value", av_tensor(1, I64S(16, 16), 16 * 16 * 4), NULL);
    struct tide_graph *g = NULL;
    struct tide_error err;
    assert_int_equal(import_msg(m, &limits, &g, &err), TIDE_OK);
    tide_graph_free(g);
}

static void test_node_limit(void **state)
{
    (void)state;
    struct tide_graph_limits limits = tide_graph_limits_default();
    limits.max_nodes = 3;
    Tide__V1__Graph *m = gmsg();
    gplaceholder(m, "a", 1, I64S(2));
    gplaceholder(m, "b", 1, I64S(2));
    gplaceholder(m, "c", 1, I64S(2));
    struct tide_graph *g = NULL;
    struct tide_error err;
    assert_int_equal(import_msg(m, &limits, &g, &err), TIDE_OK);
    tide_graph_free(g);
    gplaceholder(m, "d", 1, I64S(2));
    expect_refused(m, &limits, TIDE_LIMIT, "4 nodes", "limit of 3", NULL);
}

static void test_const_size_mismatch(void **state)
{
    (void)state;
    Tide__V1__Graph *m = gmsg();
    gnode(m, "w", "Const", NO_IN, "value", av_tensor(1, I64S(2, 3), 20), NULL);
    expect_refused(
        m, NULL, TIDE_INVALID,
        "node \"w\" (Const) attribute \"value\": tensor of shape [2, 3] float32 needs 24 "
        "bytes, got 20",
        NULL);
    m = gmsg();
    gnode(m, "w", "Const", NO_IN, "value", av_tensor(9, I64S(2), 8), NULL);
    expect_refused(m, NULL, TIDE_INVALID, "node \"w\" (Const) attribute \"value\"",
                   "invalid dtype 9", NULL);
}

static void test_tensor_from_proto(void **state)
{
    (void)state;
    Tide__V1__AttrValue *v = av_tensor(2, I64S(3), 12);
    struct tide_const_tensor t;
    struct tide_error err;
    /* Without an arena the result points into the message; with one, it is a copy. */
    assert_int_equal(tide_tensor_from_proto(v->tensor, NULL, &t, "feed \"x\"", &err), TIDE_OK);
    assert_ptr_equal(t.data, v->tensor->data.data);
    assert_int_equal(t.dtype, TIDE_DTYPE_INT32);
    assert_int_equal(t.nbytes, 12);
    struct tide_arena *arena = tide_arena_new(0);
    assert_int_equal(tide_tensor_from_proto(v->tensor, arena, &t, "feed \"x\"", &err), TIDE_OK);
    assert_ptr_not_equal(t.data, v->tensor->data.data);
    assert_memory_equal(t.data, v->tensor->data.data, 12);
    tide_arena_free(arena);

    /* A scalar: no shape message at all. */
    Tide__V1__AttrValue *s = av_tensor(1, NULL, 0, 4);
    s->tensor->shape = NULL;
    assert_int_equal(tide_tensor_from_proto(s->tensor, NULL, &t, "feed \"s\"", &err), TIDE_OK);
    assert_int_equal(t.shape.rank, 0);
    assert_int_equal(t.nbytes, 4);

    v->tensor->data.len = 11;
    assert_int_equal(tide_tensor_from_proto(v->tensor, NULL, &t, "feed \"x\"", &err), TIDE_INVALID);
    assert_string_equal(err.message,
                        "feed \"x\": tensor of shape [3] int32 needs 12 bytes, got 11");
}

/* Messages built in memory (the daemon's JobSpec path) may hold NULLs that the wire cannot. */
static void test_import_message_nulls(void **state)
{
    (void)state;
    struct tide_graph *g = (struct tide_graph *)&g;
    struct tide_error err;
    assert_int_equal(tide_graph_import_message(NULL, NULL, &g, &err), TIDE_INVALID);
    assert_null(g);

    /* A SHAPE attribute without its TensorShape is the empty shape: a scalar. */
    Tide__V1__Graph *m = gmsg();
    gnode(m, "s", "Placeholder", NO_IN, "dtype", av_dtype(1), "shape", av_shape(NULL, 0), NULL);
    m->nodes[0]->attrs[1]->value->shape = NULL;
    assert_int_equal(tide_graph_import_message(m, NULL, &g, &err), TIDE_OK);
    assert_int_equal(g->nodes[0].outputs[0].shape.rank, 0);
    tide_graph_free(g);

    /* A map entry without a value, a TENSOR case without a tensor, a missing node. */
    m = gmsg();
    gnode(m, "s", "Placeholder", NO_IN, "dtype", av_dtype(1), "shape", av_shape(NULL, 0), NULL);
    m->nodes[0]->attrs[0]->value = NULL;
    assert_int_equal(tide_graph_import_message(m, NULL, &g, &err), TIDE_INVALID);
    assert_null(g);
    assert_non_null(
        strstr(err.message, "node \"s\" (Placeholder): attribute \"dtype\" has no value"));

    m = gmsg();
    gnode(m, "c", "Const", NO_IN, "value", av_tensor(1, NULL, 0, 4), NULL);
    m->nodes[0]->attrs[0]->value->tensor = NULL;
    assert_int_equal(tide_graph_import_message(m, NULL, &g, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "node \"c\" (Const) attribute \"value\": no tensor"));

    m = gmsg();
    gplaceholder(m, "x", 1, I64S(2));
    m->nodes[m->n_nodes++] = NULL;
    assert_int_equal(tide_graph_import_message(m, NULL, &g, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "node 1: missing"));
}

/* ============================================================================
 * Malformed bytes
 * ========================================================================== */

static void test_truncated(void **state)
{
    (void)state;
    struct tide_graph *g = build_mlp();
    void *bytes;
    size_t len;
    struct tide_error err;
    assert_int_equal(tide_graph_infer(g, NULL, &err), TIDE_OK);
    assert_int_equal(tide_graph_export(g, &bytes, &len, &err), TIDE_OK);

    /*
     * A prefix that ends between two top-level fields is a well-formed,
     * shorter message (fewer nodes): it may import, or fail validation. Any
     * other prefix cuts a field and must fail to parse.
     */
    struct tide_arena *arena = tide_arena_new(0);
    Tide__V1__Graph *m;
    assert_int_equal(tide_graph_export_message(g, arena, &m, &err), TIDE_OK);
    size_t *boundary = calloc(m->n_nodes + 1, sizeof(*boundary));
    size_t at = 0;
    for (size_t i = 0; i < m->n_nodes; i++) {
        size_t n = tide__v1__node__get_packed_size(m->nodes[i]);
        at += 1 + (n < 128 ? 1 : n < 16384 ? 2 : 3) + n;
        boundary[i] = at;
    }
    assert_int_equal(at + 2, len); /* then the version field */

    size_t n_ok = 0;
    for (size_t cut = 0; cut < len; cut++) {
        /* A fresh allocation of exactly cut bytes, so ASan sees any overread. */
        uint8_t *prefix = malloc(cut ? cut : 1);
        memcpy(prefix, bytes, cut);
        struct tide_graph *out = (struct tide_graph *)&out;
        tide_error_clear(&err);
        enum tide_status st = tide_graph_import(prefix, cut, NULL, &out, &err);
        bool at_boundary = cut == 0;
        for (size_t i = 0; i < m->n_nodes; i++)
            at_boundary |= boundary[i] == cut;
        if (st == TIDE_OK) {
            assert_true(at_boundary);
            assert_non_null(out);
            assert_true(out->n_nodes <= g->n_nodes);
            n_ok++;
            tide_graph_free(out);
        } else {
            assert_null(out);
            assert_int_equal(err.status, st);
            assert_true(err.message[0] != '\0');
            if (!at_boundary) {
                assert_int_equal(st, TIDE_INVALID);
                assert_non_null(strstr(err.message, "malformed or truncated"));
            }
        }
        free(prefix);
    }
    /* The empty prefix at least, and the first few sources, import as smaller graphs. */
    assert_true(n_ok >= 1);

    free(boundary);
    tide_arena_free(arena);
    free(bytes);
    tide_graph_free(g);
}

static void test_garbage(void **state)
{
    (void)state;
    uint64_t seed = 0x9e3779b97f4a7c15u;
    uint8_t buf[512];
    for (int round = 0; round < 20000; round++) {
        size_t len = 0;
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        len = (size_t)(seed >> 33) % sizeof(buf);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            buf[i] = (uint8_t)(seed >> 56);
        }
        /* Half the rounds start like a Graph with one node, so that the parser goes deeper. */
        if (round % 2 && len > 4) {
            buf[0] = 0x0a;
            buf[1] = (uint8_t)((len - 2) & 0x7f);
        }
        struct tide_graph *out = (struct tide_graph *)&out;
        struct tide_error err;
        tide_error_clear(&err);
        enum tide_status st = tide_graph_import(buf, len, NULL, &out, &err);
        if (st == TIDE_OK) {
            assert_non_null(out);
            tide_graph_free(out);
        } else {
            assert_null(out);
            assert_true(err.message[0] != '\0');
        }
    }
    struct tide_graph *out;
    struct tide_error err;
    assert_int_equal(tide_graph_import("\xff\xff\xff", 3, NULL, &out, &err), TIDE_INVALID);
    assert_string_equal(err.message, "malformed or truncated tide.v1.Graph message (3 bytes)");
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_round_trip_mlp),
        T(test_round_trip_cnn),
        T(test_export_wire_form),
        T(test_round_trip_output_index),
        T(test_import_accepts),
        T(test_unknown_op),
        T(test_missing_input),
        T(test_too_many_inputs),
        T(test_duplicate_input),
        T(test_dangling_input),
        T(test_duplicate_name),
        T(test_invalid_name),
        T(test_cycle),
        T(test_bad_input_syntax),
        T(test_data_after_control),
        T(test_output_index_out_of_range),
        T(test_version),
        T(test_missing_attribute),
        T(test_ill_typed_attribute),
        T(test_unknown_attribute),
        T(test_duplicate_attribute),
        T(test_attribute_limits),
        T(test_dtype_mismatch),
        T(test_shape_mismatch),
        T(test_negative_dim),
        T(test_size_overflow),
        T(test_tensor_limit),
        T(test_node_limit),
        T(test_const_size_mismatch),
        T(test_tensor_from_proto),
        T(test_import_message_nulls),
        T(test_truncated),
        T(test_garbage),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
