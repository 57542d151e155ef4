/* SPDX-License-Identifier: MIT */
/*
 * onednn.h: Conv2D and its two gradients through oneDNN on the CPU backend.
 *
 * The CPU kernels of kernels/cpu/conv.c ask this module first: when tide was
 * built with oneDNN (Debian's libdnnl-dev), oneDNN is not turned off
 * (TIDE_CPU_ONEDNN=0 in the environment, or tide_cpu_kernels_use_onednn), and
 * oneDNN has a primitive for the geometry, the convolution runs as one oneDNN
 * primitive; otherwise conv.c runs its own im2col + sgemm kernel, the
 * fallback. Without oneDNN at build time, none.c answers "not available" to
 * every question, so the fallback runs everything.
 *
 * Example usage (what conv.c does):
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

/* Whether oneDNN runs the convolutions it supports (built with it, and turned on). */
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

#endif /* TIDE_KERNELS_ONEDNN_H */
