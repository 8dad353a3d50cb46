/* The byte-level BPE tokenizer (attn_bpe_*, attn_data.h) against what it did not choose:
 *   - the pre-split: GPT-2's own pattern run by Python's regex module (tests/golden/bpe.safetensors,
 *     make_golden_bpe.py: edge cases and reviews), every piece's end equal;
 *   - training: the merges of the script's naive trainer (every merge recounts every pair) from
 *     the same text, equal one for one and in order;
 *   - encoding: GPT-2's bpe() with those merges on held-out reviews, every id equal;
 *   - round trips: decode(encode(x)) == x for random bytes (NUL, invalid UTF-8, truncated
 *     sequences, surrogates and overlong forms), and for every file of the shipped data;
 *   - hostile merges (a repeat, an id not made yet, a negative id) refused; decode's room and its
 *     refusal of ids outside the vocabulary; <|endoftext|>'s text encodes as plain bytes. */
#include "testkit.h"
#include "attn_data.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint8_t *golden_bytes(attn_st_file *f, const char *name, int64_t *n)
{
    int64_t *v = attn_st_load_i64(f, name, n);
    TK_CHECK(v != NULL, "golden %s: %s", name, attn_last_error());
    if (!v) return NULL;
    uint8_t *b = malloc((size_t)*n + 1);
    for (int64_t i = 0; i < *n; i++) b[i] = (uint8_t)v[i];
    free(v);
    return b;
}

static void test_pieces(attn_st_file *f)
{
    int64_t n, n_ends;
    uint8_t *text = golden_bytes(f, "split_text", &n);
    int64_t *want = attn_st_load_i64(f, "split_ends", &n_ends);
    size_t *ends = malloc((size_t)n * sizeof *ends);
    if (!text || !want || !ends) return;
    int64_t got = attn_bpe_pieces((const char *)text, (size_t)n, ends), first_bad = -1;
    for (int64_t i = 0; i < got && i < n_ends && first_bad < 0; i++)
        if ((int64_t)ends[i] != want[i]) first_bad = i;
    TK_CHECK(got == n_ends && first_bad < 0,
             "pre-split: %lld pieces (GPT-2's pattern: %lld), first difference at piece %lld", (long long)got,
             (long long)n_ends, (long long)first_bad);
    free(text), free(want), free(ends);
}

static attn_bpe *test_training(attn_st_file *f)
{
    int64_t n, n_merges;
    uint8_t *text = golden_bytes(f, "train_text", &n);
    int64_t *want = attn_st_load_i64(f, "merges", &n_merges);
    const char *vs = attn_st_metadata(f, "vocab_size");
    attn_bpe_trainer *t = attn_bpe_trainer_new();
    TK_CHECK(text && want && vs && t && attn_bpe_trainer_add(t, (const char *)text, (size_t)n) == ATTN_OK,
             "trainer: %s", attn_last_error());
    attn_bpe *b = t && vs ? attn_bpe_trainer_finish(t, strtoll(vs, NULL, 10)) : NULL;
    TK_CHECK(b != NULL, "trainer_finish: %s", attn_last_error());
    if (b && want) {
        int64_t got_n, first_bad = -1;
        const int64_t *got = attn_bpe_merges(b, &got_n);
        for (int64_t i = 0; i < 2 * got_n && i < 2 * (n_merges / 2) && first_bad < 0; i++)
            if (got[i] != want[i]) first_bad = i / 2;
        TK_CHECK(2 * got_n == n_merges && first_bad < 0,
                 "merges: %lld (the naive trainer's: %lld), first difference at %lld", (long long)got_n,
                 (long long)(n_merges / 2), (long long)first_bad);
        TK_CHECK(attn_bpe_vocab_size(b) == 256 + got_n + 1 && attn_bpe_eot(b) == 256 + got_n,
                 "vocab_size = 256 + merges + 1, <|endoftext|> last");
    }
    attn_bpe_trainer_free(t);
    free(text), free(want);
    return b;
}

static void test_encoding(attn_st_file *f, const attn_bpe *b)
{
    int64_t n, n_ids;
    uint8_t *text = golden_bytes(f, "encode_text", &n);
    int64_t *want = attn_st_load_i64(f, "encode_ids", &n_ids);
    int64_t *ids = malloc((size_t)n * sizeof *ids);
    if (!text || !want || !ids) return;
    int64_t got = attn_bpe_encode(b, (const char *)text, (size_t)n, ids), first_bad = -1;
    for (int64_t i = 0; i < got && i < n_ids && first_bad < 0; i++)
        if (ids[i] != want[i]) first_bad = i;
    TK_CHECK(got == n_ids && first_bad < 0, "encode: %lld ids (GPT-2's bpe(): %lld), first difference at %lld",
             (long long)got, (long long)n_ids, (long long)first_bad);
    free(text), free(want), free(ids);
}

/* decode(encode(s)) == s, byte for byte */
static bool round_trip(const attn_bpe *b, const char *s, size_t n)
{
    int64_t *ids = malloc((n ? n : 1) * sizeof *ids);
    char *back = malloc(n + 1);
    int64_t k = ids ? attn_bpe_encode(b, s, n, ids) : -1;
    bool ok = k >= 0 && k <= (int64_t)n && attn_bpe_decode(b, ids, k, back, (int64_t)n) == (int64_t)n &&
              memcmp(back, s, n) == 0;
    for (int64_t i = 0; ok && i < k; i++) ok = ids[i] >= 0 && ids[i] < attn_bpe_eot(b);
    free(ids), free(back);
    return ok;
}

static void test_random_bytes(const attn_bpe *b)
{
    attn_rng rng;
    attn_rng_seed(&rng, 20261204);
    static const char *const nasty[] = {"\xC0\xAF",
                                        "\xED\xA0\x80",
                                        "\xF4\x90\x80\x80",
                                        "\xE2\x82",
                                        "\xF0\x9F\x98",
                                        "\x80\x80",
                                        "\xFF\xFE",
                                        "a\x00"
                                        "b",
                                        "' \xC3",
                                        "\xC3 '"};
    int bad = 0;
    for (size_t i = 0; i < sizeof nasty / sizeof *nasty; i++)
        bad += !round_trip(b, nasty[i], i == 7 ? 3 : strlen(nasty[i])); /* 7: a, NUL, b */
    char buf[512];
    for (int trial = 0; trial < 2000; trial++) {
        const size_t n = attn_rng_below(&rng, sizeof buf);
        for (size_t i = 0; i < n; i++) { /* bytes, biased to ASCII letters, spaces and lead bytes */
            uint32_t r = attn_rng_u32(&rng);
            buf[i] = (char)(r % 4 == 0 ? (uint32_t) "ab 'sx\n\t"[r / 4 % 8] : r % 4 == 1 ? 0xC0 + r / 4 % 64 : r / 4);
        }
        bad += !round_trip(b, buf, n);
    }
    TK_CHECK(bad == 0, "decode(encode(x)) == x for 2010 byte strings: %d differ", bad);
}

/* Every regular file under dir, round-tripped; *files and *bytes count them */
static int round_trip_tree(const attn_bpe *b, const char *dir, int64_t *files, int64_t *bytes)
{
    DIR *d = opendir(dir);
    if (!d) return 1;
    int bad = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            bad += round_trip_tree(b, path, files, bytes);
            continue;
        }
        char *text = tk_read_text(path);
        if (!text) {
            bad++;
            continue;
        }
        const size_t n = (size_t)st.st_size; /* the file's bytes, NULs and all */
        bad += !round_trip(b, text, n);
        ++*files, *bytes += (int64_t)n;
        free(text);
    }
    closedir(d);
    return bad;
}

static void test_shipped_data(const attn_bpe *b)
{
    int64_t files = 0, bytes = 0;
    int bad = round_trip_tree(b, "data", &files, &bytes);
    TK_CHECK(bad == 0 && files > 3000, "every file of data/ round-trips: %lld files, %lld bytes, %d differ",
             (long long)files, (long long)bytes, bad);
}

static void test_hostile(const attn_bpe *b)
{
    const int64_t dup[4] = {'a', 'b', 'a', 'b'}, ahead[2] = {'a', 256}, neg[2] = {-1, 'a'};
    const int64_t fine[4] = {'a', 'b', 256, 'c'};
    TK_CHECK(!attn_bpe_from_merges(dup, 2) && attn_last_status() == ATTN_ERR_FORMAT &&
                 strstr(attn_last_error(), "repeats"),
             "a repeated merge is refused: %s", attn_last_error());
    TK_CHECK(!attn_bpe_from_merges(ahead, 1) && attn_last_status() == ATTN_ERR_FORMAT &&
                 strstr(attn_last_error(), "not made before"),
             "a merge of an id not made yet is refused: %s", attn_last_error());
    TK_CHECK(!attn_bpe_from_merges(neg, 1) && attn_last_status() == ATTN_ERR_FORMAT, "a negative id is refused: %s",
             attn_last_error());
    TK_CHECK(!attn_bpe_from_merges(fine, -1) && attn_last_status() == ATTN_ERR_ARG, "a negative count is refused");
    attn_bpe *small = attn_bpe_from_merges(fine, 2);
    size_t len;
    const char *abc = small ? attn_bpe_token_bytes(small, 257, &len) : NULL;
    TK_CHECK(abc && len == 3 && !memcmp(abc, "abc", 3), "merge 1 of (ab, c) is the token \"abc\"");
    int64_t ids[16];
    TK_CHECK(small && attn_bpe_encode(small, "abcab", 5, ids) == 2 && ids[0] == 257 && ids[1] == 256,
             "\"abcab\" encodes to abc, ab");
    char out[8];
    const int64_t eot = small ? attn_bpe_eot(small) : 0, three[3] = {257, 256, 'z'};
    TK_CHECK(small && attn_bpe_decode(small, three, 3, out, 4) == 6 && !memcmp(out, "abc", 3),
             "decode into too little room: whole tokens that fit, the bytes needed returned");
    TK_CHECK(small && attn_bpe_decode(small, &eot, 1, out, 8) == 13, "<|endoftext|> decodes to its text");
    const int64_t past = eot + 1;
    TK_CHECK(small && attn_bpe_decode(small, &past, 1, out, 8) == -1 && strstr(attn_last_error(), "outside"),
             "an id past the vocabulary is refused: %s", attn_last_error());
    const char *eot_text = "<|endoftext|>";
    int64_t n = attn_bpe_encode(b, eot_text, strlen(eot_text), ids);
    bool no_eot = n > 0;
    for (int64_t i = 0; i < n; i++) no_eot = no_eot && ids[i] != attn_bpe_eot(b);
    TK_CHECK(no_eot, "the text <|endoftext|> encodes as ordinary bytes");
    attn_bpe_trainer *t = attn_bpe_trainer_new();
    TK_CHECK(t && !attn_bpe_trainer_finish(t, 256) && attn_last_status() == ATTN_ERR_ARG, "vocab_size 256 is refused");
    attn_bpe *empty = t ? attn_bpe_trainer_finish(t, 1000) : NULL;
    TK_CHECK(empty && attn_bpe_vocab_size(empty) == 257, "an empty corpus gives the bytes and <|endoftext|> alone");
    attn_bpe_free(empty);
    attn_bpe_trainer_free(t);
    attn_bpe_free(small);
}

int main(void)
{
    attn_st_file *f = tk_golden("bpe");
    if (f) {
        test_pieces(f);
        attn_bpe *b = test_training(f);
        if (b) {
            test_encoding(f, b);
            test_random_bytes(b);
            test_shipped_data(b);
            test_hostile(b);
        }
        attn_bpe_free(b);
        attn_st_close(f);
    }
    return tk_finish("test_data_bpe");
}
