/* SPDX-License-Identifier: MIT */
/*
 * backend_cpu.h: private entry points of the CPU backend (runtime/cpu).
 *
 * The public constructor, tide_backend_cpu_new (runtime/backend.h), runs the
 * CPU kernels of kernels/cpu. This header adds a constructor that takes the
 * kernel table to run instead, for tests that need kernels with known
 * behaviour (slow, failing, recording their order). Only the runtime and its
 * tests include it.
 *
 * Example usage (a test):
 *
 *     static const struct tide_kernel_table table = {.name = "test", .fn = {[TIDE_OP_RELU] = f}};
 *     struct tide_backend *b;
 *     tide__backend_cpu_new_with_kernels(NULL, &table, &b, &err);
 *     ...
 *     tide_backend_free(b);
 */
#ifndef TIDE_RUNTIME_CPU_BACKEND_CPU_H
#define TIDE_RUNTIME_CPU_BACKEND_CPU_H

#include "kernels/kernels.h"
#include "runtime/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Creates a CPU backend that dispatches launches to kernels, which must
 * outlive the backend. options may be NULL (defaults). Free the backend with
 * tide_backend_free.
 */
enum tide_status tide__backend_cpu_new_with_kernels(const struct tide_backend_options *options,
                                                    const struct tide_kernel_table *kernels,
                                                    struct tide_backend **out,
                                                    struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_CPU_BACKEND_CPU_H */
