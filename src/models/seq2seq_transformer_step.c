/* The Transformer decoder one position at a time (attn_seq2seq_decoder, CACHED). Per decoder
 * layer the cache holds the self-attention keys and values of the tokens fed so far (R, H, cap, d/H)
 * and the cross-attention keys and values of the source (B, H, S, d/H), projected once; a step
 * embeds the newest tokens, runs them through attn__decoder_layer_step and the generator:
 *   y = emb_tgt(tokens) * sqrt(d) + PE[pos];  y = layer_i step(y);  logits = W y + b
 * the last position of attn__transformer_decode's causal pass over the whole prefix (no dropout). */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>

/* The source padding for the cross-attention: the one place this file names a mask field. */
static attn_mask source_mask(const seq2seq_memory *mem)
{
    return (attn_mask){.key_padding = mem->src_pad, .key_padding_shape = {mem->batch, mem->src_len}};
}

attn_status attn__transformer_cache_init(attn_seq2seq_decoder *d)
{
    const attn_seq2seq *m = d->m;
    const int64_t dm = m->cfg.d_model;
    transformer_cache *c = &d->tc;
    if (!(c->layers = calloc((size_t)m->cfg.dec_layers, sizeof *c->layers)))
        return attn__fail(ATTN_ERR_NOMEM, "seq2seq decoder: out of memory");
    if (m->cfg.rope_base == 0.0f && !(c->positions = attn_sinusoidal_table(d->keep, d->cap, dm, ATTN_PE_INTERLEAVED)))
        return attn_last_status(); /* rotary positions: the layers rotate q and k at each step */
    for (int i = 0; i < m->cfg.dec_layers; i++) {
        decoder_layer_cache *lc = &c->layers[i];
        lc->beams = d->beams;
        lc->cross_mask = source_mask(&d->mem);
        const int64_t H = m->cfg.num_heads, shape[4] = {d->rows, H, d->cap, dm / H};
        lc->self_k = attn_tensor_alloc(4, shape);
        lc->self_v = attn_tensor_alloc(4, shape);
        if (!lc->self_k || !lc->self_v) return attn_last_status();
        if (attn__decoder_layer_cache_memory(d->keep, &m->dec[i], d->mem.enc_out, lc) != ATTN_OK)
            return attn_last_status();
    }
    return ATTN_OK;
}

attn_tensor *attn__transformer_cache_step(attn_seq2seq_decoder *d, const int64_t *tokens)
{
    attn_ctx *ctx = d->work;
    const attn_seq2seq *m = d->m;
    const int64_t pos = d->steps;
    attn_tensor *y = attn_embedding_forward(ctx, &m->tgt_embedding, tokens, 2, (int64_t[]){d->rows, 1});
    y = attn_scale(ctx, y, sqrtf((float)m->cfg.d_model)); /* (R, 1, d) */
    if (d->tc.positions) y = attn_add(ctx, y, attn_narrow(ctx, d->tc.positions, 0, pos, 1));
    for (int i = 0; i < m->cfg.dec_layers && y; i++)
        y = attn__decoder_layer_step(ctx, &m->dec[i], y, &d->tc.layers[i], pos);
    return attn_linear_forward(ctx, &m->generator, y); /* (R, 1, V) */
}

/* The positions in use of a (R, H, cap, Dh) cache as rows */
static seq2seq_rows cache_rows(attn_tensor *cache, int64_t steps)
{
    const int64_t H = cache->shape[1], cap = cache->shape[2], dh = cache->shape[3];
    return (seq2seq_rows){
        .x = cache->data, .outer = 1, .row_stride = H * cap * dh, .segs = H, .seg_stride = cap * dh, .len = steps * dh};
}

attn_status attn__transformer_cache_reorder(attn_seq2seq_decoder *d, const int64_t *parents)
{
    const int64_t R = d->rows;
    seq2seq_rows rows = cache_rows(d->tc.layers[0].self_k, d->steps);
    float *scratch =
        attn__arena_alloc(&d->work->arena, (size_t)(R * attn__seq2seq_rows_width(&rows)) * sizeof *scratch);
    if (!scratch) return attn_last_status();
    for (int i = 0; i < d->m->cfg.dec_layers; i++) {
        rows = cache_rows(d->tc.layers[i].self_k, d->steps);
        attn__seq2seq_rows_gather(&rows, parents, R, scratch);
        rows = cache_rows(d->tc.layers[i].self_v, d->steps);
        attn__seq2seq_rows_gather(&rows, parents, R, scratch);
    }
    return ATTN_OK;
}

void attn__transformer_cache_select(attn_seq2seq_decoder *d, const int64_t *keep, const int64_t *rows, int64_t n)
{
    const int64_t R = n * d->beams;
    for (int i = 0; i < d->m->cfg.dec_layers; i++) {
        decoder_layer_cache *lc = &d->tc.layers[i];
        attn_tensor *caches[2] = {lc->self_k, lc->self_v};
        for (int j = 0; j < 2; j++) { /* the positions in use of the rows kept, then (R, H, cap, Dh) */
            seq2seq_rows used = cache_rows(caches[j], d->steps);
            attn__seq2seq_rows_keep(&used, rows, R);
            caches[j]->numel = caches[j]->numel / caches[j]->shape[0] * R;
            caches[j]->shape[0] = R;
        }
        attn__seq2seq_keep_tensor(lc->cross_k, 0, keep, n); /* (B, H, S, Dh) */
        attn__seq2seq_keep_tensor(lc->cross_v, 0, keep, n);
        lc->cross_mask.key_padding_shape[0] = n; /* the padding itself is d->mem's, kept already */
    }
}

void attn__transformer_cache_free(attn_seq2seq_decoder *d)
{
    for (int i = 0; d->tc.layers && i < d->m->cfg.dec_layers; i++) {
        attn_tensor_free(d->tc.layers[i].self_k);
        attn_tensor_free(d->tc.layers[i].self_v);
    }
    free(d->tc.layers);
    d->tc.layers = NULL;
}
