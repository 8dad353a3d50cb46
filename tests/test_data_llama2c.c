/* llama2.c's tokenizer.bin (attn_llama2c_vocab_*, attn_bpe_save_llama2c; attn_data.h):
 *   - the encoder against a reference written here as run.c's encode() reads (every adjacent pair
 *     rescanned after each merge, the first of the best score taken): 3,000 random texts over a
 *     vocabulary of random pieces and scores, with equal scores, equal pieces, pieces past a NUL and
 *     below -1e10, and texts of ASCII, multi-byte characters, stray continuation bytes and NULs;
 *   - attn's BPE written as a tokenizer.bin: the layout (BOS "\n<s>\n" at 1, byte b at 3 + b,
 *     the first two merges at 0 and 2, scores minus the rank, the header's longest), and run.c's
 *     encoding of ASCII text of single spaces with the dummy space gives attn's own ids in that
 *     layout (" " + text), for sentences without a quote before a letter;
 *   - decoding: BOS's following space dropped, "<0xHH>" pieces as their byte, NUL-cut pieces;
 *   - the file's bytes kept and written back byte for byte;
 *   - refusals naming what: fewer than 259 ids, a file that ends early, bytes past the last token,
 *     a token longer than the header's longest, a length past the file. */
#include "testkit.h"
#include "attn_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

/* ---- a tokenizer.bin in memory ---- */

typedef struct file {
    unsigned char *b;
    size_t n, cap;
} file;

static void put(file *f, const void *p, size_t n)
{
    if (f->n + n > f->cap) f->b = realloc(f->b, f->cap = 2 * (f->n + n) + 64);
    memcpy(f->b + f->n, p, n);
    f->n += n;
}

static void put_token(file *f, float score, const char *piece, int32_t len)
{
    put(f, &score, 4), put(f, &len, 4), put(f, piece, (size_t)len);
}

/* ---- the reference: run.c's encode as it reads, on C strings ---- */

typedef struct ref_vocab {
    int n;
    char **piece; /* NUL-terminated, as run.c keeps them */
    float *score;
} ref_vocab;

static int ref_lookup(const ref_vocab *v, const char *s)
{
    for (int i = 0; i < v->n; i++) /* equal pieces: the first id, as attn documents */
        if (!strcmp(v->piece[i], s)) return i;
    return -1;
}

static int ref_encode(const ref_vocab *v, const char *text, size_t len, int64_t *ids)
{
    int n = 0;
    char buf[512];
    ids[n++] = 1; /* BOS */
    if (len > 0) {
        const int space = ref_lookup(v, " ");
        ids[n++] = space >= 0 ? space : ' ' + 3;
    }
    for (size_t i = 0; i < len;) {
        size_t end = i + 1;
        while (end < len && end - i < 4 && ((unsigned char)text[end] & 0xC0) == 0x80) end++;
        memcpy(buf, text + i, end - i), buf[end - i] = '\0';
        const int id = memchr(text + i, '\0', end - i) ? -1 : ref_lookup(v, buf);
        if (id >= 0)
            ids[n++] = id;
        else
            for (size_t k = i; k < end; k++) ids[n++] = (unsigned char)text[k] + 3;
        i = end;
    }
    for (;;) {
        float best = -1e10f;
        int at = -1, best_id = -1;
        for (int i = 0; i + 1 < n; i++) {
            snprintf(buf, sizeof buf, "%s%s", v->piece[ids[i]], v->piece[ids[i + 1]]);
            const int id = ref_lookup(v, buf);
            if (id >= 0 && v->score[id] > best) best = v->score[id], best_id = id, at = i;
        }
        if (at < 0) break;
        ids[at] = best_id;
        memmove(ids + at + 1, ids + at + 2, sizeof *ids * (size_t)(n - at - 2));
        n--;
    }
    return n;
}

static uint64_t rng_state = 88172645463325252ull;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* Random pieces over a small alphabet (so that pairs join into pieces often) */
static void test_against_reference(void)
{
    static const char *const alphabet[] = {"a", "b", "c", " ", "\xc3\xa9", "\xe2\x82\xac", "\x80", "\0"};
    enum {
        V = 400
    };
    ref_vocab rv = {V, calloc(V, sizeof(char *)), calloc(V, sizeof(float))};
    file f = {0};
    int32_t longest = 16;
    put(&f, &longest, 4);
    for (int i = 0; i < V; i++) {
        char piece[17];
        int len = 0;
        if (i >= 3 && i < 259) { /* the bytes, as themselves */
            piece[0] = (char)(i - 3), len = 1;
        } else {
            const int parts = 1 + (int)(next_u32() % 4);
            for (int k = 0; k < parts; k++) {
                const char *a = alphabet[next_u32() % 8];
                const int al = *a ? (int)strlen(a) : 1;
                memcpy(piece + len, a, (size_t)al), len += al;
            }
        }
        const uint32_t r = next_u32() % 10;
        const float score = r == 0 ? -2e10f : r < 3 ? -5.0f : -(float)(next_u32() % 50); /* ties and unmergeables */
        put_token(&f, score, piece, len);
        piece[len] = '\0';
        rv.piece[i] = strdup(piece), rv.score[i] = score; /* strdup: cut at a NUL, as run.c */
    }
    attn_llama2c_vocab *v = attn_llama2c_vocab_read(f.b, f.n, V, "random vocabulary");
    TK_CHECK(v != NULL, "read: %s", attn_last_error());
    int differ = 0, texts = 0;
    for (int t = 0; v && t < 3000; t++, texts++) {
        char text[64];
        const size_t len = next_u32() % 40;
        for (size_t i = 0; i < len; i++) {
            const uint32_t r = next_u32() % 20;
            text[i] = r < 12 ? "abc "[r % 4] : r < 15 ? (char)0xC3 : r < 18 ? (char)0xA9 : r < 19 ? (char)0xE2 : '\0';
        }
        int64_t want[80], got[80];
        const int n_want = ref_encode(&rv, text, len, want);
        const int64_t n_got = attn_llama2c_encode(v, text, len, true, got);
        if (n_got != n_want || memcmp(got, want, sizeof *got * (size_t)n_want)) differ++;
    }
    TK_CHECK(differ == 0, "the heap encoder against run.c's rescanning loop: %d of %d texts differ", differ, texts);
    attn_llama2c_vocab_free(v);
    for (int i = 0; i < V; i++) free(rv.piece[i]);
    free(rv.piece), free(rv.score), free(f.b);
}

/* attn's BPE as a tokenizer.bin, read back */
static void test_bpe_layout(void)
{
    static const char corpus[] = "the cat sat on the mat. the dog sat on the log. a cat and a dog met on a mat. ";
    attn_bpe_trainer *tr = attn_bpe_trainer_new();
    for (int i = 0; tr && i < 20; i++) attn_bpe_trainer_add(tr, corpus, sizeof corpus - 1);
    attn_bpe *b = tr ? attn_bpe_trainer_finish(tr, 300) : NULL;
    attn_bpe_trainer_free(tr);
    TK_CHECK(b != NULL, "train: %s", attn_last_error());
    if (!b) return;
    const int64_t V = attn_bpe_vocab_size(b);
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer.bin", dir);
    TK_CHECK(attn_bpe_save_llama2c(b, path) == ATTN_OK, "save: %s", attn_last_error());
    int64_t *order = malloc(sizeof *order * (size_t)V), *inv = malloc(sizeof *inv * (size_t)V);
    TK_CHECK(attn_bpe_llama2c_order(b, order) == ATTN_OK, "order: %s", attn_last_error());
    for (int64_t i = 0; i < V; i++) inv[order[i]] = i;
    attn_llama2c_vocab *v = attn_llama2c_vocab_load(path, V);
    TK_CHECK(v != NULL, "load: %s", attn_last_error());
    if (v) {
        size_t len;
        const char *p = attn_llama2c_piece(v, 0, 1, &len);
        TK_CHECK(len == 5 && !memcmp(p, "\n<s>\n", 5), "BOS at 1");
        bool bytes = true;
        for (int c = 1; c < 256; c++)
            bytes = bytes && (p = attn_llama2c_piece(v, 0, 3 + c, &len)) && len == 1 && (unsigned char)*p == c;
        TK_CHECK(bytes && attn_llama2c_piece(v, 0, 3, &len) && len == 0,
                 "byte b at 3 + b (byte 0's piece is empty: run.c's pieces end at a NUL)");
        size_t l0, l2, m0, m2;
        const char *p0 = attn_llama2c_piece(v, 0, 0, &l0), *p2 = attn_llama2c_piece(v, 0, 2, &l2);
        const char *q0 = attn_bpe_token_bytes(b, 256, &m0), *q2 = attn_bpe_token_bytes(b, 257, &m2);
        TK_CHECK(l0 == m0 && l2 == m2 && !memcmp(p0, q0, l0) && !memcmp(p2, q2, l2), "the first two merges at 0 and 2");
        static const char *const sentences[] = {"the cat sat on the mat", "a dog met a cat", "on the log. the end",
                                                "cats and dogs", "xyz 123 the"};
        for (size_t k = 0; k < sizeof sentences / sizeof *sentences; k++) {
            char spaced[64];
            const size_t n = (size_t)snprintf(spaced, sizeof spaced, " %s", sentences[k]);
            int64_t mine[80], theirs[80];
            const int64_t n_mine = attn_bpe_encode(b, spaced, n, mine);
            const int64_t n_theirs = attn_llama2c_encode(v, sentences[k], n - 1, true, theirs);
            bool same = n_theirs == n_mine + 1 && theirs[0] == 1;
            for (int64_t i = 0; same && i < n_mine; i++) same = theirs[i + 1] == inv[mine[i]];
            TK_CHECK(same, "run.c's encoding of \"%s\" is attn's of \" %s\" (%lld and %lld ids)", sentences[k],
                     sentences[k], (long long)n_theirs, (long long)n_mine);
        }
    }
    attn_llama2c_vocab_free(v);
    free(order), free(inv);
    attn_bpe_free(b);
    remove(path);
}

static void test_decode_and_bytes(void)
{
    file f = {0};
    int32_t longest = 8;
    put(&f, &longest, 4);
    for (int i = 0; i < 259; i++) {
        char piece[8];
        const int len = i < 3 ? 3 : snprintf(piece, sizeof piece, "<0x%02X>", i - 3);
        put_token(&f, 0.0f, i < 3 ? "<s>" : piece, len);
    }
    put_token(&f, -1.0f, " hi", 3);
    put_token(&f, -2.0f, "a\0b", 3);
    put_token(&f, -3.0f, "<0xa", 4);
    attn_llama2c_vocab *v = attn_llama2c_vocab_read(f.b, f.n, 262, "decode");
    TK_CHECK(v != NULL, "read: %s", attn_last_error());
    if (v) {
        size_t len;
        const char *p = attn_llama2c_piece(v, 1, 259, &len);
        TK_CHECK(len == 2 && !memcmp(p, "hi", 2), "after BOS the leading space goes");
        p = attn_llama2c_piece(v, 7, 259, &len);
        TK_CHECK(len == 3 && !memcmp(p, " hi", 3), "elsewhere it stays");
        p = attn_llama2c_piece(v, 0, 3 + 0xC3, &len);
        TK_CHECK(len == 1 && (unsigned char)*p == 0xC3, "<0xC3> is the byte");
        p = attn_llama2c_piece(v, 0, 261, &len);
        TK_CHECK(len == 1 && *p == 0x0A, "<0xa is the byte 0x0A (one hex digit, as sscanf reads it)");
        p = attn_llama2c_piece(v, 0, 260, &len);
        TK_CHECK(len == 1 && *p == 'a', "a piece is cut at its NUL");
        TK_CHECK(!attn_llama2c_piece(v, 0, 262, &len) && attn_last_status() == ATTN_ERR_ARG,
                 "an id past the vocabulary");
        size_t n;
        const void *raw = attn_llama2c_vocab_bytes(v, &n);
        char path[128];
        snprintf(path, sizeof path, "%s/copy.bin", dir);
        TK_CHECK(raw && n == f.n && !memcmp(raw, f.b, n), "the file's bytes are kept");
        TK_CHECK(attn_llama2c_vocab_save(v, path) == ATTN_OK, "save: %s", attn_last_error());
        char *back = tk_read_text(path);
        TK_CHECK(back && !memcmp(back, f.b, f.n), "and written back byte for byte");
        free(back);
        remove(path);
        int64_t ids[8];
        TK_CHECK(attn_llama2c_encode(v, "", 0, true, ids) == 1 && ids[0] == 1, "empty text: BOS alone, no dummy space");
    }
    attn_llama2c_vocab_free(v);

    /* refusals */
    TK_CHECK(!attn_llama2c_vocab_read(f.b, f.n, 258, "small") && strstr(attn_last_error(), "259"), "258 ids: %s",
             attn_last_error());
    TK_CHECK(!attn_llama2c_vocab_read(f.b, f.n - 2, 262, "cut") && strstr(attn_last_error(), "left"), "cut: %s",
             attn_last_error());
    TK_CHECK(!attn_llama2c_vocab_read(f.b, f.n, 261, "extra") && strstr(attn_last_error(), "after"), "bytes after: %s",
             attn_last_error());
    TK_CHECK(!attn_llama2c_vocab_read(f.b, f.n, 300, "short") && strstr(attn_last_error(), "ends at token 262"),
             "too few tokens: %s", attn_last_error());
    const int32_t small = 2;
    memcpy(f.b, &small, 4);
    TK_CHECK(!attn_llama2c_vocab_read(f.b, f.n, 262, "longest") && strstr(attn_last_error(), "longest"),
             "a token past the header's longest: %s", attn_last_error());
    memcpy(f.b, &longest, 4);
    const int32_t huge = 0x7fffffff;
    memcpy(f.b + 4 + 4, &huge, 4);
    TK_CHECK(!attn_llama2c_vocab_read(f.b, f.n, 262, "huge") && strstr(attn_last_error(), "claims"),
             "a length past the file: %s", attn_last_error());
    free(f.b);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/attn-l2ctok-XXXXXX");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    test_against_reference();
    test_bpe_layout();
    test_decode_and_bytes();
    TK_CHECK(rmdir(dir) == 0, "the test left files in %s", dir);
    return tk_finish("test_data_llama2c");
}
