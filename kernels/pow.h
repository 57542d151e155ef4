/* SPDX-License-Identifier: MIT */
/*
 * pow.h: the element rules of Pow and PowGrad (ops.def), shared by the CPU
 * kernels (kernels/cpu/math.c) and the device half of the CUDA kernels
 * (kernels/cuda/math.cu), so that both backends compute every element by
 * the same text, including the edge cases.
 *
 * Pow is C's powf, whose special cases are NumPy's and ONNX's: a negative
 * base with an integral exponent keeps the sign the power gives
 * ((-2)^3 = -8, (-2)^2 = 4), with any other finite exponent is NaN;
 * x^0 = 1 for every x, NaN included; 0^b is 0 for b > 0 and inf for b < 0.
 * libm's powf and CUDA's round differently (CUDA's errs by a few ulp), so
 * the backends agree to rounding, not bit for bit.
 *
 * PowGrad follows PyTorch's pow_backward_self and pow_backward_exponent
 * (torch/csrc/autograd/FunctionsManual.cpp), masks and order of operations
 * included:
 *
 *   da = b == 0 ? 0 : dy * (b * a^(b - 1))
 *   db = dy * (a == 0 && b >= 0 ? 0 : a^b * log(a))
 *
 * So da is exactly 0 where the exponent is 0 (whatever dy is), and db is
 * dy * 0 where the base is 0 and the exponent is not negative: the limit
 * of a^b log(a) as a -> 0+ for b > 0, and what keeps a GeM pooling whose
 * input was clamped at 0 from training p into NaN. Where a < 0, log(a) is
 * NaN and so is db, as in PyTorch.
 *
 * The functions are `static inline` for C; a CUDA file defines TIDE_POW_FN
 * as `static inline __host__ __device__` before including this header (no
 * #ifdef for CUDA here), as with masks.h, trig.h and round.h.
 */
#ifndef TIDE_KERNELS_POW_H
#define TIDE_KERNELS_POW_H

#include <math.h>

#ifndef TIDE_POW_FN
#define TIDE_POW_FN static inline
#endif

/* Pow's element: a raised to b. */
TIDE_POW_FN float tide__pow(float a, float b)
{
    return powf(a, b);
}

/* PowGrad's element for a, the base: dy * (b * a^(b - 1)), and 0 where b == 0. */
TIDE_POW_FN float tide__pow_grad_base(float a, float b, float dy)
{
    return b == 0.0f ? 0.0f : dy * (b * powf(a, b - 1.0f));
}

/* PowGrad's element for b, the exponent: dy * (a^b * log(a)), dy * 0 where a == 0 and b >= 0. */
TIDE_POW_FN float tide__pow_grad_exponent(float a, float b, float dy)
{
    return dy * (a == 0.0f && b >= 0.0f ? 0.0f : powf(a, b) * logf(a));
}

#endif /* TIDE_KERNELS_POW_H */
