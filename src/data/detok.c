/* The detokenizer of the Multi30k PyTorch anchor (shared/bench/multi30k_transformer_torch.py),
 * which turns word-tokenizer output back into a sentence for sacrebleu-style scoring:
 *   s = " ".join(tokens)
 *   s = re.sub(r" ([.,!?;:)\]}%])", r"\1", s)   # no space before closing punctuation
 *   s = re.sub(r"([(\[{]) ", r"\1", s)           # no space after opening brackets
 *   s = re.sub(r" ?' ?", "'", s)                 # l ' herbe -> l'herbe
 *   s = re.sub(r" ?- ?", "-", s)                 # tee - shirt -> tee-shirt
 *   s = re.sub(r'" (.*?) "', r'"\1"', s)
 *   s = s[0].upper() + s[1:]
 * Each substitution is one pass below that scans as re.sub does (leftmost match first, a match
 * consumes its characters). */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

static bool closing(char c)
{
    return c && strchr(".,!?;:)]}%", c);
}
static bool opening(char c)
{
    return c && strchr("([{", c);
}

static attn_status join(attn__buf *out, const char *const *tokens, int64_t n)
{
    attn_status st = attn__buf_reserve(out, 0);
    for (int64_t i = 0; i < n && st == ATTN_OK; i++) {
        if (!tokens[i]) return attn__fail(ATTN_ERR_ARG, "attn_detokenize: token %lld is NULL", (long long)i);
        if (i > 0) st = attn__buf_append(out, " ", 1);
        if (st == ATTN_OK) st = attn__buf_append(out, tokens[i], strlen(tokens[i]));
    }
    return st;
}

/* Rules 1 and 2: a space is dropped when a closing mark follows it (rule 1), or, on rule 1's
 * output, when an opening bracket precedes it (rule 2). */
static attn_status drop_spaces(attn__buf *out, const attn__buf *in, bool before_closing)
{
    attn_status st = attn__buf_reserve(out, in->len);
    for (size_t i = 0; i < in->len && st == ATTN_OK; i++) {
        const char *s = in->data;
        bool drop = s[i] == ' ' && (before_closing ? i + 1 < in->len && closing(s[i + 1]) : i > 0 && opening(s[i - 1]));
        if (!drop) st = attn__buf_append(out, s + i, 1);
    }
    return st;
}

/* re.sub(" ?c ?", "c"): c absorbs one space on each side. */
static attn_status glue(attn__buf *out, const attn__buf *in, char c)
{
    attn_status st = attn__buf_reserve(out, in->len);
    const char *s = in->data;
    for (size_t i = 0; i < in->len && st == ATTN_OK;) {
        bool lead = s[i] == ' ' && i + 1 < in->len && s[i + 1] == c;
        if (lead || s[i] == c) {
            i += lead ? 2 : 1;
            st = attn__buf_append(out, &c, 1);
            if (i < in->len && s[i] == ' ') i++;
        } else {
            st = attn__buf_append(out, s + i++, 1);
        }
    }
    return st;
}

/* Where the shortest ' "' closing a '" ' opened at `from` starts, or 0 when none does before
 * a newline ('.' does not match "\n"). */
static size_t quote_end(const char *s, size_t len, size_t from)
{
    for (size_t j = from; j + 1 < len && s[j] != '\n'; j++)
        if (s[j] == ' ' && s[j + 1] == '"') return j;
    return 0;
}

/* re.sub(r'" (.*?) "', r'"\1"') */
static attn_status quotes(attn__buf *out, const attn__buf *in)
{
    attn_status st = attn__buf_reserve(out, in->len);
    const char *s = in->data;
    for (size_t i = 0; i < in->len && st == ATTN_OK;) {
        size_t j = s[i] == '"' && i + 1 < in->len && s[i + 1] == ' ' ? quote_end(s, in->len, i + 2) : 0;
        if (!j) {
            st = attn__buf_append(out, s + i++, 1);
            continue;
        }
        st = attn__buf_append(out, "\"", 1);
        if (st == ATTN_OK) st = attn__buf_append(out, s + i + 2, j - (i + 2));
        if (st == ATTN_OK) st = attn__buf_append(out, "\"", 1);
        i = j + 2;
    }
    return st;
}

/* s[0].upper() + s[1:] */
static attn_status capitalise(attn__buf *out, const attn__buf *in)
{
    if (in->len == 0) return attn__buf_append(out, "", 0);
    size_t i = 0;
    uint32_t cp = attn__utf8_next(in->data, &i);
    attn_status st = attn__upper_into(out, cp);
    return st == ATTN_OK ? attn__buf_append(out, in->data + i, in->len - i) : st;
}

char *attn_detokenize(const char *const *tokens, int64_t n)
{
    if ((!tokens && n) || n < 0) return attn__fail_null(ATTN_ERR_ARG, "attn_detokenize: bad token list");
    attn__buf a = {0}, b = {0};
    attn_status st = join(&a, tokens, n);
    if (st == ATTN_OK) st = attn_utf8_check(a.data, a.len, "attn_detokenize tokens");
    for (int pass = 0; pass < 5 && st == ATTN_OK; pass++) {
        b.len = 0;
        switch (pass) {
        case 0:
            st = drop_spaces(&b, &a, true);
            break;
        case 1:
            st = drop_spaces(&b, &a, false);
            break;
        case 2:
            st = glue(&b, &a, '\'');
            break;
        case 3:
            st = glue(&b, &a, '-');
            break;
        case 4:
            st = quotes(&b, &a);
            break;
        }
        attn__buf t = a;
        a = b;
        b = t;
    }
    if (st == ATTN_OK) {
        b.len = 0;
        st = capitalise(&b, &a);
    }
    attn__buf_free(&a);
    if (st != ATTN_OK) attn__buf_free(&b);
    return st == ATTN_OK ? b.data : NULL;
}
