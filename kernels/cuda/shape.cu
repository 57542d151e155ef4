/* SPDX-License-Identifier: MIT */
/*
 * shape.cu: the device half of Slice and SliceGrad: a copy of a box of
 * elements between two row-major tensors, one thread per element, typed by
 * the element size so that int32 tensors (labels) move like float32 ones.
 * Identity, Reshape and Concat need no kernel: they are cudaMemcpyAsync and
 * cudaMemcpy2DAsync calls in shape.c.
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

/* The box with element strides and the offsets of its first element in both tensors. */
struct strided_box {
    int32_t rank;
    int64_t box[TIDE_CUDA_MAX_RANK];
    int64_t src_strides[TIDE_CUDA_MAX_RANK], dst_strides[TIDE_CUDA_MAX_RANK];
    int64_t src_base, dst_base;
};

template <typename T>
__global__ void copy_box_kernel(T *dst, const T *src, strided_box b, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t rest = i, s = b.src_base, d = b.dst_base;
        for (int k = b.rank - 1; k >= 0; k--) {
            int64_t index = rest % b.box[k];
            rest /= b.box[k];
            s += index * b.src_strides[k];
            d += index * b.dst_strides[k];
        }
        dst[d] = src[s];
    }
}

template <typename T>
cudaError_t copy_box(cudaStream_t stream, void *dst, const void *src, const strided_box &b,
                     int64_t n)
{
    copy_box_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>((T *)dst, (const T *)src, b, n);
    return cudaGetLastError();
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_copy_box(cudaStream_t stream, void *dst, const void *src,
                                       const struct tide__cuda_box *box, size_t esize)
{
    strided_box b = {};
    b.rank = box->rank;
    int64_t n = 1, ss = 1, ds = 1;
    for (int k = box->rank - 1; k >= 0; k--) {
        b.box[k] = box->box[k];
        b.src_strides[k] = ss;
        b.dst_strides[k] = ds;
        b.src_base += box->src_begin[k] * ss;
        b.dst_base += box->dst_begin[k] * ds;
        ss *= box->src_dims[k];
        ds *= box->dst_dims[k];
        n *= box->box[k];
    }
    if (n <= 0)
        return cudaSuccess;
    switch (esize) {
    case 1:
        return copy_box<uint8_t>(stream, dst, src, b, n);
    case 2:
        return copy_box<uint16_t>(stream, dst, src, b, n);
    case 4:
        return copy_box<uint32_t>(stream, dst, src, b, n);
    case 8:
        return copy_box<uint64_t>(stream, dst, src, b, n);
    default:
        return cudaErrorInvalidValue;
    }
}

} // extern "C"
