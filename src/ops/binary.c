/* Elementwise binary ops with NumPy/PyTorch broadcasting, and scale and bias add.
 *   add: y = a + b     da += dy,       db += dy
 *   sub: y = a - b     da += dy,       db -= dy
 *   mul: y = a * b     da += dy * b,   db += dy * a
 *   div: y = a / b     da += dy / b,   db -= dy * a / b^2
 * Gradients of broadcast operands are summed over the broadcast dims. */
#include "../autograd/tape.h"

typedef enum binary_kind { BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV } binary_kind;

static const char *const binary_names[] = {"add", "sub", "mul", "div"};

/* Shapes right-aligned to 4 dims, with element strides (0 on broadcast dims). */
typedef struct broadcast {
    int64_t shape[4];  /* output */
    int64_t sa[4], sb[4];
    bool same;         /* a, b and the output have the same shape: one flat loop */
} broadcast;

static attn_status broadcast_plan(broadcast *p, const attn_tensor *a, const attn_tensor *b,
                                  const char *op, int *ndim_out)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t stride_a = 1, stride_b = 1;
    p->same = attn_same_shape(a, b);
    for (int d = 3; d >= 0; d--) {
        int ia = a->ndim - (4 - d), ib = b->ndim - (4 - d);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char x[64], y[64];
            return attn__fail(ATTN_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast", op,
                              attn_shape_str(a, x, 64), attn_shape_str(b, y, 64));
        }
        p->shape[d] = da > db ? da : db;
        if (da == 0 || db == 0) p->shape[d] = 0;
        p->sa[d] = da == 1 ? 0 : stride_a;
        p->sb[d] = db == 1 ? 0 : stride_b;
        stride_a *= da;
        stride_b *= db;
    }
    *ndim_out = nd;
    return ATTN_OK;
}

static inline float apply(binary_kind kind, float x, float y)
{
    switch (kind) {
    case BIN_ADD: return x + y;
    case BIN_SUB: return x - y;
    case BIN_MUL: return x * y;
    case BIN_DIV: return x / y;
    }
    return 0.0f;
}

typedef struct binary_saved {
    broadcast plan;
    binary_kind kind;
} binary_saved;

/* d(a op b)/da and /db at one element, times dy. */
static inline void partials(binary_kind kind, float x, float y, float dy, float *dx, float *dyy)
{
    *dx = 0.0f;
    *dyy = 0.0f;
    switch (kind) {
    case BIN_ADD: *dx = dy; *dyy = dy; break;
    case BIN_SUB: *dx = dy; *dyy = -dy; break;
    case BIN_MUL: *dx = dy * y; *dyy = dy * x; break;
    case BIN_DIV: *dx = dy / y; *dyy = -dy * x / (y * y); break;
    }
}

static attn_status binary_backward(attn_ctx *ctx, attn_node *node)
{
    const binary_saved *s = node->saved;
    const broadcast *p = &s->plan;
    attn_status st = ATTN_OK;
    float *ga = attn__in_grad(ctx, node, 0, &st);
    float *gb = attn__in_grad(ctx, node, 1, &st);
    if (st != ATTN_OK) return st;
    const float *a = node->in[0]->data, *b = node->in[1]->data, *dy = node->out->grad;
    if (p->same) {
        int64_t n = node->out->numel;
        for (int64_t i = 0; i < n; i++) {
            float dx, dyy;
            partials(s->kind, a[i], b[i], dy[i], &dx, &dyy);
            if (ga) ga[i] += dx;
            if (gb) gb[i] += dyy;
        }
        return ATTN_OK;
    }
    int64_t o = 0;
    for (int64_t i0 = 0; i0 < p->shape[0]; i0++)
        for (int64_t i1 = 0; i1 < p->shape[1]; i1++)
            for (int64_t i2 = 0; i2 < p->shape[2]; i2++)
                for (int64_t i3 = 0; i3 < p->shape[3]; i3++, o++) {
                    int64_t ia = i0 * p->sa[0] + i1 * p->sa[1] + i2 * p->sa[2] + i3 * p->sa[3];
                    int64_t ib = i0 * p->sb[0] + i1 * p->sb[1] + i2 * p->sb[2] + i3 * p->sb[3];
                    float dx, dyy;
                    partials(s->kind, a[ia], b[ib], dy[o], &dx, &dyy);
                    if (ga) ga[ia] += dx;
                    if (gb) gb[ib] += dyy;
                }
    return ATTN_OK;
}

static attn_tensor *binary(attn_ctx *ctx, attn_tensor *a, attn_tensor *b, binary_kind kind)
{
    if (!ctx || !a || !b) return attn__null_input(binary_names[kind]);
    broadcast plan;
    int nd = 0;
    if (broadcast_plan(&plan, a, b, binary_names[kind], &nd) != ATTN_OK) return NULL;
    attn_tensor *y = attn_tensor_empty(ctx, nd, plan.shape + (4 - nd));
    if (!y) return NULL;
    if (plan.same) {
        int64_t n = y->numel;
        const float *x = a->data, *z = b->data;
        float *out = y->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > 65536)
        for (int64_t i = 0; i < n; i++) out[i] = apply(kind, x[i], z[i]);
    } else {
        int64_t o = 0;
        for (int64_t i0 = 0; i0 < plan.shape[0]; i0++)
            for (int64_t i1 = 0; i1 < plan.shape[1]; i1++)
                for (int64_t i2 = 0; i2 < plan.shape[2]; i2++)
                    for (int64_t i3 = 0; i3 < plan.shape[3]; i3++, o++) {
                        int64_t ia = i0 * plan.sa[0] + i1 * plan.sa[1] + i2 * plan.sa[2] +
                                     i3 * plan.sa[3];
                        int64_t ib = i0 * plan.sb[0] + i1 * plan.sb[1] + i2 * plan.sb[2] +
                                     i3 * plan.sb[3];
                        y->data[o] = apply(kind, a->data[ia], b->data[ib]);
                    }
    }
    attn_tensor *in[2] = {a, b};
    if (attn__needs_grad(ctx, in, 2)) {
        attn_node *node = attn__record(ctx, binary_names[kind], binary_backward, y, in, 2,
                                       sizeof(binary_saved));
        if (!node) return NULL;
        *(binary_saved *)node->saved = (binary_saved){plan, kind};
    }
    return y;
}

attn_tensor *attn_add(attn_ctx *ctx, attn_tensor *a, attn_tensor *b) { return binary(ctx, a, b, BIN_ADD); }
attn_tensor *attn_sub(attn_ctx *ctx, attn_tensor *a, attn_tensor *b) { return binary(ctx, a, b, BIN_SUB); }
attn_tensor *attn_mul(attn_ctx *ctx, attn_tensor *a, attn_tensor *b) { return binary(ctx, a, b, BIN_MUL); }
attn_tensor *attn_div(attn_ctx *ctx, attn_tensor *a, attn_tensor *b) { return binary(ctx, a, b, BIN_DIV); }

/* ---- scale: y = s * x,  dx += s * dy ---- */

static attn_status scale_backward(attn_ctx *ctx, attn_node *node)
{
    attn_status st = ATTN_OK;
    float *gx = attn__in_grad(ctx, node, 0, &st);
    if (!gx) return st;
    float s = *(const float *)node->saved;
    const float *dy = node->out->grad;
    for (int64_t i = 0; i < node->out->numel; i++) gx[i] += s * dy[i];
    return ATTN_OK;
}

attn_tensor *attn_scale(attn_ctx *ctx, attn_tensor *x, float s)
{
    if (!ctx || !x) return attn__null_input(__func__);
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    for (int64_t i = 0; i < x->numel; i++) y->data[i] = s * x->data[i];
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, "scale", scale_backward, y, &x, 1, sizeof(float));
        if (!node) return NULL;
        *(float *)node->saved = s;
    }
    return y;
}

/* ---- bias add: y = x + bias over the last dim,  dx += dy,  dbias += sum over rows of dy ---- */

static attn_status bias_add_backward(attn_ctx *ctx, attn_node *node)
{
    attn_status st = ATTN_OK;
    float *gx = attn__in_grad(ctx, node, 0, &st);
    float *gb = attn__in_grad(ctx, node, 1, &st);
    if (st != ATTN_OK) return st;
    const float *dy = node->out->grad;
    int64_t c = node->in[1]->numel, rows = c ? node->out->numel / c : 0;
    if (gx)
        for (int64_t i = 0; i < node->out->numel; i++) gx[i] += dy[i];
    if (gb)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < c; j++) gb[j] += dy[r * c + j];
    return ATTN_OK;
}

attn_tensor *attn_bias_add(attn_ctx *ctx, attn_tensor *x, attn_tensor *bias)
{
    if (!ctx || !x || !bias) return attn__null_input(__func__);
    if (x->ndim < 1 || bias->ndim != 1 || bias->shape[0] != x->shape[x->ndim - 1]) {
        char a[64], b[64];
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "bias_add: x %s and bias %s: bias must be 1-D of x's last size",
                               attn_shape_str(x, a, 64), attn_shape_str(bias, b, 64));
    }
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    int64_t c = bias->numel, rows = c ? x->numel / c : 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < c; j++) y->data[r * c + j] = x->data[r * c + j] + bias->data[j];
    attn_tensor *in[2] = {x, bias};
    if (attn__needs_grad(ctx, in, 2) &&
        !attn__record(ctx, "bias_add", bias_add_backward, y, in, 2, 0))
        return NULL;
    return y;
}
