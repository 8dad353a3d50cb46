/* Loaders and batching: the shipped aclImdb_mini (2,500 train / 1,000 test, neg then pos, each
 * by id) and Multi30k (29,000 / 1,014 / 1,000 pairs); aclImdb error cases in a scratch folder
 * (missing root or folder, no reviews, non-UTF-8 review, ignored files, a 1 MB review);
 * line-aligned files plain and gzip, CRLF, no final newline, U+202F / U+00A0, mismatched
 * counts; tab-separated pairs; padding with <bos>/<eos>, truncation, widths; plain and
 * length-bucketed batch orders. */
#define _XOPEN_SOURCE 700
#include "testkit.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#define IMDB_ROOT "data/aclImdb_mini"
#define M30K "data/multi30k/"

/* ---- scratch files ---- */

static char scratch[64];

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static const char *at(const char *rel)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", scratch, rel);
    return buf[k];
}

static void put(const char *rel, const char *text, size_t len)
{
    FILE *f = fopen(at(rel), "wb");
    TK_CHECK(f != NULL, "cannot write %s", at(rel));
    if (!f) return;
    fwrite(text, 1, len, f);
    fclose(f);
}

static void put_gz(const char *rel, const char *text)
{
    gzFile f = gzopen(at(rel), "wb");
    TK_CHECK(f != NULL, "cannot write %s", at(rel));
    if (!f) return;
    gzwrite(f, text, (unsigned)strlen(text));
    gzclose(f);
}

static void dir(const char *rel)
{
    mkdir(at(rel), 0755);
}

/* ---- aclImdb ---- */

/* want reviews, the first being neg/0_<rating0>.txt starting with first_text. */
static void check_imdb_split(const char *split, int64_t want, int32_t rating0, const char *first_text)
{
    attn_labeled_texts d;
    TK_OK(attn_imdb_load(&d, IMDB_ROOT, split));
    TK_CHECK(d.count == want, "%s: %lld reviews, want %lld", split, (long long)d.count, (long long)want);
    bool ordered = true, ratings = true;
    int64_t pos = 0;
    for (int64_t i = 0; i < d.count; i++) {
        pos += d.labels[i];
        if (i > 0 && d.labels[i] == d.labels[i - 1]) ordered &= d.ids[i] > d.ids[i - 1];
        if (i > 0) ordered &= d.labels[i] >= d.labels[i - 1];
        ratings &= d.labels[i] ? d.ratings[i] >= 7 && d.ratings[i] <= 10 : d.ratings[i] >= 1 && d.ratings[i] <= 4;
    }
    TK_CHECK(pos == want / 2, "%s: %lld positive", split, (long long)pos);
    TK_CHECK(ordered, "%s: neg then pos, each by increasing id", split);
    TK_CHECK(ratings, "%s: ratings 1-4 for neg, 7-10 for pos", split);
    TK_CHECK(d.count > 0 && d.ids[0] == 0 && d.ratings[0] == rating0 &&
                 strncmp(d.texts[0], first_text, strlen(first_text)) == 0,
             "%s: first review is neg/0_%d.txt", split, rating0);
    attn_labeled_texts_free(&d);
}

static void test_imdb_errors(void)
{
    attn_labeled_texts d;
    attn_status st = attn_imdb_load(&d, "/nonexistent/aclImdb", "train");
    TK_CHECK(st == ATTN_ERR_IO && strstr(attn_last_error(), "/nonexistent/aclImdb"), "missing root: %s",
             attn_last_error());
    dir("imdb");
    st = attn_imdb_load(&d, at("imdb"), "train");
    TK_CHECK(st == ATTN_ERR_IO && strstr(attn_last_error(), "imdb/train/neg") &&
                 strstr(attn_last_error(), "<id>_<rating>.txt"),
             "missing folder: %s", attn_last_error());
    dir("imdb/train");
    dir("imdb/train/neg");
    dir("imdb/train/pos");
    dir("imdb/train/unsup");
    put("imdb/train/neg/urls_neg.txt", "http://x\n", 9);
    put("imdb/train/neg/3_1.feat", "1:2", 3);
    put("imdb/train/unsup/5_0.txt", "unlabelled", 10);
    st = attn_imdb_load(&d, at("imdb"), "train");
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "imdb/train/neg: no reviews"), "empty folder: %s",
             attn_last_error());
    put("imdb/train/neg/10_2.txt", "Bad.", 4);
    put("imdb/train/neg/9_4.txt", "Meh<br />meh.", 13);
    put("imdb/train/neg/x_4.txt", "not a review name", 17);
    put("imdb/train/pos/2_8.txt", "Caf\xe9 was fine", 14); /* Windows-1252 */
    st = attn_imdb_load(&d, at("imdb"), "train");
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "imdb/train/pos/2_8.txt") &&
                 strstr(attn_last_error(), "byte offset 3"),
             "non-UTF-8 review: %s", attn_last_error());
    TK_CHECK(d.count == 0 && d.texts == NULL, "nothing kept after an error");

    size_t big = 1 << 20; /* a 1 MB review, truncated at 512 tokens when padded */
    char *text = malloc(big);
    for (size_t i = 0; i < big; i++) text[i] = "great film! "[i % 12];
    put("imdb/train/pos/2_8.txt", text, big);
    free(text);
    st = attn_imdb_load(&d, at("imdb"), "train");
    TK_CHECK(st == ATTN_OK && d.count == 3, "scratch set: %s", attn_last_error());
    TK_CHECK(d.count == 3 && d.ids[0] == 9 && d.ids[1] == 10 && d.ids[2] == 2 && d.labels[2] == 1 &&
                 d.ratings[1] == 2 && strlen(d.texts[2]) == big,
             "scratch set order/labels/sizes");
    if (d.count == 3) {
        static const char *const vocab_tokens[] = {"<unk>", "<pad>", "great", "film", "!"};
        attn_vocab *v = attn_vocab_from_tokens(vocab_tokens, 5);
        attn_id_seqs ids = {0};
        TK_OK(attn_encode_texts(&ids, v, ATTN_TOKENIZER_BASIC_ENGLISH, (const char *const *)d.texts, 3));
        int64_t row[512], len;
        attn_pad_opts po = {1, -1, -1};
        TK_OK(attn_batch_pad(row, &len, &ids, (int64_t[]){2}, &po, 1, 512));
        TK_CHECK(attn_id_seqs_len(&ids, 2) == 3 * (int64_t)(big / 12) + 1 && len == 512 && row[0] == 2 && row[1] == 3 &&
                     row[2] == 4 && row[511] == 3,
                 "1 MB review (ends in \"grea\"): %lld tokens, kept %lld", (long long)attn_id_seqs_len(&ids, 2),
                 (long long)len);
        attn_id_seqs_free(&ids);
        attn_vocab_free(v);
    }
    attn_labeled_texts_free(&d);
}

/* ---- parallel text ---- */

static void check_m30k(const char *split, int64_t want, const char *first_en, const char *first_fr)
{
    char en[128], fr[128];
    snprintf(en, sizeof en, M30K "%s.en.gz", split);
    snprintf(fr, sizeof fr, M30K "%s.fr.gz", split);
    attn_text_pairs p;
    TK_OK(attn_pairs_load(&p, en, fr));
    TK_CHECK(p.count == want, "%s: %lld pairs, want %lld", split, (long long)p.count, (long long)want);
    if (first_en)
        TK_CHECK(p.count > 0 && strcmp(p.src[0], first_en) == 0 && strcmp(p.tgt[0], first_fr) == 0,
                 "%s: first pair \"%s\" / \"%s\"", split, p.count ? p.src[0] : "", p.count ? p.tgt[0] : "");
    attn_text_pairs_free(&p);
}

static void test_pairs(void)
{
    check_m30k("train", 29000, NULL, NULL);
    check_m30k("val", 1014, NULL, NULL);
    check_m30k("test_2016_flickr", 1000, "A man in an orange hat starring at something.",
               "Un homme avec un chapeau orange regardant quelque chose.");

    const char *fr = "Va !\r\nCours\xe2\x80\xaf!\n\nNo\xc2\xa0"
                     "break";
    put("a.en", "Go.\nRun!\n\nNo break\n", 19);
    put("a.fr", fr, strlen(fr));
    put_gz("a.fr.gz", fr);
    attn_text_pairs p, q;
    TK_OK(attn_pairs_load(&p, at("a.en"), at("a.fr")));
    TK_OK(attn_pairs_load(&q, at("a.en"), at("a.fr.gz")));
    TK_CHECK(p.count == 4 && q.count == 4, "4 pairs (blank line kept, no empty last line)");
    static const char *const want[] = {"Va !", "Cours !", "", "No break"};
    for (int i = 0; i < 4 && p.count == 4 && q.count == 4; i++)
        TK_CHECK(strcmp(p.tgt[i], want[i]) == 0 && strcmp(q.tgt[i], want[i]) == 0,
                 "line %d: \"%s\" / gz \"%s\", want \"%s\"", i, p.tgt[i], q.tgt[i], want[i]);
    attn_text_pairs_free(&p);
    attn_text_pairs_free(&q);

    put("b.fr", "un\ndeux\n", 8);
    attn_status st = attn_pairs_load(&p, at("a.en"), at("b.fr"));
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "a.en has 4 lines") &&
                 strstr(attn_last_error(), "b.fr has 2"),
             "mismatch: %s", attn_last_error());
    put("bad.gz", "\x1f\x8b\x08\x00garbage", 12);
    st = attn_pairs_load(&p, at("bad.gz"), at("b.fr"));
    TK_CHECK(st != ATTN_OK && strstr(attn_last_error(), "bad.gz"), "corrupt gzip: %s", attn_last_error());
    st = attn_pairs_load(&p, at("missing.en"), at("b.fr"));
    TK_CHECK(st == ATTN_ERR_IO && strstr(attn_last_error(), "missing.en"), "missing: %s", attn_last_error());
    put("latin1.fr", "caf\xe9\n", 5);
    st = attn_pairs_load(&p, at("b.fr"), at("latin1.fr"));
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "latin1.fr") &&
                 strstr(attn_last_error(), "byte offset 3"),
             "bad UTF-8: %s", attn_last_error());
}

static void test_tsv(void)
{
    const char *tsv = "Go.\tVa\xe2\x80\xaf!\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272\n"
                      "\n"
                      "Hi.\tSalut !\r\n"
                      "Run!\tCours\xc2\xa0!\textra\tmore";
    put("eng-fra.txt", tsv, strlen(tsv));
    attn_text_pairs p;
    TK_OK(attn_pairs_load_tsv(&p, at("eng-fra.txt")));
    TK_CHECK(p.count == 3, "3 pairs (blank line skipped): %lld", (long long)p.count);
    if (p.count == 3)
        TK_CHECK(strcmp(p.src[0], "Go.") == 0 && strcmp(p.tgt[0], "Va !") == 0 && strcmp(p.tgt[1], "Salut !") == 0 &&
                     strcmp(p.src[2], "Run!") == 0 && strcmp(p.tgt[2], "Cours !") == 0,
                 "fields: %s|%s|%s", p.tgt[0], p.tgt[1], p.tgt[2]);
    attn_text_pairs_free(&p);
    put("notab.txt", "a\tb\nno tab here\n", 16);
    attn_status st = attn_pairs_load_tsv(&p, at("notab.txt"));
    TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), "notab.txt:2"), "no tab: %s", attn_last_error());
}

/* ---- padding and batches ---- */

static void test_padding(void)
{
    attn_id_seqs s = {0};
    TK_OK(attn_id_seqs_push(&s, (int64_t[]){5, 6, 7}, 3));
    TK_OK(attn_id_seqs_push(&s, NULL, 0));
    TK_OK(attn_id_seqs_push(&s, (int64_t[]){8, 9, 10, 11, 12, 13}, 6));
    TK_CHECK(s.count == 3 && attn_id_seqs_len(&s, 1) == 0 && attn_id_seqs_len(&s, 2) == 6, "ragged");
    TK_CHECK(attn_batch_width(&s, NULL, 3, 2, 0) == 8 && attn_batch_width(&s, NULL, 3, 2, 5) == 5 &&
                 attn_batch_width(&s, (int64_t[]){1, 0}, 2, 1, 0) == 4,
             "widths");
    /* what cannot be a width is refused, not summed past INT64_MAX (UBSan) or counted as empty */
    TK_CHECK(attn_batch_width(&s, NULL, 3, INT64_MAX, 0) == -1 && attn_last_status() == ATTN_ERR_ARG &&
                 attn_batch_width(&s, NULL, 3, -1, 0) == -1 && attn_batch_width(&s, NULL, -1, 0, 0) == -1 &&
                 attn_batch_width(&s, (int64_t[]){3}, 1, 0, 0) == -1 && attn_id_seqs_len(&s, 3) == -1 &&
                 attn_id_seqs_len(&s, -1) == -1,
             "widths past INT64_MAX, negative extra or n, and rows outside the sequences are refused");
    int64_t row[4];
    TK_CHECK(attn_pad_ids(row, NULL, -1, &(attn_pad_opts){0, 1, 2}, 4) == -1 &&
                 attn_pad_ids(row, NULL, 0, &(attn_pad_opts){0, 1, 2}, -1) == -1,
             "pad_ids of a negative len or width is refused");
    int64_t out[3 * 5], len[3];
    attn_pad_opts src = {1, -1, 3}, dec = {1, 2, -1};
    TK_OK(attn_batch_pad(out, len, &s, NULL, &src, 3, 5));
    static const int64_t want_src[15] = {5, 6, 7, 3, 1, 3, 1, 1, 1, 1, 8, 9, 10, 11, 12};
    TK_CHECK(memcmp(out, want_src, sizeof out) == 0 && len[0] == 4 && len[1] == 1 && len[2] == 5,
             "x + <eos>, cut at 5 (the cut row loses <eos>)");
    TK_OK(attn_batch_pad(out, len, &s, (int64_t[]){1, 0}, &dec, 2, 5));
    static const int64_t want_dec[10] = {2, 1, 1, 1, 1, 2, 5, 6, 7, 1};
    TK_CHECK(memcmp(out, want_dec, sizeof want_dec) == 0 && len[0] == 1 && len[1] == 4, "<bos> + y");
    TK_CHECK(attn_batch_pad(out, len, &s, (int64_t[]){3}, &src, 1, 5) == ATTN_ERR_ARG, "row out of range");
    attn_id_seqs_free(&s);
}

static bool is_permutation(const attn_batches *b, int64_t n)
{
    if (b->offsets[b->count] != n) return false;
    char *seen = calloc((size_t)n + 1, 1);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        ok = b->rows[i] >= 0 && b->rows[i] < n && !seen[b->rows[i]];
        if (ok) seen[b->rows[i]] = 1;
    }
    free(seen);
    return ok;
}

static void test_batches(void)
{
    attn_batches a, b;
    attn_rng r1, r2;
    TK_OK(attn_batches_plain(&a, 10, 4, NULL));
    TK_CHECK(a.count == 3 && a.offsets[1] == 4 && a.offsets[3] == 10 && a.rows[9] == 9, "in order");
    attn_batches_free(&a);
    attn_rng_seed(&r1, 7);
    attn_rng_seed(&r2, 7);
    TK_OK(attn_batches_plain(&a, 1000, 32, &r1));
    TK_OK(attn_batches_plain(&b, 1000, 32, &r2));
    TK_CHECK(a.count == 32 && is_permutation(&a, 1000) && memcmp(a.rows, b.rows, 1000 * sizeof *a.rows) == 0,
             "seeded shuffle: a permutation, the same for the same seed");
    attn_batches_free(&a);
    attn_batches_free(&b);

    attn_text_pairs p; /* Multi30k val: bucket it as the translation trainer does */
    TK_OK(attn_pairs_load(&p, M30K "val.en.gz", M30K "val.fr.gz"));
    static const char *const sp[] = {"<unk>"};
    attn_vocab *v = attn_vocab_from_tokens(sp, 1);
    attn_id_seqs src = {0}, tgt = {0};
    TK_OK(attn_encode_texts(&src, v, ATTN_TOKENIZER_WORDS, (const char *const *)p.src, p.count));
    TK_OK(attn_encode_texts(&tgt, v, ATTN_TOKENIZER_WORDS, (const char *const *)p.tgt, p.count));
    attn_rng_seed(&r1, 0);
    TK_OK(attn_batches_bucketed(&a, &src, &tgt, 64, 5, &r1)); /* pools 320, 320, 320, 54 */
    TK_CHECK(a.count == 16 && is_permutation(&a, 1014), "bucketed: %lld batches", (long long)a.count);
    int short_batches = 0;
    bool sorted = true;
    for (int64_t k = 0; k < a.count; k++) {
        short_batches += a.offsets[k + 1] - a.offsets[k] != 64;
        for (int64_t i = a.offsets[k] + 1; i < a.offsets[k + 1]; i++) {
            int64_t x = a.rows[i - 1], y = a.rows[i];
            int64_t sx = attn_id_seqs_len(&src, x), sy = attn_id_seqs_len(&src, y);
            sorted &= sx < sy || (sx == sy && attn_id_seqs_len(&tgt, x) <= attn_id_seqs_len(&tgt, y));
        }
    }
    TK_CHECK(short_batches == 1, "one short batch (the last pool's last): %d", short_batches);
    TK_CHECK(sorted, "each batch sorted by (src, tgt) length");
    attn_rng_seed(&r1, 1);
    TK_OK(attn_batches_bucketed(&b, &src, &tgt, 64, 5, &r1));
    TK_CHECK(memcmp(a.rows, b.rows, 1014 * sizeof *a.rows) != 0, "another seed, another order");
    attn_batches_free(&a);
    attn_batches_free(&b);
    attn_id_seqs_free(&src);
    attn_id_seqs_free(&tgt);
    attn_vocab_free(v);
    attn_text_pairs_free(&p);
}

int main(void)
{
    snprintf(scratch, sizeof scratch, "/tmp/attn_test_loaders_XXXXXX");
    if (!mkdtemp(scratch)) return tk_finish("test_data_loaders (no scratch folder)");
    check_imdb_split("train", 2500, 3, "Story of a man");
    check_imdb_split("test", 1000, 2, "Once again Mr. Costner");
    test_imdb_errors();
    test_pairs();
    test_tsv();
    test_padding();
    test_batches();
    nftw(scratch, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return tk_finish("test_data_loaders");
}
