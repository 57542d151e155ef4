/* SPDX-License-Identifier: MIT */
/*
 * child.h: running a program as a child process from a test and collecting
 * its exit code, stdout and stderr (tidectl in test_tidectl and test_daemon,
 * the daemon test's own binary in its helper modes).
 *
 * Example usage:
 *
 *     struct tide_test_run *r = malloc(sizeof(*r));
 *     tide_test_run_program((char *[]){path, "--help", NULL}, -1, -1, r);
 *     assert_int_equal(r->exit_code, 0);
 *     free(r);
 */
#ifndef TIDE_TESTS_CHILD_H
#define TIDE_TESTS_CHILD_H

/* What a child did; large, so callers allocate it. */
struct tide_test_run {
    int exit_code;   /* -1: killed or not run */
    char out[65536]; /* stdout, NUL-terminated, cut at the buffer's size */
    char err[16384]; /* stderr, the same */
};

/*
 * Runs argv (argv[0] a path) with $TIDE_SOCKET and $TIDE_TOKEN unset, so the
 * caller's environment cannot pick a daemon for it, and waits for it. With
 * uid >= 0 the child first drops every supplementary group and becomes
 * gid/uid (the test must run as root then); with uid < 0 it runs as we do.
 * Fails the test (cmocka) when no pipe or process can be made.
 */
void tide_test_run_program(char *const argv[], int uid, int gid, struct tide_test_run *r);

#endif /* TIDE_TESTS_CHILD_H */
