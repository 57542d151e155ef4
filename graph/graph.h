/* SPDX-License-Identifier: MIT */
/*
 * graph.h: tide's in-memory graph IR and its op table.
 *
 * A graph is an array of nodes; a node is an op from graph/ops.def, its data
 * inputs (edges to other nodes' outputs), its control inputs (nodes it must
 * run after), its attributes, and its outputs' dtypes and shapes. The compile
 * passes rewrite the graph in place — they insert Fetch, WriteBack, SwapOut
 * and SwapIn nodes and control edges — and annotate it: each node gets a
 * partition and a stream, each output a home and an arena offset. The
 * executor needs nothing but the annotated graph.
 *
 * Nodes are referred to by id (their index in graph->nodes), never by
 * pointer across an insertion: adding a node may move the node array.
 *
 * Ownership: a graph owns one arena that holds every name, edge array,
 * attribute and constant value; tide_graph_free releases it all at once.
 * The node array itself is grown with realloc.
 *
 * Example usage:
 *
 *     struct tide_graph *g = tide_graph_new();
 *     uint32_t x, w, y;
 *     tide_graph_add_node(g, TIDE_OP_PLACEHOLDER, "x", &x, &err);
 *     tide_attr_set_dtype(g, x, TIDE_ATTR_PLACEHOLDER_dtype, TIDE_DTYPE_FLOAT32);
 *     ...
 *     struct tide_edge in[2] = {{x, 0}, {w, 0}};
 *     tide_graph_add_node(g, TIDE_OP_MATMUL, "y", &y, &err);
 *     tide_graph_set_inputs(g, y, in, 2, &err);
 *     if (tide_graph_infer(g, NULL, &err) != TIDE_OK) ...;   // validates, infers shapes
 *     tide_graph_free(g);
 */
#ifndef TIDE_GRAPH_GRAPH_H
#define TIDE_GRAPH_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "common/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Dtypes and shapes
 * ========================================================================== */

#define TIDE_MAX_RANK 8
/* Most entries of an INTS or FLOATS attribute. */
#define TIDE_MAX_LIST 8
/* Longest node name, in bytes. */
#define TIDE_MAX_NAME 256
/* "No node": returned by lookups that find nothing. */
#define TIDE_NO_NODE UINT32_MAX

/* Values match tide.v1.DataType. */
enum tide_dtype {
    TIDE_DTYPE_INVALID = 0,
    TIDE_DTYPE_FLOAT32 = 1,
    TIDE_DTYPE_INT32 = 2,
};

/*
 * The "mode" attribute of Compare (ops.def); the numbers are tide/graph.h's
 * enum tide_compare_mode, which the builder checks against these.
 */
enum tide_comparison {
    TIDE_COMPARISON_EQUAL = 0,
    TIDE_COMPARISON_NOT_EQUAL = 1,
    TIDE_COMPARISON_LESS = 2,
    TIDE_COMPARISON_LESS_EQUAL = 3,
    TIDE_COMPARISON_GREATER = 4,
    TIDE_COMPARISON_GREATER_EQUAL = 5,
    TIDE_COMPARISON_COUNT = 6,
};

/*
 * The "fn" attribute of Trig and TrigGrad (ops.def): which function; the
 * numbers are tide/graph.h's enum tide_trig_fn, which the builder checks
 * against these.
 */
enum tide_trig_function {
    TIDE_TRIG_FUNCTION_SIN = 0,
    TIDE_TRIG_FUNCTION_COS = 1,
    TIDE_TRIG_FUNCTION_TAN = 2,
    TIDE_TRIG_FUNCTION_ASIN = 3,
    TIDE_TRIG_FUNCTION_ACOS = 4,
    TIDE_TRIG_FUNCTION_ATAN = 5,
    TIDE_TRIG_FUNCTION_SINH = 6,
    TIDE_TRIG_FUNCTION_COSH = 7,
    TIDE_TRIG_FUNCTION_ASINH = 8,
    TIDE_TRIG_FUNCTION_ACOSH = 9,
    TIDE_TRIG_FUNCTION_ATANH = 10,
    TIDE_TRIG_FUNCTION_COUNT = 11,
};

/*
 * The "mode" attribute of Round (ops.def): to which integral value; the
 * numbers are tide/graph.h's enum tide_round_mode, which the builder checks
 * against these. HALF_TO_EVEN is ONNX's Round and torch.round.
 */
enum tide_rounding {
    TIDE_ROUNDING_FLOOR = 0,
    TIDE_ROUNDING_CEIL = 1,
    TIDE_ROUNDING_HALF_TO_EVEN = 2,
    TIDE_ROUNDING_TRUNC = 3,
    TIDE_ROUNDING_COUNT = 4,
};

/* Bytes per element; 0 for TIDE_DTYPE_INVALID or an unknown value. */
size_t tide_dtype_size(enum tide_dtype dtype);
/* "float32", "int32", or "invalid". */
const char *tide_dtype_name(enum tide_dtype dtype);

struct tide_shape {
    int32_t rank;
    int64_t dims[TIDE_MAX_RANK];
};

/* Product of the dims (1 for rank 0); -1 if a dim is negative or it overflows int64. */
int64_t tide_shape_numel(const struct tide_shape *shape);
bool tide_shape_equal(const struct tide_shape *a, const struct tide_shape *b);
/* Writes "[2, 3, 4]" into buf (always NUL-terminated); returns buf. */
char *tide_shape_format(const struct tide_shape *shape, char *buf, size_t size);
/* A shape from a rank and dims. */
struct tide_shape tide_shape_make(int32_t rank, const int64_t *dims);

/* ============================================================================
 * The op table (generated from graph/ops.def)
 * ========================================================================== */

enum tide_op {
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS) TIDE_OP_##ID,
#include "graph/ops.def"
#undef TIDE_OP
    TIDE_OP_COUNT
};

enum tide_op_flags {
    TIDE_OP_F_CHEAP = 1u << 0,    /* cheap to recompute rather than swap */
    TIDE_OP_F_SOURCE = 1u << 1,   /* no inputs: Placeholder, Variable, Const */
    TIDE_OP_F_MEMORY = 1u << 2,   /* Fetch, WriteBack, SwapOut, SwapIn */
    TIDE_OP_F_UPDATE = 1u << 3,   /* writes input 0 in place (optimizer updates) */
    /*
     * Element-wise with one output, whose kernels (CPU and CUDA) read element
     * i of every input before writing element i of the output and read no
     * other element of an input of the output's size: the output may take
     * over such an input's memory when this node is its last reader
     * (tide_graph_may_overwrite; memplan decides).
     */
    TIDE_OP_F_INPLACE = 1u << 4,
};

enum tide_dtype_rule {
    TIDE_DTYPE_RULE_FLOAT,  /* every input and output is float32 */
    TIDE_DTYPE_RULE_SAME,   /* every input has input 0's dtype; outputs too */
    TIDE_DTYPE_RULE_CUSTOM, /* the infer function checks */
};

enum tide_attr_type {
    TIDE_ATTR_TYPE_INT,
    TIDE_ATTR_TYPE_FLOAT,
    TIDE_ATTR_TYPE_BOOL,
    TIDE_ATTR_TYPE_STRING,
    TIDE_ATTR_TYPE_DTYPE,
    TIDE_ATTR_TYPE_SHAPE,
    TIDE_ATTR_TYPE_TENSOR,
    TIDE_ATTR_TYPE_INTS,
    TIDE_ATTR_TYPE_FLOATS,
};

/* "int", "float", ... for messages. */
const char *tide_attr_type_name(enum tide_attr_type type);

struct tide_attr_spec {
    const char *name;
    enum tide_attr_type type;
    bool required;
    int64_t default_int;      /* INT, BOOL, DTYPE */
    double default_float;     /* FLOAT */
    const char *default_string; /* STRING */
};

/* Attribute indices: TIDE_ATTR_<OP ID>_<name>, e.g. TIDE_ATTR_MATMUL_transpose_a. */
#define TIDE__ATTR_ENUM(OP, NAME, TYPE, REQUIRED, DEFAULT) TIDE_ATTR_##OP##_##NAME,
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS) \
    enum { TIDE_ATTRS_##ID(TIDE__ATTR_ENUM) TIDE_ATTR_##ID##__COUNT };
#include "graph/ops.def"
#undef TIDE_OP
#undef TIDE__ATTR_ENUM

struct tide_graph;
struct tide_node;

/*
 * Infers a node's output dtypes and shapes from its inputs and attributes,
 * and checks them; on a fault, fills err with a message naming the node.
 * It may normalise attributes (e.g. absent strides become [1, 1]).
 */
typedef enum tide_status (*tide_infer_fn)(struct tide_graph *graph, struct tide_node *node,
                                          struct tide_error *err);

struct tide_op_info {
    const char *name;
    int32_t min_inputs;
    int32_t max_inputs; /* -1: any number */
    int32_t n_outputs;
    enum tide_dtype_rule dtype_rule;
    uint32_t flags;
    uint32_t n_attrs;
    const struct tide_attr_spec *attrs;
    tide_infer_fn infer;
};

/* The table entry of op; op must be < TIDE_OP_COUNT. */
const struct tide_op_info *tide_op_info(enum tide_op op);
/* Finds an op by wire name; returns TIDE_NOT_FOUND if there is none. */
enum tide_status tide_op_lookup(const char *name, enum tide_op *op);
/* Finds an attribute of op by name; returns its index or -1. */
int tide_op_attr_index(enum tide_op op, const char *name);

/* ============================================================================
 * Nodes and graphs
 * ========================================================================== */

/* A constant tensor value (a Const's value, a Variable's initial value). */
struct tide_const_tensor {
    enum tide_dtype dtype;
    struct tide_shape shape;
    uint64_t nbytes;
    void *data; /* in the graph's arena, little-endian */
};

struct tide_attr_value {
    bool present; /* set explicitly (import, builder); false: the default */
    union {
        int64_t i;
        double f;
        bool b;
        const char *s; /* in the graph's arena */
        enum tide_dtype dtype;
        struct tide_shape shape;
        struct tide_const_tensor *tensor; /* NULL when absent */
        struct {
            int32_t n;
            int64_t v[TIDE_MAX_LIST];
        } ints;
        struct {
            int32_t n;
            float v[TIDE_MAX_LIST];
        } floats;
    };
};

/* Where a tensor lives while the plan runs. */
enum tide_home {
    TIDE_HOME_DEVICE = 0, /* in the job's arena, at offset */
    TIDE_HOME_HOST = 1,   /* in the host pool (homes of Variables, swapped-out copies) */
};

/* Which of a job's three streams runs a node. */
enum tide_stream_id {
    TIDE_STREAM_COMPUTE = 0,
    TIDE_STREAM_H2D = 1,
    TIDE_STREAM_D2H = 2,
};

struct tide_output {
    enum tide_dtype dtype;
    struct tide_shape shape;
    uint64_t nbytes;
    /* Annotations of the memory passes. */
    uint8_t home;    /* enum tide_home */
    uint64_t offset; /* arena offset when home is TIDE_HOME_DEVICE */
};

struct tide_edge {
    uint32_t node;   /* producer's id */
    uint32_t output; /* producer's output index */
};

struct tide_node {
    const char *name;
    enum tide_op op;
    uint32_t n_inputs;
    struct tide_edge *inputs;
    uint32_t n_controls;
    uint32_t *controls; /* ids of nodes this one runs after */
    uint32_t n_outputs;
    struct tide_output *outputs; /* filled by tide_graph_infer */
    struct tide_attr_value *attrs; /* tide_op_info(op)->n_attrs entries */
    const char *device;            /* "" = the job's device */
    /* Annotations of the compile passes. */
    int32_t partition; /* -1 until partitioned */
    uint8_t stream;    /* enum tide_stream_id */
    uint32_t subject;  /* memory ops: the node whose output they move; recompute copies: the node
                          they run again (swapper/recompute.c); else TIDE_NO_NODE */
};

struct tide_graph {
    struct tide_arena *arena;
    struct tide_node *nodes;
    uint32_t n_nodes;
    uint32_t cap_nodes;
    uint32_t version;
    /* Name index: open addressing over node ids, TIDE_NO_NODE when empty. */
    uint32_t *index;
    uint32_t index_cap;
};

/* Limits that import and infer enforce; from the daemon's config. */
struct tide_graph_limits {
    uint32_t max_nodes;
    uint64_t max_tensor_bytes;
};

/* 1,000,000 nodes and 16 GiB per tensor. */
struct tide_graph_limits tide_graph_limits_default(void);

/* Returns an empty graph, or NULL on OOM. */
struct tide_graph *tide_graph_new(void);
/* Frees the graph, its arena and everything in it. NULL is a no-op. */
void tide_graph_free(struct tide_graph *graph);

/*
 * Returns a deep copy of the graph (nodes, edges, attributes, annotations),
 * except that constant tensor values (Const values, Variable initial values)
 * are shared with the source: the clone must not outlive it. For planning
 * passes that try a policy on a copy (autotune). NULL on OOM.
 */
struct tide_graph *tide_graph_clone(const struct tide_graph *graph);

/* Checks a node name: 1..256 bytes of [A-Za-z0-9_./-]. */
bool tide_graph_name_valid(const char *name, size_t len);

/*
 * Appends a node with no inputs and default attributes; *id gets its id.
 * Refuses an invalid or duplicate name (TIDE_INVALID / TIDE_EXISTS).
 */
enum tide_status tide_graph_add_node(struct tide_graph *graph, enum tide_op op, const char *name,
                                     uint32_t *id, struct tide_error *err);

/* Replaces a node's data inputs with a copy of edges[0..n). */
enum tide_status tide_graph_set_inputs(struct tide_graph *graph, uint32_t id,
                                       const struct tide_edge *edges, uint32_t n,
                                       struct tide_error *err);

/* Adds a control input (id runs after `after`); a duplicate is ignored. */
enum tide_status tide_graph_add_control(struct tide_graph *graph, uint32_t id, uint32_t after,
                                        struct tide_error *err);

/* Returns the id of the node called name, or TIDE_NO_NODE. */
uint32_t tide_graph_find(const struct tide_graph *graph, const char *name);

/*
 * Parses an output reference, the one rule for every "node:k" in tide:
 * "node" is output 0 of node, "node:k" output k, where k is one or more
 * decimal digits (no sign, no spaces) worth at most UINT32_MAX. Names cannot contain
 * ':', so a second ':' is an error. Writes the node name (1 to TIDE_MAX_NAME
 * bytes, NUL-terminated) into name and k into *output; it does not look the
 * name up. Returns TIDE_INVALID with a message quoting text when it is NULL,
 * has an empty or too long name, or a missing, non-numeric or overflowing
 * index.
 */
enum tide_status tide_graph_parse_ref(const char *text, char name[TIDE_MAX_NAME + 1],
                                      uint32_t *output, struct tide_error *err);

/*
 * Resolves an output reference (tide_graph_parse_ref's rule) in graph to an
 * edge. what names the reference in messages ("fetch", "feed"). Returns
 * TIDE_INVALID when the text is malformed, TIDE_NOT_FOUND when no node has
 * the name or the node has no such output, with a message quoting the text.
 */
enum tide_status tide_graph_resolve_ref(const struct tide_graph *graph, const char *text,
                                        const char *what, struct tide_edge *edge,
                                        struct tide_error *err);

/* The output that input i of node reads. */
static inline const struct tide_output *tide_graph_input(const struct tide_graph *graph,
                                                         const struct tide_node *node, uint32_t i)
{
    const struct tide_edge *e = &node->inputs[i];
    return &graph->nodes[e->node].outputs[e->output];
}

/*
 * Whether node's output may be written over the memory of input i, as far
 * as the op goes: the op is TIDE_OP_F_INPLACE and the input has the
 * output's dtype and size, so element j of each is the same element.
 * Whether anything reads the input later is the memory plan's question
 * (memplan.c, and the swapper's floor and simulation, which agree with it).
 */
static inline bool tide_graph_may_overwrite(const struct tide_graph *graph,
                                            const struct tide_node *node, uint32_t i)
{
    if (!(tide_op_info(node->op)->flags & TIDE_OP_F_INPLACE) || node->n_outputs != 1 ||
        i >= node->n_inputs)
        return false;
    const struct tide_output *in = tide_graph_input(graph, node, i);
    return in->dtype == node->outputs[0].dtype && in->nbytes == node->outputs[0].nbytes;
}

/*
 * Attribute setters for builders and passes: set the value and mark it
 * present. k is a TIDE_ATTR_<OP>_<name> index of the node's op; the setters
 * assert that k and the type match the op (a programming error, never input).
 */
void tide_attr_set_int(struct tide_graph *graph, uint32_t id, int k, int64_t v);
void tide_attr_set_float(struct tide_graph *graph, uint32_t id, int k, double v);
void tide_attr_set_bool(struct tide_graph *graph, uint32_t id, int k, bool v);
void tide_attr_set_dtype(struct tide_graph *graph, uint32_t id, int k, enum tide_dtype v);
void tide_attr_set_shape(struct tide_graph *graph, uint32_t id, int k, const struct tide_shape *v);
void tide_attr_set_ints(struct tide_graph *graph, uint32_t id, int k, const int64_t *v, int32_t n);
void tide_attr_set_floats(struct tide_graph *graph, uint32_t id, int k, const float *v, int32_t n);
/* Copies s into the graph's arena. Returns TIDE_NOMEM on OOM. */
enum tide_status tide_attr_set_string(struct tide_graph *graph, uint32_t id, int k, const char *s);
/* Copies the tensor (and its data) into the graph's arena. Returns TIDE_NOMEM on OOM. */
enum tide_status tide_attr_set_tensor(struct tide_graph *graph, uint32_t id, int k,
                                      enum tide_dtype dtype, const struct tide_shape *shape,
                                      const void *data, uint64_t nbytes);

/*
 * The math a node's products may use: the "math" attribute of Conv2D, its two
 * gradients, MatMul and BatchMatMul (ops.def). Every other op computes float32.
 */
enum tide_math {
    TIDE_MATH_FP32 = 0, /* "fp32": plain float32 products (the default) */
    TIDE_MATH_TF32 = 1, /* "tf32": a GPU may multiply on TF32 tensor cores; the CPU does not */
};

/* "fp32" or "tf32" into *out; anything else (NULL too) is TIDE_INVALID, naming both. */
enum tide_status tide_math_parse(const char *name, enum tide_math *out, struct tide_error *err);
const char *tide_math_name(enum tide_math math);

/* The index of op's "math" attribute, or -1 when the op has none. */
int tide_op_math_attr(enum tide_op op);

/* node's math: TIDE_MATH_FP32 for an op without the attribute (infer checked its value). */
enum tide_math tide_node_math(const struct tide_node *node);

/*
 * A job's math: every node with a "math" attribute that it does not set
 * explicitly gets `math`; an explicit attribute wins. TIDE_NOMEM on OOM.
 */
enum tide_status tide_graph_set_math(struct tide_graph *graph, enum tide_math math);

/*
 * Validates the whole graph and infers every output's dtype and shape:
 * input arity, edge targets, cycles (naming a node on the cycle), attribute
 * presence, dtype rules, each op's shape rules, the limits (NULL: defaults).
 * Runs in topological order; the first fault is returned with a message that
 * names the node ("node \"conv1\" (Conv2D): ...").
 */
enum tide_status tide_graph_infer(struct tide_graph *graph, const struct tide_graph_limits *limits,
                                  struct tide_error *err);

/*
 * Validates and infers one node, id, exactly as tide_graph_infer does in its
 * walk (arity, edge targets, required attributes, dtype rules, the op's shape
 * rules, the limits; NULL: defaults), with the same messages. Every input's
 * producer must be inferred already. For builders that check each node as it
 * is added, so that their users see the daemon's words before anything is sent.
 */
enum tide_status tide_graph_infer_node(struct tide_graph *graph, uint32_t id,
                                       const struct tide_graph_limits *limits,
                                       struct tide_error *err);

/* Fills err with "node \"NAME\" (Op): " + the formatted text; returns status. */
enum tide_status tide_node_error(struct tide_error *err, enum tide_status status,
                                 const struct tide_node *node, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* ============================================================================
 * Topology
 * ========================================================================== */

/*
 * Who reads each node: for node v, users[offsets[v] .. offsets[v+1]) are the
 * ids of nodes with a data or control input from v (one entry per edge).
 * Free with tide_graph_users_free.
 */
struct tide_graph_users {
    uint32_t *offsets; /* n_nodes + 1 */
    uint32_t *users;
};

enum tide_status tide_graph_users_build(const struct tide_graph *graph,
                                        struct tide_graph_users *users);
void tide_graph_users_free(struct tide_graph_users *users);

/*
 * Orders for the passes; each writes graph->n_nodes ids into order (the
 * caller's array) and returns TIDE_INVALID with a message naming a node on a
 * cycle if there is one.
 *
 * topo:   Kahn's algorithm, FIFO from the sources in id order.
 * dfs:    the partitioner's order: a post-order depth-first search along
 *         inputs from each sink in id order, so every node comes right after
 *         its last input and each subtree finishes before the next starts
 *         (results are consumed while fresh; a Variable comes just before
 *         its first consumer). Early updates: each update (TIDE_OP_F_UPDATE)
 *         and the nodes only it reads (its weight gradient, its optimizer
 *         state) come as soon as their inputs are — the update right after
 *         the last of its inputs and control inputs, which autodiff makes
 *         every reader of its Variable — instead of at the end of the step.
 * dfs_late_updates: the same search without early updates (each update
 *         where its own sink's search puts it, in practice all at the end
 *         of the backward pass): the order before issue #11 item 2, kept so
 *         that tests can show that early updates change no bit.
 */
enum tide_status tide_graph_topo_order(const struct tide_graph *graph, uint32_t *order,
                                       struct tide_error *err);
enum tide_status tide_graph_dfs_order(const struct tide_graph *graph, uint32_t *order,
                                      struct tide_error *err);
enum tide_status tide_graph_dfs_order_late_updates(const struct tide_graph *graph, uint32_t *order,
                                                   struct tide_error *err);

/* Returns a node id on a cycle, or TIDE_NO_NODE if the graph is acyclic. */
uint32_t tide_graph_find_cycle(const struct tide_graph *graph);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_GRAPH_GRAPH_H */
