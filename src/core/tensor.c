/* Tensors: creation in the arena or on the heap, shapes, gradient buffers. */
#include "core_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool attn__mul_ok(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0) return false;
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

attn_status attn__shape_numel(int ndim, const int64_t *shape, int64_t *numel, const char *what)
{
    if (ndim < 0 || ndim > ATTN_MAX_DIMS)
        return attn__fail(ATTN_ERR_SHAPE, "%s: %d dimensions, expected 0 to %d", what, ndim, ATTN_MAX_DIMS);
    if (ndim > 0 && !shape) return attn__fail(ATTN_ERR_ARG, "%s: shape is NULL", what);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return attn__fail(ATTN_ERR_SHAPE, "%s: dimension %d is %lld, expected >= 0", what, i, (long long)shape[i]);
        if (!attn__mul_ok(n, shape[i], &n)) return attn__fail(ATTN_ERR_NOMEM, "%s: element count overflows", what);
    }
    /* bytes must fit in size_t and leave room for the arena's alignment */
    if (n > (int64_t)(SIZE_MAX / 8 / sizeof(float)))
        return attn__fail(ATTN_ERR_NOMEM, "%s: %lld elements is too many", what, (long long)n);
    *numel = n;
    return ATTN_OK;
}

static void set_shape(attn_tensor *t, int ndim, const int64_t *shape, int64_t numel)
{
    t->ndim = ndim;
    for (int i = 0; i < ATTN_MAX_DIMS; i++) t->shape[i] = i < ndim ? shape[i] : 1;
    t->numel = numel;
    t->grad = NULL;
    t->requires_grad = false;
    t->node = NULL;
}

attn_tensor *attn_tensor_empty(attn_ctx *ctx, int ndim, const int64_t *shape)
{
    if (!ctx) return attn__fail_null(ATTN_ERR_ARG, "attn_tensor_empty: ctx is NULL");
    int64_t numel;
    if (attn__shape_numel(ndim, shape, &numel, "tensor") != ATTN_OK) return NULL;
    size_t head = (sizeof(attn_tensor) + 63) & ~(size_t)63;
    unsigned char *p = attn__arena_alloc(&ctx->arena, head + (size_t)numel * sizeof(float));
    if (!p) return NULL;
    attn_tensor *t = (attn_tensor *)p;
    set_shape(t, ndim, shape, numel);
    t->data = (float *)(p + head);
    t->storage = ATTN_STORAGE_ARENA;
    return t;
}

attn_tensor *attn_tensor_zeros(attn_ctx *ctx, int ndim, const int64_t *shape)
{
    attn_tensor *t = attn_tensor_empty(ctx, ndim, shape);
    if (t) memset(t->data, 0, (size_t)t->numel * sizeof(float));
    return t;
}

attn_tensor *attn_tensor_from(attn_ctx *ctx, int ndim, const int64_t *shape, const float *data)
{
    attn_tensor *t = attn_tensor_empty(ctx, ndim, shape);
    if (!t) return NULL;
    if (!data && t->numel) return attn__fail_null(ATTN_ERR_ARG, "attn_tensor_from: data is NULL");
    if (t->numel) memcpy(t->data, data, (size_t)t->numel * sizeof(float));
    return t;
}

attn_tensor *attn__tensor_view(attn_ctx *ctx, int ndim, const int64_t *shape, float *data)
{
    int64_t numel;
    if (attn__shape_numel(ndim, shape, &numel, "tensor") != ATTN_OK) return NULL;
    attn_tensor *t = attn__arena_alloc(&ctx->arena, sizeof *t);
    if (!t) return NULL;
    set_shape(t, ndim, shape, numel);
    t->data = data;
    t->storage = ATTN_STORAGE_VIEW;
    return t;
}

attn_tensor *attn__empty_like(attn_ctx *ctx, const attn_tensor *x)
{
    return attn_tensor_empty(ctx, x->ndim, x->shape);
}

attn_tensor *attn_tensor_alloc(int ndim, const int64_t *shape)
{
    int64_t numel;
    if (attn__shape_numel(ndim, shape, &numel, "tensor") != ATTN_OK) return NULL;
    attn_tensor *t = malloc(sizeof *t);
    float *data = attn__calloc_floats((size_t)numel);
    if (!t || !data) {
        free(t);
        free(data);
        return attn__fail_null(ATTN_ERR_NOMEM, "could not allocate a tensor of %lld floats", (long long)numel);
    }
    set_shape(t, ndim, shape, numel);
    t->data = data;
    t->storage = ATTN_STORAGE_HEAP;
    return t;
}

void attn_tensor_free(attn_tensor *t)
{
    if (!t || t->storage != ATTN_STORAGE_HEAP) return;
    free(t->data);
    free(t->grad);
    free(t);
}

bool attn__foreign(const attn_ctx *ctx, const attn_tensor *t)
{
    return (t->storage == ATTN_STORAGE_ARENA || t->storage == ATTN_STORAGE_VIEW) && !attn__arena_owns(&ctx->arena, t);
}

float *attn__grad(attn_ctx *ctx, attn_tensor *t)
{
    if (t->grad) return t->grad;
    size_t bytes = (size_t)(t->numel ? t->numel : 1) * sizeof(float);
    if (t->storage == ATTN_STORAGE_HEAP || t->storage == ATTN_STORAGE_PARAM) {
        t->grad = calloc(1, bytes);
        if (!t->grad) return attn__fail_null(ATTN_ERR_NOMEM, "could not allocate a gradient of %zu bytes", bytes);
    } else {
        t->grad = attn__arena_calloc(&ctx->arena, bytes, ctx->num_threads);
    }
    return t->grad;
}

attn_status attn_tensor_set_requires_grad(attn_tensor *t, bool on)
{
    if (!t) return attn__null_arg("attn_tensor_set_requires_grad");
    t->requires_grad = on;
    return ATTN_OK;
}

void attn_tensor_zero_grad(attn_tensor *t)
{
    if (!t)
        attn__null_arg("attn_tensor_zero_grad");
    else if (t->grad)
        memset(t->grad, 0, (size_t)t->numel * sizeof(float));
}

attn_status attn_tensor_fill_normal(attn_tensor *t, attn_rng *rng, float mean, float std)
{
    if (!t || !rng) return attn__null_arg("attn_tensor_fill_normal");
    if (!isfinite(mean) || !(std >= 0.0f && isfinite(std))) /* torch: "normal expects std >= 0.0" */
        return attn__fail(ATTN_ERR_ARG,
                          "attn_tensor_fill_normal: mean %g and std %g; expected finite, "
                          "std >= 0",
                          (double)mean, (double)std);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = mean + std * attn_rng_normal(rng);
    return ATTN_OK;
}

attn_status attn_tensor_fill_uniform(attn_tensor *t, attn_rng *rng, float lo, float hi)
{
    if (!t || !rng) return attn__null_arg("attn_tensor_fill_uniform");
    if (!(isfinite(lo) && isfinite(hi) && lo <= hi)) /* torch: "uniform_ expects to return a [from, to) range" */
        return attn__fail(ATTN_ERR_ARG,
                          "attn_tensor_fill_uniform: [%g, %g) is not a finite range with "
                          "lo <= hi",
                          (double)lo, (double)hi);
    for (int64_t i = 0; i < t->numel; i++) t->data[i] = lo + (hi - lo) * attn_rng_uniform(rng);
    return ATTN_OK;
}

const char *attn__dims_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
    if (!buf || len == 0) return buf;
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < ndim && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

const char *attn_shape_str(const attn_tensor *t, char *buf, size_t len)
{
    if (!buf || !len) {
        attn__null_arg("attn_shape_str");
        return buf;
    }
    if (!t) {
        snprintf(buf, len, "(null)");
        return buf;
    }
    return attn__dims_str(buf, len, t->ndim, t->shape);
}

attn_status attn__fail_inputs(const char *op, const char *const names[3], const attn_tensor *const in[3],
                              const char *expected, ...)
{
    char shapes[3][64], rest[1024];
    for (int i = 0; i < 3; i++) attn_shape_str(in[i], shapes[i], sizeof shapes[i]);
    va_list ap;
    va_start(ap, expected);
    vsnprintf(rest, sizeof rest, expected, ap);
    va_end(ap);
    return attn__fail(ATTN_ERR_SHAPE, "%s: %s %s, %s %s, %s %s do not fit; expected %s", op, names[0], shapes[0],
                      names[1], shapes[1], names[2], shapes[2], rest);
}

bool attn_same_shape(const attn_tensor *a, const attn_tensor *b)
{
    if (!a || !b) {
        attn__null_arg("attn_same_shape");
        return false;
    }
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

int attn__dim(int dim, int ndim, const char *op)
{
    int d = dim < 0 ? dim + ndim : dim;
    if (d < 0 || d >= ndim || ndim == 0) {
        attn__fail(ATTN_ERR_ARG, "%s: dim %d is out of range for a tensor of %d dimensions", op, dim, ndim);
        return -1;
    }
    return d;
}

int64_t attn__prod(const int64_t *shape, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= shape[i];
    return p;
}

bool attn__all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

attn_status attn__fail_nonfinite(const char *label, const char *name, float value, int ndim, const int64_t *shape,
                                 int64_t flat)
{
    int64_t coord[ATTN_ST_MAX_DIMS] = {0};
    for (int d = (ndim < ATTN_ST_MAX_DIMS ? ndim : ATTN_ST_MAX_DIMS) - 1; d >= 0; d--) {
        coord[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    char index[8 + 21 * ATTN_ST_MAX_DIMS];
    attn__dims_str(index, sizeof index, ndim < ATTN_ST_MAX_DIMS ? ndim : ATTN_ST_MAX_DIMS, coord);
    return attn__fail(ATTN_ERR_NUMERIC, "%s%stensor%s%s%s has %s at index %s; expected finite values",
                      label ? label : "", label ? ": " : "", name ? " \"" : "", name ? name : "", name ? "\"" : "",
                      isnan(value) ? "NaN"
                      : value > 0  ? "+Inf"
                                   : "-Inf",
                      index);
}

attn_status attn_tensor_check_finite(const attn_tensor *t, const char *name)
{
    if (!t) return attn__null_arg("attn_tensor_check_finite");
    for (int64_t i = 0; i < t->numel; i++)
        if (!isfinite(t->data[i])) return attn__fail_nonfinite(NULL, name, t->data[i], t->ndim, t->shape, i);
    return ATTN_OK;
}
