/* SPDX-License-Identifier: MIT */
/*
 * metrics-export.c: a metrics snapshot as Prometheus's text exposition
 * format (version 0.0.4) and as the dashboard's JSON (through json-c).
 *
 * Both show a viewer the daemon-wide numbers (device, queue, RPCs, as the
 * Status RPC does) and the jobs tided_identity_may_see lets it see. The
 * metric names and labels are listed in docs/metrics.md; keep the two
 * together.
 *
 * Threads: the HTTP listener's threads call these; they read only the
 * immutable snapshot and their arguments.
 */
#include "daemon/metrics.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "daemon/server.h"

/* ============================================================================
 * Prometheus text format
 * ========================================================================== */

/* A label value with \, " and newline escaped, as the format wants. */
static void put_label_value(FILE *f, const char *value)
{
    fputc('"', f);
    for (const char *p = value; *p; p++) {
        switch (*p) {
        case '\\':
            fputs("\\\\", f);
            break;
        case '"':
            fputs("\\\"", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        default:
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

static void put_double(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", v);
}

static void put_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{job="..",name="..",user="..",device=".."[,extra="value"]} without the value. */
static void put_job_series(FILE *f, const char *name, const char *suffix,
                           const struct tided_metrics_snapshot *s,
                           const struct tided_metrics_job *j, const char *extra,
                           const char *extra_value)
{
    (void)s; /* the device is the job's own now */
    fprintf(f, "%s%s{job=", name, suffix);
    put_label_value(f, j->id);
    fputs(",name=", f);
    put_label_value(f, j->name);
    fputs(",user=", f);
    put_label_value(f, j->user);
    fputs(",device=", f);
    put_label_value(f, j->device);
    if (extra) {
        fprintf(f, ",%s=", extra);
        put_label_value(f, extra_value);
    }
    fputs("} ", f);
}

/* A per-job integer gauge or counter over the visible jobs. */
#define JOB_FAMILY(f, s, viewer, name, type, help, value_expr)                                     \
    do {                                                                                           \
        put_family(f, name, type, help);                                                           \
        for (size_t i_ = 0; i_ < (s)->n_jobs; i_++) {                                              \
            const struct tided_metrics_job *j = &(s)->jobs[i_];                                    \
            if (!tided_identity_may_see(viewer, j->owner))                                         \
                continue;                                                                          \
            put_job_series(f, name, "", s, j, NULL, NULL);                                         \
            value_expr;                                                                            \
            fputc('\n', f);                                                                        \
        }                                                                                          \
    } while (0)

char *tided_metrics_prometheus(const struct tided_metrics_snapshot *s,
                               const struct tided_identity *viewer, size_t *len)
{
    char *text = NULL;
    *len = 0;
    FILE *f = open_memstream(&text, len);
    if (!f)
        return NULL;

    put_family(f, "tide_build_info", "gauge", "tided's version and device backend (always 1).");
    fputs("tide_build_info{version=", f);
    put_label_value(f, s->version);
    fputs(",backend=", f);
    put_label_value(f, s->backend);
    fputs("} 1\n", f);
    put_family(f, "tide_start_time_seconds", "gauge", "When tided started, in Unix seconds.");
    fprintf(f, "tide_start_time_seconds %.3f\n", (double)s->started_us / 1e6);

    static const struct {
        const char *name, *help;
        size_t offset;
    } device[] = {
        {"tide_device_total_bytes", "Device memory tided offers jobs.",
         offsetof(struct tided_metrics_device, total_bytes)},
        {"tide_device_reserved_bytes", "Device memory reserved by admitted jobs' budgets.",
         offsetof(struct tided_metrics_device, reserved_bytes)},
        {"tide_device_used_bytes",
         "Device memory the jobs holding a session touch at their peak (their high-water marks).",
         offsetof(struct tided_metrics_device, used_bytes)},
    };
    /* One sample per device, labelled as the jobs' series are ("cpu:1"). */
    for (size_t i = 0; i < sizeof(device) / sizeof(device[0]); i++) {
        put_family(f, device[i].name, "gauge", device[i].help);
        for (size_t k = 0; k < s->n_devices; k++) {
            fprintf(f, "%s{device=", device[i].name);
            put_label_value(f, s->devices[k].id);
            fprintf(f, "} %" PRIu64 "\n",
                    *(const uint64_t *)((const char *)&s->devices[k] + device[i].offset));
        }
    }
    put_family(f, "tide_queue_length", "gauge",
               "Tasks (steps, compilations, checkpoints, file writes) handed to the worker "
               "thread and not yet back.");
    fprintf(f, "tide_queue_length %" PRIu64 "\n", s->queue_length);

    put_family(f, "tide_jobs", "gauge", "Jobs the viewer may see, by state.");
    for (int state = TIDED_METRICS_FIRST_STATE; state <= TIDED_METRICS_LAST_STATE; state++) {
        uint64_t n = 0;
        for (size_t i = 0; i < s->n_jobs; i++)
            n += s->jobs[i].state == state && tided_identity_may_see(viewer, s->jobs[i].owner);
        fputs("tide_jobs{state=", f);
        put_label_value(f, tided_metrics_state_name(state));
        fprintf(f, "} %" PRIu64 "\n", n);
    }

    put_family(f, "tide_rpcs_total", "counter",
               "gRPC calls that ended, by method and status code.");
    for (size_t i = 0; i < s->n_rpcs; i++) {
        fputs("tide_rpcs_total{method=", f);
        put_label_value(f, s->rpcs[i].method);
        fputs(",code=", f);
        put_label_value(f, tided_metrics_code_name(s->rpcs[i].code));
        fprintf(f, "} %" PRIu64 "\n", s->rpcs[i].count);
    }

    JOB_FAMILY(f, s, viewer, "tide_job_steps_total", "counter",
               "Training steps the job has done (a resumed checkpoint's steps included).",
               fprintf(f, "%" PRIu64, j->steps));

    put_family(f, "tide_job_step_seconds", "histogram",
               "Time of the job's training steps run by this tided.");
    for (size_t i = 0; i < s->n_jobs; i++) {
        const struct tided_metrics_job *j = &s->jobs[i];
        if (!tided_identity_may_see(viewer, j->owner))
            continue;
        uint64_t cumulative = 0;
        for (int b = 0; b < TIDED_METRICS_STEP_BUCKETS; b++) {
            char le[32];
            snprintf(le, sizeof(le), "%g", tided_metrics_step_buckets[b]);
            cumulative += j->step_buckets[b];
            put_job_series(f, "tide_job_step_seconds", "_bucket", s, j, "le", le);
            fprintf(f, "%" PRIu64 "\n", cumulative);
        }
        put_job_series(f, "tide_job_step_seconds", "_bucket", s, j, "le", "+Inf");
        fprintf(f, "%" PRIu64 "\n", j->step_count);
        put_job_series(f, "tide_job_step_seconds", "_sum", s, j, NULL, NULL);
        put_double(f, j->step_seconds_sum);
        fputc('\n', f);
        put_job_series(f, "tide_job_step_seconds", "_count", s, j, NULL, NULL);
        fprintf(f, "%" PRIu64 "\n", j->step_count);
    }

    JOB_FAMILY(f, s, viewer, "tide_job_swap_in_bytes_total", "counter",
               "Bytes the job copied host to device: swap-ins and fetches of host-homed tensors.",
               fprintf(f, "%" PRIu64, j->swap_in_bytes));
    JOB_FAMILY(f, s, viewer, "tide_job_swap_out_bytes_total", "counter",
               "Bytes the job copied device to host: swap-outs and write-backs.",
               fprintf(f, "%" PRIu64, j->swap_out_bytes));
    JOB_FAMILY(f, s, viewer, "tide_job_stall_seconds_total", "counter",
               "Time the job's compute stream waited on copies, when the executor measures it.",
               put_double(f, j->stall_seconds));
    JOB_FAMILY(f, s, viewer, "tide_job_high_water_bytes", "gauge",
               "The most device memory one step of the job has used.",
               fprintf(f, "%" PRIu64, j->high_water_bytes));
    JOB_FAMILY(f, s, viewer, "tide_job_budget_bytes", "gauge", "The job's device memory budget.",
               fprintf(f, "%" PRIu64, j->budget_bytes));
    JOB_FAMILY(f, s, viewer, "tide_job_host_bytes", "gauge",
               "The job's host arena: homes of host-side tensors, swap slots, staging.",
               fprintf(f, "%" PRIu64, j->host_bytes));

    put_family(f, "tide_job_loss", "gauge", "The loss of the job's last training step.");
    for (size_t i = 0; i < s->n_jobs; i++) {
        const struct tided_metrics_job *j = &s->jobs[i];
        if (!j->has_loss || j->steps == 0 || !tided_identity_may_see(viewer, j->owner))
            continue;
        put_job_series(f, "tide_job_loss", "", s, j, NULL, NULL);
        put_double(f, j->last_loss);
        fputc('\n', f);
    }

    put_family(f, "tide_job_state", "gauge",
               "1 for the state the job is in, 0 for the others (SUBMITTED, COMPILING, READY, "
               "RUNNING, DONE, FAILED, CANCELLED, PARKED, QUEUED).");
    for (size_t i = 0; i < s->n_jobs; i++) {
        const struct tided_metrics_job *j = &s->jobs[i];
        if (!tided_identity_may_see(viewer, j->owner))
            continue;
        for (int state = TIDED_METRICS_FIRST_STATE; state <= TIDED_METRICS_LAST_STATE; state++) {
            put_job_series(f, "tide_job_state", "", s, j, "state", tided_metrics_state_name(state));
            fprintf(f, "%d\n", j->state == state);
        }
    }

    bool failed = ferror(f) != 0;
    if (fclose(f) != 0 || failed) {
        free(text);
        *len = 0;
        return NULL;
    }
    return text;
}

/* ============================================================================
 * JSON
 * ========================================================================== */

/* A number with the digits a float has, or null when it is not finite. */
static json_object *json_real(double v, const char *format)
{
    if (!isfinite(v))
        return NULL; /* json-c writes NULL as null */
    char text[40];
    snprintf(text, sizeof(text), format, v);
    return json_object_new_double_s(v, text);
}

static json_object *json_u64(uint64_t v)
{
    return json_object_new_uint64(v);
}

/* Serialises and frees o; NULL on OOM. */
static char *json_finish(json_object *o, size_t *len)
{
    if (!o)
        return NULL;
    size_t n = 0;
    const char *text = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
    char *copy = text ? malloc(n + 1) : NULL;
    if (copy) {
        memcpy(copy, text, n);
        copy[n] = '\0';
        *len = n;
    }
    json_object_put(o);
    return copy;
}

char *tided_metrics_status_json(const struct tided_metrics_snapshot *s,
                                const struct tided_identity *viewer, const char *role, size_t *len)
{
    json_object *o = json_object_new_object();
    if (!o)
        return NULL;
    json_object_object_add(o, "version", json_object_new_string(s->version));
    json_object_object_add(o, "backend", json_object_new_string(s->backend));
    json_object_object_add(o, "serving", json_object_new_boolean(s->serving));
    json_object_object_add(o, "time", json_real((double)s->built_us / 1e6, "%.3f"));
    json_object_object_add(o, "started", json_real((double)s->started_us / 1e6, "%.3f"));
    json_object *device = json_object_new_object();
    json_object_object_add(device, "id", json_object_new_string(s->device));
    json_object_object_add(device, "name", json_object_new_string(s->device_name));
    json_object_object_add(device, "total_bytes", json_u64(s->device_total_bytes));
    json_object_object_add(device, "reserved_bytes", json_u64(s->device_reserved_bytes));
    json_object_object_add(device, "used_bytes", json_u64(s->device_used_bytes));
    json_object_object_add(o, "device", device);
    json_object *devices = json_object_new_array();
    for (size_t k = 0; k < s->n_devices; k++) {
        const struct tided_metrics_device *v = &s->devices[k];
        json_object *e = json_object_new_object();
        json_object_object_add(e, "index", json_u64(k));
        json_object_object_add(e, "id", json_object_new_string(v->id));
        json_object_object_add(e, "name", json_object_new_string(v->name));
        json_object_object_add(e, "total_bytes", json_u64(v->total_bytes));
        json_object_object_add(e, "reserved_bytes", json_u64(v->reserved_bytes));
        json_object_object_add(e, "used_bytes", json_u64(v->used_bytes));
        json_object_array_add(devices, e);
    }
    json_object_object_add(o, "devices", devices);
    json_object_object_add(o, "default_budget_bytes", json_u64(s->default_budget_bytes));
    json_object_object_add(o, "max_budget_bytes", json_u64(s->max_budget_bytes));
    json_object_object_add(o, "queue_length", json_u64(s->queue_length));
    json_object *states = json_object_new_object();
    for (int state = TIDED_METRICS_FIRST_STATE; state <= TIDED_METRICS_LAST_STATE; state++) {
        uint64_t n = 0;
        for (size_t i = 0; i < s->n_jobs; i++)
            n += s->jobs[i].state == state && tided_identity_may_see(viewer, s->jobs[i].owner);
        json_object_object_add(states, tided_metrics_state_name(state), json_u64(n));
    }
    json_object_object_add(o, "jobs", states);
    json_object *who = json_object_new_object();
    json_object_object_add(who, "role", json_object_new_string(role));
    json_object_object_add(who, "all_jobs", json_object_new_boolean(viewer->admin));
    json_object_object_add(who, "uid", viewer->admin ? NULL : json_u64(viewer->uid));
    json_object_object_add(o, "viewer", who);
    return json_finish(o, len);
}

static json_object *job_json(const struct tided_metrics_snapshot *s,
                             const struct tided_metrics_job *j)
{
    json_object *o = json_object_new_object();
    if (!o)
        return NULL;
    json_object_object_add(o, "id", json_object_new_string(j->id));
    json_object_object_add(o, "name", json_object_new_string(j->name));
    json_object_object_add(o, "user", json_object_new_string(j->user));
    json_object_object_add(o, "uid", json_u64(j->owner));
    json_object_object_add(o, "device", json_object_new_string(j->device));
    json_object_object_add(o, "state", json_object_new_string(tided_metrics_state_name(j->state)));
    json_object_object_add(o, "message", json_object_new_string(j->message));
    json_object_object_add(o, "steps", json_u64(j->steps));
    json_object_object_add(o, "loss",
                           j->has_loss && j->steps > 0 ? json_real(j->last_loss, "%.7g") : NULL);
    json_object *steps = json_object_new_array(), *values = json_object_new_array();
    for (size_t i = 0; j->losses && i < j->losses->n; i++) {
        json_object_array_add(steps, json_u64(j->losses->steps[i]));
        json_object_array_add(values, json_real(j->losses->values[i], "%.7g"));
    }
    json_object *losses = json_object_new_object();
    json_object_object_add(losses, "steps", steps);
    json_object_object_add(losses, "values", values);
    json_object_object_add(o, "losses", losses);
    json_object_object_add(o, "step_seconds",
                           j->step_count ? json_real(j->last_step_seconds, "%.6g") : NULL);
    json_object_object_add(
        o, "step_seconds_mean",
        j->step_count ? json_real(j->step_seconds_sum / (double)j->step_count, "%.6g") : NULL);
    json_object_object_add(o, "steps_per_second", json_real(j->steps_per_second, "%.4g"));
    json_object_object_add(o, "budget_bytes", json_u64(j->budget_bytes));
    json_object_object_add(o, "high_water_bytes", json_u64(j->high_water_bytes));
    json_object_object_add(o, "host_bytes", json_u64(j->host_bytes));
    json_object_object_add(o, "swap_in_bytes", json_u64(j->swap_in_bytes));
    json_object_object_add(o, "swap_out_bytes", json_u64(j->swap_out_bytes));
    json_object_object_add(o, "stall_seconds", json_real(j->stall_seconds, "%.6g"));
    json_object_object_add(o, "created", json_real((double)j->created_us / 1e6, "%.3f"));
    json_object_object_add(o, "updated", json_real((double)j->updated_us / 1e6, "%.3f"));
    /* What the job's pages serve (http.c): its plan picture, its latest trace; null when none. */
    char path[96];
    snprintf(path, sizeof(path), "/api/jobs/%s/plan.svg", j->id);
    json_object_object_add(o, "plan_svg", j->plan_svg ? json_object_new_string(path) : NULL);
    json_object *trace = NULL;
    if (j->trace) {
        trace = json_object_new_object();
        snprintf(path, sizeof(path), "/api/jobs/%s/trace.json", j->id);
        json_object_object_add(trace, "path", json_object_new_string(path));
        json_object_object_add(trace, "first_step", json_u64(j->trace->first_step));
        json_object_object_add(trace, "last_step", json_u64(j->trace->last_step));
        json_object_object_add(trace, "bytes", json_u64(j->trace->len));
    }
    json_object_object_add(o, "trace", trace);
    return o;
}

char *tided_metrics_jobs_json(const struct tided_metrics_snapshot *s,
                              const struct tided_identity *viewer, size_t *len)
{
    json_object *o = json_object_new_object();
    json_object *jobs = json_object_new_array();
    if (!o || !jobs) {
        json_object_put(o);
        json_object_put(jobs);
        return NULL;
    }
    json_object_object_add(o, "time", json_real((double)s->built_us / 1e6, "%.3f"));
    for (size_t i = 0; i < s->n_jobs; i++) {
        if (tided_identity_may_see(viewer, s->jobs[i].owner))
            json_object_array_add(jobs, job_json(s, &s->jobs[i]));
    }
    json_object_object_add(o, "jobs", jobs);
    return json_finish(o, len);
}
