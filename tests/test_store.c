/* SPDX-License-Identifier: MIT */
/*
 * test_store.c: the state directory (daemon/store.c) — atomic writes that
 * leave no temporary file, message round trips, missing, corrupt and
 * truncated files reported by path, checkpoint rotation, directory removal,
 * the job records that tided lists at start (tided_jobs_new), and the lock
 * that keeps a second daemon off a state directory in use.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/jobs-impl.h"
#include "daemon/jobs.h"
#include "daemon/store.h"
#include "tide/v1/tide.pb-c.h"

/* The daemon's callbacks that the job layer calls (main.c's, not linked here). */
void tided_daemon_jobs_quiet(struct tided_daemon *daemon)
{
    (void)daemon;
}

void tided_daemon_server_finished(struct tided_daemon *daemon)
{
    (void)daemon;
}

void tided_daemon_notify_status(struct tided_daemon *daemon)
{
    (void)daemon;
}

/* A fresh temporary directory per test; removed (with its files) after. */
static int setup_dir(void **state)
{
    char tmpl[] = "/tmp/test_store_XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir)
        return -1;
    *state = strdup(dir);
    return *state ? 0 : -1;
}

static int teardown_dir(void **state)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", (char *)*state);
    int rc = system(cmd);
    free(*state);
    return rc == 0 ? 0 : -1;
}

/* The names in dir, sorted and joined by spaces, into buf. */
static const char *listing(const char *dir, char *buf, size_t size)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            size_t used = strlen(buf);
            snprintf(buf + used, size - used, "%s%s", used ? " " : "", names[i]->d_name);
        }
        free(names[i]);
    }
    free(names);
    return buf;
}

static void write_raw(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void test_write_read(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    char buf[256];
    assert_int_equal(tided_store_write(dir, "a.bin", "hello", 5, &err), TIDE_OK);
    /* Replacing leaves the new content and no NAME.tmp behind. */
    assert_int_equal(tided_store_write(dir, "a.bin", "goodbye", 7, &err), TIDE_OK);
    assert_string_equal(listing(dir, buf, sizeof(buf)), "a.bin");
    char *path = tided_path_join(dir, "a.bin");
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(tided_store_read(path, &data, &len, &err), TIDE_OK);
    assert_int_equal(len, 7);
    assert_memory_equal(data, "goodbye", 7);
    free(data);
    free(path);

    path = tided_path_join(dir, "missing.bin");
    assert_int_equal(tided_store_read(path, &data, &len, &err), TIDE_NOT_FOUND);
    assert_non_null(strstr(err.message, path));
    free(path);
}

static void test_mkdirs(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    char *deep = tided_path_join(dir, "a/b/c");
    assert_int_equal(tided_store_mkdirs(deep, &err), TIDE_OK);
    assert_int_equal(tided_store_mkdirs(deep, &err), TIDE_OK); /* existing ones are kept */
    struct stat sb;
    assert_int_equal(stat(deep, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0700);
    free(deep);
    /* A file in the way is an error naming it. */
    assert_int_equal(tided_store_write(dir, "file", "x", 1, &err), TIDE_OK);
    char *under = tided_path_join(dir, "file/sub");
    assert_int_not_equal(tided_store_mkdirs(under, &err), TIDE_OK);
    assert_non_null(strstr(err.message, "file"));
    free(under);
}

/* A job record (info.pb) survives a write and a read unchanged. */
static void test_message_round_trip(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    Tide__V1__JobInfo info = TIDE__V1__JOB_INFO__INIT;
    info.id = (char *)"j-0123456789abcdef";
    info.name = (char *)"mnist";
    info.owner_uid = 1000;
    info.state = TIDE__V1__JOB_STATE__JOB_DONE;
    info.steps = 77;
    info.last_loss = 0.25f;
    info.device_budget_bytes = 1ull << 30;
    info.message = (char *)"stopped";
    uint64_t bytes = 0;
    assert_int_equal(tided_store_write_message(dir, "info.pb", &info.base, &bytes, &err), TIDE_OK);
    assert_int_equal(bytes, tide__v1__job_info__get_packed_size(&info));
    char *path = tided_path_join(dir, "info.pb");
    Tide__V1__JobInfo *back =
        (Tide__V1__JobInfo *)tided_store_read_message(path, &tide__v1__job_info__descriptor, &err);
    assert_non_null(back);
    assert_string_equal(back->id, info.id);
    assert_string_equal(back->name, "mnist");
    assert_int_equal(back->owner_uid, 1000);
    assert_int_equal(back->state, TIDE__V1__JOB_STATE__JOB_DONE);
    assert_int_equal(back->steps, 77);
    assert_true(back->last_loss == 0.25f);
    assert_int_equal(back->device_budget_bytes, 1ull << 30);
    assert_string_equal(back->message, "stopped");
    tide__v1__job_info__free_unpacked(back, NULL);
    free(path);
}

/* Corrupt and truncated files give an error naming the file, never a crash. */
static void test_corrupt_and_truncated(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    Tide__V1__JobInfo info = TIDE__V1__JOB_INFO__INIT;
    info.id = (char *)"j-0123456789abcdef";
    info.name = (char *)"a name long enough to be cut in the middle";
    assert_int_equal(tided_store_write_message(dir, "info.pb", &info.base, NULL, &err), TIDE_OK);
    char *path = tided_path_join(dir, "info.pb");
    uint8_t *data = NULL;
    size_t len = 0;
    assert_int_equal(tided_store_read(path, &data, &len, &err), TIDE_OK);
    write_raw(path, data, len / 2); /* truncated inside the name */
    memset(&err, 0, sizeof(err));
    assert_null(tided_store_read_message(path, &tide__v1__job_info__descriptor, &err));
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "tide.v1.JobInfo"));

    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02};
    write_raw(path, garbage, sizeof(garbage));
    memset(&err, 0, sizeof(err));
    assert_null(tided_store_read_message(path, &tide__v1__job_info__descriptor, &err));
    assert_non_null(strstr(err.message, path));
    free(data);
    free(path);

    path = tided_path_join(dir, "absent.pb");
    memset(&err, 0, sizeof(err));
    assert_null(tided_store_read_message(path, &tide__v1__job_info__descriptor, &err));
    assert_non_null(strstr(err.message, path));
    free(path);
}

static void write_checkpoint(const char *dir, uint64_t step)
{
    struct tide_error err = {0};
    char name[64];
    Tide__V1__ReadVariablesResponse ck = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
    ck.step = step;
    snprintf(name, sizeof(name), "checkpoint-%llu.pb", (unsigned long long)step);
    assert_int_equal(tided_store_write_checkpoint(dir, name, &ck, NULL, &err), TIDE_OK);
    enum tide_status st = tided_store_link(dir, name, "checkpoint.pb", &err);
    if (st == TIDE_UNSUPPORTED)
        st = tided_store_write_checkpoint(dir, "checkpoint.pb", &ck, NULL, &err);
    assert_int_equal(st, TIDE_OK);
}

/* A checkpoint of one variable, w = {1, 2, 3} as float32 [3], with data_bytes of data. */
static void write_one_variable(const char *dir, const char *name, uint64_t step, size_t data_bytes)
{
    static const float values[4] = {1, 2, 3, 4};
    int64_t dims[1] = {3};
    Tide__V1__TensorShape shape = TIDE__V1__TENSOR_SHAPE__INIT;
    shape.n_dims = 1;
    shape.dims = dims;
    Tide__V1__Tensor tensor = TIDE__V1__TENSOR__INIT;
    tensor.dtype = TIDE__V1__DATA_TYPE__DT_FLOAT32;
    tensor.shape = &shape;
    tensor.data.data = (uint8_t *)values;
    tensor.data.len = data_bytes;
    Tide__V1__NamedTensor nt = TIDE__V1__NAMED_TENSOR__INIT;
    nt.name = (char *)"w";
    nt.tensor = &tensor;
    Tide__V1__NamedTensor *vars[1] = {&nt};
    Tide__V1__ReadVariablesResponse ck = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
    ck.step = step;
    ck.n_variables = 1;
    ck.variables = vars;
    struct tide_error err = {0};
    uint64_t bytes = 0;
    assert_int_equal(tided_store_write_checkpoint(dir, name, &ck, &bytes, &err), TIDE_OK);
    assert_int_equal(bytes, TIDED_CHECKPOINT_HEADER_BYTES +
                                tide__v1__read_variables_response__get_packed_size(&ck));
}

/*
 * Reading path must fail with a message containing text (and the path);
 * header_whole says whether the header alone passes (tided_store_peek_step).
 */
static void expect_bad_checkpoint(const char *path, const char *text, bool header_whole)
{
    struct tide_error err = {0};
    Tide__V1__ReadVariablesResponse *ck = tided_store_read_checkpoint(path, &err);
    if (ck)
        fail_msg("%s was read although it should fail with \"%s\"", path, text);
    if (!strstr(err.message, text) || !strstr(err.message, path))
        fail_msg("want \"%s\" and the path in \"%s\"", text, err.message);
    uint64_t step;
    assert_int_equal(tided_store_peek_step(path, &step), header_whole ? 0 : -1);
}

/*
 * The checkpoint format: a round trip, then every way a file can be damaged
 * is refused naming the file and the problem — never read as "0 variables".
 */
static void test_checkpoint_format(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    write_one_variable(dir, "good.pb", 7, 12);
    char *path = tided_path_join(dir, "good.pb");
    Tide__V1__ReadVariablesResponse *ck = tided_store_read_checkpoint(path, &err);
    assert_non_null(ck);
    assert_int_equal(ck->step, 7);
    assert_int_equal(ck->n_variables, 1);
    assert_string_equal(ck->variables[0]->name, "w");
    assert_int_equal(ck->variables[0]->tensor->data.len, 12);
    assert_memory_equal(ck->variables[0]->tensor->data.data, ((float[]){1, 2, 3}), 12);
    tide__v1__read_variables_response__free_unpacked(ck, NULL);
    uint64_t step = 0;
    assert_int_equal(tided_store_peek_step(path, &step), 0);
    assert_int_equal(step, 7);

    uint8_t *good = NULL;
    size_t len = 0;
    assert_int_equal(tided_store_read(path, &good, &len, &err), TIDE_OK);
    assert_memory_equal(good, "TIDECKPT", 8);
    char *bad = tided_path_join(dir, "bad.pb");

    write_raw(bad, "", 0);
    expect_bad_checkpoint(bad, "is empty (0 bytes)", false);
    write_raw(bad, good, 20);
    expect_bad_checkpoint(bad, "is truncated: 20 bytes, shorter than its 40-byte header", false);
    write_raw(bad, good, len - 5);
    char text[160];
    snprintf(text, sizeof(text), "is truncated: its header promises %zu bytes of variables, the "
                                 "file holds %zu",
             len - 40, len - 45);
    expect_bad_checkpoint(bad, text, false);

    uint8_t *copy = malloc(len + 1);
    assert_non_null(copy);
    memcpy(copy, good, len);
    copy[len] = 0;
    write_raw(bad, copy, len + 1);
    expect_bad_checkpoint(bad, "is longer than written", false);

    copy[len - 3] ^= 0x40; /* a flipped bit inside w's data */
    write_raw(bad, copy, len);
    expect_bad_checkpoint(bad, "is corrupted: its variables hash to", true);
    copy[len - 3] ^= 0x40;

    copy[8] = 9; /* format version 9 */
    write_raw(bad, copy, len);
    expect_bad_checkpoint(bad, "has format version 9; this tided reads version 1", false);
    copy[8] = 1;

    /* What tided wrote before the header existed: a bare message. */
    write_raw(bad, copy + 40, len - 40);
    expect_bad_checkpoint(bad, "is not a tide checkpoint: it does not start with \"TIDECKPT\"", false);
    free(copy);

    /* Whole and checksummed, but the tensor's bytes do not match its shape. */
    write_one_variable(dir, "bad.pb", 7, 16);
    expect_bad_checkpoint(bad, "variable \"w\": tensor of shape [3] float32 needs 12 bytes, "
                               "got 16", true);

    free(bad);
    free(good);
    free(path);
}

/* checkpoint.pb follows the newest checkpoint-<step>.pb; rotation keeps the newest `keep`. */
static void test_checkpoint_rotation(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    char buf[512];
    for (uint64_t step = 10; step <= 50; step += 10)
        write_checkpoint(dir, step);
    char *latest = tided_path_join(dir, "checkpoint.pb");
    uint64_t step = 0;
    assert_int_equal(tided_store_peek_step(latest, &step), 0);
    assert_int_equal(step, 50);

    assert_int_equal(tided_store_prune_checkpoints(dir, 2, &err), TIDE_OK);
    assert_string_equal(listing(dir, buf, sizeof(buf)),
                        "checkpoint-40.pb checkpoint-50.pb checkpoint.pb");
    /* keep = 0 counts as 2 (the previous good one stays); other files are left alone. */
    assert_int_equal(tided_store_write(dir, "info.pb", "x", 1, &err), TIDE_OK);
    assert_int_equal(tided_store_prune_checkpoints(dir, 0, &err), TIDE_OK);
    assert_string_equal(listing(dir, buf, sizeof(buf)),
                        "checkpoint-40.pb checkpoint-50.pb checkpoint.pb info.pb");
    assert_int_equal(tided_store_prune_checkpoints(dir, 1, &err), TIDE_OK);
    assert_string_equal(listing(dir, buf, sizeof(buf)), "checkpoint-50.pb checkpoint.pb info.pb");
    assert_int_equal(tided_store_peek_step(latest, &step), 0);
    assert_int_equal(step, 50);
    free(latest);

    char *missing = tided_path_join(dir, "nothing.pb");
    assert_int_equal(tided_store_peek_step(missing, &step), -1);
    free(missing);
}

static void test_remove_dir(void **state)
{
    const char *dir = *state;
    struct tide_error err = {0};
    char buf[256];
    char *job = tided_path_join(dir, "j-0000000000000001");
    assert_int_equal(tided_store_mkdirs(job, &err), TIDE_OK);
    assert_int_equal(tided_store_write(job, "spec.pb", "s", 1, &err), TIDE_OK);
    assert_int_equal(tided_store_write(job, "info.pb", "i", 1, &err), TIDE_OK);
    write_checkpoint(job, 3);
    write_checkpoint(job, 4);
    /* checkpoint.pb is a hard link to checkpoint-4.pb: its bytes count once. */
    assert_int_equal(tided_store_link(job, "checkpoint-4.pb", "checkpoint.pb", &err), TIDE_OK);
    uint64_t want = 2, bytes = 0;
    const char *files[] = {"checkpoint-3.pb", "checkpoint-4.pb"};
    for (size_t i = 0; i < 2; i++) {
        char *path = tided_path_join(job, files[i]);
        struct stat sb;
        assert_int_equal(stat(path, &sb), 0);
        want += (uint64_t)sb.st_size;
        free(path);
    }
    assert_int_equal(tided_store_remove_dir(job, &bytes, &err), TIDE_OK);
    assert_string_equal(listing(dir, buf, sizeof(buf)), "");
    assert_int_equal(bytes, want);
    /* A directory that is gone already: nothing to do, nothing freed. */
    assert_int_equal(tided_store_remove_dir(job, &bytes, &err), TIDE_OK);
    assert_int_equal(bytes, 0);
    free(job);
}

/* Writes <state>/jobs/<id>/info.pb for a job of an earlier run. */
static void write_job(const char *jobs_dir, const char *id, Tide__V1__JobState state,
                      int64_t created)
{
    struct tide_error err = {0};
    char *dir = tided_path_join(jobs_dir, id);
    assert_int_equal(tided_store_mkdirs(dir, &err), TIDE_OK);
    Tide__V1__JobInfo info = TIDE__V1__JOB_INFO__INIT;
    info.id = (char *)id;
    info.name = (char *)"earlier";
    info.owner_uid = 42;
    info.state = state;
    info.steps = 9;
    info.created_us = created;
    assert_int_equal(tided_store_write_message(dir, "info.pb", &info.base, NULL, &err), TIDE_OK);
    free(dir);
}

/*
 * At start the job records of earlier runs are listed in creation order: a
 * job that was running when tided died is FAILED, naming its checkpoint;
 * unreadable records and names that are not job ids are skipped.
 */
static void test_job_records(void **state)
{
    const char *dir = *state;
    char *jobs_dir = tided_path_join(dir, "jobs");
    write_job(jobs_dir, "j-00000000000000bb", TIDE__V1__JOB_STATE__JOB_DONE, 200);
    write_job(jobs_dir, "j-00000000000000aa", TIDE__V1__JOB_STATE__JOB_RUNNING, 100);
    char *running = tided_path_join(jobs_dir, "j-00000000000000aa");
    write_checkpoint(running, 7);
    write_job(jobs_dir, "not-a-job", TIDE__V1__JOB_STATE__JOB_DONE, 50);
    char *corrupt = tided_path_join(jobs_dir, "j-00000000000000cc");
    struct tide_error err = {0};
    assert_int_equal(tided_store_mkdirs(corrupt, &err), TIDE_OK);
    assert_int_equal(tided_store_write(corrupt, "info.pb", "\xff\xff\xff", 3, &err), TIDE_OK);

    struct tided_daemon d = {0};
    d.config.state_dir = (char *)dir;
    char error[256] = "";
    struct tided_jobs *jobs = tided_jobs_new(&d, error, sizeof(error));
    assert_non_null(jobs);
    d.jobs = jobs;
    assert_int_equal(jobs->n_jobs, 2);
    struct job *a = jobs->jobs[0], *b = jobs->jobs[1];
    assert_string_equal(a->id, "j-00000000000000aa");
    assert_string_equal(b->id, "j-00000000000000bb");
    assert_int_equal(a->state, TIDE__V1__JOB_STATE__JOB_FAILED);
    assert_true(a->has_checkpoint);
    assert_int_equal(a->last_checkpoint_step, 7);
    assert_non_null(strstr(a->message, "tided stopped while the job was RUNNING; its last "
                                       "checkpoint is at step 7"));
    assert_int_equal(b->state, TIDE__V1__JOB_STATE__JOB_DONE);
    assert_false(b->has_checkpoint);
    assert_int_equal(b->owner, 42);
    assert_int_equal(b->steps, 9);
    assert_string_equal(b->name, "earlier");
    tided_jobs_free(jobs);
    free(corrupt);
    free(running);
    free(jobs_dir);
}

/* One holder at a time; the refusal names the holder's pid; a closed hold frees the directory. */
static void test_state_dir_lock(void **state)
{
    const char *dir = *state;
    char error[512] = "";
    int fd = tided_store_lock(dir, error, sizeof(error));
    assert_true(fd >= 0);

    char *path = tided_path_join(dir, "tided.lock");
    char content[32] = "", expected[64];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(content, sizeof(content), f));
    fclose(f);
    snprintf(expected, sizeof(expected), "%ld\n", (long)getpid());
    assert_string_equal(content, expected);

    /* flock conflicts between open file descriptions, also within one process. */
    assert_int_equal(tided_store_lock(dir, error, sizeof(error)), -1);
    snprintf(expected, sizeof(expected), "is in use by another tided (pid %ld, holding %s)",
             (long)getpid(), path);
    assert_non_null(strstr(error, expected));

    /* The job layer takes the lock before it reads any job record. */
    struct tided_daemon d = {0};
    d.config.state_dir = (char *)dir;
    error[0] = '\0';
    assert_null(tided_jobs_new(&d, error, sizeof(error)));
    assert_non_null(strstr(error, "is in use by another tided"));

    close(fd);
    struct tided_jobs *jobs = tided_jobs_new(&d, error, sizeof(error));
    assert_non_null(jobs);
    assert_int_equal(tided_store_lock(dir, error, sizeof(error)), -1);
    tided_jobs_free(jobs); /* releases the directory */
    fd = tided_store_lock(dir, error, sizeof(error));
    assert_true(fd >= 0);
    close(fd);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_read, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_mkdirs, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_message_round_trip, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_corrupt_and_truncated, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_checkpoint_format, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_checkpoint_rotation, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_remove_dir, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_job_records, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_state_dir_lock, setup_dir, teardown_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
