/* SPDX-License-Identifier: MIT */
/*
 * dropout.cu: the device half of Dropout and DropoutGrad: a grid-stride loop
 * in which each element decides its fate from its index alone, with the
 * integer mask of kernels/dropout-hash.h (the CPU kernels' text, compiled
 * for the device), so the mask is the CPU's bit for bit.
 */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/norm-seq.h"

#define TIDE_DROPOUT_FN static inline __host__ __device__
#include "kernels/dropout-hash.h"

namespace
{

using namespace tide_cuda;

__global__ void dropout_kernel(const float *x, float *y, int64_t n, uint64_t key,
                               uint32_t threshold, float scale)
{
    for (int64_t i = first_index(); i < n; i += grid_stride())
        y[i] = tide__dropout_keep(key, (uint64_t)i, threshold) ? x[i] * scale : 0.0f;
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_dropout(cudaStream_t stream, const float *x, float *y, int64_t n,
                                      uint64_t key, uint32_t threshold, float scale)
{
    if (n <= 0)
        return cudaSuccess;
    dropout_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n, key, threshold, scale);
    return cudaGetLastError();
}

} // extern "C"
