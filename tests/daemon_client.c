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
#include <math.h>
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

void tide_test_feeder_init(struct tide_test_feeder *f, const struct tide_test_mlp *m, uint64_t seed)
{
    memset(f, 0, sizeof(*f));
    f->m = m;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    struct tide_synthetic_options o = {.count = 512,
                                       .channels = 1,
                                       .height = TIDE_TEST_MLP_SIDE,
                                       .width = TIDE_TEST_MLP_SIDE,
                                       .classes = TIDE_TEST_MLP_CLASSES,
                                       .seed = seed};
    char err[256];
    if (tide_dataset_open_synthetic(&o, "train", &f->ds, err, sizeof(err)) != 0 ||
        tide_dataset_iter_new(f->ds, TIDE_TEST_MLP_BATCH, seed, TIDE_DATASET_SHUFFLE, &f->it, err,
                              sizeof(err)) != 0)
        fail_msg("synthetic dataset: %s", err);
}

void tide_test_feeder_free(struct tide_test_feeder *f)
{
    tide_dataset_iter_free(f->it);
    tide_dataset_free(f->ds);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
}

int tide_test_feeder_feed(void *user, tide_feeds *feeds)
{
    struct tide_test_feeder *f = user;
    if (f->steps_left == 0)
        return 0;
    if (f->hold) {
        pthread_mutex_lock(&f->lock);
        while (f->signalled && !f->released)
            pthread_cond_wait(&f->cond, &f->lock);
        pthread_mutex_unlock(&f->lock);
    }
    f->steps_left--;
    float *images = tide_feeds_buffer(feeds, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, f->m->image_rank,
                                      f->m->image_dims);
    int32_t labels[TIDE_TEST_MLP_BATCH];
    if (!images)
        return -1;
    if (tide_dataset_iter_next(f->it, images, labels) == 0)
        tide_dataset_iter_next(f->it, images, labels); /* the next epoch */
    int64_t dims[1] = {TIDE_TEST_MLP_BATCH};
    return tide_feeds_set(feeds, TIDE_MODEL_LABELS, TIDE_DT_INT32, 1, dims, labels) == 0 ? 1 : -1;
}

int tide_test_feeder_step(void *user, const struct tide_step_result *r)
{
    struct tide_test_feeder *f = user;
    if (f->results++ == 0)
        f->first_step = r->step;
    f->last_step = r->step;
    if (!isfinite(r->loss))
        f->bad_loss = true;
    if (f->signal_at && f->results == f->signal_at) {
        pthread_mutex_lock(&f->lock);
        f->signalled = true;
        pthread_cond_broadcast(&f->cond);
        pthread_mutex_unlock(&f->lock);
    }
    return 0;
}

void tide_test_feeder_wait(struct tide_test_feeder *f)
{
    pthread_mutex_lock(&f->lock);
    while (!f->signalled)
        pthread_cond_wait(&f->cond, &f->lock);
    pthread_mutex_unlock(&f->lock);
}

void tide_test_feeder_release(struct tide_test_feeder *f)
{
    pthread_mutex_lock(&f->lock);
    f->released = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
}

void tide_test_train_steps(tide_client *c, const char *id, struct tide_test_feeder *f,
                           int64_t steps)
{
    f->steps_left = steps;
    f->results = 0;
    CHECK_OK(c, tide_client_train(c, id, tide_test_feeder_feed, tide_test_feeder_step, f));
    assert_int_equal(f->results, steps);
    assert_false(f->bad_loss);
}
