/* The language model decoding with a key/value cache (attn_lm_decoder, attn.h). Per layer the
 * cache holds the keys and values of every token fed so far, row r's position t at row
 * r cap + t of a (rows cap, Hkv, Dh) tensor; a feed appends the new tokens' keys and values and
 * runs their queries over their row's cache, causally:
 *   x = embed(tokens, positions len_r + j);  per layer: k, v -> cache;  q_r attends to keys
 *   [0, len_r + j] of row r;  logits of each row's last new token = head(x)
 * what attn_lm_forward computes for the row's whole prefix, at its last position. */
#include "../nn/nn_internal.h"
#include "../ops/rope_internal.h"
#include "lm_internal.h"

#include <stdlib.h>
#include <string.h>

attn_lm_decoder *attn_lm_decoder_new(const attn_lm *m, int64_t rows, int64_t capacity)
{
    if (!m || !m->blocks) return attn__fail_null(ATTN_ERR_ARG, "lm_decoder_new: no model");
    if (rows < 1 || capacity < 1 || capacity > m->cfg.context)
        return attn__fail_null(ATTN_ERR_ARG,
                               "lm_decoder_new: rows %lld and capacity %lld; expected >= 1 and a "
                               "capacity of at most the context, %lld",
                               (long long)rows, (long long)capacity, (long long)m->cfg.context);
    const attn_lm_config *c = &m->cfg;
    const int64_t Dh = c->d_model / c->num_heads;
    if (rows > INT64_MAX / capacity / c->num_kv_heads / Dh || rows > INT64_MAX / c->vocab_size / 4)
        return attn__fail_null(ATTN_ERR_ARG, "lm_decoder_new: %lld rows of %lld tokens are past what memory can hold",
                               (long long)rows, (long long)capacity);
    attn_lm_decoder *d = calloc(1, sizeof *d);
    if (!d) return attn__fail_null(ATTN_ERR_NOMEM, "lm_decoder_new: out of memory");
    *d = (attn_lm_decoder){.m = m, .rows = rows, .cap = capacity};
    d->len = calloc((size_t)rows, sizeof *d->len);
    d->last = calloc((size_t)(rows * c->vocab_size), sizeof *d->last);
    d->k = calloc((size_t)c->num_layers, sizeof *d->k);
    d->v = calloc((size_t)c->num_layers, sizeof *d->v);
    d->work = attn_ctx_new(0);
    const int64_t rope_floats = c->style == ATTN_LM_LLAMA ? capacity * Dh : 0; /* (cap, Dh / 2, 2) */
    d->rope_cs = rope_floats ? malloc((size_t)rope_floats * sizeof *d->rope_cs) : NULL;
    bool ok = d->len && d->last && d->k && d->v && d->work && (d->rope_cs || !rope_floats);
    if (ok && d->rope_cs) attn__rope_table(d->rope_cs, NULL, capacity, Dh, c->rope_base);
    const int64_t shape[3] = {rows * capacity, c->num_kv_heads, Dh};
    for (int64_t i = 0; ok && i < c->num_layers; i++)
        ok = (d->k[i] = attn_tensor_alloc(3, shape)) && (d->v[i] = attn_tensor_alloc(3, shape));
    if (!ok) {
        attn_lm_decoder_free(d);
        return attn__fail_null(ATTN_ERR_NOMEM, "lm_decoder_new: out of memory for %lld rows of %lld tokens",
                               (long long)rows, (long long)capacity);
    }
    attn_ctx_set_grad_enabled(d->work, false);
    attn_ctx_set_training(d->work, false);
    return d;
}

void attn_lm_decoder_free(attn_lm_decoder *d)
{
    if (!d) return;
    for (int64_t i = 0; d->k && d->v && i < d->m->cfg.num_layers; i++) {
        attn_tensor_free(d->k[i]);
        attn_tensor_free(d->v[i]);
    }
    free(d->k), free(d->v), free(d->len), free(d->last), free(d->rope_cs);
    attn_ctx_free(d->work);
    free(d);
}

int64_t attn_lm_decoder_length(const attn_lm_decoder *d, int64_t row)
{
    if (!d) {
        attn__fail(ATTN_ERR_ARG, "lm_decoder_length: NULL decoder");
        return -1;
    }
    return row >= 0 && row < d->rows ? d->len[row] : -1;
}

attn_status attn_lm_decoder_set_num_threads(attn_lm_decoder *d, int n)
{
    if (!d) return attn__fail(ATTN_ERR_ARG, "lm_decoder_set_num_threads: NULL decoder");
    return attn_ctx_set_num_threads(d->work, n);
}

/* Copies the new tokens' keys or values kv (total, Hkv, Dh) into row r's cache at len_r + j */
static void cache_append(attn_tensor *cache, const attn_tensor *kv, const attn_lm_decoder *d, const int64_t *counts,
                         const int64_t *offsets)
{
    const int64_t width = kv->shape[1] * kv->shape[2];
    for (int64_t r = 0; r < d->rows; r++)
        memcpy(cache->data + (r * d->cap + d->len[r]) * width, kv->data + offsets[r] * width,
               (size_t)(counts[r] * width) * sizeof(float));
}

/* One layer's attention for the new tokens h (total, E): their keys and values appended to the
 * cache, each row's queries over its cache -> (total, E) */
static attn_tensor *layer_attention(attn_ctx *ctx, attn_lm_decoder *d, int64_t layer, attn_tensor *h,
                                    const int64_t *counts, const int64_t *offsets, const int64_t *positions)
{
    const attn_lm *m = d->m;
    const attn_mha_layer *a = &m->blocks[layer].attn;
    const int64_t total = h->shape[0], H = a->num_heads, Hkv = a->num_kv_heads, Dh = a->embed_dim / H;
    attn_tensor *q = attn_reshape(ctx, attn__mha_project(ctx, a, h, 0), 3, (int64_t[]){total, H, Dh});
    attn_tensor *k = attn_reshape(ctx, attn__mha_project(ctx, a, h, 1), 3, (int64_t[]){total, Hkv, Dh});
    attn_tensor *v = attn_reshape(ctx, attn__mha_project(ctx, a, h, 2), 3, (int64_t[]){total, Hkv, Dh});
    attn_rope_opts rope_buf;
    const attn_rope_opts *rope = attn__lm_rope(m, &rope_buf);
    if (rope && q && k) {
        rope_buf.position_dim = 0, rope_buf.positions = positions, rope_buf.n_positions = total;
        q = attn_rope(ctx, q, &rope_buf);
        k = attn_rope(ctx, k, &rope_buf);
    }
    if (!q || !k || !v) return NULL;
    cache_append(d->k[layer], k, d, counts, offsets);
    cache_append(d->v[layer], v, d, counts, offsets);
    attn_tensor **outs = attn__arena_alloc(&ctx->arena, (size_t)d->rows * sizeof *outs);
    if (!outs) return NULL;
    int n = 0;
    const attn_varlen_opts o = {.causal = true, .enable_gqa = Hkv != H};
    for (int64_t r = 0; r < d->rows; r++) {
        if (!counts[r]) continue;
        const int64_t keys = d->len[r] + counts[r];
        attn_tensor *kr = attn_narrow(ctx, d->k[layer], 0, r * d->cap, keys);
        attn_tensor *vr = attn_narrow(ctx, d->v[layer], 0, r * d->cap, keys);
        attn_tensor *qr = attn_narrow(ctx, q, 0, offsets[r], counts[r]);
        /* bottom-right causal: new query j sees keys [0, len_r + j] */
        outs[n] = kr && vr && qr
                      ? attn_sdpa_varlen(ctx, qr, kr, vr, (int64_t[]){0, counts[r]}, (int64_t[]){0, keys}, 1, &o)
                      : NULL;
        if (!outs[n++]) return NULL;
    }
    attn_tensor *o_heads = n == 1 ? outs[0] : attn_concat(ctx, outs, n, 0); /* (total, H, Dh) */
    return o_heads
               ? attn_linear_forward(ctx, &a->out_proj, attn_reshape(ctx, o_heads, 2, (int64_t[]){total, a->embed_dim}))
               : NULL;
}

/* tokens and counts against the rows, the capacity and the vocabulary; the total in *total */
static attn_status check_feed(const attn_lm_decoder *d, const int64_t *tokens, const int64_t *counts, int64_t *total)
{
    *total = 0;
    for (int64_t r = 0; r < d->rows; r++) {
        if (counts[r] < 0 || counts[r] > d->cap - d->len[r])
            return attn__fail(ATTN_ERR_ARG,
                              "lm_decoder_feed: row %lld holds %lld tokens; %lld more would pass its capacity %lld",
                              (long long)r, (long long)d->len[r], (long long)counts[r], (long long)d->cap);
        *total += counts[r];
    }
    if (*total && !tokens) return attn__fail(ATTN_ERR_ARG, "lm_decoder_feed: NULL tokens");
    for (int64_t i = 0; i < *total; i++)
        if (tokens[i] < 0 || tokens[i] >= d->m->cfg.vocab_size)
            return attn__fail(ATTN_ERR_ARG, "lm_decoder_feed: tokens[%lld] = %lld is outside the vocabulary [0, %lld)",
                              (long long)i, (long long)tokens[i], (long long)d->m->cfg.vocab_size);
    return ATTN_OK;
}

static attn_status feed(attn_lm_decoder *d, const int64_t *tokens, const int64_t *counts, int64_t total)
{
    attn_ctx *ctx = d->work;
    const attn_lm *m = d->m;
    const int64_t E = m->cfg.d_model, V = m->cfg.vocab_size;
    int64_t *offsets = attn__arena_alloc(&ctx->arena, (size_t)d->rows * sizeof *offsets);   /* (rows) */
    int64_t *positions = attn__arena_alloc(&ctx->arena, (size_t)total * sizeof *positions); /* (total) */
    int64_t *lasts = attn__arena_alloc(&ctx->arena, (size_t)d->rows * sizeof *lasts);       /* (active rows) */
    if (!offsets || !positions || !lasts) return attn_last_status();
    int64_t at = 0, active = 0;
    for (int64_t r = 0; r < d->rows; r++) {
        offsets[r] = at;
        for (int64_t j = 0; j < counts[r]; j++) positions[at + j] = d->len[r] + j;
        at += counts[r];
        if (counts[r]) lasts[active++] = at - 1;
    }
    attn_tensor *x = attn__lm_embed(ctx, m, tokens, positions, total); /* (total, E) */
    for (int64_t i = 0; i < m->cfg.num_layers && x; i++) {
        const attn_lm_block *blk = &m->blocks[i];
        attn_tensor *h = attn__lm_norm(ctx, m, &blk->norm1, x);
        x = h ? attn_add(ctx, x, layer_attention(ctx, d, i, h, counts, offsets, positions)) : NULL;
        x = x ? attn_add(ctx, x, attn__lm_ffn(ctx, m, blk, attn__lm_norm(ctx, m, &blk->norm2, x))) : NULL;
    }
    if (!x) return attn_last_status();
    attn_tensor *last_x = attn_tensor_empty(ctx, 2, (int64_t[]){active, E}); /* (active, E) */
    if (!last_x) return attn_last_status();
    for (int64_t a = 0; a < active; a++)
        memcpy(last_x->data + a * E, x->data + lasts[a] * E, (size_t)E * sizeof(float));
    attn_tensor *logits = attn__lm_head(ctx, m, last_x); /* (active, V) */
    if (!logits) return attn_last_status();
    for (int64_t r = 0, a = 0; r < d->rows; r++)
        if (counts[r]) memcpy(d->last + r * V, logits->data + a++ * V, (size_t)V * sizeof(float));
    return ATTN_OK;
}

attn_status attn__lm_decoder_feed_path(attn_lm_decoder *d, float *logits, const int64_t *tokens, const int64_t *counts,
                                       attn__lm_path path)
{
    if (!d || !counts) return attn__fail(ATTN_ERR_ARG, "lm_decoder_feed: NULL decoder or counts");
    int64_t total;
    if (check_feed(d, tokens, counts, &total) != ATTN_OK) return attn_last_status();
    bool one_each = path == ATTN__LM_PATH_ANY && d->work->matmul_precision == ATTN_PRECISION_HIGHEST;
    for (int64_t r = 0; r < d->rows; r++) one_each = one_each && counts[r] <= 1;
    attn_ctx_reset(d->work);
    attn_status st = !total     ? ATTN_OK
                     : one_each ? attn__lm_decode_step(d, tokens, counts)
                                : feed(d, tokens, counts, total);
    if (st == ATTN_OK) {
        for (int64_t r = 0; r < d->rows; r++) d->len[r] += counts[r];
        if (logits) memcpy(logits, d->last, (size_t)(d->rows * d->m->cfg.vocab_size) * sizeof *logits);
    }
    attn_ctx_reset(d->work);
    return st;
}

attn_status attn_lm_decoder_feed(attn_lm_decoder *d, float *logits, const int64_t *tokens, const int64_t *counts)
{
    return attn__lm_decoder_feed_path(d, logits, tokens, counts, ATTN__LM_PATH_ANY);
}
