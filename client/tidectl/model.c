/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/model.c: the model options turned into what `plan` and
 * `train` send: the network built with libtide's builders (tide/models.h),
 * the job spec around it, and the dataset it is fed from (or, for `plan`,
 * only the dataset's image shape, without reading it); for the language
 * models, the corpus (tide_corpus).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide/dataset-files.h"
#include "tide/models.h"
#include "tide/onnx.h"
#include "tidectl.h"

/* The bottleneck blocks of a ResNet of depth layers: depth = 3 * (10 + blocks) + 2. */
static int32_t resnet_blocks(int32_t depth)
{
    return (depth - 2) / 3 - 10;
}

/* Reads a whole file into a malloc'd buffer; NULL after saying why. */
static uint8_t *read_model_file(const char *path, size_t *len)
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
    fprintf(stderr, "tidectl: %s: %s\n", path, f ? "cannot read it" : strerror(errno));
    free(bytes);
    if (f)
        fclose(f);
    return NULL;
}

/*
 * --onnx: the model with the loss libtide adds (tide_onnx_training_graph),
 * checked against the examples it will be fed, images of c x h x w and
 * labels below classes, or files' (tide_onnx_training_check_feeds); c 0:
 * against none (a plan of the model's own shapes).
 */
/* --onnx with its loss (tide_onnx_training_graph) into *t; the exit status, having said why. */
static int read_onnx_training(const struct tidectl_options *o, struct tide_onnx_training *t)
{
    size_t len;
    uint8_t *file = read_model_file(o->onnx, &len);
    if (!file)
        return TIDECTL_EXIT_RUNTIME;
    char *frozen_copy, *dims_copy, err[1024];
    const char **frozen;
    size_t n_frozen, n_dims;
    struct tide_onnx_dim *dims;
    if (tide_onnx_split_names(o->frozen, &frozen_copy, &frozen, &n_frozen) != 0) {
        free(file);
        fprintf(stderr, "tidectl: out of memory\n");
        return TIDECTL_EXIT_RUNTIME;
    }
    if (tide_onnx_parse_dims(o->dims, &dims_copy, &dims, &n_dims, err, sizeof(err)) != 0) {
        free(file), free(frozen_copy), free(frozen);
        fprintf(stderr, "tidectl: --dim: %s\n", err);
        return TIDECTL_EXIT_USAGE;
    }
    struct tide_onnx_training_options to = {.batch_size = o->batch,
                                            .dims = dims,
                                            .n_dims = n_dims,
                                            .output = o->output,
                                            .frozen = frozen,
                                            .n_frozen = n_frozen};
    if (o->loss)
        tide_onnx_loss_parse(o->loss, &to.loss);
    int rc = tide_onnx_training_graph(file, len, &to, t, err, sizeof(err));
    free(file);
    free(frozen_copy);
    free(frozen);
    free(dims_copy);
    free(dims);
    if (rc != 0) {
        fprintf(stderr, "tidectl: %s: %s\n", o->onnx, err);
        return TIDECTL_EXIT_USAGE;
    }
    return TIDECTL_EXIT_OK;
}

static int build_onnx_model(const struct tidectl_options *o, int64_t c, int64_t h, int64_t w,
                            int32_t classes, const tide_dataset *files, struct tidectl_model *m)
{
    m->onnx = calloc(1, sizeof(*m->onnx));
    if (!m->onnx) {
        fprintf(stderr, "tidectl: out of memory\n");
        return TIDECTL_EXIT_RUNTIME;
    }
    int rc = read_onnx_training(o, m->onnx);
    if (rc != TIDECTL_EXIT_OK)
        return rc;
    char err[1024];
    const struct tide_onnx_training *t = m->onnx;
    char note[512];
    if (*tide_onnx_training_note(t, note, sizeof(note)))
        fprintf(stderr, "tidectl: note: %s: %s\n", o->onnx, note);
    /* --data's labels: class indices or float targets (--loss mse, none), of any shape. */
    int64_t label_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    int32_t label_rank = tide_dataset_label_shape(files, label_dims);
    /* --data's files: one per model input, each of its own kind (float, int) and shape. */
    int32_t n = files ? tide_dataset_inputs(files) : 1;
    enum tide_data_type dtypes[TIDE_DATASET_MAX_INPUTS] = {TIDE_DT_FLOAT32};
    int64_t elements[TIDE_DATASET_MAX_INPUTS] = {c * h * w};
    for (int32_t k = 0; files && k < n; k++) {
        int64_t dims[TIDE_DATASET_MAX_SAMPLE_RANK];
        int32_t rank = tide_dataset_input_shape(files, k, dims);
        dtypes[k] = tide_dataset_input_dtype(files, k);
        elements[k] = 1;
        for (int32_t d = 0; d < rank; d++)
            elements[k] *= dims[d];
    }
    if ((files || c) &&
        tide_onnx_training_check_feeds(t, o->batch_given ? o->batch : 0, n, dtypes, elements, NULL,
                                       tide_dataset_label_dtype(files), label_dims, label_rank,
                                       classes, err, sizeof(err)) != 0) {
        fprintf(stderr, "tidectl: %s: %s\n", o->onnx, err);
        return TIDECTL_EXIT_USAGE;
    }
    m->graph = t->graph, m->graph_len = t->graph_len;
    m->onnx->graph = NULL;
    m->image_rank = t->input.rank;
    memcpy(m->image_dims, t->input.dims, sizeof(m->image_dims));
    m->image_elements = t->input.elements;
    m->classes = (int32_t)t->classes;
    m->parameters = t->parameters;
    m->batch = t->batch;
    m->images = t->input.name, m->labels = t->labels.name;
    m->logits = t->output.name, m->loss = t->loss;
    m->fetch = m->logits;
    /* Every graph input is fed (a BERT's ids and mask), then the labels. */
    for (int32_t k = 0; k < t->n_inputs; k++)
        m->feeds[k] = t->inputs[k].name;
    m->feeds[t->n_inputs] = m->labels;
    m->n_feeds = t->n_inputs + 1;
    return TIDECTL_EXIT_OK;
}

void tidectl_model_clear(struct tidectl_model *m)
{
    free(m->graph);
    tide_onnx_training_free(m->onnx);
    free(m->onnx);
    memset(m, 0, sizeof(*m));
}

bool tidectl_language_model(const struct tidectl_options *o)
{
    return strcmp(o->model, "transformer") == 0 || strcmp(o->model, "moe") == 0;
}

/* The language model's sizes: the options' non-zero values over the defaults. */
static struct tide_model_lm_options lm_options(const struct tidectl_options *o)
{
    return tide_model_lm_options_with(&(struct tide_model_lm_options){
        .batch = o->batch,
        .seq_len = o->seq_len,
        .vocab = o->vocab,
        .d_model = o->d_model,
        .layers = (int32_t)o->layers,
        .heads = (int32_t)o->heads,
        .dropout = (float)o->dropout,
        .experts = o->experts,
        .capacity_factor = o->capacity_factor,
    });
}

int tidectl_build_model(const struct tidectl_options *o, int64_t c, int64_t h, int64_t w,
                        int32_t classes, const tide_dataset *files, struct tidectl_model *m)
{
    memset(m, 0, sizeof(*m));
    if (o->onnx) {
        int rc = build_onnx_model(o, c, h, w, classes, files, m);
        if (rc != TIDECTL_EXIT_OK)
            tidectl_model_clear(m);
        return rc;
    }
    bool lm = tidectl_language_model(o);
    m->images = lm ? TIDE_MODEL_TOKENS : TIDE_MODEL_IMAGES, m->labels = TIDE_MODEL_LABELS;
    m->logits = TIDE_MODEL_LOGITS, m->loss = TIDE_MODEL_LOSS;
    /* A language model's step brings each token's loss, whose held-out mean train prints. */
    m->fetch = lm ? TIDE_MODEL_TOKEN_LOSS : TIDE_MODEL_LOGITS;
    m->feeds[0] = m->images, m->feeds[1] = m->labels;
    m->n_feeds = 2;
    m->batch = o->batch;
    tide_builder *b = tide_builder_new();
    if (!b) {
        fprintf(stderr, "tidectl: out of memory\n");
        return TIDECTL_EXIT_RUNTIME;
    }
    tide_ref logits;
    if (lm) {
        /* Fed [B, S] tokens; "classes" are the vocabulary. */
        struct tide_model_lm_options sizes = lm_options(o);
        logits = strcmp(o->model, "moe") == 0 ? tide_model_moe(b, &sizes)
                                              : tide_model_transformer(b, &sizes);
        classes = (int32_t)sizes.vocab;
        m->language_model = true;
    } else if (strcmp(o->model, "mlp") == 0) {
        int64_t hidden[2] = {256, 128};
        logits = tide_model_mlp(b, o->batch, c * h * w, hidden, 2, classes);
    } else if (strcmp(o->model, "cnn") == 0) {
        logits = tide_model_cnn(b, o->batch, c, h, w, classes);
    } else if (strcmp(o->model, "lstm") == 0) {
        /* A row of the image is a time step (c is 1: the model's images are [B, 1, S, F]). */
        logits = tide_model_lstm(b, o->batch, c * h, w, o->hidden, o->layers, classes);
    } else {
        if (h != w) {
            tide_builder_free(b);
            return tidectl_usage_error(NULL,
                                       "--model resnet wants square images, the dataset's are "
                                       "%" PRId64 "x%" PRId64,
                                       h, w);
        }
        logits = tide_model_resnet(b, o->batch, c, h, classes, resnet_blocks(o->depth), o->width);
    }
    tide_ref images = tide_builder_find(b, m->images);
    int rc = TIDECTL_EXIT_OK;
    if (logits.id < 0 || images.id < 0 ||
        tide_builder_shape(b, images, m->image_dims, &m->image_rank) != 0 ||
        tide_builder_serialize(b, &m->graph, &m->graph_len) != 0) {
        fprintf(stderr, "tidectl: building the %s model: %s\n", o->model, tide_builder_error(b));
        rc = TIDECTL_EXIT_RUNTIME;
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

void tidectl_make_spec(const struct tidectl_options *o, const struct tidectl_model *m, char *name,
                       size_t name_size, struct tide_job_spec *spec)
{
    tide_job_spec_init(spec);
    if (o->name)
        snprintf(name, name_size, "%s", o->name);
    else
        snprintf(name, name_size, "tidectl-%s", o->onnx ? "onnx" : o->model);
    spec->name = name;
    spec->graph = m->graph;
    spec->graph_len = m->graph_len;
    spec->optimizer = o->optimizer;
    /* Adam's rate is 0.003 for the sequence models (lstm, transformer, moe), else 0.001. */
    bool sequence = strcmp(o->model, "lstm") == 0 || m->language_model;
    double lr = o->lr;
    if (lr == 0)
        lr = o->optimizer == TIDE_JOB_OPTIMIZER_SGD        ? 0.05
             : o->optimizer == TIDE_JOB_OPTIMIZER_MOMENTUM ? 0.02
             : sequence                                    ? TIDE_MODEL_LSTM_LEARNING_RATE
                                                           : 0.001;
    spec->learning_rate = (float)lr;
    spec->loss = m->loss;
    spec->feeds = m->feeds;
    spec->n_feeds = (size_t)m->n_feeds;
    spec->fetches = &m->fetch;
    spec->n_fetches = 1;
    spec->budget_bytes = o->budget;
    spec->partition_size = o->partition_size;
    spec->device_profile = o->device_profile;
    spec->math = o->math;
    spec->swap = o->swap;
    spec->vars_home = o->vars_home;
    spec->recompute = o->recompute;
    spec->autotune = o->swap == TIDE_JOB_SWAP_AUTO;
    spec->checkpoint_every = o->checkpoint_every;
    spec->priority = o->priority;
    spec->resume_from = o->resume;
    spec->has_device = o->device >= 0;
    spec->device = o->device >= 0 ? (uint32_t)o->device : 0;
    spec->seed = o->seed;
}

/* Says what went wrong with the data (files, or --dataset), on stderr and as a --json error line.
 */
static int files_error(const char *err, int exit_code)
{
    fprintf(stderr, "tidectl: %s\n", err);
    if (tidectl_json)
        tidectl_json_print_error("DATASET", -1, err, exit_code);
    return exit_code;
}

int tidectl_open_dataset(const struct tidectl_options *o, const char *split, tide_dataset **out)
{
    char err[512];
    int rc;
    if (strcmp(o->dataset, "synthetic") == 0) {
        struct tide_synthetic_options s = {.seed = o->seed};
        int32_t classes;
        tidectl_dataset_shape(o, &s.channels, &s.height, &s.width, &classes);
        if (o->onnx) {
            /* Examples of the model's own input shape (the model is read again to build it). */
            struct tide_onnx_training t;
            if ((rc = read_onnx_training(o, &t)) != TIDECTL_EXIT_OK)
                return rc;
            char why[256];
            rc = tide_onnx_training_synthetic(&t, &s, why, sizeof(why));
            tide_onnx_training_free(&t);
            if (rc != 0) {
                snprintf(err, sizeof(err), "%s: %s", o->onnx, why);
                return files_error(err, TIDECTL_EXIT_USAGE);
            }
        }
        if (strcmp(split, "train") == 0)
            s.count = 60000;
        rc = tide_dataset_open_synthetic(&s, split, out, err, sizeof(err));
    } else {
        rc = tide_dataset_open(o->dataset, o->data_dir, split, out, err, sizeof(err));
    }
    if (rc != 0) {
        fprintf(stderr, "tidectl: dataset %s (%s): %s\n", o->dataset, split, err);
        if (tidectl_json)
            tidectl_json_print_error("DATASET", -1, err, TIDECTL_EXIT_RUNTIME);
        return TIDECTL_EXIT_RUNTIME;
    }
    return TIDECTL_EXIT_OK;
}

int tidectl_open_corpus(const struct tidectl_options *o, const char *split, tide_corpus **out)
{
    char err[512];
    if (tide_corpus_open(o->dataset, o->data_dir, split, out, err, sizeof(err)) != 0) {
        fprintf(stderr, "tidectl: corpus %s (%s): %s\n", o->dataset, split, err);
        if (tidectl_json)
            tidectl_json_print_error("DATASET", -1, err, TIDECTL_EXIT_RUNTIME);
        return TIDECTL_EXIT_RUNTIME;
    }
    return TIDECTL_EXIT_OK;
}

void tidectl_dataset_shape(const struct tidectl_options *o, int64_t *c, int64_t *h, int64_t *w,
                           int32_t *classes)
{
    *c = 1, *h = 28, *w = 28, *classes = 10;
    if (strcmp(o->dataset, "synthetic") == 0 && strcmp(o->model, "resnet") == 0)
        *c = 3, *h = 32, *w = 32;
    /* The LSTM reads a row per time step: --seq-len rows (28 on Fashion-MNIST). */
    if (strcmp(o->model, "lstm") == 0)
        *h = o->seq_len;
}

/* ============================================================================
 * Data from files (--data, --labels, --test-data, --test-labels)
 * ========================================================================== */

/*
 * The dataset of a --data list: with --onnx, one file per model input,
 * comma-separated in the model's input order (int files for int inputs);
 * else the one file.
 */
static int open_data(const struct tidectl_options *o, const char *list, const char *labels,
                     const tide_dataset *like, tide_dataset **out, char *err, size_t err_size)
{
    if (!o->onnx)
        return tide_dataset_open_files(list, labels, like, out, err, err_size);
    char *copy;
    const char **paths;
    size_t n;
    if (tide_onnx_split_names(list, &copy, &paths, &n) != 0 || n == 0) {
        snprintf(err, err_size, "%s: %s", list, n ? "out of memory" : "names no file");
        free(copy);
        free(paths);
        return -1;
    }
    int rc = tide_dataset_open_files_n(paths, (int32_t)n, labels, like, out, err, err_size);
    free(copy);
    free(paths);
    return rc;
}

int tidectl_open_files(const struct tidectl_options *o, tide_dataset **train, tide_dataset **test,
                       int64_t *c, int64_t *h, int64_t *w)
{
    char err[1024];
    *train = NULL;
    if (test)
        *test = NULL;
    if (open_data(o, o->data, o->labels, NULL, train, err, sizeof(err)) != 0)
        return files_error(err, TIDECTL_EXIT_RUNTIME);
    if (!o->onnx && tide_dataset_label_dtype(*train) != TIDE_DT_INT32) {
        snprintf(err, sizeof(err),
                 "%s: float32 labels are targets, for an --onnx model with --loss mse or none; "
                 "--model %s learns int class labels",
                 o->labels, o->model);
        tide_dataset_free(*train);
        *train = NULL;
        return files_error(err, TIDECTL_EXIT_USAGE);
    }
    int64_t label_dims[TIDE_DATASET_MAX_SAMPLE_RANK];
    if (!o->onnx && tide_dataset_label_shape(*train, label_dims) > 0) {
        snprintf(err, sizeof(err),
                 "%s: a class label per position ([N, S] labels) is for an --onnx model whose "
                 "output has one per position (a language model's [B, S, V]); --model %s learns "
                 "one class an example ([N] labels)",
                 o->labels, o->model);
        tide_dataset_free(*train);
        *train = NULL;
        return files_error(err, TIDECTL_EXIT_USAGE);
    }
    /* A shape the model cannot read is a usage error: another --model or other files. */
    /* An ONNX model reads any example shape of its input's size, as the MLP does. */
    const char *reader = o->onnx ? "mlp" : o->model;
    if (tide_dataset_model_input(*train, reader, c, h, w, err, sizeof(err)) != 0) {
        tide_dataset_free(*train);
        *train = NULL;
        return files_error(err, TIDECTL_EXIT_USAGE);
    }
    if (test && o->test_data &&
        open_data(o, o->test_data, o->test_labels, *train, test, err, sizeof(err)) != 0) {
        tide_dataset_free(*train);
        *train = NULL;
        return files_error(err, TIDECTL_EXIT_RUNTIME);
    }
    return TIDECTL_EXIT_OK;
}

int tidectl_check_files_input(const tide_dataset *train, const struct tidectl_model *m)
{
    char err[1024];
    if (tide_dataset_check_input(train, m->image_dims, m->image_rank, err, sizeof(err)) != 0)
        return files_error(err, TIDECTL_EXIT_USAGE);
    return TIDECTL_EXIT_OK;
}
