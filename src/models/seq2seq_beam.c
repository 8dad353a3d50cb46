/* Beam search with a length penalty for the seq2seq models: every sentence of a batch keeps its
 * own k hypotheses in k rows of one attn_seq2seq_decoder (rows [b k, (b + 1) k)), so a step
 * decodes the rows of all sentences together; after each step a sentence keeps its k best
 * continuations and the decoder's rows follow them (reorder). A sentence stops when k of its
 * hypotheses have ended (<eos> or its max_out); the ended sentences leave the decoder (select)
 * once they are an eighth of those in it.
 * attn__seq2seq_beam_one is the batch of one sentence. Bahdanau sentences of different lengths are
 * searched in groups of one length (beam_batch). */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct hypothesis {
    int64_t *tokens; /* (cap + 1): <bos> first */
    int64_t len;     /* tokens including <bos> */
    double logp;
    int64_t row; /* the decoder row holding its state (a row of its sentence) */
} hypothesis;

typedef struct sentence_search {
    hypothesis *live, *cand, best; /* k live, k * k candidates of a step, the best ended one */
    double best_score;
    int n_live, n_finished;
    int64_t max_out; /* tokens at most, <eos> included */
} sentence_search;

static double penalized(double logp, int64_t len, float alpha)
{
    return logp / pow((5.0 + (double)len) / 6.0, alpha);
}

/* The k largest of row[0..V) (k <= V), largest first, the lower index first among equals: one
 * pass keeping them in order (the k passes that each take the largest not yet taken, in one). */
static void top_k(int64_t *best, const float *row, int64_t V, int k)
{
    int n = 0;
    for (int64_t v = 0; v < V; v++) {
        if (n == k && !(row[v] > row[best[k - 1]])) continue;
        int at = n < k ? n++ : k - 1; /* the last place, then move up past the smaller ones */
        while (at > 0 && row[v] > row[best[at - 1]]) {
            best[at] = best[at - 1];
            at--;
        }
        best[at] = v;
    }
}

/* Step t of one sentence: logits (k, V) of its rows (row i continues live[i]). Keeps the k best
 * continuations; parents (k) receives the row each new live hypothesis continues. */
static void search_step(sentence_search *s, const float *logits, int k, int64_t V, int64_t t, float alpha, int64_t eos,
                        int64_t *parents)
{
    hypothesis *live = s->live, *cand = s->cand;
    int n_cand = 0;
    for (int i = 0; i < s->n_live; i++) {
        const float *row = logits + (int64_t)i * V;
        float mx = row[attn__seq2seq_argmax(row, V)];
        double sum = 0;
        for (int64_t v = 0; v < V; v++) sum += exp((double)row[v] - mx);
        double lse = mx + log(sum);
        int64_t best[ATTN_BEAM_MAX];
        top_k(best, row, V, k);
        for (int j = 0; j < k; j++) { /* the k best continuations of this beam */
            const int64_t tok = best[j];
            hypothesis *h = &cand[n_cand++];
            memcpy(h->tokens, live[i].tokens, (size_t)t * sizeof *h->tokens);
            h->tokens[t] = tok;
            h->len = t + 1;
            h->logp = live[i].logp + row[tok] - lse;
            h->row = i;
        }
    }
    /* keep the k best candidates; finished ones (<eos> or max length) compete for best */
    s->n_live = 0;
    for (int picked = 0; picked < k && picked < n_cand; picked++) {
        int arg = -1;
        for (int q = 0; q < n_cand; q++)
            if (cand[q].len > 0 && (arg < 0 || cand[q].logp > cand[arg].logp)) arg = q;
        hypothesis *h = &cand[arg];
        bool finished = h->tokens[t] == eos || t == s->max_out;
        double score = penalized(h->logp, h->len - 1, alpha);
        s->n_finished += finished;
        if (finished && (s->best.len == 0 || score > s->best_score)) { /* the first one always: a
                                                     * score may be -inf when pow() over- or underflows */
            s->best_score = score;
            s->best.len = h->len;
            s->best.logp = h->logp;
            memcpy(s->best.tokens, h->tokens, (size_t)h->len * sizeof *h->tokens);
        } else if (!finished) {
            hypothesis *l = &live[s->n_live];
            l->len = h->len;
            l->logp = h->logp;
            memcpy(l->tokens, h->tokens, (size_t)h->len * sizeof *h->tokens);
            parents[s->n_live++] = h->row;
        }
        h->len = 0; /* used */
    }
    if (s->n_finished >= k) s->n_live = 0; /* k hypotheses ended: the usual stopping rule */
    for (int i = s->n_live; i < k; i++) parents[i] = s->n_live > 0 ? parents[0] : i;
}

/* Hypotheses of every sentence: token arrays carved from one block. */
static sentence_search *searches_new(int64_t batch, int k, int64_t cap, int64_t bos, int64_t **block)
{
    const int64_t per_sentence = (int64_t)k + (int64_t)k * k + 1, width = cap + 1;
    int64_t n;
    sentence_search *s = NULL;
    *block = NULL;
    if (attn__mul_ok(batch, per_sentence, &n) && attn__mul_ok(n, width, &n) &&
        attn__mul_ok(n, (int64_t)sizeof(int64_t), &n) && (s = calloc((size_t)batch, sizeof *s)))
        *block = malloc((size_t)n);
    hypothesis *hyps = *block ? calloc((size_t)(batch * (k + k * k)), sizeof *hyps) : NULL;
    if (!hyps) {
        free(s);
        free(*block);
        *block = NULL;
        return attn__fail_null(ATTN_ERR_NOMEM, "seq2seq_beam: out of memory");
    }
    for (int64_t b = 0; b < batch; b++) {
        int64_t *tokens = *block + b * per_sentence * width;
        s[b].live = hyps + b * (k + k * k);
        s[b].cand = s[b].live + k;
        for (int i = 0; i < k + k * k; i++) s[b].live[i].tokens = tokens + i * width;
        s[b].best.tokens = tokens + (k + k * k) * width;
        s[b].best_score = -INFINITY;
        s[b].n_live = 1;
        s[b].live[0].tokens[0] = bos;
        s[b].live[0].len = 1;
    }
    return s;
}

static void searches_free(sentence_search *s, int64_t *block)
{
    if (s) free(s[0].live);
    free(s);
    free(block);
}

static attn_status beam_rows(const attn_seq2seq *m, const seq2seq_batch *x, const attn_seq2seq_decode_opts *o,
                             int threads)
{
    const int64_t *src = x->src, *src_lens = x->src_lens, *max_out = x->max_out, batch = x->batch, src_len = x->src_len,
                  out_width = x->out_width;
    int64_t *out = x->out, *out_lens = x->out_lens;
    const int beam_size = o->beam_size;
    const float alpha = o->length_penalty;
    if (!m || !src || !src_lens || !max_out || !out || !out_lens || beam_size < 1 || beam_size > ATTN_BEAM_MAX)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_beam: NULL argument or beam size outside [1, %d]", ATTN_BEAM_MAX);
    if (!isfinite(alpha))
        return attn__fail(ATTN_ERR_ARG, "seq2seq_beam: length penalty alpha is %g; expected a finite number",
                          (double)alpha);
    const attn_seq2seq_config *c = &m->cfg;
    const int64_t V = c->tgt_vocab, k = beam_size;
    if (batch < 1 || k > V)
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_beam: batch %lld and beam size %lld; expected a batch "
                          ">= 1 and beams no more than the %lld target tokens",
                          (long long)batch, (long long)k, (long long)V);
    int64_t cap = 1, rows; /* the most steps of any sentence */
    for (int64_t b = 0; b < batch; b++) {
        const int64_t mo = max_out[b] < c->max_len ? max_out[b] : c->max_len - 1; /* the positions known */
        if (mo < 1 || mo > out_width)
            return attn__fail(ATTN_ERR_ARG,
                              "seq2seq_beam: max_out[%lld] = %lld; expected >= 1 and "
                              "(after the model's max_len - 1 = %lld) <= out_width %lld",
                              (long long)b, (long long)max_out[b], (long long)(c->max_len - 1), (long long)out_width);
        cap = mo > cap ? mo : cap;
    }
    if (!attn__mul_ok(batch, k, &rows) || !attn__mul_ok(rows, V, &rows))
        return attn__fail(ATTN_ERR_ARG, "seq2seq_beam: batch %lld x beam %lld x vocabulary is too large",
                          (long long)batch, (long long)k);
    attn_seq2seq_decoder *d = attn_seq2seq_decoder_new(m, src, src_lens, batch, src_len, k, cap, o->impl);
    if (!d || attn_seq2seq_decoder_set_num_threads(d, threads) != ATTN_OK) {
        attn_seq2seq_decoder_free(d);
        return attn_last_status();
    }
    int64_t *block;
    sentence_search *s = searches_new(batch, (int)k, cap, c->bos_id, &block);
    int64_t *tokens = malloc((size_t)(batch * k) * sizeof *tokens); /* (B k) each row's latest */
    int64_t *parents = malloc((size_t)(batch * k) * sizeof *parents);
    float *logits = malloc((size_t)rows * sizeof *logits); /* (B k, V) */
    attn_status st = s ? ATTN_OK : attn_last_status();
    if (st == ATTN_OK && (!tokens || !parents || !logits))
        st = attn__fail(ATTN_ERR_NOMEM, "seq2seq_beam: out of memory");
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++)
        s[b].max_out = max_out[b] < c->max_len ? max_out[b] : c->max_len - 1;
    int64_t *alive = malloc((size_t)batch * sizeof *alive); /* the decoder's sentences, in order */
    if (st == ATTN_OK && !alive) st = attn__fail(ATTN_ERR_NOMEM, "seq2seq_beam: out of memory");
    int64_t n_alive = batch;
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++) alive[b] = b;
    for (int64_t t = 1; st == ATTN_OK && n_alive > 0; t++) {
        for (int64_t a = 0; a < n_alive; a++) { /* rows past the live hypotheses repeat the first */
            const sentence_search *sa = &s[alive[a]];
            for (int64_t i = 0; i < k; i++)
                tokens[a * k + i] = sa->n_live > 0 ? sa->live[i < sa->n_live ? i : 0].tokens[t - 1] : c->pad_id;
        }
        if ((st = attn_seq2seq_decoder_step(d, logits, tokens)) != ATTN_OK) break;
        int64_t ended = 0; /* the sentences' searches are independent: over the threads */
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads) reduction(+ : ended) if (n_alive > 1)
        for (int64_t a = 0; a < n_alive; a++) {
            int64_t *p = parents + a * k; /* rows of the decoder's sentence a: [a k, (a + 1) k) */
            sentence_search *sa = &s[alive[a]];
            if (sa->n_live > 0)
                search_step(sa, logits + a * k * V, (int)k, V, t, alpha, c->eos_id, p);
            else
                for (int64_t i = 0; i < k; i++) p[i] = i;
            for (int64_t i = 0; i < k; i++) p[i] += a * k;
            ended += sa->n_live == 0;
        }
        if (ended == n_alive || (st = attn_seq2seq_decoder_reorder(d, parents)) != ATTN_OK) break;
        if (ended * 8 >= n_alive) { /* drop the ended sentences once they are an eighth of the rows */
            int64_t n = 0;
            for (int64_t a = 0; a < n_alive; a++)
                if (s[alive[a]].n_live > 0) {
                    parents[n] = a; /* as the list of sentences kept */
                    alive[n++] = alive[a];
                }
            st = attn_seq2seq_decoder_select(d, parents, n);
            n_alive = n;
        }
    }
    free(alive);
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++) {
        const hypothesis *best = &s[b].best;
        int64_t n = best->len > 1 ? best->len - 1 : 0; /* without <bos> */
        if (n > 0 && best->tokens[best->len - 1] == c->eos_id) n--;
        memcpy(out + b * out_width, best->tokens + 1, (size_t)n * sizeof *out);
        for (int64_t j = n; j < out_width; j++) out[b * out_width + j] = c->pad_id;
        out_lens[b] = n;
    }
    searches_free(s, block);
    free(tokens);
    free(parents);
    free(logits);
    attn_seq2seq_decoder_free(d);
    return st;
}

/* D2L's GRU encoder reads the padding: Bahdanau sentences go in groups of one source length, each
 * at its own width, to be searched as they would be alone. The Transformer masks the padding and
 * takes the batch at once. */
attn_status attn__seq2seq_beam_batch(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_batch *x,
                                     const attn_seq2seq_decode_opts *o)
{
    if (!ctx) return attn__fail(ATTN_ERR_ARG, "seq2seq_beam: NULL ctx");
    const int64_t *src = x->src, *src_lens = x->src_lens, *max_out = x->max_out, batch = x->batch, src_len = x->src_len,
                  out_width = x->out_width;
    int64_t *out = x->out, *out_lens = x->out_lens;
    attn_ctx_reset(ctx);
    const int threads = attn_ctx_num_threads(ctx);
    bool grouped = m && src && src_lens && max_out && out && out_lens && out_width >= 1 &&
                   m->cfg.kind == ATTN_SEQ2SEQ_BAHDANAU && src_len >= 1 && src_len <= m->cfg.max_len,
         padded = false;
    for (int64_t b = 0; grouped && b < batch; b++) padded = padded || src_lens[b] != src_len;
    if (!grouped || !padded) /* (beam_rows reports bad arguments) */
        return beam_rows(m, x, o, threads);
    int64_t *rows = malloc((size_t)batch * sizeof *rows), *lens = malloc((size_t)batch * sizeof *lens);
    int64_t *limits = malloc((size_t)batch * sizeof *limits), *sub_lens = malloc((size_t)batch * sizeof *sub_lens);
    int64_t *sub = NULL, *sub_out = NULL, n_ids, n_out;
    if (attn__mul_ok(batch, src_len, &n_ids) && attn__mul_ok(batch, out_width, &n_out)) {
        sub = malloc((size_t)n_ids * sizeof *sub);
        sub_out = malloc((size_t)n_out * sizeof *sub_out);
    }
    attn_status st = rows && lens && limits && sub_lens && sub && sub_out
                         ? ATTN_OK
                         : attn__fail(ATTN_ERR_NOMEM, "seq2seq_beam: out of memory");
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++)
        if (src_lens[b] < 1 || src_lens[b] > src_len)
            st = attn__fail(ATTN_ERR_ARG,
                            "seq2seq_beam: src_lens[%lld] = %lld; expected in [1, %lld] "
                            "(the source width)",
                            (long long)b, (long long)src_lens[b], (long long)src_len);
    for (int64_t len = 1; st == ATTN_OK && len <= src_len; len++) {
        int64_t n = 0; /* the sentences of this length, unpadded */
        for (int64_t b = 0; b < batch; b++)
            if (src_lens[b] == len) {
                memcpy(sub + n * len, src + b * src_len, (size_t)len * sizeof *sub);
                rows[n] = b;
                limits[n] = max_out[b];
                sub_lens[n++] = len;
            }
        const seq2seq_batch group = {sub, sub_lens, n, len, limits, out_width, sub_out, lens};
        if (n > 0) st = beam_rows(m, &group, o, threads);
        for (int64_t i = 0; st == ATTN_OK && i < n; i++) {
            memcpy(out + rows[i] * out_width, sub_out + i * out_width, (size_t)out_width * sizeof *out);
            out_lens[rows[i]] = lens[i];
        }
    }
    free(rows);
    free(lens);
    free(limits);
    free(sub_lens);
    free(sub);
    free(sub_out);
    return st;
}

/* One sentence; with cross_weights, one teacher-forced pass over <bos> + the answer, in eval
 * mode, gives its cross-attention. */
attn_status attn__seq2seq_beam_one(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_batch *x,
                                   const attn_seq2seq_decode_opts *o)
{
    attn_tensor **cross_weights = o->cross_weights;
    if (cross_weights) *cross_weights = NULL;
    if (!ctx || !m || !x->out || !x->out_lens || x->batch != 1 || x->max_out[0] < 1)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_beam: NULL argument, a batch of more than one, or max_out < 1");
    int64_t src_len = x->src_lens[0], *out_len = x->out_lens, *out = x->out;
    const int64_t *src = x->src, max_out = x->max_out[0];
    const int64_t width = max_out < m->cfg.max_len ? max_out : m->cfg.max_len - 1; /* out's room used */
    const seq2seq_batch one_unpadded = {src, &src_len, 1, src_len, &max_out, width, out, out_len};
    attn_status st = attn__seq2seq_beam_batch(ctx, m, &one_unpadded, o);
    if (st != ATTN_OK || !cross_weights) return st;
    bool grad = attn_ctx_grad_enabled(ctx), training = attn_ctx_training(ctx);
    attn_ctx_set_grad_enabled(ctx, false);
    attn_ctx_set_training(ctx, false);
    int64_t *tokens = attn__arena_alloc(&ctx->arena, (size_t)(*out_len + 1) * sizeof *tokens);
    seq2seq_memory one;
    attn_tensor *w = NULL;
    if (tokens) {
        tokens[0] = m->cfg.bos_id;
        memcpy(tokens + 1, out, (size_t)*out_len * sizeof *tokens);
    }
    if (tokens && attn__seq2seq_encode(ctx, m, src, &src_len, 1, src_len, &one) == ATTN_OK &&
        attn__seq2seq_decode(ctx, m, &one, tokens, NULL, *out_len + 1, &w) && w)
        *cross_weights = attn_reshape(ctx, w, 3, (int64_t[]){w->shape[1], *out_len + 1, src_len});
    if (!*cross_weights) st = attn_last_status();
    attn_ctx_set_grad_enabled(ctx, grad);
    attn_ctx_set_training(ctx, training);
    return st;
}
