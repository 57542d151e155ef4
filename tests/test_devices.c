/* SPDX-License-Identifier: MIT */
/*
 * test_devices.c: integration tests of a tided that serves several devices
 * (daemon/devices.c, the device threads of daemon/worker.c), on the real
 * tided driven by tidectl and libtide over its real Unix socket. The CPU
 * backend emulates the devices: `--cpu-devices 2 --device-memory 64M`.
 *
 *  - `tidectl --json status` lists both devices (index, name, total,
 *    reserved and used bytes), and the top-level device_* fields are their
 *    sums;
 *  - two 48 MiB jobs land on different devices (neither fits beside the
 *    other) and both train, at once, to the end; a third does not fit
 *    anywhere and is refused naming each device's numbers;
 *  - placement is best fit: a 16 MiB job joins the device with 16 MiB left
 *    rather than take the empty one, which then holds a 48 MiB job;
 *  - a job asking for a device gets it; one asking for device 5 of 2 is
 *    refused naming the count (libtide and `tidectl train --device 5`);
 *  - a parked job re-admitted while its device is busy resumes on the other
 *    device, its variables byte-equal to a job trained without a pause;
 *  - /metrics has the tide_device_* gauges per device (device="cpu:1") and
 *    a job's series labelled with its own device;
 *  - bad --cpu-devices and --devices values stop tided with exit status 2
 *    and a message naming the value and the limit.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "daemon_child.h"
#include "daemon_client.h"
#include "json-lines.h"

#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/models.h"

#define MIB (UINT64_C(1) << 20)

/* The longest a test waits for the daemon or a trainer (a hang, not a timing). */
#define DEADLINE_S 120.0

/* Two emulated devices of 64 MiB each. */
#define TWO_DEVICES "--cpu-devices", "2", "--device-memory", "64M"

/* ============================================================================
 * The daemon and the client
 * ========================================================================== */

/* Runs tidectl --socket S ARGS...; its exit code, stdout in *out (malloc'd), stderr in *err. */
static int run_tidectl(const struct tide_test_daemon *d, const char *const *args, char **out,
                       char **err)
{
    char *argv[32] = {(char *)d->tidectl, (char *)"--socket", (char *)d->socket_path};
    size_t n = 3;
    for (size_t i = 0; args[i] && n + 1 < sizeof(argv) / sizeof(argv[0]); i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    char out_path[600], err_path[600];
    snprintf(out_path, sizeof(out_path), "%s/tidectl.out", d->dir);
    snprintf(err_path, sizeof(err_path), "%s/tidectl.err", d->dir);
    int code = tide_test_run_to_files(argv, out_path, err_path);
    *out = tide_test_read_file(out_path);
    *err = tide_test_read_file(err_path);
    assert_non_null(*out);
    assert_non_null(*err);
    return code;
}

/* `tidectl --json status` as one JSON object (the caller puts it). */
static struct json_object *json_status(const struct tide_test_daemon *d)
{
    char *out, *err;
    static const char *const args[] = {"--json", "status", NULL};
    int code = run_tidectl(d, args, &out, &err);
    if (code != 0)
        fail_msg("tidectl --json status exited %d: %s", code, err);
    size_t n = 0;
    struct json_object *lines = tide_test_json_lines(out, &n);
    assert_int_equal(n, 1);
    struct json_object *status = json_object_get(tide_test_json_line(lines, 0));
    json_object_put(lines);
    free(out);
    free(err);
    return status;
}

/* ============================================================================
 * The model
 * ========================================================================== */

/* Submits spec; the job's id into id, its device returned. */
static uint32_t submit(tide_client *c, const struct tide_job_spec *spec, char *id)
{
    struct tide_job_info job;
    CHECK_OK(c, tide_client_submit(c, spec, &job));
    snprintf(id, TIDE_JOB_ID_MAX, "%s", job.id);
    return job.device;
}

/* Waits for a background tidectl; its exit code. */
static int wait_trainer(pid_t pid)
{
    int status = 0;
    double deadline = tide_test_now_s() + DEADLINE_S;
    while (waitpid(pid, &status, WNOHANG) != pid) {
        if (tide_test_now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fail_msg("tidectl train %d did not end within %.0f s", (int)pid, DEADLINE_S);
        }
        tide_test_sleep_ms(50);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The job named name in the daemon's list (fails when there is none). */
static void find_job(tide_client *c, const char *name, struct tide_job_info *out)
{
    struct tide_daemon_status s;
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    CHECK_OK(c, tide_client_status(c, &s, &jobs, &n));
    for (size_t i = 0; i < n; i++) {
        if (strcmp(jobs[i].name, name) == 0) {
            *out = jobs[i];
            free(jobs);
            return;
        }
    }
    free(jobs);
    fail_msg("no job named %s", name);
}

/* ============================================================================
 * Tests
 * ========================================================================== */

/* Two devices in `tidectl --json status`, each with its numbers; the old fields are the sums. */
static void test_status_lists_devices(void **state)
{
    (void)state;
    static const char *const extra[] = {TWO_DEVICES, NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("devices-status", extra);
    tide_client *c = tide_test_connect(d, 120000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    char id[TIDE_JOB_ID_MAX];
    tide_test_mlp_spec(&m, "on-one", 40 * MIB, &spec);
    uint32_t device = submit(c, &spec, id);
    assert_int_equal(device, 0); /* both empty: best fit ties, the lower index wins */
    struct tide_test_feeder f;
    tide_test_feeder_init(&f, &m, 5);
    tide_test_train_steps(c, id, &f, 2); /* a high water for used_bytes */
    tide_test_feeder_free(&f);

    struct json_object *status = json_status(d);
    struct json_object *devices = tide_test_json_array(status, "devices");
    assert_int_equal(json_object_array_length(devices), 2);
    for (size_t i = 0; i < 2; i++) {
        struct json_object *dev = json_object_array_get_idx(devices, i);
        static const char *const keys[] = {"index",      "name", "total_bytes", "reserved_bytes",
                                           "used_bytes", "jobs", NULL};
        tide_test_json_keys(dev, keys);
        assert_int_equal(tide_test_json_uint(dev, "index"), i);
        assert_string_equal(tide_test_json_string(dev, "name"), "cpu (emulated device)");
        assert_int_equal(tide_test_json_uint(dev, "total_bytes"), 64 * MIB);
        assert_int_equal(tide_test_json_uint(dev, "reserved_bytes"), i == 0 ? 40 * MIB : 0);
        assert_int_equal(tide_test_json_uint(dev, "jobs"), i == 0 ? 1 : 0);
        /* The job holds its session on device 0: its high water is in use there. */
        if (i == 0)
            assert_true(tide_test_json_uint(dev, "used_bytes") > 0);
        else
            assert_int_equal(tide_test_json_uint(dev, "used_bytes"), 0);
    }
    assert_int_equal(tide_test_json_uint(status, "device_total_bytes"), 128 * MIB);
    assert_int_equal(tide_test_json_uint(status, "device_reserved_bytes"), 40 * MIB);
    assert_int_equal(tide_test_json_uint(status, "max_job_budget_bytes"), 64 * MIB);
    /* The job's own record says where it is. */
    struct json_object *jobs = tide_test_json_array(status, "jobs");
    assert_int_equal(json_object_array_length(jobs), 1);
    assert_int_equal(tide_test_json_uint(json_object_array_get_idx(jobs, 0), "device"), 0);
    json_object_put(status);

    /* No budget above one device fits, though the two together have room. */
    tide_test_mlp_spec(&m, "too-big", 80 * MIB, &spec);
    struct tide_job_info job;
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED,
               "83886080 bytes", "largest job budget, 67108864 bytes");

    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/*
 * Two 48 MiB jobs go to different devices and train at once, each to its
 * end (two tidectl trains); while they hold their budgets a third is
 * refused naming both devices' numbers.
 */
static void test_two_jobs_two_devices(void **state)
{
    (void)state;
    static const char *const extra[] = {TWO_DEVICES, NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("devices-two", extra);
    tide_client *c = tide_test_connect(d, 120000);

    /* Held by libtide first: the placement and the refusal, without timing. */
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    char a[TIDE_JOB_ID_MAX], b[TIDE_JOB_ID_MAX];
    tide_test_mlp_spec(&m, "a", 48 * MIB, &spec);
    uint32_t device_a = submit(c, &spec, a);
    tide_test_mlp_spec(&m, "b", 48 * MIB, &spec);
    uint32_t device_b = submit(c, &spec, b);
    assert_int_not_equal(device_a, device_b);
    tide_test_mlp_spec(&m, "c", 48 * MIB, &spec);
    struct tide_job_info job;
    /* A third fits neither device now: it waits in the queue (#14 item 2), and is cancelled. */
    char queued[TIDE_JOB_ID_MAX];
    CHECK_OK(c, tide_client_submit(c, &spec, &job));
    assert_int_equal(job.state, TIDE_JOB_QUEUED);
    assert_int_equal(job.queue_position, 1);
    snprintf(queued, sizeof(queued), "%s", job.id);
    CHECK_OK(c, tide_client_cancel(c, queued, &job));
    assert_int_equal(job.state, TIDE_JOB_CANCELLED);
    /* Both train, on their own devices. */
    struct tide_test_feeder f;
    tide_test_feeder_init(&f, &m, 3);
    tide_test_train_steps(c, a, &f, 3);
    tide_test_train_steps(c, b, &f, 3);
    tide_test_feeder_free(&f);
    CHECK_OK(c, tide_client_cancel(c, a, NULL));
    CHECK_OK(c, tide_client_cancel(c, b, NULL));

    /*
     * Then two tidectl trains started at once: both run to their end, each
     * keeping its budget (--keep), so that the second is placed beside the
     * first however fast the first is.
     */
    static const char *const big[] = {"--budget", "48M", "--keep", NULL};
    pid_t p1 = tide_test_train_in_background_with(d, "first", 30, "first.log", big);
    pid_t p2 = tide_test_train_in_background_with(d, "second", 30, "second.log", big);
    assert_true(p1 > 0 && p2 > 0);
    int rc1 = wait_trainer(p1), rc2 = wait_trainer(p2);
    if (rc1 != 0 || rc2 != 0) {
        char path[600];
        snprintf(path, sizeof(path), "%s/first.log", d->dir);
        char *t1 = tide_test_read_file(path);
        snprintf(path, sizeof(path), "%s/second.log", d->dir);
        char *t2 = tide_test_read_file(path);
        fail_msg("tidectl train exited %d and %d:\n%s\n%s", rc1, rc2, t1 ? t1 : "", t2 ? t2 : "");
    }
    struct tide_job_info first, second;
    find_job(c, "first", &first);
    find_job(c, "second", &second);
    assert_int_equal(first.state, TIDE_JOB_READY);
    assert_int_equal(second.state, TIDE_JOB_READY);
    assert_int_equal(first.steps, 30);
    assert_int_equal(second.steps, 30);
    assert_int_not_equal(first.device, second.device);
    CHECK_OK(c, tide_client_cancel(c, first.id, NULL));
    CHECK_OK(c, tide_client_cancel(c, second.id, NULL));

    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_int_equal(s.n_devices, 2);
    assert_int_equal(s.devices[0].reserved_bytes, 0);
    assert_int_equal(s.devices[1].reserved_bytes, 0);
    assert_int_equal(s.device_reserved_bytes, 0);

    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/*
 * Best fit: a 16 MiB job joins the device a 48 MiB job left 16 MiB on,
 * and the empty device then takes another 48 MiB job. First fit by free
 * space (the emptiest device) would have split them and refused the last.
 */
static void test_best_fit(void **state)
{
    (void)state;
    static const char *const extra[] = {TWO_DEVICES, NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("devices-fit", extra);
    tide_client *c = tide_test_connect(d, 120000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    char id[TIDE_JOB_ID_MAX];
    tide_test_mlp_spec(&m, "big", 48 * MIB, &spec);
    assert_int_equal(submit(c, &spec, id), 0);
    tide_test_mlp_spec(&m, "small", 16 * MIB, &spec);
    assert_int_equal(submit(c, &spec, id), 0);
    tide_test_mlp_spec(&m, "big-too", 48 * MIB, &spec);
    assert_int_equal(submit(c, &spec, id), 1);

    struct tide_daemon_status s;
    CHECK_OK(c, tide_client_status(c, &s, NULL, NULL));
    assert_int_equal(s.devices[0].reserved_bytes, 64 * MIB);
    assert_int_equal(s.devices[0].jobs, 2);
    assert_int_equal(s.devices[1].reserved_bytes, 48 * MIB);
    assert_int_equal(s.devices[1].jobs, 1);
    assert_int_equal(s.device_reserved_bytes, 112 * MIB);

    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* A job asking for a device gets it, or is refused naming the device count or its room. */
static void test_asked_device(void **state)
{
    (void)state;
    static const char *const extra[] = {TWO_DEVICES, NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("devices-ask", extra);
    tide_client *c = tide_test_connect(d, 120000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    char id[TIDE_JOB_ID_MAX];
    struct tide_job_info job;

    tide_test_mlp_spec(&m, "on-one", 48 * MIB, &spec);
    spec.has_device = true;
    spec.device = 1;
    assert_int_equal(submit(c, &spec, id), 1);
    /* Device 1 has 16 MiB left: asking for it again does not fit, though device 0 is empty. */
    tide_test_mlp_spec(&m, "on-one-too", 48 * MIB, &spec);
    spec.has_device = true;
    spec.device = 1;
    char queued[TIDE_JOB_ID_MAX];
    CHECK_OK(c, tide_client_submit(c, &spec, &job));
    assert_int_equal(job.state, TIDE_JOB_QUEUED); /* for device 1, not placed on device 0 */
    snprintf(queued, sizeof(queued), "%s", job.id);
    CHECK_OK(c, tide_client_cancel(c, queued, &job));
    assert_int_equal(job.state, TIDE_JOB_CANCELLED);
    /* A budget larger than the asked device is refused at once: it would never leave the queue. */
    tide_test_mlp_spec(&m, "too-big", 65 * MIB, &spec);
    spec.has_device = true;
    spec.device = 1;
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_RESOURCE_EXHAUSTED,
               "is more than the largest job budget, 67108864 bytes (64 MiB)");
    tide_test_mlp_spec(&m, "on-one-too", 48 * MIB, &spec);
    spec.has_device = true;
    spec.device = 5;
    CHECK_CODE(c, tide_client_submit(c, &spec, &job), TIDE_CODE_INVALID_ARGUMENT,
               "device: 5 is not a device of this tided, which has 2 (0 to 1)");

    /* The same through tidectl train --device. */
    char *out, *err;
    static const char *const five[] = {"train",     "--model", "mlp", "--dataset",
                                       "synthetic", "--steps", "2",   "--no-eval",
                                       "--device",  "5",       NULL};
    assert_int_not_equal(run_tidectl(d, five, &out, &err), 0);
    if (!strstr(err, "device: 5 is not a device of this tided, which has 2"))
        fail_msg("tidectl train --device 5: %s", err);
    free(out);
    free(err);
    static const char *const zero[] = {"--json",    "train",    "--model", "mlp",       "--dataset",
                                       "synthetic", "--steps",  "2",       "--no-eval", "--device",
                                       "0",         "--budget", "16M",     "--batch",   "16",
                                       "--name",    "asked",    NULL};
    int code = run_tidectl(d, zero, &out, &err);
    if (code != 0)
        fail_msg("tidectl train --device 0 exited %d: %s", code, err);
    free(out);
    free(err);
    find_job(c, "asked", &job);
    assert_int_equal(job.device, 0);
    assert_int_equal(job.state, TIDE_JOB_DONE);
    /* A malformed index is tidectl's to refuse, before any call. */
    static const char *const bad[] = {"train", "--device", "-1", NULL};
    assert_int_equal(run_tidectl(d, bad, &out, &err), 2);
    if (!strstr(err, "--device wants a device index 0 to 4294967295, got \"-1\""))
        fail_msg("tidectl train --device -1: %s", err);
    free(out);
    free(err);

    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/*
 * A job parked on device 0 and re-admitted while a RUNNING job fills
 * device 0 resumes on device 1, and its variables after k + (N - k) steps
 * are byte-equal to those of a job trained N steps at once.
 */
static void test_park_moves_device_bit_identical(void **state)
{
    (void)state;
    static const char *const extra[] = {TWO_DEVICES, "--idle-timeout", "1", NULL};
    struct tide_test_daemon *d = tide_test_start_daemon("devices-park", extra);
    tide_client *c = tide_test_connect(d, 120000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    enum { N = 6, K = 2 };
    struct tide_test_feeder f;

    char straight[TIDE_JOB_ID_MAX], moved[TIDE_JOB_ID_MAX];
    tide_test_mlp_spec(&m, "straight", 48 * MIB, &spec);
    submit(c, &spec, straight);
    tide_test_feeder_init(&f, &m, 11);
    tide_test_train_steps(c, straight, &f, N);
    tide_test_feeder_free(&f);
    tide_variables *want = tide_test_read_variables(c, straight);
    CHECK_OK(c, tide_client_cancel(c, straight, NULL)); /* its budget back */

    tide_test_mlp_spec(&m, "moved", 48 * MIB, &spec);
    assert_int_equal(submit(c, &spec, moved), 0);
    tide_test_feeder_init(&f, &m, 11);
    tide_test_train_steps(c, moved, &f, K);
    struct tide_job_info job;
    double deadline = tide_test_now_s() + DEADLINE_S;
    for (;;) {
        CHECK_OK(c, tide_client_get(c, moved, &job));
        if (job.state == TIDE_JOB_PARKED)
            break;
        if (tide_test_now_s() > deadline)
            fail_msg("job %s is still %s, not PARKED", moved, tide_job_state_name(job.state));
        tide_test_sleep_ms(100);
    }
    assert_int_equal(job.device, 0);

    /* A trainer that stays RUNNING (never parked) takes device 0. */
    static const char *const busy[] = {"--budget", "48M", "--device", "0", NULL};
    pid_t blocker = tide_test_train_in_background_with(d, "blocker", 1000000, "blocker.log", busy);
    assert_true(blocker > 0);
    /* RUNNING on device 0 with a step done: its tidectl streams, and has its SIGINT handler
     * (a loaded machine can take seconds to get there, and a SIGINT before it kills tidectl
     * instead of stopping it with 130). */
    deadline = tide_test_now_s() + DEADLINE_S;
    for (;;) {
        struct tide_daemon_status s;
        struct tide_job_info *jobs = NULL;
        size_t n = 0;
        CHECK_OK(c, tide_client_status(c, &s, &jobs, &n));
        bool streaming = false;
        for (size_t i = 0; i < n; i++)
            streaming |= strcmp(jobs[i].name, "blocker") == 0 &&
                         jobs[i].state == TIDE_JOB_RUNNING && jobs[i].steps >= 1 &&
                         jobs[i].device == 0;
        free(jobs);
        if (s.devices[0].reserved_bytes == 48 * MIB && streaming)
            break;
        if (tide_test_now_s() > deadline) {
            kill(blocker, SIGKILL);
            fail_msg("the blocker did not train on device 0");
        }
        tide_test_sleep_ms(100);
    }

    tide_test_train_steps(c, moved, &f, N - K);
    tide_test_feeder_free(&f);
    CHECK_OK(c, tide_client_get(c, moved, &job));
    assert_int_equal(job.device, 1);
    assert_int_equal(job.steps, N);
    tide_variables *got = tide_test_read_variables(c, moved);
    tide_test_assert_same_variables(want, got, "after moving to another device");
    tide_variables_free(want);
    tide_variables_free(got);

    assert_int_equal(tide_test_stop_trainer(blocker), 130);
    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/*
 * The value of the one sample of name in a /metrics scrape (http_get.py's
 * "samples": [[name, {labels}, value], ...]) whose device label is device;
 * fails unless there is exactly one.
 */
static double device_sample(struct json_object *scrape, const char *name, const char *device)
{
    struct json_object *samples = tide_test_json_array(scrape, "samples");
    double value = NAN;
    int found = 0;
    for (size_t i = 0; i < json_object_array_length(samples); i++) {
        struct json_object *sample = json_object_array_get_idx(samples, i);
        struct json_object *label;
        if (strcmp(json_object_get_string(json_object_array_get_idx(sample, 0)), name) != 0 ||
            !json_object_object_get_ex(json_object_array_get_idx(sample, 1), "device", &label) ||
            strcmp(json_object_get_string(label), device) != 0)
            continue;
        found++;
        value = json_object_get_double(json_object_array_get_idx(sample, 2));
    }
    if (found != 1)
        fail_msg("%d samples of %s{device=\"%s\"}, want 1", found, name, device);
    return value;
}

/* /metrics: the tide_device_* gauges per device, and a job's series on its own device. */
static void test_metrics_per_device(void **state)
{
    (void)state;
    if (!tide_test_python()) {
        fprintf(stderr, "skipped: python3 with prometheus_client is needed to scrape\n");
        skip();
    }
    struct tide_test_daemon *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    if (!tide_test_daemon_init(d, "devices-metrics")) {
        free(d);
        skip();
    }
    d->http_port = tide_test_free_port();
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->http_port);
    const char *extra[] = {TWO_DEVICES, "--metrics-listen", listen, NULL};
    if (!tide_test_daemon_start(d, extra)) {
        tide_test_daemon_finish(d);
        free(d);
        fail_msg("tided did not start");
    }
    tide_client *c = tide_test_connect(d, 120000);
    struct tide_test_mlp m;
    tide_test_mlp_build(&m);
    struct tide_job_spec spec;
    char id[TIDE_JOB_ID_MAX];
    tide_test_mlp_spec(&m, "on-one", 48 * MIB, &spec);
    spec.has_device = true;
    spec.device = 1;
    assert_int_equal(submit(c, &spec, id), 1);

    char *text = tide_test_http_get(d, "metrics", "/metrics", NULL, NULL);
    if (!text)
        fail_msg("GET /metrics failed (see above)");
    struct json_object *scrape = json_tokener_parse(text);
    assert_non_null(scrape);
    free(text);
    assert_true(device_sample(scrape, "tide_device_total_bytes", "cpu:0") == (double)(64 * MIB));
    assert_true(device_sample(scrape, "tide_device_total_bytes", "cpu:1") == (double)(64 * MIB));
    assert_true(device_sample(scrape, "tide_device_reserved_bytes", "cpu:0") == 0.0);
    assert_true(device_sample(scrape, "tide_device_reserved_bytes", "cpu:1") == (double)(48 * MIB));
    assert_true(device_sample(scrape, "tide_job_budget_bytes", "cpu:1") == (double)(48 * MIB));
    json_object_put(scrape);

    tide_client_free(c);
    free(m.bytes);
    tide_test_stop_daemon(d);
}

/* Bad --cpu-devices and --devices values: exit 2, naming the value and the limit. */
static void test_bad_device_settings(void **state)
{
    (void)state;
    struct tide_test_daemon *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    if (!tide_test_daemon_init(d, "devices-bad")) {
        free(d);
        skip();
    }
    static const struct {
        const char *flag, *value, *needle;
    } cases[] = {
        {"--cpu-devices", "0", "cpu-devices: want an integer between 1 and 64, got \"0\""},
        {"--cpu-devices", "-1", "cpu-devices: want an integer between 1 and 64, got \"-1\""},
        {"--cpu-devices", "1000", "cpu-devices: want an integer between 1 and 64, got \"1000\""},
        {"--cpu-devices", "x", "cpu-devices: want an integer between 1 and 64, got \"x\""},
        {"--devices", "0,x",
         "devices = 0,x: \"x\" is not a device number: want integers between 0 and 63"},
        {"--devices", "64", "devices = 64: \"64\" is not a device number"},
        {"--devices", "1,1", "devices = 1,1: device 1 is listed twice"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *extra[] = {cases[i].flag, cases[i].value, NULL};
        char err[2048];
        int code = tide_test_daemon_run_to_exit(d, extra, err, sizeof(err));
        if (code != 2 || !strstr(err, cases[i].needle))
            fail_msg("%s %s: exit %d, stderr \"%s\"; want 2 and \"%s\"", cases[i].flag,
                     cases[i].value, code, err, cases[i].needle);
    }
    tide_test_daemon_finish(d);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_lists_devices),
        cmocka_unit_test(test_two_jobs_two_devices),
        cmocka_unit_test(test_best_fit),
        cmocka_unit_test(test_asked_device),
        cmocka_unit_test(test_park_moves_device_bit_identical),
        cmocka_unit_test(test_metrics_per_device),
        cmocka_unit_test(test_bad_device_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
