/* Dropout (dy = the output's gradient):
 *   training, p > 0: keep ~ Bernoulli(1 - p) per element: attn_dropout_mask (kernels.h), a hash
 *                    of the element's index under a key drawn from the ctx RNG (64 bits per
 *                    call), so the mask depends on the seed alone, not on the thread count,
 *                    y = keep * x / (1 - p)          dx += keep * dy / (1 - p)
 *   eval or p == 0:  y = x (the input itself, no copy and no node)
 * p == 1 drops every element (y = 0, dx += 0). A product, as in PyTorch: a dropped NaN or inf
 * stays NaN (and the loops vectorise). The keep mask is saved for the backward. */
#include "../autograd/tape.h"
#include "../kernels/kernels.h"


typedef struct dropout_saved {
    uint8_t *keep; /* (numel) 1 = kept */
    float scale;   /* 1 / (1 - p), 0 when p == 1 */
} dropout_saved;

static attn_status dropout_backward(attn_ctx *ctx, attn_node *node)
{
    const dropout_saved *s = node->saved;
    attn_status st = ATTN_OK;
    float *gx = attn__in_grad(ctx, node, 0, &st);
    if (!gx) return st;
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
    if (!(p >= 0.0f && p <= 1.0f))
        return attn__fail_null(ATTN_ERR_ARG, "dropout: p is %g, expected a probability in [0, 1]",
                               (double)p);
    if (!attn_ctx_training(ctx) || p == 0.0f) return x;
    attn_tensor *y = attn__empty_like(ctx, x);
    uint8_t *keep = attn_arena_alloc(&ctx->arena, (size_t)(x->numel ? x->numel : 1));
    if (!y || !keep) return NULL;
    const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    attn_rng *rng = attn_ctx_rng(ctx);
    const uint64_t key_hi = attn_rng_u32(rng), key = key_hi << 32 | attn_rng_u32(rng);
    attn_dropout_mask(keep, x->numel, key, p, ctx->num_threads);
    const float *xd = x->data;
    float *yd = y->data;
    const int64_t n = x->numel;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) yd[i] = xd[i] * (keep[i] ? scale : 0.0f);
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node =
            attn__record(ctx, "dropout", dropout_backward, y, &x, 1, sizeof(dropout_saved));
        if (!node) return NULL;
        *(dropout_saved *)node->saved = (dropout_saved){keep, scale};
    }
    return y;
}
