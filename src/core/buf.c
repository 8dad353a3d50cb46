/* The growable byte string of the core and its sibling libraries (core_internal.h: attn__buf). */
#include "core_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

attn_status attn__buf_reserve(attn__buf *b, size_t more)
{
    if (b->failed) return ATTN_ERR_NOMEM;
    attn_status st = ATTN_OK;
    if (more > SIZE_MAX / 2 - b->len - 1)
        st = attn__fail(ATTN_ERR_NOMEM, "text buffer: %zu + %zu bytes is too large", b->len, more);
    const size_t need = b->len + more + 1;
    if (st != ATTN_OK || need <= b->cap) {
        b->failed = st != ATTN_OK;
        return st;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) {
        b->failed = true;
        return attn__fail(ATTN_ERR_NOMEM, "text buffer: cannot allocate %zu bytes", cap);
    }
    b->data = d;
    b->cap = cap;
    return ATTN_OK;
}

attn_status attn__buf_append(attn__buf *b, const char *s, size_t n)
{
    attn_status st = attn__buf_reserve(b, n);
    if (st != ATTN_OK) return st;
    if (n) memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return ATTN_OK;
}

void attn__buf_free(attn__buf *b)
{
    free(b->data);
    *b = (attn__buf){0};
}
