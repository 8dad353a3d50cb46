/* A validating JSON parser (RFC 8259) for safetensors headers: recursive descent over the
 * grammar, every value checked, nothing read outside text[0..len). Strings are decoded (escapes,
 * surrogate pairs) into NUL-terminated copies; numbers are checked against the grammar and kept
 * as the text they are, so that no value depends on the C locale or on strtod's rounding. */
#include "json_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json_reader {
    const char *text;
    size_t len, at;
    char *why;
    size_t why_len;
    bool failed;
} json_reader;

static attn__json *parse_value(json_reader *r, int depth);

__attribute__((format(printf, 2, 3))) static void fail(json_reader *r, const char *fmt, ...)
{
    if (r->failed) return; /* the first problem is the one to report */
    r->failed = true;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->why, r->why_len, "%s at byte %zu", what, r->at);
}

static void skip_space(json_reader *r)
{
    while (r->at < r->len) {
        const char c = r->text[r->at];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        r->at++;
    }
}

static int peek(const json_reader *r)
{
    return r->at < r->len ? (unsigned char)r->text[r->at] : -1;
}

static attn__json *new_value(json_reader *r, attn__json_kind kind)
{
    attn__json *v = calloc(1, sizeof *v);
    if (!v)
        fail(r, "out of memory");
    else
        v->kind = kind;
    return v;
}

/* ---- strings ---- */

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The 4 hex digits after "\u" (r->at is at the 'u'). */
static long read_hex4(json_reader *r)
{
    if (r->len - r->at < 5) {
        fail(r, "a \\u escape without 4 hex digits");
        return -1;
    }
    long cp = 0;
    for (int i = 1; i <= 4; i++) {
        const int d = hex_digit((unsigned char)r->text[r->at + i]);
        if (d < 0) {
            fail(r, "a \\u escape without 4 hex digits");
            return -1;
        }
        cp = cp << 4 | d;
    }
    r->at += 5;
    return cp;
}

static size_t put_utf8(char *out, unsigned long cp)
{
    if (cp < 0x80) return out[0] = (char)cp, 1;
    if (cp < 0x800) return out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), 2;
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* One escape (r->at is just past the backslash) decoded into out; its byte count, 0 on error. */
static size_t read_escape(json_reader *r, char *out)
{
    static const char plain[] = "\"\\/bfnrt", decoded[] = "\"\\/\b\f\n\r\t";
    const int c = peek(r);
    const char *hit = c > 0 ? strchr(plain, c) : NULL;
    if (hit) {
        r->at++;
        out[0] = decoded[hit - plain];
        return 1;
    }
    if (c != 'u') {
        fail(r, "an unknown escape in a string");
        return 0;
    }
    long cp = read_hex4(r);
    if (cp < 0) return 0;
    if (cp >= 0xdc00 && cp <= 0xdfff) {
        fail(r, "a lone low surrogate in a string");
        return 0;
    }
    if (cp >= 0xd800 && cp <= 0xdbff) { /* a high surrogate: its low half must follow */
        if (r->len - r->at < 2 || r->text[r->at] != '\\' || r->text[r->at + 1] != 'u') {
            fail(r, "a lone high surrogate in a string");
            return 0;
        }
        r->at++;
        const long low = read_hex4(r);
        if (low < 0) return 0;
        if (low < 0xdc00 || low > 0xdfff) {
            fail(r, "a lone high surrogate in a string");
            return 0;
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (cp == 0) {
        fail(r, "\\u0000 in a string (names and values are text without NUL)");
        return 0;
    }
    return put_utf8(out, (unsigned long)cp);
}

/* A string (r->at at its opening quote) decoded into a malloc'd copy. Escapes never decode to
 * more bytes than they take, so the raw length bounds the copy. The bytes are UTF-8 already
 * (the caller checks the whole text first). */
static char *parse_string(json_reader *r)
{
    const size_t start = ++r->at;
    size_t end = start;
    while (end < r->len && r->text[end] != '"') end += r->text[end] == '\\' ? 2 : 1;
    if (end >= r->len) {
        fail(r, "a string without its closing quote");
        return NULL;
    }
    char *out = malloc(end - start + 1);
    if (!out) {
        fail(r, "out of memory");
        return NULL;
    }
    size_t n = 0;
    while (r->at < end) {
        const unsigned char c = (unsigned char)r->text[r->at];
        if (c < 0x20) {
            fail(r, "a control character inside a string");
            break;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            r->at++;
            continue;
        }
        r->at++;
        const size_t k = read_escape(r, out + n);
        if (!k) break;
        n += k;
    }
    if (r->failed) {
        free(out);
        return NULL;
    }
    r->at = end + 1;
    out[n] = '\0';
    return out;
}

/* ---- numbers and literals ---- */

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static attn__json *parse_number(json_reader *r)
{
    const size_t start = r->at;
    if (peek(r) == '-') r->at++;
    if (peek(r) == '0') {
        r->at++;
    } else if (is_digit(peek(r))) {
        while (is_digit(peek(r))) r->at++;
    } else {
        {
            fail(r, "a number without digits");
            return NULL;
        }
    }
    if (peek(r) == '.') {
        r->at++;
        if (!is_digit(peek(r))) {
            fail(r, "a number without digits after its '.'");
            return NULL;
        }
        while (is_digit(peek(r))) r->at++;
    }
    if (peek(r) == 'e' || peek(r) == 'E') {
        r->at++;
        if (peek(r) == '+' || peek(r) == '-') r->at++;
        if (!is_digit(peek(r))) {
            fail(r, "a number without digits in its exponent");
            return NULL;
        }
        while (is_digit(peek(r))) r->at++;
    }
    attn__json *v = new_value(r, ATTN__JSON_NUMBER);
    if (v) {
        v->number = r->text + start;
        v->number_len = r->at - start;
    }
    return v;
}

static attn__json *parse_literal(json_reader *r)
{
    static const struct {
        const char *word;
        attn__json_kind kind;
        bool value;
    } words[] = {{"true", ATTN__JSON_BOOL, true}, {"false", ATTN__JSON_BOOL, false}, {"null", ATTN__JSON_NULL, false}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        const size_t n = strlen(words[i].word);
        if (r->len - r->at >= n && !memcmp(r->text + r->at, words[i].word, n)) {
            r->at += n;
            attn__json *v = new_value(r, words[i].kind);
            if (v) v->boolean = words[i].value;
            return v;
        }
    }
    {
        fail(r, "not a JSON value");
        return NULL;
    }
}

/* ---- arrays and objects ---- */

/* The items of an array or object (r->at at its opening bracket), appended to v. */
static bool parse_items(json_reader *r, attn__json *v, char close, int depth)
{
    const bool object = close == '}';
    attn__json **tail = &v->first;
    r->at++;
    skip_space(r);
    if (peek(r) == close) {
        r->at++;
        return true;
    }
    for (;;) {
        char *name = NULL;
        skip_space(r);
        if (object) {
            if (peek(r) != '"') {
                fail(r, "expected a member name in quotes");
                return false;
            }
            if (!(name = parse_string(r))) return false;
            skip_space(r);
            if (peek(r) != ':') {
                free(name);
                {
                    fail(r, "expected ':' after a member name");
                    return false;
                }
            }
            r->at++;
        }
        attn__json *item = parse_value(r, depth + 1);
        if (!item) {
            free(name);
            return false;
        }
        item->name = name;
        *tail = item;
        tail = &item->next;
        v->count++;
        skip_space(r);
        const int c = peek(r);
        r->at++;
        if (c == close) return true;
        if (c != ',') {
            r->at--;
            {
                fail(r, object ? "expected ',' or '}'" : "expected ',' or ']'");
                return false;
            }
        }
    }
}

static attn__json *parse_value(json_reader *r, int depth)
{
    skip_space(r);
    const int c = peek(r);
    if (c == '{' || c == '[') {
        if (depth >= ATTN__JSON_MAX_DEPTH) {
            fail(r, "arrays and objects nested deeper than %d levels", ATTN__JSON_MAX_DEPTH);
            return NULL;
        }
        attn__json *v = new_value(r, c == '{' ? ATTN__JSON_OBJECT : ATTN__JSON_ARRAY);
        if (v && !parse_items(r, v, c == '{' ? '}' : ']', depth)) {
            attn__json_free(v);
            return NULL;
        }
        return v;
    }
    if (c == '"') {
        char *s = parse_string(r);
        attn__json *v = s ? new_value(r, ATTN__JSON_STRING) : NULL;
        if (v)
            v->string = s;
        else
            free(s);
        return v;
    }
    if (c == '-' || is_digit(c)) return parse_number(r);
    if (c < 0) {
        fail(r, "the text ends where a value should be");
        return NULL;
    }
    return parse_literal(r);
}

attn__json *attn__json_parse(const char *text, size_t len, char *why, size_t why_len)
{
    json_reader r = {.text = text, .len = len, .why = why, .why_len = why_len};
    attn__json *v = parse_value(&r, 0);
    skip_space(&r);
    if (v && r.at < len) {
        fail(&r, "unexpected bytes after the value (only whitespace may follow)");
        attn__json_free(v);
        v = NULL;
    }
    return v;
}

void attn__json_free(attn__json *v)
{
    while (v) { /* siblings in a loop, children by recursion: depth stays within the limit */
        attn__json *next = v->next;
        attn__json_free(v->first);
        free(v->name);
        free(v->string);
        free(v);
        v = next;
    }
}

const attn__json *attn__json_member(const attn__json *obj, const char *name)
{
    if (!obj || obj->kind != ATTN__JSON_OBJECT) return NULL;
    for (const attn__json *m = obj->first; m; m = m->next)
        if (strcmp(m->name, name) == 0) return m;
    return NULL;
}

bool attn__json_count(const attn__json *v, uint64_t max, uint64_t *out)
{
    if (!v || v->kind != ATTN__JSON_NUMBER) return false;
    uint64_t n = 0;
    for (size_t i = 0; i < v->number_len; i++) {
        const char c = v->number[i];
        if (!is_digit(c)) return false; /* a sign, a fraction or an exponent */
        const uint64_t d = (uint64_t)(c - '0');
        if (n > (max - d) / 10) return false;
        n = n * 10 + d;
    }
    *out = n;
    return true;
}
