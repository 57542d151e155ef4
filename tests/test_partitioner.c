/* SPDX-License-Identifier: MIT */
/*
 * test_partitioner.c: depth-first partitions and tensor liveness, and the
 * order's early updates on the training graphs of the models.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/autodiff.h"
#include "graph/import.h"
#include "partitioner/partitioner.h"
#include "tide/models.h"

static uint32_t add(struct tide_graph *g, enum tide_op op, const char *name, uint32_t a, uint32_t b)
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

/* x -> r1 -> r2 -> ... -> r9, and out = Add(r9, r1): r1 has a near and a far use. */
static struct tide_graph *chain_with_skip(void)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t prev = add(g, TIDE_OP_PLACEHOLDER, "x", TIDE_NO_NODE, TIDE_NO_NODE);
    char name[16];
    for (int i = 1; i <= 9; i++) {
        snprintf(name, sizeof(name), "r%d", i);
        prev = add(g, TIDE_OP_RELU, name, prev, TIDE_NO_NODE);
    }
    add(g, TIDE_OP_ADD, "out", prev, tide_graph_find(g, "r1"));
    return g;
}

static void test_partitions(void **state)
{
    (void)state;
    struct tide_graph *g = chain_with_skip();
    struct tide_partitioning p;
    struct tide_error err = {0};
    assert_int_equal(tide_partition(g, 3, &p, &err), TIDE_OK);
    assert_int_equal(p.n_order, 11);
    assert_int_equal(p.n_partitions, 4); /* 3 + 3 + 3 + 2 */
    for (uint32_t i = 0; i < p.n_order; i++) {
        assert_int_equal(p.position[p.order[i]], i);
        assert_int_equal(g->nodes[p.order[i]].partition, (int32_t)(i / 3));
    }
    /* r1 is produced in partition 0 and used by r2 (partition 0) and out (partition 3). */
    uint32_t r1 = tide_graph_find(g, "r1");
    const struct tide_tensor_life *life = &p.tensors[p.tensor_of[r1]];
    assert_int_equal(life->tensor.node, r1);
    assert_int_equal(life->produced, 0);
    assert_int_equal(life->n_uses, 2);
    assert_int_equal(life->uses[0], tide_graph_find(g, "r2"));
    assert_int_equal(life->use_partitions[0], 0);
    assert_int_equal(life->uses[1], tide_graph_find(g, "out"));
    assert_int_equal(life->use_partitions[1], 3);
    /* The sink's output has no use. */
    assert_int_equal(p.tensors[p.tensor_of[tide_graph_find(g, "out")]].n_uses, 0);
    tide_partitioning_release(&p);

    /* Partition size 1: one node per partition; size larger than the graph: one partition. */
    assert_int_equal(tide_partition(g, 1, &p, &err), TIDE_OK);
    assert_int_equal(p.n_partitions, 11);
    assert_int_equal(p.tensors[p.tensor_of[r1]].use_partitions[1], 10);
    tide_partitioning_release(&p);
    assert_int_equal(tide_partition(g, 64, &p, &err), TIDE_OK);
    assert_int_equal(p.n_partitions, 1);
    tide_partitioning_release(&p);
    tide_graph_free(g);
}

/* Two partitionings, field by field. */
static void expect_same(const struct tide_partitioning *a, const struct tide_partitioning *b)
{
    assert_int_equal(a->partition_size, b->partition_size);
    assert_int_equal(a->n_partitions, b->n_partitions);
    assert_int_equal(a->n_order, b->n_order);
    assert_int_equal(a->n_tensors, b->n_tensors);
    assert_memory_equal(a->order, b->order, a->n_order * sizeof(*a->order));
    assert_memory_equal(a->position, b->position, a->n_order * sizeof(*a->position));
    assert_memory_equal(a->tensor_of, b->tensor_of, a->n_order * sizeof(*a->tensor_of));
    for (uint32_t t = 0; t < a->n_tensors; t++) {
        const struct tide_tensor_life *x = &a->tensors[t], *y = &b->tensors[t];
        assert_int_equal(x->tensor.node, y->tensor.node);
        assert_int_equal(x->tensor.output, y->tensor.output);
        assert_int_equal(x->produced, y->produced);
        assert_int_equal(x->n_uses, y->n_uses);
        if (x->n_uses) {
            assert_memory_equal(x->uses, y->uses, x->n_uses * sizeof(*x->uses));
            assert_memory_equal(x->use_partitions, y->use_partitions,
                                x->n_uses * sizeof(*x->use_partitions));
        }
    }
}

/* A partitioning resized is the one made at that size, and leaves node->partition alone. */
static void test_resize(void **state)
{
    (void)state;
    struct tide_graph *g = chain_with_skip();
    struct tide_partitioning base, resized, direct;
    struct tide_error err = {0};
    assert_int_equal(tide_partition(g, 3, &base, &err), TIDE_OK);
    static const uint32_t sizes[] = {1, 2, 3, 4, 7, 11, 64};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        assert_int_equal(tide_partition(g, 3, &direct, &err), TIDE_OK);
        tide_partitioning_release(&direct);
        assert_int_equal(tide_partition_resize(&base, sizes[i], &resized, &err), TIDE_OK);
        for (uint32_t v = 0; v < g->n_nodes; v++)
            assert_int_equal(g->nodes[base.order[v]].partition, (int32_t)(v / 3));
        assert_int_equal(tide_partition(g, sizes[i], &direct, &err), TIDE_OK);
        expect_same(&resized, &direct);
        tide_partitioning_release(&resized);
        tide_partitioning_release(&direct);
    }
    assert_int_equal(tide_partition_resize(&base, 0, &resized, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "partition_size"));
    tide_partitioning_release(&base);
    tide_graph_free(g);
}

static void test_refusals(void **state)
{
    (void)state;
    struct tide_graph *g = chain_with_skip();
    struct tide_partitioning p;
    struct tide_error err = {0};
    assert_int_equal(tide_partition(g, 0, &p, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "partition_size"));
    /* A cycle: r1 reads out. */
    uint32_t r1 = tide_graph_find(g, "r1");
    struct tide_edge in = {tide_graph_find(g, "out"), 0};
    tide_graph_set_inputs(g, r1, &in, 1, NULL);
    assert_int_equal(tide_partition(g, 2, &p, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "is on a cycle"));
    tide_graph_free(g);
    tide_partitioning_release(NULL);
}

static void test_repeated_input_is_one_use(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = add(g, TIDE_OP_PLACEHOLDER, "x", TIDE_NO_NODE, TIDE_NO_NODE);
    add(g, TIDE_OP_MUL, "sq", x, x);
    struct tide_partitioning p;
    assert_int_equal(tide_partition(g, 1, &p, NULL), TIDE_OK);
    assert_int_equal(p.tensors[p.tensor_of[x]].n_uses, 1);
    tide_partitioning_release(&p);
    tide_graph_free(g);
}

/* ============================================================================
 * Early updates
 * ========================================================================== */

enum model { MODEL_CNN, MODEL_RESNET, MODEL_LSTM, MODEL_TRANSFORMER, MODEL_MATMUL };

/* The training graph of a small model of each kind. */
static struct tide_graph *training_graph(enum model model, enum tide_optimizer optimizer)
{
    tide_builder *b = tide_builder_new();
    tide_ref out = {.id = -1};
    struct tide_model_lm_options lo = tide_model_lm_options_default();
    lo.batch = 2, lo.seq_len = 8, lo.vocab = 32, lo.d_model = 16, lo.layers = 2, lo.heads = 2;
    switch (model) {
    case MODEL_CNN:
        out = tide_model_cnn(b, 4, 1, 28, 28, 10);
        break;
    case MODEL_RESNET:
        out = tide_model_resnet(b, 2, 3, 16, 10, 1, 4);
        break;
    case MODEL_LSTM:
        out = tide_model_lstm(b, 2, 12, 28, 8, 2, 10);
        break;
    case MODEL_TRANSFORMER:
        out = tide_model_transformer(b, &lo);
        break;
    case MODEL_MATMUL: { /* test_weights' model: one weight, a loss of its output alone */
        tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, (int64_t[]){1, 8});
        tide_ref w = tide_builder_variable(b, "w", 2, (int64_t[]){8, 8}, "zeros", 1.0f, true);
        tide_ref y = tide_builder_matmul(b, "y", x, w, false, false);
        out = tide_builder_reduce_sum(b, TIDE_MODEL_LOSS, y, NULL, 0, false);
        break;
    }
    }
    uint8_t *bytes;
    size_t len;
    if (out.id < 0 || tide_builder_serialize(b, &bytes, &len) != 0)
        fail_msg("model %d: %s", (int)model, tide_builder_error(b));
    tide_builder_free(b);
    struct tide_graph *g;
    struct tide_error err = {0};
    if (tide_graph_import(bytes, len, NULL, &g, &err) != TIDE_OK)
        fail_msg("import: %s", err.message);
    free(bytes);
    struct tide_train_options t = {
        .loss = TIDE_MODEL_LOSS, .optimizer = optimizer, .learning_rate = 0.01f, .momentum = 0.9f};
    struct tide_autodiff_result r;
    if (tide_autodiff(g, &t, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    tide_autodiff_result_release(&r);
    return g;
}

static bool is_update(const struct tide_graph *g, uint32_t v)
{
    return (tide_op_info(g->nodes[v].op)->flags & TIDE_OP_F_UPDATE) != 0;
}

static bool is_source(const struct tide_graph *g, uint32_t v)
{
    return g->nodes[v].n_inputs + g->nodes[v].n_controls == 0;
}

static uint32_t pred_of(const struct tide_node *node, uint32_t i)
{
    return i < node->n_inputs ? node->inputs[i].node : node->controls[i - node->n_inputs];
}

/*
 * owner[v]: the update that alone needs v (v is that update, or every user
 * of v is owned by it), or TIDE_NO_NODE. Found by repeated sweeps, not in
 * any order the partitioner uses.
 */
static uint32_t *owners(const struct tide_graph *g, const struct tide_graph_users *users)
{
    uint32_t n = g->n_nodes;
    uint32_t *owner = malloc(n * sizeof(*owner));
    for (uint32_t v = 0; v < n; v++)
        owner[v] = is_update(g, v) ? v : TIDE_NO_NODE;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t v = 0; v < n; v++) {
            uint32_t first = users->offsets[v], end = users->offsets[v + 1];
            if (owner[v] != TIDE_NO_NODE || first == end)
                continue;
            uint32_t o = owner[users->users[first]];
            for (uint32_t u = first; u < end && o != TIDE_NO_NODE; u++)
                if (owner[users->users[u]] != o)
                    o = TIDE_NO_NODE;
            if (o != TIDE_NO_NODE) {
                owner[v] = o;
                changed = true;
            }
        }
    }
    return owner;
}

/*
 * How many of x's that should come early do not: x (an update, or an
 * update's gradient that only it reads) must come right after the last of
 * its inputs and control inputs that is not a source, with nothing in
 * between but sources, updates and what only an update reads.
 */
static uint32_t late_after_inputs(const struct tide_graph *g, const uint32_t *position,
                                  const uint32_t *order, const uint32_t *owner, uint32_t x)
{
    const struct tide_node *node = &g->nodes[x];
    uint32_t last = 0;
    bool any = false;
    for (uint32_t i = 0; i < node->n_inputs + node->n_controls; i++) {
        uint32_t p = pred_of(node, i);
        assert_true(position[p] < position[x]);
        if (is_source(g, p))
            continue;
        last = !any || position[p] > last ? position[p] : last;
        any = true;
    }
    if (!any)
        return 0;
    for (uint32_t at = last + 1; at < position[x]; at++) {
        uint32_t v = order[at];
        if (!is_source(g, v) && !is_update(g, v) && owner[v] == TIDE_NO_NODE)
            return 1;
    }
    return 0;
}

/*
 * Counts the updates and update gradients of g that come later than the
 * last of their inputs in order (see above); checks that every update comes
 * after every node that reads its Variable, and that the nodes no update
 * owns keep their relative order in base.
 */
static uint32_t count_late(const struct tide_graph *g, const uint32_t *order, const uint32_t *base,
                           uint32_t *n_checked)
{
    uint32_t n = g->n_nodes;
    struct tide_graph_users users;
    assert_int_equal(tide_graph_users_build(g, &users), TIDE_OK);
    uint32_t *owner = owners(g, &users);
    uint32_t *position = malloc(n * sizeof(*position));
    for (uint32_t i = 0; i < n; i++)
        position[order[i]] = i;
    uint32_t late = 0;
    *n_checked = 0;
    for (uint32_t u = 0; u < n; u++) {
        if (!is_update(g, u))
            continue;
        const struct tide_node *update = &g->nodes[u];
        uint32_t var = update->inputs[0].node;
        assert_int_equal(g->nodes[var].op, TIDE_OP_VARIABLE);
        /* After every reader of the Variable's value in this step. */
        for (uint32_t i = users.offsets[var]; i < users.offsets[var + 1]; i++)
            if (users.users[i] != u)
                assert_true(position[users.users[i]] < position[u]);
        late += late_after_inputs(g, position, order, owner, u);
        uint32_t gradient = update->inputs[update->n_inputs - 1].node;
        if (owner[gradient] == u)
            late += late_after_inputs(g, position, order, owner, gradient);
        (*n_checked)++;
    }
    /* Everything no update owns runs in the plain order. */
    uint32_t j = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (owner[order[i]] != TIDE_NO_NODE)
            continue;
        while (owner[base[j]] != TIDE_NO_NODE)
            j++;
        assert_int_equal(order[i], base[j]);
        j++;
    }
    free(position);
    free(owner);
    tide_graph_users_free(&users);
    return late;
}

/*
 * Each update comes right after its weight gradient and the last reader of
 * its Variable, and the weight gradient right after the output gradient it
 * reads — in the partitioner's order, for every model and optimizer. The
 * order without early updates has them late (so this test can fail).
 */
static void test_early_updates(void **state)
{
    (void)state;
    static const struct {
        enum model model;
        enum tide_optimizer optimizer;
    } cases[] = {
        {MODEL_CNN, TIDE_OPTIMIZER_MOMENTUM},
        {MODEL_RESNET, TIDE_OPTIMIZER_ADAM},
        {MODEL_RESNET, TIDE_OPTIMIZER_SGD},
        {MODEL_LSTM, TIDE_OPTIMIZER_ADAM},
        {MODEL_TRANSFORMER, TIDE_OPTIMIZER_ADAM},
        {MODEL_MATMUL, TIDE_OPTIMIZER_SGD},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct tide_graph *g = training_graph(cases[c].model, cases[c].optimizer);
        uint32_t n = g->n_nodes;
        uint32_t *late = malloc(n * sizeof(*late));
        struct tide_error err = {0};
        assert_int_equal(tide_graph_dfs_order_late_updates(g, late, &err), TIDE_OK);
        struct tide_partitioning p;
        assert_int_equal(tide_partition(g, 4, &p, &err), TIDE_OK);
        uint32_t checked = 0, checked_late = 0;
        uint32_t early_misses = count_late(g, p.order, late, &checked);
        uint32_t late_misses = count_late(g, late, late, &checked_late);
        static const char *const names[] = {"cnn", "resnet", "lstm", "transformer", "matmul"};
        print_message("  %-11s %3u updates: %3u late with early updates, %3u without\n",
                      names[cases[c].model], checked, early_misses, late_misses);
        assert_int_equal(early_misses, 0);
        if (cases[c].model == MODEL_MATMUL) {
            /* One update, whose gradient is ready from sources alone: the order is plain. */
            assert_int_equal(checked, 1);
        } else {
            assert_true(checked > 2);
            assert_true(late_misses > 0);
        }
        tide_partitioning_release(&p);
        free(late);
        tide_graph_free(g);
    }
}

/* A graph without updates keeps the plain depth-first order. */
static void test_no_updates_plain_order(void **state)
{
    (void)state;
    struct tide_graph *g = chain_with_skip();
    uint32_t early[16], late[16];
    assert_int_equal(tide_graph_dfs_order(g, early, NULL), TIDE_OK);
    assert_int_equal(tide_graph_dfs_order_late_updates(g, late, NULL), TIDE_OK);
    assert_memory_equal(early, late, g->n_nodes * sizeof(*early));
    tide_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partitions),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_repeated_input_is_one_use),
        cmocka_unit_test(test_early_updates),
        cmocka_unit_test(test_no_updates_plain_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
