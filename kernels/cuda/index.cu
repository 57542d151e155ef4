/* SPDX-License-Identifier: MIT */
/*
 * index.cu: the device half of Gather, GatherGrad, GatherElements,
 * GatherElementsGrad, TopK, TopKGrad, MoeRoute, and the index check they
 * share (host half: index.c).
 *
 * Indices. check_indices runs first, in one block, and writes the smallest
 * position whose index is outside its range into the stream's fault record
 * (if the record is clear), so the report is the same on every run. The
 * kernels after it never follow such an index: Gather and GatherElements
 * give NaN, GatherGrad, GatherElementsGrad and TopKGrad skip it, MoeRoute
 * drops the choice. GatherElements' indices may count from the end: their
 * range is [-d, d), and an entry equal to ignore_index is no fault.
 *
 * Determinism without float atomics. GatherGrad groups the positions of the
 * ids by table row with a stable counting sort in one block (integer
 * counts, a scan, one warp placing 32 positions at a time in a fixed order),
 * then one thread per output element sums its row's dy values in double in
 * ascending position order, as the CPU kernel does. TopK and
 * TopKGrad give one thread a whole row (the CPU's insertion, O(n * k) at
 * worst). MoeRoute runs on one thread: it is O(T * k + experts * capacity)
 * and its slots are handed out strictly in order. GatherElementsGrad gives
 * one thread each element of dx, which walks its column along the gathered
 * axis in ascending order and adds the dy of the indices that name it: the
 * CPU kernel's order, so the same bits.
 */
#include "kernels/cuda/cuda-impl.h"
#include "kernels/cuda/device.cuh"

namespace
{

using namespace tide_cuda;

constexpr int kCheckThreads = 256;

/*
 * The first position of v[0..n) whose entry is outside [lo, limit) and is not
 * ignore, into the fault record with code (if the record is clear).
 */
__global__ void check_indices_kernel(const int32_t *v, int64_t n, int64_t lo, int64_t limit,
                                     int64_t ignore, int32_t code, tide_cuda_fault *fault,
                                     uint32_t tag)
{
    __shared__ int64_t first_bad[kCheckThreads];
    int64_t bad = n;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        if (v[i] != ignore && (v[i] < lo || v[i] >= limit)) {
            bad = i;
            break;
        }
    }
    first_bad[threadIdx.x] = bad;
    __syncthreads();
    if (threadIdx.x != 0)
        return;
    for (int t = 1; t < kCheckThreads; t++)
        bad = first_bad[t] < bad ? first_bad[t] : bad;
    volatile tide_cuda_fault *record = fault;
    if (bad == n || record->code != TIDE_CUDA_FAULT_NONE)
        return;
    record->tag = tag;
    record->index = bad;
    record->value = v[bad];
    record->limit = limit;
    __threadfence_system(); /* the fields before the code that publishes them */
    record->code = code;
}

__global__ void gather_kernel(const float *table, const int32_t *ids, float *y, int64_t rows,
                              int64_t row, int64_t total)
{
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        int64_t p = i / row, c = i % row;
        int32_t id = ids[p];
        y[i] = id >= 0 && id < rows ? table[(int64_t)id * row + c] : __int_as_float(0x7fc00000);
    }
}

constexpr int kGroupThreads = 1024;
constexpr int64_t kSharedCursors = 4096; /* rows whose cursors fit in shared memory (32 KiB) */

/*
 * One block: start[r] .. start[r + 1] become the positions (in pos) of row r's
 * ids, ascending (a stable counting sort; ids outside [0, rows) are left out).
 *  1. counts: start[r] = how many ids are r (integer atomics: the same counts
 *     in any order);
 *  2. an inclusive scan: start[r] = the end of row r's run, each thread a
 *     contiguous chunk of rows, the chunks' sums scanned in shared memory;
 *  3. warp 0 places the positions from the last to the first, 32 at a time:
 *     lanes with the same id (__match_any_sync) take consecutive slots below
 *     their row's cursor, the highest position the highest slot, and the
 *     cursor moves down past them. Each row's cursor ends at its run's
 *     beginning: start[r] = the start of row r, and start[rows] = the end of
 *     the last run. The cursors are in shared memory when the rows fit.
 * Which slot a position takes depends only on the ids, so pos is the same
 * array on every run, and the same as the CPU kernel's grouping.
 */
__global__ void group_ids_kernel(const int32_t *ids, int64_t n_ids, int64_t rows, int64_t *start,
                                 int64_t *pos)
{
    __shared__ int64_t chunk_sum[kGroupThreads];
    __shared__ int64_t shared_cursor[kSharedCursors];
    const int t = threadIdx.x;
    for (int64_t r = t; r <= rows; r += kGroupThreads)
        start[r] = 0;
    __syncthreads();
    for (int64_t p = t; p < n_ids; p += kGroupThreads) {
        int32_t id = ids[p];
        if (id >= 0 && id < rows)
            atomicAdd(reinterpret_cast<unsigned long long *>(&start[id]), 1ull);
    }
    __syncthreads();

    int64_t per = (rows + kGroupThreads - 1) / kGroupThreads;
    int64_t lo = min(rows, (int64_t)t * per), hi = min(rows, lo + per), sum = 0;
    for (int64_t r = lo; r < hi; r++)
        sum += start[r];
    chunk_sum[t] = sum;
    __syncthreads();
    for (int off = 1; off < kGroupThreads; off <<= 1) {
        int64_t add = t >= off ? chunk_sum[t - off] : 0;
        __syncthreads();
        chunk_sum[t] += add;
        __syncthreads();
    }
    int64_t run = chunk_sum[t] - sum; /* the ids of the rows before this chunk */
    const bool in_shared = rows <= kSharedCursors;
    int64_t *cursor = in_shared ? shared_cursor : start;
    for (int64_t r = lo; r < hi; r++) {
        run += start[r];
        cursor[r] = run;
    }
    if (t == 0)
        start[rows] = chunk_sum[kGroupThreads - 1];
    __syncthreads();

    if (t < 32) {
        const unsigned below = (1u << t) - 1;
        for (int64_t top = n_ids; top > 0; top -= 32) {
            int64_t p = top - 1 - t;
            int32_t id = p >= 0 ? ids[p] : -1;
            bool placed = p >= 0 && id >= 0 && id < rows;
            unsigned same = __match_any_sync(0xffffffffu, placed ? id : -1);
            if (placed)
                pos[cursor[id] - 1 - __popc(same & below)] = p;
            __syncwarp();
            if (placed && (same & below) == 0)
                cursor[id] -= __popc(same);
            __syncwarp();
        }
    }
    __syncthreads();
    if (in_shared) {
        for (int64_t r = t; r < rows; r += kGroupThreads)
            start[r] = shared_cursor[r];
    }
}

__global__ void gather_grad_kernel(const float *dy, const int64_t *start, const int64_t *pos,
                                   float *dx, int64_t row, int64_t total)
{
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        int64_t r = i / row, c = i % row;
        double sum = 0.0;
        for (int64_t q = start[r]; q < start[r + 1]; q++)
            sum += dy[pos[q] * row + c];
        dx[i] = (float)sum;
    }
}

/* y[p] = data at p's column, indices[p] along the axis; 0 where ignored, NaN where out of range. */
__global__ void gather_elements_kernel(const float *data, const int32_t *indices, float *y,
                                       tide__kernel_gather_elements g, int64_t total)
{
    for (int64_t p = first_index(); p < total; p += grid_stride()) {
        int64_t rem = p, at = 0;
        for (int32_t i = g.rank - 1; i >= 0; i--) {
            if (i != g.axis)
                at += rem % g.idims[i] * g.dstrides[i];
            rem /= g.idims[i];
        }
        int64_t v = indices[p];
        if (v == g.ignore_index)
            y[p] = 0.0f;
        else if (v < -g.d || v >= g.d)
            y[p] = __int_as_float(0x7fc00000);
        else
            y[p] = data[at + (v < 0 ? v + g.d : v) * g.dstrides[g.axis]];
    }
}

/*
 * One thread per element of dx: the dy of every index along its column that
 * names its position on the axis, added in ascending order, in float, as the
 * CPU kernel adds them; 0 outside the columns indices cover.
 */
__global__ void gather_elements_grad_kernel(const float *dy, const int32_t *indices, float *dx,
                                            tide__kernel_gather_elements g, int64_t total)
{
    for (int64_t q = first_index(); q < total; q += grid_stride()) {
        int64_t rem = q, io = 0, target = 0;
        bool covered = true;
        for (int32_t i = g.rank - 1; i >= 0; i--) {
            int64_t at = rem % g.ddims[i];
            rem /= g.ddims[i];
            if (i == g.axis)
                target = at;
            else if (at < g.idims[i])
                io += at * g.istrides[i];
            else
                covered = false;
        }
        float sum = 0.0f;
        for (int64_t j = 0; covered && j < g.n; j++) {
            int64_t p = io + j * g.istrides[g.axis], v = indices[p];
            if (v != g.ignore_index && (v < 0 ? v + g.d : v) == target)
                sum += dy[p];
        }
        dx[q] = sum;
    }
}

/* The CPU's order (kernels/cpu/index.c): NaN first, then larger, then lower index. */
__device__ __forceinline__ bool ranks_before(float a, int64_t ia, float b, int64_t ib)
{
    bool a_nan = isnan(a), b_nan = isnan(b);
    if (a_nan != b_nan)
        return a_nan;
    if (!a_nan && a != b)
        return a > b;
    return ia < ib;
}

__global__ void top_k_kernel(const float *xs, float *values, int32_t *indices, int64_t rows,
                             int64_t n, int64_t k)
{
    for (int64_t r = first_index(); r < rows; r += grid_stride()) {
        const float *x = xs + r * n;
        float *v = values + r * k;
        int32_t *ix = indices + r * k;
        int64_t count = 0;
        for (int64_t j = 0; j < n; j++) {
            float xj = x[j];
            if (count == k && !ranks_before(xj, j, v[k - 1], ix[k - 1]))
                continue;
            int64_t m = count < k ? count : k - 1;
            while (m > 0 && ranks_before(xj, j, v[m - 1], ix[m - 1])) {
                v[m] = v[m - 1];
                ix[m] = ix[m - 1];
                m--;
            }
            v[m] = xj;
            ix[m] = (int32_t)j;
            if (count < k)
                count++;
        }
    }
}

/* dx is zero already; one thread per row adds its k values in j order. */
__global__ void top_k_grad_kernel(const float *dv, const int32_t *indices, float *dx, int64_t rows,
                                  int64_t n, int64_t k)
{
    for (int64_t r = first_index(); r < rows; r += grid_stride()) {
        for (int64_t j = 0; j < k; j++) {
            int32_t at = indices[r * k + j];
            if (at >= 0 && at < n)
                dx[r * n + at] += dv[r * k + j];
        }
    }
}

/* One thread, by design: slots are handed out in GShard's order (see kernels/cpu/index.c). */
__global__ void moe_route_kernel(const int32_t *choice, int32_t *dispatch, int32_t *combine,
                                 int64_t tokens, int64_t k, int64_t experts, int64_t capacity,
                                 int64_t *filled)
{
    if (blockIdx.x != 0 || threadIdx.x != 0)
        return;
    int64_t slots = experts * capacity;
    for (int64_t e = 0; e < experts; e++)
        filled[e] = 0;
    for (int64_t s = 0; s < slots; s++)
        dispatch[s] = (int32_t)tokens;
    for (int64_t j = 0; j < k; j++) {
        for (int64_t t = 0; t < tokens; t++) {
            int64_t e = choice[t * k + j];
            if (e < 0 || e >= experts || filled[e] == capacity) {
                combine[t * k + j] = (int32_t)slots;
                continue;
            }
            int64_t slot = e * capacity + filled[e]++;
            dispatch[slot] = (int32_t)t;
            combine[t * k + j] = (int32_t)slot;
        }
    }
}

} // namespace

extern "C" {

cudaError_t tide__cuda_launch_check_indices(cudaStream_t stream, const int32_t *v, int64_t n,
                                            int64_t limit, struct tide_cuda_fault *fault,
                                            uint32_t tag)
{
    if (n <= 0)
        return cudaSuccess;
    /* INT64_MIN: no int32 entry is ignored. */
    check_indices_kernel<<<1, kCheckThreads, 0, stream>>>(v, n, 0, limit, INT64_MIN,
                                                          TIDE_CUDA_FAULT_INDEX, fault, tag);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_check_signed_indices(cudaStream_t stream, const int32_t *v, int64_t n,
                                                   int64_t limit, int64_t ignore,
                                                   struct tide_cuda_fault *fault, uint32_t tag)
{
    if (n <= 0)
        return cudaSuccess;
    check_indices_kernel<<<1, kCheckThreads, 0, stream>>>(v, n, -limit, limit, ignore,
                                                          TIDE_CUDA_FAULT_SIGNED_INDEX, fault, tag);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_gather(cudaStream_t stream, const float *table, const int32_t *ids,
                                     float *y, int64_t rows, int64_t row, int64_t n_ids)
{
    int64_t total = n_ids * row;
    if (total <= 0)
        return cudaSuccess;
    gather_kernel<<<blocks_for(total), kThreads, 0, stream>>>(table, ids, y, rows, row, total);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_gather_grad(cudaStream_t stream, const float *dy, const int32_t *ids,
                                          float *dx, int64_t rows, int64_t row, int64_t n_ids,
                                          int64_t *start, int64_t *pos)
{
    int64_t total = rows * row;
    if (total <= 0)
        return cudaSuccess;
    group_ids_kernel<<<1, kGroupThreads, 0, stream>>>(ids, n_ids, rows, start, pos);
    cudaError_t rc = cudaGetLastError();
    if (rc != cudaSuccess)
        return rc;
    gather_grad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(dy, start, pos, dx, row, total);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_gather_elements(cudaStream_t stream, const float *data,
                                              const int32_t *indices, float *y,
                                              const struct tide__kernel_gather_elements *g,
                                              int64_t n_indices)
{
    if (n_indices <= 0)
        return cudaSuccess;
    gather_elements_kernel<<<blocks_for(n_indices), kThreads, 0, stream>>>(data, indices, y, *g,
                                                                           n_indices);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_gather_elements_grad(cudaStream_t stream, const float *dy,
                                                   const int32_t *indices, float *dx,
                                                   const struct tide__kernel_gather_elements *g)
{
    int64_t total = g->ddims[0] * g->dstrides[0];
    if (total <= 0)
        return cudaSuccess;
    gather_elements_grad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(dy, indices, dx, *g,
                                                                            total);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_top_k(cudaStream_t stream, const float *x, float *values,
                                    int32_t *indices, int64_t rows, int64_t n, int64_t k)
{
    if (rows <= 0 || k <= 0)
        return cudaSuccess;
    top_k_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(x, values, indices, rows, n, k);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_top_k_grad(cudaStream_t stream, const float *dvalues,
                                         const int32_t *indices, float *dx, int64_t rows, int64_t n,
                                         int64_t k)
{
    if (rows <= 0 || n <= 0)
        return cudaSuccess;
    cudaError_t rc = cudaMemsetAsync(dx, 0, (size_t)(rows * n) * sizeof(float), stream);
    if (rc != cudaSuccess || k <= 0)
        return rc;
    top_k_grad_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(dvalues, indices, dx, rows, n, k);
    return cudaGetLastError();
}

cudaError_t tide__cuda_launch_moe_route(cudaStream_t stream, const int32_t *choice,
                                        int32_t *dispatch, int32_t *combine, int64_t tokens,
                                        int64_t k, int64_t experts, int64_t capacity,
                                        int64_t *filled)
{
    if (experts <= 0 || capacity <= 0)
        return cudaSuccess;
    moe_route_kernel<<<1, 1, 0, stream>>>(choice, dispatch, combine, tokens, k, experts, capacity,
                                          filled);
    return cudaGetLastError();
}

} // extern "C"
