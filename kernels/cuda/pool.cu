/* SPDX-License-Identifier: MIT */
/*
 * pool.cu: the device half of MaxPool2D, AvgPool2D and their gradients.
 *
 * These are custom kernels rather than cuDNN's because the semantics must be
 * the CPU's (kernels/cpu/pool.c) exactly: a window is clipped to the input,
 * padding is never read (max) nor counted (average), and MaxPool2DGrad
 * routes each dy to the first maximum of its window in row-major order. With
 * cuDNN the gradients would also need the forward output, which these ops do
 * not take.
 *
 * The forward kernels give each thread one output. The gradients gather
 * instead of scatter: each thread owns one input cell and adds, in the
 * windows' row-major order, the contributions of the windows that contain it,
 * which is the order in which the CPU kernel accumulates into that cell; so
 * the sums involve no atomics and are the CPU's bits. MaxPool2D writes each
 * window's argmax (an index into its plane) beside its maximum, and
 * MaxPool2DGrad reads it: a cell takes the dy of each covering window whose
 * argmax names it, so an index outside its plane (a graph may feed the
 * gradient any int32 tensor) is never written through; the CPU kernel
 * refuses one, this one drops it.
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

/* A window clipped to the input: rows [h0, h1), columns [w0, w1). */
struct clip {
    int64_t h0, h1, w0, w1;
};

__device__ __forceinline__ clip window(const tide__cuda_pool &p, int64_t oh, int64_t ow)
{
    int64_t h = oh * p.sh - p.ph, w = ow * p.sw - p.pw;
    clip c = {h, h + p.kh, w, w + p.kw};
    c.h0 = c.h0 < 0 ? 0 : c.h0;
    c.w0 = c.w0 < 0 ? 0 : c.w0;
    c.h1 = c.h1 > p.h ? p.h : c.h1;
    c.w1 = c.w1 > p.w ? p.w : c.w1;
    return c;
}

/* The outputs [lo, hi] along one axis whose windows contain input cell i. */
__device__ __forceinline__ void covering(int64_t i, int64_t k, int64_t stride, int64_t pad,
                                         int64_t out, int64_t *lo, int64_t *hi)
{
    int64_t first = i + pad - k + 1; /* o * stride >= first */
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    *hi = (i + pad) / stride;
    if (*hi > out - 1)
        *hi = out - 1;
}

/*
 * y[o]: the window's maximum (from -inf, so that NaNs never win it);
 * argmax[o]: the index in its plane of the window's first maximum in
 * row-major order (strict comparisons from the first cell), the CPU's.
 */
__global__ void max_pool_kernel(tide__cuda_pool p, const float *x, float *y, int32_t *argmax)
{
    int64_t n = p.planes * p.oh * p.ow;
    for (int64_t o = first_index(); o < n; o += grid_stride()) {
        int64_t pl = o / (p.oh * p.ow), oh = o / p.ow % p.oh, ow = o % p.ow;
        const float *plane = x + pl * p.h * p.w;
        clip c = window(p, oh, ow);
        float m = -INFINITY;
        int64_t best_i = c.h0 * p.w + c.w0;
        float best = plane[best_i];
        for (int64_t h = c.h0; h < c.h1; h++) {
            for (int64_t w = c.w0; w < c.w1; w++) {
                float v = plane[h * p.w + w];
                m = max_keep(m, v);
                if (v > best) {
                    best = v;
                    best_i = h * p.w + w;
                }
            }
        }
        y[o] = m;
        argmax[o] = (int32_t)best_i;
    }
}

__global__ void avg_pool_kernel(tide__cuda_pool p, const float *x, float *y)
{
    int64_t n = p.planes * p.oh * p.ow;
    for (int64_t o = first_index(); o < n; o += grid_stride()) {
        int64_t pl = o / (p.oh * p.ow), oh = o / p.ow % p.oh, ow = o % p.ow;
        const float *plane = x + pl * p.h * p.w;
        clip c = window(p, oh, ow);
        double sum = 0.0;
        for (int64_t h = c.h0; h < c.h1; h++)
            for (int64_t w = c.w0; w < c.w1; w++)
                sum += plane[h * p.w + w];
        y[o] = (float)(sum / (double)((c.h1 - c.h0) * (c.w1 - c.w0)));
    }
}

__global__ void max_pool_grad_kernel(tide__cuda_pool p, const float *dy, const int32_t *argmax,
                                     float *dx)
{
    int64_t n = p.planes * p.h * p.w;
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t pl = i / (p.h * p.w), cell = i % (p.h * p.w), h = cell / p.w, w = cell % p.w;
        int64_t oh0, oh1, ow0, ow1;
        covering(h, p.kh, p.sh, p.ph, p.oh, &oh0, &oh1);
        covering(w, p.kw, p.sw, p.pw, p.ow, &ow0, &ow1);
        const float *dyp = dy + pl * p.oh * p.ow;
        const int32_t *ap = argmax + pl * p.oh * p.ow;
        float acc = 0.0f;
        for (int64_t oh = oh0; oh <= oh1; oh++)
            for (int64_t ow = ow0; ow <= ow1; ow++)
                if (ap[oh * p.ow + ow] == cell)
                    acc += dyp[oh * p.ow + ow];
        dx[i] = acc;
    }
}

__global__ void avg_pool_grad_kernel(tide__cuda_pool p, const float *dy, float *dx)
{
    int64_t n = p.planes * p.h * p.w;
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        int64_t pl = i / (p.h * p.w), cell = i % (p.h * p.w), h = cell / p.w, w = cell % p.w;
        int64_t oh0, oh1, ow0, ow1;
        covering(h, p.kh, p.sh, p.ph, p.oh, &oh0, &oh1);
        covering(w, p.kw, p.sw, p.pw, p.ow, &ow0, &ow1);
        const float *dyp = dy + pl * p.oh * p.ow;
        float acc = 0.0f;
        for (int64_t oh = oh0; oh <= oh1; oh++) {
            for (int64_t ow = ow0; ow <= ow1; ow++) {
                clip c = window(p, oh, ow);
                acc += dyp[oh * p.ow + ow] / (float)((c.h1 - c.h0) * (c.w1 - c.w0));
            }
        }
        dx[i] = acc;
    }
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_max_pool(cudaStream_t stream, const struct tide__cuda_pool *p,
                                       const float *x, float *y, int32_t *argmax)
{
    int64_t n = p->planes * p->oh * p->ow;
    if (n <= 0)
        return cudaSuccess;
    max_pool_kernel<<<blocks_for(n), kThreads, 0, stream>>>(*p, x, y, argmax);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_avg_pool(cudaStream_t stream, const struct tide__cuda_pool *p,
                                       const float *x, float *y)
{
    int64_t n = p->planes * p->oh * p->ow;
    if (n <= 0)
        return cudaSuccess;
    avg_pool_kernel<<<blocks_for(n), kThreads, 0, stream>>>(*p, x, y);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_max_pool_grad(cudaStream_t stream, const struct tide__cuda_pool *p,
                                            const float *dy, const int32_t *argmax, float *dx)
{
    int64_t n_in = p->planes * p->h * p->w;
    if (n_in <= 0)
        return cudaSuccess;
    max_pool_grad_kernel<<<blocks_for(n_in), kThreads, 0, stream>>>(*p, dy, argmax, dx);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_avg_pool_grad(cudaStream_t stream, const struct tide__cuda_pool *p,
                                            const float *dy, float *dx)
{
    int64_t n = p->planes * p->h * p->w;
    if (n <= 0)
        return cudaSuccess;
    avg_pool_grad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(*p, dy, dx);
    return cudaGetLastError();
}

} // extern "C"
