/* Linear layer as one GEMM over all rows of x (every leading dim folded into R rows):
 *   forward:  Y (R, out) = X (R, in) @ W (out, in)^T + b (out)
 *   backward: dX (R, in)   += dY @ W
 *             dW (out, in) += dY^T @ X       (summed over the rows by the GEMM)
 *             db (out)     += sum over rows of dY
 * and with the FFN's activation and dropout fused into one pass after the GEMM (fused.h):
 *   forward:  H = X @ W^T (kept),  Y = keep * act(H + b) / (1 - p)
 *   backward: dH = dY * keep / (1 - p) * act'(H + b) (one pass), then the GEMMs above with dH
 */
#include "../autograd/tape.h"
#include "../kernels/activation.h"
#include "../kernels/kernels.h"
#include "fused.h"

typedef struct linear_sizes {
    int64_t rows, in, out;
} linear_sizes;

/* The gradients of x, W and b (node->in[0..2]) from dy (R, out) */
static attn_status linear_grads(attn_ctx *ctx, attn_node *node, const linear_sizes *s, const float *dy)
{
    attn_status st = ATTN_OK;
    float *dx = attn__in_grad(ctx, node, 0, &st);
    float *dw = attn__in_grad(ctx, node, 1, &st);
    float *db = node->n_in > 2 ? attn__in_grad(ctx, node, 2, &st) : NULL;
    if (st != ATTN_OK) return st;
    const float *x = node->in[0]->data, *w = node->in[1]->data;
    if (dx) /* dX (R, in) += dY (R, out) @ W (out, in) */
        attn_gemm(dx, s->in, dy, s->out, w, s->in, s->rows, s->in, s->out, false, false, 1, 1, ctx->num_threads);
    if (dw) /* dW (out, in) += dY^T (out, R) @ X (R, in) */
        attn_gemm(dw, s->in, dy, s->out, x, s->in, s->out, s->in, s->rows, true, false, 1, 1, ctx->num_threads);
    if (db) attn_col_sums_add(db, dy, s->rows, s->out, ctx->num_threads); /* db (out) += column sums of dy */
    return ATTN_OK;
}

static attn_status linear_backward(attn_ctx *ctx, attn_node *node)
{
    return linear_grads(ctx, node, node->saved, node->out->grad);
}

static attn_status linear_check(const attn_tensor *x, const attn_tensor *w, const attn_tensor *b)
{
    char xs[64], ws[64], bs[64];
    if (x->ndim < 1 || w->ndim != 2 || w->shape[1] != x->shape[x->ndim - 1])
        return attn__fail(ATTN_ERR_SHAPE,
                          "linear: x %s and weight %s do not fit (expected x (..., in) and weight "
                          "(out, in))",
                          attn_shape_str(x, xs, 64), attn_shape_str(w, ws, 64));
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return attn__fail(ATTN_ERR_SHAPE, "linear: bias %s does not fit weight %s (expected (%lld))",
                          attn_shape_str(b, bs, 64), attn_shape_str(w, ws, 64),
                          (long long)w->shape[0]);
    return ATTN_OK;
}

/* An uninitialised (..., out) tensor for x (..., in) */
static attn_tensor *linear_output(attn_ctx *ctx, const attn_tensor *x, int64_t out)
{
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = out;
    return attn_tensor_empty(ctx, x->ndim, shape);
}

attn_tensor *attn_linear(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias)
{
    if (!ctx || !x || !weight) return attn__null_input(__func__);
    if (linear_check(x, weight, bias) != ATTN_OK) return NULL;
    int64_t in = weight->shape[1], out = weight->shape[0];
    int64_t rows = attn__prod(x->shape, 0, x->ndim - 1);
    attn_tensor *y = linear_output(ctx, x, out); /* (..., out) */
    if (!y) return NULL;
    attn_gemm(y->data, out, x->data, in, weight->data, in, rows, out, in, false, true, 1, 0, ctx->num_threads);
    if (bias) {
        float *yd = y->data;
        const float *bd = bias->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (rows * out > ATTN_PARALLEL_MIN)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < out; j++) yd[r * out + j] += bd[j];
    }
    attn_tensor *in_t[3] = {x, weight, bias};
    int n_in = bias ? 3 : 2;
    if (attn__needs_grad(ctx, in_t, n_in)) {
        attn_node *node =
            attn__record(ctx, "linear", linear_backward, y, in_t, n_in, sizeof(linear_sizes));
        if (!node) return NULL;
        *(linear_sizes *)node->saved = (linear_sizes){rows, in, out};
    }
    return y;
}

/* ---- linear, activation and dropout in one pass ---- */

typedef struct linear_act_saved {
    linear_sizes sizes;
    attn__act act;
    const float *h;      /* (R, out) X @ W^T, without the bias */
    const uint8_t *keep; /* (R, out) the dropout mask, NULL without dropout */
    float scale;         /* 1 / (1 - p) */
} linear_act_saved;

static attn_status linear_act_backward(attn_ctx *ctx, attn_node *node)
{
    const linear_act_saved *s = node->saved;
    const int64_t rows = s->sizes.rows, out = s->sizes.out, n = rows * out;
    float *dh = attn_arena_alloc(&ctx->arena, (size_t)(n > 0 ? n : 1) * sizeof *dh); /* (R, out) */
    if (!dh) return attn_last_status();
    const float *h = s->h, *b = node->n_in > 2 ? node->in[2]->data : NULL, *dy = node->out->grad;
    const uint8_t *keep = s->keep;
    const float scale = s->scale;
    const attn__act act = s->act;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < out; j++) {
            const int64_t i = r * out + j;
            const float v = b ? h[i] + b[j] : h[i];
            const float g = keep ? dy[i] * (keep[i] ? scale : 0.0f) : dy[i];
            dh[i] = act == ATTN__ACT_RELU ? attn_relu_grad(v, g) : g * attn_gelu_df(v);
        }
    return linear_grads(ctx, node, &s->sizes, dh);
}

attn_tensor *attn__linear_act_dropout(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight,
                                      attn_tensor *bias, attn__act act, float p)
{
    if (!ctx || !x || !weight) return attn__null_input("attn_linear");
    if (linear_check(x, weight, bias) != ATTN_OK) return NULL;
    const int64_t in = weight->shape[1], out = weight->shape[0];
    const int64_t rows = attn__prod(x->shape, 0, x->ndim - 1), n = rows * out;
    attn_tensor *y = linear_output(ctx, x, out); /* (..., out) */
    float *h = attn_arena_alloc(&ctx->arena, (size_t)(n > 0 ? n : 1) * sizeof *h); /* (R, out) */
    if (!y || !h) return NULL;
    attn_gemm(h, out, x->data, in, weight->data, in, rows, out, in, false, true, 1, 0, ctx->num_threads);
    attn_status st;
    float scale = 0.0f;
    const uint8_t *keep = attn__dropout_keep(ctx, n, p, &scale, "dropout", &st);
    if (!keep && st != ATTN_OK) return NULL;
    const float *b = bias ? bias->data : NULL;
    float *yd = y->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < out; j++) {
            const int64_t i = r * out + j;
            const float v = b ? h[i] + b[j] : h[i];
            const float a = act == ATTN__ACT_RELU ? attn_relu_f(v) : attn_gelu_f(v);
            yd[i] = keep ? a * (keep[i] ? scale : 0.0f) : a;
        }
    attn_tensor *in_t[3] = {x, weight, bias};
    int n_in = bias ? 3 : 2;
    if (attn__needs_grad(ctx, in_t, n_in)) {
        attn_node *node = attn__record(ctx, "linear_act", linear_act_backward, y, in_t, n_in,
                                       sizeof(linear_act_saved));
        if (!node) return NULL;
        *(linear_act_saved *)node->saved = (linear_act_saved){{rows, in, out}, act, h, keep, scale};
    }
    return y;
}
