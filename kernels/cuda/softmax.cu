/* SPDX-License-Identifier: MIT */
/*
 * softmax.cu: the device half of Softmax, SoftmaxGrad, SoftmaxCrossEntropy,
 * SoftmaxCrossEntropyGrad, and the label check of the last two.
 *
 * One block owns one lane (the elements along the softmax axis, or one
 * example's logits): the block's maximum, then the sum of exp(x - max) in
 * double through the block's fixed tree, then the outputs, with the CPU
 * kernels' expressions (kernels/cpu/softmax.c). Lanes of fewer than 1024
 * elements get one warp, longer ones 256 threads: a function of the shape.
 *
 * Labels. check_labels runs first, in one block, and writes the smallest
 * example whose label is outside [0, C) into the stream's fault record (if
 * the record is clear), so the report is the same on every run. The loss and
 * gradient kernels never index with such a label: they give its example NaN.
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

/* Threads per lane: one warp for short lanes, more for long ones. */
unsigned lane_threads(int64_t len)
{
    return len >= 1024 ? 256 : 32;
}

__global__ void softmax_kernel(const float *x, float *y, int64_t lanes, int64_t len, int64_t inner)
{
    for (int64_t l = blockIdx.x; l < lanes; l += gridDim.x) {
        int64_t base = (l / inner) * len * inner + l % inner;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            m = max_keep(m, x[base + j * inner]);
        m = block_max(m);
        double sum = 0.0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            float e = expf(x[base + j * inner] - m);
            y[base + j * inner] = e;
            sum += e;
        }
        float inv = (float)(1.0 / block_sum(sum));
        /* Each thread rescales the elements it wrote itself. */
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            y[base + j * inner] *= inv;
    }
}

__global__ void softmax_grad_kernel(const float *dy, const float *y, float *dx, int64_t lanes,
                                    int64_t len, int64_t inner)
{
    for (int64_t l = blockIdx.x; l < lanes; l += gridDim.x) {
        int64_t base = (l / inner) * len * inner + l % inner;
        double dot = 0.0;
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
            dot += (double)dy[base + j * inner] * y[base + j * inner];
        float d = (float)block_sum(dot);
        for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
            int64_t k = base + j * inner;
            dx[k] = y[k] * (dy[k] - d);
        }
    }
}

constexpr int kCheckThreads = 256;

__global__ void check_labels_kernel(const int32_t *labels, int64_t n, int64_t c,
                                    tide_cuda_fault *fault, uint32_t tag)
{
    __shared__ int64_t first_bad[kCheckThreads];
    int64_t bad = n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        if (labels[i] < 0 || labels[i] >= c) {
            bad = i;
            break;
        }
    }
    first_bad[threadIdx.x] = bad;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    for (int t = 1; t < kCheckThreads; t++)
        bad = first_bad[t] < bad ? first_bad[t] : bad;
    volatile tide_cuda_fault *record = fault;
    if (bad == n || record->code != TIDE_CUDA_FAULT_NONE)
        return;
    record->tag = tag;
    record->index = bad;
    record->value = labels[bad];
    record->limit = c;
    __threadfence_system(); /* the fields before the code that publishes them */
    record->code = TIDE_CUDA_FAULT_LABEL;
}

__global__ void softmax_xent_kernel(const float *logits, const int32_t *labels, float *loss,
                                    int64_t n, int64_t c)
{
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *x = logits + i * c;
        int32_t label = labels[i];
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
            m = max_keep(m, x[j]);
        m = block_max(m);
        double sum = 0.0;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
            sum += expf(x[j] - m);
        sum = block_sum(sum);
        if (threadIdx.x == 0)
            loss[i] = label >= 0 && label < c ? (float)((double)m + log(sum) - (double)x[label])
                                              : __int_as_float(0x7fc00000);
    }
}

__global__ void softmax_xent_grad_kernel(const float *logits, const int32_t *labels,
                                         const float *dloss, float *dx, int64_t n, int64_t c)
{
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        const float *x = logits + i * c;
        float *row = dx + i * c;
        int32_t label = labels[i];
        bool valid = label >= 0 && label < c;
        float m = -INFINITY;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x)
            m = max_keep(m, x[j]);
        m = block_max(m);
        double sum = 0.0;
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
            float e = expf(x[j] - m);
            row[j] = e;
            sum += e;
        }
        float inv = (float)(1.0 / block_sum(sum)), g = dloss[i];
        for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
            float v = row[j] * inv;
            if (j == label)
                v -= 1.0f;
            row[j] = valid ? v * g : __int_as_float(0x7fc00000);
        }
    }
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_softmax(cudaStream_t stream, const float *x, float *y, int64_t outer,
                                      int64_t len, int64_t inner)
{
    int64_t lanes = outer * inner;
    if (lanes <= 0 || len <= 0)
        return cudaSuccess;
    softmax_kernel<<<blocks_per_item(lanes), lane_threads(len), 0, stream>>>(x, y, lanes, len,
                                                                             inner);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_softmax_grad(cudaStream_t stream, const float *dy, const float *y,
                                           float *dx, int64_t outer, int64_t len, int64_t inner)
{
    int64_t lanes = outer * inner;
    if (lanes <= 0 || len <= 0)
        return cudaSuccess;
    softmax_grad_kernel<<<blocks_per_item(lanes), lane_threads(len), 0, stream>>>(dy, y, dx, lanes,
                                                                                  len, inner);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_check_labels(cudaStream_t stream, const int32_t *labels, int64_t n,
                                           int64_t c, struct tide_cuda_fault *fault, uint32_t tag)
{
    if (n <= 0)
        return cudaSuccess;
    check_labels_kernel<<<1, kCheckThreads, 0, stream>>>(labels, n, c, fault, tag);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_softmax_xent(cudaStream_t stream, const float *logits,
                                           const int32_t *labels, float *loss, int64_t n, int64_t c)
{
    if (n <= 0)
        return cudaSuccess;
    softmax_xent_kernel<<<blocks_per_item(n), lane_threads(c), 0, stream>>>(logits, labels, loss, n,
                                                                            c);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_softmax_xent_grad(cudaStream_t stream, const float *logits,
                                                const int32_t *labels, const float *dloss,
                                                float *dx, int64_t n, int64_t c)
{
    if (n <= 0 || c <= 0)
        return cudaSuccess;
    softmax_xent_grad_kernel<<<blocks_per_item(n), lane_threads(c), 0, stream>>>(logits, labels,
                                                                                 dloss, dx, n, c);
    return cudaGetLastError();
}

} // extern "C"
