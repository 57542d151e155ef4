/* SPDX-License-Identifier: MIT */
/*
 * log.h: levelled logging to stderr (or the journal's stderr under systemd).
 *
 * The macros test the level before formatting, so a debug line costs one
 * comparison when debug logging is off. The level is a process-wide atomic,
 * so SIGHUP can change it while other threads log.
 *
 * Example usage:
 *
 *     tide_log_set_level(TIDE_LOG_DEBUG);
 *     TIDE_LOG_INFO("job %s admitted, budget %llu bytes", id, budget);
 */
#ifndef TIDE_COMMON_LOG_H
#define TIDE_COMMON_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

enum tide_log_level {
    TIDE_LOG_ERROR = 0,
    TIDE_LOG_WARN = 1,
    TIDE_LOG_INFO = 2,
    TIDE_LOG_DEBUG = 3,
};

void tide_log_set_level(enum tide_log_level level);
enum tide_log_level tide_log_get_level(void);

/* Parses "error", "warn", "info" or "debug"; returns 0, or -1 if unknown. */
int tide_log_parse_level(const char *name, enum tide_log_level *level);

void tide_log_write(enum tide_log_level level, const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

#define TIDE_LOG_AT(level, ...)                                    \
    do {                                                           \
        if ((level) <= tide_log_get_level())                       \
            tide_log_write((level), __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define TIDE_LOG_ERROR(...) TIDE_LOG_AT(TIDE_LOG_ERROR, __VA_ARGS__)
#define TIDE_LOG_WARN(...) TIDE_LOG_AT(TIDE_LOG_WARN, __VA_ARGS__)
#define TIDE_LOG_INFO(...) TIDE_LOG_AT(TIDE_LOG_INFO, __VA_ARGS__)
#define TIDE_LOG_DEBUG(...) TIDE_LOG_AT(TIDE_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* TIDE_COMMON_LOG_H */
