/* SPDX-License-Identifier: MIT */
/*
 * onnx-tests.c: tide-bench onnx-tests DIR [--json] [--timeout S] [--backend NAME]
 * [--jobs N], ONNX's own conformance cases run through tide's importer and a
 * backend (the CPU's by default; cuda checks the GPU's kernels against ONNX).
 *
 * A case is a directory holding model.onnx and test_data_set_N/ folders of
 * input_K.pb and output_K.pb, each a serialized onnx.TensorProto (the layout
 * of Debian's libonnx-testdata). DIR is one case or a tree of them. Each case
 * is imported (tide/onnx.h), compiled into a forward-only session on the
 * backend, fed every data set's inputs and compared output by output with
 * the expected values: dtype and shape exactly (int64 expectations against
 * tide's int32, the type import maps them to), numbers within
 * |got - want| <= 1e-5 + 1e-3 |want|.
 *
 * Each case runs in a forked child with a time limit, so that a crash or a
 * hang is counted and the run goes on. The child reports on a pipe one line,
 * "<outcome> <message>"; the parent prints "<outcome> <dir> [message]" per
 * case and a summary, and with --json a last JSON line of the counts. With
 * --jobs N, N workers (forked processes) take the cases from a shared counter,
 * each running its cases' children as above and printing each line as its
 * case ends (in the order they end); the counts are the parent's, from a
 * shared array of outcomes. A backend other than the CPU's is first created
 * in a child of its own (CUDA cannot be used across fork()), so that a
 * machine without it is one error, not every case refused.
 * Outcomes: pass; fail (wrong numbers, shape or dtype, or a run that failed
 * for another reason); unsupported (refused by the import, by tide's graph
 * check, or by a kernel's check of the data, such as a negative Gather index,
 * with the reason); crashed (a signal, a timeout, or a child that said
 * nothing).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench-json.h"
#include "bench/bench.h"
#include "common/status.h"
#include "onnx.pb-c.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "tide/graph.h"
#include "tide/onnx.h"

#define RTOL 1e-3
#define ATOL 1e-5

enum outcome { PASS, FAIL, UNSUPPORTED, CRASHED };
static const char *const outcome_names[] = {"pass", "fail", "unsupported", "crashed"};

/* ============================================================================
 * Files
 * ========================================================================== */

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *grown = realloc(buf, cap);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *len = n;
    return buf;
}

static bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ============================================================================
 * One case, in the child
 * ========================================================================== */

/* A TensorProto's values as doubles (float, int32, int64, bool as 0 and 1); NULL with msg set
 * otherwise. */
static double *tensor_values(const Onnx__TensorProto *t, int64_t *count, bool *is_float, char *msg,
                             size_t msg_size)
{
    int64_t n = 1;
    for (size_t k = 0; k < t->n_dims; k++)
        n *= t->dims[k];
    *count = n;
    double *out = malloc((size_t)(n ? n : 1) * sizeof(double));
    if (!out) {
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    size_t raw_len = t->has_raw_data ? t->raw_data.len : 0;
    *is_float = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    bool is_bool = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL; /* raw: a byte each */
    size_t width = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? 8 : is_bool ? 1 : 4;
    if (t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT &&
        t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT32 &&
        t->data_type != ONNX__TENSOR_PROTO__DATA_TYPE__INT64 && !is_bool) {
        snprintf(msg, msg_size, "test data of element type %d", (int)t->data_type);
        free(out);
        return NULL;
    }
    if (raw && raw_len != (size_t)n * width) {
        snprintf(msg, msg_size, "test data holds %zu bytes for %" PRId64 " elements", raw_len, n);
        free(out);
        return NULL;
    }
    for (int64_t k = 0; k < n; k++) {
        if (raw) {
            if (*is_float) {
                float f;
                memcpy(&f, raw + 4 * k, 4);
                out[k] = f;
            } else if (width == 8) {
                int64_t v;
                memcpy(&v, raw + 8 * k, 8);
                out[k] = (double)v;
            } else if (is_bool) {
                out[k] = raw[k] != 0;
            } else {
                int32_t v;
                memcpy(&v, raw + 4 * k, 4);
                out[k] = v;
            }
        } else if (*is_float && (size_t)n == t->n_float_data) {
            out[k] = t->float_data[k];
        } else if (width == 8 && (size_t)n == t->n_int64_data) {
            out[k] = (double)t->int64_data[k];
        } else if (!*is_float && width == 4 && (size_t)n == t->n_int32_data) {
            out[k] = t->int32_data[k];
        } else if (is_bool && (size_t)n == t->n_int32_data) {
            out[k] = t->int32_data[k] != 0;
        } else {
            snprintf(msg, msg_size, "test data holds fewer values than its shape");
            free(out);
            return NULL;
        }
    }
    return out;
}

static Onnx__TensorProto *read_tensor_file(const char *path)
{
    size_t len;
    uint8_t *bytes = read_file(path, &len);
    if (!bytes)
        return NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(NULL, len, bytes);
    free(bytes);
    return t;
}

static bool close_enough(double got, double want)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= ATOL + RTOL * fabs(want);
}

/* Feeds, runs and compares one data set. */
static enum outcome run_data_set(struct tide_session *s, tide_builder *b,
                                 const struct tide_onnx_result *io, const char *set, char *msg,
                                 size_t msg_size)
{
    struct tide_error err = {0};
    char path[4096];
    for (int32_t k = 0; k < io->n_inputs; k++) {
        snprintf(path, sizeof(path), "%.4000s/input_%d.pb", set, (int)k);
        Onnx__TensorProto *t = read_tensor_file(path);
        if (!t) {
            snprintf(msg, msg_size, "%.1000s: missing or unreadable", path);
            return FAIL;
        }
        int64_t count;
        bool is_float;
        double *values = tensor_values(t, &count, &is_float, msg, msg_size);
        onnx__tensor_proto__free_unpacked(t, NULL);
        if (!values)
            return UNSUPPORTED;
        enum tide_data_type dt = tide_builder_dtype(b, io->inputs[k]);
        void *data = malloc((size_t)(count ? count : 1) * 4);
        if (!data) {
            free(values);
            snprintf(msg, msg_size, "out of memory");
            return FAIL;
        }
        for (int64_t e = 0; e < count; e++) {
            if (dt == TIDE_DT_FLOAT32) {
                ((float *)data)[e] = (float)values[e];
            } else {
                if (values[e] < INT32_MIN || values[e] > INT32_MAX) {
                    snprintf(msg, msg_size, "input %d holds %g, which does not fit in int32",
                             (int)k, values[e]);
                    free(values), free(data);
                    return UNSUPPORTED;
                }
                ((int32_t *)data)[e] = (int32_t)values[e];
            }
        }
        free(values);
        enum tide_status st = tide_session_feed(s, tide_builder_name(b, io->inputs[k]), data,
                                                (uint64_t)count * 4, &err);
        free(data);
        if (st != TIDE_OK) {
            snprintf(msg, msg_size, "feeding input %d: %s", (int)k, err.message);
            return FAIL;
        }
    }
    struct tide_step_stats stats;
    enum tide_status st = tide_session_eval(s, &stats, &err);
    if (st == TIDE_INVALID) {
        /* A kernel refused the data with a reason (Gather's negative ids, which ONNX allows
         * and tide does not): a limit of tide's, said, not a wrong number. */
        snprintf(msg, msg_size, "the run refused the test data: %s", err.message);
        return UNSUPPORTED;
    }
    if (st != TIDE_OK) {
        snprintf(msg, msg_size, "run: %s", err.message);
        return FAIL;
    }
    for (int32_t k = 0; k < io->n_outputs; k++) {
        snprintf(path, sizeof(path), "%.4000s/output_%d.pb", set, (int)k);
        Onnx__TensorProto *t = read_tensor_file(path);
        if (!t) {
            snprintf(msg, msg_size, "%.1000s: missing or unreadable", path);
            return FAIL;
        }
        int64_t dims[TIDE_BUILDER_MAX_RANK];
        int32_t rank;
        tide_builder_shape(b, io->outputs[k], dims, &rank);
        bool same_shape = (size_t)rank == t->n_dims;
        for (int32_t a = 0; same_shape && a < rank; a++)
            same_shape = dims[a] == t->dims[a];
        if (!same_shape) {
            snprintf(msg, msg_size, "output %d: shape of rank %d, want rank %zu (or other dims)",
                     (int)k, (int)rank, t->n_dims);
            onnx__tensor_proto__free_unpacked(t, NULL);
            return FAIL;
        }
        int64_t count;
        bool is_float, want_bool = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
        double *want = tensor_values(t, &count, &is_float, msg, msg_size);
        onnx__tensor_proto__free_unpacked(t, NULL);
        if (!want)
            return UNSUPPORTED;
        /* A bool output is a float32 mask in tide, which the import marks as bool. */
        enum tide_data_type dt = tide_builder_dtype(b, io->outputs[k]);
        bool got_bool = io->output_bool[k];
        if (got_bool != want_bool || (!got_bool && (dt == TIDE_DT_FLOAT32) != is_float)) {
            snprintf(msg, msg_size, "output %d: dtype %s, want %s", (int)k,
                     got_bool                ? "bool (a float32 mask)"
                     : dt == TIDE_DT_FLOAT32 ? "float32"
                                             : "int32",
                     want_bool  ? "bool"
                     : is_float ? "float"
                                : "integer");
            free(want);
            return FAIL;
        }
        void *got = malloc((size_t)(count ? count : 1) * 4);
        if (!got) {
            free(want);
            return FAIL;
        }
        if (tide_session_fetch(s, tide_builder_name(b, io->outputs[k]), got, (uint64_t)count * 4,
                               &err) != TIDE_OK) {
            snprintf(msg, msg_size, "fetch output %d: %s", (int)k, err.message);
            free(want), free(got);
            return FAIL;
        }
        for (int64_t e = 0; e < count; e++) {
            double g = dt == TIDE_DT_FLOAT32 ? ((float *)got)[e] : ((int32_t *)got)[e];
            if (!close_enough(g, want[e])) {
                snprintf(msg, msg_size, "output %d element %" PRId64 ": %.9g, want %.9g", (int)k, e,
                         g, want[e]);
                free(want), free(got);
                return FAIL;
            }
        }
        free(want);
        free(got);
    }
    return PASS;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static enum outcome run_case(const char *dir, const char *backend, char *msg, size_t msg_size)
{
    char path[4096];
    snprintf(path, sizeof(path), "%.4000s/model.onnx", dir);
    size_t len;
    uint8_t *bytes = read_file(path, &len);
    if (!bytes) {
        snprintf(msg, msg_size, "cannot read %.1000s", path);
        return FAIL;
    }
    tide_builder *b = tide_builder_new();
    struct tide_onnx_result io;
    char err_text[1024];
    int rc = tide_onnx_import(b, bytes, len, NULL, &io, err_text, sizeof(err_text));
    free(bytes);
    if (rc != 0) {
        snprintf(msg, msg_size, "%s", err_text);
        tide_builder_free(b);
        return UNSUPPORTED;
    }
    uint8_t *graph;
    size_t graph_len;
    if (tide_builder_serialize(b, &graph, &graph_len) != 0) {
        snprintf(msg, msg_size, "graph: %s", tide_builder_error(b));
        tide_onnx_result_free(&io);
        tide_builder_free(b);
        return UNSUPPORTED;
    }
    const char **fetches = calloc((size_t)io.n_outputs + 1, sizeof(char *));
    for (int32_t k = 0; fetches && k < io.n_outputs; k++)
        fetches[k] = tide_builder_name(b, io.outputs[k]);
    struct tide_session_options o = tide_session_options_default();
    o.backend_name = backend;
    o.threads = 1;
    o.fetches = fetches;
    o.n_fetches = (uint32_t)io.n_outputs;
    struct tide_session *s = NULL;
    struct tide_error err = {0};
    enum outcome result = PASS;
    if (tide_session_new(graph, graph_len, &o, &s, &err) != TIDE_OK) {
        snprintf(msg, msg_size, "graph check: %s", err.message);
        result = UNSUPPORTED;
    }
    free(graph);
    /* The data sets, in name order. */
    DIR *d = result == PASS ? opendir(dir) : NULL;
    char **sets = NULL;
    size_t n_sets = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strncmp(e->d_name, "test_data_set_", 14) != 0)
            continue;
        char **grown = realloc(sets, (n_sets + 1) * sizeof(char *));
        if (!grown)
            break;
        sets = grown;
        sets[n_sets++] = strdup(e->d_name);
    }
    if (d)
        closedir(d);
    if (sets)
        qsort(sets, n_sets, sizeof(char *), compare_names);
    if (result == PASS && n_sets == 0) {
        snprintf(msg, msg_size, "no test_data_set_N folders");
        result = FAIL;
    }
    for (size_t k = 0; result == PASS && k < n_sets; k++) {
        snprintf(path, sizeof(path), "%.3800s/%.200s", dir, sets[k]);
        result = run_data_set(s, b, &io, path, msg, msg_size);
    }
    for (size_t k = 0; k < n_sets; k++)
        free(sets[k]);
    free(sets);
    free(fetches);
    tide_session_free(s);
    tide_onnx_result_free(&io);
    tide_builder_free(b);
    return result;
}

/* ============================================================================
 * The parent: cases, children, counts
 * ========================================================================== */

/* Runs dir on backend in a child within timeout_s; fills msg. */
static enum outcome run_child(const char *dir, const char *backend, int timeout_s, char *msg,
                              size_t msg_size)
{
    int fds[2];
    msg[0] = 0;
    if (pipe(fds) != 0) {
        snprintf(msg, msg_size, "pipe: %s", strerror(errno));
        return CRASHED;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        snprintf(msg, msg_size, "fork: %s", strerror(errno));
        return CRASHED;
    }
    if (pid == 0) {
        close(fds[0]);
        char text[2048];
        enum outcome r = run_case(dir, backend, text, sizeof(text));
        char line[2200];
        int n = snprintf(line, sizeof(line), "%d %s", (int)r, r == PASS ? "" : text);
        if (n > 0 &&
            write(fds[1], line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1)) < 0)
            _exit(3);
        close(fds[1]);
        /* exit, not _exit: under LeakSanitizer the child's leaks are checked too, and a
         * nonzero status then makes the case crashed below. */
        exit(0);
    }
    close(fds[1]);
    char buf[2200];
    size_t got = 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    bool timed_out = false;
    for (;;) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = (long)timeout_s * 1000 - ((now.tv_sec - start.tv_sec) * 1000 +
                                                 (now.tv_nsec - start.tv_nsec) / 1000000);
        if (left_ms <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int r = poll(&p, 1, (int)left_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            timed_out = r == 0;
            break;
        }
        ssize_t n = read(fds[0], buf + got, sizeof(buf) - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == sizeof(buf) - 1)
            break;
    }
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    buf[got] = 0;
    if (timed_out) {
        snprintf(msg, msg_size, "timed out after %d s", timeout_s);
        return CRASHED;
    }
    if (WIFSIGNALED(status)) {
        snprintf(msg, msg_size, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
        return CRASHED;
    }
    int code = -1, at = 0;
    if (got == 0 || sscanf(buf, "%d %n", &code, &at) < 1 || code < PASS || code > CRASHED) {
        snprintf(msg, msg_size, "the child exited with status %d and no result",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return CRASHED;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(msg, msg_size, "the child reported %s, then exited with status %d",
                 outcome_names[code], WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return CRASHED;
    }
    snprintf(msg, msg_size, "%s", buf + at);
    return (enum outcome)code;
}

struct case_list {
    char **dirs;
    size_t n;
};

/* Collects dir if it is a case, otherwise its subdirectories (in name order), down to depth. */
static void collect(const char *dir, int depth, struct case_list *l)
{
    char path[4096];
    snprintf(path, sizeof(path), "%.4000s/model.onnx", dir);
    if (is_file(path)) {
        char **grown = realloc(l->dirs, (l->n + 1) * sizeof(char *));
        if (grown) {
            l->dirs = grown;
            l->dirs[l->n++] = strdup(dir);
        }
        return;
    }
    if (depth == 0)
        return;
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int k = 0; k < n; k++) {
        if (names[k]->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%.3800s/%.255s", dir, names[k]->d_name);
            if (is_dir(path))
                collect(path, depth - 1, l);
        }
        free(names[k]);
    }
    if (n >= 0)
        free(names);
}

/* Whether backend can be created here, tried in a child (a CUDA context made in this process
 * would not survive the cases' fork()); msg says why not. */
static bool backend_usable(const char *backend, char *msg, size_t msg_size)
{
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(msg, msg_size, "pipe: %s", strerror(errno));
        return false;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]), close(fds[1]);
        snprintf(msg, msg_size, "fork: %s", strerror(errno));
        return false;
    }
    if (pid == 0) {
        close(fds[0]);
        struct tide_backend_options bo = {.device_bytes = 1 << 20, .threads = 1};
        struct tide_backend *b = NULL;
        struct tide_error err = {0};
        int ok = tide_backend_create(backend, &bo, &b, &err) == TIDE_OK;
        if (ok)
            tide_backend_free(b);
        else if (write(fds[1], err.message, strnlen(err.message, sizeof(err.message))) < 0)
            _exit(3);
        close(fds[1]);
        exit(ok ? 0 : 1);
    }
    close(fds[1]);
    size_t got = 0;
    for (ssize_t n; got < msg_size - 1 && (n = read(fds[0], msg + got, msg_size - 1 - got)) != 0;) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        got += (size_t)n;
    }
    msg[got] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return true;
    if (got == 0)
        snprintf(msg, msg_size, "creating it failed (status 0x%x)", status);
    return false;
}

/* Prints one case's line with a single write, whole even beside other workers' lines. */
static void print_case(enum outcome r, const char *dir, const char *msg)
{
    char line[4096 + 2048 + 32];
    int n =
        snprintf(line, sizeof(line), "%s %s%s%s\n", outcome_names[r], dir, msg[0] ? " " : "", msg);
    if (n >= (int)sizeof(line)) {
        n = (int)sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    fflush(stdout);
    for (int off = 0; n > 0 && off < n;) {
        ssize_t w = write(STDOUT_FILENO, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (int)w;
    }
}

/* What the workers of --jobs share: the next case to take and each case's outcome (-1 until
 * its worker records it). */
struct shared_cases {
    size_t next;
    int32_t outcome[];
};

/* Runs the cases of l, jobs at a time, into counts. */
static void run_cases(const struct case_list *l, const char *backend, int timeout_s, int jobs,
                      int64_t counts[4])
{
    size_t bytes = sizeof(struct shared_cases) + (l->n ? l->n : 1) * sizeof(int32_t);
    struct shared_cases *sh =
        jobs > 1 ? mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)
                 : MAP_FAILED;
    if (sh == MAP_FAILED) {
        if (jobs > 1)
            fprintf(stderr, "tide-bench onnx-tests: --jobs: mmap: %s; running one case at a time\n",
                    strerror(errno));
        for (size_t k = 0; k < l->n; k++) {
            char msg[2048];
            enum outcome r = run_child(l->dirs[k], backend, timeout_s, msg, sizeof(msg));
            counts[r]++;
            print_case(r, l->dirs[k], msg);
        }
        return;
    }
    sh->next = 0;
    for (size_t k = 0; k < l->n; k++)
        sh->outcome[k] = -1;
    fflush(stdout);
    int started = 0;
    for (int w = 0; w < jobs; w++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "tide-bench onnx-tests: fork of worker %d: %s\n", w, strerror(errno));
            break;
        }
        if (pid == 0) {
            for (size_t k; (k = __atomic_fetch_add(&sh->next, 1, __ATOMIC_RELAXED)) < l->n;) {
                char msg[2048];
                enum outcome r = run_child(l->dirs[k], backend, timeout_s, msg, sizeof(msg));
                __atomic_store_n(&sh->outcome[k], (int32_t)r, __ATOMIC_RELEASE);
                print_case(r, l->dirs[k], msg);
            }
            _exit(0);
        }
        started++;
    }
    for (int w = 0; w < started; w++) {
        int status;
        while (wait(&status) < 0 && errno == EINTR)
            ;
    }
    /* A case no worker finished (a worker killed, or none started) counts as crashed. */
    for (size_t k = 0; k < l->n; k++) {
        int32_t r = __atomic_load_n(&sh->outcome[k], __ATOMIC_ACQUIRE);
        if (r < PASS || r > CRASHED) {
            print_case(CRASHED, l->dirs[k], "no worker ran it to the end");
            r = CRASHED;
        }
        counts[r]++;
    }
    munmap(sh, bytes);
}

#define USAGE                                                                                      \
    "usage: tide-bench onnx-tests DIR [--json] [--timeout S] [--backend NAME] [--jobs N]\n"

int tide_bench_onnx_tests(int argc, char **argv)
{
    const char *dir = NULL, *backend = "cpu";
    bool json = false;
    int timeout_s = 60, jobs = 1;
    for (int k = 1; k < argc; k++) {
        if (strcmp(argv[k], "--json") == 0) {
            json = true;
        } else if (strcmp(argv[k], "--timeout") == 0 && k + 1 < argc) {
            timeout_s = atoi(argv[++k]);
            if (timeout_s < 1) {
                fprintf(stderr, "tide-bench onnx-tests: --timeout wants seconds >= 1\n");
                return 2;
            }
        } else if (strcmp(argv[k], "--backend") == 0 && k + 1 < argc) {
            backend = argv[++k];
        } else if (strcmp(argv[k], "--jobs") == 0 && k + 1 < argc) {
            char *end;
            long v = strtol(argv[++k], &end, 10);
            if (*end || end == argv[k] || v < 1 || v > 256) {
                fprintf(stderr,
                        "tide-bench onnx-tests: --jobs wants a count from 1 to 256, not '%s'\n",
                        argv[k]);
                return 2;
            }
            jobs = (int)v;
        } else if (argv[k][0] == '-' || dir) {
            fprintf(stderr, USAGE);
            return 2;
        } else {
            dir = argv[k];
        }
    }
    if (!dir) {
        fprintf(stderr, USAGE);
        return 2;
    }
    if (!is_dir(dir)) {
        fprintf(stderr, "tide-bench onnx-tests: %s is not a directory\n", dir);
        return 1;
    }
    char why[1024];
    if (strcmp(backend, "cpu") != 0 && !backend_usable(backend, why, sizeof(why))) {
        fprintf(stderr, "tide-bench onnx-tests: backend '%s' cannot run here: %s\n", backend, why);
        return 1;
    }
    struct case_list l = {0};
    collect(dir, 3, &l);
    int64_t counts[4] = {0, 0, 0, 0};
    run_cases(&l, backend, timeout_s, jobs, counts);
    for (size_t k = 0; k < l.n; k++)
        free(l.dirs[k]);
    free(l.dirs);
    printf("onnx-tests: %" PRId64 " passed, %" PRId64 " failed, %" PRId64 " unsupported, %" PRId64
           " crashed, %zu total (backend %s)\n",
           counts[PASS], counts[FAIL], counts[UNSUPPORTED], counts[CRASHED], l.n, backend);
    if (json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_int(line, "passed", counts[PASS]);
        tide_bench_json_set_int(line, "failed", counts[FAIL]);
        tide_bench_json_set_int(line, "unsupported", counts[UNSUPPORTED]);
        tide_bench_json_set_int(line, "crashed", counts[CRASHED]);
        tide_bench_json_set_int(line, "total", (int64_t)l.n);
        tide_bench_json_set_string(line, "backend", backend);
        if (tide_bench_json_print_line(line) != 0)
            return 1;
    }
    return counts[FAIL] || counts[CRASHED] ? 1 : 0;
}
