/* SPDX-License-Identifier: MIT */
/*
 * onednn.h: Conv2D and its two gradients, MaxPool2D, AvgPool2D,
 * GlobalAvgPool and the average pools' gradients, and BatchNorm and its
 * gradient, through oneDNN on the CPU backend.
 *
 * The CPU kernels (kernels/cpu/conv.c, pool.c, norm.c) ask this module
 * first: when tide was built with oneDNN (Debian's libdnnl-dev), oneDNN is
 * not turned off (TIDE_CPU_ONEDNN=0 in the environment, or
 * tide_cpu_kernels_use_onednn), oneDNN has a primitive for the geometry, and
 * the op's rule picks it, the op runs as oneDNN primitives; otherwise the
 * kernel runs its own code, the fallback. The rules depend on the shapes
 * only: convolutions go to oneDNN where its workspace fits the caller's
 * limit (conv.c); pooling and BatchNorm only for the shapes where oneDNN
 * measured faster than tide's kernels (pool.c, norm.c), or for every shape
 * under TIDE_CPU_ONEDNN=all or tide_cpu_kernels_onednn_everywhere. Without
 * oneDNN at build time, none.c answers "not available" to every question, so
 * the fallback runs everything.
 *
 * Every *_workspace function creates the primitives and keeps them in the
 * cache: the memory plan asks every node for its workspace, so that is the
 * compile-time hook; a kernel called without a plan creates them on first
 * use. Where oneDNN is not chosen, the workspace functions return false and
 * the kernel's own workspace (0 for pooling and BatchNorm) stands.
 *
 * Example usage (what conv.c does; pool.c and norm.c alike):
 *
 *     uint64_t ws;
 *     if (tide__onednn_conv_workspace(node->op, &geometry, limit, &ws)) // at plan time
 *         return ws;
 *     bool ran;
 *     st = tide__onednn_conv_run(args, &geometry, limit, &ran, err);      // in the kernel
 *     if (st != TIDE_OK || ran)
 *         return st;
 */
#ifndef TIDE_KERNELS_ONEDNN_H
#define TIDE_KERNELS_ONEDNN_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/check.h"
#include "kernels/kernels.h"

/* Whether oneDNN runs the ops it supports (built with it, and turned on). */
bool tide__onednn_enabled(void);

/*
 * The workspace that oneDNN's primitives for op (Conv2D, Conv2DBackpropInput
 * or Conv2DBackpropFilter) of geometry g need at the pool's thread count:
 * the filter gradient's partial sums, then per thread a piece's scratchpad
 * and blocked copies (see conv.c), no more than slot_limit bytes (the
 * fallback's per thread). Returns false, and leaves *bytes alone, when
 * oneDNN is off or has no primitive for the case within the limit. Creates the
 * primitives and keeps them in the cache: this is the compile-time hook (the
 * memory plan asks every node for its workspace).
 */
bool tide__onednn_conv_workspace(enum tide_op op, const struct tide__kernel_conv *g,
                                 uint64_t slot_limit, uint64_t *bytes);

/*
 * Runs args->node's convolution through oneDNN, its batch cut into pieces
 * run on the kernels' pool, on as many threads as the pool has and the
 * workspace has room for; slot_limit as for the workspace, so the choice is
 * the plan's. Sets *ran to false, and returns TIDE_OK, when
 * oneDNN is off, has no primitive, or the workspace was not planned for it:
 * the caller then runs its own kernel. A failure of oneDNN while executing
 * returns TIDE_INTERNAL naming the call and oneDNN's status in err.
 */
enum tide_status tide__onednn_conv_run(const struct tide_kernel_args *args,
                                       const struct tide__kernel_conv *g, uint64_t slot_limit,
                                       bool *ran, struct tide_error *err);

/*
 * The workspace of pooling node (MaxPool2D, AvgPool2D, AvgPool2DGrad,
 * GlobalAvgPool or GlobalAvgPoolGrad, the global ones as an average pool
 * whose window is the whole plane) from x [N, C, H, W] (its input, or its
 * gradient's output) to y (its output, or its gradient's input), when
 * oneDNN runs it: per thread that can work at once, the largest scratchpad
 * of a piece's primitive, and for MaxPool2D the piece's max positions (which
 * the run turns into the argmax). Returns false, and leaves *bytes alone,
 * when oneDNN is off, has no primitive for the case, or is not chosen for
 * these shapes (pool.c says which it is chosen for).
 */
bool tide__onednn_pool_workspace(const struct tide_node *node, const struct tide_shape *x,
                                 const struct tide_shape *y, uint64_t *bytes);

/*
 * Runs args->node's pooling (x and y as for the workspace) through oneDNN,
 * its batch cut into pieces of images run on the kernels' pool; for
 * MaxPool2D, y and the argmax (output 1) get the bits of tide's kernel.
 * Sets *ran to false, and returns TIDE_OK, when oneDNN is off, has no
 * primitive, is not chosen for the shapes, or the workspace was not planned
 * for it: the caller then runs its own kernel. A failure of oneDNN while
 * executing returns TIDE_INTERNAL naming the call and oneDNN's status in
 * err.
 */
enum tide_status tide__onednn_pool_run(const struct tide_kernel_args *args,
                                       const struct tide_shape *x, const struct tide_shape *y,
                                       bool *ran, struct tide_error *err);

/*
 * The workspace of node (BatchNorm or BatchNormGrad) over x [N, C, H, W] or
 * [N, C], when oneDNN runs it: the primitive's scratchpad, and for the
 * gradient the variance oneDNN takes in place of inv_std. Returns false,
 * and leaves *bytes alone, when oneDNN is off, has no primitive, or is not
 * chosen for these shapes (norm.c says which).
 */
bool tide__onednn_batch_norm_workspace(const struct tide_node *node, const struct tide_shape *x,
                                       uint64_t *bytes);

/*
 * Runs args->node's BatchNorm or BatchNormGrad through oneDNN; *ran, the
 * return value and err as for tide__onednn_pool_run.
 */
enum tide_status tide__onednn_batch_norm_run(const struct tide_kernel_args *args, bool *ran,
                                             struct tide_error *err);

#endif /* TIDE_KERNELS_ONEDNN_H */
