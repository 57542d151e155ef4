/* SPDX-License-Identifier: MIT */
/*
 * norm.c: BatchNorm (training) and BatchNormGrad as oneDNN primitives
 * (batch_normalization_forward with dnnl_forward_training,
 * batch_normalization_backward with dnnl_backward), fp32, on x [N, C, H, W]
 * or [N, C], seen as nchw [N, C, 1, H*W].
 *
 * Semantics: tide's BatchNorm outputs y, the mean and inv_std =
 * 1 / sqrt(biased variance + epsilon) per channel (kernels/cpu/norm.c);
 * oneDNN outputs the mean and the biased variance. The forward writes
 * oneDNN's variance into the inv_std output and turns it into inv_std there,
 * in double. BatchNormGrad takes (dy, x, gamma, mean, inv_std); oneDNN takes
 * the variance, so the workspace holds var = 1 / inv_std^2 - epsilon per
 * channel, in double then rounded to float. oneDNN adds epsilon back before
 * its square root, so what it divides by is 1 / inv_std to within float
 * rounding of var + epsilon (the subtraction loses digits only of var, where
 * var is small against epsilon, and there epsilon dominates the sum).
 * gamma and beta go in as oneDNN's separate scale and shift
 * (dnnl_use_scale, dnnl_use_shift: no packed [2, C] copy), and the gradient
 * writes dgamma and dbeta as its diff_scale and diff_shift. oneDNN sums in
 * float where tide sums in double, so the two agree within float rounding
 * (test_backend_ops compares them within a tolerance).
 *
 * When: only under TIDE_CPU_ONEDNN=all (or
 * tide_cpu_kernels_onednn_everywhere), which is how the tests compare both:
 * on the project's 2-core VM oneDNN was the slower at every shape measured
 * (batch_norm_faster), so tide's kernels run BatchNorm by default.
 *
 * Threads and determinism: the statistics of a channel run over every
 * image, so the batch cannot be cut by images; a piece of the channels of
 * an NCHW tensor is not dense, and oneDNN 2.6 has only its reference
 * implementation (bnorm_ref, several times slower) for strided tensors. So
 * the whole op is one single-threaded primitive (OpenMP set to one thread)
 * on the calling thread: --threads bounds it, and the result depends on the
 * data and the shapes only. That leaves the pool's other threads idle, which
 * batch_norm_faster weighs.
 *
 * Workspace: user scratchpad mode, so every byte oneDNN uses is in the
 * planned workspace: for BatchNormGrad the variance [C] first, then the
 * scratchpad, at 64-byte aligned offsets.
 *
 * Primitive cache: common.c's, keyed by (op, N, C, H*W, epsilon); created
 * when the memory plan asks for the node's workspace.
 */
#include "kernels/onednn/onednn-impl.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu-impl.h"

/* What the cache is keyed by. */
struct key {
    int32_t backward; /* 0: BatchNorm, 1: BatchNormGrad */
    float epsilon;
    int64_t n, c, hw;
};

struct entry {
    struct key key;
    bool ok; /* false: oneDNN has no primitive for the case */
    dnnl_primitive_t primitive;
    dnnl_memory_desc_t x, stat, scratchpad; /* stat: a [C] vector (mean, variance, gamma, ...) */
    uint64_t variance; /* offset of the scratchpad: the gradient's variance before it */
    uint64_t workspace;
};

/* Fills e (its key set) with the primitive; e->ok says whether there is one. */
static void entry_build(void *entry)
{
    struct entry *e = entry;
    const struct key *k = &e->key;
    dnnl_dims_t xd = {k->n, k->c, 1, k->hw}, cd = {k->c};
    const unsigned flags = dnnl_use_scale | dnnl_use_shift;
    dnnl_primitive_attr_t attr = tide__onednn_attr_new();
    dnnl_batch_normalization_desc_t fwd_d, bwd_d;
    dnnl_primitive_desc_t pd = NULL;
    e->ok = false;
    if (!attr)
        return;
    bool ok =
        dnnl_memory_desc_init_by_tag(&e->x, 4, xd, dnnl_f32, dnnl_nchw) == dnnl_success &&
        dnnl_memory_desc_init_by_tag(&e->stat, 1, cd, dnnl_f32, dnnl_a) == dnnl_success &&
        dnnl_batch_normalization_forward_desc_init(&fwd_d, dnnl_forward_training, &e->x, k->epsilon,
                                                   flags) == dnnl_success &&
        (!k->backward ||
         dnnl_batch_normalization_backward_desc_init(&bwd_d, dnnl_backward, &e->x, &e->x,
                                                     k->epsilon, flags) == dnnl_success) &&
        (pd = tide__onednn_pass_pd(&fwd_d, k->backward ? &bwd_d : NULL, attr)) != NULL;
    if (ok) {
        e->scratchpad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        e->variance = k->backward ? tide__onednn_align((uint64_t)k->c * sizeof(float)) : 0;
        e->workspace = e->variance + tide__onednn_align(dnnl_memory_desc_get_size(&e->scratchpad));
        /* Without a fused ReLU the primitive keeps no workspace of its own between passes. */
        ok = dnnl_memory_desc_get_size(
                 dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0)) == 0 &&
             dnnl_primitive_create(&e->primitive, pd) == dnnl_success;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    e->ok = ok;
}

/*
 * Whether oneDNN is the faster for these shapes: never, as measured with
 * tide-bench cpu-ops on the project's 2-core VM (docs/benchmarks.md,
 * "oneDNN pooling and BatchNorm"). At every BatchNorm shape of ResNet-38
 * and ResNet-50 oneDNN's nchw implementation (ncsp_bnorm) on one thread
 * took 1.4 to 8 times as long as tide's kernel on one thread (16x64x112x112
 * forward: 27 ms against 7.2), and 1.7 to 11 times as long as tide's on two,
 * which oneDNN cannot use here (see the file's header). A rule on the shapes
 * goes here if a later oneDNN changes that; TIDE_CPU_ONEDNN=all reaches
 * oneDNN meanwhile.
 */
static bool batch_norm_faster(const struct key *k)
{
    (void)k;
    return false;
}

/* The primitive of node's op over x, or NULL when oneDNN is not to run it. */
static const struct entry *entry_choose(const struct tide_node *node, const struct tide_shape *x)
{
    struct key k;
    memset(&k, 0, sizeof(k)); /* padding too: keys are compared with memcmp */
    if (node->op == TIDE_OP_BATCH_NORM)
        k.epsilon = (float)node->attrs[TIDE_ATTR_BATCH_NORM_epsilon].f;
    else if (node->op == TIDE_OP_BATCH_NORM_GRAD)
        k.epsilon = (float)node->attrs[TIDE_ATTR_BATCH_NORM_GRAD_epsilon].f;
    else
        return NULL;
    if (x->rank != 4 && x->rank != 2)
        return NULL;
    k.backward = node->op == TIDE_OP_BATCH_NORM_GRAD;
    k.n = x->dims[0], k.c = x->dims[1], k.hw = x->rank == 4 ? x->dims[2] * x->dims[3] : 1;
    if (k.n <= 0 || k.c <= 0 || k.hw <= 0 || !tide__onednn_enabled() ||
        !(tide__onednn_everywhere() || batch_norm_faster(&k)))
        return NULL;
    const struct entry *e = tide__onednn_cache_get(&k, sizeof(k), sizeof(*e), entry_build);
    return e && e->ok ? e : NULL;
}

bool tide__onednn_batch_norm_workspace(const struct tide_node *node, const struct tide_shape *x,
                                       uint64_t *bytes)
{
    const struct entry *e = entry_choose(node, x);
    if (!e)
        return false;
    *bytes = e->workspace;
    return true;
}

enum tide_status tide__onednn_batch_norm_run(const struct tide_kernel_args *args, bool *ran,
                                             struct tide_error *err)
{
    *ran = false;
    const struct tide_node *node = args->node;
    const struct tide_shape *x = &args->inputs[node->op == TIDE_OP_BATCH_NORM ? 0 : 1].shape;
    const struct entry *e = entry_choose(node, x);
    if (!e)
        return TIDE_OK;
    /* The epsilon of the primitive, as tide's kernel would use it (in double). */
    double epsilon = node->op == TIDE_OP_BATCH_NORM
                         ? node->attrs[TIDE_ATTR_BATCH_NORM_epsilon].f
                         : node->attrs[TIDE_ATTR_BATCH_NORM_GRAD_epsilon].f;
    uint64_t have = args->workspace ? args->workspace_bytes : 0;
    if (have < e->workspace)
        return TIDE_OK; /* not planned for oneDNN: tide's kernel needs no workspace */
    char *ws = args->workspace;
    *ran = true;
    tide__onednn_count_run(node->op);

    struct tide__onednn_arg a[10];
    int n = 0;
    if (node->op == TIDE_OP_BATCH_NORM) {
        /* (x, gamma, beta) -> y, mean, inv_std: the variance goes into inv_std's place. */
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_SRC, &e->x, args->inputs[0].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_SCALE, &e->stat, args->inputs[1].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_SHIFT, &e->stat, args->inputs[2].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_DST, &e->x, args->outputs[0].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_MEAN, &e->stat, args->outputs[1].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_VARIANCE, &e->stat, args->outputs[2].data};
    } else {
        /* (dy, x, gamma, mean, inv_std) -> dx, dgamma, dbeta, with the variance from inv_std. */
        const float *inv_std = tide__cpu_in(args, 4);
        float *variance = (float *)ws;
        for (int64_t c = 0; c < e->key.c; c++)
            variance[c] = (float)(1.0 / ((double)inv_std[c] * inv_std[c]) - epsilon);
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_DIFF_DST, &e->x, args->inputs[0].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_SRC, &e->x, args->inputs[1].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_SCALE, &e->stat, args->inputs[2].data};
        /* oneDNN wants a shift with dnnl_use_shift but never reads it (dx does not depend on
         * beta): BatchNormGrad has no beta, gamma stands in. */
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_SHIFT, &e->stat, args->inputs[2].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_MEAN, &e->stat, args->inputs[3].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_VARIANCE, &e->stat, variance};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_DIFF_SRC, &e->x, args->outputs[0].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_DIFF_SCALE, &e->stat, args->outputs[1].data};
        a[n++] = (struct tide__onednn_arg){DNNL_ARG_DIFF_SHIFT, &e->stat, args->outputs[2].data};
    }
    a[n++] = (struct tide__onednn_arg){DNNL_ARG_SCRATCHPAD, &e->scratchpad, ws + e->variance};
    const char *failed = NULL;
    dnnl_status_t s = tide__onednn_execute(e->primitive, a, n, &failed);
    if (s != dnnl_success)
        return tide_node_error(err, TIDE_INTERNAL, node,
                               "oneDNN: %s of the batch norm (%" PRId64 " x %" PRId64
                               " channels x %" PRId64 ") failed with status %d",
                               failed, e->key.n, e->key.c, e->key.hw, (int)s);
    if (node->op == TIDE_OP_BATCH_NORM) {
        float *inv_std = tide__cpu_out(args, 2);
        for (int64_t c = 0; c < e->key.c; c++)
            inv_std[c] = (float)(1.0 / sqrt((double)inv_std[c] + epsilon));
    }
    return TIDE_OK;
}
