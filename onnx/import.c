/* SPDX-License-Identifier: MIT */
/*
 * onnx/import.c: an ONNX ModelProto added to a tide graph builder (the API
 * is tide/onnx.h).
 *
 * The model is unpacked by protobuf-c's code generated from the onnx.proto
 * that Debian's libonnx-dev ships; nothing here parses protobuf by hand.
 * Nodes are visited in the order the model lists them (ONNX requires a
 * topological order). Every ONNX value name maps to a struct value: either a
 * host constant (initializers, Constant nodes, and everything folded from
 * them), or a ref to a builder node, or both once a constant has been put in
 * the graph. Shape computations on constants are evaluated here, on the
 * host, so that the graph tide receives is static; other ops become builder
 * calls, whose own shape inference checks them. Whatever tide cannot compute
 * exactly is refused with a message naming the node, op and opset.
 */
#include "tide/onnx.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/round.h"
#include "onnx.pb-c.h"

#define MAX_RANK  TIDE_BUILDER_MAX_RANK
#define OPSET_MIN 1
#define OPSET_MAX 27

/* ============================================================================
 * Values
 * ========================================================================== */

/* The element type of a host constant. */
enum const_type {
    CONST_FLOAT, /* float32 (float64 constants narrowed to it: read_tensor) */
    CONST_INT,   /* any ONNX integer type, held as int64 */
    CONST_BOOL,  /* held as int64 0 / 1 */
};

struct value {
    const char *name; /* the ONNX name (belongs to the unpacked model) */
    bool known;       /* a host constant: type, shape and data below */
    enum const_type type;
    int32_t rank;
    int64_t dims[MAX_RANK];
    float *f;       /* malloc'd; CONST_FLOAT */
    int64_t *i;     /* malloc'd; CONST_INT, CONST_BOOL */
    bool trainable; /* a float initializer that becomes a Variable */
    bool has_ref;   /* ref names the node holding it */
    tide_ref ref;
    bool mask;           /* an ONNX bool tensor in the graph, held as float32 0 / 1 */
    const char *missing; /* not NULL: an output tide does not compute, and why */
};

struct ctx {
    tide_builder *b;
    const struct tide_onnx_options *o;
    int64_t opset;
    int64_t version;      /* the node's op version: the newest ONNX defines up to the opset */
    struct value *values; /* open addressing by name */
    size_t cap;
    char *err;
    size_t err_size;
    const Onnx__NodeProto *node; /* the node being imported, for messages */
    bool scoped;                 /* inside the builder scope "onnx" (the nodes' own ops) */
    struct tide_onnx_result *res; /* where the Variables made are listed */
    int32_t variables_cap;
    const Onnx__GraphProto *graph; /* the model's graph, for the inputs' dynamic dimensions */
    void **owned;                  /* what inlining functions allocated: freed after import */
    size_t n_owned, cap_owned, owned_bytes;
    bool *dim_used;                /* per options->dims[k]: some input's dimension took it */
    const Onnx__NodeProto *const *nodes; /* the nodes imported (functions inlined), in order */
    size_t n_nodes, at;                  /* their count, and the node being imported */
};

static uint64_t hash_name(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* The value called name, or NULL. An empty name is ONNX's "absent optional input". */
static struct value *lookup(struct ctx *c, const char *name)
{
    if (!name || !*name)
        return NULL;
    for (size_t k = hash_name(name) & (c->cap - 1);; k = (k + 1) & (c->cap - 1)) {
        if (!c->values[k].name)
            return NULL;
        if (strcmp(c->values[k].name, name) == 0)
            return &c->values[k];
    }
}

/* A new value called name (a redefinition replaces the old one, as a later producer would). */
static struct value *define(struct ctx *c, const char *name)
{
    size_t k = hash_name(name) & (c->cap - 1);
    for (;; k = (k + 1) & (c->cap - 1)) {
        if (!c->values[k].name || strcmp(c->values[k].name, name) == 0)
            break;
    }
    struct value *v = &c->values[k];
    free(v->f);
    free(v->i);
    memset(v, 0, sizeof(*v));
    v->name = name;
    return v;
}

/* The element count of a shape; INT64_MAX when it overflows (a bogus file's dims). */
static int64_t numel(int32_t rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int32_t k = 0; k < rank; k++) {
        if (dims[k] == 0)
            return 0;
    }
    for (int32_t k = 0; k < rank; k++) {
        if (__builtin_mul_overflow(n, dims[k], &n))
            return INT64_MAX;
    }
    return n;
}

/* The most elements a constant folded at import may have (256 MiB of int64). */
#define FOLD_MAX_ELEMENTS ((int64_t)1 << 25)

/* ============================================================================
 * Errors
 * ========================================================================== */

static int failf(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int failf(struct ctx *c, const char *fmt, ...)
{
    if (!c->err || c->err_size == 0)
        return -1;
    size_t used = 0;
    if (c->node) {
        int n = snprintf(c->err, c->err_size, "node %s (%s, opset %" PRId64 "): ",
                         c->node->name && *c->node->name ? c->node->name : "(unnamed)",
                         c->node->op_type ? c->node->op_type : "?", c->opset);
        used = n < 0 ? 0 : (size_t)n;
        if (used >= c->err_size)
            return -1;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + used, c->err_size - used, fmt, ap);
    va_end(ap);
    return -1;
}

/*
 * ONNX assigns each value once. A node whose output is also one of its own
 * inputs, or which names one output twice, would have a value replaced
 * (define frees it) while it still reads or writes it: refused, naming the
 * output and the input. An empty name is an optional output left out.
 */
static int check_output_names(struct ctx *c, const Onnx__NodeProto *n)
{
    for (size_t k = 0; k < n->n_output; k++) {
        const char *out = n->output[k];
        if (!out || !*out)
            continue;
        for (size_t i = 0; i < n->n_input; i++) {
            if (n->input[i] && strcmp(n->input[i], out) == 0)
                return failf(c, "output %zu \"%s\" is also its input %zu (ONNX assigns each value "
                                "once)",
                             k, out, i);
        }
        for (size_t j = 0; j < k; j++) {
            if (n->output[j] && strcmp(n->output[j], out) == 0)
                return failf(c, "outputs %zu and %zu are both \"%s\" (ONNX assigns each value once)",
                             j, k, out);
        }
    }
    return 0;
}

/* After a builder call: its error, if any, as the node's. */
static int check_builder(struct ctx *c, tide_ref r)
{
    if (r.id >= 0)
        return 0;
    return failf(c, "%s", tide_builder_error(c->b) ? tide_builder_error(c->b) : "builder error");
}

/* ============================================================================
 * Names
 * ========================================================================== */

/* A tide name for ONNX name: bytes outside [A-Za-z0-9_./-] become '_', and a taken one a suffix. */
static void tide_name(struct ctx *c, const char *onnx, char out[TIDE_BUILDER_MAX_NAME + 1])
{
    char base[TIDE_BUILDER_MAX_NAME - 16];
    size_t n = 0;
    for (const char *p = onnx; *p && n + 1 < sizeof(base); p++) {
        char ch = *p;
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '/' || ch == '-';
        base[n++] = ok ? ch : '_';
    }
    if (n == 0)
        base[n++] = '_';
    base[n] = 0;
    snprintf(out, TIDE_BUILDER_MAX_NAME + 1, "%s", base);
    for (int k = 1; tide_builder_find(c->b, out).id >= 0; k++)
        snprintf(out, TIDE_BUILDER_MAX_NAME + 1, "%s_%d", base, k);
}

/* ============================================================================
 * Tensors from the model
 * ========================================================================== */

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* Reads a TensorProto into v (known). what names it in messages ("initializer \"w\""). */
static int read_tensor(struct ctx *c, const Onnx__TensorProto *t, struct value *v, const char *what)
{
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return failf(c, "%s: external data is not supported", what);
    if (t->n_dims > MAX_RANK)
        return failf(c, "%s: rank %zu is more than tide's %d", what, t->n_dims, MAX_RANK);
    v->rank = (int32_t)t->n_dims;
    for (size_t k = 0; k < t->n_dims; k++) {
        if (t->dims[k] < 0)
            return failf(c, "%s: negative dimension %" PRId64, what, t->dims[k]);
        v->dims[k] = t->dims[k];
    }
    int64_t n = numel(v->rank, v->dims);
    if (n > ((int64_t)1 << 34))
        return failf(c, "%s: %" PRId64 " elements are too many", what, n);
    const uint8_t *raw = t->has_raw_data ? t->raw_data.data : NULL;
    size_t raw_len = t->has_raw_data ? t->raw_data.len : 0;
    size_t width;
    switch (t->data_type) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        v->type = CONST_FLOAT;
        width = 4;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE:
        v->type = CONST_FLOAT;
        width = 8;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        v->type = CONST_INT;
        width = 8;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        v->type = CONST_INT;
        width = 4;
        break;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        v->type = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL ? CONST_BOOL : CONST_INT;
        width = 1;
        break;
    default:
        return failf(c, "%s: element type %d is not supported (float, double, int32, int64, bool)",
                     what, (int)t->data_type);
    }
    size_t count = (size_t)n;
    if (raw && raw_len != count * width)
        return failf(c, "%s: raw_data holds %zu bytes, but shape needs %zu", what, raw_len,
                     count * width);
    bool is_double = t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    size_t listed = is_double                                              ? t->n_double_data
                    : v->type == CONST_FLOAT                               ? t->n_float_data
                    : t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64 ? t->n_int64_data
                                                                           : t->n_int32_data;
    if (!raw && listed != count)
        return failf(c, "%s: holds %zu values, but shape needs %zu", what, listed, count);
    if (is_double) {
        /* tide computes float32: each value rounded once to it, a finite one past its range
         * refused rather than made infinite (NaN and the infinities stay what they are). */
        v->f = malloc((count ? count : 1) * sizeof(float));
        if (!v->f)
            return failf(c, "%s: out of memory", what);
        for (size_t k = 0; k < count; k++) {
            double d;
            if (raw) {
                uint64_t u = le64(raw + 8 * k);
                memcpy(&d, &u, 8);
            } else {
                d = t->double_data[k];
            }
            v->f[k] = (float)d;
            if (isfinite(d) && !isfinite(v->f[k]))
                return failf(c,
                             "%s: double %.9g at %zu is outside float32's range, which tide "
                             "computes in",
                             what, d, k);
        }
        return 0;
    }
    if (v->type == CONST_FLOAT) {
        v->f = malloc((count ? count : 1) * sizeof(float));
        if (!v->f)
            return failf(c, "%s: out of memory", what);
        if (raw) {
            for (size_t k = 0; k < count; k++) {
                uint32_t u = le32(raw + 4 * k);
                memcpy(&v->f[k], &u, 4);
            }
        } else if (t->n_float_data == count) {
            if (count)
                memcpy(v->f, t->float_data, count * sizeof(float));
        } else {
            return failf(c, "%s: holds %zu values, but shape needs %zu", what, t->n_float_data,
                         count);
        }
        return 0;
    }
    v->i = malloc((count ? count : 1) * sizeof(int64_t));
    if (!v->i)
        return failf(c, "%s: out of memory", what);
    if (raw) {
        for (size_t k = 0; k < count; k++) {
            if (width == 8)
                v->i[k] = (int64_t)le64(raw + 8 * k);
            else if (width == 4)
                v->i[k] = (int32_t)le32(raw + 4 * k);
            else if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT8)
                v->i[k] = (int8_t)raw[k];
            else
                v->i[k] = raw[k];
        }
        if (v->type == CONST_BOOL)
            for (size_t k = 0; k < count; k++)
                v->i[k] = v->i[k] != 0;
        return 0;
    }
    if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64) {
        if (t->n_int64_data != count)
            return failf(c, "%s: holds %zu values, but shape needs %zu", what, t->n_int64_data,
                         count);
        if (count)
            memcpy(v->i, t->int64_data, count * sizeof(int64_t));
        return 0;
    }
    if (t->n_int32_data != count)
        return failf(c, "%s: holds %zu values, but shape needs %zu", what, t->n_int32_data, count);
    for (size_t k = 0; k < count; k++)
        v->i[k] = v->type == CONST_BOOL ? t->int32_data[k] != 0 : t->int32_data[k];
    return 0;
}

/* ============================================================================
 * Values as graph nodes
 * ========================================================================== */

/* Lists a Variable made for an initializer in the result, under both its names. */
static int list_variable(struct ctx *c, const char *onnx_name, const char *name)
{
    struct tide_onnx_result *res = c->res;
    if (res->n_variables == c->variables_cap) {
        int32_t cap = c->variables_cap ? 2 * c->variables_cap : 16;
        struct tide_onnx_variable *grown = realloc(res->variables, (size_t)cap * sizeof(*grown));
        if (!grown)
            return failf(c, "out of memory");
        res->variables = grown;
        c->variables_cap = cap;
    }
    struct tide_onnx_variable *entry = &res->variables[res->n_variables];
    entry->onnx_name = strdup(onnx_name);
    entry->name = strdup(name);
    if (!entry->onnx_name || !entry->name) {
        free(entry->onnx_name);
        free(entry->name);
        return failf(c, "out of memory");
    }
    res->n_variables++;
    return 0;
}

/* Puts a known value in the graph (once): a Variable, or a Const. */
static int materialize(struct ctx *c, struct value *v)
{
    if (v->has_ref)
        return 0;
    if (v->missing)
        return failf(c, "input \"%s\" %s", v->name, v->missing);
    if (!v->known)
        return failf(c, "input \"%s\" has no value", v->name);
    int64_t n = numel(v->rank, v->dims); /* of data the import holds: it fits in memory */
    if (v->type == CONST_BOOL) {
        /* A bool constant in the graph is a mask: float32 0 / 1, as the comparisons give. */
        float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
        if (!f)
            return failf(c, "out of memory");
        for (int64_t k = 0; k < n; k++)
            f[k] = v->i[k] ? 1.0f : 0.0f;
        free(v->f);
        v->f = f;
        v->mask = true;
    }
    int32_t *data = NULL;
    if (v->type == CONST_INT) {
        data = n > 0 && (uint64_t)n < SIZE_MAX / sizeof(int32_t)
                   ? malloc((size_t)n * sizeof(int32_t))
                   : malloc(sizeof(int32_t));
        if (!data)
            return failf(c, "out of memory");
        for (int64_t k = 0; k < n; k++) {
            if (v->i[k] < INT32_MIN || v->i[k] > INT32_MAX) {
                free(data);
                return failf(
                    c, "\"%s\": value %" PRId64 " at %" PRId64 " does not fit in tide's int32",
                    v->name, v->i[k], k);
            }
            data[k] = (int32_t)v->i[k];
        }
    }
    /* Initializers and constants keep their ONNX names, outside the "onnx" scope. */
    if (c->scoped)
        tide_builder_pop_scope(c->b);
    char name[TIDE_BUILDER_MAX_NAME + 1];
    tide_name(c, v->name, name);
    tide_ref r;
    if (data)
        r = tide_builder_constant(c->b, name, TIDE_DT_INT32, v->rank, v->dims, data);
    else if (v->trainable && !v->mask)
        r = tide_builder_variable_value(c->b, name, v->rank, v->dims, v->f);
    else
        r = tide_builder_constant(c->b, name, TIDE_DT_FLOAT32, v->rank, v->dims, v->f);
    free(data);
    if (c->scoped)
        tide_builder_push_scope(c->b, "onnx");
    if (check_builder(c, r) != 0)
        return -1;
    v->ref = r;
    v->has_ref = true;
    return v->trainable ? list_variable(c, v->name, name) : 0;
}

/* Input k of the current node as a graph ref; -1 (with the error set) when absent or unusable. */
static int in_ref(struct ctx *c, size_t k, tide_ref *out)
{
    const Onnx__NodeProto *n = c->node;
    if (k >= n->n_input || !*n->input[k])
        return failf(c, "input %zu is required", k);
    struct value *v = lookup(c, n->input[k]);
    if (!v)
        return failf(c, "input \"%s\" is produced by no node, initializer or graph input",
                     n->input[k]);
    if (materialize(c, v) != 0)
        return -1;
    *out = v->ref;
    return 0;
}

/* Input k's value record (known or not), or NULL with the error set. */
static struct value *in_value(struct ctx *c, size_t k)
{
    const Onnx__NodeProto *n = c->node;
    if (k >= n->n_input || !*n->input[k]) {
        failf(c, "input %zu is required", k);
        return NULL;
    }
    struct value *v = lookup(c, n->input[k]);
    if (!v) {
        failf(c, "input \"%s\" is produced by no node, initializer or graph input", n->input[k]);
        return NULL;
    }
    if (v->missing) {
        failf(c, "input \"%s\" %s", v->name, v->missing);
        return NULL;
    }
    return v;
}

static bool has_input(const Onnx__NodeProto *n, size_t k)
{
    return k < n->n_input && *n->input[k];
}

/* Input k as a known (host) value; -1 with a message saying what must be constant. */
static struct value *in_const(struct ctx *c, size_t k, const char *what)
{
    struct value *v = in_value(c, k);
    if (!v)
        return NULL;
    if (!v->known) {
        failf(c, "%s (input \"%s\") must be a constant known at import", what, v->name);
        return NULL;
    }
    return v;
}

/* Shape and dtype of any value (known or in the graph). */
static int value_shape(struct ctx *c, struct value *v, int32_t *rank, int64_t dims[MAX_RANK])
{
    if (v->known) {
        *rank = v->rank;
        memcpy(dims, v->dims, sizeof(int64_t) * MAX_RANK);
        return 0;
    }
    if (!v->has_ref || tide_builder_shape(c->b, v->ref, dims, rank) != 0)
        return failf(c, "value \"%s\" has no shape", v->name);
    return 0;
}

static int ref_shape(struct ctx *c, tide_ref r, int32_t *rank, int64_t dims[MAX_RANK])
{
    if (tide_builder_shape(c->b, r, dims, rank) != 0)
        return failf(c, "no shape for an input");
    return 0;
}

/* Output k of the current node gets ref r. */
static int set_out(struct ctx *c, size_t k, tide_ref r)
{
    if (check_builder(c, r) != 0)
        return -1;
    if (k >= c->node->n_output || !*c->node->output[k])
        return 0;
    struct value *v = define(c, c->node->output[k]);
    v->ref = r;
    v->has_ref = true;
    return 0;
}

/* Output k of the current node gets r, which holds an ONNX bool tensor as float32 0 / 1. */
static int set_out_mask(struct ctx *c, size_t k, tide_ref r)
{
    if (set_out(c, k, r) != 0)
        return -1;
    if (k < c->node->n_output && *c->node->output[k])
        lookup(c, c->node->output[k])->mask = true;
    return 0;
}

/* Input k, which must be bool, as a mask in the graph (a bool constant is put there as one). */
static int mask_in(struct ctx *c, size_t k, tide_ref *out)
{
    struct value *v = in_value(c, k);
    if (!v)
        return -1;
    if (v->known ? v->type != CONST_BOOL : !v->mask)
        return failf(c, "input %zu (\"%s\") is not a bool tensor; %s takes bool inputs", k, v->name,
                     c->node->op_type);
    return in_ref(c, k, out);
}

/* Output k of the current node is a host constant; v takes ownership of data. */
static struct value *set_out_const(struct ctx *c, size_t k, enum const_type type, int32_t rank,
                                   const int64_t *dims)
{
    static const char *unnamed = "";
    const char *name = k < c->node->n_output ? c->node->output[k] : unnamed;
    struct value *v = define(c, name);
    v->known = true;
    v->type = type;
    v->rank = rank;
    if (rank)
        memcpy(v->dims, dims, sizeof(int64_t) * (size_t)rank);
    for (int32_t a = 0; a < rank; a++) {
        if (dims[a] < 0) {
            failf(c, "dimension %d of the result is negative (%" PRId64 ")", a, dims[a]);
            return NULL;
        }
    }
    int64_t n = numel(rank, dims);
    if (n > FOLD_MAX_ELEMENTS) {
        failf(c, "a constant of %" PRId64 " elements is more than the import folds (%" PRId64 ")",
              n, FOLD_MAX_ELEMENTS);
        return NULL;
    }
    if (type == CONST_FLOAT)
        v->f = calloc((size_t)(n ? n : 1), sizeof(float));
    else
        v->i = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    if (!v->f && !v->i) {
        failf(c, "out of memory");
        return NULL;
    }
    return v;
}

/* Outputs past the first that tide does not compute: reading one is an error saying why. */
static void mark_missing(struct ctx *c, size_t from, const char *why)
{
    for (size_t k = from; k < c->node->n_output; k++) {
        if (*c->node->output[k])
            define(c, c->node->output[k])->missing = why;
    }
}

/* ============================================================================
 * Attributes
 * ========================================================================== */

static const Onnx__AttributeProto *attr(const Onnx__NodeProto *n, const char *name)
{
    for (size_t k = 0; k < n->n_attribute; k++) {
        if (n->attribute[k]->name && strcmp(n->attribute[k]->name, name) == 0)
            return n->attribute[k];
    }
    return NULL;
}

static int64_t attr_i(const Onnx__NodeProto *n, const char *name, int64_t def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_i ? a->i : def;
}

static float attr_f(const Onnx__NodeProto *n, const char *name, float def)
{
    const Onnx__AttributeProto *a = attr(n, name);
    return a && a->has_f ? a->f : def;
}

/* The ints of attribute name: count, or -1 when absent. */
static int64_t attr_ints(const Onnx__NodeProto *n, const char *name, const int64_t **out)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a)
        return -1;
    *out = a->ints;
    return (int64_t)a->n_ints;
}

/* The ints of attribute name (at most MAX_RANK) into out: *count -1 when absent and not
 * required; -1 with the error set when required and absent, or too long. */
static int ints_attr(struct ctx *c, const char *name, bool required, int64_t out[MAX_RANK],
                     int64_t *count)
{
    const int64_t *list = NULL;
    *count = attr_ints(c->node, name, &list);
    if (*count < 0)
        return required ? failf(c, "attribute %s is required", name) : 0;
    if (*count > MAX_RANK)
        return failf(c, "attribute %s holds %" PRId64 " values, more than %d", name, *count,
                     MAX_RANK);
    if (*count)
        memcpy(out, list, sizeof(int64_t) * (size_t)*count);
    return 0;
}

static bool attr_s_is(const Onnx__NodeProto *n, const char *name, const char *want)
{
    const Onnx__AttributeProto *a = attr(n, name);
    if (!a || !a->has_s)
        return want == NULL;
    return want && a->s.len == strlen(want) && memcmp(a->s.data, want, a->s.len) == 0;
}

/* Normalises axis for a rank; -1 with an error when out of range. */
static int norm_axis(struct ctx *c, int64_t axis, int32_t rank, int64_t *out)
{
    *out = 0;
    if (axis < -rank || axis >= rank)
        return failf(c, "axis %" PRId64 " is out of range for rank %d", axis, rank);
    *out = axis < 0 ? axis + rank : axis;
    return 0;
}

/* Integer list from a known value (axes, shapes, ...). */
static int const_ints(struct ctx *c, struct value *v, int64_t *out, int64_t *n, int64_t cap)
{
    if (v->type == CONST_FLOAT)
        return failf(c, "\"%s\" must hold integers", v->name);
    int64_t count = numel(v->rank, v->dims);
    if (count > cap)
        return failf(c, "\"%s\" holds %" PRId64 " values, more than %" PRId64, v->name, count, cap);
    memcpy(out, v->i, (size_t)count * sizeof(int64_t));
    *n = count;
    return 0;
}

/* ============================================================================
 * Broadcasting and host arithmetic
 * ========================================================================== */

static int broadcast_shape(struct ctx *c, int32_t ra, const int64_t *a, int32_t rb,
                           const int64_t *b, int32_t *ro, int64_t *out)
{
    int32_t r = ra > rb ? ra : rb;
    for (int32_t k = 0; k < r; k++) {
        int64_t x = k - (r - ra) >= 0 ? a[k - (r - ra)] : 1;
        int64_t y = k - (r - rb) >= 0 ? b[k - (r - rb)] : 1;
        if (x != y && x != 1 && y != 1)
            return failf(c, "shapes do not broadcast: %" PRId64 " against %" PRId64 " at axis %d",
                         x, y, k);
        out[k] = x == 1 ? y : x;
    }
    *ro = r;
    return 0;
}

/* The flat index in a (rank ra, dims a) of the element at index idx of the broadcast shape. */
static int64_t broadcast_index(int32_t r, const int64_t *out, int64_t idx, int32_t ra,
                               const int64_t *a)
{
    int64_t pos = 0, stride = 1;
    for (int32_t k = r - 1; k >= 0; k--) {
        int64_t coord = idx % out[k];
        idx /= out[k];
        int32_t ka = k - (r - ra);
        if (ka >= 0) {
            if (a[ka] != 1)
                pos += coord * stride;
            stride *= a[ka];
        }
    }
    return pos;
}

static double get_num(const struct value *v, int64_t k)
{
    return v->type == CONST_FLOAT ? (double)v->f[k] : (double)v->i[k];
}

/* A float as int64, truncated toward zero as ONNX's Cast; false when it has no int64 value. */
static bool float_to_int(double d, int64_t *out)
{
    if (!(d > -9223372036854775808.0 - 1.0 && d < 9223372036854775808.0))
        return false;
    *out = (int64_t)d;
    return true;
}

/* ============================================================================
 * Op handlers
 * ========================================================================== */

typedef int (*handler_fn)(struct ctx *c);

/* ---- constants and shapes (folded) ---- */

static int op_constant(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    const Onnx__AttributeProto *a;
    if ((a = attr(n, "value")) && a->t) {
        struct value *v = define(c, n->output[0]);
        v->known = true;
        return read_tensor(c, a->t, v, "attribute value");
    }
    if ((a = attr(n, "value_float")) && a->has_f) {
        struct value *v = set_out_const(c, 0, CONST_FLOAT, 0, NULL);
        if (!v)
            return -1;
        v->f[0] = a->f;
        return 0;
    }
    if ((a = attr(n, "value_int")) && a->has_i) {
        struct value *v = set_out_const(c, 0, CONST_INT, 0, NULL);
        if (!v)
            return -1;
        v->i[0] = a->i;
        return 0;
    }
    if ((a = attr(n, "value_floats"))) {
        int64_t d = (int64_t)a->n_floats;
        struct value *v = set_out_const(c, 0, CONST_FLOAT, 1, &d);
        if (!v)
            return -1;
        if (a->n_floats)
            memcpy(v->f, a->floats, a->n_floats * sizeof(float));
        return 0;
    }
    if ((a = attr(n, "value_ints"))) {
        int64_t d = (int64_t)a->n_ints;
        struct value *v = set_out_const(c, 0, CONST_INT, 1, &d);
        if (!v)
            return -1;
        if (a->n_ints)
            memcpy(v->i, a->ints, a->n_ints * sizeof(int64_t));
        return 0;
    }
    return failf(c, "only value, value_float(s) and value_int(s) are supported");
}

static int op_constant_of_shape(struct ctx *c)
{
    struct value *s = in_const(c, 0, "the shape");
    if (!s)
        return -1;
    int64_t dims[MAX_RANK], r;
    if (const_ints(c, s, dims, &r, MAX_RANK) != 0)
        return -1;
    const Onnx__AttributeProto *a = attr(c->node, "value");
    struct value fill = {0};
    fill.type = CONST_FLOAT;
    float zero = 0;
    fill.f = &zero;
    struct value read = {0};
    if (a && a->t) {
        if (read_tensor(c, a->t, &read, "attribute value") != 0) {
            free(read.f), free(read.i);
            return -1;
        }
        if (numel(read.rank, read.dims) != 1) {
            free(read.f), free(read.i);
            return failf(c, "value must hold one element");
        }
        fill = read;
    }
    struct value *v = set_out_const(c, 0, fill.type, (int32_t)r, dims);
    if (v) {
        int64_t count = numel((int32_t)r, dims);
        for (int64_t k = 0; k < count; k++) {
            if (fill.type == CONST_FLOAT)
                v->f[k] = fill.f[0];
            else
                v->i[k] = fill.i[0];
        }
    }
    free(read.f);
    free(read.i);
    return v ? 0 : -1;
}

/*
 * EyeLike: ones on diagonal k (above the main one for k > 0) of a matrix of
 * input 0's shape, zeros elsewhere, of type dtype (input 0's when absent).
 * Only the input's shape is read, so the result is a constant.
 */
static int op_eye_like(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    if (rank != 2)
        return failf(c, "input 0 has rank %d; EyeLike takes a matrix", rank);
    enum const_type t;
    const Onnx__AttributeProto *a = attr(c->node, "dtype");
    if (a && a->has_i) {
        switch (a->i) {
        case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
            t = CONST_FLOAT;
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
            t = CONST_BOOL;
            break;
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT8:
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT16:
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT16:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT32:
        case ONNX__TENSOR_PROTO__DATA_TYPE__UINT64:
            t = CONST_INT;
            break;
        default:
            return failf(c, "dtype %" PRId64 " is not supported (float, integers, bool)", a->i);
        }
    } else if (x->known) {
        t = x->type;
    } else {
        t = x->mask                                               ? CONST_BOOL
            : tide_builder_dtype(c->b, x->ref) == TIDE_DT_FLOAT32 ? CONST_FLOAT
                                                                  : CONST_INT;
    }
    int64_t k = attr_i(c->node, "k", 0);
    if (lookup(c, c->node->output[0]) == x) { /* a malformed model: its own input */
        free(x->f), free(x->i);
        x->f = NULL, x->i = NULL;
    }
    struct value *v = set_out_const(c, 0, t, 2, dims);
    for (int64_t r = 0; v && r < dims[0]; r++) {
        for (int64_t col = 0; col < dims[1]; col++) {
            bool one = col - r == k;
            if (t == CONST_FLOAT)
                v->f[r * dims[1] + col] = one ? 1.0f : 0.0f;
            else
                v->i[r * dims[1] + col] = one;
        }
    }
    return v ? 0 : -1;
}

static int op_shape(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    int64_t start = attr_i(c->node, "start", 0), end = attr_i(c->node, "end", rank);
    if (start < 0)
        start += rank;
    if (end < 0)
        end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < 0 ? 0 : end > rank ? rank : end;
    int64_t len = end > start ? end - start : 0;
    struct value *v = set_out_const(c, 0, CONST_INT, 1, &len);
    if (!v)
        return -1;
    for (int64_t k = 0; k < len; k++)
        v->i[k] = dims[start + k];
    return 0;
}

static tide_ref scalar(struct ctx *c, float value);

/* An int32 scalar Const. */
static tide_ref int_scalar(struct ctx *c, int32_t value)
{
    return tide_builder_constant(c->b, NULL, TIDE_DT_INT32, 0, NULL, &value);
}

/* Casts between the types tide has: float32 <-> float32 and integer <-> integer are
 * no-ops on graph tensors; float <-> integer is tide's Cast (truncating toward zero,
 * saturating); to bool, a NotEqual of 0, a mask. Constants are converted on the host. */
static int op_cast(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int64_t to = attr_i(c->node, "to", 0);
    bool to_float = to == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    bool to_int =
        to == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 || to == ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    bool to_bool = to == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    if (!to_float && !to_int && !to_bool)
        return failf(c, "cast to element type %" PRId64 " is not supported (float, int32, int64)",
                     to);
    if (x->known) {
        enum const_type t = to_float ? CONST_FLOAT : to_int ? CONST_INT : CONST_BOOL;
        struct value src = *x; /* x may be this node's output too: keep its data alive */
        bool replaced = lookup(c, c->node->output[0]) == x; /* an output of the same name */
        if (replaced)
            x->f = NULL, x->i = NULL;
        struct value *v = set_out_const(c, 0, t, src.rank, src.dims);
        if (v) {
            int64_t count = numel(src.rank, src.dims);
            for (int64_t k = 0; k < count; k++) {
                double d = get_num(&src, k);
                if (t == CONST_FLOAT) {
                    v->f[k] = (float)d;
                } else if (t == CONST_BOOL) {
                    v->i[k] = src.type == CONST_FLOAT ? d != 0 : src.i[k] != 0;
                } else if (src.type != CONST_FLOAT) {
                    v->i[k] = src.i[k];
                } else if (!float_to_int(d, &v->i[k])) {
                    /*
                     * NaN, an infinity or out of range: undefined in ONNX; x86, and so
                     * PyTorch and NumPy there, give the "integer indefinite" INT64_MIN,
                     * which a shape, index or count that reads it refuses. T5's buckets
                     * Cast log(0) = -inf on a branch that their Where drops.
                     */
                    v->i[k] = INT64_MIN;
                }
            }
        }
        if (replaced)
            free(src.f), free(src.i);
        return v ? 0 : -1;
    }
    tide_ref r;
    if (in_ref(c, 0, &r) != 0)
        return -1;
    enum tide_data_type dt = tide_builder_dtype(c->b, r);
    if (to_bool) {
        if (x->mask)
            return set_out_mask(c, 0, r);
        tide_ref zero = dt == TIDE_DT_FLOAT32 ? scalar(c, 0.0f) : int_scalar(c, 0);
        return set_out_mask(c, 0,
                            tide_builder_compare(c->b, NULL, r, zero, TIDE_COMPARE_NOT_EQUAL));
    }
    /* A mask cast to float is its 0 / 1 values; to an integer, they are converted. */
    enum tide_data_type want = to_float ? TIDE_DT_FLOAT32 : TIDE_DT_INT32;
    return set_out(c, 0, dt == want ? r : tide_builder_cast(c->b, NULL, r, want));
}

/* Gives output 0 a copy of the constant x's values in the shape rank, dims (as many elements).
 * x may be that output itself (a node whose output has its input's name): its data is then
 * kept alive until copied, and dims may point into x. */
static int copy_const_to(struct ctx *c, struct value *x, int32_t rank, const int64_t *dims)
{
    int64_t shape[MAX_RANK];
    if (rank)
        memcpy(shape, dims, sizeof(int64_t) * (size_t)rank);
    struct value src = *x;
    bool replaced = lookup(c, c->node->output[0]) == x; /* an output of the same name */
    if (replaced)
        x->f = NULL, x->i = NULL;
    struct value *v = set_out_const(c, 0, src.type, rank, shape);
    if (v) {
        size_t count = (size_t)numel(src.rank, src.dims);
        if (src.type == CONST_FLOAT)
            memcpy(v->f, src.f, count * sizeof(float));
        else
            memcpy(v->i, src.i, count * sizeof(int64_t));
    }
    if (replaced)
        free(src.f), free(src.i);
    return v ? 0 : -1;
}

/* Gives output 0 x's values in a new shape: folded when x is a known, untrained constant (a
 * trainable initializer stays a Variable), a Reshape node otherwise. */
static int reshape_to(struct ctx *c, struct value *x, int32_t rank, const int64_t *dims)
{
    if (x->known && !x->trainable)
        return copy_const_to(c, x, rank, dims);
    tide_ref r;
    if (in_ref(c, 0, &r) != 0)
        return -1;
    return set_out(c, 0, tide_builder_reshape(c->b, NULL, r, rank, dims));
}

static int op_unsqueeze_squeeze(struct ctx *c, bool unsqueeze)
{
    const Onnx__NodeProto *n = c->node;
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    int64_t axes[MAX_RANK * 2], n_axes = -1;
    if (c->opset >= 13) {
        if (has_input(n, 1)) {
            struct value *a = in_const(c, 1, "axes");
            if (!a || const_ints(c, a, axes, &n_axes, MAX_RANK * 2) != 0)
                return -1;
        }
    } else {
        const int64_t *list = NULL;
        n_axes = attr_ints(n, "axes", &list);
        if (n_axes > MAX_RANK * 2)
            return failf(c, "too many axes");
        for (int64_t k = 0; k < n_axes; k++)
            axes[k] = list[k];
    }
    int64_t out[MAX_RANK * 2];
    int32_t out_rank = 0;
    if (unsqueeze) {
        if (n_axes < 0)
            return failf(c, "axes are required");
        int32_t r = rank + (int32_t)n_axes;
        if (r > MAX_RANK)
            return failf(c, "rank %d is more than tide's %d", r, MAX_RANK);
        bool is_new[MAX_RANK * 2] = {0};
        for (int64_t k = 0; k < n_axes; k++) {
            int64_t a;
            if (norm_axis(c, axes[k], r, &a) != 0)
                return -1;
            if (is_new[a])
                return failf(c, "axis %" PRId64 " is listed twice", axes[k]);
            is_new[a] = true;
        }
        for (int32_t k = 0, src = 0; k < r; k++)
            out[out_rank++] = is_new[k] ? 1 : dims[src++];
    } else {
        bool drop[MAX_RANK] = {0};
        if (n_axes < 0) {
            for (int32_t k = 0; k < rank; k++)
                drop[k] = dims[k] == 1;
        }
        for (int64_t k = 0; k < n_axes; k++) {
            int64_t a;
            if (norm_axis(c, axes[k], rank, &a) != 0)
                return -1;
            if (dims[a] != 1)
                return failf(c, "axis %" PRId64 " has size %" PRId64 ", not 1", axes[k], dims[a]);
            drop[a] = true;
        }
        for (int32_t k = 0; k < rank; k++)
            if (!drop[k])
                out[out_rank++] = dims[k];
    }
    return reshape_to(c, x, out_rank, out);
}

static int op_unsqueeze(struct ctx *c)
{
    return op_unsqueeze_squeeze(c, true);
}

static int op_squeeze(struct ctx *c)
{
    return op_unsqueeze_squeeze(c, false);
}

static int op_range(struct ctx *c)
{
    struct value *s = in_const(c, 0, "start"), *l = s ? in_const(c, 1, "limit") : NULL,
                 *d = l ? in_const(c, 2, "delta") : NULL;
    if (!d)
        return -1;
    double start = get_num(s, 0), limit = get_num(l, 0), delta = get_num(d, 0);
    if (delta == 0)
        return failf(c, "delta is 0");
    double count_d = ceil((limit - start) / delta);
    if (isnan(count_d) || count_d > (1 << 24))
        return failf(c, "start %g, limit %g and delta %g give more than %d elements to fold", start,
                     limit, delta, 1 << 24);
    int64_t count = count_d > 0 ? (int64_t)count_d : 0;
    enum const_type t = s->type == CONST_FLOAT ? CONST_FLOAT : CONST_INT;
    if (t == CONST_INT && (l->type == CONST_FLOAT || d->type == CONST_FLOAT))
        return failf(c, "start, limit and delta must have one type");
    struct value *v = set_out_const(c, 0, t, 1, &count);
    if (!v)
        return -1;
    for (int64_t k = 0; k < count; k++) {
        if (t == CONST_FLOAT)
            v->f[k] = (float)(start + (double)k * delta);
        else if (__builtin_mul_overflow(k, d->i[0], &v->i[k]) ||
                 __builtin_add_overflow(v->i[k], s->i[0], &v->i[k]))
            return failf(c, "the range overflows int64");
    }
    return 0;
}

/* ---- element-wise ---- */

enum binop {
    BIN_ADD,
    BIN_SUB,
    BIN_MUL,
    BIN_DIV,
    BIN_MAX,
    BIN_MIN,
    /* The ops with a bool result, folded on constants only (tide has no bool tensors). */
    BIN_EQUAL,
    BIN_LESS,
    BIN_GREATER,
    BIN_LESS_EQUAL,
    BIN_GREATER_EQUAL,
    BIN_AND,
    BIN_OR,
    BIN_XOR,
};

static bool is_logical(enum binop op)
{
    return op >= BIN_EQUAL;
}

/*
 * A comparison or logical op of x and y (And, Or and Xor read nonzero as
 * true), one expression for doubles and for int64 values, which are compared
 * as integers (a double cannot hold every int64).
 */
#define LOGICAL(op, x, y)                                                                          \
    ((op) == BIN_EQUAL           ? (x) == (y)                                                      \
     : (op) == BIN_LESS          ? (x) < (y)                                                       \
     : (op) == BIN_GREATER       ? (x) > (y)                                                       \
     : (op) == BIN_LESS_EQUAL    ? (x) <= (y)                                                      \
     : (op) == BIN_GREATER_EQUAL ? (x) >= (y)                                                      \
     : (op) == BIN_AND           ? (x) != 0 && (y) != 0                                            \
     : (op) == BIN_XOR           ? ((x) != 0) != ((y) != 0)                                        \
                                 : (x) != 0 || (y) != 0)

static bool logical(enum binop op, double x, double y)
{
    return LOGICAL(op, x, y);
}

static bool logical_i(enum binop op, int64_t x, int64_t y)
{
    return LOGICAL(op, x, y);
}

/* Folds a binary op of two known values; the output's type is a's (bool for the comparisons
 * and the logical ops). */
static int fold_binary(struct ctx *c, enum binop op, size_t out_k, struct value *a, struct value *b)
{
    int32_t r;
    int64_t dims[MAX_RANK];
    if (broadcast_shape(c, a->rank, a->dims, b->rank, b->dims, &r, dims) != 0)
        return -1;
    /* ONNX values are assigned once, so the output is neither a nor b. */
    struct value va = *a, vb = *b;
    bool is_float = a->type == CONST_FLOAT || b->type == CONST_FLOAT;
    enum const_type t = is_logical(op) ? CONST_BOOL : is_float ? CONST_FLOAT : CONST_INT;
    struct value *v = set_out_const(c, out_k, t, r, dims);
    int64_t count = numel(r, dims);
    for (int64_t k = 0; v && k < count; k++) {
        double x = get_num(&va, broadcast_index(r, dims, k, va.rank, va.dims));
        double y = get_num(&vb, broadcast_index(r, dims, k, vb.rank, vb.dims));
        if (t == CONST_FLOAT) {
            float fx = (float)x, fy = (float)y, z;
            switch (op) {
            case BIN_ADD:
                z = fx + fy;
                break;
            case BIN_SUB:
                z = fx - fy;
                break;
            case BIN_MUL:
                z = fx * fy;
                break;
            case BIN_DIV:
                z = fx / fy;
                break;
            case BIN_MAX:
                z = fx > fy ? fx : fy;
                break;
            default:
                z = fx < fy ? fx : fy;
                break;
            }
            v->f[k] = z;
        } else {
            if (is_logical(op) && is_float) {
                v->i[k] = logical(op, x, y);
                continue;
            }
            /* Integers wrap on overflow, as two's complement hardware does. */
            int64_t ix = va.i[broadcast_index(r, dims, k, va.rank, va.dims)];
            int64_t iy = vb.i[broadcast_index(r, dims, k, vb.rank, vb.dims)], z;
            if (is_logical(op)) {
                v->i[k] = logical_i(op, ix, iy);
                continue;
            }
            switch (op) {
            case BIN_ADD:
                z = (int64_t)((uint64_t)ix + (uint64_t)iy);
                break;
            case BIN_SUB:
                z = (int64_t)((uint64_t)ix - (uint64_t)iy);
                break;
            case BIN_MUL:
                z = (int64_t)((uint64_t)ix * (uint64_t)iy);
                break;
            case BIN_DIV:
                if (iy == 0) {
                    v = NULL;
                    failf(c, "integer division by zero");
                    continue;
                }
                z = ix == INT64_MIN && iy == -1 ? INT64_MIN : ix / iy;
                break;
            case BIN_MAX:
                z = ix > iy ? ix : iy;
                break;
            default:
                z = ix < iy ? ix : iy;
                break;
            }
            v->i[k] = z;
        }
    }
    return v ? 0 : -1;
}

/* "[2, 3, 4]" into buf. */
static const char *dims_text(char *buf, size_t size, int32_t rank, const int64_t *dims)
{
    size_t at = (size_t)snprintf(buf, size, "[");
    for (int32_t k = 0; k < rank && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, k ? ", %" PRId64 : "%" PRId64, dims[k]);
    if (at < size)
        snprintf(buf + at, size - at, "]");
    return buf;
}

/*
 * Add, Sub, Mul, Div and Equal before version 7 broadcast only when their
 * attribute broadcast is 1, and then B's shape is a run of A's dims starting
 * at axis (by default A's last ones), each equal to A's or 1; with broadcast
 * 0 the shapes are the same. Gives B's shape padded with 1s to A's rank, so
 * that NumPy broadcasting (what tide does) computes the same.
 */
static int legacy_broadcast(struct ctx *c, struct value *a, struct value *b, int32_t *rank,
                            int64_t dims[MAX_RANK])
{
    int32_t ra, rb;
    int64_t da[MAX_RANK], db[MAX_RANK];
    char ta[160], tb[160];
    if (value_shape(c, a, &ra, da) != 0 || value_shape(c, b, &rb, db) != 0)
        return -1;
    dims_text(ta, sizeof(ta), ra, da), dims_text(tb, sizeof(tb), rb, db);
    if (attr_i(c->node, "broadcast", 0) == 0) {
        if (ra != rb || (ra && memcmp(da, db, sizeof(int64_t) * (size_t)ra) != 0))
            return failf(c, "input shapes %s and %s differ and broadcast is 0", ta, tb);
    } else {
        const Onnx__AttributeProto *ax = attr(c->node, "axis");
        int64_t axis = ax && ax->has_i ? ax->i : ra - rb;
        if (rb > ra || axis < 0 || axis > ra - rb)
            return failf(c, "B's shape %s does not fit A's %s at axis %" PRId64, tb, ta, axis);
        for (int32_t k = 0; k < rb; k++)
            if (db[k] != da[axis + k] && db[k] != 1)
                return failf(c, "B's shape %s does not match A's %s at axis %" PRId64, tb, ta,
                             axis);
        for (int32_t k = 0; k < ra; k++)
            dims[k] = k >= axis && k < axis + rb ? db[k - axis] : 1;
        *rank = ra;
        return 0;
    }
    *rank = rb;
    memcpy(dims, db, sizeof(int64_t) * MAX_RANK);
    return 0;
}

/* Max, Min, Sum and Mean before version 8 take inputs of one shape (no broadcasting). */
static int same_shapes(struct ctx *c)
{
    int32_t r0, r;
    int64_t d0[MAX_RANK], d[MAX_RANK];
    for (size_t k = 0; k < c->node->n_input; k++) {
        struct value *v = in_value(c, k);
        if (!v || value_shape(c, v, k ? &r : &r0, k ? d : d0) != 0)
            return -1;
        if (k && (r != r0 || (r && memcmp(d, d0, sizeof(int64_t) * (size_t)r) != 0))) {
            char t0[160], t[160];
            return failf(c, "inputs 0 and %zu have shapes %s and %s (before version 8 they must "
                            "be the same)",
                         k, dims_text(t0, sizeof(t0), r0, d0), dims_text(t, sizeof(t), r, d));
        }
    }
    return 0;
}

/*
 * A comparison or logical op on tensors in the graph: a mask, float32 0 / 1 (tide has no bool
 * type). The comparisons are tide's Compare, of two float32 or two int32 tensors (int64
 * compared as int32: tide's integers); And is Mul, Or is Max and Xor is NotEqual of the two
 * masks, exact on 0 and 1.
 */
static int logical_refs(struct ctx *c, enum binop op, tide_ref x, tide_ref y)
{
    enum tide_data_type dx = tide_builder_dtype(c->b, x), dy = tide_builder_dtype(c->b, y);
    if (dx != dy)
        return failf(c, "inputs 0 and 1 are %s and %s tensors; %s compares two of one type",
                     dx == TIDE_DT_FLOAT32 ? "float" : "integer",
                     dy == TIDE_DT_FLOAT32 ? "float" : "integer", c->node->op_type);
    static const enum tide_compare_mode modes[] = {
        [BIN_EQUAL] = TIDE_COMPARE_EQUAL,
        [BIN_LESS] = TIDE_COMPARE_LESS,
        [BIN_GREATER] = TIDE_COMPARE_GREATER,
        [BIN_LESS_EQUAL] = TIDE_COMPARE_LESS_EQUAL,
        [BIN_GREATER_EQUAL] = TIDE_COMPARE_GREATER_EQUAL,
        [BIN_XOR] = TIDE_COMPARE_NOT_EQUAL,
    };
    tide_ref r;
    if (op == BIN_AND)
        r = tide_builder_mul(c->b, NULL, x, y);
    else if (op == BIN_OR)
        r = tide_builder_max(c->b, NULL, x, y);
    else
        r = tide_builder_compare(c->b, NULL, x, y, modes[op]);
    return set_out_mask(c, 0, r);
}

static int binary(struct ctx *c, enum binop op)
{
    struct value *a = in_value(c, 0), *b = a ? in_value(c, 1) : NULL;
    if (!b)
        return -1;
    /* B reshaped for the legacy broadcasting of versions before 7. */
    bool legacy = c->version < 7 && op != BIN_MAX && op != BIN_MIN;
    struct value legacy_b = *b;
    if (legacy && legacy_broadcast(c, a, b, &legacy_b.rank, legacy_b.dims) != 0)
        return -1;
    /* Fold constants, but never an initializer that is to be trained. */
    if (a->known && b->known && !a->trainable && !b->trainable)
        return fold_binary(c, op, 0, a, &legacy_b);
    tide_ref x, y;
    bool bools = op == BIN_AND || op == BIN_OR || op == BIN_XOR;
    if (bools ? mask_in(c, 0, &x) != 0 || mask_in(c, 1, &y) != 0
              : in_ref(c, 0, &x) != 0 || in_ref(c, 1, &y) != 0)
        return -1;
    if (is_logical(op)) {
        if (legacy && legacy_b.rank != b->rank)
            y = tide_builder_reshape(c->b, NULL, y, legacy_b.rank, legacy_b.dims);
        return logical_refs(c, op, x, y);
    }
    if (tide_builder_dtype(c->b, x) != TIDE_DT_FLOAT32 ||
        tide_builder_dtype(c->b, y) != TIDE_DT_FLOAT32)
        return failf(c, "integer arithmetic on tensors computed in the graph is not supported");
    if (legacy && legacy_b.rank != b->rank)
        y = tide_builder_reshape(c->b, NULL, y, legacy_b.rank, legacy_b.dims);
    tide_ref r;
    switch (op) {
    case BIN_ADD:
        r = tide_builder_add(c->b, NULL, x, y);
        break;
    case BIN_SUB:
        r = tide_builder_sub(c->b, NULL, x, y);
        break;
    case BIN_MUL:
        r = tide_builder_mul(c->b, NULL, x, y);
        break;
    case BIN_DIV:
        r = tide_builder_div(c->b, NULL, x, y);
        break;
    case BIN_MAX:
        r = tide_builder_max(c->b, NULL, x, y);
        break;
    default:
        r = tide_builder_min(c->b, NULL, x, y);
        break;
    }
    return set_out(c, 0, r);
}

static int op_add(struct ctx *c)
{
    return binary(c, BIN_ADD);
}
static int op_sub(struct ctx *c)
{
    return binary(c, BIN_SUB);
}
static int op_mul(struct ctx *c)
{
    return binary(c, BIN_MUL);
}
static int op_div(struct ctx *c)
{
    return binary(c, BIN_DIV);
}
static int op_equal(struct ctx *c)
{
    return binary(c, BIN_EQUAL);
}
static int op_less(struct ctx *c)
{
    return binary(c, BIN_LESS);
}
static int op_greater(struct ctx *c)
{
    return binary(c, BIN_GREATER);
}
static int op_less_or_equal(struct ctx *c)
{
    return binary(c, BIN_LESS_EQUAL);
}
static int op_greater_or_equal(struct ctx *c)
{
    return binary(c, BIN_GREATER_EQUAL);
}

/* And and Or take bool inputs: float constants are refused (ONNX's type check). */
static int logical_binary(struct ctx *c, enum binop op)
{
    for (size_t k = 0; k < 2; k++) {
        struct value *v = in_value(c, k);
        if (!v)
            return -1;
        if (v->known && v->type == CONST_FLOAT)
            return failf(c, "input %zu (\"%s\") is a float constant; %s takes bool inputs", k,
                         v->name, c->node->op_type);
    }
    return binary(c, op);
}
static int op_and(struct ctx *c)
{
    return logical_binary(c, BIN_AND);
}
static int op_or(struct ctx *c)
{
    return logical_binary(c, BIN_OR);
}
static int op_xor(struct ctx *c)
{
    return logical_binary(c, BIN_XOR);
}

/* Not: folded on a constant bool input; on a mask, Equal to 0. */
static int op_not(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    if (!x->known) {
        tide_ref r;
        if (mask_in(c, 0, &r) != 0)
            return -1;
        return set_out_mask(
            c, 0, tide_builder_compare(c->b, NULL, r, scalar(c, 0.0f), TIDE_COMPARE_EQUAL));
    }
    if (x->type == CONST_FLOAT)
        return failf(c, "input 0 (\"%s\") is a float constant; Not takes a bool input", x->name);
    struct value src = *x;
    bool replaced = lookup(c, c->node->output[0]) == x; /* an output of the same name */
    if (replaced)
        x->i = NULL;
    struct value *v = set_out_const(c, 0, CONST_BOOL, src.rank, src.dims);
    int64_t count = numel(src.rank, src.dims);
    for (int64_t k = 0; v && k < count; k++)
        v->i[k] = src.i[k] == 0;
    if (replaced)
        free(src.i);
    return v ? 0 : -1;
}

/* Max and Min take one or more inputs in ONNX; tide's take two: a chain. */
static int variadic(struct ctx *c, enum binop op)
{
    const Onnx__NodeProto *n = c->node;
    if (c->version < 8 && same_shapes(c) != 0)
        return -1;
    if (n->n_input == 2)
        return binary(c, op);
    tide_ref acc;
    if (in_ref(c, 0, &acc) != 0)
        return -1;
    for (size_t k = 1; k < n->n_input; k++) {
        tide_ref y;
        if (in_ref(c, k, &y) != 0)
            return -1;
        if (op == BIN_ADD)
            acc = tide_builder_add(c->b, NULL, acc, y);
        else if (op == BIN_MAX)
            acc = tide_builder_max(c->b, NULL, acc, y);
        else
            acc = tide_builder_min(c->b, NULL, acc, y);
        if (check_builder(c, acc) != 0)
            return -1;
    }
    if (n->n_input == 1 && tide_builder_dtype(c->b, acc) != TIDE_DT_FLOAT32)
        return failf(c, "integer tensors are not supported");
    return set_out(c, 0, n->n_input == 1 ? tide_builder_identity(c->b, NULL, acc) : acc);
}

static int op_max(struct ctx *c)
{
    return variadic(c, BIN_MAX);
}
static int op_min(struct ctx *c)
{
    return variadic(c, BIN_MIN);
}
static int op_sum(struct ctx *c)
{
    return variadic(c, BIN_ADD);
}

/* A float tensor input (ints are refused: tide's math ops are float32). */
static int float_in(struct ctx *c, size_t k, tide_ref *r)
{
    if (in_ref(c, k, r) != 0)
        return -1;
    if (tide_builder_dtype(c->b, *r) != TIDE_DT_FLOAT32)
        return failf(c, "input %zu is an integer tensor; tide computes this op in float32 only", k);
    return 0;
}

/*
 * Neg or Abs of a known integer tensor (axes and sizes computed from
 * constants, as ONNX's function bodies of LayerNormalization do), folded:
 * tide has no integer arithmetic in the graph. Two's complement wraps
 * (-INT64_MIN is INT64_MIN, as numpy gives). 1 when x is not such a value.
 */
static int fold_int_unary(struct ctx *c, bool negate)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    if (!x->known || x->type != CONST_INT)
        return 1;
    struct value vx = *x;
    struct value *v = set_out_const(c, 0, CONST_INT, vx.rank, vx.dims);
    if (!v)
        return -1;
    for (int64_t k = 0; k < numel(vx.rank, vx.dims); k++) {
        int64_t i = vx.i[k];
        v->i[k] = negate || i < 0 ? (int64_t)(0 - (uint64_t)i) : i;
    }
    return 0;
}

static int unary(struct ctx *c, tide_ref (*fn)(tide_builder *, const char *, tide_ref))
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    return set_out(c, 0, fn(c->b, NULL, x));
}

static int op_relu(struct ctx *c)
{
    return unary(c, tide_builder_relu);
}
static int op_sigmoid(struct ctx *c)
{
    return unary(c, tide_builder_sigmoid);
}
static int op_tanh(struct ctx *c)
{
    return unary(c, tide_builder_tanh);
}
/*
 * Output 0 as f(mode, e) of each element e of input 0 when that is a known
 * float constant (not an initializer that is trained): 0 when folded, 1
 * when input 0 is not such a constant (nothing done), -1 on error.
 */
static int fold_float_unary(struct ctx *c, float (*f)(int, float), int mode)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    if (!x->known || x->trainable || x->type != CONST_FLOAT)
        return 1;
    /* ONNX values are assigned once, so the output is not x. */
    struct value vx = *x;
    struct value *y = set_out_const(c, 0, CONST_FLOAT, vx.rank, vx.dims);
    int64_t n = numel(vx.rank, vx.dims);
    for (int64_t k = 0; y && k < n; k++)
        y->f[k] = f(mode, vx.f[k]);
    return y ? 0 : -1;
}

/*
 * Exp, Log and Sqrt of a constant (not an initializer that is trained) are
 * folded by the CPU kernels' functions (kernels/cpu/math.c), since they
 * appear in index computations: T5's relative-position buckets take the Log
 * of a distance, Cast to an integer, then Min and Add it, which tide does in
 * integers only on constants. Otherwise tide's op.
 */
enum host_math { HOST_EXP, HOST_LOG, HOST_SQRT };
static float host_math(int fn, float x)
{
    return fn == HOST_EXP ? expf(x) : fn == HOST_LOG ? logf(x) : sqrtf(x);
}
static int unary_folded(struct ctx *c, enum host_math fn,
                        tide_ref (*op)(tide_builder *, const char *, tide_ref))
{
    int folded = fold_float_unary(c, host_math, fn);
    return folded <= 0 ? folded : unary(c, op);
}
static int op_exp(struct ctx *c)
{
    return unary_folded(c, HOST_EXP, tide_builder_exp);
}
static int op_log(struct ctx *c)
{
    return unary_folded(c, HOST_LOG, tide_builder_log);
}
static int op_sqrt(struct ctx *c)
{
    return unary_folded(c, HOST_SQRT, tide_builder_sqrt);
}

/*
 * Mod of two constants, folded (PyTorch's window shifts in a Swin
 * Transformer compute their offsets so): integers with fmod 0 take the
 * divisor's sign, as Python's %; with fmod 1 the dividend's, as C's; floats
 * need fmod 1 (fmodf). Mod of tensors computed in the graph is refused.
 */
static int op_mod(struct ctx *c)
{
    struct value *a = in_value(c, 0), *b = a ? in_value(c, 1) : NULL;
    if (!b)
        return -1;
    bool fmod_c = attr_i(c->node, "fmod", 0) != 0;
    if (!a->known || !b->known || a->trainable || b->trainable)
        return failf(c, "Mod of tensors computed in the graph is not supported (only of "
                        "constants, which are folded)");
    if ((a->type == CONST_FLOAT) != (b->type == CONST_FLOAT) || a->type == CONST_BOOL ||
        b->type == CONST_BOOL)
        return failf(c, "inputs 0 and 1 must be two integer or two float tensors");
    if (a->type == CONST_FLOAT && !fmod_c)
        return failf(c, "fmod 0 on float tensors (ONNX requires fmod 1 for them)");
    int32_t r;
    int64_t dims[MAX_RANK];
    if (broadcast_shape(c, a->rank, a->dims, b->rank, b->dims, &r, dims) != 0)
        return -1;
    struct value va = *a, vb = *b;
    struct value *v = set_out_const(c, 0, va.type, r, dims);
    if (!v)
        return -1;
    for (int64_t k = 0; k < numel(r, dims); k++) {
        int64_t ka = broadcast_index(r, dims, k, va.rank, va.dims);
        int64_t kb = broadcast_index(r, dims, k, vb.rank, vb.dims);
        if (va.type == CONST_FLOAT) {
            v->f[k] = fmodf(va.f[ka], vb.f[kb]);
            continue;
        }
        int64_t x = va.i[ka], y = vb.i[kb];
        if (y == 0)
            return failf(c, "integer Mod by zero (element %" PRId64 " of input 1)", kb);
        int64_t m = y == -1 ? 0 : x % y; /* INT64_MIN % -1 overflows in C */
        if (!fmod_c && m != 0 && (m < 0) != (y < 0))
            m += y;
        v->i[k] = m;
    }
    return 0;
}

static int op_neg(struct ctx *c)
{
    int folded = fold_int_unary(c, true);
    return folded <= 0 ? folded : unary(c, tide_builder_neg);
}

static int op_identity(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    if (x->known && !x->trainable)
        return copy_const_to(c, x, x->rank, x->dims);
    tide_ref r;
    if (in_ref(c, 0, &r) != 0)
        return -1;
    return set_out(c, 0, r);
}

/*
 * Pow of two tensors, a base and an exponent computed in the graph (or a
 * trainable initializer: GeM pooling's p): tide's Pow, powf with NumPy
 * broadcasting (before opset 7, the legacy broadcast of B), whose gradient
 * reaches both, as PyTorch's does. float32 only: an integer base or
 * exponent is refused, naming it.
 */
static int pow_tensors(struct ctx *c, tide_ref x)
{
    static const char *const roles[2] = {"base", "exponent"};
    tide_ref y;
    if (in_ref(c, 1, &y) != 0)
        return -1;
    const tide_ref refs[2] = {x, y};
    for (size_t k = 0; k < 2; k++)
        if (tide_builder_dtype(c->b, refs[k]) != TIDE_DT_FLOAT32)
            return failf(c,
                         "input %zu (\"%s\", the %s) is an integer tensor; Pow of tensors "
                         "computed in the graph is float32 only",
                         k, c->node->input[k], roles[k]);
    if (c->version < 7) {
        struct value *a = in_value(c, 0), *b = in_value(c, 1);
        int32_t rank;
        int64_t dims[MAX_RANK];
        if (legacy_broadcast(c, a, b, &rank, dims) != 0)
            return -1;
        if (rank != b->rank)
            y = tide_builder_reshape(c->b, NULL, y, rank, dims);
    }
    return set_out(c, 0, tide_builder_pow(c->b, NULL, x, y));
}

/*
 * Pow. With one constant exponent p (not one to train) of rank up to the
 * base's: integers up to 64 in magnitude multiply x by itself (by squaring;
 * 1 / that for a negative p), exact in sign for a negative base; 0.5 is
 * Sqrt. Any other p is exp(p log x), which for a non-integer p gives what
 * powf gives at every x: NaN below 0, 0 or inf at 0, the power above.
 * Any other exponent (an infinite or NaN p too) goes to pow_tensors.
 */
static int op_pow(struct ctx *c)
{
    struct value *e = in_value(c, 1);
    if (!e)
        return -1;
    tide_ref x;
    if (!e->known || e->trainable || numel(e->rank, e->dims) != 1) {
        if (in_ref(c, 0, &x) != 0)
            return -1;
        return pow_tensors(c, x);
    }
    double p = get_num(e, 0);
    if (float_in(c, 0, &x) != 0)
        return -1;
    /* An exponent of more dims than x changes the output's rank: Pow's broadcast gives it. */
    int32_t xr;
    int64_t xd[MAX_RANK];
    if (ref_shape(c, x, &xr, xd) != 0)
        return -1;
    if (e->rank > xr || !isfinite(p))
        return pow_tensors(c, x);
    if (p == 0.5)
        return set_out(c, 0, tide_builder_sqrt(c->b, NULL, x));
    if (p == 0) /* 1 everywhere, NaN included, as powf */
        return set_out(c, 0, tide_builder_add(c->b, NULL, tide_builder_scale(c->b, NULL, x, 0.0f),
                                              scalar(c, 1.0f)));
    if (p != floor(p) || fabs(p) > 64) {
        tide_ref l = tide_builder_scale(c->b, NULL, tide_builder_log(c->b, NULL, x), (float)p);
        return set_out(c, 0, tide_builder_exp(c->b, NULL, l));
    }
    int64_t q = (int64_t)fabs(p);
    tide_ref r = TIDE_REF_NONE, sq = x;
    for (; q; q >>= 1) {
        if (q & 1)
            r = r.id < 0 ? sq : tide_builder_mul(c->b, NULL, r, sq);
        if (q > 1)
            sq = tide_builder_mul(c->b, NULL, sq, sq);
    }
    if (p < 0)
        r = tide_builder_div(c->b, NULL, scalar(c, 1.0f), r);
    else if (p == 1)
        r = tide_builder_identity(c->b, NULL, x);
    return set_out(c, 0, r);
}

/* Where with a constant condition: x * m + y * (1 - m) with m the condition as 0/1, computed
 * with the constant side folded on the host, so finite values come out exactly. */
static int op_where(struct ctx *c)
{
    struct value *cond = in_value(c, 0), *x = cond ? in_value(c, 1) : NULL,
                 *y = x ? in_value(c, 2) : NULL;
    if (!y)
        return -1;
    if (!cond->known) {
        /* A mask computed in the graph (a padding mask): tide's Select, which passes the
         * chosen values as they are (-inf included). */
        tide_ref rc, rx, ry;
        if (mask_in(c, 0, &rc) != 0 || in_ref(c, 1, &rx) != 0 || in_ref(c, 2, &ry) != 0)
            return -1;
        if (tide_builder_dtype(c->b, rx) != TIDE_DT_FLOAT32 ||
            tide_builder_dtype(c->b, ry) != TIDE_DT_FLOAT32)
            return failf(c, "Where of integer tensors is supported only with a constant condition "
                            "(tide's Select is float32)");
        tide_ref r = tide_builder_select(c->b, NULL, rc, rx, ry);
        return x->mask && y->mask ? set_out_mask(c, 0, r) : set_out(c, 0, r);
    }
    if (cond->type == CONST_FLOAT) /* it holds no integers to read as bools */
        return failf(c, "the condition (input \"%s\") is a float constant; Where takes a bool "
                        "condition",
                     cond->name);
    int32_t rx, ry, r1, r;
    int64_t dx[MAX_RANK], dy[MAX_RANK], d1[MAX_RANK], d[MAX_RANK];
    if (value_shape(c, x, &rx, dx) != 0 || value_shape(c, y, &ry, dy) != 0 ||
        broadcast_shape(c, cond->rank, cond->dims, rx, dx, &r1, d1) != 0 ||
        broadcast_shape(c, r1, d1, ry, dy, &r, d) != 0)
        return -1;
    int64_t count = numel(r, d);
    if (x->known && y->known && !x->trainable && !y->trainable) {
        struct value vx = *x, vy = *y, vc = *cond;
        struct value *v = set_out_const(c, 0, x->type, r, d);
        for (int64_t k = 0; v && k < count; k++) {
            int64_t kc = broadcast_index(r, d, k, vc.rank, vc.dims);
            const struct value *src = vc.i[kc] ? &vx : &vy;
            int64_t ks = broadcast_index(r, d, k, src->rank, src->dims);
            if (v->type == CONST_FLOAT)
                v->f[k] = (float)get_num(src, ks);
            else if (src->type != CONST_FLOAT)
                v->i[k] = src->i[ks];
            else if (!float_to_int(get_num(src, ks), &v->i[k]))
                return failf(c, "%g has no int64 value", get_num(src, ks));
        }
        return v ? 0 : -1;
    }
    /* One side (or both) in the graph: float only. */
    int64_t cd[MAX_RANK];
    memcpy(cd, d, sizeof(cd));
    if (count > FOLD_MAX_ELEMENTS)
        return failf(
            c, "a condition of %" PRId64 " elements is more than the import folds (%" PRId64 ")",
            count, FOLD_MAX_ELEMENTS);
    float *mask = malloc((size_t)(count ? count : 1) * sizeof(float));
    float *inv = malloc((size_t)(count ? count : 1) * sizeof(float));
    if (!mask || !inv) {
        free(mask), free(inv);
        return failf(c, "out of memory");
    }
    for (int64_t k = 0; k < count; k++) {
        int64_t kc = broadcast_index(r, d, k, cond->rank, cond->dims);
        mask[k] = cond->i[kc] ? 1.0f : 0.0f;
        inv[k] = 1.0f - mask[k];
    }
    tide_ref parts[2];
    struct value *side[2] = {x, y};
    float *sel[2] = {mask, inv};
    int rc = 0;
    for (int s = 0; s < 2 && rc == 0; s++) {
        struct value *v = side[s];
        if (v->known && !v->trainable && v->type == CONST_FLOAT) {
            /* The constant side, already selected: its values where chosen, 0 elsewhere. */
            float *sel_v = malloc((size_t)(count ? count : 1) * sizeof(float));
            if (!sel_v) {
                rc = failf(c, "out of memory");
                break;
            }
            for (int64_t k = 0; k < count; k++)
                sel_v[k] = sel[s][k] != 0
                               ? (float)get_num(v, broadcast_index(r, d, k, v->rank, v->dims))
                               : 0.0f;
            parts[s] = tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, r, cd, sel_v);
            free(sel_v);
            rc = check_builder(c, parts[s]);
            continue;
        }
        tide_ref t;
        if ((rc = float_in(c, (size_t)s + 1, &t)) != 0)
            break;
        /* t * 1 where chosen and t * 0 elsewhere: exact for finite t. */
        tide_ref m = tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, r, cd, sel[s]);
        parts[s] = tide_builder_mul(c->b, NULL, t, m);
        rc = check_builder(c, parts[s]);
    }
    free(mask);
    free(inv);
    if (rc != 0)
        return -1;
    return set_out(c, 0, tide_builder_add(c->b, NULL, parts[0], parts[1]));
}

/* ---- linear algebra ---- */

static int op_matmul(struct ctx *c)
{
    tide_ref a, b;
    if (float_in(c, 0, &a) != 0 || float_in(c, 1, &b) != 0)
        return -1;
    int32_t ra, rb;
    int64_t da[MAX_RANK], db[MAX_RANK];
    if (ref_shape(c, a, &ra, da) != 0 || ref_shape(c, b, &rb, db) != 0)
        return -1;
    if (ra == 0 || rb == 0)
        return failf(c, "scalar operands are not allowed");
    /* NumPy's rank-1 rules: a [K] is [1, K], b [K] is [K, 1], and the 1 is dropped after. */
    int32_t out_rank;
    int64_t out[MAX_RANK];
    if (ra == 1) {
        a = tide_builder_reshape(c->b, NULL, a, 2, (int64_t[]){1, da[0]});
        if (check_builder(c, a) != 0)
            return -1;
    }
    if (rb == 1) {
        b = tide_builder_reshape(c->b, NULL, b, 2, (int64_t[]){db[0], 1});
        if (check_builder(c, b) != 0)
            return -1;
    }
    tide_ref r = (ra <= 2 && rb <= 2) ? tide_builder_matmul(c->b, NULL, a, b, false, false)
                                      : tide_builder_batch_matmul(c->b, NULL, a, b, false, false);
    if (check_builder(c, r) != 0)
        return -1;
    if (ra == 1 || rb == 1) {
        if (ref_shape(c, r, &out_rank, out) != 0)
            return -1;
        int64_t keep[MAX_RANK];
        int32_t n = 0;
        for (int32_t k = 0; k < out_rank; k++) {
            if ((ra == 1 && k == out_rank - 2) || (rb == 1 && k == out_rank - 1))
                continue;
            keep[n++] = out[k];
        }
        r = tide_builder_reshape(c->b, NULL, r, n, keep);
    }
    return set_out(c, 0, r);
}

static int op_gemm(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref a, b;
    if (float_in(c, 0, &a) != 0 || float_in(c, 1, &b) != 0)
        return -1;
    float alpha = attr_f(n, "alpha", 1.0f), beta = attr_f(n, "beta", 1.0f);
    tide_ref r = tide_builder_matmul(c->b, NULL, a, b, attr_i(n, "transA", 0) != 0,
                                     attr_i(n, "transB", 0) != 0);
    if (check_builder(c, r) != 0)
        return -1;
    if (alpha != 1.0f)
        r = tide_builder_scale(c->b, NULL, r, alpha);
    if (has_input(n, 2) && beta != 0.0f) {
        tide_ref bias;
        if (float_in(c, 2, &bias) != 0)
            return -1;
        if (c->version < 7 && attr_i(n, "broadcast", 0) == 0) {
            /* Before version 7, C broadcasts only with broadcast 1; otherwise it is [M, N]. */
            int32_t rr, rc;
            int64_t dr[MAX_RANK], dc[MAX_RANK];
            if (ref_shape(c, r, &rr, dr) != 0 || ref_shape(c, bias, &rc, dc) != 0)
                return -1;
            if (rc != 2 || dc[0] != dr[0] || dc[1] != dr[1]) {
                char tr[160], tc[160];
                return failf(c, "C has shape %s, not the product's %s, and broadcast is 0",
                             dims_text(tc, sizeof(tc), rc, dc), dims_text(tr, sizeof(tr), rr, dr));
            }
        }
        if (beta != 1.0f)
            bias = tide_builder_scale(c->b, NULL, bias, beta);
        r = tide_builder_add(c->b, NULL, r, bias);
    }
    return set_out(c, 0, r);
}

/*
 * ---- Einsum: lowered to Transpose, Reshape, ReduceSum and (Batch)MatMul ----
 *
 * Indices are numbered 0..51 for A-Z and a-z (ASCII order, the implicit
 * output's order as NumPy has it), then EINSUM_ELLIPSIS + j for the
 * ellipsis' dimensions, right-aligned across operands. The operands are
 * folded left to right: an index no later operand and not the output has is
 * summed out of each side first; then the indices both sides have are batch
 * (still needed later) or contracted (not), each side is transposed to
 * [batch, own, contracted] (the other's [batch, contracted, own]),
 * flattened to a matrix per batch entry and multiplied. The result is
 * transposed to the output's order. Every step is an op with a gradient.
 */
#define EINSUM_ELLIPSIS     52
#define EINSUM_INDICES      (EINSUM_ELLIPSIS + MAX_RANK)
#define EINSUM_MAX_OPERANDS 16

/* An index's letter, or '.' for one of the ellipsis' dimensions. */
static char einsum_letter(int id)
{
    return (char)(id < 26 ? 'A' + id : id < EINSUM_ELLIPSIS ? 'a' + id - 26 : '.');
}

/* Of a term's indices (at most MAX_RANK), in the order of its axes. */
struct einsum_term {
    int32_t n;
    int8_t id[MAX_RANK];
};

/*
 * Reads term text[0..len) (letters and at most one "...") into t, the
 * ellipsis standing for ell dimensions (*has_ellipsis: it is there); ell -1
 * counts them only: *letters gets the number of letters. what names the term.
 */
static int einsum_parse(struct ctx *c, const char *eq, const char *text, size_t len,
                        const char *what, int32_t ell, int32_t total_ell, struct einsum_term *t,
                        int32_t *letters, bool *has_ellipsis)
{
    t->n = 0;
    *letters = 0;
    *has_ellipsis = false;
    for (size_t k = 0; k < len; k++) {
        char ch = text[k];
        if (ch == '.') {
            if (*has_ellipsis || k + 2 >= len || text[k + 1] != '.' || text[k + 2] != '.')
                return failf(c, "equation \"%s\": %s has a '.' that is not one \"...\"", eq, what);
            *has_ellipsis = true;
            k += 2;
            for (int32_t j = 0; ell >= 0 && j < ell; j++) {
                if (t->n == MAX_RANK)
                    return failf(c, "equation \"%s\": %s has more than %d indices", eq, what,
                                 MAX_RANK);
                t->id[t->n++] = (int8_t)(EINSUM_ELLIPSIS + total_ell - ell + j);
            }
            continue;
        }
        int id = ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? 26 + ch - 'a' : -1;
        if (id < 0)
            return failf(c, "equation \"%s\": %s has '%c', which is not an index (A-Z, a-z)", eq,
                         what, ch);
        (*letters)++;
        if (ell < 0)
            continue;
        for (int32_t j = 0; j < t->n; j++) {
            if (t->id[j] == id)
                return failf(c,
                             "equation \"%s\": index '%c' appears twice in %s (a diagonal), "
                             "which tide does not lower",
                             eq, ch, what);
        }
        if (t->n == MAX_RANK)
            return failf(c, "equation \"%s\": %s has more than %d indices", eq, what, MAX_RANK);
        t->id[t->n++] = (int8_t)id;
    }
    return 0;
}

static int einsum_find(const int8_t *ids, int32_t n, int id)
{
    for (int32_t k = 0; k < n; k++)
        if (ids[k] == id)
            return k;
    return -1;
}

/* x (indices have[0..n)) transposed so that its indices follow want[0..n), a permutation. */
static tide_ref einsum_order(struct ctx *c, tide_ref x, const int8_t *have, const int8_t *want,
                             int32_t n)
{
    int64_t perm[MAX_RANK];
    bool moved = false;
    for (int32_t k = 0; k < n; k++) {
        perm[k] = einsum_find(have, n, want[k]);
        moved |= perm[k] != k;
    }
    return moved ? tide_builder_transpose(c->b, NULL, x, perm, n) : x;
}

/* Sums x (indices t) over the indices that keep[] does not hold; t keeps the others. */
static int einsum_sum_out(struct ctx *c, tide_ref *x, struct einsum_term *t, const bool *keep)
{
    int64_t axes[MAX_RANK];
    int32_t n_axes = 0, n = 0;
    for (int32_t k = 0; k < t->n; k++) {
        if (keep[t->id[k]])
            t->id[n++] = t->id[k];
        else
            axes[n_axes++] = k;
    }
    if (n_axes == 0)
        return 0;
    t->n = n;
    *x = tide_builder_reduce_sum(c->b, NULL, *x, axes, n_axes, false);
    return check_builder(c, *x);
}

/* The sizes of indices ids[0..n) into dims (when not NULL); their product returned. */
static int64_t einsum_sizes(const int8_t *ids, int32_t n, const int64_t *size, int64_t *dims)
{
    int64_t p = 1;
    for (int32_t k = 0; k < n; k++) {
        if (dims)
            dims[k] = size[ids[k]];
        p *= size[ids[k]];
    }
    return p;
}

/*
 * *a (indices ta) times b (indices tb), summed over the indices both hold
 * that keep[] does not: *a becomes the product, its indices the batch ones,
 * then a's own, then b's own. Each side holds only indices that are kept or
 * that the other holds.
 */
static int einsum_pair(struct ctx *c, tide_ref *a, struct einsum_term *ta, tide_ref b,
                       const struct einsum_term *tb, const bool *keep, const int64_t *size)
{
    int8_t batch[MAX_RANK], own_a[MAX_RANK], own_b[MAX_RANK], sum[MAX_RANK];
    int32_t nb = 0, na = 0, nn = 0, ns = 0;
    for (int32_t k = 0; k < ta->n; k++) {
        int id = ta->id[k];
        if (einsum_find(tb->id, tb->n, id) < 0)
            own_a[na++] = (int8_t)id;
        else if (keep[id])
            batch[nb++] = (int8_t)id;
        else
            sum[ns++] = (int8_t)id;
    }
    for (int32_t k = 0; k < tb->n; k++)
        if (einsum_find(ta->id, ta->n, tb->id[k]) < 0)
            own_b[nn++] = tb->id[k];
    if (nb + na + nn > MAX_RANK)
        return failf(c, "the product of two operands would have %d indices, more than %d",
                     nb + na + nn, MAX_RANK);
    int8_t want_a[MAX_RANK], want_b[MAX_RANK];
    memcpy(want_a, batch, (size_t)nb), memcpy(want_a + nb, own_a, (size_t)na);
    memcpy(want_a + nb + na, sum, (size_t)ns);
    memcpy(want_b, batch, (size_t)nb), memcpy(want_b + nb, sum, (size_t)ns);
    memcpy(want_b + nb + ns, own_b, (size_t)nn);
    int64_t batches = einsum_sizes(batch, nb, size, NULL), m = einsum_sizes(own_a, na, size, NULL),
            k = einsum_sizes(sum, ns, size, NULL), n = einsum_sizes(own_b, nn, size, NULL);
    tide_ref x = einsum_order(c, *a, ta->id, want_a, ta->n);
    tide_ref y = einsum_order(c, b, tb->id, want_b, tb->n);
    tide_ref r;
    if (ns == 0) {
        /* Nothing contracted (an outer or element-wise product): a broadcasting Mul of
         * [batch, own a, 1...] and [batch, 1..., own b], not MatMuls of 1 x 1 matrices. */
        int64_t dx[MAX_RANK], dy[MAX_RANK];
        int32_t n_out = nb + na + nn;
        einsum_sizes(want_a, nb + na, size, dx);
        einsum_sizes(want_b, nb, size, dy);
        einsum_sizes(own_b, nn, size, dy + nb + na);
        for (int32_t j = nb + na; j < n_out; j++)
            dx[j] = 1;
        for (int32_t j = nb; j < nb + na; j++)
            dy[j] = 1;
        x = tide_builder_reshape(c->b, NULL, x, n_out, dx);
        y = tide_builder_reshape(c->b, NULL, y, n_out, dy);
        r = tide_builder_mul(c->b, NULL, x, y);
    } else if (nb > 0) {
        x = tide_builder_reshape(c->b, NULL, x, 3, (int64_t[]){batches, m, k});
        y = tide_builder_reshape(c->b, NULL, y, 3, (int64_t[]){batches, k, n});
        r = tide_builder_batch_matmul(c->b, NULL, x, y, false, false);
    } else {
        x = tide_builder_reshape(c->b, NULL, x, 2, (int64_t[]){m, k});
        y = tide_builder_reshape(c->b, NULL, y, 2, (int64_t[]){k, n});
        r = tide_builder_matmul(c->b, NULL, x, y, false, false);
    }
    ta->n = 0;
    int64_t dims[MAX_RANK];
    for (int32_t j = 0; j < nb; j++)
        ta->id[ta->n++] = batch[j];
    for (int32_t j = 0; j < na; j++)
        ta->id[ta->n++] = own_a[j];
    for (int32_t j = 0; j < nn; j++)
        ta->id[ta->n++] = own_b[j];
    einsum_sizes(ta->id, ta->n, size, dims);
    *a = ns == 0 ? r : tide_builder_reshape(c->b, NULL, r, ta->n, dims); /* Mul's is that shape */
    return check_builder(c, *a);
}

static int op_einsum(struct ctx *c)
{
    const Onnx__NodeProto *node = c->node;
    const Onnx__AttributeProto *at = attr(node, "equation");
    if (!at || !at->has_s)
        return failf(c, "attribute equation is required");
    char eq[256];
    size_t len = 0;
    for (size_t k = 0; k < at->s.len; k++) {
        if (at->s.data[k] == ' ')
            continue;
        if (len + 1 == sizeof(eq) || at->s.data[k] == 0)
            return failf(c, "the equation is longer than %zu characters or holds a NUL",
                         sizeof(eq) - 1);
        eq[len++] = (char)at->s.data[k];
    }
    eq[len] = 0;
    size_t n_in = node->n_input;
    if (n_in == 0 || n_in > EINSUM_MAX_OPERANDS)
        return failf(c, "%zu inputs; tide lowers Einsum of 1 to %d", n_in, EINSUM_MAX_OPERANDS);
    tide_ref x[EINSUM_MAX_OPERANDS];
    int32_t rank[EINSUM_MAX_OPERANDS];
    int64_t dims[EINSUM_MAX_OPERANDS][MAX_RANK];
    for (size_t k = 0; k < n_in; k++) {
        if (float_in(c, k, &x[k]) != 0 || ref_shape(c, x[k], &rank[k], dims[k]) != 0)
            return -1;
    }
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : len;
    /* Operand terms: their text, then (once the ellipsis' longest is known) their indices. */
    const char *text[EINSUM_MAX_OPERANDS];
    size_t text_len[EINSUM_MAX_OPERANDS], n_terms = 0;
    for (size_t start = 0, k = 0; k <= lhs_len; k++) {
        if (k < lhs_len && eq[k] != ',')
            continue;
        if (n_terms == EINSUM_MAX_OPERANDS)
            return failf(c, "equation \"%s\" has more than %d operands", eq, EINSUM_MAX_OPERANDS);
        text[n_terms] = eq + start, text_len[n_terms++] = k - start;
        start = k + 1;
    }
    if (n_terms != n_in)
        return failf(c, "equation \"%s\" has %zu operands, the node %zu inputs", eq, n_terms, n_in);
    struct einsum_term term[EINSUM_MAX_OPERANDS], out;
    int32_t ell[EINSUM_MAX_OPERANDS], total_ell = 0, letters;
    bool has_ellipsis;
    char what[32];
    for (size_t k = 0; k < n_in; k++) {
        snprintf(what, sizeof(what), "input %zu", k);
        if (einsum_parse(c, eq, text[k], text_len[k], what, -1, 0, &term[k], &letters,
                         &has_ellipsis) != 0)
            return -1;
        ell[k] = rank[k] - letters;
        if (has_ellipsis ? ell[k] < 0 : ell[k] != 0)
            return failf(c, "equation \"%s\": input %zu has rank %d, its term %d indices%s", eq, k,
                         rank[k], letters, has_ellipsis ? " and \"...\"" : "");
        total_ell = ell[k] > total_ell ? ell[k] : total_ell;
    }
    int64_t size[EINSUM_INDICES];
    int count[EINSUM_INDICES] = {0};
    int source[EINSUM_INDICES] = {0};
    for (size_t k = 0; k < n_in; k++) {
        snprintf(what, sizeof(what), "input %zu", k);
        if (einsum_parse(c, eq, text[k], text_len[k], what, ell[k], total_ell, &term[k], &letters,
                         &has_ellipsis) != 0)
            return -1;
        for (int32_t a = 0; a < term[k].n; a++) {
            int id = term[k].id[a];
            if (count[id]++ == 0) {
                size[id] = dims[k][a];
                source[id] = (int)k;
            } else if (size[id] != dims[k][a]) {
                return failf(c,
                             "equation \"%s\": index '%c' is %" PRId64 " in input %d and %" PRId64
                             " in input %zu (tide does not broadcast Einsum's indices)",
                             eq, einsum_letter(id), size[id], source[id], dims[k][a], k);
            }
        }
    }
    bool in_out[EINSUM_INDICES] = {0};
    if (arrow) {
        if (einsum_parse(c, eq, arrow + 2, strlen(arrow + 2), "the output", total_ell, total_ell,
                         &out, &letters, &has_ellipsis) != 0)
            return -1;
        if (total_ell > 0 && !has_ellipsis)
            return failf(c, "equation \"%s\": the inputs' \"...\" is not in the output", eq);
        for (int32_t a = 0; a < out.n; a++) {
            if (count[out.id[a]] == 0)
                return failf(c, "equation \"%s\": output index '%c' is in no input", eq,
                             einsum_letter(out.id[a]));
        }
    } else {
        /* Implicit: the ellipsis' dimensions, then the indices met once, in ASCII order. */
        out.n = 0;
        for (int id = 0; id < EINSUM_INDICES; id++) {
            int label = (id + EINSUM_ELLIPSIS) % EINSUM_INDICES; /* "..." first */
            if (label >= EINSUM_ELLIPSIS ? label >= EINSUM_ELLIPSIS + total_ell : count[label] != 1)
                continue;
            if (out.n == MAX_RANK)
                return failf(c, "equation \"%s\": the output has more than %d indices", eq,
                             MAX_RANK);
            out.id[out.n++] = (int8_t)label;
        }
    }
    for (int32_t a = 0; a < out.n; a++)
        in_out[out.id[a]] = true;
    /* Fold left to right; keep[id]: the output or an operand not yet folded has id. */
    bool keep[EINSUM_INDICES];
    tide_ref acc = x[0];
    struct einsum_term t = term[0];
    for (size_t k = 0; k < n_in; k++) {
        memcpy(keep, in_out, sizeof(keep));
        for (size_t j = k + 1; j < n_in; j++)
            for (int32_t a = 0; a < term[j].n; a++)
                keep[term[j].id[a]] = true;
        if (k == 0) {
            if (einsum_sum_out(c, &acc, &t, keep) != 0)
                return -1;
            continue;
        }
        /* b's own indices that nothing after needs are summed first. */
        bool keep_b[EINSUM_INDICES];
        memcpy(keep_b, keep, sizeof(keep_b));
        for (int32_t a = 0; a < t.n; a++)
            keep_b[t.id[a]] = true;
        tide_ref b = x[k];
        struct einsum_term tb = term[k];
        if (einsum_sum_out(c, &b, &tb, keep_b) != 0 ||
            einsum_pair(c, &acc, &t, b, &tb, keep, size) != 0)
            return -1;
    }
    return set_out(c, 0, einsum_order(c, acc, t.id, out.id, out.n));
}

/*
 * ---- CumSum: a running sum in log2(n) rounds of Slice, Add and Concat ----
 *
 * Hillis and Steele's scan along the axis of n elements: in round k (shift
 * s = 1, 2, 4, ... < n), y[i] += y[i - s] for i >= s (reversed: y[i] +=
 * y[i + s] for i < n - s), each round a Concat of the untouched first s
 * (last s) elements and the Add of two Slices. After the rounds y[i] is
 * the sum of x[0..i] (x[i..n)); exclusive shifts that by one, a zero block
 * (a broadcast 0) in front (behind). Every op passes its gradient, which is
 * the reversed running sum PyTorch's is; nothing is saved for it, no
 * constant grows with n, and an inf or NaN reaches only the sums that
 * include it. The order of the additions differs from a sequential sum's by
 * rounding. Integer CumSum of a constant is folded on the host.
 */
/* The elements [from, from + count) of x (rank, dims) along axis. */
static tide_ref axis_slice(struct ctx *c, tide_ref x, int32_t rank, const int64_t *dims,
                           int64_t axis, int64_t from, int64_t count)
{
    int64_t begin[MAX_RANK] = {0}, size[MAX_RANK];
    for (int32_t a = 0; a < rank; a++)
        size[a] = dims[a];
    begin[axis] = from, size[axis] = count;
    return tide_builder_slice(c->b, NULL, x, begin, size, rank);
}

static int op_cum_sum(struct ctx *c)
{
    struct value *x = in_value(c, 0), *axis_in = x ? in_const(c, 1, "the axis") : NULL;
    if (!axis_in)
        return -1;
    if (axis_in->type == CONST_FLOAT || numel(axis_in->rank, axis_in->dims) != 1 ||
        axis_in->rank > 1)
        return failf(c, "the axis (input \"%s\") must be one integer", axis_in->name);
    bool exclusive = attr_i(c->node, "exclusive", 0) != 0;
    bool reverse = attr_i(c->node, "reverse", 0) != 0;
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (value_shape(c, x, &rank, dims) != 0 || norm_axis(c, axis_in->i[0], rank, &axis) != 0)
        return -1;
    int64_t n = dims[axis];
    if (x->known && x->type == CONST_INT) {
        struct value *v = set_out_const(c, 0, CONST_INT, rank, dims); /* x stays: another name */
        /* A known constant holds few elements; with none, nothing is summed (and the other
         * dimensions may be anything). */
        bool empty = numel(rank, dims) == 0;
        int64_t outer = empty ? 0 : numel((int32_t)axis, dims);
        int64_t inner = empty ? 0 : numel(rank - (int32_t)axis - 1, dims + axis + 1);
        for (int64_t o = 0; v && o < outer; o++) {
            for (int64_t in = 0; in < inner; in++) {
                int64_t sum = 0;
                for (int64_t step = 0; step < n; step++) {
                    int64_t at = (o * n + (reverse ? n - 1 - step : step)) * inner + in;
                    int64_t e = x->i[at];
                    if (exclusive)
                        v->i[at] = sum;
                    if (__builtin_add_overflow(sum, e, &sum))
                        return failf(
                            c, "the running sum of \"%s\" overflows int64 at element %" PRId64,
                            x->name, at);
                    if (!exclusive)
                        v->i[at] = sum;
                }
            }
        }
        return v ? 0 : -1;
    }
    tide_ref y;
    if (float_in(c, 0, &y) != 0)
        return -1;
    for (int64_t shift = 1; shift < n; shift *= 2) {
        tide_ref kept = reverse ? axis_slice(c, y, rank, dims, axis, n - shift, shift)
                                : axis_slice(c, y, rank, dims, axis, 0, shift);
        tide_ref later = axis_slice(c, y, rank, dims, axis, reverse ? 0 : shift, n - shift);
        tide_ref earlier = axis_slice(c, y, rank, dims, axis, reverse ? shift : 0, n - shift);
        tide_ref parts[2] = {kept, tide_builder_add(c->b, NULL, later, earlier)};
        if (reverse)
            parts[0] = parts[1], parts[1] = kept;
        y = tide_builder_concat(c->b, NULL, parts, 2, axis);
        if (check_builder(c, y) != 0)
            return -1;
    }
    if (exclusive && n > 0) {
        int64_t ones[MAX_RANK], block[MAX_RANK];
        for (int32_t a = 0; a < rank; a++)
            ones[a] = 1, block[a] = a == axis ? 1 : dims[a];
        tide_ref zero = tide_builder_broadcast_to(
            c->b, NULL,
            tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, rank, ones, (float[]){0}), rank,
            block);
        if (n == 1) {
            y = zero; /* nothing before (after) the one element */
        } else {
            tide_ref moved = axis_slice(c, y, rank, dims, axis, reverse ? 1 : 0, n - 1);
            tide_ref parts[2] = {reverse ? moved : zero, reverse ? zero : moved};
            y = tide_builder_concat(c->b, NULL, parts, 2, axis);
        }
    }
    return set_out(c, 0, y);
}

/* ---- softmax ---- */

static int softmax_common(struct ctx *c, bool log_of)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (ref_shape(c, x, &rank, dims) != 0)
        return -1;
    int64_t def = c->opset >= 13 ? -1 : 1;
    if (norm_axis(c, attr_i(c->node, "axis", def), rank, &axis) != 0)
        return -1;
    tide_ref r;
    if (c->opset >= 13 || axis == rank - 1) {
        r = tide_builder_softmax(c->b, NULL, x, axis);
    } else {
        /* Before opset 13 the input is seen as 2-D [prod(:axis), prod(axis:)]. */
        int64_t flat[2] = {numel((int32_t)axis, dims), numel(rank - (int32_t)axis, dims + axis)};
        r = tide_builder_reshape(c->b, NULL, x, 2, flat);
        r = tide_builder_softmax(c->b, NULL, r, 1);
        r = tide_builder_reshape(c->b, NULL, r, rank, dims);
    }
    if (log_of)
        r = tide_builder_log(c->b, NULL, r);
    return set_out(c, 0, r);
}

static int op_softmax(struct ctx *c)
{
    return softmax_common(c, false);
}
static int op_log_softmax(struct ctx *c)
{
    return softmax_common(c, true);
}

/* ---- convolution and pooling ---- */

static int gather_axis(struct ctx *c, tide_ref *x, int32_t rank, int64_t dims[MAX_RANK],
                       int32_t axis, int64_t n_out, int32_t taps, const int32_t *ids,
                       const float *w);

/*
 * The spatial attribute name of a window op over sp axes (sp values; pads:
 * 2 sp, begins then ends) into a layout of width axes (width >= sp: the op's
 * axes are the last sp, the others keep def; pads' begins in out[0, width),
 * ends in out[width, 2 width)). Absent or empty: def. Returns -1 on error.
 */
static int spatial_attr(struct ctx *c, const char *name, int sp, int width, int64_t def,
                        int64_t *out)
{
    const int64_t *list;
    int64_t count = attr_ints(c->node, name, &list);
    int per = strcmp(name, "pads") == 0 ? 2 : 1;
    for (int k = 0; k < per * width; k++)
        out[k] = def;
    if (count <= 0)
        return 0;
    if (count != per * sp)
        return failf(c, "%s holds %" PRId64 " values, not %d", name, count, per * sp);
    for (int e = 0; e < per; e++)
        for (int a = 0; a < sp; a++)
            out[e * width + width - sp + a] = list[e * sp + a];
    return 0;
}

/*
 * Reads kernel, strides, pads and dilations of a window op over sp spatial
 * axes (1 to 3: an [N, C, L], [N, C, H, W] or [N, C, D, H, W] input) into
 * strides[sp], pads_begin[sp], pads_end[sp] and (Conv) dilations[sp]; checks
 * what tide supports. With dilations NULL (the pools), dilations other than
 * 1 are refused.
 */
static int window_nd(struct ctx *c, int sp, int32_t rank, const int64_t *in_dims,
                     const int64_t *kernel, int64_t *strides, int64_t *pads_begin,
                     int64_t *pads_end, int64_t *dilations)
{
    const Onnx__NodeProto *n = c->node;
    if (rank != 2 + sp)
        return failf(c, "only %d-D windows (a rank-%d input) are supported, got rank %d", sp,
                     2 + sp, rank);
    const int64_t *list = NULL;
    int64_t count;
    if (spatial_attr(c, "strides", sp, sp, 1, strides) != 0)
        return -1;
    for (int k = 0; k < sp; k++) {
        /* Bounds every size computed from these below (pads, spans, ceil_mode's reach). */
        if (in_dims[2 + k] > INT32_MAX)
            return failf(c, "spatial axis %d of the input is %" PRId64 " long, over %d", k,
                         in_dims[2 + k], INT32_MAX);
        if (strides[k] < 1 || strides[k] > INT32_MAX)
            return failf(c, "strides[%d] is %" PRId64 ", not in 1..%d", k, strides[k], INT32_MAX);
        if (kernel[k] < 1 || kernel[k] > INT32_MAX)
            return failf(c, "kernel dimension %d is %" PRId64 ", not in 1..%d", k, kernel[k],
                         INT32_MAX);
    }
    int64_t span[3];
    if (dilations) {
        if (spatial_attr(c, "dilations", sp, sp, 1, dilations) != 0)
            return -1;
        /* The window spans (k - 1) * d + 1 cells: so auto_pad computes, as ONNX does. */
        for (int k = 0; k < sp; k++) {
            if (dilations[k] < 1 || dilations[k] > INT32_MAX)
                return failf(c, "dilations[%d] is %" PRId64 ", not in 1..%d", k, dilations[k],
                             INT32_MAX);
            span[k] = (kernel[k] - 1) * dilations[k] + 1;
        }
        kernel = span;
    } else if ((count = attr_ints(n, "dilations", &list)) >= 0) {
        for (int64_t k = 0; k < count; k++)
            if (list[k] != 1)
                return failf(c, "dilations other than 1 are not supported");
    }
    int64_t p[6];
    if (spatial_attr(c, "pads", sp, sp, 0, p) != 0)
        return -1;
    for (int k = 0; k < 2 * sp; k++)
        if (p[k] < 0 || p[k] > INT32_MAX)
            return failf(c, "pads[%d] is %" PRId64 ", not in 0..%d", k, p[k], INT32_MAX);
    if (!attr_s_is(n, "auto_pad", NULL) && !attr_s_is(n, "auto_pad", "NOTSET")) {
        if (attr_s_is(n, "auto_pad", "VALID")) {
            memset(p, 0, sizeof(p));
        } else {
            bool upper = attr_s_is(n, "auto_pad", "SAME_UPPER");
            if (!upper && !attr_s_is(n, "auto_pad", "SAME_LOWER"))
                return failf(c, "auto_pad is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
            for (int k = 0; k < sp; k++) {
                int64_t out = (in_dims[2 + k] + strides[k] - 1) / strides[k];
                int64_t total = (out - 1) * strides[k] + kernel[k] - in_dims[2 + k];
                if (total < 0)
                    total = 0;
                p[k] = upper ? total / 2 : total - total / 2;
                p[k + sp] = total - p[k];
            }
        }
    }
    memcpy(pads_begin, p, (size_t)sp * sizeof(int64_t));
    memcpy(pads_end, p + sp, (size_t)sp * sizeof(int64_t));
    return 0;
}

static int pad_constant_axis(struct ctx *c, tide_ref *x, int32_t rank, int64_t dims[MAX_RANK],
                             int32_t axis, int64_t before, int64_t after, float value);

/*
 * Where a window's pads differ between the sides (ONNX's SAME_UPPER and
 * SAME_LOWER, TensorFlow's SAME): the even part stays the op's own pad
 * (pads[a]) and the rest is a block of fill concatenated to x (rank, dims)
 * on that side of its last two axes.
 */
static int even_pads(struct ctx *c, tide_ref *x, int32_t rank, int64_t dims[MAX_RANK],
                     const int64_t pb[2], const int64_t pe[2], float fill, int64_t pads[2])
{
    for (int a = 0; a < 2; a++) {
        pads[a] = pb[a] < pe[a] ? pb[a] : pe[a];
        if (pb[a] != pe[a] && pad_constant_axis(c, x, rank, dims, rank - 2 + a, pb[a] - pads[a],
                                                pe[a] - pads[a], fill) != 0)
            return -1;
    }
    return 0;
}

static int depth_taps(struct ctx *c, tide_ref x, const int64_t dims[5], int64_t kd,
                      int64_t dilation, int64_t stride, int64_t pb, int64_t end, int64_t out,
                      float fill, tide_ref *taps);
static tide_ref depth_back(struct ctx *c, tide_ref y, int64_t n, int64_t out);

/* At most this many depth taps (a kernel's depth) are unrolled into 2-D ops. */
#define MAX_DEPTH_TAPS 64

/* group: W is [M, C / group, k...]; output channel block g reads input channel block g. */
static int conv_group(struct ctx *c, const int64_t *dx, const int64_t *dw, int64_t *group)
{
    int64_t g = attr_i(c->node, "group", 1);
    if (g < 1)
        return failf(c, "group is %" PRId64 ", not 1 or more", g);
    if (dx[1] % g != 0 || dw[0] % g != 0)
        return failf(c,
                     "group %" PRId64 " must divide the input's %" PRId64
                     " channels and the weight's %" PRId64 " feature maps",
                     g, dx[1], dw[0]);
    if (dx[1] / g != dw[1])
        return failf(c,
                     "the weight's channel dimension is %" PRId64 ", but the input's %" PRId64
                     " channels in %" PRId64 " group%s want %" PRId64,
                     dw[1], dx[1], g, g == 1 ? "" : "s", dx[1] / g);
    *group = g;
    return 0;
}

/*
 * 3-D Conv of x [N, C, D, H, W] with w [K, C / group, kd, kh, kw] as kd
 * 2-D convolutions: depth tap t (depth_taps: the planes o * stride + t of
 * every output depth o, zeros past the depth pads) convolves with w[:, :, t]
 * in 2-D, and the taps' sum is the 3-D convolution, so it trains through
 * Gather, Slice, Conv2D and Add. Uneven pads on H and W are zeros
 * concatenated to x first (even_pads), as in 2-D.
 */
static int conv_3d(struct ctx *c, tide_ref x, tide_ref w, int32_t rx, int64_t dx[MAX_RANK],
                   const int64_t dw[MAX_RANK])
{
    const Onnx__NodeProto *n = c->node;
    int64_t strides[3], pb[3], pe[3], dil[3], group;
    if (window_nd(c, 3, rx, dx, dw + 2, strides, pb, pe, dil) != 0 ||
        conv_group(c, dx, dw, &group) != 0)
        return -1;
    if (dw[2] > MAX_DEPTH_TAPS)
        return failf(c, "a kernel %" PRId64 " deep is more than the import unrolls (%d)", dw[2],
                     MAX_DEPTH_TAPS);
    int64_t pads[2];
    if (even_pads(c, &x, 5, dx, pb + 1, pe + 1, 0.0f, pads) != 0)
        return -1;
    int64_t span = dx[2] + pb[0] + pe[0] - ((dw[2] - 1) * dil[0] + 1);
    if (span < 0)
        return failf(c,
                     "the kernel's depth %" PRId64 " dilated by %" PRId64
                     " is more than the padded input's %" PRId64,
                     dw[2], dil[0], dx[2] + pb[0] + pe[0]);
    int64_t depth = span / strides[0] + 1;
    tide_ref taps[MAX_DEPTH_TAPS], r = TIDE_REF_NONE;
    if (depth_taps(c, x, dx, dw[2], dil[0], strides[0], pb[0], pe[0], depth, 0.0f, taps) != 0)
        return -1;
    for (int64_t t = 0; t < dw[2]; t++) {
        tide_ref wt = tide_builder_slice(c->b, NULL, w, (int64_t[]){0, 0, t, 0, 0},
                                         (int64_t[]){dw[0], dw[1], 1, dw[3], dw[4]}, 5);
        wt = tide_builder_reshape(c->b, NULL, wt, 4, (int64_t[]){dw[0], dw[1], dw[3], dw[4]});
        tide_ref y = tide_builder_conv2d_dilated(c->b, NULL, taps[t], wt, strides[1], strides[2],
                                                 pads[0], pads[1], dil[1], dil[2], group);
        r = t == 0 ? y : tide_builder_add(c->b, NULL, r, y);
    }
    if (has_input(n, 2)) {
        tide_ref bias;
        if (check_builder(c, r) != 0 || float_in(c, 2, &bias) != 0)
            return -1;
        r = tide_builder_bias_add(c->b, NULL, r, bias);
    }
    if (check_builder(c, r) != 0)
        return -1;
    return set_out(c, 0, depth_back(c, r, dx[0], depth));
}

static int op_conv(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x, w;
    if (float_in(c, 0, &x) != 0 || float_in(c, 1, &w) != 0)
        return -1;
    int32_t rx, rw;
    int64_t dx[MAX_RANK], dw[MAX_RANK], strides[2] = {1, 1}, pads[2], pb[2] = {0, 0},
                                                              pe[2] = {0, 0};
    if (ref_shape(c, x, &rx, dx) != 0 || ref_shape(c, w, &rw, dw) != 0)
        return -1;
    int sp = rw - 2;
    if (sp == 3)
        return conv_3d(c, x, w, rx, dx, dw);
    if (sp != 1 && sp != 2)
        return failf(c, "only 1-D, 2-D and 3-D convolutions are supported, the weight has rank %d",
                     rw);
    int64_t dilations[2] = {1, 1};
    if (window_nd(c, sp, rx, dx, dw + 2, strides + 2 - sp, pb + 2 - sp, pe + 2 - sp,
                  dilations + 2 - sp) != 0)
        return -1;
    int64_t group;
    if (conv_group(c, dx, dw, &group) != 0)
        return -1;
    /* 1-D is 2-D of [N, C, 1, L] with a 1 x k kernel. */
    if (sp == 1) {
        int64_t x4[MAX_RANK] = {dx[0], dx[1], 1, dx[2]};
        x = tide_builder_reshape(c->b, NULL, x, 4, x4);
        w = tide_builder_reshape(c->b, NULL, w, 4, (int64_t[]){dw[0], dw[1], 1, dw[2]});
        memcpy(dx, x4, sizeof(x4));
    }
    if (even_pads(c, &x, 4, dx, pb, pe, 0.0f, pads) != 0)
        return -1;
    tide_ref r = tide_builder_conv2d_dilated(c->b, NULL, x, w, strides[0], strides[1], pads[0],
                                             pads[1], dilations[0], dilations[1], group);
    if (has_input(n, 2)) {
        tide_ref bias;
        if (check_builder(c, r) != 0 || float_in(c, 2, &bias) != 0)
            return -1;
        r = tide_builder_bias_add(c->b, NULL, r, bias);
    }
    if (sp == 1) {
        int64_t y[TIDE_BUILDER_MAX_RANK];
        int32_t ry;
        if (check_builder(c, r) != 0 || tide_builder_shape(c->b, r, y, &ry) != 0)
            return -1;
        r = tide_builder_reshape(c->b, NULL, r, 3, (int64_t[]){y[0], y[1], y[3]});
    }
    return set_out(c, 0, r);
}

/*
 * One spatial axis of a ConvTranspose as tide's Conv2DBackpropInput with pad
 * *pad and output length *bpi, then (when that is not out) the out elements
 * from *begin on. The full (unpadded) result is stride * (in - 1) + k +
 * output_padding long; ONNX's output is it with pb cut from the start and pe
 * from the end (pe < 0: zeros appended). Conv2DBackpropInput with pad p gives
 * full[p + h] for every h whose convolution still has in windows: (bpi + 2p -
 * k) / stride + 1 == in; rows of full past the last window are zeros. So pad
 * pb gives the output directly when out lies in that range, or a longer one
 * to crop when the end pad is larger; otherwise pad 0 gives the whole result
 * (and up to stride - 1 zeros), cropped from pb on.
 */
static int transpose_axis(struct ctx *c, const char *axis, int64_t in, int64_t k, int64_t stride,
                          int64_t pb, int64_t out, int64_t *pad, int64_t *bpi, int64_t *begin)
{
    if (out < 1)
        return failf(c,
                     "the output's %s would be %" PRId64 " (pads too large for input %" PRId64
                     ", kernel %" PRId64 ", stride %" PRId64 ")",
                     axis, out, in, k, stride);
    int64_t low = stride * (in - 1) + k - 2 * pb, high = low + stride - 1;
    if (low < 1)
        low = 1;
    if (low + 2 * pb >= k && (low + 2 * pb - k) / stride + 1 == in && out <= high) {
        *pad = pb, *begin = 0;
        *bpi = out < low ? low : out;
        return 0;
    }
    int64_t longest = stride * (in - 1) + k + stride - 1;
    if (pb + out > longest)
        return failf(c,
                     "the output's %s of %" PRId64 " from begin pad %" PRId64
                     " runs past the %" PRId64 " that input %" PRId64 ", kernel %" PRId64
                     " and stride %" PRId64 " give",
                     axis, out, pb, longest, in, k, stride);
    *pad = 0, *begin = pb;
    *bpi = stride * (in - 1) + k;
    if (*bpi < pb + out)
        *bpi = pb + out;
    return 0;
}

/*
 * ConvTranspose: the input gradient of a convolution (tide's
 * Conv2DBackpropInput, in the node's channel groups), so it trains with
 * Conv2D and Conv2DBackpropFilter as its gradients. 2-D, or 1-D as 2-D of
 * [N, C, 1, L]; dilated (the sizes below take the dilated kernel's span
 * (k - 1) * d + 1, as ONNX's output size formula does); asymmetric pads by a
 * crop.
 */
static int op_conv_transpose(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x, w;
    if (float_in(c, 0, &x) != 0 || float_in(c, 1, &w) != 0)
        return -1;
    int32_t rx, rw;
    int64_t dx[MAX_RANK], dw[MAX_RANK];
    if (ref_shape(c, x, &rx, dx) != 0 || ref_shape(c, w, &rw, dw) != 0)
        return -1;
    int sp = rw - 2;
    if (sp != 1 && sp != 2)
        return failf(c,
                     "only 1-D and 2-D transposed convolutions are supported, the weight has "
                     "rank %d",
                     rw);
    if (rx != rw)
        return failf(c, "the input has rank %d, the weight %d", rx, rw);
    char wt[96];
    dims_text(wt, sizeof(wt), rw, dw);
    int64_t group = attr_i(n, "group", 1);
    if (group < 1)
        return failf(c, "group is %" PRId64 ", not 1 or more", group);
    if (dx[1] != dw[0] || dw[0] % group != 0)
        return failf(c,
                     "the input has %" PRId64 " channels; the weight %s wants %" PRId64
                     " in %" PRId64 " group%s",
                     dx[1], wt, dw[0], group, group == 1 ? "" : "s");
    /* The 2-D view: a 1-D op's [N, C, L] is [N, C, 1, L], its kernel 1 x k. */
    int64_t in[2] = {1, 1}, k[2] = {1, 1};
    for (int a = 0; a < sp; a++)
        in[2 - sp + a] = dx[2 + a], k[2 - sp + a] = dw[2 + a];
    const int64_t *list;
    int64_t count;
    if ((count = attr_ints(n, "kernel_shape", &list)) >= 0) {
        bool same = count == sp;
        for (int a = 0; same && a < sp; a++)
            same = list[a] == dw[2 + a];
        if (!same)
            return failf(c, "kernel_shape does not match the weight %s", wt);
    }
    int64_t strides[2], outpad[2], p[4], dil[2];
    if (spatial_attr(c, "strides", sp, 2, 1, strides) != 0 ||
        spatial_attr(c, "output_padding", sp, 2, 0, outpad) != 0 ||
        spatial_attr(c, "pads", sp, 2, 0, p) != 0 ||
        spatial_attr(c, "dilations", sp, 2, 1, dil) != 0)
        return -1;
    for (int a = 0; a < 2; a++) {
        if (strides[a] < 1 || strides[a] > INT32_MAX)
            return failf(c, "strides[%d] is %" PRId64 ", not in 1..%d", a + sp - 2, strides[a],
                         INT32_MAX);
        if (outpad[a] < 0 || outpad[a] >= strides[a])
            return failf(c,
                         "output_padding[%d] is %" PRId64 ", not in 0..%" PRId64 " (less than "
                         "the stride)",
                         a + sp - 2, outpad[a], strides[a] - 1);
        if (p[a] < 0 || p[a] > INT32_MAX || p[a + 2] < 0 || p[a + 2] > INT32_MAX)
            return failf(c, "pads on axis %d are %" PRId64 " and %" PRId64 ", not in 0..%d",
                         a + sp - 2, p[a], p[a + 2], INT32_MAX);
        /* Beyond these, the sizes below could overflow; no real model comes near. */
        if (in[a] > INT32_MAX || k[a] > INT32_MAX)
            return failf(c, "the input or kernel is over %d on an axis", INT32_MAX);
        if (dil[a] < 1 || dil[a] > INT32_MAX)
            return failf(c, "dilations[%d] is %" PRId64 ", not in 1..%d", a + sp - 2, dil[a],
                         INT32_MAX);
        /* From here on k is the dilated kernel's span. */
        if (k[a] - 1 > (INT32_MAX - 1) / dil[a])
            return failf(c,
                         "kernel %" PRId64 " dilated by %" PRId64 " spans over %d on axis %d",
                         k[a], dil[a], INT32_MAX, a + sp - 2);
        k[a] = (k[a] - 1) * dil[a] + 1;
    }
    int64_t full[2], out[2];
    for (int a = 0; a < 2; a++)
        full[a] = strides[a] * (in[a] - 1) + k[a] + outpad[a];
    bool upper = attr_s_is(n, "auto_pad", "SAME_UPPER");
    bool same = upper || attr_s_is(n, "auto_pad", "SAME_LOWER");
    if (!same && !attr_s_is(n, "auto_pad", NULL) && !attr_s_is(n, "auto_pad", "NOTSET") &&
        !attr_s_is(n, "auto_pad", "VALID"))
        return failf(c, "auto_pad is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    if (attr_s_is(n, "auto_pad", "VALID"))
        memset(p, 0, sizeof(p));
    if ((count = attr_ints(n, "output_shape", &list)) >= 0 || same) {
        /* The pads follow from the output's size: ONNX's total_padding, split by auto_pad. */
        if (count >= 0 && count != sp && count != sp + 2)
            return failf(c, "output_shape holds %" PRId64 " values, not %d (or %d)", count, sp,
                         sp + 2);
        for (int a = 2 - sp; a < 2; a++) {
            if (count >= 0) {
                out[a] = list[count - 2 + a];
                if (out[a] < 1 || out[a] > INT32_MAX)
                    return failf(c, "output_shape[%d] is %" PRId64 ", not in 1..%d",
                                 (int)(count - 2 + a), out[a], INT32_MAX);
            } else {
                out[a] = in[a] * strides[a];
            }
            int64_t total = full[a] - out[a];
            /* A longer output gains zero rows at the end, as ONNX's own suite has it. */
            p[a] = total < 0 ? 0 : upper ? total / 2 : total - total / 2;
            p[a + 2] = total - p[a];
        }
    }
    for (int a = 0; a < 2; a++)
        out[a] = full[a] - p[a] - p[a + 2];
    int64_t pad[2], bpi[2], begin[2];
    if (transpose_axis(c, "H", in[0], k[0], strides[0], p[0], out[0], &pad[0], &bpi[0],
                       &begin[0]) != 0 ||
        transpose_axis(c, sp == 1 ? "L" : "W", in[1], k[1], strides[1], p[1], out[1], &pad[1],
                       &bpi[1], &begin[1]) != 0)
        return -1;
    int64_t channels = dw[1] * group;
    if (sp == 1) {
        x = tide_builder_reshape(c->b, NULL, x, 4, (int64_t[]){dx[0], dx[1], 1, dx[2]});
        w = tide_builder_reshape(c->b, NULL, w, 4, (int64_t[]){dw[0], dw[1], 1, dw[2]});
    }
    tide_ref r = tide_builder_conv2d_transpose_dilated(c->b, NULL, x, w, strides[0], strides[1],
                                                       pad[0], pad[1], dil[0], dil[1], bpi[0],
                                                       bpi[1], group);
    if (bpi[0] != out[0] || bpi[1] != out[1])
        r = tide_builder_slice(c->b, NULL, r, (int64_t[]){0, 0, begin[0], begin[1]},
                               (int64_t[]){dx[0], channels, out[0], out[1]}, 4);
    if (has_input(n, 2)) {
        tide_ref bias;
        if (check_builder(c, r) != 0 || float_in(c, 2, &bias) != 0)
            return -1;
        r = tide_builder_bias_add(c->b, NULL, r, bias);
    }
    if (sp == 1)
        r = tide_builder_reshape(c->b, NULL, r, 3, (int64_t[]){dx[0], channels, out[1]});
    return set_out(c, 0, r);
}

/*
 * How many cells of the window [start, start + k) lie in [lo, hi): the
 * divisor of an average over that range.
 */
static int64_t overlap(int64_t start, int64_t k, int64_t lo, int64_t hi)
{
    int64_t a = start > lo ? start : lo, b = start + k < hi ? start + k : hi;
    return b > a ? b - a : 0;
}

/*
 * One axis of a pooling window: the output's size (floor, or ceil_mode's
 * ceiling without a last window that would start past the input and its
 * begin pad, as PyTorch has it; ONNX 1.12's reference agrees wherever the
 * last window starts inside) and *end, how far the last window reaches
 * past the input (at least the end pad pe).
 */
static int pool_extent(struct ctx *c, int64_t in, int64_t k, int64_t stride, int64_t pb,
                       int64_t pe, bool ceil_mode, int64_t *out, int64_t *end)
{
    int64_t span = in + pb + pe - k;
    if (span < 0)
        return failf(c, "the kernel's %" PRId64 " is more than the padded input's %" PRId64, k,
                     in + pb + pe);
    *out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    if (ceil_mode && (*out - 1) * stride >= in + pb)
        (*out)--;
    *end = (*out - 1) * stride + k - in - pb;
    if (*end < pe)
        *end = pe;
    return 0;
}

/* How pooling counts: the max, or the average over the cells inside the input or the pads. */
struct pool_rule {
    bool is_max, ceil_mode, count_pads;
};

/*
 * 2-D pooling of x [N, C, H, W] (dims) with window k, strides, begin and
 * end pads pb, pe, as ONNX defines it, into *y [N, C, out[0], out[1]]. Even
 * pads and floor sizes are tide's pools as they are (their pad cells count
 * as -inf for the max and not at all for the average). Otherwise MaxPool
 * pads the uneven part with a block of -inf (even_pads); AveragePool pads
 * every side with zeros, pools unpadded (dividing by the window's size) and
 * multiplies by a constant per output position that turns that into ONNX's
 * divisor: the window's cells inside the input, or inside the pads
 * (count_include_pad 1).
 */
static int pool_2d(struct ctx *c, tide_ref x, int64_t dims[MAX_RANK], const int64_t k[2],
                   const int64_t strides[2], const int64_t pb[2], const int64_t pe[2],
                   const struct pool_rule *rule, tide_ref *y, int64_t out[2])
{
    int64_t in[2] = {dims[2], dims[3]}, end[2];
    bool plain = true;
    for (int a = 0; a < 2; a++) {
        if (pool_extent(c, in[a], k[a], strides[a], pb[a], pe[a], rule->ceil_mode, &out[a],
                        &end[a]) != 0)
            return -1;
        plain &= pb[a] == pe[a] && end[a] == pe[a] && (!rule->count_pads || pb[a] == 0);
    }
    int64_t pads[2] = {0, 0};
    tide_ref r;
    if (plain || rule->is_max) {
        if (!plain && even_pads(c, &x, 4, dims, pb, end, -INFINITY, pads) != 0)
            return -1;
        if (plain)
            pads[0] = pb[0], pads[1] = pb[1];
        r = rule->is_max ? tide_builder_max_pool2d(c->b, NULL, x, k[0], k[1], strides[0],
                                                   strides[1], pads[0], pads[1])
                         : tide_builder_avg_pool2d(c->b, NULL, x, k[0], k[1], strides[0],
                                                   strides[1], pads[0], pads[1]);
    } else {
        for (int a = 0; a < 2; a++)
            if (pad_constant_axis(c, &x, 4, dims, 2 + a, pb[a], end[a], 0.0f) != 0)
                return -1;
        r = tide_builder_avg_pool2d(c->b, NULL, x, k[0], k[1], strides[0], strides[1], 0, 0);
        /* The divisors are a constant of the output's plane: bounded like the import's others. */
        if (out[1] > FOLD_MAX_ELEMENTS / out[0])
            return failf(c,
                         "an average over uneven pads builds a %" PRId64 " x %" PRId64
                         " constant, more than the import builds (%" PRId64 " elements)",
                         out[0], out[1], FOLD_MAX_ELEMENTS);
        float *scale = malloc((size_t)(out[0] * out[1]) * sizeof(float));
        if (!scale)
            return failf(c, "out of memory");
        for (int64_t i = 0; i < out[0]; i++)
            for (int64_t j = 0; j < out[1]; j++) {
                int64_t h0 = i * strides[0] - pb[0], w0 = j * strides[1] - pb[1];
                int64_t cells = rule->count_pads
                                    ? overlap(h0, k[0], -pb[0], in[0] + pe[0]) *
                                          overlap(w0, k[1], -pb[1], in[1] + pe[1])
                                    : overlap(h0, k[0], 0, in[0]) * overlap(w0, k[1], 0, in[1]);
                scale[i * out[1] + j] = cells ? (float)(k[0] * k[1]) / (float)cells : 0.0f;
            }
        r = tide_builder_mul(c->b, NULL, r,
                             tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, 2, out, scale));
        free(scale);
    }
    int64_t got[TIDE_BUILDER_MAX_RANK];
    int32_t rank;
    if (check_builder(c, r) != 0 || tide_builder_shape(c->b, r, got, &rank) != 0)
        return -1;
    /* tide's pools give floor sizes: a window the ceil rule dropped is cut off. */
    if (got[2] != out[0] || got[3] != out[1])
        r = tide_builder_slice(c->b, NULL, r, (int64_t[]){0, 0, 0, 0},
                               (int64_t[]){got[0], got[1], out[0], out[1]}, 4);
    *y = r;
    return check_builder(c, r);
}

/*
 * The kd taps along depth of a 3-D window op over x [N, C, D, H, W]: x goes
 * depth-first ([D, N, C, H, W]) and is padded in depth with fill (pb, end);
 * tap t gathers the planes o * stride + t * dilation of every output depth
 * o < out, as [out * N, C, H, W] (taps[t]). Each tap is then a 2-D window op whose
 * results combine into the 3-D one (depth_back).
 */
static int depth_taps(struct ctx *c, tide_ref x, const int64_t dims[5], int64_t kd,
                      int64_t dilation, int64_t stride, int64_t pb, int64_t end, int64_t out,
                      float fill, tide_ref *taps)
{
    /* Gather's ids are int32: the padded depth must be indexable by them. */
    if (dims[2] + pb + end > INT32_MAX || out > FOLD_MAX_ELEMENTS)
        return failf(c, "a depth of %" PRId64 " padded by %" PRId64 " and %" PRId64
                        " is more than the import gathers (%d)",
                     dims[2], pb, end, INT32_MAX);
    int64_t d[MAX_RANK] = {dims[2], dims[0], dims[1], dims[3], dims[4]};
    x = tide_builder_transpose(c->b, NULL, x, (int64_t[]){2, 0, 1, 3, 4}, 5);
    if (pad_constant_axis(c, &x, 5, d, 0, pb, end, fill) != 0)
        return -1;
    int32_t *ids = malloc((size_t)out * sizeof(int32_t));
    if (!ids)
        return failf(c, "out of memory");
    for (int64_t t = 0; t < kd; t++) {
        int64_t td[MAX_RANK];
        memcpy(td, d, sizeof(td));
        for (int64_t o = 0; o < out; o++)
            ids[o] = (int32_t)(o * stride + t * dilation);
        taps[t] = x;
        if (gather_axis(c, &taps[t], 5, td, 0, out, 1, ids, NULL) != 0) {
            free(ids);
            return -1;
        }
        taps[t] = tide_builder_reshape(c->b, NULL, taps[t], 4,
                                       (int64_t[]){out * dims[0], dims[1], dims[3], dims[4]});
    }
    free(ids);
    return 0;
}

/* A 2-D result [out * N, K, H, W] of the depth taps as [N, K, out, H, W]. */
static tide_ref depth_back(struct ctx *c, tide_ref y, int64_t n, int64_t out)
{
    int64_t d[TIDE_BUILDER_MAX_RANK];
    int32_t rank;
    if (tide_builder_shape(c->b, y, d, &rank) != 0)
        return y; /* the builder's error stands */
    y = tide_builder_reshape(c->b, NULL, y, 5, (int64_t[]){out, n, d[1], d[2], d[3]});
    return tide_builder_transpose(c->b, NULL, y, (int64_t[]){1, 2, 0, 3, 4}, 5);
}

/*
 * MaxPool and AveragePool over 1, 2 or 3 spatial axes, as ONNX defines
 * them (pool_2d). 1-D is 2-D of [N, C, 1, L] with a 1 x k window. 3-D pools
 * each depth tap of the window in 2-D (depth_taps) and combines the taps:
 * their Max (padding -inf in depth), or their sum (padding zeros) times a
 * constant per output depth, 1 / the tap count inside the input (or the
 * pads); each tap's 2-D average already divides by its own cells, which do
 * not depend on the depth.
 */
static int pool(struct ctx *c, bool is_max)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    if (is_max && n->n_output > 1 && *n->output[1])
        return failf(c, "the Indices output is not supported");
    if (attr_i(n, "storage_order", 0) != 0)
        return failf(c, "storage_order 1 is not supported");
    struct pool_rule rule = {.is_max = is_max,
                             .ceil_mode = attr_i(n, "ceil_mode", 0) != 0,
                             .count_pads = !is_max && attr_i(n, "count_include_pad", 0) != 0};
    const int64_t *kernel = NULL;
    int64_t sp = attr_ints(n, "kernel_shape", &kernel);
    if (sp < 1 || sp > 3)
        return failf(c, "kernel_shape must hold 1, 2 or 3 values (1-D to 3-D pooling), not %" PRId64,
                     sp);
    /* Axes: [depth,] H, W in the last two entries; a 1-D window is 1 x k. */
    int32_t rank;
    int64_t dims[MAX_RANK], k[3] = {1, 1, 1}, strides[3] = {1, 1, 1}, pb[3] = {0, 0, 0},
                            pe[3] = {0, 0, 0};
    if (ref_shape(c, x, &rank, dims) != 0 ||
        window_nd(c, (int)sp, rank, dims, kernel, strides + 3 - sp, pb + 3 - sp, pe + 3 - sp,
                  NULL) != 0)
        return -1;
    memcpy(k + 3 - sp, kernel, (size_t)sp * sizeof(int64_t));
    tide_ref r;
    int64_t out[2];
    if (sp < 3) {
        if (sp == 1) {
            int64_t x4[MAX_RANK] = {dims[0], dims[1], 1, dims[2]};
            x = tide_builder_reshape(c->b, NULL, x, 4, x4);
            memcpy(dims, x4, sizeof(x4));
        }
        if (pool_2d(c, x, dims, k + 1, strides + 1, pb + 1, pe + 1, &rule, &r, out) != 0)
            return -1;
        if (sp == 1)
            r = tide_builder_reshape(c->b, NULL, r, 3, (int64_t[]){dims[0], dims[1], out[1]});
        return set_out(c, 0, r);
    }
    int64_t depth, end;
    if (k[0] > MAX_DEPTH_TAPS)
        return failf(c, "a window %" PRId64 " deep is more than the import unrolls (%d)", k[0],
                     MAX_DEPTH_TAPS);
    if (pool_extent(c, dims[2], k[0], strides[0], pb[0], pe[0], rule.ceil_mode, &depth, &end) != 0)
        return -1;
    tide_ref taps[MAX_DEPTH_TAPS];
    if (depth_taps(c, x, dims, k[0], 1, strides[0], pb[0], end, depth, is_max ? -INFINITY : 0.0f,
                   taps) != 0)
        return -1;
    int64_t plane[MAX_RANK] = {depth * dims[0], dims[1], dims[3], dims[4]};
    for (int64_t t = 0; t < k[0]; t++) {
        int64_t pd[MAX_RANK];
        memcpy(pd, plane, sizeof(pd));
        tide_ref y;
        if (pool_2d(c, taps[t], pd, k + 1, strides + 1, pb + 1, pe + 1, &rule, &y, out) != 0)
            return -1;
        r = t == 0 ? y : is_max ? tide_builder_max(c->b, NULL, r, y) : tide_builder_add(c->b, NULL, r, y);
    }
    r = depth_back(c, r, dims[0], depth);
    if (!is_max) {
        float *scale = malloc((size_t)depth * sizeof(float));
        if (!scale)
            return failf(c, "out of memory");
        for (int64_t o = 0; o < depth; o++) {
            int64_t z = o * strides[0] - pb[0];
            int64_t taps_in = rule.count_pads ? overlap(z, k[0], -pb[0], dims[2] + pe[0])
                                              : overlap(z, k[0], 0, dims[2]);
            scale[o] = taps_in ? 1.0f / (float)taps_in : 0.0f;
        }
        r = tide_builder_mul(c->b, NULL, r,
                             tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, 3,
                                                   (int64_t[]){depth, 1, 1}, scale));
        free(scale);
    }
    return set_out(c, 0, r);
}

static int op_max_pool(struct ctx *c)
{
    return pool(c, true);
}
static int op_average_pool(struct ctx *c)
{
    return pool(c, false);
}

static int op_global_average_pool(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (ref_shape(c, x, &rank, dims) != 0)
        return -1;
    if (rank != 4)
        return failf(c, "only rank-4 NCHW inputs are supported, got rank %d", rank);
    tide_ref r = tide_builder_global_avg_pool(c->b, NULL, x);
    return set_out(c, 0,
                   tide_builder_reshape(c->b, NULL, r, 4, (int64_t[]){dims[0], dims[1], 1, 1}));
}

/* ---- normalisation ---- */

/* Whether BatchNormalization node n, at op version v, normalises with the batch's statistics:
 * versions 7 to 13 when they give the statistics, 14 on with training_mode, 1 and 6 unless
 * is_test is set. */
static bool batch_norm_trains(const Onnx__NodeProto *n, int64_t v)
{
    return v >= 14  ? attr_i(n, "training_mode", 0) != 0
           : v >= 7 ? n->n_output > 1
                    : attr_i(n, "is_test", 0) == 0;
}

/*
 * Inference-mode BatchNormalization: x normalised per channel (axis 1) with the frozen
 * statistics of inputs 3 and 4, in ONNX's formula and order, Y = (X - mean) / sqrt(var +
 * epsilon) * scale + B: Sub, Add, Sqrt, Div, Mul, Add, the [C] vectors as [C, 1, ..., 1].
 * This is PyTorch's BatchNorm in eval mode: scale and B train, X gets its gradient through the
 * per-channel affine map, and the statistics, initializers in its exports, are constants
 * (freeze_running_statistics); momentum does not apply.
 */
static int batch_norm_frozen(struct ctx *c)
{
    static const char *const role[] = {"X", "scale", "B", "mean", "var"};
    tide_ref in[5];
    int32_t rank;
    int64_t dims[MAX_RANK], per_channel[MAX_RANK];
    if (float_in(c, 0, &in[0]) != 0 || ref_shape(c, in[0], &rank, dims) != 0)
        return -1;
    if (rank < 2)
        return failf(c, "X has rank %d, wants N, C and any further axes", rank);
    for (int32_t a = 0; a < rank - 1; a++)
        per_channel[a] = a ? 1 : dims[1];
    tide_builder *b = c->b;
    for (size_t k = 1; k < 5; k++) {
        int32_t r;
        int64_t d[MAX_RANK];
        if (float_in(c, k, &in[k]) != 0 || ref_shape(c, in[k], &r, d) != 0)
            return -1;
        if (r != 1 || d[0] != dims[1]) {
            char got[160], x[160];
            return failf(c,
                         "%s \"%s\" has shape %s, want [%" PRId64 "]: one value per channel "
                         "(dim 1 of X's %s)",
                         role[k], c->node->input[k], dims_text(got, sizeof(got), r, d), dims[1],
                         dims_text(x, sizeof(x), rank, dims));
        }
        if (rank > 2)
            in[k] = tide_builder_reshape(b, NULL, in[k], rank - 1, per_channel);
    }
    mark_missing(c, 1, "is a training-mode output of BatchNormalization");
    tide_ref sd = tide_builder_sqrt(
        b, NULL, tide_builder_add(b, NULL, in[4], scalar(c, attr_f(c->node, "epsilon", 1e-5f))));
    tide_ref y = tide_builder_div(b, NULL, tide_builder_sub(b, NULL, in[0], in[3]), sd);
    return set_out(c, 0, tide_builder_add(b, NULL, tide_builder_mul(b, NULL, y, in[1]), in[2]));
}

static int op_batch_normalization(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    if (c->version < 9 && attr_i(n, "spatial", 1) != 1)
        return failf(c, "spatial %" PRId64 " (statistics per element, not per channel) is not "
                        "supported",
                     attr_i(n, "spatial", 1));
    if (!batch_norm_trains(n, c->version)) {
        c->res->inference_batch_norms++;
        return batch_norm_frozen(c);
    }
    tide_ref x, gamma, beta;
    if (float_in(c, 0, &x) != 0 || float_in(c, 1, &gamma) != 0 || float_in(c, 2, &beta) != 0)
        return -1;
    mark_missing(c, 1, "is a BatchNormalization running statistic, which tide does not compute");
    /* tide's BatchNorm takes [N, C] or [N, C, H, W]; [N, C, L] (BatchNorm1d over a sequence)
     * and [N, C, D, H, W] (BatchNorm3d) have the same per-channel statistics as
     * [N, C, 1, L] and [N, C, D * H, W]. */
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (ref_shape(c, x, &rank, dims) != 0)
        return -1;
    bool reshaped = rank == 3 || rank > 4;
    if (reshaped) {
        int64_t as4[4] = {dims[0], dims[1], numel(rank - 3, dims + 2), dims[rank - 1]};
        x = tide_builder_reshape(c->b, NULL, x, 4, as4);
    }
    tide_ref y = tide_builder_batch_norm(c->b, NULL, x, gamma, beta, attr_f(n, "epsilon", 1e-5f));
    if (reshaped && check_builder(c, y) == 0)
        y = tide_builder_reshape(c->b, NULL, y, rank, dims);
    return set_out(c, 0, y);
}

/* A [D] vector from a tensor of D elements in any shape (LayerNorm's scale and bias). */
static int as_vector(struct ctx *c, size_t k, int64_t d, tide_ref *out)
{
    if (float_in(c, k, out) != 0)
        return -1;
    int32_t r;
    int64_t dims[MAX_RANK];
    if (ref_shape(c, *out, &r, dims) != 0)
        return -1;
    if (numel(r, dims) != d)
        return failf(c,
                     "input %zu holds %" PRId64 " elements, want %" PRId64 " (the normalised axes)",
                     k, numel(r, dims), d);
    if (r != 1)
        *out = tide_builder_reshape(c->b, NULL, *out, 1, &d);
    return check_builder(c, *out);
}

/* LayerNormalization over axes [axis, rank): tide's LayerNorm over the last axis of x seen
 * as [dims[:axis]..., prod(dims[axis:])], which normalises the same elements together. */
static int op_layer_normalization(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x, gain, bias;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (ref_shape(c, x, &rank, dims) != 0 || norm_axis(c, attr_i(n, "axis", -1), rank, &axis) != 0)
        return -1;
    if (attr_i(n, "stash_type", 1) != 1)
        return failf(c, "stash_type other than float32 is not supported");
    int64_t d = numel(rank - (int32_t)axis, dims + axis);
    if (as_vector(c, 1, d, &gain) != 0)
        return -1;
    if (has_input(n, 2)) {
        if (as_vector(c, 2, d, &bias) != 0)
            return -1;
    } else {
        float *zeros = calloc((size_t)(d ? d : 1), sizeof(float));
        if (!zeros)
            return failf(c, "out of memory");
        bias = tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, 1, &d, zeros);
        free(zeros);
    }
    int64_t flat[MAX_RANK];
    memcpy(flat, dims, sizeof(flat));
    flat[axis] = d;
    bool reshaped = axis != rank - 1;
    if (reshaped)
        x = tide_builder_reshape(c->b, NULL, x, (int32_t)axis + 1, flat);
    tide_ref ln = tide_builder_layer_norm(c->b, NULL, x, gain, bias, attr_f(n, "epsilon", 1e-5f));
    if (check_builder(c, ln) != 0)
        return -1;
    tide_ref y = reshaped ? tide_builder_reshape(c->b, NULL, ln, rank, dims) : ln;
    if (set_out(c, 0, y) != 0)
        return -1;
    /* Mean and InvStdDev keep the normalised axes as 1s. */
    int64_t stat_dims[MAX_RANK];
    memcpy(stat_dims, dims, sizeof(stat_dims));
    for (int32_t a = (int32_t)axis; a < rank; a++)
        stat_dims[a] = 1;
    for (size_t k = 1; k < 3 && k < n->n_output; k++) {
        if (!*n->output[k])
            continue;
        tide_ref stat = tide_builder_output(c->b, ln, (int32_t)k);
        if (set_out(c, k, tide_builder_reshape(c->b, NULL, stat, rank, stat_dims)) != 0)
            return -1;
    }
    return 0;
}

/* Whether a node after the current one, or a graph output, reads the value called name. */
static bool read_later(const struct ctx *c, const char *name)
{
    for (size_t k = c->at + 1; k < c->n_nodes; k++)
        for (size_t i = 0; i < c->nodes[k]->n_input; i++)
            if (strcmp(c->nodes[k]->input[i], name) == 0)
                return true;
    for (size_t k = 0; c->graph && k < c->graph->n_output; k++)
        if (c->graph->output[k]->name && strcmp(c->graph->output[k]->name, name) == 0)
            return true;
    return false;
}

static int op_dropout(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    float ratio = attr_f(n, "ratio", 0.5f);
    /* Versions 7 to 10 have no mode (tide runs them as in inference); 1 and 6 have is_test. */
    bool training = c->version < 7 && attr_i(n, "is_test", 0) == 0;
    if (c->version >= 12 && has_input(n, 2)) {
        struct value *t = in_const(c, 2, "training_mode");
        if (!t)
            return -1;
        training = get_num(t, 0) != 0;
    }
    /* The ratio matters only in training: in inference it may be computed in the graph. */
    if (c->version >= 12 && training && has_input(n, 1)) {
        struct value *r = in_const(c, 1, "ratio");
        if (!r)
            return -1;
        ratio = (float)get_num(r, 0);
    }
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    bool kept = !training || ratio == 0.0f; /* every element kept */
    if (n->n_output > 1 && *n->output[1]) {
        if (!kept) {
            mark_missing(c, 1, "is a Dropout mask, which tide does not give");
        } else if (read_later(c, n->output[1])) {
            /* Nothing dropped: the mask is all true, a constant of x's shape (made only when
             * read: PyTorch's exports name a mask on every Dropout and read none). */
            int32_t rank;
            int64_t dims[MAX_RANK];
            if (ref_shape(c, x, &rank, dims) != 0)
                return -1;
            struct value *mask = set_out_const(c, 1, CONST_BOOL, rank, dims);
            if (!mask)
                return -1;
            for (int64_t k = 0, count = numel(rank, dims); k < count; k++)
                mask->i[k] = 1;
        }
    }
    if (kept)
        return set_out(c, 0, tide_builder_identity(c->b, NULL, x));
    return set_out(c, 0, tide_builder_dropout(c->b, NULL, x, ratio, 0));
}

/* ---- shape ops on tensors ---- */

static int op_reshape(struct ctx *c)
{
    struct value *x = in_value(c, 0), *s = NULL;
    int32_t rank;
    int64_t dims[MAX_RANK], shape[MAX_RANK], n;
    if (!x || value_shape(c, x, &rank, dims) != 0)
        return -1;
    if (c->version < 5) { /* Reshape-1: the shape is an attribute */
        if (ints_attr(c, "shape", true, shape, &n) != 0)
            return -1;
    } else if (!(s = in_const(c, 1, "the shape")) || const_ints(c, s, shape, &n, MAX_RANK) != 0) {
        return -1;
    }
    bool allow_zero = attr_i(c->node, "allowzero", 0) != 0;
    int64_t known = 1, infer_at = -1;
    for (int64_t k = 0; k < n; k++) {
        if (shape[k] == 0 && !allow_zero) {
            if (k >= rank)
                return failf(c, "shape[%" PRId64 "] is 0 (copy), but the input has rank %d", k,
                             rank);
            shape[k] = dims[k];
        }
        if (shape[k] == -1) {
            if (infer_at >= 0)
                return failf(c, "shape holds -1 twice");
            infer_at = k;
        } else if (shape[k] < 0) {
            return failf(c, "shape[%" PRId64 "] is %" PRId64, k, shape[k]);
        } else if (__builtin_mul_overflow(known, shape[k], &known)) {
            return failf(c, "the shape's element count overflows");
        }
    }
    int64_t total = numel(rank, dims);
    if (infer_at >= 0) {
        if (known == 0 || total % known != 0)
            return failf(c, "cannot infer the -1 of the shape for %" PRId64 " elements", total);
        shape[infer_at] = total / known;
    }
    if (numel((int32_t)n, shape) != total)
        return failf(c, "shape holds %" PRId64 " elements, the input %" PRId64,
                     numel((int32_t)n, shape), total);
    return reshape_to(c, x, (int32_t)n, shape);
}

static int op_flatten(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], axis = attr_i(c->node, "axis", 1);
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    if (axis < 0)
        axis += rank;
    if (axis < 0 || axis > rank)
        return failf(c, "axis %" PRId64 " is out of range for rank %d", attr_i(c->node, "axis", 1),
                     rank);
    int64_t flat[2] = {numel((int32_t)axis, dims), numel(rank - (int32_t)axis, dims + axis)};
    return reshape_to(c, x, 2, flat);
}

static int op_transpose(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], perm[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    const int64_t *list = NULL;
    int64_t count = attr_ints(c->node, "perm", &list);
    for (int32_t k = 0; k < rank; k++)
        perm[k] = count < 0 ? rank - 1 - k : k < count ? list[k] : -1;
    if (count >= 0 && count != rank)
        return failf(c, "perm holds %" PRId64 " values for rank %d", count, rank);
    if (x->known && !x->trainable) {
        int64_t out[MAX_RANK];
        for (int32_t k = 0; k < rank; k++) {
            if (perm[k] < 0 || perm[k] >= rank)
                return failf(c, "perm[%d] is %" PRId64, k, perm[k]);
            out[k] = dims[perm[k]];
        }
        struct value src = *x;
        bool replaced = lookup(c, c->node->output[0]) == x; /* an output of the same name */
        if (replaced)
            x->f = NULL, x->i = NULL;
        struct value *v = set_out_const(c, 0, src.type, rank, out);
        int64_t total = numel(rank, out);
        for (int64_t k = 0; v && k < total; k++) {
            int64_t rem = k, pos = 0, coord[MAX_RANK];
            for (int32_t a = rank - 1; a >= 0; a--)
                coord[a] = rem % out[a], rem /= out[a];
            for (int32_t a = 0; a < rank; a++) {
                int64_t stride = numel(rank - perm[a] - 1, dims + perm[a] + 1);
                pos += coord[a] * stride;
            }
            if (src.type == CONST_FLOAT)
                v->f[k] = src.f[pos];
            else
                v->i[k] = src.i[pos];
        }
        if (replaced)
            free(src.f), free(src.i);
        return v ? 0 : -1;
    }
    tide_ref r;
    if (in_ref(c, 0, &r) != 0)
        return -1;
    return set_out(c, 0, tide_builder_transpose(c->b, NULL, r, perm, rank));
}

static int op_concat(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    bool all_known = true;
    int32_t rank = 0;
    int64_t dims[MAX_RANK];
    for (size_t k = 0; k < n->n_input; k++) {
        struct value *v = in_value(c, k);
        if (!v)
            return -1;
        all_known &= v->known && !v->trainable;
        if (k == 0 && value_shape(c, v, &rank, dims) != 0)
            return -1;
    }
    if (n->n_input == 0)
        return failf(c, "no inputs");
    int64_t axis; /* Concat-1's axis defaults to 1; later versions require it */
    if (c->version >= 4 && !attr(n, "axis"))
        return failf(c, "attribute axis is required");
    if (norm_axis(c, attr_i(n, "axis", 1), rank, &axis) != 0)
        return -1;
    if (all_known) {
        /* Fold: outer x (sum of inner blocks). */
        int64_t out[MAX_RANK];
        memcpy(out, dims, sizeof(out));
        out[axis] = 0;
        enum const_type t = lookup(c, n->input[0])->type;
        for (size_t k = 0; k < n->n_input; k++) {
            struct value *v = lookup(c, n->input[k]);
            if (v->rank != rank || (v->type == CONST_FLOAT) != (t == CONST_FLOAT))
                return failf(c, "inputs differ in rank or type");
            for (int32_t a = 0; a < rank; a++)
                if (a != axis && v->dims[a] != dims[a])
                    return failf(c, "inputs differ at axis %d", a);
            out[axis] += v->dims[axis];
        }
        int64_t outer = numel((int32_t)axis, dims);
        int64_t total = numel(rank, out);
        float *f = t == CONST_FLOAT ? malloc((size_t)(total ? total : 1) * sizeof(float)) : NULL;
        int64_t *iv =
            t != CONST_FLOAT ? malloc((size_t)(total ? total : 1) * sizeof(int64_t)) : NULL;
        if (!f && !iv)
            return failf(c, "out of memory");
        int64_t pos = 0;
        for (int64_t o = 0; o < outer; o++) {
            for (size_t k = 0; k < n->n_input; k++) {
                struct value *v = lookup(c, n->input[k]);
                int64_t block = numel(rank - (int32_t)axis, v->dims + axis);
                if (f)
                    memcpy(f + pos, v->f + o * block, (size_t)block * sizeof(float));
                else
                    memcpy(iv + pos, v->i + o * block, (size_t)block * sizeof(int64_t));
                pos += block;
            }
        }
        struct value *v = define(c, n->output[0]);
        v->known = true;
        v->type = t;
        v->rank = rank;
        memcpy(v->dims, out, sizeof(out));
        v->f = f;
        v->i = iv;
        return 0;
    }
    tide_ref *xs = malloc(n->n_input * sizeof(tide_ref));
    if (!xs)
        return failf(c, "out of memory");
    for (size_t k = 0; k < n->n_input; k++) {
        if (in_ref(c, k, &xs[k]) != 0) {
            free(xs);
            return -1;
        }
    }
    tide_ref r = tide_builder_concat(c->b, NULL, xs, (int32_t)n->n_input, axis);
    free(xs);
    return set_out(c, 0, r);
}

/*
 * Slices x (a graph tensor or a constant) to size[a] elements from begin[a]
 * on each axis a, step[a] apart (step NULL: every step 1). A tensor is
 * sliced by tide's Slice where the steps are 1, and along each other axis by
 * a Gather of the elements' constant indices (so the gradient reaches x).
 */
static int slice_out(struct ctx *c, size_t out_k, struct value *x, int32_t rank,
                     const int64_t *dims, const int64_t *begin, const int64_t *size,
                     const int64_t *step)
{
    if (x->known && !x->trainable) {
        struct value src = *x;
        bool replaced = out_k < c->node->n_output && lookup(c, c->node->output[out_k]) == x;
        if (replaced)
            x->f = NULL, x->i = NULL;
        struct value *v = set_out_const(c, out_k, src.type, rank, size);
        int64_t total = numel(rank, size);
        for (int64_t k = 0; v && k < total; k++) {
            int64_t rem = k, pos = 0, stride = 1;
            for (int32_t a = rank - 1; a >= 0; a--) {
                pos += (begin[a] + rem % size[a] * (step ? step[a] : 1)) * stride;
                rem /= size[a];
                stride *= dims[a];
            }
            if (src.type == CONST_FLOAT)
                v->f[k] = src.f[pos];
            else
                v->i[k] = src.i[pos];
        }
        if (replaced)
            free(src.f), free(src.i);
        return v ? 0 : -1;
    }
    tide_ref r;
    if (in_ref(c, 0, &r) != 0)
        return -1;
    int64_t b1[MAX_RANK], s1[MAX_RANK], d[MAX_RANK];
    bool stepped = false;
    for (int32_t a = 0; a < rank; a++) {
        bool unit = !step || step[a] == 1;
        b1[a] = unit ? begin[a] : 0;
        s1[a] = unit ? size[a] : dims[a];
        d[a] = s1[a];
        stepped |= !unit;
    }
    r = tide_builder_slice(c->b, NULL, r, b1, s1, rank);
    if (stepped && tide_builder_dtype(c->b, r) != TIDE_DT_FLOAT32)
        return failf(c, "a step other than 1 on an integer tensor computed in the graph is not "
                        "supported");
    for (int32_t a = 0; stepped && a < rank; a++) {
        if (step[a] == 1)
            continue;
        /* Gather's ids are int32, and the constant is bounded like the import's others. */
        if (dims[a] > INT32_MAX || size[a] > FOLD_MAX_ELEMENTS)
            return failf(c,
                         "a step on axis %d of size %" PRId64 " is more than the import gathers",
                         a, dims[a]);
        int32_t *ids = malloc((size_t)(size[a] ? size[a] : 1) * sizeof(int32_t));
        if (!ids)
            return failf(c, "out of memory");
        for (int64_t k = 0; k < size[a]; k++) /* inside [0, dims[a]): op_slice clamped them */
            ids[k] = (int32_t)(begin[a] + k * step[a]);
        int rc = gather_axis(c, &r, rank, d, a, size[a], 1, ids, NULL);
        free(ids);
        if (rc != 0)
            return -1;
    }
    return set_out(c, out_k, r);
}

static int op_slice(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    int64_t starts[MAX_RANK], ends[MAX_RANK], axes[MAX_RANK], steps[MAX_RANK], ns, ne, na = -1,
                                                                                       nst = -1;
    struct value *v;
    if (c->version < 10) { /* Slice-1: starts, ends and axes are attributes; no steps */
        if (ints_attr(c, "starts", true, starts, &ns) != 0 ||
            ints_attr(c, "ends", true, ends, &ne) != 0 ||
            ints_attr(c, "axes", false, axes, &na) != 0)
            return -1;
    } else {
        if (!(v = in_const(c, 1, "starts")) || const_ints(c, v, starts, &ns, MAX_RANK) != 0)
            return -1;
        if (!(v = in_const(c, 2, "ends")) || const_ints(c, v, ends, &ne, MAX_RANK) != 0)
            return -1;
        if (has_input(n, 3) &&
            (!(v = in_const(c, 3, "axes")) || const_ints(c, v, axes, &na, MAX_RANK) != 0))
            return -1;
        if (has_input(n, 4) &&
            (!(v = in_const(c, 4, "steps")) || const_ints(c, v, steps, &nst, MAX_RANK) != 0))
            return -1;
    }
    if (ne != ns || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
        return failf(c, "starts, ends, axes and steps differ in length");
    int64_t begin[MAX_RANK], size[MAX_RANK], step[MAX_RANK];
    for (int32_t a = 0; a < rank; a++)
        begin[a] = 0, size[a] = dims[a], step[a] = 1;
    for (int64_t k = 0; k < ns; k++) {
        int64_t axis;
        if (norm_axis(c, na >= 0 ? axes[k] : k, rank, &axis) != 0)
            return -1;
        int64_t st = nst >= 0 ? steps[k] : 1;
        /* Past these, the element counts below could overflow; dims are far smaller. */
        if (st == 0 || st < -INT32_MAX || st > INT32_MAX)
            return failf(c, "steps[%" PRId64 "] is %" PRId64 ", not a non-zero value in -%d..%d",
                         k, st, INT32_MAX, INT32_MAX);
        /* ONNX's clamping: [0, d] for a positive step, [-1, d - 1] for a negative one. */
        int64_t d = dims[axis], s = starts[k], e = ends[k];
        if (s < 0)
            s = s < -d ? -1 : s + d;
        if (e < 0)
            e = e < -d ? -1 : e + d;
        if (st > 0) {
            s = s < 0 ? 0 : s > d ? d : s;
            e = e < 0 ? 0 : e > d ? d : e;
            size[axis] = e > s ? (e - s + st - 1) / st : 0;
        } else {
            s = s < 0 ? 0 : s > d - 1 ? d - 1 : s;
            e = e < -1 ? -1 : e > d - 1 ? d - 1 : e;
            size[axis] = s > e ? (s - e - st - 1) / -st : 0;
        }
        begin[axis] = s;
        step[axis] = st;
    }
    return slice_out(c, 0, x, rank, dims, begin, size, step);
}

static int op_split(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (value_shape(c, x, &rank, dims) != 0 || norm_axis(c, attr_i(n, "axis", 0), rank, &axis) != 0)
        return -1;
    size_t parts = n->n_output;
    int64_t *split = calloc(parts ? parts : 1, sizeof(int64_t));
    if (!split)
        return failf(c, "out of memory");
    int64_t count = -1;
    const Onnx__AttributeProto *num = c->version >= 18 ? attr(n, "num_outputs") : NULL;
    if (num) {
        /* Split-18: num_outputs parts of ceil(size / num_outputs), the last one smaller. */
        int64_t d = dims[axis], want = num->has_i ? num->i : 0;
        if (has_input(n, 1) || want != (int64_t)parts) {
            free(split);
            if (has_input(n, 1))
                return failf(c, "num_outputs and the input split are both given");
            return failf(c, "num_outputs is %" PRId64 ", but the node has %zu outputs", want,
                         parts);
        }
        /* want is the node's output count (at least 1) from here: nothing overflows. */
        int64_t chunk = (d + want - 1) / want;
        if (chunk * (want - 1) > d) {
            free(split);
            return failf(c, "axis %" PRId64 " of size %" PRId64 " does not split in %" PRId64
                            " parts of %" PRId64,
                         axis, d, want, chunk);
        }
        for (size_t k = 0; k < parts; k++)
            split[k] = k + 1 < parts ? chunk : d - chunk * (want - 1);
        count = want;
    } else if (c->version >= 13) {
        if (has_input(n, 1)) {
            struct value *s = in_const(c, 1, "split");
            if (!s || s->type == CONST_FLOAT) {
                free(split);
                return s ? failf(c, "split must hold integers") : -1;
            }
            count = numel(s->rank, s->dims);
            for (int64_t k = 0; count == (int64_t)parts && k < count; k++)
                split[k] = s->i[k];
        }
    } else {
        const int64_t *list = NULL;
        count = attr_ints(n, "split", &list);
        for (int64_t k = 0; count == (int64_t)parts && k < count; k++)
            split[k] = list[k];
    }
    if (count >= 0 && count != (int64_t)parts) {
        free(split);
        return failf(c, "split holds %" PRId64 " sizes for %zu outputs", count, parts);
    }
    if (count < 0) {
        if (dims[axis] % (int64_t)parts != 0) {
            free(split);
            return failf(c, "axis %" PRId64 " of size %" PRId64 " does not split evenly in %zu",
                         axis, dims[axis], parts);
        }
        for (size_t k = 0; k < parts; k++)
            split[k] = dims[axis] / (int64_t)parts;
    }
    int64_t at = 0;
    for (size_t k = 0; k < parts; k++) {
        if (split[k] < 0 || split[k] > dims[axis]) {
            int64_t bad = split[k];
            free(split);
            return failf(c, "split size %" PRId64 " is out of range for %" PRId64, bad, dims[axis]);
        }
        at += split[k];
    }
    if (at != dims[axis]) {
        free(split);
        return failf(c, "split sizes add up to %" PRId64 ", not %" PRId64, at, dims[axis]);
    }
    /* Graph tensors first get their ref, so that slicing a known input that is also an
     * output name of this node stays safe: outputs are defined after all reads. */
    at = 0;
    int rc = 0;
    for (size_t k = 0; k < parts && rc == 0; k++) {
        int64_t begin[MAX_RANK] = {0}, size[MAX_RANK];
        memcpy(size, dims, sizeof(size));
        begin[axis] = at;
        size[axis] = split[k];
        at += split[k];
        rc = slice_out(c, k, x, rank, dims, begin, size, NULL);
    }
    free(split);
    return rc;
}

static int op_gather(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    struct value *data = in_value(c, 0), *ids = data ? in_value(c, 1) : NULL;
    if (!ids)
        return -1;
    int32_t rank, ri;
    int64_t dims[MAX_RANK], di[MAX_RANK], axis;
    if (value_shape(c, data, &rank, dims) != 0 || value_shape(c, ids, &ri, di) != 0 ||
        norm_axis(c, attr_i(n, "axis", 0), rank, &axis) != 0)
        return -1;
    if (ids->known && ids->type == CONST_FLOAT)
        return failf(c, "indices must be integers");
    if (rank - 1 + ri > MAX_RANK)
        return failf(c, "the output's rank %d is more than tide's %d", rank - 1 + ri, MAX_RANK);
    if (data->known && !data->trainable && ids->known) {
        int64_t out[MAX_RANK];
        int32_t ro = 0;
        for (int32_t a = 0; a < axis; a++)
            out[ro++] = dims[a];
        for (int32_t a = 0; a < ri; a++)
            out[ro++] = di[a];
        for (int32_t a = (int32_t)axis + 1; a < rank; a++)
            out[ro++] = dims[a];
        int64_t outer = numel((int32_t)axis, dims),
                inner = numel(rank - (int32_t)axis - 1, dims + axis + 1);
        int64_t n_ids = numel(ri, di);
        for (int64_t k = 0; k < n_ids; k++)
            if (ids->i[k] < -dims[axis] || ids->i[k] >= dims[axis])
                return failf(c, "index %" PRId64 " is out of range for size %" PRId64, ids->i[k],
                             dims[axis]);
        struct value src = *data, sid = *ids;
        struct value *outv = lookup(c, n->output[0]);
        bool replaced = outv == data || outv == ids;
        if (replaced)
            outv->f = NULL, outv->i = NULL;
        struct value *v = set_out_const(c, 0, src.type, ro, out);
        for (int64_t o = 0; v && o < outer; o++)
            for (int64_t k = 0; k < n_ids; k++) {
                int64_t id = sid.i[k] < 0 ? sid.i[k] + dims[axis] : sid.i[k];
                for (int64_t e = 0; e < inner; e++) {
                    int64_t from = (o * dims[axis] + id) * inner + e,
                            to = (o * n_ids + k) * inner + e;
                    if (src.type == CONST_FLOAT)
                        v->f[to] = src.f[from];
                    else
                        v->i[to] = src.i[from];
                }
            }
        if (replaced)
            free(outv == data ? src.f : sid.f), free(outv == data ? src.i : sid.i);
        return v ? 0 : -1;
    }
    if (axis != 0 && ids->known && numel(ri, di) > 0) {
        /* Constant indices along another axis (x[:, 0], a classifier's first token): the
         * axis's rows picked by gather_axis, then the indices' shape in the axis's place. */
        int64_t n_ids = numel(ri, di), out[MAX_RANK];
        if (n_ids > INT32_MAX)
            return failf(c, "%" PRId64 " indices are more than the import folds", n_ids);
        int32_t *sel = malloc((size_t)n_ids * sizeof(int32_t)), ro = 0;
        if (!sel)
            return failf(c, "out of memory");
        for (int64_t k = 0; k < n_ids; k++) {
            if (ids->i[k] < -dims[axis] || ids->i[k] >= dims[axis]) {
                free(sel);
                return failf(c, "index %" PRId64 " is out of range for size %" PRId64, ids->i[k],
                             dims[axis]);
            }
            sel[k] = (int32_t)(ids->i[k] < 0 ? ids->i[k] + dims[axis] : ids->i[k]);
        }
        for (int32_t a = 0; a < axis; a++)
            out[ro++] = dims[a];
        for (int32_t a = 0; a < ri; a++)
            out[ro++] = di[a];
        for (int32_t a = (int32_t)axis + 1; a < rank; a++)
            out[ro++] = dims[a];
        tide_ref x;
        int rc = float_in(c, 0, &x) != 0 ||
                 gather_axis(c, &x, rank, dims, (int32_t)axis, n_ids, 1, sel, NULL) != 0;
        free(sel);
        return rc ? -1 : set_out(c, 0, tide_builder_reshape(c->b, NULL, x, ro, out));
    }
    tide_ref table, idx;
    if (float_in(c, 0, &table) != 0)
        return -1;
    if (axis != 0 && !ids->known) {
        /* Indices computed in the graph along another axis: that axis moved first, Gather's
         * rows picked, then the axes before it moved back in front of the indices' own. */
        int64_t perm[MAX_RANK], back[MAX_RANK];
        for (int32_t a = 0; a < rank; a++)
            perm[a] = a == 0 ? axis : a <= axis ? a - 1 : a;
        int32_t ro = rank - 1 + ri;
        for (int32_t a = 0; a < ro; a++)
            back[a] = a < axis ? ri + a : a < axis + ri ? a - axis : a;
        if (in_ref(c, 1, &idx) != 0)
            return -1;
        if (tide_builder_dtype(c->b, idx) != TIDE_DT_INT32)
            return failf(c, "indices must be integers");
        tide_ref front = tide_builder_transpose(c->b, NULL, table, perm, rank);
        tide_ref g = tide_builder_gather(c->b, NULL, front, idx);
        return set_out(c, 0, tide_builder_transpose(c->b, NULL, g, back, ro));
    }
    if (ids->known) {
        /* Negative indices count from the end: fix them up here, where they are known. */
        int64_t n_ids = numel(ri, di);
        for (int64_t k = 0; k < n_ids; k++) {
            if (ids->i[k] < -dims[0] || ids->i[k] >= dims[0])
                return failf(c, "index %" PRId64 " is out of range for size %" PRId64, ids->i[k],
                             dims[0]);
        }
        if (!ids->has_ref)
            for (int64_t k = 0; k < n_ids; k++)
                if (ids->i[k] < 0)
                    ids->i[k] += dims[0];
    }
    if (in_ref(c, 1, &idx) != 0)
        return -1;
    if (tide_builder_dtype(c->b, idx) != TIDE_DT_INT32)
        return failf(c, "indices must be integers");
    return set_out(c, 0, tide_builder_gather(c->b, NULL, table, idx));
}

/*
 * GatherElements: tide's GatherElements along the normalised axis; int64
 * indices arrive as int32, negative ones count from the end on the device.
 */
static int op_gather_elements(struct ctx *c)
{
    tide_ref data, idx;
    if (float_in(c, 0, &data) != 0 || in_ref(c, 1, &idx) != 0)
        return -1;
    if (tide_builder_dtype(c->b, idx) != TIDE_DT_INT32)
        return failf(c, "indices must be integers");
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (ref_shape(c, data, &rank, dims) != 0 ||
        norm_axis(c, attr_i(c->node, "axis", 0), rank, &axis) != 0)
        return -1;
    return set_out(c, 0,
                   tide_builder_gather_elements(c->b, NULL, data, idx, axis,
                                                TIDE_BUILDER_NO_IGNORE_INDEX));
}

static int op_expand(struct ctx *c)
{
    struct value *x = in_value(c, 0), *s = x ? in_const(c, 1, "the shape") : NULL;
    if (!s)
        return -1;
    int32_t rank, ro;
    int64_t dims[MAX_RANK], shape[MAX_RANK], ns, out[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0 || const_ints(c, s, shape, &ns, MAX_RANK) != 0 ||
        broadcast_shape(c, rank, dims, (int32_t)ns, shape, &ro, out) != 0)
        return -1;
    if (x->known && !x->trainable) {
        struct value src = *x;
        bool replaced = lookup(c, c->node->output[0]) == x;
        if (replaced)
            x->f = NULL, x->i = NULL;
        struct value *v = set_out_const(c, 0, src.type, ro, out);
        int64_t total = numel(ro, out);
        for (int64_t k = 0; v && k < total; k++) {
            int64_t from = broadcast_index(ro, out, k, src.rank, src.dims);
            if (src.type == CONST_FLOAT)
                v->f[k] = src.f[from];
            else
                v->i[k] = src.i[from];
        }
        if (replaced)
            free(src.f), free(src.i);
        return v ? 0 : -1;
    }
    tide_ref r;
    if (float_in(c, 0, &r) != 0)
        return -1;
    return set_out(c, 0, tide_builder_broadcast_to(c->b, NULL, r, ro, out));
}

/* The reductions that are ReduceSum or ReduceMean with an element-wise step before or after. */
enum reduction {
    REDUCE_MEAN,
    REDUCE_SUM,
    REDUCE_L1,          /* sum |x| */
    REDUCE_L2,          /* sqrt(sum x^2) */
    REDUCE_SUM_SQUARE,  /* sum x^2 */
    REDUCE_LOG_SUM,     /* log(sum x) */
    REDUCE_LOG_SUM_EXP, /* log(sum exp(x)), as ONNX's reference computes it (no max shift) */
};

static tide_ref abs_of(struct ctx *c, tide_ref x);

/*
 * The axes of a reduction: an attribute until ReduceSum-13 and the others'
 * version 18, an optional constant input since. *n_axes 0 when none are
 * given: all axes, or none (*noop) when noop_with_empty_axes says so.
 */
static int reduce_axes(struct ctx *c, bool sum, int64_t axes[MAX_RANK], int64_t *n_axes,
                       bool *noop)
{
    const Onnx__NodeProto *n = c->node;
    *n_axes = 0;
    *noop = false;
    if (c->version >= (sum ? 13 : 18)) {
        if (attr(n, "axes"))
            return failf(c, "axes is an input from %s-%d on, not an attribute", n->op_type,
                         sum ? 13 : 18);
        if (has_input(n, 1)) {
            struct value *a = in_const(c, 1, "axes");
            if (!a || const_ints(c, a, axes, n_axes, MAX_RANK) != 0)
                return -1;
        }
        *noop = *n_axes == 0 && attr_i(n, "noop_with_empty_axes", 0) != 0;
        return 0;
    }
    int64_t count;
    if (ints_attr(c, "axes", false, axes, &count) != 0)
        return -1;
    *n_axes = count > 0 ? count : 0;
    return 0;
}

/* The reductions folded on integer constants (fold_int_reduce). */
enum int_reduction { INT_REDUCE_SUM, INT_REDUCE_PROD, INT_REDUCE_MAX, INT_REDUCE_MIN };

/*
 * ReduceSum, ReduceProd, ReduceMax or ReduceMin of a known integer tensor
 * (x.var() and x.std() export the count of elements as ReduceProd of a
 * Shape's Gather), folded on the host with the axes, keepdims and
 * noop_with_empty_axes of the node's version: tide has no integer
 * arithmetic in the graph. A sum or product past int64 is refused, as is the
 * largest or smallest of no elements. 1 when x is not such a value.
 */
static int fold_int_reduce(struct ctx *c, enum int_reduction kind)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    if (!x->known || x->type != CONST_INT)
        return 1;
    int64_t axes[MAX_RANK], n_axes, out[MAX_RANK];
    bool noop, reduce[MAX_RANK], keep = attr_i(c->node, "keepdims", 1) != 0;
    if (reduce_axes(c, kind == INT_REDUCE_SUM, axes, &n_axes, &noop) != 0)
        return -1;
    for (int32_t a = 0; a < x->rank; a++)
        reduce[a] = n_axes == 0 && !noop;
    for (int64_t k = 0; k < n_axes; k++) {
        int64_t a;
        if (norm_axis(c, axes[k], x->rank, &a) != 0)
            return -1;
        reduce[a] = true;
    }
    int32_t no = 0;
    bool none = false; /* a reduced axis is empty: each result combines no elements */
    for (int32_t a = 0; a < x->rank; a++) {
        if (!reduce[a])
            out[no++] = x->dims[a];
        else if (keep)
            out[no++] = 1;
        none = none || (reduce[a] && x->dims[a] == 0);
    }
    if (none && (kind == INT_REDUCE_MAX || kind == INT_REDUCE_MIN))
        return failf(c, "%s of no elements (a reduced axis of \"%s\" is empty)", c->node->op_type,
                     x->name);
    struct value *v = set_out_const(c, 0, CONST_INT, no, out); /* x stays: another name */
    if (!v)
        return -1;
    int64_t n_out = numel(no, out), start = kind == INT_REDUCE_SUM    ? 0
                                            : kind == INT_REDUCE_PROD ? 1
                                            : kind == INT_REDUCE_MAX  ? INT64_MIN
                                                                      : INT64_MAX;
    for (int64_t k = 0; k < n_out; k++)
        v->i[k] = start;
    for (int64_t k = 0, count = numel(x->rank, x->dims); k < count; k++) {
        /* The result element of x's element k: its coordinates on the kept axes. */
        int64_t rest = k, at = 0, stride = 1;
        for (int32_t a = x->rank - 1; a >= 0; a--) {
            int64_t coord = rest % x->dims[a];
            rest /= x->dims[a];
            if (!reduce[a]) {
                at += coord * stride;
                stride *= x->dims[a];
            }
        }
        int64_t *r = &v->i[at], e = x->i[k];
        bool overflow = false;
        if (kind == INT_REDUCE_SUM)
            overflow = __builtin_add_overflow(*r, e, r);
        else if (kind == INT_REDUCE_PROD)
            overflow = __builtin_mul_overflow(*r, e, r);
        else if (kind == INT_REDUCE_MAX ? e > *r : e < *r)
            *r = e;
        if (overflow)
            return failf(c, "the %s of \"%s\" overflows int64 at element %" PRId64 " of the result",
                         kind == INT_REDUCE_SUM ? "sum" : "product", x->name, at);
    }
    return 0;
}

static int reduce(struct ctx *c, enum reduction kind)
{
    if (kind == REDUCE_SUM) {
        int folded = fold_int_reduce(c, INT_REDUCE_SUM);
        if (folded <= 0)
            return folded;
    }
    const Onnx__NodeProto *n = c->node;
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int64_t axes[MAX_RANK], n_axes;
    bool keep = attr_i(n, "keepdims", 1) != 0, noop;
    if (reduce_axes(c, kind == REDUCE_SUM, axes, &n_axes, &noop) != 0)
        return -1;
    if (noop)
        return set_out(c, 0, tide_builder_identity(c->b, NULL, x));
    switch (kind) {
    case REDUCE_L1:
        x = abs_of(c, x);
        break;
    case REDUCE_L2:
    case REDUCE_SUM_SQUARE:
        x = tide_builder_mul(c->b, NULL, x, x);
        break;
    case REDUCE_LOG_SUM_EXP:
        x = tide_builder_exp(c->b, NULL, x);
        break;
    default:
        break;
    }
    tide_ref r = kind == REDUCE_MEAN
                     ? tide_builder_reduce_mean(c->b, NULL, x, axes, (int32_t)n_axes, keep)
                     : tide_builder_reduce_sum(c->b, NULL, x, axes, (int32_t)n_axes, keep);
    if (kind == REDUCE_L2)
        r = tide_builder_sqrt(c->b, NULL, r);
    else if (kind == REDUCE_LOG_SUM || kind == REDUCE_LOG_SUM_EXP)
        r = tide_builder_log(c->b, NULL, r);
    return set_out(c, 0, r);
}

static int op_reduce_mean(struct ctx *c)
{
    return reduce(c, REDUCE_MEAN);
}

static int op_reduce_sum(struct ctx *c)
{
    return reduce(c, REDUCE_SUM);
}

static int op_reduce_l1(struct ctx *c)
{
    return reduce(c, REDUCE_L1);
}

static int op_reduce_l2(struct ctx *c)
{
    return reduce(c, REDUCE_L2);
}

static int op_reduce_sum_square(struct ctx *c)
{
    return reduce(c, REDUCE_SUM_SQUARE);
}

static int op_reduce_log_sum(struct ctx *c)
{
    return reduce(c, REDUCE_LOG_SUM);
}

static int op_reduce_log_sum_exp(struct ctx *c)
{
    return reduce(c, REDUCE_LOG_SUM_EXP);
}

static int op_size(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    struct value *v = set_out_const(c, 0, CONST_INT, 0, NULL);
    if (!v)
        return -1;
    v->i[0] = numel(rank, dims);
    return 0;
}

/* A float32 scalar Const. */
static tide_ref scalar(struct ctx *c, float value)
{
    return tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, 0, NULL, &value);
}

/* Clip: min(max(x, lo), hi) as NumPy's clip, with constant bounds. */
static int op_clip(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x, bounds[2];
    bool has[2] = {false, false};
    if (float_in(c, 0, &x) != 0)
        return -1;
    if (c->opset >= 11) {
        /* A bound computed in the graph (or trained) is taken as that tensor: its gradient
         * goes where the bound was taken, as with PyTorch's clamp of tensor bounds. */
        for (size_t k = 1; k < 3; k++) {
            if (!has_input(n, k))
                continue;
            struct value *v = in_value(c, k);
            if (!v)
                return -1;
            has[k - 1] = true;
            if (v->known && !v->trainable)
                bounds[k - 1] = scalar(c, (float)get_num(v, 0));
            else if (float_in(c, k, &bounds[k - 1]) != 0)
                return -1;
        }
    } else { /* Clip-1 and Clip-6: the bounds are attributes */
        const Onnx__AttributeProto *a;
        for (int k = 0; k < 2; k++) {
            if ((a = attr(n, k == 0 ? "min" : "max")) && a->has_f)
                has[k] = true, bounds[k] = scalar(c, a->f);
        }
    }
    /* min first: where min > max every value is max, as ONNX says. */
    if (has[0])
        x = tide_builder_max(c->b, NULL, x, bounds[0]);
    if (has[1])
        x = tide_builder_min(c->b, NULL, x, bounds[1]);
    if (!has[0] && !has[1])
        x = tide_builder_identity(c->b, NULL, x);
    return set_out(c, 0, x);
}

/* LeakyRelu: max(x, alpha x), equal to ONNX's for alpha in [0, 1]. */
static int op_leaky_relu(struct ctx *c)
{
    float alpha = attr_f(c->node, "alpha", 0.01f);
    if (!(alpha >= 0.0f && alpha <= 1.0f))
        return failf(c, "alpha %g is not supported (only 0 to 1)", alpha);
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    return set_out(c, 0, tide_builder_max(c->b, NULL, x, tide_builder_scale(c->b, NULL, x, alpha)));
}

/* ---- selections by masks: ThresholdedRelu, Shrink, Sign, IsNaN, IsInf ---- */

/* Compare of x with the float32 scalar v: a mask. */
static tide_ref compare_scalar(struct ctx *c, tide_ref x, float v, enum tide_compare_mode mode)
{
    return tide_builder_compare(c->b, NULL, x, scalar(c, v), mode);
}

/* ThresholdedRelu: x where x > alpha, else 0 (Select: the gradient passes where x does). */
static int op_thresholded_relu(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref above = compare_scalar(c, x, attr_f(c->node, "alpha", 1.0f), TIDE_COMPARE_GREATER);
    return set_out(c, 0, tide_builder_select(c->b, NULL, above, x, scalar(c, 0.0f)));
}

/* Shrink: x - bias where x > lambd, x + bias where x < -lambd, else 0. */
static int op_shrink(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    float lambd = attr_f(c->node, "lambd", 0.5f), bias = attr_f(c->node, "bias", 0.0f);
    tide_builder *b = c->b;
    tide_ref low =
        tide_builder_select(b, NULL, compare_scalar(c, x, -lambd, TIDE_COMPARE_LESS),
                            tide_builder_add(b, NULL, x, scalar(c, bias)), scalar(c, 0.0f));
    return set_out(c, 0,
                   tide_builder_select(b, NULL, compare_scalar(c, x, lambd, TIDE_COMPARE_GREATER),
                                       tide_builder_sub(b, NULL, x, scalar(c, bias)), low));
}

/*
 * Sign: 1 where x > 0, -1 where x < 0, NaN where x is, else 0; constants
 * chosen by Select, so no gradient reaches x but through a NaN.
 */
static int op_sign(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_builder *b = c->b;
    tide_ref rest = tide_builder_select(
        b, NULL, tide_builder_compare(b, NULL, x, x, TIDE_COMPARE_NOT_EQUAL), x, scalar(c, 0.0f));
    rest = tide_builder_select(b, NULL, compare_scalar(c, x, 0.0f, TIDE_COMPARE_LESS),
                               scalar(c, -1.0f), rest);
    return set_out(c, 0,
                   tide_builder_select(b, NULL, compare_scalar(c, x, 0.0f, TIDE_COMPARE_GREATER),
                                       scalar(c, 1.0f), rest));
}

/* IsNaN: x != x, a mask. */
static int op_is_nan(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    return set_out_mask(c, 0, tide_builder_compare(c->b, NULL, x, x, TIDE_COMPARE_NOT_EQUAL));
}

/* IsInf: x equal to +inf (detect_positive) or to -inf (detect_negative), a mask. */
static int op_is_inf(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    bool pos = attr_i(c->node, "detect_positive", 1) != 0,
         neg = attr_i(c->node, "detect_negative", 1) != 0;
    tide_ref p = compare_scalar(c, x, INFINITY, TIDE_COMPARE_EQUAL);
    tide_ref n = compare_scalar(c, x, -INFINITY, TIDE_COMPARE_EQUAL);
    tide_ref y = pos && neg ? tide_builder_max(c->b, NULL, p, n)
                 : pos      ? p
                 : neg      ? n
                            : tide_builder_scale(c->b, NULL, p, 0.0f); /* all false */
    return set_out_mask(c, 0, y);
}

/* PRelu: relu(x) + min(x, 0) * slope. */
static int op_prelu(struct ctx *c)
{
    tide_ref x, slope;
    if (float_in(c, 0, &x) != 0 || float_in(c, 1, &slope) != 0)
        return -1;
    if (c->version < 7) {
        /* PRelu-1 and PRelu-6: a slope of one value is shared, one of C values is per channel
         * (axis 1); later versions broadcast it as NumPy does. */
        int32_t rx, rs;
        int64_t dx[MAX_RANK], ds[MAX_RANK], one[MAX_RANK];
        if (ref_shape(c, x, &rx, dx) != 0 || ref_shape(c, slope, &rs, ds) != 0)
            return -1;
        int64_t count = numel(rs, ds);
        if (count != 1) {
            if (rx < 2 || count != dx[1]) {
                char tx[160], ts[160];
                return failf(c, "slope of shape %s is neither one value nor one per channel of "
                                "x's %s",
                             dims_text(ts, sizeof(ts), rs, ds), dims_text(tx, sizeof(tx), rx, dx));
            }
            for (int32_t k = 0; k < rx - 1; k++)
                one[k] = k ? 1 : count;
            slope = tide_builder_reshape(c->b, NULL, slope, rx - 1, one);
        }
    }
    tide_ref neg =
        tide_builder_mul(c->b, NULL, tide_builder_min(c->b, NULL, x, scalar(c, 0.0f)), slope);
    return set_out(c, 0, tide_builder_add(c->b, NULL, tide_builder_relu(c->b, NULL, x), neg));
}

static int op_reciprocal(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    return set_out(c, 0, tide_builder_div(c->b, NULL, scalar(c, 1.0f), x));
}

static tide_ref abs_of(struct ctx *c, tide_ref x)
{
    return tide_builder_max(c->b, NULL, x, tide_builder_neg(c->b, NULL, x));
}

static int op_abs(struct ctx *c)
{
    int folded = fold_int_unary(c, false);
    if (folded <= 0)
        return folded;
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    return set_out(c, 0, abs_of(c, x));
}

/* Softsign: x / (1 + |x|). */
static int op_softsign(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref den = tide_builder_add(c->b, NULL, abs_of(c, x), scalar(c, 1.0f));
    return set_out(c, 0, tide_builder_div(c->b, NULL, x, den));
}

/* Softplus: log(exp(x) + 1), as ONNX defines it. */
static int op_softplus(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref e = tide_builder_add(c->b, NULL, tide_builder_exp(c->b, NULL, x), scalar(c, 1.0f));
    return set_out(c, 0, tide_builder_log(c->b, NULL, e));
}

/* HardSwish: x * HardSigmoid(x) with alpha 1/6 and beta 0.5. */
static int op_hard_swish(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref h = tide_builder_add(c->b, NULL, tide_builder_scale(c->b, NULL, x, 1.0f / 6.0f),
                                  scalar(c, 0.5f));
    h = tide_builder_max(c->b, NULL, tide_builder_min(c->b, NULL, h, scalar(c, 1.0f)),
                         scalar(c, 0.0f));
    return set_out(c, 0, tide_builder_mul(c->b, NULL, x, h));
}

/* Mish: x * tanh(softplus(x)), softplus as ln(1 + e^x) (past e^88 it is inf, and tanh 1). */
static int op_mish(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref sp = tide_builder_log(
        c->b, NULL, tide_builder_add(c->b, NULL, tide_builder_exp(c->b, NULL, x), scalar(c, 1.0f)));
    return set_out(c, 0, tide_builder_mul(c->b, NULL, x, tide_builder_tanh(c->b, NULL, sp)));
}

/*
 * LRN (AlexNet's local response normalisation across channels): the sum of
 * squares over the channel window [c - floor((size - 1) / 2), c + ceil((size
 * - 1) / 2)] is an unpadded average pool (times size) of x^2 seen as [N, 1,
 * C, D1 ... Dk] with zeros past both ends of C; y = x * exp(-beta ln(bias +
 * alpha * that average)), the base being above bias > 0.
 */
static int op_lrn(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (float_in(c, 0, &x) != 0 || ref_shape(c, x, &rank, dims) != 0)
        return -1;
    if (rank < 3)
        return failf(c, "x has rank %d, wants [N, C, D1, ...]", rank);
    const Onnx__AttributeProto *size_attr = attr(n, "size");
    if (!size_attr || !size_attr->has_i)
        return failf(c, "attribute size is required");
    int64_t size = size_attr->i;
    float alpha = attr_f(n, "alpha", 1e-4f), beta = attr_f(n, "beta", 0.75f),
          bias = attr_f(n, "bias", 1.0f);
    if (size < 1 || size > INT32_MAX)
        return failf(c, "size is %" PRId64 ", not in 1..%d", size, INT32_MAX);
    if (!(bias > 0) || !isfinite(alpha) || !isfinite(beta) || !isfinite(bias))
        return failf(c, "bias %g, alpha %g and beta %g must be finite and bias above 0", bias,
                     alpha, beta);
    int64_t spatial = numel(rank - 2, dims + 2);
    int64_t view[MAX_RANK] = {dims[0], 1, dims[1], spatial};
    tide_ref sq = tide_builder_reshape(c->b, NULL, tide_builder_mul(c->b, NULL, x, x), 4, view);
    if (pad_constant_axis(c, &sq, 4, view, 2, (size - 1) / 2, size / 2, 0.0f) != 0)
        return -1;
    tide_ref mean = tide_builder_avg_pool2d(c->b, NULL, sq, size, 1, 1, 1, 0, 0);
    mean = tide_builder_reshape(c->b, NULL, mean, rank, dims);
    tide_ref base = tide_builder_add(c->b, NULL, tide_builder_scale(c->b, NULL, mean, alpha),
                                     scalar(c, bias));
    tide_ref inv = tide_builder_exp(
        c->b, NULL, tide_builder_scale(c->b, NULL, tide_builder_log(c->b, NULL, base), -beta));
    return set_out(c, 0, tide_builder_mul(c->b, NULL, x, inv));
}

/* Elu and Selu: gamma (relu(x) + min(0, alpha (exp(x) - 1))), which for alpha > 0 is
 * gamma x where x > 0 and gamma alpha (exp(x) - 1) elsewhere. */
static int elu_common(struct ctx *c, float alpha, float gamma)
{
    if (!(alpha > 0.0f))
        return failf(c, "alpha %g is not supported (only > 0)", alpha);
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref em1 = tide_builder_sub(c->b, NULL, tide_builder_exp(c->b, NULL, x), scalar(c, 1.0f));
    tide_ref neg =
        tide_builder_min(c->b, NULL, tide_builder_scale(c->b, NULL, em1, alpha), scalar(c, 0.0f));
    tide_ref r = tide_builder_add(c->b, NULL, tide_builder_relu(c->b, NULL, x), neg);
    if (gamma != 1.0f)
        r = tide_builder_scale(c->b, NULL, r, gamma);
    return set_out(c, 0, r);
}

static int op_elu(struct ctx *c)
{
    return elu_common(c, attr_f(c->node, "alpha", 1.0f), 1.0f);
}

static int op_selu(struct ctx *c)
{
    return elu_common(c, attr_f(c->node, "alpha", 1.67326319217681884765625f),
                      attr_f(c->node, "gamma", 1.05070102214813232421875f));
}

/* HardSigmoid: max(0, min(1, alpha x + beta)). */
static int op_hard_sigmoid(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    tide_ref y = tide_builder_add(c->b, NULL,
                                  tide_builder_scale(c->b, NULL, x, attr_f(c->node, "alpha", 0.2f)),
                                  scalar(c, attr_f(c->node, "beta", 0.5f)));
    y = tide_builder_min(c->b, NULL, y, scalar(c, 1.0f));
    return set_out(c, 0, tide_builder_max(c->b, NULL, y, scalar(c, 0.0f)));
}

/* Mean: the sum of the inputs divided by their count. */
static int op_mean(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref acc;
    if (float_in(c, 0, &acc) != 0 || (c->version < 8 && same_shapes(c) != 0))
        return -1;
    for (size_t k = 1; k < n->n_input; k++) {
        tide_ref y;
        if (float_in(c, k, &y) != 0)
            return -1;
        acc = tide_builder_add(c->b, NULL, acc, y);
    }
    return set_out(c, 0, tide_builder_div(c->b, NULL, acc, scalar(c, (float)n->n_input)));
}

/* ---- selections by TopK: ReduceMax, ReduceMin, ArgMax, ArgMin, TopK, and Trilu ---- */

/*
 * x with the axes in reduce[] moved last and flattened into one (*x, rank
 * *n_flat, its last axis the reduced elements); out (*no axes) is the
 * reduction's shape, the reduced axes kept as 1s or dropped.
 */
static int reduced_last(struct ctx *c, tide_ref *x, const bool *reduce, bool keep,
                        int32_t *n_flat, int64_t out[MAX_RANK], int32_t *n_out)
{
    int32_t rank;
    int64_t dims[MAX_RANK], perm[MAX_RANK], flat[MAX_RANK], kept[MAX_RANK];
    if (ref_shape(c, *x, &rank, dims) != 0)
        return -1;
    int32_t np = 0, nk = 0, no = 0;
    int64_t inner = 1;
    bool moved = false;
    for (int32_t a = 0; a < rank; a++)
        if (!reduce[a])
            perm[np++] = a, flat[nk] = dims[a], kept[nk++] = dims[a];
    for (int32_t a = 0; a < rank; a++)
        if (reduce[a])
            perm[np++] = a, inner *= dims[a];
    for (int32_t a = 0; a < rank; a++) {
        moved |= perm[a] != a;
        if (keep)
            out[no++] = reduce[a] ? 1 : dims[a];
    }
    if (!keep)
        memcpy(out, kept, sizeof(kept)), no = nk;
    if (inner == 0)
        return failf(c, "a reduction over an empty axis is not supported");
    if (moved)
        *x = tide_builder_transpose(c->b, NULL, *x, perm, rank);
    flat[nk] = inner;
    *x = tide_builder_reshape(c->b, NULL, *x, nk + 1, flat);
    *n_flat = nk + 1;
    *n_out = no;
    return check_builder(c, *x);
}

/*
 * The largest (or, negated around TopK, the smallest) element over the axes
 * in reduce[] of x: the reduced axes are moved last and flattened into one,
 * TopK with k 1 picks the element, and *index gets its position along that
 * axis (which is the index along the axis when only one is reduced). The
 * result keeps the reduced axes as 1s or drops them. Equal values give the
 * lowest index and NaN ranks first, as NumPy's argmax has it.
 */
static int select_one(struct ctx *c, tide_ref x, const bool *reduce, bool largest, bool keep,
                      tide_ref *value, tide_ref *index)
{
    int32_t nf, no;
    int64_t out[MAX_RANK];
    if (reduced_last(c, &x, reduce, keep, &nf, out, &no) != 0)
        return -1;
    if (!largest)
        x = tide_builder_neg(c->b, NULL, x);
    tide_ref top = tide_builder_top_k(c->b, NULL, x, 1);
    if (check_builder(c, top) != 0)
        return -1;
    tide_ref v = largest ? top : tide_builder_neg(c->b, NULL, top);
    if (value)
        *value = tide_builder_reshape(c->b, NULL, v, no, out);
    if (index)
        *index = tide_builder_reshape(c->b, NULL, tide_builder_output(c->b, top, 1), no, out);
    return 0;
}

/*
 * The axes a ReduceMax, ReduceMin or ReduceProd of x reduces, as reduce[]
 * (all of them when none are given); *noop when noop_with_empty_axes makes
 * it the identity.
 */
static int reduce_mask(struct ctx *c, tide_ref x, bool reduce[MAX_RANK], bool *noop)
{
    int32_t rank;
    int64_t dims[MAX_RANK], axes[MAX_RANK], count;
    if (ref_shape(c, x, &rank, dims) != 0 || reduce_axes(c, false, axes, &count, noop) != 0)
        return -1;
    for (int32_t a = 0; a < rank; a++)
        reduce[a] = count <= 0;
    for (int64_t k = 0; k < count; k++) {
        int64_t a;
        if (norm_axis(c, axes[k], rank, &a) != 0)
            return -1;
        reduce[a] = true;
    }
    return 0;
}

static int reduce_extreme(struct ctx *c, bool largest)
{
    int folded = fold_int_reduce(c, largest ? INT_REDUCE_MAX : INT_REDUCE_MIN);
    if (folded <= 0)
        return folded;
    tide_ref x, v;
    bool reduce[MAX_RANK], noop;
    if (float_in(c, 0, &x) != 0 || reduce_mask(c, x, reduce, &noop) != 0)
        return -1;
    if (noop)
        return set_out(c, 0, tide_builder_identity(c->b, NULL, x));
    if (select_one(c, x, reduce, largest, attr_i(c->node, "keepdims", 1) != 0, &v, NULL) != 0)
        return -1;
    return set_out(c, 0, v);
}

/*
 * ReduceProd: the reduced axes moved last and flattened (reduced_last),
 * then halved until one element is left, each half times the other (an odd
 * last element carried to the next round): log2(n) Mul nodes, exact at
 * zeros and negative values and differentiable, where exp(sum(log x))
 * would be neither.
 */
static int op_reduce_prod(struct ctx *c)
{
    int folded = fold_int_reduce(c, INT_REDUCE_PROD);
    if (folded <= 0)
        return folded;
    tide_ref x;
    bool reduce[MAX_RANK], noop;
    if (float_in(c, 0, &x) != 0 || reduce_mask(c, x, reduce, &noop) != 0)
        return -1;
    if (noop)
        return set_out(c, 0, tide_builder_identity(c->b, NULL, x));
    int32_t nf, no;
    int64_t out[MAX_RANK], d[MAX_RANK];
    if (reduced_last(c, &x, reduce, attr_i(c->node, "keepdims", 1) != 0, &nf, out, &no) != 0 ||
        ref_shape(c, x, &nf, d) != 0)
        return -1;
    int32_t last = nf - 1;
    while (d[last] > 1) {
        int64_t half = d[last] / 2, begin[MAX_RANK] = {0}, size[MAX_RANK];
        memcpy(size, d, sizeof(size));
        size[last] = half;
        tide_ref lo = tide_builder_slice(c->b, NULL, x, begin, size, nf);
        begin[last] = half;
        tide_ref hi = tide_builder_slice(c->b, NULL, x, begin, size, nf);
        tide_ref p = tide_builder_mul(c->b, NULL, lo, hi);
        if (d[last] % 2) {
            begin[last] = 2 * half;
            size[last] = 1;
            tide_ref odd = tide_builder_slice(c->b, NULL, x, begin, size, nf);
            p = tide_builder_concat(c->b, NULL, (tide_ref[]){p, odd}, 2, last);
        }
        x = p;
        d[last] = half + d[last] % 2;
        if (check_builder(c, x) != 0)
            return -1;
    }
    return set_out(c, 0, tide_builder_reshape(c->b, NULL, x, no, out));
}

/* GlobalMaxPool: the largest of each (instance, channel) over the spatial axes, kept as 1s. */
static int op_global_max_pool(struct ctx *c)
{
    tide_ref x, v;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (float_in(c, 0, &x) != 0 || ref_shape(c, x, &rank, dims) != 0)
        return -1;
    if (rank < 3)
        return failf(c, "x has rank %d, wants N, C and at least one spatial axis", rank);
    bool spatial[MAX_RANK] = {0};
    for (int32_t a = 2; a < rank; a++)
        spatial[a] = true;
    if (select_one(c, x, spatial, true, true, &v, NULL) != 0)
        return -1;
    return set_out(c, 0, v);
}

/*
 * InstanceNormalization: each (instance, channel) normalised over its
 * spatial axes with its own mean and biased variance, then scale and B per
 * channel: ReduceMean, Sub, Mul, ReduceMean, Add epsilon, Sqrt, Div, Mul, Add.
 */
static int op_instance_normalization(struct ctx *c)
{
    tide_ref x, scale, bias;
    int32_t rank, rs, rb;
    int64_t dims[MAX_RANK], ds[MAX_RANK], db[MAX_RANK];
    if (float_in(c, 0, &x) != 0 || float_in(c, 1, &scale) != 0 || float_in(c, 2, &bias) != 0 ||
        ref_shape(c, x, &rank, dims) != 0 || ref_shape(c, scale, &rs, ds) != 0 ||
        ref_shape(c, bias, &rb, db) != 0)
        return -1;
    if (rank < 3)
        return failf(c, "x has rank %d, wants N, C and at least one spatial axis", rank);
    if (rs != 1 || ds[0] != dims[1] || rb != 1 || db[0] != dims[1])
        return failf(c, "scale and B must hold one value per channel (%" PRId64 ")", dims[1]);
    int64_t axes[MAX_RANK], per_channel[MAX_RANK];
    for (int32_t a = 2; a < rank; a++)
        axes[a - 2] = a;
    for (int32_t a = 0; a < rank - 1; a++)
        per_channel[a] = a ? 1 : dims[1];
    tide_builder *b = c->b;
    tide_ref mean = tide_builder_reduce_mean(b, NULL, x, axes, rank - 2, true);
    tide_ref d = tide_builder_sub(b, NULL, x, mean);
    tide_ref var = tide_builder_reduce_mean(b, NULL, tide_builder_mul(b, NULL, d, d), axes,
                                            rank - 2, true);
    tide_ref sd = tide_builder_sqrt(
        b, NULL, tide_builder_add(b, NULL, var, scalar(c, attr_f(c->node, "epsilon", 1e-5f))));
    tide_ref y = tide_builder_mul(b, NULL, tide_builder_div(b, NULL, d, sd),
                                  tide_builder_reshape(b, NULL, scale, rank - 1, per_channel));
    return set_out(c, 0,
                   tide_builder_add(b, NULL, y,
                                    tide_builder_reshape(b, NULL, bias, rank - 1, per_channel)));
}

static int op_reduce_max(struct ctx *c)
{
    return reduce_extreme(c, true);
}
static int op_reduce_min(struct ctx *c)
{
    return reduce_extreme(c, false);
}

/*
 * ArgMax, ArgMin: TopK's index, the first on ties. With select_last_index,
 * the last: the axis reversed (a Gather of constant indices), the first
 * index j there, and n - 1 - j computed in float32 through Cast (exact while
 * n <= 2^24, which is checked).
 */
static int arg_extreme(struct ctx *c, bool largest)
{
    const Onnx__NodeProto *n = c->node;
    int64_t last = attr_i(n, "select_last_index", 0);
    if (last != 0 && last != 1)
        return failf(c, "select_last_index is %" PRId64 ", wants 0 or 1", last);
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (ref_shape(c, x, &rank, dims) != 0 || norm_axis(c, attr_i(n, "axis", 0), rank, &axis) != 0)
        return -1;
    int64_t len = dims[axis];
    if (last) {
        if (len > (1 << 24))
            return failf(c,
                         "select_last_index 1 over an axis of %" PRId64 " elements: tide counts "
                         "the index back in float32, exact up to 16777216",
                         len);
        int32_t *rev = malloc((size_t)(len > 0 ? len : 1) * sizeof(int32_t));
        if (!rev)
            return failf(c, "out of memory");
        for (int64_t k = 0; k < len; k++)
            rev[k] = (int32_t)(len - 1 - k);
        int rc = gather_axis(c, &x, rank, dims, (int32_t)axis, len, 1, rev, NULL);
        free(rev);
        if (rc != 0)
            return -1;
    }
    bool reduce[MAX_RANK] = {0};
    reduce[axis] = true;
    tide_ref index;
    if (select_one(c, x, reduce, largest, attr_i(n, "keepdims", 1) != 0, NULL, &index) != 0)
        return -1;
    if (last) {
        tide_ref j = tide_builder_cast(c->b, NULL, index, TIDE_DT_FLOAT32);
        tide_ref from_end = tide_builder_sub(c->b, NULL, scalar(c, (float)(len - 1)), j);
        index = tide_builder_cast(c->b, NULL, from_end, TIDE_DT_INT32);
    }
    return set_out(c, 0, index);
}

/* An int32 Const of rank dims, 1 but along axis, where it counts 0 .. n - 1 (plus shift). */
static tide_ref axis_positions(struct ctx *c, int32_t rank, int32_t axis, int64_t n, int64_t shift)
{
    int64_t dims[MAX_RANK];
    for (int32_t a = 0; a < rank; a++)
        dims[a] = a == axis ? n : 1;
    if (n > FOLD_MAX_ELEMENTS) {
        failf(c, "%" PRId64 " positions along an axis are more than the import folds (%" PRId64 ")",
              n, FOLD_MAX_ELEMENTS);
        return (tide_ref){.id = -1, .output = 0};
    }
    int32_t *pos = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!pos) {
        failf(c, "out of memory");
        return (tide_ref){.id = -1, .output = 0};
    }
    for (int64_t k = 0; k < n; k++)
        pos[k] = (int32_t)(k + shift);
    tide_ref r = tide_builder_constant(c->b, NULL, TIDE_DT_INT32, rank, dims, pos);
    free(pos);
    return r;
}

/*
 * Hardmax: 1 at the first largest element along axis, 0 elsewhere: TopK's
 * index compared with the positions along the axis. Before version 13 the
 * input is read as a matrix [outer, inner] split at axis, as Softmax's.
 */
static int op_hardmax(struct ctx *c)
{
    tide_ref x;
    int32_t rank;
    int64_t dims[MAX_RANK], axis;
    if (float_in(c, 0, &x) != 0 || ref_shape(c, x, &rank, dims) != 0 ||
        norm_axis(c, attr_i(c->node, "axis", c->version >= 13 ? -1 : 1), rank, &axis) != 0)
        return -1;
    int32_t r = rank;
    int64_t n = dims[axis];
    if (c->version < 13) {
        int64_t flat[2] = {numel((int32_t)axis, dims), numel(rank - (int32_t)axis, dims + axis)};
        x = tide_builder_reshape(c->b, NULL, x, 2, flat);
        r = 2, axis = 1, n = flat[1];
    }
    if (n > INT32_MAX)
        return failf(c, "an axis of %" PRId64 " elements is more than tide's int32 positions", n);
    bool reduce[MAX_RANK] = {0};
    reduce[axis] = true;
    tide_ref index, pos = axis_positions(c, r, (int32_t)axis, n, 0);
    if (pos.id < 0 || select_one(c, x, reduce, true, true, NULL, &index) != 0)
        return -1;
    tide_ref y = tide_builder_compare(c->b, NULL, pos, index, TIDE_COMPARE_EQUAL);
    if (c->version < 13)
        y = tide_builder_reshape(c->b, NULL, y, rank, dims);
    return set_out(c, 0, y);
}

/*
 * OneHot(indices, depth, values): along a new axis of depth positions, on
 * (values[1]) where the position is the index (a negative index counts from
 * the end), off (values[0]) elsewhere, out-of-range indices all off. Float
 * indices are truncated (Cast). The positions are compared as int32, against
 * the index and against the index + depth; values of an integer type are
 * chosen in float32 and cast back, exact up to 2^24 in magnitude.
 */
static int op_one_hot(struct ctx *c)
{
    struct value *dv = in_const(c, 1, "depth"), *vv = dv ? in_value(c, 2) : NULL;
    if (!vv)
        return -1;
    if (numel(dv->rank, dv->dims) != 1)
        return failf(c, "depth must hold one value");
    double depth = get_num(dv, 0);
    if (!(depth >= 1 && depth <= INT32_MAX) || depth != floor(depth))
        return failf(c, "depth %g is not a whole number from 1 to %d", depth, INT32_MAX);
    int32_t rv;
    int64_t dvals[MAX_RANK];
    if (value_shape(c, vv, &rv, dvals) != 0)
        return -1;
    if (numel(rv, dvals) != 2)
        return failf(c, "values must hold two elements, off and on");
    tide_ref idx;
    if (in_ref(c, 0, &idx) != 0)
        return -1;
    if (tide_builder_dtype(c->b, idx) == TIDE_DT_FLOAT32)
        idx = tide_builder_cast(c->b, NULL, idx, TIDE_DT_INT32);
    int32_t ri;
    int64_t di[MAX_RANK], axis, shape[MAX_RANK];
    if (ref_shape(c, idx, &ri, di) != 0)
        return -1;
    if (ri + 1 > MAX_RANK)
        return failf(c, "the output's rank %d is more than tide's %d", ri + 1, MAX_RANK);
    if (norm_axis(c, attr_i(c->node, "axis", -1), ri + 1, &axis) != 0)
        return -1;
    for (int32_t a = 0, k = 0; a <= ri; a++)
        shape[a] = a == axis ? 1 : di[k++];
    idx = tide_builder_reshape(c->b, NULL, idx, ri + 1, shape);
    int64_t n = (int64_t)depth;
    tide_ref pos = axis_positions(c, ri + 1, (int32_t)axis, n, 0),
             back = axis_positions(c, ri + 1, (int32_t)axis, n, -n);
    if (pos.id < 0 || back.id < 0)
        return -1;
    tide_builder *b = c->b;
    tide_ref hit =
        tide_builder_max(b, NULL, tide_builder_compare(b, NULL, idx, pos, TIDE_COMPARE_EQUAL),
                         tide_builder_compare(b, NULL, idx, back, TIDE_COMPARE_EQUAL));
    tide_ref off, on;
    if (vv->known) {
        if (vv->type != CONST_FLOAT &&
            (fabs(get_num(vv, 0)) > (1 << 24) || fabs(get_num(vv, 1)) > (1 << 24)))
            return failf(c, "integer values beyond 2^24 in magnitude are not supported");
        off = scalar(c, (float)get_num(vv, 0));
        on = scalar(c, (float)get_num(vv, 1));
    } else {
        tide_ref v;
        if (float_in(c, 2, &v) != 0)
            return -1;
        int64_t begin = 0, one = 1;
        v = tide_builder_reshape(b, NULL, v, 1, (int64_t[]){2});
        off =
            tide_builder_reshape(b, NULL, tide_builder_slice(b, NULL, v, &begin, &one, 1), 0, NULL);
        begin = 1;
        on =
            tide_builder_reshape(b, NULL, tide_builder_slice(b, NULL, v, &begin, &one, 1), 0, NULL);
    }
    tide_ref y = tide_builder_select(b, NULL, hit, on, off);
    if (vv->known && vv->type != CONST_FLOAT)
        y = tide_builder_cast(b, NULL, y, TIDE_DT_INT32);
    return set_out(c, 0, y);
}

static int op_arg_max(struct ctx *c)
{
    return arg_extreme(c, true);
}
static int op_arg_min(struct ctx *c)
{
    return arg_extreme(c, false);
}

static int op_top_k(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int64_t k;
    if (c->version < 10) { /* TopK-1: k is an attribute */
        const Onnx__AttributeProto *a = attr(n, "k");
        if (!a || !a->has_i)
            return failf(c, "attribute k is required");
        k = a->i;
    } else {
        struct value *kv = in_const(c, 1, "K");
        if (!kv)
            return -1;
        if (kv->type == CONST_FLOAT || numel(kv->rank, kv->dims) != 1)
            return failf(c, "K must be one integer");
        k = kv->i[0];
    }
    bool largest = attr_i(n, "largest", 1) != 0;
    int32_t rank;
    int64_t dims[MAX_RANK], axis, perm[MAX_RANK];
    if (ref_shape(c, x, &rank, dims) != 0 || norm_axis(c, attr_i(n, "axis", -1), rank, &axis) != 0)
        return -1;
    for (int32_t a = 0; a < rank; a++)
        perm[a] = a;
    perm[axis] = rank - 1, perm[rank - 1] = axis;
    bool moved = axis != rank - 1;
    if (moved)
        x = tide_builder_transpose(c->b, NULL, x, perm, rank);
    if (!largest)
        x = tide_builder_neg(c->b, NULL, x);
    tide_ref top = tide_builder_top_k(c->b, NULL, x, k);
    if (check_builder(c, top) != 0)
        return -1;
    tide_ref values = largest ? top : tide_builder_neg(c->b, NULL, top);
    tide_ref indices = tide_builder_output(c->b, top, 1);
    if (moved) {
        values = tide_builder_transpose(c->b, NULL, values, perm, rank);
        indices = tide_builder_transpose(c->b, NULL, indices, perm, rank);
    }
    if (set_out(c, 0, values) != 0)
        return -1;
    return n->n_output > 1 ? set_out(c, 1, indices) : 0;
}

/* Trilu: folded on a constant; on a tensor, x times a constant 0/1 mask of its last two axes
 * (exact for finite x). */
static int op_trilu(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    struct value *xv = in_value(c, 0);
    if (!xv)
        return -1;
    int64_t k = 0;
    if (has_input(n, 1)) {
        struct value *kv = in_const(c, 1, "k");
        if (!kv)
            return -1;
        if (kv->type == CONST_FLOAT || numel(kv->rank, kv->dims) != 1)
            return failf(c, "k must be one integer");
        k = kv->i[0];
    }
    bool upper = attr_i(n, "upper", 1) != 0;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (value_shape(c, xv, &rank, dims) != 0)
        return -1;
    if (rank < 2)
        return failf(c, "the input must have rank 2 or more");
    int64_t rows = dims[rank - 2], cols = dims[rank - 1];
    if (xv->known && !xv->trainable) {
        /* A constant (PyTorch's torch.tril(torch.ones(...)) causal mask): folded. */
        struct value *v = set_out_const(c, 0, xv->type, rank, dims);
        int64_t total = numel(rank, dims);
        for (int64_t e = 0; v && e < total; e++) {
            int64_t i = (e / cols) % rows, j = e % cols;
            bool keep = upper ? j - i >= k : j - i <= k;
            if (xv->type == CONST_FLOAT)
                v->f[e] = keep ? xv->f[e] : 0.0f;
            else
                v->i[e] = keep ? xv->i[e] : 0;
        }
        return v ? 0 : -1;
    }
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int64_t cells = numel(2, dims + rank - 2);
    if (cells > FOLD_MAX_ELEMENTS)
        return failf(c,
                     "a mask of %" PRId64 " elements is more than the import folds (%" PRId64 ")",
                     cells, FOLD_MAX_ELEMENTS);
    float *mask = malloc((size_t)(cells > 0 ? cells : 1) * sizeof(float));
    if (!mask)
        return failf(c, "out of memory");
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            mask[i * cols + j] = (upper ? j - i >= k : j - i <= k) ? 1.0f : 0.0f;
    tide_ref m =
        tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, 2, (int64_t[]){rows, cols}, mask);
    free(mask);
    return set_out(c, 0, tide_builder_mul(c->b, NULL, x, m));
}

/* ---- losses ---- */

/*
 * NegativeLogLikelihoodLoss of log-probabilities lp [N, C, d1, ...] against
 * the target (input target_k, integers [N, d1, ...]) with the optional class
 * weights [C] (input weight_k), ONNX's ignore_index and reduction, into
 * output 0. Each target picks its class along axis 1 by GatherElements (the
 * target reshaped to [N, 1, d1, ...]), whose ignore_index gives 0 for an
 * ignored one; the weights are picked the same way from [C], so an ignored
 * target weighs 0. "mean" with weights or ignore_index divides the sum by
 * the sum of those weights (1 each without weights), as ONNX's reference
 * does: a batch whose targets are all ignored gives 0 / 0, NaN, there too.
 */
static int nll_loss(struct ctx *c, tide_ref lp, size_t target_k, size_t weight_k)
{
    const Onnx__NodeProto *n = c->node;
    bool none = attr_s_is(n, "reduction", "none"), sum = attr_s_is(n, "reduction", "sum");
    bool mean = attr_s_is(n, "reduction", NULL) || attr_s_is(n, "reduction", "mean");
    if (!none && !sum && !mean)
        return failf(c, "reduction must be none, sum or mean");
    const Onnx__AttributeProto *ii = attr(n, "ignore_index");
    if (ii && !ii->has_i)
        return failf(c, "ignore_index must be an integer");
    int64_t ignore = ii ? ii->i : TIDE_BUILDER_NO_IGNORE_INDEX;
    tide_ref target;
    if (in_ref(c, target_k, &target) != 0)
        return -1;
    if (tide_builder_dtype(c->b, target) != TIDE_DT_INT32)
        return failf(c, "the target must be integers");
    int32_t rank, rt;
    int64_t dims[MAX_RANK], td[MAX_RANK];
    if (ref_shape(c, lp, &rank, dims) != 0 || ref_shape(c, target, &rt, td) != 0)
        return -1;
    if (rank < 2)
        return failf(c, "the input must have rank 2 or more ([N, C, d1, ...]), not %d", rank);
    bool fits = rt == rank - 1 && td[0] == dims[0];
    for (int32_t a = 2; fits && a < rank; a++)
        fits = td[a - 1] == dims[a];
    char tbuf[128], xbuf[128];
    if (!fits)
        return failf(c,
                     "the target %s does not fit the input %s: wants [N, d1, ...], the input's "
                     "shape without axis 1",
                     dims_text(tbuf, sizeof(tbuf), rt, td),
                     dims_text(xbuf, sizeof(xbuf), rank, dims));
    int64_t classes = dims[1], picks = numel(rt, td), picked[MAX_RANK];
    picked[0] = dims[0];
    picked[1] = 1;
    for (int32_t a = 2; a < rank; a++)
        picked[a] = dims[a];
    tide_ref idx = tide_builder_reshape(c->b, NULL, target, rank, picked);
    tide_ref loss = tide_builder_gather_elements(c->b, NULL, lp, idx, 1, ignore);
    loss = tide_builder_neg(c->b, NULL, tide_builder_reshape(c->b, NULL, loss, rt, td));
    tide_ref weights = TIDE_REF_NONE, flat = tide_builder_reshape(c->b, NULL, target, 1, &picks);
    if (has_input(n, weight_k)) {
        tide_ref w;
        int32_t rw;
        int64_t wd[MAX_RANK];
        if (float_in(c, weight_k, &w) != 0 || ref_shape(c, w, &rw, wd) != 0)
            return -1;
        if (rw != 1 || wd[0] != classes)
            return failf(c, "the weights have shape %s, wants [%" PRId64 "] (one per class)",
                         dims_text(tbuf, sizeof(tbuf), rw, wd), classes);
        weights = tide_builder_gather_elements(c->b, NULL, w, flat, 0, ignore);
    } else if (ii && mean) {
        /* Without weights each target weighs 1, an ignored one 0: the mean's count. */
        float *ones = malloc((size_t)(classes > 0 ? classes : 1) * sizeof(float));
        if (!ones)
            return failf(c, "out of memory");
        for (int64_t k = 0; k < classes; k++)
            ones[k] = 1.0f;
        tide_ref w = tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, 1, &classes, ones);
        free(ones);
        weights = tide_builder_gather_elements(c->b, NULL, w, flat, 0, ignore);
    }
    bool weighted = has_input(n, weight_k) || (ii && mean);
    if (weighted) {
        weights = tide_builder_reshape(c->b, NULL, weights, rt, td);
        if (check_builder(c, weights) != 0)
            return -1;
        if (has_input(n, weight_k))
            loss = tide_builder_mul(c->b, NULL, loss, weights);
    }
    if (check_builder(c, loss) != 0)
        return -1;
    if (sum)
        loss = tide_builder_reduce_sum(c->b, NULL, loss, NULL, 0, false);
    else if (mean && weighted)
        loss = tide_builder_div(c->b, NULL,
                                tide_builder_reduce_sum(c->b, NULL, loss, NULL, 0, false),
                                tide_builder_reduce_sum(c->b, NULL, weights, NULL, 0, false));
    else if (mean)
        loss = tide_builder_reduce_mean(c->b, NULL, loss, NULL, 0, false);
    return set_out(c, 0, loss);
}

/* NegativeLogLikelihoodLoss(input, target, weight): see nll_loss. */
static int op_negative_log_likelihood_loss(struct ctx *c)
{
    tide_ref lp;
    if (float_in(c, 0, &lp) != 0)
        return -1;
    return nll_loss(c, lp, 1, 2);
}

/*
 * SoftmaxCrossEntropyLoss with class weights or ignore_index: ONNX's own
 * definition, NegativeLogLikelihoodLoss of LogSoftmax over the class axis
 * (1); log_prob (output 1) is that LogSoftmax.
 */
static int softmax_cross_entropy_loss_nll(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (ref_shape(c, x, &rank, dims) != 0)
        return -1;
    if (rank < 2)
        return failf(c, "the scores must have rank 2 or more, not %d", rank);
    tide_ref lp = tide_builder_log(c->b, NULL, tide_builder_softmax(c->b, NULL, x, 1));
    if (check_builder(c, lp) != 0 || nll_loss(c, lp, 1, 2) != 0)
        return -1;
    return c->node->n_output > 1 ? set_out(c, 1, lp) : 0;
}

/*
 * SoftmaxCrossEntropyLoss without weights or ignore_index (with either: the
 * composition above): tide's fused SoftmaxCrossEntropy over rows, the class
 * axis (1) moved last and the other axes flattened, then the reduction. The
 * optional log_prob output is Log(Softmax) over axis 1.
 */
static int op_softmax_cross_entropy_loss(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    if (has_input(n, 2) || attr(n, "ignore_index"))
        return softmax_cross_entropy_loss_nll(c);
    tide_ref x, labels;
    if (float_in(c, 0, &x) != 0 || in_ref(c, 1, &labels) != 0)
        return -1;
    if (tide_builder_dtype(c->b, labels) != TIDE_DT_INT32)
        return failf(c, "the labels must be integers");
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (ref_shape(c, x, &rank, dims) != 0)
        return -1;
    if (rank < 2)
        return failf(c, "the scores must have rank 2 or more, not %d", rank);
    int64_t classes = dims[1], rows = dims[0] * numel(rank - 2, dims + 2);
    tide_ref logits = x;
    if (rank > 2) {
        int64_t perm[MAX_RANK];
        perm[0] = 0;
        for (int32_t a = 2; a < rank; a++)
            perm[a - 1] = a;
        perm[rank - 1] = 1;
        logits = tide_builder_transpose(c->b, NULL, x, perm, rank);
    }
    logits = tide_builder_reshape(c->b, NULL, logits, 2, (int64_t[]){rows, classes});
    tide_ref flat_labels = tide_builder_reshape(c->b, NULL, labels, 1, &rows);
    tide_ref loss = tide_builder_softmax_cross_entropy(c->b, NULL, logits, flat_labels);
    if (check_builder(c, loss) != 0)
        return -1;
    if (attr_s_is(n, "reduction", "none")) {
        int64_t out[MAX_RANK];
        out[0] = dims[0];
        for (int32_t a = 2; a < rank; a++)
            out[a - 1] = dims[a];
        loss = tide_builder_reshape(c->b, NULL, loss, rank - 1, out);
    } else if (attr_s_is(n, "reduction", "sum")) {
        loss = tide_builder_reduce_sum(c->b, NULL, loss, NULL, 0, false);
    } else if (attr_s_is(n, "reduction", NULL) || attr_s_is(n, "reduction", "mean")) {
        loss = tide_builder_reduce_mean(c->b, NULL, loss, NULL, 0, false);
    } else {
        return failf(c, "reduction must be none, sum or mean");
    }
    if (set_out(c, 0, loss) != 0)
        return -1;
    if (n->n_output > 1 && *n->output[1]) {
        tide_ref lp = tide_builder_log(c->b, NULL, tide_builder_softmax(c->b, NULL, x, 1));
        return set_out(c, 1, lp);
    }
    return 0;
}

/* ---- recurrent layers, unrolled ---- */

/* A [rows, cols] window of a rank-2 tensor: rows [r0, r0 + nr), columns [c0, c0 + nc). */
static tide_ref window(struct ctx *c, tide_ref x, int64_t r0, int64_t nr, int64_t c0, int64_t nc)
{
    return tide_builder_slice(c->b, NULL, x, (int64_t[]){r0, c0}, (int64_t[]){nr, nc}, 2);
}

/* Direction d's [rows, cols] matrix out of a [num_directions, rows, cols] input. */
static tide_ref direction_matrix(struct ctx *c, tide_ref w, int64_t d, int64_t rows, int64_t cols)
{
    tide_ref s =
        tide_builder_slice(c->b, NULL, w, (int64_t[]){d, 0, 0}, (int64_t[]){1, rows, cols}, 3);
    return tide_builder_reshape(c->b, NULL, s, 2, (int64_t[]){rows, cols});
}

/* Checks a weight's shape against what the layer needs. */
static int expect_shape(struct ctx *c, tide_ref r, const char *what, int32_t rank,
                        const int64_t *want)
{
    int32_t got_rank;
    int64_t got[MAX_RANK];
    if (ref_shape(c, r, &got_rank, got) != 0)
        return -1;
    bool same = got_rank == rank;
    for (int32_t k = 0; same && k < rank; k++)
        same = got[k] == want[k];
    if (!same)
        return failf(c, "%s has the wrong shape for hidden_size and the input", what);
    return 0;
}

enum cell_kind { CELL_RNN, CELL_GRU, CELL_LSTM };

/* The longest sequence a recurrent layer is unrolled over (a few nodes per step). */
#define MAX_UNROLL 65536

/*
 * LSTM, GRU and RNN (ONNX's default activations: Sigmoid for gates, Tanh for
 * the rest), unrolled over the sequence into MatMul, Add, Sub, Slice, Sigmoid,
 * Tanh, Mul and Concat, per direction. The input projection of every step is
 * one MatMul over [seq * batch, input]. Gates are ordered as ONNX orders them
 * in W, R and B: LSTM i, o, f, c; GRU z, r, h.
 */
static int recurrent(struct ctx *c, enum cell_kind kind)
{
    const Onnx__NodeProto *n = c->node;
    const bool lstm = kind == CELL_LSTM, gru = kind == CELL_GRU;
    const int64_t gates = lstm ? 4 : gru ? 3 : 1;
    const bool linear_before_reset = gru && attr_i(n, "linear_before_reset", 0) != 0;
    int64_t hidden = attr_i(n, "hidden_size", 0);
    int64_t layout = attr_i(n, "layout", 0);
    if (hidden <= 0)
        return failf(c, "hidden_size must be given and > 0");
    if (attr(n, "activations") || attr(n, "activation_alpha") || attr(n, "activation_beta"))
        return failf(c, "activations other than the defaults are not supported");
    if (attr(n, "clip"))
        return failf(c, "clip is not supported");
    if (attr_i(n, "input_forget", 0) != 0)
        return failf(c, "input_forget 1 is not supported");
    int64_t n_dir = 1;
    bool reverse_only = false;
    if (attr_s_is(n, "direction", "bidirectional"))
        n_dir = 2;
    else if (attr_s_is(n, "direction", "reverse"))
        reverse_only = true;
    else if (!attr_s_is(n, "direction", NULL) && !attr_s_is(n, "direction", "forward"))
        return failf(c, "direction must be forward, reverse or bidirectional");
    tide_ref x, w, r;
    if (float_in(c, 0, &x) != 0 || float_in(c, 1, &w) != 0 || float_in(c, 2, &r) != 0)
        return -1;
    int32_t xr;
    int64_t xd[MAX_RANK];
    if (ref_shape(c, x, &xr, xd) != 0)
        return -1;
    if (xr != 3)
        return failf(c, "X must have rank 3, not %d", xr);
    if (layout == 1) {
        x = tide_builder_transpose(c->b, NULL, x, (int64_t[]){1, 0, 2}, 3);
        int64_t t = xd[0];
        xd[0] = xd[1], xd[1] = t;
    } else if (layout != 0) {
        return failf(c, "layout %" PRId64 " is not supported", layout);
    }
    int64_t seq = xd[0], batch = xd[1], in_size = xd[2], gh = gates * hidden;
    if (seq < 1)
        return failf(c, "an empty sequence is not supported");
    if (seq > MAX_UNROLL || hidden > ((int64_t)1 << 30))
        return failf(c, "a sequence of %" PRId64 " steps is more than the import unrolls (%d)", seq,
                     MAX_UNROLL);
    if (expect_shape(c, w, "W", 3, (int64_t[]){n_dir, gh, in_size}) != 0 ||
        expect_shape(c, r, "R", 3, (int64_t[]){n_dir, gh, hidden}) != 0)
        return -1;
    if (has_input(n, 4)) {
        struct value *lens = in_value(c, 4);
        if (!lens)
            return -1;
        bool full = lens->known && lens->type != CONST_FLOAT;
        for (int64_t k = 0; full && k < numel(lens->rank, lens->dims); k++)
            full = lens->i[k] == seq;
        if (!full)
            return failf(c,
                         "sequence_lens must be absent or a constant equal to the sequence "
                         "length (%" PRId64 ") for every batch entry",
                         seq);
    }
    tide_ref bias = TIDE_REF_NONE, h0 = TIDE_REF_NONE, c0 = TIDE_REF_NONE, peep = TIDE_REF_NONE;
    if (has_input(n, 3)) {
        if (float_in(c, 3, &bias) != 0 ||
            expect_shape(c, bias, "B", 2, (int64_t[]){n_dir, 2 * gh}) != 0)
            return -1;
    }
    if (has_input(n, 5)) {
        if (float_in(c, 5, &h0) != 0 ||
            expect_shape(c, h0, "initial_h", 3,
                         layout ? (int64_t[]){batch, n_dir, hidden}
                                : (int64_t[]){n_dir, batch, hidden}) != 0)
            return -1;
        if (layout)
            h0 = tide_builder_transpose(c->b, NULL, h0, (int64_t[]){1, 0, 2}, 3);
    }
    if (lstm && has_input(n, 6)) {
        if (float_in(c, 6, &c0) != 0 ||
            expect_shape(c, c0, "initial_c", 3,
                         layout ? (int64_t[]){batch, n_dir, hidden}
                                : (int64_t[]){n_dir, batch, hidden}) != 0)
            return -1;
        if (layout)
            c0 = tide_builder_transpose(c->b, NULL, c0, (int64_t[]){1, 0, 2}, 3);
    }
    if (lstm && has_input(n, 7)) {
        if (float_in(c, 7, &peep) != 0 ||
            expect_shape(c, peep, "P", 2, (int64_t[]){n_dir, 3 * hidden}) != 0)
            return -1;
    }
    tide_ref flat_x = tide_builder_reshape(c->b, NULL, x, 2, (int64_t[]){seq * batch, in_size});
    tide_ref *ys = calloc((size_t)(seq * n_dir), sizeof(tide_ref));
    tide_ref last_h[2], last_c[2];
    if (!ys)
        return failf(c, "out of memory");
    for (int64_t d = 0; d < n_dir; d++) {
        bool backward = reverse_only || d == 1;
        tide_ref wd = direction_matrix(c, w, d, gh, in_size);
        tide_ref rd = direction_matrix(c, r, d, gh, hidden);
        tide_ref proj = tide_builder_matmul(c->b, NULL, flat_x, wd, false, true); /* [S*B, gh] */
        /* GRU's Rbh joins the recurrent term of h (inside the reset gate's product when
         * linear_before_reset): only Wb and the other gates' Rb go into the projection. */
        tide_ref rbh = TIDE_REF_NONE;
        if (bias.id >= 0) {
            tide_ref bd = window(c, bias, d, 1, 0, 2 * gh);
            int64_t summed = gru ? 2 * hidden : gh;
            tide_ref both = tide_builder_add(c->b, NULL, window(c, bd, 0, 1, 0, summed),
                                             window(c, bd, 0, 1, gh, summed));
            if (gru) {
                both = tide_builder_concat(
                    c->b, NULL, (tide_ref[]){both, window(c, bd, 0, 1, 2 * hidden, hidden)}, 2, 1);
                rbh = window(c, bd, 0, 1, gh + 2 * hidden, hidden);
            }
            proj = tide_builder_add(c->b, NULL, proj, both);
        }
        tide_ref pi = TIDE_REF_NONE, po = TIDE_REF_NONE, pf = TIDE_REF_NONE;
        if (peep.id >= 0) {
            tide_ref pd = window(c, peep, d, 1, 0, 3 * hidden);
            pi = window(c, pd, 0, 1, 0, hidden);
            po = window(c, pd, 0, 1, hidden, hidden);
            pf = window(c, pd, 0, 1, 2 * hidden, hidden);
        }
        tide_ref h = h0.id >= 0 ? direction_matrix(c, h0, d, batch, hidden) : TIDE_REF_NONE;
        tide_ref cell = c0.id >= 0 ? direction_matrix(c, c0, d, batch, hidden) : TIDE_REF_NONE;
        for (int64_t step = 0; step < seq; step++) {
            int64_t t = backward ? seq - 1 - step : step;
            tide_ref g = window(c, proj, t * batch, batch, 0, gh);
            if (gru) {
                /* z and r as the others; h from the reset gate and the previous state. */
                tide_ref zr = window(c, g, 0, batch, 0, 2 * hidden);
                tide_ref gh_x = window(c, g, 0, batch, 2 * hidden, hidden);
                tide_ref rz = h.id >= 0 ? window(c, rd, 0, 2 * hidden, 0, hidden) : TIDE_REF_NONE;
                tide_ref rh = window(c, rd, 2 * hidden, hidden, 0, hidden);
                if (h.id >= 0)
                    zr = tide_builder_add(c->b, NULL, zr,
                                          tide_builder_matmul(c->b, NULL, h, rz, false, true));
                zr = tide_builder_sigmoid(c->b, NULL, zr);
                tide_ref z = window(c, zr, 0, batch, 0, hidden);
                tide_ref reset = window(c, zr, 0, batch, hidden, hidden);
                tide_ref rec = TIDE_REF_NONE; /* the recurrent term of h, or none for 0 */
                if (linear_before_reset) {
                    tide_ref hr = h.id >= 0 ? tide_builder_matmul(c->b, NULL, h, rh, false, true)
                                            : TIDE_REF_NONE;
                    if (rbh.id >= 0)
                        hr = hr.id >= 0 ? tide_builder_add(c->b, NULL, hr, rbh) : rbh;
                    if (hr.id >= 0)
                        rec = tide_builder_mul(c->b, NULL, reset, hr);
                } else {
                    if (h.id >= 0)
                        rec = tide_builder_matmul(
                            c->b, NULL, tide_builder_mul(c->b, NULL, reset, h), rh, false, true);
                    if (rbh.id >= 0)
                        rec = rec.id >= 0 ? tide_builder_add(c->b, NULL, rec, rbh) : rbh;
                }
                if (rec.id >= 0)
                    gh_x = tide_builder_add(c->b, NULL, gh_x, rec);
                tide_ref cand = tide_builder_tanh(c->b, NULL, gh_x);
                /* (1 - z) h~ + z h_prev */
                tide_ref keep = tide_builder_sub(c->b, NULL, scalar(c, 1.0f), z);
                tide_ref next = tide_builder_mul(c->b, NULL, keep, cand);
                if (h.id >= 0)
                    next = tide_builder_add(c->b, NULL, next, tide_builder_mul(c->b, NULL, z, h));
                h = next;
                if (check_builder(c, h) != 0) {
                    free(ys);
                    return -1;
                }
                ys[t * n_dir + d] =
                    tide_builder_reshape(c->b, NULL, h, 3, (int64_t[]){1, batch, hidden});
                continue;
            }
            /* A zero initial state adds nothing: leaving its terms out is exact. */
            if (h.id >= 0)
                g = tide_builder_add(c->b, NULL, g,
                                     tide_builder_matmul(c->b, NULL, h, rd, false, true));
            if (!lstm) {
                h = tide_builder_tanh(c->b, NULL, g);
            } else {
                tide_ref gi = window(c, g, 0, batch, 0, hidden);
                tide_ref go = window(c, g, 0, batch, hidden, hidden);
                tide_ref gf = window(c, g, 0, batch, 2 * hidden, hidden);
                tide_ref gc = window(c, g, 0, batch, 3 * hidden, hidden);
                if (pi.id >= 0 && cell.id >= 0) {
                    gi = tide_builder_add(c->b, NULL, gi, tide_builder_mul(c->b, NULL, pi, cell));
                    gf = tide_builder_add(c->b, NULL, gf, tide_builder_mul(c->b, NULL, pf, cell));
                }
                tide_ref i_t = tide_builder_sigmoid(c->b, NULL, gi);
                tide_ref c_t = tide_builder_tanh(c->b, NULL, gc);
                tide_ref ic = tide_builder_mul(c->b, NULL, i_t, c_t);
                cell = cell.id >= 0
                           ? tide_builder_add(c->b, NULL,
                                              tide_builder_mul(c->b, NULL,
                                                               tide_builder_sigmoid(c->b, NULL, gf),
                                                               cell),
                                              ic)
                           : ic;
                if (pi.id >= 0)
                    go = tide_builder_add(c->b, NULL, go, tide_builder_mul(c->b, NULL, po, cell));
                h = tide_builder_mul(c->b, NULL, tide_builder_sigmoid(c->b, NULL, go),
                                     tide_builder_tanh(c->b, NULL, cell));
            }
            if (check_builder(c, h) != 0) {
                free(ys);
                return -1;
            }
            ys[t * n_dir + d] =
                tide_builder_reshape(c->b, NULL, h, 3, (int64_t[]){1, batch, hidden});
        }
        last_h[d] = tide_builder_reshape(c->b, NULL, h, 3, (int64_t[]){1, batch, hidden});
        last_c[d] = lstm ? tide_builder_reshape(c->b, NULL, cell, 3, (int64_t[]){1, batch, hidden})
                         : TIDE_REF_NONE;
    }
    /* Y [seq, num_directions, batch, hidden]: the steps' [1, batch, hidden] in (t, d) order. */
    tide_ref y = tide_builder_concat(c->b, NULL, ys, (int32_t)(seq * n_dir), 0);
    free(ys);
    y = tide_builder_reshape(c->b, NULL, y, 4, (int64_t[]){seq, n_dir, batch, hidden});
    tide_ref yh = n_dir == 1 ? last_h[0] : tide_builder_concat(c->b, NULL, last_h, 2, 0);
    tide_ref yc = TIDE_REF_NONE;
    if (lstm)
        yc = n_dir == 1 ? last_c[0] : tide_builder_concat(c->b, NULL, last_c, 2, 0);
    if (layout == 1) {
        y = tide_builder_transpose(c->b, NULL, y, (int64_t[]){2, 0, 1, 3}, 4);
        yh = tide_builder_transpose(c->b, NULL, yh, (int64_t[]){1, 0, 2}, 3);
        if (lstm)
            yc = tide_builder_transpose(c->b, NULL, yc, (int64_t[]){1, 0, 2}, 3);
    }
    if (set_out(c, 0, y) != 0 || (n->n_output > 1 && set_out(c, 1, yh) != 0))
        return -1;
    if (lstm && n->n_output > 2 && set_out(c, 2, yc) != 0)
        return -1;
    return 0;
}

static int op_lstm(struct ctx *c)
{
    return recurrent(c, CELL_LSTM);
}
static int op_gru(struct ctx *c)
{
    return recurrent(c, CELL_GRU);
}
static int op_rnn(struct ctx *c)
{
    return recurrent(c, CELL_RNN);
}

static int op_erf(struct ctx *c)
{
    return unary(c, tide_builder_erf);
}

/*
 * Sin, Cos, Tan, Asin, Acos, Atan (7, 22) and Sinh, Cosh, Asinh, Acosh,
 * Atanh (9, 22; 22 only adds bfloat16): tide's Trig with the function, each
 * element computed in double and rounded once. Not folded on a constant
 * (Erf is not either; Exp, Log and Sqrt are): a Const feeds the Trig node.
 */
static int trig_op(struct ctx *c, enum tide_trig_fn fn)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    return set_out(c, 0, tide_builder_trig(c->b, NULL, x, fn));
}
static int op_sin(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_SIN);
}
static int op_cos(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_COS);
}
static int op_tan(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_TAN);
}
static int op_asin(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_ASIN);
}
static int op_acos(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_ACOS);
}
static int op_atan(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_ATAN);
}
static int op_sinh(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_SINH);
}
static int op_cosh(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_COSH);
}
static int op_asinh(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_ASINH);
}
static int op_acosh(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_ACOSH);
}
static int op_atanh(struct ctx *c)
{
    return trig_op(c, TIDE_TRIG_ATANH);
}

/*
 * Floor (1, 6, 13), Ceil (1, 6, 13) and Round (11, 22; 22 only adds
 * bfloat16): tide's Round with the mode, Round's being half to even, exact
 * (floorf, ceilf, rintf). Unlike Erf, folded on a constant (not an
 * initializer that is trained) by the same C functions, since these appear
 * in shape computations: a size computed from a shape (the Floor of
 * Cast(Shape(x)) times a scale) stays known for the Reshape, Resize or
 * Range that reads it. In the graph, no gradient passes back through it
 * (PyTorch's is 0).
 */
static int round_op(struct ctx *c, enum tide_round_mode mode)
{
    /* The kernels' own rule (the builder's modes are the graph's: builder.c asserts it). */
    int folded = fold_float_unary(c, tide__round, (int)mode);
    if (folded <= 0)
        return folded;
    tide_ref r;
    if (float_in(c, 0, &r) != 0)
        return -1;
    return set_out(c, 0, tide_builder_round(c->b, NULL, r, mode));
}
static int op_floor(struct ctx *c)
{
    return round_op(c, TIDE_ROUND_FLOOR);
}
static int op_ceil(struct ctx *c)
{
    return round_op(c, TIDE_ROUND_CEIL);
}
static int op_round(struct ctx *c)
{
    return round_op(c, TIDE_ROUND_HALF_TO_EVEN);
}

/* Gelu-20: approximate "tanh" is tide's Gelu; "none" (the default) 0.5 x (1 + erf(x / sqrt 2)). */
static int op_gelu(struct ctx *c)
{
    tide_ref x;
    if (float_in(c, 0, &x) != 0)
        return -1;
    if (attr_s_is(c->node, "approximate", "tanh"))
        return set_out(c, 0, tide_builder_gelu(c->b, NULL, x));
    if (!attr_s_is(c->node, "approximate", NULL) && !attr_s_is(c->node, "approximate", "none"))
        return failf(c, "approximate must be \"none\" or \"tanh\"");
    tide_ref e = tide_builder_erf(c->b, NULL, tide_builder_scale(c->b, NULL, x, (float)M_SQRT1_2));
    tide_ref one_plus = tide_builder_add(c->b, NULL, e, scalar(c, 1.0f));
    return set_out(c, 0,
                   tide_builder_mul(c->b, NULL, tide_builder_scale(c->b, NULL, x, 0.5f), one_plus));
}

/* ---- resampling (Resize, Upsample): rows picked and weighted along one axis at a time ---- */

/*
 * x (rank, dims) with axis replaced by n_out rows, row o being the sum over
 * the taps t of w[t * n_out + o] * x[..., ids[t * n_out + o], ...]; w NULL
 * means a single tap of weight 1. ids and w are constants worked out at
 * import, so the gradient reaches x through Gather's (a scatter-add) and
 * Mul's. Gather picks along axis 0: the axis moves to the front and back,
 * by a Reshape when every axis before it has size 1 (the elements keep
 * their order), by a Transpose otherwise. dims[axis] becomes n_out.
 */
static int gather_axis(struct ctx *c, tide_ref *x, int32_t rank, int64_t dims[MAX_RANK],
                       int32_t axis, int64_t n_out, int32_t taps, const int32_t *ids,
                       const float *w)
{
    tide_builder *b = c->b;
    bool by_reshape = numel(axis, dims) == 1;
    int64_t perm[MAX_RANK], inverse[MAX_RANK], front[MAX_RANK], wdims[MAX_RANK];
    for (int32_t k = 0; k < rank; k++) {
        perm[k] = k == 0 ? axis : k <= axis ? k - 1 : k;
        inverse[perm[k]] = k;
        front[k] = dims[perm[k]];
        wdims[k] = k == 0 ? n_out : 1;
    }
    tide_ref t = axis == 0    ? *x
                 : by_reshape ? tide_builder_reshape(b, NULL, *x, rank, front)
                              : tide_builder_transpose(b, NULL, *x, perm, rank);
    tide_ref y = t;
    for (int32_t k = 0; k < taps; k++) {
        tide_ref id = tide_builder_constant(b, NULL, TIDE_DT_INT32, 1, &n_out, ids + k * n_out);
        tide_ref g = tide_builder_gather(b, NULL, t, id);
        if (w)
            g = tide_builder_mul(
                b, NULL, g,
                tide_builder_constant(b, NULL, TIDE_DT_FLOAT32, rank, wdims, w + k * n_out));
        y = k == 0 ? g : tide_builder_add(b, NULL, y, g);
    }
    dims[axis] = n_out;
    *x = axis == 0    ? y
         : by_reshape ? tide_builder_reshape(b, NULL, y, rank, dims)
                      : tide_builder_transpose(b, NULL, y, inverse, rank);
    return check_builder(c, *x);
}

/* The index of string attribute name's value in choices (NULL-terminated); def when it is
 * absent, -1 with the error set when it is none of them. */
static int attr_choice(struct ctx *c, const char *name, const char *const *choices, int def)
{
    const Onnx__AttributeProto *a = attr(c->node, name);
    if (!a || !a->has_s)
        return def;
    for (int k = 0; choices[k]; k++) {
        if (a->s.len == strlen(choices[k]) && memcmp(a->s.data, choices[k], a->s.len) == 0)
            return k;
    }
    char got[40], list[200] = "";
    size_t n = a->s.len < sizeof(got) - 1 ? a->s.len : sizeof(got) - 1;
    for (size_t k = 0; k < n; k++) /* the file's bytes, printable */
        got[k] = a->s.data[k] >= 0x20 && a->s.data[k] < 0x7f ? (char)a->s.data[k] : '?';
    got[n] = 0;
    for (int k = 0; choices[k]; k++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", k ? ", " : "",
                 choices[k]);
    return failf(c, "%s \"%s\" is not one of %s", name, got, list);
}

enum resample_mode { RESAMPLE_NEAREST, RESAMPLE_LINEAR, RESAMPLE_CUBIC };

/* coordinate_transformation_mode's values, in the order attr_choice reads them. */
enum coordinates {
    COORD_HALF_PIXEL,
    COORD_PYTORCH_HALF_PIXEL,
    COORD_ALIGN_CORNERS,
    COORD_ASYMMETRIC,
    COORD_TF_HALF_PIXEL_FOR_NN,
    COORD_TF_CROP_AND_RESIZE,
    COORD_HALF_PIXEL_SYMMETRIC,
};

/* nearest_mode's values, in the order attr_choice reads them. */
enum rounding { ROUND_PREFER_FLOOR, ROUND_PREFER_CEIL, ROUND_FLOOR, ROUND_CEIL };

struct resample {
    enum resample_mode mode;
    enum coordinates coord;
    enum rounding rounding;
    double cubic_a;
    bool exclude_outside;
};

/*
 * Resamples axis of x to n_out elements, each output element a weighted sum
 * of at most 4 input elements along the axis, computed here as ONNX's
 * reference implementation (onnx/backend/test/case/node/resize.py, which
 * made the conformance data) computes them: the output coordinate o maps to
 * x_original by the coordinate mode, with scale the axis's scale and
 * resized its length_resized (scale x length_original, unfloored, when
 * scales are given: the reference's align_corners divides by it); x_original
 * splits into a base index b and a ratio r in (0, 1], an integer position
 * being b + 1 with r = 1; the taps are b and b + 1 (nearest picks one,
 * linear weighs them 1 - r and r) or b - 1 to b + 2 (cubic, Keys' kernel
 * with cubic_coeff_a), and indices past the edges read the edge element.
 * Taps that read the same element are merged and zero weights dropped, so
 * an axis that comes out unchanged costs nothing, and a nearest one a
 * single Gather.
 */
static int resample_axis(struct ctx *c, const struct resample *s, tide_ref *x, int32_t rank,
                         int64_t dims[MAX_RANK], int32_t axis, int64_t n_out, double scale,
                         double resized)
{
    int64_t in = dims[axis];
    if (in < 1 || in > INT32_MAX)
        return failf(
            c, "axis %d of size %" PRId64 " cannot be resized: tide's Gather indices are int32",
            axis, in);
    if (n_out < 1 || n_out > FOLD_MAX_ELEMENTS / 4)
        return failf(
            c, "axis %d of size %" PRId64 " would have %" PRId64 " elements, not 1 to %" PRId64,
            axis, in, n_out, FOLD_MAX_ELEMENTS / 4);
    int32_t *ids = malloc((size_t)n_out * 4 * sizeof(int32_t));
    float *w = malloc((size_t)n_out * 4 * sizeof(float));
    int8_t *count = malloc((size_t)n_out);
    if (!ids || !w || !count) {
        free(ids), free(w), free(count);
        return failf(c, "out of memory");
    }
    int32_t taps = 1;
    bool identity = n_out == in, weighted = false;
    for (int64_t o = 0; o < n_out; o++) {
        double xo, a = s->cubic_a;
        switch (s->coord) {
        case COORD_PYTORCH_HALF_PIXEL:
            xo = resized > 1 ? (o + 0.5) / scale - 0.5 : 0;
            break;
        case COORD_ALIGN_CORNERS:
            xo = resized == 1 ? 0 : o * (double)(in - 1) / (resized - 1);
            break;
        case COORD_ASYMMETRIC:
            xo = o / scale;
            break;
        case COORD_TF_HALF_PIXEL_FOR_NN:
            xo = (o + 0.5) / scale;
            break;
        default:
            xo = (o + 0.5) / scale - 0.5;
            break;
        }
        if (!(fabs(xo) < 1e15)) {
            free(ids), free(w), free(count);
            return failf(c, "output %" PRId64 " of axis %d maps to input position %g", o, axis, xo);
        }
        double fl = floor(xo);
        int64_t base = xo == fl ? (int64_t)fl - 1 : (int64_t)fl;
        double r = xo - (double)base, cw[4];
        int64_t at[4];
        int n = 0;
        if (s->mode == RESAMPLE_NEAREST) {
            bool up = r == 1 || s->rounding == ROUND_CEIL ||
                      (s->rounding == ROUND_PREFER_FLOOR && r > 0.5) ||
                      (s->rounding == ROUND_PREFER_CEIL && r >= 0.5);
            at[n] = base + up, cw[n++] = 1;
        } else if (s->mode == RESAMPLE_LINEAR) {
            at[n] = base, cw[n++] = 1 - r;
            at[n] = base + 1, cw[n++] = r;
        } else {
            double q = 1 - r;
            at[n] = base - 1, cw[n++] = ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a;
            at[n] = base, cw[n++] = ((a + 2) * r - (a + 3)) * r * r + 1;
            at[n] = base + 1, cw[n++] = ((a + 2) * q - (a + 3)) * q * q + 1;
            at[n] = base + 2, cw[n++] = ((a * (q + 1) - 5 * a) * (q + 1) + 8 * a) * (q + 1) - 4 * a;
        }
        if (s->exclude_outside && s->mode != RESAMPLE_NEAREST) {
            double sum = 0;
            for (int k = 0; k < n; k++) {
                if (at[k] < 0 || at[k] >= in)
                    cw[k] = 0;
                sum += cw[k];
            }
            for (int k = 0; sum != 0 && k < n; k++)
                cw[k] /= sum;
        }
        /* Edges, then taps of one element merged and zero weights dropped (one kept). */
        int64_t mi[4];
        double mw[4];
        int kept = 0, live = 0;
        for (int k = 0; k < n; k++) {
            int64_t i = at[k] < 0 ? 0 : at[k] >= in ? in - 1 : at[k];
            int j = 0;
            while (j < kept && mi[j] != i)
                j++;
            if (j == kept)
                mi[kept] = i, mw[kept++] = 0;
            mw[j] += cw[k];
        }
        for (int j = 0; j < kept; j++) {
            if (!(fabs(mw[j]) <= FLT_MAX)) {
                free(ids), free(w), free(count);
                return failf(
                    c,
                    "output %" PRId64
                    " of axis %d gets the weight %g, which float does not hold (cubic_coeff_a %g)",
                    o, axis, mw[j], s->cubic_a);
            }
            if (mw[j] != 0 || (live == 0 && j == kept - 1)) {
                ids[live * n_out + o] = (int32_t)mi[j];
                w[live * n_out + o] = (float)mw[j];
                live++;
            }
        }
        count[o] = (int8_t)live;
        taps = live > taps ? live : taps;
        weighted |= live > 1 || w[o] != 1;
        identity &= live == 1 && w[o] == 1 && ids[o] == o;
    }
    /* Outputs with fewer taps read their first element again, with weight 0. */
    for (int64_t o = 0; o < n_out; o++) {
        for (int32_t j = count[o]; j < taps; j++)
            ids[j * n_out + o] = ids[o], w[j * n_out + o] = 0;
    }
    int rc =
        identity ? 0 : gather_axis(c, x, rank, dims, axis, n_out, taps, ids, weighted ? w : NULL);
    free(ids), free(w), free(count);
    return rc;
}

/* Resamples x to out[a] elements along each axis listed (all when axes is NULL). */
static int resample_axes(struct ctx *c, const struct resample *s, tide_ref x, int32_t rank,
                         int64_t dims[MAX_RANK], const int64_t *axes, int64_t n_axes,
                         const int64_t *out, const double *scale, const double *resized)
{
    for (int64_t k = 0; k < n_axes; k++) {
        int32_t a = (int32_t)axes[k];
        if (resample_axis(c, s, &x, rank, dims, a, out[a], scale[a], resized[a]) != 0)
            return -1;
    }
    return set_out(c, 0, x);
}

/*
 * Upsample and Resize-10, for which ONNX defines only that each output axis
 * is floor(input axis x scale) long. Linear is read with asymmetric
 * coordinates (x_original = x / scale), as ONNX Runtime reads these
 * versions. Nearest is taken only with integer scales, where every reading
 * agrees (each element repeated scale times): a fractional one is refused,
 * ONNX defining nearest's rounding from Resize-11 on.
 */
static int resample_legacy(struct ctx *c, tide_ref x, int32_t rank, int64_t dims[MAX_RANK],
                           const float *scales, bool linear, bool upsample)
{
    struct resample s = {.mode = linear ? RESAMPLE_LINEAR : RESAMPLE_NEAREST,
                         .coord = COORD_ASYMMETRIC,
                         .rounding = ROUND_FLOOR};
    int64_t axes[MAX_RANK], out[MAX_RANK];
    double scale[MAX_RANK], resized[MAX_RANK];
    for (int32_t a = 0; a < rank; a++) {
        double sc = scales[a], len = (double)dims[a] * sc;
        if (!(sc > 0 && sc < 1e15))
            return failf(c, "scales[%d] is %g, not a positive number", a, sc);
        if (upsample && sc < 1)
            return failf(c, "scales[%d] is %g; Upsample's scales are 1 or more", a, sc);
        if (!linear && sc != floor(sc))
            return failf(c,
                         "mode nearest with the fractional scale %g (scales[%d]) is not "
                         "supported: ONNX defines its rounding from Resize-11 on",
                         sc, a);
        axes[a] = a;
        out[a] = len < 1e15 ? (int64_t)floor(len) : INT64_MAX;
        scale[a] = sc;
        resized[a] = len;
    }
    return resample_axes(c, &s, x, rank, dims, axes, rank, out, scale, resized);
}

static int op_upsample(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    static const char *const modes_1[] = {"nearest", "bilinear", NULL};
    static const char *const modes[] = {"nearest", "linear", NULL};
    tide_ref x;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (float_in(c, 0, &x) != 0 || ref_shape(c, x, &rank, dims) != 0)
        return -1;
    int mode = attr_choice(c, "mode", c->version < 7 ? modes_1 : modes, 0);
    if (mode < 0)
        return -1;
    float scales[MAX_RANK];
    if (c->version < 7) { /* Upsample-1: height_scale and width_scale of [N, C, H, W] */
        const Onnx__AttributeProto *h = attr(n, "height_scale"), *w = attr(n, "width_scale");
        if (!h || !h->has_f || !w || !w->has_f)
            return failf(c, "attributes height_scale and width_scale are required");
        if (rank != 4)
            return failf(c, "X has rank %d; Upsample-1 takes [N, C, H, W]", rank);
        scales[0] = scales[1] = 1;
        scales[2] = h->f;
        scales[3] = w->f;
    } else if (c->version < 9) { /* Upsample-7: the attribute scales */
        const Onnx__AttributeProto *a = attr(n, "scales");
        if (!a)
            return failf(c, "attribute scales is required");
        if (a->n_floats != (size_t)rank)
            return failf(c, "scales holds %zu values for X of rank %d", a->n_floats, rank);
        for (int32_t k = 0; k < rank; k++)
            scales[k] = a->floats[k];
    } else {
        struct value *v = in_const(c, 1, "scales");
        if (!v)
            return -1;
        if (v->type != CONST_FLOAT)
            return failf(c, "scales must hold floats");
        if (numel(v->rank, v->dims) != rank)
            return failf(c, "scales holds %" PRId64 " values for X of rank %d",
                         numel(v->rank, v->dims), rank);
        for (int32_t k = 0; k < rank; k++)
            scales[k] = v->f[k];
    }
    return resample_legacy(c, x, rank, dims, scales, mode == 1, true);
}

/*
 * Resize: per axis, as resample_axis says, from scales (output floor(input
 * x scale)) or sizes; Resize-10 as Upsample. Refused by name: the
 * coordinate modes tf_crop_and_resize (a crop to roi, extrapolating) and
 * half_pixel_symmetric, antialias when an axis shrinks under linear or
 * cubic, and keep_aspect_ratio_policy other than stretch.
 */
static int op_resize(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    static const char *const modes[] = {"nearest", "linear", "cubic", NULL};
    static const char *const coords[] = {
        "half_pixel",           "pytorch_half_pixel", "align_corners",        "asymmetric",
        "tf_half_pixel_for_nn", "tf_crop_and_resize", "half_pixel_symmetric", NULL};
    static const char *const roundings[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                            "ceil", NULL};
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller", NULL};
    tide_ref x;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (float_in(c, 0, &x) != 0 || ref_shape(c, x, &rank, dims) != 0)
        return -1;
    int mode = attr_choice(c, "mode", modes, 0);
    if (mode < 0)
        return -1;
    if (c->version < 11) {
        if (mode == RESAMPLE_CUBIC)
            return failf(c, "mode cubic is not in Resize-10 (it came with Resize-11)");
        struct value *v = in_const(c, 1, "scales");
        if (!v)
            return -1;
        if (v->type != CONST_FLOAT)
            return failf(c, "scales must hold floats");
        if (numel(v->rank, v->dims) != rank)
            return failf(c, "scales holds %" PRId64 " values for X of rank %d",
                         numel(v->rank, v->dims), rank);
        return resample_legacy(c, x, rank, dims, v->f, mode == RESAMPLE_LINEAR, false);
    }
    int coord = attr_choice(c, "coordinate_transformation_mode", coords, COORD_HALF_PIXEL);
    int rounding = attr_choice(c, "nearest_mode", roundings, ROUND_PREFER_FLOOR);
    int policy = c->version >= 18 ? attr_choice(c, "keep_aspect_ratio_policy", policies, 0) : 0;
    if (coord < 0 || rounding < 0 || policy < 0)
        return -1;
    if (coord == COORD_TF_HALF_PIXEL_FOR_NN && c->version >= 13)
        return failf(c, "coordinate_transformation_mode tf_half_pixel_for_nn is Resize-11's "
                        "(Resize-13 removed it)");
    if (coord == COORD_HALF_PIXEL_SYMMETRIC && c->version < 19)
        return failf(c,
                     "coordinate_transformation_mode half_pixel_symmetric is not in Resize-%" PRId64
                     " (it came with Resize-19)",
                     c->version);
    if (coord == COORD_TF_CROP_AND_RESIZE || coord == COORD_HALF_PIXEL_SYMMETRIC)
        return failf(c, "coordinate_transformation_mode %s is not supported", coords[coord]);
    struct resample s = {.mode = (enum resample_mode)mode,
                         .coord = (enum coordinates)coord,
                         .rounding = (enum rounding)rounding,
                         .cubic_a = attr_f(n, "cubic_coeff_a", -0.75f),
                         .exclude_outside = attr_i(n, "exclude_outside", 0) != 0};
    int64_t axes[MAX_RANK], n_axes = rank;
    for (int32_t a = 0; a < rank; a++)
        axes[a] = a;
    if (c->version >= 18 && attr(n, "axes")) {
        bool seen[MAX_RANK] = {false};
        if (ints_attr(c, "axes", false, axes, &n_axes) != 0)
            return -1;
        for (int64_t k = 0; k < n_axes; k++) {
            if (norm_axis(c, axes[k], rank, &axes[k]) != 0)
                return -1;
            if (seen[axes[k]])
                return failf(c, "axes lists axis %" PRId64 " twice", axes[k]);
            seen[axes[k]] = true;
        }
    }
    /* Exactly one of scales and sizes; an empty one stands for none (Resize-11's scales is a
     * required input, empty when sizes are given). */
    struct value *sv = NULL, *zv = NULL;
    if (has_input(n, 2) && !(sv = in_const(c, 2, "scales")))
        return -1;
    if (has_input(n, 3) && !(zv = in_const(c, 3, "sizes")))
        return -1;
    if (sv && numel(sv->rank, sv->dims) == 0)
        sv = NULL;
    if (zv && numel(zv->rank, zv->dims) == 0)
        zv = NULL;
    if (!sv == !zv)
        return failf(c, sv ? "scales and sizes are both given; Resize takes one"
                           : "neither scales nor sizes is given");
    struct value *v = sv ? sv : zv;
    const char *what = sv ? "scales" : "sizes";
    if ((v->type == CONST_FLOAT) != (sv != NULL))
        return failf(c, "%s must hold %s", what, sv ? "floats" : "integers");
    if (numel(v->rank, v->dims) != n_axes)
        return failf(c, "%s holds %" PRId64 " values for %" PRId64 " axes", what,
                     numel(v->rank, v->dims), n_axes);
    if (zv && policy != 0)
        return failf(c, "keep_aspect_ratio_policy %s is not supported (only stretch)",
                     policies[policy]);
    bool antialias = c->version >= 18 && attr_i(n, "antialias", 0) != 0 && mode != RESAMPLE_NEAREST;
    int64_t out[MAX_RANK];
    double scale[MAX_RANK], resized[MAX_RANK];
    for (int64_t k = 0; k < n_axes; k++) {
        int64_t a = axes[k];
        if (sv) {
            double sc = sv->f[k], len = (double)dims[a] * sc;
            if (!(sc > 0 && sc < 1e15))
                return failf(c, "scales[%" PRId64 "] is %g, not a positive number", k, sc);
            out[a] = len < 1e15 ? (int64_t)floor(len) : INT64_MAX;
            scale[a] = sc;
            resized[a] = len;
        } else {
            if (zv->i[k] < 1)
                return failf(c, "sizes[%" PRId64 "] is %" PRId64 "; tide resizes to 1 or more", k,
                             zv->i[k]);
            out[a] = zv->i[k];
            scale[a] = dims[a] > 0 ? (double)zv->i[k] / (double)dims[a] : 1;
            resized[a] = (double)zv->i[k];
        }
        if (antialias && scale[a] < 1)
            return failf(c, "antialias when axis %" PRId64 " shrinks (scale %g) is not supported",
                         a, scale[a]);
    }
    return resample_axes(c, &s, x, rank, dims, axes, n_axes, out, scale, resized);
}

/* ---- padding (Pad) ---- */

/* Pad's modes, in the order attr_choice reads them. */
enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

/*
 * Pad, one axis at a time: its negative pads first remove elements (a
 * Slice), then the positive ones pad what is left. Constant: Concat with
 * blocks of the value. Reflect, edge and wrap: a Gather along the axis
 * (gather_axis) of the index map numpy.pad gives (ONNX's reference is
 * numpy.pad): reflect mirrors about the edge elements, repeating when the
 * pad is longer than the axis; edge repeats them; wrap continues from the
 * other end; a removal is folded into the map. Gather's gradient adds up
 * each element's copies.
 */
static int op_pad(struct ctx *c)
{
    const Onnx__NodeProto *n = c->node;
    static const char *const modes[] = {"constant", "reflect", "edge", "wrap", NULL};
    tide_ref x;
    int32_t rank;
    int64_t dims[MAX_RANK];
    if (float_in(c, 0, &x) != 0 || ref_shape(c, x, &rank, dims) != 0)
        return -1;
    int mode = attr_choice(c, "mode", modes, PAD_CONSTANT);
    if (mode < 0)
        return -1;
    if (mode == PAD_WRAP && c->version < 19)
        return failf(c, "mode wrap is not in Pad-%" PRId64 " (it came with Pad-19)", c->version);
    int64_t pads[2 * MAX_RANK], n_pads, axes[MAX_RANK], n_axes = rank;
    float value = 0;
    for (int32_t a = 0; a < rank; a++)
        axes[a] = a;
    if (c->version < 11) { /* Pad-1's paddings, Pad-2's pads and value are attributes */
        const char *name = c->version < 2 ? "paddings" : "pads";
        const int64_t *list = NULL;
        n_pads = attr_ints(n, name, &list);
        if (n_pads < 0)
            return failf(c, "attribute %s is required", name);
        if (n_pads != 2 * (int64_t)rank)
            return failf(c, "%s holds %" PRId64 " values for rank %d (wants %d)", name, n_pads,
                         rank, 2 * rank);
        if (n_pads)
            memcpy(pads, list, (size_t)n_pads * sizeof(int64_t));
        value = attr_f(n, "value", 0);
    } else {
        struct value *p = in_const(c, 1, "pads");
        if (!p || const_ints(c, p, pads, &n_pads, 2 * MAX_RANK) != 0)
            return -1;
        if (has_input(n, 2)) {
            struct value *v = in_const(c, 2, "constant_value");
            if (!v)
                return -1;
            if (numel(v->rank, v->dims) != 1)
                return failf(c, "constant_value holds %" PRId64 " values, not one",
                             numel(v->rank, v->dims));
            value = (float)get_num(v, 0);
        }
        if (c->version >= 18 && has_input(n, 3)) {
            struct value *v = in_const(c, 3, "axes");
            bool seen[MAX_RANK] = {false};
            if (!v || const_ints(c, v, axes, &n_axes, MAX_RANK) != 0)
                return -1;
            for (int64_t k = 0; k < n_axes; k++) {
                if (norm_axis(c, axes[k], rank, &axes[k]) != 0)
                    return -1;
                if (seen[axes[k]])
                    return failf(c, "axes lists axis %" PRId64 " twice", axes[k]);
                seen[axes[k]] = true;
            }
        }
        if (n_pads != 2 * n_axes)
            return failf(c,
                         "pads holds %" PRId64 " values for %" PRId64 " axes (wants %" PRId64 ")",
                         n_pads, n_axes, 2 * n_axes);
    }
    for (int64_t k = 0; k < n_axes; k++) {
        int32_t a = (int32_t)axes[k];
        int64_t d = dims[a], before = pads[k], after = pads[k + n_axes];
        if (before == 0 && after == 0)
            continue;
        /* What stays of the axis is [lo, d - hi), keep elements; the pads are bounded first so
         * that nothing below overflows. */
        if (before < -d || after < -d || before > FOLD_MAX_ELEMENTS || after > FOLD_MAX_ELEMENTS ||
            d - (before < 0 ? -before : 0) - (after < 0 ? -after : 0) < 1)
            return failf(c,
                         "pads %" PRId64 " and %" PRId64
                         " leave no element of axis %d (size %" PRId64 ")",
                         before, after, a, d);
        int64_t lo = before < 0 ? -before : 0, hi = after < 0 ? -after : 0, keep = d - lo - hi;
        int64_t pb = before > 0 ? before : 0, pe = after > 0 ? after : 0, n_out;
        if (__builtin_add_overflow(pb + pe, keep, &n_out))
            return failf(c, "pads %" PRId64 " and %" PRId64 " overflow axis %d (size %" PRId64 ")",
                         before, after, a, d);
        if (mode != PAD_CONSTANT && (n_out > FOLD_MAX_ELEMENTS || d > INT32_MAX))
            return failf(c,
                         "axis %d of size %" PRId64 " padded to %" PRId64
                         " elements: mode %s pads to at most %" PRId64 " from at most %d",
                         a, d, n_out, modes[mode], FOLD_MAX_ELEMENTS, INT32_MAX);
        if (mode != PAD_CONSTANT) {
            int32_t *ids = malloc((size_t)n_out * sizeof(int32_t));
            if (!ids)
                return failf(c, "out of memory");
            for (int64_t o = 0; o < n_out; o++) {
                int64_t i = o - pb, p = 2 * (keep - 1), m;
                if (mode == PAD_EDGE)
                    m = i < 0 ? 0 : i >= keep ? keep - 1 : i;
                else if (mode == PAD_WRAP)
                    m = (i % keep + keep) % keep;
                else if (keep == 1)
                    m = 0;
                else
                    m = (i % p + p) % p, m = m < keep ? m : p - m;
                ids[o] = (int32_t)(lo + m);
            }
            int rc = gather_axis(c, &x, rank, dims, a, n_out, 1, ids, NULL);
            free(ids);
            if (rc != 0)
                return -1;
            continue;
        }
        if (lo || hi) {
            int64_t begin[MAX_RANK] = {0}, size[MAX_RANK];
            memcpy(size, dims, sizeof(size));
            begin[a] = lo;
            size[a] = keep;
            x = tide_builder_slice(c->b, NULL, x, begin, size, rank);
            dims[a] = keep;
        }
        if (pad_constant_axis(c, &x, rank, dims, a, pb, pe, value) != 0)
            return -1;
    }
    return set_out(c, 0, x);
}

/*
 * x (rank, dims) with before and after elements of value on each side of
 * axis: a Concat with constant blocks, so the gradient reaches x (Concat's).
 * dims[axis] grows by both.
 */
static int pad_constant_axis(struct ctx *c, tide_ref *x, int32_t rank, int64_t dims[MAX_RANK],
                             int32_t axis, int64_t before, int64_t after, float value)
{
    tide_ref parts[3];
    int32_t n_parts = 0;
    for (int side = 0; side < 2; side++) {
        int64_t block[MAX_RANK], count;
        memcpy(block, dims, sizeof(block));
        block[axis] = side ? after : before;
        if (side == 1)
            parts[n_parts++] = *x;
        if (block[axis] == 0)
            continue;
        if ((count = numel(rank, block)) > FOLD_MAX_ELEMENTS)
            return failf(c,
                         "a pad of %" PRId64 " elements is more than the import builds (%" PRId64
                         ")",
                         count, FOLD_MAX_ELEMENTS);
        float *fill = malloc((size_t)(count ? count : 1) * sizeof(float));
        if (!fill)
            return failf(c, "out of memory");
        for (int64_t e = 0; e < count; e++)
            fill[e] = value;
        parts[n_parts++] = tide_builder_constant(c->b, NULL, TIDE_DT_FLOAT32, rank, block, fill);
        free(fill);
    }
    *x = tide_builder_concat(c->b, NULL, parts, n_parts, axis);
    dims[axis] += before + after;
    return check_builder(c, *x);
}

/* ---- copies and rearrangements (Tile, DepthToSpace, SpaceToDepth) ---- */

/* The integer value of a one-element constant (Tile-1's tiles and axis are typed like the
 * input, so a float that holds an integer is taken); -1 with the error set otherwise. */
static int scalar_int(struct ctx *c, struct value *v, const char *what, int64_t *out)
{
    int64_t count = numel(v->rank, v->dims);
    if (count != 1)
        return failf(c, "%s (input \"%s\") holds %" PRId64 " values, not 1", what, v->name, count);
    double d = get_num(v, 0);
    if (v->type != CONST_FLOAT) {
        *out = v->i[0];
        return 0;
    }
    if (!float_to_int(d, out) || (double)*out != d)
        return failf(c, "%s (input \"%s\") is %g, not an integer", what, v->name, d);
    return 0;
}

/* The most tiled axes one Reshape + BroadcastTo + Reshape round takes: with the untiled
 * axes between them merged, 3 give rank 7 at most, within tide's 8. */
#define TILE_AXES_PER_ROUND 3

/*
 * Tile: the input repeated repeats[a] times along each axis a, whole (numpy.tile). Tile-1
 * takes one axis and its count as inputs. Folded on constants. On a tensor the copies are a
 * broadcast: x reshaped with a 1 before each tiled axis (the untiled axes between merged),
 * BroadcastTo the repeats there, reshaped to the tiled shape: 3 nodes whatever the repeats,
 * where a Concat of copies takes one input per copy and its gradient one Slice per copy.
 * BroadcastTo's gradient sums dy over the copies, so a tiled tensor trains.
 */
static int op_tile(struct ctx *c)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t dims[MAX_RANK], reps[MAX_RANK];
    if (value_shape(c, x, &rank, dims) != 0)
        return -1;
    if (c->version < 6) {
        struct value *t = in_const(c, 1, "tiles"), *a = t ? in_const(c, 2, "axis") : NULL;
        int64_t tiles, axis;
        if (!a || scalar_int(c, t, "tiles", &tiles) != 0 || scalar_int(c, a, "axis", &axis) != 0 ||
            norm_axis(c, axis, rank, &axis) != 0)
            return -1;
        for (int32_t k = 0; k < rank; k++)
            reps[k] = k == axis ? tiles : 1;
    } else {
        struct value *r = in_const(c, 1, "repeats");
        int64_t n;
        if (!r || const_ints(c, r, reps, &n, MAX_RANK) != 0)
            return -1;
        if (n != rank)
            return failf(c, "repeats holds %" PRId64 " values for an input of rank %d", n, rank);
    }
    int64_t out[MAX_RANK];
    int32_t tiled = 0;
    for (int32_t k = 0; k < rank; k++) {
        if (reps[k] < 0)
            return failf(c, "repeats[%d] is %" PRId64 ", negative", k, reps[k]);
        if (__builtin_mul_overflow(dims[k], reps[k], &out[k]))
            return failf(c, "axis %d of size %" PRId64 " repeated %" PRId64 " times overflows", k,
                         dims[k], reps[k]);
        tiled += reps[k] != 1;
    }
    if (x->known && !x->trainable) {
        struct value src = *x;
        bool replaced = lookup(c, c->node->output[0]) == x; /* an output of the same name */
        if (replaced)
            x->f = NULL, x->i = NULL;
        struct value *v = set_out_const(c, 0, src.type, rank, out);
        int64_t total = numel(rank, out);
        for (int64_t k = 0; v && k < total; k++) {
            /* Output coordinate o reads the input at o mod the input's size, per axis. */
            int64_t rem = k, from = 0, stride = 1;
            for (int32_t a = rank - 1; a >= 0; a--) {
                from += rem % out[a] % dims[a] * stride;
                rem /= out[a];
                stride *= dims[a];
            }
            if (src.type == CONST_FLOAT)
                v->f[k] = src.f[from];
            else
                v->i[k] = src.i[from];
        }
        if (replaced)
            free(src.f), free(src.i);
        return v ? 0 : -1;
    }
    tide_ref r;
    if (float_in(c, 0, &r) != 0)
        return -1;
    if (tiled == 0)
        return set_out(c, 0, tide_builder_identity(c->b, NULL, r));
    int64_t cur[MAX_RANK];
    memcpy(cur, dims, sizeof(cur));
    for (int32_t next = 0; next < rank;) {
        /* One round: the next TILE_AXES_PER_ROUND tiled axes from axis next on. */
        int64_t one[2 * MAX_RANK], wide[2 * MAX_RANK], run = 1;
        int32_t n = 0, taken = 0;
        bool in_run = false;
        for (int32_t k = 0; k < rank; k++) {
            if (k >= next && reps[k] != 1 && taken < TILE_AXES_PER_ROUND) {
                if (in_run)
                    one[n] = wide[n] = run, n++;
                one[n] = 1, wide[n] = reps[k], n++;
                run = 1;
                cur[k] *= reps[k];
                next = k + 1;
                taken++;
            }
            run *= dims[k];
            in_run = true;
        }
        if (taken == 0)
            break;
        one[n] = wide[n] = run, n++;
        r = tide_builder_reshape(c->b, NULL, r, n, one);
        r = tide_builder_broadcast_to(c->b, NULL, r, n, wide);
        r = tide_builder_reshape(c->b, NULL, r, rank, cur);
        if (check_builder(c, r) != 0)
            return -1;
        memcpy(dims, cur, sizeof(cur));
    }
    return set_out(c, 0, r);
}

/*
 * DepthToSpace and SpaceToDepth on [N, C, H, W]: Reshape to rank 6, Transpose, Reshape, as
 * ONNX's definitions compute them (each a permutation, so each trains through Transpose's
 * gradient). DepthToSpace's DCR mode (the default, and the only one before version 11) reads
 * the channels as [blocksize, blocksize, C / blocksize^2], CRD as [C / blocksize^2,
 * blocksize, blocksize]; SpaceToDepth is DCR's inverse.
 */
static int depth_space(struct ctx *c, bool to_space)
{
    struct value *x = in_value(c, 0);
    if (!x)
        return -1;
    int32_t rank;
    int64_t d[MAX_RANK];
    if (value_shape(c, x, &rank, d) != 0)
        return -1;
    char text[160];
    if (rank != 4)
        return failf(c, "input 0 has shape %s; %s takes [N, C, H, W]",
                     dims_text(text, sizeof(text), rank, d), c->node->op_type);
    const Onnx__AttributeProto *a = attr(c->node, "blocksize");
    if (!a || !a->has_i)
        return failf(c, "attribute blocksize is required");
    int64_t bs = a->i, bs2;
    if (bs < 1)
        return failf(c, "blocksize %" PRId64 " is not positive", bs);
    static const char *const modes[] = {"DCR", "CRD", NULL};
    int mode = to_space && c->version >= 11 ? attr_choice(c, "mode", modes, 0) : 0;
    if (mode < 0)
        return -1;
    int64_t n = d[0], ch = d[1], h = d[2], w = d[3], mid[6], out[4], hb, wb, cb;
    int64_t perm[6];
    if (to_space) {
        if (__builtin_mul_overflow(bs, bs, &bs2) || ch % bs2 != 0)
            return failf(c, "input 0's %" PRId64 " channels are not a multiple of blocksize %" PRId64
                            " squared",
                         ch, bs);
        if (__builtin_mul_overflow(h, bs, &hb) || __builtin_mul_overflow(w, bs, &wb))
            return failf(c, "input 0's H %" PRId64 " or W %" PRId64 " times blocksize %" PRId64
                            " overflows",
                         h, w, bs);
        int64_t cd = ch / bs2;
        if (mode == 0) {
            memcpy(mid, (int64_t[]){n, bs, bs, cd, h, w}, sizeof(mid));
            memcpy(perm, (int64_t[]){0, 3, 4, 1, 5, 2}, sizeof(perm));
        } else {
            memcpy(mid, (int64_t[]){n, cd, bs, bs, h, w}, sizeof(mid));
            memcpy(perm, (int64_t[]){0, 1, 4, 2, 5, 3}, sizeof(perm));
        }
        memcpy(out, (int64_t[]){n, cd, hb, wb}, sizeof(out));
    } else {
        if (h % bs != 0 || w % bs != 0)
            return failf(c, "input 0's H %" PRId64 " and W %" PRId64
                            " are not both multiples of blocksize %" PRId64,
                         h, w, bs);
        if (__builtin_mul_overflow(bs, bs, &bs2) || __builtin_mul_overflow(ch, bs2, &cb))
            return failf(c, "input 0's %" PRId64 " channels times blocksize %" PRId64
                            " squared overflows",
                         ch, bs);
        memcpy(mid, (int64_t[]){n, ch, h / bs, bs, w / bs, bs}, sizeof(mid));
        memcpy(perm, (int64_t[]){0, 3, 5, 1, 2, 4}, sizeof(perm));
        memcpy(out, (int64_t[]){n, cb, h / bs, w / bs}, sizeof(out));
    }
    tide_ref r;
    if (in_ref(c, 0, &r) != 0)
        return -1;
    r = tide_builder_reshape(c->b, NULL, r, 6, mid);
    r = tide_builder_transpose(c->b, NULL, r, perm, 6);
    return set_out(c, 0, tide_builder_reshape(c->b, NULL, r, 4, out));
}

static int op_depth_to_space(struct ctx *c)
{
    return depth_space(c, true);
}

static int op_space_to_depth(struct ctx *c)
{
    return depth_space(c, false);
}

/*
 * ScatterND of constants, folded: a copy of data with the slices that
 * indices' last axis addresses replaced by (or, from version 16, combined
 * by add, mul, max or min with) updates' values, in order. PyTorch writes
 * it for an indexed assignment such as the attention mask a Swin
 * Transformer builds from its window shifts. Negative indices count from
 * the end; one out of range is refused naming it. ScatterND into a tensor
 * computed in the graph is refused.
 */
static int op_scatter_nd(struct ctx *c)
{
    static const char *const reductions[] = {"none", "add", "mul", "max", "min", NULL};
    int red = c->version >= 16 ? attr_choice(c, "reduction", reductions, 0) : 0;
    if (red < 0)
        return -1;
    if (c->version < 18 && red >= 3)
        return failf(c, "reduction %s needs version 18", reductions[red]);
    struct value *d = in_value(c, 0), *ix = d ? in_value(c, 1) : NULL;
    struct value *u = ix ? in_value(c, 2) : NULL;
    if (!u)
        return -1;
    if (!d->known || !ix->known || !u->known || d->trainable || u->trainable)
        return failf(c, "ScatterND into or of tensors computed in the graph is not supported "
                        "(only of constants, which are folded)");
    if (ix->type != CONST_INT)
        return failf(c, "indices (input \"%s\") must be integers", ix->name);
    if ((d->type == CONST_FLOAT) != (u->type == CONST_FLOAT))
        return failf(c, "data and updates must be of one type");
    if (ix->rank < 1)
        return failf(c, "indices must have rank >= 1");
    int64_t q = ix->dims[ix->rank - 1];
    if (q < 1 || q > d->rank)
        return failf(c, "indices' last dimension %" PRId64 " must be in [1, %d] (data's rank)", q,
                     d->rank);
    /* updates: indices.shape[:-1] + data.shape[q:] */
    int32_t want_rank = ix->rank - 1 + d->rank - (int32_t)q;
    bool shape_ok = u->rank == want_rank;
    for (int32_t a = 0; shape_ok && a < ix->rank - 1; a++)
        shape_ok = u->dims[a] == ix->dims[a];
    for (int32_t a = 0; shape_ok && a < d->rank - q; a++)
        shape_ok = u->dims[ix->rank - 1 + a] == d->dims[q + a];
    if (!shape_ok) {
        char have[96], want[96];
        int64_t wd[2 * MAX_RANK];
        memcpy(wd, ix->dims, sizeof(int64_t) * (size_t)(ix->rank - 1));
        memcpy(wd + ix->rank - 1, d->dims + q, sizeof(int64_t) * (size_t)(d->rank - q));
        return failf(c, "updates are %s; indices and data make them %s",
                     dims_text(have, sizeof(have), u->rank, u->dims),
                     dims_text(want, sizeof(want), want_rank, wd));
    }
    struct value vd = *d, vi = *ix, vu = *u;
    struct value *v = set_out_const(c, 0, vd.type, vd.rank, vd.dims);
    if (!v)
        return -1;
    int64_t n = numel(vd.rank, vd.dims);
    if (vd.type == CONST_FLOAT)
        memcpy(v->f, vd.f, sizeof(float) * (size_t)n);
    else
        memcpy(v->i, vd.i, sizeof(int64_t) * (size_t)n);
    int64_t slice = numel(vd.rank - (int32_t)q, vd.dims + q);
    int64_t n_idx = numel(vi.rank - 1, vi.dims);
    for (int64_t t = 0; t < n_idx; t++) {
        int64_t off = 0;
        for (int64_t a = 0; a < q; a++) {
            int64_t i = vi.i[t * q + a], dim = vd.dims[a];
            if (i < -dim || i >= dim)
                return failf(c,
                             "index %" PRId64 " (tuple %" PRId64 ", axis %" PRId64
                             ") is out of range [%" PRId64 ", %" PRId64 ")",
                             i, t, a, -dim, dim);
            off = off * dim + (i < 0 ? i + dim : i);
        }
        off *= slice;
        for (int64_t k = 0; k < slice; k++) {
            int64_t o = off + k, src = t * slice + k;
            if (vd.type == CONST_FLOAT) {
                float x = v->f[o], y = vu.f[src];
                v->f[o] = red == 0   ? y
                          : red == 1 ? x + y
                          : red == 2 ? x * y
                          : red == 3 ? (x > y ? x : y)
                                     : (x < y ? x : y);
            } else {
                int64_t x = v->i[o], y = vu.i[src];
                v->i[o] = red == 0   ? y
                          : red == 1 ? (int64_t)((uint64_t)x + (uint64_t)y)
                          : red == 2 ? (int64_t)((uint64_t)x * (uint64_t)y)
                          : red == 3 ? (x > y ? x : y)
                                     : (x < y ? x : y);
            }
        }
    }
    return 0;
}

/* ============================================================================
 * The op table
 * ========================================================================== */

/*
 * An op tide imports: its handler, the oldest of its versions the handler
 * implements, and every version ONNX defines, each named by the opset that
 * introduced it: up to opset 17 from onnx.defs.get_all_schemas_with_history()
 * of ONNX 1.12 (Debian's python3-onnx), from 18 to 27 (ONNX 1.13 to 1.22)
 * from ONNX's docs/Changelog.md and onnx/defs/operator_sets.h. A model's
 * opset selects each op's newest version at or below it; the handlers read
 * c->version where versions differ (legacy broadcasting before 7, attributes
 * that became inputs, Split-18's num_outputs, ...). Most versions from 19 on
 * only add element types (float8, int4, bfloat16, ...), which tide refuses
 * where it meets them, as it does float16 and double.
 */
struct op_entry {
    const char *name;
    handler_fn fn;
    uint8_t first;
    uint8_t versions[12]; /* ascending, 0-terminated */
};

static const struct op_entry ops[] = {
    {"Abs", op_abs, 1, {1, 6, 13}},
    {"Acos", op_acos, 7, {7, 22}},
    {"Acosh", op_acosh, 9, {9, 22}},
    {"Add", op_add, 1, {1, 6, 7, 13, 14}},
    {"And", op_and, 1, {1, 7}},
    {"ArgMax", op_arg_max, 1, {1, 11, 12, 13}},
    {"ArgMin", op_arg_min, 1, {1, 11, 12, 13}},
    {"Asin", op_asin, 7, {7, 22}},
    {"Asinh", op_asinh, 9, {9, 22}},
    {"Atan", op_atan, 7, {7, 22}},
    {"Atanh", op_atanh, 9, {9, 22}},
    {"AveragePool", op_average_pool, 1, {1, 7, 10, 11, 19, 22}},
    {"BatchNormalization", op_batch_normalization, 1, {1, 6, 7, 9, 14, 15}},
    {"Cast", op_cast, 6, {1, 6, 9, 13, 19, 21, 23, 24, 25}},
    {"Ceil", op_ceil, 1, {1, 6, 13}},
    {"Clip", op_clip, 1, {1, 6, 11, 12, 13}},
    {"Concat", op_concat, 1, {1, 4, 11, 13}},
    {"Constant", op_constant, 1, {1, 9, 11, 12, 13, 19, 21, 23, 24, 25}},
    {"ConstantOfShape", op_constant_of_shape, 9, {9, 20, 21, 23, 24, 25}},
    {"Conv", op_conv, 1, {1, 11, 22}},
    {"ConvTranspose", op_conv_transpose, 1, {1, 11, 22}},
    {"Cos", op_cos, 7, {7, 22}},
    {"Cosh", op_cosh, 9, {9, 22}},
    {"CumSum", op_cum_sum, 11, {11, 14}},
    {"DepthToSpace", op_depth_to_space, 1, {1, 11, 13}},
    {"Div", op_div, 1, {1, 6, 7, 13, 14}},
    {"Dropout", op_dropout, 1, {1, 6, 7, 10, 12, 13, 22}},
    {"Einsum", op_einsum, 12, {12}},
    {"Elu", op_elu, 1, {1, 6, 22}},
    {"Equal", op_equal, 1, {1, 7, 11, 13, 19}},
    {"Erf", op_erf, 9, {9, 13}},
    {"Exp", op_exp, 1, {1, 6, 13}},
    {"Expand", op_expand, 8, {8, 13}},
    {"EyeLike", op_eye_like, 9, {9, 22}},
    {"Flatten", op_flatten, 1, {1, 9, 11, 13, 21, 23, 24, 25}},
    {"Floor", op_floor, 1, {1, 6, 13}},
    {"Gather", op_gather, 1, {1, 11, 13}},
    {"Greater", op_greater, 1, {1, 7, 9, 13}},
    {"GreaterOrEqual", op_greater_or_equal, 12, {12, 16}},
    {"GatherElements", op_gather_elements, 11, {11, 13}},
    {"Gemm", op_gemm, 1, {1, 6, 7, 9, 11, 13}},
    {"Gelu", op_gelu, 20, {20}},
    {"GlobalAveragePool", op_global_average_pool, 1, {1, 22}},
    {"GlobalMaxPool", op_global_max_pool, 1, {1, 22}},
    {"GRU", op_gru, 7, {1, 3, 7, 14, 22}},
    {"HardSigmoid", op_hard_sigmoid, 1, {1, 6, 22}},
    {"HardSwish", op_hard_swish, 14, {14, 22}},
    {"Hardmax", op_hardmax, 1, {1, 11, 13}},
    {"Identity", op_identity, 1, {1, 13, 14, 16, 19, 21, 23, 24, 25}},
    {"IsInf", op_is_inf, 10, {10, 20}},
    {"IsNaN", op_is_nan, 9, {9, 13, 20}},
    {"InstanceNormalization", op_instance_normalization, 1, {1, 6, 22}},
    {"LayerNormalization", op_layer_normalization, 17, {17}},
    {"LeakyRelu", op_leaky_relu, 1, {1, 6, 16}},
    {"Less", op_less, 1, {1, 7, 9, 13}},
    {"LessOrEqual", op_less_or_equal, 12, {12, 16}},
    {"Log", op_log, 1, {1, 6, 13}},
    {"LogSoftmax", op_log_softmax, 1, {1, 11, 13}},
    {"LRN", op_lrn, 1, {1, 13}},
    {"LSTM", op_lstm, 7, {1, 7, 14, 22}},
    {"MatMul", op_matmul, 1, {1, 9, 13}},
    {"Max", op_max, 1, {1, 6, 8, 12, 13}},
    {"MaxPool", op_max_pool, 1, {1, 8, 10, 11, 12, 22}},
    {"Mean", op_mean, 1, {1, 6, 8, 13}},
    {"Min", op_min, 1, {1, 6, 8, 12, 13}},
    {"Mish", op_mish, 18, {18, 22}},
    {"Mod", op_mod, 10, {10, 13}},
    {"Mul", op_mul, 1, {1, 6, 7, 13, 14}},
    {"Neg", op_neg, 1, {1, 6, 13}},
    {"NegativeLogLikelihoodLoss", op_negative_log_likelihood_loss, 12, {12, 13, 22}},
    {"Not", op_not, 1, {1}},
    {"OneHot", op_one_hot, 9, {9, 11}},
    {"Or", op_or, 1, {1, 7}},
    {"Pad", op_pad, 1, {1, 2, 11, 13, 18, 19, 21, 23, 24, 25}},
    {"Pow", op_pow, 1, {1, 7, 12, 13, 15}},
    {"PRelu", op_prelu, 1, {1, 6, 7, 9, 16}},
    {"Range", op_range, 11, {11, 27}},
    {"Reciprocal", op_reciprocal, 1, {1, 6, 13}},
    {"ReduceL1", op_reduce_l1, 1, {1, 11, 13, 18}},
    {"ReduceL2", op_reduce_l2, 1, {1, 11, 13, 18}},
    {"ReduceLogSum", op_reduce_log_sum, 1, {1, 11, 13, 18}},
    {"ReduceLogSumExp", op_reduce_log_sum_exp, 1, {1, 11, 13, 18}},
    {"ReduceMax", op_reduce_max, 1, {1, 11, 12, 13, 18, 20}},
    {"ReduceMean", op_reduce_mean, 1, {1, 11, 13, 18}},
    {"ReduceMin", op_reduce_min, 1, {1, 11, 12, 13, 18, 20}},
    {"ReduceProd", op_reduce_prod, 1, {1, 11, 13, 18}},
    {"ReduceSum", op_reduce_sum, 1, {1, 11, 13}},
    {"ReduceSumSquare", op_reduce_sum_square, 1, {1, 11, 13, 18}},
    {"Relu", op_relu, 1, {1, 6, 13, 14}},
    {"Reshape", op_reshape, 1, {1, 5, 13, 14, 19, 21, 23, 24, 25}},
    {"Resize", op_resize, 10, {10, 11, 13, 18, 19}},
    {"RNN", op_rnn, 7, {1, 7, 14, 22}},
    {"Round", op_round, 11, {11, 22}},
    {"ScatterND", op_scatter_nd, 11, {11, 13, 16, 18}},
    {"Selu", op_selu, 1, {1, 6, 22}},
    {"Shape", op_shape, 1, {1, 13, 15, 19, 21, 23, 24, 25}},
    {"Shrink", op_shrink, 9, {9}},
    {"Sigmoid", op_sigmoid, 1, {1, 6, 13}},
    {"Sign", op_sign, 9, {9, 13}},
    {"Sin", op_sin, 7, {7, 22}},
    {"Sinh", op_sinh, 9, {9, 22}},
    {"Size", op_size, 1, {1, 13, 19, 21, 23, 24, 25}},
    {"Slice", op_slice, 1, {1, 10, 11, 13}},
    {"Softmax", op_softmax, 1, {1, 11, 13}},
    {"SoftmaxCrossEntropyLoss", op_softmax_cross_entropy_loss, 12, {12, 13}},
    {"Softplus", op_softplus, 1, {1, 22}},
    {"Softsign", op_softsign, 1, {1, 22}},
    {"SpaceToDepth", op_space_to_depth, 1, {1, 13}},
    {"Split", op_split, 2, {1, 2, 11, 13, 18}},
    {"Sqrt", op_sqrt, 1, {1, 6, 13}},
    {"Squeeze", op_squeeze, 1, {1, 11, 13, 21, 23, 24, 25}},
    {"Sub", op_sub, 1, {1, 6, 7, 13, 14}},
    {"Sum", op_sum, 1, {1, 6, 8, 13}},
    {"Tan", op_tan, 7, {7, 22}},
    {"Tanh", op_tanh, 1, {1, 6, 13}},
    {"ThresholdedRelu", op_thresholded_relu, 10, {10, 22}},
    {"Tile", op_tile, 1, {1, 6, 13}},
    {"TopK", op_top_k, 1, {1, 10, 11, 24}},
    {"Transpose", op_transpose, 1, {1, 13, 21, 23, 24, 25}},
    {"Trilu", op_trilu, 14, {14}},
    {"Unsqueeze", op_unsqueeze, 1, {1, 11, 13, 21, 23, 24, 25}},
    {"Upsample", op_upsample, 1, {1, 7, 9, 10}},
    {"Where", op_where, 9, {9, 16}},
    {"Xor", op_xor, 1, {1, 7}},
};

static const struct op_entry *find_op(const char *name)
{
    for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
        if (strcmp(ops[k].name, name) == 0)
            return &ops[k];
    return NULL;
}

/* The version of e that opset selects: the newest up to it; 0 when e is newer. */
static int64_t version_in(const struct op_entry *e, int64_t opset)
{
    int64_t v = 0;
    for (size_t k = 0; k < sizeof(e->versions) && e->versions[k]; k++)
        if (e->versions[k] <= opset)
            v = e->versions[k];
    return v;
}

/* Sets c->version to the version of e that c->opset selects; -1 when it is none tide handles. */
static int select_version(struct ctx *c, const struct op_entry *e)
{
    c->version = version_in(e, c->opset);
    if (c->version == 0)
        return failf(c, "%s does not exist in opset %" PRId64 " (ONNX added it in opset %d)",
                     e->name, c->opset, e->versions[0]);
    if (c->version < e->first)
        return failf(c, "%s-%" PRId64 " is not supported (tide imports %s-%d and later)", e->name,
                     c->version, e->name, e->first);
    return 0;
}

/* ============================================================================
 * The model
 * ========================================================================== */

/*
 * After node n: an op that moves or picks elements without computing on them gives bool
 * outputs from a bool input (input 1 of Where with a constant condition, which selects with
 * exact 0 / 1 arithmetic; input 0 of the others).
 */
static void carry_mask(struct ctx *c, const Onnx__NodeProto *n)
{
    static const char *const moving[] = {
        "Concat",   "DepthToSpace", "Expand",    "Flatten",      "Gather", "GatherElements",
        "Identity", "Reshape",      "Slice",     "SpaceToDepth", "Split",  "Squeeze",
        "Tile",     "Transpose",    "Unsqueeze", "Where",
    };
    size_t from = strcmp(n->op_type, "Where") == 0 ? 1 : 0;
    bool moves = false;
    for (size_t k = 0; k < sizeof(moving) / sizeof(moving[0]); k++)
        moves = moves || strcmp(n->op_type, moving[k]) == 0;
    struct value *x = moves && has_input(n, from) ? lookup(c, n->input[from]) : NULL;
    if (!x || !x->mask)
        return;
    for (size_t k = 0; k < n->n_output; k++) {
        struct value *v = *n->output[k] ? lookup(c, n->output[k]) : NULL;
        if (v && !v->known)
            v->mask = true;
    }
}

/*
 * The running statistics an inference-mode BatchNormalization reads (inputs 3 and 4) are
 * PyTorch's buffers, not parameters: an initializer read as one is a constant, never trained
 * and written back as it was, wherever else the graph reads it. Done before any node is
 * imported, so that no node order makes it a Variable first.
 */
static void freeze_running_statistics(struct ctx *c, const Onnx__NodeProto *const *nodes,
                                      size_t n_nodes)
{
    int64_t v = version_in(find_op("BatchNormalization"), c->opset);
    for (size_t k = 0; k < n_nodes; k++) {
        const Onnx__NodeProto *n = nodes[k];
        if (!n->op_type || strcmp(n->op_type, "BatchNormalization") != 0 ||
            (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0) ||
            batch_norm_trains(n, v))
            continue;
        for (size_t i = 3; i < 5 && i < n->n_input; i++) {
            struct value *s = lookup(c, n->input[i]);
            if (s && s->known)
                s->trainable = false;
        }
    }
}

static bool is_frozen(const struct tide_onnx_options *o, const char *name)
{
    for (size_t k = 0; o && k < o->n_frozen; k++)
        if (o->frozen[k] && strcmp(o->frozen[k], name) == 0)
            return true;
    return false;
}

/* The dim_param of dimension k of graph input in: "" for a static one or one without a name. */
static const char *dim_name(const Onnx__ValueInfoProto *in, size_t k)
{
    if (!in || !in->type || in->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !in->type->tensor_type || !in->type->tensor_type->shape ||
        k >= in->type->tensor_type->shape->n_dim)
        return "";
    const Onnx__TensorShapeProto__Dimension *d = in->type->tensor_type->shape->dim[k];
    return d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param
               ? d->dim_param
               : "";
}

/* Whether the dynamic dimension named param is the batch: some graph input's dimension 0. */
static bool names_batch(const struct ctx *c, const char *param)
{
    for (size_t k = 0; *param && c->graph && k < c->graph->n_input; k++)
        if (strcmp(dim_name(c->graph->input[k], 0), param) == 0)
            return true;
    return false;
}

/*
 * The size of dynamic dimension k (named param, "" for none) of graph input
 * name: options' dims by name, else the batch size where it is the batch;
 * -1 after failf otherwise.
 */
static int64_t dynamic_size(struct ctx *c, const char *name, size_t k, const char *param)
{
    for (size_t i = 0; *param && c->o && i < c->o->n_dims; i++) {
        if (c->o->dims[i].name && strcmp(c->o->dims[i].name, param) == 0) {
            c->dim_used[i] = true;
            return c->o->dims[i].size;
        }
    }
    bool batch = k == 0 || names_batch(c, param);
    if (batch && c->o && c->o->batch_size > 0)
        return c->o->batch_size;
    if (batch)
        return failf(c,
                     "graph input \"%s\" has a dynamic dimension %zu (%s): tide needs static "
                     "shapes; set a batch size in the import options",
                     name, k, *param ? param : "no value");
    if (!*param)
        return failf(c,
                     "graph input \"%s\" has a dynamic dimension %zu without a name, and it is "
                     "not the batch (dimension 0): export the model with that dimension static "
                     "or named",
                     name, k);
    return failf(c,
                 "graph input \"%s\" has a dynamic dimension %zu (%s) that is not the batch: "
                 "give its size by name in the import options (tidectl and tide-bench: --dim "
                 "%s=N)",
                 name, k, param, param);
}

/* Graph input in as a Placeholder (*out); *mask: it is bool, fed as float32 0 and 1. */
static int add_input(struct ctx *c, const Onnx__ValueInfoProto *in, tide_ref *out, bool *mask)
{
    const char *name = in->name ? in->name : "";
    if (!in->type || in->type->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE ||
        !in->type->tensor_type)
        return failf(c, "graph input \"%s\" is not a tensor", name);
    const Onnx__TypeProto__Tensor *t = in->type->tensor_type;
    enum tide_data_type dt;
    bool is_bool = t->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    if (t->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT || is_bool)
        dt = TIDE_DT_FLOAT32; /* bool: a mask, fed as 0 / 1 */
    else if (t->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT32 ||
             t->elem_type == ONNX__TENSOR_PROTO__DATA_TYPE__INT64)
        dt = TIDE_DT_INT32;
    else
        return failf(c,
                     "graph input \"%s\" has element type %d; tide takes float, int32, int64 "
                     "and bool",
                     name, (int)t->elem_type);
    if (!t->shape)
        return failf(c, "graph input \"%s\" has no shape; tide needs static shapes", name);
    if (t->shape->n_dim > MAX_RANK)
        return failf(c, "graph input \"%s\" has rank %zu, more than tide's %d", name,
                     t->shape->n_dim, MAX_RANK);
    int64_t dims[MAX_RANK];
    for (size_t k = 0; k < t->shape->n_dim; k++) {
        const Onnx__TensorShapeProto__Dimension *d = t->shape->dim[k];
        if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE &&
            d->dim_value >= 0) {
            dims[k] = d->dim_value;
        } else if ((dims[k] = dynamic_size(c, name, k, dim_name(in, k))) < 0) {
            return -1;
        }
    }
    char tname[TIDE_BUILDER_MAX_NAME + 1];
    tide_name(c, name, tname);
    tide_ref r = tide_builder_placeholder(c->b, tname, dt, (int32_t)t->shape->n_dim, dims);
    if (check_builder(c, r) != 0)
        return -1;
    struct value *v = define(c, name);
    v->ref = r;
    v->has_ref = true;
    v->mask = is_bool;
    *out = r;
    *mask = is_bool;
    return 0;
}

/*
 * Every size options' dims gives must have been taken by some input's dynamic dimension
 * (a name mistyped or absent would leave the size the user meant unused); the message lists
 * the names the inputs have.
 */
static int check_dims_used(struct ctx *c)
{
    for (size_t i = 0; c->o && i < c->o->n_dims; i++) {
        if (c->dim_used[i])
            continue;
        char names[256] = "";
        size_t at = 0;
        for (size_t k = 0; k < c->graph->n_input && at < sizeof(names) - 1; k++) {
            for (size_t a = 0; a < MAX_RANK && at < sizeof(names) - 1; a++) {
                const char *p = dim_name(c->graph->input[k], a);
                char quoted[80];
                snprintf(quoted, sizeof(quoted), "\"%.60s\"", p);
                if (!*p || strstr(names, quoted))
                    continue;
                int w = snprintf(names + at, sizeof(names) - at, "%s%s", at ? ", " : "", quoted);
                at = w < 0 ? at : at + (size_t)w;
            }
        }
        return failf(c,
                     "dimension \"%s\" (size %" PRId64 ") is not a dynamic dimension of the "
                     "model's inputs (%s%s)",
                     c->o->dims[i].name ? c->o->dims[i].name : "", c->o->dims[i].size,
                     *names ? "theirs: " : "they have no named dynamic dimension", names);
    }
    return 0;
}

/* ============================================================================
 * Model-local functions (ModelProto.functions), inlined
 * ========================================================================== */

/*
 * A node whose domain and op_type name one of the model's functions (as
 * PyTorch writes with export_modules_as_functions, and older dynamo exports)
 * is replaced by the function's nodes before anything is imported: each
 * formal input and output renamed to the call's, every other value to
 * "<call>/<name>" (unique per call), attributes with a ref_attr_name taken
 * from the call's, nested calls expanded the same way. The handlers then see
 * plain nodes; a message names the inlined node as "<call>/<node>".
 */
#define INLINE_MAX_DEPTH 32
#define INLINE_MAX_NODES 1000000            /* tide_graph_limits_default's */
#define INLINE_MAX_BYTES ((size_t)64 << 20) /* of copies and names: a bomb stops early */

struct inliner {
    struct ctx *c;
    const Onnx__ModelProto *m;
    const Onnx__NodeProto **nodes; /* the expanded list */
    size_t n, cap;
    unsigned calls; /* makes each call's prefix unique */
};

/*
 * p (size bytes), remembered to be freed after the import; NULL (with a
 * message) when out of memory or past INLINE_MAX_BYTES in all.
 */
static void *own(struct ctx *c, void *p, size_t size)
{
    c->owned_bytes += size;
    if (p && c->owned_bytes > INLINE_MAX_BYTES) {
        free(p);
        failf(c, "inlining the model's functions takes more than %zu MiB", INLINE_MAX_BYTES >> 20);
        return NULL;
    }
    if (p && c->n_owned == c->cap_owned) {
        size_t cap = c->cap_owned ? c->cap_owned * 2 : 256;
        void **owned = realloc(c->owned, cap * sizeof(*owned));
        if (!owned) {
            free(p);
            p = NULL;
        } else {
            c->owned = owned;
            c->cap_owned = cap;
        }
    }
    if (!p) {
        failf(c, "out of memory inlining functions");
        return NULL;
    }
    c->owned[c->n_owned++] = p;
    return p;
}

static char *own_printf(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *own_printf(struct ctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    return own(c, n < 0 ? NULL : s, n < 0 ? 0 : (size_t)n + 1);
}

static const Onnx__FunctionProto *find_function(const Onnx__ModelProto *m, const Onnx__NodeProto *n)
{
    const char *domain = n->domain ? n->domain : "";
    for (size_t k = 0; n->op_type && k < m->n_functions; k++) {
        const Onnx__FunctionProto *f = m->functions[k];
        if (f->name && strcmp(f->name, n->op_type) == 0 &&
            strcmp(f->domain ? f->domain : "", domain) == 0)
            return f;
    }
    return NULL;
}

/* One call being expanded: the call node (already renamed) and its function. */
struct inline_call {
    const Onnx__NodeProto *call;
    const Onnx__FunctionProto *f;
    const char *prefix;
};

/* The name in the caller's scope of a function's value name. */
static const char *inline_rename(struct ctx *c, const struct inline_call *k, const char *name)
{
    if (!name || !*name)
        return "";
    for (size_t i = 0; i < k->f->n_input; i++)
        if (strcmp(k->f->input[i], name) == 0)
            return i < k->call->n_input ? k->call->input[i] : "";
    for (size_t i = 0; i < k->f->n_output; i++)
        if (strcmp(k->f->output[i], name) == 0 && i < k->call->n_output && *k->call->output[i])
            return k->call->output[i];
    return own_printf(c, "%s/%s", k->prefix, name);
}

/* Whether f carries fields this onnx.proto (1.12) does not know, such as attribute defaults. */
static bool has_unknown_fields(const Onnx__FunctionProto *f)
{
    return f->base.n_unknown_fields > 0;
}

static int inline_nodes(struct inliner *in, Onnx__NodeProto *const *nodes, size_t n_nodes,
                        const struct inline_call *k, int depth);

static int push_node(struct inliner *in, const Onnx__NodeProto *n)
{
    if (in->n == in->cap) {
        size_t cap = in->cap ? in->cap * 2 : 256;
        if (cap > INLINE_MAX_NODES)
            return failf(in->c, "inlining the model's functions makes more than %d nodes",
                         INLINE_MAX_NODES);
        const Onnx__NodeProto **nodes = realloc(in->nodes, cap * sizeof(*nodes));
        if (!nodes)
            return failf(in->c, "out of memory inlining functions");
        in->nodes = nodes;
        in->cap = cap;
    }
    in->nodes[in->n++] = n;
    return 0;
}

/* n, a node of k's function, renamed into the caller's scope; NULL on failure. */
static Onnx__NodeProto *inline_copy(struct inliner *in, const Onnx__NodeProto *n,
                                    const struct inline_call *k)
{
    struct ctx *c = in->c;
    Onnx__NodeProto *copy = own(c, malloc(sizeof(*copy)), sizeof(*copy));
    if (!copy)
        return NULL;
    *copy = *n;
    copy->name = own_printf(c, "%s/%s", k->prefix,
                            n->name && *n->name ? n->name : n->op_type ? n->op_type : "node");
    copy->input = own(c, calloc(n->n_input + 1, sizeof(char *)), (n->n_input + 1) * sizeof(char *));
    copy->output =
        own(c, calloc(n->n_output + 1, sizeof(char *)), (n->n_output + 1) * sizeof(char *));
    copy->attribute = own(c, calloc(n->n_attribute + 1, sizeof(*copy->attribute)),
                          (n->n_attribute + 1) * sizeof(*copy->attribute));
    if (!copy->name || !copy->input || !copy->output || !copy->attribute)
        return NULL;
    for (size_t i = 0; i < n->n_input; i++)
        if (!(copy->input[i] = (char *)inline_rename(c, k, n->input[i])))
            return NULL;
    for (size_t i = 0; i < n->n_output; i++)
        if (!(copy->output[i] = (char *)inline_rename(c, k, n->output[i])))
            return NULL;
    copy->n_attribute = 0;
    for (size_t a = 0; a < n->n_attribute; a++) {
        const Onnx__AttributeProto *at = n->attribute[a];
        if (!at->ref_attr_name || !*at->ref_attr_name) {
            copy->attribute[copy->n_attribute++] = (Onnx__AttributeProto *)at;
            continue;
        }
        const Onnx__AttributeProto *given = NULL;
        for (size_t j = 0; j < k->call->n_attribute; j++)
            if (k->call->attribute[j]->name &&
                strcmp(k->call->attribute[j]->name, at->ref_attr_name) == 0)
                given = k->call->attribute[j];
        if (!given) {
            /* Left out: the op's default, unless the function declares its own default,
             * which this onnx.proto cannot read. */
            if (has_unknown_fields(k->f)) {
                c->node = k->call;
                failf(c,
                      "function %s's attribute %s is not given, and its default (a field newer "
                      "than the ONNX 1.12 that tide reads) is unknown; give it in the call",
                      k->f->name, at->ref_attr_name);
                return NULL;
            }
            continue;
        }
        Onnx__AttributeProto *renamed = own(c, malloc(sizeof(*renamed)), sizeof(*renamed));
        if (!renamed)
            return NULL;
        *renamed = *given;
        renamed->name = at->name;
        renamed->ref_attr_name = NULL;
        copy->attribute[copy->n_attribute++] = renamed;
    }
    return copy;
}

/* Appends nodes (of k's function, or the graph's when k is NULL), calls expanded. */
static int inline_nodes(struct inliner *in, Onnx__NodeProto *const *nodes, size_t n_nodes,
                        const struct inline_call *k, int depth)
{
    struct ctx *c = in->c;
    for (size_t j = 0; j < n_nodes; j++) {
        const Onnx__NodeProto *n = k ? inline_copy(in, nodes[j], k) : nodes[j];
        if (!n)
            return -1;
        const Onnx__FunctionProto *f = find_function(in->m, n);
        if (!f) {
            if (push_node(in, n) != 0)
                return -1;
            continue;
        }
        c->node = n;
        if (depth == INLINE_MAX_DEPTH)
            return failf(c, "function %s calls functions %d deep (a recursion?)", f->name,
                         INLINE_MAX_DEPTH);
        if (n->n_input > f->n_input || n->n_output > f->n_output)
            return failf(c, "%zu inputs and %zu outputs; function %s takes %zu and gives %zu",
                         n->n_input, n->n_output, f->name, f->n_input, f->n_output);
        for (size_t i = 0; i < f->n_opset_import; i++) {
            const Onnx__OperatorSetIdProto *op = f->opset_import[i];
            if ((!op->domain || !*op->domain || strcmp(op->domain, "ai.onnx") == 0) &&
                op->version != c->opset)
                return failf(c,
                             "function %s imports opset %" PRId64 " of the default domain, the "
                             "model %" PRId64 "; tide imports a model at one opset",
                             f->name, op->version, c->opset);
        }
        struct inline_call call = {
            .call = n,
            .f = f,
            .prefix = own_printf(c, "%s#%u", n->name && *n->name ? n->name : f->name, in->calls++),
        };
        if (!call.prefix || inline_nodes(in, f->node, f->n_node, &call, depth + 1) != 0)
            return -1;
        c->node = NULL;
    }
    return 0;
}

/* The graph's nodes with the model's functions inlined, into *nodes (owned by c) and *n. */
static int inline_functions(struct ctx *c, const Onnx__ModelProto *m,
                            const Onnx__NodeProto *const **nodes, size_t *n)
{
    const Onnx__GraphProto *g = m->graph;
    if (m->n_functions == 0) {
        *nodes = (const Onnx__NodeProto *const *)g->node;
        *n = g->n_node;
        return 0;
    }
    struct inliner in = {.c = c, .m = m};
    int rc = inline_nodes(&in, g->node, g->n_node, NULL, 0);
    c->node = NULL;
    if ((in.nodes && !own(c, in.nodes, in.cap * sizeof(*in.nodes))) || rc != 0)
        return -1;
    *nodes = in.nodes;
    *n = in.n;
    return 0;
}

static int import_model(struct ctx *c, const Onnx__ModelProto *m, struct tide_onnx_result *res)
{
    c->opset = -1;
    for (size_t k = 0; k < m->n_opset_import; k++) {
        const Onnx__OperatorSetIdProto *op = m->opset_import[k];
        if (!op->domain || !*op->domain || strcmp(op->domain, "ai.onnx") == 0)
            c->opset = op->has_version ? op->version : 0;
    }
    if (c->opset < 0)
        return failf(c, "the model imports no opset of the default ONNX domain");
    if (c->opset < OPSET_MIN || c->opset > OPSET_MAX)
        return failf(c, "opset %" PRId64 " is not supported (tide imports opsets %d to %d)",
                     c->opset, OPSET_MIN, OPSET_MAX);
    const Onnx__GraphProto *g = m->graph;
    if (!g)
        return failf(c, "the model has no graph");
    const Onnx__NodeProto *const *nodes;
    size_t n_nodes;
    if (inline_functions(c, m, &nodes, &n_nodes) != 0)
        return -1;
    size_t want = 64 + 2 * (g->n_initializer + g->n_input);
    for (size_t k = 0; k < n_nodes; k++)
        want += 2 * nodes[k]->n_output;
    c->cap = 64;
    while (c->cap < want)
        c->cap *= 2;
    c->values = calloc(c->cap, sizeof(struct value));
    if (!c->values)
        return failf(c, "out of memory");

    /* Initializers first: a graph input with an initializer's name is that initializer. */
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        if (!t->name || !*t->name)
            return failf(c, "initializer %zu has no name", k);
        char what[300];
        snprintf(what, sizeof(what), "initializer \"%.200s\"", t->name);
        struct value *v = define(c, t->name);
        v->known = true;
        if (read_tensor(c, t, v, what) != 0)
            return -1;
        v->trainable = v->type == CONST_FLOAT && !is_frozen(c->o, t->name);
    }
    freeze_running_statistics(c, nodes, n_nodes);
    /* PyTorch trains a float64 parameter in float64: a float32 Variable would take other steps
     * (and be written back as float32). A frozen one is a constant, narrowed as the others. */
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE && lookup(c, t->name)->trainable)
            return failf(c,
                         "initializer \"%.200s\" is float64: tide trains float32 weights only "
                         "(export the model in float32, or list it as frozen to use it as a "
                         "float32 constant)",
                         t->name);
    }
    res->inputs = calloc(g->n_input ? g->n_input : 1, sizeof(tide_ref));
    res->outputs = calloc(g->n_output ? g->n_output : 1, sizeof(tide_ref));
    res->input_bool = calloc(g->n_input ? g->n_input : 1, sizeof(bool));
    res->output_bool = calloc(g->n_output ? g->n_output : 1, sizeof(bool));
    if (!res->inputs || !res->outputs || !res->input_bool || !res->output_bool)
        return failf(c, "out of memory");
    c->graph = g;
    for (size_t k = 0; k < g->n_input; k++) {
        if (g->input[k]->name && lookup(c, g->input[k]->name))
            continue;
        if (add_input(c, g->input[k], &res->inputs[res->n_inputs],
                      &res->input_bool[res->n_inputs]) != 0)
            return -1;
        res->n_inputs++;
    }
    if (check_dims_used(c) != 0)
        return -1;
    if (tide_builder_push_scope(c->b, "onnx") != 0)
        return failf(c, "%s", tide_builder_error(c->b));
    c->scoped = true;
    int rc = 0;
    c->nodes = nodes, c->n_nodes = n_nodes;
    for (size_t k = 0; k < n_nodes && rc == 0; k++) {
        const Onnx__NodeProto *n = nodes[k];
        c->node = n, c->at = k;
        const struct op_entry *e = find_op(n->op_type ? n->op_type : "");
        if (n->domain && *n->domain && strcmp(n->domain, "ai.onnx") != 0)
            rc = failf(c, "domain \"%s\" is not supported", n->domain);
        else if (!e)
            rc = failf(c, "op %s is not supported", n->op_type ? n->op_type : "(none)");
        else if (select_version(c, e) != 0)
            rc = -1;
        else if (n->n_output == 0)
            rc = failf(c, "no outputs");
        else if (check_output_names(c, n) == 0 && (rc = e->fn(c)) == 0)
            carry_mask(c, n);
        else
            rc = -1;
    }
    if (rc != 0) {
        tide_builder_pop_scope(c->b);
        return -1;
    }
    c->node = NULL;
    tide_builder_pop_scope(c->b);
    c->scoped = false;
    for (size_t k = 0; k < g->n_output; k++) {
        const char *name = g->output[k]->name ? g->output[k]->name : "";
        struct value *v = lookup(c, name);
        if (!v)
            return failf(c, "graph output \"%s\" is produced by no node, initializer or input",
                         name);
        if (v->missing)
            return failf(c, "graph output \"%s\" %s", name, v->missing);
        if (materialize(c, v) != 0)
            return -1;
        char tname[TIDE_BUILDER_MAX_NAME + 1];
        tide_name(c, name, tname);
        tide_ref r = tide_builder_identity(c->b, tname, v->ref);
        if (check_builder(c, r) != 0)
            return -1;
        res->output_bool[res->n_outputs] = v->mask;
        res->outputs[res->n_outputs++] = r;
    }
    res->opset = c->opset;
    return 0;
}

int tide_onnx_import(tide_builder *b, const uint8_t *bytes, size_t len,
                     const struct tide_onnx_options *options, struct tide_onnx_result *result,
                     char *err, size_t err_size)
{
    struct tide_onnx_result local;
    struct tide_onnx_result *res = result ? result : &local;
    memset(res, 0, sizeof(*res));
    struct ctx c = {.b = b, .o = options, .err = err, .err_size = err_size, .res = res};
    if (err && err_size)
        err[0] = 0;
    if (!b)
        return failf(&c, "the builder is NULL");
    if (!bytes && len)
        return failf(&c, "the bytes are NULL");
    if (tide_builder_error(b))
        return failf(&c, "the builder already holds an error: %s", tide_builder_error(b));
    for (size_t i = 0; options && i < options->n_dims; i++) {
        const struct tide_onnx_dim *d = &options->dims[i];
        if (!d->name || !*d->name || d->size < 1 || d->size > INT32_MAX)
            return failf(&c, "dimension %zu of the options (\"%s\", size %" PRId64 "): %s", i,
                         d->name ? d->name : "", d->size,
                         !d->name || !*d->name ? "it has no name"
                                               : "a size must be 1 to 2147483647");
    }
    bool one = false; /* dim_used's storage when there are no dims */
    c.dim_used = options && options->n_dims ? calloc(options->n_dims, sizeof(bool)) : &one;
    if (!c.dim_used)
        return failf(&c, "out of memory");
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
    if (!m) {
        if (c.dim_used != &one)
            free(c.dim_used);
        return failf(&c,
                     "not an ONNX model: %zu bytes that do not parse as an onnx.ModelProto "
                     "(truncated, or another format)",
                     len);
    }
    int rc = 0;
    if (!m->graph || (!m->has_ir_version && m->n_opset_import == 0))
        rc = failf(&c, "not an ONNX model: the message has no graph or no ir_version and opset");
    else
        rc = import_model(&c, m, res);
    if (c.values) {
        for (size_t k = 0; k < c.cap; k++) {
            free(c.values[k].f);
            free(c.values[k].i);
        }
        free(c.values);
    }
    for (size_t k = 0; k < c.n_owned; k++)
        free(c.owned[k]);
    free(c.owned);
    onnx__model_proto__free_unpacked(m, NULL);
    if (c.dim_used != &one)
        free(c.dim_used);
    if (rc != 0 || result == NULL)
        tide_onnx_result_free(res);
    return rc;
}

void tide_onnx_result_free(struct tide_onnx_result *result)
{
    if (!result)
        return;
    free(result->inputs);
    free(result->outputs);
    free(result->input_bool);
    free(result->output_bool);
    for (int32_t k = 0; k < result->n_variables; k++) {
        free(result->variables[k].onnx_name);
        free(result->variables[k].name);
    }
    free(result->variables);
    memset(result, 0, sizeof(*result));
}
