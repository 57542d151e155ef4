/* SPDX-License-Identifier: MIT */
/*
 * autodiff.c: reverse-mode differentiation of a graph, and the optimizer's
 * update nodes (see autodiff.h).
 *
 * DESIGN
 *
 * Gradients are graph nodes: autodiff appends them to the forward graph with
 * the ordinary IR API, so the memory passes and the executor see one graph and
 * plan forward and backward tensors together. Nothing here runs a kernel.
 *
 * The work happens in two passes over the forward nodes, in topological order
 * (tide_graph_topo_order) and its reverse.
 *
 *  1. Analysis, which appends nothing, so that a refused graph is left as it
 *     was. Each output ("slot") learns whether it depends on an edge we
 *     differentiate with respect to ("wrt"), through float32 edges only, and
 *     only through inputs that take a gradient (not Compare's operands,
 *     Select's condition, Round's input or a Cast to int32:
 *     input_differentiable); each node learns whether it reaches the loss.
 *     A node on a path — it reaches the loss and has a float input that
 *     depends on a wrt edge — will run its gradient function; each such
 *     input is one gradient contribution to the slot it reads, so every slot
 *     knows how many contributions it will get.
 *     An op without a gradient function on a path, or a gradient arriving at
 *     an output that its op cannot differentiate (the mean and inv_std of
 *     BatchNorm and LayerNorm), is refused here, naming the node.
 *
 *  2. Emission, in reverse topological order, so that a node's consumers have
 *     all contributed before it runs. A slot's gradient is its one
 *     contribution, or AddN of several in the order they were made (reverse
 *     topological order, then input order: deterministic); more than
 *     SUM_FAN_IN are summed in groups as they come (see contribute). The
 *     loss slot's one contribution is the seed, Const 1.0. Each node on a
 *     path calls tide__grad_<GRAD> from ops.def with the gradients of its
 *     outputs and gets back one gradient edge per input that wants one.
 *
 * Names: every node made for forward node v is called "grad/<v>/<role>"; the
 * sum of several contributions to output k of u is "grad/<u>" ("grad/<u>/outK"
 * for k > 0). The gradient of a wrt edge always ends in a node with that name,
 * reserved during analysis so that no other gradient node takes it: when the
 * slot gets one contribution, the gradient function names its last node so
 * (no copy); only when the contribution is an existing edge (a pass-through,
 * as in Add) or an output of a multi-output node (BatchNormGrad) does an
 * Identity carry the name. Every name is made unique ("_1", "_2", ...) against
 * the graph, and names too long for the IR are shortened with a hash.
 *
 * Infer normalises attributes (sorted reduce axes, explicit strides and pads,
 * Slice sizes); autodiff runs it first and reads the normalised values. The
 * shapes of appended nodes are unknown until the final infer, so gradient
 * functions take every shape from the forward graph: the gradient of an output
 * has that output's shape.
 *
 * Failure: everything a user can get wrong is refused before the first node
 * is appended. After that only an out-of-memory or the final infer can fail
 * and the graph then holds some gradient nodes; the caller discards it.
 */
#include "graph/autodiff.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================
 * State
 * ========================================================================== */

/* A set of strings (the reserved names), open addressing, FNV-1a. */
struct name_set {
    const char **slots;
    uint32_t cap; /* a power of two, or 0 */
};

struct autodiff {
    struct tide_graph *graph;
    struct tide_error *err;
    uint32_t n_forward; /* nodes before autodiff appended any */
    struct tide_edge loss;
    const char *loss_text; /* "name" or "name:k", for messages */
    const struct tide_edge *wrt;
    uint32_t n_wrt;

    uint32_t *order;     /* the forward nodes, topologically */
    uint32_t *slot_base; /* per forward node + 1: the slot of its output 0 */
    uint32_t n_slots;
    uint32_t *dep;    /* per slot: 1 + the first wrt index it depends on; 0: none */
    uint8_t *reaches; /* per node: reaches the loss along data edges */
    uint8_t *on_path; /* per node: runs its gradient function */
    uint32_t *count;  /* per slot: gradient contributions it will get */
    uint32_t *first;  /* per slot + 1: where its contributions start in contribs */
    uint32_t *filled; /* per slot: contributions made so far */
    struct tide_edge *contribs;
    struct tide_edge *sum; /* per slot: its gradient once summed; node TIDE_NO_NODE before */
    uint8_t *summed;       /* per slot */
    char **final_name;     /* per slot: the reserved name of a wrt edge's gradient, or NULL */
    struct name_set reserved;

    /* Scratch for one node's gradient function, sized for the widest node. */
    uint8_t *wanted;
    struct tide_edge *dx;
    const char **hint;
};

struct grad_ctx {
    struct autodiff *ad;
    uint32_t id;                /* the forward node */
    const struct tide_edge *dy; /* per output; node TIDE_NO_NODE where no gradient arrives */
    const uint8_t *wanted;      /* per input: whether it wants a gradient */
    struct tide_edge *dx;       /* per input: the gradient, set for each wanted input */
    const char *const *hint;    /* per input: the name of the node that makes dx[i], or NULL */
};

/*
 * A gradient function: reads c->dy and the forward node, appends nodes, and
 * sets c->dx[i] for every input i with c->wanted[i].
 */
typedef enum tide_status (*grad_fn)(struct grad_ctx *c);

static const struct tide_edge no_edge = {TIDE_NO_NODE, 0};

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 16777619u;
    }
    return h;
}

static bool name_set_contains(const struct name_set *set, const char *name)
{
    if (set->cap == 0)
        return false;
    uint32_t mask = set->cap - 1;
    for (uint32_t i = hash_name(name) & mask; set->slots[i]; i = (i + 1) & mask) {
        if (strcmp(set->slots[i], name) == 0)
            return true;
    }
    return false;
}

/* The set never holds more than cap / 2 names: its capacity is fixed by its first user. */
static void name_set_insert(struct name_set *set, const char *name)
{
    uint32_t mask = set->cap - 1;
    uint32_t i = hash_name(name) & mask;
    while (set->slots[i])
        i = (i + 1) & mask;
    set->slots[i] = name;
}

static uint32_t slot_of(const struct autodiff *ad, struct tide_edge e)
{
    assert(e.node < ad->n_forward);
    return ad->slot_base[e.node] + e.output;
}

/* The shape of a forward output (copied: adding nodes may move the node array). */
static struct tide_shape forward_shape(const struct autodiff *ad, struct tide_edge e)
{
    return ad->graph->nodes[e.node].outputs[e.output].shape;
}

/*
 * Whether any gradient flows from node back into its input i. Not into
 * Compare's operands or Round's input (step functions: their derivative is
 * 0 almost everywhere, and PyTorch's round, floor, ceil and trunc give
 * zeros), Select's condition (it only picks), or a Cast to int32 (integers
 * carry none). Such an input is treated as an int32 one is: the
 * path through it contributes nothing, so it is neither refused nor waited
 * for, and a wrt edge whose every path to the loss crosses one does not
 * reach the loss.
 */
static bool input_differentiable(const struct tide_node *node, uint32_t i)
{
    switch (node->op) {
    case TIDE_OP_COMPARE:
    case TIDE_OP_ROUND:
        return false;
    case TIDE_OP_SELECT:
        return i != 0;
    case TIDE_OP_CAST:
        return node->attrs[TIDE_ATTR_CAST_to].i == TIDE_DTYPE_FLOAT32;
    default:
        return true;
    }
}

/* Whether input i of forward node v is float32, takes a gradient and depends on a wrt edge. */
static bool input_wanted(const struct autodiff *ad, uint32_t v, uint32_t i)
{
    const struct tide_node *node = &ad->graph->nodes[v];
    struct tide_edge e = node->inputs[i];
    return ad->graph->nodes[e.node].outputs[e.output].dtype == TIDE_DTYPE_FLOAT32 &&
           input_differentiable(node, i) && ad->dep[slot_of(ad, e)] != 0;
}

/* ============================================================================
 * Names
 * ========================================================================== */

/*
 * Formats a node name into out (TIDE_MAX_NAME + 1 bytes) and makes it free:
 * too long, it is cut and a hash of the whole appended; taken (by a node, or
 * reserved for a wrt gradient unless exact is set and it is free of nodes),
 * "_1", "_2", ... is appended.
 */
static enum tide_status make_name(struct autodiff *ad, char *out, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static enum tide_status make_name(struct autodiff *ad, char *out, const char *format, ...)
{
    char full[2 * TIDE_MAX_NAME + 64];
    va_list args;
    va_start(args, format);
    vsnprintf(full, sizeof(full), format, args);
    va_end(args);

    /* Room for "-hhhhhhhh" and "_nnnnnnnnnn". */
    const size_t keep = TIDE_MAX_NAME - 9 - 11;
    char base[TIDE_MAX_NAME + 1];
    size_t len = strlen(full);
    if (len > keep)
        snprintf(base, sizeof(base), "%.*s-%08" PRIx32, (int)keep, full, hash_name(full));
    else
        memcpy(base, full, len + 1);

    /* base is at most TIDE_MAX_NAME - 11 bytes, so each candidate fits in a name. */
    char candidate[TIDE_MAX_NAME + 32];
    snprintf(candidate, sizeof(candidate), "%s", base);
    for (uint32_t n = 1; tide_graph_find(ad->graph, candidate) != TIDE_NO_NODE ||
                         name_set_contains(&ad->reserved, candidate);
         n++) {
        if (n == UINT32_MAX)
            return tide_error_set(ad->err, TIDE_INTERNAL, "no free name for \"%s\"", base);
        snprintf(candidate, sizeof(candidate), "%s_%" PRIu32, base, n);
    }
    assert(strlen(candidate) <= TIDE_MAX_NAME);
    memcpy(out, candidate, strlen(candidate) + 1);
    return TIDE_OK;
}

/* Appends a node of op called name (which must be free) reading in[0..n). */
static enum tide_status append(struct autodiff *ad, enum tide_op op, const char *name,
                               const struct tide_edge *in, uint32_t n, uint32_t *id)
{
    enum tide_status st = tide_graph_add_node(ad->graph, op, name, id, ad->err);
    if (st == TIDE_OK && n)
        st = tide_graph_set_inputs(ad->graph, *id, in, n, ad->err);
    return st;
}

/* "grad/<u>" for output 0 of u, "grad/<u>/outK" for output K: the name of a slot's gradient. */
static enum tide_status slot_name(struct autodiff *ad, struct tide_edge e, char *out)
{
    const char *u = ad->graph->nodes[e.node].name;
    if (e.output == 0)
        return make_name(ad, out, "grad/%s", u);
    return make_name(ad, out, "grad/%s/out%" PRIu32, u, e.output);
}

/* ============================================================================
 * Gradient helpers
 * ========================================================================== */

static const struct tide_node *fwd(const struct grad_ctx *c)
{
    return &c->ad->graph->nodes[c->id];
}

static struct tide_edge in_edge(const struct grad_ctx *c, uint32_t i)
{
    return fwd(c)->inputs[i];
}

static struct tide_shape in_shape(const struct grad_ctx *c, uint32_t i)
{
    return forward_shape(c->ad, in_edge(c, i));
}

static struct tide_shape out_shape(const struct grad_ctx *c, uint32_t k)
{
    return forward_shape(c->ad, (struct tide_edge){c->id, k});
}

static const struct tide_attr_value *fwd_attr(const struct grad_ctx *c, int k)
{
    return &fwd(c)->attrs[k];
}

/*
 * Appends a gradient node of op reading in[0..n). With for_input >= 0 it is
 * the node that makes dx[for_input] and takes that input's hint as its name
 * when there is one; otherwise it is "grad/<forward node>/<role>", unique.
 */
static enum tide_status emit(struct grad_ctx *c, enum tide_op op, int for_input, const char *role,
                             const struct tide_edge *in, uint32_t n, uint32_t *id)
{
    char name[TIDE_MAX_NAME + 1];
    if (for_input >= 0 && c->hint[for_input]) {
        snprintf(name, sizeof(name), "%s", c->hint[for_input]);
    } else {
        enum tide_status st = make_name(c->ad, name, "grad/%s/%s", fwd(c)->name, role);
        if (st != TIDE_OK)
            return st;
    }
    return append(c->ad, op, name, in, n, id);
}

static enum tide_status emit1(struct grad_ctx *c, enum tide_op op, int for_input, const char *role,
                              struct tide_edge x, uint32_t *id)
{
    return emit(c, op, for_input, role, &x, 1, id);
}

static enum tide_status emit2(struct grad_ctx *c, enum tide_op op, int for_input, const char *role,
                              struct tide_edge a, struct tide_edge b, uint32_t *id)
{
    struct tide_edge in[2] = {a, b};
    return emit(c, op, for_input, role, in, 2, id);
}

static struct tide_edge out0(uint32_t id)
{
    return (struct tide_edge){id, 0};
}

static void set_shape_ints(struct tide_graph *graph, uint32_t id, int k,
                           const struct tide_shape *shape)
{
    tide_attr_set_ints(graph, id, k, shape->dims, shape->rank);
}

static void copy_ints(struct tide_graph *graph, uint32_t id, int k,
                      const struct tide_attr_value *from)
{
    tide_attr_set_ints(graph, id, k, from->ints.v, from->ints.n);
}

/* Whether input i of a broadcasting op has a different shape from the output. */
static bool was_broadcast(const struct grad_ctx *c, uint32_t i)
{
    struct tide_shape x = in_shape(c, i), y = out_shape(c, 0);
    return !tide_shape_equal(&x, &y);
}

/*
 * dx[i] from e, a tensor of the output's shape: SumToShape(e) to input i's
 * shape where input i was broadcast, else e itself. The SumToShape node is
 * tagged for input i when last is set; role names it otherwise.
 */
static enum tide_status sum_to_input(struct grad_ctx *c, uint32_t i, struct tide_edge e, bool last,
                                     const char *role, struct tide_edge *out)
{
    if (!was_broadcast(c, i)) {
        *out = e;
        return TIDE_OK;
    }
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_SUM_TO_SHAPE, last ? (int)i : -1, role, e, &id);
    if (st != TIDE_OK)
        return st;
    struct tide_shape x = in_shape(c, i);
    tide_attr_set_shape(c->ad->graph, id, TIDE_ATTR_SUM_TO_SHAPE_shape, &x);
    *out = out0(id);
    return TIDE_OK;
}

/* dx[0] = op(dy) for the element-wise backward ops that read the forward output: f'(x) from y. */
static enum tide_status grad_from_output(struct grad_ctx *c, enum tide_op op, uint32_t *id)
{
    enum tide_status st = emit2(c, op, 0, "x", c->dy[0], out0(c->id), id);
    if (st == TIDE_OK)
        c->dx[0] = out0(*id);
    return st;
}

/* ============================================================================
 * Gradient functions (tide__grad_<GRAD> of ops.def)
 * ========================================================================== */

/* Identity, Fetch, SwapOut, SwapIn: the gradient passes through. */
static enum tide_status tide__grad_identity(struct grad_ctx *c)
{
    c->dx[0] = c->dy[0];
    return TIDE_OK;
}

static enum tide_status tide__grad_add(struct grad_ctx *c)
{
    static const char *const roles[2] = {"a", "b"};
    enum tide_status st = TIDE_OK;
    for (uint32_t i = 0; st == TIDE_OK && i < 2; i++) {
        if (c->wanted[i])
            st = sum_to_input(c, i, c->dy[0], true, roles[i], &c->dx[i]);
    }
    return st;
}

static enum tide_status tide__grad_sub(struct grad_ctx *c)
{
    enum tide_status st = TIDE_OK;
    if (c->wanted[0])
        st = sum_to_input(c, 0, c->dy[0], true, "a", &c->dx[0]);
    if (st == TIDE_OK && c->wanted[1]) {
        /* Sum first, then negate: the smaller tensor. */
        struct tide_edge summed;
        uint32_t id;
        st = sum_to_input(c, 1, c->dy[0], false, "b_sum", &summed);
        if (st == TIDE_OK)
            st = emit1(c, TIDE_OP_NEG, 1, "b", summed, &id);
        if (st == TIDE_OK)
            c->dx[1] = out0(id);
    }
    return st;
}

static enum tide_status tide__grad_mul(struct grad_ctx *c)
{
    static const char *const roles[2] = {"a", "b"};
    static const char *const full_roles[2] = {"a_full", "b_full"};
    enum tide_status st = TIDE_OK;
    for (uint32_t i = 0; st == TIDE_OK && i < 2; i++) {
        if (!c->wanted[i])
            continue;
        bool reduce = was_broadcast(c, i);
        uint32_t id;
        st = emit2(c, TIDE_OP_MUL, reduce ? -1 : (int)i, reduce ? full_roles[i] : roles[i],
                   c->dy[0], in_edge(c, 1 - i), &id);
        if (st == TIDE_OK)
            st = sum_to_input(c, i, out0(id), true, roles[i], &c->dx[i]);
    }
    return st;
}

/* dx[i] = MatMul(first, second; transpose_a = ta, transpose_b = tb). */
static enum tide_status matmul_into(struct grad_ctx *c, uint32_t i, const char *role,
                                    struct tide_edge first, struct tide_edge second, bool ta,
                                    bool tb)
{
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_MATMUL, (int)i, role, first, second, &id);
    if (st != TIDE_OK)
        return st;
    if (ta)
        tide_attr_set_bool(c->ad->graph, id, TIDE_ATTR_MATMUL_transpose_a, true);
    if (tb)
        tide_attr_set_bool(c->ad->graph, id, TIDE_ATTR_MATMUL_transpose_b, true);
    c->dx[i] = out0(id);
    return TIDE_OK;
}

/*
 * C = op(A) op(B), where op transposes when the flag is set:
 *   A B:      dA = dC B^T         dB = A^T dC
 *   A B^T:    dA = dC B           dB = dC^T A
 *   A^T B:    dA = B dC^T         dB = A dC
 *   A^T B^T:  dA = B^T dC^T       dB = dC^T A^T
 */
static enum tide_status tide__grad_matmul(struct grad_ctx *c)
{
    bool ta = fwd_attr(c, TIDE_ATTR_MATMUL_transpose_a)->b;
    bool tb = fwd_attr(c, TIDE_ATTR_MATMUL_transpose_b)->b;
    struct tide_edge a = in_edge(c, 0), b = in_edge(c, 1), dy = c->dy[0];
    enum tide_status st = TIDE_OK;
    if (c->wanted[0]) {
        if (!ta)
            st = matmul_into(c, 0, "a", dy, b, false, !tb);
        else if (!tb)
            st = matmul_into(c, 0, "a", b, dy, false, true);
        else
            st = matmul_into(c, 0, "a", b, dy, true, true);
    }
    if (st == TIDE_OK && c->wanted[1]) {
        if (!tb)
            st = ta ? matmul_into(c, 1, "b", a, dy, false, false)
                    : matmul_into(c, 1, "b", a, dy, true, false);
        else
            st = ta ? matmul_into(c, 1, "b", dy, a, true, true)
                    : matmul_into(c, 1, "b", dy, a, true, false);
    }
    return st;
}

static enum tide_status tide__grad_bias_add(struct grad_ctx *c)
{
    if (c->wanted[0])
        c->dx[0] = c->dy[0];
    if (!c->wanted[1])
        return TIDE_OK;
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_BIAS_ADD_GRAD, 1, "bias", c->dy[0], &id);
    if (st == TIDE_OK)
        c->dx[1] = out0(id);
    return st;
}

static enum tide_status tide__grad_relu(struct grad_ctx *c)
{
    uint32_t id;
    return grad_from_output(c, TIDE_OP_RELU_GRAD, &id);
}

static enum tide_status tide__grad_sigmoid(struct grad_ctx *c)
{
    uint32_t id;
    return grad_from_output(c, TIDE_OP_SIGMOID_GRAD, &id);
}

static enum tide_status tide__grad_tanh(struct grad_ctx *c)
{
    uint32_t id;
    return grad_from_output(c, TIDE_OP_TANH_GRAD, &id);
}

static enum tide_status tide__grad_softmax(struct grad_ctx *c)
{
    uint32_t id;
    int64_t axis = fwd_attr(c, TIDE_ATTR_SOFTMAX_axis)->i; /* normalised by infer */
    enum tide_status st = grad_from_output(c, TIDE_OP_SOFTMAX_GRAD, &id);
    if (st == TIDE_OK)
        tide_attr_set_int(c->ad->graph, id, TIDE_ATTR_SOFTMAX_GRAD_axis, axis);
    return st;
}

/* Labels are int32, so only the logits ever want a gradient. */
static enum tide_status tide__grad_softmax_xent(struct grad_ctx *c)
{
    struct tide_edge in[3] = {in_edge(c, 0), in_edge(c, 1), c->dy[0]};
    uint32_t id;
    enum tide_status st = emit(c, TIDE_OP_SOFTMAX_CROSS_ENTROPY_GRAD, 0, "logits", in, 3, &id);
    if (st == TIDE_OK)
        c->dx[0] = out0(id);
    return st;
}

/*
 * ReduceSum and ReduceMean: dy is reshaped to the input's shape with the
 * reduced axes kept as 1, then broadcast to the input's shape; the mean
 * scales by 1 / (elements per output) first, on the smaller tensor. Steps that
 * would change nothing are left out; the last one made is tagged for input 0.
 */
static enum tide_status grad_reduce(struct grad_ctx *c, bool mean)
{
    const struct tide_attr_value *axes =
        fwd_attr(c, mean ? TIDE_ATTR_REDUCE_MEAN_axes : TIDE_ATTR_REDUCE_SUM_axes);
    struct tide_shape x = in_shape(c, 0), y = out_shape(c, 0), kept = x;
    double count = 1;
    for (int32_t j = 0; j < axes->ints.n; j++) { /* sorted and non-negative after infer */
        count *= (double)x.dims[axes->ints.v[j]];
        kept.dims[axes->ints.v[j]] = 1;
    }
    bool scale = mean && count != 1;
    bool reshape = !tide_shape_equal(&y, &kept);
    bool broadcast = !tide_shape_equal(&kept, &x);
    struct tide_graph *graph = c->ad->graph;
    struct tide_edge e = c->dy[0];
    uint32_t id;
    enum tide_status st = TIDE_OK;
    if (scale) {
        st = emit1(c, TIDE_OP_SCALE, reshape || broadcast ? -1 : 0, "x_scaled", e, &id);
        if (st != TIDE_OK)
            return st;
        /* An empty reduction has no elements to scale; 0 keeps the attribute finite. */
        tide_attr_set_float(graph, id, TIDE_ATTR_SCALE_scale, count > 0 ? 1.0 / count : 0.0);
        e = out0(id);
    }
    if (reshape) {
        st = emit1(c, TIDE_OP_RESHAPE, broadcast ? -1 : 0, "x_kept", e, &id);
        if (st != TIDE_OK)
            return st;
        set_shape_ints(graph, id, TIDE_ATTR_RESHAPE_shape, &kept);
        e = out0(id);
    }
    if (broadcast) {
        st = emit1(c, TIDE_OP_BROADCAST_TO, 0, "x", e, &id);
        if (st != TIDE_OK)
            return st;
        tide_attr_set_shape(graph, id, TIDE_ATTR_BROADCAST_TO_shape, &x);
        e = out0(id);
    }
    c->dx[0] = e;
    return TIDE_OK;
}

static enum tide_status tide__grad_reduce_sum(struct grad_ctx *c)
{
    return grad_reduce(c, false);
}

static enum tide_status tide__grad_reduce_mean(struct grad_ctx *c)
{
    return grad_reduce(c, true);
}

static enum tide_status tide__grad_reshape(struct grad_ctx *c)
{
    struct tide_shape x = in_shape(c, 0);
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_RESHAPE, 0, "x", c->dy[0], &id);
    if (st != TIDE_OK)
        return st;
    set_shape_ints(c->ad->graph, id, TIDE_ATTR_RESHAPE_shape, &x);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/*
 * BroadcastTo copies x along the axes it adds in front and the axes where x
 * has size 1, so each element of x reaches every output element it was
 * copied to: dx is dy summed over those axes, to x's shape (as Add's
 * broadcast operand). A BroadcastTo to x's own shape passes dy through.
 */
static enum tide_status tide__grad_broadcast_to(struct grad_ctx *c)
{
    return sum_to_input(c, 0, c->dy[0], true, "x", &c->dx[0]);
}

/* Input i's gradient is the slice of dy that input i filled. */
static enum tide_status tide__grad_concat(struct grad_ctx *c)
{
    int64_t axis = fwd_attr(c, TIDE_ATTR_CONCAT_axis)->i; /* normalised by infer */
    int64_t offset = 0;
    uint32_t n = fwd(c)->n_inputs;
    for (uint32_t i = 0; i < n; i++) {
        struct tide_shape x = in_shape(c, i);
        if (c->wanted[i]) {
            int64_t begin[TIDE_MAX_RANK] = {0};
            begin[axis] = offset;
            char role[32];
            snprintf(role, sizeof(role), "x%" PRIu32, i);
            uint32_t id;
            enum tide_status st = emit1(c, TIDE_OP_SLICE, (int)i, role, c->dy[0], &id);
            if (st != TIDE_OK)
                return st;
            tide_attr_set_ints(c->ad->graph, id, TIDE_ATTR_SLICE_begin, begin, x.rank);
            set_shape_ints(c->ad->graph, id, TIDE_ATTR_SLICE_size, &x);
            c->dx[i] = out0(id);
        }
        offset += x.dims[axis];
    }
    return TIDE_OK;
}

static enum tide_status tide__grad_slice(struct grad_ctx *c)
{
    struct tide_shape x = in_shape(c, 0);
    const struct tide_attr_value *begin = fwd_attr(c, TIDE_ATTR_SLICE_begin);
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_SLICE_GRAD, 0, "x", c->dy[0], &id);
    if (st != TIDE_OK)
        return st;
    copy_ints(c->ad->graph, id, TIDE_ATTR_SLICE_GRAD_begin, begin);
    tide_attr_set_shape(c->ad->graph, id, TIDE_ATTR_SLICE_GRAD_shape, &x);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/* The attribute slots of a convolution-family op's geometry and its shape attribute. */
struct conv_attrs {
    int strides, pads, dilations, group, shape;
};

static struct conv_attrs conv_attrs_of(enum tide_op op)
{
    switch (op) {
    case TIDE_OP_CONV2D:
        return (struct conv_attrs){TIDE_ATTR_CONV2D_strides, TIDE_ATTR_CONV2D_pads,
                                   TIDE_ATTR_CONV2D_dilations, TIDE_ATTR_CONV2D_group, -1};
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        return (struct conv_attrs){
            TIDE_ATTR_CONV2D_BACKPROP_INPUT_strides, TIDE_ATTR_CONV2D_BACKPROP_INPUT_pads,
            TIDE_ATTR_CONV2D_BACKPROP_INPUT_dilations, TIDE_ATTR_CONV2D_BACKPROP_INPUT_group,
            TIDE_ATTR_CONV2D_BACKPROP_INPUT_input_shape};
    default:
        return (struct conv_attrs){
            TIDE_ATTR_CONV2D_BACKPROP_FILTER_strides, TIDE_ATTR_CONV2D_BACKPROP_FILTER_pads,
            TIDE_ATTR_CONV2D_BACKPROP_FILTER_dilations, TIDE_ATTR_CONV2D_BACKPROP_FILTER_group,
            TIDE_ATTR_CONV2D_BACKPROP_FILTER_filter_shape};
    }
}

/*
 * Appends op, a convolution-family node reading a and b that makes dx[for_input], in the
 * forward node's strides, pads, dilations and group; shape is its input_shape or
 * filter_shape (NULL for Conv2D). The forward attributes are copied out first: appending
 * may move the graph's nodes.
 */
static enum tide_status emit_conv(struct grad_ctx *c, enum tide_op op, int for_input,
                                  const char *role, struct tide_edge a, struct tide_edge b,
                                  const struct tide_shape *shape)
{
    struct conv_attrs from = conv_attrs_of(fwd(c)->op), to = conv_attrs_of(op);
    struct tide_attr_value strides = *fwd_attr(c, from.strides), pads = *fwd_attr(c, from.pads),
                           dilations = *fwd_attr(c, from.dilations);
    int64_t group = fwd_attr(c, from.group)->i;
    struct tide_graph *graph = c->ad->graph;
    uint32_t id;
    enum tide_status st = emit2(c, op, for_input, role, a, b, &id);
    if (st != TIDE_OK)
        return st;
    copy_ints(graph, id, to.strides, &strides);
    copy_ints(graph, id, to.pads, &pads);
    copy_ints(graph, id, to.dilations, &dilations);
    tide_attr_set_int(graph, id, to.group, group);
    if (shape)
        tide_attr_set_shape(graph, id, to.shape, shape);
    c->dx[for_input] = out0(id);
    return TIDE_OK;
}

static enum tide_status tide__grad_conv2d(struct grad_ctx *c)
{
    enum tide_status st = TIDE_OK;
    if (c->wanted[0]) {
        struct tide_shape x = in_shape(c, 0);
        st = emit_conv(c, TIDE_OP_CONV2D_BACKPROP_INPUT, 0, "x", c->dy[0], in_edge(c, 1), &x);
    }
    if (st == TIDE_OK && c->wanted[1]) {
        struct tide_shape w = in_shape(c, 1);
        st = emit_conv(c, TIDE_OP_CONV2D_BACKPROP_FILTER, 1, "w", in_edge(c, 0), c->dy[0], &w);
    }
    return st;
}

/*
 * Conv2DBackpropInput(a, w; input_shape) -> y: the transposed convolution
 * (ONNX's ConvTranspose imports as this op). It is linear in a and in w:
 * y[n, c, h] = sum over k, r of a[n, k, o] w[k, c, r] where h = o * stride
 * - pad + r * dilation. So da is the forward convolution of dy with w (the
 * adjoint of the adjoint), and dw is the filter gradient of a convolution
 * whose input is dy and whose output gradient is a: both in the same
 * strides, pads, group and dilations.
 */
static enum tide_status tide__grad_conv2d_backprop_input(struct grad_ctx *c)
{
    enum tide_status st = TIDE_OK;
    if (c->wanted[0])
        st = emit_conv(c, TIDE_OP_CONV2D, 0, "dy", c->dy[0], in_edge(c, 1), NULL);
    if (st == TIDE_OK && c->wanted[1]) {
        struct tide_shape w = in_shape(c, 1);
        st = emit_conv(c, TIDE_OP_CONV2D_BACKPROP_FILTER, 1, "w", c->dy[0], in_edge(c, 0), &w);
    }
    return st;
}

/*
 * MaxPool2D(x) -> y, argmax. Only y is differentiable (argmax is int32);
 * MaxPool2DGrad routes dy to the cells the forward pass's argmax names, so
 * the gradient reads the saved indices, not x: whether they are kept,
 * swapped or made again from x is the planner's choice (swapper/).
 */
static enum tide_status tide__grad_max_pool2d(struct grad_ctx *c)
{
    struct tide_graph *graph = c->ad->graph;
    struct tide_attr_value ksize = *fwd_attr(c, TIDE_ATTR_MAX_POOL2D_ksize);
    struct tide_attr_value strides = *fwd_attr(c, TIDE_ATTR_MAX_POOL2D_strides);
    struct tide_attr_value pads = *fwd_attr(c, TIDE_ATTR_MAX_POOL2D_pads);
    struct tide_shape x = in_shape(c, 0);
    uint32_t id;
    assert(c->dy[1].node == TIDE_NO_NODE);
    enum tide_status st =
        emit2(c, TIDE_OP_MAX_POOL2D_GRAD, 0, "x", c->dy[0], (struct tide_edge){c->id, 1}, &id);
    if (st != TIDE_OK)
        return st;
    copy_ints(graph, id, TIDE_ATTR_MAX_POOL2D_GRAD_ksize, &ksize);
    copy_ints(graph, id, TIDE_ATTR_MAX_POOL2D_GRAD_strides, &strides);
    copy_ints(graph, id, TIDE_ATTR_MAX_POOL2D_GRAD_pads, &pads);
    tide_attr_set_shape(graph, id, TIDE_ATTR_MAX_POOL2D_GRAD_input_shape, &x);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

static enum tide_status tide__grad_avg_pool2d(struct grad_ctx *c)
{
    struct tide_graph *graph = c->ad->graph;
    struct tide_attr_value ksize = *fwd_attr(c, TIDE_ATTR_AVG_POOL2D_ksize);
    struct tide_attr_value strides = *fwd_attr(c, TIDE_ATTR_AVG_POOL2D_strides);
    struct tide_attr_value pads = *fwd_attr(c, TIDE_ATTR_AVG_POOL2D_pads);
    struct tide_shape x = in_shape(c, 0);
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_AVG_POOL2D_GRAD, 0, "x", c->dy[0], &id);
    if (st != TIDE_OK)
        return st;
    copy_ints(graph, id, TIDE_ATTR_AVG_POOL2D_GRAD_ksize, &ksize);
    copy_ints(graph, id, TIDE_ATTR_AVG_POOL2D_GRAD_strides, &strides);
    copy_ints(graph, id, TIDE_ATTR_AVG_POOL2D_GRAD_pads, &pads);
    tide_attr_set_shape(graph, id, TIDE_ATTR_AVG_POOL2D_GRAD_input_shape, &x);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

static enum tide_status tide__grad_global_avg_pool(struct grad_ctx *c)
{
    struct tide_shape x = in_shape(c, 0);
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_GLOBAL_AVG_POOL_GRAD, 0, "x", c->dy[0], &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_shape(c->ad->graph, id, TIDE_ATTR_GLOBAL_AVG_POOL_GRAD_input_shape, &x);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/*
 * BatchNorm(x, gamma, beta) -> y, mean, inv_std. Only y is differentiable:
 * analysis refuses a gradient at mean or inv_std, so dy[1] and dy[2] are
 * empty here. BatchNormGrad reuses the forward statistics.
 */
static enum tide_status tide__grad_batch_norm(struct grad_ctx *c)
{
    double epsilon = fwd_attr(c, TIDE_ATTR_BATCH_NORM_epsilon)->f;
    struct tide_edge in[5] = {c->dy[0], in_edge(c, 0), in_edge(c, 1), {c->id, 1}, {c->id, 2}};
    uint32_t id;
    assert(c->dy[1].node == TIDE_NO_NODE && c->dy[2].node == TIDE_NO_NODE);
    enum tide_status st = emit(c, TIDE_OP_BATCH_NORM_GRAD, -1, "backprop", in, 5, &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_float(c->ad->graph, id, TIDE_ATTR_BATCH_NORM_GRAD_epsilon, epsilon);
    for (uint32_t i = 0; i < 3; i++)
        c->dx[i] = (struct tide_edge){id, i};
    return TIDE_OK;
}

static enum tide_status tide__grad_neg(struct grad_ctx *c)
{
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_NEG, 0, "x", c->dy[0], &id);
    if (st == TIDE_OK)
        c->dx[0] = out0(id);
    return st;
}

static enum tide_status tide__grad_scale(struct grad_ctx *c)
{
    double scale = fwd_attr(c, TIDE_ATTR_SCALE_scale)->f;
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_SCALE, 0, "x", c->dy[0], &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_float(c->ad->graph, id, TIDE_ATTR_SCALE_scale, scale);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

static enum tide_status tide__grad_add_n(struct grad_ctx *c)
{
    uint32_t n = fwd(c)->n_inputs;
    for (uint32_t i = 0; i < n; i++)
        c->dx[i] = c->dy[0];
    return TIDE_OK;
}

/* ---- Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) ---- */

/* Exp: dx = dy * y, the forward output. */
static enum tide_status tide__grad_exp(struct grad_ctx *c)
{
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_MUL, 0, "x", c->dy[0], out0(c->id), &id);
    if (st == TIDE_OK)
        c->dx[0] = out0(id);
    return st;
}

/* Log: dx = dy / x. */
static enum tide_status tide__grad_log(struct grad_ctx *c)
{
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_DIV, 0, "x", c->dy[0], in_edge(c, 0), &id);
    if (st == TIDE_OK)
        c->dx[0] = out0(id);
    return st;
}

/* Sqrt: dx = 0.5 * (dy / y), y the forward output. */
static enum tide_status tide__grad_sqrt(struct grad_ctx *c)
{
    uint32_t quotient, id;
    enum tide_status st = emit2(c, TIDE_OP_DIV, -1, "dy_over_y", c->dy[0], out0(c->id), &quotient);
    if (st == TIDE_OK)
        st = emit1(c, TIDE_OP_SCALE, 0, "x", out0(quotient), &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_float(c->ad->graph, id, TIDE_ATTR_SCALE_scale, 0.5);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/* Erf: dx = dy * (2 / sqrt(pi)) * exp(-x^2). */
static enum tide_status tide__grad_erf(struct grad_ctx *c)
{
    uint32_t square, negated, gauss, scaled, id;
    enum tide_status st =
        emit2(c, TIDE_OP_MUL, -1, "x_squared", in_edge(c, 0), in_edge(c, 0), &square);
    if (st == TIDE_OK)
        st = emit1(c, TIDE_OP_NEG, -1, "minus_x_squared", out0(square), &negated);
    if (st == TIDE_OK)
        st = emit1(c, TIDE_OP_EXP, -1, "gauss", out0(negated), &gauss);
    if (st == TIDE_OK)
        st = emit1(c, TIDE_OP_SCALE, -1, "derivative", out0(gauss), &scaled);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_float(c->ad->graph, scaled, TIDE_ATTR_SCALE_scale, 1.1283791670955126);
    st = emit2(c, TIDE_OP_MUL, 0, "x", c->dy[0], out0(scaled), &id);
    if (st == TIDE_OK)
        c->dx[0] = out0(id);
    return st;
}

/* Trig: dx = TrigGrad(dy, x; fn), dy times fn's derivative at x (kernels/trig.h). */
static enum tide_status tide__grad_trig(struct grad_ctx *c)
{
    int64_t fn = fwd_attr(c, TIDE_ATTR_TRIG_fn)->i; /* checked by infer */
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_TRIG_GRAD, 0, "x", c->dy[0], in_edge(c, 0), &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_int(c->ad->graph, id, TIDE_ATTR_TRIG_GRAD_fn, fn);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

static enum tide_status tide__grad_gelu(struct grad_ctx *c)
{
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_GELU_GRAD, 0, "x", c->dy[0], in_edge(c, 0), &id);
    if (st == TIDE_OK)
        c->dx[0] = out0(id);
    return st;
}

/*
 * y = a / b: da = dy / b and db = -(dy * y) / b = -dy * a / b^2, each summed
 * to its input's shape; db is summed before it is negated, the smaller tensor.
 */
static enum tide_status tide__grad_div(struct grad_ctx *c)
{
    struct tide_edge b = in_edge(c, 1);
    enum tide_status st = TIDE_OK;
    uint32_t id;
    if (c->wanted[0]) {
        bool reduce = was_broadcast(c, 0);
        st = emit2(c, TIDE_OP_DIV, reduce ? -1 : 0, reduce ? "a_full" : "a", c->dy[0], b, &id);
        if (st == TIDE_OK)
            st = sum_to_input(c, 0, out0(id), true, "a", &c->dx[0]);
    }
    if (st == TIDE_OK && c->wanted[1]) {
        uint32_t product, quotient;
        struct tide_edge summed;
        st = emit2(c, TIDE_OP_MUL, -1, "dy_y", c->dy[0], out0(c->id), &product);
        if (st == TIDE_OK)
            st = emit2(c, TIDE_OP_DIV, -1, "b_full", out0(product), b, &quotient);
        if (st == TIDE_OK)
            st = sum_to_input(c, 1, out0(quotient), false, "b_sum", &summed);
        if (st == TIDE_OK)
            st = emit1(c, TIDE_OP_NEG, 1, "b", summed, &id);
        if (st == TIDE_OK)
            c->dx[1] = out0(id);
    }
    return st;
}

/*
 * Max and Min: helper op (MaxGrad or MinGrad) routes dy to the input that
 * was selected, input 0 on ties; each part is then summed to its input's
 * shape. Pow's helper (PowGrad) makes its two parts the same way.
 */
static enum tide_status grad_select(struct grad_ctx *c, enum tide_op helper)
{
    static const char *const roles[2] = {"a", "b"};
    struct tide_edge in[3] = {in_edge(c, 0), in_edge(c, 1), c->dy[0]};
    uint32_t id;
    enum tide_status st = emit(c, helper, -1, "select", in, 3, &id);
    for (uint32_t i = 0; st == TIDE_OK && i < 2; i++) {
        if (c->wanted[i])
            st = sum_to_input(c, i, (struct tide_edge){id, i}, true, roles[i], &c->dx[i]);
    }
    return st;
}

static enum tide_status tide__grad_max(struct grad_ctx *c)
{
    return grad_select(c, TIDE_OP_MAX_GRAD);
}

static enum tide_status tide__grad_min(struct grad_ctx *c)
{
    return grad_select(c, TIDE_OP_MIN_GRAD);
}

/*
 * Pow, y = a^b: PowGrad(a, b, dy) gives da = dy * b * a^(b - 1) and
 * db = dy * y * log(a) at the broadcast shape, with PyTorch's masks (da 0
 * where b == 0; db dy * 0 where a == 0 and b >= 0: kernels/pow.h), each
 * summed to its input's shape as MaxGrad's parts are.
 */
static enum tide_status tide__grad_pow(struct grad_ctx *c)
{
    return grad_select(c, TIDE_OP_POW_GRAD);
}

/* ---- Masks: Cast, Compare, Select ---- */

/*
 * Cast: only float32 -> float32 gets here (input_differentiable keeps a
 * Cast to int32 off every path, and an int32 input wants nothing), and that
 * is the identity.
 */
static enum tide_status tide__grad_cast(struct grad_ctx *c)
{
    assert(fwd_attr(c, TIDE_ATTR_CAST_to)->i == TIDE_DTYPE_FLOAT32);
    c->dx[0] = c->dy[0];
    return TIDE_OK;
}

/*
 * Select(cond, x, y): x gets dy where cond holds, y where it does not:
 * Select(cond, dy, 0) and Select(cond, 0, dy), 0 a scalar Const that
 * broadcasts, each summed to its input's shape. cond gets none.
 */
static enum tide_status tide__grad_select(struct grad_ctx *c)
{
    static const char *const roles[3] = {"cond", "x", "y"};
    static const char *const full_roles[3] = {"cond_full", "x_full", "y_full"};
    assert(!c->wanted[0]);
    uint32_t zero;
    enum tide_status st = emit(c, TIDE_OP_CONST, -1, "zero", NULL, 0, &zero);
    if (st != TIDE_OK)
        return st;
    const float value = 0.0f;
    const struct tide_shape scalar = {0};
    if (tide_attr_set_tensor(c->ad->graph, zero, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32, &scalar,
                             &value, sizeof(value)) != TIDE_OK)
        return tide_error_set(c->ad->err, TIDE_NOMEM, "out of memory differentiating \"%s\"",
                              fwd(c)->name);
    for (uint32_t i = 1; st == TIDE_OK && i < 3; i++) {
        if (!c->wanted[i])
            continue;
        bool reduce = was_broadcast(c, i);
        struct tide_edge in[3] = {in_edge(c, 0), c->dy[0], out0(zero)};
        if (i == 2) {
            in[1] = out0(zero);
            in[2] = c->dy[0];
        }
        uint32_t id;
        st = emit(c, TIDE_OP_SELECT, reduce ? -1 : (int)i, reduce ? full_roles[i] : roles[i], in, 3,
                  &id);
        if (st == TIDE_OK)
            st = sum_to_input(c, i, out0(id), true, roles[i], &c->dx[i]);
    }
    return st;
}

/* ---- Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose) ---- */

/*
 * Whether input i of BatchMatMul has fewer batch entries than the output:
 * its batch dims (all but the last two) differ from the output's, so the
 * product that makes its gradient, whose batch dims are the output's, must
 * be summed back to its shape.
 */
static bool batch_broadcast(const struct grad_ctx *c, uint32_t i)
{
    struct tide_shape x = in_shape(c, i), y = out_shape(c, 0);
    if (x.rank != y.rank)
        return true;
    for (int32_t d = 0; d < x.rank - 2; d++) {
        if (x.dims[d] != y.dims[d])
            return true;
    }
    return false;
}

/*
 * dx[i] = BatchMatMul(first, second; transpose_a = ta, transpose_b = tb),
 * summed to input i's shape (SumToShape) where input i's batch dims were
 * broadcast.
 */
static enum tide_status batch_matmul_into(struct grad_ctx *c, uint32_t i, const char *role,
                                          struct tide_edge first, struct tide_edge second, bool ta,
                                          bool tb)
{
    bool reduce = batch_broadcast(c, i);
    char full_role[16];
    snprintf(full_role, sizeof(full_role), "%s_full", role);
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_BATCH_MATMUL, reduce ? -1 : (int)i,
                                reduce ? full_role : role, first, second, &id);
    if (st != TIDE_OK)
        return st;
    if (ta)
        tide_attr_set_bool(c->ad->graph, id, TIDE_ATTR_BATCH_MATMUL_transpose_a, true);
    if (tb)
        tide_attr_set_bool(c->ad->graph, id, TIDE_ATTR_BATCH_MATMUL_transpose_b, true);
    c->dx[i] = out0(id);
    if (!reduce)
        return TIDE_OK;
    struct tide_shape x = in_shape(c, i);
    st = emit1(c, TIDE_OP_SUM_TO_SHAPE, (int)i, role, out0(id), &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_shape(c->ad->graph, id, TIDE_ATTR_SUM_TO_SHAPE_shape, &x);
    c->dx[i] = out0(id);
    return TIDE_OK;
}

/* Appends Reshape(x) to the rows of a matrix, [rows, cols]. */
static enum tide_status rows_of(struct grad_ctx *c, const char *role, struct tide_edge x,
                                int64_t rows, int64_t cols, struct tide_edge *out)
{
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_RESHAPE, -1, role, x, &id);
    if (st != TIDE_OK)
        return st;
    const int64_t dims[2] = {rows, cols};
    tide_attr_set_ints(c->ad->graph, id, TIDE_ATTR_RESHAPE_shape, dims, 2);
    *out = out0(id);
    return TIDE_OK;
}

/*
 * The gradient of a rank-2 b (a weight) under a batched a [..., M, K] that
 * is not transposed: the sum over the batch of a_p^T dy_p is one product of
 * a and dy seen as [P * M, K] and [P * M, N] (P the batch entries), so no
 * [P, K, N] tensor of per-entry products is made only to be summed away.
 */
static enum tide_status batch_matmul_weight_grad(struct grad_ctx *c, int64_t rows, bool tb)
{
    struct tide_shape a = in_shape(c, 0), y = out_shape(c, 0);
    struct tide_edge a_rows, dy_rows;
    enum tide_status st = rows_of(c, "a_rows", in_edge(c, 0), rows, a.dims[a.rank - 1], &a_rows);
    if (st == TIDE_OK)
        st = rows_of(c, "dy_rows", c->dy[0], rows, y.dims[y.rank - 1], &dy_rows);
    if (st != TIDE_OK)
        return st;
    /* b [K, N]: db = a_rows^T dy_rows. b [N, K]: db = dy_rows^T a_rows. */
    return tb ? matmul_into(c, 1, "b", dy_rows, a_rows, true, false)
              : matmul_into(c, 1, "b", a_rows, dy_rows, true, false);
}

/*
 * Y = op(A) op(B) per batch entry, as MatMul (tide__grad_matmul) with the
 * same four forms:
 *   A B:      dA = dY B^T         dB = A^T dY
 *   A B^T:    dA = dY B           dB = dY^T A
 *   A^T B:    dA = B dY^T         dB = A dY
 *   A^T B^T:  dA = B^T dY^T       dB = dY^T A^T
 * Each product has the output's batch dims; an input whose batch dims were
 * broadcast gets it summed back to its shape.
 */
static enum tide_status tide__grad_batch_matmul(struct grad_ctx *c)
{
    bool ta = fwd_attr(c, TIDE_ATTR_BATCH_MATMUL_transpose_a)->b;
    bool tb = fwd_attr(c, TIDE_ATTR_BATCH_MATMUL_transpose_b)->b;
    struct tide_edge a = in_edge(c, 0), b = in_edge(c, 1), dy = c->dy[0];
    enum tide_status st = TIDE_OK;
    if (c->wanted[0]) {
        if (!ta)
            st = batch_matmul_into(c, 0, "a", dy, b, false, !tb);
        else if (!tb)
            st = batch_matmul_into(c, 0, "a", b, dy, false, true);
        else
            st = batch_matmul_into(c, 0, "a", b, dy, true, true);
    }
    if (st != TIDE_OK || !c->wanted[1])
        return st;
    struct tide_shape as = in_shape(c, 0);
    int64_t rows = 1; /* P * M: a's dims but the last (it may overflow only when a is empty) */
    bool rows_fit = true;
    for (int32_t d = 0; d < as.rank - 1; d++)
        rows_fit = rows_fit && !__builtin_mul_overflow(rows, as.dims[d], &rows);
    if (!ta && rows_fit && in_shape(c, 1).rank == 2 && as.rank > 2)
        return batch_matmul_weight_grad(c, rows, tb);
    if (!tb)
        return ta ? batch_matmul_into(c, 1, "b", a, dy, false, false)
                  : batch_matmul_into(c, 1, "b", a, dy, true, false);
    return ta ? batch_matmul_into(c, 1, "b", dy, a, true, true)
              : batch_matmul_into(c, 1, "b", dy, a, true, false);
}

/* The gradient of Transpose(perm) is Transpose by the inverse permutation. */
static enum tide_status tide__grad_transpose(struct grad_ctx *c)
{
    const struct tide_attr_value *perm = fwd_attr(c, TIDE_ATTR_TRANSPOSE_perm);
    int64_t inverse[TIDE_MAX_RANK];
    for (int32_t i = 0; i < perm->ints.n; i++) /* a permutation, checked by infer */
        inverse[perm->ints.v[i]] = i;
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_TRANSPOSE, 0, "x", c->dy[0], &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_ints(c->ad->graph, id, TIDE_ATTR_TRANSPOSE_perm, inverse, perm->ints.n);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/* ---- Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing) ---- */

/* Gather(table, ids): the table's gradient scatter-adds dy into its rows; ids (int32) get none. */
static enum tide_status tide__grad_gather(struct grad_ctx *c)
{
    struct tide_shape table = in_shape(c, 0);
    uint32_t id;
    enum tide_status st = emit2(c, TIDE_OP_GATHER_GRAD, 0, "table", c->dy[0], in_edge(c, 1), &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_int(c->ad->graph, id, TIDE_ATTR_GATHER_GRAD_num_rows, table.dims[0]);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/*
 * GatherElements(data, indices): data's gradient adds dy at the elements read
 * (GatherElementsGrad, with the forward's axis and ignore_index); indices
 * (int32) get none.
 */
static enum tide_status tide__grad_gather_elements(struct grad_ctx *c)
{
    struct tide_shape data = in_shape(c, 0);
    uint32_t id;
    enum tide_status st =
        emit2(c, TIDE_OP_GATHER_ELEMENTS_GRAD, 0, "data", c->dy[0], in_edge(c, 1), &id);
    if (st != TIDE_OK)
        return st;
    struct tide_graph *graph = c->ad->graph;
    tide_attr_set_int(graph, id, TIDE_ATTR_GATHER_ELEMENTS_GRAD_axis,
                      fwd_attr(c, TIDE_ATTR_GATHER_ELEMENTS_axis)->i);
    tide_attr_set_int(graph, id, TIDE_ATTR_GATHER_ELEMENTS_GRAD_ignore_index,
                      fwd_attr(c, TIDE_ATTR_GATHER_ELEMENTS_ignore_index)->i);
    tide_attr_set_shape(graph, id, TIDE_ATTR_GATHER_ELEMENTS_GRAD_shape, &data);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/*
 * TopK(x) -> values, indices. Only values is differentiable; indices are
 * int32, so analysis never sends a gradient there. TopKGrad places dvalues
 * at the chosen indices of zeros of x's shape.
 */
static enum tide_status tide__grad_top_k(struct grad_ctx *c)
{
    struct tide_shape x = in_shape(c, 0);
    uint32_t id;
    assert(c->dy[1].node == TIDE_NO_NODE);
    enum tide_status st =
        emit2(c, TIDE_OP_TOP_K_GRAD, 0, "x", c->dy[0], (struct tide_edge){c->id, 1}, &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_shape(c->ad->graph, id, TIDE_ATTR_TOP_K_GRAD_shape, &x);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/* ---- Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout) ---- */

/*
 * LayerNorm(x, gain, bias) -> y, mean, inv_std. As BatchNorm: only y is
 * differentiable (analysis refuses a gradient at the statistics), and
 * LayerNormGrad reuses the forward statistics.
 */
static enum tide_status tide__grad_layer_norm(struct grad_ctx *c)
{
    struct tide_edge in[5] = {c->dy[0], in_edge(c, 0), in_edge(c, 1), {c->id, 1}, {c->id, 2}};
    uint32_t id;
    assert(c->dy[1].node == TIDE_NO_NODE && c->dy[2].node == TIDE_NO_NODE);
    enum tide_status st = emit(c, TIDE_OP_LAYER_NORM_GRAD, -1, "backprop", in, 5, &id);
    if (st != TIDE_OK)
        return st;
    for (uint32_t i = 0; i < 3; i++)
        c->dx[i] = (struct tide_edge){id, i};
    return TIDE_OK;
}

/*
 * Dropout: dx = dy * mask / (1 - rate), with the forward node's mask, which
 * DropoutGrad regenerates from the forward node's name, seed and rate (and
 * the step's key) instead of keeping it.
 */
static enum tide_status tide__grad_dropout(struct grad_ctx *c)
{
    double rate = fwd_attr(c, TIDE_ATTR_DROPOUT_rate)->f;
    int64_t seed = fwd_attr(c, TIDE_ATTR_DROPOUT_seed)->i;
    uint32_t id;
    enum tide_status st = emit1(c, TIDE_OP_DROPOUT_GRAD, 0, "x", c->dy[0], &id);
    if (st == TIDE_OK)
        st = tide_attr_set_string(c->ad->graph, id, TIDE_ATTR_DROPOUT_GRAD_forward, fwd(c)->name);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_float(c->ad->graph, id, TIDE_ATTR_DROPOUT_GRAD_rate, rate);
    tide_attr_set_int(c->ad->graph, id, TIDE_ATTR_DROPOUT_GRAD_seed, seed);
    c->dx[0] = out0(id);
    return TIDE_OK;
}

/* ---- Sequence-model ops: fused attention (Attention) ---- */

/*
 * Attention: one AttentionGrad(q, k, v, o, lse, do) gives dq, dk and dv; it
 * recomputes the score blocks from q, k and lse rather than keeping them.
 * Only o is differentiable: analysis refuses a gradient at lse, so dy[1] is
 * empty here.
 */
static enum tide_status tide__grad_attention(struct grad_ctx *c)
{
    bool causal = fwd_attr(c, TIDE_ATTR_ATTENTION_causal)->b;
    double scale = fwd_attr(c, TIDE_ATTR_ATTENTION_scale)->f;
    struct tide_edge in[6] = {in_edge(c, 0), in_edge(c, 1), in_edge(c, 2),
                              {c->id, 0},    {c->id, 1},    c->dy[0]};
    uint32_t id;
    assert(c->dy[1].node == TIDE_NO_NODE);
    enum tide_status st = emit(c, TIDE_OP_ATTENTION_GRAD, -1, "backprop", in, 6, &id);
    if (st != TIDE_OK)
        return st;
    tide_attr_set_bool(c->ad->graph, id, TIDE_ATTR_ATTENTION_GRAD_causal, causal);
    tide_attr_set_float(c->ad->graph, id, TIDE_ATTR_ATTENTION_GRAD_scale, scale);
    for (uint32_t i = 0; i < 3; i++)
        c->dx[i] = (struct tide_edge){id, i};
    return TIDE_OK;
}

/* The GRAD column of ops.def; `none` (not differentiable) becomes NULL. */
#define tide__grad_none NULL
static const grad_fn grad_table[TIDE_OP_COUNT] = {
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS)                        \
    [TIDE_OP_##ID] = tide__grad_##GRAD,
#include "graph/ops.def"
#undef TIDE_OP
};
#undef tide__grad_none

/* ============================================================================
 * Analysis
 * ========================================================================== */

static void autodiff_release(struct autodiff *ad)
{
    free(ad->order);
    free(ad->slot_base);
    free(ad->dep);
    free(ad->reaches);
    free(ad->on_path);
    free(ad->count);
    free(ad->first);
    free(ad->filled);
    free(ad->contribs);
    free(ad->sum);
    free(ad->summed);
    if (ad->final_name) {
        for (uint32_t s = 0; s < ad->n_slots; s++)
            free(ad->final_name[s]);
    }
    free(ad->final_name);
    free(ad->reserved.slots);
    free(ad->wanted);
    free(ad->dx);
    free(ad->hint);
}

static enum tide_status nomem(struct autodiff *ad)
{
    return tide_error_set(ad->err, TIDE_NOMEM, "out of memory differentiating %u nodes",
                          ad->n_forward);
}

static const char *wrt_name(const struct autodiff *ad, uint32_t dep)
{
    return ad->graph->nodes[ad->wrt[dep - 1].node].name;
}

/*
 * Sets up ad for differentiating loss with respect to wrt[0..n_wrt) (edges
 * already checked) and runs the analysis described at the top of the file.
 */
static enum tide_status analyse(struct autodiff *ad)
{
    struct tide_graph *graph = ad->graph;
    uint32_t n = ad->n_forward;
    size_t n1 = (size_t)n + 1;
    ad->order = malloc(n1 * sizeof(*ad->order));
    ad->slot_base = calloc(n1, sizeof(*ad->slot_base));
    ad->reaches = calloc(n1, 1);
    ad->on_path = calloc(n1, 1);
    if (!ad->order || !ad->slot_base || !ad->reaches || !ad->on_path)
        return nomem(ad);
    uint32_t max_inputs = 1;
    for (uint32_t v = 0; v < n; v++) {
        ad->slot_base[v + 1] = ad->slot_base[v] + graph->nodes[v].n_outputs;
        if (graph->nodes[v].n_inputs > max_inputs)
            max_inputs = graph->nodes[v].n_inputs;
    }
    ad->n_slots = ad->slot_base[n];
    size_t s1 = (size_t)ad->n_slots + 1;
    ad->dep = calloc(s1, sizeof(*ad->dep));
    ad->count = calloc(s1, sizeof(*ad->count));
    ad->first = calloc(s1, sizeof(*ad->first));
    ad->filled = calloc(s1, sizeof(*ad->filled));
    ad->sum = malloc(s1 * sizeof(*ad->sum));
    ad->summed = calloc(s1, 1);
    ad->final_name = calloc(s1, sizeof(*ad->final_name));
    ad->wanted = calloc(max_inputs, 1);
    ad->dx = calloc(max_inputs, sizeof(*ad->dx));
    ad->hint = calloc(max_inputs, sizeof(*ad->hint));
    if (!ad->dep || !ad->count || !ad->first || !ad->filled || !ad->sum || !ad->summed ||
        !ad->final_name || !ad->wanted || !ad->dx || !ad->hint)
        return nomem(ad);
    for (uint32_t s = 0; s < ad->n_slots; s++)
        ad->sum[s] = no_edge;

    enum tide_status st = tide_graph_topo_order(graph, ad->order, ad->err);
    if (st != TIDE_OK)
        return st;

    /* Which slots depend on which wrt edge (the first, for messages). */
    for (uint32_t i = 0; i < ad->n_wrt; i++) {
        uint32_t s = slot_of(ad, ad->wrt[i]);
        if (ad->dep[s] == 0)
            ad->dep[s] = i + 1;
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t v = ad->order[j];
        const struct tide_node *node = &graph->nodes[v];
        uint32_t d = 0;
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            if (input_wanted(ad, v, i)) {
                uint32_t di = ad->dep[slot_of(ad, node->inputs[i])];
                if (d == 0 || di < d)
                    d = di;
            }
        }
        for (uint32_t k = 0; d && k < node->n_outputs; k++) {
            uint32_t s = ad->slot_base[v] + k;
            if (node->outputs[k].dtype == TIDE_DTYPE_FLOAT32 && (ad->dep[s] == 0 || d < ad->dep[s]))
                ad->dep[s] = d;
        }
    }

    /* Which nodes reach the loss; which run their gradient; how many contributions per slot. */
    ad->reaches[ad->loss.node] = 1;
    for (uint32_t j = n; j-- > 0;) {
        uint32_t v = ad->order[j];
        const struct tide_node *node = &graph->nodes[v];
        if (!ad->reaches[v])
            continue;
        for (uint32_t i = 0; i < node->n_inputs; i++)
            ad->reaches[node->inputs[i].node] = 1;
        for (uint32_t i = 0; i < node->n_inputs; i++) {
            if (input_wanted(ad, v, i)) {
                ad->on_path[v] = 1;
                ad->count[slot_of(ad, node->inputs[i])]++;
            }
        }
    }
    ad->count[slot_of(ad, ad->loss)]++; /* the seed */

    /* Refusals: an op without a gradient, a gradient where its op has none. */
    for (uint32_t j = n; j-- > 0;) {
        uint32_t v = ad->order[j];
        const struct tide_node *node = &graph->nodes[v];
        if (!ad->on_path[v])
            continue;
        uint32_t d = 0;
        for (uint32_t i = 0; i < node->n_inputs && !d; i++) {
            if (input_wanted(ad, v, i))
                d = ad->dep[slot_of(ad, node->inputs[i])];
        }
        if (!grad_table[node->op])
            return tide_node_error(ad->err, TIDE_UNSUPPORTED, node,
                                   "has no gradient, but lies on a path from \"%s\" to the loss "
                                   "\"%s\"",
                                   wrt_name(ad, d), ad->loss_text);
        if (node->op == TIDE_OP_BATCH_NORM || node->op == TIDE_OP_LAYER_NORM) {
            static const char *const outputs[3] = {"y", "mean", "inv_std"};
            for (uint32_t k = 1; k < 3; k++) {
                if (ad->count[ad->slot_base[v] + k])
                    return tide_node_error(ad->err, TIDE_UNSUPPORTED, node,
                                           "the loss \"%s\" depends on output %" PRIu32
                                           " (%s), which has no gradient; only output 0 (y) "
                                           "is differentiable",
                                           ad->loss_text, k, outputs[k]);
            }
        }
        if (node->op == TIDE_OP_ATTENTION && ad->count[ad->slot_base[v] + 1])
            return tide_node_error(ad->err, TIDE_UNSUPPORTED, node,
                                   "the loss \"%s\" depends on output 1 (lse), which has no "
                                   "gradient; only output 0 (o) is differentiable",
                                   ad->loss_text);
    }

    /* Where each slot's contributions go. */
    for (uint32_t s = 0; s < ad->n_slots; s++)
        ad->first[s + 1] = ad->first[s] + ad->count[s];
    ad->contribs = malloc(((size_t)ad->first[ad->n_slots] + 1) * sizeof(*ad->contribs));
    if (!ad->contribs)
        return nomem(ad);

    /* Reserve the name of each reachable wrt edge's gradient. */
    uint32_t cap = 16;
    while (cap < 2 * ad->n_wrt + 2)
        cap *= 2;
    ad->reserved.slots = calloc(cap, sizeof(*ad->reserved.slots));
    if (!ad->reserved.slots)
        return nomem(ad);
    ad->reserved.cap = cap;
    for (uint32_t i = 0; i < ad->n_wrt; i++) {
        uint32_t s = slot_of(ad, ad->wrt[i]);
        if (ad->final_name[s] || ad->count[s] == 0)
            continue;
        char name[TIDE_MAX_NAME + 1];
        st = slot_name(ad, ad->wrt[i], name);
        if (st != TIDE_OK)
            return st;
        ad->final_name[s] = strdup(name);
        if (!ad->final_name[s])
            return nomem(ad);
        name_set_insert(&ad->reserved, ad->final_name[s]);
    }
    return TIDE_OK;
}

/* ============================================================================
 * Emission
 * ========================================================================== */

/*
 * The most contributions one AddN sums. A slot with more (a weight that every
 * step of an unrolled RNN reads gets one per step) is summed as they come:
 * each full group becomes an AddN ("grad/<u>/partial"), which is the first
 * term of the next group, and the last group's AddN is the slot's gradient.
 * Each contribution then dies soon after it is made instead of waiting for
 * the last one, and no node's working set grows with the number of readers
 * (it would set the plan's floor: 210 steps of an LSTM of 128 make an AddN
 * of 64 MiB). AddN adds in input order, so the sum is the same bit for bit.
 */
#define SUM_FAN_IN 8

/*
 * Adds a contribution to target's gradient; when it fills a group of
 * SUM_FAN_IN and more are to come, sums the group. count[s] then counts the
 * group's sum as one contribution, so it never falls to 1 (which would make
 * a later contribution take the slot's reserved name).
 */
static enum tide_status contribute(struct autodiff *ad, struct tide_edge target,
                                   struct tide_edge gradient)
{
    uint32_t s = slot_of(ad, target);
    if (ad->filled[s] >= ad->count[s])
        return tide_error_set(ad->err, TIDE_INTERNAL,
                              "gradient of \"%s\" output %" PRIu32 " got more contributions than "
                              "the %" PRIu32 " expected",
                              ad->graph->nodes[target.node].name, target.output, ad->count[s]);
    ad->contribs[ad->first[s] + ad->filled[s]++] = gradient;
    if (ad->filled[s] < SUM_FAN_IN || ad->count[s] <= SUM_FAN_IN)
        return TIDE_OK;
    char name[TIDE_MAX_NAME + 1];
    const char *u = ad->graph->nodes[target.node].name;
    enum tide_status st = target.output == 0 ? make_name(ad, name, "grad/%s/partial", u)
                                             : make_name(ad, name, "grad/%s/out%" PRIu32 "/partial",
                                                         u, target.output);
    uint32_t id;
    if (st == TIDE_OK)
        st = append(ad, TIDE_OP_ADD_N, name, &ad->contribs[ad->first[s]], SUM_FAN_IN, &id);
    if (st != TIDE_OK)
        return st;
    ad->contribs[ad->first[s]] = out0(id);
    ad->filled[s] = 1;
    ad->count[s] -= SUM_FAN_IN - 1;
    return TIDE_OK;
}

/*
 * The gradient of a slot, summed once its contributions are all in: none,
 * the one contribution, or AddN of them. A wrt slot's gradient is a node
 * with its reserved name; an Identity carries the name when the one
 * contribution is not already such a node.
 */
static enum tide_status slot_gradient(struct autodiff *ad, struct tide_edge e,
                                      struct tide_edge *out)
{
    uint32_t s = slot_of(ad, e);
    if (ad->summed[s]) {
        *out = ad->sum[s];
        return TIDE_OK;
    }
    uint32_t n = ad->filled[s];
    const char *reserved = ad->final_name[s];
    struct tide_edge g = no_edge;
    enum tide_status st = TIDE_OK;
    if (n == 1) {
        g = ad->contribs[ad->first[s]];
        if (reserved && (g.output != 0 || strcmp(ad->graph->nodes[g.node].name, reserved) != 0)) {
            uint32_t id;
            st = append(ad, TIDE_OP_IDENTITY, reserved, &g, 1, &id);
            g = out0(id);
        }
    } else if (n > 1) {
        char name[TIDE_MAX_NAME + 1];
        if (reserved)
            snprintf(name, sizeof(name), "%s", reserved);
        else
            st = slot_name(ad, e, name);
        uint32_t id = TIDE_NO_NODE;
        if (st == TIDE_OK)
            st = append(ad, TIDE_OP_ADD_N, name, &ad->contribs[ad->first[s]], n, &id);
        g = out0(id);
    }
    if (st != TIDE_OK)
        return st;
    ad->sum[s] = g;
    ad->summed[s] = 1;
    *out = g;
    return TIDE_OK;
}

/* Makes the seed, dL/dL = 1, and contributes it to the loss slot. */
static enum tide_status seed(struct autodiff *ad)
{
    uint32_t s = slot_of(ad, ad->loss);
    char name[TIDE_MAX_NAME + 1];
    enum tide_status st = TIDE_OK;
    if (ad->final_name[s] && ad->count[s] == 1)
        snprintf(name, sizeof(name), "%s", ad->final_name[s]);
    else
        st = make_name(ad, name, "grad/%s/seed", ad->graph->nodes[ad->loss.node].name);
    uint32_t id;
    if (st == TIDE_OK)
        st = append(ad, TIDE_OP_CONST, name, NULL, 0, &id);
    if (st != TIDE_OK)
        return st;
    const float one = 1.0f;
    const struct tide_shape scalar = {0};
    if (tide_attr_set_tensor(ad->graph, id, TIDE_ATTR_CONST_value, TIDE_DTYPE_FLOAT32, &scalar,
                             &one, sizeof(one)) != TIDE_OK)
        return nomem(ad);
    return contribute(ad, ad->loss, out0(id));
}

/*
 * The products a node's gradient made (nodes first_new onward with a "math"
 * attribute: the convolution's two gradients, MatMuls, BatchMatMuls) use the
 * math the node sets explicitly, so that a Conv2D marked tf32 trains in tf32.
 */
static enum tide_status inherit_math(struct tide_graph *graph, uint32_t v, uint32_t first_new)
{
    int k = tide_op_math_attr(graph->nodes[v].op);
    if (k < 0 || !graph->nodes[v].attrs[k].present)
        return TIDE_OK;
    const char *math = graph->nodes[v].attrs[k].s; /* in the graph's arena: stays put */
    for (uint32_t id = first_new; id < graph->n_nodes; id++) {
        int kn = tide_op_math_attr(graph->nodes[id].op);
        if (kn < 0 || graph->nodes[id].attrs[kn].present)
            continue;
        enum tide_status st = tide_attr_set_string(graph, id, kn, math);
        if (st != TIDE_OK)
            return st;
    }
    return TIDE_OK;
}

/* Runs forward node v's gradient function and hands its results to the slots it read. */
static enum tide_status backprop_node(struct autodiff *ad, uint32_t v)
{
    uint32_t n_inputs = ad->graph->nodes[v].n_inputs;
    uint32_t n_outputs = ad->graph->nodes[v].n_outputs;
    bool any = false;
    for (uint32_t k = 0; k < n_outputs; k++) {
        struct tide_edge dy;
        enum tide_status st = slot_gradient(ad, (struct tide_edge){v, k}, &dy);
        if (st != TIDE_OK)
            return st;
        any = any || dy.node != TIDE_NO_NODE;
    }
    if (!any)
        return TIDE_OK;
    for (uint32_t i = 0; i < n_inputs; i++) {
        struct tide_edge e = ad->graph->nodes[v].inputs[i];
        uint32_t s = slot_of(ad, e);
        ad->wanted[i] = input_wanted(ad, v, i);
        ad->dx[i] = no_edge;
        /* Only the one contribution of a wrt slot may take its reserved name. */
        ad->hint[i] = ad->wanted[i] && ad->count[s] == 1 ? ad->final_name[s] : NULL;
    }
    struct grad_ctx c = {
        .ad = ad,
        .id = v,
        .dy = &ad->sum[ad->slot_base[v]],
        .wanted = ad->wanted,
        .dx = ad->dx,
        .hint = ad->hint,
    };
    uint32_t first_new = ad->graph->n_nodes;
    enum tide_status st = grad_table[ad->graph->nodes[v].op](&c);
    if (st == TIDE_OK && inherit_math(ad->graph, v, first_new) != TIDE_OK)
        return nomem(ad);
    for (uint32_t i = 0; st == TIDE_OK && i < n_inputs; i++) {
        if (!ad->wanted[i])
            continue;
        if (ad->dx[i].node == TIDE_NO_NODE)
            return tide_node_error(ad->err, TIDE_INTERNAL, &ad->graph->nodes[v],
                                   "gradient function made no gradient for input %" PRIu32, i);
        st = contribute(ad, ad->graph->nodes[v].inputs[i], ad->dx[i]);
    }
    return st;
}

/*
 * Differentiates ad->loss with respect to ad->wrt: grads[i] gets wrt[i]'s
 * gradient, or node TIDE_NO_NODE when wrt[i] does not reach the loss. The
 * caller has set graph, err, n_forward, loss, loss_text, wrt and n_wrt, and
 * releases ad. Does not re-infer.
 */
static enum tide_status differentiate(struct autodiff *ad, struct tide_edge *grads,
                                      uint32_t *n_reached)
{
    enum tide_status st = analyse(ad);
    if (st != TIDE_OK)
        return st;
    *n_reached = 0;
    for (uint32_t i = 0; i < ad->n_wrt; i++) {
        if (ad->count[slot_of(ad, ad->wrt[i])])
            (*n_reached)++;
    }
    if (*n_reached == 0)
        return TIDE_OK;

    st = seed(ad);
    for (uint32_t j = ad->n_forward; st == TIDE_OK && j-- > 0;) {
        uint32_t v = ad->order[j];
        if (ad->on_path[v])
            st = backprop_node(ad, v);
    }
    for (uint32_t i = 0; st == TIDE_OK && i < ad->n_wrt; i++)
        st = slot_gradient(ad, ad->wrt[i], &grads[i]);
    return st;
}

/* ============================================================================
 * Entry points
 * ========================================================================== */

/* Resolves "node" or "node:k" to an edge, checking that it is a float32 scalar. */
static enum tide_status resolve_loss(struct tide_graph *graph, const char *text,
                                     struct tide_edge *out, struct tide_error *err)
{
    char name[TIDE_MAX_NAME + 1];
    uint32_t k;
    struct tide_error perr;
    if (tide_graph_parse_ref(text, name, &k, &perr) != TIDE_OK) {
        if (!strchr(text, ':')) /* an empty or too long name: no node has it */
            return tide_error_set(err, TIDE_NOT_FOUND, "loss \"%.300s\" is not a node of the graph",
                                  text);
        return tide_error_set(err, TIDE_INVALID, "loss %s", perr.message);
    }
    uint32_t id = tide_graph_find(graph, name);
    if (id == TIDE_NO_NODE)
        return tide_error_set(err, TIDE_NOT_FOUND, "loss \"%.300s\" is not a node of the graph",
                              text);
    const struct tide_node *node = &graph->nodes[id];
    if (k >= node->n_outputs)
        return tide_node_error(err, TIDE_INVALID, node,
                               "the loss \"%.300s\" names output %" PRIu32
                               ", but the node has %" PRIu32 " output%s",
                               text, k, node->n_outputs, node->n_outputs == 1 ? "" : "s");
    const struct tide_output *o = &node->outputs[k];
    if (o->dtype != TIDE_DTYPE_FLOAT32 || o->shape.rank != 0) {
        char shape[160];
        return tide_node_error(err, TIDE_INVALID, node,
                               "the loss \"%.300s\" is %s of shape %s, wants a float32 scalar "
                               "(shape [])",
                               text, tide_dtype_name(o->dtype),
                               tide_shape_format(&o->shape, shape, sizeof(shape)));
    }
    *out = (struct tide_edge){id, k};
    return TIDE_OK;
}

enum tide_status tide_autodiff_gradients(struct tide_graph *graph, struct tide_edge loss,
                                         const struct tide_edge *wrt, uint32_t n,
                                         struct tide_edge *grads, struct tide_error *err)
{
    if (!graph || (n && (!wrt || !grads)))
        return tide_error_set(err, TIDE_INVALID, "tide_autodiff_gradients: missing argument");
    enum tide_status st = tide_graph_infer(graph, NULL, err);
    if (st != TIDE_OK)
        return st;
    if (loss.node >= graph->n_nodes || loss.output >= graph->nodes[loss.node].n_outputs)
        return tide_error_set(err, TIDE_INVALID,
                              "loss edge (node %" PRIu32 ", output %" PRIu32
                              ") is not an output of the graph",
                              loss.node, loss.output);
    char loss_text[TIDE_MAX_NAME + 16];
    snprintf(loss_text, sizeof(loss_text), "%s:%" PRIu32, graph->nodes[loss.node].name,
             loss.output);
    struct tide_edge checked;
    st = resolve_loss(graph, loss_text, &checked, err);
    if (st != TIDE_OK)
        return st;
    for (uint32_t i = 0; i < n; i++) {
        grads[i] = no_edge;
        if (wrt[i].node >= graph->n_nodes || wrt[i].output >= graph->nodes[wrt[i].node].n_outputs)
            return tide_error_set(err, TIDE_INVALID,
                                  "wrt %" PRIu32 " (node %" PRIu32 ", output %" PRIu32
                                  ") is not an output of the graph",
                                  i, wrt[i].node, wrt[i].output);
        const struct tide_output *o = &graph->nodes[wrt[i].node].outputs[wrt[i].output];
        if (o->dtype != TIDE_DTYPE_FLOAT32)
            return tide_node_error(err, TIDE_INVALID, &graph->nodes[wrt[i].node],
                                   "output %" PRIu32 " is %s; only float32 has a gradient",
                                   wrt[i].output, tide_dtype_name(o->dtype));
    }
    struct autodiff ad = {
        .graph = graph,
        .err = err,
        .n_forward = graph->n_nodes,
        .loss = loss,
        .loss_text = loss_text,
        .wrt = wrt,
        .n_wrt = n,
    };
    uint32_t reached = 0;
    st = differentiate(&ad, grads, &reached);
    autodiff_release(&ad);
    if (st == TIDE_OK && reached == 0)
        st = tide_error_set(err, TIDE_INVALID,
                            "loss \"%s\" does not depend on any of the %" PRIu32 " given outputs",
                            loss_text, n);
    if (st == TIDE_OK)
        st = tide_graph_infer(graph, NULL, err);
    return st;
}

/* Checks the optimizer's numbers before anything is appended. */
static enum tide_status check_options(const struct tide_train_options *o, struct tide_error *err)
{
    if (!isfinite(o->learning_rate) || o->learning_rate <= 0)
        return tide_error_set(err, TIDE_INVALID, "learning_rate is %g, wants a finite value > 0",
                              (double)o->learning_rate);
    switch (o->optimizer) {
    case TIDE_OPTIMIZER_SGD:
        return TIDE_OK;
    case TIDE_OPTIMIZER_MOMENTUM:
        if (!isfinite(o->momentum) || o->momentum < 0)
            return tide_error_set(err, TIDE_INVALID, "momentum is %g, wants a finite value >= 0",
                                  (double)o->momentum);
        return TIDE_OK;
    case TIDE_OPTIMIZER_ADAM:
        if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
            return tide_error_set(err, TIDE_INVALID,
                                  "Adam betas are %g and %g, want [0, 1) (0: the default)",
                                  (double)o->beta1, (double)o->beta2);
        if (!isfinite(o->epsilon) || o->epsilon < 0)
            return tide_error_set(err, TIDE_INVALID,
                                  "Adam epsilon is %g, wants a finite value >= 0 (0: 1e-8)",
                                  (double)o->epsilon);
        return TIDE_OK;
    }
    return tide_error_set(err, TIDE_INVALID, "unknown optimizer %d", (int)o->optimizer);
}

/*
 * The Variables to train: the named ones (each must be a trainable Variable;
 * a repeat is dropped), or every trainable Variable, in id order. *out is
 * malloc'd.
 */
static enum tide_status select_variables(struct tide_graph *graph,
                                         const struct tide_train_options *o, struct tide_edge **out,
                                         uint32_t *n_out, struct tide_error *err)
{
    uint32_t cap = o->n_variables ? o->n_variables : graph->n_nodes;
    struct tide_edge *vars = malloc(((size_t)cap + 1) * sizeof(*vars));
    if (!vars)
        return tide_error_set(err, TIDE_NOMEM, "out of memory selecting variables");
    uint32_t n = 0;
    if (o->n_variables == 0) {
        for (uint32_t v = 0; v < graph->n_nodes; v++) {
            const struct tide_node *node = &graph->nodes[v];
            if (node->op == TIDE_OP_VARIABLE && node->attrs[TIDE_ATTR_VARIABLE_trainable].b)
                vars[n++] = out0(v);
        }
    }
    for (uint32_t i = 0; i < o->n_variables; i++) {
        const char *name = o->variables ? o->variables[i] : NULL;
        uint32_t id = name ? tide_graph_find(graph, name) : TIDE_NO_NODE;
        if (id == TIDE_NO_NODE) {
            free(vars);
            return tide_error_set(err, TIDE_NOT_FOUND,
                                  "variable \"%.300s\" to train is not a node of the graph",
                                  name ? name : "(null)");
        }
        const struct tide_node *node = &graph->nodes[id];
        enum tide_status st = TIDE_OK;
        if (node->op != TIDE_OP_VARIABLE)
            st = tide_node_error(err, TIDE_INVALID, node,
                                 "is named as a variable to train, but is not a Variable");
        else if (!node->attrs[TIDE_ATTR_VARIABLE_trainable].b)
            st = tide_node_error(err, TIDE_INVALID, node,
                                 "is named as a variable to train, but its attribute "
                                 "\"trainable\" is false");
        if (st != TIDE_OK) {
            free(vars);
            return st;
        }
        bool repeat = false;
        for (uint32_t j = 0; j < n && !repeat; j++)
            repeat = vars[j].node == id;
        if (!repeat)
            vars[n++] = out0(id);
    }
    *out = vars;
    *n_out = n;
    return TIDE_OK;
}

/* Appends a zero-initialised, untrainable Variable shaped like var: optimizer state. */
static enum tide_status add_state(struct tide_graph *graph, uint32_t var, const char *prefix,
                                  uint32_t *id, struct tide_error *err)
{
    char name[TIDE_MAX_NAME + 1];
    struct autodiff names = {.graph = graph, .err = err};
    enum tide_status st = make_name(&names, name, "%s/%s", prefix, graph->nodes[var].name);
    if (st == TIDE_OK)
        st = tide_graph_add_node(graph, TIDE_OP_VARIABLE, name, id, err);
    if (st != TIDE_OK)
        return st;
    struct tide_shape shape = graph->nodes[var].outputs[0].shape;
    tide_attr_set_dtype(graph, *id, TIDE_ATTR_VARIABLE_dtype, TIDE_DTYPE_FLOAT32);
    tide_attr_set_shape(graph, *id, TIDE_ATTR_VARIABLE_shape, &shape);
    tide_attr_set_bool(graph, *id, TIDE_ATTR_VARIABLE_trainable, false);
    if (tide_attr_set_string(graph, *id, TIDE_ATTR_VARIABLE_init, "zeros") != TIDE_OK)
        return tide_error_set(err, TIDE_NOMEM, "out of memory adding \"%s\"", name);
    return TIDE_OK;
}

/* Appends var's update node (and its optimizer state). */
static enum tide_status add_update(struct tide_graph *graph, const struct tide_train_options *o,
                                   uint32_t var, struct tide_edge grad, uint32_t *update,
                                   struct tide_error *err)
{
    static const char *const prefixes[3] = {"sgd", "momentum", "adam"};
    static const enum tide_op ops[3] = {TIDE_OP_APPLY_SGD, TIDE_OP_APPLY_MOMENTUM,
                                        TIDE_OP_APPLY_ADAM};
    struct tide_edge in[4] = {out0(var)};
    uint32_t n = 1;
    enum tide_status st = TIDE_OK;
    if (o->optimizer == TIDE_OPTIMIZER_MOMENTUM) {
        uint32_t accum;
        st = add_state(graph, var, "momentum/accum", &accum, err);
        in[n++] = out0(accum);
    } else if (o->optimizer == TIDE_OPTIMIZER_ADAM) {
        uint32_t m, v = TIDE_NO_NODE;
        st = add_state(graph, var, "adam/m", &m, err);
        if (st == TIDE_OK)
            st = add_state(graph, var, "adam/v", &v, err);
        in[n++] = out0(m);
        in[n++] = out0(v);
    }
    if (st != TIDE_OK)
        return st;
    in[n++] = grad;

    char name[TIDE_MAX_NAME + 1];
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "%s/update", prefixes[o->optimizer]);
    struct autodiff names = {.graph = graph, .err = err};
    st = make_name(&names, name, "%s/%s", prefix, graph->nodes[var].name);
    if (st == TIDE_OK)
        st = append(&names, ops[o->optimizer], name, in, n, update);
    if (st != TIDE_OK)
        return st;
    switch (o->optimizer) {
    case TIDE_OPTIMIZER_SGD:
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_SGD_learning_rate, o->learning_rate);
        break;
    case TIDE_OPTIMIZER_MOMENTUM:
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_MOMENTUM_learning_rate,
                            o->learning_rate);
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_MOMENTUM_momentum, o->momentum);
        tide_attr_set_bool(graph, *update, TIDE_ATTR_APPLY_MOMENTUM_nesterov, o->nesterov);
        break;
    case TIDE_OPTIMIZER_ADAM:
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_ADAM_learning_rate, o->learning_rate);
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_ADAM_beta1,
                            o->beta1 != 0 ? o->beta1 : 0.9);
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_ADAM_beta2,
                            o->beta2 != 0 ? o->beta2 : 0.999);
        tide_attr_set_float(graph, *update, TIDE_ATTR_APPLY_ADAM_epsilon,
                            o->epsilon != 0 ? o->epsilon : 1e-8);
        break;
    }
    return TIDE_OK;
}

/*
 * Each update runs after every other node that reads its Variable (forward
 * and gradient nodes alike), so the in-place write never races a read.
 */
static enum tide_status order_updates(struct tide_graph *graph,
                                      const struct tide_autodiff_result *r, struct tide_error *err)
{
    struct tide_graph_users users;
    if (tide_graph_users_build(graph, &users) != TIDE_OK)
        return tide_error_set(err, TIDE_NOMEM, "out of memory listing readers");
    enum tide_status st = TIDE_OK;
    for (uint32_t t = 0; st == TIDE_OK && t < r->n_trained; t++) {
        uint32_t var = r->trained[t].variable, update = r->trained[t].update;
        for (uint32_t u = users.offsets[var]; st == TIDE_OK && u < users.offsets[var + 1]; u++) {
            uint32_t reader = users.users[u];
            const struct tide_node *node = &graph->nodes[reader];
            bool reads_data = false;
            for (uint32_t i = 0; i < node->n_inputs && !reads_data; i++)
                reads_data = node->inputs[i].node == var;
            if (reader != update && reads_data)
                st = tide_graph_add_control(graph, update, reader, err);
        }
    }
    tide_graph_users_free(&users);
    return st;
}

enum tide_status tide_autodiff(struct tide_graph *graph, const struct tide_train_options *options,
                               struct tide_autodiff_result *out, struct tide_error *err)
{
    if (out)
        memset(out, 0, sizeof(*out));
    if (!graph || !options || !out || !options->loss)
        return tide_error_set(err, TIDE_INVALID, "tide_autodiff: missing argument");
    enum tide_status st = check_options(options, err);
    if (st == TIDE_OK)
        st = tide_graph_infer(graph, NULL, err);
    struct tide_edge loss;
    if (st == TIDE_OK)
        st = resolve_loss(graph, options->loss, &loss, err);
    struct tide_edge *vars = NULL;
    uint32_t n_vars = 0;
    if (st == TIDE_OK)
        st = select_variables(graph, options, &vars, &n_vars, err);
    if (st != TIDE_OK)
        return st;

    struct tide_edge *grads = malloc(((size_t)n_vars + 1) * sizeof(*grads));
    out->trained = calloc((size_t)n_vars + 1, sizeof(*out->trained));
    if (!grads || !out->trained) {
        st = tide_error_set(err, TIDE_NOMEM, "out of memory differentiating");
        goto done;
    }
    struct autodiff ad = {
        .graph = graph,
        .err = err,
        .n_forward = graph->n_nodes,
        .loss = loss,
        .loss_text = options->loss,
        .wrt = vars,
        .n_wrt = n_vars,
    };
    uint32_t reached = 0;
    st = differentiate(&ad, grads, &reached);
    autodiff_release(&ad);
    if (st == TIDE_OK && reached == 0)
        st = tide_error_set(err, TIDE_INVALID,
                            "loss \"%s\" does not depend on any trainable "
                            "Variable",
                            options->loss);

    /* A Variable the loss does not reach has a zero gradient: it is left alone. */
    for (uint32_t i = 0; st == TIDE_OK && i < n_vars; i++) {
        if (grads[i].node == TIDE_NO_NODE)
            continue;
        struct tide_autodiff_trained *t = &out->trained[out->n_trained++];
        t->variable = vars[i].node;
        t->gradient = grads[i];
        st = add_update(graph, options, t->variable, t->gradient, &t->update, err);
    }
    if (st == TIDE_OK)
        st = order_updates(graph, out, err);
    if (st == TIDE_OK)
        st = tide_graph_infer(graph, NULL, err);
    out->loss = loss;
done:
    free(vars);
    free(grads);
    if (st != TIDE_OK)
        tide_autodiff_result_release(out);
    return st;
}

void tide_autodiff_result_release(struct tide_autodiff_result *result)
{
    if (!result)
        return;
    free(result->trained);
    memset(result, 0, sizeof(*result));
}
