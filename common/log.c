/* SPDX-License-Identifier: MIT */
/* log.c: one line per message on stderr, written with a single call. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int log_level = TIDE_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void tide_log_set_level(enum tide_log_level level)
{
    atomic_store(&log_level, (int)level);
}

enum tide_log_level tide_log_get_level(void)
{
    return (enum tide_log_level)atomic_load(&log_level);
}

int tide_log_parse_level(const char *name, enum tide_log_level *level)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *level = (enum tide_log_level)i;
            return 0;
        }
    }
    return -1;
}

void tide_log_write(enum tide_log_level level, const char *file, int line, const char *format, ...)
{
    char buf[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    const char *base = strrchr(file, '/');
    int n = snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%03ld %-5s %s:%d: ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level], base ? base + 1 : file, line);
    if (n < 0 || (size_t)n >= sizeof(buf))
        n = 0;
    va_list args;
    va_start(args, format);
    int m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, format, args);
    va_end(args);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(buf) - 2)
        len = sizeof(buf) - 2;
    buf[len++] = '\n';
    fwrite(buf, 1, len, stderr);
}
