/* SPDX-License-Identifier: MIT */
/*
 * conv.c: CPU kernels for Conv2D and its gradients Conv2DBackpropInput and
 * Conv2DBackpropFilter, NCHW input x [N, C, H, W], KCRS filter
 * w [K, C / G, R, S] (G: the group attribute), output y [N, K, OH, OW],
 * symmetric zero padding, dilated filters (taps dh rows and dw columns
 * apart).
 *
 * Each image is lowered to GEMMs through im2col: its [C*R*S, OH*OW] matrix
 * of input patches is built in the workspace, then for each group g (rows
 * g*CRS.. of the patch matrix, with CRS = C/G*R*S; filters and outputs
 * g*K/G..; one GEMM when G is 1)
 *   Conv2D:               y_ng  = w_g [K/G, CRS] x cols_ng
 *   Conv2DBackpropInput:  cols_ng = w_g^T [CRS, K/G] x dy_ng, then col2im
 *   Conv2DBackpropFilter: dw_g  = sum over n of dy_ng [K/G, OH*OW] x cols_ng^T
 * The groups' blocks of the patch matrix are those of the whole image's, so
 * grouping changes neither the lowering nor the workspace; nor does dilation,
 * which only moves the cell each entry is read from. A 1x1 filter with
 * stride 1 and no padding needs no lowering: the image is its own patch
 * matrix, and needs no im2col workspace.
 *
 * Threads and determinism: the images are the tasks of a parallel job
 * (parallel.c), each with single-threaded sgemms (one per channel group, in
 * group order) and the im2col matrix of the worker that runs it; the
 * workspace holds one matrix per thread of the pool when the plan was made
 * (fewer threads work at once if the pool grew since). The filter gradient
 * sums over images, so its tasks are fixed groups of images (FILTER_GROUPS,
 * whatever the thread count): each group sums its images in order into its
 * own partial (group 0 straight into dw, the others in the workspace), and
 * the partials are then added in group order. im2col and col2im visit
 * elements in a fixed order. So the result depends on the shapes and the
 * data only.
 *
 * oneDNN first: where tide was built with oneDNN and it has a primitive for
 * the case within the workspace limit per thread (conv_slot_limit), each
 * kernel here hands the whole convolution to it (kernels/onednn/conv.c), and
 * the workspace is what its primitives need;
 * what follows is the fallback, and the kernel for every case when oneDNN is
 * off (TIDE_CPU_ONEDNN=0).
 */
#include "kernels/cpu/cpu-impl.h"
#include "kernels/onednn/onednn.h"

#include <cblas.h>
#include <string.h>

/* The geometry of one convolution. */
struct conv {
    int64_t n, c, h, w;          /* x */
    int64_t k;                   /* filters */
    int64_t oh, ow;              /* y's spatial dims */
    struct tide__cpu_window win; /* kh, kw: the filter's R and S */
    int64_t dh, dw;              /* dilations: filter tap r reads input row oh * sh - ph + r * dh */
    int64_t group;               /* channel groups: G */
    int64_t kg;                  /* filters per group: K/G */
    int64_t crs, ohw;            /* GEMM dims: C/G*R*S (a group's patch rows) and OH*OW */
    int64_t rows;                /* the image's patch matrix rows: C*R*S = G * crs */
    bool pointwise;              /* 1x1 filter, stride 1, no padding: no im2col */
};

/*
 * Reads the strides, pads, group and dilations of a convolution node (x, w and y agree: infer
 * made them) and refuses GEMM dimensions that cblas_sgemm cannot index.
 */
static enum tide_status conv_setup(const struct tide_node *node, const struct tide_shape *x,
                                   const struct tide_shape *w, const struct tide_shape *y,
                                   struct conv *cv, struct tide_error *err)
{
    struct tide__kernel_conv g;
    tide__kernel_conv_setup(node, x, w, y, &g);
    *cv = (struct conv){
        .n = g.n,
        .c = g.c,
        .h = g.h,
        .w = g.w,
        .k = g.k,
        .oh = g.oh,
        .ow = g.ow,
        .win = {.kh = g.r, .kw = g.s, .sh = g.sh, .sw = g.sw, .ph = g.ph, .pw = g.pw},
        .dh = g.dh,
        .dw = g.dw,
        .group = g.group,
        .kg = g.k / g.group,
    };
    cv->crs = cv->c / cv->group * cv->win.kh * cv->win.kw;
    cv->rows = cv->c * cv->win.kh * cv->win.kw;
    cv->ohw = cv->oh * cv->ow;
    if (!tide__cpu_fits_blas_int(cv->k, cv->crs, cv->ohw))
        return tide_node_error(err, TIDE_LIMIT, node,
                               "a GEMM dimension exceeds what cblas_sgemm can index");
    cv->pointwise = cv->win.kh == 1 && cv->win.kw == 1 && cv->win.sh == 1 && cv->win.sw == 1 &&
                    cv->win.ph == 0 && cv->win.pw == 0;
    return TIDE_OK;
}

/* How many images one task of Conv2DBackpropFilter sums; the group partials are added in order. */
#define FILTER_GROUPS 8

static uint64_t conv_cols_bytes(const struct conv *cv)
{
    return cv->pointwise ? 0 : (uint64_t)cv->rows * (uint64_t)cv->ohw * sizeof(float);
}

/* Tasks of a convolution: one per image, or for the filter gradient one per group of images. */
static int64_t conv_tasks(const struct conv *cv, enum tide_op op)
{
    if (op != TIDE_OP_CONV2D_BACKPROP_FILTER)
        return cv->n;
    return cv->n < FILTER_GROUPS ? cv->n : FILTER_GROUPS;
}

/*
 * The filter gradient's partial sums, each of dw's K * C/G*R*S elements, of
 * groups of images 1.. (group 0 sums into the output).
 */
static uint64_t conv_partial_bytes(const struct conv *cv, enum tide_op op)
{
    int64_t groups = conv_tasks(cv, op);
    if (op != TIDE_OP_CONV2D_BACKPROP_FILTER || groups < 2)
        return 0;
    return (uint64_t)(groups - 1) * (uint64_t)cv->k * (uint64_t)cv->crs * sizeof(float);
}

/*
 * The workspace: the filter gradient's partial sums, then one im2col matrix
 * per thread that can work at once (the pool's size when the plan is made).
 */
static uint64_t conv_workspace_bytes(const struct conv *cv, enum tide_op op)
{
    int64_t slots = conv_tasks(cv, op);
    if (slots > tide__cpu_workers())
        slots = tide__cpu_workers();
    if (slots < 1)
        slots = 1;
    return conv_partial_bytes(cv, op) + (uint64_t)slots * conv_cols_bytes(cv);
}

/*
 * Checks the workspace (the partial sums and at least one im2col matrix)
 * and returns how many threads it lets work at once.
 */
static enum tide_status conv_slots(const struct tide_kernel_args *args, const struct conv *cv,
                                   int *max_workers, struct tide_error *err)
{
    uint64_t partial = conv_partial_bytes(cv, args->node->op), cols = conv_cols_bytes(cv);
    enum tide_status st = tide__cpu_expect_workspace(args, partial + cols, err);
    if (st != TIDE_OK)
        return st;
    int workers = tide__cpu_workers();
    if (cols > 0 && (args->workspace_bytes - partial) / cols < (uint64_t)workers)
        workers = (int)((args->workspace_bytes - partial) / cols);
    *max_workers = workers;
    return TIDE_OK;
}

/*
 * The most workspace a thread's oneDNN slot may take for this convolution.
 * Memory first: one im2col matrix of the fallback, so that oneDNN never
 * makes a plan larger. Except where oneDNN's direct kernels beat the
 * fallback's GEMMs by far, measured per shape class on ResNet-38 at batch 16
 * (an AVX-512 VM, 1 thread, docs/benchmarks.md): 3x3-and-larger filters
 * forward and for the input gradient (1.4-1.8x at 8x8 and 4x4 outputs), and
 * filter gradients over many output positions (at least 64 for a 3x3 filter,
 * 256 for a 1x1: 1.2-2x), where the small pointwise GEMMs and the
 * small-image filter gradients are as fast or faster in the fallback. There
 * the slot may take as much as the node's three tensors together (it holds
 * blocked copies of a piece of the batch's input and output, of the whole
 * filter, and oneDNN's scratchpad). The choice depends on the shapes only,
 * so the plan's workspace and the run agree, and every run takes the same
 * kernel.
 */
static uint64_t conv_slot_limit(enum tide_op op, const struct tide__kernel_conv *g,
                                const struct conv *cv, bool own)
{
    uint64_t cols = own ? conv_cols_bytes(cv) : UINT64_MAX;
    int64_t outputs = g->oh * g->ow;
    bool wide = g->r * g->s > 1;
    bool faster = op == TIDE_OP_CONV2D_BACKPROP_FILTER ? outputs >= (wide ? 64 : 256) : wide;
    if (!faster)
        return cols;
    uint64_t operands =
        ((uint64_t)(g->n * g->c * g->h * g->w) + (uint64_t)(g->n * g->k * g->oh * g->ow) +
         (uint64_t)(g->k * (g->c / g->group) * g->r * g->s)) *
        sizeof(float);
    return cols > operands ? cols : operands;
}

uint64_t tide__cpu_conv_workspace(const struct tide_graph *graph, const struct tide_node *node)
{
    if (!node->outputs || node->n_outputs < 1 || node->n_inputs < 2)
        return 0;
    const struct tide_shape *x, *w, *y;
    switch (node->op) {
    case TIDE_OP_CONV2D:
        x = &tide_graph_input(graph, node, 0)->shape;
        w = &tide_graph_input(graph, node, 1)->shape;
        y = &node->outputs[0].shape;
        break;
    case TIDE_OP_CONV2D_BACKPROP_INPUT:
        x = &node->outputs[0].shape;
        w = &tide_graph_input(graph, node, 1)->shape;
        y = &tide_graph_input(graph, node, 0)->shape;
        break;
    case TIDE_OP_CONV2D_BACKPROP_FILTER:
        x = &tide_graph_input(graph, node, 0)->shape;
        w = &node->outputs[0].shape;
        y = &tide_graph_input(graph, node, 1)->shape;
        break;
    default:
        return 0;
    }
    struct tide__kernel_conv g;
    struct conv cv;
    uint64_t onednn_bytes;
    bool own = conv_setup(node, x, w, y, &cv, NULL) == TIDE_OK;
    tide__kernel_conv_setup(node, x, w, y, &g);
    if (tide__onednn_conv_workspace(node->op, &g, conv_slot_limit(node->op, &g, &cv, own),
                                    &onednn_bytes))
        return onednn_bytes;
    if (!own)
        return 0; /* too large for cblas_sgemm: the kernel reports it when it runs */
    return conv_workspace_bytes(&cv, node->op);
}

/*
 * Runs the convolution of args through oneDNN if it can (*ran says); x, w
 * and y are the shapes of the convolution's input, filter and output.
 */
static enum tide_status conv_onednn(const struct tide_kernel_args *args, const struct tide_shape *x,
                                    const struct tide_shape *w, const struct tide_shape *y,
                                    bool *ran, struct tide_error *err)
{
    struct tide__kernel_conv g;
    struct conv cv;
    bool own = conv_setup(args->node, x, w, y, &cv, NULL) == TIDE_OK;
    tide__kernel_conv_setup(args->node, x, w, y, &g);
    return tide__onednn_conv_run(args, &g, conv_slot_limit(args->node->op, &g, &cv, own), ran, err);
}

/*
 * The output positions o in [*lo, *hi) of an axis of out_len positions for
 * which o * stride + offset lies inside [0, in_len): the positions whose
 * input is not padding. offset is the kernel tap minus the pad.
 */
static void valid_range(int64_t offset, int64_t stride, int64_t in_len, int64_t out_len,
                        int64_t *lo, int64_t *hi)
{
    int64_t l = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
    int64_t last = in_len - 1 - offset; /* o * stride <= last */
    int64_t h = last >= 0 ? last / stride + 1 : 0;
    if (h > out_len)
        h = out_len;
    if (l > h)
        l = h;
    *lo = l;
    *hi = h;
}

/*
 * Builds one image's patch matrix cols [C*R*S, OH*OW] from x_n [C, H, W]:
 * row (c, r, s) holds, for each output position, the input cell its tap
 * reads (dilated: r * dh rows and s * dw columns from the window's corner);
 * padding reads as 0.
 */
static void im2col(const float *x, const struct conv *cv, float *cols)
{
    const struct tide__cpu_window *win = &cv->win;
    for (int64_t c = 0; c < cv->c; c++) {
        const float *plane = x + c * cv->h * cv->w;
        for (int64_t r = 0; r < win->kh; r++) {
            for (int64_t s = 0; s < win->kw; s++) {
                float *row = cols + ((c * win->kh + r) * win->kw + s) * cv->ohw;
                int64_t off = s * cv->dw - win->pw, lo, hi;
                valid_range(off, win->sw, cv->w, cv->ow, &lo, &hi);
                for (int64_t oh = 0; oh < cv->oh; oh++) {
                    float *dst = row + oh * cv->ow;
                    int64_t ih = oh * win->sh - win->ph + r * cv->dh;
                    if (ih < 0 || ih >= cv->h) {
                        memset(dst, 0, (size_t)cv->ow * sizeof(float));
                        continue;
                    }
                    const float *src = plane + ih * cv->w;
                    for (int64_t ow = 0; ow < lo; ow++)
                        dst[ow] = 0.0f;
                    if (win->sw == 1) {
                        if (hi > lo)
                            memcpy(dst + lo, src + lo + off, (size_t)(hi - lo) * sizeof(float));
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++)
                            dst[ow] = src[ow * win->sw + off];
                    }
                    for (int64_t ow = hi; ow < cv->ow; ow++)
                        dst[ow] = 0.0f;
                }
            }
        }
    }
}

/*
 * Adds one image's patch matrix cols back into dx_n [C, H, W], each entry
 * to the cell im2col read it from; entries over padding are dropped.
 */
static void col2im(const float *cols, const struct conv *cv, float *dx)
{
    const struct tide__cpu_window *win = &cv->win;
    for (int64_t c = 0; c < cv->c; c++) {
        float *plane = dx + c * cv->h * cv->w;
        for (int64_t r = 0; r < win->kh; r++) {
            for (int64_t s = 0; s < win->kw; s++) {
                const float *row = cols + ((c * win->kh + r) * win->kw + s) * cv->ohw;
                int64_t off = s * cv->dw - win->pw, lo, hi;
                valid_range(off, win->sw, cv->w, cv->ow, &lo, &hi);
                for (int64_t oh = 0; oh < cv->oh; oh++) {
                    int64_t ih = oh * win->sh - win->ph + r * cv->dh;
                    if (ih < 0 || ih >= cv->h)
                        continue;
                    const float *src = row + oh * cv->ow;
                    float *dst = plane + ih * cv->w;
                    if (win->sw == 1) {
                        for (int64_t ow = lo; ow < hi; ow++)
                            dst[ow + off] += src[ow];
                    } else {
                        for (int64_t ow = lo; ow < hi; ow++)
                            dst[ow * win->sw + off] += src[ow];
                    }
                }
            }
        }
    }
}

/* One convolution's operands, shared by its tasks. */
struct conv_job {
    const struct conv *cv;
    const float *x, *w, *dy;
    float *y, *dx, *dw;
    float *partials; /* Conv2DBackpropFilter: groups 1.. */
    float *cols;     /* one im2col matrix per worker */
};

/* The im2col matrix of worker, in the workspace after the partial sums. */
static float *worker_cols(const struct conv_job *j, int worker)
{
    return j->cols + (size_t)worker * (size_t)(j->cv->rows * j->cv->ohw);
}

/* Conv2D of image n: y_ng = w_g [K/G, CRS] x cols_ng for each group g. */
static void conv_forward_image(void *ctx, int64_t n, int worker)
{
    const struct conv_job *j = ctx;
    const struct conv *cv = j->cv;
    const float *xn = j->x + n * cv->c * cv->h * cv->w;
    const float *cols = xn;
    if (!cv->pointwise) {
        im2col(xn, cv, worker_cols(j, worker));
        cols = worker_cols(j, worker);
    }
    float *yn = j->y + n * cv->k * cv->ohw;
    for (int64_t g = 0; g < cv->group; g++)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)cv->kg, (int)cv->ohw,
                    (int)cv->crs, 1.0f, j->w + g * cv->kg * cv->crs, (int)cv->crs,
                    cols + g * cv->crs * cv->ohw, (int)cv->ohw, 0.0f, yn + g * cv->kg * cv->ohw,
                    (int)cv->ohw);
}

/*
 * Conv2DBackpropInput of image n: cols_ng = w_g^T [CRS, K/G] x dy_ng for each
 * group g, then col2im into dx_n.
 */
static void conv_input_grad_image(void *ctx, int64_t n, int worker)
{
    const struct conv_job *j = ctx;
    const struct conv *cv = j->cv;
    int64_t image = cv->c * cv->h * cv->w;
    float *dxn = j->dx + n * image;
    const float *dyn = j->dy + n * cv->k * cv->ohw;
    /* With a pointwise filter the patch matrix is dx_n itself, and every entry is written. */
    float *cols = cv->pointwise ? dxn : worker_cols(j, worker);
    for (int64_t g = 0; g < cv->group; g++)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)cv->crs, (int)cv->ohw,
                    (int)cv->kg, 1.0f, j->w + g * cv->kg * cv->crs, (int)cv->crs,
                    dyn + g * cv->kg * cv->ohw, (int)cv->ohw, 0.0f, cols + g * cv->crs * cv->ohw,
                    (int)cv->ohw);
    if (!cv->pointwise) {
        memset(dxn, 0, (size_t)image * sizeof(float));
        col2im(cols, cv, dxn);
    }
}

/*
 * Conv2DBackpropFilter of group g of images: the sum over its images, in
 * order, of dy_n [K, OH*OW] x cols_n^T (per channel group c: dy_nc
 * [K/G, OH*OW] x cols_nc^T into dw_c [K/G, CRS]), into the output (g = 0)
 * or partial g - 1.
 */
static void conv_filter_grad_group(void *ctx, int64_t g, int worker)
{
    const struct conv_job *j = ctx;
    const struct conv *cv = j->cv;
    int64_t groups = conv_tasks(cv, TIDE_OP_CONV2D_BACKPROP_FILTER);
    int64_t first = g * cv->n / groups, last = (g + 1) * cv->n / groups;
    float *out = g == 0 ? j->dw : j->partials + (g - 1) * cv->k * cv->crs;
    for (int64_t n = first; n < last; n++) {
        const float *xn = j->x + n * cv->c * cv->h * cv->w;
        const float *dyn = j->dy + n * cv->k * cv->ohw;
        const float *cols = xn;
        if (!cv->pointwise) {
            im2col(xn, cv, worker_cols(j, worker));
            cols = worker_cols(j, worker);
        }
        for (int64_t c = 0; c < cv->group; c++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)cv->kg, (int)cv->crs,
                        (int)cv->ohw, 1.0f, dyn + c * cv->kg * cv->ohw, (int)cv->ohw,
                        cols + c * cv->crs * cv->ohw, (int)cv->ohw, n == first ? 0.0f : 1.0f,
                        out + c * cv->kg * cv->crs, (int)cv->crs);
    }
}

/* Conv2D(x, w) -> y, one task per image. */
enum tide_status tide__cpu_CONV2D(const struct tide_kernel_args *args, struct tide_error *err)
{
    struct conv cv;
    int workers;
    bool ran;
    enum tide_status st = conv_onednn(args, &args->inputs[0].shape, &args->inputs[1].shape,
                                      &args->outputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    st = conv_setup(args->node, &args->inputs[0].shape, &args->inputs[1].shape,
                    &args->outputs[0].shape, &cv, err);
    if (st == TIDE_OK)
        st = conv_slots(args, &cv, &workers, err);
    if (st != TIDE_OK)
        return st;
    struct conv_job job = {
        .cv = &cv,
        .x = tide__cpu_in(args, 0),
        .w = tide__cpu_in(args, 1),
        .y = tide__cpu_out(args, 0),
        .cols = args->workspace,
    };
    if (cv.n == 0 || cv.k == 0 || cv.ohw == 0)
        return TIDE_OK;
    if (cv.crs == 0) {
        memset(job.y, 0, (size_t)(cv.n * cv.k * cv.ohw) * sizeof(float));
        return TIDE_OK;
    }
    tide__cpu_blas_init();
    tide__cpu_parallel(cv.n, workers, conv_forward_image, &job);
    return TIDE_OK;
}

/* Conv2DBackpropInput(dy, w; input_shape) -> dx, one task per image. */
enum tide_status tide__cpu_CONV2D_BACKPROP_INPUT(const struct tide_kernel_args *args,
                                                 struct tide_error *err)
{
    struct conv cv;
    int workers;
    bool ran;
    enum tide_status st = conv_onednn(args, &args->outputs[0].shape, &args->inputs[1].shape,
                                      &args->inputs[0].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    st = conv_setup(args->node, &args->outputs[0].shape, &args->inputs[1].shape,
                    &args->inputs[0].shape, &cv, err);
    if (st == TIDE_OK)
        st = conv_slots(args, &cv, &workers, err);
    if (st != TIDE_OK)
        return st;
    struct conv_job job = {
        .cv = &cv,
        .dy = tide__cpu_in(args, 0),
        .w = tide__cpu_in(args, 1),
        .dx = tide__cpu_out(args, 0),
        .cols = args->workspace,
    };
    int64_t image = cv.c * cv.h * cv.w;
    if (cv.n == 0 || image == 0)
        return TIDE_OK;
    if (cv.k == 0 || cv.ohw == 0) {
        memset(job.dx, 0, (size_t)(cv.n * image) * sizeof(float));
        return TIDE_OK;
    }
    tide__cpu_blas_init();
    tide__cpu_parallel(cv.n, workers, conv_input_grad_image, &job);
    return TIDE_OK;
}

/*
 * Conv2DBackpropFilter(x, dy; filter_shape) -> dw = sum over images of
 * dy_n x cols_n^T: one task per fixed group of images, then the group sums
 * added in group order.
 */
enum tide_status tide__cpu_CONV2D_BACKPROP_FILTER(const struct tide_kernel_args *args,
                                                  struct tide_error *err)
{
    struct conv cv;
    int workers;
    bool ran;
    enum tide_status st = conv_onednn(args, &args->inputs[0].shape, &args->outputs[0].shape,
                                      &args->inputs[1].shape, &ran, err);
    if (st != TIDE_OK || ran)
        return st;
    st = conv_setup(args->node, &args->inputs[0].shape, &args->outputs[0].shape,
                    &args->inputs[1].shape, &cv, err);
    if (st == TIDE_OK)
        st = conv_slots(args, &cv, &workers, err);
    if (st != TIDE_OK)
        return st;
    uint64_t partial = conv_partial_bytes(&cv, TIDE_OP_CONV2D_BACKPROP_FILTER);
    struct conv_job job = {
        .cv = &cv,
        .x = tide__cpu_in(args, 0),
        .dy = tide__cpu_in(args, 1),
        .dw = tide__cpu_out(args, 0),
        .partials = args->workspace,
        .cols = args->workspace ? (float *)((char *)args->workspace + partial) : NULL,
    };
    int64_t size = cv.k * cv.crs;
    if (size == 0)
        return TIDE_OK;
    if (cv.n == 0 || cv.ohw == 0) {
        memset(job.dw, 0, (size_t)size * sizeof(float));
        return TIDE_OK;
    }
    int64_t groups = conv_tasks(&cv, TIDE_OP_CONV2D_BACKPROP_FILTER);
    tide__cpu_blas_init();
    tide__cpu_parallel(groups, workers, conv_filter_grad_group, &job);
    for (int64_t g = 1; g < groups; g++) {
        const float *p = job.partials + (g - 1) * size;
        for (int64_t i = 0; i < size; i++)
            job.dw[i] += p[i];
    }
    return TIDE_OK;
}
