/* SPDX-License-Identifier: MIT */
/*
 * daemon_child.c: see daemon_child.h. Children that talk gRPC (tidectl)
 * always exec: gRPC is not fork-safe. Waiting for the daemon polls with a
 * deadline: the deadline only bounds a hang, no result depends on it.
 */
#include "daemon_child.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

double tide_test_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void tide_test_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int tide_test_free_port(void)
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

/*
 * Forks and execs argv with stdout and stderr to the given files (NULL:
 * /dev/null) and TIDE_SOCKET / TIDE_TOKEN unset; returns the pid, -1 on
 * failure. The child gets SIGTERM when the test process ends: a test that
 * fails between starting a daemon or a trainer and stopping it (cmocka
 * jumps out of it) leaves nothing running behind it.
 */
static pid_t spawn(char *const argv[], const char *out_path, const char *err_path)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(125); /* the test is already gone */
    /* Both appending: stdout and stderr to one file must not write over each other. */
    int out =
        open(out_path ? out_path : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    int err = open(err_path ? err_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out < 0 || err < 0)
        _exit(126);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    close(out);
    close(err);
    unsetenv("TIDE_SOCKET");
    unsetenv("TIDE_TOKEN");
    execvp(argv[0], argv);
    perror(argv[0]);
    _exit(127);
}

/* Waits for pid; its exit code, or -1 when a signal ended it. */
static int wait_exit(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int tide_test_run_to_files(char *const argv[], const char *out_path, const char *err_path)
{
    pid_t pid = spawn(argv, out_path, err_path);
    return pid > 0 ? wait_exit(pid) : -1;
}

char *tide_test_read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *text = malloc(cap);
    while (text) {
        if (n + 1 >= cap) {
            char *grown = realloc(text, cap * 2);
            if (!grown) {
                free(text);
                text = NULL;
                break;
            }
            text = grown;
            cap *= 2;
        }
        size_t got = fread(text + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    if (text)
        text[n] = '\0';
    fclose(f);
    return text;
}

bool tide_test_daemon_init(struct tide_test_daemon *d, const char *tag)
{
    memset(d, 0, sizeof(*d));
    d->pid = -1;
    const char *bin = getenv("TIDE_BINARY_DIR");
    const char *src = getenv("TIDE_SOURCE_DIR");
    snprintf(d->tided, sizeof(d->tided), "%s/bin/tided", bin ? bin : ".");
    snprintf(d->tidectl, sizeof(d->tidectl), "%s/bin/tidectl", bin ? bin : ".");
    snprintf(d->source_dir, sizeof(d->source_dir), "%s", src ? src : "..");
    if (access(d->tided, X_OK) != 0 || access(d->tidectl, X_OK) != 0) {
        fprintf(stderr, "%s or %s was not built (TIDE_BINARY_DIR=%s)\n", d->tided, d->tidectl,
                bin ? bin : "unset");
        return false;
    }
    snprintf(d->dir, sizeof(d->dir), "/tmp/tide-test-%s-XXXXXX", tag);
    if (!mkdtemp(d->dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", d->dir, strerror(errno));
        return false;
    }
    snprintf(d->socket_path, sizeof(d->socket_path), "%s/tided.sock", d->dir);
    snprintf(d->state_dir, sizeof(d->state_dir), "%s/state", d->dir);
    snprintf(d->log_path, sizeof(d->log_path), "%s/tided.log", d->dir);
    return true;
}

void tide_test_daemon_print_log(const struct tide_test_daemon *d)
{
    FILE *f = fopen(d->log_path, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 6000 ? size - 6000 : 0, SEEK_SET);
    char buf[6001];
    size_t n = fread(buf, 1, 6000, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "---- tail of %s ----\n%s\n---- end ----\n", d->log_path, buf);
}

/* tided's argv: the binary, the test's socket and state, the CPU backend, then extra. */
static void daemon_argv(const struct tide_test_daemon *d, const char *const *extra, char **argv,
                        size_t cap)
{
    const char *base[] = {d->tided,     "--socket",         d->socket_path, "--state-dir",
                          d->state_dir, "--backend",        "cpu",          "--device-memory",
                          "1G",         "--default-budget", "64M",          "--log-level",
                          "debug"};
    size_t n = 0;
    for (size_t i = 0; i < sizeof(base) / sizeof(base[0]); i++)
        argv[n++] = (char *)base[i];
    for (size_t i = 0; extra && extra[i] && n + 1 < cap; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
}

bool tide_test_daemon_start(struct tide_test_daemon *d, const char *const *extra)
{
    char *argv[64];
    daemon_argv(d, extra, argv, 64);
    d->pid = spawn(argv, d->log_path, d->log_path);
    if (d->pid < 0)
        return false;
    char status_out[600];
    snprintf(status_out, sizeof(status_out), "%s/status.out", d->dir);
    double deadline = tide_test_now_s() + 60;
    while (tide_test_now_s() < deadline) {
        int status;
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            fprintf(stderr, "tided exited at start-up (status 0x%x)\n", status);
            tide_test_daemon_print_log(d);
            d->pid = -1;
            return false;
        }
        struct stat st;
        if (stat(d->socket_path, &st) == 0 && S_ISSOCK(st.st_mode)) {
            char *status_argv[] = {d->tidectl, (char *)"--socket", d->socket_path, (char *)"status",
                                   NULL};
            pid_t p = spawn(status_argv, status_out, NULL);
            if (p > 0 && wait_exit(p) == 0)
                return true;
        }
        tide_test_sleep_ms(100);
    }
    fprintf(stderr, "tided did not answer within 60 s\n");
    tide_test_daemon_print_log(d);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = -1;
    return false;
}

int tide_test_daemon_run_to_exit(struct tide_test_daemon *d, const char *const *extra, char *err,
                                 size_t size)
{
    char *argv[64];
    daemon_argv(d, extra, argv, 64);
    char err_path[600];
    snprintf(err_path, sizeof(err_path), "%s/refused.err", d->dir);
    unlink(err_path);
    pid_t pid = spawn(argv, NULL, err_path);
    int code = pid > 0 ? wait_exit(pid) : -1;
    char *text = tide_test_read_file(err_path);
    snprintf(err, size, "%s", text ? text : "");
    free(text);
    return code;
}

int tide_test_daemon_stop(struct tide_test_daemon *d)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, SIGTERM);
    double deadline = tide_test_now_s() + 120;
    int status = 0;
    while (tide_test_now_s() < deadline) {
        if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
            d->pid = -1;
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        }
        tide_test_sleep_ms(50);
    }
    fprintf(stderr, "tided did not exit within 120 s of SIGTERM\n");
    tide_test_daemon_print_log(d);
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = -1;
    return -1;
}

void tide_test_daemon_finish(struct tide_test_daemon *d)
{
    if (d->pid > 0 && tide_test_daemon_stop(d) != 0)
        fprintf(stderr, "tided did not stop cleanly on SIGTERM\n");
    if (!d->dir[0])
        return;
    if (getenv("TIDE_KEEP_TEST_DIR")) {
        fprintf(stderr, "kept %s\n", d->dir);
        return;
    }
    char *argv[] = {(char *)"rm", (char *)"-rf", d->dir, NULL};
    pid_t pid = spawn(argv, NULL, NULL);
    if (pid > 0)
        wait_exit(pid);
}

pid_t tide_test_train_in_background(struct tide_test_daemon *d, const char *name, long steps,
                                    const char *log_name)
{
    return tide_test_train_in_background_with(d, name, steps, log_name, NULL);
}

pid_t tide_test_train_in_background_with(struct tide_test_daemon *d, const char *name, long steps,
                                         const char *log_name, const char *const *extra)
{
    char steps_text[32], log_path[600];
    snprintf(steps_text, sizeof(steps_text), "%ld", steps);
    snprintf(log_path, sizeof(log_path), "%s/%s", d->dir, log_name);
    char *argv[48] = {d->tidectl,          (char *)"--socket",  d->socket_path,
                      (char *)"train",     (char *)"--model",   (char *)"mlp",
                      (char *)"--dataset", (char *)"synthetic", (char *)"--no-eval",
                      (char *)"--batch",   (char *)"16",        (char *)"--name",
                      (char *)name,        (char *)"--steps",   steps_text};
    size_t n = 0;
    while (argv[n])
        n++;
    for (size_t i = 0; extra && extra[i] && n + 1 < sizeof(argv) / sizeof(argv[0]); i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return spawn(argv, log_path, log_path);
}

int tide_test_stop_trainer(pid_t pid)
{
    kill(pid, SIGINT);
    return wait_exit(pid);
}

const char *tide_test_python(void)
{
    static const char *const candidates[] = {"/usr/bin/python3", "python3"};
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        char *argv[] = {(char *)candidates[i], (char *)"-c", (char *)"import prometheus_client",
                        NULL};
        pid_t pid = spawn(argv, NULL, NULL);
        if (pid > 0 && wait_exit(pid) == 0)
            return candidates[i];
    }
    fprintf(stderr, "no python3 with prometheus_client (apt install python3-prometheus-client)\n");
    return NULL;
}

char *tide_test_http_get(const struct tide_test_daemon *d, const char *mode, const char *path,
                         const char *token, const char *cafile)
{
    const char *python = tide_test_python();
    if (!python)
        return NULL;
    char script[PATH_MAX + 32], url[256], out_path[600], err_path[600];
    snprintf(script, sizeof(script), "%s/tests/http_get.py", d->source_dir);
    snprintf(url, sizeof(url), "%s://127.0.0.1:%d%s", cafile ? "https" : "http", d->http_port,
             path);
    snprintf(out_path, sizeof(out_path), "%s/http_get.out", d->dir);
    snprintf(err_path, sizeof(err_path), "%s/http_get.err", d->dir);
    unlink(err_path);
    char *argv[12];
    int n = 0;
    argv[n++] = (char *)python;
    argv[n++] = script;
    argv[n++] = (char *)mode;
    argv[n++] = url;
    if (token) {
        argv[n++] = (char *)"--token";
        argv[n++] = (char *)token;
    }
    if (cafile) {
        argv[n++] = (char *)"--cafile";
        argv[n++] = (char *)cafile;
    }
    argv[n] = NULL;
    pid_t pid = spawn(argv, out_path, err_path);
    int code = pid > 0 ? wait_exit(pid) : -1;
    if (code != 0) {
        char *err = tide_test_read_file(err_path);
        fprintf(stderr, "http_get.py %s %s: exit %d\n%s\n", mode, url, code, err ? err : "");
        free(err);
        return NULL;
    }
    return tide_test_read_file(out_path);
}
