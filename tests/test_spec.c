/* SPDX-License-Identifier: MIT */
/*
 * test_spec.c: the daemon's JobSpec translation (daemon/spec.c).
 *
 * A good spec becomes the expected training options, memory policy,
 * session options, feed, fetch and Variable specs; every bad field is
 * refused with an error that names the field and the value; and the wire
 * PlanReport carries the planner's numbers and node names, also for a plan
 * that does not fit, and the plan's memory timeline, every number of it
 * through packing and unpacking, when it fits. The graph is the client library's MLP, unpacked into
 * the JobSpec as a tided request would carry it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/spec.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "tide/models.h"

#define BATCH   4
#define IN      12
#define HIDDEN  8
#define CLASSES 3

/* A JobSpec around the MLP's graph, training with Adam; the test edits it. */
struct fixture {
    Tide__V1__Graph *graph;
    Tide__V1__JobSpec spec;
    Tide__V1__TrainSpec train;
    Tide__V1__Adam adam;
    Tide__V1__SGD sgd;
    Tide__V1__Momentum momentum;
    Tide__V1__MemoryPolicy memory;
    char *feeds[2];
    char *fetches[1];
    struct tide_graph_limits limits;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    tide_builder *b = tide_builder_new();
    const int64_t hidden[1] = {HIDDEN};
    uint8_t *bytes = NULL;
    size_t len;
    if (tide_model_mlp(b, BATCH, IN, hidden, 1, CLASSES).id < 0 ||
        tide_builder_serialize(b, &bytes, &len))
        fail_msg("mlp: %s", tide_builder_error(b));
    tide_builder_free(b);
    f->graph = tide__v1__graph__unpack(NULL, len, bytes);
    free(bytes);
    assert_non_null(f->graph);

    tide__v1__job_spec__init(&f->spec);
    tide__v1__train_spec__init(&f->train);
    tide__v1__adam__init(&f->adam);
    tide__v1__sgd__init(&f->sgd);
    tide__v1__momentum__init(&f->momentum);
    tide__v1__memory_policy__init(&f->memory);
    f->adam.learning_rate = 0.01f;
    f->adam.beta1 = 0.9f;
    f->adam.beta2 = 0.999f;
    f->adam.epsilon = 1e-8f;
    f->train.loss = TIDE_MODEL_LOSS;
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_ADAM;
    f->train.adam = &f->adam;
    f->feeds[0] = TIDE_MODEL_IMAGES;
    f->feeds[1] = TIDE_MODEL_LABELS;
    f->fetches[0] = TIDE_MODEL_LOGITS;
    f->spec.graph = f->graph;
    f->spec.train = &f->train;
    f->spec.n_feeds = 2;
    f->spec.feeds = f->feeds;
    f->spec.n_fetches = 1;
    f->spec.fetches = f->fetches;
    f->spec.seed = 42;
    f->limits = tide_graph_limits_default();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    tide__v1__graph__free_unpacked(f->graph, NULL);
    free(f);
    return 0;
}

/* tided_spec_setup must refuse with want, its message containing text. */
static void expect_setup_error(const Tide__V1__JobSpec *spec, enum tide_status want,
                               const char *text)
{
    struct tided_spec_setup s;
    struct tide_error err = {0};
    assert_int_equal(tided_spec_setup(spec, 1 << 20, &s, &err), want);
    if (!strstr(err.message, text))
        fail_msg("want \"%s\" in \"%s\"", text, err.message);
}

/* tided_spec_check_feeds must refuse with TIDE_INVALID, its message containing text. */
static void expect_feeds_error(struct fixture *f, const char *text)
{
    struct tide_graph *g = NULL;
    struct tide_error err = {0};
    assert_int_equal(tided_spec_import(&f->spec, &f->limits, &g, &err), TIDE_OK);
    struct tided_tensor_spec *feeds = NULL;
    uint32_t n = 0;
    assert_int_equal(tided_spec_check_feeds(&f->spec, g, &feeds, &n, &err), TIDE_INVALID);
    if (!strstr(err.message, text))
        fail_msg("want \"%s\" in \"%s\"", text, err.message);
    tided_tensor_specs_free(feeds, n);
    tide_graph_free(g);
}

/* ============================================================================
 * A good spec
 * ========================================================================== */

static void test_good_spec_gives_the_options(void **state)
{
    struct fixture *f = *state;
    f->memory.partition_size = 7;
    f->memory.swap = TIDE__V1__SWAP_MODE__SWAP_ON;
    f->memory.swap_threshold = 2;
    f->memory.prefetch_distance = 3;
    f->memory.vars_home = TIDE__V1__VARS_HOME__VARS_HOME_HOST;
    f->memory.autotune = false;
    f->memory.recompute = TIDE__V1__RECOMPUTE_MODE__RECOMPUTE_CHECKPOINT_SQRT;
    f->spec.memory = &f->memory;
    f->spec.math = "tf32";
    struct tided_spec_setup s;
    struct tide_error err = {0};
    assert_int_equal(tided_spec_setup(&f->spec, 5 << 20, &s, &err), TIDE_OK);
    assert_int_equal(s.math, TIDE_MATH_TF32);
    assert_true(s.training);
    assert_string_equal(s.train.loss, TIDE_MODEL_LOSS);
    assert_int_equal(s.train.optimizer, TIDE_OPTIMIZER_ADAM);
    assert_true(s.train.learning_rate == 0.01f);
    assert_true(s.train.beta1 == 0.9f);
    assert_true(s.train.beta2 == 0.999f);
    assert_true(s.train.epsilon == 1e-8f);
    assert_int_equal(s.train.n_variables, 0);
    assert_int_equal(s.policy.budget_bytes, 5 << 20);
    assert_int_equal(s.policy.partition_size, 7);
    assert_int_equal(s.policy.swap, TIDE_SWAP_ON);
    assert_int_equal(s.policy.swap_threshold, 2);
    assert_int_equal(s.policy.prefetch_distance, 3);
    assert_int_equal(s.policy.vars_home, TIDE_VARS_HOME_HOST);
    assert_false(s.policy.autotune);
    assert_int_equal(s.policy.recompute, TIDE_RECOMPUTE_CHECKPOINT_SQRT);

    struct tide_backend *backend = (struct tide_backend *)&s; /* only compared */
    struct tide_session_options o =
        tided_spec_session_options(&f->spec, &s, backend, 5 << 20, &f->limits);
    assert_ptr_equal(o.backend, backend);
    assert_int_equal(o.budget_bytes, 5 << 20);
    assert_ptr_equal(o.memory, &s.policy);
    assert_ptr_equal(o.train, &s.train);
    assert_int_equal(o.seed, 42);
    assert_int_equal(o.n_fetches, 1);
    assert_string_equal(o.fetches[0], TIDE_MODEL_LOGITS);
    assert_ptr_equal(o.limits, &f->limits);
    assert_int_equal(o.math, TIDE_MATH_TF32);
    assert_false(o.plan_only);
}

/* Unset memory fields keep the policy's defaults; a spec without train is forward-only. */
static void test_defaults_and_forward_only(void **state)
{
    struct fixture *f = *state;
    f->spec.train = NULL;
    struct tided_spec_setup s;
    struct tide_error err = {0};
    assert_int_equal(tided_spec_setup(&f->spec, 1 << 20, &s, &err), TIDE_OK);
    assert_false(s.training);
    struct tide_memory_policy d = tide_memory_policy_default();
    assert_int_equal(s.policy.partition_size, d.partition_size);
    assert_int_equal(s.policy.swap, d.swap);
    assert_int_equal(s.policy.swap_threshold, d.swap_threshold);
    assert_int_equal(s.policy.prefetch_distance, d.prefetch_distance);
    assert_int_equal(s.policy.vars_home, d.vars_home);
    assert_int_equal(s.policy.budget_bytes, 1 << 20);
    assert_int_equal(s.math, TIDE_MATH_FP32); /* math "" */
    struct tide_session_options o = tided_spec_session_options(&f->spec, &s, NULL, 0, NULL);
    assert_null(o.train);
    assert_int_equal(o.math, TIDE_MATH_FP32);
    f->spec.math = "fp32";
    assert_int_equal(tided_spec_setup(&f->spec, 1 << 20, &s, &err), TIDE_OK);
    assert_int_equal(s.math, TIDE_MATH_FP32);
    assert_non_null(o.memory);

    /* Momentum and SGD fill their own fields. */
    f->spec.train = &f->train;
    f->momentum.learning_rate = 0.5f;
    f->momentum.momentum = 0.9f;
    f->momentum.nesterov = true;
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_MOMENTUM;
    f->train.momentum = &f->momentum;
    assert_int_equal(tided_spec_setup(&f->spec, 0, &s, &err), TIDE_OK);
    assert_int_equal(s.train.optimizer, TIDE_OPTIMIZER_MOMENTUM);
    assert_true(s.train.learning_rate == 0.5f && s.train.momentum == 0.9f && s.train.nesterov);
    f->sgd.learning_rate = 0.25f;
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_SGD;
    f->train.sgd = &f->sgd;
    assert_int_equal(tided_spec_setup(&f->spec, 0, &s, &err), TIDE_OK);
    assert_int_equal(s.train.optimizer, TIDE_OPTIMIZER_SGD);
    assert_true(s.train.learning_rate == 0.25f);
}

static void test_feeds_fetches_and_variables(void **state)
{
    struct fixture *f = *state;
    struct tide_graph *g = NULL;
    struct tide_error err = {0};
    assert_int_equal(tided_spec_import(&f->spec, &f->limits, &g, &err), TIDE_OK);
    struct tided_tensor_spec *feeds = NULL;
    uint32_t n_feeds = 0;
    assert_int_equal(tided_spec_check_feeds(&f->spec, g, &feeds, &n_feeds, &err), TIDE_OK);
    assert_int_equal(n_feeds, 2);
    assert_string_equal(feeds[0].name, TIDE_MODEL_IMAGES);
    assert_int_equal(feeds[0].dtype, TIDE_DTYPE_FLOAT32);
    assert_int_equal(feeds[0].shape.rank, 4); /* [batch, 1, 1, in_features] */
    assert_int_equal(feeds[0].shape.dims[0], BATCH);
    assert_int_equal(feeds[0].shape.dims[3], IN);
    assert_int_equal(feeds[0].nbytes, BATCH * IN * 4);
    assert_string_equal(feeds[1].name, TIDE_MODEL_LABELS);
    assert_int_equal(feeds[1].dtype, TIDE_DTYPE_INT32);
    assert_int_equal(feeds[1].nbytes, BATCH * 4);
    tided_tensor_specs_free(feeds, n_feeds);

    char **names = NULL;
    uint32_t n_names = 0;
    assert_int_equal(tided_spec_user_variables(g, &names, &n_names, &err), TIDE_OK);
    uint32_t variables = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        variables += g->nodes[v].op == TIDE_OP_VARIABLE;
    assert_int_equal(n_names, variables);
    assert_int_equal(n_names, 4); /* fc1 and fc_out, weights and biases */
    for (uint32_t i = 0; i < n_names; i++) {
        uint32_t id = tide_graph_find(g, names[i]);
        assert_int_not_equal(id, TIDE_NO_NODE);
        assert_int_equal(g->nodes[id].op, TIDE_OP_VARIABLE);
        free(names[i]);
    }
    free(names);

    struct tided_tensor_spec *fetches = NULL;
    uint32_t n_fetches = 0;
    assert_int_equal(tided_spec_fetches(&f->spec, g, &fetches, &n_fetches, &err), TIDE_OK);
    assert_int_equal(n_fetches, 1);
    assert_string_equal(fetches[0].name, TIDE_MODEL_LOGITS);
    assert_int_equal(fetches[0].dtype, TIDE_DTYPE_FLOAT32);
    assert_int_equal(fetches[0].shape.rank, 2);
    assert_int_equal(fetches[0].shape.dims[0], BATCH);
    assert_int_equal(fetches[0].shape.dims[1], CLASSES);
    assert_int_equal(fetches[0].nbytes, BATCH * CLASSES * 4);
    tided_tensor_specs_free(fetches, n_fetches);

    /* A fetch that is no output of the graph names itself and the numbers. */
    char *bad[1] = {TIDE_MODEL_LOGITS ":3"};
    f->spec.fetches = bad;
    fetches = NULL;
    n_fetches = 0;
    assert_int_equal(tided_spec_fetches(&f->spec, g, &fetches, &n_fetches, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "fetch \"logits:3\": node \"logits\""));
    assert_non_null(strstr(err.message, "has 1 output"));
    assert_int_equal(n_fetches, 0);
    tided_tensor_specs_free(fetches, n_fetches);
    tide_graph_free(g);
}

/* ============================================================================
 * Bad fields
 * ========================================================================== */

static void test_bad_train_fields(void **state)
{
    struct fixture *f = *state;
    f->adam.learning_rate = -1.0f;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "train.adam.learning_rate must be a positive number, got -1");
    f->sgd.learning_rate = 0.0f;
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_SGD;
    f->train.sgd = &f->sgd;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "train.sgd.learning_rate must be a positive number, got 0");
    f->momentum.learning_rate = NAN;
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_MOMENTUM;
    f->train.momentum = &f->momentum;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "train.momentum.learning_rate must be a positive number, got nan");
    f->momentum.learning_rate = 0.1f;
    f->momentum.momentum = 1.0f;
    expect_setup_error(&f->spec, TIDE_INVALID, "train.momentum.momentum must be in [0, 1), got 1");
    f->momentum.momentum = -0.5f;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "train.momentum.momentum must be in [0, 1), got -0.5");
    f->momentum.momentum = 0.5f;
    f->train.clip_norm = 1.5f;
    expect_setup_error(&f->spec, TIDE_UNSUPPORTED,
                       "train.clip_norm (1.5): gradient clipping is not supported yet");
    f->train.clip_norm = 0.0f;
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER__NOT_SET;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "train.optimizer: none is set; set one of sgd, momentum or adam");
    f->train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_ADAM;
    f->adam.learning_rate = 0.01f;
    f->train.loss = "";
    expect_setup_error(&f->spec, TIDE_INVALID, "train.loss: empty, but an optimizer is set");
}

static void test_bad_memory_fields(void **state)
{
    struct fixture *f = *state;
    f->spec.memory = &f->memory;
    f->memory.swap = (Tide__V1__SwapMode)7;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "memory.swap: unknown mode 7 (want SWAP_AUTO, SWAP_ON or SWAP_OFF)");
    f->memory.swap = TIDE__V1__SWAP_MODE__SWAP_OFF;
    f->memory.vars_home = (Tide__V1__VarsHome)3;
    expect_setup_error(&f->spec, TIDE_INVALID, "memory.vars_home: unknown value 3");
    f->memory.vars_home = TIDE__V1__VARS_HOME__VARS_HOME_AUTO;
    f->memory.recompute = (Tide__V1__RecomputeMode)4;
    expect_setup_error(&f->spec, TIDE_INVALID,
                       "memory.recompute: unknown mode 4 (want RECOMPUTE_DEVICE, RECOMPUTE_AUTO, "
                       "RECOMPUTE_CHECKPOINT_SQRT or RECOMPUTE_OFF)");
    f->memory.recompute = TIDE__V1__RECOMPUTE_MODE__RECOMPUTE_AUTO;
    f->spec.math = "bf16";
    expect_setup_error(&f->spec, TIDE_INVALID, "math \"bf16\": wants fp32 or tf32");
}

static void test_bad_feeds_and_graph(void **state)
{
    struct fixture *f = *state;
    char *unknown[2] = {"nope", TIDE_MODEL_LABELS};
    f->spec.feeds = unknown;
    expect_feeds_error(f, "feeds[0] \"nope\": no node is called that");
    char *not_placeholder[2] = {TIDE_MODEL_IMAGES, "fc1/w"};
    f->spec.feeds = not_placeholder;
    expect_feeds_error(f, "feeds[1] \"fc1/w\": node \"fc1/w\" is a Variable, not a Placeholder");
    char *twice[2] = {TIDE_MODEL_IMAGES, TIDE_MODEL_IMAGES};
    f->spec.feeds = twice;
    expect_feeds_error(f, "feeds[1] \"images\": listed twice");
    char *one[1] = {TIDE_MODEL_IMAGES};
    f->spec.feeds = one;
    f->spec.n_feeds = 1;
    expect_feeds_error(f, "is not fed: list it in spec.feeds");
    expect_feeds_error(f, "\"labels\"");

    f->spec.graph = NULL;
    struct tide_graph *g = (struct tide_graph *)f; /* overwritten with NULL */
    struct tide_error err = {0};
    assert_int_equal(tided_spec_import(&f->spec, &f->limits, &g, &err), TIDE_INVALID);
    assert_null(g);
    assert_string_equal(err.message, "spec.graph: missing");

    Tide__V1__Graph empty;
    tide__v1__graph__init(&empty);
    f->spec.graph = &empty;
    assert_int_equal(tided_spec_import(&f->spec, &f->limits, &g, &err), TIDE_INVALID);
    assert_null(g);
    assert_string_equal(err.message, "spec.graph: has no nodes; a job needs a graph to run");
    f->spec.graph = f->graph; /* the teardown frees it */
}

/* tided_spec_prepare: the worker's order (graph first), statuses, and what it hands back. */
static void test_prepare(void **state)
{
    struct fixture *f = *state;
    struct tided_spec_setup s;
    struct tide_graph *g = NULL;
    struct tided_tensor_spec *feeds = NULL;
    uint32_t n_feeds = 0, n_names = 0;
    char **names = NULL;
    struct tide_error err = {0};
    assert_int_equal(tided_spec_prepare(&f->spec, &f->limits, 1 << 20, &s, &g, &feeds, &n_feeds,
                                        &names, &n_names, &err),
                     TIDE_OK);
    assert_non_null(g);
    assert_true(s.training);
    assert_int_equal(s.policy.budget_bytes, 1 << 20);
    assert_int_equal(n_feeds, 2);
    assert_string_equal(feeds[1].name, TIDE_MODEL_LABELS);
    assert_int_equal(n_names, 4);
    for (uint32_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    tided_tensor_specs_free(feeds, n_feeds);
    tide_graph_free(g);

    /* Plan asks for no Variables' names. */
    g = NULL, feeds = NULL, n_feeds = 0, names = NULL, n_names = 0;
    assert_int_equal(tided_spec_prepare(&f->spec, &f->limits, 1 << 20, &s, &g, &feeds, &n_feeds,
                                        NULL, NULL, &err),
                     TIDE_OK);
    tided_tensor_specs_free(feeds, n_feeds);
    tide_graph_free(g);

    /* A feed that names no node: the session's "not found" is a bad argument here. */
    char *unknown[2] = {"nope", TIDE_MODEL_LABELS};
    f->spec.feeds = unknown;
    g = NULL, feeds = NULL, n_feeds = 0;
    assert_int_equal(tided_spec_prepare(&f->spec, &f->limits, 1 << 20, &s, &g, &feeds, &n_feeds,
                                        NULL, NULL, &err),
                     TIDE_INVALID);
    assert_non_null(strstr(err.message, "feeds[0] \"nope\""));
    tided_tensor_specs_free(feeds, n_feeds);
    tide_graph_free(g);

    /* A bad graph and a bad optimizer: the graph is what the client hears about. */
    f->adam.learning_rate = -1.0f;
    char *op = f->graph->nodes[0]->op; /* put back before the teardown frees the graph */
    f->graph->nodes[0]->op = "NoSuchOp";
    g = NULL, feeds = NULL, n_feeds = 0;
    assert_int_equal(tided_spec_prepare(&f->spec, &f->limits, 1 << 20, &s, &g, &feeds, &n_feeds,
                                        NULL, NULL, &err),
                     TIDE_INVALID);
    assert_null(g);
    assert_non_null(strstr(err.message, "unknown op \"NoSuchOp\""));
    f->graph->nodes[0]->op = op;
}

/* ============================================================================
 * Plan reports
 * ========================================================================== */

/* The wire timeline holds exactly the timeline t. */
static void expect_timeline(const Tide__V1__MemoryTimeline *m, const struct tide_memory_timeline *t)
{
    assert_non_null(m);
    assert_int_equal(m->positions, t->n_positions);
    assert_int_equal(m->budget_bytes, t->budget_bytes);
    assert_int_equal(m->predicted_peak_bytes, t->predicted_peak_bytes);
    assert_int_equal(m->live_peak_bytes, t->live_peak_bytes);
    size_t counts[] = {m->n_point_first,     m->n_point_last,        m->n_point_position,
                       m->n_variables_bytes, m->n_activations_bytes, m->n_swapped_in_bytes,
                       m->n_workspace_bytes};
    for (size_t k = 0; k < sizeof(counts) / sizeof(*counts); k++)
        assert_int_equal(counts[k], t->n_points);
    for (uint32_t i = 0; i < t->n_points; i++) {
        const struct tide_memory_timeline_point *pt = &t->points[i];
        assert_int_equal(m->point_first[i], pt->first);
        assert_int_equal(m->point_last[i], pt->last);
        assert_int_equal(m->point_position[i], pt->position);
        assert_int_equal(m->variables_bytes[i], pt->bytes[TIDE_MEMORY_VARIABLES]);
        assert_int_equal(m->activations_bytes[i], pt->bytes[TIDE_MEMORY_ACTIVATIONS]);
        assert_int_equal(m->swapped_in_bytes[i], pt->bytes[TIDE_MEMORY_SWAPPED_IN]);
        assert_int_equal(m->workspace_bytes[i], pt->bytes[TIDE_MEMORY_WORKSPACE]);
    }
    assert_int_equal(m->n_partition_first, t->n_partitions);
    assert_int_equal(m->n_partition_last, t->n_partitions);
    assert_int_equal(m->n_partition_arena_top_bytes, t->n_partitions);
    for (uint32_t i = 0; i < t->n_partitions; i++) {
        assert_int_equal(m->partition_first[i], t->partitions[i].first);
        assert_int_equal(m->partition_last[i], t->partitions[i].last);
        assert_int_equal(m->partition_arena_top_bytes[i], t->partitions[i].arena_top_bytes);
    }
    assert_int_equal(m->n_swap_out_positions, t->n_swap_outs);
    for (uint32_t i = 0; i < t->n_swap_outs; i++)
        assert_int_equal(m->swap_out_positions[i], t->swap_outs[i]);
    assert_int_equal(m->n_swap_in_positions, t->n_swap_ins);
    for (uint32_t i = 0; i < t->n_swap_ins; i++)
        assert_int_equal(m->swap_in_positions[i], t->swap_ins[i]);
}

/* Plans the fixture's spec under budget; the wire report is checked against the session's. */
static void check_report(struct fixture *f, uint64_t budget, enum tide_status want)
{
    struct tide_backend *backend = NULL;
    struct tide_error err = {0};
    assert_int_equal(tide_backend_create("cpu", &(struct tide_backend_options){0}, &backend, &err),
                     TIDE_OK);
    struct tide_graph *g = NULL;
    struct tided_spec_setup s;
    assert_int_equal(tided_spec_import(&f->spec, &f->limits, &g, &err), TIDE_OK);
    assert_int_equal(tided_spec_setup(&f->spec, budget, &s, &err), TIDE_OK);
    struct tide_session_options o =
        tided_spec_session_options(&f->spec, &s, backend, budget, &f->limits);
    struct tide_session *session = NULL;
    assert_int_equal(tide_session_plan_graph(g, &o, &session, &err), want);
    const struct tide_plan_report *r = tide_session_plan_report(session);
    const struct tide_graph *sg = tide_session_graph(session);
    Tide__V1__PlanReport *p = tided_spec_plan_report(r, sg, tide_session_memplan(session));
    assert_non_null(p);
    assert_int_equal(p->fits, want == TIDE_OK);
    assert_int_equal(p->budget_bytes, budget);
    assert_int_equal(p->predicted_peak_bytes, r->predicted_peak_bytes);
    assert_int_equal(p->min_budget_bytes, r->min_budget_bytes);
    assert_int_equal(p->floor_bytes, r->floor_bytes);
    assert_true(p->floor_bytes > 0 && p->floor_bytes <= r->min_budget_bytes);
    assert_string_equal(p->floor_node, sg->nodes[r->floor_node].name);
    assert_int_equal(p->partition_size, r->chosen.partition_size);
    assert_int_equal(p->nodes, r->nodes);
    assert_int_equal(p->host_bytes, r->host_arena_bytes);
    assert_int_equal(p->n_partitions, r->n_partitions);
    assert_true(p->n_partitions > 0);
    for (size_t i = 0; i < p->n_partitions; i++) {
        assert_int_equal(p->partitions[i]->index, i);
        /* A partition left empty (its Variable homed on the host, moved first) names none. */
        uint32_t peak = r->partitions[i].peak_node;
        assert_string_equal(p->partitions[i]->peak_node,
                            peak == TIDE_NO_NODE ? "" : sg->nodes[peak].name);
    }
    if (want == TIDE_OK) {
        assert_string_equal(p->min_budget_node, "");
        /* The timeline, as built from the session's plan, also after a trip over the wire. */
        struct tide_memory_timeline t;
        assert_int_equal(tide_memory_timeline_build(sg, tide_session_memplan(session), budget, 0,
                                                    &t, &err),
                         TIDE_OK);
        assert_true(t.n_points > 0 && t.n_partitions > 0);
        assert_int_equal(t.budget_bytes, budget);
        expect_timeline(p->timeline, &t);
        size_t len = tide__v1__plan_report__get_packed_size(p);
        uint8_t *packed = malloc(len);
        assert_int_equal(tide__v1__plan_report__pack(p, packed), len);
        Tide__V1__PlanReport *back = tide__v1__plan_report__unpack(NULL, len, packed);
        assert_non_null(back);
        expect_timeline(back->timeline, &t);
        tide__v1__plan_report__free_unpacked(back, NULL);
        free(packed);
        tide_memory_timeline_clear(&t);
    } else {
        assert_null(p->timeline); /* no plan, no timeline */
        assert_true(p->min_budget_bytes > budget);
        assert_string_equal(p->min_budget_node, sg->nodes[r->min_budget_node].name);
        assert_string_equal(p->message, r->message);
        assert_true(p->message[0] != '\0');
    }
    tided_plan_report_free(p);
    tide_session_free(session);
    tide_backend_free(backend);
}

static void test_plan_report(void **state)
{
    struct fixture *f = *state;
    check_report(f, 64 << 20, TIDE_OK);
    check_report(f, 1024, TIDE_DOES_NOT_FIT);
    /* Without a plan (NULL graph), names are empty. */
    struct tide_plan_report bare = {.budget_bytes = 99};
    Tide__V1__PlanReport *p = tided_spec_plan_report(&bare, NULL, NULL);
    assert_non_null(p);
    assert_int_equal(p->budget_bytes, 99);
    assert_int_equal(p->n_partitions, 0);
    assert_string_equal(p->min_budget_node, "");
    assert_string_equal(p->floor_node, "");
    assert_null(p->timeline);
    tided_plan_report_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_good_spec_gives_the_options, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defaults_and_forward_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_feeds_fetches_and_variables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_train_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_memory_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_feeds_and_graph, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prepare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_report, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
