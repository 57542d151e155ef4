/* SPDX-License-Identifier: MIT */
/*
 * make_corpus.c: writes the seed corpus of the import fuzzer.
 *
 * libFuzzer mutates what it is given; starting from valid graphs lets it
 * reach shape inference and the per-op checks at once, instead of spending
 * its time rediscovering the protobuf framing. The seeds are built with the
 * IR builder API and serialized with tide_graph_export, so they follow the
 * op table as it changes: an MLP, a CNN, and each op whose inputs are simple
 * to make, alone behind Placeholders.
 *
 * Usage: make_fuzz_corpus DIR   (DIR is created if it does not exist)
 *
 * Every seed is imported back before it is written; a seed that no longer
 * imports (an op's rules changed) is reported on stderr and still written,
 * since an invalid graph is a fine seed too, and the exit status stays 0 so
 * that a rule change does not stop CI from fuzzing. Write errors exit 1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "graph/import.h"

/* The builder gives up on the first error: these graphs are ours, not input. */
static void die(const char *what, const struct tide_error *err)
{
    fprintf(stderr, "make_fuzz_corpus: %s: %s\n", what, err ? err->message : strerror(errno));
    exit(1);
}

static uint32_t node(struct tide_graph *g, enum tide_op op, const char *name, uint32_t n_inputs,
                     ...)
{
    struct tide_error err = {0};
    struct tide_edge edges[8];
    uint32_t id;
    if (tide_graph_add_node(g, op, name, &id, &err) != TIDE_OK)
        die(name, &err);
    va_list args;
    va_start(args, n_inputs);
    for (uint32_t i = 0; i < n_inputs && i < 8; i++)
        edges[i] = (struct tide_edge){.node = va_arg(args, uint32_t), .output = 0};
    va_end(args);
    if (n_inputs && tide_graph_set_inputs(g, id, edges, n_inputs, &err) != TIDE_OK)
        die(name, &err);
    return id;
}

static uint32_t placeholder(struct tide_graph *g, const char *name, enum tide_dtype dtype,
                            int32_t rank, const int64_t *dims)
{
    uint32_t id = node(g, TIDE_OP_PLACEHOLDER, name, 0);
    struct tide_shape shape = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_PLACEHOLDER_dtype, dtype);
    tide_attr_set_shape(g, id, TIDE_ATTR_PLACEHOLDER_shape, &shape);
    return id;
}

static uint32_t variable(struct tide_graph *g, const char *name, int32_t rank, const int64_t *dims)
{
    uint32_t id = node(g, TIDE_OP_VARIABLE, name, 0);
    struct tide_shape shape = tide_shape_make(rank, dims);
    tide_attr_set_dtype(g, id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(g, id, TIDE_ATTR_VARIABLE_shape, &shape);
    return id;
}

/* A small float32 tensor of the given shape filled with a ramp. */
static void set_tensor(struct tide_graph *g, uint32_t id, int k, int32_t rank, const int64_t *dims)
{
    struct tide_shape shape = tide_shape_make(rank, dims);
    int64_t n = tide_shape_numel(&shape);
    float values[256];
    if (n < 0 || n > 256) {
        fprintf(stderr, "make_fuzz_corpus: seed tensor too large\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        values[i] = 0.125f * (float)i - 1.0f;
    if (tide_attr_set_tensor(g, id, k, TIDE_DTYPE_FLOAT32, &shape, values,
                             (uint64_t)n * sizeof(float)) != TIDE_OK)
        die("set_tensor", NULL);
}

/* Literal lists: DIMS gives (rank, dims) for tide_shape_make, INTS gives (values, n). */
/* clang-format off */
#define DIMS(...) (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__}
/* clang-format on */
#define INTS(...) (int64_t[]){__VA_ARGS__}, (int32_t)(sizeof((int64_t[]){__VA_ARGS__}) / 8)

static const char *out_dir;
static int n_written, n_invalid;

/* Checks that g imports, then writes its bytes to DIR/name.pb and frees g. */
static void emit(struct tide_graph *g, const char *name)
{
    struct tide_error err = {0};
    void *bytes;
    size_t len;
    if (tide_graph_export(g, &bytes, &len, &err) != TIDE_OK)
        die(name, &err);
    struct tide_graph *back = NULL;
    if (tide_graph_import(bytes, len, NULL, &back, &err) != TIDE_OK) {
        fprintf(stderr, "make_fuzz_corpus: note: seed %s does not import: %s\n", name, err.message);
        n_invalid++;
    }
    tide_graph_free(back);

    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.pb", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len || fclose(f) != 0)
        die(path, NULL);
    free(bytes);
    tide_graph_free(g);
    n_written++;
}

static struct tide_graph *graph_new(void)
{
    struct tide_graph *g = tide_graph_new();
    if (!g)
        die("tide_graph_new", NULL);
    return g;
}

static void seed_mlp(void)
{
    struct tide_graph *g = graph_new();
    struct tide_error err;
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(4, 8));
    uint32_t labels = placeholder(g, "labels", TIDE_DTYPE_INT32, DIMS(4));
    uint32_t w1 = variable(g, "l1/w", DIMS(8, 16));
    if (tide_attr_set_string(g, w1, TIDE_ATTR_VARIABLE_init, "he_normal") != TIDE_OK)
        die("init", NULL);
    tide_attr_set_int(g, w1, TIDE_ATTR_VARIABLE_seed, 3);
    uint32_t b1 = variable(g, "l1/b", DIMS(16));
    if (tide_attr_set_string(g, b1, TIDE_ATTR_VARIABLE_init, "value") != TIDE_OK)
        die("init", NULL);
    set_tensor(g, b1, TIDE_ATTR_VARIABLE_value, DIMS(16));
    uint32_t mm = node(g, TIDE_OP_MATMUL, "l1/mm", 2, x, w1);
    uint32_t h = node(g, TIDE_OP_BIAS_ADD, "l1/h", 2, mm, b1);
    uint32_t r = node(g, TIDE_OP_RELU, "l1/relu", 1, h);
    uint32_t w2 = node(g, TIDE_OP_CONST, "l2/w", 0);
    set_tensor(g, w2, TIDE_ATTR_CONST_value, DIMS(10, 16));
    uint32_t logits = node(g, TIDE_OP_MATMUL, "logits", 2, r, w2);
    tide_attr_set_bool(g, logits, TIDE_ATTR_MATMUL_transpose_b, true);
    uint32_t xent = node(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", 2, logits, labels);
    uint32_t loss = node(g, TIDE_OP_REDUCE_MEAN, "loss", 1, xent);
    if (tide_graph_add_control(g, loss, r, &err) != TIDE_OK)
        die("control", &err);
    emit(g, "mlp");
}

static void seed_cnn(void)
{
    struct tide_graph *g = graph_new();
    uint32_t img = placeholder(g, "img", TIDE_DTYPE_FLOAT32, DIMS(2, 3, 8, 8));
    uint32_t labels = placeholder(g, "labels", TIDE_DTYPE_INT32, DIMS(2));
    uint32_t k = variable(g, "conv1/k", DIMS(4, 3, 3, 3));
    uint32_t conv = node(g, TIDE_OP_CONV2D, "conv1", 2, img, k);
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_strides, INTS(1, 1));
    tide_attr_set_ints(g, conv, TIDE_ATTR_CONV2D_pads, INTS(1, 1));
    uint32_t gamma = variable(g, "bn1/gamma", DIMS(4));
    uint32_t beta = variable(g, "bn1/beta", DIMS(4));
    uint32_t bn = node(g, TIDE_OP_BATCH_NORM, "bn1", 3, conv, gamma, beta);
    uint32_t relu = node(g, TIDE_OP_RELU, "relu1", 1, bn);
    uint32_t pool = node(g, TIDE_OP_MAX_POOL2D, "pool1", 1, relu);
    tide_attr_set_ints(g, pool, TIDE_ATTR_MAX_POOL2D_ksize, INTS(2, 2));
    tide_attr_set_ints(g, pool, TIDE_ATTR_MAX_POOL2D_strides, INTS(2, 2));
    uint32_t flat = node(g, TIDE_OP_RESHAPE, "flat", 1, pool);
    tide_attr_set_ints(g, flat, TIDE_ATTR_RESHAPE_shape, INTS(2, -1));
    uint32_t fc = variable(g, "fc/w", DIMS(64, 10));
    uint32_t logits = node(g, TIDE_OP_MATMUL, "fc", 2, flat, fc);
    uint32_t xent = node(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY, "xent", 2, logits, labels);
    uint32_t loss = node(g, TIDE_OP_REDUCE_SUM, "loss", 1, xent);
    tide_attr_set_ints(g, loss, TIDE_ATTR_REDUCE_SUM_axes, INTS(0));
    uint32_t lr = node(g, TIDE_OP_SCALE, "loss/scaled", 1, loss);
    tide_attr_set_float(g, lr, TIDE_ATTR_SCALE_scale, 0.5);
    emit(g, "cnn");
}

/* Ops with one float input of any shape and no required attributes. */
static void seed_unary(enum tide_op op, const char *file)
{
    struct tide_graph *g = graph_new();
    uint32_t x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    node(g, op, "y", 1, x);
    emit(g, file);
}

/* Ops with two float inputs of the same shape. */
static void seed_binary(enum tide_op op, const char *file)
{
    struct tide_graph *g = graph_new();
    uint32_t a = placeholder(g, "a", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    uint32_t b = placeholder(g, "b", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    node(g, op, "y", 2, a, b);
    emit(g, file);
}

static void seed_ops(void)
{
    seed_unary(TIDE_OP_IDENTITY, "identity");
    seed_unary(TIDE_OP_RELU, "relu");
    seed_unary(TIDE_OP_SIGMOID, "sigmoid");
    seed_unary(TIDE_OP_TANH, "tanh");
    seed_unary(TIDE_OP_SOFTMAX, "softmax");
    seed_unary(TIDE_OP_NEG, "neg");
    seed_unary(TIDE_OP_REDUCE_SUM, "reduce_sum");
    seed_unary(TIDE_OP_REDUCE_MEAN, "reduce_mean");
    seed_unary(TIDE_OP_ADD_N, "add_n");
    seed_unary(TIDE_OP_FETCH, "fetch");
    seed_unary(TIDE_OP_SWAP_OUT, "swap_out");
    seed_unary(TIDE_OP_SWAP_IN, "swap_in");
    seed_unary(TIDE_OP_WRITE_BACK, "write_back");
    seed_unary(TIDE_OP_BIAS_ADD_GRAD, "bias_add_grad");
    seed_binary(TIDE_OP_ADD, "add");
    seed_binary(TIDE_OP_SUB, "sub");
    seed_binary(TIDE_OP_MUL, "mul");
    seed_binary(TIDE_OP_RELU_GRAD, "relu_grad");
    seed_binary(TIDE_OP_SIGMOID_GRAD, "sigmoid_grad");
    seed_binary(TIDE_OP_TANH_GRAD, "tanh_grad");
    seed_binary(TIDE_OP_SOFTMAX_GRAD, "softmax_grad");

    struct tide_graph *g;
    uint32_t x, y, a, b;

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    y = node(g, TIDE_OP_SCALE, "y", 1, x);
    tide_attr_set_float(g, y, TIDE_ATTR_SCALE_scale, 2.0);
    emit(g, "scale");

    g = graph_new();
    a = placeholder(g, "a", TIDE_DTYPE_FLOAT32, DIMS(3, 2));
    b = placeholder(g, "b", TIDE_DTYPE_FLOAT32, DIMS(3, 4));
    y = node(g, TIDE_OP_MATMUL, "y", 2, a, b);
    tide_attr_set_bool(g, y, TIDE_ATTR_MATMUL_transpose_a, true);
    emit(g, "matmul");

    g = graph_new();
    a = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    b = placeholder(g, "b", TIDE_DTYPE_FLOAT32, DIMS(3));
    node(g, TIDE_OP_BIAS_ADD, "y", 2, a, b);
    emit(g, "bias_add");

    g = graph_new();
    a = placeholder(g, "a", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    b = placeholder(g, "b", TIDE_DTYPE_FLOAT32, DIMS(2, 5));
    y = node(g, TIDE_OP_CONCAT, "y", 2, a, b);
    tide_attr_set_int(g, y, TIDE_ATTR_CONCAT_axis, 1);
    emit(g, "concat");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(4, 6));
    y = node(g, TIDE_OP_SLICE, "y", 1, x);
    tide_attr_set_ints(g, y, TIDE_ATTR_SLICE_begin, INTS(1, 2));
    tide_attr_set_ints(g, y, TIDE_ATTR_SLICE_size, INTS(2, -1));
    emit(g, "slice");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_INT32, DIMS(2, 6));
    y = node(g, TIDE_OP_RESHAPE, "y", 1, x);
    tide_attr_set_ints(g, y, TIDE_ATTR_RESHAPE_shape, INTS(3, 4));
    emit(g, "reshape");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(1, 3));
    y = node(g, TIDE_OP_BROADCAST_TO, "y", 1, x);
    struct tide_shape to = tide_shape_make(DIMS(4, 3));
    tide_attr_set_shape(g, y, TIDE_ATTR_BROADCAST_TO_shape, &to);
    emit(g, "broadcast_to");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(4, 3));
    y = node(g, TIDE_OP_SUM_TO_SHAPE, "y", 1, x);
    struct tide_shape sum_to = tide_shape_make(DIMS(1, 3));
    tide_attr_set_shape(g, y, TIDE_ATTR_SUM_TO_SHAPE_shape, &sum_to);
    emit(g, "sum_to_shape");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(1, 2, 6, 6));
    y = node(g, TIDE_OP_AVG_POOL2D, "y", 1, x);
    tide_attr_set_ints(g, y, TIDE_ATTR_AVG_POOL2D_ksize, INTS(3, 3));
    tide_attr_set_ints(g, y, TIDE_ATTR_AVG_POOL2D_strides, INTS(1, 1));
    tide_attr_set_ints(g, y, TIDE_ATTR_AVG_POOL2D_pads, INTS(1, 1));
    emit(g, "avg_pool2d");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(2, 3, 4, 4));
    node(g, TIDE_OP_GLOBAL_AVG_POOL, "y", 1, x);
    emit(g, "global_avg_pool");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(1, 2, 5, 5));
    a = node(g, TIDE_OP_CONST, "k", 0);
    set_tensor(g, a, TIDE_ATTR_CONST_value, DIMS(3, 2, 3, 3));
    y = node(g, TIDE_OP_CONV2D, "y", 2, x, a);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_strides, INTS(2, 2));
    emit(g, "conv2d");

    g = graph_new();
    x = variable(g, "w", DIMS(3, 2));
    a = placeholder(g, "dw", TIDE_DTYPE_FLOAT32, DIMS(3, 2));
    y = node(g, TIDE_OP_APPLY_SGD, "update", 2, x, a);
    tide_attr_set_float(g, y, TIDE_ATTR_APPLY_SGD_learning_rate, 0.1);
    emit(g, "apply_sgd");

    g = graph_new();
    x = variable(g, "w", DIMS(3));
    a = placeholder(g, "dw", TIDE_DTYPE_FLOAT32, DIMS(3));
    b = variable(g, "velocity", DIMS(3));
    y = node(g, TIDE_OP_APPLY_MOMENTUM, "update", 3, x, b, a);
    tide_attr_set_float(g, y, TIDE_ATTR_APPLY_MOMENTUM_learning_rate, 0.1);
    tide_attr_set_float(g, y, TIDE_ATTR_APPLY_MOMENTUM_momentum, 0.9);
    tide_attr_set_bool(g, y, TIDE_ATTR_APPLY_MOMENTUM_nesterov, true);
    emit(g, "apply_momentum");

    g = graph_new();
    x = variable(g, "w", DIMS(3));
    a = placeholder(g, "dw", TIDE_DTYPE_FLOAT32, DIMS(3));
    b = variable(g, "m", DIMS(3));
    uint32_t v = variable(g, "v", DIMS(3));
    y = node(g, TIDE_OP_APPLY_ADAM, "update", 4, x, b, v, a);
    tide_attr_set_float(g, y, TIDE_ATTR_APPLY_ADAM_learning_rate, 0.001);
    emit(g, "apply_adam");
}

/* Gradient helpers, as autodiff emits them (and as a client may send them). */
static void seed_grad_ops(void)
{
    struct tide_graph *g;
    uint32_t x, w, dy, y, a, b;

    g = graph_new();
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(1, 3, 2, 2));
    w = placeholder(g, "w", TIDE_DTYPE_FLOAT32, DIMS(3, 2, 3, 3));
    y = node(g, TIDE_OP_CONV2D_BACKPROP_INPUT, "dx", 2, dy, w);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, INTS(2, 2));
    struct tide_shape input_shape = tide_shape_make(DIMS(1, 2, 5, 5));
    tide_attr_set_shape(g, y, TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape, &input_shape);
    emit(g, "conv2d_backprop_input");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(1, 2, 5, 5));
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(1, 3, 5, 5));
    y = node(g, TIDE_OP_CONV2D_BACKPROP_FILTER, "dw", 2, x, dy);
    tide_attr_set_ints(g, y, TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads, INTS(1, 1));
    struct tide_shape filter_shape = tide_shape_make(DIMS(3, 2, 3, 3));
    tide_attr_set_shape(g, y, TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape, &filter_shape);
    emit(g, "conv2d_backprop_filter");

    g = graph_new();
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(1, 2, 4, 4));
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(1, 2, 2, 2));
    y = node(g, TIDE_OP_MAX_POOL2D_GRAD, "dx", 2, x, dy);
    tide_attr_set_ints(g, y, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, INTS(2, 2));
    tide_attr_set_ints(g, y, TIDE_ATTR_MAX_POOL2D_GRAD_strides, INTS(2, 2));
    emit(g, "max_pool2d_grad");

    g = graph_new();
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(1, 2, 2, 2));
    y = node(g, TIDE_OP_AVG_POOL2D_GRAD, "dx", 1, dy);
    tide_attr_set_ints(g, y, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, INTS(2, 2));
    tide_attr_set_ints(g, y, TIDE_ATTR_AVG_POOL2D_GRAD_strides, INTS(2, 2));
    struct tide_shape pooled = tide_shape_make(DIMS(1, 2, 4, 4));
    tide_attr_set_shape(g, y, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, &pooled);
    emit(g, "avg_pool2d_grad");

    g = graph_new();
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    y = node(g, TIDE_OP_GLOBAL_AVG_POOL_GRAD, "dx", 1, dy);
    struct tide_shape global = tide_shape_make(DIMS(2, 3, 4, 4));
    tide_attr_set_shape(g, y, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, &global);
    emit(g, "global_avg_pool_grad");

    g = graph_new();
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(2, 3, 2, 2));
    x = placeholder(g, "x", TIDE_DTYPE_FLOAT32, DIMS(2, 3, 2, 2));
    a = placeholder(g, "gamma", TIDE_DTYPE_FLOAT32, DIMS(3));
    b = placeholder(g, "mean", TIDE_DTYPE_FLOAT32, DIMS(3));
    w = placeholder(g, "inv_std", TIDE_DTYPE_FLOAT32, DIMS(3));
    node(g, TIDE_OP_BATCH_NORM_GRAD, "dbn", 5, dy, x, a, b, w);
    emit(g, "batch_norm_grad");

    g = graph_new();
    dy = placeholder(g, "dy", TIDE_DTYPE_FLOAT32, DIMS(2, 3));
    y = node(g, TIDE_OP_SLICE_GRAD, "dx", 1, dy);
    tide_attr_set_ints(g, y, TIDE_ATTR_SLICE_GRAD_begin, INTS(1, 0));
    struct tide_shape full = tide_shape_make(DIMS(4, 3));
    tide_attr_set_shape(g, y, TIDE_ATTR_SLICE_GRAD_shape, &full);
    emit(g, "slice_grad");

    g = graph_new();
    x = placeholder(g, "logits", TIDE_DTYPE_FLOAT32, DIMS(4, 5));
    a = placeholder(g, "labels", TIDE_DTYPE_INT32, DIMS(4));
    dy = placeholder(g, "dloss", TIDE_DTYPE_FLOAT32, DIMS(4));
    node(g, TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD, "dlogits", 3, x, a, dy);
    emit(g, "softmax_cross_entropy_grad");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST)
        die(out_dir, NULL);
    seed_mlp();
    seed_cnn();
    seed_ops();
    seed_grad_ops();
    printf("make_fuzz_corpus: wrote %d seeds to %s (%d do not import)\n", n_written, out_dir,
           n_invalid);
    return 0;
}
