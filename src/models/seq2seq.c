/* Sequence-to-sequence models: construction, teacher-forced forward, and the dispatch between
 * the Transformer and the Bahdanau GRU (math and names in attn.h). */
#include "seq2seq_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static attn_status init_seq2seq(attn_seq2seq *m, attn_params *p, const attn_seq2seq_config *cfg, attn_rng *rng)
{
    if (!m || !p || !cfg) return attn__fail(ATTN_ERR_ARG, "seq2seq_init: NULL argument");
    const attn_seq2seq_config *c = cfg;
    if (c->kind != ATTN_SEQ2SEQ_TRANSFORMER && c->kind != ATTN_SEQ2SEQ_BAHDANAU)
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_init: kind %d is neither ATTN_SEQ2SEQ_TRANSFORMER nor "
                          "ATTN_SEQ2SEQ_BAHDANAU",
                          (int)c->kind);
    if (c->src_vocab < 4 || c->tgt_vocab < 4 || c->d_model < 2 || c->enc_layers < 1 || c->dec_layers < 1 ||
        c->max_len < 2 || !(c->dropout >= 0 && c->dropout < 1) || c->pad_id < 0 || c->bos_id < 0 || c->eos_id < 0 ||
        c->pad_id >= c->tgt_vocab || c->bos_id >= c->tgt_vocab || c->eos_id >= c->tgt_vocab)
        return attn__fail(ATTN_ERR_ARG, "seq2seq_init: vocabularies >= 4, d_model >= 2, layers >= 1, "
                                        "max_len >= 2, dropout in [0, 1) and special ids inside the "
                                        "target vocabulary expected");
    if (c->rope_base != 0.0f &&
        (c->kind != ATTN_SEQ2SEQ_TRANSFORMER || !(c->rope_base > 1.0f && isfinite(c->rope_base))))
        return attn__fail(ATTN_ERR_ARG,
                          "seq2seq_init: rope_base %g; expected 0 (sinusoidal positions) or, for the "
                          "Transformer, a finite base > 1",
                          (double)c->rope_base);
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    return c->kind == ATTN_SEQ2SEQ_TRANSFORMER ? attn__transformer_init(m, p, rng) : attn__bahdanau_init(m, p, rng);
}

attn_status attn_seq2seq_init(attn_seq2seq *m, attn_params *p, const attn_seq2seq_config *cfg, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_seq2seq(m, p, cfg, rng));
}

void attn_seq2seq_free(attn_seq2seq *m)
{
    if (!m) return;
    free(m->enc);
    free(m->dec);
    m->enc = NULL;
    m->dec = NULL;
}

static attn_status check_ids(const int64_t *ids, int64_t n, int64_t vocab, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return attn__fail(ATTN_ERR_ARG, "seq2seq: %s id %lld at %lld is outside [0, %lld)", what, (long long)ids[i],
                              (long long)i, (long long)vocab);
    return ATTN_OK;
}

/* lens[0..batch) in [0, len]: a length past its sequence is a caller's mistake, not padding. */
static attn_status check_lens(const int64_t *lens, int64_t batch, int64_t len, const char *what)
{
    for (int64_t b = 0; lens && b < batch; b++)
        if (lens[b] < 0 || lens[b] > len)
            return attn__fail(ATTN_ERR_ARG, "seq2seq: %s length %lld of row %lld is outside [0, %lld]", what,
                              (long long)lens[b], (long long)b, (long long)len);
    return ATTN_OK;
}

attn_status attn__seq2seq_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, const int64_t *src_lens,
                                 int64_t batch, int64_t src_len, seq2seq_memory *mem)
{
    int64_t n_ids;
    if (batch < 1 || src_len < 1 || src_len > m->cfg.max_len || !attn__mul_ok(batch, src_len, &n_ids))
        return attn__fail(ATTN_ERR_SHAPE,
                          "seq2seq: source batch %lld x %lld; expected length in [1, %lld]"
                          " and a batch whose size fits in int64",
                          (long long)batch, (long long)src_len, (long long)m->cfg.max_len);
    if (check_ids(src, n_ids, m->cfg.src_vocab, "source") != ATTN_OK ||
        check_lens(src_lens, batch, src_len, "source") != ATTN_OK)
        return attn_last_status();
    *mem = (seq2seq_memory){.src_lens = src_lens, .batch = batch, .src_len = src_len};
    if (!(mem->src_pad = attn__seq2seq_padding(ctx, src_lens, batch, src_len))) return attn_last_status();
    return m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER ? attn__transformer_encode(ctx, m, src, mem)
                                                   : attn__bahdanau_encode(ctx, m, src, mem);
}

attn_tensor *attn__seq2seq_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem, const int64_t *tgt,
                                  const int64_t *tgt_lens, int64_t tgt_len, attn_tensor **cross_weights)
{
    int64_t n_ids;
    if (tgt_len < 1 || tgt_len > m->cfg.max_len || !attn__mul_ok(mem->batch, tgt_len, &n_ids))
        return attn__fail_null(ATTN_ERR_SHAPE, "seq2seq: target length %lld; expected [1, %lld]", (long long)tgt_len,
                               (long long)m->cfg.max_len);
    if (check_ids(tgt, n_ids, m->cfg.tgt_vocab, "target") != ATTN_OK ||
        check_lens(tgt_lens, mem->batch, tgt_len, "target") != ATTN_OK)
        return NULL;
    return m->cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER
               ? attn__transformer_decode(ctx, m, mem, tgt, tgt_lens, tgt_len, cross_weights)
               : attn__bahdanau_decode(ctx, m, mem, tgt, tgt_len, cross_weights);
}

attn_tensor *attn_seq2seq_forward(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, const int64_t *src_lens,
                                  int64_t batch, int64_t src_len, const int64_t *tgt_in, const int64_t *tgt_lens,
                                  int64_t tgt_len, attn_tensor **cross_weights)
{
    if (cross_weights) *cross_weights = NULL;
    if (!ctx || !m || !src || !src_lens || !tgt_in || !tgt_lens) return attn__null_input(__func__);
    seq2seq_memory mem;
    if (attn__seq2seq_encode(ctx, m, src, src_lens, batch, src_len, &mem) != ATTN_OK) return NULL;
    return attn__seq2seq_decode(ctx, m, &mem, tgt_in, tgt_lens, tgt_len, cross_weights);
}

/* cu (batch + 1) offsets of sequences of 1..max_len ids each */
static attn_status check_packed(const int64_t *cu, int64_t batch, int64_t max_len, const char *name)
{
    if (!cu) return attn__fail(ATTN_ERR_ARG, "seq2seq_packed: %s is NULL", name);
    if (attn__cu_seqlens_check(cu, batch, cu[batch], "seq2seq_packed", name, name) != ATTN_OK)
        return attn_last_status();
    for (int64_t b = 0; b < batch; b++)
        if (cu[b + 1] - cu[b] < 1 || cu[b + 1] - cu[b] > max_len)
            return attn__fail(ATTN_ERR_ARG, "seq2seq_packed: sequence %lld of %s has %lld tokens; expected 1 to %lld",
                              (long long)b, name, (long long)(cu[b + 1] - cu[b]), (long long)max_len);
    return ATTN_OK;
}

attn_tensor *attn_seq2seq_forward_packed(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                         const int64_t *cu_src, const int64_t *tgt_in, const int64_t *cu_tgt,
                                         int64_t batch)
{
    if (!ctx || !m || !src || !cu_src || !tgt_in || !cu_tgt) return attn__null_input(__func__);
    if (m->cfg.kind != ATTN_SEQ2SEQ_TRANSFORMER)
        return attn__fail_null(ATTN_ERR_ARG, "seq2seq_packed: packed batches are for the Transformer; the Bahdanau "
                                             "GRU runs padded batches (attn_seq2seq_forward)");
    if (batch < 1)
        return attn__fail_null(ATTN_ERR_ARG, "seq2seq_packed: batch = %lld; expected >= 1 pair", (long long)batch);
    if (check_packed(cu_src, batch, m->cfg.max_len, "cu_src") != ATTN_OK ||
        check_packed(cu_tgt, batch, m->cfg.max_len, "cu_tgt") != ATTN_OK ||
        check_ids(src, cu_src[batch], m->cfg.src_vocab, "source") != ATTN_OK ||
        check_ids(tgt_in, cu_tgt[batch], m->cfg.tgt_vocab, "target") != ATTN_OK)
        return NULL;
    return attn__transformer_forward_packed(ctx, m, src, cu_src, tgt_in, cu_tgt, batch);
}
