/* SPDX-License-Identifier: MIT */
/*
 * tide-bench: in-process benchmarks of tide's runtime.
 *
 * It links the runtime and goes through the same path as the daemon from the
 * graph on: the client's model builders produce tide.v1.Graph bytes, and a
 * session imports them (validation, shape inference), differentiates,
 * orders, plans memory and executes on a backend. Figures go to stdout; with
 * --json the last line of stdout is one JSON object, and progress goes to
 * stderr.
 *
 *   tide-bench train --model mlp|cnn|resnet|lstm|transformer|moe [--depth D] [--batch B]
 *                    [--steps S | --epochs E] [--dataset fashion-mnist|synthetic|fortunes]
 *                    [--layers L] [--d-model D] [--heads H] [--seq-len S] [--vocab V]
 *                    [--experts E] [--capacity-factor C] [--dropout R]
 *                    [--seed S] [--optimizer sgd|momentum|adam] [--lr X]
 *                    [--budget BYTES] [--backend cpu|cuda|auto] [--threads N] [--json]
 *                    [--math fp32|tf32] [--trace FILE] [--svg FILE] [--png FILE]
 *                    [--data X[,X...] --labels Y [--test-data X2[,X2...] --test-labels Y2]]
 *                    [--save-npz OUT.npz]
 *                    [--onnx FILE [--output NAME] [--loss xent|mse|none] [--frozen A,B]
 *                     [--dim NAME=N[,...]] [--save OUT.onnx]]
 *   tide-bench eval  --onnx FILE [--output NAME] [--frozen A,B] [--dataset D |
 *                    --test-data X[,X...] --test-labels Y] [--json]
 *   tide-bench plan  (--model M [--depth D] [--batch B] | --onnx FILE [--output NAME]
 *                    [--loss xent|mse|none] [--frozen A,B]) --budget BYTES
 *                    [--partition-size K] [--swap auto|on|off] [--device-profile NAME]
 *                    [--host-budget BYTES] [--policy swap|recompute|checkpoint-sqrt] [--json]
 *                    [--svg FILE] [--png FILE]
 *   tide-bench depth [--budget BYTES] [--batch B] [--width W] [--image-size S] [--json]
 *   tide-bench max   --model M --vary batch|depth|seq|experts --budget BYTES
 *                    [model flags] [--partition-size K] [--confirm] [--json]
 *   tide-bench maxbatch --model M [--depth D] [--width W] [--image-size S] --budget BYTES
 *                    [--partition-size K] [--confirm] [--json]
 *
 * The LSTM (--model lstm, with --seq-len, --hidden, --layers) reads images
 * row by row: on Fashion-MNIST 28 steps of 28 pixels; on the synthetic
 * dataset images of --seq-len rows of 28 pixels, so any length.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench-json.h"
#include "bench/bench.h"
#include "graph/import.h"
#include "picture/picture.h"
#include "runtime/session.h"
#include "runtime/profile.h"
#include "tide/dataset-files.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/models.h"
#include "tide/onnx.h"

/* ============================================================================
 * Options
 * ========================================================================== */


static void usage(FILE *out)
{
    fprintf(out,
            "usage: tide-bench train [options]\n"
            "       tide-bench eval --onnx FILE [options]\n"
            "       tide-bench plan --budget BYTES [options]\n"
            "       tide-bench depth [options]\n"
            "       tide-bench max --vary batch|depth|seq|experts --budget BYTES [options]\n"
            "       tide-bench maxbatch --budget BYTES [options]\n"
            "       tide-bench timemodel [options]\n"
            "       tide-bench onnx-tests DIR [--json] [--timeout S] [--backend NAME] [--jobs N]\n"
            "       tide-bench cpu-ops [--threads T[,T...]] [--reps R] [--only SUBSTRING]\n"
            "\n"
            "train  trains a model in-process (the daemon's path from the graph on) and\n"
            "       prints loss, test accuracy (held-out loss in nats per byte for the\n"
            "       language models) and step time.\n"
            "eval   scores an ONNX model (--onnx) on the test split, or on --test-data's\n"
            "       files, forward only, as train scores it after training: test accuracy.\n"
            "plan   compiles the training graph under a memory policy and prints the plan\n"
            "       (partitions, bytes moved, predicted peak, whether it fits) without\n"
            "       running anything; an --onnx model at its own input shapes and batch.\n"
            "depth  finds the deepest ResNet whose plan fits the budget with swap off and\n"
            "       with swap auto (binary search), then trains one step at the swap-auto\n"
            "       maximum to confirm it runs within the budget.\n"
            "max    finds the largest value of one size of --model (--vary) whose plan fits\n"
            "       --budget with swap off (as plan --swap off) and with the automatic plan\n"
            "       (as plan), the other sizes as their flags say: value 1, 2, 4, ... until\n"
            "       a plan does not fit, then bisection. --vary batch: any model, up to\n"
            "       1048576 (an --onnx model exported with a dynamic batch: batch only);\n"
            "       depth: resnet (its layers, up to 3104), lstm, transformer\n"
            "       and moe (--layers, up to 1024); seq: lstm, transformer and moe\n"
            "       (--seq-len, up to 1048576); experts: moe (--experts, 2 up to 65537).\n"
            "       --confirm does not apply to transformer and moe. It plans about\n"
            "       2*log2(value) times for each (progress on stderr: each value, fits or\n"
            "       not, plan ms), so it takes that many plan times: under a second for the\n"
            "       CNN or ResNet-50 (about 40 plans of a few ms), under a minute for a\n"
            "       2000-layer ResNet (0.5 to 1 s a plan), 2 minutes for the LSTM's 4680\n"
            "       steps in 64M (42 plans, up to 7 s each). Nothing runs unless --confirm.\n"
            "maxbatch  max --vary batch, with the JSON fields batch_swap_off and batch_auto\n"
            "       instead of vary, value_swap_off and value_auto.\n"
            "timemodel  the plan's predicted_step_ms against measured steps (--steps, default\n"
            "       10, after 2 warm-up steps, synthetic data) at three budgets: the resident\n"
            "       peak, the smallest that fits, and halfway; the median and fastest step,\n"
            "       CPU time per step and the measured stall. A benchmark, not a check.\n"
            "onnx-tests  runs ONNX's conformance cases under DIR (each a folder of\n"
            "       model.onnx and test_data_set_N/, as in libonnx-testdata): imports each\n"
            "       model, runs it forward on --backend (default cpu; cuda checks the GPU's\n"
            "       kernels) in a child process (--timeout S, default 60) and compares the\n"
            "       outputs (rtol 1e-3, atol 1e-5). --jobs N runs N cases at a time (their\n"
            "       lines then in the order they end). Prints pass|fail|unsupported|crashed\n"
            "       DIR [why] per case, a summary and with --json the counts; exits 1 on any\n"
            "       fail or crash.\n"
            "cpu-ops  the CPU backend's pooling and BatchNorm kernels against oneDNN's at\n"
            "       the models' shapes: the fastest of --reps R (default 5) runs of each,\n"
            "       alternating, at each --threads count (default 1,2), and oneDNN / tide.\n"
            "\n"
            "  --model NAME             mlp, cnn (default), resnet, lstm, or the language models\n"
            "                           transformer and moe (on the fortunes corpus)\n"
            "  --depth D                ResNet layers, 3*(10+n)+2 for n >= 1 (default 38)\n"
            "  --width W                ResNet base width (default 16)\n"
            "  --image-size S           ResNet image size on the synthetic dataset (default 32)\n"
            "  --seq-len N              LSTM time steps: image rows of 28 pixels (default 28,\n"
            "                           Fashion-MNIST's; other lengths on --dataset synthetic);\n"
            "                           transformer, moe: tokens per window (default 128)\n"
            "  --hidden H               LSTM state width (default 128)\n"
            "  --layers L               stacked LSTM layers (default 1); transformer, moe:\n"
            "                           blocks (default 4)\n"
            "  --batch B                batch size (default 64; 32 windows for transformer, moe;\n"
            "                           --onnx: the model's)\n"
            "  --steps S                train S steps (default 100)\n"
            "  --epochs E               train E epochs (instead of --steps); an epoch of transformer\n"
            "                           or moe is as many random windows as the train split\n"
            "                           holds consecutive ones\n"
            "  --dataset NAME           fashion-mnist (default) or synthetic; fortunes (Debian's\n"
            "                           fortunes package, byte-level, 90 %% train, 10 %% held\n"
            "                           out) for transformer and moe, and their default;\n"
            "                           synthetic for --onnx: random examples of the model's\n"
            "                           (float) input shape, labels below its classes\n"
            "  --seed S                 seed for initialisation and shuffling (default 1)\n"
            "  --optimizer NAME         sgd (default for --onnx), momentum (default; adam for lstm,\n"
            "                           transformer, moe) or adam\n"
            "  --lr X                   learning rate (default 0.05 sgd, 0.02 momentum, 0.001 adam;\n"
            "                           0.003 adam for lstm, transformer, moe)\n"
            "  --d-model D              transformer, moe: features (default 128)\n"
            "  --heads H                transformer, moe: attention heads, dividing D (default 4)\n"
            "  --vocab V                transformer, moe: token ids (default 256, bytes; at least\n"
            "                           256 to train on fortunes)\n"
            "  --experts E              moe: experts per layer (default 8)\n"
            "  --capacity-factor C      moe: each expert takes ceil(C * tokens * 2 / E) tokens\n"
            "                           (default 1.25); more are dropped\n"
            "  --dropout R              transformer, moe: Dropout rate in [0, 1) (default 0)\n"
            "  --budget BYTES           device budget, K/M/G suffixes allowed (default: the plan's peak)\n"
            "  --backend NAME           cpu (default), cuda or auto\n"
            "  --threads N              CPU threads the kernels use at most, oneDNN's\n"
            "                           convolutions included (default: one per core;\n"
            "                           TIDE_CPU_ONEDNN=0 turns oneDNN off)\n"
            "  --poison                 poison dead regions (debug)\n"
            "  --trace FILE             train: write a Chrome trace (ui.perfetto.dev) of every\n"
            "                           training step, not of the evaluation after them\n"
            "  --partition-size K       plan/depth/max: nodes per partition; 0 (default): the\n"
            "                           planner picks it (powers of two, 1 to 256)\n"
            "  --swap auto|on|off       plan: swap policy (default auto, with autotune)\n"
            "  --swap-threshold T       plan: swap when the next use is > T partitions away\n"
            "  --prefetch P             plan: swap in P partitions before the use\n"
            "  --device-profile NAME    plan/max/maxbatch/train: the device the plan is for,\n"
            "                           cpu (this machine's CPU backend, measured), h100 or\n"
            "                           h200 (published figures); default: the backend's own.\n"
            "                           The automatic plan is the fitting one with the lowest\n"
            "                           predicted step time; plan prints predicted_step_ms\n"
            "  --math fp32|tf32         every command: the math of the convolutions and matrix\n"
            "                           products (default fp32); tf32 lets a GPU multiply on TF32\n"
            "                           tensor cores (faster, 10-bit mantissas, still the same\n"
            "                           bits every run); the CPU computes fp32 either way\n"
            "  --host-budget BYTES      host memory a plan may use (host-homed variables, swap\n"
            "                           slots, staging); default 80 %% of RAM, 0: no limit\n"
            "  --policy swap|recompute|checkpoint-sqrt\n"
            "                           plan, train, max, maxbatch: the memory actions (default:\n"
            "                           recompute for a GPU's profile, swap for the CPU's); swap:\n"
            "                           keep or swap only; recompute: also run cheap producers\n"
            "                           again before far uses, where that moves fewer bytes;\n"
            "                           checkpoint-sqrt: Chen et al.'s baseline, sqrt(n)-node\n"
            "                           segments, cheap maps used in a later one recomputed,\n"
            "                           the rest kept, nothing swapped\n"
            "  --vary SIZE              max: batch, depth, seq or experts (see max above)\n"
            "  --confirm                max, maxbatch: train one step at the automatic plan's\n"
            "                           value (synthetic data) and check its high water <= budget\n"
            "  --svg FILE               plan/train: draw the plan's device memory over one step\n"
            "                           (by category, budget, peak, partitions, swaps) as SVG;\n"
            "                           train overlays the last step's measured high water\n"
            "  --png FILE               plan/train: the same picture as PNG\n"
            "  --no-eval                train: skip the test split (no accuracy or held-out\n"
            "                           loss printed)\n"
            "  --trace-overhead K       train: what tracing costs — blocks of K steps with the\n"
            "                           recorder off and on in turn (off on on off ...), each on\n"
            "                           block against the off block beside it; --steps a\n"
            "                           multiple of 4*K\n"
            "  --data X --labels Y      train: your own data instead of --dataset: examples\n"
            "                           [N, ...] and class labels [N], NumPy .npy (float32 or\n"
            "                           uint8 examples, uint8 scaled to [0, 1]; int32, int64 or\n"
            "                           uint8 labels; float32 targets [N, ...] for --onnx --loss\n"
            "                           mse or none) or IDX files; the examples' shape sets\n"
            "                           the model's input (mlp: any; cnn, resnet: [C, H, W] or\n"
            "                           [H, W]; lstm: [S, F]), the largest label + 1 the classes;\n"
            "                           with --onnx, X may list one file per model input,\n"
            "                           X1,X2 in the model's input order (a BERT's ids and\n"
            "                           mask), each [N, ...] of the same N, int32 or int64 ones\n"
            "                           for int inputs\n"
            "  --test-data X2 --test-labels Y2\n"
            "                           train: the examples scored after training (with --data;\n"
            "                           without them, no test split); eval: the examples it\n"
            "                           scores instead of --dataset's test split (as --data:\n"
            "                           one file per input of an --onnx model of several)\n"
            "  --save-npz FILE          train: write the trained Variables as NumPy .npz\n"
            "  --onnx FILE              train, eval, plan, max: an ONNX model instead of --model\n"
            "                           (as PyTorch exports it: see the README, \"Train your own\n"
            "                           model\"); its input takes the images (with --data, each\n"
            "                           input its own file), its static batch is the batch\n"
            "                           (--batch only stands for a dynamic one)\n"
            "  --output NAME            the ONNX output that predicts (default: its first)\n"
            "  --loss xent|mse|none     the loss on that output (default xent: cross-entropy\n"
            "                           against the class labels, output [B, classes]; mse:\n"
            "                           float32 --labels of the output's per-example shape;\n"
            "                           none: the output is the model's own loss, --labels\n"
            "                           feeds its second graph input)\n"
            "  --frozen A,B             float initializers to keep as they are, not train\n"
            "                           (buffers such as a causal mask)\n"
            "  --dim NAME=N[,NAME=N]    sizes of an --onnx model's dynamic dimensions other\n"
            "                           than the batch, by their names in the file (an export\n"
            "                           with dynamic_axes {0: \"batch\", 1: \"seq\"} takes\n"
            "                           --dim seq=128; --batch sets the batch)\n"
            "  --save OUT.onnx          train --onnx: write the model with its trained weights\n"
            "  --json                   end with one JSON line on stdout\n"
            "  -h, --help               this text\n");
}

static int parse_u64(const char *text, const char *flag, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    uint64_t scale = 1;
    if (*end == 'K' || *end == 'k')
        scale = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm')
        scale = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g')
        scale = 1ull << 30, end++;
    if (errno || end == text || *end || v < 0 || v * (double)scale > 1.8e19) {
        fprintf(stderr, "tide-bench: %s wants a non-negative number, got \"%s\"\n", flag, text);
        return -1;
    }
    *out = (uint64_t)(v * (double)scale);
    return 0;
}

static int parse_i64(const char *text, const char *flag, int64_t min, int64_t *out)
{
    uint64_t v;
    if (parse_u64(text, flag, &v) != 0)
        return -1;
    if ((int64_t)v < min || v > INT32_MAX) {
        fprintf(stderr, "tide-bench: %s must be between %" PRId64 " and %d, got %s\n", flag, min,
                INT32_MAX, text);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

/*
 * The flags of the sequence models (lstm, and the language models
 * transformer and moe): each applies to the models listed (a list in words,
 * "a, b or c", whose names end at a space or a comma),
 * and anything else is refused. After parsing, the defaults of the model:
 * for lstm --seq-len 28 (Fashion-MNIST's rows, the only length it has:
 * train refuses others on it; plan and max read no data), --hidden 128,
 * --layers 1; for transformer and moe --seq-len 128, --layers 4 and 32
 * windows a batch (the rest in tide_model_lm_options_default); and for all
 * three Adam at TIDE_MODEL_LSTM_LEARNING_RATE (0.003, also the language
 * models' reference) unless --optimizer or --lr says otherwise; other
 * models keep momentum.
 */
static int sequence_defaults(struct bench_options *o)
{
    const struct {
        const char *flag, *models;
        bool given;
    } flags[] = {
        {"--seq-len", "lstm, transformer or moe", o->seq_len != 0},
        {"--hidden", "lstm", o->hidden != 0},
        {"--layers", "lstm, transformer or moe", o->layers != 0},
        {"--d-model", "transformer or moe", o->d_model != 0},
        {"--heads", "transformer or moe", o->heads != 0},
        {"--vocab", "transformer or moe", o->vocab != 0},
        {"--dropout", "transformer or moe", o->dropout >= 0},
        {"--experts", "moe", o->experts != 0},
        {"--capacity-factor", "moe", o->capacity_factor > 0},
    };
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        const char *at = strstr(flags[i].models, o->model);
        size_t n = strlen(o->model);
        bool listed = at && (at == flags[i].models || at[-1] == ' ') &&
                      (!at[n] || at[n] == ' ' || at[n] == ',');
        if (flags[i].given && !listed) {
            fprintf(stderr, "tide-bench: %s applies to --model %s only, not to %s\n",
                    flags[i].flag, flags[i].models, o->model);
            return -1;
        }
    }
    bool lstm = strcmp(o->model, "lstm") == 0, lm = tide_bench_is_lm(o->model);
    if (!o->seq_len)
        o->seq_len = lm ? 128 : 28;
    if (!o->hidden)
        o->hidden = 128;
    if (!o->layers)
        o->layers = lm ? 4 : 1;
    if (lm && !o->batch_given)
        o->batch = 32;
    /*
     * An ONNX model trains with plain SGD unless told otherwise: its batch is
     * the one it was exported with (cnn.onnx's is 8), and momentum's default
     * step is too long for small batches (cnn.onnx: 0.844 test accuracy after
     * an epoch with momentum, 0.861 to 0.876 with SGD at 0.05 over seeds 1-3).
     */
    if (!o->optimizer)
        o->optimizer = lstm || lm ? "adam" : o->onnx ? "sgd" : "momentum";
    if ((lstm || lm) && o->lr == 0 && strcmp(o->optimizer, "adam") == 0)
        o->lr = TIDE_MODEL_LSTM_LEARNING_RATE;
    return 0;
}

/*
 * Data from files: --data and --labels together, --test-data and
 * --test-labels together and only with them (eval: alone, its data); not
 * with --dataset, nor with --seq-len (the examples' shape [S, F] sets it).
 */
static int data_file_checks(const struct bench_options *o)
{
    const char *problem = NULL;
    if (!o->data && !o->labels && !o->test_data && !o->test_labels)
        return 0;
    if (!o->data != !o->labels)
        problem = "--data and --labels come together (examples and their labels)";
    else if (!o->test_data != !o->test_labels)
        problem = "--test-data and --test-labels come together";
    else if (!o->data && !o->eval)
        problem = "--test-data needs --data and --labels";
    else if (o->dataset_given)
        problem = o->data ? "--dataset and --data exclude each other"
                          : "--dataset and --test-data exclude each other";
    else if (o->seq_len)
        problem = "--seq-len does not apply with --data: the examples' shape [S, F] sets the "
                  "sequence length";
    else if (!o->onnx && (strchr(o->data, ',') || (o->test_data && strchr(o->test_data, ','))))
        problem = "--data A,B (one file per model input) is for an --onnx model of several "
                  "inputs; --model reads one file of examples";
    if (!problem)
        return 0;
    fprintf(stderr, "tide-bench: %s\n", problem);
    return -1;
}

/* The ONNX flags need --onnx, which excludes --model's own sizes. */
static int onnx_checks(const struct bench_options *o)
{
    const char *problem = NULL;
    if (!o->onnx && (o->output || o->loss || o->frozen || o->dims || o->save_onnx))
        problem =
            "--output, --loss, --frozen, --dim and --save apply to an ONNX model: give --onnx "
            "FILE";
    else if (o->onnx && (strcmp(o->model, "cnn") != 0 || o->depth != 38 || o->width != 16 ||
                         o->seq_len || o->hidden || o->layers || o->d_model || o->heads ||
                         o->vocab || o->experts || o->capacity_factor > 0 || o->dropout >= 0))
        problem = "--onnx names the model: --model and its sizes (--depth, --width, --seq-len, "
                  "--hidden, --layers, --d-model, --heads, --vocab, --experts, --capacity-factor, "
                  "--dropout) do not apply";
    if (!problem)
        return 0;
    fprintf(stderr, "tide-bench: %s\n", problem);
    return -1;
}

static int parse_options(int argc, char **argv, struct bench_options *o)
{
    enum { O_DEPTH = 256, O_WIDTH, O_IMAGE, O_DATASET, O_SEED, O_OPT, O_LR, O_BUDGET, O_BACKEND,
           O_THREADS, O_JSON, O_POISON, O_STEPS, O_EPOCHS, O_PARTITION, O_SWAP, O_THRESHOLD,
           O_PREFETCH, O_TRACE, O_SVG, O_PNG, O_NO_EVAL, O_TRACE_OVERHEAD, O_CONFIRM,
           O_SEQ_LEN, O_HIDDEN, O_LAYERS, O_VARY,
           O_DATA, O_LABELS, O_TEST_DATA, O_TEST_LABELS, O_SAVE_NPZ,
           O_ONNX, O_OUTPUT, O_LOSS, O_FROZEN, O_DIM, O_SAVE,
           /* the language models */
           O_D_MODEL, O_HEADS, O_VOCAB, O_EXPERTS, O_CAPACITY, O_DROPOUT,
           O_DEVICE_PROFILE, O_HOST_BUDGET, O_POLICY, O_MATH };
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},   {"depth", required_argument, 0, O_DEPTH},
        {"width", required_argument, 0, O_WIDTH}, {"image-size", required_argument, 0, O_IMAGE},
        {"batch", required_argument, 0, 'b'},   {"steps", required_argument, 0, O_STEPS},
        {"epochs", required_argument, 0, O_EPOCHS}, {"dataset", required_argument, 0, O_DATASET},
        {"seed", required_argument, 0, O_SEED}, {"optimizer", required_argument, 0, O_OPT},
        {"lr", required_argument, 0, O_LR},     {"budget", required_argument, 0, O_BUDGET},
        {"backend", required_argument, 0, O_BACKEND}, {"threads", required_argument, 0, O_THREADS},
        {"json", no_argument, 0, O_JSON},       {"poison", no_argument, 0, O_POISON},
        {"no-eval", no_argument, 0, O_NO_EVAL},  {"confirm", no_argument, 0, O_CONFIRM},
        {"trace-overhead", required_argument, 0, O_TRACE_OVERHEAD},
        {"partition-size", required_argument, 0, O_PARTITION},
        {"swap", required_argument, 0, O_SWAP}, {"swap-threshold", required_argument, 0, O_THRESHOLD},
        {"prefetch", required_argument, 0, O_PREFETCH},
        {"device-profile", required_argument, 0, O_DEVICE_PROFILE},
        {"host-budget", required_argument, 0, O_HOST_BUDGET},
        {"policy", required_argument, 0, O_POLICY},
        {"math", required_argument, 0, O_MATH},
        {"trace", required_argument, 0, O_TRACE},
        {"svg", required_argument, 0, O_SVG},   {"png", required_argument, 0, O_PNG},
        {"help", no_argument, 0, 'h'},
        /* sequence models, and max */
        {"seq-len", required_argument, 0, O_SEQ_LEN}, {"hidden", required_argument, 0, O_HIDDEN},
        {"layers", required_argument, 0, O_LAYERS}, {"vary", required_argument, 0, O_VARY},
        /* data from files, and weights out */
        {"data", required_argument, 0, O_DATA}, {"labels", required_argument, 0, O_LABELS},
        {"test-data", required_argument, 0, O_TEST_DATA},
        {"test-labels", required_argument, 0, O_TEST_LABELS},
        {"save-npz", required_argument, 0, O_SAVE_NPZ},
        /* ONNX models */
        {"onnx", required_argument, 0, O_ONNX}, {"output", required_argument, 0, O_OUTPUT},
        {"loss", required_argument, 0, O_LOSS}, {"frozen", required_argument, 0, O_FROZEN},
        {"dim", required_argument, 0, O_DIM}, {"save", required_argument, 0, O_SAVE},
        /* the language models */
        {"d-model", required_argument, 0, O_D_MODEL}, {"heads", required_argument, 0, O_HEADS},
        {"vocab", required_argument, 0, O_VOCAB}, {"experts", required_argument, 0, O_EXPERTS},
        {"capacity-factor", required_argument, 0, O_CAPACITY},
        {"dropout", required_argument, 0, O_DROPOUT},
        {0, 0, 0, 0},
    };
    int64_t v;
    uint64_t u;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hm:b:", longs, NULL)) != -1) {
        switch (c) {
        case 'm':
            o->model = optarg;
            break;
        case 'b':
            if (parse_i64(optarg, "--batch", 1, &o->batch))
                return -1;
            o->batch_given = true;
            break;
        case O_DEPTH:
            if (parse_i64(optarg, "--depth", 35, &v))
                return -1;
            o->depth = (int32_t)v;
            break;
        case O_WIDTH:
            if (parse_i64(optarg, "--width", 1, &o->width))
                return -1;
            break;
        case O_IMAGE:
            if (parse_i64(optarg, "--image-size", 8, &o->image_size))
                return -1;
            break;
        case O_STEPS:
            if (parse_i64(optarg, "--steps", 1, &o->steps))
                return -1;
            break;
        case O_EPOCHS:
            if (parse_i64(optarg, "--epochs", 1, &o->epochs))
                return -1;
            break;
        case O_DATASET:
            o->dataset = optarg;
            o->dataset_given = true;
            break;
        case O_SEED:
            if (parse_u64(optarg, "--seed", &o->seed))
                return -1;
            break;
        case O_OPT:
            o->optimizer = optarg;
            break;
        case O_LR: {
            char *end;
            o->lr = strtod(optarg, &end);
            if (end == optarg || *end || !(o->lr > 0) || !isfinite(o->lr)) {
                fprintf(stderr, "tide-bench: --lr wants a positive number, got \"%s\"\n", optarg);
                return -1;
            }
            break;
        }
        case O_BUDGET:
            if (parse_u64(optarg, "--budget", &u))
                return -1;
            o->budget = u;
            break;
        case O_DEVICE_PROFILE: {
            struct tide_error perr = {0};
            if (tide_device_profile_resolve(optarg, NULL, &o->profile, &perr) != TIDE_OK) {
                fprintf(stderr, "tide-bench: --device-profile: %s\n", perr.message);
                return -1;
            }
            o->has_profile = true;
            break;
        }
        case O_MATH: {
            struct tide_error merr = {0};
            if (tide_math_parse(optarg, &o->math, &merr) != TIDE_OK) {
                fprintf(stderr, "tide-bench: --math: %s\n", merr.message);
                return -1;
            }
            break;
        }
        case O_HOST_BUDGET:
            if (parse_u64(optarg, "--host-budget", &u))
                return -1;
            o->host_budget = u;
            break;
        case O_BACKEND:
            o->backend = optarg;
            break;
        case O_THREADS:
            if (parse_i64(optarg, "--threads", 1, &v))
                return -1;
            o->threads = (int)v;
            break;
        case O_JSON:
            o->json = true;
            break;
        case O_PARTITION:
            if (parse_i64(optarg, "--partition-size", 0, &v))
                return -1;
            o->partition_size = (uint32_t)v;
            break;
        case O_SWAP:
            if (strcmp(optarg, "auto") && strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "tide-bench: --swap must be auto, on or off, got \"%s\"\n", optarg);
                return -1;
            }
            o->swap = optarg;
            break;
        case O_POLICY:
            if (strcmp(optarg, "swap") && strcmp(optarg, "recompute") &&
                strcmp(optarg, "checkpoint-sqrt")) {
                fprintf(stderr,
                        "tide-bench: --policy must be swap, recompute or checkpoint-sqrt, got "
                        "\"%s\"\n",
                        optarg);
                return -1;
            }
            o->policy = optarg;
            break;
        case O_THRESHOLD:
            if (parse_i64(optarg, "--swap-threshold", 0, &o->swap_threshold))
                return -1;
            break;
        case O_PREFETCH:
            if (parse_i64(optarg, "--prefetch", 0, &o->prefetch))
                return -1;
            break;
        case O_POISON:
            o->poison = true;
            break;
        case O_NO_EVAL:
            o->no_eval = true;
            break;
        case O_CONFIRM:
            o->confirm = true;
            break;
        case O_TRACE_OVERHEAD:
            if (parse_i64(optarg, "--trace-overhead", 1, &o->trace_overhead))
                return -1;
            break;
        case O_TRACE:
            o->trace = optarg;
            break;
        case O_SVG:
            o->svg = optarg;
            break;
        case O_PNG:
            o->png = optarg;
            break;
        /* Sequence models, and max. */
        case O_SEQ_LEN:
            if (parse_i64(optarg, "--seq-len", 1, &o->seq_len))
                return -1;
            break;
        case O_HIDDEN:
            if (parse_i64(optarg, "--hidden", 1, &o->hidden))
                return -1;
            break;
        case O_LAYERS:
            if (parse_i64(optarg, "--layers", 1, &v))
                return -1;
            o->layers = (int32_t)v;
            break;
        case O_VARY:
            o->vary = optarg;
            break;
        /* Data from files, and weights out. */
        case O_DATA:
            o->data = optarg;
            break;
        case O_LABELS:
            o->labels = optarg;
            break;
        case O_TEST_DATA:
            o->test_data = optarg;
            break;
        case O_TEST_LABELS:
            o->test_labels = optarg;
            break;
        case O_SAVE_NPZ:
            o->save_npz = optarg;
            break;
        /* ONNX models. */
        case O_ONNX:
            o->onnx = optarg;
            break;
        case O_OUTPUT:
            o->output = optarg;
            break;
        case O_LOSS: {
            enum tide_onnx_loss loss;
            if (tide_onnx_loss_parse(optarg, &loss) != 0) {
                fprintf(stderr, "tide-bench: --loss must be xent, mse or none, got \"%s\"\n",
                        optarg);
                return -1;
            }
            o->loss = optarg;
            break;
        }
        case O_FROZEN:
            o->frozen = optarg;
            break;
        case O_DIM: {
            char *copy, err[256];
            struct tide_onnx_dim *dims;
            size_t n;
            if (tide_onnx_parse_dims(optarg, &copy, &dims, &n, err, sizeof(err)) != 0) {
                fprintf(stderr, "tide-bench: --dim: %s\n", err);
                return -1;
            }
            free(copy), free(dims);
            o->dims = optarg;
            break;
        }
        case O_SAVE:
            o->save_onnx = optarg;
            break;
        /* The language models. */
        case O_D_MODEL:
            if (parse_i64(optarg, "--d-model", 1, &o->d_model))
                return -1;
            break;
        case O_HEADS:
            if (parse_i64(optarg, "--heads", 1, &v))
                return -1;
            o->heads = (int32_t)v;
            break;
        case O_VOCAB:
            if (parse_i64(optarg, "--vocab", 1, &o->vocab))
                return -1;
            break;
        case O_EXPERTS:
            if (parse_i64(optarg, "--experts", 1, &o->experts))
                return -1;
            break;
        case O_CAPACITY:
        case O_DROPOUT: {
            char *end;
            double x = strtod(optarg, &end);
            bool capacity = c == O_CAPACITY;
            bool in_range = capacity ? x > 0 : x >= 0 && x < 1;
            if (end == optarg || *end || !isfinite(x) || !in_range) {
                fprintf(stderr, "tide-bench: %s wants %s, got \"%s\"\n",
                        capacity ? "--capacity-factor" : "--dropout",
                        capacity ? "a number > 0" : "a rate from 0 up to (not including) 1",
                        optarg);
                return -1;
            }
            *(capacity ? &o->capacity_factor : &o->dropout) = x;
            break;
        }
        case 'h':
            usage(stdout);
            exit(0);
        default:
            fprintf(stderr, "tide-bench: unknown or incomplete option \"%s\" (see --help)\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tide-bench: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        return -1;
    }
    if (strcmp(o->model, "mlp") && strcmp(o->model, "cnn") && strcmp(o->model, "resnet") &&
        strcmp(o->model, "lstm") && !tide_bench_is_lm(o->model)) {
        fprintf(stderr, "tide-bench: --model must be mlp, cnn, resnet, lstm, transformer or moe, "
                "got \"%s\"\n", o->model);
        return -1;
    }
    if (data_file_checks(o) != 0 || onnx_checks(o) != 0)
        return -1;
    if (sequence_defaults(o) != 0)
        return -1;
    /* The language models read the fortunes corpus, by default and only. */
    bool lm = tide_bench_is_lm(o->model);
    if (lm && !o->dataset_given)
        o->dataset = "fortunes";
    if (lm ? strcmp(o->dataset, "fortunes") != 0
           : strcmp(o->dataset, "fashion-mnist") && strcmp(o->dataset, "synthetic")) {
        fprintf(stderr, "tide-bench: --dataset must be %s for %s %s, got \"%s\"\n",
                lm ? "fortunes" : "fashion-mnist or synthetic", o->onnx ? "--onnx" : "--model",
                o->onnx ? o->onnx : o->model, o->dataset);
        return -1;
    }
    if ((o->depth - 2) % 3 != 0 || (o->depth - 2) / 3 - 10 < 1) {
        int32_t n = (o->depth - 2) / 3 - 10;
        if (n < 1)
            n = 1;
        fprintf(stderr,
                "tide-bench: --depth must be 3*(10+n)+2 for n >= 1 (35, 38, 41, ...); "
                "%d is not: try %d or %d\n",
                o->depth, tide_model_resnet_depth(n), tide_model_resnet_depth(n + 1));
        return -1;
    }
    return 0;
}

/* ============================================================================
 * Training
 * ========================================================================== */

double tide_bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread) so far, in seconds. */
double tide_bench_process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Split `split` of --dataset; synthetic images take the model's input shape. */
/* Opens split of --dataset; synthetic data takes --onnx's model's shape when t is not NULL. */
static int open_split(const struct bench_options *o, const struct tide_onnx_training *t,
                      const char *split, tide_dataset **out)
{
    char err[512];
    int rc;
    if (strcmp(o->dataset, "synthetic") == 0) {
        struct tide_synthetic_options s = {.seed = o->seed};
        rc = 0;
        if (t)
            rc = tide_onnx_training_synthetic(t, &s, err, sizeof(err));
        else
            tide_bench_input_shape(o, &s.channels, &s.height, &s.width);
        if (rc == 0)
            rc = tide_dataset_open_synthetic(&s, split, out, err, sizeof(err));
    } else {
        rc = tide_dataset_open(o->dataset, NULL, split, out, err, sizeof(err));
    }
    if (rc != 0)
        fprintf(stderr, "tide-bench: %s\n", err);
    return rc;
}

uint8_t *tide_bench_build_model(const struct bench_options *o, int64_t c, int64_t h, int64_t w,
                                int32_t classes, size_t *len)
{
    if (tide_bench_is_lm(o->model)) /* tokens, not images: its sizes are all in o */
        return tide_bench_build_lm(o, len, NULL);
    tide_builder *b = tide_builder_new();
    if (!b)
        return NULL;
    tide_ref logits;
    if (strcmp(o->model, "mlp") == 0) {
        int64_t hidden[2] = {256, 128};
        logits = tide_model_mlp(b, o->batch, c * h * w, hidden, 2, classes);
    } else if (strcmp(o->model, "cnn") == 0) {
        logits = tide_model_cnn(b, o->batch, c, h, w, classes);
    } else if (strcmp(o->model, "lstm") == 0) {
        /* A row of the image is a time step (c is 1: the model's images are [B, 1, S, F]). */
        logits = tide_model_lstm(b, o->batch, c * h, w, o->hidden, o->layers, classes);
    } else {
        logits = tide_model_resnet(b, o->batch, c, h, classes, (o->depth - 2) / 3 - 10, o->width);
    }
    uint8_t *bytes = NULL;
    if (logits.id < 0 || tide_builder_serialize(b, &bytes, len) != 0) {
        fprintf(stderr, "tide-bench: building %s: %s\n", o->model, tide_builder_error(b));
        bytes = NULL;
    }
    tide_builder_free(b);
    return bytes;
}

void tide_bench_input_shape(const struct bench_options *o, int64_t *c, int64_t *h, int64_t *w)
{
    *c = 1, *h = 28, *w = 28;
    if (strcmp(o->model, "resnet") == 0)
        *c = 3, *h = *w = o->image_size;
    else if (strcmp(o->model, "lstm") == 0)
        *h = o->seq_len;
}

/* ============================================================================
 * Data from files (--data ...) and weights out (--save-npz)
 * ========================================================================== */

/*
 * Opens --data/--labels and, with --test-data, the test files (else *test
 * is NULL), and the images shape that --model reads them as. Returns 0, 1
 * (a bad file) or 2 (examples the model cannot read), having said why.
 */
/*
 * Opens the dataset of --data's files: with --onnx, a comma-separated list
 * of one file per model input (int files allowed for int inputs), split into
 * *paths (pointers into *copy; the caller frees both); else the one file.
 */
static int open_data(const struct bench_options *o, const char *list, const char *labels,
                     const tide_dataset *like, tide_dataset **out, char **copy,
                     const char ***paths, size_t *n, char *err, size_t err_size)
{
    *copy = NULL, *paths = NULL, *n = 0;
    if (!o->onnx)
        return tide_dataset_open_files(list, labels, like, out, err, err_size);
    if (tide_onnx_split_names(list, copy, paths, n) != 0 || *n == 0) {
        snprintf(err, err_size, "%s: %s", list, *n ? "out of memory" : "names no file");
        return -1;
    }
    return tide_dataset_open_files_n(*paths, (int32_t)*n, labels, like, out, err, err_size);
}

static int open_files(const struct bench_options *o, tide_dataset **train, tide_dataset **test,
                      int64_t *c, int64_t *h, int64_t *w, char **copy, const char ***paths,
                      size_t *n)
{
    char err[1024];
    *train = *test = NULL;
    if (open_data(o, o->data, o->labels, NULL, train, copy, paths, n, err, sizeof(err)) != 0) {
        fprintf(stderr, "tide-bench: %s\n", err);
        return 1;
    }
    int rc = 0;
    /* An ONNX model reads any example shape of its input's size, as the MLP does. */
    const char *reader = o->onnx ? "mlp" : o->model;
    int64_t label_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    if (!o->onnx && tide_dataset_label_dtype(*train) != TIDE_DT_INT32) {
        snprintf(err, sizeof(err),
                 "%s: float32 labels are targets, for an --onnx model with --loss mse or none; "
                 "--model %s learns int class labels",
                 o->labels, o->model);
        rc = 2;
    } else if (!o->onnx && tide_dataset_label_shape(*train, label_dims) > 0) {
        snprintf(err, sizeof(err),
                 "%s: a class label per position ([N, S] labels) is for an --onnx model whose "
                 "output has one per position (a language model's [B, S, V]); --model %s learns "
                 "one class an example ([N] labels)",
                 o->labels, o->model);
        rc = 2;
    } else if (tide_dataset_model_input(*train, reader, c, h, w, err, sizeof(err)) != 0)
        rc = 2;
    else if (o->test_data) {
        char *test_copy;
        const char **test_paths;
        size_t test_n;
        if (open_data(o, o->test_data, o->test_labels, *train, test, &test_copy, &test_paths,
                      &test_n, err, sizeof(err)) != 0)
            rc = 1;
        free(test_copy);
        free(test_paths);
    }
    if (rc != 0) {
        fprintf(stderr, "tide-bench: %s\n", err);
        tide_dataset_free(*train);
        *train = NULL;
    }
    return rc;
}

/* The trainable parameters of the model's graph bytes (the Variables' values); -1 on error. */
static int64_t parameters(const uint8_t *bytes, size_t len)
{
    struct tide_graph *g = NULL;
    struct tide_error err = {0};
    if (tide_graph_import(bytes, len, NULL, &g, &err) != TIDE_OK)
        return -1;
    int64_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        if (g->nodes[v].op == TIDE_OP_VARIABLE)
            n += tide_shape_numel(&g->nodes[v].outputs[0].shape);
    tide_graph_free(g);
    return n;
}

/*
 * Reads the Variables of the model's graph (bytes: what the daemon would
 * call the job's own Variables, optimizer state excluded) from the session
 * into *arrays (malloc'd, each one's data malloc'd, named into *g); flag
 * names the option in messages. 0, or -1 having said why; either way the
 * caller frees with free_variables().
 */
static int read_variables(struct tide_session *s, const uint8_t *bytes, size_t len,
                          const char *flag, struct tide_graph **g, struct tide_tensor **arrays,
                          size_t *n)
{
    struct tide_error err = {0};
    *g = NULL, *arrays = NULL, *n = 0;
    if (tide_graph_import(bytes, len, NULL, g, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: %s: %s\n", flag, err.message);
        return -1;
    }
    *arrays = calloc((*g)->n_nodes ? (*g)->n_nodes : 1, sizeof(**arrays));
    int rc = *arrays ? 0 : -1;
    for (uint32_t v = 0; rc == 0 && v < (*g)->n_nodes; v++) {
        const struct tide_node *node = &(*g)->nodes[v];
        if (node->op != TIDE_OP_VARIABLE)
            continue;
        const struct tide_shape *shape = &node->outputs[0].shape;
        struct tide_tensor *a = &(*arrays)[(*n)++];
        a->name = node->name;
        a->dtype = TIDE_DT_FLOAT32;
        a->rank = shape->rank;
        memcpy(a->dims, shape->dims, (size_t)shape->rank * sizeof(int64_t));
        a->bytes = (size_t)tide_shape_numel(shape) * sizeof(float);
        void *data = malloc(a->bytes ? a->bytes : 1);
        a->data = data;
        if (!data || tide_session_fetch(s, node->name, data, a->bytes, &err) != TIDE_OK) {
            fprintf(stderr, "tide-bench: %s: %s: %s\n", flag, node->name,
                    data ? err.message : "out of memory");
            rc = -1;
        }
    }
    return rc;
}

static void free_variables(struct tide_graph *g, struct tide_tensor *arrays, size_t n)
{
    for (size_t i = 0; arrays && i < n; i++)
        free((void *)arrays[i].data);
    free(arrays);
    tide_graph_free(g);
}

/* Writes the Variables (read_variables) as NumPy .npz at path. 0, or -1 having said why. */
static int save_npz(struct tide_session *s, const uint8_t *bytes, size_t len, const char *path)
{
    struct tide_graph *g;
    struct tide_tensor *arrays;
    size_t n;
    int rc = read_variables(s, bytes, len, "--save-npz", &g, &arrays, &n);
    char text[1024];
    if (rc == 0 && tide_npz_write(path, arrays, n, text, sizeof(text)) != 0) {
        fprintf(stderr, "tide-bench: --save-npz: %s\n", text);
        rc = -1;
    }
    if (rc == 0)
        fprintf(stderr, "tide-bench: %zu variables written to %s\n", n, path);
    free_variables(g, arrays, n);
    return rc;
}

static uint8_t *build_model(const struct bench_options *o, const tide_dataset *ds, size_t *len)
{
    return tide_bench_build_model(o, tide_dataset_channels(ds), tide_dataset_height(ds),
                                  tide_dataset_width(ds), tide_dataset_classes(ds), len);
}

static int64_t argmax(const float *row, int32_t n)
{
    int64_t best = 0;
    for (int32_t i = 1; i < n; i++) {
        if (row[i] > row[best])
            best = i;
    }
    return best;
}

/* What a training step feeds and fetches: tide's models' names, or an ONNX model's. */
struct feed_names {
    const char *images, *labels, *logits, *loss;
};

static const struct feed_names model_names = {TIDE_MODEL_IMAGES, TIDE_MODEL_LABELS,
                                              TIDE_MODEL_LOGITS, TIDE_MODEL_LOSS};

/*
 * The next batch of it into images and labels: int32 class labels, or float
 * targets (targets: an ONNX model's --loss mse, or none with a float labels
 * input) in the same 4-byte slots.
 */
static int64_t next_batch(tide_dataset_iter *it, bool targets, float *images, int32_t *labels)
{
    if (targets)
        return tide_dataset_iter_next_targets(it, images, (float *)(void *)labels);
    return tide_dataset_iter_next(it, images, labels);
}

/*
 * What a step feeds besides the labels: the images, or with --onnx and
 * --data one buffer per model input (a BERT's ids and mask), filled from
 * one permutation by tide_dataset_iter_next_inputs.
 */
struct batch_feeds {
    bool per_input; /* --onnx --data: data[k] for input k */
    int32_t n;
    const char *names[TIDE_DATASET_MAX_INPUTS];
    void *data[TIDE_DATASET_MAX_INPUTS];
    uint64_t bytes[TIDE_DATASET_MAX_INPUTS];
};

/* The next batch into f's buffers and labels (targets: as next_batch). */
static int64_t next_feeds(tide_dataset_iter *it, bool targets, const struct batch_feeds *f,
                          int32_t *labels)
{
    if (f->per_input)
        return tide_dataset_iter_next_inputs(it, f->data, labels);
    return next_batch(it, targets, f->data[0], labels);
}

/* Feeds every buffer of f by its placeholder's name. */
static enum tide_status feed_inputs(struct tide_session *s, const struct batch_feeds *f,
                                    struct tide_error *err)
{
    for (int32_t k = 0; k < f->n; k++) {
        enum tide_status st = tide_session_feed(s, f->names[k], f->data[k], f->bytes[k], err);
        if (st != TIDE_OK)
            return st;
    }
    return TIDE_OK;
}

/* Accuracy over the whole test split with the session's current variables. */
static int evaluate(struct tide_session *s, const struct bench_options *o,
                    const struct feed_names *names, tide_dataset *test,
                    const struct batch_feeds *feeds, int32_t *labels, float *logits,
                    int32_t classes, int64_t positions, double *accuracy)
{
    char err_text[512];
    tide_dataset_iter *it;
    if (tide_dataset_iter_new(test, o->batch, 0, TIDE_DATASET_KEEP_LAST, &it, err_text,
                              sizeof(err_text)) != 0) {
        fprintf(stderr, "tide-bench: %s\n", err_text);
        return -1;
    }
    /* A row of logits per label: per example, or per position of a language model's. */
    int64_t rows = o->batch * positions, correct = 0, seen = 0, real;
    struct tide_error err = {0};
    while ((real = next_feeds(it, false, feeds, labels)) > 0) {
        struct tide_step_stats stats;
        if (feed_inputs(s, feeds, &err) != TIDE_OK ||
            tide_session_feed(s, names->labels, labels, (uint64_t)rows * 4, &err) != TIDE_OK ||
            tide_session_eval(s, &stats, &err) != TIDE_OK ||
            tide_session_fetch(s, names->logits, logits, (uint64_t)rows * (uint64_t)classes * 4,
                               &err) != TIDE_OK) {
            fprintf(stderr, "tide-bench: evaluation: %s\n", err.message);
            tide_dataset_iter_free(it);
            return -1;
        }
        for (int64_t i = 0; i < real * positions; i++)
            correct += argmax(logits + i * classes, classes) == labels[i];
        seen += real * positions;
        if (tide_dataset_iter_epoch(it) > 0)
            break;
    }
    tide_dataset_iter_free(it);
    *accuracy = seen ? (double)correct / (double)seen : 0;
    return 0;
}

int tide_bench_train_options(const char *optimizer, double lr, struct tide_train_options *out)
{
    static const float default_lr[] = {[TIDE_OPTIMIZER_SGD] = 0.05f,
                                       [TIDE_OPTIMIZER_MOMENTUM] = 0.02f,
                                       [TIDE_OPTIMIZER_ADAM] = 0.001f};
    memset(out, 0, sizeof(*out));
    out->loss = TIDE_MODEL_LOSS;
    if (strcmp(optimizer, "sgd") == 0) {
        out->optimizer = TIDE_OPTIMIZER_SGD;
    } else if (strcmp(optimizer, "momentum") == 0) {
        out->optimizer = TIDE_OPTIMIZER_MOMENTUM;
        out->momentum = 0.9f;
    } else if (strcmp(optimizer, "adam") == 0) {
        out->optimizer = TIDE_OPTIMIZER_ADAM;
    } else {
        fprintf(stderr, "tide-bench: --optimizer must be sgd, momentum or adam, got \"%s\"\n",
                optimizer);
        return -1;
    }
    out->learning_rate = lr > 0 ? (float)lr : default_lr[out->optimizer];
    return 0;
}

struct tide_memory_policy tide_bench_memory_policy(const struct bench_options *o)
{
    struct tide_memory_policy p = tide_memory_policy_default();
    p.budget_bytes = o->budget;
    p.profile = o->has_profile ? &o->profile : NULL;
    p.host_budget_bytes = o->host_budget;
    if (o->partition_size)
        p.partition_size = o->partition_size;
    if (o->swap && strcmp(o->swap, "on") == 0)
        p.swap = TIDE_SWAP_ON;
    else if (o->swap && strcmp(o->swap, "off") == 0)
        p.swap = TIDE_SWAP_OFF;
    if (o->swap_threshold >= 0)
        p.swap_threshold = (uint32_t)o->swap_threshold;
    if (o->prefetch >= 0)
        p.prefetch_distance = (uint32_t)o->prefetch;
    if (o->policy && strcmp(o->policy, "swap") == 0)
        p.recompute = TIDE_RECOMPUTE_OFF;
    else if (o->policy && strcmp(o->policy, "recompute") == 0)
        p.recompute = TIDE_RECOMPUTE_AUTO;
    else if (o->policy && strcmp(o->policy, "checkpoint-sqrt") == 0)
        p.recompute = TIDE_RECOMPUTE_CHECKPOINT_SQRT;
    /* An explicit threshold or prefetch means: use these, do not search. */
    if (o->swap_threshold >= 0 || o->prefetch >= 0)
        p.autotune = false;
    return p;
}

enum tide_status tide_bench_plan_fetching(const char *const *fetches, uint32_t n_fetches,
                                          const uint8_t *bytes, size_t len,
                                          const struct tide_train_options *train,
                                          const struct tide_memory_policy *policy,
                                          enum tide_math math, struct tide_backend *backend,
                                          struct tide_session **session, struct tide_error *err)
{
    struct tide_session_options so = tide_session_options_default();
    so.backend = backend;
    so.memory = policy;
    so.train = train;
    so.math = math;
    so.fetches = fetches;
    so.n_fetches = n_fetches;
    return tide_session_plan(bytes, len, &so, session, err);
}

enum tide_status tide_bench_plan(const char *model, const uint8_t *bytes, size_t len,
                                 const struct tide_train_options *train,
                                 const struct tide_memory_policy *policy, enum tide_math math,
                                 struct tide_backend *backend, struct tide_session **session,
                                 struct tide_error *err)
{
    /*
     * The fetches of `train` (and of tidectl's jobs): the fetched logits (a
     * language model's per-token losses) are pinned on the device, so a plan
     * without them would name a smallest budget short of what training at
     * it needs.
     */
    uint32_t n_fetches;
    const char *const *fetches = tide_bench_fetches(model, &n_fetches);
    return tide_bench_plan_fetching(fetches, n_fetches, bytes, len, train, policy, math, backend,
                                    session, err);
}

/* Prints the plan report, and its JSON line under --json; 0, or 1 when that line failed. */
static int print_plan(const struct bench_options *o, const struct tide_plan_report *r,
                      const struct tide_graph *g)
{
    const char *floor_node =
        g && r->floor_node < g->n_nodes ? g->nodes[r->floor_node].name : "";
    const double mib = 1 << 20;
    printf("%-9s %7s %12s %12s %12s %12s\n", "partition", "nodes", "resident MiB", "swap-in MiB",
           "swap-out MiB", "fetch MiB");
    for (uint32_t p = 0; p < r->n_partitions; p++) {
        const struct tide_partition_report *q = &r->partitions[p];
        /* Long plans: the first and last few partitions and every tenth. */
        if (r->n_partitions > 40 && p >= 5 && p + 5 < r->n_partitions && p % 10)
            continue;
        printf("%-9u %7u %12.2f %12.2f %12.2f %12.2f\n", p, q->nodes,
               (double)q->resident_bytes / mib, (double)q->swap_in_bytes / mib,
               (double)q->swap_out_bytes / mib, (double)q->fetch_bytes / mib);
    }
    printf("%u nodes in %u partitions of %u; swap %s, threshold %u, prefetch %u, vars on %s "
           "(%u plans tried, %.0f ms, %.0f ms of CPU)\n",
           r->nodes, r->n_partitions, r->chosen.partition_size,
           r->chosen.swap == TIDE_SWAP_OFF ? "off" : r->chosen.swap == TIDE_SWAP_ON ? "on" : "auto",
           r->chosen.swap_threshold, r->chosen.prefetch_distance,
           r->chosen.vars_home == TIDE_VARS_HOME_HOST ? "host" : "device", r->trials, r->plan_ms,
           r->plan_cpu_ms);
    printf("per step: swap-in %.1f MiB, swap-out %.1f MiB, fetch %.1f MiB, write-back %.1f MiB; "
           "host %.1f MiB\n",
           (double)r->swap_in_bytes / mib, (double)r->swap_out_bytes / mib,
           (double)r->fetch_bytes / mib, (double)r->write_back_bytes / mib,
           (double)r->host_bytes / mib);
    printf("recomputed per step: %.1f MiB, %.3f ms estimated (policy %s)\n",
           (double)r->recompute_bytes / mib, r->recompute_ms, o->policy ? o->policy : "device");
    printf("predicted peak %.2f MiB of a %.2f MiB budget: %s\n",
           (double)r->predicted_peak_bytes / mib, (double)r->budget_bytes / mib,
           r->fits ? "fits" : "does NOT fit");
    if (!r->fits)
        printf("smallest budget that fits: %.2f MiB (%s)\n", (double)r->min_budget_bytes / mib,
               r->message);
    printf("floor %.2f MiB: the working set of \"%s\" alone\n", (double)r->floor_bytes / mib,
           floor_node);
    if (r->fits)
        printf("predicted step %.2f ms on %s (compute waits %.2f ms for copies); host %.1f MiB "
               "of a %.1f MiB host budget\n",
               r->predicted_step_ms, r->profile, r->predicted_stall_ms,
               (double)r->host_arena_bytes / mib, (double)r->host_budget_bytes / mib);
    if (!o->json)
        return 0;
    struct json_object *line = tide_bench_json_object();
    tide_bench_json_set_string(line, "model", o->model);
    tide_bench_json_set_string(line, "math", tide_math_name(o->math));
    tide_bench_json_set_int(line, "batch", o->batch);
    tide_bench_json_set_bool(line, "fits", r->fits);
    tide_bench_json_set_uint(line, "predicted_peak_bytes", r->predicted_peak_bytes);
    tide_bench_json_set_uint(line, "budget_bytes", r->budget_bytes);
    tide_bench_json_set_uint(line, "swap_out_bytes", r->swap_out_bytes);
    tide_bench_json_set_uint(line, "swap_in_bytes", r->swap_in_bytes);
    tide_bench_json_set_uint(line, "fetch_bytes", r->fetch_bytes);
    tide_bench_json_set_uint(line, "write_back_bytes", r->write_back_bytes);
    tide_bench_json_set_uint(line, "partitions", r->n_partitions);
    tide_bench_json_set_uint(line, "partition_size", r->chosen.partition_size);
    tide_bench_json_set_uint(line, "nodes", r->nodes);
    tide_bench_json_set_uint(line, "min_budget_bytes", r->min_budget_bytes);
    tide_bench_json_set_uint(line, "floor_bytes", r->floor_bytes);
    tide_bench_json_set_string(line, "floor_node", floor_node);
    tide_bench_json_set_uint(line, "host_bytes", r->host_bytes);
    tide_bench_json_set_uint(line, "host_arena_bytes", r->host_arena_bytes);
    tide_bench_json_set_uint(line, "host_budget_bytes", r->host_budget_bytes);
    tide_bench_json_set_string(line, "device_profile", r->profile);
    tide_bench_json_set_fixed(line, "predicted_step_ms", r->predicted_step_ms, 3);
    tide_bench_json_set_fixed(line, "predicted_stall_ms", r->predicted_stall_ms, 3);
    tide_bench_json_set_uint(line, "swap_threshold", r->chosen.swap_threshold);
    tide_bench_json_set_uint(line, "prefetch_distance", r->chosen.prefetch_distance);
    tide_bench_json_set_uint(line, "trials", r->trials);
    tide_bench_json_set_fixed(line, "plan_ms", r->plan_ms, 1);
    tide_bench_json_set_fixed(line, "plan_cpu_ms", r->plan_cpu_ms, 1);
    tide_bench_json_set_string(line, "policy", o->policy ? o->policy : "device");
    tide_bench_json_set_uint(line, "recompute_bytes", r->recompute_bytes);
    tide_bench_json_set_fixed(line, "recompute_ms", r->recompute_ms, 3);
    return tide_bench_json_print_line(line);
}

/*
 * --svg and --png: the session's plan drawn as its memory timeline, with
 * the measured high water of each partition when measured is not NULL.
 * Returns 0, or 1 after saying why not.
 */
static int draw_plan(const struct bench_options *o, const struct tide_session *s,
                     uint64_t budget, const uint64_t *measured, uint32_t n_measured,
                     uint64_t step)
{
    if (!o->svg && !o->png)
        return 0;
    const struct tide_memplan *plan = tide_session_memplan(s);
    if (!plan) {
        fprintf(stderr, "tide-bench: %s: the plan does not fit, so there is no memory timeline "
                        "to draw\n", o->svg ? o->svg : o->png);
        return 1;
    }
    struct tide_memory_timeline t;
    struct tide_error err = {0};
    enum tide_status st = tide_memory_timeline_build(tide_session_graph(s), plan, budget, 0, &t,
                                                     &err);
    char title[160];
    if (strcmp(o->model, "resnet") == 0)
        snprintf(title, sizeof(title), "ResNet-%d (width %" PRId64 "), batch %" PRId64
                 ": device memory over one training step", o->depth, o->width, o->batch);
    else
        snprintf(title, sizeof(title), "%s, batch %" PRId64
                 ": device memory over one training step", o->model, o->batch);
    struct tide_picture_options po = {.title = title, .measured_bytes = measured,
                                      .n_measured = n_measured, .measured_step = step};
    if (st == TIDE_OK && o->svg)
        st = tide_picture_svg_file(&t, &po, o->svg, &err);
    if (st == TIDE_OK && o->png)
        st = tide_picture_png_file(&t, &po, o->png, &err);
    tide_memory_timeline_clear(&t);
    tide_picture_shutdown(); /* the last picture tide-bench draws */
    if (st != TIDE_OK) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        return 1;
    }
    if (o->svg)
        fprintf(stderr, "tide-bench: wrote %s\n", o->svg);
    if (o->png)
        fprintf(stderr, "tide-bench: wrote %s\n", o->png);
    return 0;
}

/* ============================================================================
 * ONNX models (--onnx, --save, and eval)
 * ========================================================================== */

/* The whole of a file, malloc'd; NULL after saying why. */
static uint8_t *read_whole_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *bytes = NULL;
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (bytes = malloc(size ? (size_t)size : 1)) &&
        fread(bytes, 1, (size_t)size, f) == (size_t)size) {
        fclose(f);
        *len = (size_t)size;
        return bytes;
    }
    fprintf(stderr, "tide-bench: %s: %s\n", path, f ? "cannot read it" : strerror(errno));
    free(bytes);
    if (f)
        fclose(f);
    return NULL;
}

/* An imported ONNX model with its loss, and the file it came from. */
struct onnx_model {
    uint8_t *file;
    size_t file_len;
    char *frozen_copy;
    const char **frozen;
    size_t n_frozen;
    char *dims_copy;
    struct tide_onnx_dim *dims; /* --dim */
    size_t n_dims;
    struct tide_onnx_training t;
};

static void onnx_model_clear(struct onnx_model *m)
{
    free(m->file);
    free(m->frozen_copy);
    free(m->frozen);
    free(m->dims_copy);
    free(m->dims);
    tide_onnx_training_free(&m->t);
    memset(m, 0, sizeof(*m));
}

/*
 * Reads --onnx and adds the loss (tide_onnx_training_graph): the model at
 * its own input shapes. Returns 0, or -1 after saying why.
 */
static int onnx_model_read(const struct bench_options *o, struct onnx_model *m)
{
    memset(m, 0, sizeof(*m));
    m->file = read_whole_file(o->onnx, &m->file_len);
    if (!m->file)
        return -1;
    char err[1024];
    if (tide_onnx_split_names(o->frozen, &m->frozen_copy, &m->frozen, &m->n_frozen) != 0) {
        fprintf(stderr, "tide-bench: out of memory\n");
        return -1;
    }
    if (tide_onnx_parse_dims(o->dims, &m->dims_copy, &m->dims, &m->n_dims, err, sizeof(err)) != 0) {
        fprintf(stderr, "tide-bench: --dim: %s\n", err);
        return -1;
    }
    struct tide_onnx_training_options to = {.batch_size = o->batch,
                                            .dims = m->dims,
                                            .n_dims = m->n_dims,
                                            .output = o->output,
                                            .frozen = m->frozen,
                                            .n_frozen = m->n_frozen};
    if (o->loss)
        tide_onnx_loss_parse(o->loss, &to.loss);
    if (tide_onnx_training_graph(m->file, m->file_len, &to, &m->t, err, sizeof(err)) != 0) {
        fprintf(stderr, "tide-bench: %s: %s\n", o->onnx, err);
        return -1;
    }
    return 0;
}

int tide_bench_onnx_training(const struct bench_options *o, int64_t batch,
                             struct tide_onnx_training *t)
{
    struct bench_options at = *o;
    at.batch = batch;
    struct onnx_model m;
    int rc = onnx_model_read(&at, &m);
    *t = m.t;
    memset(&m.t, 0, sizeof(m.t));
    onnx_model_clear(&m);
    if (rc != 0)
        tide_onnx_training_free(t);
    return rc;
}

/*
 * The model onnx_model_read read, as what runs: its graph's bytes, taken
 * from m, and o with the model's batch and its file as the model's name in
 * reports, in *with; returns with. Notes BatchNormalization nodes in
 * inference mode (an eval-mode export) on stderr.
 */
static const struct bench_options *onnx_adopt(const struct bench_options *o,
                                              struct onnx_model *m, struct bench_options *with,
                                              uint8_t **bytes, size_t *len)
{
    char note[512];
    if (*tide_onnx_training_note(&m->t, note, sizeof(note)))
        fprintf(stderr, "tide-bench: note: %s: %s\n", o->onnx, note);
    *bytes = m->t.graph, *len = m->t.graph_len;
    m->t.graph = NULL;
    *with = *o;
    with->batch = m->t.batch;
    with->model = o->onnx;
    return with;
}

/*
 * Checks that the dataset ds feeds the model onnx_model_read read
 * (tide_onnx_training_check_feeds). The model's batch is its static one;
 * --batch stands for a dynamic one and must agree with a static one.
 * Returns 0, or -1 after saying why.
 */
static int onnx_model_check(const struct bench_options *o, const tide_dataset *ds,
                            const char *const *sources, struct onnx_model *m)
{
    char err[1024];
    /* Class labels, or the float targets (--loss mse, none) of --labels, of any shape. */
    int64_t label_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    int32_t label_rank = tide_dataset_label_shape(ds, label_dims);
    /* --data's files: one per input, each of its own kind and shape. */
    int32_t n = tide_dataset_inputs(ds);
    enum tide_data_type dtypes[TIDE_DATASET_MAX_INPUTS];
    int64_t elements[TIDE_DATASET_MAX_INPUTS];
    for (int32_t k = 0; k < n; k++) {
        int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
        int32_t rank = tide_dataset_input_shape(ds, k, dims);
        dtypes[k] = tide_dataset_input_dtype(ds, k);
        elements[k] = 1;
        for (int32_t d = 0; d < rank; d++)
            elements[k] *= dims[d];
    }
    if (tide_onnx_training_check_feeds(&m->t, o->batch_given ? o->batch : 0, n, dtypes, elements,
                                       sources, tide_dataset_label_dtype(ds), label_dims,
                                       label_rank, tide_dataset_classes(ds), err,
                                       sizeof(err)) != 0) {
        fprintf(stderr, "tide-bench: %s: %s\n", o->onnx, err);
        return -1;
    }
    return 0;
}

/*
 * --save: the --onnx file with the session's trained Variables (those of
 * the training graph graph: read_variables) as its initializers. 0, or -1
 * having said why.
 */
static int save_onnx(struct tide_session *s, const uint8_t *graph, size_t graph_len,
                     const struct onnx_model *m, const char *path)
{
    struct tide_graph *g;
    struct tide_tensor *values;
    size_t n;
    int rc = read_variables(s, graph, graph_len, "--save", &g, &values, &n);
    uint8_t *bytes = NULL;
    size_t len = 0, replaced = 0;
    char text[1024];
    if (rc == 0 && tide_onnx_with_values(m->file, m->file_len, m->frozen, m->n_frozen, values, n,
                                         &bytes, &len, &replaced, text, sizeof(text)) != 0) {
        fprintf(stderr, "tide-bench: --save: %s\n", text);
        rc = -1;
    }
    if (rc == 0) {
        /* Written beside the file and renamed over it, so a failure leaves no half file. */
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        bool ok = f && fwrite(bytes, 1, len, f) == len;
        if (f && fclose(f) != 0)
            ok = false;
        if (!ok || rename(tmp, path) != 0) {
            fprintf(stderr, "tide-bench: --save: %s: %s\n", path, strerror(errno));
            remove(tmp);
            rc = -1;
        } else {
            fprintf(stderr, "tide-bench: %zu trained initializers written into %s\n", replaced,
                    path);
        }
    }
    free(bytes);
    free_variables(g, values, n);
    return rc;
}

static int cmd_plan(const struct bench_options *o)
{
    if (!o->budget) {
        fprintf(stderr, "tide-bench plan: --budget BYTES is required (e.g. --budget 64M)\n");
        return 2;
    }
    size_t len;
    uint8_t *bytes;
    struct onnx_model onnx = {0};
    struct bench_options with_onnx;
    if (o->onnx) {
        /* The model's own inputs and batch: no dataset's examples to check them against. */
        if (onnx_model_read(o, &onnx) != 0) {
            onnx_model_clear(&onnx);
            return 1;
        }
        o = onnx_adopt(o, &onnx, &with_onnx, &bytes, &len);
    } else {
        int64_t c, h, w;
        tide_bench_input_shape(o, &c, &h, &w);
        bytes = tide_bench_build_model(o, c, h, w, 10, &len);
        if (!bytes)
            return 1;
    }
    struct tide_train_options train;
    struct tide_memory_policy policy = tide_bench_memory_policy(o);
    struct tide_backend *backend = NULL;
    struct tide_session *session = NULL;
    struct tide_error err = {0};
    int rc = 1;
    if (tide_bench_train_options(o->optimizer, o->lr, &train) != 0)
        goto out;
    if (o->onnx)
        train.loss = onnx.t.loss;
    /* The pool's size sets the convolutions' workspace, so it is part of the plan. */
    if (tide_backend_create(o->backend, &(struct tide_backend_options){.threads = o->threads},
                            &backend, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        goto out;
    }
    const char *const onnx_fetches[] = {onnx.t.output.name};
    enum tide_status st = o->onnx
                              ? tide_bench_plan_fetching(onnx_fetches, 1, bytes, len, &train,
                                                         &policy, o->math, backend, &session, &err)
                              : tide_bench_plan(o->model, bytes, len, &train, &policy, o->math,
                                                backend, &session, &err);
    if (st != TIDE_OK && st != TIDE_DOES_NOT_FIT) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        goto out;
    }
    int printed = print_plan(o, tide_session_plan_report(session), tide_session_graph(session));
    if (st == TIDE_DOES_NOT_FIT)
        fprintf(stderr, "tide-bench: %s\n", err.message);
    rc = st == TIDE_OK && printed == 0 ? 0 : 1;
    if (draw_plan(o, session, policy.budget_bytes, NULL, 0, 0) != 0)
        rc = 1;
out:
    tide_session_free(session); /* before the backend it borrows */
    tide_backend_free(backend);
    free(bytes);
    onnx_model_clear(&onnx);
    return rc;
}

static int cmd_train(const struct bench_options *o)
{
    if (tide_bench_is_lm(o->model))
        return tide_bench_train_lm(o);
    tide_dataset *train = NULL, *test = NULL;
    if (strcmp(o->model, "lstm") == 0 && o->seq_len != 28 &&
        strcmp(o->dataset, "fashion-mnist") == 0) {
        fprintf(stderr, "tide-bench: --seq-len %" PRId64 " needs --dataset synthetic: "
                "Fashion-MNIST's images have 28 rows, so its sequences are 28 steps\n",
                o->seq_len);
        return 2;
    }
    int64_t files_c = 0, files_h = 0, files_w = 0;
    char *paths_copy = NULL; /* --onnx --data A,B: the files, one per model input */
    const char **paths = NULL;
    size_t n_paths = 0;
    /* The model first: synthetic data takes its input's shape. */
    struct onnx_model onnx = {0};
    if (o->onnx && onnx_model_read(o, &onnx) != 0) {
        onnx_model_clear(&onnx);
        return 1;
    }
    const struct tide_onnx_training *shape_of = o->onnx ? &onnx.t : NULL;
    if (o->data) {
        int files_rc = open_files(o, &train, &test, &files_c, &files_h, &files_w, &paths_copy,
                                  &paths, &n_paths);
        if (files_rc != 0) {
            free(paths_copy);
            free(paths);
            onnx_model_clear(&onnx);
            return files_rc;
        }
    } else {
        if (open_split(o, shape_of, "train", &train) != 0 ||
            open_split(o, shape_of, "test", &test) != 0) {
            tide_dataset_free(train);
            onnx_model_clear(&onnx);
            return 1;
        }
    }
    const char *data_name = o->data ? o->data : o->dataset;
    struct bench_options with_onnx;
    struct feed_names names = model_names;
    int rc = 1;
    struct tide_session *s = NULL;
    tide_dataset_iter *it = NULL;
    float *images = NULL, *logits = NULL;
    int32_t *labels = NULL;
    /* The last step's high water per partition, for the picture's measured overlay. */
    uint64_t *measured = NULL, measured_step = 0;
    uint32_t n_measured = 0;
    struct tide_bench_trace_ab *ab = NULL; /* --trace-overhead */
    struct batch_feeds feeds = {.n = 1};
    size_t len = 0;
    uint8_t *bytes = NULL;
    if (o->onnx) {
        /* The model's batch and names from here on. */
        if (onnx_model_check(o, train, paths, &onnx) != 0)
            goto out;
        o = onnx_adopt(o, &onnx, &with_onnx, &bytes, &len);
        names = (struct feed_names){onnx.t.input.name, onnx.t.labels.name, onnx.t.output.name,
                                    onnx.t.loss};
    } else {
        bytes = o->data ? tide_bench_build_model(o, files_c, files_h, files_w,
                                                 tide_dataset_classes(train), &len)
                        : build_model(o, train, &len);
    }
    if (!bytes)
        goto out;

    struct tide_train_options train_opts;
    if (tide_bench_train_options(o->optimizer, o->lr, &train_opts) != 0)
        goto out;
    train_opts.loss = names.loss;
    struct tide_memory_policy policy = tide_bench_memory_policy(o);

    const char *fetches[] = {names.logits};
    struct tide_session_options so = tide_session_options_default();
    so.backend_name = o->backend;
    so.threads = o->threads;
    so.budget_bytes = o->budget;
    so.seed = o->seed;
    so.math = o->math;
    so.poison = o->poison;
    so.train = &train_opts;
    /* A budget or a swap policy plans memory; otherwise everything is resident. */
    if (o->budget || o->swap)
        so.memory = &policy;
    so.fetches = fetches;
    so.n_fetches = 1;
    struct tide_error err = {0};
    double t0 = tide_bench_now_ms();
    if (tide_session_new(bytes, len, &so, &s, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        goto out;
    }
    double compile_ms = tide_bench_now_ms() - t0;
    const struct tide_memplan *plan = tide_session_memplan(s);
    const struct tide_graph *graph = tide_session_graph(s);

    int64_t per_example = tide_dataset_channels(train) * tide_dataset_height(train) *
                          tide_dataset_width(train);
    /* An ONNX model's classes are its output's last dimension (the labels may use fewer). */
    int32_t classes = o->onnx && onnx.t.classes > 0 ? (int32_t)onnx.t.classes
                                                     : tide_dataset_classes(train);
    /* An ONNX model's labels are its loss's: [B] class indices, [B, S] a language model's (one
     * per position), [B, ...] targets, its own input. */
    int64_t label_slots = o->onnx ? onnx.t.labels.elements : o->batch;
    int64_t positions = label_slots / o->batch > 0 ? label_slots / o->batch : 1;
    bool targets = o->onnx && onnx.t.labels.dtype == TIDE_DT_FLOAT32;
    images = malloc((size_t)(o->batch * per_example) * sizeof(float));
    labels = malloc((size_t)(label_slots > 0 ? label_slots : 1) * sizeof(int32_t));
    logits = malloc((size_t)(o->batch * positions * (classes > 0 ? classes : 1)) * sizeof(float));
    if (!images || !labels || !logits) {
        fprintf(stderr, "tide-bench: out of memory for batch buffers\n");
        goto out;
    }
    uint64_t image_bytes = (uint64_t)(o->batch * per_example) * sizeof(float);
    feeds.names[0] = names.images, feeds.data[0] = images, feeds.bytes[0] = image_bytes;
    if (o->onnx && o->data) {
        /* One buffer per model input, each fed by its placeholder's name; int32 ones too. */
        feeds.per_input = true;
        feeds.n = onnx.t.n_inputs;
        for (int32_t k = 1; k < feeds.n; k++) {
            feeds.names[k] = onnx.t.inputs[k].name;
            feeds.bytes[k] = (uint64_t)onnx.t.inputs[k].elements * 4;
            feeds.data[k] = malloc((size_t)feeds.bytes[k]);
            if (!feeds.data[k]) {
                fprintf(stderr, "tide-bench: out of memory for batch buffers\n");
                goto out;
            }
        }
    }
    char err_text[512];
    if (tide_dataset_iter_new(train, o->batch, o->seed, TIDE_DATASET_SHUFFLE, &it, err_text,
                              sizeof(err_text)) != 0) {
        fprintf(stderr, "tide-bench: %s\n", err_text);
        goto out;
    }
    int64_t per_epoch = tide_dataset_count(train) / o->batch;
    int64_t steps = o->epochs ? o->epochs * per_epoch : o->steps;
    fprintf(stderr,
            "tide-bench: %s on %s, batch %" PRId64 ", %" PRId64 " steps (%.2f epochs), %u nodes, "
            "predicted peak %.1f MiB, compiled in %.0f ms\n",
            o->model, data_name, o->batch, steps, (double)steps / (double)per_epoch,
            graph->n_nodes, (double)plan->peak_bytes / (1 << 20), compile_ms);

    if (o->trace_overhead) {
        if (o->trace || steps % (4 * o->trace_overhead) != 0) {
            fprintf(stderr, "tide-bench: --trace-overhead %" PRId64 " wants --steps a multiple of "
                    "%" PRId64 " (got %" PRId64 ") and no --trace\n", o->trace_overhead,
                    4 * o->trace_overhead, steps);
            goto out;
        }
        ab = tide_bench_trace_ab_new(o->trace_overhead, steps);
        if (!ab) {
            fprintf(stderr, "tide-bench: out of memory\n");
            goto out;
        }
    }
    if (o->trace && tide_session_trace_start(s, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: --trace: %s\n", err.message);
        goto out;
    }
    double step_ms_sum = 0, loss_sum = 0, train_start = tide_bench_now_ms(),
           cpu_start = tide_bench_process_cpu_s();
    float loss = NAN;
    uint64_t high_water = 0;
    int64_t window = 0;
    for (int64_t step = 0; step < steps; step++) {
        if (next_feeds(it, targets, &feeds, labels) == 0)
            next_feeds(it, targets, &feeds, labels); /* the next epoch starts */
        struct tide_step_stats stats;
        if (feed_inputs(s, &feeds, &err) != TIDE_OK ||
            tide_session_feed(s, names.labels, labels, (uint64_t)label_slots * 4, &err) !=
                TIDE_OK ||
            (ab && tide_bench_trace_ab_before_step(ab, s, &err) != TIDE_OK) ||
            tide_session_step(s, &stats, &err) != TIDE_OK ||
            tide_session_fetch(s, names.loss, &loss, sizeof(loss), &err) != TIDE_OK) {
            fprintf(stderr, "\ntide-bench: step %" PRId64 ": %s\n", step + 1, err.message);
            goto out;
        }
        if (!isfinite(loss)) {
            fprintf(stderr, "\ntide-bench: step %" PRId64 ": loss is %f; lower --lr\n", step + 1,
                    (double)loss);
            goto out;
        }
        step_ms_sum += stats.step_ms;
        if (ab)
            tide_bench_trace_ab_after_step(ab, s, stats.step_ms);
        if (step + 1 == steps && (o->svg || o->png)) {
            measured = malloc((stats.n_partitions + 1) * sizeof(*measured));
            if (!measured) {
                fprintf(stderr, "\ntide-bench: out of memory for %u partitions\n",
                        stats.n_partitions);
                goto out;
            }
            memcpy(measured, stats.partition_high_water_bytes,
                   stats.n_partitions * sizeof(*measured));
            n_measured = stats.n_partitions;
            measured_step = stats.step;
        }
        if (stats.high_water_bytes > high_water)
            high_water = stats.high_water_bytes;
        loss_sum += loss;
        window++;
        if ((step + 1) % 50 == 0 || step + 1 == steps) {
            double elapsed = (tide_bench_now_ms() - train_start) / 1e3;
            double eta = elapsed / (double)(step + 1) * (double)(steps - step - 1);
            fprintf(stderr,
                    "\rstep %6" PRId64 "/%" PRId64 "  loss %.4f  %.1f ms/step  %.0f s elapsed, "
                    "%.0f s left   ",
                    step + 1, steps, loss_sum / (double)window, step_ms_sum / (double)(step + 1),
                    elapsed, eta);
            loss_sum = 0;
            window = 0;
        }
    }
    fprintf(stderr, "\n");
    double train_s = (tide_bench_now_ms() - train_start) / 1e3;
    /* What --threads bounds: at most that many cores busy over the training steps. */
    double train_cpu_s = tide_bench_process_cpu_s() - cpu_start;
    if (o->trace) {
        /* Only the training steps: the evaluation below is not traced. */
        tide_session_trace_stop(s);
        const struct tide_trace *trace = tide_session_trace(s);
        size_t slices, flows, counters;
        tide_trace_counts(trace, &slices, &flows, &counters);
        if (tide_trace_write_file(trace, o->trace, &err) != TIDE_OK) {
            fprintf(stderr, "tide-bench: --trace: %s\n", err.message);
            goto out;
        }
        fprintf(stderr,
                "tide-bench: trace of %u steps (%zu slices, %zu flows, %zu counter samples) "
                "written to %s\n",
                tide_trace_steps(trace, NULL), slices, flows, counters, o->trace);
    }
    struct tide_bench_trace_ab_figures ab_figures = {0};
    if (ab && tide_bench_trace_ab_result(ab, &ab_figures) == 0)
        fprintf(stderr,
                "tide-bench: trace overhead over %" PRId64 " pairs of %" PRId64 "-step blocks: "
                "median step %.2f ms off, %.2f ms on; median of on/off per pair %+.2f %%\n",
                ab_figures.pairs, o->trace_overhead, ab_figures.off_ms, ab_figures.on_ms,
                ab_figures.overhead_percent);
    double accuracy = NAN;
    double eval_start = tide_bench_now_ms();
    /* --data without --test-data: no test split; accuracy is of class labels only. */
    bool no_eval = o->no_eval || !test || (o->onnx && onnx.t.classes == 0);
    if (!no_eval &&
        evaluate(s, o, &names, test, &feeds, labels, logits, classes, positions, &accuracy) != 0)
        goto out;
    if (o->save_npz && save_npz(s, bytes, len, o->save_npz) != 0)
        goto out;
    if (o->save_onnx && save_onnx(s, bytes, len, &onnx, o->save_onnx) != 0)
        goto out;
    double eval_s = (tide_bench_now_ms() - eval_start) / 1e3;
    char device[128];
    uint64_t device_total;
    tide_backend_device_info(NULL, device, sizeof(device), &device_total);
    printf("model %s, dataset %s, batch %" PRId64 ", steps %" PRId64 "\n", o->model, data_name,
           o->batch, steps);
    if (no_eval)
        printf("loss %.4f, test split skipped (%s)\n", (double)loss,
               o->no_eval ? "--no-eval" : "no --test-data");
    else
        printf("loss %.4f, test accuracy %.4f\n", (double)loss, accuracy);
    printf("step %.2f ms mean, train %.1f s (cpu %.1f s), eval %.1f s\n",
           step_ms_sum / (double)steps, train_s, train_cpu_s, eval_s);
    printf("device high-water %" PRIu64 " bytes, predicted peak %" PRIu64 " bytes\n", high_water,
           plan->peak_bytes);
    rc = 0;
    if (o->json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_string(line, "model", o->model);
        tide_bench_json_set_string(line, "math", tide_math_name(o->math));
        tide_bench_json_set_string(line, "dataset", data_name);
        tide_bench_json_set_int(line, "batch", o->batch);
        tide_bench_json_set_int(line, "steps", steps);
        tide_bench_json_set_fixed(line, "loss", (double)loss, 6);
        if (!no_eval)
            tide_bench_json_set_fixed(line, "test_accuracy", accuracy, 6);
        if (o->data || o->onnx)
            tide_bench_json_set_int(line, "parameters", parameters(bytes, len));
        tide_bench_json_set_fixed(line, "step_ms_mean", step_ms_sum / (double)steps, 3);
        tide_bench_json_set_fixed(line, "train_seconds", train_s, 3);
        tide_bench_json_set_fixed(line, "train_cpu_seconds", train_cpu_s, 3);
        tide_bench_json_set_fixed(line, "compile_ms", compile_ms, 1);
        tide_bench_json_set_uint(line, "nodes", graph->n_nodes);
        tide_bench_json_set_uint(line, "device_high_water_bytes", high_water);
        tide_bench_json_set_uint(line, "predicted_peak_bytes", plan->peak_bytes);
        if (ab) {
            tide_bench_json_set_int(line, "trace_overhead_pairs", ab_figures.pairs);
            tide_bench_json_set_fixed(line, "trace_off_step_ms", ab_figures.off_ms, 3);
            tide_bench_json_set_fixed(line, "trace_on_step_ms", ab_figures.on_ms, 3);
            tide_bench_json_set_fixed(line, "trace_overhead_percent", ab_figures.overhead_percent, 2);
        }
        rc = tide_bench_json_print_line(line);
    }
    if (draw_plan(o, s, o->budget, measured, n_measured, measured_step) != 0)
        rc = 1;
out:
    tide_bench_trace_ab_free(ab);
    free(measured);
    tide_dataset_iter_free(it);
    tide_session_free(s);
    free(bytes);
    free(images);
    free(labels);
    free(logits);
    for (int32_t k = 1; k < feeds.n; k++)
        free(feeds.data[k]);
    free(paths_copy);
    free(paths);
    tide_dataset_free(train);
    tide_dataset_free(test);
    onnx_model_clear(&onnx);
    return rc;
}

/*
 * tide-bench eval --onnx FILE: the test split scored with the model's
 * weights as the file holds them, forward only, exactly as train scores it
 * after its last step (the same graph, session options and batches), so a
 * model written by train --save gives train's test accuracy to the digit.
 */
static int cmd_eval(const struct bench_options *o)
{
    if (!o->onnx) {
        fprintf(stderr, "tide-bench eval: --onnx FILE is required\n");
        return 2;
    }
    struct onnx_model onnx;
    if (onnx_model_read(o, &onnx) != 0) {
        onnx_model_clear(&onnx);
        return 1;
    }
    /* The test split of --dataset, or --test-data's files (one per model input). */
    tide_dataset *test = NULL;
    char *copy = NULL, err_text[1024];
    const char **paths = NULL;
    size_t n_paths = 0;
    if (o->test_data ? open_data(o, o->test_data, o->test_labels, NULL, &test, &copy, &paths,
                                 &n_paths, err_text, sizeof(err_text)) != 0
                     : open_split(o, &onnx.t, "test", &test) != 0) {
        if (o->test_data)
            fprintf(stderr, "tide-bench: %s\n", err_text);
        free(copy);
        free(paths);
        onnx_model_clear(&onnx);
        return 1;
    }
    struct tide_session *s = NULL;
    float *images = NULL, *logits = NULL;
    int32_t *labels = NULL;
    struct batch_feeds feeds = {.n = 1};
    int rc = 1;
    if (onnx_model_check(o, test, paths, &onnx) != 0)
        goto out;
    struct bench_options with_onnx = *o;
    with_onnx.batch = onnx.t.batch;
    o = &with_onnx;
    struct feed_names names = {onnx.t.input.name, onnx.t.labels.name, onnx.t.output.name,
                               onnx.t.loss};
    struct tide_train_options train_opts;
    if (tide_bench_train_options(o->optimizer, o->lr, &train_opts) != 0)
        goto out;
    train_opts.loss = names.loss;
    struct tide_memory_policy policy = tide_bench_memory_policy(o);
    struct tide_session_options so = tide_session_options_default();
    so.backend_name = o->backend;
    so.threads = o->threads;
    so.budget_bytes = o->budget;
    so.seed = o->seed;
    so.math = o->math;
    so.train = &train_opts;
    if (o->budget || o->swap)
        so.memory = &policy;
    so.fetches = &names.logits;
    so.n_fetches = 1;
    struct tide_error err = {0};
    if (tide_session_new(onnx.t.graph, onnx.t.graph_len, &so, &s, &err) != TIDE_OK) {
        fprintf(stderr, "tide-bench: %s\n", err.message);
        goto out;
    }
    images = malloc((size_t)onnx.t.input.elements * sizeof(float));
    labels = malloc((size_t)onnx.t.labels.elements * sizeof(int32_t));
    logits = malloc((size_t)onnx.t.output.elements * sizeof(float));
    if (!images || !labels || !logits) {
        fprintf(stderr, "tide-bench: out of memory for batch buffers\n");
        goto out;
    }
    feeds.names[0] = names.images, feeds.data[0] = images;
    feeds.bytes[0] = (uint64_t)onnx.t.input.elements * sizeof(float);
    if (o->test_data) {
        /* One buffer per model input, each fed by its placeholder's name; int32 ones too. */
        feeds.per_input = true;
        feeds.n = onnx.t.n_inputs;
        for (int32_t k = 1; k < feeds.n; k++) {
            feeds.names[k] = onnx.t.inputs[k].name;
            feeds.bytes[k] = (uint64_t)onnx.t.inputs[k].elements * 4;
            if (!(feeds.data[k] = malloc((size_t)feeds.bytes[k]))) {
                fprintf(stderr, "tide-bench: out of memory for batch buffers\n");
                goto out;
            }
        }
    }
    double accuracy, start = tide_bench_now_ms();
    int32_t classes = onnx.t.classes > 0 ? (int32_t)onnx.t.classes : tide_dataset_classes(test);
    int64_t positions = onnx.t.labels.elements / onnx.t.batch > 0
                            ? onnx.t.labels.elements / onnx.t.batch
                            : 1;
    if (evaluate(s, o, &names, test, &feeds, labels, logits, classes, positions, &accuracy) != 0)
        goto out;
    double eval_s = (tide_bench_now_ms() - start) / 1e3;
    const char *data_name = o->test_data ? o->test_data : o->dataset;
    printf("model %s, dataset %s, batch %" PRId64 ": test accuracy %.4f (%" PRId64
           " examples), eval %.1f s\n",
           o->onnx, data_name, o->batch, accuracy, tide_dataset_count(test), eval_s);
    rc = 0;
    if (o->json) {
        struct json_object *line = tide_bench_json_object();
        tide_bench_json_set_string(line, "model", o->onnx);
        tide_bench_json_set_string(line, "dataset", data_name);
        tide_bench_json_set_int(line, "batch", o->batch);
        tide_bench_json_set_int(line, "test_examples", tide_dataset_count(test));
        tide_bench_json_set_fixed(line, "test_accuracy", accuracy, 6);
        tide_bench_json_set_int(line, "parameters", onnx.t.parameters);
        tide_bench_json_set_fixed(line, "eval_seconds", eval_s, 3);
        rc = tide_bench_json_print_line(line);
    }
out:
    tide_session_free(s);
    free(images);
    free(labels);
    free(logits);
    for (int32_t k = 1; k < feeds.n; k++)
        free(feeds.data[k]);
    free(copy);
    free(paths);
    onnx_model_clear(&onnx);
    tide_dataset_free(test);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    struct bench_options o = {.model = "cnn", .depth = 38, .width = 16, .image_size = 32,
                              .batch = 64, .steps = 100, .dataset = "fashion-mnist", .seed = 1,
                              .backend = "cpu", .swap_threshold = -1,
                              .prefetch = -1, .dropout = -1};
    const char *cmd = argv[1];
    if (strcmp(cmd, "onnx-tests") == 0)
        return tide_bench_onnx_tests(argc - 1, argv + 1);
    if (strcmp(cmd, "cpu-ops") == 0)
        return tide_bench_cpu_ops(argc - 1, argv + 1);
    int (*run)(const struct bench_options *) = NULL;
    if (strcmp(cmd, "train") == 0) {
        run = cmd_train;
    } else if (strcmp(cmd, "eval") == 0) {
        run = cmd_eval;
        o.eval = true;
    } else if (strcmp(cmd, "plan") == 0) {
        run = cmd_plan;
    } else if (strcmp(cmd, "depth") == 0) {
        o.model = "resnet";
        o.batch = 16;
        o.budget = 256ull << 20;
        run = tide_bench_depth;
    } else if (strcmp(cmd, "max") == 0) {
        run = tide_bench_max;
    } else if (strcmp(cmd, "maxbatch") == 0) {
        run = tide_bench_maxbatch;
    } else if (strcmp(cmd, "timemodel") == 0) {
        o.steps = 10;
        run = tide_bench_timemodel;
    } else {
        fprintf(stderr, "tide-bench: unknown command \"%s\"; commands: train, plan, depth, "
                "eval, max, maxbatch, timemodel, onnx-tests, cpu-ops\n", cmd);
        return 2;
    }
    o.host_budget = tide_host_budget_default();
    if (parse_options(argc - 1, argv + 1, &o) != 0)
        return 2;
    if ((o.data || o.save_npz) && run != cmd_train) {
        fprintf(stderr, "tide-bench: %s applies to train only, not to %s\n",
                o.data ? "--data" : "--save-npz", cmd);
        return 2;
    }
    if (o.onnx && run != cmd_train && run != cmd_eval && run != cmd_plan && run != tide_bench_max &&
        run != tide_bench_maxbatch) {
        fprintf(stderr,
                "tide-bench: --onnx applies to train, eval, plan, max and maxbatch only, not to "
                "%s\n",
                cmd);
        return 2;
    }
    if (o.save_onnx && run != cmd_train) {
        fprintf(stderr, "tide-bench: --save applies to train only, not to %s\n", cmd);
        return 2;
    }
    if (o.loss && run == cmd_eval) {
        fprintf(stderr,
                "tide-bench: --loss applies to train, plan, max and maxbatch only, not "
                "to %s\n",
                cmd);
        return 2;
    }
    if (o.trace && run != cmd_train) {
        fprintf(stderr, "tide-bench: --trace applies to train only, not to %s\n", cmd);
        return 2;
    }
    if (o.confirm && run != tide_bench_max && run != tide_bench_maxbatch) {
        fprintf(stderr, "tide-bench: --confirm applies to max and maxbatch only, not to %s\n",
                cmd);
        return 2;
    }
    if (o.vary && run != tide_bench_max) {
        fprintf(stderr, "tide-bench: --vary applies to max only, not to %s\n", cmd);
        return 2;
    }
    return run(&o);
}
