/* SPDX-License-Identifier: MIT */
/*
 * timemodel.c: tide-bench timemodel — the time model's predicted step
 * against the measured one (swapper/timemodel.h).
 *
 * For --model (the CNN or a ResNet) at --batch, three budgets: the
 * resident plan's peak (nothing moves), the smallest budget that fits
 * (everything it can swaps), and halfway between. At each, a session
 * plans for the device profile (--device-profile, default the CPU backend's
 * own, measured) and trains --steps steps on synthetic data after two
 * warm-up steps. The line per budget gives the plan's predicted_step_ms
 * and the measured step: the median and the fastest of the steps' wall
 * times, the process CPU time per step, and compute's measured stall. On a
 * shared machine the wall times include waiting for a core; the fastest
 * step is the one least disturbed.
 *
 * Threads: the caller's, and the backend's workers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench-json.h"
#include "bench/bench.h"
#include "runtime/profile.h"
#include "runtime/session.h"
#include "tide/dataset.h"
#include "tide/models.h"

#define WARM_UP 2

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct measured {
    double predicted_ms, predicted_stall_ms;
    double median_ms, fastest_ms, cpu_ms, stall_ms;
    uint64_t peak, moved;
    /* With by_op (a profiled run): per op, nodes, predicted and measured ms summed over steps. */
    bool by_op;
    uint32_t op_nodes[TIDE_OP_COUNT];
    double op_predicted[TIDE_OP_COUNT], op_measured[TIDE_OP_COUNT];
};

/* Plans and trains the model under policy; fills *m. 0, or -1 after saying why. */
static int run_budget(const struct bench_options *o, const uint8_t *bytes, size_t len,
                      const int64_t shape[3], const struct tide_train_options *train,
                      const struct tide_memory_policy *policy, struct tide_backend *backend,
                      struct measured *m)
{
    static const char *const fetches[] = {TIDE_MODEL_LOGITS};
    int64_t steps = o->steps > 0 ? o->steps : 10;
    char text[256];
    tide_dataset *ds = NULL;
    tide_dataset_iter *it = NULL;
    struct tide_synthetic_options so = {
        .channels = shape[0], .height = shape[1], .width = shape[2], .seed = o->seed};
    struct tide_session *s = NULL;
    int64_t floats = o->batch * shape[0] * shape[1] * shape[2];
    float *images = malloc((size_t)floats * sizeof(float));
    int32_t *labels = malloc((size_t)o->batch * sizeof(int32_t));
    double *ms = malloc((size_t)steps * sizeof(double));
    struct tide_error err = {0};
    int rc = -1;
    if (!images || !labels || !ms) {
        fprintf(stderr, "tide-bench timemodel: out of memory for a batch\n");
        goto out;
    }
    if (tide_dataset_open_synthetic(&so, "train", &ds, text, sizeof(text)) != 0 ||
        tide_dataset_iter_new(ds, o->batch, 1, 0, &it, text, sizeof(text)) != 0) {
        fprintf(stderr, "tide-bench timemodel: %s\n", text);
        goto out;
    }
    tide_dataset_iter_next(it, images, labels);
    struct tide_session_options opt = tide_session_options_default();
    opt.backend = backend;
    opt.budget_bytes = policy->budget_bytes;
    opt.memory = policy;
    opt.train = train;
    opt.seed = o->seed;
    opt.math = o->math;
    opt.fetches = fetches;
    opt.n_fetches = 1;
    opt.profile = m->by_op;
    if (tide_session_new(bytes, len, &opt, &s, &err) != TIDE_OK)
        goto failed;
    const struct tide_graph *g = tide_session_graph(s);
    const struct tide_plan_report *r = tide_session_plan_report(s);
    m->predicted_ms = r->predicted_step_ms;
    m->predicted_stall_ms = r->predicted_stall_ms;
    m->peak = r->predicted_peak_bytes;
    m->moved = r->swap_in_bytes + r->swap_out_bytes + r->fetch_bytes + r->write_back_bytes;
    double cpu = 0, stall = 0;
    for (int64_t step = 0; step < WARM_UP + steps; step++) {
        struct tide_step_stats stats;
        double cpu0 = tide_bench_process_cpu_s() * 1e3;
        if (tide_session_feed(s, TIDE_MODEL_IMAGES, images, (uint64_t)floats * 4, &err) !=
                TIDE_OK ||
            tide_session_feed(s, TIDE_MODEL_LABELS, labels, (uint64_t)o->batch * 4, &err) !=
                TIDE_OK ||
            tide_session_step(s, &stats, &err) != TIDE_OK)
            goto failed;
        if (stats.high_water_bytes > policy->budget_bytes && policy->budget_bytes) {
            fprintf(stderr,
                    "tide-bench timemodel: high water %" PRIu64 " over the budget %" PRIu64 "\n",
                    stats.high_water_bytes, policy->budget_bytes);
            goto out;
        }
        if (step < WARM_UP)
            continue;
        ms[step - WARM_UP] = stats.step_ms;
        cpu += tide_bench_process_cpu_s() * 1e3 - cpu0;
        stall += stats.stall_ms;
        for (uint32_t v = 0; m->by_op && stats.node_ms && v < g->n_nodes; v++) {
            const struct tide_node *n = &g->nodes[v];
            m->op_nodes[n->op] += step == WARM_UP;
            m->op_predicted[n->op] += tide_time_node_ms(policy->profile, g, n);
            m->op_measured[n->op] += stats.node_ms[v];
        }
    }
    qsort(ms, (size_t)steps, sizeof(*ms), compare_doubles);
    m->median_ms = ms[steps / 2];
    m->fastest_ms = ms[0];
    m->cpu_ms = cpu / (double)steps;
    m->stall_ms = stall / (double)steps;
    rc = 0;
    goto out;
failed:
    fprintf(stderr, "tide-bench timemodel: %s\n", err.message);
out:
    tide_session_free(s);
    tide_dataset_iter_free(it);
    tide_dataset_free(ds);
    free(images);
    free(labels);
    free(ms);
    return rc;
}

/* The resident peak (budget 0) or the smallest budget (budget 1, refused) of the model. */
static int plan_bound(const struct bench_options *o, const uint8_t *bytes, size_t len,
                      const struct tide_train_options *train, struct tide_memory_policy policy,
                      uint64_t budget, struct tide_backend *backend, uint64_t *out)
{
    struct tide_session *s = NULL;
    struct tide_error err = {0};
    policy.budget_bytes = budget;
    enum tide_status st =
        tide_bench_plan(o->model, bytes, len, train, &policy, o->math, backend, &s, &err);
    if (st != TIDE_OK && st != TIDE_DOES_NOT_FIT) {
        fprintf(stderr, "tide-bench timemodel: %s\n", err.message);
        return -1;
    }
    const struct tide_plan_report *r = tide_session_plan_report(s);
    *out = budget ? r->min_budget_bytes : r->predicted_peak_bytes;
    tide_session_free(s);
    return 0;
}

int tide_bench_timemodel(const struct bench_options *o)
{
    int64_t shape[3];
    tide_bench_input_shape(o, &shape[0], &shape[1], &shape[2]);
    size_t len;
    uint8_t *bytes = tide_bench_build_model(o, shape[0], shape[1], shape[2], 10, &len);
    if (!bytes)
        return 1;
    struct tide_train_options train;
    struct tide_memory_policy policy = tide_bench_memory_policy(o);
    struct tide_device_profile local;
    struct tide_backend *backend = NULL;
    struct tide_error err = {0};
    int rc = 1;
    if (tide_bench_train_options(o->optimizer, o->lr, &train) != 0)
        goto out;
    if (tide_backend_create(o->backend, &(struct tide_backend_options){.threads = o->threads},
                            &backend, &err) != TIDE_OK ||
        (!policy.profile && tide_device_profile_local(backend, &local, &err) != TIDE_OK)) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        goto out;
    }
    if (!policy.profile)
        policy.profile = &local;
    uint64_t resident, least;
    if (plan_bound(o, bytes, len, &train, policy, 0, backend, &resident) != 0 ||
        plan_bound(o, bytes, len, &train, policy, 1, backend, &least) != 0)
        goto out;
    const struct tide_device_profile *p = policy.profile;
    printf("model %s, batch %" PRId64 ", %" PRId64 " steps per budget; profile %s: %.2f GFLOP/s, "
           "memory %.2f GB/s, copies %.2f GB/s, launch %.1f us\n",
           o->model, o->batch, o->steps, p->name, p->compute_flops / 1e9,
           p->memory_bytes_per_s / 1e9, p->copy_bytes_per_s / 1e9, p->launch_us);
    bool scaled = false;
    for (int op = 0; op < TIDE_OP_COUNT; op++) {
        if (p->op_scale[op] > 0)
            printf("%s %s %.2f", scaled ? "," : "measured / modelled kernel time:",
                   tide_op_info((enum tide_op)op)->name, p->op_scale[op]);
        scaled = scaled || p->op_scale[op] > 0;
    }
    if (scaled)
        printf("\n");
    printf("%12s %12s %10s %10s %10s %10s %10s %10s %8s\n", "budget", "moved/step", "predicted",
           "median", "fastest", "cpu/step", "stall", "p-stall", "pred/fast");
    uint64_t budgets[3] = {resident, least + (resident - least) / 2, least};
    for (int i = 0; i < 3; i++) {
        struct measured m = {0};
        policy.budget_bytes = budgets[i];
        if (run_budget(o, bytes, len, shape, &train, &policy, backend, &m) != 0)
            goto out;
        double ratio = m.fastest_ms > 0 ? m.predicted_ms / m.fastest_ms : 0;
        printf("%12" PRIu64 " %12" PRIu64 " %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f %8.2f\n",
               budgets[i], m.moved, m.predicted_ms, m.median_ms, m.fastest_ms, m.cpu_ms, m.stall_ms,
               m.predicted_stall_ms, ratio);
        if (o->json) {
            struct json_object *line = tide_bench_json_object();
            tide_bench_json_set_string(line, "model", o->model);
            tide_bench_json_set_int(line, "batch", o->batch);
            tide_bench_json_set_string(line, "device_profile", p->name);
            tide_bench_json_set_uint(line, "budget_bytes", budgets[i]);
            tide_bench_json_set_uint(line, "moved_bytes", m.moved);
            tide_bench_json_set_fixed(line, "predicted_step_ms", m.predicted_ms, 3);
            tide_bench_json_set_fixed(line, "predicted_stall_ms", m.predicted_stall_ms, 3);
            tide_bench_json_set_fixed(line, "median_step_ms", m.median_ms, 3);
            tide_bench_json_set_fixed(line, "fastest_step_ms", m.fastest_ms, 3);
            tide_bench_json_set_fixed(line, "cpu_ms_per_step", m.cpu_ms, 3);
            tide_bench_json_set_fixed(line, "stall_ms", m.stall_ms, 3);
            if (tide_bench_json_print_line(line) != 0)
                goto out;
        }
    }
    if (!o->json) {
        /* Where the time goes: one more run of the resident plan, profiled, per op. */
        struct measured *m = calloc(1, sizeof(*m));
        if (!m)
            goto out;
        m->by_op = true;
        policy.budget_bytes = resident;
        if (run_budget(o, bytes, len, shape, &train, &policy, backend, m) != 0) {
            free(m);
            goto out;
        }
        double steps = (double)(o->steps > 0 ? o->steps : 10);
        printf("\nper op, resident plan, profiled (ms per step):\n%-28s %6s %10s %10s %8s\n", "op",
               "nodes", "predicted", "measured", "ratio");
        for (int op = 0; op < TIDE_OP_COUNT; op++) {
            if (m->op_measured[op] / steps < 0.05 && m->op_predicted[op] / steps < 0.05)
                continue;
            printf("%-28s %6u %10.3f %10.3f %8.2f\n", tide_op_info((enum tide_op)op)->name,
                   m->op_nodes[op], m->op_predicted[op] / steps, m->op_measured[op] / steps,
                   m->op_measured[op] > 0 ? m->op_predicted[op] / m->op_measured[op] : 0);
        }
        free(m);
    }
    rc = 0;
out:
    tide_backend_free(backend);
    free(bytes);
    return rc;
}
