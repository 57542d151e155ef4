/* SPDX-License-Identifier: MIT */
/*
 * test_onnx_training.c: imported ONNX models trained in tide and written
 * back as ONNX (onnx/training.c and onnx/export.c, tide/onnx.h).
 *
 * The models are the ones PyTorch 1.13 exported in examples/onnx/ (a CNN, a
 * U-Net, a MobileNet, a byte-level GPT, a padded-text classifier,
 * torchvision's Swin Transformer, a CNN exported in eval mode, a GRU and
 * LSTM reading image rows), with the
 * first three SGD losses PyTorch computed from the same initial weights on
 * the same batches (reference.json). tide trains each .onnx on those
 * batches, at a budget that forces swapping, and must give PyTorch's losses
 * within 1e-4 relative. Then the trained weights are written into the model
 * (tide_onnx_with_values) and the file read back must give the trained
 * session's numbers exactly; initializers the import keeps constant (running
 * statistics, int64 indices) come back byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "runtime/session.h"
#include "tide/client.h"
#include "tide/dataset.h"
#include "tide/onnx.h"

#include "onnx_builder.h"
#include "float_assert.h"

#ifndef TIDE_EXAMPLES_ONNX_DIR
#error "TIDE_EXAMPLES_ONNX_DIR must name examples/onnx"
#endif

/* ============================================================================
 * Files: the .onnx bytes and the .npy batches
 * ========================================================================== */

static uint8_t *read_file(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", TIDE_EXAMPLES_ONNX_DIR, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    assert_true(size > 0);
    rewind(f);
    uint8_t *bytes = malloc((size_t)size);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    *len = (size_t)size;
    return bytes;
}

/*
 * A NumPy .npy of float32 ('<f4') or int64 ('<i8', converted to int32, as
 * tide's ids and labels are), version 1, C order: its values and element
 * count. The examples' files are all of this form.
 */
static void *read_npy(const char *name, bool want_float, int64_t *count)
{
    size_t len;
    uint8_t *bytes = read_file(name, &len);
    assert_true(len > 10);
    assert_memory_equal(bytes, "\x93NUMPY\x01", 7);
    size_t header = (size_t)bytes[8] | (size_t)bytes[9] << 8;
    assert_true(10 + header <= len);
    char *text = calloc(1, header + 1);
    assert_non_null(text);
    memcpy(text, bytes + 10, header);
    bool is_float = strstr(text, "'descr': '<f4'") != NULL;
    assert_true(is_float || strstr(text, "'descr': '<i8'") != NULL);
    assert_true(is_float == want_float);
    assert_non_null(strstr(text, "'fortran_order': False"));
    const char *shape = strstr(text, "'shape': (");
    assert_non_null(shape);
    int64_t n = 1;
    for (const char *p = shape + 10; *p && *p != ')';) {
        char *end;
        long long d = strtoll(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        n *= d;
        p = end;
    }
    free(text);
    size_t elem = is_float ? 4 : 8;
    assert_int_equal(len - 10 - header, (size_t)n * elem);
    const uint8_t *data = bytes + 10 + header;
    void *out = malloc((size_t)n * 4);
    assert_non_null(out);
    if (is_float) {
        memcpy(out, data, (size_t)n * 4);
    } else {
        for (int64_t k = 0; k < n; k++) {
            int64_t v;
            memcpy(&v, data + k * 8, 8);
            assert_true(v >= INT32_MIN && v <= INT32_MAX);
            ((int32_t *)out)[k] = (int32_t)v;
        }
    }
    free(bytes);
    *count = n;
    return out;
}

/* ============================================================================
 * Training the examples
 * ========================================================================== */

struct example {
    const char *model, *inputs, *labels;
    bool float_inputs;
    const char *const *frozen; /* reference.json's buffers */
    size_t n_frozen;
    /* Initializers the import keeps constant by itself (running statistics, int64 indices):
     * no Variable of the name, and byte for byte as exported in the written model. */
    const char *const *constants;
    size_t n_constants;
    int64_t parameters; /* reference.json's (the frozen buffers not counted) */
    int32_t inference_batch_norms; /* BatchNormalization nodes exported in eval mode */
    float lr;
    double losses[3]; /* PyTorch's, reference.json */
};

static const char *const gpt_buffers[] = {"h.0.attn.mask", "h.1.attn.mask"};

static const struct example cnn = {
    .model = "cnn.onnx",
    .inputs = "cnn_images.npy",
    .labels = "cnn_labels.npy",
    .float_inputs = true,
    .parameters = 9098,
    .lr = 0.1f,
    .losses = {2.3454859256744385, 2.203578472137451, 2.136988639831543},
};

/* Grouped and depthwise Conv, ConvTranspose, Resize (nearest and bilinear) and Pad. */
static const struct example unet = {
    .model = "unet.onnx",
    .inputs = "unet_images.npy",
    .labels = "unet_labels.npy",
    .float_inputs = true,
    .parameters = 4842,
    .lr = 0.1f,
    .losses = {2.2489938735961914, 2.2258405685424805, 2.3026602268218994},
};

/* BatchNorm (batch statistics), depthwise Conv, squeeze-and-excitation, HardSwish, SiLU, a
 * channel shuffle, ceil_mode MaxPool, a fire module. */
static const struct example mobilenet = {
    .model = "mobilenet.onnx",
    .inputs = "mobilenet_images.npy",
    .labels = "mobilenet_labels.npy",
    .float_inputs = true,
    .parameters = 1258,
    .lr = 0.1f,
    .losses = {2.2710423469543457, 2.284419059753418, 2.226470470428467},
};

static const struct example gpt = {
    .model = "gpt.onnx",
    .inputs = "gpt_tokens.npy",
    .labels = "gpt_labels.npy",
    .float_inputs = false,
    .frozen = gpt_buffers,
    .n_frozen = 2,
    .parameters = 135168,
    .lr = 0.05f,
    .losses = {5.7855963706970215, 5.689533710479736, 5.691288948059082},
};

/* A padded-text classifier: its attention and pooling masks are computed from the tokens
 * (Equal, Not, Where of -inf, Cast), as an exported BERT computes them from attention_mask. */
static const struct example textclf = {
    .model = "textclf.onnx",
    .inputs = "textclf_tokens.npy",
    .labels = "textclf_labels.npy",
    .float_inputs = false,
    .parameters = 17892,
    .lr = 0.05f,
    .losses = {1.4648630619049072, 1.4208770990371704, 1.312800645828247},
};

static const char *const swin_indices[] = {
    "features.1.0.attn.relative_position_index", "features.1.1.attn.relative_position_index",
    "features.3.0.attn.relative_position_index", "features.3.1.attn.relative_position_index"};

/* torchvision's Swin Transformer on [8, 3, 32, 32]: windowed attention with a relative position
 * bias gathered by int64 indices; each stage's second block shifts its windows (a Slice and Concat
 * roll) and masks across them, the mask built from zeros by ScatterND and the window counts by Mod
 * of the shapes, all folded at import. */
static const struct example swin = {
    .model = "swin.onnx",
    .inputs = "swin_images.npy",
    .labels = "swin_labels.npy",
    .float_inputs = true,
    .constants = swin_indices,
    .n_constants = 4,
    .parameters = 9544,
    .lr = 0.1f,
    .losses = {2.256808280944824, 2.4324190616607666, 3.050323963165283},
};

static const char *const bn_eval_statistics[] = {"bn1d.running_mean", "bn1d.running_var",
                                                 "bn2d.running_mean", "bn2d.running_var"};

/* Exported in eval mode and trained as PyTorch trains it in .eval(): BatchNorm2d after a ReLU and
 * BatchNorm1d after a Linear normalise with their running statistics, which stay as they are,
 * while their scale and bias train; the Dropout is gone. */
static const struct example bn_eval = {
    .model = "bn_eval.onnx",
    .inputs = "bn_eval_images.npy",
    .labels = "bn_eval_labels.npy",
    .float_inputs = true,
    .constants = bn_eval_statistics,
    .n_constants = 4,
    .parameters = 13066,
    .inference_batch_norms = 2,
    .lr = 0.1f,
    .losses = {2.298936128616333, 2.3708701133728027, 2.394526243209839},
};

/* A recurrent classifier of image rows: Conv1d and BatchNorm1d over [B, C, T], a bidirectional
 * GRU and a two-layer LSTM, which the import unrolls, and the last step's state. */
static const struct example rnn = {
    .model = "rnn.onnx",
    .inputs = "rnn_images.npy",
    .labels = "rnn_labels.npy",
    .float_inputs = true,
    .parameters = 8586,
    .lr = 1.0f,
    .losses = {2.3163254261016846, 2.380641222000122, 2.3237123489379883},
};

/* The session's plan at the smallest budget that fits, which swaps; its report checked. */
static struct tide_session *swapping_session(const struct tide_onnx_training *t,
                                             const struct tide_train_options *train)
{
    const char *fetch = t->output.name;
    struct tide_session_options o = tide_session_options_default();
    o.threads = 1;
    o.train = train;
    o.fetches = &fetch;
    o.n_fetches = 1;
    /* No budget: everything resident, the peak without swapping. */
    struct tide_memory_policy policy = tide_memory_policy_default();
    policy.budget_bytes = 0;
    o.memory = &policy;
    struct tide_session *s;
    struct tide_error err = {0};
    if (tide_session_plan(t->graph, t->graph_len, &o, &s, &err) != TIDE_OK)
        fail_msg("plan: %s", err.message);
    assert_non_null(tide_session_plan_report(s));
    uint64_t resident = tide_session_plan_report(s)->predicted_peak_bytes;
    tide_session_free(s);
    /* A budget of one byte does not fit; the report names the smallest that does. */
    policy.budget_bytes = 1;
    assert_int_equal(tide_session_plan(t->graph, t->graph_len, &o, &s, &err), TIDE_DOES_NOT_FIT);
    uint64_t min_budget = tide_session_plan_report(s)->min_budget_bytes;
    tide_session_free(s);
    assert_true(min_budget > 0);
    assert_true(min_budget < resident);
    policy.budget_bytes = min_budget;
    o.budget_bytes = min_budget;
    if (tide_session_new(t->graph, t->graph_len, &o, &s, &err) != TIDE_OK)
        fail_msg("session at %" PRIu64 " bytes: %s", min_budget, err.message);
    const struct tide_plan_report *r = tide_session_plan_report(s);
    assert_true(r->fits);
    assert_true(r->predicted_peak_bytes <= min_budget);
    assert_true(r->swap_out_bytes > 0);
    assert_true(r->swap_in_bytes > 0);
    return s;
}

/* Feeds batch i of the example (rows [i * batch, (i + 1) * batch)). */
static void feed_batch(struct tide_session *s, const struct tide_onnx_training *t,
                       const void *inputs, const int32_t *labels, int64_t i)
{
    struct tide_error err = {0};
    size_t in_bytes = (size_t)t->input.elements * 4;
    size_t label_bytes = (size_t)t->labels.elements * 4;
    if (tide_session_feed(s, t->input.name, (const uint8_t *)inputs + (size_t)i * in_bytes,
                          in_bytes, &err) != TIDE_OK ||
        tide_session_feed(s, t->labels.name, labels + (size_t)i * (size_t)t->labels.elements,
                          label_bytes, &err) != TIDE_OK)
        fail_msg("feed: %s", err.message);
}

/* The session's Variables as tensors named as the import named them (data malloc'd). */
static struct tide_tensor *read_variables(struct tide_session *s, const struct tide_onnx_result *r)
{
    struct tide_tensor *v = calloc((size_t)r->n_variables, sizeof(*v));
    assert_non_null(v);
    const struct tide_graph *g = tide_session_graph(s);
    for (int32_t k = 0; k < r->n_variables; k++) {
        const struct tide_node *node = NULL;
        for (uint32_t n = 0; n < g->n_nodes && !node; n++)
            if (strcmp(g->nodes[n].name, r->variables[k].name) == 0)
                node = &g->nodes[n];
        assert_non_null(node);
        const struct tide_shape *shape = &node->outputs[0].shape;
        v[k].name = r->variables[k].name;
        v[k].dtype = TIDE_DT_FLOAT32;
        v[k].rank = shape->rank;
        memcpy(v[k].dims, shape->dims, (size_t)shape->rank * sizeof(int64_t));
        v[k].bytes = (size_t)tide_shape_numel(shape) * 4;
        void *data = malloc(v[k].bytes);
        assert_non_null(data);
        struct tide_error err = {0};
        if (tide_session_fetch(s, node->name, data, v[k].bytes, &err) != TIDE_OK)
            fail_msg("fetch %s: %s", node->name, err.message);
        v[k].data = data;
    }
    return v;
}

/* The loss of an evaluation (forward only) of batch i. */
static float eval_loss(struct tide_session *s, const struct tide_onnx_training *t,
                       const void *inputs, const int32_t *labels, int64_t i)
{
    struct tide_step_stats stats;
    struct tide_error err = {0};
    feed_batch(s, t, inputs, labels, i);
    if (tide_session_eval(s, &stats, &err) != TIDE_OK)
        fail_msg("eval: %s", err.message);
    float loss;
    assert_int_equal(tide_session_fetch(s, t->loss, &loss, sizeof(loss), &err), TIDE_OK);
    return loss;
}

/* The initializer of that name in the model; fails when there is none. */
static const Onnx__TensorProto *initializer(const Onnx__ModelProto *m, const char *name)
{
    for (size_t k = 0; k < m->graph->n_initializer; k++)
        if (strcmp(m->graph->initializer[k]->name, name) == 0)
            return m->graph->initializer[k];
    fail_msg("no initializer %s", name);
    return NULL;
}

/* The example's constants: no Variable of their names, and the written model holds each as the
 * exported one did, its TensorProto byte for byte. */
static void check_constants(const struct example *e, const struct tide_onnx_result *r,
                            const uint8_t *model, size_t len, const uint8_t *written,
                            size_t written_len)
{
    Onnx__ModelProto *was = onnx__model_proto__unpack(NULL, len, model);
    Onnx__ModelProto *now = onnx__model_proto__unpack(NULL, written_len, written);
    assert_non_null(was);
    assert_non_null(now);
    for (size_t k = 0; k < e->n_constants; k++) {
        for (int32_t v = 0; v < r->n_variables; v++)
            if (strcmp(r->variables[v].name, e->constants[k]) == 0)
                fail_msg("%s: %s is a Variable", e->model, e->constants[k]);
        const Onnx__TensorProto *a = initializer(was, e->constants[k]);
        const Onnx__TensorProto *b = initializer(now, e->constants[k]);
        size_t na = onnx__tensor_proto__get_packed_size(a);
        assert_int_equal(onnx__tensor_proto__get_packed_size(b), na);
        uint8_t *pa = malloc(na), *pb = malloc(na);
        assert_non_null(pa);
        assert_non_null(pb);
        assert_int_equal(onnx__tensor_proto__pack(a, pa), na);
        assert_int_equal(onnx__tensor_proto__pack(b, pb), na);
        if (memcmp(pa, pb, na) != 0)
            fail_msg("%s: %s changed in the written model", e->model, e->constants[k]);
        free(pa);
        free(pb);
    }
    onnx__model_proto__free_unpacked(now, NULL);
    onnx__model_proto__free_unpacked(was, NULL);
}

static void train_example(const struct example *e)
{
    size_t len;
    uint8_t *model = read_file(e->model, &len);
    int64_t n_inputs, n_labels;
    void *inputs = read_npy(e->inputs, e->float_inputs, &n_inputs);
    int32_t *labels = read_npy(e->labels, false, &n_labels);

    struct tide_onnx_training_options to = {
        .loss = TIDE_ONNX_LOSS_XENT, .frozen = e->frozen, .n_frozen = e->n_frozen};
    struct tide_onnx_training t;
    char err_text[512];
    if (tide_onnx_training_graph(model, len, &to, &t, err_text, sizeof(err_text)) != 0)
        fail_msg("%s: %s", e->model, err_text);
    assert_int_equal(n_inputs, 3 * t.input.elements);
    assert_int_equal(n_labels, 3 * t.labels.elements);
    assert_int_equal(t.input.dtype, e->float_inputs ? TIDE_DT_FLOAT32 : TIDE_DT_INT32);
    assert_string_equal(t.labels.name, "labels");
    assert_string_equal(t.loss, "loss");
    assert_string_equal(t.output.name, "logits");
    assert_int_equal(t.parameters, e->parameters);
    /* Eval-mode BatchNorms are counted and noted (the CNNs' training-mode ones are not). */
    assert_int_equal(t.inference_batch_norms, e->inference_batch_norms);
    char note[512];
    tide_onnx_training_note(&t, note, sizeof(note));
    if (e->inference_batch_norms)
        assert_non_null(strstr(note, "2 BatchNormalization nodes are in inference mode (an "
                                     "eval-mode export): their running statistics stay fixed"));
    else
        assert_string_equal(note, "");
    struct tide_onnx_training one = {.inference_batch_norms = 1};
    assert_non_null(strstr(tide_onnx_training_note(&one, note, sizeof(note)),
                           "1 BatchNormalization node is in inference mode (an eval-mode "
                           "export): its running statistics stay fixed"));

    struct tide_train_options train = {
        .loss = t.loss, .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = e->lr};
    struct tide_session *s = swapping_session(&t, &train);
    struct tide_error err = {0};
    for (int64_t i = 0; i < 3; i++) {
        struct tide_step_stats stats;
        feed_batch(s, &t, inputs, labels, i);
        if (tide_session_step(s, &stats, &err) != TIDE_OK)
            fail_msg("%s step %" PRId64 ": %s", e->model, i, err.message);
        assert_true(stats.high_water_bytes <= tide_session_plan_report(s)->budget_bytes);
        float loss;
        assert_int_equal(tide_session_fetch(s, t.loss, &loss, sizeof(loss), &err), TIDE_OK);
        double rel = fabs((double)loss - e->losses[i]) / e->losses[i];
        print_message("%s step %" PRId64 ": tide %.9g, PyTorch %.9g, relative %.2e\n", e->model, i,
                      (double)loss, e->losses[i], rel);
        if (!(rel <= 1e-4))
            fail_msg("%s step %" PRId64 ": loss %.9g, PyTorch's %.9g (relative %.3g > 1e-4)",
                     e->model, i, (double)loss, e->losses[i], rel);
    }
    float trained_loss = eval_loss(s, &t, inputs, labels, 0);

    /* The trained weights written into the model, and the file read back. */
    tide_builder *b = tide_builder_new();
    struct tide_onnx_options io = {.frozen = e->frozen, .n_frozen = e->n_frozen};
    struct tide_onnx_result r;
    assert_int_equal(tide_onnx_import(b, model, len, &io, &r, err_text, sizeof(err_text)), 0);
    tide_builder_free(b);
    struct tide_tensor *values = read_variables(s, &r);
    uint8_t *written;
    size_t written_len, replaced;
    if (tide_onnx_with_values(model, len, e->frozen, e->n_frozen, values, (size_t)r.n_variables,
                              &written, &written_len, &replaced, err_text, sizeof(err_text)) != 0)
        fail_msg("%s: writing: %s", e->model, err_text);
    assert_int_equal(replaced, (size_t)r.n_variables);
    /* A value missing is refused, naming the Variable. */
    uint8_t *none;
    size_t none_len;
    assert_int_equal(tide_onnx_with_values(model, len, e->frozen, e->n_frozen, values + 1,
                                           (size_t)r.n_variables - 1, &none, &none_len, NULL,
                                           err_text, sizeof(err_text)),
                     -1);
    assert_null(none);
    assert_non_null(strstr(err_text, values[0].name));
    check_constants(e, &r, model, len, written, written_len);

    /* Read back: the same Variables hold the trained values, bit for bit ... */
    struct tide_onnx_training back;
    if (tide_onnx_training_graph(written, written_len, &to, &back, err_text, sizeof(err_text)) != 0)
        fail_msg("%s read back: %s", e->model, err_text);
    assert_int_equal(back.parameters, t.parameters);
    struct tide_session_options so = tide_session_options_default();
    so.threads = 1;
    so.train = &train;
    struct tide_session *s2;
    if (tide_session_new(back.graph, back.graph_len, &so, &s2, &err) != TIDE_OK)
        fail_msg("%s read back: %s", e->model, err.message);
    struct tide_tensor *again = read_variables(s2, &r);
    for (int32_t k = 0; k < r.n_variables; k++) {
        assert_int_equal(again[k].bytes, values[k].bytes);
        assert_memory_equal(again[k].data, values[k].data, values[k].bytes);
    }
    /* ... and so give the trained session's loss exactly. */
    float back_loss = eval_loss(s2, &back, inputs, labels, 0);
    assert_true(back_loss == trained_loss);

    for (int32_t k = 0; k < r.n_variables; k++) {
        free((void *)values[k].data);
        free((void *)again[k].data);
    }
    free(values);
    free(again);
    tide_session_free(s2);
    tide_onnx_training_free(&back);
    free(written);
    tide_onnx_result_free(&r);
    tide_session_free(s);
    tide_onnx_training_free(&t);
    free(model);
    free(inputs);
    free(labels);
}

/* PyTorch's CNN: Conv, Relu, MaxPool, Flatten, Gemm; labels [8]. */
static void test_cnn_matches_pytorch(void **state)
{
    (void)state;
    train_example(&cnn);
}

static void test_unet_matches_pytorch(void **state)
{
    (void)state;
    train_example(&unet);
}

static void test_mobilenet_matches_pytorch(void **state)
{
    (void)state;
    train_example(&mobilenet);
}

/* PyTorch's GPT: int64 tokens, the causal mask frozen, logits [4, 32, 256] and labels [4, 32]. */
static void test_gpt_matches_pytorch(void **state)
{
    (void)state;
    train_example(&gpt);
}

static void test_textclf_matches_pytorch(void **state)
{
    (void)state;
    train_example(&textclf);
}

static void test_swin_matches_pytorch(void **state)
{
    (void)state;
    train_example(&swin);
}

static void test_bn_eval_matches_pytorch(void **state)
{
    (void)state;
    train_example(&bn_eval);
}

static void test_rnn_matches_pytorch(void **state)
{
    (void)state;
    train_example(&rnn);
}

/*
 * The GPT's masks are buffers, frozen by name as Consts. Left trainable they
 * are Variables that count as parameters but take no gradient: they reach
 * the loss only through the Equal of the causal mask (a Compare), so a
 * training step leaves them as they were and the losses are the frozen
 * run's.
 */
static void test_frozen_buffers(void **state)
{
    (void)state;
    size_t len;
    uint8_t *model = read_file("gpt.onnx", &len);
    struct tide_onnx_training frozen, not_frozen;
    char err[512];
    struct tide_onnx_training_options to = {.frozen = gpt_buffers, .n_frozen = 2};
    assert_int_equal(tide_onnx_training_graph(model, len, &to, &frozen, err, sizeof(err)), 0);
    assert_int_equal(frozen.parameters, 135168); /* reference.json's, the masks not counted */
    assert_int_equal(frozen.batch, 4);
    assert_int_equal(frozen.classes, 256);
    assert_int_equal(frozen.labels.rank, 2);
    assert_int_equal(frozen.labels.dims[1], 32);
    to.n_frozen = 0;
    to.frozen = NULL;
    if (tide_onnx_training_graph(model, len, &to, &not_frozen, err, sizeof(err)) != 0)
        fail_msg("gpt.onnx, buffers not frozen: %s", err);
    assert_int_equal(not_frozen.parameters, 135168 + 2 * 32 * 32);

    int64_t n_inputs, n_labels;
    int32_t *tokens = read_npy(gpt.inputs, false, &n_inputs);
    int32_t *labels = read_npy(gpt.labels, false, &n_labels);
    struct tide_train_options train = {
        .loss = not_frozen.loss, .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = gpt.lr};
    struct tide_session_options so = tide_session_options_default();
    so.threads = 1;
    so.train = &train;
    struct tide_session *s;
    struct tide_error serr = {0};
    if (tide_session_new(not_frozen.graph, not_frozen.graph_len, &so, &s, &serr) != TIDE_OK)
        fail_msg("session: %s", serr.message);
    struct tide_step_stats stats;
    float loss, mask[32 * 32];
    for (int64_t i = 0; i < 2; i++) {
        feed_batch(s, &not_frozen, tokens, labels, i);
        if (tide_session_step(s, &stats, &serr) != TIDE_OK)
            fail_msg("step %" PRId64 ": %s", i, serr.message);
        assert_int_equal(tide_session_fetch(s, not_frozen.loss, &loss, sizeof(loss), &serr),
                         TIDE_OK);
        if (!(fabs((double)loss - gpt.losses[i]) <= 1e-4 * gpt.losses[i]))
            fail_msg("step %" PRId64 ": loss %.9g, PyTorch's %.9g", i, (double)loss, gpt.losses[i]);
    }
    assert_int_equal(tide_session_fetch(s, "h.0.attn.mask", mask, sizeof(mask), &serr), TIDE_OK);
    for (int r = 0; r < 32; r++)
        for (int k = 0; k < 32; k++)
            assert_float_equal(mask[r * 32 + k], k <= r ? 1.0f : 0.0f, 0);
    tide_session_free(s);
    free(tokens);
    free(labels);
    tide_onnx_training_free(&not_frozen);
    tide_onnx_training_free(&frozen);
    tide_onnx_training_free(NULL);
    free(model);
}

/* Outputs, losses and shapes that do not fit are refused with what is wrong. */
static void test_refusals(void **state)
{
    (void)state;
    size_t len;
    uint8_t *model = read_file("cnn.onnx", &len);
    struct tide_onnx_training t;
    char err[512];
    struct tide_onnx_training_options to = {.output = "probabilities"};
    assert_int_equal(tide_onnx_training_graph(model, len, &to, &t, err, sizeof(err)), -1);
    assert_string_equal(err, "the model has no output \"probabilities\"; its outputs: logits");
    assert_null(t.graph);
    to = (struct tide_onnx_training_options){.output = "logits", .loss = TIDE_ONNX_LOSS_NONE};
    assert_int_equal(tide_onnx_training_graph(model, len, &to, &t, err, sizeof(err)), -1);
    assert_string_equal(err,
                        "loss none wants the output to be the scalar loss; \"logits\" is [8, 10]");
    /* What a dataset of images and class labels must give the model. */
    to = (struct tide_onnx_training_options){0};
    assert_int_equal(tide_onnx_training_graph(model, len, &to, &t, err, sizeof(err)), 0);
    assert_int_equal(tide_onnx_training_check_examples(&t, 0, 784, 10, err, sizeof(err)), 0);
    assert_int_equal(tide_onnx_training_check_examples(&t, 8, 784, 3, err, sizeof(err)), 0);
    assert_int_equal(tide_onnx_training_check_examples(&t, 16, 784, 10, err, sizeof(err)), -1);
    assert_string_equal(err, "the model has a static batch of 8: a batch of 16 can only stand for "
                             "a dynamic batch dimension (export the model with the batch you "
                             "want)");
    assert_int_equal(tide_onnx_training_check_examples(&t, 0, 3072, 10, err, sizeof(err)), -1);
    assert_string_equal(err, "input \"images\" takes 6272 float32 values per batch of 8; the "
                             "examples are 3072 float32 values each");
    assert_int_equal(tide_onnx_training_check_examples(&t, 0, 784, 11, err, sizeof(err)), -1);
    assert_string_equal(err, "the examples have 11 classes; output \"logits\" scores 10");
    tide_onnx_training_free(&t);
    /* mse: float targets of the output's shape. */
    to.loss = TIDE_ONNX_LOSS_MSE;
    assert_int_equal(tide_onnx_training_graph(model, len, &to, &t, err, sizeof(err)), 0);
    assert_int_equal(t.labels.dtype, TIDE_DT_FLOAT32);
    assert_int_equal(t.labels.rank, 2);
    assert_int_equal(t.labels.elements, 80);
    assert_int_equal(t.classes, 0);
    assert_int_equal(tide_onnx_training_check_examples(&t, 0, 784, 10, err, sizeof(err)), -1);
    assert_string_equal(err, "the loss on output \"logits\" wants float32 targets of shape [10] "
                             "an example; the labels are int class labels (int32) of shape [] "
                             "an example");
    assert_int_equal(tide_onnx_training_check_dataset(&t, 0, 784, TIDE_DT_FLOAT32, (int64_t[]){10},
                                                      1, 0, err, sizeof(err)),
                     0);
    assert_int_equal(tide_onnx_training_check_dataset(&t, 0, 784, TIDE_DT_FLOAT32,
                                                      (int64_t[]){2, 5}, 2, 0, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "the loss on output \"logits\" wants float32 targets of shape [10] "
                             "an example; the labels are float32 targets of shape [2, 5] an "
                             "example");
    /* loss none on a model of one graph input: nowhere to feed labels. */
    struct tide_onnx_training own = {.batch = 8, .input = t.input, .loss = "score"};
    snprintf(own.output.name, sizeof(own.output.name), "score");
    assert_int_equal(tide_onnx_training_check_dataset(&own, 0, 784, TIDE_DT_INT32, NULL, 0, 10, err,
                                                      sizeof(err)),
                     -1);
    assert_string_equal(err, "loss none: the model's graph inputs are \"images\" only, so there "
                             "is no input to feed the labels to (a model that computes its own "
                             "loss takes its labels as a second graph input)");
    tide_onnx_training_free(&t);
    /* Not ONNX: the import's message. */
    assert_int_equal(tide_onnx_training_graph(model, 20, NULL, &t, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not an ONNX model"));
    enum tide_onnx_loss loss;
    assert_int_equal(tide_onnx_loss_parse("mse", &loss), 0);
    assert_int_equal(loss, TIDE_ONNX_LOSS_MSE);
    assert_int_equal(tide_onnx_loss_parse("nll", &loss), -1);
    assert_string_equal(tide_onnx_loss_name(TIDE_ONNX_LOSS_NONE), "none");
    /* --frozen's list: names between commas, empty ones skipped. */
    char *copy;
    const char **names;
    size_t n;
    assert_int_equal(tide_onnx_split_names("h.0.attn.mask,,h.1.attn.mask,", &copy, &names, &n), 0);
    assert_int_equal(n, 2);
    assert_string_equal(names[0], "h.0.attn.mask");
    assert_string_equal(names[1], "h.1.attn.mask");
    free(copy);
    free(names);
    assert_int_equal(tide_onnx_split_names(NULL, &copy, &names, &n), 0);
    assert_int_equal(n, 0);
    assert_null(names);
    free(model);
}

/*
 * --dim's list (tide_onnx_parse_dims): NAME=SIZE between commas, each name once, each size
 * 1 to 2^31 - 1; anything else refused naming the entry. And a training graph takes the
 * sizes: a model whose input x is [batch, seq, 4] (dynamic_axes {0: "batch", 1: "seq"}).
 */
static void test_dims(void **state)
{
    (void)state;
    char *copy, err[256];
    struct tide_onnx_dim *dims;
    size_t n;
    assert_int_equal(tide_onnx_parse_dims("seq=128,,heads=4,", &copy, &dims, &n, err, sizeof(err)),
                     0);
    assert_int_equal(n, 2);
    assert_string_equal(dims[0].name, "seq");
    assert_int_equal(dims[0].size, 128);
    assert_string_equal(dims[1].name, "heads");
    assert_int_equal(dims[1].size, 4);
    free(copy), free(dims);
    assert_int_equal(tide_onnx_parse_dims(NULL, &copy, &dims, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0);
    assert_null(dims);
    static const struct {
        const char *list, *want;
    } bad[] = {
        {"seq", "dimension \"seq\" is not NAME=SIZE (as seq=128)"},
        {"=4", "dimension \"=4\" is not NAME=SIZE (as seq=128)"},
        {"seq=0", "dimension \"seq=0\" has a SIZE that is not a whole number from 1 to "
                  "2147483647"},
        {"seq=2147483648", "dimension \"seq=2147483648\" has a SIZE that is not a whole number "
                           "from 1 to 2147483647"},
        {"seq=12x", "dimension \"seq=12x\" has a SIZE that is not a whole number from 1 to "
                    "2147483647"},
        {"seq=", "dimension \"seq=\" has a SIZE that is not a whole number from 1 to "
                 "2147483647"},
        {"seq=8,batch=2,seq=9", "dimension \"seq=9\" names a dimension given before"},
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        assert_int_equal(tide_onnx_parse_dims(bad[k].list, &copy, &dims, &n, err, sizeof(err)), -1);
        assert_string_equal(err, bad[k].want);
        assert_null(copy);
        assert_null(dims);
        assert_int_equal(n, 0);
    }
    assert_int_equal(tide_onnx_parse_dims("seq=2147483647", &copy, &dims, &n, err, sizeof(err)), 0);
    assert_int_equal(dims[0].size, 2147483647);
    free(copy), free(dims);

    struct tide_test_onnx *m = tide_test_onnx_seq_linear(4, 3, 0);
    size_t len;
    uint8_t *model = tide_test_onnx_pack(m, &len);
    tide_test_onnx_free(m);
    struct tide_onnx_training t;
    struct tide_onnx_dim seq = {"seq", 6};
    struct tide_onnx_training_options o = {.batch_size = 2, .dims = &seq, .n_dims = 1};
    assert_int_equal(tide_onnx_training_graph(model, len, &o, &t, err, sizeof(err)), 0);
    assert_int_equal(t.input.rank, 3);
    assert_int_equal(t.input.dims[0], 2);
    assert_int_equal(t.input.dims[1], 6);
    assert_int_equal(t.input.dims[2], 4);
    assert_int_equal(t.labels.elements, 12); /* xent over [B, S, V]: labels [B, S] */
    tide_onnx_training_free(&t);
    o.n_dims = 0;
    assert_int_equal(tide_onnx_training_graph(model, len, &o, &t, err, sizeof(err)), -1);
    assert_string_equal(err, "graph input \"x\" has a dynamic dimension 1 (seq) that is not the "
                             "batch: give its size by name in the import options (tidectl and "
                             "tide-bench: --dim seq=N)");
    free(model);
}

/*
 * A classifier of two graph inputs, as a BERT's input_ids and attention_mask:
 * float features x [bx, 4] and an int64 mask [bm, 4] whose zeros drop
 * features (Where(Equal(mask, 0), 0, x)), then logits = x' w, w [4, 3]. extra
 * adds that many more float inputs [bx, 1], unused.
 */
static uint8_t *two_input_model(int64_t bx, int64_t bm, int extra, size_t *len)
{
    struct tide_test_onnx *m = tide_test_onnx_new(14);
    tide_test_onnx_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){bx, 4}, -1);
    tide_test_onnx_input(m, "mask", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, (int64_t[]){bm, 4},
                         -1);
    for (int k = 0; k < extra; k++) {
        char name[16];
        snprintf(name, sizeof(name), "extra%d", k);
        tide_test_onnx_input(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 2, (int64_t[]){bx, 1},
                             -1);
    }
    tide_test_onnx_init_i(m, "zero", 0, NULL, (int64_t[]){0});
    /* A Constant, not an initializer: a float initializer would be a trained Variable. */
    Onnx__NodeProto *c = tide_test_onnx_node(m, "Constant", "fzero_c", TIDE_TEST_NAMES(NULL),
                                             TIDE_TEST_NAMES("fzero"));
    tide_test_onnx_attr_t(m, c, "value",
                          tide_test_onnx_tensor(m, "fzero_v", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
                                                0, NULL, (float[]){0}));
    static const float w[12] = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f,  -0.6f,
                                0.7f, -0.8f, 0.9f, 1.0f, -1.1f, 1.2f};
    tide_test_onnx_init_f(m, "w", 2, (int64_t[]){4, 3}, w);
    tide_test_onnx_node(m, "Equal", "eq", TIDE_TEST_NAMES("mask", "zero"), TIDE_TEST_NAMES("pad"));
    tide_test_onnx_node(m, "Where", "where", TIDE_TEST_NAMES("pad", "fzero", "x"),
                        TIDE_TEST_NAMES("kept"));
    tide_test_onnx_node(m, "MatMul", "mm", TIDE_TEST_NAMES("kept", "w"), TIDE_TEST_NAMES("logits"));
    tide_test_onnx_output(m, "logits");
    uint8_t *bytes = tide_test_onnx_pack(m, len);
    assert_non_null(bytes);
    tide_test_onnx_free(m);
    return bytes;
}

/*
 * Several graph inputs of examples (xent, mse) are every input, sharing the
 * batch; one step through the mask trains only the kept features' rows of w.
 */
static void test_several_inputs(void **state)
{
    (void)state;
    size_t len;
    uint8_t *model = two_input_model(2, 2, 0, &len);
    struct tide_onnx_training t;
    char err[512];
    assert_int_equal(tide_onnx_training_graph(model, len, NULL, &t, err, sizeof(err)), 0);
    assert_int_equal(t.n_inputs, 2);
    assert_string_equal(t.input.name, "x");
    assert_string_equal(t.inputs[0].name, "x");
    assert_int_equal(t.inputs[0].dtype, TIDE_DT_FLOAT32);
    assert_string_equal(t.inputs[1].name, "mask");
    assert_int_equal(t.inputs[1].dtype, TIDE_DT_INT32);
    assert_int_equal(t.inputs[1].elements, 8);
    assert_int_equal(t.batch, 2);
    assert_int_equal(t.classes, 3);
    assert_int_equal(t.parameters, 12);
    /* The examples: both arrays, in order, of the inputs' kinds. */
    const enum tide_data_type dtypes[2] = {TIDE_DT_FLOAT32, TIDE_DT_INT32};
    const char *const sources[2] = {"x.npy", "mask.npy"};
    assert_int_equal(tide_onnx_training_check_feeds(&t, 0, 2, dtypes, (int64_t[]){4, 4}, sources,
                                                    TIDE_DT_INT32, NULL, 0, 3, err, sizeof(err)),
                     0);
    assert_int_equal(tide_onnx_training_check_feeds(
                         &t, 0, 2, (enum tide_data_type[]){TIDE_DT_FLOAT32, TIDE_DT_FLOAT32},
                         (int64_t[]){4, 4}, sources, TIDE_DT_INT32, NULL, 0, 3, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "input \"mask\" takes 8 int32 values per batch of 2; the examples "
                             "of mask.npy are 4 float32 values each");
    assert_int_equal(tide_onnx_training_check_feeds(&t, 0, 2, dtypes, (int64_t[]){4, 5}, NULL,
                                                    TIDE_DT_INT32, NULL, 0, 3, err, sizeof(err)),
                     -1);
    assert_string_equal(err, "input \"mask\" takes 8 int32 values per batch of 2; the examples "
                             "are 5 int32 values each");
    assert_int_equal(tide_onnx_training_check_examples(&t, 0, 4, 3, err, sizeof(err)), -1);
    assert_string_equal(err, "the model has 2 graph inputs of examples (\"x\", \"mask\") but "
                             "the examples come in 1 array: give one per input, in the model's "
                             "order");
    /* Synthetic examples are one float32 array: refused for it, naming both inputs. */
    struct tide_synthetic_options syn = {0};
    assert_int_equal(tide_onnx_training_synthetic(&t, &syn, err, sizeof(err)), -1);
    assert_string_equal(err, "--dataset synthetic makes one float32 array of examples, and the "
                             "model has 2 graph inputs of examples (\"x\", \"mask\"): give one "
                             "file per input, --data A,B");

    /* One SGD step: w -= lr * kept^T (softmax - onehot) / B, with row 3 of w dropped by the mask.
     */
    struct tide_train_options train = {
        .optimizer = TIDE_OPTIMIZER_SGD, .learning_rate = 0.5f, .loss = t.loss};
    struct tide_session_options so = tide_session_options_default();
    so.backend_name = "cpu";
    so.train = &train;
    struct tide_session *s;
    struct tide_error e = {0};
    if (tide_session_new(t.graph, t.graph_len, &so, &s, &e) != TIDE_OK)
        fail_msg("%s", e.message);
    static const float x[8] = {1, 2, -1, 0.5f, -0.5f, 1, 2, -2};
    static const int32_t mask[8] = {1, 1, 1, 0, 1, 0, 1, 1}, labels[2] = {2, 0};
    assert_int_equal(tide_session_feed(s, t.inputs[0].name, x, sizeof(x), &e), TIDE_OK);
    assert_int_equal(tide_session_feed(s, t.inputs[1].name, mask, sizeof(mask), &e), TIDE_OK);
    assert_int_equal(tide_session_feed(s, t.labels.name, labels, sizeof(labels), &e), TIDE_OK);
    struct tide_step_stats stats;
    if (tide_session_step(s, &stats, &e) != TIDE_OK)
        fail_msg("%s", e.message);
    static const float w0[12] = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f,  -0.6f,
                                 0.7f, -0.8f, 0.9f, 1.0f, -1.1f, 1.2f};
    double want[12], loss = 0;
    for (int i = 0; i < 12; i++)
        want[i] = w0[i];
    for (int row = 0; row < 2; row++) {
        double kept[4], z[3], p[3], sum = 0;
        for (int k = 0; k < 4; k++)
            kept[k] = mask[row * 4 + k] ? x[row * 4 + k] : 0;
        for (int c = 0; c < 3; c++) {
            z[c] = 0;
            for (int k = 0; k < 4; k++)
                z[c] += kept[k] * w0[k * 3 + c];
            sum += exp(z[c]);
        }
        for (int c = 0; c < 3; c++)
            p[c] = exp(z[c]) / sum;
        loss += -log(p[labels[row]]) / 2;
        for (int k = 0; k < 4; k++)
            for (int c = 0; c < 3; c++)
                want[k * 3 + c] -= 0.5 * kept[k] * (p[c] - (c == labels[row])) / 2;
    }
    float got_loss, w[12];
    assert_int_equal(tide_session_fetch(s, t.loss, &got_loss, sizeof(got_loss), &e), TIDE_OK);
    assert_float_equal(got_loss, loss, 1e-6);
    assert_int_equal(tide_session_fetch(s, "w", w, sizeof(w), &e), TIDE_OK);
    for (int k = 0; k < 12; k++) {
        if (fabs(w[k] - want[k]) > 1e-6)
            fail_msg("w[%d] is %.9g, want %.9g", k, w[k], want[k]);
    }
    tide_session_free(s);
    tide_onnx_training_free(&t);
    free(model);

    /* Inputs that disagree on the batch (a mask [1, 4] broadcasts, so the import takes it). */
    model = two_input_model(2, 1, 0, &len);
    assert_int_equal(tide_onnx_training_graph(model, len, NULL, &t, err, sizeof(err)), -1);
    assert_string_equal(err, "inputs \"x\" [2, 4] and \"mask\" [1, 4] differ in their first "
                             "dimension, the batch both must share");
    assert_null(t.graph);
    free(model);
    /* Eight inputs are taken; nine are too many. */
    model = two_input_model(2, 2, 6, &len);
    assert_int_equal(tide_onnx_training_graph(model, len, NULL, &t, err, sizeof(err)), 0);
    assert_int_equal(t.n_inputs, 8);
    assert_string_equal(t.inputs[7].name, "extra5");
    tide_onnx_training_free(&t);
    free(model);
    model = two_input_model(2, 2, 7, &len);
    assert_int_equal(tide_onnx_training_graph(model, len, NULL, &t, err, sizeof(err)), -1);
    assert_string_equal(err, "the model has 9 graph inputs besides its initializers; tide trains "
                             "a model of 1 to 8 inputs of examples");
    free(model);
    /* Loss none keeps its rule: two inputs are the examples and the labels. */
    model = two_input_model(2, 2, 1, &len);
    struct tide_onnx_training_options none = {.loss = TIDE_ONNX_LOSS_NONE};
    assert_int_equal(tide_onnx_training_graph(model, len, &none, &t, err, sizeof(err)), -1);
    assert_string_equal(err, "the model has 3 graph inputs besides its initializers; with loss "
                             "none tide trains a model of one input, the batch of examples, or "
                             "two: the examples and the labels its own loss reads");
    free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cnn_matches_pytorch),
        cmocka_unit_test(test_unet_matches_pytorch),
        cmocka_unit_test(test_mobilenet_matches_pytorch),
        cmocka_unit_test(test_gpt_matches_pytorch),
        cmocka_unit_test(test_textclf_matches_pytorch),
        cmocka_unit_test(test_swin_matches_pytorch),
        cmocka_unit_test(test_bn_eval_matches_pytorch),
        cmocka_unit_test(test_rnn_matches_pytorch),
        cmocka_unit_test(test_frozen_buffers),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_dims),
        cmocka_unit_test(test_several_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
