/* SPDX-License-Identifier: MIT */
/*
 * bench-json.c: the benchmarks' JSON line through json-c (see bench-json.h).
 * tidectl has the same setters in client/tidectl/output.c; they are apart
 * because tidectl links only libtide.so's public API and the benchmarks
 * link the runtime, and they differ in one rule: tidectl writes nine
 * significant digits, the benchmarks each figure's fixed decimals.
 */
#include "bench/bench-json.h"

#include <errno.h> /* program_invocation_short_name */
#include <math.h>
#include <stdio.h>

#include <json.h>

/* Set when an allocation failed while the line was being built; reset by every print. */
static bool json_out_of_memory;

/* Adds value (owned) under key; a NULL value stands for JSON null only when null_ok. */
static void json_put(json_object *o, const char *key, json_object *value, bool null_ok)
{
    if (!o || (!value && !null_ok) || json_object_object_add(o, key, value) != 0) {
        json_object_put(value);
        json_out_of_memory = true;
    }
}

json_object *tide_bench_json_object(void)
{
    json_object *o = json_object_new_object();
    if (!o)
        json_out_of_memory = true;
    return o;
}

json_object *tide_bench_json_array(void)
{
    json_object *a = json_object_new_array();
    if (!a)
        json_out_of_memory = true;
    return a;
}

void tide_bench_json_set(json_object *o, const char *key, json_object *value)
{
    json_put(o, key, value, false);
}

void tide_bench_json_append(json_object *array, json_object *value)
{
    if (!array || !value || json_object_array_add(array, value) != 0) {
        json_object_put(value);
        json_out_of_memory = true;
    }
}

void tide_bench_json_set_string(json_object *o, const char *key, const char *s)
{
    json_put(o, key, json_object_new_string(s ? s : ""), false);
}

void tide_bench_json_set_int(json_object *o, const char *key, int64_t v)
{
    json_put(o, key, json_object_new_int64(v), false);
}

void tide_bench_json_set_uint(json_object *o, const char *key, uint64_t v)
{
    json_put(o, key, json_object_new_uint64(v), false);
}

void tide_bench_json_set_bool(json_object *o, const char *key, bool v)
{
    json_put(o, key, json_object_new_boolean(v), false);
}

void tide_bench_json_set_fixed(json_object *o, const char *key, double v, int decimals)
{
    /* json-c would write NaN and Infinity, which no strict JSON parser reads. */
    if (!isfinite(v)) {
        json_put(o, key, NULL, true);
        return;
    }
    /* %.17f of the largest double is 327 characters. */
    char text[400];
    snprintf(text, sizeof(text), "%.*f", decimals < 0 ? 0 : decimals > 17 ? 17 : decimals, v);
    json_put(o, key, json_object_new_double_s(v, text), false);
}

int tide_bench_json_print_line(json_object *o)
{
    /* One line, no spaces; paths keep their slashes ("/" needs no escape in JSON). */
    const int flags = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
    const char *text = o && !json_out_of_memory ? json_object_to_json_string_ext(o, flags) : NULL;
    int rc = 0;
    if (text) {
        fputs(text, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    } else {
        fprintf(stderr, "%s: out of memory writing the JSON line\n", program_invocation_short_name);
        rc = 1;
    }
    json_out_of_memory = false;
    json_object_put(o);
    return rc;
}
