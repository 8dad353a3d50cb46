/* BLEU: corpus BLEU-4 from summed clipped n-gram statistics (as sacrebleu with
 * smooth_method="none") over sacrebleu's 13a tokens (tokenizer.c), and D2L's sentence bleu for
 * the toy examples. */
#include "data_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- clipped n-gram matches ---- */

/* An n-gram as (rank of its first n-1 tokens, id of its last token), with where it starts in
 * the hypothesis (side 0) or the reference (side 1). */
typedef struct gram {
    int64_t a, b;
    int64_t pos;
    int side;
} gram;

static int gram_cmp(const void *x, const void *y)
{
    const gram *g = x, *h = y;
    if (g->a != h->a) return g->a < h->a ? -1 : 1;
    if (g->b != h->b) return g->b < h->b ? -1 : 1;
    return 0;
}

/* Token ids of hyp then ref in ids (n_hyp + n_ref), equal tokens equal ids. */
static attn_status token_ids(int64_t *ids, const char *const *hyp, int64_t n_hyp, const char *const *ref, int64_t n_ref)
{
    attn__strtab tab = {0};
    attn_status st = ATTN_OK;
    for (int64_t i = 0; i < n_hyp + n_ref && st == ATTN_OK; i++) {
        const char *t = i < n_hyp ? hyp[i] : ref[i - n_hyp];
        bool added;
        ids[i] = t ? attn__strtab_intern(&tab, t, strlen(t), &added) : -1;
        if (!t)
            st = attn__fail(ATTN_ERR_ARG, "bleu: token %lld is NULL", (long long)i);
        else if (ids[i] < 0)
            st = attn_last_status();
    }
    attn__strtab_free(&tab);
    return st;
}

/* One level: grams of length n from the ranks of length n-1 (rank[i] for combined position
 * i), new ranks written back; returns the clipped matches sum_g min(#hyp g, #ref g). */
static int64_t level(gram *g, int64_t *rank, const int64_t *ids, int64_t n_hyp, int64_t n_ref, int n)
{
    int64_t m = 0;
    for (int side = 0; side < 2; side++) {
        int64_t base = side ? n_hyp : 0, len = side ? n_ref : n_hyp;
        for (int64_t i = 0; i + n <= len; i++)
            g[m++] = (gram){n == 1 ? 0 : rank[base + i], ids[base + i + n - 1], base + i, side};
    }
    qsort(g, (size_t)m, sizeof *g, gram_cmp);
    int64_t matches = 0, next_rank = 0;
    for (int64_t lo = 0, hi; lo < m; lo = hi, next_rank++) {
        int64_t count[2] = {0, 0};
        for (hi = lo; hi < m && gram_cmp(&g[lo], &g[hi]) == 0; hi++) {
            count[g[hi].side]++;
            rank[g[hi].pos] = next_rank;
        }
        matches += count[0] < count[1] ? count[0] : count[1];
    }
    return matches;
}

/* matches[n-1] = clipped matches of n-grams, n = 1..k. */
static attn_status clipped_matches(int64_t *matches, const char *const *hyp, int64_t n_hyp, const char *const *ref,
                                   int64_t n_ref, int k)
{
    if (n_hyp < 0 || n_ref < 0 || (!hyp && n_hyp) || (!ref && n_ref))
        return attn__fail(ATTN_ERR_ARG, "bleu: bad token list (NULL or negative length)");
    int64_t n;
    if (__builtin_add_overflow(n_hyp, n_ref, &n) || n == INT64_MAX)
        return attn__fail(ATTN_ERR_ARG, "bleu: %lld + %lld tokens", (long long)n_hyp, (long long)n_ref);
    int64_t *ids = malloc((size_t)(n + 1) * sizeof *ids);
    int64_t *rank = calloc((size_t)n + 1, sizeof *rank);
    gram *g = malloc((size_t)(n + 1) * sizeof *g);
    attn_status st = ids && rank && g ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "bleu: %lld tokens", (long long)n);
    if (st == ATTN_OK) st = token_ids(ids, hyp, n_hyp, ref, n_ref);
    for (int k1 = 1; k1 <= k && st == ATTN_OK; k1++) matches[k1 - 1] = level(g, rank, ids, n_hyp, n_ref, k1);
    free(ids);
    free(rank);
    free(g);
    return st;
}

/* ---- corpus BLEU ---- */

/* Counts a caller could have filled in: none negative, no more matches than n-grams. */
static attn_status check_stats(const attn_bleu_stats *s, const char *fn)
{
    bool ok = s->hyp_len >= 0 && s->ref_len >= 0;
    for (int n = 0; n < 4; n++) ok = ok && s->matches[n] >= 0 && s->matches[n] <= s->totals[n];
    return ok ? ATTN_OK
              : attn__fail(ATTN_ERR_ARG,
                           "%s: the stats hold a negative count or more matches than "
                           "n-grams (zero-initialise them)",
                           fn);
}

attn_status attn_bleu_add_tokens(attn_bleu_stats *s, const char *const *hyp, int64_t n_hyp, const char *const *ref,
                                 int64_t n_ref)
{
    if (!s) return attn__fail(ATTN_ERR_ARG, "attn_bleu_add_tokens: NULL stats");
    int64_t m[4];
    attn_status st = check_stats(s, "attn_bleu_add_tokens");
    if (st == ATTN_OK) st = clipped_matches(m, hyp, n_hyp, ref, n_ref, 4);
    if (st != ATTN_OK) return st;
    attn_bleu_stats sum = *s; /* s changes only when no count overflows (sum is dropped at the first) */
    bool overflow = __builtin_add_overflow(sum.hyp_len, n_hyp, &sum.hyp_len) ||
                    __builtin_add_overflow(sum.ref_len, n_ref, &sum.ref_len);
    for (int n = 1; n <= 4 && !overflow; n++)
        overflow = __builtin_add_overflow(sum.matches[n - 1], m[n - 1], &sum.matches[n - 1]) ||
                   __builtin_add_overflow(sum.totals[n - 1], n_hyp - n + 1 > 0 ? n_hyp - n + 1 : 0, &sum.totals[n - 1]);
    if (overflow) return attn__fail(ATTN_ERR_ARG, "attn_bleu_add_tokens: a count passes INT64_MAX");
    *s = sum;
    return ATTN_OK;
}

/* s's 13a tokens after str.rstrip(): sacrebleu strips each line before the tokenizer, whose
 * "-\n" rule would otherwise drop a line's final hyphen. The text is checked first (the decoder
 * reads valid UTF-8 only). */
static attn_status tokens_13a(attn_tokens *out, const char *s, const char *name)
{
    size_t len = strlen(s), end = 0;
    attn_status st = attn_utf8_check(s, len, name);
    for (size_t i = 0; st == ATTN_OK && i < len;)
        if (!attn__is_space(attn__utf8_next(s, &i))) end = i;
    return st == ATTN_OK ? attn_tokenize(out, ATTN_TOKENIZER_13A, s, end) : st;
}

attn_status attn_bleu_add(attn_bleu_stats *s, const char *hyp, const char *ref)
{
    if (!s || !hyp || !ref) return attn__fail(ATTN_ERR_ARG, "attn_bleu_add: NULL argument");
    attn_tokens h = {0}, r = {0};
    attn_status st = tokens_13a(&h, hyp, "attn_bleu_add: hyp");
    if (st == ATTN_OK) st = tokens_13a(&r, ref, "attn_bleu_add: ref");
    if (st == ATTN_OK) st = attn_bleu_add_tokens(s, h.items, h.count, r.items, r.count);
    attn_tokens_free(&h);
    attn_tokens_free(&r);
    return st;
}

double attn_bleu_score(const attn_bleu_stats *s, double *precisions, double *bp)
{
    if (!s) {
        attn__null_arg("attn_bleu_score");
        return NAN;
    }
    if (check_stats(s, "attn_bleu_score") != ATTN_OK) return NAN;
    double logsum = 0.0, p[4];
    bool any_zero = false;
    for (int n = 0; n < 4; n++) {
        p[n] = s->totals[n] ? (double)s->matches[n] / (double)s->totals[n] : 0.0;
        any_zero |= s->matches[n] == 0;
        if (s->matches[n]) logsum += log(p[n]);
        if (precisions) precisions[n] = 100.0 * p[n];
    }
    double brevity = s->hyp_len >= s->ref_len ? 1.0 /* as sacrebleu: both empty too */
                     : s->hyp_len             ? exp(1.0 - (double)s->ref_len / (double)s->hyp_len)
                                              : 0.0;
    if (bp) *bp = brevity;
    return any_zero ? 0.0 : 100.0 * brevity * exp(logsum / 4.0);
}

/* ---- D2L ---- */

double attn_bleu_d2l(const char *const *pred, int64_t n_pred, const char *const *label, int64_t n_label, int k)
{
    if ((!pred && n_pred > 0) || (!label && n_label > 0)) {
        attn__null_arg("attn_bleu_d2l");
        return NAN;
    }
    if (n_pred <= 0) return 0.0;
    int kk = k < n_pred ? k : (int)n_pred;
    int64_t *m = malloc((size_t)(kk > 0 ? kk : 1) * sizeof *m);
    if (!m || clipped_matches(m, pred, n_pred, label, n_label, kk) != ATTN_OK) {
        free(m);
        return NAN;
    }
    double score = exp(fmin(0.0, 1.0 - (double)n_label / (double)n_pred));
    for (int n = 1; n <= kk; n++) score *= pow((double)m[n - 1] / (double)(n_pred - n + 1), pow(0.5, n));
    free(m);
    return score;
}
