/* SPDX-License-Identifier: MIT */
/*
 * test_swapper.c: the memory pipeline (tide_plan_memory) without a device.
 *
 * Exact structure on hand-built chains with a skip connection (which
 * SwapOut/SwapIn nodes, where in the order, streams, homes, rewiring);
 * policies (off inserts nothing, thresholds are monotone, swapping lowers
 * the peak of a long skip, autotune keeps "nothing moved" when it fits);
 * admission and DOES_NOT_FIT with the smallest budget; the client's CNN and
 * ResNet training graphs planned under a quarter of their resident peak with
 * every contract invariant checked; determinism; the simulation that drives
 * autotune checked against memplan on many choices; the memory-action table
 * (complete entries, KEEP last) and its driver (which action takes which
 * feature map, what the rewrite inserts, whose cost it is); and planned sessions
 * trained end to end, bit-identical to the resident run (tests/test_swap.c
 * covers execution in depth).
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
#include "swapper/swapper-impl.h"
#include "tide/models.h"

static struct tide_backend *backend;

static uint64_t cpu_workspace(void *ctx, const struct tide_graph *graph,
                              const struct tide_node *node)
{
    return tide_backend_workspace_bytes(ctx, graph, node);
}

static struct tide_plan_env cpu_env(void)
{
    return (struct tide_plan_env){.workspace_bytes = cpu_workspace, .workspace_ctx = backend};
}

/* ============================================================================
 * Graphs
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

static void infer(struct tide_graph *g)
{
    struct tide_error err = {0};
    if (tide_graph_infer(g, NULL, &err) != TIDE_OK)
        fail_msg("%s", err.message);
}

static uint32_t find(const struct tide_graph *g, const char *name)
{
    uint32_t id = tide_graph_find(g, name);
    if (id == TIDE_NO_NODE)
        fail_msg("no node \"%s\"", name);
    return id;
}

/*
 * x -> r1 -> r2 -> ... -> r9, and out = Add(r9, r1): r1 has a near use (r2)
 * and a far one (out). Depth-first: x 0, r1 1, ..., r9 9, out 10.
 */
static struct tide_graph *skip_chain(void)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t prev = placeholder(g, "x", 16, 16);
    char name[16];
    for (int i = 1; i <= 9; i++) {
        snprintf(name, sizeof(name), "r%d", i);
        prev = node(g, TIDE_OP_SOFTMAX, name, prev, TIDE_NO_NODE);
    }
    node(g, TIDE_OP_ADD, "out", prev, tide_graph_find(g, "r1"));
    infer(g);
    return g;
}

/*
 * A long skip over a memory-heavy middle: a = Relu(x); r1..r8 = Relu chain
 * from a; s = ReduceSum(r8) (a scalar); out = Add(a, s). Resident, a stays
 * alive through the chain: three big tensors at once. Swapped, two.
 * Depth-first: x 0, a 1, r1 2, ..., r8 9, s 10, out 11.
 */
static struct tide_graph *long_skip(int64_t n)
{
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 1, n);
    uint32_t a = node(g, TIDE_OP_SOFTMAX, "a", x, TIDE_NO_NODE);
    uint32_t prev = a;
    char name[16];
    for (int i = 1; i <= 8; i++) {
        snprintf(name, sizeof(name), "r%d", i);
        prev = node(g, TIDE_OP_SOFTMAX, name, prev, TIDE_NO_NODE);
    }
    uint32_t s = node(g, TIDE_OP_REDUCE_SUM, "s", prev, TIDE_NO_NODE);
    node(g, TIDE_OP_ADD, "out", a, s);
    infer(g);
    return g;
}

/* MODEL_RESNET38: tide-bench's ResNet-38 (32x32, width 16) at batch 16, for plans only. */
enum model { MODEL_CNN, MODEL_RESNET, MODEL_MLP, MODEL_RESNET38 };

/* A client model's training graph: serialized, imported and differentiated as the daemon does. */
static struct tide_graph *model_graph(enum model model, enum tide_optimizer optimizer)
{
    tide_builder *b = tide_builder_new();
    static const int64_t hidden[] = {256, 128};
    tide_ref logits = model == MODEL_CNN        ? tide_model_cnn(b, 64, 1, 28, 28, 10)
                      : model == MODEL_RESNET   ? tide_model_resnet(b, 4, 3, 16, 10, 2, 8)
                      : model == MODEL_RESNET38 ? tide_model_resnet(b, 16, 3, 32, 10, 2, 16)
                                                : tide_model_mlp(b, 32, 784, hidden, 2, 10);
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (logits.id < 0 || tide_builder_serialize(b, &bytes, &len) != 0)
        fail_msg("model: %s", tide_builder_error(b));
    struct tide_graph *g = NULL;
    struct tide_error err = {0};
    if (tide_graph_import(bytes, len, NULL, &g, &err) != TIDE_OK)
        fail_msg("import: %s", err.message);
    free(bytes);
    tide_builder_free(b);
    struct tide_train_options t = {
        .loss = TIDE_MODEL_LOSS, .optimizer = optimizer, .learning_rate = 0.05f, .momentum = 0.9f};
    struct tide_autodiff_result r;
    if (tide_autodiff(g, &t, &r, &err) != TIDE_OK)
        fail_msg("autodiff: %s", err.message);
    tide_autodiff_result_release(&r);
    return g;
}

/* ============================================================================
 * Checks
 * ========================================================================== */

static struct tide_memory_policy policy_of(enum tide_swap_mode swap, uint32_t partition_size,
                                           uint32_t threshold, uint32_t prefetch)
{
    struct tide_memory_policy p = tide_memory_policy_default();
    p.swap = swap;
    p.partition_size = partition_size;
    p.swap_threshold = threshold;
    p.prefetch_distance = prefetch;
    p.vars_home = TIDE_VARS_HOME_DEVICE;
    return p;
}

static void plan_ok(struct tide_graph *g, const struct tide_memory_policy *p,
                    const struct tide_plan_env *env, struct tide_memory_plan *plan)
{
    struct tide_error err = {0};
    if (tide_plan_memory(g, p, env, plan, &err) != TIDE_OK)
        fail_msg("plan: %s", err.message);
}

static const char *name_at(const struct tide_graph *g, const struct tide_memory_plan *plan,
                           uint32_t position)
{
    return g->nodes[plan->memplan.order[position]].name;
}

static uint32_t count_op(const struct tide_graph *g, enum tide_op op)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        n += g->nodes[v].op == op;
    return n;
}

static uint64_t align256(uint64_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

/* The largest kernel working set (inputs once each, outputs, workspace), as admission counts. */
/*
 * Whether node v writes its output over an input, as the floor counts it:
 * its op may overwrite input i, which no Variable or Const produced, and v
 * is that input's last reader in the graph's depth-first order (in a plan:
 * memplan says so).
 */
static bool writes_over_input(const struct tide_graph *g, const struct tide_memplan *plan,
                              const uint32_t *position, uint32_t v)
{
    const struct tide_node *n = &g->nodes[v];
    if (plan) {
        for (uint32_t r = 0; r < plan->n_regions; r++) {
            if (plan->regions[r].node == v && plan->regions[r].output == 0)
                return plan->regions[r].inplace_of != TIDE_MEMPLAN_NO_REGION;
        }
        return false;
    }
    for (uint32_t i = 0; i < n->n_inputs; i++) {
        const struct tide_edge *e = &n->inputs[i];
        if (!tide_graph_may_overwrite(g, n, i) ||
            (tide_op_info(g->nodes[e->node].op)->flags & TIDE_OP_F_SOURCE &&
             g->nodes[e->node].op != TIDE_OP_PLACEHOLDER))
            continue;
        bool last = true;
        for (uint32_t w = 0; w < g->n_nodes && last; w++) {
            for (uint32_t j = 0; j < g->nodes[w].n_inputs; j++) {
                const struct tide_edge *f = &g->nodes[w].inputs[j];
                if (f->node == e->node && f->output == e->output && position[w] > position[v])
                    last = false;
            }
        }
        if (last)
            return true;
    }
    return false;
}

static uint64_t largest_working_set(const struct tide_graph *g, const struct tide_memplan *plan)
{
    uint64_t most = 0;
    uint32_t *order = calloc(g->n_nodes + 1, sizeof(*order));
    uint32_t *position = calloc(g->n_nodes + 1, sizeof(*position));
    struct tide_error err = {0};
    assert_true(order && position);
    assert_int_equal(tide_graph_dfs_order(g, order, &err), TIDE_OK);
    for (uint32_t p = 0; p < g->n_nodes; p++)
        position[order[p]] = p;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        const struct tide_node *n = &g->nodes[v];
        if (tide_op_info(n->op)->flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY))
            continue;
        uint64_t sum = plan ? align256(plan->workspace_bytes[v])
                            : align256(tide_backend_workspace_bytes(backend, g, n));
        for (uint32_t i = 0; i < n->n_inputs; i++) {
            bool seen = false;
            for (uint32_t j = 0; j < i; j++)
                seen = seen || (n->inputs[j].node == n->inputs[i].node &&
                                n->inputs[j].output == n->inputs[i].output);
            sum += seen ? 0 : align256(tide_graph_input(g, n, i)->nbytes);
        }
        for (uint32_t k = 0; k < n->n_outputs && !writes_over_input(g, plan, position, v); k++)
            sum += align256(n->outputs[k].nbytes);
        most = sum > most ? sum : most;
    }
    free(order);
    free(position);
    return most;
}

/* Every promise of swapper.h's contract that can be checked on the annotated graph. */
static void check_contract(const struct tide_graph *g, const struct tide_memory_plan *plan)
{
    const struct tide_memplan *mp = &plan->memplan;
    assert_int_equal(mp->n_order, g->n_nodes);
    assert_int_equal(plan->report.nodes, g->n_nodes);
    uint8_t *seen = calloc(g->n_nodes, 1);
    assert_non_null(seen);
    int32_t last_partition = 0;
    for (uint32_t p = 0; p < mp->n_order; p++) {
        uint32_t v = mp->order[p];
        const struct tide_node *n = &g->nodes[v];
        assert_false(seen[v]);
        seen[v] = 1;
        /* Topological over data and control inputs. */
        for (uint32_t i = 0; i < n->n_inputs; i++)
            assert_true(seen[n->inputs[i].node]);
        for (uint32_t i = 0; i < n->n_controls; i++)
            assert_true(seen[n->controls[i]]);
        /* Partitions set and never decreasing along the order. */
        assert_true(n->partition >= last_partition);
        assert_true((uint32_t)n->partition < plan->report.n_partitions || g->n_nodes == 0);
        last_partition = n->partition;
        /* Streams. */
        uint8_t want = TIDE_STREAM_COMPUTE;
        if (n->op == TIDE_OP_PLACEHOLDER || n->op == TIDE_OP_FETCH || n->op == TIDE_OP_SWAP_IN)
            want = TIDE_STREAM_H2D;
        if (n->op == TIDE_OP_SWAP_OUT || n->op == TIDE_OP_WRITE_BACK)
            want = TIDE_STREAM_D2H;
        assert_int_equal(n->stream, want);
        /* Homes: SwapOut copies on the host; the others but sources on the device. */
        for (uint32_t k = 0; k < n->n_outputs; k++) {
            if (n->op == TIDE_OP_SWAP_OUT)
                assert_int_equal(n->outputs[k].home, TIDE_HOME_HOST);
            else if (n->op != TIDE_OP_VARIABLE && n->op != TIDE_OP_CONST)
                assert_int_equal(n->outputs[k].home, TIDE_HOME_DEVICE);
        }
        /* Memory ops: inputs and subjects as the contract says. */
        const struct tide_node *in0 = n->n_inputs ? &g->nodes[n->inputs[0].node] : NULL;
        switch (n->op) {
        case TIDE_OP_FETCH:
            assert_true(in0->op == TIDE_OP_VARIABLE || in0->op == TIDE_OP_CONST);
            assert_int_equal(in0->outputs[0].home, TIDE_HOME_HOST);
            assert_int_equal(n->subject, n->inputs[0].node);
            break;
        case TIDE_OP_WRITE_BACK:
            assert_int_equal(in0->op, TIDE_OP_FETCH);
            assert_int_equal(n->subject, in0->subject);
            break;
        case TIDE_OP_SWAP_OUT:
            assert_int_equal(tide_graph_input(g, n, 0)->home, TIDE_HOME_DEVICE);
            assert_int_equal(n->subject, n->inputs[0].node);
            break;
        case TIDE_OP_SWAP_IN:
            assert_int_equal(in0->op, TIDE_OP_SWAP_OUT);
            assert_int_equal(n->subject, in0->subject);
            break;
        default:
            /* A kernel reads only device tensors. */
            for (uint32_t i = 0; i < n->n_inputs; i++)
                assert_int_equal(tide_graph_input(g, n, i)->home, TIDE_HOME_DEVICE);
            assert_int_equal(n->subject, TIDE_NO_NODE);
            break;
        }
    }
    free(seen);
    /* The report adds up. */
    const struct tide_plan_report *r = &plan->report;
    uint32_t nodes = 0;
    uint64_t in = 0, out = 0, fetch = 0, wb = 0, resident = 0, host = 0;
    for (uint32_t i = 0; i < r->n_partitions; i++) {
        nodes += r->partitions[i].nodes;
        in += r->partitions[i].swap_in_bytes;
        out += r->partitions[i].swap_out_bytes;
        fetch += r->partitions[i].fetch_bytes;
        wb += r->partitions[i].write_back_bytes;
        if (r->partitions[i].resident_bytes > resident)
            resident = r->partitions[i].resident_bytes;
    }
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        for (uint32_t k = 0; k < g->nodes[v].n_outputs; k++)
            host +=
                g->nodes[v].outputs[k].home == TIDE_HOME_HOST ? g->nodes[v].outputs[k].nbytes : 0;
    }
    assert_int_equal(nodes, g->n_nodes);
    assert_true(in == r->swap_in_bytes && out == r->swap_out_bytes);
    assert_true(fetch == r->fetch_bytes && wb == r->write_back_bytes);
    assert_true(host == r->host_bytes);
    assert_true(resident <= mp->peak_bytes);
    assert_true(r->predicted_peak_bytes == mp->peak_bytes);
    assert_true(r->min_budget_bytes <= mp->peak_bytes);
    assert_true(r->fits);
    if (r->budget_bytes)
        assert_true(mp->peak_bytes <= r->budget_bytes);
}

/* The most bytes memplan's plan holds at once, from its regions. */
static uint64_t most_live(const struct tide_memplan *mp)
{
    int64_t *delta = calloc((size_t)mp->n_order + 1, sizeof(*delta));
    assert_non_null(delta);
    for (uint32_t r = 0; r < mp->n_regions; r++) {
        uint32_t first = tide_memplan_own_first(&mp->regions[r]);
        if (first > mp->regions[r].last)
            continue;
        delta[first] += (int64_t)mp->regions[r].bytes;
        delta[mp->regions[r].last + 1] -= (int64_t)mp->regions[r].bytes;
    }
    int64_t live = 0, most = 0;
    for (uint32_t p = 0; p < mp->n_order; p++) {
        live += delta[p];
        most = live > most ? live : most;
    }
    free(delta);
    return (uint64_t)most;
}

/* ============================================================================
 * Structure
 * ========================================================================== */

static void expect_order(const struct tide_graph *g, const struct tide_memory_plan *plan,
                         const char *const *names, uint32_t n)
{
    assert_int_equal(plan->memplan.n_order, n);
    for (uint32_t i = 0; i < n; i++)
        assert_string_equal(name_at(g, plan, i), names[i]);
}

static void test_skip_chain_partition_1(void **state)
{
    (void)state;
    struct tide_graph *g = skip_chain();
    struct tide_memory_policy p = policy_of(TIDE_SWAP_ON, 1, 1, 1);
    struct tide_memory_plan plan;
    plan_ok(g, &p, NULL, &plan);

    /* r1's use by out (partition 10) is 8 partitions after r2's (2): swapped. Nothing else is. */
    static const char *const order[] = {"x",  "r1", "swapout/r1", "r2",          "r3", "r4", "r5",
                                        "r6", "r7", "r8",         "swapin/r1/1", "r9", "out"};
    expect_order(g, &plan, order, 13);
    uint32_t r1 = find(g, "r1"), so = find(g, "swapout/r1"), si = find(g, "swapin/r1/1");
    const struct tide_node *swap_out = &g->nodes[so], *swap_in = &g->nodes[si];
    assert_int_equal(swap_out->op, TIDE_OP_SWAP_OUT);
    assert_int_equal(swap_out->inputs[0].node, r1);
    assert_int_equal(swap_out->stream, TIDE_STREAM_D2H);
    assert_int_equal(swap_out->outputs[0].home, TIDE_HOME_HOST);
    assert_int_equal(swap_out->subject, r1);
    assert_int_equal(swap_out->partition, 1);
    assert_int_equal(swap_in->op, TIDE_OP_SWAP_IN);
    assert_int_equal(swap_in->inputs[0].node, so);
    assert_int_equal(swap_in->stream, TIDE_STREAM_H2D);
    assert_int_equal(swap_in->outputs[0].home, TIDE_HOME_DEVICE);
    assert_int_equal(swap_in->subject, r1);
    assert_int_equal(swap_in->partition, 9); /* prefetch 1 before out's partition 10 */
    /* Rewired: out reads the SwapIn, r2 still reads r1. */
    assert_int_equal(g->nodes[find(g, "out")].inputs[1].node, si);
    assert_int_equal(g->nodes[find(g, "out")].inputs[0].node, find(g, "r9"));
    assert_int_equal(g->nodes[find(g, "r2")].inputs[0].node, r1);
    assert_int_equal(g->nodes[find(g, "x")].stream, TIDE_STREAM_H2D);
    assert_int_equal(g->nodes[find(g, "r5")].stream, TIDE_STREAM_COMPUTE);
    /* r1's device copy dies at r2; the SwapIn's region starts at the SwapIn. */
    for (uint32_t i = 0; i < plan.memplan.n_regions; i++) {
        const struct tide_memplan_region *reg = &plan.memplan.regions[i];
        if (reg->node == r1 && reg->output == 0) {
            assert_int_equal(reg->first, 1);
            assert_int_equal(reg->last, 3);
        }
        if (reg->node == si) {
            assert_int_equal(reg->first, 10);
            assert_int_equal(reg->last, 12);
        }
        assert_int_not_equal(reg->node, so); /* the host copy is not in the arena */
    }
    /* The report. */
    const struct tide_plan_report *r = &plan.report;
    assert_int_equal(r->n_partitions, 11);
    assert_int_equal(r->swap_out_bytes, 1024);
    assert_int_equal(r->swap_in_bytes, 1024);
    assert_int_equal(r->partitions[1].swap_out_bytes, 1024);
    assert_int_equal(r->partitions[9].swap_in_bytes, 1024);
    assert_int_equal(r->partitions[1].nodes, 2);
    assert_int_equal(r->partitions[9].nodes, 2);
    assert_int_equal(r->host_bytes, 1024);
    assert_int_equal(r->chosen.swap, TIDE_SWAP_ON);
    assert_int_equal(r->chosen.swap_threshold, 1);
    assert_int_equal(r->chosen.prefetch_distance, 1);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    /* A long prefetch stops after the near group: the SwapIn goes before r3 (partition 3). */
    g = skip_chain();
    p = policy_of(TIDE_SWAP_ON, 1, 1, 20);
    plan_ok(g, &p, NULL, &plan);
    static const char *const early[] = {"x",  "r1", "swapout/r1", "r2", "swapin/r1/1", "r3", "r4",
                                        "r5", "r6", "r7",         "r8", "r9",          "out"};
    expect_order(g, &plan, early, 13);
    assert_int_equal(g->nodes[find(g, "swapin/r1/1")].partition, 3);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    /* Threshold 8: out is 8 partitions after r2, not more: nothing moves. Threshold 7: it does. */
    g = skip_chain();
    p = policy_of(TIDE_SWAP_ON, 1, 8, 1);
    plan_ok(g, &p, NULL, &plan);
    assert_int_equal(g->n_nodes, 11);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
    g = skip_chain();
    p = policy_of(TIDE_SWAP_ON, 1, 7, 1);
    plan_ok(g, &p, NULL, &plan);
    assert_int_equal(g->n_nodes, 13);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static void test_skip_chain_partition_2(void **state)
{
    (void)state;
    /* Partitions of 2: r1 in 0, r2 in 1, out in 5; the SwapIn goes to partition 4 (position 8). */
    struct tide_graph *g = skip_chain();
    struct tide_memory_policy p = policy_of(TIDE_SWAP_ON, 2, 1, 1);
    struct tide_memory_plan plan;
    plan_ok(g, &p, NULL, &plan);
    static const char *const order[] = {"x",  "r1", "swapout/r1",  "r2", "r3", "r4", "r5",
                                        "r6", "r7", "swapin/r1/1", "r8", "r9", "out"};
    expect_order(g, &plan, order, 13);
    assert_int_equal(g->nodes[find(g, "swapout/r1")].partition, 0);
    assert_int_equal(g->nodes[find(g, "swapin/r1/1")].partition, 4);
    assert_int_equal(plan.report.n_partitions, 6);
    assert_int_equal(plan.report.partitions[4].nodes, 3);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static void test_swap_off_inserts_nothing(void **state)
{
    (void)state;
    struct tide_memory_policy policies[3] = {policy_of(TIDE_SWAP_OFF, 1, 0, 0),
                                             policy_of(TIDE_SWAP_AUTO, 1, 0, 0),
                                             policy_of(TIDE_SWAP_AUTO, 64, 0, 0)};
    policies[2].vars_home = TIDE_VARS_HOME_AUTO;
    for (int i = 0; i < 3; i++) {
        struct tide_graph *g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_MOMENTUM);
        uint32_t n = g->n_nodes;
        struct tide_plan_env env = cpu_env();
        struct tide_memory_plan plan;
        plan_ok(g, &policies[i], &env, &plan);
        assert_int_equal(g->n_nodes, n);
        for (uint32_t v = 0; v < n; v++)
            assert_false(tide_op_info(g->nodes[v].op)->flags & TIDE_OP_F_MEMORY);
        assert_int_equal(plan.report.swap_in_bytes + plan.report.swap_out_bytes +
                             plan.report.fetch_bytes + plan.report.write_back_bytes,
                         0);
        assert_int_equal(plan.report.chosen.swap, TIDE_SWAP_OFF);
        assert_int_equal(plan.report.chosen.vars_home, TIDE_VARS_HOME_DEVICE);
        check_contract(g, &plan);
        tide_memory_plan_release(&plan);
        tide_graph_free(g);
    }
}

static void test_pinned_is_not_swapped(void **state)
{
    (void)state;
    struct tide_graph *g = skip_chain();
    uint8_t pinned[11] = {0};
    pinned[find(g, "r1")] = 1;
    struct tide_plan_env env = {.pinned = pinned};
    struct tide_memory_policy p = policy_of(TIDE_SWAP_ON, 1, 0, 0);
    struct tide_memory_plan plan;
    plan_ok(g, &p, &env, &plan);
    /* Threshold 0 swaps every tensor with a use in a later partition; r1 is pinned. */
    assert_int_equal(tide_graph_find(g, "swapout/r1"), TIDE_NO_NODE);
    assert_int_not_equal(tide_graph_find(g, "swapout/r2"), TIDE_NO_NODE);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

/* ============================================================================
 * Policies
 * ========================================================================== */

static void test_thresholds_monotone(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    for (int host = 0; host < 2; host++) {
        uint64_t last_swapped = UINT64_MAX, last_fetched = UINT64_MAX;
        for (uint32_t t = 0; t <= 64; t = t ? t * 2 : 1) {
            struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_SGD);
            struct tide_memory_policy p = policy_of(TIDE_SWAP_ON, 16, t, 1);
            p.vars_home = host ? TIDE_VARS_HOME_HOST : TIDE_VARS_HOME_DEVICE;
            struct tide_memory_plan plan;
            plan_ok(g, &p, &env, &plan);
            uint64_t swapped = plan.report.swap_in_bytes + plan.report.swap_out_bytes;
            uint64_t fetched = plan.report.fetch_bytes + plan.report.write_back_bytes;
            assert_true(swapped <= last_swapped);
            assert_true(fetched <= last_fetched);
            if (t == 0)
                assert_true(swapped > 0);
            if (host)
                assert_true(fetched > 0);
            last_swapped = swapped;
            last_fetched = fetched;
            check_contract(g, &plan);
            tide_memory_plan_release(&plan);
            tide_graph_free(g);
        }
    }
}

static void test_swap_lowers_long_skip_peak(void **state)
{
    (void)state;
    struct tide_memory_plan plan;
    struct tide_graph *g = long_skip(4096); /* 16 KiB tensors */
    struct tide_memory_policy p = policy_of(TIDE_SWAP_OFF, 1, 1, 1);
    plan_ok(g, &p, NULL, &plan);
    uint64_t off = plan.memplan.peak_bytes;
    assert_int_equal(most_live(&plan.memplan), 3 * 16384); /* a, r(i-1), r(i) */
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    g = long_skip(4096);
    p = policy_of(TIDE_SWAP_ON, 1, 1, 1);
    plan_ok(g, &p, NULL, &plan);
    uint64_t on = plan.memplan.peak_bytes;
    assert_int_equal(most_live(&plan.memplan), 2 * 16384 + 256); /* two big ones and s */
    assert_true(on < off);
    assert_int_not_equal(tide_graph_find(g, "swapin/a/1"), TIDE_NO_NODE);
    assert_int_equal(plan.report.swap_out_bytes, 16384);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    /* Autotune with a budget between the two finds the swap. */
    g = long_skip(4096);
    p = tide_memory_policy_default();
    p.partition_size = 1;
    p.budget_bytes = 40000;
    plan_ok(g, &p, NULL, &plan);
    assert_true(plan.report.fits);
    assert_true(plan.memplan.peak_bytes <= 40000);
    assert_int_equal(plan.report.chosen.swap, TIDE_SWAP_ON);
    assert_int_equal(plan.report.swap_out_bytes, 16384);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static void test_autotune_keeps_nothing_moved(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_ADAM);
    struct tide_memory_policy p = tide_memory_policy_default();
    struct tide_memory_plan plan;
    plan_ok(g, &p, &env, &plan); /* budget 0: the resident plan */
    uint64_t resident = plan.memplan.peak_bytes;
    uint32_t n = g->n_nodes;
    assert_true(plan.report.fits);
    assert_int_equal(plan.report.chosen.swap, TIDE_SWAP_OFF);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_ADAM);
    p.budget_bytes = resident;
    plan_ok(g, &p, &env, &plan);
    assert_true(plan.report.fits);
    assert_int_equal(g->n_nodes, n);
    assert_int_equal(plan.memplan.peak_bytes, resident);
    assert_int_equal(plan.report.chosen.swap, TIDE_SWAP_OFF);
    assert_int_equal(plan.report.chosen.vars_home, TIDE_VARS_HOME_DEVICE);
    assert_int_equal(plan.report.trials, 1);
    assert_true(plan.report.plan_ms >= 0);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static void test_vars_on_host(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_MOMENTUM);
    uint32_t n = g->n_nodes, variables = count_op(g, TIDE_OP_VARIABLE);
    uint32_t updates = count_op(g, TIDE_OP_APPLY_MOMENTUM);
    struct tide_memory_policy p = policy_of(TIDE_SWAP_OFF, 64, 1, 1);
    p.vars_home = TIDE_VARS_HOME_HOST;
    struct tide_memory_plan plan;
    plan_ok(g, &p, &env, &plan);
    uint64_t var_bytes = 0;
    for (uint32_t v = 0; v < n; v++) {
        const struct tide_node *node = &g->nodes[v];
        if (node->op == TIDE_OP_VARIABLE) {
            assert_int_equal(node->outputs[0].home, TIDE_HOME_HOST);
            var_bytes += node->outputs[0].nbytes;
        }
        /* Nobody but a Fetch reads a Variable any more. */
        for (uint32_t i = 0; i < node->n_inputs; i++)
            assert_int_not_equal(g->nodes[node->inputs[i].node].op, TIDE_OP_VARIABLE);
    }
    /* Every Variable (weights and momentum accumulators) is updated, so written back. */
    assert_int_equal(variables, 2 * updates);
    assert_true(count_op(g, TIDE_OP_FETCH) >= variables);
    assert_int_equal(count_op(g, TIDE_OP_WRITE_BACK), variables);
    assert_true(plan.report.write_back_bytes == var_bytes);
    assert_true(plan.report.fetch_bytes >= var_bytes);
    assert_true(plan.report.host_bytes >= var_bytes);
    assert_int_equal(plan.report.chosen.vars_home, TIDE_VARS_HOME_HOST);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

/* ============================================================================
 * Budgets
 * ========================================================================== */

static void test_admission_names_the_node(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    uint32_t x = placeholder(g, "x", 256, 256); /* 256 KiB */
    node(g, TIDE_OP_SOFTMAX, "big", x, TIDE_NO_NODE);
    infer(g);
    struct tide_memory_policy p = tide_memory_policy_default();
    p.budget_bytes = 300 << 10;
    struct tide_memory_plan plan;
    struct tide_error err = {0};
    assert_int_equal(tide_plan_memory(g, &p, NULL, &plan, &err), TIDE_DOES_NOT_FIT);
    assert_non_null(strstr(err.message, "node \"big\" (Softmax) needs 0.5 MiB by itself"));
    assert_non_null(strstr(err.message, "inputs 262144 + outputs 262144 + workspace 0"));
    assert_non_null(strstr(err.message, "budget is 307200 bytes"));
    assert_false(plan.report.fits);
    assert_int_equal(plan.report.min_budget_bytes, 2 * 262144);
    assert_int_equal(plan.report.min_budget_node, find(g, "big"));
    assert_int_equal(plan.report.budget_bytes, 307200);
    assert_non_null(strstr(plan.report.message, "needs 0.5 MiB"));
    /* The graph is left as it was, and there is no plan to run. */
    assert_int_equal(g->n_nodes, 2);
    assert_int_equal(plan.memplan.n_order, 0);
    tide_memory_plan_release(&plan);
    tide_memory_plan_release(NULL);
    tide_graph_free(g);
}

/* Cancels after `left` polls. */
static bool cancel_after(void *context)
{
    int *left = context;
    return (*left)-- <= 0;
}

/*
 * The search polls the cancellation hook between its steps: cancelled at
 * once, or after a few steps, the plan stops with TIDE_CANCELLED; a hook
 * that never fires changes nothing. (A daemon abandons a big compile
 * within one step of the search, issue #14.)
 */
static void test_search_cancelled(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    for (int after = 0; after < 4; after++) {
        struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
        struct tide_memory_policy p = tide_memory_policy_default();
        p.budget_bytes = largest_working_set(g, NULL) * 2;
        int left = after;
        p.cancelled = cancel_after;
        p.cancel_context = &left;
        struct tide_memory_plan plan;
        struct tide_error err = {0};
        assert_int_equal(tide_plan_memory(g, &p, &env, &plan, &err), TIDE_CANCELLED);
        assert_string_equal(err.message, "swapper: the plan's search was cancelled");
        assert_true(left < 0); /* it was polled, and stopped at the first true */
        tide_memory_plan_release(&plan);
        tide_graph_free(g);
    }
    struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
    struct tide_memory_policy p = tide_memory_policy_default();
    p.budget_bytes = largest_working_set(g, NULL) * 2;
    int left = 1 << 30;
    p.cancelled = cancel_after;
    p.cancel_context = &left;
    struct tide_memory_plan plan;
    struct tide_error err = {0};
    assert_int_equal(tide_plan_memory(g, &p, &env, &plan, &err), TIDE_OK);
    assert_true(left < (1 << 30));
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

static void test_does_not_fit_reports_min_budget(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
    uint64_t working = largest_working_set(g, NULL);
    struct tide_memory_policy p = tide_memory_policy_default();
    p.partition_size = 64; /* the automatic size would reach the floor */
    p.budget_bytes = working; /* every kernel fits alone, the plan cannot */
    struct tide_memory_plan plan;
    struct tide_error err = {0};
    assert_int_equal(tide_plan_memory(g, &p, &env, &plan, &err), TIDE_DOES_NOT_FIT);
    uint64_t min = plan.report.min_budget_bytes;
    assert_true(min > working);
    char want[64];
    snprintf(want, sizeof(want), "plan needs %llu bytes", (unsigned long long)min);
    assert_non_null(strstr(err.message, want));
    assert_non_null(strstr(err.message, "at best (node \""));
    snprintf(want, sizeof(want), "budget is %llu bytes", (unsigned long long)working);
    assert_non_null(strstr(err.message, want));
    assert_false(plan.report.fits);
    assert_true(plan.report.min_budget_node < g->n_nodes);
    assert_true(plan.report.n_partitions > 0 && plan.report.partitions);
    assert_true(plan.report.trials > 1);
    assert_int_equal(plan.memplan.n_order, 0);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    /* The budget it names is enough. */
    g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
    p.budget_bytes = min;
    plan_ok(g, &p, &env, &plan);
    assert_true(plan.memplan.peak_bytes <= min);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

/*
 * The smallest budget a report names is exact: a plan at that budget fits,
 * one byte less does not. For each model, with the partition size fixed and
 * automatic; the automatic one is never larger, and no budget is below the
 * floor (the largest kernel's working set), which the report names.
 */
static void test_min_budget_is_exact(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    static const enum model models[] = {MODEL_MLP, MODEL_CNN, MODEL_RESNET};
    for (size_t m = 0; m < sizeof(models) / sizeof(models[0]); m++) {
        uint64_t fixed_min = 0;
        for (int automatic = 0; automatic < 2; automatic++) {
            struct tide_memory_policy p = tide_memory_policy_default();
            p.partition_size = automatic ? 0 : 64;
            p.budget_bytes = 1024; /* below every kernel: the admission path */
            struct tide_graph *g = model_graph(models[m], TIDE_OPTIMIZER_MOMENTUM);
            uint64_t floor = largest_working_set(g, NULL);
            struct tide_memory_plan plan;
            struct tide_error err = {0};
            assert_int_equal(tide_plan_memory(g, &p, &env, &plan, &err), TIDE_DOES_NOT_FIT);
            uint64_t min = plan.report.min_budget_bytes;
            assert_int_equal(plan.report.floor_bytes, floor);
            assert_true(plan.report.floor_node < g->n_nodes);
            assert_true(min >= floor);
            if (automatic)
                assert_true(min <= fixed_min);
            else
                assert_int_equal(plan.report.chosen.partition_size, 64);
            fixed_min = min;
            tide_memory_plan_release(&plan);
            tide_graph_free(g);

            /* Between the floor and the smallest budget: the search finds the same number. */
            g = model_graph(models[m], TIDE_OPTIMIZER_MOMENTUM);
            p.budget_bytes = min - 1;
            enum tide_status st = tide_plan_memory(g, &p, &env, &plan, &err);
            assert_int_equal(st, TIDE_DOES_NOT_FIT);
            assert_int_equal(plan.report.min_budget_bytes, min);
            tide_memory_plan_release(&plan);
            tide_graph_free(g);

            g = model_graph(models[m], TIDE_OPTIMIZER_MOMENTUM);
            p.budget_bytes = min;
            plan_ok(g, &p, &env, &plan);
            assert_true(plan.report.fits);
            assert_true(plan.memplan.peak_bytes <= min);
            assert_int_equal(plan.report.floor_bytes, floor);
            check_contract(g, &plan);
            tide_memory_plan_release(&plan);
            tide_graph_free(g);
        }
    }
}

/* A training graph planned under `fraction` of its resident peak. */
static void shrink(enum model model, enum tide_optimizer optimizer, uint32_t partition_size,
                   double fraction)
{
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(model, optimizer);
    struct tide_memory_policy p = tide_memory_policy_default();
    p.partition_size = partition_size;
    struct tide_memory_plan plan;
    plan_ok(g, &p, &env, &plan);
    uint64_t resident = plan.memplan.peak_bytes;
    tide_memory_plan_release(&plan);
    tide_graph_free(g);

    g = model_graph(model, optimizer);
    uint64_t budget = (uint64_t)((double)resident * fraction);
    p.budget_bytes = budget;
    plan_ok(g, &p, &env, &plan);
    assert_true(plan.report.fits);
    assert_true(plan.memplan.peak_bytes <= budget);
    assert_true(largest_working_set(g, &plan.memplan) <= budget);
    assert_true(plan.report.swap_in_bytes + plan.report.fetch_bytes > 0);
    assert_true(plan.report.trials > 1);
    check_contract(g, &plan);
    tide_memory_plan_release(&plan);
    tide_graph_free(g);
}

/* The '4x' case: a ResNet trains in a quarter of its resident peak. */
static void test_quarter_budget_resnet(void **state)
{
    (void)state;
    shrink(MODEL_RESNET, TIDE_OPTIMIZER_ADAM, 16, 0.25);
    shrink(MODEL_RESNET, TIDE_OPTIMIZER_SGD, 16, 0.25);
}

/*
 * A shallow CNN cannot shrink 4x: at batch 64 one ReluGrad alone needs 9.2
 * of its 11.0 MiB (13.7 before early updates). It still runs in 85 % of it,
 * with partitions of 4.
 */
static void test_most_of_budget_cnn(void **state)
{
    (void)state;
    shrink(MODEL_CNN, TIDE_OPTIMIZER_MOMENTUM, 4, 0.85);
}

static void test_deterministic(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g[2];
    struct tide_memory_plan plan[2];
    struct tide_memory_policy p = tide_memory_policy_default();
    p.partition_size = 16;
    for (int i = 0; i < 2; i++) {
        g[i] = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
        if (i == 0) {
            struct tide_memory_policy resident = p;
            struct tide_graph *r = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
            plan_ok(r, &resident, &env, &plan[0]);
            p.budget_bytes = plan[0].memplan.peak_bytes / 4;
            tide_memory_plan_release(&plan[0]);
            tide_graph_free(r);
        }
        plan_ok(g[i], &p, &env, &plan[i]);
    }
    assert_int_equal(g[0]->n_nodes, g[1]->n_nodes);
    assert_true(g[0]->n_nodes > 0);
    assert_memory_equal(plan[0].memplan.order, plan[1].memplan.order,
                        plan[0].memplan.n_order * sizeof(uint32_t));
    assert_true(plan[0].memplan.peak_bytes == plan[1].memplan.peak_bytes);
    for (uint32_t v = 0; v < g[0]->n_nodes; v++) {
        const struct tide_node *a = &g[0]->nodes[v], *b = &g[1]->nodes[v];
        assert_string_equal(a->name, b->name);
        assert_int_equal(a->op, b->op);
        assert_int_equal(a->partition, b->partition);
        assert_int_equal(a->stream, b->stream);
        assert_int_equal(a->n_inputs, b->n_inputs);
        assert_memory_equal(a->inputs, b->inputs, a->n_inputs * sizeof(*a->inputs));
        assert_int_equal(a->n_controls, b->n_controls);
        for (uint32_t k = 0; k < a->n_outputs; k++) {
            assert_int_equal(a->outputs[k].home, b->outputs[k].home);
            assert_true(a->outputs[k].offset == b->outputs[k].offset);
        }
    }
    assert_true(plan[0].report.swap_in_bytes == plan[1].report.swap_in_bytes);
    assert_true(
        memcmp(&plan[0].report.chosen, &plan[1].report.chosen, sizeof(plan[0].report.chosen)) == 0);
    for (int i = 0; i < 2; i++) {
        check_contract(g[i], &plan[i]);
        tide_memory_plan_release(&plan[i]);
        tide_graph_free(g[i]);
    }
}

static void test_policy_refusals(void **state)
{
    (void)state;
    struct tide_graph *g = skip_chain();
    struct tide_memory_policy p = tide_memory_policy_default();
    struct tide_memory_plan plan;
    struct tide_error err = {0};
    p.swap = (enum tide_swap_mode)7;
    assert_int_equal(tide_plan_memory(g, &p, NULL, &plan, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "swap is 7"));
    p = tide_memory_policy_default();
    p.vars_home = (enum tide_vars_home) - 1;
    assert_int_equal(tide_plan_memory(g, &p, NULL, &plan, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "vars_home is -1"));
    assert_int_equal(tide_plan_memory(NULL, &p, NULL, &plan, &err), TIDE_INVALID);
    assert_int_equal(g->n_nodes, 11);
    tide_graph_free(g);
}

/* ============================================================================
 * The simulation behind autotune
 * ========================================================================== */

static void test_estimate_is_exact(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
    uint8_t *pinned = calloc(g->n_nodes, 1);
    pinned[find(g, TIDE_MODEL_LOSS)] = 1;
    env.pinned = pinned;
    uint32_t sizes[3] = {1, 7, 64};
    for (int s = 0; s < 3; s++) {
        struct tide__planner pl;
        struct tide_error err = {0};
        assert_int_equal(tide__planner_init(&pl, g, sizes[s], &env, &err), TIDE_OK);
        for (int host = 0; host < 2; host++) {
            for (uint32_t t = 0; t <= 32; t = t ? t * 4 : 1) {
                for (uint32_t pf = 0; pf <= 2; pf++) {
                    struct tide__choice c = {host,  t, t == 32 ? TIDE__NEVER : t, pf, false,
                                             false, 0};
                    struct tide__estimate e;
                    tide__estimate(&pl, &c, &e);
                    struct tide_graph *clone = tide_graph_clone(g);
                    struct tide_memplan mp;
                    struct tide__moved moved;
                    if (tide__apply(&pl, clone, &c, &mp, &moved, &err) != TIDE_OK)
                        fail_msg("%s", err.message);
                    assert_true(e.live_bytes == most_live(&mp));
                    assert_true(e.live_bytes <= mp.peak_bytes);
                    assert_memory_equal(&e.moved, &moved, sizeof(moved));
                    tide_memplan_release(&mp);
                    tide_graph_free(clone);
                }
            }
        }
        tide__planner_release(&pl);
    }
    free(pinned);
    tide_graph_free(g);
}

/* ============================================================================
 * Memory actions: the table and the driver
 * ========================================================================== */

/* Every entry is complete, names are unique, and KEEP is the last, claiming anything. */
static void test_action_table(void **state)
{
    (void)state;
    assert_int_equal(TIDE__ACTION_COUNT, 3);
    assert_ptr_equal(tide__memory_actions[TIDE__ACTION_KEEP], &tide__action_keep);
    assert_ptr_equal(tide__memory_actions[TIDE__ACTION_SWAP], &tide__action_swap);
    assert_ptr_equal(tide__memory_actions[TIDE__ACTION_RECOMPUTE], &tide__action_recompute);
    assert_string_equal(tide__action_keep.name, "keep");
    assert_string_equal(tide__action_swap.name, "swap");
    assert_string_equal(tide__action_recompute.name, "recompute");
    /* RECOMPUTE asks before SWAP, which would claim every tensor it wants. */
    assert_true(TIDE__ACTION_RECOMPUTE < TIDE__ACTION_SWAP);
    for (int a = 0; a < TIDE__ACTION_COUNT; a++) {
        const struct tide__memory_action *action = tide__memory_actions[a];
        assert_non_null(action);
        assert_non_null(action->claims);
        assert_non_null(action->estimate);
        assert_true(action->name && action->name[0]);
        for (int b = 0; b < a; b++)
            assert_string_not_equal(tide__memory_actions[b]->name, action->name);
    }
    assert_int_equal(TIDE__ACTION_KEEP, TIDE__ACTION_COUNT - 1);
    assert_null(tide__action_keep.rewrite);
    assert_non_null(tide__action_swap.rewrite);
    assert_non_null(tide__action_recompute.rewrite);
}

/*
 * Which action takes each feature map, and what the rewrite does with it:
 * with no far use (threshold never) everything is kept; with threshold 0
 * SWAP takes exactly the feature maps with a far group, the rewrite inserts
 * one SwapOut per such tensor and one SwapIn per far group, and the costs
 * land on SWAP's line, never on KEEP's.
 */
static void test_actions_pick_and_rewrite(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_MOMENTUM);
    struct tide__planner pl;
    struct tide_error err = {0};
    assert_int_equal(tide__planner_init(&pl, g, 4, &env, &err), TIDE_OK);
    uint32_t most_uses = 0;
    for (uint32_t t = 0; t < pl.part.n_tensors; t++)
        most_uses = pl.part.tensors[t].n_uses > most_uses ? pl.part.tensors[t].n_uses : most_uses;
    struct tide_use_group *groups = calloc((size_t)most_uses + 1, sizeof(*groups));
    assert_non_null(groups);

    struct tide__choice never = {false, 1, TIDE__NEVER, 1, false, false, 0};
    struct tide__choice all = {false, 1, 0, 0, false, false, 0};
    uint32_t features = 0, swapped = 0, far_groups = 0;
    uint64_t swapped_bytes = 0, far_bytes = 0;
    for (uint32_t t = 0; t < pl.part.n_tensors; t++) {
        if (pl.kinds[t] != TIDE__TENSOR_FEATURE)
            continue;
        features++;
        struct tide__action_tensor at;
        tide__action_tensor_init(&at, &pl, &never, t, groups);
        assert_int_equal(at.n_groups, 1);
        assert_int_equal(tide__action_pick(&at), TIDE__ACTION_KEEP);
        tide__action_tensor_init(&at, &pl, &all, t, groups);
        enum tide__action_id a = tide__action_pick(&at);
        assert_int_equal(a, at.n_groups >= 2 ? TIDE__ACTION_SWAP : TIDE__ACTION_KEEP);
        if (a == TIDE__ACTION_SWAP) {
            swapped++;
            swapped_bytes += at.bytes;
            far_groups += at.n_groups - 1;
            far_bytes += (uint64_t)(at.n_groups - 1) * at.bytes;
        }
    }
    assert_true(features > 0);
    assert_true(swapped > 0 && swapped < features);

    struct tide_graph *clone = tide_graph_clone(g);
    struct tide_memplan mp;
    struct tide__moved moved;
    if (tide__apply(&pl, clone, &all, &mp, &moved, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    uint32_t swap_outs = 0, swap_ins = 0;
    for (uint32_t v = pl.n_original; v < clone->n_nodes; v++) {
        swap_outs += clone->nodes[v].op == TIDE_OP_SWAP_OUT;
        swap_ins += clone->nodes[v].op == TIDE_OP_SWAP_IN;
    }
    assert_int_equal(swap_outs, swapped);
    assert_int_equal(swap_ins, far_groups);
    assert_true(moved.actions[TIDE__ACTION_SWAP].to_host == swapped_bytes);
    assert_true(moved.actions[TIDE__ACTION_SWAP].to_device == far_bytes);
    assert_true(moved.actions[TIDE__ACTION_SWAP].remade == 0);
    struct tide__action_cost zero = {0};
    assert_memory_equal(&moved.actions[TIDE__ACTION_KEEP], &zero, sizeof(zero));
    tide_memplan_release(&mp);
    tide_graph_free(clone);

    /* Nothing far: nothing inserted by any action, nothing copied by any. */
    clone = tide_graph_clone(g);
    if (tide__apply(&pl, clone, &never, &mp, &moved, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    for (uint32_t v = pl.n_original; v < clone->n_nodes; v++)
        assert_true(clone->nodes[v].op != TIDE_OP_SWAP_OUT &&
                    clone->nodes[v].op != TIDE_OP_SWAP_IN);
    for (int a = 0; a < TIDE__ACTION_COUNT; a++)
        assert_memory_equal(&moved.actions[a], &zero, sizeof(zero));
    tide_memplan_release(&mp);
    tide_graph_free(clone);

    free(groups);
    tide__planner_release(&pl);
    tide_graph_free(g);
}

/* An action sees its producer's inputs' lives: input i's tensor, NULL past the last input. */
static void test_action_input_life(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_SGD);
    struct tide__planner pl;
    struct tide_error err = {0};
    assert_int_equal(tide__planner_init(&pl, g, 4, &env, &err), TIDE_OK);
    struct tide__choice c = {false, 1, 1, 1, false, false, 0};
    uint32_t checked = 0;
    for (uint32_t t = 0; t < pl.part.n_tensors; t++) {
        if (pl.kinds[t] != TIDE__TENSOR_FEATURE)
            continue;
        struct tide__action_tensor at;
        tide__action_tensor_init(&at, &pl, &c, t, NULL);
        assert_int_equal(at.n_groups, 1);
        const struct tide_node *producer = &g->nodes[at.life->tensor.node];
        assert_int_equal(at.made, pl.part.position[at.life->tensor.node]);
        for (uint32_t i = 0; i < producer->n_inputs; i++) {
            const struct tide_tensor_life *in = tide__action_input_life(&at, i);
            assert_non_null(in);
            assert_int_equal(in->tensor.node, producer->inputs[i].node);
            assert_int_equal(in->tensor.output, producer->inputs[i].output);
            checked++;
        }
        assert_null(tide__action_input_life(&at, producer->n_inputs));
    }
    assert_true(checked > 0);
    tide__planner_release(&pl);
    tide_graph_free(g);
}

/* ============================================================================
 * End to end
 * ========================================================================== */

#define STEPS 2

/* Trains the ResNet for STEPS steps under policy (NULL: resident); returns every Variable's bytes.
 */
static uint8_t *train_session(const uint8_t *bytes, size_t len,
                              const struct tide_memory_policy *policy, uint64_t *total,
                              uint64_t *peak)
{
    static const struct tide_train_options train = {
        .loss = TIDE_MODEL_LOSS, .optimizer = TIDE_OPTIMIZER_ADAM, .learning_rate = 0.001f};
    struct tide_session_options o = tide_session_options_default();
    o.train = &train;
    o.seed = 11;
    o.poison = true;
    o.memory = policy;
    o.budget_bytes = policy ? policy->budget_bytes : 0;
    struct tide_session *s;
    struct tide_error err = {0};
    if (tide_session_new(bytes, len, &o, &s, &err) != TIDE_OK)
        fail_msg("session: %s", err.message);
    float images[4 * 3 * 16 * 16];
    int32_t labels[4];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < STEPS; step++) {
        for (size_t i = 0; i < sizeof(images) / sizeof(images[0]); i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            images[i] = (float)(x >> 40) / (float)(1 << 24);
        }
        for (int i = 0; i < 4; i++)
            labels[i] = (int32_t)(x >> (8 * i) & 7);
        struct tide_step_stats stats;
        if (tide_session_feed(s, TIDE_MODEL_IMAGES, images, sizeof(images), &err) != TIDE_OK ||
            tide_session_feed(s, TIDE_MODEL_LABELS, labels, sizeof(labels), &err) != TIDE_OK ||
            tide_session_step(s, &stats, &err) != TIDE_OK)
            fail_msg("step: %s", err.message);
        /* The arena's high-water mark is exactly the plan's prediction. */
        assert_true(stats.high_water_bytes == tide_session_memplan(s)->peak_bytes);
    }
    const struct tide_graph *g = tide_session_graph(s);
    *total = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        *total += g->nodes[v].op == TIDE_OP_VARIABLE ? g->nodes[v].outputs[0].nbytes : 0;
    uint8_t *data = malloc(*total + 1);
    uint64_t at = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op != TIDE_OP_VARIABLE)
            continue;
        uint64_t n = g->nodes[v].outputs[0].nbytes;
        if (tide_session_fetch(s, g->nodes[v].name, data + at, n, &err) != TIDE_OK)
            fail_msg("fetch: %s", err.message);
        at += n;
    }
    *peak = tide_session_memplan(s)->peak_bytes;
    tide_session_free(s);
    return data;
}

static void test_session_end_to_end(void **state)
{
    (void)state;
    tide_builder *b = tide_builder_new();
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (tide_model_resnet(b, 4, 3, 16, 10, 2, 4).id < 0 ||
        tide_builder_serialize(b, &bytes, &len) != 0)
        fail_msg("model: %s", tide_builder_error(b));
    tide_builder_free(b);
    uint64_t total, resident;
    uint8_t *want = train_session(bytes, len, NULL, &total, &resident);

    /* Autotune under a quarter of the resident peak, and the most aggressive plan. */
    struct tide_memory_policy policies[2] = {tide_memory_policy_default(),
                                             policy_of(TIDE_SWAP_ON, 1, 0, 0)};
    policies[0].partition_size = 16;
    policies[0].budget_bytes = resident / 4;
    policies[1].vars_home = TIDE_VARS_HOME_HOST;
    for (int i = 0; i < 2; i++) {
        uint64_t got_total, peak;
        uint8_t *got = train_session(bytes, len, &policies[i], &got_total, &peak);
        assert_true(got_total == total);
        assert_true(peak < resident / (i == 0 ? 4 : 8));
        assert_memory_equal(got, want, total);
        free(got);
    }
    free(want);
    free(bytes);
}

/* ============================================================================
 * RECOMPUTE
 * ========================================================================== */

/*
 * Aligned bytes of the outputs of recompute copies that only other copies
 * read, or that nothing reads: a chain's links, and the output a MaxPool2D
 * copy makes beside the one it was made for, which the simulation counts at
 * once at their key although each lives only until the next link or copy.
 */
static uint64_t chain_bytes(const struct tide__planner *pl, const struct tide_graph *g)
{
    uint64_t sum = 0;
    for (uint32_t v = pl->n_original; v < g->n_nodes; v++) {
        if (tide_op_info(g->nodes[v].op)->flags & TIDE_OP_F_MEMORY)
            continue;
        bool link = false, original_reader = false;
        for (uint32_t u = 0; u < g->n_nodes; u++) {
            for (uint32_t i = 0; i < g->nodes[u].n_inputs; i++) {
                if (g->nodes[u].inputs[i].node == v)
                    *(u < pl->n_original ? &original_reader : &link) = true;
            }
        }
        for (uint32_t k = 0; k < g->nodes[v].n_outputs; k++) {
            bool read = false;
            for (uint32_t u = 0; u < g->n_nodes && !read; u++) {
                for (uint32_t i = 0; i < g->nodes[u].n_inputs; i++)
                    read |= g->nodes[u].inputs[i].node == v && g->nodes[u].inputs[i].output == k;
            }
            if ((link && !original_reader) || !read)
                sum += tide__align(pl, g->nodes[v].outputs[k].nbytes);
        }
    }
    return sum;
}

/*
 * The simulation with RECOMPUTE on (and with swapping off, as
 * checkpoint-sqrt has it), on the CNN and the ResNet at three partition
 * sizes: the same costs as the rewrite, and the same live bytes as
 * memplan's plan — exactly where no copy runs in a chain, else at most the
 * chain links' bytes more (estimate.c); something is recomputed, in chains
 * too.
 */
static void test_recompute_estimate_is_exact(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    static const enum model models[] = {MODEL_CNN, MODEL_RESNET};
    for (int m = 0; m < 2; m++) {
        struct tide_graph *g = model_graph(models[m], TIDE_OPTIMIZER_MOMENTUM);
        uint8_t *pinned = calloc(g->n_nodes, 1);
        pinned[find(g, TIDE_MODEL_LOSS)] = 1;
        env.pinned = pinned;
        uint64_t remade = 0, chains = 0;
        static const uint32_t sizes[3] = {1, 7, 64};
        for (int s = 0; s < 3; s++) {
            struct tide__planner pl;
            struct tide_error err = {0};
            assert_int_equal(tide__planner_init(&pl, g, sizes[s], &env, &err), TIDE_OK);
            for (int host = 0; host < 2; host++) {
                for (uint32_t t = 0; t <= 4; t = t ? t * 4 : 1) {
                    for (uint32_t pf = 0; pf <= 1; pf++) {
                        for (int no_swap = 0; no_swap < 2; no_swap++) {
                            struct tide__choice c = {host, t, t, pf, true, no_swap, 0};
                            struct tide__estimate e;
                            tide__estimate(&pl, &c, &e);
                            struct tide_graph *clone = tide_graph_clone(g);
                            struct tide_memplan mp;
                            struct tide__moved moved;
                            if (tide__apply(&pl, clone, &c, &mp, &moved, &err) != TIDE_OK)
                                fail_msg("%s", err.message);
                            uint64_t live = most_live(&mp), slack = chain_bytes(&pl, clone);
                            assert_true(live <= e.live_bytes && e.live_bytes <= live + slack);
                            assert_true(slack > 0 || e.live_bytes <= mp.peak_bytes);
                            assert_memory_equal(&e.moved, &moved, sizeof(moved));
                            remade += moved.actions[TIDE__ACTION_RECOMPUTE].remade;
                            chains += slack > 0;
                            if (no_swap)
                                assert_int_equal(moved.actions[TIDE__ACTION_SWAP].to_host, 0);
                            tide_memplan_release(&mp);
                            tide_graph_free(clone);
                        }
                    }
                }
            }
            tide__planner_release(&pl);
        }
        assert_true(remade > 0);
        assert_true(models[m] == MODEL_CNN || chains > 0);
        free(pinned);
        tide_graph_free(g);
    }
}

/*
 * What the rewrite does with a tensor RECOMPUTE takes: no SwapOut of it;
 * every far use reads a copy of its producer (the same op, or DropoutGrad
 * for a Dropout, with node->subject the producer) that reads no input the
 * order has not made yet and runs on the compute stream at the start of the
 * partition where SWAP would load it (prefetch partitions before its
 * group's first use at most), after its chain's copies, if any, in the same
 * partition; and the original is read by nothing after its production group.
 * Where copies cost nothing, RECOMPUTE takes nothing.
 */
static void test_recompute_rewrite(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
    struct tide__planner pl;
    struct tide_error err = {0};
    assert_int_equal(tide__planner_init(&pl, g, 4, &env, &err), TIDE_OK);
    struct tide_use_group *groups = calloc((size_t)g->n_nodes + 1, sizeof(*groups));
    assert_non_null(groups);
    struct tide__choice c = {false, 0, 0, 1, true, false, 0};
    uint8_t *taken = calloc(pl.part.n_tensors + 1, 1);
    uint32_t n_taken = 0, n_copies = 0;
    for (uint32_t t = 0; t < pl.part.n_tensors; t++) {
        if (pl.kinds[t] != TIDE__TENSOR_FEATURE)
            continue;
        struct tide__action_tensor at;
        tide__action_tensor_init(&at, &pl, &c, t, groups);
        taken[t] = tide__action_pick(&at) == TIDE__ACTION_RECOMPUTE;
        if (taken[t]) {
            n_taken++;
            n_copies += at.n_groups - 1;
            assert_true(tide_op_info(g->nodes[at.life->tensor.node].op)->flags & TIDE_OP_F_CHEAP);
        }
    }
    assert_true(n_taken > 0);

    struct tide_graph *clone = tide_graph_clone(g);
    struct tide_memplan mp;
    struct tide__moved moved;
    if (tide__apply(&pl, clone, &c, &mp, &moved, &err) != TIDE_OK)
        fail_msg("%s", err.message);
    uint32_t *position = malloc(clone->n_nodes * sizeof(*position));
    for (uint32_t i = 0; i < mp.n_order; i++)
        position[mp.order[i]] = i;
    uint32_t copies = 0, finals = 0;
    uint64_t made = 0;
    for (uint32_t v = pl.n_original; v < clone->n_nodes; v++) {
        const struct tide_node *node = &clone->nodes[v];
        if (tide_op_info(node->op)->flags & TIDE_OP_F_MEMORY) {
            /* No SwapOut of a recomputed tensor. */
            if (node->op == TIDE_OP_SWAP_OUT) {
                struct tide_edge in = node->inputs[0];
                if (in.node < pl.n_original)
                    assert_false(taken[pl.part.tensor_of[in.node] + in.output]);
            }
            continue;
        }
        copies++;
        uint32_t producer = node->subject;
        assert_true(producer < pl.n_original);
        enum tide_op op = clone->nodes[producer].op;
        assert_int_equal(node->op, op == TIDE_OP_DROPOUT ? TIDE_OP_DROPOUT_GRAD : op);
        assert_int_equal(node->stream, TIDE_STREAM_COMPUTE);
        assert_int_equal(node->n_inputs, clone->nodes[producer].n_inputs);
        for (uint32_t i = 0; i < node->n_inputs; i++)
            assert_true(position[node->inputs[i].node] < position[v]);
        /*
         * Its readers: copies after it in its partition (a chain), or original
         * nodes, the first of them right after it.
         */
        uint32_t readers = 0, first = UINT32_MAX;
        for (uint32_t u = 0; u < clone->n_nodes; u++) {
            const struct tide_node *r = &clone->nodes[u];
            for (uint32_t i = 0; i < r->n_inputs; i++) {
                if (r->inputs[i].node != v)
                    continue;
                readers++;
                assert_true(position[u] > position[v]);
                if (u >= pl.n_original)
                    assert_int_equal(r->partition, node->partition);
                else
                    first = position[u] < first ? position[u] : first;
            }
        }
        assert_true(readers > 0);
        if (first != UINT32_MAX) {
            /* At most prefetch partitions ahead of its group, as a SwapIn would be. */
            finals++;
            int32_t use_partition = clone->nodes[mp.order[first]].partition;
            assert_true(node->partition <= use_partition &&
                        use_partition - node->partition <= (int32_t)c.prefetch);
        }
        for (uint32_t k = 0; k < node->n_outputs; k++)
            made += node->outputs[k].nbytes;
    }
    assert_int_equal(finals, n_copies);
    assert_true(copies >= finals);
    assert_int_equal(moved.actions[TIDE__ACTION_RECOMPUTE].remade, made);
    assert_int_equal(moved.actions[TIDE__ACTION_RECOMPUTE].to_host, 0);
    assert_int_equal(moved.actions[TIDE__ACTION_RECOMPUTE].to_device, 0);
    assert_true(moved.actions[TIDE__ACTION_RECOMPUTE].remade > 0);

    /*
     * On a device whose copies cost nothing against its compute (a byte
     * copied as fast as a thousand are read), nothing is worth recomputing.
     */
    struct tide_device_rates free_copies = {1e18, 1e9, 1e9};
    struct tide_plan_env fast = env;
    fast.rates = &free_copies;
    struct tide__planner fast_pl;
    assert_int_equal(tide__planner_init(&fast_pl, g, 4, &fast, &err), TIDE_OK);
    for (uint32_t t = 0; t < fast_pl.part.n_tensors; t++) {
        if (fast_pl.kinds[t] != TIDE__TENSOR_FEATURE)
            continue;
        struct tide__action_tensor at;
        tide__action_tensor_init(&at, &fast_pl, &c, t, groups);
        assert_int_not_equal(tide__action_pick(&at), TIDE__ACTION_RECOMPUTE);
    }
    tide__planner_release(&fast_pl);
    /* The original tensors of taken maps: read by their production group only. */
    for (uint32_t t = 0; t < pl.part.n_tensors; t++) {
        if (!taken[t])
            continue;
        struct tide__action_tensor at;
        tide__action_tensor_init(&at, &pl, &c, t, groups);
        struct tide_edge e = at.life->tensor;
        uint32_t near_end = at.made;
        if (at.groups[0].n_uses)
            near_end = pl.part.position[at.life->uses[at.groups[0].n_uses - 1]];
        for (uint32_t u = 0; u < clone->n_nodes; u++) {
            const struct tide_node *r = &clone->nodes[u];
            for (uint32_t i = 0; i < r->n_inputs; i++) {
                if (r->inputs[i].node == e.node && r->inputs[i].output == e.output)
                    assert_true(u < pl.n_original && pl.part.position[u] <= near_end);
            }
        }
    }
    free(position);
    tide_memplan_release(&mp);
    tide_graph_free(clone);
    free(taken);
    free(groups);
    tide__planner_release(&pl);
    tide_graph_free(g);
}

/*
 * tide_plan_memory with recompute allowed, and with checkpoint-sqrt: at
 * three budgets from the resident peak down to the smallest that fits, the
 * plan fits (predicted peak within the budget), a plan reports the bytes its
 * copies make (some do), and checkpoint-sqrt swaps nothing.
 */
static void test_recompute_plans_fit(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    static const enum tide_recompute_mode modes[] = {TIDE_RECOMPUTE_AUTO,
                                                     TIDE_RECOMPUTE_CHECKPOINT_SQRT};
    uint64_t total = 0;
    for (int m = 0; m < 2; m++) {
        struct tide_graph *g = model_graph(MODEL_RESNET, TIDE_OPTIMIZER_MOMENTUM);
        struct tide_memory_policy policy = tide_memory_policy_default();
        policy.recompute = modes[m];
        policy.budget_bytes = 4096;
        struct tide_memory_plan plan;
        struct tide_error err = {0};
        struct tide_graph *probe = tide_graph_clone(g);
        assert_int_equal(tide_plan_memory(probe, &policy, &env, &plan, &err), TIDE_DOES_NOT_FIT);
        uint64_t least = plan.report.min_budget_bytes;
        tide_memory_plan_release(&plan);
        tide_graph_free(probe);
        probe = tide_graph_clone(g);
        policy.budget_bytes = 0;
        assert_int_equal(tide_plan_memory(probe, &policy, &env, &plan, &err), TIDE_OK);
        uint64_t resident = plan.report.predicted_peak_bytes;
        tide_memory_plan_release(&plan);
        tide_graph_free(probe);
        assert_true(least > 0 && least <= resident);
        uint64_t budgets[3] = {least, least + (resident - least) / 2, resident};
        uint64_t recomputed = 0;
        for (int b = 0; b < 3; b++) {
            struct tide_graph *h = tide_graph_clone(g);
            policy.budget_bytes = budgets[b];
            if (tide_plan_memory(h, &policy, &env, &plan, &err) != TIDE_OK)
                fail_msg("budget %" PRIu64 ": %s", budgets[b], err.message);
            assert_true(plan.report.fits);
            assert_true(plan.report.predicted_peak_bytes <= budgets[b]);
            assert_int_equal(plan.report.predicted_peak_bytes, plan.memplan.peak_bytes);
            uint64_t made = 0;
            for (uint32_t v = g->n_nodes; v < h->n_nodes; v++) {
                for (uint32_t k = 0; k < h->nodes[v].n_outputs; k++)
                    if (!(tide_op_info(h->nodes[v].op)->flags & TIDE_OP_F_MEMORY))
                        made += h->nodes[v].outputs[k].nbytes;
            }
            assert_int_equal(plan.report.recompute_bytes, made);
            assert_true(made == 0 || plan.report.recompute_ms > 0);
            if (modes[m] == TIDE_RECOMPUTE_CHECKPOINT_SQRT)
                assert_int_equal(plan.report.swap_out_bytes + plan.report.swap_in_bytes, 0);
            recomputed += made;
            print_message("  resnet, recompute %s, budget %" PRIu64 ": peak %" PRIu64
                          ", partition size %u, recomputed %" PRIu64 " bytes (%.3f ms), swapped "
                          "out %" PRIu64 "\n",
                          m ? "checkpoint-sqrt" : "auto", budgets[b],
                          plan.report.predicted_peak_bytes, plan.report.chosen.partition_size, made,
                          plan.report.recompute_ms, plan.report.swap_out_bytes);
            tide_memory_plan_release(&plan);
            tide_graph_free(h);
        }
        total += recomputed;
        tide_graph_free(g);
    }
    assert_true(total > 0);
}

/*
 * Issue #11's recompute target on a model small enough for a test: planned
 * for an H100 (a byte over PCIe costs about 1,000 FLOPs there) at 1.05 x
 * its floor, recompute allowed, the ResNet's plan fits (predicted peak
 * within the budget, as memplan places it) and makes cheap maps again
 * rather than copying them: recompute_bytes > 0, and fewer bytes swapped in
 * than the plan with recompute off at the same budget. Its copies read
 * convolution outputs and BatchNorm parameters whose loads they pull ahead
 * (recompute.c, "Pulled loads"): some SwapIn or Fetch runs before the
 * partition where its group is first read.
 */
/*
 * Where each MaxPool2DGrad of plan h finds its argmax (input 1): the
 * MaxPool2D's own (kept, counted in *kept), a recompute copy of it
 * (*remade), or a SwapIn (*swapped).
 */
static void argmax_sources(const struct tide_graph *h, uint32_t n_original, uint32_t *kept,
                           uint32_t *remade, uint32_t *swapped)
{
    *kept = *remade = *swapped = 0;
    for (uint32_t v = 0; v < n_original; v++) {
        if (h->nodes[v].op != TIDE_OP_MAX_POOL2D_GRAD)
            continue;
        struct tide_edge e = h->nodes[v].inputs[1];
        const struct tide_node *src = &h->nodes[e.node];
        if (e.node < n_original) {
            assert_int_equal(src->op, TIDE_OP_MAX_POOL2D);
            assert_int_equal(e.output, 1);
            ++*kept;
        } else if (src->op == TIDE_OP_SWAP_IN) {
            ++*swapped;
        } else {
            /* A copy: MaxPool2D again, of the original's input, making both outputs. */
            assert_int_equal(src->op, TIDE_OP_MAX_POOL2D);
            assert_int_equal(h->nodes[src->subject].op, TIDE_OP_MAX_POOL2D);
            assert_int_equal(src->n_outputs, 2);
            assert_int_equal(e.output, 1);
            ++*remade;
        }
    }
}

/*
 * MaxPool2D saves its argmax for MaxPool2DGrad, and whether that tensor is
 * kept, swapped or made again before the gradient is the planner's choice
 * (issue 16, item 5): the CNN's plan with room to spare keeps both argmaxes;
 * at its least budget with recompute on, on an H100's rates (a copied byte
 * costs ~1,000 FLOPs), the search again is the cheaper way and some argmax
 * is recomputed from x. Every plan fits and its peak is memplan's.
 */
static void test_max_pool_argmax_choice(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    struct tide_graph *g = model_graph(MODEL_CNN, TIDE_OPTIMIZER_MOMENTUM);
    struct tide_memory_policy policy = tide_memory_policy_default();
    policy.profile = tide_device_profile_named("h100");
    policy.recompute = TIDE_RECOMPUTE_AUTO;
    struct tide_memory_plan plan;
    struct tide_error err = {0};
    uint32_t kept, remade, swapped;

    struct tide_graph *h = tide_graph_clone(g);
    policy.budget_bytes = 0;
    assert_int_equal(tide_plan_memory(h, &policy, &env, &plan, &err), TIDE_OK);
    argmax_sources(h, g->n_nodes, &kept, &remade, &swapped);
    assert_int_equal(kept, 2);
    tide_memory_plan_release(&plan);
    tide_graph_free(h);

    h = tide_graph_clone(g);
    policy.budget_bytes = 4096;
    assert_int_equal(tide_plan_memory(h, &policy, &env, &plan, &err), TIDE_DOES_NOT_FIT);
    policy.budget_bytes = plan.report.min_budget_bytes;
    tide_memory_plan_release(&plan);
    tide_graph_free(h);
    h = tide_graph_clone(g);
    if (tide_plan_memory(h, &policy, &env, &plan, &err) != TIDE_OK)
        fail_msg("budget %" PRIu64 ": %s", policy.budget_bytes, err.message);
    assert_true(plan.report.fits);
    assert_int_equal(plan.report.predicted_peak_bytes, plan.memplan.peak_bytes);
    argmax_sources(h, g->n_nodes, &kept, &remade, &swapped);
    print_message("  cnn, h100, least budget %" PRIu64 ": argmax kept %u, recomputed %u, "
                  "swapped %u\n",
                  policy.budget_bytes, kept, remade, swapped);
    assert_int_equal(kept + remade + swapped, 2);
    assert_true(remade > 0);
    tide_memory_plan_release(&plan);
    tide_graph_free(h);
    tide_graph_free(g);
}

static void test_recompute_at_floor_h100(void **state)
{
    (void)state;
    struct tide_plan_env env = cpu_env();
    const struct tide_device_profile *h100 = tide_device_profile_named("h100");
    assert_non_null(h100);
    struct tide_graph *g = model_graph(MODEL_RESNET38, TIDE_OPTIMIZER_MOMENTUM);
    struct tide_memory_policy policy = tide_memory_policy_default();
    policy.profile = h100;
    policy.budget_bytes = 4096;
    struct tide_memory_plan plan;
    struct tide_error err = {0};
    struct tide_graph *h = tide_graph_clone(g);
    assert_int_equal(tide_plan_memory(h, &policy, &env, &plan, &err), TIDE_DOES_NOT_FIT);
    uint64_t floor = plan.report.floor_bytes;
    assert_true(floor > 0);
    tide_memory_plan_release(&plan);
    tide_graph_free(h);
    policy.budget_bytes = floor * 105 / 100;

    uint64_t swapped_in[2];
    for (int recompute = 0; recompute < 2; recompute++) {
        policy.recompute = recompute ? TIDE_RECOMPUTE_AUTO : TIDE_RECOMPUTE_OFF;
        h = tide_graph_clone(g);
        if (tide_plan_memory(h, &policy, &env, &plan, &err) != TIDE_OK)
            fail_msg("budget %" PRIu64 ": %s", policy.budget_bytes, err.message);
        assert_true(plan.report.fits);
        assert_true(plan.report.predicted_peak_bytes <= policy.budget_bytes);
        assert_int_equal(plan.report.predicted_peak_bytes, plan.memplan.peak_bytes);
        swapped_in[recompute] = plan.report.swap_in_bytes;
        print_message(
            "  resnet-38, h100, floor %" PRIu64 ", budget %" PRIu64 ", recompute %s: peak "
            "%" PRIu64 ", partition size %u, recomputed %" PRIu64 ", swapped in %" PRIu64
            ", predicted %.3f ms\n",
            floor, policy.budget_bytes, recompute ? "auto" : "off",
            plan.report.predicted_peak_bytes, plan.report.chosen.partition_size,
            plan.report.recompute_bytes, plan.report.swap_in_bytes, plan.report.predicted_step_ms);
        if (!recompute) {
            assert_int_equal(plan.report.recompute_bytes, 0);
        } else {
            assert_true(plan.report.recompute_bytes > 0);
            /* A load that runs before its readers' partition: pulled for a copy. */
            uint32_t pulled = 0;
            for (uint32_t v = g->n_nodes; v < h->n_nodes; v++) {
                const struct tide_node *n = &h->nodes[v];
                if (n->op != TIDE_OP_SWAP_IN && n->op != TIDE_OP_FETCH)
                    continue;
                int32_t first = INT32_MAX;
                for (uint32_t u = 0; u < g->n_nodes; u++) {
                    for (uint32_t i = 0; i < h->nodes[u].n_inputs; i++) {
                        if (h->nodes[u].inputs[i].node == v && h->nodes[u].partition < first)
                            first = h->nodes[u].partition;
                    }
                }
                pulled += first != INT32_MAX && n->partition < first;
            }
            /* Without prefetch, a load that is not pulled runs in its first reader's partition. */
            print_message("  %u loads pulled, prefetch %u\n", pulled,
                          plan.report.chosen.prefetch_distance);
            assert_true(plan.report.chosen.prefetch_distance > 0 || pulled > 0);
        }
        tide_memory_plan_release(&plan);
        tide_graph_free(h);
    }
    assert_true(swapped_in[1] < swapped_in[0]);

    /*
     * The default (DEVICE) is AUTO for h100, whose copies do not share
     * compute: the same plan's bytes recomputed; for a profile whose copies
     * do (the CPU backend's) and whenever swap is not automatic, it is OFF.
     */
    struct tide_device_profile shares = *h100;
    shares.copies_share_compute = true;
    static const struct {
        bool share;
        enum tide_swap_mode swap;
        bool recomputes;
    } defaults[] = {{false, TIDE_SWAP_AUTO, true}, {true, TIDE_SWAP_AUTO, false},
                    {false, TIDE_SWAP_ON, false}};
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        struct tide_memory_policy by_device = tide_memory_policy_default();
        assert_int_equal(by_device.recompute, TIDE_RECOMPUTE_DEVICE);
        by_device.profile = defaults[i].share ? &shares : h100;
        by_device.swap = defaults[i].swap;
        by_device.budget_bytes = defaults[i].swap == TIDE_SWAP_AUTO ? policy.budget_bytes : 0;
        h = tide_graph_clone(g);
        if (tide_plan_memory(h, &by_device, &env, &plan, &err) != TIDE_OK)
            fail_msg("default policy, case %zu: %s", i, err.message);
        print_message("  default policy, copies %s compute, swap %d: recomputed %" PRIu64 "\n",
                      defaults[i].share ? "share" : "do not share", (int)defaults[i].swap,
                      plan.report.recompute_bytes);
        if (defaults[i].recomputes)
            assert_true(plan.report.recompute_bytes > 0);
        else
            assert_int_equal(plan.report.recompute_bytes, 0);
        tide_memory_plan_release(&plan);
        tide_graph_free(h);
    }
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
        cmocka_unit_test(test_skip_chain_partition_1),
        cmocka_unit_test(test_skip_chain_partition_2),
        cmocka_unit_test(test_swap_off_inserts_nothing),
        cmocka_unit_test(test_pinned_is_not_swapped),
        cmocka_unit_test(test_thresholds_monotone),
        cmocka_unit_test(test_swap_lowers_long_skip_peak),
        cmocka_unit_test(test_autotune_keeps_nothing_moved),
        cmocka_unit_test(test_vars_on_host),
        cmocka_unit_test(test_admission_names_the_node),
        cmocka_unit_test(test_does_not_fit_reports_min_budget),
        cmocka_unit_test(test_search_cancelled),
        cmocka_unit_test(test_min_budget_is_exact),
        cmocka_unit_test(test_quarter_budget_resnet),
        cmocka_unit_test(test_most_of_budget_cnn),
        cmocka_unit_test(test_deterministic),
        cmocka_unit_test(test_policy_refusals),
        cmocka_unit_test(test_estimate_is_exact),
        cmocka_unit_test(test_action_table),
        cmocka_unit_test(test_actions_pick_and_rewrite),
        cmocka_unit_test(test_action_input_life),
        cmocka_unit_test(test_session_end_to_end),
        cmocka_unit_test(test_recompute_estimate_is_exact),
        cmocka_unit_test(test_recompute_rewrite),
        cmocka_unit_test(test_recompute_plans_fit),
        cmocka_unit_test(test_max_pool_argmax_choice),
        cmocka_unit_test(test_recompute_at_floor_h100),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
