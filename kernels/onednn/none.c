/* SPDX-License-Identifier: MIT */
/*
 * none.c: the oneDNN entry points of a build without oneDNN (libdnnl-dev
 * was not found when CMake configured). oneDNN is never available, so the
 * CPU kernels' own convolutions, pools and batch norms (kernels/cpu/conv.c,
 * pool.c, norm.c) run every case.
 */
#include "kernels/onednn/onednn.h"

bool tide__onednn_enabled(void)
{
    return false;
}

void tide_cpu_kernels_use_onednn(bool on)
{
    (void)on; /* nothing to turn on */
}

bool tide_cpu_kernels_onednn_available(void)
{
    return false;
}

uint64_t tide_cpu_kernels_onednn_runs(enum tide_op op)
{
    (void)op;
    return 0;
}

bool tide__onednn_conv_workspace(enum tide_op op, const struct tide__kernel_conv *g,
                                 uint64_t slot_limit, uint64_t *bytes)
{
    (void)op, (void)g, (void)slot_limit, (void)bytes;
    return false;
}

enum tide_status tide__onednn_conv_run(const struct tide_kernel_args *args,
                                       const struct tide__kernel_conv *g, uint64_t slot_limit,
                                       bool *ran, struct tide_error *err)
{
    (void)args, (void)g, (void)slot_limit, (void)err;
    *ran = false;
    return TIDE_OK;
}

void tide_cpu_kernels_onednn_everywhere(bool on)
{
    (void)on; /* nothing to send there */
}

bool tide__onednn_pool_workspace(const struct tide_node *node, const struct tide_shape *x,
                                 const struct tide_shape *y, uint64_t *bytes)
{
    (void)node, (void)x, (void)y, (void)bytes;
    return false;
}

enum tide_status tide__onednn_pool_run(const struct tide_kernel_args *args,
                                       const struct tide_shape *x, const struct tide_shape *y,
                                       bool *ran, struct tide_error *err)
{
    (void)args, (void)x, (void)y, (void)err;
    *ran = false;
    return TIDE_OK;
}

bool tide__onednn_batch_norm_workspace(const struct tide_node *node, const struct tide_shape *x,
                                       uint64_t *bytes)
{
    (void)node, (void)x, (void)bytes;
    return false;
}

enum tide_status tide__onednn_batch_norm_run(const struct tide_kernel_args *args, bool *ran,
                                             struct tide_error *err)
{
    (void)args, (void)err;
    *ran = false;
    return TIDE_OK;
}
