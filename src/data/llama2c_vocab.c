/* llama2.c's tokenizer.bin and the encoding its run.c does with it (what attn_data.h states):
 * a scored vocabulary, a dummy space before the text, whole UTF-8 characters or their bytes at
 * 3 + byte, then the adjacent pair of the best score merged, leftmost first, until none is in the
 * vocabulary. run.c rescans every pair after each merge; here a heap of the candidate pairs gives
 * the same merges in the same order (best score, then leftmost), each pair looked up once. */
#include "data_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SCORE -1e10f /* run.c's starting best: a pair must score above it */

struct attn_llama2c_vocab {
    int64_t n;
    float *score;     /* (n) */
    size_t *at, *len; /* (n): piece i is text.data + at[i], len[i] bytes up to its first NUL */
    attn__buf text;   /* the pieces, NUL-terminated, back to back */
    attn__strtab tab; /* the distinct pieces */
    int64_t *id_of;   /* (tab.count): the first id of each distinct piece */
    int64_t space;    /* the id of " ", or -1 */
    char *raw;        /* (raw_len) the file's bytes, written back as they were */
    size_t raw_len;
};

void attn_llama2c_vocab_free(attn_llama2c_vocab *v)
{
    if (!v) return;
    free(v->score), free(v->at), free(v->len), free(v->id_of), free(v->raw);
    attn__buf_free(&v->text);
    attn__strtab_free(&v->tab);
    free(v);
}

int64_t attn_llama2c_vocab_size(const attn_llama2c_vocab *v)
{
    if (!v) {
        attn__fail(ATTN_ERR_ARG, "llama2c_vocab_size: NULL vocabulary");
        return -1;
    }
    return v->n;
}

static int64_t lookup(const attn_llama2c_vocab *v, const char *s, size_t len)
{
    const int64_t k = attn__strtab_find(&v->tab, s, len);
    return k < 0 ? -1 : v->id_of[k];
}

/* The pieces of data[0..size) into v (v->n of them) */
static attn_status parse(attn_llama2c_vocab *v, const unsigned char *data, size_t size, const char *name)
{
    if (size < 4) return attn__fail(ATTN_ERR_FORMAT, "%s: %zu bytes; a tokenizer.bin starts with 4", name, size);
    const uint32_t longest = attn__le32(data);
    size_t at = 4, longest_seen = 0;
    for (int64_t i = 0; i < v->n; i++) {
        if (size - at < 8)
            return attn__fail(ATTN_ERR_FORMAT, "%s: ends at token %lld of the model's %lld", name, (long long)i,
                              (long long)v->n);
        uint32_t bits = attn__le32(data + at), len = attn__le32(data + at + 4);
        memcpy(&v->score[i], &bits, 4);
        at += 8;
        if (len > size - at)
            return attn__fail(ATTN_ERR_FORMAT, "%s: token %lld claims %u bytes; %zu are left", name, (long long)i, len,
                              size - at);
        const char *piece = (const char *)data + at;
        v->len[i] = strnlen(piece, len); /* run.c's pieces are C strings */
        v->at[i] = v->text.len;
        if (attn__buf_append(&v->text, piece, v->len[i]) != ATTN_OK || attn__buf_append(&v->text, "", 1) != ATTN_OK)
            return attn_last_status();
        if (len > longest_seen) longest_seen = len;
        at += len;
    }
    if (at != size)
        return attn__fail(ATTN_ERR_FORMAT, "%s: %zu bytes after the model's %lld tokens; another vocabulary size?",
                          name, size - at, (long long)v->n);
    if (longest_seen > longest)
        return attn__fail(ATTN_ERR_FORMAT, "%s: a token of %zu bytes, past the header's longest (%u)", name,
                          longest_seen, longest);
    return ATTN_OK;
}

attn_llama2c_vocab *attn_llama2c_vocab_read(const void *data, size_t size, int64_t vocab_size, const char *name)
{
    if (!data || !name) return attn__fail_null(ATTN_ERR_ARG, "llama2c_vocab_read: NULL argument");
    if (vocab_size < 259 || vocab_size > INT32_MAX)
        return attn__fail_null(ATTN_ERR_ARG,
                               "%s: a vocabulary of %lld ids; llama2.c's needs at least 259 (<unk>, BOS, EOS and the "
                               "bytes at 3..258)",
                               name, (long long)vocab_size);
    attn_llama2c_vocab *v = calloc(1, sizeof *v);
    if (!v) return attn__fail_null(ATTN_ERR_NOMEM, "%s: out of memory", name);
    v->n = vocab_size;
    v->score = malloc(sizeof *v->score * (size_t)v->n);
    v->at = malloc(sizeof *v->at * (size_t)v->n), v->len = malloc(sizeof *v->len * (size_t)v->n);
    v->id_of = malloc(sizeof *v->id_of * (size_t)v->n);
    if ((v->raw = malloc(size ? size : 1))) memcpy(v->raw, data, size), v->raw_len = size;
    attn_status st = v->score && v->at && v->len && v->id_of && v->raw
                         ? parse(v, data, size, name)
                         : attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", name);
    for (int64_t i = 0; st == ATTN_OK && i < v->n; i++) {
        bool added;
        const int64_t k = attn__strtab_intern(&v->tab, v->text.data + v->at[i], v->len[i], &added);
        if (k < 0)
            st = attn_last_status();
        else if (added)
            v->id_of[k] = i; /* equal pieces: the first id, where run.c's search may find any */
    }
    if (st != ATTN_OK) {
        attn_llama2c_vocab_free(v);
        return NULL;
    }
    v->space = lookup(v, " ", 1);
    return v;
}

attn_llama2c_vocab *attn_llama2c_vocab_load(const char *path, int64_t vocab_size)
{
    if (!path) return attn__fail_null(ATTN_ERR_ARG, "llama2c_vocab_load: NULL path");
    char *data;
    size_t size;
    if (attn__read_file(path, &data, &size) != ATTN_OK) return NULL;
    attn_llama2c_vocab *v = attn_llama2c_vocab_read(data, size, vocab_size, path);
    free(data);
    return v;
}

attn_status attn_llama2c_vocab_save(const attn_llama2c_vocab *v, const char *path)
{
    if (!v || !path) return attn__fail(ATTN_ERR_ARG, "llama2c_vocab_save: NULL argument");
    attn__outfile out;
    attn_status st = attn__outfile_open(&out, path);
    if (st != ATTN_OK) return st;
    const int err = fwrite(v->raw, 1, v->raw_len, out.fp) == v->raw_len ? 0 : errno;
    return attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
}

const void *attn_llama2c_vocab_bytes(const attn_llama2c_vocab *v, size_t *size)
{
    if (!v || !size) return attn__fail_null(ATTN_ERR_ARG, "llama2c_vocab_bytes: NULL argument");
    *size = v->raw_len;
    return v->raw;
}

/* ---- encoding ---- */

typedef struct cand {
    float score;
    int64_t left, right;       /* the symbols it merges (their first positions) */
    int64_t left_id, right_id; /* their ids when it was made: a symbol merged since makes it stale */
    int64_t id;                /* the id it makes */
} cand;

static bool better(const cand *a, const cand *b) /* a pops before b: higher score, then leftmost */
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(cand *h, int64_t *n, cand c)
{
    int64_t i = (*n)++;
    for (; i > 0 && better(&c, &h[(i - 1) / 2]); i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = c;
}

static cand heap_pop(cand *h, int64_t *n)
{
    cand top = h[0], last = h[--*n];
    int64_t i = 0;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && better(&h[c + 1], &h[c])) c++;
        if (!better(&h[c], &last)) break;
        h[i] = h[c], i = c;
    }
    h[i] = last;
    return top;
}

typedef struct symbols {
    int64_t *id, *prev, *next; /* (n): the token at each first position; links; next -1 at the end */
    char *buf;                 /* room for two pieces */
} symbols;

/* The candidate merging the symbols at a and b, when their pieces joined are in the vocabulary */
static void consider(const attn_llama2c_vocab *v, symbols *s, cand *heap, int64_t *n_heap, int64_t a, int64_t b)
{
    if (a < 0 || b < 0) return;
    const size_t la = v->len[s->id[a]], lb = v->len[s->id[b]];
    memcpy(s->buf, v->text.data + v->at[s->id[a]], la);
    memcpy(s->buf + la, v->text.data + v->at[s->id[b]], lb);
    const int64_t id = lookup(v, s->buf, la + lb);
    if (id >= 0 && v->score[id] > MIN_SCORE)
        heap_push(heap, n_heap, (cand){v->score[id], a, b, s->id[a], s->id[b], id});
}

/* ids[0..n) merged in place; returns the new count */
static int64_t merge_all(const attn_llama2c_vocab *v, int64_t *ids, int64_t n)
{
    if (n < 2) return n; /* no pair */
    size_t longest = 0;
    for (int64_t i = 0; i < v->n; i++) longest = v->len[i] > longest ? v->len[i] : longest;
    symbols s = {malloc(sizeof(int64_t) * (size_t)n), malloc(sizeof(int64_t) * (size_t)n),
                 malloc(sizeof(int64_t) * (size_t)n), malloc(2 * longest + 1)};
    cand *heap = malloc(sizeof *heap * (size_t)(2 * n + 1)); /* n - 1 pairs, then two per merge */
    if (!s.id || !s.prev || !s.next || !s.buf || !heap) {
        free(s.id), free(s.prev), free(s.next), free(s.buf), free(heap);
        {
            attn__fail(ATTN_ERR_NOMEM, "llama2c_encode: out of memory");
            return -1;
        }
    }
    int64_t n_heap = 0;
    for (int64_t i = 0; i < n; i++) s.id[i] = ids[i], s.prev[i] = i - 1, s.next[i] = i + 1 < n ? i + 1 : -1;
    for (int64_t i = 0; i + 1 < n; i++) consider(v, &s, heap, &n_heap, i, i + 1);
    while (n_heap > 0) {
        const cand c = heap_pop(heap, &n_heap);
        if (s.next[c.left] != c.right || s.id[c.left] != c.left_id || s.id[c.right] != c.right_id) continue;
        s.id[c.left] = c.id, s.id[c.right] = -1;
        s.next[c.left] = s.next[c.right];
        if (s.next[c.left] >= 0) s.prev[s.next[c.left]] = c.left;
        consider(v, &s, heap, &n_heap, s.prev[c.left], c.left);
        consider(v, &s, heap, &n_heap, c.left, s.next[c.left]);
    }
    int64_t out = 0;
    for (int64_t i = n ? 0 : -1; i >= 0; i = s.next[i]) ids[out++] = s.id[i];
    free(s.id), free(s.prev), free(s.next), free(s.buf), free(heap);
    return out;
}

int64_t attn_llama2c_encode(const attn_llama2c_vocab *v, const char *text, size_t len, bool bos, int64_t *ids)
{
    if (!v || (!text && len) || !ids) {
        attn__fail(ATTN_ERR_ARG, "llama2c_encode: NULL argument");
        return -1;
    }
    int64_t n = 0;
    if (bos) ids[n++] = 1;
    if (len > 0) ids[n++] = v->space >= 0 ? v->space : ' ' + 3;
    for (size_t i = 0; i < len;) { /* one character: a byte and the continuation bytes after it, at most 4 */
        size_t end = i + 1;
        while (end < len && end - i < 4 && ((unsigned char)text[end] & 0xC0) == 0x80) end++;
        const int64_t id = memchr(text + i, '\0', end - i) ? -1 : lookup(v, text + i, end - i);
        if (id >= 0)
            ids[n++] = id;
        else
            for (size_t k = i; k < end; k++) ids[n++] = (unsigned char)text[k] + 3;
        i = end;
    }
    return merge_all(v, ids, n);
}

#define B4(x) x, x + 1, x + 2, x + 3
#define B16(x) B4(x), B4(x + 4), B4(x + 8), B4(x + 12)
#define B64(x) B16(x), B16(x + 16), B16(x + 32), B16(x + 48)
static const unsigned char byte_values[256] = {B64(0), B64(64), B64(128), B64(192)};

const char *attn_llama2c_piece(const attn_llama2c_vocab *v, int64_t prev, int64_t id, size_t *len)
{
    if (!v || !len) return attn__fail_null(ATTN_ERR_ARG, "llama2c_piece: NULL argument");
    if (id < 0 || id >= v->n)
        return attn__fail_null(ATTN_ERR_ARG, "llama2c_piece: id %lld is outside [0, %lld)", (long long)id,
                               (long long)v->n);
    const char *p = v->text.data + v->at[id];
    size_t n = v->len[id];
    if (prev == 1 && n && p[0] == ' ') p++, n--;
    if (n >= 4 && !strncmp(p, "<0x", 3) && isxdigit((unsigned char)p[3])) { /* "<0xHH": the byte itself */
        const char hex[3] = {p[3], isxdigit((unsigned char)p[4]) ? p[4] : '\0', '\0'};
        *len = 1;
        return (const char *)&byte_values[strtol(hex, NULL, 16)];
    }
    *len = n;
    return p;
}
