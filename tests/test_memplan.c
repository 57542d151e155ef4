/* SPDX-License-Identifier: MIT */
/*
 * test_memplan.c: the static memory planner on hand-built and random graphs.
 *
 * The graphs here are built with the IR API and their outputs' sizes set
 * directly (memplan reads only nbytes, home and stream), so these tests need
 * neither shape inference nor a backend. The random tests check the plan's
 * invariants on every pair of regions: time-overlapping regions never share
 * an address, persistent regions are never shared, the peak is the largest
 * offset + size, every cross-stream address reuse is ordered by an edge.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "memplan/memplan.h"

/* ============================================================================
 * Helpers
 * ========================================================================== */

/* Adds a node with the given data inputs (output 0 of each) and output sizes. */
static uint32_t add(struct tide_graph *g, enum tide_op op, const char *name, uint64_t nbytes,
                    uint32_t n_inputs, const uint32_t *inputs)
{
    uint32_t id;
    struct tide_error err = {0};
    assert_int_equal(tide_graph_add_node(g, op, name, &id, &err), TIDE_OK);
    struct tide_edge edges[16];
    assert_true(n_inputs <= 16);
    for (uint32_t i = 0; i < n_inputs; i++)
        edges[i] = (struct tide_edge){inputs[i], 0};
    assert_int_equal(tide_graph_set_inputs(g, id, edges, n_inputs, &err), TIDE_OK);
    for (uint32_t k = 0; k < g->nodes[id].n_outputs; k++) {
        g->nodes[id].outputs[k].dtype = TIDE_DTYPE_FLOAT32;
        g->nodes[id].outputs[k].nbytes = nbytes;
        g->nodes[id].outputs[k].home = TIDE_HOME_DEVICE;
    }
    return id;
}

static void plan_in_id_order(struct tide_graph *g, const struct tide_memplan_options *opt,
                             struct tide_memplan *plan)
{
    uint32_t order[256];
    struct tide_error err = {0};
    assert_true(g->n_nodes <= 256);
    for (uint32_t i = 0; i < g->n_nodes; i++)
        order[i] = i;
    enum tide_status st = tide_memplan_build(g, order, g->n_nodes, opt, plan, &err);
    if (st != TIDE_OK)
        fail_msg("memplan: %s", err.message);
}

static const struct tide_memplan_region *region_of(const struct tide_memplan *plan, uint32_t node,
                                                   uint32_t output)
{
    for (uint32_t r = 0; r < plan->n_regions; r++) {
        if (plan->regions[r].node == node && plan->regions[r].output == output)
            return &plan->regions[r];
    }
    return NULL;
}

static bool has_control(const struct tide_graph *g, uint32_t node, uint32_t after)
{
    for (uint32_t c = 0; c < g->nodes[node].n_controls; c++) {
        if (g->nodes[node].controls[c] == after)
            return true;
    }
    return false;
}

/*
 * Whether node runs after reader finished: it has a control input from
 * reader, or from a node that runs on reader's stream no earlier (streams
 * run in order).
 */
static bool ordered_after(const struct tide_graph *g, const struct tide_memplan *plan,
                          uint32_t node, uint32_t reader)
{
    for (uint32_t c = 0; c < g->nodes[node].n_controls; c++) {
        uint32_t u = g->nodes[node].controls[c];
        if (g->nodes[u].stream == g->nodes[reader].stream &&
            plan->position[u] >= plan->position[reader])
            return true;
    }
    return false;
}

/* ============================================================================
 * Small graphs with exact expectations
 * ========================================================================== */

/* a -> b -> c -> d, 1 KiB each: two tensors are ever alive at once. */
static void test_chain_exact_peak(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t a = add(g, TIDE_OP_PLACEHOLDER, "a", 1024, 0, NULL);
    uint32_t b = add(g, TIDE_OP_SOFTMAX, "b", 1024, 1, &a);
    uint32_t c = add(g, TIDE_OP_SOFTMAX, "c", 1024, 1, &b);
    add(g, TIDE_OP_SOFTMAX, "d", 1024, 1, &c);
    struct tide_memplan plan;
    plan_in_id_order(g, &(struct tide_memplan_options){.alignment = 256}, &plan);
    assert_int_equal(plan.n_regions, 4);
    assert_int_equal(plan.peak_bytes, 2048);
    assert_int_equal(plan.persistent_bytes, 0);
    assert_int_equal(plan.reuse_edges, 0);
    /* Lifetimes: producer to last reader; d has no reader. */
    assert_int_equal(region_of(&plan, a, 0)->first, 0);
    assert_int_equal(region_of(&plan, a, 0)->last, 1);
    assert_int_equal(region_of(&plan, 3, 0)->first, 3);
    assert_int_equal(region_of(&plan, 3, 0)->last, 3);
    /* The offsets are written into the graph. */
    for (uint32_t v = 0; v < 4; v++)
        assert_int_equal(g->nodes[v].outputs[0].offset, region_of(&plan, v, 0)->offset);
    /* Death lists: each region once, at its last reader's position. */
    assert_int_equal(plan.death_offsets[plan.n_order], 4);
    for (uint32_t p = 0; p < plan.n_order; p++) {
        for (uint32_t i = plan.death_offsets[p]; i < plan.death_offsets[p + 1]; i++)
            assert_int_equal(plan.regions[plan.deaths[i]].last, p);
    }
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/* Sizes are rounded to the alignment, and 0 selects 256. */
static void test_alignment(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t a = add(g, TIDE_OP_PLACEHOLDER, "a", 4, 0, NULL);
    uint32_t b = add(g, TIDE_OP_SOFTMAX, "b", 300, 1, &a);
    add(g, TIDE_OP_SOFTMAX, "c", 4, 1, &b);
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    assert_int_equal(region_of(&plan, a, 0)->bytes, 256);
    assert_int_equal(region_of(&plan, b, 0)->bytes, 512);
    assert_int_equal(plan.peak_bytes, 768);
    for (uint32_t r = 0; r < plan.n_regions; r++)
        assert_int_equal(plan.regions[r].offset % 256, 0);
    tide_memplan_release(&plan);

    plan_in_id_order(g, &(struct tide_memplan_options){.alignment = 64}, &plan);
    assert_int_equal(region_of(&plan, b, 0)->bytes, 320);
    assert_int_equal(plan.peak_bytes, 384);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

static uint64_t workspace_of_b(void *ctx, const struct tide_graph *graph,
                               const struct tide_node *node)
{
    (void)graph;
    (void)ctx;
    return strcmp(node->name, "b") == 0 ? 4000 : 0;
}

/* A workspace lives at its node's position only, and counts in the peak. */
static void test_workspace_counted(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t a = add(g, TIDE_OP_PLACEHOLDER, "a", 1024, 0, NULL);
    uint32_t b = add(g, TIDE_OP_SOFTMAX, "b", 1024, 1, &a);
    uint32_t c = add(g, TIDE_OP_SOFTMAX, "c", 1024, 1, &b);
    struct tide_memplan plan;
    struct tide_memplan_options opt = {.alignment = 256, .workspace_bytes = workspace_of_b};
    plan_in_id_order(g, &opt, &plan);
    /* At b's position: a, b's output and b's 4000 -> 4096-byte workspace. */
    assert_int_equal(plan.peak_bytes, 1024 + 1024 + 4096);
    const struct tide_memplan_region *ws = region_of(&plan, b, UINT32_MAX);
    assert_non_null(ws);
    assert_int_equal(ws->first, 1);
    assert_int_equal(ws->last, 1);
    assert_int_equal(ws->bytes, 4096);
    assert_int_equal(plan.workspace_offset[b], ws->offset);
    assert_int_equal(plan.workspace_bytes[b], 4000);
    assert_int_equal(plan.workspace_offset[a], TIDE_NO_OFFSET);
    assert_int_equal(plan.workspace_offset[c], TIDE_NO_OFFSET);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/* Variables, Consts and pinned nodes live across the order at the bottom of the arena. */
static void test_persistent_first_never_reused(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = add(g, TIDE_OP_PLACEHOLDER, "x", 4096, 0, NULL);
    uint32_t w = add(g, TIDE_OP_VARIABLE, "w", 512, 0, NULL);
    uint32_t in[2] = {x, w};
    uint32_t y = add(g, TIDE_OP_MATMUL, "y", 4096, 2, in);
    uint32_t k = add(g, TIDE_OP_CONST, "k", 256, 0, NULL);
    uint32_t in2[2] = {y, k};
    uint32_t z = add(g, TIDE_OP_ADD, "z", 4096, 2, in2);
    uint32_t r = add(g, TIDE_OP_SOFTMAX, "r", 4096, 1, &z);
    uint8_t pinned[8] = {0};
    pinned[r] = 1;
    struct tide_memplan plan;
    plan_in_id_order(g, &(struct tide_memplan_options){.pinned = pinned}, &plan);
    assert_int_equal(plan.persistent_bytes, 512 + 256 + 4096);
    /* Persistent in order of position, from 0. */
    assert_int_equal(region_of(&plan, w, 0)->offset, 0);
    assert_int_equal(region_of(&plan, k, 0)->offset, 512);
    assert_int_equal(region_of(&plan, r, 0)->offset, 768);
    for (uint32_t i = 0; i < plan.n_regions; i++) {
        const struct tide_memplan_region *reg = &plan.regions[i];
        if (reg->persistent) {
            assert_int_equal(reg->first, 0);
            assert_int_equal(reg->last, plan.n_order - 1);
            assert_true(reg->offset + reg->bytes <= plan.persistent_bytes);
        } else {
            assert_true(reg->offset >= plan.persistent_bytes);
        }
    }
    assert_true(region_of(&plan, x, 0)->persistent == 0);
    /* x [0,2] and y [2,4] overlap at y; z [4,5] reuses x's slot: 2 x 4 KiB above. */
    assert_int_equal(plan.peak_bytes, plan.persistent_bytes + 2 * 4096);
    /* Persistent regions are not in the death lists. */
    assert_int_equal(plan.death_offsets[plan.n_order], 3);
    (void)y;
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/* An output homed in host memory has no region; a node without outputs has none. */
static void test_host_outputs_and_sinks(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t w = add(g, TIDE_OP_VARIABLE, "w", 1024, 0, NULL);
    g->nodes[w].outputs[0].home = TIDE_HOME_HOST;
    g->nodes[w].outputs[0].offset = 12345;
    uint32_t gr = add(g, TIDE_OP_PLACEHOLDER, "g", 1024, 0, NULL);
    uint32_t in[2] = {w, gr};
    add(g, TIDE_OP_APPLY_SGD, "apply", 0, 2, in);
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    assert_int_equal(plan.n_regions, 1);
    assert_int_equal(plan.regions[0].node, gr);
    assert_int_equal(plan.regions[0].last, 2); /* the update reads it */
    assert_int_equal(g->nodes[w].outputs[0].offset, 12345);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/*
 * The host arena, in order of position: w's home (1000 bytes, 1024 aligned),
 * x's staging buffer, the SwapOut's slot, e's staging buffer (0 bytes: one
 * alignment unit), then the scratch buffer for the largest device-homed
 * Variable or Const (v2, 300 bytes). The device-homed ones have no host home.
 */
static void test_host_arena(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t w = add(g, TIDE_OP_VARIABLE, "w", 1000, 0, NULL);
    g->nodes[w].outputs[0].home = TIDE_HOME_HOST;
    add(g, TIDE_OP_CONST, "c", 100, 0, NULL);
    add(g, TIDE_OP_VARIABLE, "v2", 300, 0, NULL);
    uint32_t x = add(g, TIDE_OP_PLACEHOLDER, "x", 10, 0, NULL);
    g->nodes[x].stream = TIDE_STREAM_H2D;
    uint32_t r = add(g, TIDE_OP_SOFTMAX, "r", 10, 1, &x);
    uint32_t so = add(g, TIDE_OP_SWAP_OUT, "so", 10, 1, &r);
    g->nodes[so].stream = TIDE_STREAM_D2H;
    g->nodes[so].outputs[0].home = TIDE_HOME_HOST;
    uint32_t e = add(g, TIDE_OP_PLACEHOLDER, "e", 0, 0, NULL);
    g->nodes[e].stream = TIDE_STREAM_H2D;
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    static const struct tide_memplan_host_buffer want[5] = {
        {0, 0, 0, 1024},
        {3, TIDE_MEMPLAN_STAGING, 1024, 64},
        {5, 0, 1088, 64},
        {6, TIDE_MEMPLAN_STAGING, 1152, 64},
        {TIDE_MEMPLAN_SCRATCH, 0, 1216, 320},
    };
    assert_int_equal(plan.n_host_buffers, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(plan.host_buffers[i].node, want[i].node);
        assert_int_equal(plan.host_buffers[i].output, want[i].output);
        assert_int_equal(plan.host_buffers[i].offset, want[i].offset);
        assert_int_equal(plan.host_buffers[i].bytes, want[i].bytes);
    }
    assert_int_equal(plan.host_bytes, 1536);
    assert_int_equal(plan.host_home_bytes, 1010);
    /* The device arena is untouched by the host plan: c, v2 persistent, r, x. */
    assert_int_equal(plan.persistent_bytes, 256 + 512);
    tide_memplan_release(&plan);

    /* No host-homed output, no Placeholder, no initial value to copy: no host arena. */
    tide_graph_free(g);
    g = tide_graph_new();
    uint32_t a = add(g, TIDE_OP_CONST, "a", 0, 0, NULL);
    add(g, TIDE_OP_SOFTMAX, "b", 64, 1, &a);
    plan_in_id_order(g, NULL, &plan);
    assert_int_equal(plan.n_host_buffers, 0);
    assert_int_equal(plan.host_bytes, 0);
    assert_int_equal(plan.host_home_bytes, 0);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/*
 * p1 (h2d) -> r1 -> r2 <- p2 (h2d): p2 takes p1's slot after p1's last reader
 * r1, which runs on the compute stream: one reuse edge r1 -> p2. With every
 * node on one stream, no edge.
 */
static void test_reuse_edges_across_streams_only(void **state)
{
    (void)state;
    for (int cross = 0; cross < 2; cross++) {
        struct tide_graph *g = tide_graph_new();
        uint32_t p1 = add(g, TIDE_OP_PLACEHOLDER, "p1", 1024, 0, NULL);
        uint32_t r1 = add(g, TIDE_OP_SOFTMAX, "r1", 1024, 1, &p1);
        uint32_t p2 = add(g, TIDE_OP_PLACEHOLDER, "p2", 1024, 0, NULL);
        uint32_t in[2] = {r1, p2};
        uint32_t r2 = add(g, TIDE_OP_ADD, "r2", 1024, 2, in);
        if (cross) {
            g->nodes[p1].stream = TIDE_STREAM_H2D;
            g->nodes[p2].stream = TIDE_STREAM_H2D;
        }
        struct tide_memplan plan;
        plan_in_id_order(g, NULL, &plan);
        assert_int_equal(region_of(&plan, p1, 0)->offset, 0);
        assert_int_equal(region_of(&plan, r1, 0)->offset, 1024);
        assert_int_equal(region_of(&plan, p2, 0)->offset, 0);
        assert_int_equal(region_of(&plan, r2, 0)->offset, 2048);
        assert_int_equal(plan.peak_bytes, 3072);
        assert_int_equal(plan.reuse_edges, cross ? 1 : 0);
        assert_int_equal(has_control(g, p2, r1), cross != 0);
        assert_int_equal(
            g->nodes[p1].n_controls + g->nodes[r1].n_controls + g->nodes[r2].n_controls, 0);
        tide_memplan_release(&plan);
        tide_graph_free(g);
    }
}

/*
 * t is read by a SwapOut on d2h and, later, by a kernel on compute; y, on
 * compute, takes t's addresses after that kernel. The compute stream orders
 * y after the kernel, but the SwapOut may still be copying t out: y needs a
 * reuse edge from it, although it is not t's last reader by position.
 */
static void test_reuse_waits_for_every_stream(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t src = add(g, TIDE_OP_PLACEHOLDER, "src", 1024, 0, NULL);
    uint32_t t = add(g, TIDE_OP_SOFTMAX, "t", 1024, 1, &src);
    uint32_t so = add(g, TIDE_OP_SWAP_OUT, "so", 1024, 1, &t);
    g->nodes[so].stream = TIDE_STREAM_D2H;
    g->nodes[so].outputs[0].home = TIDE_HOME_HOST;
    uint32_t c = add(g, TIDE_OP_SOFTMAX, "c", 1024, 1, &t);
    uint32_t y = add(g, TIDE_OP_SOFTMAX, "y", 1024, 1, &c);
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    assert_int_equal(region_of(&plan, t, 0)->last, 3);
    assert_int_equal(region_of(&plan, y, 0)->offset, region_of(&plan, t, 0)->offset);
    assert_null(region_of(&plan, so, 0));
    assert_int_equal(plan.reuse_edges, 1);
    assert_true(has_control(g, y, so));
    assert_false(has_control(g, y, c));
    tide_memplan_release(&plan);

    /* With y on h2d, it waits for both: the kernel on compute and the SwapOut on d2h. */
    tide_graph_free(g);
    g = tide_graph_new();
    src = add(g, TIDE_OP_PLACEHOLDER, "src", 1024, 0, NULL);
    t = add(g, TIDE_OP_SOFTMAX, "t", 1024, 1, &src);
    so = add(g, TIDE_OP_SWAP_OUT, "so", 1024, 1, &t);
    g->nodes[so].stream = TIDE_STREAM_D2H;
    g->nodes[so].outputs[0].home = TIDE_HOME_HOST;
    c = add(g, TIDE_OP_SOFTMAX, "c", 1024, 1, &t);
    uint32_t in[1] = {c};
    uint32_t p2 = add(g, TIDE_OP_PLACEHOLDER, "p2", 1024, 0, NULL);
    g->nodes[p2].stream = TIDE_STREAM_H2D;
    uint32_t in2[2] = {in[0], p2};
    add(g, TIDE_OP_ADD, "sum", 1024, 2, in2);
    plan_in_id_order(g, NULL, &plan);
    assert_int_equal(region_of(&plan, p2, 0)->offset, region_of(&plan, t, 0)->offset);
    assert_true(has_control(g, p2, so));
    assert_true(has_control(g, p2, c));
    assert_int_equal(plan.reuse_edges, 2);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/* ============================================================================
 * In place
 * ========================================================================== */

/*
 * p -> e = Exp(p) -> g = GeluGrad(e, x) -> s = Softmax(g): Exp is p's last
 * reader and GeluGrad e's, so e takes p's memory and g takes e's; x, still
 * read by the Softmax after (a second input), is never written over.
 */
static void test_inplace_shares_offset(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t p = add(g, TIDE_OP_PLACEHOLDER, "p", 1024, 0, NULL);
    uint32_t x = add(g, TIDE_OP_PLACEHOLDER, "x", 1024, 0, NULL);
    uint32_t e = add(g, TIDE_OP_EXP, "e", 1024, 1, &p);
    uint32_t in[2] = {e, x};
    uint32_t gg = add(g, TIDE_OP_GELU_GRAD, "g", 1024, 2, in);
    uint32_t in2[2] = {gg, x};
    uint32_t s = add(g, TIDE_OP_ADD, "s", 1024, 2, in2);
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    const struct tide_memplan_region *rp = region_of(&plan, p, 0), *rx = region_of(&plan, x, 0),
                                     *re = region_of(&plan, e, 0), *rg = region_of(&plan, gg, 0),
                                     *rs = region_of(&plan, s, 0);
    assert_int_equal(rp->inplace_of, TIDE_MEMPLAN_NO_REGION);
    assert_int_equal(rx->inplace_of, TIDE_MEMPLAN_NO_REGION);
    assert_ptr_equal(&plan.regions[re->inplace_of], rp);
    assert_ptr_equal(&plan.regions[rg->inplace_of], re);
    /* Add is not an in-place op: its output has memory of its own. */
    assert_int_equal(rs->inplace_of, TIDE_MEMPLAN_NO_REGION);
    assert_int_equal(re->offset, rp->offset);
    assert_int_equal(rg->offset, rp->offset);
    assert_int_not_equal(rx->offset, rp->offset);
    assert_int_not_equal(rs->offset, rx->offset);
    assert_int_not_equal(rs->offset, rg->offset);
    /* p, e and g are one tensor's worth; x and s the other two: 3 KiB, not 5. */
    assert_int_equal(plan.peak_bytes, 3072);
    /* Lifetimes and deaths stay each region's own. */
    assert_int_equal(re->first, 2);
    assert_int_equal(rp->last, 2);
    assert_int_equal(rg->first, 3);
    assert_int_equal(re->last, 3);
    assert_int_equal(rg->last, 4);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/*
 * A still-live input is never written over: Exp's input is read again
 * after it, Relu's is a Variable (persistent) and Gelu's is of another
 * size. None of them runs in place, and no two regions alive at the same
 * time share an address.
 */
static void test_inplace_never_over_live_input(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t p = add(g, TIDE_OP_PLACEHOLDER, "p", 1024, 0, NULL);
    uint32_t e = add(g, TIDE_OP_EXP, "e", 1024, 1, &p);
    uint32_t in[2] = {p, e};
    uint32_t a = add(g, TIDE_OP_ADD, "a", 1024, 2, in); /* p read after e */
    uint32_t v = add(g, TIDE_OP_VARIABLE, "v", 1024, 0, NULL);
    uint32_t r = add(g, TIDE_OP_RELU, "r", 1024, 1, &v); /* v persistent */
    uint32_t q = add(g, TIDE_OP_PLACEHOLDER, "q", 512, 0, NULL);
    uint32_t ge = add(g, TIDE_OP_GELU, "ge", 1024, 1, &q); /* another size */
    uint32_t in2[3] = {a, r, ge};
    uint32_t sum = add(g, TIDE_OP_ADD_N, "sum", 1024, 3, in2);
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    uint32_t nodes[] = {p, e, a, v, r, q, ge, sum};
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
        assert_int_equal(region_of(&plan, nodes[i], 0)->inplace_of, TIDE_MEMPLAN_NO_REGION);
    for (uint32_t i = 0; i < plan.n_regions; i++) {
        for (uint32_t j = i + 1; j < plan.n_regions; j++) {
            const struct tide_memplan_region *x = &plan.regions[i], *y = &plan.regions[j];
            bool time = x->first <= y->last && y->first <= x->last;
            bool space = x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes;
            if (time && space)
                fail_msg("\"%s\" and \"%s\" overlap in time and space", g->nodes[x->node].name,
                         g->nodes[y->node].name);
        }
    }
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/*
 * dy is read by a SwapOut on d2h, then last by ReluGrad on compute, which
 * writes dx over it: ReluGrad must wait for the SwapOut (a control edge),
 * or it would overwrite dy while the copy reads it.
 */
static void test_inplace_waits_for_other_streams(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t src = add(g, TIDE_OP_PLACEHOLDER, "src", 1024, 0, NULL);
    uint32_t dy = add(g, TIDE_OP_SOFTMAX, "dy", 1024, 1, &src);
    uint32_t so = add(g, TIDE_OP_SWAP_OUT, "so", 1024, 1, &dy);
    g->nodes[so].stream = TIDE_STREAM_D2H;
    g->nodes[so].outputs[0].home = TIDE_HOME_HOST;
    uint32_t y = add(g, TIDE_OP_PLACEHOLDER, "y", 1024, 0, NULL);
    uint32_t in[2] = {dy, y};
    uint32_t dx = add(g, TIDE_OP_RELU_GRAD, "dx", 1024, 2, in);
    struct tide_memplan plan;
    plan_in_id_order(g, NULL, &plan);
    assert_ptr_equal(&plan.regions[region_of(&plan, dx, 0)->inplace_of], region_of(&plan, dy, 0));
    assert_int_equal(region_of(&plan, dx, 0)->offset, region_of(&plan, dy, 0)->offset);
    assert_true(has_control(g, dx, so));
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

static void test_bad_order(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t a = add(g, TIDE_OP_PLACEHOLDER, "a", 1024, 0, NULL);
    add(g, TIDE_OP_SOFTMAX, "b", 1024, 1, &a);
    struct tide_memplan plan;
    struct tide_error err = {0};
    uint32_t backwards[2] = {1, 0};
    assert_int_equal(tide_memplan_build(g, backwards, 2, NULL, &plan, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"b\""));
    assert_non_null(strstr(err.message, "\"a\""));
    assert_null(plan.regions);
    uint32_t twice[2] = {0, 0};
    assert_int_equal(tide_memplan_build(g, twice, 2, NULL, &plan, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "twice"));
    uint32_t bad_id[2] = {0, 7};
    assert_int_equal(tide_memplan_build(g, bad_id, 2, NULL, &plan, &err), TIDE_INVALID);
    tide_memplan_release(&plan);
    tide_graph_free(g);
}

/* ============================================================================
 * Random DAGs: invariants on every pair
 * ========================================================================== */

static uint64_t rng_state;

static uint32_t rng(void)
{
    /* xorshift64*: fixed seed, same sequence on every platform. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

static uint64_t random_workspace(void *ctx, const struct tide_graph *graph,
                                 const struct tide_node *node)
{
    (void)ctx;
    uint32_t id = (uint32_t)(node - graph->nodes);
    uint32_t h = id * 2654435761u;
    return (h >> 28) < 3 ? (h >> 8) % 5000 + 1 : 0;
}

/* A random DAG from the generator's current state; pinned gets random flags. */
static struct tide_graph *random_graph(uint8_t *pinned)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t n = 2 + rng() % 80;
    char name[32];
    for (uint32_t v = 0; v < n; v++) {
        snprintf(name, sizeof(name), "n%u", v);
        uint32_t kind = v == 0 ? 0 : rng() % 10;
        uint32_t inputs[4];
        uint32_t n_in = 0;
        enum tide_op op;
        if (kind == 0) {
            op = TIDE_OP_PLACEHOLDER;
        } else if (kind == 1) {
            op = rng() % 2 ? TIDE_OP_VARIABLE : TIDE_OP_CONST;
        } else {
            op = kind == 2 ? TIDE_OP_BATCH_NORM : TIDE_OP_ADD_N;
            n_in = kind == 2 ? 3 : 1 + rng() % 4;
            for (uint32_t i = 0; i < n_in; i++)
                inputs[i] = rng() % v;
        }
        uint32_t bytes = rng() % 8 == 0 ? 0 : rng() % 20000;
        uint32_t id = add(g, op, name, bytes, n_in, inputs);
        for (uint32_t k = 0; k < g->nodes[id].n_outputs; k++) {
            g->nodes[id].outputs[k].nbytes = rng() % 20000;
            g->nodes[id].outputs[k].home = rng() % 10 == 0 ? TIDE_HOME_HOST : TIDE_HOME_DEVICE;
        }
        if (kind == 2) {
            /* Read different outputs of earlier multi-output nodes too. */
            for (uint32_t i = 0; i < n_in; i++)
                g->nodes[id].inputs[i].output = rng() % g->nodes[inputs[i]].n_outputs;
        }
        g->nodes[id].stream = op == TIDE_OP_PLACEHOLDER ? TIDE_STREAM_H2D : rng() % 3;
        pinned[id] = rng() % 12 == 0;
        if (v > 1 && rng() % 6 == 0) {
            struct tide_error err = {0};
            assert_int_equal(tide_graph_add_control(g, id, rng() % v, &err), TIDE_OK);
        }
    }
    return g;
}

/*
 * The nodes that touch region r's addresses while it lives: the readers of
 * its output (data inputs), or, when nobody reads it (and for a workspace),
 * the node at its only position.
 */
static uint32_t accesses_of(const struct tide_graph *g, const struct tide_memplan *plan,
                            const struct tide_memplan_region *r, uint32_t *out)
{
    uint32_t n = 0;
    for (uint32_t p = r->first; r->output != UINT32_MAX && p <= r->last; p++) {
        const struct tide_node *reader = &g->nodes[plan->order[p]];
        for (uint32_t i = 0; i < reader->n_inputs; i++) {
            if (reader->inputs[i].node == r->node && reader->inputs[i].output == r->output) {
                out[n++] = plan->order[p];
                break;
            }
        }
    }
    if (n == 0)
        out[n++] = plan->order[r->last];
    return n;
}

/*
 * The host arena: every host-homed output has its home and every
 * Placeholder its staging buffer, packed back to back in order of position
 * and aligned, then a scratch buffer as large as the largest device-homed
 * Variable or Const; host_bytes is the arena's end, host_home_bytes the
 * host-homed outputs' own bytes.
 */
static void check_host_plan(const struct tide_graph *g, const struct tide_memplan *plan)
{
    uint32_t i = 0;
    uint64_t top = 0, homes = 0, scratch = 0;
    for (uint32_t p = 0; p < plan->n_order; p++) {
        uint32_t v = plan->order[p];
        const struct tide_node *node = &g->nodes[v];
        for (uint32_t k = 0; k <= node->n_outputs; k++) {
            bool staging = k == node->n_outputs;
            if (staging ? node->op != TIDE_OP_PLACEHOLDER : node->outputs[k].home != TIDE_HOME_HOST)
                continue;
            uint64_t nbytes = node->n_outputs ? node->outputs[staging ? 0 : k].nbytes : 0;
            homes += staging ? 0 : nbytes;
            assert_true(i < plan->n_host_buffers);
            const struct tide_memplan_host_buffer *b = &plan->host_buffers[i++];
            assert_int_equal(b->node, v);
            assert_int_equal(b->output, staging ? TIDE_MEMPLAN_STAGING : k);
            assert_int_equal(b->offset, top);
            assert_true(b->bytes >= nbytes && b->bytes > 0);
            assert_true(b->bytes < nbytes + 2 * TIDE_MEMPLAN_HOST_ALIGNMENT);
            assert_int_equal(b->bytes % TIDE_MEMPLAN_HOST_ALIGNMENT, 0);
            top += b->bytes;
        }
        if ((node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST) &&
            node->outputs[0].home == TIDE_HOME_DEVICE && node->outputs[0].nbytes > scratch)
            scratch = node->outputs[0].nbytes;
    }
    if (scratch) {
        assert_true(i < plan->n_host_buffers);
        const struct tide_memplan_host_buffer *b = &plan->host_buffers[i++];
        assert_int_equal(b->node, TIDE_MEMPLAN_SCRATCH);
        assert_int_equal(b->offset, top);
        assert_true(b->bytes >= scratch && b->bytes < scratch + TIDE_MEMPLAN_HOST_ALIGNMENT);
        top += b->bytes;
    }
    assert_int_equal(plan->n_host_buffers, i);
    assert_int_equal(plan->host_bytes, top);
    assert_int_equal(plan->host_home_bytes, homes);
}

struct graph_copy {
    uint32_t n_controls[128];
    uint32_t controls[128][64];
};

/* Greedy by size, as memplan.h promises: larger first, then earlier, then node, output. */
static bool placed_before(const struct tide_memplan_region *a, const struct tide_memplan_region *b)
{
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes;
    if (a->first != b->first)
        return a->first < b->first;
    if (a->node != b->node)
        return a->node < b->node;
    return a->output < b->output;
}

/*
 * The placement is the plain greedy one, found here by the slowest scan:
 * every non-empty region that is not persistent sits at the lowest offset
 * above the persistent ones that no region placed before it, alive at an
 * overlapping time, reaches into — memplan's index must find exactly that.
 */
static void check_first_fit(const struct tide_memplan *plan)
{
    for (uint32_t i = 0; i < plan->n_regions; i++) {
        const struct tide_memplan_region *r = &plan->regions[i];
        if (r->persistent || r->bytes == 0)
            continue;
        uint64_t candidate = plan->persistent_bytes;
        for (bool moved = true; moved;) {
            moved = false;
            for (uint32_t j = 0; j < plan->n_regions; j++) {
                const struct tide_memplan_region *q = &plan->regions[j];
                if (j == i || q->persistent || q->bytes == 0 || !placed_before(q, r) ||
                    q->first > r->last || r->first > q->last)
                    continue;
                if (q->offset < candidate + r->bytes && q->offset + q->bytes > candidate) {
                    candidate = q->offset + q->bytes;
                    moved = true;
                }
            }
        }
        assert_int_equal(r->offset, candidate);
    }
}

static void check_plan(const struct tide_graph *g, const struct tide_memplan *plan,
                       const uint8_t *pinned, const struct graph_copy *before)
{
    uint64_t max_end = 0, persistent_sum = 0;
    uint32_t n = plan->n_order;
    /* Every device output has one region; its lifetime is producer to last reader. */
    uint32_t expected_regions = 0;
    for (uint32_t p = 0; p < n; p++) {
        uint32_t v = plan->order[p];
        assert_int_equal(plan->position[v], p);
        const struct tide_node *node = &g->nodes[v];
        for (uint32_t k = 0; k < node->n_outputs; k++) {
            const struct tide_memplan_region *r = region_of(plan, v, k);
            if (node->outputs[k].home != TIDE_HOME_DEVICE) {
                assert_null(r);
                continue;
            }
            expected_regions++;
            assert_non_null(r);
            assert_true(r->bytes >= node->outputs[k].nbytes);
            assert_int_equal(r->bytes % 256, 0);
            assert_int_equal(node->outputs[k].offset, r->offset);
            bool persistent =
                node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST || pinned[v];
            assert_int_equal(r->persistent, persistent);
            uint32_t last = p;
            for (uint32_t q = p + 1; q < n; q++) {
                const struct tide_node *reader = &g->nodes[plan->order[q]];
                for (uint32_t i = 0; i < reader->n_inputs; i++) {
                    if (reader->inputs[i].node == v && reader->inputs[i].output == k)
                        last = q;
                }
            }
            assert_int_equal(r->first, persistent ? 0 : p);
            assert_int_equal(r->last, persistent ? n - 1 : last);
        }
        uint64_t ws = random_workspace(NULL, g, node);
        assert_int_equal(plan->workspace_bytes[v], ws);
        expected_regions += ws > 0;
        if (ws)
            assert_int_equal(plan->workspace_offset[v], region_of(plan, v, UINT32_MAX)->offset);
        else
            assert_int_equal(plan->workspace_offset[v], TIDE_NO_OFFSET);
    }
    assert_int_equal(plan->n_regions, expected_regions);
    check_host_plan(g, plan);

    uint32_t deaths_seen = 0;
    for (uint32_t p = 0; p < n; p++) {
        for (uint32_t i = plan->death_offsets[p]; i < plan->death_offsets[p + 1]; i++) {
            assert_int_equal(plan->regions[plan->deaths[i]].last, p);
            assert_false(plan->regions[plan->deaths[i]].persistent);
            deaths_seen++;
        }
    }

    uint32_t non_persistent = 0;
    for (uint32_t i = 0; i < plan->n_regions; i++) {
        const struct tide_memplan_region *a = &plan->regions[i];
        if (a->offset + a->bytes > max_end)
            max_end = a->offset + a->bytes;
        assert_int_equal(a->offset % 256, 0);
        if (a->persistent) {
            persistent_sum += a->bytes;
            assert_true(a->offset + a->bytes <= plan->persistent_bytes);
        } else {
            non_persistent++;
            assert_true(a->offset >= plan->persistent_bytes);
        }
        for (uint32_t j = i + 1; j < plan->n_regions; j++) {
            const struct tide_memplan_region *b = &plan->regions[j];
            if (a->bytes == 0 || b->bytes == 0)
                continue;
            bool time = a->first <= b->last && b->first <= a->last;
            bool space = a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
            if (time && space)
                fail_msg("regions %u and %u overlap in time and space", i, j);
            if (!space || time)
                continue;
            /*
             * Address reuse: the later producer waits for every access to the
             * earlier occupant on another stream — each reader, or the
             * producer of an unread region — not only the last by position.
             */
            const struct tide_memplan_region *early = a->last < b->first ? a : b;
            const struct tide_memplan_region *late = early == a ? b : a;
            uint32_t accesses[128];
            uint32_t n_accesses = accesses_of(g, plan, early, accesses);
            for (uint32_t k = 0; k < n_accesses; k++) {
                if (g->nodes[accesses[k]].stream != g->nodes[late->node].stream &&
                    !ordered_after(g, plan, late->node, accesses[k]))
                    fail_msg("\"%s\" reuses the addresses of \"%s\" without waiting for "
                             "its reader \"%s\"",
                             g->nodes[late->node].name, g->nodes[early->node].name,
                             g->nodes[accesses[k]].name);
            }
        }
    }
    assert_int_equal(deaths_seen, non_persistent);
    check_first_fit(plan);
    assert_int_equal(plan->peak_bytes, max_end);
    assert_int_equal(plan->persistent_bytes, persistent_sum);

    /* Added control edges are all reuse edges across streams, counted once. */
    uint32_t added = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        const struct tide_node *node = &g->nodes[v];
        assert_true(node->n_controls >= before->n_controls[v]);
        for (uint32_t c = 0; c < before->n_controls[v]; c++)
            assert_int_equal(node->controls[c], before->controls[v][c]);
        for (uint32_t c = before->n_controls[v]; c < node->n_controls; c++) {
            uint32_t u = node->controls[c];
            assert_int_not_equal(g->nodes[u].stream, node->stream);
            assert_true(plan->position[u] < plan->position[v]);
            added++;
        }
    }
    assert_int_equal(added, plan->reuse_edges);
}

static void test_random_dags(void **state)
{
    (void)state;
    rng_state = 0x9e3779b97f4a7c15ull;
    uint32_t total_edges = 0;
    for (int iter = 0; iter < 200; iter++) {
        uint8_t pinned[128] = {0};
        uint64_t seed = rng_state;
        struct tide_graph *g = random_graph(pinned);
        struct graph_copy before;
        for (uint32_t v = 0; v < g->n_nodes; v++) {
            before.n_controls[v] = g->nodes[v].n_controls;
            if (g->nodes[v].n_controls)
                memcpy(before.controls[v], g->nodes[v].controls,
                       g->nodes[v].n_controls * sizeof(uint32_t));
        }
        uint32_t order[128];
        struct tide_error err = {0};
        if (iter % 2)
            assert_int_equal(tide_graph_dfs_order(g, order, &err), TIDE_OK);
        else
            assert_int_equal(tide_graph_topo_order(g, order, &err), TIDE_OK);
        struct tide_memplan_options opt = {.pinned = pinned, .workspace_bytes = random_workspace};
        struct tide_memplan plan;
        if (tide_memplan_build(g, order, g->n_nodes, &opt, &plan, &err) != TIDE_OK)
            fail_msg("graph %d: %s", iter, err.message);
        check_plan(g, &plan, pinned, &before);
        total_edges += plan.reuse_edges;

        /* Determinism: the same graph again gives the same plan. */
        uint64_t after = rng_state;
        rng_state = seed;
        uint8_t pinned2[128] = {0};
        struct tide_graph *g2 = random_graph(pinned2);
        rng_state = after;
        struct tide_memplan plan2;
        opt.pinned = pinned2;
        assert_int_equal(tide_memplan_build(g2, order, g2->n_nodes, &opt, &plan2, &err), TIDE_OK);
        assert_int_equal(plan2.n_regions, plan.n_regions);
        assert_int_equal(plan2.peak_bytes, plan.peak_bytes);
        assert_int_equal(plan2.reuse_edges, plan.reuse_edges);
        assert_memory_equal(plan2.regions, plan.regions, plan.n_regions * sizeof(*plan.regions));
        tide_memplan_release(&plan2);
        tide_graph_free(g2);
        tide_memplan_release(&plan);
        tide_graph_free(g);
    }
    /* The random graphs do exercise cross-stream reuse. */
    assert_true(total_edges > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_exact_peak),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_workspace_counted),
        cmocka_unit_test(test_persistent_first_never_reused),
        cmocka_unit_test(test_host_outputs_and_sinks),
        cmocka_unit_test(test_host_arena),
        cmocka_unit_test(test_reuse_edges_across_streams_only),
        cmocka_unit_test(test_reuse_waits_for_every_stream),
        cmocka_unit_test(test_inplace_shares_offset),
        cmocka_unit_test(test_inplace_never_over_live_input),
        cmocka_unit_test(test_inplace_waits_for_other_streams),
        cmocka_unit_test(test_bad_order),
        cmocka_unit_test(test_random_dags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
