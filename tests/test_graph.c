/* SPDX-License-Identifier: MIT */
/* test_graph.c: the IR (nodes, names, attributes) and its orders and cycle detection. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"

static uint32_t add(struct tide_graph *g, enum tide_op op, const char *name)
{
    uint32_t id;
    struct tide_error err = {0};
    enum tide_status st = tide_graph_add_node(g, op, name, &id, &err);
    if (st != TIDE_OK)
        fail_msg("add %s: %s", name, err.message);
    return id;
}

static void link2(struct tide_graph *g, uint32_t id, uint32_t a, uint32_t b)
{
    struct tide_edge in[2] = {{a, 0}, {b, 0}};
    assert_int_equal(tide_graph_set_inputs(g, id, in, b == TIDE_NO_NODE ? 1 : 2, NULL), TIDE_OK);
}

static void test_names_and_lookup(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    struct tide_error err = {0};
    uint32_t id;
    uint32_t x = add(g, TIDE_OP_PLACEHOLDER, "x");
    assert_int_equal(tide_graph_find(g, "x"), x);
    assert_int_equal(tide_graph_find(g, "y"), TIDE_NO_NODE);
    assert_int_equal(tide_graph_add_node(g, TIDE_OP_RELU, "x", &id, &err), TIDE_EXISTS);
    assert_non_null(strstr(err.message, "duplicate node name \"x\""));
    assert_int_equal(tide_graph_add_node(g, TIDE_OP_RELU, "bad name", &id, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "bad name"));
    assert_int_equal(tide_graph_add_node(g, TIDE_OP_RELU, "", &id, &err), TIDE_INVALID);
    char long_name[TIDE_MAX_NAME + 2];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(tide_graph_add_node(g, TIDE_OP_RELU, long_name, &id, &err), TIDE_INVALID);
    long_name[TIDE_MAX_NAME] = '\0';
    assert_int_equal(tide_graph_add_node(g, TIDE_OP_RELU, long_name, &id, &err), TIDE_OK);
    /* Many nodes: the name index grows and every name is still found. */
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        add(g, TIDE_OP_IDENTITY, name);
    }
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        assert_int_equal(tide_graph_find(g, name), (uint32_t)(i + 2));
    }
    tide_graph_free(g);
    tide_graph_free(NULL);
}

static void test_op_table(void **state)
{
    (void)state;
    enum tide_op op;
    assert_int_equal(tide_op_lookup("Conv2D", &op), TIDE_OK);
    assert_int_equal(op, TIDE_OP_CONV2D);
    assert_int_equal(tide_op_lookup("Conv3D", &op), TIDE_NOT_FOUND);
    assert_string_equal(tide_op_info(TIDE_OP_SOFTMAX_CROSS_ENTROPY)->name, "SoftmaxCrossEntropy");
    assert_int_equal(tide_op_info(TIDE_OP_BATCH_NORM)->n_outputs, 3);
    assert_int_equal(tide_op_info(TIDE_OP_CONCAT)->max_inputs, -1);
    assert_true(tide_op_info(TIDE_OP_RELU)->flags & TIDE_OP_F_CHEAP);
    assert_false(tide_op_info(TIDE_OP_CONV2D)->flags & TIDE_OP_F_CHEAP);
    assert_true(tide_op_info(TIDE_OP_SWAP_IN)->flags & TIDE_OP_F_MEMORY);
    assert_int_equal(tide_op_attr_index(TIDE_OP_MATMUL, "transpose_b"), TIDE_ATTR_MATMUL_transpose_b);
    assert_int_equal(tide_op_attr_index(TIDE_OP_MATMUL, "stride"), -1);
    /* Every op has a distinct name and an infer function. */
    for (int i = 0; i < TIDE_OP_COUNT; i++) {
        assert_non_null(tide_op_info((enum tide_op)i)->infer);
        assert_int_equal(tide_op_lookup(tide_op_info((enum tide_op)i)->name, &op), TIDE_OK);
        assert_int_equal(op, i);
    }
}

static void test_attr_defaults(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t v = add(g, TIDE_OP_VARIABLE, "w");
    const struct tide_node *node = &g->nodes[v];
    assert_false(node->attrs[TIDE_ATTR_VARIABLE_init].present);
    assert_string_equal(node->attrs[TIDE_ATTR_VARIABLE_init].s, "glorot_uniform");
    assert_true(node->attrs[TIDE_ATTR_VARIABLE_trainable].b);
    assert_true(node->attrs[TIDE_ATTR_VARIABLE_scale].f == 1.0);
    uint32_t a = add(g, TIDE_OP_APPLY_ADAM, "adam");
    assert_true(g->nodes[a].attrs[TIDE_ATTR_APPLY_ADAM_beta2].f == 0.999);
    tide_attr_set_float(g, a, TIDE_ATTR_APPLY_ADAM_beta2, 0.99);
    assert_true(g->nodes[a].attrs[TIDE_ATTR_APPLY_ADAM_beta2].present);
    assert_true(g->nodes[a].attrs[TIDE_ATTR_APPLY_ADAM_beta2].f == 0.99);
    int64_t strides[2] = {2, 2};
    uint32_t c = add(g, TIDE_OP_CONV2D, "conv");
    tide_attr_set_ints(g, c, TIDE_ATTR_CONV2D_strides, strides, 2);
    assert_int_equal(g->nodes[c].attrs[TIDE_ATTR_CONV2D_strides].ints.n, 2);
    assert_int_equal(g->nodes[c].attrs[TIDE_ATTR_CONV2D_pads].ints.n, 0);
    float data[6] = {1, 2, 3, 4, 5, 6};
    struct tide_shape shape = tide_shape_make(2, (int64_t[]){2, 3});
    uint32_t k = add(g, TIDE_OP_CONST, "k");
    assert_int_equal(tide_attr_set_tensor(g, k, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32, &shape,
                                          data, sizeof(data)),
                     TIDE_OK);
    const struct tide_const_tensor *t = g->nodes[k].attrs[TIDE_ATTR_CONST_value].tensor;
    assert_memory_equal(t->data, data, sizeof(data));
    assert_int_equal(t->nbytes, 24);
    tide_graph_free(g);
}

static void test_shapes(void **state)
{
    (void)state;
    char buf[64];
    struct tide_shape s = tide_shape_make(3, (int64_t[]){2, 3, 4});
    assert_int_equal(tide_shape_numel(&s), 24);
    assert_string_equal(tide_shape_format(&s, buf, sizeof(buf)), "[2, 3, 4]");
    struct tide_shape scalar = tide_shape_make(0, NULL);
    assert_int_equal(tide_shape_numel(&scalar), 1);
    assert_string_equal(tide_shape_format(&scalar, buf, sizeof(buf)), "[]");
    struct tide_shape huge = tide_shape_make(3, (int64_t[]){1LL << 40, 1LL << 40, 1LL << 40});
    assert_int_equal(tide_shape_numel(&huge), -1);
    struct tide_shape neg = tide_shape_make(2, (int64_t[]){2, -1});
    assert_int_equal(tide_shape_numel(&neg), -1);
    assert_true(tide_shape_equal(&s, &s));
    assert_false(tide_shape_equal(&s, &scalar));
    assert_string_equal(tide_shape_format(&s, buf, 5), "[2, ");
    assert_int_equal(tide_dtype_size(TIDE_DTYPE_INT32), 4);
    assert_int_equal(tide_dtype_size((enum tide_dtype)9), 0);
}

/* x, w -> mm -> relu -> out; b -> add(relu, b); a diamond through relu. */
static struct tide_graph *diamond(void)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t x = add(g, TIDE_OP_PLACEHOLDER, "x");
    uint32_t w = add(g, TIDE_OP_VARIABLE, "w");
    uint32_t b = add(g, TIDE_OP_VARIABLE, "b");
    uint32_t mm = add(g, TIDE_OP_MATMUL, "mm");
    uint32_t relu = add(g, TIDE_OP_RELU, "relu");
    uint32_t sig = add(g, TIDE_OP_SIGMOID, "sig");
    uint32_t sum = add(g, TIDE_OP_ADD, "sum");
    uint32_t out = add(g, TIDE_OP_ADD, "out");
    link2(g, mm, x, w);
    link2(g, relu, mm, TIDE_NO_NODE);
    link2(g, sig, mm, TIDE_NO_NODE);
    link2(g, sum, relu, b);
    link2(g, out, sum, sig);
    return g;
}

static void assert_topological(const struct tide_graph *g, const uint32_t *order)
{
    uint32_t *pos = malloc(g->n_nodes * sizeof(*pos));
    memset(pos, 0xff, g->n_nodes * sizeof(*pos));
    for (uint32_t i = 0; i < g->n_nodes; i++) {
        assert_true(order[i] < g->n_nodes);
        assert_int_equal(pos[order[i]], UINT32_MAX); /* each node once */
        pos[order[i]] = i;
    }
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        const struct tide_node *n = &g->nodes[v];
        for (uint32_t i = 0; i < n->n_inputs; i++)
            assert_true(pos[n->inputs[i].node] < pos[v]);
        for (uint32_t i = 0; i < n->n_controls; i++)
            assert_true(pos[n->controls[i]] < pos[v]);
    }
    free(pos);
}

static void test_orders(void **state)
{
    (void)state;
    struct tide_graph *g = diamond();
    uint32_t order[16];
    struct tide_error err = {0};
    assert_int_equal(tide_graph_add_control(g, tide_graph_find(g, "sig"), tide_graph_find(g, "b"), NULL),
                     TIDE_OK);
    /* A duplicate control edge is ignored. */
    assert_int_equal(tide_graph_add_control(g, tide_graph_find(g, "sig"), tide_graph_find(g, "b"), NULL),
                     TIDE_OK);
    assert_int_equal(g->nodes[tide_graph_find(g, "sig")].n_controls, 1);
    assert_int_equal(tide_graph_topo_order(g, order, &err), TIDE_OK);
    assert_topological(g, order);
    assert_int_equal(tide_graph_dfs_order(g, order, &err), TIDE_OK);
    assert_topological(g, order);
    /* Depth-first: each source comes right before its first consumer. */
    uint32_t expect[] = {0, 1, 3, 4, 2, 6, 5, 7}; /* x w mm relu b sum sig out */
    assert_memory_equal(order, expect, sizeof(expect));
    assert_int_equal(tide_graph_find_cycle(g), TIDE_NO_NODE);
    tide_graph_free(g);
}

static void test_users(void **state)
{
    (void)state;
    struct tide_graph *g = diamond();
    struct tide_graph_users users;
    assert_int_equal(tide_graph_users_build(g, &users), TIDE_OK);
    uint32_t mm = tide_graph_find(g, "mm");
    assert_int_equal(users.offsets[mm + 1] - users.offsets[mm], 2);
    assert_int_equal(users.users[users.offsets[mm]], tide_graph_find(g, "relu"));
    assert_int_equal(users.users[users.offsets[mm] + 1], tide_graph_find(g, "sig"));
    uint32_t out = tide_graph_find(g, "out");
    assert_int_equal(users.offsets[out + 1] - users.offsets[out], 0);
    tide_graph_users_free(&users);
    tide_graph_free(g);
}

static void test_cycles(void **state)
{
    (void)state;
    struct tide_graph *g = diamond();
    struct tide_error err = {0};
    uint32_t order[16];
    /* mm reads out: mm -> relu -> sum -> out -> mm. */
    uint32_t mm = tide_graph_find(g, "mm");
    link2(g, mm, tide_graph_find(g, "x"), tide_graph_find(g, "out"));
    uint32_t on_cycle = tide_graph_find_cycle(g);
    assert_true(on_cycle == mm || on_cycle == tide_graph_find(g, "relu") ||
                on_cycle == tide_graph_find(g, "sum") || on_cycle == tide_graph_find(g, "out") ||
                on_cycle == tide_graph_find(g, "sig"));
    assert_int_equal(tide_graph_topo_order(g, order, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "is on a cycle"));
    assert_int_equal(tide_graph_dfs_order(g, order, &err), TIDE_INVALID);
    tide_graph_free(g);

    /* A self-loop through a control edge. */
    g = tide_graph_new();
    uint32_t a = add(g, TIDE_OP_IDENTITY, "a");
    tide_graph_add_control(g, a, a, NULL);
    assert_int_equal(tide_graph_find_cycle(g), a);
    assert_int_equal(tide_graph_topo_order(g, order, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "node \"a\" (Identity): is on a cycle"));
    tide_graph_free(g);
}

static void test_long_chain(void **state)
{
    (void)state;
    /* 200,000 nodes in a chain: the searches are iterative, so nothing overflows. */
    const uint32_t n = 200000;
    struct tide_graph *g = tide_graph_new();
    char name[32];
    uint32_t prev = add(g, TIDE_OP_PLACEHOLDER, "x");
    for (uint32_t i = 1; i < n; i++) {
        snprintf(name, sizeof(name), "r%u", i);
        uint32_t id = add(g, TIDE_OP_RELU, name);
        link2(g, id, prev, TIDE_NO_NODE);
        prev = id;
    }
    uint32_t *order = malloc(n * sizeof(*order));
    assert_int_equal(tide_graph_dfs_order(g, order, NULL), TIDE_OK);
    for (uint32_t i = 0; i < n; i++)
        assert_int_equal(order[i], i);
    assert_int_equal(tide_graph_find_cycle(g), TIDE_NO_NODE);
    free(order);
    tide_graph_free(g);
}

static void test_clone(void **state)
{
    (void)state;
    struct tide_graph *g = diamond();
    tide_attr_set_string(g, tide_graph_find(g, "w"), TIDE_ATTR_VARIABLE_init, "zeros");
    tide_graph_add_control(g, tide_graph_find(g, "out"), tide_graph_find(g, "x"), NULL);
    struct tide_graph *c = tide_graph_clone(g);
    assert_non_null(c);
    assert_int_equal(c->n_nodes, g->n_nodes);
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        assert_string_equal(c->nodes[v].name, g->nodes[v].name);
        assert_ptr_not_equal(c->nodes[v].name, g->nodes[v].name);
        assert_int_equal(c->nodes[v].op, g->nodes[v].op);
        assert_int_equal(c->nodes[v].n_inputs, g->nodes[v].n_inputs);
        assert_int_equal(c->nodes[v].n_controls, g->nodes[v].n_controls);
        assert_int_equal(tide_graph_find(c, g->nodes[v].name), v);
    }
    assert_string_equal(c->nodes[tide_graph_find(c, "w")].attrs[TIDE_ATTR_VARIABLE_init].s, "zeros");
    /* The clone grows on its own: adding a node leaves the source alone. */
    uint32_t id;
    assert_int_equal(tide_graph_add_node(c, TIDE_OP_RELU, "extra", &id, NULL), TIDE_OK);
    assert_int_equal(tide_graph_find(g, "extra"), TIDE_NO_NODE);
    assert_int_equal(tide_graph_find(c, "extra"), id);
    tide_graph_free(g);
    assert_string_equal(c->nodes[0].name, "x"); /* no sharing of names */
    tide_graph_free(c);
}

/* One parser for every "node:k": valid forms, then each way to be malformed. */
static void test_parse_ref(void **state)
{
    (void)state;
    char name[TIDE_MAX_NAME + 1];
    uint32_t k = 99;
    struct tide_error err = {0};
    assert_int_equal(tide_graph_parse_ref("conv1/w", name, &k, &err), TIDE_OK);
    assert_string_equal(name, "conv1/w");
    assert_int_equal(k, 0);
    assert_int_equal(tide_graph_parse_ref("bn:2", name, &k, &err), TIDE_OK);
    assert_string_equal(name, "bn");
    assert_int_equal(k, 2);
    assert_int_equal(tide_graph_parse_ref("x:007", name, &k, &err), TIDE_OK);
    assert_int_equal(k, 7);
    assert_int_equal(tide_graph_parse_ref("x:4294967295", name, &k, &err), TIDE_OK);
    assert_int_equal(k, UINT32_MAX);

    /* Missing index. */
    assert_int_equal(tide_graph_parse_ref("x:", name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message, "\"x:\" has no output index after ':'");
    /* Non-numeric, signed, spaced, or a second ':' (names cannot hold one). */
    assert_int_equal(tide_graph_parse_ref("x:1a", name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message,
                        "\"x:1a\": the output index \"1a\" is not a number (want decimal digits)");
    assert_int_equal(tide_graph_parse_ref("x:-1", name, &k, &err), TIDE_INVALID);
    assert_int_equal(tide_graph_parse_ref("x:+1", name, &k, &err), TIDE_INVALID);
    assert_int_equal(tide_graph_parse_ref("x: 1", name, &k, &err), TIDE_INVALID);
    assert_int_equal(tide_graph_parse_ref("a:b:1", name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message,
                        "\"a:b:1\": the output index \"b:1\" is not a number (want decimal "
                        "digits)");
    /* Overflow past UINT32_MAX, however many digits. */
    assert_int_equal(tide_graph_parse_ref("x:4294967296", name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message, "\"x:4294967296\": the output index \"4294967296\" is over "
                                     "4294967295");
    assert_int_equal(tide_graph_parse_ref("x:99999999999999999999999", name, &k, &err),
                     TIDE_INVALID);
    /* Empty name, with or without an index; a name over TIDE_MAX_NAME bytes; NULL. */
    assert_int_equal(tide_graph_parse_ref("", name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message, "\"\" has an empty node name");
    assert_int_equal(tide_graph_parse_ref(":1", name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message, "\":1\" has an empty node name");
    char long_ref[TIDE_MAX_NAME + 8];
    memset(long_ref, 'a', TIDE_MAX_NAME + 1);
    strcpy(long_ref + TIDE_MAX_NAME + 1, ":1");
    assert_int_equal(tide_graph_parse_ref(long_ref, name, &k, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "has a node name of 257 bytes, the limit is 256"));
    long_ref[TIDE_MAX_NAME] = '\0'; /* exactly the limit is fine */
    assert_int_equal(tide_graph_parse_ref(long_ref, name, &k, &err), TIDE_OK);
    assert_int_equal(strlen(name), TIDE_MAX_NAME);
    assert_int_equal(tide_graph_parse_ref(NULL, name, &k, &err), TIDE_INVALID);
    assert_string_equal(err.message, "the reference is NULL");
    /* A NULL error is allowed: callers that word their own message pass it. */
    assert_int_equal(tide_graph_parse_ref("x:y", name, &k, NULL), TIDE_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_lookup), cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_attr_defaults),    cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_orders),           cmocka_unit_test(test_users),
        cmocka_unit_test(test_cycles),           cmocka_unit_test(test_long_chain), cmocka_unit_test(test_clone),
        cmocka_unit_test(test_parse_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
