/* safetensors writer: collects tensors (copied at add time) and string metadata, then writes
 *   N (u64 little-endian) | header JSON, space-padded so 8 + N is a multiple of 8 | data
 * through the library's output file (src/core/outfile.c: a temporary file synced and renamed
 * onto path, or a device written in place), so a crash or a full disk never leaves a
 * half-written file at path.
 *
 * The header lists "__metadata__" first, then the tensors in the order they were added, with no
 * spaces inside: {"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}. The data
 * buffer holds the tensors by descending element size (stable), so every tensor is aligned to
 * its element size when the buffer is. */
#include "io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct st_entry {
    char *name;
    attn_dtype dtype;
    int ndim;
    int64_t shape[ATTN_ST_MAX_DIMS];
    unsigned char *data; /* (nbytes) little-endian elements */
    size_t nbytes;
    bool borrowed;  /* data belongs to the caller (attn_st_writer_add_ref) */
    uint64_t begin; /* offset in the data buffer, set by save */
} st_entry;

struct attn_st_writer {
    st_entry *entries; /* (count) in insertion order */
    size_t count, cap;
    char **meta; /* (n_meta, 2): key, value */
    size_t n_meta, meta_cap;
};

attn_st_writer *attn_st_writer_new(void)
{
    attn_st_writer *w = calloc(1, sizeof *w);
    if (!w) return attn__fail_null(ATTN_ERR_NOMEM, "could not allocate a safetensors writer");
    return w;
}

void attn_st_writer_free(attn_st_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->count; i++) {
        free(w->entries[i].name);
        if (!w->entries[i].borrowed) free(w->entries[i].data);
    }
    for (size_t i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
    free(w->entries);
    free(w->meta);
    free(w);
}

/* ---- adding ---- */

static bool valid_text(const char *s)
{
    return attn__utf8_valid((const unsigned char *)s, strlen(s));
}

/* Checks name, dtype and shape of a new tensor; *nbytes receives its byte size. */
static attn_status check_new_tensor(const attn_st_writer *w, const char *name, attn_dtype dtype, int ndim,
                                    const int64_t *shape, size_t *nbytes)
{
    if (!w || !name) return attn__fail(ATTN_ERR_ARG, "attn_st_writer_add: writer or name is NULL");
    if (strcmp(name, "__metadata__") == 0 || !valid_text(name))
        return attn__fail(ATTN_ERR_ARG,
                          "attn_st_writer_add: \"%s\" cannot name a tensor "
                          "(reserved, or not UTF-8)",
                          name);
    if (attn_dtype_size(dtype) == 0)
        return attn__fail(ATTN_ERR_ARG, "attn_st_writer_add(\"%s\"): unknown dtype %d", name, (int)dtype);
    if (ndim < 0 || ndim > ATTN_ST_MAX_DIMS || (ndim > 0 && !shape))
        return attn__fail(ATTN_ERR_ARG,
                          "attn_st_writer_add(\"%s\"): %d dimensions%s, expected "
                          "0 to %d",
                          name, ndim, ndim > 0 && !shape ? " and no shape" : "", ATTN_ST_MAX_DIMS);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || !attn__mul_ok(n, shape[i], &n))
            return attn__fail(ATTN_ERR_ARG,
                              "attn_st_writer_add(\"%s\"): dimension %d is %lld "
                              "(negative, or the size overflows)",
                              name, i, (long long)shape[i]);
    }
    int64_t bytes;
    if (!attn__mul_ok(n, (int64_t)attn_dtype_size(dtype), &bytes) || (uint64_t)bytes > SIZE_MAX)
        return attn__fail(ATTN_ERR_NOMEM, "attn_st_writer_add(\"%s\"): too many bytes", name);
    for (size_t i = 0; i < w->count; i++) {
        if (strcmp(w->entries[i].name, name) == 0)
            return attn__fail(ATTN_ERR_ARG,
                              "attn_st_writer_add: a tensor named \"%s\" was "
                              "already added",
                              name);
    }
    *nbytes = (size_t)bytes;
    return ATTN_OK;
}

/* A new entry with room for nbytes of data (or pointing at the caller's borrowed bytes),
 * appended to w; NULL when out of memory. */
static st_entry *append_entry(attn_st_writer *w, const char *name, attn_dtype dtype, int ndim, const int64_t *shape,
                              size_t nbytes, const void *borrowed)
{
    if (w->count == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        st_entry *e = realloc(w->entries, cap * sizeof *e);
        if (!e) return attn__fail_null(ATTN_ERR_NOMEM, "attn_st_writer_add(\"%s\"): out of memory", name);
        w->entries = e;
        w->cap = cap;
    }
    st_entry *e = &w->entries[w->count];
    *e = (st_entry){.name = strdup(name), .dtype = dtype, .ndim = ndim, .nbytes = nbytes, .borrowed = borrowed != NULL};
    e->data = borrowed ? (unsigned char *)(uintptr_t)borrowed : malloc(nbytes ? nbytes : 1);
    if (!e->name || !e->data) {
        free(e->name);
        if (!borrowed) free(e->data);
        return attn__fail_null(ATTN_ERR_NOMEM,
                               "attn_st_writer_add(\"%s\"): cannot copy %zu "
                               "bytes",
                               name, nbytes);
    }
    for (int i = 0; i < ndim; i++) e->shape[i] = shape[i];
    w->count++;
    return e;
}

attn_status attn_st_writer_add(attn_st_writer *w, const char *name, attn_dtype dtype, int ndim, const int64_t *shape,
                               const void *data)
{
    size_t nbytes;
    attn_status s = check_new_tensor(w, name, dtype, ndim, shape, &nbytes);
    if (s != ATTN_OK) return s;
    if (!data && nbytes) return attn__fail(ATTN_ERR_ARG, "attn_st_writer_add(\"%s\"): data is NULL", name);
    st_entry *e = append_entry(w, name, dtype, ndim, shape, nbytes, NULL);
    if (!e) return attn_last_status();
    if (nbytes) memcpy(e->data, data, nbytes);
    return ATTN_OK;
}

attn_status attn_st_writer_add_ref(attn_st_writer *w, const char *name, attn_dtype dtype, int ndim,
                                   const int64_t *shape, const void *data)
{
    size_t nbytes;
    attn_status s = check_new_tensor(w, name, dtype, ndim, shape, &nbytes);
    if (s != ATTN_OK) return s;
    if (!data) return attn__fail(ATTN_ERR_ARG, "attn_st_writer_add_ref(\"%s\"): data is NULL", name);
    return append_entry(w, name, dtype, ndim, shape, nbytes, data) ? ATTN_OK : attn_last_status();
}

attn_status attn_st_writer_add_tensor(attn_st_writer *w, const char *name, const attn_tensor *t)
{
    if (!t) return attn__fail(ATTN_ERR_ARG, "attn_st_writer_add_tensor: tensor is NULL");
    size_t nbytes;
    attn_status s = check_new_tensor(w, name, ATTN_DTYPE_F32, t->ndim, t->shape, &nbytes);
    if (s != ATTN_OK) return s;
    st_entry *e = append_entry(w, name, ATTN_DTYPE_F32, t->ndim, t->shape, nbytes, NULL);
    if (!e) return attn_last_status();
    for (int64_t i = 0; i < t->numel; i++) { /* float32 little-endian on any host */
        uint32_t u;
        memcpy(&u, &t->data[i], sizeof u);
        for (int b = 0; b < 4; b++) e->data[4 * i + b] = (unsigned char)(u >> (8 * b));
    }
    return ATTN_OK;
}

attn_status attn_st_writer_set_metadata(attn_st_writer *w, const char *key, const char *value)
{
    if (!w || !key || !value)
        return attn__fail(ATTN_ERR_ARG, "attn_st_writer_set_metadata: writer, key or value is NULL");
    if (!valid_text(key) || !valid_text(value))
        return attn__fail(ATTN_ERR_ARG,
                          "attn_st_writer_set_metadata(\"%s\"): key and value "
                          "must be UTF-8",
                          key);
    char *v = strdup(value);
    if (!v) return attn__fail(ATTN_ERR_NOMEM, "attn_st_writer_set_metadata: out of memory");
    for (size_t i = 0; i < w->n_meta; i++) { /* an existing key gets the new value */
        if (strcmp(w->meta[2 * i], key) == 0) {
            free(w->meta[2 * i + 1]);
            w->meta[2 * i + 1] = v;
            return ATTN_OK;
        }
    }
    if (w->n_meta == w->meta_cap) {
        size_t cap = w->meta_cap ? 2 * w->meta_cap : 8;
        char **m = realloc(w->meta, 2 * cap * sizeof *m);
        if (!m) {
            free(v);
            return attn__fail(ATTN_ERR_NOMEM, "attn_st_writer_set_metadata: out of memory");
        }
        w->meta = m;
        w->meta_cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        free(v);
        return attn__fail(ATTN_ERR_NOMEM, "attn_st_writer_set_metadata: out of memory");
    }
    w->meta[2 * w->n_meta] = k;
    w->meta[2 * w->n_meta + 1] = v;
    w->n_meta++;
    return ATTN_OK;
}

/* ---- the header text (attn__buf: a failure sticks in failed, read once the header is built) ---- */

static void sb_str(attn__buf *b, const char *s)
{
    attn__buf_append(b, s, strlen(s));
}

static void sb_u64(attn__buf *b, uint64_t v)
{
    char num[24];
    attn__buf_append(b, num, (size_t)snprintf(num, sizeof num, "%llu", (unsigned long long)v));
}

/* s as a JSON string: quotes, backslashes and control characters escaped, UTF-8 kept. */
static void sb_json_string(attn__buf *b, const char *s)
{
    attn__buf_append(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            attn__buf_append(b, esc, 2);
        } else if (*p < 0x20) {
            attn__buf_append(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", *p));
        } else {
            attn__buf_append(b, (const char *)p, 1);
        }
    }
    attn__buf_append(b, "\"", 1);
}

static void sb_entry(attn__buf *b, const st_entry *e)
{
    sb_json_string(b, e->name);
    sb_str(b, ":{\"dtype\":\"");
    sb_str(b, attn_dtype_name(e->dtype));
    sb_str(b, "\",\"shape\":[");
    for (int i = 0; i < e->ndim; i++) {
        if (i) attn__buf_append(b, ",", 1);
        sb_u64(b, (uint64_t)e->shape[i]);
    }
    sb_str(b, "],\"data_offsets\":[");
    sb_u64(b, e->begin);
    attn__buf_append(b, ",", 1);
    sb_u64(b, e->begin + e->nbytes);
    sb_str(b, "]}");
}

/* The header JSON padded with spaces so that 8 + its length is a multiple of 8. */
static void build_header(attn__buf *b, const attn_st_writer *w)
{
    attn__buf_append(b, "{", 1);
    if (w->n_meta) {
        sb_str(b, "\"__metadata__\":{");
        for (size_t i = 0; i < w->n_meta; i++) {
            if (i) attn__buf_append(b, ",", 1);
            sb_json_string(b, w->meta[2 * i]);
            attn__buf_append(b, ":", 1);
            sb_json_string(b, w->meta[2 * i + 1]);
        }
        attn__buf_append(b, "}", 1);
    }
    for (size_t i = 0; i < w->count; i++) {
        if (i || w->n_meta) attn__buf_append(b, ",", 1);
        sb_entry(b, &w->entries[i]);
    }
    attn__buf_append(b, "}", 1);
    while ((8 + b->len) % 8 != 0) attn__buf_append(b, " ", 1);
}

/* Data order: by descending element size, ties in insertion order (a stable insertion sort of
 * the indices). Sets every entry's begin. */
static void layout_data(attn_st_writer *w, size_t *order /* (count) */)
{
    for (size_t i = 0; i < w->count; i++) {
        size_t j = i, size = attn_dtype_size(w->entries[i].dtype);
        for (; j > 0 && attn_dtype_size(w->entries[order[j - 1]].dtype) < size; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    uint64_t at = 0;
    for (size_t i = 0; i < w->count; i++) {
        w->entries[order[i]].begin = at;
        at += w->entries[order[i]].nbytes;
    }
}

/* ---- saving ---- */

/* Writes the file through o; 0 or the errno of the first failure. */
static int write_file(FILE *fp, const attn__buf *header, const attn_st_writer *w, const size_t *order)
{
    errno = 0;
    unsigned char n8[8];
    for (int b = 0; b < 8; b++) n8[b] = (unsigned char)((uint64_t)header->len >> (8 * b));
    bool ok = fwrite(n8, 1, 8, fp) == 8 && fwrite(header->data, 1, header->len, fp) == header->len;
    for (size_t i = 0; ok && i < w->count; i++) {
        const st_entry *e = &w->entries[order[i]];
        ok = fwrite(e->data, 1, e->nbytes, fp) == e->nbytes;
    }
    return ok ? 0 : (errno ? errno : EIO);
}

/* The data's layout and the header's text in header; the order of the data (count), to free, or
 * NULL when memory ran out */
static size_t *header_of(attn_st_writer *w, attn__buf *header)
{
    size_t *order = malloc((w->count ? w->count : 1) * sizeof *order); /* (count) */
    if (!order) return NULL;
    layout_data(w, order);
    build_header(header, w);
    if (!header->failed) return order;
    free(order);
    return NULL;
}

attn_status attn_st_writer_header_bytes(attn_st_writer *w, size_t *bytes)
{
    if (!w || !bytes) return attn__fail(ATTN_ERR_ARG, "attn_st_writer_header_bytes: writer or bytes is NULL");
    attn__buf header = {0};
    size_t *order = header_of(w, &header);
    attn_status s = order ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "out of memory building the header");
    *bytes = header.len;
    attn__buf_free(&header);
    free(order);
    return s;
}

attn_status attn_st_writer_save(attn_st_writer *w, const char *path)
{
    if (!w || !path || !*path) return attn__fail(ATTN_ERR_ARG, "attn_st_writer_save: writer or path missing");
    attn__buf header = {0};
    size_t *order = header_of(w, &header);
    attn_status s = ATTN_OK;
    attn__outfile out;
    if (!order) {
        s = attn__fail(ATTN_ERR_NOMEM, "%s: out of memory building the header", path);
    } else if (header.len > ATTN_ST_MAX_HEADER) {
        s = attn__fail(ATTN_ERR_ARG,
                       "%s: the header would be %zu bytes (%zu tensors, %zu metadata keys), over the %u that "
                       "safetensors readers accept; nothing written",
                       path, header.len, w->count, w->n_meta, ATTN_ST_MAX_HEADER);
    } else if ((s = attn__outfile_open(&out, path)) == ATTN_OK) {
        int err = write_file(out.fp, &header, w, order);
        s = attn__outfile_close(&out, err ? attn__outfile_write_error(&out, err) : ATTN_OK);
    }
    attn__buf_free(&header);
    free(order);
    return s;
}
