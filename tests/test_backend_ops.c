/* SPDX-License-Identifier: MIT */
/*
 * test_backend_ops.c: every compute op on every backend, compared.
 *
 * As ggml's test-backend-ops does, each case builds one node with small
 * random inputs (broadcasting, strides, padding, ties, long rows that take
 * the CUDA kernels' block paths), runs it through the public backend API on
 * the CPU backend (the reference) and on the CUDA backend, and compares the
 * outputs (for the optimizer updates: the inputs they write in place) within
 * a stated tolerance:
 *
 *   TOL_EXACT   rtol 1e-6: ops that move or add without rounding differences;
 *   TOL_ELEM    rtol 1e-4: element-wise math, sums in double, softmax,
 *               batch norm, optimizers (CUDA's expf and FMA contraction);
 *   TOL_GEMM    rtol 1e-3: MatMul and the convolutions (cuBLAS, cuDNN);
 *   tf32_rtol, tf32_atol (1e-2, 5e-2): the same in math "tf32" (test_tf32).
 *
 * Each CUDA case runs twice and must give the same bits (determinism). The
 * run goes through arena_alloc, host_alloc, copy_h2d, launch, copy_d2h and
 * stream_sync, with the workspace sized by the backend's workspace_bytes and
 * every output and the workspace filled with NaN first, so a kernel that
 * leaves an element unwritten, or needs more workspace than it asks for,
 * fails here.
 *
 * Without a usable GPU (no device, no driver, or a build without CUDA) every
 * CUDA case still runs its CPU half, then prints "no CUDA device: <reason>"
 * and calls skip(): it never passes silently. The last test checks that the
 * cases cover every compute op of graph/ops.def, so an op added without a
 * case here fails even on a machine without a GPU.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"

/* ============================================================================
 * Backends
 * ========================================================================== */

static struct tide_backend *cpu_backend;
static struct tide_backend *cuda_backend;
static char cuda_reason[TIDE_ERROR_MESSAGE_MAX + 64];

static int setup_backends(void **state)
{
    (void)state;
    struct tide_error err = {0};
    struct tide_backend_options cpu_options = {.threads = 2};
    if (tide_backend_create("cpu", &cpu_options, &cpu_backend, &err) != TIDE_OK) {
        fprintf(stderr, "cannot create the CPU backend: %s\n", err.message);
        return -1;
    }
    tide_error_clear(&err);
    enum tide_status st = tide_backend_create("cuda", NULL, &cuda_backend, &err);
    if (st != TIDE_OK) {
        cuda_backend = NULL;
        snprintf(cuda_reason, sizeof(cuda_reason), "%s (%s)",
                 err.message[0] ? err.message : "no reason given", tide_status_name(st));
    }
    return 0;
}

static int teardown_backends(void **state)
{
    (void)state;
    tide_backend_free(cuda_backend);
    tide_backend_free(cpu_backend);
    return 0;
}

/* Skips the calling test, saying why, when there is no CUDA backend. */
#define REQUIRE_CUDA()                                                                             \
    do {                                                                                           \
        if (!cuda_backend) {                                                                       \
            printf("no CUDA device: %s\n", cuda_reason);                                           \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Skips a test that compares oneDNN with the CPU kernels' own where there is no oneDNN. */
#define REQUIRE_ONEDNN()                                                                           \
    do {                                                                                           \
        if (!tide_cpu_kernels_onednn_available()) {                                                \
            printf("no oneDNN: not built with it, or TIDE_CPU_ONEDNN=0 in the environment\n");     \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ============================================================================
 * Cases
 * ========================================================================== */

#define MAX_ATTRS 16
#define MAX_IO    24
#define ALIGN     256

#define TOL_EXACT 1e-6, 1e-7
#define TOL_ELEM  1e-4, 1e-5
#define TOL_GEMM  1e-3, 1e-4

struct tensor {
    enum tide_dtype dtype;
    struct tide_shape shape;
    uint64_t nbytes;
    void *host; /* inputs: the data; outputs: unused */
};

/* One node and its tensors; attributes start at their ops.def defaults. */
struct op_case {
    struct tide_node node;
    struct tide_attr_value attrs[MAX_ATTRS];
    struct tide_edge edges[MAX_IO];
    struct tide_output outputs[MAX_IO];
    uint32_t n_in, n_out;
    struct tensor in[MAX_IO], out[MAX_IO];
    double rtol, atol;
    uint32_t seed;
};

static bool covered[TIDE_OP_COUNT];
static const uint64_t adam_step = 3;
/* Every case runs as in a training step of a job with this seed (Dropout's mask). */
static const bool training_step = true;
static const uint64_t job_seed = 2024;

static void case_init(struct op_case *c, enum tide_op op, const char *name, double rtol,
                      double atol)
{
    memset(c, 0, sizeof(*c));
    const struct tide_op_info *info = tide_op_info(op);
    assert_true(info->n_attrs <= MAX_ATTRS);
    c->node.op = op;
    c->node.name = name;
    c->node.attrs = c->attrs;
    c->node.device = "";
    c->rtol = rtol;
    c->atol = atol;
    c->seed = 12345u + (uint32_t)op * 7919u;
    for (uint32_t k = 0; k < info->n_attrs; k++) {
        const struct tide_attr_spec *spec = &info->attrs[k];
        switch (spec->type) {
        case TIDE_ATTR_TYPE_INT:
            c->attrs[k].i = spec->default_int;
            break;
        case TIDE_ATTR_TYPE_BOOL:
            c->attrs[k].b = spec->default_int != 0;
            break;
        case TIDE_ATTR_TYPE_DTYPE:
            c->attrs[k].dtype = (enum tide_dtype)spec->default_int;
            break;
        case TIDE_ATTR_TYPE_FLOAT:
            c->attrs[k].f = spec->default_float;
            break;
        case TIDE_ATTR_TYPE_STRING:
            c->attrs[k].s = spec->default_string;
            break;
        default:
            break;
        }
    }
}

static void case_free(struct op_case *c)
{
    for (uint32_t i = 0; i < c->n_in; i++)
        free(c->in[i].host);
}

static void set_ints(struct op_case *c, int k, int32_t n, const int64_t *v)
{
    c->attrs[k].present = true;
    c->attrs[k].ints.n = n;
    for (int32_t i = 0; i < n; i++)
        c->attrs[k].ints.v[i] = v[i];
}

static void set_pair(struct op_case *c, int k, int64_t a, int64_t b)
{
    int64_t v[2] = {a, b};
    set_ints(c, k, 2, v);
}

static void set_shape(struct op_case *c, int k, int32_t rank, const int64_t *dims)
{
    c->attrs[k].present = true;
    c->attrs[k].shape = tide_shape_make(rank, dims);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/* A small deterministic generator: uniform in [-1, 1). */
static float frand(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) * (1.0 / 8388608.0) - 1.0);
}

static struct tensor make_tensor(enum tide_dtype dtype, int32_t rank, const int64_t *dims)
{
    struct tensor t = {.dtype = dtype, .shape = tide_shape_make(rank, dims)};
    t.nbytes = (uint64_t)tide_shape_numel(&t.shape) * tide_dtype_size(dtype);
    return t;
}

/* Adds a float input of random values in [lo, hi); returns its data. */
static float *input_range(struct op_case *c, int32_t rank, const int64_t *dims, float lo, float hi)
{
    assert_true(c->n_in < MAX_IO);
    struct tensor *t = &c->in[c->n_in++];
    *t = make_tensor(TIDE_DTYPE_FLOAT32, rank, dims);
    float *x = malloc(t->nbytes ? t->nbytes : 4);
    assert_non_null(x);
    int64_t n = tide_shape_numel(&t->shape);
    for (int64_t i = 0; i < n; i++)
        x[i] = lo + (hi - lo) * (frand(&c->seed) + 1.0f) / 2.0f;
    t->host = x;
    return x;
}

static float *input(struct op_case *c, int32_t rank, const int64_t *dims)
{
    return input_range(c, rank, dims, -1.0f, 1.0f);
}

/* A float input of values in {-1, 0, 1}: ties for the max pools. */
static void input_ties(struct op_case *c, int32_t rank, const int64_t *dims)
{
    float *x = input(c, rank, dims);
    int64_t n = tide_shape_numel(&c->in[c->n_in - 1].shape);
    for (int64_t i = 0; i < n; i++)
        x[i] = roundf(x[i]);
}

/* An int32 input of values in [0, classes). */
static int32_t *input_labels(struct op_case *c, int64_t n, int64_t classes)
{
    assert_true(c->n_in < MAX_IO);
    struct tensor *t = &c->in[c->n_in++];
    *t = make_tensor(TIDE_DTYPE_INT32, 1, DIMS(n));
    int32_t *x = malloc(t->nbytes ? t->nbytes : 4);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = (int32_t)((frand(&c->seed) + 1.0f) / 2.0f * (float)classes) % (int32_t)classes;
    t->host = x;
    return x;
}

static void output(struct op_case *c, enum tide_dtype dtype, int32_t rank, const int64_t *dims)
{
    assert_true(c->n_out < MAX_IO);
    c->out[c->n_out++] = make_tensor(dtype, rank, dims);
}

static void outf(struct op_case *c, int32_t rank, const int64_t *dims)
{
    output(c, TIDE_DTYPE_FLOAT32, rank, dims);
}

/* ============================================================================
 * Running a case on a backend
 * ========================================================================== */

static uint64_t align_up(uint64_t n)
{
    return (n + ALIGN - 1) / ALIGN * ALIGN;
}

/* Where each tensor lies in the arena, and what came back. */
struct run {
    uint64_t in_off[MAX_IO], out_off[MAX_IO], ws_off, ws_bytes, total;
    unsigned char *image; /* the arena after the run */
};

/*
 * Runs the case's node on backend b. A fake graph of one producer per input
 * lets workspace_bytes see the input shapes. Every output byte and the
 * workspace start as 0xff (NaN). Returns the status of stream_sync (or of
 * whatever failed before), with err filled.
 */
static enum tide_status run_case(struct tide_backend *b, struct op_case *c, struct run *r,
                                 struct tide_error *err)
{
    struct tide_node producers[MAX_IO];
    struct tide_output produced[MAX_IO];
    memset(producers, 0, sizeof(producers));
    memset(r, 0, sizeof(*r));
    uint64_t at = 0;
    for (uint32_t i = 0; i < c->n_in; i++) {
        produced[i] = (struct tide_output){
            .dtype = c->in[i].dtype, .shape = c->in[i].shape, .nbytes = c->in[i].nbytes};
        producers[i].op = TIDE_OP_PLACEHOLDER;
        producers[i].name = "producer";
        producers[i].n_outputs = 1;
        producers[i].outputs = &produced[i];
        c->edges[i] = (struct tide_edge){i, 0};
        r->in_off[i] = at;
        at += align_up(c->in[i].nbytes);
    }
    for (uint32_t i = 0; i < c->n_out; i++) {
        c->outputs[i] = (struct tide_output){
            .dtype = c->out[i].dtype, .shape = c->out[i].shape, .nbytes = c->out[i].nbytes};
        r->out_off[i] = at;
        at += align_up(c->out[i].nbytes);
    }
    c->node.n_inputs = c->n_in;
    c->node.inputs = c->edges;
    c->node.n_outputs = c->n_out;
    c->node.outputs = c->outputs;
    struct tide_graph graph = {.nodes = producers, .n_nodes = c->n_in};
    r->ws_bytes = tide_backend_workspace_bytes(b, &graph, &c->node);
    r->ws_off = at;
    at += align_up(r->ws_bytes);
    r->total = at > 0 ? at : ALIGN;

    void *base = NULL, *staging = NULL;
    struct tide_stream *s = NULL;
    enum tide_status st = tide_backend_arena_alloc(b, r->total, &base, err);
    if (st == TIDE_OK)
        st = tide_backend_host_alloc(b, r->total, &staging, err);
    if (st == TIDE_OK)
        st = tide_backend_stream_new(b, &s, err);
    if (st == TIDE_OK) {
        memset(staging, 0xff, r->total);
        for (uint32_t i = 0; i < c->n_in; i++)
            if (c->in[i].nbytes)
                memcpy((char *)staging + r->in_off[i], c->in[i].host, c->in[i].nbytes);
        struct tide_tensor_view ins[MAX_IO], outs[MAX_IO];
        for (uint32_t i = 0; i < c->n_in; i++)
            ins[i] = (struct tide_tensor_view){.data = (char *)base + r->in_off[i],
                                               .dtype = c->in[i].dtype,
                                               .shape = c->in[i].shape,
                                               .nbytes = c->in[i].nbytes};
        for (uint32_t i = 0; i < c->n_out; i++)
            outs[i] = (struct tide_tensor_view){.data = (char *)base + r->out_off[i],
                                                .dtype = c->out[i].dtype,
                                                .shape = c->out[i].shape,
                                                .nbytes = c->out[i].nbytes};
        struct tide_kernel_args args = {
            .node = &c->node,
            .n_inputs = c->n_in,
            .inputs = ins,
            .n_outputs = c->n_out,
            .outputs = outs,
            .workspace = r->ws_bytes ? (char *)base + r->ws_off : NULL,
            .workspace_bytes = r->ws_bytes,
            .step = &adam_step,
            .seed = job_seed,
            .training = &training_step,
        };
        st = tide_backend_copy_h2d(b, base, staging, r->total, s);
        if (st == TIDE_OK)
            st = tide_backend_launch(b, s, &args);
        if (st == TIDE_OK)
            st = tide_backend_copy_d2h(b, staging, base, r->total, s);
        /* Always drain: the arguments live on this stack frame. */
        enum tide_status sync = tide_backend_stream_sync(b, s, err);
        if (st == TIDE_OK)
            st = sync;
        if (st == TIDE_OK) {
            r->image = malloc(r->total);
            assert_non_null(r->image);
            memcpy(r->image, staging, r->total);
        }
    }
    tide_backend_stream_free(b, s);
    tide_backend_host_free(b, staging);
    tide_backend_arena_free(b, base);
    return st;
}

/* The regions a case is judged by: its outputs, or for an update op its inputs. */
static uint32_t judged(const struct op_case *c, const struct run *r, uint32_t i,
                       const struct tensor **t, uint64_t *off)
{
    bool update = tide_op_info(c->node.op)->flags & TIDE_OP_F_UPDATE;
    if (t) {
        *t = update ? &c->in[i] : &c->out[i];
        *off = update ? r->in_off[i] : r->out_off[i];
    }
    return update ? c->n_in : c->n_out;
}

/*
 * Fails unless got is within c's tolerance of want (a tolerance of 0: the
 * same bits); the names say which run is which.
 */
static void compare_runs(const struct op_case *c, const struct run *want, const char *want_name,
                         const struct run *got, const char *got_name)
{
    for (uint32_t i = 0; i < judged(c, want, 0, NULL, NULL); i++) {
        const struct tensor *t;
        uint64_t off;
        judged(c, want, i, &t, &off);
        int64_t n = tide_shape_numel(&t->shape);
        if (t->dtype == TIDE_DTYPE_INT32) {
            if (memcmp(want->image + off, got->image + off, t->nbytes) != 0)
                fail_msg("%s: int32 tensor %u %s differs from %s", c->node.name, i, got_name,
                         want_name);
            continue;
        }
        const float *w = (const float *)(want->image + off), *g = (const float *)(got->image + off);
        for (int64_t k = 0; k < n; k++) {
            if (c->rtol == 0 && c->atol == 0) {
                if (memcmp(&w[k], &g[k], sizeof(float)) != 0)
                    fail_msg("%s (%s): tensor %u element %" PRId64 " is %.9g %s, %.9g %s (not the "
                             "same bits)",
                             c->node.name, tide_op_info(c->node.op)->name, i, k, g[k], got_name,
                             w[k], want_name);
                continue;
            }
            /* Equal values pass (infinities too, whose difference is NaN), and two NaNs. */
            if (w[k] == g[k] || (isnan(w[k]) && isnan(g[k])))
                continue;
            double diff = fabs((double)g[k] - (double)w[k]);
            if (!(diff <= c->atol + c->rtol * fabs((double)w[k])))
                fail_msg("%s (%s): tensor %u element %" PRId64 " is %.9g %s, %.9g %s (rtol %g, "
                         "atol %g)",
                         c->node.name, tide_op_info(c->node.op)->name, i, k, g[k], got_name, w[k],
                         want_name, c->rtol, c->atol);
        }
    }
}

static void compare(const struct op_case *c, const struct run *want, const struct run *got)
{
    compare_runs(c, want, "on the CPU", got, "on CUDA");
}

/* Fails unless runs a and b (of what, says `what`) gave the same bits. */
static void expect_same_bits_named(const struct op_case *c, const struct run *a,
                                   const struct run *b, const char *what)
{
    for (uint32_t i = 0; i < judged(c, a, 0, NULL, NULL); i++) {
        const struct tensor *t;
        uint64_t off;
        judged(c, a, i, &t, &off);
        if (memcmp(a->image + off, b->image + off, t->nbytes) != 0)
            fail_msg("%s (%s): two %s runs gave different bits in tensor %u", c->node.name,
                     tide_op_info(c->node.op)->name, what, i);
    }
}

static void expect_same_bits(const struct op_case *c, const struct run *a, const struct run *b)
{
    expect_same_bits_named(c, a, b, "CUDA");
}

/*
 * The check every case gets: the CPU reference must run; then, on a GPU,
 * two CUDA runs must match it within the case's tolerance and each other
 * bit for bit. Frees the case. A test of cases ends with REQUIRE_CUDA(), so
 * that it skips, saying why, where there is no GPU.
 */
static void check_case(struct op_case *c)
{
    covered[c->node.op] = true;
    struct tide_error err = {0};
    struct run want, got1, got2;
    enum tide_status st = run_case(cpu_backend, c, &want, &err);
    if (st != TIDE_OK)
        fail_msg("%s on the CPU: %s: %s", c->node.name, tide_status_name(st), err.message);
    if (!cuda_backend) {
        /* The test skips at its end (REQUIRE_CUDA), once every case's CPU half has run. */
        free(want.image);
        case_free(c);
        return;
    }
    st = run_case(cuda_backend, c, &got1, &err);
    if (st != TIDE_OK)
        fail_msg("%s on CUDA: %s: %s", c->node.name, tide_status_name(st), err.message);
    st = run_case(cuda_backend, c, &got2, &err);
    if (st != TIDE_OK)
        fail_msg("%s on CUDA (second run): %s: %s", c->node.name, tide_status_name(st),
                 err.message);
    compare(c, &want, &got1);
    expect_same_bits(c, &got1, &got2);
    free(want.image);
    free(got1.image);
    free(got2.image);
    case_free(c);
}

/* ============================================================================
 * Shape ops
 * ========================================================================== */

static void test_identity_reshape(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_IDENTITY, "identity", TOL_EXACT);
    input(&c, 2, DIMS(3, 5));
    outf(&c, 2, DIMS(3, 5));
    check_case(&c);

    case_init(&c, TIDE_OP_IDENTITY, "identity_int32", TOL_EXACT);
    input_labels(&c, 17, 5);
    output(&c, TIDE_DTYPE_INT32, 1, DIMS(17));
    check_case(&c);

    case_init(&c, TIDE_OP_RESHAPE, "reshape", TOL_EXACT);
    set_ints(&c, TIDE_ATTR_RESHAPE_shape, 2, DIMS(6, 4));
    input(&c, 3, DIMS(2, 3, 4));
    outf(&c, 2, DIMS(6, 4));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_concat(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_CONCAT, "concat_axis0", TOL_EXACT);
    c.attrs[TIDE_ATTR_CONCAT_axis].i = 0;
    input(&c, 2, DIMS(2, 3));
    input(&c, 2, DIMS(4, 3));
    outf(&c, 2, DIMS(6, 3));
    check_case(&c);

    case_init(&c, TIDE_OP_CONCAT, "concat_axis1", TOL_EXACT);
    c.attrs[TIDE_ATTR_CONCAT_axis].i = 1;
    input(&c, 3, DIMS(2, 3, 4));
    input(&c, 3, DIMS(2, 1, 4));
    input(&c, 3, DIMS(2, 5, 4));
    outf(&c, 3, DIMS(2, 9, 4));
    check_case(&c);

    case_init(&c, TIDE_OP_CONCAT, "concat_int32_last", TOL_EXACT);
    c.attrs[TIDE_ATTR_CONCAT_axis].i = -1;
    input_labels(&c, 6, 9);
    input_labels(&c, 3, 9);
    output(&c, TIDE_DTYPE_INT32, 1, DIMS(9));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_slice(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_SLICE, "slice", TOL_EXACT);
    set_ints(&c, TIDE_ATTR_SLICE_begin, 3, DIMS(1, 2, 0));
    set_ints(&c, TIDE_ATTR_SLICE_size, 3, DIMS(3, 3, 7));
    input(&c, 3, DIMS(5, 6, 7));
    outf(&c, 3, DIMS(3, 3, 7));
    check_case(&c);

    case_init(&c, TIDE_OP_SLICE, "slice_int32", TOL_EXACT);
    set_ints(&c, TIDE_ATTR_SLICE_begin, 1, DIMS(2));
    set_ints(&c, TIDE_ATTR_SLICE_size, 1, DIMS(5));
    input_labels(&c, 10, 4);
    output(&c, TIDE_DTYPE_INT32, 1, DIMS(5));
    check_case(&c);

    case_init(&c, TIDE_OP_SLICE_GRAD, "slice_grad", TOL_EXACT);
    set_ints(&c, TIDE_ATTR_SLICE_GRAD_begin, 3, DIMS(1, 2, 0));
    set_shape(&c, TIDE_ATTR_SLICE_GRAD_shape, 3, DIMS(5, 6, 7));
    input(&c, 3, DIMS(3, 3, 7));
    outf(&c, 3, DIMS(5, 6, 7));
    check_case(&c);
    REQUIRE_CUDA();
}

/* ============================================================================
 * Element-wise ops
 * ========================================================================== */

static void test_matmul(void **state)
{
    (void)state;
    static const char *names[4] = {"matmul_nn", "matmul_nt", "matmul_tn", "matmul_tt"};
    for (int combo = 0; combo < 4; combo++) {
        bool ta = combo & 2, tb = combo & 1;
        int64_t m = 7, k = 5, n = 9;
        struct op_case c;
        case_init(&c, TIDE_OP_MATMUL, names[combo], TOL_GEMM);
        c.attrs[TIDE_ATTR_MATMUL_transpose_a].b = ta;
        c.attrs[TIDE_ATTR_MATMUL_transpose_b].b = tb;
        input(&c, 2, ta ? DIMS(k, m) : DIMS(m, k));
        input(&c, 2, tb ? DIMS(n, k) : DIMS(k, n));
        outf(&c, 2, DIMS(m, n));
        check_case(&c);
    }
    struct op_case c;
    case_init(&c, TIDE_OP_MATMUL, "matmul_large", TOL_GEMM);
    input(&c, 2, DIMS(64, 300));
    input(&c, 2, DIMS(300, 80));
    outf(&c, 2, DIMS(64, 80));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_binary(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_ADD, "add_same", TOL_EXACT);
    input(&c, 2, DIMS(4, 6));
    input(&c, 2, DIMS(4, 6));
    outf(&c, 2, DIMS(4, 6));
    check_case(&c);

    case_init(&c, TIDE_OP_SUB, "sub_channels", TOL_EXACT);
    input(&c, 4, DIMS(2, 3, 4, 5));
    input(&c, 3, DIMS(3, 1, 1));
    outf(&c, 4, DIMS(2, 3, 4, 5));
    check_case(&c);

    case_init(&c, TIDE_OP_MUL, "mul_outer", TOL_EXACT);
    input(&c, 2, DIMS(5, 1));
    input(&c, 2, DIMS(1, 7));
    outf(&c, 2, DIMS(5, 7));
    check_case(&c);

    case_init(&c, TIDE_OP_ADD, "add_scalar", TOL_EXACT);
    input(&c, 0, NULL);
    input(&c, 2, DIMS(4, 3));
    outf(&c, 2, DIMS(4, 3));
    check_case(&c);

    case_init(&c, TIDE_OP_MUL, "mul_rows", TOL_EXACT);
    input(&c, 3, DIMS(2, 3, 4));
    input(&c, 1, DIMS(4));
    outf(&c, 3, DIMS(2, 3, 4));
    check_case(&c);

    case_init(&c, TIDE_OP_BROADCAST_TO, "broadcast_to", TOL_EXACT);
    set_shape(&c, TIDE_ATTR_BROADCAST_TO_shape, 3, DIMS(2, 3, 4));
    input(&c, 2, DIMS(3, 1));
    outf(&c, 3, DIMS(2, 3, 4));
    check_case(&c);

    case_init(&c, TIDE_OP_BROADCAST_TO, "broadcast_to_rows", TOL_EXACT);
    set_shape(&c, TIDE_ATTR_BROADCAST_TO_shape, 2, DIMS(3, 5));
    input(&c, 1, DIMS(5));
    outf(&c, 2, DIMS(3, 5));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_bias_add_and_add_n(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_BIAS_ADD, "bias_add_2d", TOL_EXACT);
    input(&c, 2, DIMS(6, 5));
    input(&c, 1, DIMS(5));
    outf(&c, 2, DIMS(6, 5));
    check_case(&c);

    case_init(&c, TIDE_OP_BIAS_ADD, "bias_add_4d", TOL_EXACT);
    input(&c, 4, DIMS(2, 3, 4, 5));
    input(&c, 1, DIMS(3));
    outf(&c, 4, DIMS(2, 3, 4, 5));
    check_case(&c);

    case_init(&c, TIDE_OP_ADD_N, "add_n_3", TOL_EXACT);
    for (int i = 0; i < 3; i++)
        input(&c, 2, DIMS(4, 5));
    outf(&c, 2, DIMS(4, 5));
    check_case(&c);

    /* More inputs than one CUDA launch takes: the partial sums must keep the CPU's order. */
    case_init(&c, TIDE_OP_ADD_N, "add_n_20", TOL_EXACT);
    for (int i = 0; i < 20; i++)
        input(&c, 1, DIMS(7));
    outf(&c, 1, DIMS(7));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_unary(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_RELU, TIDE_OP_SIGMOID, TIDE_OP_TANH, TIDE_OP_NEG,
                                       TIDE_OP_SCALE};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        struct op_case c;
        case_init(&c, ops[i], tide_op_info(ops[i])->name, TOL_ELEM);
        if (ops[i] == TIDE_OP_SCALE)
            c.attrs[TIDE_ATTR_SCALE_scale].f = 0.37;
        input_range(&c, 2, DIMS(4, 33), -4.0f, 4.0f);
        outf(&c, 2, DIMS(4, 33));
        check_case(&c);
    }
    static const enum tide_op grads[] = {TIDE_OP_RELU_GRAD, TIDE_OP_SIGMOID_GRAD,
                                         TIDE_OP_TANH_GRAD};
    for (size_t i = 0; i < sizeof(grads) / sizeof(grads[0]); i++) {
        struct op_case c;
        case_init(&c, grads[i], tide_op_info(grads[i])->name, TOL_ELEM);
        input(&c, 2, DIMS(4, 33)); /* dy */
        input(&c, 2, DIMS(4, 33)); /* y: both signs, so Relu's mask matters */
        outf(&c, 2, DIMS(4, 33));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * Softmax and cross-entropy
 * ========================================================================== */

static void test_softmax(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_SOFTMAX, "softmax_last", TOL_ELEM);
    input_range(&c, 2, DIMS(5, 10), -8.0f, 8.0f);
    outf(&c, 2, DIMS(5, 10));
    check_case(&c);

    case_init(&c, TIDE_OP_SOFTMAX, "softmax_axis1", TOL_ELEM);
    c.attrs[TIDE_ATTR_SOFTMAX_axis].i = 1;
    input(&c, 3, DIMS(2, 7, 3));
    outf(&c, 3, DIMS(2, 7, 3));
    check_case(&c);

    case_init(&c, TIDE_OP_SOFTMAX, "softmax_long", TOL_ELEM);
    input_range(&c, 2, DIMS(3, 2000), -5.0f, 5.0f);
    outf(&c, 2, DIMS(3, 2000));
    check_case(&c);

    case_init(&c, TIDE_OP_SOFTMAX_GRAD, "softmax_grad_last", TOL_ELEM);
    input(&c, 2, DIMS(5, 10));
    input_range(&c, 2, DIMS(5, 10), 0.0f, 0.2f);
    outf(&c, 2, DIMS(5, 10));
    check_case(&c);

    case_init(&c, TIDE_OP_SOFTMAX_GRAD, "softmax_grad_axis1", TOL_ELEM);
    c.attrs[TIDE_ATTR_SOFTMAX_GRAD_axis].i = 1;
    input(&c, 3, DIMS(2, 7, 3));
    input_range(&c, 3, DIMS(2, 7, 3), 0.0f, 0.3f);
    outf(&c, 3, DIMS(2, 7, 3));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_softmax_cross_entropy(void **state)
{
    (void)state;
    static const int64_t sizes[2][2] = {{8, 10}, {4, 1500}};
    for (int i = 0; i < 2; i++) {
        int64_t n = sizes[i][0], classes = sizes[i][1];
        struct op_case c;
        case_init(&c, TIDE_OP_SOFTMAX_CROSS_ENTROPY, i ? "xent_long" : "xent", TOL_ELEM);
        input_range(&c, 2, DIMS(n, classes), -6.0f, 6.0f);
        input_labels(&c, n, classes);
        outf(&c, 1, DIMS(n));
        check_case(&c);

        case_init(&c, TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD, i ? "xent_grad_long" : "xent_grad",
                  TOL_ELEM);
        input_range(&c, 2, DIMS(n, classes), -6.0f, 6.0f);
        input_labels(&c, n, classes);
        input(&c, 1, DIMS(n));
        outf(&c, 2, DIMS(n, classes));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/*
 * A label out of range: the CPU refuses it when the kernel runs; CUDA finds
 * it on the device and reports it at stream_sync. Both name the node, the
 * example and the label.
 */
static void test_softmax_cross_entropy_bad_label(void **state)
{
    (void)state;
    covered[TIDE_OP_SOFTMAX_CROSS_ENTROPY] = true;
    for (int pass = 0; pass < 2; pass++) {
        struct tide_backend *b = pass == 0 ? cpu_backend : cuda_backend;
        if (!b)
            REQUIRE_CUDA();
        struct op_case c;
        case_init(&c, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent_bad", TOL_ELEM);
        input(&c, 2, DIMS(6, 10));
        int32_t *labels = input_labels(&c, 6, 10);
        labels[3] = 12;
        labels[5] = -1;
        outf(&c, 1, DIMS(6));
        struct tide_error err = {0};
        struct run r;
        enum tide_status st = run_case(b, &c, &r, &err);
        assert_int_equal(st, TIDE_INVALID);
        if (!strstr(err.message, "\"xent_bad\"") ||
            !strstr(err.message, "label 12 of example 3 is out of range [0, 10)"))
            fail_msg("%s: unexpected message: %s", tide_backend_name(b), err.message);
        case_free(&c);
    }
}

/* ============================================================================
 * Reductions
 * ========================================================================== */

static void test_reduce(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_REDUCE_SUM, "reduce_sum_axis1", TOL_ELEM);
    set_ints(&c, TIDE_ATTR_REDUCE_SUM_axes, 1, DIMS(1));
    input(&c, 3, DIMS(3, 4, 5));
    outf(&c, 2, DIMS(3, 5));
    check_case(&c);

    case_init(&c, TIDE_OP_REDUCE_SUM, "reduce_sum_all", TOL_ELEM);
    input(&c, 3, DIMS(3, 4, 5));
    outf(&c, 0, NULL);
    check_case(&c);

    case_init(&c, TIDE_OP_REDUCE_SUM, "reduce_sum_keep", TOL_ELEM);
    set_ints(&c, TIDE_ATTR_REDUCE_SUM_axes, 2, DIMS(0, 2));
    c.attrs[TIDE_ATTR_REDUCE_SUM_keep_dims].b = true;
    input(&c, 3, DIMS(3, 4, 5));
    outf(&c, 3, DIMS(1, 4, 1));
    check_case(&c);

    case_init(&c, TIDE_OP_REDUCE_SUM, "reduce_sum_long_strided", TOL_ELEM);
    set_ints(&c, TIDE_ATTR_REDUCE_SUM_axes, 1, DIMS(1));
    input(&c, 3, DIMS(2, 300, 3));
    outf(&c, 2, DIMS(2, 3));
    check_case(&c);

    case_init(&c, TIDE_OP_REDUCE_MEAN, "reduce_mean_last", TOL_ELEM);
    set_ints(&c, TIDE_ATTR_REDUCE_MEAN_axes, 1, DIMS(-1));
    input(&c, 2, DIMS(6, 100));
    outf(&c, 1, DIMS(6));
    check_case(&c);

    case_init(&c, TIDE_OP_REDUCE_MEAN, "reduce_mean_all", TOL_ELEM);
    input(&c, 2, DIMS(33, 70));
    outf(&c, 0, NULL);
    check_case(&c);

    case_init(&c, TIDE_OP_SUM_TO_SHAPE, "sum_to_shape_col", TOL_ELEM);
    set_shape(&c, TIDE_ATTR_SUM_TO_SHAPE_shape, 2, DIMS(3, 1));
    input(&c, 3, DIMS(4, 3, 5));
    outf(&c, 2, DIMS(3, 1));
    check_case(&c);

    case_init(&c, TIDE_OP_SUM_TO_SHAPE, "sum_to_shape_channels", TOL_ELEM);
    set_shape(&c, TIDE_ATTR_SUM_TO_SHAPE_shape, 3, DIMS(3, 1, 1));
    input(&c, 4, DIMS(2, 3, 4, 5));
    outf(&c, 3, DIMS(3, 1, 1));
    check_case(&c);

    case_init(&c, TIDE_OP_SUM_TO_SHAPE, "sum_to_shape_rows", TOL_ELEM);
    set_shape(&c, TIDE_ATTR_SUM_TO_SHAPE_shape, 1, DIMS(7));
    input(&c, 2, DIMS(6, 7));
    outf(&c, 1, DIMS(7));
    check_case(&c);

    case_init(&c, TIDE_OP_BIAS_ADD_GRAD, "bias_add_grad_2d", TOL_ELEM);
    input(&c, 2, DIMS(6, 5));
    outf(&c, 1, DIMS(5));
    check_case(&c);

    case_init(&c, TIDE_OP_BIAS_ADD_GRAD, "bias_add_grad_4d", TOL_ELEM);
    input(&c, 4, DIMS(4, 3, 8, 8));
    outf(&c, 1, DIMS(3));
    check_case(&c);
    REQUIRE_CUDA();
}

/* ============================================================================
 * Convolutions and pools
 * ========================================================================== */

/*
 * One convolution: x [n, c, h, w], w [k, c / group, r, s], strides, pads,
 * channel groups and dilations.
 */
struct conv_case {
    const char *name;
    int64_t n, c, h, w, k, r, s, sh, sw, ph, pw, group, dh, dw;
};

static const struct conv_case conv_cases[] = {
    {"same_3x3", 2, 3, 7, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {"strided_3x3", 2, 3, 7, 7, 4, 3, 3, 2, 2, 0, 0, 1, 1, 1},
    {"pointwise", 2, 3, 7, 7, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},
    {"odd_5x3", 3, 2, 9, 6, 4, 5, 3, 2, 1, 2, 1, 1, 1, 1},
    {"grouped_3x3", 2, 6, 7, 7, 4, 3, 3, 1, 1, 1, 1, 2, 1, 1},
    {"depthwise_3x3", 2, 4, 7, 7, 4, 3, 3, 2, 2, 1, 1, 4, 1, 1},
    {"depthwise_x2", 3, 3, 6, 5, 6, 3, 2, 1, 1, 1, 0, 3, 1, 1},
    /* CUDA's own depthwise filter gradient (kernels/cuda/conv.cu, from 1,024 taps): more
     * products per tap than a block has threads, and dilated with unequal strides and pads. */
    {"depthwise_wide", 2, 128, 20, 19, 128, 3, 3, 1, 1, 1, 1, 128, 1, 1},
    {"depthwise_wide_dilated", 2, 120, 11, 9, 120, 3, 3, 2, 1, 2, 1, 120, 2, 3},
    {"grouped_pointwise", 2, 6, 5, 5, 9, 1, 1, 1, 1, 0, 0, 3, 1, 1},
    {"dilated_3x3", 2, 3, 9, 9, 4, 3, 3, 1, 1, 2, 2, 1, 2, 2},
    {"dilated_strided", 2, 3, 11, 10, 4, 3, 3, 2, 1, 1, 3, 1, 3, 2},
    {"dilated_grouped", 2, 6, 9, 9, 4, 3, 3, 1, 2, 2, 1, 2, 2, 3},
    {"dilated_1d", 2, 3, 1, 16, 4, 1, 3, 1, 1, 0, 4, 1, 1, 4},
};

static int64_t conv_out(int64_t in, int64_t k, int64_t stride, int64_t pad)
{
    return (in + 2 * pad - k) / stride + 1;
}

/*
 * Builds case c as convolution v's Conv2D (which 0), Conv2DBackpropInput (1)
 * or Conv2DBackpropFilter (2), named in name.
 */
static void conv_case_init(struct op_case *c, const struct conv_case *v, int which, char name[64])
{
    /* A dilated filter's window spans (r - 1) * dh + 1 rows. */
    int64_t oh = conv_out(v->h, (v->r - 1) * v->dh + 1, v->sh, v->ph);
    int64_t ow = conv_out(v->w, (v->s - 1) * v->dw + 1, v->sw, v->pw);
    int64_t group = v->group, cg = v->c / group;
    static const char *prefix[3] = {"conv", "conv_dx", "conv_dw"};
    snprintf(name, 64, "%s_%s", prefix[which], v->name);
    if (which == 0) {
        case_init(c, TIDE_OP_CONV2D, name, TOL_GEMM);
        set_pair(c, TIDE_ATTR_CONV2D_strides, v->sh, v->sw);
        set_pair(c, TIDE_ATTR_CONV2D_pads, v->ph, v->pw);
        c->node.attrs[TIDE_ATTR_CONV2D_group].i = group;
        set_pair(c, TIDE_ATTR_CONV2D_dilations, v->dh, v->dw);
        input(c, 4, DIMS(v->n, v->c, v->h, v->w));
        input(c, 4, DIMS(v->k, cg, v->r, v->s));
        outf(c, 4, DIMS(v->n, v->k, oh, ow));
    } else if (which == 1) {
        case_init(c, TIDE_OP_CONV2D_BACKPROP_INPUT, name, TOL_GEMM);
        set_pair(c, TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, v->sh, v->sw);
        set_pair(c, TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads, v->ph, v->pw);
        set_shape(c, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, 4, DIMS(v->n, v->c, v->h, v->w));
        c->node.attrs[TIDE_ATTR_CONV2D_BACKPROP_INPUT_group].i = group;
        set_pair(c, TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations, v->dh, v->dw);
        input(c, 4, DIMS(v->n, v->k, oh, ow));
        input(c, 4, DIMS(v->k, cg, v->r, v->s));
        outf(c, 4, DIMS(v->n, v->c, v->h, v->w));
    } else {
        case_init(c, TIDE_OP_CONV2D_BACKPROP_FILTER, name, TOL_GEMM);
        set_pair(c, TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides, v->sh, v->sw);
        set_pair(c, TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads, v->ph, v->pw);
        set_shape(c, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, 4, DIMS(v->k, cg, v->r, v->s));
        c->node.attrs[TIDE_ATTR_CONV2D_BACKPROP_FILTER_group].i = group;
        set_pair(c, TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations, v->dh, v->dw);
        input(c, 4, DIMS(v->n, v->c, v->h, v->w));
        input(c, 4, DIMS(v->n, v->k, oh, ow));
        outf(c, 4, DIMS(v->k, cg, v->r, v->s));
    }
}

static void test_conv2d(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++) {
        for (int which = 0; which < 3; which++) {
            char name[64];
            struct op_case c;
            conv_case_init(&c, &conv_cases[i], which, name);
            check_case(&c);
        }
    }
    REQUIRE_CUDA();
}

/*
 * The CPU backend's two convolutions, oneDNN's primitives and its own im2col
 * + sgemm (the fallback): within TOL_GEMM of each other, and oneDNN twice
 * with the same bits. The cases add to conv_cases the shapes of the models
 * (16 to 64 channels, which oneDNN runs in blocked layouts; MobileNet's
 * depthwise and ResNeXt's 32 groups, DeepLab's atrous 3x3 at rates 6 and
 * 12, WaveNet's 1-D causal-style 1 x 2 at dilation 8) and odd ones
 * (channels not a multiple of oneDNN's block, 1x1 with stride 2, 6 groups of
 * 3 channels, dilated with strides or in depthwise groups).
 */
static void test_conv2d_onednn_vs_fallback(void **state)
{
    (void)state;
    REQUIRE_ONEDNN();
    static const struct conv_case extra[] = {
        {"resnet_16", 2, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {"resnet_down", 2, 16, 12, 12, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1},
        {"resnet_shortcut", 2, 16, 12, 12, 32, 1, 1, 2, 2, 0, 0, 1, 1, 1},
        {"cnn_first", 3, 1, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},
        {"odd_channels", 3, 17, 9, 11, 19, 3, 3, 2, 1, 1, 0, 1, 1, 1},
        {"wide_5x5", 2, 24, 10, 10, 40, 5, 5, 1, 1, 2, 2, 1, 1, 1},
        {"mobilenet_dw", 2, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 32, 1, 1},
        {"mobilenet_dw_down", 2, 32, 14, 14, 32, 3, 3, 2, 2, 1, 1, 32, 1, 1},
        {"resnext_32x4d", 2, 128, 8, 8, 128, 3, 3, 1, 1, 1, 1, 32, 1, 1},
        {"grouped_odd", 3, 18, 9, 7, 12, 3, 3, 2, 1, 1, 0, 6, 1, 1},
        {"deeplab_aspp_6", 2, 32, 16, 16, 32, 3, 3, 1, 1, 6, 6, 1, 6, 6},
        {"deeplab_aspp_12", 1, 16, 20, 20, 24, 3, 3, 1, 1, 12, 12, 1, 12, 12},
        {"dilated_strided", 2, 16, 15, 13, 16, 3, 3, 2, 1, 1, 3, 1, 2, 3},
        {"wavenet_1d", 2, 16, 1, 40, 32, 1, 2, 1, 1, 0, 0, 1, 1, 8},
        {"dilated_dw", 2, 32, 14, 14, 32, 3, 3, 1, 1, 2, 2, 32, 2, 2},
        {"dilated_odd", 3, 5, 11, 9, 7, 3, 2, 1, 2, 2, 1, 1, 3, 2},
    };
    struct conv_case cases[sizeof(conv_cases) / sizeof(conv_cases[0]) +
                           sizeof(extra) / sizeof(extra[0])];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(conv_cases) / sizeof(conv_cases[0]); i++)
        cases[n++] = conv_cases[i];
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++)
        cases[n++] = extra[i];
    uint64_t through[3] = {0, 0, 0}, through_grouped[3] = {0, 0, 0}, through_dilated[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        for (int which = 0; which < 3; which++) {
            char name[64];
            struct op_case c;
            struct tide_error err = {0};
            struct run onednn[2], own;
            conv_case_init(&c, &cases[i], which, name);
            uint64_t before = tide_cpu_kernels_onednn_runs(c.node.op);
            for (int r = 0; r < 3; r++) {
                if (r == 2) {
                    uint64_t runs = tide_cpu_kernels_onednn_runs(c.node.op) - before;
                    through[which] += runs;
                    if (cases[i].group > 1)
                        through_grouped[which] += runs;
                    if (cases[i].dh > 1 || cases[i].dw > 1)
                        through_dilated[which] += runs;
                }
                tide_cpu_kernels_use_onednn(r < 2);
                enum tide_status st = run_case(cpu_backend, &c, r < 2 ? &onednn[r] : &own, &err);
                if (st != TIDE_OK)
                    fail_msg("%s %s: %s: %s", name, r < 2 ? "through oneDNN" : "without oneDNN",
                             tide_status_name(st), err.message);
            }
            tide_cpu_kernels_use_onednn(true);
            compare_runs(&c, &own, "without oneDNN", &onednn[0], "through oneDNN");
            expect_same_bits_named(&c, &onednn[0], &onednn[1], "oneDNN");
            free(onednn[0].image), free(onednn[1].image), free(own.image);
            case_free(&c);
        }
    }
    /* Where its workspace fits conv_slot_limit, oneDNN runs: some case of each op must. */
    static const char *ops[3] = {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"};
    for (int which = 0; which < 3; which++) {
        if (through[which] == 0)
            fail_msg("no %s case ran through oneDNN: the comparison compared the fallback with "
                     "itself",
                     ops[which]);
        if (through_grouped[which] == 0)
            fail_msg("no grouped %s case ran through oneDNN", ops[which]);
        if (through_dilated[which] == 0)
            fail_msg("no dilated %s case ran through oneDNN", ops[which]);
    }
}

/* One pool over x [2, 3, h, w]. */
struct pool_case {
    const char *name;
    int64_t h, w, kh, kw, sh, sw, ph, pw;
};

static const struct pool_case pool_cases[] = {
    {"2x2s2", 8, 8, 2, 2, 2, 2, 0, 0},
    {"3x3s2p1", 8, 8, 3, 3, 2, 2, 1, 1},
    {"3x3s1p1", 5, 5, 3, 3, 1, 1, 1, 1},
    {"3x2s1p0", 6, 5, 3, 2, 1, 2, 0, 1},
};

static void set_pool_attrs(struct op_case *c, int ksize, int strides, int pads,
                           const struct pool_case *v)
{
    set_pair(c, ksize, v->kh, v->kw);
    set_pair(c, strides, v->sh, v->sw);
    set_pair(c, pads, v->ph, v->pw);
}

/*
 * MaxPool2DGrad's int32 argmax input for pool case v over [2, 3, H, W]: for
 * each window a random cell of it, clipped to the input, as an index into
 * its plane (windows overlap where the stride is below the kernel, so some
 * cells take several dy).
 */
static void input_argmax(struct op_case *c, const struct pool_case *v, int64_t oh, int64_t ow)
{
    assert_true(c->n_in < MAX_IO);
    struct tensor *t = &c->in[c->n_in++];
    *t = make_tensor(TIDE_DTYPE_INT32, 4, DIMS(2, 3, oh, ow));
    int32_t *a = malloc(t->nbytes);
    assert_non_null(a);
    for (int64_t pl = 0; pl < 6; pl++) {
        for (int64_t i = 0; i < oh; i++) {
            for (int64_t j = 0; j < ow; j++) {
                int64_t h0 = i * v->sh - v->ph, w0 = j * v->sw - v->pw;
                int64_t h1 = h0 + v->kh < v->h ? h0 + v->kh : v->h;
                int64_t w1 = w0 + v->kw < v->w ? w0 + v->kw : v->w;
                h0 = h0 < 0 ? 0 : h0;
                w0 = w0 < 0 ? 0 : w0;
                int64_t h = h0 + (int64_t)((frand(&c->seed) + 1.0f) / 2.0f * (float)(h1 - h0));
                int64_t w = w0 + (int64_t)((frand(&c->seed) + 1.0f) / 2.0f * (float)(w1 - w0));
                h = h < h1 ? h : h1 - 1;
                w = w < w1 ? w : w1 - 1;
                a[(pl * oh + i) * ow + j] = (int32_t)(h * v->w + w);
            }
        }
    }
    t->host = a;
}

static void test_pools(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(pool_cases) / sizeof(pool_cases[0]); i++) {
        const struct pool_case *v = &pool_cases[i];
        int64_t oh = conv_out(v->h, v->kh, v->sh, v->ph), ow = conv_out(v->w, v->kw, v->sw, v->pw);
        char names[4][64];
        snprintf(names[0], sizeof(names[0]), "max_pool_%s", v->name);
        snprintf(names[1], sizeof(names[1]), "avg_pool_%s", v->name);
        snprintf(names[2], sizeof(names[2]), "max_pool_grad_%s", v->name);
        snprintf(names[3], sizeof(names[3]), "avg_pool_grad_%s", v->name);
        struct op_case c;

        /* Values in {-1, 0, 1}: windows with ties, where the first maximum must win. */
        case_init(&c, TIDE_OP_MAX_POOL2D, names[0], TOL_EXACT);
        set_pool_attrs(&c, TIDE_ATTR_MAX_POOL2D_ksize, TIDE_ATTR_MAX_POOL2D_strides,
                       TIDE_ATTR_MAX_POOL2D_pads, v);
        input_ties(&c, 4, DIMS(2, 3, v->h, v->w));
        outf(&c, 4, DIMS(2, 3, oh, ow));
        output(&c, TIDE_DTYPE_INT32, 4, DIMS(2, 3, oh, ow)); /* argmax */
        check_case(&c);

        case_init(&c, TIDE_OP_AVG_POOL2D, names[1], TOL_EXACT);
        set_pool_attrs(&c, TIDE_ATTR_AVG_POOL2D_ksize, TIDE_ATTR_AVG_POOL2D_strides,
                       TIDE_ATTR_AVG_POOL2D_pads, v);
        input(&c, 4, DIMS(2, 3, v->h, v->w));
        outf(&c, 4, DIMS(2, 3, oh, ow));
        check_case(&c);

        case_init(&c, TIDE_OP_MAX_POOL2D_GRAD, names[2], TOL_EXACT);
        set_pool_attrs(&c, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, TIDE_ATTR_MAX_POOL2D_GRAD_strides,
                       TIDE_ATTR_MAX_POOL2D_GRAD_pads, v);
        set_shape(&c, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, 4, DIMS(2, 3, v->h, v->w));
        input(&c, 4, DIMS(2, 3, oh, ow));
        input_argmax(&c, v, oh, ow);
        outf(&c, 4, DIMS(2, 3, v->h, v->w));
        check_case(&c);

        case_init(&c, TIDE_OP_AVG_POOL2D_GRAD, names[3], TOL_EXACT);
        set_pool_attrs(&c, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, TIDE_ATTR_AVG_POOL2D_GRAD_strides,
                       TIDE_ATTR_AVG_POOL2D_GRAD_pads, v);
        set_shape(&c, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, 4, DIMS(2, 3, v->h, v->w));
        input(&c, 4, DIMS(2, 3, oh, ow));
        outf(&c, 4, DIMS(2, 3, v->h, v->w));
        check_case(&c);
    }

    struct op_case c;
    case_init(&c, TIDE_OP_GLOBAL_AVG_POOL, "global_avg_pool", TOL_ELEM);
    input(&c, 4, DIMS(3, 4, 5, 6));
    outf(&c, 2, DIMS(3, 4));
    check_case(&c);

    case_init(&c, TIDE_OP_GLOBAL_AVG_POOL, "global_avg_pool_large", TOL_ELEM);
    input(&c, 4, DIMS(2, 3, 16, 16));
    outf(&c, 2, DIMS(2, 3));
    check_case(&c);

    case_init(&c, TIDE_OP_GLOBAL_AVG_POOL_GRAD, "global_avg_pool_grad", TOL_ELEM);
    set_shape(&c, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, 4, DIMS(3, 4, 5, 6));
    input(&c, 2, DIMS(3, 4));
    outf(&c, 4, DIMS(3, 4, 5, 6));
    check_case(&c);
    REQUIRE_CUDA();
}

/* ============================================================================
 * Batch norm and the optimizers
 * ========================================================================== */

static void test_batch_norm(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int32_t rank;
        int64_t dims[4];
    } shapes[] = {
        {"bn_4d", 4, {4, 3, 5, 5}},
        {"bn_2d", 2, {16, 6}},
        {"bn_large", 4, {8, 2, 40, 40}},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int64_t channels = shapes[i].dims[1];
        char grad_name[64];
        snprintf(grad_name, sizeof(grad_name), "%s_grad", shapes[i].name);
        struct op_case c;
        case_init(&c, TIDE_OP_BATCH_NORM, shapes[i].name, TOL_ELEM);
        c.attrs[TIDE_ATTR_BATCH_NORM_epsilon].f = 1e-3;
        float *x = input(&c, shapes[i].rank, shapes[i].dims);
        /* An offset against the spread, as real activations have: two-pass statistics. */
        for (int64_t k = 0; k < tide_shape_numel(&c.in[0].shape); k++)
            x[k] = 3.0f + 0.5f * x[k];
        input_range(&c, 1, DIMS(channels), 0.5f, 1.5f);
        input(&c, 1, DIMS(channels));
        outf(&c, shapes[i].rank, shapes[i].dims);
        outf(&c, 1, DIMS(channels));
        outf(&c, 1, DIMS(channels));
        check_case(&c);

        case_init(&c, TIDE_OP_BATCH_NORM_GRAD, grad_name, TOL_ELEM);
        input(&c, shapes[i].rank, shapes[i].dims);       /* dy */
        input(&c, shapes[i].rank, shapes[i].dims);       /* x */
        input_range(&c, 1, DIMS(channels), 0.5f, 1.5f);  /* gamma */
        input_range(&c, 1, DIMS(channels), -0.1f, 0.1f); /* mean */
        input_range(&c, 1, DIMS(channels), 1.0f, 2.0f);  /* inv_std */
        outf(&c, shapes[i].rank, shapes[i].dims);
        outf(&c, 1, DIMS(channels));
        outf(&c, 1, DIMS(channels));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * oneDNN's pools and batch norms against the CPU kernels' own
 * ========================================================================== */

/*
 * Runs case c on the CPU three times: through oneDNN, forced for every
 * shape, at 1 and at 3 threads, then with oneDNN off. The two oneDNN runs
 * must both have taken oneDNN's path and give the same bits; they must be
 * within c's tolerance of tide's own kernel, whose workspace stays 0 (the
 * planner recomputes pools and batch norms only without one). Frees c.
 */
static void onednn_vs_own(struct op_case *c)
{
    covered[c->node.op] = true;
    struct tide_error err = {0};
    struct run onednn[2], own;
    uint64_t before = tide_cpu_kernels_onednn_runs(c->node.op);
    for (int r = 0; r < 3; r++) {
        tide_cpu_kernels_use_onednn(r < 2);
        tide_cpu_kernels_onednn_everywhere(r < 2);
        tide_cpu_kernels_set_threads(r == 0 ? 1 : 3);
        enum tide_status st = run_case(cpu_backend, c, r < 2 ? &onednn[r] : &own, &err);
        if (st != TIDE_OK)
            fail_msg("%s %s: %s: %s", c->node.name, r < 2 ? "through oneDNN" : "without oneDNN",
                     tide_status_name(st), err.message);
    }
    uint64_t through = tide_cpu_kernels_onednn_runs(c->node.op) - before;
    tide_cpu_kernels_use_onednn(true);
    tide_cpu_kernels_onednn_everywhere(false);
    tide_cpu_kernels_set_threads(0);
    if (through != 2)
        fail_msg("%s: %" PRIu64 " of 2 forced runs went through oneDNN", c->node.name, through);
    if (own.ws_bytes != 0)
        fail_msg("%s: tide's own kernel asked for %" PRIu64 " bytes of workspace, not 0",
                 c->node.name, own.ws_bytes);
    compare_runs(c, &own, "without oneDNN", &onednn[0], "through oneDNN");
    expect_same_bits_named(c, &onednn[0], &onednn[1], "oneDNN (1 and 3 threads)");
    free(onednn[0].image), free(onednn[1].image), free(own.image);
    case_free(c);
}

/*
 * The pools that oneDNN and tide's kernels are compared on: pool_cases'
 * windows, batches not a multiple of the 8 pieces (11, 9, 5, 3), channels
 * not a multiple of oneDNN's blocks of 16, model shapes (the CNN's 2x2,
 * ResNet-50's 3x3 stride 2 pad 1 stem), and 17x17 windows, whose max
 * positions oneDNN stores as s32 (more than 256 cells).
 */
static const struct onednn_pool_case {
    const char *name;
    int64_t n, c, h, w, kh, kw, sh, sw, ph, pw;
} onednn_pools[] = {
    {"2x2s2", 2, 3, 8, 8, 2, 2, 2, 2, 0, 0},
    {"3x3s2p1", 2, 3, 8, 8, 3, 3, 2, 2, 1, 1},
    {"3x3s1p1", 2, 3, 5, 5, 3, 3, 1, 1, 1, 1},
    {"3x2s1p0", 2, 3, 6, 5, 3, 2, 1, 2, 0, 1},
    {"odd_n11", 11, 5, 9, 7, 3, 3, 2, 2, 1, 1},
    {"uneven_end", 3, 4, 9, 10, 2, 3, 3, 2, 0, 1},
    {"model_2x2", 16, 32, 16, 16, 2, 2, 2, 2, 0, 0},
    {"2x2s2_c20_odd", 9, 20, 11, 13, 2, 2, 2, 2, 0, 0},
    {"3x3s2p1_c16", 3, 16, 15, 14, 3, 3, 2, 2, 1, 1},
    {"3x3s1p1_c32", 5, 32, 9, 9, 3, 3, 1, 1, 1, 1},
    {"stem_3x3s2p1", 10, 64, 28, 28, 3, 3, 2, 2, 1, 1},
    {"17x17_s32", 3, 16, 20, 20, 17, 17, 1, 1, 0, 0},
    {"17x17_s32_c3", 2, 3, 20, 19, 17, 17, 3, 2, 0, 0},
};

/* Case p as a pool_case, with its batch, channels and output size. */
static struct pool_case onednn_pool(const struct onednn_pool_case *p, int64_t *n, int64_t *ch,
                                    int64_t *oh, int64_t *ow)
{
    *n = p->n, *ch = p->c;
    *oh = conv_out(p->h, p->kh, p->sh, p->ph);
    *ow = conv_out(p->w, p->kw, p->sw, p->pw);
    return (struct pool_case){p->name, p->h, p->w, p->kh, p->kw, p->sh, p->sw, p->ph, p->pw};
}

/*
 * MaxPool2D through oneDNN (its positions turned into tide's argmax,
 * kernels/onednn/pool.c) against tide's kernel: y and argmax must be the
 * same bits. Values from {-1, 0, 1} give windows of equal maxima, where the
 * first in row-major order must win; then values with -inf, NaN and
 * -FLT_MAX, which oneDNN starts from and tide does not, where pool.c
 * redoes the window with tide's code; on every shape of onednn_pools.
 */
static void max_pools_onednn_vs_fallback(void)
{
    for (size_t i = 0; i < sizeof(onednn_pools) / sizeof(onednn_pools[0]); i++) {
        int64_t n, ch, oh, ow;
        struct pool_case v = onednn_pool(&onednn_pools[i], &n, &ch, &oh, &ow);
        int64_t h = v.h, w = v.w;
        for (int values = 0; values < 2; values++) {
            char name[64];
            snprintf(name, sizeof(name), "max_pool_%s_%s", v.name, values ? "special" : "ties");
            struct op_case c;
            case_init(&c, TIDE_OP_MAX_POOL2D, name, TOL_EXACT);
            c.rtol = c.atol = 0; /* the same bits */
            set_pool_attrs(&c, TIDE_ATTR_MAX_POOL2D_ksize, TIDE_ATTR_MAX_POOL2D_strides,
                           TIDE_ATTR_MAX_POOL2D_pads, &v);
            input_ties(&c, 4, DIMS(n, ch, h, w));
            if (values) {
                /* Every eighth cell -inf, NaN or -FLT_MAX; some planes all -inf. */
                float *x = c.in[0].host;
                int64_t cells = n * ch * h * w;
                static const float special[3] = {-INFINITY, NAN, -FLT_MAX};
                for (int64_t k = 0; k < cells; k++) {
                    if (k / (h * w) % 5 == 3)
                        x[k] = -INFINITY;
                    else if (frand(&c.seed) < -0.75f)
                        x[k] = special[k % 3];
                }
            }
            outf(&c, 4, DIMS(n, ch, oh, ow));
            output(&c, TIDE_DTYPE_INT32, 4, DIMS(n, ch, oh, ow)); /* argmax */
            onednn_vs_own(&c);
        }
    }
}

static void test_pools_onednn_vs_fallback(void **state)
{
    (void)state;
    REQUIRE_ONEDNN();
    for (size_t i = 0; i < sizeof(onednn_pools) / sizeof(onednn_pools[0]); i++) {
        int64_t n, ch, oh, ow;
        struct pool_case v = onednn_pool(&onednn_pools[i], &n, &ch, &oh, &ow);
        int64_t h = v.h, w = v.w;
        char names[2][64];
        snprintf(names[0], sizeof(names[0]), "avg_pool_%s", v.name);
        snprintf(names[1], sizeof(names[1]), "avg_pool_grad_%s", v.name);
        struct op_case c;
        case_init(&c, TIDE_OP_AVG_POOL2D, names[0], TOL_ELEM);
        set_pool_attrs(&c, TIDE_ATTR_AVG_POOL2D_ksize, TIDE_ATTR_AVG_POOL2D_strides,
                       TIDE_ATTR_AVG_POOL2D_pads, &v);
        input(&c, 4, DIMS(n, ch, h, w));
        outf(&c, 4, DIMS(n, ch, oh, ow));
        onednn_vs_own(&c);

        case_init(&c, TIDE_OP_AVG_POOL2D_GRAD, names[1], TOL_ELEM);
        set_pool_attrs(&c, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, TIDE_ATTR_AVG_POOL2D_GRAD_strides,
                       TIDE_ATTR_AVG_POOL2D_GRAD_pads, &v);
        set_shape(&c, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, 4, DIMS(n, ch, h, w));
        input(&c, 4, DIMS(n, ch, oh, ow));
        outf(&c, 4, DIMS(n, ch, h, w));
        onednn_vs_own(&c);
    }
    max_pools_onednn_vs_fallback();
    /* The global pools: small planes, odd batches, ResNet-38's last feature map. */
    static const int64_t globals[][4] = {{3, 4, 5, 6}, {11, 20, 7, 7}, {16, 512, 4, 4}};
    for (size_t i = 0; i < sizeof(globals) / sizeof(globals[0]); i++) {
        const int64_t *d = globals[i];
        char names[2][64];
        snprintf(names[0], sizeof(names[0]), "global_avg_pool_%" PRId64 "x%" PRId64, d[0], d[1]);
        snprintf(names[1], sizeof(names[1]), "global_avg_pool_grad_%" PRId64 "x%" PRId64, d[0],
                 d[1]);
        struct op_case c;
        case_init(&c, TIDE_OP_GLOBAL_AVG_POOL, names[0], TOL_ELEM);
        input(&c, 4, d);
        outf(&c, 2, DIMS(d[0], d[1]));
        onednn_vs_own(&c);

        case_init(&c, TIDE_OP_GLOBAL_AVG_POOL_GRAD, names[1], TOL_ELEM);
        set_shape(&c, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, 4, d);
        input(&c, 2, DIMS(d[0], d[1]));
        outf(&c, 4, d);
        onednn_vs_own(&c);
    }
}

static void test_batch_norm_onednn_vs_fallback(void **state)
{
    (void)state;
    REQUIRE_ONEDNN();
    static const struct {
        const char *name;
        int32_t rank;
        int64_t dims[4];
    } shapes[] = {
        {"bn_4d", 4, {4, 3, 5, 5}},   {"bn_2d", 2, {16, 6}},     {"bn_large", 4, {8, 2, 40, 40}},
        {"bn_odd", 4, {3, 17, 7, 9}}, {"bn_2d_odd", 2, {5, 33}}, {"bn_resnet", 4, {16, 16, 16, 16}},
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int32_t rank = shapes[i].rank;
        const int64_t *dims = shapes[i].dims;
        int64_t channels = dims[1];
        char names[2][64];
        snprintf(names[0], sizeof(names[0]), "onednn_%s", shapes[i].name);
        snprintf(names[1], sizeof(names[1]), "onednn_%s_grad", shapes[i].name);
        struct op_case c;
        case_init(&c, TIDE_OP_BATCH_NORM, names[0], TOL_ELEM);
        c.attrs[TIDE_ATTR_BATCH_NORM_epsilon].f = 1e-3;
        float *x = input(&c, rank, dims);
        /* An offset against the spread, as real activations have. */
        for (int64_t k = 0; k < tide_shape_numel(&c.in[0].shape); k++)
            x[k] = 3.0f + 0.5f * x[k];
        input_range(&c, 1, DIMS(channels), 0.5f, 1.5f);
        input(&c, 1, DIMS(channels));
        outf(&c, rank, dims);
        outf(&c, 1, DIMS(channels));
        outf(&c, 1, DIMS(channels));
        onednn_vs_own(&c);

        /* inv_std as the forward makes them with epsilon 1e-3: variances 0.25 to 1 - 1e-3. */
        case_init(&c, TIDE_OP_BATCH_NORM_GRAD, names[1], TOL_ELEM);
        c.attrs[TIDE_ATTR_BATCH_NORM_GRAD_epsilon].f = 1e-3;
        input(&c, rank, dims);                           /* dy */
        input(&c, rank, dims);                           /* x */
        input_range(&c, 1, DIMS(channels), 0.5f, 1.5f);  /* gamma */
        input_range(&c, 1, DIMS(channels), -0.1f, 0.1f); /* mean */
        input_range(&c, 1, DIMS(channels), 1.0f, 2.0f);  /* inv_std */
        outf(&c, rank, dims);
        outf(&c, 1, DIMS(channels));
        outf(&c, 1, DIMS(channels));
        onednn_vs_own(&c);
    }
}

/*
 * The default choice (kernels/onednn/pool.c, norm.c): oneDNN runs average
 * pools of 16 channels or more, and max pools of 16 channels or more whose
 * windows overlap or pad (ResNet-50's stem), and plans a workspace for
 * them; tide's own kernels run BatchNorm, pools of fewer channels and max
 * pools whose windows tile the input (the CNN's), with workspace 0 (which
 * a MaxPool2D needs to be recomputable).
 */
static void test_onednn_default_choice(void **state)
{
    (void)state;
    REQUIRE_ONEDNN();
    tide_cpu_kernels_onednn_everywhere(false);
    static const struct {
        const char *name;
        enum tide_op op;
        int64_t c, k, s, p; /* the pools' window, stride, pad */
        bool onednn;
    } cases[] = {
        {"default_avg_pool_c32", TIDE_OP_AVG_POOL2D, 32, 2, 2, 0, true},
        {"default_avg_pool_c3", TIDE_OP_AVG_POOL2D, 3, 2, 2, 0, false},
        {"default_batch_norm_c32", TIDE_OP_BATCH_NORM, 32, 0, 0, 0, false},
        {"default_max_pool_3x3s2p1_c32", TIDE_OP_MAX_POOL2D, 32, 3, 2, 1, true},
        {"default_max_pool_3x3s1p1_c16", TIDE_OP_MAX_POOL2D, 16, 3, 1, 1, true},
        {"default_max_pool_3x3s2p1_c3", TIDE_OP_MAX_POOL2D, 3, 3, 2, 1, false},
        {"default_max_pool_2x2s2_c32", TIDE_OP_MAX_POOL2D, 32, 2, 2, 0, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct op_case c;
        int64_t ch = cases[i].c;
        case_init(&c, cases[i].op, cases[i].name, TOL_ELEM);
        input(&c, 4, DIMS(4, ch, 8, 8));
        int64_t out = cases[i].s ? conv_out(8, cases[i].k, cases[i].s, cases[i].p) : 8;
        if (cases[i].op == TIDE_OP_AVG_POOL2D) {
            set_pair(&c, TIDE_ATTR_AVG_POOL2D_ksize, cases[i].k, cases[i].k);
            set_pair(&c, TIDE_ATTR_AVG_POOL2D_strides, cases[i].s, cases[i].s);
            set_pair(&c, TIDE_ATTR_AVG_POOL2D_pads, cases[i].p, cases[i].p);
            outf(&c, 4, DIMS(4, ch, out, out));
        } else if (cases[i].op == TIDE_OP_MAX_POOL2D) {
            set_pair(&c, TIDE_ATTR_MAX_POOL2D_ksize, cases[i].k, cases[i].k);
            set_pair(&c, TIDE_ATTR_MAX_POOL2D_strides, cases[i].s, cases[i].s);
            set_pair(&c, TIDE_ATTR_MAX_POOL2D_pads, cases[i].p, cases[i].p);
            outf(&c, 4, DIMS(4, ch, out, out));
            output(&c, TIDE_DTYPE_INT32, 4, DIMS(4, ch, out, out)); /* argmax */
        } else {
            input_range(&c, 1, DIMS(ch), 0.5f, 1.5f);
            input(&c, 1, DIMS(ch));
            outf(&c, 4, DIMS(4, ch, 8, 8));
            outf(&c, 1, DIMS(ch));
            outf(&c, 1, DIMS(ch));
        }
        struct tide_error err = {0};
        struct run r;
        uint64_t before = tide_cpu_kernels_onednn_runs(c.node.op);
        enum tide_status st = run_case(cpu_backend, &c, &r, &err);
        if (st != TIDE_OK)
            fail_msg("%s: %s: %s", c.node.name, tide_status_name(st), err.message);
        uint64_t through = tide_cpu_kernels_onednn_runs(c.node.op) - before;
        if (through != (cases[i].onednn ? 1u : 0u))
            fail_msg("%s: %" PRIu64 " runs through oneDNN, expected %d", c.node.name, through,
                     cases[i].onednn);
        if (!cases[i].onednn && r.ws_bytes != 0)
            fail_msg("%s: workspace %" PRIu64 " bytes for tide's own kernel, not 0", c.node.name,
                     r.ws_bytes);
        if (cases[i].op == TIDE_OP_MAX_POOL2D && cases[i].onednn && r.ws_bytes == 0)
            fail_msg("%s: no workspace planned for oneDNN's positions", c.node.name);
        free(r.image);
        case_free(&c);
    }
}

static void test_optimizers(void **state)
{
    (void)state;
    struct op_case c;
    case_init(&c, TIDE_OP_APPLY_SGD, "sgd", TOL_ELEM);
    c.attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f = 0.1;
    input(&c, 2, DIMS(5, 7));
    input(&c, 2, DIMS(5, 7));
    check_case(&c);

    for (int nesterov = 0; nesterov < 2; nesterov++) {
        case_init(&c, TIDE_OP_APPLY_MOMENTUM, nesterov ? "momentum_nesterov" : "momentum",
                  TOL_ELEM);
        c.attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f = 0.05;
        c.attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f = 0.9;
        c.attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b = nesterov;
        input(&c, 1, DIMS(300));
        input(&c, 1, DIMS(300));
        input(&c, 1, DIMS(300));
        check_case(&c);
    }

    case_init(&c, TIDE_OP_APPLY_ADAM, "adam", TOL_ELEM);
    c.attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f = 0.001;
    input(&c, 1, DIMS(300));                    /* var */
    input_range(&c, 1, DIMS(300), -0.1f, 0.1f); /* m */
    input_range(&c, 1, DIMS(300), 0.01f, 0.1f); /* v */
    input(&c, 1, DIMS(300));                    /* grad */
    check_case(&c);
    REQUIRE_CUDA();
}

/* ============================================================================
 * The CUDA backend's own semantics
 * ========================================================================== */

static struct tide_stream *new_stream(struct tide_backend *b)
{
    struct tide_stream *s = NULL;
    struct tide_error err = {0};
    if (tide_backend_stream_new(b, &s, &err) != TIDE_OK)
        fail_msg("stream_new: %s", err.message);
    return s;
}

static struct tide_event *new_event(struct tide_backend *b)
{
    struct tide_event *e = NULL;
    struct tide_error err = {0};
    if (tide_backend_event_new(b, &e, &err) != TIDE_OK)
        fail_msg("event_new: %s", err.message);
    return e;
}

/*
 * The CUDA backend runs every op of graph/ops.def (a kernel, or the
 * executor's copies for sources and memory ops), as the CPU backend does
 * (test_backend.c), so no graph is refused at compile on it for lack of one.
 */
static void test_cuda_supports_every_op(void **state)
{
    (void)state;
    REQUIRE_CUDA();
    for (int op = 0; op < TIDE_OP_COUNT; op++) {
        struct tide_node node = {.name = "n", .op = (enum tide_op)op};
        if (!tide_backend_supports_op(cuda_backend, NULL, &node))
            fail_msg("the cuda backend does not support %s", tide_op_info(node.op)->name);
    }
}

static void test_cuda_device(void **state)
{
    (void)state;
    REQUIRE_CUDA();
    char name[128];
    uint64_t total = 0;
    assert_string_equal(tide_backend_name(cuda_backend), "cuda");
    tide_backend_device_info(cuda_backend, name, sizeof(name), &total);
    printf("device: %s, %" PRIu64 " bytes offered\n", name, total);
    assert_non_null(strstr(name, "cuda:0"));
    assert_true(total > 0);

    /* "auto" prefers the GPU when there is one. */
    struct tide_backend *b = NULL;
    struct tide_error err = {0};
    assert_int_equal(tide_backend_create("auto", NULL, &b, &err), TIDE_OK);
    assert_string_equal(tide_backend_name(b), "cuda");
    tide_backend_free(b);

    /* A device that does not exist is "no GPU", so "auto" would fall back. */
    struct tide_backend_options far = {.device = 999};
    assert_int_equal(tide_backend_create("cuda", &far, &b, &err), TIDE_DEVICE);
    assert_null(b);
}

/* An arena the GPU cannot hold fails with TIDE_NOMEM and the numbers; the backend lives on. */
static void test_cuda_out_of_memory(void **state)
{
    (void)state;
    REQUIRE_CUDA();
    struct tide_error err = {0};
    void *p = NULL;
    assert_int_equal(tide_backend_arena_alloc(cuda_backend, UINT64_C(1) << 50, &p, &err),
                     TIDE_NOMEM);
    assert_null(p);
    assert_non_null(strstr(err.message, "1125899906842624"));
    assert_int_equal(tide_backend_arena_alloc(cuda_backend, 1 << 20, &p, &err), TIDE_OK);
    tide_backend_arena_free(cuda_backend, p);
}

/*
 * fill32 and copies across two streams ordered by an event, the event's
 * query, sync and elapsed time, and an event that was never recorded.
 */
static void test_cuda_streams_and_events(void **state)
{
    (void)state;
    REQUIRE_CUDA();
    struct tide_backend *b = cuda_backend;
    struct tide_error err = {0};
    const uint64_t bytes = 8 << 20;
    void *arena = NULL, *host = NULL;
    assert_int_equal(tide_backend_arena_alloc(b, 2 * bytes, &arena, &err), TIDE_OK);
    assert_int_equal(tide_backend_host_alloc(b, bytes, &host, &err), TIDE_OK);
    struct tide_stream *s1 = new_stream(b), *s2 = new_stream(b);
    struct tide_event *e = new_event(b), *start = new_event(b), *never = new_event(b);
    double ms = 0;
    bool done = false;

    assert_int_equal(tide_backend_event_elapsed(b, start, never, &ms), TIDE_STATE);
    assert_int_equal(tide_backend_event_query(b, never, &done), TIDE_OK);
    assert_true(done);

    assert_int_equal(tide_backend_event_record(b, start, s1), TIDE_OK);
    assert_int_equal(tide_backend_fill32(b, arena, 0xdeadbeefu, bytes, s1), TIDE_OK);
    assert_int_equal(tide_backend_event_record(b, e, s1), TIDE_OK);
    assert_int_equal(tide_backend_event_wait(b, s2, e), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2d(b, (char *)arena + bytes, arena, bytes, s2), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, host, (char *)arena + bytes, bytes, s2), TIDE_OK);
    assert_int_equal(tide_backend_stream_sync(b, s2, &err), TIDE_OK);
    assert_int_equal(tide_backend_event_sync(b, e), TIDE_OK);
    assert_int_equal(tide_backend_event_query(b, e, &done), TIDE_OK);
    assert_true(done);
    const uint32_t *words = host;
    for (uint64_t i = 0; i < bytes / 4; i++)
        if (words[i] != 0xdeadbeefu)
            fail_msg("word %" PRIu64 " is %08x after fill32 and two copies", i, words[i]);
    assert_int_equal(tide_backend_event_elapsed(b, start, e, &ms), TIDE_OK);
    assert_true(ms >= 0);
    assert_int_equal(tide_backend_stream_sync(b, s1, &err), TIDE_OK);

    tide_backend_event_free(b, never);
    tide_backend_event_free(b, start);
    tide_backend_event_free(b, e);
    tide_backend_stream_free(b, s2);
    tide_backend_stream_free(b, s1);
    tide_backend_host_free(b, host);
    tide_backend_arena_free(b, arena);
}

/*
 * A kernel that refuses its arguments fails its stream, not the call: launch
 * returns TIDE_OK, later work on the stream is skipped, stream_sync returns
 * the error naming the node, and then the stream works again. The refusal is
 * ApplyAdam without the executor's step counter: mismatched shapes, which
 * this test used before, can no longer reach a kernel (infer refuses them,
 * test_infer.c, test_matmul; kernels assert it).
 */
static void test_cuda_sticky_error(void **state)
{
    (void)state;
    REQUIRE_CUDA();
    struct tide_backend *b = cuda_backend;
    struct tide_error err = {0};
    void *arena = NULL, *host = NULL;
    assert_int_equal(tide_backend_arena_alloc(b, 1 << 20, &arena, &err), TIDE_OK);
    assert_int_equal(tide_backend_host_alloc(b, 4096, &host, &err), TIDE_OK);
    struct tide_stream *s = new_stream(b);

    struct op_case c;
    case_init(&c, TIDE_OP_APPLY_ADAM, "no_step", TOL_GEMM);
    c.node.n_inputs = 4;
    c.node.inputs = c.edges;
    c.node.n_outputs = 0;
    c.node.outputs = c.outputs;
    struct tide_tensor_view views[4];
    const int64_t shape[2] = {2, 3};
    for (int i = 0; i < 4; i++) {
        views[i] = (struct tide_tensor_view){.data = (char *)arena + i * 4096,
                                             .dtype = TIDE_DTYPE_FLOAT32,
                                             .shape = tide_shape_make(2, shape)};
        views[i].nbytes = (uint64_t)tide_shape_numel(&views[i].shape) * 4;
    }
    struct tide_kernel_args args = {.node = &c.node, .n_inputs = 4, .inputs = views};
    memset(host, 0x11, 4096);
    assert_int_equal(tide_backend_launch(b, s, &args), TIDE_OK);
    /* Skipped: the stream has failed. */
    assert_int_equal(tide_backend_copy_d2h(b, host, arena, 4096, s), TIDE_OK);
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"no_step\""));
    assert_int_equal(((unsigned char *)host)[0], 0x11);

    /* Cleared by the sync: the stream runs again. */
    assert_int_equal(tide_backend_fill32(b, arena, 0x01020304u, 4096, s), TIDE_OK);
    assert_int_equal(tide_backend_copy_d2h(b, host, arena, 4096, s), TIDE_OK);
    assert_int_equal(tide_backend_stream_sync(b, s, &err), TIDE_OK);
    assert_int_equal(((uint32_t *)host)[1023], 0x01020304u);

    tide_backend_stream_free(b, s);
    tide_backend_host_free(b, host);
    tide_backend_arena_free(b, arena);
}

/* ============================================================================
 * Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu)
 * ========================================================================== */

/*
 * Exp, Log, Sqrt, Gelu, Erf and GeluGrad: a small odd shape, and a long one that
 * the CPU cuts into pieces on its pool. Log and Sqrt see negative inputs
 * too (NaN on both backends, which compare() accepts), never an exact 0.
 */
static void test_math_unary(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_EXP, TIDE_OP_LOG, TIDE_OP_SQRT, TIDE_OP_GELU,
                                       TIDE_OP_ERF};
    static const float lo[] = {-6.0f, -0.5f, -0.5f, -6.0f, -4.0f};
    static const float hi[] = {6.0f, 9.0f, 9.0f, 6.0f, 4.0f};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        struct op_case c;
        case_init(&c, ops[i], tide_op_info(ops[i])->name, TOL_ELEM);
        input_range(&c, 2, DIMS(4, 33), lo[i], hi[i]);
        outf(&c, 2, DIMS(4, 33));
        check_case(&c);

        case_init(&c, ops[i], "math_unary_long", TOL_ELEM);
        c.seed += (uint32_t)i;
        input_range(&c, 2, DIMS(3, 20011), lo[i], hi[i]);
        outf(&c, 2, DIMS(3, 20011));
        check_case(&c);
    }
    struct op_case c;
    case_init(&c, TIDE_OP_GELU_GRAD, "gelu_grad", TOL_ELEM);
    input(&c, 2, DIMS(5, 37));                    /* dy */
    input_range(&c, 2, DIMS(5, 37), -6.0f, 6.0f); /* x */
    outf(&c, 2, DIMS(5, 37));
    check_case(&c);

    case_init(&c, TIDE_OP_GELU_GRAD, "gelu_grad_long", TOL_ELEM);
    input(&c, 1, DIMS(40009));
    input_range(&c, 1, DIMS(40009), -6.0f, 6.0f);
    outf(&c, 1, DIMS(40009));
    check_case(&c);
    REQUIRE_CUDA();
}

/*
 * Div, Max and Min: equal shapes, broadcasts of either input, a scalar, and
 * long rows; Max and Min also on inputs full of ties, where both backends
 * must take input 0.
 */
static void test_math_binary(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_DIV, TIDE_OP_MAX, TIDE_OP_MIN};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        struct op_case c;
        /* Div's divisors lie in [0.25, 2): no division by 0, so no inf to compare. */
        float b_lo = ops[i] == TIDE_OP_DIV ? 0.25f : -1.0f,
              b_hi = ops[i] == TIDE_OP_DIV ? 2.0f : 1.0f;
        case_init(&c, ops[i], "math_same", TOL_ELEM);
        input(&c, 2, DIMS(4, 6));
        input_range(&c, 2, DIMS(4, 6), b_lo, b_hi);
        outf(&c, 2, DIMS(4, 6));
        check_case(&c);

        case_init(&c, ops[i], "math_channels", TOL_ELEM);
        input(&c, 4, DIMS(2, 3, 4, 5));
        input_range(&c, 3, DIMS(3, 1, 1), b_lo, b_hi);
        outf(&c, 4, DIMS(2, 3, 4, 5));
        check_case(&c);

        case_init(&c, ops[i], "math_outer", TOL_ELEM);
        input(&c, 2, DIMS(5, 1));
        input_range(&c, 2, DIMS(1, 7), b_lo, b_hi);
        outf(&c, 2, DIMS(5, 7));
        check_case(&c);

        case_init(&c, ops[i], "math_scalar_a", TOL_ELEM);
        input(&c, 0, NULL);
        input_range(&c, 2, DIMS(4, 3), b_lo, b_hi);
        outf(&c, 2, DIMS(4, 3));
        check_case(&c);

        case_init(&c, ops[i], "math_long_rows", TOL_ELEM);
        input(&c, 3, DIMS(70, 1, 513));
        input_range(&c, 2, DIMS(3, 1), b_lo, b_hi);
        outf(&c, 3, DIMS(70, 3, 513));
        check_case(&c);

        case_init(&c, ops[i], "math_long_same", TOL_ELEM);
        input(&c, 1, DIMS(50021));
        input_range(&c, 1, DIMS(50021), b_lo, b_hi);
        outf(&c, 1, DIMS(50021));
        check_case(&c);
    }
    for (int k = 0; k < 2; k++) {
        struct op_case c;
        case_init(&c, k ? TIDE_OP_MIN : TIDE_OP_MAX, "math_ties", TOL_EXACT);
        input_ties(&c, 2, DIMS(6, 35));
        input_ties(&c, 1, DIMS(35));
        outf(&c, 2, DIMS(6, 35));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/*
 * Pow's inputs: a base of values in [lo, hi) with every fifth one 0, and an
 * exponent of integers in [-3, 3] (integral: one side's negative bases stay
 * real) or of values in [-2, 2).
 */
static void pow_inputs(struct op_case *c, int32_t rank_a, const int64_t *dims_a, int32_t rank_b,
                       const int64_t *dims_b, float lo, bool integral)
{
    float *a = input_range(c, rank_a, dims_a, lo, 2.0f);
    int64_t n = tide_shape_numel(&c->in[c->n_in - 1].shape);
    for (int64_t i = 0; i < n; i += 5)
        a[i] = 0.0f;
    float *b = input_range(c, rank_b, dims_b, integral ? -3.49f : -2.0f, integral ? 3.49f : 2.0f);
    n = tide_shape_numel(&c->in[c->n_in - 1].shape);
    for (int64_t i = 0; integral && i < n; i++)
        b[i] = roundf(b[i]);
}

/*
 * Pow and PowGrad: positive bases with any exponent, negative bases with
 * integral ones, zeros (0^0, 0^-k = inf, PowGrad's masks), broadcasts of
 * either input and both, a scalar exponent (GeM pooling's p), long rows.
 */
static void test_pow(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_POW, TIDE_OP_POW_GRAD};
    for (int k = 0; k < 2; k++) {
        bool grad = ops[k] == TIDE_OP_POW_GRAD;
        struct op_case c;
        case_init(&c, ops[k], "pow_positive", TOL_ELEM);
        pow_inputs(&c, 2, DIMS(4, 33), 2, DIMS(4, 33), 0.25f, false);
        if (grad)
            input(&c, 2, DIMS(4, 33));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 2, DIMS(4, 33));
        check_case(&c);

        case_init(&c, ops[k], "pow_integral", TOL_ELEM);
        pow_inputs(&c, 2, DIMS(6, 35), 1, DIMS(35), -2.0f, true);
        if (grad)
            input(&c, 2, DIMS(6, 35));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 2, DIMS(6, 35));
        check_case(&c);

        case_init(&c, ops[k], "pow_channels", TOL_ELEM);
        pow_inputs(&c, 4, DIMS(2, 3, 4, 5), 3, DIMS(3, 1, 1), 0.0f, false);
        if (grad)
            input(&c, 4, DIMS(2, 3, 4, 5));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 4, DIMS(2, 3, 4, 5));
        check_case(&c);

        case_init(&c, ops[k], "pow_outer", TOL_ELEM);
        pow_inputs(&c, 2, DIMS(7, 1), 2, DIMS(1, 5), -2.0f, true);
        if (grad)
            input(&c, 2, DIMS(7, 5));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 2, DIMS(7, 5));
        check_case(&c);

        case_init(&c, ops[k], "pow_scalar_b", TOL_ELEM);
        pow_inputs(&c, 4, DIMS(2, 3, 2, 2), 0, NULL, 0.0f, false);
        if (grad)
            input(&c, 4, DIMS(2, 3, 2, 2));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 4, DIMS(2, 3, 2, 2));
        check_case(&c);

        case_init(&c, ops[k], "pow_long_rows", TOL_ELEM);
        pow_inputs(&c, 3, DIMS(70, 1, 513), 2, DIMS(3, 1), -2.0f, true);
        if (grad)
            input(&c, 3, DIMS(70, 3, 513));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 3, DIMS(70, 3, 513));
        check_case(&c);

        case_init(&c, ops[k], "pow_long_same", TOL_ELEM);
        pow_inputs(&c, 1, DIMS(50021), 1, DIMS(50021), 0.25f, false);
        if (grad)
            input(&c, 1, DIMS(50021));
        for (int o = 0; o < (grad ? 2 : 1); o++)
            outf(&c, 1, DIMS(50021));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* MaxGrad and MinGrad: ties (input 0 takes dy), broadcasts of either input, long rows. */
static void test_select_grads(void **state)
{
    (void)state;
    static const enum tide_op ops[] = {TIDE_OP_MAX_GRAD, TIDE_OP_MIN_GRAD};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        struct op_case c;
        case_init(&c, ops[i], "select_ties", TOL_EXACT);
        input_ties(&c, 2, DIMS(7, 9));
        input_ties(&c, 2, DIMS(7, 9));
        input(&c, 2, DIMS(7, 9));
        outf(&c, 2, DIMS(7, 9));
        outf(&c, 2, DIMS(7, 9));
        check_case(&c);

        case_init(&c, ops[i], "select_broadcast", TOL_EXACT);
        input(&c, 1, DIMS(5));
        input_ties(&c, 3, DIMS(2, 3, 1));
        input(&c, 3, DIMS(2, 3, 5));
        outf(&c, 3, DIMS(2, 3, 5));
        outf(&c, 3, DIMS(2, 3, 5));
        check_case(&c);

        case_init(&c, ops[i], "select_long_rows", TOL_EXACT);
        input(&c, 3, DIMS(40, 1, 1031));
        input(&c, 2, DIMS(2, 1031));
        input(&c, 3, DIMS(40, 2, 1031));
        outf(&c, 3, DIMS(40, 2, 1031));
        outf(&c, 3, DIMS(40, 2, 1031));
        check_case(&c);

        case_init(&c, ops[i], "select_scalar_b", TOL_EXACT);
        input(&c, 2, DIMS(3, 4));
        input(&c, 0, NULL);
        input(&c, 2, DIMS(3, 4));
        outf(&c, 2, DIMS(3, 4));
        outf(&c, 2, DIMS(3, 4));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ---- Masks: Cast, Compare, Select ---- */

/* Adds an int32 input of values in [lo, hi]; returns its data. */
static int32_t *input_ints(struct op_case *c, int32_t rank, const int64_t *dims, int32_t lo,
                           int32_t hi)
{
    assert_true(c->n_in < MAX_IO);
    struct tensor *t = &c->in[c->n_in++];
    *t = make_tensor(TIDE_DTYPE_INT32, rank, dims);
    int32_t *x = malloc(t->nbytes ? t->nbytes : 4);
    assert_non_null(x);
    int64_t n = tide_shape_numel(&t->shape);
    double span = (double)hi - (double)lo + 1.0;
    for (int64_t i = 0; i < n; i++) {
        double v = (double)lo + (frand(&c->seed) + 1.0f) / 2.0f * span;
        x[i] = v >= (double)hi ? hi : (int32_t)v;
    }
    t->host = x;
    return x;
}

/*
 * Cast, both ways and to the same dtype: floats past the int32 range, its
 * ends, infinities, NaN and fractions of both signs; ints past 2^24 that
 * round. Every case bit for bit.
 */
static void test_cast(void **state)
{
    (void)state;
    static const float special[] = {NAN,   INFINITY,       -INFINITY, 3e9f, -3e9f, 2147483648.0f,
                                    -2147483648.0f, 2147483520.0f, -0.0f,     0.5f, -0.5f, -1.75f};
    const int64_t n_special = (int64_t)(sizeof(special) / sizeof(special[0]));
    for (int to_int = 0; to_int < 2; to_int++) {
        struct op_case c;
        enum tide_dtype to = to_int ? TIDE_DTYPE_INT32 : TIDE_DTYPE_FLOAT32;
        case_init(&c, TIDE_OP_CAST, to_int ? "cast_float_int" : "cast_float_float", 0, 0);
        c.attrs[TIDE_ATTR_CAST_to].i = to;
        float *x = input_range(&c, 2, DIMS(3, 20011), -5e9f, 5e9f);
        for (int64_t i = 0; i < 3 * 20011; i += 7)
            x[i] = special[(i / 7) % n_special];
        for (int64_t i = 3; i < 3 * 20011; i += 11)
            x[i] = x[i] * 1e-9f; /* fractions */
        output(&c, to, 2, DIMS(3, 20011));
        check_case(&c);

        case_init(&c, TIDE_OP_CAST, to_int ? "cast_int_int" : "cast_int_float", 0, 0);
        c.attrs[TIDE_ATTR_CAST_to].i = to;
        input_ints(&c, 1, DIMS(40009), INT32_MIN, INT32_MAX);
        output(&c, to, 1, DIMS(40009));
        check_case(&c);

        case_init(&c, TIDE_OP_CAST, "cast_scalar", 0, 0);
        c.attrs[TIDE_ATTR_CAST_to].i = to;
        input_range(&c, 0, NULL, -3.0f, 3.0f);
        output(&c, to, 0, NULL);
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/*
 * Compare, every mode, on float32 inputs full of ties (and a NaN, -0 and
 * infinities) and on int32 ones of few values, equal shapes and
 * broadcasts of either input; bit for bit.
 */
static void test_compare(void **state)
{
    (void)state;
    for (int mode = 0; mode < TIDE_COMPARISON_COUNT; mode++) {
        struct op_case c;
        case_init(&c, TIDE_OP_COMPARE, "compare_same", 0, 0);
        c.attrs[TIDE_ATTR_COMPARE_mode].i = mode;
        c.seed += (uint32_t)mode;
        input_ties(&c, 2, DIMS(6, 35));
        float *b = input(&c, 2, DIMS(6, 35));
        for (int i = 0; i < 6 * 35; i++)
            b[i] = i % 5 == 0 ? NAN : i % 7 == 0 ? -0.0f : i % 11 == 0 ? INFINITY : roundf(b[i]);
        outf(&c, 2, DIMS(6, 35));
        check_case(&c);

        case_init(&c, TIDE_OP_COMPARE, "compare_channels", 0, 0);
        c.attrs[TIDE_ATTR_COMPARE_mode].i = mode;
        input_ties(&c, 4, DIMS(2, 3, 4, 5));
        input_ties(&c, 3, DIMS(3, 1, 1));
        outf(&c, 4, DIMS(2, 3, 4, 5));
        check_case(&c);

        case_init(&c, TIDE_OP_COMPARE, "compare_int_outer", 0, 0);
        c.attrs[TIDE_ATTR_COMPARE_mode].i = mode;
        input_ints(&c, 2, DIMS(9, 1), -3, 3);
        input_ints(&c, 2, DIMS(1, 13), -3, 3);
        outf(&c, 2, DIMS(9, 13));
        check_case(&c);

        case_init(&c, TIDE_OP_COMPARE, "compare_int_long", 0, 0);
        c.attrs[TIDE_ATTR_COMPARE_mode].i = mode;
        input_ints(&c, 0, NULL, 0, 0);
        input_ints(&c, 3, DIMS(70, 3, 513), -1, 1);
        outf(&c, 3, DIMS(70, 3, 513));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/*
 * Select: conds of 0, +-1, NaN and -0; x and y with -inf and NaN; equal
 * shapes, each input broadcast, a scalar, three-way broadcasts and long
 * rows; bit for bit.
 */
static void test_select(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int32_t rank[4];
        int64_t dims[4][4];
    } shapes[] = {
        {"select_same", {2, 2, 2, 2}, {{7, 9}, {7, 9}, {7, 9}, {7, 9}}},
        {"select_mask", {4, 4, 0, 4}, {{2, 1, 1, 6}, {2, 3, 5, 6}, {0}, {2, 3, 5, 6}}},
        {"select_three_way", {2, 2, 3, 3}, {{4, 1}, {1, 5}, {3, 1, 1}, {3, 4, 5}}},
        {"select_scalar_cond", {0, 1, 1, 1}, {{0}, {6}, {6}, {6}}},
        {"select_long_rows", {3, 2, 3, 3}, {{40, 1, 1031}, {2, 1031}, {40, 2, 1}, {40, 2, 1031}}},
        {"select_long_same", {1, 1, 1, 1}, {{50021}, {50021}, {50021}, {50021}}},
    };
    for (size_t k = 0; k < sizeof(shapes) / sizeof(shapes[0]); k++) {
        struct op_case c;
        case_init(&c, TIDE_OP_SELECT, shapes[k].name, 0, 0);
        c.seed += (uint32_t)k;
        for (int i = 0; i < 3; i++) {
            float *v = input(&c, shapes[k].rank[i], shapes[k].dims[i]);
            int64_t n = tide_shape_numel(&c.in[i].shape);
            for (int64_t j = 0; j < n; j++) {
                if (i == 0)
                    v[j] = j % 13 == 5 ? NAN : j % 13 == 6 ? -0.0f : roundf(v[j]);
                else if (j % 17 == 3)
                    v[j] = i == 1 ? -INFINITY : NAN;
            }
        }
        outf(&c, shapes[k].rank[3], shapes[k].dims[3]);
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * Trigonometric and hyperbolic functions (Trig, TrigGrad)
 * ========================================================================== */

/*
 * Trig and TrigGrad, every fn, over a range that reaches past the domain
 * where there is one (NaN on both backends, which compare() accepts): a
 * small odd shape and a long one. Both backends compute each element in
 * double by kernels/trig.h and round once, so they differ by an ulp at
 * most: TOL_EXACT.
 */
static void test_trig(void **state)
{
    (void)state;
    static const float lo[TIDE_TRIG_FUNCTION_COUNT] = {-10.0f, -10.0f, -1.5f, -1.2f, -1.2f, -20.0f,
                                                       -10.0f, -10.0f, -50.0f, 0.5f,  -1.1f};
    static const float hi[TIDE_TRIG_FUNCTION_COUNT] = {10.0f, 10.0f, 1.5f,  1.2f, 1.2f, 20.0f,
                                                       10.0f, 10.0f, 50.0f, 30.0f, 1.1f};
    for (int fn = 0; fn < TIDE_TRIG_FUNCTION_COUNT; fn++) {
        struct op_case c;
        case_init(&c, TIDE_OP_TRIG, "trig", TOL_EXACT);
        c.attrs[TIDE_ATTR_TRIG_fn].i = fn;
        c.seed += (uint32_t)fn;
        input_range(&c, 2, DIMS(4, 33), lo[fn], hi[fn]);
        outf(&c, 2, DIMS(4, 33));
        check_case(&c);

        case_init(&c, TIDE_OP_TRIG, "trig_long", TOL_EXACT);
        c.attrs[TIDE_ATTR_TRIG_fn].i = fn;
        c.seed += 100u + (uint32_t)fn;
        input_range(&c, 1, DIMS(40009), lo[fn], hi[fn]);
        outf(&c, 1, DIMS(40009));
        check_case(&c);

        case_init(&c, TIDE_OP_TRIG_GRAD, "trig_grad", TOL_EXACT);
        c.attrs[TIDE_ATTR_TRIG_GRAD_fn].i = fn;
        c.seed += (uint32_t)fn;
        input(&c, 2, DIMS(5, 37));                         /* dy */
        input_range(&c, 2, DIMS(5, 37), lo[fn], hi[fn]); /* x */
        outf(&c, 2, DIMS(5, 37));
        check_case(&c);

        case_init(&c, TIDE_OP_TRIG_GRAD, "trig_grad_long", TOL_EXACT);
        c.attrs[TIDE_ATTR_TRIG_GRAD_fn].i = fn;
        c.seed += 100u + (uint32_t)fn;
        input(&c, 1, DIMS(30011));
        input_range(&c, 1, DIMS(30011), lo[fn], hi[fn]);
        outf(&c, 1, DIMS(30011));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * Rounding to integral values (Round)
 * ========================================================================== */

/*
 * Round, every mode: a small odd shape whose values are random in [-20,
 * 20) but for the first ones, which are the hard cases (halves of both
 * signs, the float under 0.5, 2^22 + 0.5, 2^23 - 0.5, 1e10, -0, +-inf,
 * NaN), and a long shape of random values. Both backends give floorf,
 * ceilf, rintf and truncf, exact: TOL_EXACT.
 */
static void test_round(void **state)
{
    (void)state;
    static const float hard[] = {0.5f,        1.5f,       2.5f,       -0.5f, -2.5f,
                                 0.49999997f, 4194304.5f, 8388607.5f, 1e10f, -0.0f,
                                 INFINITY,    -INFINITY,  NAN,        -3.5f, 1e-45f};
    for (int mode = 0; mode < TIDE_ROUNDING_COUNT; mode++) {
        struct op_case c;
        case_init(&c, TIDE_OP_ROUND, "round", TOL_EXACT);
        c.attrs[TIDE_ATTR_ROUND_mode].i = mode;
        c.seed += (uint32_t)mode;
        float *x = input_range(&c, 2, DIMS(4, 33), -20.0f, 20.0f);
        memcpy(x, hard, sizeof(hard));
        outf(&c, 2, DIMS(4, 33));
        check_case(&c);

        case_init(&c, TIDE_OP_ROUND, "round_long", TOL_EXACT);
        c.attrs[TIDE_ATTR_ROUND_mode].i = mode;
        c.seed += 100u + (uint32_t)mode;
        input_range(&c, 1, DIMS(40009), -1000.0f, 1000.0f);
        outf(&c, 1, DIMS(40009));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose)
 * ========================================================================== */

/* A BatchMatMul case: a and b of the given shapes (already transposed where ta / tb say). */
static void batch_matmul_case(const char *name, bool ta, bool tb, int32_t ra, const int64_t *a,
                              int32_t rb, const int64_t *b, int32_t ry, const int64_t *y)
{
    struct op_case c;
    case_init(&c, TIDE_OP_BATCH_MATMUL, name, TOL_GEMM);
    c.attrs[TIDE_ATTR_BATCH_MATMUL_transpose_a].b = ta;
    c.attrs[TIDE_ATTR_BATCH_MATMUL_transpose_b].b = tb;
    input(&c, ra, a);
    input(&c, rb, b);
    outf(&c, ry, y);
    check_case(&c);
}

/*
 * Every transpose form over a batch of 3 (one strided-batched GEMM on CUDA),
 * a rank-2 weight (a stride of 0), broadcasts that need one GEMM per entry,
 * a rank-2 a, entries large enough for the CPU to split them into blocks,
 * and an empty inner dimension (zeros).
 */
static void test_batch_matmul(void **state)
{
    (void)state;
    static const char *names[4] = {"batch_matmul_nn", "batch_matmul_nt", "batch_matmul_tn",
                                   "batch_matmul_tt"};
    for (int combo = 0; combo < 4; combo++) {
        bool ta = combo & 2, tb = combo & 1;
        int64_t p = 3, m = 7, k = 5, n = 9;
        batch_matmul_case(names[combo], ta, tb, 3, ta ? DIMS(p, k, m) : DIMS(p, m, k), 3,
                          tb ? DIMS(p, n, k) : DIMS(p, k, n), 3, DIMS(p, m, n));
    }
    batch_matmul_case("batch_matmul_weight", false, false, 3, DIMS(2, 37, 33), 2, DIMS(33, 17), 3,
                      DIMS(2, 37, 17));
    batch_matmul_case("batch_matmul_weight_b^T", false, true, 3, DIMS(4, 11, 13), 2, DIMS(6, 13), 3,
                      DIMS(4, 11, 6));
    batch_matmul_case("batch_matmul_left_rank2", true, false, 2, DIMS(5, 7), 3, DIMS(3, 5, 9), 3,
                      DIMS(3, 7, 9));
    batch_matmul_case("batch_matmul_broadcast", false, false, 4, DIMS(2, 1, 5, 7), 3, DIMS(3, 7, 9),
                      4, DIMS(2, 3, 5, 9));
    batch_matmul_case("batch_matmul_broadcast_tt", true, true, 4, DIMS(1, 3, 7, 5), 4,
                      DIMS(2, 1, 9, 7), 4, DIMS(2, 3, 5, 9));
    batch_matmul_case("batch_matmul_rank2", false, false, 2, DIMS(6, 4), 2, DIMS(4, 10), 2,
                      DIMS(6, 10));
    batch_matmul_case("batch_matmul_split_rows", false, false, 3, DIMS(2, 130, 300), 2,
                      DIMS(300, 80), 3, DIMS(2, 130, 80));
    batch_matmul_case("batch_matmul_split_columns", false, true, 3, DIMS(1, 40, 270), 3,
                      DIMS(1, 150, 270), 3, DIMS(1, 40, 150));
    batch_matmul_case("batch_matmul_empty_k", false, false, 3, DIMS(2, 3, 0), 3, DIMS(2, 0, 4), 3,
                      DIMS(2, 3, 4));
    REQUIRE_CUDA();
}

/* ============================================================================
 * TF32 math
 * ========================================================================== */

/*
 * Tolerance of math "tf32" against the CPU's float32: TF32 keeps 10 of the
 * mantissa's 23 bits of each factor (a relative error up to 2^-10 when the
 * hardware truncates), so a sum of a few hundred products of numbers in
 * [-1, 1] (outputs of magnitude 5 to 20) moves by up to a few 1e-2.
 */
static const double tf32_rtol = 1e-2, tf32_atol = 5e-2;

static void set_math(struct op_case *c, const char *math)
{
    int k = tide_op_math_attr(c->node.op);
    assert_true(k >= 0);
    c->attrs[k].present = true;
    c->attrs[k].s = math;
}

/* Whether runs a and b of case c differ anywhere in what c is judged by. */
static bool runs_differ(const struct op_case *c, const struct run *a, const struct run *b)
{
    for (uint32_t i = 0; i < judged(c, a, 0, NULL, NULL); i++) {
        const struct tensor *t;
        uint64_t off;
        judged(c, a, i, &t, &off);
        if (memcmp(a->image + off, b->image + off, t->nbytes) != 0)
            return true;
    }
    return false;
}

/*
 * Case c, built in fp32, run in both maths: the CPU gives the same bits in
 * tf32 as in fp32 (it has no TF32); on a GPU the tf32 run is within tf32_rtol and tf32_atol
 * of the CPU and the same bits twice (check_case), and where expect_differs,
 * not the bits of the fp32 run, so the attribute reached the library. Frees c.
 */
static void tf32_case(struct op_case *c, bool expect_differs)
{
    struct tide_error err = {0};
    struct run cpu32, cpu_tf, gpu32 = {0}, gpu_tf = {0};
    if (run_case(cpu_backend, c, &cpu32, &err) != TIDE_OK)
        fail_msg("%s on the CPU: %s", c->node.name, err.message);
    if (cuda_backend && run_case(cuda_backend, c, &gpu32, &err) != TIDE_OK)
        fail_msg("%s on CUDA in fp32: %s", c->node.name, err.message);
    set_math(c, "tf32");
    if (run_case(cpu_backend, c, &cpu_tf, &err) != TIDE_OK)
        fail_msg("%s on the CPU in tf32: %s", c->node.name, err.message);
    expect_same_bits_named(c, &cpu32, &cpu_tf, "CPU (fp32 and tf32)");
    if (cuda_backend) {
        if (run_case(cuda_backend, c, &gpu_tf, &err) != TIDE_OK)
            fail_msg("%s on CUDA in tf32: %s", c->node.name, err.message);
        bool differ = runs_differ(c, &gpu32, &gpu_tf);
        printf("%s: CUDA's tf32 run %s its fp32 run\n", c->node.name,
               differ ? "differs from" : "has the bits of");
        if (expect_differs && !differ)
            fail_msg("%s: CUDA gave the same bits in tf32 as in fp32: the math attribute did "
                     "not reach the library",
                     c->node.name);
    }
    free(cpu32.image);
    free(cpu_tf.image);
    free(gpu32.image);
    free(gpu_tf.image);
    c->rtol = tf32_rtol;
    c->atol = tf32_atol;
    check_case(c);
}

/*
 * math "tf32" on the convolutions (a shape large enough for cuDNN's tensor
 * core kernels), MatMul and BatchMatMul (the products cuBLAS runs on tensor
 * cores, so a tf32 run must differ from the fp32 one).
 */
static void test_tf32(void **state)
{
    (void)state;
    static const struct conv_case conv = {"tf32_3x3", 4, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    for (int which = 0; which < 3; which++) {
        char name[64];
        struct op_case c;
        conv_case_init(&c, &conv, which, name);
        tf32_case(&c, false);
    }
    struct op_case c;
    case_init(&c, TIDE_OP_MATMUL, "matmul_tf32", TOL_GEMM);
    input(&c, 2, DIMS(64, 300));
    input(&c, 2, DIMS(300, 80));
    outf(&c, 2, DIMS(64, 80));
    tf32_case(&c, true);
    case_init(&c, TIDE_OP_BATCH_MATMUL, "batch_matmul_tf32", TOL_GEMM);
    c.attrs[TIDE_ATTR_BATCH_MATMUL_transpose_b].b = true;
    input(&c, 3, DIMS(4, 32, 256));
    input(&c, 3, DIMS(4, 48, 256));
    outf(&c, 3, DIMS(4, 32, 48));
    tf32_case(&c, true);
    REQUIRE_CUDA();
}

/* A Transpose case of a float32 x (or int32 ids in [0, 1000) when ints is set). */
static void transpose_case(const char *name, bool ints, int32_t rank, const int64_t *x,
                           const int64_t *perm)
{
    struct op_case c;
    case_init(&c, TIDE_OP_TRANSPOSE, name, TOL_EXACT);
    set_ints(&c, TIDE_ATTR_TRANSPOSE_perm, rank, perm);
    int64_t y[TIDE_MAX_RANK];
    for (int32_t i = 0; i < rank; i++)
        y[i] = x[perm[i]];
    if (ints) {
        struct tide_shape shape = tide_shape_make(rank, x);
        input_labels(&c, tide_shape_numel(&shape), 1000);
        c.in[c.n_in - 1].shape = shape; /* the same bytes, as a tensor of x's shape */
        output(&c, TIDE_DTYPE_INT32, rank, y);
    } else {
        input(&c, rank, x);
        outf(&c, rank, y);
    }
    check_case(&c);
}

/*
 * A rotation of the axes (a strided gather on the CPU), the heads' swap that
 * keeps the last axis (rows copied whole), rows longer than a block, int32,
 * an order that changes nothing once the 1 is dropped (one copy), a scalar.
 */
static void test_transpose(void **state)
{
    (void)state;
    transpose_case("transpose_rotate", false, 3, DIMS(3, 5, 7), DIMS(2, 0, 1));
    transpose_case("transpose_heads", false, 4, DIMS(2, 5, 3, 33), DIMS(0, 2, 1, 3));
    transpose_case("transpose_long_rows", false, 3, DIMS(3, 1031, 7), DIMS(0, 2, 1));
    transpose_case("transpose_reverse", false, 4, DIMS(3, 4, 5, 6), DIMS(3, 2, 1, 0));
    transpose_case("transpose_int32", true, 2, DIMS(17, 5), DIMS(1, 0));
    transpose_case("transpose_unit_axis", false, 3, DIMS(4, 1, 6), DIMS(1, 0, 2));
    transpose_case("transpose_scalar", false, 0, NULL, NULL);
    transpose_case("transpose_empty", false, 3, DIMS(2, 0, 3), DIMS(2, 1, 0));
    REQUIRE_CUDA();
}

/* ============================================================================
 * Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing)
 * ========================================================================== */

/* An int32 input of the given shape with values in [0, limit). */
static int32_t *input_ids(struct op_case *c, int32_t rank, const int64_t *dims, int64_t limit)
{
    struct tide_shape shape = tide_shape_make(rank, dims);
    int32_t *ids = input_labels(c, tide_shape_numel(&shape), limit);
    c->in[c->n_in - 1].shape = shape;
    return ids;
}

static void test_gather(void **state)
{
    (void)state;
    struct op_case c;
    /* Odd widths; ids of rank 2 with repeats. */
    case_init(&c, TIDE_OP_GATHER, "gather", TOL_EXACT);
    input(&c, 2, DIMS(37, 129));
    input_ids(&c, 2, DIMS(3, 11), 37);
    outf(&c, 3, DIMS(3, 11, 129));
    check_case(&c);

    /* A rank-1 table: each id picks one number; a scalar id into a rank-3 table. */
    case_init(&c, TIDE_OP_GATHER, "gather_scalars", TOL_EXACT);
    input(&c, 1, DIMS(1000));
    input_ids(&c, 1, DIMS(777), 1000);
    outf(&c, 1, DIMS(777));
    check_case(&c);

    case_init(&c, TIDE_OP_GATHER, "gather_scalar_id", TOL_EXACT);
    input(&c, 3, DIMS(5, 3, 7));
    input_ids(&c, 0, NULL, 5);
    outf(&c, 2, DIMS(3, 7));
    check_case(&c);

    /*
     * Many ids onto few rows (long runs per row), a wide row (the grid-stride
     * path), and more rows than the CUDA grouping keeps in shared memory
     * (4096: its cursors in global memory, each of its 1024 threads scanning
     * several rows).
     */
    static const struct {
        const char *name;
        int64_t n_ids, rows, width;
    } grads[] = {
        {"gather_grad", 37, 5, 129},
        {"gather_grad_narrow", 3000, 9, 1},
        {"gather_grad_many_rows", 5001, 6000, 3},
    };
    for (size_t i = 0; i < sizeof grads / sizeof grads[0]; i++) {
        int64_t n_ids = grads[i].n_ids, rows = grads[i].rows, width = grads[i].width;
        case_init(&c, TIDE_OP_GATHER_GRAD, grads[i].name, TOL_ELEM);
        c.attrs[TIDE_ATTR_GATHER_GRAD_num_rows].present = true;
        c.attrs[TIDE_ATTR_GATHER_GRAD_num_rows].i = rows + 2; /* two rows no id picks */
        input(&c, 2, DIMS(n_ids, width));
        input_ids(&c, 1, DIMS(n_ids), rows);
        outf(&c, 2, DIMS(rows + 2, width));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/*
 * GatherElements and its gradient: indices in [-d, d) (both signs), some
 * equal to ignore_index; axis 0 with indices shorter than data on axis 1, a
 * middle axis of rank 3, and a wide NLL-like [N, 1] pick from [N, C].
 */
static void test_gather_elements(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int32_t rank;
        int64_t data[3], idx[3];
        int64_t axis;
    } shapes[3] = {
        {"gather_elements_axis0", 2, {37, 129}, {50, 100}, 0},
        {"gather_elements_axis1", 3, {4, 17, 33}, {3, 40, 33}, 1},
        {"gather_elements_nll", 2, {3000, 10}, {3000, 1}, 1},
    };
    for (int i = 0; i < 3; i++) {
        int64_t d = shapes[i].data[shapes[i].axis];
        for (int grad = 0; grad < 2; grad++) {
            struct op_case c;
            char name[64];
            snprintf(name, sizeof(name), "%s%s", shapes[i].name, grad ? "_grad" : "");
            if (grad) {
                /* Both backends add in ascending order along the axis in float: the same bits. */
                case_init(&c, TIDE_OP_GATHER_ELEMENTS_GRAD, name, 0, 0);
                c.attrs[TIDE_ATTR_GATHER_ELEMENTS_GRAD_axis].i = shapes[i].axis;
                c.attrs[TIDE_ATTR_GATHER_ELEMENTS_GRAD_ignore_index].i = 1;
                set_shape(&c, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, shapes[i].rank,
                          shapes[i].data);
                input(&c, shapes[i].rank, shapes[i].idx);
            } else {
                case_init(&c, TIDE_OP_GATHER_ELEMENTS, name, 0, 0);
                c.attrs[TIDE_ATTR_GATHER_ELEMENTS_axis].i = shapes[i].axis;
                c.attrs[TIDE_ATTR_GATHER_ELEMENTS_ignore_index].i = 1;
                input(&c, shapes[i].rank, shapes[i].data);
            }
            int32_t *idx = input_ids(&c, shapes[i].rank, shapes[i].idx, 2 * d);
            int64_t n = tide_shape_numel(&c.in[c.n_in - 1].shape);
            for (int64_t p = 0; p < n; p++)
                idx[p] -= (int32_t)d; /* [-d, d); the 1s are ignored */
            outf(&c, shapes[i].rank, grad ? shapes[i].data : shapes[i].idx);
            check_case(&c);
        }
    }
    REQUIRE_CUDA();
}

/*
 * An id out of range: the CPU refuses it before the kernel writes; CUDA
 * finds it on the device and reports it at stream_sync. Both name the node,
 * the position and the index; so for TopKGrad and MoeRoute.
 */
static void test_index_out_of_range(void **state)
{
    (void)state;
    for (int pass = 0; pass < 2; pass++) {
        struct tide_backend *b = pass == 0 ? cpu_backend : cuda_backend;
        if (!b)
            REQUIRE_CUDA();
        for (int op = 0; op < 6; op++) {
            struct op_case c;
            const char *want;
            if (op == 4) {
                /* Signed indices: [-4, 4); the ignored -9 is no fault. */
                case_init(&c, TIDE_OP_GATHER_ELEMENTS, "gather_elements_bad", TOL_EXACT);
                c.attrs[TIDE_ATTR_GATHER_ELEMENTS_axis].i = 1;
                c.attrs[TIDE_ATTR_GATHER_ELEMENTS_ignore_index].i = -9;
                input(&c, 2, DIMS(3, 4));
                int32_t *idx = input_ids(&c, 2, DIMS(3, 2), 4);
                idx[1] = -9;
                idx[3] = -5;
                outf(&c, 2, DIMS(3, 2));
                want = "index -5 at position 3 is out of range [-4, 4)";
            } else if (op == 5) {
                case_init(&c, TIDE_OP_GATHER_ELEMENTS_GRAD, "gather_elements_grad_bad", TOL_EXACT);
                set_shape(&c, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, 2, DIMS(3, 4));
                input(&c, 2, DIMS(5, 4));
                input_ids(&c, 2, DIMS(5, 4), 3)[7] = 3;
                outf(&c, 2, DIMS(3, 4));
                want = "index 3 at position 7 is out of range [-3, 3)";
            } else if (op == 0) {
                case_init(&c, TIDE_OP_GATHER, "gather_bad", TOL_EXACT);
                input(&c, 2, DIMS(5, 3));
                input_ids(&c, 1, DIMS(6), 5)[2] = 9;
                outf(&c, 2, DIMS(6, 3));
                want = "index 9 at position 2 is out of range [0, 5)";
            } else if (op == 1) {
                case_init(&c, TIDE_OP_GATHER_GRAD, "gather_grad_bad", TOL_EXACT);
                c.attrs[TIDE_ATTR_GATHER_GRAD_num_rows].i = 5;
                input(&c, 2, DIMS(6, 3));
                input_ids(&c, 1, DIMS(6), 5)[4] = -3;
                outf(&c, 2, DIMS(5, 3));
                want = "index -3 at position 4 is out of range [0, 5)";
            } else if (op == 2) {
                case_init(&c, TIDE_OP_TOP_K_GRAD, "top_k_grad_bad", TOL_EXACT);
                set_shape(&c, TIDE_ATTR_TOP_K_GRAD_shape, 2, DIMS(2, 4));
                input(&c, 2, DIMS(2, 2));
                input_ids(&c, 2, DIMS(2, 2), 4)[3] = 4;
                outf(&c, 2, DIMS(2, 4));
                want = "index 4 at position 3 is out of range [0, 4)";
            } else {
                case_init(&c, TIDE_OP_MOE_ROUTE, "moe_route_bad", TOL_EXACT);
                c.attrs[TIDE_ATTR_MOE_ROUTE_experts].i = 3;
                c.attrs[TIDE_ATTR_MOE_ROUTE_capacity].i = 2;
                input_ids(&c, 2, DIMS(4, 2), 3)[5] = 3;
                output(&c, TIDE_DTYPE_INT32, 1, DIMS(6));
                output(&c, TIDE_DTYPE_INT32, 2, DIMS(4, 2));
                want = "index 3 at position 5 is out of range [0, 3)";
            }
            struct tide_error err = {0};
            struct run r;
            enum tide_status st = run_case(b, &c, &r, &err);
            char node[64];
            snprintf(node, sizeof(node), "\"%s\"", c.node.name);
            assert_int_equal(st, TIDE_INVALID);
            if (!strstr(err.message, node) || !strstr(err.message, want))
                fail_msg("%s: unexpected message (want '%s'): %s", tide_backend_name(b), want,
                         err.message);
            case_free(&c);
        }
    }
}

static void test_top_k(void **state)
{
    (void)state;
    struct op_case c;
    /* Long rows; then ties everywhere ({-1, 0, 1}) with k = n. */
    case_init(&c, TIDE_OP_TOP_K, "top_k_long", TOL_EXACT);
    c.attrs[TIDE_ATTR_TOP_K_k].i = 5;
    input(&c, 2, DIMS(64, 1500));
    outf(&c, 2, DIMS(64, 5));
    output(&c, TIDE_DTYPE_INT32, 2, DIMS(64, 5));
    check_case(&c);

    case_init(&c, TIDE_OP_TOP_K, "top_k_ties", TOL_EXACT);
    c.attrs[TIDE_ATTR_TOP_K_k].i = 7;
    input_ties(&c, 3, DIMS(3, 11, 7));
    outf(&c, 3, DIMS(3, 11, 7));
    output(&c, TIDE_DTYPE_INT32, 3, DIMS(3, 11, 7));
    check_case(&c);

    /* TopKGrad with indices as TopK gives them: distinct within a row. */
    case_init(&c, TIDE_OP_TOP_K_GRAD, "top_k_grad", TOL_EXACT);
    set_shape(&c, TIDE_ATTR_TOP_K_GRAD_shape, 2, DIMS(33, 40));
    input(&c, 2, DIMS(33, 3));
    int32_t *ix = input_ids(&c, 2, DIMS(33, 3), 40);
    for (int r = 0; r < 33; r++) {
        ix[r * 3 + 1] = (ix[r * 3] + 1 + r % 13) % 40;
        ix[r * 3 + 2] = (ix[r * 3] + 20 + r % 7) % 40;
    }
    outf(&c, 2, DIMS(33, 40));
    check_case(&c);
    REQUIRE_CUDA();
}

static void test_moe_route(void **state)
{
    (void)state;
    /* 50 tokens' 2 choices over 8 experts of 10 slots: some experts overflow, some have room. */
    struct op_case c;
    case_init(&c, TIDE_OP_MOE_ROUTE, "moe_route", TOL_EXACT);
    c.attrs[TIDE_ATTR_MOE_ROUTE_experts].i = 8;
    c.attrs[TIDE_ATTR_MOE_ROUTE_capacity].i = 10;
    int32_t *choice = input_ids(&c, 2, DIMS(50, 2), 8);
    for (int t = 0; t < 50; t++)
        choice[t * 2] = t % 3; /* experts 0 to 2 take every first choice */
    output(&c, TIDE_DTYPE_INT32, 1, DIMS(80));
    output(&c, TIDE_DTYPE_INT32, 2, DIMS(50, 2));
    check_case(&c);
    REQUIRE_CUDA();
}

/* ============================================================================
 * Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout)
 * ========================================================================== */

/* Rows of one warp's block and of the 256-thread block (d >= 1024), odd sizes, rank 1. */
static void test_layer_norm(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int32_t rank;
        int64_t dims[3];
    } shapes[] = {
        {"ln_3d", 3, {2, 5, 7}},
        {"ln_rank1", 1, {33}},
        {"ln_long", 2, {3, 2053}},
        {"ln_many_rows", 2, {1500, 65}},
        {"ln_transformer_rows", 2, {4100, 130}}, /* dgain's 32-warp blocks, a partial group */
    };
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        int32_t rank = shapes[i].rank;
        const int64_t *dims = shapes[i].dims;
        int64_t d = dims[rank - 1];
        char grad_name[64];
        snprintf(grad_name, sizeof(grad_name), "%s_grad", shapes[i].name);
        struct op_case c;
        case_init(&c, TIDE_OP_LAYER_NORM, shapes[i].name, TOL_ELEM);
        float *x = input(&c, rank, dims);
        /* An offset against the spread, as real activations have: two-pass statistics. */
        for (int64_t k = 0; k < tide_shape_numel(&c.in[0].shape); k++)
            x[k] = 3.0f + 0.5f * x[k];
        input_range(&c, 1, DIMS(d), 0.5f, 1.5f);
        input(&c, 1, DIMS(d));
        outf(&c, rank, dims);
        outf(&c, rank - 1, dims);
        outf(&c, rank - 1, dims);
        check_case(&c);

        case_init(&c, TIDE_OP_LAYER_NORM_GRAD, grad_name, TOL_ELEM);
        input(&c, rank, dims);                        /* dy */
        input(&c, rank, dims);                        /* x */
        input_range(&c, 1, DIMS(d), 0.5f, 1.5f);      /* gain */
        input_range(&c, rank - 1, dims, -0.1f, 0.1f); /* mean */
        input_range(&c, rank - 1, dims, 1.0f, 2.0f);  /* inv_std */
        outf(&c, rank, dims);
        outf(&c, 1, DIMS(d));
        outf(&c, 1, DIMS(d));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/*
 * Dropout and DropoutGrad in a training step: the CUDA mask must be the
 * CPU's bit for bit (TOL_EXACT: one wrong element errs by a whole value),
 * over sizes that end mid-block and more elements than one grid pass.
 */
static void test_dropout(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double rate;
        int64_t n;
    } cases[] = {
        {"dropout_small", 0.5, 37},
        {"dropout_large", 0.1, 70001},
        {"dropout_rate0", 0.0, 1000},
        {"dropout_high", 0.9, 4099},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char grad_name[64];
        snprintf(grad_name, sizeof(grad_name), "%s_grad", cases[i].name);
        struct op_case c;
        case_init(&c, TIDE_OP_DROPOUT, cases[i].name, TOL_EXACT);
        c.attrs[TIDE_ATTR_DROPOUT_rate].f = cases[i].rate;
        c.attrs[TIDE_ATTR_DROPOUT_seed].i = (int64_t)i - 2;
        input(&c, 1, DIMS(cases[i].n));
        outf(&c, 1, DIMS(cases[i].n));
        check_case(&c);

        case_init(&c, TIDE_OP_DROPOUT_GRAD, grad_name, TOL_EXACT);
        c.attrs[TIDE_ATTR_DROPOUT_GRAD_rate].f = cases[i].rate;
        c.attrs[TIDE_ATTR_DROPOUT_GRAD_seed].i = (int64_t)i - 2;
        c.attrs[TIDE_ATTR_DROPOUT_GRAD_forward].s = cases[i].name;
        input(&c, 2, DIMS(7, cases[i].n / 7 + 1));
        outf(&c, 2, DIMS(7, cases[i].n / 7 + 1));
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * Sequence-model ops: fused attention (Attention)
 * ========================================================================== */

/*
 * What Attention gives for q and k, v [heads, sq or sk, d], in double, into
 * o and lse: AttentionGrad's o and lse inputs, so that its P = exp(S - lse)
 * are the probabilities they would be in training.
 */
static void attention_host(const float *q, const float *k, const float *v, int64_t heads,
                           int64_t sq, int64_t sk, int64_t d, bool causal, double scale, float *o,
                           float *lse)
{
    for (int64_t h = 0; h < heads; h++) {
        for (int64_t i = 0; i < sq; i++) {
            const float *qi = q + (h * sq + i) * d;
            int64_t keys = causal ? i + 1 : sk;
            double m = -INFINITY, sum = 0;
            for (int64_t pass = 0; pass < 2; pass++) {
                for (int64_t j = 0; j < keys; j++) {
                    const float *kj = k + (h * sk + j) * d;
                    double x = 0;
                    for (int64_t e = 0; e < d; e++)
                        x += (double)qi[e] * kj[e];
                    x *= scale;
                    if (pass == 0)
                        m = fmax(m, x);
                    else
                        sum += exp(x - m);
                }
            }
            lse[h * sq + i] = (float)(m + log(sum));
            for (int64_t e = 0; e < d; e++) {
                double acc = 0;
                for (int64_t j = 0; j < keys; j++) {
                    const float *kj = k + (h * sk + j) * d;
                    double x = 0;
                    for (int64_t f = 0; f < d; f++)
                        x += (double)qi[f] * kj[f];
                    acc += exp(x * scale - m) / sum * v[(h * sk + j) * d + e];
                }
                o[(h * sq + i) * d + e] = (float)acc;
            }
        }
    }
}

/*
 * Attention and AttentionGrad: sequences longer than the CPU's blocks of 64
 * and the CUDA kernels' tiles of 32 and not a multiple of either, D past one
 * warp's width and not a multiple of it, causal and not, Sq != Sk.
 */
static void test_attention(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int64_t b, h, sq, sk, d;
        bool causal;
        double scale;
    } cases[] = {
        {"attention_causal", 1, 2, 130, 130, 40, true, 0},
        {"attention_cross", 2, 1, 70, 97, 8, false, 0.3},
        {"attention_d1", 1, 1, 33, 33, 1, true, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const int64_t *qd = DIMS(cases[i].b, cases[i].h, cases[i].sq, cases[i].d);
        const int64_t *kd = DIMS(cases[i].b, cases[i].h, cases[i].sk, cases[i].d);
        const int64_t *rd = DIMS(cases[i].b, cases[i].h, cases[i].sq);
        int64_t heads = cases[i].b * cases[i].h;
        double scale = cases[i].scale != 0 ? cases[i].scale : 1.0 / sqrt((double)cases[i].d);
        struct op_case c;
        case_init(&c, TIDE_OP_ATTENTION, cases[i].name, TOL_ELEM);
        c.attrs[TIDE_ATTR_ATTENTION_causal].b = cases[i].causal;
        c.attrs[TIDE_ATTR_ATTENTION_scale].f = cases[i].scale;
        input_range(&c, 4, qd, -2.0f, 2.0f);
        input(&c, 4, kd);
        input(&c, 4, kd);
        outf(&c, 4, qd);
        outf(&c, 3, rd);
        check_case(&c);

        char grad_name[64];
        snprintf(grad_name, sizeof(grad_name), "%s_grad", cases[i].name);
        case_init(&c, TIDE_OP_ATTENTION_GRAD, grad_name, TOL_ELEM);
        c.attrs[TIDE_ATTR_ATTENTION_GRAD_causal].b = cases[i].causal;
        c.attrs[TIDE_ATTR_ATTENTION_GRAD_scale].f = cases[i].scale;
        float *q = input_range(&c, 4, qd, -2.0f, 2.0f);
        float *k = input(&c, 4, kd), *v = input(&c, 4, kd);
        float *o = input(&c, 4, qd), *lse = input(&c, 3, rd);
        attention_host(q, k, v, heads, cases[i].sq, cases[i].sk, cases[i].d, cases[i].causal, scale,
                       o, lse);
        input(&c, 4, qd); /* do */
        outf(&c, 4, qd);
        outf(&c, 4, kd);
        outf(&c, 4, kd);
        check_case(&c);
    }
    REQUIRE_CUDA();
}

/* ============================================================================
 * Coverage
 * ========================================================================== */

/* Every compute op has a case above; this test runs last. */
static void test_every_op_covered(void **state)
{
    (void)state;
    for (int op = 0; op < TIDE_OP_COUNT; op++) {
        uint32_t flags = tide_op_info((enum tide_op)op)->flags;
        if (flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY))
            continue;
        if (!covered[op])
            fail_msg("op %s has no case in test_backend_ops", tide_op_info((enum tide_op)op)->name);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_reshape),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_binary),
        cmocka_unit_test(test_bias_add_and_add_n),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_softmax_cross_entropy),
        cmocka_unit_test(test_softmax_cross_entropy_bad_label),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_onednn_vs_fallback),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_pools_onednn_vs_fallback),
        cmocka_unit_test(test_batch_norm_onednn_vs_fallback),
        cmocka_unit_test(test_onednn_default_choice),
        cmocka_unit_test(test_optimizers),
        /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
        cmocka_unit_test(test_math_unary),
        cmocka_unit_test(test_math_binary),
        cmocka_unit_test(test_select_grads),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_trig),
        cmocka_unit_test(test_round),

        /* batched products and axis permutation (BatchMatMul, Transpose) */
        cmocka_unit_test(test_batch_matmul),
        cmocka_unit_test(test_tf32),
        cmocka_unit_test(test_transpose),

        /* indexing (Gather, TopK, Mixture-of-Experts routing) */
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_elements),
        cmocka_unit_test(test_index_out_of_range),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_moe_route),

        /* normalisation and regularisation (LayerNorm, Dropout) */
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_dropout),

        /* fused attention (Attention) */
        cmocka_unit_test(test_attention),

        cmocka_unit_test(test_cuda_supports_every_op),
        cmocka_unit_test(test_cuda_device),
        cmocka_unit_test(test_cuda_out_of_memory),
        cmocka_unit_test(test_cuda_streams_and_events),
        cmocka_unit_test(test_cuda_sticky_error),
        cmocka_unit_test(test_every_op_covered),
    };
    return cmocka_run_group_tests(tests, setup_backends, teardown_backends);
}
