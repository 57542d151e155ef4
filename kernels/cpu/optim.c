/* SPDX-License-Identifier: MIT */
/*
 * optim.c: CPU kernels for the optimizer updates ApplySGD, ApplyMomentum and
 * ApplyAdam. They have no outputs: they write the variable (input 0) and
 * their state (accum; m and v) in place, which infer guarantees are distinct
 * Variables of the gradient's shape.
 *
 * The IR holds hyper-parameters as double; each is rounded to float once at
 * the top of the kernel, and Adam's bias corrections, which depend on the
 * step, are computed in double and then rounded, so the update is the same
 * float arithmetic on every element and every run. Elements are independent:
 * each update is a range job over them (tide__cpu_parallel_for).
 */
#include "kernels/cpu/cpu-impl.h"

#include <inttypes.h>
#include <math.h>

/* Elements [begin, end) of ApplySGD; ctx is the kernel's args. */
static void sgd_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    const float lr = (float)args->node->attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f;
    float *var = args->inputs[0].data;
    const float *grad = tide__cpu_in(args, 1);
    for (int64_t i = begin; i < end; i++)
        var[i] -= lr * grad[i];
}

/* var -= lr * grad. */
enum tide_status tide__cpu_APPLY_SGD(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_like_variable(args);
    tide__cpu_parallel_for(tide__cpu_numel(&args->inputs[0]), TIDE__CPU_GRAIN, sgd_range, args);
    return TIDE_OK;
}

/* Elements [begin, end) of ApplyMomentum; ctx is the kernel's args. */
static void momentum_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct tide_kernel_args *args = ctx;
    const struct tide_attr_value *attrs = args->node->attrs;
    const float lr = (float)attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f;
    const float momentum = (float)attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f;
    const bool nesterov = attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b;
    float *var = args->inputs[0].data, *accum = args->inputs[1].data;
    const float *grad = tide__cpu_in(args, 2);
    if (nesterov) {
        for (int64_t i = begin; i < end; i++) {
            float a = momentum * accum[i] + grad[i];
            accum[i] = a;
            var[i] -= lr * (grad[i] + momentum * a);
        }
    } else {
        for (int64_t i = begin; i < end; i++) {
            float a = momentum * accum[i] + grad[i];
            accum[i] = a;
            var[i] -= lr * a;
        }
    }
}

/* accum = momentum * accum + grad; var -= lr * (nesterov ? grad + momentum * accum : accum). */
enum tide_status tide__cpu_APPLY_MOMENTUM(const struct tide_kernel_args *args,
                                          struct tide_error *err)
{
    tide__kernel_like_variable(args);
    tide__cpu_parallel_for(tide__cpu_numel(&args->inputs[0]), TIDE__CPU_GRAIN, momentum_range,
                           args);
    return TIDE_OK;
}

/* ApplyAdam's hyper-parameters, rounded to float once, shared by the pieces of its range job. */
struct adam_job {
    const struct tide_kernel_args *args;
    float lr, eps, beta1, beta2, one_minus_b1, one_minus_b2, inv_correction1, inv_correction2;
};

static void adam_range(const void *ctx, int64_t begin, int64_t end)
{
    const struct adam_job *job = ctx;
    const struct tide_kernel_args *args = job->args;
    const float lr = job->lr, eps = job->eps, beta1 = job->beta1, beta2 = job->beta2;
    const float one_minus_b1 = job->one_minus_b1, one_minus_b2 = job->one_minus_b2;
    const float inv_correction1 = job->inv_correction1, inv_correction2 = job->inv_correction2;
    float *var = args->inputs[0].data, *m = args->inputs[1].data, *v = args->inputs[2].data;
    const float *grad = tide__cpu_in(args, 3);
    for (int64_t i = begin; i < end; i++) {
        float g = grad[i];
        float mi = beta1 * m[i] + one_minus_b1 * g;
        float vi = beta2 * v[i] + one_minus_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        var[i] -= lr * (mi * inv_correction1) / (sqrtf(vi * inv_correction2) + eps);
    }
}

/*
 * With t = *args->step (1-based):
 *   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2;
 *   var -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
 */
enum tide_status tide__cpu_APPLY_ADAM(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_like_variable(args);
    if (!args->step || *args->step == 0)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "needs the executor's 1-based step counter, got %s",
                               args->step ? "step 0" : "none");
    const struct tide_attr_value *attrs = args->node->attrs;
    const double b1 = attrs[TIDE_ATTR_APPLY_ADAM_beta1].f, b2 = attrs[TIDE_ATTR_APPLY_ADAM_beta2].f;
    const double t = (double)*args->step;
    struct adam_job job = {
        .args = args,
        .lr = (float)attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f,
        .eps = (float)attrs[TIDE_ATTR_APPLY_ADAM_epsilon].f,
        .beta1 = (float)b1,
        .beta2 = (float)b2,
        .one_minus_b1 = (float)(1.0 - b1),
        .one_minus_b2 = (float)(1.0 - b2),
        .inv_correction1 = (float)(1.0 / (1.0 - pow(b1, t))),
        .inv_correction2 = (float)(1.0 / (1.0 - pow(b2, t))),
    };
    tide__cpu_parallel_for(tide__cpu_numel(&args->inputs[0]), TIDE__CPU_GRAIN, adam_range, &job);
    return TIDE_OK;
}
