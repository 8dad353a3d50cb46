/* Private to libattn: pieces of the nn modules that the models compose beyond the public
 * forward functions, for decoding one position at a time over cached keys and values. */
#ifndef ATTN_NN_INTERNAL_H
#define ATTN_NN_INTERNAL_H

#include "../core/core_internal.h"

/* Multi-head attention in pieces (attn_mha_forward = output(sdpa(split_heads(project(...))))):
 * project: x (B, L, E) projected by W_q (which 0), W_k (1) or W_v (2) with its bias, (B, L, E);
 * output: o (B, H, L, E/H) merged into (B, L, E) and projected by out_proj. */
/* out (n bytes) = "prefix.name", or "name" when prefix is "": a parameter's state_dict name */
void attn__param_name(char *out, size_t n, const char *prefix, const char *name);
attn_tensor *attn__mha_project(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x, int which);
attn_tensor *attn__mha_output(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *o);
/* attn_mha_forward_packed with rope (NULL: none) at each row's place in its sequence */
attn_tensor *attn__mha_forward_packed_rope(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x,
                                           const int64_t *cu_seqlens, int64_t batch, bool causal,
                                           const attn_rope_opts *rope);
/* The rotary positions a Transformer layer's config asks for in *out; NULL when none */
const attn_rope_opts *attn__layer_rope(const attn_transformer_config *c, attn_rope_opts *out);

/* What one decoder layer keeps between steps. R rows decode B memory items, `beams` consecutive
 * rows per item (R = B * beams). */
typedef struct decoder_layer_cache {
    attn_tensor *self_k, *self_v;   /* (R, H, cap, E/H), heap: keys and values of positions < pos */
    attn_tensor *cross_k, *cross_v; /* (B, H, S, E/H): the memory projected once */
    attn_mask cross_mask;           /* over the memory (source padding), shapes of (B, H, beams, S) */
    int64_t beams;
} decoder_layer_cache;

/* cross_k and cross_v of memory (B, S, E), in ctx. */
attn_status attn__decoder_layer_cache_memory(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *memory,
                                             decoder_layer_cache *c);
/* Position pos of attn_decoder_layer_forward under a causal self mask: x (R, 1, E) -> (R, 1, E).
 * Appends x's keys and values at pos of the self cache (pos < cap), attends over positions
 * [0, pos] and to the cached memory. Inference only (nothing is recorded for backward). */
attn_tensor *attn__decoder_layer_step(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *x,
                                      decoder_layer_cache *c, int64_t pos);

#endif
