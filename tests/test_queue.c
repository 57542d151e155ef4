/* SPDX-License-Identifier: MIT */
/*
 * test_queue.c: the queue, quotas, priorities and preemption (daemon/queue.c).
 *
 *  - the admission order, a pure function: priority, then fair share (the
 *    uid with the fewest recent device-byte-seconds), then arrival;
 *  - on a 64 MiB device with 32 MiB default budgets, two `tidectl train
 *    --budget 48M` started at once both succeed: one says "queued
 *    (position 1)" and trains once the other has finished; Ctrl-C while
 *    queued cancels the job and exits 130; `tidectl queue --json` lists the
 *    queued jobs in order and `tidectl priority` moves one;
 *  - quotas: a Submit past quota-uid-jobs, quota-uid-bytes or a
 *    quota-groups entry is refused with RESOURCE_EXHAUSTED naming the
 *    quota, the uid or group and the numbers; a priority above 0 from a
 *    user outside the admin group is refused;
 *  - preemption: a low-priority job training over one Train stream is
 *    parked between steps by a high-priority job (Watch says PREEMPTED),
 *    its stream paused; when the high-priority job finishes, it resumes
 *    by itself (RESUMED), the stream goes on, and its variables after N
 *    steps are byte-equal to those of a job trained N steps without a
 *    pause.
 *
 * The integration tests start the real tided (tests/daemon_child.h), each
 * its own, and drive it with libtide and the real tidectl over its socket.
 * Deadlines only bound a hang; no test depends on how long anything takes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <grp.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#include <grpc/grpc_security.h>
#pragma GCC diagnostic pop

#include "daemon/queue.h"
#include "daemon_child.h"
#include "daemon_client.h"
#include "tide/v1/tide.pb-c.h"

#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/models.h"

#define MIB (UINT64_C(1) << 20)

/* The small model: 1 x 8 x 8 images in 4 classes, an MLP of 16 hidden units. */
#define SIDE    TIDE_TEST_MLP_SIDE
#define CLASSES TIDE_TEST_MLP_CLASSES
#define BATCH   TIDE_TEST_MLP_BATCH

/* The longest a test waits for the daemon (a hang, not a timing). */
#define DEADLINE_S 120.0

/* ============================================================================
 * The order (a pure function)
 * ========================================================================== */

static void test_order(void **state)
{
    (void)state;
    /* item holds the expected place, 0 first. */
    struct tided_queue_entry e[] = {
        {.uid = 1000, .priority = 0, .usage = 9e9, .queued_us = 100, .seq = 1, .item = (void *)4},
        {.uid = 1001, .priority = 0, .usage = 1e9, .queued_us = 300, .seq = 2, .item = (void *)3},
        {.uid = 1002, .priority = 5, .usage = 9e12, .queued_us = 900, .seq = 3, .item = (void *)0},
        {.uid = 1003, .priority = -1, .usage = 0, .queued_us = 50, .seq = 4, .item = (void *)6},
        {.uid = 1004, .priority = 0, .usage = 0, .queued_us = 800, .seq = 5, .item = (void *)1},
        {.uid = 1004, .priority = 0, .usage = 0, .queued_us = 800, .seq = 6, .item = (void *)2},
        {.uid = 1000, .priority = 0, .usage = 9e9, .queued_us = 200, .seq = 7, .item = (void *)5},
    };
    size_t n = sizeof(e) / sizeof(e[0]);
    tided_queue_order(e, n);
    for (size_t i = 0; i < n; i++) {
        if ((size_t)(uintptr_t)e[i].item != i)
            fail_msg("place %zu holds the entry expected at %zu (uid %u, seq %" PRIu64 ")", i,
                     (size_t)(uintptr_t)e[i].item, e[i].uid, e[i].seq);
    }
    /* Nothing to sort is fine. */
    tided_queue_order(NULL, 0);
    tided_queue_order(e, 1);
    assert_int_equal((uintptr_t)e[0].item, 0);
}

/* ============================================================================
 * The daemon and the client
 * ========================================================================== */

/* Waits for a child process; its exit code, or -1 when a signal ended it. */
static int wait_child(pid_t pid)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ============================================================================
 * The model and its batches
 * ========================================================================== */

/* The MLP's momentum job of budget bytes at priority. */
static void make_spec(const struct tide_test_mlp *m, const char *name, uint64_t budget,
                      int32_t priority, struct tide_job_spec *spec)
{
    tide_test_mlp_spec(m, name, budget, spec);
    spec->priority = priority;
}

static void submit(tide_client *c, const struct tide_job_spec *spec, struct tide_job_info *job)
{
    CHECK_OK(c, tide_client_submit(c, spec, job));
}

/* The caller's primary group's name (for quota-groups and admin-group). */
static void own_group(char *name, size_t size)
{
    struct group *g = getgrgid(getgid());
    if (!g)
        skip(); /* a gid without a name: no group to configure */
    snprintf(name, size, "%s", g->gr_name);
}

/* ============================================================================
 * Tests: the queue
 * ========================================================================== */

/*
 * The case: two `tidectl train --budget 48M` at once on a 64 MiB
 * device. Both exit 0 after all their steps; one waited QUEUED and said so.
 */
static void test_two_big_trains_both_succeed(void **state)
{
    (void)state;
    static const char *const extra[] = {"--device-memory", "64M", "--default-budget", "32M", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("queue", extra);
    static const char *const big[] = {"--budget", "48M", NULL};
    pid_t a = tide_test_train_in_background_with(d, "first", 20, "first.log", big);
    pid_t b = tide_test_train_in_background_with(d, "second", 20, "second.log", big);
    assert_true(a > 0 && b > 0);
    int code_a = wait_child(a), code_b = wait_child(b);
    char path[600];
    snprintf(path, sizeof(path), "%s/first.log", d->dir);
    char *log_a = tide_test_read_file(path);
    snprintf(path, sizeof(path), "%s/second.log", d->dir);
    char *log_b = tide_test_read_file(path);
    assert_non_null(log_a);
    assert_non_null(log_b);
    if (code_a != 0 || code_b != 0) {
        tide_test_daemon_print_log(d);
        fail_msg("tidectl train exited %d and %d:\n%s\n%s", code_a, code_b, log_a, log_b);
    }
    bool queued_a = strstr(log_a, "queued (position 1)") != NULL;
    bool queued_b = strstr(log_b, "queued (position 1)") != NULL;
    if (queued_a == queued_b)
        fail_msg("want exactly one of the two queued:\n%s\n%s", log_a, log_b);
    assert_non_null(strstr(log_a, "20 steps"));
    assert_non_null(strstr(log_b, "20 steps"));
    free(log_a);
    free(log_b);

    /* Both finished: nothing is reserved, nothing waits. */
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_int_equal(s.device_reserved_bytes, 0);
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(jobs[i].state, TIDE_JOB_DONE);
        assert_int_equal(jobs[i].steps, 20);
        assert_int_equal(jobs[i].queue_position, 0);
    }
    free(jobs);
    tide_client_free(c);
    tide_test_stop_daemon(d);
}

/* Ctrl-C while `tidectl train` waits in the queue: the job, which never ran, is cancelled. */
static void test_interrupt_while_queued(void **state)
{
    (void)state;
    static const char *const extra[] = {"--device-memory", "64M", "--default-budget", "32M", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("queueint", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info holder, job;
    make_spec(&m, "holder", 48 * MIB, 0, &spec);
    submit(c, &spec, &holder);

    static const char *const big[] = {"--budget", "48M", NULL};
    pid_t pid = tide_test_train_in_background_with(d, "waiter", 5, "waiter.log", big);
    assert_true(pid > 0);
    char path[600];
    snprintf(path, sizeof(path), "%s/waiter.log", d->dir);
    double deadline = tide_test_now_s() + DEADLINE_S;
    for (;;) {
        char *log = tide_test_read_file(path);
        bool queued = log && strstr(log, "queued (position 1)");
        free(log);
        if (queued)
            break;
        if (tide_test_now_s() > deadline)
            fail_msg("tidectl train did not say it was queued in %.0f s", DEADLINE_S);
        tide_test_sleep_ms(50);
    }
    assert_int_equal(tide_test_stop_trainer(pid), 130);
    char *log = tide_test_read_file(path);
    assert_non_null(log);
    if (!strstr(log, "cancelled while queued"))
        fail_msg("tidectl train's output does not say the job was cancelled:\n%s", log);
    free(log);
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(jobs[i].name, "waiter") == 0) {
            found = true;
            assert_int_equal(jobs[i].state, TIDE_JOB_CANCELLED);
            assert_int_equal(jobs[i].steps, 0);
        }
    }
    free(jobs);
    assert_true(found);
    CHECK_OK(c, tide_client_get(c, holder.id, &job));
    assert_int_equal(job.state, TIDE_JOB_READY);
    CHECK_OK(c, tide_client_cancel(c, holder.id, NULL));
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* The state and message of the job called name in c's list; false when it is not there. */
static bool listed_state(tide_client *c, const char *name, struct tide_job_info *out)
{
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    CHECK_OK(c, tide_client_list(c, false, &jobs, &n));
    bool found = false;
    for (size_t i = 0; i < n && !found; i++) {
        if (strcmp(jobs[i].name, name) == 0) {
            *out = jobs[i];
            found = true;
        }
    }
    free(jobs);
    return found;
}

/*
 * A job whose client submitted it and then went quiet (died, or never asked
 * again) while it waited QUEUED: admitted once the holder idles out, it is
 * idle since its owner's last call, not since its admission, so it is
 * parked at the next idle check and gives the budget back, instead of
 * holding it for another idle-timeout. The test only lists jobs, which is
 * no call about the job.
 */
static void test_quiet_queued_job_parks_at_admission(void **state)
{
    (void)state;
    static const char *const extra[] = {"--device-memory", "64M", "--idle-timeout", "6", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("queuequiet", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info holder, waiter, job;
    make_spec(&m, "holder", 48 * MIB, 0, &spec);
    submit(c, &spec, &holder);
    assert_int_equal(holder.state, TIDE_JOB_READY);
    make_spec(&m, "quiet", 48 * MIB, 0, &spec);
    submit(c, &spec, &waiter);
    assert_int_equal(waiter.state, TIDE_JOB_QUEUED);
    double admitted = 0, parked = 0, deadline = tide_test_now_s() + DEADLINE_S;
    while (!parked) {
        assert_true(listed_state(c, "quiet", &job));
        double now = tide_test_now_s();
        if (job.state != TIDE_JOB_QUEUED && !admitted)
            admitted = now;
        if (job.state == TIDE_JOB_PARKED)
            parked = now;
        if (now > deadline)
            fail_msg("job quiet is %s after %.0f s", tide_job_state_name(job.state), DEADLINE_S);
        tide_test_sleep_ms(50);
    }
    print_message("quiet: parked %.2f s after its admission: %s\n", parked - admitted, job.message);
    /* Its idle time counts from Submit, 6 s or more before; the check runs every second. */
    if (parked - admitted >= 3.0)
        fail_msg("job quiet was parked %.2f s after its admission, a new idle-timeout",
                 parked - admitted);
    const char *idle = strstr(job.message, "idle for ");
    assert_non_null(idle);
    assert_true(atoi(idle + strlen("idle for ")) >= 6);
    assert_true(listed_state(c, "holder", &job));
    assert_int_equal(job.state, TIDE_JOB_PARKED);
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/*
 * Jobs queued behind a READY job: Submit answers QUEUED with the position;
 * `tidectl queue --json` lists them in order; a budget larger than the
 * device is refused at once; cancelling the first queued moves the second
 * up; releasing the device admits it.
 */
static void test_queue_positions(void **state)
{
    (void)state;
    static const char *const extra[] = {"--device-memory", "64M", "--default-budget", "32M", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("queuepos", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info holder, q1, q2, job;

    make_spec(&m, "holder", 48 * MIB, 0, &spec);
    submit(c, &spec, &holder);
    assert_int_equal(holder.state, TIDE_JOB_READY);
    make_spec(&m, "q1", 32 * MIB, 0, &spec);
    submit(c, &spec, &q1);
    assert_int_equal(q1.state, TIDE_JOB_QUEUED);
    assert_int_equal(q1.queue_position, 1);
    make_spec(&m, "q2", 16 * MIB, -3, &spec);
    submit(c, &spec, &q2);
    /* 16 MiB fits now, but q1 waits ahead of it (and outranks it). */
    assert_int_equal(q2.state, TIDE_JOB_QUEUED);
    assert_int_equal(q2.queue_position, 2);
    assert_int_equal(q2.priority, -3);

    make_spec(&m, "huge", 65 * MIB, 0, &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED,
               "68157440 bytes (65 MiB)", "largest job budget, 67108864 bytes (64 MiB)");

    char *argv[] = {d->tidectl,       (char *)"--socket", d->socket_path,
                    (char *)"--json", (char *)"queue",    NULL};
    char out_path[600];
    snprintf(out_path, sizeof(out_path), "%s/queue.json", d->dir);
    assert_int_equal(tide_test_run_to_files(argv, out_path, NULL), 0);
    char *out = tide_test_read_file(out_path);
    assert_non_null(out);
    char *first = strstr(out, q1.id), *second = strstr(out, q2.id);
    if (!first || !second || first > second || strstr(out, holder.id))
        fail_msg("tidectl queue --json: want %s then %s only:\n%s", q1.id, q2.id, out);
    assert_non_null(strstr(out, "\"queue_position\":1"));
    assert_non_null(strstr(out, "\"queue_position\":2"));
    free(out);

    /* Lowering q2 further keeps it second; an ended job's priority cannot change. */
    char *lower[] = {d->tidectl, (char *)"--socket", d->socket_path, (char *)"priority",
                     q2.id,      (char *)"--",       (char *)"-7",   NULL};
    snprintf(out_path, sizeof(out_path), "%s/priority.out", d->dir);
    assert_int_equal(tide_test_run_to_files(lower, out_path, NULL), 0);
    out = tide_test_read_file(out_path);
    assert_non_null(out);
    char want[200];
    snprintf(want, sizeof(want), "job %s: priority -7, queued (position 2)", q2.id);
    if (!strstr(out, want))
        fail_msg("tidectl priority: want \"%s\", got \"%s\"", want, out);
    free(out);

    CHECK_OK(c, tide_client_cancel(c, q1.id, NULL));
    /* q2 is first now and fits next to the holder: admitted. */
    tide_test_wait_for_state(c, q2.id, TIDE_JOB_READY, &job, 50);
    assert_int_equal(job.queue_position, 0);
    assert_int_equal(job.priority, -7);
    CHECK_OK(c, tide_client_cancel(c, q2.id, NULL));
    CHECK_CODE(c, tide_client_set_priority(c, q1.id, -1, &job), TIDE_CODE_FAILED_PRECONDITION,
               "has already ended (CANCELLED)");
    CHECK_OK(c, tide_client_cancel(c, holder.id, NULL));
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* ============================================================================
 * Tests: quotas and priorities
 * ========================================================================== */

static void test_quotas(void **state)
{
    (void)state;
    char group[128], groups[200];
    own_group(group, sizeof(group));
    snprintf(groups, sizeof(groups), "nosuchgroup-x:1M:1, %s:0:3", group);
    const char *const extra[] = {"--device-memory",
                                 "256M",
                                 "--default-budget",
                                 "32M",
                                 "--quota-uid-jobs",
                                 "3",
                                 "--quota-uid-bytes",
                                 "80M",
                                 "--quota-groups",
                                 groups,
                                 NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("quota", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info a, b, job;
    char uid[32];
    snprintf(uid, sizeof(uid), "uid %u", (unsigned)getuid());

    make_spec(&m, "a", 32 * MIB, 0, &spec);
    submit(c, &spec, &a);
    make_spec(&m, "b", 32 * MIB, 0, &spec);
    submit(c, &spec, &b);
    /* 64 MiB held; 32 more would pass 80 MiB. */
    make_spec(&m, "c", 32 * MIB, 0, &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED,
               "quota quota-uid-bytes", uid, "67108864 bytes (64 MiB)", "33554432 bytes (32 MiB)",
               "83886080 bytes (80 MiB)");
    make_spec(&m, "c", 16 * MIB, 0, &spec);
    submit(c, &spec, &job);
    /* Three jobs not ended: the fourth passes quota-uid-jobs (and the group's 3) first. */
    make_spec(&m, "d", 1 * MIB, 0, &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED,
               "quota quota-uid-jobs", uid, "has 3 job(s) not ended", "quota is 3 job(s)");
    /* A job that ended no longer counts. */
    CHECK_OK(c, tide_client_cancel(c, b.id, NULL));
    submit(c, &spec, &job);
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);

    /* The group's quota alone: two jobs for all its members together. */
    snprintf(groups, sizeof(groups), "%s:40M:2", group);
    const char *const extra2[] = {
        "--device-memory", "256M", "--default-budget", "16M", "--quota-groups", groups, NULL};
    d = tide_test_start_daemon("quotagroup", extra2);
    c = tide_test_connect(d, 300000);
    tide_test_mlp_build(&m);
    char quota[200], who[200];
    snprintf(quota, sizeof(quota), "quota quota-groups %s", group);
    snprintf(who, sizeof(who), "group %s (%s is a member)", group, uid);
    make_spec(&m, "a", 0, 0, &spec);
    submit(c, &spec, &a);
    make_spec(&m, "b", 32 * MIB, 0, &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED, quota, who,
               "16777216 bytes (16 MiB)", "41943040 bytes (40 MiB)");
    make_spec(&m, "b", 0, 0, &spec);
    submit(c, &spec, &b);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED, quota, who,
               "has 2 job(s) not ended", "quota is 2 job(s)");
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* A malformed quota-groups is refused at start, naming the entry. */
static void test_quota_groups_malformed(void **state)
{
    (void)state;
    struct tide_test_daemon *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    if (!tide_test_daemon_init(d, "quotabad")) {
        free(d);
        skip();
    }
    char err[2048];
    static const char *const bad[] = {"--quota-groups", "students:12X:2", NULL};
    assert_int_equal(tide_test_daemon_run_to_exit(d, bad, err, sizeof(err)), 2);
    if (!strstr(err, "quota-groups: group students: bytes \"12X\""))
        fail_msg("tided's message does not name the bad bytes: %s", err);
    static const char *const twice[] = {"--quota-groups", "a:1G:1,b:1G, a:2G:2", NULL};
    assert_int_equal(tide_test_daemon_run_to_exit(d, twice, err, sizeof(err)), 2);
    if (!strstr(err, "entry \"b:1G\": want GROUP:BYTES:JOBS"))
        fail_msg("tided's message does not name the bad entry: %s", err);
    tide_test_daemon_finish(d);
    free(d);
}

/* Priorities: out of range, and above the default without the admin group. */
static void test_priority_rules(void **state)
{
    (void)state;
    if (getuid() == 0)
        skip(); /* root is always an admin: nothing to refuse */
    static const char *const extra[] = {"--device-memory", "64M", "--default-budget", "16M", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("priority", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info job;
    make_spec(&m, "high", 0, 1, &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_PERMISSION_DENIED,
               "spec.priority: 1 is above the default 0", "admin-group");
    make_spec(&m, "low", 0, -1001, &spec);
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_INVALID_ARGUMENT,
               "spec.priority: -1001 is outside -1000 to 1000");
    make_spec(&m, "low", 0, -5, &spec);
    submit(c, &spec, &job);
    assert_int_equal(job.priority, -5);
    /* SetPriority follows the same rule: back to 0 is fine, above it is not. */
    CHECK_OK(c, tide_client_set_priority(c, job.id, 0, &job));
    assert_int_equal(job.priority, 0);
    CHECK_CODE(c, tide_client_set_priority(c, job.id, 3, NULL), TIDE_CODE_PERMISSION_DENIED,
               "priority: 3 is above the default 0");
    CHECK_OK(c, tide_client_cancel(c, job.id, NULL));
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* ============================================================================
 * Tests: preemption
 * ========================================================================== */

struct low_trainer {
    const struct tide_test_daemon *d;
    const char *id;
    struct tide_test_feeder *f;
    int64_t steps;
    int code;
    char error[512];
};

static void *low_trainer_main(void *arg)
{
    struct low_trainer *t = arg;
    tide_client *c = tide_test_connect(t->d, 300000);
    t->f->steps_left = t->steps;
    t->f->results = 0;
    t->code = tide_client_train(c, t->id, tide_test_feeder_feed, tide_test_feeder_step, t->f);
    if (t->code != 0)
        snprintf(t->error, sizeof(t->error), "%s", tide_client_error_message(c));
    tide_client_free(c);
    return NULL;
}

/*
 * A low-priority job trains N steps over one Train stream; after K of
 * them a high-priority job that does not fit next to it is submitted. The
 * low job is parked between steps (PREEMPTED, QUEUED), the high one
 * trains and finishes, and the low one resumes by itself (RESUMED) and its
 * stream ends OK after N steps, numbered on. Its variables equal those of
 * a job trained N steps without a pause, byte for byte.
 */
/*
 * Preemption on a box of two devices: a budget is room only on its own
 * device, so a high-priority job that asks for device 1 parks the job on
 * device 1 and leaves the one on device 0 running.
 */
static void test_preemption_on_its_device(void **state)
{
    (void)state;
    char group[128];
    own_group(group, sizeof(group));
    const char *const extra[] = {"--cpu-devices", "2",     "--device-memory", "64M",
                                 "--admin-group", group,   "--idle-timeout",  "0",
                                 NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("preempt-device", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info low0, low1, high, job;
    make_spec(&m, "low0", 48 * MIB, -10, &spec);
    submit(c, &spec, &low0);
    make_spec(&m, "low1", 48 * MIB, -10, &spec);
    submit(c, &spec, &low1);
    tide_test_wait_for_state(c, low0.id, TIDE_JOB_READY, &low0, 50);
    tide_test_wait_for_state(c, low1.id, TIDE_JOB_READY, &low1, 50);
    assert_int_not_equal(low0.device, low1.device);
    const struct tide_job_info *on0 = low0.device == 0 ? &low0 : &low1;
    const struct tide_job_info *on1 = low0.device == 0 ? &low1 : &low0;

    make_spec(&m, "high", 48 * MIB, 10, &spec);
    spec.has_device = true;
    spec.device = 0;
    submit(c, &spec, &high);
    tide_test_wait_for_state(c, high.id, TIDE_JOB_READY, &job, 50);
    assert_int_equal(job.device, 0);
    CHECK_OK(c, tide_client_get(c, on0->id, &job));
    assert_int_equal(job.state, TIDE_JOB_QUEUED);
    assert_non_null(strstr(job.message, "preempted at step"));
    CHECK_OK(c, tide_client_get(c, on1->id, &job));
    assert_int_equal(job.state, TIDE_JOB_READY); /* device 1's job is not in the way */
    assert_int_equal(job.device, 1);

    /* The high job ends: the parked one comes back by itself. */
    CHECK_OK(c, tide_client_finish(c, high.id));
    tide_test_wait_for_state(c, on0->id, TIDE_JOB_READY, &job, 50);
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

static void test_preemption_resumes_bit_identical(void **state)
{
    (void)state;
    char group[128];
    own_group(group, sizeof(group));
    /* The caller's group is the admin group: it may raise a priority. */
    const char *const extra[] = {"--device-memory",
                                 "64M",
                                 "--default-budget",
                                 "32M",
                                 "--admin-group",
                                 group,
                                 "--idle-timeout",
                                 "0",
                                 NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("preempt", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    enum { N = 12, K = 3 };

    /* The uninterrupted run. */
    struct tide_job_info straight, low, high, job;
    make_spec(&m, "straight", 48 * MIB, 0, &spec);
    submit(c, &spec, &straight);
    struct tide_test_feeder f;
    tide_test_feeder_init(&f, &m, 11);
    tide_test_train_steps(c, straight.id, &f, N);
    tide_test_feeder_free(&f);
    tide_variables *want = tide_test_read_variables(c, straight.id);
    assert_int_equal(tide_variables_step(want), N);
    CHECK_OK(c, tide_client_finish(c, straight.id));

    /* Watch everything, as a user would, in the background. */
    char watch_path[600];
    snprintf(watch_path, sizeof(watch_path), "%s/watch.json", d->dir);
    fflush(NULL);
    pid_t test = getpid();
    pid_t watcher = fork();
    assert_true(watcher >= 0);
    if (watcher == 0) {
        char *argv[] = {d->tidectl,       (char *)"--socket", (char *)d->socket_path,
                        (char *)"--json", (char *)"watch",    NULL};
        /* Gone with the test, and off its stderr, should the test fail before it stops it:
         * ctest would wait for its output to close until the timeout. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != test)
            _exit(125);
        FILE *out = freopen(watch_path, "w", stdout);
        FILE *err = freopen("/dev/null", "w", stderr);
        if (!out || !err)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    /* It is watching once it has printed where things stand (the finished job's state). */
    double deadline = tide_test_now_s() + DEADLINE_S;
    for (;;) {
        char *so_far = tide_test_read_file(watch_path);
        bool watching = so_far && strstr(so_far, straight.id);
        free(so_far);
        if (watching)
            break;
        if (tide_test_now_s() > deadline)
            fail_msg("tidectl watch printed nothing in %.0f s", DEADLINE_S);
        tide_test_sleep_ms(50);
    }

    make_spec(&m, "low", 48 * MIB, -10, &spec);
    submit(c, &spec, &low);
    tide_test_feeder_init(&f, &m, 11);
    f.signal_at = K;
    f.hold = true; /* no batch after the K-th result until the preemption is seen */
    struct low_trainer lt = {.d = d, .id = low.id, .f = &f, .steps = N};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, low_trainer_main, &lt), 0);
    tide_test_feeder_wait(&f);

    make_spec(&m, "high", 48 * MIB, 10, &spec);
    submit(c, &spec, &high);
    tide_test_wait_for_state(c, low.id, TIDE_JOB_QUEUED, &job, 50);
    assert_non_null(strstr(job.message, "preempted at step"));
    assert_int_equal(job.queue_position, 1);
    uint64_t parked_at = job.steps;
    assert_true(parked_at >= K && parked_at < N);
    tide_test_feeder_release(&f); /* its next batch waits with the paused stream */
    tide_test_wait_for_state(c, high.id, TIDE_JOB_READY, &job, 50);

    struct tide_test_feeder g;
    tide_test_feeder_init(&g, &m, 5);
    tide_test_train_steps(c, high.id, &g, 4);
    tide_test_feeder_free(&g);
    /* The low job's stream is paused, not failed: it waits while the high job holds the room. */
    CHECK_OK(c, tide_client_get(c, low.id, &job));
    assert_int_equal(job.state, TIDE_JOB_QUEUED);
    assert_int_equal(job.steps, parked_at);
    CHECK_OK(c, tide_client_finish(c, high.id));

    pthread_join(thread, NULL);
    if (lt.code != 0)
        fail_msg("the low job's Train stream: %s: %s", tide_code_name(lt.code), lt.error);
    assert_int_equal(f.results, N);
    assert_int_equal(f.last_step, N);
    assert_false(f.bad_loss);
    tide_test_feeder_free(&f);
    CHECK_OK(c, tide_client_get(c, low.id, &job));
    assert_int_equal(job.state, TIDE_JOB_READY);
    assert_int_equal(job.steps, N);
    tide_variables *got = tide_test_read_variables(c, low.id);
    tide_test_assert_same_variables(want, got, "after the preemption");
    tide_variables_free(want);
    tide_variables_free(got);

    /* Watch said so: PREEMPTED, then RESUMED, for the low job. */
    kill(watcher, SIGINT);
    wait_child(watcher);
    char *events = tide_test_read_file(watch_path);
    assert_non_null(events);
    char needle[200];
    snprintf(needle, sizeof(needle), "\"event\":\"preempted\"");
    char *preempted = strstr(events, needle);
    char *resumed = strstr(events, "\"event\":\"resumed\"");
    if (!preempted || !resumed || resumed < preempted || !strstr(preempted, low.id))
        fail_msg("watch --json: want preempted, then resumed, for %s:\n%s", low.id, events);
    free(events);

    CHECK_OK(c, tide_client_finish(c, low.id));
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/*
 * A Train stream opened on a QUEUED job (libtide, as any gRPC client may)
 * waits with its first batch, and its steps run once the job is admitted
 * and compiled; the step numbers start at 1.
 */
static void test_train_stream_waits_in_queue(void **state)
{
    (void)state;
    static const char *const extra[] = {"--device-memory", "64M", "--default-budget", "32M", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("queuestream", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info holder, queued, job;
    make_spec(&m, "holder", 48 * MIB, 0, &spec);
    submit(c, &spec, &holder);
    make_spec(&m, "queued", 48 * MIB, 0, &spec);
    submit(c, &spec, &queued);
    assert_int_equal(queued.state, TIDE_JOB_QUEUED);

    struct tide_test_feeder f;
    tide_test_feeder_init(&f, &m, 3);
    struct low_trainer t = {.d = d, .id = queued.id, .f = &f, .steps = 5};
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, low_trainer_main, &t), 0);
    tide_test_sleep_ms(300); /* most likely attached by now; admitted first works too */
    CHECK_OK(c, tide_client_get(c, queued.id, &job));
    assert_int_equal(job.state, TIDE_JOB_QUEUED);
    CHECK_OK(c, tide_client_finish(c, holder.id));
    pthread_join(thread, NULL);
    if (t.code != 0)
        fail_msg("the queued job's Train stream: %s: %s", tide_code_name(t.code), t.error);
    assert_int_equal(f.results, 5);
    assert_int_equal(f.last_step, 5);
    assert_false(f.bad_loss);
    tide_test_feeder_free(&f);
    CHECK_OK(c, tide_client_finish(c, queued.id));
    CHECK_OK(c, tide_client_get(c, queued.id, &job));
    assert_int_equal(job.state, TIDE_JOB_DONE);
    assert_int_equal(job.steps, 5);
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* ============================================================================
 * A raw Train stream (a gRPC client other than libtide)
 * ========================================================================== */

struct raw_train {
    const char *socket;
    const Tide__V1__TrainRequest *first; /* the one message sent, then a half-close */
    int status;                          /* the stream's gRPC status */
    char message[1024];
    int results;        /* StepResults received */
    uint64_t last_step; /* the last one's step */
};

static void *raw_train_main(void *arg)
{
    struct raw_train *r = arg;
    char target[600];
    snprintf(target, sizeof(target), "unix:%s", r->socket);
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *channel = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(120000, GPR_TIMESPAN));
    grpc_slice path = grpc_slice_from_static_string("/tide.v1.Jobs/Train");
    grpc_call *call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, path,
                                               NULL, deadline, NULL);
    grpc_slice_unref(path);
    void *tag = (void *)1;
    size_t len = protobuf_c_message_get_packed_size(&r->first->base);
    grpc_slice slice = grpc_slice_malloc(len);
    protobuf_c_message_pack(&r->first->base, GRPC_SLICE_START_PTR(slice));
    grpc_byte_buffer *buffer = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    grpc_metadata_array initial, trailing;
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = buffer;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    if (grpc_call_start_batch(call, ops, 4, tag, NULL) == GRPC_CALL_OK)
        grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    grpc_byte_buffer_destroy(buffer);
    for (;;) {
        grpc_byte_buffer *reply = NULL;
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_RECV_MESSAGE;
        ops[0].data.recv_message.recv_message = &reply;
        if (grpc_call_start_batch(call, ops, 1, tag, NULL) != GRPC_CALL_OK)
            break;
        grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (!reply)
            break;
        grpc_byte_buffer_reader reader;
        if (grpc_byte_buffer_reader_init(&reader, reply)) {
            grpc_slice s = grpc_byte_buffer_reader_readall(&reader);
            Tide__V1__StepResult *step =
                tide__v1__step_result__unpack(NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
            if (step) {
                r->results++;
                r->last_step = step->step;
                tide__v1__step_result__free_unpacked(step, NULL);
            }
            grpc_slice_unref(s);
            grpc_byte_buffer_reader_destroy(&reader);
        }
        grpc_byte_buffer_destroy(reply);
    }
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[0].data.recv_status_on_client.status = &status;
    ops[0].data.recv_status_on_client.status_details = &details;
    if (grpc_call_start_batch(call, ops, 1, tag, NULL) == GRPC_CALL_OK)
        grpc_completion_queue_pluck(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    r->status = (int)status;
    char *text = grpc_slice_to_c_string(details);
    snprintf(r->message, sizeof(r->message), "%s", text ? text : "");
    gpr_free(text);
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(channel);
    grpc_shutdown();
    return NULL;
}

/*
 * The first TrainRequest of a stream may carry a batch. Sent to a QUEUED
 * job, whose placeholders nobody knows before it is compiled, it is checked
 * once the job is: a good batch runs as the job's first step (with finish,
 * the job is DONE after it), a batch feeding no placeholder of the job
 * fails the stream with INVALID_ARGUMENT naming the feed.
 */
static void test_first_batch_of_a_queued_job(void **state)
{
    (void)state;
    static const char *const extra[] = {"--device-memory", "64M", "--default-budget", "32M", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("queueraw", extra);
    tide_client *c = tide_test_connect(d, 300000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    struct tide_job_info holder, queued, job;

    int64_t elements = 1;
    for (int32_t i = 0; i < m.image_rank; i++)
        elements *= m.image_dims[i];
    float *images = calloc((size_t)elements, sizeof(float));
    int32_t labels[BATCH];
    assert_non_null(images);
    for (int64_t i = 0; i < elements; i++)
        images[i] = (float)(i % 7) / 7.0f;
    for (int i = 0; i < BATCH; i++)
        labels[i] = i % CLASSES;
    Tide__V1__TensorShape image_shape = TIDE__V1__TENSOR_SHAPE__INIT,
                          label_shape = TIDE__V1__TENSOR_SHAPE__INIT;
    image_shape.n_dims = (size_t)m.image_rank;
    image_shape.dims = m.image_dims;
    int64_t label_dims[1] = {BATCH};
    label_shape.n_dims = 1;
    label_shape.dims = label_dims;
    Tide__V1__Tensor image_tensor = TIDE__V1__TENSOR__INIT, label_tensor = TIDE__V1__TENSOR__INIT;
    image_tensor.dtype = TIDE__V1__DATA_TYPE__DT_FLOAT32;
    image_tensor.shape = &image_shape;
    image_tensor.data.data = (uint8_t *)images;
    image_tensor.data.len = (size_t)elements * sizeof(float);
    label_tensor.dtype = TIDE__V1__DATA_TYPE__DT_INT32;
    label_tensor.shape = &label_shape;
    label_tensor.data.data = (uint8_t *)labels;
    label_tensor.data.len = sizeof(labels);
    Tide__V1__NamedTensor feed_images = TIDE__V1__NAMED_TENSOR__INIT,
                          feed_labels = TIDE__V1__NAMED_TENSOR__INIT;
    feed_images.name = (char *)TIDE_MODEL_IMAGES;
    feed_images.tensor = &image_tensor;
    feed_labels.name = (char *)TIDE_MODEL_LABELS;
    feed_labels.tensor = &label_tensor;
    Tide__V1__NamedTensor *feeds[2] = {&feed_images, &feed_labels};

    for (int bad = 0; bad <= 1; bad++) {
        make_spec(&m, "holder", 48 * MIB, 0, &spec);
        submit(c, &spec, &holder);
        make_spec(&m, "queued", 48 * MIB, 0, &spec);
        submit(c, &spec, &queued);
        assert_int_equal(queued.state, TIDE_JOB_QUEUED);
        feed_images.name = (char *)(bad ? "pictures" : TIDE_MODEL_IMAGES);
        Tide__V1__TrainRequest first = TIDE__V1__TRAIN_REQUEST__INIT;
        first.job_id = queued.id;
        first.n_feeds = 2;
        first.feeds = feeds;
        first.finish = true;
        struct raw_train r = {.socket = d->socket_path, .first = &first};
        pthread_t thread;
        assert_int_equal(pthread_create(&thread, NULL, raw_train_main, &r), 0);
        tide_test_sleep_ms(300); /* most likely attached by now; admitted first works too */
        CHECK_OK(c, tide_client_finish(c, holder.id));
        pthread_join(thread, NULL);
        if (bad) {
            assert_int_equal(r.status, GRPC_STATUS_INVALID_ARGUMENT);
            if (!strstr(r.message, "feed \"pictures\": not a placeholder the job feeds"))
                fail_msg("the refusal does not name the feed: %s", r.message);
            assert_int_equal(r.results, 0);
            tide_test_wait_for_state(c, queued.id, TIDE_JOB_READY, &job, 50);
            assert_int_equal(job.steps, 0);
            CHECK_OK(c, tide_client_cancel(c, queued.id, NULL));
        } else {
            if (r.status != GRPC_STATUS_OK)
                fail_msg("the raw Train stream ended with %d: %s", r.status, r.message);
            assert_int_equal(r.results, 1);
            assert_int_equal(r.last_step, 1);
            CHECK_OK(c, tide_client_get(c, queued.id, &job));
            assert_int_equal(job.state, TIDE_JOB_DONE);
            assert_int_equal(job.steps, 1);
        }
    }
    free(images);
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
        cmocka_unit_test(test_two_big_trains_both_succeed),
        cmocka_unit_test(test_queue_positions),
        cmocka_unit_test(test_interrupt_while_queued),
        cmocka_unit_test(test_quiet_queued_job_parks_at_admission),
        cmocka_unit_test(test_quotas),
        cmocka_unit_test(test_quota_groups_malformed),
        cmocka_unit_test(test_priority_rules),
        cmocka_unit_test(test_preemption_resumes_bit_identical),
        cmocka_unit_test(test_preemption_on_its_device),
        cmocka_unit_test(test_train_stream_waits_in_queue),
        cmocka_unit_test(test_first_batch_of_a_queued_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
