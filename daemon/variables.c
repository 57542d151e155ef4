/* SPDX-License-Identifier: MIT */
/*
 * variables.c: the worker's tasks that read a job's Variables — CHECKPOINT
 * (every Variable, optimizer state included, written as checkpoint-<step>.pb
 * and linked as checkpoint.pb) and READ (ReadVariables, from the live
 * session or, for a job without one, from its checkpoint file).
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
    if (st == TIDE_OK) {
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
