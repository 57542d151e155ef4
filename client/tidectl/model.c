/* SPDX-License-Identifier: MIT */
/*
 * client/tidectl/model.c: the model options turned into what `plan` and
 * `train` send: the network built with libtide's builders (tide/models.h),
 * the job spec around it, and the dataset it is fed from (or, for `plan`,
 * only the dataset's image shape, without reading it); for the language
 * models, the corpus (tide_corpus).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide/dataset-files.h"
#include "tide/models.h"
#include "tidectl.h"

/* The bottleneck blocks of a ResNet of depth layers: depth = 3 * (10 + blocks) + 2. */
static int32_t resnet_blocks(int32_t depth)
{
    return (depth - 2) / 3 - 10;
}

bool tidectl_language_model(const struct tidectl_options *o)
{
    return strcmp(o->model, "transformer") == 0 || strcmp(o->model, "moe") == 0;
}

/* The language model's sizes: the options' non-zero values over the defaults. */
static struct tide_model_lm_options lm_options(const struct tidectl_options *o)
{
    struct tide_model_lm_options m = tide_model_lm_options_default();
    m.batch = o->batch;
    if (o->seq_len)
        m.seq_len = o->seq_len;
    if (o->layers)
        m.layers = o->layers;
    if (o->d_model)
        m.d_model = o->d_model;
    if (o->heads)
        m.heads = o->heads;
    if (o->vocab)
        m.vocab = o->vocab;
    if (o->experts)
        m.experts = o->experts;
    if (o->capacity_factor > 0)
        m.capacity_factor = o->capacity_factor;
    if (o->dropout >= 0)
        m.dropout = (float)o->dropout;
    return m;
}

int tidectl_build_model(const struct tidectl_options *o, int64_t c, int64_t h, int64_t w,
                        int32_t classes, struct tidectl_model *m)
{
    memset(m, 0, sizeof(*m));
    tide_builder *b = tide_builder_new();
    if (!b) {
        fprintf(stderr, "tidectl: out of memory\n");
        return TIDECTL_EXIT_RUNTIME;
    }
    tide_ref logits;
    const char *input = TIDE_MODEL_IMAGES;
    if (tidectl_language_model(o)) {
        /* Fed [B, S] tokens; "classes" are the vocabulary. */
        struct tide_model_lm_options lm = lm_options(o);
        logits =
            strcmp(o->model, "moe") == 0 ? tide_model_moe(b, &lm) : tide_model_transformer(b, &lm);
        input = TIDE_MODEL_TOKENS;
        classes = (int32_t)lm.vocab;
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
    tide_ref images = tide_builder_find(b, input);
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

static const char *const model_fetches[] = {TIDE_MODEL_LOGITS};
/* A language model's: each token's loss, whose mean over the held-out split train prints. */
static const char *const lm_fetches[] = {TIDE_MODEL_TOKEN_LOSS};
/* What a language model is fed (an image model's are libtide's default feeds). */
static const char *const lm_feeds[] = {TIDE_MODEL_TOKENS, TIDE_MODEL_LABELS};

void tidectl_make_spec(const struct tidectl_options *o, const struct tidectl_model *m, char *name,
                       size_t name_size, struct tide_job_spec *spec)
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
    /* Adam's rate is 0.003 for the sequence models (lstm, transformer, moe), else 0.001. */
    bool sequence = strcmp(o->model, "lstm") == 0 || m->language_model;
    double lr = o->lr;
    if (lr == 0)
        lr = o->optimizer == TIDE_JOB_OPTIMIZER_SGD        ? 0.05
             : o->optimizer == TIDE_JOB_OPTIMIZER_MOMENTUM ? 0.02
             : sequence                                    ? TIDE_MODEL_LSTM_LEARNING_RATE
                                                           : 0.001;
    spec->learning_rate = (float)lr;
    spec->fetches = m->language_model ? lm_fetches : model_fetches;
    if (m->language_model) {
        spec->feeds = lm_feeds;
        spec->n_feeds = 2;
    }
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

int tidectl_open_dataset(const struct tidectl_options *o, const char *split, tide_dataset **out)
{
    char err[512];
    int rc;
    if (strcmp(o->dataset, "synthetic") == 0) {
        struct tide_synthetic_options s = {.seed = o->seed};
        int32_t classes;
        tidectl_dataset_shape(o, &s.channels, &s.height, &s.width, &classes);
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

/* Says what went wrong with the files, on stderr and as a --json error line. */
static int files_error(const char *err, int exit_code)
{
    fprintf(stderr, "tidectl: %s\n", err);
    if (tidectl_json)
        tidectl_json_print_error("DATASET", -1, err, exit_code);
    return exit_code;
}

int tidectl_open_files(const struct tidectl_options *o, tide_dataset **train, tide_dataset **test,
                       int64_t *c, int64_t *h, int64_t *w)
{
    char err[1024];
    *train = NULL;
    if (test)
        *test = NULL;
    if (tide_dataset_open_files(o->data, o->labels, NULL, train, err, sizeof(err)) != 0)
        return files_error(err, TIDECTL_EXIT_RUNTIME);
    /* A shape the model cannot read is a usage error: another --model or other files. */
    if (tide_dataset_model_input(*train, o->model, c, h, w, err, sizeof(err)) != 0) {
        tide_dataset_free(*train);
        *train = NULL;
        return files_error(err, TIDECTL_EXIT_USAGE);
    }
    if (test && o->test_data &&
        tide_dataset_open_files(o->test_data, o->test_labels, *train, test, err, sizeof(err)) !=
            0) {
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
