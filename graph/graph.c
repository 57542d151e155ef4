/* SPDX-License-Identifier: MIT */
/*
 * graph.c: the IR's nodes, names, attributes and the whole-graph checks.
 *
 * Names are indexed in an open-addressing hash table of node ids (FNV-1a),
 * grown at half load, so import and builders find inputs in O(1).
 * tide_graph_parse_ref is the one parser of "node:k" output references, for
 * import, autodiff's loss, the session's feeds and fetches and the daemon.
 * tide_graph_infer is the one entry point that validates a graph; it runs the
 * structural checks here, then the per-op infer functions (infer.c) in
 * topological order; tide_graph_infer_node runs the same checks on one node,
 * for builders that check each node as it is added (libtide's).
 */
#include "graph/graph-impl.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local const struct tide_graph_limits *tide__infer_limits;

/* ============================================================================
 * Dtypes and shapes
 * ========================================================================== */

size_t tide_dtype_size(enum tide_dtype dtype)
{
    switch (dtype) {
    case TIDE_DTYPE_FLOAT32:
    case TIDE_DTYPE_INT32:
        return 4;
    default:
        return 0;
    }
}

const char *tide_dtype_name(enum tide_dtype dtype)
{
    switch (dtype) {
    case TIDE_DTYPE_FLOAT32:
        return "float32";
    case TIDE_DTYPE_INT32:
        return "int32";
    default:
        return "invalid";
    }
}

int64_t tide_shape_numel(const struct tide_shape *shape)
{
    int64_t n = 1;
    for (int32_t i = 0; i < shape->rank; i++) {
        int64_t d = shape->dims[i];
        if (d < 0)
            return -1;
        if (d != 0 && n > INT64_MAX / d)
            return -1;
        n *= d;
    }
    return n;
}

bool tide_shape_equal(const struct tide_shape *a, const struct tide_shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int32_t i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i])
            return false;
    }
    return true;
}

char *tide_shape_format(const struct tide_shape *shape, char *buf, size_t size)
{
    size_t n = 0;
    if (size == 0)
        return buf;
    buf[0] = '\0';
    n += (size_t)snprintf(buf + n, size - n, "[");
    for (int32_t i = 0; i < shape->rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%" PRId64, i ? ", " : "", shape->dims[i]);
    if (n < size)
        snprintf(buf + n, size - n, "]");
    return buf;
}

struct tide_shape tide_shape_make(int32_t rank, const int64_t *dims)
{
    struct tide_shape s = {0};
    assert(rank >= 0 && rank <= TIDE_MAX_RANK);
    s.rank = rank;
    for (int32_t i = 0; i < rank; i++)
        s.dims[i] = dims[i];
    return s;
}

/* ============================================================================
 * Graphs, nodes, names
 * ========================================================================== */

struct tide_graph_limits tide_graph_limits_default(void)
{
    return (struct tide_graph_limits){.max_nodes = 1000000, .max_tensor_bytes = (uint64_t)16 << 30};
}

struct tide_graph *tide_graph_new(void)
{
    struct tide_graph *g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->arena = tide_arena_new(0);
    if (!g->arena) {
        free(g);
        return NULL;
    }
    g->version = 1;
    return g;
}

void tide_graph_free(struct tide_graph *graph)
{
    if (!graph)
        return;
    tide_arena_free(graph->arena);
    free(graph->nodes);
    free(graph->index);
    free(graph);
}

struct tide_graph *tide_graph_clone(const struct tide_graph *graph)
{
    struct tide_graph *g = tide_graph_new();
    if (!g)
        return NULL;
    g->version = graph->version;
    g->nodes = malloc(((size_t)graph->n_nodes + 1) * sizeof(*g->nodes));
    g->index = malloc((size_t)(graph->index_cap ? graph->index_cap : 1) * sizeof(*g->index));
    if (!g->nodes || !g->index)
        goto oom;
    g->cap_nodes = graph->n_nodes + 1;
    g->index_cap = graph->index_cap;
    if (graph->index_cap)
        memcpy(g->index, graph->index, (size_t)graph->index_cap * sizeof(*g->index));
    struct tide_arena *a = g->arena;
    for (uint32_t v = 0; v < graph->n_nodes; v++) {
        const struct tide_node *src = &graph->nodes[v];
        const struct tide_op_info *info = tide_op_info(src->op);
        struct tide_node *dst = &g->nodes[v];
        *dst = *src;
        dst->name = tide_arena_strdup(a, src->name);
        dst->device = tide_arena_strdup(a, src->device);
        dst->inputs = tide_arena_calloc(a, src->n_inputs + 1, sizeof(*dst->inputs));
        dst->controls = tide_arena_calloc(a, src->n_controls + 1, sizeof(*dst->controls));
        dst->outputs = tide_arena_calloc(a, src->n_outputs + 1, sizeof(*dst->outputs));
        dst->attrs = tide_arena_calloc(a, info->n_attrs + 1, sizeof(*dst->attrs));
        if (!dst->name || !dst->device || !dst->inputs || !dst->controls || !dst->outputs ||
            !dst->attrs)
            goto oom;
        /* Empty arrays may be NULL in the source, and memcpy must not see NULL. */
        if (src->n_inputs)
            memcpy(dst->inputs, src->inputs, src->n_inputs * sizeof(*dst->inputs));
        if (src->n_controls)
            memcpy(dst->controls, src->controls, src->n_controls * sizeof(*dst->controls));
        if (src->n_outputs)
            memcpy(dst->outputs, src->outputs, src->n_outputs * sizeof(*dst->outputs));
        if (info->n_attrs)
            memcpy(dst->attrs, src->attrs, info->n_attrs * sizeof(*dst->attrs));
        for (uint32_t k = 0; k < info->n_attrs; k++) {
            if (info->attrs[k].type == TIDE_ATTR_TYPE_STRING && src->attrs[k].s) {
                dst->attrs[k].s = tide_arena_strdup(a, src->attrs[k].s);
                if (!dst->attrs[k].s)
                    goto oom;
            }
        }
        g->n_nodes++;
    }
    return g;
oom:
    tide_graph_free(g);
    return NULL;
}

bool tide_graph_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > TIDE_MAX_NAME)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '/' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static void index_insert(uint32_t *index, uint32_t cap, const struct tide_node *nodes, uint32_t id)
{
    uint32_t mask = cap - 1;
    uint32_t i = name_hash(nodes[id].name) & mask;
    while (index[i] != TIDE_NO_NODE)
        i = (i + 1) & mask;
    index[i] = id;
}

static enum tide_status index_grow(struct tide_graph *g)
{
    uint32_t cap = g->index_cap ? g->index_cap * 2 : 64;
    uint32_t *index = malloc((size_t)cap * sizeof(*index));
    if (!index)
        return TIDE_NOMEM;
    memset(index, 0xff, (size_t)cap * sizeof(*index));
    for (uint32_t id = 0; id < g->n_nodes; id++)
        index_insert(index, cap, g->nodes, id);
    free(g->index);
    g->index = index;
    g->index_cap = cap;
    return TIDE_OK;
}

uint32_t tide_graph_find(const struct tide_graph *graph, const char *name)
{
    if (graph->index_cap == 0)
        return TIDE_NO_NODE;
    uint32_t mask = graph->index_cap - 1;
    for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t id = graph->index[i];
        if (id == TIDE_NO_NODE)
            return TIDE_NO_NODE;
        if (strcmp(graph->nodes[id].name, name) == 0)
            return id;
    }
}

enum tide_status tide_graph_parse_ref(const char *text, char name[TIDE_MAX_NAME + 1],
                                      uint32_t *output, struct tide_error *err)
{
    name[0] = '\0';
    *output = 0;
    if (!text)
        return tide_error_set(err, TIDE_INVALID, "the reference is NULL");
    const char *colon = strchr(text, ':');
    size_t len = colon ? (size_t)(colon - text) : strlen(text);
    if (len == 0)
        return tide_error_set(err, TIDE_INVALID, "\"%.300s\" has an empty node name", text);
    if (len > TIDE_MAX_NAME)
        return tide_error_set(err, TIDE_INVALID,
                              "\"%.64s...\" has a node name of %zu bytes, the limit is %d", text,
                              len, TIDE_MAX_NAME);
    uint64_t k = 0;
    if (colon) {
        const char *digits = colon + 1;
        if (*digits == '\0')
            return tide_error_set(err, TIDE_INVALID, "\"%.300s\" has no output index after ':'",
                                  text);
        for (const char *d = digits; *d; d++) {
            if (*d < '0' || *d > '9')
                return tide_error_set(err, TIDE_INVALID,
                                      "\"%.300s\": the output index \"%.64s\" is not a "
                                      "number (want decimal digits)",
                                      text, digits);
            k = k * 10 + (uint64_t)(*d - '0');
            if (k > UINT32_MAX)
                return tide_error_set(err, TIDE_INVALID,
                                      "\"%.300s\": the output index \"%.64s\" is over "
                                      "%" PRIu32,
                                      text, digits, UINT32_MAX);
        }
    }
    memcpy(name, text, len);
    name[len] = '\0';
    *output = (uint32_t)k;
    return TIDE_OK;
}

enum tide_status tide_graph_resolve_ref(const struct tide_graph *graph, const char *text,
                                        const char *what, struct tide_edge *edge,
                                        struct tide_error *err)
{
    char base[TIDE_MAX_NAME + 1];
    uint32_t output;
    struct tide_error perr;
    if (tide_graph_parse_ref(text, base, &output, &perr) != TIDE_OK)
        return tide_error_set(err, TIDE_INVALID, "%s %s", what, perr.message);
    uint32_t id = tide_graph_find(graph, base);
    if (id == TIDE_NO_NODE)
        return tide_error_set(err, TIDE_NOT_FOUND, "%s \"%s\": no node is called \"%s\"", what,
                              text, base);
    const struct tide_node *node = &graph->nodes[id];
    if (output >= node->n_outputs)
        return tide_error_set(err, TIDE_NOT_FOUND, "%s \"%s\": node \"%s\" (%s) has %u output%s",
                              what, text, base, tide_op_info(node->op)->name, node->n_outputs,
                              node->n_outputs == 1 ? "" : "s");
    *edge = (struct tide_edge){id, output};
    return TIDE_OK;
}

static void attr_fill_default(struct tide_attr_value *v, const struct tide_attr_spec *spec)
{
    memset(v, 0, sizeof(*v));
    switch (spec->type) {
    case TIDE_ATTR_TYPE_INT:
        v->i = spec->default_int;
        break;
    case TIDE_ATTR_TYPE_BOOL:
        v->b = spec->default_int != 0;
        break;
    case TIDE_ATTR_TYPE_DTYPE:
        v->dtype = (enum tide_dtype)spec->default_int;
        break;
    case TIDE_ATTR_TYPE_FLOAT:
        v->f = spec->default_float;
        break;
    case TIDE_ATTR_TYPE_STRING:
        v->s = spec->default_string ? spec->default_string : "";
        break;
    default:
        break;
    }
}

enum tide_status tide_graph_add_node(struct tide_graph *graph, enum tide_op op, const char *name,
                                     uint32_t *id, struct tide_error *err)
{
    assert((unsigned)op < TIDE_OP_COUNT);
    const struct tide_op_info *info = tide_op_info(op);
    size_t len = strlen(name);
    if (!tide_graph_name_valid(name, len))
        return tide_error_set(err, TIDE_INVALID,
                              "node name \"%.64s%s\" is invalid: want 1 to %d bytes of "
                              "[A-Za-z0-9_./-]",
                              name, len > 64 ? "..." : "", TIDE_MAX_NAME);
    if (tide_graph_find(graph, name) != TIDE_NO_NODE)
        return tide_error_set(err, TIDE_EXISTS, "duplicate node name \"%s\"", name);
    if (graph->n_nodes == UINT32_MAX - 1)
        return tide_error_set(err, TIDE_LIMIT, "too many nodes");
    if (graph->n_nodes == graph->cap_nodes) {
        uint32_t cap = graph->cap_nodes ? graph->cap_nodes * 2 : 64;
        struct tide_node *nodes = realloc(graph->nodes, (size_t)cap * sizeof(*nodes));
        if (!nodes)
            return tide_error_set(err, TIDE_NOMEM, "out of memory adding node \"%s\"", name);
        graph->nodes = nodes;
        graph->cap_nodes = cap;
    }
    if ((graph->n_nodes + 1) * 2 > graph->index_cap && index_grow(graph) != TIDE_OK)
        return tide_error_set(err, TIDE_NOMEM, "out of memory adding node \"%s\"", name);

    struct tide_node *node = &graph->nodes[graph->n_nodes];
    memset(node, 0, sizeof(*node));
    node->op = op;
    node->name = tide_arena_strndup(graph->arena, name, len);
    node->n_outputs = (uint32_t)info->n_outputs;
    node->outputs = tide_arena_calloc(graph->arena, info->n_outputs + 1, sizeof(*node->outputs));
    node->attrs = tide_arena_calloc(graph->arena, info->n_attrs + 1, sizeof(*node->attrs));
    node->device = "";
    node->partition = -1;
    node->subject = TIDE_NO_NODE;
    if (!node->name || !node->outputs || !node->attrs)
        return tide_error_set(err, TIDE_NOMEM, "out of memory adding node \"%s\"", name);
    for (uint32_t k = 0; k < info->n_attrs; k++)
        attr_fill_default(&node->attrs[k], &info->attrs[k]);
    *id = graph->n_nodes++;
    index_insert(graph->index, graph->index_cap, graph->nodes, *id);
    return TIDE_OK;
}

enum tide_status tide_graph_set_inputs(struct tide_graph *graph, uint32_t id,
                                       const struct tide_edge *edges, uint32_t n,
                                       struct tide_error *err)
{
    struct tide_node *node = &graph->nodes[id];
    struct tide_edge *copy = NULL;
    if (n) {
        copy = tide_arena_calloc(graph->arena, n, sizeof(*copy));
        if (!copy)
            return tide_error_set(err, TIDE_NOMEM, "out of memory setting inputs of \"%s\"",
                                  node->name);
        memcpy(copy, edges, (size_t)n * sizeof(*copy));
    }
    node->inputs = copy;
    node->n_inputs = n;
    return TIDE_OK;
}

enum tide_status tide_graph_add_control(struct tide_graph *graph, uint32_t id, uint32_t after,
                                        struct tide_error *err)
{
    struct tide_node *node = &graph->nodes[id];
    for (uint32_t i = 0; i < node->n_controls; i++) {
        if (node->controls[i] == after)
            return TIDE_OK;
    }
    uint32_t *controls = tide_arena_calloc(graph->arena, node->n_controls + 1, sizeof(*controls));
    if (!controls)
        return tide_error_set(err, TIDE_NOMEM, "out of memory adding a control edge to \"%s\"",
                              node->name);
    if (node->n_controls)
        memcpy(controls, node->controls, node->n_controls * sizeof(*controls));
    controls[node->n_controls] = after;
    node->controls = controls;
    node->n_controls++;
    return TIDE_OK;
}

/* ============================================================================
 * Attribute setters
 * ========================================================================== */

static struct tide_attr_value *attr_slot(struct tide_graph *graph, uint32_t id, int k,
                                         enum tide_attr_type type)
{
    assert(id < graph->n_nodes);
    struct tide_node *node = &graph->nodes[id];
    const struct tide_op_info *info = tide_op_info(node->op);
    assert(k >= 0 && (uint32_t)k < info->n_attrs);
    assert(info->attrs[k].type == type);
    (void)info;
    (void)type;
    node->attrs[k].present = true;
    return &node->attrs[k];
}

void tide_attr_set_int(struct tide_graph *graph, uint32_t id, int k, int64_t v)
{
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_INT)->i = v;
}

void tide_attr_set_float(struct tide_graph *graph, uint32_t id, int k, double v)
{
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_FLOAT)->f = v;
}

void tide_attr_set_bool(struct tide_graph *graph, uint32_t id, int k, bool v)
{
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_BOOL)->b = v;
}

void tide_attr_set_dtype(struct tide_graph *graph, uint32_t id, int k, enum tide_dtype v)
{
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_DTYPE)->dtype = v;
}

void tide_attr_set_shape(struct tide_graph *graph, uint32_t id, int k, const struct tide_shape *v)
{
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_SHAPE)->shape = *v;
}

void tide_attr_set_ints(struct tide_graph *graph, uint32_t id, int k, const int64_t *v, int32_t n)
{
    assert(n >= 0 && n <= TIDE_MAX_LIST);
    struct tide_attr_value *a = attr_slot(graph, id, k, TIDE_ATTR_TYPE_INTS);
    a->ints.n = n;
    for (int32_t i = 0; i < n; i++)
        a->ints.v[i] = v[i];
}

void tide_attr_set_floats(struct tide_graph *graph, uint32_t id, int k, const float *v, int32_t n)
{
    assert(n >= 0 && n <= TIDE_MAX_LIST);
    struct tide_attr_value *a = attr_slot(graph, id, k, TIDE_ATTR_TYPE_FLOATS);
    a->floats.n = n;
    for (int32_t i = 0; i < n; i++)
        a->floats.v[i] = v[i];
}

enum tide_status tide_attr_set_string(struct tide_graph *graph, uint32_t id, int k, const char *s)
{
    char *copy = tide_arena_strdup(graph->arena, s);
    if (!copy)
        return TIDE_NOMEM;
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_STRING)->s = copy;
    return TIDE_OK;
}

enum tide_status tide_graph_set_math(struct tide_graph *graph, enum tide_math math)
{
    for (uint32_t id = 0; id < graph->n_nodes; id++) {
        int k = tide_op_math_attr(graph->nodes[id].op);
        if (k < 0 || graph->nodes[id].attrs[k].present)
            continue;
        enum tide_status st = tide_attr_set_string(graph, id, k, tide_math_name(math));
        if (st != TIDE_OK)
            return st;
    }
    return TIDE_OK;
}

enum tide_status tide_attr_set_tensor(struct tide_graph *graph, uint32_t id, int k,
                                      enum tide_dtype dtype, const struct tide_shape *shape,
                                      const void *data, uint64_t nbytes)
{
    struct tide_const_tensor *t = tide_arena_alloc(graph->arena, sizeof(*t));
    if (!t || nbytes > SIZE_MAX / 2)
        return TIDE_NOMEM;
    t->data = tide_arena_alloc(graph->arena, (size_t)nbytes);
    if (!t->data)
        return TIDE_NOMEM;
    if (nbytes)
        memcpy(t->data, data, (size_t)nbytes);
    t->dtype = dtype;
    t->shape = *shape;
    t->nbytes = nbytes;
    attr_slot(graph, id, k, TIDE_ATTR_TYPE_TENSOR)->tensor = t;
    return TIDE_OK;
}

/* ============================================================================
 * Validation and inference
 * ========================================================================== */

enum tide_status tide_node_error(struct tide_error *err, enum tide_status status,
                                 const struct tide_node *node, const char *format, ...)
{
    if (!err)
        return status;
    char text[TIDE_ERROR_MESSAGE_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    return tide_error_set(err, status, "node \"%s\" (%s): %s", node->name,
                          tide_op_info(node->op)->name, text);
}

enum tide_status tide__set_output(struct tide_graph *graph, struct tide_node *node, uint32_t k,
                                  enum tide_dtype dtype, const struct tide_shape *shape,
                                  struct tide_error *err)
{
    (void)graph;
    assert(k < node->n_outputs);
    char buf[160];
    if (shape->rank < 0 || shape->rank > TIDE_MAX_RANK)
        return tide_node_error(err, TIDE_INVALID, node, "output %u has rank %d, the limit is %d", k,
                               shape->rank, TIDE_MAX_RANK);
    for (int32_t i = 0; i < shape->rank; i++) {
        if (shape->dims[i] < 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "output %u has negative dimension %d in shape %s", k, i,
                                   tide_shape_format(shape, buf, sizeof(buf)));
    }
    int64_t numel = tide_shape_numel(shape);
    size_t esize = tide_dtype_size(dtype);
    if (esize == 0)
        return tide_node_error(err, TIDE_INVALID, node, "output %u has invalid dtype %d", k,
                               (int)dtype);
    if (numel < 0 || (uint64_t)numel > UINT64_MAX / esize)
        return tide_node_error(err, TIDE_LIMIT, node,
                               "output %u: the byte size of shape %s overflows", k,
                               tide_shape_format(shape, buf, sizeof(buf)));
    uint64_t nbytes = (uint64_t)numel * esize;
    const struct tide_graph_limits *limits = tide__infer_limits;
    if (limits && nbytes > limits->max_tensor_bytes)
        return tide_node_error(err, TIDE_LIMIT, node,
                               "output %u of shape %s is %" PRIu64 " bytes, over the limit of %" PRIu64
                               " bytes per tensor",
                               k, tide_shape_format(shape, buf, sizeof(buf)), nbytes,
                               limits->max_tensor_bytes);
    node->outputs[k].dtype = dtype;
    node->outputs[k].shape = *shape;
    node->outputs[k].nbytes = nbytes;
    return TIDE_OK;
}

/* Arity, edge targets and required attributes: everything that does not need shapes. */
static enum tide_status check_structure(const struct tide_graph *graph, uint32_t id,
                                        struct tide_error *err)
{
    const struct tide_node *node = &graph->nodes[id];
    const struct tide_op_info *info = tide_op_info(node->op);
    if ((int64_t)node->n_inputs < info->min_inputs ||
        (info->max_inputs >= 0 && (int64_t)node->n_inputs > info->max_inputs)) {
        if (info->max_inputs < 0)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "has %u data input%s, wants at least %d", node->n_inputs,
                                   node->n_inputs == 1 ? "" : "s", info->min_inputs);
        if (info->min_inputs == info->max_inputs)
            return tide_node_error(err, TIDE_INVALID, node, "has %u data input%s, wants %d",
                                   node->n_inputs, node->n_inputs == 1 ? "" : "s",
                                   info->min_inputs);
        return tide_node_error(err, TIDE_INVALID, node, "has %u data input%s, wants %d to %d",
                               node->n_inputs, node->n_inputs == 1 ? "" : "s", info->min_inputs,
                               info->max_inputs);
    }
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        const struct tide_edge *e = &node->inputs[i];
        if (e->node >= graph->n_nodes)
            return tide_node_error(err, TIDE_INVALID, node, "input %u refers to node id %u of %u",
                                   i, e->node, graph->n_nodes);
        const struct tide_node *src = &graph->nodes[e->node];
        if (e->output >= src->n_outputs)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u reads output %u of \"%s\" (%s), which has %u output%s",
                                   i, e->output, src->name, tide_op_info(src->op)->name,
                                   src->n_outputs, src->n_outputs == 1 ? "" : "s");
    }
    for (uint32_t i = 0; i < node->n_controls; i++) {
        if (node->controls[i] >= graph->n_nodes)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "control input %u refers to node id %u of %u", i,
                                   node->controls[i], graph->n_nodes);
    }
    for (uint32_t k = 0; k < info->n_attrs; k++) {
        if (info->attrs[k].required && !node->attrs[k].present)
            return tide_node_error(err, TIDE_INVALID, node, "missing required attribute \"%s\" (%s)",
                                   info->attrs[k].name, tide_attr_type_name(info->attrs[k].type));
    }
    return TIDE_OK;
}

static enum tide_status check_dtypes(const struct tide_graph *graph, const struct tide_node *node,
                                     struct tide_error *err)
{
    const struct tide_op_info *info = tide_op_info(node->op);
    if (info->dtype_rule == TIDE_DTYPE_RULE_CUSTOM || node->n_inputs == 0)
        return TIDE_OK;
    enum tide_dtype want = info->dtype_rule == TIDE_DTYPE_RULE_FLOAT
                               ? TIDE_DTYPE_FLOAT32
                               : tide_graph_input(graph, node, 0)->dtype;
    for (uint32_t i = 0; i < node->n_inputs; i++) {
        enum tide_dtype got = tide_graph_input(graph, node, i)->dtype;
        if (got != want)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "input %u (\"%s\") is %s, wants %s", i,
                                   graph->nodes[node->inputs[i].node].name, tide_dtype_name(got),
                                   tide_dtype_name(want));
    }
    return TIDE_OK;
}

/*
 * Infers one node whose structure is checked and whose inputs are inferred:
 * the dtype rule, then the op's infer function. tide__infer_limits must be set.
 */
static enum tide_status infer_one(struct tide_graph *graph, struct tide_node *node,
                                  struct tide_error *err)
{
    for (uint32_t k = 0; k < node->n_outputs; k++)
        memset(&node->outputs[k], 0, sizeof(node->outputs[k]));
    enum tide_status st = check_dtypes(graph, node, err);
    if (st == TIDE_OK)
        st = tide_op_info(node->op)->infer(graph, node, err);
    for (uint32_t k = 0; st == TIDE_OK && k < node->n_outputs; k++) {
        /* An infer function that forgets an output is our bug, not the user's. */
        assert(node->outputs[k].dtype != TIDE_DTYPE_INVALID);
    }
    return st;
}

enum tide_status tide_graph_infer(struct tide_graph *graph, const struct tide_graph_limits *limits,
                                  struct tide_error *err)
{
    struct tide_graph_limits defaults = tide_graph_limits_default();
    if (!limits)
        limits = &defaults;
    if (graph->n_nodes > limits->max_nodes)
        return tide_error_set(err, TIDE_LIMIT, "graph has %u nodes, over the limit of %u",
                              graph->n_nodes, limits->max_nodes);
    for (uint32_t id = 0; id < graph->n_nodes; id++) {
        enum tide_status st = check_structure(graph, id, err);
        if (st != TIDE_OK)
            return st;
    }
    uint32_t *order = malloc(((size_t)graph->n_nodes + 1) * sizeof(*order));
    if (!order)
        return tide_error_set(err, TIDE_NOMEM, "out of memory ordering %u nodes", graph->n_nodes);
    enum tide_status st = tide_graph_topo_order(graph, order, err);
    tide__infer_limits = limits;
    for (uint32_t i = 0; st == TIDE_OK && i < graph->n_nodes; i++)
        st = infer_one(graph, &graph->nodes[order[i]], err);
    tide__infer_limits = NULL;
    free(order);
    return st;
}

enum tide_status tide_graph_infer_node(struct tide_graph *graph, uint32_t id,
                                       const struct tide_graph_limits *limits,
                                       struct tide_error *err)
{
    struct tide_graph_limits defaults = tide_graph_limits_default();
    if (!limits)
        limits = &defaults;
    if (id >= graph->n_nodes)
        return tide_error_set(err, TIDE_INVALID, "node id %u of %u", id, graph->n_nodes);
    enum tide_status st = check_structure(graph, id, err);
    /* The inputs must be inferred already: their producers come earlier in the graph. */
    for (uint32_t i = 0; st == TIDE_OK && i < graph->nodes[id].n_inputs; i++)
        assert(tide_graph_input(graph, &graph->nodes[id], i)->dtype != TIDE_DTYPE_INVALID);
    if (st != TIDE_OK)
        return st;
    tide__infer_limits = limits;
    st = infer_one(graph, &graph->nodes[id], err);
    tide__infer_limits = NULL;
    return st;
}
