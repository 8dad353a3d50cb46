/* The parallel-text loader: sentence pairs from two line-aligned files (Multi30k
 * train.en.gz / train.fr.gz) or from one tab-separated file (manythings / Tatoeba eng-fra:
 * English, French, attribution), plain or gzip. Lines end at "\n" (a "\r" before it is
 * dropped); U+202F and U+00A0 become plain spaces, as D2L's preprocessing does for French. */
#include "data_internal.h"

#include <stdlib.h>
#include <string.h>

/* A file's text, split into lines in place. */
typedef struct lines {
    char *text;
    size_t len;
    char **line;
    int64_t count;
} lines;

static void lines_free(lines *l)
{
    free(l->text);
    free(l->line);
    *l = (lines){0};
}

/* U+202F (E2 80 AF) and U+00A0 (C2 A0) -> ' ', in place. */
static size_t plain_spaces(char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (len - i >= 3 && memcmp(s + i, "\xE2\x80\xAF", 3) == 0) {
            s[n++] = ' ';
            i += 3;
        } else if (len - i >= 2 && memcmp(s + i, "\xC2\xA0", 2) == 0) {
            s[n++] = ' ';
            i += 2;
        } else {
            s[n++] = s[i++];
        }
    }
    s[n] = '\0';
    return n;
}

/* Cuts l->text at every "\n" (dropping a "\r" before it); no empty last line after a final
 * "\n". */
static attn_status split_lines(lines *l, const char *path)
{
    int64_t n = 0;
    for (size_t i = 0; i < l->len; i++) n += l->text[i] == '\n';
    n += l->len > 0 && l->text[l->len - 1] != '\n';
    l->line = malloc((size_t)(n ? n : 1) * sizeof *l->line);
    if (!l->line) return attn__fail(ATTN_ERR_NOMEM, "%s: %lld lines", path, (long long)n);
    char *s = l->text;
    for (size_t start = 0; start < l->len;) {
        char *nl = memchr(s + start, '\n', l->len - start);
        size_t end = nl ? (size_t)(nl - s) : l->len;
        s[end] = '\0';
        if (end > start && s[end - 1] == '\r') s[end - 1] = '\0';
        l->line[l->count++] = s + start;
        start = end + 1;
    }
    return ATTN_OK;
}

static attn_status read_lines(lines *l, const char *path)
{
    *l = (lines){0};
    attn_status st = attn__read_file(path, &l->text, &l->len);
    if (st == ATTN_OK) st = attn__text_check(l->text, l->len, path);
    if (st == ATTN_OK) {
        l->len = plain_spaces(l->text, l->len);
        st = split_lines(l, path);
    }
    if (st != ATTN_OK) lines_free(l);
    return st;
}

static attn_status pairs_alloc(attn_text_pairs *p, int64_t n)
{
    p->src = calloc((size_t)(n ? n : 1), sizeof *p->src);
    p->tgt = calloc((size_t)(n ? n : 1), sizeof *p->tgt);
    if (!p->src || !p->tgt) return attn__fail(ATTN_ERR_NOMEM, "sentence pairs: room for %lld", (long long)n);
    return ATTN_OK;
}

/* Appends the pair (a[0..na), b[0..nb)) as copies. */
static attn_status pairs_add(attn_text_pairs *p, const char *a, size_t na, const char *b, size_t nb)
{
    char *x = strndup(a, na), *y = strndup(b, nb);
    if (!x || !y) {
        free(x);
        free(y);
        return attn__fail(ATTN_ERR_NOMEM, "sentence pair %lld: out of memory", (long long)p->count);
    }
    p->src[p->count] = x;
    p->tgt[p->count++] = y;
    return ATTN_OK;
}

static attn_status aligned(attn_text_pairs *out, const lines *a, const lines *b, const char *src_path,
                           const char *tgt_path)
{
    if (a->count != b->count)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s has %lld lines but %s has %lld; expected "
                          "line-aligned files (line i of one translates line i of the other)",
                          src_path, (long long)a->count, tgt_path, (long long)b->count);
    if (a->count == 0)
        return attn__fail(ATTN_ERR_FORMAT, "%s and %s: no lines; expected sentence pairs", src_path, tgt_path);
    attn_status st = pairs_alloc(out, a->count);
    for (int64_t i = 0; i < a->count && st == ATTN_OK; i++)
        st = pairs_add(out, a->line[i], strlen(a->line[i]), b->line[i], strlen(b->line[i]));
    return st;
}

attn_status attn_pairs_load(attn_text_pairs *out, const char *src_path, const char *tgt_path)
{
    if (!out || !src_path || !tgt_path) return attn__fail(ATTN_ERR_ARG, "attn_pairs_load: NULL argument");
    *out = (attn_text_pairs){0};
    lines a, b = {0};
    attn_status st = read_lines(&a, src_path);
    if (st == ATTN_OK) st = read_lines(&b, tgt_path);
    if (st == ATTN_OK) st = aligned(out, &a, &b, src_path, tgt_path);
    lines_free(&a);
    lines_free(&b);
    if (st != ATTN_OK) attn_text_pairs_free(out);
    return st;
}

static attn_status tsv_pairs(attn_text_pairs *out, const lines *l, const char *path)
{
    attn_status st = pairs_alloc(out, l->count);
    for (int64_t i = 0; i < l->count && st == ATTN_OK; i++) {
        const char *s = l->line[i], *tab = strchr(s, '\t');
        if (!*s) continue;
        if (!tab)
            return attn__fail(ATTN_ERR_FORMAT,
                              "%s:%lld: no tab; expected source<TAB>target"
                              "[<TAB>more fields]",
                              path, (long long)i + 1);
        const char *end = strchr(tab + 1, '\t');
        size_t n2 = end ? (size_t)(end - tab - 1) : strlen(tab + 1);
        st = pairs_add(out, s, (size_t)(tab - s), tab + 1, n2);
    }
    if (st == ATTN_OK && out->count == 0)
        st = attn__fail(ATTN_ERR_FORMAT, "%s: no lines; expected source<TAB>target pairs", path);
    return st;
}

attn_status attn_pairs_load_tsv(attn_text_pairs *out, const char *path)
{
    if (!out || !path) return attn__fail(ATTN_ERR_ARG, "attn_pairs_load_tsv: NULL argument");
    *out = (attn_text_pairs){0};
    lines l;
    attn_status st = read_lines(&l, path);
    if (st == ATTN_OK) st = tsv_pairs(out, &l, path);
    lines_free(&l);
    if (st != ATTN_OK) attn_text_pairs_free(out);
    return st;
}

void attn_text_pairs_free(attn_text_pairs *p)
{
    if (!p) return;
    for (int64_t i = 0; i < p->count; i++) {
        free(p->src[i]);
        free(p->tgt[i]);
    }
    free(p->src);
    free(p->tgt);
    *p = (attn_text_pairs){0};
}
