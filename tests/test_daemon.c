/* SPDX-License-Identifier: MIT */
/*
 * test_daemon.c: integration tests of the real tided, driven over a real
 * Unix socket by libtide (tide/client.h) and, for a few cases, by tidectl.
 *
 * The tests start build/bin/tided (TIDE_BINARY_DIR, set by ctest) with the
 * CPU backend on a socket and state directory in a fresh temporary
 * directory, and check what DESIGN.md and the daemon's contract promise:
 * submit, plan, train (MLP and CNN on synthetic data, with swapping under a
 * small budget), eval-only steps, read variables, watch, cancel, checkpoint,
 * trace (the JSON read back with json-c);
 * the gRPC codes of bad graphs (naming the node), malformed and oversized
 * messages, unknown jobs and other users' jobs; two clients training at once
 * within their budgets; a client killed mid-stream; and jobs resumed from
 * their last checkpoint after a graceful (SIGTERM) and a hard (SIGKILL)
 * restart. The systemd unit is checked with systemd-analyze verify.
 * tidectl's --json lines are read back with json-c (tests/json-lines.h) and
 * compared field by field with what libtide reports.
 *
 * Other users: tests run as root in CI, so "another user" is a child that
 * drops to uid/gid 65534 and execs this very binary in a helper mode (or
 * tidectl). Children that talk gRPC always exec: gRPC is not fork-safe.
 * Without root those cases skip.
 *
 * Threads: the two-client and other-user cases train from extra threads,
 * each with its own client; those threads only record what they saw, and
 * the main thread asserts (cmocka's asserts must stay on the main thread).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "json-lines.h"
#include "onnx_builder.h"

#include <json-c/json.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <grpc/grpc_security.h>
#pragma GCC diagnostic pop

#include "tide/client.h"
#include "tide/onnx.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/models.h"
#include "tide/v1/tide.pb-c.h"
#include <zip.h>

/* The uid and gid of "another user". */
#define OTHER_UID 65534
#define OTHER_GID 65534

/* The daemon's settings in these tests. */
#define DEVICE_MEMORY "1G"
#define MAX_BUDGET    (UINT64_C(96) << 20)
#define JOB_BUDGET    (UINT64_C(16) << 20)
#define MAX_MESSAGE   (UINT64_C(4) << 20)

/* The small models: images of 1 x 8 x 8 (MLP) or 1 x 28 x 28 (CNN), in 4 classes. */
#define MLP_SIDE 8
#define CNN_SIDE 28
#define CLASSES  4

/* ============================================================================
 * Paths and the daemon process
 * ========================================================================== */

static char binary_dir[PATH_MAX - 64];
static char tided_path[PATH_MAX];
static char tidectl_path[PATH_MAX];
static char self_path[PATH_MAX];
static char temp_dir[256];
static char socket_path[512];
static char state_dir[512];
static char log_path[512];
static char target[PATH_MAX + 8];
static pid_t daemon_pid = -1;
static bool have_tided;
/* TCP with TLS and tokens, when openssl could make a certificate. */
static bool have_tls;
static int tls_port;
static char tls_cert[512], tls_key[512], tokens_path[512], tls_target[64];
#define SUBMIT_TOKEN  "test-submit-token-1f3a"
#define MONITOR_TOKEN "test-monitor-token-9c2e"

static void print_log_tail(void)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 4000 ? size - 4000 : 0, SEEK_SET);
    char buf[4001];
    size_t n = fread(buf, 1, 4000, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "---- tail of %s ----\n%s\n---- end ----\n", log_path, buf);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Connects a client to the test daemon; NULL (with a message) when it cannot. */
static tide_client *connect_client(uint32_t connect_timeout_ms)
{
    struct tide_client_options o = {.connect_timeout_ms = connect_timeout_ms,
                                    .call_timeout_ms = 120000,
                                    .stream_timeout_ms = 120000};
    tide_client *c = NULL;
    if (tide_client_connect(target, &o, &c) != 0) {
        if (connect_timeout_ms > 1000)
            fprintf(stderr, "connect %s: %s\n", target, tide_client_error_message(c));
        tide_client_free(c);
        return NULL;
    }
    return c;
}

/* Starts tided and waits until it answers; false (with its log) when it does not. */
static bool daemon_start(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        char listen[32];
        snprintf(listen, sizeof(listen), "127.0.0.1:%d", tls_port);
        char *argv[32] = {tided_path,    "--socket",         socket_path, "--state-dir",
                          state_dir,     "--backend",        "cpu",       "--device-memory",
                          DEVICE_MEMORY, "--default-budget", "16M",       "--max-budget",
                          "96M",         "--max-message",    "4M",        "--log-level",
                          "debug"};
        int n = 17;
        if (have_tls) {
            argv[n++] = "--listen", argv[n++] = listen;
            argv[n++] = "--tls-cert", argv[n++] = tls_cert;
            argv[n++] = "--tls-key", argv[n++] = tls_key;
            argv[n++] = "--tokens", argv[n++] = tokens_path;
        }
        argv[n] = NULL;
        execv(tided_path, argv);
        _exit(127);
    }
    daemon_pid = pid;
    double deadline = now_s() + 60;
    while (now_s() < deadline) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            fprintf(stderr, "tided exited at start-up (status 0x%x)\n", status);
            print_log_tail();
            daemon_pid = -1;
            return false;
        }
        struct stat st;
        if (stat(socket_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            tide_client *c = connect_client(1000);
            if (c) {
                struct tide_daemon_status s;
                int code = tide_client_status(c, &s, NULL, NULL);
                tide_client_free(c);
                if (code == 0) {
                    /* Let "another user" reach the socket too. */
                    chmod(socket_path, 0666);
                    return true;
                }
            }
        }
        sleep_ms(100);
    }
    fprintf(stderr, "tided did not answer within 60 s\n");
    print_log_tail();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    daemon_pid = -1;
    return false;
}

/* Sends sig to tided and waits for it to exit; returns its wait status, or -1 on timeout. */
static int daemon_stop(int sig, double timeout_s)
{
    if (daemon_pid <= 0)
        return -1;
    kill(daemon_pid, sig);
    double deadline = now_s() + timeout_s;
    int status = -1;
    while (now_s() < deadline) {
        pid_t r = waitpid(daemon_pid, &status, WNOHANG);
        if (r == daemon_pid) {
            daemon_pid = -1;
            return status;
        }
        sleep_ms(50);
    }
    fprintf(stderr, "tided did not exit within %.0f s of signal %d\n", timeout_s, sig);
    print_log_tail();
    kill(daemon_pid, SIGKILL);
    waitpid(daemon_pid, &status, 0);
    daemon_pid = -1;
    return -1;
}

/* Skips the test (with the reason) when there is no daemon to test. */
#define NEED_DAEMON()                                                                              \
    do {                                                                                           \
        if (!have_tided) {                                                                         \
            fprintf(stderr, "skipped: %s was not built\n", tided_path);                            \
            skip();                                                                                \
        }                                                                                          \
        if (daemon_pid <= 0) {                                                                     \
            fprintf(stderr, "skipped: tided is not running (see the log above)\n");                \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static void remove_tree(const char *path)
{
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", path, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
}

/* A free TCP port on the loopback interface (free now; tided binds it a moment later). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* Makes a self-signed certificate for localhost and a token file; false without openssl. */
static bool make_tls_files(void)
{
    snprintf(tls_cert, sizeof(tls_cert), "%s/cert.pem", temp_dir);
    snprintf(tls_key, sizeof(tls_key), "%s/key.pem", temp_dir);
    snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", temp_dir);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execlp("openssl", "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
               tls_key, "-out", tls_cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
               "subjectAltName=DNS:localhost,IP:127.0.0.1", (char *)NULL);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return false;
    FILE *f = fopen(tokens_path, "w");
    if (!f)
        return false;
    fprintf(f, "# test tokens\n%s submit\n%s monitor\n", SUBMIT_TOKEN, MONITOR_TOKEN);
    fclose(f);
    chmod(tls_key, 0600);
    chmod(tokens_path, 0600);
    tls_port = free_port();
    snprintf(tls_target, sizeof(tls_target), "127.0.0.1:%d", tls_port);
    return tls_port > 0;
}

static int group_setup(void **state)
{
    (void)state;
    const char *dir = getenv("TIDE_BINARY_DIR");
    if (dir && *dir) {
        snprintf(binary_dir, sizeof(binary_dir), "%s", dir);
    } else {
        /* Run by hand: this binary lives in <build>/bin. */
        char *slash = strrchr(self_path, '/');
        snprintf(binary_dir, sizeof(binary_dir), "%.*s/..", slash ? (int)(slash - self_path) : 1,
                 slash ? self_path : ".");
    }
    snprintf(tided_path, sizeof(tided_path), "%s/bin/tided", binary_dir);
    snprintf(tidectl_path, sizeof(tidectl_path), "%s/bin/tidectl", binary_dir);
    have_tided = access(tided_path, X_OK) == 0;

    snprintf(temp_dir, sizeof(temp_dir), "/tmp/tide-test-daemon-XXXXXX");
    if (!mkdtemp(temp_dir))
        return -1;
    chmod(temp_dir, 0755); /* "another user" must reach the socket */
    snprintf(socket_path, sizeof(socket_path), "%s/tided.sock", temp_dir);
    snprintf(state_dir, sizeof(state_dir), "%s/state", temp_dir);
    snprintf(log_path, sizeof(log_path), "%s/tided.log", temp_dir);
    snprintf(target, sizeof(target), "unix:%s", socket_path);
    have_tls = make_tls_files();
    if (have_tided)
        daemon_start();
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (daemon_pid > 0) {
        int status = daemon_stop(SIGTERM, 120);
        if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fprintf(stderr, "tided did not stop cleanly on SIGTERM (status 0x%x)\n", status);
    }
    if (getenv("TIDE_KEEP_TEST_DIR"))
        fprintf(stderr, "kept %s\n", temp_dir);
    else if (temp_dir[0])
        remove_tree(temp_dir);
    return 0;
}

/* ============================================================================
 * Models, specs and feeding
 * ========================================================================== */

struct graph {
    int64_t side; /* images are 1 x side x side */
    uint8_t *bytes;
    size_t len;
    int64_t image_dims[TIDE_BUILDER_MAX_RANK];
    int32_t image_rank;
};

/* Builds a small MLP (1 x 8 x 8 images) or CNN (1 x 28 x 28) for batch examples of 4 classes. */
static void build_graph(bool cnn, int64_t batch, struct graph *g)
{
    memset(g, 0, sizeof(*g));
    g->side = cnn ? CNN_SIDE : MLP_SIDE;
    tide_builder *b = tide_builder_new();
    assert_non_null(b);
    tide_ref logits;
    if (cnn) {
        logits = tide_model_cnn(b, batch, 1, CNN_SIDE, CNN_SIDE, CLASSES);
    } else {
        int64_t hidden[1] = {16};
        logits = tide_model_mlp(b, batch, MLP_SIDE * MLP_SIDE, hidden, 1, CLASSES);
    }
    if (logits.id < 0)
        fail_msg("building the model: %s", tide_builder_error(b));
    tide_ref images = tide_builder_find(b, TIDE_MODEL_IMAGES);
    assert_int_equal(tide_builder_shape(b, images, g->image_dims, &g->image_rank), 0);
    assert_int_equal(tide_builder_serialize(b, &g->bytes, &g->len), 0);
    tide_builder_free(b);
}

static const char *const logits_fetch[] = {TIDE_MODEL_LOGITS};

static void make_spec(const struct graph *g, const char *name, uint64_t budget,
                      struct tide_job_spec *spec)
{
    tide_job_spec_init(spec);
    spec->name = name;
    spec->graph = g->bytes;
    spec->graph_len = g->len;
    spec->budget_bytes = budget;
    spec->optimizer = TIDE_JOB_OPTIMIZER_SGD;
    spec->learning_rate = 0.1f;
    spec->fetches = logits_fetch;
    spec->n_fetches = 1;
    spec->seed = 7;
}

/* Asserts that call returned 0, printing the client's error otherwise. */
#define CHECK_OK(c, call)                                                                          \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != 0)                                                                            \
            fail_msg("%s: %s: %s", #call, tide_code_name(code_), tide_client_error_message(c));    \
    } while (0)

/* Asserts that call failed with code want, and that the message holds needle (if any). */
#define CHECK_CODE(c, call, want, needle)                                                          \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != (want))                                                                       \
            fail_msg("%s: want %s, got %s: %s", #call, tide_code_name(want),                       \
                     tide_code_name(code_), tide_client_error_message(c));                         \
        assert_int_equal(tide_client_error_code(c), (want));                                       \
        const char *needle_ = (needle);                                                            \
        if (needle_ && !strstr(tide_client_error_message(c), needle_))                             \
            fail_msg("%s: the message \"%s\" does not mention \"%s\"", #call,                      \
                     tide_client_error_message(c), needle_);                                       \
    } while (0)

/*
 * A feeder: batches of a synthetic dataset, until steps_left runs out or
 * stop is set; records what the step results said. Safe to run on another
 * thread: it never asserts.
 */
struct feeder {
    const struct graph *g;
    tide_dataset *ds;
    tide_dataset_iter *it;
    int64_t batch;
    int64_t steps_left; /* < 0: until stop */
    _Atomic int *stop;
    bool eval_only;
    /* results (read by the main thread while a trainer thread runs) */
    _Atomic int64_t results;
    uint64_t first_step, last_step;
    float last_loss;
    bool bad_loss; /* a NaN or infinite loss */
    bool steps_not_increasing;
    bool eval_flag_wrong;
    uint64_t max_high_water;
    bool logits_missing;
    FILE *report; /* helper mode: a line per step goes here */
};

static void feeder_init(struct feeder *f, const struct graph *g, int64_t batch, int64_t steps,
                        uint64_t seed)
{
    memset(f, 0, sizeof(*f));
    f->g = g;
    f->batch = batch;
    f->steps_left = steps;
    struct tide_synthetic_options o = {.count = 512,
                                       .channels = 1,
                                       .height = g->side,
                                       .width = g->side,
                                       .classes = CLASSES,
                                       .seed = seed};
    char err[256];
    if (tide_dataset_open_synthetic(&o, "train", &f->ds, err, sizeof(err)) != 0 ||
        tide_dataset_iter_new(f->ds, batch, seed, TIDE_DATASET_SHUFFLE, &f->it, err, sizeof(err)) !=
            0) {
        fprintf(stderr, "synthetic dataset: %s\n", err);
        abort();
    }
}

/* Forgets the steps seen so far, before the feeder trains another job. */
static void feeder_restart(struct feeder *f)
{
    f->results = 0;
    f->first_step = f->last_step = 0;
}

static void feeder_free(struct feeder *f)
{
    tide_dataset_iter_free(f->it);
    tide_dataset_free(f->ds);
}

static int feeder_feed(void *user, tide_feeds *feeds)
{
    struct feeder *f = user;
    if (f->stop && *f->stop)
        return 0;
    if (f->steps_left == 0)
        return 0;
    if (f->steps_left > 0)
        f->steps_left--;
    float *images = tide_feeds_buffer(feeds, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, f->g->image_rank,
                                      f->g->image_dims);
    int32_t labels[256];
    if (!images || f->batch > 256)
        return -1;
    if (tide_dataset_iter_next(f->it, images, labels) == 0)
        tide_dataset_iter_next(f->it, images, labels); /* the next epoch */
    int64_t dims[1] = {f->batch};
    if (tide_feeds_set(feeds, TIDE_MODEL_LABELS, TIDE_DT_INT32, 1, dims, labels) != 0)
        return -1;
    tide_feeds_set_eval_only(feeds, f->eval_only);
    return 1;
}

static int feeder_step(void *user, const struct tide_step_result *r)
{
    struct feeder *f = user;
    if (f->results == 0)
        f->first_step = r->step;
    else if (!f->eval_only && r->step <= f->last_step)
        f->steps_not_increasing = true;
    f->results++;
    f->last_step = r->step;
    f->last_loss = r->loss;
    if (!isfinite(r->loss))
        f->bad_loss = true;
    if (r->eval_only != f->eval_only)
        f->eval_flag_wrong = true;
    if (r->device_high_water_bytes > f->max_high_water)
        f->max_high_water = r->device_high_water_bytes;
    const struct tide_tensor *logits = tide_step_result_fetch(r, TIDE_MODEL_LOGITS);
    if (!logits || logits->bytes != (size_t)f->batch * CLASSES * sizeof(float))
        f->logits_missing = true;
    if (f->report) {
        fprintf(f->report, "step %" PRIu64 "\n", r->step);
        fflush(f->report);
    }
    return 0;
}

/* Submits spec and returns the job's id in id (TIDE_JOB_ID_MAX bytes). */
static void submit(tide_client *c, const struct tide_job_spec *spec, char *id)
{
    struct tide_job_info job;
    CHECK_OK(c, tide_client_submit(c, spec, &job));
    assert_true(job.id[0] != '\0');
    snprintf(id, TIDE_JOB_ID_MAX, "%s", job.id);
}

/* Trains job id for steps steps from the feeder f, asserting a clean run. */
static void train_steps(tide_client *c, const char *id, struct feeder *f, int64_t steps)
{
    f->steps_left = steps;
    int64_t before = f->results;
    CHECK_OK(c, tide_client_train(c, id, feeder_feed, feeder_step, f));
    assert_int_equal(f->results - before, steps);
    assert_false(f->bad_loss);
    assert_false(f->steps_not_increasing);
    assert_false(f->logits_missing);
}

/* Reads every variable of job id; the caller frees the set. */
static tide_variables *read_all(tide_client *c, const char *id)
{
    tide_variables *v = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &v));
    assert_non_null(v);
    assert_true(tide_variables_count(v) > 0);
    return v;
}

/* Asserts that two sets of variables hold the same names and the same bytes. */
static void assert_same_variables(const tide_variables *a, const tide_variables *b)
{
    assert_int_equal(tide_variables_count(a), tide_variables_count(b));
    for (size_t i = 0; i < tide_variables_count(a); i++) {
        const struct tide_tensor *x = tide_variables_at(a, i);
        const struct tide_tensor *y = tide_variables_find(b, x->name);
        if (!y)
            fail_msg("variable %s is missing", x->name);
        assert_int_equal(x->bytes, y->bytes);
        if (memcmp(x->data, y->data, x->bytes) != 0)
            fail_msg("variable %s differs", x->name);
    }
}

static bool variables_equal(const tide_variables *a, const tide_variables *b)
{
    if (tide_variables_count(a) != tide_variables_count(b))
        return false;
    for (size_t i = 0; i < tide_variables_count(a); i++) {
        const struct tide_tensor *x = tide_variables_at(a, i);
        const struct tide_tensor *y = tide_variables_find(b, x->name);
        if (!y || x->bytes != y->bytes || memcmp(x->data, y->data, x->bytes) != 0)
            return false;
    }
    return true;
}

/* ============================================================================
 * Child processes: tidectl, and this binary in a helper mode
 * ========================================================================== */

/* Runs argv as uid (with OTHER_GID), or as we are for uid < 0: child.h. */
static void run_program(char *const argv[], int uid, struct tide_test_run *r)
{
    tide_test_run_program(argv, uid, OTHER_GID, r);
}

/* Runs tidectl with the test socket and args (NULL-terminated). */
static void run_tidectl(struct tide_test_run *r, int uid, ...)
{
    char *argv[32];
    int n = 0;
    argv[n++] = tidectl_path;
    argv[n++] = (char *)"--socket";
    argv[n++] = socket_path;
    va_list args;
    va_start(args, uid);
    for (char *a; n < 31 && (a = va_arg(args, char *)) != NULL;)
        argv[n++] = a;
    va_end(args);
    argv[n] = NULL;
    run_program(argv, uid, r);
}

/* ============================================================================
 * Raw gRPC calls: what libtide would never send
 * ========================================================================== */

/*
 * Sends payload as the request of the unary method, bypassing protobuf;
 * returns the status code and fills message.
 */
static int raw_unary(const char *method, const void *payload, size_t len, char *message,
                     size_t message_size)
{
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                    .key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
                    .value.integer = -1};
    grpc_channel_args args = {.num_args = 1, .args = &arg};
    grpc_channel *channel = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(60000, GPR_TIMESPAN));
    grpc_slice path = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, path,
                                               NULL, deadline, NULL);
    grpc_slice_unref(path);
    grpc_slice slice = grpc_slice_from_copied_buffer(payload, len);
    grpc_byte_buffer *request = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    grpc_byte_buffer *response = NULL;
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    void *tag = (void *)1;
    if (grpc_call_start_batch(call, ops, 6, tag, NULL) == GRPC_CALL_OK)
        grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    char *text = grpc_slice_to_c_string(details);
    snprintf(message, message_size, "%s", text ? text : "");
    gpr_free(text);
    grpc_slice_unref(details);
    if (response)
        grpc_byte_buffer_destroy(response);
    grpc_byte_buffer_destroy(request);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(channel);
    grpc_shutdown();
    return (int)status;
}

/* ============================================================================
 * Tests: the system unit
 * ========================================================================== */

/* systemd/tided.service passes systemd-analyze verify, with ExecStart at the built tided. */
static void test_systemd_unit_verifies(void **state)
{
    (void)state;
    if (access("/usr/bin/systemd-analyze", X_OK) != 0 &&
        access("/bin/systemd-analyze", X_OK) != 0) {
        fprintf(stderr, "skipped: systemd-analyze is not installed\n");
        skip();
    }
    if (!have_tided) {
        fprintf(stderr, "skipped: %s was not built, and the unit's ExecStart must exist\n",
                tided_path);
        skip();
    }
    const char *source = getenv("TIDE_SOURCE_DIR");
    char unit_in[PATH_MAX], unit_out[PATH_MAX], dir[512];
    snprintf(unit_in, sizeof(unit_in), "%s/systemd/tided.service", source ? source : "..");
    snprintf(dir, sizeof(dir), "%s/systemd", temp_dir);
    mkdir(dir, 0755);
    snprintf(unit_out, sizeof(unit_out), "%s/tided.service", dir);
    FILE *in = fopen(unit_in, "r");
    if (!in)
        fail_msg("cannot read %s", unit_in);
    FILE *out = fopen(unit_out, "w");
    assert_non_null(out);
    char line[1024];
    int exec_lines = 0;
    while (fgets(line, sizeof(line), in)) {
        char *tided = strstr(line, "/tided");
        if (strncmp(line, "ExecStart=/", 11) == 0 && tided) {
            /* ExecStart=/usr/sbin/tided ARGS: the built binary, the same ARGS. */
            fprintf(out, "ExecStart=%s%s", tided_path, tided + 6);
            exec_lines++;
        } else {
            fputs(line, out);
        }
    }
    fclose(in);
    fclose(out);
    assert_int_equal(exec_lines, 1);
    char *argv[] = {(char *)"/usr/bin/systemd-analyze", (char *)"verify", unit_out, NULL};
    if (access(argv[0], X_OK) != 0)
        argv[0] = (char *)"/bin/systemd-analyze";
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_program(argv, -1, r);
    if (r->exit_code != 0)
        fail_msg("systemd-analyze verify %s: exit %d\n%s%s", unit_out, r->exit_code, r->out,
                 r->err);
    /* Warnings count too: the unit must verify silently. */
    if (strstr(r->err, "tided.service"))
        fail_msg("systemd-analyze verify warned:\n%s", r->err);
    free(r);
}

/* ============================================================================
 * Tests: jobs over libtide
 * ========================================================================== */

static void test_status(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_string_equal(s.backend, "cpu");
    assert_true(s.version[0] != '\0');
    assert_int_equal(s.device_total_bytes, UINT64_C(1) << 30);
    assert_int_equal(s.max_job_budget_bytes, MAX_BUDGET);
    assert_int_equal(s.default_job_budget_bytes, JOB_BUDGET);
    assert_int_equal(tide_client_error_code(c), 0);
    assert_string_equal(tide_client_error_message(c), "");
    tide_client_free(c);
}

/* Connecting where nothing listens fails fast with UNAVAILABLE and a helpful message. */
static void test_connect_failure(void **state)
{
    (void)state;
    char missing[PATH_MAX + 16];
    snprintf(missing, sizeof(missing), "unix:%s/nobody-here.sock", temp_dir);
    tide_client *c = NULL;
    double t0 = now_s();
    int code = tide_client_connect(missing, NULL, &c);
    assert_int_equal(code, TIDE_CODE_UNAVAILABLE);
    assert_non_null(c);
    assert_int_equal(tide_client_error_code(c), TIDE_CODE_UNAVAILABLE);
    assert_non_null(strstr(tide_client_error_message(c), "tided"));
    assert_true(now_s() - t0 < 5);
    tide_client_free(c);
    tide_client_free(NULL);
}

/*
 * A fitting plan's memory timeline, as libtide decoded it from the daemon's
 * reply, against the report's own fields, which travel apart from it: the
 * budget, the predicted peak (the highest arena top of any partition), the
 * partitions (the most bytes live at one position is the largest
 * partition's resident bytes), and a swap tick for every swap when bytes
 * are swapped.
 */
static void check_timeline(const struct tide_job_plan_report *p)
{
    const struct tide_memory_timeline *t = &p->timeline;
    assert_true(t->n_positions >= p->nodes);
    assert_true(t->n_points > 0 && t->n_points <= TIDE_MEMORY_TIMELINE_MAX_POINTS);
    assert_int_equal(t->budget_bytes, p->budget_bytes);
    assert_int_equal(t->predicted_peak_bytes, p->predicted_peak_bytes);
    uint32_t next = 0;
    uint64_t most = 0;
    for (uint32_t i = 0; i < t->n_points; i++) {
        const struct tide_memory_timeline_point *pt = &t->points[i];
        assert_int_equal(pt->first, next);
        assert_true(pt->first <= pt->position && pt->position <= pt->last);
        next = pt->last + 1;
        uint64_t sum = 0;
        for (int k = 0; k < TIDE_MEMORY_CATEGORY_COUNT; k++)
            sum += pt->bytes[k];
        if (sum > most)
            most = sum;
    }
    assert_int_equal(next, t->n_positions);
    assert_int_equal(most, t->live_peak_bytes);
    assert_int_equal(t->n_partitions, p->n_partitions);
    uint64_t resident = 0, top = 0;
    for (uint32_t i = 0; i < p->n_partitions; i++) {
        if (p->partitions[i].resident_bytes > resident)
            resident = p->partitions[i].resident_bytes;
        if (t->partitions[i].arena_top_bytes > top)
            top = t->partitions[i].arena_top_bytes;
    }
    assert_int_equal(t->live_peak_bytes, resident);
    assert_int_equal(top, p->predicted_peak_bytes);
    assert_int_equal(t->n_swap_outs > 0, p->swap_out_bytes > 0);
    assert_int_equal(t->n_swap_ins > 0, p->swap_in_bytes > 0);
}

/* Plan, submit, train an MLP a few steps, get and list it. */
static void test_submit_plan_train(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "mlp", JOB_BUDGET, &spec);

    struct tide_job_plan_report plan;
    CHECK_OK(c, tide_client_plan(c, &spec, &plan));
    assert_true(plan.fits);
    assert_true(plan.predicted_peak_bytes > 0);
    assert_true(plan.predicted_peak_bytes <= JOB_BUDGET);
    assert_true(plan.nodes > 0);
    check_timeline(&plan);
    tide_job_plan_report_clear(&plan);
    assert_null(plan.partitions);
    assert_null(plan.timeline.points);

    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 1);
    train_steps(c, id, &f, 5);
    assert_int_equal(f.last_step, f.first_step + 4);
    assert_true(f.max_high_water <= JOB_BUDGET);

    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_string_equal(job.id, id);
    assert_string_equal(job.name, "mlp");
    assert_int_equal(job.steps, 5);
    assert_int_equal(job.owner_uid, (uint32_t)getuid());
    assert_int_equal(job.device_budget_bytes, JOB_BUDGET);
    assert_true(job.state == TIDE_JOB_READY || job.state == TIDE_JOB_RUNNING ||
                job.state == TIDE_JOB_DONE);
    assert_true(isfinite(job.last_loss));

    struct tide_job_info *jobs;
    size_t n;
    CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found |= strcmp(jobs[i].id, id) == 0;
    assert_true(found);
    free(jobs);

    /* More steps on the same job continue its step count. */
    train_steps(c, id, &f, 3);
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.steps, 8);

    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/*
 * The CNN's memory plans: the resident peak (swap off, variables on the
 * device), and the smallest budget the swapper can fit with partitions of 4
 * nodes — below the resident peak, since the plan swaps.
 */
static void cnn_plans(tide_client *c, struct tide_job_spec *spec, uint64_t *resident_peak,
                      uint64_t *min_budget)
{
    spec->swap = TIDE_JOB_SWAP_OFF;
    spec->vars_home = TIDE_JOB_VARS_HOME_DEVICE;
    struct tide_job_plan_report p;
    CHECK_OK(c, tide_client_plan(c, spec, &p));
    assert_true(p.fits);
    *resident_peak = p.predicted_peak_bytes;
    assert_true(*resident_peak > 0);
    tide_job_plan_report_clear(&p);

    /* A third of the peak: too little for the CNN's largest node, so it reports the minimum. */
    spec->swap = TIDE_JOB_SWAP_AUTO;
    spec->vars_home = TIDE_JOB_VARS_HOME_AUTO;
    spec->partition_size = 4;
    spec->budget_bytes = *resident_peak / 3;
    CHECK_OK(c, tide_client_plan(c, spec, &p));
    assert_false(p.fits);
    assert_true(p.message[0] != '\0');
    assert_true(p.min_budget_node[0] != '\0');
    assert_true(p.min_budget_bytes > spec->budget_bytes);
    assert_int_equal(p.timeline.n_positions, 0); /* no plan, no timeline */
    assert_null(p.timeline.points);
    *min_budget = p.min_budget_bytes;
    tide_job_plan_report_clear(&p);
}

/* A CNN under a budget below its resident peak trains by swapping, within the budget. */
static void test_cnn_swaps_within_budget(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(true, 8, &g);
    struct tide_job_spec spec;
    make_spec(&g, "cnn", JOB_BUDGET, &spec);
    uint64_t peak, min_budget;
    cnn_plans(c, &spec, &peak, &min_budget);
    assert_true(min_budget < peak);

    /* Halfway between the minimum and the resident peak: swapping makes up the rest. */
    spec.budget_bytes = min_budget + (peak - min_budget) / 2;
    struct tide_job_plan_report plan;
    CHECK_OK(c, tide_client_plan(c, &spec, &plan));
    if (!plan.fits)
        fail_msg("the CNN does not fit %" PRIu64 " bytes: %s", spec.budget_bytes, plan.message);
    assert_true(plan.predicted_peak_bytes <= spec.budget_bytes);
    assert_true(plan.swap_out_bytes > 0);
    assert_true(plan.swap_in_bytes > 0);
    assert_true(plan.n_partitions > 1);
    check_timeline(&plan);
    uint64_t budget = spec.budget_bytes;
    tide_job_plan_report_clear(&plan);

    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 8, 0, 2);
    train_steps(c, id, &f, 4);
    assert_true(f.max_high_water > 0);
    assert_true(f.max_high_water <= budget);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_true(job.h2d_bytes_total > 0 && job.d2h_bytes_total > 0);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* A plan asked for exactly the min_budget_bytes a plan reported fits. */
static void test_min_budget_fits(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(true, 8, &g);
    struct tide_job_spec spec;
    make_spec(&g, "cnn-min", JOB_BUDGET, &spec);
    uint64_t peak, min_budget;
    cnn_plans(c, &spec, &peak, &min_budget);
    spec.budget_bytes = min_budget;
    struct tide_job_plan_report plan;
    CHECK_OK(c, tide_client_plan(c, &spec, &plan));
    if (!plan.fits)
        fail_msg("the plan does not fit the min_budget_bytes (%" PRIu64 ") it reported: %s",
                 min_budget, plan.message);
    assert_true(plan.predicted_peak_bytes <= min_budget);
    tide_job_plan_report_clear(&plan);
    free(g.bytes);
    tide_client_free(c);
}

/* Eval-only steps change no variable and no step count; ReadVariables sees the model. */
static void test_eval_only_and_read_variables(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "eval", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 3);
    train_steps(c, id, &f, 2);

    tide_variables *before = read_all(c, id);
    const struct tide_tensor *w = tide_variables_find(before, "fc1/w");
    assert_non_null(w);
    assert_int_equal(w->dtype, TIDE_DT_FLOAT32);
    assert_int_equal(w->rank, 2);
    assert_int_equal(w->dims[0], MLP_SIDE * MLP_SIDE);
    assert_int_equal(w->dims[1], 16);
    assert_int_equal(w->bytes, MLP_SIDE * MLP_SIDE * 16 * sizeof(float));

    /* Only the names asked for. */
    const char *names[] = {"fc1/w"};
    tide_variables *one = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, names, 1, &one));
    assert_int_equal(tide_variables_count(one), 1);
    assert_string_equal(tide_variables_at(one, 0)->name, "fc1/w");
    tide_variables_free(one);

    f.eval_only = true;
    int64_t results = f.results;
    f.steps_left = 3;
    CHECK_OK(c, tide_client_train(c, id, feeder_feed, feeder_step, &f));
    assert_int_equal(f.results - results, 3);
    assert_false(f.eval_flag_wrong);
    assert_false(f.logits_missing);
    tide_variables *after = read_all(c, id);
    assert_same_variables(before, after);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.steps, 2);

    /* A training step does change them. */
    f.eval_only = false;
    train_steps(c, id, &f, 1);
    tide_variables *trained = read_all(c, id);
    assert_false(variables_equal(before, trained));
    tide_variables_free(before);
    tide_variables_free(after);
    tide_variables_free(trained);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* A watcher on another thread sees the job's steps while it trains. */
struct watcher {
    char id[TIDE_JOB_ID_MAX];
    _Atomic int code;
    char message[512];
    _Atomic int steps_seen;
    _Atomic int events;
    _Atomic int wrong_job;
};

static int watcher_event(void *user, const struct tide_job_event *e)
{
    struct watcher *w = user;
    w->events++;
    if (strcmp(e->job->id, w->id) != 0)
        w->wrong_job++;
    if (e->kind == TIDE_EVENT_STEP && e->step)
        w->steps_seen++;
    return w->steps_seen >= 2; /* enough: stop watching */
}

static void *watcher_thread(void *arg)
{
    struct watcher *w = arg;
    tide_client *c = connect_client(5000);
    if (!c) {
        w->code = -1;
        return NULL;
    }
    w->code = tide_client_watch(c, w->id, 0, watcher_event, w);
    snprintf(w->message, sizeof(w->message), "%s", tide_client_error_message(c));
    tide_client_free(c);
    return NULL;
}

static void test_watch(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "watched", JOB_BUDGET, &spec);
    struct watcher w;
    memset(&w, 0, sizeof(w));
    submit(c, &spec, w.id);

    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, watcher_thread, &w), 0);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 4);
    /* Train until the watcher has seen two steps (it may subscribe late). */
    double deadline = now_s() + 60;
    while (w.steps_seen < 2 && w.code == 0 && now_s() < deadline)
        train_steps(c, w.id, &f, 2);
    pthread_join(thread, NULL);
    if (w.code != 0)
        fail_msg("watch: %s: %s", tide_code_name(w.code), w.message);
    assert_true(w.steps_seen >= 2);
    assert_int_equal(w.wrong_job, 0);

    /* Watching an unknown job is NOT_FOUND. */
    CHECK_CODE(c, tide_client_watch(c, "no-such-job", 0, watcher_event, &w), TIDE_CODE_NOT_FOUND,
               NULL);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* A cancelled job says so and cannot train. */
static void test_cancel(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "cancelled", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 5);
    train_steps(c, id, &f, 1);

    struct tide_job_info job;
    CHECK_OK(c, tide_client_cancel(c, id, &job));
    assert_int_equal(job.state, TIDE_JOB_CANCELLED);
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.state, TIDE_JOB_CANCELLED);
    f.steps_left = 2;
    CHECK_CODE(c, tide_client_train(c, id, feeder_feed, feeder_step, &f),
               TIDE_CODE_FAILED_PRECONDITION, NULL);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/*
 * A client that submits and dies while its job compiles (kill -9: no
 * Cancel call) was told nothing, so the job is cancelled rather than left
 * READY with its budget until idle-timeout.
 */
static void test_submitter_killed_while_compiling(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct tide_daemon_status before, after;
    CHECK_OK(c, tide_client_status(c, &before, NULL, NULL));
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0)
            _exit(126);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        /* An unrolled LSTM of 400 steps: its plan takes a good part of a second. */
        execl(tidectl_path, tidectl_path, "--socket", socket_path, "train", "--name", "abandoned",
              "--model", "lstm", "--seq-len", "400", "--dataset", "synthetic", "--steps", "5",
              "--no-eval", (char *)NULL);
        _exit(127);
    }
    char id[TIDE_JOB_ID_MAX] = "";
    enum tide_job_state seen = TIDE_JOB_UNSPECIFIED;
    for (double deadline = now_s() + 60; !id[0] && now_s() < deadline; sleep_ms(1)) {
        struct tide_job_info *jobs;
        size_t n;
        CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
        for (size_t i = 0; i < n; i++) {
            if (strcmp(jobs[i].name, "abandoned") == 0) {
                snprintf(id, sizeof(id), "%s", jobs[i].id);
                seen = jobs[i].state;
            }
        }
        free(jobs);
    }
    kill(pid, SIGKILL);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(id[0]);
    if (seen != TIDE_JOB_COMPILING)
        fail_msg("job %s was %s when first seen, not COMPILING: the test needs a slower plan", id,
                 tide_job_state_name(seen));

    struct tide_job_info job;
    for (double deadline = now_s() + 30;; sleep_ms(20)) {
        CHECK_OK(c, tide_client_get(c, id, &job));
        if (job.state != TIDE_JOB_COMPILING || now_s() > deadline)
            break;
    }
    assert_int_equal(job.state, TIDE_JOB_CANCELLED);
    assert_non_null(strstr(job.message, "its submitter left before the reply"));
    /* Its budget comes back once the compilation stopped at its next pass. */
    for (double deadline = now_s() + 30;; sleep_ms(20)) {
        CHECK_OK(c, tide_client_status(c, &after, NULL, NULL));
        if (after.device_reserved_bytes == before.device_reserved_bytes || now_s() > deadline)
            break;
    }
    assert_int_equal(after.device_reserved_bytes, before.device_reserved_bytes);
    tide_client_free(c);
}

/* A checkpoint lands under <state-dir>/jobs/<id>/ and the job remembers its step. */
static void test_checkpoint(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "checkpointed", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 6);
    train_steps(c, id, &f, 3);

    struct tide_checkpoint_info k;
    CHECK_OK(c, tide_client_checkpoint(c, id, &k));
    assert_int_equal(k.step, 3);
    assert_true(k.bytes > 0);
    char dir[PATH_MAX + TIDE_JOB_ID_MAX];
    snprintf(dir, sizeof(dir), "%s/jobs/%s/", state_dir, id);
    if (strncmp(k.path, dir, strlen(dir)) != 0)
        fail_msg("checkpoint path %s is not under %s", k.path, dir);
    struct stat st;
    assert_int_equal(stat(k.path, &st), 0);
    assert_true(st.st_size > 0);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.last_checkpoint_step, 3);

    /* Once the job has ended, its variables come from checkpoint.pb: whole, or an error. */
    CHECK_OK(c, tide_client_cancel(c, id, &job));
    tide_variables *vars = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &vars));
    assert_true(tide_variables_count(vars) > 0);
    tide_variables_free(vars);
    char latest[PATH_MAX + 64];
    snprintf(latest, sizeof(latest), "%s/jobs/%s/checkpoint.pb", state_dir, id);
    assert_int_equal(truncate(latest, st.st_size - 7), 0);
    vars = NULL;
    CHECK_CODE(c, tide_client_read_variables(c, id, NULL, 0, &vars), TIDE_CODE_INTERNAL,
               "is truncated: its header promises");
    assert_non_null(strstr(tide_client_error_message(c), latest));
    tide_variables_free(vars);
    assert_int_equal(truncate(latest, 0), 0);
    spec.resume_from = id;
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_INTERNAL, "is empty (0 bytes)");
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* The checkpoint-<step>.pb files in a job's directory. */
static int count_checkpoints(const char *id, bool *has_latest)
{
    char dir[PATH_MAX + TIDE_JOB_ID_MAX];
    snprintf(dir, sizeof(dir), "%s/jobs/%s", state_dir, id);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    *has_latest = false;
    for (struct dirent *e = readdir(d); e; e = readdir(d)) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "checkpoint-", 11) == 0 && len > 3 &&
            strcmp(e->d_name + len - 3, ".pb") == 0)
            n++;
        if (strcmp(e->d_name, "checkpoint.pb") == 0)
            *has_latest = true;
    }
    closedir(d);
    return n;
}

/* CheckpointPolicy.keep: a checkpoint every step keeps only the newest two files. */
static void test_checkpoint_keep(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "kept", JOB_BUDGET, &spec);
    spec.checkpoint_every = 1;
    spec.checkpoint_keep = 2;
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 8);
    train_steps(c, id, &f, 4);
    /* Runs after the periodic checkpoints in the worker's order, so they are on disk. */
    struct tide_checkpoint_info k;
    CHECK_OK(c, tide_client_checkpoint(c, id, &k));
    assert_int_equal(k.step, 4);
    bool has_latest;
    assert_int_equal(count_checkpoints(id, &has_latest), 2);
    assert_true(has_latest);
    /* checkpoint.pb is the newest one. */
    char latest[PATH_MAX + TIDE_JOB_ID_MAX + 32], newest[PATH_MAX + TIDE_JOB_ID_MAX + 32];
    snprintf(latest, sizeof(latest), "%s/jobs/%s/checkpoint.pb", state_dir, id);
    snprintf(newest, sizeof(newest), "%s/jobs/%s/checkpoint-4.pb", state_dir, id);
    struct stat a, b;
    assert_int_equal(stat(latest, &a), 0);
    assert_int_equal(stat(newest, &b), 0);
    assert_int_equal(a.st_size, b.st_size);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_cancel(c, id, &job));
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/*
 * Adam resumed from a checkpoint continues its step count, so one step after
 * the resume gives the variables that an uninterrupted run has at that step.
 */
static void test_adam_resume_matches_uninterrupted(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "adam", JOB_BUDGET, &spec);
    spec.optimizer = TIDE_JOB_OPTIMIZER_ADAM;
    spec.learning_rate = 0.01f;
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 11);
    train_steps(c, id, &f, 3);
    struct tide_checkpoint_info k;
    CHECK_OK(c, tide_client_checkpoint(c, id, &k));
    assert_int_equal(k.step, 3);
    train_steps(c, id, &f, 1);
    tide_variables *uninterrupted = read_all(c, id);

    /* The same spec resumed at step 3, fed the same fourth batch. */
    spec.name = "adam-resumed";
    spec.resume_from = id;
    char new_id[TIDE_JOB_ID_MAX];
    submit(c, &spec, new_id);
    struct feeder r;
    feeder_init(&r, &g, 16, 0, 11);
    size_t image_count = (size_t)16 * MLP_SIDE * MLP_SIDE;
    float *images = malloc(image_count * sizeof(float));
    int32_t labels[16];
    assert_non_null(images);
    for (int i = 0; i < 3; i++)
        assert_true(tide_dataset_iter_next(r.it, images, labels) > 0);
    free(images);
    train_steps(c, new_id, &r, 1);
    assert_int_equal(r.first_step, 4);
    tide_variables *resumed = read_all(c, new_id);
    assert_same_variables(uninterrupted, resumed);
    tide_variables_free(uninterrupted);
    tide_variables_free(resumed);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_cancel(c, id, &job));
    CHECK_OK(c, tide_client_cancel(c, new_id, &job));
    feeder_free(&f);
    feeder_free(&r);
    free(g.bytes);
    tide_client_free(c);
}

/* Over TCP: TLS verified against the CA, a submit token trains, a monitor token only looks. */
static void test_tcp_tls_tokens(void **state)
{
    (void)state;
    NEED_DAEMON();
    if (!have_tls) {
        fprintf(stderr, "skipped: openssl could not make a certificate (apt install openssl)\n");
        skip();
    }
    struct tide_client_options o = {.ca_file = tls_cert,
                                    .token = SUBMIT_TOKEN,
                                    .connect_timeout_ms = 10000,
                                    .call_timeout_ms = 60000};
    tide_client *c = NULL;
    if (tide_client_connect(tls_target, &o, &c) != 0)
        fail_msg("connect %s: %s", tls_target, tide_client_error_message(c));
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "over-tcp", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 16);
    train_steps(c, id, &f, 2);
    tide_client_free(c);

    /* A monitor may look at every job but not submit. */
    o.token = MONITOR_TOKEN;
    CHECK_OK(c, tide_client_connect(tls_target, &o, &c));
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.steps, 2);
    struct tide_job_info *jobs;
    size_t n;
    CHECK_OK(c, tide_client_list(c, true, &jobs, &n));
    assert_true(n >= 1);
    free(jobs);
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_PERMISSION_DENIED, NULL);
    CHECK_CODE(c, tide_client_cancel(c, id, NULL), TIDE_CODE_PERMISSION_DENIED, NULL);
    tide_client_free(c);

    /* A wrong token is refused before any job code runs. */
    o.token = "not-a-token";
    c = NULL;
    int code = tide_client_connect(tls_target, &o, &c);
    if (code == 0)
        CHECK_CODE(c, tide_client_status(c, &s, NULL, NULL), TIDE_CODE_UNAUTHENTICATED, NULL);
    else
        assert_int_equal(code, TIDE_CODE_UNAUTHENTICATED);
    tide_client_free(c);

    /* Without the CA the daemon's certificate is not trusted: no connection. */
    o.token = SUBMIT_TOKEN;
    o.ca_file = NULL;
    o.connect_timeout_ms = 3000;
    c = NULL;
    assert_int_equal(tide_client_connect(tls_target, &o, &c), TIDE_CODE_UNAVAILABLE);
    tide_client_free(c);

    /* A token is never sent in the clear. */
    o.insecure = true;
    c = NULL;
    assert_int_equal(tide_client_connect(tls_target, &o, &c), TIDE_CODE_INVALID_ARGUMENT);
    tide_client_free(c);

    /* tidectl --connect. */
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char *argv[] = {tidectl_path,
                    (char *)"--connect",
                    tls_target,
                    (char *)"--token",
                    (char *)SUBMIT_TOKEN,
                    (char *)"--ca",
                    tls_cert,
                    (char *)"--json",
                    (char *)"get",
                    id,
                    NULL};
    run_program(argv, -1, r);
    if (r->exit_code != 0)
        fail_msg("tidectl --connect: exit %d\n%s", r->exit_code, r->err);
    assert_non_null(strstr(r->out, id));
    free(r);
    feeder_free(&f);
    free(g.bytes);
}

/* ============================================================================
 * Tests: errors and their codes
 * ========================================================================== */

/* A graph whose MatMul reads a node that does not exist: INVALID_ARGUMENT naming the node. */
static void test_bad_graph_names_node(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    tide_builder *b = tide_builder_new();
    int64_t x_dims[] = {4, 8}, w_dims[] = {8, 3};
    tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, x_dims);
    tide_ref w = tide_builder_variable(b, "w", 2, w_dims, "glorot_uniform", 1.0f, true);
    tide_ref m = tide_builder_matmul(b, "bad_matmul", x, w, false, false);
    tide_builder_reduce_mean(b, "loss", m, NULL, 0, false);
    uint8_t *bytes;
    size_t len;
    assert_int_equal(tide_builder_serialize(b, &bytes, &len), 0);
    tide_builder_free(b);

    /* Rewire bad_matmul's second input to a node nobody defined. */
    Tide__V1__Graph *graph = tide__v1__graph__unpack(NULL, len, bytes);
    assert_non_null(graph);
    free(bytes);
    bool rewired = false;
    for (size_t i = 0; i < graph->n_nodes; i++) {
        Tide__V1__Node *node = graph->nodes[i];
        if (strcmp(node->name, "bad_matmul") == 0 && node->n_inputs == 2) {
            free(node->inputs[1]);
            node->inputs[1] = strdup("no_such_input");
            rewired = true;
        }
    }
    assert_true(rewired);
    len = tide__v1__graph__get_packed_size(graph);
    bytes = malloc(len);
    tide__v1__graph__pack(graph, bytes);
    tide__v1__graph__free_unpacked(graph, NULL);

    struct tide_job_spec spec;
    tide_job_spec_init(&spec);
    spec.graph = bytes;
    spec.graph_len = len;
    static const char *const feeds[] = {"x"};
    spec.feeds = feeds;
    spec.n_feeds = 1;
    spec.budget_bytes = JOB_BUDGET;
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_INVALID_ARGUMENT, "bad_matmul");
    struct tide_job_plan_report plan;
    CHECK_CODE(c, tide_client_plan(c, &spec, &plan), TIDE_CODE_INVALID_ARGUMENT, "bad_matmul");
    free(bytes);

    /* A spec without a graph never leaves the client. */
    tide_job_spec_init(&spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_INVALID_ARGUMENT, "libtide:");

    /* A graph with no nodes (only its version set) is no job. */
    static uint8_t empty_graph[] = {0x10, 0x01}; /* Graph{version: 1} */
    spec.graph = empty_graph;
    spec.graph_len = sizeof(empty_graph);
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_INVALID_ARGUMENT,
               "spec.graph: has no nodes");

    /* A loss that no trainable Variable reaches is refused at Submit, not at the first step. */
    b = tide_builder_new();
    x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, x_dims);
    w = tide_builder_variable(b, "w", 2, w_dims, "glorot_uniform", 1.0f, false);
    m = tide_builder_matmul(b, "mm", x, w, false, false);
    tide_builder_reduce_mean(b, "loss", m, NULL, 0, false);
    assert_int_equal(tide_builder_serialize(b, &bytes, &len), 0);
    tide_builder_free(b);
    tide_job_spec_init(&spec);
    spec.graph = bytes;
    spec.graph_len = len;
    spec.feeds = feeds;
    spec.n_feeds = 1;
    spec.budget_bytes = JOB_BUDGET;
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_INVALID_ARGUMENT,
               "loss \"loss\" does not depend on any trainable Variable");
    free(bytes);
    tide_client_free(c);
}

/* Bytes that are no protobuf message: INVALID_ARGUMENT, and the daemon keeps serving. */
static void test_malformed_message(void **state)
{
    (void)state;
    NEED_DAEMON();
    /* A length-delimited field 1 claiming 2^28 bytes, then garbage. */
    static const uint8_t garbage[] = {0x0a, 0xff, 0xff, 0xff, 0x7f, 0x01, 0x02, 0x03, 0xff, 0xff};
    char message[512];
    int code =
        raw_unary("/tide.v1.Jobs/Submit", garbage, sizeof(garbage), message, sizeof(message));
    if (code != TIDE_CODE_INVALID_ARGUMENT)
        fail_msg("Submit(garbage): want INVALID_ARGUMENT, got %s: %s", tide_code_name(code),
                 message);
    code = raw_unary("/tide.v1.Jobs/Get", garbage, sizeof(garbage), message, sizeof(message));
    if (code != TIDE_CODE_INVALID_ARGUMENT)
        fail_msg("Get(garbage): want INVALID_ARGUMENT, got %s: %s", tide_code_name(code), message);
    /* An unknown method is UNIMPLEMENTED, not a hang. */
    code = raw_unary("/tide.v1.Jobs/NoSuchMethod", garbage, 0, message, sizeof(message));
    assert_int_equal(code, TIDE_CODE_UNIMPLEMENTED);

    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    tide_client_free(c);
}

/* A message over --max-message, and a budget over --max-budget: RESOURCE_EXHAUSTED. */
static void test_oversized(void **state)
{
    (void)state;
    NEED_DAEMON();
    size_t len = (size_t)MAX_MESSAGE + (UINT64_C(1) << 20);
    uint8_t *big = calloc(1, len);
    assert_non_null(big);
    char message[512];
    int code = raw_unary("/tide.v1.Jobs/Submit", big, len, message, sizeof(message));
    free(big);
    if (code != TIDE_CODE_RESOURCE_EXHAUSTED)
        fail_msg("Submit(5 MiB): want RESOURCE_EXHAUSTED, got %s: %s", tide_code_name(code),
                 message);

    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "greedy", MAX_BUDGET + (UINT64_C(1) << 20), &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, NULL), TIDE_CODE_RESOURCE_EXHAUSTED, NULL);
    free(g.bytes);
    tide_client_free(c);
}

/* A second tided on the live daemon's state directory exits at once, naming the first's pid. */
static void test_second_daemon_refused(void **state)
{
    (void)state;
    NEED_DAEMON();
    char other_socket[600], pid[32];
    snprintf(other_socket, sizeof(other_socket), "%s.second", socket_path);
    snprintf(pid, sizeof(pid), "pid %ld", (long)daemon_pid);
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_program((char *[]){tided_path, "--socket", other_socket, "--state-dir", state_dir,
                           "--backend", "cpu", "--device-memory", DEVICE_MEMORY, NULL},
                -1, r);
    assert_int_not_equal(r->exit_code, 0);
    assert_non_null(strstr(r->err, "is in use by another tided"));
    assert_non_null(strstr(r->err, pid));
    free(r);
    /* The first daemon's jobs are untouched and it still answers. */
    tide_client *c = connect_client(2000);
    assert_non_null(c);
    struct tide_daemon_status s;
    assert_int_equal(tide_client_status(c, &s, NULL, NULL), 0);
    tide_client_free(c);
}

/* Every call on a job id the daemon never handed out: NOT_FOUND. */
static void test_unknown_job(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    const char *id = "no-such-job";
    struct tide_job_info job;
    CHECK_CODE(c, tide_client_get(c, id, &job), TIDE_CODE_NOT_FOUND, NULL);
    CHECK_CODE(c, tide_client_cancel(c, id, &job), TIDE_CODE_NOT_FOUND, NULL);
    CHECK_CODE(c, tide_client_checkpoint(c, id, NULL), TIDE_CODE_NOT_FOUND, NULL);
    tide_variables *v = NULL;
    CHECK_CODE(c, tide_client_read_variables(c, id, NULL, 0, &v), TIDE_CODE_NOT_FOUND, NULL);
    assert_null(v);
    struct graph g;
    build_graph(false, 16, &g);
    struct feeder f;
    feeder_init(&f, &g, 16, 2, 7);
    CHECK_CODE(c, tide_client_train(c, id, feeder_feed, feeder_step, &f), TIDE_CODE_NOT_FOUND,
               NULL);
    /* The error goes away with the next good call. */
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_int_equal(tide_client_error_code(c), 0);
    /* Local checks. */
    CHECK_CODE(c, tide_client_get(c, "", &job), TIDE_CODE_INVALID_ARGUMENT, "libtide:");
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* ============================================================================
 * Tests: concurrency
 * ========================================================================== */

struct trainer {
    const struct graph *g;
    char id[TIDE_JOB_ID_MAX];
    int64_t steps; /* < 0: until stop */
    _Atomic int stop;
    uint64_t seed;
    _Atomic int code;
    char message[512];
    struct feeder f; /* set up by trainer_start before the thread starts */
};

static void *trainer_thread(void *arg)
{
    struct trainer *t = arg;
    tide_client *c = connect_client(5000);
    if (!c) {
        t->code = -1;
        snprintf(t->message, sizeof(t->message), "cannot connect");
        return NULL;
    }
    t->code = tide_client_train(c, t->id, feeder_feed, feeder_step, &t->f);
    snprintf(t->message, sizeof(t->message), "%s", tide_client_error_message(c));
    tide_client_free(c);
    return NULL;
}

/* Sets up t's feeder and starts its thread. */
static void trainer_start(struct trainer *t, pthread_t *thread)
{
    feeder_init(&t->f, t->g, 16, t->steps, t->seed);
    t->f.stop = &t->stop;
    assert_int_equal(pthread_create(thread, NULL, trainer_thread, t), 0);
}

static void check_trainer(const struct trainer *t, int64_t min_steps, uint64_t budget)
{
    if (t->code != 0)
        fail_msg("trainer of %s: %s: %s", t->id, tide_code_name(t->code), t->message);
    assert_true(t->f.results >= min_steps);
    assert_false(t->f.bad_loss);
    assert_false(t->f.steps_not_increasing);
    assert_true(t->f.max_high_water <= budget);
}

/* Two clients train two jobs at once, each within its own budget. */
static void test_two_clients_at_once(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph mlp, cnn;
    build_graph(false, 16, &mlp);
    build_graph(true, 16, &cnn);
    struct trainer a = {.g = &mlp, .steps = 12, .seed = 11};
    struct trainer b = {.g = &cnn, .steps = 6, .seed = 12};
    struct tide_job_spec spec;
    make_spec(&mlp, "pair-a", JOB_BUDGET, &spec);
    submit(c, &spec, a.id);
    make_spec(&cnn, "pair-b", 2 * JOB_BUDGET, &spec);
    submit(c, &spec, b.id);

    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_true(s.device_reserved_bytes >= 3 * JOB_BUDGET);
    assert_true(s.device_reserved_bytes <= s.device_total_bytes);

    pthread_t ta, tb;
    trainer_start(&a, &ta);
    trainer_start(&b, &tb);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    check_trainer(&a, 12, JOB_BUDGET);
    check_trainer(&b, 6, 2 * JOB_BUDGET);
    feeder_free(&a.f);
    feeder_free(&b.f);

    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, a.id, &job));
    assert_int_equal(job.steps, 12);
    assert_true(job.device_high_water_bytes <= JOB_BUDGET);
    CHECK_OK(c, tide_client_get(c, b.id, &job));
    assert_int_equal(job.steps, 6);
    free(mlp.bytes);
    free(cnn.bytes);
    tide_client_free(c);
}

/* Another user can neither see nor touch a job, while it keeps training. */
static void test_other_user_denied(void **state)
{
    (void)state;
    NEED_DAEMON();
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: acting as another user (uid %d) needs root\n", OTHER_UID);
        skip();
    }
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "private", JOB_BUDGET, &spec);
    struct trainer t = {.g = &g, .steps = -1, .seed = 13};
    submit(c, &spec, t.id);
    pthread_t thread;
    trainer_start(&t, &thread);
    while (t.f.results < 2 && t.code == 0)
        sleep_ms(20);

    /* libtide as uid 65534: every call on the job is PERMISSION_DENIED. */
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char *helper[] = {self_path, (char *)"--helper-other-user", socket_path, t.id, NULL};
    run_program(helper, OTHER_UID, r);
    int64_t steps_during = t.f.results;
    if (r->exit_code != 0)
        fail_msg("as uid %d: exit %d\n%s%s", OTHER_UID, r->exit_code, r->out, r->err);

    /* tidectl as uid 65534: exit 1, naming the code. */
    run_tidectl(r, OTHER_UID, "--json", "cancel", t.id, (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->out, "\"PERMISSION_DENIED\""));
    assert_non_null(strstr(r->err, "PERMISSION_DENIED"));

    /* The job trained on, untouched. */
    int64_t floor_steps = t.f.results + 2;
    double deadline = now_s() + 60;
    while (t.f.results < floor_steps && t.code == 0 && now_s() < deadline)
        sleep_ms(20);
    t.stop = 1;
    pthread_join(thread, NULL);
    check_trainer(&t, 2, JOB_BUDGET);
    assert_true(t.f.results > steps_during);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, t.id, &job));
    assert_int_not_equal(job.state, TIDE_JOB_CANCELLED);
    assert_int_not_equal(job.state, TIDE_JOB_FAILED);
    feeder_free(&t.f);
    free(r);
    free(g.bytes);
    tide_client_free(c);
}

/*
 * Another user can neither remove a job nor prune it: rm is PERMISSION_DENIED,
 * prune removes only the caller's own (none); the owner then removes it.
 */
static void test_other_user_cannot_remove(void **state)
{
    (void)state;
    NEED_DAEMON();
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: acting as another user (uid %d) needs root\n", OTHER_UID);
        skip();
    }
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "mine-to-remove", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    CHECK_OK(c, tide_client_finish(c, id));

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, OTHER_UID, "--json", "rm", id, (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->out, "\"PERMISSION_DENIED\""));
    assert_non_null(strstr(r->err, "belongs to uid 0"));
    run_tidectl(r, OTHER_UID, "--json", "prune", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl prune as uid %d: exit %d\n%s", OTHER_UID, r->exit_code, r->err);
    assert_non_null(strstr(r->out, "\"jobs\":0,"));
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.state, TIDE_JOB_DONE);

    run_tidectl(r, -1, "rm", id, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl rm as its owner: exit %d\n%s", r->exit_code, r->err);
    CHECK_CODE(c, tide_client_get(c, id, &job), TIDE_CODE_NOT_FOUND, id);
    free(r);
    free(g.bytes);
    tide_client_free(c);
}

/* A client killed mid-stream (SIGKILL) leaves the daemon serving and the job trainable. */
static void test_client_killed_mid_stream(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "orphaned", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);

    int out[2];
    assert_int_equal(pipe(out), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        close(out[0]);
        close(out[1]);
        execl(self_path, self_path, "--helper-train-forever", socket_path, id, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    /* Wait for its third step, then kill it without warning. */
    FILE *from = fdopen(out[0], "r");
    char line[128];
    int steps = 0;
    while (steps < 3 && fgets(line, sizeof(line), from))
        steps += strncmp(line, "step ", 5) == 0;
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    fclose(from);
    assert_int_equal(steps, 3);

    /* The daemon still answers, and the job trains again once it noticed. */
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 8);
    double deadline = now_s() + 30;
    int code;
    for (;;) {
        f.steps_left = 3;
        int64_t before = f.results;
        code = tide_client_train(c, id, feeder_feed, feeder_step, &f);
        if (code == 0) {
            assert_int_equal(f.results - before, 3);
            break;
        }
        if (code != TIDE_CODE_FAILED_PRECONDITION || now_s() > deadline)
            fail_msg("training after the client died: %s: %s", tide_code_name(code),
                     tide_client_error_message(c));
        sleep_ms(200);
    }
    assert_true(f.first_step > 3);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_true(job.steps >= 6);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* ============================================================================
 * Tests: tracing (Jobs.Trace, tidectl trace)
 * ========================================================================== */

/* A client whose unary calls have a deadline of call_timeout_ms; NULL if it cannot connect. */
static tide_client *connect_with_deadline(uint32_t call_timeout_ms)
{
    struct tide_client_options o = {.connect_timeout_ms = 5000, .call_timeout_ms = call_timeout_ms};
    tide_client *c = NULL;
    if (tide_client_connect(target, &o, &c) != 0) {
        tide_client_free(c);
        return NULL;
    }
    return c;
}

/* A Trace call waiting on another thread, with its own client; records what it got. */
struct tracer {
    char id[TIDE_JOB_ID_MAX];
    uint32_t steps;
    int code;
    char message[512];
};

static void *tracer_thread(void *arg)
{
    struct tracer *t = arg;
    tide_client *c = connect_with_deadline(60000);
    if (!c) {
        t->code = -1;
        snprintf(t->message, sizeof(t->message), "cannot connect");
        return NULL;
    }
    struct tide_job_trace trace;
    t->code = tide_client_trace(c, t->id, t->steps, &trace);
    snprintf(t->message, sizeof(t->message), "%s", tide_client_error_message(c));
    tide_job_trace_clear(&trace);
    tide_client_free(c);
    return NULL;
}

/* Whether the daemon's log holds needle. */
static bool log_contains(const char *needle)
{
    FILE *f = fopen(log_path, "r");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/* Reads a whole file into a malloc'd, NUL-terminated buffer; NULL if it cannot. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[size] = '\0';
        *len = (size_t)size;
    }
    return buf;
}

/*
 * Checks the trace of training steps first..last of a swapping job: the
 * tracks named compute, h2d and d2h, exactly one step slice per step on
 * each (no other), SwapIn slices, and the device counter peaking at the
 * job's high water.
 */
static void check_trace_json(const char *json, size_t len, uint64_t first, uint64_t last,
                             uint64_t high_water)
{
    assert_int_equal(strlen(json), len);
    json_object *doc = json_tokener_parse(json);
    if (!doc)
        fail_msg("the trace is not JSON: %.200s", json);
    json_object *events, *unit;
    assert_true(json_object_object_get_ex(doc, "traceEvents", &events));
    assert_true(json_object_object_get_ex(doc, "displayTimeUnit", &unit));
    assert_string_equal(json_object_get_string(unit), "ms");
    uint64_t steps_per_track[4] = {0}, swap_ins = 0, device_peak = 0, n_steps = last - first + 1;
    char tracks[4][16] = {"", "", "", ""};
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *e = json_object_array_get_idx(events, i), *v, *args;
        assert_true(json_object_object_get_ex(e, "ph", &v));
        const char *ph = json_object_get_string(v);
        assert_true(json_object_object_get_ex(e, "name", &v));
        const char *name = json_object_get_string(v);
        json_object_object_get_ex(e, "args", &args);
        int tid = json_object_object_get_ex(e, "tid", &v) ? json_object_get_int(v) : -1;
        if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0) {
            assert_true(tid >= 1 && tid <= 3);
            assert_true(json_object_object_get_ex(args, "name", &v));
            snprintf(tracks[tid], sizeof(tracks[tid]), "%s", json_object_get_string(v));
        } else if (strcmp(ph, "X") == 0) {
            assert_true(json_object_object_get_ex(e, "cat", &v));
            if (strcmp(json_object_get_string(v), "step") == 0) {
                uint64_t k = 0;
                if (sscanf(name, "step %" SCNu64, &k) != 1 || k < first || k > last)
                    fail_msg("step slice \"%s\" in a trace of steps %" PRIu64 " to %" PRIu64, name,
                             first, last);
                steps_per_track[tid]++;
            } else if (json_object_object_get_ex(args, "op", &v)) {
                swap_ins += strcmp(json_object_get_string(v), "SwapIn") == 0;
            }
        } else if (strcmp(ph, "C") == 0 && strcmp(name, "device") == 0) {
            assert_true(json_object_object_get_ex(args, "bytes in use", &v));
            if (json_object_get_uint64(v) > device_peak)
                device_peak = json_object_get_uint64(v);
        }
    }
    assert_string_equal(tracks[1], "compute");
    assert_string_equal(tracks[2], "h2d");
    assert_string_equal(tracks[3], "d2h");
    for (int tid = 1; tid <= 3; tid++)
        assert_int_equal(steps_per_track[tid], n_steps);
    assert_true(swap_ins >= n_steps);
    assert_int_equal(device_peak, high_water);
    json_object_put(doc);
}

/*
 * Jobs.Trace on a swapping CNN: bad requests refused at once, a deadline
 * that passes without steps disarms the job, a trace of the next steps
 * while it trains (by libtide and by tidectl, text and JSON), one trace at a
 * time, a waiting trace ABORTED when the job is cancelled, none of an ended
 * job.
 */
static void test_trace(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(true, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "traced", 2 * JOB_BUDGET, &spec);
    spec.swap = TIDE_JOB_SWAP_ON;
    spec.vars_home = TIDE_JOB_VARS_HOME_HOST;
    spec.partition_size = 7;
    struct trainer tr = {.g = &g, .steps = -1, .seed = 21};
    submit(c, &spec, tr.id);
    const char *id = tr.id;
    struct tide_job_trace t;

    CHECK_CODE(c, tide_client_trace(c, id, 0, &t), TIDE_CODE_INVALID_ARGUMENT, "1 to 100");
    CHECK_CODE(c, tide_client_trace(c, id, 101, &t), TIDE_CODE_INVALID_ARGUMENT, "1 to 100");
    CHECK_CODE(c, tide_client_trace(c, "j-0000000000000000", 1, &t), TIDE_CODE_NOT_FOUND, NULL);

    /* Nothing trains the job: the deadline passes, and the daemon disarms it. */
    tide_client *quick = connect_with_deadline(300);
    assert_non_null(quick);
    CHECK_CODE(quick, tide_client_trace(quick, id, 1, &t), TIDE_CODE_DEADLINE_EXCEEDED, NULL);
    tide_client_free(quick);
    double deadline = now_s() + 30;
    while (!log_contains("ended before they ran") && now_s() < deadline)
        sleep_ms(20);
    if (!log_contains("ended before they ran"))
        fail_msg("tided did not log that the Trace call past its deadline disarmed the job");

    /* While it trains: the next three steps. */
    pthread_t thread;
    trainer_start(&tr, &thread);
    int code = tide_client_trace(c, id, 3, &t);
    if (code != 0)
        fail_msg("trace: %s: %s", tide_code_name(code), tide_client_error_message(c));
    assert_int_equal(t.steps, 3);
    assert_true(t.first_step >= 1);
    assert_int_equal(t.last_step, t.first_step + 2);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    check_trace_json(t.json, t.json_len, t.first_step, t.last_step, job.device_high_water_bytes);
    uint64_t traced_last = t.last_step;
    tide_job_trace_clear(&t);

    /* tidectl trace writes what the daemon answers to a file, and says what it wrote. */
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char path[600], expected[700];
    snprintf(path, sizeof(path), "%s/trace.json", temp_dir);
    run_tidectl(r, -1, "trace", id, "--steps", "2", "-o", path, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl trace: exit %d\n%s", r->exit_code, r->err);
    uint64_t first = 0, last = 0;
    snprintf(expected, sizeof(expected), "job %s: steps %%" SCNu64 " to %%" SCNu64, id);
    assert_int_equal(sscanf(r->out, expected, &first, &last), 2);
    assert_int_equal(last, first + 1);
    assert_true(first > traced_last);
    snprintf(expected, sizeof(expected), " written to %s (open it in ui.perfetto.dev", path);
    assert_non_null(strstr(r->out, expected));
    size_t len = 0;
    char *json = read_file(path, &len);
    assert_non_null(json);
    CHECK_OK(c, tide_client_get(c, id, &job));
    check_trace_json(json, len, first, last, job.device_high_water_bytes);
    free(json);

    run_tidectl(r, -1, "--json", "trace", id, "--output", path, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl --json trace: exit %d\n%s", r->exit_code, r->err);
    char *at = strstr(r->out, ",\"first_step\":");
    assert_non_null(at);
    assert_int_equal(sscanf(at, ",\"first_step\":%" SCNu64 ",\"last_step\":%" SCNu64, &first,
                            &last),
                     2);
    assert_int_equal(last, first);
    snprintf(expected, sizeof(expected), "{\"job\":\"%s\",\"steps\":1,", id);
    assert_memory_equal(r->out, expected, strlen(expected));
    json = read_file(path, &len);
    assert_non_null(json);
    snprintf(expected, sizeof(expected), ",\"bytes\":%zu}\n", len);
    assert_non_null(strstr(r->out, expected));
    check_trace_json(json, len, first, last, job.device_high_water_bytes);
    free(json);
    tr.stop = 1;
    pthread_join(thread, NULL);
    check_trainer(&tr, 6, 2 * JOB_BUDGET);
    feeder_free(&tr.f);

    /* One trace at a time; cancelling the job ends the one waiting for steps. */
    struct tracer waiting = {.steps = 5};
    snprintf(waiting.id, sizeof(waiting.id), "%s", id);
    assert_int_equal(pthread_create(&thread, NULL, tracer_thread, &waiting), 0);
    char armed[256];
    snprintf(armed, sizeof(armed), "job %s: tracing its next 5 training steps", id);
    deadline = now_s() + 30;
    while (!log_contains(armed) && now_s() < deadline)
        sleep_ms(20);
    if (!log_contains(armed))
        fail_msg("tided did not log \"%s\"", armed);
    CHECK_CODE(c, tide_client_trace(c, id, 1, &t), TIDE_CODE_FAILED_PRECONDITION,
               "already being traced");
    CHECK_OK(c, tide_client_cancel(c, id, &job));
    pthread_join(thread, NULL);
    assert_int_equal(waiting.code, TIDE_CODE_ABORTED);
    if (!strstr(waiting.message, "ended (CANCELLED"))
        fail_msg("the waiting trace ended with \"%s\"", waiting.message);
    CHECK_CODE(c, tide_client_trace(c, id, 1, &t), TIDE_CODE_FAILED_PRECONDITION, "has ended");
    free(r);
    free(g.bytes);
    tide_client_free(c);
}

/* ============================================================================
 * Tests: tidectl
 * ========================================================================== */

/* The reserved device bytes that `tidectl --json status` reports. */
static uint64_t reserved_bytes(struct tide_test_run *r)
{
    run_tidectl(r, -1, "--json", "status", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl status: exit %d\n%s", r->exit_code, r->err);
    const char *field = strstr(r->out, "\"device_reserved_bytes\":");
    assert_non_null(field);
    return strtoull(field + strlen("\"device_reserved_bytes\":"), NULL, 10);
}

/*
 * tidectl train finishes its job: three in a row leave nothing reserved,
 * each job is DONE with a final checkpoint whose variables can still be read.
 */
static void test_train_finishes_job(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    uint64_t before = reserved_bytes(r);
    char id[TIDE_JOB_ID_MAX] = "";
    for (int i = 0; i < 3; i++) {
        run_tidectl(r, -1, "--json", "train", "--model", "mlp", "--dataset", "synthetic",
                    "--steps", "5", "--batch", "64", "--budget", "96M", "--no-eval", (char *)NULL);
        if (r->exit_code != 0)
            fail_msg("tidectl train #%d: exit %d\n%s\n%s", i + 1, r->exit_code, r->out, r->err);
        const char *prefix = "{\"event\":\"submitted\",\"job\":{\"id\":\"";
        const char *job = strstr(r->out, prefix);
        assert_non_null(job);
        job += strlen(prefix);
        size_t n = strcspn(job, "\"");
        assert_true(n > 0 && n < sizeof(id));
        memcpy(id, job, n);
        id[n] = '\0';
        assert_int_equal(reserved_bytes(r), before);
    }
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.state, TIDE_JOB_DONE);
    assert_non_null(strstr(job.message, "finished by its client at step 5"));
    tide_variables *vars = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &vars));
    assert_int_equal(tide_variables_step(vars), 5);
    assert_true(tide_variables_count(vars) > 0);
    tide_variables_free(vars);
    /* An ended job takes no more Train streams, finish included. */
    CHECK_CODE(c, tide_client_finish(c, id), TIDE_CODE_FAILED_PRECONDITION, "has ended");
    tide_client_free(c);
    free(r);
}

/* ============================================================================
 * Data from files and weights out (tidectl train --data, tidectl export --npz)
 * ========================================================================== */

/* Writes a version-1.0 .npy file: the header dict padded to 64 bytes, then the values. */
static void write_npy_file(const char *path, const char *dict, const void *data, size_t len)
{
    size_t dict_len = strlen(dict), total = (10 + dict_len + 1 + 63) / 64 * 64;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t preamble[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(total - 10), 0};
    assert_int_equal(fwrite(preamble, 1, 10, f), 10);
    assert_int_equal(fwrite(dict, 1, dict_len, f), dict_len);
    for (size_t i = 10 + dict_len; i < total - 1; i++)
        fputc(' ', f);
    fputc('\n', f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* The job id of tidectl train --json's "submitted" line, into id. */
static void submitted_job(const char *out, char *id, size_t size)
{
    const char *prefix = "{\"event\":\"submitted\",\"job\":{\"id\":\"";
    const char *job = strstr(out, prefix);
    assert_non_null(job);
    job += strlen(prefix);
    size_t n = strcspn(job, "\"");
    assert_true(n > 0 && n < size);
    memcpy(id, job, n);
    id[n] = '\0';
}

/*
 * tidectl train --data/--labels/--test-data/--test-labels on .npy files
 * written here (float32 examples [N, 4, 5], int64 and int32 labels) trains
 * the MLP against the real daemon and scores every test example; tidectl
 * export --npz then writes the job's Variables, which are compared value by
 * value, with their names and shapes, with what libtide reads from the job.
 * Bad files and a model that cannot read the examples are refused with the
 * files' own words.
 */
static void test_tidectl_data_files_and_export(void **state)
{
    (void)state;
    NEED_DAEMON();
    enum { N = 256, N_TEST = 40, F = 20, N_CLASSES = 3 };
    float *x = malloc(sizeof(float) * N * F);
    int64_t *y = malloc(sizeof(int64_t) * N);
    int32_t y_test[N_TEST];
    assert_non_null(x);
    assert_non_null(y);
    uint64_t seed = 5;
    for (int i = 0; i < N; i++) {
        float score[N_CLASSES] = {0};
        for (int j = 0; j < F; j++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            x[i * F + j] = (float)(seed >> 40) / (float)(1 << 24) - 0.5f;
            score[j % N_CLASSES] += x[i * F + j];
        }
        y[i] = score[1] > score[0] ? (score[2] > score[1] ? 2 : 1) : (score[2] > score[0] ? 2 : 0);
        if (i < N_TEST)
            y_test[i] = (int32_t)y[i];
    }
    char xp[600], yp[600], xtp[600], ytp[600], npz[600];
    snprintf(xp, sizeof(xp), "%s/x.npy", temp_dir);
    snprintf(yp, sizeof(yp), "%s/y.npy", temp_dir);
    snprintf(xtp, sizeof(xtp), "%s/xt.npy", temp_dir);
    snprintf(ytp, sizeof(ytp), "%s/yt.npy", temp_dir);
    snprintf(npz, sizeof(npz), "%s/weights.npz", temp_dir);
    write_npy_file(xp, "{'descr': '<f4', 'fortran_order': False, 'shape': (256, 4, 5), }", x,
                   sizeof(float) * N * F);
    write_npy_file(yp, "{'descr': '<i8', 'fortran_order': False, 'shape': (256,), }", y,
                   sizeof(int64_t) * N);
    write_npy_file(xtp, "{'descr': '<f4', 'fortran_order': False, 'shape': (40, 4, 5), }", x,
                   sizeof(float) * N_TEST * F);
    write_npy_file(ytp, "{'descr': '<i4', 'fortran_order': False, 'shape': (40,), }", y_test,
                   sizeof(y_test));

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, -1, "--json", "train", "--model", "mlp", "--data", xp, "--labels", yp,
                "--test-data", xtp, "--test-labels", ytp, "--steps", "24", "--batch", "32",
                "--budget", "96M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --data: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    char id[TIDE_JOB_ID_MAX];
    submitted_job(r->out, id, sizeof(id));
    /* 20 features in, 3 classes out: the files decided the model's shape. */
    assert_non_null(strstr(r->out, "\"parameters\":38659,"));
    assert_non_null(strstr(r->out, "\"test_examples\":40,"));

    /* plan reads the same files for the model's shape: the same parameters. */
    run_tidectl(r, -1, "--json", "plan", "--model", "mlp", "--data", xp, "--labels", yp,
                "--batch", "32", "--budget", "96M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl plan --data: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"parameters\":38659,"));

    run_tidectl(r, -1, "--json", "export", id, "--npz", npz, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl export: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"variables\":6,"));

    tide_client *c = connect_client(5000);
    assert_non_null(c);
    tide_variables *vars = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &vars));
    assert_int_equal(tide_variables_count(vars), 6);
    int zerr;
    zip_t *za = zip_open(npz, ZIP_RDONLY | ZIP_CHECKCONS, &zerr);
    assert_non_null(za);
    assert_int_equal(zip_get_num_entries(za, 0), 6);
    for (size_t i = 0; i < tide_variables_count(vars); i++) {
        const struct tide_tensor *v = tide_variables_at(vars, i);
        char member[256], shape[128] = "";
        snprintf(member, sizeof(member), "%s.npy", v->name);
        for (int32_t d = 0; d < v->rank; d++)
            snprintf(shape + strlen(shape), sizeof(shape) - strlen(shape), "%" PRId64 ",%s",
                     v->dims[d], d + 1 < v->rank ? " " : "");
        if (v->rank > 1)
            shape[strlen(shape) - 1] = '\0'; /* (20, 256), but (256,) */
        zip_stat_t st;
        if (zip_stat(za, member, 0, &st) != 0)
            fail_msg("%s is not in %s", member, npz);
        uint8_t *buf = malloc(st.size);
        assert_non_null(buf);
        zip_file_t *zf = zip_fopen(za, member, 0);
        assert_non_null(zf);
        assert_int_equal(zip_fread(zf, buf, st.size), (zip_int64_t)st.size);
        zip_fclose(zf);
        size_t header = 10 + (size_t)(buf[8] | buf[9] << 8);
        char want[256];
        snprintf(want, sizeof(want), "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }",
                 shape);
        if (memcmp(buf + 10, want, strlen(want)) != 0)
            fail_msg("%s: header %.*s, want %s", member, (int)(header - 10), buf + 10, want);
        assert_int_equal(st.size - header, v->bytes);
        assert_memory_equal(buf + header, v->data, v->bytes);
        free(buf);
    }
    zip_close(za);
    tide_variables_free(vars);
    tide_client_free(c);

    /* A model that cannot read the examples: a usage error naming both shapes. */
    run_tidectl(r, -1, "train", "--model", "resnet", "--data", xp, "--labels", yp, "--steps", "1",
                (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    char want[2048];
    snprintf(want, sizeof(want),
             "tidectl: --model resnet reads square images [C, S, S], but the examples of %s are "
             "[4, 5]\n",
             xp);
    assert_string_equal(r->err, want);
    /* Inputs and labels of different lengths: both named. */
    run_tidectl(r, -1, "train", "--model", "mlp", "--data", xtp, "--labels", yp, "--steps", "1",
                (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    snprintf(want, sizeof(want),
             "tidectl: %s holds 40 examples (shape [40, 4, 5]) but %s holds 256 labels (shape "
             "[256])\n",
             xtp, yp);
    assert_string_equal(r->err, want);
    /* An unknown job: the daemon's NOT_FOUND, and no file. */
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/missing.npz", temp_dir);
    run_tidectl(r, -1, "export", "no-such-job", "--npz", missing, (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->err, "NOT_FOUND"));
    assert_int_equal(access(missing, F_OK), -1);
    free(r);
    free(x);
    free(y);
}

/* The whole of a file, malloc'd; *len its size. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    uint8_t *bytes = malloc((size_t)size);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return bytes;
}

/* Writes model m (freed) to path. */
/* The "test_accuracy" of tidectl's --json output (a test failure when it has none). */
static double json_test_accuracy(const char *out)
{
    const char *acc = strstr(out, "\"test_accuracy\":");
    assert_non_null(acc);
    return strtod(acc + strlen("\"test_accuracy\":"), NULL);
}

static void write_onnx_file(struct tide_test_onnx *m, const char *path)
{
    size_t len;
    uint8_t *bytes = tide_test_onnx_pack(m, &len);
    tide_test_onnx_free(m);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    free(bytes);
}

/*
 * tidectl train --onnx of a model of two graph inputs, as a BERT's features
 * and attention_mask (float x [8, 4], int64 mask [8, 4] whose zeros drop
 * features: Where(Equal(mask, 0), 0, x), then Gemm to 3 classes), from
 * --data x.npy,mask.npy against the real daemon: the job's feeds are both
 * inputs and the labels, the loss falls and the held-out files (two, as
 * well) are scored above chance.
 */
static void test_tidectl_onnx_two_inputs(void **state)
{
    (void)state;
    NEED_DAEMON();
    enum { N = 64, F = 4 };
    static float x[N * F];
    static int64_t mask[N * F], labels[N];
    tide_test_onnx_masked_pair_data(N, F, x, mask, labels);
    char xp[600], mp[600], yp[600], model[600], both[1300];
    snprintf(xp, sizeof(xp), "%s/two-x.npy", temp_dir);
    snprintf(mp, sizeof(mp), "%s/two-mask.npy", temp_dir);
    snprintf(yp, sizeof(yp), "%s/two-y.npy", temp_dir);
    snprintf(model, sizeof(model), "%s/two.onnx", temp_dir);
    snprintf(both, sizeof(both), "%s,%s", xp, mp);
    write_npy_file(xp, "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 4), }", x,
                   sizeof(x));
    write_npy_file(mp, "{'descr': '<i8', 'fortran_order': False, 'shape': (64, 4), }", mask,
                   sizeof(mask));
    write_npy_file(yp, "{'descr': '<i8', 'fortran_order': False, 'shape': (64,), }", labels,
                   sizeof(labels));
    write_onnx_file(tide_test_onnx_masked_pair(8, F), model);

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    /* plan needs no examples: the model's own inputs (a float and an int64 one) are planned,
     * where tidectl used to check them against Fashion-MNIST's images and refuse. So is the
     * GPT's single int input of tokens. */
    run_tidectl(r, -1, "--json", "plan", "--onnx", model, "--budget", "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl plan --onnx, two inputs: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"parameters\":15,"));
    assert_non_null(strstr(r->out, "\"fits\":true,"));
    run_tidectl(r, -1, "--json", "plan", "--onnx", TIDE_EXAMPLES_ONNX_DIR "/gpt.onnx", "--budget",
                "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl plan --onnx gpt.onnx: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"batch\":4,"));
    /* With --data, the files are still checked against the inputs, as train checks them. */
    run_tidectl(r, -1, "plan", "--onnx", model, "--data", xp, "--labels", yp, "--budget", "64M",
                (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "the model has 2 graph inputs of examples (\"x\", \"mask\") but "
                                   "the examples come in 1 array"));
    run_tidectl(r, -1, "--json", "train", "--onnx", model, "--data", both, "--labels", yp,
                "--test-data", both, "--test-labels", yp, "--steps", "200", "--lr", "0.5",
                "--budget", "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --onnx, two inputs: exit %d\n%s\n%s", r->exit_code, r->out,
                 r->err);
    assert_non_null(strstr(r->out, "\"parameters\":15,"));
    assert_non_null(strstr(r->out, "\"test_examples\":64,"));
    double accuracy = json_test_accuracy(r->out);
    print_message("tidectl, two inputs: test accuracy %.4f\n", accuracy);
    assert_true(accuracy > 0.75); /* 3 classes: a third by chance */
    free(r);
    unlink(xp), unlink(mp), unlink(yp), unlink(model);
}

/*
 * tidectl with a model exported with dynamic_axes {0: "batch", 1: "seq"} (x [batch, seq, 4],
 * flattened and times W [24, 3]: a classifier of whole sequences of 6): without --dim the
 * sequence is refused, naming the dimension and the flag; with --dim seq=6 and --batch 8 the
 * daemon trains it from files of [32, 6, 4] examples and [32] labels (a fixed linear rule)
 * and scores the held-out files well above the third of chance.
 */
static void test_tidectl_onnx_dims(void **state)
{
    (void)state;
    NEED_DAEMON();
    enum { N = 32, S = 6, F = 4, K = 3 };
    static float x[N * S * F];
    static int64_t labels[N];
    for (int n = 0; n < N; n++) {
        float v[K] = {0, 0, 0};
        for (int e = 0; e < S * F; e++) {
            float xe = sinf((float)(n * 31 + e * 7) * 0.37f);
            x[n * S * F + e] = xe;
            v[e % K] += xe; /* class k: the positions e = k (mod 3) sum highest */
        }
        labels[n] = v[0] >= v[1] && v[0] >= v[2] ? 0 : v[1] >= v[2] ? 1 : 2;
    }
    char xp[600], yp[600], model[600];
    snprintf(xp, sizeof(xp), "%s/seq-x.npy", temp_dir);
    snprintf(yp, sizeof(yp), "%s/seq-y.npy", temp_dir);
    snprintf(model, sizeof(model), "%s/seq.onnx", temp_dir);
    write_npy_file(xp, "{'descr': '<f4', 'fortran_order': False, 'shape': (32, 6, 4), }", x,
                   sizeof(x));
    write_npy_file(yp, "{'descr': '<i8', 'fortran_order': False, 'shape': (32,), }", labels,
                   sizeof(labels));
    write_onnx_file(tide_test_onnx_seq_linear(F, K, S), model);

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, -1, "plan", "--onnx", model, "--batch", "8", "--budget", "64M", (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "graph input \"x\" has a dynamic dimension 1 (seq) that is "
                                   "not the batch: give its size by name in the import options "
                                   "(tidectl and tide-bench: --dim seq=N)"));
    run_tidectl(r, -1, "--json", "train", "--onnx", model, "--dim", "seq=6", "--batch", "8",
                "--data", xp, "--labels", yp, "--test-data", xp, "--test-labels", yp, "--steps",
                "200", "--lr", "0.5", "--budget", "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --onnx --dim seq=6: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"parameters\":72,"));
    assert_non_null(strstr(r->out, "\"test_examples\":32,"));
    double accuracy = json_test_accuracy(r->out);
    print_message("tidectl --dim seq=6: test accuracy %.4f\n", accuracy);
    assert_true(accuracy > 0.7);
    free(r);
    unlink(xp), unlink(yp), unlink(model);
}

/*
 * tidectl trains a language model from its own files through the real daemon:
 * examples/onnx/gpt.onnx with gpt_tokens.npy and gpt_labels.npy, [12, 32] each (the next
 * byte at every position); the held-out accuracy is per token, and 150 steps memorise the
 * 12 windows.
 */
static void test_tidectl_onnx_language_model_files(void **state)
{
    (void)state;
    NEED_DAEMON();
    const char *tokens = TIDE_EXAMPLES_ONNX_DIR "/gpt_tokens.npy";
    const char *next = TIDE_EXAMPLES_ONNX_DIR "/gpt_labels.npy";
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    /* Synthetic examples are float32: token ids come from files, and the refusal says so. */
    run_tidectl(r, -1, "train", "--onnx", TIDE_EXAMPLES_ONNX_DIR "/gpt.onnx", "--dataset",
                "synthetic", "--steps", "1", (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "gpt.onnx: --dataset synthetic makes float32 examples, and "
                                   "input \"tokens\" takes int32 values (token ids, indices): "
                                   "give them in a file, --data"));
    run_tidectl(r, -1, "--json", "train", "--onnx", TIDE_EXAMPLES_ONNX_DIR "/gpt.onnx", "--data",
                tokens, "--labels", next, "--test-data", tokens, "--test-labels", next, "--steps",
                "150", "--lr", "0.5", "--budget", "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --onnx gpt.onnx from its files: exit %d\n%s\n%s", r->exit_code,
                 r->out, r->err);
    assert_non_null(strstr(r->out, "\"test_examples\":12,"));
    double accuracy = json_test_accuracy(r->out);
    print_message("tidectl, gpt.onnx from its files: token accuracy %.4f\n", accuracy);
    assert_true(accuracy > 0.9); /* 256 byte values */
    free(r);
}

/*
 * tidectl train --onnx --dataset synthetic: the examples take the model's
 * own input shape ([4, 3, 8, 8], not Fashion-MNIST's 1 x 28 x 28) and its
 * classes (3), so a model of any image size can be tried on the daemon
 * without data: 300 steps against the real daemon learn the synthetic
 * labels (the loss falls well below the ln 3 of zero weights).
 */
static void test_tidectl_onnx_synthetic(void **state)
{
    (void)state;
    NEED_DAEMON();
    char model[600];
    snprintf(model, sizeof(model), "%s/rgb8.onnx", temp_dir);
    write_onnx_file(tide_test_onnx_rgb_gemm(), model);

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    /* --no-eval: --json prints each of the 2,500 evaluation steps. */
    run_tidectl(r, -1, "--json", "train", "--onnx", model, "--dataset", "synthetic", "--steps",
                "300", "--lr", "0.1", "--budget", "64M", "--no-eval", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --onnx --dataset synthetic: exit %d\n%s\n%s", r->exit_code, r->out,
                 r->err);
    assert_non_null(strstr(r->out, "\"parameters\":579,"));
    const char *final = strstr(r->out, "\"final_loss\":");
    assert_non_null(final);
    double loss = strtod(final + strlen("\"final_loss\":"), NULL);
    print_message("tidectl, synthetic [3, 8, 8]: last loss %.4f (ln 3 = %.4f at the start)\n", loss,
                  log(3.0));
    assert_true(loss < 0.8 * log(3.0)); /* zero weights start at ln 3 */
    assert_null(strstr(r->err, "note:"));
    /* An eval-mode export is noted: its BatchNorms' running statistics stay fixed. */
    run_tidectl(r, -1, "plan", "--onnx", TIDE_EXAMPLES_ONNX_DIR "/bn_eval.onnx", "--budget", "64M",
                (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->err, "tidectl: note: " TIDE_EXAMPLES_ONNX_DIR
                                   "/bn_eval.onnx: 2 BatchNormalization nodes are in inference "
                                   "mode (an eval-mode export)"));
    free(r);
    unlink(model);
}

/*
 * A training loss that is not finite (SGD at a learning rate of 1e30) fails the job at that
 * step, naming it, before another step or checkpoint: the checkpoint of the step before holds
 * finite variables, and tidectl says why and exits 1.
 */
static void test_loss_not_finite_fails_job(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, -1, "train", "--name", "diverging", "--model", "mlp", "--dataset", "synthetic",
                "--lr", "1e30", "--steps", "20", "--checkpoint-every", "1", "--no-eval",
                (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    const char *said = strstr(r->err, "tidectl: train: INVALID_ARGUMENT: step ");
    if (!said)
        fail_msg("tidectl train at --lr 1e30: exit %d\n%s", r->exit_code, r->err);
    char *end;
    long step = strtol(said + strlen("tidectl: train: INVALID_ARGUMENT: step "), &end, 10);
    assert_true(step >= 2);
    assert_non_null(strstr(end, ": the training loss is "));
    assert_non_null(strstr(end, ", not finite"));
    char kept[64];
    snprintf(kept, sizeof(kept), "its checkpoint of step %ld is kept", step - 1);
    assert_non_null(strstr(end, kept));
    free(r);

    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct tide_job_info *jobs;
    size_t n;
    CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
    char id[TIDE_JOB_ID_MAX] = "";
    for (size_t i = 0; i < n; i++) {
        if (strcmp(jobs[i].name, "diverging") == 0) {
            assert_int_equal(jobs[i].state, TIDE_JOB_FAILED);
            assert_non_null(strstr(jobs[i].message, kept));
            snprintf(id, sizeof(id), "%s", jobs[i].id);
        }
    }
    free(jobs);
    assert_true(id[0]);
    tide_variables *v = read_all(c, id);
    for (size_t i = 0; i < tide_variables_count(v); i++) {
        const struct tide_tensor *t = tide_variables_at(v, i);
        const float *x = (const float *)t->data;
        for (size_t k = 0; k < t->bytes / sizeof(float); k++) {
            if (!isfinite(x[k]))
                fail_msg("variable %s[%zu] is %g in the kept checkpoint", t->name, k, x[k]);
        }
    }
    tide_variables_free(v);
    tide_client_free(c);
}

/*
 * tidectl plan and train --onnx on PyTorch's CNN (examples/onnx/cnn.onnx),
 * then export --onnx --from: the file written holds the job's Variables as
 * its initializers, byte for byte what libtide's tide_onnx_with_values makes
 * of the values tide_client_read_variables reads, and differs from the
 * untrained file. A static batch cannot be changed, and a model the job was
 * not trained from is refused, naming a Variable it lacks.
 */
static void test_tidectl_onnx_train_and_export(void **state)
{
    (void)state;
    NEED_DAEMON();
    const char *model = TIDE_EXAMPLES_ONNX_DIR "/cnn.onnx";
    char out[600];
    snprintf(out, sizeof(out), "%s/cnn-trained.onnx", temp_dir);
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, -1, "--json", "plan", "--onnx", model, "--budget", "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl plan --onnx: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"parameters\":9098,"));
    assert_non_null(strstr(r->out, "\"batch\":8,"));
    run_tidectl(r, -1, "--json", "train", "--onnx", model, "--dataset", "synthetic", "--steps",
                "12", "--no-eval", "--budget", "64M", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --onnx: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    char id[TIDE_JOB_ID_MAX];
    submitted_job(r->out, id, sizeof(id));
    assert_non_null(strstr(r->out, "\"parameters\":9098,"));
    assert_non_null(strstr(r->out, "\"steps\":12,"));

    run_tidectl(r, -1, "--json", "export", id, "--onnx", out, "--from", model, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl export --onnx: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"initializers\":6"));
    size_t len, written_len;
    uint8_t *original = slurp(model, &len);
    uint8_t *written = slurp(out, &written_len);
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    tide_variables *vars = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &vars));
    size_t n = tide_variables_count(vars);
    assert_int_equal(n, 6);
    struct tide_tensor values[6];
    for (size_t i = 0; i < n; i++)
        values[i] = *tide_variables_at(vars, i);
    uint8_t *want;
    size_t want_len, replaced;
    char err[512];
    if (tide_onnx_with_values(original, len, NULL, 0, values, n, &want, &want_len, &replaced, err,
                              sizeof(err)) != 0)
        fail_msg("tide_onnx_with_values: %s", err);
    assert_int_equal(replaced, 6);
    assert_int_equal(written_len, want_len);
    assert_memory_equal(written, want, want_len);
    assert_true(written_len != len || memcmp(written, original, len) != 0);
    free(want);
    free(written);
    free(original);
    tide_variables_free(vars);
    tide_client_free(c);

    /* Refusals: a static batch, --onnx without --from, another model. */
    run_tidectl(r, -1, "train", "--onnx", model, "--batch", "16", "--steps", "1", (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "cnn.onnx: the model has a static batch of 8: a batch of 16 "
                                   "can only stand for a dynamic batch dimension"));
    run_tidectl(r, -1, "export", id, "--onnx", out, (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "--onnx OUT.onnx and --from MODEL.onnx come together"));
    run_tidectl(r, -1, "export", id, "--onnx", out, "--from", TIDE_EXAMPLES_ONNX_DIR "/gpt.onnx",
                "--frozen", "h.0.attn.mask,h.1.attn.mask", (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->err, "no value for Variable"));
    free(r);
}

/*
 * Ctrl-C during tidectl train: the steps in flight finish, the job is
 * finished as usual, and tidectl exits 130 so that the shell knows.
 */
static void test_tidectl_ctrl_c(void **state)
{
    (void)state;
    NEED_DAEMON();
    char out_path[600];
    snprintf(out_path, sizeof(out_path), "%s/ctrl-c.out", temp_dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null = open("/dev/null", O_WRONLY);
        if (fd < 0 || null < 0)
            _exit(126);
        dup2(fd, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execl(tidectl_path, tidectl_path, "--socket", socket_path, "--json", "train", "--model",
              "mlp", "--dataset", "synthetic", "--steps", "100000", "--batch", "64", "--budget",
              "16M", "--no-eval", (char *)NULL);
        _exit(127);
    }
    /* Wait for the first step line, then press Ctrl-C. */
    bool stepped = false;
    for (double deadline = now_s() + 60; !stepped && now_s() < deadline; sleep_ms(20)) {
        FILE *f = fopen(out_path, "r");
        char line[4096];
        while (f && !stepped && fgets(line, sizeof(line), f))
            stepped = strstr(line, "\"event\":\"step\"") != NULL;
        if (f)
            fclose(f);
    }
    kill(pid, SIGINT);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(stepped);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);

    FILE *f = fopen(out_path, "r");
    assert_non_null(f);
    char line[4096], done[4096] = "";
    while (fgets(line, sizeof(line), f))
        if (strstr(line, "\"event\":\"done\""))
            snprintf(done, sizeof(done), "%s", line);
    fclose(f);
    assert_non_null(strstr(done, "\"interrupted\":true"));
    assert_non_null(strstr(done, "\"state\":\"done\""));
}

static void test_tidectl(void **state)
{
    (void)state;
    NEED_DAEMON();
    if (access(tidectl_path, X_OK) != 0)
        fail_msg("%s was not built", tidectl_path);
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);

    run_tidectl(r, -1, "--json", "status", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl status: exit %d\n%s", r->exit_code, r->err);
    assert_non_null(strstr(r->out, "\"backend\":\"cpu\""));
    assert_int_equal(strchr(r->out, '\n') - r->out + 1, (long)strlen(r->out)); /* one line */

    run_tidectl(r, -1, "status", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, "backend"));

    run_tidectl(r, -1, "--json", "plan", "--model", "mlp", "--dataset", "synthetic", "--batch",
                "32", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl plan: exit %d\n%s", r->exit_code, r->err);
    assert_non_null(strstr(r->out, "\"predicted_peak_bytes\":"));
    assert_non_null(strstr(r->out, "\"fits\":true"));

    /* The plan's picture, from the timeline the daemon sent; none for a plan that does not fit. */
    char svg[PATH_MAX], line[PATH_MAX + 32];
    snprintf(svg, sizeof(svg), "%s/plan.svg", temp_dir);
    run_tidectl(r, -1, "plan", "--model", "cnn", "--dataset", "synthetic", "--batch", "8",
                "--budget", "4M", "--partition-size", "8", "--svg", svg, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl plan --svg: exit %d\n%s", r->exit_code, r->err);
    snprintf(line, sizeof(line), "\n  memory picture  %s\n", svg);
    assert_non_null(strstr(r->out, line));
    FILE *f = fopen(svg, "rb");
    assert_non_null(f);
    char head[6] = {0};
    assert_int_equal(fread(head, 1, 5, f), 5);
    assert_int_equal(fseek(f, -7, SEEK_END), 0);
    char tail[8] = {0};
    assert_int_equal(fread(tail, 1, 7, f), 7);
    fclose(f);
    assert_string_equal(head, "<?xml");
    assert_string_equal(tail, "</svg>\n");
    assert_int_equal(remove(svg), 0);
    run_tidectl(r, -1, "plan", "--model", "cnn", "--dataset", "synthetic", "--batch", "8",
                "--budget", "64K", "--svg", svg, (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->err, "the plan does not fit, so there is no memory timeline"));
    assert_int_equal(access(svg, F_OK), -1);

    run_tidectl(r, -1, "--json", "train", "--model", "mlp", "--dataset", "synthetic", "--steps",
                "5", "--batch", "200", "--budget", "16M", "--lr", "0.05", "--checkpoint-every", "2",
                "--keep", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    char *done = strstr(r->out, "{\"event\":\"done\"");
    assert_non_null(done);
    assert_non_null(strstr(done, "\"steps\":5"));
    assert_non_null(strstr(done, "\"test_accuracy\":"));
    assert_null(strstr(done, "\"test_accuracy\":null"));
    char *job = strstr(r->out, "{\"event\":\"submitted\",\"job\":{\"id\":\"");
    assert_non_null(job);
    job += strlen("{\"event\":\"submitted\",\"job\":{\"id\":\"");
    char id[TIDE_JOB_ID_MAX];
    size_t n = strcspn(job, "\"");
    assert_true(n > 0 && n < sizeof(id));
    memcpy(id, job, n);
    id[n] = '\0';

    run_tidectl(r, -1, "--json", "get", id, (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, "\"steps\":5"));
    assert_non_null(strstr(r->out, "\"last_checkpoint_step\":4"));

    run_tidectl(r, -1, "--json", "checkpoint", id, (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl checkpoint: exit %d\n%s", r->exit_code, r->err);
    assert_non_null(strstr(r->out, "\"step\":5"));

    run_tidectl(r, -1, "--json", "jobs", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, id));

    /* The table names the owner by user name (the daemon is local). */
    run_tidectl(r, -1, "jobs", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    const struct passwd *me = getpwuid(getuid());
    assert_non_null(me);
    char *row = strstr(r->out, id);
    assert_non_null(row);
    char *row_end = strchr(row, '\n');
    assert_non_null(row_end);
    *row_end = '\0';
    char owner[64];
    snprintf(owner, sizeof(owner), " %.8s ", me->pw_name);
    if (!strstr(row, owner))
        fail_msg("the jobs row \"%s\" does not name the owner %s", row, me->pw_name);

    run_tidectl(r, -1, "top", "--once", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, id));
    run_tidectl(r, -1, "--json", "top", "--once", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, "\"swap_mb_per_step\""));

    run_tidectl(r, -1, "cancel", id, (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, "cancelled"));

    /* Watching an ended job: where it stands, then the end of the stream. */
    run_tidectl(r, -1, "--json", "watch", id, (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_non_null(strstr(r->out, "{\"event\":\"state\""));
    assert_non_null(strstr(r->out, "\"state\":\"cancelled\""));

    /* A new job from the cancelled one's last checkpoint (step 5). */
    run_tidectl(r, -1, "--json", "train", "--model", "mlp", "--dataset", "synthetic", "--steps",
                "2", "--batch", "200", "--budget", "16M", "--resume", id, "--no-eval",
                (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --resume: exit %d\n%s", r->exit_code, r->err);
    assert_non_null(strstr(r->out, "{\"event\":\"step\",\"job\":"));
    assert_non_null(strstr(r->out, "\"result\":{\"step\":7,"));

    /* The LSTM on synthetic sequences of any length: 2 layers over 12 rows. */
    run_tidectl(r, -1, "--json", "train", "--model", "lstm", "--dataset", "synthetic",
                "--seq-len", "12", "--hidden", "16", "--layers", "2", "--steps", "3", "--batch",
                "8", "--no-eval", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train --model lstm: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    assert_non_null(strstr(r->out, "\"result\":{\"step\":3,"));

    /* Errors: the daemon's (1), usage (2), no daemon (3). */
    run_tidectl(r, -1, "get", "no-such-job", (char *)NULL);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->err, "NOT_FOUND"));
    run_tidectl(r, -1, "train", "--model", "vgg", (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    run_tidectl(r, -1, "frobnicate", (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    run_tidectl(r, -1, "jobs", "--stride", "2", (char *)NULL);
    assert_int_equal(r->exit_code, 2);
    char *argv[] = {tidectl_path, (char *)"--socket", (char *)"/nonexistent/tided.sock",
                    (char *)"status", NULL};
    run_program(argv, -1, r);
    assert_int_equal(r->exit_code, 3);
    assert_non_null(strstr(r->err, "tided"));
    assert_non_null(strstr(r->err, "socket"));

    /* Help for every command. */
    static const char *const commands[] = {"status", "plan",       "train", "jobs", "get", "watch",
                                           "cancel", "checkpoint", "trace", "top"};
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        run_tidectl(r, -1, (char *)commands[i], "--help", (char *)NULL);
        assert_int_equal(r->exit_code, 0);
        assert_non_null(strstr(r->out, "SYNOPSIS"));
        assert_non_null(strstr(r->out, commands[i]));
    }
    free(r);
}

/* ============================================================================
 * Tests: tidectl --json, read back with json-c
 * ========================================================================== */

/*
 * A job name that JSON must escape (quote, backslash, control characters),
 * may leave alone (slash, DEL) and must pass through byte for byte (UTF-8:
 * é, 日本, a rocket outside the BMP).
 */
static const char json_job_name[] = "q\"uote back\\slash /slash \t\n\r\b\f \x01\x1f\x7f "
                                    "\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x9a\x80";

/* The fields of tidectl's JSON objects, in the order tidectl writes them. */
#define JOB_KEYS                                                                                   \
    "id", "name", "owner_uid", "state", "steps", "last_loss", "device_budget_bytes",               \
        "device_high_water_bytes", "host_bytes", "h2d_bytes_total", "d2h_bytes_total",             \
        "steps_per_second", "created_us", "updated_us", "message", "last_checkpoint_step",         \
        "priority", "queue_position", "queued_us", "device"
#define PLAN_KEYS                                                                                  \
    "nodes", "budget_bytes", "predicted_peak_bytes", "fits", "min_budget_bytes",                   \
        "min_budget_node", "floor_bytes", "floor_node", "swap_in_bytes", "swap_out_bytes",         \
        "fetch_bytes", "write_back_bytes", "partition_size", "swap_threshold",                     \
        "prefetch_distance", "host_bytes", "plan_us", "message", "predicted_step_ms",              \
        "predicted_stall_ms", "device_profile", "host_budget_bytes", "recompute_bytes",            \
        "recompute_ms", "products", "tf32_products"
static const char *const job_keys[] = {JOB_KEYS, NULL};
static const char *const job_keys_with_plan[] = {JOB_KEYS, "plan", NULL};
static const char *const job_plan_keys[] = {PLAN_KEYS, NULL};
static const char *const plan_line_keys[] = {"model",   "batch",        "parameters", "swap",
                                             PLAN_KEYS, "n_partitions", "partitions", NULL};
static const char *const partition_keys[] = {"index",
                                             "nodes",
                                             "resident_bytes",
                                             "swap_in_bytes",
                                             "swap_out_bytes",
                                             "fetch_bytes",
                                             "write_back_bytes",
                                             "peak_node",
                                             NULL};
static const char *const step_keys[] = {
    "step",     "loss",      "step_us", "device_high_water_bytes", "h2d_bytes", "d2h_bytes",
    "stall_us", "eval_only", NULL};

/* Runs tidectl --json with args (NULL-terminated), wants exit, and returns its stdout's lines. */
static struct json_object *tidectl_json_lines(struct tide_test_run *r, int exit, size_t *n,
                                              char *const args[])
{
    char *argv[32];
    int k = 0;
    argv[k++] = tidectl_path;
    argv[k++] = (char *)"--socket";
    argv[k++] = socket_path;
    argv[k++] = (char *)"--json";
    for (; k < 31 && args[k - 4]; k++)
        argv[k] = args[k - 4];
    argv[k] = NULL;
    run_program(argv, -1, r);
    if (r->exit_code != exit)
        fail_msg("tidectl --json %s: exit %d, wanted %d\n%s\n%s", args[0], r->exit_code, exit,
                 r->out, r->err);
    return tide_test_json_lines(r->out, n);
}

/* Checks a plan report's JSON fields against the libtide struct, field by field. */
static void expect_plan_equals(struct json_object *o, const struct tide_job_plan_report *p)
{
    assert_int_equal(tide_test_json_uint(o, "nodes"), p->nodes);
    assert_int_equal(tide_test_json_uint(o, "budget_bytes"), p->budget_bytes);
    assert_int_equal(tide_test_json_uint(o, "predicted_peak_bytes"), p->predicted_peak_bytes);
    assert_int_equal(tide_test_json_bool(o, "fits"), p->fits);
    assert_int_equal(tide_test_json_uint(o, "min_budget_bytes"), p->min_budget_bytes);
    assert_string_equal(tide_test_json_string(o, "min_budget_node"), p->min_budget_node);
    assert_int_equal(tide_test_json_uint(o, "floor_bytes"), p->floor_bytes);
    assert_string_equal(tide_test_json_string(o, "floor_node"), p->floor_node);
    assert_int_equal(tide_test_json_uint(o, "swap_in_bytes"), p->swap_in_bytes);
    assert_int_equal(tide_test_json_uint(o, "swap_out_bytes"), p->swap_out_bytes);
    assert_int_equal(tide_test_json_uint(o, "fetch_bytes"), p->fetch_bytes);
    assert_int_equal(tide_test_json_uint(o, "write_back_bytes"), p->write_back_bytes);
    assert_int_equal(tide_test_json_uint(o, "partition_size"), p->partition_size);
    assert_int_equal(tide_test_json_uint(o, "swap_threshold"), p->swap_threshold);
    assert_int_equal(tide_test_json_uint(o, "prefetch_distance"), p->prefetch_distance);
    assert_int_equal(tide_test_json_uint(o, "host_bytes"), p->host_bytes);
    assert_int_equal(tide_test_json_uint(o, "plan_us"), p->plan_us);
    assert_int_equal(tide_test_json_uint(o, "recompute_bytes"), p->recompute_bytes);
    assert_string_equal(tide_test_json_string(o, "message"), p->message);
    /* Nine significant digits (tidectl_json_set_double). */
    assert_true(fabs(tide_test_json_number(o, "predicted_step_ms") - p->predicted_step_ms) <=
                1e-8 * fabs(p->predicted_step_ms));
    assert_true(fabs(tide_test_json_number(o, "predicted_stall_ms") - p->predicted_stall_ms) <=
                1e-8 * fabs(p->predicted_stall_ms));
    assert_string_equal(tide_test_json_string(o, "device_profile"), p->device_profile);
    assert_int_equal(tide_test_json_uint(o, "products"), p->products);
    assert_int_equal(tide_test_json_uint(o, "tf32_products"), p->tf32_products);
    assert_int_equal(tide_test_json_uint(o, "host_budget_bytes"), p->host_budget_bytes);
}

/*
 * Checks a job's JSON object against what libtide reports for it, field by
 * field: the strings exactly, the loss as the same float (nine significant
 * digits bring a float back bit for bit).
 */
static void expect_job_equals(struct json_object *o, const struct tide_job_info *j)
{
    tide_test_json_keys(o, j->has_plan ? job_keys_with_plan : job_keys);
    assert_string_equal(tide_test_json_string(o, "id"), j->id);
    assert_string_equal(tide_test_json_string(o, "name"), j->name);
    assert_int_equal(tide_test_json_uint(o, "owner_uid"), j->owner_uid);
    assert_string_equal(tide_test_json_string(o, "state"), tide_job_state_name(j->state));
    assert_int_equal(tide_test_json_uint(o, "steps"), j->steps);
    assert_true((float)tide_test_json_number(o, "last_loss") == j->last_loss);
    assert_int_equal(tide_test_json_uint(o, "device_budget_bytes"), j->device_budget_bytes);
    assert_int_equal(tide_test_json_uint(o, "device_high_water_bytes"), j->device_high_water_bytes);
    assert_int_equal(tide_test_json_uint(o, "host_bytes"), j->host_bytes);
    assert_int_equal(tide_test_json_uint(o, "h2d_bytes_total"), j->h2d_bytes_total);
    assert_int_equal(tide_test_json_uint(o, "d2h_bytes_total"), j->d2h_bytes_total);
    assert_true(fabs(tide_test_json_number(o, "steps_per_second") - j->steps_per_second) <=
                1e-8 * fabs(j->steps_per_second));
    assert_int_equal(tide_test_json_int(o, "created_us"), j->created_us);
    assert_int_equal(tide_test_json_int(o, "updated_us"), j->updated_us);
    assert_string_equal(tide_test_json_string(o, "message"), j->message);
    assert_int_equal(tide_test_json_uint(o, "last_checkpoint_step"), j->last_checkpoint_step);
    assert_int_equal(tide_test_json_uint(o, "device"), j->device);
    if (j->has_plan) {
        struct json_object *plan = tide_test_json_object(o, "plan");
        tide_test_json_keys(plan, job_plan_keys);
        expect_plan_equals(plan, &j->plan);
    }
}

/* Job id as libtide's List sees it (without its plan, as List, Status and Cancel send jobs). */
static void listed_job(tide_client *c, const char *id, struct tide_job_info *out)
{
    struct tide_job_info *jobs;
    size_t n;
    CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
    for (size_t i = 0; i < n; i++)
        if (strcmp(jobs[i].id, id) == 0) {
            *out = jobs[i];
            free(jobs);
            assert_false(out->has_plan);
            return;
        }
    free(jobs);
    fail_msg("libtide does not list job %s", id);
}

/* The job with this id among a JSON array of jobs (or of {"job": ...} rows when in_row). */
static struct json_object *find_job(struct json_object *jobs, const char *id, bool in_row)
{
    for (size_t i = 0; i < json_object_array_length(jobs); i++) {
        struct json_object *job = json_object_array_get_idx(jobs, i);
        if (in_row)
            job = tide_test_json_object(job, "job");
        if (strcmp(tide_test_json_string(job, "id"), id) == 0)
            return json_object_array_get_idx(jobs, i);
    }
    fail_msg("no job %s in %s", id, json_object_to_json_string(jobs));
    return NULL;
}

/*
 * `tidectl plan --partitions` lists the partitions the memory passes left
 * work in and counts the empty ones (the CNN in 10 MiB, at the automatic
 * partition size): as many rows as --json lists non-empty partitions, and
 * the count line exactly when some are empty.
 */
/*
 * tidectl plan --device-profile: the daemon plans for that device and
 * predicts its step; without one, for its own (the CPU backend, measured);
 * an unknown name is refused naming it and the known ones.
 */
static void test_tidectl_plan_device_profile(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    size_t n;
    double predicted[2];
    const char *const profiles[2] = {"h100", NULL};
    for (int i = 0; i < 2; i++) {
        char *args[12] = {"plan", "--model", "cnn", "--budget", "10M", NULL};
        if (profiles[i])
            args[5] = "--device-profile", args[6] = (char *)profiles[i];
        struct json_object *lines = tidectl_json_lines(r, 0, &n, args);
        assert_int_equal(n, 1);
        struct json_object *line = tide_test_json_line(lines, 0);
        tide_test_json_keys(line, plan_line_keys);
        assert_string_equal(tide_test_json_string(line, "device_profile"),
                            profiles[i] ? profiles[i] : "cpu");
        predicted[i] = tide_test_json_number(line, "predicted_step_ms");
        assert_true(predicted[i] > 0);
        assert_true(tide_test_json_uint(line, "host_budget_bytes") > 0); /* 80 % of RAM */
        json_object_put(lines);
    }
    /* An H100 runs the CNN's step faster than this machine's CPU backend. */
    assert_true(predicted[0] < predicted[1]);

    run_tidectl(r, -1, "plan", "--model", "cnn", "--budget", "10M", "--device-profile", "h100",
                (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    char want[64];
    snprintf(want, sizeof(want), "predicted step  %.2f ms on h100", predicted[0]);
    if (!strstr(r->out, want))
        fail_msg("tidectl plan's report lacks \"%s\":\n%s", want, r->out);

    run_tidectl(r, -1, "plan", "--model", "cnn", "--budget", "10M", "--device-profile", "a100",
                (char *)NULL);
    assert_int_not_equal(r->exit_code, 0);
    const char *message =
        "device_profile: device profile \"a100\" is unknown; known profiles: cpu, h100, h200";
    if (!strstr(r->err, message))
        fail_msg("tidectl plan --device-profile a100: stderr lacks \"%s\":\n%s", message, r->err);
    free(r);
}

/* The losses of the step lines of a `tidectl --json train` run's output, in order; *n of them. */
static size_t step_losses(const char *out, double *losses, size_t max)
{
    size_t n_lines, n = 0;
    struct json_object *lines = tide_test_json_lines(out, &n_lines);
    for (size_t i = 0; i < n_lines; i++) {
        struct json_object *line = tide_test_json_line(lines, i);
        if (strcmp(tide_test_json_string(line, "event"), "step") != 0)
            continue;
        struct json_object *result;
        assert_true(json_object_object_get_ex(line, "result", &result));
        assert_true(n < max);
        losses[n++] = tide_test_json_number(result, "loss");
    }
    json_object_put(lines);
    return n;
}

/*
 * tidectl --math: a job in tf32 runs on the daemon's CPU backend with the
 * losses of fp32, bit for bit (the CPU has no TF32; its products compute
 * float32 whatever the math); its plan counts the products in tf32; an
 * unknown math is refused by the daemon, naming it.
 */
static void test_tidectl_math(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    double losses[2][8];
    size_t n[2];
    for (int k = 0; k < 2; k++) {
        run_tidectl(r, -1, "--json", "train", "--model", "cnn", "--dataset", "synthetic",
                    "--steps", "4", "--batch", "16", "--budget", "64M", "--no-eval", "--math",
                    k ? "tf32" : "fp32", (char *)NULL);
        if (r->exit_code != 0)
            fail_msg("tidectl train --math %s: exit %d\n%s\n%s", k ? "tf32" : "fp32",
                     r->exit_code, r->out, r->err);
        n[k] = step_losses(r->out, losses[k], 8);
    }
    assert_int_equal(n[0], 4);
    assert_int_equal(n[1], 4);
    for (size_t i = 0; i < 4; i++)
        if (losses[0][i] != losses[1][i])
            fail_msg("step %zu: loss %.9g in fp32, %.9g in tf32", i + 1, losses[0][i],
                     losses[1][i]);

    /* The plan counts the products and those in tf32: the CNN's 2 convolutions, 2 MatMuls and
     * their gradients (the first convolution has no input gradient): 11. */
    for (int k = 0; k < 2; k++) {
        size_t lines_n;
        char *args[] = {"plan", "--model", "cnn", "--budget", "10M", "--math",
                        k ? "tf32" : "fp32", NULL};
        struct json_object *lines = tidectl_json_lines(r, 0, &lines_n, args);
        assert_int_equal(lines_n, 1);
        struct json_object *line = tide_test_json_line(lines, 0);
        assert_int_equal(tide_test_json_uint(line, "products"), 11);
        assert_int_equal(tide_test_json_uint(line, "tf32_products"), k ? 11 : 0);
        json_object_put(lines);
    }
    run_tidectl(r, -1, "plan", "--model", "cnn", "--budget", "10M", "--math", "tf32",
                (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    if (!strstr(r->out, "  math            tf32 in its 11 convolutions and matrix products\n"))
        fail_msg("tidectl plan --math tf32: no math line:\n%s", r->out);
    const char *host = strstr(r->out, "  host memory");
    assert_non_null(host);
    assert_null(strstr(host + 1, "  host memory")); /* one line, not two */

    run_tidectl(r, -1, "plan", "--model", "cnn", "--budget", "10M", "--math", "bf16",
                (char *)NULL);
    assert_int_not_equal(r->exit_code, 0);
    const char *message = "math \"bf16\": wants fp32 or tf32";
    if (!strstr(r->err, message))
        fail_msg("tidectl plan --math bf16: stderr lacks \"%s\":\n%s", message, r->err);
    free(r);
}

static void test_tidectl_plan_partitions_table(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    size_t n;
    struct json_object *lines = tidectl_json_lines(
        r, 0, &n, (char *[]){"plan", "--model", "cnn", "--budget", "10M", "--partitions", NULL});
    assert_int_equal(n, 1);
    struct json_object *parts = tide_test_json_array(tide_test_json_line(lines, 0), "partitions");
    size_t total = json_object_array_length(parts), empty = 0;
    static const char *const byte_keys[] = {"resident_bytes", "swap_in_bytes", "swap_out_bytes",
                                            "fetch_bytes", "write_back_bytes"};
    for (size_t i = 0; i < total; i++) {
        struct json_object *q = json_object_array_get_idx(parts, i);
        bool none = tide_test_json_uint(q, "nodes") == 0;
        for (size_t k = 0; k < 5 && none; k++)
            none = tide_test_json_uint(q, byte_keys[k]) == 0;
        empty += none;
    }
    json_object_put(lines);

    run_tidectl(r, -1, "plan", "--model", "cnn", "--budget", "10M", "--partitions", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    const char *table = strstr(r->out, "PEAK NODE\n");
    assert_non_null(table);
    size_t rows = 0;
    for (const char *line = strchr(table, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        unsigned part, nodes;
        if (sscanf(line, " %u %u", &part, &nodes) == 2)
            rows++;
        if (!strchr(line, '\n'))
            break;
    }
    assert_int_equal(rows, total - empty);
    char count[96];
    snprintf(count, sizeof(count), "(%zu of %zu partitions are empty: no nodes, no bytes; not "
             "listed)\n", empty, total);
    if (empty)
        assert_non_null(strstr(r->out, count));
    else
        assert_null(strstr(r->out, "partitions are empty"));
    free(r);
}

/* `tidectl --json plan`, one that fits and one that does not, every field. */
/*
 * tidectl plan --policy through the daemon: checkpoint-sqrt fits the CNN in
 * 8 MiB without swapping and says what it recomputes, recompute fits too;
 * an unknown policy is a usage error naming the choices.
 */
static void test_tidectl_plan_policy(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    static const char *const policies[] = {"checkpoint-sqrt", "recompute"};
    for (int i = 0; i < 2; i++) {
        size_t n;
        struct json_object *lines = tidectl_json_lines(
            r, 0, &n,
            (char *[]){"plan", "--model", "cnn", "--dataset", "synthetic", "--batch", "32",
                       "--budget", "8M", "--policy", (char *)policies[i], NULL});
        assert_int_equal(n, 1);
        struct json_object *p = tide_test_json_line(lines, 0);
        assert_true(tide_test_json_bool(p, "fits"));
        assert_true(tide_test_json_uint(p, "predicted_peak_bytes") <= UINT64_C(8) << 20);
        assert_true(tide_test_json_number(p, "recompute_ms") >= 0);
        if (i == 0)
            assert_int_equal(tide_test_json_uint(p, "swap_out_bytes") +
                                 tide_test_json_uint(p, "swap_in_bytes"),
                             0);
        json_object_put(lines);
    }
    run_tidectl(r, -1, "plan", "--model", "cnn", "--policy", "sqrt", NULL);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "--policy must be one of"));
    assert_non_null(strstr(r->err, "got \"sqrt\""));
    free(r);
}

static void test_tidectl_json_plan(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    size_t n;
    struct json_object *lines = tidectl_json_lines(
        r, 0, &n,
        (char *[]){"plan", "--model", "mlp", "--dataset", "synthetic", "--batch", "32", "--budget",
                   "16M", "--partition-size", "8", "--partitions", NULL});
    assert_int_equal(n, 1);
    struct json_object *p = tide_test_json_line(lines, 0);
    tide_test_json_keys(p, plan_line_keys);
    assert_string_equal(tide_test_json_string(p, "model"), "mlp");
    assert_int_equal(tide_test_json_int(p, "batch"), 32);
    /* tidectl's MLP on 28x28 images: 784*256+256 + 256*128+128 + 128*10+10 parameters. */
    assert_int_equal(tide_test_json_int(p, "parameters"), 235146);
    assert_string_equal(tide_test_json_string(p, "swap"), "auto");
    assert_int_equal(tide_test_json_uint(p, "budget_bytes"), UINT64_C(16) << 20);
    assert_true(tide_test_json_bool(p, "fits"));
    assert_true(tide_test_json_uint(p, "predicted_peak_bytes") <= UINT64_C(16) << 20);
    assert_string_equal(tide_test_json_string(p, "min_budget_node"), "");
    assert_string_equal(tide_test_json_string(p, "message"), "");
    assert_int_equal(tide_test_json_uint(p, "partition_size"), 8);
    /* Every partition, in order; together they hold every node. */
    struct json_object *parts = tide_test_json_array(p, "partitions");
    size_t n_parts = json_object_array_length(parts);
    assert_int_equal(tide_test_json_uint(p, "n_partitions"), n_parts);
    assert_true(n_parts > 1);
    uint64_t nodes = 0;
    for (size_t i = 0; i < n_parts; i++) {
        struct json_object *q = json_object_array_get_idx(parts, i);
        tide_test_json_keys(q, partition_keys);
        assert_int_equal(tide_test_json_uint(q, "index"), i);
        uint64_t k = tide_test_json_uint(q, "nodes");
        assert_true(k >= 1 && k <= 8);
        nodes += k;
        assert_true(tide_test_json_string(q, "peak_node")[0] != '\0');
    }
    assert_int_equal(nodes, tide_test_json_uint(p, "nodes"));
    json_object_put(lines);

    /*
     * A budget below the largest node's working set: fits false, and the
     * node and the message (quotes and slashes in them) exactly as the text
     * report prints them.
     */
    char *const cnn[] = {"plan", "--model", "cnn", "--budget", "1M", NULL};
    lines = tidectl_json_lines(r, 0, &n, cnn);
    assert_int_equal(n, 1);
    p = tide_test_json_line(lines, 0);
    tide_test_json_keys(p, plan_line_keys);
    assert_string_equal(tide_test_json_string(p, "model"), "cnn");
    assert_int_equal(tide_test_json_int(p, "batch"), 64);
    assert_false(tide_test_json_bool(p, "fits"));
    assert_int_equal(tide_test_json_uint(p, "budget_bytes"), UINT64_C(1) << 20);
    assert_true(tide_test_json_uint(p, "min_budget_bytes") > UINT64_C(1) << 20);
    assert_int_equal(tide_test_json_uint(p, "n_partitions"),
                     json_object_array_length(tide_test_json_array(p, "partitions")));
    char why[2048], set_by[512];
    snprintf(why, sizeof(why), "  why             %s\n", tide_test_json_string(p, "message"));
    snprintf(set_by, sizeof(set_by), ", set by %s\n", tide_test_json_string(p, "min_budget_node"));
    assert_non_null(strchr(why, '"'));
    assert_non_null(strchr(set_by, '/'));
    /* The floor: one kernel's working set, above this budget and at most the smallest budget. */
    uint64_t floor = tide_test_json_uint(p, "floor_bytes");
    assert_true(floor > UINT64_C(1) << 20);
    assert_true(floor <= tide_test_json_uint(p, "min_budget_bytes"));
    char floor_by[512];
    snprintf(floor_by, sizeof(floor_by), ", set by %s\n", tide_test_json_string(p, "floor_node"));
    run_tidectl(r, -1, "plan", "--model", "cnn", "--budget", "1M", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    if (!strstr(r->out, why) || !strstr(r->out, set_by) || !strstr(r->out, floor_by))
        fail_msg("the text report differs from the JSON line:\n%s%s%s%s", r->out, why, set_by,
                 floor_by);
    json_object_put(lines);
    free(r);
}

/*
 * A job whose name needs escaping, trained by `tidectl --json train`, then
 * seen by every other --json command: each line is strict JSON, every field
 * is there in order, and every value is libtide's (the name byte for byte).
 */
static void test_tidectl_json_job(void **state)
{
    (void)state;
    NEED_DAEMON();
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    size_t n;

    /* train: "submitted", a "step" per step, "done". */
    struct json_object *lines =
        tidectl_json_lines(r, 0, &n,
                           (char *[]){"train", "--model", "mlp", "--dataset", "synthetic",
                                      "--steps", "3", "--batch", "64", "--budget", "16M", "--lr",
                                      "0.05", "--no-eval", "--keep", "--name",
                                      (char *)json_job_name, NULL});
    assert_int_equal(n, 5);
    static const char *const submitted_keys[] = {"event", "job",         "model", "parameters",
                                                 "batch", "total_steps", NULL};
    struct json_object *submitted = tide_test_json_line(lines, 0);
    tide_test_json_keys(submitted, submitted_keys);
    assert_string_equal(tide_test_json_string(submitted, "event"), "submitted");
    struct json_object *job = tide_test_json_object(submitted, "job");
    tide_test_json_keys(job, job_keys_with_plan);
    char id[TIDE_JOB_ID_MAX];
    snprintf(id, sizeof(id), "%s", tide_test_json_string(job, "id"));
    assert_memory_equal(id, "j-", 2);
    assert_string_equal(tide_test_json_string(job, "name"), json_job_name);
    assert_int_equal(tide_test_json_uint(job, "owner_uid"), getuid());
    assert_int_equal(tide_test_json_uint(job, "steps"), 0);
    assert_int_equal(tide_test_json_uint(job, "device_budget_bytes"), UINT64_C(16) << 20);
    assert_int_equal(tide_test_json_uint(tide_test_json_object(job, "plan"), "budget_bytes"),
                     UINT64_C(16) << 20);
    assert_string_equal(tide_test_json_string(submitted, "model"), "mlp");
    assert_int_equal(tide_test_json_int(submitted, "parameters"), 235146);
    assert_int_equal(tide_test_json_int(submitted, "batch"), 64);
    assert_int_equal(tide_test_json_int(submitted, "total_steps"), 3);

    static const char *const step_line_keys[] = {"event", "job", "result", "batch_accuracy", NULL};
    uint64_t copies = 0, high_water = 0;
    double loss = 0;
    for (size_t i = 1; i <= 3; i++) {
        struct json_object *line = tide_test_json_line(lines, i);
        tide_test_json_keys(line, step_line_keys);
        assert_string_equal(tide_test_json_string(line, "event"), "step");
        assert_string_equal(tide_test_json_string(line, "job"), id);
        double accuracy = tide_test_json_number(line, "batch_accuracy");
        assert_true(accuracy >= 0 && accuracy <= 1);
        struct json_object *result = tide_test_json_object(line, "result");
        tide_test_json_keys(result, step_keys);
        assert_int_equal(tide_test_json_uint(result, "step"), i);
        assert_false(tide_test_json_bool(result, "eval_only"));
        loss = tide_test_json_number(result, "loss");
        assert_true(loss > 0 && loss < 10);
        uint64_t hw = tide_test_json_uint(result, "device_high_water_bytes");
        assert_true(hw > 0 && hw <= UINT64_C(16) << 20);
        high_water = hw > high_water ? hw : high_water;
        copies +=
            tide_test_json_uint(result, "h2d_bytes") + tide_test_json_uint(result, "d2h_bytes");
        tide_test_json_uint(result, "step_us");
        tide_test_json_uint(result, "stall_us");
    }

    /* done: without evaluation, the test figures are NaN, written as null. */
    static const char *const done_keys[] = {"event",
                                            "job",
                                            "steps",
                                            "interrupted",
                                            "seconds",
                                            "final_loss",
                                            "test_examples",
                                            "test_accuracy",
                                            "test_loss",
                                            "device_high_water_bytes",
                                            "copy_bytes_total",
                                            "state",
                                            NULL};
    struct json_object *done = tide_test_json_line(lines, 4);
    tide_test_json_keys(done, done_keys);
    assert_string_equal(tide_test_json_string(done, "event"), "done");
    assert_string_equal(tide_test_json_string(done, "job"), id);
    assert_int_equal(tide_test_json_int(done, "steps"), 3);
    assert_false(tide_test_json_bool(done, "interrupted"));
    assert_true(tide_test_json_number(done, "seconds") > 0);
    assert_true(tide_test_json_number(done, "final_loss") == loss);
    assert_int_equal(tide_test_json_int(done, "test_examples"), 0);
    assert_true(tide_test_json_is_null(done, "test_accuracy"));
    assert_true(tide_test_json_is_null(done, "test_loss"));
    assert_int_equal(tide_test_json_uint(done, "device_high_water_bytes"), high_water);
    assert_int_equal(tide_test_json_uint(done, "copy_bytes_total"), copies);
    struct tide_job_info info;
    CHECK_OK(c, tide_client_get(c, id, &info));
    assert_string_equal(tide_test_json_string(done, "state"), tide_job_state_name(info.state));
    json_object_put(lines);

    /* get: the job as libtide sees it, field by field. */
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"get", id, NULL});
    assert_int_equal(n, 1);
    CHECK_OK(c, tide_client_get(c, id, &info));
    assert_true(info.has_plan);
    assert_string_equal(info.name, json_job_name);
    assert_int_equal(info.steps, 3);
    assert_true((float)loss == info.last_loss);
    /* Without evaluation, the job's copies are exactly the training steps'. */
    assert_int_equal(info.h2d_bytes_total + info.d2h_bytes_total, copies);
    expect_job_equals(tide_test_json_line(lines, 0), &info);
    /* The raw line: slashes as they are, UTF-8 as it is, control characters escaped. */
    assert_non_null(strstr(r->out, "\"name\":\"q\\\"uote back\\\\slash /slash \\t\\n\\r\\b\\f "
                                   "\\u0001\\u001f\x7f \xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                                   "\xf0\x9f\x9a\x80\""));
    json_object_put(lines);

    /* jobs: one line per job; ours as libtide lists it. */
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"jobs", NULL});
    listed_job(c, id, &info);
    assert_true(n >= 1);
    bool seen = false;
    for (size_t i = 0; i < n; i++) {
        struct json_object *line = tide_test_json_line(lines, i);
        if (strcmp(tide_test_json_string(line, "id"), id) == 0) {
            expect_job_equals(line, &info);
            seen = true;
        }
    }
    assert_true(seen);
    json_object_put(lines);

    /* status: the daemon's figures, and the job among its jobs. */
    static const char *const status_keys[] = {"version",
                                              "backend",
                                              "device_name",
                                              "device_total_bytes",
                                              "device_used_bytes",
                                              "device_reserved_bytes",
                                              "host_pool_bytes",
                                              "host_pool_used_bytes",
                                              "started_us",
                                              "max_job_budget_bytes",
                                              "default_job_budget_bytes",
                                              "devices",
                                              "jobs",
                                              NULL};
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"status", NULL});
    assert_int_equal(n, 1);
    struct json_object *status = tide_test_json_line(lines, 0);
    tide_test_json_keys(status, status_keys);
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_string_equal(tide_test_json_string(status, "version"), s.version);
    assert_string_equal(tide_test_json_string(status, "backend"), "cpu");
    assert_string_equal(tide_test_json_string(status, "device_name"), s.device_name);
    assert_int_equal(tide_test_json_uint(status, "device_total_bytes"), UINT64_C(1) << 30);
    assert_int_equal(tide_test_json_int(status, "started_us"), s.started_us);
    assert_int_equal(tide_test_json_uint(status, "max_job_budget_bytes"), MAX_BUDGET);
    assert_int_equal(tide_test_json_uint(status, "default_job_budget_bytes"),
                     s.default_job_budget_bytes);
    /* One device (the default cpu-devices), holding the whole of the figures above. */
    struct json_object *devices = tide_test_json_array(status, "devices");
    assert_int_equal(json_object_array_length(devices), 1);
    struct json_object *device = json_object_array_get_idx(devices, 0);
    assert_int_equal(tide_test_json_uint(device, "index"), 0);
    assert_string_equal(tide_test_json_string(device, "name"), s.device_name);
    assert_int_equal(tide_test_json_uint(device, "total_bytes"), UINT64_C(1) << 30);
    assert_int_equal(tide_test_json_uint(device, "reserved_bytes"),
                     tide_test_json_uint(status, "device_reserved_bytes"));
    assert_int_equal(tide_test_json_uint(device, "used_bytes"),
                     tide_test_json_uint(status, "device_used_bytes"));
    expect_job_equals(find_job(tide_test_json_array(status, "jobs"), id, false), &info);
    json_object_put(lines);

    /* checkpoint: the step, and a path and size that are the file's. */
    static const char *const checkpoint_keys[] = {"job", "step", "path", "bytes", NULL};
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"checkpoint", id, NULL});
    assert_int_equal(n, 1);
    struct json_object *k = tide_test_json_line(lines, 0);
    tide_test_json_keys(k, checkpoint_keys);
    assert_string_equal(tide_test_json_string(k, "job"), id);
    assert_int_equal(tide_test_json_uint(k, "step"), 3);
    const char *path = tide_test_json_string(k, "path");
    assert_memory_equal(path, state_dir, strlen(state_dir));
    assert_non_null(strstr(r->out, path)); /* written without "\/" */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(tide_test_json_uint(k, "bytes"), (uint64_t)st.st_size);
    json_object_put(lines);
    listed_job(c, id, &info);

    /* top --once: one frame; no previous frame, so no rate per second (null). */
    static const char *const top_keys[] = {
        "time_us", "backend", "device_total_bytes", "device_used_bytes", "device_reserved_bytes",
        "jobs",    NULL};
    static const char *const top_row_keys[] = {"job", "step_rate", "swap_mb_per_step",
                                               "swap_mb_per_second", NULL};
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"top", "--once", NULL});
    assert_int_equal(n, 1);
    struct json_object *top = tide_test_json_line(lines, 0);
    tide_test_json_keys(top, top_keys);
    assert_string_equal(tide_test_json_string(top, "backend"), "cpu");
    assert_int_equal(tide_test_json_uint(top, "device_total_bytes"), UINT64_C(1) << 30);
    struct json_object *row = find_job(tide_test_json_array(top, "jobs"), id, true);
    tide_test_json_keys(row, top_row_keys);
    expect_job_equals(tide_test_json_object(row, "job"), &info);
    assert_true(tide_test_json_number(row, "step_rate") == info.steps_per_second);
    double per_step = (double)copies / 1e6 / 3;
    assert_true(fabs(tide_test_json_number(row, "swap_mb_per_step") - per_step) <= 1e-8 * per_step);
    assert_true(tide_test_json_is_null(row, "swap_mb_per_second"));
    json_object_put(lines);

    /* cancel: the job in its end state. */
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"cancel", id, NULL});
    assert_int_equal(n, 1);
    listed_job(c, id, &info);
    assert_int_equal(info.state, TIDE_JOB_CANCELLED);
    expect_job_equals(tide_test_json_line(lines, 0), &info);
    json_object_put(lines);

    /* watch an ended job: a state event, then the end of the stream. */
    static const char *const event_keys[] = {"event", "time_us", "message", "job", NULL};
    lines = tidectl_json_lines(r, 0, &n, (char *[]){"watch", id, NULL});
    assert_int_equal(n, 1);
    struct json_object *event = tide_test_json_line(lines, 0);
    tide_test_json_keys(event, event_keys);
    assert_string_equal(tide_test_json_string(event, "event"), "state");
    assert_true(tide_test_json_int(event, "time_us") > 0);
    tide_test_json_string(event, "message");
    expect_job_equals(tide_test_json_object(event, "job"), &info);
    json_object_put(lines);

    /* The daemon's error: the gRPC code, its number, the message with its quotes. */
    static const char *const error_keys[] = {"code", "code_number", "message", "exit", NULL};
    lines = tidectl_json_lines(r, 1, &n, (char *[]){"get", "no-such-job", NULL});
    assert_int_equal(n, 1);
    struct json_object *error = tide_test_json_object(tide_test_json_line(lines, 0), "error");
    tide_test_json_keys(error, error_keys);
    assert_string_equal(tide_test_json_string(error, "code"), "NOT_FOUND");
    assert_int_equal(tide_test_json_int(error, "code_number"), TIDE_CODE_NOT_FOUND);
    assert_string_equal(tide_test_json_string(error, "message"), "no job \"no-such-job\"");
    assert_int_equal(tide_test_json_int(error, "exit"), 1);
    json_object_put(lines);

    tide_client_free(c);
    free(r);
}

/* ============================================================================
 * Tests: restarts (last: they restart the daemon)
 * ========================================================================== */

/* Submits a job resuming from `from` and returns its variables before any step. */
static tide_variables *resumed_variables(tide_client *c, const struct graph *g, const char *from,
                                         char *new_id)
{
    struct tide_job_spec spec;
    make_spec(g, "resumed", JOB_BUDGET, &spec);
    spec.resume_from = from;
    submit(c, &spec, new_id);
    return read_all(c, new_id);
}

/* SIGTERM checkpoints every job and exits 0; a new job resumes from where the old one was. */
static void test_restart_after_sigterm(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "survivor", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 9);
    train_steps(c, id, &f, 3);
    tide_variables *before = read_all(c, id);
    tide_client_free(c);

    int status = daemon_stop(SIGTERM, 120);
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        print_log_tail();
        fail_msg("tided did not exit 0 on SIGTERM (status 0x%x)", status);
    }
    char path[PATH_MAX + TIDE_JOB_ID_MAX + 32];
    snprintf(path, sizeof(path), "%s/jobs/%s/checkpoint.pb", state_dir, id);
    struct stat st;
    if (stat(path, &st) != 0)
        fail_msg("no checkpoint at %s after SIGTERM", path);

    assert_true(daemon_start());
    c = connect_client(5000);
    assert_non_null(c);
    struct tide_job_info job;
    CHECK_OK(c, tide_client_get(c, id, &job));
    assert_int_equal(job.last_checkpoint_step, 3);
    char new_id[TIDE_JOB_ID_MAX];
    tide_variables *after = resumed_variables(c, &g, id, new_id);
    assert_string_not_equal(new_id, id);
    assert_same_variables(before, after);
    /* And it trains on from there, counting on from the checkpoint's step. */
    feeder_restart(&f);
    train_steps(c, new_id, &f, 2);
    assert_int_equal(f.first_step, 4);
    tide_variables_free(before);
    tide_variables_free(after);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* SIGKILL loses the steps after the last checkpoint, never the checkpoint. */
static void test_restart_after_sigkill(void **state)
{
    (void)state;
    NEED_DAEMON();
    tide_client *c = connect_client(5000);
    assert_non_null(c);
    struct graph g;
    build_graph(false, 16, &g);
    struct tide_job_spec spec;
    make_spec(&g, "crashed", JOB_BUDGET, &spec);
    char id[TIDE_JOB_ID_MAX];
    submit(c, &spec, id);
    struct feeder f;
    feeder_init(&f, &g, 16, 0, 10);
    train_steps(c, id, &f, 2);
    struct tide_checkpoint_info k;
    CHECK_OK(c, tide_client_checkpoint(c, id, &k));
    assert_int_equal(k.step, 2);
    tide_variables *at_checkpoint = read_all(c, id);
    train_steps(c, id, &f, 2);
    tide_variables *later = read_all(c, id);
    assert_false(variables_equal(at_checkpoint, later));
    tide_client_free(c);

    int status = daemon_stop(SIGKILL, 30);
    assert_true(status != -1 && WIFSIGNALED(status));
    assert_true(daemon_start());
    c = connect_client(5000);
    assert_non_null(c);
    char new_id[TIDE_JOB_ID_MAX];
    tide_variables *after = resumed_variables(c, &g, id, new_id);
    assert_same_variables(at_checkpoint, after);
    feeder_restart(&f);
    train_steps(c, new_id, &f, 1);
    assert_int_equal(f.first_step, 3);
    tide_variables_free(at_checkpoint);
    tide_variables_free(later);
    tide_variables_free(after);
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
}

/* ============================================================================
 * Helper modes: this binary run as a child
 * ========================================================================== */

/* As another user: every call on job_id must be PERMISSION_DENIED. Exit 0 if so. */
static int helper_other_user(const char *socket, const char *job_id)
{
    snprintf(target, sizeof(target), "unix:%s", socket);
    tide_client *c = connect_client(5000);
    if (!c)
        return 3;
    int failures = 0;
#define DENIED(call)                                                                               \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != TIDE_CODE_PERMISSION_DENIED) {                                                \
            printf("%s: want PERMISSION_DENIED, got %s: %s\n", #call, tide_code_name(code_),       \
                   tide_client_error_message(c));                                                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
    struct tide_job_info job;
    DENIED(tide_client_get(c, job_id, &job));
    DENIED(tide_client_cancel(c, job_id, &job));
    DENIED(tide_client_checkpoint(c, job_id, NULL));
    tide_variables *v = NULL;
    DENIED(tide_client_read_variables(c, job_id, NULL, 0, &v));
    tide_variables_free(v);
    struct tide_job_trace trace;
    DENIED(tide_client_trace(c, job_id, 1, &trace));
    struct graph g;
    build_graph(false, 16, &g);
    struct feeder f;
    feeder_init(&f, &g, 16, 2, 14);
    DENIED(tide_client_train(c, job_id, feeder_feed, feeder_step, &f));
    if (f.results != 0) {
        printf("train ran %" PRId64 " steps of another user's job\n", f.results);
        failures++;
    }
    struct watcher w;
    memset(&w, 0, sizeof(w));
    DENIED(tide_client_watch(c, job_id, 0, watcher_event, &w));
    /* Its own list does not show the job. */
    struct tide_job_info *jobs;
    size_t n;
    if (tide_client_list(c, false, &jobs, &n) != 0) {
        printf("list: %s\n", tide_client_error_message(c));
        failures++;
    } else {
        for (size_t i = 0; i < n; i++)
            if (strcmp(jobs[i].id, job_id) == 0) {
                printf("list shows another user's job\n");
                failures++;
            }
        free(jobs);
    }
#undef DENIED
    feeder_free(&f);
    free(g.bytes);
    tide_client_free(c);
    return failures ? 1 : 0;
}

/* Trains job_id until killed, printing "step N" per step on stdout. */
static int helper_train_forever(const char *socket, const char *job_id)
{
    snprintf(target, sizeof(target), "unix:%s", socket);
    tide_client *c = connect_client(5000);
    if (!c)
        return 3;
    struct graph g;
    build_graph(false, 16, &g);
    struct feeder f;
    feeder_init(&f, &g, 16, -1, 15);
    f.report = stdout;
    int code = tide_client_train(c, job_id, feeder_feed, feeder_step, &f);
    fprintf(stderr, "train ended: %s: %s\n", tide_code_name(code), tide_client_error_message(c));
    return 1;
}

/* ---- The language models (transformer, moe) through tidectl ---- */

/*
 * tidectl train --model transformer: windows of fortunes in, the per-token
 * losses of every held-out window back; the "done" line's held-out loss is
 * their mean, over (held-out bytes - 1) / 128 windows, and it has fallen
 * from ln 256 = 5.55 after 30 steps; the text report says the same.
 */
static void test_tidectl_transformer(void **state)
{
    (void)state;
    NEED_DAEMON();
    if (access("/usr/share/games/fortunes/fortunes", R_OK) != 0) {
        fprintf(stderr, "skipped: no /usr/share/games/fortunes (apt install fortunes)\n");
        skip();
    }
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, -1, "--json", "train", "--model", "transformer", "--layers", "1", "--d-model",
                "16", "--heads", "2", "--batch", "16", "--steps", "30", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    const char *done = strstr(r->out, "{\"event\":\"done\"");
    assert_non_null(done);
    const char *windows = strstr(done, "\"heldout_windows\":");
    const char *loss = strstr(done, "\"heldout_loss\":");
    assert_non_null(windows);
    assert_non_null(loss);
    long n = strtol(windows + strlen("\"heldout_windows\":"), NULL, 10);
    double heldout = strtod(loss + strlen("\"heldout_loss\":"), NULL);
    print_message("tidectl train --model transformer, 30 steps: held-out loss %.4f over %ld "
                  "windows\n",
                  heldout, n);
    assert_in_range(n, 200000 / 128, 400000 / 128);
    if (!(heldout > 1.0 && heldout < 4.5))
        fail_msg("held-out loss %.4f nats/byte, wanted 1 to 4.5", heldout);
    assert_null(strstr(r->out, "batch_accuracy"));

    run_tidectl(r, -1, "train", "--model", "transformer", "--layers", "1", "--d-model", "16",
                "--heads", "2", "--batch", "16", "--steps", "2", (char *)NULL);
    if (r->exit_code != 0)
        fail_msg("tidectl train: exit %d\n%s\n%s", r->exit_code, r->out, r->err);
    char want[96];
    snprintf(want, sizeof(want), "(%ld windows of 128 bytes)", n);
    assert_non_null(strstr(r->out, "held-out loss "));
    assert_non_null(strstr(r->out, want));
    free(r);
}

int main(int argc, char **argv)
{
    ssize_t n = readlink("/proc/self/exe", self_path, sizeof(self_path) - 1);
    self_path[n > 0 ? n : 0] = '\0';
    if (argc == 4 && strcmp(argv[1], "--helper-other-user") == 0)
        return helper_other_user(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "--helper-train-forever") == 0)
        return helper_train_forever(argv[2], argv[3]);
    signal(SIGPIPE, SIG_IGN);
    /* The TLS cases fail handshakes on purpose; gRPC would log each one. */
    setenv("GRPC_VERBOSITY", "NONE", 0);
    /*
     * Hold one reference on gRPC for the whole run, so that the many short
     * clients here do not each start and stop its threads.
     */
    grpc_init();

    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_systemd_unit_verifies),
        cmocka_unit_test(test_connect_failure),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_submit_plan_train),
        cmocka_unit_test(test_cnn_swaps_within_budget),
        cmocka_unit_test(test_min_budget_fits),
        cmocka_unit_test(test_eval_only_and_read_variables),
        cmocka_unit_test(test_watch),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_submitter_killed_while_compiling),
        cmocka_unit_test(test_checkpoint),
        cmocka_unit_test(test_checkpoint_keep),
        cmocka_unit_test(test_adam_resume_matches_uninterrupted),
        cmocka_unit_test(test_tcp_tls_tokens),
        cmocka_unit_test(test_bad_graph_names_node),
        cmocka_unit_test(test_malformed_message),
        cmocka_unit_test(test_oversized),
        cmocka_unit_test(test_unknown_job),
        cmocka_unit_test(test_second_daemon_refused),
        cmocka_unit_test(test_two_clients_at_once),
        cmocka_unit_test(test_other_user_denied),
        cmocka_unit_test(test_other_user_cannot_remove),
        cmocka_unit_test(test_client_killed_mid_stream),
        cmocka_unit_test(test_trace),
        cmocka_unit_test(test_tidectl),
        cmocka_unit_test(test_train_finishes_job),
        cmocka_unit_test(test_tidectl_data_files_and_export),
        cmocka_unit_test(test_tidectl_onnx_train_and_export),
        cmocka_unit_test(test_tidectl_onnx_two_inputs),
        cmocka_unit_test(test_tidectl_onnx_synthetic),
        cmocka_unit_test(test_tidectl_onnx_dims),
        cmocka_unit_test(test_tidectl_onnx_language_model_files),
        cmocka_unit_test(test_tidectl_ctrl_c),
        cmocka_unit_test(test_loss_not_finite_fails_job),
        cmocka_unit_test(test_tidectl_json_plan),
        cmocka_unit_test(test_tidectl_plan_policy),
        cmocka_unit_test(test_tidectl_plan_partitions_table),
        cmocka_unit_test(test_tidectl_plan_device_profile),
        cmocka_unit_test(test_tidectl_math),
        cmocka_unit_test(test_tidectl_json_job),
        cmocka_unit_test(test_tidectl_transformer),
        cmocka_unit_test(test_restart_after_sigterm),
        cmocka_unit_test(test_restart_after_sigkill),
    };
    /* TIDE_TEST_FILTER=test_cancel (a glob) runs only the matching tests. */
    if (getenv("TIDE_TEST_FILTER"))
        cmocka_set_test_filter(getenv("TIDE_TEST_FILTER"));
    int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
    grpc_shutdown();
    return failed;
}
