/* SPDX-License-Identifier: MIT */
/*
 * common.c: helpers shared by the CPU kernels: guards on views and the
 * workspace, attribute readers, window geometry and a deterministic row sum.
 * See cpu-impl.h for what each one promises.
 */
#include "kernels/cpu/cpu-impl.h"

#include <inttypes.h>
#include <limits.h>

enum tide_status tide__cpu_expect_same_size(const struct tide_kernel_args *args, uint32_t i,
                                            struct tide_error *err)
{
    if (args->inputs[i].nbytes == args->outputs[0].nbytes)
        return TIDE_OK;
    return tide_node_error(err, TIDE_INVALID, args->node,
                           "input %u holds %" PRIu64 " bytes, but output 0 holds %" PRIu64, i,
                           args->inputs[i].nbytes, args->outputs[0].nbytes);
}

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

void tide__cpu_split_axis(const struct tide_shape *shape, int32_t axis, int64_t *outer,
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

enum tide_status tide__cpu_axis(const struct tide_kernel_args *args, const char *attr_name,
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

enum tide_status tide__cpu_read_pair(const struct tide_node *node, int k, const char *name,
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

/* One axis of tide__cpu_window_output; in, k, stride and pad are already range-checked. */
static bool window_axis(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t *out)
{
    if (in < 0 || k < 1 || stride < 1 || pad < 0 || pad > INT32_MAX || in > INT64_MAX / 4)
        return false;
    int64_t padded = in + 2 * pad;
    if (padded < k)
        return false;
    *out = (padded - k) / stride + 1;
    return true;
}

bool tide__cpu_window_output(const struct tide__cpu_window *win, int64_t h, int64_t w, int64_t *oh,
                             int64_t *ow)
{
    return window_axis(h, win->kh, win->sh, win->ph, oh) &&
           window_axis(w, win->kw, win->sw, win->pw, ow);
}
