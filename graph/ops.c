/* SPDX-License-Identifier: MIT */
/* ops.c: the op table, its attribute schemas and lookups, generated from ops.def. */
#include "graph/graph-impl.h"

#include <string.h>

#define TIDE__DEFAULT_INT(D) .default_int = (int64_t)(D)
#define TIDE__DEFAULT_BOOL(D) .default_int = (int64_t)(D)
#define TIDE__DEFAULT_DTYPE(D) .default_int = (int64_t)(D)
#define TIDE__DEFAULT_FLOAT(D) .default_float = (D)
#define TIDE__DEFAULT_STRING(D) .default_string = (D)
#define TIDE__DEFAULT_SHAPE(D) .default_int = (D)
#define TIDE__DEFAULT_TENSOR(D) .default_int = (D)
#define TIDE__DEFAULT_INTS(D) .default_int = (D)
#define TIDE__DEFAULT_FLOATS(D) .default_int = (D)

#define TIDE__ATTR_SPEC(OP, NAME, TYPE, REQUIRED, DEFAULT) \
    {.name = #NAME, .type = TIDE_ATTR_TYPE_##TYPE, .required = (REQUIRED), TIDE__DEFAULT_##TYPE(DEFAULT)},

/* One schema array per op; a dummy entry keeps empty arrays legal C. */
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS) \
    static const struct tide_attr_spec attrs_##ID[] = {TIDE_ATTRS_##ID(TIDE__ATTR_SPEC){0}};
#include "graph/ops.def"
#undef TIDE_OP

static const struct tide_op_info op_table[TIDE_OP_COUNT] = {
#define TIDE_OP(ID, NAME, MIN_IN, MAX_IN, N_OUT, DTYPE, INFER, GRAD, FLAGS) \
    [TIDE_OP_##ID] = {.name = NAME,                                        \
                      .min_inputs = MIN_IN,                                \
                      .max_inputs = MAX_IN,                                \
                      .n_outputs = N_OUT,                                  \
                      .dtype_rule = TIDE_DTYPE_RULE_##DTYPE,               \
                      .flags = (FLAGS),                                    \
                      .n_attrs = TIDE_ATTR_##ID##__COUNT,                  \
                      .attrs = attrs_##ID,                                 \
                      .infer = tide__infer_##INFER},
#include "graph/ops.def"
#undef TIDE_OP
};

const struct tide_op_info *tide_op_info(enum tide_op op)
{
    return &op_table[op];
}

enum tide_status tide_op_lookup(const char *name, enum tide_op *op)
{
    for (int i = 0; i < TIDE_OP_COUNT; i++) {
        if (strcmp(op_table[i].name, name) == 0) {
            *op = (enum tide_op)i;
            return TIDE_OK;
        }
    }
    return TIDE_NOT_FOUND;
}

int tide_op_attr_index(enum tide_op op, const char *name)
{
    const struct tide_op_info *info = &op_table[op];
    for (uint32_t i = 0; i < info->n_attrs; i++) {
        if (strcmp(info->attrs[i].name, name) == 0)
            return (int)i;
    }
    return -1;
}

const char *tide_attr_type_name(enum tide_attr_type type)
{
    static const char *const names[] = {"int",   "float",  "bool", "string", "dtype",
                                        "shape", "tensor", "ints", "floats"};
    return (unsigned)type < sizeof(names) / sizeof(names[0]) ? names[type] : "unknown";
}

/* ============================================================================
 * Math
 * ========================================================================== */

static const char *const math_names[] = {"fp32", "tf32"};

enum tide_status tide_math_parse(const char *name, enum tide_math *out, struct tide_error *err)
{
    for (size_t i = 0; name && i < sizeof(math_names) / sizeof(math_names[0]); i++) {
        if (strcmp(name, math_names[i]) == 0) {
            *out = (enum tide_math)i;
            return TIDE_OK;
        }
    }
    return tide_error_set(err, TIDE_INVALID, "math \"%.64s\": wants fp32 or tf32",
                          name ? name : "(none)");
}

const char *tide_math_name(enum tide_math math)
{
    return (unsigned)math < sizeof(math_names) / sizeof(math_names[0]) ? math_names[math] : "?";
}

int tide_op_math_attr(enum tide_op op)
{
    switch (op) {
    case TIDE_OP_CONV2D:
        return TIDE_ATTR_CONV2D_math;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        return TIDE_ATTR_CONV2D_BACKPROP_INPUT_math;
    case TIDE_OP_CONV2D_BACKPROP_FILTER:
        return TIDE_ATTR_CONV2D_BACKPROP_FILTER_math;
    case TIDE_OP_MATMUL:
        return TIDE_ATTR_MATMUL_math;
    case TIDE_OP_BATCH_MATMUL:
        return TIDE_ATTR_BATCH_MATMUL_math;
    default:
        return -1;
    }
}

enum tide_math tide_node_math(const struct tide_node *node)
{
    int k = tide_op_math_attr(node->op);
    const char *s = k >= 0 ? node->attrs[k].s : NULL;
    return s && strcmp(s, "tf32") == 0 ? TIDE_MATH_TF32 : TIDE_MATH_FP32;
}
