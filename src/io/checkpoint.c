/* Checkpoints: a safetensors file with every parameter under its state_dict name, the optimizer
 * state as 1-D tensors under the optimizer's names ("exp_avg.<param>", ...), and __metadata__
 *   format = "attn-checkpoint", version = "1", step = "<optimizer steps>" (only with an
 *   optimizer), then the caller's key/values.
 * Loading checks everything (format, names, shapes, step) before it changes anything. */
#include "io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_FORMAT "attn-checkpoint"
#define CKPT_VERSION "1"

static bool reserved_key(const char *key)
{
    return strcmp(key, "format") == 0 || strcmp(key, "version") == 0 || strcmp(key, "step") == 0;
}

/* format, version, step and the caller's pairs. */
static attn_status add_metadata(attn_st_writer *w, const attn_optim *opt, const char *const *meta_kv, int n_meta)
{
    attn_status s = attn_st_writer_set_metadata(w, "format", CKPT_FORMAT);
    if (s == ATTN_OK) s = attn_st_writer_set_metadata(w, "version", CKPT_VERSION);
    if (s == ATTN_OK && opt) {
        char step[24];
        snprintf(step, sizeof step, "%lld", (long long)attn_optim_step_count(opt));
        s = attn_st_writer_set_metadata(w, "step", step);
    }
    for (int i = 0; s == ATTN_OK && i < n_meta; i++) {
        const char *key = meta_kv[2 * i], *value = meta_kv[2 * i + 1];
        if (!key || !value)
            return attn__fail(ATTN_ERR_ARG,
                              "attn_checkpoint_save: metadata pair %d has a NULL "
                              "key or value",
                              i);
        if (reserved_key(key))
            return attn__fail(ATTN_ERR_ARG,
                              "attn_checkpoint_save: metadata key \"%s\" is "
                              "reserved (format, version, step)",
                              key);
        s = attn_st_writer_set_metadata(w, key, value);
    }
    return s;
}

/* t under name: copied as little-endian float32, or (borrow: for measuring the header) referenced */
static attn_status add_one(attn_st_writer *w, const char *name, const attn_tensor *t, bool borrow)
{
    return borrow ? attn_st_writer_add_ref(w, name, ATTN_DTYPE_F32, t->ndim, t->shape, t->data)
                  : attn_st_writer_add_tensor(w, name, t);
}

/* Every parameter, then every optimizer state buffer as a 1-D tensor. */
static attn_status add_tensors(attn_st_writer *w, const attn_params *p, const attn_optim *opt, bool borrow)
{
    attn_status s = ATTN_OK;
    for (size_t i = 0; s == ATTN_OK && i < attn_params_count(p); i++)
        s = add_one(w, attn_params_name(p, i), attn_params_at(p, i), borrow);
    size_t n_state = opt ? attn_optim_state_count(opt) : 0;
    for (size_t i = 0; s == ATTN_OK && i < n_state; i++) {
        attn_tensor view = {.ndim = 1, .shape = {0, 1, 1, 1}};
        const char *name;
        s = attn_optim_state_at(opt, i, &name, &view.data, &view.numel);
        view.shape[0] = view.numel;
        if (s == ATTN_OK) s = add_one(w, name, &view, borrow);
    }
    return s;
}

/* The checkpoint's writer (NULL with the error set); borrow as add_one's */
static attn_st_writer *checkpoint_writer(const char *who, const attn_params *p, const attn_optim *opt,
                                         const char *const *meta_kv, int n_meta, bool borrow)
{
    if (!p || (n_meta > 0 && !meta_kv)) return attn__fail_null(ATTN_ERR_ARG, "%s: params or metadata missing", who);
    if (n_meta < 0) return attn__fail_null(ATTN_ERR_ARG, "%s: n_meta %d < 0", who, n_meta);
    attn_st_writer *w = attn_st_writer_new();
    if (w && (add_metadata(w, opt, meta_kv, n_meta) != ATTN_OK || add_tensors(w, p, opt, borrow) != ATTN_OK)) {
        attn_st_writer_free(w);
        return NULL;
    }
    return w;
}

/* The checkpoint's writer, then its file saved to path, or without path its header's size in
 * *bytes */
static attn_status write_checkpoint(const char *fn, const attn_params *p, const attn_optim *opt,
                                    const char *const *meta_kv, int n_meta, const char *path, size_t *bytes)
{
    attn_st_writer *w = checkpoint_writer(fn, p, opt, meta_kv, n_meta, !path);
    if (!w) return attn_last_status();
    attn_status s = path ? attn_st_writer_save(w, path) : attn_st_writer_header_bytes(w, bytes);
    attn_st_writer_free(w);
    return s;
}

attn_status attn_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt,
                                 const char *const *meta_kv, int n_meta)
{
    if (!path) return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_save: path missing");
    return write_checkpoint("attn_checkpoint_save", p, opt, meta_kv, n_meta, path, NULL);
}

attn_status attn_checkpoint_header_bytes(const attn_params *p, const attn_optim *opt, const char *const *meta_kv,
                                         int n_meta, size_t *bytes)
{
    if (!bytes) return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_header_bytes: bytes is NULL");
    return write_checkpoint("attn_checkpoint_header_bytes", p, opt, meta_kv, n_meta, NULL, bytes);
}

/* ---- loading ---- */

/* format and version must be ours. */
static attn_status check_format(const attn_st_file *f, const char *path)
{
    const char *format = attn_st_metadata(f, "format"), *version = attn_st_metadata(f, "version");
    if (!format || strcmp(format, CKPT_FORMAT) != 0)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: not an attn checkpoint: metadata \"format\" is "
                          "%s%s%s, expected \"" CKPT_FORMAT "\"",
                          path, format ? "\"" : "", format ? format : "missing", format ? "\"" : "");
    if (!version || strcmp(version, CKPT_VERSION) != 0)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: checkpoint version %s%s%s, this library reads "
                          "version " CKPT_VERSION,
                          path, version ? "\"" : "", version ? version : "missing", version ? "\"" : "");
    return ATTN_OK;
}

/* The "step" metadata as a non-negative count; *present is false when there is none. */
static attn_status read_step(const attn_st_file *f, const char *path, int64_t *step, bool *present)
{
    const char *text = attn_st_metadata(f, "step");
    *present = text != NULL;
    if (!text) return ATTN_OK;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end || errno || v < 0)
        return attn__fail(ATTN_ERR_FORMAT,
                          "%s: metadata \"step\" is \"%s\", expected a "
                          "non-negative integer",
                          path, text);
    *step = v;
    return ATTN_OK;
}

/* Optimizer state of some parameter ("exp_avg.<param>", ...): kept in checkpoints, skipped
 * when loading into a model without an optimizer. */
static bool is_any_state_of(const attn_params *p, const char *name)
{
    static const char *const kinds[] = {"exp_avg.", "exp_avg_sq.", "momentum_buffer."};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        size_t n = strlen(kinds[k]);
        if (strncmp(name, kinds[k], n) == 0 && attn_params_get(p, name + n)) return true;
    }
    return false;
}

typedef struct model {
    const attn_params *p;
    const attn_optim *opt; /* NULL: no optimizer, its state in the file is skipped */
    char kinds[3][24];     /* with opt: the kinds of its state ("exp_avg", ...), from parameter 0's names */
    int n_kinds;
} model;

/* The optimizer's state kinds, so that a name is checked by a lookup rather than a scan. */
static void model_kinds(model *m)
{
    const size_t np = attn_params_count(m->p), ns = m->opt ? attn_optim_state_count(m->opt) : 0;
    for (size_t b = 0; np && b < ns / np && m->n_kinds < 3; b++) {
        const char *state;
        if (attn_optim_state_at(m->opt, b, &state, NULL, NULL) != ATTN_OK) continue;
        snprintf(m->kinds[m->n_kinds++], sizeof m->kinds[0], "%.*s", (int)strcspn(state, "."), state);
    }
}

/* "<kind>.<parameter>" of the optimizer given. */
static bool is_state_name(const model *m, const char *name)
{
    for (int k = 0; k < m->n_kinds; k++) {
        size_t n = strlen(m->kinds[k]);
        if (!strncmp(name, m->kinds[k], n) && name[n] == '.' && attn_params_get(m->p, name + n + 1)) return true;
    }
    return false;
}

/* Strict: a file tensor must be a parameter, or optimizer state (of the optimizer given, or of
 * any parameter when none is). */
static bool known_tensor(const char *name, const void *user)
{
    const model *m = user;
    return attn_params_get(m->p, name) || (m->opt ? is_state_name(m, name) : is_any_state_of(m->p, name));
}

/* Every parameter, then every optimizer state buffer, as load destinations. */
static void fill_items(attn__load_item *items, int64_t *state_numel, const attn_params *p, const attn_optim *opt)
{
    const size_t np = attn_params_count(p), ns = opt ? attn_optim_state_count(opt) : 0;
    for (size_t i = 0; i < np; i++) {
        attn_tensor *t = attn_params_at(p, i);
        items[i] = (attn__load_item){attn_params_name(p, i), t->ndim, t->shape, t->data, NULL};
    }
    for (size_t i = 0; i < ns; i++) {
        attn__load_item *it = &items[np + i];
        *it = (attn__load_item){.ndim = 1, .shape = &state_numel[i]};
        attn_optim_state_at(opt, i, &it->key, &it->dst, &state_numel[i]);
    }
}

attn_status attn_checkpoint_load(const char *path, attn_params *p, attn_optim *opt, bool strict)
{
    if (!path || !p) return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_load: path or params missing");
    attn_st_file *f = attn_st_open(path);
    if (!f) return attn_last_status();
    attn_status s = attn_checkpoint_load_file(f, p, opt, strict);
    attn_st_close(f);
    return s;
}

attn_status attn_checkpoint_load_file(const attn_st_file *f, attn_params *p, attn_optim *opt, bool strict)
{
    if (!f || !p) return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_load_file: file or params missing");
    const char *path = attn__st_label(f);
    const size_t np = attn_params_count(p), ns = opt ? attn_optim_state_count(opt) : 0, n = np + ns;
    attn__load_item *items = calloc(n ? n : 1, sizeof *items);       /* (n) */
    int64_t *state_numel = calloc(ns ? ns : 1, sizeof *state_numel); /* (ns) */
    int64_t step = 0;
    bool has_step = false;
    attn_status s =
        items && state_numel ? check_format(f, path) : attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    if (s == ATTN_OK) s = read_step(f, path, &step, &has_step);
    if (s == ATTN_OK && opt && strict && !has_step)
        s = attn__fail(ATTN_ERR_FORMAT, "%s: no optimizer step count (strict load)", path);
    model m = {.p = p, .opt = opt};
    model_kinds(&m);
    const attn__load_rules rules = {.require_all = strict, .known = strict ? known_tensor : NULL, .user = &m};
    if (s == ATTN_OK) {
        fill_items(items, state_numel, p, opt);
        s = attn__load_match(f, path, "", items, n, &rules);
    }
    if (s == ATTN_OK) s = attn__load_finite(items, n, path);
    if (s == ATTN_OK) { /* everything checked: now copy */
        attn__load_copy(items, n);
        bool all_state = true;
        for (size_t i = np; i < n; i++) all_state = all_state && items[i].src;
        if (opt && has_step && all_state) attn_optim_set_step_count(opt, step);
    }
    free(items);
    free(state_numel);
    return s;
}

/* ---- averaging ---- */

attn_status attn_checkpoint_average(attn_params *p, const char *const *paths, int n)
{
    if (!p || (n > 0 && !paths) || n < 0)
        return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_average: params or paths missing");
    const size_t np = attn_params_count(p);
    const int64_t total = attn_params_numel(p);
    double *sum = malloc((size_t)(total ? total : 1) * sizeof *sum);      /* (total) p, then + each file */
    float *values = malloc((size_t)(total ? total : 1) * sizeof *values); /* (total) one file's */
    attn__load_item *items = calloc(np ? np : 1, sizeof *items);          /* (np) into values */
    attn_status s =
        sum && values && items ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "attn_checkpoint_average: out of memory");
    for (size_t i = 0, at = 0; s == ATTN_OK && i < np; i++) {
        const attn_tensor *t = attn_params_at(p, i);
        items[i] = (attn__load_item){attn_params_name(p, i), t->ndim, t->shape, values + at, NULL};
        for (int64_t e = 0; e < t->numel; e++) sum[at++] = t->data[e];
    }
    const attn__load_rules every_parameter = {.require_all = true};
    for (int k = 0; s == ATTN_OK && k < n; k++) {
        attn_st_file *f = attn_st_open(paths[k]);
        s = f ? check_format(f, paths[k]) : attn_last_status();
        if (s == ATTN_OK) s = attn__load_match(f, paths[k], "", items, np, &every_parameter);
        if (s == ATTN_OK) s = attn__load_finite(items, np, paths[k]);
        if (s == ATTN_OK) {
            attn__load_copy(items, np);
            for (int64_t e = 0; e < total; e++) sum[e] += values[e];
        }
        attn_st_close(f);
    }
    for (size_t i = 0, at = 0; s == ATTN_OK && i < np; i++) { /* every file checked out: the mean */
        attn_tensor *t = attn_params_at(p, i);
        for (int64_t e = 0; e < t->numel; e++) t->data[e] = (float)(sum[at++] / (double)(n + 1));
    }
    free(items);
    free(values);
    free(sum);
    return s;
}
