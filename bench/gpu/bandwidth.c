/* SPDX-License-Identifier: MIT */
/*
 * bandwidth.c: tide-bandwidth, host<->device copy bandwidth through tide's
 * copy path against plain CUDA, for sizes from 1 MiB to 1 GiB.
 *
 * The swapper moves tensors between the pinned host pool and the job's arena
 * with tide_backend_copy_h2d / copy_d2h on the h2d and d2h streams; this
 * measures what that path achieves (pinned memory from host_alloc, an arena
 * from arena_alloc, timing with the backend's events) and, next to it, the
 * same copies made directly with cudaMemcpyAsync between cudaHostAlloc and
 * cudaMalloc buffers on a non-blocking stream, timed with CUDA events. The
 * two should agree: a gap is overhead in tide's path.
 *
 * Each size is copied N times back to back (N = 4 GiB / size, between 3 and
 * 200) after one untimed warm-up, and GB/s is bytes * N / seconds with
 * GB = 1e9 bytes. A round trip of the smallest size is checked byte for byte
 * first, through both paths. Figures go to stdout; with --json the last line
 * is one JSON object. It is a benchmark, never a test: it prints, it does
 * not judge.
 *
 *   tide-bandwidth [--device N] [--min BYTES] [--max BYTES] [--json]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench-json.h"
#include "kernels/cuda/kernels_cuda.h"
#include "runtime/backend.h"

#define MIB       (UINT64_C(1) << 20)
#define GIB       (UINT64_C(1) << 30)
#define MAX_SIZES 64

struct options {
    int device;
    uint64_t min_bytes, max_bytes;
    bool json;
};

/* One size's figures, GB/s; 0 when that measurement failed. */
struct result {
    uint64_t bytes;
    int iters;
    double tide_h2d, tide_d2h, cuda_h2d, cuda_d2h;
};

static void usage(FILE *out)
{
    fprintf(out, "usage: tide-bandwidth [--device N] [--min BYTES] [--max BYTES] [--json]\n"
                 "\n"
                 "Measures host<->device copy bandwidth through tide's backend copies and through\n"
                 "plain cudaMemcpyAsync, both on pinned memory; sizes double from --min\n"
                 "(default 1 MiB) to --max (default 1 GiB).\n");
}

static int parse_u64(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){.device = 0, .min_bytes = MIB, .max_bytes = GIB};
    for (int i = 1; i < argc; i++) {
        uint64_t v;
        if (strcmp(argv[i], "--json") == 0) {
            o->json = true;
        } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc &&
                   parse_u64(argv[i + 1], &v) == 0 && v < 1024) {
            o->device = (int)v;
            i++;
        } else if (strcmp(argv[i], "--min") == 0 && i + 1 < argc &&
                   parse_u64(argv[i + 1], &v) == 0 && v >= 4) {
            o->min_bytes = v;
            i++;
        } else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc &&
                   parse_u64(argv[i + 1], &v) == 0 && v >= 4) {
            o->max_bytes = v;
            i++;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            return -1;
        }
    }
    if (o->min_bytes > o->max_bytes) {
        fprintf(stderr, "tide-bandwidth: --min is larger than --max\n");
        return -1;
    }
    return 0;
}

static int iterations(uint64_t bytes)
{
    uint64_t n = 4 * GIB / bytes;
    return n < 3 ? 3 : n > 200 ? 200 : (int)n;
}

static double gbps(uint64_t bytes, int iters, double ms)
{
    return ms > 0 ? (double)bytes * iters / (ms / 1e3) / 1e9 : 0;
}

/* ============================================================================
 * tide's path
 * ========================================================================== */

struct tide_path {
    struct tide_backend *backend;
    struct tide_stream *stream;
    struct tide_event *start, *end;
    void *host, *device;
};

static void tide_path_free(struct tide_path *t)
{
    if (!t->backend)
        return;
    tide_backend_event_free(t->backend, t->start);
    tide_backend_event_free(t->backend, t->end);
    tide_backend_stream_free(t->backend, t->stream);
    tide_backend_host_free(t->backend, t->host);
    tide_backend_arena_free(t->backend, t->device);
    tide_backend_free(t->backend);
}

static enum tide_status tide_path_new(const struct options *o, struct tide_path *t,
                                      struct tide_error *err)
{
    *t = (struct tide_path){0};
    struct tide_backend_options bo = {.device = o->device};
    enum tide_status st = tide_backend_create("cuda", &bo, &t->backend, err);
    if (st == TIDE_OK)
        st = tide_backend_stream_new(t->backend, &t->stream, err);
    if (st == TIDE_OK)
        st = tide_backend_event_new(t->backend, &t->start, err);
    if (st == TIDE_OK)
        st = tide_backend_event_new(t->backend, &t->end, err);
    if (st == TIDE_OK)
        st = tide_backend_host_alloc(t->backend, o->max_bytes, &t->host, err);
    if (st == TIDE_OK)
        st = tide_backend_arena_alloc(t->backend, o->max_bytes, &t->device, err);
    return st;
}

/* Copies bytes iters times one way through tide's path; ms between the events around them. */
static enum tide_status tide_path_time(struct tide_path *t, bool h2d, uint64_t bytes, int iters,
                                       double *ms, struct tide_error *err)
{
    struct tide_backend *b = t->backend;
    enum tide_status st = TIDE_OK;
    for (int i = -1; i < iters && st == TIDE_OK; i++) {
        if (i == 0)
            st = tide_backend_event_record(b, t->start, t->stream);
        if (st == TIDE_OK)
            st = h2d ? tide_backend_copy_h2d(b, t->device, t->host, bytes, t->stream)
                     : tide_backend_copy_d2h(b, t->host, t->device, bytes, t->stream);
    }
    if (st == TIDE_OK)
        st = tide_backend_event_record(b, t->end, t->stream);
    enum tide_status sync = tide_backend_stream_sync(b, t->stream, err);
    if (st == TIDE_OK)
        st = sync;
    if (st == TIDE_OK)
        st = tide_backend_event_elapsed(b, t->start, t->end, ms);
    if (st != TIDE_OK && err && err->message[0] == '\0')
        tide_error_set(err, st, "tide's %s copies of %" PRIu64 " bytes failed: %s",
                       h2d ? "h2d" : "d2h", bytes, tide_strerror(st));
    return st;
}

/* ============================================================================
 * Plain CUDA
 * ========================================================================== */

struct cuda_path {
    cudaStream_t stream;
    cudaEvent_t start, end;
    void *host, *device;
};

static void cuda_path_free(struct cuda_path *c)
{
    if (c->start)
        (void)TIDE_CUDA_CHECK(NULL, cudaEventDestroy(c->start));
    if (c->end)
        (void)TIDE_CUDA_CHECK(NULL, cudaEventDestroy(c->end));
    if (c->stream)
        (void)TIDE_CUDA_CHECK(NULL, cudaStreamDestroy(c->stream));
    if (c->host)
        (void)TIDE_CUDA_CHECK(NULL, cudaFreeHost(c->host));
    if (c->device)
        (void)TIDE_CUDA_CHECK(NULL, cudaFree(c->device));
}

static enum tide_status cuda_path_new(const struct options *o, struct cuda_path *c,
                                      struct tide_error *err)
{
    *c = (struct cuda_path){0};
    enum tide_status st = TIDE_CUDA_CHECK(err, cudaSetDevice(o->device));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaEventCreate(&c->start));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaEventCreate(&c->end));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err,
                             cudaHostAlloc(&c->host, (size_t)o->max_bytes, cudaHostAllocDefault));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaMalloc(&c->device, (size_t)o->max_bytes));
    return st;
}

static enum tide_status cuda_path_time(struct cuda_path *c, bool h2d, uint64_t bytes, int iters,
                                       double *ms, struct tide_error *err)
{
    enum tide_status st = TIDE_OK;
    for (int i = -1; i < iters && st == TIDE_OK; i++) {
        if (i == 0)
            st = TIDE_CUDA_CHECK(err, cudaEventRecord(c->start, c->stream));
        if (st == TIDE_OK)
            st = TIDE_CUDA_CHECK(err, h2d ? cudaMemcpyAsync(c->device, c->host, (size_t)bytes,
                                                            cudaMemcpyHostToDevice, c->stream)
                                          : cudaMemcpyAsync(c->host, c->device, (size_t)bytes,
                                                            cudaMemcpyDeviceToHost, c->stream));
    }
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaEventRecord(c->end, c->stream));
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaStreamSynchronize(c->stream));
    float elapsed = 0;
    if (st == TIDE_OK)
        st = TIDE_CUDA_CHECK(err, cudaEventElapsedTime(&elapsed, c->start, c->end));
    *ms = elapsed;
    return st;
}

/* ============================================================================
 * Checks and the run
 * ========================================================================== */

/* A round trip of bytes through both paths must give back what went in. */
static enum tide_status check_round_trip(struct tide_path *t, struct cuda_path *c, uint64_t bytes,
                                         struct tide_error *err)
{
    unsigned char *want = malloc((size_t)bytes);
    if (!want)
        return tide_error_set(err, TIDE_NOMEM, "out of memory for the round-trip check");
    for (uint64_t i = 0; i < bytes; i++)
        want[i] = (unsigned char)(i * 2654435761u >> 13);
    double ms;
    memcpy(t->host, want, (size_t)bytes);
    enum tide_status st = tide_path_time(t, true, bytes, 1, &ms, err);
    if (st == TIDE_OK) {
        memset(t->host, 0, (size_t)bytes);
        st = tide_path_time(t, false, bytes, 1, &ms, err);
    }
    if (st == TIDE_OK && memcmp(t->host, want, (size_t)bytes) != 0)
        st = tide_error_set(err, TIDE_INTERNAL,
                            "tide's round trip of %" PRIu64 " bytes changed the data", bytes);
    if (st == TIDE_OK) {
        memcpy(c->host, want, (size_t)bytes);
        st = cuda_path_time(c, true, bytes, 1, &ms, err);
    }
    if (st == TIDE_OK) {
        memset(c->host, 0, (size_t)bytes);
        st = cuda_path_time(c, false, bytes, 1, &ms, err);
    }
    if (st == TIDE_OK && memcmp(c->host, want, (size_t)bytes) != 0)
        st = tide_error_set(err, TIDE_INTERNAL,
                            "CUDA's round trip of %" PRIu64 " bytes changed the data", bytes);
    free(want);
    return st;
}

/* The JSON line: the device, then one object per size; 0, or 1 when it could not be built. */
static int print_json(const char *device, const struct result *r, int n)
{
    struct json_object *line = tide_bench_json_object();
    tide_bench_json_set_string(line, "benchmark", "bandwidth");
    tide_bench_json_set_string(line, "device", device);
    tide_bench_json_set_string(line, "unit", "GB/s");
    struct json_object *results = tide_bench_json_array();
    for (int i = 0; i < n; i++) {
        struct json_object *size = tide_bench_json_object();
        tide_bench_json_set_uint(size, "bytes", r[i].bytes);
        tide_bench_json_set_int(size, "iters", r[i].iters);
        tide_bench_json_set_fixed(size, "tide_h2d", r[i].tide_h2d, 3);
        tide_bench_json_set_fixed(size, "tide_d2h", r[i].tide_d2h, 3);
        tide_bench_json_set_fixed(size, "cuda_h2d", r[i].cuda_h2d, 3);
        tide_bench_json_set_fixed(size, "cuda_d2h", r[i].cuda_d2h, 3);
        tide_bench_json_append(results, size);
    }
    tide_bench_json_set(line, "results", results);
    return tide_bench_json_print_line(line);
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_options(argc, argv, &o) != 0)
        return 2;
    struct tide_error err = {0};
    struct tide_path t;
    struct cuda_path c;
    enum tide_status st = tide_path_new(&o, &t, &err);
    if (st == TIDE_OK)
        st = cuda_path_new(&o, &c, &err);
    else
        c = (struct cuda_path){0};
    char device[256] = "";
    if (st == TIDE_OK) {
        tide_backend_device_info(t.backend, device, sizeof(device), NULL);
        printf("device: %s\n", device);
        st = check_round_trip(&t, &c, o.min_bytes, &err);
    }
    struct result results[MAX_SIZES];
    int n = 0;
    if (st == TIDE_OK)
        printf("%14s %6s %12s %12s %12s %12s\n", "bytes", "iters", "tide h2d", "cuda h2d",
               "tide d2h", "cuda d2h");
    for (uint64_t bytes = o.min_bytes; st == TIDE_OK && bytes <= o.max_bytes && n < MAX_SIZES;
         bytes *= 2) {
        struct result *r = &results[n++];
        double ms[4] = {0};
        *r = (struct result){.bytes = bytes, .iters = iterations(bytes)};
        st = tide_path_time(&t, true, bytes, r->iters, &ms[0], &err);
        if (st == TIDE_OK)
            st = cuda_path_time(&c, true, bytes, r->iters, &ms[1], &err);
        if (st == TIDE_OK)
            st = tide_path_time(&t, false, bytes, r->iters, &ms[2], &err);
        if (st == TIDE_OK)
            st = cuda_path_time(&c, false, bytes, r->iters, &ms[3], &err);
        r->tide_h2d = gbps(bytes, r->iters, ms[0]);
        r->cuda_h2d = gbps(bytes, r->iters, ms[1]);
        r->tide_d2h = gbps(bytes, r->iters, ms[2]);
        r->cuda_d2h = gbps(bytes, r->iters, ms[3]);
        printf("%14" PRIu64 " %6d %9.2f GB/s %9.2f GB/s %9.2f GB/s %9.2f GB/s\n", bytes, r->iters,
               r->tide_h2d, r->cuda_h2d, r->tide_d2h, r->cuda_d2h);
        fflush(stdout);
        if (bytes > UINT64_MAX / 2)
            break;
    }
    if (st != TIDE_OK)
        fprintf(stderr, "tide-bandwidth: %s: %s\n", tide_strerror(st), err.message);
    int printed = o.json && n > 0 ? print_json(device, results, n) : 0;
    cuda_path_free(&c);
    tide_path_free(&t);
    return st == TIDE_OK && printed == 0 ? 0 : 1;
}
