/* SPDX-License-Identifier: MIT */
/*
 * fuzz_rpc.c: libFuzzer target for every RPC tided serves: the request's
 * decode and the checks its handler makes before it touches daemon state.
 *
 * Input: the first byte picks the method (rpc_methods.h: modulo the number
 * of methods of the services tided serves); the rest is unpacked with that
 * method's input descriptor, as server.c unpacks a request
 * (protobuf_c_message_unpack). Every message that unpacks must pack back to
 * a message that unpacks to the same bytes (protobuf-c and our generated
 * descriptors agree with each other; one exception of protobuf-c's, below).
 * Then, by method:
 *
 *  - Submit and Plan: the path of the handler and of the worker's COMPILE
 *    or PLAN task up to the session: resume_from's job id syntax
 *    (tided__job_id_valid), the budget (tided__job_budget, against a
 *    daemon whose only state is its configuration and device size), the
 *    device (tided_devices_choose: spec.device against a table of two
 *    devices, one half full, that nothing reserves on), then
 *    tided_spec_prepare (graph import and shape inference under the
 *    daemon's limits, spec.train and spec.memory, the feeds, the streamed
 *    Variables, for Submit the Variables' names), the session options, and the fetches
 *    (tided_spec_fetches) against the imported graph.
 *    The planner (autodiff, partitioning, memory plan, tide_session_plan_graph)
 *    runs only for graphs of at most PLAN_MAX_NODES nodes: see there.
 *  - Train: tided__train_check_feeds, the check every TrainRequest passes
 *    before a step, against a fixed job (a dense layer's spec, prepared at
 *    start through the same tided_spec_prepare). A batch it accepts must
 *    give every feed exactly the placeholder's byte length, and the harness
 *    reads every byte of it, so that a length check that lies is an ASan
 *    report rather than a silent over-read in a kernel.
 *  - WriteVariables: tided__write_check_chunk, the check every VariableChunk
 *    passes before it is written, against a fixed job (a float32 "w"
 *    [8, 3] streamed, its first 40 bytes written; "b" given with the
 *    graph). A chunk it accepts must be of "w", start at byte 40 and stay
 *    inside it, and the harness reads every byte of it.
 *  - The others (Get, List, Cancel, Watch, ReadVariables, Checkpoint, Trace,
 *    Status, Health Check and Watch) do nothing with a request but look a
 *    job id up in the job table, by string compare: their decode is all
 *    there is to fuzz.
 *
 * Whatever arrives, every function must return a status, with a message
 * when it refuses, without crashing, leaking or tripping a sanitizer.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/devices.h"
#include "daemon/jobs-impl.h"
#include "daemon/spec.h"
#include "runtime/backend.h"
#include "tests/fuzz/rpc_methods.h"
#include "tide/v1/tide.pb-c.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Where the harness reads accepted tensors' bytes to (so that the reads stay). */
volatile uint8_t bytes_read_sum;

/*
 * The planner runs for graphs of at most this many nodes. Planning grows
 * faster than the graph (autodiff doubles it, the memory passes sweep the
 * schedule per candidate policy), so a mutated 4,000-node graph would take
 * the fuzzer's time from the checks in front of it. A small graph reaches
 * most of the planner's branches a big one does, at about a millisecond a
 * plan (docs/reliability.md has the figures).
 */
#define PLAN_MAX_NODES 48

/* The daemon's limits and budgets, as small as fuzzing needs them. */
static const struct tide_graph_limits limits = {.max_nodes = 4096,
                                                .max_tensor_bytes = (uint64_t)64 << 20};
static struct tided_daemon daemon_config; /* only config and the device sizes are set */

/* Two devices of 1 GiB, the first half reserved, for the device choice (no backends). */
static struct tided_device device_table[2] = {
    {.index = 0, .total_bytes = (uint64_t)1 << 30, .reserved_bytes = (uint64_t)1 << 29, .jobs = 1},
    {.index = 1, .total_bytes = (uint64_t)1 << 30},
};
static const struct tided_devices devices = {.n = 2, .devices = device_table};
static struct tide_backend *backend;

/* The fixed job Train requests are checked against (the seed corpus's train_* inputs fit it). */
static struct tided_tensor_spec *train_feeds;
static uint32_t train_n_feeds;

/* FUZZ_RPC_VERBOSE=1 in the environment: each refusal's message on stderr (seeds, crashes). */
static bool verbose;

/* A refusal always says why. */
static void check_refusal(enum tide_status st, const struct tide_error *err)
{
    if (st != TIDE_OK && err->message[0] == '\0')
        abort();
    if (st != TIDE_OK && verbose)
        fprintf(stderr, "fuzz_rpc: refused (%s): %s\n", tide_strerror(st), err->message);
}

static void fuzz_spec(const Tide__V1__JobSpec *spec, bool submit)
{
    if (!spec || !spec->graph)
        return; /* refused by the handler before anything else */
    struct tide_error err = {0};
    if (submit && spec->resume_from[0] && !tided__job_id_valid(spec->resume_from))
        return; /* refused: "resume_from: ... is not a job id" */
    uint64_t budget;
    enum tide_status st = tided__job_budget(
        &daemon_config, spec->memory ? spec->memory->device_budget_bytes : 0, &budget, &err);
    check_refusal(st, &err);
    if (st != TIDE_OK)
        return;
    if (submit) {
        uint32_t device = UINT32_MAX;
        st = tided_devices_choose(&devices, budget, spec->device ? spec->device->index : -1,
                                  &device, &err);
        check_refusal(st, &err);
        if (st != TIDE_OK)
            return;
        if (device >= devices.n)
            abort(); /* a choice that is no device */
    }

    struct tided_spec_setup setup;
    struct tide_graph *g = NULL;
    struct tided_tensor_spec *feeds = NULL, *fetches = NULL;
    uint32_t n_feeds = 0, n_fetches = 0, n_variables = 0;
    char **variables = NULL;
    st = tided_spec_prepare(spec, &limits, budget, &setup, &g, &feeds, &n_feeds,
                            submit ? &variables : NULL, &n_variables, &err);
    check_refusal(st, &err);
    if (st == TIDE_OK) {
        /* What the job will check every batch against: one spec per JobSpec.feeds entry. */
        if (n_feeds != spec->n_feeds)
            abort();
        for (uint32_t i = 0; i < n_feeds; i++) {
            if (strcmp(feeds[i].name, spec->feeds[i]) != 0 ||
                feeds[i].nbytes !=
                    (uint64_t)tide_shape_numel(&feeds[i].shape) * tide_dtype_size(feeds[i].dtype))
                abort();
        }
        st = tided_spec_fetches(spec, g, &fetches, &n_fetches, &err);
        check_refusal(st, &err);
    }
    if (st == TIDE_OK && g->n_nodes <= PLAN_MAX_NODES) {
        struct tide_session_options o =
            tided_spec_session_options(spec, &setup, backend, budget, &limits);
        struct tide_session *s = NULL;
        struct tide_graph *planned = g;
        g = NULL; /* the session takes it, also on failure */
        st = tide_session_plan_graph(planned, &o, &s, &err);
        check_refusal(st, &err);
        if (verbose && st == TIDE_OK)
            fprintf(stderr, "fuzz_rpc: planned\n");
        const struct tide_plan_report *r = s ? tide_session_plan_report(s) : NULL;
        if (r) {
            Tide__V1__PlanReport *report =
                tided_spec_plan_report(r, tide_session_graph(s), tide_session_memplan(s));
            if (!report)
                abort();
            uint8_t *packed = malloc(tide__v1__plan_report__get_packed_size(report) + 1);
            if (!packed)
                abort();
            tide__v1__plan_report__pack(report, packed);
            free(packed);
            tided_plan_report_free(report);
        }
        tide_session_free(s);
    }
    tide_graph_free(g);
    tided_tensor_specs_free(feeds, n_feeds);
    tided_tensor_specs_free(fetches, n_fetches);
    for (uint32_t i = 0; i < n_variables; i++)
        free(variables[i]);
    free(variables);
}

static void fuzz_train(const Tide__V1__TrainRequest *m)
{
    if (m->finish && m->n_feeds == 0)
        return; /* the stream's end, no batch: rpc-train.c checks nothing */
    const char *names[8] = {0};
    const void *data[8] = {0};
    uint64_t bytes[8] = {0};
    char error[600] = "";
    if (!tided__train_check_feeds(train_feeds, train_n_feeds, m, names, data, bytes, error,
                                  sizeof(error))) {
        if (error[0] == '\0')
            abort();
        if (verbose)
            fprintf(stderr, "fuzz_rpc: refused: %s\n", error);
        return;
    }
    for (uint32_t i = 0; i < train_n_feeds; i++) {
        if (!names[i] || bytes[i] != train_feeds[i].nbytes)
            abort();
        for (uint64_t b = 0; b < bytes[i]; b++)
            bytes_read_sum ^= ((const uint8_t *)data[i])[b];
    }
}

/* The fixed write job: "w" float32 [8, 3] streamed, 40 of its 96 bytes written; "b" not streamed.
 */
static void fuzz_write(const Tide__V1__VariableChunk *m)
{
    static struct tided_tensor_spec streamed[1];
    static const uint64_t written[1] = {40};
    static char *variables[] = {"w", "b"};
    streamed[0] = (struct tided_tensor_spec){.name = "w",
                                             .dtype = TIDE_DTYPE_FLOAT32,
                                             .shape = tide_shape_make(2, (int64_t[]){8, 3}),
                                             .nbytes = 96};
    uint32_t index = UINT32_MAX;
    grpc_status_code code = GRPC_STATUS_OK;
    char error[700] = "";
    if (!tided__write_check_chunk("j-0123456789abcdef", streamed, 1, written, variables, 2, m,
                                  &index, &code, error, sizeof(error))) {
        if (error[0] == '\0' || code == GRPC_STATUS_OK)
            abort();
        if (verbose)
            fprintf(stderr, "fuzz_rpc: refused: %s\n", error);
        return;
    }
    if (index != 0 || m->offset != written[0] || m->data.len == 0 ||
        m->data.len > streamed[0].nbytes - written[0])
        abort();
    for (size_t b = 0; b < m->data.len; b++)
        bytes_read_sum ^= m->data.data[b];
}

/* Whether m or a message inside it kept fields its descriptor does not know. */
static bool has_unknown_fields(const ProtobufCMessage *m)
{
    if (m->n_unknown_fields)
        return true;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE)
            continue;
        const char *base = (const char *)m;
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id)
            continue; /* another member of the oneof is set */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *items = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++) {
                if (has_unknown_fields(items[k]))
                    return true;
            }
        } else {
            const ProtobufCMessage *sub = *(const ProtobufCMessage *const *)(base + f->offset);
            if (sub && has_unknown_fields(sub))
                return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const ProtobufCMethodDescriptor *method = fuzz_rpc_method(data[0]);
    ProtobufCMessage *m = protobuf_c_message_unpack(method->input, NULL, size - 1, data + 1);
    if (!m)
        return 0; /* server.c answers INVALID_ARGUMENT: "cannot parse" */

    /*
     * Decode, encode and decode again give the same message. The one
     * exception is protobuf-c's, not ours: it accepts an unknown field
     * numbered 0 when the tag takes two bytes or more ("81 00"), keeps it,
     * writes it back as a one-byte tag ("01") and refuses that. So a message
     * that carried unknown fields may not decode again (docs/reliability.md).
     */
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *packed = malloc(len + 1);
    if (!packed || protobuf_c_message_pack(m, packed) != len)
        abort();
    ProtobufCMessage *again = protobuf_c_message_unpack(method->input, NULL, len, packed);
    if (!again && !has_unknown_fields(m))
        abort();
    if (again) {
        uint8_t *packed2 = malloc(len + 1);
        if (!packed2 || protobuf_c_message_get_packed_size(again) != len ||
            protobuf_c_message_pack(again, packed2) != len || memcmp(packed, packed2, len) != 0)
            abort();
        free(packed2);
        protobuf_c_message_free_unpacked(again, NULL);
    }
    free(packed);

    if (method->input == &tide__v1__submit_request__descriptor)
        fuzz_spec(((Tide__V1__SubmitRequest *)m)->spec, true);
    else if (method->input == &tide__v1__plan_request__descriptor)
        fuzz_spec(((Tide__V1__PlanRequest *)m)->spec, false);
    else if (method->input == &tide__v1__train_request__descriptor)
        fuzz_train((Tide__V1__TrainRequest *)m);
    else if (method->input == &tide__v1__variable_chunk__descriptor)
        fuzz_write((Tide__V1__VariableChunk *)m);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}

/* ============================================================================
 * The fixed state: the daemon's configuration and the job Train requests feed
 * ========================================================================== */

static _Noreturn void die(const char *what, const struct tide_error *err)
{
    fprintf(stderr, "fuzz_rpc: %s: %s\n", what, err ? err->message : "out of memory");
    exit(1);
}

/*
 * The Train requests' job: x float32 [4,8] and labels int32 [4] feed a
 * dense layer and a cross entropy (make_rpc_corpus's train_* seeds feed it).
 */
static void train_job_new(void)
{
    struct tide_error err = {0};
    struct tide_graph *g = tide_graph_new();
    uint32_t x, labels, w, mm, xent;
    int64_t x_dims[] = {4, 8}, label_dims[] = {4}, w_dims[] = {8, 3};
    struct tide_shape xs = tide_shape_make(2, x_dims), ls = tide_shape_make(1, label_dims),
                      ws = tide_shape_make(2, w_dims);
    if (!g || tide_graph_add_node(g, TIDE_OP_PLACEHOLDER, "x", &x, &err) != TIDE_OK ||
        tide_graph_add_node(g, TIDE_OP_PLACEHOLDER, "labels", &labels, &err) != TIDE_OK ||
        tide_graph_add_node(g, TIDE_OP_VARIABLE, "w", &w, &err) != TIDE_OK ||
        tide_graph_add_node(g, TIDE_OP_MATMUL, "logits", &mm, &err) != TIDE_OK ||
        tide_graph_add_node(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", &xent, &err) != TIDE_OK)
        die("train job", &err);
    tide_attr_set_dtype(g, x, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, x, TIDE_ATTR_PLACEHOLDER_shape, &xs);
    tide_attr_set_dtype(g, labels, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_INT32);
    tide_attr_set_shape(g, labels, TIDE_ATTR_PLACEHOLDER_shape, &ls);
    tide_attr_set_dtype(g, w, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, w, TIDE_ATTR_VARIABLE_shape, &ws);
    struct tide_edge mm_in[] = {{x, 0}, {w, 0}}, xent_in[] = {{mm, 0}, {labels, 0}};
    if (tide_graph_set_inputs(g, mm, mm_in, 2, &err) != TIDE_OK ||
        tide_graph_set_inputs(g, xent, xent_in, 2, &err) != TIDE_OK)
        die("train job", &err);
    void *bytes;
    size_t len;
    if (tide_graph_export(g, &bytes, &len, &err) != TIDE_OK)
        die("train job", &err);
    tide_graph_free(g);

    Tide__V1__JobSpec spec = TIDE__V1__JOB_SPEC__INIT;
    char *feed_names[] = {"x", "labels"};
    spec.feeds = feed_names;
    spec.n_feeds = 2;
    spec.graph = tide__v1__graph__unpack(NULL, len, bytes);
    free(bytes);
    if (!spec.graph)
        die("train job", NULL);
    struct tided_spec_setup setup;
    struct tide_graph *imported = NULL;
    if (tided_spec_prepare(&spec, &limits, 1 << 20, &setup, &imported, &train_feeds, &train_n_feeds,
                           NULL, NULL, &err) != TIDE_OK)
        die("train job", &err);
    tide_graph_free(imported);
    tide__v1__graph__free_unpacked(spec.graph, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    verbose = getenv("FUZZ_RPC_VERBOSE") != NULL;
    daemon_config.device_bytes = (uint64_t)2 << 30;
    daemon_config.device_largest_bytes = (uint64_t)1 << 30;
    daemon_config.config.default_budget = (uint64_t)256 << 20;
    daemon_config.config.max_budget = (uint64_t)512 << 20;
    struct tide_error err = {0};
    if (tide_backend_create("cpu", &(struct tide_backend_options){.device_bytes = 1 << 30},
                            &backend, &err) != TIDE_OK)
        die("cpu backend", &err);
    train_job_new();
    return 0;
}
