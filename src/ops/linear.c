/* Linear layer as one GEMM over all rows of x (every leading dim folded into R rows):
 *   forward:  Y (R, out) = X (R, in) @ W (out, in)^T + b (out)
 *   backward: dX (R, in)   += dY @ W
 *             dW (out, in) += dY^T @ X       (summed over the rows by the GEMM)
 *             db (out)     += sum over rows of dY
 */
#include "../autograd/tape.h"
#include "../kernels/kernels.h"

typedef struct linear_sizes {
    int64_t rows, in, out;
} linear_sizes;

static attn_status linear_backward(attn_ctx *ctx, attn_node *node)
{
    const linear_sizes *s = node->saved;
    attn_status st = ATTN_OK;
    float *dx = attn__in_grad(ctx, node, 0, &st);
    float *dw = attn__in_grad(ctx, node, 1, &st);
    float *db = node->n_in > 2 ? attn__in_grad(ctx, node, 2, &st) : NULL;
    if (st != ATTN_OK) return st;
    const float *x = node->in[0]->data, *w = node->in[1]->data, *dy = node->out->grad;
    if (dx) /* dX (R, in) += dY (R, out) @ W (out, in) */
        attn_gemm(dx, s->in, dy, s->out, w, s->in, s->rows, s->in, s->out, false, false, 1, 1, ctx->num_threads);
    if (dw) /* dW (out, in) += dY^T (out, R) @ X (R, in) */
        attn_gemm(dw, s->in, dy, s->out, x, s->in, s->out, s->in, s->rows, true, false, 1, 1, ctx->num_threads);
    if (db) attn_col_sums_add(db, dy, s->rows, s->out, ctx->num_threads); /* db (out) += column sums of dy */
    return ATTN_OK;
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

attn_tensor *attn_linear(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias)
{
    if (!ctx || !x || !weight) return attn__null_input(__func__);
    if (linear_check(x, weight, bias) != ATTN_OK) return NULL;
    int64_t in = weight->shape[1], out = weight->shape[0];
    int64_t rows = attn__prod(x->shape, 0, x->ndim - 1);
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < x->ndim - 1; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = out;
    attn_tensor *y = attn_tensor_empty(ctx, x->ndim, shape); /* (..., out) */
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
