/* SPDX-License-Identifier: MIT */
/*
 * json-lines.h: reading the --json output of tidectl and tide-bench in a
 * test, with json-c (<json.h>): one object per line, each checked to be
 * strict JSON, and typed look-ups of their fields that fail the test
 * (cmocka) when a field is missing or of another type.
 *
 * Strict here means more than json-c's JSON_TOKENER_STRICT, which still
 * reads NaN, Infinity and raw control characters inside strings: those
 * fail too, as does any text after the object on its line.
 *
 * Example usage:
 *
 *     size_t n;
 *     struct json_object *lines = tide_test_json_lines(r->out, &n);
 *     struct json_object *error = tide_test_json_object(
 *         json_object_array_get_idx(lines, 0), "error");
 *     assert_string_equal(tide_test_json_string(error, "code"), "UNAVAILABLE");
 *     json_object_put(lines);
 */
#ifndef TIDE_TESTS_JSON_LINES_H
#define TIDE_TESTS_JSON_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json.h>

/*
 * Parses text: zero or more lines, each ending in '\n' and holding exactly
 * one JSON object. Returns them as a JSON array (the caller puts it) and
 * their count in *n. Fails the test, naming the line, on anything else.
 */
struct json_object *tide_test_json_lines(const char *text, size_t *n);

/* The i-th object of an array from tide_test_json_lines(); fails the test if there is none. */
struct json_object *tide_test_json_line(struct json_object *lines, size_t i);

/* Fails the test unless o's keys are exactly keys (NULL-terminated), in that order. */
void tide_test_json_keys(struct json_object *o, const char *const keys[]);

/* The member key of o; each fails the test unless it exists and has that JSON type. */
struct json_object *tide_test_json_object(struct json_object *o, const char *key);
struct json_object *tide_test_json_array(struct json_object *o, const char *key);
const char *tide_test_json_string(struct json_object *o, const char *key);
int64_t tide_test_json_int(struct json_object *o, const char *key);
bool tide_test_json_bool(struct json_object *o, const char *key);

/* An integer member that must not be negative (bytes, counts, steps). */
uint64_t tide_test_json_uint(struct json_object *o, const char *key);

/* A number member (integer or not: "%.9g" writes 2.0 as 2); fails the test on null. */
double tide_test_json_number(struct json_object *o, const char *key);

/* Whether member key of o is JSON null; fails the test if o has no such member. */
bool tide_test_json_is_null(struct json_object *o, const char *key);

#endif /* TIDE_TESTS_JSON_LINES_H */
