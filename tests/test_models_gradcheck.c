/* Finite-difference gradient checks of the model-level forwards (tk_gradcheck: central
 * differences of loss = sum(out * r) against the analytic backward):
 *   - attn_gru_forward, odd sizes (input 3, hidden 5, 2 layers, batch 2, 3 steps): x, h0 and two
 *     parameters; the output checked is cat(outputs, h_n), so both paths are differentiated;
 *   - attn_encoder_layer_forward and attn_decoder_layer_forward, post-LN and pre-LN, ReLU and
 *     GELU, with key padding (and the causal mask in the decoder): x (and memory) and three
 *     parameters each;
 *   - attn_classifier_forward for each attention variant (softmax, linear, conv, additive, one
 *     Transformer block; padding masked, and the seed's unmasked softmax): the embedding, the
 *     learned positions, one attention parameter and the head's first weight.
 * Parameters are differentiated by passing the registry's tensors as inputs (tk_gradcheck
 * perturbs their data in place). Dropout is 0 everywhere.
 *
 * Tolerance: eps 1e-3, |analytic - numeric| <= 2e-3 + 2e-2 * |numeric| (FD_*, as
 * tests/test_ops_norm.c). Float32 central differences carry a truncation error ~eps^2 * f''' and
 * a rounding error ~1e-7 * |loss| / eps ~ 1e-4 here; everything passes at 1e-3 + 5e-3 * |numeric|,
 * so this leaves a 2x margin, while a wrong backward term is off by O(1) relative. eps is 1e-3,
 * not 1e-2, because of ReLU kinks: a step of 1e-2 crosses some (measured: the post-LN encoder's
 * FFN unit 10 has a pre-activation of 0.010 at a padded position, the linear-attention
 * classifier's head has 0.0048 and -0.0034), and the difference quotient is then a secant across
 * the kink, not a derivative; at 1e-3 no kink is within reach of these inputs. */
#include "testkit.h"

#include <stdlib.h>

#define FD_EPS 1e-3f
#define FD_ATOL 2e-3f
#define FD_RTOL 2e-2f

#define B 2
#define L 4  /* layers: target / self length */
#define LS 3 /* decoder memory length */
#define D 8
#define HEADS 2
#define FFN 12
#define GRU_IN 3
#define GRU_H 5
#define GRU_T 3
#define GRU_LAYERS 2
#define CLS_L 5

typedef enum {
    FD_GRU,
    FD_ENCODER,
    FD_DECODER,
    FD_CLASSIFIER
} fd_kind;

typedef struct fd_case {
    const char *what;
    fd_kind kind;
    bool norm_first, gelu;               /* layers, classifier blocks */
    attn_classifier_attention attention; /* classifier */
    int num_blocks;                      /* classifier */
    bool seed_padding;                   /* classifier: attend to and average the padding */
    int64_t ngram_buckets;               /* classifier: the n-gram bag's buckets (0: none) */
    const char *params[4];               /* parameters differentiated, by registered name */
} fd_case;

static const fd_case cases[] = {
    {"gru 3->5 x2 layers", FD_GRU, .params = {"weight_hh_l1", "bias_ih_l0"}},
    {"encoder post-LN relu", FD_ENCODER, .params = {"self_attn.in_proj_weight", "linear1.weight", "norm1.weight"}},
    {"encoder post-LN gelu", FD_ENCODER, .gelu = true,
     .params = {"self_attn.out_proj.weight", "linear2.bias", "norm2.weight"}},
    {"encoder pre-LN relu", FD_ENCODER, .norm_first = true,
     .params = {"self_attn.in_proj_weight", "linear2.weight", "norm1.bias"}},
    {"encoder pre-LN gelu", FD_ENCODER, .norm_first = true, .gelu = true,
     .params = {"self_attn.in_proj_bias", "linear1.weight", "norm2.weight"}},
    {"decoder post-LN relu", FD_DECODER,
     .params = {"multihead_attn.in_proj_weight", "self_attn.out_proj.weight", "norm3.weight"}},
    {"decoder post-LN gelu", FD_DECODER, .gelu = true,
     .params = {"self_attn.in_proj_weight", "linear1.weight", "norm2.bias"}},
    {"decoder pre-LN relu", FD_DECODER, .norm_first = true,
     .params = {"multihead_attn.in_proj_weight", "linear2.weight", "norm1.weight"}},
    {"decoder pre-LN gelu", FD_DECODER, .norm_first = true, .gelu = true,
     .params = {"multihead_attn.out_proj.weight", "self_attn.in_proj_bias", "norm3.bias"}},
    {"classifier softmax", FD_CLASSIFIER, .attention = ATTN_CLASSIFIER_SOFTMAX,
     .params = {"embedding.weight", "pos_encoding", "attention.in_proj_weight", "classifier.0.weight"}},
    {"classifier softmax (seed: padding attended)", FD_CLASSIFIER, .attention = ATTN_CLASSIFIER_SOFTMAX,
     .seed_padding = true, .params = {"embedding.weight", "attention.out_proj.weight", "classifier.3.weight"}},
    {"classifier softmax + n-gram bag", FD_CLASSIFIER, .attention = ATTN_CLASSIFIER_SOFTMAX, .ngram_buckets = 4,
     .params = {"ngrams.weight", "embedding.weight", "classifier.3.weight"}},
    {"classifier linear", FD_CLASSIFIER, .attention = ATTN_CLASSIFIER_LINEAR,
     .params = {"embedding.weight", "pos_encoding", "attention.to_key.weight", "classifier.0.weight"}},
    {"classifier conv", FD_CLASSIFIER, .attention = ATTN_CLASSIFIER_CONV,
     .params = {"embedding.weight", "pos_encoding", "attention.conv.weight", "classifier.0.weight"}},
    {"classifier additive", FD_CLASSIFIER, .attention = ATTN_CLASSIFIER_ADDITIVE,
     .params = {"embedding.weight", "pos_encoding", "attention.W_q.weight", "classifier.0.weight"}},
    {"classifier 1 pre-LN block", FD_CLASSIFIER, .num_blocks = 1, .norm_first = true,
     .params = {"embedding.weight", "pos_encoding", "blocks.0.self_attn.in_proj_weight", "blocks.0.linear1.weight"}},
};

/* Padding (1 = padding): encoder keys, decoder target and memory keys; classifier ids/lengths. */
static const uint8_t enc_pad[B * L] = {0, 0, 0, 0, 0, 0, 1, 1};
static const uint8_t tgt_pad[B * L] = {0, 0, 0, 0, 0, 0, 0, 1};
static const uint8_t mem_pad[B * LS] = {0, 0, 0, 0, 0, 1};
static const int64_t cls_ids[B * CLS_L] = {1, 4, 2, 6, 3, 5, 0, 2, 0, 0};
static const int64_t cls_lens[B] = {5, 3};

typedef struct fd_model {
    const fd_case *c;
    attn_params *params;
    attn_gru_layer gru;
    attn_encoder_layer enc;
    attn_decoder_layer dec;
    attn_classifier cls;
    bool cls_built;
} fd_model;

static attn_status build(fd_model *m)
{
    const fd_case *c = m->c;
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    attn_transformer_config tc = {.d_model = D,
                                  .num_heads = HEADS,
                                  .dim_feedforward = FFN,
                                  .norm_first = c->norm_first,
                                  .gelu = c->gelu,
                                  .ffn_dropout = true};
    switch (c->kind) {
    case FD_GRU:
        return attn_gru_init(&m->gru, m->params, "", GRU_IN, GRU_H, GRU_LAYERS, 0.0f, &rng);
    case FD_ENCODER:
        return attn_encoder_layer_init(&m->enc, m->params, "", &tc, &rng);
    case FD_DECODER:
        return attn_decoder_layer_init(&m->dec, m->params, "", &tc, &rng);
    case FD_CLASSIFIER: {
        attn_classifier_config cc = {.vocab_size = 7,
                                     .embed_dim = D,
                                     .num_heads = HEADS,
                                     .hidden_dim = 6,
                                     .num_classes = 3,
                                     .max_len = 6,
                                     .attention = c->attention,
                                     .num_blocks = c->num_blocks,
                                     .norm_first = c->norm_first,
                                     .additive_hidden = 5,
                                     .mask_padding = !c->seed_padding,
                                     .ngram_buckets = c->ngram_buckets};
        m->cls_built = true;
        return attn_classifier_init(&m->cls, m->params, &cc, &rng);
    }
    }
    return ATTN_ERR_ARG;
}

static attn_tensor *flatten(attn_ctx *ctx, attn_tensor *t)
{
    return t ? attn_reshape(ctx, t, 1, (int64_t[]){t->numel}) : NULL;
}

/* in[0..) are the data inputs of the kind; the parameters follow (the modules hold them). */
static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const fd_model *m = user;
    switch (m->c->kind) {
    case FD_GRU: {
        attn_tensor *h_n = NULL;
        attn_tensor *parts[2] = {flatten(ctx, attn_gru_forward(ctx, &m->gru, in[0], in[1], &h_n)), NULL};
        parts[1] = flatten(ctx, h_n);
        return parts[0] && parts[1] ? attn_concat(ctx, parts, 2, 0) : NULL;
    }
    case FD_ENCODER: {
        attn_mask mask = {.key_padding = enc_pad, .key_padding_shape = {B, L}};
        return attn_encoder_layer_forward(ctx, &m->enc, in[0], &mask, NULL);
    }
    case FD_DECODER: {
        attn_mask self = {.causal = true, .key_padding = tgt_pad, .key_padding_shape = {B, L}};
        attn_mask cross = {.key_padding = mem_pad, .key_padding_shape = {B, LS}};
        return attn_decoder_layer_forward(ctx, &m->dec, in[0], in[1], &self, &cross, NULL, NULL);
    }
    case FD_CLASSIFIER:
        return attn_classifier_forward(ctx, &m->cls, cls_ids, cls_lens, B, CLS_L, NULL);
    }
    return NULL;
}

/* The data inputs of a kind: count and shapes (N(0, 1), seeded per case). */
static int data_inputs(fd_kind kind, int64_t shapes[2][3])
{
    switch (kind) {
    case FD_GRU:
        shapes[0][0] = B, shapes[0][1] = GRU_T, shapes[0][2] = GRU_IN;
        shapes[1][0] = GRU_LAYERS, shapes[1][1] = B, shapes[1][2] = GRU_H;
        return 2;
    case FD_ENCODER:
        shapes[0][0] = B, shapes[0][1] = L, shapes[0][2] = D;
        return 1;
    case FD_DECODER:
        shapes[0][0] = B, shapes[0][1] = L, shapes[0][2] = D;
        shapes[1][0] = B, shapes[1][1] = LS, shapes[1][2] = D;
        return 2;
    case FD_CLASSIFIER:
        return 0;
    }
    return 0;
}

static void run_case(const fd_case *c, uint64_t seed)
{
    fd_model m = {.c = c, .params = attn_params_new()};
    attn_status st = m.params ? build(&m) : ATTN_ERR_NOMEM;
    TK_CHECK(st == ATTN_OK, "%s: init: %s", c->what, attn_last_error());
    attn_tensor *in[6] = {0};
    int64_t shapes[2][3];
    int n_data = data_inputs(c->kind, shapes), n = n_data;
    bool ok = st == ATTN_OK;
    for (int i = 0; ok && i < n_data; i++) ok = (in[i] = tk_randn(seed + (uint64_t)i, 3, shapes[i])) != NULL;
    for (int i = 0; ok && i < 4 && c->params[i]; i++) {
        in[n] = attn_params_get(m.params, c->params[i]);
        TK_CHECK(in[n] != NULL, "%s: no parameter %s", c->what, c->params[i]);
        ok = in[n++] != NULL;
    }
    if (ok) tk_gradcheck(c->what, fd_forward, in, n, &m, FD_EPS, FD_ATOL, FD_RTOL);
    for (int i = 0; i < n_data; i++) attn_tensor_free(in[i]);
    if (m.cls_built) attn_classifier_free(&m.cls);
    attn_params_free(m.params);
}

int main(void)
{
    /* One thread: finite differences run thousands of tiny forwards, and the SDPA kernels open an
     * OpenMP region whatever the size; on a loaded machine each region waits for a descheduled
     * thread (measured: 46 s instead of 0.2 s under ctest during a parallel build). The parallel
     * paths are compared with torch in test_golden_models. */
    tk_gradcheck_set_threads(1);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) run_case(&cases[i], 100 + 10 * i);
    printf("test_models_gradcheck: %zu cases\n", sizeof cases / sizeof *cases);
    return tk_finish("test_models_gradcheck");
}
