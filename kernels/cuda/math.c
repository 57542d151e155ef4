/* SPDX-License-Identifier: MIT */
/*
 * math.c: the host half of the element-wise math kernels on CUDA: Exp, Log,
 * Sqrt, Gelu, GeluGrad, and Div, Max, Min, MaxGrad, MinGrad with NumPy
 * broadcasting, the mask ops Cast, Compare and Select, Trig and TrigGrad,
 * Round, and Pow and PowGrad with NumPy broadcasting (device half:
 * math.cu).
 *
 * Each checks its views as the CPU kernel does (kernels/cpu/math.c), plans
 * the broadcast where there is one, and enqueues the device half on the
 * bound stream. Domain errors follow IEEE 754 as on the CPU.
 */
#include "kernels/cuda/math-impl.h"

#include <assert.h>

/* ============================================================================
 * Unary ops
 * ========================================================================== */

/* out = op(x), x input 0; for GeluGrad, dy is input 0 and x input 1. */
static enum tide_status unary(const struct tide_kernel_args *args, enum tide__cuda_math_op op,
                              struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    tide__kernel_same_size(args, 0);
    bool gradient = op == TIDE__CUDA_GELU_GRAD;
    if (gradient)
        tide__kernel_same_size(args, 1);
    const float *x = tide__cuda_in(args, gradient ? 1 : 0);
    const float *dy = gradient ? tide__cuda_in(args, 0) : NULL;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_math_unary(launch->stream, op, x, dy,
                                                             tide__cuda_out(args, 0),
                                                             tide__cuda_numel(&args->outputs[0])));
}

enum tide_status tide__cuda_EXP(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_EXP, err);
}

enum tide_status tide__cuda_ERF(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_ERF, err);
}

enum tide_status tide__cuda_LOG(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_LOG, err);
}

enum tide_status tide__cuda_SQRT(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_SQRT, err);
}

enum tide_status tide__cuda_GELU(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_GELU, err);
}

enum tide_status tide__cuda_GELU_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return unary(args, TIDE__CUDA_GELU_GRAD, err);
}

/* ============================================================================
 * Broadcasting binary ops, MaxGrad, MinGrad and PowGrad
 * ========================================================================== */

/*
 * The plan of a over b broadcast to out into *plan; returns plan, or NULL
 * when all three shapes are equal (the device half then reads a flat range).
 */
static const struct tide__cuda_broadcast *plan_of(const struct tide_kernel_args *args,
                                                  const struct tide_shape *out,
                                                  struct tide__cuda_broadcast *plan)
{
    const struct tide_shape *ins[2] = {&args->inputs[0].shape, &args->inputs[1].shape};
    if (tide_shape_equal(ins[0], out) && tide_shape_equal(ins[1], out))
        return NULL;
    bool broadcasts = tide__cuda_broadcast_plan(plan, out, ins, 2);
    assert(broadcasts); /* infer made out the inputs' broadcast shape */
    (void)broadcasts;
    return plan;
}

static enum tide_status binary(const struct tide_kernel_args *args, enum tide__cuda_math_op op,
                               struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_tensor_view *out = &args->outputs[0];
    int64_t total = tide__cuda_numel(out);
    if (total == 0)
        return TIDE_OK;
    struct tide__cuda_broadcast plan;
    const struct tide__cuda_broadcast *p = plan_of(args, &out->shape, &plan);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_math_binary(
                                    launch->stream, op, tide__cuda_in(args, 0),
                                    tide__cuda_in(args, 1), tide__cuda_out(args, 0), total, p));
}

enum tide_status tide__cuda_DIV(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_DIV, err);
}

enum tide_status tide__cuda_MAX(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_MAX, err);
}

enum tide_status tide__cuda_MIN(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_MIN, err);
}

enum tide_status tide__cuda_POW(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, TIDE__CUDA_POW, err);
}

/*
 * MaxGrad, MinGrad or PowGrad (the node's op): (a, b, dy) -> (da, db), both
 * of dy's shape: infer made it the broadcast of a and b.
 */
static enum tide_status select_grad(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_tensor_view *out = &args->outputs[0];
    assert(tide_shape_equal(&args->inputs[2].shape, &out->shape) &&
           tide_shape_equal(&args->outputs[1].shape, &out->shape));
    int64_t total = tide__cuda_numel(out);
    if (total == 0)
        return TIDE_OK;
    struct tide__cuda_broadcast plan;
    const struct tide__cuda_broadcast *p = plan_of(args, &out->shape, &plan);
    const float *a = tide__cuda_in(args, 0), *b = tide__cuda_in(args, 1),
                *dy = tide__cuda_in(args, 2);
    float *da = tide__cuda_out(args, 0), *db = tide__cuda_out(args, 1);
    enum tide_op op = args->node->op;
    return TIDE_CUDA_CHECK(
        err, op == TIDE_OP_POW_GRAD
                 ? tide__cuda_launch_pow_grad(launch->stream, a, b, dy, da, db, total, p)
                 : tide__cuda_launch_select_grad(launch->stream, op == TIDE_OP_MAX_GRAD, a, b, dy,
                                                 da, db, total, p));
}

enum tide_status tide__cuda_MAX_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return select_grad(args, err);
}

enum tide_status tide__cuda_MIN_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return select_grad(args, err);
}

enum tide_status tide__cuda_POW_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return select_grad(args, err);
}

/* ============================================================================
 * Masks: Cast, Compare, Select
 * ========================================================================== */

enum tide_status tide__cuda_CAST(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_tensor_view *x = &args->inputs[0], *y = &args->outputs[0];
    assert(y->dtype == (enum tide_dtype)args->node->attrs[TIDE_ATTR_CAST_to].i);
    tide__kernel_same_size(args, 0);
    int64_t n = tide__cuda_numel(y);
    if (n == 0)
        return TIDE_OK;
    if (x->dtype == y->dtype)
        return TIDE_CUDA_CHECK(err, cudaMemcpyAsync(y->data, x->data, y->nbytes,
                                                    cudaMemcpyDeviceToDevice, launch->stream));
    return TIDE_CUDA_CHECK(err,
                           tide__cuda_launch_cast(launch->stream, x->dtype == TIDE_DTYPE_FLOAT32,
                                                  x->data, y->data, n));
}

enum tide_status tide__cuda_COMPARE(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    int64_t mode = args->node->attrs[TIDE_ATTR_COMPARE_mode].i;
    assert(mode >= 0 && mode < TIDE_COMPARISON_COUNT &&
           args->inputs[0].dtype == args->inputs[1].dtype);
    const struct tide_tensor_view *out = &args->outputs[0];
    int64_t total = tide__cuda_numel(out);
    if (total == 0)
        return TIDE_OK;
    struct tide__cuda_broadcast plan;
    const struct tide__cuda_broadcast *p = plan_of(args, &out->shape, &plan);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_compare(
                                    launch->stream, (int)mode,
                                    args->inputs[0].dtype == TIDE_DTYPE_INT32, args->inputs[0].data,
                                    args->inputs[1].data, tide__cuda_out(args, 0), total, p));
}

enum tide_status tide__cuda_SELECT(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_tensor_view *out = &args->outputs[0];
    int64_t total = tide__cuda_numel(out);
    if (total == 0)
        return TIDE_OK;
    const struct tide_shape *ins[3] = {&args->inputs[0].shape, &args->inputs[1].shape,
                                       &args->inputs[2].shape};
    struct tide__cuda_broadcast plan;
    const struct tide__cuda_broadcast *p = NULL;
    if (!tide_shape_equal(ins[0], &out->shape) || !tide_shape_equal(ins[1], &out->shape) ||
        !tide_shape_equal(ins[2], &out->shape)) {
        bool broadcasts = tide__cuda_broadcast_plan(&plan, &out->shape, ins, 3);
        assert(broadcasts); /* infer made out the inputs' broadcast shape */
        (void)broadcasts;
        p = &plan;
    }
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_select(
                                    launch->stream, tide__cuda_in(args, 0), tide__cuda_in(args, 1),
                                    tide__cuda_in(args, 2), tide__cuda_out(args, 0), total, p));
}

/* ============================================================================
 * Trigonometric and hyperbolic functions: Trig, TrigGrad
 * ========================================================================== */

/* Trig: y = fn(x), x input 0; TrigGrad (gradient set): dx = dy * fn'(x), dy input 0, x input 1. */
static enum tide_status trig(const struct tide_kernel_args *args, bool gradient, int64_t fn,
                             struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    assert(fn >= 0 && fn < TIDE_TRIG_FUNCTION_COUNT);
    tide__kernel_same_size(args, 0);
    if (gradient)
        tide__kernel_same_size(args, 1);
    const float *x = tide__cuda_in(args, gradient ? 1 : 0);
    const float *dy = gradient ? tide__cuda_in(args, 0) : NULL;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_trig(launch->stream, (int)fn, x, dy,
                                                       tide__cuda_out(args, 0),
                                                       tide__cuda_numel(&args->outputs[0])));
}

enum tide_status tide__cuda_TRIG(const struct tide_kernel_args *args, struct tide_error *err)
{
    return trig(args, false, args->node->attrs[TIDE_ATTR_TRIG_fn].i, err);
}

enum tide_status tide__cuda_TRIG_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return trig(args, true, args->node->attrs[TIDE_ATTR_TRIG_GRAD_fn].i, err);
}

/* ============================================================================
 * Rounding to integral values: Round
 * ========================================================================== */

enum tide_status tide__cuda_ROUND(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    int64_t mode = args->node->attrs[TIDE_ATTR_ROUND_mode].i;
    assert(mode >= 0 && mode < TIDE_ROUNDING_COUNT);
    tide__kernel_same_size(args, 0);
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_round(launch->stream, (int)mode, tide__cuda_in(args, 0),
                                     tide__cuda_out(args, 0), tide__cuda_numel(&args->outputs[0])));
}
