/* SPDX-License-Identifier: MIT */
/*
 * onnx/training.c: an imported ONNX model made into a training graph (the
 * API is tide/onnx.h): the model through tide_onnx_import, then the loss the
 * user names on the prediction output, written with the public builder, so
 * that tidectl (which submits it to the daemon) and tide-bench (which runs it
 * in-process) train one and the same graph. The loss is spelled as tide's
 * own models spell theirs (SoftmaxCrossEntropy then ReduceMean, "labels" and
 * "loss"), so gradients and updates come from autodiff as for any graph.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide/dataset.h"
#include "tide/onnx.h"

/* The names of the nodes the loss adds, as tide's models name theirs (tide/models.h). */
#define LABELS_NAME "labels"
#define LOSS_NAME   "loss"

static const char *const loss_names[] = {
    [TIDE_ONNX_LOSS_XENT] = "xent",
    [TIDE_ONNX_LOSS_MSE] = "mse",
    [TIDE_ONNX_LOSS_NONE] = "none",
};

int tide_onnx_loss_parse(const char *name, enum tide_onnx_loss *out)
{
    for (size_t k = 0; name && k < sizeof(loss_names) / sizeof(loss_names[0]); k++) {
        if (strcmp(name, loss_names[k]) == 0) {
            *out = (enum tide_onnx_loss)k;
            return 0;
        }
    }
    return -1;
}

const char *tide_onnx_loss_name(enum tide_onnx_loss loss)
{
    if ((unsigned)loss >= sizeof(loss_names) / sizeof(loss_names[0]))
        return NULL;
    return loss_names[loss];
}

int tide_onnx_split_names(const char *list, char **copy, const char ***names, size_t *n)
{
    *copy = NULL, *names = NULL, *n = 0;
    if (!list)
        return 0;
    *copy = strdup(list);
    *names = calloc(strlen(list) / 2 + 2, sizeof(**names)); /* at most one per two bytes, + 1 */
    if (!*copy || !*names) {
        free(*copy), free((void *)*names);
        *copy = NULL, *names = NULL;
        return -1;
    }
    for (char *save = NULL, *name = strtok_r(*copy, ",", &save); name;
         name = strtok_r(NULL, ",", &save))
        (*names)[(*n)++] = name;
    return 0;
}

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t size, const char *fmt, ...)
{
    if (err && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int tide_onnx_parse_dims(const char *list, char **copy, struct tide_onnx_dim **dims, size_t *n,
                         char *err, size_t err_size)
{
    *copy = NULL, *dims = NULL, *n = 0;
    if (!list)
        return 0;
    *copy = strdup(list);
    *dims = calloc(strlen(list) / 2 + 2, sizeof(**dims)); /* at most one per two bytes, + 1 */
    if (!*copy || !*dims) {
        free(*copy), free(*dims);
        *copy = NULL, *dims = NULL;
        return fail(err, err_size, "out of memory");
    }
    const char *why = NULL, *entry = NULL;
    for (char *save = NULL, *e = strtok_r(*copy, ",", &save); e && !why;
         e = strtok_r(NULL, ",", &save)) {
        entry = e;
        char *eq = strchr(e, '='), *end = NULL;
        size_t name_len = eq ? (size_t)(eq - e) : 0;
        errno = 0;
        long long size = name_len ? strtoll(eq + 1, &end, 10) : 0;
        if (!name_len)
            why = "is not NAME=SIZE (as seq=128)";
        else if (end == eq + 1 || *end || errno || size < 1 || size > INT32_MAX)
            why = "has a SIZE that is not a whole number from 1 to 2147483647";
        for (size_t k = 0; k < *n && !why; k++)
            if (strlen((*dims)[k].name) == name_len && strncmp((*dims)[k].name, e, name_len) == 0)
                why = "names a dimension given before";
        if (!why) {
            *eq = 0; /* the name ends at its '=' */
            (*dims)[(*n)++] = (struct tide_onnx_dim){e, (int64_t)size};
        }
    }
    if (why) {
        fail(err, err_size, "dimension \"%s\" %s", entry, why);
        free(*copy), free(*dims);
        *copy = NULL, *dims = NULL, *n = 0;
        return -1;
    }
    return 0;
}

/* Fills t with the name, dtype and shape of ref's output; -1 when ref names none. */
static int describe(const tide_builder *b, tide_ref ref, struct tide_onnx_tensor *t)
{
    const char *name = tide_builder_name(b, ref);
    if (!name || tide_builder_shape(b, ref, t->dims, &t->rank) != 0)
        return -1;
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->dtype = tide_builder_dtype(b, ref);
    t->elements = 1;
    for (int32_t k = 0; k < t->rank; k++)
        t->elements *= t->dims[k];
    return 0;
}

/* Formats a shape as "[4, 32, 256]" into buf. */
static const char *fmt_dims(const struct tide_onnx_tensor *t, char *buf, size_t size)
{
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int32_t k = 0; k < t->rank && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, k ? ", " : "", t->dims[k]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

/* The prediction output: the one named (by its ONNX name), or the model's first. */
static int find_output(tide_builder *b, const struct tide_onnx_result *r, const char *want,
                       tide_ref *out, char *err, size_t size)
{
    if (r->n_outputs == 0)
        return fail(err, size, "the model has no graph output");
    if (!want) {
        *out = r->outputs[0];
        return 0;
    }
    /* Graph outputs are Identity nodes named after the ONNX outputs, sanitised as names are. */
    char listed[512] = "";
    size_t n = 0;
    for (int32_t k = 0; k < r->n_outputs; k++) {
        const char *name = tide_builder_name(b, r->outputs[k]);
        if (strcmp(name, want) == 0) {
            *out = r->outputs[k];
            return 0;
        }
        if (n < sizeof(listed))
            n += (size_t)snprintf(listed + n, sizeof(listed) - n, "%s%s", k ? ", " : "", name);
    }
    return fail(err, size, "the model has no output \"%s\"; its outputs: %s", want, listed);
}

/* Adds the loss on the output; fills out's labels and loss. */
static int add_loss(tide_builder *b, const struct tide_onnx_training_options *o, tide_ref output,
                    struct tide_onnx_training *out, char *err, size_t size)
{
    const struct tide_onnx_tensor *y = &out->output;
    char shape[160];
    if (y->dtype != TIDE_DT_FLOAT32)
        return fail(err, size, "output \"%s\" is not float32: it cannot be trained", y->name);
    if (o->loss == TIDE_ONNX_LOSS_NONE) {
        if (y->rank != 0)
            return fail(err, size, "loss none wants the output to be the scalar loss; \"%s\" is %s",
                        y->name, fmt_dims(y, shape, sizeof(shape)));
        snprintf(out->loss, sizeof(out->loss), "%s", y->name);
        return 0;
    }
    if (tide_builder_find(b, LABELS_NAME).id >= 0 || tide_builder_find(b, LOSS_NAME).id >= 0)
        return fail(err, size,
                    "the model already has a value named \"" LABELS_NAME "\" or \"" LOSS_NAME
                    "\", the names of the loss's feed and result");
    tide_ref loss;
    if (o->loss == TIDE_ONNX_LOSS_MSE) {
        tide_ref t = tide_builder_placeholder(b, LABELS_NAME, TIDE_DT_FLOAT32, y->rank, y->dims);
        tide_ref d = tide_builder_sub(b, NULL, output, t);
        loss =
            tide_builder_reduce_mean(b, LOSS_NAME, tide_builder_mul(b, NULL, d, d), NULL, 0, false);
    } else if (y->rank == 2) {
        tide_ref t = tide_builder_placeholder(b, LABELS_NAME, TIDE_DT_INT32, 1, y->dims);
        tide_ref xent = tide_builder_softmax_cross_entropy(b, NULL, output, t);
        loss = tide_builder_reduce_mean(b, LOSS_NAME, xent, NULL, 0, false);
        out->classes = y->dims[1];
    } else if (y->rank == 3) {
        /* A language model's logits [B, S, V]: every token is a row. */
        int64_t rows = y->dims[0] * y->dims[1];
        tide_ref t = tide_builder_placeholder(b, LABELS_NAME, TIDE_DT_INT32, 2, y->dims);
        tide_ref logits = tide_builder_reshape(b, NULL, output, 2, (int64_t[]){rows, y->dims[2]});
        tide_ref flat = tide_builder_reshape(b, NULL, t, 1, &rows);
        tide_ref xent = tide_builder_softmax_cross_entropy(b, NULL, logits, flat);
        loss = tide_builder_reduce_mean(b, LOSS_NAME, xent, NULL, 0, false);
        out->classes = y->dims[2];
    } else {
        return fail(err, size,
                    "loss xent wants an output [batch, classes] or [batch, sequence, "
                    "classes]; \"%s\" is %s",
                    y->name, fmt_dims(y, shape, sizeof(shape)));
    }
    if (loss.id < 0)
        return fail(err, size, "adding the loss: %s", tide_builder_error(b));
    if (describe(b, tide_builder_find(b, LABELS_NAME), &out->labels) != 0)
        return fail(err, size, "the labels placeholder is missing");
    snprintf(out->loss, sizeof(out->loss), "%s", LOSS_NAME);
    return 0;
}

int tide_onnx_training_graph(const uint8_t *bytes, size_t len,
                             const struct tide_onnx_training_options *options,
                             struct tide_onnx_training *out, char *err, size_t err_size)
{
    static const struct tide_onnx_training_options defaults = {0};
    const struct tide_onnx_training_options *o = options ? options : &defaults;
    memset(out, 0, sizeof(*out));
    if (err && err_size)
        err[0] = 0;
    if (!tide_onnx_loss_name(o->loss))
        return fail(err, err_size, "loss %d is not one of xent, mse, none", (int)o->loss);
    tide_builder *b = tide_builder_new();
    if (!b)
        return fail(err, err_size, "out of memory");
    struct tide_onnx_options io = {.batch_size = o->batch_size,
                                   .dims = o->dims,
                                   .n_dims = o->n_dims,
                                   .frozen = o->frozen,
                                   .n_frozen = o->n_frozen};
    struct tide_onnx_result r;
    int rc = -1;
    if (tide_onnx_import(b, bytes, len, &io, &r, err, err_size) != 0)
        goto out;
    tide_ref output;
    /*
     * Loss none: one input, the examples, and maybe a second, the labels the
     * model's own loss reads. Else every graph input is examples (a BERT's
     * ids and mask), all sharing the batch.
     */
    bool own_loss = o->loss == TIDE_ONNX_LOSS_NONE;
    if (own_loss && r.n_inputs != 1 && r.n_inputs != 2) {
        fail(err, err_size,
             "the model has %d graph inputs besides its initializers; with loss none tide "
             "trains a model of one input, the batch of examples, or two: the examples and the "
             "labels its own loss reads",
             (int)r.n_inputs);
        goto out;
    }
    if (!own_loss && (r.n_inputs < 1 || r.n_inputs > TIDE_ONNX_MAX_INPUTS)) {
        fail(err, err_size,
             "the model has %d graph inputs besides its initializers; tide trains a model of 1 "
             "to %d inputs of examples",
             (int)r.n_inputs, TIDE_ONNX_MAX_INPUTS);
        goto out;
    }
    if (own_loss && r.n_inputs == 2 && describe(b, r.inputs[1], &out->labels) != 0) {
        fail(err, err_size, "%s", tide_builder_error(b));
        goto out;
    }
    out->n_inputs = own_loss ? 1 : r.n_inputs;
    for (int32_t k = 0; k < out->n_inputs; k++) {
        struct tide_onnx_tensor *in = &out->inputs[k];
        if (describe(b, r.inputs[k], in) != 0 || in->rank < 1) {
            fail(err, err_size, "input \"%s\" is a scalar: it has no batch dimension",
                 tide_builder_name(b, r.inputs[k]));
            goto out;
        }
        if (in->dims[0] != out->inputs[0].dims[0]) {
            char first[160], this[160];
            fail(err, err_size,
                 "inputs \"%s\" %s and \"%s\" %s differ in their first dimension, the batch "
                 "both must share",
                 out->inputs[0].name, fmt_dims(&out->inputs[0], first, sizeof(first)), in->name,
                 fmt_dims(in, this, sizeof(this)));
            goto out;
        }
    }
    out->input = out->inputs[0];
    out->batch = out->input.dims[0];
    out->opset = r.opset;
    out->inference_batch_norms = r.inference_batch_norms;
    if (find_output(b, &r, o->output, &output, err, err_size) != 0 ||
        describe(b, output, &out->output) != 0 || add_loss(b, o, output, out, err, err_size) != 0)
        goto out;
    out->parameters = tide_builder_parameter_count(b);
    if (tide_builder_serialize(b, &out->graph, &out->graph_len) != 0) {
        fail(err, err_size, "%s", tide_builder_error(b));
        goto out;
    }
    rc = 0;
out:
    tide_onnx_result_free(&r);
    tide_builder_free(b);
    if (rc != 0) {
        free(out->graph);
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

/* Formats dims[0 .. rank - 1] as "[4, 32]" into buf. */
static const char *fmt_shape(const int64_t *dims, int32_t rank, char *buf, size_t size)
{
    struct tide_onnx_tensor t = {.rank = rank};
    if (rank > 0)
        memcpy(t.dims, dims, (size_t)rank * sizeof(int64_t));
    return fmt_dims(&t, buf, size);
}

/* "float32" or "int32", for messages. */
static const char *dtype_word(enum tide_data_type dtype)
{
    return dtype == TIDE_DT_FLOAT32 ? "float32" : dtype == TIDE_DT_INT32 ? "int32" : "other";
}

int tide_onnx_training_check_feeds(const struct tide_onnx_training *t, int64_t batch, int32_t n,
                                   const enum tide_data_type *dtypes,
                                   const int64_t *example_elements, const char *const *sources,
                                   enum tide_data_type label_dtype, const int64_t *label_dims,
                                   int32_t label_rank, int32_t classes, char *err, size_t err_size)
{
    if (batch && t->batch != batch)
        return fail(err, err_size,
                    "the model has a static batch of %" PRId64 ": a batch of %" PRId64
                    " can only stand for a dynamic batch dimension (export the model with the "
                    "batch you want)",
                    t->batch, batch);
    /* A tide_onnx_training filled before n_inputs existed has its one input in input. */
    int32_t n_inputs = t->n_inputs > 0 ? t->n_inputs : 1;
    const struct tide_onnx_tensor *inputs = t->n_inputs > 0 ? t->inputs : &t->input;
    if (n != n_inputs) {
        char listed[TIDE_ONNX_MAX_INPUTS * (TIDE_BUILDER_MAX_NAME + 4)] = "";
        size_t used = 0;
        for (int32_t k = 0; k < n_inputs && used < sizeof(listed); k++)
            used += (size_t)snprintf(listed + used, sizeof(listed) - used, "%s\"%s\"",
                                     k ? ", " : "", inputs[k].name);
        return fail(err, err_size,
                    "the model has %d graph inputs of examples (%s) but the examples come in %d "
                    "array%s: give one per input, in the model's order",
                    (int)n_inputs, listed, (int)n, n == 1 ? "" : "s");
    }
    for (int32_t k = 0; k < n; k++) {
        const struct tide_onnx_tensor *in = &inputs[k];
        if (in->dtype == dtypes[k] && in->elements == t->batch * example_elements[k])
            continue;
        if (sources && sources[k])
            return fail(err, err_size,
                        "input \"%s\" takes %" PRId64 " %s values per batch of %" PRId64
                        "; the examples of %s are %" PRId64 " %s values each",
                        in->name, in->elements, dtype_word(in->dtype), t->batch, sources[k],
                        example_elements[k], dtype_word(dtypes[k]));
        return fail(err, err_size,
                    "input \"%s\" takes %" PRId64 " %s values per batch of %" PRId64
                    "; the examples are %" PRId64 " %s values each",
                    in->name, in->elements, dtype_word(in->dtype), t->batch, example_elements[k],
                    dtype_word(dtypes[k]));
    }
    const struct tide_onnx_tensor *l = &t->labels;
    if (!l->name[0])
        return fail(err, err_size,
                    "loss none: the model's graph inputs are \"%s\" only, so there is no "
                    "input to feed the labels to (a model that computes its own loss takes its "
                    "labels as a second graph input)",
                    t->input.name);
    char who[TIDE_BUILDER_MAX_NAME + 64], want[160], have[160];
    if (strcmp(t->loss, l->name) != 0 && strcmp(t->loss, t->output.name) == 0)
        snprintf(who, sizeof(who), "the model's labels input \"%s\"", l->name);
    else
        snprintf(who, sizeof(who), "the loss on output \"%s\"", t->output.name);
    if (l->rank < 1 || l->dims[0] != t->batch)
        return fail(err, err_size, "%s is %s: its first dimension must be the batch, %" PRId64, who,
                    fmt_dims(l, want, sizeof(want)), t->batch);
    fmt_shape(l->dims + 1, l->rank - 1, want, sizeof(want));
    fmt_shape(label_dims, label_rank, have, sizeof(have));
    const char *want_kind = l->dtype == TIDE_DT_FLOAT32 ? "float32 targets" : "int class labels";
    const char *have_kind =
        label_dtype == TIDE_DT_FLOAT32 ? "float32 targets" : "int class labels (int32)";
    bool same = l->dtype == label_dtype && l->rank - 1 == label_rank;
    for (int32_t k = 0; same && k < label_rank; k++)
        same = l->dims[k + 1] == label_dims[k];
    if (!same)
        return fail(err, err_size,
                    "%s wants %s of shape %s an example; the labels are %s of shape %s an "
                    "example",
                    who, want_kind, want, have_kind, have);
    if (t->classes > 0 && classes > t->classes)
        return fail(err, err_size, "the examples have %d classes; output \"%s\" scores %" PRId64,
                    (int)classes, t->output.name, t->classes);
    return 0;
}

int tide_onnx_training_check_dataset(const struct tide_onnx_training *t, int64_t batch,
                                     int64_t example_elements, enum tide_data_type label_dtype,
                                     const int64_t *label_dims, int32_t label_rank, int32_t classes,
                                     char *err, size_t err_size)
{
    enum tide_data_type dtype = TIDE_DT_FLOAT32;
    return tide_onnx_training_check_feeds(t, batch, 1, &dtype, &example_elements, NULL, label_dtype,
                                          label_dims, label_rank, classes, err, err_size);
}

int tide_onnx_training_check_examples(const struct tide_onnx_training *t, int64_t batch,
                                      int64_t example_elements, int32_t classes, char *err,
                                      size_t err_size)
{
    return tide_onnx_training_check_dataset(t, batch, example_elements, TIDE_DT_INT32, NULL, 0,
                                            classes, err, err_size);
}

void tide_onnx_training_free(struct tide_onnx_training *out)
{
    if (!out)
        return;
    free(out->graph);
    memset(out, 0, sizeof(*out));
}

int tide_onnx_training_synthetic(const struct tide_onnx_training *t,
                                 struct tide_synthetic_options *s, char *err, size_t err_size)
{
    const struct tide_onnx_tensor *in = &t->input;
    if (t->n_inputs > 1)
        return fail(err, err_size,
                    "--dataset synthetic makes one float32 array of examples, and the model has "
                    "%d graph inputs of examples (\"%s\", \"%s\"%s): give one file per input, "
                    "--data A,B",
                    (int)t->n_inputs, t->inputs[0].name, t->inputs[1].name,
                    t->n_inputs > 2 ? ", ..." : "");
    if (in->dtype != TIDE_DT_FLOAT32)
        return fail(err, err_size,
                    "--dataset synthetic makes float32 examples, and input \"%s\" takes int32 "
                    "values (token ids, indices): give them in a file, --data",
                    in->name);
    int64_t d[3] = {1, 1, 1}; /* channels, height, width */
    for (int32_t a = 1; a < in->rank; a++) {
        int32_t k = 3 - (in->rank - a);
        d[k < 0 ? 0 : k] *= in->dims[a];
    }
    s->channels = d[0], s->height = d[1], s->width = d[2];
    if (t->classes > 0 && t->classes <= 65536)
        s->classes = (int32_t)t->classes;
    return 0;
}

const char *tide_onnx_training_note(const struct tide_onnx_training *t, char *buf, size_t size)
{
    if (size == 0)
        return buf;
    buf[0] = 0;
    int32_t n = t->inference_batch_norms;
    if (n > 0)
        snprintf(buf, size,
                 "%d BatchNormalization node%s %s in inference mode (an eval-mode export): %s "
                 "running statistics stay fixed while the model trains, as in PyTorch's .eval(); "
                 "export with training=torch.onnx.TrainingMode.TRAINING to normalise with each "
                 "batch's statistics",
                 (int)n, n == 1 ? "" : "s", n == 1 ? "is" : "are", n == 1 ? "its" : "their");
    return buf;
}
