/* SPDX-License-Identifier: MIT */
/*
 * status.h: status codes and error messages shared by every tide module.
 *
 * A fallible function returns enum tide_status (0 is OK, errors negative) and
 * writes its results through out-parameters. Where a human needs to know more
 * than the code, the caller passes a struct tide_error and the callee fills it
 * with a message that names the node, the field, the limit and the numbers.
 *
 * Example usage:
 *
 *     struct tide_error err = {0};
 *     enum tide_status st = tide_graph_import(bytes, n, &limits, &graph, &err);
 *     if (st != TIDE_OK)
 *         fprintf(stderr, "%s: %s\n", tide_strerror(st), err.message);
 */
#ifndef TIDE_COMMON_STATUS_H
#define TIDE_COMMON_STATUS_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tide_status {
#define TIDE_STATUS(name, value, message) TIDE_##name = (value),
#include "status.def"
#undef TIDE_STATUS
};

/* Returns a static message for a status, or "unknown status" if it has none. */
const char *tide_strerror(enum tide_status status);

/* Returns the status's symbolic name ("INVALID"), or "UNKNOWN". */
const char *tide_status_name(enum tide_status status);

#define TIDE_ERROR_MESSAGE_MAX 512

/*
 * An error message that a caller owns and a callee fills. A NULL pointer is
 * accepted everywhere and means "the caller does not want the message".
 */
struct tide_error {
    enum tide_status status;
    char message[TIDE_ERROR_MESSAGE_MAX];
};

/*
 * Sets err's status and message (printf format) and returns status, so that a
 * callee can write `return tide_error_set(err, TIDE_INVALID, "...", ...);`.
 * err may be NULL.
 */
enum tide_status tide_error_set(struct tide_error *err, enum tide_status status,
                                const char *format, ...)
    __attribute__((format(printf, 3, 4)));

enum tide_status tide_error_setv(struct tide_error *err, enum tide_status status,
                                 const char *format, va_list args);

/*
 * Prepends "prefix: " to err's message, keeping its status; for adding
 * context (a file name, a job id) on the way up. Returns err's status.
 */
enum tide_status tide_error_prefix(struct tide_error *err, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Clears err to TIDE_OK and an empty message. err may be NULL. */
void tide_error_clear(struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_COMMON_STATUS_H */
