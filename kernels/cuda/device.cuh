/* SPDX-License-Identifier: MIT */
/*
 * device.cuh: device helpers shared by the .cu files of kernels/cuda: launch
 * geometry for grid-stride loops, and deterministic block reductions.
 *
 * A block reduction combines the threads' values in a fixed tree: a shuffle
 * tree inside each warp (offsets 16, 8, 4, 2, 1), then the same tree over the
 * warps' results. The order of operations depends only on blockDim, which
 * every launcher derives from the shapes, so the result is the same bits on
 * every run. No float is ever added with an atomic.
 */
#ifndef TIDE_KERNELS_CUDA_DEVICE_CUH
#define TIDE_KERNELS_CUDA_DEVICE_CUH

#include <stdint.h>

namespace tide_cuda
{

constexpr int kThreads = 256;

/* Blocks for n elements of a grid-stride loop: enough to fill the GPU, never more than needed. */
inline unsigned blocks_for(int64_t n)
{
    int64_t blocks = (n + kThreads - 1) / kThreads;
    return (unsigned)(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

/* Blocks for one block per item (rows, channels, outputs), as a grid-stride loop over items. */
inline unsigned blocks_per_item(int64_t items)
{
    return (unsigned)(items < 65536 ? (items > 0 ? items : 1) : 65536);
}

__device__ __forceinline__ int64_t first_index()
{
    return (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t grid_stride()
{
    return (int64_t)gridDim.x * blockDim.x;
}

/* The CPU kernels' max: NaN never replaces a value (v > m is false). */
__device__ __forceinline__ float max_keep(float m, float v)
{
    return v > m ? v : m;
}

__device__ __forceinline__ double warp_sum(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v = max_keep(v, __shfl_down_sync(0xffffffffu, v, offset));
    return v;
}

/*
 * The sum of v over the block, returned to every thread. blockDim.x must be
 * a multiple of 32 and at most 1024; every thread of the block must call it.
 */
__device__ inline double block_sum(double v)
{
    __shared__ double partial[32];
    __shared__ double total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0)
        partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        double w = lane < warps ? partial[lane] : 0.0;
        w = warp_sum(w);
        if (lane == 0)
            total = w;
    }
    __syncthreads();
    double result = total;
    __syncthreads(); /* the next call may overwrite partial and total */
    return result;
}

/* The maximum of v over the block (max_keep), returned to every thread; as block_sum. */
__device__ inline float block_max(float v)
{
    __shared__ float partial[32];
    __shared__ float total;
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_max(v);
    if (lane == 0)
        partial[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < warps ? partial[lane] : -INFINITY;
        w = warp_max(w);
        if (lane == 0)
            total = w;
    }
    __syncthreads();
    float result = total;
    __syncthreads();
    return result;
}

/* The element offset of row-major index i over rank dims with the given strides. */
__device__ __forceinline__ int64_t offset_of(int64_t i, int rank, const int64_t *dims,
                                             const int64_t *strides)
{
    int64_t offset = 0;
    for (int d = rank - 1; d >= 0; d--) {
        offset += (i % dims[d]) * strides[d];
        i /= dims[d];
    }
    return offset;
}

} // namespace tide_cuda

#endif /* TIDE_KERNELS_CUDA_DEVICE_CUH */
