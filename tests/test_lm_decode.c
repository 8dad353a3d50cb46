/* The cached decoder's one-token step (models/lm_decode_step.c) against its reference, the feed
 * through the ops (lm_decode.c), on random models of each style: GPT-2 (LayerNorm with biases,
 * learned positions, tied head), Llama with grouped key/value heads (2 of 6), untied, interleaved
 * rotary pairs, and Llama with one key/value head, tied, rotary halves. Three rows, prompts of
 * 3, 0 and 5 tokens through the ops in both decoders, then single steps in turns with a row at
 * rest (counts of 0), up to the capacity: at every step each row's logits from the step against
 * the ops', on 1 and 2 threads; and the lengths both decoders report.
 *
 * Every parameter is drawn N(0, 0.3) (norm weights 1 + N(0, 0.1)), so that no bias or gain is
 * the identity that would hide a term left out. Bound: both sides float32 (2), the same model in
 * another order of its sums; the roundings on the longest path as test_golden_lm.c counts them for
 * the forward alone: n = layers (3 E + F + 2 capacity) + 2 E; cond 4 and 8 roundings of an
 * element's own, as there. */
#include "testkit.h"
#include "models/lm_internal.h"

#include <stdlib.h>
#include <string.h>

enum {
    ROWS = 3,
    CAPACITY = 24
};

typedef struct lm_case {
    const char *name;
    attn_lm_config cfg;
} lm_case;

static void randomise(attn_params *p, attn_rng *rng)
{
    for (size_t i = 0; i < attn_params_count(p); i++) {
        attn_tensor *t = attn_params_at(p, i);
        const bool gain = t->ndim == 1 && strstr(attn_params_name(p, i), "weight"); /* a norm's; biases are "bias" */
        attn_tensor_fill_normal(t, rng, gain ? 1.0f : 0.0f, gain ? 0.1f : 0.3f);
    }
}

static void run_case(const lm_case *c, int threads)
{
    attn_params *p = attn_params_new();
    attn_lm m;
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    TK_CHECK(attn_lm_init(&m, p, &c->cfg, &rng) == ATTN_OK, "%s: init: %s", c->name, attn_last_error());
    randomise(p, &rng);
    const int64_t V = m.cfg.vocab_size, E = m.cfg.d_model;
    attn_lm_decoder *step = attn_lm_decoder_new(&m, ROWS, CAPACITY), *ops = attn_lm_decoder_new(&m, ROWS, CAPACITY);
    TK_CHECK(step && ops, "%s: decoders: %s", c->name, attn_last_error());
    attn_lm_decoder_set_num_threads(step, threads);
    attn_lm_decoder_set_num_threads(ops, threads);
    float *a = malloc((size_t)(ROWS * V) * sizeof *a), *b = malloc((size_t)(ROWS * V) * sizeof *b);
    int64_t tokens[CAPACITY * ROWS], counts[ROWS] = {3, 0, 5}, total = 8;
    for (int64_t i = 0; i < total; i++) tokens[i] = attn_rng_below(&rng, (uint32_t)V);
    const tk_tol tol =
        tk_tol_of(2, (double)(m.cfg.num_layers * (3 * E + m.cfg.ffn_hidden + 2 * CAPACITY) + 2 * E), 4, 8);
    bool ok = step && ops && a && b;
    ok = ok && attn__lm_decoder_feed_path(step, a, tokens, counts, ATTN__LM_PATH_OPS) == ATTN_OK &&
         attn__lm_decoder_feed_path(ops, b, tokens, counts, ATTN__LM_PATH_OPS) == ATTN_OK;
    for (int s = 0; ok; s++) {
        total = 0;
        for (int64_t r = 0; r < ROWS; r++) { /* row s % 3 rests; a full row stops */
            counts[r] = r != s % ROWS && attn_lm_decoder_length(step, r) < CAPACITY;
            if (counts[r]) tokens[total++] = attn_rng_below(&rng, (uint32_t)V);
        }
        if (!total) break;
        ok = attn__lm_decoder_feed_path(step, a, tokens, counts, ATTN__LM_PATH_ANY) == ATTN_OK &&
             attn__lm_decoder_feed_path(ops, b, tokens, counts, ATTN__LM_PATH_OPS) == ATTN_OK;
        TK_CHECK(ok, "%s: step %d: %s", c->name, s, attn_last_error());
        for (int64_t r = 0; ok && r < ROWS; r++) {
            char what[96];
            snprintf(what, sizeof what, "%s, %d threads, step %d, row %lld (%lld tokens)", c->name, threads, s,
                     (long long)r, (long long)attn_lm_decoder_length(step, r));
            TK_CHECK(attn_lm_decoder_length(step, r) == attn_lm_decoder_length(ops, r), "%s: lengths differ", what);
            tk_close_scaled(what, a + r * V, b + r * V, V, tol);
        }
    }
    free(a), free(b);
    attn_lm_decoder_free(step), attn_lm_decoder_free(ops);
    attn_lm_free(&m);
    attn_params_free(p);
}

int main(void)
{
    const lm_case cases[] = {
        {"gpt2",
         {.style = ATTN_LM_GPT2, .vocab_size = 61, .context = 32, .d_model = 48, .num_layers = 2, .num_heads = 4}},
        {"llama gqa untied interleaved",
         {.style = ATTN_LM_LLAMA,
          .vocab_size = 67,
          .context = 32,
          .d_model = 48,
          .num_layers = 2,
          .num_heads = 6,
          .num_kv_heads = 2,
          .untied = true,
          .rope_interleaved = true}},
        {"llama mqa tied halves",
         {.style = ATTN_LM_LLAMA,
          .vocab_size = 53,
          .context = 32,
          .d_model = 40,
          .num_layers = 2,
          .num_heads = 4,
          .num_kv_heads = 1}},
    };
    for (int i = 0; i < 3; i++)
        for (int threads = 1; threads <= 2; threads++) run_case(&cases[i], threads);
    return tk_finish("test_lm_decode");
}
