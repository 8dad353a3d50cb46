/* D2L's masked softmax and AdditiveAttention (math in attn.h). */
#include "../core/core_internal.h"
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>

attn_tensor *attn_masked_softmax(attn_ctx *ctx, attn_tensor *scores, const attn_lens *valid_lens)
{
    if (!ctx || !scores) return attn__null_input(__func__);
    if (!valid_lens || !valid_lens->data) return attn_softmax(ctx, scores, -1);
    if (scores->ndim != 3) {
        char buf[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "masked_softmax: scores %s with valid_lens; expected scores (B, Lq, Lk)",
                               attn_shape_str(scores, buf, sizeof buf));
    }
    const int64_t B = scores->shape[0], Lq = scores->shape[1], Lk = scores->shape[2];
    if (attn__lens_check(valid_lens, B, Lq, "masked_softmax") != ATTN_OK) return NULL;
    attn_tensor *mask = attn_tensor_zeros(ctx, 3, scores->shape); /* (B, Lq, Lk) 0 or -inf */
    if (!mask) return NULL;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Lq; i++) {
            int64_t len = valid_lens->ndim == 1 ? valid_lens->data[b] : valid_lens->data[b * Lq + i];
            for (int64_t j = len; j < Lk; j++) mask->data[(b * Lq + i) * Lk + j] = -INFINITY;
        }
    return attn_softmax(ctx, attn_add(ctx, scores, mask), -1);
}

static attn_status init_additive(attn_additive_layer *m, attn_params *p, const char *prefix, int64_t query_size,
                                 int64_t key_size, int64_t num_hiddens, float dropout, attn_rng *rng)
{
    if (!m || !prefix) return attn__fail(ATTN_ERR_ARG, "additive_init: NULL argument");
    if (!(dropout >= 0.0f && dropout <= 1.0f))
        return attn__fail(ATTN_ERR_ARG, "additive_init: dropout %g, expected in [0, 1]", dropout);
    char name[256];
    m->dropout = dropout;
    attn__param_name(name, sizeof name, prefix, "W_q");
    if (attn_linear_init(&m->W_q, p, name, query_size, num_hiddens, false, rng) != ATTN_OK) return attn_last_status();
    attn__param_name(name, sizeof name, prefix, "W_k");
    if (attn_linear_init(&m->W_k, p, name, key_size, num_hiddens, false, rng) != ATTN_OK) return attn_last_status();
    attn__param_name(name, sizeof name, prefix, "w_v");
    return attn_linear_init(&m->w_v, p, name, num_hiddens, 1, false, rng);
}

attn_status attn_additive_init(attn_additive_layer *m, attn_params *p, const char *prefix, int64_t query_size,
                               int64_t key_size, int64_t num_hiddens, float dropout, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_additive(m, p, prefix, query_size, key_size, num_hiddens, dropout, rng));
}

attn_tensor *attn_additive_forward(attn_ctx *ctx, const attn_additive_layer *m, attn_tensor *queries, attn_tensor *keys,
                                   attn_tensor *values, const attn_lens *valid_lens, attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !m || !queries || !keys || !values) return attn__null_input(__func__);
    if (queries->ndim != 3 || keys->ndim != 3 || values->ndim != 3 || keys->shape[0] != queries->shape[0] ||
        values->shape[0] != queries->shape[0] || values->shape[1] != keys->shape[1]) {
        attn__fail_inputs("additive_attention", (const char *const[]){"queries", "keys", "values"},
                          (const attn_tensor *const[]){queries, keys, values},
                          "(B, Lq, q_size), (B, Lk, k_size), (B, Lk, v)");
        return NULL;
    }
    if (attn__lens_check(valid_lens, queries->shape[0], queries->shape[1], "additive_attention") != ATTN_OK)
        return NULL;
    attn_tensor *qp = attn_linear_forward(ctx, &m->W_q, queries); /* (B, Lq, h) */
    attn_tensor *kp = attn_linear_forward(ctx, &m->W_k, keys);    /* (B, Lk, h) */
    attn_tensor *scores = attn_additive_scores(ctx, qp, kp, m->w_v.weight);
    attn_tensor *a = attn_masked_softmax(ctx, scores, valid_lens);
    if (weights) *weights = a;
    return attn_matmul(ctx, attn_dropout(ctx, a, m->dropout), values, false, false);
}
