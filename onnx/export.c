/* SPDX-License-Identifier: MIT */
/*
 * onnx/export.c: an ONNX model written back with trained weights (the API
 * is tide/onnx.h, tide_onnx_with_values).
 *
 * The user's own file is the template: it is unpacked with protobuf-c's
 * generated code, the float initializers that became Variables get the
 * job's values, and the message is packed again, so every node, attribute,
 * opset, name and metadata entry stays as the exporter wrote it and the
 * result loads in the framework the model came from. Which initializer is
 * which Variable is decided by importing the model once more (with the same
 * frozen list), so the mapping follows the importer's naming rules, sanitised
 * names and suffixes included, instead of a second copy of them.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx.pb-c.h"
#include "tide/client.h"
#include "tide/onnx.h"

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t size, const char *fmt, ...)
{
    if (err && size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, size, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const struct tide_tensor *find_value(const struct tide_tensor *values, size_t n,
                                            const char *name)
{
    for (size_t k = 0; k < n; k++)
        if (values[k].name && strcmp(values[k].name, name) == 0)
            return &values[k];
    return NULL;
}

/* The initializer's new contents: the value's float32 bytes, little-endian as tide's are. */
static int check_value(const Onnx__TensorProto *t, const struct tide_tensor *v, char *err,
                       size_t size)
{
    if (v->dtype != TIDE_DT_FLOAT32)
        return fail(err, size, "the value of \"%s\" is not float32", v->name);
    bool same = v->rank == (int32_t)t->n_dims;
    uint64_t count = 1;
    for (size_t k = 0; k < t->n_dims; k++) {
        same = same && v->dims[k] == t->dims[k];
        count *= (uint64_t)t->dims[k];
    }
    if (!same || v->bytes != count * sizeof(float))
        return fail(err, size,
                    "the value of \"%s\" (%zu bytes, rank %d) does not have the shape of "
                    "initializer \"%s\" (%" PRIu64 " floats, rank %zu)",
                    v->name, v->bytes, (int)v->rank, t->name, count, t->n_dims);
    return 0;
}

int tide_onnx_with_values(const uint8_t *bytes, size_t len, const char *const *frozen,
                          size_t n_frozen, const struct tide_tensor *values, size_t n_values,
                          uint8_t **out, size_t *out_len, size_t *replaced, char *err,
                          size_t err_size)
{
    *out = NULL;
    *out_len = 0;
    if (replaced)
        *replaced = 0;
    if (err && err_size)
        err[0] = 0;
    /* The importer says which initializers are Variables, and under which names. */
    tide_builder *b = tide_builder_new();
    if (!b)
        return fail(err, err_size, "out of memory");
    struct tide_onnx_options io = {.frozen = frozen, .n_frozen = n_frozen};
    struct tide_onnx_result r;
    int rc = tide_onnx_import(b, bytes, len, &io, &r, err, err_size);
    tide_builder_free(b);
    if (rc != 0)
        return -1;
    Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, bytes);
    if (!m || !m->graph) {
        tide_onnx_result_free(&r);
        if (m)
            onnx__model_proto__free_unpacked(m, NULL);
        return fail(err, err_size, "the model does not unpack a second time");
    }
    Onnx__GraphProto *g = m->graph;
    /* What each replaced initializer held, put back before the message is freed. */
    struct saved {
        Onnx__TensorProto *t;
        ProtobufCBinaryData raw;
        protobuf_c_boolean has_raw;
        size_t n_float;
        float *floats;
    } *saved = calloc((size_t)r.n_variables + 1, sizeof(*saved));
    size_t n_saved = 0;
    rc = saved ? 0 : fail(err, err_size, "out of memory");
    for (int32_t k = 0; rc == 0 && k < r.n_variables; k++) {
        const struct tide_onnx_variable *var = &r.variables[k];
        Onnx__TensorProto *t = NULL;
        for (size_t i = 0; i < g->n_initializer && !t; i++)
            if (g->initializer[i]->name && strcmp(g->initializer[i]->name, var->onnx_name) == 0)
                t = g->initializer[i];
        const struct tide_tensor *v = find_value(values, n_values, var->name);
        if (!t) {
            rc = fail(err, err_size, "initializer \"%s\" is not in the model", var->onnx_name);
        } else if (!v) {
            rc = fail(err, err_size,
                      "no value for Variable \"%s\" (initializer \"%s\"): is this the model the "
                      "job was trained from?",
                      var->name, var->onnx_name);
        } else if (check_value(t, v, err, err_size) != 0) {
            rc = -1;
        } else {
            saved[n_saved++] =
                (struct saved){t, t->raw_data, t->has_raw_data, t->n_float_data, t->float_data};
            /* The bytes are only read by pack: they can point at the caller's. */
            t->raw_data.data = (uint8_t *)(uintptr_t)v->data;
            t->raw_data.len = v->bytes;
            t->has_raw_data = true;
            t->n_float_data = 0;
            t->float_data = NULL;
            t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
            t->has_data_type = true;
        }
    }
    if (rc == 0) {
        size_t size = onnx__model_proto__get_packed_size(m);
        *out = malloc(size ? size : 1);
        if (!*out) {
            rc = fail(err, err_size, "out of memory for %zu bytes", size);
        } else {
            *out_len = onnx__model_proto__pack(m, *out);
            if (replaced)
                *replaced = n_saved;
        }
    }
    for (size_t k = 0; k < n_saved; k++) {
        saved[k].t->raw_data = saved[k].raw;
        saved[k].t->has_raw_data = saved[k].has_raw;
        saved[k].t->n_float_data = saved[k].n_float;
        saved[k].t->float_data = saved[k].floats;
    }
    free(saved);
    onnx__model_proto__free_unpacked(m, NULL);
    tide_onnx_result_free(&r);
    return rc;
}
