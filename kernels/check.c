/* SPDX-License-Identifier: MIT */
/* check.c: argument checks and geometry shared by the CPU and CUDA kernels (see check.h). */
#include "kernels/check.h"

#include <inttypes.h>

enum tide_status tide__kernel_axis(const struct tide_kernel_args *args, const char *attr_name,
                                   int64_t axis, const struct tide_shape *shape, int32_t *out,
                                   struct tide_error *err)
{
    int64_t rank = shape->rank;
    int64_t a = axis < 0 ? axis + rank : axis;
    if (rank == 0 || a < 0 || a >= rank)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "attribute \"%s\" is %" PRId64 ", out of range for rank %" PRId64,
                               attr_name, axis, rank);
    *out = (int32_t)a;
    return TIDE_OK;
}

void tide__kernel_split_axis(const struct tide_shape *shape, int32_t axis, int64_t *outer,
                             int64_t *len, int64_t *inner)
{
    int64_t o = 1, i = 1;
    for (int32_t d = 0; d < axis; d++)
        o *= shape->dims[d];
    for (int32_t d = axis + 1; d < shape->rank; d++)
        i *= shape->dims[d];
    *outer = o;
    *len = shape->dims[axis];
    *inner = i;
}

enum tide_status tide__kernel_read_pair(const struct tide_node *node, int k, const char *name,
                                        const int64_t def[2], int64_t min, int64_t out[2],
                                        struct tide_error *err)
{
    const struct tide_attr_value *a = &node->attrs[k];
    if (a->ints.n == 0 && def) {
        out[0] = def[0];
        out[1] = def[1];
        return TIDE_OK;
    }
    if (a->ints.n != 2)
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"%s\" has %d entries, wants 2 ([height, width])", name,
                               a->ints.n);
    for (int i = 0; i < 2; i++) {
        if (a->ints.v[i] < min || a->ints.v[i] > INT32_MAX)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" has %" PRId64 " at index %d, wants %" PRId64
                                   " to %" PRId32,
                                   name, a->ints.v[i], i, min, INT32_MAX);
        out[i] = a->ints.v[i];
    }
    return TIDE_OK;
}

bool tide__kernel_window_axis(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t *out)
{
    if (in < 0 || k < 1 || stride < 1 || pad < 0 || pad > INT32_MAX || in > INT64_MAX / 4)
        return false;
    int64_t padded = in + 2 * pad;
    if (padded < k)
        return false;
    *out = (padded - k) / stride + 1;
    return true;
}

enum tide_status tide__kernel_pool_setup(const struct tide_node *node, const struct tide_shape *x,
                                         const struct tide_shape *y, struct tide__kernel_pool *p,
                                         struct tide_error *err)
{
    int ksize_k, strides_k, pads_k;
    switch (node->op) {
    case TIDE_OP_MAX_POOL2D:
        ksize_k = TIDE_ATTR_MAX_POOL2D_ksize;
        strides_k = TIDE_ATTR_MAX_POOL2D_strides;
        pads_k = TIDE_ATTR_MAX_POOL2D_pads;
        break;
    case TIDE_OP_AVG_POOL2D:
        ksize_k = TIDE_ATTR_AVG_POOL2D_ksize;
        strides_k = TIDE_ATTR_AVG_POOL2D_strides;
        pads_k = TIDE_ATTR_AVG_POOL2D_pads;
        break;
    case TIDE_OP_MAX_POOL2D_GRAD:
        ksize_k = TIDE_ATTR_MAX_POOL2D_GRAD_ksize;
        strides_k = TIDE_ATTR_MAX_POOL2D_GRAD_strides;
        pads_k = TIDE_ATTR_MAX_POOL2D_GRAD_pads;
        break;
    case TIDE_OP_AVG_POOL2D_GRAD:
        ksize_k = TIDE_ATTR_AVG_POOL2D_GRAD_ksize;
        strides_k = TIDE_ATTR_AVG_POOL2D_GRAD_strides;
        pads_k = TIDE_ATTR_AVG_POOL2D_GRAD_pads;
        break;
    default:
        return tide_node_error(err, TIDE_INVALID, node, "is not a 2-D pool");
    }
    static const int64_t zeros[2] = {0, 0};
    int64_t ksize[2], strides[2], pads[2];
    enum tide_status st = tide__kernel_read_pair(node, ksize_k, "ksize", NULL, 1, ksize, err);
    if (st == TIDE_OK)
        st = tide__kernel_read_pair(node, strides_k, "strides", ksize, 1, strides, err);
    if (st == TIDE_OK)
        st = tide__kernel_read_pair(node, pads_k, "pads", zeros, 0, pads, err);
    if (st != TIDE_OK)
        return st;
    if (pads[0] >= ksize[0] || pads[1] >= ksize[1])
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"pads\" must be less than \"ksize\" on each axis");
    if (x->rank != 4 || y->rank != 4 || x->dims[0] != y->dims[0] || x->dims[1] != y->dims[1])
        return tide_node_error(err, TIDE_INVALID, node,
                               "wants x [N, C, H, W] and y [N, C, OH, OW]");
    *p = (struct tide__kernel_pool){
        .planes = x->dims[0] * x->dims[1],
        .h = x->dims[2],
        .w = x->dims[3],
        .kh = ksize[0],
        .kw = ksize[1],
        .sh = strides[0],
        .sw = strides[1],
        .ph = pads[0],
        .pw = pads[1],
    };
    if (!tide__kernel_window_axis(p->h, p->kh, p->sh, p->ph, &p->oh) ||
        !tide__kernel_window_axis(p->w, p->kw, p->sw, p->pw, &p->ow) || y->dims[2] != p->oh ||
        y->dims[3] != p->ow)
        return tide_node_error(err, TIDE_INVALID, node,
                               "the shapes of x and y do not agree with ksize, strides and pads");
    return TIDE_OK;
}

enum tide_status tide__kernel_conv_setup(const struct tide_node *node, const struct tide_shape *x,
                                         const struct tide_shape *w, const struct tide_shape *y,
                                         struct tide__kernel_conv *cv, struct tide_error *err)
{
    static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
    int strides_k, pads_k;
    switch (node->op) {
    case TIDE_OP_CONV2D:
        strides_k = TIDE_ATTR_CONV2D_strides;
        pads_k = TIDE_ATTR_CONV2D_pads;
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        strides_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides;
        pads_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads;
        break;
    case TIDE_OP_CONV2D_BACKPROP_FILTER:
        strides_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides;
        pads_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads;
        break;
    default:
        return tide_node_error(err, TIDE_INVALID, node, "is not a convolution");
    }
    int64_t strides[2], pads[2];
    enum tide_status st = tide__kernel_read_pair(node, strides_k, "strides", ones, 1, strides, err);
    if (st == TIDE_OK)
        st = tide__kernel_read_pair(node, pads_k, "pads", zeros, 0, pads, err);
    if (st != TIDE_OK)
        return st;
    if (x->rank != 4 || w->rank != 4 || y->rank != 4 || x->dims[1] != w->dims[1] ||
        w->dims[2] < 1 || w->dims[3] < 1)
        return tide_node_error(err, TIDE_INVALID, node,
                               "wants x [N, C, H, W], w [K, C, R, S] and y [N, K, OH, OW]");
    *cv = (struct tide__kernel_conv){
        .n = x->dims[0],
        .c = x->dims[1],
        .h = x->dims[2],
        .w = x->dims[3],
        .k = w->dims[0],
        .r = w->dims[2],
        .s = w->dims[3],
        .sh = strides[0],
        .sw = strides[1],
        .ph = pads[0],
        .pw = pads[1],
    };
    if (!tide__kernel_window_axis(cv->h, cv->r, cv->sh, cv->ph, &cv->oh) ||
        !tide__kernel_window_axis(cv->w, cv->s, cv->sw, cv->pw, &cv->ow) || y->dims[0] != cv->n ||
        y->dims[1] != cv->k || y->dims[2] != cv->oh || y->dims[3] != cv->ow)
        return tide_node_error(err, TIDE_INVALID, node,
                               "the shapes of x, w and y do not agree with the strides and pads");
    return TIDE_OK;
}

enum tide_status tide__kernel_reduce_mask(const struct tide_kernel_args *args, int k, bool *reduced,
                                          double *count, struct tide_error *err)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    const struct tide_attr_value *axes = &args->node->attrs[k];
    if (axes->ints.n < 0 || axes->ints.n > TIDE_MAX_LIST)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "attribute \"axes\" has %d entries, wants 0 to %d", axes->ints.n,
                               TIDE_MAX_LIST);
    for (int32_t d = 0; d < xs->rank; d++)
        reduced[d] = axes->ints.n == 0;
    for (int32_t i = 0; i < axes->ints.n; i++) {
        int32_t axis;
        enum tide_status st = tide__kernel_axis(args, "axes", axes->ints.v[i], xs, &axis, err);
        if (st != TIDE_OK)
            return st;
        if (reduced[axis])
            return tide_node_error(err, TIDE_INVALID, args->node,
                                   "attribute \"axes\" names axis %d twice", axis);
        reduced[axis] = true;
    }
    *count = 1;
    for (int32_t d = 0; d < xs->rank; d++) {
        if (reduced[d])
            *count *= (double)xs->dims[d];
    }
    return TIDE_OK;
}
