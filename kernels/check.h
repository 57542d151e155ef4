/* SPDX-License-Identifier: MIT */
/*
 * check.h: what every backend's kernels assume about their arguments, and
 * the geometry they share.
 *
 * A kernel runs only on a node of a graph that graph/infer.c has validated,
 * with views the executor built from that node's inferred shapes. So a
 * kernel does not re-derive the shape rules: what infer guarantees (ranks,
 * matching dims, axes in range, windows that fit, output sizes) and what
 * the executor guarantees (views of the inferred sizes, the planned
 * workspace) is asserted, once, by the helpers here, and a kernel returns an
 * error only for what only it can see (data such as a label out of range,
 * a library failure). The asserts cost little and catch a bug in the
 * executor or in infer in debug builds; nothing from the wire reaches them,
 * since infer refuses it first with a message naming the node.
 *
 * The helpers still accept the attribute forms infer normalises away
 * (negative axes, absent strides and pads, empty reduce axes), so a kernel
 * may be called on a hand-built node, as the kernel tests do. The CPU
 * kernels (kernels/cpu) and the host halves of the CUDA kernels
 * (kernels/cuda) call the same functions here: one copy of each rule.
 */
#ifndef TIDE_KERNELS_CHECK_H
#define TIDE_KERNELS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Maps a possibly negative axis onto 0..rank-1 of shape; infer guarantees it is in range. */
int32_t tide__kernel_axis(int64_t axis, const struct tide_shape *shape);

/*
 * Splits shape around axis: outer is the product of the dims before it, len
 * the axis's dim, inner the product of the dims after it.
 */
void tide__kernel_split_axis(const struct tide_shape *shape, int32_t axis, int64_t *outer,
                             int64_t *len, int64_t *inner);

/* Asserts that input i holds as many bytes as output 0 (element-wise kernels). */
void tide__kernel_same_size(const struct tide_kernel_args *args, uint32_t i);

/* The element size of output 0's dtype (never 0 for an inferred node). */
size_t tide__kernel_element_size(const struct tide_kernel_args *args);

/*
 * Reads the [h, w] INTS attribute k of node into out; an empty list takes
 * def (what infer would have written). Infer guarantees two entries.
 */
void tide__kernel_read_pair(const struct tide_node *node, int k, const int64_t def[2],
                            int64_t out[2]);

/*
 * The output extent of a window of k with stride and pad over in:
 * (in + 2 * pad - k) / stride + 1. False when the padded input is smaller
 * than the window or the numbers are out of range.
 */
bool tide__kernel_window_axis(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t *out);

/* A 2-D pool's geometry over planes [h, w] of NCHW (planes = N * C); pads are symmetric. */
struct tide__kernel_pool {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw;
};

/*
 * The geometry of MaxPool2D, AvgPool2D or their gradients, from the node's
 * ksize/strides/pads (defaults as infer writes them) and x [N, C, H, W],
 * y [N, C, OH, OW], which infer made agree.
 */
void tide__kernel_pool_setup(const struct tide_node *node, const struct tide_shape *x,
                             const struct tide_shape *y, struct tide__kernel_pool *p);

/*
 * A 2-D convolution's geometry: x [N, C, H, W], w [K, C / group, R, S],
 * y [N, K, OH, OW]; output channel block g of K / group reads input channel
 * block g of C / group. Filter tap (r, s) of output (oh, ow) reads input
 * (oh * sh - ph + r * dh, ow * sw - pw + s * dw).
 */
struct tide__kernel_conv {
    int64_t n, c, h, w;
    int64_t k, r, s;
    int64_t oh, ow;
    int64_t sh, sw, ph, pw;
    int64_t group;
    int64_t dh, dw; /* dilations; 1 on an axis of one tap (R or S 1), where it is moot */
};

/*
 * The geometry of Conv2D or its two gradients, from the node's strides,
 * pads, group and dilations (defaults as infer writes them) and the three
 * shapes, which infer made agree with the output size formula and the group.
 */
void tide__kernel_conv_setup(const struct tide_node *node, const struct tide_shape *x,
                             const struct tide_shape *w, const struct tide_shape *y,
                             struct tide__kernel_conv *cv);

/*
 * The axes ReduceSum / ReduceMean reduce, from attribute k (axes) of the
 * node: reduced[d] for each axis of input 0; returns the number of elements
 * summed into each output. Empty axes mean every axis; negative axes count
 * from the end (infer writes them sorted and non-negative, each once).
 */
double tide__kernel_reduce_mask(const struct tide_kernel_args *args, int k, bool *reduced);

/*
 * The axes SumToShape reduces: those along which its output (trailing axes
 * aligned with input 0's) was broadcast to input 0.
 */
void tide__kernel_sum_to_shape_mask(const struct tide_kernel_args *args, bool *reduced);

/*
 * The elements of output 0 of a reduction over the axes marked in reduced,
 * asserted to be the product of input 0's kept dims.
 */
int64_t tide__kernel_reduce_output(const struct tide_kernel_args *args, const bool *reduced);

/*
 * Concat's axis, normalised, after asserting that every input matches the
 * output except along it and that their lengths add up to the output's.
 */
int32_t tide__kernel_concat_axis(const struct tide_kernel_args *args);

/*
 * Slice and SliceGrad: asserts that begin (the INTS attribute k) has one
 * entry per axis of outer, and that the box of inner's dims placed at begin
 * lies inside outer.
 */
void tide__kernel_check_box(const struct tide_kernel_args *args, int k,
                            const struct tide_shape *outer, const struct tide_shape *inner);

/*
 * BatchMatMul's geometry: y [batch..., m, n] = op(a) op(b) for each batch
 * entry, a being [..., m, k] ([..., k, m] with ta) and b [..., k, n]
 * ([..., n, k] with tb). Entry p, row-major over y's batch dims, reads the
 * matrices of a and b that tide__kernel_bmm_offsets gives. a_step (b_step) is
 * the offset from one entry's matrix of a (b) to the next when that offset
 * is the same for every entry: a matrix's size when the operand has every
 * batch entry of y, 0 when it has one; -1 when broadcasting makes it vary.
 */
struct tide__kernel_bmm {
    bool ta, tb;
    int64_t m, n, k;
    int64_t lda, ldb; /* row lengths of a and b (their last dims) */
    int64_t n_batch;  /* batch entries of y */
    int32_t batch_rank;
    int64_t batch[TIDE_MAX_RANK];                               /* y's batch dims */
    int64_t a_strides[TIDE_MAX_RANK], b_strides[TIDE_MAX_RANK]; /* per batch dim; 0: broadcast */
    int64_t a_step, b_step;
};

/*
 * The geometry of a BatchMatMul node from its attributes and views, after
 * asserting what infer guarantees: ranks of 2 or more, inner dims that
 * agree, batch dims that broadcast to y's, and y's matrix dims.
 */
void tide__kernel_bmm_setup(const struct tide_kernel_args *args, struct tide__kernel_bmm *g);

/* The element offsets in a and b of batch entry p's matrices. */
void tide__kernel_bmm_offsets(const struct tide__kernel_bmm *g, int64_t p, int64_t *a_offset,
                              int64_t *b_offset);

/*
 * Transpose's geometry: y's elements, row-major over dims, read x at the sum
 * of index * stride over the axes. Axes of 1 are dropped and output axes
 * that stay neighbours in x are merged, so the identity permutation is one
 * axis of stride 1 (a copy) and rank is at least 1 (a scalar is [1]).
 */
struct tide__kernel_transpose {
    int32_t rank;
    int64_t dims[TIDE_MAX_RANK];    /* y's, merged */
    int64_t strides[TIDE_MAX_RANK]; /* x's element stride along each */
};

/*
 * The geometry of a Transpose node, after asserting that perm is a
 * permutation of x's axes and y's shape is x's permuted.
 */
void tide__kernel_transpose_setup(const struct tide_kernel_args *args,
                                  struct tide__kernel_transpose *t);

/* A batch-norm input x [N, C, H, W] or [N, C]: N runs of hw values per channel. */
struct tide__kernel_batch {
    int64_t n, c, hw;
};

/*
 * BatchNorm and BatchNormGrad: the batch geometry of input x_index (x),
 * asserting that every other input and output is [C] or x's shape.
 */
void tide__kernel_batch_setup(const struct tide_kernel_args *args, uint32_t x_index,
                              struct tide__kernel_batch *b);

/* The optimizer updates: asserts that every input holds as many bytes as the variable (input 0). */
void tide__kernel_like_variable(const struct tide_kernel_args *args);

/*
 * GatherGrad and MoeRoute (kernels/cpu/index.c, kernels/cuda/index.c): the
 * scratch bytes of both backends. GatherGrad groups its n_ids ids by table
 * row, num_rows + 1 row starts and n_ids positions as int64; MoeRoute keeps
 * one int64 fill count per expert (n_ids unused). 0 for other ops, and for
 * a GatherGrad whose output is empty.
 */
uint64_t tide__kernel_index_workspace(const struct tide_node *node, int64_t n_ids);

/*
 * GatherElements' and GatherElementsGrad's geometry: indices (y, dy) of shape
 * idims and data (dx) of shape ddims, of one rank, row-major. A column is a
 * position on every axis but axis inside idims; column c's indices lie at
 * its index offset + j * istrides[axis] for j in [0, n), and an index v reads
 * data at its data offset + v * dstrides[axis] (v wrapped into [0, d)).
 */
struct tide__kernel_gather_elements {
    int32_t rank, axis;
    int64_t n;       /* idims[axis] */
    int64_t d;       /* ddims[axis] */
    int64_t columns; /* the product of idims over every axis but axis */
    int64_t ignore_index;
    int64_t idims[TIDE_MAX_RANK], istrides[TIDE_MAX_RANK];
    int64_t ddims[TIDE_MAX_RANK], dstrides[TIDE_MAX_RANK];
};

/*
 * The geometry of a GatherElements (data: input 0) or GatherElementsGrad (dx:
 * output 0) node, after asserting what infer guarantees.
 */
void tide__kernel_gather_elements_setup(const struct tide_kernel_args *args,
                                        struct tide__kernel_gather_elements *g);

/* Column c's first index offset (in indices) and data offset (in data). */
void tide__kernel_gather_elements_column(const struct tide__kernel_gather_elements *g, int64_t c,
                                         int64_t *index_offset, int64_t *data_offset);

/* Attention's geometry: B * H independent heads, each q [Sq, D] against k and v [Sk, D]. */
struct tide__kernel_attention {
    int64_t heads; /* B * H */
    int64_t sq, sk, d;
    bool causal;  /* query i sees keys 0..i (Sq == Sk) */
    double scale; /* the attribute, or 1/sqrt(D) where it is 0 */
};

/*
 * The geometry of Attention or AttentionGrad from its node (causal, scale)
 * and the shapes of q [B, H, Sq, D] and k [B, H, Sk, D], which infer made
 * agree. Used by the workspace sizes too, which see no tensor views.
 */
void tide__kernel_attention_shape(const struct tide_node *node, const struct tide_shape *q,
                                  const struct tide_shape *k, struct tide__kernel_attention *a);

/*
 * Attention(q, k, v) -> o, lse, or AttentionGrad(q, k, v, o, lse, do) ->
 * dq, dk, dv: the geometry, asserting every view's shape against it.
 */
void tide__kernel_attention_setup(const struct tide_kernel_args *args,
                                  struct tide__kernel_attention *a);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CHECK_H */
