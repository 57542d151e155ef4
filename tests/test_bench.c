/* SPDX-License-Identifier: MIT */
/*
 * Tests of tide-bench's --json line (bench/bench-json.c): `plan` on a model
 * that fits and one that does not, and a short `train`, run as a child
 * process. The last line of stdout must be one strict JSON object (read
 * with json-c, tests/json-lines.h) with every field, in order, of its type,
 * and its figures must be the ones the text report above it prints.
 * `train --threads 1` must keep to one core: its CPU time over the training
 * steps at most 1.2 times their wall time (a ratio, whatever the machine's
 * speed; a busy machine only lowers it). The language models train briefly
 * on the fortunes corpus: a tiny Transformer's held-out loss must beat any
 * model of single bytes, and the MoE model's cross-entropy must fall.
 *
 * The tests run build/bin/tide-bench (TIDE_BINARY_DIR, set by ctest; run by
 * hand, the bin/ folder this test lives in).
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"
#include "json-lines.h"
#include "onnx_builder.h"
#include "tide/dataset.h"
#include "float_assert.h"

static char bench_path[PATH_MAX];

static int group_setup(void **state)
{
    (void)state;
    const char *dir = getenv("TIDE_BINARY_DIR");
    char self[PATH_MAX];
    if (dir && *dir) {
        snprintf(bench_path, sizeof(bench_path), "%.*s/bin/tide-bench", PATH_MAX - 32, dir);
    } else {
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
            return -1;
        self[n] = '\0';
        *strrchr(self, '/') = '\0';
        snprintf(bench_path, sizeof(bench_path), "%.*s/tide-bench", PATH_MAX - 32, self);
    }
    if (access(bench_path, X_OK) != 0) {
        fprintf(stderr, "%s was not built\n", bench_path);
        return -1;
    }
    return 0;
}

/*
 * Runs tide-bench with args (NULL-terminated), wants exit status `exit`,
 * and returns the last line of its stdout parsed (the caller puts it).
 */
static struct json_object *run_bench(struct tide_test_run *r, int exit, char *const args[])
{
    char *argv[32];
    int n = 0;
    argv[n++] = bench_path;
    for (; n < 31 && args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    tide_test_run_program(argv, -1, -1, r);
    if (r->exit_code != exit)
        fail_msg("tide-bench %s: exit %d, wanted %d\n%s", args[0], r->exit_code, exit, r->err);
    size_t len = strlen(r->out);
    if (len < 2 || r->out[len - 1] != '\n')
        fail_msg("tide-bench %s: stdout does not end in a line:\n%s", args[0], r->out);
    const char *last = r->out + len - 1;
    while (last > r->out && last[-1] != '\n')
        last--;
    size_t lines;
    struct json_object *all = tide_test_json_lines(last, &lines);
    assert_int_equal(lines, 1);
    struct json_object *line = json_object_get(tide_test_json_line(all, 0));
    json_object_put(all);
    return line;
}

/* Runs tide-bench with args, wants exit status `exit` and `want` in its stderr. */
static void run_bench_fails(struct tide_test_run *r, int exit, char *const args[],
                            const char *want)
{
    char *argv[32];
    int n = 0;
    argv[n++] = bench_path;
    for (; n < 31 && args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    tide_test_run_program(argv, -1, -1, r);
    if (r->exit_code != exit || !strstr(r->err, want))
        fail_msg("tide-bench %s: exit %d (wanted %d), stderr lacks \"%s\":\n%s", args[0],
                 r->exit_code, exit, want, r->err);
}

/* Fails unless text holds what format makes of the value (one %.Nf or %u conversion). */
static void expect_in_report(const char *text, const char *format, ...)
{
    char want[256];
    va_list args;
    va_start(args, format);
    vsnprintf(want, sizeof(want), format, args);
    va_end(args);
    if (!strstr(text, want))
        fail_msg("the text report does not say \"%s\" as the JSON line does:\n%s", want, text);
}

static const char *const plan_keys[] = {"model",
                                        "math",
                                        "batch",
                                        "fits",
                                        "predicted_peak_bytes",
                                        "budget_bytes",
                                        "swap_out_bytes",
                                        "swap_in_bytes",
                                        "fetch_bytes",
                                        "write_back_bytes",
                                        "partitions",
                                        "partition_size",
                                        "nodes",
                                        "min_budget_bytes",
                                        "floor_bytes",
                                        "floor_node",
                                        "host_bytes",
                                        "host_arena_bytes",
                                        "host_budget_bytes",
                                        "device_profile",
                                        "predicted_step_ms",
                                        "predicted_stall_ms",
                                        "swap_threshold",
                                        "prefetch_distance",
                                        "trials",
                                        "plan_ms",
                                        "plan_cpu_ms",
                                        "policy",
                                        "recompute_bytes",
                                        "recompute_ms",
                                        NULL};

/* The figures of a plan line that the text report prints too. */
static void expect_plan_report(const char *text, struct json_object *line)
{
    const double mib = 1 << 20;
    expect_in_report(text, "predicted peak %.2f MiB of a %.2f MiB budget: %s",
                     (double)tide_test_json_uint(line, "predicted_peak_bytes") / mib,
                     (double)tide_test_json_uint(line, "budget_bytes") / mib,
                     tide_test_json_bool(line, "fits") ? "fits" : "does NOT fit");
    expect_in_report(text, "%" PRIu64 " nodes in %" PRIu64 " partitions of %" PRIu64 ";",
                     tide_test_json_uint(line, "nodes"), tide_test_json_uint(line, "partitions"),
                     tide_test_json_uint(line, "partition_size"));
    expect_in_report(text, "floor %.2f MiB: the working set of \"%s\" alone",
                     (double)tide_test_json_uint(line, "floor_bytes") / mib,
                     tide_test_json_string(line, "floor_node"));
    assert_true(tide_test_json_uint(line, "floor_bytes") > 0);
    assert_true(tide_test_json_string(line, "floor_node")[0] != '\0');
    expect_in_report(text, "threshold %" PRIu64 ", prefetch %" PRIu64 ",",
                     tide_test_json_uint(line, "swap_threshold"),
                     tide_test_json_uint(line, "prefetch_distance"));
    expect_in_report(text,
                     "per step: swap-in %.1f MiB, swap-out %.1f MiB, fetch %.1f MiB, write-back "
                     "%.1f MiB; host %.1f MiB",
                     (double)tide_test_json_uint(line, "swap_in_bytes") / mib,
                     (double)tide_test_json_uint(line, "swap_out_bytes") / mib,
                     (double)tide_test_json_uint(line, "fetch_bytes") / mib,
                     (double)tide_test_json_uint(line, "write_back_bytes") / mib,
                     (double)tide_test_json_uint(line, "host_bytes") / mib);
    expect_in_report(text, "(%" PRIu64 " plans tried, ", tide_test_json_uint(line, "trials"));
    expect_in_report(text, "recomputed per step: %.1f MiB, ",
                     (double)tide_test_json_uint(line, "recompute_bytes") / mib);
    assert_true(tide_test_json_number(line, "recompute_ms") >= 0);
    assert_true(tide_test_json_number(line, "plan_ms") >= 0);
    assert_true(tide_test_json_number(line, "plan_cpu_ms") >= 0);
}

/* `plan` of an MLP that fits in 64 MiB: exit 0, the line says so in every field. */
static void test_plan_fits(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"plan", "--model", "mlp", "--batch", "16", "--budget", "64M", "--json", NULL});
    tide_test_json_keys(line, plan_keys);
    assert_string_equal(tide_test_json_string(line, "model"), "mlp");
    assert_int_equal(tide_test_json_int(line, "batch"), 16);
    assert_true(tide_test_json_bool(line, "fits"));
    assert_int_equal(tide_test_json_uint(line, "budget_bytes"), UINT64_C(64) << 20);
    uint64_t peak = tide_test_json_uint(line, "predicted_peak_bytes");
    assert_true(peak > 0 && peak <= UINT64_C(64) << 20);
    assert_true(tide_test_json_uint(line, "min_budget_bytes") <= peak);
    assert_true(tide_test_json_uint(line, "partitions") >= 1);
    expect_plan_report(r->out, line);
    json_object_put(line);
    free(r);
}

/*
 * `plan --device-profile`: the plan is for that device and predicts its
 * step; an unknown profile is refused listing the known ones, as is an
 * unknown --math, and the plan's line says its math; a host budget
 * below what the plan needs is refused naming both numbers.
 */
static void test_plan_device_profile_and_host_budget(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"plan", "--model", "cnn", "--batch", "32", "--budget", "5M",
                             "--device-profile", "h100", "--json", NULL});
    tide_test_json_keys(line, plan_keys);
    assert_string_equal(tide_test_json_string(line, "device_profile"), "h100");
    double predicted = tide_test_json_number(line, "predicted_step_ms");
    assert_true(predicted > 0);
    expect_in_report(r->out, "predicted step %.2f ms on h100", predicted);
    /* Swapping: the plan has host bytes (swap slots, staging), more than 1 MiB. */
    assert_true(tide_test_json_uint(line, "swap_in_bytes") > 0);
    assert_true(tide_test_json_uint(line, "host_arena_bytes") > UINT64_C(1) << 20);
    json_object_put(line);

    run_bench_fails(r, 2,
                    (char *[]){"plan", "--model", "cnn", "--budget", "8M", "--device-profile",
                               "a100", NULL},
                    "device profile \"a100\" is unknown; known profiles: cpu, h100, h200");
    run_bench_fails(r, 2,
                    (char *[]){"plan", "--model", "cnn", "--budget", "8M", "--math", "bf16", NULL},
                    "tide-bench: --math: math \"bf16\": wants fp32 or tf32");
    /* The plan says its math (tf32 moves nothing on the CPU backend). */
    line = run_bench(r, 0,
                     (char *[]){"plan", "--model", "cnn", "--batch", "32", "--budget", "5M",
                                "--math", "tf32", "--json", NULL});
    assert_string_equal(tide_test_json_string(line, "math"), "tf32");
    json_object_put(line);
    line = run_bench(r, 1,
                     (char *[]){"plan", "--model", "cnn", "--batch", "32", "--budget", "5M",
                                "--device-profile", "h100", "--host-budget", "1M", "--json",
                                NULL});
    assert_false(tide_test_json_bool(line, "fits"));
    assert_int_equal(tide_test_json_uint(line, "host_budget_bytes"), UINT64_C(1) << 20);
    const char *want = "of host memory (host-homed variables, swap slots and staging), host "
                       "budget is 1048576 bytes (1.0 MiB)";
    if (!strstr(r->err, want))
        fail_msg("tide-bench plan's stderr lacks \"%s\":\n%s", want, r->err);
    json_object_put(line);
    free(r);
}

/*
 * `plan --policy`: recompute and checkpoint-sqrt plans of the CNN fit their
 * budget, say their policy and the bytes they make again, and
 * checkpoint-sqrt swaps nothing; an unknown policy is refused by name.
 */
static void test_plan_policies(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    static const char *const policies[] = {"recompute", "checkpoint-sqrt"};
    for (int i = 0; i < 2; i++) {
        struct json_object *line =
            run_bench(r, 0,
                      (char *[]){"plan", "--model", "cnn", "--batch", "32", "--budget", "8M",
                                 "--policy", (char *)policies[i], "--json", NULL});
        tide_test_json_keys(line, plan_keys);
        assert_string_equal(tide_test_json_string(line, "policy"), policies[i]);
        assert_true(tide_test_json_bool(line, "fits"));
        assert_true(tide_test_json_uint(line, "predicted_peak_bytes") <= UINT64_C(8) << 20);
        if (i == 1)
            assert_int_equal(tide_test_json_uint(line, "swap_out_bytes") +
                                 tide_test_json_uint(line, "swap_in_bytes"),
                             0);
        expect_plan_report(r->out, line);
        json_object_put(line);
    }
    run_bench_fails(r, 2, (char *[]){"plan", "--model", "cnn", "--policy", "sqrt", NULL},
                    "--policy must be swap, recompute or checkpoint-sqrt, got \"sqrt\"");
    free(r);
}

/* `plan` of a CNN in 1 MiB: exit 1, fits false, and the smallest budget above the given one. */
static void test_plan_does_not_fit(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 1,
        (char *[]){"plan", "--model", "cnn", "--batch", "32", "--budget", "1M", "--json", NULL});
    tide_test_json_keys(line, plan_keys);
    assert_string_equal(tide_test_json_string(line, "model"), "cnn");
    assert_int_equal(tide_test_json_int(line, "batch"), 32);
    assert_false(tide_test_json_bool(line, "fits"));
    assert_int_equal(tide_test_json_uint(line, "budget_bytes"), UINT64_C(1) << 20);
    uint64_t min_budget = tide_test_json_uint(line, "min_budget_bytes");
    assert_true(min_budget > UINT64_C(1) << 20);
    assert_true(min_budget >= tide_test_json_uint(line, "floor_bytes"));
    assert_true(tide_test_json_uint(line, "predicted_peak_bytes") > UINT64_C(1) << 20);
    expect_in_report(r->out, "smallest budget that fits: %.2f MiB (",
                     (double)min_budget / (1 << 20));
    expect_plan_report(r->out, line);
    json_object_put(line);
    free(r);
}

/*
 * The automatic partition size takes ResNet-200 at batch 16 to within 10 %
 * of its floor (one BatchNormGrad's working set; at the fixed size 64 the
 * smallest budget was 5.2 times that), and a plan at exactly the smallest
 * budget it names fits.
 */
static void test_plan_auto_reaches_the_floor(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 1,
                  (char *[]){"plan", "--model", "resnet", "--depth", "200", "--batch", "16",
                             "--budget", "1K", "--json", NULL});
    tide_test_json_keys(line, plan_keys);
    uint64_t floor = tide_test_json_uint(line, "floor_bytes");
    uint64_t min_budget = tide_test_json_uint(line, "min_budget_bytes");
    assert_true(floor > 0 && min_budget >= floor);
    assert_true((double)min_budget <= 1.10 * (double)floor);
    assert_string_equal(tide_test_json_string(line, "floor_node"),
                        "grad/stage1/block2/conv3/bn/batch_norm_0/backprop");
    json_object_put(line);

    char budget[32];
    snprintf(budget, sizeof(budget), "%" PRIu64, min_budget);
    line = run_bench(r, 0,
                     (char *[]){"plan", "--model", "resnet", "--depth", "200", "--batch", "16",
                                "--budget", budget, "--json", NULL});
    assert_true(tide_test_json_bool(line, "fits"));
    assert_true(tide_test_json_uint(line, "predicted_peak_bytes") <= min_budget);
    expect_plan_report(r->out, line);
    json_object_put(line);
    free(r);
}

/*
 * `plan` names the budget `train` needs: the CNN trains one step at exactly
 * the smallest budget of its plan, within it (the fetched logits, pinned on
 * the device, included; without them the plan was 2.5 KiB short), and
 * `train` refuses one byte less.
 */
static void test_train_at_the_smallest_budget(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 1, (char *[]){"plan", "--model", "cnn", "--budget", "1K", "--json", NULL});
    uint64_t min_budget = tide_test_json_uint(line, "min_budget_bytes");
    json_object_put(line);
    char budget[32];
    snprintf(budget, sizeof(budget), "%" PRIu64, min_budget);
    line = run_bench(r, 0,
                     (char *[]){"train", "--model", "cnn", "--dataset", "synthetic", "--steps", "1",
                                "--no-eval", "--budget", budget, "--json", NULL});
    assert_int_equal(tide_test_json_uint(line, "predicted_peak_bytes"), min_budget);
    assert_true(tide_test_json_uint(line, "device_high_water_bytes") <= min_budget);
    json_object_put(line);
    snprintf(budget, sizeof(budget), "%" PRIu64, min_budget - 1);
    char *argv[] = {bench_path, "train", "--model", "cnn", "--dataset", "synthetic", "--steps", "1",
                    "--no-eval", "--budget", budget, NULL};
    tide_test_run_program(argv, -1, -1, r);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->err, "plan needs"));
    free(r);
}

/* A short `train` on synthetic data: every field, and the figures of the text report. */
static void test_train(void **state)
{
    (void)state;
    static const char *const keys[] = {"model",
                                       "math",
                                       "dataset",
                                       "batch",
                                       "steps",
                                       "loss",
                                       "test_accuracy",
                                       "step_ms_mean",
                                       "train_seconds",
                                       "train_cpu_seconds",
                                       "compile_ms",
                                       "nodes",
                                       "device_high_water_bytes",
                                       "predicted_peak_bytes",
                                       NULL};
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"train", "--model", "mlp", "--dataset", "synthetic", "--batch", "32",
                             "--steps", "3", "--optimizer", "sgd", "--json", NULL});
    tide_test_json_keys(line, keys);
    assert_string_equal(tide_test_json_string(line, "model"), "mlp");
    assert_string_equal(tide_test_json_string(line, "dataset"), "synthetic");
    assert_int_equal(tide_test_json_int(line, "batch"), 32);
    assert_int_equal(tide_test_json_int(line, "steps"), 3);
    double loss = tide_test_json_number(line, "loss");
    double accuracy = tide_test_json_number(line, "test_accuracy");
    assert_true(loss > 0 && loss < 10);
    assert_true(accuracy >= 0 && accuracy <= 1);
    assert_true(tide_test_json_number(line, "step_ms_mean") > 0);
    assert_true(tide_test_json_number(line, "train_seconds") >= 0);
    assert_true(tide_test_json_number(line, "train_cpu_seconds") >= 0);
    assert_true(tide_test_json_number(line, "compile_ms") >= 0);
    assert_true(tide_test_json_uint(line, "nodes") > 0);
    /* The executor's measured high water is the plan's peak, and the text report says both. */
    uint64_t high_water = tide_test_json_uint(line, "device_high_water_bytes");
    assert_int_equal(high_water, tide_test_json_uint(line, "predicted_peak_bytes"));
    expect_in_report(r->out, "device high-water %" PRIu64 " bytes, predicted peak %" PRIu64,
                     high_water, high_water);
    /* The text has four decimals of the loss and accuracy, the line six. */
    float text_loss, text_accuracy;
    const char *at = strstr(r->out, "\nloss ");
    assert_non_null(at);
    assert_int_equal(sscanf(at, "\nloss %f, test accuracy %f", &text_loss, &text_accuracy), 2);
    assert_true(fabs(loss - text_loss) <= 0.00005 + 1e-6);
    assert_true(fabs(accuracy - text_accuracy) <= 0.00005 + 1e-6);
    json_object_put(line);
    free(r);
}

/* `train --no-eval`: the line has no test_accuracy and the text says the split was skipped. */
static void test_train_no_eval(void **state)
{
    (void)state;
    static const char *const keys[] = {"model",
                                       "math",
                                       "dataset",
                                       "batch",
                                       "steps",
                                       "loss",
                                       "step_ms_mean",
                                       "train_seconds",
                                       "train_cpu_seconds",
                                       "compile_ms",
                                       "nodes",
                                       "device_high_water_bytes",
                                       "predicted_peak_bytes",
                                       NULL};
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"train", "--model", "mlp", "--dataset", "synthetic", "--batch", "32", "--steps",
                   "2", "--optimizer", "sgd", "--no-eval", "--json", NULL});
    tide_test_json_keys(line, keys);
    assert_int_equal(tide_test_json_int(line, "steps"), 2);
    assert_non_null(strstr(r->out, "test split skipped (--no-eval)"));
    assert_null(strstr(r->out, "test accuracy"));
    json_object_put(line);
    free(r);
}

/* `train --trace-overhead K`: pairs of K-step blocks; --steps must be a multiple of 4 * K. */
static void test_train_trace_overhead(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"train", "--model", "mlp", "--dataset", "synthetic", "--batch", "16", "--steps",
                   "16", "--optimizer", "sgd", "--no-eval", "--trace-overhead", "2", "--json",
                   NULL});
    /* 16 steps = 8 blocks of 2 = 4 pairs, each of one block with the recorder off and one on. */
    assert_int_equal(tide_test_json_int(line, "trace_overhead_pairs"), 4);
    assert_true(tide_test_json_number(line, "trace_off_step_ms") > 0);
    assert_true(tide_test_json_number(line, "trace_on_step_ms") > 0);
    assert_non_null(strstr(r->err, "trace overhead over 4 pairs of 2-step blocks"));
    json_object_put(line);

    char *bad[] = {bench_path, "train", "--model", "mlp", "--dataset", "synthetic", "--steps", "6",
                   "--no-eval", "--trace-overhead", "2", NULL};
    tide_test_run_program(bad, -1, -1, r);
    assert_int_equal(r->exit_code, 1);
    assert_non_null(strstr(r->err, "--trace-overhead 2 wants --steps a multiple of 8 (got 6)"));
    free(r);
}

/*
 * --threads 1 bounds every thread the kernels use, the pool's and
 * OpenBLAS's: the CNN's training steps take at most 1.2 seconds of CPU time
 * per second of wall time. The margin is for the stream threads that copy
 * batches in, and for OpenBLAS's own threads, which it starts when it is
 * loaded and which spin for a few tens of milliseconds before they sleep
 * (measured: 20 ms of CPU time), and for what else the process does once
 * (measured: 50 to 100 ms of CPU time beyond the wall time however many
 * steps run). 300 steps (about a second: the CNN's step at batch 32 is now
 * 3.5 ms, and 100 steps, a third of a second, read 1.2 to 1.3 cores) make
 * that small.
 */
static void test_train_threads_one(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"train", "--model", "cnn", "--dataset", "synthetic", "--batch", "32",
                             "--steps", "300", "--threads", "1", "--no-eval", "--json", NULL});
    double wall = tide_test_json_number(line, "train_seconds");
    double cpu = tide_test_json_number(line, "train_cpu_seconds");
    print_message("cnn, 300 steps at --threads 1: %.3f s of CPU time in %.3f s\n", cpu, wall);
    /* Long enough that the clocks' resolution (1 ms in the line) cannot decide. */
    assert_true(wall >= 0.1);
    if (!(cpu <= 1.2 * wall))
        fail_msg("--threads 1 used %.3f s of CPU time in %.3f s of wall time (%.2f cores)", cpu,
                 wall, cpu / wall);
    json_object_put(line);
    free(r);
}

/*
 * The LSTM learns Fashion-MNIST read row by row: 300 steps of its defaults
 * (one layer of 128, batch 64, Adam at 0.003) reach a test accuracy of
 * LSTM_ACCURACY. Measured at 0.787 to 0.792 over seeds 1 to 4 (0.847 after
 * the whole epoch of 937 steps); chance is 0.1. Skipped without Debian's
 * dataset-fashion-mnist.
 */
#define LSTM_ACCURACY 0.75
static void test_train_lstm_fashion_mnist(void **state)
{
    (void)state;
    if (access(TIDE_DATASET_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        print_message("skipping: no Fashion-MNIST in %s (apt install dataset-fashion-mnist)\n",
                      TIDE_DATASET_FASHION_MNIST_DIR);
        skip();
    }
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0, (char *[]){"train", "--model", "lstm", "--steps", "300", "--json", NULL});
    assert_string_equal(tide_test_json_string(line, "model"), "lstm");
    assert_int_equal(tide_test_json_int(line, "batch"), 64);
    double accuracy = tide_test_json_number(line, "test_accuracy");
    print_message("lstm, 300 steps of Fashion-MNIST: test accuracy %.4f in %.1f s\n", accuracy,
                  tide_test_json_number(line, "train_seconds"));
    if (!(accuracy >= LSTM_ACCURACY))
        fail_msg("test accuracy %.4f after 300 steps, wanted %.2f or more", accuracy,
                 LSTM_ACCURACY);
    json_object_put(line);
    free(r);
}

/*
 * --seq-len on the synthetic dataset: images of that many rows, each a time
 * step, so the graph grows with the length; the LSTM's flags are refused for
 * other models, and other lengths on Fashion-MNIST.
 */
static void test_lstm_sequences(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    uint64_t nodes[2];
    for (int i = 0; i < 2; i++) {
        struct json_object *line = run_bench(
            r, 0,
            (char *[]){"train", "--model", "lstm", "--dataset", "synthetic", "--seq-len",
                       i ? "40" : "20", "--hidden", "16", "--layers", "2", "--batch", "8",
                       "--steps", "2", "--no-eval", "--json", NULL});
        nodes[i] = tide_test_json_uint(line, "nodes");
        json_object_put(line);
    }
    /* Twice the steps: the forward and backward nodes of 20 more steps of 2 layers. */
    assert_true(nodes[1] > nodes[0] + 20 * 2 * 16);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"plan", "--model", "lstm", "--seq-len", "40", "--hidden", "16", "--budget",
                   "64M", "--json", NULL});
    assert_true(tide_test_json_bool(line, "fits"));
    json_object_put(line);

    char *cnn[] = {bench_path, "plan", "--model", "cnn", "--hidden", "8", "--budget", "8M", NULL};
    tide_test_run_program(cnn, -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "tide-bench: --hidden applies to --model lstm only, not to cnn"));
    char *fashion[] = {bench_path, "train", "--model", "lstm", "--seq-len", "40", NULL};
    tide_test_run_program(fashion, -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "tide-bench: --seq-len 40 needs --dataset synthetic"));
    free(r);
}

/* `plan --json` of the CNN at this batch and budget (swap: NULL for the automatic plan) fits or
 * not, as want says, in its exit status and its line. */
static void expect_plan_fits(struct tide_test_run *r, int64_t batch, const char *budget,
                             const char *swap, bool want)
{
    char text[32];
    snprintf(text, sizeof(text), "%" PRId64, batch);
    struct json_object *line =
        run_bench(r, want ? 0 : 1,
                  (char *[]){"plan", "--model", "cnn", "--batch", text, "--budget", (char *)budget,
                             "--json", swap ? "--swap" : NULL, (char *)swap, NULL});
    if (tide_test_json_bool(line, "fits") != want)
        fail_msg("plan --batch %" PRId64 " --budget %s%s%s: fits is %s, wanted %s", batch, budget,
                 swap ? " --swap " : "", swap ? swap : "", want ? "false" : "true",
                 want ? "true" : "false");
    json_object_put(line);
}

/*
 * `maxbatch` of the CNN in 4 MiB: the automatic plan takes at least the
 * batch of swap off, and both answers are exact: `plan` at the batch fits
 * and at the batch + 1 does not, with the same policy (--swap off, and none).
 */
static void test_maxbatch_exact(void **state)
{
    (void)state;
    static const char *const keys[] = {"model",      "budget_bytes", "batch_swap_off",
                                       "batch_auto", "ratio",        "predicted_peak_bytes",
                                       "host_bytes", "plans",        NULL};
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0, (char *[]){"maxbatch", "--model", "cnn", "--budget", "4M", "--json", NULL});
    tide_test_json_keys(line, keys);
    assert_string_equal(tide_test_json_string(line, "model"), "cnn");
    assert_int_equal(tide_test_json_uint(line, "budget_bytes"), UINT64_C(4) << 20);
    int64_t off = tide_test_json_int(line, "batch_swap_off");
    int64_t automatic = tide_test_json_int(line, "batch_auto");
    assert_true(off >= 1);
    assert_true(automatic >= off);
    assert_true(fabs(tide_test_json_number(line, "ratio") - (double)automatic / (double)off) <=
                0.0005);
    assert_true(tide_test_json_uint(line, "predicted_peak_bytes") <= UINT64_C(4) << 20);
    expect_in_report(r->out, "swap off %" PRId64 ", automatic plan %" PRId64 " (", off, automatic);
    /* Every batch tried is on stderr, the answers among them. */
    expect_in_report(r->err, "  batch %7" PRId64 ": fits", automatic);
    json_object_put(line);

    expect_plan_fits(r, automatic, "4M", NULL, true);
    expect_plan_fits(r, automatic + 1, "4M", NULL, false);
    expect_plan_fits(r, off, "4M", "off", true);
    expect_plan_fits(r, off + 1, "4M", "off", false);
    free(r);
}

/*
 * `plan --json` of a small LSTM (hidden 16, batch 8, partitions of 64 nodes,
 * which keep the text short) of seq_len steps fits in budget or not.
 */
static void expect_lstm_plan_fits(struct tide_test_run *r, int64_t seq_len, const char *budget,
                                  const char *swap, bool want)
{
    char text[32];
    snprintf(text, sizeof(text), "%" PRId64, seq_len);
    struct json_object *line = run_bench(
        r, want ? 0 : 1,
        (char *[]){"plan", "--model", "lstm", "--hidden", "16", "--batch", "8", "--seq-len", text,
                   "--partition-size", "64", "--budget", (char *)budget, "--json",
                   swap ? "--swap" : NULL, (char *)swap, NULL});
    if (tide_test_json_bool(line, "fits") != want)
        fail_msg("plan --model lstm --seq-len %" PRId64 " --budget %s%s%s: fits is %s, wanted %s",
                 seq_len, budget, swap ? " --swap " : "", swap ? swap : "",
                 want ? "false" : "true", want ? "true" : "false");
    json_object_put(line);
}

/*
 * `max --vary seq` of a small LSTM in 1 MiB: the line's fields, and both
 * answers exact: `plan` at the length fits and at the length + 1 does not,
 * with the same policy (--swap off, and none). The other sizes are in the
 * line, the one that varies is not. Swapping trains sequences at least twice
 * as long (the bar at 64 MiB; measured here: 207 and 578 steps), and
 * --confirm's step at the longest runs within the plan.
 */
static void test_max_lstm_seq_exact(void **state)
{
    (void)state;
    static const char *const keys[] = {"model",
                                       "vary",
                                       "batch",
                                       "hidden",
                                       "layers",
                                       "budget_bytes",
                                       "value_swap_off",
                                       "value_auto",
                                       "ratio",
                                       "predicted_peak_bytes",
                                       "host_bytes",
                                       "plans",
                                       "graph_limited_swap_off",
                                       "graph_limited_auto",
                                       "confirmed_high_water_bytes",
                                       "confirm_step_ms",
                                       NULL};
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"max", "--model", "lstm", "--vary", "seq", "--hidden", "16",
                             "--batch", "8", "--budget", "1M", "--partition-size", "64",
                             "--confirm", "--json", NULL});
    tide_test_json_keys(line, keys);
    assert_string_equal(tide_test_json_string(line, "vary"), "seq");
    assert_int_equal(tide_test_json_int(line, "batch"), 8);
    assert_int_equal(tide_test_json_int(line, "hidden"), 16);
    assert_int_equal(tide_test_json_int(line, "layers"), 1);
    assert_int_equal(tide_test_json_uint(line, "budget_bytes"), UINT64_C(1) << 20);
    int64_t off = tide_test_json_int(line, "value_swap_off");
    int64_t automatic = tide_test_json_int(line, "value_auto");
    assert_true(off >= 1);
    if (automatic < 2 * off)
        fail_msg("max --vary seq: %" PRId64 " steps with swap off, only %" PRId64
                 " with the automatic plan", off, automatic);
    assert_true(fabs(tide_test_json_number(line, "ratio") - (double)automatic / (double)off) <=
                0.0005);
    assert_true(tide_test_json_uint(line, "predicted_peak_bytes") <= UINT64_C(1) << 20);
    /* The budget ended both searches, not a graph limit. */
    assert_false(tide_test_json_bool(line, "graph_limited_swap_off"));
    assert_false(tide_test_json_bool(line, "graph_limited_auto"));
    /* --confirm trained one step at the automatic plan's length: its high water is the plan's. */
    assert_int_equal(tide_test_json_uint(line, "confirmed_high_water_bytes"),
                     tide_test_json_uint(line, "predicted_peak_bytes"));
    expect_in_report(r->out, "largest seq_len of lstm within 1048576 bytes (1.0 MiB): swap off %"
                     PRId64 ", automatic plan %" PRId64 " (", off, automatic);
    expect_in_report(r->err, "  seq_len %7" PRId64 ": fits", automatic);
    json_object_put(line);

    expect_lstm_plan_fits(r, automatic, "1M", NULL, true);
    expect_lstm_plan_fits(r, automatic + 1, "1M", NULL, false);
    expect_lstm_plan_fits(r, off, "1M", "off", true);
    expect_lstm_plan_fits(r, off + 1, "1M", "off", false);
    free(r);
}

/* `max --vary`: a size the model does not have, an unknown size, and none. */
static void test_max_vary_errors(void **state)
{
    (void)state;
    static const struct {
        const char *vary, *model, *message;
    } cases[] = {
        {"seq", "cnn", "tide-bench max: --vary seq does not apply to --model cnn, which can vary: "
                       "batch\n"},
        {"experts", "resnet", "tide-bench max: --vary experts does not apply to --model resnet, "
                              "which can vary: batch, depth\n"},
        {"width", "cnn", "tide-bench max: --vary must be batch, depth, seq or experts, got "
                         "\"width\"\n"},
        {NULL, "cnn", "tide-bench max: --vary batch|depth|seq|experts is required\n"},
    };
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *argv[] = {bench_path, "max", "--model", (char *)cases[i].model, "--budget", "4M",
                        cases[i].vary ? "--vary" : NULL, (char *)cases[i].vary, NULL};
        tide_test_run_program(argv, -1, -1, r);
        assert_int_equal(r->exit_code, 2);
        assert_string_equal(r->err, cases[i].message);
        assert_string_equal(r->out, "");
    }
    char *vary_elsewhere[] = {bench_path, "plan", "--vary", "batch", "--budget", "4M", NULL};
    tide_test_run_program(vary_elsewhere, -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_string_equal(r->err, "tide-bench: --vary applies to max only, not to plan\n");
    free(r);
}

/* ============================================================================
 * Data from files (--data, --labels, --test-data, --test-labels)
 * ========================================================================== */

static char files_dir[64];

static const char *file_in(const char *name)
{
    static char paths[4][128];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 128, "%s/%s", files_dir, name);
    return p;
}

static void write_file(const char *name, const void *head, size_t head_len, const void *data,
                       size_t len)
{
    FILE *f = fopen(file_in(name), "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(head, 1, head_len, f), head_len);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* A version-1.0 .npy file: the dict padded with spaces and a newline to 128 bytes. */
static void write_npy128(const char *name, const char *dict, const void *data, size_t len)
{
    char head[128] = "\x93NUMPY\x01\x00\x76\x00";
    size_t dict_len = strlen(dict);
    assert_true(10 + dict_len < 128);
    memcpy(head + 10, dict, dict_len);
    memset(head + 10 + dict_len, ' ', 128 - 10 - dict_len - 1);
    head[127] = '\n';
    write_file(name, head, 128, data, len);
}

/*
 * tide-bench train from the user's files: IDX bytes (MNIST's format) into
 * the CNN, and .npy floats [N, S, F] into the LSTM, each with a test split;
 * a short run reports the files as its dataset and scores every test
 * example. Files that do not fit are refused with their own words.
 */
static void test_train_from_files(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-files-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    enum { N = 96, SIDE = 8 };
    static uint8_t pixels[N * SIDE * SIDE], labels[N];
    uint64_t seed = 11;
    for (int i = 0; i < N; i++) {
        labels[i] = (uint8_t)(i % 3);
        for (int j = 0; j < SIDE * SIDE; j++) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            /* Class k is bright in band k of rows, so the CNN can learn it. */
            int band = (j / SIDE) * 3 / SIDE;
            pixels[i * SIDE * SIDE + j] = (uint8_t)((seed >> 58) + (band == labels[i] ? 190 : 0));
        }
    }
    const uint8_t image_head[16] = {0, 0, 8, 3, 0, 0, 0, N, 0, 0, 0, SIDE, 0, 0, 0, SIDE};
    const uint8_t label_head[8] = {0, 0, 8, 1, 0, 0, 0, N};
    write_file("images.idx", image_head, 16, pixels, sizeof(pixels));
    write_file("labels.idx", label_head, 8, labels, sizeof(labels));

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char *cnn[] = {"train", "--model", "cnn", "--data", (char *)file_in("images.idx"), "--labels",
                   (char *)file_in("labels.idx"), "--test-data", (char *)file_in("images.idx"),
                   "--test-labels", (char *)file_in("labels.idx"), "--batch", "16", "--steps",
                   "6", "--json", NULL};
    struct json_object *line = run_bench(r, 0, cnn);
    assert_string_equal(tide_test_json_string(line, "dataset"), file_in("images.idx"));
    assert_int_equal(tide_test_json_int(line, "steps"), 6);
    /* conv 1->16 and 16->32 (3x3, biases), fc1 32*2*2 -> 128, fc_out 128 -> 3. */
    assert_int_equal(tide_test_json_int(line, "parameters"),
                     16 * 9 + 16 + 32 * 16 * 9 + 32 + 128 * 128 + 128 + 128 * 3 + 3);
    double accuracy = tide_test_json_number(line, "test_accuracy");
    assert_true(accuracy >= 0 && accuracy <= 1);
    expect_in_report(r->out, "loss %.4f, test accuracy %.4f",
                     tide_test_json_number(line, "loss"), accuracy);
    json_object_put(line);

    /* float32 [N, 6, 4] for the LSTM: 6 steps of 4 features, int64 labels, no test split. */
    static float steps[N * 6 * 4];
    static int64_t classes[N];
    for (int i = 0; i < N * 24; i++)
        steps[i] = (float)((i * 7919) % 23) / 23.0f - 0.5f;
    for (int i = 0; i < N; i++)
        classes[i] = i % 2;
    write_npy128("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (96, 6, 4), }",
                steps, sizeof(steps));
    write_npy128("y.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (96,), }", classes,
                sizeof(classes));
    char *lstm[] = {"train", "--model", "lstm", "--hidden", "8", "--data", (char *)file_in("x.npy"),
                    "--labels", (char *)file_in("y.npy"), "--batch", "16", "--steps", "3",
                    "--json", NULL};
    line = run_bench(r, 0, lstm);
    /* (4 + 8) * 4 * 8 + 4 * 8 gate weights, then 8 * 2 + 2: 6 steps of 4 features. */
    assert_int_equal(tide_test_json_int(line, "parameters"), 12 * 32 + 32 + 8 * 2 + 2);
    assert_null(json_object_object_get(line, "test_accuracy"));
    assert_non_null(strstr(r->out, "test split skipped (no --test-data)"));
    json_object_put(line);

    /* Refusals: a shape the model cannot read (2), a file that does not fit (1), flags (2). */
    tide_test_run_program((char *[]){bench_path, "train", "--model", "resnet", "--data",
                                     (char *)file_in("x.npy"), "--labels",
                                     (char *)file_in("y.npy"), "--steps", "1", NULL},
                          -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    char want[512];
    snprintf(want, sizeof(want),
             "tide-bench: --model resnet reads square images [C, S, S], but the examples of %s "
             "are [6, 4]\n",
             file_in("x.npy"));
    assert_string_equal(r->err, want);
    write_file("short.idx", label_head, 8, labels, N - 1);
    tide_test_run_program((char *[]){bench_path, "train", "--model", "cnn", "--data",
                                     (char *)file_in("images.idx"), "--labels",
                                     (char *)file_in("short.idx"), NULL},
                          -1, -1, r);
    assert_int_equal(r->exit_code, 1);
    snprintf(want, sizeof(want),
             "tide-bench: %s is truncated: its data is 95 bytes, but IDX shape [96] of unsigned "
             "byte (0x08) is 96 bytes\n",
             file_in("short.idx"));
    assert_string_equal(r->err, want);
    tide_test_run_program((char *[]){bench_path, "train", "--dataset", "synthetic", "--data",
                                     (char *)file_in("x.npy"), "--labels",
                                     (char *)file_in("y.npy"), NULL},
                          -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_string_equal(r->err, "tide-bench: --dataset and --data exclude each other\n");
    tide_test_run_program((char *[]){bench_path, "plan", "--budget", "4M", "--data",
                                     (char *)file_in("x.npy"), "--labels",
                                     (char *)file_in("y.npy"), NULL},
                          -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_string_equal(r->err, "tide-bench: --data applies to train only, not to plan\n");
    free(r);
    static const char *const names[] = {"images.idx", "labels.idx", "x.npy", "y.npy",
                                        "short.idx"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(file_in(names[i]));
    rmdir(files_dir);
}

/* `maxbatch` without --budget: a usage error (exit 2) that says what to add. */
static void test_maxbatch_needs_a_budget(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char *argv[] = {bench_path, "maxbatch", "--model", "mlp", NULL};
    tide_test_run_program(argv, -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "tide-bench maxbatch: --budget BYTES is required"));
    assert_string_equal(r->out, "");
    free(r);
}

/* ============================================================================
 * Small ONNX models (tests/onnx_builder.h)
 * ========================================================================== */

/* Writes m as the file name (in files_dir) and frees it. */
static void write_model(struct tide_test_onnx *m, const char *name)
{
    size_t len;
    uint8_t *bytes = tide_test_onnx_pack(m, &len);
    write_file(name, "", 0, bytes, len);
    free(bytes);
    tide_test_onnx_free(m);
}

/* The loss a tide-bench train --json line reports: its last window's mean. */
static double bench_loss(struct tide_test_run *r, char *const args[])
{
    struct json_object *line = run_bench(r, 0, args);
    double loss = tide_test_json_number(line, "loss");
    json_object_put(line);
    return loss;
}

/* The plan's exit status for --onnx model at batch b under budget, swap off or automatic. */
static int plan_exit(struct tide_test_run *r, char *model, int64_t b, const char *budget,
                     bool swap_off)
{
    char batch[32];
    snprintf(batch, sizeof(batch), "%" PRId64, b);
    char *args[] = {bench_path, "plan",         "--onnx", model, "--batch", batch,
                    "--budget", (char *)budget, "--swap", "off", NULL};
    if (!swap_off)
        args[8] = NULL;
    tide_test_run_program(args, -1, -1, r);
    return r->exit_code;
}

/*
 * max --onnx --vary batch on a model exported with a dynamic batch (three
 * MatMuls of 256, input [N, 256]): the batch found with swap off and with
 * the automatic plan each fits under plan at that batch and not one above,
 * and the automatic one is larger. A static batch is refused by name, as is
 * a size an ONNX model cannot vary.
 */
static void test_max_onnx_batch(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-onnxmax-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){1, 256}, 0);
    const char *in = "x";
    char names[6][8];
    for (int i = 0; i < 3; i++) {
        snprintf(names[2 * i], sizeof(names[0]), "W%d", i);
        snprintf(names[2 * i + 1], sizeof(names[0]), "h%d", i);
        tide_test_onnx_init_f(m, names[2 * i], 2, (int64_t[]){256, i < 2 ? 256 : 10}, NULL);
        tide_test_onnx_node(m, "MatMul", names[2 * i + 1], TIDE_TEST_NAMES(in, names[2 * i]),
                            TIDE_TEST_NAMES(names[2 * i + 1]));
        in = names[2 * i + 1];
    }
    tide_test_onnx_output(m, in);
    write_model(m, "dynamic.onnx");
    char *model = strdup(file_in("dynamic.onnx"));
    assert_non_null(model);

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"max", "--onnx", model, "--vary", "batch", "--budget", "2M", "--json", NULL});
    assert_string_equal(tide_test_json_string(line, "model"), model);
    int64_t off = tide_test_json_int(line, "value_swap_off");
    int64_t automatic = tide_test_json_int(line, "value_auto");
    json_object_put(line);
    print_message("max --onnx --vary batch in 2M: swap off %" PRId64 ", automatic %" PRId64 "\n",
                  off, automatic);
    assert_true(off >= 1 && automatic > off);
    assert_int_equal(plan_exit(r, model, off, "2M", true), 0);
    assert_int_equal(plan_exit(r, model, off + 1, "2M", true), 1);
    assert_int_equal(plan_exit(r, model, automatic, "2M", false), 0);
    assert_int_equal(plan_exit(r, model, automatic + 1, "2M", false), 1);

    char *cnn = TIDE_EXAMPLES_ONNX_DIR "/cnn.onnx";
    run_bench_fails(r, 1,
                    (char *[]){"max", "--onnx", cnn, "--vary", "batch", "--budget", "2M", NULL},
                    "tide-bench max: " TIDE_EXAMPLES_ONNX_DIR "/cnn.onnx has a static batch of 8: "
                    "--vary batch needs a model exported with a dynamic batch dimension "
                    "(torch.onnx.export's dynamic_axes)");
    run_bench_fails(r, 2,
                    (char *[]){"max", "--onnx", model, "--vary", "depth", "--budget", "2M", NULL},
                    "tide-bench max: --vary depth does not apply to an --onnx model, which can "
                    "vary: batch");
    free(r);
    unlink(model);
    free(model);
    rmdir(files_dir);
}

/*
 * --dataset synthetic for an --onnx model: examples of the model's own
 * input shape ([4, 3, 8, 8] here, not Fashion-MNIST's 1 x 28 x 28) and
 * labels below its classes (3), for train and eval; a Gemm from zeros
 * starts at ln 3 and learns the synthetic labels. A model whose input is
 * not float (int tokens) is refused naming the input.
 */
static void test_train_onnx_synthetic(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-onnxsyn-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    write_model(tide_test_onnx_rgb_gemm(), "images.onnx");
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, (int64_t[]){4, 5}, -1);
    tide_test_onnx_init_f(m, "E", 2, (int64_t[]){10, 3}, NULL);
    tide_test_onnx_node(m, "Gather", "emb", TIDE_TEST_NAMES("E", "ids"), TIDE_TEST_NAMES("e"));
    tide_test_onnx_node(m, "ReduceSum", "sum", TIDE_TEST_NAMES("e"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    write_model(m, "tokens.onnx");
    char *images = strdup(file_in("images.onnx")), *tokens = strdup(file_in("tokens.onnx"));
    assert_true(images && tokens);

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    double first = bench_loss(r, (char *[]){"train", "--onnx", images, "--dataset", "synthetic",
                                            "--steps", "1", "--no-eval", "--json", NULL});
    assert_float_equal(first, log(3.0), 1e-5);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"train", "--onnx", images, "--dataset", "synthetic", "--steps", "300",
                             "--lr", "0.1", "--json", NULL});
    double last = tide_test_json_number(line, "loss");
    double accuracy = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    print_message("synthetic [3, 8, 8]: first step %.4f, steps 251-300 %.4f, accuracy %.4f\n",
                  first, last, accuracy);
    assert_true(last < 0.8 * first);
    assert_true(accuracy > 0.5); /* 3 classes: a third by chance */
    line = run_bench(
        r, 0, (char *[]){"eval", "--onnx", images, "--dataset", "synthetic", "--json", NULL});
    assert_int_equal(tide_test_json_int(line, "test_examples"), 10000);
    json_object_put(line);
    run_bench_fails(
        r, 1, (char *[]){"train", "--onnx", tokens, "--dataset", "synthetic", "--steps", "1", NULL},
        "tide-bench: --dataset synthetic makes float32 examples, and input \"ids\" takes int32 "
        "values (token ids, indices): give them in a file, --data");
    free(r);
    unlink(images), unlink(tokens);
    free(images), free(tokens);
    rmdir(files_dir);
}

/*
 * train --onnx --loss mse and --loss none from files: a linear regression
 * (Gemm, output [8, 2]) fed float32 targets [N, 2], and a classifier whose
 * graph computes its own loss (SoftmaxCrossEntropyLoss, output the scalar
 * "loss") fed int64 labels through its second graph input. The loss of 200
 * steps is well below the first step's. Labels that do not fit are refused
 * naming both shapes or kinds.
 */
static void test_train_onnx_mse_and_own_loss(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-onnxloss-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    enum { N = 64, F = 3 };
    static float x[N * F], targets[N * 2], wrong[N * 3];
    static int64_t classes[N];
    uint64_t seed = 5;
    for (int i = 0; i < N * F; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        x[i] = (float)(seed >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
    }
    for (int i = 0; i < N; i++) {
        const float *r = x + i * F;
        targets[2 * i] = 2.0f * r[0] - r[1] + 0.5f * r[2] + 0.3f;
        targets[2 * i + 1] = -r[0] + 0.25f;
        classes[i] = (r[0] > 0) + 2 * (r[1] > 0);
    }
    write_npy128("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 3), }", x,
                 sizeof(x));
    write_npy128("t.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 2), }",
                 targets, sizeof(targets));
    write_npy128("w.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 3), }", wrong,
                 sizeof(wrong));
    write_npy128("c.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (64,), }", classes,
                 sizeof(classes));

    /* y = x W + b, W [3, 2] and b [2] from zeros. */
    struct tide_test_onnx *m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){8, F}, -1);
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){F, 2}, NULL);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){2}, NULL);
    tide_test_onnx_node(m, "Gemm", "Gemm", TIDE_TEST_NAMES("x", "W", "b"), TIDE_TEST_NAMES("y"));
    tide_test_onnx_output(m, "y");
    write_model(m, "regression.onnx");
    /* Its own loss: logits = x W + b (4 classes), then SoftmaxCrossEntropyLoss against "labels". */
    m = tide_test_onnx_new(13);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){8, F}, -1);
    tide_test_onnx_input(m, "target", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 1, (int64_t[]){8}, -1);
    tide_test_onnx_init_f(m, "W", 2, (int64_t[]){F, 4}, NULL);
    tide_test_onnx_init_f(m, "b", 1, (int64_t[]){4}, NULL);
    tide_test_onnx_node(m, "Gemm", "Gemm", TIDE_TEST_NAMES("x", "W", "b"),
                        TIDE_TEST_NAMES("logits"));
    tide_test_onnx_node(m, "SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLoss",
                        TIDE_TEST_NAMES("logits", "target"), TIDE_TEST_NAMES("loss"));
    tide_test_onnx_output(m, "loss");
    write_model(m, "own-loss.onnx");

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char *x_npy = strdup(file_in("x.npy"));
    char *reg = strdup(file_in("regression.onnx")), *own_loss = strdup(file_in("own-loss.onnx"));
    char *t_npy = strdup(file_in("t.npy")), *c_npy = strdup(file_in("c.npy"));
    char *w_npy = strdup(file_in("w.npy"));
    assert_true(reg && own_loss && t_npy && c_npy && w_npy && x_npy);

    double first = bench_loss(r, (char *[]){"train", "--onnx", reg, "--loss", "mse", "--data",
                                            x_npy, "--labels", t_npy, "--steps", "1", "--json",
                                            NULL});
    double last = bench_loss(r, (char *[]){"train", "--onnx", reg, "--loss", "mse", "--data",
                                           x_npy, "--labels", t_npy, "--steps", "200", "--json",
                                           NULL});
    print_message("mse: first step %.4f, steps 151-200 %.4f\n", first, last);
    assert_true(first > 0.5);
    assert_true(last < first / 20);

    first = bench_loss(r, (char *[]){"train", "--onnx", own_loss, "--loss", "none", "--output",
                                     "loss", "--data", x_npy, "--labels", c_npy, "--steps", "1",
                                     "--json", NULL});
    last = bench_loss(r, (char *[]){"train", "--onnx", own_loss, "--loss", "none", "--output",
                                    "loss", "--data", x_npy, "--labels", c_npy, "--steps", "200",
                                    "--json", NULL});
    print_message("none: first step %.4f, steps 151-200 %.4f\n", first, last);
    assert_float_equal(first, log(4.0), 1e-4); /* zero weights: uniform over 4 classes */
    assert_true(last < 0.7 * first);

    /* Labels that do not fit, refused before a step. */
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", reg, "--loss", "mse", "--data", x_npy,
                                     "--labels", w_npy, NULL},
                    "the loss on output \"y\" wants float32 targets of shape [2] an example; the "
                    "labels are float32 targets of shape [3] an example");
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", reg, "--loss", "mse", "--data", x_npy,
                                     "--labels", c_npy, NULL},
                    "the loss on output \"y\" wants float32 targets of shape [2] an example; the "
                    "labels are int class labels (int32) of shape [] an example");
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", own_loss, "--loss", "none", "--output",
                                     "loss", "--data", x_npy, "--labels", t_npy, NULL},
                    "the model's labels input \"target\" wants int class labels of shape [] an "
                    "example; the labels are float32 targets of shape [2] an example");
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", reg, "--data", x_npy, "--labels", t_npy,
                                     NULL},
                    "the loss on output \"y\" wants int class labels of shape [] an example; the "
                    "labels are float32 targets of shape [2] an example");
    run_bench_fails(r, 2, (char *[]){"train", "--model", "mlp", "--data", x_npy, "--labels", t_npy,
                                     NULL},
                    "t.npy: float32 labels are targets, for an --onnx model with --loss mse or "
                    "none; --model mlp learns int class labels");
    /* loss none without a labels input: the regression's output is no scalar either. */
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", reg, "--loss", "none", "--data", x_npy,
                                     "--labels", t_npy, NULL},
                    "loss none wants the output to be the scalar loss; \"y\" is [8, 2]");
    free(r);
    const char *names[] = {"x.npy", "t.npy", "w.npy", "c.npy", "regression.onnx", "own-loss.onnx"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(file_in(names[i]));
    rmdir(files_dir);
    free(reg), free(own_loss), free(t_npy), free(c_npy), free(w_npy), free(x_npy);
}

/*
 * train --onnx of a model of two graph inputs, as a BERT's features and
 * attention_mask: float x [8, 4] and an int64 mask [8, 4] whose zeros drop
 * features (Where(Equal(mask, 0), 0, x)), logits = x' W + b from zeros; fed
 * from --data x.npy,mask.npy (int64 mask file) with class labels that only
 * the kept features decide. 200 steps bring the loss far below the first
 * step's log(3), and --test-data of two files is scored. A mask file of
 * another count, one file for two inputs and a list for --model are refused
 * by name.
 */
static void test_train_onnx_two_inputs(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-twoinputs-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    enum { N = 64, F = 4 };
    static float x[N * F];
    static int64_t mask[N * F], labels[N];
    tide_test_onnx_masked_pair_data(N, F, x, mask, labels);
    write_npy128("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 4), }", x,
                 sizeof(x));
    write_npy128("mask.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (64, 4), }", mask,
                 sizeof(mask));
    write_npy128("mask60.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (60, 4), }",
                 mask, 60 * F * sizeof(int64_t));
    write_npy128("y.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (64,), }", labels,
                 sizeof(labels));
    struct tide_test_onnx *m = tide_test_onnx_masked_pair(8, F);
    write_model(m, "two.onnx");

    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    char *model = strdup(file_in("two.onnx")), *y_npy = strdup(file_in("y.npy"));
    char both[1024], short_mask[1024];
    snprintf(both, sizeof(both), "%s,%s", file_in("x.npy"), file_in("mask.npy"));
    snprintf(short_mask, sizeof(short_mask), "%s,%s", file_in("x.npy"), file_in("mask60.npy"));
    assert_true(model && y_npy);

    /* plan needs no files: the model at its own inputs, a float and an int64 one. */
    struct json_object *planned =
        run_bench(r, 0, (char *[]){"plan", "--onnx", model, "--budget", "1M", "--json", NULL});
    assert_string_equal(tide_test_json_string(planned, "model"), model);
    assert_int_equal(tide_test_json_int(planned, "batch"), 8);
    assert_true(tide_test_json_bool(planned, "fits"));
    json_object_put(planned);
    double first = bench_loss(r, (char *[]){"train", "--onnx", model, "--data", both, "--labels",
                                            y_npy, "--steps", "1", "--json", NULL});
    assert_float_equal(first, log(3.0), 1e-5); /* zero weights: uniform over 3 classes */
    char *saved = strdup(file_in("two-trained.onnx"));
    assert_non_null(saved);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"train", "--onnx", model, "--data", both, "--labels", y_npy,
                             "--test-data", both, "--test-labels", y_npy, "--steps", "200", "--lr",
                             "0.5", "--save", saved, "--json", NULL});
    double last = tide_test_json_number(line, "loss");
    double accuracy = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    print_message("two inputs: first step %.4f, steps 151-200 %.4f, accuracy %.4f\n", first,
                  last, accuracy);
    assert_true(isfinite(last));
    assert_true(last < 0.6 * first);
    assert_true(accuracy > 0.75); /* 3 classes: a third by chance */
    /* eval of the written model on the same files: the same accuracy, to the last digit. */
    line = run_bench(r, 0,
                     (char *[]){"eval", "--onnx", saved, "--test-data", both, "--test-labels",
                                y_npy, "--json", NULL});
    assert_int_equal(tide_test_json_int(line, "test_examples"), N);
    assert_true(tide_test_json_number(line, "test_accuracy") == accuracy);
    json_object_put(line);
    run_bench_fails(r, 2,
                    (char *[]){"eval", "--onnx", saved, "--dataset", "fashion-mnist", "--test-data",
                               both, "--test-labels", y_npy, NULL},
                    "tide-bench: --dataset and --test-data exclude each other");
    unlink(saved);
    free(saved);

    run_bench_fails(r, 1, (char *[]){"train", "--onnx", model, "--data", short_mask, "--labels",
                                     y_npy, NULL},
                    "x.npy holds 64 examples but ");
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", model, "--data", short_mask, "--labels",
                                     y_npy, NULL},
                    "mask60.npy holds 60: every input's file has one row per example");
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", model, "--data", (char *)file_in("x.npy"),
                                     "--labels", y_npy, NULL},
                    "the model has 2 graph inputs of examples (\"x\", \"mask\") but the "
                    "examples come in 1 array: give one per input, in the model's order");
    run_bench_fails(r, 2, (char *[]){"train", "--model", "mlp", "--data", both, "--labels", y_npy,
                                     NULL},
                    "tide-bench: --data A,B (one file per model input) is for an --onnx model "
                    "of several inputs; --model reads one file of examples");
    free(r);
    const char *names[] = {"x.npy", "mask.npy", "mask60.npy", "y.npy", "two.onnx"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        unlink(file_in(names[i]));
    rmdir(files_dir);
    free(model), free(y_npy);
}

/*
 * plan --onnx: PyTorch's GPT (examples/onnx/gpt.onnx: int32 tokens [4, 128],
 * no dataset needed) planned at its own batch: all resident under 64M;
 * under a budget below that resident peak it fits by swapping, within the
 * budget; below its largest node it does not, exit 1, naming that node.
 * An eval-mode export (bn_eval.onnx) gets a note on its BatchNorms.
 */
static void test_plan_onnx(void **state)
{
    (void)state;
    char *model = TIDE_EXAMPLES_ONNX_DIR "/gpt.onnx";
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"plan", "--onnx", model, "--budget", "64M", "--swap", "off", "--json", NULL});
    assert_int_equal(tide_test_json_int(line, "batch"), 4);
    assert_true(tide_test_json_bool(line, "fits"));
    assert_int_equal(tide_test_json_int(line, "swap_in_bytes"), 0);
    int64_t resident = tide_test_json_int(line, "predicted_peak_bytes");
    int64_t floor_bytes = tide_test_json_int(line, "floor_bytes");
    json_object_put(line);
    assert_true(resident > 2 * floor_bytes);

    char budget[32];
    snprintf(budget, sizeof(budget), "%" PRId64, (resident + floor_bytes) / 2);
    line = run_bench(r, 0, (char *[]){"plan", "--onnx", model, "--budget", budget, "--json", NULL});
    assert_true(tide_test_json_bool(line, "fits"));
    assert_true(tide_test_json_int(line, "swap_in_bytes") > 0);
    assert_true(tide_test_json_int(line, "predicted_peak_bytes") <= (resident + floor_bytes) / 2);
    json_object_put(line);

    snprintf(budget, sizeof(budget), "%" PRId64, floor_bytes - 1);
    line = run_bench(r, 1, (char *[]){"plan", "--onnx", model, "--budget", budget, "--json", NULL});
    assert_false(tide_test_json_bool(line, "fits"));
    assert_string_equal(tide_test_json_string(line, "floor_node"), "onnx/mul_5");
    json_object_put(line);
    assert_null(strstr(r->err, "note:"));
    /* An eval-mode export is noted: its BatchNorms' statistics stay fixed. */
    line = run_bench(r, 0,
                     (char *[]){"plan", "--onnx", TIDE_EXAMPLES_ONNX_DIR "/bn_eval.onnx",
                                "--budget", "64M", "--json", NULL});
    json_object_put(line);
    assert_non_null(strstr(r->err, "tide-bench: note: " TIDE_EXAMPLES_ONNX_DIR
                                   "/bn_eval.onnx: 2 BatchNormalization nodes are in inference "
                                   "mode (an eval-mode export)"));
    run_bench_fails(
        r, 2, (char *[]){"plan", "--onnx", model, "--budget", "64M", "--save", "x.onnx", NULL},
        "tide-bench: --save applies to train only, not to plan");
    free(r);
}

/*
 * A model exported with dynamic_axes {0: "batch", 1: "seq"} (x [batch, seq, 8] times W [8, 5],
 * a language model's [B, S, V] logits): plan takes the sequence from --dim seq=N, a longer one
 * planning a larger peak; without --dim it is refused naming the dimension and the flag; a
 * malformed --dim, and --dim without --onnx, are usage errors.
 */
static void test_plan_onnx_dims(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-onnxdims-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    write_model(tide_test_onnx_seq_linear(8, 5, 0), "seq.onnx");
    char *model = strdup(file_in("seq.onnx"));
    assert_non_null(model);
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    int64_t peaks[2];
    char *seqs[2] = {"seq=16", "seq=64"};
    for (int k = 0; k < 2; k++) {
        struct json_object *line =
            run_bench(r, 0,
                      (char *[]){"plan", "--onnx", model, "--batch", "4", "--dim", seqs[k],
                                 "--budget", "64M", "--json", NULL});
        assert_int_equal(tide_test_json_int(line, "batch"), 4);
        assert_true(tide_test_json_bool(line, "fits"));
        peaks[k] = tide_test_json_int(line, "predicted_peak_bytes");
        json_object_put(line);
    }
    /* x, logits and their gradients scale with the sequence; W does not. */
    assert_true(peaks[1] > 3 * peaks[0]);
    char want[512];
    snprintf(want, sizeof(want),
             "tide-bench: %s: graph input \"x\" has a dynamic dimension 1 (seq) that is not the "
             "batch: give its size by name in the import options (tidectl and tide-bench: --dim "
             "seq=N)",
             model);
    run_bench_fails(r, 1, (char *[]){"plan", "--onnx", model, "--budget", "64M", NULL}, want);
    snprintf(want, sizeof(want),
             "tide-bench: %s: dimension \"sequence\" (size 16) is not a dynamic dimension of the "
             "model's inputs (theirs: \"batch\", \"seq\")",
             model);
    run_bench_fails(
        r, 1,
        (char *[]){"plan", "--onnx", model, "--dim", "seq=16,sequence=16", "--budget", "64M", NULL},
        want);
    run_bench_fails(r, 2,
                    (char *[]){"plan", "--onnx", model, "--dim", "seq:16", "--budget", "64M", NULL},
                    "tide-bench: --dim: dimension \"seq:16\" is not NAME=SIZE (as seq=128)");
    run_bench_fails(r, 2, (char *[]){"plan", "--dim", "seq=16", "--budget", "64M", NULL},
                    "tide-bench: --output, --loss, --frozen, --dim and --save apply to an ONNX "
                    "model: give --onnx FILE");
    free(r);
    unlink(model);
    free(model);
    rmdir(files_dir);
}

/*
 * Labels that use fewer classes than the model has (cnn.onnx's 10, labels of 0 and 1 only):
 * the held-out accuracy reads the model's 10 logits a row; tide-bench used to size them by the
 * labels' largest class + 1 and failed the evaluation's fetch.
 */
static void test_train_onnx_labels_fewer_classes(void **state)
{
    (void)state;
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-fewer-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    int64_t y[24];
    for (int i = 0; i < 24; i++)
        y[i] = i % 2;
    write_npy128("y01.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (24,), }", y,
                 sizeof(y));
    char *images = TIDE_EXAMPLES_ONNX_DIR "/cnn_images.npy";
    char labels[128];
    snprintf(labels, sizeof(labels), "%s", file_in("y01.npy"));
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"train", "--onnx", TIDE_EXAMPLES_ONNX_DIR "/cnn.onnx", "--data",
                             images, "--labels", labels, "--test-data", images, "--test-labels",
                             labels, "--steps", "60", "--json", NULL});
    double accuracy = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    print_message("cnn.onnx, labels of 2 of its 10 classes: accuracy %.4f\n", accuracy);
    /* The labels alternate, unrelated to the images: the point is that evaluation ran. */
    assert_true(accuracy >= 0 && accuracy <= 1);
    unlink(labels);
    rmdir(files_dir);
    free(r);
}

/*
 * A language model from its own files: examples/onnx/gpt.onnx with gpt_tokens.npy [12, 32]
 * and gpt_labels.npy [12, 32] (the next byte at each position). The untrained model scores
 * near chance per token (eval); 150 SGD steps at lr 0.5 memorise the 12 windows (train's
 * held-out accuracy, per token, on the same files). Labels per position are refused for a
 * model of one class an example.
 */
static void test_train_onnx_language_model_files(void **state)
{
    (void)state;
    char *model = TIDE_EXAMPLES_ONNX_DIR "/gpt.onnx";
    char *tokens = TIDE_EXAMPLES_ONNX_DIR "/gpt_tokens.npy";
    char *next = TIDE_EXAMPLES_ONNX_DIR "/gpt_labels.npy";
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(r, 0,
                                         (char *[]){"eval", "--onnx", model, "--test-data", tokens,
                                                    "--test-labels", next, "--json", NULL});
    double before = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    line = run_bench(r, 0,
                     (char *[]){"train", "--onnx", model, "--data", tokens, "--labels", next,
                                "--test-data", tokens, "--test-labels", next, "--steps", "150",
                                "--lr", "0.5", "--json", NULL});
    double loss = tide_test_json_number(line, "loss");
    double after = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    print_message("gpt.onnx from its files: token accuracy %.4f untrained, %.4f after 150 steps "
                  "(loss %.4f)\n",
                  before, after, loss);
    assert_true(before < 0.05); /* 256 byte values */
    assert_true(after > 0.9);
    assert_true(loss < 0.5); /* from ln 256 = 5.55 */
    snprintf(files_dir, sizeof(files_dir), "/tmp/tide-test-bench-lmfiles-XXXXXX");
    assert_non_null(mkdtemp(files_dir));
    static float x[12 * 4];
    write_npy128("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (12, 4), }", x,
                 sizeof(x));
    run_bench_fails(r, 2,
                    (char *[]){"train", "--model", "mlp", "--data", (char *)file_in("x.npy"),
                               "--labels", next, "--steps", "1", NULL},
                    "gpt_labels.npy: a class label per position ([N, S] labels) is for an --onnx "
                    "model whose output has one per position (a language model's [B, S, V]); "
                    "--model mlp learns one class an example ([N] labels)");
    unlink(file_in("x.npy"));
    rmdir(files_dir);
    free(r);
}

/*
 * train --onnx: PyTorch's CNN (examples/onnx/cnn.onnx, static batch 8)
 * trained on Fashion-MNIST and written back with --save; eval of that file
 * gives train's test accuracy to the digit, and eval of the untrained file
 * a far lower one, so the weights did reach the file.
 */
static void test_train_onnx_save_eval(void **state)
{
    (void)state;
    if (access(TIDE_DATASET_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        print_message("skipping: no Fashion-MNIST in %s (apt install dataset-fashion-mnist)\n",
                      TIDE_DATASET_FASHION_MNIST_DIR);
        skip();
    }
    char *model = TIDE_EXAMPLES_ONNX_DIR "/cnn.onnx";
    char saved[128];
    snprintf(saved, sizeof(saved), "/tmp/test-bench-onnx-%d.onnx", (int)getpid());
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line = run_bench(
        r, 0,
        (char *[]){"train", "--onnx", model, "--steps", "300", "--save", saved, "--json", NULL});
    assert_string_equal(tide_test_json_string(line, "model"), model);
    assert_int_equal(tide_test_json_int(line, "batch"), 8);
    assert_int_equal(tide_test_json_int(line, "parameters"), 9098);
    double trained = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    assert_non_null(strstr(r->err, "6 trained initializers written into"));
    line = run_bench(r, 0, (char *[]){"eval", "--onnx", saved, "--json", NULL});
    assert_int_equal(tide_test_json_int(line, "test_examples"), 10000);
    double again = tide_test_json_number(line, "test_accuracy");
    json_object_put(line);
    print_message("cnn.onnx, 300 steps: test accuracy %.4f, read back %.4f\n", trained, again);
    assert_true(again == trained);
    assert_true(trained > 0.6);
    line = run_bench(r, 0, (char *[]){"eval", "--onnx", model, "--json", NULL});
    assert_true(tide_test_json_number(line, "test_accuracy") < 0.3);
    json_object_put(line);
    unlink(saved);
    /* Examples from files: the model's own batches, as .npy. */
    line = run_bench(r, 0,
                     (char *[]){"train", "--onnx", model, "--data",
                                TIDE_EXAMPLES_ONNX_DIR "/cnn_images.npy", "--labels",
                                TIDE_EXAMPLES_ONNX_DIR "/cnn_labels.npy", "--steps", "3", "--json",
                                NULL});
    assert_int_equal(tide_test_json_int(line, "steps"), 3);
    assert_int_equal(tide_test_json_int(line, "parameters"), 9098);
    json_object_put(line);
    /* The batch is the model's: --batch cannot change a static one. */
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", model, "--batch", "16", NULL},
                    "cnn.onnx: the model has a static batch of 8: a batch of 16 can only stand "
                    "for a dynamic batch dimension");
    run_bench_fails(r, 1, (char *[]){"train", "--onnx", model, "--output", "probs", NULL},
                    "the model has no output \"probs\"; its outputs: logits");
    run_bench_fails(
        r, 2, (char *[]){"train", "--save", saved, NULL},
        "--output, --loss, --frozen, --dim and --save apply to an ONNX model: give --onnx");
    /* The language models' flags are --model's, which --onnx replaces. */
    run_bench_fails(r, 2, (char *[]){"train", "--onnx", model, "--model", "transformer", NULL},
                    "--onnx names the model: --model and its sizes");
    run_bench_fails(r, 2, (char *[]){"train", "--onnx", model, "--heads", "2", NULL},
                    "--onnx names the model: --model and its sizes");
    free(r);
}

/* ============================================================================
 * The language models (transformer, moe) on the fortunes corpus
 * ========================================================================== */

/* Runs tide-bench train with args (exit 0 wanted), or skips when fortunes is not installed. */
static struct json_object *run_lm(struct tide_test_run *r, char *const args[])
{
    if (access("/usr/share/games/fortunes/fortunes", R_OK) != 0) {
        print_message("skipping: no /usr/share/games/fortunes (apt install fortunes)\n");
        skip();
    }
    return run_bench(r, 0, args);
}

/*
 * A 1-block Transformer of 32 features trained for 150 steps of 32 x 64
 * bytes (a few seconds) scores the held-out tenth of fortunes below 3.0
 * nats per byte: better than any model of single bytes can (the held-out
 * cross-entropy of the train split's byte frequencies is 3.38), so it has
 * learned from the context. It starts at about ln 256 = 5.55.
 */
static void test_train_transformer_heldout(void **state)
{
    (void)state;
    static const char *const keys[] = {"model",
                                       "math",
                                       "dataset",
                                       "batch",
                                       "seq_len",
                                       "steps",
                                       "parameters",
                                       "first_loss",
                                       "loss",
                                       "heldout_loss",
                                       "heldout_windows",
                                       "step_ms_mean",
                                       "train_seconds",
                                       "train_cpu_seconds",
                                       "eval_seconds",
                                       "compile_ms",
                                       "nodes",
                                       "device_high_water_bytes",
                                       "predicted_peak_bytes",
                                       NULL};
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_lm(r, (char *[]){"train", "--model", "transformer", "--layers", "1", "--d-model",
                             "32", "--heads", "2", "--seq-len", "64", "--steps", "150", "--json",
                             NULL});
    tide_test_json_keys(line, keys);
    assert_string_equal(tide_test_json_string(line, "dataset"), "fortunes");
    assert_int_equal(tide_test_json_int(line, "batch"), 32);
    assert_int_equal(tide_test_json_int(line, "seq_len"), 64);
    /* 256*32 + 64*32 + (12*32*32 + 13*32) + 2*32 + 32*256 + 256 */
    assert_int_equal(tide_test_json_int(line, "parameters"), 31456);
    double first = tide_test_json_number(line, "first_loss");
    double heldout = tide_test_json_number(line, "heldout_loss");
    print_message("transformer, 150 steps: first loss %.3f, held-out loss %.3f nats/byte in "
                  "%.1f s\n",
                  first, heldout, tide_test_json_number(line, "train_seconds"));
    assert_true(fabs(first - log(256.0)) < 0.5);
    if (!(heldout < 3.0))
        fail_msg("held-out loss %.4f nats/byte, wanted < 3.0", heldout);
    /* Every consecutive window of 64 of the held-out bytes: (size - 1) / 64. */
    int64_t windows = tide_test_json_int(line, "heldout_windows");
    assert_in_range(windows, 200000 / 64, 400000 / 64);
    expect_in_report(r->out, "held-out loss %.4f nats/byte over %" PRId64 " windows of 64 bytes",
                     heldout, windows);
    uint64_t high_water = tide_test_json_uint(line, "device_high_water_bytes");
    assert_int_equal(high_water, tide_test_json_uint(line, "predicted_peak_bytes"));
    json_object_put(line);
    free(r);
}

/*
 * The MoE model trains: 4 experts of top-2 routing, 60 steps, and the
 * cross-entropy falls by more than a nat from its start; the load-balancing
 * term E * sum f_e P_e is near 1 (balanced) and positive, times 0.01.
 */
static void test_train_moe(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_lm(r, (char *[]){"train", "--model", "moe", "--layers", "1", "--d-model", "32",
                             "--heads", "2", "--seq-len", "32", "--batch", "16", "--experts", "4",
                             "--steps", "60", "--no-eval", "--json", NULL});
    double first = tide_test_json_number(line, "first_loss");
    double lm = tide_test_json_number(line, "lm_loss");
    double aux = tide_test_json_number(line, "aux_loss");
    print_message("moe, 60 steps: first loss %.3f, cross-entropy %.3f, balance loss %.4f\n",
                  first, lm, aux);
    if (!(lm < first - 1.0))
        fail_msg("the cross-entropy went from %.4f to %.4f, wanted a fall of more than 1", first,
                 lm);
    assert_true(aux > 0.005 && aux <= 0.0401); /* 0.04: every token on one expert */
    assert_true(fabs(tide_test_json_number(line, "loss") - (lm + aux)) < 1e-4);
    json_object_put(line);

    /* Flags of other models are refused with their names. */
    char *bad[] = {bench_path, "train", "--model", "transformer", "--experts", "4", NULL};
    tide_test_run_program(bad, -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "--experts applies to --model moe only, not to transformer"));
    char *bad_dataset[] = {bench_path, "train", "--model", "moe", "--dataset", "synthetic", NULL};
    tide_test_run_program(bad_dataset, -1, -1, r);
    assert_int_equal(r->exit_code, 2);
    assert_non_null(strstr(r->err, "--dataset must be fortunes for --model moe"));
    free(r);
}

/* `plan` of a small MoE model with `experts` experts in 1 MiB (swap: "off" or NULL) fits. */
static bool moe_plan_fits(struct tide_test_run *r, int64_t experts, const char *swap,
                          char *budget)
{
    char text[32];
    snprintf(text, sizeof(text), "%" PRId64, experts);
    char *args[] = {"plan", "--model", "moe", "--layers", "1", "--d-model", "16", "--heads", "2",
                    "--seq-len", "16", "--batch", "4", "--budget", budget, "--experts", text, "--json",
                    swap ? "--swap" : NULL, (char *)swap, NULL};
    char *argv[32] = {bench_path};
    for (int i = 0; args[i]; i++)
        argv[i + 1] = args[i];
    tide_test_run_program(argv, -1, -1, r);
    /*
     * `plan` exits 0 when the plan fits and 1 when it does not. Its report
     * has a line per partition, which with hundreds of experts in partitions
     * of one node can outgrow r->out: the JSON line is checked when it is there.
     */
    if (r->exit_code != 0 && r->exit_code != 1)
        fail_msg("tide-bench plan --experts %s: exit %d\n%s", text, r->exit_code, r->err);
    bool fits = r->exit_code == 0;
    if (strlen(r->out) + 1 < sizeof(r->out))
        assert_int_equal(strstr(r->out, "\"fits\":true") != NULL, fits);
    return fits;
}

/*
 * `max --model moe --vary experts`: the search counts experts from 2 (top-2
 * routing needs two), and both answers are exact: `plan` at the number
 * fits and at the number + 1 does not, with the same policy. The budget is
 * 1 MiB: with one Variable per expert, 4 MiB holds about a thousand
 * experts, and each plan of those takes seconds.
 */
static void test_max_moe_experts_exact(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"max", "--model", "moe", "--vary", "experts", "--budget", "1M",
                             "--layers", "1", "--d-model", "16", "--heads", "2", "--seq-len", "16",
                             "--batch", "4", "--json", NULL});
    assert_string_equal(tide_test_json_string(line, "vary"), "experts");
    int64_t off = tide_test_json_int(line, "value_swap_off");
    int64_t autoplan = tide_test_json_int(line, "value_auto");
    json_object_put(line);
    print_message("moe in 1 MiB: %" PRId64 " experts with swap off, %" PRId64 " automatic\n", off,
                  autoplan);
    assert_true(off >= 2 && autoplan >= off);
    assert_true(moe_plan_fits(r, off, "off", "1M"));
    assert_false(moe_plan_fits(r, off + 1, "off", "1M"));
    assert_true(moe_plan_fits(r, autoplan, NULL, "1M"));
    assert_false(moe_plan_fits(r, autoplan + 1, NULL, "1M"));
    free(r);
}

/*
 * Where nothing fits with swap off, `max` says so and gives no ratio (null),
 * rather than a swap-off value of 0 and a ratio of infinity: at 256 KiB the
 * small MoE's activations alone outgrow the budget with swap off, while the
 * automatic plan, which swaps them out, holds hundreds of experts.
 */
static void test_max_swap_off_fits_none(void **state)
{
    (void)state;
    struct tide_test_run *r = malloc(sizeof(*r));
    assert_non_null(r);
    struct json_object *line =
        run_bench(r, 0,
                  (char *[]){"max", "--model", "moe", "--vary", "experts", "--budget", "256K",
                             "--layers", "1", "--d-model", "16", "--heads", "2", "--seq-len", "16",
                             "--batch", "4", "--json", NULL});
    assert_int_equal(tide_test_json_int(line, "value_swap_off"), 0);
    int64_t autoplan = tide_test_json_int(line, "value_auto");
    assert_true(autoplan >= 2);
    struct json_object *ratio = NULL;
    assert_true(json_object_object_get_ex(line, "ratio", &ratio));
    assert_null(ratio); /* JSON null */
    json_object_put(line);
    expect_in_report(r->out,
                     "swap off none (not even experts 2 fits, so no ratio), automatic plan %" PRId64
                     ";",
                     autoplan);
    assert_false(moe_plan_fits(r, 2, "off", "256K"));
    assert_true(moe_plan_fits(r, autoplan, NULL, "256K"));
    free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_fits),
        cmocka_unit_test(test_plan_does_not_fit),
        cmocka_unit_test(test_plan_device_profile_and_host_budget),
        cmocka_unit_test(test_plan_policies),
        cmocka_unit_test(test_plan_auto_reaches_the_floor),
        cmocka_unit_test(test_train_at_the_smallest_budget),
        cmocka_unit_test(test_train),
        cmocka_unit_test(test_train_no_eval),
        cmocka_unit_test(test_train_trace_overhead),
        cmocka_unit_test(test_train_threads_one),
        cmocka_unit_test(test_train_lstm_fashion_mnist),
        cmocka_unit_test(test_lstm_sequences),
        cmocka_unit_test(test_maxbatch_exact),
        cmocka_unit_test(test_maxbatch_needs_a_budget),
        cmocka_unit_test(test_max_lstm_seq_exact),
        cmocka_unit_test(test_max_vary_errors),
        cmocka_unit_test(test_train_from_files),
        cmocka_unit_test(test_plan_onnx),
        cmocka_unit_test(test_plan_onnx_dims),
        cmocka_unit_test(test_train_onnx_language_model_files),
        cmocka_unit_test(test_train_onnx_labels_fewer_classes),
        cmocka_unit_test(test_train_onnx_synthetic),
        cmocka_unit_test(test_max_onnx_batch),
        cmocka_unit_test(test_train_onnx_save_eval),
        cmocka_unit_test(test_train_onnx_mse_and_own_loss),
        cmocka_unit_test(test_train_onnx_two_inputs),
        cmocka_unit_test(test_train_transformer_heldout),
        cmocka_unit_test(test_train_moe),
        cmocka_unit_test(test_max_moe_experts_exact),
        cmocka_unit_test(test_max_swap_off_fits_none),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
