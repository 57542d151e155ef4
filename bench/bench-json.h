/* SPDX-License-Identifier: MIT */
/*
 * bench-json.h: the JSON line that tide-bench and tide-bandwidth end with
 * under --json, built as json-c objects (<json.h>) and serialised by json-c.
 *
 * The setters take a NULL object (a failed allocation) and remember the
 * failure; tide_bench_json_print_line() then prints nothing and says so on
 * stderr, so that a script never reads a line with a field missing. One
 * thread only (the benchmarks print from main).
 *
 * Numbers: each double keeps the decimals its figure has always had
 * (milliseconds to 0.1, a loss to 1e-6), because scripts compare them as
 * printed (bench/gpu/run.sh's determinism check). NaN and infinities, which
 * JSON cannot spell, become null.
 *
 * Example usage:
 *
 *     struct json_object *line = tide_bench_json_object();
 *     tide_bench_json_set_string(line, "model", o->model);
 *     tide_bench_json_set_fixed(line, "plan_ms", r->plan_ms, 1);
 *     return tide_bench_json_print_line(line);
 */
#ifndef TIDE_BENCH_BENCH_JSON_H
#define TIDE_BENCH_BENCH_JSON_H

#include <stdbool.h>
#include <stdint.h>

struct json_object;

/* A new, empty JSON object or array; the caller owns it (until it is set or appended). */
struct json_object *tide_bench_json_object(void);
struct json_object *tide_bench_json_array(void);

/* Sets key of o to value, taking ownership of value. */
void tide_bench_json_set(struct json_object *o, const char *key, struct json_object *value);

/* Appends value to array, taking ownership of value. */
void tide_bench_json_append(struct json_object *array, struct json_object *value);

/* Sets key of o to a string (NULL as ""), an integer or a boolean. */
void tide_bench_json_set_string(struct json_object *o, const char *key, const char *s);
void tide_bench_json_set_int(struct json_object *o, const char *key, int64_t v);
void tide_bench_json_set_uint(struct json_object *o, const char *key, uint64_t v);
void tide_bench_json_set_bool(struct json_object *o, const char *key, bool v);

/* Sets key of o to v with `decimals` digits after the point (0 to 17); NaN and infinities: null. */
void tide_bench_json_set_fixed(struct json_object *o, const char *key, double v, int decimals);

/*
 * Writes o as one line on stdout (json-c's plain form, slashes unescaped),
 * flushes it and frees o. Returns 0, or 1 after saying so on stderr, and
 * printing nothing, when building o ran out of memory.
 */
int tide_bench_json_print_line(struct json_object *o);

#endif /* TIDE_BENCH_BENCH_JSON_H */
