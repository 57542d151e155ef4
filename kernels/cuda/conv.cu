/* SPDX-License-Identifier: MIT */
/*
 * conv.cu: the device half of Conv2DBackpropFilter for depthwise
 * convolutions (one filter per channel: group = C = K, w [C, 1, R, S]) under
 * fp32 math, the one convolution conv.c does not hand to cuDNN (when it has
 * 1,024 taps or more: conv_own_kernel says why).
 *
 * Why: cuDNN's deterministic filter-gradient algorithms (conv.c takes no
 * other) are slow for depthwise shapes in plain FP32. On an H200 (cuDNN 9,
 * 2026-11-26) the depthwise filter gradients of torchvision's MobileNet v2
 * at batch 32 took 16 to 27 ms each, 131 ms of its 140 ms step, where
 * PyTorch, whose own depthwise kernels do not go through cuDNN, steps in 32
 * ms under the same rules; with this kernel, 39 ms (docs/benchmarks.md).
 *
 * How: one block per filter tap (channel k, row i, column j) sums dy[b, k,
 * oy, ox] * x[b, k, oy*sh - ph + i*dh, ox*sw - pw + j*dw] over the batch and
 * the output plane, taps that fall in the padding skipped. Each thread adds
 * its strided share in a fixed order, in double, and block_sum combines the
 * threads in its fixed tree (device.cuh): the same bits on every run, no
 * atomics. Plane and batch indices are int: conv.c refuses any tensor of more
 * than INT_MAX elements before this runs.
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

__global__ void depthwise_filter_grad_kernel(tide__kernel_conv cv, const float *x, const float *dy,
                                             float *dw)
{
    int64_t taps = cv.k * cv.r * cv.s;
    int plane = (int)(cv.oh * cv.ow), in_plane = (int)(cv.h * cv.w), ow = (int)cv.ow;
    int per_tap = (int)cv.n * plane;
    for (int64_t t = blockIdx.x; t < taps; t += gridDim.x) {
        int64_t k = t / (cv.r * cv.s);
        int i = (int)((t / cv.s) % cv.r), j = (int)(t % cv.s);
        int row0 = i * (int)cv.dh - (int)cv.ph, col0 = j * (int)cv.dw - (int)cv.pw;
        double acc = 0.0;
        for (int e = threadIdx.x; e < per_tap; e += blockDim.x) {
            int b = e / plane, p = e - b * plane;
            int oy = p / ow, ox = p - oy * ow;
            int iy = oy * (int)cv.sh + row0, ix = ox * (int)cv.sw + col0;
            if (iy >= 0 && iy < cv.h && ix >= 0 && ix < cv.w) {
                int64_t channel = (int64_t)b * cv.k + k;
                acc += (double)dy[channel * plane + p] *
                       (double)x[channel * in_plane + (int64_t)iy * cv.w + ix];
            }
        }
        double total = block_sum(acc);
        if (threadIdx.x == 0)
            dw[t] = (float)total;
    }
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_depthwise_filter_grad(cudaStream_t stream,
                                                    const struct tide__kernel_conv *cv,
                                                    const float *x, const float *dy, float *dw)
{
    int64_t taps = cv->k * cv->r * cv->s;
    if (taps <= 0)
        return cudaSuccess;
    depthwise_filter_grad_kernel<<<blocks_per_item(taps), kThreads, 0, stream>>>(*cv, x, dy, dw);
    return cudaGetLastError();
}

} // extern "C"
