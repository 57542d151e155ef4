/* SPDX-License-Identifier: MIT */
/*
 * elementwise.c: CPU kernels that compute each output element from the
 * matching input elements: Add, Sub and Mul with NumPy broadcasting,
 * BroadcastTo, AddN, BiasAdd, the activations (Relu, Sigmoid, Tanh), Neg,
 * Scale, and the activation gradients.
 *
 * Broadcasting merges adjacent axes that broadcast the same way and drops
 * axes of size 1, so that the common cases ([N, C] + [C], [N, C, H, W] +
 * [C, 1, 1], equal shapes) become a loop over contiguous rows in which each
 * input either advances (stride 1) or stays put (stride 0); the row loops are
 * written per stride pattern so the compiler can vectorise them. The row
 * traversal is shared (tide__cpu_broadcast_rows in cpu-impl.h, and
 * tide__cpu_broadcast_rows3 for three inputs), so that the ops of other files
 * (Div, Max, Min, Compare and Select in math.c) broadcast the same way.
 *
 * Every kernel here computes each output element from its inputs alone, so
 * it runs on the pool as a range job (tide__cpu_parallel_for) over its
 * elements, rows or planes: the pieces change which thread computes an
 * element, never its value.
 */
#include "kernels/cpu/cpu-impl.h"

#include <assert.h>
#include <math.h>
#include <string.h>

/* ============================================================================
 * Broadcasting
 * ========================================================================== */

/* The most inputs a traversal carries: Select's three. */
#define BROADCAST_INPUTS 3

/*
 * A traversal of an output in row-major order together with up to three
 * inputs broadcast to it. After merging, the last axis is the row: along it
 * each input's stride is 0 or 1.
 */
struct broadcast {
    int32_t rank; /* merged axes; 0: the output has a single element */
    int64_t dims[TIDE_MAX_RANK];
    /* element strides of each input; 0 along broadcast axes */
    int64_t strides[BROADCAST_INPUTS][TIDE_MAX_RANK];
};

/*
 * Plans the traversal of out with inputs ins[0..n_in). Returns false if an
 * input does not broadcast to out (NumPy rules, trailing axes aligned).
 */
static bool broadcast_plan(struct broadcast *plan, const struct tide_shape *out,
                           const struct tide_shape *const *ins, int n_in)
{
    int32_t rank = out->rank;
    int64_t full[BROADCAST_INPUTS][TIDE_MAX_RANK];
    assert(n_in <= BROADCAST_INPUTS);
    for (int k = 0; k < n_in; k++) {
        const struct tide_shape *in = ins[k];
        if (in->rank > rank)
            return false;
        int64_t stride = 1;
        for (int32_t d = rank - 1; d >= 0; d--) {
            int32_t src = d - (rank - in->rank);
            int64_t dim = src >= 0 ? in->dims[src] : 1;
            if (dim != 1 && dim != out->dims[d])
                return false;
            full[k][d] = dim == 1 ? 0 : stride;
            stride *= dim;
        }
    }
    plan->rank = 0;
    for (int32_t d = 0; d < rank; d++) {
        int64_t dim = out->dims[d];
        if (dim == 1)
            continue;
        int32_t r = plan->rank;
        bool merge = r > 0;
        for (int k = 0; merge && k < n_in; k++)
            merge = plan->strides[k][r - 1] == full[k][d] * dim;
        if (merge) {
            plan->dims[r - 1] *= dim;
            for (int k = 0; k < n_in; k++)
                plan->strides[k][r - 1] = full[k][d];
        } else {
            plan->dims[r] = dim;
            for (int k = 0; k < n_in; k++)
                plan->strides[k][r] = full[k][d];
            plan->rank++;
        }
    }
    for (int k = n_in; k < BROADCAST_INPUTS; k++)
        memset(plan->strides[k], 0, sizeof(plan->strides[k]));
    return true;
}

/*
 * Sets index and the per-input offsets to those of row `row`: the digits of
 * row over the merged axes before the last, where a range job's piece starts.
 */
static void broadcast_seek(const struct broadcast *plan, int64_t row, int64_t *index,
                           int64_t offset[BROADCAST_INPUTS])
{
    for (int k = 0; k < BROADCAST_INPUTS; k++)
        offset[k] = 0;
    for (int32_t d = plan->rank - 2; d >= 0; d--) {
        index[d] = row % plan->dims[d];
        row /= plan->dims[d];
        for (int k = 0; k < BROADCAST_INPUTS; k++)
            offset[k] += index[d] * plan->strides[k][d];
    }
}

/*
 * Advances the per-input offsets to the next row: an odometer over the
 * merged axes before the last.
 */
static void broadcast_next_row(const struct broadcast *plan, int64_t *index,
                               int64_t offset[BROADCAST_INPUTS])
{
    for (int32_t d = plan->rank - 2; d >= 0; d--) {
        for (int k = 0; k < BROADCAST_INPUTS; k++)
            offset[k] += plan->strides[k][d];
        if (++index[d] < plan->dims[d])
            return;
        index[d] = 0;
        for (int k = 0; k < BROADCAST_INPUTS; k++)
            offset[k] -= plan->strides[k][d] * plan->dims[d];
    }
}

/* The rows of a broadcast over two inputs, shared by the pieces of its range job. */
struct broadcast_rows_job {
    const float *a, *b;
    tide__cpu_broadcast_row_fn row;
    const void *ctx;
    struct broadcast plan; /* zero when the shapes are equal: one contiguous row */
};

/* Elements [begin, end) of equal shapes. */
static void broadcast_same_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct broadcast_rows_job *job = ctx;
    job->row(job->ctx, job->a + begin, 1, job->b + begin, 1, begin, end - begin);
}

/* Rows [begin, end) of a broadcast. */
static void broadcast_rows_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct broadcast_rows_job *job = ctx;
    const struct broadcast *plan = &job->plan;
    int64_t n = plan->dims[plan->rank - 1];
    int64_t sa = plan->strides[0][plan->rank - 1], sb = plan->strides[1][plan->rank - 1];
    int64_t index[TIDE_MAX_RANK] = {0}, offset[BROADCAST_INPUTS];
    broadcast_seek(plan, begin, index, offset);
    for (int64_t row = begin; row < end; row++) {
        job->row(job->ctx, job->a + offset[0], sa, job->b + offset[1], sb, row * n, n);
        broadcast_next_row(plan, index, offset);
    }
}

void tide__cpu_broadcast_rows(const struct tide_shape *out, const struct tide_shape *a_shape,
                              const float *a, const struct tide_shape *b_shape, const float *b,
                              tide__cpu_broadcast_row_fn row, const void *ctx)
{
    struct broadcast_rows_job job = {.a = a, .b = b, .row = row, .ctx = ctx};
    int64_t total = tide_shape_numel(out);
    if (total == 0)
        return;

    /* The common case needs no plan: equal shapes are one contiguous row. */
    if (tide_shape_equal(a_shape, out) && tide_shape_equal(b_shape, out)) {
        tide__cpu_parallel_for(total, TIDE__CPU_GRAIN, broadcast_same_range, &job);
        return;
    }
    const struct tide_shape *ins[2] = {a_shape, b_shape};
    bool broadcasts = broadcast_plan(&job.plan, out, ins, 2);
    assert(broadcasts); /* infer made the output the inputs' broadcast shape */
    (void)broadcasts;
    if (job.plan.rank == 0) {
        row(ctx, a, 0, b, 0, 0, 1);
        return;
    }
    int64_t n = job.plan.dims[job.plan.rank - 1];
    tide__cpu_parallel_for(total / n, tide__cpu_grain(n), broadcast_rows_range, &job);
}

/* The rows of a broadcast over three inputs, shared by the pieces of its range job. */
struct broadcast_rows3_job {
    const float *in[BROADCAST_INPUTS];
    tide__cpu_broadcast_row3_fn row;
    const void *ctx;
    struct broadcast plan; /* zero when the shapes are equal: one contiguous row */
};

/* Elements [begin, end) of equal shapes. */
static void broadcast3_same_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct broadcast_rows3_job *job = ctx;
    const float *in[3] = {job->in[0] + begin, job->in[1] + begin, job->in[2] + begin};
    const int64_t strides[3] = {1, 1, 1};
    job->row(job->ctx, in, strides, begin, end - begin);
}

/* Rows [begin, end) of a broadcast. */
static void broadcast_rows3_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct broadcast_rows3_job *job = ctx;
    const struct broadcast *plan = &job->plan;
    int64_t n = plan->dims[plan->rank - 1];
    const int64_t strides[3] = {plan->strides[0][plan->rank - 1], plan->strides[1][plan->rank - 1],
                                plan->strides[2][plan->rank - 1]};
    int64_t index[TIDE_MAX_RANK] = {0}, offset[BROADCAST_INPUTS];
    broadcast_seek(plan, begin, index, offset);
    for (int64_t row = begin; row < end; row++) {
        const float *in[3] = {job->in[0] + offset[0], job->in[1] + offset[1],
                              job->in[2] + offset[2]};
        job->row(job->ctx, in, strides, row * n, n);
        broadcast_next_row(plan, index, offset);
    }
}

void tide__cpu_broadcast_rows3(const struct tide_shape *out, const struct tide_shape *const *shapes,
                               const float *const *in, tide__cpu_broadcast_row3_fn row,
                               const void *ctx)
{
    struct broadcast_rows3_job job = {.in = {in[0], in[1], in[2]}, .row = row, .ctx = ctx};
    int64_t total = tide_shape_numel(out);
    if (total == 0)
        return;
    if (tide_shape_equal(shapes[0], out) && tide_shape_equal(shapes[1], out) &&
        tide_shape_equal(shapes[2], out)) {
        tide__cpu_parallel_for(total, TIDE__CPU_GRAIN, broadcast3_same_range, &job);
        return;
    }
    bool broadcasts = broadcast_plan(&job.plan, out, shapes, 3);
    assert(broadcasts); /* infer made the output the inputs' broadcast shape */
    (void)broadcasts;
    if (job.plan.rank == 0) {
        const int64_t strides[3] = {0, 0, 0};
        row(ctx, in, strides, 0, 1);
        return;
    }
    int64_t n = job.plan.dims[job.plan.rank - 1];
    tide__cpu_parallel_for(total / n, tide__cpu_grain(n), broadcast_rows3_range, &job);
}

enum binary_op { BINARY_ADD, BINARY_SUB, BINARY_MUL };

/* A binary op's operator and output, shared by the rows of its broadcast. */
struct binary_job {
    enum binary_op op;
    float *z;
};

static void binary_row(const void *ctx, const float *a, int64_t sa, const float *b, int64_t sb,
                       int64_t first, int64_t n)
{
    const struct binary_job *job = ctx;
    float *z = job->z + first;
    switch (job->op) {
    case BINARY_ADD:
        TIDE__CPU_BINARY_ROW(x + y);
        break;
    case BINARY_SUB:
        TIDE__CPU_BINARY_ROW(x - y);
        break;
    case BINARY_MUL:
        TIDE__CPU_BINARY_ROW(x * y);
        break;
    }
}

static enum tide_status binary(const struct tide_kernel_args *args, enum binary_op op,
                               struct tide_error *err)
{
    struct binary_job job = {.op = op, .z = tide__cpu_out(args, 0)};
    tide__cpu_broadcast_rows(&args->outputs[0].shape, &args->inputs[0].shape, tide__cpu_in(args, 0),
                             &args->inputs[1].shape, tide__cpu_in(args, 1), binary_row, &job);
    return TIDE_OK;
}

enum tide_status tide__cpu_ADD(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, BINARY_ADD, err);
}

enum tide_status tide__cpu_SUB(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, BINARY_SUB, err);
}

enum tide_status tide__cpu_MUL(const struct tide_kernel_args *args, struct tide_error *err)
{
    return binary(args, BINARY_MUL, err);
}

/* BroadcastTo's operands, shared by the pieces of its range job over rows. */
struct broadcast_to_job {
    const float *x;
    float *y;
    struct broadcast plan;
};

static void broadcast_to_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct broadcast_to_job *job = ctx;
    const struct broadcast *plan = &job->plan;
    int64_t n = plan->dims[plan->rank - 1];
    int64_t sx = plan->strides[0][plan->rank - 1];
    int64_t index[TIDE_MAX_RANK] = {0}, offset[BROADCAST_INPUTS];
    broadcast_seek(plan, begin, index, offset);
    for (int64_t row = begin; row < end; row++) {
        float *dst = job->y + row * n;
        if (sx) {
            memcpy(dst, job->x + offset[0], (size_t)n * sizeof(float));
        } else {
            float v = job->x[offset[0]];
            for (int64_t j = 0; j < n; j++)
                dst[j] = v;
        }
        broadcast_next_row(plan, index, offset);
    }
}

/* BroadcastTo(x; shape): the output view's shape is the attribute, as infer set it. */
enum tide_status tide__cpu_BROADCAST_TO(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_tensor_view *out = &args->outputs[0];
    const struct tide_shape *ins[1] = {&args->inputs[0].shape};
    struct broadcast_to_job job = {.x = tide__cpu_in(args, 0), .y = tide__cpu_out(args, 0)};
    int64_t total = tide__cpu_numel(out);
    if (total == 0)
        return TIDE_OK;
    bool broadcasts = broadcast_plan(&job.plan, &out->shape, ins, 1);
    assert(broadcasts); /* infer checked that input 0 broadcasts to the shape */
    (void)broadcasts;
    if (job.plan.rank == 0) {
        job.y[0] = job.x[0];
        return TIDE_OK;
    }
    int64_t n = job.plan.dims[job.plan.rank - 1];
    tide__cpu_parallel_for(total / n, tide__cpu_grain(n), broadcast_to_range, &job);
    return TIDE_OK;
}

/* ============================================================================
 * AddN and BiasAdd
 * ========================================================================== */

/* Elements [begin, end) of AddN; ctx is the kernel's args. */
static void add_n_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    float *y = tide__cpu_out(args, 0) + begin;
    const float *x0 = tide__cpu_in(args, 0) + begin;
    int64_t n = end - begin;
    if (args->n_inputs == 1) {
        memcpy(y, x0, (size_t)n * sizeof(float));
        return;
    }
    /* The first two terms in one pass, not a copy and a pass: one trip through y less. */
    const float *x1 = tide__cpu_in(args, 1) + begin;
    for (int64_t j = 0; j < n; j++)
        y[j] = x0[j] + x1[j];
    for (uint32_t i = 2; i < args->n_inputs; i++) {
        const float *x = tide__cpu_in(args, i) + begin;
        for (int64_t j = 0; j < n; j++)
            y[j] += x[j];
    }
}

/* The terms are added in input order, ((x0 + x1) + x2) + ..., so the result is reproducible. */
enum tide_status tide__cpu_ADD_N(const struct tide_kernel_args *args, struct tide_error *err)
{
    for (uint32_t i = 0; i < args->n_inputs; i++)
        tide__kernel_same_size(args, i);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, add_n_range, args);
    return TIDE_OK;
}

/* BiasAdd's operands, shared by the pieces of its range job. */
struct bias_add_job {
    const float *x, *bias;
    float *y;
    int64_t channels, inner;
};

/* Rows [begin, end) of x [N, C] (inner 1). */
static void bias_add_rows_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct bias_add_job *job = ctx;
    for (int64_t n = begin; n < end; n++) {
        const float *xr = job->x + n * job->channels;
        float *yr = job->y + n * job->channels;
        for (int64_t c = 0; c < job->channels; c++)
            yr[c] = xr[c] + job->bias[c];
    }
}

/* Planes [begin, end) of x [N, C, ...], plane p being image p / C, channel p % C. */
static void bias_add_planes_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct bias_add_job *job = ctx;
    for (int64_t p = begin; p < end; p++) {
        const float *xp = job->x + p * job->inner;
        float *yp = job->y + p * job->inner;
        float b = job->bias[p % job->channels];
        for (int64_t j = 0; j < job->inner; j++)
            yp[j] = xp[j] + b;
    }
}

/* BiasAdd(x [N, C, ...], bias [C]): bias[c] is added to every element of channel c. */
enum tide_status tide__cpu_BIAS_ADD(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    tide__kernel_same_size(args, 0);
    assert(xs->rank >= 2 && tide__cpu_numel(&args->inputs[1]) == xs->dims[1]);
    int64_t outer;
    struct bias_add_job job = {
        .x = tide__cpu_in(args, 0), .bias = tide__cpu_in(args, 1), .y = tide__cpu_out(args, 0)};
    tide__kernel_split_axis(xs, 1, &outer, &job.channels, &job.inner);
    if (job.inner == 1)
        tide__cpu_parallel_for(outer, tide__cpu_grain(job.channels), bias_add_rows_range, &job);
    else
        tide__cpu_parallel_for(outer * job.channels, tide__cpu_grain(job.inner),
                               bias_add_planes_range, &job);
    return TIDE_OK;
}

/* ============================================================================
 * Unary ops and the activation gradients
 * ========================================================================== */

/*
 * Defines a kernel out[i] = EXPR, where x is element i of input 0, and the
 * range its pieces run (ctx: the kernel's args).
 */
#define UNARY_KERNEL(ID, EXPR)                                                                     \
    static void ID##_range(const void *ctx, int64_t begin, int64_t end)                            \
    {                                                                                              \
        const struct tide_kernel_args *args = ctx;                                                 \
        const float *in = tide__cpu_in(args, 0);                                                   \
        float *out = tide__cpu_out(args, 0);                                                       \
        for (int64_t i = begin; i < end; i++) {                                                    \
            float x = in[i];                                                                       \
            out[i] = (EXPR);                                                                       \
        }                                                                                          \
    }                                                                                              \
    enum tide_status tide__cpu_##ID(const struct tide_kernel_args *args, struct tide_error *err)   \
    {                                                                                              \
        tide__kernel_same_size(args, 0);                                                           \
        tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, ID##_range,    \
                               args);                                                              \
        return TIDE_OK;                                                                            \
    }

/* Defines a gradient kernel out[i] = EXPR of dy (input 0) and y, the forward output (input 1). */
#define GRAD_KERNEL(ID, EXPR)                                                                      \
    static void ID##_range(const void *ctx, int64_t begin, int64_t end)                            \
    {                                                                                              \
        const struct tide_kernel_args *args = ctx;                                                 \
        const float *dy_in = tide__cpu_in(args, 0), *y_in = tide__cpu_in(args, 1);                 \
        float *out = tide__cpu_out(args, 0);                                                       \
        for (int64_t i = begin; i < end; i++) {                                                    \
            float dy = dy_in[i], y = y_in[i];                                                      \
            out[i] = (EXPR);                                                                       \
        }                                                                                          \
    }                                                                                              \
    enum tide_status tide__cpu_##ID(const struct tide_kernel_args *args, struct tide_error *err)   \
    {                                                                                              \
        tide__kernel_same_size(args, 0);                                                           \
        tide__kernel_same_size(args, 1);                                                           \
        tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, ID##_range,    \
                               args);                                                              \
        return TIDE_OK;                                                                            \
    }

/* clang-format would take the expressions below for pointer declarations. */
/* clang-format off */
UNARY_KERNEL(RELU, x > 0.0f ? x : 0.0f)
UNARY_KERNEL(SIGMOID, 1.0f / (1.0f + expf(-x)))
UNARY_KERNEL(TANH, tanhf(x))
UNARY_KERNEL(NEG, -x)

GRAD_KERNEL(RELU_GRAD, y > 0.0f ? dy : 0.0f)
GRAD_KERNEL(SIGMOID_GRAD, dy * y * (1.0f - y))
GRAD_KERNEL(TANH_GRAD, dy * (1.0f - y * y))
/* clang-format on */

/* Elements [begin, end) of Scale; ctx is the kernel's args. */
static void scale_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    const float scale = (float)args->node->attrs[TIDE_ATTR_SCALE_scale].f;
    const float *x = tide__cpu_in(args, 0);
    float *y = tide__cpu_out(args, 0);
    for (int64_t i = begin; i < end; i++)
        y[i] = x[i] * scale;
}

/* Scale(x; scale): the double attribute is rounded to float once, as every kernel does. */
enum tide_status tide__cpu_SCALE(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_same_size(args, 0);
    tide__cpu_parallel_for(tide__cpu_numel(&args->outputs[0]), TIDE__CPU_GRAIN, scale_range, args);
    return TIDE_OK;
}
