/* SPDX-License-Identifier: MIT */
/*
 * tidectl: the command line of tide, on libtide (tide/client.h).
 *
 * One process, one command: it connects to tided (a Unix socket, or TCP
 * with TLS and a token), does what the command says and exits with
 *
 *   0  success
 *   1  the daemon refused or failed (the message carries the gRPC code name)
 *   2  a usage error (a bad flag, command or value)
 *   3  no daemon could be reached at the socket or address
 *
 * `train` is the one long-running command: it builds a model with libtide's
 * builders, submits it, streams batches from a dataset and draws a progress
 * bar on stderr, then scores the test split with forward-only steps.
 * `top` redraws a table of every job once a second until q or Ctrl-C.
 *
 * Output. Human-readable text on stdout (progress on stderr); with --json,
 * exactly one JSON object per line on stdout instead — one per result for
 * single answers, one per event or step for streams — and errors also as a
 * {"error": ...} line, so scripts can read stdout line by line.
 *
 * Options are parsed in one pass over the whole command line (global and
 * command options may come in any order); each command accepts the global
 * options and its own, and refuses the rest.
 *
 * Threads: one. Signals: SIGINT and SIGTERM set a flag that `train` reads
 * between steps (the first stops feeding and lets the steps in flight
 * finish; the second abandons the stream) and `top` reads between frames.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/graph.h"
#include "tide/models.h"

#define EXIT_OK      0
#define EXIT_RUNTIME 1
#define EXIT_USAGE   2
#define EXIT_CONNECT 3

#define DEFAULT_SOCKET  "/run/tide/tided.sock"
#define TIDECTL_VERSION "0.1.0"

/* ============================================================================
 * Options
 * ========================================================================== */

/* Every long option of every command; commands say which they accept. */
enum option_id {
    OPT_HELP = 'h',
    OPT_SOCKET = 256,
    OPT_CONNECT,
    OPT_TOKEN,
    OPT_CA,
    OPT_SERVER_NAME,
    OPT_JSON,
    OPT_TIMEOUT,
    OPT_VERSION,
    /* model and job */
    OPT_MODEL,
    OPT_DEPTH,
    OPT_WIDTH,
    OPT_DATASET,
    OPT_DATA_DIR,
    OPT_BATCH,
    OPT_BUDGET,
    OPT_SWAP,
    OPT_PARTITION_SIZE,
    OPT_VARS_HOME,
    OPT_OPTIMIZER,
    OPT_LR,
    OPT_SEED,
    OPT_NAME,
    /* train */
    OPT_STEPS,
    OPT_EPOCHS,
    OPT_CHECKPOINT_EVERY,
    OPT_RESUME,
    OPT_NO_EVAL,
    /* plan */
    OPT_PARTITIONS,
    /* jobs, watch, top */
    OPT_ALL,
    OPT_STRIDE,
    OPT_ONCE,
    OPT_INTERVAL,
};

static const struct option long_options[] = {
    {"help", no_argument, 0, OPT_HELP},
    {"socket", required_argument, 0, OPT_SOCKET},
    {"connect", required_argument, 0, OPT_CONNECT},
    {"token", required_argument, 0, OPT_TOKEN},
    {"ca", required_argument, 0, OPT_CA},
    {"server-name", required_argument, 0, OPT_SERVER_NAME},
    {"json", no_argument, 0, OPT_JSON},
    {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"version", no_argument, 0, OPT_VERSION},
    {"model", required_argument, 0, OPT_MODEL},
    {"depth", required_argument, 0, OPT_DEPTH},
    {"width", required_argument, 0, OPT_WIDTH},
    {"dataset", required_argument, 0, OPT_DATASET},
    {"data-dir", required_argument, 0, OPT_DATA_DIR},
    {"batch", required_argument, 0, OPT_BATCH},
    {"budget", required_argument, 0, OPT_BUDGET},
    {"swap", required_argument, 0, OPT_SWAP},
    {"partition-size", required_argument, 0, OPT_PARTITION_SIZE},
    {"vars-home", required_argument, 0, OPT_VARS_HOME},
    {"optimizer", required_argument, 0, OPT_OPTIMIZER},
    {"lr", required_argument, 0, OPT_LR},
    {"seed", required_argument, 0, OPT_SEED},
    {"name", required_argument, 0, OPT_NAME},
    {"steps", required_argument, 0, OPT_STEPS},
    {"epochs", required_argument, 0, OPT_EPOCHS},
    {"checkpoint-every", required_argument, 0, OPT_CHECKPOINT_EVERY},
    {"resume", required_argument, 0, OPT_RESUME},
    {"no-eval", no_argument, 0, OPT_NO_EVAL},
    {"partitions", no_argument, 0, OPT_PARTITIONS},
    {"all", no_argument, 0, OPT_ALL},
    {"stride", required_argument, 0, OPT_STRIDE},
    {"once", no_argument, 0, OPT_ONCE},
    {"interval", required_argument, 0, OPT_INTERVAL},
    {0, 0, 0, 0},
};

struct options {
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
    enum tide_job_optimizer optimizer;
    double lr; /* 0: the optimizer's default */
    uint64_t seed;
    const char *name;
    /* train */
    int64_t steps;
    int64_t epochs;
    uint64_t checkpoint_every;
    const char *resume;
    bool no_eval;
    /* plan */
    bool partitions;
    /* jobs, watch, top */
    bool all;
    uint32_t stride;
    bool once;
    double interval_s;
    /* positional arguments after the command */
    char **args;
    int n_args;
};

/* ============================================================================
 * Commands and their help
 * ========================================================================== */

struct command;
typedef int (*command_fn)(const struct command *cmd, struct options *o);

struct command {
    const char *name;
    command_fn run;
    const int *accepts;     /* its own options (the global ones are always accepted) */
    int min_args, max_args; /* positional arguments */
    const char *synopsis;
    const char *summary;
    const char *help; /* DESCRIPTION and OPTIONS, man-page style */
};

static const int global_options[] = {OPT_HELP, OPT_SOCKET,      OPT_CONNECT, OPT_TOKEN,   OPT_CA,
                                     OPT_JSON, OPT_SERVER_NAME, OPT_TIMEOUT, OPT_VERSION, 0};

#define MODEL_OPTIONS                                                                              \
    OPT_MODEL, OPT_DEPTH, OPT_WIDTH, OPT_DATASET, OPT_DATA_DIR, OPT_BATCH, OPT_BUDGET, OPT_SWAP,   \
        OPT_PARTITION_SIZE, OPT_VARS_HOME, OPT_OPTIMIZER, OPT_LR, OPT_SEED, OPT_NAME

static const int no_options[] = {0};
static const int plan_options[] = {MODEL_OPTIONS, OPT_PARTITIONS, 0};
static const int train_options[] = {MODEL_OPTIONS, OPT_STEPS,   OPT_EPOCHS, OPT_CHECKPOINT_EVERY,
                                    OPT_RESUME,    OPT_NO_EVAL, 0};
static const int jobs_options[] = {OPT_ALL, 0};
static const int watch_options[] = {OPT_STRIDE, 0};
static const int top_options[] = {OPT_ONCE, OPT_INTERVAL, OPT_ALL, 0};

#define MODEL_HELP                                                                                 \
    "MODEL OPTIONS\n"                                                                              \
    "  --model mlp|cnn|resnet   The network (default cnn). mlp: dense layers of 256 and 128\n"     \
    "                           units; cnn: two 3x3 convolutions with pooling and a dense\n"       \
    "                           layer of 128 (206,922 parameters on 28x28 images); resnet:\n"      \
    "                           bottleneck ResNet of --depth layers and --width base width.\n"     \
    "  --depth D                ResNet layers, 3*(10+n)+2 for n >= 1: 35, 38 (default), 41, ...\n" \
    "                           50 is ResNet-50.\n"                                                \
    "  --width W                ResNet base width (default 16; 64 in the papers).\n"               \
    "  --dataset NAME           fashion-mnist (default; Debian's dataset-fashion-mnist) or\n"      \
    "                           synthetic (random images with learnable labels, any size).\n"      \
    "  --data-dir DIR           Where the Fashion-MNIST files are\n"                               \
    "                           (default /usr/share/datasets/fashion-mnist).\n"                    \
    "  --batch B                Examples per step (default 64).\n"                                 \
    "  --budget BYTES           The job's device memory budget, with an optional K, M or G\n"      \
    "                           suffix (binary); the daemon swaps feature maps to host memory\n"   \
    "                           to fit it. Default: the daemon's default budget.\n"                \
    "  --swap auto|on|off       auto (default) swaps only what the budget needs, tuned by\n"       \
    "                           simulation; on swaps every distant tensor; off keeps\n"            \
    "                           everything resident.\n"                                            \
    "  --partition-size K       Nodes per partition (default: the daemon's).\n"                    \
    "  --vars-home auto|host|device\n"                                                             \
    "                           Where Variables live between uses (default auto).\n"               \
    "  --optimizer NAME         sgd, momentum (default, 0.9) or adam.\n"                           \
    "  --lr X                   Learning rate (default 0.05 sgd, 0.02 momentum, 0.001 adam).\n"    \
    "  --seed S                 Seed of the initialisers and the shuffling (default 1).\n"         \
    "  --name NAME              The job's name in listings (default tidectl-MODEL).\n"

static int cmd_status(const struct command *cmd, struct options *o);
static int cmd_plan(const struct command *cmd, struct options *o);
static int cmd_train(const struct command *cmd, struct options *o);
static int cmd_jobs(const struct command *cmd, struct options *o);
static int cmd_get(const struct command *cmd, struct options *o);
static int cmd_watch(const struct command *cmd, struct options *o);
static int cmd_cancel(const struct command *cmd, struct options *o);
static int cmd_checkpoint(const struct command *cmd, struct options *o);
static int cmd_top(const struct command *cmd, struct options *o);
static int cmd_help(const struct command *cmd, struct options *o);

static const struct command commands[] = {
    {"status", cmd_status, no_options, 0, 0, "status", "show the daemon's device, memory and jobs",
     "DESCRIPTION\n"
     "  Asks the daemon for its version, backend and device, the device memory it has\n"
     "  (total, reserved by admitted jobs' budgets, in use by running jobs), its host\n"
     "  pool and its budget limits, and lists the jobs it reports.\n"},
    {"plan", cmd_plan, plan_options, 0, 0, "plan [MODEL OPTIONS] [--partitions]",
     "show the memory plan of a model for a budget, without running it",
     "DESCRIPTION\n"
     "  Builds the model as `train` would and asks the daemon to compile it for the\n"
     "  budget: the predicted device peak, whether it fits, the smallest budget that\n"
     "  would fit (and the node that sets it), the bytes swapped in and out and\n"
     "  fetched and written back per step, and the partitioning the swapper settled\n"
     "  on. Use it to choose --budget: a budget below the peak of --swap off forces\n"
     "  swapping. Nothing is submitted.\n"
     "\n"
     "OPTIONS\n"
     "  --partitions             Also list every partition: nodes, resident bytes, bytes\n"
     "                           moved, and its peak node.\n"
     "\n" MODEL_HELP},
    {"train", cmd_train, train_options, 0, 0,
     "train [MODEL OPTIONS] [--epochs E | --steps S] [--checkpoint-every N] [--resume JOB]",
     "submit a model and train it on a dataset, with a progress bar",
     "DESCRIPTION\n"
     "  Builds the model with libtide's builders, submits it as a job, and streams\n"
     "  batches of the dataset's train split into it. A progress bar on stderr shows\n"
     "  step/total, the loss and accuracy of the latest training batch (from the\n"
     "  fetched logits), the device memory high water against the budget, the swap\n"
     "  traffic (bytes copied between host and device) per step, steps per second and\n"
     "  the time left. Then the test split is scored with forward-only steps and the\n"
     "  test accuracy printed. The job stays on the daemon (see `jobs`, `get`).\n"
     "  Ctrl-C once stops after the steps in flight (the job keeps its variables; a\n"
     "  checkpoint can be taken with `checkpoint`); twice abandons the stream.\n"
     "  With --json, stdout gets a \"submitted\" line, one \"step\" line per step and a\n"
     "  \"done\" line.\n"
     "\n"
     "OPTIONS\n"
     "  --epochs E               Train E passes over the train split (default 1).\n"
     "  --steps S                Train S steps instead.\n"
     "  --checkpoint-every N     Have the daemon checkpoint every N steps.\n"
     "  --resume JOB             Start from the last checkpoint of job JOB (same model).\n"
     "  --no-eval                Skip the test split.\n"
     "\n" MODEL_HELP},
    {"jobs", cmd_jobs, jobs_options, 0, 0, "jobs [--all]", "list jobs",
     "DESCRIPTION\n"
     "  Lists your jobs: id, name, owner, state, steps, last loss, budget, device high\n"
     "  water, host-device traffic and step rate.\n"
     "\n"
     "OPTIONS\n"
     "  --all                    Every user's jobs (admins and monitors only).\n"},
    {"get", cmd_get, no_options, 1, 1, "get JOB", "show one job",
     "DESCRIPTION\n"
     "  Shows everything the daemon knows about JOB, its plan summary included.\n"},
    {"watch", cmd_watch, watch_options, 0, 1, "watch [JOB] [--stride N]",
     "follow a job's (or every job's) events",
     "DESCRIPTION\n"
     "  Prints JOB's events as they happen — state changes, steps, checkpoints and\n"
     "  the daemon's messages — until the daemon ends the stream or Ctrl-C. Without\n"
     "  JOB, every job you may see.\n"
     "\n"
     "OPTIONS\n"
     "  --stride N               Report at most one step in N (default 1: every step).\n"},
    {"cancel", cmd_cancel, no_options, 1, 1, "cancel JOB", "cancel a job",
     "DESCRIPTION\n"
     "  Cancels JOB: a stream training it ends, its device memory is released. Only\n"
     "  its owner or an admin may.\n"},
    {"checkpoint", cmd_checkpoint, no_options, 1, 1, "checkpoint JOB",
     "write a checkpoint of a job now",
     "DESCRIPTION\n"
     "  Has the daemon write JOB's variables and optimizer state to its state\n"
     "  directory now, and prints the step, path and size. A later job can start from\n"
     "  it with `train --resume JOB`, also after the daemon restarted.\n"},
    {"top", cmd_top, top_options, 0, 0, "top [--once] [--interval S]", "live view of every job",
     "DESCRIPTION\n"
     "  Redraws, every --interval seconds, the daemon's device memory and a table of\n"
     "  the jobs: state, steps, step rate, last loss, device high water against the\n"
     "  budget, and swap traffic (host-device bytes) per step and per second. q or\n"
     "  Ctrl-C quits. Admins see every job; other users their own.\n"
     "\n"
     "OPTIONS\n"
     "  --once                   Print one frame and exit (no screen control).\n"
     "  --interval S             Seconds between frames (default 1).\n"
     "  --all                    Accepted for symmetry with `jobs`; top always asks for all.\n"},
    {"help", cmd_help, no_options, 0, 1, "help [COMMAND]", "show help on tidectl or a command",
     "DESCRIPTION\n"
     "  The same as `tidectl --help` or `tidectl COMMAND --help`.\n"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage_main(FILE *out)
{
    fprintf(out,
            "NAME\n"
            "  tidectl - control the tide training daemon\n"
            "\n"
            "SYNOPSIS\n"
            "  tidectl [--socket PATH | --connect HOST:PORT [--token T] [--ca FILE]] [--json]\n"
            "          COMMAND [OPTIONS] [ARGS]\n"
            "\n"
            "DESCRIPTION\n"
            "  tidectl talks to tided, the daemon that owns this machine's GPU, over its Unix\n"
            "  socket (or TCP with TLS): it submits and trains models larger than the GPU's\n"
            "  memory, shows memory plans, lists, watches, checkpoints and cancels jobs.\n"
            "\n"
            "COMMANDS\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "  `tidectl COMMAND --help` describes each command and its options.\n"
            "\n"
            "GLOBAL OPTIONS\n"
            "  --socket PATH            The daemon's Unix socket (default $TIDE_SOCKET, else\n"
            "                           " DEFAULT_SOCKET ").\n"
            "  --connect HOST:PORT      Use TCP with TLS instead.\n"
            "  --token T                Bearer token for --connect (default $TIDE_TOKEN).\n"
            "  --ca FILE                PEM certificates that sign the daemon's (default: the\n"
            "                           system's).\n"
            "  --server-name NAME       The name the daemon's certificate must carry.\n"
            "  --json                   Machine-readable output: one JSON object per line.\n"
            "  --timeout SECONDS        Deadline of each request (default 120).\n"
            "  -h, --help               This text.\n"
            "  --version                tidectl's version.\n"
            "\n"
            "EXIT STATUS\n"
            "  0 success; 1 the daemon refused or failed (the message names the gRPC code);\n"
            "  2 usage error; 3 cannot connect to the daemon.\n"
            "\n"
            "ENVIRONMENT\n"
            "  TIDE_SOCKET, TIDE_TOKEN  Defaults of --socket and --token.\n"
            "\n"
            "EXAMPLES\n"
            "  tidectl status\n"
            "  tidectl plan --model cnn --batch 64 --swap off\n"
            "  tidectl train --model cnn --dataset fashion-mnist --epochs 1 --budget 6M\n"
            "  tidectl --json jobs | jq .state\n"
            "  tidectl top\n");
}

static void usage_command(FILE *out, const struct command *cmd)
{
    fprintf(out,
            "NAME\n  tidectl %s - %s\n\nSYNOPSIS\n  tidectl [GLOBAL OPTIONS] %s\n\n%s\n"
            "GLOBAL OPTIONS\n  --socket PATH, --connect HOST:PORT, --token T, --ca FILE, --json,\n"
            "  --timeout SECONDS: see `tidectl --help`.\n\n"
            "EXIT STATUS\n  0 success; 1 daemon error; 2 usage error; 3 cannot connect.\n",
            cmd->name, cmd->summary, cmd->synopsis, cmd->help);
}

/* ============================================================================
 * Small helpers: errors, numbers, bytes, time
 * ========================================================================== */

static bool json_mode; /* --json, for the error printers */

static void json_string(FILE *out, const char *s);

static int usage_error(const char *command, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static int usage_error(const char *command, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fprintf(stderr, "tidectl: ");
    if (command)
        fprintf(stderr, "%s: ", command);
    vfprintf(stderr, format, args);
    fprintf(stderr, " (see tidectl %s%s--help)\n", command ? command : "", command ? " " : "");
    va_end(args);
    return EXIT_USAGE;
}

/* Reports a failed call of c: "tidectl: what: CODE: message"; returns the exit code. */
static int client_error(tide_client *c, const char *what, int exit_code)
{
    int code = tide_client_error_code(c);
    const char *message = tide_client_error_message(c);
    fprintf(stderr, "tidectl: %s: %s: %s\n", what, tide_code_name(code), message);
    if (json_mode) {
        printf("{\"error\":{\"code\":");
        json_string(stdout, tide_code_name(code));
        printf(",\"code_number\":%d,\"message\":", code);
        json_string(stdout, message);
        printf(",\"exit\":%d}}\n", exit_code);
        fflush(stdout);
    }
    return exit_code;
}

/* Parses bytes with an optional K/M/G/T suffix (binary), "KiB"/"KB"/"B" spellings too. */
static int parse_bytes(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v >= 0) || !isfinite(v))
        return -1;
    uint64_t scale = 1;
    switch (*end) {
    case 'K':
    case 'k':
        scale = UINT64_C(1) << 10;
        end++;
        break;
    case 'M':
    case 'm':
        scale = UINT64_C(1) << 20;
        end++;
        break;
    case 'G':
    case 'g':
        scale = UINT64_C(1) << 30;
        end++;
        break;
    case 'T':
    case 't':
        scale = UINT64_C(1) << 40;
        end++;
        break;
    default:
        break;
    }
    if (scale > 1 && *end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * (double)scale >= 1.8e19)
        return -1;
    *out = (uint64_t)(v * (double)scale);
    return 0;
}

static int parse_int(const char *text, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || errno || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *text, double min, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v) || !(v > min))
        return -1;
    *out = v;
    return 0;
}

/* Formats bytes as "7.9 MiB", into buf. */
static const char *fmt_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, size, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, units[u]);
    return buf;
}

/* Formats seconds as "1h02m", "3m05s" or "12s". */
static const char *fmt_duration(double seconds, char *buf, size_t size)
{
    if (!(seconds >= 0) || !isfinite(seconds) || seconds > 1e8) {
        snprintf(buf, size, "--");
        return buf;
    }
    uint64_t s = (uint64_t)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(buf, size, "%" PRIu64 "s", s);
    return buf;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *fmt_time_us(int64_t us, char *buf, size_t size)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    if (us <= 0 || !localtime_r(&t, &tm)) {
        snprintf(buf, size, "-");
        return buf;
    }
    strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

/* ============================================================================
 * JSON output: one object per line
 * ========================================================================== */

static void json_string(FILE *out, const char *s)
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

/* A JSON number; NaN and infinities (a diverged loss) become null. */
static void json_double(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "%.9g", v);
    else
        fputs("null", out);
}

/* Writes the fields of a plan report (without braces). */
static void json_plan_fields(FILE *out, const struct tide_job_plan_report *p, bool partitions)
{
    fprintf(out,
            "\"nodes\":%" PRIu32 ",\"budget_bytes\":%" PRIu64 ",\"predicted_peak_bytes\":%" PRIu64
            ",\"fits\":%s,\"min_budget_bytes\":%" PRIu64 ",\"min_budget_node\":",
            p->nodes, p->budget_bytes, p->predicted_peak_bytes, p->fits ? "true" : "false",
            p->min_budget_bytes);
    json_string(out, p->min_budget_node);
    fprintf(out,
            ",\"swap_in_bytes\":%" PRIu64 ",\"swap_out_bytes\":%" PRIu64 ",\"fetch_bytes\":%" PRIu64
            ",\"write_back_bytes\":%" PRIu64 ",\"partition_size\":%" PRIu32
            ",\"swap_threshold\":%" PRIu32 ",\"prefetch_distance\":%" PRIu32
            ",\"host_bytes\":%" PRIu64 ",\"plan_us\":%" PRIu64 ",\"message\":",
            p->swap_in_bytes, p->swap_out_bytes, p->fetch_bytes, p->write_back_bytes,
            p->partition_size, p->swap_threshold, p->prefetch_distance, p->host_bytes, p->plan_us);
    json_string(out, p->message);
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
        json_string(out, q->peak_node);
        fputc('}', out);
    }
    fputc(']', out);
}

/* Writes a job as a JSON object. */
static void json_job(FILE *out, const struct tide_job_info *j)
{
    fputs("{\"id\":", out);
    json_string(out, j->id);
    fputs(",\"name\":", out);
    json_string(out, j->name);
    fprintf(out, ",\"owner_uid\":%" PRIu32 ",\"state\":", j->owner_uid);
    json_string(out, tide_job_state_name(j->state));
    fprintf(out, ",\"steps\":%" PRIu64 ",\"last_loss\":", j->steps);
    json_double(out, j->last_loss);
    fprintf(out,
            ",\"device_budget_bytes\":%" PRIu64 ",\"device_high_water_bytes\":%" PRIu64
            ",\"host_bytes\":%" PRIu64 ",\"h2d_bytes_total\":%" PRIu64
            ",\"d2h_bytes_total\":%" PRIu64 ",\"steps_per_second\":",
            j->device_budget_bytes, j->device_high_water_bytes, j->host_bytes, j->h2d_bytes_total,
            j->d2h_bytes_total);
    json_double(out, j->steps_per_second);
    fprintf(out,
            ",\"created_us\":%" PRId64 ",\"updated_us\":%" PRId64 ",\"message\":", j->created_us,
            j->updated_us);
    json_string(out, j->message);
    fprintf(out, ",\"last_checkpoint_step\":%" PRIu64, j->last_checkpoint_step);
    if (j->has_plan) {
        fputs(",\"plan\":{", out);
        json_plan_fields(out, &j->plan, false);
        fputc('}', out);
    }
    fputc('}', out);
}

/* Writes a step result as a JSON object (fetches by name and shape only). */
static void json_step(FILE *out, const struct tide_step_result *r)
{
    fprintf(out, "{\"step\":%" PRIu64 ",\"loss\":", r->step);
    json_double(out, r->loss);
    fprintf(out,
            ",\"step_us\":%" PRIu64 ",\"device_high_water_bytes\":%" PRIu64
            ",\"h2d_bytes\":%" PRIu64 ",\"d2h_bytes\":%" PRIu64 ",\"stall_us\":%" PRIu64
            ",\"eval_only\":%s}",
            r->step_us, r->device_high_water_bytes, r->h2d_bytes, r->d2h_bytes, r->stall_us,
            r->eval_only ? "true" : "false");
}

static void json_end_line(void)
{
    fputc('\n', stdout);
    fflush(stdout);
}

/* ============================================================================
 * Connecting
 * ========================================================================== */

/*
 * Connects as the global options say. On failure reports why, sets *rc to
 * the exit code (3, or 2 for a bad target or TLS option) and returns NULL.
 */
static tide_client *connect_daemon(const struct options *o, int *rc)
{
    *rc = EXIT_OK;
    struct tide_client_options co = {0};
    char target[4200];
    if (o->connect) {
        snprintf(target, sizeof(target), "%s", o->connect);
        co.token = o->token;
        co.ca_file = o->ca;
        co.server_name = o->server_name;
    } else {
        snprintf(target, sizeof(target), "unix:%s", o->socket);
    }
    co.call_timeout_ms = (uint32_t)(o->timeout_s * 1000);
    tide_client *c = NULL;
    if (tide_client_connect(target, &co, &c) != 0) {
        if (!c) {
            fprintf(stderr, "tidectl: out of memory\n");
            *rc = EXIT_RUNTIME;
            return NULL;
        }
        int code = tide_client_error_code(c);
        *rc = EXIT_CONNECT;
        if (code == TIDE_CODE_INVALID_ARGUMENT) {
            *rc = client_error(c, "connect", EXIT_USAGE);
        } else {
            client_error(c, "connect", EXIT_CONNECT);
            if (!o->connect)
                fprintf(stderr,
                        "tidectl: hint: check that tided runs (systemctl status tided) and that "
                        "--socket or $TIDE_SOCKET names its socket (now %s)\n",
                        o->socket);
        }
        tide_client_free(c);
        return NULL;
    }
    return c;
}

/* ============================================================================
 * Models
 * ========================================================================== */

/* What a built model needs to be fed: the images' placeholder shape and the classes. */
struct model {
    uint8_t *graph;
    size_t graph_len;
    int64_t image_dims[TIDE_BUILDER_MAX_RANK];
    int32_t image_rank;
    int64_t image_elements; /* per batch */
    int32_t classes;
    int64_t parameters;
};

static int32_t resnet_blocks(int32_t depth)
{
    return (depth - 2) / 3 - 10;
}

/* Builds the model for images of c x h x w and classes; prints why not on failure. */
static int build_model(const struct options *o, int64_t c, int64_t h, int64_t w, int32_t classes,
                       struct model *m)
{
    memset(m, 0, sizeof(*m));
    tide_builder *b = tide_builder_new();
    if (!b) {
        fprintf(stderr, "tidectl: out of memory\n");
        return EXIT_RUNTIME;
    }
    tide_ref logits;
    if (strcmp(o->model, "mlp") == 0) {
        int64_t hidden[2] = {256, 128};
        logits = tide_model_mlp(b, o->batch, c * h * w, hidden, 2, classes);
    } else if (strcmp(o->model, "cnn") == 0) {
        logits = tide_model_cnn(b, o->batch, c, h, w, classes);
    } else {
        if (h != w) {
            tide_builder_free(b);
            return usage_error(NULL,
                               "--model resnet wants square images, the dataset's are "
                               "%" PRId64 "x%" PRId64,
                               h, w);
        }
        logits = tide_model_resnet(b, o->batch, c, h, classes, resnet_blocks(o->depth), o->width);
    }
    tide_ref images = tide_builder_find(b, TIDE_MODEL_IMAGES);
    int rc = EXIT_OK;
    if (logits.id < 0 || images.id < 0 ||
        tide_builder_shape(b, images, m->image_dims, &m->image_rank) != 0 ||
        tide_builder_serialize(b, &m->graph, &m->graph_len) != 0) {
        fprintf(stderr, "tidectl: building the %s model: %s\n", o->model, tide_builder_error(b));
        rc = EXIT_RUNTIME;
    } else {
        m->image_elements = 1;
        for (int32_t i = 0; i < m->image_rank; i++)
            m->image_elements *= m->image_dims[i];
        m->classes = classes;
        m->parameters = tide_builder_parameter_count(b);
    }
    tide_builder_free(b);
    return rc;
}

static const char *const model_fetches[] = {TIDE_MODEL_LOGITS};

/* The job spec for a built model under the model options. */
static void make_spec(const struct options *o, const struct model *m, char *name, size_t name_size,
                      struct tide_job_spec *spec)
{
    tide_job_spec_init(spec);
    if (o->name)
        snprintf(name, name_size, "%s", o->name);
    else
        snprintf(name, name_size, "tidectl-%s", o->model);
    spec->name = name;
    spec->graph = m->graph;
    spec->graph_len = m->graph_len;
    spec->optimizer = o->optimizer;
    double lr = o->lr;
    if (lr == 0)
        lr = o->optimizer == TIDE_JOB_OPTIMIZER_SGD        ? 0.05
             : o->optimizer == TIDE_JOB_OPTIMIZER_MOMENTUM ? 0.02
                                                           : 0.001;
    spec->learning_rate = (float)lr;
    spec->fetches = model_fetches;
    spec->n_fetches = 1;
    spec->budget_bytes = o->budget;
    spec->partition_size = o->partition_size;
    spec->swap = o->swap;
    spec->vars_home = o->vars_home;
    spec->autotune = o->swap == TIDE_JOB_SWAP_AUTO;
    spec->checkpoint_every = o->checkpoint_every;
    spec->resume_from = o->resume;
    spec->seed = o->seed;
}

/* Opens split of the dataset the options name; prints why not on failure. */
static int open_dataset(const struct options *o, const char *split, tide_dataset **out)
{
    char err[512];
    int rc;
    if (strcmp(o->dataset, "synthetic") == 0) {
        struct tide_synthetic_options s = {.seed = o->seed};
        if (strcmp(o->model, "resnet") == 0)
            s.height = s.width = 32, s.channels = 3;
        if (strcmp(split, "train") == 0)
            s.count = 60000;
        rc = tide_dataset_open_synthetic(&s, split, out, err, sizeof(err));
    } else {
        rc = tide_dataset_open(o->dataset, o->data_dir, split, out, err, sizeof(err));
    }
    if (rc != 0) {
        fprintf(stderr, "tidectl: dataset %s (%s): %s\n", o->dataset, split, err);
        if (json_mode) {
            printf("{\"error\":{\"code\":\"DATASET\",\"message\":");
            json_string(stdout, err);
            printf(",\"exit\":1}}\n");
        }
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

/* ============================================================================
 * status
 * ========================================================================== */

static void print_jobs_table(const struct tide_job_info *jobs, size_t n)
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
               fmt_bytes(j->device_budget_bytes, b1, sizeof(b1)),
               fmt_bytes(j->device_high_water_bytes, b2, sizeof(b2)),
               fmt_bytes(j->h2d_bytes_total + j->d2h_bytes_total, b3, sizeof(b3)),
               j->steps_per_second);
    }
}

static int cmd_status(const struct command *cmd, struct options *o)
{
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    struct tide_daemon_status s;
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    int rc = EXIT_OK;
    if (tide_client_status(c, &s, &jobs, &n) != 0) {
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    } else if (o->json) {
        printf("{\"version\":");
        json_string(stdout, s.version);
        printf(",\"backend\":");
        json_string(stdout, s.backend);
        printf(",\"device_name\":");
        json_string(stdout, s.device_name);
        printf(",\"device_total_bytes\":%" PRIu64 ",\"device_used_bytes\":%" PRIu64
               ",\"device_reserved_bytes\":%" PRIu64 ",\"host_pool_bytes\":%" PRIu64
               ",\"host_pool_used_bytes\":%" PRIu64 ",\"started_us\":%" PRId64
               ",\"max_job_budget_bytes\":%" PRIu64 ",\"default_job_budget_bytes\":%" PRIu64
               ",\"jobs\":[",
               s.device_total_bytes, s.device_used_bytes, s.device_reserved_bytes,
               s.host_pool_bytes, s.host_pool_used_bytes, s.started_us, s.max_job_budget_bytes,
               s.default_job_budget_bytes);
        for (size_t i = 0; i < n; i++) {
            if (i)
                putchar(',');
            json_job(stdout, &jobs[i]);
        }
        printf("]}");
        json_end_line();
    } else {
        char b1[32], b2[32], b3[32], b4[32], b5[32], t[64];
        printf("tided %s on %s\n", s.version, tide_client_target(c));
        printf("  backend         %s (%s)\n", s.backend, s.device_name);
        printf("  device memory   %s total, %s reserved by jobs, %s in use\n",
               fmt_bytes(s.device_total_bytes, b1, sizeof(b1)),
               fmt_bytes(s.device_reserved_bytes, b2, sizeof(b2)),
               fmt_bytes(s.device_used_bytes, b3, sizeof(b3)));
        if (s.host_pool_bytes)
            printf("  host pool       %s, %s used\n", fmt_bytes(s.host_pool_bytes, b4, sizeof(b4)),
                   fmt_bytes(s.host_pool_used_bytes, b5, sizeof(b5)));
        else
            printf("  host pool       unlimited, %s used\n",
                   fmt_bytes(s.host_pool_used_bytes, b5, sizeof(b5)));
        printf("  job budgets     default %s, max %s\n",
               fmt_bytes(s.default_job_budget_bytes, b1, sizeof(b1)),
               s.max_job_budget_bytes ? fmt_bytes(s.max_job_budget_bytes, b2, sizeof(b2))
                                      : "the device");
        printf("  started         %s\n\n", fmt_time_us(s.started_us, t, sizeof(t)));
        print_jobs_table(jobs, n);
    }
    free(jobs);
    tide_client_free(c);
    return rc;
}

/* ============================================================================
 * plan
 * ========================================================================== */

/* The image shape and classes of the dataset the options name, without reading it. */
static int dataset_shape(const struct options *o, int64_t *c, int64_t *h, int64_t *w,
                         int32_t *classes)
{
    *c = 1, *h = 28, *w = 28, *classes = 10;
    if (strcmp(o->dataset, "synthetic") == 0 && strcmp(o->model, "resnet") == 0)
        *c = 3, *h = 32, *w = 32;
    return EXIT_OK;
}

static void print_plan(const struct tide_job_plan_report *p, bool partitions)
{
    char b1[32], b2[32], b3[32], b4[32];
    printf("  budget          %s\n", fmt_bytes(p->budget_bytes, b1, sizeof(b1)));
    printf("  predicted peak  %s  %s\n", fmt_bytes(p->predicted_peak_bytes, b1, sizeof(b1)),
           p->fits ? "(fits)" : "(DOES NOT FIT)");
    if (!p->fits && p->min_budget_bytes)
        printf("  min budget      %s, set by %s\n", fmt_bytes(p->min_budget_bytes, b1, sizeof(b1)),
               p->min_budget_node);
    if (p->message[0])
        printf("  why             %s\n", p->message);
    printf("  per step        swap in %s, swap out %s, fetch %s, write back %s\n",
           fmt_bytes(p->swap_in_bytes, b1, sizeof(b1)),
           fmt_bytes(p->swap_out_bytes, b2, sizeof(b2)), fmt_bytes(p->fetch_bytes, b3, sizeof(b3)),
           fmt_bytes(p->write_back_bytes, b4, sizeof(b4)));
    printf("  nodes           %" PRIu32 " after the memory passes, in partitions of %" PRIu32
           "; swap threshold %" PRIu32 ", prefetch %" PRIu32 "\n",
           p->nodes, p->partition_size, p->swap_threshold, p->prefetch_distance);
    printf("  host memory     %s\n", fmt_bytes(p->host_bytes, b1, sizeof(b1)));
    printf("  planned in      %.1f ms\n", (double)p->plan_us / 1000.0);
    if (!partitions || p->n_partitions == 0)
        return;
    printf("\n  %5s %6s %11s %11s %11s %11s %11s  %s\n", "PART", "NODES", "RESIDENT", "SWAP-IN",
           "SWAP-OUT", "FETCH", "WRITE-BACK", "PEAK NODE");
    for (uint32_t i = 0; i < p->n_partitions; i++) {
        const struct tide_job_partition_report *q = &p->partitions[i];
        char c1[32], c2[32], c3[32], c4[32], c5[32];
        printf("  %5" PRIu32 " %6" PRIu32 " %11s %11s %11s %11s %11s  %s\n", q->index, q->nodes,
               fmt_bytes(q->resident_bytes, c1, sizeof(c1)),
               fmt_bytes(q->swap_in_bytes, c2, sizeof(c2)),
               fmt_bytes(q->swap_out_bytes, c3, sizeof(c3)),
               fmt_bytes(q->fetch_bytes, c4, sizeof(c4)),
               fmt_bytes(q->write_back_bytes, c5, sizeof(c5)), q->peak_node);
    }
}

static int cmd_plan(const struct command *cmd, struct options *o)
{
    int64_t ch, h, w;
    int32_t classes;
    dataset_shape(o, &ch, &h, &w, &classes);
    struct model m;
    int rc = build_model(o, ch, h, w, classes, &m);
    if (rc != EXIT_OK)
        return rc;
    tide_client *c = connect_daemon(o, &rc);
    if (!c) {
        free(m.graph);
        return rc;
    }
    struct tide_job_spec spec;
    char name[TIDE_JOB_NAME_MAX];
    make_spec(o, &m, name, sizeof(name), &spec);
    struct tide_job_plan_report p;
    if (tide_client_plan(c, &spec, &p) != 0) {
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    } else if (o->json) {
        printf("{\"model\":");
        json_string(stdout, o->model);
        printf(",\"batch\":%" PRId64 ",\"parameters\":%" PRId64 ",\"swap\":\"%s\",", o->batch,
               m.parameters,
               o->swap == TIDE_JOB_SWAP_AUTO ? "auto"
               : o->swap == TIDE_JOB_SWAP_ON ? "on"
                                             : "off");
        json_plan_fields(stdout, &p, true);
        putchar('}');
        json_end_line();
    } else {
        printf("plan of %s (%" PRId64 " parameters), batch %" PRId64 ", swap %s:\n", o->model,
               m.parameters, o->batch,
               o->swap == TIDE_JOB_SWAP_AUTO ? "auto"
               : o->swap == TIDE_JOB_SWAP_ON ? "on"
                                             : "off");
        print_plan(&p, o->partitions);
    }
    tide_job_plan_report_clear(&p);
    free(m.graph);
    tide_client_free(c);
    return rc;
}

/* ============================================================================
 * train
 * ========================================================================== */

static volatile sig_atomic_t interrupts; /* SIGINT/SIGTERM seen */

static void on_signal(int sig)
{
    (void)sig;
    interrupts++;
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* Labels of the batches in flight: results come back in the order batches went out. */
#define RING 4

struct train_state {
    const struct options *o;
    const struct model *m;
    struct tide_job_info job;
    tide_dataset_iter *train_it, *test_it;
    int64_t total_steps;    /* training steps to send */
    int64_t sent_train;     /* training batches sent */
    int64_t sent, received; /* all batches, for the ring */
    int32_t *labels[RING];  /* the labels of batch k are in labels[k % RING] */
    int64_t real[RING];     /* real examples of batch k (eval's last batch is short) */
    bool eval_phase, eval_done;
    /* progress */
    double start_s, last_draw_s, window_start_s;
    int64_t window_start_step;
    double rate;        /* training steps per second, over a recent window */
    int64_t done_train; /* training results received */
    struct tide_step_result last;
    double last_accuracy;
    uint64_t max_high_water;
    uint64_t copy_bytes_total;
    bool tty;
    bool bar_drawn;
    /* evaluation */
    int64_t eval_correct, eval_seen;
    double eval_loss_sum;
    int64_t eval_steps;
};

static int64_t argmax_row(const float *row, int32_t n)
{
    int64_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best])
            best = i;
    return best;
}

/* Counts the correct predictions among the first n rows of the step's logits, or -1. */
static int64_t count_correct(const struct train_state *t, const struct tide_step_result *r,
                             const int32_t *labels, int64_t n)
{
    const struct tide_tensor *logits = tide_step_result_fetch(r, TIDE_MODEL_LOGITS);
    size_t want = (size_t)t->o->batch * (size_t)t->m->classes * sizeof(float);
    if (!logits || logits->dtype != TIDE_DT_FLOAT32 || logits->bytes != want)
        return -1;
    const float *rows = logits->data;
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++)
        correct += argmax_row(rows + i * t->m->classes, t->m->classes) == labels[i];
    return correct;
}

static void draw_progress(struct train_state *t, bool final)
{
    double now = now_s();
    if (!final && now - t->last_draw_s < (t->tty ? 0.1 : 10.0))
        return;
    t->last_draw_s = now;
    const struct tide_step_result *r = &t->last;
    int64_t step = t->done_train;
    double frac = t->total_steps ? (double)step / (double)t->total_steps : 0;
    char bar[32];
    int width = 20, filled = (int)(frac * width + 0.5);
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '=' : ' ';
    if (filled > 0 && filled < width)
        bar[filled - 1] = '>';
    bar[width] = '\0';
    char hw[32], budget[32], eta[32];
    double mb_per_step = (double)(r->h2d_bytes + r->d2h_bytes) / 1e6;
    double left = t->rate > 0 ? (double)(t->total_steps - step) / t->rate : NAN;
    fprintf(stderr,
            "%s[%s] %" PRId64 "/%" PRId64 " loss %.4f acc %.3f | dev %s/%s | swap %.1f MB/step | "
            "%.1f step/s | ETA %s%s",
            t->tty ? "\r\033[K" : "", bar, step, t->total_steps, (double)r->loss, t->last_accuracy,
            fmt_bytes(r->device_high_water_bytes, hw, sizeof(hw)),
            fmt_bytes(t->job.device_budget_bytes, budget, sizeof(budget)), mb_per_step, t->rate,
            fmt_duration(left, eta, sizeof(eta)), t->tty ? "" : "\n");
    t->bar_drawn = t->tty;
    if (final && t->tty) {
        fputc('\n', stderr);
        t->bar_drawn = false;
    }
    fflush(stderr);
}

static int train_feed(void *user, tide_feeds *feeds)
{
    struct train_state *t = user;
    if (interrupts > 1)
        return -1; /* abandon the stream */
    if (interrupts == 1)
        return 0; /* let the steps in flight finish; no evaluation either */
    int32_t *labels = t->labels[t->sent % RING];
    int64_t label_dims[1] = {t->o->batch};
    float *images;
    if (!t->eval_phase && t->sent_train >= t->total_steps) {
        if (t->o->no_eval || !t->test_it)
            return 0;
        t->eval_phase = true;
    }
    images = tide_feeds_buffer(feeds, TIDE_MODEL_IMAGES, TIDE_DT_FLOAT32, t->m->image_rank,
                               t->m->image_dims);
    if (!images)
        return -1;
    int64_t n;
    if (!t->eval_phase) {
        n = tide_dataset_iter_next(t->train_it, images, labels);
        if (n == 0) /* a new epoch */
            n = tide_dataset_iter_next(t->train_it, images, labels);
        t->sent_train++;
    } else {
        n = tide_dataset_iter_next(t->test_it, images, labels);
        if (n <= 0) {
            t->eval_done = true;
            return 0;
        }
        tide_feeds_set_eval_only(feeds, true);
    }
    if (n <= 0)
        return -1;
    if (tide_feeds_set(feeds, TIDE_MODEL_LABELS, TIDE_DT_INT32, 1, label_dims, labels) != 0)
        return -1;
    t->real[t->sent % RING] = n;
    t->sent++;
    return 1;
}

static int train_step(void *user, const struct tide_step_result *r)
{
    struct train_state *t = user;
    int64_t k = t->received++;
    const int32_t *labels = t->labels[k % RING];
    int64_t n = t->real[k % RING];
    int64_t correct = count_correct(t, r, labels, n);
    if (r->eval_only) {
        t->eval_steps++;
        t->eval_loss_sum += (double)r->loss * (double)n;
        if (correct >= 0) {
            t->eval_correct += correct;
            t->eval_seen += n;
        }
    } else {
        t->done_train++;
        t->last = *r;
        t->last.fetches = NULL;
        t->last.n_fetches = 0;
        t->last_accuracy = correct >= 0 && n > 0 ? (double)correct / (double)n : NAN;
        if (r->device_high_water_bytes > t->max_high_water)
            t->max_high_water = r->device_high_water_bytes;
        t->copy_bytes_total += r->h2d_bytes + r->d2h_bytes;
        /*
         * Steps per second over a window of the last few seconds, so that
         * the rate follows changes (another job starting) without jitter.
         */
        double now = now_s();
        double dt = now - t->window_start_s;
        if (dt > 0 && (dt >= 0.5 || t->rate == 0) && t->done_train > t->window_start_step)
            t->rate = (double)(t->done_train - t->window_start_step) / dt;
        if (dt >= 5.0) {
            t->window_start_s = now;
            t->window_start_step = t->done_train;
        }
    }
    if (t->o->json) {
        printf("{\"event\":\"step\",\"job\":");
        json_string(stdout, t->job.id);
        printf(",\"result\":");
        json_step(stdout, r);
        printf(",\"batch_accuracy\":");
        json_double(stdout, correct >= 0 && n > 0 ? (double)correct / (double)n : NAN);
        putchar('}');
        json_end_line();
    }
    if (!r->eval_only && (t->tty || !t->o->json))
        draw_progress(t, t->done_train == t->total_steps);
    if (r->eval_only && t->tty && !t->o->json) {
        fprintf(stderr, "\r\033[Kevaluating: %" PRId64 " test batches", t->eval_steps);
        fflush(stderr);
    }
    return 0;
}

static int cmd_train(const struct command *cmd, struct options *o)
{
    tide_dataset *train = NULL, *test = NULL;
    int rc = open_dataset(o, "train", &train);
    if (rc == EXIT_OK && !o->no_eval)
        rc = open_dataset(o, "test", &test);
    if (rc != EXIT_OK) {
        tide_dataset_free(train);
        return rc;
    }
    struct model m;
    rc = build_model(o, tide_dataset_channels(train), tide_dataset_height(train),
                     tide_dataset_width(train), tide_dataset_classes(train), &m);
    if (rc != EXIT_OK) {
        tide_dataset_free(train);
        tide_dataset_free(test);
        return rc;
    }
    struct train_state t;
    memset(&t, 0, sizeof(t));
    t.o = o;
    t.m = &m;
    t.tty = isatty(STDERR_FILENO);
    char err[512];
    int64_t per_epoch = tide_dataset_count(train) / o->batch;
    if (per_epoch < 1) {
        rc = usage_error(cmd->name,
                         "--batch %" PRId64 " is larger than the dataset (%" PRId64 " examples)",
                         o->batch, tide_dataset_count(train));
        goto out;
    }
    t.total_steps = o->steps ? o->steps : (o->epochs ? o->epochs : 1) * per_epoch;
    if (tide_dataset_iter_new(train, o->batch, o->seed, TIDE_DATASET_SHUFFLE, &t.train_it, err,
                              sizeof(err)) != 0 ||
        (test && tide_dataset_iter_new(test, o->batch, 0, TIDE_DATASET_KEEP_LAST, &t.test_it, err,
                                       sizeof(err)) != 0)) {
        fprintf(stderr, "tidectl: train: %s\n", err);
        rc = EXIT_RUNTIME;
        goto out;
    }
    for (int i = 0; i < RING; i++) {
        t.labels[i] = calloc((size_t)o->batch, sizeof(int32_t));
        if (!t.labels[i]) {
            fprintf(stderr, "tidectl: out of memory\n");
            rc = EXIT_RUNTIME;
            goto out;
        }
    }

    tide_client *c = connect_daemon(o, &rc);
    if (!c)
        goto out;
    struct tide_job_spec spec;
    char name[TIDE_JOB_NAME_MAX];
    make_spec(o, &m, name, sizeof(name), &spec);
    if (tide_client_submit(c, &spec, &t.job) != 0) {
        rc = client_error(c, "train: submit", EXIT_RUNTIME);
        tide_client_free(c);
        goto out;
    }
    char b1[32], b2[32], b3[32], b4[32];
    if (o->json) {
        printf("{\"event\":\"submitted\",\"job\":");
        json_job(stdout, &t.job);
        printf(",\"model\":");
        json_string(stdout, o->model);
        printf(",\"parameters\":%" PRId64 ",\"batch\":%" PRId64 ",\"total_steps\":%" PRId64 "}",
               m.parameters, o->batch, t.total_steps);
        json_end_line();
    }
    if (!o->json || t.tty) {
        fprintf(stderr,
                "job %s: %s, %" PRId64 " parameters, batch %" PRId64 ", %" PRId64 " steps on %s\n",
                t.job.id, o->model, m.parameters, o->batch, t.total_steps, o->dataset);
        if (t.job.has_plan)
            fprintf(stderr,
                    "plan: budget %s, predicted peak %s, per step swap %s in / %s out, "
                    "%" PRIu32 " nodes\n",
                    fmt_bytes(t.job.plan.budget_bytes, b1, sizeof(b1)),
                    fmt_bytes(t.job.plan.predicted_peak_bytes, b2, sizeof(b2)),
                    fmt_bytes(t.job.plan.swap_in_bytes, b3, sizeof(b3)),
                    fmt_bytes(t.job.plan.swap_out_bytes, b4, sizeof(b4)), t.job.plan.nodes);
    }

    install_signals();
    t.start_s = t.window_start_s = now_s();
    int code = tide_client_train(c, t.job.id, train_feed, train_step, &t);
    double elapsed = now_s() - t.start_s;
    if (t.bar_drawn)
        fputc('\n', stderr);
    if (code != 0) {
        rc = client_error(c, "train", EXIT_RUNTIME);
        tide_client_free(c);
        goto out;
    }
    double test_accuracy = t.eval_seen ? (double)t.eval_correct / (double)t.eval_seen : NAN;
    double test_loss = t.eval_seen ? t.eval_loss_sum / (double)t.eval_seen : NAN;
    struct tide_job_info after;
    bool have_after = tide_client_get(c, t.job.id, &after) == 0;
    if (o->json) {
        printf("{\"event\":\"done\",\"job\":");
        json_string(stdout, t.job.id);
        printf(",\"steps\":%" PRId64 ",\"interrupted\":%s,\"seconds\":", t.done_train,
               interrupts ? "true" : "false");
        json_double(stdout, elapsed);
        printf(",\"final_loss\":");
        json_double(stdout, t.done_train ? (double)t.last.loss : NAN);
        printf(",\"test_examples\":%" PRId64 ",\"test_accuracy\":", t.eval_seen);
        json_double(stdout, test_accuracy);
        printf(",\"test_loss\":");
        json_double(stdout, test_loss);
        printf(",\"device_high_water_bytes\":%" PRIu64 ",\"copy_bytes_total\":%" PRIu64,
               t.max_high_water, t.copy_bytes_total);
        if (have_after) {
            printf(",\"state\":");
            json_string(stdout, tide_job_state_name(after.state));
        }
        putchar('}');
        json_end_line();
    } else {
        if (t.eval_steps && t.tty)
            fputc('\n', stderr);
        printf("job %s: %" PRId64 " steps in %s%s, final loss %.4f\n", t.job.id, t.done_train,
               fmt_duration(elapsed, b1, sizeof(b1)), interrupts ? " (interrupted)" : "",
               (double)t.last.loss);
        printf("device memory high water %s of a %s budget; %.1f MB copied host<->device per "
               "step\n",
               fmt_bytes(t.max_high_water, b2, sizeof(b2)),
               fmt_bytes(t.job.device_budget_bytes, b3, sizeof(b3)),
               t.done_train ? (double)t.copy_bytes_total / 1e6 / (double)t.done_train : 0.0);
        if (t.eval_seen)
            printf("test accuracy %.4f (%" PRId64 " examples), test loss %.4f\n", test_accuracy,
                   t.eval_seen, test_loss);
    }
    tide_client_free(c);
out:
    for (int i = 0; i < RING; i++)
        free(t.labels[i]);
    tide_dataset_iter_free(t.train_it);
    tide_dataset_iter_free(t.test_it);
    tide_dataset_free(train);
    tide_dataset_free(test);
    free(m.graph);
    return rc;
}

/* ============================================================================
 * jobs, get, cancel, checkpoint
 * ========================================================================== */

static int cmd_jobs(const struct command *cmd, struct options *o)
{
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    struct tide_job_info *jobs;
    size_t n;
    int rc = EXIT_OK;
    if (tide_client_list(c, o->all, &jobs, &n) != 0) {
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    } else if (o->json) {
        for (size_t i = 0; i < n; i++) {
            json_job(stdout, &jobs[i]);
            json_end_line();
        }
        free(jobs);
    } else {
        print_jobs_table(jobs, n);
        free(jobs);
    }
    tide_client_free(c);
    return rc;
}

static void print_job(const struct tide_job_info *j)
{
    char b1[32], b2[32], t1[64], t2[64];
    printf("job %s\n", j->id);
    printf("  name              %s\n", j->name);
    printf("  owner uid         %" PRIu32 "\n", j->owner_uid);
    printf("  state             %s%s%s\n", tide_job_state_name(j->state), j->message[0] ? ": " : "",
           j->message);
    printf("  steps             %" PRIu64 " (last checkpoint at step %" PRIu64 ")\n", j->steps,
           j->last_checkpoint_step);
    printf("  last loss         %.6f\n", (double)j->last_loss);
    printf("  device memory     %s high water of a %s budget\n",
           fmt_bytes(j->device_high_water_bytes, b1, sizeof(b1)),
           fmt_bytes(j->device_budget_bytes, b2, sizeof(b2)));
    printf("  host memory       %s\n", fmt_bytes(j->host_bytes, b1, sizeof(b1)));
    printf("  copied so far     %s host to device, %s device to host\n",
           fmt_bytes(j->h2d_bytes_total, b1, sizeof(b1)),
           fmt_bytes(j->d2h_bytes_total, b2, sizeof(b2)));
    printf("  step rate         %.2f steps/s\n", j->steps_per_second);
    printf("  created, updated  %s, %s\n", fmt_time_us(j->created_us, t1, sizeof(t1)),
           fmt_time_us(j->updated_us, t2, sizeof(t2)));
    if (j->has_plan) {
        printf("plan\n");
        print_plan(&j->plan, false);
    }
}

static int cmd_get(const struct command *cmd, struct options *o)
{
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    struct tide_job_info j;
    int rc = EXIT_OK;
    if (tide_client_get(c, o->args[0], &j) != 0) {
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    } else if (o->json) {
        json_job(stdout, &j);
        json_end_line();
    } else {
        print_job(&j);
    }
    tide_client_free(c);
    return rc;
}

static int cmd_cancel(const struct command *cmd, struct options *o)
{
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    struct tide_job_info j;
    int rc = EXIT_OK;
    if (tide_client_cancel(c, o->args[0], &j) != 0) {
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    } else if (o->json) {
        json_job(stdout, &j);
        json_end_line();
    } else {
        printf("job %s: %s after %" PRIu64 " steps\n", j.id, tide_job_state_name(j.state), j.steps);
    }
    tide_client_free(c);
    return rc;
}

static int cmd_checkpoint(const struct command *cmd, struct options *o)
{
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    struct tide_checkpoint_info k;
    int rc = EXIT_OK;
    if (tide_client_checkpoint(c, o->args[0], &k) != 0) {
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    } else if (o->json) {
        printf("{\"job\":");
        json_string(stdout, o->args[0]);
        printf(",\"step\":%" PRIu64 ",\"path\":", k.step);
        json_string(stdout, k.path);
        printf(",\"bytes\":%" PRIu64 "}", k.bytes);
        json_end_line();
    } else {
        char b[32];
        printf("job %s: checkpoint of step %" PRIu64 " written to %s (%s)\n", o->args[0], k.step,
               k.path, fmt_bytes(k.bytes, b, sizeof(b)));
    }
    tide_client_free(c);
    return rc;
}

/* ============================================================================
 * watch
 * ========================================================================== */

static const char *event_kind_name(enum tide_event_kind kind)
{
    switch (kind) {
    case TIDE_EVENT_STATE:
        return "state";
    case TIDE_EVENT_STEP:
        return "step";
    case TIDE_EVENT_CHECKPOINT:
        return "checkpoint";
    case TIDE_EVENT_LOG:
        return "log";
    }
    return "unknown";
}

static int watch_event(void *user, const struct tide_job_event *e)
{
    const struct options *o = user;
    if (o->json) {
        printf("{\"event\":");
        json_string(stdout, event_kind_name(e->kind));
        printf(",\"time_us\":%" PRId64 ",\"message\":", e->time_us);
        json_string(stdout, e->message);
        printf(",\"job\":");
        json_job(stdout, e->job);
        if (e->step) {
            printf(",\"step\":");
            json_step(stdout, e->step);
        }
        putchar('}');
        json_end_line();
        return 0;
    }
    char t[64], b1[32];
    fmt_time_us(e->time_us, t, sizeof(t));
    switch (e->kind) {
    case TIDE_EVENT_STEP:
        if (e->step)
            printf("%s %s step %" PRIu64 "%s loss %.4f dev %s swap %.1f MB %.1f ms\n", t,
                   e->job->id, e->step->step, e->step->eval_only ? " (eval)" : "",
                   (double)e->step->loss,
                   fmt_bytes(e->step->device_high_water_bytes, b1, sizeof(b1)),
                   (double)(e->step->h2d_bytes + e->step->d2h_bytes) / 1e6,
                   (double)e->step->step_us / 1000.0);
        break;
    case TIDE_EVENT_STATE:
        printf("%s %s state %s%s%s\n", t, e->job->id, tide_job_state_name(e->job->state),
               e->message[0] ? ": " : "", e->message);
        break;
    case TIDE_EVENT_CHECKPOINT:
        printf("%s %s checkpoint at step %" PRIu64 "%s%s\n", t, e->job->id,
               e->job->last_checkpoint_step, e->message[0] ? ": " : "", e->message);
        break;
    default:
        printf("%s %s %s\n", t, e->job->id, e->message);
        break;
    }
    fflush(stdout);
    return 0;
}

static int cmd_watch(const struct command *cmd, struct options *o)
{
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    int rc = EXIT_OK;
    if (tide_client_watch(c, o->n_args ? o->args[0] : NULL, o->stride, watch_event, o) != 0)
        rc = client_error(c, cmd->name, EXIT_RUNTIME);
    tide_client_free(c);
    return rc;
}

/* ============================================================================
 * top
 * ========================================================================== */

/* What one frame remembers of a job, to show rates over the next one. */
struct top_sample {
    char id[TIDE_JOB_ID_MAX];
    uint64_t steps;
    uint64_t copy_bytes;
};

struct top_state {
    struct top_sample *prev;
    size_t n_prev;
    double prev_s;
};

static const struct top_sample *top_find(const struct top_state *s, const char *id)
{
    for (size_t i = 0; i < s->n_prev; i++)
        if (strcmp(s->prev[i].id, id) == 0)
            return &s->prev[i];
    return NULL;
}

/* Draws one frame; returns 0 or an exit code. */
static int top_frame(tide_client *c, const struct options *o, struct top_state *s, bool clear)
{
    struct tide_daemon_status st;
    struct tide_job_info *jobs = NULL;
    size_t n = 0;
    if (tide_client_status(c, &st, &jobs, &n) != 0)
        return client_error(c, "top", EXIT_RUNTIME);
    double now = now_s();
    double dt = s->prev ? now - s->prev_s : 0;
    if (o->json) {
        printf("{\"time_us\":%" PRId64 ",\"backend\":", (int64_t)time(NULL) * 1000000);
        json_string(stdout, st.backend);
        printf(",\"device_total_bytes\":%" PRIu64 ",\"device_used_bytes\":%" PRIu64
               ",\"device_reserved_bytes\":%" PRIu64 ",\"jobs\":[",
               st.device_total_bytes, st.device_used_bytes, st.device_reserved_bytes);
    } else {
        char b1[32], b2[32], b3[32];
        if (clear)
            fputs("\033[H\033[2J", stdout);
        printf("tided %s  %s (%s)  device %s: %s reserved, %s in use  %zu job%s\n", st.version,
               st.backend, st.device_name, fmt_bytes(st.device_total_bytes, b1, sizeof(b1)),
               fmt_bytes(st.device_reserved_bytes, b2, sizeof(b2)),
               fmt_bytes(st.device_used_bytes, b3, sizeof(b3)), n, n == 1 ? "" : "s");
        printf("\n%-20s %-16s %6s %-10s %8s %7s %9s %21s %12s %10s\n", "ID", "NAME", "OWNER",
               "STATE", "STEPS", "STEP/S", "LOSS", "DEVICE (HW/BUDGET)", "SWAP MB/STEP",
               "SWAP MB/S");
    }
    struct top_sample *next = n ? calloc(n, sizeof(*next)) : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct tide_job_info *j = &jobs[i];
        uint64_t copies = j->h2d_bytes_total + j->d2h_bytes_total;
        const struct top_sample *p = top_find(s, j->id);
        double rate = j->steps_per_second, per_step = NAN, per_s = NAN;
        if (p && dt > 0 && j->steps >= p->steps && copies >= p->copy_bytes) {
            uint64_t ds = j->steps - p->steps;
            rate = (double)ds / dt;
            per_s = (double)(copies - p->copy_bytes) / 1e6 / dt;
            if (ds)
                per_step = (double)(copies - p->copy_bytes) / 1e6 / (double)ds;
        } else if (j->steps) {
            per_step = (double)copies / 1e6 / (double)j->steps;
        }
        if (next) {
            snprintf(next[i].id, sizeof(next[i].id), "%s", j->id);
            next[i].steps = j->steps;
            next[i].copy_bytes = copies;
        }
        if (o->json) {
            if (i)
                putchar(',');
            printf("{\"job\":");
            json_job(stdout, j);
            printf(",\"step_rate\":");
            json_double(stdout, rate);
            printf(",\"swap_mb_per_step\":");
            json_double(stdout, per_step);
            printf(",\"swap_mb_per_second\":");
            json_double(stdout, per_s);
            putchar('}');
        } else {
            char b1[32], b2[32], dev[48], c1[16], c2[16];
            snprintf(dev, sizeof(dev), "%s/%s",
                     fmt_bytes(j->device_high_water_bytes, b1, sizeof(b1)),
                     fmt_bytes(j->device_budget_bytes, b2, sizeof(b2)));
            if (isfinite(per_step))
                snprintf(c1, sizeof(c1), "%.1f", per_step);
            else
                snprintf(c1, sizeof(c1), "-");
            if (isfinite(per_s))
                snprintf(c2, sizeof(c2), "%.1f", per_s);
            else
                snprintf(c2, sizeof(c2), "-");
            printf("%-20s %-16.16s %6" PRIu32 " %-10s %8" PRIu64 " %7.2f %9.4f %21s %12s %10s\n",
                   j->id, j->name, j->owner_uid, tide_job_state_name(j->state), j->steps, rate,
                   (double)j->last_loss, dev, c1, c2);
        }
    }
    if (o->json) {
        printf("]}");
        json_end_line();
    } else {
        if (!o->once)
            printf("\nq or Ctrl-C quits; refreshed every %.1f s\n", o->interval_s);
        fflush(stdout);
    }
    free(s->prev);
    s->prev = next;
    s->n_prev = next ? n : 0;
    s->prev_s = now;
    free(jobs);
    return EXIT_OK;
}

static int cmd_top(const struct command *cmd, struct options *o)
{
    (void)cmd;
    int connect_rc;
    tide_client *c = connect_daemon(o, &connect_rc);
    if (!c)
        return connect_rc;
    struct top_state s = {0};
    int rc;
    if (o->once) {
        rc = top_frame(c, o, &s, false);
        free(s.prev);
        tide_client_free(c);
        return rc;
    }
    bool raw = isatty(STDIN_FILENO);
    struct termios saved, t;
    if (raw && tcgetattr(STDIN_FILENO, &saved) == 0) {
        t = saved;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &t);
    } else {
        raw = false;
    }
    install_signals();
    bool clear = isatty(STDOUT_FILENO) && !o->json;
    for (;;) {
        rc = top_frame(c, o, &s, clear);
        if (rc != EXIT_OK || interrupts)
            break;
        double until = now_s() + o->interval_s;
        bool quit = false;
        while (!quit && !interrupts) {
            double left = until - now_s();
            if (left <= 0)
                break;
            struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
            int r = poll(&p, raw ? 1 : 0, (int)(left * 1000) + 1);
            if (r > 0 && (p.revents & POLLIN)) {
                char ch;
                if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                    quit = true;
            }
        }
        if (quit || interrupts)
            break;
    }
    if (raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    free(s.prev);
    tide_client_free(c);
    return rc;
}

/* ============================================================================
 * help
 * ========================================================================== */

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int cmd_help(const struct command *cmd, struct options *o)
{
    (void)cmd;
    if (o->n_args == 0) {
        usage_main(stdout);
        return EXIT_OK;
    }
    const struct command *which = find_command(o->args[0]);
    if (!which)
        return usage_error(NULL, "no command \"%s\"", o->args[0]);
    usage_command(stdout, which);
    return EXIT_OK;
}

/* ============================================================================
 * Parsing
 * ========================================================================== */

static bool accepts(const int *list, int id)
{
    for (; *list; list++)
        if (*list == id)
            return true;
    return false;
}

static const char *option_name(int id)
{
    for (const struct option *p = long_options; p->name; p++)
        if (p->val == id)
            return p->name;
    return "?";
}

/* The command named in argv: the first argument that is not an option or an option's value. */
static const struct command *scan_command(int argc, char **argv, int *index)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0)
            break;
        if (a[0] == '-' && a[1]) {
            if (a[1] == '-' && !strchr(a, '=')) {
                for (const struct option *p = long_options; p->name; p++)
                    if (strcmp(a + 2, p->name) == 0 && p->has_arg == required_argument)
                        i++;
            }
            continue;
        }
        *index = i;
        return find_command(a);
    }
    *index = -1;
    return NULL;
}

static int parse_enum(const char *cmd, const char *flag, const char *value,
                      const char *const *choices, int *out)
{
    for (int i = 0; choices[i]; i++) {
        if (strcmp(value, choices[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char list[128] = "";
    for (int i = 0; choices[i]; i++) {
        strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
    }
    usage_error(cmd, "--%s must be one of %s, got \"%s\"", flag, list, value);
    return -1;
}

static int parse_options(int argc, char **argv, const struct command *cmd, struct options *o)
{
    const char *name = cmd ? cmd->name : NULL;
    int64_t v;
    uint64_t u;
    int e;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1) {
        if (c == '?')
            return usage_error(name, "unknown option \"%s\"", argv[optind - 1]);
        if (c == ':')
            return usage_error(name, "option \"%s\" needs a value", argv[optind - 1]);
        if (!accepts(global_options, c) && !(cmd && accepts(cmd->accepts, c)))
            return usage_error(name, "option --%s does not apply to %s", option_name(c),
                               cmd ? cmd->name : "tidectl without a command");
        switch (c) {
        case OPT_HELP:
            if (cmd)
                usage_command(stdout, cmd);
            else
                usage_main(stdout);
            exit(EXIT_OK);
        case OPT_VERSION:
            printf("tidectl %s\n", TIDECTL_VERSION);
            exit(EXIT_OK);
        case OPT_SOCKET:
            o->socket = optarg;
            o->socket_given = true;
            break;
        case OPT_CONNECT:
            o->connect = optarg;
            break;
        case OPT_TOKEN:
            o->token = optarg;
            break;
        case OPT_CA:
            o->ca = optarg;
            break;
        case OPT_SERVER_NAME:
            o->server_name = optarg;
            break;
        case OPT_JSON:
            o->json = true;
            break;
        case OPT_TIMEOUT:
            if (parse_double(optarg, 0, &o->timeout_s) || o->timeout_s > 86400)
                return usage_error(name, "--timeout wants seconds (0 to 86400), got \"%s\"",
                                   optarg);
            break;
        case OPT_MODEL: {
            static const char *const models[] = {"mlp", "cnn", "resnet", NULL};
            if (parse_enum(name, "model", optarg, models, &e))
                return EXIT_USAGE;
            o->model = models[e];
            break;
        }
        case OPT_DEPTH:
            if (parse_int(optarg, 35, 3 * (10 + 1000) + 2, &v) || (v - 2) % 3 != 0)
                return usage_error(name,
                                   "--depth must be 3*(10+n)+2 for n >= 1 (35, 38, 41, "
                                   "..., 50 for ResNet-50), got \"%s\"",
                                   optarg);
            o->depth = (int32_t)v;
            break;
        case OPT_WIDTH:
            if (parse_int(optarg, 1, 4096, &o->width))
                return usage_error(name, "--width wants 1 to 4096, got \"%s\"", optarg);
            break;
        case OPT_DATASET: {
            static const char *const sets[] = {"fashion-mnist", "synthetic", NULL};
            if (parse_enum(name, "dataset", optarg, sets, &e))
                return EXIT_USAGE;
            o->dataset = sets[e];
            break;
        }
        case OPT_DATA_DIR:
            o->data_dir = optarg;
            break;
        case OPT_BATCH:
            if (parse_int(optarg, 1, 1 << 20, &o->batch))
                return usage_error(name, "--batch wants 1 to 1048576, got \"%s\"", optarg);
            break;
        case OPT_BUDGET:
            if (parse_bytes(optarg, &o->budget) || o->budget == 0)
                return usage_error(name, "--budget wants bytes (e.g. 512M, 2G), got \"%s\"",
                                   optarg);
            break;
        case OPT_SWAP: {
            static const char *const modes[] = {"auto", "on", "off", NULL};
            if (parse_enum(name, "swap", optarg, modes, &e))
                return EXIT_USAGE;
            o->swap = (enum tide_job_swap)e; /* the same order as tide_job_swap */
            break;
        }
        case OPT_PARTITION_SIZE:
            if (parse_int(optarg, 1, UINT32_MAX, &v))
                return usage_error(name, "--partition-size wants a positive count, got \"%s\"",
                                   optarg);
            o->partition_size = (uint32_t)v;
            break;
        case OPT_VARS_HOME: {
            static const char *const homes[] = {"auto", "host", "device", NULL};
            if (parse_enum(name, "vars-home", optarg, homes, &e))
                return EXIT_USAGE;
            o->vars_home = (enum tide_job_vars_home)e;
            break;
        }
        case OPT_OPTIMIZER: {
            static const char *const opts[] = {"sgd", "momentum", "adam", NULL};
            if (parse_enum(name, "optimizer", optarg, opts, &e))
                return EXIT_USAGE;
            o->optimizer = (enum tide_job_optimizer)e;
            break;
        }
        case OPT_LR:
            if (parse_double(optarg, 0, &o->lr))
                return usage_error(name, "--lr wants a positive number, got \"%s\"", optarg);
            break;
        case OPT_SEED:
            if (parse_bytes(optarg, &u) || strpbrk(optarg, "KkMmGgTtBb."))
                return usage_error(name, "--seed wants a non-negative integer, got \"%s\"", optarg);
            o->seed = u;
            break;
        case OPT_NAME:
            o->name = optarg;
            break;
        case OPT_STEPS:
            if (parse_int(optarg, 1, INT64_C(1) << 40, &o->steps))
                return usage_error(name, "--steps wants a positive count, got \"%s\"", optarg);
            break;
        case OPT_EPOCHS:
            if (parse_int(optarg, 1, 1 << 20, &o->epochs))
                return usage_error(name, "--epochs wants a positive count, got \"%s\"", optarg);
            break;
        case OPT_CHECKPOINT_EVERY:
            if (parse_int(optarg, 1, INT64_C(1) << 40, &v))
                return usage_error(name, "--checkpoint-every wants a positive count, got \"%s\"",
                                   optarg);
            o->checkpoint_every = (uint64_t)v;
            break;
        case OPT_RESUME:
            o->resume = optarg;
            break;
        case OPT_NO_EVAL:
            o->no_eval = true;
            break;
        case OPT_PARTITIONS:
            o->partitions = true;
            break;
        case OPT_ALL:
            o->all = true;
            break;
        case OPT_STRIDE:
            if (parse_int(optarg, 1, UINT32_MAX, &v))
                return usage_error(name, "--stride wants a positive count, got \"%s\"", optarg);
            o->stride = (uint32_t)v;
            break;
        case OPT_ONCE:
            o->once = true;
            break;
        case OPT_INTERVAL:
            if (parse_double(optarg, 0.05, &o->interval_s) || o->interval_s > 3600)
                return usage_error(name, "--interval wants seconds (0.05 to 3600), got \"%s\"",
                                   optarg);
            break;
        default:
            return usage_error(name, "unhandled option");
        }
    }
    if (o->connect && o->socket_given)
        return usage_error(name, "--socket and --connect exclude each other");
    if (!o->connect && (o->ca || o->server_name))
        return usage_error(name, "--ca and --server-name need --connect");
    if (o->steps && o->epochs)
        return usage_error(name, "--steps and --epochs exclude each other");
    if (o->depth && strcmp(o->model, "resnet") != 0)
        return usage_error(name, "--depth applies to --model resnet only");
    /* Positional arguments: the command itself first. */
    o->args = argv + optind;
    o->n_args = argc - optind;
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    struct options o = {
        .socket = getenv("TIDE_SOCKET") && *getenv("TIDE_SOCKET") ? getenv("TIDE_SOCKET")
                                                                  : DEFAULT_SOCKET,
        .token = getenv("TIDE_TOKEN") && *getenv("TIDE_TOKEN") ? getenv("TIDE_TOKEN") : NULL,
        .timeout_s = 120,
        .model = "cnn",
        .width = 16,
        .dataset = "fashion-mnist",
        .batch = 64,
        .swap = TIDE_JOB_SWAP_AUTO,
        .vars_home = TIDE_JOB_VARS_HOME_AUTO,
        .optimizer = TIDE_JOB_OPTIMIZER_MOMENTUM,
        .seed = 1,
        .stride = 1,
        .interval_s = 1,
    };
    /*
     * gRPC logs transport failures (a TLS handshake, a refused connection)
     * to stderr by itself; tidectl reports them in its own words. Set
     * GRPC_VERBOSITY to see them anyway.
     */
    setenv("GRPC_VERBOSITY", "NONE", 0);
    int index;
    const struct command *cmd = scan_command(argc, argv, &index);
    if (!cmd && index >= 0) {
        fprintf(stderr, "tidectl: no command \"%s\" (see tidectl --help)\n", argv[index]);
        return EXIT_USAGE;
    }
    int rc = parse_options(argc, argv, cmd, &o);
    if (rc != EXIT_OK)
        return rc;
    json_mode = o.json;
    if (!cmd) {
        usage_main(stderr);
        return EXIT_USAGE;
    }
    /* Drop the command word from the positional arguments. */
    if (o.n_args == 0 || strcmp(o.args[0], cmd->name) != 0)
        return usage_error(cmd->name, "the command must come before its arguments");
    o.args++;
    o.n_args--;
    if (o.n_args < cmd->min_args)
        return usage_error(cmd->name, "missing argument: tidectl %s", cmd->synopsis);
    if (o.n_args > cmd->max_args)
        return usage_error(cmd->name, "unexpected argument \"%s\"", o.args[cmd->max_args]);
    if (strcmp(o.model, "resnet") == 0 && o.depth == 0)
        o.depth = 38;
    return cmd->run(cmd, &o);
}
