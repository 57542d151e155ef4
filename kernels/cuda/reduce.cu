/* SPDX-License-Identifier: MIT */
/*
 * reduce.cu: the device half of the CUDA kernels that sum: ReduceSum,
 * ReduceMean, SumToShape, BiasAddGrad and GlobalAvgPool (one plan, see
 * cuda-impl.h), and BatchNorm with its gradient.
 *
 * Sums are accumulated in double, as on the CPU, and always in an order fixed
 * by the shapes: a short sum (at most SERIAL_MAX terms) is one thread's loop
 * over its terms in row-major order; a longer one belongs to one block,
 * whose threads each add a fixed stride of terms before the block's tree
 * (device.cuh) combines them. BatchNorm gives one block to each channel and
 * makes the CPU's two passes (mean, then the squared deviations from it).
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

/* Sums of at most this many terms are one thread's loop; longer ones a block's. */
constexpr int64_t kSerialMax = 64;
/* Threads of a block that owns one long sum. */
constexpr int kRowThreads = 256;
/*
 * Threads of a block that owns one BatchNorm channel: a layer has as few as
 * 64 channels, one block each, so each block needs many loads in flight
 * (ResNet-50 at batch 16 on an H200: BatchNorm 3.53 ms a step with 256
 * threads, 1.85 with 1024; its gradient 3.59 and 2.16).
 */
constexpr int kChannelThreads = 1024;

__device__ __forceinline__ float finish(double sum, double divisor)
{
    return divisor != 0.0 ? (float)(sum / divisor) : (float)sum;
}

__global__ void reduce_serial(const float *x, float *y, tide__cuda_reduce plan, double divisor)
{
    for (int64_t o = first_index(); o < plan.n_out; o += grid_stride()) {
        const float *base = x + offset_of(o, plan.kept_rank, plan.kept_dims, plan.kept_strides);
        double acc = 0.0;
        for (int64_t r = 0; r < plan.n_reduced; r++)
            acc += base[offset_of(r, plan.reduced_rank, plan.reduced_dims, plan.reduced_strides)];
        y[o] = finish(acc, divisor);
    }
}

__global__ void reduce_block(const float *x, float *y, tide__cuda_reduce plan, double divisor)
{
    for (int64_t o = blockIdx.x; o < plan.n_out; o += gridDim.x) {
        const float *base = x + offset_of(o, plan.kept_rank, plan.kept_dims, plan.kept_strides);
        double acc = 0.0;
        for (int64_t r = threadIdx.x; r < plan.n_reduced; r += blockDim.x)
            acc += base[offset_of(r, plan.reduced_rank, plan.reduced_dims, plan.reduced_strides)];
        acc = block_sum(acc);
        if (threadIdx.x == 0)
            y[o] = finish(acc, divisor);
    }
}

/*
 * Thread t of a channel's block visits elements e = t, t + blockDim.x, ...
 * (e < n * hw) of channel c of x [N, C, hw], as i, the element's index in x:
 * image e / hw, place e % hw in its plane. The image and the place are
 * stepped, not divided out of e per element (a 64-bit division per element
 * cost BatchNorm a fifth of its time on an H200). The order is fixed by the
 * shapes; an empty plane (hw 0) visits nothing.
 */
#define CHANNEL_LOOP(i, c, n, channels, hw)                                                        \
    for (int64_t img_ = (hw) > 0 ? threadIdx.x / (hw) : (n),                                       \
                 j_ = (hw) > 0 ? threadIdx.x % (hw) : 0, di_ = (hw) > 0 ? blockDim.x / (hw) : 0,   \
                 dj_ = (hw) > 0 ? blockDim.x % (hw) : 0, i;                                        \
         img_ < (n) && (i = (img_ * (channels) + (c)) * (hw) + j_, true);                          \
         img_ += di_ + (j_ + dj_ >= (hw)), j_ = j_ + dj_ >= (hw) ? j_ + dj_ - (hw) : j_ + dj_)

__global__ void __launch_bounds__(kChannelThreads)
    batch_norm_kernel(const float *x, const float *gamma, const float *beta, float *y,
                      float *mean_out, float *inv_out, int64_t n, int64_t channels, int64_t hw,
                      double epsilon)
{
    int64_t count = n * hw;
    double m = (double)count;
    for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
        double sum = 0.0;
        CHANNEL_LOOP(i, c, n, channels, hw)
        sum += x[i];
        double mean = block_sum(sum) / m;
        double sq = 0.0;
        CHANNEL_LOOP(i, c, n, channels, hw)
        {
            double d = x[i] - mean;
            sq += d * d;
        }
        double inv_std = 1.0 / sqrt(block_sum(sq) / m + epsilon);
        if (threadIdx.x == 0) {
            mean_out[c] = (float)mean;
            inv_out[c] = (float)inv_std;
        }
        float mu = (float)mean, scale = (float)(gamma[c] * inv_std), shift = beta[c];
        CHANNEL_LOOP(i, c, n, channels, hw)
        y[i] = (x[i] - mu) * scale + shift;
    }
}

__global__ void __launch_bounds__(kChannelThreads)
    batch_norm_grad_kernel(const float *dy, const float *x, const float *gamma,
                           const float *mean_in, const float *inv_in, float *dx, float *dgamma_out,
                           float *dbeta_out, int64_t n, int64_t channels, int64_t hw)
{
    int64_t count = n * hw;
    double m = (double)count;
    for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
        float mu = mean_in[c], inv_std = inv_in[c];
        double mean = mu;
        double sum_dy = 0.0, sum_dy_xc = 0.0;
        CHANNEL_LOOP(i, c, n, channels, hw)
        {
            sum_dy += dy[i];
            sum_dy_xc += dy[i] * (x[i] - mean);
        }
        sum_dy = block_sum(sum_dy);
        sum_dy_xc = block_sum(sum_dy_xc);
        double dgamma = sum_dy_xc * inv_std;
        if (threadIdx.x == 0) {
            dgamma_out[c] = (float)dgamma;
            dbeta_out[c] = (float)sum_dy;
        }
        float k = (float)(gamma[c] * (double)inv_std / m), fm = (float)m;
        float fdbeta = (float)sum_dy, fdgamma = (float)dgamma;
        CHANNEL_LOOP(i, c, n, channels, hw)
        {
            float xhat = (x[i] - mu) * inv_std;
            dx[i] = k * (fm * dy[i] - fdbeta - xhat * fdgamma);
        }
    }
}

#undef CHANNEL_LOOP

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_reduce(cudaStream_t stream, const float *x, float *y,
                                     const struct tide__cuda_reduce *plan, double divisor)
{
    if (plan->n_out <= 0)
        return cudaSuccess;
    if (plan->n_reduced <= kSerialMax)
        reduce_serial<<<blocks_for(plan->n_out), kThreads, 0, stream>>>(x, y, *plan, divisor);
    else
        reduce_block<<<blocks_per_item(plan->n_out), kRowThreads, 0, stream>>>(x, y, *plan,
                                                                               divisor);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_batch_norm(cudaStream_t stream, const float *x, const float *gamma,
                                         const float *beta, float *y, float *mean, float *inv_std,
                                         int64_t n, int64_t c, int64_t hw, double epsilon)
{
    if (c <= 0)
        return cudaSuccess;
    batch_norm_kernel<<<blocks_per_item(c), kChannelThreads, 0, stream>>>(
        x, gamma, beta, y, mean, inv_std, n, c, hw, epsilon);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_batch_norm_grad(cudaStream_t stream, const float *dy, const float *x,
                                              const float *gamma, const float *mean,
                                              const float *inv_std, float *dx, float *dgamma,
                                              float *dbeta, int64_t n, int64_t c, int64_t hw)
{
    if (c <= 0)
        return cudaSuccess;
    batch_norm_grad_kernel<<<blocks_per_item(c), kChannelThreads, 0, stream>>>(
        dy, x, gamma, mean, inv_std, dx, dgamma, dbeta, n, c, hw);
    return cudaGetLastError();
}

} // extern "C"
