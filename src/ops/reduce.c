/* Sum and mean along one dim or over everything (dy = the output's gradient, n = the count):
 *   sum:  y = sum_k x[.., k, ..]         dx[.., k, ..] += dy
 *   mean: y = sum_k x[.., k, ..] / n     dx[.., k, ..] += dy / n      (n == 0: NaN, as torch)
 * x is seen as (outer, n, inner) with n along the reduced dim (sum_all: (1, numel, 1)); the
 * output is (outer, inner). Sums are accumulated in double, in a fixed order. */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

typedef struct reduce_saved {
    int64_t outer, n, inner;
    float scale; /* 1 for sum, 1 / n for mean */
} reduce_saved;

static attn_status reduce_backward(attn_ctx *ctx, attn_node *node)
{
    (void)ctx;
    const reduce_saved *s = node->saved;
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const float *dy = node->out->grad; /* (outer, inner) */
    for (int64_t o = 0; o < s->outer; o++)
        for (int64_t k = 0; k < s->n; k++) {
            float *g = gx + (o * s->n + k) * s->inner;
            for (int64_t i = 0; i < s->inner; i++) g[i] += dy[o * s->inner + i] * s->scale;
        }
    return ATTN_OK;
}

static attn_tensor *reduce(attn_ctx *ctx, attn_tensor *x, const char *op, bool mean, int64_t outer, int64_t n,
                           int64_t inner, int out_ndim, const int64_t *out_shape)
{
    attn_tensor *y = attn_tensor_empty(ctx, out_ndim, out_shape);
    if (!y) return NULL;
    const float *xd = x->data;
    float *yd = y->data; /* (outer, inner) */
    double div = mean ? (double)n : 1.0;
#pragma omp parallel for schedule(static)                                                                              \
    num_threads(ctx->num_threads) if (outer * inner > 1 && x->numel > ATTN_PARALLEL_MIN)
    for (int64_t oi = 0; oi < outer * inner; oi++) {
        const float *src = xd + (oi / inner) * n * inner + oi % inner;
        double acc = 0.0;
        for (int64_t k = 0; k < n; k++) acc += src[k * inner];
        yd[oi] = (float)(acc / div);
    }
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, op, reduce_backward, y, &x, 1, sizeof(reduce_saved));
        if (!node) return NULL;
        *(reduce_saved *)node->saved = (reduce_saved){outer, n, inner, (float)(1.0 / div)};
    }
    return y;
}

static attn_tensor *reduce_dim(attn_ctx *ctx, attn_tensor *x, int dim, bool keepdim, bool mean)
{
    const char *op = mean ? "mean" : "sum";
    if (!ctx || !x) return attn__null_input(op);
    int d = attn__dim(dim, x->ndim, op);
    if (d < 0) return NULL;
    int64_t shape[ATTN_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != d)
            shape[nd++] = x->shape[i];
        else if (keepdim)
            shape[nd++] = 1;
    return reduce(ctx, x, op, mean, attn__prod(x->shape, 0, d), x->shape[d], attn__prod(x->shape, d + 1, x->ndim), nd,
                  shape);
}

attn_tensor *attn_sum(attn_ctx *ctx, attn_tensor *x, int dim, bool keepdim)
{
    return reduce_dim(ctx, x, dim, keepdim, false);
}

attn_tensor *attn_mean(attn_ctx *ctx, attn_tensor *x, int dim, bool keepdim)
{
    return reduce_dim(ctx, x, dim, keepdim, true);
}

attn_tensor *attn_sum_all(attn_ctx *ctx, attn_tensor *x)
{
    if (!ctx || !x) return attn__null_input(__func__);
    return reduce(ctx, x, "sum_all", false, 1, x->numel, 1, 0, NULL);
}

attn_tensor *attn_mean_all(attn_ctx *ctx, attn_tensor *x)
{
    if (!ctx || !x) return attn__null_input(__func__);
    return reduce(ctx, x, "mean_all", true, 1, x->numel, 1, 0, NULL);
}
