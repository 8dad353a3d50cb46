/* Step-by-step decoding driven by the caller: a search of one's own on attn_seq2seq_decoder.
 * A small Transformer (random weights here; load a checkpoint in practice) translates two
 * sentences of different lengths with 2 beams each: every step feeds each row's latest token and
 * gets (rows, V) logits back (the decoder keeps the keys and values of earlier tokens); the
 * caller picks tokens, tells the decoder which rows continue which (reorder) and drops the
 * sentences that are done (select). This search keeps, for each sentence, its best token twice
 * (both beams alike) - a greedy search - so its answer must be attn_seq2seq_decode's (greedy): checked.
 * Build: cc decode_steps.c $(pkg-config --cflags --libs attn) */
#include <attn.h>
#include <stdio.h>
#include <string.h>

enum {
    B = 2,
    S = 5,
    BEAMS = 2,
    MAX_OUT = 8,
    V = 20
};

static int64_t argmax(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(void)
{
    attn_seq2seq_config cfg = {.kind = ATTN_SEQ2SEQ_TRANSFORMER,
                               .src_vocab = 20,
                               .tgt_vocab = V,
                               .d_model = 32,
                               .num_heads = 4,
                               .dim_feedforward = 64,
                               .enc_layers = 2,
                               .dec_layers = 2,
                               .max_len = 16,
                               .pad_id = 1,
                               .bos_id = 2,
                               .eos_id = 15}; /* a token these random weights emit, so that the
                                                 first sentence ends early and is dropped */
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_params *params = attn_params_new();
    attn_seq2seq model;
    const int64_t src[B * S] = {4, 5, 6, 7, 3, 8, 9, 3, 1, 1}, src_lens[B] = {5, 3}; /* 1 = <pad> */
    if (attn_seq2seq_init(&model, params, &cfg, &rng) != ATTN_OK) return fprintf(stderr, "%s\n", attn_last_error()), 1;
    attn_seq2seq_decoder *d = attn_seq2seq_decoder_new(&model, src, src_lens, B, S, BEAMS, MAX_OUT,
                                                       ATTN_SEQ2SEQ_DECODE_CACHED); /* encodes once */
    if (!d) return fprintf(stderr, "%s\n", attn_last_error()), 1;
    float logits[B * BEAMS * V];
    int64_t tokens[B * BEAMS], parents[B * BEAMS], keep[B], sentence[B] = {0, 1}; /* decoder's -> ours */
    int64_t out[B][MAX_OUT], len[B] = {0, 0}, live = B;
    for (int64_t r = 0; r < B * BEAMS; r++) tokens[r] = cfg.bos_id;
    for (int t = 0; t < MAX_OUT && live > 0; t++) {
        if (attn_seq2seq_decoder_step(d, logits, tokens) != ATTN_OK)
            return fprintf(stderr, "%s\n", attn_last_error()), 1;
        int64_t n_keep = 0;
        for (int64_t i = 0; i < live; i++) { /* sentence i of the decoder: rows i * BEAMS + j */
            const int64_t tok = argmax(logits + i * BEAMS * V, V), b = sentence[i];
            for (int j = 0; j < BEAMS; j++) {
                tokens[i * BEAMS + j] = tok;
                parents[i * BEAMS + j] = i * BEAMS; /* both beams continue the first */
            }
            out[b][len[b]++] = tok;
            if (tok != cfg.eos_id && t + 1 < MAX_OUT) keep[n_keep++] = i;
        }
        if (attn_seq2seq_decoder_reorder(d, parents) != ATTN_OK) return 1;
        if (n_keep == 0 || n_keep == live) continue;
        if (attn_seq2seq_decoder_select(d, keep, n_keep) != ATTN_OK) return 1; /* the rest are done */
        for (int64_t i = 0; i < n_keep; i++) {
            sentence[i] = sentence[keep[i]];
            for (int j = 0; j < BEAMS; j++) tokens[i * BEAMS + j] = tokens[keep[i] * BEAMS + j];
        }
        live = n_keep;
    }
    attn_seq2seq_decoder_free(d);

    attn_ctx *ctx = attn_ctx_new(0);
    int64_t greedy[B * MAX_OUT], greedy_lens[B];
    int same = attn_seq2seq_decode(ctx, &model, src, src_lens, B, S, NULL, MAX_OUT, greedy, greedy_lens) == ATTN_OK;
    for (int b = 0; b < B; b++) {
        printf("sentence %d:", b);
        for (int64_t t = 0; t < len[b]; t++) printf(" %lld", (long long)out[b][t]);
        printf("\n");
        const int64_t words = len[b] - (out[b][len[b] - 1] == cfg.eos_id); /* the search's answer leaves <eos> out */
        same =
            same && greedy_lens[b] == words && !memcmp(out[b], greedy + b * MAX_OUT, (size_t)words * sizeof out[b][0]);
    }
    printf("the same as attn_seq2seq_decode's greedy search: %s\n", same ? "yes" : "no");
    attn_ctx_free(ctx);
    attn_seq2seq_free(&model);
    attn_params_free(params);
    return same ? 0 : 1;
}
