/* From texts to batches: ragged id sequences, encoding texts through a tokenizer and a
 * vocabulary, padding/truncation to a width with optional <bos>/<eos>, and an epoch's batch
 * order (plain shuffling, or the length bucketing of the Multi30k PyTorch anchor). */
#include "data_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- id sequences ---- */

static attn_status grow_i64(int64_t **a, int64_t *cap, int64_t need, const char *what)
{
    if (need <= *cap) return ATTN_OK;
    int64_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    int64_t *p = realloc(*a, (size_t)c * sizeof *p);
    if (!p) return attn__fail(ATTN_ERR_NOMEM, "%s: room for %lld entries", what, (long long)c);
    *a = p;
    *cap = c;
    return ATTN_OK;
}

attn_status attn_id_seqs_push(attn_id_seqs *s, const int64_t *ids, int64_t n)
{
    if (!s || n < 0 || (!ids && n)) return attn__fail(ATTN_ERR_ARG, "attn_id_seqs_push: bad arguments");
    int64_t used = s->count ? s->offsets[s->count] : 0;
    attn_status st = grow_i64(&s->offsets, &s->cap_seqs_, s->count + 2, "id sequences");
    if (st == ATTN_OK) st = grow_i64(&s->ids, &s->cap_ids_, used + n + 1, "id sequences");
    if (st != ATTN_OK) return st;
    if (n) memcpy(s->ids + used, ids, (size_t)n * sizeof *ids);
    s->offsets[s->count] = used;
    s->offsets[++s->count] = used + n;
    return ATTN_OK;
}

int64_t attn_id_seqs_len(const attn_id_seqs *s, int64_t i)
{
    if (!s) {
        attn__null_arg("attn_id_seqs_len");
        return -1;
    }
    if (i < 0 || i >= s->count) {
        attn__fail(ATTN_ERR_ARG, "attn_id_seqs_len: sequence %lld of %lld", (long long)i, (long long)s->count);
        return -1;
    }
    return s->offsets[i + 1] - s->offsets[i];
}

void attn_id_seqs_free(attn_id_seqs *s)
{
    if (!s) return;
    free(s->offsets);
    free(s->ids);
    *s = (attn_id_seqs){0};
}

/* Tokenizes text into toks and appends its ids to out; the message names text number i. */
static attn_status encode_one(attn_id_seqs *out, attn_tokens *toks, int64_t **ids, int64_t *cap, const attn_vocab *v,
                              attn_tokenizer kind, const char *text, int64_t i)
{
    attn_tokens_clear(toks);
    attn_status st = text ? attn_tokenize(toks, kind, text, strlen(text)) : attn__fail(ATTN_ERR_ARG, "text is NULL");
    if (st == ATTN_OK) st = grow_i64(ids, cap, toks->count + 1, "encoding");
    if (st == ATTN_OK) st = attn_vocab_encode(v, *ids, toks->items, toks->count);
    if (st == ATTN_OK) st = attn_id_seqs_push(out, *ids, toks->count);
    if (st != ATTN_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        attn__fail(st, "attn_encode_texts: text %lld: %s", (long long)i, msg);
    }
    return st;
}

attn_status attn_encode_texts(attn_id_seqs *out, const attn_vocab *v, attn_tokenizer kind, const char *const *texts,
                              int64_t n)
{
    if (!out || !v || n < 0 || (!texts && n)) return attn__fail(ATTN_ERR_ARG, "attn_encode_texts: NULL argument");
    attn_tokens toks = {0};
    int64_t *ids = NULL, cap = 0;
    const int64_t count0 = out->count;
    attn_status st = ATTN_OK;
    for (int64_t i = 0; i < n && st == ATTN_OK; i++) st = encode_one(out, &toks, &ids, &cap, v, kind, texts[i], i);
    if (st != ATTN_OK) out->count = count0; /* all or nothing: the texts before the bad one go too */
    attn_tokens_free(&toks);
    free(ids);
    return st;
}

/* ---- padding ---- */

/* -1, with ATTN_ERR_ARG "FN: A x and B y; expected >= 0" */
static int64_t negative_sizes(const char *fn, const char *a, int64_t x, const char *b, int64_t y)
{
    attn__fail(ATTN_ERR_ARG, "%s: %s %lld and %s %lld; expected >= 0", fn, a, (long long)x, b, (long long)y);
    return -1;
}

int64_t attn_pad_ids(int64_t *row, const int64_t *ids, int64_t len, const attn_pad_opts *opts, int64_t width)
{
    if (!row || !opts || (!ids && len > 0)) {
        attn__null_arg("attn_pad_ids");
        return -1;
    }
    if (len < 0 || width < 0) return negative_sizes("attn_pad_ids", "len", len, "width", width);
    int64_t k = 0;
    if (opts->bos_id >= 0 && k < width) row[k++] = opts->bos_id;
    for (int64_t i = 0; i < len && k < width; i++) row[k++] = ids[i];
    if (opts->eos_id >= 0 && k < width) row[k++] = opts->eos_id;
    int64_t kept = k;
    while (k < width) row[k++] = opts->pad_id;
    return kept;
}

static int64_t row_of(const int64_t *rows, int64_t i)
{
    return rows ? rows[i] : i;
}

attn_status attn_batch_pad(int64_t *out, int64_t *lengths, const attn_id_seqs *s, const int64_t *rows,
                           const attn_pad_opts *opts, int64_t n, int64_t width)
{
    if (!out || !s || !opts || n < 0 || width < 0)
        return attn__fail(ATTN_ERR_ARG, "attn_batch_pad: NULL argument or negative size");
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row_of(rows, i);
        if (r < 0 || r >= s->count)
            return attn__fail(ATTN_ERR_ARG, "attn_batch_pad: row %lld is %lld, outside 0..%lld", (long long)i,
                              (long long)r, (long long)s->count - 1);
        int64_t kept = attn_pad_ids(out + i * width, s->ids + s->offsets[r], attn_id_seqs_len(s, r), opts, width);
        if (lengths) lengths[i] = kept;
    }
    return ATTN_OK;
}

int64_t attn_batch_width(const attn_id_seqs *s, const int64_t *rows, int64_t n, int64_t extra, int64_t max_len)
{
    if (!s) {
        attn__null_arg("attn_batch_width");
        return -1;
    }
    if (n < 0 || extra < 0) return negative_sizes("attn_batch_width", "n", n, "extra", extra);
    int64_t w = 0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t len = attn_id_seqs_len(s, row_of(rows, i));
        if (len < 0) return -1;
        w = len > w ? len : w;
    }
    if (w > INT64_MAX - extra) {
        attn__fail(ATTN_ERR_ARG, "attn_batch_width: %lld ids plus extra %lld overflow", (long long)w, (long long)extra);
        return -1;
    }
    w += extra;
    return max_len > 0 && w > max_len ? max_len : w;
}

/* ---- batch order ---- */

void attn_batches_free(attn_batches *b)
{
    if (!b) return;
    free(b->offsets);
    free(b->rows);
    *b = (attn_batches){0};
}

/* out with n rows 0..n-1 (shuffled when rng is set) and room for the batch offsets. */
static attn_status batches_init(attn_batches *out, int64_t n, int64_t batch_size, attn_rng *rng)
{
    if (!out) return attn__null_arg("attn_batches");
    *out = (attn_batches){0};
    if (n < 0 || batch_size <= 0)
        return attn__fail(ATTN_ERR_ARG,
                          "batches: %lld examples in batches of %lld; expected n >= 0 "
                          "and batch_size > 0",
                          (long long)n, (long long)batch_size);
    out->rows = malloc((size_t)(n ? n : 1) * sizeof *out->rows);
    out->offsets = malloc((size_t)(n / batch_size + 2) * sizeof *out->offsets);
    if (!out->rows || !out->offsets) {
        attn_batches_free(out);
        return attn__fail(ATTN_ERR_NOMEM, "batches: %lld examples", (long long)n);
    }
    for (int64_t i = 0; i < n; i++) out->rows[i] = i;
    if (rng) attn_rng_shuffle(rng, out->rows, n);
    return ATTN_OK;
}

/* Cuts rows[from..to) into batches of batch_size, appended to the offsets. */
static void cut(attn_batches *b, int64_t from, int64_t to, int64_t batch_size)
{
    for (int64_t i = from; i < to; i += batch_size) b->offsets[b->count++] = i;
    b->offsets[b->count] = to;
}

attn_status attn_batches_plain(attn_batches *out, int64_t n, int64_t batch_size, attn_rng *rng)
{
    attn_status st = batches_init(out, n, batch_size, rng);
    if (st == ATTN_OK) cut(out, 0, n, batch_size);
    return st;
}

typedef struct keyed {
    int64_t src_len, tgt_len, order, row;
} keyed;

static int keyed_cmp(const void *x, const void *y)
{
    const keyed *a = x, *b = y;
    if (a->src_len != b->src_len) return a->src_len < b->src_len ? -1 : 1;
    if (a->tgt_len != b->tgt_len) return a->tgt_len < b->tgt_len ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order; /* stable, as Python's sorted */
}

/* Sorts rows[from..to) by (src length, tgt length), keeping the order of equal keys. */
static void sort_pool(int64_t *rows, keyed *k, int64_t from, int64_t to, const attn_id_seqs *src,
                      const attn_id_seqs *tgt)
{
    int64_t m = to - from;
    for (int64_t i = 0; i < m; i++) {
        int64_t r = rows[from + i];
        k[i] = (keyed){attn_id_seqs_len(src, r), tgt ? attn_id_seqs_len(tgt, r) : 0, i, r};
    }
    qsort(k, (size_t)m, sizeof *k, keyed_cmp);
    for (int64_t i = 0; i < m; i++) rows[from + i] = k[i].row;
}

/* Shuffles the order of b's batches (their contents stay as they are). */
static attn_status shuffle_batches(attn_batches *b, attn_rng *rng)
{
    int64_t n = b->offsets[b->count];
    int64_t *order = malloc((size_t)(b->count ? b->count : 1) * sizeof *order);
    int64_t *rows = malloc((size_t)(n ? n : 1) * sizeof *rows);
    int64_t *offsets = malloc((size_t)(b->count + 1) * sizeof *offsets);
    attn_status st =
        order && rows && offsets ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "batches: shuffling %lld", (long long)b->count);
    if (st == ATTN_OK) {
        for (int64_t i = 0; i < b->count; i++) order[i] = i;
        attn_rng_shuffle(rng, order, b->count);
        int64_t k = 0;
        for (int64_t i = 0; i < b->count; i++) {
            offsets[i] = k;
            for (int64_t j = b->offsets[order[i]]; j < b->offsets[order[i] + 1]; j++) rows[k++] = b->rows[j];
        }
        offsets[b->count] = k;
        free(b->rows);
        free(b->offsets);
        b->rows = rows;
        b->offsets = offsets;
        rows = offsets = NULL;
    }
    free(order);
    free(rows);
    free(offsets);
    return st;
}

attn_status attn_batches_bucketed(attn_batches *out, const attn_id_seqs *src, const attn_id_seqs *tgt,
                                  int64_t batch_size, int64_t pool_batches, attn_rng *rng)
{
    if (!out || !src || !rng) return attn__fail(ATTN_ERR_ARG, "attn_batches_bucketed: NULL argument");
    if (pool_batches <= 0 || (tgt && tgt->count != src->count))
        return attn__fail(ATTN_ERR_ARG,
                          "attn_batches_bucketed: pool_batches %lld (expected >= 1), %lld "
                          "sources and %lld targets (expected as many)",
                          (long long)pool_batches, (long long)src->count, (long long)(tgt ? tgt->count : src->count));
    int64_t n = src->count;
    attn_status st = batches_init(out, n, batch_size, rng);
    if (st != ATTN_OK) return st;
    int64_t pool;
    if (!attn__mul_ok(batch_size, pool_batches, &pool)) pool = n; /* one pool */
    keyed *k = malloc((size_t)(pool < n ? pool : (n ? n : 1)) * sizeof *k);
    if (!k) st = attn__fail(ATTN_ERR_NOMEM, "batches: a pool of %lld", (long long)pool);
    for (int64_t p = 0; p < n && st == ATTN_OK; p += pool) {
        int64_t end = p + pool < n ? p + pool : n;
        sort_pool(out->rows, k, p, end, src, tgt);
        cut(out, p, end, batch_size);
    }
    if (n == 0) cut(out, 0, 0, batch_size);
    free(k);
    if (st == ATTN_OK) st = shuffle_batches(out, rng);
    if (st != ATTN_OK) attn_batches_free(out);
    return st;
}
