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
