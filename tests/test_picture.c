/* SPDX-License-Identifier: MIT */
/*
 * test_picture.c: memory pictures — the timeline a plan turns into
 * (tide_memory_timeline_build, swapper/timeline.c).
 *
 * The timeline is checked against the plan it comes from: by hand on a
 * chain with one swap (every position's bytes by category, the partitions,
 * the swap ticks), and on the client's ResNet planned under half its
 * resident peak, at full resolution and downsampled, against a brute-force
 * sum over memplan's regions at every position. The peaks relate as
 * tide/timeline.h states: the most bytes live at one position is the
 * largest partition's resident bytes in the planner's report and at most
 * the predicted peak, which is the largest top of the arena of any
 * partition.
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

#include "graph/autodiff.h"
#include "graph/import.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "swapper/swapper.h"
#include "tide/models.h"
#include "tide/timeline.h"

static struct tide_backend *backend;

static uint64_t cpu_workspace(void *ctx, const struct tide_graph *graph,
                              const struct tide_node *node)
{
    return tide_backend_workspace_bytes(ctx, graph, node);
}

/* ============================================================================
 * Plans
 * ========================================================================== */

static uint32_t node(struct tide_graph *g, enum tide_op op, const char *name, uint32_t a)
{
    uint32_t id;
    struct tide_error err = {0};
    if (tide_graph_add_node(g, op, name, &id, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    struct tide_edge in[1] = {{a, 0}};
    assert_int_equal(tide_graph_set_inputs(g, id, in, a == TIDE_NO_NODE ? 0 : 1, NULL), TIDE_OK);
    return id;
}

/*
 * x (16x16 floats, 1 KiB) -> r1 -> ... -> r9, out = Add(r9, r1): with
 * partitions of one node and swap on, r1 is swapped out after it is made
 * and back in one partition before out (test_swapper checks the order):
 *
 *   x r1 swapout/r1 r2 r3 r4 r5 r6 r7 r8 swapin/r1/1 r9 out
 *   0 1  2          3  4  5  6  7  8  9  10          11 12
 */
static struct tide_graph *skip_chain(void)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t prev = node(g, TIDE_OP_PLACEHOLDER, "x", TIDE_NO_NODE);
    struct tide_shape s = tide_shape_make(2, (int64_t[]){16, 16});
    tide_attr_set_dtype(g, prev, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, prev, TIDE_ATTR_PLACEHOLDER_shape, &s);
    char name[16];
    for (int i = 1; i <= 9; i++) {
        snprintf(name, sizeof(name), "r%d", i);
        prev = node(g, TIDE_OP_RELU, name, prev);
    }
    uint32_t out = node(g, TIDE_OP_ADD, "out", prev);
    struct tide_edge in[2] = {{prev, 0}, {tide_graph_find(g, "r1"), 0}};
    assert_int_equal(tide_graph_set_inputs(g, out, in, 2, NULL), TIDE_OK);
    struct tide_error err = {0};
    if (tide_graph_infer(g, NULL, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    return g;
}

/* The client's ResNet (batch 4, 16x16 images, 2 blocks, width 8) differentiated for momentum. */
static struct tide_graph *resnet_graph(void)
{
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_resnet(b, 4, 3, 16, 10, 2, 8);
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (logits.id < 0 || tide_builder_serialize(b, &bytes, &len) != 0)
        fail_msg("resnet: %s", tide_builder_error(b));
    struct tide_graph *g = NULL;
    struct tide_error err = {0};
    if (tide_graph_import(bytes, len, NULL, &g, &err) != TIDE_OK)
        fail_msg("import: %s", err.message);
    free(bytes);
    tide_builder_free(b);
    struct tide_train_options t = {.loss = TIDE_MODEL_LOSS,
                                   .optimizer = TIDE_OPTIMIZER_MOMENTUM,
                                   .learning_rate = 0.05f,
                                   .momentum = 0.9f};
    struct tide_autodiff_result r;
    if (tide_autodiff(g, &t, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    tide_autodiff_result_release(&r);
    return g;
}

static void plan_ok(struct tide_graph *g, const struct tide_memory_policy *p,
                    struct tide_memory_plan *plan)
{
    struct tide_plan_env env = {.workspace_bytes = cpu_workspace, .workspace_ctx = backend};
    struct tide_error err = {0};
    if (tide_plan_memory(g, p, &env, plan, &err) != TIDE_OK)
        fail_msg("plan: %s", err.message);
}

/* The ResNet planned under half its resident peak (swap auto, partitions of 16). */
static struct tide_graph *resnet_half(struct tide_memory_plan *plan)
{
    struct tide_graph *g = resnet_graph();
    struct tide_memory_policy p = tide_memory_policy_default();
    p.partition_size = 16;
    plan_ok(g, &p, plan);
    uint64_t resident = plan->memplan.peak_bytes;
    tide_memory_plan_release(plan);
    tide_graph_free(g);
    g = resnet_graph();
    p.budget_bytes = resident / 2;
    plan_ok(g, &p, plan);
    assert_true(plan->report.fits);
    assert_true(plan->report.swap_in_bytes > 0);
    return g;
}

static void timeline_ok(const struct tide_graph *g, const struct tide_memplan *plan,
                        uint64_t budget, uint32_t max_points, struct tide_memory_timeline *t)
{
    struct tide_error err = {0};
    if (tide_memory_timeline_build(g, plan, budget, max_points, t, &err) != TIDE_OK)
        fail_msg("timeline: %s", err.message);
}

static uint32_t count_op(const struct tide_graph *g, enum tide_op op)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        n += g->nodes[v].op == op;
    return n;
}

/* ============================================================================
 * Brute force: the timeline against memplan's regions
 * ========================================================================== */

/* The category of a region, as tide/timeline.h defines it, written out again. */
static int category(const struct tide_graph *g, const struct tide_memplan_region *r)
{
    if (r->output == UINT32_MAX)
        return TIDE_MEMORY_WORKSPACE;
    enum tide_op op = g->nodes[r->node].op;
    if (op == TIDE_OP_VARIABLE || op == TIDE_OP_CONST || op == TIDE_OP_FETCH)
        return TIDE_MEMORY_VARIABLES;
    return op == TIDE_OP_SWAP_IN ? TIDE_MEMORY_SWAPPED_IN : TIDE_MEMORY_ACTIVATIONS;
}

static void live_at(const struct tide_graph *g, const struct tide_memplan *plan, uint32_t p,
                    uint64_t bytes[TIDE_MEMORY_CATEGORY_COUNT], uint64_t *top)
{
    memset(bytes, 0, TIDE_MEMORY_CATEGORY_COUNT * sizeof(*bytes));
    *top = 0;
    for (uint32_t i = 0; i < plan->n_regions; i++) {
        const struct tide_memplan_region *r = &plan->regions[i];
        if (r->first > p || r->last < p)
            continue;
        bytes[category(g, r)] += r->bytes;
        if (r->bytes && r->offset + r->bytes > *top)
            *top = r->offset + r->bytes;
    }
}

static uint64_t sum(const uint64_t bytes[TIDE_MEMORY_CATEGORY_COUNT])
{
    uint64_t s = 0;
    for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++)
        s += bytes[c];
    return s;
}

/*
 * Every point is its bucket's position with the most bytes live and holds
 * exactly the regions live there; the buckets cover the schedule in order;
 * each partition's positions and arena top are its nodes'; the swap ticks
 * are the SwapOut and SwapIn positions; and the peaks relate as
 * tide/timeline.h says.
 */
static void check_against_plan(const struct tide_graph *g, const struct tide_memory_plan *mp,
                               const struct tide_memplan *plan,
                               const struct tide_memory_timeline *t)
{
    uint32_t n = plan->n_order;
    assert_int_equal(t->n_positions, n);
    assert_int_equal(t->predicted_peak_bytes, plan->peak_bytes);
    uint64_t *sums = calloc(n, sizeof(*sums)), *tops = calloc(n, sizeof(*tops));
    uint64_t live_peak = 0;
    for (uint32_t p = 0; p < n; p++) {
        uint64_t bytes[TIDE_MEMORY_CATEGORY_COUNT];
        live_at(g, plan, p, bytes, &tops[p]);
        sums[p] = sum(bytes);
        if (sums[p] > live_peak)
            live_peak = sums[p];
    }
    uint32_t next = 0;
    for (uint32_t i = 0; i < t->n_points; i++) {
        const struct tide_memory_timeline_point *pt = &t->points[i];
        assert_int_equal(pt->first, next);
        assert_true(pt->first <= pt->position && pt->position <= pt->last);
        next = pt->last + 1;
        uint64_t bytes[TIDE_MEMORY_CATEGORY_COUNT], top;
        live_at(g, plan, pt->position, bytes, &top);
        for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++)
            assert_int_equal(pt->bytes[c], bytes[c]);
        for (uint32_t p = pt->first; p <= pt->last; p++)
            assert_true(sums[p] <= sum(pt->bytes));
    }
    assert_int_equal(next, n);

    /* The peaks: live <= predicted, which is the highest top of the arena of any partition. */
    assert_int_equal(t->live_peak_bytes, live_peak);
    assert_true(t->live_peak_bytes <= t->predicted_peak_bytes);
    uint64_t highest_top = 0;
    assert_true(t->n_partitions >= 1);
    for (uint32_t i = 0; i < t->n_partitions; i++) {
        const struct tide_memory_timeline_partition *part = &t->partitions[i];
        uint64_t top = 0;
        for (uint32_t p = 0; p < n; p++) {
            int32_t own = g->nodes[plan->order[p]].partition;
            if ((own < 0 ? 0 : (uint32_t)own) != i)
                continue;
            assert_true(part->first <= p && p <= part->last);
            if (tops[p] > top)
                top = tops[p];
        }
        assert_int_equal(part->arena_top_bytes, top);
        if (top > highest_top)
            highest_top = top;
        if (i > 0)
            assert_int_equal(part->first, t->partitions[i - 1].last + 1);
    }
    assert_int_equal(highest_top, t->predicted_peak_bytes);
    /* With a memory policy: the planner's report, partition by partition. */
    if (mp) {
        assert_int_equal(t->n_partitions, mp->report.n_partitions);
        uint64_t most_resident = 0;
        for (uint32_t i = 0; i < mp->report.n_partitions; i++) {
            if (mp->report.partitions[i].resident_bytes > most_resident)
                most_resident = mp->report.partitions[i].resident_bytes;
        }
        assert_int_equal(t->live_peak_bytes, most_resident);
        assert_int_equal(t->budget_bytes, mp->report.budget_bytes);
    }

    /* Swap ticks: one per SwapOut and SwapIn node, at its position. */
    assert_int_equal(t->n_swap_outs, count_op(g, TIDE_OP_SWAP_OUT));
    assert_int_equal(t->n_swap_ins, count_op(g, TIDE_OP_SWAP_IN));
    for (uint32_t i = 0; i < t->n_swap_outs; i++) {
        assert_int_equal(g->nodes[plan->order[t->swap_outs[i]]].op, TIDE_OP_SWAP_OUT);
        assert_true(i == 0 || t->swap_outs[i] > t->swap_outs[i - 1]);
    }
    for (uint32_t i = 0; i < t->n_swap_ins; i++) {
        assert_int_equal(g->nodes[plan->order[t->swap_ins[i]]].op, TIDE_OP_SWAP_IN);
        assert_true(i == 0 || t->swap_ins[i] > t->swap_ins[i - 1]);
    }
    free(sums);
    free(tops);
}

/* ============================================================================
 * Timelines
 * ========================================================================== */

static void test_timeline_skip_chain(void **state)
{
    (void)state;
    struct tide_graph *g = skip_chain();
    struct tide_memory_policy p = tide_memory_policy_default();
    p.swap = TIDE_SWAP_ON;
    p.partition_size = 1;
    p.swap_threshold = 1;
    p.prefetch_distance = 1;
    p.vars_home = TIDE_VARS_HOME_DEVICE;
    p.budget_bytes = 4096;
    struct tide_memory_plan plan;
    plan_ok(g, &p, &plan);
    struct tide_memory_timeline t;
    timeline_ok(g, &plan.memplan, plan.report.budget_bytes, 0, &t);

    /* One point per position; the bytes by hand (every tensor is 1 KiB). */
    assert_int_equal(t.n_positions, 13);
    assert_int_equal(t.n_points, 13);
    static const uint64_t activations[13] = {1, 2, 1, 2, 2, 2, 2, 2, 2, 2, 1, 2, 2};
    static const uint64_t swapped_in[13] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    for (uint32_t i = 0; i < 13; i++) {
        const struct tide_memory_timeline_point *pt = &t.points[i];
        assert_int_equal(pt->first, i);
        assert_int_equal(pt->last, i);
        assert_int_equal(pt->position, i);
        assert_int_equal(pt->bytes[TIDE_MEMORY_ACTIVATIONS], activations[i] * 1024);
        assert_int_equal(pt->bytes[TIDE_MEMORY_SWAPPED_IN], swapped_in[i] * 1024);
        assert_int_equal(pt->bytes[TIDE_MEMORY_VARIABLES], 0);
        assert_int_equal(pt->bytes[TIDE_MEMORY_WORKSPACE], 0);
    }
    assert_int_equal(t.live_peak_bytes, 3072);
    assert_int_equal(t.budget_bytes, 4096);
    /* x; r1 and its SwapOut; r2 .. r8; the SwapIn and r9; out. */
    assert_int_equal(t.n_partitions, 11);
    assert_int_equal(t.partitions[0].first, 0);
    assert_int_equal(t.partitions[0].last, 0);
    assert_int_equal(t.partitions[1].first, 1);
    assert_int_equal(t.partitions[1].last, 2);
    assert_int_equal(t.partitions[9].first, 10);
    assert_int_equal(t.partitions[9].last, 11);
    assert_int_equal(t.partitions[10].first, 12);
    assert_int_equal(t.partitions[10].last, 12);
    assert_int_equal(t.n_swap_outs, 1);
    assert_int_equal(t.swap_outs[0], 2);
    assert_int_equal(t.n_swap_ins, 1);
    assert_int_equal(t.swap_ins[0], 10);
    check_against_plan(g, &plan, &plan.memplan, &t);

    tide_memory_timeline_clear(&t);
    assert_null(t.points);
    assert_int_equal(t.n_points, 0);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static void test_timeline_resnet(void **state)
{
    (void)state;
    struct tide_memory_plan plan;
    struct tide_graph *g = resnet_half(&plan);
    struct tide_memory_timeline t;
    timeline_ok(g, &plan.memplan, plan.report.budget_bytes, 0, &t);
    assert_int_equal(t.n_points, plan.memplan.n_order);
    check_against_plan(g, &plan, &plan.memplan, &t);
    /* Every category shows up: weights, feature maps, swaps and convolution scratch. */
    uint64_t most[TIDE_MEMORY_CATEGORY_COUNT] = {0};
    for (uint32_t i = 0; i < t.n_points; i++) {
        for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++) {
            if (t.points[i].bytes[c] > most[c])
                most[c] = t.points[i].bytes[c];
        }
    }
    for (int c = 0; c < TIDE_MEMORY_CATEGORY_COUNT; c++)
        assert_true(most[c] > 0);
    assert_true(t.n_swap_outs > 0 && t.n_swap_ins > 0);
    uint64_t live_peak = t.live_peak_bytes;
    tide_memory_timeline_clear(&t);

    /* Downsampled to 37 points: the same checks, and the peak survives. */
    timeline_ok(g, &plan.memplan, plan.report.budget_bytes, 37, &t);
    assert_int_equal(t.n_points, 37);
    assert_true(t.n_positions > 37 * 10);
    check_against_plan(g, &plan, &plan.memplan, &t);
    assert_int_equal(t.live_peak_bytes, live_peak);
    tide_memory_timeline_clear(&t);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

/* Without a memory policy nothing is partitioned: the schedule is one partition. */
static void test_timeline_resident(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_cnn(b, 8, 1, 28, 28, 10);
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (logits.id < 0 || tide_builder_serialize(b, &bytes, &len) != 0)
        fail_msg("cnn: %s", tide_builder_error(b));
    tide_builder_free(b);
    struct tide_train_options train = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.05f};
    struct tide_session_options o = tide_session_options_default();
    o.backend = backend;
    o.train = &train;
    struct tide_session *s = NULL;
    struct tide_error err = {0};
    if (tide_session_plan(bytes, len, &o, &s, &err) != TIDE_OK)
        fail_msg("plan: %s", err.message);
    const struct tide_graph *g = tide_session_graph(s);
    const struct tide_memplan *plan = tide_session_memplan(s);
    struct tide_memory_timeline t;
    timeline_ok(g, plan, 0, 0, &t);
    assert_int_equal(t.n_partitions, 1);
    assert_int_equal(t.partitions[0].first, 0);
    assert_int_equal(t.partitions[0].last, plan->n_order - 1);
    assert_int_equal(t.budget_bytes, 0);
    check_against_plan(g, NULL, plan, &t);
    tide_memory_timeline_clear(&t);
    tide_session_free(s);
    free(bytes);
}

static void test_timeline_refusals(void **state)
{
    (void)state;
    struct tide_memory_timeline t;
    struct tide_error err = {0};
    assert_int_equal(tide_memory_timeline_build(NULL, NULL, 0, 0, &t, &err), TIDE_INVALID);
    assert_string_equal(err.message, "memory timeline: the graph is NULL");
    assert_null(t.points);

    /* A plan that is not the graph's: its region names a node the graph lacks. */
    struct tide_graph *g = skip_chain();
    struct tide_memory_policy p = tide_memory_policy_default();
    struct tide_memory_plan plan;
    plan_ok(g, &p, &plan);
    struct tide_graph *small = tide_graph_new();
    node(small, TIDE_OP_PLACEHOLDER, "x", TIDE_NO_NODE);
    assert_int_equal(tide_memory_timeline_build(small, &plan.memplan, 0, 0, &t, &err),
                     TIDE_INVALID);
    assert_non_null(strstr(err.message, "graph has 1 nodes"));
    assert_int_equal(t.n_points, 0);
    tide_graph_free(small);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static int setup(void **state)
{
    (void)state;
    struct tide_error err = {0};
    if (tide_backend_create("cpu", NULL, &backend, &err) != TIDE_OK) {
        fprintf(stderr, "cpu backend: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tide_backend_free(backend);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline_skip_chain),
        cmocka_unit_test(test_timeline_resnet),
        cmocka_unit_test(test_timeline_resident),
        cmocka_unit_test(test_timeline_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
