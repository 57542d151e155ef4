/* SPDX-License-Identifier: MIT */
/*
 * reduce.c: CPU kernels that sum over a set of axes: ReduceSum, ReduceMean,
 * SumToShape (the inverse of broadcasting) and BiasAddGrad (every axis but 1).
 *
 * All four share one traversal. The input is read once, in row-major order;
 * axes of size 1 are dropped and neighbouring axes that are both reduced or
 * both kept are merged, so the innermost loop either sums a contiguous row
 * into one accumulator or adds a contiguous row into a row of accumulators.
 * The accumulators are doubles in the workspace (one per output element):
 * the order of additions is fixed by the shape alone, so the result is
 * deterministic, and double keeps the error of long sums far below float's
 * precision.
 *
 * Threads: the output elements are split, never the sums. A range job
 * divides one kept (merged) axis, the longest, into pieces; each piece
 * traverses the sub-box of the input with that axis cut to its part, so it
 * owns its accumulators, and adds into each of them the same rows in the same
 * order as one thread traversing the whole input would. A reduction to a
 * single element (no kept axis) runs on one thread.
 */
#include "kernels/cpu/cpu-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/* A sum over axes, after merging: what the pieces of its range job share. */
struct sum_job {
    const float *x;
    double *acc;
    int32_t rank; /* merged axes, at least 1 */
    int64_t dims[TIDE_MAX_RANK];
    bool red[TIDE_MAX_RANK];
    int64_t in_strides[TIDE_MAX_RANK];  /* x's element strides */
    int64_t out_strides[TIDE_MAX_RANK]; /* acc's; 0 along reduced axes */
    int32_t split;                      /* the kept axis the pieces divide; -1: none */
};

/*
 * Adds into acc the rows of the sub-box whose axis job->split is cut to
 * [begin, end) (the whole input when split is -1), row-major.
 */
static void sum_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct sum_job *job = ctx;
    int32_t rank = job->rank;
    int64_t dims[TIDE_MAX_RANK], in_off = 0, out_off = 0;
    memcpy(dims, job->dims, sizeof(dims));
    if (job->split >= 0) {
        dims[job->split] = end - begin;
        in_off = begin * job->in_strides[job->split];
        out_off = begin * job->out_strides[job->split];
    }
    int64_t n = dims[rank - 1], rows = 1;
    for (int32_t d = 0; d < rank - 1; d++)
        rows *= dims[d];
    bool inner_reduced = job->red[rank - 1];
    int64_t index[TIDE_MAX_RANK] = {0};
    for (int64_t row = 0; row < rows; row++) {
        const float *xr = job->x + in_off;
        if (inner_reduced) {
            job->acc[out_off] += tide__cpu_sum_row(xr, n);
        } else {
            double *ar = job->acc + out_off;
            for (int64_t j = 0; j < n; j++)
                ar[j] += xr[j];
        }
        for (int32_t d = rank - 2; d >= 0; d--) {
            in_off += job->in_strides[d];
            out_off += job->out_strides[d];
            if (++index[d] < dims[d])
                break;
            index[d] = 0;
            in_off -= job->in_strides[d] * dims[d];
            out_off -= job->out_strides[d] * dims[d];
        }
    }
}

/*
 * Sums x (shape xs) over the axes marked in reduced, adding into acc: one
 * double per element of the result, row-major over the kept axes. acc must
 * hold n_out zeroed entries, where n_out is the product of the kept dims.
 */
static void sum_axes(const float *x, const struct tide_shape *xs, const bool *reduced, double *acc)
{
    struct sum_job job = {.x = x, .acc = acc, .split = -1};
    int64_t total = 1;
    for (int32_t d = 0; d < xs->rank; d++) {
        total *= xs->dims[d];
        if (xs->dims[d] == 1)
            continue;
        int32_t r = job.rank;
        if (r > 0 && job.red[r - 1] == reduced[d]) {
            job.dims[r - 1] *= xs->dims[d];
        } else {
            job.dims[r] = xs->dims[d];
            job.red[r] = reduced[d];
            job.rank++;
        }
    }
    if (total == 0)
        return;
    if (job.rank == 0) {
        acc[0] += x[0];
        return;
    }
    int64_t in_stride = 1, out_stride = 1;
    for (int32_t d = job.rank - 1; d >= 0; d--) {
        job.in_strides[d] = in_stride;
        in_stride *= job.dims[d];
        job.out_strides[d] = job.red[d] ? 0 : out_stride;
        if (!job.red[d]) {
            out_stride *= job.dims[d];
            if (job.split < 0 || job.dims[d] >= job.dims[job.split])
                job.split = d; /* the longest kept axis, the outermost of equals */
        }
    }
    if (job.split < 0) {
        sum_range(&job, 0, 1);
        return;
    }
    int64_t per_index = total / job.dims[job.split];
    tide__cpu_parallel_for(job.dims[job.split], tide__cpu_grain(per_index), sum_range, &job);
}

/*
 * Runs sum_axes for input 0 and writes the sums to output 0 as float,
 * divided by divisor unless it is 0. Infer made the output one element per
 * combination of kept dims; the workspace is checked, as the executor passes it.
 */
static enum tide_status reduce_into_output(const struct tide_kernel_args *args, const bool *reduced,
                                           double divisor, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    int64_t n_out = tide__kernel_reduce_output(args, reduced);
    enum tide_status st = tide__cpu_expect_workspace(args, (uint64_t)n_out * sizeof(double), err);
    if (st != TIDE_OK)
        return st;
    double *acc = args->workspace;
    if (n_out > 0)
        memset(acc, 0, (size_t)n_out * sizeof(double));
    sum_axes(tide__cpu_in(args, 0), xs, reduced, acc);
    float *y = tide__cpu_out(args, 0);
    if (divisor != 0) {
        for (int64_t i = 0; i < n_out; i++)
            y[i] = (float)(acc[i] / divisor);
    } else {
        for (int64_t i = 0; i < n_out; i++)
            y[i] = (float)acc[i];
    }
    return TIDE_OK;
}

uint64_t tide__cpu_reduce_workspace(const struct tide_graph *graph, const struct tide_node *node)
{
    (void)graph;
    if (node->n_outputs < 1 || !node->outputs)
        return 0;
    int64_t n = tide_shape_numel(&node->outputs[0].shape);
    return n > 0 ? (uint64_t)n * sizeof(double) : 0;
}

enum tide_status tide__cpu_REDUCE_SUM(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool reduced[TIDE_MAX_RANK];
    (void)tide__kernel_reduce_mask(args, TIDE_ATTR_REDUCE_SUM_axes, reduced);
    return reduce_into_output(args, reduced, 0, err);
}

/* The mean of no elements is 0 / 0, NaN, as in NumPy. */
enum tide_status tide__cpu_REDUCE_MEAN(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool reduced[TIDE_MAX_RANK];
    double count = tide__kernel_reduce_mask(args, TIDE_ATTR_REDUCE_MEAN_axes, reduced);
    if (count == 0) {
        float *y = tide__cpu_out(args, 0);
        int64_t n = tide__cpu_numel(&args->outputs[0]);
        for (int64_t i = 0; i < n; i++)
            y[i] = NAN;
        return TIDE_OK;
    }
    return reduce_into_output(args, reduced, count, err);
}

/*
 * SumToShape(x; shape): sums x over the axes along which shape (the output,
 * its trailing axes aligned with x's) was broadcast: the leading axes it
 * lacks and the axes where it has 1.
 */
enum tide_status tide__cpu_SUM_TO_SHAPE(const struct tide_kernel_args *args, struct tide_error *err)
{
    bool reduced[TIDE_MAX_RANK];
    tide__kernel_sum_to_shape_mask(args, reduced);
    return reduce_into_output(args, reduced, 0, err);
}

/* BiasAddGrad(dy [N, C, ...]) -> [C]: the sum over every axis but 1. */
enum tide_status tide__cpu_BIAS_ADD_GRAD(const struct tide_kernel_args *args,
                                         struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    assert(xs->rank >= 2);
    bool reduced[TIDE_MAX_RANK];
    for (int32_t d = 0; d < xs->rank; d++)
        reduced[d] = d != 1;
    return reduce_into_output(args, reduced, 0, err);
}
