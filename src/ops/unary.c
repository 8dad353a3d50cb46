/* Elementwise unary ops, one table-driven implementation (dy = the output's gradient):
 *   relu:    y = max(x, 0)                     dx += x <= 0 ? 0 : dy   (a select, as torch's
 *                                              threshold_backward: NaN x passes dy, NaN dy at
 *                                              x <= 0 adds 0)
 *   gelu:    y = x * Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *                                              dx += dy * (Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi))
 *   gelu_tanh: y = x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2   (GPT-2's; activation_internal.h)
 *   silu:    y = x sigmoid(x)                  dx += dy * s (1 + x (1 - s))
 *   tanh:    y = tanh(x)                       dx += dy * (1 - y^2)
 *   sigmoid: y = 1 / (1 + exp(-x))             dx += dy * y * (1 - y)
 *   exp:     y = exp(x)                        dx += dy * y
 * The derivative is read from the input x and the output y, both kept by the tape. */
#include "../autograd/tape_internal.h"
#include "../kernels/activation_internal.h"
#include "../kernels/kernels_internal.h"

#include <math.h>

typedef struct unary_op {
    const char *name;
    float (*f)(float x);
    float (*dx_of_x)(float x); /* dy/dx from the input x, or */
    float (*dx_of_y)(float y); /* from the output y (the other NULL) */
} unary_op;

static float tanh_dx(float y)
{
    return 1.0f - y * y;
}

static float sigmoid_dx(float y)
{
    return y * (1.0f - y);
}

static float exp_dx(float y)
{
    return y;
}

typedef enum unary_kind {
    UN_RELU,
    UN_GELU,
    UN_GELU_TANH,
    UN_SILU,
    UN_TANH,
    UN_SIGMOID,
    UN_EXP
} unary_kind;

static const unary_op unary_ops[] = {
    [UN_RELU] = {"relu", NULL, NULL, NULL}, /* written out in forward_flat and backward_flat */
    [UN_GELU] = {"gelu", attn_gelu_f, attn_gelu_df, NULL},
    [UN_GELU_TANH] = {"gelu_tanh", attn_gelu_tanh_f, attn_gelu_tanh_df, NULL},
    [UN_SILU] = {"silu", attn_silu_f, attn_silu_df, NULL},
    [UN_TANH] = {"tanh", tanhf, NULL, tanh_dx},
    [UN_SIGMOID] = {"sigmoid", attn_sigmoid_f, NULL, sigmoid_dx},
    [UN_EXP] = {"exp", expf, NULL, exp_dx},
};

/* Blocks of ATTN_FLAT_BLOCK elements for the threads; ReLU's loops are written out (they
 * vectorise), the others go through the table. */

static void forward_flat(unary_kind kind, float *y, const float *x, int64_t n)
{
    if (kind == UN_RELU)
        for (int64_t i = 0; i < n; i++) y[i] = attn_relu_f(x[i]);
    else
        for (int64_t i = 0; i < n; i++) y[i] = unary_ops[kind].f(x[i]);
}

static void backward_flat(unary_kind kind, float *gx, const float *x, const float *y, const float *dy, int64_t n)
{
    const unary_op *op = &unary_ops[kind];
    if (kind == UN_RELU)
        for (int64_t i = 0; i < n; i++) gx[i] += attn_relu_grad(x[i], dy[i]);
    else if (op->dx_of_x)
        for (int64_t i = 0; i < n; i++) gx[i] += dy[i] * op->dx_of_x(x[i]);
    else
        for (int64_t i = 0; i < n; i++) gx[i] += dy[i] * op->dx_of_y(y[i]);
}

static attn_status unary_backward(attn_ctx *ctx, attn_node *node)
{
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const unary_kind kind = *(const unary_kind *)node->saved;
    const float *x = node->in[0]->data, *y = node->out->data, *dy = node->out->grad;
    const int64_t n = node->out->numel, blocks = (n + ATTN_FLAT_BLOCK - 1) / ATTN_FLAT_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t i0 = blk * ATTN_FLAT_BLOCK, len = n - i0 < ATTN_FLAT_BLOCK ? n - i0 : ATTN_FLAT_BLOCK;
        backward_flat(kind, gx + i0, x + i0, y + i0, dy + i0, len);
    }
    return ATTN_OK;
}

static attn_tensor *unary(attn_ctx *ctx, attn_tensor *x, unary_kind kind)
{
    if (!ctx || !x) return attn__null_input(unary_ops[kind].name);
    const unary_op *op = &unary_ops[kind];
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    const float *xd = x->data;
    float *yd = y->data;
    const int64_t n = x->numel, blocks = (n + ATTN_FLAT_BLOCK - 1) / ATTN_FLAT_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t i0 = blk * ATTN_FLAT_BLOCK, len = n - i0 < ATTN_FLAT_BLOCK ? n - i0 : ATTN_FLAT_BLOCK;
        forward_flat(kind, yd + i0, xd + i0, len);
    }
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, op->name, unary_backward, y, &x, 1, sizeof kind);
        if (!node) return NULL;
        *(unary_kind *)node->saved = kind;
    }
    return y;
}

attn_tensor *attn_relu(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_RELU);
}
attn_tensor *attn_gelu(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_GELU);
}
attn_tensor *attn_gelu_tanh(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_GELU_TANH);
}
attn_tensor *attn_silu(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_SILU);
}
attn_tensor *attn_tanh(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_TANH);
}
attn_tensor *attn_sigmoid(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_SIGMOID);
}
attn_tensor *attn_exp(attn_ctx *ctx, attn_tensor *x)
{
    return unary(ctx, x, UN_EXP);
}
