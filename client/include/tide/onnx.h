/* SPDX-License-Identifier: MIT */
/*
 * tide/onnx.h: ONNX import into a graph builder.
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
 *     known; a dynamic one (dim_param, or none) is an error naming the input,
 *     unless options.batch_size is set, which then stands for every dynamic
 *     dimension;
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
 * Opsets 11 to 17 of the default domain are accepted. A node tide cannot
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

/* Options of tide_onnx_import; all zero (or a NULL pointer) is the default. */
struct tide_onnx_options {
    /*
     * The size that stands for every dynamic dimension of the graph inputs
     * (a dim_param such as "batch_size", or a dimension without a value);
     * 0: a dynamic dimension is an error.
     */
    int64_t batch_size;
    /* Names of float initializers to import as Consts, not trainable Variables. */
    const char *const *frozen;
    size_t n_frozen;
};

/* What an import added: refs to the model's inputs and outputs, in the model's order. */
struct tide_onnx_result {
    tide_ref *inputs; /* malloc'd: the Placeholders (initializers are not inputs here) */
    int32_t n_inputs;
    tide_ref *outputs; /* malloc'd: the Identity nodes named after the graph outputs */
    int32_t n_outputs;
    int64_t opset; /* the model's opset of the default domain */
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

/* Frees the arrays of a result and zeroes it. NULL is a no-op. */
void tide_onnx_result_free(struct tide_onnx_result *result);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_ONNX_H */
