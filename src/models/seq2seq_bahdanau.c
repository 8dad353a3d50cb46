/* The Bahdanau-attention GRU encoder-decoder (D2L's Seq2SeqEncoder + Seq2SeqAttentionDecoder):
 *   enc: outputs, state = GRU(emb_src(src))
 *   dec step t: query = state[last layer]; context = additive(query, outputs, outputs, src_lens)
 *               out, state = GRU(cat(context, emb_tgt(y_t)), state);  logits_t = dense(out) */
#include "seq2seq_internal.h"

#include <string.h>

attn_status attn__bahdanau_init(attn_seq2seq *m, attn_params *p, attn_rng *rng)
{
    const attn_seq2seq_config *c = &m->cfg;
    const int64_t H = c->d_model;
    if (c->enc_layers != c->dec_layers)
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq bahdanau: the decoder starts from the encoder's "
                          "state, so enc_layers (%d) must equal dec_layers (%d)",
                          c->enc_layers, c->dec_layers);
    if (attn_embedding_init(&m->src_embedding, p, "encoder.embedding", c->src_vocab, H, -1, rng) ||
        attn_gru_init(&m->enc_rnn, p, "encoder.rnn", H, H, c->enc_layers, c->dropout, rng) ||
        attn_embedding_init(&m->tgt_embedding, p, "decoder.embedding", c->tgt_vocab, H, -1, rng) ||
        attn_additive_init(&m->attention, p, "decoder.attention", H, H, H, c->dropout, rng) ||
        attn_gru_init(&m->dec_rnn, p, "decoder.rnn", 2 * H, H, c->dec_layers, c->dropout, rng))
        return attn_last_status();
    return attn_linear_init(&m->generator, p, "decoder.dense", H, c->tgt_vocab, true, rng);
}

attn_status attn__bahdanau_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, seq2seq_memory *mem)
{
    attn_tensor *x = attn_embedding_forward(ctx, &m->src_embedding, src, 2, (int64_t[]){mem->batch, mem->src_len});
    mem->enc_out = attn_gru_forward(ctx, &m->enc_rnn, x, NULL, &mem->enc_state);
    return mem->enc_out ? ATTN_OK : attn_last_status();
}

attn_tensor *attn__bahdanau_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem, const int64_t *tgt,
                                   int64_t tgt_len, attn_tensor **cross_weights)
{
    const int64_t B = mem->batch, H = m->cfg.d_model;
    const int layers = m->cfg.dec_layers;
    attn_tensor *emb = attn_embedding_forward(ctx, &m->tgt_embedding, tgt, 2, (int64_t[]){B, tgt_len});
    attn_tensor *state = mem->enc_state;
    attn_tensor **outs = attn__arena_alloc(&ctx->arena, 2 * (size_t)tgt_len * sizeof *outs);
    if (!emb || !outs) return NULL;
    attn_tensor **weights = outs + tgt_len;
    const attn_lens src_lens = {.data = mem->src_lens, .ndim = 1, .shape = {B}};
    for (int64_t t = 0; t < tgt_len; t++) {
        attn_tensor *query = attn_reshape(ctx, attn_narrow(ctx, state, 0, layers - 1, 1), 3, (int64_t[]){B, 1, H});
        attn_tensor *w = NULL;
        attn_tensor *context = attn_additive_forward(ctx, &m->attention, query, mem->enc_out, mem->enc_out, &src_lens,
                                                     cross_weights ? &w : NULL);
        attn_tensor *x_t = attn_narrow(ctx, emb, 1, t, 1);
        attn_tensor *inp[2] = {context, x_t};
        outs[t] = attn_gru_forward(ctx, &m->dec_rnn, attn_concat(ctx, inp, 2, 2), state, &state);
        weights[t] = w;
        if (!outs[t]) return NULL;
    }
    if (cross_weights) { /* (B, 1, T, S): one "head" */
        attn_tensor *w = attn_concat(ctx, weights, (int)tgt_len, 1);
        *cross_weights = attn_reshape(ctx, w, 4, (int64_t[]){B, 1, tgt_len, mem->src_len});
    }
    return attn_linear_forward(ctx, &m->generator, attn_concat(ctx, outs, (int)tgt_len, 1));
}
