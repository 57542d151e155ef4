/* SPDX-License-Identifier: MIT */
/*
 * test_placement.c: Variables and Consts homed on the host or the device;
 * Fetch before each use group, WriteBack after updates, keys, names,
 * rewiring and control edges, on small hand-built graphs whose depth-first
 * order is worked out in the comments.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "placement/placement.h"

/* ============================================================================
 * Graph helpers
 * ========================================================================== */

static uint32_t node(struct tide_graph *g, enum tide_op op, const char *name, uint32_t a,
                     uint32_t b)
{
    uint32_t id;
    struct tide_error err = {0};
    if (tide_graph_add_node(g, op, name, &id, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    struct tide_edge in[2] = {{a, 0}, {b, 0}};
    uint32_t n = a == TIDE_NO_NODE ? 0 : b == TIDE_NO_NODE ? 1 : 2;
    assert_int_equal(tide_graph_set_inputs(g, id, in, n, NULL), TIDE_OK);
    return id;
}

static uint32_t placeholder(struct tide_graph *g, const char *name, int64_t rows, int64_t cols)
{
    uint32_t id = node(g, TIDE_OP_PLACEHOLDER, name, TIDE_NO_NODE, TIDE_NO_NODE);
    struct tide_shape s = tide_shape_make(2, (int64_t[]){rows, cols});
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &s);
    return id;
}

static uint32_t variable(struct tide_graph *g, const char *name, int64_t rows, int64_t cols)
{
    uint32_t id = node(g, TIDE_OP_VARIABLE, name, TIDE_NO_NODE, TIDE_NO_NODE);
    struct tide_shape s = tide_shape_make(2, (int64_t[]){rows, cols});
    tide_attr_set_dtype(g, id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_VARIABLE_shape, &s);
    return id;
}

static uint32_t sgd(struct tide_graph *g, const char *name, uint32_t var, uint32_t grad)
{
    uint32_t id = node(g, TIDE_OP_APPLY_SGD, name, var, grad);
    tide_attr_set_float(g, id, TIDE_ATTR_APPLY_SGD_learning_rate, 0.1);
    return id;
}

static void infer(struct tide_graph *g)
{
    struct tide_error err = {0};
    if (tide_graph_infer(g, NULL, &err) != TIDE_OK)
        fail_msg("%s", err.message);
}

static bool has_control(const struct tide_graph *g, uint32_t v, uint32_t after)
{
    for (uint32_t i = 0; i < g->nodes[v].n_controls; i++) {
        if (g->nodes[v].controls[i] == after)
            return true;
    }
    return false;
}

static uint32_t find(const struct tide_graph *g, const char *name)
{
    uint32_t id = tide_graph_find(g, name);
    if (id == TIDE_NO_NODE)
        fail_msg("no node \"%s\"", name);
    return id;
}

/*
 * A weight used forward, far away again, and updated, as autodiff makes it:
 *
 *   y = MatMul(x, w); r1..r4 = Relu chain; z = MatMul(r4, w);
 *   g = MatMul(y, z, transpose_a) (the "gradient", [3, 3]);
 *   update = ApplySGD(w, g), after every other reader of w (y, z).
 *
 * The only sink is update; the depth-first order from it is
 *   w 0, x 1, y 2, r1 3, r2 4, r3 5, r4 6, z 7, g 8, update 9,
 * so with partitions of 2, w is used in partitions 1 (y), 3 (z), 4 (update).
 */
static struct tide_graph *weight_graph(void)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 2, 3);
    uint32_t w = variable(g, "w", 3, 3);
    uint32_t y = node(g, TIDE_OP_MATMUL, "y", x, w);
    uint32_t r = node(g, TIDE_OP_RELU, "r1", y, TIDE_NO_NODE);
    r = node(g, TIDE_OP_RELU, "r2", r, TIDE_NO_NODE);
    r = node(g, TIDE_OP_RELU, "r3", r, TIDE_NO_NODE);
    r = node(g, TIDE_OP_RELU, "r4", r, TIDE_NO_NODE);
    uint32_t z = node(g, TIDE_OP_MATMUL, "z", r, w);
    uint32_t grad = node(g, TIDE_OP_MATMUL, "g", y, z);
    tide_attr_set_bool(g, grad, TIDE_ATTR_MATMUL_transpose_a, true);
    uint32_t update = sgd(g, "update", w, grad);
    tide_graph_add_control(g, update, y, NULL);
    tide_graph_add_control(g, update, z, NULL);
    infer(g);
    return g;
}

/* ============================================================================
 * Tests
 * ========================================================================== */

static void test_group_uses(void **state)
{
    (void)state;
    /* Produced in partition 2; used in partitions 2, 3, 7, 8, 20. */
    uint32_t uses[5] = {10, 11, 12, 13, 14};
    uint32_t parts[5] = {2, 3, 7, 8, 20};
    struct tide_tensor_life life = {
        .produced = 2, .n_uses = 5, .uses = uses, .use_partitions = parts};
    struct tide_use_group g[6];

    /* From production, threshold 1: {production, 2, 3}, {7, 8}, {20}. */
    assert_int_equal(tide_place_group_uses(&life, 1, 2, true, g), 3);
    assert_int_equal(g[0].first, 0);
    assert_int_equal(g[0].n_uses, 2);
    assert_int_equal(g[1].first, 2);
    assert_int_equal(g[1].n_uses, 2);
    assert_int_equal(g[1].load_partition, 5); /* 7 - 2 */
    assert_int_equal(g[2].first, 4);
    assert_int_equal(g[2].n_uses, 1);
    assert_int_equal(g[2].load_partition, 18);
    /* A long prefetch never reaches back into the previous group: after 3, after 8. */
    assert_int_equal(tide_place_group_uses(&life, 1, 100, true, g), 3);
    assert_int_equal(g[1].load_partition, 4);
    assert_int_equal(g[2].load_partition, 9);
    /* Never split: one group. */
    assert_int_equal(tide_place_group_uses(&life, UINT32_MAX, 1, true, g), 1);
    assert_int_equal(g[0].n_uses, 5);
    /* Threshold 0: every partition change splits; the first use is near the production. */
    assert_int_equal(tide_place_group_uses(&life, 0, 0, true, g), 5);
    assert_int_equal(g[0].n_uses, 1);
    assert_int_equal(g[1].load_partition, 3);

    /* Without production (a host-homed source), the first use gets a load too. */
    assert_int_equal(tide_place_group_uses(&life, 1, 1, false, g), 3);
    assert_int_equal(g[0].first, 0);
    assert_int_equal(g[0].n_uses, 2);
    assert_int_equal(g[0].load_partition, 1);
    assert_int_equal(tide_place_group_uses(&life, 1, 5, false, g), 3);
    assert_int_equal(g[0].load_partition, 0);

    /* No uses: a production group alone, or nothing. */
    life.n_uses = 0;
    assert_int_equal(tide_place_group_uses(&life, 1, 1, true, g), 1);
    assert_int_equal(g[0].n_uses, 0);
    assert_int_equal(tide_place_group_uses(&life, 1, 1, false, g), 0);
}

static void test_device_changes_nothing(void **state)
{
    (void)state;
    struct tide_graph *g = weight_graph();
    struct tide_partitioning p;
    assert_int_equal(tide_partition(g, 2, &p, NULL), TIDE_OK);
    uint32_t n = g->n_nodes;
    struct tide_place_insertions ins = {0};
    struct tide_place_options o = {.host = false, .threshold = 1, .prefetch = 1};
    struct tide_place_report r;
    assert_int_equal(tide_place(g, &p, &o, &ins, &r, NULL), TIDE_OK);
    assert_int_equal(g->n_nodes, n);
    assert_int_equal(ins.n, 0);
    assert_int_equal(r.fetches + r.write_backs, 0);
    assert_int_equal(r.host_bytes, 0);
    uint32_t w = find(g, "w");
    assert_int_equal(g->nodes[w].outputs[0].home, TIDE_HOME_DEVICE);
    assert_int_equal(g->nodes[find(g, "y")].inputs[1].node, w);
    tide_place_insertions_release(&ins);
    tide_partitioning_release(&p);
    tide_graph_free(g);
}

static void test_host_groups_fetch_and_write_back(void **state)
{
    (void)state;
    struct tide_graph *g = weight_graph();
    struct tide_partitioning p;
    assert_int_equal(tide_partition(g, 2, &p, NULL), TIDE_OK);
    uint32_t w = find(g, "w"), y = find(g, "y"), z = find(g, "z"), update = find(g, "update");
    assert_int_equal(p.position[w], 0);
    assert_int_equal(p.position[update], 9);
    uint32_t n = g->n_nodes;

    /*
     * Threshold 1, prefetch 1: {y (partition 1)} then {z (3), update (4)}:
     * z is 2 partitions after y, update 1 after z. The first Fetch goes to
     * partition 0, the second to partition 2 (3 - 1, after y's partition 1),
     * and the second group's update makes a WriteBack after position 9.
     */
    struct tide_place_insertions ins = {0};
    struct tide_place_options o = {.host = true, .threshold = 1, .prefetch = 1};
    struct tide_place_report r;
    struct tide_error err = {0};
    assert_int_equal(tide_place(g, &p, &o, &ins, &r, &err), TIDE_OK);
    assert_int_equal(g->n_nodes, n + 3);
    assert_int_equal(ins.n, 3);
    uint32_t f0 = find(g, "fetch/w/0"), f1 = find(g, "fetch/w/1"), wb = find(g, "writeback/w");
    assert_int_equal(ins.items[0].node, f0);
    assert_int_equal(ins.items[0].partition, 0);
    assert_true(ins.items[0].key == tide_place_key_before(0));
    assert_int_equal(ins.items[1].node, f1);
    assert_int_equal(ins.items[1].partition, 2);
    assert_true(ins.items[1].key == tide_place_key_before(4));
    assert_int_equal(ins.items[2].node, wb);
    assert_int_equal(ins.items[2].partition, 4);
    assert_true(ins.items[2].key == tide_place_key_after(9));

    /* The Fetches read w and copy its shape; subjects name w. */
    for (uint32_t f = f0; f <= f1; f++) {
        assert_int_equal(g->nodes[f].op, TIDE_OP_FETCH);
        assert_int_equal(g->nodes[f].n_inputs, 1);
        assert_int_equal(g->nodes[f].inputs[0].node, w);
        assert_int_equal(g->nodes[f].subject, w);
        assert_int_equal(g->nodes[f].outputs[0].nbytes, 36);
        assert_int_equal(g->nodes[f].outputs[0].shape.dims[1], 3);
        assert_int_equal(g->nodes[f].n_controls, 0);
    }
    /* Rewired: y reads the first copy, z and the update the second. */
    assert_int_equal(g->nodes[y].inputs[1].node, f0);
    assert_int_equal(g->nodes[z].inputs[1].node, f1);
    assert_int_equal(g->nodes[update].inputs[0].node, f1);
    assert_int_equal(g->nodes[find(g, "x")].n_inputs, 0);
    /* The WriteBack copies the updated copy home after every reader of it. */
    assert_int_equal(g->nodes[wb].op, TIDE_OP_WRITE_BACK);
    assert_int_equal(g->nodes[wb].inputs[0].node, f1);
    assert_int_equal(g->nodes[wb].subject, w);
    assert_true(has_control(g, wb, z));
    assert_true(has_control(g, wb, update));
    assert_int_equal(g->nodes[wb].n_controls, 2);
    /* Homes and the bytes. */
    assert_int_equal(g->nodes[w].outputs[0].home, TIDE_HOME_HOST);
    assert_int_equal(r.fetches, 2);
    assert_int_equal(r.write_backs, 1);
    assert_int_equal(r.fetch_bytes, 72);
    assert_int_equal(r.write_back_bytes, 36);
    assert_int_equal(r.host_bytes, 36);
    tide_place_insertions_release(&ins);
    tide_partitioning_release(&p);
    tide_graph_free(g);

    /* Threshold 4, prefetch 0: one group, one Fetch in partition 1, one WriteBack. */
    g = weight_graph();
    assert_int_equal(tide_partition(g, 2, &p, NULL), TIDE_OK);
    o = (struct tide_place_options){.host = true, .threshold = 4, .prefetch = 0};
    assert_int_equal(tide_place(g, &p, &o, &ins, &r, &err), TIDE_OK);
    assert_int_equal(ins.n, 2);
    f0 = find(g, "fetch/w/0");
    assert_int_equal(ins.items[0].partition, 1);
    assert_true(ins.items[0].key == tide_place_key_before(2));
    assert_int_equal(g->nodes[find(g, "y")].inputs[1].node, f0);
    assert_int_equal(g->nodes[find(g, "z")].inputs[1].node, f0);
    assert_int_equal(g->nodes[find(g, "update")].inputs[0].node, f0);
    assert_int_equal(g->nodes[find(g, "writeback/w")].inputs[0].node, f0);
    assert_int_equal(g->nodes[find(g, "writeback/w")].n_controls, 3);
    assert_int_equal(r.fetch_bytes, 36);
    tide_place_insertions_release(&ins);
    tide_partitioning_release(&p);
    tide_graph_free(g);
}

/*
 * A read after an update in the same step (b runs after update, by a
 * control edge): a = MatMul(x, v); ga = MatMul(x, a, transpose_a);
 * update = ApplySGD(v, ga) after a; r1..r4 = Relu(a) chain; b = MatMul(r4, v)
 * after update. Depth-first from the sink b, the update as soon as its
 * gradient and the read a are done (early updates):
 *   x 0, v 1, a 2, ga 3, update 4, r1 5, r2 6, r3 7, r4 8, b 9.
 */
static void test_fetch_after_write_back(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 2, 3);
    uint32_t v = variable(g, "v", 3, 3);
    uint32_t a = node(g, TIDE_OP_MATMUL, "a", x, v);
    uint32_t ga = node(g, TIDE_OP_MATMUL, "ga", x, a);
    tide_attr_set_bool(g, ga, TIDE_ATTR_MATMUL_transpose_a, true);
    uint32_t update = sgd(g, "update", v, ga);
    tide_graph_add_control(g, update, a, NULL);
    uint32_t r = a;
    const char *names[4] = {"r1", "r2", "r3", "r4"};
    for (int i = 0; i < 4; i++)
        r = node(g, TIDE_OP_RELU, names[i], r, TIDE_NO_NODE);
    uint32_t b = node(g, TIDE_OP_MATMUL, "b", r, v);
    tide_graph_add_control(g, b, update, NULL);
    infer(g);

    struct tide_partitioning p;
    assert_int_equal(tide_partition(g, 1, &p, NULL), TIDE_OK);
    assert_int_equal(p.position[ga], 3);
    assert_int_equal(p.position[update], 4);
    assert_int_equal(p.position[b], 9);
    struct tide_place_insertions ins = {0};
    /* Prefetch 5 would load b's group at 4, the update's partition: it waits until 5. */
    struct tide_place_options o = {.host = true, .threshold = 0, .prefetch = 5};
    struct tide_place_report r_;
    assert_int_equal(tide_place(g, &p, &o, &ins, &r_, NULL), TIDE_OK);
    /* Groups {a}, {update}, {b}: three Fetches, one WriteBack after the update. */
    assert_int_equal(r_.fetches, 3);
    assert_int_equal(r_.write_backs, 1);
    uint32_t f1 = find(g, "fetch/v/1"), f2 = find(g, "fetch/v/2"), wb = find(g, "writeback/v");
    assert_int_equal(g->nodes[update].inputs[0].node, f1);
    assert_int_equal(g->nodes[b].inputs[1].node, f2);
    assert_int_equal(g->nodes[wb].inputs[0].node, f1);
    /* The later Fetch waits for the WriteBack, and is placed after it. */
    assert_true(has_control(g, f2, wb));
    assert_false(has_control(g, f1, wb));
    uint64_t key_wb = 0, key_f2 = 0;
    for (uint32_t i = 0; i < ins.n; i++) {
        if (ins.items[i].node == wb)
            key_wb = ins.items[i].key;
        if (ins.items[i].node == f2)
            key_f2 = ins.items[i].key;
    }
    assert_true(key_wb == tide_place_key_after(4));
    assert_true(key_f2 == tide_place_key_before(5));
    assert_true(key_f2 > key_wb);
    tide_place_insertions_release(&ins);
    tide_partitioning_release(&p);
    tide_graph_free(g);
}

static void test_consts_and_names(void **state)
{
    (void)state;
    /* A Const is homed like a Variable; a read-only group gets no WriteBack. */
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 2, 2);
    uint32_t c = node(g, TIDE_OP_CONST, "c", TIDE_NO_NODE, TIDE_NO_NODE);
    float one[4] = {1, 1, 1, 1};
    struct tide_shape s = tide_shape_make(2, (int64_t[]){2, 2});
    assert_int_equal(
        tide_attr_set_tensor(g, c, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32, &s, one, sizeof(one)),
        TIDE_OK);
    uint32_t sum = node(g, TIDE_OP_ADD, "sum", x, c);
    /* The user already has a node called like our first Fetch. */
    node(g, TIDE_OP_IDENTITY, "fetch/c/0", sum, TIDE_NO_NODE);
    infer(g);
    struct tide_partitioning p;
    assert_int_equal(tide_partition(g, 4, &p, NULL), TIDE_OK);
    struct tide_place_insertions ins = {0};
    struct tide_place_options o = {.host = true, .threshold = 1, .prefetch = 1};
    struct tide_place_report r;
    assert_int_equal(tide_place(g, &p, &o, &ins, &r, NULL), TIDE_OK);
    assert_int_equal(ins.n, 1);
    uint32_t f = find(g, "fetch/c/0-2");
    assert_int_equal(ins.items[0].node, f);
    assert_int_equal(g->nodes[sum].inputs[1].node, f);
    assert_int_equal(g->nodes[c].outputs[0].home, TIDE_HOME_HOST);
    assert_int_equal(r.write_backs, 0);
    assert_int_equal(r.host_bytes, 16);
    infer(g); /* Fetch infers as the identity: the rewritten graph is valid. */
    assert_int_equal(g->nodes[sum].outputs[0].nbytes, 16);
    tide_place_insertions_release(&ins);
    tide_partitioning_release(&p);
    tide_graph_free(g);

    /* A name too long to extend falls back to the subject's id. */
    g = tide_graph_new();
    char name[TIDE_MAX_NAME + 1];
    memset(name, 'v', TIDE_MAX_NAME);
    name[TIDE_MAX_NAME] = '\0';
    uint32_t v = variable(g, name, 2, 2);
    x = placeholder(g, "x", 2, 2);
    node(g, TIDE_OP_ADD, "sum", x, v);
    infer(g);
    assert_int_equal(tide_partition(g, 4, &p, NULL), TIDE_OK);
    assert_int_equal(tide_place(g, &p, &o, &ins, &r, NULL), TIDE_OK);
    assert_int_not_equal(tide_graph_find(g, "fetch/node0/0"), TIDE_NO_NODE);
    tide_place_insertions_release(&ins);
    tide_place_insertions_release(NULL);
    tide_partitioning_release(&p);
    tide_graph_free(g);
}

static void test_input_written(void **state)
{
    (void)state;
    struct tide_graph *g = weight_graph();
    const struct tide_node *update = &g->nodes[find(g, "update")];
    assert_true(tide_place_input_written(update, 0));
    assert_false(tide_place_input_written(update, 1)); /* the gradient */
    assert_false(tide_place_input_written(&g->nodes[find(g, "y")], 0));
    tide_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_uses),
        cmocka_unit_test(test_device_changes_nothing),
        cmocka_unit_test(test_host_groups_fetch_and_write_back),
        cmocka_unit_test(test_fetch_after_write_back),
        cmocka_unit_test(test_consts_and_names),
        cmocka_unit_test(test_input_written),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
