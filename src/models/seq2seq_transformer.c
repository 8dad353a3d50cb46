/* The Transformer encoder-decoder (post-LN, as the paper, D2L and seed 003):
 *   enc: x = dropout(emb_src(src) * sqrt(d) + PE); x = encoder_layer_i(x, src padding)
 *   dec: y = dropout(emb_tgt(tgt) * sqrt(d) + PE);
 *        y = decoder_layer_i(y, memory, causal + tgt padding, src padding);  logits = W y + b
 * Packed, the same over sequences end to end, each row's position its place in its sequence. */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

attn_status attn__transformer_init(attn_seq2seq *m, attn_params *p, attn_rng *rng)
{
    const attn_seq2seq_config *c = &m->cfg;
    if (c->num_heads < 1 || c->d_model % c->num_heads || c->dim_feedforward < 1 || c->d_model % 2)
        return attn__fail(ATTN_ERR_ARG, "seq2seq transformer: an even d_model divisible by num_heads "
                                        "and dim_feedforward >= 1 expected");
    if (attn_embedding_init(&m->src_embedding, p, "src_embedding", c->src_vocab, c->d_model, c->pad_id, rng) ||
        attn_embedding_init(&m->tgt_embedding, p, "tgt_embedding", c->tgt_vocab, c->d_model, c->pad_id, rng))
        return attn_last_status();
    m->enc = calloc((size_t)c->enc_layers, sizeof *m->enc);
    m->dec = calloc((size_t)c->dec_layers, sizeof *m->dec);
    if (!m->enc || !m->dec) return attn__fail(ATTN_ERR_NOMEM, "seq2seq transformer: out of memory");
    attn_transformer_config tc = {.d_model = c->d_model,
                                  .num_heads = c->num_heads,
                                  .dim_feedforward = c->dim_feedforward,
                                  .dropout = c->dropout,
                                  .ffn_dropout = true,
                                  .rope_base = c->rope_base,
                                  .rope_layout = ATTN_ROPE_HALVES};
    char name[64];
    for (int i = 0; i < c->enc_layers; i++) {
        snprintf(name, sizeof name, "encoder.layers.%d", i);
        if (attn_encoder_layer_init(&m->enc[i], p, name, &tc, rng)) return attn_last_status();
    }
    for (int i = 0; i < c->dec_layers; i++) {
        snprintf(name, sizeof name, "decoder.layers.%d", i);
        if (attn_decoder_layer_init(&m->dec[i], p, name, &tc, rng)) return attn_last_status();
    }
    return attn_linear_init(&m->generator, p, "generator", c->d_model, c->tgt_vocab, true, rng);
}

/* dropout(emb(ids) * sqrt(d) + PE[:L]) (rotary positions: no PE here, the layers rotate q and k) */
static attn_tensor *embed(attn_ctx *ctx, const attn_seq2seq *m, const attn_embedding_layer *emb, const int64_t *ids,
                          int64_t batch, int64_t len)
{
    const int64_t d = m->cfg.d_model;
    attn_tensor *x =
        attn_scale(ctx, attn_embedding_forward(ctx, emb, ids, 2, (int64_t[]){batch, len}), sqrtf((float)d));
    if (m->cfg.rope_base == 0.0f)
        x = attn_add_positions(ctx, x, attn_sinusoidal_table(ctx, len, d, ATTN_PE_INTERLEAVED));
    return attn_dropout(ctx, x, m->cfg.dropout);
}

attn_status attn__transformer_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, seq2seq_memory *mem)
{
    attn_tensor *x = embed(ctx, m, &m->src_embedding, src, mem->batch, mem->src_len);
    attn_mask mask = {.key_padding = mem->src_pad, .key_padding_shape = {mem->batch, mem->src_len}};
    for (int i = 0; i < m->cfg.enc_layers && x; i++) x = attn_encoder_layer_forward(ctx, &m->enc[i], x, &mask, NULL);
    mem->enc_out = x;
    return x ? ATTN_OK : attn_last_status();
}

attn_tensor *attn__transformer_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem,
                                      const int64_t *tgt, const int64_t *tgt_lens, int64_t tgt_len,
                                      attn_tensor **cross_weights)
{
    attn_tensor *y = embed(ctx, m, &m->tgt_embedding, tgt, mem->batch, tgt_len);
    attn_mask self = {.causal = true, .key_padding_shape = {mem->batch, tgt_len}};
    attn_mask cross = {.key_padding = mem->src_pad, .key_padding_shape = {mem->batch, mem->src_len}};
    if (tgt_lens && !(self.key_padding = attn__seq2seq_padding(ctx, tgt_lens, mem->batch, tgt_len))) return NULL;
    const int last = m->cfg.dec_layers - 1;
    for (int i = 0; i <= last && y; i++)
        y = attn_decoder_layer_forward(ctx, &m->dec[i], y, mem->enc_out, &self, &cross, NULL,
                                       i == last ? cross_weights : NULL);
    return attn_linear_forward(ctx, &m->generator, y);
}

/* dropout(emb(ids) * sqrt(d) + PE[position]) of the packed sequences at cu: (total, d) */
static attn_tensor *embed_packed(attn_ctx *ctx, const attn_seq2seq *m, const attn_embedding_layer *emb,
                                 const int64_t *ids, const int64_t *cu, int64_t batch)
{
    const int64_t d = m->cfg.d_model, total = cu[batch];
    attn_tensor *x = attn_scale(ctx, attn_embedding_forward(ctx, emb, ids, 1, &total), sqrtf((float)d));
    if (m->cfg.rope_base == 0.0f) {
        int64_t longest = 1;
        for (int64_t b = 0; b < batch; b++) longest = cu[b + 1] - cu[b] > longest ? cu[b + 1] - cu[b] : longest;
        const int64_t *positions = attn__cu_positions(ctx, cu, batch); /* (total) */
        attn_tensor *table = attn_sinusoidal_table(ctx, longest, d, ATTN_PE_INTERLEAVED);
        if (!positions || !table) return NULL;
        x = attn_add(ctx, x, attn_embedding(ctx, table, positions, 1, &total, -1));
    }
    return attn_dropout(ctx, x, m->cfg.dropout);
}

attn_tensor *attn__transformer_forward_packed(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                              const int64_t *cu_src, const int64_t *tgt_in, const int64_t *cu_tgt,
                                              int64_t batch)
{
    attn_tensor *x = embed_packed(ctx, m, &m->src_embedding, src, cu_src, batch); /* (total_s, d) */
    for (int i = 0; i < m->cfg.enc_layers && x; i++)
        x = attn_encoder_layer_forward_packed(ctx, &m->enc[i], x, cu_src, batch);
    attn_tensor *y = x ? embed_packed(ctx, m, &m->tgt_embedding, tgt_in, cu_tgt, batch) : NULL; /* (total_t, d) */
    for (int i = 0; i < m->cfg.dec_layers && y; i++)
        y = attn_decoder_layer_forward_packed(ctx, &m->dec[i], y, cu_tgt, x, cu_src, batch);
    return y ? attn_linear_forward(ctx, &m->generator, y) : NULL;
}
