/* SPDX-License-Identifier: MIT */
/*
 * daemon_client.h: what the daemon's integration tests (test_lifecycle,
 * test_queue, test_devices) do around tests/daemon_child.h — start a tided of
 * the test's own and stop it, connect libtide to it, assert on a call's code
 * and message, wait for a job's state — once, instead of a copy per test.
 *
 * Example usage:
 *
 *     struct tide_test_daemon *d = tide_test_start_daemon("queue", extra);  // skips without tided
 *     tide_client *c = tide_test_connect(d, 120000);
 *     CHECK_OK(c, tide_client_submit(c, &spec, &job));
 *     CHECK_CODE(c, tide_client_cancel(c, "nope", NULL), TIDE_CODE_NOT_FOUND, "nope");
 *     tide_test_wait_for_state(c, job.id, TIDE_JOB_READY, &job);
 *     tide_client_free(c);
 *     tide_test_stop_daemon(d);  // SIGTERM, exit status 0, directory removed
 */
#ifndef TIDE_TESTS_DAEMON_CLIENT_H
#define TIDE_TESTS_DAEMON_CLIENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "daemon_child.h"
#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/graph.h"

/* The longest a test waits for a job's state (a hang, not a timing). */
#define TIDE_TEST_STATE_DEADLINE_S 120.0

/* Starts a tided of its own for one test, with extra flags; skip() when tided was not built. */
struct tide_test_daemon *tide_test_start_daemon(const char *tag, const char *const *extra);

/* Stops it with SIGTERM, asserts exit status 0, removes its directory and frees it. */
void tide_test_stop_daemon(struct tide_test_daemon *d);

/* A libtide client on d's socket (connect 5 s, calls 120 s, streams stream_timeout_ms). */
tide_client *tide_test_connect(const struct tide_test_daemon *d, uint32_t stream_timeout_ms);

/* Polls Get every poll_ms until job_id is in state; fails after TIDE_TEST_STATE_DEADLINE_S. */
void tide_test_wait_for_state(tide_client *c, const char *job_id, enum tide_job_state state,
                              struct tide_job_info *job, long poll_ms);

/*
 * The small job the daemon tests train (test_lifecycle, test_queue,
 * test_devices): an MLP of one hidden layer of 16 over 8 x 8 images in
 * 4 classes, batch 16, serialized.
 */
#define TIDE_TEST_MLP_SIDE    8
#define TIDE_TEST_MLP_CLASSES 4
#define TIDE_TEST_MLP_BATCH   16

struct tide_test_mlp {
    uint8_t *bytes;
    size_t len;
    int64_t image_dims[TIDE_BUILDER_MAX_RANK];
    int32_t image_rank;
};

/* Builds the MLP into m (free m->bytes with free). */
void tide_test_mlp_build(struct tide_test_mlp *m);

/* A momentum job of m named name, lr 0.05, seed 7, of budget bytes (0: the daemon's default). */
void tide_test_mlp_spec(const struct tide_test_mlp *m, const char *name, uint64_t budget,
                        struct tide_job_spec *spec);

/* Every Variable of job id (at least one), read back with ReadVariables. */
tide_variables *tide_test_read_variables(tide_client *c, const char *id);

/* Fails unless a and b hold the same step and the same Variables, bit for bit, naming what moved.
 */
void tide_test_assert_same_variables(const tide_variables *a, const tide_variables *b,
                                     const char *after);

/*
 * Batches of a synthetic dataset for the MLP, the same sequence for every
 * feeder of the same seed; the Train callbacks (feed, step) count the step
 * results, the first and last step numbers and any non-finite loss. A test
 * that must act mid-stream sets signal_at: tide_test_feeder_wait returns
 * once that many results came. With hold too, the feeder then sends no
 * further batch until tide_test_feeder_release: the stream cannot run to
 * its end before the test has acted, however loaded the machine is.
 */
struct tide_test_feeder {
    const struct tide_test_mlp *m;
    tide_dataset *ds;
    tide_dataset_iter *it;
    int64_t steps_left;
    int64_t results;
    uint64_t first_step, last_step;
    bool bad_loss;
    int64_t signal_at; /* 0: never */
    bool hold;         /* after the signal, feed nothing until released */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool signalled, released;
};

void tide_test_feeder_init(struct tide_test_feeder *f, const struct tide_test_mlp *m,
                           uint64_t seed);
void tide_test_feeder_free(struct tide_test_feeder *f);
/* tide_client_train's callbacks; user is the feeder. */
int tide_test_feeder_feed(void *user, tide_feeds *feeds);
int tide_test_feeder_step(void *user, const struct tide_step_result *r);
/* Blocks until signal_at results came. */
void tide_test_feeder_wait(struct tide_test_feeder *f);
/* Lets a holding feeder go on. */
void tide_test_feeder_release(struct tide_test_feeder *f);

/* Trains steps steps of job id over one Train stream; each must come back with a finite loss. */
void tide_test_train_steps(tide_client *c, const char *id, struct tide_test_feeder *f,
                           int64_t steps);

/* Asserts that call returned 0, printing the client's error otherwise. */
#define CHECK_OK(c, call)                                                                          \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != 0)                                                                            \
            fail_msg("%s: %s: %s", #call, tide_code_name(code_), tide_client_error_message(c));    \
    } while (0)

/* Asserts that call failed with code want, and that the message holds every needle. */
#define CHECK_CODE(c, call, want, ...)                                                             \
    do {                                                                                           \
        int code_ = (call);                                                                        \
        if (code_ != (want))                                                                       \
            fail_msg("%s: want %s, got %s: %s", #call, tide_code_name(want),                       \
                     tide_code_name(code_), tide_client_error_message(c));                         \
        const char *needles_[] = {__VA_ARGS__, NULL};                                              \
        for (const char *const *n_ = needles_; *n_; n_++) {                                        \
            if (!strstr(tide_client_error_message(c), *n_))                                        \
                fail_msg("%s: the message \"%s\" does not mention \"%s\"", #call,                  \
                         tide_client_error_message(c), *n_);                                       \
        }                                                                                          \
    } while (0)

#endif
