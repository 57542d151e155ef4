/* SPDX-License-Identifier: MIT */
/*
 * index.c: CPU kernels for the indexing ops: Gather and GatherGrad,
 * GatherElements and GatherElementsGrad, TopK and TopKGrad, and MoeRoute
 * (the routing tables of a Mixture-of-Experts layer).
 *
 * Indices are data, so a kernel checks every index it reads before it writes
 * anything, and refuses the first one out of range with a message naming the
 * node, the input, the position, the index and the range: an id past the end
 * of an embedding table usually means the vocabulary and the model disagree.
 * GatherElements' indices may count from the end, as ONNX's do: [-d, d).
 *
 * Determinism. Gather copies rows, TopK and TopKGrad work row by row, each
 * row whole in one task of the pool; task boundaries depend on shapes only.
 * GatherGrad sums the rows of dy that share an id: it first groups the
 * positions of the ids by table row (a counting sort, in position order, in
 * the workspace), then each task sums whole table rows in double, the
 * positions in ascending order, so the bits do not depend on the thread
 * count; the CUDA kernel (kernels/cuda/index.cu) sums in the same order.
 * MoeRoute is sequential: it is O(T * k) and its slots are filled in order.
 * GatherElementsGrad gives each task whole columns (every position but the
 * gathered axis): a column's additions land in its own column of dx, made in
 * ascending order along the axis, in float, as the CUDA kernel's one thread
 * per element of dx makes them.
 *
 * TopK ranks NaN above every number and equal values by index, lower first,
 * so its result is a function of the input (torch.topk ranks NaN the same
 * way); -0 and +0 are equal.
 */
#include "kernels/cpu/cpu-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* Refuses the first entry of input i (int32, role names it) outside [0, limit). */
static enum tide_status check_indices(const struct tide_kernel_args *args, uint32_t i,
                                      const char *role, int64_t limit, struct tide_error *err)
{
    assert(args->inputs[i].dtype == TIDE_DTYPE_INT32);
    const int32_t *v = args->inputs[i].data;
    int64_t n = tide__cpu_numel(&args->inputs[i]);
    for (int64_t p = 0; p < n; p++) {
        if (v[p] < 0 || v[p] >= limit)
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "input %" PRIu32 " (%s): index %" PRId32 " at position %" PRId64
                                   " is out of range [0, %" PRId64 ")",
                                   i, role, v[p], p, limit);
    }
    return TIDE_OK;
}

/* The product of dims[from..rank): the elements of one row of a table. */
static int64_t trailing_numel(const struct tide_shape *shape, int32_t from)
{
    int64_t n = 1;
    for (int32_t i = from; i < shape->rank; i++)
        n *= shape->dims[i];
    return n;
}

/* ============================================================================
 * Gather and GatherGrad
 * ========================================================================== */

struct gather_job {
    const float *table;
    const int32_t *ids;
    float *y;
    int64_t row; /* elements per table row */
};

static void gather_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct gather_job *job = ctx;
    for (int64_t p = begin; p < end; p++)
        memcpy(job->y + p * job->row, job->table + (int64_t)job->ids[p] * job->row,
               (size_t)job->row * sizeof(float));
}

/* Gather(table [N, ...], ids) -> y[p, ...] = table[ids[p], ...]. */
enum tide_status tide__cpu_GATHER(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *ts = &args->inputs[0].shape;
    assert(ts->rank >= 1);
    int64_t row = trailing_numel(ts, 1), n_ids = tide__cpu_numel(&args->inputs[1]);
    assert(tide__cpu_numel(&args->outputs[0]) == n_ids * row);
    enum tide_status st = check_indices(args, 1, "ids", ts->dims[0], err);
    if (st != TIDE_OK || n_ids == 0 || row == 0)
        return st;
    struct gather_job job = {tide__cpu_in(args, 0), args->inputs[1].data, tide__cpu_out(args, 0),
                             row};
    tide__cpu_parallel_for(n_ids, tide__cpu_grain(row), gather_range, &job);
    return TIDE_OK;
}

struct gather_grad_job {
    const float *dy;
    const int64_t *start; /* per table row + 1: where its positions begin in pos */
    const int64_t *pos;   /* positions of the ids, grouped by row, ascending within a row */
    float *dx;
    int64_t row;
};

/* Table rows [begin, end): each element sums its row's dy rows in double, in position order. */
static void gather_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct gather_grad_job *job = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *out = job->dx + r * job->row;
        int64_t first = job->start[r], last = job->start[r + 1];
        for (int64_t c = 0; c < job->row; c++) {
            double sum = 0.0;
            for (int64_t q = first; q < last; q++)
                sum += job->dy[job->pos[q] * job->row + c];
            out[c] = (float)sum;
        }
    }
}

/* GatherGrad(dy, ids; num_rows) -> dx[r, ...] = the sum of dy[p, ...] over the p with ids[p] = r.
 */
enum tide_status tide__cpu_GATHER_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->outputs[0].shape;
    assert(xs->rank >= 1 && xs->dims[0] == args->node->attrs[TIDE_ATTR_GATHER_GRAD_num_rows].i);
    int64_t rows = xs->dims[0], row = trailing_numel(xs, 1);
    int64_t n_ids = tide__cpu_numel(&args->inputs[1]);
    assert(tide__cpu_numel(&args->inputs[0]) == n_ids * row);
    enum tide_status st = check_indices(args, 1, "ids", rows, err);
    if (st != TIDE_OK || rows == 0 || row == 0)
        return st;
    st = tide__cpu_expect_workspace(args, tide__kernel_index_workspace(args->node, n_ids), err);
    if (st != TIDE_OK)
        return st;

    /* A counting sort of the positions by id: start[r] .. start[r + 1] are row r's. */
    const int32_t *ids = args->inputs[1].data;
    int64_t *start = args->workspace, *pos = start + rows + 1;
    memset(start, 0, (size_t)(rows + 1) * sizeof(int64_t));
    for (int64_t p = 0; p < n_ids; p++)
        start[ids[p] + 1]++;
    for (int64_t r = 0; r < rows; r++)
        start[r + 1] += start[r];
    for (int64_t p = 0; p < n_ids; p++)
        pos[start[ids[p]]++] = p; /* start[r] ends at row r's end, row r + 1's start */
    for (int64_t r = rows; r > 0; r--)
        start[r] = start[r - 1];
    start[0] = 0;

    struct gather_grad_job job = {tide__cpu_in(args, 0), start, pos, tide__cpu_out(args, 0), row};
    tide__cpu_parallel_for(rows, tide__cpu_grain(row), gather_grad_range, &job);
    return TIDE_OK;
}

/* ============================================================================
 * GatherElements and GatherElementsGrad
 * ========================================================================== */

/*
 * Refuses the first entry of indices (input 1) outside [-d, d) that is not
 * ignore_index: GatherElements' indices count from the end when negative.
 */
static enum tide_status check_signed_indices(const struct tide_kernel_args *args,
                                             const struct tide__kernel_gather_elements *g,
                                             struct tide_error *err)
{
    const int32_t *v = args->inputs[1].data;
    int64_t n = tide__cpu_numel(&args->inputs[1]);
    for (int64_t p = 0; p < n; p++) {
        if (v[p] != g->ignore_index && (v[p] < -g->d || v[p] >= g->d))
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "input 1 (indices): index %" PRId32 " at position %" PRId64
                                   " is out of range [%" PRId64 ", %" PRId64 ")",
                                   v[p], p, -g->d, g->d);
    }
    return TIDE_OK;
}

struct gather_elements_job {
    const struct tide__kernel_gather_elements *g;
    const float *src; /* data (GatherElements), dy (GatherElementsGrad) */
    const int32_t *indices;
    float *dst; /* y, dx */
};

/* Columns [begin, end): y at each index position, 0 where the index is ignore_index. */
static void gather_elements_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct gather_elements_job *job = ctx;
    const struct tide__kernel_gather_elements *g = job->g;
    int64_t is = g->istrides[g->axis], ds = g->dstrides[g->axis];
    for (int64_t c = begin; c < end; c++) {
        int64_t io, dof;
        tide__kernel_gather_elements_column(g, c, &io, &dof);
        for (int64_t j = 0; j < g->n; j++) {
            int64_t p = io + j * is, v = job->indices[p];
            if (v == g->ignore_index)
                job->dst[p] = 0.0f;
            else
                job->dst[p] = job->src[dof + (v < 0 ? v + g->d : v) * ds];
        }
    }
}

/*
 * Columns [begin, end) of dx, zero already: dy added at each index in
 * ascending j, in float, as the CUDA kernel sums (the same bits). Columns
 * never share an element of dx, so tasks never write the same one.
 */
static void gather_elements_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct gather_elements_job *job = ctx;
    const struct tide__kernel_gather_elements *g = job->g;
    int64_t is = g->istrides[g->axis], ds = g->dstrides[g->axis];
    for (int64_t c = begin; c < end; c++) {
        int64_t io, dof;
        tide__kernel_gather_elements_column(g, c, &io, &dof);
        for (int64_t j = 0; j < g->n; j++) {
            int64_t p = io + j * is, v = job->indices[p];
            if (v != g->ignore_index)
                job->dst[dof + (v < 0 ? v + g->d : v) * ds] += job->src[p];
        }
    }
}

/* GatherElements(data, indices; axis, ignore_index) -> y[p] = data[p with indices[p] on axis]. */
enum tide_status tide__cpu_GATHER_ELEMENTS(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    struct tide__kernel_gather_elements g;
    tide__kernel_gather_elements_setup(args, &g);
    enum tide_status st = check_signed_indices(args, &g, err);
    if (st != TIDE_OK || g.columns == 0 || g.n == 0)
        return st;
    struct gather_elements_job job = {&g, tide__cpu_in(args, 0), args->inputs[1].data,
                                      tide__cpu_out(args, 0)};
    tide__cpu_parallel_for(g.columns, tide__cpu_grain(g.n), gather_elements_range, &job);
    return TIDE_OK;
}

/* GatherElementsGrad(dy, indices; axis, ignore_index, shape) -> dx: dy added at the indices. */
enum tide_status tide__cpu_GATHER_ELEMENTS_GRAD(const struct tide_kernel_args *args,
                                                struct tide_error *err)
{
    struct tide__kernel_gather_elements g;
    tide__kernel_gather_elements_setup(args, &g);
    enum tide_status st = check_signed_indices(args, &g, err);
    if (st != TIDE_OK)
        return st;
    float *dx = tide__cpu_out(args, 0);
    int64_t n_dx = tide__cpu_numel(&args->outputs[0]);
    if (n_dx > 0)
        memset(dx, 0, (size_t)n_dx * sizeof(float));
    if (g.columns == 0 || g.n == 0)
        return TIDE_OK;
    struct gather_elements_job job = {&g, tide__cpu_in(args, 0), args->inputs[1].data, dx};
    tide__cpu_parallel_for(g.columns, tide__cpu_grain(g.n), gather_elements_grad_range, &job);
    return TIDE_OK;
}

/* ============================================================================
 * TopK and TopKGrad
 * ========================================================================== */

/* Whether (a at index ia) ranks before (b at index ib): NaN first, then larger, then lower index.
 */
static bool ranks_before(float a, int64_t ia, float b, int64_t ib)
{
    bool a_nan = isnan(a), b_nan = isnan(b);
    if (a_nan != b_nan)
        return a_nan;
    if (!a_nan && a != b)
        return a > b;
    return ia < ib;
}

struct top_k_job {
    const float *x;
    float *values;
    int32_t *indices;
    int64_t n, k;
};

/*
 * Rows [begin, end): an insertion into the row's k best so far, kept sorted
 * in the outputs; O(n * k) at worst, and about n when few values enter.
 */
static void top_k_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct top_k_job *job = ctx;
    int64_t n = job->n, k = job->k;
    for (int64_t r = begin; r < end; r++) {
        const float *x = job->x + r * n;
        float *v = job->values + r * k;
        int32_t *ix = job->indices + r * k;
        int64_t count = 0;
        for (int64_t j = 0; j < n; j++) {
            if (count == k && !ranks_before(x[j], j, v[k - 1], ix[k - 1]))
                continue;
            int64_t m = count < k ? count : k - 1;
            while (m > 0 && ranks_before(x[j], j, v[m - 1], ix[m - 1])) {
                v[m] = v[m - 1];
                ix[m] = ix[m - 1];
                m--;
            }
            v[m] = x[j];
            ix[m] = (int32_t)j;
            if (count < k)
                count++;
        }
    }
}

/* TopK(x [..., n]; k) -> values [..., k] (descending), indices [..., k] (int32). */
enum tide_status tide__cpu_TOP_K(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    assert(xs->rank >= 1 && args->n_outputs == 2 && args->outputs[1].dtype == TIDE_DTYPE_INT32);
    int64_t n = xs->dims[xs->rank - 1], k = args->node->attrs[TIDE_ATTR_TOP_K_k].i;
    assert(k >= 1 && k <= n);
    int64_t rows = trailing_numel(xs, 0) / n;
    assert(tide__cpu_numel(&args->outputs[0]) == rows * k &&
           tide__cpu_numel(&args->outputs[1]) == rows * k);
    struct top_k_job job = {tide__cpu_in(args, 0), tide__cpu_out(args, 0), args->outputs[1].data, n,
                            k};
    if (rows > 0)
        tide__cpu_parallel_for(rows, tide__cpu_grain(n), top_k_range, &job);
    return TIDE_OK;
}

struct top_k_grad_job {
    const float *dv;
    const int32_t *indices;
    float *dx;
    int64_t n, k;
};

static void top_k_grad_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct top_k_grad_job *job = ctx;
    for (int64_t r = begin; r < end; r++) {
        float *out = job->dx + r * job->n;
        memset(out, 0, (size_t)job->n * sizeof(float));
        for (int64_t j = 0; j < job->k; j++)
            out[job->indices[r * job->k + j]] += job->dv[r * job->k + j];
    }
}

/*
 * TopKGrad(dvalues [..., k], indices [..., k]; shape [..., n]) -> dx of shape,
 * zeros but for dvalues added at indices along the last axis (in j order, so
 * a repeated index from the wire sums deterministically).
 */
enum tide_status tide__cpu_TOP_K_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->outputs[0].shape, *vs = &args->inputs[0].shape;
    assert(xs->rank >= 1 && xs->rank == vs->rank);
    int64_t n = xs->dims[xs->rank - 1], k = vs->dims[vs->rank - 1];
    int64_t rows = n > 0 ? trailing_numel(xs, 0) / n : 0;
    assert(tide__cpu_numel(&args->inputs[1]) == tide__cpu_numel(&args->inputs[0]));
    enum tide_status st = check_indices(args, 1, "indices", n, err);
    if (st != TIDE_OK || rows == 0)
        return st;
    struct top_k_grad_job job = {tide__cpu_in(args, 0), args->inputs[1].data,
                                 tide__cpu_out(args, 0), n, k};
    tide__cpu_parallel_for(rows, tide__cpu_grain(n), top_k_grad_range, &job);
    return TIDE_OK;
}

/* ============================================================================
 * MoeRoute
 * ========================================================================== */

/*
 * MoeRoute(indices [T, k]; experts, capacity) -> dispatch [experts *
 * capacity], combine [T, k]. Slots are handed out in GShard's priority order:
 * every token's first choice in token order, then every second choice, and
 * so on; a choice whose expert is full is dropped (combine = experts *
 * capacity), and a slot nobody took holds T.
 */
enum tide_status tide__cpu_MOE_ROUTE(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *is = &args->inputs[0].shape;
    int64_t experts = args->node->attrs[TIDE_ATTR_MOE_ROUTE_experts].i;
    int64_t capacity = args->node->attrs[TIDE_ATTR_MOE_ROUTE_capacity].i;
    assert(is->rank == 2 && experts >= 1 && capacity >= 1);
    int64_t tokens = is->dims[0], k = is->dims[1], slots = experts * capacity;
    assert(tide__cpu_numel(&args->outputs[0]) == slots &&
           tide__cpu_numel(&args->outputs[1]) == tokens * k);
    enum tide_status st = check_indices(args, 0, "indices", experts, err);
    if (st == TIDE_OK)
        st = tide__cpu_expect_workspace(args, tide__kernel_index_workspace(args->node, 0), err);
    if (st != TIDE_OK)
        return st;
    const int32_t *choice = args->inputs[0].data;
    int32_t *dispatch = args->outputs[0].data, *combine = args->outputs[1].data;
    int64_t *filled = args->workspace;
    memset(filled, 0, (size_t)experts * sizeof(int64_t));
    for (int64_t s = 0; s < slots; s++)
        dispatch[s] = (int32_t)tokens;
    for (int64_t j = 0; j < k; j++) {
        for (int64_t t = 0; t < tokens; t++) {
            int64_t e = choice[t * k + j];
            if (filled[e] == capacity) {
                combine[t * k + j] = (int32_t)slots;
                continue;
            }
            int64_t slot = e * capacity + filled[e]++;
            dispatch[slot] = (int32_t)t;
            combine[t * k + j] = (int32_t)slot;
        }
    }
    return TIDE_OK;
}
