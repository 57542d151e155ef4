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
 */
#include "kernels/cpu/cpu-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

/*
 * Sums x (shape xs) over the axes marked in reduced, adding into acc: one
 * double per element of the result, row-major over the kept axes. acc must
 * hold n_out zeroed entries, where n_out is the product of the kept dims.
 */
static void sum_axes(const float *x, const struct tide_shape *xs, const bool *reduced, double *acc)
{
    int64_t dims[TIDE_MAX_RANK], out_strides[TIDE_MAX_RANK];
    bool red[TIDE_MAX_RANK];
    int32_t rank = 0;
    int64_t total = 1;
    for (int32_t d = 0; d < xs->rank; d++) {
        total *= xs->dims[d];
        if (xs->dims[d] == 1)
            continue;
        if (rank > 0 && red[rank - 1] == reduced[d]) {
            dims[rank - 1] *= xs->dims[d];
        } else {
            dims[rank] = xs->dims[d];
            red[rank] = reduced[d];
            rank++;
        }
    }
    if (total == 0)
        return;
    if (rank == 0) {
        acc[0] += x[0];
        return;
    }
    int64_t stride = 1;
    for (int32_t d = rank - 1; d >= 0; d--) {
        out_strides[d] = red[d] ? 0 : stride;
        if (!red[d])
            stride *= dims[d];
    }

    int64_t n = dims[rank - 1];
    bool inner_reduced = red[rank - 1];
    int64_t index[TIDE_MAX_RANK] = {0}, offset = 0;
    for (int64_t row = 0; row < total / n; row++) {
        const float *xr = x + row * n;
        if (inner_reduced) {
            acc[offset] += tide__cpu_sum_row(xr, n);
        } else {
            double *ar = acc + offset;
            for (int64_t j = 0; j < n; j++)
                ar[j] += xr[j];
        }
        for (int32_t d = rank - 2; d >= 0; d--) {
            offset += out_strides[d];
            if (++index[d] < dims[d])
                break;
            index[d] = 0;
            offset -= out_strides[d] * dims[d];
        }
    }
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
