/* SPDX-License-Identifier: MIT */
/*
 * profile.h: the device profile of a backend (swapper/timemodel.h), and a
 * profile chosen by name.
 *
 * The CPU backend's profile ("cpu") is measured the first time it is asked
 * for, in under 200 ms, and cached for the life of the process: sgemms of
 * a small convolution's shape on one thread (compute), a streaming float add over 16 MiB arrays
 * (memory bandwidth: what an element-wise kernel reaches), a 16 MiB memcpy
 * (the CPU backend's copies are memcpy), and 256 no-op items through one of
 * the backend's streams (the hand-off that every kernel and copy pays). The
 * best of three runs of each is kept: the machine may be busy. Then the
 * backend's own kernels of one residual block's training step, at two
 * shapes, timed per op against those figures, give each op's scale
 * (op_scale; about 80 ms of CPU, runtime/calibrate.c).
 *
 * The CUDA backend's profile is the published one of its device ("h200"
 * when its name says H200, else "h100") until measured ones replace them.
 *
 * Threads: the cache is guarded by a mutex; both functions may be called
 * from any thread.
 *
 * Example usage:
 *
 *     struct tide_device_profile p;
 *     if (tide_device_profile_resolve(flag, backend, &p, &err) != TIDE_OK)
 *         ... err lists the known names ...
 *     policy.profile = &p;
 */
#ifndef TIDE_RUNTIME_PROFILE_H
#define TIDE_RUNTIME_PROFILE_H

#include "runtime/backend.h"
#include "swapper/timemodel.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The profile of backend (measured for the CPU backend, see above) into *out. */
enum tide_status tide_device_profile_local(struct tide_backend *backend,
                                           struct tide_device_profile *out, struct tide_error *err);

/*
 * The profile called name, as a pointer that stays valid for the process:
 * NULL for NULL or "" (the caller's backend's own, which the session
 * measures), the measured CPU profile for "cpu", the published ones for
 * "h100" and "h200". Any other name is TIDE_INVALID, naming it and listing
 * the known ones.
 */
enum tide_status tide_device_profile_find(const char *name, const struct tide_device_profile **out,
                                          struct tide_error *err);

/*
 * The profile called name into *out: "cpu" (the CPU backend of this
 * machine, measured), "h100", "h200"; NULL or "" is backend's own
 * (tide_device_profile_local; backend NULL: "cpu"). Any other name is
 * TIDE_INVALID, with a message naming it and listing the known ones.
 */
enum tide_status tide_device_profile_resolve(const char *name, struct tide_backend *backend,
                                             struct tide_device_profile *out,
                                             struct tide_error *err);

/*
 * Internal to profile.c (runtime/calibrate.c): runs one residual block's
 * training step on backend, a CPU backend, with its tensors in host memory
 * of its own (not the backend's emulated device), and sets
 * profile->op_scale of each op in it to its kernels' measured CPU time over
 * the time the rest of profile gives them. Returns TIDE_NOMEM or a kernel's
 * failure, with err set.
 */
enum tide_status tide__profile_calibrate_ops(struct tide_backend *backend,
                                             struct tide_device_profile *profile,
                                             struct tide_error *err);

/*
 * The host budget a plan gets unless told otherwise (daemon config
 * host-budget, tide-bench --host-budget): 80 % of this machine's RAM, so
 * that a plan leaves room for the process and the system; 0 when the RAM
 * cannot be read (no limit).
 */
uint64_t tide_host_budget_default(void);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_RUNTIME_PROFILE_H */
