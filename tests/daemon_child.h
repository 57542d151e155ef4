/* SPDX-License-Identifier: MIT */
/*
 * daemon_child.h: the real tided as a child process of a test, with its
 * socket, state directory and log in a fresh temporary directory; tidectl
 * runs and background trainers against it; HTTP requests to its
 * metrics-listen port through tests/http_get.py (python3's urllib, and
 * prometheus_client's parser for /metrics).
 *
 * test_metrics and test_dashboard use it. (test_daemon keeps its own copy of
 * the start-up code for now; it could move here.)
 *
 * Example usage:
 *
 *     struct tide_test_daemon *d = calloc(1, sizeof(*d));
 *     if (!tide_test_daemon_init(d, "metrics")) ...
 *     d->http_port = tide_test_free_port();
 *     char listen[32];
 *     snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->http_port);
 *     assert_true(tide_test_daemon_start(d, (const char *[]){"--metrics-listen", listen, NULL}));
 *     ...
 *     tide_test_daemon_finish(d);   // SIGTERM, wait, remove the directory
 */
#ifndef TIDE_TESTS_DAEMON_CHILD_H
#define TIDE_TESTS_DAEMON_CHILD_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct tide_test_daemon {
    char tided[PATH_MAX];   /* <build>/bin/tided */
    char tidectl[PATH_MAX]; /* <build>/bin/tidectl */
    char source_dir[PATH_MAX];
    char dir[256]; /* the temporary directory */
    char socket_path[512];
    char state_dir[512];
    char log_path[512];
    int http_port; /* the caller's choice for --metrics-listen */
    pid_t pid;     /* -1 when not running */
};

/* A TCP port on loopback that is free now (tided binds it a moment later). */
/* The monotonic clock in seconds, and a sleep: for deadlines that bound a hang. */
double tide_test_now_s(void);
void tide_test_sleep_ms(long ms);

int tide_test_free_port(void);

/*
 * Finds the binaries (TIDE_BINARY_DIR, set by ctest) and makes the
 * temporary directory /tmp/tide-test-<tag>-XXXXXX; false (with a message)
 * when tided was not built.
 */
bool tide_test_daemon_init(struct tide_test_daemon *d, const char *tag);

/*
 * Starts tided with the CPU backend on d's socket and state directory plus
 * extra (NULL-terminated, may be NULL), and waits until `tidectl status`
 * answers; false, with the log's tail on stderr, when it exits or does not
 * answer within 60 s.
 */
bool tide_test_daemon_start(struct tide_test_daemon *d, const char *const *extra);

/*
 * Runs tided with d's socket and state directory plus extra and waits for
 * it to exit (for configurations it must refuse); returns its exit code,
 * with its stderr in err (size bytes).
 */
int tide_test_daemon_run_to_exit(struct tide_test_daemon *d, const char *const *extra, char *err,
                                 size_t size);

/* SIGTERM and wait for the exit; its exit code, or -1 if it had to be killed. */
int tide_test_daemon_stop(struct tide_test_daemon *d);

/* Stops tided if running and removes the directory (kept with TIDE_KEEP_TEST_DIR set). */
void tide_test_daemon_finish(struct tide_test_daemon *d);

/* Prints the last few KiB of tided's log to stderr. */
void tide_test_daemon_print_log(const struct tide_test_daemon *d);

/*
 * Starts `tidectl --socket S train --model mlp --dataset synthetic --no-eval
 * --batch 16 --name NAME --steps STEPS` in the background, its output in
 * <dir>/<log_name>; returns its pid.
 */
pid_t tide_test_train_in_background(struct tide_test_daemon *d, const char *name, long steps,
                                    const char *log_name);

/*
 * The same with extra tidectl train options after those (NULL-terminated;
 * a later option wins, so "--model", "cnn" replaces the MLP).
 */
pid_t tide_test_train_in_background_with(struct tide_test_daemon *d, const char *name, long steps,
                                         const char *log_name, const char *const *extra);

/* SIGINT (tidectl stops after the steps in flight, then exits 130) and waits; its exit code. */
int tide_test_stop_trainer(pid_t pid);

/*
 * Runs argv (argv[0] a path, or a name looked up in PATH) with stdout to
 * out_path and stderr to err_path (NULL: /dev/null) and waits; its exit
 * code, -1 when a signal ended it or it could not start.
 */
int tide_test_run_to_files(char *const argv[], const char *out_path, const char *err_path);

/* Reads a whole file into a malloc'd string; NULL if unreadable. */
char *tide_test_read_file(const char *path);

/* The python3 that has prometheus_client, or NULL (with a message) when none has. */
const char *tide_test_python(void);

/*
 * GET http(s)://127.0.0.1:PORT/PATH through tests/http_get.py, with
 * "Authorization: Bearer token" when token is not NULL, verifying TLS
 * against cafile when not NULL. mode "raw" gives {"status", "content_type",
 * "body"}; mode "metrics" also parses the body with prometheus_client (the
 * script fails if the parser raises) into "samples": [[name, {labels},
 * value], ...]. Returns the script's stdout (malloc'd JSON), or NULL with
 * its stderr printed when it failed.
 */
char *tide_test_http_get(const struct tide_test_daemon *d, const char *mode, const char *path,
                         const char *token, const char *cafile);

#endif /* TIDE_TESTS_DAEMON_CHILD_H */
