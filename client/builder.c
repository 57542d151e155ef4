/* SPDX-License-Identifier: MIT */
/*
 * builder.c: libtide's graph builder (tide/graph.h).
 *
 * The builder keeps its nodes in a growable array; everything a node owns —
 * its name, input strings, attribute entries and constant tensors — lives in
 * one arena, freed with the builder. Attributes are kept as protobuf-c
 * structs from the start, so serializing only lays out an array of
 * Tide__V1__Node that points into the arena and packs it: nothing is copied
 * twice and nothing needs freeing one by one.
 *
 * Each op call runs in three steps, with a `struct call` carrying the state:
 *
 *   1. begin(): the sticky error check, then the node's full name (given or
 *      automatic, with the scope in front), checked for validity and
 *      uniqueness so that every later message can name the node;
 *   2. the op's own code: its inputs resolved (input()), their dtypes and
 *      shapes checked and the output shape inferred with the daemon's rules
 *      (graph/infer.c), its attributes added (attr_*());
 *   3. finish(): the node appended and its name registered.
 *
 * A failure in any step records the first error and returns TIDE_REF_NONE;
 * the half-built node is dropped (what it took from the arena is only
 * reclaimed with the builder, which is fine: errors are terminal).
 *
 * Names are found through a small open-addressing hash table, as are the
 * counters behind automatic names ("relu_3"), so building is linear in the
 * number of nodes.
 */
#include "tide/graph.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/builder-impl.h"
#include "common/arena.h"
#include "tide/v1/tide.pb-c.h"

/* Messages are cut to this many bytes. */
#define ERROR_MAX 512
/* Room for one shape as text: "[" + 8 dims of up to 20 characters + ", " + "]". */
#define SHAPE_TEXT_MAX 200
/* Most attributes any op the builder writes takes (Variable). */
#define MAX_ATTRS 8
/* Most outputs of any op the builder writes (BatchNorm). */
#define MAX_OUTPUTS 3
/* Scopes nest at most this deep: each takes at least two bytes of the prefix. */
#define MAX_SCOPES (TIDE_BUILDER_MAX_NAME / 2 + 1)
/* A tensor may hold at most this many elements, so that byte sizes never overflow. */
#define MAX_NUMEL (INT64_C(1) << 56)

/* ============================================================================
 * The ops the builder writes
 * ========================================================================== */

enum op_id {
    OP_PLACEHOLDER,
    OP_VARIABLE,
    OP_CONST,
    OP_IDENTITY,
    OP_MATMUL,
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_BIAS_ADD,
    OP_RELU,
    OP_SIGMOID,
    OP_TANH,
    OP_SOFTMAX,
    OP_SOFTMAX_CROSS_ENTROPY,
    OP_REDUCE_SUM,
    OP_REDUCE_MEAN,
    OP_RESHAPE,
    OP_CONCAT,
    OP_SLICE,
    OP_CONV2D,
    OP_MAX_POOL2D,
    OP_AVG_POOL2D,
    OP_GLOBAL_AVG_POOL,
    OP_BATCH_NORM,
};

/* An op: its wire name (graph/ops.def) and the stem of its automatic names. */
struct op_spec {
    const char *wire;
    const char *stem;
};

static const struct op_spec op_specs[] = {
    [OP_PLACEHOLDER] = {"Placeholder", "placeholder"},
    [OP_VARIABLE] = {"Variable", "variable"},
    [OP_CONST] = {"Const", "constant"},
    [OP_IDENTITY] = {"Identity", "identity"},
    [OP_MATMUL] = {"MatMul", "matmul"},
    [OP_ADD] = {"Add", "add"},
    [OP_SUB] = {"Sub", "sub"},
    [OP_MUL] = {"Mul", "mul"},
    [OP_BIAS_ADD] = {"BiasAdd", "bias_add"},
    [OP_RELU] = {"Relu", "relu"},
    [OP_SIGMOID] = {"Sigmoid", "sigmoid"},
    [OP_TANH] = {"Tanh", "tanh"},
    [OP_SOFTMAX] = {"Softmax", "softmax"},
    [OP_SOFTMAX_CROSS_ENTROPY] = {"SoftmaxCrossEntropy", "softmax_cross_entropy"},
    [OP_REDUCE_SUM] = {"ReduceSum", "reduce_sum"},
    [OP_REDUCE_MEAN] = {"ReduceMean", "reduce_mean"},
    [OP_RESHAPE] = {"Reshape", "reshape"},
    [OP_CONCAT] = {"Concat", "concat"},
    [OP_SLICE] = {"Slice", "slice"},
    [OP_CONV2D] = {"Conv2D", "conv2d"},
    [OP_MAX_POOL2D] = {"MaxPool2D", "max_pool2d"},
    [OP_AVG_POOL2D] = {"AvgPool2D", "avg_pool2d"},
    [OP_GLOBAL_AVG_POOL] = {"GlobalAvgPool", "global_avg_pool"},
    [OP_BATCH_NORM] = {"BatchNorm", "batch_norm"},
};

/* The initialisers a Variable accepts by name (graph/infer.c keeps the same list). */
static const char *const variable_inits[] = {
    "zeros", "ones", "constant", "normal", "uniform", "glorot_uniform", "he_normal",
};

/* ============================================================================
 * Types
 * ========================================================================== */

/* The dtype and shape of one output. */
struct output {
    enum tide_data_type dtype;
    int32_t rank;
    int64_t dims[TIDE_BUILDER_MAX_RANK];
};

/* One input of a node: the producer's id and output, or a control edge. */
struct edge {
    int32_t id;
    int32_t output; /* -1 for a control edge */
};

struct node {
    enum op_id op;
    char *name;                         /* arena */
    struct edge *edges;                 /* arena; data inputs first, then control */
    char **inputs;                      /* arena; the wire form of edges */
    int32_t n_inputs;                   /* data and control */
    int32_t cap_inputs;                 /* room in edges and inputs */
    Tide__V1__Node__AttrsEntry **attrs; /* arena */
    int32_t n_attrs;                    /* entries in attrs */
    int32_t n_outputs;                  /* entries in out */
    struct output out[MAX_OUTPUTS];     /* inferred dtype and shape of each output */
    bool trainable;                     /* a Variable the optimizer updates */
};

/* An open-addressing hash table from arena strings to int32 values. */
struct name_map {
    const char **keys; /* NULL: empty slot */
    int32_t *values;
    size_t cap; /* a power of two, or 0 */
    size_t count;
};

struct tide_builder {
    struct tide_arena *arena; /* names, inputs, attributes, tensors */
    struct node *nodes;       /* malloc'd, grows by doubling */
    int32_t n_nodes;          /* nodes added */
    int32_t cap_nodes;        /* room in nodes */
    struct name_map names;    /* node name -> id */
    struct name_map counters; /* automatic-name prefix -> next number */

    /* Name scopes. */
    char scope[TIDE_BUILDER_MAX_NAME + 2]; /* "a/b/" for scopes a and b, or "" */
    size_t scope_len;                      /* strlen(scope) */
    size_t scope_marks[MAX_SCOPES];        /* scope_len before each push */
    int32_t n_scopes;                      /* scopes open */

    /* The sticky error. */
    bool failed;           /* an error has been recorded */
    char error[ERROR_MAX]; /* the first error's message */
};

/* The state of one op call between begin() and finish(). */
struct call {
    tide_builder *b;
    enum op_id op;
    char name[TIDE_BUILDER_MAX_NAME + 1];         /* the node's full name */
    char auto_prefix[TIDE_BUILDER_MAX_NAME + 2];  /* for automatic names: scope + stem + "_" */
    int32_t auto_number;                          /* for automatic names: the number taken */
    bool automatic;                               /* the name was made here */
    struct edge edges[TIDE_BUILDER_MAX_RANK];     /* data inputs resolved so far */
    struct edge *many_edges;                      /* Concat: arena room for more */
    int32_t n_edges;                              /* data inputs resolved so far */
    Tide__V1__Node__AttrsEntry *attrs[MAX_ATTRS]; /* attributes added so far */
    int32_t n_attrs;                              /* entries in attrs */
};

/* ============================================================================
 * Errors and text
 * ========================================================================== */

/* Records the builder's first error (later ones are dropped). */
static void set_error_v(tide_builder *b, const char *format, va_list args)
{
    if (!b || b->failed)
        return;
    vsnprintf(b->error, sizeof(b->error), format, args);
    b->failed = true;
}

static void set_error(tide_builder *b, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(tide_builder *b, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    set_error_v(b, format, args);
    va_end(args);
}

void tide__builder_set_error(tide_builder *b, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    set_error_v(b, format, args);
    va_end(args);
}

/* Records an error about call c's node, prefixed with its op and name; returns TIDE_REF_NONE. */
static tide_ref fail(struct call *c, const char *format, ...) __attribute__((format(printf, 2, 3)));

static tide_ref fail(struct call *c, const char *format, ...)
{
    char message[ERROR_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    set_error(c->b, "%s \"%s\": %s", op_specs[c->op].wire, c->name, message);
    return TIDE_REF_NONE;
}

/* Text for a list of n int64s, "[1, 2, 3]"; for shapes and list attributes. */
struct text {
    char s[SHAPE_TEXT_MAX];
};

static struct text ints_text(const int64_t *v, int32_t n)
{
    struct text t;
    size_t used = 0;
    t.s[used++] = '[';
    t.s[used] = '\0';
    for (int32_t i = 0; i < n && used < sizeof(t.s); i++)
        used += (size_t)snprintf(t.s + used, sizeof(t.s) - used, "%s%" PRId64, i ? ", " : "", v[i]);
    if (used < sizeof(t.s) - 1)
        snprintf(t.s + used, sizeof(t.s) - used, "]");
    return t;
}

static struct text shape_text(const struct output *o)
{
    return ints_text(o->dims, o->rank);
}

static const char *dtype_name(enum tide_data_type dtype)
{
    switch (dtype) {
    case TIDE_DT_FLOAT32:
        return "float32";
    case TIDE_DT_INT32:
        return "int32";
    }
    return "invalid";
}

/* ============================================================================
 * The name map
 * ========================================================================== */

/* FNV-1a: short keys, few of them; good enough and deterministic. */
static uint64_t hash_string(const char *s)
{
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * UINT64_C(0x100000001b3);
    return h;
}

/* The slot of key: where it is, or the empty slot where it would go. cap must be > 0. */
static size_t map_slot(const struct name_map *m, const char *key)
{
    size_t i = (size_t)hash_string(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* Returns the value of key, or -1 when it is absent. */
static int32_t map_get(const struct name_map *m, const char *key)
{
    if (m->cap == 0)
        return -1;
    size_t i = map_slot(m, key);
    return m->keys[i] ? m->values[i] : -1;
}

/* Sets key (which must outlive the map: an arena string) to value. Returns false when out of
 * memory. */
static bool map_put(struct name_map *m, const char *key, int32_t value)
{
    if ((m->count + 1) * 2 > m->cap) { /* keep the load at most one half */
        size_t cap = m->cap ? m->cap * 2 : 64;
        struct name_map grown = {calloc(cap, sizeof(*grown.keys)), calloc(cap, sizeof(int32_t)),
                                 cap, m->count};
        if (!grown.keys || !grown.values) {
            free(grown.keys);
            free(grown.values);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->keys[i]) {
                size_t j = map_slot(&grown, m->keys[i]);
                grown.keys[j] = m->keys[i];
                grown.values[j] = m->values[i];
            }
        }
        free(m->keys);
        free(m->values);
        *m = grown;
    }
    size_t i = map_slot(m, key);
    if (!m->keys[i]) {
        m->keys[i] = key;
        m->count++;
    }
    m->values[i] = value;
    return true;
}

static void map_free(struct name_map *m)
{
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof(*m));
}

/* ============================================================================
 * The builder
 * ========================================================================== */

tide_builder *tide_builder_new(void)
{
    tide_builder *b = calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->arena = tide_arena_new(0);
    if (!b->arena) {
        free(b);
        return NULL;
    }
    return b;
}

void tide_builder_free(tide_builder *b)
{
    if (!b)
        return;
    map_free(&b->names);
    map_free(&b->counters);
    free(b->nodes);
    tide_arena_free(b->arena);
    free(b);
}

const char *tide_builder_error(const tide_builder *b)
{
    if (!b)
        return "the builder is NULL (tide_builder_new failed or was not called)";
    return b->failed ? b->error : NULL;
}

int32_t tide_builder_node_count(const tide_builder *b)
{
    return b ? b->n_nodes : 0;
}

static int64_t numel(const struct output *o)
{
    int64_t n = 1;
    for (int32_t i = 0; i < o->rank; i++)
        n *= o->dims[i]; /* bounded by MAX_NUMEL when the node was added */
    return n;
}

int64_t tide_builder_parameter_count(const tide_builder *b)
{
    int64_t total = 0;
    for (int32_t i = 0; b && i < b->n_nodes; i++) {
        if (b->nodes[i].trainable)
            total += numel(&b->nodes[i].out[0]);
    }
    return total;
}

int tide_builder_serialize(tide_builder *b, uint8_t **bytes, size_t *len)
{
    if (bytes)
        *bytes = NULL;
    if (len)
        *len = 0;
    if (!b)
        return -1;
    if (!bytes || !len) {
        set_error(b, "tide_builder_serialize: bytes and len must not be NULL");
        return -1;
    }
    if (b->failed)
        return -1;

    size_t n = (size_t)b->n_nodes;
    Tide__V1__Node *msgs = calloc(n ? n : 1, sizeof(*msgs));
    Tide__V1__Node **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    if (!msgs || !ptrs) {
        free(msgs);
        free(ptrs);
        set_error(b, "out of memory serializing %zu nodes", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const struct node *node = &b->nodes[i];
        tide__v1__node__init(&msgs[i]);
        msgs[i].name = node->name;
        msgs[i].op = (char *)op_specs[node->op].wire; /* pack only reads it */
        msgs[i].n_inputs = (size_t)node->n_inputs;
        msgs[i].inputs = node->inputs;
        msgs[i].n_attrs = (size_t)node->n_attrs;
        msgs[i].attrs = node->attrs;
        ptrs[i] = &msgs[i];
    }
    Tide__V1__Graph graph = TIDE__V1__GRAPH__INIT;
    graph.n_nodes = n;
    graph.nodes = ptrs;
    graph.version = 1;

    size_t size = tide__v1__graph__get_packed_size(&graph);
    uint8_t *out = malloc(size ? size : 1);
    if (!out) {
        free(msgs);
        free(ptrs);
        set_error(b, "out of memory serializing the graph (%zu bytes)", size);
        return -1;
    }
    size_t packed = tide__v1__graph__pack(&graph, out);
    free(msgs);
    free(ptrs);
    *bytes = out;
    *len = packed;
    return 0;
}

/* ============================================================================
 * Names and lookups
 * ========================================================================== */

static bool name_char_valid(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '/' || c == '-';
}

/* Whether s holds only name characters, has no empty '/' parts and does not end in '/'. */
static bool scope_valid(const char *s)
{
    if (!*s || *s == '/')
        return false;
    for (const char *p = s; *p; p++) {
        if (!name_char_valid(*p) || (p[0] == '/' && (p[1] == '/' || p[1] == '\0')))
            return false;
    }
    return true;
}

int tide_builder_push_scope(tide_builder *b, const char *scope)
{
    if (!b || b->failed)
        return -1;
    if (!scope || !scope_valid(scope)) {
        set_error(b, "name scope \"%.64s\" is invalid: want [A-Za-z0-9_./-] without empty parts",
                  scope ? scope : "(NULL)");
        return -1;
    }
    size_t len = strlen(scope);
    if (b->scope_len + len + 1 > TIDE_BUILDER_MAX_NAME || b->n_scopes == MAX_SCOPES) {
        set_error(b, "name scope \"%s%.64s\" is too long: names are at most %d bytes", b->scope,
                  scope, TIDE_BUILDER_MAX_NAME);
        return -1;
    }
    b->scope_marks[b->n_scopes++] = b->scope_len;
    memcpy(b->scope + b->scope_len, scope, len);
    b->scope_len += len;
    b->scope[b->scope_len++] = '/';
    b->scope[b->scope_len] = '\0';
    return 0;
}

int tide_builder_pop_scope(tide_builder *b)
{
    if (!b || b->failed)
        return -1;
    if (b->n_scopes == 0) {
        set_error(b, "tide_builder_pop_scope: no name scope is open");
        return -1;
    }
    b->scope_len = b->scope_marks[--b->n_scopes];
    b->scope[b->scope_len] = '\0';
    return 0;
}

/* The node that ref names, or NULL; also checks ref's output. */
static const struct node *ref_node(const tide_builder *b, tide_ref ref)
{
    if (!b || ref.id < 0 || ref.id >= b->n_nodes)
        return NULL;
    const struct node *node = &b->nodes[ref.id];
    if (ref.output < 0 || ref.output >= node->n_outputs)
        return NULL;
    return node;
}

tide_ref tide_builder_output(tide_builder *b, tide_ref ref, int32_t output)
{
    if (!b || b->failed)
        return TIDE_REF_NONE;
    if (ref.id < 0 || ref.id >= b->n_nodes) {
        set_error(b, "tide_builder_output: ref id %d names no node (the builder has %d)", ref.id,
                  b->n_nodes);
        return TIDE_REF_NONE;
    }
    const struct node *node = &b->nodes[ref.id];
    if (output < 0 || output >= node->n_outputs) {
        set_error(b, "tide_builder_output: %s \"%s\" has %d output%s, so output %d does not exist",
                  op_specs[node->op].wire, node->name, node->n_outputs,
                  node->n_outputs == 1 ? "" : "s", output);
        return TIDE_REF_NONE;
    }
    return (tide_ref){ref.id, output};
}

tide_ref tide_builder_find(const tide_builder *b, const char *name)
{
    if (!b || !name)
        return TIDE_REF_NONE;
    int32_t id = map_get(&b->names, name);
    return id < 0 ? TIDE_REF_NONE : (tide_ref){id, 0};
}

const char *tide_builder_name(const tide_builder *b, tide_ref ref)
{
    const struct node *node = ref_node(b, ref);
    return node ? node->name : NULL;
}

const char *tide_builder_op(const tide_builder *b, tide_ref ref)
{
    const struct node *node = ref_node(b, ref);
    return node ? op_specs[node->op].wire : NULL;
}

int tide_builder_shape(const tide_builder *b, tide_ref ref, int64_t dims[TIDE_BUILDER_MAX_RANK],
                       int32_t *rank)
{
    const struct node *node = ref_node(b, ref);
    if (!node || !dims || !rank)
        return -1;
    const struct output *o = &node->out[ref.output];
    memcpy(dims, o->dims, (size_t)o->rank * sizeof(dims[0]));
    *rank = o->rank;
    return 0;
}

enum tide_data_type tide_builder_dtype(const tide_builder *b, tide_ref ref)
{
    const struct node *node = ref_node(b, ref);
    return node ? node->out[ref.output].dtype : (enum tide_data_type)0;
}

/* ============================================================================
 * Op calls: begin, inputs, attributes, finish
 * ========================================================================== */

/*
 * Starts a call for op: checks the sticky error and works out the node's
 * full name (scope + given name, or scope + stem + "_" + the next free
 * number). Returns false, with the error recorded, when the call must stop.
 */
static bool begin(tide_builder *b, struct call *c, enum op_id op, const char *name)
{
    if (!b || b->failed)
        return false;
    memset(c, 0, sizeof(*c));
    c->b = b;
    c->op = op;
    const char *wire = op_specs[op].wire;

    if (!name) {
        int n =
            snprintf(c->auto_prefix, sizeof(c->auto_prefix), "%s%s_", b->scope, op_specs[op].stem);
        if (n < 0 || (size_t)n + 1 > TIDE_BUILDER_MAX_NAME) {
            set_error(b, "%s: the automatic name \"%s...\" is longer than %d bytes", wire, b->scope,
                      TIDE_BUILDER_MAX_NAME);
            return false;
        }
        int32_t number = map_get(&b->counters, c->auto_prefix);
        if (number < 0)
            number = 0;
        for (;; number++) { /* skip numbers that a given name has taken */
            n = snprintf(c->name, sizeof(c->name), "%s%d", c->auto_prefix, (int)number);
            if (n < 0 || (size_t)n > TIDE_BUILDER_MAX_NAME) {
                set_error(b, "%s: the automatic name \"%s%d\" is longer than %d bytes", wire,
                          c->auto_prefix, (int)number, TIDE_BUILDER_MAX_NAME);
                return false;
            }
            if (map_get(&b->names, c->name) < 0)
                break;
        }
        c->automatic = true;
        c->auto_number = number;
        return true;
    }

    size_t len = strlen(name);
    bool valid = len > 0 && b->scope_len + len <= TIDE_BUILDER_MAX_NAME;
    for (size_t i = 0; valid && i < len; i++)
        valid = name_char_valid(name[i]);
    if (!valid) {
        set_error(b,
                  "%s: node name \"%s%.64s%s\" (%zu bytes with the scope) is invalid: want 1 to "
                  "%d bytes of [A-Za-z0-9_./-]",
                  wire, b->scope, name, len > 64 ? "..." : "", b->scope_len + len,
                  TIDE_BUILDER_MAX_NAME);
        return false;
    }
    memcpy(c->name, b->scope, b->scope_len);
    memcpy(c->name + b->scope_len, name, len + 1);
    int32_t other = map_get(&b->names, c->name);
    if (other >= 0) {
        set_error(b, "%s: duplicate node name \"%s\" (node %d, a %s, has it)", wire, c->name, other,
                  op_specs[b->nodes[other].op].wire);
        return false;
    }
    return true;
}

/*
 * Resolves data input i (role names it, "x") of the call from ref and checks
 * its dtype when want_dtype is not 0. Returns its output, or NULL with the
 * error recorded.
 */
static const struct output *input(struct call *c, int32_t i, const char *role, tide_ref ref,
                                  enum tide_data_type want_dtype)
{
    tide_builder *b = c->b;
    if (b->failed)
        return NULL;
    if (ref.id < 0 || ref.id >= b->n_nodes) {
        fail(c,
             "input %d (%s) is ref {id %d, output %d}, which names no node (the builder has "
             "%d)%s",
             i, role, ref.id, ref.output, b->n_nodes,
             ref.id == -1 ? "; the call that made it failed or it was never set" : "");
        return NULL;
    }
    const struct node *node = &b->nodes[ref.id];
    if (ref.output < 0 || ref.output >= node->n_outputs) {
        fail(c, "input %d (%s) names output %d of %s \"%s\", which has %d output%s", i, role,
             ref.output, op_specs[node->op].wire, node->name, node->n_outputs,
             node->n_outputs == 1 ? "" : "s");
        return NULL;
    }
    const struct output *o = &node->out[ref.output];
    if (want_dtype && o->dtype != want_dtype) {
        fail(c, "input %d (%s) \"%s\" is %s, wants %s", i, role, node->name, dtype_name(o->dtype),
             dtype_name(want_dtype));
        return NULL;
    }
    struct edge *edges = c->many_edges ? c->many_edges : c->edges;
    edges[i] = (struct edge){ref.id, ref.output};
    if (i + 1 > c->n_edges)
        c->n_edges = i + 1;
    return o;
}

/* Allocates n zeroed bytes from the builder's arena, recording an error when out of memory. */
static void *alloc(struct call *c, size_t n)
{
    void *p = tide_arena_alloc(c->b->arena, n);
    if (!p)
        fail(c, "out of memory (%zu bytes)", n);
    return p;
}

/* Adds attribute key with a fresh value whose oneof case is value_case; NULL when out of memory. */
static Tide__V1__AttrValue *attr(struct call *c, const char *key,
                                 Tide__V1__AttrValue__ValueCase value_case)
{
    if (c->b->failed)
        return NULL;
    Tide__V1__Node__AttrsEntry *entry = alloc(c, sizeof(*entry));
    Tide__V1__AttrValue *value = alloc(c, sizeof(*value));
    if (!entry || !value)
        return NULL;
    tide__v1__node__attrs_entry__init(entry);
    tide__v1__attr_value__init(value);
    entry->key = (char *)key; /* a string literal of ours; pack only reads it */
    entry->value = value;
    value->value_case = value_case;
    c->attrs[c->n_attrs++] = entry; /* MAX_ATTRS bounds what any op adds */
    return value;
}

static void attr_int(struct call *c, const char *key, int64_t v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_I);
    if (a)
        a->i = v;
}

static void attr_float(struct call *c, const char *key, float v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_F);
    if (a)
        a->f = v;
}

static void attr_bool(struct call *c, const char *key, bool v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_B);
    if (a)
        a->b = v;
}

static void attr_string(struct call *c, const char *key, const char *v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_S);
    if (a) {
        a->s = tide_arena_strdup(c->b->arena, v);
        if (!a->s)
            fail(c, "out of memory copying attribute \"%s\"", key);
    }
}

static void attr_dtype(struct call *c, const char *key, enum tide_data_type v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_DTYPE);
    if (a)
        a->dtype = (Tide__V1__DataType)v;
}

/* A TensorShape message holding a copy of dims; NULL when out of memory. */
static Tide__V1__TensorShape *shape_message(struct call *c, int32_t rank, const int64_t *dims)
{
    Tide__V1__TensorShape *shape = alloc(c, sizeof(*shape));
    int64_t *copy = alloc(c, (size_t)rank * sizeof(int64_t));
    if (!shape || !copy)
        return NULL;
    tide__v1__tensor_shape__init(shape);
    if (rank > 0)
        memcpy(copy, dims, (size_t)rank * sizeof(int64_t));
    shape->n_dims = (size_t)rank;
    shape->dims = copy;
    return shape;
}

static void attr_shape(struct call *c, const char *key, int32_t rank, const int64_t *dims)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_SHAPE);
    if (a)
        a->shape = shape_message(c, rank, dims);
}

static void attr_ints(struct call *c, const char *key, int32_t n, const int64_t *v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_INTS);
    if (!a)
        return;
    Tide__V1__AttrValue__IntList *list = alloc(c, sizeof(*list));
    int64_t *copy = alloc(c, (size_t)n * sizeof(int64_t));
    if (!list || !copy)
        return;
    tide__v1__attr_value__int_list__init(list);
    if (n > 0)
        memcpy(copy, v, (size_t)n * sizeof(int64_t));
    list->n_values = (size_t)n;
    list->values = copy;
    a->ints = list;
}

/* Whether this machine stores integers little-endian, as the wire format wants. */
static bool host_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* A tensor attribute of count 4-byte elements copied from data, little-endian on the wire. */
static void attr_tensor(struct call *c, const char *key, enum tide_data_type dtype, int32_t rank,
                        const int64_t *dims, const void *data, int64_t count)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_TENSOR);
    if (!a)
        return;
    Tide__V1__Tensor *t = alloc(c, sizeof(*t));
    size_t nbytes = (size_t)count * 4;
    uint8_t *bytes = alloc(c, nbytes);
    Tide__V1__TensorShape *shape = shape_message(c, rank, dims);
    if (!t || !bytes || !shape)
        return;
    tide__v1__tensor__init(t);
    if (nbytes)
        memcpy(bytes, data, nbytes);
    if (!host_little_endian()) {
        for (size_t i = 0; i < nbytes; i += 4) {
            uint8_t w[4] = {bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]};
            for (int k = 0; k < 4; k++)
                bytes[i + (size_t)k] = w[3 - k];
        }
    }
    t->dtype = (Tide__V1__DataType)dtype;
    t->shape = shape;
    t->data.len = nbytes;
    t->data.data = bytes;
    a->tensor = t;
}

/* The wire form of an input: "name", "name:k" or "^name". NULL when out of memory. */
static char *input_string(struct call *c, struct edge e)
{
    const char *name = c->b->nodes[e.id].name;
    char buf[TIDE_BUILDER_MAX_NAME + 16];
    if (e.output < 0)
        snprintf(buf, sizeof(buf), "^%s", name);
    else if (e.output == 0)
        snprintf(buf, sizeof(buf), "%s", name);
    else
        snprintf(buf, sizeof(buf), "%s:%d", name, (int)e.output);
    char *s = tide_arena_strdup(c->b->arena, buf);
    if (!s)
        fail(c, "out of memory");
    return s;
}

/*
 * Appends the node of call c with its n_outputs outputs outs, registers its
 * name and returns a ref to output 0; TIDE_REF_NONE when an error was
 * recorded on the way.
 */
static tide_ref finish(struct call *c, const struct output *outs, int32_t n_outputs)
{
    tide_builder *b = c->b;
    if (b->failed)
        return TIDE_REF_NONE;
    for (int32_t k = 0; k < n_outputs; k++) {
        const struct output *o = &outs[k];
        int64_t n = 1;
        for (int32_t i = 0; i < o->rank; i++) {
            if (o->dims[i] != 0 && n > MAX_NUMEL / o->dims[i])
                return fail(c, "output %d %s has more than 2^56 elements", k, shape_text(o).s);
            n *= o->dims[i];
        }
    }
    /* Copy the outputs first: outs may point into b->nodes, which the growth below moves. */
    struct node node = {.op = c->op, .n_outputs = n_outputs};
    memcpy(node.out, outs, (size_t)n_outputs * sizeof(outs[0]));
    if (b->n_nodes == INT32_MAX - 1)
        return fail(c, "the builder already holds %d nodes, the most it can", b->n_nodes);
    if (b->n_nodes == b->cap_nodes) {
        int32_t cap = b->cap_nodes ? b->cap_nodes * 2 : 64;
        if (b->cap_nodes > INT32_MAX / 2)
            cap = INT32_MAX - 1;
        struct node *grown = realloc(b->nodes, (size_t)cap * sizeof(*grown));
        if (!grown)
            return fail(c, "out of memory growing the node array to %d", cap);
        b->nodes = grown;
        b->cap_nodes = cap;
    }

    node.name = tide_arena_strdup(b->arena, c->name);
    node.cap_inputs = c->n_edges;
    node.n_inputs = c->n_edges;
    node.edges = alloc(c, (size_t)c->n_edges * sizeof(struct edge));
    node.inputs = alloc(c, (size_t)c->n_edges * sizeof(char *));
    node.attrs = alloc(c, (size_t)c->n_attrs * sizeof(*node.attrs));
    if (!node.name || b->failed)
        return fail(c, "out of memory");
    const struct edge *edges = c->many_edges ? c->many_edges : c->edges;
    for (int32_t i = 0; i < c->n_edges; i++) {
        node.edges[i] = edges[i];
        node.inputs[i] = input_string(c, edges[i]);
    }
    node.n_attrs = c->n_attrs;
    memcpy(node.attrs, c->attrs, (size_t)c->n_attrs * sizeof(*node.attrs));
    if (b->failed)
        return TIDE_REF_NONE;

    int32_t id = b->n_nodes;
    if (!map_put(&b->names, node.name, id))
        return fail(c, "out of memory registering the name");
    if (c->automatic) {
        char *prefix = tide_arena_strdup(b->arena, c->auto_prefix);
        if (!prefix || !map_put(&b->counters, prefix, c->auto_number + 1))
            return fail(c, "out of memory registering the name");
    }
    b->nodes[b->n_nodes++] = node;
    return (tide_ref){id, 0};
}

/* ============================================================================
 * Shape helpers
 * ========================================================================== */

/* Checks a user-given shape (role names it): rank 0..8, dims non-NULL when rank > 0, each >= 0. */
static bool check_dims(struct call *c, const char *role, int32_t rank, const int64_t *dims)
{
    if (rank < 0 || rank > TIDE_BUILDER_MAX_RANK) {
        fail(c, "%s has rank %d, wants 0 to %d", role, rank, TIDE_BUILDER_MAX_RANK);
        return false;
    }
    if (rank > 0 && !dims) {
        fail(c, "%s has rank %d but its dims pointer is NULL", role, rank);
        return false;
    }
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) {
            fail(c, "%s %s has negative dimension %" PRId64 " at axis %d", role,
                 ints_text(dims, rank).s, dims[i], i);
            return false;
        }
    }
    return true;
}

static struct output make_output(enum tide_data_type dtype, int32_t rank, const int64_t *dims)
{
    struct output o = {.dtype = dtype, .rank = rank};
    if (rank > 0)
        memcpy(o.dims, dims, (size_t)rank * sizeof(int64_t));
    return o;
}

/* Requires x (role names it) to have a rank in min..max; layout says what is wanted. */
static bool require_rank(struct call *c, const char *role, const struct output *x, int32_t min,
                         int32_t max, const char *layout)
{
    if (x->rank >= min && x->rank <= max)
        return true;
    if (min == max)
        fail(c, "%s has shape %s, wants rank %d %s", role, shape_text(x).s, min, layout);
    else
        fail(c, "%s has shape %s, wants rank %d to %d %s", role, shape_text(x).s, min, max, layout);
    return false;
}

/* Maps axis (negative counts from the end) of x into 0..rank-1; name is the attribute. */
static bool normalise_axis(struct call *c, const char *name, int64_t axis, const struct output *x,
                           int64_t *out)
{
    int64_t rank = x->rank;
    if (axis < -rank || axis >= rank || rank == 0) {
        fail(c,
             "attribute \"%s\" names axis %" PRId64 ", out of range for input 0 %s (wants %" PRId64
             " to %" PRId64 ")",
             name, axis, shape_text(x).s, -rank, rank - 1);
        return false;
    }
    *out = axis < 0 ? axis + rank : axis;
    return true;
}

/* ============================================================================
 * Sources
 * ========================================================================== */

/* Requires a float32 or int32 dtype. */
static bool check_dtype(struct call *c, enum tide_data_type dtype)
{
    if (dtype == TIDE_DT_FLOAT32 || dtype == TIDE_DT_INT32)
        return true;
    fail(c, "dtype is %d, wants TIDE_DT_FLOAT32 (1) or TIDE_DT_INT32 (2)", (int)dtype);
    return false;
}

/* The element count of a shape already checked by check_dims, or -1 past MAX_NUMEL. */
static int64_t dims_numel(struct call *c, const char *role, int32_t rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] != 0 && n > MAX_NUMEL / dims[i]) {
            fail(c, "%s %s has more than 2^56 elements", role, ints_text(dims, rank).s);
            return -1;
        }
        n *= dims[i];
    }
    return n;
}

tide_ref tide_builder_placeholder(tide_builder *b, const char *name, enum tide_data_type dtype,
                                  int32_t rank, const int64_t *dims)
{
    struct call c;
    if (!begin(b, &c, OP_PLACEHOLDER, name))
        return TIDE_REF_NONE;
    if (!check_dtype(&c, dtype) || !check_dims(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    attr_dtype(&c, "dtype", dtype);
    attr_shape(&c, "shape", rank, dims);
    struct output out = make_output(dtype, rank, dims);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_variable(tide_builder *b, const char *name, int32_t rank, const int64_t *dims,
                               const char *init, float scale, bool trainable)
{
    struct call c;
    if (!begin(b, &c, OP_VARIABLE, name))
        return TIDE_REF_NONE;
    if (!check_dims(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    size_t n_inits = sizeof(variable_inits) / sizeof(variable_inits[0]), k = 0;
    while (init && k < n_inits && strcmp(init, variable_inits[k]) != 0)
        k++;
    if (!init || k == n_inits)
        return fail(&c,
                    "init \"%.64s\" is unknown, wants one of zeros, ones, constant, normal, "
                    "uniform, glorot_uniform, he_normal (tide_builder_variable_value for a value)",
                    init ? init : "(NULL)");
    if (!isfinite(scale))
        return fail(&c, "scale is %g, wants a finite value", (double)scale);
    attr_dtype(&c, "dtype", TIDE_DT_FLOAT32);
    attr_shape(&c, "shape", rank, dims);
    attr_string(&c, "init", init);
    attr_float(&c, "scale", scale);
    attr_bool(&c, "trainable", trainable);
    struct output out = make_output(TIDE_DT_FLOAT32, rank, dims);
    tide_ref ref = finish(&c, &out, 1);
    if (ref.id >= 0)
        b->nodes[ref.id].trainable = trainable;
    return ref;
}

tide_ref tide_builder_variable_value(tide_builder *b, const char *name, int32_t rank,
                                     const int64_t *dims, const float *data)
{
    struct call c;
    if (!begin(b, &c, OP_VARIABLE, name))
        return TIDE_REF_NONE;
    if (!check_dims(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    int64_t count = dims_numel(&c, "shape", rank, dims);
    if (count < 0)
        return TIDE_REF_NONE;
    if (count > 0 && !data)
        return fail(&c, "data is NULL, but shape %s needs %" PRId64 " floats",
                    ints_text(dims, rank).s, count);
    attr_dtype(&c, "dtype", TIDE_DT_FLOAT32);
    attr_shape(&c, "shape", rank, dims);
    attr_string(&c, "init", "value");
    attr_bool(&c, "trainable", true);
    attr_tensor(&c, "value", TIDE_DT_FLOAT32, rank, dims, data, count);
    struct output out = make_output(TIDE_DT_FLOAT32, rank, dims);
    tide_ref ref = finish(&c, &out, 1);
    if (ref.id >= 0)
        b->nodes[ref.id].trainable = true;
    return ref;
}

tide_ref tide_builder_constant(tide_builder *b, const char *name, enum tide_data_type dtype,
                               int32_t rank, const int64_t *dims, const void *data)
{
    struct call c;
    if (!begin(b, &c, OP_CONST, name))
        return TIDE_REF_NONE;
    if (!check_dtype(&c, dtype) || !check_dims(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    int64_t count = dims_numel(&c, "shape", rank, dims);
    if (count < 0)
        return TIDE_REF_NONE;
    if (count > 0 && !data)
        return fail(&c, "data is NULL, but shape %s needs %" PRId64 " elements",
                    ints_text(dims, rank).s, count);
    attr_tensor(&c, "value", dtype, rank, dims, data, count);
    struct output out = make_output(dtype, rank, dims);
    return finish(&c, &out, 1);
}

/* ============================================================================
 * Element-wise ops
 * ========================================================================== */

/* An op of one float32 input whose output has the input's shape. */
static tide_ref unary(tide_builder *b, enum op_id op, const char *name, tide_ref x)
{
    struct call c;
    if (!begin(b, &c, op, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    if (!in)
        return TIDE_REF_NONE;
    return finish(&c, in, 1);
}

tide_ref tide_builder_relu(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_RELU, name, x);
}

tide_ref tide_builder_sigmoid(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_SIGMOID, name, x);
}

tide_ref tide_builder_tanh(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_TANH, name, x);
}

tide_ref tide_builder_identity(tide_builder *b, const char *name, tide_ref x)
{
    struct call c;
    if (!begin(b, &c, OP_IDENTITY, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, 0);
    if (!in)
        return TIDE_REF_NONE;
    return finish(&c, in, 1);
}

/* Add, Sub, Mul: NumPy broadcasting (trailing axes aligned, each pair equal or holding a 1). */
static tide_ref broadcast(tide_builder *b, enum op_id op, const char *name, tide_ref x, tide_ref y)
{
    struct call c;
    if (!begin(b, &c, op, name))
        return TIDE_REF_NONE;
    const struct output *l = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    const struct output *r = input(&c, 1, "y", y, TIDE_DT_FLOAT32);
    if (!l || !r)
        return TIDE_REF_NONE;
    struct output out = {.dtype = TIDE_DT_FLOAT32, .rank = l->rank > r->rank ? l->rank : r->rank};
    for (int32_t i = 0; i < out.rank; i++) { /* i counts from the end */
        int64_t dl = i < l->rank ? l->dims[l->rank - 1 - i] : 1;
        int64_t dr = i < r->rank ? r->dims[r->rank - 1 - i] : 1;
        if (dl != dr && dl != 1 && dr != 1)
            return fail(&c,
                        "input shapes %s and %s do not broadcast: dimensions %" PRId64
                        " and %" PRId64 " differ and neither is 1",
                        shape_text(l).s, shape_text(r).s, dl, dr);
        out.dims[out.rank - 1 - i] = dl == 1 ? dr : dl;
    }
    return finish(&c, &out, 1);
}

tide_ref tide_builder_add(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return broadcast(b, OP_ADD, name, x, y);
}

tide_ref tide_builder_sub(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return broadcast(b, OP_SUB, name, x, y);
}

tide_ref tide_builder_mul(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return broadcast(b, OP_MUL, name, x, y);
}

tide_ref tide_builder_bias_add(tide_builder *b, const char *name, tide_ref x, tide_ref bias)
{
    struct call c;
    if (!begin(b, &c, OP_BIAS_ADD, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    const struct output *bv = input(&c, 1, "bias", bias, TIDE_DT_FLOAT32);
    if (!in || !bv)
        return TIDE_REF_NONE;
    if (!require_rank(&c, "input 0 (x)", in, 2, TIDE_BUILDER_MAX_RANK, "[N, C, ...]"))
        return TIDE_REF_NONE;
    if (bv->rank != 1 || bv->dims[0] != in->dims[1])
        return fail(&c,
                    "input 1 (bias) has shape %s, wants [%" PRId64
                    "] (one per channel, axis 1 of input 0 (x) %s)",
                    shape_text(bv).s, in->dims[1], shape_text(in).s);
    return finish(&c, in, 1);
}

/* ============================================================================
 * Linear algebra, softmax, reductions
 * ========================================================================== */

tide_ref tide_builder_matmul(tide_builder *b, const char *name, tide_ref a, tide_ref bm, bool ta,
                             bool tb)
{
    struct call c;
    if (!begin(b, &c, OP_MATMUL, name))
        return TIDE_REF_NONE;
    const struct output *l = input(&c, 0, "a", a, TIDE_DT_FLOAT32);
    const struct output *r = input(&c, 1, "b", bm, TIDE_DT_FLOAT32);
    if (!l || !r)
        return TIDE_REF_NONE;
    if (!require_rank(&c, "input 0 (a)", l, 2, 2, "[M, K]") ||
        !require_rank(&c, "input 1 (b)", r, 2, 2, "[K, N]"))
        return TIDE_REF_NONE;
    int64_t m = l->dims[ta ? 1 : 0], ka = l->dims[ta ? 0 : 1];
    int64_t kb = r->dims[tb ? 1 : 0], n = r->dims[tb ? 0 : 1];
    if (ka != kb)
        return fail(
            &c, "inner dimensions %" PRId64 " and %" PRId64 " differ (a is %s%s, b is %s%s)", ka,
            kb, shape_text(l).s, ta ? " transposed" : "", shape_text(r).s, tb ? " transposed" : "");
    attr_bool(&c, "transpose_a", ta);
    attr_bool(&c, "transpose_b", tb);
    int64_t dims[2] = {m, n};
    struct output out = make_output(TIDE_DT_FLOAT32, 2, dims);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_softmax(tide_builder *b, const char *name, tide_ref x, int64_t axis)
{
    struct call c;
    if (!begin(b, &c, OP_SOFTMAX, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    int64_t normalised;
    if (!in || !normalise_axis(&c, "axis", axis, in, &normalised))
        return TIDE_REF_NONE;
    attr_int(&c, "axis", axis);
    return finish(&c, in, 1);
}

tide_ref tide_builder_softmax_cross_entropy(tide_builder *b, const char *name, tide_ref logits,
                                            tide_ref labels)
{
    struct call c;
    if (!begin(b, &c, OP_SOFTMAX_CROSS_ENTROPY, name))
        return TIDE_REF_NONE;
    const struct output *l = input(&c, 0, "logits", logits, TIDE_DT_FLOAT32);
    const struct output *y = input(&c, 1, "labels", labels, TIDE_DT_INT32);
    if (!l || !y)
        return TIDE_REF_NONE;
    if (!require_rank(&c, "input 0 (logits)", l, 2, 2, "[N, C]"))
        return TIDE_REF_NONE;
    if (l->dims[1] == 0)
        return fail(&c, "input 0 (logits) %s has no classes (C is 0)", shape_text(l).s);
    if (y->rank != 1 || y->dims[0] != l->dims[0])
        return fail(&c,
                    "input 1 (labels) has shape %s, wants [%" PRId64
                    "] (one class index per row of input 0 (logits) %s)",
                    shape_text(y).s, l->dims[0], shape_text(l).s);
    struct output out = make_output(TIDE_DT_FLOAT32, 1, l->dims);
    return finish(&c, &out, 1);
}

/* ReduceSum and ReduceMean. */
static tide_ref reduce(tide_builder *b, enum op_id op, const char *name, tide_ref x,
                       const int64_t *axes, int32_t n_axes, bool keep_dims)
{
    struct call c;
    if (!begin(b, &c, op, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    if (!in)
        return TIDE_REF_NONE;
    if (n_axes < 0 || n_axes > TIDE_BUILDER_MAX_RANK || (n_axes > 0 && !axes))
        return fail(&c, "axes has %d entries%s, wants 0 to %d", n_axes,
                    n_axes > 0 && !axes ? " but its pointer is NULL" : "", TIDE_BUILDER_MAX_RANK);
    bool reduced[TIDE_BUILDER_MAX_RANK] = {false};
    for (int32_t i = 0; i < in->rank && n_axes == 0; i++)
        reduced[i] = true;
    for (int32_t i = 0; i < n_axes; i++) {
        int64_t axis;
        if (!normalise_axis(&c, "axes", axes[i], in, &axis))
            return TIDE_REF_NONE;
        if (reduced[axis])
            return fail(&c, "attribute \"axes\" %s names axis %" PRId64 " twice (input 0 is %s)",
                        ints_text(axes, n_axes).s, axis, shape_text(in).s);
        reduced[axis] = true;
    }
    struct output out = {.dtype = TIDE_DT_FLOAT32};
    for (int32_t i = 0; i < in->rank; i++) {
        if (!reduced[i])
            out.dims[out.rank++] = in->dims[i];
        else if (keep_dims)
            out.dims[out.rank++] = 1;
    }
    attr_ints(&c, "axes", n_axes, axes);
    attr_bool(&c, "keep_dims", keep_dims);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_reduce_sum(tide_builder *b, const char *name, tide_ref x, const int64_t *axes,
                                 int32_t n_axes, bool keep_dims)
{
    return reduce(b, OP_REDUCE_SUM, name, x, axes, n_axes, keep_dims);
}

tide_ref tide_builder_reduce_mean(tide_builder *b, const char *name, tide_ref x,
                                  const int64_t *axes, int32_t n_axes, bool keep_dims)
{
    return reduce(b, OP_REDUCE_MEAN, name, x, axes, n_axes, keep_dims);
}

/* ============================================================================
 * Shape ops
 * ========================================================================== */

tide_ref tide_builder_reshape(tide_builder *b, const char *name, tide_ref x, int32_t rank,
                              const int64_t *dims)
{
    struct call c;
    if (!begin(b, &c, OP_RESHAPE, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, 0);
    if (!in)
        return TIDE_REF_NONE;
    if (rank < 0 || rank > TIDE_BUILDER_MAX_RANK || (rank > 0 && !dims))
        return fail(&c, "shape has rank %d%s, wants 0 to %d", rank,
                    rank > 0 && !dims ? " but its pointer is NULL" : "", TIDE_BUILDER_MAX_RANK);
    int64_t count = numel(in);
    struct output out = make_output(in->dtype, rank, dims);
    int32_t inferred = -1;
    int64_t known = 1; /* the product of the entries other than -1 */
    for (int32_t i = 0; i < rank; i++) {
        int64_t d = dims[i];
        if (d == -1 && inferred >= 0)
            return fail(&c, "shape %s has more than one -1", ints_text(dims, rank).s);
        if (d == -1) {
            inferred = i;
            continue;
        }
        if (d < 0)
            return fail(&c, "shape %s has %" PRId64 " at index %d, wants a dimension >= 0 or -1",
                        ints_text(dims, rank).s, d, i);
        if (d != 0 && known > MAX_NUMEL / d)
            return fail(&c, "shape %s has more elements than input 0 %s (%" PRId64 ")",
                        ints_text(dims, rank).s, shape_text(in).s, count);
        known *= d;
    }
    if (inferred >= 0) {
        if (known == 0 || count % known != 0)
            return fail(&c,
                        "shape %s: input 0 %s has %" PRId64
                        " elements, which the other dimensions (%" PRId64 ") do not divide",
                        ints_text(dims, rank).s, shape_text(in).s, count, known);
        out.dims[inferred] = count / known;
    } else if (known != count) {
        return fail(&c, "shape %s has %" PRId64 " elements, but input 0 %s has %" PRId64,
                    ints_text(dims, rank).s, known, shape_text(in).s, count);
    }
    attr_ints(&c, "shape", rank, dims);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_concat(tide_builder *b, const char *name, const tide_ref *xs, int32_t n,
                             int64_t axis)
{
    struct call c;
    if (!begin(b, &c, OP_CONCAT, name))
        return TIDE_REF_NONE;
    if (n < 1 || !xs)
        return fail(&c, "wants at least one input, got %d%s", n, n >= 1 ? " and a NULL array" : "");
    if (n > TIDE_BUILDER_MAX_RANK) {
        c.many_edges = alloc(&c, (size_t)n * sizeof(struct edge));
        if (!c.many_edges)
            return TIDE_REF_NONE;
    }
    const struct output *first = input(&c, 0, "x", xs[0], 0);
    int64_t ax;
    if (!first || !normalise_axis(&c, "axis", axis, first, &ax))
        return TIDE_REF_NONE;
    struct output out = *first;
    for (int32_t i = 1; i < n; i++) {
        const struct output *in = input(&c, i, "x", xs[i], first->dtype);
        if (!in)
            return TIDE_REF_NONE;
        bool fits = in->rank == out.rank;
        for (int32_t d = 0; fits && d < out.rank; d++)
            fits = d == ax || in->dims[d] == out.dims[d];
        if (!fits)
            return fail(&c,
                        "input %d has shape %s, wants the shape of input 0 %s except along "
                        "axis %" PRId64,
                        i, shape_text(in).s, shape_text(first).s, ax);
        if (out.dims[ax] > MAX_NUMEL - in->dims[ax])
            return fail(&c, "the length of axis %" PRId64 " overflows at input %d %s", ax, i,
                        shape_text(in).s);
        out.dims[ax] += in->dims[ax];
    }
    attr_int(&c, "axis", axis);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_slice(tide_builder *b, const char *name, tide_ref x, const int64_t *begin_at,
                            const int64_t *size, int32_t rank)
{
    struct call c;
    if (!begin(b, &c, OP_SLICE, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, 0);
    if (!in)
        return TIDE_REF_NONE;
    if (rank != in->rank || (rank > 0 && (!begin_at || !size)))
        return fail(&c, "begin and size have %d entries%s, want %d (one per axis of input 0 %s)",
                    rank, rank > 0 && (!begin_at || !size) ? " but a NULL pointer" : "", in->rank,
                    shape_text(in).s);
    struct output out = *in;
    for (int32_t i = 0; i < rank; i++) {
        int64_t dim = in->dims[i], s = size[i];
        if (begin_at[i] < 0 || begin_at[i] > dim)
            return fail(
                &c, "begin %s has %" PRId64 " at axis %d, wants 0 to %" PRId64 " (input 0 is %s)",
                ints_text(begin_at, rank).s, begin_at[i], i, dim, shape_text(in).s);
        if (s == -1)
            s = dim - begin_at[i];
        if (s < 0 || s > dim - begin_at[i])
            return fail(&c,
                        "begin %" PRId64 " + size %" PRId64 " exceeds dimension %" PRId64
                        " at axis %d of input 0 %s",
                        begin_at[i], s, dim, i, shape_text(in).s);
        out.dims[i] = s;
    }
    attr_ints(&c, "begin", rank, begin_at);
    attr_ints(&c, "size", rank, size);
    return finish(&c, &out, 1);
}

/* ============================================================================
 * Convolution and pooling
 * ========================================================================== */

static const char *const hw_name[2] = {"height", "width"};

/*
 * The output of a window (kernel k, stride s, pad p, each [h, w]) slid over
 * x [N, C, H, W] with `channels` output channels: O = (I + 2p - k) / s + 1.
 */
static bool window_output(struct call *c, const struct output *x, const int64_t k[2],
                          const int64_t s[2], const int64_t p[2], int64_t channels,
                          struct output *y)
{
    int64_t dims[4] = {x->dims[0], channels, 0, 0};
    for (int i = 0; i < 2; i++) {
        if (s[i] < 1) {
            fail(c, "stride %s is %" PRId64 ", wants 1 or more", hw_name[i], s[i]);
            return false;
        }
        if (p[i] < 0 || p[i] > MAX_NUMEL) {
            fail(c, "pad %s is %" PRId64 ", wants 0 or more", hw_name[i], p[i]);
            return false;
        }
        int64_t padded = x->dims[2 + i] + 2 * p[i];
        if (padded < k[i]) {
            fail(c,
                 "kernel %s %" PRId64 " is larger than the padded input %s %" PRId64
                 " + 2 * %" PRId64 " = %" PRId64 " (input 0 is %s)",
                 hw_name[i], k[i], hw_name[i], x->dims[2 + i], p[i], padded, shape_text(x).s);
            return false;
        }
        dims[2 + i] = (padded - k[i]) / s[i] + 1;
    }
    *y = make_output(TIDE_DT_FLOAT32, 4, dims);
    return true;
}

tide_ref tide_builder_conv2d(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                             int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w)
{
    struct call c;
    if (!begin(b, &c, OP_CONV2D, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    const struct output *filter = input(&c, 1, "w", w, TIDE_DT_FLOAT32);
    if (!in || !filter)
        return TIDE_REF_NONE;
    if (!require_rank(&c, "input 0 (x)", in, 4, 4, "[N, C, H, W]") ||
        !require_rank(&c, "input 1 (w)", filter, 4, 4, "[K, C, R, S]"))
        return TIDE_REF_NONE;
    if (in->dims[1] != filter->dims[1])
        return fail(&c,
                    "input 0 (x) %s has %" PRId64 " channels, but input 1 (w) %s wants %" PRId64,
                    shape_text(in).s, in->dims[1], shape_text(filter).s, filter->dims[1]);
    if (filter->dims[2] < 1 || filter->dims[3] < 1)
        return fail(&c, "input 1 (w) %s has an empty kernel window", shape_text(filter).s);
    const int64_t k[2] = {filter->dims[2], filter->dims[3]};
    const int64_t s[2] = {stride_h, stride_w}, p[2] = {pad_h, pad_w};
    struct output out;
    if (!window_output(&c, in, k, s, p, filter->dims[0], &out))
        return TIDE_REF_NONE;
    attr_ints(&c, "strides", 2, s);
    attr_ints(&c, "pads", 2, p);
    return finish(&c, &out, 1);
}

/* MaxPool2D and AvgPool2D. */
static tide_ref pool2d(tide_builder *b, enum op_id op, const char *name, tide_ref x, int64_t kh,
                       int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw)
{
    struct call c;
    if (!begin(b, &c, op, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    if (!in || !require_rank(&c, "input 0 (x)", in, 4, 4, "[N, C, H, W]"))
        return TIDE_REF_NONE;
    const int64_t k[2] = {kh, kw}, s[2] = {sh, sw}, p[2] = {ph, pw};
    for (int i = 0; i < 2; i++) {
        if (k[i] < 1)
            return fail(&c, "kernel %s is %" PRId64 ", wants 1 or more", hw_name[i], k[i]);
        if (p[i] >= k[i])
            return fail(&c, "pad %s is %" PRId64 ", wants less than the kernel %s %" PRId64,
                        hw_name[i], p[i], hw_name[i], k[i]);
    }
    struct output out;
    if (!window_output(&c, in, k, s, p, in->dims[1], &out))
        return TIDE_REF_NONE;
    attr_ints(&c, "ksize", 2, k);
    attr_ints(&c, "strides", 2, s);
    attr_ints(&c, "pads", 2, p);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_max_pool2d(tide_builder *b, const char *name, tide_ref x, int64_t kh,
                                 int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw)
{
    return pool2d(b, OP_MAX_POOL2D, name, x, kh, kw, sh, sw, ph, pw);
}

tide_ref tide_builder_avg_pool2d(tide_builder *b, const char *name, tide_ref x, int64_t kh,
                                 int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw)
{
    return pool2d(b, OP_AVG_POOL2D, name, x, kh, kw, sh, sw, ph, pw);
}

tide_ref tide_builder_global_avg_pool(tide_builder *b, const char *name, tide_ref x)
{
    struct call c;
    if (!begin(b, &c, OP_GLOBAL_AVG_POOL, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    if (!in || !require_rank(&c, "input 0 (x)", in, 4, 4, "[N, C, H, W]"))
        return TIDE_REF_NONE;
    struct output out = make_output(TIDE_DT_FLOAT32, 2, in->dims);
    return finish(&c, &out, 1);
}

tide_ref tide_builder_batch_norm(tide_builder *b, const char *name, tide_ref x, tide_ref gamma,
                                 tide_ref beta, float epsilon)
{
    struct call c;
    if (!begin(b, &c, OP_BATCH_NORM, name))
        return TIDE_REF_NONE;
    const struct output *in = input(&c, 0, "x", x, TIDE_DT_FLOAT32);
    const struct output *g = input(&c, 1, "gamma", gamma, TIDE_DT_FLOAT32);
    const struct output *bt = input(&c, 2, "beta", beta, TIDE_DT_FLOAT32);
    if (!in || !g || !bt)
        return TIDE_REF_NONE;
    if (in->rank != 4 && in->rank != 2)
        return fail(&c, "input 0 (x) has shape %s, wants rank 4 [N, C, H, W] or rank 2 [N, C]",
                    shape_text(in).s);
    const struct output *per_channel[2] = {g, bt};
    static const char *const roles[2] = {"gamma", "beta"};
    for (int i = 0; i < 2; i++) {
        if (per_channel[i]->rank != 1 || per_channel[i]->dims[0] != in->dims[1])
            return fail(&c,
                        "input %d (%s) has shape %s, wants [%" PRId64
                        "] (one per channel of input 0 (x) %s)",
                        i + 1, roles[i], shape_text(per_channel[i]).s, in->dims[1],
                        shape_text(in).s);
    }
    if (!isfinite(epsilon) || epsilon <= 0)
        return fail(&c, "epsilon is %g, wants a finite value > 0", (double)epsilon);
    attr_float(&c, "epsilon", epsilon);
    struct output outs[3] = {*in, make_output(TIDE_DT_FLOAT32, 1, &in->dims[1]),
                             make_output(TIDE_DT_FLOAT32, 1, &in->dims[1])};
    return finish(&c, outs, 3);
}

/* ============================================================================
 * Control edges
 * ========================================================================== */

/* Whether node `target` is among the ancestors of node `from` (or is from), over every edge. */
static int reaches(const tide_builder *b, int32_t from, int32_t target)
{
    bool *seen = calloc((size_t)b->n_nodes, sizeof(bool));
    int32_t *stack = malloc((size_t)b->n_nodes * sizeof(int32_t));
    if (!seen || !stack) {
        free(seen);
        free(stack);
        return -1;
    }
    int32_t top = 0;
    int found = 0;
    stack[top++] = from;
    seen[from] = true;
    while (top > 0 && !found) {
        const struct node *node = &b->nodes[stack[--top]];
        for (int32_t i = 0; i < node->n_inputs; i++) {
            int32_t id = node->edges[i].id;
            if (id == target)
                found = 1;
            if (!seen[id]) {
                seen[id] = true;
                stack[top++] = id;
            }
        }
    }
    free(seen);
    free(stack);
    return found;
}

int tide_builder_control_edge(tide_builder *b, tide_ref node, tide_ref after)
{
    if (!b || b->failed)
        return -1;
    if (node.id < 0 || node.id >= b->n_nodes || after.id < 0 || after.id >= b->n_nodes) {
        set_error(b, "tide_builder_control_edge: ref id %d names no node (the builder has %d)",
                  node.id < 0 || node.id >= b->n_nodes ? node.id : after.id, b->n_nodes);
        return -1;
    }
    struct node *n = &b->nodes[node.id];
    const char *after_name = b->nodes[after.id].name;
    if (node.id == after.id) {
        set_error(b, "tide_builder_control_edge: \"%s\" cannot run after itself", n->name);
        return -1;
    }
    for (int32_t i = 0; i < n->n_inputs; i++) {
        if (n->edges[i].id == after.id && n->edges[i].output < 0)
            return 0; /* already there */
    }
    /* Would node then depend on itself? Only if after already depends on node. */
    {
        int r = reaches(b, after.id, node.id);
        if (r != 0) {
            if (r < 0)
                set_error(b, "tide_builder_control_edge: out of memory");
            else
                set_error(b,
                          "tide_builder_control_edge: \"%s\" after \"%s\" would close a cycle: "
                          "\"%s\" already depends on \"%s\"",
                          n->name, after_name, after_name, n->name);
            return -1;
        }
    }
    struct call c = {.b = b, .op = n->op};
    snprintf(c.name, sizeof(c.name), "%s", n->name);
    if (n->n_inputs == n->cap_inputs) {
        int32_t cap = n->cap_inputs ? n->cap_inputs * 2 : 2;
        struct edge *edges = alloc(&c, (size_t)cap * sizeof(*edges));
        char **inputs = alloc(&c, (size_t)cap * sizeof(*inputs));
        if (!edges || !inputs)
            return -1;
        memcpy(edges, n->edges, (size_t)n->n_inputs * sizeof(*edges));
        memcpy(inputs, n->inputs, (size_t)n->n_inputs * sizeof(*inputs));
        n->edges = edges; /* the old arrays stay in the arena until the builder is freed */
        n->inputs = inputs;
        n->cap_inputs = cap;
    }
    struct edge e = {after.id, -1};
    char *s = input_string(&c, e);
    if (!s)
        return -1;
    n->edges[n->n_inputs] = e;
    n->inputs[n->n_inputs] = s;
    n->n_inputs++;
    return 0;
}
