/* Seed 002's ConvAttention: LayerNorm(MHA(x, x, x) + Conv1d(x^T)^T) (math in attn.h). */
#include "../core/core_internal.h"
#include "nn_internal.h"

#include <stdio.h>

static attn_status init_conv_attention(attn_conv_attention_layer *m, attn_params *p, const char *prefix,
                                       int64_t embed_dim, int64_t num_heads, int64_t kernel_size, attn_rng *rng)
{
    if (!m || !prefix) return attn__fail(ATTN_ERR_ARG, "conv_attention_init: NULL argument");
    if (kernel_size < 1 || kernel_size % 2 == 0)
        return attn__fail(ATTN_ERR_ARG,
                          "conv_attention_init: kernel_size %lld; expected an odd size >= 1 (the "
                          "padding k/2 keeps the length)",
                          (long long)kernel_size);
    char name[256];
    attn__param_name(name, sizeof name, prefix, "attention");
    if (attn_mha_init(&m->attention, p, name, embed_dim, num_heads, 0, 0, true, 0.0f, rng) != ATTN_OK)
        return attn_last_status();
    attn__param_name(name, sizeof name, prefix, "conv");
    if (attn_conv1d_init(&m->conv, p, name, embed_dim, embed_dim, kernel_size, kernel_size / 2, true, rng) != ATTN_OK)
        return attn_last_status();
    attn__param_name(name, sizeof name, prefix, "norm");
    return attn_layer_norm_init(&m->norm, p, name, embed_dim, 1e-5f);
}

attn_status attn_conv_attention_init(attn_conv_attention_layer *m, attn_params *p, const char *prefix,
                                     int64_t embed_dim, int64_t num_heads, int64_t kernel_size, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_conv_attention(m, p, prefix, embed_dim, num_heads, kernel_size, rng));
}

attn_tensor *attn_conv_attention_forward(attn_ctx *ctx, const attn_conv_attention_layer *m, attn_tensor *x,
                                         const attn_mha_opts *opts, attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !m || !x) return attn__null_input(__func__);
    attn_tensor *attn_out = attn_mha_forward(ctx, &m->attention, x, x, x, opts, weights);
    attn_tensor *conv_out = attn_transpose(ctx, attn_conv1d_forward(ctx, &m->conv, attn_transpose(ctx, x, 1, 2)), 1, 2);
    return attn_layer_norm_forward(ctx, &m->norm, attn_add(ctx, attn_out, conv_out));
}
