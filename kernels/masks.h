/* SPDX-License-Identifier: MIT */
/*
 * masks.h: the element rules of the mask ops (ops.def: Cast, Compare,
 * Select), shared by the CPU kernels (kernels/cpu/math.c) and the device
 * half of the CUDA kernels (kernels/cuda/math.cu), so that both backends
 * compute every element by the same text and give the same bits.
 *
 * The functions are `static inline` for C; a CUDA file defines
 * TIDE_MASKS_FN as `static inline __host__ __device__` before including
 * this header (no #ifdef for CUDA here), as with dropout-hash.h.
 */
#ifndef TIDE_KERNELS_MASKS_H
#define TIDE_KERNELS_MASKS_H

#include <stdint.h>

#include "graph/graph.h"

#ifndef TIDE_MASKS_FN
#define TIDE_MASKS_FN static inline
#endif

/*
 * Cast float32 -> int32: toward zero, saturating at INT32_MIN and
 * INT32_MAX, and 0 for a NaN. C leaves a conversion out of range undefined
 * (and x86 gives INT32_MIN for all of them), so the range is checked first:
 * 2^31 is the least float above INT32_MAX, and -2^31 is INT32_MIN exactly.
 */
TIDE_MASKS_FN int32_t tide__mask_float_to_int32(float x)
{
    if (x != x)
        return 0;
    if (x >= 2147483648.0f)
        return INT32_MAX;
    if (x <= -2147483648.0f)
        return INT32_MIN;
    return (int32_t)x;
}

/*
 * Compare's result for one pair under mode (an enum tide_comparison value,
 * which infer checked): 1.0f where it holds, else 0.0f. The C operators on
 * floats are IEEE 754's, so a NaN makes all false but not-equal.
 */
#define TIDE__MASK_COMPARE(x, y, mode)                                                             \
    ((mode) == TIDE_COMPARISON_EQUAL        ? (x) == (y)                                           \
     : (mode) == TIDE_COMPARISON_NOT_EQUAL  ? (x) != (y)                                           \
     : (mode) == TIDE_COMPARISON_LESS       ? (x) < (y)                                            \
     : (mode) == TIDE_COMPARISON_LESS_EQUAL ? (x) <= (y)                                           \
     : (mode) == TIDE_COMPARISON_GREATER    ? (x) > (y)                                            \
                                            : (x) >= (y))

TIDE_MASKS_FN float tide__mask_compare_float(float x, float y, int mode)
{
    return TIDE__MASK_COMPARE(x, y, mode) ? 1.0f : 0.0f;
}

TIDE_MASKS_FN float tide__mask_compare_int32(int32_t x, int32_t y, int mode)
{
    return TIDE__MASK_COMPARE(x, y, mode) ? 1.0f : 0.0f;
}

/* Select's rule: x where cond is not 0 (a NaN cond too), else y; the value moves untouched. */
TIDE_MASKS_FN float tide__mask_select(float cond, float x, float y)
{
    return cond != 0.0f ? x : y;
}

#endif /* TIDE_KERNELS_MASKS_H */
