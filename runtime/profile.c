/* SPDX-License-Identifier: MIT */
/*
 * profile.c: the CPU backend's device profile measured once per process,
 * the CUDA backend's published one, and profiles by name (profile.h).
 */
#include "runtime/profile.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GEMM_M        32
#define GEMM_K        144
#define GEMM_N        1024
#define GEMM_REPEAT   16
#define STREAM_FLOATS (4u << 20) /* 16 MiB per array */
#define HANDOFFS      256
#define RUNS          3
#define GEMM_RUNS     5

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static bool cache_valid;
static struct tide_device_profile cache;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The calling thread's CPU time: the rates below are single-thread rates,
 * and a run that waits for a core meanwhile (a busy machine) costs no CPU
 * time, so the best of a few runs does not depend on catching a quiet one.
 */
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The best of GEMM_RUNS timings, as FLOP/s, of GEMM_REPEAT sgemms shaped
 * as the convolutions' per-image products (kernels/cpu/conv.c) of the CNN
 * and the ResNets: a 3x3 filter over 16 channels into 32 on a 32 x 32
 * image, [32, 144] x [144, 1024]. Such small products reach a fraction of
 * a large square one's rate, and they are most of those models' FLOPs.
 */
static double measure_gemm(float *a, float *b, float *c)
{
    double best = 0;
    for (int r = 0; r < GEMM_RUNS; r++) {
        double t0 = thread_cpu_s();
        for (int i = 0; i < GEMM_REPEAT; i++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, GEMM_M, GEMM_N, GEMM_K, 1.0f, a,
                        GEMM_K, b, GEMM_N, 0.0f, c, GEMM_N);
        double s = thread_cpu_s() - t0;
        double rate = 2.0 * GEMM_M * GEMM_N * GEMM_K * GEMM_REPEAT / (s > 1e-9 ? s : 1e-9);
        best = rate > best ? rate : best;
    }
    return best;
}

/* The best of RUNS element-wise adds c = a + b (three arrays touched), as bytes/s. */
static double measure_stream(float *a, float *b, float *c)
{
    double best = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = thread_cpu_s();
        for (uint32_t i = 0; i < STREAM_FLOATS; i++)
            c[i] = a[i] + b[i];
        double s = thread_cpu_s() - t0;
        double rate = 3.0 * STREAM_FLOATS * sizeof(float) / (s > 1e-9 ? s : 1e-9);
        best = rate > best ? rate : best;
    }
    return best;
}

/* The best of RUNS memcpy of one array, as bytes/s each way. */
static double measure_copy(float *dst, const float *src)
{
    double best = 0;
    for (int r = 0; r < RUNS; r++) {
        double t0 = thread_cpu_s();
        memcpy(dst, src, STREAM_FLOATS * sizeof(float));
        double s = thread_cpu_s() - t0;
        double rate = STREAM_FLOATS * sizeof(float) / (s > 1e-9 ? s : 1e-9);
        best = rate > best ? rate : best;
    }
    return best;
}

/* The best of RUNS: HANDOFFS event records through one stream, per item in microseconds. */
static enum tide_status measure_handoff(struct tide_backend *backend, double *us,
                                        struct tide_error *err)
{
    struct tide_stream *stream = NULL;
    struct tide_event *event = NULL;
    enum tide_status st = tide_backend_stream_new(backend, &stream, err);
    if (st == TIDE_OK)
        st = tide_backend_event_new(backend, &event, err);
    double best = 0;
    for (int r = 0; r < RUNS && st == TIDE_OK; r++) {
        double t0 = now_s();
        for (int i = 0; i < HANDOFFS && st == TIDE_OK; i++) {
            st = tide_backend_event_record(backend, event, stream);
            if (st != TIDE_OK)
                tide_error_set(err, st, "device profile: recording an event failed: %s",
                               tide_strerror(st));
        }
        if (st == TIDE_OK)
            st = tide_backend_stream_sync(backend, stream, err);
        double per = (now_s() - t0) * 1e6 / HANDOFFS;
        best = r == 0 || per < best ? per : best;
    }
    if (event)
        tide_backend_event_free(backend, event);
    if (stream)
        tide_backend_stream_free(backend, stream);
    *us = best;
    return st;
}

static enum tide_status measure_cpu(struct tide_backend *backend, struct tide_device_profile *out,
                                    struct tide_error *err)
{
    size_t gemm = (size_t)GEMM_K * GEMM_N; /* the largest operand: a and c fit too */
    float *a = malloc(gemm * sizeof(float)), *b = malloc(gemm * sizeof(float));
    float *c = malloc(gemm * sizeof(float));
    float *x = malloc(STREAM_FLOATS * sizeof(float)), *y = malloc(STREAM_FLOATS * sizeof(float));
    float *z = malloc(STREAM_FLOATS * sizeof(float));
    enum tide_status st = TIDE_OK;
    if (!a || !b || !c || !x || !y || !z) {
        st = tide_error_set(err, TIDE_NOMEM, "device profile: out of memory for the calibration");
        goto done;
    }
    for (size_t i = 0; i < gemm; i++) {
        a[i] = (float)(i % 7) * 0.25f;
        b[i] = (float)(i % 5) * 0.5f;
    }
    for (uint32_t i = 0; i < STREAM_FLOATS; i++) {
        x[i] = (float)(i & 255);
        y[i] = 1.0f;
    }
    memset(z, 0, STREAM_FLOATS * sizeof(float));
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "cpu");
    out->copies_share_compute = true; /* memcpy on the backend's worker threads */
    out->compute_flops = measure_gemm(a, b, c);
    out->memory_bytes_per_s = measure_stream(x, y, z);
    out->copy_bytes_per_s = measure_copy(z, x);
    st = measure_handoff(backend, &out->launch_us, err);
    if (st == TIDE_OK)
        st = tide__profile_calibrate_ops(backend, out, err);
done:
    free(a);
    free(b);
    free(c);
    free(x);
    free(y);
    free(z);
    return st;
}

enum tide_status tide_device_profile_local(struct tide_backend *backend,
                                           struct tide_device_profile *out, struct tide_error *err)
{
    if (backend && strcmp(tide_backend_name(backend), "cpu") != 0) {
        char name[128] = "";
        uint64_t total = 0;
        tide_backend_device_info(backend, name, sizeof(name), &total);
        *out = *tide_device_profile_named(strstr(name, "H200") ? "h200" : "h100");
        return TIDE_OK;
    }
    enum tide_status st = TIDE_OK;
    pthread_mutex_lock(&cache_lock);
    if (!cache_valid) {
        struct tide_backend *own = NULL;
        if (!backend)
            st = tide_backend_cpu_new(NULL, &own, err);
        if (st == TIDE_OK)
            st = measure_cpu(backend ? backend : own, &cache, err);
        tide_backend_free(own);
        cache_valid = st == TIDE_OK;
    }
    if (st == TIDE_OK)
        *out = cache;
    pthread_mutex_unlock(&cache_lock);
    return st;
}

enum tide_status tide_device_profile_find(const char *name, const struct tide_device_profile **out,
                                          struct tide_error *err)
{
    *out = NULL;
    if (!name || !name[0])
        return TIDE_OK;
    if (strcmp(name, "cpu") == 0) {
        struct tide_device_profile measured;
        enum tide_status st = tide_device_profile_local(NULL, &measured, err);
        if (st == TIDE_OK)
            *out = &cache; /* valid from now on, and never written again */
        return st;
    }
    *out = tide_device_profile_named(name);
    if (!*out)
        return tide_error_set(err, TIDE_INVALID,
                              "device profile \"%s\" is unknown; known profiles: %s", name,
                              TIDE_DEVICE_PROFILE_NAMES);
    return TIDE_OK;
}

enum tide_status tide_device_profile_resolve(const char *name, struct tide_backend *backend,
                                             struct tide_device_profile *out,
                                             struct tide_error *err)
{
    if (!name || !name[0])
        return tide_device_profile_local(backend, out, err);
    const struct tide_device_profile *found;
    enum tide_status st = tide_device_profile_find(name, &found, err);
    if (st == TIDE_OK)
        *out = *found;
    return st;
}

uint64_t tide_host_budget_default(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0)
        return 0;
    return (uint64_t)pages / 5 * 4 * (uint64_t)page;
}
