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
 *   2. the op's own code: its inputs resolved (input()) and its attributes
 *      added (attr_*()), after checks of what only the C API can get wrong
 *      (a ref that names no node, a NULL pointer, more dims than a shape
 *      holds);
 *   3. finish(): the node checked and its outputs inferred by the daemon's
 *      own code, then appended and its name registered.
 *
 * One rule per fact: the builder keeps a graph IR (graph/graph.h) beside
 * its protobuf nodes, node for node, with the same attributes as the wire
 * message carries, and finish() runs tide_graph_infer_node (graph/graph.c,
 * graph/infer.c) on each new node. Every shape, dtype and attribute rule is
 * the daemon's, and so is every message, word for word: a graph that the
 * builder accepts is one that import accepts, and a node that import would
 * refuse is refused here, before anything is sent, with import's words.
 *
 * A failure in any step records the first error and returns TIDE_REF_NONE;
 * the half-built node is dropped (what it took from the arena, and the IR
 * node it may have added, are only reclaimed with the builder, which is
 * fine: errors are terminal).
 *
 * Names are found through a small open-addressing hash table, as are the
 * counters behind automatic names ("relu_3"), so building is linear in the
 * number of nodes.
 */
#include "tide/graph.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/builder-impl.h"
#include "common/arena.h"
#include "graph/graph.h"
#include "tide/v1/tide.pb-c.h"

/* Messages are cut to this many bytes. */
#define ERROR_MAX 512
/* Room for one shape as text: "[" + 8 dims of up to 20 characters + ", " + "]". */
#define SHAPE_TEXT_MAX 200
/* Most attributes any op the builder writes takes (Variable). */
#define MAX_ATTRS 8
/* Scopes nest at most this deep: each takes at least two bytes of the prefix. */
#define MAX_SCOPES (TIDE_BUILDER_MAX_NAME / 2 + 1)
/* A tensor may hold at most this many elements, so that byte sizes and counts never overflow. */
#define MAX_NUMEL (INT64_C(1) << 56)

_Static_assert(TIDE_BUILDER_MAX_RANK == TIDE_MAX_RANK, "a builder shape is a graph shape");
_Static_assert(TIDE_BUILDER_MAX_NAME == TIDE_MAX_NAME, "a builder name is a graph name");
_Static_assert((int)TIDE_DT_FLOAT32 == (int)TIDE_DTYPE_FLOAT32 &&
                   (int)TIDE_DT_INT32 == (int)TIDE_DTYPE_INT32,
               "the builder's dtypes are the graph's");
_Static_assert((int)TIDE_COMPARE_EQUAL == (int)TIDE_COMPARISON_EQUAL &&
                   (int)TIDE_COMPARE_NOT_EQUAL == (int)TIDE_COMPARISON_NOT_EQUAL &&
                   (int)TIDE_COMPARE_LESS == (int)TIDE_COMPARISON_LESS &&
                   (int)TIDE_COMPARE_LESS_EQUAL == (int)TIDE_COMPARISON_LESS_EQUAL &&
                   (int)TIDE_COMPARE_GREATER == (int)TIDE_COMPARISON_GREATER &&
                   (int)TIDE_COMPARE_GREATER_EQUAL == (int)TIDE_COMPARISON_GREATER_EQUAL,
               "the builder's comparisons are the graph's");
_Static_assert((int)TIDE_TRIG_SIN == (int)TIDE_TRIG_FUNCTION_SIN &&
                   (int)TIDE_TRIG_COS == (int)TIDE_TRIG_FUNCTION_COS &&
                   (int)TIDE_TRIG_TAN == (int)TIDE_TRIG_FUNCTION_TAN &&
                   (int)TIDE_TRIG_ASIN == (int)TIDE_TRIG_FUNCTION_ASIN &&
                   (int)TIDE_TRIG_ACOS == (int)TIDE_TRIG_FUNCTION_ACOS &&
                   (int)TIDE_TRIG_ATAN == (int)TIDE_TRIG_FUNCTION_ATAN &&
                   (int)TIDE_TRIG_SINH == (int)TIDE_TRIG_FUNCTION_SINH &&
                   (int)TIDE_TRIG_COSH == (int)TIDE_TRIG_FUNCTION_COSH &&
                   (int)TIDE_TRIG_ASINH == (int)TIDE_TRIG_FUNCTION_ASINH &&
                   (int)TIDE_TRIG_ACOSH == (int)TIDE_TRIG_FUNCTION_ACOSH &&
                   (int)TIDE_TRIG_ATANH == (int)TIDE_TRIG_FUNCTION_ATANH &&
                   (int)TIDE_TRIG_ATANH + 1 == (int)TIDE_TRIG_FUNCTION_COUNT,
               "the builder's trigonometric functions are the graph's");
_Static_assert((int)TIDE_ROUND_FLOOR == (int)TIDE_ROUNDING_FLOOR &&
                   (int)TIDE_ROUND_CEIL == (int)TIDE_ROUNDING_CEIL &&
                   (int)TIDE_ROUND_HALF_TO_EVEN == (int)TIDE_ROUNDING_HALF_TO_EVEN &&
                   (int)TIDE_ROUND_TRUNC == (int)TIDE_ROUNDING_TRUNC &&
                   (int)TIDE_ROUND_TRUNC + 1 == (int)TIDE_ROUNDING_COUNT,
               "the builder's rounding modes are the graph's");

/*
 * The limits under which the builder infers: no node count (the daemon's is
 * its own configuration), and MAX_NUMEL 4-byte elements per tensor, the
 * builder's own bound. The daemon applies its configured, smaller limits at
 * submission.
 */
static const struct tide_graph_limits builder_limits = {
    .max_nodes = UINT32_MAX,
    .max_tensor_bytes = (uint64_t)MAX_NUMEL * 4,
};

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
    OP_CONV2D_TRANSPOSE,
    OP_MAX_POOL2D,
    OP_AVG_POOL2D,
    OP_GLOBAL_AVG_POOL,
    OP_BATCH_NORM,
    /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
    OP_EXP,
    OP_LOG,
    OP_SQRT,
    OP_GELU,
    OP_DIV,
    OP_MAX,
    OP_MIN,
    OP_POW,

    /* batched products and axis permutation (BatchMatMul, Transpose) */
    OP_BATCH_MATMUL,
    OP_TRANSPOSE,

    /* indexing (Gather, TopK, Mixture-of-Experts routing) */
    OP_GATHER,
    OP_GATHER_GRAD,
    OP_GATHER_ELEMENTS,
    OP_TOP_K,
    OP_MOE_ROUTE,

    /* normalisation and regularisation (LayerNorm, Dropout) */
    OP_LAYER_NORM,
    OP_DROPOUT,

    /* fused attention (Attention) */
    OP_ATTENTION,

    /* ops autodiff emits that importers need too (Neg, Scale, BroadcastTo) */
    OP_NEG,
    OP_SCALE,
    OP_BROADCAST_TO,
    OP_ERF,

    /* masks computed from data (Cast, Compare, Select) */
    OP_CAST,
    OP_COMPARE,
    OP_SELECT,

    /* trigonometric and hyperbolic functions (Trig) */
    OP_TRIG,

    /* rounding to integral values (Round) */
    OP_ROUND,
};

/* An op: its graph op (graph/ops.def, which gives its wire name) and its automatic names' stem. */
struct op_spec {
    enum tide_op op;
    const char *stem;
};

static const struct op_spec op_specs[] = {
    [OP_PLACEHOLDER] = {TIDE_OP_PLACEHOLDER, "placeholder"},
    [OP_VARIABLE] = {TIDE_OP_VARIABLE, "variable"},
    [OP_CONST] = {TIDE_OP_CONST, "constant"},
    [OP_IDENTITY] = {TIDE_OP_IDENTITY, "identity"},
    [OP_MATMUL] = {TIDE_OP_MATMUL, "matmul"},
    [OP_ADD] = {TIDE_OP_ADD, "add"},
    [OP_SUB] = {TIDE_OP_SUB, "sub"},
    [OP_MUL] = {TIDE_OP_MUL, "mul"},
    [OP_BIAS_ADD] = {TIDE_OP_BIAS_ADD, "bias_add"},
    [OP_RELU] = {TIDE_OP_RELU, "relu"},
    [OP_SIGMOID] = {TIDE_OP_SIGMOID, "sigmoid"},
    [OP_TANH] = {TIDE_OP_TANH, "tanh"},
    [OP_SOFTMAX] = {TIDE_OP_SOFTMAX, "softmax"},
    [OP_SOFTMAX_CROSS_ENTROPY] = {TIDE_OP_SOFTMAX_CROSS_ENTROPY, "softmax_cross_entropy"},
    [OP_REDUCE_SUM] = {TIDE_OP_REDUCE_SUM, "reduce_sum"},
    [OP_REDUCE_MEAN] = {TIDE_OP_REDUCE_MEAN, "reduce_mean"},
    [OP_RESHAPE] = {TIDE_OP_RESHAPE, "reshape"},
    [OP_CONCAT] = {TIDE_OP_CONCAT, "concat"},
    [OP_SLICE] = {TIDE_OP_SLICE, "slice"},
    [OP_CONV2D] = {TIDE_OP_CONV2D, "conv2d"},
    [OP_CONV2D_TRANSPOSE] = {TIDE_OP_CONV2D_BACKPROP_INPUT, "conv2d_transpose"},
    [OP_MAX_POOL2D] = {TIDE_OP_MAX_POOL2D, "max_pool2d"},
    [OP_AVG_POOL2D] = {TIDE_OP_AVG_POOL2D, "avg_pool2d"},
    [OP_GLOBAL_AVG_POOL] = {TIDE_OP_GLOBAL_AVG_POOL, "global_avg_pool"},
    [OP_BATCH_NORM] = {TIDE_OP_BATCH_NORM, "batch_norm"},
    /* element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) */
    [OP_EXP] = {TIDE_OP_EXP, "exp"},
    [OP_LOG] = {TIDE_OP_LOG, "log"},
    [OP_SQRT] = {TIDE_OP_SQRT, "sqrt"},
    [OP_GELU] = {TIDE_OP_GELU, "gelu"},
    [OP_DIV] = {TIDE_OP_DIV, "div"},
    [OP_MAX] = {TIDE_OP_MAX, "max"},
    [OP_MIN] = {TIDE_OP_MIN, "min"},
    [OP_POW] = {TIDE_OP_POW, "pow"},

    /* batched products and axis permutation (BatchMatMul, Transpose) */
    [OP_BATCH_MATMUL] = {TIDE_OP_BATCH_MATMUL, "batch_matmul"},
    [OP_TRANSPOSE] = {TIDE_OP_TRANSPOSE, "transpose"},

    /* indexing (Gather, TopK, Mixture-of-Experts routing) */
    [OP_GATHER] = {TIDE_OP_GATHER, "gather"},
    [OP_GATHER_GRAD] = {TIDE_OP_GATHER_GRAD, "gather_grad"},
    [OP_GATHER_ELEMENTS] = {TIDE_OP_GATHER_ELEMENTS, "gather_elements"},
    [OP_TOP_K] = {TIDE_OP_TOP_K, "top_k"},
    [OP_MOE_ROUTE] = {TIDE_OP_MOE_ROUTE, "moe_route"},

    /* normalisation and regularisation (LayerNorm, Dropout) */
    [OP_LAYER_NORM] = {TIDE_OP_LAYER_NORM, "layer_norm"},
    [OP_DROPOUT] = {TIDE_OP_DROPOUT, "dropout"},

    /* fused attention (Attention) */
    [OP_ATTENTION] = {TIDE_OP_ATTENTION, "attention"},

    /* ops autodiff emits that importers need too (Neg, Scale, BroadcastTo) */
    [OP_NEG] = {TIDE_OP_NEG, "neg"},
    [OP_SCALE] = {TIDE_OP_SCALE, "scale"},
    [OP_BROADCAST_TO] = {TIDE_OP_BROADCAST_TO, "broadcast_to"},
    [OP_ERF] = {TIDE_OP_ERF, "erf"},

    /* masks computed from data (Cast, Compare, Select) */
    [OP_CAST] = {TIDE_OP_CAST, "cast"},
    [OP_COMPARE] = {TIDE_OP_COMPARE, "compare"},
    [OP_SELECT] = {TIDE_OP_SELECT, "select"},

    /* trigonometric and hyperbolic functions (Trig) */
    [OP_TRIG] = {TIDE_OP_TRIG, "trig"},

    /* rounding to integral values (Round) */
    [OP_ROUND] = {TIDE_OP_ROUND, "round"},
};

/* The wire name of op ("MatMul"). */
static const char *wire_name(enum op_id op)
{
    return tide_op_info(op_specs[op].op)->name;
}

/* ============================================================================
 * Types
 * ========================================================================== */

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
    struct tide_graph *ir;    /* the same nodes as graph IR, with inferred outputs; same ids */
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
    uint32_t ir_id;                               /* the node's id in b->ir (set by begin()) */
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

/*
 * Records an error about call c's node, prefixed as graph/ import and infer
 * prefix theirs (tide_node_error): "node \"NAME\" (Op): ". Returns TIDE_REF_NONE.
 */
static tide_ref fail(struct call *c, const char *format, ...) __attribute__((format(printf, 2, 3)));

static tide_ref fail(struct call *c, const char *format, ...)
{
    char message[ERROR_MAX];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof(message), format, args);
    va_end(args);
    set_error(c->b, "node \"%s\" (%s): %s", c->name, wire_name(c->op), message);
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
    b->ir = tide_graph_new();
    if (!b->arena || !b->ir) {
        tide_arena_free(b->arena);
        tide_graph_free(b->ir);
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
    tide_graph_free(b->ir);
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

int64_t tide_builder_parameter_count(const tide_builder *b)
{
    int64_t total = 0;
    for (int32_t i = 0; b && i < b->n_nodes; i++) {
        if (b->nodes[i].trainable) /* each bounded by MAX_NUMEL when the node was added */
            total += tide_shape_numel(&b->ir->nodes[i].outputs[0].shape);
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
        msgs[i].op = (char *)wire_name(node->op); /* pack only reads it */
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

/* The number of outputs of builder node id (which must exist), as the op table says. */
static int32_t n_outputs(const tide_builder *b, int32_t id)
{
    return (int32_t)b->ir->nodes[id].n_outputs;
}

/* The node that ref names, or NULL; also checks ref's output. */
static const struct node *ref_node(const tide_builder *b, tide_ref ref)
{
    if (!b || ref.id < 0 || ref.id >= b->n_nodes)
        return NULL;
    if (ref.output < 0 || ref.output >= n_outputs(b, ref.id))
        return NULL;
    return &b->nodes[ref.id];
}

/* The inferred dtype and shape of the output that ref names; ref must pass ref_node. */
static const struct tide_output *ref_output(const tide_builder *b, tide_ref ref)
{
    return &b->ir->nodes[ref.id].outputs[ref.output];
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
    int32_t n = n_outputs(b, ref.id);
    if (output < 0 || output >= n) {
        set_error(b, "tide_builder_output: %s \"%s\" has %d output%s, so output %d does not exist",
                  wire_name(node->op), node->name, n, n == 1 ? "" : "s", output);
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
    return node ? wire_name(node->op) : NULL;
}

int tide_builder_shape(const tide_builder *b, tide_ref ref, int64_t dims[TIDE_BUILDER_MAX_RANK],
                       int32_t *rank)
{
    const struct node *node = ref_node(b, ref);
    if (!node || !dims || !rank)
        return -1;
    const struct tide_shape *shape = &ref_output(b, ref)->shape;
    memcpy(dims, shape->dims, (size_t)shape->rank * sizeof(dims[0]));
    *rank = shape->rank;
    return 0;
}

enum tide_data_type tide_builder_dtype(const tide_builder *b, tide_ref ref)
{
    const struct node *node = ref_node(b, ref);
    return node ? (enum tide_data_type)ref_output(b, ref)->dtype : (enum tide_data_type)0;
}

/* ============================================================================
 * Op calls: begin, inputs, attributes, finish
 * ========================================================================== */

/*
 * Works out call c's full name (scope + given name, or scope + stem + "_" +
 * the next free number). Returns false, with the error recorded, when the
 * call must stop.
 */
static bool name_node(tide_builder *b, struct call *c, enum op_id op, const char *name)
{
    const char *wire = wire_name(op);

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
                  wire_name(b->nodes[other].op));
        return false;
    }
    return true;
}

/*
 * Starts a call for op: checks the sticky error, names the node and adds it
 * to the IR with default attributes. Returns false, with the error recorded,
 * when the call must stop.
 */
static bool begin(tide_builder *b, struct call *c, enum op_id op, const char *name)
{
    if (!b || b->failed)
        return false;
    memset(c, 0, sizeof(*c));
    c->b = b;
    c->op = op;
    if (!name_node(b, c, op, name))
        return false;
    struct tide_error err;
    if (tide_graph_add_node(b->ir, op_specs[op].op, c->name, &c->ir_id, &err) != TIDE_OK) {
        set_error(b, "%s", err.message);
        return false;
    }
    return true;
}

/*
 * Resolves data input i (role names it, "x") of the call from ref. Returns
 * false, with the error recorded, when ref names no output; dtypes and
 * shapes are infer's to check, in finish().
 */
static bool input(struct call *c, int32_t i, const char *role, tide_ref ref)
{
    tide_builder *b = c->b;
    if (b->failed)
        return false;
    if (ref.id < 0 || ref.id >= b->n_nodes) {
        fail(c,
             "input %d (%s) is ref {id %d, output %d}, which names no node (the builder has "
             "%d)%s",
             i, role, ref.id, ref.output, b->n_nodes,
             ref.id == -1 ? "; the call that made it failed or it was never set" : "");
        return false;
    }
    const struct node *node = &b->nodes[ref.id];
    int32_t n = n_outputs(b, ref.id);
    if (ref.output < 0 || ref.output >= n) {
        fail(c, "input %d (%s) names output %d of %s \"%s\", which has %d output%s", i, role,
             ref.output, wire_name(node->op), node->name, n, n == 1 ? "" : "s");
        return false;
    }
    struct edge *edges = c->many_edges ? c->many_edges : c->edges;
    edges[i] = (struct edge){ref.id, ref.output};
    if (i + 1 > c->n_edges)
        c->n_edges = i + 1;
    return true;
}

/* Allocates n zeroed bytes from the builder's arena, recording an error when out of memory. */
static void *alloc(struct call *c, size_t n)
{
    void *p = tide_arena_alloc(c->b->arena, n);
    if (!p)
        fail(c, "out of memory (%zu bytes)", n);
    return p;
}

/* The index of attribute key in the IR node of call c; key is one of ours, never the user's. */
static int ir_attr(const struct call *c, const char *key)
{
    int k = tide_op_attr_index(op_specs[c->op].op, key);
    assert(k >= 0);
    return k;
}

/*
 * Adds attribute key with a fresh value whose oneof case is value_case;
 * NULL when out of memory. The attr_*() helpers below set the same value in
 * the IR node, as import would from the wire message.
 */
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
    if (a) {
        a->i = v;
        tide_attr_set_int(c->b->ir, c->ir_id, ir_attr(c, key), v);
    }
}

static void attr_float(struct call *c, const char *key, float v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_F);
    if (a) {
        a->f = v;
        tide_attr_set_float(c->b->ir, c->ir_id, ir_attr(c, key), v);
    }
}

static void attr_bool(struct call *c, const char *key, bool v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_B);
    if (a) {
        a->b = v;
        tide_attr_set_bool(c->b->ir, c->ir_id, ir_attr(c, key), v);
    }
}

static void attr_string(struct call *c, const char *key, const char *v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_S);
    if (a) {
        a->s = tide_arena_strdup(c->b->arena, v);
        if (!a->s || tide_attr_set_string(c->b->ir, c->ir_id, ir_attr(c, key), v) != TIDE_OK)
            fail(c, "out of memory copying attribute \"%s\"", key);
    }
}

static void attr_dtype(struct call *c, const char *key, enum tide_data_type v)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_DTYPE);
    if (a) {
        a->dtype = (Tide__V1__DataType)v;
        tide_attr_set_dtype(c->b->ir, c->ir_id, ir_attr(c, key), (enum tide_dtype)v);
    }
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

/* rank must be in 0..TIDE_BUILDER_MAX_RANK (check_dims). */
static void attr_shape(struct call *c, const char *key, int32_t rank, const int64_t *dims)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_SHAPE);
    if (a) {
        a->shape = shape_message(c, rank, dims);
        struct tide_shape shape = tide_shape_make(rank, dims);
        tide_attr_set_shape(c->b->ir, c->ir_id, ir_attr(c, key), &shape);
    }
}

/* n must be in 0..TIDE_MAX_LIST. */
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
    tide_attr_set_ints(c->b->ir, c->ir_id, ir_attr(c, key), copy, n);
}

/* Whether this machine stores integers little-endian, as the wire format wants. */
static bool host_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/*
 * A tensor attribute of count 4-byte elements copied from data, little-endian
 * on the wire. A count below 0 (a shape with a negative dimension, or one too
 * large) copies nothing, and infer refuses the tensor in the daemon's words.
 * The IR tensor shares the wire bytes, which live as long as the builder.
 */
static void attr_tensor(struct call *c, const char *key, enum tide_data_type dtype, int32_t rank,
                        const int64_t *dims, const void *data, int64_t count)
{
    Tide__V1__AttrValue *a = attr(c, key, TIDE__V1__ATTR_VALUE__VALUE_TENSOR);
    if (!a)
        return;
    Tide__V1__Tensor *t = alloc(c, sizeof(*t));
    size_t nbytes = count > 0 ? (size_t)count * 4 : 0;
    uint8_t *bytes = alloc(c, nbytes);
    Tide__V1__TensorShape *shape = shape_message(c, rank, dims);
    struct tide_const_tensor *ir = alloc(c, sizeof(*ir));
    if (!t || !bytes || !shape || !ir)
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
    *ir = (struct tide_const_tensor){.dtype = (enum tide_dtype)dtype,
                                     .shape = tide_shape_make(rank, dims),
                                     .nbytes = nbytes,
                                     .data = bytes};
    struct tide_attr_value *value = &c->b->ir->nodes[c->ir_id].attrs[ir_attr(c, key)];
    value->present = true;
    value->tensor = ir;
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
 * Checks the node of call c and infers its outputs with the daemon's code
 * (tide_graph_infer_node), then appends it, registers its name and returns a
 * ref to output 0; TIDE_REF_NONE when an error was recorded on the way.
 */
static tide_ref finish(struct call *c)
{
    tide_builder *b = c->b;
    if (b->failed)
        return TIDE_REF_NONE;
    /* The IR holds exactly the builder's nodes until a failure, which is terminal. */
    assert(c->ir_id == (uint32_t)b->n_nodes);
    const struct edge *edges = c->many_edges ? c->many_edges : c->edges;
    struct tide_edge *ir_edges = malloc(((size_t)c->n_edges + 1) * sizeof(*ir_edges));
    if (!ir_edges)
        return fail(c, "out of memory");
    for (int32_t i = 0; i < c->n_edges; i++)
        ir_edges[i] = (struct tide_edge){(uint32_t)edges[i].id, (uint32_t)edges[i].output};
    struct tide_error err;
    enum tide_status st =
        tide_graph_set_inputs(b->ir, c->ir_id, ir_edges, (uint32_t)c->n_edges, &err);
    free(ir_edges);
    if (st == TIDE_OK)
        st = tide_graph_infer_node(b->ir, c->ir_id, &builder_limits, &err);
    if (st != TIDE_OK) {
        set_error(b, "%s", err.message);
        return TIDE_REF_NONE;
    }

    struct node node = {.op = c->op};
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
 * Argument checks: what only the C API can get wrong
 *
 * Shapes, dtypes and attribute values are infer's to check (finish()); the
 * checks here guard what the wire form cannot even hold: more dims or list
 * entries than a shape has room for, NULL pointers, and element counts that
 * would overflow a copy.
 * ========================================================================== */

/* Checks a user-given shape (role names it): rank 0..8, and dims non-NULL when rank > 0. */
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
    return true;
}

/* Checks a list argument (role names it) of n entries: 0..TIDE_MAX_LIST, non-NULL when n > 0. */
static bool check_list(struct call *c, const char *role, int32_t n, const int64_t *v)
{
    if (n >= 0 && n <= TIDE_MAX_LIST && (n == 0 || v))
        return true;
    fail(c, "%s has %d entries%s, wants 0 to %d", role, n,
         n > 0 && !v ? " but its pointer is NULL" : "", TIDE_MAX_LIST);
    return false;
}

/* Requires a float32 or int32 dtype. */
static bool check_dtype(struct call *c, enum tide_data_type dtype)
{
    if (dtype == TIDE_DT_FLOAT32 || dtype == TIDE_DT_INT32)
        return true;
    fail(c, "dtype is %d, wants TIDE_DT_FLOAT32 (1) or TIDE_DT_INT32 (2)", (int)dtype);
    return false;
}

/*
 * The element count of a shape checked by check_dims, or -1 when a dimension
 * is negative or the count passes MAX_NUMEL (infer then refuses the shape).
 */
static int64_t dims_numel(int32_t rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0 || (dims[i] != 0 && n > MAX_NUMEL / dims[i]))
            return -1;
        n *= dims[i];
    }
    return n;
}

/* ============================================================================
 * Sources
 * ========================================================================== */

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
    return finish(&c);
}

tide_ref tide_builder_variable(tide_builder *b, const char *name, int32_t rank, const int64_t *dims,
                               const char *init, float scale, bool trainable)
{
    struct call c;
    if (!begin(b, &c, OP_VARIABLE, name))
        return TIDE_REF_NONE;
    if (!check_dims(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    if (!init)
        return fail(&c, "init is NULL, wants the name of an initialiser");
    attr_dtype(&c, "dtype", TIDE_DT_FLOAT32);
    attr_shape(&c, "shape", rank, dims);
    attr_string(&c, "init", init);
    attr_float(&c, "scale", scale);
    attr_bool(&c, "trainable", trainable);
    tide_ref ref = finish(&c);
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
    int64_t count = dims_numel(rank, dims);
    if (count > 0 && !data)
        return fail(&c, "data is NULL, but shape %s needs %" PRId64 " floats",
                    ints_text(dims, rank).s, count);
    attr_dtype(&c, "dtype", TIDE_DT_FLOAT32);
    attr_shape(&c, "shape", rank, dims);
    attr_string(&c, "init", "value");
    attr_bool(&c, "trainable", true);
    attr_tensor(&c, "value", TIDE_DT_FLOAT32, rank, dims, data, count);
    tide_ref ref = finish(&c);
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
    int64_t count = dims_numel(rank, dims);
    if (count > 0 && !data)
        return fail(&c, "data is NULL, but shape %s needs %" PRId64 " elements",
                    ints_text(dims, rank).s, count);
    attr_tensor(&c, "value", dtype, rank, dims, data, count);
    return finish(&c);
}

/* ============================================================================
 * Element-wise ops
 * ========================================================================== */

/* An op of one input (role "x") and no attributes. */
static tide_ref unary(tide_builder *b, enum op_id op, const char *name, tide_ref x)
{
    struct call c;
    if (!begin(b, &c, op, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    return finish(&c);
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
    return unary(b, OP_IDENTITY, name, x);
}

/* An op of two inputs, roles r0 and r1, and no attributes: Add, Sub, Mul, BiasAdd, ... */
static tide_ref binary(tide_builder *b, enum op_id op, const char *name, const char *r0, tide_ref x,
                       const char *r1, tide_ref y)
{
    struct call c;
    if (!begin(b, &c, op, name) || !input(&c, 0, r0, x) || !input(&c, 1, r1, y))
        return TIDE_REF_NONE;
    return finish(&c);
}

tide_ref tide_builder_add(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_ADD, name, "x", x, "y", y);
}

tide_ref tide_builder_sub(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_SUB, name, "x", x, "y", y);
}

tide_ref tide_builder_mul(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_MUL, name, "x", x, "y", y);
}

tide_ref tide_builder_neg(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_NEG, name, x);
}

tide_ref tide_builder_scale(tide_builder *b, const char *name, tide_ref x, float scale)
{
    struct call c;
    if (!begin(b, &c, OP_SCALE, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    attr_float(&c, "scale", scale);
    return finish(&c);
}

tide_ref tide_builder_broadcast_to(tide_builder *b, const char *name, tide_ref x, int32_t rank,
                                   const int64_t *dims)
{
    struct call c;
    if (!begin(b, &c, OP_BROADCAST_TO, name) || !input(&c, 0, "x", x) ||
        !check_dims(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    attr_shape(&c, "shape", rank, dims);
    return finish(&c);
}

tide_ref tide_builder_bias_add(tide_builder *b, const char *name, tide_ref x, tide_ref bias)
{
    return binary(b, OP_BIAS_ADD, name, "x", x, "bias", bias);
}

/* ============================================================================
 * Linear algebra, softmax, reductions
 * ========================================================================== */

tide_ref tide_builder_matmul(tide_builder *b, const char *name, tide_ref a, tide_ref bm, bool ta,
                             bool tb)
{
    struct call c;
    if (!begin(b, &c, OP_MATMUL, name) || !input(&c, 0, "a", a) || !input(&c, 1, "b", bm))
        return TIDE_REF_NONE;
    attr_bool(&c, "transpose_a", ta);
    attr_bool(&c, "transpose_b", tb);
    return finish(&c);
}

tide_ref tide_builder_softmax(tide_builder *b, const char *name, tide_ref x, int64_t axis)
{
    struct call c;
    if (!begin(b, &c, OP_SOFTMAX, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    attr_int(&c, "axis", axis);
    return finish(&c);
}

tide_ref tide_builder_softmax_cross_entropy(tide_builder *b, const char *name, tide_ref logits,
                                            tide_ref labels)
{
    return binary(b, OP_SOFTMAX_CROSS_ENTROPY, name, "logits", logits, "labels", labels);
}

/* ReduceSum and ReduceMean. */
static tide_ref reduce(tide_builder *b, enum op_id op, const char *name, tide_ref x,
                       const int64_t *axes, int32_t n_axes, bool keep_dims)
{
    struct call c;
    if (!begin(b, &c, op, name) || !input(&c, 0, "x", x) || !check_list(&c, "axes", n_axes, axes))
        return TIDE_REF_NONE;
    attr_ints(&c, "axes", n_axes, axes);
    attr_bool(&c, "keep_dims", keep_dims);
    return finish(&c);
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
    if (!begin(b, &c, OP_RESHAPE, name) || !input(&c, 0, "x", x) ||
        !check_list(&c, "shape", rank, dims))
        return TIDE_REF_NONE;
    attr_ints(&c, "shape", rank, dims);
    return finish(&c);
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
    for (int32_t i = 0; i < n; i++) {
        if (!input(&c, i, "x", xs[i]))
            return TIDE_REF_NONE;
    }
    attr_int(&c, "axis", axis);
    return finish(&c);
}

tide_ref tide_builder_slice(tide_builder *b, const char *name, tide_ref x, const int64_t *begin_at,
                            const int64_t *size, int32_t rank)
{
    struct call c;
    if (!begin(b, &c, OP_SLICE, name) || !input(&c, 0, "x", x) ||
        !check_list(&c, "begin", rank, begin_at) || !check_list(&c, "size", rank, size))
        return TIDE_REF_NONE;
    attr_ints(&c, "begin", rank, begin_at);
    attr_ints(&c, "size", rank, size);
    return finish(&c);
}

/* ============================================================================
 * Convolution and pooling
 * ========================================================================== */

tide_ref tide_builder_conv2d(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                             int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w)
{
    return tide_builder_conv2d_grouped(b, name, x, w, stride_h, stride_w, pad_h, pad_w, 1);
}

tide_ref tide_builder_conv2d_grouped(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                                     int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                     int64_t pad_w, int64_t group)
{
    return tide_builder_conv2d_dilated(b, name, x, w, stride_h, stride_w, pad_h, pad_w, 1, 1,
                                       group);
}

tide_ref tide_builder_conv2d_dilated(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                                     int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                     int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                     int64_t group)
{
    struct call c;
    if (!begin(b, &c, OP_CONV2D, name) || !input(&c, 0, "x", x) || !input(&c, 1, "w", w))
        return TIDE_REF_NONE;
    const int64_t s[2] = {stride_h, stride_w}, p[2] = {pad_h, pad_w};
    const int64_t d[2] = {dilation_h, dilation_w};
    attr_ints(&c, "strides", 2, s);
    attr_ints(&c, "pads", 2, p);
    /* Written only where they say something: a dense convolution's message is as before. */
    if (group != 1)
        attr_int(&c, "group", group);
    if (dilation_h != 1 || dilation_w != 1)
        attr_ints(&c, "dilations", 2, d);
    return finish(&c);
}

/*
 * The transposed convolution is the op that makes Conv2D's input gradient:
 * x plays dy, and the output's shape is the attribute input_shape, [N of x,
 * group times C of w, out_h, out_w].
 */
tide_ref tide_builder_conv2d_transpose(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                       int64_t pad_w, int64_t out_h, int64_t out_w, int64_t group)
{
    return tide_builder_conv2d_transpose_dilated(b, name, x, w, stride_h, stride_w, pad_h, pad_w, 1,
                                                 1, out_h, out_w, group);
}

tide_ref tide_builder_conv2d_transpose_dilated(tide_builder *b, const char *name, tide_ref x,
                                               tide_ref w, int64_t stride_h, int64_t stride_w,
                                               int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                                               int64_t dilation_w, int64_t out_h, int64_t out_w,
                                               int64_t group)
{
    struct call c;
    if (!begin(b, &c, OP_CONV2D_TRANSPOSE, name) || !input(&c, 0, "dy", x) || !input(&c, 1, "w", w))
        return TIDE_REF_NONE;
    int64_t xd[TIDE_BUILDER_MAX_RANK], wd[TIDE_BUILDER_MAX_RANK];
    int32_t xr, wr;
    if (tide_builder_shape(b, x, xd, &xr) != 0 || tide_builder_shape(b, w, wd, &wr) != 0 ||
        xr != 4 || wr != 4)
        return fail(&c, "x and w must have rank 4 ([N, K, H, W] and [K, C, R, S])");
    const int64_t s[2] = {stride_h, stride_w}, p[2] = {pad_h, pad_w};
    if (group < 1 || wd[1] > INT64_MAX / group)
        return fail(&c, "group is %" PRId64 ", not 1 or more (with w's %" PRId64 " channels)",
                    group, wd[1]);
    const int64_t y[4] = {xd[0], wd[1] * group, out_h, out_w};
    attr_ints(&c, "strides", 2, s);
    attr_ints(&c, "pads", 2, p);
    attr_shape(&c, "input_shape", 4, y);
    if (group != 1)
        attr_int(&c, "group", group);
    if (dilation_h != 1 || dilation_w != 1)
        attr_ints(&c, "dilations", 2, (const int64_t[]){dilation_h, dilation_w});
    return finish(&c);
}

/* MaxPool2D and AvgPool2D. */
static tide_ref pool2d(tide_builder *b, enum op_id op, const char *name, tide_ref x, int64_t kh,
                       int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw)
{
    struct call c;
    if (!begin(b, &c, op, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    const int64_t k[2] = {kh, kw}, s[2] = {sh, sw}, p[2] = {ph, pw};
    attr_ints(&c, "ksize", 2, k);
    attr_ints(&c, "strides", 2, s);
    attr_ints(&c, "pads", 2, p);
    return finish(&c);
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
    return unary(b, OP_GLOBAL_AVG_POOL, name, x);
}

tide_ref tide_builder_batch_norm(tide_builder *b, const char *name, tide_ref x, tide_ref gamma,
                                 tide_ref beta, float epsilon)
{
    struct call c;
    if (!begin(b, &c, OP_BATCH_NORM, name) || !input(&c, 0, "x", x) ||
        !input(&c, 1, "gamma", gamma) || !input(&c, 2, "beta", beta))
        return TIDE_REF_NONE;
    attr_float(&c, "epsilon", epsilon);
    return finish(&c);
}

/* ============================================================================
 * Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu)
 * ========================================================================== */

tide_ref tide_builder_exp(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_EXP, name, x);
}

tide_ref tide_builder_log(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_LOG, name, x);
}

tide_ref tide_builder_sqrt(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_SQRT, name, x);
}

tide_ref tide_builder_gelu(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_GELU, name, x);
}

tide_ref tide_builder_erf(tide_builder *b, const char *name, tide_ref x)
{
    return unary(b, OP_ERF, name, x);
}

tide_ref tide_builder_div(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_DIV, name, "x", x, "y", y);
}

tide_ref tide_builder_max(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_MAX, name, "x", x, "y", y);
}

tide_ref tide_builder_min(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_MIN, name, "x", x, "y", y);
}

tide_ref tide_builder_pow(tide_builder *b, const char *name, tide_ref x, tide_ref y)
{
    return binary(b, OP_POW, name, "x", x, "y", y);
}

/* ============================================================================
 * Masks computed from data: Cast, Compare, Select
 * ========================================================================== */

/* An op of one input x and one int attribute (Cast's "to", Trig's "fn", Round's "mode"). */
static tide_ref unary_int(tide_builder *b, enum op_id op, const char *name, tide_ref x,
                          const char *attr, int64_t value)
{
    struct call c;
    if (!begin(b, &c, op, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    attr_int(&c, attr, value);
    return finish(&c);
}

tide_ref tide_builder_cast(tide_builder *b, const char *name, tide_ref x, enum tide_data_type to)
{
    return unary_int(b, OP_CAST, name, x, "to", (int64_t)to);
}

tide_ref tide_builder_compare(tide_builder *b, const char *name, tide_ref x, tide_ref y,
                              enum tide_compare_mode mode)
{
    struct call c;
    if (!begin(b, &c, OP_COMPARE, name) || !input(&c, 0, "x", x) || !input(&c, 1, "y", y))
        return TIDE_REF_NONE;
    attr_int(&c, "mode", (int64_t)mode);
    return finish(&c);
}

tide_ref tide_builder_select(tide_builder *b, const char *name, tide_ref cond, tide_ref x,
                             tide_ref y)
{
    struct call c;
    if (!begin(b, &c, OP_SELECT, name) || !input(&c, 0, "cond", cond) || !input(&c, 1, "x", x) ||
        !input(&c, 2, "y", y))
        return TIDE_REF_NONE;
    return finish(&c);
}

/* ============================================================================
 * Trigonometric and hyperbolic functions: Trig
 * ========================================================================== */

tide_ref tide_builder_trig(tide_builder *b, const char *name, tide_ref x, enum tide_trig_fn fn)
{
    return unary_int(b, OP_TRIG, name, x, "fn", (int64_t)fn);
}

/* ============================================================================
 * Rounding to integral values: Round
 * ========================================================================== */

tide_ref tide_builder_round(tide_builder *b, const char *name, tide_ref x,
                            enum tide_round_mode mode)
{
    return unary_int(b, OP_ROUND, name, x, "mode", (int64_t)mode);
}

/* ============================================================================
 * Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose)
 * ========================================================================== */

tide_ref tide_builder_batch_matmul(tide_builder *b, const char *name, tide_ref a, tide_ref bm,
                                   bool ta, bool tb)
{
    struct call c;
    if (!begin(b, &c, OP_BATCH_MATMUL, name) || !input(&c, 0, "a", a) || !input(&c, 1, "b", bm))
        return TIDE_REF_NONE;
    attr_bool(&c, "transpose_a", ta);
    attr_bool(&c, "transpose_b", tb);
    return finish(&c);
}

tide_ref tide_builder_transpose(tide_builder *b, const char *name, tide_ref x, const int64_t *perm,
                                int32_t rank)
{
    struct call c;
    if (!begin(b, &c, OP_TRANSPOSE, name) || !input(&c, 0, "x", x) ||
        !check_list(&c, "perm", rank, perm))
        return TIDE_REF_NONE;
    attr_ints(&c, "perm", rank, perm);
    return finish(&c);
}

/* ============================================================================
 * Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing)
 * ========================================================================== */

tide_ref tide_builder_gather(tide_builder *b, const char *name, tide_ref table, tide_ref ids)
{
    return binary(b, OP_GATHER, name, "table", table, "ids", ids);
}

tide_ref tide_builder_gather_grad(tide_builder *b, const char *name, tide_ref dy, tide_ref ids,
                                  int64_t num_rows)
{
    struct call c;
    if (!begin(b, &c, OP_GATHER_GRAD, name) || !input(&c, 0, "dy", dy) || !input(&c, 1, "ids", ids))
        return TIDE_REF_NONE;
    attr_int(&c, "num_rows", num_rows);
    return finish(&c);
}

tide_ref tide_builder_gather_elements(tide_builder *b, const char *name, tide_ref data,
                                      tide_ref indices, int64_t axis, int64_t ignore_index)
{
    struct call c;
    if (!begin(b, &c, OP_GATHER_ELEMENTS, name) || !input(&c, 0, "data", data) ||
        !input(&c, 1, "indices", indices))
        return TIDE_REF_NONE;
    attr_int(&c, "axis", axis);
    if (ignore_index != TIDE_BUILDER_NO_IGNORE_INDEX)
        attr_int(&c, "ignore_index", ignore_index);
    return finish(&c);
}

tide_ref tide_builder_top_k(tide_builder *b, const char *name, tide_ref x, int64_t k)
{
    struct call c;
    if (!begin(b, &c, OP_TOP_K, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    attr_int(&c, "k", k);
    return finish(&c);
}

tide_ref tide_builder_moe_route(tide_builder *b, const char *name, tide_ref indices,
                                int64_t experts, int64_t capacity)
{
    struct call c;
    if (!begin(b, &c, OP_MOE_ROUTE, name) || !input(&c, 0, "indices", indices))
        return TIDE_REF_NONE;
    attr_int(&c, "experts", experts);
    attr_int(&c, "capacity", capacity);
    return finish(&c);
}

/* ============================================================================
 * Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout)
 * ========================================================================== */

tide_ref tide_builder_layer_norm(tide_builder *b, const char *name, tide_ref x, tide_ref gain,
                                 tide_ref bias, float epsilon)
{
    struct call c;
    if (!begin(b, &c, OP_LAYER_NORM, name) || !input(&c, 0, "x", x) ||
        !input(&c, 1, "gain", gain) || !input(&c, 2, "bias", bias))
        return TIDE_REF_NONE;
    attr_float(&c, "epsilon", epsilon);
    return finish(&c);
}

tide_ref tide_builder_dropout(tide_builder *b, const char *name, tide_ref x, float rate,
                              int64_t seed)
{
    struct call c;
    if (!begin(b, &c, OP_DROPOUT, name) || !input(&c, 0, "x", x))
        return TIDE_REF_NONE;
    attr_float(&c, "rate", rate);
    attr_int(&c, "seed", seed);
    return finish(&c);
}

/* ============================================================================
 * Sequence-model ops: fused attention (Attention)
 * ========================================================================== */

tide_ref tide_builder_attention(tide_builder *b, const char *name, tide_ref q, tide_ref k,
                                tide_ref v, bool causal, float scale)
{
    struct call c;
    if (!begin(b, &c, OP_ATTENTION, name) || !input(&c, 0, "q", q) || !input(&c, 1, "k", k) ||
        !input(&c, 2, "v", v))
        return TIDE_REF_NONE;
    attr_bool(&c, "causal", causal);
    attr_float(&c, "scale", scale);
    return finish(&c);
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
    struct tide_error err;
    if (tide_graph_add_control(b->ir, (uint32_t)node.id, (uint32_t)after.id, &err) != TIDE_OK) {
        set_error(b, "tide_builder_control_edge: %s", err.message);
        return -1;
    }
    n->edges[n->n_inputs] = e;
    n->inputs[n->n_inputs] = s;
    n->n_inputs++;
    return 0;
}
