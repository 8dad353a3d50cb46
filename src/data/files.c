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

#define READ_MAX (1u << 20) /* the most one gzread asks for */

/* Reads everything left in f into *b, which starts with room for `expect` bytes (the file's size:
 * all of a plain file) and grows by doubling (a gzip file's text); what is not used is given back
 * at the end, so a text holds about its own size. The message names path. */
static attn_status read_all(gzFile f, attn__buf *b, size_t expect, const char *path)
{
    attn_status st = attn__buf_reserve(b, expect > 0 ? expect : 1);
    for (; st == ATTN_OK;) {
        if (b->cap - b->len - 1 == 0 && (st = attn__buf_reserve(b, b->cap)) != ATTN_OK) break;
        size_t room = b->cap - b->len - 1;
        int n = gzread(f, b->data + b->len, (unsigned)(room < READ_MAX ? room : READ_MAX));
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
                return attn__fail(ATTN_ERR_FORMAT,
                                  "%s: the gzip stream ends early (%s) after %zu "
                                  "bytes; expected a complete plain or gzip file",
                                  path, msg, b->len);
            break;
        }
        b->len += (size_t)n;
    }
    if (st == ATTN_ERR_NOMEM) /* the buffer's own message names no file */
        return attn__fail(ATTN_ERR_NOMEM,
                          "%s: its text passes %zu bytes (%zu on disk) and there is no memory for more; expected a "
                          "smaller file (a gzip file can hold a thousand times its size)",
                          path, b->len, expect);
    if (st != ATTN_OK) return st;
    b->data[b->len] = '\0';
    char *fit = realloc(b->data, b->len + 1); /* the room not used goes back */
    if (fit) b->data = fit, b->cap = b->len + 1;
    return ATTN_OK;
}

const char *attn__file_kind(mode_t mode)
{
    return S_ISDIR(mode)    ? "a folder"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
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
    s = read_all(f, &b, (size_t)st.st_size, path);
    gzclose(f);
    if (s != ATTN_OK) {
        attn__buf_free(&b);
        return s;
    }
    *data = b.data;
    *len = b.len;
    return ATTN_OK;
}
