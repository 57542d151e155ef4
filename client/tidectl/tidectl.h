/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/tidectl.h: what the commands of tidectl share.
 *
 * tidectl is the command line of tide, on libtide (tide/client.h). One
 * process, one command: it connects to tided (a Unix socket, or TCP with
 * TLS and a token), does what the command says and exits with
 *
 *   0  success
 *   1  the daemon refused or failed (the message carries the gRPC code name)
 *   2  a usage error (a bad flag, command or value)
 *   3  no daemon could be reached at the socket or address
 *
 * Output. Human-readable text on stdout (progress on stderr); with --json,
 * exactly one JSON object per line on stdout instead — one per result for
 * single answers, one per event or step for streams — and errors also as a
 * {"error": ...} line, so scripts can read stdout line by line.
 *
 * Layout (one file per command, the shared code in one place, as systemd
 * keeps systemctl):
 *
 *   main.c        the verb table, `--help` texts of tidectl itself, main()
 *   options.c     every long option, the one-pass parser, number and size parsing
 *   common.c      connecting, error reports, formatting, signals
 *   output.c      JSON lines (json-c) and the text tables more than one command prints
 *   model.c       the model, job spec and dataset that `plan` and `train` share
 *   <verb>.c      one command: its struct tidectl_verb (help text included) and run
 *
 * Options are parsed in one pass over the whole command line (global and
 * command options may come in any order); each command accepts the global
 * options and those its verb's accepts list names, and refuses the rest.
 *
 * Adding a command `frob`:
 *
 *   1. Write client/tidectl/frob.c: a run function and
 *      `const struct tidectl_verb tidectl_verb_frob = {...}` with its name,
 *      the options it accepts (a 0-terminated list of enum tidectl_option_id),
 *      its positional argument counts, synopsis, one-line summary and help
 *      text. Set connects to have main() connect to the daemon before run
 *      (and free the client after); leave it false to connect yourself, as
 *      `plan` and `train` do after building the model, or not at all.
 *   2. Declare tidectl_verb_frob below, and add &tidectl_verb_frob to the
 *      verb table in main.c where `tidectl --help` should list it.
 *   3. Add frob.c to tidectl's sources in client/CMakeLists.txt.
 *   4. A new option: a TIDECTL_OPT_* id below, a field in struct
 *      tidectl_options, a line in options.c's long option table and a case
 *      in tidectl_parse_options() (with its default in main() if not zero).
 *   5. Drive it from tests/test_daemon.c, which runs the real tidectl
 *      against the real daemon.
 *
 * Threads: one. Signals: SIGINT and SIGTERM raise tidectl_interrupts, which
 * `train` reads between steps (the first stops feeding and lets the steps in
 * flight finish; the second abandons the stream) and `top` between frames.
 */
#ifndef TIDE_CLIENT_TIDECTL_H
#define TIDE_CLIENT_TIDECTL_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/onnx.h"

/* Exit statuses, as the header comment above and `tidectl --help` list them. */
#define TIDECTL_EXIT_OK      0
#define TIDECTL_EXIT_RUNTIME 1
#define TIDECTL_EXIT_USAGE   2
#define TIDECTL_EXIT_CONNECT 3

#define TIDECTL_DEFAULT_SOCKET "/run/tide/tided.sock"
#define TIDECTL_VERSION        "0.1.0"

/* ============================================================================
 * Options
 * ========================================================================== */

/* Every long option of every command; each verb says which it accepts. */
enum tidectl_option_id {
    TIDECTL_OPT_HELP = 'h',
    TIDECTL_OPT_SOCKET = 256,
    TIDECTL_OPT_CONNECT,
    TIDECTL_OPT_TOKEN,
    TIDECTL_OPT_CA,
    TIDECTL_OPT_SERVER_NAME,
    TIDECTL_OPT_JSON,
    TIDECTL_OPT_TIMEOUT,
    TIDECTL_OPT_VERSION,
    /* model and job */
    TIDECTL_OPT_MODEL,
    TIDECTL_OPT_DEPTH,
    TIDECTL_OPT_WIDTH,
    TIDECTL_OPT_DATASET,
    TIDECTL_OPT_DATA_DIR,
    TIDECTL_OPT_BATCH,
    TIDECTL_OPT_BUDGET,
    TIDECTL_OPT_SWAP,
    TIDECTL_OPT_PARTITION_SIZE,
    TIDECTL_OPT_VARS_HOME,
    TIDECTL_OPT_POLICY,
    TIDECTL_OPT_OPTIMIZER,
    TIDECTL_OPT_LR,
    TIDECTL_OPT_SEED,
    TIDECTL_OPT_NAME,
    /* the language models (transformer, moe) */
    TIDECTL_OPT_D_MODEL,
    TIDECTL_OPT_HEADS,
    TIDECTL_OPT_VOCAB,
    TIDECTL_OPT_EXPERTS,
    TIDECTL_OPT_CAPACITY_FACTOR,
    TIDECTL_OPT_DROPOUT,
    /* train */
    TIDECTL_OPT_STEPS,
    TIDECTL_OPT_EPOCHS,
    TIDECTL_OPT_CHECKPOINT_EVERY,
    TIDECTL_OPT_RESUME,
    TIDECTL_OPT_NO_EVAL,
    TIDECTL_OPT_KEEP,
    TIDECTL_OPT_DEVICE,
    /* plan */
    TIDECTL_OPT_PARTITIONS,
    TIDECTL_OPT_SVG,
    TIDECTL_OPT_DEVICE_PROFILE,
    TIDECTL_OPT_MATH,
    /* jobs, watch, top */
    TIDECTL_OPT_ALL,
    TIDECTL_OPT_STRIDE,
    TIDECTL_OPT_ONCE,
    TIDECTL_OPT_INTERVAL,
    /* sequence models */
    TIDECTL_OPT_SEQ_LEN,
    TIDECTL_OPT_HIDDEN,
    TIDECTL_OPT_LAYERS,
    /* data from files, and weights out */
    TIDECTL_OPT_DATA,
    TIDECTL_OPT_LABELS,
    TIDECTL_OPT_TEST_DATA,
    TIDECTL_OPT_TEST_LABELS,
    TIDECTL_OPT_NPZ,
    /* ONNX models (plan, train: --onnx MODEL.onnx; export: --onnx OUT.onnx --from MODEL.onnx) */
    TIDECTL_OPT_ONNX,
    TIDECTL_OPT_LOSS,
    TIDECTL_OPT_FROZEN,
    TIDECTL_OPT_DIM,
    TIDECTL_OPT_FROM,
    /* train: the queue */
    TIDECTL_OPT_PRIORITY,
    /* trace (-o is its short spelling); plan and train with --onnx: the prediction output */
    TIDECTL_OPT_OUTPUT = 'o',
};

/* The options every model-building command (plan, train) accepts, for its accepts list. */
#define TIDECTL_MODEL_OPTIONS                                                                      \
    TIDECTL_OPT_MODEL, TIDECTL_OPT_DEPTH, TIDECTL_OPT_WIDTH, TIDECTL_OPT_DATASET,                  \
        TIDECTL_OPT_DATA_DIR, TIDECTL_OPT_BATCH, TIDECTL_OPT_BUDGET, TIDECTL_OPT_SWAP,             \
        TIDECTL_OPT_PARTITION_SIZE, TIDECTL_OPT_VARS_HOME, TIDECTL_OPT_POLICY,                     \
        TIDECTL_OPT_MATH, TIDECTL_OPT_OPTIMIZER, TIDECTL_OPT_LR,                                   \
        TIDECTL_OPT_SEED, TIDECTL_OPT_NAME, TIDECTL_OPT_SEQ_LEN, TIDECTL_OPT_HIDDEN,               \
        TIDECTL_OPT_LAYERS, TIDECTL_LM_OPTIONS, TIDECTL_DATA_FILE_OPTIONS, TIDECTL_ONNX_OPTIONS

/* The language models' sizes (transformer, moe; a block of their own in the model options). */
#define TIDECTL_LM_OPTIONS                                                                         \
    TIDECTL_OPT_D_MODEL, TIDECTL_OPT_HEADS, TIDECTL_OPT_VOCAB, TIDECTL_OPT_EXPERTS,                \
        TIDECTL_OPT_CAPACITY_FACTOR, TIDECTL_OPT_DROPOUT

/* Data from the user's files (a block of their own in the model options). */
#define TIDECTL_DATA_FILE_OPTIONS                                                                  \
    TIDECTL_OPT_DATA, TIDECTL_OPT_LABELS, TIDECTL_OPT_TEST_DATA, TIDECTL_OPT_TEST_LABELS

/* An ONNX model instead of --model (a block of its own in the model options). */
#define TIDECTL_ONNX_OPTIONS                                                                       \
    TIDECTL_OPT_ONNX, TIDECTL_OPT_OUTPUT, TIDECTL_OPT_LOSS, TIDECTL_OPT_FROZEN, TIDECTL_OPT_DIM

/* The help of TIDECTL_MODEL_OPTIONS, appended to a verb's help text. */
#define TIDECTL_MODEL_HELP                                                                         \
    "MODEL OPTIONS\n"                                                                              \
    "  --model mlp|cnn|resnet|lstm|transformer|moe\n"                                              \
    "                           The network (default cnn). mlp: dense layers of 256 and 128\n"     \
    "                           units; cnn: two 3x3 convolutions with pooling and a dense\n"       \
    "                           layer of 128 (206,922 parameters on 28x28 images); resnet:\n"      \
    "                           bottleneck ResNet of --depth layers and --width base width;\n"     \
    "                           lstm: --layers stacked LSTMs of --hidden units, unrolled over\n"   \
    "                           the image's rows (a row of 28 pixels per time step), and a\n"      \
    "                           dense layer on the last step; transformer: a decoder-only\n"       \
    "                           language model (pre-LayerNorm blocks of causal attention and\n"    \
    "                           a Gelu MLP); moe: the same with Mixture-of-Experts layers\n"       \
    "                           (top-2 routing) as its MLPs.\n"                                    \
    "  --depth D                ResNet layers, 3*(10+n)+2 for n >= 1: 35, 38 (default), 41, ...\n" \
    "                           50 is ResNet-50.\n"                                                \
    "  --width W                ResNet base width (default 16; 64 in the papers).\n"               \
    "  --seq-len N              LSTM time steps (default 28, Fashion-MNIST's rows); other\n"       \
    "                           lengths with --dataset synthetic, whose images then have N\n"      \
    "                           rows of 28 pixels. transformer, moe: tokens per window\n"          \
    "                           (default 128).\n"                                                  \
    "  --hidden H               LSTM units per layer (default 128).\n"                             \
    "  --layers L               Stacked LSTM layers (default 1); transformer, moe: blocks\n"       \
    "                           (default 4).\n"                                                    \
    "  --dataset NAME           fashion-mnist (default; Debian's dataset-fashion-mnist) or\n"      \
    "                           synthetic (random images with learnable labels, any size;\n"       \
    "                           with --onnx, the model's input shape and classes);\n"              \
    "                           for transformer and moe, fortunes (their default; Debian's\n"      \
    "                           fortunes, byte-level: 90 % to train, the last 10 % held out).\n"   \
    "  --data-dir DIR           Where the Fashion-MNIST files are\n"                               \
    "                           (default /usr/share/datasets/fashion-mnist), or the fortunes\n"    \
    "                           (default /usr/share/games/fortunes).\n"                            \
    TIDECTL_DATA_FILE_HELP                                                                         \
    "  --batch B                Examples per step (default 64; 32 windows for transformer\n"       \
    "                           and moe; --onnx: the model's).\n"                                  \
    "  --budget BYTES           The job's device memory budget, with an optional K, M or G\n"      \
    "                           suffix (binary); the daemon swaps feature maps to host memory\n"   \
    "                           to fit it. Default: the daemon's default budget.\n"                \
    "  --swap auto|on|off       auto (default) swaps only what the budget needs, tuned by\n"       \
    "                           simulation; on swaps every distant tensor; off keeps\n"            \
    "                           everything resident.\n"                                            \
    "  --partition-size K       Nodes per partition; 0 (default): the planner picks it.\n"       \
    "  --vars-home auto|host|device\n"                                                             \
    "                           Where Variables live between uses (default auto).\n"               \
    "  --policy swap|recompute|checkpoint-sqrt\n"                                                  \
    "                           Memory actions: keep or swap; recompute, which also runs\n"       \
    "                           cheap producers again before far uses where that moves\n"         \
    "                           fewer bytes; or sqrt(n) checkpointing without swapping.\n"         \
    "                           Default: recompute on a GPU, swap on the CPU backend.\n"          \
    "  --math fp32|tf32         The math of the convolutions and matrix products (default\n"    \
    "                           fp32). tf32 lets a GPU multiply on TF32 tensor cores:\n"        \
    "                           faster, 10-bit mantissas, still the same bits every run.\n"     \
    "                           The CPU backend computes fp32 either way.\n"                    \
    "  --optimizer NAME         sgd (default for --onnx), momentum (default, 0.9; adam for\n"      \
    "                           lstm, transformer and moe) or adam.\n"                            \
    "  --lr X                   Learning rate (default 0.05 sgd, 0.02 momentum, 0.001 adam;\n"     \
    "                           0.003 adam for lstm, transformer and moe).\n"                      \
    "  --d-model D              transformer, moe: features (default 128).\n"                       \
    "  --heads H                transformer, moe: attention heads, dividing D (default 4).\n"      \
    "  --vocab V                transformer, moe: token ids (default 256: bytes; at least\n"       \
    "                           256 for fortunes).\n"                                              \
    "  --experts E              moe: experts per layer (default 8).\n"                             \
    "  --capacity-factor C      moe: each expert takes ceil(C * tokens * 2 / E) tokens\n"          \
    "                           (default 1.25); choices beyond that are dropped.\n"                \
    "  --dropout R              transformer, moe: Dropout rate, 0 <= R < 1 (default 0).\n"         \
    "  --seed S                 Seed of the initialisers and the shuffling (default 1).\n"         \
    "  --name NAME              The job's name in listings (default tidectl-MODEL).\n"

/* The help of TIDECTL_DATA_FILE_OPTIONS, inside TIDECTL_MODEL_HELP. */
#define TIDECTL_DATA_FILE_HELP                                                                     \
    "  --data FILE --labels FILE\n"                                                                \
    "                           Train on your own data instead of --dataset: examples [N, ...]\n" \
    "                           and their class labels [N], each a NumPy .npy (float32 or\n"      \
    "                           uint8 examples, uint8 scaled to [0, 1]; int32, int64 or uint8\n"  \
    "                           labels; float32 targets [N, ...] for --onnx --loss mse or\n"    \
    "                           none; C order) or an IDX file (MNIST's format, also\n"          \
    "                           gzipped). The examples' shape sets the model's input: mlp\n"      \
    "                           reads any, cnn and resnet [C, H, W] or [H, W], lstm [S, F]\n"      \
    "                           (S steps of F features, so no --seq-len); the classes are\n"      \
    "                           the largest label + 1. With --onnx, FILE may list one file\n"   \
    "                           per model input, A,B in the model's input order (a BERT's\n"    \
    "                           ids and mask), each [N, ...] of the same N; int32 or int64\n"   \
    "                           files feed int inputs.\n"                                        \
    "  --test-data FILE --test-labels FILE\n"                                                      \
    "                           The examples `train` scores after training (with --data;\n"      \
    "                           without them, no test split). Same example shape, labels\n"      \
    "                           below the training classes.\n" TIDECTL_ONNX_HELP

/* The help of TIDECTL_ONNX_OPTIONS, inside TIDECTL_MODEL_HELP. */
#define TIDECTL_ONNX_HELP                                                                          \
    "  --onnx FILE              Train the ONNX model in FILE instead of --model, as PyTorch's\n"   \
    "                           torch.onnx.export writes it (training=TrainingMode.TRAINING,\n"    \
    "                           do_constant_folding=False, a static batch). Its input takes\n"     \
    "                           the examples (with --data, each input its own file); the\n"        \
    "                           batch is its static one (--batch only\n"                           \
    "                           stands for a dynamic one); the optimizer defaults to sgd.\n"       \
    "  --output NAME            The output that predicts (default: the model's first).\n"          \
    "  --loss xent|mse|none     What to minimise on it: xent (default), cross-entropy against\n"   \
    "                           the class labels of an output [B, classes]; mse, float32\n"        \
    "                           targets (--labels) of the output's per-example shape; none,\n"     \
    "                           the output is the model's loss, and --labels feeds its second\n"   \
    "                           graph input (int or float, as the input says).\n"                  \
    "  --frozen A,B             Float initializers to keep as they are, not train (buffers\n"      \
    "                           such as a causal mask; pass the same list to export).\n"           \
    "  --dim NAME=N[,NAME=N]    Sizes of the model's dynamic dimensions other than the batch,\n"   \
    "                           by their names in the file (dynamic_axes {1: \"seq\"}: --dim\n"    \
    "                           seq=128; --batch sets the batch).\n"

/* What the command line said: the global options, every command's, and the arguments. */
struct tidectl_options {
    /* global */
    const char *socket;
    bool socket_given;
    const char *connect;
    const char *token;
    const char *ca;
    const char *server_name;
    bool json;
    double timeout_s;
    /* model and job */
    const char *model;
    int32_t depth;
    int64_t width;
    const char *dataset;
    const char *data_dir;
    int64_t batch;
    uint64_t budget;
    enum tide_job_swap swap;
    uint32_t partition_size;
    enum tide_job_vars_home vars_home;
    int recompute; /* --policy: tide_job_spec's recompute */
    enum tide_job_optimizer optimizer;
    double lr; /* 0: the optimizer's default */
    uint64_t seed;
    const char *name;
    /* sequence models (lstm, transformer, moe); 0 until tidectl_parse_options applies the
     * model's default */
    int64_t seq_len;
    int64_t hidden;
    int32_t layers;
    bool optimizer_given; /* --optimizer was on the command line (lstm defaults to adam) */
    /* the language models: 0 takes the model's default (tide_model_lm_options_default) */
    int64_t d_model;
    int32_t heads;
    int64_t vocab;
    int64_t experts;
    double capacity_factor;
    double dropout; /* < 0: the default */
    /* train */
    int64_t steps;
    int64_t epochs;
    uint64_t checkpoint_every;
    const char *resume;
    bool no_eval;
    bool keep; /* train: leave the job READY instead of finishing it */
    int32_t priority; /* train --priority: the job's admission priority (0 the default) */
    int64_t device; /* train --device: the daemon's device to run on; -1: the daemon picks */
    /* plan */
    bool partitions;
    const char *svg; /* the memory picture's path, or NULL */
    const char *device_profile; /* plan: --device-profile, or NULL (the daemon's device) */
    const char *math;           /* --math fp32|tf32, or NULL (fp32); the daemon checks it */
    /* jobs, watch, top */
    bool all;
    uint32_t stride;
    bool once;
    double interval_s;
    /* trace */
    const char *output; /* NULL: the command's default file; with --onnx, the prediction output */
    /* data from files (plan, train), and export's output */
    const char *data, *labels;           /* --data, --labels: the training examples and labels */
    const char *test_data, *test_labels; /* --test-data, --test-labels */
    bool dataset_given;                  /* --dataset was on the command line (excludes --data) */
    const char *npz;                     /* export: the .npz to write */
    /* ONNX models: plan and train read --onnx, export writes it (from --from) */
    const char *onnx;    /* --onnx: the model (plan, train) or the file to write (export) */
    const char *loss;    /* --loss xent|mse|none; NULL: xent */
    const char *frozen;  /* --frozen: comma-separated initializers kept as they are */
    const char *dims;    /* --dim: NAME=N,... sizes of dynamic dimensions by name */
    const char *from;    /* export --from: the model the job was trained from */
    bool batch_given;    /* --batch was on the command line */
    /* positional arguments after the command */
    char **args;
    int n_args;
};

/* The spellings of --swap, in the order of enum tide_job_swap, NULL-terminated. */
extern const char *const tidectl_swap_names[];

/*
 * Parses argv (every option of tidectl and of verb, which may be NULL when
 * no command was named) into *o, which holds the defaults. Answers --help
 * and --version itself (and exits 0). Returns TIDECTL_EXIT_OK, or
 * TIDECTL_EXIT_USAGE after saying what is wrong on stderr.
 */
struct tidectl_verb;
int tidectl_parse_options(int argc, char **argv, const struct tidectl_verb *verb,
                          struct tidectl_options *o);

/*
 * Finds the command word in argv: the first argument that is neither an
 * option nor an option's value. Sets *index to its place in argv (-1 when
 * there is none) and returns its verb, or NULL when there is none or the
 * word names no command.
 */
const struct tidectl_verb *tidectl_scan_verb(int argc, char **argv, int *index);

/* ============================================================================
 * Verbs
 * ========================================================================== */

/*
 * One command. run gets the client when connects is set (main() connected
 * as the global options say, and frees the client after run), NULL
 * otherwise; it returns the exit status.
 */
struct tidectl_verb {
    const char *name;
    int (*run)(const struct tidectl_verb *verb, struct tidectl_options *o, tide_client *c);
    bool connects;
    const int *accepts;     /* its own options, 0-terminated (the global ones always apply) */
    int min_args, max_args; /* positional arguments */
    const char *synopsis;
    const char *summary;
    const char *help; /* DESCRIPTION and OPTIONS, man-page style */
};

/* The commands, each defined in the file of its name. */
extern const struct tidectl_verb tidectl_verb_status;
extern const struct tidectl_verb tidectl_verb_plan;
extern const struct tidectl_verb tidectl_verb_train;
extern const struct tidectl_verb tidectl_verb_jobs;
extern const struct tidectl_verb tidectl_verb_get;
extern const struct tidectl_verb tidectl_verb_watch;
extern const struct tidectl_verb tidectl_verb_cancel;
extern const struct tidectl_verb tidectl_verb_checkpoint;
extern const struct tidectl_verb tidectl_verb_trace;
extern const struct tidectl_verb tidectl_verb_top;
extern const struct tidectl_verb tidectl_verb_rm;
extern const struct tidectl_verb tidectl_verb_prune;
extern const struct tidectl_verb tidectl_verb_queue;
extern const struct tidectl_verb tidectl_verb_priority;
extern const struct tidectl_verb tidectl_verb_help;
extern const struct tidectl_verb tidectl_verb_export;

/* Prints what tide_client_remove() or tide_client_prune() deleted (output.c). */
int tidectl_print_removal(const struct tide_removal *r, bool json);

/* The verb called name, or NULL. */
const struct tidectl_verb *tidectl_find_verb(const char *name);

/* Prints `tidectl --help`: every command and the global options. */
void tidectl_usage_main(FILE *out);

/* Prints `tidectl VERB --help`. */
void tidectl_usage_verb(FILE *out, const struct tidectl_verb *verb);

/* ============================================================================
 * Errors and connecting
 * ========================================================================== */

/* --json was given: errors are also written to stdout as {"error": ...} lines. */
extern bool tidectl_json;

/*
 * The daemon is on this machine (a Unix socket, not --connect): its uids are
 * this machine's, so tables can show user names.
 */
extern bool tidectl_local_daemon;

/* A job owner's user name where tidectl_local_daemon and the uid has one, else the number. */
const char *tidectl_fmt_user(uint32_t uid, char *buf, size_t size);

/*
 * Says on stderr "tidectl: COMMAND: what is wrong (see tidectl COMMAND
 * --help)" (command may be NULL) and returns TIDECTL_EXIT_USAGE.
 */
int tidectl_usage_error(const char *command, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Reports a failed call of c: "tidectl: what: CODE: message"; returns exit_code. */
int tidectl_client_error(tide_client *c, const char *what, int exit_code);

/*
 * Connects as the global options say. On failure reports why, sets *rc to
 * the exit code (3, or 2 for a bad target or TLS option) and returns NULL.
 * The caller frees the client with tide_client_free().
 */
tide_client *tidectl_connect(const struct tidectl_options *o, int *rc);

/* ============================================================================
 * Formatting, time and signals
 * ========================================================================== */

/* Formats bytes as "7.9 MiB", into buf; returns buf. */
const char *tidectl_fmt_bytes(uint64_t bytes, char *buf, size_t size);

/* Formats seconds as "1h02m", "3m05s" or "12s" ("--" for none); returns buf. */
const char *tidectl_fmt_duration(double seconds, char *buf, size_t size);

/* Formats a Unix time in microseconds as local "YYYY-MM-DD HH:MM:SS" ("-" for none). */
const char *tidectl_fmt_time_us(int64_t us, char *buf, size_t size);

/* Seconds on the monotonic clock. */
double tidectl_now_s(void);

/* SIGINT and SIGTERM seen since tidectl_install_signals(), and the last of them (0: none). */
extern volatile sig_atomic_t tidectl_interrupts;
extern volatile sig_atomic_t tidectl_last_signal;

/* Counts SIGINT and SIGTERM in tidectl_interrupts instead of dying of them. */
void tidectl_install_signals(void);

/* ============================================================================
 * Output: JSON lines and shared text tables
 * ========================================================================== */

/*
 * JSON lines are json-c objects (struct json_object, from <json.h>) built
 * with the functions below and written by tidectl_json_print_line(), which
 * owns and frees the object. The setters and builders take a NULL object
 * (a failed allocation) and remember the failure, so a command builds its
 * line without checking each call, and the print reports it instead.
 *
 * Example usage:
 *
 *     struct json_object *line = tidectl_json_object();
 *     tidectl_json_set_string(line, "job", id);
 *     tidectl_json_set_uint(line, "bytes", bytes);
 *     tidectl_json_set(line, "result", tidectl_json_step(r));
 *     return tidectl_json_print_line(line);
 */
struct json_object;

/* A new, empty JSON object or array; the caller owns it (until it is set or appended). */
struct json_object *tidectl_json_object(void);
struct json_object *tidectl_json_array(void);

/* Sets key of o to value, taking ownership of value (an object, array or any json-c value). */
void tidectl_json_set(struct json_object *o, const char *key, struct json_object *value);

/* Appends value to array, taking ownership of value. */
void tidectl_json_append(struct json_object *array, struct json_object *value);

/* Sets key of o to a string (NULL as ""), an integer or a boolean. */
void tidectl_json_set_string(struct json_object *o, const char *key, const char *s);
void tidectl_json_set_int(struct json_object *o, const char *key, int64_t v);
void tidectl_json_set_uint(struct json_object *o, const char *key, uint64_t v);
void tidectl_json_set_bool(struct json_object *o, const char *key, bool v);

/*
 * Sets key of o to a number with nine significant digits (enough for a
 * float to round-trip); NaN and infinities (a diverged loss, no test
 * examples) become null, since JSON has no spelling for them.
 */
void tidectl_json_set_double(struct json_object *o, const char *key, double v);

/* Adds the fields of a plan report to o, and its partitions as an array if asked. */
void tidectl_json_add_plan(struct json_object *o, const struct tide_job_plan_report *p,
                           bool partitions);

/* A job as a new JSON object, with its plan (without partitions) when it has one. */
struct json_object *tidectl_json_job(const struct tide_job_info *j);

/* A step result as a new JSON object (the fetches are not included). */
struct json_object *tidectl_json_step(const struct tide_step_result *r);

/*
 * Prints {"error":{"code":...,"code_number":...,"message":...,"exit":...}}
 * as a line on stdout; code_number < 0 leaves that field out (an error that
 * is not a gRPC code). Returns tidectl_json_print_line()'s result.
 */
int tidectl_json_print_error(const char *code, int code_number, const char *message, int exit_code);

/*
 * Writes o as one line on stdout (json-c's plain form, slashes unescaped),
 * flushes it and frees o. Returns TIDECTL_EXIT_OK, or TIDECTL_EXIT_RUNTIME
 * after saying so on stderr, and printing nothing, when building o ran out
 * of memory.
 */
int tidectl_json_print_line(struct json_object *o);

/* Prints a plan report as indented text, with the partition table if asked. */
void tidectl_print_plan(const struct tide_job_plan_report *p, bool partitions);

/* Prints the table of jobs that `status` and `jobs` show ("no jobs" for none). */
void tidectl_print_jobs_table(const struct tide_job_info *jobs, size_t n);

/* ============================================================================
 * Models, job specs and datasets (plan, train)
 * ========================================================================== */

/*
 * What a built model needs to be fed: the images' placeholder shape and the
 * classes; for a language model the tokens' placeholder shape [B, S] and the
 * vocabulary.
 */
struct tidectl_model {
    uint8_t *graph; /* serialized tide.v1.Graph, malloc'd: tidectl_model_clear() frees it */
    size_t graph_len;
    bool language_model; /* transformer, moe: fed tokens and labels [B, S] from a corpus */
    int64_t image_dims[TIDE_BUILDER_MAX_RANK];
    int32_t image_rank;
    int64_t image_elements; /* per batch */
    int32_t classes;
    int64_t parameters;
    int64_t batch; /* the images' first dimension */
    /* What a step feeds and fetches: tide's models' names, or an ONNX model's (in onnx). */
    const char *images, *labels, *logits, *loss; /* images: a language model's tokens */
    const char *fetch; /* what a step fetches: the logits, or a language model's token losses */
    /* What the job spec feeds: images (an ONNX model's every input) then labels. */
    const char *feeds[TIDE_ONNX_MAX_INPUTS + 1];
    int32_t n_feeds;
    struct tide_onnx_training *onnx; /* malloc'd with --onnx, else NULL */
};

/* Frees what a built model holds and zeroes it. */
void tidectl_model_clear(struct tidectl_model *m);

/*
 * Builds the model the options name for images of c x h x w and classes
 * into *m; prints why not on failure and returns the exit status. files is
 * the --data dataset (NULL without): an ONNX model is checked against its
 * labels (class indices or float targets, and their shape). c 0 (plan
 * without --data): an ONNX model is checked against no examples, its own
 * input shapes being what is planned.
 */
int tidectl_build_model(const struct tidectl_options *o, int64_t c, int64_t h, int64_t w,
                        int32_t classes, const tide_dataset *files, struct tidectl_model *m);

/*
 * Fills *spec for a built model under the model options; the job's name is
 * written into name, which spec points to (as it does to m's graph).
 */
void tidectl_make_spec(const struct tidectl_options *o, const struct tidectl_model *m, char *name,
                       size_t name_size, struct tide_job_spec *spec);

/* Opens split ("train" or "test") of the dataset the options name; prints why not on failure. */
int tidectl_open_dataset(const struct tidectl_options *o, const char *split, tide_dataset **out);

/* Whether the options name a language model (transformer, moe), fed from a corpus. */
bool tidectl_language_model(const struct tidectl_options *o);

/* Opens split ("train" or "test") of the corpus of a language model; prints why not on failure. */
int tidectl_open_corpus(const struct tidectl_options *o, const char *split, tide_corpus **out);

/* The image shape and classes of the dataset the options name, without reading it. */
void tidectl_dataset_shape(const struct tidectl_options *o, int64_t *c, int64_t *h, int64_t *w,
                           int32_t *classes);

/*
 * With --data: opens the training files into *train and, when test is not
 * NULL and --test-data was given, the test files into *test (else NULL), and
 * sets the images shape the model is built for (c, h, w) from the examples'
 * shape. Prints why not on failure and returns the exit status.
 */
int tidectl_open_files(const struct tidectl_options *o, tide_dataset **train, tide_dataset **test,
                       int64_t *c, int64_t *h, int64_t *w);

/* With --data: checks that the built model's images placeholder takes train's examples. */
int tidectl_check_files_input(const tide_dataset *train, const struct tidectl_model *m);

#endif /* TIDE_CLIENT_TIDECTL_H */
