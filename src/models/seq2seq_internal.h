/* Private to src/models: what the seq2seq front (seq2seq.c), its two architectures and the
 * decoders share. The encoder's result is kept in a seq2seq_memory; decoding a target prefix
 * gives logits for every position of it. Step-by-step decoding (attn_seq2seq_decoder) keeps what
 * each architecture carries from one step to the next in its cache. */
#ifndef ATTN_SEQ2SEQ_INTERNAL_H
#define ATTN_SEQ2SEQ_INTERNAL_H

#include "../nn/nn_internal.h"

typedef struct seq2seq_memory {
    attn_tensor *enc_out;    /* (B, S, d) */
    attn_tensor *enc_state;  /* Bahdanau: (layers, B, H) */
    const int64_t *src_lens; /* (B) */
    const uint8_t *src_pad;  /* (B, S), 1 = padding */
    int64_t batch, src_len;
} seq2seq_memory;

/* (B, L) padding mask from lengths, in the arena. */
uint8_t *attn__seq2seq_padding(attn_ctx *ctx, const int64_t *lens, int64_t batch, int64_t len);

attn_status attn__transformer_init(attn_seq2seq *m, attn_params *p, attn_rng *rng);
attn_status attn__transformer_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, seq2seq_memory *mem);
attn_tensor *attn__transformer_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem,
                                      const int64_t *tgt, const int64_t *tgt_lens, int64_t tgt_len,
                                      attn_tensor **cross_weights);

/* attn_seq2seq_forward_packed after its checks: logits (total_t, V_tgt) */
attn_tensor *attn__transformer_forward_packed(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src,
                                              const int64_t *cu_src, const int64_t *tgt_in, const int64_t *cu_tgt,
                                              int64_t batch);

attn_status attn__bahdanau_init(attn_seq2seq *m, attn_params *p, attn_rng *rng);
attn_status attn__bahdanau_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, seq2seq_memory *mem);
attn_tensor *attn__bahdanau_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem, const int64_t *tgt,
                                   int64_t tgt_len, attn_tensor **cross_weights);

/* Dispatch on m->cfg.kind */
attn_status attn__seq2seq_encode(attn_ctx *ctx, const attn_seq2seq *m, const int64_t *src, const int64_t *src_lens,
                                 int64_t batch, int64_t src_len, seq2seq_memory *mem);
attn_tensor *attn__seq2seq_decode(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_memory *mem, const int64_t *tgt,
                                  const int64_t *tgt_lens, int64_t tgt_len, attn_tensor **cross_weights);

/* The batch a search decodes: src (batch, src_len) with src_lens (batch), each sentence's limit
 * max_out (batch, each in [1, out_width]), and out (batch, out_width) and out_lens (batch) it fills */
typedef struct seq2seq_batch {
    const int64_t *src, *src_lens;
    int64_t batch, src_len;
    const int64_t *max_out;
    int64_t out_width;
    int64_t *out, *out_lens;
} seq2seq_batch;

/* attn_seq2seq_decode's beam searches (o's beam_size >= 1, length_penalty, impl) with either
 * decoder (seq2seq_beam.c): a batch, and one sentence (x->batch 1) with its cross-attention when
 * o->cross_weights */
attn_status attn__seq2seq_beam_batch(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_batch *x,
                                     const attn_seq2seq_decode_opts *o);
attn_status attn__seq2seq_beam_one(attn_ctx *ctx, const attn_seq2seq *m, const seq2seq_batch *x,
                                   const attn_seq2seq_decode_opts *o);

/* The first index of the largest of x[0..n) */
int64_t attn__seq2seq_argmax(const float *x, int64_t n);

/* ---- Step-by-step decoding (seq2seq_decoder.c, seq2seq_*_step.c) ---- */

/* CACHED Transformer: one cache per decoder layer and the positional table. */
typedef struct transformer_cache {
    decoder_layer_cache *layers; /* (dec_layers) */
    attn_tensor *positions;      /* (cap, d) sinusoidal table, in keep; NULL with rotary positions */
} transformer_cache;

/* CACHED Bahdanau: the GRU state and the encoder outputs as the attention reads them. */
typedef struct bahdanau_cache {
    attn_tensor *keys;   /* (B, S, h) W_k of the encoder outputs, in keep */
    attn_tensor *values; /* (R, S, H) the encoder outputs of each row's sentence, in keep */
    attn_tensor *state;  /* (layers, R, H) heap: the GRU state after the tokens fed so far */
} bahdanau_cache;

struct attn_seq2seq_decoder {
    const attn_seq2seq *m;
    attn_seq2seq_decode_impl impl;
    attn_ctx *keep;                         /* the encoder's results and what is computed from them once */
    attn_ctx *work;                         /* one step's activations, reset at every step */
    int64_t batch, beams, rows, cap, steps; /* rows = batch * beams; cap = most steps */
    seq2seq_memory mem;                     /* per sentence (batch rows), in keep */
    seq2seq_memory row_mem;                 /* RECOMPUTE: per row (rows), in keep */
    int64_t *prefix;                        /* RECOMPUTE: (rows, cap) tokens fed so far, heap */
    transformer_cache tc;
    bahdanau_cache bc;
};

/* Rows of a strided block: row r is, for o < outer and s < segs, the len floats at
 * x + o outer_stride + r row_stride + s seg_stride (a cache (R, H, cap, Dh) whose first t
 * positions are in use: 1 outer, H segments of t Dh floats; a GRU state (layers, R, H): layers
 * outer slices, 1 segment of H). */
typedef struct seq2seq_rows {
    float *x;
    int64_t outer, outer_stride, row_stride, segs, seg_stride, len;
} seq2seq_rows;

/* Floats of one row (outer x segs x len). */
int64_t attn__seq2seq_rows_width(const seq2seq_rows *b);
/* Row r becomes row parents[r] for r < n: the rows that move go through scratch (n row widths),
 * the rows that keep their own are not touched. */
void attn__seq2seq_rows_gather(const seq2seq_rows *b, const int64_t *parents, int64_t n, float *scratch);
/* Row i becomes row keep[i] for i < n (keep ascending), in place. */
void attn__seq2seq_rows_keep(const seq2seq_rows *b, const int64_t *keep, int64_t n);
/* x (outer, rows, width) of elements of `size` bytes: the rows keep[0..n) (ascending) packed in
 * place as (outer, n, width). */
void attn__seq2seq_keep_rows(void *x, size_t size, int64_t outer, int64_t rows, int64_t width, const int64_t *keep,
                             int64_t n);
/* The same along dim of a contiguous tensor, whose shape[dim] becomes n. */
void attn__seq2seq_keep_tensor(attn_tensor *t, int dim, const int64_t *keep, int64_t n);

attn_status attn__transformer_cache_init(attn_seq2seq_decoder *d);
/* tokens (R) at position d->steps -> logits (R, 1, V) in d->work */
attn_tensor *attn__transformer_cache_step(attn_seq2seq_decoder *d, const int64_t *tokens);
attn_status attn__transformer_cache_reorder(attn_seq2seq_decoder *d, const int64_t *parents);
/* keeps sentences keep (n) and rows rows (n beams); d->batch and d->rows still the old ones */
void attn__transformer_cache_select(attn_seq2seq_decoder *d, const int64_t *keep, const int64_t *rows, int64_t n);
void attn__transformer_cache_free(attn_seq2seq_decoder *d);

attn_status attn__bahdanau_cache_init(attn_seq2seq_decoder *d);
attn_tensor *attn__bahdanau_cache_step(attn_seq2seq_decoder *d, const int64_t *tokens);
attn_status attn__bahdanau_cache_reorder(attn_seq2seq_decoder *d, const int64_t *parents);
void attn__bahdanau_cache_select(attn_seq2seq_decoder *d, const int64_t *keep, const int64_t *rows, int64_t n);
void attn__bahdanau_cache_free(attn_seq2seq_decoder *d);

#endif
