/* SPDX-License-Identifier: MIT */
/*
 * trig.h: the element rules of Trig and TrigGrad (ops.def), shared by the
 * CPU kernels (kernels/cpu/math.c) and the device half of the CUDA kernels
 * (kernels/cuda/math.cu), so that both backends compute every element by
 * the same text.
 *
 * Each element is computed in double by libm's function (CUDA's device
 * library on the GPU, which has the same double functions) and rounded once
 * to float32. The float functions (sinf ...) differ between glibc and CUDA
 * by an ulp or two; in double both are within an ulp or two of double's
 * precision, 29 bits finer than float's, so the rounded results agree but
 * for the rare value within that distance of a halfway point between two
 * floats, and they are float32's correctly rounded values but for those
 * same values. The cost is a double evaluation per element, which the
 * element's function call dominates on the CPU.
 *
 * TrigGrad's derivative is computed in double too and multiplied by dy in
 * double, rounded once: dy * f'(x) with f'(x) = cos x, -sin x, 1 / cos^2 x
 * (1 + tan^2 x), 1 / sqrt(1 - x^2), -1 / sqrt(1 - x^2), 1 / (1 + x^2),
 * cosh x, sinh x, 1 / sqrt(x^2 + 1), 1 / sqrt(x^2 - 1), 1 / (1 - x^2). x^2
 * of a float is exact in double (48 bits of 53), so an FMA the compiler may
 * contract x * x +- 1 into gives the same bits as the two operations. Outside
 * a function's domain the formulas apply as they are, as PyTorch's do
 * (atanh'(2) = -1/3, while atanh(2) is NaN); at its edges they give +-inf
 * (asin'(1), atanh'(1)).
 *
 * The functions are `static inline` for C; a CUDA file defines TIDE_TRIG_FN
 * as `static inline __host__ __device__` before including this header (no
 * #ifdef for CUDA here), as with masks.h and dropout-hash.h.
 */
#ifndef TIDE_KERNELS_TRIG_H
#define TIDE_KERNELS_TRIG_H

#include <math.h>

#include "graph/graph.h"

#ifndef TIDE_TRIG_FN
#define TIDE_TRIG_FN static inline
#endif

/* fn(x) in double; fn is an enum tide_trig_function value, which infer checked. */
TIDE_TRIG_FN double tide__trig_double(int fn, double x)
{
    switch (fn) {
    case TIDE_TRIG_FUNCTION_SIN:
        return sin(x);
    case TIDE_TRIG_FUNCTION_COS:
        return cos(x);
    case TIDE_TRIG_FUNCTION_TAN:
        return tan(x);
    case TIDE_TRIG_FUNCTION_ASIN:
        return asin(x);
    case TIDE_TRIG_FUNCTION_ACOS:
        return acos(x);
    case TIDE_TRIG_FUNCTION_ATAN:
        return atan(x);
    case TIDE_TRIG_FUNCTION_SINH:
        return sinh(x);
    case TIDE_TRIG_FUNCTION_COSH:
        return cosh(x);
    case TIDE_TRIG_FUNCTION_ASINH:
        return asinh(x);
    case TIDE_TRIG_FUNCTION_ACOSH:
        return acosh(x);
    default: /* TIDE_TRIG_FUNCTION_ATANH */
        return atanh(x);
    }
}

/* fn's derivative at x, in double. */
TIDE_TRIG_FN double tide__trig_derivative(int fn, double x)
{
    switch (fn) {
    case TIDE_TRIG_FUNCTION_SIN:
        return cos(x);
    case TIDE_TRIG_FUNCTION_COS:
        return -sin(x);
    case TIDE_TRIG_FUNCTION_TAN: {
        double c = cos(x);
        return 1.0 / (c * c);
    }
    case TIDE_TRIG_FUNCTION_ASIN:
        return 1.0 / sqrt(1.0 - x * x);
    case TIDE_TRIG_FUNCTION_ACOS:
        return -1.0 / sqrt(1.0 - x * x);
    case TIDE_TRIG_FUNCTION_ATAN:
        return 1.0 / (1.0 + x * x);
    case TIDE_TRIG_FUNCTION_SINH:
        return cosh(x);
    case TIDE_TRIG_FUNCTION_COSH:
        return sinh(x);
    case TIDE_TRIG_FUNCTION_ASINH:
        return 1.0 / sqrt(x * x + 1.0);
    case TIDE_TRIG_FUNCTION_ACOSH:
        return 1.0 / sqrt(x * x - 1.0);
    default: /* TIDE_TRIG_FUNCTION_ATANH */
        return 1.0 / (1.0 - x * x);
    }
}

/* Trig's element: fn(x) in double, rounded once. */
TIDE_TRIG_FN float tide__trig(int fn, float x)
{
    return (float)tide__trig_double(fn, (double)x);
}

/* TrigGrad's element: dy * fn'(x) in double, rounded once. */
TIDE_TRIG_FN float tide__trig_grad(int fn, float dy, float x)
{
    return (float)((double)dy * tide__trig_derivative(fn, (double)x));
}

#endif /* TIDE_KERNELS_TRIG_H */
