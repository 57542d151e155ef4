/* SPDX-License-Identifier: MIT */
/* status.c: status names and messages, generated from status.def. */
#include "status.h"

#include <stdio.h>
#include <string.h>

const char *tide_strerror(enum tide_status status)
{
    switch (status) {
#define TIDE_STATUS(name, value, message) \
    case TIDE_##name:                     \
        return message;
#include "status.def"
#undef TIDE_STATUS
    }
    return "unknown status";
}

const char *tide_status_name(enum tide_status status)
{
    switch (status) {
#define TIDE_STATUS(name, value, message) \
    case TIDE_##name:                     \
        return #name;
#include "status.def"
#undef TIDE_STATUS
    }
    return "UNKNOWN";
}

enum tide_status tide_error_setv(struct tide_error *err, enum tide_status status,
                                 const char *format, va_list args)
{
    if (err) {
        err->status = status;
        vsnprintf(err->message, sizeof(err->message), format, args);
    }
    return status;
}

enum tide_status tide_error_set(struct tide_error *err, enum tide_status status,
                                const char *format, ...)
{
    va_list args;
    va_start(args, format);
    tide_error_setv(err, status, format, args);
    va_end(args);
    return status;
}

enum tide_status tide_error_prefix(struct tide_error *err, const char *format, ...)
{
    if (!err)
        return TIDE_OK;
    char prefix[TIDE_ERROR_MESSAGE_MAX];
    char old[TIDE_ERROR_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(prefix, sizeof(prefix), format, args);
    va_end(args);
    memcpy(old, err->message, sizeof(old));
    size_t n = strlen(prefix);
    if (n > sizeof(err->message) - 3)
        n = sizeof(err->message) - 3;
    memcpy(err->message, prefix, n);
    memcpy(err->message + n, ": ", 2);
    size_t rest = sizeof(err->message) - n - 3;
    size_t m = strnlen(old, rest);
    memcpy(err->message + n + 2, old, m);
    err->message[n + 2 + m] = '\0';
    return err->status;
}

void tide_error_clear(struct tide_error *err)
{
    if (err) {
        err->status = TIDE_OK;
        err->message[0] = '\0';
    }
}
