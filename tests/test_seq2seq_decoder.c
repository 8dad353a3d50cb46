/* Step-by-step decoding: the CACHED decoder (Transformer key/value cache, Bahdanau carried GRU
 * state) against its reference twin RECOMPUTE (the teacher-forced decoder over the whole prefix
 * at every step), on randomly initialised small models of both kinds (the Transformer also with
 * rotary positions, rope_base), three sources of different lengths with padding, 1, 2 and 4 beams:
 *   - driven by the same tokens and the same random beam re-selections, every step's logits agree
 *     within |cached - ref| <= 1e-5 + 1e-5 |ref| and have the same argmax in every row (the GEMMs
 *     round a row differently when the row count differs, so bit equality is not promised);
 *   - the searches of attn_seq2seq_decode built on them, CACHED = RECOMPUTE: greedy (tokens and
 *     lengths) and beam search of one sentence for beams 1, 2 and 4, once where every hypothesis
 *     runs to its limit and once with an <eos> the model emits early;
 *   - the cross-attention weights beam search returns are the same with either decoder;
 *   - beam search of the padded batch (different lengths and limits) = each sentence searched alone
 *     by RECOMPUTE = the batch by RECOMPUTE, for 1, 2 and 4 beams;
 *   - attn_seq2seq_decoder_select mid-way (after a reorder, then again): both decoders keep the
 *     same sentences and their logits still agree;
 *   - hostile input: NULL arguments, batch, beams (65, more than the vocabulary), max_steps,
 *     limits, source lengths and tokens out of range, a step past max_steps, a parent from
 *     another sentence, sentences to keep out of order, repeated or gone; a failed step changes
 *     nothing; attn_seq2seq_decode's bad options (and a length past the source width). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATOL 1e-5f
#define RTOL 1e-5f

enum {
    B = 3,
    S = 5,
    MAX_LEN = 12,
    STEPS = 9,
    V = 13
};
static const int64_t src[B * S] = {4, 5, 6, 7, 3, 8, 3, 1, 1, 1, 9, 10, 11, 3, 1}; /* 1 = <pad> */
static const int64_t src_lens[B] = {5, 2, 4};

#define TK_STATUS(expr, want)                                                                                          \
    TK_CHECK((expr) == (want), "%s: expected %s, got \"%s\"", #expr, attn_status_name(want), attn_last_error())

typedef struct model {
    attn_seq2seq s2s;
    attn_params *p;
} model;

static void model_init(model *m, attn_seq2seq_kind kind, float rope_base, uint64_t seed)
{
    attn_seq2seq_config cfg = {.kind = kind,
                               .src_vocab = 12,
                               .tgt_vocab = V,
                               .d_model = 16,
                               .num_heads = 4,
                               .dim_feedforward = 24,
                               .enc_layers = 2,
                               .dec_layers = 2,
                               .dropout = 0.1f,
                               .max_len = MAX_LEN,
                               .pad_id = 1,
                               .bos_id = 2,
                               .eos_id = 3,
                               .rope_base = rope_base};
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    m->p = attn_params_new();
    TK_OK(attn_seq2seq_init(&m->s2s, m->p, &cfg, &rng));
}

static void model_free(model *m)
{
    attn_seq2seq_free(&m->s2s);
    attn_params_free(m->p);
}

static int64_t argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Both decoders fed the same tokens and reordered by the same random parents. */
static void check_steps(const model *m, const char *name, int64_t beams, uint64_t seed)
{
    const int64_t R = B * beams;
    attn_seq2seq_decoder *dc =
        attn_seq2seq_decoder_new(&m->s2s, src, src_lens, B, S, beams, STEPS, ATTN_SEQ2SEQ_DECODE_CACHED);
    attn_seq2seq_decoder *dr =
        attn_seq2seq_decoder_new(&m->s2s, src, src_lens, B, S, beams, STEPS, ATTN_SEQ2SEQ_DECODE_RECOMPUTE);
    TK_NOT_NULL(dc);
    TK_NOT_NULL(dr);
    if (!dc || !dr) return;
    float *lc = malloc((size_t)(R * V) * sizeof *lc), *lr = malloc((size_t)(R * V) * sizeof *lr);
    int64_t tokens[4 * B], parents[4 * B];
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    for (int64_t r = 0; r < R; r++) tokens[r] = m->s2s.cfg.bos_id;
    bool same_argmax = true;
    float worst = 0.0f;
    for (int t = 0; t < STEPS; t++) {
        TK_OK(attn_seq2seq_decoder_step(dc, lc, tokens));
        TK_OK(attn_seq2seq_decoder_step(dr, lr, tokens));
        char what[96];
        snprintf(what, sizeof what, "%s, %lld beams, step %d logits", name, (long long)beams, t);
        tk_close(what, lc, lr, R * V, ATOL, RTOL);
        for (int64_t i = 0; i < R * V; i++)
            if (fabsf(lc[i] - lr[i]) > worst) worst = fabsf(lc[i] - lr[i]);
        for (int64_t r = 0; r < R; r++) {
            same_argmax = same_argmax && argmax(lc + r * V, V) == argmax(lr + r * V, V);
            tokens[r] = (int64_t)attn_rng_below(&rng, V); /* any token, <eos> and <pad> included */
            parents[r] = r / beams * beams + (int64_t)attn_rng_below(&rng, (uint32_t)beams);
        }
        TK_OK(attn_seq2seq_decoder_reorder(dc, parents));
        TK_OK(attn_seq2seq_decoder_reorder(dr, parents));
    }
    TK_CHECK(same_argmax, "%s, %lld beams: the cached decoder's argmax differs from the reference's", name,
             (long long)beams);
    printf("%s, %lld beams: max |cached - recompute| over %d steps = %.3g\n", name, (long long)beams, STEPS, worst);
    free(lc);
    free(lr);
    attn_seq2seq_decoder_free(dc);
    attn_seq2seq_decoder_free(dr);
}

#define CACHED ATTN_SEQ2SEQ_DECODE_CACHED
#define RECOMPUTE ATTN_SEQ2SEQ_DECODE_RECOMPUTE

/* attn_seq2seq_decode of sentence b alone, unpadded (its source is src_lens[b] wide) */
static attn_status decode_one(attn_ctx *ctx, const model *m, int64_t b, const attn_seq2seq_decode_opts *o,
                              int64_t width, int64_t *out, int64_t *len)
{
    return attn_seq2seq_decode(ctx, &m->s2s, src + b * S, &src_lens[b], 1, src_lens[b], o, width, out, len);
}

/* Greedy and beam search with either decoder give the same tokens. */
static void check_searches(attn_ctx *ctx, const model *m, const char *name)
{
    const int64_t max_out = 8;
    int64_t out[B * 8], out_lens[B], ref[B * 8], ref_lens[B];
    TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, NULL, max_out, out, out_lens));
    TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, &(attn_seq2seq_decode_opts){.impl = RECOMPUTE},
                              max_out, ref, ref_lens));
    TK_CHECK(!memcmp(out, ref, sizeof out) && !memcmp(out_lens, ref_lens, sizeof out_lens),
             "%s (eos %lld): greedy differs between the decoders", name, (long long)m->s2s.cfg.eos_id);
    for (int beams = 1; beams <= 4; beams *= 2)
        for (int64_t b = 0; b < B; b++) {
            int64_t n = -1, n_ref = -2;
            attn_seq2seq_decode_opts o = {.beam_size = beams, .length_penalty = 0.6f};
            TK_OK(decode_one(ctx, m, b, &o, max_out, out, &n));
            o.impl = RECOMPUTE;
            TK_OK(decode_one(ctx, m, b, &o, max_out, ref, &n_ref));
            TK_CHECK(n == n_ref && n >= 0 && !memcmp(out, ref, (size_t)n * sizeof *out),
                     "%s (eos %lld): beam %d on sentence %lld differs between the decoders", name,
                     (long long)m->s2s.cfg.eos_id, beams, (long long)b);
        }
}

/* Greedy's tokens with the configured <eos>, then with an <eos> the model emits at step 2 of
 * sentence 0 (so that row stops early and the others may too). */
static void check_searches_eos(attn_ctx *ctx, model *m, const char *name)
{
    check_searches(ctx, m, name);
    int64_t out[B * 8], out_lens[B];
    TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, &(attn_seq2seq_decode_opts){.impl = RECOMPUTE}, 8, out,
                              out_lens));
    TK_CHECK(out_lens[0] == 8 || out_lens[1] == 8 || out_lens[2] == 8,
             "%s: no row ran to max_out (the case is not covered)", name);
    TK_CHECK(out_lens[0] >= 2, "%s: sentence 0 ended before its second token (the case is not covered)", name);
    const int64_t saved = m->s2s.cfg.eos_id;
    m->s2s.cfg.eos_id = out[1]; /* only the searches read it */
    check_searches(ctx, m, name);
    TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, NULL, 8, out, out_lens));
    TK_CHECK(out_lens[0] <= 1, "%s: row 0 ran to %lld tokens past its <eos>", name, (long long)out_lens[0]);
    m->s2s.cfg.eos_id = saved;
}

/* Sentences of different lengths and limits searched together = each searched alone by the
 * reference, and = the batched reference twin. */
static void check_beam_batch(attn_ctx *ctx, const model *m, const char *name)
{
    const int64_t max_out[B] = {8, 3, 6}, W = 8;
    int64_t out[B * 8], lens[B], ref[B * 8], ref_lens[B], one[8], n;
    for (int beams = 1; beams <= 4; beams *= 2) {
        attn_seq2seq_decode_opts o = {.beam_size = beams, .length_penalty = 0.6f, .max_out = max_out};
        TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, &o, W, out, lens));
        o.impl = RECOMPUTE;
        TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, &o, W, ref, ref_lens));
        TK_CHECK(!memcmp(out, ref, sizeof out) && !memcmp(lens, ref_lens, sizeof lens),
                 "%s: beam search of the batch, %d beams, differs between the decoders", name, beams);
        o.max_out = NULL;
        for (int64_t b = 0; b < B; b++) {
            TK_OK(decode_one(ctx, m, b, &o, max_out[b], one, &n));
            TK_CHECK(n == lens[b] && n <= max_out[b] && !memcmp(one, out + b * W, (size_t)n * sizeof *one),
                     "%s: beam_batch %d, sentence %lld differs from its search alone", name, beams, (long long)b);
            for (int64_t j = n; j < W; j++)
                TK_CHECK(out[b * W + j] == m->s2s.cfg.pad_id, "%s: beam_batch row %lld not padded", name, (long long)b);
        }
    }
}

/* Dropping sentences mid-way: both decoders keep the same ones and still agree. */
static void check_select(const model *m, const char *name)
{
    const int64_t beams = 2, keep[2] = {0, 2}, keep_last[1] = {1};
    attn_seq2seq_decoder *d[2] = {
        attn_seq2seq_decoder_new(&m->s2s, src, src_lens, B, S, beams, STEPS, ATTN_SEQ2SEQ_DECODE_CACHED),
        attn_seq2seq_decoder_new(&m->s2s, src, src_lens, B, S, beams, STEPS, ATTN_SEQ2SEQ_DECODE_RECOMPUTE)};
    TK_NOT_NULL(d[0]);
    TK_NOT_NULL(d[1]);
    if (!d[0] || !d[1]) return;
    float logits[2][B * 2 * V];
    int64_t tokens[B * 2] = {2, 2, 2, 2, 2, 2}, rows = B * beams;
    const int64_t parents[B * 2] = {1, 1, 2, 2, 5, 4};
    for (int t = 0; t < 6; t++) {
        for (int i = 0; i < 2; i++) TK_OK(attn_seq2seq_decoder_step(d[i], logits[i], tokens));
        char what[64];
        snprintf(what, sizeof what, "%s select, step %d", name, t);
        tk_close(what, logits[0], logits[1], rows * V, ATOL, RTOL);
        for (int64_t r = 0; r < rows; r++) tokens[r] = 4 + (r + t) % 7;
        if (t == 1) /* after a re-selection, sentences 0 and 2 go on */
            for (int i = 0; i < 2; i++) {
                TK_OK(attn_seq2seq_decoder_reorder(d[i], parents));
                TK_OK(attn_seq2seq_decoder_select(d[i], keep, 2));
            }
        if (t == 3) /* then the last one of them alone */
            for (int i = 0; i < 2; i++) TK_OK(attn_seq2seq_decoder_select(d[i], keep_last, 1));
        rows = t < 1 ? B * beams : t < 3 ? 2 * beams : beams;
    }
    const int64_t bad_order[2] = {1, 0}, twice[2] = {0, 0}, outside[1] = {1};
    TK_STATUS(attn_seq2seq_decoder_select(NULL, keep, 1), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_select(d[0], NULL, 1), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_select(d[0], keep, 0), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_select(d[0], keep, 2), ATTN_ERR_ARG); /* one sentence is left */
    TK_STATUS(attn_seq2seq_decoder_select(d[0], outside, 1), ATTN_ERR_ARG);
    attn_seq2seq_decoder *e = attn_seq2seq_decoder_new(&m->s2s, src, src_lens, B, S, 1, 2, ATTN_SEQ2SEQ_DECODE_CACHED);
    TK_STATUS(attn_seq2seq_decoder_select(e, bad_order, 2), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_select(e, twice, 2), ATTN_ERR_ARG);
    attn_seq2seq_decoder_free(e);
    for (int i = 0; i < 2; i++) attn_seq2seq_decoder_free(d[i]);
}

static void check_cross_weights(attn_ctx *ctx, const model *m, const char *name)
{
    int64_t out[8], n = 0, n_ref = 0;
    attn_tensor *w = NULL, *w_ref = NULL;
    const int64_t len0 = S;
    attn_seq2seq_decode_opts o = {.beam_size = 2, .length_penalty = 0.6f, .cross_weights = &w};
    TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, &len0, 1, S, &o, 8, out, &n));
    const int64_t numel = w ? w->numel : 0; /* the next call resets ctx, w included */
    float *copy = w ? malloc((size_t)numel * sizeof *copy) : NULL;
    if (copy) memcpy(copy, w->data, (size_t)numel * sizeof *copy);
    o.impl = RECOMPUTE, o.cross_weights = &w_ref;
    TK_OK(attn_seq2seq_decode(ctx, &m->s2s, src, &len0, 1, S, &o, 8, out, &n_ref));
    TK_CHECK(copy && w_ref && n == n_ref && numel == w_ref->numel &&
                 !memcmp(copy, w_ref->data, (size_t)w_ref->numel * sizeof *copy),
             "%s: beam's cross-attention weights differ between the decoders", name);
    free(copy);
}

static void check_hostile(attn_ctx *ctx, const model *m)
{
    const attn_seq2seq *s = &m->s2s;
    const attn_seq2seq_decode_impl C = ATTN_SEQ2SEQ_DECODE_CACHED;
    const int64_t zero_len[B] = {5, 0, 4}, long_len[B] = {5, 6, 4}, bad_src[B * S] = {4, 99};
    TK_CHECK(!attn_seq2seq_decoder_new(NULL, src, src_lens, B, S, 1, 4, C), "NULL model accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, NULL, src_lens, B, S, 1, 4, C), "NULL src accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, NULL, B, S, 1, 4, C), "NULL src_lens accepted");
    TK_CHECK(attn_last_status() == ATTN_ERR_ARG, "NULL src_lens: %s", attn_last_error());
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, 0, S, 1, 4, C), "batch 0 accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, B, S, 0, 4, C), "beams 0 accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, B, S, INT64_MAX, 4, C), "huge beams accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, B, S, 1, 0, C), "max_steps 0 accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, B, S, 1, MAX_LEN + 1, C), "max_steps > max_len accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, B, 0, 1, 4, C), "source length 0 accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, zero_len, B, S, 1, 4, C), "a source length 0 accepted");
    TK_CHECK(attn_last_status() == ATTN_ERR_ARG, "a source length 0: %s", attn_last_error());
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, long_len, B, S, 1, 4, C), "a length past the width accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, bad_src, src_lens, B, S, 1, 4, C), "source id 99 accepted");
    TK_CHECK(!attn_seq2seq_decoder_new(s, src, src_lens, B, S, 1, 4, (attn_seq2seq_decode_impl)7), "impl 7 accepted");
    attn_seq2seq_decoder_free(NULL);

    attn_seq2seq_decoder *d = attn_seq2seq_decoder_new(s, src, src_lens, B, S, 2, 2, C);
    TK_NOT_NULL(d);
    if (!d) return;
    float logits[2 * B * V], again[2 * B * V], fresh[2 * B * V];
    int64_t tokens[2 * B] = {2, 2, 2, 2, 2, 2}, bad[2 * B] = {2, 2, V, 2, 2, 2}, neg[2 * B] = {2, -1, 2, 2, 2, 2};
    TK_STATUS(attn_seq2seq_decoder_step(NULL, logits, tokens), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_step(d, NULL, tokens), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_step(d, logits, NULL), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_step(d, logits, bad), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_step(d, logits, neg), ATTN_ERR_ARG);
    TK_OK(attn_seq2seq_decoder_step(d, logits, tokens)); /* the failures changed nothing: */
    attn_seq2seq_decoder *d2 = attn_seq2seq_decoder_new(s, src, src_lens, B, S, 2, 2, C);
    TK_NOT_NULL(d2);
    if (d2) TK_OK(attn_seq2seq_decoder_step(d2, fresh, tokens));
    TK_CHECK(d2 && !memcmp(logits, fresh, sizeof logits), "a failed step changed the decoder");
    attn_seq2seq_decoder_free(d2);
    const int64_t other[2 * B] = {0, 1, 2, 3, 4, 5}, swap[2 * B] = {1, 0, 3, 2, 5, 4};
    const int64_t cross[2 * B] = {0, 2, 2, 3, 4, 5}, out_of[2 * B] = {0, 1, 2, 3, 4, 6};
    const int64_t negp[2 * B] = {-1, 1, 2, 3, 4, 5};
    TK_STATUS(attn_seq2seq_decoder_reorder(NULL, other), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_reorder(d, NULL), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_reorder(d, cross), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_reorder(d, out_of), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decoder_reorder(d, negp), ATTN_ERR_ARG);
    TK_OK(attn_seq2seq_decoder_reorder(d, swap));
    TK_OK(attn_seq2seq_decoder_step(d, again, tokens));
    TK_STATUS(attn_seq2seq_decoder_step(d, again, tokens), ATTN_ERR_STATE); /* max_steps 2 */
    attn_seq2seq_decoder_free(d);

    int64_t out[B * 4], out_lens[B], n;
    const attn_seq2seq_decode_opts beams2 = {.beam_size = 2, .length_penalty = 0.6f};
    for (int beams = 1; beams <= 2; beams++) { /* greedy, then beam search */
        const attn_seq2seq_decode_opts *o = beams == 1 ? NULL : &beams2;
        TK_STATUS(attn_seq2seq_decode(ctx, s, src, zero_len, B, S, o, 4, out, out_lens), ATTN_ERR_ARG);
        TK_STATUS(attn_seq2seq_decode(ctx, s, src, long_len, B, S, o, 4, out, out_lens), ATTN_ERR_ARG);
        TK_STATUS(attn_seq2seq_decode(ctx, s, src, src_lens, B, 0, o, 4, out, out_lens), ATTN_ERR_SHAPE);
        TK_STATUS(attn_seq2seq_decode(ctx, s, src, src_lens, B, S, o, 4, NULL, out_lens), ATTN_ERR_ARG);
    }
    const attn_seq2seq_decode_opts too_wide = {.beam_size = V + 1, .length_penalty = 0.6f}; /* beams > V */
    TK_STATUS(attn_seq2seq_decode(ctx, s, src, src_lens, 1, S, &too_wide, 4, out, &n), ATTN_ERR_ARG);
}

/* attn_seq2seq_decode's refusals of bad options */
static void check_decode_refusals(attn_ctx *ctx, const model *m)
{
    enum {
        W = 7
    };
    /* refusals */
    int64_t out[B * W], lens[B];
    const int64_t past[B] = {7, 8, 1}, zero[B] = {7, 0, 1};
    const struct {
        attn_seq2seq_decode_opts o;
        int64_t batch, width;
        const char *what;
    } bad[] = {
        {{.beam_size = -1}, B, W, "beam_size -1"},
        {{.beam_size = 65}, B, W, "beam_size 65"},
        {{.impl = (attn_seq2seq_decode_impl)2}, B, W, "impl 2"},
        {{.max_out = past}, B, W, "a limit past out_width"},
        {{.max_out = zero}, B, W, "a limit of 0"},
        {{.beam_size = 2, .cross_weights = (attn_tensor *[1]){NULL}}, B, W, "cross_weights for 3 sentences"},
        {{0}, B, 0, "out_width 0"},
        {{0}, 0, W, "batch 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        TK_STATUS(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, bad[i].batch, S, &bad[i].o, bad[i].width, out, lens),
                  ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decode(ctx, &m->s2s, NULL, src_lens, B, S, NULL, W, out, lens), ATTN_ERR_ARG);
    attn_tensor *w = NULL;
    const int64_t past_width = S + 1;
    attn_seq2seq_decode_opts with_weights = {.beam_size = 2, .cross_weights = &w};
    TK_STATUS(attn_seq2seq_decode(ctx, &m->s2s, src, &past_width, 1, S, &with_weights, W, out, lens), ATTN_ERR_ARG);
    TK_STATUS(attn_seq2seq_decode(ctx, &m->s2s, src, src_lens, B, S, NULL, W, out, NULL), ATTN_ERR_ARG);
}

int main(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    const struct {
        attn_seq2seq_kind kind;
        float rope_base;
        const char *name;
    } kinds[] = {{ATTN_SEQ2SEQ_TRANSFORMER, 0.0f, "transformer"},
                 {ATTN_SEQ2SEQ_BAHDANAU, 0.0f, "bahdanau"},
                 {ATTN_SEQ2SEQ_TRANSFORMER, 10000.0f, "transformer with rotary positions"}};
    for (int k = 0; k < 3; k++) {
        model m;
        model_init(&m, kinds[k].kind, kinds[k].rope_base, 11 + (uint64_t)k);
        for (int64_t beams = 1; beams <= 4; beams *= 2) check_steps(&m, kinds[k].name, beams, 7 + (uint64_t)beams);
        check_searches_eos(ctx, &m, kinds[k].name);
        check_cross_weights(ctx, &m, kinds[k].name);
        check_beam_batch(ctx, &m, kinds[k].name);
        check_select(&m, kinds[k].name);
        check_decode_refusals(ctx, &m);
        check_hostile(ctx, &m);
        model_free(&m);
    }
    attn_ctx_free(ctx);
    return tk_finish("test_seq2seq_decoder");
}
