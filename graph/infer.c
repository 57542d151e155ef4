/* SPDX-License-Identifier: MIT */
/*
 * infer.c: the per-op infer functions named in ops.def (tide__infer_<INFER>).
 *
 * tide_graph_infer (graph.c) calls one of these per node in topological order,
 * after it has checked arity, edge targets, required attributes and, for the
 * FLOAT and SAME dtype rules, input dtypes; so every input's dtype and shape
 * is known and valid here. Each function checks what is left (shapes,
 * attribute values, the dtypes of CUSTOM ops) and sets the node's outputs
 * with tide__set_output, which enforces the rank, overflow and per-tensor
 * byte limits.
 *
 * Infer also normalises attributes so that kernels and autodiff see one form:
 * negative axes become non-negative, absent strides and pads become explicit
 * [h, w] pairs, empty reduce axes become the full sorted list, and Slice's
 * size -1 becomes the real size. Normalised values are written back into
 * node->attrs; their `present` flag is left alone, so export still omits what
 * the user left to its default, and a re-import normalises it again.
 *
 * Every refusal goes through tide_node_error, which names the node, and says
 * which input or attribute is wrong with the numbers involved. Nothing here
 * asserts on user input, and arithmetic on user dims is overflow-checked.
 */
#include "graph/graph-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(TIDE_MAX_LIST <= TIDE_MAX_RANK, "an INTS attribute must fit in a shape");

/* ============================================================================
 * Helpers: messages, inputs and attributes
 * ========================================================================== */

/* A formatted shape or list, returned by value so that it can be built inside a call's arguments.
 */
struct text {
    char s[200];
};

static struct text shape_text(const struct tide_shape *shape)
{
    struct text t;
    tide_shape_format(shape, t.s, sizeof(t.s));
    return t;
}

/* n must be in 0..TIDE_MAX_LIST. */
static struct text ints_text(const int64_t *v, int32_t n)
{
    struct tide_shape s = tide_shape_make(n, v);
    return shape_text(&s);
}

static const struct tide_shape *input_shape(const struct tide_graph *graph,
                                            const struct tide_node *node, uint32_t i)
{
    return &tide_graph_input(graph, node, i)->shape;
}

/* The attribute called name; the op table must list it (our code names it, not the user). */
static struct tide_attr_value *attr(struct tide_node *node, const char *name)
{
    int k = tide_op_attr_index(node->op, name);
    assert(k >= 0);
    return &node->attrs[k];
}

/* An INTS attribute (*out is set even on failure), with its length checked against TIDE_MAX_LIST.
 */
static enum tide_status ints_attr(struct tide_node *node, const char *name,
                                  struct tide_attr_value **out, struct tide_error *err)
{
    struct tide_attr_value *a = attr(node, name);
    *out = a;
    if (a->ints.n < 0 || a->ints.n > TIDE_MAX_LIST)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" has %d entries, the limit is %d", name, a->ints.n,
                               TIDE_MAX_LIST);
    return TIDE_OK;
}

/* Refuses an INTS attribute that does not hold one entry per axis of shape (label names it). */
static enum tide_status expect_one_per_axis(struct tide_node *node, const char *name,
                                            const struct tide_attr_value *a, const char *label,
                                            const struct tide_shape *shape, struct tide_error *err)
{
    if (a->ints.n == shape->rank)
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, node,
                           "attribute \"%s\" %s has %d entries, wants %d (one per axis of %s %s)",
                           name, ints_text(a->ints.v, a->ints.n).s, a->ints.n, shape->rank, label,
                           shape_text(shape).s);
}

/* A shape that the user supplied (an attribute, a tensor's): rank 0..8, every dim >= 0. */
static enum tide_status check_shape(struct tide_node *node, const char *label,
                                    const struct tide_shape *shape, struct tide_error *err)
{
    if (shape->rank < 0 || shape->rank > TIDE_MAX_RANK)
        return tide_node_error(err, TIDE_INVALID, node, "%s has rank %d, wants 0 to %d", label,
                               shape->rank, TIDE_MAX_RANK);
    for (int32_t i = 0; i < shape->rank; i++) {
        if (shape->dims[i] < 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "%s %s has negative dimension %" PRId64 " at axis %d", label,
                                   shape_text(shape).s, shape->dims[i], i);
    }
    return TIDE_OK;
}

/* Refuses a shape (label names it) whose rank is outside min..max; layout says what is wanted. */
static enum tide_status require_rank(struct tide_node *node, const char *label,
                                     const struct tide_shape *shape, int32_t min, int32_t max,
                                     const char *layout, struct tide_error *err)
{
    if (shape->rank >= min && shape->rank <= max)
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, node, "%s has shape %s, wants rank %d%s%s%s", label,
                           shape_text(shape).s, min, min == max ? "" : " or more",
                           layout[0] ? " " : "", layout);
}

static enum tide_status expect_input_dtype(const struct tide_graph *graph, struct tide_node *node,
                                           uint32_t i, const char *role, enum tide_dtype want,
                                           struct tide_error *err)
{
    enum tide_dtype got = tide_graph_input(graph, node, i)->dtype;
    if (got == want)
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, node, "input %u (%s) is %s, wants %s", i, role,
                           tide_dtype_name(got), tide_dtype_name(want));
}

/*
 * Refuses input i (role names it) unless its shape is want; why_format says
 * where want comes from ("the shape of input 0 (x)").
 */
static enum tide_status expect_input_shape(const struct tide_graph *graph, struct tide_node *node,
                                           uint32_t i, const char *role,
                                           const struct tide_shape *want, struct tide_error *err,
                                           const char *why_format, ...)
    __attribute__((format(printf, 7, 8)));

static enum tide_status expect_input_shape(const struct tide_graph *graph, struct tide_node *node,
                                           uint32_t i, const char *role,
                                           const struct tide_shape *want, struct tide_error *err,
                                           const char *why_format, ...)
{
    const struct tide_shape *got = input_shape(graph, node, i);
    if (tide_shape_equal(got, want))
        return TIDE_OK;
    char why[TIDE_ERROR_MESSAGE_MAX];
    va_list args;
    va_start(args, why_format);
    vsnprintf(why, sizeof(why), why_format, args);
    va_end(args);
    return tide_node_error(err, TIDE_INVALID, node, "input %u (%s) has shape %s, wants %s (%s)", i,
                           role, shape_text(got).s, shape_text(want).s, why);
}

/*
 * Refuses a float attribute that is not finite or lies outside [lo, hi)
 * (lo_closed) or (lo, hi); lo = -INFINITY and hi = INFINITY mean unbounded.
 */
static enum tide_status check_float(struct tide_node *node, const char *name, double lo,
                                    bool lo_closed, double hi, struct tide_error *err)
{
    double v = attr(node, name)->f;
    if (isfinite(v) && (lo_closed ? v >= lo : v > lo) && v < hi)
        return TIDE_OK;
    char want[64];
    if (isinf(lo) && isinf(hi))
        snprintf(want, sizeof(want), "a finite value");
    else if (isinf(hi))
        snprintf(want, sizeof(want), "a finite value %s %g", lo_closed ? ">=" : ">", lo);
    else
        snprintf(want, sizeof(want), "a value in %c%g, %g)", lo_closed ? '[' : '(', lo, hi);
    return tide_node_error(err, TIDE_INVALID, node, "attribute \"%s\" is %g, wants %s", name, v,
                           want);
}

/*
 * Maps an axis (negative counts from the end) of input 0, whose shape is x,
 * into 0..rank-1; name is the attribute it came from.
 */
static enum tide_status normalise_axis(struct tide_node *node, const char *name, int64_t axis,
                                       const struct tide_shape *x, int64_t *out,
                                       struct tide_error *err)
{
    int64_t rank = x->rank;
    if (rank == 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" names axis %" PRId64 ", but input 0 is a scalar",
                               name, axis);
    if (axis < -rank || axis >= rank)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" names axis %" PRId64 ", out of range for input 0 "
                               "%s (wants %" PRId64 " to %" PRId64 ")",
                               name, axis, shape_text(x).s, -rank, rank - 1);
    *out = axis < 0 ? axis + rank : axis;
    return TIDE_OK;
}

/* ============================================================================
 * Helpers: broadcasting
 * ========================================================================== */

/*
 * NumPy broadcasting: aligns trailing dims; each pair must be equal or hold a
 * 1. Returns false, with the first clashing pair in clash[], when a and b do
 * not broadcast.
 */
static bool broadcast_shapes(const struct tide_shape *a, const struct tide_shape *b,
                             struct tide_shape *out, int64_t clash[2])
{
    int32_t rank = a->rank > b->rank ? a->rank : b->rank;
    out->rank = rank;
    for (int32_t i = 0; i < rank; i++) { /* i counts from the end */
        int64_t da = i < a->rank ? a->dims[a->rank - 1 - i] : 1;
        int64_t db = i < b->rank ? b->dims[b->rank - 1 - i] : 1;
        if (da != db && da != 1 && db != 1) {
            clash[0] = da;
            clash[1] = db;
            return false;
        }
        out->dims[rank - 1 - i] = da == 1 ? db : da;
    }
    return true;
}

/* Whether from broadcasts to exactly `to`. */
static bool broadcasts_to(const struct tide_shape *from, const struct tide_shape *to)
{
    struct tide_shape out;
    int64_t clash[2];
    return from->rank <= to->rank && broadcast_shapes(from, to, &out, clash) &&
           tide_shape_equal(&out, to);
}

/* ============================================================================
 * Helpers: 2-D windows (Conv2D and the pools)
 * ========================================================================== */

/*
 * A window over the H and W axes of an NCHW tensor; each pair is [h, w].
 * Its taps are dilations apart (1 for the pools), so it spans
 * (ksize - 1) * dilation + 1 cells.
 */
struct window {
    int64_t ksize[2];
    int64_t strides[2];
    int64_t pads[2];
    int64_t dilations[2];
};

static const int64_t pair_ones[2] = {1, 1};
static const int64_t pair_zeros[2] = {0, 0};
static const char *const hw_name[2] = {"height", "width"};

/*
 * Reads the [h, w] INTS attribute name into out. Absent or empty, it takes
 * def, which is written back so that kernels see an explicit pair; with def
 * NULL it is required. Otherwise it must hold two entries, each >= min.
 */
static enum tide_status read_pair(struct tide_node *node, const char *name, const int64_t *def,
                                  int64_t min, int64_t out[2], struct tide_error *err)
{
    struct tide_attr_value *a;
    enum tide_status st = ints_attr(node, name, &a, err);
    if (st != TIDE_OK)
        return st;
    if (a->ints.n == 0 && def) {
        a->ints.n = 2;
        a->ints.v[0] = def[0];
        a->ints.v[1] = def[1];
    }
    if (a->ints.n != 2)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" %s has %d entries, wants 2 ([height, width])",
                               name, ints_text(a->ints.v, a->ints.n).s, a->ints.n);
    for (int i = 0; i < 2; i++) {
        if (a->ints.v[i] < min)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" %s has %s %" PRId64 ", wants %" PRId64
                                   " or more",
                                   name, ints_text(a->ints.v, 2).s, hw_name[i], a->ints.v[i], min);
        out[i] = a->ints.v[i];
    }
    return TIDE_OK;
}

/*
 * The output shape [N, channels, OH, OW] of win slid over x [N, C, H, W]
 * (label names x): O = (I + 2 * pad - span) / stride + 1 on each axis, where
 * span = (k - 1) * dilation + 1.
 */
static enum tide_status window_output(struct tide_node *node, const char *label,
                                      const struct tide_shape *x, const struct window *win,
                                      int64_t channels, struct tide_shape *y,
                                      struct tide_error *err)
{
    int64_t dims[4] = {x->dims[0], channels, 0, 0};
    for (int i = 0; i < 2; i++) {
        int64_t in = x->dims[2 + i], k = win->ksize[i], pad = win->pads[i];
        if (pad > (INT64_MAX - in) / 2)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "pad %s %" PRId64 " is too large for %s %s", hw_name[i], pad,
                                   label, shape_text(x).s);
        int64_t padded = in + 2 * pad, d = win->dilations[i];
        if (padded < k)
            return tide_node_error(
                err, TIDE_INVALID, node,
                "kernel %s %" PRId64 " is larger than the padded input %s %" PRId64
                " + 2 * %" PRId64 " = %" PRId64 " (%s is %s)",
                hw_name[i], k, hw_name[i], in, pad, padded, label, shape_text(x).s);
        /* (k - 1) * d + 1 <= padded, asked without overflowing: padded >= k >= 1 here. */
        if (k - 1 > (padded - 1) / d)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "kernel %s %" PRId64 " dilated by %" PRId64
                                   " spans more than the padded input %s %" PRId64 " + 2 * %" PRId64
                                   " = %" PRId64 " (%s is %s)",
                                   hw_name[i], k, d, hw_name[i], in, pad, padded, label,
                                   shape_text(x).s);
        dims[2 + i] = (padded - ((k - 1) * d + 1)) / win->strides[i] + 1;
    }
    *y = tide_shape_make(4, dims);
    return TIDE_OK;
}

/*
 * The output shape of Conv2D of x [N, C, H, W] with filter w [K, C / group,
 * R, S] (x_label and w_label name them) under the node's strides (default
 * [1, 1]), pads (default [0, 0]) and dilations (default [1, 1]), which are
 * normalised in place, and its group (default 1), which must divide C and K.
 */
static enum tide_status conv2d_output_shape(struct tide_node *node, const char *x_label,
                                            const struct tide_shape *x, const char *w_label,
                                            const struct tide_shape *w, struct tide_shape *y,
                                            struct tide_error *err)
{
    enum tide_status st = require_rank(node, x_label, x, 4, 4, "[N, C, H, W]", err);
    if (st == TIDE_OK)
        st = require_rank(node, w_label, w, 4, 4, "[K, C, R, S]", err);
    if (st != TIDE_OK)
        return st;
    int64_t group = attr(node, "group")->i;
    if (group < 1)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"group\" is %" PRId64 ", wants 1 or more", group);
    if (x->dims[1] % group != 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"group\" %" PRId64 " does not divide the %" PRId64
                               " channels of %s %s",
                               group, x->dims[1], x_label, shape_text(x).s);
    if (w->dims[0] % group != 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"group\" %" PRId64 " does not divide the %" PRId64
                               " filters of %s %s",
                               group, w->dims[0], w_label, shape_text(w).s);
    if (x->dims[1] / group != w->dims[1]) {
        if (group == 1)
            return tide_node_error(
                err, TIDE_INVALID, node, "%s %s has %" PRId64 " channels, but %s %s wants %" PRId64,
                x_label, shape_text(x).s, x->dims[1], w_label, shape_text(w).s, w->dims[1]);
        return tide_node_error(err, TIDE_INVALID, node,
                               "%s %s has %" PRId64 " channels, %" PRId64 " per group of %" PRId64
                               ", but %s %s wants %" PRId64 " per group",
                               x_label, shape_text(x).s, x->dims[1], x->dims[1] / group, group,
                               w_label, shape_text(w).s, w->dims[1]);
    }
    if (w->dims[2] < 1 || w->dims[3] < 1)
        return tide_node_error(err, TIDE_INVALID, node, "%s %s has an empty kernel window", w_label,
                               shape_text(w).s);
    struct window win = {.ksize = {w->dims[2], w->dims[3]}};
    st = read_pair(node, "strides", pair_ones, 1, win.strides, err);
    if (st == TIDE_OK)
        st = read_pair(node, "pads", pair_zeros, 0, win.pads, err);
    if (st == TIDE_OK)
        st = read_pair(node, "dilations", pair_ones, 1, win.dilations, err);
    if (st != TIDE_OK)
        return st;
    return window_output(node, x_label, x, &win, w->dims[0], y, err);
}

/*
 * The output shape of MaxPool2D / AvgPool2D of x [N, C, H, W] (label names
 * it) under the node's ksize, strides (default: ksize) and pads (default
 * [0, 0], each less than the kernel), normalised in place.
 */
static enum tide_status pool2d_output_shape(struct tide_node *node, const char *label,
                                            const struct tide_shape *x, struct tide_shape *y,
                                            struct tide_error *err)
{
    struct window win = {.dilations = {1, 1}};
    enum tide_status st = require_rank(node, label, x, 4, 4, "[N, C, H, W]", err);
    if (st == TIDE_OK)
        st = read_pair(node, "ksize", NULL, 1, win.ksize, err);
    if (st == TIDE_OK)
        st = read_pair(node, "strides", win.ksize, 1, win.strides, err);
    if (st == TIDE_OK)
        st = read_pair(node, "pads", pair_zeros, 0, win.pads, err);
    if (st != TIDE_OK)
        return st;
    for (int i = 0; i < 2; i++) {
        if (win.pads[i] >= win.ksize[i])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"pads\" %s has %s %" PRId64
                                   ", wants less than the kernel %s %" PRId64 " (ksize %s)",
                                   ints_text(win.pads, 2).s, hw_name[i], win.pads[i], hw_name[i],
                                   win.ksize[i], ints_text(win.ksize, 2).s);
    }
    return window_output(node, label, x, &win, x->dims[1], y, err);
}

/* ============================================================================
 * Sources
 * ========================================================================== */

/* Placeholder and Variable: the output is the dtype and shape attributes. */
static enum tide_status check_source(struct tide_node *node, enum tide_dtype dtype,
                                     const struct tide_shape *shape, bool int32_ok,
                                     struct tide_error *err)
{
    if (dtype != TIDE_DTYPE_FLOAT32 && !(int32_ok && dtype == TIDE_DTYPE_INT32))
        return tide_node_error(err, TIDE_INVALID, node, "attribute \"dtype\" is %s (%d), wants %s",
                               tide_dtype_name(dtype), (int)dtype,
                               int32_ok ? "float32 or int32" : "float32");
    return check_shape(node, "attribute \"shape\"", shape, err);
}

/* A tensor attribute: a known dtype, a valid shape, and exactly numel * dtype size bytes. */
static enum tide_status check_tensor(struct tide_node *node, const char *name,
                                     const struct tide_const_tensor *t, struct tide_error *err)
{
    if (!t)
        return tide_node_error(err, TIDE_INVALID, node, "attribute \"%s\" holds no tensor", name);
    size_t esize = tide_dtype_size(t->dtype);
    if (esize == 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" has dtype %s (%d), wants float32 or int32", name,
                               tide_dtype_name(t->dtype), (int)t->dtype);
    char label[64];
    snprintf(label, sizeof(label), "the tensor of attribute \"%s\"", name);
    enum tide_status st = check_shape(node, label, &t->shape, err);
    if (st != TIDE_OK)
        return st;
    int64_t numel = tide_shape_numel(&t->shape);
    if (numel < 0 || (uint64_t)numel > UINT64_MAX / esize)
        return tide_node_error(err, TIDE_LIMIT, node,
                               "attribute \"%s\": the byte size of shape %s overflows", name,
                               shape_text(&t->shape).s);
    uint64_t want = (uint64_t)numel * esize;
    if (t->nbytes != want)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" holds %" PRIu64 " bytes, but a %s tensor of shape "
                               "%s needs %" PRIu64,
                               name, t->nbytes, tide_dtype_name(t->dtype), shape_text(&t->shape).s,
                               want);
    return TIDE_OK;
}

enum tide_status tide__infer_placeholder(struct tide_graph *graph, struct tide_node *node,
                                         struct tide_error *err)
{
    enum tide_dtype dtype = node->attrs[TIDE_ATTR_PLACEHOLDER_dtype].dtype;
    const struct tide_shape *shape = &node->attrs[TIDE_ATTR_PLACEHOLDER_shape].shape;
    enum tide_status st = check_source(node, dtype, shape, true, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, dtype, shape, err);
}

static const char *const variable_inits[] = {
    "zeros", "ones", "constant", "normal", "uniform", "glorot_uniform", "he_normal", "value",
};

enum tide_status tide__infer_variable(struct tide_graph *graph, struct tide_node *node,
                                      struct tide_error *err)
{
    enum tide_dtype dtype = node->attrs[TIDE_ATTR_VARIABLE_dtype].dtype;
    const struct tide_shape *shape = &node->attrs[TIDE_ATTR_VARIABLE_shape].shape;
    enum tide_status st = check_source(node, dtype, shape, false, err);
    if (st != TIDE_OK)
        return st;

    const char *init = node->attrs[TIDE_ATTR_VARIABLE_init].s;
    if (!init)
        init = "";
    size_t n_inits = sizeof(variable_inits) / sizeof(variable_inits[0]);
    size_t k = 0;
    while (k < n_inits && strcmp(init, variable_inits[k]) != 0)
        k++;
    if (k == n_inits) {
        char known[160] = "";
        for (size_t j = 0; j < n_inits; j++) {
            size_t used = strlen(known);
            snprintf(known + used, sizeof(known) - used, "%s%s", j ? ", " : "", variable_inits[j]);
        }
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"init\" is \"%.64s\", wants one of %s", init, known);
    }

    const struct tide_attr_value *value = &node->attrs[TIDE_ATTR_VARIABLE_value];
    bool by_value = strcmp(init, "value") == 0;
    if (by_value && (!value->present || !value->tensor))
        return tide_node_error(err, TIDE_INVALID, node,
                               "init \"value\" needs attribute \"value\" (a tensor)");
    if (!by_value && value->present)
        return tide_node_error(
            err, TIDE_INVALID, node,
            "attribute \"value\" is set, but init is \"%s\"; set init to \"value\"", init);
    if (by_value) {
        const struct tide_const_tensor *t = value->tensor;
        st = check_tensor(node, "value", t, err);
        if (st != TIDE_OK)
            return st;
        if (t->dtype != dtype || !tide_shape_equal(&t->shape, shape))
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"value\" is %s %s, but the variable is %s %s",
                                   tide_dtype_name(t->dtype), shape_text(&t->shape).s,
                                   tide_dtype_name(dtype), shape_text(shape).s);
    }
    st = check_float(node, "scale", -INFINITY, true, INFINITY, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, dtype, shape, err);
}

enum tide_status tide__infer_constant(struct tide_graph *graph, struct tide_node *node,
                                      struct tide_error *err)
{
    const struct tide_const_tensor *t = node->attrs[TIDE_ATTR_CONST_value].tensor;
    enum tide_status st = check_tensor(node, "value", t, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, t->dtype, &t->shape, err);
}

/* ============================================================================
 * Element-wise ops
 * ========================================================================== */

enum tide_status tide__infer_identity(struct tide_graph *graph, struct tide_node *node,
                                      struct tide_error *err)
{
    const struct tide_output *x = tide_graph_input(graph, node, 0);
    return tide__set_output(graph, node, 0, x->dtype, &x->shape, err);
}

enum tide_status tide__infer_sink(struct tide_graph *graph, struct tide_node *node,
                                  struct tide_error *err)
{
    return TIDE_OK;
}

enum tide_status tide__infer_unary(struct tide_graph *graph, struct tide_node *node,
                                   struct tide_error *err)
{
    if (node->op == TIDE_OP_SCALE) {
        enum tide_status st = check_float(node, "scale", -INFINITY, true, INFINITY, err);
        if (st != TIDE_OK)
            return st;
    }
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, input_shape(graph, node, 0), err);
}

enum tide_status tide__infer_broadcast(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    const struct tide_shape *a = input_shape(graph, node, 0), *b = input_shape(graph, node, 1);
    struct tide_shape y;
    int64_t clash[2];
    if (!broadcast_shapes(a, b, &y, clash))
        return tide_node_error(err, TIDE_INVALID, node,
                               "input shapes %s and %s do not broadcast: dimensions %" PRId64
                               " and %" PRId64 " differ and neither is 1",
                               shape_text(a).s, shape_text(b).s, clash[0], clash[1]);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

/* ---- Masks: Cast, Compare, Select ---- */

/* Cast(x; to): x's shape in dtype `to`, float32 or int32, from x of either. */
enum tide_status tide__infer_cast(struct tide_graph *graph, struct tide_node *node,
                                  struct tide_error *err)
{
    int64_t to = node->attrs[TIDE_ATTR_CAST_to].i;
    if (to != TIDE_DTYPE_FLOAT32 && to != TIDE_DTYPE_INT32)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"to\" is %" PRId64 ", wants %d (float32) or %d (int32)",
                               to, (int)TIDE_DTYPE_FLOAT32, (int)TIDE_DTYPE_INT32);
    return tide__set_output(graph, node, 0, (enum tide_dtype)to, input_shape(graph, node, 0), err);
}

/*
 * Refuses an enum attribute (attribute k of node, called name) outside 0 .. count - 1, listing
 * the values' meanings in order (values).
 */
static enum tide_status check_enum_attr(const struct tide_node *node, int k, const char *name,
                                        int count, const char *values, struct tide_error *err)
{
    int64_t v = node->attrs[k].i;
    if (v < 0 || v >= count)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" is %" PRId64 ", wants 0 to %d (%s)", name, v,
                               count - 1, values);
    return TIDE_OK;
}

/* Compare(x, y; mode): x and y of one dtype, broadcast; the output is float32 0.0 / 1.0. */
enum tide_status tide__infer_compare(struct tide_graph *graph, struct tide_node *node,
                                     struct tide_error *err)
{
    enum tide_status st =
        check_enum_attr(node, TIDE_ATTR_COMPARE_mode, "mode", TIDE_COMPARISON_COUNT,
                        "equal, not equal, less, less or equal, greater, "
                        "greater or equal",
                        err);
    if (st != TIDE_OK)
        return st;
    enum tide_dtype a = tide_graph_input(graph, node, 0)->dtype;
    enum tide_dtype b = tide_graph_input(graph, node, 1)->dtype;
    if (a != b)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 (x) is %s and input 1 (y) is %s; wants both float32 or "
                               "both int32",
                               tide_dtype_name(a), tide_dtype_name(b));
    return tide__infer_broadcast(graph, node, err);
}

/* Select(cond, x, y): the three broadcast together by NumPy rules. */
enum tide_status tide__infer_select(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    const struct tide_shape *cond = input_shape(graph, node, 0);
    const struct tide_shape *x = input_shape(graph, node, 1), *y = input_shape(graph, node, 2);
    struct tide_shape cx, out;
    int64_t clash[2];
    if (!broadcast_shapes(cond, x, &cx, clash) || !broadcast_shapes(&cx, y, &out, clash))
        return tide_node_error(err, TIDE_INVALID, node,
                               "input shapes %s (cond), %s (x) and %s (y) do not broadcast: "
                               "dimensions %" PRId64 " and %" PRId64 " differ and neither is 1",
                               shape_text(cond).s, shape_text(x).s, shape_text(y).s, clash[0],
                               clash[1]);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &out, err);
}

/* ---- Trigonometric and hyperbolic functions: Trig, TrigGrad ---- */

/* Refuses an "fn" (attribute k of node) that is not an enum tide_trig_function value. */
static enum tide_status check_trig_fn(const struct tide_node *node, int k, struct tide_error *err)
{
    return check_enum_attr(node, k, "fn", TIDE_TRIG_FUNCTION_COUNT,
                           "sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh", err);
}

/* Trig(x; fn): x's shape. */
enum tide_status tide__infer_trig(struct tide_graph *graph, struct tide_node *node,
                                  struct tide_error *err)
{
    enum tide_status st = check_trig_fn(node, TIDE_ATTR_TRIG_fn, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, input_shape(graph, node, 0), err);
}

/* TrigGrad(dy, x; fn): dy has x's shape, and so has the output. */
enum tide_status tide__infer_trig_grad(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    enum tide_status st = check_trig_fn(node, TIDE_ATTR_TRIG_GRAD_fn, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape *x = input_shape(graph, node, 1);
    st = expect_input_shape(graph, node, 0, "dy", x, err, "the shape of input 1 (x)");
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

/* ---- Rounding to integral values: Round ---- */

/* Round(x; mode): x's shape; a "mode" that is not an enum tide_rounding value is refused. */
enum tide_status tide__infer_round(struct tide_graph *graph, struct tide_node *node,
                                   struct tide_error *err)
{
    enum tide_status st = check_enum_attr(node, TIDE_ATTR_ROUND_mode, "mode", TIDE_ROUNDING_COUNT,
                                          "floor, ceil, half to even, toward zero", err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, input_shape(graph, node, 0), err);
}

enum tide_status tide__infer_add_n(struct tide_graph *graph, struct tide_node *node,
                                   struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    for (uint32_t i = 1; i < node->n_inputs; i++) {
        enum tide_status st = expect_input_shape(graph, node, i, "term", x, err,
                                                 "the shape of input 0; AddN does not broadcast");
        if (st != TIDE_OK)
            return st;
    }
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

enum tide_status tide__infer_same_as_1(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    const struct tide_shape *y = input_shape(graph, node, 1);
    enum tide_status st =
        expect_input_shape(graph, node, 0, "dy", y, err, "the shape of input 1 (y)");
    if (st != TIDE_OK)
        return st;
    if (node->op == TIDE_OP_SOFTMAX_GRAD) {
        struct tide_attr_value *axis = attr(node, "axis");
        st = normalise_axis(node, "axis", axis->i, y, &axis->i, err);
        if (st != TIDE_OK)
            return st;
    }
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, y, err);
}

/* ============================================================================
 * Linear algebra, bias, softmax
 * ========================================================================== */

/* The "math" attribute of the ops that have one (ops.def): fp32 or tf32. */
static enum tide_status check_math(const struct tide_node *node, struct tide_error *err)
{
    int k = tide_op_math_attr(node->op);
    struct tide_error ignored;
    enum tide_math math;
    if (k < 0 || tide_math_parse(node->attrs[k].s, &math, &ignored) == TIDE_OK)
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, node,
                           "attribute \"math\" is \"%.64s\", wants fp32 or tf32",
                           node->attrs[k].s ? node->attrs[k].s : "");
}

enum tide_status tide__infer_matmul(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    if (check_math(node, err) != TIDE_OK)
        return TIDE_INVALID; /* its only failure */
    const struct tide_shape *a = input_shape(graph, node, 0), *b = input_shape(graph, node, 1);
    enum tide_status st = require_rank(node, "input 0 (a)", a, 2, 2, "[M, K]", err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 1 (b)", b, 2, 2, "[K, N]", err);
    if (st != TIDE_OK)
        return st;
    bool ta = node->attrs[TIDE_ATTR_MATMUL_transpose_a].b;
    bool tb = node->attrs[TIDE_ATTR_MATMUL_transpose_b].b;
    int64_t m = a->dims[ta ? 1 : 0], ka = a->dims[ta ? 0 : 1];
    int64_t kb = b->dims[tb ? 1 : 0], n = b->dims[tb ? 0 : 1];
    if (ka != kb)
        return tide_node_error(
            err, TIDE_INVALID, node,
            "inner dimensions %" PRId64 " and %" PRId64 " differ (a is %s%s, b is %s%s)", ka, kb,
            shape_text(a).s, ta ? " transposed" : "", shape_text(b).s, tb ? " transposed" : "");
    int64_t dims[2] = {m, n};
    struct tide_shape y = tide_shape_make(2, dims);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

enum tide_status tide__infer_bias_add(struct tide_graph *graph, struct tide_node *node,
                                      struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    enum tide_status st =
        require_rank(node, "input 0 (x)", x, 2, TIDE_MAX_RANK, "[N, C, ...]", err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape want = tide_shape_make(1, &x->dims[1]);
    st = expect_input_shape(graph, node, 1, "bias", &want, err,
                            "one per channel, axis 1 of input 0 (x) %s", shape_text(x).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

enum tide_status tide__infer_bias_add_grad(struct tide_graph *graph, struct tide_node *node,
                                           struct tide_error *err)
{
    const struct tide_shape *dy = input_shape(graph, node, 0);
    enum tide_status st =
        require_rank(node, "input 0 (dy)", dy, 2, TIDE_MAX_RANK, "[N, C, ...]", err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape y = tide_shape_make(1, &dy->dims[1]);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

enum tide_status tide__infer_softmax(struct tide_graph *graph, struct tide_node *node,
                                     struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    struct tide_attr_value *axis = &node->attrs[TIDE_ATTR_SOFTMAX_axis];
    enum tide_status st = require_rank(node, "input 0 (x)", x, 1, TIDE_MAX_RANK, "", err);
    if (st == TIDE_OK)
        st = normalise_axis(node, "axis", axis->i, x, &axis->i, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

/* SoftmaxCrossEntropy and its gradient: logits [N, C] float32 with C >= 1, labels [N] int32. */
static enum tide_status check_logits_labels(const struct tide_graph *graph, struct tide_node *node,
                                            struct tide_error *err)
{
    const struct tide_shape *logits = input_shape(graph, node, 0);
    enum tide_status st = expect_input_dtype(graph, node, 0, "logits", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 0 (logits)", logits, 2, 2, "[N, C]", err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "labels", TIDE_DTYPE_INT32, err);
    if (st != TIDE_OK)
        return st;
    if (logits->dims[1] == 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 (logits) %s has no classes (C is 0)", shape_text(logits).s);
    struct tide_shape rows = tide_shape_make(1, &logits->dims[0]);
    return expect_input_shape(graph, node, 1, "labels", &rows, err,
                              "one class index per row of input 0 (logits) %s",
                              shape_text(logits).s);
}

enum tide_status tide__infer_softmax_xent(struct tide_graph *graph, struct tide_node *node,
                                          struct tide_error *err)
{
    enum tide_status st = check_logits_labels(graph, node, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape loss = tide_shape_make(1, &input_shape(graph, node, 0)->dims[0]);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &loss, err);
}

enum tide_status tide__infer_softmax_xent_grad(struct tide_graph *graph, struct tide_node *node,
                                               struct tide_error *err)
{
    const struct tide_shape *logits = input_shape(graph, node, 0);
    enum tide_status st = check_logits_labels(graph, node, err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 2, "dloss", TIDE_DTYPE_FLOAT32, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape rows = tide_shape_make(1, &logits->dims[0]);
    st = expect_input_shape(graph, node, 2, "dloss", &rows, err,
                            "one per row of input 0 (logits) %s", shape_text(logits).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, logits, err);
}

/* ============================================================================
 * Shape ops: reduce, reshape, concat, slice, broadcast
 * ========================================================================== */

enum tide_status tide__infer_reduce(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    bool keep_dims = attr(node, "keep_dims")->b;
    struct tide_attr_value *axes;
    enum tide_status st = ints_attr(node, "axes", &axes, err);
    if (st != TIDE_OK)
        return st;

    bool reduced[TIDE_MAX_RANK] = {false};
    if (axes->ints.n == 0) {
        for (int32_t i = 0; i < x->rank; i++)
            reduced[i] = true;
    }
    for (int32_t i = 0; i < axes->ints.n; i++) {
        int64_t axis;
        st = normalise_axis(node, "axes", axes->ints.v[i], x, &axis, err);
        if (st != TIDE_OK)
            return st;
        if (reduced[axis])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"axes\" %s names axis %" PRId64
                                   " twice (input 0 is %s)",
                                   ints_text(axes->ints.v, axes->ints.n).s, axis, shape_text(x).s);
        reduced[axis] = true;
    }

    /* Write the axes back sorted and non-negative, and drop (or keep as 1) each one. */
    struct tide_shape y = {0};
    axes->ints.n = 0;
    for (int32_t i = 0; i < x->rank; i++) {
        if (reduced[i])
            axes->ints.v[axes->ints.n++] = i;
        if (!reduced[i])
            y.dims[y.rank++] = x->dims[i];
        else if (keep_dims)
            y.dims[y.rank++] = 1;
    }
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

enum tide_status tide__infer_reshape(struct tide_graph *graph, struct tide_node *node,
                                     struct tide_error *err)
{
    const struct tide_output *x = tide_graph_input(graph, node, 0);
    int64_t numel = tide_shape_numel(&x->shape); /* valid: its producer's output was checked */
    struct tide_attr_value *a;
    enum tide_status st = ints_attr(node, "shape", &a, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape y = tide_shape_make(a->ints.n, a->ints.v);
    struct text attr_text = ints_text(a->ints.v, a->ints.n);

    int32_t inferred = -1;
    int64_t known = 1; /* the product of the entries other than -1 */
    for (int32_t i = 0; i < y.rank; i++) {
        int64_t d = y.dims[i];
        if (d == -1 && inferred >= 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"shape\" %s has more than one -1", attr_text.s);
        if (d == -1) {
            inferred = i;
            continue;
        }
        if (d < 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"shape\" %s has %" PRId64
                                   " at index %d, wants a dimension >= 0 or -1",
                                   attr_text.s, d, i);
        if (d != 0 && known > INT64_MAX / d)
            return tide_node_error(
                err, TIDE_INVALID, node,
                "attribute \"shape\" %s has more elements than input 0 %s (%" PRId64 ")",
                attr_text.s, shape_text(&x->shape).s, numel);
        known *= d;
    }
    if (inferred >= 0) {
        if (known == 0)
            return tide_node_error(
                err, TIDE_INVALID, node,
                "attribute \"shape\" %s: the -1 cannot be inferred when the other "
                "dimensions multiply to 0 (input 0 is %s)",
                attr_text.s, shape_text(&x->shape).s);
        if (numel % known != 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"shape\" %s: input 0 %s has %" PRId64
                                   " elements, not a multiple of %" PRId64,
                                   attr_text.s, shape_text(&x->shape).s, numel, known);
        y.dims[inferred] = numel / known;
    } else if (known != numel) {
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"shape\" %s has %" PRId64
                               " elements, but input 0 %s has %" PRId64,
                               attr_text.s, known, shape_text(&x->shape).s, numel);
    }
    return tide__set_output(graph, node, 0, x->dtype, &y, err);
}

enum tide_status tide__infer_concat(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    const struct tide_output *x0 = tide_graph_input(graph, node, 0);
    struct tide_attr_value *axis_attr = &node->attrs[TIDE_ATTR_CONCAT_axis];
    enum tide_status st =
        normalise_axis(node, "axis", axis_attr->i, &x0->shape, &axis_attr->i, err);
    if (st != TIDE_OK)
        return st;
    int64_t axis = axis_attr->i;
    struct tide_shape y = x0->shape;
    for (uint32_t i = 1; i < node->n_inputs; i++) {
        const struct tide_shape *x = input_shape(graph, node, i);
        bool fits = x->rank == y.rank;
        for (int32_t d = 0; fits && d < y.rank; d++)
            fits = d == axis || x->dims[d] == y.dims[d];
        if (!fits)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u has shape %s, wants the shape of input 0 %s except "
                                   "along axis %" PRId64,
                                   i, shape_text(x).s, shape_text(&x0->shape).s, axis);
        if (y.dims[axis] > INT64_MAX - x->dims[axis])
            return tide_node_error(err, TIDE_LIMIT, node,
                                   "the length of axis %" PRId64 " overflows at input %u %s", axis,
                                   i, shape_text(x).s);
        y.dims[axis] += x->dims[axis];
    }
    return tide__set_output(graph, node, 0, x0->dtype, &y, err);
}

/*
 * Axis i of a slice window: begin >= 0 and begin + size <= dim, where dim is
 * axis i of outer (label names it) and size_name says where size comes from.
 */
static enum tide_status check_slice_axis(struct tide_node *node, int32_t i, int64_t begin,
                                         const char *size_name, int64_t size, const char *label,
                                         const struct tide_shape *outer, struct tide_error *err)
{
    int64_t dim = outer->dims[i];
    if (begin < 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"begin\" is %" PRId64 " at axis %d, wants >= 0", begin,
                               i);
    if (begin > dim || size > dim - begin)
        return tide_node_error(err, TIDE_INVALID, node,
                               "begin %" PRId64 " + %s %" PRId64 " exceeds dimension %" PRId64
                               " at axis %d of %s %s",
                               begin, size_name, size, dim, i, label, shape_text(outer).s);
    return TIDE_OK;
}

enum tide_status tide__infer_slice(struct tide_graph *graph, struct tide_node *node,
                                   struct tide_error *err)
{
    const struct tide_output *x = tide_graph_input(graph, node, 0);
    struct tide_attr_value *begin, *size;
    enum tide_status st = ints_attr(node, "begin", &begin, err);
    if (st == TIDE_OK)
        st = ints_attr(node, "size", &size, err);
    if (st == TIDE_OK)
        st = expect_one_per_axis(node, "begin", begin, "input 0", &x->shape, err);
    if (st == TIDE_OK)
        st = expect_one_per_axis(node, "size", size, "input 0", &x->shape, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape y = x->shape;
    for (int32_t i = 0; i < y.rank; i++) {
        int64_t b = begin->ints.v[i], s = size->ints.v[i];
        if (s == -1) /* to the end; a bad begin is reported below */
            s = b >= 0 && b <= x->shape.dims[i] ? x->shape.dims[i] - b : 0;
        if (s < 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"size\" %s has %" PRId64
                                   " at axis %d, wants a size >= 0 or -1",
                                   ints_text(size->ints.v, size->ints.n).s, s, i);
        st = check_slice_axis(node, i, b, "size", s, "input 0", &x->shape, err);
        if (st != TIDE_OK)
            return st;
        y.dims[i] = s;
    }
    for (int32_t i = 0; i < y.rank; i++)
        size->ints.v[i] = y.dims[i]; /* size -1 becomes the real size */
    return tide__set_output(graph, node, 0, x->dtype, &y, err);
}

enum tide_status tide__infer_slice_grad(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    const struct tide_output *dy = tide_graph_input(graph, node, 0);
    const struct tide_shape *full = &node->attrs[TIDE_ATTR_SLICE_GRAD_shape].shape;
    struct tide_attr_value *begin;
    enum tide_status st = check_shape(node, "attribute \"shape\"", full, err);
    if (st != TIDE_OK)
        return st;
    if (full->rank != dy->shape.rank)
        return tide_node_error(
            err, TIDE_INVALID, node,
            "attribute \"shape\" %s has rank %d, but input 0 (dy) %s has rank %d",
            shape_text(full).s, full->rank, shape_text(&dy->shape).s, dy->shape.rank);
    st = ints_attr(node, "begin", &begin, err);
    if (st == TIDE_OK)
        st = expect_one_per_axis(node, "begin", begin, "input 0 (dy)", &dy->shape, err);
    for (int32_t i = 0; st == TIDE_OK && i < full->rank; i++)
        st = check_slice_axis(node, i, begin->ints.v[i], "dy's size", dy->shape.dims[i],
                              "attribute \"shape\"", full, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, dy->dtype, full, err);
}

enum tide_status tide__infer_sum_to_shape(struct tide_graph *graph, struct tide_node *node,
                                          struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    const struct tide_shape *target = &node->attrs[TIDE_ATTR_SUM_TO_SHAPE_shape].shape;
    enum tide_status st = check_shape(node, "attribute \"shape\"", target, err);
    if (st != TIDE_OK)
        return st;
    if (!broadcasts_to(target, x))
        return tide_node_error(
            err, TIDE_INVALID, node,
            "attribute \"shape\" %s does not broadcast to input 0 %s, so input 0 "
            "cannot be summed to it",
            shape_text(target).s, shape_text(x).s);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, target, err);
}

enum tide_status tide__infer_broadcast_to(struct tide_graph *graph, struct tide_node *node,
                                          struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    const struct tide_shape *target = &node->attrs[TIDE_ATTR_BROADCAST_TO_shape].shape;
    enum tide_status st = check_shape(node, "attribute \"shape\"", target, err);
    if (st != TIDE_OK)
        return st;
    if (!broadcasts_to(x, target))
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 %s does not broadcast to attribute \"shape\" %s",
                               shape_text(x).s, shape_text(target).s);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, target, err);
}

/* ============================================================================
 * Convolution and pooling
 * ========================================================================== */

enum tide_status tide__infer_conv2d(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    if (check_math(node, err) != TIDE_OK)
        return TIDE_INVALID; /* its only failure */
    struct tide_shape y;
    enum tide_status st = conv2d_output_shape(node, "input 0 (x)", input_shape(graph, node, 0),
                                              "input 1 (w)", input_shape(graph, node, 1), &y, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

enum tide_status tide__infer_conv2d_backprop_input(struct tide_graph *graph, struct tide_node *node,
                                                   struct tide_error *err)
{
    if (check_math(node, err) != TIDE_OK)
        return TIDE_INVALID; /* its only failure */
    const struct tide_shape *x = &node->attrs[TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape].shape;
    const struct tide_shape *w = input_shape(graph, node, 1);
    struct tide_shape y;
    enum tide_status st = check_shape(node, "attribute \"input_shape\"", x, err);
    if (st == TIDE_OK)
        st = conv2d_output_shape(node, "attribute \"input_shape\"", x, "input 1 (w)", w, &y, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 0, "dy", &y, err,
                                "what Conv2D of attribute \"input_shape\" %s with filter %s gives",
                                shape_text(x).s, shape_text(w).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

enum tide_status tide__infer_conv2d_backprop_filter(struct tide_graph *graph,
                                                    struct tide_node *node, struct tide_error *err)
{
    if (check_math(node, err) != TIDE_OK)
        return TIDE_INVALID; /* its only failure */
    const struct tide_shape *x = input_shape(graph, node, 0);
    const struct tide_shape *w = &node->attrs[TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape].shape;
    struct tide_shape y;
    enum tide_status st = check_shape(node, "attribute \"filter_shape\"", w, err);
    if (st == TIDE_OK)
        st = conv2d_output_shape(node, "input 0 (x)", x, "attribute \"filter_shape\"", w, &y, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 1, "dy", &y, err,
                                "what Conv2D of input 0 (x) %s with attribute \"filter_shape\" %s "
                                "gives",
                                shape_text(x).s, shape_text(w).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, w, err);
}

enum tide_status tide__infer_pool2d(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    struct tide_shape y;
    enum tide_status st =
        pool2d_output_shape(node, "input 0 (x)", input_shape(graph, node, 0), &y, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

/* Refuses planes whose cells an int32 argmax cannot index; label names x. */
static enum tide_status check_argmax_plane(struct tide_node *node, const char *label,
                                           const struct tide_shape *x, struct tide_error *err)
{
    if (x->dims[2] > INT32_MAX / (x->dims[3] > 0 ? x->dims[3] : 1))
        return tide_node_error(err, TIDE_LIMIT, node,
                               "%s %s has planes of %" PRId64 " x %" PRId64
                               " cells, more than the int32 argmax can index (%d)",
                               label, shape_text(x).s, x->dims[2], x->dims[3], INT32_MAX);
    return TIDE_OK;
}

/* MaxPool2D(x) -> y (float32), argmax (int32, y's shape). */
enum tide_status tide__infer_max_pool2d(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    struct tide_shape y;
    enum tide_status st = expect_input_dtype(graph, node, 0, "x", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = pool2d_output_shape(node, "input 0 (x)", x, &y, err);
    if (st == TIDE_OK)
        st = check_argmax_plane(node, "input 0 (x)", x, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_INT32, &y, err);
    return st;
}

/*
 * MaxPool2DGrad(dy, argmax; input_shape): dy (float32) and argmax (int32)
 * have the shape MaxPool2D of input_shape gives; the output is input_shape.
 */
enum tide_status tide__infer_max_pool2d_grad(struct tide_graph *graph, struct tide_node *node,
                                             struct tide_error *err)
{
    const struct tide_shape *x = &node->attrs[TIDE_ATTR_MAX_POOL2D_GRAD_input_shape].shape;
    struct tide_shape y;
    enum tide_status st = check_shape(node, "attribute \"input_shape\"", x, err);
    if (st == TIDE_OK)
        st = pool2d_output_shape(node, "attribute \"input_shape\"", x, &y, err);
    if (st == TIDE_OK)
        st = check_argmax_plane(node, "attribute \"input_shape\"", x, err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 0, "dy", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 0, "dy", &y, err,
                                "what MaxPool2D of attribute \"input_shape\" %s gives",
                                shape_text(x).s);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "argmax", TIDE_DTYPE_INT32, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 1, "argmax", &y, err,
                                "what MaxPool2D of attribute \"input_shape\" %s gives",
                                shape_text(x).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

enum tide_status tide__infer_avg_pool2d_grad(struct tide_graph *graph, struct tide_node *node,
                                             struct tide_error *err)
{
    const struct tide_shape *x = &node->attrs[TIDE_ATTR_AVG_POOL2D_GRAD_input_shape].shape;
    struct tide_shape y;
    enum tide_status st = check_shape(node, "attribute \"input_shape\"", x, err);
    if (st == TIDE_OK)
        st = pool2d_output_shape(node, "attribute \"input_shape\"", x, &y, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 0, "dy", &y, err,
                                "what AvgPool2D of attribute \"input_shape\" %s gives",
                                shape_text(x).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

enum tide_status tide__infer_global_avg_pool(struct tide_graph *graph, struct tide_node *node,
                                             struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    enum tide_status st = require_rank(node, "input 0 (x)", x, 4, 4, "[N, C, H, W]", err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape y = tide_shape_make(2, x->dims);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

enum tide_status tide__infer_global_avg_pool_grad(struct tide_graph *graph, struct tide_node *node,
                                                  struct tide_error *err)
{
    const struct tide_shape *x = &node->attrs[TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape].shape;
    enum tide_status st = check_shape(node, "attribute \"input_shape\"", x, err);
    if (st == TIDE_OK)
        st = require_rank(node, "attribute \"input_shape\"", x, 4, 4, "[N, C, H, W]", err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape nc = tide_shape_make(2, x->dims);
    st = expect_input_shape(graph, node, 0, "dy", &nc, err,
                            "[N, C] of attribute \"input_shape\" %s", shape_text(x).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

/* ============================================================================
 * Batch normalisation
 * ========================================================================== */

/*
 * Checks x (input x_index, rank 4 [N, C, H, W] or rank 2 [N, C]), the
 * per-channel inputs [first, first + n) named by roles, and epsilon; then
 * sets the three outputs of BatchNorm / BatchNormGrad: x's shape, [C], [C].
 */
static enum tide_status infer_batch_norm_common(struct tide_graph *graph, struct tide_node *node,
                                                uint32_t x_index, uint32_t first,
                                                const char *const *roles, uint32_t n,
                                                struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, x_index);
    if (x->rank != 4 && x->rank != 2)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input %u (x) has shape %s, wants rank 4 [N, C, H, W] or rank 2 "
                               "[N, C]",
                               x_index, shape_text(x).s);
    struct tide_shape channels = tide_shape_make(1, &x->dims[1]);
    enum tide_status st = TIDE_OK;
    for (uint32_t i = 0; st == TIDE_OK && i < n; i++)
        st = expect_input_shape(graph, node, first + i, roles[i], &channels, err,
                                "one per channel of input %u (x) %s", x_index, shape_text(x).s);
    if (st == TIDE_OK)
        st = check_float(node, "epsilon", 0, false, INFINITY, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_FLOAT32, &channels, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 2, TIDE_DTYPE_FLOAT32, &channels, err);
    return st;
}

/* BatchNorm(x, gamma, beta) -> y, mean, inv_std. */
enum tide_status tide__infer_batch_norm(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    static const char *const roles[] = {"gamma", "beta"};
    return infer_batch_norm_common(graph, node, 0, 1, roles, 2, err);
}

/* BatchNormGrad(dy, x, gamma, mean, inv_std) -> dx, dgamma, dbeta. */
enum tide_status tide__infer_batch_norm_grad(struct tide_graph *graph, struct tide_node *node,
                                             struct tide_error *err)
{
    static const char *const roles[] = {"gamma", "mean", "inv_std"};
    enum tide_status st = expect_input_shape(graph, node, 0, "dy", input_shape(graph, node, 1), err,
                                             "the shape of input 1 (x)");
    if (st != TIDE_OK)
        return st;
    return infer_batch_norm_common(graph, node, 1, 2, roles, 3, err);
}

/* ============================================================================
 * Optimizer updates
 * ========================================================================== */

/*
 * The Apply* ops write inputs [0, n_state) in place, so each must be the
 * output of a Variable, and a different one; every input must have the shape
 * of input 0 (var). roles names the inputs. learning_rate must be > 0.
 */
static enum tide_status check_update(struct tide_graph *graph, struct tide_node *node,
                                     const char *const *roles, uint32_t n_state,
                                     struct tide_error *err)
{
    const struct tide_shape *var = input_shape(graph, node, 0);
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        const struct tide_node *src = &graph->nodes[node->inputs[i].node];
        /* After placement, an update reads the device copy a Fetch made of its Variable. */
        if (i < n_state && src->op == TIDE_OP_FETCH && src->n_inputs == 1 &&
            graph->nodes[src->inputs[0].node].op == TIDE_OP_VARIABLE)
            src = &graph->nodes[src->inputs[0].node];
        if (i < n_state && src->op != TIDE_OP_VARIABLE)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u (%s) must be a Variable, but \"%s\" is a %s", i,
                                   roles[i], src->name, tide_op_info(src->op)->name);
        for (uint32_t j = 0; i < n_state && j < i; j++) {
            if (node->inputs[j].node == node->inputs[i].node)
                return tide_node_error(err, TIDE_INVALID, node,
                                       "input %u (%s) and input %u (%s) are the same Variable "
                                       "\"%s\"",
                                       j, roles[j], i, roles[i], src->name);
        }
        enum tide_status st =
            expect_input_shape(graph, node, i, roles[i], var, err, "the shape of input 0 (var)");
        if (st != TIDE_OK)
            return st;
    }
    return check_float(node, "learning_rate", 0, false, INFINITY, err);
}

enum tide_status tide__infer_apply_sgd(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    static const char *const roles[] = {"var", "grad"};
    return check_update(graph, node, roles, 1, err);
}

enum tide_status tide__infer_apply_momentum(struct tide_graph *graph, struct tide_node *node,
                                            struct tide_error *err)
{
    static const char *const roles[] = {"var", "accum", "grad"};
    enum tide_status st = check_update(graph, node, roles, 2, err);
    if (st != TIDE_OK)
        return st;
    return check_float(node, "momentum", 0, true, INFINITY, err);
}

enum tide_status tide__infer_apply_adam(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    static const char *const roles[] = {"var", "m", "v", "grad"};
    enum tide_status st = check_update(graph, node, roles, 3, err);
    if (st == TIDE_OK)
        st = check_float(node, "beta1", 0, true, 1, err);
    if (st == TIDE_OK)
        st = check_float(node, "beta2", 0, true, 1, err);
    if (st == TIDE_OK)
        st = check_float(node, "epsilon", 0, false, INFINITY, err);
    return st;
}

/* ============================================================================
 * Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu)
 * ========================================================================== */

/* Exp, Log, Sqrt and Gelu are tide__infer_unary; Div, Max, Min and Pow tide__infer_broadcast. */

/* GeluGrad(dy, x): dy has x's shape, and so has the output. */
enum tide_status tide__infer_gelu_grad(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 1);
    enum tide_status st =
        expect_input_shape(graph, node, 0, "dy", x, err, "the shape of input 1 (x)");
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
}

/*
 * MaxGrad, MinGrad and PowGrad (a, b, dy): a and b broadcast as for Max, Min
 * and Pow, dy has their broadcast shape, and so have both outputs.
 */
enum tide_status tide__infer_select_grad(struct tide_graph *graph, struct tide_node *node,
                                         struct tide_error *err)
{
    enum tide_status st = tide__infer_broadcast(graph, node, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape y = node->outputs[0].shape;
    st = expect_input_shape(
        graph, node, 2, "dy", &y, err, "the broadcast of input 0 (a) %s and input 1 (b) %s",
        shape_text(input_shape(graph, node, 0)).s, shape_text(input_shape(graph, node, 1)).s);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 1, TIDE_DTYPE_FLOAT32, &y, err);
}

/* ============================================================================
 * Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose)
 * ========================================================================== */

/*
 * BatchMatMul: a [..., M, K] (transposed: [..., K, M]) times b [..., K, N]
 * (transposed: [..., N, K]), each of rank 2 or more. The batch dims, all but
 * the last two, broadcast by NumPy rules (a rank-2 operand has none, so it
 * meets every batch entry), and the output is [batch..., M, N].
 */
enum tide_status tide__infer_batch_matmul(struct tide_graph *graph, struct tide_node *node,
                                          struct tide_error *err)
{
    if (check_math(node, err) != TIDE_OK)
        return TIDE_INVALID; /* its only failure */
    const struct tide_shape *a = input_shape(graph, node, 0), *b = input_shape(graph, node, 1);
    bool ta = node->attrs[TIDE_ATTR_BATCH_MATMUL_transpose_a].b;
    bool tb = node->attrs[TIDE_ATTR_BATCH_MATMUL_transpose_b].b;
    enum tide_status st = require_rank(node, "input 0 (a)", a, 2, TIDE_MAX_RANK,
                                       ta ? "[..., K, M]" : "[..., M, K]", err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 1 (b)", b, 2, TIDE_MAX_RANK,
                          tb ? "[..., N, K]" : "[..., K, N]", err);
    if (st != TIDE_OK)
        return st;
    int32_t ra = a->rank, rb = b->rank;
    int64_t m = a->dims[ra - (ta ? 1 : 2)], ka = a->dims[ra - (ta ? 2 : 1)];
    int64_t kb = b->dims[rb - (tb ? 1 : 2)], n = b->dims[rb - (tb ? 2 : 1)];
    if (ka != kb)
        return tide_node_error(
            err, TIDE_INVALID, node,
            "inner dimensions %" PRId64 " and %" PRId64 " differ (a is %s%s, b is %s%s)", ka, kb,
            shape_text(a).s, ta ? " transposed" : "", shape_text(b).s, tb ? " transposed" : "");
    struct tide_shape batch_a = tide_shape_make(ra - 2, a->dims);
    struct tide_shape batch_b = tide_shape_make(rb - 2, b->dims);
    struct tide_shape y;
    int64_t clash[2];
    if (!broadcast_shapes(&batch_a, &batch_b, &y, clash))
        return tide_node_error(err, TIDE_INVALID, node,
                               "batch dimensions %s of a %s and %s of b %s do not broadcast: "
                               "dimensions %" PRId64 " and %" PRId64 " differ and neither is 1",
                               shape_text(&batch_a).s, shape_text(a).s, shape_text(&batch_b).s,
                               shape_text(b).s, clash[0], clash[1]);
    y.dims[y.rank++] = m; /* the batch rank is at most TIDE_MAX_RANK - 2 */
    y.dims[y.rank++] = n;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

/* Transpose: output axis i is input axis perm[i]; any dtype (the SAME rule). */
enum tide_status tide__infer_transpose(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    const struct tide_output *x = tide_graph_input(graph, node, 0);
    struct tide_attr_value *perm;
    enum tide_status st = ints_attr(node, "perm", &perm, err);
    if (st == TIDE_OK)
        st = expect_one_per_axis(node, "perm", perm, "input 0", &x->shape, err);
    if (st != TIDE_OK)
        return st;
    struct text perm_text = ints_text(perm->ints.v, perm->ints.n);
    bool seen[TIDE_MAX_RANK] = {false};
    struct tide_shape y = {.rank = x->shape.rank};
    for (int32_t i = 0; i < y.rank; i++) {
        int64_t axis = perm->ints.v[i];
        if (axis < 0 || axis >= y.rank)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"perm\" %s has %" PRId64
                                   " at index %d, out of range for input 0 %s (wants 0 to %d)",
                                   perm_text.s, axis, i, shape_text(&x->shape).s, y.rank - 1);
        if (seen[axis])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"perm\" %s names axis %" PRId64
                                   " twice, wants a permutation of 0 to %d",
                                   perm_text.s, axis, y.rank - 1);
        seen[axis] = true;
        y.dims[i] = x->shape.dims[axis];
    }
    return tide__set_output(graph, node, 0, x->dtype, &y, err);
}

/* ============================================================================
 * Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing)
 * ========================================================================== */

/*
 * Refuses an INT attribute below min (a count: k, experts, capacity, num_rows) or above max
 * (the largest value an int32 output can hold, or the data's extent); what names the bound.
 */
static enum tide_status check_count(struct tide_node *node, const char *name, int64_t min,
                                    int64_t max, const char *what, struct tide_error *err)
{
    int64_t v = attr(node, name)->i;
    if (v >= min && v <= max)
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, node,
                           "attribute \"%s\" is %" PRId64 ", wants %" PRId64 " to %" PRId64 "%s%s",
                           name, v, min, max, what[0] ? " " : "", what);
}

/* The shape lead + tail[from..] (Gather's and GatherGrad's outputs), within the rank limit. */
static enum tide_status join_shapes(struct tide_node *node, const struct tide_shape *lead,
                                    const char *lead_label, const struct tide_shape *tail,
                                    int32_t from, const char *tail_label, struct tide_shape *out,
                                    struct tide_error *err)
{
    int32_t rank = lead->rank + tail->rank - from;
    if (rank > TIDE_MAX_RANK)
        return tide_node_error(err, TIDE_INVALID, node,
                               "the output would have rank %d (%s %s, then %s %s past axis %d), "
                               "the limit is %d",
                               rank, lead_label, shape_text(lead).s, tail_label, shape_text(tail).s,
                               from - 1, TIDE_MAX_RANK);
    out->rank = rank;
    for (int32_t i = 0; i < lead->rank; i++)
        out->dims[i] = lead->dims[i];
    for (int32_t i = from; i < tail->rank; i++)
        out->dims[lead->rank + i - from] = tail->dims[i];
    return TIDE_OK;
}

/* Gather(table [N, d1, ...] float32, ids int32 of any rank) -> ids.shape + [d1, ...]. */
enum tide_status tide__infer_gather(struct tide_graph *graph, struct tide_node *node,
                                    struct tide_error *err)
{
    const struct tide_shape *table = input_shape(graph, node, 0),
                            *ids = input_shape(graph, node, 1);
    enum tide_status st = expect_input_dtype(graph, node, 0, "table", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 0 (table)", table, 1, TIDE_MAX_RANK, "[N, ...]", err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "ids", TIDE_DTYPE_INT32, err);
    struct tide_shape y;
    if (st == TIDE_OK)
        st = join_shapes(node, ids, "input 1 (ids)", table, 1, "input 0 (table)", &y, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

/* GatherGrad(dy float32 [ids..., d1, ...], ids int32; num_rows) -> [num_rows, d1, ...]. */
enum tide_status tide__infer_gather_grad(struct tide_graph *graph, struct tide_node *node,
                                         struct tide_error *err)
{
    const struct tide_shape *dy = input_shape(graph, node, 0), *ids = input_shape(graph, node, 1);
    enum tide_status st = expect_input_dtype(graph, node, 0, "dy", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "ids", TIDE_DTYPE_INT32, err);
    if (st == TIDE_OK)
        st = check_count(node, "num_rows", 0, INT64_MAX, "", err);
    if (st != TIDE_OK)
        return st;
    bool lead_ok = dy->rank >= ids->rank;
    for (int32_t i = 0; lead_ok && i < ids->rank; i++)
        lead_ok = dy->dims[i] == ids->dims[i];
    if (!lead_ok)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 (dy) has shape %s, wants it to start with the shape %s "
                               "of input 1 (ids)",
                               shape_text(dy).s, shape_text(ids).s);
    int64_t rows = attr(node, "num_rows")->i;
    struct tide_shape lead = tide_shape_make(1, &rows), y;
    st = join_shapes(node, &lead, "[num_rows]", dy, ids->rank, "input 0 (dy)", &y, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
}

/* TopK(x float32 [..., n]; k) -> values [..., k] float32, indices [..., k] int32. */
enum tide_status tide__infer_top_k(struct tide_graph *graph, struct tide_node *node,
                                   struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, 0);
    enum tide_status st = expect_input_dtype(graph, node, 0, "x", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 0 (x)", x, 1, TIDE_MAX_RANK, "[..., n]", err);
    if (st != TIDE_OK)
        return st;
    int64_t n = x->dims[x->rank - 1];
    if (n > INT32_MAX)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 (x) %s has %" PRId64 " elements along its last axis, more "
                               "than the int32 indices can number (%d)",
                               shape_text(x).s, n, INT32_MAX);
    char what[TIDE_ERROR_MESSAGE_MAX / 2];
    snprintf(what, sizeof(what), "(the last dimension of input 0 (x) %s)", shape_text(x).s);
    st = check_count(node, "k", 1, n, what, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape y = *x;
    y.dims[y.rank - 1] = attr(node, "k")->i;
    st = tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, &y, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_INT32, &y, err);
    return st;
}

/* TopKGrad(dvalues float32 [..., k], indices int32 [..., k]; shape [..., n]) -> shape. */
enum tide_status tide__infer_top_k_grad(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    const struct tide_shape *dv = input_shape(graph, node, 0);
    const struct tide_shape *full = &attr(node, "shape")->shape;
    enum tide_status st = expect_input_dtype(graph, node, 0, "dvalues", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 0 (dvalues)", dv, 1, TIDE_MAX_RANK, "[..., k]", err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "indices", TIDE_DTYPE_INT32, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 1, "indices", dv, err,
                                "the shape of input 0 (dvalues)");
    if (st == TIDE_OK)
        st = check_shape(node, "attribute \"shape\"", full, err);
    if (st != TIDE_OK)
        return st;
    bool ok = full->rank == dv->rank && full->dims[full->rank - 1] >= dv->dims[dv->rank - 1];
    for (int32_t i = 0; ok && i + 1 < full->rank; i++)
        ok = full->dims[i] == dv->dims[i];
    if (!ok)
        return tide_node_error(
            err, TIDE_INVALID, node,
            "attribute \"shape\" %s does not fit input 0 (dvalues) %s: wants "
            "the same leading dimensions and a last dimension of at least %" PRId64,
            shape_text(full).s, shape_text(dv).s, dv->dims[dv->rank - 1]);
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, full, err);
}

/* MoeRoute(indices int32 [T, k]; experts, capacity) -> dispatch [experts * capacity], combine. */
enum tide_status tide__infer_moe_route(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    const struct tide_shape *idx = input_shape(graph, node, 0);
    enum tide_status st = expect_input_dtype(graph, node, 0, "indices", TIDE_DTYPE_INT32, err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 0 (indices)", idx, 2, 2, "[T, k]", err);
    if (st == TIDE_OK)
        st = check_count(node, "experts", 1, INT32_MAX, "", err);
    if (st == TIDE_OK)
        st = check_count(node, "capacity", 1, INT32_MAX, "", err);
    if (st != TIDE_OK)
        return st;
    int64_t experts = attr(node, "experts")->i, capacity = attr(node, "capacity")->i;
    if (experts > INT32_MAX / capacity)
        return tide_node_error(err, TIDE_INVALID, node,
                               "experts * capacity = %" PRId64 " * %" PRId64 " slots, more than "
                               "the int32 slot numbers can hold (%d)",
                               experts, capacity, INT32_MAX);
    if (idx->dims[0] > INT32_MAX)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 (indices) %s has %" PRId64 " tokens, more than the int32 "
                               "token numbers can hold (%d)",
                               shape_text(idx).s, idx->dims[0], INT32_MAX);
    int64_t slots = experts * capacity;
    struct tide_shape dispatch = tide_shape_make(1, &slots);
    st = tide__set_output(graph, node, 0, TIDE_DTYPE_INT32, &dispatch, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_INT32, idx, err);
    return st;
}

/*
 * GatherElements' and GatherElementsGrad's rules: axis in [0, rank), indices (idx_label) of
 * data's rank (data_label), at most data's size on every axis but axis.
 */
static enum tide_status check_gather_elements(struct tide_node *node, const char *data_label,
                                              const struct tide_shape *data, const char *idx_label,
                                              const struct tide_shape *idx, struct tide_error *err)
{
    enum tide_status st = require_rank(node, data_label, data, 1, TIDE_MAX_RANK, "", err);
    if (st != TIDE_OK)
        return st;
    int64_t axis = attr(node, "axis")->i;
    if (axis < 0 || axis >= data->rank)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"axis\" is %" PRId64 ", wants 0 to %d (%s has shape %s)",
                               axis, data->rank - 1, data_label, shape_text(data).s);
    if (idx->rank != data->rank)
        return tide_node_error(err, TIDE_INVALID, node,
                               "%s has shape %s, wants rank %d, the rank of %s %s", idx_label,
                               shape_text(idx).s, data->rank, data_label, shape_text(data).s);
    for (int32_t i = 0; i < idx->rank; i++) {
        if (i != axis && idx->dims[i] > data->dims[i])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "%s %s has %" PRId64 " elements along axis %d, more than the "
                                   "%" PRId64 " of %s %s (only axis %" PRId64 " may differ)",
                                   idx_label, shape_text(idx).s, idx->dims[i], i, data->dims[i],
                                   data_label, shape_text(data).s, axis);
    }
    return TIDE_OK;
}

/* GatherElements(data float32 [d0, ...], indices int32 of data's rank; axis) -> indices' shape. */
enum tide_status tide__infer_gather_elements(struct tide_graph *graph, struct tide_node *node,
                                             struct tide_error *err)
{
    const struct tide_shape *data = input_shape(graph, node, 0), *idx = input_shape(graph, node, 1);
    enum tide_status st = expect_input_dtype(graph, node, 0, "data", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "indices", TIDE_DTYPE_INT32, err);
    if (st == TIDE_OK)
        st = check_gather_elements(node, "input 0 (data)", data, "input 1 (indices)", idx, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, idx, err);
}

/* GatherElementsGrad(dy float32, indices int32 of dy's shape; axis, shape) -> shape. */
enum tide_status tide__infer_gather_elements_grad(struct tide_graph *graph, struct tide_node *node,
                                                  struct tide_error *err)
{
    const struct tide_shape *dy = input_shape(graph, node, 0);
    const struct tide_shape *full = &attr(node, "shape")->shape;
    enum tide_status st = expect_input_dtype(graph, node, 0, "dy", TIDE_DTYPE_FLOAT32, err);
    if (st == TIDE_OK)
        st = expect_input_dtype(graph, node, 1, "indices", TIDE_DTYPE_INT32, err);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 1, "indices", dy, err, "the shape of input 0 (dy)");
    if (st == TIDE_OK)
        st = check_shape(node, "attribute \"shape\"", full, err);
    if (st == TIDE_OK)
        st = check_gather_elements(node, "attribute \"shape\"", full, "input 0 (dy)", dy, err);
    if (st != TIDE_OK)
        return st;
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, full, err);
}

/* ============================================================================
 * Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout)
 * ========================================================================== */

/*
 * Checks x (input x_index: rank 1 or more, a last axis of at least one
 * element) and the inputs [first, first + n) named by roles, which are [D]
 * (one per element of x's last axis) before per_row and x's shape without
 * the last axis (one per row) from per_row on; then sets the three outputs
 * of LayerNorm (x's shape, then the rows' shape twice) or LayerNormGrad
 * (x's shape, then [D] twice).
 */
static enum tide_status infer_layer_norm_common(struct tide_graph *graph, struct tide_node *node,
                                                uint32_t x_index, uint32_t first,
                                                const char *const *roles, uint32_t n,
                                                uint32_t per_row, bool grad, struct tide_error *err)
{
    const struct tide_shape *x = input_shape(graph, node, x_index);
    char label[32];
    snprintf(label, sizeof(label), "input %u (x)", x_index);
    enum tide_status st = require_rank(node, label, x, 1, TIDE_MAX_RANK, "[..., D]", err);
    if (st != TIDE_OK)
        return st;
    if (x->dims[x->rank - 1] == 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "%s has shape %s, wants a last axis (the normalised one) of 1 or "
                               "more elements",
                               label, shape_text(x).s);
    struct tide_shape features = tide_shape_make(1, &x->dims[x->rank - 1]);
    struct tide_shape rows = tide_shape_make(x->rank - 1, x->dims);
    for (uint32_t i = 0; st == TIDE_OK && i < n; i++) {
        if (i < per_row)
            st = expect_input_shape(graph, node, first + i, roles[i], &features, err,
                                    "one per element of the last axis of %s %s", label,
                                    shape_text(x).s);
        else
            st = expect_input_shape(graph, node, first + i, roles[i], &rows, err,
                                    "one per row of %s %s, its shape without the last axis", label,
                                    shape_text(x).s);
    }
    if (st == TIDE_OK && !grad)
        st = check_float(node, "epsilon", 0, false, INFINITY, err);
    const struct tide_shape *side = grad ? &features : &rows;
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, x, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_FLOAT32, side, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 2, TIDE_DTYPE_FLOAT32, side, err);
    return st;
}

/* LayerNorm(x, gain, bias) -> y, mean, inv_std, over the last axis of x. */
enum tide_status tide__infer_layer_norm(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    static const char *const roles[] = {"gain", "bias"};
    return infer_layer_norm_common(graph, node, 0, 1, roles, 2, 2, false, err);
}

/* LayerNormGrad(dy, x, gain, mean, inv_std) -> dx, dgain, dbias. */
enum tide_status tide__infer_layer_norm_grad(struct tide_graph *graph, struct tide_node *node,
                                             struct tide_error *err)
{
    static const char *const roles[] = {"gain", "mean", "inv_std"};
    enum tide_status st = expect_input_shape(graph, node, 0, "dy", input_shape(graph, node, 1), err,
                                             "the shape of input 1 (x)");
    if (st != TIDE_OK)
        return st;
    return infer_layer_norm_common(graph, node, 1, 2, roles, 3, 1, true, err);
}

/*
 * Dropout(x) and DropoutGrad(dy): rate in [0, 1) (1 would keep nothing and
 * scale by infinity); DropoutGrad names the Dropout node whose mask it
 * regenerates. The output has the input's shape.
 */
enum tide_status tide__infer_dropout(struct tide_graph *graph, struct tide_node *node,
                                     struct tide_error *err)
{
    enum tide_status st = check_float(node, "rate", 0, true, 1, err);
    if (st != TIDE_OK)
        return st;
    if (node->op == TIDE_OP_DROPOUT_GRAD) {
        const char *forward = attr(node, "forward")->s;
        if (!forward || !forward[0])
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"forward\" is empty, wants the name of the "
                                   "Dropout node whose mask this regenerates");
    }
    return tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, input_shape(graph, node, 0), err);
}

/* ============================================================================
 * Sequence-model ops: fused attention (Attention)
 * ========================================================================== */

/*
 * The shape rules Attention and AttentionGrad share: q (input 0) [B, H, Sq, D],
 * k (input 1) [B, H, Sk, D] with q's B, H and D, v (input 2) k's shape; D and
 * Sk at least 1 (a row needs a key to attend to, and the default scale
 * 1/sqrt(D) a D); causal wants Sq == Sk; scale is 0 (1/sqrt(D)) or finite > 0.
 */
static enum tide_status check_attention(struct tide_graph *graph, struct tide_node *node,
                                        struct tide_error *err)
{
    const struct tide_shape *q = input_shape(graph, node, 0), *k = input_shape(graph, node, 1);
    enum tide_status st = require_rank(node, "input 0 (q)", q, 4, 4, "[B, H, Sq, D]", err);
    if (st == TIDE_OK)
        st = require_rank(node, "input 1 (k)", k, 4, 4, "[B, H, Sk, D]", err);
    if (st != TIDE_OK)
        return st;
    if (k->dims[0] != q->dims[0] || k->dims[1] != q->dims[1] || k->dims[3] != q->dims[3])
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 1 (k) has shape %s, wants [B, H, Sk, D] with the B, H and D "
                               "of input 0 (q) %s",
                               shape_text(k).s, shape_text(q).s);
    st = expect_input_shape(graph, node, 2, "v", k, err, "the shape of input 1 (k)");
    if (st != TIDE_OK)
        return st;
    if (q->dims[3] == 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 0 (q) %s has head dimension D 0, wants at least 1",
                               shape_text(q).s);
    if (k->dims[2] == 0)
        return tide_node_error(err, TIDE_INVALID, node,
                               "input 1 (k) %s has no keys (Sk is 0), wants at least 1",
                               shape_text(k).s);
    if (attr(node, "causal")->b && q->dims[2] != k->dims[2])
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"causal\" is set, so input 0 (q) %s and input 1 (k) %s "
                               "must have the same sequence length (Sq %" PRId64 ", Sk %" PRId64
                               ")",
                               shape_text(q).s, shape_text(k).s, q->dims[2], k->dims[2]);
    double scale = attr(node, "scale")->f;
    if (scale != 0 && !(isfinite(scale) && scale > 0))
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"scale\" is %g, wants 0 (for 1/sqrt(D)) or a finite "
                               "value > 0",
                               scale);
    return TIDE_OK;
}

/* Attention(q, k, v) -> o [B, H, Sq, D], lse [B, H, Sq]. */
enum tide_status tide__infer_attention(struct tide_graph *graph, struct tide_node *node,
                                       struct tide_error *err)
{
    enum tide_status st = check_attention(graph, node, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape *q = input_shape(graph, node, 0);
    struct tide_shape rows = tide_shape_make(3, q->dims);
    st = tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, q, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_FLOAT32, &rows, err);
    return st;
}

/* AttentionGrad(q, k, v, o, lse, do) -> dq, dk, dv: o and do have q's shape, lse [B, H, Sq]. */
enum tide_status tide__infer_attention_grad(struct tide_graph *graph, struct tide_node *node,
                                            struct tide_error *err)
{
    enum tide_status st = check_attention(graph, node, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_shape *q = input_shape(graph, node, 0), *k = input_shape(graph, node, 1);
    struct tide_shape rows = tide_shape_make(3, q->dims);
    st = expect_input_shape(graph, node, 3, "o", q, err, "the shape of input 0 (q)");
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 4, "lse", &rows, err, "one per row of input 0 (q) %s",
                                shape_text(q).s);
    if (st == TIDE_OK)
        st = expect_input_shape(graph, node, 5, "do", q, err, "the shape of input 0 (q)");
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 0, TIDE_DTYPE_FLOAT32, q, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 1, TIDE_DTYPE_FLOAT32, k, err);
    if (st == TIDE_OK)
        st = tide__set_output(graph, node, 2, TIDE_DTYPE_FLOAT32, k, err);
    return st;
}
