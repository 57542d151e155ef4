/* SPDX-License-Identifier: MIT */
/*
 * partitioner.c: the depth-first order cut into partitions, and liveness.
 *
 * Liveness is computed in one pass over the order: each consumer appends
 * itself to the use lists of the outputs it reads, so use lists come out
 * sorted by position (and therefore by partition) with no sort. Use arrays
 * are carved from two flat allocations sized by the edge count.
 */
#include "partitioner/partitioner.h"

#include <stdlib.h>
#include <string.h>

void tide_partitioning_release(struct tide_partitioning *p)
{
    if (!p)
        return;
    free(p->order);
    free(p->position);
    if (p->tensors && p->n_tensors) {
        /* The use arrays of all tensors share the first tensor's allocation. */
        free(p->tensors[0].uses);
        free(p->tensors[0].use_partitions);
    }
    free(p->tensors);
    free(p->tensor_of);
    memset(p, 0, sizeof(*p));
}

enum tide_status tide_partition_resize(const struct tide_partitioning *src, uint32_t partition_size,
                                       struct tide_partitioning *out, struct tide_error *err)
{
    memset(out, 0, sizeof(*out));
    if (partition_size == 0)
        return tide_error_set(err, TIDE_INVALID, "partition_size must be at least 1");
    uint32_t n = src->n_order;
    size_t n_uses = 0;
    if (src->n_tensors) {
        const struct tide_tensor_life *last = &src->tensors[src->n_tensors - 1];
        n_uses = (size_t)(last->uses - src->tensors[0].uses) + last->n_uses;
    }
    out->partition_size = partition_size;
    out->n_order = n;
    out->n_partitions = n ? (n + partition_size - 1) / partition_size : 0;
    out->n_tensors = src->n_tensors;
    out->order = malloc(((size_t)n + 1) * sizeof(*out->order));
    out->position = malloc(((size_t)n + 1) * sizeof(*out->position));
    out->tensor_of = malloc(((size_t)n + 1) * sizeof(*out->tensor_of));
    out->tensors = calloc((size_t)src->n_tensors + 1, sizeof(*out->tensors));
    uint32_t *uses = src->n_tensors ? malloc((n_uses + 1) * sizeof(*uses)) : NULL;
    uint32_t *use_partitions = src->n_tensors ? malloc((n_uses + 1) * sizeof(*uses)) : NULL;
    if (!out->order || !out->position || !out->tensor_of || !out->tensors ||
        (src->n_tensors && (!uses || !use_partitions))) {
        free(uses);
        free(use_partitions);
        tide_partitioning_release(out);
        return tide_error_set(err, TIDE_NOMEM, "out of memory partitioning %u nodes", n);
    }
    memcpy(out->order, src->order, (size_t)n * sizeof(*out->order));
    memcpy(out->position, src->position, (size_t)n * sizeof(*out->position));
    memcpy(out->tensor_of, src->tensor_of, (size_t)n * sizeof(*out->tensor_of));
    if (n_uses)
        memcpy(uses, src->tensors[0].uses, n_uses * sizeof(*uses));
    for (uint32_t t = 0; t < src->n_tensors; t++) {
        const struct tide_tensor_life *from = &src->tensors[t];
        struct tide_tensor_life *life = &out->tensors[t];
        size_t at = (size_t)(from->uses - src->tensors[0].uses);
        *life = *from;
        life->produced = src->position[from->tensor.node] / partition_size;
        life->uses = uses + at;
        life->use_partitions = use_partitions + at;
        for (uint32_t u = 0; u < life->n_uses; u++)
            life->use_partitions[u] = src->position[life->uses[u]] / partition_size;
    }
    return TIDE_OK;
}

enum tide_status tide_partition(struct tide_graph *graph, uint32_t partition_size,
                                struct tide_partitioning *out, struct tide_error *err)
{
    memset(out, 0, sizeof(*out));
    if (partition_size == 0)
        return tide_error_set(err, TIDE_INVALID, "partition_size must be at least 1");
    uint32_t n = graph->n_nodes;
    out->partition_size = partition_size;
    out->n_order = n;
    out->n_partitions = n ? (n + partition_size - 1) / partition_size : 0;
    out->order = malloc(((size_t)n + 1) * sizeof(*out->order));
    out->position = malloc(((size_t)n + 1) * sizeof(*out->position));
    out->tensor_of = malloc(((size_t)n + 1) * sizeof(*out->tensor_of));
    size_t n_tensors = 0, n_edges = 0;
    for (uint32_t v = 0; v < n; v++) {
        n_tensors += graph->nodes[v].n_outputs;
        n_edges += graph->nodes[v].n_inputs;
    }
    out->tensors = calloc(n_tensors + 1, sizeof(*out->tensors));
    uint32_t *uses = malloc((n_edges + 1) * sizeof(*uses));
    uint32_t *use_partitions = malloc((n_edges + 1) * sizeof(*use_partitions));
    if (!out->order || !out->position || !out->tensor_of || !out->tensors || !uses ||
        !use_partitions) {
        free(uses);
        free(use_partitions);
        tide_partitioning_release(out);
        return tide_error_set(err, TIDE_NOMEM, "out of memory partitioning %u nodes", n);
    }
    enum tide_status st = tide_graph_dfs_order(graph, out->order, err);
    if (st != TIDE_OK) {
        free(uses);
        free(use_partitions);
        tide_partitioning_release(out);
        return st;
    }
    out->n_tensors = (uint32_t)n_tensors;

    /* Tensors in order of production; count uses to carve the use arrays. */
    uint32_t t = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = out->order[i];
        struct tide_node *node = &graph->nodes[v];
        out->position[v] = i;
        node->partition = (int32_t)(i / partition_size);
        out->tensor_of[v] = t;
        for (uint32_t k = 0; k < node->n_outputs; k++, t++) {
            out->tensors[t].tensor = (struct tide_edge){v, k};
            out->tensors[t].produced = i / partition_size;
        }
    }
    for (uint32_t v = 0; v < n; v++) {
        const struct tide_node *node = &graph->nodes[v];
        for (uint32_t j = 0; j < node->n_inputs; j++) {
            const struct tide_edge *e = &node->inputs[j];
            out->tensors[out->tensor_of[e->node] + e->output].n_uses++;
        }
    }
    size_t next = 0;
    for (uint32_t i = 0; i < out->n_tensors; i++) {
        out->tensors[i].uses = uses + next;
        out->tensors[i].use_partitions = use_partitions + next;
        next += out->tensors[i].n_uses;
        out->tensors[i].n_uses = 0;
    }
    /* Walking consumers in order keeps every use list sorted by position. */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t v = out->order[i];
        const struct tide_node *node = &graph->nodes[v];
        for (uint32_t j = 0; j < node->n_inputs; j++) {
            const struct tide_edge *e = &node->inputs[j];
            struct tide_tensor_life *life = &out->tensors[out->tensor_of[e->node] + e->output];
            /* A node reading one tensor twice (Mul(x, x)) is one use. */
            if (life->n_uses && life->uses[life->n_uses - 1] == v)
                continue;
            life->uses[life->n_uses] = v;
            life->use_partitions[life->n_uses] = i / partition_size;
            life->n_uses++;
        }
    }
    if (out->n_tensors == 0) {
        free(uses);
        free(use_partitions);
    }
    return TIDE_OK;
}
