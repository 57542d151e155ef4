/* SPDX-License-Identifier: MIT */
/*
 * fuzz_import.c: libFuzzer target for the wire boundary (graph/import.c).
 *
 * Each input is treated as a serialized tide.v1.Graph and imported with small
 * limits, so that every allocation stays bounded and the fuzzer measures our
 * code, not the allocator. The property is the one the daemon relies on:
 * whatever arrives, import returns a status without crashing, leaking or
 * tripping a sanitizer, and fills the message on failure.
 *
 * A graph that imports must also survive a round trip: export, import again,
 * export again must succeed and give the same bytes. That catches an infer
 * function that normalises attributes differently the second time, or an
 * exporter that writes what the importer refuses.
 *
 * Mutating serialized protobuf byte by byte rarely produces what the checks
 * care about most: a negative or huge dimension is a ten-byte varint, and an
 * input string that names another node must spell it. So a custom mutator
 * (LLVMFuzzerCustomMutator) unpacks the input, when it parses, and changes
 * one thing the way a confused or hostile client would: an op, an input
 * ("x", "x:k", "^x"), an attribute's key or value (interesting integers,
 * NaN and infinities, dtypes out of range), a dimension, the node order, the
 * version. Half the time, or when the input does not parse, it leaves the
 * work to libFuzzer's own byte mutations (LLVMFuzzerMutate).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
/* libFuzzer's own mutation, for the custom mutator to fall back on. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct tide_graph_limits limits = {.max_nodes = 4096,
                                             .max_tensor_bytes = (uint64_t)64 << 20};
    struct tide_graph *g = NULL;
    struct tide_error err = {0};
    enum tide_status st = tide_graph_import(data, size, &limits, &g, &err);
    if (st != TIDE_OK) {
        /* A refusal always comes with a graph of NULL and a message. */
        if (g != NULL || err.status != st || err.message[0] == '\0')
            abort();
        return 0;
    }
    if (g == NULL)
        abort();

    void *bytes = NULL, *bytes2 = NULL;
    size_t len = 0, len2 = 0;
    struct tide_graph *back = NULL;
    if (tide_graph_export(g, &bytes, &len, &err) != TIDE_OK)
        abort();
    if (tide_graph_import(bytes, len, &limits, &back, &err) != TIDE_OK)
        abort();
    if (tide_graph_export(back, &bytes2, &len2, &err) != TIDE_OK)
        abort();
    if (len != len2 || memcmp(bytes, bytes2, len) != 0)
        abort();
    free(bytes);
    free(bytes2);
    tide_graph_free(back);
    tide_graph_free(g);
    return 0;
}

/* ============================================================================
 * The structure-aware mutator
 * ========================================================================== */

static uint64_t rng_next(uint64_t *state)
{
    /* xorshift64: any nonzero state works. */
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static uint32_t rng_below(uint64_t *state, uint32_t n)
{
    return n ? (uint32_t)(rng_next(state) % n) : 0;
}

static int64_t interesting_int(uint64_t *rng)
{
    static const int64_t values[] = {0,
                                     1,
                                     2,
                                     3,
                                     4,
                                     7,
                                     8,
                                     64,
                                     -1,
                                     -2,
                                     INT32_MAX,
                                     INT32_MIN,
                                     INT64_C(1) << 32,
                                     INT64_C(1) << 62,
                                     INT64_MAX,
                                     INT64_MIN};
    return values[rng_below(rng, sizeof(values) / sizeof(values[0]))];
}

/*
 * Replaces a string field of an unpacked message. protobuf-c's default
 * allocator is malloc/free, so free_unpacked frees the new string, and the
 * old one unless it is the shared empty default.
 */
static void replace_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return;
    if (*field && *field != protobuf_c_empty_string)
        free(*field);
    *field = copy;
}

static void mutate_dims(Tide__V1__TensorShape *shape, uint64_t *rng)
{
    if (shape && shape->n_dims)
        shape->dims[rng_below(rng, (uint32_t)shape->n_dims)] = interesting_int(rng);
}

static void mutate_value(Tide__V1__AttrValue *v, uint64_t *rng)
{
    static const float floats[] = {0.0f, -1.0f, 0.5f, 1.0f, 2.0f, 1e30f, -1e-30f};
    switch (v->value_case) {
    case TIDE__V1__ATTR_VALUE__VALUE_I:
        v->i = interesting_int(rng);
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_F:
        switch (rng_below(rng, 4)) {
        case 0:
            v->f = NAN;
            break;
        case 1:
            v->f = rng_below(rng, 2) ? INFINITY : -INFINITY;
            break;
        default:
            v->f = floats[rng_below(rng, sizeof(floats) / sizeof(floats[0]))];
        }
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_B:
        v->b = !v->b;
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_DTYPE:
        v->dtype = (Tide__V1__DataType)((int)rng_below(rng, 5) - 1);
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_SHAPE:
        mutate_dims(v->shape, rng);
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_TENSOR:
        if (v->tensor && rng_below(rng, 4) == 0)
            v->tensor->dtype = (Tide__V1__DataType)((int)rng_below(rng, 5) - 1);
        else if (v->tensor)
            mutate_dims(v->tensor->shape, rng);
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_INTS:
        if (v->ints && v->ints->n_values)
            v->ints->values[rng_below(rng, (uint32_t)v->ints->n_values)] = interesting_int(rng);
        break;
    case TIDE__V1__ATTR_VALUE__VALUE_FLOATS:
        if (v->floats && v->floats->n_values)
            v->floats->values[rng_below(rng, (uint32_t)v->floats->n_values)] = NAN;
        break;
    default:
        break;
    }
}

/* Changes one thing in msg; returns false when there was nothing to change. */
static bool mutate_graph(Tide__V1__Graph *msg, uint64_t *rng)
{
    if (msg->n_nodes == 0)
        return false;
    Tide__V1__Node *node = msg->nodes[rng_below(rng, (uint32_t)msg->n_nodes)];
    const Tide__V1__Node *other = msg->nodes[rng_below(rng, (uint32_t)msg->n_nodes)];
    char text[TIDE_MAX_NAME + 32];
    switch (rng_below(rng, 8)) {
    case 0: /* Another op. */
        replace_string(&node->op, tide_op_info((enum tide_op)rng_below(rng, TIDE_OP_COUNT))->name);
        return true;
    case 1: /* An input that names another node, or this one. */
        if (node->n_inputs == 0)
            return false;
        switch (rng_below(rng, 3)) {
        case 0:
            snprintf(text, sizeof(text), "%.*s", TIDE_MAX_NAME, other->name);
            break;
        case 1:
            snprintf(text, sizeof(text), "%.*s:%u", TIDE_MAX_NAME, other->name, rng_below(rng, 4));
            break;
        default:
            snprintf(text, sizeof(text), "^%.*s", TIDE_MAX_NAME, other->name);
        }
        replace_string(&node->inputs[rng_below(rng, (uint32_t)node->n_inputs)], text);
        return true;
    case 2: /* One input fewer (arity). */
        if (node->n_inputs == 0)
            return false;
        node->n_inputs--;
        free(node->inputs[node->n_inputs]);
        node->inputs[node->n_inputs] = NULL;
        return true;
    case 3: /* An attribute key of some op: unknown, or of another type. */
        if (node->n_attrs == 0)
            return false;
        {
            const struct tide_op_info *info =
                tide_op_info((enum tide_op)rng_below(rng, TIDE_OP_COUNT));
            if (info->n_attrs == 0)
                return false;
            replace_string(&node->attrs[rng_below(rng, (uint32_t)node->n_attrs)]->key,
                           info->attrs[rng_below(rng, info->n_attrs)].name);
        }
        return true;
    case 4:
    case 5: /* An attribute value. */
        if (node->n_attrs == 0)
            return false;
        {
            Tide__V1__Node__AttrsEntry *entry =
                node->attrs[rng_below(rng, (uint32_t)node->n_attrs)];
            if (!entry->value)
                return false;
            mutate_value(entry->value, rng);
        }
        return true;
    case 6: { /* Two nodes swap places (ids change, names do not). */
        uint32_t a = rng_below(rng, (uint32_t)msg->n_nodes);
        uint32_t b = rng_below(rng, (uint32_t)msg->n_nodes);
        Tide__V1__Node *t = msg->nodes[a];
        msg->nodes[a] = msg->nodes[b];
        msg->nodes[b] = t;
        return a != b;
    }
    default:
        msg->version = rng_below(rng, 3);
        return true;
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    uint64_t rng = ((uint64_t)seed << 1) | 1;
    if (rng_below(&rng, 2) == 0)
        return LLVMFuzzerMutate(data, size, max_size);
    Tide__V1__Graph *msg = tide__v1__graph__unpack(NULL, size, data);
    if (!msg)
        return LLVMFuzzerMutate(data, size, max_size);
    bool changed = false;
    for (uint32_t n = 1 + rng_below(&rng, 3); n > 0; n--)
        changed |= mutate_graph(msg, &rng);
    size_t packed = 0;
    if (changed && tide__v1__graph__get_packed_size(msg) <= max_size)
        packed = tide__v1__graph__pack(msg, data);
    tide__v1__graph__free_unpacked(msg, NULL);
    return packed ? packed : LLVMFuzzerMutate(data, size, max_size);
}
