/* Checkpoints: a safetensors file with every parameter under its state_dict name, the optimizer
 * state as 1-D tensors under the optimizer's names ("exp_avg.<param>", ...), and __metadata__
 *   format = "attn-checkpoint", version = "1", step = "<optimizer steps>" (only with an
 *   optimizer), then the caller's key/values.
 * Loading checks everything (format, names, shapes, step) before it changes anything. */
#include "io.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
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
static attn_status add_metadata(attn_st_writer *w, const attn_optim *opt,
                                const char *const *meta_kv, int n_meta)
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
            return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_save: metadata pair %d has a NULL "
                              "key or value", i);
        if (reserved_key(key))
            return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_save: metadata key \"%s\" is "
                              "reserved (format, version, step)", key);
        s = attn_st_writer_set_metadata(w, key, value);
    }
    return s;
}

/* Every parameter, then every optimizer state buffer as a 1-D tensor. */
static attn_status add_tensors(attn_st_writer *w, const attn_params *p, const attn_optim *opt)
{
    attn_status s = ATTN_OK;
    for (size_t i = 0; s == ATTN_OK && i < attn_params_count(p); i++)
        s = attn_st_writer_add_tensor(w, attn_params_name(p, i), attn_params_at(p, i));
    size_t n_state = opt ? attn_optim_state_count(opt) : 0;
    for (size_t i = 0; s == ATTN_OK && i < n_state; i++) {
        attn_tensor view = {.ndim = 1, .shape = {0, 1, 1, 1}};
        const char *name;
        s = attn_optim_state_at(opt, i, &name, &view.data, &view.numel);
        view.shape[0] = view.numel;
        if (s == ATTN_OK) s = attn_st_writer_add_tensor(w, name, &view);
    }
    return s;
}

attn_status attn_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt,
                                 const char *const *meta_kv, int n_meta)
{
    if (!path || !p || n_meta < 0 || (n_meta > 0 && !meta_kv))
        return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_save: path, params or metadata missing");
    attn_st_writer *w = attn_st_writer_new();
    if (!w) return attn_last_status();
    attn_status s = add_metadata(w, opt, meta_kv, n_meta);
    if (s == ATTN_OK) s = add_tensors(w, p, opt);
    if (s == ATTN_OK) s = attn_st_writer_save(w, path);
    attn_st_writer_free(w);
    return s;
}

/* ---- loading ---- */

/* format and version must be ours. */
static attn_status check_format(const attn_st_file *f, const char *path)
{
    const char *format = attn_st_metadata(f, "format"), *version = attn_st_metadata(f, "version");
    if (!format || strcmp(format, CKPT_FORMAT) != 0)
        return attn__fail(ATTN_ERR_FORMAT, "%s: not an attn checkpoint: metadata \"format\" is "
                          "%s%s%s, expected \"" CKPT_FORMAT "\"", path, format ? "\"" : "",
                          format ? format : "missing", format ? "\"" : "");
    if (!version || strcmp(version, CKPT_VERSION) != 0)
        return attn__fail(ATTN_ERR_FORMAT, "%s: checkpoint version %s%s%s, this library reads "
                          "version " CKPT_VERSION, path, version ? "\"" : "",
                          version ? version : "missing", version ? "\"" : "");
    return ATTN_OK;
}

/* The "step" metadata as a non-negative count; *present is false when there is none. */
static attn_status read_step(const attn_st_file *f, const char *path, int64_t *step,
                             bool *present)
{
    const char *text = attn_st_metadata(f, "step");
    *present = text != NULL;
    if (!text) return ATTN_OK;
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end || errno || v < 0)
        return attn__fail(ATTN_ERR_FORMAT, "%s: metadata \"step\" is \"%s\", expected a "
                          "non-negative integer", path, text);
    *step = v;
    return ATTN_OK;
}

/* A list of names for one message: "a, b, c and 4 more". */
typedef struct name_list {
    char text[320];
    size_t len;
    int count;
} name_list;

static void name_list_add(name_list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void name_list_add(name_list *l, const char *fmt, ...)
{
    if (l->count++ >= 6 || l->len >= sizeof l->text) return;
    va_list ap;
    va_start(ap, fmt);
    if (l->count > 1) l->len += (size_t)snprintf(l->text + l->len, sizeof l->text - l->len, ", ");
    if (l->len < sizeof l->text) l->len += (size_t)vsnprintf(l->text + l->len, sizeof l->text - l->len, fmt, ap);
    va_end(ap);
}

/* "<label> <names>[ and N more]; " into out (when l has names). */
static size_t name_list_print(char *out, size_t n, const char *label, const name_list *l)
{
    if (!l->count || n == 0) return 0;
    int w = l->count > 6 ? snprintf(out, n, "%s %s and %d more; ", label, l->text, l->count - 6)
                         : snprintf(out, n, "%s %s; ", label, l->text);
    return w < 0 ? 0 : (size_t)w < n ? (size_t)w : n - 1;
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

static bool is_state_name(const attn_optim *opt, const char *name)
{
    size_t n = opt ? attn_optim_state_count(opt) : 0;
    for (size_t i = 0; i < n; i++) {
        const char *state;
        if (attn_optim_state_at(opt, i, &state, NULL, NULL) == ATTN_OK && strcmp(state, name) == 0)
            return true;
    }
    return false;
}

/* One destination (a parameter or a state buffer) matched with its file tensor. */
typedef struct load_item {
    const char *name;
    float *dst;
    int64_t numel;
    const attn_st_tensor *src; /* NULL: not in the file */
} load_item;

/* How strictly a file must match the model. */
typedef struct match_rules {
    bool require_all;  /* every destination must be in the file */
    bool refuse_extra; /* every file tensor must have a destination (optimizer state of a
                          parameter counts as one when there is no optimizer) */
} match_rules;

/* Matches every destination with the file: wrong shapes, and what the rules refuse (missing
 * destinations, file tensors with nowhere to go), are listed in one error. */
static attn_status plan(const attn_st_file *f, const char *path, const attn_params *p,
                        const attn_optim *opt, match_rules rules, load_item *items, size_t n_items,
                        bool *all_state)
{
    name_list missing = {0}, shapes = {0}, extra = {0};
    const size_t np = attn_params_count(p);
    *all_state = true;
    for (size_t i = 0; i < n_items; i++) {
        load_item *it = &items[i];
        int ndim = 1;
        int64_t shape[ATTN_MAX_DIMS] = {0};
        if (i < np) {
            const attn_tensor *t = attn_params_at(p, i);
            *it = (load_item){attn_params_name(p, i), t->data, t->numel, NULL};
            ndim = t->ndim;
            memcpy(shape, t->shape, sizeof shape);
        } else {
            attn_optim_state_at(opt, i - np, &it->name, &it->dst, &it->numel);
            shape[0] = it->numel;
        }
        it->src = attn_st_find(f, it->name);
        if (!it->src) {
            if (i >= np) *all_state = false;
            if (rules.require_all) name_list_add(&missing, "%s", it->name);
            continue;
        }
        char a[64], b[64];
        bool same = it->src->ndim == ndim;
        for (int d = 0; same && d < ndim; d++) same = it->src->shape[d] == shape[d];
        if (!same)
            name_list_add(&shapes, "%s (file %s, model %s)", it->name,
                          attn__dims_str(a, sizeof a, it->src->ndim, it->src->shape),
                          attn__dims_str(b, sizeof b, ndim, shape));
    }
    for (size_t i = 0; rules.refuse_extra && i < attn_st_count(f); i++) {
        const char *name = attn_st_at(f, i)->name;
        if (!attn_params_get(p, name) && !is_state_name(opt, name) && (opt || !is_any_state_of(p, name)))
            name_list_add(&extra, "%s", name);
    }
    if (!missing.count && !shapes.count && !extra.count) return ATTN_OK;
    char msg[1000];
    size_t n = 0;
    n += name_list_print(msg + n, sizeof msg - n, "missing:", &missing);
    n += name_list_print(msg + n, sizeof msg - n, "wrong shape:", &shapes);
    n += name_list_print(msg + n, sizeof msg - n, "unexpected:", &extra);
    if (n >= 2) msg[n - 2] = '\0'; /* the last "; " */
    return attn__fail(missing.count || extra.count ? ATTN_ERR_FORMAT : ATTN_ERR_SHAPE,
                      "%s: does not match the model: %s", path, msg);
}

/* Every loaded value must be finite: a NaN parameter is never what a user wants to run. */
static attn_status check_finite(const char *path, const load_item *items, size_t n, float *scratch)
{
    for (size_t i = 0; i < n; i++) {
        if (!items[i].src) continue;
        attn__st_to_f32(scratch, items[i].src);
        for (int64_t e = 0; e < items[i].numel; e++)
            if (!isfinite(scratch[e]))
                return attn__fail(ATTN_ERR_NUMERIC, "%s: tensor \"%s\" holds %g at element %lld; a "
                                  "checkpoint must hold finite values", path, items[i].name,
                                  scratch[e], (long long)e);
    }
    return ATTN_OK;
}

attn_status attn_checkpoint_load(const char *path, attn_params *p, attn_optim *opt, bool strict)
{
    if (!path || !p)
        return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_load: path or params missing");
    attn_st_file *f = attn_st_open(path);
    if (!f) return attn_last_status();
    const size_t n = attn_params_count(p) + (opt ? attn_optim_state_count(opt) : 0);
    int64_t largest = 1;
    for (size_t i = 0; i < attn_params_count(p); i++)
        if (attn_params_at(p, i)->numel > largest) largest = attn_params_at(p, i)->numel;
    if (opt && attn_params_numel(p) > largest) largest = attn_params_numel(p);
    load_item *items = calloc(n ? n : 1, sizeof *items);             /* (n) */
    float *scratch = malloc((size_t)largest * sizeof *scratch);      /* (largest) values of one tensor */
    int64_t step = 0;
    bool has_step = false, all_state = false;
    attn_status s = items && scratch ? check_format(f, path)
                                     : attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    if (s == ATTN_OK) s = read_step(f, path, &step, &has_step);
    if (s == ATTN_OK && opt && strict && !has_step)
        s = attn__fail(ATTN_ERR_FORMAT, "%s: no optimizer step count (strict load)", path);
    if (s == ATTN_OK) s = plan(f, path, p, opt, (match_rules){strict, strict}, items, n, &all_state);
    if (s == ATTN_OK) s = check_finite(path, items, n, scratch);
    if (s == ATTN_OK) { /* everything checked: now copy */
        for (size_t i = 0; i < n; i++)
            if (items[i].src) attn__st_to_f32(items[i].dst, items[i].src);
        if (opt && has_step && all_state) attn_optim_set_step_count(opt, step);
    }
    free(items);
    free(scratch);
    attn_st_close(f);
    return s;
}

/* ---- averaging ---- */

attn_status attn_checkpoint_average(attn_params *p, const char *const *paths, int n)
{
    if (!p || (n > 0 && !paths) || n < 0)
        return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_average: params or paths missing");
    const size_t np = attn_params_count(p);
    const int64_t total = attn_params_numel(p);
    double *sum = malloc((size_t)(total ? total : 1) * sizeof *sum); /* (total) p, then + each file */
    float *values = malloc((size_t)(total ? total : 1) * sizeof *values); /* (total) one file's */
    load_item *items = calloc(np ? np : 1, sizeof *items);             /* (np) */
    attn_status s = sum && values && items ? ATTN_OK
                                           : attn__fail(ATTN_ERR_NOMEM, "attn_checkpoint_average: out of memory");
    for (size_t i = 0, at = 0; s == ATTN_OK && i < np; i++) {
        const attn_tensor *t = attn_params_at(p, i);
        for (int64_t e = 0; e < t->numel; e++) sum[at++] = t->data[e];
    }
    for (int k = 0; s == ATTN_OK && k < n; k++) {
        attn_st_file *f = attn_st_open(paths[k]);
        bool all_state;
        s = f ? check_format(f, paths[k]) : attn_last_status();
        if (s == ATTN_OK) s = plan(f, paths[k], p, NULL, (match_rules){true, false}, items, np, &all_state);
        if (s == ATTN_OK) s = check_finite(paths[k], items, np, values);
        for (size_t i = 0, at = 0; s == ATTN_OK && i < np; i++) {
            attn__st_to_f32(values, items[i].src);
            for (int64_t e = 0; e < items[i].numel; e++) sum[at++] += values[e];
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
