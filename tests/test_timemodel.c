/* SPDX-License-Identifier: MIT */
/*
 * test_timemodel.c: the time model (swapper/timemodel.h), the device
 * profiles (runtime/profile.h), and what the planner does with them: the
 * report's predicted step time and the host budget.
 *
 * Per-node work is checked against the formulas by hand; the replay against
 * a chain whose every start and end is worked out below with a profile of
 * round numbers; the planner's prediction against a replay of the plan it
 * returns. The CPU profile is measured, so only its shape is checked (every
 * figure positive, the second call the cached first). Timing itself is a
 * benchmark (bench/timemodel.c), not a test.
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

#include "runtime/profile.h"
#include "swapper/swapper.h"
#include "swapper/timemodel.h"

/* Round numbers: 1 GFLOP/s, 1 GB/s of memory, 1 MB/s of copies, no launch cost. */
static const struct tide_device_profile round_profile = {
    .name = "round", .compute_flops = 1e9, .memory_bytes_per_s = 1e9, .copy_bytes_per_s = 1e6};

#define assert_close(a, b)                                                                         \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= 1e-9 * (fabs(b_) > 1 ? fabs(b_) : 1)))                              \
            fail_msg("%s is %.12g, want %.12g", #a, a_, b_);                                       \
    } while (0)

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

static uint32_t placeholder(struct tide_graph *g, const char *name, int32_t rank,
                            const int64_t *dims)
{
    uint32_t id = node(g, TIDE_OP_PLACEHOLDER, name, TIDE_NO_NODE, TIDE_NO_NODE);
    struct tide_shape s = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &s);
    return id;
}

static void infer(struct tide_graph *g)
{
    struct tide_error err = {0};
    if (tide_graph_infer(g, NULL, &err) != TIDE_OK)
        fail_msg("%s", err.message);
}

/* MatMul, Conv2D and an element-wise op: FLOPs by their formulas, bytes in and out. */
static void test_node_work(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t a = placeholder(g, "a", 2, (int64_t[]){4, 3});
    uint32_t b = placeholder(g, "b", 2, (int64_t[]){3, 5});
    uint32_t mm = node(g, TIDE_OP_MATMUL, "mm", a, b);
    uint32_t relu = node(g, TIDE_OP_RELU, "relu", mm, TIDE_NO_NODE);
    uint32_t x = placeholder(g, "x", 4, (int64_t[]){2, 3, 8, 8});
    uint32_t w = placeholder(g, "w", 4, (int64_t[]){4, 3, 3, 3});
    uint32_t conv = node(g, TIDE_OP_CONV2D, "conv", x, w);
    infer(g);

    struct tide_node_work mw = tide_time_node_work(g, &g->nodes[mm]);
    assert_close(mw.flops, 2.0 * 4 * 5 * 3);
    assert_close(mw.bytes, (12 + 15 + 20) * 4.0);
    struct tide_node_work rw = tide_time_node_work(g, &g->nodes[relu]);
    assert_close(rw.flops, 20);
    assert_close(rw.bytes, 2 * 20 * 4.0);
    /*
     * y [2, 4, 6, 6]: 288 outputs of 3 * 3 * 3 products each; its patch
     * matrix, 27 rows by the 72 output positions, written and read.
     */
    struct tide_node_work cw = tide_time_node_work(g, &g->nodes[conv]);
    assert_close(cw.flops, 2.0 * 288 * 27);
    double patches = 2 * 4.0 * 27 * 72;
    assert_close(cw.bytes, (384 + 108 + 288) * 4.0 + patches);
    /* A source is a copy of its output. */
    struct tide_node_work xw = tide_time_node_work(g, &g->nodes[x]);
    assert_close(xw.flops, 0);
    assert_close(xw.bytes, 384 * 4.0);

    /* Costs: the larger of compute and memory time, plus the launch. */
    struct tide_device_profile p = round_profile;
    p.launch_us = 2;
    assert_close(tide_time_node_ms(&p, g, &g->nodes[conv]),
                 0.002 + ((384 + 108 + 288) * 4.0 + patches) / 1e9 * 1e3);
    assert_close(tide_time_node_ms(&p, g, &g->nodes[mm]), 0.002 + 188 / 1e9 * 1e3);
    p.compute_flops = 1e7; /* now compute-bound: 15,552 FLOPs at 10 MFLOP/s */
    assert_close(tide_time_node_ms(&p, g, &g->nodes[conv]), 0.002 + 15552 / 1e7 * 1e3);
    p.compute_flops = 1e9;
    assert_close(tide_time_node_ms(&p, g, &g->nodes[relu]), 0.002 + 160 / 1e9 * 1e3);
    assert_close(tide_time_node_ms(&p, g, &g->nodes[x]), 0.002 + 1536 / 1e6 * 1e3);

    /* An op's scale multiplies its kernel time, not the launch; copies and others keep theirs. */
    p.op_scale[TIDE_OP_CONV2D] = 2.5;
    p.op_scale[TIDE_OP_PLACEHOLDER] = 3;
    assert_close(tide_time_node_ms(&p, g, &g->nodes[conv]),
                 0.002 + 2.5 * ((384 + 108 + 288) * 4.0 + patches) / 1e9 * 1e3);
    assert_close(tide_time_node_ms(&p, g, &g->nodes[relu]), 0.002 + 160 / 1e9 * 1e3);
    assert_close(tide_time_node_ms(&p, g, &g->nodes[x]), 0.002 + 1536 / 1e6 * 1e3);

    /*
     * Math tf32 divides a product's compute time by the profile's speedup
     * (none without one: the CPU), never its memory time nor another op's.
     */
    p.op_scale[TIDE_OP_CONV2D] = 0;
    p.compute_flops = 1e7; /* the convolution compute-bound again */
    assert_int_equal(tide_attr_set_string(g, conv, TIDE_ATTR_CONV2D_math, "tf32"), TIDE_OK);
    assert_close(tide_time_node_ms(&p, g, &g->nodes[conv]), 0.002 + 15552 / 1e7 * 1e3);
    p.tf32_speedup = 4;
    assert_close(tide_time_node_ms(&p, g, &g->nodes[conv]), 0.002 + 15552 / 1e7 / 4 * 1e3);
    p.compute_flops = 1e12; /* memory-bound: the speedup does not apply */
    assert_close(tide_time_node_ms(&p, g, &g->nodes[conv]),
                 0.002 + ((384 + 108 + 288) * 4.0 + patches) / 1e9 * 1e3);
    assert_close(tide_time_node_ms(&p, g, &g->nodes[relu]), 0.002 + 160 / 1e9 * 1e3);
    tide_graph_free(g);
}

/*
 * A grouped convolution: each output sees its group's channels only, so a
 * third of the dense products in 3 groups, while its gradients' and its
 * patch matrices still hold every channel's rows.
 */
static void test_node_work_grouped(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 4, (int64_t[]){2, 6, 8, 8});
    uint32_t w = placeholder(g, "w", 4, (int64_t[]){9, 2, 3, 3});
    uint32_t conv = node(g, TIDE_OP_CONV2D, "conv", x, w);
    tide_attr_set_int(g, conv, TIDE_ATTR_CONV2D_group, 3);
    uint32_t dy = placeholder(g, "dy", 4, (int64_t[]){2, 9, 6, 6});
    uint32_t dx = node(g, TIDE_OP_CONV2D_BACKPROP_INPUT, "dx", dy, w);
    struct tide_shape xs = {4, {2, 6, 8, 8}}, ws = {4, {9, 2, 3, 3}};
    tide_attr_set_shape(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, &xs);
    tide_attr_set_int(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_group, 3);
    uint32_t dw = node(g, TIDE_OP_CONV2D_BACKPROP_FILTER, "dw", x, dy);
    tide_attr_set_shape(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, &ws);
    tide_attr_set_int(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_group, 3);
    infer(g);

    /* y [2, 9, 6, 6]: 648 outputs of 2 * 3 * 3 products; patches of 54 rows by 72 positions. */
    double patches = 2 * 4.0 * 54 * 72, operands = (768 + 162 + 648) * 4.0;
    struct tide_node_work cw = tide_time_node_work(g, &g->nodes[conv]);
    assert_close(cw.flops, 2.0 * 648 * 18);
    assert_close(cw.bytes, operands + patches);
    struct tide_node_work iw = tide_time_node_work(g, &g->nodes[dx]);
    assert_close(iw.flops, 2.0 * 648 * 18);
    assert_close(iw.bytes, operands + patches);
    struct tide_node_work fw = tide_time_node_work(g, &g->nodes[dw]);
    assert_close(fw.flops, 2.0 * 648 * 18);
    assert_close(fw.bytes, operands + patches);
    tide_graph_free(g);
}

/*
 * A dilated convolution: its taps lie further apart, not more of them, so
 * each output costs the C * R * S products of the dense filter and its
 * patch matrix has as many rows; only the output is smaller.
 */
static void test_node_work_dilated(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 4, (int64_t[]){2, 4, 9, 9});
    uint32_t w = placeholder(g, "w", 4, (int64_t[]){5, 4, 3, 3});
    uint32_t conv = node(g, TIDE_OP_CONV2D, "conv", x, w);
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_dilations, (int64_t[]){2, 2}, 2);
    uint32_t dy = placeholder(g, "dy", 4, (int64_t[]){2, 5, 5, 5});
    uint32_t dx = node(g, TIDE_OP_CONV2D_BACKPROP_INPUT, "dx", dy, w);
    struct tide_shape xs = {4, {2, 4, 9, 9}}, ws = {4, {5, 4, 3, 3}};
    tide_attr_set_shape(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, &xs);
    tide_attr_set_ints(g, dx, TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations, (int64_t[]){2, 2}, 2);
    uint32_t dw = node(g, TIDE_OP_CONV2D_BACKPROP_FILTER, "dw", x, dy);
    tide_attr_set_shape(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, &ws);
    tide_attr_set_ints(g, dw, TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations, (int64_t[]){2, 2}, 2);
    infer(g);

    /* y [2, 5, 5, 5]: 250 outputs of 4 * 3 * 3 products; patches of 36 rows by 50 positions. */
    double patches = 2 * 4.0 * 36 * 50, operands = (648 + 180 + 250) * 4.0;
    struct tide_node_work cw = tide_time_node_work(g, &g->nodes[conv]);
    assert_close(cw.flops, 2.0 * 250 * 36);
    assert_close(cw.bytes, operands + patches);
    struct tide_node_work iw = tide_time_node_work(g, &g->nodes[dx]);
    assert_close(iw.flops, 2.0 * 250 * 36);
    assert_close(iw.bytes, operands + patches);
    struct tide_node_work fw = tide_time_node_work(g, &g->nodes[dw]);
    assert_close(fw.flops, 2.0 * 250 * 36);
    assert_close(fw.bytes, operands + patches);
    tide_graph_free(g);
}

/* Appends a memory op reading in, shaped like it (no infer after it: it would reset homes). */
static uint32_t memory_op(struct tide_graph *g, enum tide_op op, const char *name, uint32_t in,
                          uint8_t stream)
{
    uint32_t id = node(g, op, name, in, TIDE_NO_NODE);
    assert_int_equal(g->nodes[id].n_outputs, 1);
    g->nodes[id].outputs[0] = g->nodes[in].outputs[0];
    g->nodes[id].stream = stream;
    return id;
}

/*
 * x [1024] -> relu -> SwapOut -> SwapIn -> neg, on round_profile. The
 * Placeholder's copy takes 4.096 ms on h2d; relu 0.008192 ms (8 KiB at
 * 1 GB/s) ends at 4.104192; SwapOut 4.096 ms on d2h ends at 8.200192;
 * SwapIn 4.096 ms on h2d ends at 12.296192; neg waits for it from 4.104192
 * (8.192 ms of stall) and ends at 12.304384.
 */
static void test_predict_replay(void **state)
{
    (void)state;
    for (int swapped = 0; swapped < 2; swapped++) {
        struct tide_graph *g = tide_graph_new();
        uint32_t x = placeholder(g, "x", 1, (int64_t[]){1024});
        uint32_t relu = node(g, TIDE_OP_RELU, "relu", x, TIDE_NO_NODE);
        uint32_t neg = node(g, TIDE_OP_NEG, "neg", relu, TIDE_NO_NODE);
        infer(g);
        g->nodes[x].stream = TIDE_STREAM_H2D;
        uint32_t order[5] = {x, relu, neg}, n = 3;
        if (swapped) {
            uint32_t so = memory_op(g, TIDE_OP_SWAP_OUT, "so", relu, TIDE_STREAM_D2H);
            uint32_t si = memory_op(g, TIDE_OP_SWAP_IN, "si", so, TIDE_STREAM_H2D);
            g->nodes[neg].inputs[0].node = si;
            uint32_t swapped_order[5] = {x, relu, so, si, neg};
            memcpy(order, swapped_order, sizeof(order));
            n = 5;
        }
        struct tide_time_prediction t;
        struct tide_error err = {0};
        assert_int_equal(tide_time_predict(g, order, n, &round_profile, &t, &err), TIDE_OK);
        if (swapped) {
            assert_close(t.step_ms, 12.304384);
            assert_close(t.stall_ms, 8.192);
            assert_close(t.h2d_ms, 8.192);
            assert_close(t.d2h_ms, 4.096);
        } else {
            /* Waiting for the feed is input, not a stall on the planner's copies. */
            assert_close(t.step_ms, 4.096 + 2 * 0.008192);
            assert_close(t.stall_ms, 0);
        }
        assert_close(t.compute_ms, 2 * 0.008192);
        /* Copies on compute's cores: one timeline, and the SwapIn is all stall. */
        struct tide_device_profile shared = round_profile;
        shared.copies_share_compute = true;
        assert_int_equal(tide_time_predict(g, order, n, &shared, &t, &err), TIDE_OK);
        assert_close(t.step_ms, swapped ? 12.304384 : 4.096 + 2 * 0.008192);
        assert_close(t.stall_ms, swapped ? 4.096 : 0);
        /* An order naming a node the graph lacks is refused, naming it. */
        order[0] = 99;
        assert_int_equal(tide_time_predict(g, order, n, &round_profile, &t, &err), TIDE_INVALID);
        assert_non_null(strstr(err.message, "node 99"));
        tide_graph_free(g);
    }
}

/* h100 and h200 from their published figures; unknown names listed; cpu measured once. */
static void test_profiles(void **state)
{
    (void)state;
    const struct tide_device_profile *h100 = tide_device_profile_named("h100");
    const struct tide_device_profile *h200 = tide_device_profile_named("h200");
    assert_non_null(h100);
    assert_non_null(h200);
    assert_close(h100->compute_flops, 67e12);
    assert_close(h100->memory_bytes_per_s, 3.35e12);
    assert_close(h200->memory_bytes_per_s, 4.8e12);
    assert_close(h200->copy_bytes_per_s, 55e9);
    assert_close(h100->tf32_speedup, 1.7); /* measured on the H200 (timemodel.c) */
    assert_close(h200->tf32_speedup, 1.7);
    assert_null(tide_device_profile_named("a100"));
    assert_null(tide_device_profile_named(NULL));

    struct tide_device_profile p;
    struct tide_error err = {0};
    assert_int_equal(tide_device_profile_resolve("a100", NULL, &p, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"a100\" is unknown"));
    assert_non_null(strstr(err.message, "cpu, h100, h200"));
    assert_int_equal(tide_device_profile_resolve("h200", NULL, &p, &err), TIDE_OK);
    assert_memory_equal(&p, h200, sizeof(p));

    struct tide_device_profile cpu, again;
    assert_int_equal(tide_device_profile_resolve("cpu", NULL, &cpu, &err), TIDE_OK);
    assert_string_equal(cpu.name, "cpu");
    assert_true(cpu.compute_flops > 1e8);
    assert_true(cpu.memory_bytes_per_s > 1e8);
    assert_true(cpu.copy_bytes_per_s > 1e8);
    assert_true(cpu.launch_us > 0);
    assert_true(cpu.copies_share_compute);
    assert_false(h100->copies_share_compute);
    /*
     * The calibration's block (runtime/calibrate.c) timed its kernels with
     * work enough to time; an op it lacks, and the published profiles, have
     * no scale. The values are measured, so only that they are there.
     */
    static const enum tide_op calibrated[] = {TIDE_OP_CONV2D,
                                              TIDE_OP_CONV2D_BACKPROP_INPUT,
                                              TIDE_OP_CONV2D_BACKPROP_FILTER,
                                              TIDE_OP_BATCH_NORM,
                                              TIDE_OP_BATCH_NORM_GRAD,
                                              TIDE_OP_RELU,
                                              TIDE_OP_RELU_GRAD,
                                              TIDE_OP_ADD};
    for (size_t i = 0; i < sizeof(calibrated) / sizeof(calibrated[0]); i++) {
        if (!(cpu.op_scale[calibrated[i]] > 0))
            fail_msg("the cpu profile has no scale for %s", tide_op_info(calibrated[i])->name);
    }
    assert_true(cpu.op_scale[TIDE_OP_MATMUL] == 0);
    for (int op = 0; op < TIDE_OP_COUNT; op++)
        assert_true(h100->op_scale[op] == 0 && h200->op_scale[op] == 0);
    assert_int_equal(tide_device_profile_resolve(NULL, NULL, &again, &err), TIDE_OK);
    assert_memory_equal(&cpu, &again, sizeof(cpu));

    assert_true(tide_host_budget_default() > 0);
}

/*
 * A long skip: a = Relu(x) read at the end, over a chain of Relus: under a
 * budget of two of its tensors, a must be swapped.
 */
static struct tide_graph *long_skip(int64_t n)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 2, (int64_t[]){1, n});
    uint32_t a = node(g, TIDE_OP_RELU, "a", x, TIDE_NO_NODE);
    uint32_t prev = a;
    char name[16];
    for (int i = 1; i <= 8; i++) {
        snprintf(name, sizeof(name), "r%d", i);
        /* Softmax, not Relu: a Relu writes over its input (TIDE_OP_F_INPLACE), and the
         * chain would then need one buffer and no swap. */
        prev = node(g, TIDE_OP_SOFTMAX, name, prev, TIDE_NO_NODE);
    }
    uint32_t s = node(g, TIDE_OP_REDUCE_SUM, "s", prev, TIDE_NO_NODE);
    node(g, TIDE_OP_ADD, "out", a, s);
    infer(g);
    return g;
}

/* The report predicts the plan's step: the replay of the plan's own order. */
static void test_plan_predicts(void **state)
{
    (void)state;
    for (int with_profile = 0; with_profile < 2; with_profile++) {
        struct tide_graph *g = long_skip(1 << 16);
        struct tide_memory_policy policy = tide_memory_policy_default();
        policy.budget_bytes = 2 * (256u << 10) + 4096; /* two 256 KiB tensors and the scalar */
        policy.profile = with_profile ? &round_profile : NULL;
        struct tide_memory_plan plan;
        struct tide_error err = {0};
        if (tide_plan_memory(g, &policy, NULL, &plan, &err) != TIDE_OK)
            fail_msg("plan: %s", err.message);
        assert_true(plan.report.swap_in_bytes > 0);
        if (!with_profile) {
            assert_true(plan.report.predicted_step_ms == 0);
            assert_string_equal(plan.report.profile, "");
        } else {
            struct tide_time_prediction t;
            assert_int_equal(tide_time_predict(g, plan.memplan.order, plan.memplan.n_order,
                                               &round_profile, &t, &err),
                             TIDE_OK);
            assert_close(plan.report.predicted_step_ms, t.step_ms);
            assert_close(plan.report.predicted_stall_ms, t.stall_ms);
            assert_string_equal(plan.report.profile, "round");
            /* At least the Placeholder's 256 KiB at 1 MB/s, and the swap's 2 x 256 KiB. */
            assert_true(t.step_ms >= 3 * 262.144);
        }
        tide_memory_plan_release(&plan);
        tide_graph_free(g);
    }
}

/* A plan whose host arena is over the host budget is refused, naming both numbers. */
static void test_host_budget(void **state)
{
    (void)state;
    for (int searched = 0; searched < 2; searched++) {
        struct tide_memory_policy policy = tide_memory_policy_default();
        if (searched) {
            policy.budget_bytes = 2 * (256u << 10) + 4096; /* autotune must swap a */
        } else {
            policy.swap = TIDE_SWAP_ON; /* no budget: the first candidate, swapping */
            policy.swap_threshold = 0;
            policy.autotune = false;
        }
        struct tide_graph *g = long_skip(1 << 16);
        struct tide_memory_plan plan;
        struct tide_error err = {0};
        if (tide_plan_memory(g, &policy, NULL, &plan, &err) != TIDE_OK)
            fail_msg("plan: %s", err.message);
        uint64_t host = plan.memplan.host_bytes;
        assert_true(host >= 256u << 10); /* a's swap slot at least */
        assert_int_equal(plan.report.host_arena_bytes, host);
        tide_memory_plan_release(&plan);
        tide_graph_free(g);

        /* Exactly the plan's host bytes: fits. */
        policy.host_budget_bytes = host;
        g = long_skip(1 << 16);
        if (tide_plan_memory(g, &policy, NULL, &plan, &err) != TIDE_OK)
            fail_msg("plan at the host budget: %s", err.message);
        assert_int_equal(plan.report.host_budget_bytes, host);
        tide_memory_plan_release(&plan);
        tide_graph_free(g);

        /* One byte less: refused. */
        policy.host_budget_bytes = host - 1;
        g = long_skip(1 << 16);
        assert_int_equal(tide_plan_memory(g, &policy, NULL, &plan, &err), TIDE_DOES_NOT_FIT);
        char want[160];
        snprintf(want, sizeof(want), "needs %" PRIu64 " bytes", host);
        if (!strstr(err.message, want) || !strstr(err.message, "of host memory"))
            fail_msg("message \"%s\" should say it %s of host memory", err.message, want);
        snprintf(want, sizeof(want), "host budget is %" PRIu64 " bytes", host - 1);
        if (!strstr(err.message, want))
            fail_msg("message \"%s\" should say %s", err.message, want);
        assert_false(plan.report.fits);
        assert_non_null(strstr(plan.report.message, "host budget"));
        tide_memory_plan_release(&plan);
        tide_graph_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_work),         cmocka_unit_test(test_node_work_grouped),
        cmocka_unit_test(test_node_work_dilated), cmocka_unit_test(test_predict_replay),
        cmocka_unit_test(test_profiles),          cmocka_unit_test(test_plan_predicts),
        cmocka_unit_test(test_host_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
