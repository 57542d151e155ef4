/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/options.c: tidectl's command line. Every long option of
 * every command is in one table; tidectl_parse_options() reads the whole
 * command line in one pass (global and command options may come in any
 * order), refuses an option the command does not accept, and checks each
 * value where it is read: counts, seconds, byte sizes with K/M/G/T
 * suffixes, and the named choices (--model, --swap, ...). A bad value is a
 * usage error (exit 2) that names the option and what it wants.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide/onnx.h"
#include "tidectl.h"

/* Every option of tidectl; getopt_long() returns the enum tidectl_option_id of each. */
static const struct option long_options[] = {
    {"help", no_argument, 0, TIDECTL_OPT_HELP},
    {"socket", required_argument, 0, TIDECTL_OPT_SOCKET},
    {"connect", required_argument, 0, TIDECTL_OPT_CONNECT},
    {"token", required_argument, 0, TIDECTL_OPT_TOKEN},
    {"ca", required_argument, 0, TIDECTL_OPT_CA},
    {"server-name", required_argument, 0, TIDECTL_OPT_SERVER_NAME},
    {"json", no_argument, 0, TIDECTL_OPT_JSON},
    {"timeout", required_argument, 0, TIDECTL_OPT_TIMEOUT},
    {"version", no_argument, 0, TIDECTL_OPT_VERSION},
    {"model", required_argument, 0, TIDECTL_OPT_MODEL},
    {"depth", required_argument, 0, TIDECTL_OPT_DEPTH},
    {"width", required_argument, 0, TIDECTL_OPT_WIDTH},
    {"dataset", required_argument, 0, TIDECTL_OPT_DATASET},
    {"data-dir", required_argument, 0, TIDECTL_OPT_DATA_DIR},
    {"batch", required_argument, 0, TIDECTL_OPT_BATCH},
    {"budget", required_argument, 0, TIDECTL_OPT_BUDGET},
    {"swap", required_argument, 0, TIDECTL_OPT_SWAP},
    {"partition-size", required_argument, 0, TIDECTL_OPT_PARTITION_SIZE},
    {"vars-home", required_argument, 0, TIDECTL_OPT_VARS_HOME},
    {"policy", required_argument, 0, TIDECTL_OPT_POLICY},
    {"optimizer", required_argument, 0, TIDECTL_OPT_OPTIMIZER},
    {"lr", required_argument, 0, TIDECTL_OPT_LR},
    {"seed", required_argument, 0, TIDECTL_OPT_SEED},
    {"name", required_argument, 0, TIDECTL_OPT_NAME},
    {"d-model", required_argument, 0, TIDECTL_OPT_D_MODEL},
    {"heads", required_argument, 0, TIDECTL_OPT_HEADS},
    {"vocab", required_argument, 0, TIDECTL_OPT_VOCAB},
    {"experts", required_argument, 0, TIDECTL_OPT_EXPERTS},
    {"capacity-factor", required_argument, 0, TIDECTL_OPT_CAPACITY_FACTOR},
    {"dropout", required_argument, 0, TIDECTL_OPT_DROPOUT},
    {"steps", required_argument, 0, TIDECTL_OPT_STEPS},
    {"epochs", required_argument, 0, TIDECTL_OPT_EPOCHS},
    {"checkpoint-every", required_argument, 0, TIDECTL_OPT_CHECKPOINT_EVERY},
    {"priority", required_argument, 0, TIDECTL_OPT_PRIORITY},
    {"resume", required_argument, 0, TIDECTL_OPT_RESUME},
    {"no-eval", no_argument, 0, TIDECTL_OPT_NO_EVAL},
    {"keep", no_argument, 0, TIDECTL_OPT_KEEP},
    {"device", required_argument, 0, TIDECTL_OPT_DEVICE},
    {"partitions", no_argument, 0, TIDECTL_OPT_PARTITIONS},
    {"svg", required_argument, 0, TIDECTL_OPT_SVG},
    {"device-profile", required_argument, 0, TIDECTL_OPT_DEVICE_PROFILE},
    {"math", required_argument, 0, TIDECTL_OPT_MATH},
    {"all", no_argument, 0, TIDECTL_OPT_ALL},
    {"stride", required_argument, 0, TIDECTL_OPT_STRIDE},
    {"once", no_argument, 0, TIDECTL_OPT_ONCE},
    {"interval", required_argument, 0, TIDECTL_OPT_INTERVAL},
    {"output", required_argument, 0, TIDECTL_OPT_OUTPUT},
    /* sequence models */
    {"seq-len", required_argument, 0, TIDECTL_OPT_SEQ_LEN},
    {"hidden", required_argument, 0, TIDECTL_OPT_HIDDEN},
    {"layers", required_argument, 0, TIDECTL_OPT_LAYERS},
    /* data from files, and weights out */
    {"data", required_argument, 0, TIDECTL_OPT_DATA},
    {"labels", required_argument, 0, TIDECTL_OPT_LABELS},
    {"test-data", required_argument, 0, TIDECTL_OPT_TEST_DATA},
    {"test-labels", required_argument, 0, TIDECTL_OPT_TEST_LABELS},
    {"npz", required_argument, 0, TIDECTL_OPT_NPZ},
    /* ONNX models */
    {"onnx", required_argument, 0, TIDECTL_OPT_ONNX},
    {"loss", required_argument, 0, TIDECTL_OPT_LOSS},
    {"frozen", required_argument, 0, TIDECTL_OPT_FROZEN},
    {"dim", required_argument, 0, TIDECTL_OPT_DIM},
    {"from", required_argument, 0, TIDECTL_OPT_FROM},
    {0, 0, 0, 0},
};

/* The options every command accepts, besides those its verb lists. */
static const int global_options[] = {TIDECTL_OPT_HELP,        TIDECTL_OPT_SOCKET,
                                     TIDECTL_OPT_CONNECT,     TIDECTL_OPT_TOKEN,
                                     TIDECTL_OPT_CA,          TIDECTL_OPT_JSON,
                                     TIDECTL_OPT_SERVER_NAME, TIDECTL_OPT_TIMEOUT,
                                     TIDECTL_OPT_VERSION,     0};

const char *const tidectl_swap_names[] = {"auto", "on", "off", NULL};

/* ============================================================================
 * Numbers and sizes
 * ========================================================================== */

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

/* ============================================================================
 * Parsing
 * ========================================================================== */

/* Whether the 0-terminated list (NULL: empty) names option id. */
static bool accepts(const int *list, int id)
{
    for (; list && *list; list++)
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

const struct tidectl_verb *tidectl_scan_verb(int argc, char **argv, int *index)
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
            } else if (a[1] != '-' && !a[2]) {
                /* A short option with its value in the next argument ("-o FILE"). */
                for (const struct option *p = long_options; p->name; p++)
                    if (p->val == a[1] && p->has_arg == required_argument)
                        i++;
            }
            continue;
        }
        *index = i;
        return tidectl_find_verb(a);
    }
    *index = -1;
    return NULL;
}

/*
 * Sets *out to the index of value among the NULL-terminated choices of
 * --flag; otherwise says which choices there are and returns -1.
 */
static int parse_enum(const char *command, const char *flag, const char *value,
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
    tidectl_usage_error(command, "--%s must be one of %s, got \"%s\"", flag, list, value);
    return -1;
}

/* Reads the value of --flag as a count from 1 to max, or says what --flag wants. */
static int parse_count(const char *command, const char *flag, const char *value, int64_t max,
                       int64_t *out)
{
    if (parse_int(value, 1, max, out))
        return tidectl_usage_error(command, "--%s wants a positive count, got \"%s\"", flag, value);
    return TIDECTL_EXIT_OK;
}

/*
 * The flags of the sequence models (lstm, and the language models
 * transformer and moe): each applies to the models listed (a list in words,
 * "a, b or c", whose names end at a space or a comma),
 * and is refused with any other. Then the defaults of the model: for lstm
 * --seq-len 28 (Fashion-MNIST's rows, the only length it has), --hidden 128,
 * --layers 1; for transformer and moe --seq-len 128 and --layers 4 (their
 * other sizes are tide_model_lm_options_default's); and for all three Adam
 * unless --optimizer says otherwise (its learning rate is
 * tidectl_make_spec's).
 */
static int sequence_defaults(const char *command, struct tidectl_options *o)
{
    const struct {
        const char *flag, *models;
        bool given;
    } flags[] = {
        {"seq-len", "lstm, transformer or moe", o->seq_len != 0},
        {"hidden", "lstm", o->hidden != 0},
        {"layers", "lstm, transformer or moe", o->layers != 0},
        {"d-model", "transformer or moe", o->d_model != 0},
        {"heads", "transformer or moe", o->heads != 0},
        {"vocab", "transformer or moe", o->vocab != 0},
        {"dropout", "transformer or moe", o->dropout >= 0},
        {"experts", "moe", o->experts != 0},
        {"capacity-factor", "moe", o->capacity_factor > 0},
    };
    size_t n = strlen(o->model);
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        const char *at = strstr(flags[i].models, o->model);
        bool listed = at && (at == flags[i].models || at[-1] == ' ') &&
                      (!at[n] || at[n] == ' ' || at[n] == ',');
        if (flags[i].given && !listed)
            return tidectl_usage_error(command, "--%s applies to --model %s only, not to %s",
                                       flags[i].flag, flags[i].models, o->model);
    }
    bool lstm = strcmp(o->model, "lstm") == 0;
    if (lstm && o->seq_len && o->seq_len != 28 && strcmp(o->dataset, "fashion-mnist") == 0)
        return tidectl_usage_error(command,
                                   "--seq-len %lld needs --dataset synthetic: Fashion-MNIST's "
                                   "images have 28 rows, so its sequences are 28 steps",
                                   (long long)o->seq_len);
    bool lm = tidectl_language_model(o);
    if (!o->seq_len)
        o->seq_len = lm ? 128 : 28;
    if (!o->hidden)
        o->hidden = 128;
    if (!o->layers)
        o->layers = lm ? 4 : 1;
    if ((lstm || lm) && !o->optimizer_given)
        o->optimizer = TIDE_JOB_OPTIMIZER_ADAM;
    return TIDECTL_EXIT_OK;
}

/*
 * Data from files: --data and --labels come together, --test-data and
 * --test-labels too and only with them; --dataset, --data-dir and --seq-len
 * (the examples' shape sets it) do not apply with --data.
 */
static int data_file_checks(const char *command, struct tidectl_options *o)
{
    if (!o->data && !o->labels && !o->test_data && !o->test_labels)
        return TIDECTL_EXIT_OK;
    if (!o->data != !o->labels)
        return tidectl_usage_error(command, "--data and --labels come together (examples and "
                                            "their labels)");
    if (!o->test_data != !o->test_labels)
        return tidectl_usage_error(command, "--test-data and --test-labels come together");
    if (!o->data)
        return tidectl_usage_error(command, "--test-data needs --data and --labels");
    if (o->dataset_given)
        return tidectl_usage_error(command, "--dataset and --data exclude each other");
    if (o->data_dir)
        return tidectl_usage_error(command, "--data-dir is for --dataset fashion-mnist, not "
                                            "--data");
    if (o->seq_len)
        return tidectl_usage_error(command, "--seq-len does not apply with --data: the examples' "
                                            "shape [S, F] sets the sequence length");
    if (!o->onnx && (strchr(o->data, ',') || (o->test_data && strchr(o->test_data, ','))))
        return tidectl_usage_error(command, "--data A,B (one file per model input) is for an "
                                            "--onnx model of several inputs; --model reads one "
                                            "file of examples");
    return TIDECTL_EXIT_OK;
}

/*
 * ONNX models: --output, --loss and --frozen go with --onnx, which names
 * the model instead of --model and its sizes, and trains with SGD unless
 * --optimizer says otherwise (tide-bench's reasons: its batch is the one
 * it was exported with, often small, where momentum's default step is too
 * long). export's --onnx and --from come together.
 */
static int onnx_checks(const char *command, struct tidectl_options *o)
{
    bool export = command && strcmp(command, "export") == 0;
    if (export) {
        if (!o->onnx != !o->from)
            return tidectl_usage_error(command, "--onnx OUT.onnx and --from MODEL.onnx come "
                                                "together (the model the job was trained from)");
        return TIDECTL_EXIT_OK;
    }
    if (!o->onnx && (o->loss || o->frozen || o->dims ||
                     (o->output && command && strcmp(command, "trace") != 0)))
        return tidectl_usage_error(command, "--output, --loss, --frozen and --dim apply to an "
                                            "ONNX model: give --onnx FILE");
    if (!o->onnx)
        return TIDECTL_EXIT_OK;
    if (strcmp(o->model, "cnn") != 0 || o->depth || o->seq_len || o->hidden || o->layers ||
        o->d_model || o->heads || o->vocab || o->experts || o->capacity_factor > 0 ||
        o->dropout >= 0)
        return tidectl_usage_error(command, "--onnx names the model: --model and its sizes "
                                            "(--depth, --seq-len, --hidden, --layers, --d-model, "
                                            "--heads, --vocab, --experts, --capacity-factor, "
                                            "--dropout) do not apply");
    if (!o->optimizer_given)
        o->optimizer = TIDE_JOB_OPTIMIZER_SGD;
    return TIDECTL_EXIT_OK;
}

int tidectl_parse_options(int argc, char **argv, const struct tidectl_verb *verb,
                          struct tidectl_options *o)
{
    const char *name = verb ? verb->name : NULL;
    int64_t v;
    uint64_t u;
    int e;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":ho:", long_options, NULL)) != -1) {
        if (c == '?')
            return tidectl_usage_error(name, "unknown option \"%s\"", argv[optind - 1]);
        if (c == ':')
            return tidectl_usage_error(name, "option \"%s\" needs a value", argv[optind - 1]);
        if (!accepts(global_options, c) && !(verb && accepts(verb->accepts, c)))
            return tidectl_usage_error(name, "option --%s does not apply to %s", option_name(c),
                                       verb ? verb->name : "tidectl without a command");
        switch (c) {
        case TIDECTL_OPT_HELP:
            if (verb)
                tidectl_usage_verb(stdout, verb);
            else
                tidectl_usage_main(stdout);
            exit(TIDECTL_EXIT_OK);
        case TIDECTL_OPT_VERSION:
            printf("tidectl %s\n", TIDECTL_VERSION);
            exit(TIDECTL_EXIT_OK);
        case TIDECTL_OPT_SOCKET:
            o->socket = optarg;
            o->socket_given = true;
            break;
        case TIDECTL_OPT_CONNECT:
            o->connect = optarg;
            break;
        case TIDECTL_OPT_TOKEN:
            o->token = optarg;
            break;
        case TIDECTL_OPT_CA:
            o->ca = optarg;
            break;
        case TIDECTL_OPT_SERVER_NAME:
            o->server_name = optarg;
            break;
        case TIDECTL_OPT_JSON:
            o->json = true;
            break;
        case TIDECTL_OPT_TIMEOUT:
            if (parse_double(optarg, 0, &o->timeout_s) || o->timeout_s > 86400)
                return tidectl_usage_error(name, "--timeout wants seconds (0 to 86400), got \"%s\"",
                                           optarg);
            break;
        case TIDECTL_OPT_MODEL: {
            static const char *const models[] = {"mlp", "cnn", "resnet", "lstm", "transformer",
                                                 "moe", NULL};
            if (parse_enum(name, "model", optarg, models, &e))
                return TIDECTL_EXIT_USAGE;
            o->model = models[e];
            break;
        }
        case TIDECTL_OPT_DEPTH:
            if (parse_int(optarg, 35, 3 * (10 + 1000) + 2, &v) || (v - 2) % 3 != 0)
                return tidectl_usage_error(name,
                                           "--depth must be 3*(10+n)+2 for n >= 1 (35, 38, 41, "
                                           "..., 50 for ResNet-50), got \"%s\"",
                                           optarg);
            o->depth = (int32_t)v;
            break;
        case TIDECTL_OPT_WIDTH:
            if (parse_int(optarg, 1, 4096, &o->width))
                return tidectl_usage_error(name, "--width wants 1 to 4096, got \"%s\"", optarg);
            break;
        case TIDECTL_OPT_DATASET: {
            static const char *const sets[] = {"fashion-mnist", "synthetic", "fortunes", NULL};
            if (parse_enum(name, "dataset", optarg, sets, &e))
                return TIDECTL_EXIT_USAGE;
            o->dataset = sets[e];
            o->dataset_given = true;
            break;
        }
        case TIDECTL_OPT_DATA_DIR:
            o->data_dir = optarg;
            break;
        case TIDECTL_OPT_BATCH:
            if (parse_int(optarg, 1, 1 << 20, &o->batch))
                return tidectl_usage_error(name, "--batch wants 1 to 1048576, got \"%s\"", optarg);
            o->batch_given = true;
            break;
        case TIDECTL_OPT_BUDGET:
            if (parse_bytes(optarg, &o->budget) || o->budget == 0)
                return tidectl_usage_error(name, "--budget wants bytes (e.g. 512M, 2G), got \"%s\"",
                                           optarg);
            break;
        case TIDECTL_OPT_SWAP: {
            if (parse_enum(name, "swap", optarg, tidectl_swap_names, &e))
                return TIDECTL_EXIT_USAGE;
            o->swap = (enum tide_job_swap)e; /* the same order as tide_job_swap */
            break;
        }
        case TIDECTL_OPT_PARTITION_SIZE:
            /* 0, the default, leaves the size to the planner. */
            if (parse_int(optarg, 0, UINT32_MAX, &v))
                return tidectl_usage_error(name, "--partition-size wants a count, 0 for the "
                                           "planner's choice, got \"%s\"", optarg);
            o->partition_size = (uint32_t)v;
            break;
        case TIDECTL_OPT_VARS_HOME: {
            static const char *const homes[] = {"auto", "host", "device", NULL};
            if (parse_enum(name, "vars-home", optarg, homes, &e))
                return TIDECTL_EXIT_USAGE;
            o->vars_home = (enum tide_job_vars_home)e;
            break;
        }
        case TIDECTL_OPT_POLICY: {
            /* tide.v1.RecomputeMode's numbers: swap is RECOMPUTE_OFF (3). */
            static const char *const policies[] = {"swap", "recompute", "checkpoint-sqrt", NULL};
            static const int modes[] = {3, 1, 2};
            if (parse_enum(name, "policy", optarg, policies, &e))
                return TIDECTL_EXIT_USAGE;
            o->recompute = modes[e];
            break;
        }
        case TIDECTL_OPT_OPTIMIZER: {
            static const char *const opts[] = {"sgd", "momentum", "adam", NULL};
            if (parse_enum(name, "optimizer", optarg, opts, &e))
                return TIDECTL_EXIT_USAGE;
            o->optimizer = (enum tide_job_optimizer)e;
            o->optimizer_given = true;
            break;
        }
        case TIDECTL_OPT_LR:
            if (parse_double(optarg, 0, &o->lr))
                return tidectl_usage_error(name, "--lr wants a positive number, got \"%s\"",
                                           optarg);
            break;
        case TIDECTL_OPT_SEED:
            if (parse_bytes(optarg, &u) || strpbrk(optarg, "KkMmGgTtBb."))
                return tidectl_usage_error(name, "--seed wants a non-negative integer, got \"%s\"",
                                           optarg);
            o->seed = u;
            break;
        case TIDECTL_OPT_NAME:
            o->name = optarg;
            break;
        /* the language models */
        case TIDECTL_OPT_D_MODEL:
            if (parse_count(name, "d-model", optarg, 1 << 20, &o->d_model))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_HEADS:
            if (parse_count(name, "heads", optarg, 1 << 16, &v))
                return TIDECTL_EXIT_USAGE;
            o->heads = (int32_t)v;
            break;
        case TIDECTL_OPT_VOCAB:
            if (parse_count(name, "vocab", optarg, 1 << 24, &o->vocab))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_EXPERTS:
            if (parse_count(name, "experts", optarg, 1 << 16, &o->experts))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_CAPACITY_FACTOR:
            if (parse_double(optarg, 0, &o->capacity_factor))
                return tidectl_usage_error(name, "--capacity-factor wants a number > 0, got \"%s\"",
                                           optarg);
            break;
        case TIDECTL_OPT_DROPOUT:
            if (parse_double(optarg, -1, &o->dropout) || o->dropout < 0 || o->dropout >= 1)
                return tidectl_usage_error(name, "--dropout wants a rate, 0 <= R < 1, got \"%s\"",
                                           optarg);
            break;
        case TIDECTL_OPT_STEPS:
            if (parse_count(name, "steps", optarg, INT64_C(1) << 40, &o->steps))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_EPOCHS:
            if (parse_count(name, "epochs", optarg, 1 << 20, &o->epochs))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_CHECKPOINT_EVERY:
            if (parse_count(name, "checkpoint-every", optarg, INT64_C(1) << 40, &v))
                return TIDECTL_EXIT_USAGE;
            o->checkpoint_every = (uint64_t)v;
            break;
        case TIDECTL_OPT_RESUME:
            o->resume = optarg;
            break;
        case TIDECTL_OPT_PRIORITY:
            if (parse_int(optarg, -1000, 1000, &v))
                return tidectl_usage_error(name,
                                           "--priority wants a whole number from -1000 to "
                                           "1000, got \"%s\"",
                                           optarg);
            o->priority = (int32_t)v;
            break;
        case TIDECTL_OPT_NO_EVAL:
            o->no_eval = true;
            break;
        case TIDECTL_OPT_KEEP:
            o->keep = true;
            break;
        case TIDECTL_OPT_DEVICE:
            /* The daemon knows how many it has and refuses a larger index, naming the count. */
            if (parse_int(optarg, 0, UINT32_MAX, &o->device))
                return tidectl_usage_error(
                    name, "--device wants a device index 0 to %u, got \"%s\"", UINT32_MAX, optarg);
            break;
        case TIDECTL_OPT_PARTITIONS:
            o->partitions = true;
            break;
        case TIDECTL_OPT_SVG:
            o->svg = optarg;
            break;
        case TIDECTL_OPT_DEVICE_PROFILE:
            o->device_profile = optarg; /* the daemon checks the name */
            break;
        case TIDECTL_OPT_MATH:
            o->math = optarg; /* the daemon checks the name */
            break;
        case TIDECTL_OPT_ALL:
            o->all = true;
            break;
        case TIDECTL_OPT_STRIDE:
            if (parse_count(name, "stride", optarg, UINT32_MAX, &v))
                return TIDECTL_EXIT_USAGE;
            o->stride = (uint32_t)v;
            break;
        case TIDECTL_OPT_ONCE:
            o->once = true;
            break;
        case TIDECTL_OPT_OUTPUT:
            if (!*optarg)
                return tidectl_usage_error(name, "--output wants a file name, got \"\"");
            o->output = optarg;
            break;
        case TIDECTL_OPT_INTERVAL:
            if (parse_double(optarg, 0.05, &o->interval_s) || o->interval_s > 3600)
                return tidectl_usage_error(
                    name, "--interval wants seconds (0.05 to 3600), got \"%s\"", optarg);
            break;
        /* Sequence models. */
        case TIDECTL_OPT_SEQ_LEN:
            if (parse_count(name, "seq-len", optarg, 1 << 20, &o->seq_len))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_HIDDEN:
            if (parse_count(name, "hidden", optarg, 1 << 16, &o->hidden))
                return TIDECTL_EXIT_USAGE;
            break;
        case TIDECTL_OPT_LAYERS:
            if (parse_count(name, "layers", optarg, 1 << 12, &v))
                return TIDECTL_EXIT_USAGE;
            o->layers = (int32_t)v;
            break;
        /* Data from files, and weights out. */
        case TIDECTL_OPT_DATA:
        case TIDECTL_OPT_LABELS:
        case TIDECTL_OPT_TEST_DATA:
        case TIDECTL_OPT_TEST_LABELS:
        case TIDECTL_OPT_NPZ: {
            const char **field = c == TIDECTL_OPT_DATA          ? &o->data
                                 : c == TIDECTL_OPT_LABELS      ? &o->labels
                                 : c == TIDECTL_OPT_TEST_DATA   ? &o->test_data
                                 : c == TIDECTL_OPT_TEST_LABELS ? &o->test_labels
                                                                : &o->npz;
            if (!*optarg)
                return tidectl_usage_error(name, "--%s wants a file name, got \"\"",
                                           option_name(c));
            *field = optarg;
            break;
        }
        /* ONNX models. */
        case TIDECTL_OPT_DIM: {
            char *copy, err[256];
            struct tide_onnx_dim *dims;
            size_t n;
            if (tide_onnx_parse_dims(optarg, &copy, &dims, &n, err, sizeof(err)) != 0)
                return tidectl_usage_error(name, "--dim: %s", err);
            free(copy), free(dims);
            o->dims = optarg;
            break;
        }
        case TIDECTL_OPT_ONNX:
        case TIDECTL_OPT_FROZEN:
        case TIDECTL_OPT_FROM: {
            const char **field = c == TIDECTL_OPT_ONNX ? &o->onnx
                                 : c == TIDECTL_OPT_FROM ? &o->from
                                                         : &o->frozen;
            if (!*optarg)
                return tidectl_usage_error(name, "--%s wants a %s, got \"\"", option_name(c),
                                           c == TIDECTL_OPT_FROZEN ? "list of names" : "file name");
            *field = optarg;
            break;
        }
        case TIDECTL_OPT_LOSS: {
            enum tide_onnx_loss loss;
            if (tide_onnx_loss_parse(optarg, &loss) != 0)
                return tidectl_usage_error(name, "--loss wants xent, mse or none, got \"%s\"",
                                           optarg);
            o->loss = optarg;
            break;
        }
        default:
            return tidectl_usage_error(name, "unhandled option");
        }
    }
    if (o->connect && o->socket_given)
        return tidectl_usage_error(name, "--socket and --connect exclude each other");
    if (!o->connect && (o->ca || o->server_name))
        return tidectl_usage_error(name, "--ca and --server-name need --connect");
    if (o->steps && o->epochs)
        return tidectl_usage_error(name, "--steps and --epochs exclude each other");
    if (o->depth && strcmp(o->model, "resnet") != 0)
        return tidectl_usage_error(name, "--depth applies to --model resnet only");
    if (onnx_checks(name, o) != TIDECTL_EXIT_OK)
        return TIDECTL_EXIT_USAGE;
    /* The language models: their corpus and batch unless given, and no other data. */
    bool lm = tidectl_language_model(o);
    if (!o->dataset)
        o->dataset = lm ? "fortunes" : "fashion-mnist";
    if (!o->batch)
        o->batch = lm ? 32 : 64;
    if (lm && (o->data || o->test_data))
        return tidectl_usage_error(name, "--data and --test-data do not apply to --model %s, "
                                         "which reads the fortunes corpus",
                                   o->model);
    if (lm != (strcmp(o->dataset, "fortunes") == 0))
        return tidectl_usage_error(name, "--dataset %s does not apply to %s %s (%s)",
                                   o->dataset, o->onnx ? "--onnx" : "--model",
                                   o->onnx ? o->onnx : o->model,
                                   lm ? "language models read fortunes"
                                      : "fortunes is for transformer and moe");
    if (data_file_checks(name, o) != TIDECTL_EXIT_OK)
        return TIDECTL_EXIT_USAGE;
    if (sequence_defaults(name, o) != TIDECTL_EXIT_OK)
        return TIDECTL_EXIT_USAGE;
    /* Positional arguments: the command itself first. */
    o->args = argv + optind;
    o->n_args = argc - optind;
    return TIDECTL_EXIT_OK;
}
