/* SPDX-License-Identifier: MIT */
/*
 * math.c: CPU kernels for the element-wise math of sequence models: Exp,
 * Log, Sqrt and Gelu (unary), Div, Max and Min (binary, with NumPy
 * broadcasting), the gradient helpers GeluGrad, MaxGrad and MinGrad, the
 * mask ops Cast, Compare and Select, the trigonometric and hyperbolic
 * functions (Trig, TrigGrad), rounding to integral values (Round), and
 * powers (Pow, PowGrad).
 *
 * The binary ops, MaxGrad/MinGrad and PowGrad walk their broadcast with the rows of
 * tide__cpu_broadcast_rows (elementwise.c), as Add, Sub and Mul do. Every
 * output element depends on the matching input elements alone, so the
 * pieces on the pool change which thread computes an element, never its
 * value.
 *
 * Domain: Log of a negative number and Sqrt of a negative number are NaN,
 * Log(0) is -inf and Div by 0 is +-inf or NaN, as IEEE 754 has them; the
 * kernels neither check nor clamp. Max and Min select input 1 only where it
 * compares strictly greater (less) than input 0, so ties and NaNs select
 * input 0, and MaxGrad/MinGrad route dy the same way.
 *
 * The mask ops (Cast, Compare, Select) compute each element by the rules of
 * kernels/masks.h, which the CUDA kernels share: Compare broadcasts its two
 * inputs (float32 or int32, read through the float pointers of the rows and
 * cast back: both are 4 bytes, so the offsets agree) and Select its three.
 *
 * Trig and TrigGrad compute each element in double and round it once, by
 * kernels/trig.h, which the CUDA kernels share too; Round rounds each by
 * kernels/round.h's rule, also theirs, and Pow and PowGrad compute each by
 * kernels/pow.h's (powf, and PyTorch's masks at a zero base or exponent).
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/masks.h"
#include "kernels/pow.h"
#include "kernels/round.h"
#include "kernels/trig.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Gelu's tanh form: sqrt(2 / pi) and the cubic coefficient (kernels/cuda/math.cu has the same). */
#define GELU_K 0.7978845608028654f
#define GELU_C 0.044715f

/* ============================================================================
 * Unary ops
 * ========================================================================== */

/*
 * e^x for x in [-87, 80], within 2 ulp of expf, as straight-line code that
 * the compiler vectorises (libm's expf is a call per element): x = n ln 2 + r
 * with |r| <= ln 2 / 2 (ln 2 in two parts, so n ln 2 is exact to float), e^r
 * by Cephes' degree-6 polynomial, and 2^n put in the exponent bits. Callers
 * keep x within the range (below -87 the exponent field would underflow).
 */
static inline float gelu_exp(float x)
{
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float n = (x * 1.44269504088896341f + round) - round;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof(scale));
    return p * scale;
}

/*
 * cond ? a : b by the bits, cond 0 or 1. A float ?: keeps the loop from
 * vectorising: under the default -ftrapping-math GCC will not turn a
 * branch on a float comparison into a select; the comparison as an integer
 * and a mask it will.
 */
static inline float gelu_select(int32_t cond, float a, float b)
{
    int32_t ia, ib, mask = -cond;
    memcpy(&ia, &a, sizeof(ia));
    memcpy(&ib, &b, sizeof(ib));
    int32_t bits = (ia & mask) | (ib & ~mask);
    float y;
    memcpy(&y, &bits, sizeof(y));
    return y;
}

/*
 * Gelu in its tanh form, 0.5 x (1 + tanh(u)) with u = k (x + c x^3), written
 * as x / (1 + exp(-2u)): the same function (1 + tanh(u) = 2 / (1 + e^-2u))
 * with one exponential instead of tanhf, which is several times slower and
 * is a call per element, and without 1 + tanh(u)'s cancellation for
 * negative x. The exponent -2u is clamped to [-87, 80] for gelu_exp (a NaN
 * to 80, so that a NaN x reaches the result through x alone); where
 * -2u > 80 (x below about -9.4) Gelu and Gelu' are under 1e-30 in magnitude
 * and are returned as (signed) 0, and where -2u < -87 the exponential is
 * under 2^-125, lost against 1.
 */
static inline float gelu_minus_2u(float x)
{
    return -2.0f * GELU_K * (x + GELU_C * x * x * x);
}

static inline float gelu_clamped_exp(float minus_2u)
{
    float t = gelu_select(!(minus_2u <= 80.0f), 80.0f, minus_2u);
    return gelu_exp(gelu_select(t < -87.0f, -87.0f, t));
}

static inline float gelu(float x)
{
    float minus_2u = gelu_minus_2u(x);
    float y = x / (1.0f + gelu_clamped_exp(minus_2u));
    return gelu_select(minus_2u > 80.0f, x * 0.0f, y);
}

/*
 * d Gelu / dx = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(u);
 * with e = exp(-2u) and s = 1 / (1 + e), 0.5 (1 + t) = s and
 * 1 - t^2 = 4 s e s, so it is s (1 + 2 x e s k (1 + 3 c x^2)).
 */
static inline float gelu_derivative(float x)
{
    float minus_2u = gelu_minus_2u(x);
    float e = gelu_clamped_exp(minus_2u), s = 1.0f / (1.0f + e);
    float d = s * (1.0f + 2.0f * x * e * s * GELU_K * (1.0f + 3.0f * GELU_C * x * x));
    return gelu_select(minus_2u > 80.0f, 0.0f, d);
}

/*
 * Defines a kernel out[i] = EXPR, where x is element i of input 0, and the
 * range its pieces run (ctx: the kernel's args).
 */
#define MATH_UNARY_KERNEL(ID, EXPR)                                                                \
    static void ID##_range(const void *ctx, int64_t begin, int64_t end)                            \
    {                                                                                              \
        const struct tide_kernel_args *args = ctx;                                                 \
        const float *in = tide__cpu_in(args, 0);                                                   \
        float *out = tide__cpu_out(args, 0);                                                       \
        for (int64_t i = begin; i < end; i++) {                                                    \
            float x = in[i];                                                                       \
            out[i] = (EXPR);                                                                       \
        }                                                                                          \
    }                                                                                              \
    enum tide_status tide__cpu_##ID(const struct tide_kernel_args *args, struct tide_error *err)   \
    {                                                                                              \
        tide__kernel_same_size(args, 0);                                                           \
        tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, ID##_range,    \
                               args);                                                              \
        return TIDE_OK;                                                                            \
    }

/* clang-format off */
MATH_UNARY_KERNEL(EXP, expf(x))
MATH_UNARY_KERNEL(LOG, logf(x))
MATH_UNARY_KERNEL(SQRT, sqrtf(x))
MATH_UNARY_KERNEL(GELU, gelu(x))
MATH_UNARY_KERNEL(ERF, erff(x))
/* clang-format on */

/* Elements [begin, end) of GeluGrad(dy, x); ctx is the kernel's args. */
static void gelu_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    const float *dy = tide__cpu_in(args, 0), *x = tide__cpu_in(args, 1);
    float *dx = tide__cpu_out(args, 0);
    for (int64_t i = begin; i < end; i++)
        dx[i] = dy[i] * gelu_derivative(x[i]);
}

enum tide_status tide__cpu_GELU_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_same_size(args, 0);
    tide__kernel_same_size(args, 1);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, gelu_grad_range,
                           args);
    return TIDE_OK;
}

/* ============================================================================
 * Broadcasting binary ops
 * ========================================================================== */

enum math_binary_op { MATH_DIV, MATH_MAX, MATH_MIN, MATH_POW };

/* A binary op's operator and output, shared by the rows of its broadcast. */
struct math_binary_job {
    enum math_binary_op op;
    float *z;
};

static void math_binary_row(const void *ctx, const float *a, int64_t sa, const float *b, int64_t sb,
                            int64_t first, int64_t n)
{
    const struct math_binary_job *job = ctx;
    float *z = job->z + first;
    switch (job->op) {
    case MATH_DIV:
        TIDE__CPU_BINARY_ROW(x / y);
        break;
    case MATH_MAX:
        TIDE__CPU_BINARY_ROW(y > x ? y : x);
        break;
    case MATH_MIN:
        TIDE__CPU_BINARY_ROW(y < x ? y : x);
        break;
    case MATH_POW:
        TIDE__CPU_BINARY_ROW(tide__pow(x, y));
        break;
    }
}

static enum tide_status math_binary(const struct tide_kernel_args *args, enum math_binary_op op)
{
    struct math_binary_job job = {.op = op, .z = tide__cpu_out(args, 0)};
    tide__cpu_broadcast_rows(&args->outputs[0].shape, &args->inputs[0].shape, tide__cpu_in(args, 0),
                             &args->inputs[1].shape, tide__cpu_in(args, 1), math_binary_row, &job);
    return TIDE_OK;
}

enum tide_status tide__cpu_DIV(const struct tide_kernel_args *args, struct tide_error *err)
{
    return math_binary(args, MATH_DIV);
}

enum tide_status tide__cpu_MAX(const struct tide_kernel_args *args, struct tide_error *err)
{
    return math_binary(args, MATH_MAX);
}

enum tide_status tide__cpu_MIN(const struct tide_kernel_args *args, struct tide_error *err)
{
    return math_binary(args, MATH_MIN);
}

enum tide_status tide__cpu_POW(const struct tide_kernel_args *args, struct tide_error *err)
{
    return math_binary(args, MATH_POW);
}

/* ============================================================================
 * MaxGrad and MinGrad
 * ========================================================================== */

/* The selection's dy and outputs, shared by the rows of its broadcast. */
struct select_grad_job {
    bool max; /* MaxGrad; MinGrad otherwise */
    const float *dy;
    float *da, *db;
};

/* da = dy where Max (Min) selected a, else 0; db the rest of dy. */
static void select_grad_row(const void *ctx, const float *a, int64_t sa, const float *b, int64_t sb,
                            int64_t first, int64_t n)
{
    const struct select_grad_job *job = ctx;
    const float *dy = job->dy + first;
    float *da = job->da + first, *db = job->db + first;
    for (int64_t j = 0; j < n; j++) {
        float x = a[j * sa], y = b[j * sb];
        bool take_b = job->max ? y > x : y < x;
        da[j] = take_b ? 0.0f : dy[j];
        db[j] = take_b ? dy[j] : 0.0f;
    }
}

/* (a, b, dy) -> (da, db), both of dy's shape: infer made it the broadcast of a and b. */
static enum tide_status select_grad(const struct tide_kernel_args *args, bool max)
{
    assert(tide_shape_equal(&args->inputs[2].shape, &args->outputs[0].shape) &&
           tide_shape_equal(&args->outputs[1].shape, &args->outputs[0].shape));
    struct select_grad_job job = {.max = max,
                                  .dy = tide__cpu_in(args, 2),
                                  .da = tide__cpu_out(args, 0),
                                  .db = tide__cpu_out(args, 1)};
    tide__cpu_broadcast_rows(&args->outputs[0].shape, &args->inputs[0].shape, tide__cpu_in(args, 0),
                             &args->inputs[1].shape, tide__cpu_in(args, 1), select_grad_row, &job);
    return TIDE_OK;
}

enum tide_status tide__cpu_MAX_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return select_grad(args, true);
}

enum tide_status tide__cpu_MIN_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return select_grad(args, false);
}

/* ============================================================================
 * Masks: Cast, Compare, Select
 * ========================================================================== */

/* Elements [begin, end) of Cast; ctx is the kernel's args. */
static void cast_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    const void *in = args->inputs[0].data;
    void *out = args->outputs[0].data;
    enum tide_dtype from = args->inputs[0].dtype, to = args->outputs[0].dtype;
    if (from == to) {
        size_t size = tide_dtype_size(to);
        memcpy((char *)out + begin * size, (const char *)in + begin * size,
               (size_t)(end - begin) * size);
    } else if (to == TIDE_DTYPE_FLOAT32) {
        const int32_t *x = in;
        float *y = out;
        for (int64_t i = begin; i < end; i++)
            y[i] = (float)x[i];
    } else {
        const float *x = in;
        int32_t *y = out;
        for (int64_t i = begin; i < end; i++)
            y[i] = tide__mask_float_to_int32(x[i]);
    }
}

enum tide_status tide__cpu_CAST(const struct tide_kernel_args *args, struct tide_error *err)
{
    assert(args->outputs[0].dtype == (enum tide_dtype)args->node->attrs[TIDE_ATTR_CAST_to].i);
    tide__kernel_same_size(args, 0);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, cast_range, args);
    return TIDE_OK;
}

/* Compare's mode and output, shared by the rows of its broadcast. */
struct compare_job {
    int mode;
    float *z;
};

static void compare_float_row(const void *ctx, const float *a, int64_t sa, const float *b,
                              int64_t sb, int64_t first, int64_t n)
{
    const struct compare_job *job = ctx;
    float *z = job->z + first;
    for (int64_t j = 0; j < n; j++)
        z[j] = tide__mask_compare_float(a[j * sa], b[j * sb], job->mode);
}

static void compare_int32_row(const void *ctx, const float *a, int64_t sa, const float *b,
                              int64_t sb, int64_t first, int64_t n)
{
    const struct compare_job *job = ctx;
    const int32_t *x = (const int32_t *)(const void *)a, *y = (const int32_t *)(const void *)b;
    float *z = job->z + first;
    for (int64_t j = 0; j < n; j++)
        z[j] = tide__mask_compare_int32(x[j * sa], y[j * sb], job->mode);
}

enum tide_status tide__cpu_COMPARE(const struct tide_kernel_args *args, struct tide_error *err)
{
    int64_t mode = args->node->attrs[TIDE_ATTR_COMPARE_mode].i;
    assert(mode >= 0 && mode < TIDE_COMPARISON_COUNT &&
           args->inputs[0].dtype == args->inputs[1].dtype);
    struct compare_job job = {.mode = (int)mode, .z = tide__cpu_out(args, 0)};
    bool ints = args->inputs[0].dtype == TIDE_DTYPE_INT32;
    tide__cpu_broadcast_rows(&args->outputs[0].shape, &args->inputs[0].shape, tide__cpu_in(args, 0),
                             &args->inputs[1].shape, tide__cpu_in(args, 1),
                             ints ? compare_int32_row : compare_float_row, &job);
    return TIDE_OK;
}

static void select_row(const void *ctx, const float *const *in, const int64_t *strides,
                       int64_t first, int64_t n)
{
    float *z = (float *)ctx + first;
    const float *c = in[0], *x = in[1], *y = in[2];
    int64_t sc = strides[0], sx = strides[1], sy = strides[2];
    for (int64_t j = 0; j < n; j++)
        z[j] = tide__mask_select(c[j * sc], x[j * sx], y[j * sy]);
}

enum tide_status tide__cpu_SELECT(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *shapes[3] = {&args->inputs[0].shape, &args->inputs[1].shape,
                                          &args->inputs[2].shape};
    const float *in[3] = {tide__cpu_in(args, 0), tide__cpu_in(args, 1), tide__cpu_in(args, 2)};
    tide__cpu_broadcast_rows3(&args->outputs[0].shape, shapes, in, select_row,
                              tide__cpu_out(args, 0));
    return TIDE_OK;
}

/* ============================================================================
 * Trigonometric and hyperbolic functions: Trig, TrigGrad
 * ========================================================================== */

/* Elements [begin, end) of Trig(x; fn) by kernels/trig.h's rule; ctx is the kernel's args. */
static void trig_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    int fn = (int)args->node->attrs[TIDE_ATTR_TRIG_fn].i;
    const float *x = tide__cpu_in(args, 0);
    float *y = tide__cpu_out(args, 0);
    for (int64_t i = begin; i < end; i++)
        y[i] = tide__trig(fn, x[i]);
}

enum tide_status tide__cpu_TRIG(const struct tide_kernel_args *args, struct tide_error *err)
{
    int64_t fn = args->node->attrs[TIDE_ATTR_TRIG_fn].i;
    assert(fn >= 0 && fn < TIDE_TRIG_FUNCTION_COUNT);
    (void)fn;
    tide__kernel_same_size(args, 0);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, trig_range, args);
    return TIDE_OK;
}

/* Elements [begin, end) of TrigGrad(dy, x; fn); ctx is the kernel's args. */
static void trig_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    int fn = (int)args->node->attrs[TIDE_ATTR_TRIG_GRAD_fn].i;
    const float *dy = tide__cpu_in(args, 0), *x = tide__cpu_in(args, 1);
    float *dx = tide__cpu_out(args, 0);
    for (int64_t i = begin; i < end; i++)
        dx[i] = tide__trig_grad(fn, dy[i], x[i]);
}

enum tide_status tide__cpu_TRIG_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    int64_t fn = args->node->attrs[TIDE_ATTR_TRIG_GRAD_fn].i;
    assert(fn >= 0 && fn < TIDE_TRIG_FUNCTION_COUNT);
    (void)fn;
    tide__kernel_same_size(args, 0);
    tide__kernel_same_size(args, 1);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, trig_grad_range,
                           args);
    return TIDE_OK;
}

/* ============================================================================
 * Rounding to integral values: Round
 * ========================================================================== */

/* Elements [begin, end) of Round(x; mode) by kernels/round.h's rule; ctx is the kernel's args. */
static void round_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    int mode = (int)args->node->attrs[TIDE_ATTR_ROUND_mode].i;
    const float *x = tide__cpu_in(args, 0);
    float *y = tide__cpu_out(args, 0);
    for (int64_t i = begin; i < end; i++)
        y[i] = tide__round(mode, x[i]);
}

enum tide_status tide__cpu_ROUND(const struct tide_kernel_args *args, struct tide_error *err)
{
    int64_t mode = args->node->attrs[TIDE_ATTR_ROUND_mode].i;
    assert(mode >= 0 && mode < TIDE_ROUNDING_COUNT);
    (void)mode;
    tide__kernel_same_size(args, 0);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, round_range, args);
    return TIDE_OK;
}

/* ============================================================================
 * Powers: PowGrad (Pow is a broadcasting binary op above)
 * ========================================================================== */

/* PowGrad's dy and outputs, shared by the rows of its broadcast. */
struct pow_grad_job {
    const float *dy;
    float *da, *db;
};

/* da and db of one row, by kernels/pow.h's rules. */
static void pow_grad_row(const void *ctx, const float *a, int64_t sa, const float *b, int64_t sb,
                         int64_t first, int64_t n)
{
    const struct pow_grad_job *job = ctx;
    const float *dy = job->dy + first;
    float *da = job->da + first, *db = job->db + first;
    for (int64_t j = 0; j < n; j++) {
        float x = a[j * sa], y = b[j * sb];
        da[j] = tide__pow_grad_base(x, y, dy[j]);
        db[j] = tide__pow_grad_exponent(x, y, dy[j]);
    }
}

/* (a, b, dy) -> (da, db), both of dy's shape: infer made it the broadcast of a and b. */
enum tide_status tide__cpu_POW_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    assert(tide_shape_equal(&args->inputs[2].shape, &args->outputs[0].shape) &&
           tide_shape_equal(&args->outputs[1].shape, &args->outputs[0].shape));
    struct pow_grad_job job = {
        .dy = tide__cpu_in(args, 2), .da = tide__cpu_out(args, 0), .db = tide__cpu_out(args, 1)};
    tide__cpu_broadcast_rows(&args->outputs[0].shape, &args->inputs[0].shape, tide__cpu_in(args, 0),
                             &args->inputs[1].shape, tide__cpu_in(args, 1), pow_grad_row, &job);
    return TIDE_OK;
}
