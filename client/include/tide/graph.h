/* SPDX-License-Identifier: MIT */
/*
 * tide/graph.h: libtide's graph builder, the public C API for writing
 * tide.v1.Graph messages without touching protobuf.
 *
 * A builder collects nodes — sources (Placeholder, Variable, Const) and ops —
 * and serializes them into the bytes of a tide.v1.Graph that the daemon (or
 * an in-process session) imports. Op and attribute names are exactly those of
 * tide's op table (graph/ops.def), so what the builder writes is what the
 * daemon reads.
 *
 * Nodes are referred to by a small value type, tide_ref: the node's id in the
 * builder and which of its outputs is meant. Only BatchNorm has more than one
 * output; tide_builder_output() picks the others.
 *
 * Names. Every op function takes a name. NULL asks for an automatic name, the
 * function's op stem and a counter ("matmul_0", "matmul_1", "conv2d_0"); a
 * given name is used as it is. Either way the current name scope is put in
 * front ("block1/conv/matmul_0"). Names must be unique in the graph and made
 * of 1 to 256 bytes of [A-Za-z0-9_./-], scope included.
 *
 * Shapes. The builder infers the dtype and shape of every output with the
 * same rules as the daemon, so a mistake (a matmul whose inner dimensions
 * differ, a convolution whose kernel is larger than its input) is reported
 * where it is made, naming the node and the numbers, and models can ask for
 * a shape (tide_builder_shape) to size their layers. Every dimension is
 * known: tide graphs are static.
 *
 * Errors are sticky, as in a stream: the first failure records a message,
 * and from then on every function that adds a node does nothing and returns
 * TIDE_REF_NONE (id -1), so a model can be written as a straight list of
 * calls and checked once at the end with tide_builder_error(). Passing a bad
 * argument (a NULL pointer, a ref that names no node, a negative dimension)
 * is such a failure, never a crash.
 *
 * Ownership. tide_builder_new() returns a builder that the caller frees with
 * tide_builder_free(). Every string and array passed in is copied before the
 * call returns, so the caller may free or reuse it at once. Strings returned
 * by the builder (names, the error message) stay valid until the builder is
 * freed. tide_builder_serialize() returns a malloc'd buffer that the caller
 * frees with free(). A builder belongs to one thread at a time.
 *
 * Example usage:
 *
 *     tide_builder *b = tide_builder_new();
 *     int64_t x_dims[] = {64, 784}, w_dims[] = {784, 10}, b_dims[] = {10};
 *     tide_ref x = tide_builder_placeholder(b, "x", TIDE_DT_FLOAT32, 2, x_dims);
 *     tide_ref y = tide_builder_placeholder(b, "y", TIDE_DT_INT32, 1, x_dims);
 *     tide_builder_push_scope(b, "fc");
 *     tide_ref w = tide_builder_variable(b, "w", 2, w_dims, "glorot_uniform", 1.0f, true);
 *     tide_ref bias = tide_builder_variable(b, "b", 1, b_dims, "zeros", 1.0f, true);
 *     tide_ref h = tide_builder_matmul(b, NULL, x, w, false, false);   // "fc/matmul_0"
 *     tide_builder_pop_scope(b);
 *     tide_ref logits = tide_builder_bias_add(b, "logits", h, bias);
 *     tide_ref xent = tide_builder_softmax_cross_entropy(b, NULL, logits, y);
 *     tide_builder_reduce_mean(b, "loss", xent, NULL, 0, false);
 *
 *     uint8_t *bytes;
 *     size_t len;
 *     if (tide_builder_serialize(b, &bytes, &len) != 0)
 *         fprintf(stderr, "graph: %s\n", tide_builder_error(b));
 *     else
 *         submit(bytes, len), free(bytes);
 *     tide_builder_free(b);
 */
#ifndef TIDE_GRAPH_H
#define TIDE_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ============================================================================
 * Types
 * ========================================================================== */

/* A graph under construction. Opaque; see tide_builder_new(). */
typedef struct tide_builder tide_builder;

/*
 * A reference to one output of one node: the node's id (its index in the
 * order nodes were added, 0 for the first) and the output's index. An id of
 * -1 means "no node": the call that returned it failed, and the builder's
 * error says why.
 */
typedef struct tide_ref {
    int32_t id;     /* node id, or -1 after an error */
    int32_t output; /* output index; 0 for every op but BatchNorm's statistics */
} tide_ref;

/* The ref that failed calls return. */
#define TIDE_REF_NONE ((tide_ref){-1, 0})

/* The most dimensions a tensor may have; also the longest axes/begin/size list. */
#define TIDE_BUILDER_MAX_RANK 8

/* The longest node name, in bytes, scope included. */
#define TIDE_BUILDER_MAX_NAME 256

/* Element types of tensors; the numbers are tide.v1.DataType's. */
enum tide_data_type {
    TIDE_DT_FLOAT32 = 1, /* IEEE 754 single precision */
    TIDE_DT_INT32 = 2,   /* two's complement 32-bit integers (labels) */
};

/* ============================================================================
 * The builder
 * ========================================================================== */

/* Creates an empty builder, or returns NULL when out of memory. Free it with tide_builder_free. */
tide_builder *tide_builder_new(void);

/* Frees a builder and everything it allocated. NULL is a no-op. */
void tide_builder_free(tide_builder *b);

/*
 * Returns the first error the builder met, as a message that names the node,
 * the input or attribute and the numbers; NULL while there has been none.
 * The string belongs to the builder. A NULL builder reports that it is NULL.
 */
const char *tide_builder_error(const tide_builder *b);

/* Returns the number of nodes added so far (0 for a NULL builder). */
int32_t tide_builder_node_count(const tide_builder *b);

/*
 * Returns the number of parameters: the total element count of every
 * trainable Variable. Models are checked against it.
 */
int64_t tide_builder_parameter_count(const tide_builder *b);

/*
 * Writes the graph as the bytes of a tide.v1.Graph into a malloc'd buffer
 * that the caller frees with free(); *len gets its length. Returns 0, or -1
 * when the builder holds an error (then *bytes is NULL and *len 0) or runs
 * out of memory (which becomes the builder's error). The builder is unchanged
 * and may be serialized again after adding more nodes.
 */
int tide_builder_serialize(tide_builder *b, uint8_t **bytes, size_t *len);

/* ============================================================================
 * Names and lookups
 * ========================================================================== */

/*
 * Opens a name scope: until the matching pop, every new node's name starts
 * with the scopes opened so far, joined with '/' ("layer1/conv/w"). scope
 * may itself hold '/' ("layer1/conv"). Returns 0, or -1 (and records an
 * error) for a NULL, empty or invalid scope or when the prefix grows past
 * TIDE_BUILDER_MAX_NAME bytes.
 */
int tide_builder_push_scope(tide_builder *b, const char *scope);

/* Closes the innermost open scope. Popping with none open records an error and returns -1. */
int tide_builder_pop_scope(tide_builder *b);

/*
 * Returns a ref to output `output` of the node that ref names; for
 * BatchNorm's batch mean (1) and inverse standard deviation (2). Records an
 * error for a ref that names no node or an output the node does not have.
 */
tide_ref tide_builder_output(tide_builder *b, tide_ref ref, int32_t output);

/* Returns a ref to output 0 of the node called name (scopes are not applied), or TIDE_REF_NONE. */
tide_ref tide_builder_find(const tide_builder *b, const char *name);

/* Returns the full name of the node that ref names, or NULL when ref names no node. */
const char *tide_builder_name(const tide_builder *b, tide_ref ref);

/* Returns the op of the node that ref names ("Conv2D"), or NULL when ref names no node. */
const char *tide_builder_op(const tide_builder *b, tide_ref ref);

/*
 * Copies the shape of the output that ref names into dims (room for
 * TIDE_BUILDER_MAX_RANK entries) and its rank into *rank. Returns 0, or -1
 * when ref names no output (the builder's error is not touched).
 */
int tide_builder_shape(const tide_builder *b, tide_ref ref, int64_t dims[TIDE_BUILDER_MAX_RANK],
                       int32_t *rank);

/* Returns the dtype of the output that ref names, or 0 when ref names no output. */
enum tide_data_type tide_builder_dtype(const tide_builder *b, tide_ref ref);

/* ============================================================================
 * Sources
 * ========================================================================== */

/*
 * A Placeholder: a tensor that the client feeds on every step (images,
 * labels). dtype is float32 or int32; dims holds rank entries, each >= 0.
 */
tide_ref tide_builder_placeholder(tide_builder *b, const char *name, enum tide_data_type dtype,
                                  int32_t rank, const int64_t *dims);

/*
 * A float32 Variable, initialised by the daemon. init is one of "zeros",
 * "ones", "constant" (every element is scale), "normal", "uniform",
 * "glorot_uniform" or "he_normal"; scale multiplies the random initialisers.
 * Only trainable variables are updated by the optimizer and counted as
 * parameters.
 */
tide_ref tide_builder_variable(tide_builder *b, const char *name, int32_t rank, const int64_t *dims,
                               const char *init, float scale, bool trainable);

/*
 * A trainable float32 Variable whose initial value is given: data holds the
 * product of dims elements, row-major, and is copied.
 */
tide_ref tide_builder_variable_value(tide_builder *b, const char *name, int32_t rank,
                                     const int64_t *dims, const float *data);

/*
 * A Const of dtype float32 or int32 and shape dims; data holds the product
 * of dims elements, row-major, and is copied.
 */
tide_ref tide_builder_constant(tide_builder *b, const char *name, enum tide_data_type dtype,
                               int32_t rank, const int64_t *dims, const void *data);

/* ============================================================================
 * Ops
 *
 * Every op function takes the builder, the node's name (NULL: automatic),
 * then its inputs and attributes, and returns a ref to output 0. Inputs are
 * float32 unless said otherwise.
 * ========================================================================== */

/* MatMul: [M, K] x [K, N] -> [M, N]; ta and tb transpose a and b first. */
tide_ref tide_builder_matmul(tide_builder *b, const char *name, tide_ref a, tide_ref bm, bool ta,
                             bool tb);

/* Element-wise x + y, x - y, x * y with NumPy broadcasting. */
tide_ref tide_builder_add(tide_builder *b, const char *name, tide_ref x, tide_ref y);
tide_ref tide_builder_sub(tide_builder *b, const char *name, tide_ref x, tide_ref y);
tide_ref tide_builder_mul(tide_builder *b, const char *name, tide_ref x, tide_ref y);

/* Element-wise -x, and x * scale for a constant scale; the output has x's shape. */
tide_ref tide_builder_neg(tide_builder *b, const char *name, tide_ref x);
tide_ref tide_builder_scale(tide_builder *b, const char *name, tide_ref x, float scale);

/*
 * BroadcastTo: x repeated along its axes of size 1 (NumPy broadcasting) up to
 * shape dims (rank entries). It has no gradient: a graph that trains through
 * one fails autodiff, naming it.
 */
tide_ref tide_builder_broadcast_to(tide_builder *b, const char *name, tide_ref x, int32_t rank,
                                   const int64_t *dims);

/* BiasAdd: adds bias [C] along axis 1 of x [N, C, ...]. */
tide_ref tide_builder_bias_add(tide_builder *b, const char *name, tide_ref x, tide_ref bias);

/* Element-wise activations; the output has x's shape. */
tide_ref tide_builder_relu(tide_builder *b, const char *name, tide_ref x);
tide_ref tide_builder_sigmoid(tide_builder *b, const char *name, tide_ref x);
tide_ref tide_builder_tanh(tide_builder *b, const char *name, tide_ref x);

/* Identity: x itself, of any dtype (a named alias, or a point to hang control edges on). */
tide_ref tide_builder_identity(tide_builder *b, const char *name, tide_ref x);

/* Softmax along axis (negative counts from the end: -1 is the last axis). */
tide_ref tide_builder_softmax(tide_builder *b, const char *name, tide_ref x, int64_t axis);

/*
 * SoftmaxCrossEntropy: logits [N, C] float32 and labels [N] int32 (class
 * indices) -> the loss of each row, [N].
 */
tide_ref tide_builder_softmax_cross_entropy(tide_builder *b, const char *name, tide_ref logits,
                                            tide_ref labels);

/*
 * ReduceSum and ReduceMean over the n_axes axes listed (negative counts from
 * the end; n_axes 0 reduces every axis, to a scalar). keep_dims keeps each
 * reduced axis as a 1.
 */
tide_ref tide_builder_reduce_sum(tide_builder *b, const char *name, tide_ref x, const int64_t *axes,
                                 int32_t n_axes, bool keep_dims);
tide_ref tide_builder_reduce_mean(tide_builder *b, const char *name, tide_ref x,
                                  const int64_t *axes, int32_t n_axes, bool keep_dims);

/* Reshape to dims (rank entries); one entry may be -1, inferred from x's element count. */
tide_ref tide_builder_reshape(tide_builder *b, const char *name, tide_ref x, int32_t rank,
                              const int64_t *dims);

/* Concat: joins the n inputs xs along axis; they must agree on every other axis. */
tide_ref tide_builder_concat(tide_builder *b, const char *name, const tide_ref *xs, int32_t n,
                             int64_t axis);

/*
 * Slice: the window of x starting at begin with extent size (rank entries
 * each, rank being x's); a size of -1 runs to the end of that axis.
 */
tide_ref tide_builder_slice(tide_builder *b, const char *name, tide_ref x, const int64_t *begin,
                            const int64_t *size, int32_t rank);

/*
 * Conv2D: x [N, C, H, W] with filter w [K, C, R, S] -> [N, K, OH, OW], where
 * OH = (H + 2 * pad_h - R) / stride_h + 1 (and alike for W). No bias: add one
 * with tide_builder_bias_add.
 */
tide_ref tide_builder_conv2d(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                             int64_t stride_h, int64_t stride_w, int64_t pad_h, int64_t pad_w);

/*
 * Conv2D in group channel groups (ONNX Conv's group): w is [K, C / group,
 * R, S], group divides C and K, and output channels [g * K / group, (g + 1)
 * * K / group) see only input channels [g * C / group, (g + 1) * C / group).
 * group == C (and K a multiple of C) is a depthwise convolution; group 1 is
 * tide_builder_conv2d.
 */
tide_ref tide_builder_conv2d_grouped(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                                     int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                     int64_t pad_w, int64_t group);

/*
 * Conv2D with a dilated filter (ONNX Conv's dilations; atrous convolution):
 * filter tap r reads input row oh * stride_h - pad_h + r * dilation_h (and
 * alike for W), so the window spans (R - 1) * dilation_h + 1 rows and OH =
 * (H + 2 * pad_h - ((R - 1) * dilation_h + 1)) / stride_h + 1. Dilations of
 * 1 are tide_builder_conv2d_grouped; group as there.
 */
tide_ref tide_builder_conv2d_dilated(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                                     int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                     int64_t pad_w, int64_t dilation_h, int64_t dilation_w,
                                     int64_t group);

/*
 * The transposed convolution (ONNX's ConvTranspose, the adjoint of Conv2D):
 * x [N, K, H, W] with filter w [K, C / group, R, S] -> [N, C, out_h, out_w],
 * the input gradient of a Conv2D with these strides, pads and groups whose
 * output is x. out_h must satisfy (out_h + 2 * pad_h - R) / stride_h + 1 ==
 * H (and alike for W): out_h from (H - 1) * stride_h + R - 2 * pad_h up to
 * stride_h - 1 more (the rows past the last window are zero). group divides
 * K (1: dense). No bias: add one with tide_builder_bias_add.
 */
tide_ref tide_builder_conv2d_transpose(tide_builder *b, const char *name, tide_ref x, tide_ref w,
                                       int64_t stride_h, int64_t stride_w, int64_t pad_h,
                                       int64_t pad_w, int64_t out_h, int64_t out_w, int64_t group);

/*
 * The transposed convolution of a dilated filter (ONNX ConvTranspose's
 * dilations): the input gradient of tide_builder_conv2d_dilated, so out_h
 * must satisfy (out_h + 2 * pad_h - ((R - 1) * dilation_h + 1)) / stride_h
 * + 1 == H (and alike for W). Dilations of 1 are
 * tide_builder_conv2d_transpose.
 */
tide_ref tide_builder_conv2d_transpose_dilated(tide_builder *b, const char *name, tide_ref x,
                                               tide_ref w, int64_t stride_h, int64_t stride_w,
                                               int64_t pad_h, int64_t pad_w, int64_t dilation_h,
                                               int64_t dilation_w, int64_t out_h, int64_t out_w,
                                               int64_t group);

/*
 * MaxPool2D and AvgPool2D over [N, C, H, W] with a kh x kw window, strides
 * sh, sw and symmetric pads ph, pw (each less than the window); OH = (H + 2 *
 * ph - kh) / sh + 1. AvgPool2D does not count padding cells.
 */
tide_ref tide_builder_max_pool2d(tide_builder *b, const char *name, tide_ref x, int64_t kh,
                                 int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw);
tide_ref tide_builder_avg_pool2d(tide_builder *b, const char *name, tide_ref x, int64_t kh,
                                 int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw);

/* GlobalAvgPool: [N, C, H, W] -> [N, C], the mean of each channel. */
tide_ref tide_builder_global_avg_pool(tide_builder *b, const char *name, tide_ref x);

/*
 * BatchNorm in training mode over x [N, C, H, W] or [N, C] with gamma and
 * beta [C]: normalises with the batch's statistics. Returns output 0, y (x's
 * shape); tide_builder_output(b, ref, 1) and (.., 2) are the batch mean [C]
 * and 1 / sqrt(var + epsilon) [C]. epsilon must be finite and > 0.
 */
tide_ref tide_builder_batch_norm(tide_builder *b, const char *name, tide_ref x, tide_ref gamma,
                                 tide_ref beta, float epsilon);

/* ---- Sequence-model ops: element-wise math (Exp, Log, Div, Sqrt, Max, Min, Gelu) ---- */

/*
 * Element-wise e^x, the natural logarithm, the square root, and GELU in its
 * tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))); the output
 * has x's shape. Outside their domain they give what IEEE 754 gives: Log and
 * Sqrt of a negative number are NaN, Log(0) is -inf.
 */
tide_ref tide_builder_exp(tide_builder *b, const char *name, tide_ref x);
tide_ref tide_builder_log(tide_builder *b, const char *name, tide_ref x);
tide_ref tide_builder_sqrt(tide_builder *b, const char *name, tide_ref x);
tide_ref tide_builder_gelu(tide_builder *b, const char *name, tide_ref x);

/*
 * The error function, element-wise and exact (libm's erff), with its
 * gradient 2 / sqrt(pi) exp(-x^2). GELU in its exact form, as PyTorch's
 * nn.GELU() and ONNX exports have it, is 0.5 x (1 + erf(x / sqrt(2))).
 */
tide_ref tide_builder_erf(tide_builder *b, const char *name, tide_ref x);

/*
 * Element-wise x / y, max(x, y) and min(x, y) with NumPy broadcasting (as
 * tide_builder_add). Division by 0 gives +-inf or NaN as IEEE 754 does. Max
 * (Min) takes y only where y is strictly greater (less) than x, so ties and
 * NaNs take x; the gradient flows to the element taken.
 */
tide_ref tide_builder_div(tide_builder *b, const char *name, tide_ref x, tide_ref y);
tide_ref tide_builder_max(tide_builder *b, const char *name, tide_ref x, tide_ref y);
tide_ref tide_builder_min(tide_builder *b, const char *name, tide_ref x, tide_ref y);

/*
 * Element-wise x raised to y (C's powf) with NumPy broadcasting, as ONNX's
 * Pow and torch.pow of two tensors: a negative x with an integral y keeps
 * the power's sign ((-2)^3 = -8), with any other y is NaN; x^0 = 1 for
 * every x, and 0^y is 0 for y > 0, inf for y < 0. Both inputs train, with
 * PyTorch's gradients: a gradient g at the output reaches x as
 * g y x^(y - 1), 0 where y == 0, and y as g x^y log(x), 0 where x == 0 and
 * y >= 0 and NaN where x < 0 (log's domain).
 */
tide_ref tide_builder_pow(tide_builder *b, const char *name, tide_ref x, tide_ref y);

/* ---- Masks computed from data (Cast, Compare, Select) ---- */

/*
 * tide has no bool tensors: a mask is float32, 1.0 where a condition holds
 * and 0.0 elsewhere, made by tide_builder_compare and read by
 * tide_builder_select (or multiplied in).
 */

/*
 * Element-wise conversion of x (float32 or int32) to `to` (TIDE_DT_FLOAT32
 * or TIDE_DT_INT32; any other value is refused). int32 -> float32 rounds to
 * the nearest float (ties to even); float32 -> int32 truncates toward zero,
 * saturating at INT32_MIN and INT32_MAX, and a NaN becomes 0; to x's own
 * dtype it copies. Only a float32 -> float32 Cast passes a gradient (the
 * identity); a path through int32 contributes none.
 */
tide_ref tide_builder_cast(tide_builder *b, const char *name, tide_ref x, enum tide_data_type to);

/* The comparison a Compare node makes; the numbers are its "mode" attribute on the wire. */
enum tide_compare_mode {
    TIDE_COMPARE_EQUAL = 0,
    TIDE_COMPARE_NOT_EQUAL,
    TIDE_COMPARE_LESS,
    TIDE_COMPARE_LESS_EQUAL,
    TIDE_COMPARE_GREATER,
    TIDE_COMPARE_GREATER_EQUAL,
};

/*
 * 1.0f where `x mode y` holds, else 0.0f (float32), with NumPy broadcasting
 * (as tide_builder_add). x and y must have one dtype, both float32 or both
 * int32 (ints are compared as ints, exactly). A NaN compares false, but
 * for TIDE_COMPARE_NOT_EQUAL, where it is true (IEEE 754). No gradient: the
 * inputs get none through a Compare.
 */
tide_ref tide_builder_compare(tide_builder *b, const char *name, tide_ref x, tide_ref y,
                              enum tide_compare_mode mode);

/*
 * x where cond is not 0 (a NaN cond too), else y; cond, x and y are
 * float32 and broadcast together by NumPy rules. Values pass untouched
 * (-inf and NaN included), so Select(mask, scores, -inf) masks attention
 * scores. The gradient goes to x where cond holds and to y elsewhere
 * (summed back over broadcast axes); cond gets none.
 */
tide_ref tide_builder_select(tide_builder *b, const char *name, tide_ref cond, tide_ref x,
                             tide_ref y);

/* ---- Trigonometric and hyperbolic functions (Trig) ---- */

/* The function a Trig node computes; the numbers are its "fn" attribute on the wire. */
enum tide_trig_fn {
    TIDE_TRIG_SIN = 0,
    TIDE_TRIG_COS,
    TIDE_TRIG_TAN,
    TIDE_TRIG_ASIN,
    TIDE_TRIG_ACOS,
    TIDE_TRIG_ATAN,
    TIDE_TRIG_SINH,
    TIDE_TRIG_COSH,
    TIDE_TRIG_ASINH,
    TIDE_TRIG_ACOSH,
    TIDE_TRIG_ATANH,
};

/*
 * fn(x), element-wise on float32 x (rotary and sinusoidal position
 * embeddings computed in the graph); a value outside the enum is refused.
 * Each element is computed in double and rounded once, on every backend.
 * Outside fn's domain the result is IEEE 754's: asin(1.5) and acosh(0.5)
 * are NaN, atanh(1) is inf. The gradient is dy * fn'(x) (cos x for sin,
 * 1 / (1 + x^2) for atan, ...), also in double.
 */
tide_ref tide_builder_trig(tide_builder *b, const char *name, tide_ref x, enum tide_trig_fn fn);

/* ---- Rounding to integral values (Round) ---- */

/* How a Round node rounds; the numbers are its "mode" attribute on the wire. */
enum tide_round_mode {
    TIDE_ROUND_FLOOR = 0,    /* down: floor(-2.5) = -3 */
    TIDE_ROUND_CEIL,         /* up: ceil(-2.5) = -2 */
    TIDE_ROUND_HALF_TO_EVEN, /* to nearest, ties to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2 */
    TIDE_ROUND_TRUNC,        /* toward zero: trunc(-2.5) = -2 */
};

/*
 * x rounded to an integral value, element-wise on float32 x (quantising,
 * bucketing); a mode outside the enum is refused. TIDE_ROUND_HALF_TO_EVEN
 * is ONNX's Round and torch.round. Exact on every backend; NaN, +-inf and
 * -0 come out as they went in, and a value rounded to zero keeps its sign
 * (-0.5 -> -0). No gradient, as in PyTorch, where it is 0 everywhere: x
 * gets none through a Round, and a Variable whose every path to the loss
 * crosses one is left untrained.
 */
tide_ref tide_builder_round(tide_builder *b, const char *name, tide_ref x,
                            enum tide_round_mode mode);

/* ---- Sequence-model ops: batched products and axis permutation (BatchMatMul, Transpose) ---- */

/*
 * BatchMatMul: a [..., M, K] x b [..., K, N] -> [..., M, N], one matrix
 * product per batch entry; ta and tb transpose the last two axes of a and b
 * first. Each input has rank 2 or more; the batch dims (all but the last
 * two) broadcast as NumPy's do, so a rank-2 b (a weight [D, N]) meets every
 * entry of a [B, S, D], giving [B, S, N]. Rank-2 inputs make it MatMul.
 */
tide_ref tide_builder_batch_matmul(tide_builder *b, const char *name, tide_ref a, tide_ref bm,
                                   bool ta, bool tb);

/*
 * Transpose: permutes the axes of x, output axis i being input axis perm[i];
 * perm (rank entries, rank being x's) holds each of 0..rank-1 once. x may be
 * float32 or int32; the output keeps its dtype.
 */
tide_ref tide_builder_transpose(tide_builder *b, const char *name, tide_ref x, const int64_t *perm,
                                int32_t rank);

/* ---- Sequence-model ops: indexing (Gather, TopK, Mixture-of-Experts routing) ---- */

/*
 * Gather: rows of table [N, d1, ...] (float32) picked by ids (int32, any
 * rank, a scalar too) along axis 0 -> ids' shape + [d1, ...]. An id outside
 * [0, N) fails the step, naming the node, the position and the id. The
 * gradient reaches table (rows picked several times add up); ids get none.
 */
tide_ref tide_builder_gather(tide_builder *b, const char *name, tide_ref table, tide_ref ids);

/*
 * GatherGrad, Gather's gradient as an op of its own: a [num_rows, d1, ...]
 * table of zeros (float32) to which each row of dy [ids' shape, d1, ...] is
 * added at its id (int32, in [0, num_rows)): rows picked several times add
 * up. A scatter-add; with dy of ones, a histogram of ids. No gradient.
 */
tide_ref tide_builder_gather_grad(tide_builder *b, const char *name, tide_ref dy, tide_ref ids,
                                  int64_t num_rows);

/* tide_builder_gather_elements' ignore_index when no index is to be ignored. */
#define TIDE_BUILDER_NO_IGNORE_INDEX INT64_MIN

/*
 * GatherElements: picks along axis (0 <= axis < rank), as ONNX's
 * GatherElements and torch.gather do: y has the shape of indices (int32, of
 * data's rank, at most data's size on every other axis) and, for axis 1 of
 * rank 3, y[i][j][k] = data[i][indices[i][j][k]][k] (data float32). An index
 * in [-d, 0) counts from the end of the d elements along axis; one outside
 * [-d, d) fails the step, naming the node, the position and the index. An
 * index equal to ignore_index (before that wrap-around;
 * TIDE_BUILDER_NO_IGNORE_INDEX for none) gives 0 and no gradient, as
 * NegativeLogLikelihoodLoss's ignore_index. The gradient reaches data
 * (elements picked several times add up); indices get none.
 */
tide_ref tide_builder_gather_elements(tide_builder *b, const char *name, tide_ref data,
                                      tide_ref indices, int64_t axis, int64_t ignore_index);

/*
 * TopK: the k largest values along the last axis of x [..., n] (float32),
 * 1 <= k <= n. Returns output 0, the values [..., k] in descending order;
 * tide_builder_output(b, ref, 1) is their indices [..., k] (int32). Equal
 * values come lower index first; NaN ranks above every number. The gradient
 * flows from the values to the chosen elements of x; the indices have none.
 */
tide_ref tide_builder_top_k(tide_builder *b, const char *name, tide_ref x, int64_t k);

/*
 * MoeRoute: the routing tables of a Mixture-of-Experts layer with experts
 * experts of capacity slots each, from indices [T, k] (int32, each token's k
 * chosen experts, as TopK gives them). Returns output 0, dispatch
 * [experts * capacity] (int32): the token in slot e * capacity + c, or T for
 * an empty slot; tide_builder_output(b, ref, 1) is combine [T, k] (int32):
 * the slot token t's j-th choice got, or experts * capacity when that expert
 * was full and the choice is dropped. Slots are handed out in GShard's
 * order: every token's first choice in token order, then every second
 * choice, and so on. With a zero row appended to x [T, D] (Concat), Gather by
 * dispatch gives the experts' inputs [experts * capacity, D]; with a zero
 * row appended to the experts' outputs, Gather by combine brings them back
 * to the tokens as [T, k, D]. An expert outside [0, experts) fails the step;
 * MoeRoute has no gradient (its outputs are int32).
 */
tide_ref tide_builder_moe_route(tide_builder *b, const char *name, tide_ref indices,
                                int64_t experts, int64_t capacity);

/* ---- Sequence-model ops: normalisation and regularisation (LayerNorm, Dropout) ---- */

/*
 * LayerNorm over the last axis of x [..., D] (rank 1 or more, D >= 1) with
 * gain and bias [D]: y = (x - mean) / sqrt(var + epsilon) * gain + bias, each
 * row's mean and biased variance taken over its D elements. Returns output
 * 0, y (x's shape); tide_builder_output(b, ref, 1) and (.., 2) are each
 * row's mean and 1 / sqrt(var + epsilon) (x's shape without the last axis;
 * scalars for a rank-1 x), which have no gradient. epsilon must be finite
 * and > 0 (1e-5 is usual).
 */
tide_ref tide_builder_layer_norm(tide_builder *b, const char *name, tide_ref x, tide_ref gain,
                                 tide_ref bias, float epsilon);

/*
 * Dropout: in a training step, y = x * mask / (1 - rate), each element kept
 * with probability 1 - rate; in an evaluation (tide_session_eval, or a
 * job's evaluation) y = x. rate must be in [0, 1). The mask depends only on
 * the job's seed, the step, the node's name and seed, and the element, so
 * the gradient (and any re-run of the node) uses the same mask. Two Dropout
 * nodes of one graph draw independent masks, since their names differ; seed
 * changes a node's masks without renaming it.
 */
tide_ref tide_builder_dropout(tide_builder *b, const char *name, tide_ref x, float rate,
                              int64_t seed);

/* ---- Sequence-model ops: fused attention (Attention) ---- */

/*
 * Attention, fused (FlashAttention): o = softmax(q k^T * scale + mask) v per
 * batch and head, without the [Sq, Sk] score matrix. q is [B, H, Sq, D], k
 * and v [B, H, Sk, D]. With causal set, query i sees keys 0..i only, and Sq
 * must equal Sk. scale 0 means 1 / sqrt(D); otherwise it must be finite and
 * > 0. Returns output 0, o [B, H, Sq, D]; tide_builder_output(b, ref, 1) is
 * lse [B, H, Sq], each row's log-sum-exp of its scaled, masked scores, which
 * has no gradient.
 */
tide_ref tide_builder_attention(tide_builder *b, const char *name, tide_ref q, tide_ref k,
                                tide_ref v, bool causal, float scale);

/*
 * Adds a control edge: the node that `node` names runs after the node that
 * `after` names, reading nothing from it ("^after" among its inputs). Adding
 * an edge twice is a no-op; an edge from a node to itself, or one that would
 * close a cycle, is an error. Returns 0, or -1 with the builder's error set.
 */
int tide_builder_control_edge(tide_builder *b, tide_ref node, tide_ref after);

#ifdef __cplusplus
}
#endif

#endif /* TIDE_GRAPH_H */
