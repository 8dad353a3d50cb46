/* UTF-8 for the data layer: strict validation with the offending byte offset, decoding and
 * encoding of code points, the Unicode properties the tokenizers ask about (bisection in the
 * generated tables of unicode_tables.c) and Python's str.lower() / str.upper() case rules. */
#include "data_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- validation ---- */

static bool is_cont(unsigned char b)
{
    return (b & 0xC0) == 0x80;
}

/* Byte range allowed right after lead byte b (Python's strict decoder: no overlong forms, no
 * surrogates D800-DFFF, nothing above 10FFFF); the number of continuation bytes, or -1 when b
 * cannot start a sequence. */
static int lead_info(unsigned char b, unsigned char *lo, unsigned char *hi)
{
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 0;
    if (b >= 0xC2 && b <= 0xDF) return 1;
    if (b == 0xE0) *lo = 0xA0;
    if (b == 0xED) *hi = 0x9F;
    if (b >= 0xE0 && b <= 0xEF) return 2;
    if (b == 0xF0) *lo = 0x90;
    if (b == 0xF4) *hi = 0x8F;
    if (b >= 0xF0 && b <= 0xF4) return 3;
    return -1;
}

/* Offset of the start of the first invalid sequence (len if none); *why says what is wrong. */
static size_t invalid_at(const char *s, size_t len, const char **why)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        unsigned char lo, hi;
        int extra = lead_info(u[i], &lo, &hi);
        if (extra < 0) {
            *why = is_cont(u[i]) ? "a continuation byte where a character must start"
                                 : "a byte that never occurs in UTF-8 (0xC0, 0xC1, 0xF5-0xFF)";
            return i;
        }
        if (len - i <= (size_t)extra) {
            *why = "a character cut short by the end of the text";
            return i;
        }
        if (extra > 0 && (u[i + 1] < lo || u[i + 1] > hi)) {
            *why = "a bad second byte (overlong form, surrogate, above U+10FFFF or missing "
                   "continuation byte)";
            return i;
        }
        for (int k = 2; k <= extra; k++)
            if (!is_cont(u[i + k])) {
                *why = "a missing continuation byte (0x80-0xBF)";
                return i;
            }
        i += (size_t)extra + 1;
    }
    *why = "";
    return len;
}

attn_status attn_utf8_check(const char *s, size_t len, const char *name)
{
    if (!s && len) return attn__fail(ATTN_ERR_ARG, "attn_utf8_check: NULL text");
    const char *why;
    size_t at = invalid_at(s, len, &why);
    if (at == len) return ATTN_OK;
    return attn__fail(ATTN_ERR_FORMAT, "%s: invalid UTF-8 at byte offset %zu (byte 0x%02X: %s); expected UTF-8 text",
                      name ? name : "text", at, (unsigned char)s[at], why);
}

attn_status attn__text_check(const char *s, size_t len, const char *name)
{
    attn_status st = attn_utf8_check(s, len, name);
    const char *nul = st == ATTN_OK && len ? memchr(s, '\0', len) : NULL;
    if (nul)
        st = attn__fail(ATTN_ERR_FORMAT, "%s: a NUL byte at byte offset %zu; expected text", name ? name : "text",
                        (size_t)(nul - s));
    return st;
}

/* ---- decoding and encoding (valid text only) ---- */

uint32_t attn__utf8_next(const char *s, size_t *pos)
{
    const unsigned char *u = (const unsigned char *)s + *pos;
    if (u[0] < 0x80) {
        *pos += 1;
        return u[0];
    }
    if (u[0] < 0xE0) {
        *pos += 2;
        return ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F);
    }
    if (u[0] < 0xF0) {
        *pos += 3;
        return ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
    }
    *pos += 4;
    return ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) |
           (u[3] & 0x3F);
}

/* The code point that ends just before s[pos] (pos > 0); *start receives where it begins. */
static uint32_t utf8_prev(const char *s, size_t pos, size_t *start)
{
    size_t i = pos - 1;
    while (i > 0 && is_cont((unsigned char)s[i])) i--;
    *start = i;
    return attn__utf8_next(s, &i);
}

size_t attn__utf8_put(char *out, uint32_t cp)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- properties ---- */

/* The first of n entries (size bytes each, sorted and disjoint: the ranges and the case runs)
 * whose member `last`, last_at bytes into it, is >= cp; n when none */
static size_t first_ending_from(const void *entries, size_t n, size_t size, size_t last_at, uint32_t cp)
{
    const unsigned char *base = entries;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        uint32_t last;
        memcpy(&last, base + mid * size + last_at, sizeof last);
        if (last < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool in_ranges(const attn__cp_range *r, size_t n, uint32_t cp)
{
    const size_t i = first_ending_from(r, n, sizeof *r, offsetof(attn__cp_range, last), cp);
    return i < n && r[i].first <= cp;
}

bool attn__is_space(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return in_ranges(attn__space_ranges, attn__space_count, cp);
}

bool attn__is_word(uint32_t cp)
{
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    return in_ranges(attn__word_ranges, attn__word_count, cp);
}

bool attn__is_letter(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    return in_ranges(attn__letter_ranges, attn__letter_count, cp);
}

bool attn__is_number(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return in_ranges(attn__number_ranges, attn__number_count, cp);
}

bool attn__is_bpe_space(uint32_t cp)
{
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
    return in_ranges(attn__bpe_space_ranges, attn__bpe_space_count, cp);
}

/* cp through the case runs (unchanged when no run covers it). */
static uint32_t case_map(const attn__case_run *r, size_t n, uint32_t cp)
{
    const size_t i = first_ending_from(r, n, sizeof *r, offsetof(attn__case_run, last), cp);
    if (i < n && r[i].first <= cp && (cp - r[i].first) % r[i].step == 0) return (uint32_t)((int64_t)cp + r[i].delta);
    return cp;
}

/* ---- lowercase (str.lower) ---- */

#define CAPITAL_SIGMA 0x03A3
#define FINAL_SIGMA 0x03C2
#define CAPITAL_I_DOT 0x0130

static bool case_ignorable(uint32_t cp)
{
    return in_ranges(attn__case_ignorable_ranges, attn__case_ignorable_count, cp);
}

static bool cased(uint32_t cp)
{
    return in_ranges(attn__cased_ranges, attn__cased_count, cp);
}

/* CPython's handle_capital_sigma: the sigma at s[at..next) is final when a cased letter comes
 * before it and none after it, skipping case-ignorable characters both ways. */
static bool sigma_is_final(const char *s, size_t len, size_t at, size_t next)
{
    uint32_t c = 0;
    bool found = false;
    for (size_t j = at; j > 0 && !found;) {
        c = utf8_prev(s, j, &j);
        found = !case_ignorable(c);
    }
    if (!found || !cased(c)) return false;
    for (size_t k = next; k < len;) {
        c = attn__utf8_next(s, &k);
        if (!case_ignorable(c)) return !cased(c);
    }
    return true;
}

attn_status attn__lower_into(attn__buf *out, const char *s, size_t len)
{
    /* A lowercase is at most 1.5 times as long in UTF-8 (U+0130, U+023A: 2 bytes -> 3). */
    attn_status st = attn__buf_reserve(out, len + len / 2 + 4);
    if (st != ATTN_OK) return st;
    for (size_t i = 0; i < len;) {
        size_t at = i;
        uint32_t cp = attn__utf8_next(s, &i);
        if (cp < 0x80) {
            out->data[out->len++] = (char)(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
            continue;
        }
        if (cp == CAPITAL_I_DOT) {
            out->len += attn__utf8_put(out->data + out->len, 'i');
            out->len += attn__utf8_put(out->data + out->len, 0x0307);
            continue;
        }
        if (cp == CAPITAL_SIGMA && sigma_is_final(s, len, at, i))
            cp = FINAL_SIGMA;
        else
            cp = case_map(attn__lower_runs, attn__lower_count, cp);
        out->len += attn__utf8_put(out->data + out->len, cp);
    }
    out->data[out->len] = '\0';
    return ATTN_OK;
}

char *attn_utf8_lower(const char *s, size_t len)
{
    if (attn_utf8_check(s, len, "attn_utf8_lower") != ATTN_OK) return NULL;
    attn__buf b = {0};
    if (attn__lower_into(&b, s, len) != ATTN_OK) {
        attn__buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* ---- uppercase of one code point (str.upper) ---- */

attn_status attn__upper_into(attn__buf *out, uint32_t cp)
{
    attn_status st = attn__buf_reserve(out, 16);
    if (st != ATTN_OK) return st;
    for (size_t i = 0; i < attn__upper_special_count; i++)
        if (attn__upper_special[i].cp == cp)
            return attn__buf_append(out, attn__upper_special[i].utf8, strlen(attn__upper_special[i].utf8));
    cp = case_map(attn__upper_runs, attn__upper_count, cp);
    out->len += attn__utf8_put(out->data + out->len, cp);
    out->data[out->len] = '\0';
    return ATTN_OK;
}
