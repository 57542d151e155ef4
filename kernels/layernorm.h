/* SPDX-License-Identifier: MIT */
/*
 * layernorm.h: the geometry of LayerNorm and LayerNormGrad, shared by the
 * CPU kernels (kernels/cpu/layernorm.c) and the host half of the CUDA ones
 * (kernels/cuda/layernorm.c), as kernels/check.h is for the other ops: what
 * infer guarantees is asserted here, once.
 *
 * x is [..., D], seen as rows of D contiguous elements: rows is the product
 * of the other dims (1 for a rank-1 x). gain and bias are [D]; the saved
 * statistics, mean and inv_std, hold one value per row.
 */
#ifndef TIDE_KERNELS_LAYERNORM_H
#define TIDE_KERNELS_LAYERNORM_H

#include <assert.h>
#include <stdint.h>

#include "kernels/kernels.h"

struct tide__layer_norm_rows {
    int64_t rows, d;
};

/*
 * The rows of input x_index (x) of a LayerNorm (x_index 0) or LayerNormGrad
 * (x_index 1), asserting that every input and output holds x's elements, D
 * of them, or one per row, as infer made them.
 */
static inline struct tide__layer_norm_rows
tide__layer_norm_setup(const struct tide_kernel_args *args, uint32_t x_index)
{
    const struct tide_shape *x = &args->inputs[x_index].shape;
    assert(x->rank >= 1 && x->dims[x->rank - 1] > 0);
    struct tide__layer_norm_rows g = {.rows = 1, .d = x->dims[x->rank - 1]};
    for (int32_t i = 0; i + 1 < x->rank; i++)
        g.rows *= x->dims[i];
    const int64_t n = g.rows * g.d;
    bool grad = x_index == 1;
    assert(args->n_inputs == (grad ? 5u : 3u) && args->n_outputs == 3);
    for (uint32_t i = 0; i < args->n_inputs; i++) {
        int64_t want = i <= x_index ? n : i == x_index + 1 ? g.d : grad ? g.rows : g.d;
        assert(tide_shape_numel(&args->inputs[i].shape) == want);
        (void)want;
    }
    assert(tide_shape_numel(&args->outputs[0].shape) == n);
    for (uint32_t k = 1; k < 3; k++)
        assert(tide_shape_numel(&args->outputs[k].shape) == (grad ? g.d : g.rows));
    (void)n;
    return g;
}

#endif /* TIDE_KERNELS_LAYERNORM_H */
