/* SPDX-License-Identifier: MIT */
/*
 * test_kernels.c: the CPU kernels (kernels/cpu) and tide_variable_init.
 *
 * Every kernel runs on a small case with expectations computed by hand or
 * by an independent naive implementation in double (a triple loop for
 * MatMul, a direct convolution for Conv2D and its gradients, the textbook
 * formulas for the rest). The tests build nodes and tensor views directly,
 * without tide_graph_infer, so they must give attributes in the normalised
 * form infer would write (explicit strides and pads, sorted axes, ...).
 * Each kernel runs through run(), which sizes the workspace with the table's
 * workspace_bytes and fills it with garbage first, so a kernel that trusts
 * the workspace to be zero, or needs more than it asks for, fails here.
 *
 * Determinism across OpenBLAS thread counts is checked bit for bit, and so
 * is every kernel that splits its work over the pool, at 1, 2 and 3 threads,
 * the convolutions through oneDNN and through the CPU kernels' own im2col +
 * sgemm;
 * the initialisers are checked for reproducibility and their distributions.
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

#include "kernels/kernels.h"
#include "float_assert.h"

/* ============================================================================
 * Harness
 * ========================================================================== */

#define MAX_ATTRS 16
#define MAX_IO    8

/* A node built without a graph: attributes start at their ops.def defaults. */
struct test_node {
    struct tide_node node;
    struct tide_attr_value attrs[MAX_ATTRS];
    struct tide_edge edges[MAX_IO];
    struct tide_output outputs[MAX_IO];
};

static void node_init(struct test_node *t, enum tide_op op, const char *name)
{
    memset(t, 0, sizeof(*t));
    const struct tide_op_info *info = tide_op_info(op);
    assert_true(info->n_attrs <= MAX_ATTRS);
    t->node.op = op;
    t->node.name = name;
    t->node.attrs = t->attrs;
    t->node.device = "";
    for (uint32_t k = 0; k < info->n_attrs; k++) {
        const struct tide_attr_spec *spec = &info->attrs[k];
        switch (spec->type) {
        case TIDE_ATTR_TYPE_INT:
            t->attrs[k].i = spec->default_int;
            break;
        case TIDE_ATTR_TYPE_BOOL:
            t->attrs[k].b = spec->default_int != 0;
            break;
        case TIDE_ATTR_TYPE_DTYPE:
            t->attrs[k].dtype = (enum tide_dtype)spec->default_int;
            break;
        case TIDE_ATTR_TYPE_FLOAT:
            t->attrs[k].f = spec->default_float;
            break;
        case TIDE_ATTR_TYPE_STRING:
            t->attrs[k].s = spec->default_string;
            break;
        default:
            break;
        }
    }
}

static void set_ints(struct test_node *t, int k, int32_t n, const int64_t *v)
{
    t->attrs[k].present = true;
    t->attrs[k].ints.n = n;
    for (int32_t i = 0; i < n; i++)
        t->attrs[k].ints.v[i] = v[i];
}

static void set_pair(struct test_node *t, int k, int64_t a, int64_t b)
{
    int64_t v[2] = {a, b};
    set_ints(t, k, 2, v);
}

static void set_shape(struct test_node *t, int k, int32_t rank, const int64_t *dims)
{
    t->attrs[k].present = true;
    t->attrs[k].shape = tide_shape_make(rank, dims);
}

static struct tide_tensor_view view(enum tide_dtype dtype, void *data, int32_t rank,
                                    const int64_t *dims)
{
    struct tide_tensor_view v = {.data = data, .dtype = dtype};
    v.shape = tide_shape_make(rank, dims);
    v.nbytes = (uint64_t)tide_shape_numel(&v.shape) * tide_dtype_size(dtype);
    return v;
}

static struct tide_tensor_view fview(float *data, int32_t rank, const int64_t *dims)
{
    return view(TIDE_DTYPE_FLOAT32, data, rank, dims);
}

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

/*
 * When plan_threads is not 0, run_step sizes the workspace as if the pool had
 * that many threads (as a memory plan made earlier would), then runs the
 * kernel with run_threads.
 */
static int plan_threads, run_threads;

/*
 * Runs node t's CPU kernel on the views. A fake graph of one producer per
 * input lets the table's workspace_bytes see the input shapes; the
 * workspace is filled with 0xff bytes (NaN as float) before the call.
 */
static enum tide_status run_step(struct test_node *t, const struct tide_tensor_view *in,
                                 uint32_t n_in, const struct tide_tensor_view *out, uint32_t n_out,
                                 const uint64_t *step, struct tide_error *err)
{
    struct tide_node producers[MAX_IO];
    struct tide_output produced[MAX_IO];
    assert_true(n_in <= MAX_IO && n_out <= MAX_IO);
    memset(producers, 0, sizeof(producers));
    for (uint32_t i = 0; i < n_in; i++) {
        produced[i] = (struct tide_output){
            .dtype = in[i].dtype, .shape = in[i].shape, .nbytes = in[i].nbytes};
        producers[i].op = TIDE_OP_PLACEHOLDER;
        producers[i].name = "producer";
        producers[i].n_outputs = 1;
        producers[i].outputs = &produced[i];
        t->edges[i] = (struct tide_edge){i, 0};
    }
    for (uint32_t i = 0; i < n_out; i++)
        t->outputs[i] = (struct tide_output){
            .dtype = out[i].dtype, .shape = out[i].shape, .nbytes = out[i].nbytes};
    t->node.n_inputs = n_in;
    t->node.inputs = t->edges;
    t->node.n_outputs = n_out;
    t->node.outputs = t->outputs;
    struct tide_graph graph = {.nodes = producers, .n_nodes = n_in};

    tide_kernel_fn fn = tide_cpu_kernels.fn[t->node.op];
    assert_non_null(fn);
    if (plan_threads)
        tide_cpu_kernels_set_threads(plan_threads);
    uint64_t ws_bytes = tide_cpu_kernels.workspace_bytes(NULL, &graph, &t->node);
    if (plan_threads)
        tide_cpu_kernels_set_threads(run_threads);
    void *ws = NULL;
    if (ws_bytes > 0) {
        ws = malloc(ws_bytes);
        assert_non_null(ws);
        memset(ws, 0xff, ws_bytes);
    }
    struct tide_kernel_args args = {
        .node = &t->node,
        .n_inputs = n_in,
        .inputs = in,
        .n_outputs = n_out,
        .outputs = out,
        .workspace = ws,
        .workspace_bytes = ws_bytes,
        .step = step,
    };
    enum tide_status st = fn(&args, err);
    free(ws);
    return st;
}

/* run_step that must succeed. */
static void run(struct test_node *t, const struct tide_tensor_view *in, uint32_t n_in,
                const struct tide_tensor_view *out, uint32_t n_out)
{
    struct tide_error err = {0};
    enum tide_status st = run_step(t, in, n_in, out, n_out, NULL, &err);
    if (st != TIDE_OK)
        fail_msg("%s failed: %s", tide_op_info(t->node.op)->name, err.message);
}

/* A small deterministic generator for test data: uniform in [-1, 1). */
static float frand(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)((*state >> 8) * (1.0 / 8388608.0) - 1.0);
}

static void fill(float *x, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = frand(&seed);
}

/* Fails unless |got - want| <= atol + rtol * |want| element by element. */
static void expect_close(const char *what, const float *got, const double *want, int64_t n,
                         double rtol, double atol)
{
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - want[i]);
        if (!(diff <= atol + rtol * fabs(want[i])))
            fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, got[i], want[i]);
    }
}

/* expect_close against float expectations. */
static void expect_closef(const char *what, const float *got, const float *want, int64_t n,
                          double tol)
{
    for (int64_t i = 0; i < n; i++) {
        double diff = fabs((double)got[i] - want[i]);
        if (!(diff <= tol + tol * fabs(want[i])))
            fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, got[i], want[i]);
    }
}

static float *falloc(int64_t n)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

static double *dalloc(int64_t n)
{
    double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    assert_non_null(p);
    return p;
}

/* ============================================================================
 * The table
 * ========================================================================== */

static void test_table(void **state)
{
    (void)state;
    assert_string_equal(tide_cpu_kernels.name, "cpu");
    assert_non_null(tide_cpu_kernels.workspace_bytes);
    for (int op = 0; op < TIDE_OP_COUNT; op++) {
        uint32_t flags = tide_op_info((enum tide_op)op)->flags;
        bool executor_op = flags & (TIDE_OP_F_SOURCE | TIDE_OP_F_MEMORY);
        if (executor_op && tide_cpu_kernels.fn[op])
            fail_msg("%s has a kernel, but the executor implements it",
                     tide_op_info((enum tide_op)op)->name);
        if (!executor_op && !tide_cpu_kernels.fn[op])
            fail_msg("%s has no CPU kernel", tide_op_info((enum tide_op)op)->name);
    }
}

/* ============================================================================
 * MatMul
 * ========================================================================== */

static void test_matmul(void **state)
{
    (void)state;
    enum { M = 5, K = 7, N = 3 };
    float a[M * K], b[K * N], y[M * N];
    double want[M * N];
    fill(a, M * K, 1);
    fill(b, K * N, 2);
    for (int ta = 0; ta < 2; ta++) {
        for (int tb = 0; tb < 2; tb++) {
            /* a is stored as [M, K] or, transposed, [K, M]; b as [K, N] or [N, K]. */
            for (int i = 0; i < M; i++) {
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (double)(ta ? a[k * M + i] : a[i * K + k]) *
                             (tb ? b[j * K + k] : b[k * N + j]);
                    want[i * N + j] = s;
                }
            }
            struct test_node t;
            node_init(&t, TIDE_OP_MATMUL, "mm");
            t.attrs[TIDE_ATTR_MATMUL_transpose_a].b = ta;
            t.attrs[TIDE_ATTR_MATMUL_transpose_b].b = tb;
            struct tide_tensor_view in[2] = {
                fview(a, 2, ta ? DIMS(K, M) : DIMS(M, K)),
                fview(b, 2, tb ? DIMS(N, K) : DIMS(K, N)),
            };
            struct tide_tensor_view out = fview(y, 2, DIMS(M, N));
            run(&t, in, 2, &out, 1);
            expect_close("matmul", y, want, M * N, 1e-5, 1e-6);
        }
    }
}

/* ============================================================================
 * Element-wise ops and broadcasting
 * ========================================================================== */

static void test_binary_same_shape(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {6, 5, 4, 3, 2, 1}, y[6];
    const float add[6] = {7, 7, 7, 7, 7, 7}, sub[6] = {-5, -3, -1, 1, 3, 5};
    const float mul[6] = {6, 10, 12, 12, 10, 6};
    struct tide_tensor_view in[2] = {fview(a, 2, DIMS(2, 3)), fview(b, 2, DIMS(2, 3))};
    struct tide_tensor_view out = fview(y, 2, DIMS(2, 3));
    struct test_node t;
    node_init(&t, TIDE_OP_ADD, "add");
    run(&t, in, 2, &out, 1);
    expect_closef("add", y, add, 6, 0);
    node_init(&t, TIDE_OP_SUB, "sub");
    run(&t, in, 2, &out, 1);
    expect_closef("sub", y, sub, 6, 0);
    node_init(&t, TIDE_OP_MUL, "mul");
    run(&t, in, 2, &out, 1);
    expect_closef("mul", y, mul, 6, 0);
}

static void test_binary_broadcast(void **state)
{
    (void)state;
    /* [2, 1, 3] + [4, 1] -> [2, 4, 3]. */
    float a[6], b[4], y[24];
    fill(a, 6, 3);
    fill(b, 4, 4);
    struct tide_tensor_view in[2] = {fview(a, 3, DIMS(2, 1, 3)), fview(b, 2, DIMS(4, 1))};
    struct tide_tensor_view out = fview(y, 3, DIMS(2, 4, 3));
    struct test_node t;
    node_init(&t, TIDE_OP_ADD, "add");
    run(&t, in, 2, &out, 1);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++)
                assert_true(y[(i * 4 + j) * 3 + k] == a[i * 3 + k] + b[j]);

    /* Sub with the broadcast input first: [3] - [2, 3]. */
    float c[3] = {10, 20, 30}, d[6] = {1, 2, 3, 4, 5, 6}, z[6];
    const float sub[6] = {9, 18, 27, 6, 15, 24};
    struct tide_tensor_view in2[2] = {fview(c, 1, DIMS(3)), fview(d, 2, DIMS(2, 3))};
    struct tide_tensor_view out2 = fview(z, 2, DIMS(2, 3));
    node_init(&t, TIDE_OP_SUB, "sub");
    run(&t, in2, 2, &out2, 1);
    expect_closef("sub broadcast", z, sub, 6, 0);

    /* Mul by a scalar (rank 0), and [3, 1] * [1, 4] (both inputs broadcast). */
    float s = 2.5f;
    struct tide_tensor_view in3[2] = {fview(d, 2, DIMS(2, 3)), fview(&s, 0, NULL)};
    node_init(&t, TIDE_OP_MUL, "mul");
    run(&t, in3, 2, &out2, 1);
    for (int i = 0; i < 6; i++)
        assert_true(z[i] == d[i] * 2.5f);
    float col[3] = {1, 2, 3}, row[4] = {1, 10, 100, 1000}, outer[12];
    struct tide_tensor_view in4[2] = {fview(col, 2, DIMS(3, 1)), fview(row, 2, DIMS(1, 4))};
    struct tide_tensor_view out4 = fview(outer, 2, DIMS(3, 4));
    run(&t, in4, 2, &out4, 1);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            assert_true(outer[i * 4 + j] == col[i] * row[j]);

    /* [2, 3, 4, 5] + [3, 1, 1]: the per-channel pattern of a conv bias. */
    float x[120], bias[3], w[120];
    fill(x, 120, 5);
    fill(bias, 3, 6);
    struct tide_tensor_view in5[2] = {fview(x, 4, DIMS(2, 3, 4, 5)), fview(bias, 3, DIMS(3, 1, 1))};
    struct tide_tensor_view out5 = fview(w, 4, DIMS(2, 3, 4, 5));
    node_init(&t, TIDE_OP_ADD, "add");
    run(&t, in5, 2, &out5, 1);
    for (int i = 0; i < 120; i++)
        assert_true(w[i] == x[i] + bias[(i / 20) % 3]);
}

static void test_broadcast_to_and_add_n(void **state)
{
    (void)state;
    float x[3] = {1, 2, 3}, y[24];
    struct test_node t;
    node_init(&t, TIDE_OP_BROADCAST_TO, "bt");
    set_shape(&t, TIDE_ATTR_BROADCAST_TO_shape, 3, DIMS(2, 3, 4));
    struct tide_tensor_view in = fview(x, 2, DIMS(3, 1));
    struct tide_tensor_view out = fview(y, 3, DIMS(2, 3, 4));
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 24; i++)
        assert_true(y[i] == x[(i / 4) % 3]);

    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, c[4] = {100, 200, 300, 400}, s[4];
    const float want[4] = {111, 222, 333, 444};
    struct tide_tensor_view ins[3] = {fview(a, 1, DIMS(4)), fview(b, 1, DIMS(4)),
                                      fview(c, 1, DIMS(4))};
    struct tide_tensor_view sum = fview(s, 1, DIMS(4));
    node_init(&t, TIDE_OP_ADD_N, "addn");
    run(&t, ins, 3, &sum, 1);
    expect_closef("add_n", s, want, 4, 0);
    /* Two terms (one pass) and one (a copy). */
    const float want2[4] = {11, 22, 33, 44};
    run(&t, ins, 2, &sum, 1);
    expect_closef("add_n of 2", s, want2, 4, 0);
    run(&t, ins, 1, &sum, 1);
    expect_closef("add_n of 1", s, a, 4, 0);
}

static void test_bias_add(void **state)
{
    (void)state;
    float x[24], bias[3] = {1, -2, 3}, y[24];
    fill(x, 24, 7);
    struct test_node t;
    node_init(&t, TIDE_OP_BIAS_ADD, "bias");
    struct tide_tensor_view in[2] = {fview(x, 4, DIMS(2, 3, 2, 2)), fview(bias, 1, DIMS(3))};
    struct tide_tensor_view out = fview(y, 4, DIMS(2, 3, 2, 2));
    run(&t, in, 2, &out, 1);
    for (int i = 0; i < 24; i++)
        assert_true(y[i] == x[i] + bias[(i / 4) % 3]);
    /* Rank 2 [N, C]. */
    in[0] = fview(x, 2, DIMS(8, 3));
    out = fview(y, 2, DIMS(8, 3));
    run(&t, in, 2, &out, 1);
    for (int i = 0; i < 24; i++)
        assert_true(y[i] == x[i] + bias[i % 3]);
}

static void test_unary(void **state)
{
    (void)state;
    float x[5] = {-2, -0.5f, 0, 0.5f, 100}, y[5];
    struct tide_tensor_view in = fview(x, 1, DIMS(5)), out = fview(y, 1, DIMS(5));
    struct test_node t;
    double want[5];

    node_init(&t, TIDE_OP_RELU, "relu");
    run(&t, &in, 1, &out, 1);
    const float relu[5] = {0, 0, 0, 0.5f, 100};
    expect_closef("relu", y, relu, 5, 0);

    node_init(&t, TIDE_OP_SIGMOID, "sigmoid");
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 5; i++)
        want[i] = 1.0 / (1.0 + exp(-(double)x[i]));
    expect_close("sigmoid", y, want, 5, 1e-6, 1e-7);
    assert_true(y[2] == 0.5f);

    node_init(&t, TIDE_OP_TANH, "tanh");
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 5; i++)
        want[i] = tanh((double)x[i]);
    expect_close("tanh", y, want, 5, 1e-6, 1e-7);

    node_init(&t, TIDE_OP_NEG, "neg");
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 5; i++)
        assert_true(y[i] == -x[i]);

    node_init(&t, TIDE_OP_SCALE, "scale");
    t.attrs[TIDE_ATTR_SCALE_scale].f = -0.25;
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 5; i++)
        assert_true(y[i] == x[i] * -0.25f);

    /* Sigmoid saturates without overflow. */
    float big[2] = {-1000, 1000}, sb[2];
    struct tide_tensor_view bin = fview(big, 1, DIMS(2)), bout = fview(sb, 1, DIMS(2));
    node_init(&t, TIDE_OP_SIGMOID, "sigmoid");
    run(&t, &bin, 1, &bout, 1);
    assert_true(sb[0] == 0.0f && sb[1] == 1.0f);
}

static void test_activation_grads(void **state)
{
    (void)state;
    float dy[4] = {1, -2, 3, -4}, y[4] = {-0.5f, 0, 0.25f, 0.75f}, dx[4];
    struct tide_tensor_view in[2] = {fview(dy, 1, DIMS(4)), fview(y, 1, DIMS(4))};
    struct tide_tensor_view out = fview(dx, 1, DIMS(4));
    struct test_node t;
    double want[4];

    node_init(&t, TIDE_OP_RELU_GRAD, "relu_grad");
    run(&t, in, 2, &out, 1);
    const float relu[4] = {0, 0, 3, -4};
    expect_closef("relu_grad", dx, relu, 4, 0);

    node_init(&t, TIDE_OP_SIGMOID_GRAD, "sigmoid_grad");
    run(&t, in, 2, &out, 1);
    for (int i = 0; i < 4; i++)
        want[i] = (double)dy[i] * y[i] * (1.0 - y[i]);
    expect_close("sigmoid_grad", dx, want, 4, 1e-6, 0);

    node_init(&t, TIDE_OP_TANH_GRAD, "tanh_grad");
    run(&t, in, 2, &out, 1);
    for (int i = 0; i < 4; i++)
        want[i] = (double)dy[i] * (1.0 - (double)y[i] * y[i]);
    expect_close("tanh_grad", dx, want, 4, 1e-6, 0);
}

/* ============================================================================
 * Softmax and cross-entropy
 * ========================================================================== */

/* softmax along axis of x (shape dims, rank) in double. */
static void naive_softmax(const float *x, const int64_t *dims, int32_t rank, int32_t axis,
                          double *y)
{
    int64_t outer = 1, len = dims[axis], inner = 1;
    for (int32_t d = 0; d < axis; d++)
        outer *= dims[d];
    for (int32_t d = axis + 1; d < rank; d++)
        inner *= dims[d];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < len; j++)
                m = fmax(m, x[(o * len + j) * inner + i]);
            for (int64_t j = 0; j < len; j++)
                s += exp(x[(o * len + j) * inner + i] - m);
            for (int64_t j = 0; j < len; j++)
                y[(o * len + j) * inner + i] = exp(x[(o * len + j) * inner + i] - m) / s;
        }
    }
}

static void test_softmax(void **state)
{
    (void)state;
    float x[24], y[24];
    double want[24];
    fill(x, 24, 9);
    for (int i = 0; i < 24; i++)
        x[i] *= 5;
    const int64_t *dims = DIMS(2, 3, 4);
    struct tide_tensor_view in = fview(x, 3, dims), out = fview(y, 3, dims);
    struct test_node t;
    for (int32_t axis = 0; axis < 3; axis++) {
        node_init(&t, TIDE_OP_SOFTMAX, "softmax");
        t.attrs[TIDE_ATTR_SOFTMAX_axis].i = axis;
        run(&t, &in, 1, &out, 1);
        naive_softmax(x, dims, 3, axis, want);
        expect_close("softmax", y, want, 24, 1e-5, 1e-7);
    }
    /* A negative axis counts from the end. */
    node_init(&t, TIDE_OP_SOFTMAX, "softmax");
    t.attrs[TIDE_ATTR_SOFTMAX_axis].i = -1;
    run(&t, &in, 1, &out, 1);
    naive_softmax(x, dims, 3, 2, want);
    expect_close("softmax axis -1", y, want, 24, 1e-5, 1e-7);

    /* Large logits do not overflow. */
    float big[3] = {1000, 1001, 1002}, p[3];
    struct tide_tensor_view bin = fview(big, 1, DIMS(3)), bout = fview(p, 1, DIMS(3));
    run(&t, &bin, 1, &bout, 1);
    const double bw[3] = {0.09003057317038046, 0.24472847105479767, 0.6652409557748219};
    expect_close("softmax large", p, bw, 3, 1e-5, 0);
}

static void test_softmax_grad(void **state)
{
    (void)state;
    float dy[12], y[12], dx[12];
    double want[12];
    fill(dy, 12, 10);
    fill(y, 12, 11);
    const int64_t *dims = DIMS(3, 4);
    struct tide_tensor_view in[2] = {fview(dy, 2, dims), fview(y, 2, dims)};
    struct tide_tensor_view out = fview(dx, 2, dims);
    struct test_node t;
    int64_t axes[2] = {-1, 0};
    for (int a = 0; a < 2; a++) {
        node_init(&t, TIDE_OP_SOFTMAX_GRAD, "softmax_grad");
        t.attrs[TIDE_ATTR_SOFTMAX_GRAD_axis].i = axes[a];
        run(&t, in, 2, &out, 1);
        int64_t axis = axes[a] < 0 ? 1 : 0;
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 4; j++) {
                double dot = 0;
                for (int k = 0; k < (axis ? 4 : 3); k++) {
                    int idx = axis ? i * 4 + k : k * 4 + j;
                    dot += (double)dy[idx] * y[idx];
                }
                want[i * 4 + j] = y[i * 4 + j] * (dy[i * 4 + j] - dot);
            }
        }
        expect_close("softmax_grad", dx, want, 12, 1e-5, 1e-6);
    }
}

static void test_softmax_xent(void **state)
{
    (void)state;
    float logits[6] = {1, 2, 3, 0, 0, 0}, loss[2];
    int32_t labels[2] = {2, 0};
    struct tide_tensor_view in[2] = {fview(logits, 2, DIMS(2, 3)),
                                     view(TIDE_DTYPE_INT32, labels, 1, DIMS(2))};
    struct tide_tensor_view out = fview(loss, 1, DIMS(2));
    struct test_node t;
    node_init(&t, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent");
    run(&t, in, 2, &out, 1);
    /* log(e + e^2 + e^3) - 3 and log(3). */
    const double want[2] = {0.40760596444438, 1.09861228866811};
    expect_close("xent", loss, want, 2, 1e-6, 0);

    /* Large logits: the log-sum-exp is stable. */
    float big[3] = {1000, 1001, 1002}, bl;
    int32_t bl_label = 2;
    struct tide_tensor_view bin[2] = {fview(big, 2, DIMS(1, 3)),
                                      view(TIDE_DTYPE_INT32, &bl_label, 1, DIMS(1))};
    struct tide_tensor_view bout = fview(&bl, 1, DIMS(1));
    run(&t, bin, 2, &bout, 1);
    assert_true(fabs(bl - 0.40760596) < 1e-4);

    /* A label out of range is refused, naming the node, the example and the label. */
    labels[1] = 5;
    struct tide_error err = {0};
    assert_int_equal(run_step(&t, in, 2, &out, 1, NULL, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"xent\""));
    assert_non_null(strstr(err.message, "label 5"));
    assert_non_null(strstr(err.message, "example 1"));
    labels[1] = -1;
    assert_int_equal(run_step(&t, in, 2, &out, 1, NULL, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "label -1"));
}

static void test_softmax_xent_grad(void **state)
{
    (void)state;
    float logits[8], dloss[2] = {0.5f, -2}, dx[8];
    int32_t labels[2] = {3, 1};
    double want[8], p[8];
    fill(logits, 8, 12);
    naive_softmax(logits, DIMS(2, 4), 2, 1, p);
    for (int n = 0; n < 2; n++)
        for (int c = 0; c < 4; c++)
            want[n * 4 + c] = dloss[n] * (p[n * 4 + c] - (c == labels[n]));
    struct tide_tensor_view in[3] = {fview(logits, 2, DIMS(2, 4)),
                                     view(TIDE_DTYPE_INT32, labels, 1, DIMS(2)),
                                     fview(dloss, 1, DIMS(2))};
    struct tide_tensor_view out = fview(dx, 2, DIMS(2, 4));
    struct test_node t;
    node_init(&t, TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD, "xent_grad");
    run(&t, in, 3, &out, 1);
    expect_close("xent_grad", dx, want, 8, 1e-5, 1e-7);
    labels[0] = 4;
    struct tide_error err = {0};
    assert_int_equal(run_step(&t, in, 3, &out, 1, NULL, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "label 4 of example 0"));
}

/* ============================================================================
 * Reductions
 * ========================================================================== */

static void test_reduce(void **state)
{
    (void)state;
    float x[24], y[24];
    double want[24];
    for (int i = 0; i < 24; i++)
        x[i] = (float)i;
    struct tide_tensor_view in = fview(x, 3, DIMS(2, 3, 4));
    struct test_node t;

    /* Sum over axis 1: [2, 4]. */
    node_init(&t, TIDE_OP_REDUCE_SUM, "sum");
    set_ints(&t, TIDE_ATTR_REDUCE_SUM_axes, 1, DIMS(1));
    struct tide_tensor_view out = fview(y, 2, DIMS(2, 4));
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            want[i * 4 + k] = x[i * 12 + k] + x[i * 12 + 4 + k] + x[i * 12 + 8 + k];
    expect_close("sum axis 1", y, want, 8, 0, 0);

    /* keep_dims gives [2, 1, 4] with the same values. */
    t.attrs[TIDE_ATTR_REDUCE_SUM_keep_dims].b = true;
    out = fview(y, 3, DIMS(2, 1, 4));
    run(&t, &in, 1, &out, 1);
    expect_close("sum keep_dims", y, want, 8, 0, 0);

    /* Sum over axes 0 and 2: [3]. */
    node_init(&t, TIDE_OP_REDUCE_SUM, "sum");
    set_ints(&t, TIDE_ATTR_REDUCE_SUM_axes, 2, DIMS(0, 2));
    out = fview(y, 1, DIMS(3));
    run(&t, &in, 1, &out, 1);
    for (int j = 0; j < 3; j++) {
        want[j] = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                want[j] += x[i * 12 + j * 4 + k];
    }
    expect_close("sum axes 0, 2", y, want, 3, 0, 0);

    /* Mean over the same axes, and over every axis (empty axes). */
    node_init(&t, TIDE_OP_REDUCE_MEAN, "mean");
    set_ints(&t, TIDE_ATTR_REDUCE_MEAN_axes, 2, DIMS(0, 2));
    run(&t, &in, 1, &out, 1);
    for (int j = 0; j < 3; j++)
        want[j] /= 8;
    expect_close("mean axes 0, 2", y, want, 3, 1e-7, 0);
    node_init(&t, TIDE_OP_REDUCE_MEAN, "mean");
    out = fview(y, 0, NULL);
    run(&t, &in, 1, &out, 1);
    assert_true(y[0] == 11.5f);

    /*
     * Out-of-range and repeated axes never reach a kernel: infer refuses them
     * (test_infer.c, test_reduce), and the kernel asserts it.
     */

    /* A long sum is accumulated in double: 2^24 + 1 ones would stall in float. */
    int64_t n = (1 << 24) + 8;
    float *ones = falloc(n);
    for (int64_t i = 0; i < n; i++)
        ones[i] = 1.0f;
    struct tide_tensor_view big = fview(ones, 1, DIMS(n));
    node_init(&t, TIDE_OP_REDUCE_SUM, "sum");
    out = fview(y, 0, NULL);
    run(&t, &big, 1, &out, 1);
    assert_true(y[0] == (float)n);
    free(ones);
}

static void test_sum_to_shape_and_bias_grad(void **state)
{
    (void)state;
    float x[24], y[12];
    double want[12];
    fill(x, 24, 13);
    struct tide_tensor_view in = fview(x, 3, DIMS(2, 3, 4));
    struct test_node t;

    /* [2, 3, 4] -> [3, 1]: sum over axes 0 and 2. */
    node_init(&t, TIDE_OP_SUM_TO_SHAPE, "sts");
    set_shape(&t, TIDE_ATTR_SUM_TO_SHAPE_shape, 2, DIMS(3, 1));
    struct tide_tensor_view out = fview(y, 2, DIMS(3, 1));
    run(&t, &in, 1, &out, 1);
    for (int j = 0; j < 3; j++) {
        want[j] = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                want[j] += x[i * 12 + j * 4 + k];
    }
    expect_close("sum_to_shape [3, 1]", y, want, 3, 1e-6, 1e-7);

    /* [2, 3, 4] -> [4]: sum over the leading axes it lacks. */
    set_shape(&t, TIDE_ATTR_SUM_TO_SHAPE_shape, 1, DIMS(4));
    out = fview(y, 1, DIMS(4));
    run(&t, &in, 1, &out, 1);
    for (int k = 0; k < 4; k++) {
        want[k] = 0;
        for (int i = 0; i < 6; i++)
            want[k] += x[i * 4 + k];
    }
    expect_close("sum_to_shape [4]", y, want, 4, 1e-6, 1e-7);

    /* [2, 3, 4] -> [2, 3, 4]: a copy. */
    float full[24];
    set_shape(&t, TIDE_ATTR_SUM_TO_SHAPE_shape, 3, DIMS(2, 3, 4));
    out = fview(full, 3, DIMS(2, 3, 4));
    run(&t, &in, 1, &out, 1);
    assert_memory_equal(full, x, sizeof(x));

    /* BiasAddGrad: [2, 3, 4] -> [3], the sum over every axis but 1 (as the [3, 1] case). */
    node_init(&t, TIDE_OP_BIAS_ADD_GRAD, "bias_grad");
    out = fview(y, 1, DIMS(3));
    run(&t, &in, 1, &out, 1);
    for (int j = 0; j < 3; j++) {
        want[j] = 0;
        for (int i = 0; i < 2; i++)
            for (int k = 0; k < 4; k++)
                want[j] += x[i * 12 + j * 4 + k];
    }
    expect_close("bias_add_grad", y, want, 3, 1e-6, 1e-7);
    /* And on [N, C]. */
    in = fview(x, 2, DIMS(6, 4));
    out = fview(y, 1, DIMS(4));
    run(&t, &in, 1, &out, 1);
    for (int k = 0; k < 4; k++) {
        want[k] = 0;
        for (int i = 0; i < 6; i++)
            want[k] += x[i * 4 + k];
    }
    expect_close("bias_add_grad [N, C]", y, want, 4, 1e-6, 1e-7);
}

/* ============================================================================
 * Shape ops
 * ========================================================================== */

static void test_identity_reshape(void **state)
{
    (void)state;
    float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0};
    struct tide_tensor_view in = fview(x, 2, DIMS(2, 3)), out = fview(y, 2, DIMS(2, 3));
    struct test_node t;
    node_init(&t, TIDE_OP_IDENTITY, "id");
    run(&t, &in, 1, &out, 1);
    assert_memory_equal(x, y, sizeof(x));
    memset(y, 0, sizeof(y));
    node_init(&t, TIDE_OP_RESHAPE, "reshape");
    set_ints(&t, TIDE_ATTR_RESHAPE_shape, 2, DIMS(3, 2));
    out = fview(y, 2, DIMS(3, 2));
    run(&t, &in, 1, &out, 1);
    assert_memory_equal(x, y, sizeof(x));
}

static void test_concat(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[12], y[18];
    for (int i = 0; i < 12; i++)
        b[i] = (float)(100 + i);
    struct tide_tensor_view in[2] = {fview(a, 3, DIMS(2, 1, 3)), fview(b, 3, DIMS(2, 2, 3))};
    struct tide_tensor_view out = fview(y, 3, DIMS(2, 3, 3));
    struct test_node t;
    node_init(&t, TIDE_OP_CONCAT, "concat");
    t.attrs[TIDE_ATTR_CONCAT_axis].i = 1;
    run(&t, in, 2, &out, 1);
    const float want[18] = {1, 2, 3, 100, 101, 102, 103, 104, 105,
                            4, 5, 6, 106, 107, 108, 109, 110, 111};
    expect_closef("concat", y, want, 18, 0);

    /* int32 along axis 0 (negative axes count from the end). */
    int32_t p[2] = {1, 2}, q[3] = {3, 4, 5}, r[5];
    struct tide_tensor_view iin[2] = {view(TIDE_DTYPE_INT32, p, 1, DIMS(2)),
                                      view(TIDE_DTYPE_INT32, q, 1, DIMS(3))};
    struct tide_tensor_view iout = view(TIDE_DTYPE_INT32, r, 1, DIMS(5));
    t.attrs[TIDE_ATTR_CONCAT_axis].i = -1;
    run(&t, iin, 2, &iout, 1);
    for (int i = 0; i < 5; i++)
        assert_int_equal(r[i], i + 1);
}

static void test_slice_and_grad(void **state)
{
    (void)state;
    float x[60], y[16], dx[60];
    for (int i = 0; i < 60; i++)
        x[i] = (float)i;
    struct test_node t;
    node_init(&t, TIDE_OP_SLICE, "slice");
    set_ints(&t, TIDE_ATTR_SLICE_begin, 3, DIMS(1, 0, 2));
    set_ints(&t, TIDE_ATTR_SLICE_size, 3, DIMS(2, 4, 2));
    struct tide_tensor_view in = fview(x, 3, DIMS(3, 4, 5)), out = fview(y, 3, DIMS(2, 4, 2));
    run(&t, &in, 1, &out, 1);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 2; k++)
                assert_true(y[(i * 4 + j) * 2 + k] == x[((i + 1) * 4 + j) * 5 + k + 2]);

    /* A slice of whole trailing rows: begin [1, 0, 0], size [1, 4, 5]. */
    float rows[20];
    set_ints(&t, TIDE_ATTR_SLICE_begin, 3, DIMS(1, 0, 0));
    set_ints(&t, TIDE_ATTR_SLICE_size, 3, DIMS(1, 4, 5));
    out = fview(rows, 3, DIMS(1, 4, 5));
    run(&t, &in, 1, &out, 1);
    assert_memory_equal(rows, x + 20, sizeof(rows));

    /* SliceGrad puts y back at begin in zeros. */
    node_init(&t, TIDE_OP_SLICE_GRAD, "slice_grad");
    set_ints(&t, TIDE_ATTR_SLICE_GRAD_begin, 3, DIMS(1, 0, 2));
    set_shape(&t, TIDE_ATTR_SLICE_GRAD_shape, 3, DIMS(3, 4, 5));
    struct tide_tensor_view gin = fview(y, 3, DIMS(2, 4, 2)), gout = fview(dx, 3, DIMS(3, 4, 5));
    for (int i = 0; i < 60; i++)
        dx[i] = NAN;
    run(&t, &gin, 1, &gout, 1);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            for (int k = 0; k < 5; k++) {
                int idx = (i * 4 + j) * 5 + k;
                bool inside = i >= 1 && k >= 2 && k < 4;
                assert_true(dx[idx] == (inside ? x[idx] : 0.0f));
            }
        }
    }

    /*
     * A begin outside the input never reaches the kernel: infer refuses it
     * (test_infer.c, test_slice and test_slice_grad), and the kernel asserts it.
     */
}

/* ============================================================================
 * Convolution
 * ========================================================================== */

/* x [n, c, h, w], w [k, c / g, r, s]: g channel groups; taps dh rows and dw columns apart. */
struct conv_case {
    int64_t n, c, h, w, k, r, s, sh, sw, ph, pw, g, dh, dw;
};

static int64_t out_dim(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation)
{
    return (in + 2 * pad - ((k - 1) * dilation + 1)) / stride + 1;
}

/*
 * Direct convolution in double: output channel k of group k / (K / G) sums
 * over that group's C / G input channels, filter channel c of them; tap
 * (r, q) of output (i, j) reads input (i * sh - ph + r * dh, j * sw - pw +
 * q * dw).
 */
static void naive_conv(const struct conv_case *cc, const float *x, const float *w, double *y)
{
    int64_t oh = out_dim(cc->h, cc->r, cc->sh, cc->ph, cc->dh);
    int64_t ow = out_dim(cc->w, cc->s, cc->sw, cc->pw, cc->dw);
    int64_t cg = cc->c / cc->g, kg = cc->k / cc->g;
    for (int64_t n = 0; n < cc->n; n++)
        for (int64_t k = 0; k < cc->k; k++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double s = 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < cc->r; r++)
                            for (int64_t q = 0; q < cc->s; q++) {
                                int64_t ih = i * cc->sh - cc->ph + r * cc->dh;
                                int64_t iw = j * cc->sw - cc->pw + q * cc->dw;
                                if (ih < 0 || ih >= cc->h || iw < 0 || iw >= cc->w)
                                    continue;
                                int64_t xc = k / kg * cg + c;
                                s += (double)x[((n * cc->c + xc) * cc->h + ih) * cc->w + iw] *
                                     w[((k * cg + c) * cc->r + r) * cc->s + q];
                            }
                    y[((n * cc->k + k) * oh + i) * ow + j] = s;
                }
}

/* The gradients of the direct convolution in double: dx and dw from dy. */
static void naive_conv_grads(const struct conv_case *cc, const float *x, const float *w,
                             const float *dy, double *dx, double *dw)
{
    int64_t oh = out_dim(cc->h, cc->r, cc->sh, cc->ph, cc->dh);
    int64_t ow = out_dim(cc->w, cc->s, cc->sw, cc->pw, cc->dw);
    int64_t cg = cc->c / cc->g, kg = cc->k / cc->g;
    memset(dx, 0, (size_t)(cc->n * cc->c * cc->h * cc->w) * sizeof(double));
    memset(dw, 0, (size_t)(cc->k * cg * cc->r * cc->s) * sizeof(double));
    for (int64_t n = 0; n < cc->n; n++)
        for (int64_t k = 0; k < cc->k; k++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double g = dy[((n * cc->k + k) * oh + i) * ow + j];
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t r = 0; r < cc->r; r++)
                            for (int64_t q = 0; q < cc->s; q++) {
                                int64_t ih = i * cc->sh - cc->ph + r * cc->dh;
                                int64_t iw = j * cc->sw - cc->pw + q * cc->dw;
                                if (ih < 0 || ih >= cc->h || iw < 0 || iw >= cc->w)
                                    continue;
                                int64_t xc = k / kg * cg + c;
                                int64_t xi = ((n * cc->c + xc) * cc->h + ih) * cc->w + iw;
                                int64_t wi = ((k * cg + c) * cc->r + r) * cc->s + q;
                                dx[xi] += g * w[wi];
                                dw[wi] += g * x[xi];
                            }
                }
}

static void set_conv_attrs(struct test_node *t, const struct conv_case *cc)
{
    int strides_k, pads_k, group_k, dilations_k;
    switch (t->node.op) {
    case TIDE_OP_CONV2D:
        strides_k = TIDE_ATTR_CONV2D_strides;
        pads_k = TIDE_ATTR_CONV2D_pads;
        group_k = TIDE_ATTR_CONV2D_group;
        dilations_k = TIDE_ATTR_CONV2D_dilations;
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        strides_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides;
        pads_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads;
        group_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_group;
        dilations_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations;
        set_shape(t, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, 4,
                  DIMS(cc->n, cc->c, cc->h, cc->w));
        break;
    default:
        strides_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides;
        pads_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads;
        group_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_group;
        dilations_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations;
        set_shape(t, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, 4,
                  DIMS(cc->k, cc->c / cc->g, cc->r, cc->s));
        break;
    }
    set_pair(t, strides_k, cc->sh, cc->sw);
    set_pair(t, pads_k, cc->ph, cc->pw);
    t->attrs[group_k].i = cc->g;
    set_pair(t, dilations_k, cc->dh, cc->dw);
}

/* Runs Conv2D and both gradients of one case against the naive versions. */
static void check_conv_case(const struct conv_case *cc)
{
    int64_t oh = out_dim(cc->h, cc->r, cc->sh, cc->ph, cc->dh);
    int64_t ow = out_dim(cc->w, cc->s, cc->sw, cc->pw, cc->dw);
    int64_t nx = cc->n * cc->c * cc->h * cc->w, nw = cc->k * cc->c / cc->g * cc->r * cc->s;
    int64_t ny = cc->n * cc->k * oh * ow;
    float *x = falloc(nx), *w = falloc(nw), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw);
    double *want_y = dalloc(ny), *want_dx = dalloc(nx), *want_dw = dalloc(nw);
    fill(x, nx, 21);
    fill(w, nw, 22);
    fill(dy, ny, 23);
    naive_conv(cc, x, w, want_y);
    naive_conv_grads(cc, x, w, dy, want_dx, want_dw);

    const int64_t *xd = DIMS(cc->n, cc->c, cc->h, cc->w);
    const int64_t *wd = DIMS(cc->k, cc->c / cc->g, cc->r, cc->s);
    const int64_t *yd = DIMS(cc->n, cc->k, oh, ow);
    struct test_node t;

    node_init(&t, TIDE_OP_CONV2D, "conv");
    set_conv_attrs(&t, cc);
    struct tide_tensor_view fin[2] = {fview(x, 4, xd), fview(w, 4, wd)};
    struct tide_tensor_view fout = fview(y, 4, yd);
    run(&t, fin, 2, &fout, 1);
    expect_close("conv2d", y, want_y, ny, 1e-4, 1e-5);

    node_init(&t, TIDE_OP_CONV2D_BACKPROP_INPUT, "conv_dx");
    set_conv_attrs(&t, cc);
    struct tide_tensor_view iin[2] = {fview(dy, 4, yd), fview(w, 4, wd)};
    struct tide_tensor_view iout = fview(dx, 4, xd);
    for (int64_t i = 0; i < nx; i++)
        dx[i] = NAN;
    run(&t, iin, 2, &iout, 1);
    expect_close("conv2d_backprop_input", dx, want_dx, nx, 1e-4, 1e-5);

    node_init(&t, TIDE_OP_CONV2D_BACKPROP_FILTER, "conv_dw");
    set_conv_attrs(&t, cc);
    struct tide_tensor_view win[2] = {fview(x, 4, xd), fview(dy, 4, yd)};
    struct tide_tensor_view wout = fview(dw, 4, wd);
    for (int64_t i = 0; i < nw; i++)
        dw[i] = NAN;
    run(&t, win, 2, &wout, 1);
    expect_close("conv2d_backprop_filter", dw, want_dw, nw, 1e-4, 1e-5);

    free(x), free(w), free(y), free(dy), free(dx), free(dw);
    free(want_y), free(want_dx), free(want_dw);
}

static void test_conv2d(void **state)
{
    (void)state;
    static const struct conv_case cases[] = {
        /* n  c  h  w  k  r  s  sh sw ph pw g  dh dw */
        {2, 3, 7, 6, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1}, /* stride 2, padding 1 */
        {2, 3, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1}, /* "same" padding */
        {1, 2, 6, 7, 3, 2, 3, 1, 2, 0, 1, 1, 1, 1}, /* non-square kernel, mixed strides and pads */
        {3, 3, 4, 4, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1}, /* pointwise: no im2col */
        {2, 2, 5, 5, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1}, /* 1x1 with stride 2: im2col */
        {1, 1, 3, 3, 2, 3, 3, 1, 1, 2, 2, 1, 1, 1}, /* padding larger than half the kernel */
        {2, 6, 6, 5, 4, 3, 3, 1, 1, 1, 1, 2, 1, 1}, /* 2 groups of 3 channels into 2 filters each */
        {3, 4, 7, 7, 4, 3, 3, 2, 2, 1, 1, 4, 1, 1}, /* depthwise, strided */
        {2, 3, 5, 5, 6, 3, 2, 1, 2, 1, 0, 3, 1, 1}, /* depthwise with 2 filters per channel */
        {2, 6, 4, 4, 9, 1, 1, 1, 1, 0, 0, 3, 1, 1}, /* grouped pointwise: no im2col */
        {9, 4, 5, 5, 2, 3, 3, 1, 1, 1, 1, 2, 1, 1}, /* more images than filter-gradient tasks */
        {2, 3, 9, 9, 4, 3, 3, 1, 1, 2, 2, 1, 2, 2}, /* dilation 2, "same" padding (DeepLab) */
        {2, 2, 11, 10, 3, 3, 3, 1, 1, 0, 0, 1, 3, 3}, /* dilation 3, no padding */
        {2, 3, 12, 11, 4, 3, 2, 2, 3, 1, 2, 1, 3, 2}, /* dilations 3 x 2, strides 2 x 3, pads */
        {1, 2, 5, 9, 3, 3, 3, 2, 1, 3, 1, 1, 2, 3},   /* padding larger than the dilated half */
        {2, 6, 10, 9, 4, 3, 3, 2, 1, 1, 2, 2, 2, 2},  /* 2 groups, dilated, strided */
        {2, 4, 9, 9, 8, 3, 3, 1, 2, 2, 1, 4, 2, 3},   /* depthwise x2, dilations 2 x 3 */
        {2, 3, 1, 13, 4, 1, 3, 1, 1, 0, 2, 1, 1, 4},  /* 1-D: a 1 x 3 filter dilated 4 (WaveNet) */
        {3, 2, 6, 6, 3, 1, 1, 2, 1, 0, 0, 1, 5, 5},   /* 1x1 filter: its dilation moot */
        {9, 4, 7, 7, 2, 2, 2, 1, 1, 1, 1, 2, 3, 2},   /* even filter, dilated, 9 images */
    };
    /* oneDNN's convolutions where this build has them, then the CPU kernels' own. */
    for (int onednn = tide_cpu_kernels_onednn_available(); onednn >= 0; onednn--) {
        tide_cpu_kernels_use_onednn(onednn);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
            check_conv_case(&cases[i]);
    }
    tide_cpu_kernels_use_onednn(true);
}

static void test_conv2d_invalid(void **state)
{
    (void)state;
    float x[16] = {0}, w[4] = {0}, y[9];
    struct test_node t;
    struct tide_tensor_view in[2] = {fview(x, 4, DIMS(1, 1, 4, 4)), fview(w, 4, DIMS(1, 1, 2, 2))};
    struct tide_tensor_view out = fview(y, 4, DIMS(1, 1, 3, 3));
    struct tide_error err = {0};
    /*
     * Strides of the wrong length, a zero stride, or strides that disagree
     * with the output shape never reach the kernel: infer refuses the first
     * two and computes the output from the strides (test_infer.c,
     * test_conv2d), and the kernel asserts it.
     */
    /* Absent strides and pads mean [1, 1] and [0, 0], as infer would write. */
    node_init(&t, TIDE_OP_CONV2D, "conv");
    run(&t, in, 2, &out, 1);

    /* A kernel that needs workspace refuses to run without it. */
    struct test_node t2;
    node_init(&t2, TIDE_OP_CONV2D, "conv");
    set_pair(&t2, TIDE_ATTR_CONV2D_strides, 1, 1);
    set_pair(&t2, TIDE_ATTR_CONV2D_pads, 0, 0);
    t2.node.n_inputs = 2;
    t2.node.n_outputs = 1;
    struct tide_kernel_args args = {
        .node = &t2.node, .n_inputs = 2, .inputs = in, .n_outputs = 1, .outputs = &out};
    assert_int_equal(tide_cpu_kernels.fn[TIDE_OP_CONV2D](&args, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "workspace"));
}

/* ============================================================================
 * Pooling
 * ========================================================================== */

static void pool_attrs(struct test_node *t, int64_t k, int64_t s, int64_t p)
{
    int ksize_k, strides_k, pads_k;
    switch (t->node.op) {
    case TIDE_OP_MAX_POOL2D:
        ksize_k = TIDE_ATTR_MAX_POOL2D_ksize;
        strides_k = TIDE_ATTR_MAX_POOL2D_strides;
        pads_k = TIDE_ATTR_MAX_POOL2D_pads;
        break;
    case TIDE_OP_AVG_POOL2D:
        ksize_k = TIDE_ATTR_AVG_POOL2D_ksize;
        strides_k = TIDE_ATTR_AVG_POOL2D_strides;
        pads_k = TIDE_ATTR_AVG_POOL2D_pads;
        break;
    case TIDE_OP_MAX_POOL2D_GRAD:
        ksize_k = TIDE_ATTR_MAX_POOL2D_GRAD_ksize;
        strides_k = TIDE_ATTR_MAX_POOL2D_GRAD_strides;
        pads_k = TIDE_ATTR_MAX_POOL2D_GRAD_pads;
        break;
    default:
        ksize_k = TIDE_ATTR_AVG_POOL2D_GRAD_ksize;
        strides_k = TIDE_ATTR_AVG_POOL2D_GRAD_strides;
        pads_k = TIDE_ATTR_AVG_POOL2D_GRAD_pads;
        break;
    }
    set_pair(t, ksize_k, k, k);
    set_pair(t, strides_k, s, s);
    set_pair(t, pads_k, p, p);
}

/*
 * MaxPool2D of x (argmax into a buffer of its own), then MaxPool2DGrad of
 * dy through that argmax into dx: the pair a training graph runs. x and dx
 * have x's shape, dy MaxPool2D's output shape.
 */
static void run_max_pool_grad(int64_t k, int64_t stride, int64_t pad,
                              const struct tide_tensor_view *x, const struct tide_tensor_view *dy,
                              const struct tide_tensor_view *dx)
{
    int64_t n = tide_shape_numel(&dy->shape);
    float *y = falloc(n);
    int32_t *argmax = malloc((size_t)n * sizeof(int32_t));
    assert_non_null(argmax);
    struct test_node t;
    node_init(&t, TIDE_OP_MAX_POOL2D, "max");
    pool_attrs(&t, k, stride, pad);
    struct tide_tensor_view fwd_out[2] = {fview(y, 4, dy->shape.dims),
                                          view(TIDE_DTYPE_INT32, argmax, 4, dy->shape.dims)};
    run(&t, x, 1, fwd_out, 2);
    node_init(&t, TIDE_OP_MAX_POOL2D_GRAD, "max_grad");
    pool_attrs(&t, k, stride, pad);
    set_shape(&t, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, 4, x->shape.dims);
    struct tide_tensor_view grad_in[2] = {*dy, fwd_out[1]};
    run(&t, grad_in, 2, dx, 1);
    free(y), free(argmax);
}

static void test_pools(void **state)
{
    (void)state;
    /* 3x3 input, 2x2 windows, stride 2, padding 1: four windows clipped to 1, 2, 2, 4 cells. */
    float x[9], y[4];
    int32_t argmax[4];
    for (int i = 0; i < 9; i++)
        x[i] = -(float)(i + 1);
    struct tide_tensor_view in = fview(x, 4, DIMS(1, 1, 3, 3)), out = fview(y, 4, DIMS(1, 1, 2, 2));
    struct tide_tensor_view max_out[2] = {out, view(TIDE_DTYPE_INT32, argmax, 4, DIMS(1, 1, 2, 2))};
    struct test_node t;
    node_init(&t, TIDE_OP_MAX_POOL2D, "max");
    pool_attrs(&t, 2, 2, 1);
    run(&t, &in, 1, max_out, 2);
    /* All values are negative: a padding cell read as 0 would win. */
    const float max_want[4] = {-1, -2, -4, -5};
    expect_closef("max_pool", y, max_want, 4, 0);
    /* The argmax: each maximum's index in the 3x3 plane. */
    assert_memory_equal(argmax, ((const int32_t[]){0, 1, 3, 4}), sizeof(argmax));

    for (int i = 0; i < 9; i++)
        x[i] = (float)(i + 1);
    node_init(&t, TIDE_OP_AVG_POOL2D, "avg");
    pool_attrs(&t, 2, 2, 1);
    run(&t, &in, 1, &out, 1);
    /* Padding cells are not counted: 1/1, (2+3)/2, (4+7)/2, (5+6+8+9)/4. */
    const float avg_want[4] = {1, 2.5f, 5.5f, 7};
    expect_closef("avg_pool", y, avg_want, 4, 0);

    /* Overlapping windows without padding, 2 planes: 3x3 -> 2x2 with stride 1. */
    float x2[18] = {1, 5, 2, 3, 4, 6, 0, 7, 1, 9, 8, 7, 6, 5, 4, 3, 2, 1}, y2[8];
    struct tide_tensor_view in2 = fview(x2, 4, DIMS(1, 2, 3, 3));
    int32_t argmax2[8];
    struct tide_tensor_view out2[2] = {fview(y2, 4, DIMS(1, 2, 2, 2)),
                                       view(TIDE_DTYPE_INT32, argmax2, 4, DIMS(1, 2, 2, 2))};
    node_init(&t, TIDE_OP_MAX_POOL2D, "max");
    pool_attrs(&t, 2, 1, 0);
    run(&t, &in2, 1, out2, 2);
    const float max2[8] = {5, 6, 7, 7, 9, 8, 6, 5};
    expect_closef("max_pool overlap", y2, max2, 8, 0);
    assert_memory_equal(argmax2, ((const int32_t[]){1, 5, 7, 7, 0, 1, 3, 4}), sizeof(argmax2));

    /* GlobalAvgPool: [1, 2, 3, 3] -> [1, 2]. */
    float g[2];
    struct tide_tensor_view gout = fview(g, 2, DIMS(1, 2));
    node_init(&t, TIDE_OP_GLOBAL_AVG_POOL, "gap");
    run(&t, &in2, 1, &gout, 1);
    const float gap[2] = {29.0f / 9, 45.0f / 9};
    expect_closef("global_avg_pool", g, gap, 2, 1e-7);
}

static void test_pool_grads(void **state)
{
    (void)state;
    struct test_node t;
    /* MaxPool2DGrad routes dy to the first maximum; overlapping windows accumulate. */
    float x[9] = {1, 5, 2, 3, 4, 6, 0, 7, 1}, dy[4] = {1, 2, 3, 4}, dx[9];
    struct tide_tensor_view in = fview(x, 4, DIMS(1, 1, 3, 3)),
                            dyv = fview(dy, 4, DIMS(1, 1, 2, 2));
    struct tide_tensor_view out = fview(dx, 4, DIMS(1, 1, 3, 3));
    run_max_pool_grad(2, 1, 0, &in, &dyv, &out);
    const float want[9] = {0, 1, 0, 0, 0, 2, 0, 7, 0};
    expect_closef("max_pool_grad", dx, want, 9, 0);

    /* Ties go to the first maximum in row-major order. */
    float tie[4] = {2, 2, 2, 2}, tdy = 3, tdx[4];
    struct tide_tensor_view tin = fview(tie, 4, DIMS(1, 1, 2, 2));
    struct tide_tensor_view tdyv = fview(&tdy, 4, DIMS(1, 1, 1, 1));
    struct tide_tensor_view tout = fview(tdx, 4, DIMS(1, 1, 2, 2));
    run_max_pool_grad(2, 2, 0, &tin, &tdyv, &tout);
    const float tie_want[4] = {3, 0, 0, 0};
    expect_closef("max_pool_grad tie", tdx, tie_want, 4, 0);

    /* With padding, a window's maximum is never a padding cell. */
    float neg[9], ndx[9];
    for (int i = 0; i < 9; i++)
        neg[i] = -(float)(i + 1);
    struct tide_tensor_view nin = fview(neg, 4, DIMS(1, 1, 3, 3));
    struct tide_tensor_view nout = fview(ndx, 4, DIMS(1, 1, 3, 3));
    run_max_pool_grad(2, 2, 1, &nin, &dyv, &nout);
    const float neg_want[9] = {1, 2, 0, 3, 4, 0, 0, 0, 0};
    expect_closef("max_pool_grad padded", ndx, neg_want, 9, 0);

    /* An argmax outside its plane (any int32 tensor may be fed in) is refused, not written. */
    int32_t bad[4] = {0, 1, 9, 3};
    struct tide_tensor_view bin[2] = {dyv, view(TIDE_DTYPE_INT32, bad, 4, DIMS(1, 1, 2, 2))};
    node_init(&t, TIDE_OP_MAX_POOL2D_GRAD, "max_grad");
    pool_attrs(&t, 2, 2, 1);
    set_shape(&t, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, 4, DIMS(1, 1, 3, 3));
    struct tide_error err = {0};
    assert_int_equal(run_step(&t, bin, 2, &out, 1, NULL, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "input 1 (argmax): index 9 at position 2 is outside its "
                                        "plane of 3 x 3 cells"));

    /* AvgPool2DGrad spreads dy over the real cells only: counts 1, 2, 2, 4. */
    node_init(&t, TIDE_OP_AVG_POOL2D_GRAD, "avg_grad");
    pool_attrs(&t, 2, 2, 1);
    set_shape(&t, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, 4, DIMS(1, 1, 3, 3));
    struct tide_tensor_view ain = fview(dy, 4, DIMS(1, 1, 2, 2));
    run(&t, &ain, 1, &out, 1);
    const float avg_want[9] = {1, 1, 1, 1.5f, 1, 1, 1.5f, 1, 1};
    expect_closef("avg_pool_grad", dx, avg_want, 9, 0);

    /* GlobalAvgPoolGrad: dy / (H * W) everywhere. */
    float gdy[2] = {4, -8}, gdx[8];
    node_init(&t, TIDE_OP_GLOBAL_AVG_POOL_GRAD, "gap_grad");
    set_shape(&t, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, 4, DIMS(1, 2, 2, 2));
    struct tide_tensor_view gin = fview(gdy, 2, DIMS(1, 2));
    struct tide_tensor_view gout = fview(gdx, 4, DIMS(1, 2, 2, 2));
    run(&t, &gin, 1, &gout, 1);
    const float gap_want[8] = {1, 1, 1, 1, -2, -2, -2, -2};
    expect_closef("global_avg_pool_grad", gdx, gap_want, 8, 0);
}

/* ============================================================================
 * Batch normalisation
 * ========================================================================== */

static void test_batch_norm(void **state)
{
    (void)state;
    /* x [2, 2, 1, 2]: channel 0 holds 1, 3, 5, 7 (mean 4, variance 5), channel 1 only 2s. */
    float x[8] = {1, 3, 2, 2, 5, 7, 2, 2}, gamma[2] = {2, 1}, beta[2] = {0.5f, -1};
    float y[8], mean[2], inv_std[2];
    struct tide_tensor_view in[3] = {fview(x, 4, DIMS(2, 2, 1, 2)), fview(gamma, 1, DIMS(2)),
                                     fview(beta, 1, DIMS(2))};
    struct tide_tensor_view out[3] = {fview(y, 4, DIMS(2, 2, 1, 2)), fview(mean, 1, DIMS(2)),
                                      fview(inv_std, 1, DIMS(2))};
    struct test_node t;
    node_init(&t, TIDE_OP_BATCH_NORM, "bn");
    t.attrs[TIDE_ATTR_BATCH_NORM_epsilon].f = 1e-3;
    run(&t, in, 3, out, 3);
    double inv0 = 1 / sqrt(5 + 1e-3), inv1 = 1 / sqrt(1e-3);
    const double want_mean[2] = {4, 2}, want_inv[2] = {inv0, inv1};
    expect_close("bn mean", mean, want_mean, 2, 1e-7, 0);
    expect_close("bn inv_std", inv_std, want_inv, 2, 1e-6, 0);
    double want_y[8];
    for (int i = 0; i < 8; i++) {
        int c = (i / 2) % 2;
        want_y[i] = gamma[c] * (x[i] - want_mean[c]) * want_inv[c] + beta[c];
    }
    expect_close("bn y", y, want_y, 8, 1e-6, 1e-6);

    /* Rank 2 [N, C]; a large mean does not swamp the variance. */
    float x2[6] = {1000, 1, 1002, 2, 1004, 6}, y2[6];
    in[0] = fview(x2, 2, DIMS(3, 2));
    out[0] = fview(y2, 2, DIMS(3, 2));
    run(&t, in, 3, out, 3);
    const double mean2[2] = {1002, 3};
    const double inv2[2] = {1 / sqrt(8.0 / 3 + 1e-3), 1 / sqrt(14.0 / 3 + 1e-3)};
    expect_close("bn mean 2d", mean, mean2, 2, 1e-7, 0);
    expect_close("bn inv_std 2d", inv_std, inv2, 2, 1e-6, 0);

    /*
     * Runs long enough for the float lanes, several stretches of them and a
     * tail (1,443 elements a run: 90 blocks of 16, flushed after 32, 64 and
     * 90, and 3 left over), on values of 1000 + [-1, 1): the statistics
     * hold within 1e-6 of double's.
     */
    enum { N = 3, C = 2, H = 37, W = 39, HW = H * W, TOTAL = N * C * HW };
    float *x3 = falloc(TOTAL), *y3 = falloc(TOTAL);
    fill(x3, TOTAL, 33);
    for (int i = 0; i < TOTAL; i++)
        x3[i] += 1000;
    in[0] = fview(x3, 4, DIMS(N, C, H, W));
    out[0] = fview(y3, 4, DIMS(N, C, H, W));
    run(&t, in, 3, out, 3);
    double mean3[C], inv3[C];
    for (int c = 0; c < C; c++) {
        double s = 0, sq = 0;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++)
                s += x3[(n * C + c) * HW + j];
        mean3[c] = s / (N * HW);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++)
                sq += pow(x3[(n * C + c) * HW + j] - mean3[c], 2);
        inv3[c] = 1 / sqrt(sq / (N * HW) + 1e-3);
    }
    expect_close("bn mean lanes", mean, mean3, C, 1e-7, 0);
    expect_close("bn inv_std lanes", inv_std, inv3, C, 1e-6, 0);
    free(x3), free(y3);
}

static void test_batch_norm_grad(void **state)
{
    (void)state;
    enum { N = 3, C = 2, HW = 4, TOTAL = N * C * HW };
    float dy[TOTAL], x[TOTAL], gamma[C] = {1.5f, -0.5f}, mean[C], inv_std[C];
    float dx[TOTAL], dgamma[C], dbeta[C];
    fill(dy, TOTAL, 31);
    fill(x, TOTAL, 32);
    /* The statistics BatchNorm would produce, computed here in double. */
    for (int c = 0; c < C; c++) {
        double s = 0, sq = 0;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++)
                s += x[(n * C + c) * HW + j];
        double m = s / (N * HW);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++)
                sq += pow(x[(n * C + c) * HW + j] - m, 2);
        mean[c] = (float)m;
        inv_std[c] = (float)(1 / sqrt(sq / (N * HW) + 1e-5));
    }
    double want_dx[TOTAL], want_dgamma[C], want_dbeta[C];
    for (int c = 0; c < C; c++) {
        double db = 0, dg = 0, m = N * HW;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++) {
                int i = (n * C + c) * HW + j;
                db += dy[i];
                dg += dy[i] * (x[i] - mean[c]) * inv_std[c];
            }
        want_dbeta[c] = db;
        want_dgamma[c] = dg;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++) {
                int i = (n * C + c) * HW + j;
                double xhat = (x[i] - mean[c]) * inv_std[c];
                want_dx[i] = gamma[c] * inv_std[c] / m * (m * dy[i] - db - xhat * dg);
            }
    }
    const int64_t *xd = DIMS(N, C, 2, 2);
    struct tide_tensor_view in[5] = {fview(dy, 4, xd), fview(x, 4, xd), fview(gamma, 1, DIMS(C)),
                                     fview(mean, 1, DIMS(C)), fview(inv_std, 1, DIMS(C))};
    struct tide_tensor_view out[3] = {fview(dx, 4, xd), fview(dgamma, 1, DIMS(C)),
                                      fview(dbeta, 1, DIMS(C))};
    struct test_node t;
    node_init(&t, TIDE_OP_BATCH_NORM_GRAD, "bn_grad");
    run(&t, in, 5, out, 3);
    expect_close("bn dgamma", dgamma, want_dgamma, C, 1e-5, 1e-6);
    expect_close("bn dbeta", dbeta, want_dbeta, C, 1e-5, 1e-6);
    expect_close("bn dx", dx, want_dx, TOTAL, 1e-4, 1e-5);
}

/* ============================================================================
 * Optimizers
 * ========================================================================== */

static void test_optimizers(void **state)
{
    (void)state;
    const float g1[3] = {0.5f, -1, 2}, g2[3] = {-0.25f, 0.75f, 1};
    const float var0[3] = {1, 2, 3};
    const float *grads[2] = {g1, g2};
    struct test_node t;
    float var[3], accum[3], m[3], v[3], g[3];
    double want[3];

    /* SGD: var - lr * (g1 + g2). */
    memcpy(var, var0, sizeof(var));
    node_init(&t, TIDE_OP_APPLY_SGD, "sgd");
    t.attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f = 0.1;
    struct tide_tensor_view sin[2] = {fview(var, 1, DIMS(3)), fview(g, 1, DIMS(3))};
    for (int s = 0; s < 2; s++) {
        memcpy(g, grads[s], sizeof(g));
        run(&t, sin, 2, NULL, 0);
    }
    for (int i = 0; i < 3; i++)
        want[i] = var0[i] - 0.1 * (g1[i] + g2[i]);
    expect_close("sgd", var, want, 3, 1e-6, 1e-7);

    /* Momentum: a1 = g1, a2 = mu * g1 + g2; var - lr * (a1 + a2); Nesterov adds mu * a. */
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        memcpy(var, var0, sizeof(var));
        memset(accum, 0, sizeof(accum));
        node_init(&t, TIDE_OP_APPLY_MOMENTUM, "momentum");
        t.attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f = 0.1;
        t.attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f = 0.9;
        t.attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b = nesterov;
        struct tide_tensor_view min[3] = {fview(var, 1, DIMS(3)), fview(accum, 1, DIMS(3)),
                                          fview(g, 1, DIMS(3))};
        for (int s = 0; s < 2; s++) {
            memcpy(g, grads[s], sizeof(g));
            run(&t, min, 3, NULL, 0);
        }
        for (int i = 0; i < 3; i++) {
            double a1 = g1[i], a2 = 0.9 * g1[i] + g2[i];
            want[i] = nesterov ? var0[i] - 0.1 * (g1[i] + 0.9 * a1) - 0.1 * (g2[i] + 0.9 * a2)
                               : var0[i] - 0.1 * (a1 + a2);
            assert_true(fabs(accum[i] - a2) < 1e-6);
        }
        expect_close("momentum", var, want, 3, 1e-6, 1e-7);
    }

    /* Adam: two steps of the closed form with bias correction. */
    memcpy(var, var0, sizeof(var));
    memset(m, 0, sizeof(m));
    memset(v, 0, sizeof(v));
    node_init(&t, TIDE_OP_APPLY_ADAM, "adam");
    t.attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f = 0.01;
    struct tide_tensor_view ain[4] = {fview(var, 1, DIMS(3)), fview(m, 1, DIMS(3)),
                                      fview(v, 1, DIMS(3)), fview(g, 1, DIMS(3))};
    struct tide_error err = {0};
    for (uint64_t step = 1; step <= 2; step++) {
        memcpy(g, grads[step - 1], sizeof(g));
        assert_int_equal(run_step(&t, ain, 4, NULL, 0, &step, &err), TIDE_OK);
    }
    for (int i = 0; i < 3; i++) {
        double b1 = 0.9, b2 = 0.999, eps = 1e-8, x = var0[i], mm = 0, vv = 0;
        for (int s = 1; s <= 2; s++) {
            double gg = grads[s - 1][i];
            mm = b1 * mm + (1 - b1) * gg;
            vv = b2 * vv + (1 - b2) * gg * gg;
            x -= 0.01 * (mm / (1 - pow(b1, s))) / (sqrt(vv / (1 - pow(b2, s))) + eps);
        }
        want[i] = x;
    }
    expect_close("adam", var, want, 3, 1e-6, 1e-6);
    /* Without a step counter Adam refuses to run. */
    assert_int_equal(run_step(&t, ain, 4, NULL, 0, NULL, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"adam\""));
}

/* ============================================================================
 * Determinism across thread counts
 * ========================================================================== */

/*
 * Conv2D and its gradients of 16 channels, 20x20, same-padded 3x3 over 8
 * images, into 32 filters in group groups, with oneDNN on or off at 1
 * thread, at 4, and at 4 in a workspace planned for 1: the three runs must
 * give the same bits.
 */
static void check_conv_determinism(bool onednn, int64_t group, int64_t dilation)
{
    struct conv_case cc = {8, 16, 20, 20, 32, 3, 3, 1, 1, 1, 1, group, 1, 1};
    cc.ph = cc.pw = cc.dh = cc.dw = dilation; /* padding as the dilation keeps 20 x 20 */
    int64_t nx = 8 * 16 * 20 * 20, nw = 32 * (16 / group) * 9, ny = 8 * 32 * 20 * 20;
    float *x = falloc(nx), *w = falloc(nw), *dy = falloc(ny);
    float *y[3], *dx[3], *dw[3];
    const int threads[3] = {1, 4, 4}, planned[3] = {0, 0, 1};
    fill(x, nx, 43);
    fill(w, nw, 44);
    fill(dy, ny, 45);
    const int64_t *xd = DIMS(8, 16, 20, 20), *wd = DIMS(32, 16 / group, 3, 3);
    const int64_t *yd = DIMS(8, 32, 20, 20);
    struct tide_tensor_view cin[2] = {fview(x, 4, xd), fview(w, 4, wd)};
    struct tide_tensor_view iin[2] = {fview(dy, 4, yd), fview(w, 4, wd)};
    struct tide_tensor_view fin[2] = {fview(x, 4, xd), fview(dy, 4, yd)};
    struct test_node conv, input_grad, filter_grad;
    node_init(&conv, TIDE_OP_CONV2D, "conv");
    set_conv_attrs(&conv, &cc);
    node_init(&input_grad, TIDE_OP_CONV2D_BACKPROP_INPUT, "conv_dx");
    set_conv_attrs(&input_grad, &cc);
    node_init(&filter_grad, TIDE_OP_CONV2D_BACKPROP_FILTER, "conv_dw");
    set_conv_attrs(&filter_grad, &cc);
    tide_cpu_kernels_use_onednn(onednn);
    for (int r = 0; r < 3; r++) {
        y[r] = falloc(ny);
        dx[r] = falloc(nx);
        dw[r] = falloc(nw);
        struct tide_tensor_view yo = fview(y[r], 4, yd), dxo = fview(dx[r], 4, xd);
        struct tide_tensor_view dwo = fview(dw[r], 4, wd);
        tide_cpu_kernels_set_threads(threads[r]);
        plan_threads = planned[r];
        run_threads = threads[r];
        run(&conv, cin, 2, &yo, 1);
        run(&input_grad, iin, 2, &dxo, 1);
        run(&filter_grad, fin, 2, &dwo, 1);
        plan_threads = 0;
    }
    tide_cpu_kernels_set_threads(0);
    tide_cpu_kernels_use_onednn(true);
    for (int r = 1; r < 3; r++) {
        if (memcmp(y[0], y[r], (size_t)ny * sizeof(float)) != 0 ||
            memcmp(dx[0], dx[r], (size_t)nx * sizeof(float)) != 0 ||
            memcmp(dw[0], dw[r], (size_t)nw * sizeof(float)) != 0)
            fail_msg("convolution of %" PRId64 " groups, dilation %" PRId64
                     ", %s oneDNN: %d threads (workspace planned for %d) differs from 1",
                     group, dilation, onednn ? "through" : "without", threads[r],
                     planned[r] ? planned[r] : threads[r]);
    }
    for (int r = 0; r < 3; r++)
        free(y[r]), free(dx[r]), free(dw[r]);
    free(x), free(w), free(dy);
}

static void test_determinism_threads(void **state)
{
    (void)state;
    /* MatMul large enough for OpenBLAS to use several threads. */
    enum { M = 300, K = 257, N = 190 };
    float *a = falloc(M * K), *b = falloc(K * N), *y1 = falloc(M * N), *y4 = falloc(M * N);
    fill(a, M * K, 41);
    fill(b, K * N, 42);
    struct test_node t;
    node_init(&t, TIDE_OP_MATMUL, "mm");
    struct tide_tensor_view in[2] = {fview(a, 2, DIMS(M, K)), fview(b, 2, DIMS(K, N))};
    struct tide_tensor_view o1 = fview(y1, 2, DIMS(M, N)), o4 = fview(y4, 2, DIMS(M, N));
    tide_cpu_kernels_set_threads(1);
    run(&t, in, 2, &o1, 1);
    tide_cpu_kernels_set_threads(4);
    run(&t, in, 2, &o4, 1);
    assert_memory_equal(y1, y4, (size_t)M * N * sizeof(float));
    free(a), free(b), free(y1), free(y4);

    /*
     * Conv2D and its gradients, same-padded 3x3 on a batch, dense, in 4
     * groups and depthwise-like (16 groups of one channel), through oneDNN
     * (where built) and through the CPU kernels' own: the same bits with 1
     * and 4 threads, and with 4 threads in a workspace sized for 1 (a plan
     * made before the pool grew).
     */
    for (int onednn = tide_cpu_kernels_onednn_available(); onednn >= 0; onednn--) {
        check_conv_determinism(onednn, 1, 1);
        check_conv_determinism(onednn, 4, 1);
        check_conv_determinism(onednn, 16, 1);
        check_conv_determinism(onednn, 1, 2);
        check_conv_determinism(onednn, 4, 3);
    }

    /* The pools run on the thread pool too. */
    int64_t np = 8 * 16 * 20 * 20, no = 8 * 16 * 10 * 10;
    const int64_t *xd = DIMS(8, 16, 20, 20);
    float *px = falloc(np), *pdy = falloc(no), *pdx[2];
    fill(px, np, 46);
    fill(pdy, no, 47);
    struct tide_tensor_view pin = fview(px, 4, xd), pdyv = fview(pdy, 4, DIMS(8, 16, 10, 10));
    for (int r = 0; r < 2; r++) {
        pdx[r] = falloc(np);
        struct tide_tensor_view pout = fview(pdx[r], 4, xd);
        tide_cpu_kernels_set_threads(r ? 4 : 1);
        run_max_pool_grad(3, 2, 1, &pin, &pdyv, &pout);
    }
    tide_cpu_kernels_set_threads(0);
    assert_memory_equal(pdx[0], pdx[1], (size_t)np * sizeof(float));
    free(px), free(pdy), free(pdx[0]), free(pdx[1]);
}

/*
 * The range jobs: the element-wise kernels, the reductions, BatchNorm, the
 * optimizer updates and the global pools split their work into pieces of
 * about 16384 elements (TIDE__CPU_GRAIN), rows, planes or channels, that
 * depend on the shapes only. Each case below is large enough for several
 * pieces, with odd sizes so that the last piece is short. It runs at 1, 2
 * and 3 threads of the pool, each time on fresh copies of the inputs (the
 * updates write them) into outputs filled with garbage, and every output and
 * written input must be byte for byte the same at each count. The 1-thread
 * result is also checked against a naive computation, so that pieces that
 * skip or repeat elements fail even when every thread count agrees.
 */

/* The thread counts each case runs at; the first run's results are kept. */
static const int range_threads[] = {1, 2, 3};
#define RANGE_RUNS ((int)(sizeof(range_threads) / sizeof(range_threads[0])))

/*
 * Runs t at each count of range_threads and fails unless the runs agree to
 * the byte. in[] is left untouched; the first run's outputs are copied into
 * out[]'s data, and when in_after is not NULL, in_after[i] gets the first
 * run's input i after the kernel ran (malloc'd; the caller frees it).
 */
static void expect_same_at_threads(const char *what, struct test_node *t,
                                   const struct tide_tensor_view *in, uint32_t n_in,
                                   const struct tide_tensor_view *out, uint32_t n_out,
                                   const uint64_t *step, float **in_after)
{
    void *first_in[MAX_IO] = {0}, *first_out[MAX_IO] = {0};
    for (int r = 0; r < RANGE_RUNS; r++) {
        struct tide_tensor_view ins[MAX_IO], outs[MAX_IO];
        for (uint32_t i = 0; i < n_in; i++) {
            ins[i] = in[i];
            ins[i].data = malloc(in[i].nbytes);
            assert_non_null(ins[i].data);
            memcpy(ins[i].data, in[i].data, in[i].nbytes);
        }
        for (uint32_t o = 0; o < n_out; o++) {
            outs[o] = out[o];
            outs[o].data = malloc(out[o].nbytes);
            assert_non_null(outs[o].data);
            memset(outs[o].data, 0xa5, out[o].nbytes);
        }
        tide_cpu_kernels_set_threads(range_threads[r]);
        struct tide_error err = {0};
        enum tide_status st = run_step(t, ins, n_in, outs, n_out, step, &err);
        if (st != TIDE_OK)
            fail_msg("%s at %d threads: %s", what, range_threads[r], err.message);
        for (uint32_t i = 0; i < n_in; i++) {
            if (r == 0) {
                first_in[i] = ins[i].data;
                continue;
            }
            if (memcmp(ins[i].data, first_in[i], in[i].nbytes) != 0)
                fail_msg("%s: input %u as written at %d threads differs from 1 thread", what, i,
                         range_threads[r]);
            free(ins[i].data);
        }
        for (uint32_t o = 0; o < n_out; o++) {
            if (r == 0) {
                first_out[o] = outs[o].data;
                continue;
            }
            if (memcmp(outs[o].data, first_out[o], out[o].nbytes) != 0)
                fail_msg("%s: output %u at %d threads differs from 1 thread", what, o,
                         range_threads[r]);
            free(outs[o].data);
        }
    }
    tide_cpu_kernels_set_threads(0);
    for (uint32_t o = 0; o < n_out; o++) {
        memcpy(out[o].data, first_out[o], out[o].nbytes);
        free(first_out[o]);
    }
    for (uint32_t i = 0; i < n_in; i++) {
        if (in_after)
            in_after[i] = first_in[i];
        else
            free(first_in[i]);
    }
}

/* Fails unless got[i] == want[i] for every i, bit for bit. */
static void expect_exact(const char *what, const float *got, const float *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
            fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, got[i], want[i]);
    }
}

static void test_range_jobs_elementwise(void **state)
{
    (void)state;
    struct test_node t;
    /* Equal shapes: one contiguous range of 100003 elements. */
    enum { N = 100003 };
    float *a = falloc(N), *b = falloc(N), *c = falloc(N), *y = falloc(N), *want = falloc(N);
    double *dwant = dalloc(N);
    fill(a, N, 61);
    fill(b, N, 62);
    fill(c, N, 63);
    struct tide_tensor_view in[3] = {fview(a, 1, DIMS(N)), fview(b, 1, DIMS(N)),
                                     fview(c, 1, DIMS(N))};
    struct tide_tensor_view out = fview(y, 1, DIMS(N));
    static const enum tide_op binary_ops[3] = {TIDE_OP_ADD, TIDE_OP_SUB, TIDE_OP_MUL};
    for (int k = 0; k < 3; k++) {
        node_init(&t, binary_ops[k], "binary");
        expect_same_at_threads("binary", &t, in, 2, &out, 1, NULL, NULL);
        for (int64_t i = 0; i < N; i++)
            want[i] = k == 0 ? a[i] + b[i] : k == 1 ? a[i] - b[i] : a[i] * b[i];
        expect_exact(tide_op_info(binary_ops[k])->name, y, want, N);
    }
    node_init(&t, TIDE_OP_ADD_N, "add_n");
    expect_same_at_threads("add_n", &t, in, 3, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        want[i] = (a[i] + b[i]) + c[i];
    expect_exact("add_n", y, want, N);

    node_init(&t, TIDE_OP_RELU, "relu");
    expect_same_at_threads("relu", &t, in, 1, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        want[i] = a[i] > 0.0f ? a[i] : 0.0f;
    expect_exact("relu", y, want, N);
    node_init(&t, TIDE_OP_NEG, "neg");
    expect_same_at_threads("neg", &t, in, 1, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        want[i] = -a[i];
    expect_exact("neg", y, want, N);
    node_init(&t, TIDE_OP_SCALE, "scale");
    t.attrs[TIDE_ATTR_SCALE_scale].f = 0.375;
    expect_same_at_threads("scale", &t, in, 1, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        want[i] = a[i] * 0.375f;
    expect_exact("scale", y, want, N);
    node_init(&t, TIDE_OP_SIGMOID, "sigmoid");
    expect_same_at_threads("sigmoid", &t, in, 1, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        dwant[i] = 1.0 / (1.0 + exp(-(double)a[i]));
    expect_close("sigmoid", y, dwant, N, 1e-6, 1e-7);
    node_init(&t, TIDE_OP_TANH, "tanh");
    expect_same_at_threads("tanh", &t, in, 1, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        dwant[i] = tanh((double)a[i]);
    expect_close("tanh", y, dwant, N, 1e-6, 1e-7);

    /* The activation gradients of dy = a at y = b. */
    node_init(&t, TIDE_OP_RELU_GRAD, "relu_grad");
    expect_same_at_threads("relu_grad", &t, in, 2, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        want[i] = b[i] > 0.0f ? a[i] : 0.0f;
    expect_exact("relu_grad", y, want, N);
    node_init(&t, TIDE_OP_SIGMOID_GRAD, "sigmoid_grad");
    expect_same_at_threads("sigmoid_grad", &t, in, 2, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        dwant[i] = (double)a[i] * b[i] * (1.0 - b[i]);
    expect_close("sigmoid_grad", y, dwant, N, 1e-6, 1e-7);
    node_init(&t, TIDE_OP_TANH_GRAD, "tanh_grad");
    expect_same_at_threads("tanh_grad", &t, in, 2, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < N; i++)
        dwant[i] = (double)a[i] * (1.0 - (double)b[i] * b[i]);
    expect_close("tanh_grad", y, dwant, N, 1e-6, 1e-7);
    free(a), free(b), free(c), free(y), free(want), free(dwant);
}

static void test_range_jobs_broadcast(void **state)
{
    (void)state;
    struct test_node t;
    /* [37, 1, 97] + [53, 97] -> [37, 53, 97]: 1961 rows of 97, the pieces start mid-axis. */
    enum { I = 37, J = 53, K = 97 };
    float *a = falloc(I * K), *b = falloc(J * K), *y = falloc(I * J * K), *want = falloc(I * J * K);
    fill(a, I * K, 64);
    fill(b, J * K, 65);
    struct tide_tensor_view in[2] = {fview(a, 3, DIMS(I, 1, K)), fview(b, 2, DIMS(J, K))};
    struct tide_tensor_view out = fview(y, 3, DIMS(I, J, K));
    node_init(&t, TIDE_OP_SUB, "sub");
    expect_same_at_threads("sub broadcast", &t, in, 2, &out, 1, NULL, NULL);
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++)
                want[(i * J + j) * K + k] = a[i * K + k] - b[j * K + k];
    expect_exact("sub broadcast", y, want, I * J * K);

    /* BroadcastTo [I, 1] -> [I, 2011]: rows filled with one value each. */
    enum { W = 2011 };
    float *z = falloc(I * W), *zwant = falloc(I * W);
    struct tide_tensor_view bin = fview(a, 2, DIMS(I, 1)), bout = fview(z, 2, DIMS(I, W));
    node_init(&t, TIDE_OP_BROADCAST_TO, "broadcast_to");
    set_shape(&t, TIDE_ATTR_BROADCAST_TO_shape, 2, DIMS(I, W));
    expect_same_at_threads("broadcast_to", &t, &bin, 1, &bout, 1, NULL, NULL);
    for (int i = 0; i < I; i++)
        for (int w = 0; w < W; w++)
            zwant[i * W + w] = a[i];
    expect_exact("broadcast_to", z, zwant, I * W);

    /* BiasAdd on [7, 13, 37, 41] (planes) and on [4099, 13] (rows). */
    enum { BN = 7, BC = 13, BHW = 37 * 41, ROWS = 4099 };
    float *x = falloc(BN * BC * BHW), *bias = falloc(BC), *by = falloc(BN * BC * BHW);
    float *bwant = falloc(BN * BC * BHW);
    fill(x, BN * BC * BHW, 66);
    fill(bias, BC, 67);
    struct tide_tensor_view bias_in[2] = {fview(x, 4, DIMS(BN, BC, 37, 41)),
                                          fview(bias, 1, DIMS(BC))};
    struct tide_tensor_view bias_out = fview(by, 4, DIMS(BN, BC, 37, 41));
    node_init(&t, TIDE_OP_BIAS_ADD, "bias_add");
    expect_same_at_threads("bias_add planes", &t, bias_in, 2, &bias_out, 1, NULL, NULL);
    for (int64_t i = 0; i < BN * BC * BHW; i++)
        bwant[i] = x[i] + bias[(i / BHW) % BC];
    expect_exact("bias_add planes", by, bwant, BN * BC * BHW);
    bias_in[0] = fview(x, 2, DIMS(ROWS, BC));
    bias_out = fview(by, 2, DIMS(ROWS, BC));
    expect_same_at_threads("bias_add rows", &t, bias_in, 2, &bias_out, 1, NULL, NULL);
    for (int64_t i = 0; i < ROWS * BC; i++)
        bwant[i] = x[i] + bias[i % BC];
    expect_exact("bias_add rows", by, bwant, ROWS * BC);
    free(a), free(b), free(y), free(want), free(z), free(zwant);
    free(x), free(bias), free(by), free(bwant);
}

/* The sum of x [D0, D1, D2] over the axes marked in reduced, in double, row-major over the kept
 * axes. */
static void naive_sum3(const float *x, const int64_t *dims, const bool *reduced, double *want)
{
    int64_t kept[3];
    int64_t n_out = 1;
    for (int d = 0; d < 3; d++) {
        kept[d] = reduced[d] ? 1 : dims[d];
        n_out *= kept[d];
    }
    memset(want, 0, (size_t)n_out * sizeof(double));
    for (int64_t i = 0; i < dims[0]; i++)
        for (int64_t j = 0; j < dims[1]; j++)
            for (int64_t k = 0; k < dims[2]; k++) {
                int64_t o = ((reduced[0] ? 0 : i) * kept[1] + (reduced[1] ? 0 : j)) * kept[2] +
                            (reduced[2] ? 0 : k);
                want[o] += x[(i * dims[1] + j) * dims[2] + k];
            }
}

static void test_range_jobs_reduce(void **state)
{
    (void)state;
    struct test_node t;
    /*
     * x [13, 2003, 7], summed over each set of axes: the pieces divide the
     * outer kept axis ({1}, {2}), the inner one ({0}), the middle one
     * ({0, 2}), or nothing (every axis: one element).
     */
    const int64_t dims[3] = {13, 2003, 7};
    const int64_t total = 13 * 2003 * 7;
    float *x = falloc(total), *y = falloc(total);
    double *want = dalloc(total);
    fill(x, total, 68);
    struct tide_tensor_view in = fview(x, 3, dims);
    static const struct {
        int32_t n_axes;
        int64_t axes[3];
    } cases[] = {{1, {1}}, {1, {2}}, {1, {0}}, {2, {0, 2}}, {3, {0, 1, 2}}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        bool reduced[3] = {false, false, false};
        int64_t out_dims[3];
        int32_t out_rank = 0;
        for (int32_t k = 0; k < cases[c].n_axes; k++)
            reduced[cases[c].axes[k]] = true;
        for (int d = 0; d < 3; d++)
            if (!reduced[d])
                out_dims[out_rank++] = dims[d];
        struct tide_tensor_view out = fview(y, out_rank, out_dims);
        int64_t n_out = tide_shape_numel(&out.shape);
        naive_sum3(x, dims, reduced, want);
        char what[64];
        snprintf(what, sizeof(what), "reduce_sum case %zu", c);
        node_init(&t, TIDE_OP_REDUCE_SUM, "sum");
        set_ints(&t, TIDE_ATTR_REDUCE_SUM_axes, cases[c].n_axes, cases[c].axes);
        expect_same_at_threads(what, &t, &in, 1, &out, 1, NULL, NULL);
        expect_close(what, y, want, n_out, 1e-6, 1e-6);

        snprintf(what, sizeof(what), "reduce_mean case %zu", c);
        node_init(&t, TIDE_OP_REDUCE_MEAN, "mean");
        set_ints(&t, TIDE_ATTR_REDUCE_MEAN_axes, cases[c].n_axes, cases[c].axes);
        expect_same_at_threads(what, &t, &in, 1, &out, 1, NULL, NULL);
        double count = (double)(total / n_out);
        for (int64_t i = 0; i < n_out; i++)
            want[i] /= count;
        expect_close(what, y, want, n_out, 1e-6, 1e-7);
    }

    /* SumToShape [13, 2003, 7] -> [2003, 1]. */
    bool over_0_2[3] = {true, false, true};
    naive_sum3(x, dims, over_0_2, want);
    node_init(&t, TIDE_OP_SUM_TO_SHAPE, "sts");
    set_shape(&t, TIDE_ATTR_SUM_TO_SHAPE_shape, 2, DIMS(2003, 1));
    struct tide_tensor_view out = fview(y, 2, DIMS(2003, 1));
    expect_same_at_threads("sum_to_shape", &t, &in, 1, &out, 1, NULL, NULL);
    expect_close("sum_to_shape", y, want, 2003, 1e-6, 1e-6);

    /* BiasAddGrad [7, 13, 37, 41] -> [13]: the pieces divide the channels. */
    in = fview(x, 4, DIMS(7, 13, 37, 41));
    out = fview(y, 1, DIMS(13));
    naive_sum3(x, DIMS(7, 13, 37 * 41), over_0_2, want);
    node_init(&t, TIDE_OP_BIAS_ADD_GRAD, "bias_grad");
    expect_same_at_threads("bias_add_grad", &t, &in, 1, &out, 1, NULL, NULL);
    expect_close("bias_add_grad", y, want, 13, 1e-6, 1e-6);
    free(x), free(y), free(want);
}

static void test_range_jobs_batch_norm_and_pools(void **state)
{
    (void)state;
    struct test_node t;
    /* [5, 13, 31, 29]: 4495 elements a channel, so a piece holds a few channels. */
    enum { N = 5, C = 13, HW = 31 * 29, TOTAL = N * C * HW };
    const int64_t *xd = DIMS(N, C, 31, 29);
    float *x = falloc(TOTAL), *dy = falloc(TOTAL), *y = falloc(TOTAL), *dx = falloc(TOTAL);
    float gamma[C], beta[C], mean[C], inv_std[C], dgamma[C], dbeta[C];
    fill(x, TOTAL, 69);
    fill(dy, TOTAL, 70);
    fill(gamma, C, 71);
    fill(beta, C, 72);
    struct tide_tensor_view in[5] = {fview(x, 4, xd), fview(gamma, 1, DIMS(C)),
                                     fview(beta, 1, DIMS(C))};
    struct tide_tensor_view out[3] = {fview(y, 4, xd), fview(mean, 1, DIMS(C)),
                                      fview(inv_std, 1, DIMS(C))};
    node_init(&t, TIDE_OP_BATCH_NORM, "bn");
    expect_same_at_threads("batch_norm", &t, in, 3, out, 3, NULL, NULL);
    double *want = dalloc(TOTAL), want_mean[C], want_inv[C];
    for (int c = 0; c < C; c++) {
        double s = 0, sq = 0;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++)
                s += x[(n * C + c) * HW + j];
        want_mean[c] = s / (N * HW);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++)
                sq += pow(x[(n * C + c) * HW + j] - want_mean[c], 2);
        want_inv[c] = 1 / sqrt(sq / (N * HW) + 1e-5);
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++) {
                int i = (n * C + c) * HW + j;
                want[i] = gamma[c] * (x[i] - want_mean[c]) * want_inv[c] + beta[c];
            }
    }
    expect_close("batch_norm mean", mean, want_mean, C, 1e-6, 1e-7);
    expect_close("batch_norm inv_std", inv_std, want_inv, C, 1e-6, 0);
    expect_close("batch_norm y", y, want, TOTAL, 1e-5, 1e-5);

    /* BatchNormGrad at the statistics just computed. */
    in[0] = fview(dy, 4, xd);
    in[1] = fview(x, 4, xd);
    in[2] = fview(gamma, 1, DIMS(C));
    in[3] = fview(mean, 1, DIMS(C));
    in[4] = fview(inv_std, 1, DIMS(C));
    out[0] = fview(dx, 4, xd);
    out[1] = fview(dgamma, 1, DIMS(C));
    out[2] = fview(dbeta, 1, DIMS(C));
    node_init(&t, TIDE_OP_BATCH_NORM_GRAD, "bn_grad");
    expect_same_at_threads("batch_norm_grad", &t, in, 5, out, 3, NULL, NULL);
    double want_dgamma[C], want_dbeta[C];
    for (int c = 0; c < C; c++) {
        double db = 0, dg = 0, m = N * HW;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++) {
                int i = (n * C + c) * HW + j;
                db += dy[i];
                dg += dy[i] * (x[i] - mean[c]) * inv_std[c];
            }
        want_dbeta[c] = db;
        want_dgamma[c] = dg;
        for (int n = 0; n < N; n++)
            for (int j = 0; j < HW; j++) {
                int i = (n * C + c) * HW + j;
                double xhat = (x[i] - mean[c]) * inv_std[c];
                want[i] = gamma[c] * inv_std[c] / m * (m * dy[i] - db - xhat * dg);
            }
    }
    expect_close("batch_norm_grad dgamma", dgamma, want_dgamma, C, 1e-5, 1e-5);
    expect_close("batch_norm_grad dbeta", dbeta, want_dbeta, C, 1e-5, 1e-5);
    expect_close("batch_norm_grad dx", dx, want, TOTAL, 1e-4, 1e-6);

    /* GlobalAvgPool over the N * C planes, and its gradient. */
    float pooled[N * C];
    struct tide_tensor_view pin = fview(x, 4, xd), pout = fview(pooled, 2, DIMS(N, C));
    node_init(&t, TIDE_OP_GLOBAL_AVG_POOL, "gap");
    expect_same_at_threads("global_avg_pool", &t, &pin, 1, &pout, 1, NULL, NULL);
    for (int p = 0; p < N * C; p++) {
        want[p] = 0;
        for (int j = 0; j < HW; j++)
            want[p] += x[p * HW + j];
        want[p] /= HW;
    }
    expect_close("global_avg_pool", pooled, want, N * C, 1e-6, 1e-7);
    pin = fview(pooled, 2, DIMS(N, C));
    pout = fview(dx, 4, xd);
    node_init(&t, TIDE_OP_GLOBAL_AVG_POOL_GRAD, "gap_grad");
    set_shape(&t, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, 4, xd);
    expect_same_at_threads("global_avg_pool_grad", &t, &pin, 1, &pout, 1, NULL, NULL);
    for (int i = 0; i < TOTAL; i++)
        want[i] = pooled[i / HW] / (float)HW;
    expect_close("global_avg_pool_grad", dx, want, TOTAL, 0, 0);
    free(x), free(dy), free(y), free(dx), free(want);
}

static void test_range_jobs_optimizers(void **state)
{
    (void)state;
    struct test_node t;
    enum { N = 70001 };
    float *var = falloc(N), *s1 = falloc(N), *s2 = falloc(N), *g = falloc(N), *after[MAX_IO];
    double *want = dalloc(N);
    fill(var, N, 73);
    fill(g, N, 74);
    fill(s1, N, 75);
    for (int64_t i = 0; i < N; i++)
        s2[i] = s1[i] * s1[i]; /* Adam's v is not negative */
    const int64_t *d = DIMS(N);

    node_init(&t, TIDE_OP_APPLY_SGD, "sgd");
    t.attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f = 0.1;
    struct tide_tensor_view sin[2] = {fview(var, 1, d), fview(g, 1, d)};
    expect_same_at_threads("sgd", &t, sin, 2, NULL, 0, NULL, after);
    for (int64_t i = 0; i < N; i++)
        want[i] = var[i] - 0.1 * g[i];
    expect_close("sgd", after[0], want, N, 1e-6, 1e-7);
    free(after[0]), free(after[1]);

    node_init(&t, TIDE_OP_APPLY_MOMENTUM, "momentum");
    t.attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f = 0.1;
    t.attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f = 0.9;
    t.attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b = true;
    struct tide_tensor_view min[3] = {fview(var, 1, d), fview(s1, 1, d), fview(g, 1, d)};
    expect_same_at_threads("momentum", &t, min, 3, NULL, 0, NULL, after);
    for (int64_t i = 0; i < N; i++) {
        double a = 0.9 * s1[i] + g[i];
        want[i] = var[i] - 0.1 * (g[i] + 0.9 * a);
    }
    expect_close("momentum", after[0], want, N, 1e-5, 1e-6);
    free(after[0]), free(after[1]), free(after[2]);

    node_init(&t, TIDE_OP_APPLY_ADAM, "adam");
    t.attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f = 0.01;
    struct tide_tensor_view ain[4] = {fview(var, 1, d), fview(s1, 1, d), fview(s2, 1, d),
                                      fview(g, 1, d)};
    const uint64_t step = 3;
    expect_same_at_threads("adam", &t, ain, 4, NULL, 0, &step, after);
    for (int64_t i = 0; i < N; i++) {
        double m = 0.9 * s1[i] + 0.1 * g[i], v = 0.999 * s2[i] + 0.001 * (double)g[i] * g[i];
        want[i] = var[i] - 0.01 * (m / (1 - pow(0.9, 3))) / (sqrt(v / (1 - pow(0.999, 3))) + 1e-8);
    }
    expect_close("adam", after[0], want, N, 1e-5, 1e-6);
    for (int i = 0; i < 4; i++)
        free(after[i]);
    free(var), free(s1), free(s2), free(g), free(want);
}

/*
 * Max pooling whose windows tile the input (stride = window, no padding) has
 * a path of its own; here on odd sizes that leave rows and columns outside
 * every window, with many ties (values from a set of five), against a naive
 * pooling that keeps the first maximum in row-major order, at 1, 2 and 3
 * threads.
 */
static void test_max_pool_tiled(void **state)
{
    (void)state;
    enum { N = 3, C = 5, H = 9, W = 11, TOTAL = N * C * H * W };
    float *x = falloc(TOTAL), *dx = falloc(TOTAL), *want_dx = falloc(TOTAL);
    uint32_t seed = 77;
    for (int i = 0; i < TOTAL; i++)
        x[i] = (float)(int)(frand(&seed) * 2.5f); /* -2 .. 2 */
    const int64_t *xd = DIMS(N, C, H, W);
    for (int64_t k = 2; k <= 3; k++) {
        int64_t oh = H / k, ow = W / k, no = N * C * oh * ow;
        float *y = falloc(no), *want_y = falloc(no), *dy = falloc(no);
        fill(dy, no, 78);
        memset(want_dx, 0, TOTAL * sizeof(float));
        for (int64_t pl = 0; pl < N * C; pl++) {
            for (int64_t i = 0; i < oh; i++) {
                for (int64_t j = 0; j < ow; j++) {
                    int64_t best = pl * H * W + i * k * W + j * k;
                    for (int64_t a = 0; a < k; a++)
                        for (int64_t b = 0; b < k; b++) {
                            int64_t c = pl * H * W + (i * k + a) * W + j * k + b;
                            if (x[c] > x[best])
                                best = c;
                        }
                    want_y[(pl * oh + i) * ow + j] = x[best];
                    want_dx[best] += dy[(pl * oh + i) * ow + j];
                }
            }
        }
        const int64_t *yd = DIMS(N, C, oh, ow);
        struct test_node t;
        int32_t *argmax = malloc((size_t)no * sizeof(int32_t));
        assert_non_null(argmax);
        node_init(&t, TIDE_OP_MAX_POOL2D, "max");
        pool_attrs(&t, k, k, 0);
        struct tide_tensor_view in = fview(x, 4, xd);
        struct tide_tensor_view out[2] = {fview(y, 4, yd), view(TIDE_DTYPE_INT32, argmax, 4, yd)};
        expect_same_at_threads("max_pool tiled", &t, &in, 1, out, 2, NULL, NULL);
        expect_exact("max_pool tiled", y, want_y, no);

        node_init(&t, TIDE_OP_MAX_POOL2D_GRAD, "max_grad");
        pool_attrs(&t, k, k, 0);
        set_shape(&t, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, 4, xd);
        struct tide_tensor_view gin[2] = {fview(dy, 4, yd), out[1]};
        struct tide_tensor_view gout = fview(dx, 4, xd);
        expect_same_at_threads("max_pool_grad tiled", &t, gin, 2, &gout, 1, NULL, NULL);
        expect_exact("max_pool_grad tiled", dx, want_dx, TOTAL);
        free(y), free(want_y), free(dy), free(argmax);
    }
    free(x), free(dx), free(want_dx);
}

/* ============================================================================
 * Variable initialisation
 * ========================================================================== */

static void variable_init(struct test_node *t, const char *name, const char *init, int32_t rank,
                          const int64_t *dims)
{
    node_init(t, TIDE_OP_VARIABLE, name);
    t->attrs[TIDE_ATTR_VARIABLE_dtype].dtype = TIDE_DTYPE_FLOAT32;
    set_shape(t, TIDE_ATTR_VARIABLE_shape, rank, dims);
    if (init)
        t->attrs[TIDE_ATTR_VARIABLE_init].s = init;
}

static void init_ok(struct test_node *t, uint64_t seed, float *dst)
{
    struct tide_error err = {0};
    if (tide_variable_init(&t->node, seed, dst, &err) != TIDE_OK)
        fail_msg("tide_variable_init: %s", err.message);
}

static void test_variable_init_reproducible(void **state)
{
    (void)state;
    struct test_node t;
    float a[64], b[64];
    const char *inits[] = {"normal", "uniform", "glorot_uniform", "he_normal"};
    for (size_t k = 0; k < 4; k++) {
        variable_init(&t, "w", inits[k], 2, DIMS(8, 8));
        init_ok(&t, 7, a);
        init_ok(&t, 7, b);
        assert_memory_equal(a, b, sizeof(a));
        init_ok(&t, 8, b); /* another job seed */
        assert_memory_not_equal(a, b, sizeof(a));
        t.attrs[TIDE_ATTR_VARIABLE_seed].i = 1; /* another seed attribute */
        init_ok(&t, 7, b);
        assert_memory_not_equal(a, b, sizeof(a));
        variable_init(&t, "w2", inits[k], 2, DIMS(8, 8)); /* another name */
        init_ok(&t, 7, b);
        assert_memory_not_equal(a, b, sizeof(a));
    }
    /* The default init is glorot_uniform. */
    variable_init(&t, "w", NULL, 2, DIMS(8, 8));
    init_ok(&t, 7, a);
    variable_init(&t, "w", "glorot_uniform", 2, DIMS(8, 8));
    init_ok(&t, 7, b);
    assert_memory_equal(a, b, sizeof(a));
    /* A value depends on its index only: a prefix of a larger tensor is the same. */
    float big[128];
    variable_init(&t, "w", "normal", 1, DIMS(128));
    init_ok(&t, 7, big);
    variable_init(&t, "w", "normal", 1, DIMS(64));
    init_ok(&t, 7, a);
    assert_memory_equal(a, big, sizeof(a));
}

static void test_variable_init_distributions(void **state)
{
    (void)state;
    struct test_node t;
    enum { N = 10000 };
    float *x = falloc(N * 4);

    /* glorot_uniform on [100, 100] (10,000 values): within +-sqrt(6 / 200), filling the range. */
    variable_init(&t, "glorot", "glorot_uniform", 2, DIMS(100, 100));
    init_ok(&t, 1, x);
    float limit = (float)sqrt(6.0 / 200);
    float lo = 0, hi = 0;
    for (int i = 0; i < N; i++) {
        assert_true(fabsf(x[i]) <= limit);
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    assert_true(lo < -0.95f * limit && hi > 0.95f * limit);
    /* glorot on a conv filter [K, C, R, S]: fan_in C*R*S, fan_out K*R*S. */
    variable_init(&t, "filter", "glorot_uniform", 4, DIMS(16, 8, 3, 3));
    init_ok(&t, 1, x);
    limit = (float)sqrt(6.0 / (8 * 9 + 16 * 9));
    for (int i = 0; i < 16 * 8 * 9; i++)
        assert_true(fabsf(x[i]) <= limit);

    /* normal with scale 2: mean 0 and stddev 2 within sampling error. */
    variable_init(&t, "normal", "normal", 1, DIMS(N));
    t.attrs[TIDE_ATTR_VARIABLE_scale].f = 2;
    init_ok(&t, 3, x);
    double s = 0, sq = 0;
    for (int i = 0; i < N; i++)
        s += x[i];
    double mean = s / N;
    for (int i = 0; i < N; i++)
        sq += (x[i] - mean) * (x[i] - mean);
    double std = sqrt(sq / N);
    assert_true(fabs(mean) < 0.06); /* 3 standard errors of 2 / sqrt(10,000) */
    assert_true(fabs(std - 2) < 0.06);

    /* he_normal on [400, 25]: stddev sqrt(2 / 400). */
    variable_init(&t, "he", "he_normal", 2, DIMS(400, 25));
    init_ok(&t, 4, x);
    sq = 0;
    for (int i = 0; i < N; i++)
        sq += (double)x[i] * x[i];
    assert_true(fabs(sqrt(sq / N) / sqrt(2.0 / 400) - 1) < 0.03);

    /* uniform with scale 0.5: in [-0.5, 0.5), mean near 0. */
    variable_init(&t, "uniform", "uniform", 1, DIMS(N));
    t.attrs[TIDE_ATTR_VARIABLE_scale].f = 0.5;
    init_ok(&t, 5, x);
    s = 0;
    for (int i = 0; i < N; i++) {
        assert_true(x[i] >= -0.5f && x[i] < 0.5f);
        s += x[i];
    }
    assert_true(fabs(s / N) < 0.01);
    free(x);
}

static void test_variable_init_constants(void **state)
{
    (void)state;
    struct test_node t;
    float x[6];
    variable_init(&t, "z", "zeros", 2, DIMS(2, 3));
    init_ok(&t, 1, x);
    for (int i = 0; i < 6; i++)
        assert_true(x[i] == 0.0f);
    variable_init(&t, "o", "ones", 2, DIMS(2, 3));
    init_ok(&t, 1, x);
    for (int i = 0; i < 6; i++)
        assert_true(x[i] == 1.0f);
    variable_init(&t, "c", "constant", 2, DIMS(2, 3));
    t.attrs[TIDE_ATTR_VARIABLE_scale].f = -1.5;
    init_ok(&t, 1, x);
    for (int i = 0; i < 6; i++)
        assert_true(x[i] == -1.5f);

    /* value copies the tensor attribute. */
    float data[6] = {1, 2, 3, 4, 5, 6};
    struct tide_const_tensor value = {.dtype = TIDE_DTYPE_FLOAT32,
                                      .shape = tide_shape_make(2, DIMS(2, 3)),
                                      .nbytes = sizeof(data),
                                      .data = data};
    variable_init(&t, "v", "value", 2, DIMS(2, 3));
    t.attrs[TIDE_ATTR_VARIABLE_value].present = true;
    t.attrs[TIDE_ATTR_VARIABLE_value].tensor = &value;
    init_ok(&t, 1, x);
    assert_memory_equal(x, data, sizeof(data));

    /* An unknown init, or value without a tensor, is refused naming the node. */
    struct tide_error err = {0};
    variable_init(&t, "bad", "xavier", 2, DIMS(2, 3));
    assert_int_equal(tide_variable_init(&t.node, 1, x, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"bad\""));
    assert_non_null(strstr(err.message, "xavier"));
    variable_init(&t, "novalue", "value", 2, DIMS(2, 3));
    assert_int_equal(tide_variable_init(&t.node, 1, x, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "\"novalue\""));
}

/* ============================================================================
 * Through a graph: attributes as tide_graph_infer normalises them
 * ========================================================================== */

static uint32_t graph_node(struct tide_graph *g, enum tide_op op, const char *name,
                           const uint32_t *inputs, uint32_t n)
{
    uint32_t id;
    struct tide_error err = {0};
    struct tide_edge edges[4];
    if (tide_graph_add_node(g, op, name, &id, &err) != TIDE_OK)
        fail_msg("add %s: %s", name, err.message);
    for (uint32_t i = 0; i < n; i++)
        edges[i] = (struct tide_edge){inputs[i], 0};
    if (n > 0 && tide_graph_set_inputs(g, id, edges, n, &err) != TIDE_OK)
        fail_msg("inputs of %s: %s", name, err.message);
    return id;
}

/*
 * x -> Conv2D (pads only) -> MaxPool2D (ksize only) -> ReduceMean (negative
 * axes) -> Softmax (default axis), inferred, then run node by node with the
 * table's workspace sizes for the real graph, against naive results.
 */
static void test_graph_normalised_attrs(void **state)
{
    (void)state;
    struct tide_graph *g = tide_graph_new();
    assert_non_null(g);
    uint32_t x = graph_node(g, TIDE_OP_PLACEHOLDER, "x", NULL, 0);
    tide_attr_set_dtype(g, x, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    struct tide_shape x_shape = tide_shape_make(4, DIMS(2, 3, 9, 9));
    struct tide_shape w_shape = tide_shape_make(4, DIMS(4, 3, 3, 3));
    tide_attr_set_shape(g, x, TIDE_ATTR_PLACEHOLDER_shape, &x_shape);
    uint32_t w = graph_node(g, TIDE_OP_PLACEHOLDER, "w", NULL, 0);
    tide_attr_set_dtype(g, w, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, w, TIDE_ATTR_PLACEHOLDER_shape, &w_shape);
    uint32_t conv = graph_node(g, TIDE_OP_CONV2D, "conv", (uint32_t[]){x, w}, 2);
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_pads, DIMS(1, 1), 2);
    uint32_t pool = graph_node(g, TIDE_OP_MAX_POOL2D, "pool", (uint32_t[]){conv}, 1);
    tide_attr_set_ints(g, pool, TIDE_ATTR_MAX_POOL2D_ksize, DIMS(3, 3), 2);
    uint32_t mean = graph_node(g, TIDE_OP_REDUCE_MEAN, "mean", (uint32_t[]){pool}, 1);
    tide_attr_set_ints(g, mean, TIDE_ATTR_REDUCE_MEAN_axes, DIMS(-1, -2), 2);
    uint32_t soft = graph_node(g, TIDE_OP_SOFTMAX, "soft", (uint32_t[]){mean}, 1);
    struct tide_error err = {0};
    if (tide_graph_infer(g, NULL, &err) != TIDE_OK)
        fail_msg("infer: %s", err.message);

    /* One buffer per node output; x and w random. */
    float *data[6];
    for (uint32_t id = 0; id < 6; id++) {
        data[id] = falloc(tide_shape_numel(&g->nodes[id].outputs[0].shape));
        fill(data[id], tide_shape_numel(&g->nodes[id].outputs[0].shape), 50 + id);
    }
    for (uint32_t id = conv; id <= soft; id++) {
        const struct tide_node *node = &g->nodes[id];
        struct tide_tensor_view in[2], out[2];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            const struct tide_output *o = tide_graph_input(g, node, i);
            in[i] = view(o->dtype, data[node->inputs[i].node], o->shape.rank, o->shape.dims);
        }
        /* Output 0 into data[id]; MaxPool2D's argmax into a buffer of its own. */
        void *second = NULL;
        assert_true(node->n_outputs <= 2);
        for (uint32_t k = 0; k < node->n_outputs; k++) {
            const struct tide_output *o = &node->outputs[k];
            void *buf = data[id];
            if (k > 0) {
                second = malloc(o->nbytes);
                assert_non_null(second);
                buf = second;
            }
            out[k] = view(o->dtype, buf, o->shape.rank, o->shape.dims);
        }
        uint64_t ws_bytes = tide_cpu_kernels.workspace_bytes(NULL, g, node);
        void *ws = ws_bytes ? malloc(ws_bytes) : NULL;
        struct tide_kernel_args args = {.node = node,
                                        .n_inputs = node->n_inputs,
                                        .inputs = in,
                                        .n_outputs = node->n_outputs,
                                        .outputs = out,
                                        .workspace = ws,
                                        .workspace_bytes = ws_bytes};
        if (tide_cpu_kernels.fn[node->op](&args, &err) != TIDE_OK)
            fail_msg("%s: %s", node->name, err.message);
        free(ws), free(second);
    }

    /* conv [2, 4, 9, 9] -> pool [2, 4, 3, 3] -> mean [2, 4] -> softmax over 4. */
    struct conv_case cc = {2, 3, 9, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1};
    double *want_conv = dalloc(2 * 4 * 81), want_soft[8];
    naive_conv(&cc, data[x], data[w], want_conv);
    expect_close("graph conv", data[conv], want_conv, 2 * 4 * 81, 1e-4, 1e-5);
    double m[8];
    for (int p = 0; p < 8; p++) {
        double sum = 0;
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) {
                double best = -INFINITY;
                for (int r = 0; r < 3; r++)
                    for (int q = 0; q < 3; q++)
                        best = fmax(best, data[conv][p * 81 + (i * 3 + r) * 9 + j * 3 + q]);
                sum += best;
            }
        }
        m[p] = sum / 9;
    }
    expect_close("graph mean", data[mean], m, 8, 1e-6, 1e-7);
    for (int n = 0; n < 2; n++) {
        double s = 0, mx = fmax(fmax(m[n * 4], m[n * 4 + 1]), fmax(m[n * 4 + 2], m[n * 4 + 3]));
        for (int k = 0; k < 4; k++)
            s += exp(m[n * 4 + k] - mx);
        for (int k = 0; k < 4; k++)
            want_soft[n * 4 + k] = exp(m[n * 4 + k] - mx) / s;
    }
    expect_close("graph softmax", data[soft], want_soft, 8, 1e-5, 1e-7);
    free(want_conv);
    for (uint32_t id = 0; id < 6; id++)
        free(data[id]);
    tide_graph_free(g);
}

/* ---- Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) ---- */

/* Gelu's tanh form and its derivative in double, the references of the float kernels. */
static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

static double gelu_derivative_ref(double x)
{
    double k = sqrt(2.0 / M_PI), t = tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

/* Runs a one-input, one-output element-wise op of x [n] into y. */
static void run_unary(enum tide_op op, float *x, float *y, int64_t n)
{
    struct tide_tensor_view in = fview(x, 1, DIMS(n)), out = fview(y, 1, DIMS(n));
    struct test_node t;
    node_init(&t, op, tide_op_info(op)->name);
    run(&t, &in, 1, &out, 1);
}

static void test_math_unary(void **state)
{
    (void)state;
    enum { N = 9 };
    float x[N] = {-2.5f, -1.0f, -0.0f, 0.0f, 0.25f, 1.0f, 2.0f, 10.0f, 88.0f};
    float y[N];

    /* Exp, Log and Sqrt are libm's float functions, bit for bit, and IEEE 754 at the edges. */
    run_unary(TIDE_OP_EXP, x, y, N);
    for (int i = 0; i < N; i++)
        assert_memory_equal(&y[i], &(float){expf(x[i])}, sizeof(float));
    assert_true(y[3] == 1.0f && y[5] == expf(1.0f));
    expect_close("exp", y,
                 (const double[]){exp(-2.5), exp(-1.0), 1, 1, exp(0.25), M_E, exp(2.0), exp(10.0),
                                  exp(88.0)},
                 N, 1e-6, 0);

    run_unary(TIDE_OP_LOG, x, y, N);
    assert_true(isnan(y[0]) && isnan(y[1]));     /* log of a negative number */
    assert_true(isinf(y[2]) && y[2] < 0);        /* log(-0) = -inf */
    assert_true(isinf(y[3]) && y[3] < 0);        /* log(+0) = -inf */
    assert_true(y[5] == 0.0f && !signbit(y[5])); /* log(1) = +0 */
    expect_close("log", y + 4, (const double[]){log(0.25), 0, log(2.0), log(10.0), log(88.0)}, 5,
                 1e-6, 1e-7);

    run_unary(TIDE_OP_SQRT, x, y, N);
    assert_true(isnan(y[0]) && isnan(y[1]));    /* sqrt of a negative number */
    assert_true(y[2] == 0.0f && signbit(y[2])); /* sqrt(-0) = -0 */
    const float sqrt_want[6] = {0.0f, 0.5f, 1.0f, 1.41421354f, 3.16227770f, 9.38083152f};
    expect_exact("sqrt", y + 3, sqrt_want, 6);

    /* Gelu against hand-computed values of the tanh form, then the double formula. */
    run_unary(TIDE_OP_GELU, x, y, N);
    assert_true(y[2] == 0.0f && y[3] == 0.0f);
    assert_true(y[7] == 10.0f && y[8] == 88.0f); /* tanh saturates: x itself */
    expect_close("gelu hand values", (const float[]){y[1], y[5], y[6]},
                 (const double[]){-0.15880800939172324, 0.8411919906082768, 1.954597694087775}, 3,
                 2e-7, 1e-7);
    double want[N];
    for (int i = 0; i < N; i++)
        want[i] = gelu_ref(x[i]);
    expect_close("gelu", y, want, N, 1e-6, 1e-7);

    /* Erf is libm's erff, bit for bit; erf(1) = 0.8427007929 from tables. */
    run_unary(TIDE_OP_ERF, x, y, N);
    for (int i = 0; i < N; i++)
        assert_true(y[i] == erff(x[i]));
    assert_true(y[2] == 0.0f && signbit(y[2])); /* erf(-0) = -0 */
    assert_true(y[8] == 1.0f);
    expect_close("erf", y + 5, (const double[]){0.8427007929497149}, 1, 1e-7, 0);

    /* GeluGrad(dy, x) = dy * Gelu'(x); Gelu'(1) = 1.0829640838 by hand. */
    float dy[N] = {1.0f, 2.0f, -1.0f, 0.5f, 3.0f, 1.0f, -0.5f, 1.0f, 1.0f};
    struct tide_tensor_view in[2] = {fview(dy, 1, DIMS(N)), fview(x, 1, DIMS(N))};
    struct tide_tensor_view out = fview(y, 1, DIMS(N));
    struct test_node t;
    node_init(&t, TIDE_OP_GELU_GRAD, "gelu_grad");
    run(&t, in, 2, &out, 1);
    expect_close("gelu_grad hand value", &y[5], (const double[]){1.0829640838457826}, 1, 1e-6, 0);
    assert_true(y[2] == -0.5f && y[3] == 0.25f); /* Gelu'(0) = 1/2 */
    assert_true(y[7] == 1.0f && y[8] == 1.0f);   /* saturated: Gelu' = 1 */
    for (int i = 0; i < N; i++)
        want[i] = dy[i] * gelu_derivative_ref(x[i]);
    expect_close("gelu_grad", y, want, N, 1e-5, 1e-7);

    /*
     * Far left, Gelu and Gelu' are 0 to within float (e^-2u is inf, or over
     * e^80 for Gelu'), down to x = -1e20, where x^3 overflows: never NaN
     * from inf * 0, and never a tiny x e^-80 that grows with |x|.
     */
    float far[4] = {-20.0f, -88.0f, -1e6f, -1e20f}, ones[4] = {1, 1, 1, 1}, got[4];
    run_unary(TIDE_OP_GELU, far, got, 4);
    for (int i = 0; i < 4; i++) {
        if (!(fabsf(got[i]) < 1e-30f))
            fail_msg("gelu(%g) is %g, want 0 within 1e-30", far[i], got[i]);
    }
    struct tide_tensor_view far_in[2] = {fview(ones, 1, DIMS(4)), fview(far, 1, DIMS(4))};
    struct tide_tensor_view far_out = fview(got, 1, DIMS(4));
    run(&t, far_in, 2, &far_out, 1);
    for (int i = 0; i < 4; i++) {
        if (!(fabsf(got[i]) < 1e-30f))
            fail_msg("gelu'(%g) is %g, want 0 within 1e-30", far[i], got[i]);
    }
}

static void test_math_binary(void **state)
{
    (void)state;
    struct test_node t;
    /* Div of [2, 3] by [3]: the host's float quotients, bit for bit; x / 0 is +-inf or NaN. */
    float a[6] = {1.0f, -2.0f, 3.0f, 0.0f, 7.0f, -1.0f}, b[3] = {3.0f, 0.0f, -0.5f}, y[6];
    struct tide_tensor_view in[2] = {fview(a, 2, DIMS(2, 3)), fview(b, 1, DIMS(3))};
    struct tide_tensor_view out = fview(y, 2, DIMS(2, 3));
    node_init(&t, TIDE_OP_DIV, "div");
    run(&t, in, 2, &out, 1);
    const float div_want[6] = {1.0f / 3.0f, -INFINITY, -6.0f, 0.0f, INFINITY, 2.0f};
    expect_exact("div", y, div_want, 6);

    /* Scalar over [2, 3]. */
    float two = 2.0f;
    struct tide_tensor_view in2[2] = {fview(&two, 0, NULL), fview(a, 2, DIMS(2, 3))};
    run(&t, in2, 2, &out, 1);
    assert_true(isinf(y[3]) && y[3] > 0); /* 2 / +0 */
    const float rdiv_want[3] = {2.0f, -1.0f, 2.0f / 3.0f};
    expect_exact("scalar div", y, rdiv_want, 3);
    assert_true(y[4] == 2.0f / 7.0f && y[5] == -2.0f);

    /*
     * Max and Min of [2, 4] and [4]: ties (1 and 1, -0 and +0) and NaN on
     * either side take input 0.
     */
    float p[8] = {1.0f, -0.0f, NAN, 3.0f, 4.0f, -5.0f, 0.5f, 2.0f};
    float q[4] = {1.0f, 0.0f, 1.0f, NAN};
    float z[8];
    struct tide_tensor_view in3[2] = {fview(p, 2, DIMS(2, 4)), fview(q, 1, DIMS(4))};
    struct tide_tensor_view out3 = fview(z, 2, DIMS(2, 4));
    node_init(&t, TIDE_OP_MAX, "max");
    run(&t, in3, 2, &out3, 1);
    assert_true(z[0] == 1.0f && z[1] == 0.0f && signbit(z[1]) && isnan(z[2]) && z[3] == 3.0f);
    assert_true(z[4] == 4.0f && z[5] == 0.0f && !signbit(z[5]) && z[6] == 1.0f && z[7] == 2.0f);
    node_init(&t, TIDE_OP_MIN, "min");
    run(&t, in3, 2, &out3, 1);
    assert_true(z[0] == 1.0f && z[1] == 0.0f && signbit(z[1]) && isnan(z[2]) && z[3] == 3.0f);
    assert_true(z[4] == 1.0f && z[5] == -5.0f && z[6] == 0.5f && z[7] == 2.0f);

    /* [3, 1] against [1, 4], both broadcast. */
    float col[3] = {0.0f, 2.0f, 5.0f}, row[4] = {-1.0f, 2.0f, 3.0f, 6.0f}, m[12];
    struct tide_tensor_view in4[2] = {fview(col, 2, DIMS(3, 1)), fview(row, 2, DIMS(1, 4))};
    struct tide_tensor_view out4 = fview(m, 2, DIMS(3, 4));
    node_init(&t, TIDE_OP_MAX, "max_outer");
    run(&t, in4, 2, &out4, 1);
    const float max_outer[12] = {0, 2, 3, 6, 2, 2, 3, 6, 5, 5, 5, 6};
    expect_exact("max outer", m, max_outer, 12);
    node_init(&t, TIDE_OP_MIN, "min_outer");
    run(&t, in4, 2, &out4, 1);
    const float min_outer[12] = {-1, 0, 0, 0, -1, 2, 2, 2, -1, 2, 3, 5};
    expect_exact("min outer", m, min_outer, 12);
}

static void test_select_grads(void **state)
{
    (void)state;
    /* a [2, 3], b [3], dy [2, 3]: a tie at (0, 0) and (1, 1), and a NaN in b. */
    float a[6] = {1.0f, 5.0f, -2.0f, 0.0f, 4.0f, 9.0f}, b[3] = {1.0f, 4.0f, NAN};
    float dy[6] = {10.0f, 20.0f, 30.0f, 40.0f, 50.0f, 60.0f}, da[6], db[6];
    struct tide_tensor_view in[3] = {fview(a, 2, DIMS(2, 3)), fview(b, 1, DIMS(3)),
                                     fview(dy, 2, DIMS(2, 3))};
    struct tide_tensor_view out[2] = {fview(da, 2, DIMS(2, 3)), fview(db, 2, DIMS(2, 3))};
    struct test_node t;
    node_init(&t, TIDE_OP_MAX_GRAD, "max_grad");
    run(&t, in, 3, out, 2);
    expect_exact("max_grad da", da, (const float[]){10, 20, 30, 0, 50, 60}, 6);
    expect_exact("max_grad db", db, (const float[]){0, 0, 0, 40, 0, 0}, 6);
    node_init(&t, TIDE_OP_MIN_GRAD, "min_grad");
    run(&t, in, 3, out, 2);
    expect_exact("min_grad da", da, (const float[]){10, 0, 30, 40, 50, 60}, 6);
    expect_exact("min_grad db", db, (const float[]){0, 20, 0, 0, 0, 0}, 6);

    /* A scalar a against b [4]. */
    float s = 2.0f, row[4] = {1.0f, 2.0f, 3.0f, -7.0f}, g[4] = {1.0f, 2.0f, 3.0f, 4.0f};
    float ga[4], gb[4];
    struct tide_tensor_view in2[3] = {fview(&s, 0, NULL), fview(row, 1, DIMS(4)),
                                      fview(g, 1, DIMS(4))};
    struct tide_tensor_view out2[2] = {fview(ga, 1, DIMS(4)), fview(gb, 1, DIMS(4))};
    node_init(&t, TIDE_OP_MAX_GRAD, "max_grad_scalar");
    run(&t, in2, 3, out2, 2);
    expect_exact("max_grad scalar da", ga, (const float[]){1, 2, 0, 4}, 4);
    expect_exact("max_grad scalar db", gb, (const float[]){0, 0, 3, 0}, 4);
}

/*
 * Fails unless got[i] is want[i] for every i: NaN where want is NaN, else
 * within rtol of it (0 for the same value; infinities and zeros by sign too).
 */
static void expect_values(const char *what, const float *got, const float *want, int64_t n,
                          double rtol)
{
    for (int64_t i = 0; i < n; i++) {
        bool same = isnan(want[i])
                        ? isnan(got[i])
                        : signbit(got[i]) == signbit(want[i]) &&
                              (got[i] == want[i] ||
                               fabs((double)got[i] - (double)want[i]) <= rtol * fabs(want[i]));
        if (!same)
            fail_msg("%s: element %lld is %.9g, want %.9g", what, (long long)i, got[i], want[i]);
    }
}

/*
 * Pow and PowGrad element by element against PyTorch 1.13's torch.pow and
 * its backward on the same values (worked out once with it): negative
 * bases with integral exponents keep the power's sign, other exponents give
 * NaN; 0^0 = 1, 0^-1 = inf; da is 0 where b == 0 even against an infinite
 * or NaN dy, db is dy * 0 where a == 0 and b >= 0 (NaN for dy = inf), NaN
 * for a < 0. Then a broadcast of [2, 1] against [3].
 */
static void test_pow(void **state)
{
    (void)state;
    enum { N = 12 };
    float a[N] = {0, 0, 0, -2, -2, 2, 0, NAN, 0, -2, -2, 2};
    float b[N] = {0, 2, -1, 3, 0.5f, 0, 0.5f, 0, NAN, 2, -1, 0.5f};
    float dy[N] = {INFINITY, 1, 1, 1, 1, NAN, INFINITY, 1, 1, 1, 1, 1};
    const float y_want[N] = {1, 0, INFINITY, -8, NAN, 1, 0, 1, NAN, 4, -0.5f, 1.41421354f};
    const float da_want[N] = {0,        0, -INFINITY, 12, NAN,    0,
                              INFINITY, 0, NAN,       -4, -0.25f, 0.353553385f};
    const float db_want[N] = {NAN, 0,   -INFINITY, NAN, NAN, NAN,
                              NAN, NAN, NAN,       NAN, NAN, 0.980258107f};
    float y[N], da[N], db[N];
    struct tide_tensor_view in[3] = {fview(a, 1, DIMS(N)), fview(b, 1, DIMS(N)),
                                     fview(dy, 1, DIMS(N))};
    struct tide_tensor_view out[2] = {fview(da, 1, DIMS(N)), fview(db, 1, DIMS(N))};
    struct tide_tensor_view yout = fview(y, 1, DIMS(N));
    struct test_node t;
    node_init(&t, TIDE_OP_POW, "pow");
    run(&t, in, 2, &yout, 1);
    expect_values("pow", y, y_want, N, 1e-7);
    node_init(&t, TIDE_OP_POW_GRAD, "pow_grad");
    run(&t, in, 3, out, 2);
    expect_values("pow_grad da", da, da_want, N, 1e-7);
    expect_values("pow_grad db", db, db_want, N, 1e-7);

    /* [2, 1] ^ [3]: both broadcast; every power is exact in float. */
    float col[2] = {-3.0f, 0.5f}, row[3] = {2.0f, -2.0f, 0.0f}, z[6];
    struct tide_tensor_view in2[2] = {fview(col, 2, DIMS(2, 1)), fview(row, 1, DIMS(3))};
    struct tide_tensor_view out2 = fview(z, 2, DIMS(2, 3));
    node_init(&t, TIDE_OP_POW, "pow_outer");
    run(&t, in2, 2, &out2, 1);
    expect_exact("pow outer", z, (const float[]){9, 1.0f / 9.0f, 1, 0.25f, 4, 1}, 6);

    /* PowGrad of the same pair with dy = 1: da = b a^(b - 1), db = a^b log(a) (NaN for -3). */
    float ones[6] = {1, 1, 1, 1, 1, 1}, ga[6], gb[6];
    struct tide_tensor_view in3[3] = {in2[0], in2[1], fview(ones, 2, DIMS(2, 3))};
    struct tide_tensor_view out3[2] = {fview(ga, 2, DIMS(2, 3)), fview(gb, 2, DIMS(2, 3))};
    node_init(&t, TIDE_OP_POW_GRAD, "pow_grad_outer");
    run(&t, in3, 3, out3, 2);
    const float ln_half = logf(0.5f);
    expect_values("pow_grad outer da", ga, (const float[]){-6, 2.0f / 27.0f, 0, 1, -16, 0}, 6,
                  1e-7);
    expect_values("pow_grad outer db", gb,
                  (const float[]){NAN, NAN, NAN, 0.25f * ln_half, 4 * ln_half, ln_half}, 6, 1e-7);
}

/* ---- Masks: Cast, Compare, Select ---- */

/* Fails unless got[i] == want[i] for every i. */
static void expect_ints(const char *what, const int32_t *got, const int32_t *want, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (got[i] != want[i])
            fail_msg("%s: element %lld is %d, want %d", what, (long long)i, got[i], want[i]);
    }
}

/*
 * Cast: float32 -> int32 truncates toward zero and saturates, NaN -> 0;
 * int32 -> float32 rounds to nearest even; the same dtype copies the bits.
 */
static void test_cast(void **state)
{
    (void)state;
    struct test_node t;
    enum { NF = 16 };
    float f[NF] = {1.9f,  -1.9f,          0.5f,           -0.5f,    2147483520.0f, 2147483648.0f,
                   3e9f,  -2147483648.0f, -3e9f,          INFINITY, -INFINITY,     NAN,
                   -0.0f, 7.0f,           -2147483520.0f, 1e-30f};
    const int32_t f_want[NF] = {1,         -1,        0,           0,         2147483520, INT32_MAX,
                                INT32_MAX, INT32_MIN, INT32_MIN,   INT32_MAX, INT32_MIN,  0,
                                0,         7,         -2147483520, 0};
    int32_t i_out[NF];
    struct tide_tensor_view fin = fview(f, 1, DIMS(NF));
    struct tide_tensor_view iout = view(TIDE_DTYPE_INT32, i_out, 1, DIMS(NF));
    node_init(&t, TIDE_OP_CAST, "to_int");
    t.attrs[TIDE_ATTR_CAST_to].i = TIDE_DTYPE_INT32;
    run(&t, &fin, 1, &iout, 1);
    expect_ints("float to int", i_out, f_want, NF);

    /* 2^24 + 1 and 2^24 + 3 lie halfway between floats: to the even one. */
    enum { NI = 7 };
    int32_t ints[NI] = {0, -7, 16777217, 16777219, INT32_MAX, INT32_MIN, 123456789};
    const float i_want[NI] = {0.0f,          -7.0f,          16777216.0f, 16777220.0f,
                              2147483648.0f, -2147483648.0f, 123456792.0f};
    float f_out[NI];
    struct tide_tensor_view iin = view(TIDE_DTYPE_INT32, ints, 2, DIMS(1, NI));
    struct tide_tensor_view fout = fview(f_out, 2, DIMS(1, NI));
    node_init(&t, TIDE_OP_CAST, "to_float");
    t.attrs[TIDE_ATTR_CAST_to].i = TIDE_DTYPE_FLOAT32;
    run(&t, &iin, 1, &fout, 1);
    expect_exact("int to float", f_out, i_want, NI);

    /* The same dtype: a copy, NaN, -0 and infinities as they are. */
    float copy[NF];
    struct tide_tensor_view cout = fview(copy, 1, DIMS(NF));
    node_init(&t, TIDE_OP_CAST, "float_copy");
    t.attrs[TIDE_ATTR_CAST_to].i = TIDE_DTYPE_FLOAT32;
    run(&t, &fin, 1, &cout, 1);
    expect_exact("float to float", copy, f, NF);
    int32_t icopy[NI];
    struct tide_tensor_view icout = view(TIDE_DTYPE_INT32, icopy, 2, DIMS(1, NI));
    node_init(&t, TIDE_OP_CAST, "int_copy");
    t.attrs[TIDE_ATTR_CAST_to].i = TIDE_DTYPE_INT32;
    run(&t, &iin, 1, &icout, 1);
    expect_ints("int to int", icopy, ints, NI);
}

/*
 * Compare, every mode: float32 [2, 3] against [3] with a NaN (false but
 * for not-equal), -0 against +0 (equal) and -inf; int32 [2, 1] against [3]
 * at the ends of the range, and two ints that one float cannot tell apart.
 */
static void test_compare(void **state)
{
    (void)state;
    struct test_node t;
    float a[6] = {1.0f, NAN, -0.0f, 2.0f, -INFINITY, 3.0f}, b[3] = {1.0f, 1.0f, 0.0f}, y[6];
    struct tide_tensor_view fin[2] = {fview(a, 2, DIMS(2, 3)), fview(b, 1, DIMS(3))};
    struct tide_tensor_view out = fview(y, 2, DIMS(2, 3));
    static const float f_want[TIDE_COMPARISON_COUNT][6] = {
        {1, 0, 1, 0, 0, 0}, /* equal */
        {0, 1, 0, 1, 1, 1}, /* not equal */
        {0, 0, 0, 0, 1, 0}, /* less */
        {1, 0, 1, 0, 1, 0}, /* less or equal */
        {0, 0, 0, 1, 0, 1}, /* greater */
        {1, 0, 1, 1, 0, 1}, /* greater or equal */
    };
    int32_t ia[2] = {3, -5}, ib[3] = {3, INT32_MIN, INT32_MAX};
    struct tide_tensor_view iin[2] = {view(TIDE_DTYPE_INT32, ia, 2, DIMS(2, 1)),
                                      view(TIDE_DTYPE_INT32, ib, 1, DIMS(3))};
    static const float i_want[TIDE_COMPARISON_COUNT][6] = {
        {1, 0, 0, 0, 0, 0}, {0, 1, 1, 1, 1, 1}, {0, 0, 1, 1, 0, 1},
        {1, 0, 1, 1, 0, 1}, {0, 1, 0, 0, 1, 0}, {1, 1, 0, 0, 1, 0},
    };
    int32_t big = 16777217, near = 16777216;
    struct tide_tensor_view bin[2] = {view(TIDE_DTYPE_INT32, &big, 0, NULL),
                                      view(TIDE_DTYPE_INT32, &near, 1, DIMS(1))};
    struct tide_tensor_view bout = fview(y, 1, DIMS(1));
    static const float big_want[TIDE_COMPARISON_COUNT] = {0, 1, 0, 0, 1, 1};
    for (int mode = 0; mode < TIDE_COMPARISON_COUNT; mode++) {
        char what[32];
        node_init(&t, TIDE_OP_COMPARE, "cmp");
        t.attrs[TIDE_ATTR_COMPARE_mode].i = mode;
        snprintf(what, sizeof(what), "float mode %d", mode);
        run(&t, fin, 2, &out, 1);
        expect_exact(what, y, f_want[mode], 6);
        snprintf(what, sizeof(what), "int mode %d", mode);
        run(&t, iin, 2, &out, 1);
        expect_exact(what, y, i_want[mode], 6);
        snprintf(what, sizeof(what), "2^24 + 1 mode %d", mode);
        run(&t, bin, 2, &bout, 1);
        expect_exact(what, y, &big_want[mode], 1);
    }
}

/*
 * Select: cond [4, 1] (1, 0, NaN, -0) over x [3] and a scalar y: a NaN
 * cond takes x, -0 takes y; -inf and NaN pass as they are, from x and y.
 */
static void test_select(void **state)
{
    (void)state;
    struct test_node t;
    float cond[4] = {1.0f, 0.0f, NAN, -0.0f}, x[3] = {-INFINITY, NAN, 5.0f}, y = 7.0f, z[12];
    struct tide_tensor_view in[3] = {fview(cond, 2, DIMS(4, 1)), fview(x, 1, DIMS(3)),
                                     fview(&y, 0, NULL)};
    struct tide_tensor_view out = fview(z, 2, DIMS(4, 3));
    node_init(&t, TIDE_OP_SELECT, "sel");
    run(&t, in, 3, &out, 1);
    const float want[12] = {-INFINITY, NAN, 5, 7, 7, 7, -INFINITY, NAN, 5, 7, 7, 7};
    expect_exact("select", z, want, 12);

    /* cond [3] over x [2, 3] and y [2, 1]: y's -inf and NaN where cond is 0, -0 kept from x. */
    float c2[3] = {0.0f, 0.0f, -2.0f}, x2[6] = {1, 2, -0.0f, 4, 5, 6}, y2[2] = {-INFINITY, NAN};
    float z2[6];
    struct tide_tensor_view in2[3] = {fview(c2, 1, DIMS(3)), fview(x2, 2, DIMS(2, 3)),
                                      fview(y2, 2, DIMS(2, 1))};
    struct tide_tensor_view out2 = fview(z2, 2, DIMS(2, 3));
    run(&t, in2, 3, &out2, 1);
    const float want2[6] = {-INFINITY, -INFINITY, -0.0f, NAN, NAN, 6};
    expect_exact("select y", z2, want2, 6);

    /* Equal shapes, and a long broadcast cut into pieces: the same bits at every thread count. */
    enum { R = 3, C = 20011 };
    float *lc = falloc(C), *lx = falloc(R * C), *ly = falloc(R), *lz = falloc(R * C);
    fill(lc, C, 5);
    for (int k = 0; k < C; k++)
        lc[k] = lc[k] > 0.0f ? 1.0f : 0.0f;
    fill(lx, R * C, 6);
    fill(ly, R, 7);
    struct tide_tensor_view lin[3] = {fview(lc, 1, DIMS(C)), fview(lx, 2, DIMS(R, C)),
                                      fview(ly, 2, DIMS(R, 1))};
    struct tide_tensor_view lout = fview(lz, 2, DIMS(R, C));
    expect_same_at_threads("select long", &t, lin, 3, &lout, 1, NULL, NULL);
    for (int r = 0; r < R; r++) {
        for (int k = 0; k < C; k++) {
            float w = lc[k] != 0.0f ? lx[r * C + k] : ly[r];
            if (memcmp(&lz[r * C + k], &w, sizeof(w)) != 0)
                fail_msg("select long: element (%d, %d) is %g, want %g", r, k, lz[r * C + k], w);
        }
    }
    float *mask = falloc(R * C), *same = falloc(R * C);
    for (int k = 0; k < R * C; k++)
        mask[k] = lx[k] > 0.0f ? 1.0f : 0.0f;
    struct tide_tensor_view sin[3] = {fview(mask, 1, DIMS(R * C)), fview(lx, 1, DIMS(R * C)),
                                      fview(lz, 1, DIMS(R * C))};
    struct tide_tensor_view sout = fview(same, 1, DIMS(R * C));
    expect_same_at_threads("select same", &t, sin, 3, &sout, 1, NULL, NULL);
    for (int k = 0; k < R * C; k++) {
        float w = mask[k] != 0.0f ? lx[k] : lz[k];
        if (memcmp(&same[k], &w, sizeof(w)) != 0)
            fail_msg("select same: element %d is %g, want %g", k, same[k], w);
    }
    free(lc);
    free(lx);
    free(ly);
    free(lz);
    free(mask);
    free(same);
}

/* ---- Trigonometric and hyperbolic functions (Trig, TrigGrad) ---- */

/* fn(x) by libm in double: the reference Trig must equal once rounded to float. */
static double trig_ref(int fn, double x)
{
    static double (*const f[TIDE_TRIG_FUNCTION_COUNT])(double) = {
        sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh};
    return f[fn](x);
}

/* fn'(x), written otherwise than kernels/trig.h where the formula allows. */
static double trig_derivative_ref(int fn, double x)
{
    switch (fn) {
    case TIDE_TRIG_FUNCTION_SIN:
        return cos(x);
    case TIDE_TRIG_FUNCTION_COS:
        return -sin(x);
    case TIDE_TRIG_FUNCTION_TAN:
        return 1.0 + tan(x) * tan(x);
    case TIDE_TRIG_FUNCTION_ASIN:
        return 1.0 / sqrt((1.0 - x) * (1.0 + x));
    case TIDE_TRIG_FUNCTION_ACOS:
        return -1.0 / sqrt((1.0 - x) * (1.0 + x));
    case TIDE_TRIG_FUNCTION_ATAN:
        return 1.0 / (1.0 + x * x);
    case TIDE_TRIG_FUNCTION_SINH:
        return cosh(x);
    case TIDE_TRIG_FUNCTION_COSH:
        return sinh(x);
    case TIDE_TRIG_FUNCTION_ASINH:
        return 1.0 / hypot(x, 1.0);
    case TIDE_TRIG_FUNCTION_ACOSH:
        return 1.0 / sqrt((x - 1.0) * (x + 1.0));
    default:
        return 1.0 / ((1.0 - x) * (1.0 + x));
    }
}

static void run_trig(int fn, float *x, float *y, int64_t n)
{
    struct tide_tensor_view in = fview(x, 1, DIMS(n)), out = fview(y, 1, DIMS(n));
    struct test_node t;
    node_init(&t, TIDE_OP_TRIG, "trig");
    t.attrs[TIDE_ATTR_TRIG_fn].i = fn;
    run(&t, &in, 1, &out, 1);
}

static void run_trig_grad(int fn, float *dy, float *x, float *dx, int64_t n)
{
    struct tide_tensor_view in[2] = {fview(dy, 1, DIMS(n)), fview(x, 1, DIMS(n))};
    struct tide_tensor_view out = fview(dx, 1, DIMS(n));
    struct test_node t;
    node_init(&t, TIDE_OP_TRIG_GRAD, "trig_grad");
    t.attrs[TIDE_ATTR_TRIG_GRAD_fn].i = fn;
    run(&t, in, 2, &out, 1);
}

/*
 * Trig: every fn at points across and beyond its domain is libm's double
 * function rounded once to float (NaN where that is NaN), one value of
 * each against tables, and the edges: asin(1.5), acos(-1.5), acosh(0.5) and
 * atanh(2) NaN, atanh(+-1) +-inf, asin(1) pi/2, sinh(100) past float's range
 * inf. TrigGrad: dy * fn'(x) within float's rounding of the exact value
 * inside each domain, +inf at asin's and atanh's edge, NaN past asin's.
 */
static void test_trig(void **state)
{
    (void)state;
    enum { N = 13 };
    float x[N] = {-2.0f, -1.0f, -0.75f, -0.0f, 0.0f, 0.25f, 0.5f,
                  1.0f,  1.5f,  2.0f,   10.0f, 100.0f, 1e-20f};
    float y[N];
    for (int fn = 0; fn < TIDE_TRIG_FUNCTION_COUNT; fn++) {
        run_trig(fn, x, y, N);
        for (int i = 0; i < N; i++) {
            float want = (float)trig_ref(fn, x[i]);
            if (isnan(want) ? !isnan(y[i]) : memcmp(&y[i], &want, sizeof(float)) != 0)
                fail_msg("trig fn %d at %g is %.9g, want %.9g", fn, x[i], y[i], want);
        }
    }

    /* One value of each from tables: fn at x[6] = 0.5, or 1 or 2 where that reads better. */
    static const struct {
        int fn;
        float x;
        double want;
    } table[] = {
        {TIDE_TRIG_FUNCTION_SIN, 0.5f, 0.479425538604203},
        {TIDE_TRIG_FUNCTION_COS, 0.5f, 0.8775825618903728},
        {TIDE_TRIG_FUNCTION_TAN, 0.5f, 0.5463024898437905},
        {TIDE_TRIG_FUNCTION_ASIN, 0.5f, 0.5235987755982989}, /* pi / 6 */
        {TIDE_TRIG_FUNCTION_ACOS, 0.5f, 1.0471975511965979}, /* pi / 3 */
        {TIDE_TRIG_FUNCTION_ATAN, 1.0f, 0.7853981633974483}, /* pi / 4 */
        {TIDE_TRIG_FUNCTION_SINH, 1.0f, 1.1752011936438014},
        {TIDE_TRIG_FUNCTION_COSH, 1.0f, 1.5430806348152437},
        {TIDE_TRIG_FUNCTION_ASINH, 1.0f, 0.881373587019543},
        {TIDE_TRIG_FUNCTION_ACOSH, 2.0f, 1.3169578969248166},
        {TIDE_TRIG_FUNCTION_ATANH, 0.5f, 0.5493061443340549},
    };
    for (size_t k = 0; k < sizeof(table) / sizeof(table[0]); k++) {
        float in = table[k].x, got;
        run_trig(table[k].fn, &in, &got, 1);
        char what[32];
        snprintf(what, sizeof(what), "trig fn %d table", table[k].fn);
        expect_close(what, &got, &table[k].want, 1, 6e-8, 0);
    }

    /* The edges. */
    float edge_x[9] = {1.5f, -1.5f, 0.5f, 2.0f, 1.0f, -1.0f, 1.0f, 100.0f, -0.0f}, edge_y;
    const int edge_fn[9] = {TIDE_TRIG_FUNCTION_ASIN,  TIDE_TRIG_FUNCTION_ACOS,
                            TIDE_TRIG_FUNCTION_ACOSH, TIDE_TRIG_FUNCTION_ATANH,
                            TIDE_TRIG_FUNCTION_ATANH, TIDE_TRIG_FUNCTION_ATANH,
                            TIDE_TRIG_FUNCTION_ASIN,  TIDE_TRIG_FUNCTION_SINH,
                            TIDE_TRIG_FUNCTION_SIN};
    float edge[9];
    for (int k = 0; k < 9; k++) {
        run_trig(edge_fn[k], &edge_x[k], &edge_y, 1);
        edge[k] = edge_y;
    }
    assert_true(isnan(edge[0]) && isnan(edge[1]) && isnan(edge[2]) && isnan(edge[3]));
    assert_true(isinf(edge[4]) && edge[4] > 0 && isinf(edge[5]) && edge[5] < 0);
    assert_true(edge[6] == (float)(M_PI / 2));
    assert_true(isinf(edge[7]) && edge[7] > 0);
    assert_true(edge[8] == 0.0f && signbit(edge[8])); /* sin(-0) = -0 */

    /* TrigGrad inside each domain: |x| < 1 for asin, acos, atanh; x > 1 for acosh. */
    enum { M = 6 };
    float inside[M] = {-0.9f, -0.3f, 0.0f, 0.2f, 0.6f, 0.95f};
    float beyond_one[M] = {1.01f, 1.25f, 1.5f, 2.0f, 5.0f, 40.0f};
    float dy[M] = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 1.5f}, dx[M];
    double want[M];
    for (int fn = 0; fn < TIDE_TRIG_FUNCTION_COUNT; fn++) {
        float *at = fn == TIDE_TRIG_FUNCTION_ACOSH ? beyond_one : inside;
        run_trig_grad(fn, dy, at, dx, M);
        for (int i = 0; i < M; i++)
            want[i] = dy[i] * trig_derivative_ref(fn, at[i]);
        char what[32];
        snprintf(what, sizeof(what), "trig_grad fn %d", fn);
        expect_close(what, dx, want, M, 1e-7, 0);
    }
    float one = 1.0f, past = 1.5f, unit = 1.0f, g;
    run_trig_grad(TIDE_TRIG_FUNCTION_ASIN, &unit, &one, &g, 1);
    assert_true(isinf(g) && g > 0);
    run_trig_grad(TIDE_TRIG_FUNCTION_ATANH, &unit, &one, &g, 1);
    assert_true(isinf(g) && g > 0);
    run_trig_grad(TIDE_TRIG_FUNCTION_ASIN, &unit, &past, &g, 1);
    assert_true(isnan(g));
}

/*
 * Trig and TrigGrad split over the pool like the other element-wise kernels:
 * the same bytes at 1, 2 and 3 threads, and every element as computed alone.
 */
static void test_range_jobs_trig(void **state)
{
    (void)state;
    const int64_t n = 3 * 16384 + 77;
    float *x = falloc(n), *dy = falloc(n), *y = falloc(n);
    fill(x, n, 41);
    fill(dy, n, 42);
    struct tide_tensor_view in = fview(x, 1, DIMS(n)), out = fview(y, 1, DIMS(n));
    struct test_node t;
    node_init(&t, TIDE_OP_TRIG, "trig");
    t.attrs[TIDE_ATTR_TRIG_fn].i = TIDE_TRIG_FUNCTION_ATANH;
    expect_same_at_threads("trig", &t, &in, 1, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < n; i++) {
        if (y[i] != (float)atanh((double)x[i]))
            fail_msg("trig element %lld is %.9g, want %.9g", (long long)i, y[i],
                     (float)atanh((double)x[i]));
    }
    struct tide_tensor_view gin[2] = {fview(dy, 1, DIMS(n)), fview(x, 1, DIMS(n))};
    node_init(&t, TIDE_OP_TRIG_GRAD, "trig_grad");
    t.attrs[TIDE_ATTR_TRIG_GRAD_fn].i = TIDE_TRIG_FUNCTION_COS;
    expect_same_at_threads("trig_grad", &t, gin, 2, &out, 1, NULL, NULL);
    for (int64_t i = 0; i < n; i++) {
        float want = (float)(-(double)dy[i] * sin((double)x[i]));
        if (y[i] != want)
            fail_msg("trig_grad element %lld is %.9g, want %.9g", (long long)i, y[i], want);
    }
    free(x), free(dy), free(y);
}

/* The math kernels over many pieces: the same bits at every thread count, and the host's values. */
static void test_range_jobs_math(void **state)
{
    (void)state;
    struct test_node t;
    enum { N = 3 * 20011 };
    float *x = falloc(N), *y = falloc(N), *want = falloc(N);
    fill(x, N, 71);
    for (int i = 0; i < N; i++)
        x[i] *= 4.0f;
    struct tide_tensor_view xin = fview(x, 2, DIMS(3, 20011)), xout = fview(y, 2, DIMS(3, 20011));
    node_init(&t, TIDE_OP_EXP, "exp");
    expect_same_at_threads("exp", &t, &xin, 1, &xout, 1, NULL, NULL);
    for (int i = 0; i < N; i++)
        want[i] = expf(x[i]);
    expect_exact("exp", y, want, N);
    node_init(&t, TIDE_OP_GELU, "gelu");
    expect_same_at_threads("gelu", &t, &xin, 1, &xout, 1, NULL, NULL);
    for (int i = 0; i < N; i++) {
        double w = gelu_ref(x[i]);
        if (!(fabs(y[i] - w) <= 1e-6 + 1e-6 * fabs(w)))
            fail_msg("gelu: element %d is %.9g, want %.9g", i, y[i], w);
    }

    /* [37, 1, 97] / [53, 97] and MaxGrad of the same pair: rows of 97 cut mid-axis. */
    enum { I = 37, J = 53, K = 97 };
    float *a = falloc(I * K), *b = falloc(J * K), *z = falloc(I * J * K);
    float *dy = falloc(I * J * K), *da = falloc(I * J * K), *db = falloc(I * J * K);
    float *zwant = falloc(I * J * K);
    fill(a, I * K, 72);
    fill(b, J * K, 73);
    fill(dy, I * J * K, 74);
    struct tide_tensor_view in[3] = {fview(a, 3, DIMS(I, 1, K)), fview(b, 2, DIMS(J, K)),
                                     fview(dy, 3, DIMS(I, J, K))};
    struct tide_tensor_view out = fview(z, 3, DIMS(I, J, K));
    node_init(&t, TIDE_OP_DIV, "div");
    expect_same_at_threads("div broadcast", &t, in, 2, &out, 1, NULL, NULL);
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++)
                zwant[(i * J + j) * K + k] = a[i * K + k] / b[j * K + k];
    expect_exact("div broadcast", z, zwant, I * J * K);

    struct tide_tensor_view outs[2] = {fview(da, 3, DIMS(I, J, K)), fview(db, 3, DIMS(I, J, K))};
    node_init(&t, TIDE_OP_MAX_GRAD, "max_grad");
    expect_same_at_threads("max_grad broadcast", &t, in, 3, outs, 2, NULL, NULL);
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++) {
                int o = (i * J + j) * K + k;
                bool take_b = b[j * K + k] > a[i * K + k];
                if (da[o] != (take_b ? 0.0f : dy[o]) || db[o] != (take_b ? dy[o] : 0.0f))
                    fail_msg("max_grad: element %d is %g, %g", o, da[o], db[o]);
            }

    /* Pow and PowGrad of the same pair, the base made positive, against double references. */
    for (int k = 0; k < I * K; k++)
        a[k] = fabsf(a[k]) + 0.25f;
    node_init(&t, TIDE_OP_POW, "pow");
    expect_same_at_threads("pow broadcast", &t, in, 2, &out, 1, NULL, NULL);
    node_init(&t, TIDE_OP_POW_GRAD, "pow_grad");
    expect_same_at_threads("pow_grad broadcast", &t, in, 3, outs, 2, NULL, NULL);
    for (int i = 0; i < I; i++)
        for (int j = 0; j < J; j++)
            for (int k = 0; k < K; k++) {
                int o = (i * J + j) * K + k;
                double base = a[i * K + k], e = b[j * K + k], g = dy[o];
                double p = pow(base, e);
                double want3[3] = {p, g * e * pow(base, e - 1), g * p * log(base)};
                const float got3[3] = {z[o], da[o], db[o]};
                for (int m = 0; m < 3; m++)
                    if (!(fabs(got3[m] - want3[m]) <= 1e-6 + 1e-5 * fabs(want3[m])))
                        fail_msg("pow broadcast: output %d element %d is %.9g, want %.9g", m, o,
                                 got3[m], want3[m]);
            }
    free(x);
    free(y);
    free(want);
    free(a);
    free(b);
    free(z);
    free(dy);
    free(da);
    free(db);
    free(zwant);
}

/* ---- Rounding to integral values (Round) ---- */

/* x rounded by mode in double by libm (exact: the result is an integral float), as float. */
static float round_ref(int mode, float x)
{
    static double (*const f[TIDE_ROUNDING_COUNT])(double) = {floor, ceil, rint, trunc};
    return (float)f[mode]((double)x);
}

static void run_round(int mode, float *x, float *y, int64_t n)
{
    struct tide_tensor_view in = fview(x, 1, DIMS(n)), out = fview(y, 1, DIMS(n));
    struct test_node t;
    node_init(&t, TIDE_OP_ROUND, "round");
    t.attrs[TIDE_ATTR_ROUND_mode].i = mode;
    run(&t, &in, 1, &out, 1);
}

/* Fails unless got is want bit for bit, or both are NaN. */
static void expect_round_bits(const char *what, int mode, float x, float got, float want)
{
    if (isnan(want) ? !isnan(got) : memcmp(&got, &want, sizeof(float)) != 0)
        fail_msg("%s: mode %d of %.9g is %.9g, want %.9g", what, mode, x, got, want);
}

/*
 * Round: every mode against a hand-worked table (halves both ways, ties to
 * even, the float just under 0.5, values past 2^23 that are integral
 * already, the float just under 2^23 and 2^22 + 0.5, the least subnormals,
 * -0 and values that round to a signed zero, +-inf, NaN), each bit for bit
 * (the sign of a zero included); then every mode against libm's double
 * function on every k / 4 for |k| <= 400 and on random values.
 */
static void test_round(void **state)
{
    (void)state;
    static const struct {
        float x, want[TIDE_ROUNDING_COUNT]; /* floor, ceil, half to even, trunc */
    } table[] = {
        {0.5f, {0.0f, 1.0f, 0.0f, 0.0f}},
        {1.5f, {1.0f, 2.0f, 2.0f, 1.0f}},
        {2.5f, {2.0f, 3.0f, 2.0f, 2.0f}},
        {3.5f, {3.0f, 4.0f, 4.0f, 3.0f}},
        {-0.5f, {-1.0f, -0.0f, -0.0f, -0.0f}},
        {-1.5f, {-2.0f, -1.0f, -2.0f, -1.0f}},
        {-2.5f, {-3.0f, -2.0f, -2.0f, -2.0f}},
        {2.25f, {2.0f, 3.0f, 2.0f, 2.0f}},
        {-2.75f, {-3.0f, -2.0f, -3.0f, -2.0f}},
        {0.49999997f, {0.0f, 1.0f, 0.0f, 0.0f}}, /* floorf(x + 0.5f) would give 1 */
        {4194304.5f, {4194304.0f, 4194305.0f, 4194304.0f, 4194304.0f}},      /* 2^22 + 0.5 */
        {-4194305.5f, {-4194306.0f, -4194305.0f, -4194306.0f, -4194305.0f}}, /* ties to even */
        {8388607.5f, {8388607.0f, 8388608.0f, 8388608.0f, 8388607.0f}},      /* 2^23 - 0.5 */
        {8388609.0f, {8388609.0f, 8388609.0f, 8388609.0f, 8388609.0f}},      /* 2^23 + 1 */
        {1e10f, {1e10f, 1e10f, 1e10f, 1e10f}},
        {-1e10f, {-1e10f, -1e10f, -1e10f, -1e10f}},
        {3.40282347e38f, {3.40282347e38f, 3.40282347e38f, 3.40282347e38f, 3.40282347e38f}},
        {1e-45f, {0.0f, 1.0f, 0.0f, 0.0f}}, /* the least subnormal */
        {-1e-45f, {-1.0f, -0.0f, -0.0f, -0.0f}},
        {0.0f, {0.0f, 0.0f, 0.0f, 0.0f}},
        {-0.0f, {-0.0f, -0.0f, -0.0f, -0.0f}},
        {INFINITY, {INFINITY, INFINITY, INFINITY, INFINITY}},
        {-INFINITY, {-INFINITY, -INFINITY, -INFINITY, -INFINITY}},
        {NAN, {NAN, NAN, NAN, NAN}},
    };
    enum { T = sizeof(table) / sizeof(table[0]) };
    float x[T], y[T];
    for (int i = 0; i < T; i++)
        x[i] = table[i].x;
    for (int mode = 0; mode < TIDE_ROUNDING_COUNT; mode++) {
        run_round(mode, x, y, T);
        for (int i = 0; i < T; i++) {
            expect_round_bits("round table", mode, x[i], y[i], table[i].want[mode]);
            expect_round_bits("round libm", mode, x[i], y[i], round_ref(mode, x[i]));
        }
    }

    /* k / 4 for |k| <= 400: every quarter, half and whole from -100 to 100. */
    enum { Q = 801, R = 1000 };
    float quarters[Q], yq[Q], random[R], yr[R];
    for (int k = 0; k < Q; k++)
        quarters[k] = (float)(k - 400) / 4.0f;
    fill(random, R, 77);
    for (int i = 0; i < R; i++)
        random[i] *= (i % 2 ? 1e3f : 1e7f);
    for (int mode = 0; mode < TIDE_ROUNDING_COUNT; mode++) {
        run_round(mode, quarters, yq, Q);
        for (int k = 0; k < Q; k++)
            expect_round_bits("round quarters", mode, quarters[k], yq[k],
                              round_ref(mode, quarters[k]));
        run_round(mode, random, yr, R);
        for (int i = 0; i < R; i++)
            expect_round_bits("round random", mode, random[i], yr[i], round_ref(mode, random[i]));
    }
}

/*
 * Round splits over the pool like the other element-wise kernels: the same
 * bytes at 1, 2 and 3 threads for every mode, and every element libm's.
 */
static void test_range_jobs_round(void **state)
{
    (void)state;
    const int64_t n = 3 * 16384 + 77;
    float *x = falloc(n), *y = falloc(n);
    fill(x, n, 43);
    for (int64_t i = 0; i < n; i++)
        x[i] = i % 3 ? x[i] * 50.0f : (float)(i % 201 - 100) + 0.5f; /* a third exact halves */
    struct tide_tensor_view in = fview(x, 1, DIMS(n)), out = fview(y, 1, DIMS(n));
    for (int mode = 0; mode < TIDE_ROUNDING_COUNT; mode++) {
        struct test_node t;
        node_init(&t, TIDE_OP_ROUND, "round");
        t.attrs[TIDE_ATTR_ROUND_mode].i = mode;
        expect_same_at_threads("round", &t, &in, 1, &out, 1, NULL, NULL);
        for (int64_t i = 0; i < n; i++) {
            float want = round_ref(mode, x[i]);
            if (memcmp(&y[i], &want, sizeof(float)) != 0)
                fail_msg("round mode %d element %lld of %.9g is %.9g, want %.9g", mode,
                         (long long)i, x[i], y[i], want);
        }
    }
    free(x), free(y);
}

/* ---- Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose) ---- */

/*
 * The naive BatchMatMul in double: y [batch..., m, n] from a and b whose
 * batch dims are aligned with y's from the end (1 or missing: broadcast).
 */
static void naive_batch_matmul(const float *a, int32_t ra, const int64_t *ad, const float *b,
                               int32_t rb, const int64_t *bd, bool ta, bool tb, int32_t ry,
                               const int64_t *yd, double *y)
{
    int64_t m = yd[ry - 2], n = yd[ry - 1], k = ad[ra - (ta ? 2 : 1)];
    int64_t entries = 1;
    for (int32_t d = 0; d < ry - 2; d++)
        entries *= yd[d];
    for (int64_t p = 0; p < entries; p++) {
        /* The matrix of a and of b that entry p reads. */
        int64_t rest = p, a_entry = 0, b_entry = 0, a_scale = 1, b_scale = 1;
        for (int32_t d = ry - 3; d >= 0; d--) {
            int64_t index = rest % yd[d];
            rest /= yd[d];
            int32_t da = d - (ry - ra), db = d - (ry - rb);
            int64_t dim_a = da >= 0 ? ad[da] : 1, dim_b = db >= 0 ? bd[db] : 1;
            a_entry += (dim_a == 1 ? 0 : index) * a_scale;
            b_entry += (dim_b == 1 ? 0 : index) * b_scale;
            a_scale *= dim_a;
            b_scale *= dim_b;
        }
        const float *am = a + a_entry * m * k, *bm = b + b_entry * k * n;
        for (int64_t i = 0; i < m; i++) {
            for (int64_t j = 0; j < n; j++) {
                double sum = 0;
                for (int64_t q = 0; q < k; q++)
                    sum += (double)(ta ? am[q * m + i] : am[i * k + q]) *
                           (tb ? bm[j * k + q] : bm[q * n + j]);
                y[(p * m + i) * n + j] = sum;
            }
        }
    }
}

/*
 * Every transpose form against the double reference, with batch dims that
 * broadcast both ways ([2, 1] against [3]), a rank-2 b and a rank-2 a; and
 * each entry bit for bit what the MatMul kernel gives for that entry's
 * matrices (both are one sgemm with the same operands).
 */
static void test_batch_matmul(void **state)
{
    (void)state;
    enum { M = 5, K = 7, N = 3 };
    float a[2 * M * K], b[3 * K * N], y[6 * M * N], entry[M * N];
    double want[6 * M * N];
    fill(a, 2 * M * K, 81);
    fill(b, 3 * K * N, 82);
    for (int combo = 0; combo < 4; combo++) {
        bool ta = combo & 2, tb = combo & 1;
        int64_t ad[4] = {2, 1, ta ? K : M, ta ? M : K}, bd[3] = {3, tb ? N : K, tb ? K : N};
        int64_t yd[4] = {2, 3, M, N};
        naive_batch_matmul(a, 4, ad, b, 3, bd, ta, tb, 4, yd, want);
        struct test_node t;
        node_init(&t, TIDE_OP_BATCH_MATMUL, "bmm");
        t.attrs[TIDE_ATTR_BATCH_MATMUL_transpose_a].b = ta;
        t.attrs[TIDE_ATTR_BATCH_MATMUL_transpose_b].b = tb;
        struct tide_tensor_view in[2] = {fview(a, 4, ad), fview(b, 3, bd)};
        struct tide_tensor_view out = fview(y, 4, yd);
        run(&t, in, 2, &out, 1);
        expect_close("batch_matmul", y, want, 6 * M * N, 1e-5, 1e-6);

        for (int p = 0; p < 6; p++) {
            struct test_node mm;
            node_init(&mm, TIDE_OP_MATMUL, "mm");
            mm.attrs[TIDE_ATTR_MATMUL_transpose_a].b = ta;
            mm.attrs[TIDE_ATTR_MATMUL_transpose_b].b = tb;
            struct tide_tensor_view mm_in[2] = {fview(a + p / 3 * M * K, 2, ad + 2),
                                                fview(b + p % 3 * K * N, 2, bd + 1)};
            struct tide_tensor_view mm_out = fview(entry, 2, DIMS(M, N));
            run(&mm, mm_in, 2, &mm_out, 1);
            expect_exact("batch_matmul entry", y + p * M * N, entry, M * N);
        }
    }

    /* [2, M, K] x a rank-2 [K, N], and a rank-2 [M, K] x [3, K, N]. */
    struct test_node t;
    node_init(&t, TIDE_OP_BATCH_MATMUL, "weight");
    struct tide_tensor_view in[2] = {fview(a, 3, DIMS(2, M, K)), fview(b, 2, DIMS(K, N))};
    struct tide_tensor_view out = fview(y, 3, DIMS(2, M, N));
    naive_batch_matmul(a, 3, DIMS(2, M, K), b, 2, DIMS(K, N), false, false, 3, DIMS(2, M, N), want);
    run(&t, in, 2, &out, 1);
    expect_close("batch_matmul weight", y, want, 2 * M * N, 1e-5, 1e-6);
    node_init(&t, TIDE_OP_BATCH_MATMUL, "left");
    in[0] = fview(a, 2, DIMS(M, K));
    in[1] = fview(b, 3, DIMS(3, K, N));
    out = fview(y, 3, DIMS(3, M, N));
    naive_batch_matmul(a, 2, DIMS(M, K), b, 3, DIMS(3, K, N), false, false, 3, DIMS(3, M, N), want);
    run(&t, in, 2, &out, 1);
    expect_close("batch_matmul left", y, want, 3 * M * N, 1e-5, 1e-6);

    /* An empty inner dimension gives zeros (over garbage). */
    for (int i = 0; i < 2 * M * N; i++)
        y[i] = NAN;
    node_init(&t, TIDE_OP_BATCH_MATMUL, "empty");
    in[0] = fview(a, 3, DIMS(2, M, 0));
    in[1] = fview(b, 3, DIMS(2, 0, N));
    out = fview(y, 3, DIMS(2, M, N));
    run(&t, in, 2, &out, 1);
    for (int i = 0; i < 2 * M * N; i++)
        assert_true(y[i] == 0.0f);
}

/*
 * The pool's items at 1, 2 and 3 threads: two large entries split into
 * blocks of rows, one wide entry split into blocks of columns, and 1001 small
 * entries grouped several to a piece; each against the double reference.
 */
static void test_batch_matmul_threads(void **state)
{
    (void)state;
    static const struct {
        int32_t ra, rb;
        int64_t a[3], b[3], y[3];
        bool tb;
    } cases[] = {
        {3, 2, {2, 300, 70}, {70, 90}, {2, 300, 90}, false},
        {3, 3, {1, 50, 200}, {1, 400, 200}, {1, 50, 400}, true},
        {3, 3, {1001, 16, 24}, {1001, 24, 20}, {1001, 16, 20}, false},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        struct tide_shape as = tide_shape_make(cases[c].ra, cases[c].a);
        struct tide_shape bs = tide_shape_make(cases[c].rb, cases[c].b);
        struct tide_shape ys = tide_shape_make(3, cases[c].y);
        int64_t na = tide_shape_numel(&as), nb = tide_shape_numel(&bs), ny = tide_shape_numel(&ys);
        float *a = falloc(na), *b = falloc(nb), *y = falloc(ny);
        double *want = dalloc(ny);
        fill(a, na, 91 + (uint32_t)c);
        fill(b, nb, 95 + (uint32_t)c);
        struct test_node t;
        node_init(&t, TIDE_OP_BATCH_MATMUL, "bmm");
        t.attrs[TIDE_ATTR_BATCH_MATMUL_transpose_b].b = cases[c].tb;
        struct tide_tensor_view in[2] = {fview(a, cases[c].ra, cases[c].a),
                                         fview(b, cases[c].rb, cases[c].b)};
        struct tide_tensor_view out = fview(y, 3, cases[c].y);
        expect_same_at_threads("batch_matmul", &t, in, 2, &out, 1, NULL, NULL);
        naive_batch_matmul(a, cases[c].ra, cases[c].a, b, cases[c].rb, cases[c].b, false,
                           cases[c].tb, 3, cases[c].y, want);
        expect_close("batch_matmul threads", y, want, ny, 1e-4, 1e-5);
        free(a);
        free(b);
        free(y);
        free(want);
    }
}

/* The naive Transpose: y[i] = x[the element of x that output index i names], by element size. */
static void naive_transpose(const void *x, int32_t rank, const int64_t *xd, const int64_t *perm,
                            void *y, size_t esize)
{
    int64_t yd[TIDE_MAX_RANK], stride[TIDE_MAX_RANK], n = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        stride[d] = n;
        n *= xd[d];
    }
    for (int32_t i = 0; i < rank; i++)
        yd[i] = xd[perm[i]];
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i, offset = 0;
        for (int32_t d = rank - 1; d >= 0; d--) {
            offset += rest % yd[d] * stride[perm[d]];
            rest /= yd[d];
        }
        memcpy((char *)y + (size_t)i * esize, (const char *)x + (size_t)offset * esize, esize);
    }
}

/* Runs Transpose of x (float32 or int32) by perm and compares y with the naive copy bit for bit. */
static void check_transpose(const char *what, enum tide_dtype dtype, int32_t rank,
                            const int64_t *xd, const int64_t *perm, bool at_threads)
{
    struct tide_shape xs = tide_shape_make(rank, xd);
    int64_t n = tide_shape_numel(&xs), yd[TIDE_MAX_RANK];
    for (int32_t i = 0; i < rank; i++)
        yd[i] = xd[perm[i]];
    uint32_t *x = malloc((size_t)(n > 0 ? n : 1) * 4), *y = malloc((size_t)(n > 0 ? n : 1) * 4);
    uint32_t *want = malloc((size_t)(n > 0 ? n : 1) * 4);
    assert_true(x && y && want);
    for (int64_t i = 0; i < n; i++) /* distinct values; as floats, NaN payloads among them */
        x[i] = (uint32_t)i * 2654435761u;
    memset(y, 0xa5, (size_t)(n > 0 ? n : 1) * 4);
    naive_transpose(x, rank, xd, perm, want, 4);
    struct test_node t;
    node_init(&t, TIDE_OP_TRANSPOSE, what);
    set_ints(&t, TIDE_ATTR_TRANSPOSE_perm, rank, perm);
    struct tide_tensor_view in = view(dtype, x, rank, xd), out = view(dtype, y, rank, yd);
    if (at_threads)
        expect_same_at_threads(what, &t, &in, 1, &out, 1, NULL, NULL);
    else
        run(&t, &in, 1, &out, 1);
    if (n > 0 && memcmp(y, want, (size_t)n * 4) != 0)
        fail_msg("%s: the output differs from the naive transpose", what);
    free(x);
    free(y);
    free(want);
}

/*
 * Transpose moves every element to where the naive index arithmetic says,
 * bit for bit: rotations (strided gathers), the last axis kept (rows copied
 * whole), axes of 1 dropped, the identity and an order that merges into it,
 * int32, a scalar, an empty tensor; and large cases at 1, 2 and 3 threads.
 */
static void test_transpose(void **state)
{
    (void)state;
    check_transpose("rotate", TIDE_DTYPE_FLOAT32, 3, DIMS(2, 3, 4), DIMS(2, 0, 1), false);
    check_transpose("rotate_back", TIDE_DTYPE_FLOAT32, 3, DIMS(2, 3, 4), DIMS(1, 2, 0), false);
    check_transpose("matrix", TIDE_DTYPE_INT32, 2, DIMS(5, 7), DIMS(1, 0), false);
    check_transpose("heads", TIDE_DTYPE_FLOAT32, 4, DIMS(2, 3, 4, 5), DIMS(0, 2, 1, 3), false);
    check_transpose("reverse", TIDE_DTYPE_FLOAT32, 5, DIMS(2, 3, 1, 4, 5), DIMS(4, 3, 2, 1, 0),
                    false);
    check_transpose("merged", TIDE_DTYPE_FLOAT32, 4, DIMS(2, 3, 4, 5), DIMS(2, 3, 0, 1), false);
    check_transpose("unit_axis", TIDE_DTYPE_INT32, 3, DIMS(4, 1, 6), DIMS(1, 0, 2), false);
    check_transpose("identity", TIDE_DTYPE_FLOAT32, 3, DIMS(2, 3, 4), DIMS(0, 1, 2), false);
    check_transpose("all_ones", TIDE_DTYPE_FLOAT32, 2, DIMS(1, 1), DIMS(1, 0), false);
    check_transpose("scalar", TIDE_DTYPE_FLOAT32, 0, NULL, NULL, false);
    check_transpose("empty", TIDE_DTYPE_FLOAT32, 3, DIMS(2, 0, 3), DIMS(2, 1, 0), false);
    check_transpose("threads_gather", TIDE_DTYPE_FLOAT32, 3, DIMS(5, 1031, 37), DIMS(0, 2, 1),
                    true);
    check_transpose("threads_rows", TIDE_DTYPE_INT32, 4, DIMS(3, 97, 11, 53), DIMS(0, 2, 1, 3),
                    true);
}

/* ---- Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing) ---- */

static void set_int(struct test_node *t, int k, int64_t v)
{
    t->attrs[k].present = true;
    t->attrs[k].i = v;
}

/* Runs t expecting TIDE_INVALID with a message naming the node and holding want. */
static void expect_refused(struct test_node *t, const struct tide_tensor_view *in, uint32_t n_in,
                           const struct tide_tensor_view *out, uint32_t n_out, const char *want)
{
    struct tide_error err = {0};
    char node[80];
    snprintf(node, sizeof(node), "node \"%s\"", t->node.name);
    assert_int_equal(run_step(t, in, n_in, out, n_out, NULL, &err), TIDE_INVALID);
    if (!strstr(err.message, node) || !strstr(err.message, want))
        fail_msg("unexpected message (want %s and '%s'): %s", node, want, err.message);
}

static void test_gather(void **state)
{
    (void)state;
    float table[15], y[12];
    for (int i = 0; i < 15; i++)
        table[i] = (float)(10 * (i / 3) + i % 3); /* row r is r0, r1, r2 */
    int32_t ids[4] = {4, 0, 4, 2};
    struct tide_tensor_view in[2] = {fview(table, 2, DIMS(5, 3)),
                                     view(TIDE_DTYPE_INT32, ids, 2, DIMS(2, 2))};
    struct tide_tensor_view out = fview(y, 3, DIMS(2, 2, 3));
    struct test_node t;
    node_init(&t, TIDE_OP_GATHER, "gather");
    run(&t, in, 2, &out, 1);
    const float want[12] = {40, 41, 42, 0, 1, 2, 40, 41, 42, 20, 21, 22};
    expect_exact("gather", y, want, 12);

    /* A scalar id picks one row. */
    int32_t one = 3;
    struct tide_tensor_view in1[2] = {in[0], view(TIDE_DTYPE_INT32, &one, 0, NULL)};
    struct tide_tensor_view out1 = fview(y, 1, DIMS(3));
    run(&t, in1, 2, &out1, 1);
    expect_exact("gather scalar id", y, (const float[]){30, 31, 32}, 3);

    /* Ids outside [0, N) are refused, naming the first. */
    ids[1] = 5;
    ids[3] = -1;
    expect_refused(&t, in, 2, &out, 1,
                   "input 1 (ids): index 5 at position 1 is out of range [0, 5)");
    ids[1] = 0;
    expect_refused(&t, in, 2, &out, 1, "index -1 at position 3 is out of range [0, 5)");
}

static void test_gather_grad(void **state)
{
    (void)state;
    float dy[8] = {1, 2, 10, 20, 100, 200, 1000, 2000}, dx[10];
    int32_t ids[4] = {3, 1, 3, 3};
    struct tide_tensor_view in[2] = {fview(dy, 2, DIMS(4, 2)),
                                     view(TIDE_DTYPE_INT32, ids, 1, DIMS(4))};
    struct tide_tensor_view out = fview(dx, 2, DIMS(5, 2));
    struct test_node t;
    node_init(&t, TIDE_OP_GATHER_GRAD, "gather_grad");
    set_int(&t, TIDE_ATTR_GATHER_GRAD_num_rows, 5);
    memset(dx, 0xff, sizeof(dx));
    run(&t, in, 2, &out, 1);
    /* Row 3 gets positions 0, 2 and 3; row 1 position 1; rows 0, 2 and 4 nothing. */
    const float want[10] = {0, 0, 10, 20, 0, 0, 1101, 2202, 0, 0};
    expect_exact("gather_grad", dx, want, 10);

    ids[2] = 5;
    expect_refused(&t, in, 2, &out, 1,
                   "input 1 (ids): index 5 at position 2 is out of range [0, 5)");

    /* Rows of no elements: nothing to sum, and no workspace asked for however many rows. */
    ids[2] = 3;
    struct tide_tensor_view ein[2] = {fview(dy, 2, DIMS(4, 0)), in[1]};
    struct tide_tensor_view eout = fview(dx, 2, DIMS((int64_t)1 << 40, 0));
    set_int(&t, TIDE_ATTR_GATHER_GRAD_num_rows, (int64_t)1 << 40);
    run(&t, ein, 2, &eout, 1);
}

static void test_gather_elements(void **state)
{
    (void)state;
    float data[12], y[8];
    for (int i = 0; i < 12; i++)
        data[i] = (float)(10 * (i / 4) + i % 4); /* data[r][c] = 10 r + c */
    /* Axis 0, negative indices counting from the end. */
    int32_t idx[8] = {2, 0, 1, -1, 0, -3, 2, 1};
    struct tide_tensor_view in[2] = {fview(data, 2, DIMS(3, 4)),
                                     view(TIDE_DTYPE_INT32, idx, 2, DIMS(2, 4))};
    struct tide_tensor_view out = fview(y, 2, DIMS(2, 4));
    struct test_node t;
    node_init(&t, TIDE_OP_GATHER_ELEMENTS, "gather_elements");
    run(&t, in, 2, &out, 1);
    expect_exact("gather_elements axis 0", y, (const float[]){20, 1, 12, 23, 0, 1, 22, 13}, 8);

    /* Axis 1, indices [2, 2]: fewer rows and columns than data. */
    int32_t idx1[4] = {3, 0, -1, 1};
    struct tide_tensor_view in1[2] = {in[0], view(TIDE_DTYPE_INT32, idx1, 2, DIMS(2, 2))};
    struct tide_tensor_view out1 = fview(y, 2, DIMS(2, 2));
    set_int(&t, TIDE_ATTR_GATHER_ELEMENTS_axis, 1);
    run(&t, in1, 2, &out1, 1);
    expect_exact("gather_elements axis 1", y, (const float[]){3, 0, 13, 11}, 4);

    /* ignore_index -1: compared before the wrap-around, so -1 gives 0, not the last column. */
    set_int(&t, TIDE_ATTR_GATHER_ELEMENTS_ignore_index, -1);
    idx1[1] = -1;
    run(&t, in1, 2, &out1, 1);
    expect_exact("gather_elements ignore_index", y, (const float[]){3, 0, 0, 11}, 4);

    /* Out of [-4, 4) along axis 1: refused, naming the first; an ignored -1 is not. */
    idx1[2] = 4;
    expect_refused(&t, in1, 2, &out1, 1,
                   "input 1 (indices): index 4 at position 2 is out of range [-4, 4)");
    idx1[2] = 0;
    idx1[3] = -5;
    expect_refused(&t, in1, 2, &out1, 1, "index -5 at position 3 is out of range [-4, 4)");
}

static void test_gather_elements_grad(void **state)
{
    (void)state;
    float dy[8] = {1, 2, 3, 4, 10, 20, 30, 40}, dx[12];
    int32_t idx[8] = {2, 0, 1, -1, 2, 0, -3, 2};
    struct tide_tensor_view in[2] = {fview(dy, 2, DIMS(2, 4)),
                                     view(TIDE_DTYPE_INT32, idx, 2, DIMS(2, 4))};
    struct tide_tensor_view out = fview(dx, 2, DIMS(3, 4));
    struct test_node t;
    node_init(&t, TIDE_OP_GATHER_ELEMENTS_GRAD, "gather_elements_grad");
    set_shape(&t, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, 2, DIMS(3, 4));
    memset(dx, 0xff, sizeof(dx));
    run(&t, in, 2, &out, 1);
    /* Column 0 sends both to row 2, column 1 both to row 0, column 3 (-1 and 2) both to row 2. */
    expect_exact("gather_elements_grad", dx,
                 (const float[]){0, 22, 30, 0, 0, 0, 3, 0, 11, 0, 0, 44}, 12);

    /* ignore_index 2: the 2s add nothing, the -1 (row 2 too, but not equal to 2) does. */
    set_int(&t, TIDE_ATTR_GATHER_ELEMENTS_GRAD_ignore_index, 2);
    memset(dx, 0xff, sizeof(dx));
    run(&t, in, 2, &out, 1);
    expect_exact("gather_elements_grad ignore_index", dx,
                 (const float[]){0, 22, 30, 0, 0, 0, 3, 0, 0, 0, 0, 4}, 12);

    /* Axis 1 with dy [2, 2]: row 2 and columns 1 and 2 are outside it, and stay 0. */
    int32_t idx1[4] = {3, 3, 0, -4};
    float dy1[4] = {1, 2, 5, 7};
    struct tide_tensor_view in1[2] = {fview(dy1, 2, DIMS(2, 2)),
                                      view(TIDE_DTYPE_INT32, idx1, 2, DIMS(2, 2))};
    node_init(&t, TIDE_OP_GATHER_ELEMENTS_GRAD, "gather_elements_grad");
    set_shape(&t, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, 2, DIMS(3, 4));
    set_int(&t, TIDE_ATTR_GATHER_ELEMENTS_GRAD_axis, 1);
    memset(dx, 0xff, sizeof(dx));
    run(&t, in1, 2, &out, 1);
    expect_exact("gather_elements_grad axis 1", dx,
                 (const float[]){0, 0, 0, 3, 12, 0, 0, 0, 0, 0, 0, 0}, 12);

    idx1[1] = -5;
    expect_refused(&t, in1, 2, &out, 1,
                   "input 1 (indices): index -5 at position 1 is out of range [-4, 4)");
}

/* TopK's order, written independently: by value descending, NaN first, ties by lower index. */
static int naive_rank_cmp(const float *x, int32_t a, int32_t b)
{
    bool na = isnan(x[a]), nb = isnan(x[b]);
    if (na != nb)
        return na ? -1 : 1;
    if (!na && x[a] != x[b])
        return x[a] > x[b] ? -1 : 1;
    return a < b ? -1 : 1;
}

static void test_top_k(void **state)
{
    (void)state;
    /* Ties (3 three times, -0 and +0), NaN, and a row already sorted. */
    float x[12] = {1, 3, 3, NAN, -2, 3, 0, -0.0f, 5, 4, 3, 2}, v[8];
    int32_t ix[8];
    struct tide_tensor_view in = fview(x, 2, DIMS(2, 6));
    struct tide_tensor_view out[2] = {fview(v, 2, DIMS(2, 4)),
                                      view(TIDE_DTYPE_INT32, ix, 2, DIMS(2, 4))};
    struct test_node t;
    node_init(&t, TIDE_OP_TOP_K, "top_k");
    set_int(&t, TIDE_ATTR_TOP_K_k, 4);
    run(&t, &in, 1, out, 2);
    const int32_t want_ix[8] = {3, 1, 2, 5, 2, 3, 4, 5};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(ix[i], want_ix[i]);
        if (i == 0)
            assert_true(isnan(v[0]));
        else
            assert_true(memcmp(&v[i], &x[(i / 4) * 6 + ix[i]], sizeof(float)) == 0);
    }

    /* k = 1 of a row of equal values takes the first. */
    float same[4] = {7, 7, 7, 7}, v1;
    int32_t i1 = -5;
    struct tide_tensor_view in1 = fview(same, 1, DIMS(4));
    struct tide_tensor_view out1[2] = {fview(&v1, 1, DIMS(1)),
                                       view(TIDE_DTYPE_INT32, &i1, 1, DIMS(1))};
    set_int(&t, TIDE_ATTR_TOP_K_k, 1);
    run(&t, &in1, 1, out1, 2);
    assert_int_equal(i1, 0);
    assert_true(v1 == 7.0f);

    /* Many rows with ties, against a full sort, at 1, 2 and 3 threads. */
    enum { ROWS = 600, N = 50, K = 7 };
    float *big = falloc(ROWS * N), *bv = falloc(ROWS * K);
    int32_t *bi = malloc(ROWS * K * sizeof(int32_t));
    assert_non_null(bi);
    uint32_t seed = 99;
    for (int i = 0; i < ROWS * N; i++)
        big[i] = roundf(frand(&seed) * 8.0f) / 8.0f; /* 17 levels: many ties */
    struct tide_tensor_view bin = fview(big, 2, DIMS(ROWS, N));
    struct tide_tensor_view bout[2] = {fview(bv, 2, DIMS(ROWS, K)),
                                       view(TIDE_DTYPE_INT32, bi, 2, DIMS(ROWS, K))};
    set_int(&t, TIDE_ATTR_TOP_K_k, K);
    expect_same_at_threads("top_k", &t, &bin, 1, bout, 2, NULL, NULL);
    for (int r = 0; r < ROWS; r++) {
        const float *row = big + r * N;
        int32_t order[N];
        for (int j = 0; j < N; j++)
            order[j] = j;
        for (int a = 1; a < N; a++) /* insertion sort by naive_rank_cmp */
            for (int b = a; b > 0 && naive_rank_cmp(row, order[b], order[b - 1]) < 0; b--) {
                int32_t s = order[b];
                order[b] = order[b - 1];
                order[b - 1] = s;
            }
        for (int j = 0; j < K; j++) {
            if (bi[r * K + j] != order[j] || bv[r * K + j] != row[order[j]])
                fail_msg("top_k row %d entry %d: index %d value %g, want %d %g", r, j,
                         bi[r * K + j], bv[r * K + j], order[j], row[order[j]]);
        }
    }
    free(big);
    free(bv);
    free(bi);
}

static void test_top_k_grad(void **state)
{
    (void)state;
    float dv[4] = {1.5f, -2, 3, 4}, dx[10];
    int32_t ix[4] = {4, 1, 0, 0}; /* a repeated index (not from TopK) adds up */
    struct tide_tensor_view in[2] = {fview(dv, 2, DIMS(2, 2)),
                                     view(TIDE_DTYPE_INT32, ix, 2, DIMS(2, 2))};
    struct tide_tensor_view out = fview(dx, 2, DIMS(2, 5));
    struct test_node t;
    node_init(&t, TIDE_OP_TOP_K_GRAD, "top_k_grad");
    set_shape(&t, TIDE_ATTR_TOP_K_GRAD_shape, 2, DIMS(2, 5));
    memset(dx, 0xff, sizeof(dx));
    run(&t, in, 2, &out, 1);
    const float want[10] = {0, -2, 0, 0, 1.5f, 7, 0, 0, 0, 0};
    expect_exact("top_k_grad", dx, want, 10);

    ix[1] = 5;
    expect_refused(&t, in, 2, &out, 1,
                   "input 1 (indices): index 5 at position 1 is out of range [0, 5)");
}

/* Runs MoeRoute over indices [tokens, k] and checks both tables exactly. */
static void check_moe_route(const char *what, const int32_t *indices, int64_t tokens, int64_t k,
                            int64_t experts, int64_t capacity, const int32_t *want_dispatch,
                            const int32_t *want_combine)
{
    int64_t slots = experts * capacity;
    int32_t dispatch[64], combine[64];
    assert_true(slots <= 64 && tokens * k <= 64);
    memset(dispatch, 0xa5, sizeof(dispatch));
    memset(combine, 0xa5, sizeof(combine));
    struct tide_tensor_view in = view(TIDE_DTYPE_INT32, (void *)indices, 2, DIMS(tokens, k));
    struct tide_tensor_view out[2] = {view(TIDE_DTYPE_INT32, dispatch, 1, DIMS(slots)),
                                      view(TIDE_DTYPE_INT32, combine, 2, DIMS(tokens, k))};
    struct test_node t;
    node_init(&t, TIDE_OP_MOE_ROUTE, "route");
    set_int(&t, TIDE_ATTR_MOE_ROUTE_experts, experts);
    set_int(&t, TIDE_ATTR_MOE_ROUTE_capacity, capacity);
    run(&t, &in, 1, out, 2);
    for (int64_t s = 0; s < slots; s++)
        if (dispatch[s] != want_dispatch[s])
            fail_msg("%s: dispatch[%lld] is %d, want %d", what, (long long)s, dispatch[s],
                     want_dispatch[s]);
    for (int64_t i = 0; i < tokens * k; i++)
        if (combine[i] != want_combine[i])
            fail_msg("%s: combine[%lld] is %d, want %d", what, (long long)i, combine[i],
                     want_combine[i]);
}

static void test_moe_route(void **state)
{
    (void)state;
    /*
     * 5 tokens, 2 choices, 3 experts of 2 slots. First choices in token
     * order: t0 -> e0 slot 0, t1 -> e0 slot 1, t2 -> e0 full (dropped),
     * t3 -> e1 slot 2, t4 -> e2 slot 4. Then second choices: t0 -> e1 slot 3,
     * t1 -> e2 slot 5, t2 -> e1 full, t3 -> e0 full, t4 -> e1 full.
     */
    const int32_t priority[10] = {0, 1, 0, 2, 0, 1, 1, 0, 2, 1};
    check_moe_route("priority and overflow", priority, 5, 2, 3, 2,
                    (const int32_t[]){0, 1, 3, 0, 4, 1},
                    (const int32_t[]){0, 3, 1, 5, 6, 6, 2, 6, 4, 6});

    /* Empty slots hold T; experts nobody chose stay empty. */
    const int32_t sparse[2] = {2, 2};
    check_moe_route("empty slots", sparse, 2, 1, 4, 3,
                    (const int32_t[]){2, 2, 2, 2, 2, 2, 0, 1, 2, 2, 2, 2}, (const int32_t[]){6, 7});

    /* Capacity enough for everyone: slots follow the priority order within each expert. */
    const int32_t roomy[6] = {1, 0, 0, 1, 1, 0};
    check_moe_route("no overflow", roomy, 3, 2, 2, 3, (const int32_t[]){1, 0, 2, 0, 2, 1},
                    (const int32_t[]){3, 1, 0, 5, 4, 2});

    /* An expert outside [0, experts) is refused, naming the first. */
    int32_t bad[4] = {0, 1, 3, 0}, dispatch[6], combine[4];
    struct tide_tensor_view in = view(TIDE_DTYPE_INT32, bad, 2, DIMS(2, 2));
    struct tide_tensor_view out[2] = {view(TIDE_DTYPE_INT32, dispatch, 1, DIMS(6)),
                                      view(TIDE_DTYPE_INT32, combine, 2, DIMS(2, 2))};
    struct test_node t;
    node_init(&t, TIDE_OP_MOE_ROUTE, "route");
    set_int(&t, TIDE_ATTR_MOE_ROUTE_experts, 3);
    set_int(&t, TIDE_ATTR_MOE_ROUTE_capacity, 2);
    expect_refused(&t, &in, 1, out, 2,
                   "input 0 (indices): index 3 at position 2 is out of range [0, 3)");
}

/* Gather and GatherGrad split over the pool: the same bits at 1, 2 and 3 threads. */
static void test_range_jobs_gather(void **state)
{
    (void)state;
    enum { ROWS = 40, WIDTH = 700, IDS = 300 };
    float *table = falloc(ROWS * WIDTH), *y = falloc(IDS * WIDTH), *dx = falloc(ROWS * WIDTH);
    int32_t ids[IDS];
    uint32_t seed = 7;
    fill(table, ROWS * WIDTH, 3);
    for (int p = 0; p < IDS; p++)
        ids[p] = (int32_t)((frand(&seed) + 1.0f) * 0.5f * ROWS) % ROWS;
    struct tide_tensor_view in[2] = {fview(table, 2, DIMS(ROWS, WIDTH)),
                                     view(TIDE_DTYPE_INT32, ids, 1, DIMS(IDS))};
    struct tide_tensor_view out = fview(y, 2, DIMS(IDS, WIDTH));
    struct test_node t;
    node_init(&t, TIDE_OP_GATHER, "gather");
    expect_same_at_threads("gather", &t, in, 2, &out, 1, NULL, NULL);
    for (int p = 0; p < IDS; p++)
        expect_exact("gather row", y + p * WIDTH, table + ids[p] * WIDTH, WIDTH);

    /* The gradient of that Gather, dy = y: each table row, summed in double in position order. */
    struct tide_tensor_view gin[2] = {fview(y, 2, DIMS(IDS, WIDTH)), in[1]};
    struct tide_tensor_view gout = fview(dx, 2, DIMS(ROWS, WIDTH));
    node_init(&t, TIDE_OP_GATHER_GRAD, "gather_grad");
    set_int(&t, TIDE_ATTR_GATHER_GRAD_num_rows, ROWS);
    expect_same_at_threads("gather_grad", &t, gin, 2, &gout, 1, NULL, NULL);
    double *want = dalloc(ROWS * WIDTH);
    for (int p = 0; p < IDS; p++)
        for (int c = 0; c < WIDTH; c++)
            want[ids[p] * WIDTH + c] += y[p * WIDTH + c];
    for (int i = 0; i < ROWS * WIDTH; i++)
        if (dx[i] != (float)want[i])
            fail_msg("gather_grad element %d is %.9g, want %.9g", i, dx[i], (float)want[i]);
    free(want);
    free(table);
    free(y);
    free(dx);
}

/*
 * GatherElements and its gradient split over the pool, along axis 0 (columns
 * strided) and axis 1 (columns contiguous): the same bits at 1, 2 and 3
 * threads, and the gradient equal to sums made here in the same order.
 */
static void test_range_jobs_gather_elements(void **state)
{
    (void)state;
    enum { ROWS = 40, COLS = 300, N = 120 };
    for (int axis = 0; axis < 2; axis++) {
        int64_t d = axis == 0 ? ROWS : COLS;
        int64_t irows = axis == 0 ? N : ROWS, icols = axis == 0 ? COLS : N;
        float *data = falloc(ROWS * COLS), *y = falloc(irows * icols), *dx = falloc(ROWS * COLS);
        float *want = falloc(ROWS * COLS);
        int32_t *idx = malloc((size_t)(irows * icols) * sizeof(int32_t));
        assert_non_null(idx);
        uint32_t seed = 11;
        fill(data, ROWS * COLS, 5);
        for (int64_t p = 0; p < irows * icols; p++) /* in [-d, d): both signs */
            idx[p] = (int32_t)((int64_t)((frand(&seed) + 1.0f) * (float)d) % (2 * d) - d);
        struct tide_tensor_view in[2] = {fview(data, 2, DIMS(ROWS, COLS)),
                                         view(TIDE_DTYPE_INT32, idx, 2, DIMS(irows, icols))};
        struct tide_tensor_view out = fview(y, 2, DIMS(irows, icols));
        struct test_node t;
        node_init(&t, TIDE_OP_GATHER_ELEMENTS, "gather_elements");
        set_int(&t, TIDE_ATTR_GATHER_ELEMENTS_axis, axis);
        expect_same_at_threads("gather_elements", &t, in, 2, &out, 1, NULL, NULL);
        for (int64_t r = 0; r < irows; r++)
            for (int64_t c = 0; c < icols; c++) {
                int64_t v = idx[r * icols + c], w = v < 0 ? v + d : v;
                float expect = axis == 0 ? data[w * COLS + c] : data[r * COLS + w];
                if (y[r * icols + c] != expect)
                    fail_msg("gather_elements axis %d [%lld][%lld] is %.9g, want %.9g", axis,
                             (long long)r, (long long)c, y[r * icols + c], expect);
            }

        struct tide_tensor_view gin[2] = {fview(y, 2, DIMS(irows, icols)), in[1]};
        struct tide_tensor_view gout = fview(dx, 2, DIMS(ROWS, COLS));
        node_init(&t, TIDE_OP_GATHER_ELEMENTS_GRAD, "gather_elements_grad");
        set_int(&t, TIDE_ATTR_GATHER_ELEMENTS_GRAD_axis, axis);
        set_shape(&t, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, 2, DIMS(ROWS, COLS));
        expect_same_at_threads("gather_elements_grad", &t, gin, 2, &gout, 1, NULL, NULL);
        memset(want, 0, (size_t)(ROWS * COLS) * sizeof(float));
        /* Float sums in ascending order along the axis, per column, as the kernel promises. */
        for (int64_t j = 0; j < (axis == 0 ? irows : icols); j++)
            for (int64_t k = 0; k < (axis == 0 ? icols : irows); k++) {
                int64_t p = axis == 0 ? j * icols + k : k * icols + j;
                int64_t v = idx[p], w = v < 0 ? v + d : v;
                want[axis == 0 ? w * COLS + k : k * COLS + w] += y[p];
            }
        expect_exact("gather_elements_grad", dx, want, ROWS * COLS);
        free(idx);
        free(want);
        free(data);
        free(y);
        free(dx);
    }
}

/* ---- Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout) ---- */

/*
 * LayerNorm's forward in double, straight from its definition: per row of
 * d, xhat = (x - mean) / sqrt(var + eps), y = xhat * gain + bias.
 */
static void layer_norm_reference(const float *x, const float *gain, const float *bias, int64_t rows,
                                 int64_t d, double eps, double *y, double *mean, double *inv_std)
{
    for (int64_t r = 0; r < rows; r++) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < d; j++)
            m += x[r * d + j];
        m /= (double)d;
        for (int64_t j = 0; j < d; j++)
            v += (x[r * d + j] - m) * (x[r * d + j] - m);
        double inv = 1.0 / sqrt(v / (double)d + eps);
        mean[r] = m;
        inv_std[r] = inv;
        for (int64_t j = 0; j < d; j++)
            y[r * d + j] = (x[r * d + j] - m) * inv * gain[j] + bias[j];
    }
}

/* A hand-checked row, a rank-1 x (one row, scalar statistics) and a long, odd-sized row. */
static void test_layer_norm(void **state)
{
    (void)state;
    /* Row [1, 2, 3]: mean 2, var 2/3; row [-1, 0, 5]: mean 4/3, var 62/9. */
    float x[6] = {1, 2, 3, -1, 0, 5}, gain[3] = {1, 2, 0.5f}, bias[3] = {0, 1, -1};
    float y[6], mean[2], inv[2];
    struct test_node t;
    node_init(&t, TIDE_OP_LAYER_NORM, "ln");
    assert_true(t.attrs[TIDE_ATTR_LAYER_NORM_epsilon].f == 1e-5); /* the default */
    struct tide_tensor_view in[3] = {fview(x, 2, DIMS(2, 3)), fview(gain, 1, DIMS(3)),
                                     fview(bias, 1, DIMS(3))};
    struct tide_tensor_view out[3] = {fview(y, 2, DIMS(2, 3)), fview(mean, 1, DIMS(2)),
                                      fview(inv, 1, DIMS(2))};
    run(&t, in, 3, out, 3);
    double s0 = 1.0 / sqrt(2.0 / 3.0 + 1e-5), s1 = 1.0 / sqrt(62.0 / 9.0 + 1e-5);
    const double want_y[6] = {-s0,
                              1.0,
                              0.5 * s0 - 1.0,
                              (-1 - 4.0 / 3) * s1,
                              2 * (-4.0 / 3) * s1 + 1.0,
                              0.5 * (5 - 4.0 / 3) * s1 - 1.0};
    const double want_mean[2] = {2.0, 4.0 / 3}, want_inv[2] = {s0, s1};
    expect_close("layer norm y", y, want_y, 6, 1e-6, 1e-7);
    expect_close("layer norm mean", mean, want_mean, 2, 1e-7, 0);
    expect_close("layer norm inv_std", inv, want_inv, 2, 1e-7, 0);

    /* Rank 1: one row, scalar statistics. */
    float v[4] = {0.5f, -0.5f, 1.5f, 2.5f}, g4[4] = {1, 1, 1, 1}, b4[4] = {0, 0, 0, 0};
    float y4[4], m4, i4;
    struct tide_tensor_view in1[3] = {fview(v, 1, DIMS(4)), fview(g4, 1, DIMS(4)),
                                      fview(b4, 1, DIMS(4))};
    struct tide_tensor_view out1[3] = {fview(y4, 1, DIMS(4)), fview(&m4, 0, NULL),
                                       fview(&i4, 0, NULL)};
    t.attrs[TIDE_ATTR_LAYER_NORM_epsilon].f = 0.25;
    run(&t, in1, 3, out1, 3);
    /* mean 1, var 1.25, inv_std 1 / sqrt(1.5). */
    double k = 1.0 / sqrt(1.5);
    const double want4[4] = {-0.5 * k, -1.5 * k, 0.5 * k, 1.5 * k};
    expect_close("layer norm rank 1", y4, want4, 4, 1e-6, 1e-7);
    assert_float_equal(m4, 1.0f, 0);
    assert_float_equal(i4, (float)k, 1e-7);

    /* Long rows with a large offset (two-pass statistics), several rows a piece. */
    enum { R = 7, D = 1031 };
    float *xl = falloc(R * D), *gl = falloc(D), *bl = falloc(D), *yl = falloc(R * D);
    float *ml = falloc(R), *il = falloc(R);
    double *wy = dalloc(R * D), *wm = dalloc(R), *wi = dalloc(R);
    fill(xl, R * D, 71);
    for (int64_t i = 0; i < R * D; i++)
        xl[i] = 100.0f + xl[i];
    fill(gl, D, 72);
    fill(bl, D, 73);
    t.attrs[TIDE_ATTR_LAYER_NORM_epsilon].f = 1e-5;
    struct tide_tensor_view inl[3] = {fview(xl, 2, DIMS(R, D)), fview(gl, 1, DIMS(D)),
                                      fview(bl, 1, DIMS(D))};
    struct tide_tensor_view outl[3] = {fview(yl, 2, DIMS(R, D)), fview(ml, 1, DIMS(R)),
                                       fview(il, 1, DIMS(R))};
    run(&t, inl, 3, outl, 3);
    layer_norm_reference(xl, gl, bl, R, D, 1e-5, wy, wm, wi);
    /* x - mean rounds x's float: 100 + u has an ulp of 8e-6, against a spread of 0.6. */
    expect_close("layer norm long rows", yl, wy, R * D, 1e-4, 1e-4);
    expect_close("layer norm long mean", ml, wm, R, 1e-7, 0);
    expect_close("layer norm long inv_std", il, wi, R, 1e-6, 0);
    free(xl), free(gl), free(bl), free(yl), free(ml), free(il), free(wy), free(wm), free(wi);
}

/*
 * LayerNormGrad against the chain rule written out in double: with
 * J[k][j] = d xhat_k / d x_j = inv * (delta_kj - 1/d - xhat_k * xhat_j / d),
 * dx_j = sum_k dy_k * gain_k * J[k][j]; dgain = sum over rows of dy * xhat,
 * dbias = sum over rows of dy.
 */
static void test_layer_norm_grad(void **state)
{
    (void)state;
    enum { R = 5, D = 13 };
    float x[R * D], dy[R * D], gain[D], bias[D], y[R * D], mean[R], inv[R];
    float dx[R * D], dgain[D], dbias[D];
    fill(x, R * D, 81);
    fill(dy, R * D, 82);
    fill(gain, D, 83);
    fill(bias, D, 84);
    struct test_node t;
    node_init(&t, TIDE_OP_LAYER_NORM, "ln");
    struct tide_tensor_view fin[3] = {fview(x, 2, DIMS(R, D)), fview(gain, 1, DIMS(D)),
                                      fview(bias, 1, DIMS(D))};
    struct tide_tensor_view fout[3] = {fview(y, 2, DIMS(R, D)), fview(mean, 1, DIMS(R)),
                                       fview(inv, 1, DIMS(R))};
    run(&t, fin, 3, fout, 3);

    node_init(&t, TIDE_OP_LAYER_NORM_GRAD, "ln_grad");
    struct tide_tensor_view in[5] = {fview(dy, 2, DIMS(R, D)), fview(x, 2, DIMS(R, D)),
                                     fview(gain, 1, DIMS(D)), fview(mean, 1, DIMS(R)),
                                     fview(inv, 1, DIMS(R))};
    struct tide_tensor_view out[3] = {fview(dx, 2, DIMS(R, D)), fview(dgain, 1, DIMS(D)),
                                      fview(dbias, 1, DIMS(D))};
    run(&t, in, 5, out, 3);

    double want_dx[R * D], want_dgain[D] = {0}, want_dbias[D] = {0};
    for (int r = 0; r < R; r++) {
        double xhat[D];
        for (int j = 0; j < D; j++)
            xhat[j] = (x[r * D + j] - (double)mean[r]) * inv[r];
        for (int j = 0; j < D; j++) {
            double sum = 0;
            for (int k = 0; k < D; k++) {
                double jac = inv[r] * ((k == j) - 1.0 / D - xhat[k] * xhat[j] / D);
                sum += (double)dy[r * D + k] * gain[k] * jac;
            }
            want_dx[r * D + j] = sum;
            want_dgain[j] += (double)dy[r * D + j] * xhat[j];
            want_dbias[j] += dy[r * D + j];
        }
    }
    expect_close("layer norm grad dx", dx, want_dx, R * D, 1e-5, 1e-6);
    expect_close("layer norm grad dgain", dgain, want_dgain, D, 1e-6, 1e-7);
    expect_close("layer norm grad dbias", dbias, want_dbias, D, 1e-6, 1e-7);
}

/* Rows and columns split over threads: the same bits at 1, 2 and 3 threads. */
static void test_range_jobs_layer_norm(void **state)
{
    (void)state;
    enum { R = 300, D = 1000 };
    float *x = falloc(R * D), *dy = falloc(R * D), *gain = falloc(D), *bias = falloc(D);
    float *y = falloc(R * D), *mean = falloc(R), *inv = falloc(R);
    float *dx = falloc(R * D), *dgain = falloc(D), *dbias = falloc(D);
    fill(x, R * D, 91);
    fill(dy, R * D, 92);
    fill(gain, D, 93);
    fill(bias, D, 94);
    struct test_node t;
    node_init(&t, TIDE_OP_LAYER_NORM, "ln");
    struct tide_tensor_view fin[3] = {fview(x, 2, DIMS(R, D)), fview(gain, 1, DIMS(D)),
                                      fview(bias, 1, DIMS(D))};
    struct tide_tensor_view fout[3] = {fview(y, 2, DIMS(R, D)), fview(mean, 1, DIMS(R)),
                                       fview(inv, 1, DIMS(R))};
    expect_same_at_threads("layer norm", &t, fin, 3, fout, 3, NULL, NULL);
    node_init(&t, TIDE_OP_LAYER_NORM_GRAD, "ln_grad");
    struct tide_tensor_view in[5] = {fview(dy, 2, DIMS(R, D)), fview(x, 2, DIMS(R, D)),
                                     fview(gain, 1, DIMS(D)), fview(mean, 1, DIMS(R)),
                                     fview(inv, 1, DIMS(R))};
    struct tide_tensor_view out[3] = {fview(dx, 2, DIMS(R, D)), fview(dgain, 1, DIMS(D)),
                                      fview(dbias, 1, DIMS(D))};
    expect_same_at_threads("layer norm grad", &t, in, 5, out, 3, NULL, NULL);
    free(x), free(dy), free(gain), free(bias), free(y), free(mean), free(inv);
    free(dx), free(dgain), free(dbias);
}

/*
 * Runs Dropout or DropoutGrad t on x[0..n) into y with the executor's
 * arguments as given (job seed, step, training flag); what run_step leaves
 * out.
 */
static enum tide_status run_dropout(struct test_node *t, float *x, float *y, int64_t n,
                                    uint64_t job_seed, const uint64_t *step, const bool *training,
                                    struct tide_error *err)
{
    struct tide_tensor_view in = fview(x, 1, DIMS(n)), out = fview(y, 1, DIMS(n));
    t->edges[0] = (struct tide_edge){0, 0};
    t->outputs[0] =
        (struct tide_output){.dtype = TIDE_DTYPE_FLOAT32, .shape = out.shape, .nbytes = out.nbytes};
    t->node.n_inputs = 1;
    t->node.inputs = t->edges;
    t->node.n_outputs = 1;
    t->node.outputs = t->outputs;
    struct tide_kernel_args args = {
        .node = &t->node,
        .n_inputs = 1,
        .inputs = &in,
        .n_outputs = 1,
        .outputs = &out,
        .step = step,
        .seed = job_seed,
        .training = training,
    };
    return tide_cpu_kernels.fn[t->node.op](&args, err);
}

static void dropout_ok(struct test_node *t, float *x, float *y, int64_t n, uint64_t job_seed,
                       uint64_t step, bool training)
{
    struct tide_error err = {0};
    if (run_dropout(t, x, y, n, job_seed, &step, &training, &err) != TIDE_OK)
        fail_msg("%s failed: %s", t->node.name, err.message);
}

/*
 * The mask as kernels/dropout-hash.h documents it, written out again here
 * from the splitmix64 finaliser and FNV-1a: element i is kept when the top 24
 * bits of mix(key + (i + 1) * golden) reach ceil(rate * 2^24).
 */
static uint64_t splitmix_finalise(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static bool documented_keep(uint64_t job_seed, uint64_t step, const char *name, int64_t seed,
                            double rate, uint64_t i)
{
    const uint64_t golden = 0x9E3779B97F4A7C15ull;
    uint64_t fnv = 0xCBF29CE484222325ull;
    for (const char *c = name; *c; c++)
        fnv = (fnv ^ (unsigned char)*c) * 0x100000001B3ull;
    uint64_t node = splitmix_finalise(splitmix_finalise(fnv + golden) ^ (uint64_t)seed);
    uint64_t key = splitmix_finalise(job_seed + golden);
    key = splitmix_finalise(key ^ step);
    key = splitmix_finalise(key ^ node);
    double threshold = ceil(rate * 16777216.0);
    return (double)(splitmix_finalise(key + (i + 1) * golden) >> 40) >= threshold;
}

/* Elements where exactly one of a and b is 0 (where two masks differ, for x without zeros). */
static int64_t mask_differences(const float *a, const float *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++)
        d += (a[i] == 0) != (b[i] == 0);
    return d;
}

/*
 * Dropout: the documented mask, the kept fraction, the scale, the same mask
 * for the same (job seed, step, node) at any thread count and another one
 * when any of them changes; DropoutGrad regenerates the forward node's mask;
 * in evaluation both are the identity; rate 0 changes nothing.
 */
static void test_dropout(void **state)
{
    (void)state;
    enum { N = 100000 };
    const double rate = 0.3;
    const float scale = (float)(1.0 / (1.0 - rate));
    float *x = falloc(N), *y = falloc(N), *y2 = falloc(N), *dx = falloc(N);
    fill(x, N, 101);
    for (int64_t i = 0; i < N; i++)
        x[i] = 1.0f + 0.5f * x[i]; /* in [0.5, 1.5): a dropped element is the only 0 */
    struct test_node t;
    node_init(&t, TIDE_OP_DROPOUT, "drop");
    t.attrs[TIDE_ATTR_DROPOUT_rate].f = rate;
    t.attrs[TIDE_ATTR_DROPOUT_seed].i = 9;
    dropout_ok(&t, x, y, N, 42, 3, true);
    int64_t kept = 0;
    for (int64_t i = 0; i < N; i++) {
        bool keep = documented_keep(42, 3, "drop", 9, rate, (uint64_t)i);
        float want = keep ? x[i] * scale : 0.0f;
        if (memcmp(&y[i], &want, sizeof(float)) != 0)
            fail_msg("dropout: element %lld is %.9g, want %.9g (%s)", (long long)i, y[i], want,
                     keep ? "kept" : "dropped");
        kept += keep;
    }
    /* 70000 expected, standard deviation 145: 1 % is about 5 of them. */
    if (fabs((double)kept / N - (1.0 - rate)) > 0.01)
        fail_msg("dropout kept %lld of %d elements at rate %g", (long long)kept, N, rate);

    /* The same key: the same bits, at any thread count. */
    for (int threads = 1; threads <= 4; threads++) {
        tide_cpu_kernels_set_threads(threads);
        dropout_ok(&t, x, y2, N, 42, 3, true);
        if (memcmp(y, y2, N * sizeof(float)) != 0)
            fail_msg("dropout at %d threads differs from the first run", threads);
    }
    tide_cpu_kernels_set_threads(0);

    /* Another step, job seed, seed attribute or name: another mask. */
    dropout_ok(&t, x, y2, N, 42, 4, true);
    assert_true(mask_differences(y, y2, N) > N / 5);
    dropout_ok(&t, x, y2, N, 43, 3, true);
    assert_true(mask_differences(y, y2, N) > N / 5);
    t.attrs[TIDE_ATTR_DROPOUT_seed].i = 10;
    dropout_ok(&t, x, y2, N, 42, 3, true);
    assert_true(mask_differences(y, y2, N) > N / 5);
    t.attrs[TIDE_ATTR_DROPOUT_seed].i = 9;
    t.node.name = "drop2";
    dropout_ok(&t, x, y2, N, 42, 3, true);
    assert_true(mask_differences(y, y2, N) > N / 5);
    t.node.name = "drop";

    /* DropoutGrad names the forward node: dx = dy * mask / (1 - rate), dy = x here. */
    struct test_node tg;
    node_init(&tg, TIDE_OP_DROPOUT_GRAD, "grad/drop/x");
    tg.attrs[TIDE_ATTR_DROPOUT_GRAD_rate].f = rate;
    tg.attrs[TIDE_ATTR_DROPOUT_GRAD_seed].i = 9;
    tg.attrs[TIDE_ATTR_DROPOUT_GRAD_forward].s = "drop";
    dropout_ok(&tg, x, dx, N, 42, 3, true);
    expect_exact("dropout grad", dx, y, N);

    /* Evaluation (or args without the flag): the identity, for both. */
    dropout_ok(&t, x, y2, N, 42, 3, false);
    expect_exact("dropout in evaluation", y2, x, N);
    dropout_ok(&tg, x, dx, N, 42, 3, false);
    expect_exact("dropout grad in evaluation", dx, x, N);
    struct tide_error err = {0};
    assert_int_equal(run_dropout(&t, x, y2, N, 42, NULL, NULL, &err), TIDE_OK);
    expect_exact("dropout without the training flag", y2, x, N);

    /* Rate 0 keeps everything and scales by 1. */
    t.attrs[TIDE_ATTR_DROPOUT_rate].f = 0.0;
    dropout_ok(&t, x, y2, N, 42, 3, true);
    expect_exact("dropout at rate 0", y2, x, N);

    /* A training step needs the step counter. */
    const bool training = true;
    assert_int_equal(run_dropout(&t, x, y2, N, 42, NULL, &training, &err), TIDE_INVALID);
    assert_non_null(strstr(err.message, "node \"drop\" (Dropout)"));
    assert_non_null(strstr(err.message, "needs the executor's step counter"));
    free(x), free(y), free(y2), free(dx);
}

/* ---- Sequence-model ops: fused attention (Attention) ---- */

/* One attention case: heads of q [Sq, D] against k and v [Sk, D]. */
struct attention_case {
    int64_t b, h, sq, sk, d;
    bool causal;
    double scale; /* the attribute: 0 means 1/sqrt(D) */
};

/*
 * The unfused formula in double, head by head: S = q k^T * scale with the
 * causal mask, P = softmax(S), o = P v, lse = log sum exp S; and from dout,
 * dP = dout v^T, dS = P * (dP - rowsum(P * dP)), dq = dS k * scale,
 * dk = dS^T q * scale, dv = P^T dout.
 */
static void naive_attention(const struct attention_case *c, const float *q, const float *k,
                            const float *v, const float *dout, double *o, double *lse, double *dq,
                            double *dk, double *dv)
{
    int64_t sq = c->sq, sk = c->sk, d = c->d;
    double scale = c->scale != 0 ? c->scale : 1.0 / sqrt((double)d);
    double *p = dalloc(sq * sk), *ds = dalloc(sq * sk);
    for (int64_t hd = 0; hd < c->b * c->h; hd++) {
        const float *qh = q + hd * sq * d, *kh = k + hd * sk * d, *vh = v + hd * sk * d;
        const float *doh = dout + hd * sq * d;
        for (int64_t i = 0; i < sq; i++) {
            int64_t keys = c->causal ? i + 1 : sk;
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < keys; j++) {
                double x = 0;
                for (int64_t e = 0; e < d; e++)
                    x += (double)qh[i * d + e] * kh[j * d + e];
                p[i * sk + j] = x * scale;
                m = fmax(m, p[i * sk + j]);
            }
            for (int64_t j = 0; j < keys; j++)
                sum += exp(p[i * sk + j] - m);
            lse[hd * sq + i] = m + log(sum);
            for (int64_t j = 0; j < sk; j++)
                p[i * sk + j] = j < keys ? exp(p[i * sk + j] - m) / sum : 0;
            double row = 0;
            for (int64_t j = 0; j < sk; j++) {
                double dp = 0;
                for (int64_t e = 0; e < d; e++)
                    dp += (double)doh[i * d + e] * vh[j * d + e];
                ds[i * sk + j] = dp;
                row += p[i * sk + j] * dp;
            }
            for (int64_t j = 0; j < sk; j++)
                ds[i * sk + j] = p[i * sk + j] * (ds[i * sk + j] - row);
            for (int64_t e = 0; e < d; e++) {
                double acc = 0, g = 0;
                for (int64_t j = 0; j < sk; j++) {
                    acc += p[i * sk + j] * vh[j * d + e];
                    g += ds[i * sk + j] * kh[j * d + e];
                }
                o[(hd * sq + i) * d + e] = acc;
                dq[(hd * sq + i) * d + e] = g * scale;
            }
        }
        for (int64_t j = 0; j < sk; j++) {
            for (int64_t e = 0; e < d; e++) {
                double gk = 0, gv = 0;
                for (int64_t i = 0; i < sq; i++) {
                    gk += ds[i * sk + j] * qh[i * d + e];
                    gv += p[i * sk + j] * doh[i * d + e];
                }
                dk[(hd * sk + j) * d + e] = gk * scale;
                dv[(hd * sk + j) * d + e] = gv;
            }
        }
    }
    free(p);
    free(ds);
}

/* Runs Attention, then AttentionGrad on its outputs, into o, lse, dq, dk and dv. */
static void run_attention(const struct attention_case *c, const float *q, const float *k,
                          const float *v, const float *dout, float *o, float *lse, float *dq,
                          float *dk, float *dv)
{
    const int64_t *qd = DIMS(c->b, c->h, c->sq, c->d), *kd = DIMS(c->b, c->h, c->sk, c->d);
    const int64_t *rd = DIMS(c->b, c->h, c->sq);
    struct test_node t;
    node_init(&t, TIDE_OP_ATTENTION, "att");
    t.attrs[TIDE_ATTR_ATTENTION_causal].b = c->causal;
    t.attrs[TIDE_ATTR_ATTENTION_scale].f = c->scale;
    struct tide_tensor_view in[3] = {fview((float *)q, 4, qd), fview((float *)k, 4, kd),
                                     fview((float *)v, 4, kd)};
    struct tide_tensor_view out[2] = {fview(o, 4, qd), fview(lse, 3, rd)};
    run(&t, in, 3, out, 2);

    node_init(&t, TIDE_OP_ATTENTION_GRAD, "att_grad");
    t.attrs[TIDE_ATTR_ATTENTION_GRAD_causal].b = c->causal;
    t.attrs[TIDE_ATTR_ATTENTION_GRAD_scale].f = c->scale;
    struct tide_tensor_view gin[6] = {in[0],  in[1],  in[2],
                                      out[0], out[1], fview((float *)dout, 4, qd)};
    struct tide_tensor_view gout[3] = {fview(dq, 4, qd), fview(dk, 4, kd), fview(dv, 4, kd)};
    run(&t, gin, 6, gout, 3);
}

/*
 * Attention and AttentionGrad against the unfused formula in double, within
 * 1e-5, at sizes spanning several blocks of 64 and not a multiple of one;
 * and the same bits on 1 and 3 threads, and on 3 threads in a workspace
 * planned for 1.
 */
static void test_attention(void **state)
{
    (void)state;
    const struct attention_case cases[] = {
        {2, 3, 150, 150, 16, true, 0},
        {2, 3, 150, 150, 16, false, 0},
        {1, 2, 70, 131, 5, false, 0.3},
        {1, 1, 1, 1, 3, true, 0},
    };
    for (size_t n = 0; n < sizeof(cases) / sizeof(cases[0]); n++) {
        const struct attention_case *c = &cases[n];
        int64_t nq = c->b * c->h * c->sq * c->d, nk = c->b * c->h * c->sk * c->d;
        int64_t nr = c->b * c->h * c->sq;
        float *q = falloc(nq), *k = falloc(nk), *v = falloc(nk), *dout = falloc(nq);
        fill(q, nq, 61);
        fill(k, nk, 62);
        fill(v, nk, 63);
        fill(dout, nq, 64);
        /* Larger scores, so that the softmax is far from uniform. */
        for (int64_t i = 0; i < nq; i++)
            q[i] *= 3;
        double *o = dalloc(nq), *lse = dalloc(nr), *dq = dalloc(nq), *dk = dalloc(nk),
               *dv = dalloc(nk);
        naive_attention(c, q, k, v, dout, o, lse, dq, dk, dv);

        float *got[3][5];
        const int threads[3] = {1, 3, 3}, planned[3] = {0, 0, 1};
        for (int r = 0; r < 3; r++) {
            got[r][0] = falloc(nq);
            got[r][1] = falloc(nr);
            got[r][2] = falloc(nq);
            got[r][3] = falloc(nk);
            got[r][4] = falloc(nk);
            tide_cpu_kernels_set_threads(threads[r]);
            plan_threads = planned[r];
            run_threads = threads[r];
            run_attention(c, q, k, v, dout, got[r][0], got[r][1], got[r][2], got[r][3], got[r][4]);
            plan_threads = 0;
        }
        tide_cpu_kernels_set_threads(0);
        expect_close("attention o", got[0][0], o, nq, 1e-5, 1e-5);
        expect_close("attention lse", got[0][1], lse, nr, 1e-5, 1e-5);
        expect_close("attention dq", got[0][2], dq, nq, 1e-5, 1e-5);
        expect_close("attention dk", got[0][3], dk, nk, 1e-5, 1e-5);
        expect_close("attention dv", got[0][4], dv, nk, 1e-5, 1e-5);
        const int64_t sizes[5] = {nq, nr, nq, nk, nk};
        for (int r = 1; r < 3; r++) {
            for (int x = 0; x < 5; x++)
                assert_memory_equal(got[0][x], got[r][x], (size_t)sizes[x] * sizeof(float));
        }
        for (int r = 0; r < 3; r++) {
            for (int x = 0; x < 5; x++)
                free(got[r][x]);
        }
        free(q), free(k), free(v), free(dout);
        free(o), free(lse), free(dq), free(dk), free(dv);
    }
}

/*
 * The workspace stays O(block * D * threads): at sequence length 8192 with
 * D 64 and 16 threads, Attention and AttentionGrad ask for less than 2 MiB,
 * where the [S, S] float matrix alone would be 256 MiB.
 */
static void test_attention_workspace(void **state)
{
    (void)state;
    const int64_t *qd = DIMS(1, 1, 8192, 64);
    struct tide_node producers[2];
    struct tide_output produced[2];
    memset(producers, 0, sizeof(producers));
    for (int i = 0; i < 2; i++) {
        produced[i] = (struct tide_output){.dtype = TIDE_DTYPE_FLOAT32,
                                           .shape = tide_shape_make(4, qd),
                                           .nbytes = 8192 * 64 * sizeof(float)};
        producers[i].op = TIDE_OP_PLACEHOLDER;
        producers[i].name = "producer";
        producers[i].n_outputs = 1;
        producers[i].outputs = &produced[i];
    }
    struct tide_graph graph = {.nodes = producers, .n_nodes = 2};
    tide_cpu_kernels_set_threads(16);
    const enum tide_op ops[2] = {TIDE_OP_ATTENTION, TIDE_OP_ATTENTION_GRAD};
    for (int i = 0; i < 2; i++) {
        struct test_node t;
        node_init(&t, ops[i], "att");
        t.edges[0] = (struct tide_edge){0, 0};
        t.edges[1] = (struct tide_edge){1, 0};
        t.node.inputs = t.edges;
        t.node.n_inputs = 2; /* workspace_bytes reads q and k only */
        t.node.outputs = t.outputs;
        t.node.n_outputs = 1;
        uint64_t ws = tide_cpu_kernels.workspace_bytes(NULL, &graph, &t.node);
        assert_true(ws > 0);
        if (ws >= 2u << 20)
            fail_msg("%s at S 8192 asks for %llu bytes of workspace", tide_op_info(ops[i])->name,
                     (unsigned long long)ws);
    }
    tide_cpu_kernels_set_threads(0);
}

/*
 * Cases worked by hand. Causal row 0 sees key 0 alone: o_0 = v_0 exactly
 * and lse_0 = q_0 . k_0 * scale. Two equal scores average the values.
 */
static void test_attention_by_hand(void **state)
{
    (void)state;
    /* q, k, v [1, 1, 2, 2], scale 0.5. */
    float q[4] = {1, 2, 3, 4}, k[4] = {0.5f, 1, -1, 2}, v[4] = {10, 20, 30, 40};
    float o[4], lse[2];
    struct test_node t;
    node_init(&t, TIDE_OP_ATTENTION, "att");
    t.attrs[TIDE_ATTR_ATTENTION_scale].f = 0.5;
    const int64_t *d4 = DIMS(1, 1, 2, 2);
    struct tide_tensor_view in[3] = {fview(q, 4, d4), fview(k, 4, d4), fview(v, 4, d4)};
    struct tide_tensor_view out[2] = {fview(o, 4, d4), fview(lse, 3, DIMS(1, 1, 2))};
    run(&t, in, 3, out, 2);
    assert_true(o[0] == 10 && o[1] == 20);
    assert_true(lse[0] == 1.25f); /* (1 * 0.5 + 2 * 1) * 0.5 */
    /* Row 1: scores (1.5 + 4) * 0.5 = 2.75 and (-3 + 8) * 0.5 = 2.5. */
    double p0 = 1 / (1 + exp(2.5 - 2.75)), p1 = 1 - p0;
    const double want[2] = {p0 * 10 + p1 * 30, p0 * 20 + p1 * 40};
    expect_close("attention row 1", o + 2, want, 2, 1e-6, 0);
    const double want_lse = 2.75 + log(1 + exp(2.5 - 2.75));
    expect_close("attention lse 1", lse + 1, &want_lse, 1, 1e-6, 0);

    /* Not causal, equal keys: each row is the mean of the values, lse = s + log 2. */
    float kk[4] = {1, 1, 1, 1};
    node_init(&t, TIDE_OP_ATTENTION, "att");
    t.attrs[TIDE_ATTR_ATTENTION_causal].b = false;
    t.attrs[TIDE_ATTR_ATTENTION_scale].f = 1;
    in[1] = fview(kk, 4, d4);
    run(&t, in, 3, out, 2);
    const float mean[4] = {20, 30, 20, 30};
    expect_closef("attention mean", o, mean, 4, 1e-6);
    const double lse_want[2] = {3 + log(2.0), 7 + log(2.0)};
    expect_close("attention lse mean", lse, lse_want, 2, 1e-6, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_binary_same_shape),
        cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_broadcast_to_and_add_n),
        cmocka_unit_test(test_bias_add),
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_activation_grads),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_softmax_grad),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_softmax_xent_grad),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_sum_to_shape_and_bias_grad),
        cmocka_unit_test(test_identity_reshape),
        cmocka_unit_test(test_concat),
        cmocka_unit_test(test_slice_and_grad),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_invalid),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_pool_grads),
        cmocka_unit_test(test_batch_norm),
        cmocka_unit_test(test_batch_norm_grad),
        cmocka_unit_test(test_optimizers),
        cmocka_unit_test(test_determinism_threads),
        cmocka_unit_test(test_range_jobs_elementwise),
        cmocka_unit_test(test_range_jobs_broadcast),
        cmocka_unit_test(test_range_jobs_reduce),
        cmocka_unit_test(test_range_jobs_batch_norm_and_pools),
        cmocka_unit_test(test_range_jobs_optimizers),
        cmocka_unit_test(test_max_pool_tiled),
        cmocka_unit_test(test_variable_init_reproducible),
        cmocka_unit_test(test_variable_init_distributions),
        cmocka_unit_test(test_variable_init_constants),
        /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
        cmocka_unit_test(test_math_unary),
        cmocka_unit_test(test_math_binary),
        cmocka_unit_test(test_select_grads),
        cmocka_unit_test(test_pow),
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_range_jobs_math),
        cmocka_unit_test(test_trig),
        cmocka_unit_test(test_range_jobs_trig),
        cmocka_unit_test(test_round),
        cmocka_unit_test(test_range_jobs_round),

        /* batched products and axis permutation (BatchMatMul, Transpose) */
        cmocka_unit_test(test_batch_matmul),
        cmocka_unit_test(test_batch_matmul_threads),
        cmocka_unit_test(test_transpose),

        /* indexing (Gather, TopK, Mixture-of-Experts routing) */
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_grad),
        cmocka_unit_test(test_gather_elements),
        cmocka_unit_test(test_gather_elements_grad),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_top_k_grad),
        cmocka_unit_test(test_moe_route),
        cmocka_unit_test(test_range_jobs_gather),
        cmocka_unit_test(test_range_jobs_gather_elements),

        /* normalisation and regularisation (LayerNorm, Dropout) */
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_layer_norm_grad),
        cmocka_unit_test(test_range_jobs_layer_norm),
        cmocka_unit_test(test_dropout),

        /* fused attention (Attention) */
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_by_hand),
        cmocka_unit_test(test_attention_workspace),

        cmocka_unit_test(test_graph_normalised_attrs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
