/* 1-D convolution (cross-correlation, as torch.nn.functional.conv1d), stride 1, zero padding p
 * on both sides, by im2col + GEMM per batch element:
 *   col[b] (Cin*K, Lout):  col[b][c*K + k, t] = x[b, c, t + k - p]   (0 outside [0, L))
 *   forward:  y[b] (Cout, Lout) = W (Cout, Cin*K) @ col[b] + bias (Cout, broadcast over t)
 *   backward: dW    += dy[b] @ col[b]^T            (summed over b)
 *             dcol   = W^T @ dy[b];  dx[b, c, t + k - p] += dcol[c*K + k, t]   (col2im)
 *             dbias += sum over b, t of dy[b, :, t]
 * Lout = L + 2p - K + 1 must be positive.
 */
#include "gemm_internal.h"
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

typedef struct conv1d_saved {
    const float *col; /* (B, Cin*K, Lout) im2col of x, in the arena */
    int64_t batch, cin, len, cout, k, pad, lout;
} conv1d_saved;

/* col (Cin*K, Lout) from one batch element x (Cin, L). */
static void im2col(float *col, const float *x, const conv1d_saved *s)
{
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t k = 0; k < s->k; k++) {
            float *row = col + (c * s->k + k) * s->lout;
            for (int64_t t = 0; t < s->lout; t++) {
                int64_t i = t + k - s->pad;
                row[t] = i >= 0 && i < s->len ? x[c * s->len + i] : 0.0f;
            }
        }
}

/* dx (Cin, L) += the columns of dcol (Cin*K, Lout) folded back (the adjoint of im2col). */
static void col2im_add(float *dx, const float *dcol, const conv1d_saved *s)
{
    for (int64_t c = 0; c < s->cin; c++)
        for (int64_t k = 0; k < s->k; k++) {
            const float *row = dcol + (c * s->k + k) * s->lout;
            for (int64_t t = 0; t < s->lout; t++) {
                int64_t i = t + k - s->pad;
                if (i >= 0 && i < s->len) dx[c * s->len + i] += row[t];
            }
        }
}

static attn_status conv1d_backward(attn_ctx *ctx, attn_node *node)
{
    const conv1d_saved *s = node->saved;
    float *dx = node->grad[0], *dw = node->grad[1], *db = node->n_in > 2 ? node->grad[2] : NULL;
    const float *w = node->in[1]->data, *dy = node->out->grad;
    int64_t ck = s->cin * s->k;
    float *dcol =
        dx ? attn__arena_alloc(&ctx->arena, (size_t)(ck * s->lout + 1) * sizeof(float)) : NULL; /* (Cin*K, Lout) */
    if (dx && !dcol) return attn_last_status();
    for (int64_t b = 0; b < s->batch; b++) {
        const float *dyb = dy + b * s->cout * s->lout;
        if (dw) /* dW (Cout, Cin*K) += dy[b] (Cout, Lout) @ col[b]^T */
            attn__ctx_gemm(ctx, dw, ck, dyb, s->lout, s->col + b * ck * s->lout, s->lout, s->cout, ck, s->lout, false,
                           true, 1, 1);
        if (dx) { /* dcol (Cin*K, Lout) = W^T @ dy[b] */
            attn__ctx_gemm(ctx, dcol, s->lout, w, ck, dyb, s->lout, ck, s->lout, s->cout, true, false, 1, 0);
            col2im_add(dx + b * s->cin * s->len, dcol, s);
        }
        if (db)
            for (int64_t o = 0; o < s->cout; o++)
                for (int64_t t = 0; t < s->lout; t++) db[o] += dyb[o * s->lout + t];
    }
    return ATTN_OK;
}

static attn_status conv1d_check(const attn_tensor *x, const attn_tensor *w, const attn_tensor *b, int64_t padding)
{
    char xs[64], ws[64];
    if (x->ndim != 3 || w->ndim != 3 || w->shape[1] != x->shape[1] || w->shape[2] < 1)
        return attn__fail(ATTN_ERR_SHAPE,
                          "conv1d: x %s and weight %s do not fit (expected x (B, Cin, L) and "
                          "weight (Cout, Cin, K), K >= 1)",
                          attn_shape_str(x, xs, 64), attn_shape_str(w, ws, 64));
    if (attn__check_bias("conv1d", b, w) != ATTN_OK) return ATTN_ERR_SHAPE;
    if (padding < 0 || padding > (INT64_MAX - x->shape[2]) / 2)
        return attn__fail(ATTN_ERR_ARG,
                          "conv1d: padding %lld, expected >= 0 (and not absurdly "
                          "large)",
                          (long long)padding);
    if (x->shape[2] + 2 * padding - w->shape[2] + 1 <= 0)
        return attn__fail(ATTN_ERR_SHAPE,
                          "conv1d: x %s with padding %lld is shorter than the kernel of weight %s "
                          "(output length %lld, expected > 0)",
                          attn_shape_str(x, xs, 64), (long long)padding, attn_shape_str(w, ws, 64),
                          (long long)(x->shape[2] + 2 * padding - w->shape[2] + 1));
    return ATTN_OK;
}

attn_tensor *attn_conv1d(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, int64_t padding)
{
    if (!ctx || !x || !weight) return attn__null_input(__func__);
    if (conv1d_check(x, weight, bias, padding) != ATTN_OK) return NULL;
    conv1d_saved s = {NULL,
                      x->shape[0],
                      x->shape[1],
                      x->shape[2],
                      weight->shape[0],
                      weight->shape[2],
                      padding,
                      x->shape[2] + 2 * padding - weight->shape[2] + 1};
    int64_t ck = s.cin * s.k;
    int64_t shape[3] = {s.batch, s.cout, s.lout}, col_shape[3] = {s.batch, ck, s.lout}, col_n;
    if (attn__shape_numel(3, col_shape, &col_n, "conv1d im2col") != ATTN_OK) return NULL;
    attn_tensor *y = attn_tensor_empty(ctx, 3, shape);                                /* (B, Cout, Lout) */
    float *col = attn__arena_alloc(&ctx->arena, (size_t)(col_n + 1) * sizeof(float)); /* (B, Cin*K, Lout) */
    if (!y || !col) return NULL;
    for (int64_t b = 0; b < s.batch; b++) {
        float *colb = col + b * ck * s.lout, *yb = y->data + b * s.cout * s.lout;
        im2col(colb, x->data + b * s.cin * s.len, &s);
        attn__ctx_gemm(ctx, yb, s.lout, weight->data, ck, colb, s.lout, s.cout, s.lout, ck, false, false, 1, 0);
        if (bias)
            for (int64_t o = 0; o < s.cout; o++)
                for (int64_t t = 0; t < s.lout; t++) yb[o * s.lout + t] += bias->data[o];
    }
    attn_tensor *in[3] = {x, weight, bias};
    int n_in = bias ? 3 : 2;
    if (attn__needs_grad(ctx, in, n_in)) {
        attn_node *node = attn__record(ctx, "conv1d", conv1d_backward, y, in, n_in, sizeof(conv1d_saved));
        if (!node) return NULL;
        s.col = col;
        *(conv1d_saved *)node->saved = s;
    }
    return y;
}
