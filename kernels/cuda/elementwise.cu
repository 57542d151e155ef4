/* SPDX-License-Identifier: MIT */
/*
 * elementwise.cu: the device half of the element-wise CUDA kernels: binary
 * ops with NumPy broadcasting (and BroadcastTo), the unary ops and the
 * activation gradients, AddN, BiasAdd, the spread of GlobalAvgPoolGrad, and
 * the optimizer updates.
 *
 * Each thread computes whole output elements from the matching input
 * elements with the CPU kernels' expressions (kernels/cpu/elementwise.c,
 * optim.c), in a grid-stride loop, so no result depends on the launch
 * configuration. Broadcast inputs are addressed through the merged plan of
 * common.c (usually one to three axes after merging).
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

template <int Op> __device__ inline float binary_apply(float x, float y)
{
    switch (Op) {
    case TIDE__CUDA_ADD:
        return x + y;
    case TIDE__CUDA_SUB:
        return x - y;
    case TIDE__CUDA_MUL:
        return x * y;
    default:
        return x;
    }
}

template <int Op> __global__ void binary_same(const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        y[i] = binary_apply<Op>(a[i], b[i]);
}

template <int Op>
__global__ void binary_broadcast(const float *a, const float *b, float *y, int64_t n,
                                 tide__cuda_broadcast plan)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t rest = i, oa = 0, ob = 0;
        for (int d = plan.rank - 1; d >= 0; d--) {
            int64_t index = rest % plan.dims[d];
            rest /= plan.dims[d];
            oa += index * plan.strides[0][d];
            ob += index * plan.strides[1][d];
        }
        y[i] = binary_apply<Op>(a[oa], Op == TIDE__CUDA_COPY_A ? 0.0f : b[ob]);
    }
}

template <int Op>
cudaError_t binary(cudaStream_t stream, const float *a, const float *b, float *y, int64_t n,
                   const tide__cuda_broadcast *plan)
{
    if (plan)
        binary_broadcast<Op><<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n, *plan);
    else
        binary_same<Op><<<blocks_for(n), kThreads, 0, stream>>>(a, b, y, n);
    return cudaGetLastError();
}

template <int Op> __device__ inline float unary_apply(float x, float y, float scale)
{
    switch (Op) {
    case TIDE__CUDA_RELU:
        return x > 0.0f ? x : 0.0f;
    case TIDE__CUDA_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case TIDE__CUDA_TANH:
        return tanhf(x);
    case TIDE__CUDA_NEG:
        return -x;
    case TIDE__CUDA_SCALE:
        return x * scale;
    case TIDE__CUDA_RELU_GRAD: /* x is dy, y the forward output */
        return y > 0.0f ? x : 0.0f;
    case TIDE__CUDA_SIGMOID_GRAD:
        return x * y * (1.0f - y);
    case TIDE__CUDA_TANH_GRAD:
        return x * (1.0f - y * y);
    default:
        return x;
    }
}

template <int Op>
__global__ void unary_kernel(const float *x, const float *y, float *out, int64_t n, float scale)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        out[i] = unary_apply<Op>(x[i], y ? y[i] : 0.0f, scale);
}

/*
 * The loop over the terms is unrolled so that every xs.p[k] is a constant
 * index into the kernel's parameters: indexed at run time, the array was
 * copied to local memory, and a two-term AddN took 6.7x as long as Add on
 * the same tensors (an H200, ResNet-50's gradients).
 */
__global__ void add_n_kernel(tide__cuda_pointers xs, int count, bool first, float *y, int64_t n)
{
    int start = first ? 1 : 0;
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float acc = first ? xs.p[0][i] : y[i];
#pragma unroll
        for (int k = 0; k < TIDE_CUDA_ADD_N_CHUNK; k++)
            if (k >= start && k < count)
                acc += xs.p[k][i];
        y[i] = acc;
    }
}

__global__ void bias_add_kernel(const float *x, const float *bias, float *y, int64_t n,
                                int64_t channels, int64_t inner)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        y[i] = x[i] + bias[(i / inner) % channels];
}

__global__ void spread_kernel(const float *dy, float *dx, int64_t n, int64_t hw)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        dx[i] = dy[i / hw] / (float)hw;
}

__global__ void sgd_kernel(float *var, const float *grad, int64_t n, float lr)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        var[i] -= lr * grad[i];
}

__global__ void momentum_kernel(float *var, float *accum, const float *grad, int64_t n, float lr,
                                float momentum, bool nesterov)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float g = grad[i];
        float a = momentum * accum[i] + g;
        accum[i] = a;
        var[i] -= lr * (nesterov ? g + momentum * a : a);
    }
}

__global__ void adam_kernel(float *var, float *m, float *v, const float *grad, int64_t n, float lr,
                            float beta1, float beta2, float one_minus_b1, float one_minus_b2,
                            float inv_correction1, float inv_correction2, float eps)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        float g = grad[i];
        float mi = beta1 * m[i] + one_minus_b1 * g;
        float vi = beta2 * v[i] + one_minus_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        var[i] -= lr * (mi * inv_correction1) / (sqrtf(vi * inv_correction2) + eps);
    }
}

__global__ void fill32_kernel(uint32_t *dst, uint32_t pattern, uint64_t words)
{
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (uint64_t)gridDim.x * blockDim.x)
        dst[i] = pattern;
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_binary(cudaStream_t stream, enum tide__cuda_binary_op op,
                                     const float *a, const float *b, float *y, int64_t n,
                                     const struct tide__cuda_broadcast *plan)
{
    if (n <= 0)
        return cudaSuccess;
    switch (op) {
    case TIDE__CUDA_ADD:
        return binary<TIDE__CUDA_ADD>(stream, a, b, y, n, plan);
    case TIDE__CUDA_SUB:
        return binary<TIDE__CUDA_SUB>(stream, a, b, y, n, plan);
    case TIDE__CUDA_MUL:
        return binary<TIDE__CUDA_MUL>(stream, a, b, y, n, plan);
    case TIDE__CUDA_COPY_A:
        if (!plan)
            return cudaMemcpyAsync(y, a, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream);
        return binary<TIDE__CUDA_COPY_A>(stream, a, b, y, n, plan);
    }
    return cudaErrorInvalidValue;
}

cudaError_t tide__cuda_launch_unary(cudaStream_t stream, enum tide__cuda_unary_op op,
                                    const float *x, const float *y_forward, float *out, int64_t n,
                                    float scale)
{
    if (n <= 0)
        return cudaSuccess;
    unsigned blocks = blocks_for(n);
    switch (op) {
#define UNARY_CASE(OP)                                                                             \
    case OP:                                                                                       \
        unary_kernel<OP><<<blocks, kThreads, 0, stream>>>(x, y_forward, out, n, scale);            \
        break;
        UNARY_CASE(TIDE__CUDA_RELU)
        UNARY_CASE(TIDE__CUDA_SIGMOID)
        UNARY_CASE(TIDE__CUDA_TANH)
        UNARY_CASE(TIDE__CUDA_NEG)
        UNARY_CASE(TIDE__CUDA_SCALE)
        UNARY_CASE(TIDE__CUDA_RELU_GRAD)
        UNARY_CASE(TIDE__CUDA_SIGMOID_GRAD)
        UNARY_CASE(TIDE__CUDA_TANH_GRAD)
#undef UNARY_CASE
    default:
        return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_add_n(cudaStream_t stream, struct tide__cuda_pointers xs, int count,
                                    bool first, float *y, int64_t n)
{
    if (n <= 0 || count <= 0)
        return cudaSuccess;
    add_n_kernel<<<blocks_for(n), kThreads, 0, stream>>>(xs, count, first, y, n);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_bias_add(cudaStream_t stream, const float *x, const float *bias,
                                       float *y, int64_t outer, int64_t channels, int64_t inner)
{
    int64_t n = outer * channels * inner;
    if (n <= 0)
        return cudaSuccess;
    bias_add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, bias, y, n, channels, inner);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_spread(cudaStream_t stream, const float *dy, float *dx,
                                     int64_t planes, int64_t hw)
{
    int64_t n = planes * hw;
    if (n <= 0)
        return cudaSuccess;
    spread_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dy, dx, n, hw);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_sgd(cudaStream_t stream, float *var, const float *grad, int64_t n,
                                  float lr)
{
    if (n <= 0)
        return cudaSuccess;
    sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(var, grad, n, lr);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_momentum(cudaStream_t stream, float *var, float *accum,
                                       const float *grad, int64_t n, float lr, float momentum,
                                       bool nesterov)
{
    if (n <= 0)
        return cudaSuccess;
    momentum_kernel<<<blocks_for(n), kThreads, 0, stream>>>(var, accum, grad, n, lr, momentum,
                                                            nesterov);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_adam(cudaStream_t stream, float *var, float *m, float *v,
                                   const float *grad, int64_t n, float lr, float beta1, float beta2,
                                   float one_minus_b1, float one_minus_b2, float inv_correction1,
                                   float inv_correction2, float eps)
{
    if (n <= 0)
        return cudaSuccess;
    adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(var, m, v, grad, n, lr, beta1, beta2,
                                                        one_minus_b1, one_minus_b2, inv_correction1,
                                                        inv_correction2, eps);
    return cudaGetLastError();
}

/* Lives here rather than in the backend so that the runtime compiles as plain C. */
cudaError_t tide_cuda_fill32(void *dst, uint32_t pattern, uint64_t words, cudaStream_t stream)
{
    if (words == 0)
        return cudaSuccess;
    fill32_kernel<<<blocks_for((int64_t)words), kThreads, 0, stream>>>((uint32_t *)dst, pattern,
                                                                       words);
    return cudaGetLastError();
}

} // extern "C"
