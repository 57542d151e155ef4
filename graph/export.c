/* SPDX-License-Identifier: MIT */
/*
 * export.c: graph IR -> tide.v1.Graph (protobuf).
 *
 * The inverse of import.c, for clients, tests, tools and the fuzz corpus.
 * The message is built entirely in a caller's arena — every struct, string,
 * array and tensor byte — so that it is freed in one call and never with
 * protobuf-c's free_unpacked. Nodes go out in id order; inputs as "name",
 * "name:k" (k > 0) and then "^name" for control edges; attributes only where
 * present (set explicitly), in the op table's order, so that exporting the
 * same graph twice gives the same bytes, and import(export(g)) gives back g.
 *
 * The graph is our own, already validated data: a fault in it is a
 * programming error, so the only error export reports is out of memory.
 */
#include "graph/import.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static Tide__V1__TensorShape *shape_to_proto(const struct tide_shape *shape,
                                             struct tide_arena *arena)
{
    Tide__V1__TensorShape *m = tide_arena_alloc(arena, sizeof(*m));
    if (!m)
        return NULL;
    tide__v1__tensor_shape__init(m);
    if (shape->rank > 0) {
        m->dims = tide_arena_calloc(arena, (size_t)shape->rank, sizeof(*m->dims));
        if (!m->dims)
            return NULL;
        memcpy(m->dims, shape->dims, (size_t)shape->rank * sizeof(*m->dims));
        m->n_dims = (size_t)shape->rank;
    }
    return m;
}

static Tide__V1__Tensor *tensor_to_proto(const struct tide_const_tensor *t,
                                         struct tide_arena *arena)
{
    Tide__V1__Tensor *m = tide_arena_alloc(arena, sizeof(*m));
    if (!m)
        return NULL;
    tide__v1__tensor__init(m);
    m->dtype = (Tide__V1__DataType)t->dtype;
    m->shape = shape_to_proto(&t->shape, arena);
    if (!m->shape)
        return NULL;
    if (t->nbytes) {
        m->data.data = tide_arena_alloc(arena, (size_t)t->nbytes);
        if (!m->data.data)
            return NULL;
        memcpy(m->data.data, t->data, (size_t)t->nbytes);
        m->data.len = (size_t)t->nbytes;
    }
    return m;
}

/*
 * Fills an AttrValue from the IR value of the given type. Returns false on
 * OOM. A tensor attribute marked present without a tensor (a builder's
 * mistake) is written as an empty Tensor, which import then refuses by name.
 */
static bool attr_to_proto(const struct tide_attr_value *v, enum tide_attr_type type,
                          Tide__V1__AttrValue *m, struct tide_arena *arena)
{
    tide__v1__attr_value__init(m);
    switch (type) {
    case TIDE_ATTR_TYPE_INT:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_I;
        m->i = v->i;
        return true;
    case TIDE_ATTR_TYPE_FLOAT:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_F;
        m->f = (float)v->f;
        return true;
    case TIDE_ATTR_TYPE_BOOL:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_B;
        m->b = v->b;
        return true;
    case TIDE_ATTR_TYPE_STRING:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_S;
        m->s = tide_arena_strdup(arena, v->s ? v->s : "");
        return m->s != NULL;
    case TIDE_ATTR_TYPE_DTYPE:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_DTYPE;
        m->dtype = (Tide__V1__DataType)v->dtype;
        return true;
    case TIDE_ATTR_TYPE_SHAPE:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_SHAPE;
        m->shape = shape_to_proto(&v->shape, arena);
        return m->shape != NULL;
    case TIDE_ATTR_TYPE_TENSOR:
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_TENSOR;
        if (!v->tensor) {
            m->tensor = tide_arena_alloc(arena, sizeof(*m->tensor));
            if (m->tensor)
                tide__v1__tensor__init(m->tensor);
        } else {
            m->tensor = tensor_to_proto(v->tensor, arena);
        }
        return m->tensor != NULL;
    case TIDE_ATTR_TYPE_INTS: {
        Tide__V1__AttrValue__IntList *list = tide_arena_alloc(arena, sizeof(*list));
        if (!list)
            return false;
        tide__v1__attr_value__int_list__init(list);
        assert(v->ints.n >= 0 && v->ints.n <= TIDE_MAX_LIST);
        if (v->ints.n > 0) {
            list->values = tide_arena_calloc(arena, (size_t)v->ints.n, sizeof(*list->values));
            if (!list->values)
                return false;
            memcpy(list->values, v->ints.v, (size_t)v->ints.n * sizeof(*list->values));
            list->n_values = (size_t)v->ints.n;
        }
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_INTS;
        m->ints = list;
        return true;
    }
    case TIDE_ATTR_TYPE_FLOATS: {
        Tide__V1__AttrValue__FloatList *list = tide_arena_alloc(arena, sizeof(*list));
        if (!list)
            return false;
        tide__v1__attr_value__float_list__init(list);
        assert(v->floats.n >= 0 && v->floats.n <= TIDE_MAX_LIST);
        if (v->floats.n > 0) {
            list->values = tide_arena_calloc(arena, (size_t)v->floats.n, sizeof(*list->values));
            if (!list->values)
                return false;
            memcpy(list->values, v->floats.v, (size_t)v->floats.n * sizeof(*list->values));
            list->n_values = (size_t)v->floats.n;
        }
        m->value_case = TIDE__V1__ATTR_VALUE__VALUE_FLOATS;
        m->floats = list;
        return true;
    }
    }
    return false;
}

/* Formats one input string ("name", "name:k" or "^name") into the arena. */
static char *input_string(const char *name, uint32_t output, bool control, struct tide_arena *arena)
{
    char suffix[16] = "";
    if (!control && output > 0)
        snprintf(suffix, sizeof(suffix), ":%" PRIu32, output);
    size_t len = strlen(name);
    size_t slen = strlen(suffix);
    char *s = tide_arena_alloc(arena, len + slen + 2);
    if (!s)
        return NULL;
    char *p = s;
    if (control)
        *p++ = '^';
    memcpy(p, name, len);
    memcpy(p + len, suffix, slen + 1);
    return s;
}

static Tide__V1__Node *node_to_proto(const struct tide_graph *graph, const struct tide_node *node,
                                     struct tide_arena *arena)
{
    const struct tide_op_info *info = tide_op_info(node->op);
    Tide__V1__Node *m = tide_arena_alloc(arena, sizeof(*m));
    if (!m)
        return NULL;
    tide__v1__node__init(m);
    m->name = tide_arena_strdup(arena, node->name);
    m->op = tide_arena_strdup(arena, info->name);
    if (!m->name || !m->op)
        return NULL;
    if (node->device && node->device[0]) {
        m->device = tide_arena_strdup(arena, node->device);
        if (!m->device)
            return NULL;
    }

    size_t n_inputs = (size_t)node->n_inputs + node->n_controls;
    if (n_inputs) {
        m->inputs = tide_arena_calloc(arena, n_inputs, sizeof(*m->inputs));
        if (!m->inputs)
            return NULL;
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            const struct tide_edge *e = &node->inputs[i];
            assert(e->node < graph->n_nodes);
            m->inputs[i] = input_string(graph->nodes[e->node].name, e->output, false, arena);
            if (!m->inputs[i])
                return NULL;
        }
        for (uint32_t i = 0; i < node->n_controls; i++) {
            assert(node->controls[i] < graph->n_nodes);
            char *s = input_string(graph->nodes[node->controls[i]].name, 0, true, arena);
            if (!s)
                return NULL;
            m->inputs[node->n_inputs + i] = s;
        }
        m->n_inputs = n_inputs;
    }

    size_t n_attrs = 0;
    for (uint32_t k = 0; k < info->n_attrs; k++)
        n_attrs += node->attrs[k].present;
    if (n_attrs) {
        m->attrs = tide_arena_calloc(arena, n_attrs, sizeof(*m->attrs));
        if (!m->attrs)
            return NULL;
        for (uint32_t k = 0; k < info->n_attrs; k++) {
            if (!node->attrs[k].present)
                continue;
            Tide__V1__Node__AttrsEntry *entry = tide_arena_alloc(arena, sizeof(*entry));
            Tide__V1__AttrValue *value = tide_arena_alloc(arena, sizeof(*value));
            if (!entry || !value)
                return NULL;
            tide__v1__node__attrs_entry__init(entry);
            entry->key = tide_arena_strdup(arena, info->attrs[k].name);
            entry->value = value;
            if (!entry->key || !attr_to_proto(&node->attrs[k], info->attrs[k].type, value, arena))
                return NULL;
            m->attrs[m->n_attrs++] = entry;
        }
    }
    return m;
}

enum tide_status tide_graph_export_message(const struct tide_graph *graph, struct tide_arena *arena,
                                           Tide__V1__Graph **out, struct tide_error *err)
{
    *out = NULL;
    Tide__V1__Graph *m = tide_arena_alloc(arena, sizeof(*m));
    if (!m)
        return tide_error_set(err, TIDE_NOMEM, "out of memory exporting a graph");
    tide__v1__graph__init(m);
    m->version = graph->version ? graph->version : 1;
    if (graph->n_nodes) {
        m->nodes = tide_arena_calloc(arena, graph->n_nodes, sizeof(*m->nodes));
        if (!m->nodes)
            return tide_error_set(err, TIDE_NOMEM, "out of memory exporting %u nodes",
                                  graph->n_nodes);
        for (uint32_t id = 0; id < graph->n_nodes; id++) {
            const struct tide_node *node = &graph->nodes[id];
            m->nodes[id] = node_to_proto(graph, node, arena);
            if (!m->nodes[id])
                return tide_error_set(err, TIDE_NOMEM, "out of memory exporting node \"%s\"",
                                      node->name);
        }
        m->n_nodes = graph->n_nodes;
    }
    *out = m;
    return TIDE_OK;
}

enum tide_status tide_graph_export(const struct tide_graph *graph, void **data, size_t *len,
                                   struct tide_error *err)
{
    *data = NULL;
    *len = 0;
    struct tide_arena *arena = tide_arena_new(0);
    if (!arena)
        return tide_error_set(err, TIDE_NOMEM, "out of memory exporting a graph");
    Tide__V1__Graph *m;
    enum tide_status st = tide_graph_export_message(graph, arena, &m, err);
    if (st != TIDE_OK) {
        tide_arena_free(arena);
        return st;
    }
    size_t size = tide__v1__graph__get_packed_size(m);
    /* One byte more than needed, so that an empty graph still gets a buffer. */
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        tide_arena_free(arena);
        return tide_error_set(err, TIDE_NOMEM, "out of memory packing a graph of %zu bytes", size);
    }
    size_t packed = tide__v1__graph__pack(m, buf);
    tide_arena_free(arena);
    assert(packed == size);
    (void)packed;
    *data = buf;
    *len = size;
    return TIDE_OK;
}
