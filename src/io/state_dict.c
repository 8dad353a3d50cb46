/* PyTorch state_dicts: a safetensors file of tensors under state_dict names (as
 * safetensors.torch.save_file writes it, or tools/safetensors_convert.py from a torch.save file)
 * loaded into a registry by name, and the matching save.
 *   file key of parameter i = prefix + its name
 *   strict: every parameter has its key, and no key that starts with prefix is left over
 *   always: shapes equal (torch's load_state_dict refuses a size mismatch even when not strict),
 *           values finite, any dtype the reader knows (converted to float32)
 * Every problem is named, not just the first, and nothing changes unless the file checks out. */
#include "io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { LIST_BYTES = 1200, FINITE_CHUNK = 4096 }; /* 3 lists fit attn_last_error()'s 4 KiB */

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

/* The key of parameter `name` under prefix into buf; false when it does not fit. */
static bool make_key(char *buf, size_t len, const char *prefix, const char *name)
{
    int n = snprintf(buf, len, "%s%s", prefix, name);
    return n >= 0 && (size_t)n < len;
}

/* Matches every parameter with its file tensor (src[i], NULL when absent) and lists what does
 * not fit. ATTN_OK, or a failure whose message names every problem. */
static attn_status plan(const attn_params *p, const attn_st_file *f, const char *label,
                        const char *prefix, bool strict, const attn_st_tensor **src)
{
    name_list missing = {0}, unexpected = {0}, shapes = {0};
    const size_t np = attn_params_count(p), plen = strlen(prefix);
    char key[1024], a[160], b[160];
    for (size_t i = 0; i < np; i++) {
        const attn_tensor *t = attn_params_at(p, i);
        src[i] = make_key(key, sizeof key, prefix, attn_params_name(p, i)) ? attn_st_find(f, key) : NULL;
        if (!src[i]) {
            if (strict) list_add(&missing, "\"%s\"", key);
            continue;
        }
        bool same = src[i]->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = src[i]->shape[d] == t->shape[d];
        if (!same)
            list_add(&shapes, "\"%s\" %s in the file, %s in the module", key,
                     attn__dims_str(a, sizeof a, src[i]->ndim, src[i]->shape),
                     attn__dims_str(b, sizeof b, t->ndim, t->shape));
    }
    for (size_t i = 0; strict && i < attn_st_count(f); i++) {
        const char *name = attn_st_at(f, i)->name;
        if (strncmp(name, prefix, plen) == 0 && !attn_params_get(p, name + plen))
            list_add(&unexpected, "\"%s\"", name);
    }
    if (missing.count + unexpected.count + shapes.count == 0) return ATTN_OK;
    char m[LIST_BYTES + 64], u[LIST_BYTES + 64], s[LIST_BYTES + 64];
    list_str(m, sizeof m, "missing", &missing);
    list_str(u, sizeof u, "unexpected", &unexpected);
    list_str(s, sizeof s, "wrong shape", &shapes);
    attn_status status = missing.count + unexpected.count ? ATTN_ERR_FORMAT : ATTN_ERR_SHAPE;
    return attn__fail(status, "%s: the state_dict does not fit the parameters%s%s%s: %s%s%s%s%s",
                      label, *prefix ? " under prefix \"" : "", prefix, *prefix ? "\"" : "", m,
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
        for (int64_t i = 0; i < chunk.numel; i++) {
            if (isfinite(buf[i])) continue;
            char idx[160];
            size_t n = 0;
            int64_t rest = start + i, coord[ATTN_ST_MAX_DIMS] = {0};
            for (int d = t->ndim - 1; d >= 0; d--) {
                coord[d] = t->shape[d] ? rest % t->shape[d] : 0;
                rest = t->shape[d] ? rest / t->shape[d] : 0;
            }
            idx[0] = '\0';
            for (int d = 0; d < t->ndim && n < sizeof idx; d++)
                n += (size_t)snprintf(idx + n, sizeof idx - n, "%s%lld", d ? ", " : "", (long long)coord[d]);
            return attn__fail(ATTN_ERR_NUMERIC, "%s: tensor \"%s\" has %s at index (%s); "
                              "expected finite values", label, t->name,
                              isnan(buf[i]) ? "NaN" : buf[i] > 0 ? "+Inf" : "-Inf", idx);
        }
    }
    return ATTN_OK;
}

attn_status attn_params_load_file(attn_params *p, const attn_st_file *f, const char *prefix,
                                  bool strict, bool *loaded)
{
    if (!p || !f) return attn__fail(ATTN_ERR_ARG, "attn_params_load_file: params or file is NULL");
    if (!prefix) prefix = "";
    const char *label = attn__st_label(f);
    const size_t np = attn_params_count(p);
    const attn_st_tensor **src = calloc(np ? np : 1, sizeof *src); /* (np) NULL: not in the file */
    float *buf = malloc(FINITE_CHUNK * sizeof *buf);
    attn_status s = src && buf ? plan(p, f, label, prefix, strict, src)
                               : attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", label);
    for (size_t i = 0; s == ATTN_OK && i < np; i++)
        if (src[i]) s = check_finite(src[i], label, buf);
    if (s == ATTN_OK) /* everything checked: now copy */
        for (size_t i = 0; i < np; i++)
            if (src[i]) attn__st_to_f32(attn_params_at(p, i)->data, src[i]);
    if (s == ATTN_OK && loaded)
        for (size_t i = 0; i < np; i++) loaded[i] = src[i] != NULL;
    free(src);
    free(buf);
    return s;
}

attn_status attn_params_load(attn_params *p, const char *path, const char *prefix, bool strict)
{
    if (!p || !path) return attn__fail(ATTN_ERR_ARG, "attn_params_load: params or path is NULL");
    attn_st_file *f = attn_st_open(path);
    if (!f) return attn_last_status();
    attn_status s = attn_params_load_file(p, f, prefix, strict, NULL);
    attn_st_close(f);
    return s;
}

attn_status attn_params_save(const attn_params *p, const char *path, const char *prefix)
{
    if (!p || !path) return attn__fail(ATTN_ERR_ARG, "attn_params_save: params or path is NULL");
    if (!prefix) prefix = "";
    attn_st_writer *w = attn_st_writer_new();
    if (!w) return attn_last_status();
    /* "pt": what safetensors.torch.save_file and transformers write, so their loaders take it */
    attn_status s = attn_st_writer_set_metadata(w, "format", "pt");
    char key[1024];
    for (size_t i = 0; s == ATTN_OK && i < attn_params_count(p); i++) {
        if (!make_key(key, sizeof key, prefix, attn_params_name(p, i)))
            s = attn__fail(ATTN_ERR_ARG, "attn_params_save: the name of \"%s\" under prefix \"%s\" "
                           "is longer than %zu bytes", attn_params_name(p, i), prefix, sizeof key - 1);
        else
            s = attn_st_writer_add_tensor(w, key, attn_params_at(p, i));
    }
    if (s == ATTN_OK) s = attn_st_writer_save(w, path);
    attn_st_writer_free(w);
    return s;
}
