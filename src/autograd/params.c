/* Parameter registry: named leaf tensors in registration (state_dict) order. After
 * attn_params_pack the data of all parameters is one block and their grads another, so
 * zero-grad is one memset, an optimizer is one flat loop and an all-reduce is one call. */
#include "../core/core_internal.h"

#include <stdlib.h>
#include <string.h>

struct attn_params {
    attn_tensor **tensors;
    char **names;
    size_t count, cap;
    int64_t numel;
    int64_t max_numel; /* 0: no limit (attn_params_set_max_numel) */
    float *data_block; /* after pack: numel floats */
    float *grad_block;
    size_t *index;    /* (index_cap) open-addressing table of names: i + 1 for parameter i, 0 empty */
    size_t index_cap; /* a power of two, at least twice count (0: none yet) */
};

/* ---- the name index: a lookup (and so a registration) costs about the same at any count ---- */

static size_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return (size_t)(h ^ h >> 29);
}

/* The slot of name in the index: the one holding it, or the empty one where it would go. */
static size_t index_slot(const attn_params *p, const char *name)
{
    size_t mask = p->index_cap - 1, i = name_hash(name) & mask;
    while (p->index[i] && strcmp(p->names[p->index[i] - 1], name) != 0) i = (i + 1) & mask;
    return i;
}

/* Rebuilds the index for the first p->count parameters with room for `want` of them. */
static bool index_rebuild(attn_params *p, size_t want)
{
    size_t cap = 64;
    while (cap < 2 * want) cap *= 2;
    size_t *index = calloc(cap, sizeof *index);
    if (!index) return false;
    free(p->index);
    p->index = index;
    p->index_cap = cap;
    for (size_t k = 0; k < p->count; k++) p->index[index_slot(p, p->names[k])] = k + 1;
    return true;
}

attn_params *attn_params_new(void)
{
    attn_params *p = calloc(1, sizeof *p);
    if (!p) return attn__fail_null(ATTN_ERR_NOMEM, "could not allocate a parameter registry");
    return p;
}

void attn_params_free(attn_params *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->count; i++) {
        if (!p->data_block) {
            free(p->tensors[i]->data);
            free(p->tensors[i]->grad);
        }
        free(p->tensors[i]);
        free(p->names[i]);
    }
    free(p->tensors);
    free(p->names);
    free(p->index);
    free(p->data_block);
    free(p->grad_block);
    free(p);
}

attn_status attn_params_set_max_numel(attn_params *p, int64_t max_numel)
{
    if (!p || max_numel < 0)
        return attn__fail(ATTN_ERR_ARG, "attn_params_set_max_numel: registry NULL or limit %lld < 0",
                          (long long)max_numel);
    p->max_numel = max_numel;
    return ATTN_OK;
}

attn_tensor *attn_params_add(attn_params *p, const char *name, int ndim, const int64_t *shape)
{
    if (!p || !name || !*name) return attn__fail_null(ATTN_ERR_ARG, "attn_params_add: registry or name missing");
    if (p->data_block)
        return attn__fail_null(ATTN_ERR_STATE,
                               "attn_params_add(\"%s\"): the registry is packed (an optimizer "
                               "was created); add every parameter before that",
                               name);
    if (attn_params_get(p, name))
        return attn__fail_null(ATTN_ERR_ARG, "attn_params_add: a parameter named \"%s\" exists", name);
    int64_t numel;
    if (attn__shape_numel(ndim, shape, &numel, name) != ATTN_OK) return NULL;
    int64_t total; /* the packed block (and the optimizer's 2 buffers) hold every parameter */
    if (__builtin_add_overflow(p->numel, numel, &total) || total > (int64_t)(SIZE_MAX / 8 / sizeof(float)))
        return attn__fail_null(ATTN_ERR_NOMEM,
                               "attn_params_add(\"%s\"): %lld more elements make too "
                               "many parameters",
                               name, (long long)numel);
    if (p->max_numel > 0 && total > p->max_numel)
        return attn__fail_null(ATTN_ERR_FORMAT,
                               "attn_params_add(\"%s\"): its %lld elements make %lld in all, past the limit of %lld "
                               "(attn_params_set_max_numel)",
                               name, (long long)numel, (long long)total, (long long)p->max_numel);
    if (2 * (p->count + 1) > p->index_cap && !index_rebuild(p, 2 * (p->count + 1)))
        return attn__fail_null(ATTN_ERR_NOMEM, "attn_params_add: out of memory");
    if (p->count == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 32;
        attn_tensor **t = realloc(p->tensors, cap * sizeof *t);
        if (t) p->tensors = t;
        char **n = realloc(p->names, cap * sizeof *n);
        if (n) p->names = n;
        if (!t || !n) return attn__fail_null(ATTN_ERR_NOMEM, "attn_params_add: out of memory");
        p->cap = cap;
    }
    attn_tensor *t = attn_tensor_alloc(ndim, shape);
    char *copy = strdup(name);
    if (!t || !copy) {
        attn_tensor_free(t);
        free(copy);
        return attn__fail_null(ATTN_ERR_NOMEM, "attn_params_add(\"%s\"): out of memory", name);
    }
    t->storage = ATTN_STORAGE_PARAM;
    t->requires_grad = true;
    p->tensors[p->count] = t;
    p->names[p->count] = copy;
    p->index[index_slot(p, copy)] = p->count + 1;
    p->count++;
    p->numel += numel;
    return t;
}

attn_status attn__params_settle(attn_params *p, size_t n0, attn_status st)
{
    if (st == ATTN_OK || !p || p->data_block) return st; /* a packed registry took no new ones */
    while (p->count > n0) {
        attn_tensor *t = p->tensors[--p->count];
        p->numel -= t->numel;
        free(t->data);
        free(t->grad);
        free(t);
        free(p->names[p->count]);
    }
    if (p->index_cap) memset(p->index, 0, p->index_cap * sizeof *p->index); /* the index of those left */
    for (size_t k = 0; k < p->count; k++) p->index[index_slot(p, p->names[k])] = k + 1;
    return st;
}

attn_tensor *attn_params_get(const attn_params *p, const char *name)
{
    if (!p || !name) {
        attn__null_arg("attn_params_get");
        return NULL;
    }
    if (!p->index_cap) return NULL;
    size_t at = p->index[index_slot(p, name)];
    return at ? p->tensors[at - 1] : NULL;
}

/* Getters: a NULL registry records ATTN_ERR_ARG and reads as 0 or NULL; an index past the end
 * reads as NULL (ATTN_ERR_ARG too). */
size_t attn_params_count(const attn_params *p)
{
    return p ? p->count : (attn__null_arg("attn_params_count"), 0);
}
attn_tensor *attn_params_at(const attn_params *p, size_t i)
{
    if (!p || i >= p->count)
        return attn__fail_null(ATTN_ERR_ARG, "attn_params_at: index %zu, the registry has %zu", i, p ? p->count : 0);
    return p->tensors[i];
}
const char *attn_params_name(const attn_params *p, size_t i)
{
    if (!p || i >= p->count)
        return attn__fail_null(ATTN_ERR_ARG, "attn_params_name: index %zu, the registry has %zu", i, p ? p->count : 0);
    return p->names[i];
}
int64_t attn_params_numel(const attn_params *p)
{
    return p ? p->numel : (attn__null_arg("attn_params_numel"), 0);
}
float *attn_params_grad_block(attn_params *p)
{
    return p ? p->grad_block : (attn__null_arg("attn_params_grad_block"), NULL);
}
float *attn_params_data_block(attn_params *p)
{
    return p ? p->data_block : (attn__null_arg("attn_params_data_block"), NULL);
}

attn_status attn_params_pack(attn_params *p)
{
    if (!p) return attn__fail(ATTN_ERR_ARG, "attn_params_pack: registry is NULL");
    if (p->data_block) return ATTN_OK;
    size_t n = (size_t)(p->numel ? p->numel : 1);
    float *data = attn__calloc_floats(n), *grad = attn__calloc_floats(n);
    if (!data || !grad) {
        free(data);
        free(grad);
        return attn__fail(ATTN_ERR_NOMEM, "attn_params_pack: could not allocate 2 x %zu floats", n);
    }
    int64_t off = 0;
    for (size_t i = 0; i < p->count; i++) {
        attn_tensor *t = p->tensors[i];
        size_t bytes = (size_t)t->numel * sizeof(float);
        memcpy(data + off, t->data, bytes);
        if (t->grad) memcpy(grad + off, t->grad, bytes);
        free(t->data);
        free(t->grad);
        t->data = data + off;
        t->grad = grad + off;
        off += t->numel;
    }
    p->data_block = data;
    p->grad_block = grad;
    return ATTN_OK;
}

void attn_params_zero_grad(attn_params *p)
{
    if (!p) {
        attn__null_arg("attn_params_zero_grad");
        return;
    }
    if (p->grad_block) {
        attn__clear(p->grad_block, (size_t)p->numel * sizeof(float), attn_default_num_threads());
        return;
    }
    for (size_t i = 0; i < p->count; i++) attn_tensor_zero_grad(p->tensors[i]);
}
