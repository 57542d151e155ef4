/* SPDX-License-Identifier: MIT */
/*
 * child.c: see child.h. Both pipes are read together with poll(), so a
 * child that fills one while the test waits on the other cannot deadlock.
 */
#include "child.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Reads both pipes to the end into r, closing them. */
static void drain_pipes(int out_fd, int err_fd, struct tide_test_run *r)
{
    size_t n_out = 0, n_err = 0;
    struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};
    int open_fds = 2;
    while (open_fds > 0) {
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[4096];
            ssize_t k = read(p[i].fd, buf, sizeof(buf));
            if (k <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_fds--;
                continue;
            }
            char *dst = i == 0 ? r->out : r->err;
            size_t cap = i == 0 ? sizeof(r->out) : sizeof(r->err);
            size_t *len = i == 0 ? &n_out : &n_err;
            size_t take = (size_t)k < cap - 1 - *len ? (size_t)k : cap - 1 - *len;
            memcpy(dst + *len, buf, take);
            *len += take;
            dst[*len] = '\0';
        }
    }
}

void tide_test_run_program(char *const argv[], int uid, int gid, struct tide_test_run *r)
{
    memset(r, 0, sizeof(*r));
    r->exit_code = -1;
    int out[2], err[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        if (uid >= 0) {
            if (setgroups(0, NULL) != 0 || setgid((gid_t)gid) != 0 || setuid((uid_t)uid) != 0) {
                perror("dropping privileges");
                _exit(126);
            }
        }
        unsetenv("TIDE_SOCKET");
        unsetenv("TIDE_TOKEN");
        execv(argv[0], argv);
        perror(argv[0]);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    drain_pipes(out[0], err[0], r);
    int status;
    waitpid(pid, &status, 0);
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
