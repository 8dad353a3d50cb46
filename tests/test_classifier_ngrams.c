/* The classifier's n-gram bag (attn_classifier_config.ngram_buckets): the bigram bucket against
 * splitmix64's published first output (seed 0: 0xe220a8397b1dcdaf, the finaliser of
 * 0x9e3779b97f4a7c15) and its range checks; the bag's logits against a float64 sum of the table's
 * rows (forward with the table minus forward with it zeroed, the rest of the model the same), on
 * padded and packed batches; the gradient reaching the table, each row the sum of the logits'
 * gradients times ATTN_CLASSIFIER_NGRAM_GAIN / sqrt(2n - 1) over the grams that index it; the refusals of init.
 * Tolerance: each side a float32 forward through the same attention and head, whose difference
 * is the bag's logits: the head's logits (at most |h| ~ 1) rounded a few times plus a sum of at
 * most 2 * LEN - 1 = 19 terms: tk_tol_of(2, 19, 4, 8) with the scale of the logits themselves
 * (the cancellation of the head's part leaves its roundings, not a fraction of the bag's). */
#include "testkit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    B = 4,
    LEN = 10,
    VOCAB = 30,
    BUCKETS = 7,
    C = 3
};

static void bucket_rule(void)
{
    /* a * V + b = 0x9e3779b97f4a7c15 with V = 2^32; modulo 2^62 keeps the low 62 bits */
    const int64_t v = INT64_C(1) << 32, top = INT64_C(1) << 62;
    TK_CHECK(attn_classifier_bigram_bucket(0x9e3779b9, 0x7f4a7c15, v, top) == INT64_C(0x2220a8397b1dcdaf),
             "splitmix64's finaliser of 0x9e3779b97f4a7c15 is 0xe220a8397b1dcdaf");
    const int64_t refused[][4] = {{-1, 0, 5, 3}, {0, -1, 5, 3}, {5, 0, 5, 3}, {0, 5, 5, 3}, {0, 0, 0, 3}, {0, 0, 5, 0}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        TK_CHECK(attn_classifier_bigram_bucket(refused[i][0], refused[i][1], refused[i][2], refused[i][3]) == -1,
                 "bucket(%lld, %lld, V %lld, buckets %lld) is refused", (long long)refused[i][0],
                 (long long)refused[i][1], (long long)refused[i][2], (long long)refused[i][3]);
    int64_t hits[BUCKETS] = {0};
    for (int64_t a = 0; a < VOCAB; a++)
        for (int64_t b = 0; b < VOCAB; b++) {
            int64_t k = attn_classifier_bigram_bucket(a, b, VOCAB, BUCKETS);
            TK_CHECK(k >= 0 && k < BUCKETS, "bucket(%lld, %lld) = %lld in [0, %d)", (long long)a, (long long)b,
                     (long long)k, BUCKETS);
            if (k >= 0 && k < BUCKETS) hits[k]++;
        }
    for (int k = 0; k < BUCKETS; k++) /* 900 bigrams: about 129 each; a broken mix piles them up */
        TK_CHECK(hits[k] > 80 && hits[k] < 180, "bucket %d holds %lld of 900 bigrams", k, (long long)hits[k]);
}

/* logits of m on the batch, in eval mode (no dropout), copied to out (B, C); grad: backward of
 * sum(logits * dlogits) into the parameters */
static bool run(attn_classifier *m, const int64_t *ids, const int64_t *lengths, const float *dlogits, float *out)
{
    attn_ctx *ctx = attn_ctx_new(3);
    attn_ctx_set_training(ctx, false);
    attn_tensor *logits = attn_classifier_forward(ctx, m, ids, lengths, B, LEN, NULL);
    bool ok = logits != NULL;
    if (ok) memcpy(out, logits->data, sizeof(float) * B * C);
    if (ok && dlogits) {
        attn_tensor *w = attn_tensor_from(ctx, 2, (int64_t[]){B, C}, dlogits);
        ok = attn_backward(ctx, attn_sum(ctx, attn_reshape(ctx, attn_mul(ctx, logits, w), 1, (int64_t[]){B * C}), 0,
                                         false)) == ATTN_OK;
    }
    attn_ctx_free(ctx);
    return ok;
}

static void bag_against_float64(bool pack)
{
    attn_classifier_config c = attn_classifier_defaults(VOCAB);
    c.embed_dim = 8, c.num_heads = 2, c.hidden_dim = 6, c.num_classes = C, c.max_len = 12;
    c.mask_padding = true, c.pack = pack, c.ngram_buckets = BUCKETS;
    attn_params *p = attn_params_new();
    attn_classifier m;
    attn_rng rng;
    attn_rng_seed(&rng, 19);
    TK_OK(attn_classifier_init(&m, p, &c, &rng));
    attn_tensor *table = attn_params_get(p, "ngrams.weight");
    TK_CHECK(table == m.ngrams && table && table->shape[0] == VOCAB + BUCKETS && table->shape[1] == C,
             "ngrams.weight is (vocab + buckets, classes)");
    TK_CHECK(table && tk_max_abs(table->data, table->numel) == 0, "the table starts at zeros");
    const int64_t lengths[B] = {10, 1, 2, 6};
    int64_t ids[B * LEN];
    for (int64_t i = 0; i < B * LEN; i++) ids[i] = (int64_t)attn_rng_below(&rng, VOCAB);
    float base[B * C], with[B * C], bag[B * C], dlogits[B * C];
    for (int i = 0; i < B * C; i++) dlogits[i] = (float)(i % 5) - 2.0f;
    TK_CHECK(run(&m, ids, lengths, NULL, base), "forward with the table at zeros: %s", attn_last_error());
    attn_tensor_fill_normal(table, &rng, 0.0f, 1.0f);
    attn_params_zero_grad(p);
    TK_CHECK(run(&m, ids, lengths, dlogits, with), "forward and backward with the table: %s", attn_last_error());
    double ref[B * C] = {0};                                       /* the bag's logits, float64 */
    double *dtable = calloc((size_t)table->numel, sizeof *dtable); /* (VOCAB + BUCKETS, C) */
    for (int64_t b = 0; b < B; b++) {
        const int64_t n = lengths[b], *seq = ids + b * LEN;
        const double w = ATTN_CLASSIFIER_NGRAM_GAIN / sqrt((double)(2 * n - 1));
        for (int64_t g = 0; g < 2 * n - 1; g++) {
            const int64_t row =
                g < n ? seq[g] : VOCAB + attn_classifier_bigram_bucket(seq[g - n], seq[g - n + 1], VOCAB, BUCKETS);
            for (int k = 0; k < C; k++) {
                ref[b * C + k] += w * table->data[row * C + k];
                dtable[row * C + k] += w * dlogits[b * C + k];
            }
        }
    }
    float ref32[B * C];
    for (int i = 0; i < B * C; i++) bag[i] = with[i] - base[i], ref32[i] = (float)ref[i];
    tk_tol tol = tk_tol_of(2, 19, 4, 8);
    tol.scale = (float)fmax(tk_max_abs(with, B * C), tk_max_abs(base, B * C));
    tk_close_scaled(pack ? "packed: the bag's logits" : "padded: the bag's logits", bag, ref32, B * C, tol);
    float *dtable32 = malloc(sizeof(float) * (size_t)table->numel);
    for (int64_t i = 0; i < table->numel; i++) dtable32[i] = (float)dtable[i];
    TK_CHECK(table->grad != NULL, "the table has a gradient");
    if (table->grad)
        tk_close_scaled(pack ? "packed: the table's gradient" : "padded: the table's gradient", table->grad, dtable32,
                        table->numel, tk_tol_of(1, 19, 1, 2));
    free(dtable), free(dtable32);
    attn_classifier_free(&m);
    attn_params_free(p);
}

static void refusals(void)
{
    attn_params *p = attn_params_new();
    attn_classifier m;
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_classifier_config c = attn_classifier_defaults(VOCAB);
    c.ngram_buckets = -1;
    TK_CHECK(attn_classifier_init(&m, p, &c, &rng) == ATTN_ERR_ARG, "ngram_buckets -1 is refused");
    c.ngram_buckets = INT64_MAX - VOCAB + 1;
    TK_CHECK(attn_classifier_init(&m, p, &c, &rng) == ATTN_ERR_ARG, "vocab + buckets past int64 is refused: %s",
             attn_last_error());
    TK_CHECK(attn_params_count(p) == 0, "a refused init leaves no parameter (%zu)", attn_params_count(p));
    attn_params_free(p);
}

int main(void)
{
    bucket_rule();
    bag_against_float64(false);
    bag_against_float64(true);
    refusals();
    return tk_finish("test_classifier_ngrams");
}
