/* SPDX-License-Identifier: MIT */
/*
 * devices.h: the devices tided serves — one backend each — and the choice
 * of a device for a job's budget.
 *
 * With the CUDA backend tided opens every GPU cudaGetDeviceCount reports,
 * or those the `devices` setting lists ("0,2"); the CPU backend emulates
 * `cpu-devices` devices of `device-memory` bytes each, so that several
 * devices are tested without a GPU. A device's index is its place in the
 * table (what jobs, clients and metrics name); its ordinal is the backend's
 * (the CUDA device number).
 *
 * Each device keeps the sum of the budgets admitted to it; a job is placed
 * on one device (tided_devices_choose: the device it asks for, or the best
 * fit: the one left with the fewest free bytes that still hold the budget),
 * and the sum of a device's budgets never exceeds what it offers.
 *
 * Ownership: tided_devices_open creates the backends; tided_devices_free
 * frees them, after every session on them is gone.
 *
 * Threads: the table and the counters belong to the main thread. A
 * device's backend is used by that device's thread (worker.c) and, for
 * workspace sizes and op support, by the compile thread.
 *
 * Example usage:
 *
 *     struct tided_devices *devs = tided_devices_open(&config, error, sizeof(error));
 *     uint32_t device;
 *     if (tided_devices_choose(devs, budget, -1, &device, &err) == TIDE_OK)
 *         tided_devices_reserve(devs, device, budget);
 *     ...
 *     tided_devices_release(devs, device, budget);
 *     tided_devices_free(devs);
 */
#ifndef TIDE_DAEMON_DEVICES_H
#define TIDE_DAEMON_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "daemon/config.h"
#include "runtime/backend.h"

/* The most devices one tided serves (the `devices` list's length, `cpu-devices`). */
#define TIDED_DEVICES_MAX 64

struct tided_device {
    uint32_t index;               /* its place in the table */
    int ordinal;                  /* the backend's device (CUDA device number; CPU: index) */
    struct tide_backend *backend; /* its own streams, arenas and kernels */
    char name[128];               /* the backend's description of it */
    uint64_t total_bytes;         /* what it offers jobs */
    uint64_t reserved_bytes;      /* the sum of the budgets admitted to it (main thread) */
    uint32_t jobs;                /* jobs holding a budget on it (main thread) */
};

struct tided_devices {
    uint32_t n;
    struct tided_device *devices; /* n of them, by index */
};

/*
 * Parses the `devices` setting: "" (every device) or a comma-separated list
 * of distinct device numbers 0 to TIDED_DEVICES_MAX - 1, at most
 * TIDED_DEVICES_MAX of them ("0,2"). Fills ordinals (room for
 * TIDED_DEVICES_MAX) and *n; -1 with error naming the entry and the limit.
 */
int tided_devices_parse_list(const char *text, int *ordinals, uint32_t *n, char *error,
                             size_t size);

/*
 * Opens the devices of config: the backend named config->backend ("auto":
 * CUDA when it can open a GPU, else the CPU) for each device. NULL with
 * error filled when one cannot be opened.
 */
struct tided_devices *tided_devices_open(const struct tided_config *config, char *error,
                                         size_t size);

/* Frees the backends and the table. NULL is a no-op. */
void tided_devices_free(struct tided_devices *devices);

/* Sums over every device. */
uint64_t tided_devices_total_bytes(const struct tided_devices *devices);
uint64_t tided_devices_reserved_bytes(const struct tided_devices *devices);

/* The largest device's total bytes: no budget above it can ever be admitted. */
uint64_t tided_devices_largest_bytes(const struct tided_devices *devices);

/*
 * Where a budget goes now. asked >= 0: that device, TIDE_INVALID naming the
 * device count when there is no such device, TIDE_DOES_NOT_FIT with its
 * numbers when it has no room. asked < 0: the best fit, the device whose
 * free bytes after admission are fewest but not negative (the lowest index
 * among equals); TIDE_DOES_NOT_FIT naming each device's numbers when none
 * has room. *device gets the choice. Nothing is reserved.
 */
enum tide_status tided_devices_choose(const struct tided_devices *devices, uint64_t budget,
                                      int64_t asked, uint32_t *device, struct tide_error *err);

/* Counts budget on device (main thread); the caller chose it with tided_devices_choose. */
void tided_devices_reserve(struct tided_devices *devices, uint32_t device, uint64_t budget);

/* Gives a reserved budget back. */
void tided_devices_release(struct tided_devices *devices, uint32_t device, uint64_t budget);

#endif /* TIDE_DAEMON_DEVICES_H */
