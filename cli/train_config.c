/* A model's config as checkpoint metadata (train_common.h): its fields' table read, written,
 * range-checked and compared with what a resumed run builds. */
#include "train_common.h"
#include "dist.h"
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

bool checkpoint_meta_long(const attn_st_file *f, const char *key, long *out)
{
    const char *v = attn_st_metadata(f, key);
    char *end;
    if (!v) return false;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno) return false;
    *out = x;
    return true;
}

double config_value(const config_field *field, const void *cfg)
{
    const char *at = (const char *)cfg + field->offset;
    switch (field->type) {
    case CONFIG_I64:
        return (double)*(const int64_t *)at;
    case CONFIG_INT:
        return *(const int *)at;
    case CONFIG_BOOL:
        return *(const bool *)at;
    case CONFIG_F32:
        return *(const float *)at;
    }
    return 0;
}

/* A field's value as metadata text: integers as digits, a float in 9 significant digits (which
 * give the float back exactly) */
static void config_text(const config_field *field, const void *cfg, char *out, size_t n)
{
    if (field->type == CONFIG_F32)
        snprintf(out, n, "%.9g", config_value(field, cfg));
    else
        snprintf(out, n, "%.0f", config_value(field, cfg));
}

int config_check_resumed(const config_schema *s, const attn_st_file *f, const char *path, const void *cfg, void *saved)
{
    int code = config_read(s, f, path, saved);
    for (int i = 0; code == CLI_OK && i < s->n_fields; i++) {
        const config_field *field = &s->fields[i];
        char was[32], now[32];
        config_text(field, saved, was, sizeof was), config_text(field, cfg, now, sizeof now);
        if (config_value(field, saved) != config_value(field, cfg))
            code = cli_fail(CLI_ERR_USAGE, s->cmd,
                            "resume: %s has %s %s in its metadata, these options give %s%s: "
                            "resume with the options it was trained with",
                            path, field->key, was, now,
                            s->max_len_note && !strcmp(field->key, "max_len") ? s->max_len_note : "");
    }
    return code;
}

const char *const *config_kv(const config_schema *s, const void *cfg, int *n)
{
    static char vals[CONFIG_MAX_FIELDS][32];
    static const char *kv[2 * (CONFIG_MAX_FIELDS + 1)];
    kv[0] = "model";
    kv[1] = s->model_name;
    for (int i = 0; i < s->n_fields && i < CONFIG_MAX_FIELDS; i++) {
        config_text(&s->fields[i], cfg, vals[i], sizeof vals[i]);
        kv[2 * i + 2] = s->fields[i].key;
        kv[2 * i + 3] = vals[i];
    }
    *n = s->n_fields + 1;
    return kv;
}

attn_params *params_for(const attn_st_file *f)
{
    attn_params *p = attn_params_new();
    int64_t held = 0;
    for (size_t i = 0; f && i < attn_st_count(f); i++) held += attn_st_at(f, i)->numel; /* sums bytes: no overflow */
    if (p && f) attn_params_set_max_numel(p, held > 0 ? held : 1);
    return p;
}

int model_build_failed(const char *cmd, const attn_st_file *f, const char *path)
{
    if (f && attn_last_status() == ATTN_ERR_FORMAT)
        return cli_fail(CLI_ERR_DATA, cmd, "%s: its metadata describes a larger model than its tensors hold: %s", path,
                        attn_last_error());
    return cli_fail(CLI_ERR_DATA, cmd, "%s", attn_last_error());
}

attn_st_file *checkpoint_open(const char *cmd, const char *path, const char *hint)
{
    attn_st_file *f = attn_st_open(path);
    if (!f) cli_fail(CLI_ERR_DATA, cmd, "%s%s", attn_last_error(), hint ? hint : "");
    return f;
}

int checkpoint_model_check(const config_schema *s, const attn_st_file *f, const char *path)
{
    const char *model = attn_st_metadata(f, "model");
    if (model && !strcmp(model, s->model_name)) return CLI_OK;
    if (model)
        return cli_fail(CLI_ERR_DATA, s->cmd, "%s is not a %s checkpoint: its metadata says model=%s, expected %s",
                        path, s->what, model, s->model_name);
    return cli_fail(CLI_ERR_DATA, s->cmd, "%s is not a %s checkpoint (its metadata lacks model=%s)", path, s->what,
                    s->model_name);
}

int config_read(const config_schema *s, const attn_st_file *f, const char *path, void *cfg)
{
    const char *cmd = s->cmd;
    int code = checkpoint_model_check(s, f, path);
    for (int i = 0; code == CLI_OK && i < s->n_fields; i++) {
        const config_field *c = &s->fields[i];
        const char *text = attn_st_metadata(f, c->key);
        long whole = 0;
        double v = 0.0;
        char *end = NULL;
        bool read = c->type == CONFIG_F32 ? text && (v = strtod(text, &end), end != text && !*end && isfinite(v))
                                          : checkpoint_meta_long(f, c->key, &whole);
        if (c->type != CONFIG_F32) v = (double)whole;
        if (c->optional && !text) {
            v = c->absent; /* written before the field was */
        } else if (!read) {
            code = cli_fail(CLI_ERR_DATA, cmd, "%s: metadata %s is %s%s%s; expected %s in [%ld, %ld]", path, c->key,
                            text ? "\"" : "", text ? text : "missing", text ? "\"" : "",
                            c->type == CONFIG_F32 ? "a number" : "an integer", c->min, c->max);
        } else if (v < (double)c->min || v > (double)c->max) {
            code = cli_fail(CLI_ERR_DATA, cmd, "%s: metadata %s = %s is out of range [%ld, %ld]", path, c->key, text,
                            c->min, c->max);
        } else {
            char *at = (char *)cfg + c->offset;
            if (c->type == CONFIG_I64)
                *(int64_t *)at = (int64_t)v;
            else if (c->type == CONFIG_INT)
                *(int *)at = (int)v;
            else if (c->type == CONFIG_F32)
                *(float *)at = (float)v;
            else
                *(bool *)at = v != 0;
        }
    }
    return code;
}
