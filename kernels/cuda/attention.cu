/* SPDX-License-Identifier: MIT */
/*
 * attention.cu: the device half of Attention and AttentionGrad (host half:
 * attention.c), with the CPU kernels' formulas (kernels/cpu/attention.c).
 *
 * One warp owns one row: a query row (forward, dq) or a key row (dk, dv);
 * a block of kWarps warps owns a tile of kWarps consecutive rows of a head,
 * which read the same keys and values at the same time, so those are served
 * from L1 and L2. The other side is walked in tiles of 32 rows: lane t
 * computes the tile's t-th score (and in the backward pass its dP) as a dot
 * product of its own, over the D elements in order, in double; the tile's
 * rows pass through a 32 x 32 staging tile in shared memory, 32 columns at a
 * time, so any D fits (tile_dot). The accumulators (D per row, in double)
 * live in the workspace, each element owned by one lane, and are updated
 * once per tile with the 32 values broadcast by shuffles, reading the
 * tile's rows in coalesced loads.
 *
 * Forward: the online softmax per query row (running maximum m, sum l,
 * accumulator rescaled by exp(m_old - m_new)); o = acc / l, lse = m + log l.
 * Backward: D_i = rowsum(do * o) first, then a warp per key row sums dk and
 * dv over the query rows in order, and a warp per query row sums dq over the
 * keys in order. No float is added with an atomic; every sum has a fixed
 * order, so the results are the same bits on every run.
 *
 * Workspace (doubles): forward, acc [heads * Sq * D]; backward,
 * D_i [heads * Sq], then dk and dv accumulators [heads * Sk * D] each, then
 * the dq accumulator [heads * Sq * D].
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

constexpr int kWarps = 4;
constexpr unsigned kFull = 0xffffffffu;

/* Geometry by value, for the kernels' parameters. */
struct geometry {
    int64_t heads, sq, sk, d;
    bool causal;
    double scale;
};

/* A butterfly sum: every lane ends with the same bits (a + b == b + a). */
__device__ __forceinline__ double warp_all_sum(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(kFull, v, offset);
    return v;
}

__device__ __forceinline__ double warp_all_max(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1) {
        double o = __shfl_xor_sync(kFull, v, offset);
        v = o > v ? o : v;
    }
    return v;
}

/* x . y over n elements, split over the warp's lanes; every lane gets the result. */
__device__ __forceinline__ double warp_dot(const float *x, const float *y, int64_t n, int lane)
{
    double part = 0.0;
    for (int64_t c = lane; c < n; c += 32)
        part += (double)x[c] * y[c];
    return warp_all_sum(part);
}

/* A warp's staging tile: 32 rows of 32 floats, padded so that a column is in 32 banks. */
typedef float warp_tile[32][33];

/*
 * Lane t < n gets row t of rows (n <= 32 consecutive rows of a [*, d]
 * matrix) dot y, over the d elements in order, in double; lanes t >= n get
 * 0. The rows go through the warp's tile 32 columns at a time, each row
 * read whole by the warp (one coalesced load) and each lane reading its own
 * row from shared memory: a lane walking its row in global memory would
 * make every load touch 32 cache lines. Called by the whole warp.
 */
__device__ double tile_dot(const float *rows, int n, const float *y, int64_t d, warp_tile &tile,
                           int lane)
{
    double sum = 0.0;
    for (int64_t c0 = 0; c0 < d; c0 += 32) {
        int w = d - c0 < 32 ? (int)(d - c0) : 32;
        __syncwarp();
        if (lane < w) {
            for (int r = 0; r < n; r++)
                tile[r][lane] = rows[r * d + c0 + lane];
        }
        __syncwarp();
        if (lane < n) {
            for (int c = 0; c < w; c++)
                sum += (double)tile[lane][c] * y[c0 + c];
        }
    }
    return sum;
}

/* The warp's row, or -1 when this block's tile has no row for it. */
__device__ __forceinline__ int64_t warp_row(int64_t tile_base, int64_t rows)
{
    int64_t row = tile_base + threadIdx.x / 32;
    return row < rows ? row : -1;
}

__global__ void attention_kernel(geometry g, const float *q, const float *k, const float *v,
                                 float *o, float *lse, double *acc_all)
{
    __shared__ warp_tile tiles[kWarps];
    warp_tile &tile = tiles[threadIdx.x / 32];
    int lane = threadIdx.x % 32;
    int64_t rows = g.heads * g.sq, d = g.d;
    for (int64_t base = (int64_t)blockIdx.x * kWarps; base < rows;
         base += (int64_t)gridDim.x * kWarps) {
        int64_t row = warp_row(base, rows);
        if (row < 0)
            continue;
        int64_t head = row / g.sq, i = row % g.sq;
        const float *qi = q + row * d, *kh = k + head * g.sk * d, *vh = v + head * g.sk * d;
        double *acc = acc_all + row * d;
        for (int64_t c = lane; c < d; c += 32)
            acc[c] = 0.0;
        double m = -INFINITY, l = 0.0;
        int64_t keys = g.causal ? i + 1 : g.sk;
        for (int64_t j0 = 0; j0 < keys; j0 += 32) {
            int n = keys - j0 < 32 ? (int)(keys - j0) : 32;
            double dot = tile_dot(kh + j0 * d, n, qi, d, tile, lane);
            double mine = lane < n ? g.scale * dot : -INFINITY;
            double tile_max = warp_all_max(mine);
            double m_new = tile_max > m ? tile_max : m;
            double correction = exp(m - m_new); /* 0 on the first tile: m is -inf */
            double p = lane < n ? exp(mine - m_new) : 0.0;
            l = l * correction + warp_all_sum(p);
            m = m_new;
            for (int64_t c0 = 0; c0 < d; c0 += 32) {
                int64_t c = c0 + lane;
                double a = c < d ? acc[c] * correction : 0.0;
                for (int t = 0; t < n; t++) {
                    double pt = __shfl_sync(kFull, p, t);
                    if (c < d)
                        a += pt * vh[(j0 + t) * d + c];
                }
                if (c < d)
                    acc[c] = a;
            }
        }
        for (int64_t c = lane; c < d; c += 32)
            o[row * d + c] = (float)(acc[c] / l);
        if (lane == 0)
            lse[row] = (float)(m + log(l));
    }
}

/* di[row] = do_row . o_row. */
__global__ void row_dot_kernel(geometry g, const float *dout, const float *o, double *di)
{
    int lane = threadIdx.x % 32;
    int64_t rows = g.heads * g.sq;
    for (int64_t base = (int64_t)blockIdx.x * kWarps; base < rows;
         base += (int64_t)gridDim.x * kWarps) {
        int64_t row = warp_row(base, rows);
        if (row < 0)
            continue;
        double s = warp_dot(dout + row * g.d, o + row * g.d, g.d, lane);
        if (lane == 0)
            di[row] = s;
    }
}

/* dk and dv of one key row per warp, summed over the query rows that see it, in order. */
__global__ void key_grad_kernel(geometry g, const float *q, const float *k, const float *v,
                                const float *lse, const float *dout, const double *di, float *dk,
                                float *dv, double *dk_all, double *dv_all)
{
    __shared__ warp_tile tiles[kWarps];
    warp_tile &tile = tiles[threadIdx.x / 32];
    int lane = threadIdx.x % 32;
    int64_t rows = g.heads * g.sk, d = g.d;
    for (int64_t base = (int64_t)blockIdx.x * kWarps; base < rows;
         base += (int64_t)gridDim.x * kWarps) {
        int64_t row = warp_row(base, rows);
        if (row < 0)
            continue;
        int64_t head = row / g.sk, j = row % g.sk;
        const float *kj = k + row * d, *vj = v + row * d;
        const float *qh = q + head * g.sq * d, *doh = dout + head * g.sq * d;
        const float *lseh = lse + head * g.sq;
        const double *dih = di + head * g.sq;
        double *dk_acc = dk_all + row * d, *dv_acc = dv_all + row * d;
        for (int64_t c = lane; c < d; c += 32) {
            dk_acc[c] = 0.0;
            dv_acc[c] = 0.0;
        }
        for (int64_t i0 = g.causal ? j : 0; i0 < g.sq; i0 += 32) {
            int n = g.sq - i0 < 32 ? (int)(g.sq - i0) : 32;
            double s = g.scale * tile_dot(qh + i0 * d, n, kj, d, tile, lane);
            double dp = tile_dot(doh + i0 * d, n, vj, d, tile, lane);
            double p_mine = 0.0, ds_mine = 0.0;
            if (lane < n) {
                p_mine = exp(s - (double)lseh[i0 + lane]);
                ds_mine = p_mine * (dp - dih[i0 + lane]) * g.scale;
            }
            for (int64_t c0 = 0; c0 < d; c0 += 32) {
                int64_t c = c0 + lane;
                double ak = c < d ? dk_acc[c] : 0.0, av = c < d ? dv_acc[c] : 0.0;
                for (int t = 0; t < n; t++) {
                    double pt = __shfl_sync(kFull, p_mine, t);
                    double dst = __shfl_sync(kFull, ds_mine, t);
                    if (c < d) {
                        av += pt * doh[(i0 + t) * d + c];
                        ak += dst * qh[(i0 + t) * d + c];
                    }
                }
                if (c < d) {
                    dk_acc[c] = ak;
                    dv_acc[c] = av;
                }
            }
        }
        for (int64_t c = lane; c < d; c += 32) {
            dk[row * d + c] = (float)dk_acc[c];
            dv[row * d + c] = (float)dv_acc[c];
        }
    }
}

/* dq of one query row per warp, summed over the keys it sees, in order. */
__global__ void query_grad_kernel(geometry g, const float *q, const float *k, const float *v,
                                  const float *lse, const float *dout, const double *di, float *dq,
                                  double *dq_all)
{
    __shared__ warp_tile tiles[kWarps];
    warp_tile &tile = tiles[threadIdx.x / 32];
    int lane = threadIdx.x % 32;
    int64_t rows = g.heads * g.sq, d = g.d;
    for (int64_t base = (int64_t)blockIdx.x * kWarps; base < rows;
         base += (int64_t)gridDim.x * kWarps) {
        int64_t row = warp_row(base, rows);
        if (row < 0)
            continue;
        int64_t head = row / g.sq, i = row % g.sq;
        const float *qi = q + row * d, *doi = dout + row * d;
        const float *kh = k + head * g.sk * d, *vh = v + head * g.sk * d;
        double *acc = dq_all + row * d;
        for (int64_t c = lane; c < d; c += 32)
            acc[c] = 0.0;
        int64_t keys = g.causal ? i + 1 : g.sk;
        for (int64_t j0 = 0; j0 < keys; j0 += 32) {
            int n = keys - j0 < 32 ? (int)(keys - j0) : 32;
            double s = g.scale * tile_dot(kh + j0 * d, n, qi, d, tile, lane);
            double dp = tile_dot(vh + j0 * d, n, doi, d, tile, lane);
            double ds_mine = lane < n ? exp(s - (double)lse[row]) * (dp - di[row]) : 0.0;
            for (int64_t c0 = 0; c0 < d; c0 += 32) {
                int64_t c = c0 + lane;
                double a = c < d ? acc[c] : 0.0;
                for (int t = 0; t < n; t++) {
                    double dst = __shfl_sync(kFull, ds_mine, t);
                    if (c < d)
                        a += dst * kh[(j0 + t) * d + c];
                }
                if (c < d)
                    acc[c] = a;
            }
        }
        for (int64_t c = lane; c < d; c += 32)
            dq[row * d + c] = (float)(acc[c] * g.scale);
    }
}

geometry geometry_of(const struct tide__kernel_attention *a)
{
    return geometry{a->heads, a->sq, a->sk, a->d, a->causal, a->scale};
}

/* Blocks for rows warps, kWarps per block, as a grid-stride loop over tiles. */
unsigned tiles_for(int64_t rows)
{
    return blocks_per_item((rows + kWarps - 1) / kWarps);
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_attention(cudaStream_t stream, const struct tide__kernel_attention *a,
                                        const float *q, const float *k, const float *v, float *o,
                                        float *lse, void *scratch)
{
    int64_t rows = a->heads * a->sq;
    if (rows <= 0)
        return cudaSuccess;
    attention_kernel<<<tiles_for(rows), kWarps * 32, 0, stream>>>(geometry_of(a), q, k, v, o, lse,
                                                                  (double *)scratch);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_attention_grad(cudaStream_t stream,
                                             const struct tide__kernel_attention *a, const float *q,
                                             const float *k, const float *v, const float *o,
                                             const float *lse, const float *dout, float *dq,
                                             float *dk, float *dv, void *scratch)
{
    geometry g = geometry_of(a);
    int64_t q_rows = a->heads * a->sq, k_rows = a->heads * a->sk;
    double *di = (double *)scratch;
    double *dk_all = di + q_rows, *dv_all = dk_all + k_rows * a->d;
    double *dq_all = dv_all + k_rows * a->d;
    if (q_rows > 0) {
        row_dot_kernel<<<tiles_for(q_rows), kWarps * 32, 0, stream>>>(g, dout, o, di);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    if (k_rows > 0) {
        key_grad_kernel<<<tiles_for(k_rows), kWarps * 32, 0, stream>>>(g, q, k, v, lse, dout, di,
                                                                       dk, dv, dk_all, dv_all);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess)
            return e;
    }
    if (q_rows > 0)
        query_grad_kernel<<<tiles_for(q_rows), kWarps * 32, 0, stream>>>(g, q, k, v, lse, dout, di,
                                                                         dq, dq_all);
    return cudaGetLastError();
}

} // extern "C"
