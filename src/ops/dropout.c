/* Dropout (dy = the output's gradient), alone and fused into a residual add:
 *   training, p > 0: keep ~ Bernoulli(1 - p) per element: attn__dropout_mask (kernels_internal.h), a hash
 *                    of the element's index under a key drawn from the ctx RNG (64 bits per
 *                    call), so the mask depends on the seed alone, not on the thread count,
 *                    y = keep * x / (1 - p)          dx += keep * dy / (1 - p)
 *   eval or p == 0:  y = x (the input itself, no copy and no node)
 *   add_dropout:     s = x + keep * b / (1 - p)     dx += ds, db += keep * ds / (1 - p)
 *                    (attn_add(x, attn_dropout(b, p)) in one pass, without the dropped copy)
 * p == 1 drops every element (y = 0, dx += 0). A product, as in PyTorch: a dropped NaN or inf
 * stays NaN (and the loops vectorise). The keep mask is saved for the backward. */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"
#include "fused_internal.h"

typedef struct dropout_saved {
    const uint8_t *keep; /* (numel) 1 = kept; NULL: add_dropout without dropout (a plain add) */
    float scale;         /* 1 / (1 - p), 0 when p == 1 */
} dropout_saved;

uint8_t *attn__dropout_keep(attn_ctx *ctx, int64_t n, float p, float *scale, const char *op, attn_status *status)
{
    *status = ATTN_OK;
    if (!(p >= 0.0f && p <= 1.0f)) {
        *status = attn__fail(ATTN_ERR_ARG, "%s: p is %g, expected a probability in [0, 1]", op, (double)p);
        return NULL;
    }
    if (!attn_ctx_training(ctx) || p == 0.0f) return NULL;
    uint8_t *keep = attn__arena_alloc(&ctx->arena, (size_t)(n ? n : 1));
    if (!keep) {
        *status = attn_last_status();
        return NULL;
    }
    *scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    attn_rng *rng = attn_ctx_rng(ctx);
    const uint64_t key_hi = attn_rng_u32(rng), key = key_hi << 32 | attn_rng_u32(rng);
    attn__dropout_mask(keep, n, key, p, ctx->num_threads);
    return keep;
}

static attn_status dropout_backward(attn_ctx *ctx, attn_node *node)
{
    const dropout_saved *s = node->saved;
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const float *dy = node->out->grad;
    const uint8_t *keep = s->keep;
    const float scale = s->scale;
    const int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) gx[i] += dy[i] * (keep[i] ? scale : 0.0f);
    return ATTN_OK;
}

attn_tensor *attn_dropout(attn_ctx *ctx, attn_tensor *x, float p)
{
    if (!ctx || !x) return attn__null_input(__func__);
    attn_status st;
    float scale = 0.0f;
    const uint8_t *keep = attn__dropout_keep(ctx, x->numel, p, &scale, "dropout", &st);
    if (!keep) return st == ATTN_OK ? x : NULL;
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    const float *xd = x->data;
    float *yd = y->data;
    const int64_t n = x->numel;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) yd[i] = xd[i] * (keep[i] ? scale : 0.0f);
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, "dropout", dropout_backward, y, &x, 1, sizeof(dropout_saved));
        if (!node) return NULL;
        *(dropout_saved *)node->saved = (dropout_saved){keep, scale};
    }
    return y;
}

/* in[0] = x (the residual), in[1] = branch */
static attn_status add_dropout_backward(attn_ctx *ctx, attn_node *node)
{
    const dropout_saved *s = node->saved;
    float *gx = node->grad[0], *gb = node->grad[1];
    const float *ds = node->out->grad;
    const uint8_t *keep = s->keep;
    const float scale = s->scale;
    const int64_t n = node->out->numel;
    if (gx) attn__add_into(gx, ds, n, ctx->num_threads);
    if (gb && !keep) attn__add_into(gb, ds, n, ctx->num_threads);
    if (gb && keep) {
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++) gb[i] += ds[i] * (keep[i] ? scale : 0.0f);
    }
    return ATTN_OK;
}

attn_tensor *attn__add_dropout(attn_ctx *ctx, attn_tensor *x, attn_tensor *branch, float p)
{
    if (!ctx || !x || !branch) return attn__null_input("attn_add");
    if (!attn_same_shape(x, branch)) {
        char xs[64], bs[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "residual: x %s and branch %s differ in shape",
                               attn_shape_str(x, xs, 64), attn_shape_str(branch, bs, 64));
    }
    attn_status st;
    float scale = 0.0f;
    const uint8_t *keep = attn__dropout_keep(ctx, branch->numel, p, &scale, "dropout", &st);
    if (!keep && st != ATTN_OK) return NULL;
    attn_tensor *s = attn__empty_like(ctx, x);
    if (!s) return NULL;
    const float *xd = x->data, *bd = branch->data;
    float *sd = s->data;
    const int64_t n = x->numel;
    if (keep) {
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++) sd[i] = xd[i] + bd[i] * (keep[i] ? scale : 0.0f);
    } else {
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
        for (int64_t i = 0; i < n; i++) sd[i] = xd[i] + bd[i];
    }
    attn_tensor *in[2] = {x, branch};
    if (attn__needs_grad(ctx, in, 2)) {
        attn_node *node = attn__record(ctx, "add_dropout", add_dropout_backward, s, in, 2, sizeof(dropout_saved));
        if (!node) return NULL;
        *(dropout_saved *)node->saved = (dropout_saved){keep, scale};
    }
    return s;
}
