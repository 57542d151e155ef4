/* SPDX-License-Identifier: MIT */
/*
 * norm-seq.h: the launchers of the device halves of LayerNorm and
 * LayerNormGrad (kernels/cuda/layernorm.cu), for their host half
 * (layernorm.c). Kept apart from cuda-impl.h so that
 * this op family lands without touching the launchers of the others; the
 * conventions are cuda-impl.h's: plain numbers and pointers, enqueued on
 * stream, returning cudaGetLastError().
 */
#ifndef TIDE_KERNELS_CUDA_NORM_SEQ_H
#define TIDE_KERNELS_CUDA_NORM_SEQ_H

#include <stdint.h>

#include "kernels/cuda/cuda-impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* layernorm.cu: one block per row of d elements; formulas as kernels/cpu/layernorm.c. */
cudaError_t tide__cuda_launch_layer_norm(cudaStream_t stream, const float *x, const float *gain,
                                         const float *bias, float *y, float *mean, float *inv_std,
                                         int64_t rows, int64_t d, double epsilon);
cudaError_t tide__cuda_launch_layer_norm_grad(cudaStream_t stream, const float *dy, const float *x,
                                              const float *gain, const float *mean,
                                              const float *inv_std, float *dx, float *dgain,
                                              float *dbias, int64_t rows, int64_t d);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CUDA_NORM_SEQ_H */
