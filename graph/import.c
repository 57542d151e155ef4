/* SPDX-License-Identifier: MIT */
/*
 * import.c: tide.v1.Graph (protobuf) -> graph IR, the wire boundary.
 *
 * Everything here treats the message as hostile: any string may be empty,
 * huge or full of control bytes, any enum may hold a value the schema does
 * not list, any count may be as large as the message allows, and a message
 * built in memory by a caller may even hold NULL sub-messages. Nothing from
 * the message reaches an assert; each fault becomes a status and a message
 * that names the node (by name, or by index and a sanitized name when the
 * name itself is the fault).
 *
 * Import runs in two passes so that inputs may name nodes that come later in
 * the message:
 *
 *   1. nodes: name, op, device and attributes, each checked against the op
 *      table (graph/ops.def) and stored with the tide_attr_set_* setters;
 *   2. edges: each input string parsed ("node", "node:k" with
 *      tide_graph_parse_ref, "^node") and resolved by name to a producer id
 *      and output index.
 *
 * Then tide_graph_infer checks what needs the whole graph (arity, cycles,
 * required attributes, dtypes, shapes, the limits). The work per message is
 * linear in its size: duplicate control inputs are found with one stamp per
 * node rather than by searching, and a node's control array is allocated
 * once (see resolve_inputs).
 */
#include "graph/import.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Wire strings quoted in messages are cut to this many bytes. */
#define SHOWN_MAX 64
/* The op set version this build understands. */
#define GRAPH_VERSION 1
/* Longest device hint, in bytes. */
#define DEVICE_MAX 256

/* ============================================================================
 * Helpers
 * ========================================================================== */

/*
 * Copies a wire string into buf for quoting in a message: at most SHOWN_MAX
 * bytes, bytes outside printable ASCII (and quotes and backslashes, which
 * would make the quoting ambiguous) replaced by '?', and "..." when cut.
 */
static const char *shown(const char *s, char *buf, size_t size)
{
    size_t n = 0;
    if (!s)
        s = "";
    for (; *s && n < SHOWN_MAX && n + 4 < size; s++) {
        unsigned char c = (unsigned char)*s;
        buf[n++] = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
    }
    if (*s && n + 4 <= size) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* The attribute type that a wire AttrValue's oneof case holds, or -1 when none is set. */
static int wire_attr_type(Tide__V1__AttrValue__ValueCase value_case)
{
    switch (value_case) {
    case TIDE__V1__ATTR_VALUE__VALUE_I:
        return TIDE_ATTR_TYPE_INT;
    case TIDE__V1__ATTR_VALUE__VALUE_F:
        return TIDE_ATTR_TYPE_FLOAT;
    case TIDE__V1__ATTR_VALUE__VALUE_B:
        return TIDE_ATTR_TYPE_BOOL;
    case TIDE__V1__ATTR_VALUE__VALUE_S:
        return TIDE_ATTR_TYPE_STRING;
    case TIDE__V1__ATTR_VALUE__VALUE_DTYPE:
        return TIDE_ATTR_TYPE_DTYPE;
    case TIDE__V1__ATTR_VALUE__VALUE_SHAPE:
        return TIDE_ATTR_TYPE_SHAPE;
    case TIDE__V1__ATTR_VALUE__VALUE_TENSOR:
        return TIDE_ATTR_TYPE_TENSOR;
    case TIDE__V1__ATTR_VALUE__VALUE_INTS:
        return TIDE_ATTR_TYPE_INTS;
    case TIDE__V1__ATTR_VALUE__VALUE_FLOATS:
        return TIDE_ATTR_TYPE_FLOATS;
    default:
        return -1;
    }
}

/* Writes "a, b, c" (the op's attribute names) or "no attributes" into buf. */
static const char *attr_names(const struct tide_op_info *info, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = '\0';
    if (info->n_attrs == 0) {
        snprintf(buf, size, "no attributes");
        return buf;
    }
    for (uint32_t k = 0; k < info->n_attrs && n < size; k++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", k ? ", " : "", info->attrs[k].name);
    return buf;
}

/*
 * Checks a wire shape (NULL is the empty shape, a scalar) and converts it.
 * `what` names the holder for the message, e.g. "attribute \"shape\"".
 */
static enum tide_status shape_from_proto(const Tide__V1__TensorShape *msg,
                                         const struct tide_node *node, const char *what,
                                         struct tide_shape *out, struct tide_error *err)
{
    size_t rank = msg ? msg->n_dims : 0;
    memset(out, 0, sizeof(*out));
    if (rank > TIDE_MAX_RANK)
        return tide_node_error(err, TIDE_INVALID, node, "%s has rank %zu, the limit is %d", what,
                               rank, TIDE_MAX_RANK);
    if (rank && !msg->dims)
        return tide_node_error(err, TIDE_INVALID, node, "%s has %zu dimensions but no values", what,
                               rank);
    out->rank = (int32_t)rank;
    for (size_t i = 0; i < rank; i++)
        out->dims[i] = msg->dims[i];
    for (size_t i = 0; i < rank; i++) {
        if (out->dims[i] < 0) {
            char buf[200];
            return tide_node_error(err, TIDE_INVALID, node,
                                   "%s %s has negative dimension %" PRId64 " at index %zu", what,
                                   tide_shape_format(out, buf, sizeof(buf)), out->dims[i], i);
        }
    }
    return TIDE_OK;
}

/* ============================================================================
 * Tensors
 * ========================================================================== */

enum tide_status tide_tensor_from_proto(const Tide__V1__Tensor *msg, struct tide_arena *arena,
                                        struct tide_const_tensor *out, const char *what,
                                        struct tide_error *err)
{
    char buf[200];
    memset(out, 0, sizeof(*out));
    if (!what)
        what = "tensor";
    if (!msg)
        return tide_error_set(err, TIDE_INVALID, "%s: no tensor", what);

    enum tide_dtype dtype = (enum tide_dtype)msg->dtype;
    size_t esize = tide_dtype_size(dtype);
    if (esize == 0)
        return tide_error_set(err, TIDE_INVALID,
                              "%s: tensor has invalid dtype %d, wants float32 (1) or int32 (2)",
                              what, (int)msg->dtype);

    size_t rank = msg->shape ? msg->shape->n_dims : 0;
    if (rank > TIDE_MAX_RANK)
        return tide_error_set(err, TIDE_INVALID, "%s: tensor has rank %zu, the limit is %d", what,
                              rank, TIDE_MAX_RANK);
    if (rank && !msg->shape->dims)
        return tide_error_set(err, TIDE_INVALID,
                              "%s: tensor shape has %zu dimensions but no values", what, rank);
    struct tide_shape shape = {.rank = (int32_t)rank};
    for (size_t i = 0; i < rank; i++)
        shape.dims[i] = msg->shape->dims[i];
    for (size_t i = 0; i < rank; i++) {
        if (shape.dims[i] < 0)
            return tide_error_set(
                err, TIDE_INVALID,
                "%s: tensor shape %s has negative dimension %" PRId64 " at index %zu", what,
                tide_shape_format(&shape, buf, sizeof(buf)), shape.dims[i], i);
    }

    int64_t numel = tide_shape_numel(&shape);
    if (numel < 0 || (uint64_t)numel > UINT64_MAX / esize || (uint64_t)numel * esize > SIZE_MAX)
        return tide_error_set(err, TIDE_LIMIT, "%s: the byte size of tensor shape %s %s overflows",
                              what, tide_shape_format(&shape, buf, sizeof(buf)),
                              tide_dtype_name(dtype));
    uint64_t nbytes = (uint64_t)numel * esize;
    if ((uint64_t)msg->data.len != nbytes)
        return tide_error_set(err, TIDE_INVALID,
                              "%s: tensor of shape %s %s needs %" PRIu64 " bytes, got %zu", what,
                              tide_shape_format(&shape, buf, sizeof(buf)), tide_dtype_name(dtype),
                              nbytes, msg->data.len);
    if (nbytes && !msg->data.data)
        return tide_error_set(err, TIDE_INVALID, "%s: tensor has %zu bytes but no data", what,
                              msg->data.len);

    out->dtype = dtype;
    out->shape = shape;
    out->nbytes = nbytes;
    if (!arena) {
        out->data = msg->data.data;
        return TIDE_OK;
    }
    out->data = tide_arena_alloc(arena, (size_t)nbytes);
    if (!out->data)
        return tide_error_set(err, TIDE_NOMEM, "%s: out of memory copying %" PRIu64 " bytes", what,
                              nbytes);
    if (nbytes)
        memcpy(out->data, msg->data.data, (size_t)nbytes);
    return TIDE_OK;
}

/* ============================================================================
 * Pass 1: nodes and attributes
 * ========================================================================== */

struct importer {
    const Tide__V1__Graph *msg;
    const struct tide_graph_limits *limits;
    struct tide_graph *graph;
    struct tide_error *err;
    /* Pass 2 scratch: data edges of one node, and one stamp per node id. */
    struct tide_edge *edges;
    size_t cap_edges;
    uint32_t *stamp;
};

/* Checks one attribute map entry of node id against its op's schema and stores it. */
static enum tide_status import_attr(struct importer *im, uint32_t id,
                                    const Tide__V1__Node__AttrsEntry *entry)
{
    struct tide_graph *g = im->graph;
    struct tide_error *err = im->err;
    const struct tide_node *node = &g->nodes[id];
    const struct tide_op_info *info = tide_op_info(node->op);
    char buf[SHOWN_MAX + 8];

    if (!entry)
        return tide_node_error(err, TIDE_INVALID, node, "attribute map entry is missing");
    const char *key = entry->key ? entry->key : "";
    int k = tide_op_attr_index(node->op, key);
    if (k < 0) {
        char names[400];
        return tide_node_error(err, TIDE_INVALID, node, "unknown attribute \"%s\"; %s takes %s",
                               shown(key, buf, sizeof(buf)), info->name,
                               attr_names(info, names, sizeof(names)));
    }
    const struct tide_attr_spec *spec = &info->attrs[k];
    if (node->attrs[k].present)
        return tide_node_error(err, TIDE_INVALID, node, "attribute \"%s\" is given twice",
                               spec->name);

    const Tide__V1__AttrValue *value = entry->value;
    int got = value ? wire_attr_type(value->value_case) : -1;
    if (got < 0)
        return tide_node_error(err, TIDE_INVALID, node, "attribute \"%s\" has no value, wants %s",
                               spec->name, tide_attr_type_name(spec->type));
    if ((enum tide_attr_type)got != spec->type)
        return tide_node_error(err, TIDE_INVALID, node, "attribute \"%s\" is %s, wants %s",
                               spec->name, tide_attr_type_name((enum tide_attr_type)got),
                               tide_attr_type_name(spec->type));

    switch (spec->type) {
    case TIDE_ATTR_TYPE_INT:
        tide_attr_set_int(g, id, k, value->i);
        break;
    case TIDE_ATTR_TYPE_FLOAT:
        tide_attr_set_float(g, id, k, value->f);
        break;
    case TIDE_ATTR_TYPE_BOOL:
        tide_attr_set_bool(g, id, k, value->b != 0);
        break;
    case TIDE_ATTR_TYPE_STRING:
        if (tide_attr_set_string(g, id, k, value->s ? value->s : "") != TIDE_OK)
            return tide_node_error(err, TIDE_NOMEM, node, "out of memory storing attribute \"%s\"",
                                   spec->name);
        break;
    case TIDE_ATTR_TYPE_DTYPE:
        if (tide_dtype_size((enum tide_dtype)value->dtype) == 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" has invalid dtype %d, wants float32 (1) or "
                                   "int32 (2)",
                                   spec->name, (int)value->dtype);
        tide_attr_set_dtype(g, id, k, (enum tide_dtype)value->dtype);
        break;
    case TIDE_ATTR_TYPE_SHAPE: {
        char what[64];
        struct tide_shape shape;
        snprintf(what, sizeof(what), "attribute \"%s\"", spec->name);
        enum tide_status st = shape_from_proto(value->shape, node, what, &shape, err);
        if (st != TIDE_OK)
            return st;
        tide_attr_set_shape(g, id, k, &shape);
        break;
    }
    case TIDE_ATTR_TYPE_TENSOR: {
        char what[TIDE_MAX_NAME + 128];
        struct tide_const_tensor t;
        snprintf(what, sizeof(what), "node \"%s\" (%s) attribute \"%s\"", node->name, info->name,
                 spec->name);
        /* Check without copying first, so that the limit applies before any allocation. */
        enum tide_status st = tide_tensor_from_proto(value->tensor, NULL, &t, what, err);
        if (st != TIDE_OK)
            return st;
        if (t.nbytes > im->limits->max_tensor_bytes)
            return tide_node_error(err, TIDE_LIMIT, node,
                                   "attribute \"%s\": tensor is %" PRIu64
                                   " bytes, over the limit of %" PRIu64 " bytes per tensor",
                                   spec->name, t.nbytes, im->limits->max_tensor_bytes);
        if (tide_attr_set_tensor(g, id, k, t.dtype, &t.shape, t.data, t.nbytes) != TIDE_OK)
            return tide_node_error(err, TIDE_NOMEM, node,
                                   "out of memory storing attribute \"%s\" (%" PRIu64 " bytes)",
                                   spec->name, t.nbytes);
        break;
    }
    case TIDE_ATTR_TYPE_INTS: {
        const Tide__V1__AttrValue__IntList *list = value->ints;
        size_t n = list ? list->n_values : 0;
        if (n > TIDE_MAX_LIST)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" has %zu values, the limit is %d", spec->name,
                                   n, TIDE_MAX_LIST);
        if (n && !list->values)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" has %zu values but no data", spec->name, n);
        tide_attr_set_ints(g, id, k, n ? list->values : NULL, (int32_t)n);
        break;
    }
    case TIDE_ATTR_TYPE_FLOATS: {
        const Tide__V1__AttrValue__FloatList *list = value->floats;
        size_t n = list ? list->n_values : 0;
        if (n > TIDE_MAX_LIST)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" has %zu values, the limit is %d", spec->name,
                                   n, TIDE_MAX_LIST);
        if (n && !list->values)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "attribute \"%s\" has %zu values but no data", spec->name, n);
        tide_attr_set_floats(g, id, k, n ? list->values : NULL, (int32_t)n);
        break;
    }
    }
    return TIDE_OK;
}

/* Adds node i of the message: name, op, device, attributes. */
static enum tide_status import_node(struct importer *im, uint32_t i)
{
    struct tide_graph *g = im->graph;
    struct tide_error *err = im->err;
    const Tide__V1__Node *nm = im->msg->nodes[i];
    char buf[SHOWN_MAX + 8];

    if (!nm)
        return tide_error_set(err, TIDE_INVALID, "node %u: missing from the message", i);
    const char *name = nm->name ? nm->name : "";
    size_t len = strlen(name);
    if (!tide_graph_name_valid(name, len))
        return tide_error_set(err, TIDE_INVALID,
                              "node %u: name \"%s\" (%zu bytes) is invalid: want 1 to %d bytes of "
                              "[A-Za-z0-9_./-]",
                              i, shown(name, buf, sizeof(buf)), len, TIDE_MAX_NAME);
    uint32_t first = tide_graph_find(g, name);
    if (first != TIDE_NO_NODE)
        return tide_error_set(err, TIDE_INVALID, "duplicate node name \"%s\" (nodes %u and %u)",
                              name, first, i);
    enum tide_op op;
    if (tide_op_lookup(nm->op ? nm->op : "", &op) != TIDE_OK)
        return tide_error_set(err, TIDE_INVALID, "node \"%s\": unknown op \"%s\"", name,
                              shown(nm->op, buf, sizeof(buf)));

    uint32_t id;
    enum tide_status st = tide_graph_add_node(g, op, name, &id, err);
    if (st != TIDE_OK)
        return st;
    /* Ids are message indices: pass 2 and the messages above rely on it. */
    if (id != i)
        return tide_error_set(err, TIDE_INTERNAL, "node \"%s\": got id %u for index %u", name, id,
                              i);

    const char *device = nm->device ? nm->device : "";
    if (*device) {
        size_t dlen = strlen(device);
        bool printable = dlen <= DEVICE_MAX;
        for (size_t j = 0; printable && j < dlen; j++)
            printable = device[j] > 0x20 && device[j] < 0x7f;
        if (!printable)
            return tide_node_error(err, TIDE_INVALID, g->nodes + id,
                                   "device \"%s\" (%zu bytes) is invalid: want at most %d bytes of "
                                   "printable ASCII without spaces",
                                   shown(device, buf, sizeof(buf)), dlen, DEVICE_MAX);
        char *copy = tide_arena_strndup(g->arena, device, dlen);
        if (!copy)
            return tide_node_error(err, TIDE_NOMEM, g->nodes + id, "out of memory");
        g->nodes[id].device = copy;
    }

    if (nm->n_attrs && !nm->attrs)
        return tide_node_error(err, TIDE_INVALID, g->nodes + id,
                               "has %zu attributes but no entries", nm->n_attrs);
    for (size_t j = 0; j < nm->n_attrs; j++) {
        st = import_attr(im, id, nm->attrs[j]);
        if (st != TIDE_OK)
            return st;
    }
    return TIDE_OK;
}

/* ============================================================================
 * Pass 2: inputs
 * ========================================================================== */

/* Looks up a node by the first len bytes of s; TIDE_NO_NODE if they name none. */
static uint32_t find_prefix(const struct tide_graph *g, const char *s, size_t len)
{
    char name[TIDE_MAX_NAME + 1];
    if (len == 0 || len > TIDE_MAX_NAME)
        return TIDE_NO_NODE;
    memcpy(name, s, len);
    name[len] = '\0';
    return tide_graph_find(g, name);
}

/*
 * Resolves the input strings of node id. Data edges go through
 * tide_graph_set_inputs. Control edges are checked for duplicates with
 * im->stamp and stored in one arena array: tide_graph_add_control searches
 * and copies the node's whole control array on every call, which is
 * quadratic in the number of control inputs that a hostile message may give
 * one node.
 */
static enum tide_status resolve_inputs(struct importer *im, uint32_t id)
{
    struct tide_graph *g = im->graph;
    struct tide_error *err = im->err;
    const Tide__V1__Node *nm = im->msg->nodes[id];
    struct tide_node *node = &g->nodes[id];
    char buf[SHOWN_MAX + 8];

    size_t n = nm->n_inputs;
    if (n == 0)
        return TIDE_OK;
    if (!nm->inputs)
        return tide_node_error(err, TIDE_INVALID, node, "has %zu inputs but no entries", n);
    if (n > UINT32_MAX / 2)
        return tide_node_error(err, TIDE_LIMIT, node, "has %zu inputs", n);
    if (n > im->cap_edges) {
        struct tide_edge *edges = realloc(im->edges, n * sizeof(*edges));
        if (!edges)
            return tide_node_error(err, TIDE_NOMEM, node, "out of memory reading %zu inputs", n);
        im->edges = edges;
        im->cap_edges = n;
    }

    uint32_t n_data = 0, n_controls = 0;
    for (size_t j = 0; j < n; j++) {
        const char *s = nm->inputs[j] ? nm->inputs[j] : "";
        if (!*s)
            return tide_node_error(err, TIDE_INVALID, node, "input %zu is empty", j);
        if (s[0] == '^') {
            const char *name = s + 1;
            if (strchr(name, ':'))
                return tide_node_error(err, TIDE_INVALID, node,
                                       "input %zu \"%s\" is malformed: a control input names a "
                                       "node (\"^node\"), not an output",
                                       j, shown(s, buf, sizeof(buf)));
            uint32_t src = find_prefix(g, name, strlen(name));
            if (src == TIDE_NO_NODE)
                return tide_node_error(err, TIDE_INVALID, node,
                                       "input %zu \"%s\" does not name a node", j,
                                       shown(s, buf, sizeof(buf)));
            if (im->stamp[src] == id + 1)
                return tide_node_error(err, TIDE_INVALID, node,
                                       "input %zu \"%s\" is a duplicate input", j,
                                       shown(s, buf, sizeof(buf)));
            im->stamp[src] = id + 1;
            n_controls++;
            continue;
        }
        if (n_controls)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %zu \"%s\" is a data input after a control input; data "
                                   "inputs come first",
                                   j, shown(s, buf, sizeof(buf)));
        char name[TIDE_MAX_NAME + 1];
        uint32_t output;
        if (tide_graph_parse_ref(s, name, &output, NULL) != TIDE_OK)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %zu \"%s\" is malformed: want \"node\", \"node:k\" "
                                   "(k a decimal output index) or \"^node\"",
                                   j, shown(s, buf, sizeof(buf)));
        uint32_t src = tide_graph_find(g, name);
        if (src == TIDE_NO_NODE)
            return tide_node_error(err, TIDE_INVALID, node, "input %zu \"%s\" does not name a node",
                                   j, shown(s, buf, sizeof(buf)));
        const struct tide_node *producer = &g->nodes[src];
        if (output >= producer->n_outputs)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %zu \"%s\" reads output %u of \"%s\" (%s), which has %u "
                                   "output%s",
                                   j, shown(s, buf, sizeof(buf)), output, producer->name,
                                   tide_op_info(producer->op)->name, producer->n_outputs,
                                   producer->n_outputs == 1 ? "" : "s");
        im->edges[n_data++] = (struct tide_edge){.node = src, .output = output};
    }

    enum tide_status st = tide_graph_set_inputs(g, id, im->edges, n_data, err);
    if (st != TIDE_OK)
        return st;
    if (n_controls) {
        uint32_t *controls = tide_arena_calloc(g->arena, n_controls, sizeof(*controls));
        if (!controls)
            return tide_node_error(err, TIDE_NOMEM, node, "out of memory adding %u control inputs",
                                   n_controls);
        /* The strings were checked above; this walk only collects the ids in order. */
        for (size_t j = n - n_controls, c = 0; j < n; j++, c++) {
            const char *name = nm->inputs[j] + 1;
            controls[c] = find_prefix(g, name, strlen(name));
        }
        node->controls = controls;
        node->n_controls = n_controls;
    }
    return TIDE_OK;
}

/* ============================================================================
 * Entry points
 * ========================================================================== */

static enum tide_status import_all(struct importer *im)
{
    const Tide__V1__Graph *msg = im->msg;
    struct tide_error *err = im->err;

    uint32_t version = msg->version ? msg->version : 1;
    if (version > GRAPH_VERSION)
        return tide_error_set(err, TIDE_UNSUPPORTED,
                              "graph version %u is not supported: this build reads version %d",
                              version, GRAPH_VERSION);
    if (msg->n_nodes > im->limits->max_nodes)
        return tide_error_set(err, TIDE_LIMIT, "graph has %zu nodes, over the limit of %u",
                              msg->n_nodes, im->limits->max_nodes);
    if (msg->n_nodes && !msg->nodes)
        return tide_error_set(err, TIDE_INVALID, "graph has %zu nodes but no entries",
                              msg->n_nodes);
    uint32_t n = (uint32_t)msg->n_nodes;

    im->graph = tide_graph_new();
    if (!im->graph)
        return tide_error_set(err, TIDE_NOMEM, "out of memory creating a graph");
    im->graph->version = version;

    for (uint32_t i = 0; i < n; i++) {
        enum tide_status st = import_node(im, i);
        if (st != TIDE_OK)
            return st;
    }
    im->stamp = calloc((size_t)n + 1, sizeof(*im->stamp));
    if (!im->stamp)
        return tide_error_set(err, TIDE_NOMEM, "out of memory resolving inputs of %u nodes", n);
    for (uint32_t i = 0; i < n; i++) {
        enum tide_status st = resolve_inputs(im, i);
        if (st != TIDE_OK)
            return st;
    }
    return tide_graph_infer(im->graph, im->limits, err);
}

enum tide_status tide_graph_import_message(const Tide__V1__Graph *msg,
                                           const struct tide_graph_limits *limits,
                                           struct tide_graph **out, struct tide_error *err)
{
    struct tide_graph_limits defaults = tide_graph_limits_default();
    *out = NULL;
    if (!msg)
        return tide_error_set(err, TIDE_INVALID, "no tide.v1.Graph message");
    struct importer im = {.msg = msg, .limits = limits ? limits : &defaults, .err = err};
    enum tide_status st = import_all(&im);
    free(im.edges);
    free(im.stamp);
    if (st != TIDE_OK) {
        tide_graph_free(im.graph);
        return st;
    }
    *out = im.graph;
    return TIDE_OK;
}

enum tide_status tide_graph_import(const void *data, size_t len,
                                   const struct tide_graph_limits *limits, struct tide_graph **out,
                                   struct tide_error *err)
{
    *out = NULL;
    if (!data && len)
        return tide_error_set(err, TIDE_INVALID, "no data for a tide.v1.Graph message");
    /* protobuf-c reads nothing when len is 0, but wants a pointer all the same. */
    static const uint8_t empty[1];
    Tide__V1__Graph *msg = tide__v1__graph__unpack(NULL, len, data ? data : empty);
    if (!msg)
        return tide_error_set(err, TIDE_INVALID,
                              "malformed or truncated tide.v1.Graph message (%zu bytes)", len);
    enum tide_status st = tide_graph_import_message(msg, limits, out, err);
    tide__v1__graph__free_unpacked(msg, NULL);
    return st;
}
