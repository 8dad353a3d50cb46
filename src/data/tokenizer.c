/* Token lists and the tokenizers: torchtext's basic_english, the seq2seq word tokenizer
 * (\w+|[^\w\s] on lowercased text), one token per code point, sacrebleu's 13a, and the
 * dispatch between them.
 *
 * basic_english in one pass. torchtext applies 12 regex substitutions in order to line.lower():
 *   1 ' -> " '  "   2 " -> ""   3 . -> " . "   4 <br /> -> " "   5 , -> " , "
 *   6-9 ( ) ! ? -> " ( " " ) " " ! " " ? "     10-11 ; : -> " "   12 \s+ -> " "
 * then str.split(). Every replacement other than rule 2 only adds spaces around the character
 * it keeps, and no replacement holds a character a later rule looks for, so the result is: in
 * the lowercased text with every " removed (rule 2 can join "<br" and " />", and rule 4 runs
 * after it), each "<br />" (leftmost first, no overlaps) and each ; : or whitespace separates
 * tokens, each of ' . , ( ) ! ? is a token by itself, and the rest joins into tokens. The " are
 * removed before looking for "<br />" because a match never spans an added space: rules 1 and 3
 * put spaces only next to the ' or . they keep, and "<br />" holds neither. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- token lists ---- */

/* Storage for one more token of len bytes; repoints items when the store moved. */
static attn_status tokens_reserve(attn_tokens *t, size_t len)
{
    if (t->count == t->cap_) {
        int64_t cap = t->cap_ ? t->cap_ * 2 : 64;
        const char **items = realloc(t->items, (size_t)cap * sizeof *items);
        if (items) t->items = items;
        size_t *offs = items ? realloc(t->offs_, (size_t)cap * sizeof *offs) : NULL;
        if (!offs) return attn__fail(ATTN_ERR_NOMEM, "tokens: cannot grow to %lld", (long long)cap);
        t->offs_ = offs;
        t->cap_ = cap;
    }
    attn__buf store = {.data = t->store_, .len = t->store_len_, .cap = t->store_cap_};
    attn_status st = attn__buf_reserve(&store, len + 1);
    if (st != ATTN_OK) return st;
    if (store.data != t->store_)
        for (int64_t i = 0; i < t->count; i++) t->items[i] = store.data + t->offs_[i];
    t->store_ = store.data;
    t->store_cap_ = store.cap;
    return ATTN_OK;
}

attn_status attn_tokens_push(attn_tokens *t, const char *s, size_t len)
{
    if (!t || (!s && len)) return attn__fail(ATTN_ERR_ARG, "attn_tokens_push: NULL argument");
    attn_status st = attn__text_check(s, len, "attn_tokens_push"); /* a NUL would cut the token */
    if (st == ATTN_OK) st = tokens_reserve(t, len);
    if (st != ATTN_OK) return st;
    char *dst = t->store_ + t->store_len_;
    if (len) memcpy(dst, s, len);
    dst[len] = '\0';
    t->offs_[t->count] = t->store_len_;
    t->items[t->count++] = dst;
    t->store_len_ += len + 1;
    return ATTN_OK;
}

void attn_tokens_clear(attn_tokens *t)
{
    if (!t) {
        attn__null_arg("attn_tokens_clear");
        return;
    }
    t->count = 0;
    t->store_len_ = 0;
}

void attn_tokens_free(attn_tokens *t)
{
    if (!t) return;
    free(t->items);
    free(t->store_);
    free(t->offs_);
    *t = (attn_tokens){0};
}

/* ---- the tokenizers (text already checked to be UTF-8) ---- */

/* s[*start..end) as a token when it is not empty; the next token starts at `next`. */
static attn_status flush(attn_tokens *out, const char *s, size_t *start, size_t end, size_t next)
{
    attn_status st = end > *start ? attn_tokens_push(out, s + *start, end - *start) : ATTN_OK;
    *start = next;
    return st;
}

/* Lowercases text into b and removes every '"' (basic_english rules 0 and 2). */
static attn_status lower_unquoted(attn__buf *b, const char *text, size_t len)
{
    attn_status st = attn__lower_into(b, text, len);
    if (st != ATTN_OK) return st;
    size_t n = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->data[i] != '"') b->data[n++] = b->data[i];
    b->len = n;
    b->data[n] = '\0';
    return ATTN_OK;
}

/* One step of a splitting rule: reads the code point at s[*i] (advancing *i past what it takes)
 * and flushes the tokens it ends (flush) */
typedef attn_status split_step(attn_tokens *out, const char *s, size_t len, size_t *start, size_t *i);

/* text lowercased (and with basic_english's '"' removed when unquote), split by step */
static attn_status split_lowered(attn_tokens *out, const char *text, size_t len, bool unquote, split_step *step)
{
    attn__buf b = {0};
    attn_status st = unquote ? lower_unquoted(&b, text, len) : attn__lower_into(&b, text, len);
    size_t start = 0;
    for (size_t i = 0; i < b.len && st == ATTN_OK;) st = step(out, b.data, b.len, &start, &i);
    if (st == ATTN_OK) st = flush(out, b.data, &start, b.len, b.len);
    attn__buf_free(&b);
    return st;
}

/* basic_english: "<br />" and ';', ':' and spaces separate; each of '.,()!? is a token */
static attn_status basic_english_step(attn_tokens *out, const char *s, size_t len, size_t *start, size_t *i)
{
    const size_t at = *i;
    if (s[at] == '<' && len - at >= 6 && memcmp(s + at, "<br />", 6) == 0) {
        *i += 6;
        return flush(out, s, start, at, *i);
    }
    const uint32_t cp = attn__utf8_next(s, i);
    if (cp && cp < 0x80 && strchr("'.,()!?", (int)cp)) {
        attn_status st = flush(out, s, start, at, at);
        return st == ATTN_OK ? flush(out, s, start, *i, *i) : st;
    }
    if (cp == ';' || cp == ':' || attn__is_space(cp)) return flush(out, s, start, at, *i);
    return ATTN_OK;
}

static attn_status basic_english(attn_tokens *out, const char *text, size_t len)
{
    return split_lowered(out, text, len, true, basic_english_step);
}

/* words: runs of word characters, and each other non-space character alone */
static attn_status words_step(attn_tokens *out, const char *s, size_t len, size_t *start, size_t *i)
{
    (void)len;
    const size_t at = *i;
    const uint32_t cp = attn__utf8_next(s, i);
    if (attn__is_word(cp)) return ATTN_OK;
    attn_status st = flush(out, s, start, at, at);
    return st == ATTN_OK ? flush(out, s, start, attn__is_space(cp) ? at : *i, *i) : st;
}

/* re.findall(r"\w+|[^\w\s]", text.strip().lower()); strip() does not change the matches. */
static attn_status words(attn_tokens *out, const char *text, size_t len)
{
    return split_lowered(out, text, len, false, words_step);
}

static attn_status chars(attn_tokens *out, const char *s, size_t len)
{
    attn_status st = ATTN_OK;
    for (size_t i = 0; i < len && st == ATTN_OK;) {
        size_t at = i;
        uint32_t cp = attn__utf8_next(s, &i);
        if (!attn__is_space(cp)) st = attn_tokens_push(out, s + at, i - at);
    }
    return st;
}

/* ---- 13a ----
 * 13a (sacrebleu tokenizer_13a.py) on a line: drop "<skipped>", drop "-\n", "\n" -> " "; when
 * the line has "&": &quot; &amp; &lt; &gt; -> " & < > (in that order); pad with a space on
 * each side; then the regex substitutions, in order,
 *   r1 ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "   (ASCII punctuation except ' - . ,)
 *   r2 ([^0-9])([\.,]) -> "\1 \2 "                 (. , not preceded by a digit)
 *   r3 ([\.,])([^0-9]) -> " \1 \2"                 (. , not followed by a digit)
 *   r4 ([0-9])(-) -> "\1 \2 "                      (- after a digit)
 * and str.split(). r2-r4 are emulated byte by byte: the characters they look for are ASCII,
 * so a multi-byte character can only stand in for [^0-9], and scanning it byte by byte gives
 * the same matches and the same output as scanning it as one code point. */

/* dst = src with every non-overlapping `from` (leftmost first) replaced by `to`. */
static attn_status replace_all(attn__buf *dst, const attn__buf *src, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to);
    dst->len = 0;
    attn_status st = attn__buf_reserve(dst, src->len);
    for (size_t i = 0; i < src->len && st == ATTN_OK;) {
        if (src->len - i >= nf && memcmp(src->data + i, from, nf) == 0) {
            st = attn__buf_append(dst, to, nt);
            i += nf;
        } else {
            st = attn__buf_append(dst, src->data + i, 1);
            i++;
        }
    }
    return st;
}

/* Applies the replacements in order, swapping the two buffers; the result ends in *a. */
static attn_status replace_seq(attn__buf *a, attn__buf *b, const char *const *pairs, int n)
{
    attn_status st = ATTN_OK;
    for (int k = 0; k < n && st == ATTN_OK; k++) {
        st = replace_all(b, a, pairs[2 * k], pairs[2 * k + 1]);
        attn__buf t = *a;
        *a = *b;
        *b = t;
    }
    return st;
}

static bool r1_class(unsigned char c)
{
    return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
           (c >= ':' && c <= '@') || c == '/';
}

static bool digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}
static bool dot_comma(unsigned char c)
{
    return c == '.' || c == ',';
}

/* One of r2-r4 as re.sub does it: left to right, a match consumes both characters. */
static attn_status regex_pass(attn__buf *dst, const attn__buf *src, int rule)
{
    dst->len = 0;
    attn_status st = attn__buf_reserve(dst, src->len * 2);
    const unsigned char *s = (const unsigned char *)src->data;
    for (size_t i = 0; i < src->len && st == ATTN_OK; i++) {
        unsigned char c = s[i], d = i + 1 < src->len ? s[i + 1] : 0;
        bool has_d = i + 1 < src->len;
        char out[4] = {(char)c, ' ', (char)d, ' '};
        if (rule == 2 && has_d && !digit(c) && dot_comma(d)) {
            st = attn__buf_append(dst, out, 4); /* "\1 \2 " */
            i++;
        } else if (rule == 3 && has_d && dot_comma(c) && !digit(d)) {
            char o3[4] = {' ', (char)c, ' ', (char)d}; /* " \1 \2" */
            st = attn__buf_append(dst, o3, 4);
            i++;
        } else if (rule == 4 && has_d && digit(c) && d == '-') {
            st = attn__buf_append(dst, out, 4);
            i++;
        } else {
            st = attn__buf_append(dst, out, 1);
        }
    }
    return st;
}

/* " " + a + " " with r1 applied, into b. */
static attn_status pad_and_r1(attn__buf *b, const attn__buf *a)
{
    b->len = 0;
    attn_status st = attn__buf_append(b, "   ", 3); /* the padding space through r1 */
    for (size_t i = 0; i < a->len && st == ATTN_OK; i++) {
        char c = a->data[i], spaced[3] = {' ', c, ' '};
        st = r1_class((unsigned char)c) ? attn__buf_append(b, spaced, 3) : attn__buf_append(b, &c, 1);
    }
    return st == ATTN_OK ? attn__buf_append(b, "   ", 3) : st;
}

static attn_status split_space(attn_tokens *out, const char *s, size_t len)
{
    attn_status st = ATTN_OK;
    size_t start = 0;
    for (size_t i = 0; i < len && st == ATTN_OK;) {
        size_t at = i;
        if (attn__is_space(attn__utf8_next(s, &i))) {
            if (at > start) st = attn_tokens_push(out, s + start, at - start);
            start = i;
        }
    }
    if (st == ATTN_OK && len > start) st = attn_tokens_push(out, s + start, len - start);
    return st;
}

/* sacrebleu's 13a tokenization of valid UTF-8 text[0..len), appended to out */
static attn_status tokenize_13a(attn_tokens *out, const char *text, size_t len)
{
    static const char *const cleanup[] = {"<skipped>", "", "-\n", "", "\n", " "};
    static const char *const entities[] = {"&quot;", "\"", "&amp;", "&", "&lt;", "<", "&gt;", ">"};
    attn__buf a = {0}, b = {0};
    attn_status st = attn__buf_append(&a, text, len);
    if (st == ATTN_OK) st = replace_seq(&a, &b, cleanup, 3);
    if (st == ATTN_OK && memchr(a.data, '&', a.len)) st = replace_seq(&a, &b, entities, 4);
    if (st == ATTN_OK) st = pad_and_r1(&b, &a);
    if (st == ATTN_OK) st = regex_pass(&a, &b, 2);
    if (st == ATTN_OK) st = regex_pass(&b, &a, 3);
    if (st == ATTN_OK) st = regex_pass(&a, &b, 4);
    if (st == ATTN_OK) st = split_space(out, a.data, a.len);
    attn__buf_free(&a);
    attn__buf_free(&b);
    return st;
}

/* ---- dispatch ---- */

static const struct {
    const char *name;
    attn_status (*split)(attn_tokens *out, const char *text, size_t len); /* text checked UTF-8 */
} tokenizers[] = {
    [ATTN_TOKENIZER_BASIC_ENGLISH] = {"basic_english", basic_english},
    [ATTN_TOKENIZER_WORDS] = {"words", words},
    [ATTN_TOKENIZER_CHARS] = {"chars", chars},
    [ATTN_TOKENIZER_13A] = {"13a", tokenize_13a},
};
#define N_TOKENIZERS ((int)(sizeof tokenizers / sizeof tokenizers[0]))

const char *attn_tokenizer_name(attn_tokenizer kind)
{
    return (int)kind >= 0 && (int)kind < N_TOKENIZERS ? tokenizers[kind].name : "unknown";
}

attn_status attn_tokenizer_parse(const char *name, attn_tokenizer *kind)
{
    if (!name || !kind) return attn__fail(ATTN_ERR_ARG, "attn_tokenizer_parse: name or kind is NULL");
    for (int k = 0; k < N_TOKENIZERS; k++)
        if (strcmp(name, tokenizers[k].name) == 0) {
            *kind = (attn_tokenizer)k;
            return ATTN_OK;
        }
    return attn__fail(ATTN_ERR_ARG, "attn_tokenizer_parse: \"%s\" is not basic_english, words, chars or 13a", name);
}

attn_status attn_tokenize(attn_tokens *out, attn_tokenizer kind, const char *text, size_t len)
{
    if (!out || (!text && len)) return attn__fail(ATTN_ERR_ARG, "attn_tokenize: NULL argument");
    if ((int)kind < 0 || (int)kind >= N_TOKENIZERS)
        return attn__fail(ATTN_ERR_ARG, "attn_tokenize: unknown tokenizer %d (expected 0-%d)", (int)kind,
                          N_TOKENIZERS - 1);
    attn_status st = attn__text_check(text, len, "text"); /* UTF-8, and no NUL: tokens are C strings */
    if (st != ATTN_OK) return st;
    int64_t count = out->count;
    size_t store_len = out->store_len_;
    st = tokenizers[kind].split(out, text, len);
    if (st != ATTN_OK) { /* leave out as it was */
        out->count = count;
        out->store_len_ = store_len;
    }
    return st;
}
