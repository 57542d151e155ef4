/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/output.c: how tidectl writes what more than one command
 * shows. JSON: one object per line on stdout under --json, so that scripts
 * can read stdout line by line. Every line is a json-c object serialised by
 * json-c (escaping is json-c's, never ours); the typed setters here hold
 * the rules for numbers (NaN and infinities as null, doubles to nine
 * significant digits), and the builders the shapes of a job, a step result,
 * a plan report and an error. Text: the plan report that `plan` and `get`
 * print and the job table of `status` and `jobs`.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include <json.h>

#include "tidectl.h"

/* ============================================================================
 * JSON output: json-c objects, one per line
 * ========================================================================== */

/*
 * Set when an allocation failed while an object was being built, so that
 * tidectl_json_print_line() prints nothing rather than an object with a
 * field missing or null. tidectl has one thread; it is reset by every print.
 */
static bool json_out_of_memory;

/* Adds value (owned) under key; a NULL value stands for JSON null only when null_ok. */
static void json_put(json_object *o, const char *key, json_object *value, bool null_ok)
{
    if (!o || (!value && !null_ok) || json_object_object_add(o, key, value) != 0) {
        json_object_put(value);
        json_out_of_memory = true;
    }
}

json_object *tidectl_json_object(void)
{
    json_object *o = json_object_new_object();
    if (!o)
        json_out_of_memory = true;
    return o;
}

json_object *tidectl_json_array(void)
{
    json_object *a = json_object_new_array();
    if (!a)
        json_out_of_memory = true;
    return a;
}

void tidectl_json_set(json_object *o, const char *key, json_object *value)
{
    json_put(o, key, value, false);
}

void tidectl_json_append(json_object *array, json_object *value)
{
    if (!array || !value || json_object_array_add(array, value) != 0) {
        json_object_put(value);
        json_out_of_memory = true;
    }
}

void tidectl_json_set_string(json_object *o, const char *key, const char *s)
{
    json_put(o, key, json_object_new_string(s ? s : ""), false);
}

void tidectl_json_set_int(json_object *o, const char *key, int64_t v)
{
    json_put(o, key, json_object_new_int64(v), false);
}

void tidectl_json_set_uint(json_object *o, const char *key, uint64_t v)
{
    json_put(o, key, json_object_new_uint64(v), false);
}

void tidectl_json_set_bool(json_object *o, const char *key, bool v)
{
    json_put(o, key, json_object_new_boolean(v), false);
}

void tidectl_json_set_double(json_object *o, const char *key, double v)
{
    /*
     * JSON has no NaN or infinity (json-c would write NaN and Infinity,
     * which no strict parser reads): they become null, as they always have
     * in tidectl's output. Finite values keep nine significant digits, as
     * many as a float needs to come back bit for bit, instead of json-c's
     * %.17g noise ("0.10000000000000001").
     */
    if (!isfinite(v)) {
        json_put(o, key, NULL, true);
        return;
    }
    char text[32];
    snprintf(text, sizeof(text), "%.9g", v);
    json_put(o, key, json_object_new_double_s(v, text), false);
}

void tidectl_json_add_plan(json_object *o, const struct tide_job_plan_report *p, bool partitions)
{
    tidectl_json_set_uint(o, "nodes", p->nodes);
    tidectl_json_set_uint(o, "budget_bytes", p->budget_bytes);
    tidectl_json_set_uint(o, "predicted_peak_bytes", p->predicted_peak_bytes);
    tidectl_json_set_bool(o, "fits", p->fits);
    tidectl_json_set_uint(o, "min_budget_bytes", p->min_budget_bytes);
    tidectl_json_set_string(o, "min_budget_node", p->min_budget_node);
    tidectl_json_set_uint(o, "floor_bytes", p->floor_bytes);
    tidectl_json_set_string(o, "floor_node", p->floor_node);
    tidectl_json_set_uint(o, "swap_in_bytes", p->swap_in_bytes);
    tidectl_json_set_uint(o, "swap_out_bytes", p->swap_out_bytes);
    tidectl_json_set_uint(o, "fetch_bytes", p->fetch_bytes);
    tidectl_json_set_uint(o, "write_back_bytes", p->write_back_bytes);
    tidectl_json_set_uint(o, "partition_size", p->partition_size);
    tidectl_json_set_uint(o, "swap_threshold", p->swap_threshold);
    tidectl_json_set_uint(o, "prefetch_distance", p->prefetch_distance);
    tidectl_json_set_uint(o, "host_bytes", p->host_bytes);
    tidectl_json_set_uint(o, "plan_us", p->plan_us);
    tidectl_json_set_string(o, "message", p->message);
    tidectl_json_set_double(o, "predicted_step_ms", p->predicted_step_ms);
    tidectl_json_set_double(o, "predicted_stall_ms", p->predicted_stall_ms);
    tidectl_json_set_string(o, "device_profile", p->device_profile);
    tidectl_json_set_uint(o, "host_budget_bytes", p->host_budget_bytes);
    tidectl_json_set_uint(o, "recompute_bytes", p->recompute_bytes);
    tidectl_json_set_double(o, "recompute_ms", p->recompute_ms);
    tidectl_json_set_uint(o, "products", p->products);
    tidectl_json_set_uint(o, "tf32_products", p->tf32_products);
    if (!partitions)
        return;
    tidectl_json_set_uint(o, "n_partitions", p->n_partitions);
    json_object *list = tidectl_json_array();
    for (uint32_t i = 0; i < p->n_partitions; i++) {
        const struct tide_job_partition_report *q = &p->partitions[i];
        json_object *part = tidectl_json_object();
        tidectl_json_set_uint(part, "index", q->index);
        tidectl_json_set_uint(part, "nodes", q->nodes);
        tidectl_json_set_uint(part, "resident_bytes", q->resident_bytes);
        tidectl_json_set_uint(part, "swap_in_bytes", q->swap_in_bytes);
        tidectl_json_set_uint(part, "swap_out_bytes", q->swap_out_bytes);
        tidectl_json_set_uint(part, "fetch_bytes", q->fetch_bytes);
        tidectl_json_set_uint(part, "write_back_bytes", q->write_back_bytes);
        tidectl_json_set_string(part, "peak_node", q->peak_node);
        tidectl_json_append(list, part);
    }
    tidectl_json_set(o, "partitions", list);
}

json_object *tidectl_json_job(const struct tide_job_info *j)
{
    json_object *o = tidectl_json_object();
    tidectl_json_set_string(o, "id", j->id);
    tidectl_json_set_string(o, "name", j->name);
    tidectl_json_set_uint(o, "owner_uid", j->owner_uid);
    tidectl_json_set_string(o, "state", tide_job_state_name(j->state));
    tidectl_json_set_uint(o, "steps", j->steps);
    tidectl_json_set_double(o, "last_loss", j->last_loss);
    tidectl_json_set_uint(o, "device_budget_bytes", j->device_budget_bytes);
    tidectl_json_set_uint(o, "device_high_water_bytes", j->device_high_water_bytes);
    tidectl_json_set_uint(o, "host_bytes", j->host_bytes);
    tidectl_json_set_uint(o, "h2d_bytes_total", j->h2d_bytes_total);
    tidectl_json_set_uint(o, "d2h_bytes_total", j->d2h_bytes_total);
    tidectl_json_set_double(o, "steps_per_second", j->steps_per_second);
    tidectl_json_set_int(o, "created_us", j->created_us);
    tidectl_json_set_int(o, "updated_us", j->updated_us);
    tidectl_json_set_string(o, "message", j->message);
    tidectl_json_set_uint(o, "last_checkpoint_step", j->last_checkpoint_step);
    tidectl_json_set_int(o, "priority", j->priority);
    tidectl_json_set_uint(o, "queue_position", j->queue_position);
    tidectl_json_set_int(o, "queued_us", j->queued_us);
    tidectl_json_set_uint(o, "device", j->device);
    if (j->has_plan) {
        json_object *plan = tidectl_json_object();
        tidectl_json_add_plan(plan, &j->plan, false);
        tidectl_json_set(o, "plan", plan);
    }
    return o;
}

json_object *tidectl_json_step(const struct tide_step_result *r)
{
    json_object *o = tidectl_json_object();
    tidectl_json_set_uint(o, "step", r->step);
    tidectl_json_set_double(o, "loss", r->loss);
    tidectl_json_set_uint(o, "step_us", r->step_us);
    tidectl_json_set_uint(o, "device_high_water_bytes", r->device_high_water_bytes);
    tidectl_json_set_uint(o, "h2d_bytes", r->h2d_bytes);
    tidectl_json_set_uint(o, "d2h_bytes", r->d2h_bytes);
    tidectl_json_set_uint(o, "stall_us", r->stall_us);
    tidectl_json_set_bool(o, "eval_only", r->eval_only);
    return o;
}

int tidectl_json_print_error(const char *code, int code_number, const char *message, int exit_code)
{
    json_object *error = tidectl_json_object();
    tidectl_json_set_string(error, "code", code);
    if (code_number >= 0)
        tidectl_json_set_int(error, "code_number", code_number);
    tidectl_json_set_string(error, "message", message);
    tidectl_json_set_int(error, "exit", exit_code);
    json_object *line = tidectl_json_object();
    tidectl_json_set(line, "error", error);
    return tidectl_json_print_line(line);
}

int tidectl_json_print_line(json_object *o)
{
    /* One line, no spaces; paths keep their slashes ("/" needs no escape in JSON). */
    const int flags = JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE;
    const char *text = o && !json_out_of_memory ? json_object_to_json_string_ext(o, flags) : NULL;
    int rc = TIDECTL_EXIT_OK;
    if (text) {
        fputs(text, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    } else {
        fprintf(stderr, "tidectl: out of memory writing a JSON line\n");
        rc = TIDECTL_EXIT_RUNTIME;
    }
    json_out_of_memory = false;
    json_object_put(o);
    return rc;
}

/* ============================================================================
 * Text output
 * ========================================================================== */

void tidectl_print_plan(const struct tide_job_plan_report *p, bool partitions)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("  budget          %s\n", tidectl_fmt_bytes(p->budget_bytes, b1, sizeof(b1)));
    printf("  predicted peak  %s  %s\n", tidectl_fmt_bytes(p->predicted_peak_bytes, b1, sizeof(b1)),
           p->fits ? "(fits)" : "(DOES NOT FIT)");
    if (!p->fits && p->min_budget_bytes)
        printf("  min budget      %s, set by %s\n",
               tidectl_fmt_bytes(p->min_budget_bytes, b1, sizeof(b1)), p->min_budget_node);
    if (p->floor_bytes)
        printf("  floor           %s, set by %s\n",
               tidectl_fmt_bytes(p->floor_bytes, b1, sizeof(b1)), p->floor_node);
    if (p->message[0])
        printf("  why             %s\n", p->message);
    printf("  per step        swap in %s, swap out %s, fetch %s, write back %s\n",
           tidectl_fmt_bytes(p->swap_in_bytes, b1, sizeof(b1)),
           tidectl_fmt_bytes(p->swap_out_bytes, b2, sizeof(b2)),
           tidectl_fmt_bytes(p->fetch_bytes, b3, sizeof(b3)),
           tidectl_fmt_bytes(p->write_back_bytes, b4, sizeof(b4)));
    printf("  nodes           %" PRIu32 " after the memory passes, in partitions of %" PRIu32
           "; swap threshold %" PRIu32 ", prefetch %" PRIu32 "\n",
           p->nodes, p->partition_size, p->swap_threshold, p->prefetch_distance);
    if (p->host_budget_bytes)
        printf("  host memory     %s of a %s host budget\n",
               tidectl_fmt_bytes(p->host_bytes, b1, sizeof(b1)),
               tidectl_fmt_bytes(p->host_budget_bytes, b2, sizeof(b2)));
    else
        printf("  host memory     %s\n", tidectl_fmt_bytes(p->host_bytes, b1, sizeof(b1)));
    if (p->device_profile[0])
        printf("  predicted step  %.2f ms on %s, compute waiting %.2f ms for copies\n",
               p->predicted_step_ms, p->device_profile, p->predicted_stall_ms);
    if (p->products && (p->tf32_products == 0 || p->tf32_products == p->products))
        printf("  math            %s in its %" PRIu32 " convolutions and matrix products\n",
               p->tf32_products ? "tf32" : "fp32", p->products);
    else if (p->products)
        printf("  math            tf32 in %" PRIu32 " of %" PRIu32
               " convolutions and matrix products, fp32 in the rest\n",
               p->tf32_products, p->products);
    printf("  recomputed      %s per step, %.3f ms estimated\n",
           tidectl_fmt_bytes(p->recompute_bytes, b1, sizeof(b1)), p->recompute_ms);
    printf("  planned in      %.1f ms\n", (double)p->plan_us / 1000.0);
    if (!partitions || p->n_partitions == 0)
        return;
    printf("\n  %5s %6s %11s %11s %11s %11s %11s  %s\n", "PART", "NODES", "RESIDENT", "SWAP-IN",
           "SWAP-OUT", "FETCH", "WRITE-BACK", "PEAK NODE");
    uint32_t empty = 0;
    for (uint32_t i = 0; i < p->n_partitions; i++) {
        const struct tide_job_partition_report *q = &p->partitions[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32];
        /* A partition the memory passes left without work: counted, not listed. */
        if (q->nodes == 0 && q->resident_bytes == 0 && q->swap_in_bytes == 0 &&
            q->swap_out_bytes == 0 && q->fetch_bytes == 0 && q->write_back_bytes == 0) {
            empty++;
            continue;
        }
        printf("  %5" PRIu32 " %6" PRIu32 " %11s %11s %11s %11s %11s  %s\n", q->index, q->nodes,
               tidectl_fmt_bytes(q->resident_bytes, c1, sizeof(c1)),
               tidectl_fmt_bytes(q->swap_in_bytes, c2, sizeof(c2)),
               tidectl_fmt_bytes(q->swap_out_bytes, c3, sizeof(c3)),
               tidectl_fmt_bytes(q->fetch_bytes, c4, sizeof(c4)),
               tidectl_fmt_bytes(q->write_back_bytes, c5, sizeof(c5)), q->peak_node);
    }
    if (empty)
        printf("  (%" PRIu32 " of %" PRIu32 " partitions are empty: no nodes, no bytes; not listed)\n",
               empty, p->n_partitions);
}

void tidectl_print_jobs_table(const struct tide_job_info *jobs, size_t n)
{
    if (n == 0) {
        printf("no jobs\n");
        return;
    }
    printf("%-20s %-18s %-8s %-10s %3s %8s %9s %10s %10s %10s %7s\n", "ID", "NAME", "OWNER",
           "STATE", "DEV", "STEPS", "LOSS", "BUDGET", "HIGH-WATER", "H2D+D2H", "STEP/S");
    for (size_t i = 0; i < n; i++) {
        const struct tide_job_info *j = &jobs[i];
        char b1[32], b2[32], b3[32], user[64];
        printf("%-20s %-18.18s %-8.8s %-10s %3" PRIu32 " %8" PRIu64 " %9.4f %10s %10s %10s %7.2f\n",
               j->id, j->name, tidectl_fmt_user(j->owner_uid, user, sizeof(user)),
               tide_job_state_name(j->state), j->device, j->steps, (double)j->last_loss,
               tidectl_fmt_bytes(j->device_budget_bytes, b1, sizeof(b1)),
               tidectl_fmt_bytes(j->device_high_water_bytes, b2, sizeof(b2)),
               tidectl_fmt_bytes(j->h2d_bytes_total + j->d2h_bytes_total, b3, sizeof(b3)),
               j->steps_per_second);
    }
}

/* What a Remove call deleted: a line per job, then the total (rm and prune). */
int tidectl_print_removal(const struct tide_removal *r, bool json)
{
    char b[32];
    if (json) {
        struct json_object *line = tidectl_json_object();
        struct json_object *ids = tidectl_json_array();
        for (size_t i = 0; i < r->n_jobs; i++)
            tidectl_json_append(ids, json_object_new_string(r->job_ids[i]));
        tidectl_json_set(line, "removed", ids);
        tidectl_json_set_uint(line, "jobs", r->n_jobs);
        tidectl_json_set_uint(line, "bytes_freed", r->bytes_freed);
        return tidectl_json_print_line(line);
    }
    for (size_t i = 0; i < r->n_jobs; i++)
        printf("removed %s\n", r->job_ids[i]);
    printf("%zu job%s removed, %s freed\n", r->n_jobs, r->n_jobs == 1 ? "" : "s",
           tidectl_fmt_bytes(r->bytes_freed, b, sizeof(b)));
    return TIDECTL_EXIT_OK;
}
