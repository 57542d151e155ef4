/* SPDX-License-Identifier: MIT */
/*
 * daemon_client.c: starting, stopping and reaching a test's own tided, and
 * waiting for a job's state (daemon_client.h).
 */
#include "daemon_client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

struct tide_test_daemon *tide_test_start_daemon(const char *tag, const char *const *extra)
{
    struct tide_test_daemon *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    if (!tide_test_daemon_init(d, tag)) {
        free(d);
        skip();
    }
    if (!tide_test_daemon_start(d, extra)) {
        tide_test_daemon_finish(d);
        free(d);
        fail_msg("tided did not start");
    }
    return d;
}

void tide_test_stop_daemon(struct tide_test_daemon *d)
{
    assert_int_equal(tide_test_daemon_stop(d), 0);
    tide_test_daemon_finish(d);
    free(d);
}

tide_client *tide_test_connect(const struct tide_test_daemon *d, uint32_t stream_timeout_ms)
{
    char target[600];
    snprintf(target, sizeof(target), "unix:%s", d->socket_path);
    struct tide_client_options o = {.connect_timeout_ms = 5000,
                                    .call_timeout_ms = 120000,
                                    .stream_timeout_ms = stream_timeout_ms};
    tide_client *c = NULL;
    if (tide_client_connect(target, &o, &c) != 0)
        fail_msg("connect %s: %s", target, tide_client_error_message(c));
    return c;
}

void tide_test_wait_for_state(tide_client *c, const char *job_id, enum tide_job_state state,
                              struct tide_job_info *job, long poll_ms)
{
    double deadline = tide_test_now_s() + TIDE_TEST_STATE_DEADLINE_S;
    for (;;) {
        CHECK_OK(c, tide_client_get(c, job_id, job));
        if (job->state == state)
            return;
        if (tide_test_now_s() > deadline)
            fail_msg("job %s is still %s after %.0f s, not %s", job_id,
                     tide_job_state_name(job->state), TIDE_TEST_STATE_DEADLINE_S,
                     tide_job_state_name(state));
        tide_test_sleep_ms(poll_ms);
    }
}
