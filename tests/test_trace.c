/* SPDX-License-Identifier: MIT */
/*
 * test_trace.c: step traces (runtime/trace.h) of a swapping plan on the CPU
 * backend, read back with json-c.
 *
 * The CNN of tide_model_cnn is trained through a session with its Variables
 * homed on the host and swap on at partition size 7, so its steps use all
 * three streams: Fetch and SwapIn on h2d, SwapOut and WriteBack on d2h,
 * kernels on compute. Tracing is switched on and off between steps of one
 * session; the JSON it writes must name the three tracks, hold exactly one
 * slice per position that ran (SwapIns among them), never a negative
 * duration, a flow from every SwapIn and Fetch to its first consumer with
 * both ends, and a device-bytes counter whose maximum over each step is
 * that step's high-water mark; steps run with tracing off record nothing,
 * and tracing allocates no host memory through the backend.
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

#include <json-c/json.h>

#include "runtime/backend-impl.h" /* test_unsupported_backend strips event_elapsed */
#include "runtime/backend.h"
#include "runtime/session.h"
#include "runtime/trace.h"
#include "tide/graph.h"
#include "tide/models.h"

#define BATCH   8
#define CLASSES 10

static void check(enum tide_status st, const struct tide_error *err)
{
    if (st != TIDE_OK)
        fail_msg("%s: %s", tide_status_name(st), err->message);
}

/* ============================================================================
 * The job: the CNN, swapping, Variables on the host
 * ========================================================================== */

struct job {
    uint8_t *graph;
    size_t len;
    struct tide_train_options train;
    struct tide_memory_policy policy;
    struct tide_session *session;
    float images[BATCH * 28 * 28];
    int32_t labels[BATCH];
};

/* A session of the CNN; backend may be NULL (the session makes a CPU one). */
static void job_new(struct job *j, struct tide_backend *backend)
{
    memset(j, 0, sizeof(*j));
    tide_builder *b = tide_builder_new();
    tide_ref logits = tide_model_cnn(b, BATCH, 1, 28, 28, CLASSES);
    if (logits.id < 0 || tide_builder_serialize(b, &j->graph, &j->len) != 0)
        fail_msg("cnn: %s", tide_builder_error(b));
    tide_builder_free(b);
    j->train = (struct tide_train_options){.loss = TIDE_MODEL_LOSS,
                                           .optimizer = TIDE_OPTIMIZER_MOMENTUM,
                                           .learning_rate = 0.02f,
                                           .momentum = 0.9f};
    j->policy = tide_memory_policy_default();
    j->policy.partition_size = 7;
    j->policy.swap = TIDE_SWAP_ON;
    j->policy.vars_home = TIDE_VARS_HOME_HOST;
    static const char *const fetches[] = {TIDE_MODEL_LOGITS};
    struct tide_session_options o = tide_session_options_default();
    o.backend = backend;
    o.train = &j->train;
    o.seed = 3;
    o.memory = &j->policy;
    o.fetches = fetches;
    o.n_fetches = 1;
    struct tide_error err = {0};
    check(tide_session_new(j->graph, j->len, &o, &j->session, &err), &err);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof(j->images) / sizeof(j->images[0]); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        j->images[i] = (float)(x >> 40) / (float)(1 << 24);
    }
    for (int i = 0; i < BATCH; i++)
        j->labels[i] = i % CLASSES;
}

static void job_free(struct job *j)
{
    tide_session_free(j->session);
    free(j->graph);
}

/* Feeds the batch and runs a training step (or an evaluation); returns its stats. */
static struct tide_step_stats job_step(struct job *j, bool eval)
{
    struct tide_error err = {0};
    struct tide_step_stats stats;
    check(tide_session_feed(j->session, TIDE_MODEL_IMAGES, j->images, sizeof(j->images), &err),
          &err);
    check(tide_session_feed(j->session, TIDE_MODEL_LABELS, j->labels, sizeof(j->labels), &err),
          &err);
    if (eval)
        check(tide_session_eval(j->session, &stats, &err), &err);
    else
        check(tide_session_step(j->session, &stats, &err), &err);
    return stats;
}

/* What a full step runs, from the planned graph: positions per stream, by op. */
struct expected {
    uint32_t per_stream[3]; /* positions that run (everything but Variables and Consts) */
    uint32_t swap_ins, fetches, swap_outs;
    uint64_t host_base; /* host homes of Variables and Consts, and the staging buffers */
};

static struct expected expected_of(const struct tide_session *s)
{
    struct expected e;
    memset(&e, 0, sizeof(e));
    const struct tide_graph *g = tide_session_graph(s);
    const struct tide_memplan *plan = tide_session_memplan(s);
    for (uint32_t p = 0; p < plan->n_order; p++) {
        const struct tide_node *node = &g->nodes[plan->order[p]];
        if (node->op == TIDE_OP_VARIABLE || node->op == TIDE_OP_CONST) {
            if (node->outputs[0].home == TIDE_HOME_HOST)
                e.host_base += node->outputs[0].nbytes;
            continue;
        }
        if (node->op == TIDE_OP_PLACEHOLDER)
            e.host_base += node->outputs[0].nbytes;
        e.per_stream[node->stream]++;
        e.swap_ins += node->op == TIDE_OP_SWAP_IN;
        e.fetches += node->op == TIDE_OP_FETCH;
        e.swap_outs += node->op == TIDE_OP_SWAP_OUT;
    }
    return e;
}

/* ============================================================================
 * Reading the JSON back
 * ========================================================================== */

static json_object *get(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("trace event %s has no \"%s\"", json_object_to_json_string(o), key);
    return v;
}

static const char *get_string(json_object *o, const char *key)
{
    return json_object_get_string(get(o, key));
}

static bool is(json_object *o, const char *key, const char *value)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) && strcmp(json_object_get_string(v), value) == 0;
}

/* The session's latest recording as parsed JSON, and its traceEvents array. */
static json_object *trace_json(const struct tide_session *s, json_object **events)
{
    const struct tide_trace *trace = tide_session_trace(s);
    assert_non_null(trace);
    char *text;
    size_t len;
    struct tide_error err = {0};
    check(tide_trace_json(trace, 0, &text, &len, &err), &err);
    assert_int_equal(strlen(text), len);
    json_object *doc = json_tokener_parse(text);
    if (!doc)
        fail_msg("the trace is not JSON: %.200s", text);
    free(text);
    assert_string_equal(get_string(doc, "displayTimeUnit"), "ms");
    *events = get(doc, "traceEvents");
    assert_true(json_object_is_type(*events, json_type_array));
    return doc;
}

/* A slice's span in integer nanoseconds (the JSON has microseconds with three decimals). */
static void span_of(json_object *e, int64_t *begin, int64_t *end)
{
    double ts = json_object_get_double(get(e, "ts")), dur = json_object_get_double(get(e, "dur"));
    *begin = (int64_t)(ts * 1000 + 0.5);
    *end = (int64_t)((ts + dur) * 1000 + 0.5);
}

/* ============================================================================
 * Tests
 * ========================================================================== */

/*
 * Tracing switched on for two steps of a running session, off before and
 * after: two steps recorded, each with every position that ran, on the
 * right track, flows paired, and the device counter peaking at the step's
 * high water.
 */
static void test_trace_swapping_steps(void **state)
{
    (void)state;
    struct job j;
    job_new(&j, NULL);
    struct tide_error err = {0};
    struct expected want = expected_of(j.session);
    assert_true(want.swap_ins > 0);
    assert_true(want.fetches > 0);
    assert_true(want.per_stream[TIDE_STREAM_D2H] > 0);

    /* Off: nothing recorded, no recording at all. */
    job_step(&j, false);
    assert_null(tide_session_trace(j.session));
    uint64_t host_allocs = tide_backend_host_alloc_count(NULL);

    check(tide_session_trace_start(j.session, &err), &err);
    struct tide_step_stats traced[2];
    traced[0] = job_step(&j, false);
    traced[1] = job_step(&j, false);
    tide_session_trace_stop(j.session);
    job_step(&j, false); /* off again: not recorded */
    assert_int_equal(tide_backend_host_alloc_count(NULL), host_allocs);
    uint32_t full;
    assert_int_equal(tide_trace_steps(tide_session_trace(j.session), &full), 2);
    assert_int_equal(full, 2);
    assert_int_equal(traced[0].step, 2);
    assert_int_equal(traced[1].step, 3);

    json_object *events;
    json_object *doc = trace_json(j.session, &events);
    size_t n = json_object_array_length(events);

    /* Tracks: thread names 1..3 are compute, h2d, d2h. */
    const char *tracks[4] = {NULL, NULL, NULL, NULL};
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        if (is(e, "ph", "M") && is(e, "name", "thread_name")) {
            int tid = json_object_get_int(get(e, "tid"));
            assert_true(tid >= 1 && tid <= 3);
            tracks[tid] = get_string(get(e, "args"), "name");
        }
    }
    assert_string_equal(tracks[1], "compute");
    assert_string_equal(tracks[2], "h2d");
    assert_string_equal(tracks[3], "d2h");

    /* Step slices on the compute track give each step's span. */
    int64_t step_begin[2] = {0}, step_end[2] = {0};
    int steps_seen = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        if (is(e, "ph", "X") && is(e, "cat", "step") && json_object_get_int(get(e, "tid")) == 1) {
            assert_true(steps_seen < 2);
            char name[32];
            snprintf(name, sizeof(name), "step %" PRIu64, traced[steps_seen].step);
            assert_string_equal(get_string(e, "name"), name);
            span_of(e, &step_begin[steps_seen], &step_end[steps_seen]);
            steps_seen++;
        }
    }
    assert_int_equal(steps_seen, 2);
    assert_true(step_end[0] <= step_begin[1]);

    /* Slices: one per position that ran, on its stream's track, inside its step, dur >= 0. */
    uint32_t per_track[4] = {0}, swap_in_slices = 0, fetch_slices = 0, partitions = 0;
    uint64_t swap_in_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        if (!is(e, "ph", "X"))
            continue;
        assert_true(json_object_get_double(get(e, "dur")) >= 0);
        assert_true(json_object_get_double(get(e, "ts")) >= 0);
        int tid = json_object_get_int(get(e, "tid"));
        assert_true(tid >= 1 && tid <= 3);
        int64_t b, x;
        span_of(e, &b, &x);
        int k = b >= step_begin[1];
        if (b < step_begin[k] || x > step_end[k])
            fail_msg("slice %s [%" PRId64 ", %" PRId64 ") lies outside step %d", get_string(e, "name"),
                     b, x, k + 1);
        partitions += is(e, "cat", "partition");
        if (!is(e, "cat", "kernel") && !is(e, "cat", "copy"))
            continue;
        per_track[tid]++;
        json_object *args = get(e, "args");
        if (strcmp(get_string(args, "op"), "SwapIn") == 0) {
            swap_in_slices++;
            swap_in_bytes += json_object_get_uint64(get(args, "bytes"));
        }
        fetch_slices += strcmp(get_string(args, "op"), "Fetch") == 0;
    }
    for (int s = 0; s < 3; s++)
        assert_int_equal(per_track[s + 1], 2 * want.per_stream[s]);
    assert_int_equal(swap_in_slices, 2 * want.swap_ins);
    assert_int_equal(fetch_slices, 2 * want.fetches);
    assert_true(swap_in_bytes > 0);
    assert_true(partitions >= 2 * 3);

    /* Flows: every SwapIn and Fetch to its consumer, each id once as "s" on h2d and once as "f". */
    size_t n_flows = 2 * (want.swap_ins + want.fetches);
    uint64_t *starts = calloc(n_flows + 1, sizeof(*starts));
    uint8_t *finished = calloc(2 * n_flows + 2, 1);
    size_t n_starts = 0, n_finishes = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        if (is(e, "ph", "s")) {
            assert_true(n_starts < n_flows);
            assert_int_equal(json_object_get_int(get(e, "tid")), 2);
            starts[n_starts++] = json_object_get_uint64(get(e, "id"));
        } else if (is(e, "ph", "f")) {
            uint64_t id = json_object_get_uint64(get(e, "id"));
            assert_true(id >= 1 && id <= 2 * n_flows);
            assert_int_equal(finished[id], 0);
            finished[id] = 1;
            assert_string_equal(get_string(e, "bp"), "e");
            n_finishes++;
        }
    }
    assert_int_equal(n_starts, n_flows);
    assert_int_equal(n_finishes, n_flows);
    for (size_t i = 0; i < n_starts; i++)
        assert_int_equal(finished[starts[i]], 1);
    free(starts);
    free(finished);

    /* Counters: per step, device peaks at the high water; host bottoms at homes + staging. */
    uint64_t device_max[2] = {0}, host_min[2] = {UINT64_MAX, UINT64_MAX}, host_max = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        if (!is(e, "ph", "C"))
            continue;
        int64_t ts = (int64_t)(json_object_get_double(get(e, "ts")) * 1000 + 0.5);
        int k = ts >= step_begin[1];
        assert_true(ts >= step_begin[k] && ts <= step_end[k]);
        uint64_t bytes = json_object_get_uint64(get(get(e, "args"), "bytes in use"));
        if (is(e, "name", "device")) {
            if (bytes > device_max[k])
                device_max[k] = bytes;
        } else {
            assert_string_equal(get_string(e, "name"), "host");
            if (bytes < host_min[k])
                host_min[k] = bytes;
            if (bytes > host_max)
                host_max = bytes;
        }
    }
    for (int k = 0; k < 2; k++) {
        assert_int_equal(device_max[k], traced[k].high_water_bytes);
        assert_int_equal(host_min[k], want.host_base);
    }
    assert_true(host_max > want.host_base); /* swap slots were live */
    assert_true(host_max <= tide_session_memplan(j.session)->host_bytes);
    json_object_put(doc);

    /* Switched on again on the same session: a new recording of one step. */
    check(tide_session_trace_start(j.session, &err), &err);
    job_step(&j, false);
    tide_session_trace_stop(j.session);
    assert_int_equal(tide_trace_steps(tide_session_trace(j.session), NULL), 1);
    assert_int_equal(tide_backend_host_alloc_count(NULL), host_allocs);
    job_free(&j);
}

/* An evaluation is recorded as one, with only the positions it runs; a recording can be cut. */
static void test_trace_evaluation_and_limit(void **state)
{
    (void)state;
    struct job j;
    job_new(&j, NULL);
    struct tide_error err = {0};
    struct expected want = expected_of(j.session);
    job_step(&j, false);
    check(tide_session_trace_start(j.session, &err), &err);
    job_step(&j, true);
    tide_session_trace_stop(j.session);
    uint32_t full;
    assert_int_equal(tide_trace_steps(tide_session_trace(j.session), &full), 1);
    assert_int_equal(full, 0);
    json_object *events;
    json_object *doc = trace_json(j.session, &events);
    size_t n = json_object_array_length(events), slices = 0, steps = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(events, i);
        if (is(e, "ph", "X") && is(e, "cat", "step")) {
            assert_string_equal(get_string(e, "name"), "evaluation after step 1");
            steps++;
        }
        slices += is(e, "ph", "X") && (is(e, "cat", "kernel") || is(e, "cat", "copy"));
    }
    assert_int_equal(steps, 3); /* one per track */
    assert_true(slices > 0);
    assert_true(slices < want.per_stream[0] + want.per_stream[1] + want.per_stream[2]);
    json_object_put(doc);

    char *text = (char *)"unchanged";
    size_t len = 7;
    assert_int_equal(tide_trace_json(tide_session_trace(j.session), 1000, &text, &len, &err),
                     TIDE_LIMIT);
    assert_null(text);
    assert_int_equal(len, 0);
    assert_non_null(strstr(err.message, "more than 1000 bytes"));
    job_free(&j);
}

/* Started and stopped before any step: the recording has no step, the JSON only the tracks. */
static void test_trace_off_records_nothing(void **state)
{
    (void)state;
    struct job j;
    job_new(&j, NULL);
    struct tide_error err = {0};
    check(tide_session_trace_start(j.session, &err), &err);
    tide_session_trace_stop(j.session);
    job_step(&j, false);
    job_step(&j, false);
    const struct tide_trace *trace = tide_session_trace(j.session);
    size_t slices = 1, flows = 1, counters = 1;
    tide_trace_counts(trace, &slices, &flows, &counters);
    assert_int_equal(tide_trace_steps(trace, NULL), 0);
    assert_int_equal(slices, 0);
    assert_int_equal(flows, 0);
    assert_int_equal(counters, 0);
    json_object *events;
    json_object *doc = trace_json(j.session, &events);
    size_t n = json_object_array_length(events);
    assert_int_equal(n, 7); /* process_name, and thread_name + thread_sort_index per track */
    for (size_t i = 0; i < n; i++)
        assert_true(is(json_object_array_get_idx(events, i), "ph", "M"));
    json_object_put(doc);
    job_free(&j);
}

/* A backend that cannot time events cannot trace, and says which backend. */
static void test_trace_unsupported_backend(void **state)
{
    (void)state;
    struct tide_backend *b;
    struct tide_error err = {0};
    check(tide_backend_cpu_new(&(struct tide_backend_options){.threads = 1}, &b, &err), &err);
    struct tide_backend_iface stripped = *b->iface;
    stripped.event_elapsed = NULL;
    const struct tide_backend_iface *saved = b->iface;
    b->iface = &stripped;
    struct job j;
    job_new(&j, b);
    assert_int_equal(tide_session_trace_start(j.session, &err), TIDE_UNSUPPORTED);
    assert_non_null(strstr(err.message, "the cpu backend cannot time its events"));
    job_step(&j, false); /* the step runs untraced */
    job_free(&j);
    b->iface = saved;
    tide_backend_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_swapping_steps),
        cmocka_unit_test(test_trace_evaluation_and_limit),
        cmocka_unit_test(test_trace_off_records_nothing),
        cmocka_unit_test(test_trace_unsupported_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
