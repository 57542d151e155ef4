/* SPDX-License-Identifier: MIT */
/*
 * import.h: tide.v1.Graph (protobuf) <-> graph IR.
 *
 * Import is the wire boundary: it validates everything that arrives and never
 * asserts on it. A refused graph gets a status and a message that names the
 * node and the problem: unknown op, missing/duplicate/dangling input, duplicate
 * name, cycle, arity, attributes, dtypes, shapes, limits, malformed protobuf.
 * Only import.c, export.c and daemon/ touch protobuf-c structs.
 *
 * Example usage:
 *
 *     struct tide_graph *g;
 *     struct tide_error err;
 *     if (tide_graph_import(buf, len, NULL, &g, &err) != TIDE_OK)
 *         reply_invalid_argument(err.message);
 *     ...
 *     tide_graph_free(g);
 */
#ifndef TIDE_GRAPH_IMPORT_H
#define TIDE_GRAPH_IMPORT_H

#include <stddef.h>

#include "graph/graph.h"
#include "tide/v1/tide.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Parses a serialized tide.v1.Graph, validates it and infers shapes
 * (tide_graph_infer). On success *out is a new graph the caller frees; on
 * failure *out is NULL and err names the problem. limits NULL: defaults.
 */
enum tide_status tide_graph_import(const void *data, size_t len,
                                   const struct tide_graph_limits *limits, struct tide_graph **out,
                                   struct tide_error *err);

/* The same, from a message the caller has already unpacked (the daemon's JobSpec). */
enum tide_status tide_graph_import_message(const Tide__V1__Graph *msg,
                                           const struct tide_graph_limits *limits,
                                           struct tide_graph **out, struct tide_error *err);

/*
 * Serializes a graph to tide.v1.Graph bytes: *data is malloc'd, the caller
 * frees it. Attributes are written only where present (set explicitly), so
 * import(export(g)) gives back the same nodes, edges, attributes and shapes.
 */
enum tide_status tide_graph_export(const struct tide_graph *graph, void **data, size_t *len,
                                   struct tide_error *err);

/* Builds the message in arena (freed with the arena, not with free_unpacked). */
enum tide_status tide_graph_export_message(const struct tide_graph *graph, struct tide_arena *arena,
                                           Tide__V1__Graph **out, struct tide_error *err);

/* Converts between wire tensors and IR constant tensors (for feeds and fetches). */
enum tide_status tide_tensor_from_proto(const Tide__V1__Tensor *msg, struct tide_arena *arena,
                                        struct tide_const_tensor *out, const char *what,
                                        struct tide_error *err);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_GRAPH_IMPORT_H */
