/* SPDX-License-Identifier: MIT */
/*
 * check.h: argument checks and geometry shared by every backend's kernels.
 *
 * A kernel re-checks its attributes and shapes against each other before it
 * touches memory, and refuses what does not agree with a message naming the
 * node. These checks do not depend on where the data lives, so the CPU
 * kernels (kernels/cpu) and the host halves of the CUDA kernels
 * (kernels/cuda) call the same functions here: one set of rules, one set of
 * messages.
 */
#ifndef TIDE_KERNELS_CHECK_H
#define TIDE_KERNELS_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Maps a possibly negative axis attribute onto 0..rank-1 of shape; refuses
 * one out of range (naming attr_name) with TIDE_INVALID.
 */
enum tide_status tide__kernel_axis(const struct tide_kernel_args *args, const char *attr_name,
                                   int64_t axis, const struct tide_shape *shape, int32_t *out,
                                   struct tide_error *err);

/*
 * Splits shape around axis: outer is the product of the dims before it, len
 * the axis's dim, inner the product of the dims after it.
 */
void tide__kernel_split_axis(const struct tide_shape *shape, int32_t axis, int64_t *outer,
                             int64_t *len, int64_t *inner);

/*
 * Reads the [h, w] INTS attribute k of node into out. An empty list takes
 * def (what infer would have written; NULL: required); otherwise it must hold
 * two entries, each in [min, INT32_MAX]. Refusals name the attribute.
 */
enum tide_status tide__kernel_read_pair(const struct tide_node *node, int k, const char *name,
                                        const int64_t def[2], int64_t min, int64_t out[2],
                                        struct tide_error *err);

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
 * y [N, C, OH, OW]; refuses attributes and shapes that do not agree.
 */
enum tide_status tide__kernel_pool_setup(const struct tide_node *node, const struct tide_shape *x,
                                         const struct tide_shape *y, struct tide__kernel_pool *p,
                                         struct tide_error *err);

/* A 2-D convolution's geometry: x [N, C, H, W], w [K, C, R, S], y [N, K, OH, OW]. */
struct tide__kernel_conv {
    int64_t n, c, h, w;
    int64_t k, r, s;
    int64_t oh, ow;
    int64_t sh, sw, ph, pw;
};

/*
 * The geometry of Conv2D or its two gradients, from the node's strides and
 * pads (defaults as infer writes them) and the three shapes; refuses
 * attributes and shapes that do not agree with the output size formula.
 */
enum tide_status tide__kernel_conv_setup(const struct tide_node *node, const struct tide_shape *x,
                                         const struct tide_shape *w, const struct tide_shape *y,
                                         struct tide__kernel_conv *g, struct tide_error *err);

/*
 * The axes ReduceSum / ReduceMean reduce, from attribute k (axes) of the
 * node: reduced[d] for each axis of input 0, and *count the number of
 * elements summed into each output. Empty axes mean every axis; negative
 * axes count from the end; a repeated or out-of-range axis is refused.
 */
enum tide_status tide__kernel_reduce_mask(const struct tide_kernel_args *args, int k, bool *reduced,
                                          double *count, struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CHECK_H */
