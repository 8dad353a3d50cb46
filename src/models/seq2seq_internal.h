/* Private to src/models: what the seq2seq front (seq2seq.c), its two architectures and the
 * decoders share. The encoder's result is kept in a seq2seq_memory; decoding a target prefix
 * gives logits for every position of it. */
#ifndef ATTN_SEQ2SEQ_INTERNAL_H
#define ATTN_SEQ2SEQ_INTERNAL_H

#include "../core/core.h"

typedef struct seq2seq_memory {
    attn_tensor *enc_out;    /* (B, S, d) */
    attn_tensor *enc_state;  /* Bahdanau: (layers, B, H) */
    const int64_t *src_lens; /* (B) */
    const uint8_t *src_pad;  /* (B, S), 1 = padding */
    int64_t batch, src_len;
} seq2seq_memory;

/* (B, L) padding mask from lengths, in the arena. */
uint8_t *seq2seq_padding(attn_ctx *ctx, const int64_t *lens, int64_t batch, int64_t len);

attn_status transformer_init(attn_seq2seq *m, attn_params *p, attn_rng *rng);
attn_status transformer_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                               seq2seq_memory *mem);
attn_tensor *transformer_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem,
                                const int64_t *tgt, const int64_t *tgt_lens, int64_t tgt_len,
                                attn_tensor **cross_weights);

attn_status bahdanau_init(attn_seq2seq *m, attn_params *p, attn_rng *rng);
attn_status bahdanau_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                            seq2seq_memory *mem);
attn_tensor *bahdanau_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem,
                             const int64_t *tgt, int64_t tgt_len, attn_tensor **cross_weights);

/* Dispatch on m->cfg.kind */
attn_status seq2seq_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                           const int64_t *src_lens, int64_t batch, int64_t src_len,
                           seq2seq_memory *mem);
attn_tensor *seq2seq_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem,
                            const int64_t *tgt, const int64_t *tgt_lens, int64_t tgt_len,
                            attn_tensor **cross_weights);

#endif
