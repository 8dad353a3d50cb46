/* The tokenizers (every attn_tokenizer kind), attn_utf8_check and attn_utf8_lower on arbitrary
 * bytes, and what the CLI does next with tokens: counting, a vocabulary, encoding, the
 * detokenizer and BLEU. Invariants: tokenize succeeds exactly when the text is UTF-8 without a
 * NUL byte (a token is a C string); tokens are
 * non-empty UTF-8 without spaces (basic_english and words) or one code point (chars); lowering
 * preserves validity; encoding maps every token into the vocabulary. */
#include "fuzz_common.h"

#include <stdlib.h>
#include <string.h>

static void use_tokens(const attn_tokens *t, attn_tokenizer kind)
{
    for (int64_t i = 0; i < t->count; i++) {
        const char *s = t->items[i];
        size_t n = strlen(s);
        fuzz_require(attn_utf8_check(s, n, "token") == ATTN_OK, "a token is not UTF-8");
        if (kind == ATTN_TOKENIZER_WORDS || kind == ATTN_TOKENIZER_BASIC_ENGLISH)
            fuzz_require(strchr(s, ' ') == NULL && strchr(s, '\n') == NULL, "a token holds a space");
    }
    attn_counter *c = attn_counter_new();
    fuzz_require(c && attn_counter_add(c, t->items, t->count) == ATTN_OK, "counter");
    fuzz_require(attn_counter_total(c) == t->count, "counter total");
    const char *specials[2] = {"<unk>", "<pad>"};
    attn_vocab *v = attn_vocab_build(c, specials, 2, 1, 0);
    fuzz_require(v != NULL, "vocabulary");
    int64_t *ids = malloc((size_t)(t->count + 1) * sizeof *ids);
    fuzz_require(ids && attn_vocab_encode(v, ids, t->items, t->count) == ATTN_OK, "encode");
    for (int64_t i = 0; i < t->count; i++)
        fuzz_require(ids[i] >= 0 && ids[i] < attn_vocab_size(v) && !strcmp(attn_vocab_token(v, ids[i]), t->items[i]),
                     "a token does not map back to itself");
    free(ids);
    attn_vocab_free(v);
    attn_counter_free(c);
    if (kind == ATTN_TOKENIZER_WORDS) {
        char *d = attn_detokenize(t->items, t->count);
        fuzz_require(d != NULL, "detokenize");
        fuzz_require(attn_utf8_check(d, strlen(d), "detokenized") == ATTN_OK, "detokenized text is not UTF-8");
        free(d);
        attn_bleu_d2l(t->items, t->count, t->items, t->count, 4);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const bool valid = attn_utf8_check(text, size, "fuzz") == ATTN_OK;
    char *lower = attn_utf8_lower(text, size);
    fuzz_require((lower != NULL) == valid, "attn_utf8_lower accepts exactly UTF-8");
    if (lower) fuzz_require(attn_utf8_check(lower, strlen(lower), "lower") == ATTN_OK, "lower is not UTF-8");
    free(lower);
    for (int kind = ATTN_TOKENIZER_BASIC_ENGLISH; kind <= ATTN_TOKENIZER_13A; kind++) {
        attn_tokens t = {0};
        attn_status st = attn_tokenize(&t, (attn_tokenizer)kind, text, size);
        fuzz_require((st == ATTN_OK) == (valid && !memchr(text, '\0', size)),
                     "tokenize succeeds exactly on UTF-8 without NUL");
        fuzz_require(st == ATTN_OK || t.count == 0, "a failed tokenize left tokens");
        if (st == ATTN_OK) use_tokens(&t, (attn_tokenizer)kind);
        attn_tokens_free(&t);
    }
    if (valid && !memchr(data, 0, size)) { /* BLEU takes NUL-terminated strings */
        char *s = malloc(size + 1);
        fuzz_require(s != NULL, "malloc");
        memcpy(s, data, size);
        s[size] = '\0';
        attn_bleu_stats b = {0};
        fuzz_require(attn_bleu_add(&b, s, s) == ATTN_OK, "BLEU of a UTF-8 text with itself");
        double score = attn_bleu_score(&b, NULL, NULL);
        fuzz_require(score >= 0.0 && score <= 100.0, "BLEU outside [0, 100]");
        free(s);
    }
    return 0;
}
