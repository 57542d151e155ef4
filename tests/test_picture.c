/* SPDX-License-Identifier: MIT */
/*
 * test_picture.c: memory pictures — the timeline a plan turns into
 * (tide_memory_timeline_build, swapper/timeline.c) and its drawing
 * (picture/picture.h).
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
 *
 * The drawing: the SVG (in memory and in a file) parses as XML (python3's
 * xml.etree, as a child process) with an SVG root of the asked size, and
 * holds a stroke of the budget's colour from the plot's left to its right
 * at the layout's budget row; rasterised on a cairo image surface, the
 * pixels of the budget line's two rows are the budget's colour across the
 * plot, and those just off it are not; the measured overlay is drawn where
 * its values say; refusals name what is wrong (an empty timeline, points
 * out of the schedule, an overlay of the wrong length, a path that cannot
 * be written).
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

#include <unistd.h>

#include "child.h"
#include "graph/autodiff.h"
#include "graph/import.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "picture/picture.h"
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
        prev = node(g, TIDE_OP_SOFTMAX, name, prev);
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
        /* In place: at its first position the region is its input's memory, counted there. */
        if (tide_memplan_own_first(r) <= p)
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

/* ============================================================================
 * Pictures
 * ========================================================================== */

/* The ResNet's timeline, the budget set twice its peak so that nothing is drawn near its line. */
static void resnet_timeline(struct tide_memory_timeline *t)
{
    struct tide_memory_plan plan;
    struct tide_graph *g = resnet_half(&plan);
    timeline_ok(g, &plan.memplan, plan.report.budget_bytes, 0, t);
    t->budget_bytes = 2 * t->predicted_peak_bytes;
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

/*
 * Checks an SVG file with python3's XML parser: the root is an SVG element
 * of width x height pixels, and one path of the budget's colour is the
 * horizontal line from plot_left to plot_right at row y (the legend's
 * sample is another).
 */
static const char svg_check[] =
    "import sys, xml.etree.ElementTree as E\n"
    "path, width, height, left, right, y, rgb = sys.argv[1:8]\n"
    "root = E.parse(path).getroot()\n"
    "assert root.tag == '{http://www.w3.org/2000/svg}svg', root.tag\n"
    "assert root.get('width') == width + 'px', root.get('width')\n"
    "assert root.get('height') == height + 'px', root.get('height')\n"
    "c = int(rgb, 16)\n"
    "want = 'stroke:rgb(%f%%,%f%%,%f%%)' % tuple((c >> s & 255) / 2.55 for s in (16, 8, 0))\n"
    "lines = []\n"
    "for e in root.iter('{http://www.w3.org/2000/svg}path'):\n"
    "    if want in (e.get('style') or ''):\n"
    "        d = e.get('d').split()\n"
    "        if len(d) == 6 and d[0] == 'M' and d[3] == 'L':\n"
    "            lines.append(tuple(float(v) for v in (d[1], d[2], d[4], d[5])))\n"
    "line = (float(left), float(y), float(right), float(y))\n"
    "assert line in lines, 'budget strokes %r, want %r' % (lines, line)\n"
    "print('ok')\n";

static void check_svg_file(const char *path, const struct tide_picture_layout *l)
{
    char width[32], height[32], left[32], right[32], y[32], rgb[32];
    snprintf(width, sizeof(width), "%.0f", l->width);
    snprintf(height, sizeof(height), "%.0f", l->height);
    snprintf(left, sizeof(left), "%.6f", l->plot_left);
    snprintf(right, sizeof(right), "%.6f", l->plot_right);
    snprintf(y, sizeof(y), "%.6f", l->budget_y);
    snprintf(rgb, sizeof(rgb), "%06x", TIDE_PICTURE_BUDGET_RGB);
    struct tide_test_run *r = malloc(sizeof(*r));
    tide_test_run_program((char *[]){"/usr/bin/env", "python3", "-c", (char *)svg_check,
                                     (char *)path, width, height, left, right, y, rgb, NULL},
                          -1, -1, r);
    if (r->exit_code == 127) {
        free(r);
        skip(); /* no python3 to parse with: nothing said either way */
        return;
    }
    if (r->exit_code != 0 || strcmp(r->out, "ok\n") != 0)
        fail_msg("%s: exit %d: %s%s", path, r->exit_code, r->out, r->err);
    free(r);
}

static void temp_path(char *buf, size_t size, const char *name)
{
    const char *dir = getenv("TMPDIR");
    snprintf(buf, size, "%s/test_picture.%d.%s", dir && *dir ? dir : "/tmp", (int)getpid(), name);
}

static void test_svg_well_formed(void **state)
{
    (void)state;
    struct tide_memory_timeline t;
    resnet_timeline(&t);
    uint64_t *measured = calloc(t.n_partitions, sizeof(*measured));
    for (uint32_t i = 0; i < t.n_partitions; i++)
        measured[i] = t.partitions[i].arena_top_bytes;
    struct tide_picture_options o = {.title = "test",
                                     .measured_bytes = measured,
                                     .n_measured = t.n_partitions,
                                     .measured_step = 3};
    struct tide_picture_layout l;
    struct tide_error err = {0};
    assert_int_equal(tide_picture_layout(&t, &o, &l, &err), TIDE_OK);
    assert_true(l.budget_y > l.plot_top && l.budget_y < l.plot_bottom);

    /* In memory: an XML document, written out to parse it. */
    char *svg = NULL;
    size_t len = 0;
    if (tide_picture_svg_buffer(&t, &o, &svg, &len, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    assert_true(len > 1000);
    assert_int_equal(strlen(svg), len);
    assert_memory_equal(svg, "<?xml", 5);
    char path[512];
    temp_path(path, sizeof(path), "buffer.svg");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(svg, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(svg);
    check_svg_file(path, &l);
    remove(path);

    /* To a file, in another size. */
    o.width = 800, o.height = 500;
    assert_int_equal(tide_picture_layout(&t, &o, &l, &err), TIDE_OK);
    assert_true(l.width == 800 && l.height == 500);
    temp_path(path, sizeof(path), "file.svg");
    if (tide_picture_svg_file(&t, &o, path, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    check_svg_file(path, &l);
    remove(path);

    /* And as PNG: cairo's signature. */
    temp_path(path, sizeof(path), "file.png");
    if (tide_picture_png_file(&t, &o, path, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char head[8];
    assert_int_equal(fread(head, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(head, "\x89PNG\r\n\x1a\n", 8);
    remove(path);
    free(measured);
    tide_memory_timeline_clear(&t);
}

/* The picture rasterised: the surface, its layout, and the pixel at (x, y) as 0xRRGGBB. */
struct raster {
    cairo_surface_t *surface;
    struct tide_picture_layout l;
};

static void rasterise(const struct tide_memory_timeline *t, const struct tide_picture_options *o,
                      struct raster *r)
{
    struct tide_error err = {0};
    assert_int_equal(tide_picture_layout(t, o, &r->l, &err), TIDE_OK);
    r->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)r->l.width, (int)r->l.height);
    cairo_t *cr = cairo_create(r->surface);
    if (tide_picture_draw(cr, t, o, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    cairo_destroy(cr);
    cairo_surface_flush(r->surface);
}

static uint32_t pixel(const struct raster *r, int x, int y)
{
    const unsigned char *data = cairo_image_surface_get_data(r->surface);
    int stride = cairo_image_surface_get_stride(r->surface);
    return ((const uint32_t *)(data + (size_t)y * (size_t)stride))[x] & 0xffffff;
}

/* The pixels of the budget's colour in row y, from x0 to x1 (excluded). */
static int budget_pixels(const struct raster *r, int y, int x0, int x1)
{
    int n = 0;
    for (int x = x0; x < x1; x++)
        n += pixel(r, x, y) == TIDE_PICTURE_BUDGET_RGB;
    return n;
}

static void test_budget_line_pixels(void **state)
{
    (void)state;
    struct tide_memory_timeline t;
    resnet_timeline(&t);
    struct raster r;
    rasterise(&t, NULL, &r);
    int y = (int)r.l.budget_y;
    assert_true(y > r.l.plot_top && y < r.l.plot_bottom);
    int x0 = (int)ceil(r.l.plot_left), x1 = (int)floor(r.l.plot_right);
    /* The line's two rows, across the whole plot. */
    assert_int_equal(budget_pixels(&r, y - 1, x0, x1), x1 - x0);
    assert_int_equal(budget_pixels(&r, y, x0, x1), x1 - x0);
    /* Not a band: the rows just off it have none, left of the label. */
    assert_int_equal(budget_pixels(&r, y - 3, x0, x0 + 300), 0);
    assert_int_equal(budget_pixels(&r, y + 2, x0, x0 + 300), 0);
    cairo_surface_destroy(r.surface);

    /* Without a budget there is no line, nor any pixel of its colour in the plot. */
    t.budget_bytes = 0;
    rasterise(&t, NULL, &r);
    assert_true(r.l.budget_y < 0);
    for (int row = (int)r.l.plot_top; row < (int)r.l.plot_bottom; row++)
        assert_int_equal(budget_pixels(&r, row, x0, x1), 0);
    cairo_surface_destroy(r.surface);
    tide_memory_timeline_clear(&t);
}

static void test_measured_overlay_pixels(void **state)
{
    (void)state;
    struct tide_memory_timeline t;
    resnet_timeline(&t);
    /* The widest partition, and a measured value drawn across it, half way up the plot. */
    uint32_t widest = 0;
    for (uint32_t i = 1; i < t.n_partitions; i++) {
        if (t.partitions[i].last - t.partitions[i].first >
            t.partitions[widest].last - t.partitions[widest].first)
            widest = i;
    }
    struct tide_picture_options o = {0};
    struct raster r;
    rasterise(&t, &o, &r);
    uint64_t half = r.l.top_bytes / 2;
    double mid = (t.partitions[widest].first + t.partitions[widest].last + 1.0) / 2;
    int x = (int)(r.l.plot_left + mid / t.n_positions * (r.l.plot_right - r.l.plot_left));
    int y = (int)floor(r.l.plot_bottom - 0.5 * (r.l.plot_bottom - r.l.plot_top));
    uint32_t before = pixel(&r, x, y);
    cairo_surface_destroy(r.surface);

    uint64_t *measured = calloc(t.n_partitions, sizeof(*measured));
    for (uint32_t i = 0; i < t.n_partitions; i++)
        measured[i] = half;
    o.measured_bytes = measured;
    o.n_measured = t.n_partitions;
    rasterise(&t, &o, &r);
    uint32_t after = pixel(&r, x, y);
    cairo_surface_destroy(r.surface);
    /* Black at 80% over anything: every channel dark. */
    for (int shift = 0; shift <= 16; shift += 8)
        assert_true(((after >> shift) & 0xff) < 0x40);
    assert_int_not_equal(before, after);
    free(measured);
    tide_memory_timeline_clear(&t);
}

static void test_picture_refusals(void **state)
{
    (void)state;
    struct tide_error err = {0};
    struct tide_picture_layout l;
    struct tide_memory_timeline empty = {0};
    assert_int_equal(tide_picture_layout(&empty, NULL, &l, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "the timeline is empty (0 positions, 0 points)"));

    struct tide_memory_timeline t;
    resnet_timeline(&t);
    uint64_t measured[2] = {1, 2};
    struct tide_picture_options o = {.measured_bytes = measured, .n_measured = 2};
    assert_int_equal(tide_picture_layout(&t, &o, &l, &err), TIDE_INVALID);
    char want[128];
    snprintf(want, sizeof(want), "the measured high water has 2 partitions, the timeline %u",
             t.n_partitions);
    assert_non_null(strstr(err.message, want));

    o = (struct tide_picture_options){.width = 100, .height = 100};
    assert_int_equal(tide_picture_layout(&t, &o, &l, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "100x100 pixels is too small"));

    /* What a bad wire message could hold: a point past the schedule, a swap-in too. */
    uint32_t last = t.points[t.n_points - 1].last;
    t.points[t.n_points - 1].last = t.n_positions;
    assert_int_equal(tide_picture_layout(&t, NULL, &l, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "point"));
    t.points[t.n_points - 1].last = last;
    t.swap_ins[0] = t.n_positions + 5;
    assert_int_equal(tide_picture_layout(&t, NULL, &l, &err), TIDE_INVALID);
    snprintf(want, sizeof(want), "swap-ins 0 is at position %u of a schedule of %u",
             t.n_positions + 5, t.n_positions);
    assert_non_null(strstr(err.message, want));
    t.swap_ins[0] = 0;

    /* A file that cannot be made names its path; nothing is left behind. */
    const char *path = "/nonexistent-directory/m.svg";
    assert_int_equal(tide_picture_svg_file(&t, NULL, path, &err), TIDE_IO);
    assert_non_null(strstr(err.message, "cannot create \"/nonexistent-directory/m.svg\""));
    assert_int_equal(tide_picture_png_file(&t, NULL, path, &err), TIDE_IO);
    char *svg = (char *)"untouched";
    size_t len = 7;
    assert_int_equal(tide_picture_svg_buffer(&empty, NULL, &svg, &len, &err), TIDE_INVALID);
    assert_null(svg);
    assert_int_equal(len, 0);
    tide_memory_timeline_clear(&t);
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
    tide_picture_shutdown(); /* cairo's and fontconfig's caches: a clean exit under ASan */
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timeline_skip_chain),     cmocka_unit_test(test_timeline_resnet),
        cmocka_unit_test(test_timeline_resident),       cmocka_unit_test(test_timeline_refusals),
        cmocka_unit_test(test_svg_well_formed),         cmocka_unit_test(test_budget_line_pixels),
        cmocka_unit_test(test_measured_overlay_pixels), cmocka_unit_test(test_picture_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
