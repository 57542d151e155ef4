/* SPDX-License-Identifier: MIT */
/*
 * devices.c: the device table (see devices.h): opening a backend per
 * device, the budgets admitted to each, and best-fit placement.
 *
 * Best fit, as an allocator places a block in the smallest hole that holds
 * it: a job goes to the device whose free bytes after admission are fewest
 * but not negative, so that the device with the most room keeps it for a
 * job that needs it. Two 48 MiB jobs on two 64 MiB devices land on
 * different devices (the second does not fit beside the first); a 16 MiB
 * job then joins the one with 16 MiB left rather than take a fresh device.
 *
 * Threads: main thread only (the backends themselves are run by the
 * worker's device threads).
 */
#include "daemon/devices.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* ============================================================================
 * The `devices` setting
 * ========================================================================== */

int tided_devices_parse_list(const char *text, int *ordinals, uint32_t *n, char *error, size_t size)
{
    *n = 0;
    const char *p = text ? text : "";
    while (*p == ' ')
        p++;
    if (!*p)
        return 0;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *start = p;
        while (*p && *p != ',' && *p != ' ')
            p++;
        int len = (int)(p - start);
        char *end = NULL;
        errno = 0;
        unsigned long v =
            len > 0 && isdigit((unsigned char)start[0]) ? strtoul(start, &end, 10) : 0;
        if (len == 0 || !end || end != p || errno != 0 || v >= TIDED_DEVICES_MAX) {
            snprintf(error, size,
                     "\"%.*s\" is not a device number: want integers between 0 and %d, separated "
                     "by commas (\"0,2\")",
                     len > 32 ? 32 : len, start, TIDED_DEVICES_MAX - 1);
            return -1;
        }
        for (uint32_t i = 0; i < *n; i++) {
            if (ordinals[i] == (int)v) {
                snprintf(error, size, "device %lu is listed twice", v);
                return -1;
            }
        }
        if (*n == TIDED_DEVICES_MAX) {
            snprintf(error, size, "more than %d devices listed", TIDED_DEVICES_MAX);
            return -1;
        }
        ordinals[(*n)++] = (int)v;
        while (*p == ' ')
            p++;
        if (!*p)
            return 0;
        if (*p != ',') {
            snprintf(error, size, "want a comma between device numbers, got \"%.16s\"", p);
            return -1;
        }
        p++;
    }
}

/* ============================================================================
 * Opening and freeing
 * ========================================================================== */

static int open_device(struct tided_devices *devs, const char *backend, int ordinal,
                       const struct tided_config *config, char *error, size_t size)
{
    struct tided_device *dev = &devs->devices[devs->n];
    struct tide_error err = {0};
    struct tide_backend_options bo = {
        .device_bytes = config->device_memory, .threads = (int)config->threads, .device = ordinal};
    if (tide_backend_create(backend, &bo, &dev->backend, &err) != TIDE_OK) {
        snprintf(error, size, "backend %s, device %d: %s", backend, ordinal, err.message);
        return -1;
    }
    dev->index = devs->n;
    dev->ordinal = ordinal;
    tide_backend_device_info(dev->backend, dev->name, sizeof(dev->name), &dev->total_bytes);
    devs->n++;
    return 0;
}

struct tided_devices *tided_devices_open(const struct tided_config *config, char *error,
                                         size_t size)
{
    int ordinals[TIDED_DEVICES_MAX];
    uint32_t listed = 0;
    if (tided_devices_parse_list(config->devices, ordinals, &listed, error, size) != 0)
        return NULL;
    struct tided_devices *devs = calloc(1, sizeof(*devs));
    if (devs)
        devs->devices = calloc(TIDED_DEVICES_MAX, sizeof(*devs->devices));
    if (!devs || !devs->devices) {
        free(devs);
        snprintf(error, size, "out of memory");
        return NULL;
    }
    /* The first device decides what "auto" means; the others use the same backend. */
    if (open_device(devs, config->backend, listed ? ordinals[0] : 0, config, error, size) != 0)
        goto fail;
    const char *backend = tide_backend_name(devs->devices[0].backend);
    bool cpu = strcmp(backend, "cpu") == 0;
    uint32_t want = 1;
    if (cpu) {
        want = (uint32_t)config->cpu_devices;
        if (listed)
            TIDE_LOG_WARN("devices = %s: ignored by the cpu backend, which emulates cpu-devices "
                          "(%" PRIu64 ") devices",
                          config->devices, config->cpu_devices);
    } else if (listed) {
        want = listed;
    } else {
        int count = 0;
        struct tide_error err = {0};
        if (tide_backend_device_count(backend, &count, &err) != TIDE_OK) {
            snprintf(error, size, "backend %s: %s", backend, err.message);
            goto fail;
        }
        want = count < 1 ? 1 : count > TIDED_DEVICES_MAX ? TIDED_DEVICES_MAX : (uint32_t)count;
    }
    while (devs->n < want) {
        int ordinal = cpu || !listed ? (int)devs->n : ordinals[devs->n];
        if (open_device(devs, backend, ordinal, config, error, size) != 0)
            goto fail;
    }
    return devs;
fail:
    tided_devices_free(devs);
    return NULL;
}

void tided_devices_free(struct tided_devices *devs)
{
    if (!devs)
        return;
    for (uint32_t i = 0; i < devs->n; i++)
        tide_backend_free(devs->devices[i].backend);
    free(devs->devices);
    free(devs);
}

/* ============================================================================
 * Budgets
 * ========================================================================== */

uint64_t tided_devices_total_bytes(const struct tided_devices *devs)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < devs->n; i++)
        sum += devs->devices[i].total_bytes;
    return sum;
}

uint64_t tided_devices_reserved_bytes(const struct tided_devices *devs)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < devs->n; i++)
        sum += devs->devices[i].reserved_bytes;
    return sum;
}

uint64_t tided_devices_largest_bytes(const struct tided_devices *devs)
{
    uint64_t max = 0;
    for (uint32_t i = 0; i < devs->n; i++)
        if (devs->devices[i].total_bytes > max)
            max = devs->devices[i].total_bytes;
    return max;
}

static uint64_t free_bytes(const struct tided_device *dev)
{
    return dev->total_bytes - dev->reserved_bytes;
}

/* "67108864 of 67108864 bytes (64 MiB of 64 MiB) are reserved by 2 job(s), 0 bytes (0 bytes) are
 * free" */
static int describe(const struct tided_device *dev, char *buf, size_t size)
{
    char a[32], b[32], c[32];
    return snprintf(buf, size,
                    "%" PRIu64 " of %" PRIu64 " bytes (%s of %s) are reserved by %u job(s), "
                    "%" PRIu64 " bytes (%s) are free",
                    dev->reserved_bytes, dev->total_bytes,
                    tided_format_bytes(dev->reserved_bytes, a, sizeof(a)),
                    tided_format_bytes(dev->total_bytes, b, sizeof(b)), dev->jobs, free_bytes(dev),
                    tided_format_bytes(free_bytes(dev), c, sizeof(c)));
}

enum tide_status tided_devices_choose(const struct tided_devices *devs, uint64_t budget,
                                      int64_t asked, uint32_t *device, struct tide_error *err)
{
    char a[32], text[200];
    if (asked >= (int64_t)devs->n)
        return tide_error_set(err, TIDE_INVALID,
                              "device: %" PRId64 " is not a device of this tided, which has %u "
                              "(0 to %u)",
                              asked, devs->n, devs->n - 1);
    if (asked >= 0) {
        const struct tided_device *dev = &devs->devices[asked];
        if (budget <= free_bytes(dev)) {
            *device = (uint32_t)asked;
            return TIDE_OK;
        }
        describe(dev, text, sizeof(text));
        return tide_error_set(err, TIDE_DOES_NOT_FIT,
                              "the job's budget of %" PRIu64 " bytes (%s) does not fit on device "
                              "%" PRId64 ": %s",
                              budget, tided_format_bytes(budget, a, sizeof(a)), asked, text);
    }
    bool found = false;
    uint64_t best_left = 0;
    for (uint32_t i = 0; i < devs->n; i++) {
        uint64_t left = free_bytes(&devs->devices[i]);
        if (budget > left)
            continue;
        if (!found || left - budget < best_left) {
            found = true;
            best_left = left - budget;
            *device = i;
        }
    }
    if (found)
        return TIDE_OK;
    if (devs->n == 1) {
        describe(&devs->devices[0], text, sizeof(text));
        return tide_error_set(err, TIDE_DOES_NOT_FIT,
                              "the job's budget of %" PRIu64 " bytes (%s) does not fit on the "
                              "device: %s",
                              budget, tided_format_bytes(budget, a, sizeof(a)), text);
    }
    tide_error_set(err, TIDE_DOES_NOT_FIT,
                   "the job's budget of %" PRIu64 " bytes (%s) does not fit on any of the %u "
                   "devices:",
                   budget, tided_format_bytes(budget, a, sizeof(a)), devs->n);
    size_t used = strlen(err->message);
    for (uint32_t i = 0; i < devs->n && used + 1 < sizeof(err->message); i++) {
        describe(&devs->devices[i], text, sizeof(text));
        int w = snprintf(err->message + used, sizeof(err->message) - used, "%s device %u: %s",
                         i ? ";" : "", i, text);
        used += w > 0 ? (size_t)w : 0;
    }
    return TIDE_DOES_NOT_FIT;
}

void tided_devices_reserve(struct tided_devices *devs, uint32_t device, uint64_t budget)
{
    struct tided_device *dev = &devs->devices[device];
    dev->reserved_bytes += budget;
    dev->jobs++;
}

void tided_devices_release(struct tided_devices *devs, uint32_t device, uint64_t budget)
{
    struct tided_device *dev = &devs->devices[device];
    dev->reserved_bytes -= budget;
    dev->jobs--;
}
