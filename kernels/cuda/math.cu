/* SPDX-License-Identifier: MIT */
/*
 * math.cu: the device half of the element-wise math kernels: Exp, Log,
 * Sqrt, Gelu and GeluGrad, Div, Max and Min with NumPy broadcasting,
 * MaxGrad/MinGrad, the mask ops Cast, Compare and Select (each element by
 * kernels/masks.h, the CPU kernels' own rules), Trig and TrigGrad (each
 * element by kernels/trig.h, in double, as on the CPU), Round (by
 * kernels/round.h), and Pow and PowGrad with NumPy broadcasting (by
 * kernels/pow.h).
 *
 * Each thread computes whole output elements from the matching input
 * elements with the CPU kernels' expressions (kernels/cpu/math.c), in a
 * grid-stride loop, so no result depends on the launch configuration.
 * Broadcast inputs are addressed through the merged plan of common.c, as in
 * elementwise.cu. Max (Min) takes input 1 only where it is strictly greater
 * (less), so ties and NaNs take input 0, as on the CPU.
 */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/math-impl.h"

#define TIDE_MASKS_FN static inline __host__ __device__
#include "kernels/masks.h"

#define TIDE_TRIG_FN static inline __host__ __device__
#include "kernels/trig.h"

#define TIDE_ROUND_FN static inline __host__ __device__
#include "kernels/round.h"

#define TIDE_POW_FN static inline __host__ __device__
#include "kernels/pow.h"

namespace
{

using namespace tide_cuda;

/* Gelu's tanh form: sqrt(2 / pi) and the cubic coefficient (kernels/cpu/math.c has the same). */
constexpr float kGeluK = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

template <int Op> __device__ inline float unary_apply(float x, float dy)
{
    switch (Op) {
    case TIDE__CUDA_EXP:
        return expf(x);
    case TIDE__CUDA_LOG:
        return logf(x);
    case TIDE__CUDA_SQRT:
        return sqrtf(x);
    case TIDE__CUDA_ERF:
        return erff(x);
    case TIDE__CUDA_GELU: {
        float u = kGeluK * (x + kGeluC * x * x * x);
        return 0.5f * x * (1.0f + tanhf(u));
    }
    case TIDE__CUDA_GELU_GRAD: {
        float t = tanhf(kGeluK * (x + kGeluC * x * x * x));
        return dy * (0.5f * (1.0f + t) +
                     0.5f * x * (1.0f - t * t) * kGeluK * (1.0f + 3.0f * kGeluC * x * x));
    }
    default:
        return x;
    }
}

template <int Op>
__global__ void unary_kernel(const float *x, const float *dy, float *out, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = unary_apply<Op>(x[i], dy ? dy[i] : 0.0f);
}

template <int Op> __device__ inline float binary_apply(float x, float y)
{
    switch (Op) {
    case TIDE__CUDA_DIV:
        return x / y;
    case TIDE__CUDA_MAX:
        return y > x ? y : x;
    case TIDE__CUDA_MIN:
        return y < x ? y : x;
    case TIDE__CUDA_POW:
        return tide__pow(x, y);
    default:
        return x;
    }
}

/* The offsets into a and b of output element i under plan (NULL plan: both i). */
__device__ inline void broadcast_offsets(const tide__cuda_broadcast &plan, bool flat, int64_t i,
                                         int64_t *oa, int64_t *ob)
{
    if (flat) {
        *oa = *ob = i;
        return;
    }
    int64_t rest = i, a = 0, b = 0;
    for (int d = plan.rank - 1; d >= 0; d--) {
        int64_t index = rest % plan.dims[d];
        rest /= plan.dims[d];
        a += index * plan.strides[0][d];
        b += index * plan.strides[1][d];
    }
    *oa = a;
    *ob = b;
}

template <int Op>
__global__ void binary_kernel(const float *a, const float *b, float *y, int64_t n,
                              tide__cuda_broadcast plan, bool flat)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t oa, ob;
        broadcast_offsets(plan, flat, i, &oa, &ob);
        y[i] = binary_apply<Op>(a[oa], b[ob]);
    }
}

__global__ void select_grad_kernel(bool max, const float *a, const float *b, const float *dy,
                                   float *da, float *db, int64_t n, tide__cuda_broadcast plan,
                                   bool flat)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t oa, ob;
        broadcast_offsets(plan, flat, i, &oa, &ob);
        float x = a[oa], y = b[ob], g = dy[i];
        bool take_b = max ? y > x : y < x;
        da[i] = take_b ? 0.0f : g;
        db[i] = take_b ? g : 0.0f;
    }
}

__global__ void pow_grad_kernel(const float *a, const float *b, const float *dy, float *da,
                                float *db, int64_t n, tide__cuda_broadcast plan, bool flat)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t oa, ob;
        broadcast_offsets(plan, flat, i, &oa, &ob);
        float x = a[oa], y = b[ob], g = dy[i];
        da[i] = tide__pow_grad_base(x, y, g);
        db[i] = tide__pow_grad_exponent(x, y, g);
    }
}

__global__ void cast_kernel(bool float_to_int, const void *x, void *y, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        if (float_to_int)
            static_cast<int32_t *>(y)[i] =
                tide__mask_float_to_int32(static_cast<const float *>(x)[i]);
        else
            static_cast<float *>(y)[i] = (float)static_cast<const int32_t *>(x)[i];
    }
}

template <typename T>
__global__ void compare_kernel(int mode, const T *a, const T *b, float *y, int64_t n,
                               tide__cuda_broadcast plan, bool flat)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t oa, ob;
        broadcast_offsets(plan, flat, i, &oa, &ob);
        y[i] = TIDE__MASK_COMPARE(a[oa], b[ob], mode) ? 1.0f : 0.0f;
    }
}

__global__ void select_kernel(const float *cond, const float *x, const float *y, float *out,
                              int64_t n, tide__cuda_broadcast plan, bool flat)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t oc = i, ox = i, oy = i;
        if (!flat) {
            int64_t rest = i;
            oc = ox = oy = 0;
            for (int d = plan.rank - 1; d >= 0; d--) {
                int64_t index = rest % plan.dims[d];
                rest /= plan.dims[d];
                oc += index * plan.strides[0][d];
                ox += index * plan.strides[1][d];
                oy += index * plan.strides[2][d];
            }
        }
        out[i] = tide__mask_select(cond[oc], x[ox], y[oy]);
    }
}

/* Trig (dy NULL) or TrigGrad over n elements. */
__global__ void trig_kernel(int fn, const float *x, const float *dy, float *out, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = dy ? tide__trig_grad(fn, dy[i], x[i]) : tide__trig(fn, x[i]);
}

/* Round over n elements. */
__global__ void round_kernel(int mode, const float *x, float *out, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = tide__round(mode, x[i]);
}

/* The plan to pass by value; a zeroed one, unread, when there is none (equal shapes). */
inline tide__cuda_broadcast plan_or_empty(const tide__cuda_broadcast *plan)
{
    tide__cuda_broadcast empty = {};
    return plan ? *plan : empty;
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_math_unary(cudaStream_t stream, enum tide__cuda_math_op op,
                                         const float *x, const float *dy, float *out, int64_t n)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned blocks = blocks_for(n);
    switch (op) {
#define UNARY_CASE(OP)                                                                             \
    case OP:                                                                                       \
        unary_kernel<OP><<<blocks, kThreads, 0, stream>>>(x, dy, out, n);                          \
        break;
        UNARY_CASE(TIDE__CUDA_EXP)
        UNARY_CASE(TIDE__CUDA_LOG)
        UNARY_CASE(TIDE__CUDA_SQRT)
        UNARY_CASE(TIDE__CUDA_GELU)
        UNARY_CASE(TIDE__CUDA_GELU_GRAD)
        UNARY_CASE(TIDE__CUDA_ERF)
#undef UNARY_CASE
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_math_binary(cudaStream_t stream, enum tide__cuda_math_op op,
                                          const float *a, const float *b, float *y, int64_t n,
                                          const struct tide__cuda_broadcast *plan)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned blocks = blocks_for(n);
    tide__cuda_broadcast p = plan_or_empty(plan);
    bool flat = plan == NULL;
    switch (op) {
    case TIDE__CUDA_DIV:
        binary_kernel<TIDE__CUDA_DIV><<<blocks, kThreads, 0, stream>>>(a, b, y, n, p, flat);
        break;
    case TIDE__CUDA_MAX:
        binary_kernel<TIDE__CUDA_MAX><<<blocks, kThreads, 0, stream>>>(a, b, y, n, p, flat);
        break;
    case TIDE__CUDA_MIN:
        binary_kernel<TIDE__CUDA_MIN><<<blocks, kThreads, 0, stream>>>(a, b, y, n, p, flat);
        break;
    case TIDE__CUDA_POW:
        binary_kernel<TIDE__CUDA_POW><<<blocks, kThreads, 0, stream>>>(a, b, y, n, p, flat);
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_select_grad(cudaStream_t stream, bool max, const float *a,
                                          const float *b, const float *dy, float *da, float *db,
                                          int64_t n, const struct tide__cuda_broadcast *plan)
{
    if (n <= 0)
        return cudaSuccess;
    select_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(max, a, b, dy, da, db, n,
                                                               plan_or_empty(plan), plan == NULL);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_pow_grad(cudaStream_t stream, const float *a, const float *b,
                                       const float *dy, float *da, float *db, int64_t n,
                                       const struct tide__cuda_broadcast *plan)
{
    if (n <= 0)
        return cudaSuccess;
    pow_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(a, b, dy, da, db, n,
                                                            plan_or_empty(plan), plan == NULL);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_cast(cudaStream_t stream, bool float_to_int, const void *x, void *y,
                                   int64_t n)
{
    if (n <= 0)
        return cudaSuccess;
    cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(float_to_int, x, y, n);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_compare(cudaStream_t stream, int mode, bool ints, const void *a,
                                      const void *b, float *y, int64_t n,
                                      const struct tide__cuda_broadcast *plan)
{
    if (n <= 0)
        return cudaSuccess;
    tide__cuda_broadcast p = plan_or_empty(plan);
    bool flat = plan == NULL;
    if (ints)
        compare_kernel<int32_t><<<blocks_for(n), kThreads, 0, stream>>>(
            mode, static_cast<const int32_t *>(a), static_cast<const int32_t *>(b), y, n, p, flat);
    else
        compare_kernel<float><<<blocks_for(n), kThreads, 0, stream>>>(
            mode, static_cast<const float *>(a), static_cast<const float *>(b), y, n, p, flat);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_select(cudaStream_t stream, const float *cond, const float *x,
                                     const float *y, float *out, int64_t n,
                                     const struct tide__cuda_broadcast *plan)
{
    if (n <= 0)
        return cudaSuccess;
    select_kernel<<<blocks_for(n), kThreads, 0, stream>>>(cond, x, y, out, n, plan_or_empty(plan),
                                                          plan == NULL);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_trig(cudaStream_t stream, int fn, const float *x, const float *dy,
                                   float *out, int64_t n)
{
    if (n <= 0)
        return cudaSuccess;
    trig_kernel<<<blocks_for(n), kThreads, 0, stream>>>(fn, x, dy, out, n);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_round(cudaStream_t stream, int mode, const float *x, float *out,
                                    int64_t n)
{
    if (n <= 0)
        return cudaSuccess;
    round_kernel<<<blocks_for(n), kThreads, 0, stream>>>(mode, x, out, n);
    return cudaGetLastError();
}

} // extern "C"
