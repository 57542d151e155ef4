/* SPDX-License-Identifier: MIT */
/*
 * test_config.c: tided's option table (daemon/config.c) — defaults, the
 * bounds of every numeric descriptor with errors that name the key and the
 * limit, bad values, unknown keys, the configuration file (with its line
 * numbers) and the command line, their precedence, and SIGHUP reload.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/config.h"

/* A configuration file in a temporary directory; the path is malloc'd. */
static char *write_file(const char *text)
{
    char tmpl[] = "/tmp/test_config_XXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    return strdup(tmpl);
}

/*
 * Loads flags (NULL-terminated) after "tided --config FILE", FILE holding
 * file_text, so that no /etc/tide/tided.conf of the machine is read.
 */
static enum tided_config_result load(struct tided_config *c, char *error, size_t size,
                                     const char *file_text, ...)
{
    char *path = write_file(file_text ? file_text : "");
    char *argv[32] = {"tided", "--config", path};
    int argc = 3;
    va_list args;
    va_start(args, file_text);
    const char *a;
    while ((a = va_arg(args, const char *)) != NULL && argc < 31)
        argv[argc++] = (char *)a;
    va_end(args);
    error[0] = '\0';
    enum tided_config_result r = tided_config_load(argc, argv, c, error, size);
    unlink(path);
    free(path);
    return r;
}

/* Expects an error that contains every given fragment (NULL-terminated). */
static void expect_error(const char *file_text, const char *flag, const char *fragment, ...)
{
    struct tided_config c;
    char error[512];
    enum tided_config_result r = load(&c, error, sizeof(error), file_text, flag, NULL);
    if (r == TIDED_CONFIG_OK)
        tided_config_release(&c);
    assert_int_equal(r, TIDED_CONFIG_ERROR);
    va_list args;
    va_start(args, fragment);
    for (const char *f = fragment; f; f = va_arg(args, const char *)) {
        if (!strstr(error, f))
            fail_msg("error \"%s\" lacks \"%s\"", error, f);
    }
    va_end(args);
}

static void test_defaults(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    assert_int_equal(load(&c, error, sizeof(error), "", NULL), TIDED_CONFIG_OK);
    assert_string_equal(c.socket, "/run/tide/tided.sock");
    assert_string_equal(c.state_dir, "/var/lib/tide");
    assert_string_equal(c.backend, "auto");
    assert_string_equal(c.log_level, "info");
    assert_string_equal(c.socket_group, "");
    assert_string_equal(c.listen, "");
    assert_string_equal(c.metrics_listen, "");
    assert_int_equal(c.device_memory, 4ull << 30);
    assert_int_equal(c.default_budget, 1ull << 30);
    assert_int_equal(c.max_budget, 0);
    assert_int_equal(c.host_pool, 0);
    assert_int_equal(c.host_budget, 0);
    assert_int_equal(c.threads, 0);
    assert_int_equal(c.max_message, 256ull << 20);
    assert_int_equal(c.max_graph_nodes, 1000000);
    assert_int_equal(c.max_tensor_bytes, 16ull << 30);
    assert_int_equal(c.stall_timeout, 600);
    assert_int_equal(c.idle_timeout, 600);
    assert_int_equal(c.retain_ended, 7 * 86400);
    assert_non_null(c.config_file);
    tided_config_release(&c);
}

/* Each numeric descriptor: its bounds pass, one past them fails naming the key and the limits. */
static void test_bounds(void **state)
{
    (void)state;
    static const struct {
        const char *key, *lowest, *below, *highest, *above, *lo_text, *hi_text;
    } rows[] = {
        {"device-memory", "16M", "15M", "64T", "65T", "16 MiB", "64 TiB"},
        {"default-budget", "1M", "1023K", "64T", "65T", "1 MiB", "64 TiB"},
        {"max-budget", "0", NULL, "64T", "65T", "0 bytes", "64 TiB"},
        {"host-pool", "0", NULL, "64T", "65T", "0 bytes", "64 TiB"},
        {"host-budget", "0", NULL, "64T", "65T", "0 bytes", "64 TiB"},
        {"threads", "0", NULL, "1024", "1025", "0", "1024"},
        {"max-message", "1M", "1023K", "2147483647", "2G", "1 MiB", "and "},
        {"max-graph-nodes", "1", "0", "4294967295", "4294967296", "1", "4294967295"},
        {"max-tensor-bytes", "1K", "1023", "64T", "65T", "1 KiB", "64 TiB"},
        {"stall-timeout", "10", "9", "86400", "86401", "10", "86400"},
        {"idle-timeout", "0", NULL, "2592000", "2592001", "0", "2592000"},
        {"retain-ended", "0", NULL, "315360000", "315360001", "0", "315360000"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char flag[128], error[512];
        struct tided_config c;
        const char *ok[] = {rows[i].lowest, rows[i].highest};
        for (int k = 0; k < 2; k++) {
            snprintf(flag, sizeof(flag), "--%s=%s", rows[i].key, ok[k]);
            /* default-budget may not exceed max-budget: give the largest one room. */
            bool own = strcmp(rows[i].key, "default-budget") == 0;
            enum tided_config_result r =
                load(&c, error, sizeof(error), "", flag, own ? NULL : "--default-budget=1M", NULL);
            if (r != TIDED_CONFIG_OK)
                fail_msg("%s: %s", flag, error);
            tided_config_release(&c);
        }
        const char *bad[] = {rows[i].below, rows[i].above};
        for (int k = 0; k < 2; k++) {
            if (!bad[k])
                continue;
            char key[64];
            snprintf(flag, sizeof(flag), "--%s=%s", rows[i].key, bad[k]);
            snprintf(key, sizeof(key), "--%s: want ", rows[i].key);
            expect_error("", flag, key, rows[i].lo_text, rows[i].hi_text, bad[k], NULL);
        }
    }
}

static void test_bad_values(void **state)
{
    (void)state;
    expect_error("", "--device-memory=5Q", "--device-memory: want bytes between 16 MiB and 64 TiB",
                 "got \"5Q\"", NULL);
    expect_error("", "--threads=-1", "--threads: want an integer between 0 and 1024", NULL);
    expect_error("", "--threads=4x", "--threads", "got \"4x\"", NULL);
    expect_error("", "--backend=tpu", "--backend: want one of cpu, cuda, auto", "got \"tpu\"",
                 NULL);
    expect_error("", "--log-level=loud", "--log-level: want one of", "debug", NULL);
    expect_error("", "--state-dir=", "--state-dir: want a non-empty path", NULL);
    expect_error("", "--foreground=yes", "--foreground takes no value", NULL);
    expect_error("", "--socket", "--socket needs a value (PATH)", NULL);
    expect_error("", "stray", "unexpected argument \"stray\"", NULL);
    /* Durations are whole seconds: a unit suffix is refused, naming the key. */
    expect_error("", "--idle-timeout=10m", "--idle-timeout: want an integer between 0 and 2592000",
                 "got \"10m\"", NULL);
    expect_error("idle-timeout = -1\n", NULL, ":1: idle-timeout: want an integer", "got \"-1\"",
                 NULL);
    expect_error("", "--retain-ended=7d", "--retain-ended: want an integer between 0 and 315360000",
                 "got \"7d\"", NULL);
}

static void test_unknown_keys(void **state)
{
    (void)state;
    expect_error("", "--no-such-option=1", "unknown option \"--no-such-option\"", NULL);
    expect_error("# a comment\n\nno-such-key = 3\n", NULL, ":3: unknown key \"no-such-key\"", NULL);
}

static void test_file(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    const char *text = "# tided.conf\n"
                       "socket = /tmp/tided-test.sock   # trailing comment\n"
                       "\n"
                       "  device-memory = 2G\n"
                       "threads=3\n"
                       "log-level = debug\n";
    assert_int_equal(load(&c, error, sizeof(error), text, NULL), TIDED_CONFIG_OK);
    assert_string_equal(c.socket, "/tmp/tided-test.sock");
    assert_int_equal(c.device_memory, 2ull << 30);
    assert_int_equal(c.threads, 3);
    assert_string_equal(c.log_level, "debug");
    tided_config_release(&c);

    /* Errors in the file name the file and the line, and the key without "--". */
    expect_error("threads = 1\nthreads = 5000\n", NULL,
                 ":2: threads: want an integer between 0 "
                 "and 1024, got \"5000\"",
                 NULL);
    expect_error("socket /tmp/x\n", NULL, ":1: want \"key = value\"", NULL);

    char *argv[] = {"tided", "--config", "/nonexistent/tided.conf", NULL};
    assert_int_equal(tided_config_load(3, argv, &c, error, sizeof(error)), TIDED_CONFIG_ERROR);
    assert_non_null(strstr(error, "/nonexistent/tided.conf: cannot open the configuration file"));
}

/* Defaults, then the file, then the flags. */
static void test_precedence(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    assert_int_equal(
        load(&c, error, sizeof(error), "threads = 3\nbackend = cpu\n", "--threads", "7", NULL),
        TIDED_CONFIG_OK);
    assert_int_equal(c.threads, 7);
    assert_string_equal(c.backend, "cpu");
    tided_config_release(&c);
}

/* Settings checked together after parsing. */
static void test_cross_checks(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    assert_int_equal(
        load(&c, error, sizeof(error), "", "--default-budget=2G", "--max-budget=1G", NULL),
        TIDED_CONFIG_ERROR);
    assert_non_null(strstr(error, "default-budget (2 GiB) is larger than max-budget (1 GiB)"));
    assert_int_equal(load(&c, error, sizeof(error), "", "--listen=127.0.0.1:5000", NULL),
                     TIDED_CONFIG_ERROR);
    assert_non_null(strstr(error, "listen = 127.0.0.1:5000 needs tls-cert and tls-key"));
    char path[160];
    memset(path, 'a', sizeof(path));
    memcpy(path, "--socket=/", 10);
    path[sizeof(path) - 1] = '\0';
    assert_int_equal(load(&c, error, sizeof(error), "", path, NULL), TIDED_CONFIG_ERROR);
    assert_non_null(strstr(error, "is longer than the 107 bytes"));
}

/* metrics-listen: HOST:PORT values, the error for a bad one, and what loopback-only means. */
static void test_metrics_listen(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    static const char *const good[] = {"127.0.0.1:9464", "localhost:1", "[::1]:65535",
                                       "127.8.9.10:80"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char flag[64];
        snprintf(flag, sizeof(flag), "--metrics-listen=%s", good[i]);
        if (load(&c, error, sizeof(error), "", flag, NULL) != TIDED_CONFIG_OK)
            fail_msg("%s: %s", flag, error);
        assert_string_equal(c.metrics_listen, good[i]);
        tided_config_release(&c);
    }
    static const char *const bad[] = {
        "9464",          "127.0.0.1",        "127.0.0.1:",  "127.0.0.1:0",  "127.0.0.1:65536",
        "127.0.0.1:94x", ":9464",            "[::1:9464",   "[::1]",        "::1:9464",
        "1.2.3:9464",    "example.com:9464", "[]:9464",     "127.0.0.1:-1", "127.0.0.1:999999",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char flag[64], got[64];
        snprintf(flag, sizeof(flag), "--metrics-listen=%s", bad[i]);
        snprintf(got, sizeof(got), "got \"%s\"", bad[i]);
        expect_error("", flag, "--metrics-listen: want HOST:PORT", "between 1 and 65535", got,
                     NULL);
    }
    /* In the file: the file and line, and the key without "--". */
    expect_error("metrics-listen = nowhere\n", NULL, ":1: metrics-listen: want HOST:PORT",
                 "got \"nowhere\"", NULL);

    /* Beyond loopback only with TLS and tokens. */
    expect_error("", "--metrics-listen=0.0.0.0:9464",
                 "metrics-listen = 0.0.0.0:9464 is not a loopback address: it needs tls-cert, "
                 "tls-key and tokens",
                 NULL);
    assert_int_equal(load(&c, error, sizeof(error), "", "--metrics-listen=10.1.2.3:9464",
                          "--tls-cert=/c.pem", "--tls-key=/k.pem", NULL),
                     TIDED_CONFIG_ERROR);
    assert_non_null(strstr(error, "metrics-listen = 10.1.2.3:9464 is not a loopback address"));
    assert_int_equal(load(&c, error, sizeof(error), "", "--metrics-listen=[::]:9464",
                          "--tokens=/t", NULL),
                     TIDED_CONFIG_ERROR);
    assert_int_equal(load(&c, error, sizeof(error), "", "--metrics-listen=0.0.0.0:9464",
                          "--tls-cert=/c.pem", "--tls-key=/k.pem", "--tokens=/t", NULL),
                     TIDED_CONFIG_OK);
    tided_config_release(&c);
    assert_int_equal(load(&c, error, sizeof(error), "", "--metrics-listen=127.0.0.1:9464",
                          "--tls-cert=/c.pem", NULL),
                     TIDED_CONFIG_ERROR);
    assert_non_null(strstr(error, "metrics-listen = 127.0.0.1:9464: tls-cert is set without "
                                  "tls-key; HTTPS needs both"));

    struct tided_listen_address a;
    assert_int_equal(tided_parse_listen_address("127.0.0.1:9464", &a), 0);
    assert_true(a.loopback);
    assert_int_equal(a.port, 9464);
    assert_int_equal(tided_parse_listen_address("127.200.1.1:1", &a), 0);
    assert_true(a.loopback);
    assert_int_equal(tided_parse_listen_address("localhost:80", &a), 0);
    assert_true(a.loopback);
    assert_int_equal(tided_parse_listen_address("[::1]:80", &a), 0);
    assert_true(a.loopback);
    assert_int_equal(tided_parse_listen_address("[::ffff:127.0.0.1]:80", &a), 0);
    assert_true(a.loopback);
    assert_int_equal(tided_parse_listen_address("0.0.0.0:80", &a), 0);
    assert_false(a.loopback);
    assert_int_equal(tided_parse_listen_address("128.0.0.1:80", &a), 0);
    assert_false(a.loopback);
    assert_int_equal(tided_parse_listen_address("[::]:80", &a), 0);
    assert_false(a.loopback);
    assert_int_equal(tided_parse_listen_address("[::ffff:10.0.0.1]:80", &a), 0);
    assert_false(a.loopback);
    assert_int_equal(tided_parse_listen_address("host:80", &a), -1);
}

static void test_help_and_version(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    FILE *saved = stdout;
    stdout = fopen("/dev/null", "w");
    enum tided_config_result help = load(&c, error, sizeof(error), "", "--help", NULL);
    enum tided_config_result version = load(&c, error, sizeof(error), "", "--version", NULL);
    fclose(stdout);
    stdout = saved;
    assert_int_equal(help, TIDED_CONFIG_EXIT);
    assert_int_equal(version, TIDED_CONFIG_EXIT);
}

/* SIGHUP: reloadable keys change, the others stay as they were. */
static void test_reload(void **state)
{
    (void)state;
    struct tided_config c;
    char error[512];
    char *path = write_file("log-level = info\nthreads = 2\n");
    char *argv[] = {"tided", "--config", path, NULL};
    assert_int_equal(tided_config_load(3, argv, &c, error, sizeof(error)), TIDED_CONFIG_OK);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("log-level = debug\nthreads = 9\n", f);
    fclose(f);
    assert_int_equal(tided_config_reload(3, argv, &c, error, sizeof(error)), TIDED_CONFIG_OK);
    assert_string_equal(c.log_level, "debug");
    assert_int_equal(c.threads, 2);
    /* A bad file on reload leaves the configuration as it was. */
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("log-level = loud\n", f);
    fclose(f);
    assert_int_equal(tided_config_reload(3, argv, &c, error, sizeof(error)), TIDED_CONFIG_ERROR);
    assert_string_equal(c.log_level, "debug");
    tided_config_release(&c);
    unlink(path);
    free(path);
}

static void test_bytes(void **state)
{
    (void)state;
    uint64_t v;
    assert_int_equal(tided_parse_bytes("4G", &v), 0);
    assert_int_equal(v, 4ull << 30);
    assert_int_equal(tided_parse_bytes("512M", &v), 0);
    assert_int_equal(v, 512ull << 20);
    assert_int_equal(tided_parse_bytes("1024", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(tided_parse_bytes("4GiB", &v), 0);
    assert_int_equal(v, 4ull << 30);
    assert_int_equal(tided_parse_bytes("5Q", &v), -1);
    assert_int_equal(tided_parse_bytes("", &v), -1);
    char buf[32];
    assert_string_equal(tided_format_bytes(4ull << 30, buf, sizeof(buf)), "4 GiB");
    assert_string_equal(tided_format_bytes(123, buf, sizeof(buf)), "123 bytes");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_bad_values),   cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_file),         cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_cross_checks), cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_reload),       cmocka_unit_test(test_bytes),
        cmocka_unit_test(test_metrics_listen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
