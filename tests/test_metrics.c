/* SPDX-License-Identifier: MIT */
/*
 * test_metrics.c: tided's HTTP listener (metrics-listen) end to end — the
 * real tided, trained by the real tidectl over its socket, scraped over a
 * real TCP connection by python3 (tests/http_get.py), whose
 * prometheus_client parser must accept every /metrics body.
 *
 *  - While a job trains: every metric family of docs/metrics.md is there
 *    with its type, the labels come back exactly as set (a job name with a
 *    quote, a backslash, a newline and non-ASCII text), the histogram is
 *    cumulative with +Inf equal to its count, and tide_job_steps_total grows
 *    from one scrape to a later one; /api/jobs keeps the recent losses.
 *  - Bad requests (other methods, unknown paths, garbage, oversized
 *    headers) get 4xx answers and the daemon keeps serving.
 *  - With a token file: no token or an unknown one is 401 on every data
 *    endpoint; a monitor token sees every job, a submit token only its
 *    UID's; the dashboard's files, which hold no data, need none.
 *  - HTTPS with tls-cert and tls-key; addresses tided must refuse.
 *
 * Waiting for a job to reach a step polls with a deadline that only bounds
 * a hang; no expectation depends on how fast anything runs.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <json-c/json.h>

#include "daemon_child.h"

#define MONITOR_TOKEN "metrics-monitor-token-5b1d"
#define ROOT_TOKEN    "metrics-submit-root-token-77a0"
#define OTHER_TOKEN   "metrics-submit-other-token-c3e9"
#define OTHER_UID     65534

/* A job name that needs every escape of the text format, and UTF-8. */
#define WEIRD_NAME "say \"hi\" \\ back\nline two \xc3\xa9t\xc3\xa9"

/* Daemon A: loopback, no token file (anonymous viewers). Daemon B: a token file. */
static struct tide_test_daemon *daemon_a, *daemon_b;
static char tokens_path[600];

/* Starts d with --metrics-listen 127.0.0.1:<free port> and extra flags. */
static bool start_with_http(struct tide_test_daemon *d, const char *extra1, const char *extra2)
{
    d->http_port = tide_test_free_port();
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->http_port);
    const char *args[] = {"--metrics-listen", listen, extra1, extra2, NULL};
    return d->http_port > 0 && tide_test_daemon_start(d, args);
}

static int group_setup(void **state)
{
    (void)state;
    daemon_a = calloc(1, sizeof(*daemon_a));
    daemon_b = calloc(1, sizeof(*daemon_b));
    if (!daemon_a || !daemon_b)
        return -1;
    if (tide_test_daemon_init(daemon_a, "metrics-a"))
        start_with_http(daemon_a, NULL, NULL);
    if (tide_test_daemon_init(daemon_b, "metrics-b")) {
        snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", daemon_b->dir);
        FILE *f = fopen(tokens_path, "w");
        if (!f)
            return -1;
        fprintf(f, "%s monitor\n%s submit 0\n%s submit %d\n", MONITOR_TOKEN, ROOT_TOKEN,
                OTHER_TOKEN, OTHER_UID);
        fclose(f);
        chmod(tokens_path, 0600);
        start_with_http(daemon_b, "--tokens", tokens_path);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    tide_test_daemon_finish(daemon_a);
    tide_test_daemon_finish(daemon_b);
    free(daemon_a);
    free(daemon_b);
    return 0;
}

/* Skips when the daemon is not running (its log says why) or python3 lacks prometheus_client. */
static void need(const struct tide_test_daemon *d)
{
    if (d->pid <= 0) {
        fprintf(stderr, "skipped: tided is not running (see the messages above)\n");
        skip();
    }
    if (!tide_test_python()) {
        fprintf(stderr, "skipped: python3 with prometheus_client is needed to scrape\n");
        skip();
    }
}

/* ============================================================================
 * Reading what http_get.py printed
 * ========================================================================== */

/* GETs path and returns http_get.py's JSON object (the caller puts it). */
static json_object *get(const struct tide_test_daemon *d, const char *mode, const char *path,
                        const char *token, const char *cafile)
{
    char *text = tide_test_http_get(d, mode, path, token, cafile);
    if (!text)
        fail_msg("GET %s failed (see above)", path);
    json_object *o = json_tokener_parse(text);
    if (!o)
        fail_msg("GET %s: http_get.py printed no JSON: %.200s", path, text);
    free(text);
    return o;
}

static int status_of(json_object *o)
{
    json_object *v;
    assert_true(json_object_object_get_ex(o, "status", &v));
    return json_object_get_int(v);
}

static const char *body_of(json_object *o)
{
    json_object *v;
    assert_true(json_object_object_get_ex(o, "body", &v));
    return json_object_get_string(v);
}

/* GETs a JSON endpoint, asserts 200 and application/json, returns the parsed body. */
static json_object *get_api(const struct tide_test_daemon *d, const char *path, const char *token)
{
    json_object *o = get(d, "raw", path, token, NULL);
    if (status_of(o) != 200)
        fail_msg("GET %s: status %d: %s", path, status_of(o), body_of(o));
    json_object *type;
    assert_true(json_object_object_get_ex(o, "content_type", &type));
    assert_string_equal(json_object_get_string(type), "application/json");
    json_object *body = json_tokener_parse(body_of(o));
    if (!body)
        fail_msg("GET %s: the body is not JSON: %.200s", path, body_of(o));
    json_object_put(o);
    return body;
}

static const char *string_field(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("no \"%s\" in %s", key, json_object_to_json_string(o));
    return json_object_get_string(v);
}

static int64_t int_field(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        fail_msg("no \"%s\" in %s", key, json_object_to_json_string(o));
    return json_object_get_int64(v);
}

/* Whether a sample's labels hold every given key=value pair (NULL-terminated). */
static bool labels_match(json_object *labels, va_list args)
{
    for (const char *k; (k = va_arg(args, const char *)) != NULL;) {
        const char *want = va_arg(args, const char *);
        json_object *v;
        if (!json_object_object_get_ex(labels, k, &v) ||
            strcmp(json_object_get_string(v), want) != 0)
            return false;
    }
    return true;
}

static int find_samples_v(json_object *scrape, const char *name, double *value,
                          json_object **labels, va_list args)
{
    json_object *samples;
    assert_true(json_object_object_get_ex(scrape, "samples", &samples));
    int found = 0;
    for (size_t i = 0; i < json_object_array_length(samples); i++) {
        json_object *s = json_object_array_get_idx(samples, i);
        if (strcmp(json_object_get_string(json_object_array_get_idx(s, 0)), name) != 0)
            continue;
        va_list copy;
        va_copy(copy, args);
        bool match = labels_match(json_object_array_get_idx(s, 1), copy);
        va_end(copy);
        if (!match)
            continue;
        if (found++ == 0) {
            if (value)
                *value = json_object_get_double(json_object_array_get_idx(s, 2));
            if (labels)
                *labels = json_object_array_get_idx(s, 1);
        }
    }
    return found;
}

/*
 * The number of samples named name whose labels hold the key, value pairs
 * that follow (NULL-terminated); the first one's value and labels go to
 * *value and *labels when not NULL.
 */
static int find_samples(json_object *scrape, const char *name, double *value, json_object **labels,
                        ...)
{
    va_list args;
    va_start(args, labels);
    int found = find_samples_v(scrape, name, value, labels, args);
    va_end(args);
    return found;
}

/* The value of the one sample of name with the key, value pairs (NULL-terminated). */
static double one_sample(json_object *scrape, const char *name, ...)
{
    double value = NAN;
    va_list args;
    va_start(args, name);
    int found = find_samples_v(scrape, name, &value, NULL, args);
    va_end(args);
    if (found != 1)
        fail_msg("%d samples of %s with the given labels, want 1", found, name);
    return value;
}

#define ONE_SAMPLE(scrape, ...) one_sample(scrape, __VA_ARGS__, NULL)

/* Asserts the exposition has a family name (as prometheus_client names it) of type. */
static void expect_family(json_object *scrape, const char *name, const char *type)
{
    json_object *families;
    assert_true(json_object_object_get_ex(scrape, "families", &families));
    for (size_t i = 0; i < json_object_array_length(families); i++) {
        json_object *f = json_object_array_get_idx(families, i);
        if (strcmp(json_object_get_string(json_object_array_get_idx(f, 0)), name) != 0)
            continue;
        assert_string_equal(json_object_get_string(json_object_array_get_idx(f, 1)), type);
        if (strlen(json_object_get_string(json_object_array_get_idx(f, 2))) == 0)
            fail_msg("%s has no HELP text", name);
        return;
    }
    fail_msg("no metric family %s", name);
}

/* The job named name in /api/jobs, or NULL; the caller puts *holder. */
static json_object *find_job(const struct tide_test_daemon *d, const char *token, const char *name,
                             json_object **holder)
{
    *holder = get_api(d, "/api/jobs", token);
    json_object *jobs;
    assert_true(json_object_object_get_ex(*holder, "jobs", &jobs));
    for (size_t i = 0; i < json_object_array_length(jobs); i++) {
        json_object *j = json_object_array_get_idx(jobs, i);
        if (strcmp(string_field(j, "name"), name) == 0)
            return j;
    }
    return NULL;
}

/* Polls /api/jobs until the job named name has done more than after steps; returns its id. */
static void wait_for_steps(const struct tide_test_daemon *d, const char *token, const char *name,
                           int64_t after, char *id, size_t id_size)
{
    double deadline = tide_test_now_s() + 120;
    while (tide_test_now_s() < deadline) {
        json_object *holder;
        json_object *j = find_job(d, token, name, &holder);
        if (j && int_field(j, "steps") > after) {
            snprintf(id, id_size, "%s", string_field(j, "id"));
            json_object_put(holder);
            return;
        }
        json_object_put(holder);
        tide_test_sleep_ms(50);
    }
    tide_test_daemon_print_log(d);
    fail_msg("job \"%s\" did not pass step %lld within 120 s", name, (long long)after);
}

/* ============================================================================
 * Tests
 * ========================================================================== */

/* Two scrapes while a job trains: every family, exact labels, counters that grow. */
static void test_scrape_while_training(void **state)
{
    (void)state;
    struct tide_test_daemon *d = daemon_a;
    need(d);
    pid_t trainer = tide_test_train_in_background(d, WEIRD_NAME, 1000000, "trainer-a.log");
    assert_true(trainer > 0);
    char id[64];
    wait_for_steps(d, NULL, WEIRD_NAME, 0, id, sizeof(id));

    json_object *first = get(d, "metrics", "/metrics", NULL, NULL);
    assert_int_equal(status_of(first), 200);
    static const char *const families[][2] = {
        {"tide_build_info", "gauge"},
        {"tide_start_time_seconds", "gauge"},
        {"tide_device_total_bytes", "gauge"},
        {"tide_device_reserved_bytes", "gauge"},
        {"tide_device_used_bytes", "gauge"},
        {"tide_queue_length", "gauge"},
        {"tide_jobs", "gauge"},
        {"tide_rpcs", "counter"}, /* prometheus_client names counters without _total */
        {"tide_job_steps", "counter"},
        {"tide_job_step_seconds", "histogram"},
        {"tide_job_swap_in_bytes", "counter"},
        {"tide_job_swap_out_bytes", "counter"},
        {"tide_job_stall_seconds", "counter"},
        {"tide_job_high_water_bytes", "gauge"},
        {"tide_job_budget_bytes", "gauge"},
        {"tide_job_host_bytes", "gauge"},
        {"tide_job_loss", "gauge"},
        {"tide_job_state", "gauge"},
    };
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        expect_family(first, families[i][0], families[i][1]);

    assert_true(ONE_SAMPLE(first, "tide_build_info", "backend", "cpu") == 1.0);
    assert_true(ONE_SAMPLE(first, "tide_device_total_bytes", "device", "cpu:0") ==
                (double)(1u << 30));
    assert_true(ONE_SAMPLE(first, "tide_device_reserved_bytes", "device", "cpu:0") ==
                (double)(64u << 20));
    assert_true(ONE_SAMPLE(first, "tide_jobs", "state", "RUNNING") == 1.0);
    assert_true(
        ONE_SAMPLE(first, "tide_rpcs_total", "method", "tide.v1.Jobs/Submit", "code", "OK") >= 1.0);

    /* The job's labels come back exactly: the parser undid every escape. */
    json_object *labels = NULL;
    double steps1 = NAN;
    assert_int_equal(find_samples(first, "tide_job_steps_total", &steps1, &labels, "job", id, NULL),
                     1);
    struct passwd *me = getpwuid(getuid());
    assert_non_null(me);
    assert_string_equal(string_field(labels, "name"), WEIRD_NAME);
    assert_string_equal(string_field(labels, "user"), me->pw_name);
    assert_string_equal(string_field(labels, "device"), "cpu:0");
    assert_true(steps1 >= 1.0);
    assert_true(ONE_SAMPLE(first, "tide_job_budget_bytes", "job", id) == (double)(64u << 20));
    assert_true(ONE_SAMPLE(first, "tide_job_high_water_bytes", "job", id) > 0.0);
    assert_true(ONE_SAMPLE(first, "tide_job_high_water_bytes", "job", id) <= (double)(64u << 20));
    assert_true(ONE_SAMPLE(first, "tide_job_state", "job", id, "state", "RUNNING") == 1.0);
    assert_int_equal(find_samples(first, "tide_job_state", NULL, NULL, "job", id, NULL), 9);
    double zero_states = 0;
    const char *others[] = {"SUBMITTED", "COMPILING", "READY", "DONE",
                            "FAILED",    "CANCELLED", "QUEUED"};
    for (size_t i = 0; i < 7; i++)
        zero_states += ONE_SAMPLE(first, "tide_job_state", "job", id, "state", others[i]);
    assert_true(zero_states == 0.0);

    /* The histogram: cumulative buckets, +Inf equal to the count, no more than the steps. */
    double count = ONE_SAMPLE(first, "tide_job_step_seconds_count", "job", id);
    double inf = ONE_SAMPLE(first, "tide_job_step_seconds_bucket", "job", id, "le", "+Inf");
    assert_true(count >= 1.0 && count <= steps1);
    assert_true(inf == count);
    json_object *samples;
    assert_true(json_object_object_get_ex(first, "samples", &samples));
    double previous = 0;
    int buckets = 0;
    for (size_t i = 0; i < json_object_array_length(samples); i++) {
        json_object *s = json_object_array_get_idx(samples, i);
        json_object *job;
        if (strcmp(json_object_get_string(json_object_array_get_idx(s, 0)),
                   "tide_job_step_seconds_bucket") != 0 ||
            !json_object_object_get_ex(json_object_array_get_idx(s, 1), "job", &job) ||
            strcmp(json_object_get_string(job), id) != 0)
            continue;
        double v = json_object_get_double(json_object_array_get_idx(s, 2));
        assert_true(v >= previous);
        previous = v;
        buckets++;
    }
    assert_int_equal(buckets, 16); /* 15 bounds and +Inf */
    assert_true(ONE_SAMPLE(first, "tide_job_step_seconds_sum", "job", id) > 0.0);

    /* A later scrape: the counter moved while the job trains. */
    wait_for_steps(d, NULL, WEIRD_NAME, (int64_t)steps1, id, sizeof(id));
    json_object *second = get(d, "metrics", "/metrics", NULL, NULL);
    double steps2 = ONE_SAMPLE(second, "tide_job_steps_total", "job", id);
    if (!(steps2 > steps1))
        fail_msg("tide_job_steps_total went from %g to %g", steps1, steps2);
    assert_true(ONE_SAMPLE(second, "tide_job_step_seconds_count", "job", id) > count);
    assert_true(ONE_SAMPLE(second, "tide_job_swap_in_bytes_total", "job", id) >=
                ONE_SAMPLE(first, "tide_job_swap_in_bytes_total", "job", id));
    json_object_put(first);
    json_object_put(second);

    /* /api/jobs: the loss ring ends at the job's step, one loss per training step. */
    json_object *holder;
    json_object *job = find_job(d, NULL, WEIRD_NAME, &holder);
    assert_non_null(job);
    assert_string_equal(string_field(job, "id"), id);
    assert_string_equal(string_field(job, "state"), "RUNNING");
    int64_t steps = int_field(job, "steps");
    json_object *losses, *loss_steps, *loss_values;
    assert_true(json_object_object_get_ex(job, "losses", &losses));
    assert_true(json_object_object_get_ex(losses, "steps", &loss_steps));
    assert_true(json_object_object_get_ex(losses, "values", &loss_values));
    size_t n = json_object_array_length(loss_steps);
    assert_int_equal(n, steps < 1000 ? (size_t)steps : 1000);
    assert_int_equal(json_object_array_length(loss_values), n);
    assert_int_equal(json_object_get_int64(json_object_array_get_idx(loss_steps, n - 1)), steps);
    assert_int_equal(json_object_get_int64(json_object_array_get_idx(loss_steps, 0)),
                     steps - (int64_t)n + 1);
    json_object *loss;
    assert_true(json_object_object_get_ex(job, "loss", &loss));
    assert_true(json_object_get_double(loss) ==
                json_object_get_double(json_object_array_get_idx(loss_values, n - 1)));
    assert_int_equal(int_field(job, "budget_bytes"), 64 << 20);

    /* The job's plan picture, drawn at compile; no trace until one is recorded. */
    char path[128], expected[160];
    snprintf(path, sizeof(path), "/api/jobs/%s/plan.svg", id);
    assert_string_equal(string_field(job, "plan_svg"), path);
    json_object *trace_field;
    assert_true(json_object_object_get_ex(job, "trace", &trace_field));
    assert_null(trace_field);
    json_object_put(holder);
    json_object *svg = get(d, "raw", path, NULL, NULL);
    assert_int_equal(status_of(svg), 200);
    assert_string_equal(string_field(svg, "content_type"), "image/svg+xml");
    assert_memory_equal(body_of(svg), "<?xml", 5);
    assert_non_null(strstr(body_of(svg), "<svg"));
    json_object_put(svg);
    snprintf(path, sizeof(path), "/api/jobs/%s/trace.json", id);
    json_object *no_trace = get(d, "raw", path, NULL, NULL);
    assert_int_equal(status_of(no_trace), 404);
    snprintf(expected, sizeof(expected), "job %s has no trace yet", id);
    assert_non_null(strstr(body_of(no_trace), expected));
    json_object_put(no_trace);
    json_object *no_job = get(d, "raw", "/api/jobs/j-0000000000000000/plan.svg", NULL, NULL);
    assert_int_equal(status_of(no_job), 404);
    json_object_put(no_job);

    /* tidectl trace records the next step; the dashboard then serves the same trace. */
    char trace_path[600], out_path[600], err_path[600];
    snprintf(trace_path, sizeof(trace_path), "%s/trace.json", d->dir);
    snprintf(out_path, sizeof(out_path), "%s/trace.out", d->dir);
    snprintf(err_path, sizeof(err_path), "%s/trace.err", d->dir);
    char *trace_argv[] = {d->tidectl, "--socket", d->socket_path, "trace", id, "-o", trace_path,
                          NULL};
    if (tide_test_run_to_files(trace_argv, out_path, err_path) != 0) {
        char *err_text = tide_test_read_file(err_path);
        fail_msg("tidectl trace: %s", err_text ? err_text : "(no stderr)");
    }
    char *written = tide_test_read_file(trace_path);
    assert_non_null(written);
    holder = NULL;
    job = find_job(d, NULL, WEIRD_NAME, &holder);
    assert_non_null(job);
    assert_true(json_object_object_get_ex(job, "trace", &trace_field));
    assert_non_null(trace_field);
    assert_string_equal(string_field(trace_field, "path"), path);
    assert_int_equal(int_field(trace_field, "bytes"), (int64_t)strlen(written));
    json_object_put(holder);
    json_object *served = get(d, "raw", path, NULL, NULL);
    assert_int_equal(status_of(served), 200);
    assert_string_equal(string_field(served, "content_type"), "application/json");
    assert_string_equal(body_of(served), written);
    json_object_put(served);
    free(written);

    json_object *status = get_api(d, "/api/status", NULL);
    json_object *viewer, *device;
    assert_true(json_object_object_get_ex(status, "viewer", &viewer));
    assert_string_equal(string_field(viewer, "role"), "anonymous");
    assert_true(json_object_object_get_ex(status, "device", &device));
    assert_int_equal(int_field(device, "total_bytes"), 1 << 30);
    assert_string_equal(string_field(device, "id"), "cpu:0");
    json_object_put(status);

    assert_int_equal(tide_test_stop_trainer(trainer), 130); /* stopped cleanly by Ctrl-C */
}

/* Sends raw bytes, half-closes, and returns the status line's code (0 when none came). */
static int raw_request(int port, const char *request, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    struct timeval tv = {60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    size_t sent = 0;
    while (sent < len) {
        ssize_t k = send(fd, request + sent, len - sent, MSG_NOSIGNAL);
        if (k <= 0)
            break; /* the server may close on a request it refuses */
        sent += (size_t)k;
    }
    shutdown(fd, SHUT_WR);
    char reply[256] = {0};
    size_t got = 0;
    while (got < sizeof(reply) - 1) {
        ssize_t k = recv(fd, reply + got, sizeof(reply) - 1 - got, 0);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    int code = 0;
    if (sscanf(reply, "HTTP/1.%*d %d", &code) != 1)
        code = 0;
    return code;
}

/* Other methods, unknown paths, garbage and huge headers: 4xx, and tided keeps serving. */
static void test_bad_requests(void **state)
{
    (void)state;
    struct tide_test_daemon *d = daemon_a;
    need(d);
    static const char post[] =
        "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
    assert_int_equal(raw_request(d->http_port, post, sizeof(post) - 1), 405);
    static const char del[] = "DELETE /api/jobs HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(raw_request(d->http_port, del, sizeof(del) - 1), 405);
    static const char missing[] = "GET /api/nothing HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(raw_request(d->http_port, missing, sizeof(missing) - 1), 404);
    static const char escape[] = "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(raw_request(d->http_port, escape, sizeof(escape) - 1), 404);
    static const char query[] = "GET /metrics?x=%ZZ&token=abc HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(raw_request(d->http_port, query, sizeof(query) - 1), 200);

    size_t big = 40000; /* beyond the 32 KiB of header memory, within socket buffers */
    char *huge = malloc(big + 64);
    assert_non_null(huge);
    int n = snprintf(huge, 64, "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(huge + n, 'a', big);
    memcpy(huge + n + big, "\r\n\r\n", 4);
    int code = raw_request(d->http_port, huge, (size_t)n + big + 4);
    free(huge);
    if (code != 0 && (code < 400 || code > 499))
        fail_msg("an oversized header got %d, want a 4xx or a closed connection", code);
    static const char garbage[] = "\x00\xff\x01 not http at all \r\n\r\n";
    code = raw_request(d->http_port, garbage, sizeof(garbage) - 1);
    if (code != 0 && (code < 400 || code > 499))
        fail_msg("garbage got %d, want a 4xx or a closed connection", code);

    /* Still alive and serving. */
    assert_int_equal(kill(d->pid, 0), 0);
    json_object *o = get(d, "metrics", "/metrics", NULL, NULL);
    assert_int_equal(status_of(o), 200);
    json_object_put(o);
}

/* A token file: 401 without a known token; monitors see every job, submit tokens their own. */
static void test_tokens(void **state)
{
    (void)state;
    struct tide_test_daemon *d = daemon_b;
    need(d);
    pid_t trainer = tide_test_train_in_background(d, "tokens-job", 3, "trainer-b.log");
    assert_true(trainer > 0);
    int waited;
    while (waitpid(trainer, &waited, 0) < 0 && errno == EINTR) {
    }
    assert_true(WIFEXITED(waited) && WEXITSTATUS(waited) == 0);

    static const char *const data_paths[] = {"/metrics", "/api/status", "/api/jobs"};
    for (size_t i = 0; i < 3; i++) {
        json_object *o = get(d, "raw", data_paths[i], NULL, NULL);
        if (status_of(o) != 401)
            fail_msg("GET %s without a token: %d, want 401", data_paths[i], status_of(o));
        assert_non_null(strstr(body_of(o), "Authorization: Bearer TOKEN"));
        json_object_put(o);
        o = get(d, "raw", data_paths[i], "not-a-token-of-this-daemon", NULL);
        assert_int_equal(status_of(o), 401);
        assert_non_null(strstr(body_of(o), "unknown bearer token"));
        json_object_put(o);
    }

    /* The pages' files hold no data: served without a token (the pages ask for one). */
    static const char *const page[][2] = {{"/", "text/html; charset=utf-8"},
                                          {"/common.js", "text/javascript; charset=utf-8"},
                                          {"/dashboard.js", "text/javascript; charset=utf-8"},
                                          {"/dashboard.css", "text/css; charset=utf-8"},
                                          {"/trace.html?job=j-0000000000000000",
                                           "text/html; charset=utf-8"},
                                          {"/trace.js", "text/javascript; charset=utf-8"},
                                          {"/trace.css", "text/css; charset=utf-8"}};
    for (size_t i = 0; i < sizeof(page) / sizeof(page[0]); i++) {
        json_object *o = get(d, "raw", page[i][0], NULL, NULL);
        if (status_of(o) != 200)
            fail_msg("GET %s without a token: %d, want 200", page[i][0], status_of(o));
        assert_string_equal(string_field(o, "content_type"), page[i][1]);
        assert_null(strstr(body_of(o), "tokens-job"));
        json_object_put(o);
    }

    /* monitor: every job, and the parser accepts what it sees. */
    json_object *scrape = get(d, "metrics", "/metrics", MONITOR_TOKEN, NULL);
    assert_int_equal(status_of(scrape), 200);
    assert_true(ONE_SAMPLE(scrape, "tide_job_steps_total", "name", "tokens-job") == 3.0);
    json_object_put(scrape);
    json_object *holder;
    assert_non_null(find_job(d, MONITOR_TOKEN, "tokens-job", &holder));
    json_object_put(holder);
    json_object *status = get_api(d, "/api/status", MONITOR_TOKEN);
    json_object *viewer;
    assert_true(json_object_object_get_ex(status, "viewer", &viewer));
    assert_string_equal(string_field(viewer, "role"), "monitor");
    json_object_put(status);

    /* submit as the owner (uid 0 trained it through the socket, as root in CI). */
    if (getuid() == 0) {
        assert_non_null(find_job(d, ROOT_TOKEN, "tokens-job", &holder));
        json_object_put(holder);
    }

    /* submit as another uid: the daemon's numbers, none of the job's. */
    scrape = get(d, "metrics", "/metrics", OTHER_TOKEN, NULL);
    assert_int_equal(status_of(scrape), 200);
    assert_int_equal(find_samples(scrape, "tide_job_steps_total", NULL, NULL, NULL), 0);
    assert_int_equal(find_samples(scrape, "tide_job_state", NULL, NULL, NULL), 0);
    assert_int_equal(find_samples(scrape, "tide_device_total_bytes", NULL, NULL, NULL), 1);
    assert_true(ONE_SAMPLE(scrape, "tide_jobs", "state", "READY") == 0.0);
    json_object_put(scrape);
    assert_null(find_job(d, OTHER_TOKEN, "tokens-job", &holder));
    json_object *jobs;
    assert_true(json_object_object_get_ex(holder, "jobs", &jobs));
    assert_int_equal(json_object_array_length(jobs), 0);
    json_object_put(holder);
    status = get_api(d, "/api/status", OTHER_TOKEN);
    assert_true(json_object_object_get_ex(status, "viewer", &viewer));
    assert_string_equal(string_field(viewer, "role"), "submit");
    assert_int_equal(int_field(viewer, "uid"), OTHER_UID);
    json_object_put(status);
}

/* Makes a self-signed certificate for 127.0.0.1 in dir; false without openssl. */
static bool make_certificate(const char *dir, char *cert, char *key, size_t size)
{
    snprintf(cert, size, "%s/cert.pem", dir);
    snprintf(key, size, "%s/key.pem", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        execlp("openssl", "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
               key, "-out", cert, "-days", "2", "-subj", "/CN=localhost", "-addext",
               "subjectAltName=DNS:localhost,IP:127.0.0.1", (char *)NULL);
        _exit(127);
    }
    int status;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* tls-cert and tls-key: the listener speaks HTTPS (and only HTTPS), tokens still apply. */
static void test_https(void **state)
{
    (void)state;
    if (!tide_test_python()) {
        fprintf(stderr, "skipped: python3 with prometheus_client is needed to scrape\n");
        skip();
    }
    struct tide_test_daemon *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    if (!tide_test_daemon_init(d, "metrics-tls")) {
        free(d);
        skip();
    }
    char cert[600], key[600];
    if (!make_certificate(d->dir, cert, key, sizeof(cert))) {
        tide_test_daemon_finish(d);
        free(d);
        fprintf(stderr, "skipped: openssl could not make a certificate (apt install openssl)\n");
        skip();
    }
    chmod(key, 0600);
    char tokens[600];
    snprintf(tokens, sizeof(tokens), "%s/tokens", d->dir);
    FILE *f = fopen(tokens, "w");
    assert_non_null(f);
    fprintf(f, "%s monitor\n", MONITOR_TOKEN);
    fclose(f);
    chmod(tokens, 0600);
    d->http_port = tide_test_free_port();
    char listen[32];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", d->http_port);
    const char *args[] = {"--metrics-listen", listen, "--tls-cert", cert, "--tls-key", key,
                          "--tokens",         tokens, NULL};
    if (!tide_test_daemon_start(d, args)) {
        tide_test_daemon_finish(d);
        free(d);
        fail_msg("tided with metrics-listen over TLS did not start");
    }
    json_object *o = get(d, "metrics", "/metrics", MONITOR_TOKEN, cert);
    assert_int_equal(status_of(o), 200);
    assert_true(ONE_SAMPLE(o, "tide_device_total_bytes", "device", "cpu:0") == (double)(1u << 30));
    json_object_put(o);
    o = get(d, "raw", "/api/status", NULL, cert);
    assert_int_equal(status_of(o), 401);
    json_object_put(o);
    /* Plain HTTP on the TLS port gets no HTTP answer. */
    static const char plain[] = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(raw_request(d->http_port, plain, sizeof(plain) - 1), 0);
    assert_int_equal(tide_test_daemon_stop(d), 0);
    tide_test_daemon_finish(d);
    free(d);
}

/* Listening anywhere but loopback without TLS and tokens, bad values, a taken port. */
static void test_refused_configurations(void **state)
{
    (void)state;
    struct tide_test_daemon *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    if (!tide_test_daemon_init(d, "metrics-refused")) {
        free(d);
        skip();
    }
    char err[16384];
    const char *open_to_all[] = {"--metrics-listen", "0.0.0.0:9464", NULL};
    assert_int_equal(tide_test_daemon_run_to_exit(d, open_to_all, err, sizeof(err)), 2);
    if (!strstr(err, "metrics-listen = 0.0.0.0:9464 is not a loopback address"))
        fail_msg("unexpected error: %s", err);
    const char *bad[] = {"--metrics-listen", "metrics.example.com:9464", NULL};
    assert_int_equal(tide_test_daemon_run_to_exit(d, bad, err, sizeof(err)), 2);
    if (!strstr(err, "--metrics-listen: want HOST:PORT") ||
        !strstr(err, "got \"metrics.example.com:9464\""))
        fail_msg("unexpected error: %s", err);

    /* A port someone else listens on: start-up fails, naming the option and errno's reason. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 1), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    char taken[32], want[96];
    snprintf(taken, sizeof(taken), "localhost:%d", ntohs(a.sin_port));
    snprintf(want, sizeof(want), "metrics-listen = %s: cannot bind it: %s", taken,
             strerror(EADDRINUSE));
    const char *busy[] = {"--metrics-listen", taken, NULL};
    assert_int_equal(tide_test_daemon_run_to_exit(d, busy, err, sizeof(err)), 1);
    close(fd);
    if (!strstr(err, want))
        fail_msg("want \"%s\" in: %s", want, err);
    tide_test_daemon_finish(d);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scrape_while_training),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_https),
        cmocka_unit_test(test_refused_configurations),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
