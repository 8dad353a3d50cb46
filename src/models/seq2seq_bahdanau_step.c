/* The Bahdanau decoder one step at a time (attn_seq2seq_decoder, CACHED): the GRU state is
 * carried from step to step and the encoder outputs are projected by W_k once. A step is one
 * iteration of attn__bahdanau_decode's loop:
 *   query = state[last layer];  context = softmax_masked(w_v tanh(W_q query + keys)) @ values
 *   out, state = GRU(cat(context, emb_tgt(y)), state);  logits = dense(out)
 * The beams of a sentence are the queries of its one (S, h) block of keys. */
#include "seq2seq_internal.h"

#include <string.h>

/* Softmax over the source positions with each sentence's length: the one place that names the
 * mask. scores (B, beams, S), src_lens (B). */
static attn_tensor *source_softmax(attn_ctx *ctx, attn_tensor *scores, const int64_t *src_lens)
{
    const attn_lens lens = {.data = src_lens, .ndim = 1, .shape = {scores ? scores->shape[0] : 0}};
    return attn_masked_softmax(ctx, scores, &lens);
}

attn_status attn__bahdanau_cache_init(attn_seq2seq_decoder *d)
{
    const attn_seq2seq *m = d->m;
    bahdanau_cache *c = &d->bc;
    const attn_tensor *h0 = d->row_mem.enc_state;                              /* (layers, R, H) */
    c->keys = attn_linear_forward(d->keep, &m->attention.W_k, d->mem.enc_out); /* (B, S, h) */
    c->values = d->row_mem.enc_out;                                            /* (R, S, H) */
    c->state = c->keys ? attn_tensor_alloc(3, h0->shape) : NULL;
    if (!c->state) return attn_last_status();
    memcpy(c->state->data, h0->data, (size_t)h0->numel * sizeof(float));
    return ATTN_OK;
}

attn_tensor *attn__bahdanau_cache_step(attn_seq2seq_decoder *d, const int64_t *tokens)
{
    attn_ctx *ctx = d->work;
    const attn_seq2seq *m = d->m;
    const int64_t R = d->rows, H = m->cfg.d_model, S = d->mem.src_len;
    const int64_t h = m->attention.W_q.out_features;
    attn_tensor *state = d->bc.state;
    attn_tensor *query =
        attn_reshape(ctx, attn_narrow(ctx, state, 0, m->cfg.dec_layers - 1, 1), 3, (int64_t[]){R, 1, H});
    attn_tensor *qp =
        attn_reshape(ctx, attn_linear_forward(ctx, &m->attention.W_q, query), 3, (int64_t[]){d->batch, d->beams, h});
    attn_tensor *w = source_softmax(ctx, attn_additive_scores(ctx, qp, d->bc.keys, m->attention.w_v.weight),
                                    d->mem.src_lens); /* (B, beams, S) */
    attn_tensor *context =
        attn_matmul(ctx, attn_reshape(ctx, w, 3, (int64_t[]){R, 1, S}), d->bc.values, false, false); /* (R, 1, H) */
    attn_tensor *inp[2] = {context, attn_embedding_forward(ctx, &m->tgt_embedding, tokens, 2, (int64_t[]){R, 1})};
    attn_tensor *next = NULL;
    attn_tensor *out = attn_gru_forward(ctx, &m->dec_rnn, attn_concat(ctx, inp, 2, 2), state, &next);
    attn_tensor *logits = attn_linear_forward(ctx, &m->generator, out); /* (R, 1, V) */
    if (!logits || !next) return NULL;
    memcpy(state->data, next->data, (size_t)state->numel * sizeof(float)); /* only once all went well */
    return logits;
}

attn_status attn__bahdanau_cache_reorder(attn_seq2seq_decoder *d, const int64_t *parents)
{
    const int64_t R = d->rows, H = d->m->cfg.d_model;
    seq2seq_rows rows = {.x = d->bc.state->data,
                         .outer = d->m->cfg.dec_layers,
                         .outer_stride = R * H,
                         .row_stride = H,
                         .segs = 1,
                         .len = H}; /* (layers, R, H) */
    float *scratch =
        attn__arena_alloc(&d->work->arena, (size_t)(R * attn__seq2seq_rows_width(&rows)) * sizeof *scratch);
    if (!scratch) return attn_last_status();
    attn__seq2seq_rows_gather(&rows, parents, R, scratch);
    return ATTN_OK;
}

void attn__bahdanau_cache_select(attn_seq2seq_decoder *d, const int64_t *keep, const int64_t *rows, int64_t n)
{
    attn__seq2seq_keep_tensor(d->bc.keys, 0, keep, n);             /* (B, S, h) */
    attn__seq2seq_keep_tensor(d->bc.state, 1, rows, n * d->beams); /* (layers, R, H) */
    d->bc.values = d->row_mem.enc_out;                             /* kept with the rows' memory */
}

void attn__bahdanau_cache_free(attn_seq2seq_decoder *d)
{
    attn_tensor_free(d->bc.state);
    d->bc.state = NULL;
}
