/* Decoding for the seq2seq models: batched greedy search and beam search with a length
 * penalty, both driving an attn_seq2seq_decoder (seq2seq_decoder.c) one step at a time: CACHED,
 * or RECOMPUTE for the reference twins (*_ref). */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int64_t argmax(const float *x, int64_t n)
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
    /* out rows keep the caller's width; decoding stops at the positional table's end */
    const int64_t stride = max_out;
    if (max_out >= c->max_len) max_out = c->max_len - 1; /* (max_out + 1 could overflow) */
    attn_ctx_reset(ctx);
    attn_seq2seq_decoder *d = attn_seq2seq_decoder_new(m, src, src_lens, batch, src_len, 1, max_out, impl);
    if (!d) return attn_last_status();
    int64_t *tokens = malloc((size_t)batch * sizeof *tokens);           /* (B) each row's latest */
    float *logits = malloc((size_t)(batch * c->tgt_vocab) * sizeof *logits); /* (B, V) */
    attn_status st = tokens && logits ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "seq2seq_greedy: out of memory");
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++) {
        tokens[b] = c->bos_id;
        out_lens[b] = -1; /* not finished */
        for (int64_t t = 0; t < stride; t++) out[b * stride + t] = c->pad_id;
    }
    int64_t done = 0;
    for (int64_t t = 1; st == ATTN_OK && t <= max_out && done < batch; t++) {
        if ((st = attn_seq2seq_decoder_step(d, logits, tokens)) != ATTN_OK) break;
        for (int64_t b = 0; b < batch; b++) { /* finished rows are fed padding */
            int64_t tok = out_lens[b] >= 0 ? c->pad_id : argmax(logits + b * c->tgt_vocab, c->tgt_vocab);
            tokens[b] = tok;
            if (out_lens[b] >= 0) continue;
            out[b * stride + t - 1] = tok;
            if (tok == c->eos_id || t == max_out) {
                out_lens[b] = tok == c->eos_id ? t - 1 : t;
                done++;
            }
        }
    }
    free(tokens);
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

typedef struct hypothesis {
    int64_t *tokens; /* (max_out + 1): <bos> first */
    int64_t len;     /* tokens including <bos> */
    double logp;
    int64_t row;     /* the decoder row holding its state */
} hypothesis;

static double penalized(double logp, int64_t len, float alpha)
{
    return logp / pow((5.0 + (double)len) / 6.0, alpha);
}

static attn_status beam(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, int64_t src_len,
                        int beam_size, float alpha, int64_t max_out, int64_t *out, int64_t *out_len,
                        attn_tensor **cross_weights, attn_seq2seq_decode_impl impl)
{
    if (cross_weights) *cross_weights = NULL;
    if (!ctx || !m || !src || !out || !out_len || max_out < 1 || beam_size < 1 || beam_size > 64)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_beam: NULL argument, max_out < 1 or beam size "
                                        "outside [1, 64]");
    const attn_seq2seq_config *c = &m->cfg;
    const int64_t V = c->tgt_vocab;
    const int k = beam_size;
    if (max_out >= c->max_len) max_out = c->max_len - 1; /* (max_out + 1 could overflow) */
    attn_ctx_reset(ctx);
    /* k rows of one sentence; rows past the live hypotheses repeat row 0 */
    attn_seq2seq_decoder *d = attn_seq2seq_decoder_new(m, src, &src_len, 1, src_len, k, max_out, impl);
    if (!d) return attn_last_status();
    hypothesis *live = calloc((size_t)k, sizeof *live), *cand = calloc((size_t)k * (size_t)k, sizeof *cand);
    int64_t *store = malloc((size_t)(k + k * k + 1) * (size_t)(max_out + 1) * sizeof *store);
    int64_t tokens[64], parents[64];
    float *logits = malloc((size_t)k * (size_t)V * sizeof *logits); /* (k, V) */
    attn_status st = live && cand && store && logits ? ATTN_OK
                                                     : attn__fail(ATTN_ERR_NOMEM, "seq2seq_beam: out of memory");
    hypothesis best = {0};
    double best_score = -INFINITY;
    int n_live = 1, n_finished = 0;
    if (st == ATTN_OK) {
        best.tokens = store + (size_t)(k + k * k) * (size_t)(max_out + 1);
        for (int i = 0; i < k; i++) live[i].tokens = store + (size_t)i * (size_t)(max_out + 1);
        for (int i = 0; i < k * k; i++) cand[i].tokens = store + (size_t)(k + i) * (size_t)(max_out + 1);
        live[0].tokens[0] = c->bos_id;
        live[0].len = 1;
    }
    for (int64_t t = 1; st == ATTN_OK && t <= max_out && n_live > 0; t++) {
        for (int i = 0; i < k; i++) tokens[i] = live[i < n_live ? i : 0].tokens[t - 1];
        if ((st = attn_seq2seq_decoder_step(d, logits, tokens)) != ATTN_OK) break;
        int n_cand = 0;
        for (int i = 0; i < n_live; i++) {
            const float *row = logits + (int64_t)i * V;
            float mx = row[argmax(row, V)];
            double sum = 0;
            for (int64_t v = 0; v < V; v++) sum += exp((double)row[v] - mx);
            double lse = mx + log(sum);
            for (int j = 0; j < k; j++) { /* the k best continuations of this beam */
                int64_t tok = -1;
                for (int64_t v = 0; v < V; v++) {
                    bool taken = false;
                    for (int q = n_cand - j; q < n_cand; q++) taken = taken || cand[q].tokens[t] == v;
                    if (!taken && (tok < 0 || row[v] > row[tok])) tok = v;
                }
                hypothesis *h = &cand[n_cand++];
                memcpy(h->tokens, live[i].tokens, (size_t)t * sizeof *h->tokens);
                h->tokens[t] = tok;
                h->len = t + 1;
                h->logp = live[i].logp + row[tok] - lse;
                h->row = i;
            }
        }
        /* keep the k best candidates; finished ones (<eos> or max length) compete for best */
        n_live = 0;
        for (int picked = 0; picked < k && picked < n_cand; picked++) {
            int arg = -1;
            for (int q = 0; q < n_cand; q++)
                if (cand[q].len > 0 && (arg < 0 || cand[q].logp > cand[arg].logp)) arg = q;
            hypothesis *h = &cand[arg];
            bool finished = h->tokens[t] == c->eos_id || t == max_out;
            double score = penalized(h->logp, h->len - 1, alpha);
            n_finished += finished;
            if (finished && score > best_score) {
                best_score = score;
                best.len = h->len;
                best.logp = h->logp;
                memcpy(best.tokens, h->tokens, (size_t)h->len * sizeof *h->tokens);
            } else if (!finished) {
                live[n_live].len = h->len;
                live[n_live].logp = h->logp;
                memcpy(live[n_live].tokens, h->tokens, (size_t)h->len * sizeof *h->tokens);
                parents[n_live++] = h->row;
            }
            h->len = 0; /* used */
        }
        if (n_finished >= k) n_live = 0; /* k hypotheses ended: the usual stopping rule */
        for (int i = n_live; i < k; i++) parents[i] = parents[0];
        if (n_live > 0) st = attn_seq2seq_decoder_reorder(d, parents);
    }
    if (st == ATTN_OK) {
        int64_t n = best.len - 1; /* without <bos> */
        if (n > 0 && best.tokens[best.len - 1] == c->eos_id) n--;
        memcpy(out, best.tokens + 1, (size_t)n * sizeof *out);
        *out_len = n;
        if (cross_weights) { /* one teacher-forced pass over <bos> + the answer, in eval mode */
            bool grad = attn_ctx_grad_enabled(ctx), training = attn_ctx_training(ctx);
            attn_ctx_set_grad_enabled(ctx, false);
            attn_ctx_set_training(ctx, false);
            attn_tensor *w = NULL;
            seq2seq_memory one;
            if (seq2seq_encode(ctx, m, src, &src_len, 1, src_len, &one) == ATTN_OK &&
                seq2seq_decode(ctx, m, &one, best.tokens, NULL, n + 1, &w) && w)
                *cross_weights = attn_reshape(ctx, w, 3, (int64_t[]){w->shape[1], n + 1, src_len});
            if (!*cross_weights) st = attn_last_status();
            attn_ctx_set_grad_enabled(ctx, grad);
            attn_ctx_set_training(ctx, training);
        }
    }
    free(live);
    free(cand);
    free(store);
    free(logits);
    attn_seq2seq_decoder_free(d);
    return st;
}

attn_status attn_seq2seq_beam(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                              int64_t src_len, int beam_size, float alpha, int64_t max_out,
                              int64_t *out, int64_t *out_len, attn_tensor **cross_weights)
{
    return beam(ctx, m, src, src_len, beam_size, alpha, max_out, out, out_len, cross_weights,
                ATTN_SEQ2SEQ_DECODE_CACHED);
}

attn_status attn_seq2seq_beam_ref(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                  int64_t src_len, int beam_size, float alpha, int64_t max_out,
                                  int64_t *out, int64_t *out_len, attn_tensor **cross_weights)
{
    return beam(ctx, m, src, src_len, beam_size, alpha, max_out, out, out_len, cross_weights,
                ATTN_SEQ2SEQ_DECODE_RECOMPUTE);
}
