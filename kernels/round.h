/* SPDX-License-Identifier: MIT */
/*
 * round.h: the element rule of Round (ops.def), shared by the CPU kernel
 * (kernels/cpu/math.c) and the device half of the CUDA kernel
 * (kernels/cuda/math.cu), so that both backends compute every element by
 * the same text and give the same bits.
 *
 * Each mode is one C99 function of float, exact by definition (the result
 * is an integral value of float32, which float32 holds): floorf, ceilf,
 * rintf and truncf. rintf rounds in the current rounding mode; tide never
 * changes it from IEEE 754's default, to nearest with ties to even (2.5 ->
 * 2, -0.5 -> -0, 3.5 -> 4), which is ONNX's Round and torch.round, and the
 * only mode CUDA's rintf has. Every float of magnitude 2^23 or more is
 * integral already and comes out unchanged, as do NaN, +-inf and -0; a
 * value rounded to zero keeps its sign (floorf(0.5) = 0, ceilf(-0.5) = -0),
 * as in C and PyTorch.
 *
 * The function is `static inline` for C; a CUDA file defines TIDE_ROUND_FN
 * as `static inline __host__ __device__` before including this header (no
 * #ifdef for CUDA here), as with masks.h and trig.h.
 */
#ifndef TIDE_KERNELS_ROUND_H
#define TIDE_KERNELS_ROUND_H

#include <math.h>

#include "graph/graph.h"

#ifndef TIDE_ROUND_FN
#define TIDE_ROUND_FN static inline
#endif

/* Round's element: x rounded to an integral value by mode, an enum tide_rounding value (infer
 * checked it). */
TIDE_ROUND_FN float tide__round(int mode, float x)
{
    switch (mode) {
    case TIDE_ROUNDING_FLOOR:
        return floorf(x);
    case TIDE_ROUNDING_CEIL:
        return ceilf(x);
    case TIDE_ROUNDING_HALF_TO_EVEN:
        return rintf(x);
    default: /* TIDE_ROUNDING_TRUNC */
        return truncf(x);
    }
}

#endif /* TIDE_KERNELS_ROUND_H */
