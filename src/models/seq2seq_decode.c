/* Batched greedy decoding for the seq2seq models, driving an attn_seq2seq_decoder
 * (seq2seq_decoder.c) one step at a time: CACHED, or RECOMPUTE for the reference twin
 * attn_seq2seq_greedy_ref. Beam search is in seq2seq_beam.c. */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int64_t attn__seq2seq_argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static attn_status greedy(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                          const int64_t *src_lens, int64_t batch, int64_t src_len, int64_t max_out,
                          int64_t *out, int64_t *out_lens, attn_seq2seq_decode_impl impl)
{
    if (!ctx || !m || !src || !src_lens || !out || !out_lens || max_out < 1)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_greedy: NULL argument or max_out < 1");
    const attn_seq2seq_config *c = &m->cfg;
    const int64_t V = c->tgt_vocab;
    /* out rows keep the caller's width; decoding stops at the positional table's end */
    const int64_t stride = max_out;
    if (max_out >= c->max_len) max_out = c->max_len - 1; /* (max_out + 1 could overflow) */
    attn_ctx_reset(ctx);
    attn_seq2seq_decoder *d = attn_seq2seq_decoder_new(m, src, src_lens, batch, src_len, 1, max_out, impl);
    if (!d || attn_seq2seq_decoder_set_num_threads(d, attn_ctx_num_threads(ctx)) != ATTN_OK) {
        attn_seq2seq_decoder_free(d);
        return attn_last_status();
    }
    int64_t *tokens = malloc((size_t)batch * sizeof *tokens); /* (B) each row's latest */
    int64_t *alive = malloc((size_t)batch * sizeof *alive);   /* the sentence of each decoder row */
    int64_t *keep = malloc((size_t)batch * sizeof *keep);
    float *logits = malloc((size_t)(batch * V) * sizeof *logits); /* (B, V) */
    attn_status st = tokens && alive && keep && logits
                         ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "seq2seq_greedy: out of memory");
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++) {
        tokens[b] = c->bos_id;
        alive[b] = b;
        out_lens[b] = -1; /* not finished */
        for (int64_t t = 0; t < stride; t++) out[b * stride + t] = c->pad_id;
    }
    int64_t n_alive = batch;
    for (int64_t t = 1; st == ATTN_OK && t <= max_out && n_alive > 0; t++) {
        if ((st = attn_seq2seq_decoder_step(d, logits, tokens)) != ATTN_OK) break;
        int64_t n_keep = 0;
        for (int64_t a = 0; a < n_alive; a++) { /* ended rows are fed padding until dropped */
            const int64_t b = alive[a];
            tokens[a] = out_lens[b] >= 0 ? c->pad_id : attn__seq2seq_argmax(logits + a * V, V);
            if (out_lens[b] < 0) {
                out[b * stride + t - 1] = tokens[a];
                if (tokens[a] == c->eos_id || t == max_out) out_lens[b] = tokens[a] == c->eos_id ? t - 1 : t;
            }
            if (out_lens[b] < 0) keep[n_keep++] = a;
        }
        if (n_keep == 0) break;
        if ((n_alive - n_keep) * 8 < n_alive) continue; /* drop ended rows once they are an eighth */
        if ((st = attn_seq2seq_decoder_select(d, keep, n_keep)) != ATTN_OK) break;
        for (int64_t i = 0; i < n_keep; i++) {
            tokens[i] = tokens[keep[i]];
            alive[i] = alive[keep[i]];
        }
        n_alive = n_keep;
    }
    free(tokens);
    free(alive);
    free(keep);
    free(logits);
    attn_seq2seq_decoder_free(d);
    return st;
}

attn_status attn_seq2seq_greedy(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                const int64_t *src_lens, int64_t batch, int64_t src_len,
                                int64_t max_out, int64_t *out, int64_t *out_lens)
{
    return greedy(ctx, m, src, src_lens, batch, src_len, max_out, out, out_lens,
                  ATTN_SEQ2SEQ_DECODE_CACHED);
}

attn_status attn_seq2seq_greedy_ref(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                    const int64_t *src_lens, int64_t batch, int64_t src_len,
                                    int64_t max_out, int64_t *out, int64_t *out_lens)
{
    return greedy(ctx, m, src, src_lens, batch, src_len, max_out, out, out_lens,
                  ATTN_SEQ2SEQ_DECODE_RECOMPUTE);
}
