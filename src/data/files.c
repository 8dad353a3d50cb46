/* Whole-file reading for the loaders: plain or gzip-compressed files through zlib (gzread
 * passes plain files through unchanged), into one NUL-terminated buffer. Only regular files:
 * a FIFO or device is refused by name, never waited on. */
#include "data_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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

const char *attn__file_kind(mode_t mode)
{
    return S_ISDIR(mode) ? "a folder" : S_ISFIFO(mode) ? "a FIFO" : S_ISCHR(mode) ? "a character device"
           : S_ISBLK(mode) ? "a block device" : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

attn_status attn__read_file(const char *path, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    /* O_NONBLOCK: a FIFO must not block the open; it is refused below like a device */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return attn__fail(ATTN_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    struct stat st;
    attn_status s = ATTN_OK;
    if (fstat(fd, &st) != 0)
        s = attn__fail(ATTN_ERR_IO, "%s: cannot open (%s)", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = attn__fail(ATTN_ERR_IO, "%s: not a regular file (%s); expected a plain or gzip file", path,
                       attn__file_kind(st.st_mode));
    if (s != ATTN_OK) {
        close(fd);
        return s;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        close(fd);
        return attn__fail(ATTN_ERR_NOMEM, "%s: cannot open (out of memory)", path);
    }
    attn__buf b = {0};
    s = read_all(f, &b, path);
    gzclose(f);
    if (s != ATTN_OK) {
        attn__buf_free(&b);
        return s;
    }
    *data = b.data;
    *len = b.len;
    return ATTN_OK;
}
