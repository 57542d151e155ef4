/* SPDX-License-Identifier: MIT */
/*
 * layernorm.cu: the device half of LayerNorm and LayerNormGrad.
 *
 * One block owns one row: its sum, then the sum of squared deviations from
 * the mean, each in double through the block's fixed tree (device.cuh), then
 * the outputs with the CPU kernels' expressions (kernels/cpu/layernorm.c).
 * Rows of fewer than 1024 elements get one warp, longer ones 256 threads: a
 * function of the shape. LayerNormGrad's dgain and dbias: a block owns 32
 * columns, one per lane, and its warps split the rows (warp w takes rows w,
 * w + warps, ... in order), each lane summing in double; then the warps'
 * sums are added in warp order. The split depends on the shape only, so the
 * sums are the same bits every run, with no atomics. (One thread per column
 * summing every row took 0.8 ms for a [4096, 128] gradient on an H200, half
 * of the Transformer's kernel time; reading 32 columns per warp, coalesced,
 * over many warps, it takes microseconds.)
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

/* Warps per block of the dgain kernel: more for more rows, a function of the shape. */
unsigned dgain_warps(int64_t rows)
{
    return rows >= 4096 ? 32 : rows >= 512 ? 8 : 1;
}

__global__ void layer_norm_dgain_kernel(const float *dy, const float *x, const float *mean_in,
                                        const float *inv_in, float *dgain, float *dbias,
                                        int64_t rows, int64_t d)
{
    __shared__ double part_dyx[32][33], part_dy[32][33]; /* [warp][lane], padded */
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int64_t j0 = (int64_t)blockIdx.x * 32; j0 < d; j0 += (int64_t)gridDim.x * 32) {
        int64_t j = j0 + lane;
        double sum_dyx = 0.0, sum_dy = 0.0;
        for (int64_t r = warp; j < d && r < rows; r += warps) {
            float g = dy[r * d + j];
            sum_dyx += g * ((x[r * d + j] - (double)mean_in[r]) * (double)inv_in[r]);
            sum_dy += g;
        }
        part_dyx[warp][lane] = sum_dyx;
        part_dy[warp][lane] = sum_dy;
        __syncthreads();
        if (warp == 0 && j < d) {
            double a = 0.0, b = 0.0;
            for (int w = 0; w < warps; w++) {
                a += part_dyx[w][lane];
                b += part_dy[w][lane];
            }
            dgain[j] = (float)a;
            dbias[j] = (float)b;
        }
        __syncthreads(); /* the next columns overwrite the partial sums */
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
    int64_t groups = (d + 31) / 32;
    unsigned blocks = groups < 65535 ? (unsigned)groups : 65535u;
    layer_norm_dgain_kernel<<<blocks, 32 * dgain_warps(rows), 0, stream>>>(dy, x, mean, inv_std,
                                                                           dgain, dbias, rows, d);
    return cudaGetLastError();
}

} // extern "C"
