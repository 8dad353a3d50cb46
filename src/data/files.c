/* Whole-file reading for the loaders: plain or gzip-compressed files through zlib (gzread
 * passes plain files through unchanged), into one NUL-terminated buffer. */
#include "data_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define CHUNK (1u << 20)

/* Reads everything left in f into *b; the message names path. */
static attn_status read_all(gzFile f, attn__buf *b, const char *path)
{
    for (;;) {
        attn_status st = attn__buf_reserve(b, CHUNK);
        if (st != ATTN_OK) return st;
        int n = gzread(f, b->data + b->len, CHUNK);
        if (n < 0) {
            int zerr;
            const char *msg = gzerror(f, &zerr);
            return attn__fail(zerr == Z_ERRNO ? ATTN_ERR_IO : ATTN_ERR_FORMAT,
                              "%s: read failed (%s); expected a readable plain or gzip file", path,
                              zerr == Z_ERRNO ? strerror(errno) : msg);
        }
        if (n == 0) {
            /* zlib returns the data it has at a premature end and only says so here */
            int zerr;
            const char *msg = gzerror(f, &zerr);
            if (zerr == Z_BUF_ERROR)
                return attn__fail(ATTN_ERR_FORMAT, "%s: the gzip stream ends early (%s) after %zu "
                                  "bytes; expected a complete plain or gzip file", path, msg, b->len);
            break;
        }
        b->len += (size_t)n;
    }
    b->data[b->len] = '\0';
    return ATTN_OK;
}

attn_status attn__read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    gzFile f = gzopen(path, "rb");
    if (!f)
        return attn__fail(ATTN_ERR_IO, "%s: cannot open (%s)", path,
                          errno ? strerror(errno) : "out of memory");
    attn__buf b = {0};
    attn_status st = read_all(f, &b, path);
    gzclose(f);
    if (st != ATTN_OK) {
        attn__buf_free(&b);
        return st;
    }
    *data = b.data;
    *len = b.len;
    return ATTN_OK;
}
