/* SPDX-License-Identifier: MIT */
/*
 * math-impl.h: the launchers of the element-wise math kernels (Exp, Log,
 * Sqrt, Gelu, Div, Max, Min and their gradient helpers, the mask ops
 * Cast, Compare and Select, Trig and TrigGrad, Round, and Pow and PowGrad), shared by the host
 * half (math.c) and the device half (math.cu) only. Each launcher enqueues
 * on stream and returns cudaGetLastError(), as those of cuda-impl.h do.
 */
#ifndef TIDE_KERNELS_CUDA_MATH_IMPL_H
#define TIDE_KERNELS_CUDA_MATH_IMPL_H

#include "kernels/cuda/cuda-impl.h"

#ifdef __cplusplus
extern "C" {
#endif

enum tide__cuda_math_op {
    TIDE__CUDA_EXP, /* unary: out = f(x) */
    TIDE__CUDA_LOG,
    TIDE__CUDA_SQRT,
    TIDE__CUDA_GELU,
    TIDE__CUDA_GELU_GRAD, /* out = dy * Gelu'(x) */
    TIDE__CUDA_DIV,       /* binary, broadcast: y = f(a, b) */
    TIDE__CUDA_MAX,
    TIDE__CUDA_MIN,
    TIDE__CUDA_ERF, /* unary */
    TIDE__CUDA_POW, /* binary, broadcast */
};

/*
 * out[i] = op(x[i]) for Exp, Log, Sqrt and Gelu, dy NULL; for GeluGrad,
 * out[i] = dy[i] * Gelu'(x[i]).
 */
cudaError_t tide__cuda_launch_math_unary(cudaStream_t stream, enum tide__cuda_math_op op,
                                         const float *x, const float *dy, float *out, int64_t n);

/* y = op(a, b) for Div, Max, Min and Pow over n outputs; plan NULL when a, b, y have one shape. */
cudaError_t tide__cuda_launch_math_binary(cudaStream_t stream, enum tide__cuda_math_op op,
                                          const float *a, const float *b, float *y, int64_t n,
                                          const struct tide__cuda_broadcast *plan);

/*
 * MaxGrad (max set) or MinGrad: da = dy where Max (Min) selected a, else 0;
 * db the rest of dy. n elements of dy's shape; plan as for the binary ops.
 */
cudaError_t tide__cuda_launch_select_grad(cudaStream_t stream, bool max, const float *a,
                                          const float *b, const float *dy, float *da, float *db,
                                          int64_t n, const struct tide__cuda_broadcast *plan);

/*
 * PowGrad: da and db by kernels/pow.h's rules (PyTorch's masks at a zero
 * base or exponent). n elements of dy's shape; plan as for the binary ops.
 */
cudaError_t tide__cuda_launch_pow_grad(cudaStream_t stream, const float *a, const float *b,
                                       const float *dy, float *da, float *db, int64_t n,
                                       const struct tide__cuda_broadcast *plan);

/*
 * Cast of n elements: from int32 to float32 (float_to_int false) or from
 * float32 to int32 (true), by kernels/masks.h's rules. A cast to the same
 * dtype is a copy, which math.c enqueues itself.
 */
cudaError_t tide__cuda_launch_cast(cudaStream_t stream, bool float_to_int, const void *x, void *y,
                                   int64_t n);

/*
 * Compare over n outputs: y = 1.0f where a <mode> b, else 0.0f, a and b
 * int32 (ints set) or float32; plan NULL when a, b and y have one shape.
 */
cudaError_t tide__cuda_launch_compare(cudaStream_t stream, int mode, bool ints, const void *a,
                                      const void *b, float *y, int64_t n,
                                      const struct tide__cuda_broadcast *plan);

/* Select over n outputs: y = cond != 0 ? x : y; plan NULL when all four have one shape. */
cudaError_t tide__cuda_launch_select(cudaStream_t stream, const float *cond, const float *x,
                                     const float *y, float *out, int64_t n,
                                     const struct tide__cuda_broadcast *plan);

/*
 * Trig over n elements: out = fn(x) (dy NULL), or TrigGrad's
 * out = dy * fn'(x), by kernels/trig.h's rules; fn an enum
 * tide_trig_function value.
 */
cudaError_t tide__cuda_launch_trig(cudaStream_t stream, int fn, const float *x, const float *dy,
                                   float *out, int64_t n);

/* Round over n elements: out = x rounded by mode (an enum tide_rounding value), by
 * kernels/round.h's rule. */
cudaError_t tide__cuda_launch_round(cudaStream_t stream, int mode, const float *x, float *out,
                                    int64_t n);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CUDA_MATH_IMPL_H */
