/* Layer norm over the last dim C, weight and bias optional (dy = the output's gradient):
 *   forward:  xhat = (x - mean) / sqrt(var + eps),  y = xhat * w + b   (biased var, per row)
 *   backward: g = dy * w,  dx += (g - mean(g) - xhat * mean(g * xhat)) / sqrt(var + eps),
 *             dw += sum_rows dy * xhat,  db += sum_rows dy
 * and RMSNorm, the same without centring (no bias):
 *   forward:  xhat = x / sqrt(mean(x^2) + eps),  y = xhat * w
 *   backward: g = dy * w,  dx += (g - xhat * mean(g * xhat)) / sqrt(mean(x^2) + eps),
 *             dw += sum_rows dy * xhat
 * The forward keeps mean (layer norm only) and rstd per row for the backward. */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

#include <math.h>

typedef struct layernorm_saved {
    float *mean, *rstd; /* (rows); mean NULL: RMSNorm */
    int64_t rows, cols;
} layernorm_saved;

static attn_status layernorm_backward(attn_ctx *ctx, attn_node *node)
{
    const layernorm_saved *s = node->saved;
    float *gx = node->grad[0], *gw = node->grad[1], *gb = node->grad[2];
    const attn_tensor *w = node->in[1];
    attn__layernorm_rows_backward(gx, gw, gb, node->out->grad, node->in[0]->data, s->mean, s->rstd, w ? w->data : NULL,
                                  s->rows, s->cols, ctx->num_threads);
    return ATTN_OK;
}

/* weight or bias: NULL, or 1-D of size c. */
static bool affine_ok(const attn_tensor *t, int64_t c)
{
    return !t || (t->ndim == 1 && t->shape[0] == c);
}

/* Both norms over x's last dim: centred (layer norm) or not (RMSNorm), `op` naming them in errors. */
static attn_tensor *norm_rows(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, float eps,
                              bool centred, const char *op)
{
    char sx[64], sw[64], sb[64];
    if (x->ndim < 1 || !affine_ok(weight, x->shape[x->ndim - 1]) || !affine_ok(bias, x->shape[x->ndim - 1]))
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "%s: x %s, weight %s, bias %s: x needs at least 1 dim and "
                               "weight and bias (or NULL) must be 1-D of x's last size",
                               op, attn_shape_str(x, sx, 64), attn_shape_str(weight, sw, 64),
                               attn_shape_str(bias, sb, 64));
    if (!(eps >= 0.0f) || isinf(eps))
        return attn__fail_null(ATTN_ERR_ARG, "%s: eps is %g, expected finite and >= 0", op, (double)eps);
    int64_t cols = x->shape[x->ndim - 1], rows = cols ? x->numel / cols : 0;
    attn_tensor *y = attn__empty_like(ctx, x);
    size_t row_bytes = (size_t)(rows ? rows : 1) * sizeof(float);
    float *mean = centred ? attn__arena_alloc(&ctx->arena, row_bytes) : NULL; /* (rows) */
    float *rstd = attn__arena_alloc(&ctx->arena, row_bytes);                  /* (rows) */
    if (!y || (centred && !mean) || !rstd) return NULL;
    attn__layernorm_rows(y->data, mean, rstd, x->data, weight ? weight->data : NULL, bias ? bias->data : NULL, rows,
                         cols, eps, ctx->num_threads);
    attn_tensor *in[3] = {x, weight, bias};
    if (attn__needs_grad(ctx, in, 3)) {
        attn_node *node = attn__record(ctx, op, layernorm_backward, y, in, 3, sizeof(layernorm_saved));
        if (!node) return NULL;
        *(layernorm_saved *)node->saved = (layernorm_saved){mean, rstd, rows, cols};
    }
    return y;
}

attn_tensor *attn_layer_norm(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, float eps)
{
    if (!ctx || !x) return attn__null_input(__func__);
    return norm_rows(ctx, x, weight, bias, eps, true, "layer_norm");
}

attn_tensor *attn_rms_norm(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, float eps)
{
    if (!ctx || !x) return attn__null_input(__func__);
    return norm_rows(ctx, x, weight, NULL, eps, false, "rms_norm");
}
