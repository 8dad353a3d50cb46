/* Vocabularies against the PyTorch anchors on the shipped data:
 *   - aclImdb_mini train, basic_english, specials <unk> <pad>: 31,891 entries, 668,488 training
 *     tokens, and the dump (one token per line) has the sha256 of the anchor's --dump-vocab
 *     (shared/bench/IMDB_RESULTS.md); the test reviews have 3.06% unknown tokens;
 *   - Multi30k train, words tokenizer, min_freq 2, <unk> <pad> <bos> <eos>: en 5,898 and fr
 *     6,434 entries (shared/bench/MULTI30K_RESULTS.md);
 * plus torchtext's ordering, min_freq / max_size rules on a small counter, save/load round trip,
 * lookups and the error cases. */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define IMDB_ROOT "data/aclImdb_mini"
#define IMDB_VOCAB_SHA256 "695cb8f81dba7596427ba35e1c4cb9ddc7c5e5bb9cc6f12cdc9e22548e7b3636"

static const char *const imdb_specials[] = {"<unk>", "<pad>"};
static const char *const seq_specials[] = {"<unk>", "<pad>", "<bos>", "<eos>"};

/* A fresh temporary file name (the file exists, empty). */
static void temp_path(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/attn_test_vocab_XXXXXX");
    int fd = mkstemp(buf);
    if (fd >= 0) close(fd);
}

static void sha256_of(const char *path, char *hex /* 65 */)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
    hex[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (fscanf(p, "%64s", hex) != 1) hex[0] = '\0';
    pclose(p);
}

static attn_counter *count_texts(char *const *texts, int64_t n, attn_tokenizer kind)
{
    attn_counter *c = attn_counter_new();
    attn_tokens toks = {0};
    for (int64_t i = 0; i < n; i++) {
        attn_tokens_clear(&toks);
        if (attn_tokenize(&toks, kind, texts[i], strlen(texts[i])) != ATTN_OK ||
            attn_counter_add(c, toks.items, toks.count) != ATTN_OK) {
            TK_CHECK(false, "counting text %lld: %s", (long long)i, attn_last_error());
            break;
        }
    }
    attn_tokens_free(&toks);
    return c;
}

/* Share of unknown ids among the test reviews' tokens (the anchor prints 3.06%). */
static void check_test_oov(const attn_vocab *v)
{
    attn_labeled_texts test;
    TK_OK(attn_imdb_load(&test, IMDB_ROOT, "test"));
    attn_id_seqs ids = {0};
    TK_OK(attn_encode_texts(&ids, v, ATTN_TOKENIZER_BASIC_ENGLISH, (const char *const *)test.texts, test.count));
    int64_t total = ids.count ? ids.offsets[ids.count] : 0, unk = 0;
    for (int64_t i = 0; i < total; i++) unk += ids.ids[i] == 0;
    double share = total ? (double)unk / (double)total : 0.0;
    TK_CHECK(share > 0.03055 && share < 0.03065, "test OOV share %.5f, the anchor has 3.06%%", share);
    attn_id_seqs_free(&ids);
    attn_labeled_texts_free(&test);
}

static void test_imdb_vocab(void)
{
    attn_labeled_texts train;
    attn_status st = attn_imdb_load(&train, IMDB_ROOT, "train");
    TK_CHECK(st == ATTN_OK, "loading %s: %s", IMDB_ROOT, attn_last_error());
    if (st != ATTN_OK) return;
    attn_counter *c = count_texts(train.texts, train.count, ATTN_TOKENIZER_BASIC_ENGLISH);
    TK_CHECK(attn_counter_total(c) == 668488, "training tokens %lld, want 668488", (long long)attn_counter_total(c));
    attn_vocab *v = attn_vocab_build(c, imdb_specials, 2, 1, 0);
    TK_NOT_NULL(v);
    TK_CHECK(attn_vocab_size(v) == 31891, "vocab size %lld, want 31891", (long long)attn_vocab_size(v));
    TK_CHECK(attn_vocab_unk(v) == 0 && attn_vocab_find(v, "<pad>") == 1, "specials first");
    TK_CHECK(strcmp(attn_vocab_token(v, 2), "the") == 0, "id 2 is \"%s\"", attn_vocab_token(v, 2));

    char path[64], hex[65];
    temp_path(path, sizeof path);
    TK_OK(attn_vocab_save(v, path));
    sha256_of(path, hex);
    TK_CHECK(strcmp(hex, IMDB_VOCAB_SHA256) == 0, "vocab dump sha256 %s, want %s", hex, IMDB_VOCAB_SHA256);
    attn_vocab *back = attn_vocab_load(path);
    TK_NOT_NULL(back);
    bool same = back && attn_vocab_size(back) == attn_vocab_size(v);
    for (int64_t i = 0; same && i < attn_vocab_size(v); i++)
        same = strcmp(attn_vocab_token(v, i), attn_vocab_token(back, i)) == 0 &&
               attn_vocab_find(back, attn_vocab_token(v, i)) == i;
    TK_CHECK(same, "saved and loaded vocabularies differ");
    TK_CHECK(back && attn_vocab_unk(back) == 0, "loaded unk id");
    remove(path);
    check_test_oov(v);
    attn_vocab_free(back);
    attn_vocab_free(v);
    attn_counter_free(c);
    attn_labeled_texts_free(&train);
}

static void check_multi30k_side(const attn_text_pairs *p, bool target, int64_t want)
{
    attn_counter *c = count_texts(target ? p->tgt : p->src, p->count, ATTN_TOKENIZER_WORDS);
    attn_vocab *v = attn_vocab_build(c, seq_specials, 4, 2, 0);
    TK_CHECK(v && attn_vocab_size(v) == want, "Multi30k %s vocab %lld, want %lld", target ? "fr" : "en",
             (long long)attn_vocab_size(v), (long long)want);
    TK_CHECK(v && attn_vocab_find(v, "<eos>") == 3, "<eos> is id 3");
    attn_vocab_free(v);
    attn_counter_free(c);
}

static void test_multi30k_vocab(void)
{
    attn_text_pairs p;
    attn_status st = attn_pairs_load(&p, "data/multi30k/train.en.gz", "data/multi30k/train.fr.gz");
    TK_CHECK(st == ATTN_OK, "loading Multi30k train: %s", attn_last_error());
    if (st != ATTN_OK) return;
    check_multi30k_side(&p, false, 5898);
    check_multi30k_side(&p, true, 6434);
    attn_text_pairs_free(&p);
}

/* torchtext: sorted(counter.items(), key=lambda x: (-x[1], x[0])), cut to max_tokens -
 * len(specials) before the specials are taken out, then min_freq. */
static void test_rules(void)
{
    static const char *const words[] = {"b", "a", "c", "a", "b", "<unk>",   "\xc3\xa9",
                                        "Z", "a", "c", "z", "b", "\xc3\xa9"};
    attn_counter *c = attn_counter_new();
    TK_OK(attn_counter_add(c, words, 13));
    TK_CHECK(attn_counter_get(c, "a") == 3 && attn_counter_get(c, "nope") == 0, "counts");
    TK_CHECK(attn_counter_distinct(c) == 7 && attn_counter_total(c) == 13, "distinct/total");
    /* counts: a 3, b 3, c 2, e-acute 2, <unk> 1, Z 1, z 1 */
    attn_vocab *v = attn_vocab_build(c, imdb_specials, 2, 1, 0);
    static const char *const want[] = {"<unk>", "<pad>", "a", "b", "c", "\xc3\xa9", "Z", "z"};
    TK_CHECK(v && attn_vocab_size(v) == 8, "size %lld", (long long)attn_vocab_size(v));
    for (int i = 0; v && i < 8; i++)
        TK_CHECK(attn_vocab_token(v, i) && strcmp(attn_vocab_token(v, i), want[i]) == 0, "id %d: %s, want %s", i,
                 attn_vocab_token(v, i), want[i]);
    attn_vocab_free(v);

    v = attn_vocab_build(c, imdb_specials, 2, 2, 0); /* min_freq 2 */
    TK_CHECK(v && attn_vocab_size(v) == 6, "min_freq 2: size %lld", (long long)attn_vocab_size(v));
    attn_vocab_free(v);
    v = attn_vocab_build(c, imdb_specials, 2, 1, 7); /* keeps the top 5: a b c e <unk>(special) */
    TK_CHECK(v && attn_vocab_size(v) == 6 && attn_vocab_find(v, "Z") < 0 && attn_vocab_find(v, "\xc3\xa9") == 5,
             "max_size 7 (torchtext cuts before removing specials)");
    TK_CHECK(attn_vocab_id(v, "never") == 0 && attn_vocab_id(v, "Z") == 0, "unknown -> <unk>");
    int64_t ids[3];
    static const char *const sent[] = {"b", "q", "a"};
    TK_OK(attn_vocab_encode(v, ids, sent, 3));
    TK_CHECK(ids[0] == 3 && ids[1] == 0 && ids[2] == 2, "encode %lld %lld %lld", (long long)ids[0], (long long)ids[1],
             (long long)ids[2]);
    TK_OK(attn_vocab_set_unk(v, -1));
    TK_CHECK(attn_vocab_encode(v, ids, sent, 3) == ATTN_ERR_ARG && strstr(attn_last_error(), "\"q\""),
             "no unk: error names the token: %s", attn_last_error());
    attn_vocab_free(v);

    static const char *const dup[] = {"<unk>", "<unk>"};
    TK_CHECK(attn_vocab_build(c, dup, 2, 1, 0) == NULL && attn_last_status() == ATTN_ERR_ARG, "duplicate specials");
    TK_CHECK(attn_vocab_build(c, imdb_specials, 2, 1, 2) == NULL, "max_size leaves no room");
    attn_counter_free(c);
}

static void write_file(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(text, 1, len, f);
        fclose(f);
    }
}

static void test_file_errors(void)
{
    char path[64];
    temp_path(path, sizeof path);
    write_file(path, "a\nb\na\n", 6);
    TK_CHECK(attn_vocab_load(path) == NULL && attn_last_status() == ATTN_ERR_FORMAT &&
                 strstr(attn_last_error(), ":3") && strstr(attn_last_error(), path),
             "duplicate line: %s", attn_last_error());
    write_file(path, "a\n\xff\n", 4);
    TK_CHECK(attn_vocab_load(path) == NULL && strstr(attn_last_error(), "byte offset 2"), "bad UTF-8: %s",
             attn_last_error());
    write_file(path, "x\ny", 3); /* no final newline: still two tokens */
    attn_vocab *v = attn_vocab_load(path);
    TK_CHECK(v && attn_vocab_size(v) == 2 && attn_vocab_unk(v) == -1, "no final newline");
    attn_vocab_free(v);
    remove(path);
    TK_CHECK(attn_vocab_load("/nonexistent/vocab.txt") == NULL && attn_last_status() == ATTN_ERR_IO &&
                 strstr(attn_last_error(), "/nonexistent/vocab.txt"),
             "missing file: %s", attn_last_error());
    static const char *const nl[] = {"ok", "two\nlines"};
    v = attn_vocab_from_tokens(nl, 2);
    TK_CHECK(v && attn_vocab_save(v, path) == ATTN_ERR_ARG, "a newline cannot be saved");
    TK_CHECK(access(path, F_OK) != 0, "nothing left behind: %s", path);
    attn_vocab_free(v);
    static const char *const cr[] = {"ok", "carriage\r"};
    v = attn_vocab_from_tokens(cr, 2);
    TK_CHECK(v && attn_vocab_save(v, path) == ATTN_ERR_ARG && access(path, F_OK) != 0,
             "a carriage return cannot be saved either (load reads CRLF lines)");
    attn_vocab_free(v);
    write_file(path, "<unk>\r\nhello\r\nworld\r\n", 21);
    v = attn_vocab_load(path);
    TK_CHECK(v && attn_vocab_size(v) == 3 && attn_vocab_find(v, "hello") == 1 && attn_vocab_find(v, "world") == 2,
             "CRLF lines are read without their \\r: %s", v ? "" : attn_last_error());
    attn_vocab_free(v);
    remove(path);
}

/* Text that could not come back from a vocabulary file is refused where it enters: invalid
 * UTF-8 was counted, built and saved, and the saved file then failed to load; a NUL cut a
 * pushed token short; encode_texts kept the texts before a bad one. */
static void test_text_only(void)
{
    attn_counter *c = attn_counter_new();
    static const char *const bad[] = {"ok", "\xff\xfe"};
    TK_CHECK(attn_counter_add(c, bad, 2) == ATTN_ERR_FORMAT && attn_counter_get(c, "ok") == 1 &&
                 attn_counter_distinct(c) == 1,
             "a counter refuses invalid UTF-8: %s", attn_last_error());
    TK_CHECK(attn_counter_add(c, bad, -1) == ATTN_ERR_ARG, "a counter refuses n < 0");
    attn_counter_free(c);
    TK_CHECK(!attn_vocab_from_tokens(bad, 2) && attn_last_status() == ATTN_ERR_FORMAT,
             "a vocabulary refuses invalid UTF-8");
    static const char *const specials[] = {"<unk>", "\xc3"};
    attn_counter *d = attn_counter_new();
    TK_OK(attn_counter_add(d, bad, 1));
    TK_CHECK(!attn_vocab_build(d, specials, 2, 1, 0) && attn_last_status() == ATTN_ERR_FORMAT,
             "a vocabulary refuses an invalid special");
    attn_counter_free(d);
    attn_tokens t = {0};
    TK_CHECK(attn_tokens_push(&t, "a\0b", 3) == ATTN_ERR_FORMAT && t.count == 0, "a NUL inside a token is refused");
    TK_CHECK(attn_tokenize(&t, ATTN_TOKENIZER_BASIC_ENGLISH, "x a\0b", 5) == ATTN_ERR_FORMAT && t.count == 0 &&
                 strstr(attn_last_error(), "NUL byte at byte offset 3"),
             "so is a NUL in text to tokenize, before any token: %s", attn_last_error());
    TK_OK(attn_tokens_push(&t, "a", 1));
    attn_tokens_free(&t);
    static const char *const toks[] = {"<unk>", "a", "b"};
    attn_vocab *v = attn_vocab_from_tokens(toks, 3);
    attn_id_seqs s = {0};
    static const char *const texts[] = {"a b", "\xff"};
    TK_CHECK(attn_encode_texts(&s, v, ATTN_TOKENIZER_BASIC_ENGLISH, texts, 2) == ATTN_ERR_FORMAT && s.count == 0,
             "encode_texts keeps no text when one fails (count %lld)", (long long)s.count);
    TK_OK(attn_encode_texts(&s, v, ATTN_TOKENIZER_BASIC_ENGLISH, texts, 1));
    TK_CHECK(s.count == 1 && attn_id_seqs_len(&s, 0) == 2, "and all of them when none fails");
    attn_id_seqs_free(&s);
    attn_vocab_free(v);
}

int main(void)
{
    test_imdb_vocab();
    test_multi30k_vocab();
    test_rules();
    test_file_errors();
    test_text_only();
    return tk_finish("test_data_vocab");
}
