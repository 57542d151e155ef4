/* SPDX-License-Identifier: MIT */
/*
 * elementwise.c: the host half of the element-wise CUDA kernels: Add, Sub
 * and Mul with NumPy broadcasting, BroadcastTo, AddN, BiasAdd, the unary ops
 * (Relu, Sigmoid, Tanh, Neg, Scale) and the activation gradients.
 *
 * Each checks its views as the CPU kernel does (kernels/cpu/elementwise.c),
 * plans the broadcast where there is one, and enqueues the device half
 * (elementwise.cu) on the bound stream.
 */
#include "kernels/cuda/cuda-impl.h"

#include <assert.h>

/* ============================================================================
 * Broadcasting binary ops
 * ========================================================================== */

static enum tide_status binary(const struct tide_kernel_args *args, enum tide__cuda_binary_op op,
                               struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_tensor_view *out = &args->outputs[0];
    const struct tide_shape *ins[2] = {&args->inputs[0].shape, &args->inputs[1].shape};
    int64_t total = tide__cuda_numel(out);
    if (total == 0)
        return TIDE_OK;
    const float *a = tide__cuda_in(args, 0), *b = tide__cuda_in(args, 1);
    float *y = tide__cuda_out(args, 0);
    if (tide_shape_equal(ins[0], &out->shape) && tide_shape_equal(ins[1], &out->shape))
        return TIDE_CUDA_CHECK(err,
                               tide__cuda_launch_binary(launch->stream, op, a, b, y, total, NULL));
    struct tide__cuda_broadcast plan;
    bool broadcasts = tide__cuda_broadcast_plan(&plan, &out->shape, ins, 2);
    assert(broadcasts); /* infer made the output the inputs' broadcast shape */
    (void)broadcasts;
    return TIDE_CUDA_CHECK(err,
                           tide__cuda_launch_binary(launch->stream, op, a, b, y, total, &plan));
}

enum tide_status tide__cuda_ADD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_ADD, err);
}

enum tide_status tide__cuda_SUB(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_SUB, err);
}

enum tide_status tide__cuda_MUL(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_MUL, err);
}

/* BroadcastTo(x; shape): the output view's shape is the attribute, as infer set it. */
enum tide_status tide__cuda_BROADCAST_TO(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_tensor_view *out = &args->outputs[0];
    const struct tide_shape *ins[1] = {&args->inputs[0].shape};
    int64_t total = tide__cuda_numel(out);
    if (total == 0)
        return TIDE_OK;
    struct tide__cuda_broadcast plan;
    bool broadcasts = tide__cuda_broadcast_plan(&plan, &out->shape, ins, 1);
    assert(broadcasts); /* infer checked that input 0 broadcasts to the shape */
    (void)broadcasts;
    const struct tide__cuda_broadcast *p = tide_shape_equal(ins[0], &out->shape) ? NULL : &plan;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_binary(launch->stream, TIDE__CUDA_COPY_A,
                                                         tide__cuda_in(args, 0), NULL,
                                                         tide__cuda_out(args, 0), total, p));
}

/* ============================================================================
 * AddN and BiasAdd
 * ========================================================================== */

/*
 * The terms are added in input order, ((x0 + x1) + x2) + ..., as on the CPU:
 * TIDE_CUDA_ADD_N_CHUNK inputs per launch, each launch after the first
 * starting from the partial sum in y.
 */
enum tide_status tide__cuda_ADD_N(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    for (uint32_t i = 0; i < args->n_inputs; i++)
        tide__kernel_same_size(args, i);
    int64_t n = tide__cuda_numel(&args->outputs[0]);
    if (n == 0)
        return TIDE_OK;
    for (uint32_t first = 0; first < args->n_inputs; first += TIDE_CUDA_ADD_N_CHUNK) {
        struct tide__cuda_pointers xs = {{0}};
        uint32_t count = args->n_inputs - first;
        if (count > TIDE_CUDA_ADD_N_CHUNK)
            count = TIDE_CUDA_ADD_N_CHUNK;
        for (uint32_t k = 0; k < count; k++)
            xs.p[k] = tide__cuda_in(args, first + k);
        st = TIDE_CUDA_CHECK(err, tide__cuda_launch_add_n(launch->stream, xs, (int)count,
                                                          first == 0, tide__cuda_out(args, 0), n));
        if (st != TIDE_OK)
            return st;
    }
    return TIDE_OK;
}

/* BiasAdd(x [N, C, ...], bias [C]): bias[c] is added to every element of channel c. */
enum tide_status tide__cuda_BIAS_ADD(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    const struct tide_shape *xs = &args->inputs[0].shape;
    assert(xs->rank >= 2 && tide__cuda_numel(&args->inputs[1]) == xs->dims[1]);
    int64_t outer, channels, inner;
    tide__kernel_split_axis(xs, 1, &outer, &channels, &inner);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_bias_add(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                                    tide__cuda_out(args, 0), outer, channels, inner));
}

/* ============================================================================
 * Unary ops and the activation gradients
 * ========================================================================== */

/* out = op(x), or for a gradient op(dy = input 0, y = input 1). */
static enum tide_status unary(const struct tide_kernel_args *args, enum tide__cuda_unary_op op,
                              bool gradient, float scale, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    if (gradient)
        tide__kernel_same_size(args, 1);
    const float *y_forward = gradient ? tide__cuda_in(args, 1) : NULL;
    return TIDE_CUDA_CHECK(err,
                           tide__cuda_launch_unary(launch->stream, op, tide__cuda_in(args, 0),
                                                   y_forward, tide__cuda_out(args, 0),
                                                   tide__cuda_numel(&args->outputs[0]), scale));
}

enum tide_status tide__cuda_RELU(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_RELU, false, 0.0f, err);
}

enum tide_status tide__cuda_SIGMOID(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_SIGMOID, false, 0.0f, err);
}

enum tide_status tide__cuda_TANH(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_TANH, false, 0.0f, err);
}

enum tide_status tide__cuda_NEG(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_NEG, false, 0.0f, err);
}

/* Scale(x; scale): the double attribute is rounded to float once, as on the CPU. */
enum tide_status tide__cuda_SCALE(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_SCALE, false, (float)args->node->attrs[TIDE_ATTR_SCALE_scale].f,
                 err);
}

enum tide_status tide__cuda_RELU_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_RELU_GRAD, true, 0.0f, err);
}

enum tide_status tide__cuda_SIGMOID_GRAD(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    return unary(args, TIDE__CUDA_SIGMOID_GRAD, true, 0.0f, err);
}

enum tide_status tide__cuda_TANH_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_TANH_GRAD, true, 0.0f, err);
}
