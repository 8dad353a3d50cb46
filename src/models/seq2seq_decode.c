/* attn_seq2seq_decode, and batched greedy decoding for the seq2seq models, driving an
 * attn_seq2seq_decoder (seq2seq_decoder.c) one step at a time: CACHED, or RECOMPUTE for the
 * reference twin. Beam search is in seq2seq_beam.c. */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* x->out (batch, out_width) receives up to max_out tokens per row (<eos> included), then pad */
static attn_status greedy(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_batch *x, int64_t max_out,
                          attn_seq2seq_decode_impl impl)
{
    const int64_t *src = x->src, *src_lens = x->src_lens, batch = x->batch, src_len = x->src_len, stride = x->out_width;
    int64_t *out = x->out, *out_lens = x->out_lens;
    if (!ctx || !m || !src || !src_lens || !out || !out_lens || max_out < 1)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_greedy: NULL argument or max_out < 1");
    const attn_seq2seq_config *c = &m->cfg;
    const int64_t V = c->tgt_vocab;
    /* decoding stops at the positional table's end */
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
    attn_status st =
        tokens && alive && keep && logits ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "seq2seq_greedy: out of memory");
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

/* Each sentence's limit (opts->max_out, or out_width for every one), checked: (batch), malloc'd */
static int64_t *limits_of(const attn_seq2seq_decode_opts *o, int64_t batch, int64_t out_width)
{
    int64_t *limit = malloc((size_t)batch * sizeof *limit);
    if (!limit) {
        attn__fail(ATTN_ERR_NOMEM, "seq2seq_decode: out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < batch; b++) {
        limit[b] = o->max_out ? o->max_out[b] : out_width;
        if (limit[b] < 1 || limit[b] > out_width) {
            attn__fail(ATTN_ERR_ARG, "seq2seq_decode: max_out[%lld] = %lld; expected in [1, out_width = %lld]",
                       (long long)b, (long long)limit[b], (long long)out_width);
            free(limit);
            return NULL;
        }
    }
    return limit;
}

/* Greedy: each sentence's tokens up to its limit, without <eos> (greedy() keeps it), then pad */
static attn_status greedy_limited(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_batch *x,
                                  attn_seq2seq_decode_impl impl)
{
    const int64_t *limit = x->max_out, batch = x->batch, out_width = x->out_width;
    int64_t *out = x->out, *out_lens = x->out_lens;
    int64_t longest = 1;
    for (int64_t b = 0; b < batch; b++) longest = limit[b] > longest ? limit[b] : longest;
    attn_status st = greedy(ctx, m, x, longest, impl);
    for (int64_t b = 0; st == ATTN_OK && b < batch; b++) {
        if (out_lens[b] > limit[b]) out_lens[b] = limit[b];
        for (int64_t t = out_lens[b]; t < out_width; t++) out[b * out_width + t] = m->cfg.pad_id;
    }
    return st;
}

attn_status attn_seq2seq_decode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, const int64_t *src_lens,
                                int64_t batch, int64_t src_len, const attn_seq2seq_decode_opts *opts, int64_t out_width,
                                int64_t *out, int64_t *out_lens)
{
    const attn_seq2seq_decode_opts defaults = {.beam_size = 1};
    const attn_seq2seq_decode_opts *o = opts ? opts : &defaults;
    if (o->cross_weights) *o->cross_weights = NULL;
    if (!ctx || !m || !src || !src_lens || !out || !out_lens)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_decode: NULL argument");
    int64_t n_out;
    if (batch < 1 || out_width < 1 || o->beam_size < 0 || o->beam_size > ATTN_BEAM_MAX ||
        (o->impl != ATTN_SEQ2SEQ_DECODE_CACHED && o->impl != ATTN_SEQ2SEQ_DECODE_RECOMPUTE) ||
        (o->cross_weights && batch != 1) || !attn__mul_ok(batch, out_width, &n_out))
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_decode: batch %lld, out_width %lld, beam_size %d, impl %d%s; expected "
                          "a batch and out_width >= 1 (their product within int64), beam_size in [0, %d], an "
                          "attn_seq2seq_decode_impl, and cross_weights for a batch of 1 alone",
                          (long long)batch, (long long)out_width, o->beam_size, (int)o->impl,
                          o->cross_weights ? " with cross_weights" : "", ATTN_BEAM_MAX);
    if (o->cross_weights && (src_lens[0] < 1 || src_lens[0] > src_len))
        return attn__fail(ATTN_ERR_ARG, "seq2seq_decode: src_lens[0] = %lld; expected in [1, %lld] (the source width)",
                          (long long)src_lens[0], (long long)src_len);
    int64_t *limit = limits_of(o, batch, out_width);
    if (!limit) return attn_last_status();
    for (int64_t i = 0; i < n_out; i++) out[i] = m->cfg.pad_id;
    attn_seq2seq_decode_opts search = *o;
    search.beam_size = o->beam_size > 1 ? o->beam_size : 1;
    const seq2seq_batch x = {src, src_lens, batch, src_len, limit, out_width, out, out_lens};
    attn_status st = o->cross_weights /* one sentence, searched (beam 1 finds greedy's answer), then its weights */
                         ? attn__seq2seq_beam_one(ctx, m, &x, &search)
                         : search.beam_size > 1 ? attn__seq2seq_beam_batch(ctx, m, &x, &search)
                                                : greedy_limited(ctx, m, &x, o->impl);
    free(limit);
    return st;
}
