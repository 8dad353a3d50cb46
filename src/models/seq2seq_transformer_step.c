/* The Transformer decoder one position at a time (attn_seq2seq_decoder, CACHED). Per decoder
 * layer the cache holds the self-attention keys and values of the tokens fed so far (cap, R, d)
 * and the cross-attention keys and values of the source (B, H, S, d/H), projected once; a step
 * embeds the newest tokens, runs them through decoder_layer_step and the generator:
 *   y = emb_tgt(tokens) * sqrt(d) + PE[pos];  y = layer_i step(y);  logits = W y + b
 * the last position of transformer_decode's causal pass over the whole prefix (no dropout). */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>

/* The source padding for the cross-attention: the one place this file names a mask field. */
static attn_mask source_mask(const seq2seq_memory *mem)
{
    return (attn_mask){.key_padding = mem->src_pad, .key_padding_shape = {mem->batch, mem->src_len}};
}

attn_status transformer_cache_init(attn_seq2seq_decoder *d)
{
    const attn_seq2seq *m = d->m;
    const int64_t dm = m->cfg.d_model;
    transformer_cache *c = &d->tc;
    if (!(c->layers = calloc((size_t)m->cfg.dec_layers, sizeof *c->layers)))
        return attn__fail(ATTN_ERR_NOMEM, "seq2seq decoder: out of memory");
    if (!(c->positions = attn_sinusoidal_table(d->keep, d->cap, dm, ATTN_PE_INTERLEAVED)))
        return attn_last_status();
    for (int i = 0; i < m->cfg.dec_layers; i++) {
        decoder_layer_cache *lc = &c->layers[i];
        lc->beams = d->beams;
        lc->cross_mask = source_mask(&d->mem);
        lc->self_k = attn_tensor_alloc(3, (int64_t[]){d->cap, d->rows, dm});
        lc->self_v = attn_tensor_alloc(3, (int64_t[]){d->cap, d->rows, dm});
        if (!lc->self_k || !lc->self_v) return attn_last_status();
        if (decoder_layer_cache_memory(d->keep, &m->dec[i], d->mem.enc_out, lc) != ATTN_OK)
            return attn_last_status();
    }
    return ATTN_OK;
}

attn_tensor *transformer_cache_step(attn_seq2seq_decoder *d, const int64_t *tokens)
{
    attn_ctx *ctx = d->work;
    const attn_seq2seq *m = d->m;
    const int64_t pos = d->steps;
    attn_tensor *y = attn_embedding_forward(ctx, &m->tgt_embedding, tokens, 2, (int64_t[]){d->rows, 1});
    y = attn_scale(ctx, y, sqrtf((float)m->cfg.d_model)); /* (R, 1, d) */
    y = attn_add(ctx, y, attn_narrow(ctx, d->tc.positions, 0, pos, 1));
    for (int i = 0; i < m->cfg.dec_layers && y; i++)
        y = decoder_layer_step(ctx, &m->dec[i], y, &d->tc.layers[i], pos);
    return attn_linear_forward(ctx, &m->generator, y); /* (R, 1, V) */
}

attn_status transformer_cache_reorder(attn_seq2seq_decoder *d, const int64_t *parents)
{
    const int64_t R = d->rows, dm = d->m->cfg.d_model;
    float *scratch = attn_arena_alloc(&d->work->arena, (size_t)(R * dm) * sizeof *scratch);
    if (!scratch) return attn_last_status();
    for (int i = 0; i < d->m->cfg.dec_layers; i++) { /* positions [0, steps) of (cap, R, d) */
        seq2seq_gather_rows(d->tc.layers[i].self_k->data, scratch, d->steps, R, dm, parents);
        seq2seq_gather_rows(d->tc.layers[i].self_v->data, scratch, d->steps, R, dm, parents);
    }
    return ATTN_OK;
}

void transformer_cache_free(attn_seq2seq_decoder *d)
{
    for (int i = 0; d->tc.layers && i < d->m->cfg.dec_layers; i++) {
        attn_tensor_free(d->tc.layers[i].self_k);
        attn_tensor_free(d->tc.layers[i].self_v);
    }
    free(d->tc.layers);
    d->tc.layers = NULL;
}
