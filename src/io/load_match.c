/* What every load into parameters shares (state_dicts, checkpoints, checkpoint averaging):
 * matching destinations with a file's tensors, one message that names every missing,
 * unexpected and mis-shaped tensor, the finiteness check, and the copy once all is checked. */
#include "io_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    LIST_BYTES = 1200,
    FINITE_CHUNK = 4096
}; /* 3 lists fit attn_last_error()'s 4 KiB */

/* Names of one kind of problem, as many as fit, then a count of the rest. */
typedef struct name_list {
    char text[LIST_BYTES];
    size_t len;
    int count, shown;
} name_list;

static void list_add(name_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void list_add(name_list *l, const char *fmt, ...)
{
    char item[LIST_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    l->count++;
    const char *sep = l->shown ? ", " : "";
    if (n < 0 || l->len + strlen(sep) + (size_t)n + 1 > sizeof l->text - 16) return; /* room for "and N more" */
    l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, "%s%s", sep, item);
    l->shown++;
}

/* "missing 2: \"a\", \"b\"" (with "and N more" when some did not fit); "" when empty. */
static const char *list_str(char *out, size_t len, const char *what, const name_list *l)
{
    out[0] = '\0';
    if (l->count == 0) return out;
    if (l->count > l->shown)
        snprintf(out, len, "%s %d: %s and %d more", what, l->count, l->text, l->count - l->shown);
    else
        snprintf(out, len, "%s %d: %s", what, l->count, l->text);
    return out;
}

attn_status attn__load_match(const attn_st_file *f, const char *label, const char *context, attn__load_item *items,
                             size_t n, const attn__load_rules *rules)
{
    name_list missing = {0}, unexpected = {0}, shapes = {0};
    char a[160], b[160];
    for (size_t i = 0; i < n; i++) {
        attn__load_item *it = &items[i];
        it->src = attn_st_find(f, it->key);
        if (!it->src) {
            if (rules->require_all) list_add(&missing, "\"%s\"", it->key);
            continue;
        }
        bool same = it->src->ndim == it->ndim;
        for (int d = 0; same && d < it->ndim; d++) same = it->src->shape[d] == it->shape[d];
        if (!same)
            list_add(&shapes, "\"%s\" %s in the file, %s in the module", it->key,
                     attn__dims_str(a, sizeof a, it->src->ndim, it->src->shape),
                     attn__dims_str(b, sizeof b, it->ndim, it->shape));
    }
    for (size_t i = 0; rules->known && i < attn_st_count(f); i++) {
        const char *name = attn_st_at(f, i)->name;
        if (!rules->known(name, rules->user)) list_add(&unexpected, "\"%s\"", name);
    }
    if (missing.count + unexpected.count + shapes.count == 0) return ATTN_OK;
    char m[LIST_BYTES + 64], u[LIST_BYTES + 64], s[LIST_BYTES + 64];
    list_str(m, sizeof m, "missing", &missing);
    list_str(u, sizeof u, "unexpected", &unexpected);
    list_str(s, sizeof s, "wrong shape", &shapes);
    attn_status status = missing.count + unexpected.count ? ATTN_ERR_FORMAT : ATTN_ERR_SHAPE;
    return attn__fail(status, "%s: the file does not fit the parameters%s: %s%s%s%s%s", label, context, m,
                      *m && (*u || *s) ? "; " : "", u, *u && *s ? "; " : "", s);
}

/* ATTN_OK when every value of t is finite; else ATTN_ERR_NUMERIC naming it and the first bad
 * element's index. buf: FINITE_CHUNK floats. */
static attn_status check_finite(const attn_st_tensor *t, const char *label, float *buf)
{
    const size_t size = attn_dtype_size(t->dtype);
    for (int64_t start = 0; start < t->numel; start += FINITE_CHUNK) {
        attn_st_tensor chunk = *t; /* elements [start, start + n) of the same contiguous data */
        chunk.numel = t->numel - start < FINITE_CHUNK ? t->numel - start : FINITE_CHUNK;
        chunk.data = (const unsigned char *)t->data + (size_t)start * size;
        chunk.nbytes = (size_t)chunk.numel * size;
        attn__st_to_f32(buf, &chunk);
        for (int64_t i = 0; i < chunk.numel; i++)
            if (!isfinite(buf[i])) return attn__fail_nonfinite(label, t->name, buf[i], t->ndim, t->shape, start + i);
    }
    return ATTN_OK;
}

attn_status attn__load_finite(const attn__load_item *items, size_t n, const char *label)
{
    float *buf = malloc(FINITE_CHUNK * sizeof *buf);
    if (!buf) return attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", label);
    attn_status s = ATTN_OK;
    for (size_t i = 0; s == ATTN_OK && i < n; i++)
        if (items[i].src) s = check_finite(items[i].src, label, buf);
    free(buf);
    return s;
}

void attn__load_copy(const attn__load_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (items[i].src) attn__st_to_f32(items[i].dst, items[i].src);
}
