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
 * float arithmetic on every element and every run.
 */
#include "kernels/cpu/cpu-impl.h"

#include <inttypes.h>
#include <math.h>

/* var -= lr * grad. */
enum tide_status tide__cpu_APPLY_SGD(const struct tide_kernel_args *args, struct tide_error *err)
{
    tide__kernel_like_variable(args);
    const float lr = (float)args->node->attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f;
    float *var = args->inputs[0].data;
    const float *grad = tide__cpu_in(args, 1);
    int64_t n = tide__cpu_numel(&args->inputs[0]);
    for (int64_t i = 0; i < n; i++)
        var[i] -= lr * grad[i];
    return TIDE_OK;
}

/* accum = momentum * accum + grad; var -= lr * (nesterov ? grad + momentum * accum : accum). */
enum tide_status tide__cpu_APPLY_MOMENTUM(const struct tide_kernel_args *args,
                                          struct tide_error *err)
{
    tide__kernel_like_variable(args);
    const struct tide_attr_value *attrs = args->node->attrs;
    const float lr = (float)attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f;
    const float momentum = (float)attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f;
    const bool nesterov = attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b;
    float *var = args->inputs[0].data, *accum = args->inputs[1].data;
    const float *grad = tide__cpu_in(args, 2);
    int64_t n = tide__cpu_numel(&args->inputs[0]);
    if (nesterov) {
        for (int64_t i = 0; i < n; i++) {
            float a = momentum * accum[i] + grad[i];
            accum[i] = a;
            var[i] -= lr * (grad[i] + momentum * a);
        }
    } else {
        for (int64_t i = 0; i < n; i++) {
            float a = momentum * accum[i] + grad[i];
            accum[i] = a;
            var[i] -= lr * a;
        }
    }
    return TIDE_OK;
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
    const float lr = (float)attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f;
    const float eps = (float)attrs[TIDE_ATTR_APPLY_ADAM_epsilon].f;
    const float beta1 = (float)b1, beta2 = (float)b2;
    const float one_minus_b1 = (float)(1.0 - b1), one_minus_b2 = (float)(1.0 - b2);
    const float inv_correction1 = (float)(1.0 / (1.0 - pow(b1, t)));
    const float inv_correction2 = (float)(1.0 / (1.0 - pow(b2, t)));
    float *var = args->inputs[0].data, *m = args->inputs[1].data, *v = args->inputs[2].data;
    const float *grad = tide__cpu_in(args, 3);
    int64_t n = tide__cpu_numel(&args->inputs[0]);
    for (int64_t i = 0; i < n; i++) {
        float g = grad[i];
        float mi = beta1 * m[i] + one_minus_b1 * g;
        float vi = beta2 * v[i] + one_minus_b2 * g * g;
        m[i] = mi;
        v[i] = vi;
        var[i] -= lr * (mi * inv_correction1) / (sqrtf(vi * inv_correction2) + eps);
    }
    return TIDE_OK;
}
