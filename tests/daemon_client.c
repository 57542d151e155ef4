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

#include "tide/models.h"

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

void tide_test_mlp_build(struct tide_test_mlp *m)
{
    memset(m, 0, sizeof(*m));
    tide_builder *b = tide_builder_new();
    assert_non_null(b);
    int64_t hidden[1] = {16};
    tide_ref logits =
        tide_model_mlp(b, TIDE_TEST_MLP_BATCH, TIDE_TEST_MLP_SIDE * TIDE_TEST_MLP_SIDE, hidden, 1,
                       TIDE_TEST_MLP_CLASSES);
    if (logits.id < 0)
        fail_msg("building the model: %s", tide_builder_error(b));
    tide_ref images = tide_builder_find(b, TIDE_MODEL_IMAGES);
    assert_int_equal(tide_builder_shape(b, images, m->image_dims, &m->image_rank), 0);
    assert_int_equal(tide_builder_serialize(b, &m->bytes, &m->len), 0);
    tide_builder_free(b);
}

void tide_test_mlp_spec(const struct tide_test_mlp *m, const char *name, uint64_t budget,
                        struct tide_job_spec *spec)
{
    tide_job_spec_init(spec);
    spec->name = name;
    spec->graph = m->bytes;
    spec->graph_len = m->len;
    spec->budget_bytes = budget;
    spec->optimizer = TIDE_JOB_OPTIMIZER_MOMENTUM;
    spec->learning_rate = 0.05f;
    spec->seed = 7;
}

tide_variables *tide_test_read_variables(tide_client *c, const char *id)
{
    tide_variables *v = NULL;
    CHECK_OK(c, tide_client_read_variables(c, id, NULL, 0, &v));
    assert_true(tide_variables_count(v) > 0);
    return v;
}

void tide_test_assert_same_variables(const tide_variables *a, const tide_variables *b,
                                     const char *after)
{
    assert_int_equal(tide_variables_step(a), tide_variables_step(b));
    assert_int_equal(tide_variables_count(a), tide_variables_count(b));
    for (size_t i = 0; i < tide_variables_count(a); i++) {
        const struct tide_tensor *x = tide_variables_at(a, i);
        const struct tide_tensor *y = tide_variables_find(b, x->name);
        if (!y)
            fail_msg("variable %s is missing", x->name);
        assert_int_equal(x->bytes, y->bytes);
        if (memcmp(x->data, y->data, x->bytes) != 0)
            fail_msg("variable %s differs %s", x->name, after);
    }
}
