/* SPDX-License-Identifier: MIT */
/*
 * backend_cuda.h: private entry point of the CUDA backend (runtime/cuda).
 *
 * Only CUDA builds compile runtime/cuda; the registry (runtime/backend.c)
 * names tide_backend_cuda_new under TIDE_HAVE_CUDA, and nothing else in the
 * project refers to the CUDA backend except through the registry and
 * runtime/backend.h. The declaration is repeated here so that the definition
 * has a prototype in scope.
 *
 * Example usage (what the registry does for "cuda" and "auto"):
 *
 *     struct tide_backend *b;
 *     enum tide_status st = tide_backend_cuda_new(&(struct tide_backend_options){.device = 0},
 *                                                 &b, &err);
 *     if (st == TIDE_DEVICE) ... no GPU here: err.message says why ...
 */
#ifndef TIDE_RUNTIME_CUDA_BACKEND_CUDA_H
#define TIDE_RUNTIME_CUDA_BACKEND_CUDA_H

#include "runtime/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Creates a backend on GPU options->device (options may be NULL: device 0).
 * Returns TIDE_DEVICE, with the CUDA runtime's reason in err, when no GPU can
 * be used (no driver, no device, no such ordinal, the device busy or
 * unavailable), so that "auto" falls back to the CPU; other failures (out of
 * memory, a cuDNN that cannot load) keep their own status.
 */
enum tide_status tide_backend_cuda_new(const struct tide_backend_options *options,
                                       struct tide_backend **out, struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_CUDA_BACKEND_CUDA_H */
