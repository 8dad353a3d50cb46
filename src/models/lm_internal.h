/* Private: the language model's pieces that its packed forward (lm.c) and its cached decoder
 * (lm_decode.c) share, so that both compute one model. */
#ifndef ATTN_MODELS_LM_INTERNAL_H
#define ATTN_MODELS_LM_INTERNAL_H

#include "../core/core_internal.h"

/* x (n, E) -> wte[ids] (+ wpe[positions] for GPT2), (n, E) */
attn_tensor *attn__lm_embed(attn_ctx *ctx, const attn_lm *m, const int64_t *ids, const int64_t *positions, int64_t n);
/* The style's norm (GPT2 LayerNorm, LLAMA RMSNorm) of x (..., E) */
attn_tensor *attn__lm_norm(attn_ctx *ctx, const attn_lm *m, const attn_layer_norm_layer *n, attn_tensor *x);
/* The block's FFN of x (..., E): GPT2 c_proj(gelu_tanh(c_fc x)), LLAMA w2(silu(w1 x) * w3 x) */
attn_tensor *attn__lm_ffn(attn_ctx *ctx, const attn_lm *m, const attn_lm_block *blk, attn_tensor *x);
/* The rotary positions of LLAMA in *out; NULL for GPT2 */
const attn_rope_opts *attn__lm_rope(const attn_lm *m, attn_rope_opts *out);
/* x (..., E) -> logits norm_f(x) output^T (..., V) */
attn_tensor *attn__lm_head(attn_ctx *ctx, const attn_lm *m, attn_tensor *x);

/* The cached decoder (attn_lm_decoder, attn.h): lm_decode.c's feed through the ops, and the step
 * of one token per row in lm_decode_step.c */
struct attn_lm_decoder {
    const attn_lm *m;
    int64_t rows, cap;
    int64_t *len;         /* (rows) tokens fed to each row */
    float *last;          /* (rows, V) logits of each row's last token, zeros before any */
    attn_tensor **k, **v; /* (layers) each (rows cap, Hkv, Dh), heap */
    float *rope_cs;       /* (cap, Dh / 2, 2) LLAMA's rotary cos and sin of every position; NULL for GPT2 */
    attn_ctx *work;       /* one feed's activations, reset at every feed */
};

/* Appends one token to each row r with counts[r] = 1 (tokens holds them in row order; the other
 * counts are 0) and writes their logits into d->last: the model in one parallel region of
 * matrix-vector products (kernels/decode.c), the weights read once per token. d->len is left to
 * the caller. The feed through the ops is its reference: test_lm_decode holds them together. */
attn_status attn__lm_decode_step(attn_lm_decoder *d, const int64_t *tokens, const int64_t *counts);

/* attn_lm_decoder_feed with the path chosen: ANY takes the step where every count is 0 or 1 at
 * the highest matmul precision, and the ops elsewhere; OPS always the ops (the reference, for tests) */
typedef enum attn__lm_path {
    ATTN__LM_PATH_ANY,
    ATTN__LM_PATH_OPS
} attn__lm_path;
attn_status attn__lm_decoder_feed_path(attn_lm_decoder *d, float *logits, const int64_t *tokens, const int64_t *counts,
                                       attn__lm_path path);

#endif
