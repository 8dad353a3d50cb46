/* The classifier with pack (each batch's reviews end to end through attn_mha_forward_packed, or
 * the blocks' attn_encoder_layer_forward_packed) against the same model padded with mask_padding,
 * on the same parameters, ids and dropout draws (the same ctx seed; the blocks' dropout 0, whose
 * draws would differ): logits and every parameter's gradient, learned and sinusoidal positions,
 * one attention layer and two pre-LN blocks of the linear variant's config, on 1 and 2 threads; a
 * batch whose weights are asked for takes the padded path (the weights are there); pack without
 * mask_padding, or with another attention and no blocks, is refused.
 * Tolerance: two float32 sides through the embedding, the MHA (TK_TOL_MHA's 160 roundings, cond 4:
 * test_golden_attention.c), the mean over at most 10 positions and the head's two layers (16 and
 * 8 terms): tk_tol_of(2, 200, 4, 8); with blocks, two encoder layers as test_packed_layers:
 * tk_tol_of(2, 2000, 4, 8). */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

enum {
    B = 4,
    LEN = 10,
    VOCAB = 50
};

static void packed_against_padded(bool sinusoidal, int blocks, int threads)
{
    attn_classifier_config c = attn_classifier_defaults(VOCAB);
    c.embed_dim = 16, c.num_heads = 4, c.hidden_dim = 8, c.max_len = 12, c.mask_padding = true;
    c.sinusoidal = sinusoidal, c.dropout = 0.3f;
    c.num_blocks = blocks, c.norm_first = true, c.block_dropout = 0.0f;
    if (blocks) c.attention = ATTN_CLASSIFIER_LINEAR; /* unused with blocks, and no obstacle to pack */
    attn_params *p = attn_params_new();
    attn_classifier m;
    attn_rng rng;
    attn_rng_seed(&rng, 11);
    TK_OK(attn_classifier_init(&m, p, &c, &rng));
    for (size_t i = 0; i < attn_params_count(p); i++) /* the MHA's biases too, which init zeroes */
        attn_tensor_fill_normal(attn_params_at(p, i), &rng, 0.0f, 0.3f);
    const int64_t lengths[B] = {10, 3, 7, 1};
    int64_t ids[B * LEN], labels[B] = {0, 1, 1, 0};
    for (int64_t i = 0; i < B * LEN; i++) ids[i] = (int64_t)attn_rng_below(&rng, VOCAB);
    const size_t n = attn_params_count(p);
    float *logits[2] = {NULL}, **grads[2] = {calloc(n, sizeof(float *)), calloc(n, sizeof(float *))};
    for (int pack = 0; pack < 2; pack++) {
        m.cfg.pack = pack;
        attn_params_zero_grad(p);
        attn_ctx *ctx = attn_ctx_new(5); /* the same seed: the same dropout draws in the head */
        TK_OK(attn_ctx_set_num_threads(ctx, threads));
        attn_tensor *out = attn_classifier_forward(ctx, &m, ids, lengths, B, LEN, NULL);
        attn_tensor *loss = attn_cross_entropy(ctx, out, labels, -100, 0.0f);
        TK_CHECK(loss && attn_backward(ctx, loss) == ATTN_OK, "pack %d: forward and backward: %s", pack,
                 attn_last_error());
        if (loss) {
            logits[pack] = malloc(sizeof(float) * B * 2);
            memcpy(logits[pack], out->data, sizeof(float) * B * 2);
            for (size_t i = 0; i < n; i++) {
                attn_tensor *t = attn_params_at(p, i);
                grads[pack][i] = malloc(sizeof(float) * (size_t)t->numel);
                if (t->grad)
                    memcpy(grads[pack][i], t->grad, sizeof(float) * (size_t)t->numel);
                else
                    memset(grads[pack][i], 0, sizeof(float) * (size_t)t->numel);
            }
        }
        attn_ctx_free(ctx);
    }
    const tk_tol tol = blocks ? tk_tol_of(2, 2000, 4, 8) : tk_tol_of(2, 200, 4, 8);
    char what[160];
    if (logits[0] && logits[1]) {
        snprintf(what, sizeof what, "%s positions, %d blocks, %d threads: packed logits against padded",
                 sinusoidal ? "sinusoidal" : "learned", blocks, threads);
        tk_close_scaled(what, logits[1], logits[0], B * 2, tol);
        for (size_t i = 0; i < n; i++) {
            snprintf(what, sizeof what, "%s positions, %d blocks, %d threads: packed grad %s against padded",
                     sinusoidal ? "sinusoidal" : "learned", blocks, threads, attn_params_name(p, i));
            tk_close_scaled(what, grads[1][i], grads[0][i], attn_params_at(p, i)->numel, tol);
        }
    }
    /* asked for its weights, a packed model runs the padded path and gives them */
    attn_ctx *ctx = attn_ctx_new(5);
    attn_ctx_set_training(ctx, false);
    attn_tensor *w = NULL, *out = attn_classifier_forward(ctx, &m, ids, lengths, B, LEN, &w);
    TK_CHECK(out && w && w->ndim == 3 && w->shape[0] == B && w->shape[1] == LEN && w->shape[2] == LEN,
             "pack with weights asked: the padded path's (B, L, L) weights (%s)", attn_last_error());
    attn_ctx_free(ctx);
    for (int k = 0; k < 2; k++) {
        for (size_t i = 0; i < n; i++) free(grads[k][i]);
        free(grads[k]), free(logits[k]);
    }
    attn_classifier_free(&m);
    attn_params_free(p);
}

static void refusals(void)
{
    attn_classifier_config c = attn_classifier_defaults(VOCAB);
    c.embed_dim = 16, c.max_len = 12, c.pack = true;
    attn_params *p = attn_params_new();
    attn_classifier m;
    TK_CHECK(attn_classifier_init(&m, p, &c, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), "pack needs"),
             "pack without mask_padding refused (%s)", attn_last_error());
    c.mask_padding = true, c.attention = ATTN_CLASSIFIER_LINEAR;
    TK_CHECK(attn_classifier_init(&m, p, &c, NULL) == ATTN_ERR_ARG, "pack with linear attention refused");
    c.attention = ATTN_CLASSIFIER_ADDITIVE;
    TK_CHECK(attn_classifier_init(&m, p, &c, NULL) == ATTN_ERR_ARG, "pack with additive attention refused");
    TK_CHECK(attn_params_count(p) == 0, "nothing registered by the refused inits");
    attn_params_free(p);
}

int main(void)
{
    packed_against_padded(false, 0, 1);
    packed_against_padded(true, 0, 1);
    packed_against_padded(false, 0, 2);
    packed_against_padded(true, 2, 1);
    packed_against_padded(false, 2, 2);
    refusals();
    return tk_finish("test_classifier_packed");
}
