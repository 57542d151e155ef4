/* SPDX-License-Identifier: MIT */
/*
 * dropout.c: CPU kernels for Dropout and DropoutGrad.
 *
 * In a training step (*args->training), element i is kept and scaled by
 * 1 / (1 - rate), or dropped (0), by the mask of kernels/dropout-hash.h,
 * keyed by the job's seed, the step and the Dropout node's name and seed
 * attribute; DropoutGrad regenerates the mask of the node its forward
 * attribute names, so it needs no saved mask. A dropped element is 0 even
 * where x is not finite. In an evaluation step both are the identity.
 *
 * The elements are a range job (tide__cpu_parallel_for); each decides its
 * own fate from its index alone, so the thread count never changes a bit.
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/dropout-hash.h"

#include <string.h>

/* What the pieces of a Dropout or DropoutGrad range job share. */
struct dropout_job {
    const float *x;
    float *y;
    uint64_t key;
    uint32_t threshold;
    float scale;
};

static void dropout_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct dropout_job *job = ctx;
    for (int64_t i = begin; i < end; i++)
        job->y[i] = tide__dropout_keep(job->key, (uint64_t)i, job->threshold)
                        ? job->x[i] * job->scale
                        : 0.0f;
}

/*
 * y = x * mask / (1 - rate) for the Dropout node whose name and seed are
 * given (the node itself, or the one DropoutGrad names).
 */
static enum tide_status dropout(const struct tide_kernel_args *args, const char *name, int64_t seed,
                                double rate, struct tide_error *err)
{
    tide__kernel_same_size(args, 0);
    int64_t n = tide__cpu_numel(&args->outputs[0]);
    if (!args->training || !*args->training) {
        if (n > 0 && args->outputs[0].data != args->inputs[0].data)
            memcpy(args->outputs[0].data, args->inputs[0].data, (size_t)n * sizeof(float));
        return TIDE_OK;
    }
    if (!args->step)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "needs the executor's step counter in a training step, got none");
    struct dropout_job job = {
        .x = tide__cpu_in(args, 0),
        .y = tide__cpu_out(args, 0),
        .key = tide__dropout_step_key(args->seed, *args->step, tide__dropout_node_key(name, seed)),
        .threshold = tide__dropout_threshold(rate),
        .scale = (float)(1.0 / (1.0 - rate)),
    };
    tide__cpu_parallel_for(n, TIDE__CPU_GRAIN, dropout_range, &job);
    return TIDE_OK;
}

/* Dropout(x; rate, seed) -> y. */
enum tide_status tide__cpu_DROPOUT(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_attr_value *attrs = args->node->attrs;
    return dropout(args, args->node->name, attrs[TIDE_ATTR_DROPOUT_seed].i,
                   attrs[TIDE_ATTR_DROPOUT_rate].f, err);
}

/* DropoutGrad(dy; rate, seed, forward) -> dx = dy * mask / (1 - rate), forward's mask. */
enum tide_status tide__cpu_DROPOUT_GRAD(const struct tide_kernel_args *args, struct tide_error *err)
{
    const struct tide_attr_value *attrs = args->node->attrs;
    return dropout(args, attrs[TIDE_ATTR_DROPOUT_GRAD_forward].s,
                   attrs[TIDE_ATTR_DROPOUT_GRAD_seed].i, attrs[TIDE_ATTR_DROPOUT_GRAD_rate].f, err);
}
