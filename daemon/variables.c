/* SPDX-License-Identifier: MIT */
/*
 * variables.c: the worker's tasks that read a job's Variables — CHECKPOINT
 * (every Variable, optimizer state included, written as checkpoint-<step>.pb
 * and linked as checkpoint.pb) and READ (ReadVariables, from the live
 * session or, for a job without one, from its checkpoint file; whole, or
 * a page of the Variables' bytes at a time for weights too large for one
 * message).
 *
 * Threads: the device thread runs them (worker.c's DESIGN section), the
 * only thread that drives a job's session.
 */
#include "daemon/worker-impl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "daemon/store.h"

/* Variables read from a session into wire tensors; freed with variables_release. */
struct variables {
    uint32_t n;
    struct tided_named_tensor *tensors;
    Tide__V1__NamedTensor **ptrs;
    void **data;
};

static void variables_release(struct variables *v)
{
    if (v->data) {
        for (uint32_t i = 0; i < v->n; i++)
            free(v->data[i]);
    }
    free(v->data);
    free(v->tensors);
    free(v->ptrs);
    memset(v, 0, sizeof(*v));
}

/* Reads the Variables named in ids (node ids of the session graph). */
static enum tide_status variables_read(struct tide_session *s, const uint32_t *ids, uint32_t n,
                                       struct variables *v, struct tide_error *err)
{
    const struct tide_graph *g = tide_session_graph(s);
    memset(v, 0, sizeof(*v));
    v->tensors = calloc(n ? n : 1, sizeof(*v->tensors));
    v->ptrs = calloc(n ? n : 1, sizeof(*v->ptrs));
    v->data = calloc(n ? n : 1, sizeof(*v->data));
    if (!v->tensors || !v->ptrs || !v->data) {
        variables_release(v);
        return tide_error_set(err, TIDE_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct tide_node *node = &g->nodes[ids[i]];
        const struct tide_output *o = &node->outputs[0];
        v->data[i] = malloc(o->nbytes ? o->nbytes : 1);
        v->n = i + 1;
        if (!v->data[i]) {
            variables_release(v);
            return tide_error_set(err, TIDE_NOMEM, "out of memory for variable \"%s\"",
                                  node->name);
        }
        enum tide_status st = tide_session_fetch(s, node->name, v->data[i], o->nbytes, err);
        if (st != TIDE_OK) {
            variables_release(v);
            return st;
        }
        tided_named_tensor_fill(&v->tensors[i], node->name, o->dtype, &o->shape, v->data[i],
                                o->nbytes);
        v->ptrs[i] = &v->tensors[i].named;
    }
    return TIDE_OK;
}

/*
 * Writes checkpoint-<step>.pb atomically, makes checkpoint.pb (what resume
 * and ReadVariables read) the same file by an atomic hard link, or a second
 * copy where the file system has no hard links, then deletes the oldest
 * checkpoint-<step>.pb beyond the policy's keep. A crash at any point leaves
 * checkpoint.pb whole: the previous one or the new one.
 */
static enum tide_status write_checkpoint(struct tided_task *t,
                                        const Tide__V1__ReadVariablesResponse *msg)
{
    const char *dir = t->checkpoint.dir;
    char name[64];
    snprintf(name, sizeof(name), "checkpoint-%" PRIu64 ".pb", t->checkpoint.step);
    enum tide_status st =
        tided_store_write_checkpoint(dir, name, msg, &t->checkpoint.bytes, &t->err);
    if (st != TIDE_OK)
        return st;
    st = tided_store_link(dir, name, "checkpoint.pb", &t->err);
    if (st == TIDE_UNSUPPORTED) {
        TIDE_LOG_DEBUG("%s; writing a copy instead", t->err.message);
        tide_error_clear(&t->err);
        st = tided_store_write_checkpoint(dir, "checkpoint.pb", msg, NULL, &t->err);
    }
    if (st != TIDE_OK)
        return st;
    /* The checkpoint is safe by now: failing to delete old ones only costs disk. */
    struct tide_error e = {0};
    if (tided_store_prune_checkpoints(dir, t->checkpoint.keep, &e) != TIDE_OK)
        TIDE_LOG_WARN("cannot delete old checkpoints: %s", e.message);
    return TIDE_OK;
}

void tided__task_checkpoint(struct tided_task *t)
{
    const struct tide_graph *g = tide_session_graph(t->session);
    uint32_t *ids = malloc(((size_t)g->n_nodes + 1) * sizeof(*ids));
    if (!ids) {
        t->status = tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
        return;
    }
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_nodes; v++) {
        if (g->nodes[v].op == TIDE_OP_VARIABLE)
            ids[n++] = v;
    }
    struct variables vars;
    enum tide_status st = variables_read(t->session, ids, n, &vars, &t->err);
    free(ids);
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = t->checkpoint.step;
        msg.n_variables = vars.n;
        msg.variables = vars.ptrs;
        st = write_checkpoint(t, &msg);
        variables_release(&vars);
    }
    if (st == TIDE_OK) {
        t->checkpoint.path = tided_path_join(t->checkpoint.dir, "checkpoint.pb");
        if (!t->checkpoint.path)
            st = tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
    }
    t->status = st;
}

/* The Variables of a spec.pb's graph, by the op name on the wire. */
static char **spec_variables(const char *path, uint32_t *n)
{
    struct tide_error e = {0};
    *n = 0;
    Tide__V1__JobSpec *spec =
        (Tide__V1__JobSpec *)tided_store_read_message(path, &tide__v1__job_spec__descriptor, &e);
    if (!spec)
        return NULL;
    char **names = NULL;
    if (spec->graph) {
        names = calloc(spec->graph->n_nodes + 1, sizeof(char *));
        for (size_t i = 0; names && i < spec->graph->n_nodes; i++) {
            const Tide__V1__Node *node = spec->graph->nodes[i];
            if (node->op && strcmp(node->op, "Variable") == 0 && node->name)
                names[(*n)++] = strdup(node->name);
        }
    }
    tide__v1__job_spec__free_unpacked(spec, NULL);
    return names;
}

/*
 * A paged read's bounds: the page starts at offset into total bytes and
 * holds at most max_bytes; TIDE_INVALID when it starts past the end.
 */
static enum tide_status page_bounds(const struct tided_task *t, uint64_t total, uint64_t *len,
                                    struct tide_error *err)
{
    if (t->read.offset > total)
        return tide_error_set(err, TIDE_INVALID,
                              "ReadVariablesRequest.offset %" PRIu64
                              " is past the %" PRIu64 " bytes of the Variables read",
                              t->read.offset, total);
    uint64_t left = total - t->read.offset;
    *len = left < t->read.max_bytes ? left : t->read.max_bytes;
    return TIDE_OK;
}

/* The part of [start, start + bytes) inside the page [offset, offset + len): [*lo, *hi). */
static bool page_overlap(uint64_t start, uint64_t bytes, uint64_t offset, uint64_t len,
                         uint64_t *lo, uint64_t *hi)
{
    *lo = start > offset ? start : offset;
    *hi = start + bytes < offset + len ? start + bytes : offset + len;
    return *lo < *hi;
}

/*
 * A paged read from the session: the Variables in ids listed without
 * data, and the page of their bytes read range by range, so that no more
 * than a page is ever copied out of the job's memory.
 */
static enum tide_status read_page_session(struct tided_task *t, const uint32_t *ids, uint32_t n)
{
    const struct tide_graph *g = tide_session_graph(t->session);
    struct tided_named_tensor *tensors = calloc(n ? n : 1, sizeof(*tensors));
    Tide__V1__NamedTensor **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    uint8_t *page = NULL;
    enum tide_status st = tensors && ptrs ? TIDE_OK
                                          : tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
    uint64_t total = 0, len = 0;
    for (uint32_t i = 0; i < n && st == TIDE_OK; i++) {
        const struct tide_node *node = &g->nodes[ids[i]];
        const struct tide_output *o = &node->outputs[0];
        tided_named_tensor_fill(&tensors[i], node->name, o->dtype, &o->shape, NULL, 0);
        ptrs[i] = &tensors[i].named;
        total += o->nbytes;
    }
    if (st == TIDE_OK)
        st = page_bounds(t, total, &len, &t->err);
    if (st == TIDE_OK && !(page = malloc(len ? len : 1)))
        st = tide_error_set(&t->err, TIDE_NOMEM, "out of memory for a page of %" PRIu64 " bytes",
                            len);
    uint64_t start = 0, lo, hi;
    for (uint32_t i = 0; i < n && st == TIDE_OK; i++) {
        const struct tide_node *node = &g->nodes[ids[i]];
        uint64_t bytes = node->outputs[0].nbytes;
        if (page_overlap(start, bytes, t->read.offset, len, &lo, &hi))
            st = tide_session_read_variable_range(t->session, node->name, lo - start,
                                                  page + (lo - t->read.offset), hi - lo, &t->err);
        start += bytes;
    }
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = t->read.step;
        msg.n_variables = n;
        msg.variables = ptrs;
        msg.page = (ProtobufCBinaryData){(size_t)len, page};
        msg.total_bytes = total;
        st = tided__pack(&msg.base, &t->read.packed, &t->err);
    }
    free(page);
    free(tensors);
    free(ptrs);
    return st;
}

/* A paged read from a checkpoint's tensors (subset, m of them): as read_page_session. */
static enum tide_status read_page_checkpoint(struct tided_task *t, uint64_t step,
                                             Tide__V1__NamedTensor *const *subset, size_t m)
{
    Tide__V1__NamedTensor *named = calloc(m ? m : 1, sizeof(*named));
    Tide__V1__Tensor *tensors = calloc(m ? m : 1, sizeof(*tensors));
    Tide__V1__NamedTensor **ptrs = calloc(m ? m : 1, sizeof(*ptrs));
    uint8_t *page = NULL;
    enum tide_status st = named && tensors && ptrs
                              ? TIDE_OK
                              : tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
    uint64_t total = 0, len = 0;
    for (size_t i = 0; i < m && st == TIDE_OK; i++) {
        /* Shallow copies without the data: the listing. */
        named[i] = *subset[i];
        tensors[i] = *subset[i]->tensor;
        tensors[i].data = (ProtobufCBinaryData){0, NULL};
        named[i].tensor = &tensors[i];
        ptrs[i] = &named[i];
        total += subset[i]->tensor->data.len;
    }
    if (st == TIDE_OK)
        st = page_bounds(t, total, &len, &t->err);
    if (st == TIDE_OK && !(page = malloc(len ? len : 1)))
        st = tide_error_set(&t->err, TIDE_NOMEM, "out of memory for a page of %" PRIu64 " bytes",
                            len);
    uint64_t start = 0, lo, hi;
    for (size_t i = 0; i < m && st == TIDE_OK; i++) {
        const ProtobufCBinaryData *data = &subset[i]->tensor->data;
        if (page_overlap(start, data->len, t->read.offset, len, &lo, &hi))
            memcpy(page + (lo - t->read.offset), data->data + (lo - start), hi - lo);
        start += data->len;
    }
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = step;
        msg.n_variables = m;
        msg.variables = ptrs;
        msg.page = (ProtobufCBinaryData){(size_t)len, page};
        msg.total_bytes = total;
        st = tided__pack(&msg.base, &t->read.packed, &t->err);
    }
    free(page);
    free(named);
    free(tensors);
    free(ptrs);
    return st;
}

void tided__task_read_session(struct tided_task *t)
{
    const struct tide_graph *g = tide_session_graph(t->session);
    uint32_t n = t->read.n_names ? t->read.n_names : t->read.n_defaults;
    char *const *names = t->read.n_names ? t->read.names : t->read.defaults;
    uint32_t *ids = calloc(n ? n : 1, sizeof(*ids));
    if (!ids) {
        t->status = tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
        return;
    }
    enum tide_status st = TIDE_OK;
    for (uint32_t i = 0; i < n && st == TIDE_OK; i++) {
        ids[i] = tide_graph_find(g, names[i]);
        if (ids[i] == TIDE_NO_NODE || g->nodes[ids[i]].op != TIDE_OP_VARIABLE)
            st = tide_error_set(&t->err, TIDE_NOT_FOUND, "the job has no Variable called \"%s\"",
                                names[i]);
    }
    if (st == TIDE_OK && t->read.max_bytes) {
        t->status = read_page_session(t, ids, n);
        free(ids);
        return;
    }
    struct variables vars;
    if (st == TIDE_OK)
        st = variables_read(t->session, ids, n, &vars, &t->err);
    free(ids);
    if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = t->read.step;
        msg.n_variables = vars.n;
        msg.variables = vars.ptrs;
        st = tided__pack(&msg.base, &t->read.packed, &t->err);
        variables_release(&vars);
    }
    t->status = st;
}

void tided__task_read_checkpoint(struct tided_task *t)
{
    struct tide_error e = {0};
    Tide__V1__ReadVariablesResponse *ck = tided_store_read_checkpoint(t->read.checkpoint_path, &e);
    if (!ck) {
        t->status = tide_error_set(&t->err, e.status == TIDE_NOT_FOUND ? TIDE_NOT_FOUND
                                                                       : TIDE_INTERNAL,
                                   "%s", e.message);
        return;
    }
    /* The names to return: requested, the job's user variables, or spec.pb's. */
    uint32_t n = t->read.n_names ? t->read.n_names : t->read.n_defaults;
    char *const *names = t->read.n_names ? t->read.names : t->read.defaults;
    char **loaded = NULL;
    uint32_t n_loaded = 0;
    bool strict = t->read.n_names > 0;
    if (!t->read.n_names && !t->read.defaults && t->read.spec_path) {
        loaded = spec_variables(t->read.spec_path, &n_loaded);
        names = loaded;
        n = n_loaded;
    }
    Tide__V1__NamedTensor **subset = calloc(ck->n_variables + 1, sizeof(*subset));
    size_t m = 0;
    enum tide_status st = subset ? TIDE_OK : tide_error_set(&t->err, TIDE_NOMEM, "out of memory");
    if (st == TIDE_OK && !names) {
        /* Nothing says which are the user's: all of them. */
        for (size_t i = 0; i < ck->n_variables; i++)
            subset[m++] = ck->variables[i];
    }
    for (uint32_t i = 0; names && i < n && st == TIDE_OK; i++) {
        bool found = false;
        for (size_t j = 0; j < ck->n_variables && !found; j++) {
            if (ck->variables[j]->name && strcmp(ck->variables[j]->name, names[i]) == 0) {
                subset[m++] = ck->variables[j];
                found = true;
            }
        }
        if (!found && strict)
            st = tide_error_set(&t->err, TIDE_NOT_FOUND,
                                "variable \"%s\" is not in the checkpoint %s", names[i],
                                t->read.checkpoint_path);
    }
    if (st == TIDE_OK && t->read.max_bytes) {
        st = read_page_checkpoint(t, ck->step, subset, m);
    } else if (st == TIDE_OK) {
        Tide__V1__ReadVariablesResponse msg = TIDE__V1__READ_VARIABLES_RESPONSE__INIT;
        msg.step = ck->step;
        msg.n_variables = m;
        msg.variables = subset;
        st = tided__pack(&msg.base, &t->read.packed, &t->err);
    }
    free(subset);
    tided__free_strings(loaded, n_loaded);
    tide__v1__read_variables_response__free_unpacked(ck, NULL);
    t->status = st;
}
