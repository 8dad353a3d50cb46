/* PyTorch state_dicts: a safetensors file of tensors under state_dict names (as
 * safetensors.torch.save_file writes it, or tools/safetensors_convert.py from a torch.save file)
 * loaded into a registry by name, and the matching save.
 *   file key of parameter i = prefix + its name
 *   strict: every parameter has its key, and no key that starts with prefix is left over
 *   always: shapes equal (torch's load_state_dict refuses a size mismatch even when not strict),
 *           values finite, any dtype the reader knows (converted to float32)
 * Every problem is named, not just the first, and nothing changes unless the file checks out
 * (the matching, finiteness check and copy are load_match.c's, shared with checkpoints). */
#include "io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The key of parameter `name` under prefix into buf; false when it does not fit. */
static bool make_key(char *buf, size_t len, const char *prefix, const char *name)
{
    int n = snprintf(buf, len, "%s%s", prefix, name);
    return n >= 0 && (size_t)n < len;
}

typedef struct prefixed {
    const attn_params *p;
    const char *prefix;
} prefixed;

/* Strict: a file key under the prefix must be some parameter's key; keys outside it are not ours. */
static bool known_key(const char *name, const void *user)
{
    const prefixed *pp = user;
    const size_t n = strlen(pp->prefix);
    return strncmp(name, pp->prefix, n) != 0 || attn_params_get(pp->p, name + n) != NULL;
}

attn_status attn_params_load_file(attn_params *p, const attn_st_file *f, const char *prefix, bool strict, bool *loaded)
{
    if (!p || !f) return attn__fail(ATTN_ERR_ARG, "attn_params_load_file: params or file is NULL");
    if (!prefix) prefix = "";
    const char *label = attn__st_label(f);
    const size_t np = attn_params_count(p);
    size_t key_len = 1;
    for (size_t i = 0; i < np; i++)
        if (strlen(attn_params_name(p, i)) + 1 > key_len) key_len = strlen(attn_params_name(p, i)) + 1;
    key_len += strlen(prefix);
    attn__load_item *items = calloc(np ? np : 1, sizeof *items); /* (np) */
    char *keys = malloc(np * key_len + 1);                       /* (np, key_len) prefixed names */
    attn_status s = items && keys ? ATTN_OK : attn__fail(ATTN_ERR_NOMEM, "%s: out of memory", label);
    for (size_t i = 0; s == ATTN_OK && i < np; i++) {
        attn_tensor *t = attn_params_at(p, i);
        char *key = keys + i * key_len;
        snprintf(key, key_len, "%s%s", prefix, attn_params_name(p, i));
        items[i] = (attn__load_item){key, t->ndim, t->shape, t->data, NULL};
    }
    char context[320] = "";
    if (*prefix) snprintf(context, sizeof context, " under prefix \"%s\"", prefix);
    const prefixed pp = {p, prefix};
    const attn__load_rules rules = {.require_all = strict, .known = strict ? known_key : NULL, .user = &pp};
    if (s == ATTN_OK) s = attn__load_match(f, label, context, items, np, &rules);
    if (s == ATTN_OK) s = attn__load_finite(items, np, label);
    if (s == ATTN_OK) attn__load_copy(items, np); /* everything checked: now copy */
    if (s == ATTN_OK && loaded)
        for (size_t i = 0; i < np; i++) loaded[i] = items[i].src != NULL;
    free(items);
    free(keys);
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
            s = attn__fail(ATTN_ERR_ARG,
                           "attn_params_save: the name of \"%s\" under prefix \"%s\" "
                           "is longer than %zu bytes",
                           attn_params_name(p, i), prefix, sizeof key - 1);
        else
            s = attn_st_writer_add_tensor(w, key, attn_params_at(p, i));
    }
    if (s == ATTN_OK) s = attn_st_writer_save(w, path);
    attn_st_writer_free(w);
    return s;
}
