/* SPDX-License-Identifier: MIT */
/*
 * models-lm.c: the decoder-only language models of tide/models.h — the
 * Transformer and its Mixture-of-Experts variant — built with the graph
 * builder.
 *
 * The residual stream is kept as a matrix [B * S, D] (tokens by features),
 * so that every dense layer is one MatMul + BiasAdd and LayerNorm works on
 * the last axis; only attention sees [B, H, S, D / H], through a Reshape and
 * a Transpose each way. As in models.c, the builder's errors are sticky:
 * the layers are straight lists of calls, checked once by the caller.
 *
 * The Mixture-of-Experts layer never computes every expert on every token.
 * MoeRoute turns each token's top-2 experts into a dispatch list (which
 * token sits in each of the experts * capacity slots, or "none") and a
 * combine list (which slot holds each of a token's two choices, or
 * "dropped"). "None" and "dropped" are the index one past the end, so a
 * zero row appended to the table (Concat) makes Gather return zeros for
 * them. Each expert gathers the C tokens of its slots and runs its own two
 * dense layers (its own Variables, so that each update is small and each
 * expert's weights are homed and moved alone); their outputs, concatenated
 * [E * C, D], are gathered back by the combine list, and a dropped choice
 * adds nothing.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/builder-impl.h"
#include "tide/models.h"

/* LayerNorm's epsilon, as PyTorch's default. */
#define LN_EPSILON 1e-5f
/*
 * The stddev of the token and position embeddings: 1, as PyTorch's
 * nn.Embedding starts. With GPT-2's 0.02 the residual stream starts with
 * little of the token in it, and the default Transformer sat near the bigram
 * loss for most of its 300 steps (held-out 2.58 nats/byte instead of 2.23).
 */
#define EMBED_STDDEV 1.0f
/* Each token's choices of expert. */
#define MOE_TOP_K 2

struct tide_model_lm_options tide_model_lm_options_default(void)
{
    return (struct tide_model_lm_options){
        .batch = 32,
        .seq_len = 128,
        .vocab = 256,
        .d_model = 128,
        .layers = 4,
        .heads = 4,
        .dropout = TIDE_MODEL_LM_DROPOUT,
        .experts = 8,
        .capacity_factor = 1.25,
        .aux_loss_weight = 0.01f,
    };
}

struct tide_model_lm_options tide_model_lm_options_with(const struct tide_model_lm_options *flags)
{
    struct tide_model_lm_options m = tide_model_lm_options_default();
    m.batch = flags->batch;
    if (flags->seq_len)
        m.seq_len = flags->seq_len;
    if (flags->vocab)
        m.vocab = flags->vocab;
    if (flags->d_model)
        m.d_model = flags->d_model;
    if (flags->layers)
        m.layers = flags->layers;
    if (flags->heads)
        m.heads = flags->heads;
    if (flags->experts)
        m.experts = flags->experts;
    if (flags->capacity_factor > 0)
        m.capacity_factor = flags->capacity_factor;
    if (flags->dropout >= 0)
        m.dropout = flags->dropout;
    return m;
}

int64_t tide_model_moe_capacity(int64_t tokens, int64_t experts, double capacity_factor)
{
    if (tokens < 1 || experts < 1 || !(capacity_factor > 0) || !isfinite(capacity_factor))
        return -1;
    double c = ceil(capacity_factor * (double)tokens * MOE_TOP_K / (double)experts);
    return c > (double)INT32_MAX ? -1 : (int64_t)c;
}

/* ============================================================================
 * Layers
 * ========================================================================== */

/* The bound of a weight's uniform initialisation, 1 / sqrt(fan_in), as PyTorch's nn.Linear. */
static float init_bound(int64_t fan_in)
{
    return 1.0f / sqrtf((float)fan_in);
}

/* A [B * S, in] x [in, units] dense layer with bias, in scope `scope`. */
static tide_ref dense(tide_builder *b, const char *scope, tide_ref x, int64_t in, int64_t units)
{
    int64_t w_dims[2] = {in, units}, b_dims[1] = {units};
    tide_builder_push_scope(b, scope);
    tide_ref w = tide_builder_variable(b, "w", 2, w_dims, "uniform", init_bound(in), true);
    tide_ref bias = tide_builder_variable(b, "b", 1, b_dims, "zeros", 1.0f, true);
    tide_ref y =
        tide_builder_bias_add(b, NULL, tide_builder_matmul(b, NULL, x, w, false, false), bias);
    tide_builder_pop_scope(b);
    return y;
}

/* LayerNorm over the last axis (d features) in scope `scope`: gain "ones", bias "zeros". */
static tide_ref layer_norm(tide_builder *b, const char *scope, tide_ref x, int64_t d)
{
    tide_builder_push_scope(b, scope);
    tide_ref gain = tide_builder_variable(b, "gain", 1, &d, "ones", 1.0f, true);
    tide_ref bias = tide_builder_variable(b, "bias", 1, &d, "zeros", 1.0f, true);
    tide_ref y = tide_builder_layer_norm(b, NULL, x, gain, bias, LN_EPSILON);
    tide_builder_pop_scope(b);
    return y;
}

/* Dropout of x at o->dropout; x itself when the rate is 0. Each node's name keys its masks. */
static tide_ref dropout(tide_builder *b, const struct tide_model_lm_options *o, tide_ref x)
{
    if (o->dropout == 0)
        return x;
    return tide_builder_dropout(b, NULL, x, o->dropout, 0);
}

/* [B * S, D] -> [B, H, S, D / H]: the heads apart, for attention. */
static tide_ref split_heads(tide_builder *b, const struct tide_model_lm_options *o, tide_ref x)
{
    int64_t dims[4] = {o->batch, o->seq_len, o->heads, o->d_model / o->heads};
    static const int64_t perm[4] = {0, 2, 1, 3};
    return tide_builder_transpose(b, NULL, tide_builder_reshape(b, NULL, x, 4, dims), perm, 4);
}

/* Causal self-attention of the normalised stream h [B * S, D], in scope "attn". */
static tide_ref attention(tide_builder *b, const struct tide_model_lm_options *o, tide_ref h)
{
    int64_t d = o->d_model;
    static const int64_t perm[4] = {0, 2, 1, 3};
    int64_t flat[2] = {o->batch * o->seq_len, d};
    tide_builder_push_scope(b, "attn");
    tide_ref q = split_heads(b, o, dense(b, "q", h, d, d));
    tide_ref k = split_heads(b, o, dense(b, "k", h, d, d));
    tide_ref v = split_heads(b, o, dense(b, "v", h, d, d));
    tide_ref a = tide_builder_attention(b, NULL, q, k, v, true, 0.0f);
    a = tide_builder_reshape(b, NULL, tide_builder_transpose(b, NULL, a, perm, 4), 2, flat);
    tide_ref y = dense(b, "out", a, d, d);
    tide_builder_pop_scope(b);
    return y;
}

/* The feed-forward layer: dense to 4 * D, Gelu, dense back to D, in scope "mlp". */
static tide_ref mlp(tide_builder *b, const struct tide_model_lm_options *o, tide_ref h)
{
    int64_t d = o->d_model;
    tide_builder_push_scope(b, "mlp");
    tide_ref y = tide_builder_gelu(b, NULL, dense(b, "fc1", h, d, 4 * d));
    y = dense(b, "fc2", y, 4 * d, d);
    tide_builder_pop_scope(b);
    return y;
}

/* x [rows, d] with a row of zeros appended: [rows + 1, d], so that index rows gathers zeros. */
static tide_ref with_zero_row(tide_builder *b, const char *zeros_name, tide_ref x, int64_t d)
{
    int64_t dims[2] = {1, d};
    float *zeros = calloc((size_t)d, sizeof(float));
    if (!zeros) {
        tide__builder_set_error(b, "moe: out of memory for %" PRId64 " zeros", d);
        return TIDE_REF_NONE;
    }
    tide_ref z = tide_builder_constant(b, zeros_name, TIDE_DT_FLOAT32, 2, dims, zeros);
    free(zeros);
    tide_ref parts[2] = {x, z};
    return tide_builder_concat(b, NULL, parts, 2, 0);
}

/*
 * The Mixture-of-Experts layer of h [T, D] (T = B * S tokens), in scope
 * "moe": the softmax gate, top-2 routing with capacity, the experts over
 * their slots, the combination weighted by the two gate values. Adds this
 * layer's sum_e f_e * P_e to *aux (a scalar; TIDE_REF_NONE before the first
 * layer), which the model scales by E and the weight, and returns the
 * layer's output.
 */
static tide_ref moe(tide_builder *b, const struct tide_model_lm_options *o, tide_ref h,
                    tide_ref token_ones, tide_ref *aux)
{
    int64_t t = o->batch * o->seq_len, d = o->d_model, f = 4 * d, e = o->experts;
    int64_t c = tide_model_moe_capacity(t, e, o->capacity_factor);
    tide_builder_push_scope(b, "moe");

    /* The gate: probabilities over experts, each token's two best and their weights. */
    int64_t gate_dims[2] = {d, e};
    tide_ref w_gate =
        tide_builder_variable(b, "gate/w", 2, gate_dims, "uniform", init_bound(d), true);
    tide_ref probs =
        tide_builder_softmax(b, "probs", tide_builder_matmul(b, NULL, h, w_gate, false, false), -1);
    tide_ref top = tide_builder_top_k(b, "top2", probs, MOE_TOP_K);
    tide_ref choices = tide_builder_output(b, top, 1); /* int32 [T, 2] */

    /* Dispatch: which token (or none) sits in each of the E * C slots, expert by expert. */
    tide_ref route = tide_builder_moe_route(b, "route", choices, e, c);
    tide_ref combine = tide_builder_output(b, route, 1); /* int32 [T, 2] */
    tide_ref tokens = with_zero_row(b, "no_token", h, d);

    /*
     * The experts, each a dense layer to F, Gelu and a dense layer back to D
     * over the C tokens routed to it (gathered by its slice of the dispatch
     * list, zeros for empty slots), each with weights of its own: an update,
     * a fetch or a swap moves one expert's [D, F], never all experts' at once.
     */
    tide_ref *outs = calloc((size_t)e, sizeof(*outs));
    if (!outs) {
        tide__builder_set_error(b, "moe: out of memory for %" PRId64 " experts", e);
        tide_builder_pop_scope(b);
        return TIDE_REF_NONE;
    }
    for (int64_t x = 0; x < e; x++) {
        char scope[32];
        snprintf(scope, sizeof(scope), "expert%" PRId64, x);
        tide_builder_push_scope(b, scope);
        int64_t begin = x * c;
        tide_ref slots = tide_builder_slice(b, "slots", route, &begin, &c, 1); /* int32 [C] */
        tide_ref xe = tide_builder_gather(b, "dispatch", tokens, slots);       /* [C, D] */
        tide_ref y = tide_builder_gelu(b, NULL, dense(b, "fc1", xe, d, f));
        outs[x] = dense(b, "fc2", y, f, d);
        tide_builder_pop_scope(b);
    }
    tide_ref y = tide_builder_concat(b, "experts", outs, (int32_t)e, 0); /* [E * C, D] */
    free(outs);

    /* Combine: each token's two slots (or zeros when dropped), weighted by their gate values. */
    tide_ref picked = tide_builder_gather(b, "combine", with_zero_row(b, "dropped", y, d),
                                          combine); /* [T, 2, D] */
    int64_t weight_dims[3] = {t, MOE_TOP_K, 1};
    tide_ref weights = tide_builder_reshape(b, NULL, top, 3, weight_dims);
    int64_t choice_axis[1] = {1};
    tide_ref out = tide_builder_reduce_sum(b, NULL, tide_builder_mul(b, NULL, picked, weights),
                                           choice_axis, 1, false);

    /*
     * Load balance (Switch Transformer, GShard): f_e, the share of tokens
     * whose first choice is e (a histogram of the first choices: GatherGrad
     * adds each token's 1 at its expert, no gradient), against P_e, the mean
     * gate probability (the gradient's path). The histogram is O(E); the
     * one-hot rows of an [E, E] identity it replaces made a 4,097-expert
     * graph carry 64 MiB of constant and a 32,769-expert one 4 GiB.
     */
    int64_t first_begin[2] = {0, 0}, first_size[2] = {t, 1}, first_dims[1] = {t};
    tide_ref first = tide_builder_reshape(
        b, NULL, tide_builder_slice(b, NULL, choices, first_begin, first_size, 2), 1, first_dims);
    int64_t token_axis[1] = {0};
    int64_t share_dims[1] = {e};
    tide_ref share = tide_builder_scale(
        b, "share",
        tide_builder_reshape(b, NULL, tide_builder_gather_grad(b, NULL, token_ones, first, e), 1,
                             share_dims),
        1.0f / (float)t);
    tide_ref mean_prob = tide_builder_reduce_mean(b, "mean_prob", probs, token_axis, 1, false);
    tide_ref balance = tide_builder_reduce_sum(
        b, "balance", tide_builder_mul(b, NULL, share, mean_prob), NULL, 0, false);
    *aux = aux->id < 0 ? balance : tide_builder_add(b, NULL, *aux, balance);
    tide_builder_pop_scope(b);
    return out;
}

/* ============================================================================
 * Models
 * ========================================================================== */

/* Checks the options, recording an error about `model` when one is out of range. */
static bool lm_options_valid(tide_builder *b, const char *model,
                             const struct tide_model_lm_options *o, bool moe_layers)
{
    if (!b || tide_builder_error(b))
        return false;
    if (!o) {
        tide__builder_set_error(b, "%s: options are NULL", model);
        return false;
    }
    const struct {
        const char *name;
        int64_t value;
    } sizes[] = {{"batch", o->batch},
                 {"seq_len", o->seq_len},
                 {"vocab", o->vocab},
                 {"d_model", o->d_model},
                 {"layers", o->layers},
                 {"heads", o->heads},
                 {"experts", moe_layers ? o->experts : 1}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        if (sizes[i].value < 1) {
            tide__builder_set_error(b, "%s: %s is %" PRId64 ", wants 1 or more", model,
                                    sizes[i].name, sizes[i].value);
            return false;
        }
    }
    if (moe_layers && o->experts < MOE_TOP_K) {
        tide__builder_set_error(b,
                                "%s: experts is %" PRId64 ", wants %d or more (each token is "
                                "routed to its %d best)",
                                model, o->experts, MOE_TOP_K, MOE_TOP_K);
        return false;
    }
    if (o->d_model % o->heads != 0) {
        tide__builder_set_error(b,
                                "%s: d_model %" PRId64 " is not a multiple of heads %" PRId32
                                " (each head gets d_model / heads features)",
                                model, o->d_model, o->heads);
        return false;
    }
    if (o->vocab > (INT64_C(1) << 24)) {
        tide__builder_set_error(b, "%s: vocab is %" PRId64 ", wants at most 2^24", model, o->vocab);
        return false;
    }
    if (!(o->dropout >= 0 && o->dropout < 1)) {
        tide__builder_set_error(b, "%s: dropout is %g, wants 0 <= rate < 1", model,
                                (double)o->dropout);
        return false;
    }
    if (moe_layers &&
        tide_model_moe_capacity(o->batch * o->seq_len, o->experts, o->capacity_factor) < 1) {
        tide__builder_set_error(b,
                                "%s: capacity_factor is %g, wants a finite number > 0 that "
                                "gives each expert at most 2^31 - 1 slots",
                                model, o->capacity_factor);
        return false;
    }
    if (moe_layers && !(o->aux_loss_weight >= 0 && isfinite(o->aux_loss_weight))) {
        tide__builder_set_error(b, "%s: aux_loss_weight is %g, wants a finite number >= 0", model,
                                (double)o->aux_loss_weight);
        return false;
    }
    return true;
}

/* The Transformer, with Mixture-of-Experts layers for its MLPs when moe_layers is set. */
static tide_ref language_model(tide_builder *b, const char *model,
                               const struct tide_model_lm_options *o, bool moe_layers)
{
    if (!lm_options_valid(b, model, o, moe_layers))
        return TIDE_REF_NONE;
    int64_t bs = o->batch * o->seq_len, d = o->d_model;
    int64_t io_dims[2] = {o->batch, o->seq_len}, flat_dims[2] = {bs, d}, bs_dims[1] = {bs};
    tide_ref tokens = tide_builder_placeholder(b, TIDE_MODEL_TOKENS, TIDE_DT_INT32, 2, io_dims);
    tide_ref labels = tide_builder_placeholder(b, TIDE_MODEL_LABELS, TIDE_DT_INT32, 2, io_dims);

    /* Token embeddings [B, S, D] plus learned positions [S, D], as the stream [B * S, D]. */
    int64_t embed_dims[2] = {o->vocab, d}, pos_dims[2] = {o->seq_len, d};
    tide_ref embed =
        tide_builder_variable(b, "embed/w", 2, embed_dims, "normal", EMBED_STDDEV, true);
    tide_ref pos = tide_builder_variable(b, "pos/w", 2, pos_dims, "normal", EMBED_STDDEV, true);
    tide_ref x =
        tide_builder_add(b, NULL, tide_builder_gather(b, "embed/lookup", embed, tokens), pos);
    x = dropout(b, o, tide_builder_reshape(b, NULL, x, 2, flat_dims));

    /* A 1 per token [B * S, 1]: what MoE's load balance counts its first choices with. */
    tide_ref token_ones = TIDE_REF_NONE, aux = TIDE_REF_NONE;
    if (moe_layers && !tide_builder_error(b)) {
        int64_t t = o->batch * o->seq_len, ones_dims[2] = {t, 1};
        float *ones = malloc((size_t)t * sizeof(float));
        if (!ones) {
            tide__builder_set_error(b, "%s: out of memory for %" PRId64 " tokens' ones", model, t);
            return TIDE_REF_NONE;
        }
        for (int64_t i = 0; i < t; i++)
            ones[i] = 1.0f;
        token_ones = tide_builder_constant(b, "token_ones", TIDE_DT_FLOAT32, 2, ones_dims, ones);
        free(ones);
    }

    /* Pre-LayerNorm blocks: x += Dropout(Attention(LN(x))); x += Dropout(MLP(LN(x))). */
    for (int32_t l = 0; l < o->layers; l++) {
        char scope[32];
        snprintf(scope, sizeof(scope), "block%" PRId32, l);
        tide_builder_push_scope(b, scope);
        tide_ref a = attention(b, o, layer_norm(b, "ln1", x, d));
        x = tide_builder_add(b, NULL, x, dropout(b, o, a));
        tide_ref h = layer_norm(b, "ln2", x, d);
        tide_ref m = moe_layers ? moe(b, o, h, token_ones, &aux) : mlp(b, o, h);
        x = tide_builder_add(b, NULL, x, dropout(b, o, m));
        tide_builder_pop_scope(b);
    }

    /* The head: LayerNorm, the projection to the vocabulary, and the mean cross-entropy. */
    x = layer_norm(b, "ln_f", x, d);
    int64_t head_dims[2] = {d, o->vocab}, vocab_dims[1] = {o->vocab};
    tide_ref w_out =
        tide_builder_variable(b, "head/w", 2, head_dims, "uniform", init_bound(d), true);
    tide_ref b_out = tide_builder_variable(b, "head/b", 1, vocab_dims, "zeros", 1.0f, true);
    tide_ref logits = tide_builder_bias_add(
        b, TIDE_MODEL_LOGITS, tide_builder_matmul(b, NULL, x, w_out, false, false), b_out);
    tide_ref flat_labels = tide_builder_reshape(b, NULL, labels, 1, bs_dims);
    tide_ref xent =
        tide_builder_softmax_cross_entropy(b, TIDE_MODEL_TOKEN_LOSS, logits, flat_labels);
    tide_ref loss;
    if (!moe_layers) {
        loss = tide_builder_reduce_mean(b, TIDE_MODEL_LOSS, xent, NULL, 0, false);
    } else {
        tide_ref lm = tide_builder_reduce_mean(b, TIDE_MODEL_LM_LOSS, xent, NULL, 0, false);
        float scale = o->aux_loss_weight * (float)o->experts;
        tide_ref weight =
            tide_builder_constant(b, "aux_loss_weight", TIDE_DT_FLOAT32, 0, NULL, &scale);
        tide_ref weighted = tide_builder_mul(b, TIDE_MODEL_AUX_LOSS, aux, weight);
        loss = tide_builder_add(b, TIDE_MODEL_LOSS, lm, weighted);
    }
    return loss.id < 0 ? TIDE_REF_NONE : logits;
}

tide_ref tide_model_transformer(tide_builder *b, const struct tide_model_lm_options *options)
{
    return language_model(b, "transformer", options, false);
}

tide_ref tide_model_moe(tide_builder *b, const struct tide_model_lm_options *options)
{
    return language_model(b, "moe", options, true);
}
