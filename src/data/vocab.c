/* Token counters and vocabularies: counting, torchtext's build_vocab_from_iterator ordering
 * (count descending, ties in byte order = code-point order, specials first), lookups through
 * the string hash table, and the one-token-per-line text format. */
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct attn_counter {
    attn__strtab tab;
    int64_t *counts; /* per key id */
    int64_t cap;
    int64_t total;
};

struct attn_vocab {
    attn__strtab tab; /* key id = token id */
    int64_t unk;
};

/* ---- counter ---- */

attn_counter *attn_counter_new(void)
{
    attn_counter *c = calloc(1, sizeof *c);
    return c ? c : attn__fail_null(ATTN_ERR_NOMEM, "attn_counter_new: out of memory");
}

void attn_counter_free(attn_counter *c)
{
    if (!c) return;
    attn__strtab_free(&c->tab);
    free(c->counts);
    free(c);
}

static attn_status count_one(attn_counter *c, const char *tok)
{
    bool added;
    attn_status st = attn__text_check(tok, strlen(tok), "attn_counter_add: token");
    if (st != ATTN_OK) return st;
    int64_t id = attn__strtab_intern(&c->tab, tok, strlen(tok), &added);
    if (id < 0) return attn_last_status();
    if (id >= c->cap) {
        int64_t cap = c->cap ? c->cap * 2 : 1024;
        int64_t *counts = realloc(c->counts, (size_t)cap * sizeof *counts);
        if (!counts) return attn__fail(ATTN_ERR_NOMEM, "token counter: %lld tokens", (long long)cap);
        c->counts = counts;
        c->cap = cap;
    }
    if (added) c->counts[id] = 0;
    c->counts[id]++;
    c->total++;
    return ATTN_OK;
}

attn_status attn_counter_add(attn_counter *c, const char *const *tokens, int64_t n)
{
    if (!c || (!tokens && n) || n < 0)
        return attn__fail(ATTN_ERR_ARG, "attn_counter_add: NULL argument or n %lld < 0", (long long)n);
    attn_status st = ATTN_OK;
    for (int64_t i = 0; i < n && st == ATTN_OK; i++)
        st = tokens[i] ? count_one(c, tokens[i])
                       : attn__fail(ATTN_ERR_ARG, "attn_counter_add: token %lld is NULL", (long long)i);
    return st;
}

int64_t attn_counter_get(const attn_counter *c, const char *token)
{
    if (!c || !token) {
        attn__null_arg("attn_counter_get");
        return 0;
    }
    int64_t id = attn__strtab_find(&c->tab, token, strlen(token));
    return id < 0 ? 0 : c->counts[id];
}

int64_t attn_counter_distinct(const attn_counter *c)
{
    return c ? c->tab.count : (attn__null_arg("attn_counter_distinct"), 0);
}
int64_t attn_counter_total(const attn_counter *c)
{
    return c ? c->total : (attn__null_arg("attn_counter_total"), 0);
}

/* ---- building ---- */

typedef struct ranked {
    const char *token;
    int64_t count;
} ranked;

static int ranked_cmp(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return strcmp(a->token, b->token); /* unsigned bytes: code-point order */
}

static attn_vocab *vocab_new(void)
{
    attn_vocab *v = calloc(1, sizeof *v);
    if (!v) return attn__fail_null(ATTN_ERR_NOMEM, "vocabulary: out of memory");
    v->unk = -1;
    return v;
}

/* Adds token as the next id; a duplicate is an error (status) naming `where`. */
static attn_status vocab_add(attn_vocab *v, const char *token, size_t len, const char *where, attn_status status)
{
    bool added;
    attn_status st = attn__text_check(token, len, where); /* what save and load can carry back */
    if (st != ATTN_OK) return st;
    int64_t id = attn__strtab_intern(&v->tab, token, len, &added);
    if (id < 0) return attn_last_status();
    if (!added)
        return attn__fail(status,
                          "%s: token \"%.*s\" appears twice (ids %lld and %lld); "
                          "expected distinct tokens",
                          where, (int)(len < 64 ? len : 64), token, (long long)id, (long long)v->tab.count);
    return ATTN_OK;
}

static bool is_special(const char *tok, const char *const *specials, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(tok, specials[i]) == 0) return true;
    return false;
}

/* The counter's tokens in torchtext order, cut to `keep` entries (keep < 0: all). */
static ranked *rank_tokens(const attn_counter *c, int64_t *n)
{
    *n = c->tab.count;
    ranked *r = malloc((size_t)(*n ? *n : 1) * sizeof *r);
    if (!r) return attn__fail_null(ATTN_ERR_NOMEM, "vocabulary: sorting %lld tokens", (long long)*n);
    for (int64_t i = 0; i < *n; i++) r[i] = (ranked){attn__strtab_key(&c->tab, i), c->counts[i]};
    qsort(r, (size_t)*n, sizeof *r, ranked_cmp);
    return r;
}

static attn_status add_ranked(attn_vocab *v, const ranked *r, int64_t n, const char *const *specials, int n_specials,
                              int64_t min_freq)
{
    attn_status st = ATTN_OK;
    for (int i = 0; i < n_specials && st == ATTN_OK; i++)
        st = specials[i] ? vocab_add(v, specials[i], strlen(specials[i]), "vocabulary specials", ATTN_ERR_ARG)
                         : attn__fail(ATTN_ERR_ARG, "attn_vocab_build: special %d is NULL", i);
    for (int64_t i = 0; i < n && st == ATTN_OK; i++)
        if (r[i].count >= min_freq && !is_special(r[i].token, specials, n_specials))
            st = vocab_add(v, r[i].token, strlen(r[i].token), "attn_vocab_build", ATTN_ERR_ARG);
    return st;
}

static void set_default_unk(attn_vocab *v)
{
    v->unk = attn__strtab_find(&v->tab, "<unk>", 5);
}

attn_vocab *attn_vocab_build(const attn_counter *c, const char *const *specials, int n_specials, int64_t min_freq,
                             int64_t max_size)
{
    if (!c || n_specials < 0 || (!specials && n_specials))
        return attn__fail_null(ATTN_ERR_ARG, "attn_vocab_build: NULL counter or bad specials");
    if (max_size > 0 && max_size <= n_specials)
        return attn__fail_null(ATTN_ERR_ARG,
                               "attn_vocab_build: max_size %lld leaves no room "
                               "after %d specials",
                               (long long)max_size, n_specials);
    int64_t n;
    ranked *r = rank_tokens(c, &n);
    attn_vocab *v = r ? vocab_new() : NULL;
    if (max_size > 0 && n > max_size - n_specials) n = max_size - n_specials; /* torchtext cuts first */
    if (v && add_ranked(v, r, n, specials, n_specials, min_freq) != ATTN_OK) {
        attn_vocab_free(v);
        v = NULL;
    }
    free(r);
    if (v) set_default_unk(v);
    return v;
}

attn_vocab *attn_vocab_from_tokens(const char *const *tokens, int64_t n)
{
    if ((!tokens && n) || n < 0) return attn__fail_null(ATTN_ERR_ARG, "attn_vocab_from_tokens: bad list");
    attn_vocab *v = vocab_new();
    attn_status st = v ? ATTN_OK : ATTN_ERR_NOMEM;
    for (int64_t i = 0; i < n && st == ATTN_OK; i++)
        st = tokens[i] ? vocab_add(v, tokens[i], strlen(tokens[i]), "attn_vocab_from_tokens", ATTN_ERR_ARG)
                       : attn__fail(ATTN_ERR_ARG, "attn_vocab_from_tokens: token %lld is NULL", (long long)i);
    if (st != ATTN_OK) {
        attn_vocab_free(v);
        return NULL;
    }
    set_default_unk(v);
    return v;
}

void attn_vocab_free(attn_vocab *v)
{
    if (!v) return;
    attn__strtab_free(&v->tab);
    free(v);
}

/* ---- lookups ---- */

int64_t attn_vocab_size(const attn_vocab *v)
{
    return v ? v->tab.count : (attn__null_arg("attn_vocab_size"), 0);
}

const char *attn_vocab_token(const attn_vocab *v, int64_t id)
{
    if (!v) {
        attn__null_arg("attn_vocab_token");
        return NULL;
    }
    return id >= 0 && id < v->tab.count ? attn__strtab_key(&v->tab, id) : NULL;
}

int64_t attn_vocab_find(const attn_vocab *v, const char *token)
{
    if (!v || !token) {
        attn__null_arg("attn_vocab_find");
        return -1;
    }
    return attn__strtab_find(&v->tab, token, strlen(token));
}

int64_t attn_vocab_id(const attn_vocab *v, const char *token)
{
    if (!v || !token) {
        attn__null_arg("attn_vocab_id");
        return -1;
    }
    int64_t id = attn_vocab_find(v, token);
    return id >= 0 ? id : attn_vocab_unk(v);
}

int64_t attn_vocab_unk(const attn_vocab *v)
{
    return v ? v->unk : (attn__null_arg("attn_vocab_unk"), -1);
}

attn_status attn_vocab_set_unk(attn_vocab *v, int64_t id)
{
    if (!v || id < -1 || id >= v->tab.count)
        return attn__fail(ATTN_ERR_ARG, "attn_vocab_set_unk: id %lld outside -1..%lld", (long long)id,
                          (long long)(v ? v->tab.count - 1 : -1));
    v->unk = id;
    return ATTN_OK;
}

attn_status attn_vocab_encode(const attn_vocab *v, int64_t *ids, const char *const *tokens, int64_t n)
{
    if (!v || (n && (!ids || !tokens))) return attn__fail(ATTN_ERR_ARG, "attn_vocab_encode: NULL argument");
    for (int64_t i = 0; i < n; i++) {
        ids[i] = tokens[i] ? attn_vocab_id(v, tokens[i]) : -1;
        if (ids[i] < 0)
            return attn__fail(ATTN_ERR_ARG,
                              "attn_vocab_encode: token %lld \"%.64s\" is not in the "
                              "vocabulary and it has no unk id",
                              (long long)i, tokens[i] ? tokens[i] : "(NULL)");
    }
    return ATTN_OK;
}

/* ---- text file ---- */

/* 0, or the errno of the first failed write. */
static int write_tokens(FILE *f, const attn_vocab *v)
{
    errno = 0;
    for (int64_t i = 0; i < v->tab.count; i++)
        if (fputs(attn__strtab_key(&v->tab, i), f) < 0 || fputc('\n', f) < 0) return errno ? errno : EIO;
    return 0;
}

/* ATTN_ERR_ARG naming `where` when a token holds a line break. */
static attn_status check_lines(const attn_vocab *v, const char *where)
{
    for (int64_t i = 0; i < v->tab.count; i++)
        if (strpbrk(attn__strtab_key(&v->tab, i), "\r\n"))
            return attn__fail(ATTN_ERR_ARG,
                              "%s: token %lld holds a line break; the one-token-per-line "
                              "format cannot store it",
                              where, (long long)i);
    return ATTN_OK;
}

attn_status attn_vocab_save(const attn_vocab *v, const char *path)
{
    if (!v || !path) return attn__fail(ATTN_ERR_ARG, "attn_vocab_save: NULL argument");
    if (check_lines(v, path) != ATTN_OK) return attn_last_status();
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) return st;
    int err = write_tokens(out.fp, v);
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}

char *attn_vocab_text(const attn_vocab *v, size_t *len)
{
    if (!v || !len) return attn__fail_null(ATTN_ERR_ARG, "attn_vocab_text: NULL argument");
    if (check_lines(v, "attn_vocab_text") != ATTN_OK) return NULL;
    attn__buf b = {0};
    for (int64_t i = 0; i < v->tab.count; i++) {
        const char *tok = attn__strtab_key(&v->tab, i);
        if (attn__buf_append(&b, tok, strlen(tok)) != ATTN_OK || attn__buf_append(&b, "\n", 1) != ATTN_OK) {
            attn__buf_free(&b);
            return NULL;
        }
    }
    if (!b.data && attn__buf_append(&b, "", 0) != ATTN_OK) return NULL; /* an empty vocabulary: "" */
    *len = b.len;
    return b.data;
}

/* One token per line: line i (from 1 in messages) is id i - 1. */
static attn_status parse_lines(attn_vocab *v, char *text, size_t len, const char *path)
{
    attn_status st = attn__text_check(text, len, path);
    if (st == ATTN_OK && len == 0) st = attn__fail(ATTN_ERR_FORMAT, "%s: empty; expected one token per line", path);
    int64_t line = 0;
    for (size_t start = 0; start < len && st == ATTN_OK; line++) {
        char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len, token_end = end;
        if (token_end > start && text[token_end - 1] == '\r') token_end--; /* CRLF lines, as the pairs loaders */
        char where[512];
        snprintf(where, sizeof where, "%s:%lld", path, (long long)line + 1);
        st = vocab_add(v, text + start, token_end - start, where, ATTN_ERR_FORMAT);
        start = end + 1;
    }
    return st;
}

/* The vocabulary of text's lines (read in place, then freed); name in messages */
static attn_vocab *vocab_of_lines(char *text, size_t len, const char *name)
{
    attn_vocab *v = vocab_new();
    if (v && parse_lines(v, text, len, name) != ATTN_OK) {
        attn_vocab_free(v);
        v = NULL;
    }
    free(text);
    if (v) set_default_unk(v);
    return v;
}

attn_vocab *attn_vocab_load(const char *path)
{
    if (!path) return attn__fail_null(ATTN_ERR_ARG, "attn_vocab_load: NULL path");
    char *text;
    size_t len;
    return attn__read_file(path, &text, &len) == ATTN_OK ? vocab_of_lines(text, len, path) : NULL;
}

attn_vocab *attn_vocab_parse(const char *text, size_t len, const char *name)
{
    if (!text || !name) return attn__fail_null(ATTN_ERR_ARG, "attn_vocab_parse: NULL argument");
    char *copy = malloc(len + 1); /* parse_lines reads in place */
    if (!copy) return attn__fail_null(ATTN_ERR_NOMEM, "%s: out of memory for %zu bytes", name, len);
    memcpy(copy, text, len);
    copy[len] = '\0';
    return vocab_of_lines(copy, len, name);
}
