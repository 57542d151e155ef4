/* SPDX-License-Identifier: MIT */
/*
 * test_dashboard.c: tided's dashboard in a real browser. The real tided
 * (with a token file) serves the page on metrics-listen while the real
 * tidectl trains a job in the background; headless chromium loads the page
 * with the monitor token in its fragment (/#token=TOKEN), runs its scripts
 * and prints the DOM (--dump-dom). The DOM must show the job — its id,
 * name, state and step count — and a later dump a higher step count, so
 * the page polls and redraws. Without the token the page shows the token
 * form and no job. Skips when chromium is not installed.
 *
 * Waiting for the job polls the page with a deadline that only bounds a
 * hang; no expectation depends on how fast anything runs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon_child.h"

#define MONITOR_TOKEN "dashboard-monitor-token-8e4f"
#define JOB_NAME      "dashboard <test> & job"
/* The name as the DOM serialises text: &, < and > escaped. */
#define JOB_NAME_DOM "dashboard &lt;test&gt; &amp; job"

static struct tide_test_daemon *tided;
static char chromium[256];
static pid_t trainer = -1;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Finds chromium in PATH; false when it is not installed. */
static bool find_chromium(void)
{
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome"};
    const char *path = getenv("PATH");
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *p = path ? path : "/usr/bin";
        while (*p) {
            size_t n = strcspn(p, ":");
            snprintf(chromium, sizeof(chromium), "%.*s/%s", (int)n, p, names[i]);
            if (n > 0 && access(chromium, X_OK) == 0)
                return true;
            p += n + (p[n] == ':');
        }
    }
    return false;
}

static int group_setup(void **state)
{
    (void)state;
    tided = calloc(1, sizeof(*tided));
    if (!tided)
        return -1;
    if (!find_chromium() || !tide_test_daemon_init(tided, "dashboard"))
        return 0;
    char tokens[600], listen[32];
    snprintf(tokens, sizeof(tokens), "%s/tokens", tided->dir);
    FILE *f = fopen(tokens, "w");
    if (!f)
        return -1;
    fprintf(f, "%s monitor\n", MONITOR_TOKEN);
    fclose(f);
    chmod(tokens, 0600);
    tided->http_port = tide_test_free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", tided->http_port);
    const char *args[] = {"--metrics-listen", listen, "--tokens", tokens, NULL};
    if (tide_test_daemon_start(tided, args))
        trainer = tide_test_train_in_background(tided, JOB_NAME, 1000000, "trainer.log");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (trainer > 0)
        tide_test_stop_trainer(trainer);
    tide_test_daemon_finish(tided);
    free(tided);
    return 0;
}

/* Loads the page (with fragment, e.g. "#token=..."), runs its scripts, returns the DOM. */
static char *dump_dom(const char *fragment)
{
    char url[256], profile[600], out[600], err[600];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", tided->http_port, fragment);
    /* A profile of its own, so that no other chromium on the machine is reused. */
    snprintf(profile, sizeof(profile), "--user-data-dir=%s/chromium", tided->dir);
    snprintf(out, sizeof(out), "%s/dom.html", tided->dir);
    snprintf(err, sizeof(err), "%s/chromium.err", tided->dir);
    char *argv[] = {chromium,
                    (char *)"--headless=new",
                    (char *)"--no-sandbox", /* required as root */
                    (char *)"--disable-gpu",
                    (char *)"--no-first-run",
                    profile,
                    (char *)"--virtual-time-budget=3000",
                    (char *)"--dump-dom",
                    url,
                    NULL};
    int code = tide_test_run_to_files(argv, out, err);
    if (code != 0) {
        char *text = tide_test_read_file(err);
        fail_msg("%s --dump-dom %s: exit %d\n%s", chromium, url, code, text ? text : "");
    }
    char *dom = tide_test_read_file(out);
    assert_non_null(dom);
    return dom;
}

/* What the DOM shows of the job's card: its id, state and step count. */
struct card {
    bool found;
    char id[32];
    char state[32];
    long steps;
};

/* Copies the attribute value after `prefix` (up to the closing quote) in text. */
static bool attribute(const char *text, const char *end, const char *prefix, char *out, size_t size)
{
    const char *p = strstr(text, prefix);
    if (!p || p >= end)
        return false;
    p += strlen(prefix);
    size_t n = strcspn(p, "\"");
    if (n >= size)
        return false;
    memcpy(out, p, n);
    out[n] = '\0';
    return true;
}

/* Finds the job card (an <article data-job=...>) whose name is JOB_NAME. */
static struct card find_card(const char *dom)
{
    struct card c = {0};
    for (const char *p = strstr(dom, "data-job=\""); p; p = strstr(p + 1, "data-job=\"")) {
        const char *end = strstr(p, "</article>");
        const char *name = strstr(p, ">" JOB_NAME_DOM "<");
        if (!end || !name || name > end)
            continue;
        char steps[32];
        if (!attribute(p, end, "data-job=\"", c.id, sizeof(c.id)) ||
            !attribute(p, end, "data-state=\"", c.state, sizeof(c.state)) ||
            !attribute(p, end, "data-steps=\"", steps, sizeof(steps)))
            fail_msg("the job's card lacks its id, state or steps: %.*s", (int)(end - p), p);
        c.steps = strtol(steps, NULL, 10);
        c.found = true;
        return c;
    }
    return c;
}

/* Dumps the page until the job's card shows more than after steps; the card of that dump. */
static struct card wait_for_card(long after)
{
    double deadline = now_s() + 120;
    while (now_s() < deadline) {
        char *dom = dump_dom("#token=" MONITOR_TOKEN);
        struct card c = find_card(dom);
        bool live = strstr(dom, "data-state=\"live\"") != NULL;
        free(dom);
        if (c.found && c.steps > after) {
            assert_true(live);
            return c;
        }
    }
    tide_test_daemon_print_log(tided);
    fail_msg("the dashboard did not show job \"%s\" past step %ld within 120 s", JOB_NAME, after);
    return (struct card){0};
}

static void need(void)
{
    if (!chromium[0]) {
        fprintf(stderr, "skipped: chromium is not installed (apt install chromium)\n");
        skip();
    }
    if (tided->pid <= 0 || trainer <= 0)
        fail_msg("tided or the trainer did not start (see the messages above)");
}

/* The page shows the training job, and a later load shows it further along. */
static void test_dashboard_shows_training_job(void **state)
{
    (void)state;
    need();
    struct card first = wait_for_card(0);
    assert_int_equal(strncmp(first.id, "j-", 2), 0);
    assert_string_equal(first.state, "RUNNING");
    struct card second = wait_for_card(first.steps);
    assert_string_equal(second.id, first.id);
    assert_string_equal(second.state, "RUNNING");
    if (!(second.steps > first.steps))
        fail_msg("the step count went from %ld to %ld", first.steps, second.steps);
}

/* Without the token the data endpoints answer 401: the page asks for one and shows no job. */
static void test_dashboard_without_token(void **state)
{
    (void)state;
    need();
    char *dom = dump_dom("");
    assert_null(strstr(dom, "data-job=\""));
    const char *form = strstr(dom, "id=\"token-form\"");
    assert_non_null(form);
    const char *tag_end = strchr(form, '>');
    assert_non_null(tag_end);
    if (memmem(form, (size_t)(tag_end - form), "hidden", 6))
        fail_msg("the token form is hidden: %.*s", (int)(tag_end - form), form);
    assert_non_null(strstr(dom, "needs a token"));
    free(dom);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dashboard_shows_training_job),
        cmocka_unit_test(test_dashboard_without_token),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
