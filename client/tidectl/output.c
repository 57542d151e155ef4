/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/output.c: how tidectl writes what more than one command
 * shows. JSON: one object per line on stdout under --json, so that scripts
 * can read stdout line by line (a string escaper, numbers with NaN as null,
 * a job, a step result and a plan report). Text: the plan report that
 * `plan` and `get` print and the job table of `status` and `jobs`.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "tidectl.h"

/* ============================================================================
 * JSON output: one object per line
 * ========================================================================== */

void tidectl_json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"':
            fputs("\\\"", out);
            break;
        case '\\':
            fputs("\\\\", out);
            break;
        case '\n':
            fputs("\\n", out);
            break;
        case '\r':
            fputs("\\r", out);
            break;
        case '\t':
            fputs("\\t", out);
            break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

void tidectl_json_double(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.9g", v);
    else
        fputs("null", out);
}

void tidectl_json_plan_fields(FILE *out, const struct tide_job_plan_report *p, bool partitions)
{
    fprintf(out,
            "\"nodes\":%" PRIu32 ",\"budget_bytes\":%" PRIu64 ",\"predicted_peak_bytes\":%" PRIu64
            ",\"fits\":%s,\"min_budget_bytes\":%" PRIu64 ",\"min_budget_node\":",
            p->nodes, p->budget_bytes, p->predicted_peak_bytes, p->fits ? "true" : "false",
            p->min_budget_bytes);
    tidectl_json_string(out, p->min_budget_node);
    fprintf(out,
            ",\"swap_in_bytes\":%" PRIu64 ",\"swap_out_bytes\":%" PRIu64 ",\"fetch_bytes\":%" PRIu64
            ",\"write_back_bytes\":%" PRIu64 ",\"partition_size\":%" PRIu32
            ",\"swap_threshold\":%" PRIu32 ",\"prefetch_distance\":%" PRIu32
            ",\"host_bytes\":%" PRIu64 ",\"plan_us\":%" PRIu64 ",\"message\":",
            p->swap_in_bytes, p->swap_out_bytes, p->fetch_bytes, p->write_back_bytes,
            p->partition_size, p->swap_threshold, p->prefetch_distance, p->host_bytes, p->plan_us);
    tidectl_json_string(out, p->message);
    if (!partitions)
        return;
    fprintf(out, ",\"n_partitions\":%" PRIu32 ",\"partitions\":[", p->n_partitions);
    for (uint32_t i = 0; i < p->n_partitions; i++) {
        const struct tide_job_partition_report *q = &p->partitions[i];
        fprintf(out,
                "%s{\"index\":%" PRIu32 ",\"nodes\":%" PRIu32 ",\"resident_bytes\":%" PRIu64
                ",\"swap_in_bytes\":%" PRIu64 ",\"swap_out_bytes\":%" PRIu64
                ",\"fetch_bytes\":%" PRIu64 ",\"write_back_bytes\":%" PRIu64 ",\"peak_node\":",
                i ? "," : "", q->index, q->nodes, q->resident_bytes, q->swap_in_bytes,
                q->swap_out_bytes, q->fetch_bytes, q->write_back_bytes);
        tidectl_json_string(out, q->peak_node);
        fputc('}', out);
    }
    fputc(']', out);
}

void tidectl_json_job(FILE *out, const struct tide_job_info *j)
{
    fputs("{\"id\":", out);
    tidectl_json_string(out, j->id);
    fputs(",\"name\":", out);
    tidectl_json_string(out, j->name);
    fprintf(out, ",\"owner_uid\":%" PRIu32 ",\"state\":", j->owner_uid);
    tidectl_json_string(out, tide_job_state_name(j->state));
    fprintf(out, ",\"steps\":%" PRIu64 ",\"last_loss\":", j->steps);
    tidectl_json_double(out, j->last_loss);
    fprintf(out,
            ",\"device_budget_bytes\":%" PRIu64 ",\"device_high_water_bytes\":%" PRIu64
            ",\"host_bytes\":%" PRIu64 ",\"h2d_bytes_total\":%" PRIu64
            ",\"d2h_bytes_total\":%" PRIu64 ",\"steps_per_second\":",
            j->device_budget_bytes, j->device_high_water_bytes, j->host_bytes, j->h2d_bytes_total,
            j->d2h_bytes_total);
    tidectl_json_double(out, j->steps_per_second);
    fprintf(out,
            ",\"created_us\":%" PRId64 ",\"updated_us\":%" PRId64 ",\"message\":", j->created_us,
            j->updated_us);
    tidectl_json_string(out, j->message);
    fprintf(out, ",\"last_checkpoint_step\":%" PRIu64, j->last_checkpoint_step);
    if (j->has_plan) {
        fputs(",\"plan\":{", out);
        tidectl_json_plan_fields(out, &j->plan, false);
        fputc('}', out);
    }
    fputc('}', out);
}

void tidectl_json_step(FILE *out, const struct tide_step_result *r)
{
    fprintf(out, "{\"step\":%" PRIu64 ",\"loss\":", r->step);
    tidectl_json_double(out, r->loss);
    fprintf(out,
            ",\"step_us\":%" PRIu64 ",\"device_high_water_bytes\":%" PRIu64
            ",\"h2d_bytes\":%" PRIu64 ",\"d2h_bytes\":%" PRIu64 ",\"stall_us\":%" PRIu64
            ",\"eval_only\":%s}",
            r->step_us, r->device_high_water_bytes, r->h2d_bytes, r->d2h_bytes, r->stall_us,
            r->eval_only ? "true" : "false");
}

void tidectl_json_end_line(void)
{
    fputc('\n', stdout);
    fflush(stdout);
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
    printf("  host memory     %s\n", tidectl_fmt_bytes(p->host_bytes, b1, sizeof(b1)));
    printf("  planned in      %.1f ms\n", (double)p->plan_us / 1000.0);
    if (!partitions || p->n_partitions == 0)
        return;
    printf("\n  %5s %6s %11s %11s %11s %11s %11s  %s\n", "PART", "NODES", "RESIDENT", "SWAP-IN",
           "SWAP-OUT", "FETCH", "WRITE-BACK", "PEAK NODE");
    for (uint32_t i = 0; i < p->n_partitions; i++) {
        const struct tide_job_partition_report *q = &p->partitions[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32];
        printf("  %5" PRIu32 " %6" PRIu32 " %11s %11s %11s %11s %11s  %s\n", q->index, q->nodes,
               tidectl_fmt_bytes(q->resident_bytes, c1, sizeof(c1)),
               tidectl_fmt_bytes(q->swap_in_bytes, c2, sizeof(c2)),
               tidectl_fmt_bytes(q->swap_out_bytes, c3, sizeof(c3)),
               tidectl_fmt_bytes(q->fetch_bytes, c4, sizeof(c4)),
               tidectl_fmt_bytes(q->write_back_bytes, c5, sizeof(c5)), q->peak_node);
    }
}

void tidectl_print_jobs_table(const struct tide_job_info *jobs, size_t n)
{
    if (n == 0) {
        printf("no jobs\n");
        return;
    }
    printf("%-20s %-18s %6s %-10s %8s %9s %10s %10s %10s %7s\n", "ID", "NAME", "OWNER", "STATE",
           "STEPS", "LOSS", "BUDGET", "HIGH-WATER", "H2D+D2H", "STEP/S");
    for (size_t i = 0; i < n; i++) {
        const struct tide_job_info *j = &jobs[i];
        char b1[32], b2[32], b3[32];
        printf("%-20s %-18.18s %6" PRIu32 " %-10s %8" PRIu64 " %9.4f %10s %10s %10s %7.2f\n", j->id,
               j->name, j->owner_uid, tide_job_state_name(j->state), j->steps, (double)j->last_loss,
               tidectl_fmt_bytes(j->device_budget_bytes, b1, sizeof(b1)),
               tidectl_fmt_bytes(j->device_high_water_bytes, b2, sizeof(b2)),
               tidectl_fmt_bytes(j->h2d_bytes_total + j->d2h_bytes_total, b3, sizeof(b3)),
               j->steps_per_second);
    }
}
