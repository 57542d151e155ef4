/* SPDX-License-Identifier: MIT */
/*
 * Tests of tidectl's command line (client/tidectl/) that need no daemon:
 * the verb table and each verb's --help, usage errors with their exact
 * words and exit status 2, and the connect failure (exit 3) that every
 * verb which talks to the daemon reports the same way, in text and as a
 * JSON line; the JSON lines tidectl writes without a daemon, read back
 * with json-c (tests/json-lines.h). What tidectl does with a running
 * daemon is tested in tests/test_daemon.c.
 *
 * The tests run build/bin/tidectl (TIDE_BINARY_DIR, set by ctest; run by
 * hand, the bin/ folder this test lives in) as a child process.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "json-lines.h"

static char tidectl_path[PATH_MAX];

/* The verbs in the order `tidectl --help` lists them. */
static const char *const verbs[] = {"status", "plan",  "train", "jobs", "get", "watch", "cancel",
                                    "checkpoint", "rm", "prune", "trace", "top", "export",
                                    "help"};

#define N_VERBS (sizeof(verbs) / sizeof(verbs[0]))

/* A socket path where no daemon listens. */
#define NO_SOCKET "/nonexistent/tide-test-tidectl.sock"

/* Runs tidectl with args (NULL-terminated) and no $TIDE_SOCKET or $TIDE_TOKEN. */
static void run_tidectl_argv(struct tide_test_run *r, char *const args[])
{
    char *argv[32];
    int n = 0;
    argv[n++] = tidectl_path;
    for (; n < 31 && args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;

    tide_test_run_program(argv, -1, -1, r);
}

/* As run_tidectl_argv(), with the arguments as a NULL-terminated list. */
static void run_tidectl(struct tide_test_run *r, ...)
{
    char *args[32];
    int n = 0;
    va_list list;
    va_start(list, r);
    for (char *a; n < 31 && (a = va_arg(list, char *)) != NULL;)
        args[n++] = a;
    va_end(list);
    args[n] = NULL;
    run_tidectl_argv(r, args);
}

static int group_setup(void **state)
{
    (void)state;
    const char *dir = getenv("TIDE_BINARY_DIR");
    char self[PATH_MAX];
    if (dir && *dir) {
        snprintf(tidectl_path, sizeof(tidectl_path), "%.*s/bin/tidectl", PATH_MAX - 16, dir);
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return -1;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        *slash = '\0';
        snprintf(tidectl_path, sizeof(tidectl_path), "%.*s/tidectl", PATH_MAX - 16, self);
    }
    if (access(tidectl_path, X_OK) != 0) {
        fprintf(stderr, "%s was not built\n", tidectl_path);
        return -1;
    }
    return 0;
}

/* ============================================================================
 * Help
 * ========================================================================== */

/* `tidectl --help` lists every verb, in the table's order, each with its summary. */
static void test_main_help(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl(r, "--help", (char *)NULL);
    assert_int_equal(r->exit_code, 0);
    assert_string_equal(r->err, "");
    assert_non_null(strstr(r->out, "NAME\n  tidectl - control the tide training daemon\n"));
    const char *at = strstr(r->out, "COMMANDS\n");
    assert_non_null(at);
    for (size_t i = 0; i < N_VERBS; i++) {
        char line[64];
        snprintf(line, sizeof(line), "\n  %-11s ", verbs[i]);
        const char *next = strstr(at, line);
        if (!next)
            fail_msg("`tidectl --help` does not list %s after the previous verb", verbs[i]);
        at = next + 1;
    }
    /* `help` and `-h` say the same; no command at all says it on stderr, exit 2. */
    struct tide_test_run *same = malloc(sizeof(*same));
    assert_non_null(same);
    run_tidectl(same, "help", (char *)NULL);
    assert_int_equal(same->exit_code, 0);
    assert_string_equal(same->out, r->out);
    run_tidectl(same, "-h", (char *)NULL);
    assert_int_equal(same->exit_code, 0);
    assert_string_equal(same->out, r->out);
    run_tidectl(same, (char *)NULL);
    assert_int_equal(same->exit_code, 2);
    assert_string_equal(same->out, "");
    assert_string_equal(same->err, r->out);
    free(same);
    free(r);
}

/* Each verb's --help names it, and `tidectl help VERB` prints the same text. */
static void test_verb_help(void **state)
{
    (void)state;
    struct tide_test_run *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < N_VERBS; i++) {
        run_tidectl(a, verbs[i], "--help", (char *)NULL);
        if (a->exit_code != 0)
            fail_msg("tidectl %s --help: exit %d\n%s", verbs[i], a->exit_code, a->err);
        char name[64];
        snprintf(name, sizeof(name), "NAME\n  tidectl %s - ", verbs[i]);
        assert_memory_equal(a->out, name, strlen(name));
        assert_non_null(strstr(a->out, "\nDESCRIPTION\n"));
        assert_non_null(strstr(a->out, "\nEXIT STATUS\n  0 success; 1 daemon error; 2 usage "
                                       "error; 3 cannot connect; 130 Ctrl-C.\n"));
        run_tidectl(b, "help", verbs[i], (char *)NULL);
        assert_int_equal(b->exit_code, 0);
        assert_string_equal(b->out, a->out);
    }
    /* The model options' help is part of both commands that build a model. */
    run_tidectl(a, "plan", "--help", (char *)NULL);
    assert_non_null(
        strstr(a->out, "MODEL OPTIONS\n  --model mlp|cnn|resnet|lstm|transformer|moe\n"));
    assert_non_null(strstr(a->out, "\n  --capacity-factor C      moe: "));
    run_tidectl(a, "train", "--help", (char *)NULL);
    assert_non_null(
        strstr(a->out, "MODEL OPTIONS\n  --model mlp|cnn|resnet|lstm|transformer|moe\n"));
    assert_non_null(strstr(a->out, "(for\n  transformer and moe: the held-out loss"));
    /* plan draws the memory picture and plans for a named device; train takes neither. */
    run_tidectl(a, "plan", "--help", (char *)NULL);
    assert_non_null(strstr(a->out, "[--partitions] [--svg FILE] [--device-profile NAME]\n"));
    assert_non_null(strstr(a->out, "\n  --svg FILE               Draw where the device memory"));
    assert_non_null(strstr(a->out, "\n  --device-profile NAME    Plan for this device: cpu"));
    run_tidectl(a, "train", "--help", (char *)NULL);
    assert_null(strstr(a->out, "--svg"));
    assert_null(strstr(a->out, "--device-profile"));
    run_tidectl(a, "--version", (char *)NULL);
    assert_int_equal(a->exit_code, 0);
    assert_string_equal(a->out, "tidectl 0.1.0\n");
    free(a);
    free(b);
}

/* ============================================================================
 * Usage errors: exit 2, one line on stderr that names the command and the option
 * ========================================================================== */

/*
 * Runs tidectl with the arguments (NULL-terminated) and wants exit 2, the
 * line expected on stderr and nothing on stdout.
 */
static void expect_usage_error(const char *expected, ...)
{
    char *args[16];
    int n = 0;
    va_list list;
    va_start(list, expected);
    for (char *a; n < 15 && (a = va_arg(list, char *)) != NULL;)
        args[n++] = a;
    va_end(list);
    args[n] = NULL;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl_argv(r, args);
    if (r->exit_code != 2 || strcmp(r->err, expected) != 0)
        fail_msg("tidectl %s ...: exit %d, stderr\n%s\nwanted exit 2 and\n%s", args[0],
                 r->exit_code, r->err, expected);
    assert_string_equal(r->out, "");
    free(r);
}

static void test_usage_errors(void **state)
{
    (void)state;
    expect_usage_error("tidectl: no command \"frob\" (see tidectl --help)\n", "frob", (char *)NULL);
    expect_usage_error("tidectl: no command \"frob\" (see tidectl --help)\n", "help", "frob",
                       (char *)NULL);
    expect_usage_error("tidectl: status: option --all does not apply to status (see tidectl "
                       "status --help)\n",
                       "status", "--all", (char *)NULL);
    expect_usage_error("tidectl: get: missing argument: tidectl get JOB (see tidectl get --help)\n",
                       "get", (char *)NULL);
    expect_usage_error("tidectl: cancel: unexpected argument \"b\" (see tidectl cancel --help)\n",
                       "cancel", "a", "b", (char *)NULL);
    expect_usage_error("tidectl: rm: missing argument: tidectl rm JOB... (see tidectl rm --help)\n",
                       "rm", (char *)NULL);
    expect_usage_error("tidectl: prune: unexpected argument \"j-1\" (see tidectl prune --help)\n",
                       "prune", "j-1", (char *)NULL);
    expect_usage_error("tidectl: train: --steps wants a positive count, got \"0\" (see tidectl "
                       "train --help)\n",
                       "train", "--steps", "0", (char *)NULL);
    expect_usage_error("tidectl: watch: --stride wants a positive count, got \"x\" (see tidectl "
                       "watch --help)\n",
                       "watch", "--stride", "x", (char *)NULL);
    expect_usage_error("tidectl: train: --steps and --epochs exclude each other (see tidectl "
                       "train --help)\n",
                       "train", "--steps", "3", "--epochs", "2", (char *)NULL);
    expect_usage_error("tidectl: plan: --swap must be one of auto, on, off, got \"maybe\" (see "
                       "tidectl plan --help)\n",
                       "plan", "--swap", "maybe", (char *)NULL);
    expect_usage_error("tidectl: plan: --partition-size wants a count, 0 for the planner's "
                       "choice, got \"-1\" (see tidectl plan --help)\n",
                       "plan", "--partition-size", "-1", (char *)NULL);
    expect_usage_error("tidectl: plan: --budget wants bytes (e.g. 512M, 2G), got \"12Q\" (see "
                       "tidectl plan --help)\n",
                       "plan", "--budget", "12Q", (char *)NULL);
    expect_usage_error("tidectl: status: --socket and --connect exclude each other (see tidectl "
                       "status --help)\n",
                       "--socket", "/x", "--connect", "a:1", "status", (char *)NULL);
    /* Data from files, and weights out. */
    expect_usage_error("tidectl: train: --dataset and --data exclude each other (see tidectl "
                       "train --help)\n",
                       "train", "--data", "x.npy", "--labels", "y.npy", "--dataset", "synthetic",
                       (char *)NULL);
    expect_usage_error("tidectl: train: --data and --labels come together (examples and their "
                       "labels) (see tidectl train --help)\n",
                       "train", "--data", "x.npy", (char *)NULL);
    expect_usage_error("tidectl: plan: --test-data needs --data and --labels (see tidectl plan "
                       "--help)\n",
                       "plan", "--test-data", "a.npy", "--test-labels", "b.npy", (char *)NULL);
    expect_usage_error("tidectl: train: --test-data and --test-labels come together (see tidectl "
                       "train --help)\n",
                       "train", "--data", "x.npy", "--labels", "y.npy", "--test-data", "a.npy",
                       (char *)NULL);
    expect_usage_error("tidectl: train: --seq-len does not apply with --data: the examples' "
                       "shape [S, F] sets the sequence length (see tidectl train --help)\n",
                       "train", "--model", "lstm", "--data", "x.npy", "--labels", "y.npy",
                       "--seq-len", "5", (char *)NULL);
    expect_usage_error("tidectl: train: --data wants a file name, got \"\" (see tidectl train "
                       "--help)\n",
                       "train", "--data", "", (char *)NULL);
    expect_usage_error("tidectl: export: say where the weights go: --npz OUT.npz or --onnx "
                       "OUT.onnx --from MODEL.onnx (see tidectl export --help)\n",
                       "--socket", "/nonexistent/tided.sock", "export", "j-1", (char *)NULL);
    /* ONNX: the flags that go with --onnx, and what --onnx excludes. */
    expect_usage_error("tidectl: train: --output, --loss, --frozen and --dim apply to an ONNX "
                       "model: give --onnx FILE (see tidectl train --help)\n",
                       "train", "--loss", "mse", (char *)NULL);
    expect_usage_error("tidectl: plan: --output, --loss, --frozen and --dim apply to an ONNX "
                       "model: give --onnx FILE (see tidectl plan --help)\n",
                       "plan", "--dim", "seq=8", (char *)NULL);
    expect_usage_error("tidectl: train: --dim: dimension \"seq=0\" has a SIZE that is not a whole "
                       "number from 1 to 2147483647 (see tidectl train --help)\n",
                       "train", "--onnx", "m.onnx", "--dim", "seq=0", (char *)NULL);
    expect_usage_error("tidectl: train: --loss wants xent, mse or none, got \"nll\" (see tidectl "
                       "train --help)\n",
                       "train", "--onnx", "m.onnx", "--loss", "nll", (char *)NULL);
    expect_usage_error("tidectl: plan: --onnx names the model: --model and its sizes (--depth, "
                       "--seq-len, --hidden, --layers, --d-model, --heads, --vocab, --experts, "
                       "--capacity-factor, --dropout) do not apply (see tidectl plan --help)\n",
                       "plan", "--onnx", "m.onnx", "--model", "mlp", (char *)NULL);
    expect_usage_error("tidectl: train: --onnx names the model: --model and its sizes (--depth, "
                       "--seq-len, --hidden, --layers, --d-model, --heads, --vocab, --experts, "
                       "--capacity-factor, --dropout) do not apply (see tidectl train --help)\n",
                       "train", "--onnx", "m.onnx", "--d-model", "32", (char *)NULL);
    expect_usage_error("tidectl: plan: --dataset fortunes does not apply to --onnx m.onnx "
                       "(fortunes is for transformer and moe) (see tidectl plan --help)\n",
                       "plan", "--onnx", "m.onnx", "--dataset", "fortunes", (char *)NULL);
    expect_usage_error("tidectl: export: option --data does not apply to export (see tidectl "
                       "export --help)\n",
                       "export", "j-1", "--data", "x.npy", (char *)NULL);
    /* trace: its job, its counts, -o as the output file wherever it stands. */
    expect_usage_error("tidectl: trace: missing argument: tidectl trace JOB [--steps N] [-o FILE] "
                       "(see tidectl trace --help)\n",
                       "-o", "t.json", "trace", (char *)NULL);
    expect_usage_error("tidectl: trace: --steps wants a positive count, got \"0\" (see tidectl "
                       "trace --help)\n",
                       "trace", "j1", "--steps", "0", (char *)NULL);
    expect_usage_error("tidectl: trace: --output wants a file name, got \"\" (see tidectl trace "
                       "--help)\n",
                       "trace", "j1", "-o", "", (char *)NULL);
    expect_usage_error("tidectl: trace: option \"-o\" needs a value (see tidectl trace --help)\n",
                       "trace", "j1", "-o", (char *)NULL);
    expect_usage_error("tidectl: status: option --output does not apply to status (see tidectl "
                       "status --help)\n",
                       "status", "-o", "t.json", (char *)NULL);
    expect_usage_error("tidectl: plan: option \"--svg\" needs a value (see tidectl plan --help)\n",
                       "plan", "--svg", (char *)NULL);
    expect_usage_error("tidectl: train: option --svg does not apply to train (see tidectl train "
                       "--help)\n",
                       "train", "--svg", "m.svg", (char *)NULL);
    /* The sequence models' flags: for lstm only, and other lengths only on synthetic data. */
    expect_usage_error("tidectl: plan: --hidden applies to --model lstm only, not to cnn (see "
                       "tidectl plan --help)\n",
                       "plan", "--model", "cnn", "--hidden", "8", (char *)NULL);
    expect_usage_error("tidectl: train: --seq-len applies to --model lstm, transformer or moe "
                       "only, not to resnet (see tidectl train --help)\n",
                       "train", "--seq-len", "8", "--model", "resnet", (char *)NULL);
    expect_usage_error("tidectl: train: --seq-len 40 needs --dataset synthetic: Fashion-MNIST's "
                       "images have 28 rows, so its sequences are 28 steps (see tidectl train "
                       "--help)\n",
                       "train", "--model", "lstm", "--seq-len", "40", (char *)NULL);
    expect_usage_error("tidectl: plan: --layers wants a positive count, got \"0\" (see tidectl "
                       "plan --help)\n",
                       "plan", "--model", "lstm", "--layers", "0", (char *)NULL);
}

/* ============================================================================
 * No daemon: exit 3, the same report from every verb that connects
 * ========================================================================== */

/* The keys of tidectl's {"error": {...}} line, for a gRPC code and for an error of its own. */
static const char *const error_line_keys[] = {"error", NULL};
static const char *const grpc_error_keys[] = {"code", "code_number", "message", "exit", NULL};
static const char *const own_error_keys[] = {"code", "message", "exit", NULL};

/*
 * Reads out as exactly one {"error": ...} line of a connect failure to
 * NO_SOCKET and checks every field.
 */
static void expect_no_daemon_line(const char *verb, const char *out)
{
    size_t n;
    struct json_object *lines = tide_test_json_lines(out, &n);
    if (n != 1)
        fail_msg("tidectl --json %s without a daemon: %zu lines on stdout, wanted 1", verb, n);
    struct json_object *line = tide_test_json_line(lines, 0);
    tide_test_json_keys(line, error_line_keys);
    struct json_object *error = tide_test_json_object(line, "error");
    tide_test_json_keys(error, grpc_error_keys);
    assert_string_equal(tide_test_json_string(error, "code"), "UNAVAILABLE");
    assert_int_equal(tide_test_json_int(error, "code_number"), 14);
    assert_int_equal(tide_test_json_int(error, "exit"), 3);
    /* The message names the socket, and the line spells its slashes as they are. */
    assert_non_null(strstr(tide_test_json_string(error, "message"), NO_SOCKET));
    assert_non_null(strstr(out, NO_SOCKET));
    json_object_put(lines);
}

static void test_no_daemon(void **state)
{
    (void)state;
    static const char *const connecting[][2] = {
        {"status", NULL}, {"jobs", NULL},       {"get", "j1"}, {"watch", NULL},
        {"cancel", "j1"}, {"checkpoint", "j1"}, {"trace", "j1"},  {"top", NULL},
    };
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    const char *hint = "tidectl: hint: check that tided runs (systemctl status tided) and that "
                       "--socket or $TIDE_SOCKET names its socket (now " NO_SOCKET ")\n";
    for (size_t i = 0; i < sizeof(connecting) / sizeof(connecting[0]); i++) {
        const char *verb = connecting[i][0], *arg = connecting[i][1];
        run_tidectl(r, "--socket", NO_SOCKET, verb, arg, (char *)NULL);
        if (r->exit_code != 3)
            fail_msg("tidectl %s without a daemon: exit %d\n%s", verb, r->exit_code, r->err);
        assert_string_equal(r->out, "");
        assert_memory_equal(r->err, "tidectl: connect: UNAVAILABLE: ", 31);
        size_t len = strlen(r->err), hint_len = strlen(hint);
        assert_true(len > hint_len);
        assert_string_equal(r->err + len - hint_len, hint);

        /* With --json, the error is also one JSON line on stdout. */
        run_tidectl(r, "--json", "--socket", NO_SOCKET, verb, arg, (char *)NULL);
        assert_int_equal(r->exit_code, 3);
        const char *head = "{\"error\":{\"code\":\"UNAVAILABLE\",\"code_number\":14,";
        const char *tail = ",\"exit\":3}}\n";
        len = strlen(r->out);
        assert_true(len > strlen(head) + strlen(tail));
        assert_memory_equal(r->out, head, strlen(head));
        assert_string_equal(r->out + len - strlen(tail), tail);
        assert_ptr_equal(strchr(r->out, '\n'), r->out + len - 1); /* one line */
        expect_no_daemon_line(verb, r->out);
    }

    /* plan and train build the model (and open the dataset) first, then connect. */
    run_tidectl(r, "--json", "--socket", NO_SOCKET, "plan", "--model", "mlp", "--dataset",
                "synthetic", (char *)NULL);
    assert_int_equal(r->exit_code, 3);
    expect_no_daemon_line("plan", r->out);
    run_tidectl(r, "--json", "--socket", NO_SOCKET, "train", "--model", "mlp", "--dataset",
                "synthetic", "--steps", "1", "--no-eval", (char *)NULL);
    assert_int_equal(r->exit_code, 3);
    expect_no_daemon_line("train", r->out);
    free(r);
}

/*
 * A socket the user may not write to: the error says permission denied and
 * names the group to join, instead of asking whether tided runs.
 */
static void test_socket_permission_denied(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        fprintf(stderr, "skipped: acting as another user (uid 65534) needs root\n");
        skip();
    }
    char dir[] = "/tmp/test_tidectl_XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/tided.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(chmod(addr.sun_path, 0660), 0); /* root's group only */

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    tide_test_run_program((char *[]){tidectl_path, "--socket", addr.sun_path, "status", NULL},
                          65534, 65534, r);
    char expected[512];
    snprintf(expected, sizeof(expected),
             "tidectl: connect: PERMISSION_DENIED: permission denied on %s: the socket is for "
             "group root (mode 660); join the group (sudo usermod -aG root $USER, then log in "
             "again)\n",
             addr.sun_path);
    if (r->exit_code == 0 || strncmp(r->err, expected, strlen(expected)) != 0)
        fail_msg("exit %d, stderr:\n%s\nwanted it to start with:\n%s", r->exit_code, r->err,
                 expected);
    assert_null(strstr(r->err, "tided runs"));
    free(r);
    close(fd);
    unlink(addr.sun_path);
    rmdir(dir);
}


/* Writes a version-1.0 .npy file: dict padded with spaces and a newline to 128 bytes. */
static void write_npy128(const char *path, const char *dict, const void *data, size_t len)
{
    char head[128] = "\x93NUMPY\x01\x00\x76\x00";
    size_t dict_len = strlen(dict);
    assert_true(10 + dict_len < 128);
    memcpy(head + 10, dict, dict_len);
    memset(head + 10 + dict_len, ' ', 128 - 10 - dict_len - 1);
    head[127] = '\n';
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(head, 1, 128, f), 128);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* Runs tidectl train with args; wants exit 2 (a usage error) and want in stderr. */
static void expect_train_refused(const char *want, char *const args[])
{
    char *argv[24] = {"--socket", NO_SOCKET, "train"};
    int n = 3;
    for (; n < 23 && args[n - 3]; n++)
        argv[n] = args[n - 3];
    argv[n] = NULL;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl_argv(r, argv);
    if (r->exit_code != 2 || !strstr(r->err, want))
        fail_msg("tidectl train: exit %d (wanted 2), stderr lacks\n%s\n:\n%s", r->exit_code, want,
                 r->err);
    free(r);
}

/*
 * --data's labels for --loss mse and none: float32 targets must have the
 * shape of the output's example (cnn.onnx's logits, [10]), int labels are
 * no targets, and --model's classifiers take no float targets. Each is
 * refused before tidectl connects, naming both shapes or kinds.
 */
static void test_onnx_labels_usage_errors(void **state)
{
    (void)state;
    char dir[] = "/tmp/tide-test-tidectl-onnxloss-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char x[128], t[128], c[128];
    snprintf(x, sizeof(x), "%s/x.npy", dir);
    snprintf(t, sizeof(t), "%s/t.npy", dir);
    snprintf(c, sizeof(c), "%s/c.npy", dir);
    static float images[16 * 784], targets[16 * 3];
    static int32_t classes[16];
    write_npy128(x, "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 784), }", images,
                 sizeof(images));
    write_npy128(t, "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 3), }", targets,
                 sizeof(targets));
    write_npy128(c, "{'descr': '<i4', 'fortran_order': False, 'shape': (16,), }", classes,
                 sizeof(classes));
    char *cnn = TIDE_EXAMPLES_ONNX_DIR "/cnn.onnx";
    expect_train_refused("cnn.onnx: the loss on output \"logits\" wants float32 targets of shape "
                         "[10] an example; the labels are float32 targets of shape [3] an "
                         "example\n",
                         (char *[]){"--onnx", cnn, "--loss", "mse", "--data", x, "--labels", t,
                                    NULL});
    expect_train_refused("cnn.onnx: the loss on output \"logits\" wants float32 targets of shape "
                         "[10] an example; the labels are int class labels (int32) of shape [] "
                         "an example\n",
                         (char *[]){"--onnx", cnn, "--loss", "mse", "--data", x, "--labels", c,
                                    NULL});
    expect_train_refused("cnn.onnx: the loss on output \"logits\" wants int class labels of shape "
                         "[] an example; the labels are float32 targets of shape [3] an "
                         "example\n",
                         (char *[]){"--onnx", cnn, "--data", x, "--labels", t, NULL});
    expect_train_refused("t.npy: float32 labels are targets, for an --onnx model with --loss mse "
                         "or none; --model mlp learns int class labels\n",
                         (char *[]){"--model", "mlp", "--data", x, "--labels", t, NULL});
    unlink(x), unlink(t), unlink(c);
    rmdir(dir);
}

/*
 * --data A,B: one file per input of an --onnx model. Files whose example
 * counts differ are refused naming both (before the model is read), and a
 * list is no --model's data.
 */
static void test_onnx_several_inputs_usage_errors(void **state)
{
    (void)state;
    char dir[] = "/tmp/tide-test-tidectl-inputs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char x[128], mask[128], y[128], both[300];
    snprintf(x, sizeof(x), "%s/x.npy", dir);
    snprintf(mask, sizeof(mask), "%s/mask.npy", dir);
    snprintf(y, sizeof(y), "%s/y.npy", dir);
    snprintf(both, sizeof(both), "%s,%s", x, mask);
    static float features[16 * 4];
    static int64_t ones[12 * 4];
    static int32_t classes[16];
    write_npy128(x, "{'descr': '<f4', 'fortran_order': False, 'shape': (16, 4), }", features,
                 sizeof(features));
    write_npy128(mask, "{'descr': '<i8', 'fortran_order': False, 'shape': (12, 4), }", ones,
                 sizeof(ones));
    write_npy128(y, "{'descr': '<i4', 'fortran_order': False, 'shape': (16,), }", classes,
                 sizeof(classes));
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    run_tidectl_argv(r, (char *[]){"--socket", NO_SOCKET, "train", "--onnx", "none.onnx",
                                   "--data", both, "--labels", y, NULL});
    char want[600];
    snprintf(want, sizeof(want),
             "tidectl: %s holds 16 examples but %s holds 12: every input's file has one row per "
             "example\n",
             x, mask);
    if (r->exit_code != 1 || strcmp(r->err, want) != 0)
        fail_msg("exit %d (wanted 1), stderr:\n%s\nwanted:\n%s", r->exit_code, r->err, want);
    free(r);
    expect_train_refused("--data A,B (one file per model input) is for an --onnx model of several "
                         "inputs; --model reads one file of examples",
                         (char *[]){"--model", "mlp", "--data", both, "--labels", y, NULL});
    unlink(x), unlink(mask), unlink(y);
    rmdir(dir);
}

/* ============================================================================
 * JSON lines without a daemon: tidectl's own errors
 * ========================================================================== */

/* A dataset that cannot be opened: exit 1 and an error line without a gRPC code number. */
static void test_json_dataset_error(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    const char *dir = "/nonexistent/tide-test-data";
    run_tidectl(r, "--json", "--socket", NO_SOCKET, "train", "--model", "mlp", "--dataset",
                "fashion-mnist", "--data-dir", dir, "--steps", "1", (char *)NULL);
    if (r->exit_code != 1)
        fail_msg("tidectl train with a missing dataset: exit %d\n%s", r->exit_code, r->err);
    size_t n;
    struct json_object *lines = tide_test_json_lines(r->out, &n);
    assert_int_equal(n, 1);
    struct json_object *line = tide_test_json_line(lines, 0);
    tide_test_json_keys(line, error_line_keys);
    struct json_object *error = tide_test_json_object(line, "error");
    tide_test_json_keys(error, own_error_keys);
    assert_string_equal(tide_test_json_string(error, "code"), "DATASET");
    assert_int_equal(tide_test_json_int(error, "exit"), 1);
    assert_non_null(strstr(tide_test_json_string(error, "message"), dir));
    assert_non_null(strstr(r->out, dir)); /* no "\/" */
    /* The same message as on stderr. */
    assert_non_null(strstr(r->err, tide_test_json_string(error, "message")));
    json_object_put(lines);
    free(r);
}

/*
 * Usage errors under --json: exit 2, the message on stderr and nothing on
 * stdout. No usage error writes a JSON line (the option parser reports
 * errors before it knows whether --json comes later on the command line),
 * so a script sees an empty stdout, whether the error is found while
 * parsing or after.
 */
static void test_json_usage_errors(void **state)
{
    (void)state;
    expect_usage_error("tidectl: get: missing argument: tidectl get JOB (see tidectl get --help)\n",
                       "--json", "get", (char *)NULL);
    expect_usage_error("tidectl: plan: --swap must be one of auto, on, off, got \"maybe\" (see "
                       "tidectl plan --help)\n",
                       "--json", "plan", "--swap", "maybe", (char *)NULL);
    expect_usage_error("tidectl: train: --batch 100000 is larger than the dataset (60000 "
                       "examples) (see tidectl train --help)\n",
                       "--json", "--socket", NO_SOCKET, "train", "--model", "mlp", "--dataset",
                       "synthetic", "--batch", "100000", "--no-eval", (char *)NULL);
}

/* ---- The language models (transformer, moe): their flags and dataset ---- */

static void test_language_model_usage_errors(void **state)
{
    (void)state;
    expect_usage_error("tidectl: plan: --dataset fortunes does not apply to --model cnn (fortunes "
                       "is for transformer and moe) (see tidectl plan --help)\n",
                       "plan", "--dataset", "fortunes", (char *)NULL);
    expect_usage_error("tidectl: train: --dataset synthetic does not apply to --model transformer "
                       "(language models read fortunes) (see tidectl train --help)\n",
                       "train", "--model", "transformer", "--dataset", "synthetic", (char *)NULL);
    expect_usage_error("tidectl: plan: --heads applies to --model transformer or moe only, not to "
                       "mlp (see tidectl plan --help)\n",
                       "plan", "--model", "mlp", "--heads", "2", (char *)NULL);
    expect_usage_error("tidectl: plan: --experts applies to --model moe only, not to transformer "
                       "(see tidectl plan --help)\n",
                       "plan", "--model", "transformer", "--experts", "4", (char *)NULL);
    expect_usage_error("tidectl: plan: --dropout wants a rate, 0 <= R < 1, got \"1\" (see "
                       "tidectl plan --help)\n",
                       "plan", "--model", "transformer", "--dropout", "1", (char *)NULL);
    expect_usage_error("tidectl: plan: --capacity-factor wants a number > 0, got \"0\" (see "
                       "tidectl plan --help)\n",
                       "plan", "--model", "moe", "--capacity-factor", "0", (char *)NULL);
    expect_usage_error("tidectl: train: --heads wants a positive count, got \"0\" (see tidectl "
                       "train --help)\n",
                       "train", "--model", "moe", "--heads", "0", (char *)NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_main_help),
        cmocka_unit_test(test_verb_help),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_no_daemon),
        cmocka_unit_test(test_socket_permission_denied),
        cmocka_unit_test(test_onnx_labels_usage_errors),
        cmocka_unit_test(test_onnx_several_inputs_usage_errors),
        cmocka_unit_test(test_json_dataset_error),
        cmocka_unit_test(test_json_usage_errors),
        cmocka_unit_test(test_language_model_usage_errors),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
