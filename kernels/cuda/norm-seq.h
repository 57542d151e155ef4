/* SPDX-License-Identifier: MIT */
/*
 * norm-seq.h: the launchers of the device halves of LayerNorm, LayerNormGrad,
 * Dropout and DropoutGrad (kernels/cuda/layernorm.cu, dropout.cu), for their
 * host halves (layernorm.c, dropout.c). Kept apart from cuda-impl.h so that
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

/*
 * dropout.cu: y[i] = keep(key, i, threshold) ? x[i] * scale : 0, with the
 * mask of kernels/dropout-hash.h.
 */
cudaError_t tide__cuda_launch_dropout(cudaStream_t stream, const float *x, float *y, int64_t n,
                                      uint64_t key, uint32_t threshold, float scale);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_KERNELS_CUDA_NORM_SEQ_H */
