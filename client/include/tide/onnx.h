/* SPDX-License-Identifier: MIT */
/*
 * tide/onnx.h: ONNX import into a graph builder; an imported model made a
 * training graph (tide_onnx_training_graph), and written back with trained
 * weights (tide_onnx_with_values).
 *
 * tide_onnx_import() reads the bytes of an ONNX ModelProto (a .onnx file as
 * PyTorch's torch.onnx.export writes it) and adds the model's graph to a
 * tide_builder (tide/graph.h), so that the caller can add a loss and submit
 * it like any graph it built itself. Parsing stays in the client: the daemon
 * accepts only tide.v1.Graph.
 *
 * What becomes what:
 *   - a graph input that is not an initializer -> a Placeholder named after
 *     it (float32, or int32 for int32/int64 inputs). Every dimension must be
 *     known. A dynamic one (a dim_param such as "seq", or none) takes its
 *     size from options.dims by its name; else, when it is the batch
 *     (dimension 0 of an input, or a dim_param that names some input's
 *     dimension 0), from options.batch_size; else it is an error naming the
 *     input, the dimension and its name;
 *   - a float initializer -> a trainable Variable with the initializer's
 *     values, or a Const when options.frozen lists it;
 *   - an integer initializer -> an int32 Const (int64 values that do not fit
 *     in 32 bits are refused);
 *   - each node -> one or a few tide ops; nodes whose inputs are all
 *     constants and which compute shapes (Shape, Gather, Concat, Unsqueeze,
 *     Squeeze, Constant, ConstantOfShape, Cast, Range, Equal, integer
 *     arithmetic) are evaluated at import, on the host;
 *   - each graph output -> an Identity node named after it.
 * Names are kept where tide allows them: a byte outside [A-Za-z0-9_./-]
 * becomes '_', and a name already taken gets a suffix "_1", "_2", ...; the
 * result's refs give the names used (tide_builder_name). Nodes made for the
 * model's inner values get automatic names under the scope "onnx/".
 *
 * Opsets 1 to 27 of the default domain are accepted, each op read as the
 * version the opset selects (the newest at or below it). A node tide cannot
 * express exactly is refused with "node <name> (<op>, opset <n>): <why>";
 * docs/onnx.md lists what is imported and what is refused.
 *
 * Ownership: the bytes are only read during the call. The refs in
 * struct tide_onnx_result point into the builder; their arrays are malloc'd
 * and freed by tide_onnx_result_free().
 *
 * Example usage:
 *
 *     struct tide_onnx_options o = {.batch_size = 64};
 *     struct tide_onnx_result r;
 *     char err[512];
 *     if (tide_onnx_import(b, bytes, len, &o, &r, err, sizeof(err)) != 0)
 *         fprintf(stderr, "model.onnx: %s\n", err);
 *     tide_ref logits = r.outputs[0];    // name: tide_builder_name(b, logits)
 *     tide_ref labels = tide_builder_placeholder(b, "labels", TIDE_DT_INT32, 1, (int64_t[]){64});
 *     tide_ref xent = tide_builder_softmax_cross_entropy(b, NULL, logits, labels);
 *     tide_builder_reduce_mean(b, "loss", xent, NULL, 0, false);
 *     tide_onnx_result_free(&r);
 */
#ifndef TIDE_ONNX_H
#define TIDE_ONNX_H

#include <stddef.h>
#include <stdint.h>

#include "tide/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The size of the dynamic dimensions named name (an ONNX dim_param, such as "seq"). */
struct tide_onnx_dim {
    const char *name;
    int64_t size; /* > 0 */
};

/* Options of tide_onnx_import; all zero (or a NULL pointer) is the default. */
struct tide_onnx_options {
    /*
     * The size of the batch: the graph inputs' dynamic dimension 0, and any
     * other dynamic dimension of the same name (dim_param) as one of those;
     * 0: such a dimension is an error (unless dims names it).
     */
    int64_t batch_size;
    /*
     * Sizes of dynamic dimensions by name, before batch_size: a model exported
     * with dynamic_axes {0: "batch", 1: "seq"} takes seq here. A name that no
     * dynamic dimension of the graph inputs has is an error (a typo would
     * otherwise go unseen).
     */
    const struct tide_onnx_dim *dims;
    size_t n_dims;
    /* Names of float initializers to import as Consts, not trainable Variables. */
    const char *const *frozen;
    size_t n_frozen;
};

/*
 * A float initializer that became a trainable Variable: its name in the
 * model, and the Variable's name in the graph (the ONNX name with bytes
 * outside [A-Za-z0-9_./-] made '_', and a suffix where the name was taken).
 */
struct tide_onnx_variable {
    char *onnx_name; /* malloc'd */
    char *name;      /* malloc'd */
};

/* What an import added: refs to the model's inputs and outputs, in the model's order. */
struct tide_onnx_result {
    tide_ref *inputs; /* malloc'd: the Placeholders (initializers are not inputs here) */
    int32_t n_inputs;
    tide_ref *outputs; /* malloc'd: the Identity nodes named after the graph outputs */
    int32_t n_outputs;
    /*
     * malloc'd, n_inputs and n_outputs long: true where the ONNX tensor is bool. tide has no
     * bool type: such an input is a float32 Placeholder fed 0 and 1, such an output a float32
     * mask of 0 and 1 (comparisons, And, Or, Not, Xor and bool Casts compute them).
     */
    bool *input_bool;
    bool *output_bool;
    int64_t opset; /* the model's opset of the default domain */
    struct tide_onnx_variable *variables; /* malloc'd: the Variables made, in the order made */
    int32_t n_variables;
    /*
     * BatchNormalization nodes in inference mode (a model exported in eval mode): they
     * normalise with their running statistics, which stay fixed while the model trains, as
     * PyTorch's BatchNorm in .eval(). Tools say so, since an eval-mode export is PyTorch's
     * default and a user may have meant to train the statistics.
     */
    int32_t inference_batch_norms;
};

/*
 * Adds the ONNX model in bytes[0..len) to builder b. Returns 0 and fills
 * *result (which may be NULL when not wanted), or -1 with a message in
 * err[0..err_size) (truncated to fit) naming the node, op and opset, the
 * input or the initializer at fault; on failure the builder may hold part of
 * the model and *result is zeroed. options may be NULL.
 */
int tide_onnx_import(tide_builder *b, const uint8_t *bytes, size_t len,
                     const struct tide_onnx_options *options, struct tide_onnx_result *result,
                     char *err, size_t err_size);

/* Frees the arrays (and the names) of a result and zeroes it. NULL is a no-op. */
void tide_onnx_result_free(struct tide_onnx_result *result);

/* ============================================================================
 * Training an imported model (onnx/training.c)
 * ========================================================================== */

/* What to minimise on the prediction output; tide_onnx_loss_parse() reads the names. */
enum tide_onnx_loss {
    /*
     * "xent": softmax cross-entropy against int32 class labels, the mean
     * over rows. An output [B, C] takes labels [B]; an output [B, S, V] (a
     * language model's logits) takes labels [B, S] and is read as [B * S, V],
     * the mean being over all B * S tokens. Other ranks are refused.
     */
    TIDE_ONNX_LOSS_XENT = 0,
    /* "mse": the mean of (output - target)^2 over every element; float32 targets of the output's shape. */
    TIDE_ONNX_LOSS_MSE = 1,
    /* "none": the output is the model's own scalar loss; no labels. */
    TIDE_ONNX_LOSS_NONE = 2,
};

/* Reads "xent", "mse" or "none" into *out: 0, or -1 for another name. */
int tide_onnx_loss_parse(const char *name, enum tide_onnx_loss *out);

/* The name of a loss ("xent", "mse", "none"), or NULL for a value outside the enum. */
const char *tide_onnx_loss_name(enum tide_onnx_loss loss);

/*
 * Splits a comma-separated list of initializer names, as tidectl's and
 * tide-bench's --frozen take it ("h.0.attn.mask,h.1.attn.mask"), into
 * (*names)[0..*n): pointers into *copy, a malloc'd copy of list cut at the
 * commas; empty names are skipped. The caller frees *names and *copy. A
 * NULL list gives no names. Returns 0, or -1 when out of memory (both
 * NULL).
 */
int tide_onnx_split_names(const char *list, char **copy, const char ***names, size_t *n);

/*
 * Splits a comma-separated list of NAME=SIZE, as tidectl's and tide-bench's
 * --dim take it ("seq=128,heads=4"), into (*dims)[0..*n), whose names point
 * into *copy, a malloc'd copy of list. Each SIZE is a decimal integer from 1
 * to 2^31 - 1, each NAME non-empty and given once. The caller frees *dims
 * and *copy. A NULL list gives none. Returns 0, or -1 with a message in err
 * naming the entry at fault (both NULL).
 */
int tide_onnx_parse_dims(const char *list, char **copy, struct tide_onnx_dim **dims, size_t *n,
                         char *err, size_t err_size);

/* Options of tide_onnx_training_graph; all zero is the default. */
struct tide_onnx_training_options {
    int64_t batch_size; /* as tide_onnx_options.batch_size: the batch's dynamic dims */
    const struct tide_onnx_dim *dims; /* as tide_onnx_options.dims: other dynamic dims by name */
    size_t n_dims;
    const char *output;          /* the prediction output's ONNX name; NULL: the model's first */
    enum tide_onnx_loss loss;    /* default xent */
    const char *const *frozen;   /* float initializers to keep as they are (buffers) */
    size_t n_frozen;
};

/* The names and shapes of one tensor the caller feeds or fetches. */
struct tide_onnx_tensor {
    char name[TIDE_BUILDER_MAX_NAME + 1]; /* "" when there is none */
    enum tide_data_type dtype;
    int32_t rank;
    int64_t dims[TIDE_BUILDER_MAX_RANK];
    int64_t elements; /* the product of dims */
};

/* The most graph inputs of examples a trained model may have (a BERT's ids, mask, types: 3). */
#define TIDE_ONNX_MAX_INPUTS 8

/* A training graph made from a model: the graph's bytes and what a step feeds and fetches. */
struct tide_onnx_training {
    uint8_t *graph; /* malloc'd tide.v1.Graph bytes; freed by tide_onnx_training_free() */
    size_t graph_len;
    struct tide_onnx_tensor input;  /* the model's first graph input (a Placeholder): inputs[0] */
    /*
     * Every graph input of examples, in the model's order, each [batch, ...]
     * (loss none: the first only, the second being the labels).
     */
    struct tide_onnx_tensor inputs[TIDE_ONNX_MAX_INPUTS];
    int32_t n_inputs;
    struct tide_onnx_tensor labels; /* "labels"; loss none: the model's second input, or "" */
    struct tide_onnx_tensor output; /* the prediction output, to fetch */
    char loss[TIDE_BUILDER_MAX_NAME + 1]; /* the scalar to minimise: "loss", or the output's name */
    int64_t batch;      /* the input's first dimension */
    int64_t classes;    /* xent: the output's last dimension; else 0 */
    int64_t parameters; /* elements of the trainable Variables */
    int64_t opset;
    int32_t inference_batch_norms; /* as tide_onnx_result's */
};

/*
 * Imports the ONNX model in bytes[0..len) (tide_onnx_import) and adds the
 * loss the options name on the output they name, so that the result trains
 * like tide's own models: submit or run out->graph with out->loss as what to
 * minimise, feed out->inputs[0 .. n_inputs - 1] and out->labels, fetch
 * out->output. With loss xent or mse the model takes 1 to
 * TIDE_ONNX_MAX_INPUTS graph inputs (initializers aside; a BERT's input_ids
 * and attention_mask), each of rank >= 1 and all of one first dimension,
 * the batch (refused naming both inputs and shapes where they differ). With
 * loss none it takes the examples as its one graph input and may have a
 * second, the labels its own loss reads (then out->labels names it).
 * Returns 0, or -1 with a message in err[0..err_size) (the import's, or
 * which input, output, loss or shape does not fit); out is zeroed on
 * failure.
 */
int tide_onnx_training_graph(const uint8_t *bytes, size_t len,
                             const struct tide_onnx_training_options *options,
                             struct tide_onnx_training *out, char *err, size_t err_size);

/*
 * Checks that class-labelled examples, as the datasets of tide/dataset.h
 * give them, feed t: float32 examples of example_elements values each (the
 * input holds t->batch of them), one int32 label per example (loss xent on
 * an output [batch, classes]) of at most t->classes classes, and, when
 * batch is not 0 (a batch size the user asked for), that t's batch is that
 * one: a static batch is the model's. Returns 0, or -1 with what does not
 * fit in err[0..err_size).
 */
int tide_onnx_training_check_examples(const struct tide_onnx_training *t, int64_t batch,
                                      int64_t example_elements, int32_t classes, char *err,
                                      size_t err_size);

/*
 * What a tool should tell its user about t before training it, in
 * buf[0..size) ("" when nothing): inference-mode BatchNormalization nodes
 * (an eval-mode export, PyTorch's default), whose running statistics stay
 * fixed while the model trains, and how to export instead. Returns buf.
 */
const char *tide_onnx_training_note(const struct tide_onnx_training *t, char *buf, size_t size);

struct tide_synthetic_options; /* tide/dataset.h */

/*
 * Shapes the synthetic dataset (tide/dataset.h) to feed t: the example
 * shape of t's first input as channels, height and width (its last three
 * dims after the batch; any before them merged into channels, fewer
 * leaving ones) and, for loss xent, t's classes as the labels' count. Sets
 * those four fields of s only. Returns 0, or -1 with a message in err when
 * synthetic examples cannot feed t: they are one float32 array, so a model
 * of several graph inputs of examples, or of an int input (token ids), is
 * refused naming the inputs and pointing to --data.
 */
int tide_onnx_training_synthetic(const struct tide_onnx_training *t,
                                 struct tide_synthetic_options *s, char *err, size_t err_size);

/*
 * As tide_onnx_training_check_examples, for examples whose labels are of
 * label_dtype (TIDE_DT_INT32 class indices, or TIDE_DT_FLOAT32 targets) and
 * of shape label_dims[0 .. label_rank - 1] each (rank 0: one per example):
 * they must be what t->labels takes example by example (loss mse: float32
 * targets of the output's per-example shape; loss none: the model's second
 * graph input, whose first dimension is the batch). With loss none and no
 * second graph input there is nothing to feed labels to: refused, naming
 * the input the graph has. Messages name both shapes and both kinds.
 * classes is checked against t->classes for xent only.
 */
int tide_onnx_training_check_dataset(const struct tide_onnx_training *t, int64_t batch,
                                     int64_t example_elements, enum tide_data_type label_dtype,
                                     const int64_t *label_dims, int32_t label_rank,
                                     int32_t classes, char *err, size_t err_size);

/*
 * As tide_onnx_training_check_dataset, for examples that come in n arrays,
 * one for each of t->inputs in order (a BERT's ids and mask): array k holds
 * example_elements[k] values of dtypes[k] (TIDE_DT_FLOAT32, or TIDE_DT_INT32
 * for integer files) an example, which must be what input k takes per
 * example. sources (NULL, or NULL entries) names the arrays in messages (a
 * file). n other than t->n_inputs is refused, naming the model's inputs.
 */
int tide_onnx_training_check_feeds(const struct tide_onnx_training *t, int64_t batch, int32_t n,
                                   const enum tide_data_type *dtypes,
                                   const int64_t *example_elements, const char *const *sources,
                                   enum tide_data_type label_dtype, const int64_t *label_dims,
                                   int32_t label_rank, int32_t classes, char *err,
                                   size_t err_size);

/* Frees the graph bytes of out and zeroes it. NULL is a no-op. */
void tide_onnx_training_free(struct tide_onnx_training *out);

/* ============================================================================
 * Weights out as ONNX (onnx/export.c)
 * ========================================================================== */

/*
 * Writes the ONNX model bytes[0..len) back with the trained values of its
 * Variables: each float initializer that tide_onnx_import (with the same
 * frozen list: frozen may be NULL when n_frozen is 0) makes a Variable gets
 * the values of the tensor in values[0..n_values) named as that Variable
 * (tide names, as tide_client_read_variables and sessions give them),
 * float32 and of the initializer's shape, stored little-endian in
 * raw_data. Everything else in the model is kept. Every Variable must have
 * its tensor. On success *out holds a malloc'd serialized ModelProto
 * (free() it) of *out_len bytes, and *replaced (when not NULL) the number of
 * initializers replaced; -1 with a message otherwise.
 */
struct tide_tensor;
int tide_onnx_with_values(const uint8_t *bytes, size_t len, const char *const *frozen,
                          size_t n_frozen, const struct tide_tensor *values, size_t n_values,
                          uint8_t **out, size_t *out_len, size_t *replaced, char *err,
                          size_t err_size);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_ONNX_H */
