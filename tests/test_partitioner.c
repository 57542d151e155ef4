/* SPDX-License-Identifier: MIT */
/* test_partitioner.c: depth-first partitions and tensor liveness. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "partitioner/partitioner.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partitions),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_repeated_input_is_one_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
