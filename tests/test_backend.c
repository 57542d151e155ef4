/* SPDX-License-Identifier: MIT */
/*
 * test_backend.c: the backend registry, the checked wrappers and the CPU
 * backend's CUDA semantics (stream order, events across streams, sticky
 * errors, arena accounting).
 *
 * Most tests go through tide_backend_create("cpu"), which runs the real CPU
 * kernels. Tests that need kernels with known behaviour (one that blocks
 * until the test opens a gate, one that sleeps, one that fails) build a CPU
 * backend over a small kernel table of their own with
 * tide__backend_cpu_new_with_kernels. Run under ThreadSanitizer, the
 * cross-stream tests also prove that events order memory, not just time.
 * The last tests check supports_op: a graph with an op the backend lacks is
 * refused when the executor or the session is created, not at a step.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/backend-impl.h" /* test_optional_entries strips entries */
#include "runtime/cpu/backend_cpu.h"
#include "runtime/executor.h"
#include "runtime/session.h"
#include "float_assert.h"

#define MIB (UINT64_C(1) << 20)

/* ============================================================================
 * Helpers
 * ========================================================================== */

/*
 * How the backends of the running group run their streams: the first group
 * runs every test with a worker per stream (the gate tests need streams that
 * run by themselves), the second runs those that do not block a stream with
 * inline streams, and the tests of inline streams.
 */
static enum tide_cpu_streams streams_mode = TIDE_CPU_STREAMS_THREADS;

static struct tide_backend *new_cpu(uint64_t device_bytes)
{
    struct tide_backend *b = NULL;
    struct tide_error err = {0};
    struct tide_backend_options opts = {.device_bytes = device_bytes, .cpu_streams = streams_mode};
    assert_int_equal(tide_backend_create("cpu", &opts, &b, &err), TIDE_OK);
    assert_non_null(b);
    return b;
}

static struct tide_stream *new_stream(struct tide_backend *b)
{
    struct tide_stream *s = NULL;
    struct tide_error err = {0};
    assert_int_equal(tide_backend_stream_new(b, &s, &err), TIDE_OK);
    assert_non_null(s);
    return s;
}

static struct tide_event *new_event(struct tide_backend *b)
{
    struct tide_event *e = NULL;
    struct tide_error err = {0};
    assert_int_equal(tide_backend_event_new(b, &e, &err), TIDE_OK);
    assert_non_null(e);
    return e;
}

static void *new_arena(struct tide_backend *b, uint64_t bytes)
{
    void *p = NULL;
    struct tide_error err = {0};
    assert_int_equal(tide_backend_arena_alloc(b, bytes, &p, &err), TIDE_OK);
    assert_non_null(p);
    return p;
}

static void sync_ok(struct tide_backend *b, struct tide_stream *s)
{
    struct tide_error err = {0};
    enum tide_status st = tide_backend_stream_sync(b, s, &err);
    if (st != TIDE_OK)
        fail_msg("stream_sync: %s: %s", tide_status_name(st), err.message);
}

static bool query(struct tide_backend *b, struct tide_event *e)
{
    bool done = false;
    assert_int_equal(tide_backend_event_query(b, e, &done), TIDE_OK);
    return done;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ============================================================================
 * A test kernel table
 * ========================================================================== */

/*
 * A gate the test opens from the host; the gate kernel (op Identity) blocks
 * its stream until then. It travels to the kernel as the launch's workspace.
 */
struct gate {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool open;
};

static void gate_init(struct gate *g)
{
    pthread_mutex_init(&g->mutex, NULL);
    pthread_cond_init(&g->cond, NULL);
    g->open = false;
}

static void gate_open(struct gate *g)
{
    pthread_mutex_lock(&g->mutex);
    g->open = true;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->mutex);
}

static void gate_destroy(struct gate *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mutex);
}

/*
 * Waits at most 10 s, so that a test that fails before it opens its gate
 * fails rather than hangs the whole run.
 */
static enum tide_status kernel_gate(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct gate *g = args->workspace;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 10;
    int rc = 0;
    pthread_mutex_lock(&g->mutex);
    while (!g->open && rc == 0)
        rc = pthread_cond_timedwait(&g->cond, &g->mutex, &deadline);
    bool open = g->open;
    pthread_mutex_unlock(&g->mutex);
    return open ? TIDE_OK : tide_error_set(err, TIDE_TIMEOUT, "the gate was never opened");
}

/* Add: float32 out = in0 + in1, element by element. */
static enum tide_status kernel_add(const struct tide_kernel_args *args, struct tide_error *err)
{
    const float *a = args->inputs[0].data;
    const float *b = args->inputs[1].data;
    float *out = args->outputs[0].data;
    for (uint64_t i = 0; i < args->outputs[0].nbytes / 4; i++)
        out[i] = a[i] + b[i];
    return TIDE_OK;
}

/* Scale: sleeps 2 ms, for event_elapsed. */
static enum tide_status kernel_sleep(const struct tide_kernel_args *args, struct tide_error *err)
{
    sleep_ms(2);
    return TIDE_OK;
}

/* Exp: counts its runs and notes the thread of the latest (inline streams). */
static atomic_int thread_kernel_runs;
static pthread_t thread_kernel_thread;

static enum tide_status kernel_thread(const struct tide_kernel_args *args, struct tide_error *err)
{
    thread_kernel_thread = pthread_self();
    atomic_fetch_add(&thread_kernel_runs, 1);
    return TIDE_OK;
}

/* Relu: fails with a message that does not name the node. */
static enum tide_status kernel_fail_anonymous(const struct tide_kernel_args *args,
                                              struct tide_error *err)
{
    return tide_error_set(err, TIDE_INVALID, "label 7 is out of range [0, 3)");
}

/* Neg: fails with a message that names the node, as real kernels do. */
static enum tide_status kernel_fail_named(const struct tide_kernel_args *args,
                                          struct tide_error *err)
{
    return tide_node_error(err, TIDE_INVALID, args->node, "bad input");
}

/* Tanh: fails and leaves the message empty. */
static enum tide_status kernel_fail_silent(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    return TIDE_INTERNAL;
}

static uint64_t test_workspace_bytes(void *stream, const struct tide_graph *graph,
                                     const struct tide_node *node)
{
    return node->op == TIDE_OP_CONV2D ? 123 : 0;
}

static const struct tide_kernel_table test_kernels = {
    .name = "test",
    .fn =
        {
            [TIDE_OP_IDENTITY] = kernel_gate,
            [TIDE_OP_ADD] = kernel_add,
            [TIDE_OP_SCALE] = kernel_sleep,
            [TIDE_OP_EXP] = kernel_thread,
            [TIDE_OP_RELU] = kernel_fail_anonymous,
            [TIDE_OP_NEG] = kernel_fail_named,
            [TIDE_OP_TANH] = kernel_fail_silent,
        },
    .workspace_bytes = test_workspace_bytes,
};

static struct tide_backend *new_test_cpu(void)
{
    struct tide_backend *b = NULL;
    struct tide_error err = {0};
    struct tide_backend_options opts = {.cpu_streams = streams_mode};
    assert_int_equal(tide__backend_cpu_new_with_kernels(&opts, &test_kernels, &b, &err), TIDE_OK);
    return b;
}

/*
 * A launch of the gate kernel; node, gate and args must outlive the launch,
 * so tests keep them in static storage (a failed test leaves its worker
 * behind, which must not point into a dead stack frame).
 */
struct gated_launch {
    struct tide_node node;
    struct gate gate;
    struct tide_kernel_args args;
};

static void gated_launch(struct tide_backend *b, struct tide_stream *s, struct gated_launch *g)
{
    g->node = (struct tide_node){.name = "gate", .op = TIDE_OP_IDENTITY};
    gate_init(&g->gate);
    g->args = (struct tide_kernel_args){
        .node = &g->node, .workspace = &g->gate, .workspace_bytes = sizeof(g->gate)};
    assert_int_equal(tide_backend_launch(b, s, &g->args), TIDE_OK);
}

/* A launch with no inputs and outputs of the node's op. */
static void launch_node(struct tide_backend *b, struct tide_stream *s, const struct tide_node *n,
                        struct tide_kernel_args *args)
{
    *args = (struct tide_kernel_args){.node = n};
    assert_int_equal(tide_backend_launch(b, s, args), TIDE_OK);
}

/* ============================================================================
 * Registry and wrappers
 * ========================================================================== */

static void test_create_free(void **state)
{
    struct tide_backend *b = new_cpu(0);
    assert_string_equal(tide_backend_name(b), "cpu");
    char name[64];
    uint64_t total = 0;
    tide_backend_device_info(b, name, sizeof(name), &total);
    assert_string_equal(name, "cpu (emulated device)");
    assert_int_equal(total, UINT64_C(4) << 30);
    tide_backend_free(b);
    tide_backend_free(NULL);

    /*
     * NULL options mean the defaults; "auto" is CUDA where a GPU answers
     * (a build with CUDA, on the GPU machine), else the CPU.
     */
    struct tide_error err = {0};
    struct tide_backend *cuda = NULL;
    bool gpu = tide_backend_create("cuda", NULL, &cuda, &err) == TIDE_OK;
    tide_backend_free(cuda);
    tide_error_clear(&err);
    assert_int_equal(tide_backend_create("auto", NULL, &b, &err), TIDE_OK);
    assert_string_equal(tide_backend_name(b), gpu ? "cuda" : "cpu");
    tide_backend_device_info(b, NULL, 0, &total);
    if (!gpu)
        assert_int_equal(total, UINT64_C(4) << 30);
    tide_backend_free(b);

    /* The kernels' thread count is an option (0: one per core). */
    struct tide_backend_options two = {.threads = 2};
    assert_int_equal(tide_backend_create("cpu", &two, &b, &err), TIDE_OK);
    tide_backend_free(b);

    b = new_cpu(3 * MIB);
    tide_backend_device_info(b, name, 4, &total); /* truncated, still terminated */
    assert_string_equal(name, "cpu");
    assert_int_equal(total, 3 * MIB);
    tide_backend_free(b);
}

static void test_unknown_name(void **state)
{
    struct tide_backend *b = (struct tide_backend *)&b;
    struct tide_error err = {0};
    assert_int_equal(tide_backend_create("tpu", NULL, &b, &err), TIDE_INVALID);
    assert_null(b);
    assert_int_equal(err.status, TIDE_INVALID);
    assert_string_equal(err.message, "unknown backend \"tpu\"; want \"cpu\", \"cuda\" or \"auto\"");

    assert_int_equal(tide_backend_create(NULL, NULL, &b, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"cpu\", \"cuda\" or \"auto\""));
    assert_int_equal(tide_backend_create("cpu", NULL, NULL, &err), TIDE_INVALID);

    struct tide_backend_options bad = {.threads = -2};
    assert_int_equal(tide_backend_create("cpu", &bad, &b, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "threads is -2"));
}

static void test_cuda_unsupported(void **state)
{
    struct tide_backend *b = NULL;
    struct tide_error err = {0};
    enum tide_status st = tide_backend_create("cuda", NULL, &b, &err);
    if (st == TIDE_OK || st == TIDE_DEVICE) {
        /* A CUDA build: the registry has the entry, with or without a GPU. */
        tide_backend_free(b);
        print_message("skipped: this build has the CUDA backend (%s)\n",
                      st == TIDE_OK ? "a GPU is present" : err.message);
        skip();
    }
    assert_int_equal(st, TIDE_UNSUPPORTED);
    assert_null(b);
    assert_string_equal(err.message, "tide was built without CUDA");
}

static void test_invalid_arguments(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_stream *s = new_stream(b);
    struct tide_event *e = new_event(b);
    struct tide_error err = {0};
    char buf[64] __attribute__((aligned(8)));
    void *p = buf;
    bool done;
    double ms;

    assert_int_equal(tide_backend_arena_alloc(NULL, 64, &p, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_arena_alloc(b, 64, NULL, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_arena_alloc(b, 0, &p, &err), TIDE_INVALID);
    assert_null(p);
    assert_int_equal(tide_backend_host_alloc(b, 0, &p, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_stream_new(NULL, &s, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_stream_new(b, NULL, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_stream_sync(b, NULL, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_event_new(b, NULL, &err), TIDE_INVALID);
    assert_int_equal(tide_backend_event_record(b, NULL, s), TIDE_INVALID);
    assert_int_equal(tide_backend_event_record(b, e, NULL), TIDE_INVALID);
    assert_int_equal(tide_backend_event_wait(b, NULL, e), TIDE_INVALID);
    assert_int_equal(tide_backend_event_wait(b, s, NULL), TIDE_INVALID);
    assert_int_equal(tide_backend_event_query(b, e, NULL), TIDE_INVALID);
    assert_int_equal(tide_backend_event_query(NULL, e, &done), TIDE_INVALID);
    assert_int_equal(tide_backend_event_sync(b, NULL), TIDE_INVALID);
    assert_int_equal(tide_backend_event_elapsed(b, e, NULL, &ms), TIDE_INVALID);
    assert_int_equal(tide_backend_event_elapsed(b, e, e, NULL), TIDE_INVALID);
    assert_int_equal(tide_backend_copy_h2d(b, NULL, buf, 8, s), TIDE_INVALID);
    assert_int_equal(tide_backend_copy_d2h(b, buf, NULL, 8, s), TIDE_INVALID);
    assert_int_equal(tide_backend_copy_d2d(b, buf, buf, 8, NULL), TIDE_INVALID);
    assert_int_equal(tide_backend_fill32(b, NULL, 0, 8, s), TIDE_INVALID);
    assert_int_equal(tide_backend_fill32(b, buf, 0, 6, s), TIDE_INVALID);     /* ragged */
    assert_int_equal(tide_backend_fill32(b, buf + 1, 0, 8, s), TIDE_INVALID); /* unaligned */
    assert_int_equal(tide_backend_launch(b, s, NULL), TIDE_INVALID);
    struct tide_kernel_args args = {0};
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_INVALID); /* no node */
    struct tide_node node = {.name = "x", .op = TIDE_OP_COUNT};
    args.node = &node;
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_INVALID); /* op out of range */
    node.op = TIDE_OP_ADD;
    args.n_inputs = 2;
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_INVALID); /* inputs NULL */
    assert_int_equal(tide_backend_workspace_bytes(NULL, NULL, &node), 0);
    assert_int_equal(tide_backend_workspace_bytes(b, NULL, NULL), 0);

    /* Zero-byte copies are valid no-ops, as in CUDA. */
    assert_int_equal(tide_backend_copy_h2d(b, buf, buf, 0, s), TIDE_OK);
    assert_int_equal(tide_backend_fill32(b, buf, 0, 0, s), TIDE_OK);

    /* NULL handles are no-ops for the destructors. */
    tide_backend_arena_free(b, NULL);
    tide_backend_host_free(b, NULL);
    tide_backend_stream_free(b, NULL);
    tide_backend_event_free(b, NULL);
    tide_backend_stream_free(NULL, s);
    assert_string_equal(tide_backend_name(NULL), "none");

    sync_ok(b, s);
    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s);
    tide_backend_free(b);
}

/* An iface without its optional entries: the wrappers answer TIDE_UNSUPPORTED. */
static void test_optional_entries(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    assert_true(tide_backend_has_fill32(b));
    assert_true(tide_backend_has_event_elapsed(b));
    struct tide_backend_iface stripped = *b->iface;
    stripped.event_elapsed = NULL;
    stripped.fill32 = NULL;
    const struct tide_backend_iface *saved = b->iface;
    b->iface = &stripped;
    assert_false(tide_backend_has_fill32(b));
    assert_false(tide_backend_has_event_elapsed(b));
    assert_false(tide_backend_has_fill32(NULL));

    struct tide_stream *s = new_stream(b);
    struct tide_event *e = new_event(b);
    uint32_t word;
    double ms;
    assert_int_equal(tide_backend_fill32(b, &word, 1, 4, s), TIDE_UNSUPPORTED);
    assert_int_equal(tide_backend_event_elapsed(b, e, e, &ms), TIDE_UNSUPPORTED);
    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s);
    b->iface = saved;
    tide_backend_free(b);
}

/* ============================================================================
 * Memory
 * ========================================================================== */

static void test_arena_accounting(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_error err = {0};

    void *first = new_arena(b, 600 * 1024);
    assert_int_equal((uintptr_t)first % 4096, 0);
    memset(first, 0xab, 600 * 1024); /* all of it is ours */

    void *second = (void *)&err;
    assert_int_equal(tide_backend_arena_alloc(b, 600 * 1024, &second, &err), TIDE_NOMEM);
    assert_null(second);
    assert_int_equal(err.status, TIDE_NOMEM);
    assert_string_equal(err.message, "arena of 614400 bytes does not fit the emulated device: "
                                     "614400 of 1048576 bytes in use, 434176 free");

    /* What is left still fits, exactly. */
    void *rest = new_arena(b, 434176);
    assert_int_equal(tide_backend_arena_alloc(b, 1, &second, &err), TIDE_NOMEM);
    assert_non_null(strstr(err.message, "1048576 of 1048576 bytes in use"));

    /* Freeing makes room. */
    tide_backend_arena_free(b, first);
    second = new_arena(b, 600 * 1024);
    tide_backend_arena_free(b, rest);
    tide_backend_arena_free(b, second);
    void *whole = new_arena(b, MIB);
    tide_backend_arena_free(b, whole);

    /* An arena larger than the device never fits. */
    assert_int_equal(tide_backend_arena_alloc(b, 2 * MIB, &second, &err), TIDE_NOMEM);
    assert_non_null(strstr(err.message, "arena of 2097152 bytes"));
    tide_backend_free(b);
}

static void test_host_alloc(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_error err = {0};
    void *p = NULL;
    /* Host memory is not counted against the device. */
    assert_int_equal(tide_backend_host_alloc(b, 4 * MIB, &p, &err), TIDE_OK);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 1, 4 * MIB);
    tide_backend_host_free(b, p);
    tide_backend_free(b);
}

/* ============================================================================
 * Streams and copies
 * ========================================================================== */

static void test_copies_ordered(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_stream *s = new_stream(b);
    enum { N = 4096 };
    uint8_t *dev = new_arena(b, 4 * N);
    static uint8_t src1[N], src2[N], out[2 * N];
    for (int i = 0; i < N; i++) {
        src1[i] = (uint8_t)i;
        src2[i] = (uint8_t)(255 - i);
    }
    memset(out, 0, sizeof(out));

    /*
     * Each item depends on the one before it: two writes to the same place
     * (the later wins), a device copy of the result, an overlapping device
     * copy, a fill, and copies back.
     */
    assert_int_equal(tide_backend_copy_h2d(b, dev, src1, N, s), TIDE_OK);
    assert_int_equal(tide_backend_copy_h2d(b, dev, src2, N, s), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2d(b, dev + N, dev, N, s), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2d(b, dev + N + 16, dev + N, 64, s), TIDE_OK);
    assert_int_equal(tide_backend_fill32(b, dev + 2 * N, 0xdeadbeef, N, s), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, out, dev + N, N, s), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, out + N, dev + 2 * N, N, s), TIDE_OK);
    sync_ok(b, s);

    for (int i = 0; i < 16; i++)
        assert_int_equal(out[i], (uint8_t)(255 - i));
    for (int i = 16; i < 16 + 64; i++)
        assert_int_equal(out[i], (uint8_t)(255 - (i - 16))); /* memmove semantics */
    for (int i = 16 + 64; i < N; i++)
        assert_int_equal(out[i], (uint8_t)(255 - i));
    for (int i = 0; i < N / 4; i++) {
        uint32_t w;
        memcpy(&w, out + N + 4 * i, 4);
        assert_int_equal(w, 0xdeadbeef);
    }

    /* A sync with nothing queued returns at once. */
    sync_ok(b, s);
    tide_backend_stream_free(b, s);
    tide_backend_arena_free(b, dev);
    tide_backend_free(b);
}

static void test_launch_in_order(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    enum { N = 256 };
    float *dev = new_arena(b, 3 * N * sizeof(float));
    static float x[N], y[N], z[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)i;
        y[i] = 0.5f;
    }
    struct tide_node node = {.name = "sum", .op = TIDE_OP_ADD};
    struct tide_tensor_view in[2] = {
        {.data = dev, .dtype = TIDE_DTYPE_FLOAT32, .nbytes = sizeof(x)},
        {.data = dev + N, .dtype = TIDE_DTYPE_FLOAT32, .nbytes = sizeof(y)},
    };
    struct tide_tensor_view out = {
        .data = dev + 2 * N, .dtype = TIDE_DTYPE_FLOAT32, .nbytes = sizeof(z)};
    struct tide_kernel_args args = {
        .node = &node, .n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = &out};

    assert_int_equal(tide_backend_copy_h2d(b, dev, x, sizeof(x), s), TIDE_OK);
    assert_int_equal(tide_backend_copy_h2d(b, dev + N, y, sizeof(y), s), TIDE_OK);
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_OK);
    /* The output becomes the next launch's first input: z = x + 2y. */
    assert_int_equal(tide_backend_copy_d2d(b, dev, dev + 2 * N, sizeof(z), s), TIDE_OK);
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, z, dev + 2 * N, sizeof(z), s), TIDE_OK);
    sync_ok(b, s);
    for (int i = 0; i < N; i++)
        assert_float_equal(z[i], (float)i + 1.0f, 0.0f);

    /* workspace_bytes delegates to the table. */
    struct tide_node conv = {.name = "conv", .op = TIDE_OP_CONV2D};
    assert_int_equal(tide_backend_workspace_bytes(b, NULL, &conv), 123);
    assert_int_equal(tide_backend_workspace_bytes(b, NULL, &node), 0);

    tide_backend_stream_free(b, s);
    tide_backend_arena_free(b, dev);
    tide_backend_free(b);
}

/* stream_free with work still queued waits for it. */
static void test_free_drains(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    struct tide_node sleeper = {.name = "sleep", .op = TIDE_OP_SCALE};
    struct tide_kernel_args args[5];
    static uint32_t src = 0x1234, dst = 0;
    dst = 0;
    for (int i = 0; i < 5; i++)
        launch_node(b, s, &sleeper, &args[i]);
    assert_int_equal(tide_backend_copy_d2h(b, &dst, &src, 4, s), TIDE_OK);
    tide_backend_stream_free(b, s);
    assert_int_equal(dst, 0x1234);
    tide_backend_free(b);
}

/* ============================================================================
 * Events
 * ========================================================================== */

/*
 * Stream A fills a buffer (a slow item) and copies its tail, then records
 * an event; stream B waits for the event and copies the tail out. B must see
 * A's result every time; under TSan, a wait that orders time but not memory
 * would be reported too.
 */
static void test_cross_stream_events(void **state)
{
    enum { BIG = 1 << 20, SMALL = 4096, ROUNDS = 200 };
    struct tide_backend *b = new_cpu(4 * MIB);
    struct tide_stream *a = new_stream(b);
    struct tide_stream *c = new_stream(b);
    struct tide_event *e = new_event(b);
    uint8_t *dev = new_arena(b, BIG + SMALL);
    static uint32_t host[SMALL / 4];

    for (uint32_t round = 1; round <= ROUNDS; round++) {
        assert_int_equal(tide_backend_fill32(b, dev, round, BIG, a), TIDE_OK);
        assert_int_equal(tide_backend_copy_d2d(b, dev + BIG, dev + BIG - SMALL, SMALL, a), TIDE_OK);
        assert_int_equal(tide_backend_event_record(b, e, a), TIDE_OK);
        assert_int_equal(tide_backend_event_wait(b, c, e), TIDE_OK);
        assert_int_equal(tide_backend_copy_d2h(b, host, dev + BIG, SMALL, c), TIDE_OK);
        sync_ok(b, c);
        for (int i = 0; i < SMALL / 4; i++)
            if (host[i] != round)
                fail_msg("round %u: word %d is %u", round, i, host[i]);
    }
    sync_ok(b, a);
    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, a);
    tide_backend_stream_free(b, c);
    tide_backend_arena_free(b, dev);
    tide_backend_free(b);
}

static void test_event_query_and_sync(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    struct tide_event *e = new_event(b);

    static struct gated_launch g;
    gated_launch(b, s, &g);
    assert_int_equal(tide_backend_event_record(b, e, s), TIDE_OK);
    assert_false(query(b, e)); /* behind a closed gate: deterministic */
    gate_open(&g.gate);
    assert_int_equal(tide_backend_event_sync(b, e), TIDE_OK);
    assert_true(query(b, e));
    sync_ok(b, s);
    assert_true(query(b, e));
    gate_destroy(&g.gate);

    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s);
    tide_backend_free(b);
}

static void test_unrecorded_event_is_reached(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_stream *s = new_stream(b);
    struct tide_event *e = new_event(b);
    assert_true(query(b, e));
    assert_int_equal(tide_backend_event_sync(b, e), TIDE_OK);

    /* A wait on it does not block the stream. */
    static uint32_t src = 7, dst = 0;
    assert_int_equal(tide_backend_event_wait(b, s, e), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, &dst, &src, 4, s), TIDE_OK);
    sync_ok(b, s);
    assert_int_equal(dst, 7);

    /* It has no time, though. */
    double ms = -1;
    assert_int_equal(tide_backend_event_elapsed(b, e, e, &ms), TIDE_STATE);

    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s);
    tide_backend_free(b);
}

static void test_rerecord(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s1 = new_stream(b);
    struct tide_stream *s2 = new_stream(b);
    struct tide_stream *s3 = new_stream(b);
    struct tide_event *e = new_event(b);
    struct tide_event *after = new_event(b);

    /* Recorded, reached, recorded again behind a gate: the query follows the latest. */
    assert_int_equal(tide_backend_event_record(b, e, s1), TIDE_OK);
    sync_ok(b, s1);
    assert_true(query(b, e));
    static struct gated_launch g;
    gated_launch(b, s1, &g);
    assert_int_equal(tide_backend_event_record(b, e, s1), TIDE_OK);
    assert_false(query(b, e));

    /*
     * s3 waits for that (second) record. Then the event is recorded a third
     * time on s2, which is free to run: the query follows the latest record
     * and says reached, but s3's wait still refers to the point it captured,
     * behind the closed gate on s1.
     */
    static uint32_t src = 42, dst = 0;
    dst = 0;
    assert_int_equal(tide_backend_event_wait(b, s3, e), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, &dst, &src, 4, s3), TIDE_OK);
    assert_int_equal(tide_backend_event_record(b, after, s3), TIDE_OK);
    assert_int_equal(tide_backend_event_record(b, e, s2), TIDE_OK);
    sync_ok(b, s2);
    assert_true(query(b, e));
    sleep_ms(50);
    assert_false(query(b, after)); /* s3 still waits on s1's record */

    gate_open(&g.gate);
    sync_ok(b, s3);
    assert_true(query(b, after));
    assert_int_equal(dst, 42);
    sync_ok(b, s1);
    gate_destroy(&g.gate);

    tide_backend_event_free(b, after);
    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s1);
    tide_backend_stream_free(b, s2);
    tide_backend_stream_free(b, s3);
    tide_backend_free(b);
}

/* An event freed while its marker and a wait on it are still queued. */
static void test_event_free_while_queued(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s1 = new_stream(b);
    struct tide_stream *s2 = new_stream(b);
    struct tide_event *e = new_event(b);
    static struct gated_launch g;
    gated_launch(b, s1, &g);
    assert_int_equal(tide_backend_event_record(b, e, s1), TIDE_OK);
    assert_int_equal(tide_backend_event_wait(b, s2, e), TIDE_OK);
    tide_backend_event_free(b, e);
    gate_open(&g.gate);
    sync_ok(b, s2);
    sync_ok(b, s1);
    gate_destroy(&g.gate);
    tide_backend_stream_free(b, s1);
    tide_backend_stream_free(b, s2);
    tide_backend_free(b);
}

static void test_event_elapsed(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    struct tide_event *e[3] = {new_event(b), new_event(b), new_event(b)};
    struct tide_node sleeper = {.name = "sleep", .op = TIDE_OP_SCALE};
    struct tide_kernel_args args[2];

    assert_int_equal(tide_backend_event_record(b, e[0], s), TIDE_OK);
    launch_node(b, s, &sleeper, &args[0]);
    assert_int_equal(tide_backend_event_record(b, e[1], s), TIDE_OK);
    launch_node(b, s, &sleeper, &args[1]);
    assert_int_equal(tide_backend_event_record(b, e[2], s), TIDE_OK);
    sync_ok(b, s);

    double zero = -1, first = -1, both = -1, second = -1;
    assert_int_equal(tide_backend_event_elapsed(b, e[0], e[0], &zero), TIDE_OK);
    assert_int_equal(tide_backend_event_elapsed(b, e[0], e[1], &first), TIDE_OK);
    assert_int_equal(tide_backend_event_elapsed(b, e[0], e[2], &both), TIDE_OK);
    assert_int_equal(tide_backend_event_elapsed(b, e[1], e[2], &second), TIDE_OK);
    assert_true(zero == 0.0);
    assert_true(first >= 2.0); /* a 2 ms kernel lies between them */
    assert_true(second >= 2.0);
    assert_true(both >= first && both >= second);
    assert_float_equal(both, first + second, 1e-6);

    /* Not reached yet: not available. */
    static struct gated_launch g;
    gated_launch(b, s, &g);
    assert_int_equal(tide_backend_event_record(b, e[2], s), TIDE_OK);
    assert_int_equal(tide_backend_event_elapsed(b, e[0], e[2], &both), TIDE_UNAVAILABLE);
    gate_open(&g.gate);
    sync_ok(b, s);
    assert_int_equal(tide_backend_event_elapsed(b, e[0], e[2], &both), TIDE_OK);
    assert_true(both >= first + second);
    gate_destroy(&g.gate);

    for (int i = 0; i < 3; i++)
        tide_backend_event_free(b, e[i]);
    tide_backend_stream_free(b, s);
    tide_backend_free(b);
}

/* ============================================================================
 * Sticky errors
 * ========================================================================== */

/* A memory op has no CPU kernel: the launch fails on the stream, not at enqueue. */
static void test_sticky_error_no_kernel(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_stream *s = new_stream(b);
    struct tide_stream *other = new_stream(b);
    struct tide_event *e = new_event(b);
    struct tide_node swap_in = {.name = "swap_in_7", .op = TIDE_OP_SWAP_IN};
    struct tide_kernel_args args;
    static uint32_t src = 5, dst = 0, dst2 = 0;
    dst = dst2 = 0;

    launch_node(b, s, &swap_in, &args);
    /* Skipped: the stream has failed. */
    assert_int_equal(tide_backend_copy_d2h(b, &dst, &src, 4, s), TIDE_OK);
    /* Markers still run, so another stream waiting on this one goes on. */
    assert_int_equal(tide_backend_event_record(b, e, s), TIDE_OK);
    assert_int_equal(tide_backend_event_wait(b, other, e), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, &dst2, &src, 4, other), TIDE_OK);
    sync_ok(b, other);
    assert_int_equal(dst2, 5);
    assert_int_equal(tide_backend_event_sync(b, e), TIDE_OK);

    struct tide_error err = {0};
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_UNSUPPORTED);
    assert_int_equal(err.status, TIDE_UNSUPPORTED);
    assert_string_equal(err.message, "no CPU kernel for op SwapIn (node \"swap_in_7\")");
    assert_int_equal(dst, 0);

    /* The error is cleared: the stream works again. */
    sync_ok(b, s);
    assert_int_equal(tide_backend_copy_d2h(b, &dst, &src, 4, s), TIDE_OK);
    sync_ok(b, s);
    assert_int_equal(dst, 5);

    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s);
    tide_backend_stream_free(b, other);
    tide_backend_free(b);
}

/* A real kernel refusing its input (a label out of range). */
static void test_sticky_error_kernel_fails(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_stream *s = new_stream(b);
    float *dev = new_arena(b, 64 * sizeof(float));
    static const float logits[6] = {1, 2, 3, 4, 5, 6};
    static const int32_t labels[2] = {1, 5};
    int64_t nc[2] = {2, 3};
    int64_t n[1] = {2};
    struct tide_node node = {.name = "xent", .op = TIDE_OP_SOFTMAX_CROSS_ENTROPY};
    struct tide_tensor_view in[2] = {
        {.data = dev,
         .dtype = TIDE_DTYPE_FLOAT32,
         .shape = tide_shape_make(2, nc),
         .nbytes = sizeof(logits)},
        {.data = dev + 8,
         .dtype = TIDE_DTYPE_INT32,
         .shape = tide_shape_make(1, n),
         .nbytes = sizeof(labels)},
    };
    struct tide_tensor_view out = {.data = dev + 16,
                                   .dtype = TIDE_DTYPE_FLOAT32,
                                   .shape = tide_shape_make(1, n),
                                   .nbytes = 2 * sizeof(float)};
    struct tide_kernel_args args = {
        .node = &node, .n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = &out};

    assert_int_equal(tide_backend_copy_h2d(b, dev, logits, sizeof(logits), s), TIDE_OK);
    assert_int_equal(tide_backend_copy_h2d(b, dev + 8, labels, sizeof(labels), s), TIDE_OK);
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_OK);
    struct tide_error err = {0};
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "xent"));
    assert_non_null(strstr(err.message, "label 5"));

    /* Fixed input, same stream: it runs. */
    static const int32_t good[2] = {1, 2};
    float loss[2] = {0, 0};
    assert_int_equal(tide_backend_copy_h2d(b, dev + 8, good, sizeof(good), s), TIDE_OK);
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, loss, dev + 16, sizeof(loss), s), TIDE_OK);
    sync_ok(b, s);
    assert_true(loss[0] > 0.0f && loss[1] > 0.0f);

    tide_backend_stream_free(b, s);
    tide_backend_arena_free(b, dev);
    tide_backend_free(b);
}

/* The stream's message always names the node; the first failure wins. */
static void test_sticky_error_messages(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    struct tide_node anonymous = {.name = "loss", .op = TIDE_OP_RELU};
    struct tide_node named = {.name = "neg1", .op = TIDE_OP_NEG};
    struct tide_node silent = {.name = "t", .op = TIDE_OP_TANH};
    struct tide_kernel_args args[3];
    struct tide_error err = {0};

    launch_node(b, s, &anonymous, &args[0]);
    launch_node(b, s, &named, &args[1]); /* skipped */
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_INVALID);
    assert_string_equal(err.message, "node \"loss\" (Relu): label 7 is out of range [0, 3)");

    launch_node(b, s, &named, &args[1]);
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_INVALID);
    assert_string_equal(err.message, "node \"neg1\" (Neg): bad input");

    launch_node(b, s, &silent, &args[2]);
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_INTERNAL);
    assert_string_equal(err.message, "node \"t\" (Tanh): kernel failed: internal error");

    /* Freeing a stream with an error nobody synced is fine (it is logged). */
    launch_node(b, s, &silent, &args[2]);
    tide_backend_stream_free(b, s);
    tide_backend_free(b);
}

/* ============================================================================
 * Many streams
 * ========================================================================== */

/*
 * Sixteen streams, each copying its own buffers through the device, while
 * a chain of events passes a value along all of them: stream i waits for
 * stream i-1, adds its copy, records for stream i+1.
 */
static void test_many_streams(void **state)
{
    enum { STREAMS = 16, WORDS = 1024, ROUNDS = 20 };
    struct tide_backend *b = new_cpu(4 * MIB);
    struct tide_stream *s[STREAMS];
    struct tide_event *e[STREAMS];
    uint32_t *dev = new_arena(b, (uint64_t)STREAMS * 2 * WORDS * 4 + STREAMS * 4);
    uint32_t *chain = dev + STREAMS * 2 * WORDS;
    static uint32_t in[STREAMS][WORDS], out[STREAMS][WORDS];
    static uint32_t chain_out;
    for (int i = 0; i < STREAMS; i++) {
        s[i] = new_stream(b);
        e[i] = new_event(b);
    }

    for (uint32_t round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < STREAMS; i++)
            for (int w = 0; w < WORDS; w++)
                in[i][w] = round * 100000u + (uint32_t)(i * WORDS + w);
        assert_int_equal(tide_backend_fill32(b, chain, round + 1, 4, s[0]), TIDE_OK);
        for (int i = 0; i < STREAMS; i++) {
            uint32_t *a = dev + i * 2 * WORDS, *c = a + WORDS;
            assert_int_equal(tide_backend_copy_h2d(b, a, in[i], sizeof(in[i]), s[i]), TIDE_OK);
            assert_int_equal(tide_backend_copy_d2d(b, c, a, sizeof(in[i]), s[i]), TIDE_OK);
            assert_int_equal(tide_backend_copy_d2h(b, out[i], c, sizeof(in[i]), s[i]), TIDE_OK);
            if (i > 0) {
                assert_int_equal(tide_backend_event_wait(b, s[i], e[i - 1]), TIDE_OK);
                assert_int_equal(tide_backend_copy_d2d(b, chain + i, chain + i - 1, 4, s[i]),
                                 TIDE_OK);
            }
            assert_int_equal(tide_backend_event_record(b, e[i], s[i]), TIDE_OK);
        }
        assert_int_equal(
            tide_backend_copy_d2h(b, &chain_out, chain + STREAMS - 1, 4, s[STREAMS - 1]), TIDE_OK);
        for (int i = 0; i < STREAMS; i++)
            sync_ok(b, s[i]);
        assert_int_equal(chain_out, round + 1);
        for (int i = 0; i < STREAMS; i++)
            assert_memory_equal(out[i], in[i], sizeof(in[i]));
    }

    for (int i = 0; i < STREAMS; i++) {
        tide_backend_event_free(b, e[i]);
        tide_backend_stream_free(b, s[i]);
    }
    tide_backend_arena_free(b, dev);
    tide_backend_free(b);
}

/* ============================================================================
 * supports_op: a graph with an op the backend lacks is refused at compile
 * ========================================================================== */

/* The CPU backend runs every op of graph/ops.def: a kernel, or the executor's copies. */
static void test_cpu_supports_every_op(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    for (int op = 0; op < TIDE_OP_COUNT; op++) {
        struct tide_node n = {.name = "n", .op = (enum tide_op)op};
        if (!tide_backend_supports_op(b, NULL, &n))
            fail_msg("the cpu backend does not support %s", tide_op_info(n.op)->name);
    }
    struct tide_node bad = {.name = "bad", .op = TIDE_OP_COUNT};
    assert_false(tide_backend_supports_op(b, NULL, &bad));
    assert_false(tide_backend_supports_op(b, NULL, NULL));
    assert_false(tide_backend_supports_op(NULL, NULL, &bad));
    tide_backend_free(b);
}

/* A CPU backend over the test table: memory and source ops yes, an op without a kernel no. */
static void test_supports_op_follows_the_kernel_table(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_node add = {.name = "a", .op = TIDE_OP_ADD};
    struct tide_node swap_in = {.name = "s", .op = TIDE_OP_SWAP_IN};
    struct tide_node var = {.name = "v", .op = TIDE_OP_VARIABLE};
    struct tide_node matmul = {.name = "m", .op = TIDE_OP_MATMUL};
    assert_true(tide_backend_supports_op(b, NULL, &add));
    assert_true(tide_backend_supports_op(b, NULL, &swap_in));
    assert_true(tide_backend_supports_op(b, NULL, &var));
    assert_false(tide_backend_supports_op(b, NULL, &matmul));
    tide_backend_free(b);
}

/* x [2, 3] -> op "y"; inferred, as the session wants it. */
static struct tide_graph *unary_graph(enum tide_op op)
{
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    struct tide_error err = {0};
    uint32_t x, y;
    assert_int_equal(tide_graph_add_node(g, TIDE_OP_PLACEHOLDER, "x", &x, &err), TIDE_OK);
    struct tide_shape shape = tide_shape_make(2, (int64_t[]){2, 3});
    tide_attr_set_dtype(g, x, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, x, TIDE_ATTR_PLACEHOLDER_shape, &shape);
    assert_int_equal(tide_graph_add_node(g, op, "y", &y, &err), TIDE_OK);
    assert_int_equal(tide_graph_set_inputs(g, y, &(struct tide_edge){x, 0}, 1, &err), TIDE_OK);
    assert_int_equal(tide_graph_infer(g, NULL, &err), TIDE_OK);
    return g;
}

/* Everything but Tanh, through the vtable entry a backend implements. */
static bool supports_all_but_tanh(void *context, const struct tide_graph *graph,
                                  const struct tide_node *node)
{
    return node->op != TIDE_OP_TANH;
}

/*
 * A backend whose supports_op says no to Tanh (the CPU backend under
 * another name): check_graph, the executor and the session (also plan-only)
 * refuse a graph with a Tanh when they are created, naming the node, the op
 * and the backend; a graph without one goes through.
 */
static void test_compile_refuses_unsupported_op(void **state)
{
    struct tide_backend *b = new_cpu(MIB);
    struct tide_backend_iface limited = *b->iface;
    limited.name = "limited";
    limited.supports_op = supports_all_but_tanh;
    const struct tide_backend_iface *saved = b->iface;
    b->iface = &limited;
    const char *want = "node \"y\" (Tanh): the limited backend has no kernel for Tanh";

    struct tide_graph *g = unary_graph(TIDE_OP_TANH);
    struct tide_error err = {0};
    assert_int_equal(tide_backend_check_graph(b, g, &err), TIDE_UNSUPPORTED);
    assert_string_equal(err.message, want);

    /* The executor refuses before it reads the plan. */
    struct tide_memplan plan = {0};
    struct tide_executor *ex = NULL;
    err = (struct tide_error){0};
    assert_int_equal(tide_executor_new(g, &plan, b, NULL, &ex, &err), TIDE_UNSUPPORTED);
    assert_null(ex);
    assert_string_equal(err.message, want);
    tide_graph_free(g);

    for (int plan_only = 0; plan_only < 2; plan_only++) {
        struct tide_session_options o = tide_session_options_default();
        o.backend = b;
        o.plan_only = plan_only;
        struct tide_session *session = NULL;
        err = (struct tide_error){0};
        assert_int_equal(tide_session_new_graph(unary_graph(TIDE_OP_TANH), &o, &session, &err),
                         TIDE_UNSUPPORTED);
        assert_null(session);
        assert_string_equal(err.message, want);

        err = (struct tide_error){0};
        enum tide_status st = tide_session_new_graph(unary_graph(TIDE_OP_RELU), &o, &session, &err);
        if (st != TIDE_OK)
            fail_msg("session with Relu: %s: %s", tide_status_name(st), err.message);
        tide_session_free(session);
    }

    b->iface = saved;
    tide_backend_free(b);
}

/* The CPU backend over a table without Sigmoid says so in the same words. */
static void test_check_graph_names_the_cpu_backend(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_graph *g = unary_graph(TIDE_OP_SIGMOID);
    struct tide_error err = {0};
    assert_int_equal(tide_backend_check_graph(b, g, &err), TIDE_UNSUPPORTED);
    assert_string_equal(err.message,
                        "node \"y\" (Sigmoid): the cpu backend has no kernel for Sigmoid");
    tide_graph_free(g);
    err = (struct tide_error){0};
    assert_int_equal(tide_backend_check_graph(NULL, NULL, &err), TIDE_INVALID);
    tide_backend_free(b);
}

/* ============================================================================
 * Inline streams
 * ========================================================================== */

/* A launch of the thread kernel; static, as the args must outlive the launch. */
static struct tide_node thread_node = {.name = "who", .op = TIDE_OP_EXP};
static struct tide_kernel_args thread_args = {.node = &thread_node};

/*
 * Nothing runs until somebody waits; a stream's wait on another stream's
 * event runs that stream up to the marker, on the waiting thread; the work
 * behind the marker stays queued until its own stream is synchronised.
 */
static void test_inline_runs_on_the_waiting_thread(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s1 = new_stream(b), *s2 = new_stream(b);
    struct tide_event *e = new_event(b);
    atomic_store(&thread_kernel_runs, 0);

    assert_int_equal(tide_backend_launch(b, s1, &thread_args), TIDE_OK);
    assert_int_equal(tide_backend_event_record(b, e, s1), TIDE_OK);
    assert_int_equal(tide_backend_launch(b, s1, &thread_args), TIDE_OK); /* behind the marker */
    assert_int_equal(tide_backend_event_wait(b, s2, e), TIDE_OK);
    static uint32_t src = 9, dst = 0;
    dst = 0;
    assert_int_equal(tide_backend_copy_d2h(b, &dst, &src, 4, s2), TIDE_OK);
    sleep_ms(20);
    assert_int_equal(atomic_load(&thread_kernel_runs), 0); /* no worker ran it */

    sync_ok(b, s2);
    assert_int_equal(dst, 9);
    assert_int_equal(atomic_load(&thread_kernel_runs), 1); /* up to the marker only */
    assert_true(pthread_equal(thread_kernel_thread, pthread_self()));
    sync_ok(b, s1);
    assert_int_equal(atomic_load(&thread_kernel_runs), 2);

    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s1);
    tide_backend_stream_free(b, s2);
    tide_backend_free(b);
}

/* event_query and event_sync run the recording stream (nothing else would); free drains. */
static void test_inline_query_sync_and_free_run_the_work(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    struct tide_event *e = new_event(b);
    atomic_store(&thread_kernel_runs, 0);

    assert_int_equal(tide_backend_launch(b, s, &thread_args), TIDE_OK);
    assert_int_equal(tide_backend_event_record(b, e, s), TIDE_OK);
    assert_true(query(b, e));
    assert_int_equal(atomic_load(&thread_kernel_runs), 1);

    assert_int_equal(tide_backend_launch(b, s, &thread_args), TIDE_OK);
    assert_int_equal(tide_backend_event_record(b, e, s), TIDE_OK);
    assert_int_equal(tide_backend_event_sync(b, e), TIDE_OK);
    assert_int_equal(atomic_load(&thread_kernel_runs), 2);

    assert_int_equal(tide_backend_launch(b, s, &thread_args), TIDE_OK);
    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s);
    assert_int_equal(atomic_load(&thread_kernel_runs), 3);
    tide_backend_free(b);
}

/* Two threads synchronising one stream: each item runs once, in order. */
struct sync_thread {
    struct tide_backend *b;
    struct tide_stream *s;
};

static void *sync_thread_main(void *arg)
{
    struct sync_thread *t = arg;
    struct tide_error err = {0};
    return tide_backend_stream_sync(t->b, t->s, &err) == TIDE_OK ? NULL : (void *)1;
}

static void test_inline_two_waiters(void **state)
{
    struct tide_backend *b = new_test_cpu();
    struct tide_stream *s = new_stream(b);
    atomic_store(&thread_kernel_runs, 0);
    enum { N = 2000 };
    for (int i = 0; i < N; i++)
        assert_int_equal(tide_backend_launch(b, s, &thread_args), TIDE_OK);
    struct sync_thread t = {b, s};
    pthread_t other;
    assert_int_equal(pthread_create(&other, NULL, sync_thread_main, &t), 0);
    sync_ok(b, s);
    void *rc = (void *)1;
    assert_int_equal(pthread_join(other, &rc), 0);
    assert_null(rc);
    assert_int_equal(atomic_load(&thread_kernel_runs), N);
    tide_backend_stream_free(b, s);
    tide_backend_free(b);
}

/* TIDE_CPU_STREAMS picks the mode when the options leave it to the environment. */
static void test_streams_from_environment(void **state)
{
    struct tide_backend *b = NULL;
    struct tide_error err = {0};
    setenv("TIDE_CPU_STREAMS", "fibers", 1);
    assert_int_equal(tide__backend_cpu_new_with_kernels(NULL, &test_kernels, &b, &err),
                     TIDE_INVALID);
    assert_non_null(strstr(err.message, "TIDE_CPU_STREAMS is \"fibers\""));
    assert_non_null(strstr(err.message, "inline or threads"));
    assert_null(b);

    /* threads: a worker runs the launch without anyone waiting. */
    setenv("TIDE_CPU_STREAMS", "threads", 1);
    assert_int_equal(tide__backend_cpu_new_with_kernels(NULL, &test_kernels, &b, &err), TIDE_OK);
    struct tide_stream *s = new_stream(b);
    atomic_store(&thread_kernel_runs, 0);
    assert_int_equal(tide_backend_launch(b, s, &thread_args), TIDE_OK);
    for (int i = 0; i < 1000 && atomic_load(&thread_kernel_runs) == 0; i++)
        sleep_ms(1);
    assert_int_equal(atomic_load(&thread_kernel_runs), 1);
    assert_false(pthread_equal(thread_kernel_thread, pthread_self()));
    tide_backend_stream_free(b, s);
    tide_backend_free(b);

    /* An explicit mode wins over the environment; a bad one is refused. */
    struct tide_backend_options bad = {.cpu_streams = (enum tide_cpu_streams)7};
    assert_int_equal(tide__backend_cpu_new_with_kernels(&bad, &test_kernels, &b, &err),
                     TIDE_INVALID);
    assert_non_null(strstr(err.message, "cpu_streams is 7"));
    unsetenv("TIDE_CPU_STREAMS");
}

static int group_threads(void **state)
{
    streams_mode = TIDE_CPU_STREAMS_THREADS;
    return 0;
}

static int group_inline(void **state)
{
    streams_mode = TIDE_CPU_STREAMS_INLINE;
    return 0;
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_free),
        cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_cuda_unsupported),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_optional_entries),
        cmocka_unit_test(test_arena_accounting),
        cmocka_unit_test(test_host_alloc),
        cmocka_unit_test(test_copies_ordered),
        cmocka_unit_test(test_launch_in_order),
        cmocka_unit_test(test_free_drains),
        cmocka_unit_test(test_cross_stream_events),
        cmocka_unit_test(test_event_query_and_sync),
        cmocka_unit_test(test_unrecorded_event_is_reached),
        cmocka_unit_test(test_rerecord),
        cmocka_unit_test(test_event_free_while_queued),
        cmocka_unit_test(test_event_elapsed),
        cmocka_unit_test(test_sticky_error_no_kernel),
        cmocka_unit_test(test_sticky_error_kernel_fails),
        cmocka_unit_test(test_sticky_error_messages),
        cmocka_unit_test(test_many_streams),
        cmocka_unit_test(test_cpu_supports_every_op),
        cmocka_unit_test(test_supports_op_follows_the_kernel_table),
        cmocka_unit_test(test_compile_refuses_unsupported_op),
        cmocka_unit_test(test_check_graph_names_the_cpu_backend),
    };
    const struct CMUnitTest inline_tests[] = {
        cmocka_unit_test(test_copies_ordered),
        cmocka_unit_test(test_launch_in_order),
        cmocka_unit_test(test_free_drains),
        cmocka_unit_test(test_cross_stream_events),
        cmocka_unit_test(test_unrecorded_event_is_reached),
        cmocka_unit_test(test_event_free_while_queued),
        cmocka_unit_test(test_event_elapsed),
        cmocka_unit_test(test_sticky_error_no_kernel),
        cmocka_unit_test(test_sticky_error_kernel_fails),
        cmocka_unit_test(test_sticky_error_messages),
        cmocka_unit_test(test_many_streams),
        cmocka_unit_test(test_inline_runs_on_the_waiting_thread),
        cmocka_unit_test(test_inline_query_sync_and_free_run_the_work),
        cmocka_unit_test(test_inline_two_waiters),
        cmocka_unit_test(test_streams_from_environment),
    };
    int failed = cmocka_run_group_tests_name("threads", tests, group_threads, NULL);
    return failed + cmocka_run_group_tests_name("inline", inline_tests, group_inline, NULL);
}
