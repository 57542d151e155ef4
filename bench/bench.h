/* SPDX-License-Identifier: MIT */
/*
 * bench.h: what the subcommands of tide-bench share (tide-bench.c, depth.c, max.c).
 */
#ifndef TIDE_BENCH_BENCH_H
#define TIDE_BENCH_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/autodiff.h"
#include "runtime/backend.h"
#include "runtime/session.h"
#include "swapper/swapper.h"
#include "tide/onnx.h"

struct bench_options {
    const char *model;
    int32_t depth; /* ResNet layers: 3 * (10 + n) + 2 */
    int64_t width; /* ResNet base width */
    int64_t image_size; /* ResNet on synthetic images */
    int64_t batch;
    int64_t steps;
    int64_t epochs;
    const char *dataset;
    uint64_t seed;
    const char *optimizer;
    double lr;
    uint64_t budget;
    const char *backend;
    int threads;
    bool json;
    bool poison;
    bool no_eval; /* train: skip the test split */
    bool confirm; /* max, maxbatch: train one step at the automatic plan's value */
    int64_t trace_overhead; /* train: blocks of this many steps, tracing off and on; 0: no */
    const char *trace; /* train: the Chrome trace file of the training steps, or NULL */
    /* plan and depth */
    uint32_t partition_size;
    const char *swap;
    const char *policy;     /* --policy swap|recompute|checkpoint-sqrt; NULL: swap */
    int64_t swap_threshold; /* -1: the policy default */
    int64_t prefetch;       /* -1: the policy default */
    /* plan and train: the memory picture (picture/picture.h), NULL: none */
    const char *svg;
    const char *png;
    /* sequence models (lstm; transformer and moe, bench/lm.c): 0 until parse_options, or
     * the language model's builder, applies the model's default */
    int64_t seq_len; /* time steps: rows of the input images; a language model's window */
    int64_t hidden;  /* LSTM state width */
    int32_t layers;  /* stacked LSTM layers; a language model's blocks */
    const char *vary; /* max: batch, depth, seq or experts */
    /* the language models (transformer, moe): 0 takes the model's default */
    int64_t d_model;        /* features (128) */
    int32_t heads;          /* attention heads (4) */
    int64_t vocab;          /* token ids (256) */
    int64_t experts;        /* moe: experts per layer (8) */
    double capacity_factor; /* moe: expert capacity factor (1.25) */
    double dropout;         /* Dropout rate; < 0 takes the default */
    /* train: data from files (tide/dataset-files.h) and weights out; NULL: none */
    const char *data, *labels;           /* --data, --labels (instead of --dataset) */
    const char *test_data, *test_labels; /* --test-data, --test-labels */
    bool dataset_given;                  /* --dataset was on the command line */
    bool batch_given; /* --batch was (the language models' default is 32; --onnx: the model's) */
    bool eval;        /* the command is eval: --test-data alone is its data */
    const char *save_npz;                /* --save-npz: the trained Variables as NumPy .npz */
    /* train, eval, plan: an imported ONNX model instead of --model (tide/onnx.h); NULL: none */
    const char *onnx;      /* --onnx: the .onnx file */
    const char *output;    /* --output: the prediction output; NULL: the model's first */
    const char *loss;      /* --loss xent|mse|none; NULL: xent */
    const char *frozen;    /* --frozen: comma-separated initializers kept as they are */
    const char *dims;      /* --dim: NAME=N,... sizes of dynamic dimensions by name */
    const char *save_onnx; /* --save: the model with its trained weights, as ONNX */
    /* plan, max, maxbatch, train: the time model and the host budget (swapper/timemodel.h) */
    bool has_profile;                   /* --device-profile was given: profile is it */
    struct tide_device_profile profile; /* else the backend's own, measured by the session */
    uint64_t host_budget;               /* --host-budget; default 80 % of RAM */
    enum tide_math math;                /* --math: the job's math (graph.h); default fp32 */
};

/*
 * Serialized tide.v1.Graph of o->model at o->batch (and o's model sizes:
 * --depth, --width, --seq-len, ...) on images of c x h x w with `classes`
 * classes (a language model ignores them: tide_bench_build_lm); NULL with a
 * message.
 */
uint8_t *tide_bench_build_model(const struct bench_options *o, int64_t c, int64_t h, int64_t w,
                                int32_t classes, size_t *len);

/*
 * The shape of one input image of o->model where tide-bench chooses it (plan,
 * max, and the synthetic dataset of train): 3 x image_size x image_size for
 * resnet, 1 x seq_len x 28 for lstm (a row is a time step), else 1 x 28 x 28
 * as Fashion-MNIST's.
 */
void tide_bench_input_shape(const struct bench_options *o, int64_t *c, int64_t *h, int64_t *w);

/* The memory policy of plan, depth and maxbatch: --budget, --partition-size, --swap, ... */
struct tide_memory_policy tide_bench_memory_policy(const struct bench_options *o);

/* Training options for an optimizer name; lr 0 takes its default. -1 with a message. */
int tide_bench_train_options(const char *optimizer, double lr, struct tide_train_options *out);

/*
 * A plan-only session of the model (bytes, len: a graph of `model`) under
 * train and policy, with the fetches `train` uses (tide_bench_fetches), as
 * the daemon's dry run (tide_session_plan); nothing runs. TIDE_OK or TIDE_DOES_NOT_FIT with
 * *session holding the report either way; any other status: NULL.
 */
enum tide_status tide_bench_plan(const char *model, const uint8_t *bytes, size_t len,
                                 const struct tide_train_options *train,
                                 const struct tide_memory_policy *policy, enum tide_math math,
                                 struct tide_backend *backend, struct tide_session **session,
                                 struct tide_error *err);

/* tide_bench_plan with the fetches given (an ONNX model's prediction output). */
enum tide_status tide_bench_plan_fetching(const char *const *fetches, uint32_t n_fetches,
                                          const uint8_t *bytes, size_t len,
                                          const struct tide_train_options *train,
                                          const struct tide_memory_policy *policy,
                                          enum tide_math math, struct tide_backend *backend,
                                          struct tide_session **session, struct tide_error *err);

/*
 * --onnx (with --output, --loss, --frozen) as a training graph, its dynamic
 * batch dimension set to batch (0: none given; a static batch stays the
 * model's, which t->batch says). 0, or -1 after saying why; free t with
 * tide_onnx_training_free.
 */
int tide_bench_onnx_training(const struct bench_options *o, int64_t batch,
                             struct tide_onnx_training *t);

/*
 * The largest size in [1, max] whose plan fits (search.c): fits(ctx, size)
 * returns 1 when it fits, 0 when not, -1 on an error it has reported. It
 * doubles from 1, then bisects, and assumes that a size fits when a larger
 * one does. Returns the size, 0 when 1 does not fit, or -1 on an error;
 * *capped is true when max itself fits (the answer may lie above it).
 */
int64_t tide_bench_largest(int64_t max, int (*fits)(void *ctx, int64_t size), void *ctx,
                           bool *capped);

/*
 * One real training step of the model (bytes, len: images c x h x w,
 * `batch` of them, synthetic with `seed`) under policy, with the
 * fetches of tide_bench_plan: the measured high water, the plan's peak and
 * the step's time. 0, or -1 after saying why on stderr as "tide-bench what".
 */
int tide_bench_train_step(const char *what, const uint8_t *bytes, size_t len, int64_t batch,
                          int64_t c, int64_t h, int64_t w, uint64_t seed,
                          const struct tide_train_options *train,
                          const struct tide_memory_policy *policy, enum tide_math math,
                          struct tide_backend *backend, uint64_t *high_water, uint64_t *peak,
                          double *ms);

/* Wall time on the monotonic clock, and the whole process's CPU time (every thread). */
double tide_bench_now_ms(void);
double tide_bench_process_cpu_s(void);

/*
 * The language models (bench/lm.c). tide_bench_is_lm: whether model names
 * one ("transformer", "moe"). tide_bench_build_lm: its serialized graph
 * under the options (their zeros taking the model's defaults), with its
 * parameter count in *parameters (may be NULL); NULL after saying why.
 * tide_bench_train_lm: `train` for them, on the fortunes corpus, ending
 * with the held-out loss. tide_bench_fetches: what train fetches for model,
 * which tide_bench_plan pins as train does.
 */
bool tide_bench_is_lm(const char *model);
uint8_t *tide_bench_build_lm(const struct bench_options *o, size_t *len, int64_t *parameters);
int tide_bench_train_lm(const struct bench_options *o);
const char *const *tide_bench_fetches(const char *model, uint32_t *n);

/* tide-bench depth (depth.c), max and maxbatch (max.c: maxbatch is max --vary batch). */
int tide_bench_depth(const struct bench_options *o);
int tide_bench_max(const struct bench_options *o);
int tide_bench_maxbatch(const struct bench_options *o);

/* tide-bench timemodel (timemodel.c): predicted against measured step time at three budgets. */
int tide_bench_timemodel(const struct bench_options *o);

/*
 * tide-bench onnx-tests DIR [--json] [--timeout S] [--backend NAME] [--jobs N]
 * (onnx-tests.c): ONNX's conformance cases under DIR, each imported and run
 * forward on the backend in a forked child, N at a time; argv[0] is
 * "onnx-tests". Returns 0 when no case failed or crashed.
 */
int tide_bench_onnx_tests(int argc, char **argv);

/*
 * tide-bench cpu-ops [--threads T[,T...]] [--reps R] [--only SUBSTRING]
 * (cpu-ops.c): the CPU backend's pooling and BatchNorm kernels against
 * oneDNN's at the models' shapes; argv[0] is "cpu-ops". Returns 0, 1 without
 * oneDNN, 2 on a bad flag.
 */
int tide_bench_cpu_ops(int argc, char **argv);

/* train --trace-overhead K (bench/trace-overhead.c): blocks of K steps with the trace recorder
 * off and on alternately (off on on off, ...); each on block paired with the off block beside it. */
struct tide_bench_trace_ab;
struct tide_bench_trace_ab_figures {
    int64_t pairs;           /* pairs of blocks compared */
    double off_ms, on_ms;    /* median of the blocks' mean step times, recorder off and on */
    double overhead_percent; /* median over pairs of on / off - 1, in per cent */
};
struct tide_bench_trace_ab *tide_bench_trace_ab_new(int64_t block, int64_t steps);
void tide_bench_trace_ab_free(struct tide_bench_trace_ab *ab);
enum tide_status tide_bench_trace_ab_before_step(struct tide_bench_trace_ab *ab,
                                                 struct tide_session *s, struct tide_error *err);
void tide_bench_trace_ab_after_step(struct tide_bench_trace_ab *ab, struct tide_session *s,
                                    double step_ms);
/* The figures; -1 when fewer than two blocks ran. */
int tide_bench_trace_ab_result(struct tide_bench_trace_ab *ab, struct tide_bench_trace_ab_figures *f);

#endif /* TIDE_BENCH_BENCH_H */
