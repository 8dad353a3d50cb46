/* Linear ("efficient") attention of seed 002 and of Shen et al. (math in attn.h). Cost
 * O(L E^2) instead of O(L^2 E): the (E, E) context K'^T V replaces the (L, L) weights. */
#include "../core/core_internal.h"
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>

static attn_status init_linear_attention(attn_linear_attention_layer *m, attn_params *p, const char *prefix,
                                         int64_t embed_dim, attn_linear_attention_kind kind, attn_rng *rng)
{
    if (!m || !prefix) return attn__fail(ATTN_ERR_ARG, "linear_attention_init: NULL argument");
    if (kind != ATTN_LINEAR_ATTENTION_EFFICIENT && kind != ATTN_LINEAR_ATTENTION_SHEN)
        return attn__fail(ATTN_ERR_ARG, "linear_attention_init: unknown kind %d", (int)kind);
    m->kind = kind;
    const char *names[3] = {"to_query", "to_key", "to_value"};
    attn_linear_layer *layers[3] = {&m->to_query, &m->to_key, &m->to_value};
    for (int i = 0; i < 3; i++) {
        char name[256];
        attn__param_name(name, sizeof name, prefix, names[i]);
        if (attn_linear_init(layers[i], p, name, embed_dim, embed_dim, true, rng) != ATTN_OK) return attn_last_status();
    }
    return ATTN_OK;
}

attn_status attn_linear_attention_init(attn_linear_attention_layer *m, attn_params *p, const char *prefix,
                                       int64_t embed_dim, attn_linear_attention_kind kind, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_linear_attention(m, p, prefix, embed_dim, kind, rng));
}

/* (B, L, 1): 0 for real keys, -inf for padding. */
static attn_tensor *padding_bias(attn_ctx *ctx, const uint8_t *key_padding, int64_t batch, int64_t len)
{
    attn_tensor *bias = attn_tensor_zeros(ctx, 3, (int64_t[]){batch, len, 1});
    if (bias)
        for (int64_t i = 0; i < batch * len; i++)
            if (key_padding[i]) bias->data[i] = -INFINITY;
    return bias;
}

attn_tensor *attn_linear_attention_forward(attn_ctx *ctx, const attn_linear_attention_layer *m, attn_tensor *x,
                                           const attn_mask *mask)
{
    if (!ctx || !m || !x) return attn__null_input(__func__);
    if (x->ndim != 3) {
        char a[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "linear_attention: x %s, expected (B, L, E)", attn_shape_str(x, a, 64));
    }
    const uint8_t *key_padding = mask ? mask->key_padding : NULL;
    if (mask && (mask->causal || mask->attend || mask->blocked || mask->additive || mask->valid_lens.data))
        return attn__fail_null(ATTN_ERR_ARG, "linear_attention: only key_padding applies (the layer "
                                             "has no (L, L) scores to mask); causal, attend, blocked, additive and "
                                             "valid_lens are not supported");
    if (attn__key_padding_check(mask, x->shape[0], x->shape[1], "linear_attention") != ATTN_OK) return NULL;
    attn_tensor *q = attn_linear_forward(ctx, &m->to_query, x);
    attn_tensor *k = attn_linear_forward(ctx, &m->to_key, x);
    attn_tensor *v = attn_linear_forward(ctx, &m->to_value, x);
    if (key_padding) k = attn_add(ctx, k, padding_bias(ctx, key_padding, x->shape[0], x->shape[1]));
    k = attn_softmax(ctx, k, 1);                                             /* over the sequence */
    if (m->kind == ATTN_LINEAR_ATTENTION_SHEN) q = attn_softmax(ctx, q, -1); /* over features */
    attn_tensor *context = attn_matmul(ctx, k, v, true, false);              /* (B, E, E) = K'^T V */
    return attn_matmul(ctx, q, context, false, false);                       /* (B, L, E) */
}
