/* narrow: x.narrow(dim, start, length), PyTorch's slice along one dim.
 *   forward:  y = x[..., start:start+length, ...]   (a view without copy when dim is 0)
 *   backward: dx[..., start:start+length, ...] += dy */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

#include <string.h>

typedef struct narrow_saved {
    int64_t outer, inner, in_len, start, len; /* x viewed as (outer, in_len, inner) */
} narrow_saved;

static attn_status narrow_backward(attn_ctx *ctx, attn_node *node)
{
    const narrow_saved *s = node->saved;
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const float *dy = node->out->grad;
    const int64_t block = s->len * s->inner;
#pragma omp parallel for schedule(static)                                                                              \
    num_threads(ctx->num_threads) if (s->outer > 1 && s->outer * block > ATTN_PARALLEL_MIN)
    for (int64_t o = 0; o < s->outer; o++) {
        float *dst = gx + (o * s->in_len + s->start) * s->inner;
        const float *src = dy + o * block;
        for (int64_t i = 0; i < block; i++) dst[i] += src[i];
    }
    return ATTN_OK;
}

attn_tensor *attn_narrow(attn_ctx *ctx, attn_tensor *x, int dim, int64_t start, int64_t length)
{
    if (!ctx || !x) return attn__null_input(__func__);
    int d = attn__dim(dim, x->ndim, "narrow");
    if (d < 0) return NULL;
    if (start < 0 || length < 0 || start > x->shape[d] || length > x->shape[d] - start) {
        char buf[64];
        return attn__fail_null(
            ATTN_ERR_ARG, "narrow: start %lld and length %lld do not fit in dim %d of size %lld of %s",
            (long long)start, (long long)length, d, (long long)x->shape[d], attn_shape_str(x, buf, sizeof buf));
    }
    int64_t shape[ATTN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[d] = length;
    narrow_saved s = {attn__prod(x->shape, 0, d), attn__prod(x->shape, d + 1, x->ndim), x->shape[d], start, length};
    attn_tensor *y;
    if (s.outer == 1) { /* contiguous: share the data */
        size_t head = (sizeof(attn_tensor) + 63) & ~(size_t)63;
        y = attn__arena_alloc(&ctx->arena, head);
        if (!y) return NULL;
        *y = *x;
        memcpy(y->shape, shape, sizeof shape);
        y->numel = length * s.inner;
        y->data = x->data + start * s.inner;
        y->grad = NULL;
        y->node = NULL;
        y->requires_grad = false;
        y->storage = ATTN_STORAGE_VIEW;
    } else {
        y = attn_tensor_empty(ctx, x->ndim, shape);
        if (!y) return NULL;
        int64_t block = length * s.inner;
        for (int64_t o = 0; o < s.outer; o++)
            memcpy(y->data + o * block, x->data + (o * s.in_len + start) * s.inner, (size_t)block * sizeof(float));
    }
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, "narrow", narrow_backward, y, &x, 1, sizeof s);
        if (!node) return NULL;
        *(narrow_saved *)node->saved = s;
    }
    return y;
}
