/* SPDX-License-Identifier: MIT */
/*
 * batch.c: the CPU kernel of Transpose.
 *
 * Transpose copies elements by their size (any dtype: float32 and int32 are
 * moved as 4-byte words, never as floats), one output row (the last axis of
 * y, after tide__kernel_transpose_setup merged the axes) at a time, rows
 * spread over the pool. When y's last axis is x's last axis too, a row is
 * contiguous in x and one memcpy; otherwise it is gathered with x's stride.
 */
#include "kernels/cpu/cpu-impl.h"

#include <string.h>

/* ============================================================================
 * Transpose
 * ========================================================================== */

struct transpose_job {
    struct tide__kernel_transpose t;
    const char *x;
    char *y;
    size_t esize;
    int64_t row; /* elements per row of y: its last (merged) axis */
};

/* Gathers n elements of esize bytes from x, stride apart, into y. */
static void gather(char *y, const char *x, int64_t n, int64_t stride, size_t esize)
{
    if (esize == 4) {
        uint32_t *dst = (uint32_t *)y;
        const uint32_t *src = (const uint32_t *)x;
        for (int64_t j = 0; j < n; j++)
            dst[j] = src[j * stride];
        return;
    }
    for (int64_t j = 0; j < n; j++)
        memcpy(y + (size_t)j * esize, x + (size_t)(j * stride) * esize, esize);
}

/* Rows [begin, end) of y. */
static void transpose_rows(const void *ctx, int64_t begin, int64_t end)
{
    const struct transpose_job *j = ctx;
    const struct tide__kernel_transpose *t = &j->t;
    int32_t outer = t->rank - 1;
    int64_t inner_stride = t->strides[outer];
    /* The index of row `begin` along the outer axes, and where it starts in x. */
    int64_t index[TIDE_MAX_RANK], base = 0, rest = begin;
    for (int32_t d = outer - 1; d >= 0; d--) {
        index[d] = rest % t->dims[d];
        rest /= t->dims[d];
        base += index[d] * t->strides[d];
    }
    size_t row_bytes = (size_t)j->row * j->esize;
    for (int64_t r = begin; r < end; r++) {
        char *dst = j->y + (size_t)r * row_bytes;
        const char *src = j->x + (size_t)base * j->esize;
        if (inner_stride == 1)
            memcpy(dst, src, row_bytes);
        else
            gather(dst, src, j->row, inner_stride, j->esize);
        for (int32_t d = outer - 1; d >= 0; d--) {
            base += t->strides[d];
            if (++index[d] < t->dims[d])
                break;
            base -= index[d] * t->strides[d];
            index[d] = 0;
        }
    }
}

enum tide_status tide__cpu_TRANSPOSE(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_same_size(args, 0);
    struct transpose_job job = {
        .x = args->inputs[0].data,
        .y = args->outputs[0].data,
        .esize = tide__kernel_element_size(args),
    };
    tide__kernel_transpose_setup(args, &job.t);
    int64_t numel = tide__cpu_numel(&args->outputs[0]);
    if (numel == 0)
        return TIDE_OK;
    job.row = job.t.dims[job.t.rank - 1];
    tide__cpu_parallel_for(numel / job.row, tide__cpu_grain(job.row), transpose_rows, &job);
    return TIDE_OK;
}
