/* SPDX-License-Identifier: MIT */
/*
 * check.c: what the CPU and CUDA kernels assume about their arguments, and
 * their shared geometry (see check.h). Every assert here restates a rule of
 * graph/infer.c or a promise of the executor; none can fail on a validated
 * graph.
 */
#include "kernels/check.h"

#include <assert.h>
#include <math.h>

int32_t tide__kernel_axis(int64_t axis, const struct tide_shape *shape)
{
    int64_t a = axis < 0 ? axis + shape->rank : axis;
    assert(a >= 0 && a < shape->rank);
    return (int32_t)a;
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

void tide__kernel_same_size(const struct tide_kernel_args *args, uint32_t i)
{
    assert(i < args->n_inputs && args->n_outputs > 0);
    assert(args->inputs[i].nbytes == args->outputs[0].nbytes);
    (void)args;
    (void)i;
}

size_t tide__kernel_element_size(const struct tide_kernel_args *args)
{
    size_t size = tide_dtype_size(args->outputs[0].dtype);
    assert(size > 0);
    return size;
}

void tide__kernel_read_pair(const struct tide_node *node, int k, const int64_t def[2],
                            int64_t out[2])
{
    const struct tide_attr_value *a = &node->attrs[k];
    if (a->ints.n == 0 && def) {
        out[0] = def[0];
        out[1] = def[1];
        return;
    }
    assert(a->ints.n == 2);
    out[0] = a->ints.v[0];
    out[1] = a->ints.v[1];
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

void tide__kernel_pool_setup(const struct tide_node *node, const struct tide_shape *x,
                             const struct tide_shape *y, struct tide__kernel_pool *p)
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
    default:
        assert(node->op == TIDE_OP_AVG_POOL2D_GRAD);
        ksize_k = TIDE_ATTR_AVG_POOL2D_GRAD_ksize;
        strides_k = TIDE_ATTR_AVG_POOL2D_GRAD_strides;
        pads_k = TIDE_ATTR_AVG_POOL2D_GRAD_pads;
        break;
    }
    static const int64_t zeros[2] = {0, 0};
    int64_t ksize[2], strides[2], pads[2];
    tide__kernel_read_pair(node, ksize_k, NULL, ksize);
    tide__kernel_read_pair(node, strides_k, ksize, strides);
    tide__kernel_read_pair(node, pads_k, zeros, pads);
    assert(x->rank == 4 && y->rank == 4 && x->dims[0] == y->dims[0] && x->dims[1] == y->dims[1]);
    *p = (struct tide__kernel_pool){
        .planes = x->dims[0] * x->dims[1],
        .h = x->dims[2],
        .w = x->dims[3],
        .oh = y->dims[2],
        .ow = y->dims[3],
        .kh = ksize[0],
        .kw = ksize[1],
        .sh = strides[0],
        .sw = strides[1],
        .ph = pads[0],
        .pw = pads[1],
    };
#ifndef NDEBUG
    int64_t oh = -1, ow = -1;
    assert(p->ph < p->kh && p->pw < p->kw);
    assert(tide__kernel_window_axis(p->h, p->kh, p->sh, p->ph, &oh) && oh == p->oh);
    assert(tide__kernel_window_axis(p->w, p->kw, p->sw, p->pw, &ow) && ow == p->ow);
#endif
}

void tide__kernel_conv_setup(const struct tide_node *node, const struct tide_shape *x,
                             const struct tide_shape *w, const struct tide_shape *y,
                             struct tide__kernel_conv *cv)
{
    static const int64_t ones[2] = {1, 1}, zeros[2] = {0, 0};
    int strides_k, pads_k, group_k, dilations_k;
    switch (node->op) {
    case TIDE_OP_CONV2D:
        strides_k = TIDE_ATTR_CONV2D_strides;
        pads_k = TIDE_ATTR_CONV2D_pads;
        group_k = TIDE_ATTR_CONV2D_group;
        dilations_k = TIDE_ATTR_CONV2D_dilations;
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        strides_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides;
        pads_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads;
        group_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_group;
        dilations_k = TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations;
        break;
    default:
        assert(node->op == TIDE_OP_CONV2D_BACKPROP_FILTER);
        strides_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides;
        pads_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads;
        group_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_group;
        dilations_k = TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations;
        break;
    }
    int64_t strides[2], pads[2], dilations[2];
    tide__kernel_read_pair(node, strides_k, ones, strides);
    tide__kernel_read_pair(node, pads_k, zeros, pads);
    tide__kernel_read_pair(node, dilations_k, ones, dilations);
    assert(dilations[0] >= 1 && dilations[1] >= 1);
    int64_t group = node->attrs[group_k].i;
    assert(x->rank == 4 && w->rank == 4 && y->rank == 4 && group >= 1);
    assert(x->dims[1] % group == 0 && y->dims[1] % group == 0 && x->dims[1] / group == w->dims[1]);
    *cv = (struct tide__kernel_conv){
        .n = x->dims[0],
        .c = x->dims[1],
        .h = x->dims[2],
        .w = x->dims[3],
        .k = w->dims[0],
        .r = w->dims[2],
        .s = w->dims[3],
        .oh = y->dims[2],
        .ow = y->dims[3],
        .sh = strides[0],
        .sw = strides[1],
        .ph = pads[0],
        .pw = pads[1],
        .group = group,
        /*
         * A single tap reads the same cells at any dilation: 1 there lets
         * every backend see the dense case (cuDNN takes ints; oneDNN's
         * primitives are cached by this geometry).
         */
        .dh = w->dims[2] == 1 ? 1 : dilations[0],
        .dw = w->dims[3] == 1 ? 1 : dilations[1],
    };
#ifndef NDEBUG
    /* infer bounded the dilated windows by the padded input, so these spans do not overflow. */
    int64_t oh = -1, ow = -1;
    assert(y->dims[0] == cv->n && y->dims[1] == cv->k);
    assert(cv->r < 1 || cv->r - 1 <= (INT64_MAX - 1) / cv->dh);
    assert(cv->s < 1 || cv->s - 1 <= (INT64_MAX - 1) / cv->dw);
    assert(tide__kernel_window_axis(cv->h, (cv->r - 1) * cv->dh + 1, cv->sh, cv->ph, &oh) &&
           oh == cv->oh);
    assert(tide__kernel_window_axis(cv->w, (cv->s - 1) * cv->dw + 1, cv->sw, cv->pw, &ow) &&
           ow == cv->ow);
#endif
}

double tide__kernel_reduce_mask(const struct tide_kernel_args *args, int k, bool *reduced)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    const struct tide_attr_value *axes = &args->node->attrs[k];
    assert(axes->ints.n >= 0 && axes->ints.n <= TIDE_MAX_LIST);
    for (int32_t d = 0; d < xs->rank; d++)
        reduced[d] = axes->ints.n == 0;
    for (int32_t i = 0; i < axes->ints.n; i++) {
        int32_t axis = tide__kernel_axis(axes->ints.v[i], xs);
        assert(!reduced[axis]);
        reduced[axis] = true;
    }
    double count = 1;
    for (int32_t d = 0; d < xs->rank; d++) {
        if (reduced[d])
            count *= (double)xs->dims[d];
    }
    return count;
}

void tide__kernel_sum_to_shape_mask(const struct tide_kernel_args *args, bool *reduced)
{
    const struct tide_shape *xs = &args->inputs[0].shape, *ts = &args->outputs[0].shape;
    assert(ts->rank <= xs->rank);
    for (int32_t d = 0; d < xs->rank; d++) {
        int32_t t = d - (xs->rank - ts->rank);
        int64_t dim = t >= 0 ? ts->dims[t] : 1;
        assert(dim == xs->dims[d] || dim == 1);
        reduced[d] = dim != xs->dims[d];
    }
}

int64_t tide__kernel_reduce_output(const struct tide_kernel_args *args, const bool *reduced)
{
    const struct tide_shape *xs = &args->inputs[0].shape;
    int64_t kept = 1;
    for (int32_t d = 0; d < xs->rank; d++) {
        if (!reduced[d])
            kept *= xs->dims[d];
    }
    int64_t n_out = tide_shape_numel(&args->outputs[0].shape);
    assert(n_out == kept);
    (void)kept;
    return n_out;
}

int32_t tide__kernel_concat_axis(const struct tide_kernel_args *args)
{
    const struct tide_shape *ys = &args->outputs[0].shape;
    int32_t axis = tide__kernel_axis(args->node->attrs[TIDE_ATTR_CONCAT_axis].i, ys);
#ifndef NDEBUG
    int64_t sum = 0;
    for (uint32_t i = 0; i < args->n_inputs; i++) {
        const struct tide_shape *xs = &args->inputs[i].shape;
        assert(xs->rank == ys->rank);
        for (int32_t d = 0; d < ys->rank; d++)
            assert(d == axis || xs->dims[d] == ys->dims[d]);
        sum += xs->dims[axis];
    }
    assert(sum == ys->dims[axis]);
#endif
    return axis;
}

void tide__kernel_check_box(const struct tide_kernel_args *args, int k,
                            const struct tide_shape *outer, const struct tide_shape *inner)
{
#ifndef NDEBUG
    const struct tide_attr_value *begin = &args->node->attrs[k];
    assert(begin->ints.n == outer->rank && inner->rank == outer->rank);
    for (int32_t d = 0; d < outer->rank; d++) {
        int64_t b = begin->ints.v[d];
        assert(b >= 0 && b <= outer->dims[d] && inner->dims[d] <= outer->dims[d] - b);
    }
#else
    (void)args;
    (void)k;
    (void)outer;
    (void)inner;
#endif
}

void tide__kernel_bmm_setup(const struct tide_kernel_args *args, struct tide__kernel_bmm *g)
{
    const struct tide_shape *as = &args->inputs[0].shape, *bs = &args->inputs[1].shape;
    const struct tide_shape *ys = &args->outputs[0].shape;
    int32_t ra = as->rank, rb = bs->rank, ry = ys->rank;
    assert(ra >= 2 && rb >= 2 && ry >= 2 && ry == (ra > rb ? ra : rb));
    g->ta = args->node->attrs[TIDE_ATTR_BATCH_MATMUL_transpose_a].b;
    g->tb = args->node->attrs[TIDE_ATTR_BATCH_MATMUL_transpose_b].b;
    g->m = as->dims[ra - (g->ta ? 1 : 2)];
    g->k = as->dims[ra - (g->ta ? 2 : 1)];
    g->n = bs->dims[rb - (g->tb ? 2 : 1)];
    assert(bs->dims[rb - (g->tb ? 1 : 2)] == g->k);
    assert(ys->dims[ry - 2] == g->m && ys->dims[ry - 1] == g->n);
    g->lda = as->dims[ra - 1];
    g->ldb = bs->dims[rb - 1];
    g->batch_rank = ry - 2;
    g->n_batch = 1;
    /* Strides of each operand's batch dims, aligned with y's from the end. */
    int64_t a_stride = g->m * g->k, b_stride = g->k * g->n, a_entries = 1, b_entries = 1;
    for (int32_t d = g->batch_rank - 1; d >= 0; d--) {
        int32_t da = d - (ry - ra), db = d - (ry - rb);
        int64_t dim_a = da >= 0 ? as->dims[da] : 1, dim_b = db >= 0 ? bs->dims[db] : 1;
        g->batch[d] = ys->dims[d];
        assert((dim_a == g->batch[d] || dim_a == 1) && (dim_b == g->batch[d] || dim_b == 1));
        g->a_strides[d] = dim_a == 1 ? 0 : a_stride;
        g->b_strides[d] = dim_b == 1 ? 0 : b_stride;
        a_stride *= dim_a;
        b_stride *= dim_b;
        a_entries *= dim_a;
        b_entries *= dim_b;
        g->n_batch *= g->batch[d];
    }
    g->a_step = a_entries == g->n_batch ? g->m * g->k : a_entries == 1 ? 0 : -1;
    g->b_step = b_entries == g->n_batch ? g->k * g->n : b_entries == 1 ? 0 : -1;
}

void tide__kernel_bmm_offsets(const struct tide__kernel_bmm *g, int64_t p, int64_t *a_offset,
                              int64_t *b_offset)
{
    int64_t a = 0, b = 0;
    for (int32_t d = g->batch_rank - 1; d >= 0; d--) {
        int64_t index = p % g->batch[d];
        p /= g->batch[d];
        a += index * g->a_strides[d];
        b += index * g->b_strides[d];
    }
    *a_offset = a;
    *b_offset = b;
}

void tide__kernel_transpose_setup(const struct tide_kernel_args *args,
                                  struct tide__kernel_transpose *t)
{
    const struct tide_shape *xs = &args->inputs[0].shape, *ys = &args->outputs[0].shape;
    const struct tide_attr_value *perm = &args->node->attrs[TIDE_ATTR_TRANSPOSE_perm];
    int32_t rank = xs->rank;
    assert(perm->ints.n == rank && ys->rank == rank);
    assert(args->inputs[0].dtype == args->outputs[0].dtype);
    (void)ys;
#ifndef NDEBUG
    uint32_t seen = 0;
    for (int32_t i = 0; i < rank; i++) {
        assert(perm->ints.v[i] >= 0 && perm->ints.v[i] < rank);
        assert(!(seen & (1u << perm->ints.v[i])));
        seen |= 1u << perm->ints.v[i];
    }
#endif
    int64_t stride[TIDE_MAX_RANK], s = 1;
    int32_t compact[TIDE_MAX_RANK], kept = 0; /* the index of each axis of x among those not 1 */
    for (int32_t d = rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= xs->dims[d];
    }
    for (int32_t d = 0; d < rank; d++)
        compact[d] = xs->dims[d] == 1 ? -1 : kept++;
    t->rank = 0;
    int32_t previous = -2;
    for (int32_t i = 0; i < rank; i++) {
        int64_t d = perm->ints.v[i];
        assert(d >= 0 && d < rank && ys->dims[i] == xs->dims[d]);
        if (xs->dims[d] == 1)
            continue;
        if (t->rank > 0 && compact[d] == previous + 1) {
            /* The next axis of x follows this one in y too: one axis, the inner stride. */
            t->dims[t->rank - 1] *= xs->dims[d];
            t->strides[t->rank - 1] = stride[d];
        } else {
            t->dims[t->rank] = xs->dims[d];
            t->strides[t->rank] = stride[d];
            t->rank++;
        }
        previous = compact[d];
    }
    if (t->rank == 0) {
        t->rank = 1;
        t->dims[0] = 1;
        t->strides[0] = 1;
    }
}

void tide__kernel_batch_setup(const struct tide_kernel_args *args, uint32_t x_index,
                              struct tide__kernel_batch *b)
{
    const struct tide_shape *xs = &args->inputs[x_index].shape;
    assert(xs->rank == 4 || xs->rank == 2);
    b->n = xs->dims[0];
    b->c = xs->dims[1];
    b->hw = xs->rank == 4 ? xs->dims[2] * xs->dims[3] : 1;
#ifndef NDEBUG
    for (uint32_t i = 0; i < args->n_inputs; i++)
        assert(tide_shape_numel(&args->inputs[i].shape) == b->c ||
               args->inputs[i].nbytes == args->inputs[x_index].nbytes);
    for (uint32_t i = 0; i < args->n_outputs; i++)
        assert(tide_shape_numel(&args->outputs[i].shape) == (i == 0 ? b->n * b->c * b->hw : b->c));
#endif
}

void tide__kernel_like_variable(const struct tide_kernel_args *args)
{
    for (uint32_t i = 1; i < args->n_inputs; i++)
        assert(args->inputs[i].nbytes == args->inputs[0].nbytes);
    (void)args;
}

void tide__kernel_gather_elements_setup(const struct tide_kernel_args *args,
                                        struct tide__kernel_gather_elements *g)
{
    bool grad = args->node->op == TIDE_OP_GATHER_ELEMENTS_GRAD;
    assert(grad || args->node->op == TIDE_OP_GATHER_ELEMENTS);
    const struct tide_shape *is = &args->inputs[1].shape;
    const struct tide_shape *ds = grad ? &args->outputs[0].shape : &args->inputs[0].shape;
    const struct tide_attr_value *attrs = args->node->attrs;
    g->axis =
        (int32_t)attrs[grad ? TIDE_ATTR_GATHER_ELEMENTS_GRAD_axis : TIDE_ATTR_GATHER_ELEMENTS_axis]
            .i;
    g->ignore_index = attrs[grad ? TIDE_ATTR_GATHER_ELEMENTS_GRAD_ignore_index
                                 : TIDE_ATTR_GATHER_ELEMENTS_ignore_index]
                          .i;
    g->rank = is->rank;
    assert(ds->rank == is->rank && g->axis >= 0 && g->axis < g->rank);
    assert(tide_shape_equal(grad ? &args->inputs[0].shape : &args->outputs[0].shape, is));
    int64_t istride = 1, dstride = 1;
    g->columns = 1;
    for (int32_t i = g->rank - 1; i >= 0; i--) {
        assert(i == g->axis || is->dims[i] <= ds->dims[i]);
        g->idims[i] = is->dims[i];
        g->ddims[i] = ds->dims[i];
        g->istrides[i] = istride;
        g->dstrides[i] = dstride;
        istride *= is->dims[i];
        dstride *= ds->dims[i];
        if (i != g->axis)
            g->columns *= is->dims[i];
    }
    g->n = is->dims[g->axis];
    g->d = ds->dims[g->axis];
}

void tide__kernel_gather_elements_column(const struct tide__kernel_gather_elements *g, int64_t c,
                                         int64_t *index_offset, int64_t *data_offset)
{
    int64_t io = 0, dof = 0;
    for (int32_t i = g->rank - 1; i >= 0; i--) {
        if (i == g->axis)
            continue;
        int64_t at = c % g->idims[i];
        c /= g->idims[i];
        io += at * g->istrides[i];
        dof += at * g->dstrides[i];
    }
    *index_offset = io;
    *data_offset = dof;
}

uint64_t tide__kernel_index_workspace(const struct tide_node *node, int64_t n_ids)
{
    if (node->op == TIDE_OP_GATHER_GRAD) {
        /* Nothing to sum into (the per-tensor byte limit bounds the rows otherwise). */
        if (node->n_outputs < 1 || !node->outputs || tide_shape_numel(&node->outputs[0].shape) == 0)
            return 0;
        return ((uint64_t)node->attrs[TIDE_ATTR_GATHER_GRAD_num_rows].i + 1 + (uint64_t)n_ids) *
               sizeof(int64_t);
    }
    if (node->op == TIDE_OP_MOE_ROUTE)
        return (uint64_t)node->attrs[TIDE_ATTR_MOE_ROUTE_experts].i * sizeof(int64_t);
    return 0;
}

void tide__kernel_attention_shape(const struct tide_node *node, const struct tide_shape *q,
                                  const struct tide_shape *k, struct tide__kernel_attention *a)
{
    bool grad = node->op == TIDE_OP_ATTENTION_GRAD;
    assert(grad || node->op == TIDE_OP_ATTENTION);
    assert(q->rank == 4 && k->rank == 4 && k->dims[0] == q->dims[0] && k->dims[1] == q->dims[1] &&
           k->dims[3] == q->dims[3] && q->dims[3] > 0 && k->dims[2] > 0);
    a->heads = q->dims[0] * q->dims[1];
    a->sq = q->dims[2];
    a->sk = k->dims[2];
    a->d = q->dims[3];
    a->causal = node->attrs[grad ? TIDE_ATTR_ATTENTION_GRAD_causal : TIDE_ATTR_ATTENTION_causal].b;
    double scale = node->attrs[grad ? TIDE_ATTR_ATTENTION_GRAD_scale : TIDE_ATTR_ATTENTION_scale].f;
    a->scale = scale != 0 ? scale : 1.0 / sqrt((double)a->d);
    assert(!a->causal || a->sq == a->sk);
    assert(isfinite(a->scale) && a->scale > 0);
}

void tide__kernel_attention_setup(const struct tide_kernel_args *args,
                                  struct tide__kernel_attention *a)
{
    const struct tide_shape *q = &args->inputs[0].shape, *k = &args->inputs[1].shape;
    tide__kernel_attention_shape(args->node, q, k, a);
    struct tide_shape rows = tide_shape_make(3, q->dims);
    assert(tide_shape_equal(&args->inputs[2].shape, k));
    if (args->node->op == TIDE_OP_ATTENTION) {
        assert(args->n_inputs == 3 && args->n_outputs == 2);
        assert(tide_shape_equal(&args->outputs[0].shape, q));
        assert(tide_shape_equal(&args->outputs[1].shape, &rows));
    } else {
        assert(args->n_inputs == 6 && args->n_outputs == 3);
        assert(tide_shape_equal(&args->inputs[3].shape, q));
        assert(tide_shape_equal(&args->inputs[4].shape, &rows));
        assert(tide_shape_equal(&args->inputs[5].shape, q));
        assert(tide_shape_equal(&args->outputs[0].shape, q));
        assert(tide_shape_equal(&args->outputs[1].shape, k));
        assert(tide_shape_equal(&args->outputs[2].shape, k));
    }
    (void)rows;
}
