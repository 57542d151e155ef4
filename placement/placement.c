/* SPDX-License-Identifier: MIT */
/*
 * placement.c: Variables and Consts homed on the host, Fetch before their
 * use groups, WriteBack after their updates (placement.h says what and why).
 *
 * The pass is linear in the graph: one walk over the depth-first order finds
 * the sources, the partitioner's use lists (sorted by position) give each
 * source's groups without a search, and rewiring touches only the inputs of
 * the uses. Names of inserted nodes are derived from the subject's, so a
 * plan reads well in `tidectl plan` and is the same on every run.
 */
#include "placement/placement.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * Insertions
 * ========================================================================== */

enum tide_status tide_place_insertions_push(struct tide_place_insertions *list, uint32_t node,
                                            uint32_t partition, uint64_t key,
                                            struct tide_error *err)
{
    if (list->n == list->cap) {
        uint32_t cap = list->cap ? list->cap * 2 : 64;
        struct tide_place_insertion *items = realloc(list->items, (size_t)cap * sizeof(*items));
        if (!items)
            return tide_error_set(err, TIDE_NOMEM, "out of memory listing %u inserted nodes", cap);
        list->items = items;
        list->cap = cap;
    }
    list->items[list->n++] = (struct tide_place_insertion){node, partition, key};
    return TIDE_OK;
}

void tide_place_insertions_release(struct tide_place_insertions *list)
{
    if (!list)
        return;
    free(list->items);
    memset(list, 0, sizeof(*list));
}

/* ============================================================================
 * Use groups
 * ========================================================================== */

uint32_t tide_place_group_uses(const struct tide_tensor_life *life, uint32_t threshold,
                               uint32_t prefetch, bool from_production,
                               struct tide_use_group *groups)
{
    uint32_t n = 0;
    uint32_t previous = life->produced; /* partition of the previous use, or of the producer */
    if (from_production)
        groups[n++] = (struct tide_use_group){0, 0, life->produced};
    for (uint32_t i = 0; i < life->n_uses; i++) {
        uint32_t part = life->use_partitions[i];
        /* Use partitions never precede the producer's and never decrease. */
        if (n == 0 || part - previous > threshold) {
            uint32_t lowest = n == 0 ? 0 : previous + 1;
            uint32_t wanted = part > prefetch ? part - prefetch : 0;
            groups[n++] = (struct tide_use_group){i, 0, wanted > lowest ? wanted : lowest};
        }
        groups[n - 1].n_uses++;
        previous = part;
    }
    return n;
}

bool tide_place_input_written(const struct tide_node *node, uint32_t i)
{
    return (tide_op_info(node->op)->flags & TIDE_OP_F_UPDATE) && i + 1 < node->n_inputs;
}

/* ============================================================================
 * Memory nodes
 * ========================================================================== */

enum tide_status tide_place_add_memory_node(struct tide_graph *graph, enum tide_op op,
                                            const char *prefix, struct tide_edge input,
                                            struct tide_edge subject, int64_t index, uint32_t *id,
                                            struct tide_error *err)
{
    /* Room for a prefix, a whole node name and the suffixes. */
    char name[TIDE_MAX_NAME + 128];
    char tail[64] = "";
    const char *base = graph->nodes[subject.node].name;
    size_t at = 0;
    if (subject.output > 0)
        at += (size_t)snprintf(tail + at, sizeof(tail) - at, ".%" PRIu32, subject.output);
    if (index >= 0)
        snprintf(tail + at, sizeof(tail) - at, "/%" PRId64, index);
    int len = snprintf(name, sizeof(name), "%s/%s%s", prefix, base, tail);
    /* A name too long to extend falls back to the subject's id, which is short and unique. */
    if (len < 0 || (size_t)len > TIDE_MAX_NAME - 12)
        len = snprintf(name, sizeof(name), "%s/node%" PRIu32 "%s", prefix, subject.node, tail);
    /* A name the user already took gets the first free "-<n>" suffix. */
    for (uint32_t suffix = 2; tide_graph_find(graph, name) != TIDE_NO_NODE; suffix++)
        snprintf(name + len, sizeof(name) - (size_t)len, "-%" PRIu32, suffix);

    /* Copy the moved output before the node array can move. */
    struct tide_output out = graph->nodes[input.node].outputs[input.output];
    enum tide_status st = tide_graph_add_node(graph, op, name, id, err);
    if (st == TIDE_OK)
        st = tide_graph_set_inputs(graph, *id, &input, 1, err);
    if (st != TIDE_OK)
        return st;
    struct tide_node *node = &graph->nodes[*id];
    node->subject = subject.node;
    if (node->n_outputs == 1) {
        node->outputs[0] = (struct tide_output){
            .dtype = out.dtype, .shape = out.shape, .nbytes = out.nbytes, .home = TIDE_HOME_DEVICE};
    }
    return TIDE_OK;
}

/* ============================================================================
 * The pass
 * ========================================================================== */

static bool is_homed_source(enum tide_op op)
{
    return op == TIDE_OP_VARIABLE || op == TIDE_OP_CONST;
}

/*
 * Rewires the uses of group g of source v to read fetch instead; returns
 * true if one of them writes it (an update).
 */
static bool rewire_group(struct tide_graph *graph, const struct tide_tensor_life *life,
                         const struct tide_use_group *g, uint32_t v, uint32_t fetch)
{
    bool writes = false;
    for (uint32_t u = g->first; u < g->first + g->n_uses; u++) {
        struct tide_node *node = &graph->nodes[life->uses[u]];
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            if (node->inputs[i].node != v || node->inputs[i].output != 0)
                continue;
            node->inputs[i] = (struct tide_edge){fetch, 0};
            writes = writes || tide_place_input_written(node, i);
        }
    }
    return writes;
}

/* Fetches (and WriteBacks) for one host-homed source v. */
static enum tide_status place_source(struct tide_graph *graph, const struct tide_partitioning *p,
                                     const struct tide_place_options *o, uint32_t v,
                                     struct tide_use_group *groups, uint32_t *write_backs,
                                     struct tide_place_insertions *inserted,
                                     struct tide_place_report *report, struct tide_error *err)
{
    const struct tide_tensor_life *life = &p->tensors[p->tensor_of[v]];
    uint32_t n_groups = tide_place_group_uses(life, o->threshold, o->prefetch, false, groups);
    uint32_t n_write_backs = 0;
    uint64_t bytes = graph->nodes[v].outputs[0].nbytes;
    struct tide_edge source = {v, 0};
    for (uint32_t g = 0; g < n_groups; g++) {
        uint32_t fetch;
        enum tide_status st = tide_place_add_memory_node(graph, TIDE_OP_FETCH, "fetch", source,
                                                         source, g, &fetch, err);
        uint32_t at = groups[g].load_partition * p->partition_size;
        if (o->pulled && o->pulled[life->uses - p->tensors[0].uses + groups[g].first] < at)
            at = o->pulled[life->uses - p->tensors[0].uses + groups[g].first];
        if (st == TIDE_OK)
            st = tide_place_insertions_push(inserted, fetch, at / p->partition_size,
                                            tide_place_key_before(at), err);
        /* The host home must hold every earlier update of this step before it is read again. */
        for (uint32_t w = 0; st == TIDE_OK && w < n_write_backs; w++)
            st = tide_graph_add_control(graph, fetch, write_backs[w], err);
        if (st != TIDE_OK)
            return st;
        report->fetches++;
        report->fetch_bytes += bytes;
        if (!rewire_group(graph, life, &groups[g], v, fetch))
            continue;

        /* An update wrote the copy: write it back once every reader of the copy is done. */
        uint32_t last = p->position[life->uses[groups[g].first + groups[g].n_uses - 1]];
        uint32_t wb;
        st = tide_place_add_memory_node(graph, TIDE_OP_WRITE_BACK, "writeback",
                                        (struct tide_edge){fetch, 0}, source,
                                        n_write_backs == 0 ? -1 : (int64_t)g, &wb, err);
        for (uint32_t u = groups[g].first; st == TIDE_OK && u < groups[g].first + groups[g].n_uses;
             u++)
            st = tide_graph_add_control(graph, wb, life->uses[u], err);
        if (st == TIDE_OK)
            st = tide_place_insertions_push(inserted, wb, last / p->partition_size,
                                            tide_place_key_after(last), err);
        if (st != TIDE_OK)
            return st;
        write_backs[n_write_backs++] = wb;
        report->write_backs++;
        report->write_back_bytes += bytes;
    }
    return TIDE_OK;
}

enum tide_status tide_place(struct tide_graph *graph, const struct tide_partitioning *partitioning,
                            const struct tide_place_options *options,
                            struct tide_place_insertions *inserted,
                            struct tide_place_report *report, struct tide_error *err)
{
    const struct tide_partitioning *p = partitioning;
    memset(report, 0, sizeof(*report));
    if (p->n_order > graph->n_nodes)
        return tide_error_set(err, TIDE_INVALID,
                              "placement: the partitioning has %u nodes, the graph %u", p->n_order,
                              graph->n_nodes);

    /* Homes first; the most uses of any source sizes the scratch. */
    uint32_t most_uses = 0;
    for (uint32_t i = 0; i < p->n_order; i++) {
        uint32_t v = p->order[i];
        struct tide_node *node = &graph->nodes[v];
        if (!is_homed_source(node->op))
            continue;
        node->outputs[0].home = options->host ? TIDE_HOME_HOST : TIDE_HOME_DEVICE;
        if (options->host)
            report->host_bytes += node->outputs[0].nbytes;
        uint32_t uses = p->tensors[p->tensor_of[v]].n_uses;
        most_uses = uses > most_uses ? uses : most_uses;
    }
    if (!options->host)
        return TIDE_OK;

    struct tide_use_group *groups = malloc(((size_t)most_uses + 1) * sizeof(*groups));
    uint32_t *write_backs = malloc(((size_t)most_uses + 1) * sizeof(*write_backs));
    enum tide_status st = TIDE_OK;
    if (!groups || !write_backs)
        st = tide_error_set(err, TIDE_NOMEM, "placement: out of memory");
    /* In order of position, so that names and ids come out the same on every run. */
    for (uint32_t i = 0; st == TIDE_OK && i < p->n_order; i++) {
        uint32_t v = p->order[i];
        if (is_homed_source(graph->nodes[v].op))
            st = place_source(graph, p, options, v, groups, write_backs, inserted, report, err);
    }
    free(groups);
    free(write_backs);
    return st;
}
