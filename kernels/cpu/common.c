/* SPDX-License-Identifier: MIT */
/*
 * common.c: helpers shared by the CPU kernels: the workspace guard, the BLAS
 * index limit and a deterministic row sum.
 * See cpu-impl.h for what each one promises.
 */
#include "kernels/cpu/cpu-impl.h"

#include <inttypes.h>
#include <limits.h>

enum tide_status tide__cpu_expect_workspace(const struct tide_kernel_args *args, uint64_t need,
                                            struct tide_error *err)
{
    if (need == 0 || (args->workspace && args->workspace_bytes >= need))
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, args->node,
                           "the kernel needs %" PRIu64 " bytes of workspace, but got %" PRIu64,
                           need, args->workspace ? args->workspace_bytes : 0);
}

bool tide__cpu_fits_blas_int(int64_t a, int64_t b, int64_t c)
{
    return a >= 0 && a <= INT_MAX && b >= 0 && b <= INT_MAX && c >= 0 && c <= INT_MAX;
}

double tide__cpu_sum_row(const float *x, int64_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += x[j];
        s1 += x[j + 1];
        s2 += x[j + 2];
        s3 += x[j + 3];
    }
    for (; j < n; j++)
        s0 += x[j];
    return (s0 + s1) + (s2 + s3);
}
