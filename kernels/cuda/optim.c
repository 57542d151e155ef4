/* SPDX-License-Identifier: MIT */
/*
 * optim.c: the host half of the CUDA optimizer updates ApplySGD,
 * ApplyMomentum and ApplyAdam. They write the variable (input 0) and their
 * state in place, element by element (elementwise.cu).
 *
 * The hyper-parameters are rounded to float once, and Adam's bias
 * corrections are computed in double from the step counter and then rounded,
 * exactly as on the CPU (kernels/cpu/optim.c). The step counter is read
 * here, when the update is enqueued: the executor sets it before it enqueues
 * a step and changes it only between steps.
 */
#include "kernels/cuda/cuda-impl.h"

#include <inttypes.h>
#include <math.h>

/* The launch context; every input holds as many bytes as the variable (infer made it so). */
static enum tide_status optim_setup(const struct tide_kernel_args *args,
                                    struct tide_cuda_launch **launch, struct tide_error *err)
{
    enum tide_status st = tide__cuda_context(args, launch, err);
    if (st == TIDE_OK)
        tide__kernel_like_variable(args);
    return st;
}

/* var -= lr * grad. */
enum tide_status tide__cuda_APPLY_SGD(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = optim_setup(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const float lr = (float)args->node->attrs[TIDE_ATTR_APPLY_SGD_learning_rate].f;
    return TIDE_CUDA_CHECK(err, tide__cuda_launch_sgd(launch->stream, args->inputs[0].data,
                                                      tide__cuda_in(args, 1),
                                                      tide__cuda_numel(&args->inputs[0]), lr));
}

/* accum = momentum * accum + grad; var -= lr * (nesterov ? grad + momentum * accum : accum). */
enum tide_status tide__cuda_APPLY_MOMENTUM(const struct tide_kernel_args *args,
                                           struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = optim_setup(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    const struct tide_attr_value *attrs = args->node->attrs;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_momentum(launch->stream, args->inputs[0].data, args->inputs[1].data,
                                        tide__cuda_in(args, 2), tide__cuda_numel(&args->inputs[0]),
                                        (float)attrs[TIDE_ATTR_APPLY_MOMENTUM_learning_rate].f,
                                        (float)attrs[TIDE_ATTR_APPLY_MOMENTUM_momentum].f,
                                        attrs[TIDE_ATTR_APPLY_MOMENTUM_nesterov].b));
}

/*
 * With t = *args->step (1-based):
 *   m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2;
 *   var -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
 */
enum tide_status tide__cuda_APPLY_ADAM(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct tide_cuda_launch *launch;
    enum tide_status st = optim_setup(args, &launch, err);
    if (st != TIDE_OK)
        return st;
    if (!args->step || *args->step == 0)
        return tide_node_error(err, TIDE_INVALID, args->node,
                               "needs the executor's 1-based step counter, got %s",
                               args->step ? "step 0" : "none");
    const struct tide_attr_value *attrs = args->node->attrs;
    const double b1 = attrs[TIDE_ATTR_APPLY_ADAM_beta1].f, b2 = attrs[TIDE_ATTR_APPLY_ADAM_beta2].f;
    const double t = (double)*args->step;
    return TIDE_CUDA_CHECK(
        err, tide__cuda_launch_adam(
                 launch->stream, args->inputs[0].data, args->inputs[1].data, args->inputs[2].data,
                 tide__cuda_in(args, 3), tide__cuda_numel(&args->inputs[0]),
                 (float)attrs[TIDE_ATTR_APPLY_ADAM_learning_rate].f, (float)b1, (float)b2,
                 (float)(1.0 - b1), (float)(1.0 - b2), (float)(1.0 / (1.0 - pow(b1, t))),
                 (float)(1.0 / (1.0 - pow(b2, t))), (float)attrs[TIDE_ATTR_APPLY_ADAM_epsilon].f));
}
