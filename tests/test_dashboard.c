/* SPDX-License-Identifier: MIT */
/*
 * test_dashboard.c: tided's dashboard in a real browser. The real tided
 * (with a token file) serves the page on metrics-listen while the real
 * tidectl trains a job in the background; headless chromium loads the page
 * with the monitor token in its fragment (/#token=TOKEN), runs its scripts
 * and prints the DOM (--dump-dom). The DOM must show the job — its id,
 * name, state and step count — and a later dump a higher step count, so
 * the page polls and redraws. Without the token the page shows the token
 * form and no job.
 *
 * The trace viewer: a second job, a CNN that swaps in a 6 MiB budget,
 * trains while the real `tidectl trace` records two of its steps; the
 * viewer (/trace.html?job=ID#token=TOKEN) must list the compute, h2d and
 * d2h tracks with as many slices as the JSON tided serves holds, and the
 * device counter's peak byte for byte (the JSON read with json-c). Without
 * the token it asks for one; for a job without a trace it says to record
 * one; the dashboard links the viewer. Skips when chromium is not installed.
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

#include <json-c/json.h>

#include "daemon_child.h"

#define MONITOR_TOKEN "dashboard-monitor-token-8e4f"
#define JOB_NAME      "dashboard <test> & job"
/* The name as the DOM serialises text: &, < and > escaped. */
#define JOB_NAME_DOM "dashboard &lt;test&gt; &amp; job"

static struct tide_test_daemon *tided;
static char chromium[256];
static pid_t trainer = -1;
static pid_t swapper = -1; /* the swapping job's trainer (test_trace_viewer) */

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
    if (swapper > 0)
        tide_test_stop_trainer(swapper);
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
    double deadline = tide_test_now_s() + 120;
    while (tide_test_now_s() < deadline) {
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

/* ============================================================================
 * The trace viewer
 * ========================================================================== */

#define SWAP_JOB_NAME "trace viewer cnn"

/* GETs path with the monitor token (tests/http_get.py); asserts 200; the body, parsed. */
static json_object *get_json(const char *path)
{
    char *text = tide_test_http_get(tided, "raw", path, MONITOR_TOKEN, NULL);
    if (!text)
        fail_msg("GET %s failed (see above)", path);
    json_object *reply = json_tokener_parse(text);
    free(text);
    assert_non_null(reply);
    json_object *status, *body;
    assert_true(json_object_object_get_ex(reply, "status", &status));
    assert_true(json_object_object_get_ex(reply, "body", &body));
    if (json_object_get_int(status) != 200)
        fail_msg("GET %s: status %d: %s", path, json_object_get_int(status),
                 json_object_get_string(body));
    json_object *parsed = json_tokener_parse(json_object_get_string(body));
    if (!parsed)
        fail_msg("GET %s: the body is not JSON: %.200s", path, json_object_get_string(body));
    json_object_put(reply);
    return parsed;
}

static const char *string_of(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : "";
}

/* Polls /api/jobs until the job named name has trained a step; its id in id. */
static void wait_for_job(const char *name, char *id, size_t size)
{
    double deadline = tide_test_now_s() + 120;
    while (tide_test_now_s() < deadline) {
        json_object *doc = get_json("/api/jobs"), *jobs, *steps;
        assert_true(json_object_object_get_ex(doc, "jobs", &jobs));
        for (size_t i = 0; i < json_object_array_length(jobs); i++) {
            json_object *j = json_object_array_get_idx(jobs, i);
            if (strcmp(string_of(j, "name"), name) == 0 &&
                json_object_object_get_ex(j, "steps", &steps) && json_object_get_int64(steps) > 0) {
                snprintf(id, size, "%s", string_of(j, "id"));
                json_object_put(doc);
                return;
            }
        }
        json_object_put(doc);
        tide_test_sleep_ms(100);
    }
    tide_test_daemon_print_log(tided);
    fail_msg("job \"%s\" did not train a step within 120 s", name);
}

/* What a trace holds, counted from its JSON as the viewer should count it. */
struct trace_facts {
    char track[4][16];    /* thread_name by tid (1 compute, 2 h2d, 3 d2h) */
    long slices[4];       /* "kernel" and "copy" slices by tid */
    long steps;           /* "step" slices on the compute track */
    uint64_t device_peak; /* the largest "device" counter sample */
    bool has_device;
};

static struct trace_facts trace_facts(json_object *trace)
{
    struct trace_facts f = {0};
    json_object *events, *args, *value, *tid_field;
    assert_true(json_object_object_get_ex(trace, "traceEvents", &events));
    for (size_t i = 0; i < json_object_array_length(events); i++) {
        json_object *e = json_object_array_get_idx(events, i);
        const char *ph = string_of(e, "ph"), *name = string_of(e, "name"),
                   *cat = string_of(e, "cat");
        int tid =
            json_object_object_get_ex(e, "tid", &tid_field) ? json_object_get_int(tid_field) : -1;
        bool on_track = tid >= 1 && tid <= 3;
        if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0 && on_track &&
            json_object_object_get_ex(e, "args", &args))
            snprintf(f.track[tid], sizeof(f.track[tid]), "%s", string_of(args, "name"));
        else if (strcmp(ph, "X") == 0 && on_track &&
                 (strcmp(cat, "kernel") == 0 || strcmp(cat, "copy") == 0))
            f.slices[tid]++;
        else if (strcmp(ph, "X") == 0 && tid == 1 && strcmp(cat, "step") == 0)
            f.steps++;
        else if (strcmp(ph, "C") == 0 && strcmp(name, "device") == 0 &&
                 json_object_object_get_ex(e, "args", &args) &&
                 json_object_object_get_ex(args, "bytes in use", &value)) {
            uint64_t bytes = json_object_get_uint64(value);
            if (!f.has_device || bytes > f.device_peak)
                f.device_peak = bytes;
            f.has_device = true;
        }
    }
    return f;
}

/* The number in attribute `prefix` (e.g. `data-max="`) after `after` in dom; -1 when absent. */
static long long number_after(const char *dom, const char *after, const char *prefix)
{
    const char *p = strstr(dom, after);
    if (!p)
        return -1;
    p = strstr(p, prefix);
    if (!p)
        return -1;
    return strtoll(p + strlen(prefix), NULL, 10);
}

/* The #message paragraph's state (data-state) and text; false when the page has none. */
static bool page_message(const char *dom, char *state, size_t state_size, char *text,
                         size_t text_size)
{
    const char *p = strstr(dom, "id=\"message\"");
    if (!p || !attribute(p, p + 200, "data-state=\"", state, state_size))
        return false;
    const char *start = strchr(p, '>'), *end = start ? strstr(start, "</p>") : NULL;
    if (!end)
        return false;
    snprintf(text, text_size, "%.*s", (int)(end - start - 1), start + 1);
    return true;
}

/*
 * A swapping job, traced with the real tidectl: the viewer counts what the
 * JSON served holds, track by track, and the device peak to the byte.
 */
static void test_trace_viewer(void **state)
{
    (void)state;
    need();
    static const char *const cnn[] = {"--model", "cnn",    "--budget", "6M", "--partition-size",
                                      "7",       "--swap", "on",       NULL};
    swapper = tide_test_train_in_background_with(tided, SWAP_JOB_NAME, 1000000, "swapper.log", cnn);
    assert_true(swapper > 0);
    char id[32], trace_path[600], out_path[600], err_path[600];
    wait_for_job(SWAP_JOB_NAME, id, sizeof(id));

    /* The page before any trace: it says how to record one. */
    char url[160], message_state[32], message[512], expected[160];
    snprintf(url, sizeof(url), "trace.html?job=%s#token=%s", id, MONITOR_TOKEN);
    char *dom = dump_dom(url);
    if (!page_message(dom, message_state, sizeof(message_state), message, sizeof(message)))
        fail_msg("the viewer has no message: %.2000s", dom);
    assert_string_equal(message_state, "no-trace");
    snprintf(expected, sizeof(expected), "run `tidectl trace %s --steps N` first", id);
    if (!strstr(message, expected))
        fail_msg("the message \"%s\" does not say \"%s\"", message, expected);
    assert_null(strstr(dom, "data-track=\""));
    free(dom);

    snprintf(trace_path, sizeof(trace_path), "%s/viewer-trace.json", tided->dir);
    snprintf(out_path, sizeof(out_path), "%s/viewer-trace.out", tided->dir);
    snprintf(err_path, sizeof(err_path), "%s/viewer-trace.err", tided->dir);
    char *trace_argv[] = {
        tided->tidectl,    (char *)"--socket", tided->socket_path, (char *)"trace", id,
        (char *)"--steps", (char *)"2",        (char *)"-o",       trace_path,      NULL};
    if (tide_test_run_to_files(trace_argv, out_path, err_path) != 0) {
        char *err_text = tide_test_read_file(err_path);
        fail_msg("tidectl trace: %s", err_text ? err_text : "(no stderr)");
    }
    char trace_url[128];
    snprintf(trace_url, sizeof(trace_url), "/api/jobs/%s/trace.json", id);
    json_object *trace = get_json(trace_url);
    struct trace_facts f = trace_facts(trace);
    json_object_put(trace);
    assert_string_equal(f.track[1], "compute");
    assert_string_equal(f.track[2], "h2d");
    assert_string_equal(f.track[3], "d2h");
    assert_int_equal(f.steps, 2);
    assert_true(f.has_device);

    dom = dump_dom(url);
    for (int tid = 1; tid <= 3; tid++) {
        char row[64];
        snprintf(row, sizeof(row), "data-track=\"%s\" data-slices=\"", f.track[tid]);
        long long shown = number_after(dom, row, row);
        if (shown != f.slices[tid] || shown <= 0)
            fail_msg("the viewer shows %lld slices on %s; the JSON has %ld\n%.3000s", shown,
                     f.track[tid], f.slices[tid], dom);
    }
    long long peak = number_after(dom, "data-counter=\"device\"", "data-max=\"");
    if (peak < 0 || (uint64_t)peak != f.device_peak)
        fail_msg("the viewer shows a device peak of %lld bytes; the JSON's is %llu", peak,
                 (unsigned long long)f.device_peak);
    assert_int_equal(number_after(dom, "data-steps=\"", "data-steps=\""), 2);
    assert_non_null(strstr(dom, "<canvas id=\"canvas\" width=\""));
    free(dom);

    /* Without the token the trace is refused: the page asks for one and shows nothing of it. */
    snprintf(url, sizeof(url), "trace.html?job=%s", id);
    dom = dump_dom(url);
    assert_true(page_message(dom, message_state, sizeof(message_state), message, sizeof(message)));
    assert_string_equal(message_state, "unauthorized");
    assert_non_null(strstr(message, "This tided wants a bearer token"));
    assert_null(strstr(dom, "data-track=\""));
    free(dom);

    /* The dashboard's card of the job links the viewer and the raw JSON. */
    dom = dump_dom("#token=" MONITOR_TOKEN);
    char link[160];
    snprintf(link, sizeof(link), "href=\"/trace.html?job=%s\"", id);
    if (!strstr(dom, link))
        fail_msg("the dashboard has no %s", link);
    snprintf(link, sizeof(link), "href=\"/api/jobs/%s/trace.json\"", id);
    assert_non_null(strstr(dom, link));
    free(dom);

    assert_int_equal(tide_test_stop_trainer(swapper), 130);
    swapper = -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dashboard_shows_training_job),
        cmocka_unit_test(test_dashboard_without_token),
        cmocka_unit_test(test_trace_viewer),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
