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
    float (*df)(float x, float y); /* dy/dx at input x with output y */
} unary_op;

static float gelu_f(float x)
{
    return attn_gelu_f(x);
}
static float gelu_df(float x, float y)
{
    (void)y;
    return attn_gelu_df(x);
}

static float gelu_tanh_f(float x)
{
    return attn_gelu_tanh_f(x);
}
static float gelu_tanh_df(float x, float y)
{
    (void)y;
    return attn_gelu_tanh_df(x);
}

static float silu_f(float x)
{
    return attn_silu_f(x);
}
static float silu_df(float x, float y)
{
    (void)y;
    return attn_silu_df(x);
}

static float tanh_f(float x)
{
    return tanhf(x);
}
static float tanh_df(float x, float y)
{
    (void)x;
    return 1.0f - y * y;
}

static float sigmoid_f(float x)
{
    return attn_sigmoid_f(x);
}
static float sigmoid_df(float x, float y)
{
    (void)x;
    return y * (1.0f - y);
}

static float exp_f(float x)
{
    return expf(x);
}
static float exp_df(float x, float y)
{
    (void)x;
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
    [UN_RELU] = {"relu", NULL, NULL}, /* written out in forward_flat and backward_flat */
    [UN_GELU] = {"gelu", gelu_f, gelu_df},
    [UN_GELU_TANH] = {"gelu_tanh", gelu_tanh_f, gelu_tanh_df},
    [UN_SILU] = {"silu", silu_f, silu_df},
    [UN_TANH] = {"tanh", tanh_f, tanh_df},
    [UN_SIGMOID] = {"sigmoid", sigmoid_f, sigmoid_df},
    [UN_EXP] = {"exp", exp_f, exp_df},
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
    if (kind == UN_RELU)
        for (int64_t i = 0; i < n; i++) gx[i] += attn_relu_grad(x[i], dy[i]);
    else
        for (int64_t i = 0; i < n; i++) gx[i] += dy[i] * unary_ops[kind].df(x[i], y[i]);
}

static attn_status unary_backward(attn_ctx *ctx, attn_node *node)
{
    attn_status st = ATTN_OK;
    float *gx = attn__in_grad(ctx, node, 0, &st);
    if (!gx) return st;
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
