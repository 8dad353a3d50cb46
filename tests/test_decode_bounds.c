/* Greedy decoding writes rows of the caller's width: out is (B, max_out) even when max_out is
 * longer than the model's positional table allows (decoding stops there, the rest is padding).
 * It used to write rows of the shortened width, so callers read uninitialised ids (valgrind, in
 * attn translate's BLEU evaluation). Beam search stays within max_out too. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>

/* A hostile length penalty: a non-finite alpha is refused, and a finite one whose pow() over- or
 * underflows (every score -inf or NaN) still yields the first ended hypothesis. Both used to end
 * with no best hypothesis and a memcpy of -8 bytes (ASan: negative-size-param). The model and
 * source are a case where <eos> is not the first token chosen. An unknown kind is refused at
 * init; it used to build a Bahdanau model that decoding then dereferenced as NULL. */
static void hostile_beams(void)
{
    attn_seq2seq_config cfg = {.kind = ATTN_SEQ2SEQ_TRANSFORMER,
                               .src_vocab = 12,
                               .tgt_vocab = 10,
                               .d_model = 8,
                               .num_heads = 2,
                               .dim_feedforward = 16,
                               .enc_layers = 1,
                               .dec_layers = 1,
                               .max_len = 8,
                               .pad_id = 0,
                               .bos_id = 1,
                               .eos_id = 3};
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    attn_seq2seq m;
    TK_OK(attn_seq2seq_init(&m, p, &cfg, &rng));
    attn_ctx *ctx = attn_ctx_new(1);
    const int64_t src[5] = {3, 4, 5, 6, 7}, src_len = 5;
    int64_t out[7], len = -1;
    const float refused[3] = {NAN, INFINITY, -INFINITY};
    for (int i = 0; i < 3; i++)
        TK_CHECK(attn_seq2seq_decode(ctx, &m, src, &src_len, 1, 5,
                                     &(attn_seq2seq_decode_opts){.beam_size = 2, .length_penalty = refused[i]}, 7, out,
                                     &len) == ATTN_ERR_ARG,
                 "beam alpha %g is refused", (double)refused[i]);
    const float extreme[2] = {-1e30f, 1e30f};
    for (int i = 0; i < 2; i++) {
        len = -1;
        TK_OK(attn_seq2seq_decode(ctx, &m, src, &src_len, 1, 5,
                                  &(attn_seq2seq_decode_opts){.beam_size = 2, .length_penalty = extreme[i]}, 7, out,
                                  &len));
        TK_CHECK(len >= 0 && len <= 7, "beam alpha %g: length %lld", (double)extreme[i], (long long)len);
    }
    attn_ctx_free(ctx);
    attn_seq2seq_free(&m);
    attn_params_free(p);
    attn_params *q = attn_params_new();
    cfg.kind = (attn_seq2seq_kind)5;
    TK_CHECK(attn_seq2seq_init(&m, q, &cfg, &rng) == ATTN_ERR_ARG, "seq2seq kind 5 is refused");
    attn_params_free(q);
}

int main(void)
{
    hostile_beams();
    for (int kind = ATTN_SEQ2SEQ_TRANSFORMER; kind <= ATTN_SEQ2SEQ_BAHDANAU; kind++) {
        attn_seq2seq_config cfg = {.kind = (attn_seq2seq_kind)kind,
                                   .src_vocab = 7,
                                   .tgt_vocab = 7,
                                   .d_model = 4,
                                   .num_heads = 2,
                                   .dim_feedforward = 8,
                                   .enc_layers = 1,
                                   .dec_layers = 1,
                                   .max_len = 4,
                                   .pad_id = 1,
                                   .bos_id = 2,
                                   .eos_id = 3};
        attn_params *p = attn_params_new();
        attn_rng rng;
        attn_rng_seed(&rng, 5);
        attn_seq2seq m;
        TK_OK(attn_seq2seq_init(&m, p, &cfg, &rng));
        attn_ctx *ctx = attn_ctx_new(0);
        enum {
            B = 3,
            S = 3,
            MAX_OUT = 10
        };
        const int64_t src[B * S] = {4, 5, 3, 6, 3, 1, 4, 4, 3}, src_lens[B] = {3, 2, 3};
        int64_t out[B * MAX_OUT], out_lens[B];
        for (int i = 0; i < B * MAX_OUT; i++) out[i] = -7; /* a sentinel no decoder writes */
        TK_OK(attn_seq2seq_decode(ctx, &m, src, src_lens, B, S, NULL, MAX_OUT, out, out_lens));
        for (int b = 0; b < B; b++) {
            TK_CHECK(out_lens[b] >= 0 && out_lens[b] <= cfg.max_len - 1, "kind %d: row %d length %lld", kind, b,
                     (long long)out_lens[b]);
            for (int t = 0; t < MAX_OUT; t++)
                TK_CHECK(out[b * MAX_OUT + t] >= 0 && out[b * MAX_OUT + t] < cfg.tgt_vocab,
                         "kind %d: out[%d, %d] = %lld is not a token id", kind, b, t, (long long)out[b * MAX_OUT + t]);
        }
        int64_t beam_out[MAX_OUT], beam_len = -1;
        for (int i = 0; i < MAX_OUT; i++) beam_out[i] = -7;
        const int64_t first_len = S;
        const attn_seq2seq_decode_opts beams2 = {.beam_size = 2, .length_penalty = 0.6f};
        TK_OK(attn_seq2seq_decode(ctx, &m, src, &first_len, 1, S, &beams2, MAX_OUT, beam_out, &beam_len));
        TK_CHECK(beam_len >= 0 && beam_len <= cfg.max_len - 1, "kind %d: beam length %lld", kind, (long long)beam_len);
        for (int64_t t = 0; t < beam_len; t++)
            TK_CHECK(beam_out[t] >= 0 && beam_out[t] < cfg.tgt_vocab, "kind %d: beam token %lld", kind, (long long)t);
        /* a limit of INT64_MAX is refused (past out_width), not overflowed (limit + 1) */
        int64_t one_len;
        const attn_seq2seq_decode_opts huge = {.beam_size = 2, .max_out = (const int64_t[]){INT64_MAX}};
        TK_CHECK(attn_seq2seq_decode(ctx, &m, src, &first_len, 1, S, &huge, MAX_OUT, beam_out, &one_len) ==
                     ATTN_ERR_ARG,
                 "kind %d: a limit of INT64_MAX is refused: %s", kind, attn_last_error());
        attn_ctx_free(ctx);
        attn_seq2seq_free(&m);
        attn_params_free(p);
    }
    return tk_finish("test_decode_bounds");
}
