/* SPDX-License-Identifier: MIT */
/*
 * layernorm.cu: the device half of LayerNorm and LayerNormGrad.
 *
 * One block owns one row: its sum, then the sum of squared deviations from
 * the mean, each in double through the block's fixed tree (device.cuh), then
 * the outputs with the CPU kernels' expressions (kernels/cpu/layernorm.c).
 * Rows of fewer than 1024 elements get one warp, longer ones 256 threads: a
 * function of the shape. LayerNormGrad's dgain and dbias give each column
 * one thread, which sums the rows in order in double: no atomics.
 */
#include "kernels/cuda/device.cuh"
#include "kernels/cuda/norm-seq.h"

namespace
{

using namespace tide_cuda;

/* Threads per row: one warp for short rows, more for long ones. */
unsigned row_threads(int64_t d)
{
    return d >= 1024 ? 256 : 32;
}

__global__ void layer_norm_kernel(const float *x, const float *gain, const float *bias, float *y,
                                  float *mean_out, float *inv_out, int64_t rows, int64_t d,
                                  double eps)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double sum = 0.0;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
            sum += xr[j];
        double mean = block_sum(sum) / (double)d;
        double sq = 0.0;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            double dev = xr[j] - mean;
            sq += dev * dev;
        }
        double inv_std = 1.0 / sqrt(block_sum(sq) / (double)d + eps);
        if (threadIdx.x == 0) {
            mean_out[r] = (float)mean;
            inv_out[r] = (float)inv_std;
        }
        float mu = (float)mean, inv = (float)inv_std;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
            yr[j] = (xr[j] - mu) * inv * gain[j] + bias[j];
    }
}

__global__ void layer_norm_dx_kernel(const float *dy, const float *x, const float *gain,
                                     const float *mean_in, const float *inv_in, float *dx,
                                     int64_t rows, int64_t d)
{
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float *dyr = dy + r * d, *xr = x + r * d;
        float *dxr = dx + r * d;
        double mu = mean_in[r], inv = inv_in[r];
        double sum_g = 0.0, sum_gx = 0.0;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            double g = (double)gain[j] * dyr[j];
            sum_g += g;
            sum_gx += g * ((xr[j] - mu) * inv);
        }
        double mean_g = block_sum(sum_g) / (double)d;
        double mean_gx = block_sum(sum_gx) / (double)d;
        for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
            double xhat = (xr[j] - mu) * inv;
            dxr[j] = (float)(inv * ((double)gain[j] * dyr[j] - mean_g - xhat * mean_gx));
        }
    }
}

__global__ void layer_norm_dgain_kernel(const float *dy, const float *x, const float *mean_in,
                                        const float *inv_in, float *dgain, float *dbias,
                                        int64_t rows, int64_t d)
{
    for (int64_t j = first_index(); j < d; j += grid_stride()) {
        double sum_dyx = 0.0, sum_dy = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            float g = dy[r * d + j];
            sum_dyx += g * ((x[r * d + j] - (double)mean_in[r]) * (double)inv_in[r]);
            sum_dy += g;
        }
        dgain[j] = (float)sum_dyx;
        dbias[j] = (float)sum_dy;
    }
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_layer_norm(cudaStream_t stream, const float *x, const float *gain,
                                         const float *bias, float *y, float *mean, float *inv_std,
                                         int64_t rows, int64_t d, double epsilon)
{
    if (rows <= 0 || d <= 0)
        return cudaSuccess;
    layer_norm_kernel<<<blocks_per_item(rows), row_threads(d), 0, stream>>>(
        x, gain, bias, y, mean, inv_std, rows, d, epsilon);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_layer_norm_grad(cudaStream_t stream, const float *dy, const float *x,
                                              const float *gain, const float *mean,
                                              const float *inv_std, float *dx, float *dgain,
                                              float *dbias, int64_t rows, int64_t d)
{
    if (d <= 0)
        return cudaSuccess;
    if (rows > 0) {
        layer_norm_dx_kernel<<<blocks_per_item(rows), row_threads(d), 0, stream>>>(
            dy, x, gain, mean, inv_std, dx, rows, d);
        cudaError_t rc = cudaGetLastError();
        if (rc != cudaSuccess)
            return rc;
    }
    /* With no rows, dgain and dbias are the empty sums: 0. */
    layer_norm_dgain_kernel<<<blocks_for(d), kThreads, 0, stream>>>(dy, x, mean, inv_std, dgain,
                                                                    dbias, rows, d);
    return cudaGetLastError();
}

} // extern "C"
