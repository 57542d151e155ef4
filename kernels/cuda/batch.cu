/* SPDX-License-Identifier: MIT */
/*
 * batch.cu: the device half of Transpose (BatchMatMul is all cuBLAS; see
 * batch.c).
 *
 * One thread per element of y, in a grid-stride loop: it splits its index
 * over y's merged axes and reads x at the sum of index * stride, from the
 * geometry tide__kernel_transpose_setup computed on the host, passed by
 * value. Writes are coalesced; reads are strided where the axes move. The
 * elements are moved as unsigned words of their size, so any dtype (and any
 * NaN payload) is copied bit for bit.
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

template <typename T>
__global__ void transpose_kernel(T *y, const T *x, tide__kernel_transpose t, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t rest = i, offset = 0;
        for (int d = t.rank - 1; d >= 0; d--) {
            offset += rest % t.dims[d] * t.strides[d];
            rest /= t.dims[d];
        }
        y[i] = x[offset];
    }
}

template <typename T>
cudaError_t transpose(cudaStream_t stream, void *y, const void *x, const tide__kernel_transpose &t,
                      int64_t n)
{
    transpose_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>((T *)y, (const T *)x, t, n);
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_transpose(cudaStream_t stream, void *y, const void *x,
                                        const struct tide__kernel_transpose *t, size_t esize)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++)
        n *= t->dims[d];
    if (n <= 0)
        return cudaSuccess;
    switch (esize) {
    case 1:
        return transpose<uint8_t>(stream, y, x, *t, n);
    case 2:
        return transpose<uint16_t>(stream, y, x, *t, n);
    case 4:
        return transpose<uint32_t>(stream, y, x, *t, n);
    case 8:
        return transpose<uint64_t>(stream, y, x, *t, n);
    default:
        return cudaErrorInvalidValue;
    }
}

} // extern "C"
