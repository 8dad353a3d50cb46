/* BLEU against a Python reimplementation of sacrebleu's corpus BLEU-4 (13a, no smoothing) and
 * of d2l 1.0's bleu(). The expected numbers below were printed once by
 * `/usr/bin/python3 tests/data/make_bleu_cases.py` (Python 3.11.2) and pasted here; the Python
 * side is the code of shared/bench/multi30k_transformer_torch.py. Cases: a toy corpus (case,
 * punctuation, numbers, an entity, an empty hypothesis), Multi30k test_2016_flickr (fr) scored
 * against a hypothesis made from each reference by dropping every fifth word token and
 * detokenising (tokenizer + detokenizer + 13a + BLEU end to end on 1,000 real sentences), edge
 * cases, and D2L's toy translations. Tolerance 1e-9 relative: the same double arithmetic. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define M30K_FR "data/multi30k/test_2016_flickr.fr.gz"

typedef struct expect {
    double bleu, prec[4], bp;
    int64_t hyp_len, ref_len;
} expect;

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void check_stats(const char *what, const attn_bleu_stats *s, const expect *e)
{
    double prec[4], bp;
    double bleu = attn_bleu_score(s, prec, &bp);
    bool ok = near(bleu, e->bleu) && near(bp, e->bp) && s->hyp_len == e->hyp_len && s->ref_len == e->ref_len;
    for (int n = 0; n < 4; n++) ok &= near(prec[n], e->prec[n]);
    TK_CHECK(ok,
             "%s: BLEU %.12f prec %.6f/%.6f/%.6f/%.6f BP %.12f hyp %lld ref %lld; want %.12f "
             "%.6f/%.6f/%.6f/%.6f %.12f %lld %lld",
             what, bleu, prec[0], prec[1], prec[2], prec[3], bp, (long long)s->hyp_len, (long long)s->ref_len, e->bleu,
             e->prec[0], e->prec[1], e->prec[2], e->prec[3], e->bp, (long long)e->hyp_len, (long long)e->ref_len);
}

static const char *const toy_hyp[] = {"the CAT is on the mat.",
                                      "There is a cat on the mat.",
                                      "A dog, 3.5 kg, ran-away!",
                                      "Un homme avec une casquette orange faisant quelque chose.",
                                      "",
                                      "L'homme &amp; le chien : 1,000 m\xc3\xa8tres-2."};
static const char *const toy_ref[] = {"The cat sat on the mat.",
                                      "The cat is on the mat.",
                                      "A dog (3.5 kg) ran away!",
                                      "Un homme avec un chapeau orange regardant quelque chose.",
                                      "Nothing here.",
                                      "L'homme et le chien : 1,000 m\xc3\xa8tres - 2."};

static void test_toy(void)
{
    static const expect cased = {26.856353300731445,
                                 {68.29268292682927, 41.66666666666667, 25.806451612903224, 11.538461538461538},
                                 0.8851915475249605,
                                 41,
                                 46};
    static const expect lower = {27.768027339334406,
                                 {73.17073170731707, 44.44444444444444, 25.806451612903224, 11.538461538461538},
                                 0.8851915475249605,
                                 41,
                                 46};
    attn_bleu_stats s = {0}, lc = {0};
    for (int i = 0; i < 6; i++) {
        TK_OK(attn_bleu_add(&s, toy_hyp[i], toy_ref[i]));
        char *h = attn_utf8_lower(toy_hyp[i], strlen(toy_hyp[i]));
        char *r = attn_utf8_lower(toy_ref[i], strlen(toy_ref[i]));
        TK_OK(attn_bleu_add(&lc, h, r));
        free(h);
        free(r);
    }
    check_stats("toy corpus, 13a", &s, &cased);
    check_stats("toy corpus, 13a -lc", &lc, &lower);
}

/* hyp = detokenize(words(ref) without every fifth token); 13a, -lc, and token-level BLEU. */
static void test_multi30k(void)
{
    static const expect e13a = {42.40110709533916,
                                {94.75695370123522, 71.37423193211743, 46.49302928779856, 22.88864655276869},
                                0.8186289000827154,
                                11253,
                                13505};
    static const expect elc = {42.84231703547617,
                               {95.31680440771349, 72.0959719106603, 47.0442018804712, 23.20368350902702},
                               0.8186289000827154,
                               11253,
                               13505};
    static const expect etok = {48.98038267828576,
                                {100.0, 79.10514541387025, 56.01965601965602, 30.038147138964575},
                                0.8109005520356012,
                                12175,
                                14727};
    static const expect eself = {100.0, {100.0, 100.0, 100.0, 100.0}, 1.0, 13505, 13505};
    attn_text_pairs p;
    attn_status st = attn_pairs_load(&p, M30K_FR, M30K_FR);
    TK_CHECK(st == ATTN_OK && p.count == 1000, "loading %s: %s", M30K_FR, attn_last_error());
    if (st != ATTN_OK) return;
    attn_bleu_stats s13a = {0}, slc = {0}, stok = {0}, sself = {0};
    attn_tokens ref = {0}, hyp = {0};
    bool ok = true;
    for (int64_t i = 0; i < p.count; i++) {
        attn_tokens_clear(&ref);
        attn_tokens_clear(&hyp);
        attn_tokenize(&ref, ATTN_TOKENIZER_WORDS, p.tgt[i], strlen(p.tgt[i]));
        for (int64_t k = 0; k < ref.count; k++)
            if (k % 5 != 4) attn_tokens_push(&hyp, ref.items[k], strlen(ref.items[k]));
        char *h = attn_detokenize(hyp.items, hyp.count);
        char *hl = attn_utf8_lower(h, strlen(h)), *rl = attn_utf8_lower(p.tgt[i], strlen(p.tgt[i]));
        ok &= attn_bleu_add(&s13a, h, p.tgt[i]) == ATTN_OK && attn_bleu_add(&slc, hl, rl) == ATTN_OK &&
              attn_bleu_add_tokens(&stok, hyp.items, hyp.count, ref.items, ref.count) == ATTN_OK &&
              attn_bleu_add(&sself, p.tgt[i], p.tgt[i]) == ATTN_OK;
        free(h);
        free(hl);
        free(rl);
    }
    TK_CHECK(ok, "Multi30k sentences: %s", attn_last_error());
    check_stats("Multi30k, 13a", &s13a, &e13a);
    check_stats("Multi30k, 13a -lc", &slc, &elc);
    check_stats("Multi30k, tokens", &stok, &etok);
    check_stats("Multi30k, reference against itself", &sself, &eself);
    attn_tokens_free(&ref);
    attn_tokens_free(&hyp);
    attn_text_pairs_free(&p);
}

static void test_edges(void)
{
    attn_bleu_stats s = {0};
    double prec[4], bp;
    TK_CHECK(attn_bleu_score(&s, prec, &bp) == 0.0 && bp == 1.0,
             "nothing added: 0, BP 1 (sacrebleu: no brevity penalty unless hyp < ref)");
    TK_OK(attn_bleu_add(&s, "", "A reference ."));
    TK_CHECK(attn_bleu_score(&s, NULL, &bp) == 0.0 && bp == 0.0, "empty hypothesis: 0, BP 0");
    attn_bleu_stats t = {0};
    TK_OK(attn_bleu_add(&t, "one two three", "one two three four five"));
    TK_CHECK(attn_bleu_score(&t, prec, NULL) == 0.0 && prec[0] == 100.0 && prec[3] == 0.0,
             "no 4-gram: 0 without smoothing");
    attn_bleu_stats u = {0};
    TK_OK(attn_bleu_add(&u, "a b c d e f", "a b c d e"));
    TK_CHECK(near(attn_bleu_score(&u, NULL, &bp), 100.0 * pow(5.0 / 6 * 4.0 / 5 * 3.0 / 4 * 2.0 / 3, 0.25)) &&
                 bp == 1.0,
             "longer hypothesis: BP 1");
    TK_CHECK(attn_bleu_add_tokens(&u, NULL, 2, NULL, 0) == ATTN_ERR_ARG, "NULL token list");
    TK_CHECK(attn_bleu_add(&u, "caf\xe9", "x") == ATTN_ERR_FORMAT && strstr(attn_last_error(), "hyp"),
             "bad UTF-8, named: %s", attn_last_error());
    /* sacrebleu rstrip()s each line before 13a: a line read with its newline keeps a final
     * hyphen ("-\n" is one of 13a's deletions), so these are the same 7 tokens: BLEU 100 (it was
     * 84.65, hyp 6 tokens); make_bleu_cases.py's "trailing whitespace" and "nothing added" */
    attn_bleu_stats nl = {0};
    TK_OK(attn_bleu_add(&nl, "the cat sat on the mat -\n", "the cat sat on the mat -"));
    TK_OK(attn_bleu_add(&nl, "a b c d\xc2\xa0\t \r\n", "a b c d\xe2\x80\xa8"));
    TK_CHECK(attn_bleu_score(&nl, NULL, &bp) == 100.0 && bp == 1.0 && nl.hyp_len == 11 && nl.ref_len == 11,
             "trailing whitespace stripped first: BLEU %g, hyp %lld, ref %lld", attn_bleu_score(&nl, NULL, NULL),
             (long long)nl.hyp_len, (long long)nl.ref_len);
    /* stats a caller filled in: a count past INT64_MAX is refused with the stats unchanged (it
     * overflowed), and counts no sentences give are refused (a score of 500 came out) */
    attn_bleu_stats full = {{INT64_MAX - 1, 0, 0, 0}, {INT64_MAX - 1, 0, 0, 0}, 0, 0}, kept = full;
    TK_CHECK(attn_bleu_add(&full, "a b c d", "a b c d") == ATTN_ERR_ARG && !memcmp(&full, &kept, sizeof full),
             "a count past INT64_MAX is refused, the stats unchanged");
    attn_bleu_stats odd = {{10, 10, 10, 10}, {2, 2, 2, 2}, 5, 5};
    TK_CHECK(isnan(attn_bleu_score(&odd, NULL, NULL)) && attn_last_status() == ATTN_ERR_ARG &&
                 attn_bleu_add(&odd, "a", "a") == ATTN_ERR_ARG,
             "more matches than n-grams is refused");
}

/* D2L's bleu splits on ' '; so does this. */
static double d2l(const char *pred, const char *label, int k)
{
    attn_tokens p = {0}, l = {0};
    for (const char *s = pred; *s;) {
        size_t n = strcspn(s, " ");
        attn_tokens_push(&p, s, n);
        s += n + (s[n] == ' ');
    }
    for (const char *s = label; *s;) {
        size_t n = strcspn(s, " ");
        attn_tokens_push(&l, s, n);
        s += n + (s[n] == ' ');
    }
    double b = attn_bleu_d2l(p.items, p.count, l.items, l.count, k);
    attn_tokens_free(&p);
    attn_tokens_free(&l);
    return b;
}

static void test_d2l(void)
{
    static const struct {
        const char *pred, *label;
        int k;
        double want;
    } cases[] = {
        {"va !", "va !", 2, 1.0},
        {"j'ai perdu .", "j'ai perdu .", 2, 1.0},
        {"il est riche .", "il est calme .", 2, 0.6580370064762462},
        {"je suis chez moi .", "je suis chez moi .", 2, 1.0},
        {"le le le le", "le chat est sur le tapis", 2, 0.0},
        {"le chat", "le chat est sur le tapis", 4, 0.1353352832366127},
        {"a b c d e", "a b c d e", 4, 1.0},
        {"x", "a b", 2, 0.0},
        {"a b a b", "a b a", 2, 0.7825422900366436},
        {"a b a b", "a b", 3, 0.0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double b = d2l(cases[i].pred, cases[i].label, cases[i].k);
        TK_CHECK(near(b, cases[i].want), "d2l bleu(\"%s\", \"%s\", %d) = %.16g, want %.16g", cases[i].pred,
                 cases[i].label, cases[i].k, b, cases[i].want);
    }
    TK_CHECK(attn_bleu_d2l(NULL, 0, NULL, 0, 2) == 0.0, "d2l: empty prediction -> 0");
}

int main(void)
{
    test_toy();
    test_multi30k();
    test_edges();
    test_d2l();
    return tk_finish("test_data_bleu");
}
