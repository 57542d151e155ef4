/* SPDX-License-Identifier: MIT */
/*
 * init.c: tide_variable_init, the initial values of Variables.
 *
 * Random initialisers use a counter-based generator: element i's random bits
 * are splitmix64(key + c * golden) for a counter c derived from i, where key
 * mixes the job seed, the node's seed attribute and a hash of the node's
 * name. So a value depends only on (job seed, seed attribute, name, index):
 * not on the order in which Variables are initialised, the thread that does
 * it, or whether the tensor is filled in one piece or several. Two Variables
 * with the same seed attribute still differ, because their names do.
 *
 * Uniform floats take the top 24 bits of a draw (all a float's mantissa
 * holds), giving k / 2^24 in [0, 1). Normal values use Box-Muller on two
 * draws of their own (counters 2i and 2i + 1), so every element is
 * independent of its neighbours and of the tensor's size.
 */
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

#define GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

/* The splitmix64 finaliser: a bijective mix of 64 bits. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 64-bit FNV-1a of a string. */
static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; s && *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001B3ull;
    }
    return h;
}

/* The generator's key for one Variable; each ingredient is mixed in turn so that none cancels. */
static uint64_t init_key(uint64_t job_seed, int64_t seed_attr, const char *name)
{
    uint64_t key = mix64(job_seed + GOLDEN_GAMMA);
    key = mix64(key ^ (uint64_t)seed_attr);
    return mix64(key ^ fnv1a64(name));
}

/* Draw number c of the stream key. */
static uint64_t draw(uint64_t key, uint64_t c)
{
    return mix64(key + (c + 1) * GOLDEN_GAMMA);
}

/* k / 2^24 from the top 24 bits of a draw: [0, 1). */
static double uniform01(uint64_t bits)
{
    return (double)(bits >> 40) * (1.0 / 16777216.0);
}

/* Standard normal value i by Box-Muller from draws 2i and 2i + 1. */
static double normal_at(uint64_t key, uint64_t i)
{
    double u1 = ((double)(draw(key, 2 * i) >> 40) + 1.0) * (1.0 / 16777216.0); /* (0, 1] */
    double u2 = uniform01(draw(key, 2 * i + 1));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* fan_in and fan_out as kernels.h documents them; ranks 3 and 5+ read [out, in, spatial...]. */
static void fans(const struct tide_shape *shape, double *fan_in, double *fan_out)
{
    if (shape->rank == 0) {
        *fan_in = *fan_out = 1;
    } else if (shape->rank == 1) {
        *fan_in = *fan_out = (double)shape->dims[0];
    } else if (shape->rank == 2) {
        *fan_in = (double)shape->dims[0];
        *fan_out = (double)shape->dims[1];
    } else {
        double field = 1;
        for (int32_t d = 2; d < shape->rank; d++)
            field *= (double)shape->dims[d];
        *fan_in = (double)shape->dims[1] * field;
        *fan_out = (double)shape->dims[0] * field;
    }
}

enum tide_status tide_variable_init(const struct tide_node *node, uint64_t job_seed, void *dst,
                                    struct tide_error *err)
{
    if (node->op != TIDE_OP_VARIABLE)
        return tide_node_error(err, TIDE_INVALID, node, "is not a Variable");
    const struct tide_attr_value *attrs = node->attrs;
    const struct tide_shape *shape = &attrs[TIDE_ATTR_VARIABLE_shape].shape;
    enum tide_dtype dtype = attrs[TIDE_ATTR_VARIABLE_dtype].dtype;
    const char *init = attrs[TIDE_ATTR_VARIABLE_init].s;
    if (!init)
        init = tide_op_info(TIDE_OP_VARIABLE)->attrs[TIDE_ATTR_VARIABLE_init].default_string;
    const double scale = attrs[TIDE_ATTR_VARIABLE_scale].f;
    int64_t n = tide_shape_numel(shape);
    size_t esize = tide_dtype_size(dtype);
    if (n < 0 || esize == 0)
        return tide_node_error(err, TIDE_INVALID, node, "has an invalid shape or dtype");

    if (strcmp(init, "value") == 0) {
        const struct tide_const_tensor *t = attrs[TIDE_ATTR_VARIABLE_value].tensor;
        if (!t || t->dtype != dtype || t->nbytes != (uint64_t)n * esize)
            return tide_node_error(err, TIDE_INVALID, node,
                                   "init \"value\" needs a value tensor of the variable's dtype "
                                   "and size");
        if (t->nbytes > 0)
            memcpy(dst, t->data, t->nbytes);
        return TIDE_OK;
    }
    if (dtype != TIDE_DTYPE_FLOAT32)
        return tide_node_error(err, TIDE_INVALID, node,
                               "init \"%s\" wants a float32 variable, not %s", init,
                               tide_dtype_name(dtype));

    float *out = dst;
    uint64_t key = init_key(job_seed, attrs[TIDE_ATTR_VARIABLE_seed].i, node->name);
    double fan_in, fan_out;
    fans(shape, &fan_in, &fan_out);
    if (strcmp(init, "zeros") == 0 || strcmp(init, "ones") == 0 || strcmp(init, "constant") == 0) {
        float v = init[0] == 'z' ? 0.0f : init[0] == 'o' ? 1.0f : (float)scale;
        for (int64_t i = 0; i < n; i++)
            out[i] = v;
    } else if (strcmp(init, "uniform") == 0 || strcmp(init, "glorot_uniform") == 0) {
        double limit = init[0] == 'u' ? scale : scale * sqrt(6.0 / (fan_in + fan_out));
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)((2.0 * uniform01(draw(key, (uint64_t)i)) - 1.0) * limit);
    } else if (strcmp(init, "normal") == 0 || strcmp(init, "he_normal") == 0) {
        double stddev = init[0] == 'n' ? scale : scale * sqrt(2.0 / fan_in);
        for (int64_t i = 0; i < n; i++)
            out[i] = (float)(normal_at(key, (uint64_t)i) * stddev);
    } else {
        return tide_node_error(err, TIDE_INVALID, node,
                               "attribute \"init\" is \"%.64s\", wants one of zeros, ones, "
                               "constant, normal, uniform, glorot_uniform, he_normal, value",
                               init);
    }
    return TIDE_OK;
}
