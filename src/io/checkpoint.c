/* Checkpoints: a safetensors file with every parameter under its state_dict name, the optimizer
 * state as 1-D tensors under the optimizer's names ("exp_avg.<param>", ...), and __metadata__
 *   format = "attn-checkpoint", version = "1", step = "<optimizer steps>" (only with an
 *   optimizer), then the caller's key/values.
 * Loading checks everything (format, names, shapes, step) before it changes anything. */
#include "io.h"

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

/* The file tensor for one destination of (ndim, shape); *st is NULL when the file lacks it
 * (an error when strict). */
static attn_status match(const attn_st_file *f, const char *path, const char *name, int ndim,
                         const int64_t *shape, bool strict, const char *what,
                         const attn_st_tensor **st)
{
    *st = attn_st_find(f, name);
    if (!*st)
        return strict ? attn__fail(ATTN_ERR_FORMAT, "%s: %s \"%s\" is missing (strict load)",
                                   path, what, name)
                      : ATTN_OK;
    return attn__st_check_shape(f, *st, ndim, shape);
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

/* Strict: every tensor of the file must have somewhere to go. */
static attn_status check_no_extra(const attn_st_file *f, const char *path, const attn_params *p,
                                  const attn_optim *opt)
{
    for (size_t i = 0; i < attn_st_count(f); i++) {
        const char *name = attn_st_at(f, i)->name;
        if (!attn_params_get(p, name) && !is_state_name(opt, name))
            return attn__fail(ATTN_ERR_FORMAT, "%s: tensor \"%s\" is neither a parameter nor "
                              "optimizer state (strict load)", path, name);
    }
    return ATTN_OK;
}

/* Matches every parameter and state buffer with its file tensor into src (NULL: absent) and
 * dst; *all_state is true when every state buffer was found. */
static attn_status plan(const attn_st_file *f, const char *path, const attn_params *p,
                        const attn_optim *opt, bool strict, const attn_st_tensor **src,
                        float **dst, bool *all_state)
{
    size_t np = attn_params_count(p), ns = opt ? attn_optim_state_count(opt) : 0;
    attn_status s = ATTN_OK;
    for (size_t i = 0; s == ATTN_OK && i < np; i++) {
        attn_tensor *t = attn_params_at(p, i);
        dst[i] = t->data;
        s = match(f, path, attn_params_name(p, i), t->ndim, t->shape, strict, "parameter",
                  &src[i]);
    }
    *all_state = true;
    for (size_t i = 0; s == ATTN_OK && i < ns; i++) {
        const char *name;
        int64_t numel;
        s = attn_optim_state_at(opt, i, &name, &dst[np + i], &numel);
        if (s == ATTN_OK)
            s = match(f, path, name, 1, &numel, strict, "optimizer state", &src[np + i]);
        if (!src[np + i]) *all_state = false;
    }
    return s;
}

attn_status attn_checkpoint_load(const char *path, attn_params *p, attn_optim *opt, bool strict)
{
    if (!path || !p)
        return attn__fail(ATTN_ERR_ARG, "attn_checkpoint_load: path or params missing");
    attn_st_file *f = attn_st_open(path);
    if (!f) return attn_last_status();
    size_t n = attn_params_count(p) + (opt ? attn_optim_state_count(opt) : 0);
    const attn_st_tensor **src = calloc(n ? n : 1, sizeof *src); /* (n) NULL: not in the file */
    float **dst = calloc(n ? n : 1, sizeof *dst);                 /* (n) where each one goes */
    int64_t step = 0;
    bool has_step = false, all_state = false;
    attn_status s = src && dst ? check_format(f, path)
                               : attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", path);
    if (s == ATTN_OK) s = read_step(f, path, &step, &has_step);
    if (s == ATTN_OK && opt && strict && !has_step)
        s = attn__fail(ATTN_ERR_FORMAT, "%s: no optimizer step count (strict load)", path);
    if (s == ATTN_OK) s = plan(f, path, p, opt, strict, src, dst, &all_state);
    if (s == ATTN_OK && strict) s = check_no_extra(f, path, p, opt);
    if (s == ATTN_OK) { /* everything checked: now copy */
        for (size_t i = 0; i < n; i++)
            if (src[i]) attn__st_to_f32(dst[i], src[i]);
        if (opt && has_step && all_state) attn_optim_set_step_count(opt, step);
    }
    free(src);
    free(dst);
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
    float *file_values = NULL;                                       /* one file tensor as f32 */
    if (!sum) return attn__fail(ATTN_ERR_NOMEM, "attn_checkpoint_average: out of memory");
    for (size_t i = 0, at = 0; i < np; i++) {
        const attn_tensor *t = attn_params_at(p, i);
        for (int64_t e = 0; e < t->numel; e++) sum[at++] = t->data[e];
    }
    attn_status s = ATTN_OK;
    for (int k = 0; s == ATTN_OK && k < n; k++) {
        attn_st_file *f = attn_st_open(paths[k]);
        if (!f) {
            s = attn_last_status();
            break;
        }
        s = check_format(f, paths[k]);
        for (size_t i = 0, at = 0; s == ATTN_OK && i < np; i++) {
            const attn_tensor *t = attn_params_at(p, i);
            const attn_st_tensor *st;
            s = match(f, paths[k], attn_params_name(p, i), t->ndim, t->shape, true, "parameter", &st);
            float *grown = s == ATTN_OK ? realloc(file_values, (size_t)t->numel * sizeof *grown) : file_values;
            if (s == ATTN_OK && !grown) s = attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", paths[k]);
            file_values = grown;
            if (s != ATTN_OK) break;
            attn__st_to_f32(file_values, st);
            for (int64_t e = 0; e < t->numel; e++) sum[at++] += file_values[e];
        }
        attn_st_close(f);
    }
    for (size_t i = 0, at = 0; s == ATTN_OK && i < np; i++) { /* every file checked out: the mean */
        attn_tensor *t = attn_params_at(p, i);
        for (int64_t e = 0; e < t->numel; e++) t->data[e] = (float)(sum[at++] / (double)(n + 1));
    }
    free(file_values);
    free(sum);
    return s;
}
