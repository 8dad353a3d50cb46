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

#endif
