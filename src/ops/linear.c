/* Linear layer as one GEMM over all rows of x (every leading dim folded into R rows):
 *   forward:  Y (R, out) = X (R, in) @ W (out, in)^T + b (out)
 *   backward: dX (R, in)   += dY @ W
 *             dW (out, in) += dY^T @ X       (summed over the rows by the GEMM)
 *             db (out)     += sum over rows of dY
 * The packed input projection of multi-head attention (fused_internal.h) is the same op with W in `blocks`
 * row blocks (q, k, v): the forward runs one GEMM per block into its columns of Y (the shapes of
 * separate linears), the backward dX one per block, but dW as one GEMM over all rows of W (the
 * (E, E) products with a long K are oneDNN's weak shape; one (3E, E) product is not).
 * With the FFN's activation and dropout fused into one pass after the GEMM (fused_internal.h):
 *   forward:  H = X @ W^T (kept),  Y = keep * act(H + b) / (1 - p)
 *   backward: dH = dY * keep / (1 - p) * act'(H + b) (one pass), then the GEMMs above with dH
 */
#include "gemm_internal.h"
#include "../autograd/tape_internal.h"
#include "../kernels/activation_internal.h"
#include "../kernels/kernels_internal.h"
#include "fused_internal.h"

#include <string.h>

typedef struct linear_sizes {
    int64_t rows, in, out;
    int64_t blocks; /* row blocks of W, each (out / blocks, in): 1, or the in-projection's 2-3 */
} linear_sizes;

/* The gradients of x, W and b (node->in[0..2]) from dy (R, out) */
static attn_status linear_grads(attn_ctx *ctx, attn_node *node, const linear_sizes *s, const float *dy)
{
    float *dx = node->grad[0], *dw = node->grad[1], *db = node->n_in > 2 ? node->grad[2] : NULL;
    const float *x = node->in[0]->data, *w = node->in[1]->data;
    const int64_t ob = s->out / s->blocks;
    /* dX (R, in) += dY_j (R, ob) @ W_j (ob, in) for each block, the last first (as separate linears
     * recorded in block order run backward) */
    for (int64_t j = s->blocks; dx && j-- > 0;)
        attn__ctx_gemm(ctx, dx, s->in, dy + j * ob, s->out, w + j * ob * s->in, s->in, s->rows, s->in, ob, false, false,
                       1, 1);
    if (dw) /* dW (out, in) += dY^T (out, R) @ X (R, in) */
        attn__ctx_gemm(ctx, dw, s->in, dy, s->out, x, s->in, s->out, s->in, s->rows, true, false, 1, 1);
    if (db) attn__col_sums_add(db, dy, s->rows, s->out, ctx->num_threads); /* db (out) += column sums of dy */
    return ATTN_OK;
}

static attn_status linear_backward(attn_ctx *ctx, attn_node *node)
{
    return linear_grads(ctx, node, node->saved, node->out->grad);
}

static attn_status linear_check(const attn_tensor *x, const attn_tensor *w, const attn_tensor *b)
{
    char xs[64], ws[64];
    if (x->ndim < 1 || w->ndim != 2 || w->shape[1] != x->shape[x->ndim - 1])
        return attn__fail(ATTN_ERR_SHAPE,
                          "linear: x %s and weight %s do not fit (expected x (..., in) and weight "
                          "(out, in))",
                          attn_shape_str(x, xs, 64), attn_shape_str(w, ws, 64));
    if (attn__check_bias("linear", b, w) != ATTN_OK) return ATTN_ERR_SHAPE;
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

/* attn_linear with the forward GEMM cut into `blocks` (dividing out) blocks of columns */
static attn_tensor *linear_blocks(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, int64_t blocks)
{
    if (!ctx || !x || !weight) return attn__null_input("attn_linear");
    if (linear_check(x, weight, bias) != ATTN_OK) return NULL;
    int64_t in = weight->shape[1], out = weight->shape[0], ob = out / blocks;
    int64_t rows = attn__prod(x->shape, 0, x->ndim - 1);
    attn_tensor *y = linear_output(ctx, x, out); /* (..., out) */
    if (!y) return NULL;
    for (int64_t j = 0; j < blocks; j++) /* Y[:, j ob : (j + 1) ob] = X @ W_j^T */
        attn__ctx_gemm(ctx, y->data + j * ob, out, x->data, in, weight->data + j * ob * in, in, rows, ob, in, false,
                       true, 1, 0);
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
        attn_node *node = attn__record(ctx, "linear", linear_backward, y, in_t, n_in, sizeof(linear_sizes));
        if (!node) return NULL;
        *(linear_sizes *)node->saved = (linear_sizes){rows, in, out, blocks};
    }
    return y;
}

attn_tensor *attn_linear(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias)
{
    return linear_blocks(ctx, x, weight, bias, 1);
}

attn_tensor *attn__linear_blocks(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, int64_t blocks)
{
    if (blocks < 1 || (weight && weight->ndim == 2 && weight->shape[0] % blocks))
        return attn__fail_null(ATTN_ERR_ARG, "linear: %lld blocks do not divide the weight's rows", (long long)blocks);
    return linear_blocks(ctx, x, weight, bias, blocks); /* checks the shapes */
}

/* ---- linear, activation and dropout in one pass ---- */

typedef struct linear_act_saved {
    linear_sizes sizes;
    attn__act act;
    const float *h;      /* (R, out) X @ W^T, without the bias */
    const uint8_t *keep; /* (R, out) the dropout mask, NULL without dropout */
    float scale;         /* 1 / (1 - p) */
} linear_act_saved;

/* Row loops of the fused epilogue, one per case so that each is a straight loop that -O2
 * vectorises (GELU's are libm calls either way); a row of `out` floats stays in L1 between them. */

/* y (n) = act(h + b), or act(h) without a bias; y may be h (in place) */
static void act_row(float *y, const float *h, const float *b, attn__act act, int64_t n)
{
    if (act == ATTN__ACT_GELU)
        for (int64_t j = 0; j < n; j++) y[j] = attn_gelu_f(b ? h[j] + b[j] : h[j]);
    else if (act == ATTN__ACT_GELU_TANH)
        for (int64_t j = 0; j < n; j++) y[j] = attn_gelu_tanh_f(b ? h[j] + b[j] : h[j]);
    else if (b)
        for (int64_t j = 0; j < n; j++) y[j] = attn_relu_f(h[j] + b[j]);
    else
        for (int64_t j = 0; j < n; j++) y[j] = attn_relu_f(h[j]);
}

/* y (n) = y * keep / (1 - p): dropout's product, in place */
static void drop_row(float *y, const uint8_t *keep, float scale, int64_t n)
{
    for (int64_t j = 0; j < n; j++) y[j] = y[j] * (keep[j] ? scale : 0.0f);
}

/* g (n) = g * act'(h + b) with g the gradient of the activation's output, in place */
static void act_grad_row(float *g, const float *h, const float *b, attn__act act, int64_t n)
{
    if (act == ATTN__ACT_GELU)
        for (int64_t j = 0; j < n; j++) g[j] = g[j] * attn_gelu_df(b ? h[j] + b[j] : h[j]);
    else if (act == ATTN__ACT_GELU_TANH)
        for (int64_t j = 0; j < n; j++) g[j] = g[j] * attn_gelu_tanh_df(b ? h[j] + b[j] : h[j]);
    else if (b)
        for (int64_t j = 0; j < n; j++) g[j] = attn_relu_grad(h[j] + b[j], g[j]);
    else
        for (int64_t j = 0; j < n; j++) g[j] = attn_relu_grad(h[j], g[j]);
}

static attn_status linear_act_backward(attn_ctx *ctx, attn_node *node)
{
    const linear_act_saved *s = node->saved;
    const int64_t rows = s->sizes.rows, out = s->sizes.out, n = rows * out;
    float *dh = attn__arena_alloc(&ctx->arena, (size_t)(n > 0 ? n : 1) * sizeof *dh); /* (R, out) */
    if (!dh) return attn_last_status();
    const float *h = s->h, *b = node->n_in > 2 ? node->in[2]->data : NULL, *dy = node->out->grad;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        float *g = dh + r * out;
        memcpy(g, dy + r * out, (size_t)out * sizeof *g);
        if (s->keep) drop_row(g, s->keep + r * out, s->scale, out);
        act_grad_row(g, h + r * out, b, s->act, out);
    }
    return linear_grads(ctx, node, &s->sizes, dh);
}

attn_tensor *attn__linear_act_dropout(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias,
                                      attn__act act, float p)
{
    if (!ctx || !x || !weight) return attn__null_input("attn_linear");
    if (linear_check(x, weight, bias) != ATTN_OK) return NULL;
    const int64_t in = weight->shape[1], out = weight->shape[0];
    const int64_t rows = attn__prod(x->shape, 0, x->ndim - 1), n = rows * out;
    attn_status st;
    float scale = 0.0f;
    const uint8_t *keep = attn__dropout_keep(ctx, n, p, &scale, "dropout", &st); /* p checked first */
    if (!keep && st != ATTN_OK) return NULL;
    attn_tensor *in_t[3] = {x, weight, bias};
    const int n_in = bias ? 3 : 2;
    const bool grad = attn__needs_grad(ctx, in_t, n_in);
    attn_tensor *y = linear_output(ctx, x, out); /* (..., out) */
    if (!y) return NULL;
    /* h (R, out): kept for the backward, or y itself when none follows (the pass runs in place) */
    float *h = grad ? attn__arena_alloc(&ctx->arena, (size_t)(n > 0 ? n : 1) * sizeof *h) : y->data;
    if (!h) return NULL;
    attn__ctx_gemm(ctx, h, out, x->data, in, weight->data, in, rows, out, in, false, true, 1, 0);
    const float *b = bias ? bias->data : NULL;
    float *yd = y->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++) {
        act_row(yd + r * out, h + r * out, b, act, out);
        if (keep) drop_row(yd + r * out, keep + r * out, scale, out);
    }
    if (grad) {
        attn_node *node = attn__record(ctx, "linear_act", linear_act_backward, y, in_t, n_in, sizeof(linear_act_saved));
        if (!node) return NULL;
        *(linear_act_saved *)node->saved = (linear_act_saved){{rows, in, out, 1}, act, h, keep, scale};
    }
    return y;
}
