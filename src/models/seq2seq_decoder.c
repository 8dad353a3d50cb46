/* Step-by-step decoding (attn_seq2seq_decoder; what it computes is in attn.h). The source is
 * encoded once into `keep`; every step and reorder runs in `work`, reset first, so a sentence of
 * any length uses the memory of one step. CACHED hands the step to the architecture's cache
 * (seq2seq_transformer_step.c, seq2seq_bahdanau_step.c); RECOMPUTE, the reference twin, keeps the
 * tokens and runs the teacher-forced decoder over the whole prefix at every step. */
#include "seq2seq_internal.h"

#include <stdlib.h>
#include <string.h>

/* Each sentence's memory repeated for its beams: (B, ...) -> (B * beams, ...) rows, in ctx. */
static attn_status repeat_memory(attn_ctx *ctx, const seq2seq_memory *one, int64_t beams, seq2seq_memory *rows)
{
    *rows = *one;
    if (beams == 1) return ATTN_OK;
    const int64_t B = one->batch, R = B * beams, S = one->src_len;
    const attn_tensor *e = one->enc_out, *h = one->enc_state;
    int64_t *lens = attn__arena_alloc(&ctx->arena, (size_t)R * sizeof *lens);
    attn_tensor *out = attn_tensor_empty(ctx, 3, (int64_t[]){R, S, e->shape[2]});
    attn_tensor *state = h ? attn_tensor_empty(ctx, 3, (int64_t[]){h->shape[0], R, h->shape[2]}) : NULL;
    if (!lens || !out || (h && !state)) return attn_last_status();
    const int64_t per_row = S * e->shape[2], layers = h ? h->shape[0] : 0, width = h ? h->shape[2] : 0;
    for (int64_t r = 0; r < R; r++) {
        const int64_t b = r / beams;
        lens[r] = one->src_lens[b];
        memcpy(out->data + r * per_row, e->data + b * per_row, (size_t)per_row * sizeof(float));
        for (int64_t l = 0; l < layers; l++) /* (layers, B, H) -> (layers, R, H) */
            memcpy(state->data + (l * R + r) * width, h->data + (l * B + b) * width, (size_t)width * sizeof(float));
    }
    *rows = (seq2seq_memory){.enc_out = out,
                             .enc_state = state,
                             .src_lens = lens,
                             .batch = R,
                             .src_len = S,
                             .src_pad = attn__seq2seq_padding(ctx, lens, R, S)};
    return rows->src_pad ? ATTN_OK : attn_last_status();
}

/* RECOMPUTE: the tokens so far (rows, t) through the teacher-forced decoder -> (R, t, V). */
static attn_tensor *recompute_step(attn_seq2seq_decoder *d, const int64_t *tokens)
{
    const int64_t R = d->rows, t = d->steps + 1;
    int64_t *ids = attn__arena_alloc(&d->work->arena, (size_t)(R * t) * sizeof *ids); /* (R, t) */
    if (!ids) return NULL;
    for (int64_t r = 0; r < R; r++) {
        d->prefix[r * d->cap + t - 1] = tokens[r];
        memcpy(ids + r * t, d->prefix + r * d->cap, (size_t)t * sizeof *ids);
    }
    return attn__seq2seq_decode(d->work, d->m, &d->row_mem, ids, NULL, t, NULL);
}

static attn_status recompute_reorder(attn_seq2seq_decoder *d, const int64_t *parents)
{
    const int64_t R = d->rows, cap = d->cap;
    int64_t *scratch = attn__arena_alloc(&d->work->arena, (size_t)(R * cap) * sizeof *scratch);
    if (!scratch) return attn_last_status();
    for (int64_t r = 0; r < R; r++)
        memcpy(scratch + r * cap, d->prefix + parents[r] * cap, (size_t)d->steps * sizeof *scratch);
    for (int64_t r = 0; r < R; r++) memcpy(d->prefix + r * cap, scratch + r * cap, (size_t)d->steps * sizeof *scratch);
    return ATTN_OK;
}

static attn_status check_new(const attn_seq2seq *m, const int64_t *src, const int64_t *src_lens, int64_t batch,
                             int64_t src_len, int64_t beams, int64_t max_steps, attn_seq2seq_decode_impl impl,
                             int64_t *rows)
{
    if (!m || !src || !src_lens) return attn__fail(ATTN_ERR_ARG, "seq2seq_decoder_new: NULL argument");
    if (impl != ATTN_SEQ2SEQ_DECODE_CACHED && impl != ATTN_SEQ2SEQ_DECODE_RECOMPUTE)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_decoder_new: impl %d is neither CACHED nor RECOMPUTE", (int)impl);
    int64_t cells, bytes; /* a cache of rows x max_len x d_model floats (d_model >= 2) in bytes */
    if (batch < 1 || beams < 1 || !attn__mul_ok(batch, beams, rows) || !attn__mul_ok(*rows, m->cfg.max_len, &cells) ||
        !attn__mul_ok(cells, m->cfg.d_model, &cells) || !attn__mul_ok(cells, (int64_t)sizeof(float), &bytes))
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_decoder_new: batch %lld and beams %lld; expected both "
                          ">= 1 and a cache of rows x max_len x d_model floats whose size fits in int64",
                          (long long)batch, (long long)beams);
    if (max_steps < 1 || max_steps > m->cfg.max_len)
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_decoder_new: max_steps %lld; expected in [1, %lld] "
                          "(the model's max_len)",
                          (long long)max_steps, (long long)m->cfg.max_len);
    if (src_len < 1 || src_len > m->cfg.max_len)
        return attn__fail(ATTN_ERR_SHAPE, "seq2seq_decoder_new: source length %lld; expected in [1, %lld]",
                          (long long)src_len, (long long)m->cfg.max_len);
    for (int64_t b = 0; b < batch; b++)
        if (src_lens[b] < 1 || src_lens[b] > src_len)
            return attn__fail(ATTN_ERR_ARG,
                              "seq2seq_decoder_new: src_lens[%lld] = %lld; expected in "
                              "[1, %lld] (the source width)",
                              (long long)b, (long long)src_lens[b], (long long)src_len);
    return ATTN_OK;
}

attn_seq2seq_decoder *attn_seq2seq_decoder_new(const attn_seq2seq *m, const int64_t *src, const int64_t *src_lens,
                                               int64_t batch, int64_t src_len, int64_t beams, int64_t max_steps,
                                               attn_seq2seq_decode_impl impl)
{
    int64_t rows;
    if (check_new(m, src, src_lens, batch, src_len, beams, max_steps, impl, &rows) != ATTN_OK) return NULL;
    attn_seq2seq_decoder *d = calloc(1, sizeof *d);
    if (!d) return attn__fail_null(ATTN_ERR_NOMEM, "seq2seq_decoder_new: out of memory");
    *d = (attn_seq2seq_decoder){.m = m,
                                .impl = impl,
                                .keep = attn_ctx_new(0),
                                .work = attn_ctx_new(0),
                                .batch = batch,
                                .beams = beams,
                                .rows = rows,
                                .cap = max_steps};
    attn_status st = d->keep && d->work ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "seq2seq_decoder_new: out of memory");
    attn_ctx *ctxs[2] = {d->keep, d->work};
    for (int i = 0; st == ATTN_OK && i < 2; i++) {
        attn_ctx_set_grad_enabled(ctxs[i], false);
        attn_ctx_set_training(ctxs[i], false);
    }
    int64_t *lens = st == ATTN_OK ? attn__arena_alloc(&d->keep->arena, (size_t)batch * sizeof *lens) : NULL;
    if (lens) memcpy(lens, src_lens, (size_t)batch * sizeof *lens); /* the memory keeps it */
    if (st == ATTN_OK && !lens) st = attn_last_status();
    if (st == ATTN_OK) st = attn__seq2seq_encode(d->keep, m, src, lens, batch, src_len, &d->mem);
    const bool recompute = impl == ATTN_SEQ2SEQ_DECODE_RECOMPUTE;
    if (st == ATTN_OK && (recompute || m->cfg.kind == ATTN_SEQ2SEQ_BAHDANAU))
        st = repeat_memory(d->keep, &d->mem, beams, &d->row_mem);
    if (st == ATTN_OK && recompute && !(d->prefix = malloc((size_t)(rows * max_steps) * sizeof *d->prefix)))
        st = attn__fail(ATTN_ERR_NOMEM, "seq2seq_decoder_new: out of memory");
    if (st == ATTN_OK && !recompute)
        st = m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER ? attn__transformer_cache_init(d) : attn__bahdanau_cache_init(d);
    if (st != ATTN_OK) {
        attn_seq2seq_decoder_free(d);
        return NULL;
    }
    return d;
}

attn_status attn_seq2seq_decoder_step(attn_seq2seq_decoder *d, float *logits, const int64_t *tokens)
{
    if (!d || !logits || !tokens) return attn__fail(ATTN_ERR_ARG, "seq2seq_decoder_step: NULL argument");
    if (d->steps >= d->cap)
        return attn__fail(ATTN_ERR_STATE,
                          "seq2seq_decoder_step: all %lld steps made (max_steps of "
                          "attn_seq2seq_decoder_new)",
                          (long long)d->cap);
    const int64_t R = d->rows, V = d->m->cfg.tgt_vocab;
    for (int64_t r = 0; r < R; r++)
        if (tokens[r] < 0 || tokens[r] >= V)
            return attn__fail(ATTN_ERR_ARG,
                              "seq2seq_decoder_step: token %lld of row %lld is outside "
                              "[0, %lld)",
                              (long long)tokens[r], (long long)r, (long long)V);
    attn_ctx_reset(d->work);
    attn_tensor *out = d->impl == ATTN_SEQ2SEQ_DECODE_RECOMPUTE     ? recompute_step(d, tokens)
                       : d->m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER ? attn__transformer_cache_step(d, tokens)
                                                                    : attn__bahdanau_cache_step(d, tokens);
    if (!out) return attn_last_status();
    const int64_t L = out->shape[1]; /* (R, L, V): the newest position is the last */
    for (int64_t r = 0; r < R; r++) memcpy(logits + r * V, out->data + (r * L + L - 1) * V, (size_t)V * sizeof *logits);
    d->steps++;
    return ATTN_OK;
}

attn_status attn_seq2seq_decoder_reorder(attn_seq2seq_decoder *d, const int64_t *parents)
{
    if (!d || !parents) return attn__fail(ATTN_ERR_ARG, "seq2seq_decoder_reorder: NULL argument");
    bool identity = true;
    for (int64_t r = 0; r < d->rows; r++) {
        const int64_t first = r / d->beams * d->beams; /* the sentence's rows: [first, first + beams) */
        if (parents[r] < first || parents[r] >= first + d->beams)
            return attn__fail(ATTN_ERR_ARG,
                              "seq2seq_decoder_reorder: parents[%lld] = %lld; expected a "
                              "row of the same sentence, in [%lld, %lld)",
                              (long long)r, (long long)parents[r], (long long)first, (long long)(first + d->beams));
        identity = identity && parents[r] == r;
    }
    if (identity || d->steps == 0) return ATTN_OK;
    attn_ctx_reset(d->work);
    if (d->impl == ATTN_SEQ2SEQ_DECODE_RECOMPUTE) return recompute_reorder(d, parents);
    return d->m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER ? attn__transformer_cache_reorder(d, parents)
                                                      : attn__bahdanau_cache_reorder(d, parents);
}

/* Keeps items keep (n, ascending) of a memory in place: lengths, padding, outputs and state. The
 * arrays are the decoder's own (in keep). */
static void memory_keep(seq2seq_memory *mem, const int64_t *keep, int64_t n)
{
    attn__seq2seq_keep_tensor(mem->enc_out, 0, keep, n);                       /* (B, S, d) */
    if (mem->enc_state) attn__seq2seq_keep_tensor(mem->enc_state, 1, keep, n); /* (layers, B, H) */
    attn__seq2seq_keep_rows((int64_t *)mem->src_lens, sizeof(int64_t), 1, mem->batch, 1, keep, n);
    attn__seq2seq_keep_rows((uint8_t *)mem->src_pad, 1, 1, mem->batch, mem->src_len, keep, n);
    mem->batch = n;
}

attn_status attn_seq2seq_decoder_select(attn_seq2seq_decoder *d, const int64_t *keep, int64_t n)
{
    if (!d || !keep) return attn__fail(ATTN_ERR_ARG, "seq2seq_decoder_select: NULL argument");
    if (n < 1 || n > d->batch)
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_decoder_select: %lld sentences kept; expected 1 to the "
                          "%lld there are",
                          (long long)n, (long long)d->batch);
    for (int64_t i = 0; i < n; i++)
        if (keep[i] < 0 || keep[i] >= d->batch || (i > 0 && keep[i] <= keep[i - 1]))
            return attn__fail(ATTN_ERR_ARG,
                              "seq2seq_decoder_select: keep[%lld] = %lld; expected "
                              "sentences in [0, %lld), ascending",
                              (long long)i, (long long)keep[i], (long long)d->batch);
    if (n == d->batch) return ATTN_OK; /* all of them, in order */
    attn_ctx_reset(d->work);
    const int64_t beams = d->beams, R = n * beams;
    int64_t *rows = attn__arena_alloc(&d->work->arena, (size_t)R * sizeof *rows); /* rows kept */
    if (!rows) return attn_last_status();
    for (int64_t i = 0; i < R; i++) rows[i] = keep[i / beams] * beams + i % beams;
    const bool shared = d->row_mem.enc_out == d->mem.enc_out; /* one beam: rows = sentences */
    if (d->row_mem.enc_out && !shared) memory_keep(&d->row_mem, rows, R);
    memory_keep(&d->mem, keep, n);
    if (shared) d->row_mem = d->mem;
    if (d->prefix) attn__seq2seq_keep_rows(d->prefix, sizeof *d->prefix, 1, d->rows, d->cap, rows, R);
    if (d->impl == ATTN_SEQ2SEQ_DECODE_CACHED && d->m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER)
        attn__transformer_cache_select(d, keep, rows, n);
    else if (d->impl == ATTN_SEQ2SEQ_DECODE_CACHED)
        attn__bahdanau_cache_select(d, keep, rows, n);
    d->batch = n;
    d->rows = R;
    return ATTN_OK;
}

attn_status attn_seq2seq_decoder_set_num_threads(attn_seq2seq_decoder *d, int n)
{
    if (!d) return attn__fail(ATTN_ERR_ARG, "seq2seq_decoder_set_num_threads: NULL decoder");
    if (attn_ctx_set_num_threads(d->work, n) != ATTN_OK) return attn_last_status();
    return attn_ctx_set_num_threads(d->keep, n);
}

void attn_seq2seq_decoder_free(attn_seq2seq_decoder *d)
{
    if (!d) return;
    if (d->m && d->m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER)
        attn__transformer_cache_free(d);
    else
        attn__bahdanau_cache_free(d);
    free(d->prefix);
    attn_ctx_free(d->keep);
    attn_ctx_free(d->work);
    free(d);
}
