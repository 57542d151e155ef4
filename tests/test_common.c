/* SPDX-License-Identifier: MIT */
/* test_common.c: status codes, error messages, the arena and log levels. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/arena.h"
#include "common/log.h"
#include "common/status.h"

static void test_status_names(void **state)
{
    (void)state;
    assert_string_equal(tide_status_name(TIDE_OK), "OK");
    assert_string_equal(tide_status_name(TIDE_DOES_NOT_FIT), "DOES_NOT_FIT");
    assert_string_equal(tide_strerror(TIDE_NOMEM), "out of memory");
    assert_string_equal(tide_strerror((enum tide_status)-999), "unknown status");
    assert_string_equal(tide_status_name((enum tide_status)5), "UNKNOWN");
}

static void test_error_set_and_prefix(void **state)
{
    (void)state;
    struct tide_error err = {0};
    assert_int_equal(tide_error_set(&err, TIDE_LIMIT, "%d > %d", 7, 3), TIDE_LIMIT);
    assert_int_equal(err.status, TIDE_LIMIT);
    assert_string_equal(err.message, "7 > 3");
    assert_int_equal(tide_error_prefix(&err, "job %s", "j1"), TIDE_LIMIT);
    assert_string_equal(err.message, "job j1: 7 > 3");
    /* NULL is accepted and the status still comes back. */
    assert_int_equal(tide_error_set(NULL, TIDE_IO, "x"), TIDE_IO);
    tide_error_clear(&err);
    assert_int_equal(err.status, TIDE_OK);
    assert_string_equal(err.message, "");
}

static void test_error_truncates(void **state)
{
    (void)state;
    struct tide_error err = {0};
    char long_text[2000];
    memset(long_text, 'a', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    tide_error_set(&err, TIDE_INVALID, "%s", long_text);
    assert_int_equal(strlen(err.message), TIDE_ERROR_MESSAGE_MAX - 1);
    tide_error_prefix(&err, "%s", long_text);
    assert_true(strlen(err.message) < TIDE_ERROR_MESSAGE_MAX);
}

static void test_arena(void **state)
{
    (void)state;
    struct tide_arena *a = tide_arena_new(128);
    assert_non_null(a);
    for (int i = 0; i < 100; i++) {
        unsigned char *p = tide_arena_alloc(a, (size_t)(i * 7 + 1));
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (int j = 0; j < i * 7 + 1; j++)
            assert_int_equal(p[j], 0);
        memset(p, 0xab, (size_t)(i * 7 + 1));
    }
    void *big = tide_arena_alloc(a, 1 << 20); /* larger than a chunk */
    assert_non_null(big);
    assert_null(tide_arena_calloc(a, SIZE_MAX / 4, 16)); /* overflow is refused */
    char *s = tide_arena_strndup(a, "conv1/weights", 5);
    assert_string_equal(s, "conv1");
    assert_true(tide_arena_used(a) >= (1 << 20));
    tide_arena_free(a);
    tide_arena_free(NULL);
}

static void test_log_levels(void **state)
{
    (void)state;
    enum tide_log_level level;
    assert_int_equal(tide_log_parse_level("debug", &level), 0);
    assert_int_equal(level, TIDE_LOG_DEBUG);
    assert_int_equal(tide_log_parse_level("loud", &level), -1);
    tide_log_set_level(TIDE_LOG_WARN);
    assert_int_equal(tide_log_get_level(), TIDE_LOG_WARN);
    tide_log_set_level(TIDE_LOG_INFO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_names), cmocka_unit_test(test_error_set_and_prefix),
        cmocka_unit_test(test_error_truncates), cmocka_unit_test(test_arena),
        cmocka_unit_test(test_log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
