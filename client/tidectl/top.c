/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/top.c: `tidectl top`: redraws the daemon's device memory and
 * a table of every job once per --interval, with step and swap rates computed
 * between frames, until q (stdin in raw mode when it is a terminal) or
 * SIGINT/SIGTERM. --once prints one frame without screen control.
 */
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "tidectl.h"

struct top_sample {
    char id[TIDE_JOB_ID_MAX];
    uint64_t steps;
    uint64_t copy_bytes;
};

struct top_state {
    struct top_sample *prev;
    size_t n_prev;
    double prev_s;
};

static const struct top_sample *top_find(const struct top_state *s, const char *id)
{
    for (size_t i = 0; i < s->n_prev; i++)
        if (strcmp(s->prev[i].id, id) == 0)
            return &s->prev[i];
    return NULL;
}

/* Draws one frame; returns 0 or an exit code. */
static int top_frame(tide_client *c, const struct tidectl_options *o, struct top_state *s,
                     bool clear)
{
    struct tide_daemon_status st;
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    if (tide_client_status(c, &st, &jobs, &n) != 0)
        return tidectl_client_error(c, "top", TIDECTL_EXIT_RUNTIME);
    double now = tidectl_now_s();
    double dt = s->prev ? now - s->prev_s : 0;
    struct json_object *line = NULL, *list = NULL;
    if (o->json) {
        line = tidectl_json_object();
        tidectl_json_set_int(line, "time_us", (int64_t)time(NULL) * 1000000);
        tidectl_json_set_string(line, "backend", st.backend);
        tidectl_json_set_uint(line, "device_total_bytes", st.device_total_bytes);
        tidectl_json_set_uint(line, "device_used_bytes", st.device_used_bytes);
        tidectl_json_set_uint(line, "device_reserved_bytes", st.device_reserved_bytes);
        list = tidectl_json_array();
    } else {
        char b1[32], b2[32], b3[32];
        if (clear)
            fputs("\033[H\033[2J", stdout);
        printf("tided %s  %s (%s)  device %s: %s reserved, %s in use  %zu job%s\n", st.version,
               st.backend, st.device_name, tidectl_fmt_bytes(st.device_total_bytes, b1, sizeof(b1)),
               tidectl_fmt_bytes(st.device_reserved_bytes, b2, sizeof(b2)),
               tidectl_fmt_bytes(st.device_used_bytes, b3, sizeof(b3)), n, n == 1 ? "" : "s");
        printf("\n%-20s %-16s %-8s %-10s %8s %7s %9s %21s %12s %10s\n", "ID", "NAME", "OWNER",
               "STATE", "STEPS", "STEP/S", "LOSS", "DEVICE (HW/BUDGET)", "SWAP MB/STEP",
               "SWAP MB/S");
    }
    struct top_sample *next = n ? calloc(n, sizeof(*next)) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct tide_job_info *j = &jobs[i];
        uint64_t copies = j->h2d_bytes_total + j->d2h_bytes_total;
        const struct top_sample *p = top_find(s, j->id);
        double rate = j->steps_per_second, per_step = NAN, per_s = NAN;
        if (p && dt > 0 && j->steps >= p->steps && copies >= p->copy_bytes) {
            uint64_t ds = j->steps - p->steps;
            rate = (double)ds / dt;
            per_s = (double)(copies - p->copy_bytes) / 1e6 / dt;
            if (ds)
                per_step = (double)(copies - p->copy_bytes) / 1e6 / (double)ds;
        } else if (j->steps) {
            per_step = (double)copies / 1e6 / (double)j->steps;
        }
        if (next) {
            snprintf(next[i].id, sizeof(next[i].id), "%s", j->id);
            next[i].steps = j->steps;
            next[i].copy_bytes = copies;
        }
        if (o->json) {
            struct json_object *row = tidectl_json_object();
            tidectl_json_set(row, "job", tidectl_json_job(j));
            tidectl_json_set_double(row, "step_rate", rate);
            tidectl_json_set_double(row, "swap_mb_per_step", per_step);
            tidectl_json_set_double(row, "swap_mb_per_second", per_s);
            tidectl_json_append(list, row);
        } else {
            char b1[32], b2[32], dev[48], c1[16], c2[16];
            snprintf(dev, sizeof(dev), "%s/%s",
                     tidectl_fmt_bytes(j->device_high_water_bytes, b1, sizeof(b1)),
                     tidectl_fmt_bytes(j->device_budget_bytes, b2, sizeof(b2)));
            if (isfinite(per_step))
                snprintf(c1, sizeof(c1), "%.1f", per_step);
            else
                snprintf(c1, sizeof(c1), "-");
            if (isfinite(per_s))
                snprintf(c2, sizeof(c2), "%.1f", per_s);
            else
                snprintf(c2, sizeof(c2), "-");
            char user[64];
            printf("%-20s %-16.16s %-8.8s %-10s %8" PRIu64 " %7.2f %9.4f %21s %12s %10s\n",
                   j->id, j->name, tidectl_fmt_user(j->owner_uid, user, sizeof(user)),
                   tide_job_state_name(j->state), j->steps, rate,
                   (double)j->last_loss, dev, c1, c2);
        }
    }
    int rc = TIDECTL_EXIT_OK;
    if (o->json) {
        tidectl_json_set(line, "jobs", list);
        rc = tidectl_json_print_line(line);
    } else {
        if (!o->once)
            printf("\nq or Ctrl-C quits; refreshed every %.1f s\n", o->interval_s);
        fflush(stdout);
    }
    free(s->prev);
    s->prev = next;
    s->n_prev = next ? n : 0;
    s->prev_s = now;
    free(jobs);
    return rc;
}

static int run_top(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c)
{
    (void)verb;
    struct top_state s = {0};
    int rc;
    if (o->once) {
        rc = top_frame(c, o, &s, false);
        free(s.prev);
        return rc;
    }
    bool raw = isatty(STDIN_FILENO);
    struct termios saved, t;
    if (raw && tcgetattr(STDIN_FILENO, &saved) == 0) {
        t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &t);
    } else {
        raw = false;
    }
    tidectl_install_signals();
    bool clear = isatty(STDOUT_FILENO) && !o->json;
    for (;;) {
        rc = top_frame(c, o, &s, clear);
        if (rc != TIDECTL_EXIT_OK || tidectl_interrupts)
            break;
        double until = tidectl_now_s() + o->interval_s;
        bool quit = false;
        while (!quit && !tidectl_interrupts) {
            double left = until - tidectl_now_s();
            if (left <= 0)
                break;
            struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
            int r = poll(&p, raw ? 1 : 0, (int)(left * 1000) + 1);
            if (r > 0 && (p.revents & POLLIN)) {
                char ch;
                if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                    quit = true;
            }
        }
        if (quit || tidectl_interrupts)
            break;
    }
    if (raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    free(s.prev);
    return rc;
}

static const int accepts[] = {TIDECTL_OPT_ONCE, TIDECTL_OPT_INTERVAL, TIDECTL_OPT_ALL, 0};

const struct tidectl_verb tidectl_verb_top = {
    .name = "top",
    .run = run_top,
    .connects = true,
    .accepts = accepts,
    .min_args = 0,
    .max_args = 0,
    .synopsis = "top [--once] [--interval S]",
    .summary = "live view of every job",
    .help =
        "DESCRIPTION\n"
        "  Redraws, every --interval seconds, the daemon's device memory and a table of\n"
        "  the jobs: state, steps, step rate, last loss, device high water against the\n"
        "  budget, and swap traffic (host-device bytes) per step and per second. q or\n"
        "  Ctrl-C quits. Admins see every job; other users their own.\n"
        "\n"
        "OPTIONS\n"
        "  --once                   Print one frame and exit (no screen control).\n"
        "  --interval S             Seconds between frames (default 1).\n"
        "  --all                    Accepted for symmetry with `jobs`; top always asks for all.\n",
};
