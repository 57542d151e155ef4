/* SPDX-License-Identifier: MIT */
/*
 * test_weights.c: weights of any size (issue #13, item 3), on the real
 * tided driven over its real Unix socket by libtide and, for the streams
 * libtide would never send, by raw gRPC calls.
 *
 * One tided serves every test, with a 2 GiB emulated device and an 8 MiB
 * max-message, far below the model's weights:
 *
 *  - a model with 309 MiB of weights (one MatMul by a 9000 x 9000 float
 *    Variable given by value, tide_builder_variable_value) is planned and
 *    submitted through tide_client_plan and tide_client_submit, which send
 *    the graph without the value and stream it (WriteVariables); the job
 *    trains one SGD step of ReduceSum(x W) with x picking three rows of W,
 *    whose gradient is 1 on those rows and 0 elsewhere: the loss is the sum
 *    of the three rows as given, and W read back (ReadVariables, one 309 MiB
 *    reply) is the given values with lr subtracted from those rows, every
 *    other byte untouched. A chunk placed at a wrong offset, a value lost or
 *    a step run on the zeros the init left would each fail it. It prints
 *    how long each part took and tided's peak RSS;
 *  - streamed values by hand (a JobSpec with streamed_variables, chunks sent
 *    raw): Train is refused naming the incomplete Variable and the bytes
 *    written, and each malformed stream gets its error: no job named, an
 *    unknown job, another user's job (as uid 65534, when run as root), an
 *    unknown name, a Variable whose value came with the graph, an empty or
 *    oversized chunk, a chunk past the end, bytes given twice, bytes left
 *    out; after the values are whole they read back exactly as written, the
 *    job trains, and then takes no more values. A spec naming a node that is
 *    not a Variable, a Variable twice, or streamed values with resume_from is
 *    refused at Submit; a job that streams nothing takes no chunk;
 *  - SIGTERM while a job's values are incomplete fails it without a
 *    checkpoint, saying why (after the restart too).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <grpc/grpc_security.h>
#pragma GCC diagnostic pop

#include "child.h"
#include "daemon_child.h"
#include "tide/client.h"
#include "tide/graph.h"
#include "tide/v1/tide.pb-c.h"

#define MIB (UINT64_C(1) << 20)

/* The big model: x [1, N] times W [N, N], N * N * 4 bytes = 309 MiB. */
#define BIG_N 9000
/* The rows of W that x picks, and the step's learning rate. */
static const int64_t picked_rows[] = {0, 4500, BIG_N - 1};
#define BIG_LR 0.5f

/* The small hand-streamed Variable: w [300, 300], 360,000 bytes. */
#define SMALL_N     300
#define SMALL_BYTES ((uint64_t)SMALL_N * SMALL_N * 4)

/* Who "another user" is (tests run as root in CI). */
#define OTHER_UID 65534
#define OTHER_GID 65534

static struct tide_test_daemon *daemon_;
/* tided's flags: a device for the big job, a max-message far below its weights. */
static const char *const daemon_flags[] = {"--device-memory",
                                           "2G",
                                           "--max-budget",
                                           "2G",
                                           "--default-budget",
                                           "64M",
                                           "--max-message",
                                           "8M",
                                           NULL};
static char self_path[4096];

/* ============================================================================
 * The daemon and the client
 * ========================================================================== */

static int group_setup(void **state)
{
    (void)state;
    daemon_ = calloc(1, sizeof(*daemon_));
    if (!daemon_ || !tide_test_daemon_init(daemon_, "weights")) {
        free(daemon_);
        daemon_ = NULL;
        return 0; /* every test skips */
    }
    if (!tide_test_daemon_start(daemon_, daemon_flags)) {
        tide_test_daemon_finish(daemon_);
        free(daemon_);
        daemon_ = NULL;
        return -1;
    }
    /* Let "another user" reach the socket. */
    chmod(daemon_->dir, 0755);
    chmod(daemon_->socket_path, 0666);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (!daemon_)
        return 0;
    int code = tide_test_daemon_stop(daemon_);
    tide_test_daemon_finish(daemon_);
    free(daemon_);
    daemon_ = NULL;
    return code == 0 ? 0 : -1;
}

#define NEED_DAEMON()                                                                              \
    do {                                                                                           \
        if (!daemon_) {                                                                            \
            fprintf(stderr, "skipped: tided was not built\n");                                     \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static tide_client *connect_client(void)
{
    char target[600];
    snprintf(target, sizeof(target), "unix:%s", daemon_->socket_path);
    struct tide_client_options o = {
        .connect_timeout_ms = 5000, .call_timeout_ms = 120000, .stream_timeout_ms = 120000};
    tide_client *c = NULL;
    if (tide_client_connect(target, &o, &c) != 0)
        fail_msg("connect %s: %s", target, tide_client_error_message(c));
    return c;
}

#define CHECK_OK(c, call)                                                                          \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != 0)                                                                            \
            fail_msg("%s: %s: %s", #call, tide_code_name(code_), tide_client_error_message(c));    \
    } while (0)

/* Asserts that the client's last call failed with code and a message containing text. */
#define CHECK_CODE(c, call, code, text)                                                            \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        const char *m_ = tide_client_error_message(c);                                             \
        if (code_ != (code) || !strstr(m_, (text)))                                                \
            fail_msg("%s: want %s with \"%s\", got %s: %s", #call, tide_code_name(code), (text),   \
                     tide_code_name(code_), m_);                                                   \
    } while (0)

static double now_s(void)
{
    return tide_test_now_s();
}

/* tided's peak resident set (VmHWM) in bytes; 0 when unknown. */
static uint64_t daemon_peak_rss(void)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)daemon_->pid);
    FILE *f = fopen(path, "r");
    uint64_t kib = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "VmHWM: %" SCNu64, &kib) == 1)
            break;
    }
    if (f)
        fclose(f);
    return kib * 1024;
}

/* ============================================================================
 * The 309 MiB model through libtide
 * ========================================================================== */

/* W's given value: distinct, exactly representable values, never all zero. */
static float given_w(int64_t i, int64_t j)
{
    return (float)((i * 7 + j * 13) % 1024) * 0.25f - 100.0f;
}

struct one_step {
    const float *x;
    int fed;
    int results;
    float loss;
    uint64_t step;
};

static int feed_once(void *user, tide_feeds *feeds)
{
    struct one_step *s = user;
    if (s->fed)
        return 0;
    s->fed = 1;
    int64_t dims[2] = {1, BIG_N};
    return tide_feeds_set(feeds, "x", TIDE_DT_FLOAT32, 2, dims, s->x) == 0 ? 1 : -1;
}

static int on_result(void *user, const struct tide_step_result *r)
{
    struct one_step *s = user;
    s->results++;
    s->loss = r->loss;
    s->step = r->step;
    return 0;
}

static void test_weights_over_max_message(void **state)
{
    (void)state;
    NEED_DAEMON();
    const uint64_t n = (uint64_t)BIG_N * BIG_N, bytes = n * sizeof(float);
    float *w = malloc(bytes);
    assert_non_null(w);
    for (int64_t i = 0; i < BIG_N; i++)
        for (int64_t j = 0; j < BIG_N; j++)
            w[i * BIG_N + j] = given_w(i, j);

    tide_builder *b = tide_builder_new();
    assert_non_null(b);
    int64_t xdims[2] = {1, BIG_N}, wdims[2] = {BIG_N, BIG_N};
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, xdims);
    tide_ref wv = tide_builder_variable_value(b, "w", 2, wdims, w);
    tide_ref y = tide_builder_matmul(b, "y", x, wv, false, false);
    tide_builder_reduce_sum(b, "loss", y, NULL, 0, false);
    uint8_t *graph = NULL;
    size_t graph_len = 0;
    if (tide_builder_serialize(b, &graph, &graph_len) != 0)
        fail_msg("serialize: %s", tide_builder_error(b));
    tide_builder_free(b);
    assert_true(graph_len > bytes); /* the value is in the graph: 38 times max-message */

    struct tide_job_spec spec;
    tide_job_spec_init(&spec);
    spec.name = "weights-309M";
    spec.graph = graph;
    spec.graph_len = graph_len;
    spec.optimizer = TIDE_JOB_OPTIMIZER_SGD;
    spec.learning_rate = BIG_LR;
    spec.feeds = (const char *const[]){"x"};
    spec.n_feeds = 1;
    spec.budget_bytes = 1536 * MIB;
    spec.vars_home = TIDE_JOB_VARS_HOME_HOST; /* W lives in the host pool, written there */

    tide_client *c = connect_client();
    double t0 = now_s();
    struct tide_job_plan_report plan;
    CHECK_OK(c, tide_client_plan(c, &spec, &plan));
    assert_true(plan.fits);
    assert_true(plan.host_bytes >= bytes);
    tide_job_plan_report_clear(&plan);
    double t1 = now_s();
    struct tide_job_info job;
    CHECK_OK(c, tide_client_submit(c, &spec, &job));
    double t2 = now_s();
    uint64_t rss_submitted = daemon_peak_rss();
    assert_int_equal(job.state, TIDE_JOB_READY);
    free(graph);

    float *xv = calloc(BIG_N, sizeof(float));
    assert_non_null(xv);
    for (size_t k = 0; k < sizeof(picked_rows) / sizeof(picked_rows[0]); k++)
        xv[picked_rows[k]] = 1.0f;
    struct one_step s = {.x = xv};
    CHECK_OK(c, tide_client_train(c, job.id, feed_once, on_result, &s));
    double t3 = now_s();
    assert_int_equal(s.results, 1);
    assert_int_equal(s.step, 1);
    /* The loss is the sum of the picked rows as given: the step ran on the streamed values. */
    double want_loss = 0;
    for (size_t k = 0; k < sizeof(picked_rows) / sizeof(picked_rows[0]); k++)
        for (int64_t j = 0; j < BIG_N; j++)
            want_loss += given_w(picked_rows[k], j);
    if (fabs(s.loss - want_loss) > 1e-4 * fabs(want_loss))
        fail_msg("loss %.9g, want %.9g (the sum of the picked rows of the given W)", s.loss,
                 want_loss);

    tide_variables *v = NULL;
    const char *names[] = {"w"};
    CHECK_OK(c, tide_client_read_variables(c, job.id, names, 1, &v));
    double t4 = now_s();
    const struct tide_tensor *got = tide_variables_find(v, "w");
    assert_non_null(got);
    assert_int_equal(got->bytes, bytes);
    /* One SGD step: the picked rows lose lr (their gradient is 1), the others are untouched. */
    for (size_t k = 0; k < sizeof(picked_rows) / sizeof(picked_rows[0]); k++)
        for (int64_t j = 0; j < BIG_N; j++)
            w[picked_rows[k] * BIG_N + j] -= BIG_LR;
    const float *gw = got->data;
    for (uint64_t e = 0; e < n; e++) {
        if (gw[e] != w[e])
            fail_msg("w[%" PRIu64 "][%" PRIu64 "] is %.9g, want %.9g", e / BIG_N, e % BIG_N, gw[e],
                     w[e]);
    }
    fprintf(stderr,
            "309 MiB of weights over an 8 MiB max-message: plan %.2f s, submit with the values "
            "streamed %.2f s, one step %.2f s, read back in pages %.2f s; tided's peak RSS "
            "%.0f MiB once submitted, %.0f MiB at the end (the step's arena included)\n",
            t1 - t0, t2 - t1, t3 - t2, t4 - t3, (double)rss_submitted / (double)MIB,
            (double)daemon_peak_rss() / (double)MIB);
    tide_variables_free(v);
    CHECK_OK(c, tide_client_finish(c, job.id));
    free(xv);
    free(w);
    tide_client_free(c);
}

/* ============================================================================
 * Streams by hand
 * ========================================================================== */

/* What a raw call came back with. */
struct raw_result {
    int status;
    char message[1024];
    uint64_t bytes;      /* WriteVariablesResponse.bytes */
    size_t n_incomplete; /* ... and its incomplete list */
    char incomplete[256];
};

/*
 * A call of method with n messages, each packed with protobuf-c and sent as
 * it is (n 0: the client half-closes at once), against socket; the reply,
 * if any, is unpacked as reply_type into *reply (NULL: dropped).
 */
static void raw_call(const char *socket, const char *method, const ProtobufCMessage *const *chunks,
                     size_t n, const ProtobufCMessageDescriptor *reply_type,
                     ProtobufCMessage **reply, struct raw_result *r)
{
    memset(r, 0, sizeof(*r));
    char target[600];
    snprintf(target, sizeof(target), "unix:%s", socket);
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                    .key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                    .value.integer = -1};
    grpc_channel_args args = {.num_args = 1, .args = &arg};
    grpc_channel *channel = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(60000, GPR_TIMESPAN));
    grpc_slice path = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, path,
                                               NULL, deadline, NULL);
    grpc_slice_unref(path);
    void *tag = (void *)1;
    bool sent = true;
    for (size_t i = 0; i <= n && sent; i++) {
        grpc_op ops[2];
        size_t k = 0;
        memset(ops, 0, sizeof(ops));
        if (i == 0)
            ops[k++].op = GRPC_OP_SEND_INITIAL_METADATA;
        grpc_byte_buffer *buffer = NULL;
        if (i < n) {
            size_t len = protobuf_c_message_get_packed_size(chunks[i]);
            grpc_slice slice = grpc_slice_malloc(len);
            protobuf_c_message_pack(chunks[i], GRPC_SLICE_START_PTR(slice));
            buffer = grpc_raw_byte_buffer_create(&slice, 1);
            grpc_slice_unref(slice);
            ops[k].op = GRPC_OP_SEND_MESSAGE;
            ops[k++].data.send_message.send_message = buffer;
        } else {
            ops[k++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        }
        sent =
            grpc_call_start_batch(call, ops, k, tag, NULL) == GRPC_CALL_OK &&
            grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).success;
        if (buffer)
            grpc_byte_buffer_destroy(buffer);
    }
    grpc_byte_buffer *response = NULL;
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &response;
    ops[2].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[2].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[2].data.recv_status_on_client.status = &status;
    ops[2].data.recv_status_on_client.status_details = &details;
    if (grpc_call_start_batch(call, ops, 3, tag, NULL) == GRPC_CALL_OK)
        grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    r->status = (int)status;
    char *text = grpc_slice_to_c_string(details);
    snprintf(r->message, sizeof(r->message), "%s", text ? text : "");
    gpr_free(text);
    grpc_slice_unref(details);
    if (reply)
        *reply = NULL;
    if (response) {
        grpc_byte_buffer_reader reader;
        if (reply && grpc_byte_buffer_reader_init(&reader, response)) {
            grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
            *reply = protobuf_c_message_unpack(reply_type, NULL, GRPC_SLICE_LENGTH(s),
                                               GRPC_SLICE_START_PTR(s));
            grpc_slice_unref(s);
            grpc_byte_buffer_reader_destroy(&reader);
        }
        grpc_byte_buffer_destroy(response);
    }
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(channel);
    grpc_shutdown();
}

/* A WriteVariables stream of n chunks (n 0: the client half-closes at once). */
static void raw_write(const char *socket, const Tide__V1__VariableChunk *const *chunks, size_t n,
                      struct raw_result *r)
{
    const ProtobufCMessage *messages[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++)
        messages[i] = &chunks[i]->base;
    ProtobufCMessage *reply = NULL;
    raw_call(socket, "/tide.v1.Jobs/WriteVariables", messages, n,
             &tide__v1__write_variables_response__descriptor, &reply, r);
    if (reply) {
        Tide__V1__WriteVariablesResponse *m = (Tide__V1__WriteVariablesResponse *)reply;
        r->bytes = m->bytes;
        r->n_incomplete = m->n_incomplete;
        if (m->n_incomplete)
            snprintf(r->incomplete, sizeof(r->incomplete), "%s", m->incomplete[0]);
        protobuf_c_message_free_unpacked(reply, NULL);
    }
}

/* A chunk of data[offset, offset + len) of name for job (job may be ""). */
static Tide__V1__VariableChunk chunk_of(const char *job, const char *name, uint64_t offset,
                                        const uint8_t *data, size_t len)
{
    Tide__V1__VariableChunk c = TIDE__V1__VARIABLE_CHUNK__INIT;
    c.job_id = (char *)job;
    c.name = (char *)name;
    c.offset = offset;
    c.data.data = (uint8_t *)data + offset;
    c.data.len = len;
    return c;
}

/* One chunk on its own stream; asserts the status and that the message contains text. */
static void write_one(const Tide__V1__VariableChunk *chunk, int want_status, const char *text)
{
    struct raw_result r;
    raw_write(daemon_->socket_path, &chunk, 1, &r);
    if (r.status != want_status || !strstr(r.message, text))
        fail_msg("chunk of \"%s\" at %" PRIu64 " (%zu bytes): want status %d with \"%s\", got %d: "
                 "%s",
                 chunk->name, chunk->offset, chunk->data.len, want_status, text, r.status,
                 r.message);
}

/*
 * The small model's JobSpec, packed: w [300, 300] float32 with init "zeros"
 * (its value to be streamed when streamed names it), b [300] given by value,
 * loss = ReduceSum(x w + b), SGD.
 */
static uint8_t *small_spec(const char *const *streamed, size_t n_streamed, const char *resume_from,
                           size_t *len)
{
    tide_builder *b = tide_builder_new();
    assert_non_null(b);
    int64_t xdims[2] = {2, SMALL_N}, wdims[2] = {SMALL_N, SMALL_N}, bdims[1] = {SMALL_N};
    float bias[SMALL_N];
    for (int i = 0; i < SMALL_N; i++)
        bias[i] = (float)i;
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, xdims);
    tide_ref w = tide_builder_variable(b, "w", 2, wdims, "zeros", 1.0f, true);
    tide_ref bv = tide_builder_variable_value(b, "b", 1, bdims, bias);
    tide_ref y = tide_builder_add(b, "y", tide_builder_matmul(b, "xw", x, w, false, false), bv);
    tide_builder_reduce_sum(b, "loss", y, NULL, 0, false);
    uint8_t *graph_bytes = NULL;
    size_t graph_len = 0;
    if (tide_builder_serialize(b, &graph_bytes, &graph_len) != 0)
        fail_msg("serialize: %s", tide_builder_error(b));
    tide_builder_free(b);

    Tide__V1__Graph *graph = tide__v1__graph__unpack(NULL, graph_len, graph_bytes);
    assert_non_null(graph);
    free(graph_bytes);
    Tide__V1__SGD sgd = TIDE__V1__SGD__INIT;
    sgd.learning_rate = 0.5f;
    Tide__V1__TrainSpec train = TIDE__V1__TRAIN_SPEC__INIT;
    train.loss = (char *)"loss";
    train.optimizer_case = TIDE__V1__TRAIN_SPEC__OPTIMIZER_SGD;
    train.sgd = &sgd;
    Tide__V1__MemoryPolicy memory = TIDE__V1__MEMORY_POLICY__INIT;
    memory.device_budget_bytes = 32 * MIB;
    Tide__V1__JobSpec spec = TIDE__V1__JOB_SPEC__INIT;
    spec.name = (char *)"weights-by-hand";
    spec.graph = graph;
    spec.train = &train;
    spec.memory = &memory;
    char *feeds[] = {(char *)"x"};
    spec.n_feeds = 1;
    spec.feeds = feeds;
    spec.n_streamed_variables = n_streamed;
    spec.streamed_variables = (char **)streamed;
    spec.resume_from = (char *)(resume_from ? resume_from : "");
    *len = tide__v1__job_spec__get_packed_size(&spec);
    uint8_t *out = malloc(*len);
    assert_non_null(out);
    tide__v1__job_spec__pack(&spec, out);
    tide__v1__graph__free_unpacked(graph, NULL);
    return out;
}

static int feed_small(void *user, tide_feeds *feeds)
{
    int *fed = user;
    if (*fed)
        return 0;
    *fed = 1;
    float x[2 * SMALL_N];
    for (int i = 0; i < 2 * SMALL_N; i++)
        x[i] = (float)(i % 3);
    int64_t dims[2] = {2, SMALL_N};
    return tide_feeds_set(feeds, "x", TIDE_DT_FLOAT32, 2, dims, x) == 0 ? 1 : -1;
}

/* As another user: a raw WriteVariables chunk for job_id; prints the status and message. */
static int helper_other_user(const char *socket, const char *job_id)
{
    static uint8_t data[16];
    Tide__V1__VariableChunk chunk = chunk_of(job_id, "w", 0, data, sizeof(data));
    const Tide__V1__VariableChunk *chunks[] = {&chunk};
    struct raw_result r;
    raw_write(socket, chunks, 1, &r);
    printf("%d %s\n", r.status, r.message);
    return r.status == GRPC_STATUS_PERMISSION_DENIED ? 0 : 1;
}

static void test_streams_by_hand(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client();
    uint8_t *values = calloc(2, SMALL_BYTES); /* room for the chunks that go past the end */
    assert_non_null(values);
    for (uint64_t i = 0; i < SMALL_BYTES / 4; i++)
        ((float *)values)[i] = (float)(i % 977) * 0.125f;

    /* Refused at Submit: each names the entry. */
    size_t len;
    uint8_t *bad = small_spec((const char *const[]){"y"}, 1, NULL, &len);
    CHECK_CODE(c, tide_client_submit_bytes(c, bad, len, NULL), TIDE_CODE_INVALID_ARGUMENT,
               "streamed_variables[0] \"y\": node \"y\" is a Add, not a Variable");
    free(bad);
    bad = small_spec((const char *const[]){"w", "w"}, 2, NULL, &len);
    CHECK_CODE(c, tide_client_submit_bytes(c, bad, len, NULL), TIDE_CODE_INVALID_ARGUMENT,
               "streamed_variables[1] \"w\": listed twice");
    free(bad);
    bad = small_spec((const char *const[]){"w"}, 1, "j-0123456789abcdef", &len);
    CHECK_CODE(c, tide_client_submit_bytes(c, bad, len, NULL), TIDE_CODE_INVALID_ARGUMENT,
               "streamed_variables and resume_from");
    free(bad);

    /* A job that streams nothing takes no chunk. */
    uint8_t *plain = small_spec(NULL, 0, NULL, &len);
    struct tide_job_info other;
    CHECK_OK(c, tide_client_submit_bytes(c, plain, len, &other));
    free(plain);
    Tide__V1__VariableChunk k = chunk_of(other.id, "w", 0, values, 1024);
    write_one(&k, GRPC_STATUS_FAILED_PRECONDITION, "streams no Variable");
    CHECK_OK(c, tide_client_cancel(c, other.id, NULL));

    uint8_t *spec = small_spec((const char *const[]){"w"}, 1, NULL, &len);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_submit_bytes(c, spec, len, &job));
    free(spec);
    const char *id = job.id;
    int fed = 0;
    CHECK_CODE(c, tide_client_train(c, id, feed_small, NULL, &fed), TIDE_CODE_FAILED_PRECONDITION,
               "the values of 1 streamed Variable(s) are incomplete: \"w\" (0 of 360000 bytes)");

    /* The first half, in two chunks of one stream, the job named by the first only. */
    Tide__V1__VariableChunk a = chunk_of(id, "w", 0, values, 100000);
    Tide__V1__VariableChunk b = chunk_of("", "w", 100000, values, 80000);
    struct raw_result r;
    raw_write(daemon_->socket_path, (const Tide__V1__VariableChunk *const[]){&a, &b}, 2, &r);
    if (r.status != GRPC_STATUS_OK)
        fail_msg("the first half: status %d: %s", r.status, r.message);
    assert_int_equal(r.bytes, 180000);
    assert_int_equal(r.n_incomplete, 1);
    assert_string_equal(r.incomplete, "w");
    fed = 0;
    CHECK_CODE(c, tide_client_train(c, id, feed_small, NULL, &fed), TIDE_CODE_FAILED_PRECONDITION,
               "\"w\" (180000 of 360000 bytes)");

    /* Malformed streams: each its error; none writes a byte. */
    raw_write(daemon_->socket_path, NULL, 0, &r);
    assert_int_equal(r.status, GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(r.message, "the first VariableChunk must name the job"));
    k = chunk_of("", "w", 180000, values, 1000);
    write_one(&k, GRPC_STATUS_INVALID_ARGUMENT, "job_id: empty");
    k = chunk_of("j-00000000000000ff", "w", 180000, values, 1000);
    write_one(&k, GRPC_STATUS_NOT_FOUND, "no job \"j-00000000000000ff\"");
    k = chunk_of(id, "nope", 0, values, 1000);
    write_one(&k, GRPC_STATUS_NOT_FOUND, "VariableChunk.name \"nope\": job");
    k = chunk_of(id, "b", 0, values, 1000);
    write_one(&k, GRPC_STATUS_NOT_FOUND, "not in its JobSpec.streamed_variables");
    k = chunk_of(id, "w", 180000, values, 0);
    write_one(&k, GRPC_STATUS_INVALID_ARGUMENT, "0 bytes of data; a chunk holds 1 byte to");
    uint8_t *huge = calloc(1, (4u << 20) + 1);
    assert_non_null(huge);
    k = chunk_of(id, "w", 0, huge, (4u << 20) + 1);
    k.offset = 180000;
    write_one(&k, GRPC_STATUS_INVALID_ARGUMENT, "4194305 bytes of data");
    free(huge);
    k = chunk_of(id, "w", 180000, values, 180001);
    write_one(&k, GRPC_STATUS_OUT_OF_RANGE,
              "180001 bytes at offset 180000 go past the end of the Variable, which has 360000 "
              "(float32 [300, 300])");
    k = chunk_of(id, "w", 170000, values, 20000);
    write_one(&k, GRPC_STATUS_INVALID_ARGUMENT,
              "bytes 170000 to 180000 were written already; its next chunk starts at offset "
              "180000");
    k = chunk_of(id, "w", 190000, values, 1000);
    write_one(&k, GRPC_STATUS_INVALID_ARGUMENT, "bytes 180000 to 190000 are missing");
    /* A stream that goes wrong half-way keeps what it wrote before. */
    a = chunk_of(id, "w", 180000, values, 20000);
    b = chunk_of(id, "w", 180000, values, 20000);
    raw_write(daemon_->socket_path, (const Tide__V1__VariableChunk *const[]){&a, &b}, 2, &r);
    assert_int_equal(r.status, GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(r.message, "its next chunk starts at offset 200000"));

    /* Another user's job. */
    if (geteuid() == 0) {
        struct tide_test_run *run = malloc(sizeof(*run));
        assert_non_null(run);
        char *helper[] = {self_path, (char *)"--helper-other-user", daemon_->socket_path,
                          (char *)id, NULL};
        tide_test_run_program(helper, OTHER_UID, OTHER_GID, run);
        if (run->exit_code != 0 || !strstr(run->out, "belongs to uid"))
            fail_msg("another user's chunk: exit %d: %s%s", run->exit_code, run->out, run->err);
        free(run);
    } else {
        fprintf(stderr, "another user's job: not checked (not root)\n");
    }

    /* The rest: whole, the values read back exactly, the job trains, and takes no more. */
    k = chunk_of(id, "w", 200000, values, SMALL_BYTES - 200000);
    write_one(&k, GRPC_STATUS_OK, "");
    tide_variables *v = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, (const char *const[]){"w"}, 1, &v));
    const struct tide_tensor *w = tide_variables_find(v, "w");
    assert_non_null(w);
    assert_int_equal(w->bytes, SMALL_BYTES);
    assert_memory_equal(w->data, values, SMALL_BYTES);
    tide_variables_free(v);
    fed = 0;
    CHECK_OK(c, tide_client_train(c, id, feed_small, NULL, &fed));
    k = chunk_of(id, "w", 0, values, 1000);
    write_one(&k, GRPC_STATUS_FAILED_PRECONDITION, "has run 1 step(s)");
    tide_variables *live = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &live));
    assert_int_equal(tide_variables_count(live), 2);
    assert_int_equal(tide_variables_step(live), 1);
    CHECK_OK(c, tide_client_finish(c, id));
    k = chunk_of(id, "w", 0, values, 1000);
    write_one(&k, GRPC_STATUS_FAILED_PRECONDITION, "is DONE");

    /* Read from the checkpoint now, page by page: the same bytes. */
    tide_variables *saved = NULL;
    /* The final checkpoint is written after the job is DONE: wait for it (a hang, not a timing). */
    double deadline = now_s() + 60;
    while (tide_client_read_variables(c, id, NULL, 0, &saved) == TIDE_CODE_FAILED_PRECONDITION &&
           now_s() < deadline)
        tide_test_sleep_ms(50);
    if (!saved)
        fail_msg("read from the checkpoint: %s", tide_client_error_message(c));
    assert_int_equal(tide_variables_count(saved), 2);
    for (size_t i = 0; i < 2; i++) {
        const struct tide_tensor *x = tide_variables_at(live, i);
        const struct tide_tensor *y = tide_variables_find(saved, x->name);
        assert_non_null(y);
        assert_int_equal(x->bytes, y->bytes);
        assert_memory_equal(x->data, y->data, x->bytes);
    }
    assert_memory_not_equal(tide_variables_find(saved, "w")->data, values, SMALL_BYTES);
    tide_variables_free(live);
    tide_variables_free(saved);
    /* A page by hand: w's last 1,000 bytes and b's first 24; and one past the end. */
    Tide__V1__ReadVariablesRequest read = TIDE__V1__READ_VARIABLES_REQUEST__INIT;
    read.job_id = (char *)id;
    read.offset = SMALL_BYTES - 1000;
    read.max_bytes = 1024;
    const ProtobufCMessage *req[] = {&read.base};
    ProtobufCMessage *reply = NULL;
    raw_call(daemon_->socket_path, "/tide.v1.Jobs/ReadVariables", req, 1,
             &tide__v1__read_variables_response__descriptor, &reply, &r);
    if (r.status != GRPC_STATUS_OK || !reply)
        fail_msg("a page: status %d: %s", r.status, r.message);
    Tide__V1__ReadVariablesResponse *page = (Tide__V1__ReadVariablesResponse *)reply;
    assert_int_equal(page->total_bytes, SMALL_BYTES + SMALL_N * 4);
    assert_int_equal(page->page.len, 1024);
    assert_int_equal(page->n_variables, 2);
    assert_int_equal(page->variables[0]->tensor->data.len, 0);
    const float *page_b = (const float *)(page->page.data + 1000);
    for (int i = 0; i < 6; i++)
        assert_true(page_b[i] < (float)i + 1.0f); /* b after one step down its gradient */
    protobuf_c_message_free_unpacked(reply, NULL);
    read.offset = SMALL_BYTES + SMALL_N * 4 + 1;
    raw_call(daemon_->socket_path, "/tide.v1.Jobs/ReadVariables", req, 1,
             &tide__v1__read_variables_response__descriptor, &reply, &r);
    assert_null(reply);
    assert_int_equal(r.status, GRPC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(r.message, "ReadVariablesRequest.offset 361201 is past the 361200 "
                                      "bytes of the Variables read"));
    free(values);
    tide_client_free(c);
}

/*
 * SIGTERM while a job's streamed values are incomplete: the job fails,
 * saying why, and leaves no checkpoint that resume_from could take for
 * whole values. Last, as it restarts tided.
 */
static void test_shutdown_with_values_incomplete(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client();
    size_t len;
    uint8_t *spec = small_spec((const char *const[]){"w"}, 1, NULL, &len);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_submit_bytes(c, spec, len, &job));
    free(spec);
    static uint8_t values[4096];
    Tide__V1__VariableChunk k = chunk_of(job.id, "w", 0, values, sizeof(values));
    write_one(&k, GRPC_STATUS_OK, "");
    tide_client_free(c);

    assert_int_equal(tide_test_daemon_stop(daemon_), 0);
    assert_true(tide_test_daemon_start(daemon_, daemon_flags));
    c = connect_client();
    struct tide_job_info after;
    CHECK_OK(c, tide_client_get(c, job.id, &after));
    assert_int_equal(after.state, TIDE_JOB_FAILED);
    assert_non_null(strstr(after.message, "streamed values were complete"));
    tide_variables *v = NULL;
    CHECK_CODE(c, tide_client_read_variables(c, job.id, NULL, 0, &v), TIDE_CODE_FAILED_PRECONDITION,
               "has no checkpoint");
    tide_client_free(c);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--helper-other-user") == 0)
        return helper_other_user(argv[2], argv[3]);
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
    self_path[n > 0 ? n : 0] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams_by_hand),
        cmocka_unit_test(test_weights_over_max_message),
        cmocka_unit_test(test_shutdown_with_values_incomplete),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
