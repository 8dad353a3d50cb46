/* Tokenizers, case rules and the detokenizer against Python: tests/data/tokenizer_cases.h holds
 * tricky strings (<br />, quotes, punctuation, numbers, apostrophes, Unicode whitespace, Greek
 * final sigma, U+0130, CJK, emoji, French) with the tokens Python's reference code gives
 * (written by tests/data/make_tokenizer_cases.py), and CRC-32s of str.lower(), str.upper(), \w
 * and \s over every code point. Also: invalid UTF-8 is an error naming the byte offset, and a
 * failed call leaves the token list unchanged. */
#include "testkit.h"
#include "data/data_internal.h"
#include "data/tokenizer_cases.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define N_CASES (sizeof tok_cases / sizeof tok_cases[0])
#define N_DETOK (sizeof detok_cases / sizeof detok_cases[0])

/* Splits a \037-joined list (see the header) into toks. */
static void split_expected(attn_tokens *toks, const char *joined)
{
    attn_tokens_clear(toks);
    for (const char *p = joined; *p;) {
        const char *end = strchr(p, '\037');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        attn_tokens_push(toks, p, n);
        p += n + (end ? 1 : 0);
    }
}

static bool same_tokens(const attn_tokens *a, const attn_tokens *b)
{
    if (a->count != b->count) return false;
    for (int64_t i = 0; i < a->count; i++)
        if (strcmp(a->items[i], b->items[i]) != 0) return false;
    return true;
}

static void print_tokens(const char *label, const attn_tokens *t)
{
    fprintf(stderr, "  %s (%lld):", label, (long long)t->count);
    for (int64_t i = 0; i < t->count; i++) fprintf(stderr, " [%s]", t->items[i]);
    fputc('\n', stderr);
}

static void check_kind(attn_tokenizer kind, size_t c, const char *expected)
{
    attn_tokens got = {0}, want = {0};
    const char *text = tok_cases[c].text;
    TK_OK(attn_tokenize(&got, kind, text, strlen(text)));
    split_expected(&want, expected);
    bool ok = same_tokens(&got, &want);
    TK_CHECK(ok, "case %zu, tokenizer %s: tokens differ from Python's", c, attn_tokenizer_name(kind));
    if (!ok) {
        print_tokens("got", &got);
        print_tokens("want", &want);
    }
    attn_tokens_free(&got);
    attn_tokens_free(&want);
}

static void test_cases(void)
{
    for (size_t c = 0; c < N_CASES; c++) {
        const tok_case *t = &tok_cases[c];
        char *lower = attn_utf8_lower(t->text, strlen(t->text));
        TK_CHECK(lower && strcmp(lower, t->lower) == 0, "case %zu: lower \"%s\", want \"%s\"", c,
                 lower ? lower : "(NULL)", t->lower);
        free(lower);
        check_kind(ATTN_TOKENIZER_BASIC_ENGLISH, c, t->basic_english);
        check_kind(ATTN_TOKENIZER_WORDS, c, t->words);
        check_kind(ATTN_TOKENIZER_CHARS, c, t->chars);
        check_kind(ATTN_TOKENIZER_13A, c, t->t13a);
    }
}

static void test_detokenize(void)
{
    attn_tokens toks = {0};
    for (size_t c = 0; c < N_DETOK; c++) {
        split_expected(&toks, detok_cases[c].tokens);
        char *s = attn_detokenize(toks.items, toks.count);
        TK_CHECK(s && strcmp(s, detok_cases[c].text) == 0, "detok case %zu: \"%s\", want \"%s\"", c, s ? s : "(NULL)",
                 detok_cases[c].text);
        free(s);
    }
    attn_tokens_free(&toks);
}

/* Every code point (no surrogates) through lower, upper, \w and \s, CRC-32 as Python's. */
static void test_exhaustive(void)
{
    uLong crc_lower = crc32(0L, Z_NULL, 0), crc_upper = crc_lower, crc_word = crc_lower;
    uLong crc_space = crc_lower;
    attn__buf up = {0};
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        char s[4];
        size_t n = attn__utf8_put(s, cp);
        char *lower = attn_utf8_lower(s, n);
        if (!lower) break;
        crc_lower = crc32(crc_lower, (const Bytef *)lower, (uInt)strlen(lower) + (cp == 0));
        free(lower);
        up.len = 0;
        attn__upper_into(&up, cp);
        crc_upper = crc32(crc_upper, (const Bytef *)up.data, (uInt)up.len);
        unsigned char w = attn__is_word(cp), sp = attn__is_space(cp);
        crc_word = crc32(crc_word, &w, 1);
        crc_space = crc32(crc_space, &sp, 1);
    }
    attn__buf_free(&up);
    TK_CHECK(crc_lower == CRC_ALL_LOWER, "str.lower over all code points: crc %08lx, want %08x", crc_lower,
             CRC_ALL_LOWER);
    TK_CHECK(crc_upper == CRC_ALL_UPPER, "str.upper over all code points: crc %08lx, want %08x", crc_upper,
             CRC_ALL_UPPER);
    TK_CHECK(crc_word == CRC_ALL_WORD, "\\w over all code points: crc %08lx, want %08x", crc_word, CRC_ALL_WORD);
    TK_CHECK(crc_space == CRC_ALL_SPACE, "\\s over all code points: crc %08lx, want %08x", crc_space, CRC_ALL_SPACE);
}

/* Invalid UTF-8: ATTN_ERR_FORMAT with the offset of the bad sequence, tokens untouched. */
static void test_invalid_utf8(void)
{
    static const struct {
        const char *text;
        size_t len, offset;
    } bad[] = {
        {"ab\xC3\x28", 4, 2},       /* missing continuation */
        {"abc\xFF", 4, 3},          /* never valid */
        {"\x80x", 2, 0},            /* stray continuation */
        {"x\xC0\xAF", 3, 1},        /* overlong '/' */
        {"xy\xE0\x80\xAF", 5, 2},   /* overlong 3-byte */
        {"\xED\xA0\x80", 3, 0},     /* surrogate U+D800 */
        {"ok \xE2\x82", 5, 3},      /* cut short at the end */
        {"\xF4\x90\x80\x80", 4, 0}, /* above U+10FFFF */
        {"caf\xE9 latin-1", 12, 3}, /* Windows-1252 e-acute */
    };
    attn_tokens toks = {0};
    attn_tokens_push(&toks, "keep", 4);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int kind = 0; kind < 4; kind++) {
            attn_status st = attn_tokenize(&toks, (attn_tokenizer)kind, bad[i].text, bad[i].len);
            char want[64];
            snprintf(want, sizeof want, "byte offset %zu ", bad[i].offset);
            TK_CHECK(st == ATTN_ERR_FORMAT && strstr(attn_last_error(), want),
                     "bad UTF-8 %zu (%s): status %d, message \"%s\", want \"%s\"", i,
                     attn_tokenizer_name((attn_tokenizer)kind), (int)st, attn_last_error(), want);
        }
        TK_CHECK(attn_utf8_lower(bad[i].text, bad[i].len) == NULL, "lower of bad UTF-8 %zu", i);
    }
    TK_CHECK(toks.count == 1 && strcmp(toks.items[0], "keep") == 0, "tokens changed by failures");
    TK_CHECK(attn_utf8_check("\xF4\x8F\xBF\xBF\xEF\xBF\xBF", 7, "max") == ATTN_OK, "U+10FFFF and U+FFFF are valid");
    attn_tokens_free(&toks);
}

/* Appending, a long text (pointers survive the store moving), names, bad kinds. */
static void test_tokens_api(void)
{
    attn_tokens t = {0};
    TK_OK(attn_tokenize(&t, ATTN_TOKENIZER_BASIC_ENGLISH, "One two.", 8));
    TK_OK(attn_tokenize(&t, ATTN_TOKENIZER_WORDS, "l'eau", 5));
    static const char *want[] = {"one", "two", ".", "l", "'", "eau"};
    TK_CHECK(t.count == 6, "appended count %lld", (long long)t.count);
    for (int i = 0; i < 6 && i < t.count; i++)
        TK_CHECK(strcmp(t.items[i], want[i]) == 0, "token %d: %s", i, t.items[i]);

    size_t n = 1 << 20; /* a 1 MB review */
    char *big = malloc(n + 1);
    for (size_t i = 0; i < n; i++) big[i] = "word, "[i % 6];
    big[n] = '\0';
    attn_tokens_clear(&t);
    TK_OK(attn_tokenize(&t, ATTN_TOKENIZER_BASIC_ENGLISH, big, n));
    int64_t want_count = 2 * (int64_t)(n / 6) + 1; /* n % 6 == 4: a last "word" */
    TK_CHECK(n % 6 == 4 && t.count == want_count, "1 MB text: %lld tokens, want %lld", (long long)t.count,
             (long long)want_count);
    TK_CHECK(t.count > 1 && strcmp(t.items[t.count - 1], "word") == 0 && strcmp(t.items[t.count - 2], ",") == 0,
             "1 MB text: last tokens");
    free(big);

    attn_tokenizer kind = ATTN_TOKENIZER_CHARS;
    TK_CHECK(attn_tokenizer_parse("basic_english", &kind) == ATTN_OK && kind == ATTN_TOKENIZER_BASIC_ENGLISH, "name");
    TK_CHECK(attn_tokenizer_parse("13a", &kind) == ATTN_OK && kind == ATTN_TOKENIZER_13A, "name 13a");
    TK_CHECK(attn_tokenizer_parse("chars", &kind) == ATTN_OK && kind == ATTN_TOKENIZER_CHARS, "checked: chars");
    TK_CHECK(attn_tokenizer_parse("bpe", &kind) == ATTN_ERR_ARG && kind == ATTN_TOKENIZER_CHARS &&
                 strstr(attn_last_error(), "\"bpe\" is not basic_english, words, chars or 13a"),
             "checked: an unknown name refused, kind untouched (%s)", attn_last_error());
    TK_CHECK(attn_tokenize(&t, (attn_tokenizer)9, "x", 1) == ATTN_ERR_ARG, "unknown kind");
    attn_tokens_free(&t);
}

int main(void)
{
    test_cases();
    test_detokenize();
    test_exhaustive();
    test_invalid_utf8();
    test_tokens_api();
    return tk_finish("test_data_tokenizer");
}
