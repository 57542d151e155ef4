/* SPDX-License-Identifier: MIT */
/*
 * json-lines.c: strict reading of one-object-per-line JSON output in tests
 * (see json-lines.h).
 */
#include "json-lines.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

/* How an object is shown in a failure's message: as tidectl writes it. */
#define SHOWN (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* Fails the test if v or anything inside it is a non-finite number (json-c reads NaN). */
static void check_finite(struct json_object *v, size_t line)
{
    switch (json_object_get_type(v)) {
    case json_type_double:
        if (!isfinite(json_object_get_double(v)))
            fail_msg("line %zu: a non-finite number, which JSON cannot hold", line);
        break;
    case json_type_object: {
        json_object_object_foreach(v, key, member)
        {
            (void)key;
            check_finite(member, line);
        }
        break;
    }
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            check_finite(json_object_array_get_idx(v, i), line);
        break;
    default:
        break;
    }
}

struct json_object *tide_test_json_lines(const char *text, size_t *n)
{
    struct json_object *lines = json_object_new_array();
    assert_non_null(lines);
    struct json_tokener *tok = json_tokener_new();
    assert_non_null(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    size_t count = 0;
    for (const char *at = text; *at;) {
        const char *end = strchr(at, '\n');
        if (!end)
            fail_msg("line %zu does not end in a newline: %s", count + 1, at);
        size_t len = (size_t)(end - at);
        /* The plain form has no whitespace: any control character is a raw one in a string. */
        for (size_t i = 0; i < len; i++)
            if ((unsigned char)at[i] < 0x20)
                fail_msg("line %zu: raw control character 0x%02x at byte %zu: %.*s", count + 1,
                         (unsigned char)at[i], i, (int)len, at);
        json_tokener_reset(tok);
        struct json_object *o = json_tokener_parse_ex(tok, at, (int)len);
        enum json_tokener_error e = json_tokener_get_error(tok);
        if (!o || e != json_tokener_success || json_tokener_get_parse_end(tok) != len)
            fail_msg("line %zu is not one JSON object (%s): %.*s", count + 1,
                     e == json_tokener_success ? "text after it" : json_tokener_error_desc(e),
                     (int)len, at);
        if (!json_object_is_type(o, json_type_object))
            fail_msg("line %zu is JSON but not an object: %.*s", count + 1, (int)len, at);
        check_finite(o, count + 1);
        assert_int_equal(json_object_array_add(lines, o), 0);
        count++;
        at = end + 1;
    }
    json_tokener_free(tok);
    *n = count;
    return lines;
}

struct json_object *tide_test_json_line(struct json_object *lines, size_t i)
{
    if (i >= json_object_array_length(lines))
        fail_msg("wanted line %zu, got %zu lines", i + 1, json_object_array_length(lines));
    return json_object_array_get_idx(lines, i);
}

void tide_test_json_keys(struct json_object *o, const char *const keys[])
{
    size_t i = 0;
    json_object_object_foreach(o, key, value)
    {
        (void)value;
        if (!keys[i])
            fail_msg("unexpected key \"%s\" after the last expected one in %s", key,
                     json_object_to_json_string_ext(o, SHOWN));
        if (strcmp(key, keys[i]) != 0)
            fail_msg("key %zu is \"%s\", wanted \"%s\" in %s", i + 1, key, keys[i],
                     json_object_to_json_string_ext(o, SHOWN));
        i++;
    }
    if (keys[i])
        fail_msg("missing key \"%s\" in %s", keys[i], json_object_to_json_string_ext(o, SHOWN));
}

/* The member key of o, which must exist; NULL for JSON null. */
static struct json_object *member(struct json_object *o, const char *key)
{
    struct json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object))
        fail_msg("looking up \"%s\" in something that is not an object", key);
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("no key \"%s\" in %s", key, json_object_to_json_string_ext(o, SHOWN));
    return v;
}

/* The member key of o, which must exist and be of type. */
static struct json_object *typed(struct json_object *o, const char *key, enum json_type type)
{
    struct json_object *v = member(o, key);
    if (!json_object_is_type(v, type))
        fail_msg("\"%s\" is a %s, wanted a %s, in %s", key,
                 json_type_to_name(json_object_get_type(v)), json_type_to_name(type),
                 json_object_to_json_string_ext(o, SHOWN));
    return v;
}

struct json_object *tide_test_json_object(struct json_object *o, const char *key)
{
    return typed(o, key, json_type_object);
}

struct json_object *tide_test_json_array(struct json_object *o, const char *key)
{
    return typed(o, key, json_type_array);
}

const char *tide_test_json_string(struct json_object *o, const char *key)
{
    return json_object_get_string(typed(o, key, json_type_string));
}

int64_t tide_test_json_int(struct json_object *o, const char *key)
{
    return json_object_get_int64(typed(o, key, json_type_int));
}

uint64_t tide_test_json_uint(struct json_object *o, const char *key)
{
    struct json_object *v = typed(o, key, json_type_int);
    /* json-c keeps integers above INT64_MAX as unsigned (and reads them as INT64_MAX here). */
    if (json_object_get_int64(v) < 0)
        fail_msg("\"%s\" is negative in %s", key, json_object_to_json_string_ext(o, SHOWN));
    return json_object_get_uint64(v);
}

bool tide_test_json_bool(struct json_object *o, const char *key)
{
    return json_object_get_boolean(typed(o, key, json_type_boolean));
}

double tide_test_json_number(struct json_object *o, const char *key)
{
    struct json_object *v = member(o, key);
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        fail_msg("\"%s\" is a %s, wanted a number, in %s", key,
                 json_type_to_name(json_object_get_type(v)),
                 json_object_to_json_string_ext(o, SHOWN));
    return json_object_get_double(v);
}

bool tide_test_json_is_null(struct json_object *o, const char *key)
{
    return member(o, key) == NULL;
}
