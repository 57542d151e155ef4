/* SPDX-License-Identifier: MIT */
/*
 * index.c: the host half of Gather, GatherGrad, GatherElements,
 * GatherElementsGrad, TopK, TopKGrad and MoeRoute on CUDA (device half:
 * index.cu).
 *
 * The CPU kernels refuse an index out of range before they write anything.
 * Here the indices are on the device, so each kernel that reads some
 * enqueues a check first that writes the first bad index into the stream's
 * fault record; the backend turns it into the stream's error at stream_sync,
 * naming the node, the position, the index and the range, as the CPU's
 * message does (SoftmaxCrossEntropy's labels work the same way).
 */
#include "kernels/cuda/cuda-impl.h"

#include <assert.h>

/* The product of dims[from..rank). */
static int64_t trailing_numel(const struct tide_shape *shape, int32_t from)
{
    int64_t n = 1;
    for (int32_t i = from; i < shape->rank; i++)
        n *= shape->dims[i];
    return n;
}

/* Enqueues the check of input i (int32) against [0, limit) into the stream's fault record. */
static enum tide_status indices_check(const struct tide_kernel_args *args,
                                      struct tide_cuda_launch *launch, uint32_t i, int64_t limit,
                                      struct tide_error *err)
{
    int64_t n = tide__cuda_numel(&args->inputs[i]);
    assert(args->inputs[i].dtype == TIDE_DTYPE_INT32);
    if (!launch->fault || n == 0)
        return TIDE_OK;
    enum tide_status st =
        TIDE_CUDA_CHECK(err, tide__cuda_launch_check_indices(launch->stream, args->inputs[i].data,
                                                             n, limit, launch->fault, launch->tag));
    if (st == TIDE_OK)
        launch->fault_armed = true;
    return st;
}

/* Gather(table [N, ...], ids) -> y[p, ...] = table[ids[p], ...]. */
enum tide_status tide__cuda_GATHER(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *ts = &args->inputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    assert(ts->rank >= 1);
    int64_t row = trailing_numel(ts, 1), n_ids = tide__cuda_numel(&args->inputs[1]);
    assert(tide__cuda_numel(&args->outputs[0]) == n_ids * row);
    st = indices_check(args, launch, 1, ts->dims[0], err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_gather(launch->stream, tide__cuda_in(args, 0), args->inputs[1].data,
                                      tide__cuda_out(args, 0), ts->dims[0], row, n_ids));
}

/* GatherGrad(dy, ids; num_rows) -> dx[r, ...] = the sum of dy[p, ...] over the p with ids[p] = r.
 */
enum tide_status tide__cuda_GATHER_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *xs = &args->outputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    assert(xs->rank >= 1 && xs->dims[0] == args->node->attrs[TIDE_ATTR_GATHER_GRAD_num_rows].i);
    int64_t rows = xs->dims[0], row = trailing_numel(xs, 1);
    int64_t n_ids = tide__cuda_numel(&args->inputs[1]);
    assert(tide__cuda_numel(&args->inputs[0]) == n_ids * row);
    st = indices_check(args, launch, 1, rows, err);
    if (st != TIDE_OK || rows == 0 || row == 0)
        return st;
    st = tide__cuda_expect_workspace(args, tide__kernel_index_workspace(args->node, n_ids), err);
    if (st != TIDE_OK)
        return st;
    int64_t *start = args->workspace, *pos = start ? start + rows + 1 : NULL;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_gather_grad(
                                    launch->stream, tide__cuda_in(args, 0), args->inputs[1].data,
                                    tide__cuda_out(args, 0), rows, row, n_ids, start, pos));
}

/*
 * What GatherElements and GatherElementsGrad do first: the stream (*launch),
 * the geometry (*g), and the index check: entries outside [-d, d) that are
 * not ignore_index, into the fault record (signed range).
 */
static enum tide_status gather_elements_begin(const struct tide_kernel_args *args,
                                              struct tide_cuda_launch **launch_out,
                                              struct tide__kernel_gather_elements *g,
                                              struct tide_error *err)
{
    enum tide_status st = tide__cuda_context(args, launch_out, err);
    if (st != TIDE_OK)
        return st;
    struct tide_cuda_launch *launch = *launch_out;
    tide__kernel_gather_elements_setup(args, g);
    int64_t n = tide__cuda_numel(&args->inputs[1]);
    if (!launch->fault || n == 0)
        return TIDE_OK;
    st = TIDE_CUDA_CHECK(
        err, tide__cuda_launch_check_signed_indices(launch->stream, args->inputs[1].data, n, g->d,
                                                    g->ignore_index, launch->fault, launch->tag));
    if (st == TIDE_OK)
        launch->fault_armed = true;
    return st;
}

/* GatherElements(data, indices; axis, ignore_index) -> y[p] = data[p with indices[p] on axis]. */
enum tide_status tide__cuda_GATHER_ELEMENTS(const struct tide_kernel_args *args,
                                            struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_gather_elements g;
    enum tide_status st = gather_elements_begin(args, &launch, &g, err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_gather_elements(launch->stream, tide__cuda_in(args, 0),
                                               args->inputs[1].data, tide__cuda_out(args, 0), &g,
                                               tide__cuda_numel(&args->inputs[1])));
}

/* GatherElementsGrad(dy, indices; axis, ignore_index, shape) -> dx: dy added at the indices. */
enum tide_status tide__cuda_GATHER_ELEMENTS_GRAD(const struct tide_kernel_args *args,
                                                 struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    struct tide__kernel_gather_elements g;
    enum tide_status st = gather_elements_begin(args, &launch, &g, err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_gather_elements_grad(
                                    launch->stream, tide__cuda_in(args, 0), args->inputs[1].data,
                                    tide__cuda_out(args, 0), &g));
}

/* TopK(x [..., n]; k) -> values [..., k] (descending), indices [..., k] (int32). */
enum tide_status tide__cuda_TOP_K(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *xs = &args->inputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    assert(xs->rank >= 1 && args->n_outputs == 2 && args->outputs[1].dtype == TIDE_DTYPE_INT32);
    int64_t n = xs->dims[xs->rank - 1], k = args->node->attrs[TIDE_ATTR_TOP_K_k].i;
    assert(k >= 1 && k <= n);
    int64_t rows = trailing_numel(xs, 0) / n;
    assert(tide__cuda_numel(&args->outputs[0]) == rows * k &&
           tide__cuda_numel(&args->outputs[1]) == rows * k);
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_top_k(launch->stream, tide__cuda_in(args, 0),
                                                        tide__cuda_out(args, 0),
                                                        args->outputs[1].data, rows, n, k));
}

/* TopKGrad(dvalues [..., k], indices [..., k]; shape [..., n]) -> dvalues at indices in zeros. */
enum tide_status tide__cuda_TOP_K_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *xs = &args->outputs[0].shape, *vs = &args->inputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    assert(xs->rank >= 1 && xs->rank == vs->rank);
    assert(tide__cuda_numel(&args->inputs[1]) == tide__cuda_numel(&args->inputs[0]));
    int64_t n = xs->dims[xs->rank - 1], k = vs->dims[vs->rank - 1];
    int64_t rows = n > 0 ? trailing_numel(xs, 0) / n : 0;
    st = indices_check(args, launch, 1, n, err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_top_k_grad(launch->stream, tide__cuda_in(args, 0),
                                                             args->inputs[1].data,
                                                             tide__cuda_out(args, 0), rows, n, k));
}

/* MoeRoute(indices [T, k]; experts, capacity) -> dispatch, combine (see kernels/cpu/index.c). */
enum tide_status tide__cuda_MOE_ROUTE(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    const struct tide_shape *is = &args->inputs[0].shape;
    enum tide_status st = tide__cuda_context(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    int64_t experts = args->node->attrs[TIDE_ATTR_MOE_ROUTE_experts].i;
    int64_t capacity = args->node->attrs[TIDE_ATTR_MOE_ROUTE_capacity].i;
    assert(is->rank == 2 && experts >= 1 && capacity >= 1);
    int64_t tokens = is->dims[0], k = is->dims[1];
    assert(tide__cuda_numel(&args->outputs[0]) == experts * capacity &&
           tide__cuda_numel(&args->outputs[1]) == tokens * k);
    st = indices_check(args, launch, 0, experts, err);
    if (st == TIDE_OK)
        st = tide__cuda_expect_workspace(args, tide__kernel_index_workspace(args->node, 0), err);
    if (st != TIDE_OK)
        return st;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_moe_route(launch->stream, args->inputs[0].data,
                                                            args->outputs[0].data,
                                                            args->outputs[1].data, tokens, k,
                                                            experts, capacity, args->workspace));
}
