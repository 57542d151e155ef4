/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/common.c: what every tidectl command needs around its call
 * to the daemon: usage and daemon error reports (also as JSON lines under
 * --json), connecting as the global options say, human-readable sizes,
 * durations and times, and the SIGINT/SIGTERM counter that `train` and
 * `top` poll. See tidectl.h for the layout of tidectl.
 */
#include <inttypes.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tidectl.h"

/* ============================================================================
 * Errors
 * ========================================================================== */

bool tidectl_json;

int tidectl_usage_error(const char *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "tidectl: ");
    if (command)
        fprintf(stderr, "%s: ", command);
    vfprintf(stderr, format, args);
    fprintf(stderr, " (see tidectl %s%s--help)\n", command ? command : "", command ? " " : "");
    va_end(args);
    return TIDECTL_EXIT_USAGE;
}

int tidectl_client_error(tide_client *c, const char *what, int exit_code)
{
    int code = tide_client_error_code(c);
    const char *message = tide_client_error_message(c);
    fprintf(stderr, "tidectl: %s: %s: %s\n", what, tide_code_name(code), message);
    if (tidectl_json)
        tidectl_json_print_error(tide_code_name(code), code, message, exit_code);
    return exit_code;
}

/* ============================================================================
 * Connecting
 * ========================================================================== */

tide_client *tidectl_connect(const struct tidectl_options *o, int *rc)
{
    *rc = TIDECTL_EXIT_OK;
    struct tide_client_options co = {0};
    char target[4200];
    if (o->connect) {
        snprintf(target, sizeof(target), "%s", o->connect);
        co.token = o->token;
        co.ca_file = o->ca;
        co.server_name = o->server_name;
    } else {
        snprintf(target, sizeof(target), "unix:%s", o->socket);
    }
    co.call_timeout_ms = (uint32_t)(o->timeout_s * 1000);
    tide_client *c = NULL;
    if (tide_client_connect(target, &co, &c) != 0) {
        if (!c) {
            fprintf(stderr, "tidectl: out of memory\n");
            *rc = TIDECTL_EXIT_RUNTIME;
            return NULL;
        }
        int code = tide_client_error_code(c);
        *rc = TIDECTL_EXIT_CONNECT;
        if (code == TIDE_CODE_INVALID_ARGUMENT) {
            *rc = tidectl_client_error(c, "connect", TIDECTL_EXIT_USAGE);
        } else {
            tidectl_client_error(c, "connect", TIDECTL_EXIT_CONNECT);
            if (!o->connect && code != TIDE_CODE_PERMISSION_DENIED)
                fprintf(stderr,
                        "tidectl: hint: check that tided runs (systemctl status tided) and that "
                        "--socket or $TIDE_SOCKET names its socket (now %s)\n",
                        o->socket);
        }
        tide_client_free(c);
        return NULL;
    }
    return c;
}

/* ============================================================================
 * Formatting and time
 * ========================================================================== */

const char *tidectl_fmt_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, size, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
    return buf;
}

const char *tidectl_fmt_duration(double seconds, char *buf, size_t size)
{
    if (!(seconds >= 0) || !isfinite(seconds) || seconds > 1e8) {
        snprintf(buf, size, "--");
        return buf;
    }
    uint64_t s = (uint64_t)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(buf, size, "%" PRIu64 "s", s);
    return buf;
}

bool tidectl_local_daemon;

const char *tidectl_fmt_user(uint32_t uid, char *buf, size_t size)
{
    struct passwd pw, *found = NULL;
    char scratch[1024];
    if (tidectl_local_daemon && getpwuid_r((uid_t)uid, &pw, scratch, sizeof(scratch), &found) == 0 &&
        found)
        snprintf(buf, size, "%s", found->pw_name);
    else
        snprintf(buf, size, "%" PRIu32, uid);
    return buf;
}

double tidectl_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *tidectl_fmt_time_us(int64_t us, char *buf, size_t size)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    if (us <= 0 || !localtime_r(&t, &tm)) {
        snprintf(buf, size, "-");
        return buf;
    }
    strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

/* ============================================================================
 * Signals
 * ========================================================================== */

volatile sig_atomic_t tidectl_interrupts;
volatile sig_atomic_t tidectl_last_signal;

static void on_signal(int sig)
{
    tidectl_interrupts++;
    tidectl_last_signal = sig;
}

void tidectl_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
