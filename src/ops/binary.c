/* Elementwise binary ops with NumPy/PyTorch broadcasting, and scale and bias add.
 *   add: y = a + b     da += dy,       db += dy
 *   sub: y = a - b     da += dy,       db -= dy
 *   mul: y = a * b     da += dy * b,   db += dy * a
 *   div: y = a / b     da += dy / b,   db -= dy * a / b^2
 * Gradients of broadcast operands are summed over the broadcast dims. Big blocks are split
 * over the threads: the output by its elements, a broadcast operand's gradient by the operand's
 * elements, each summing its outputs in the order of one thread's loop. */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

typedef enum binary_kind {
    BIN_ADD,
    BIN_SUB,
    BIN_MUL,
    BIN_DIV
} binary_kind;
/* X(kind) for each kind: the flat loops' switches, each case a loop with its kind a constant */
#define BIN_KINDS(X) X(BIN_ADD) X(BIN_SUB) X(BIN_MUL) X(BIN_DIV)

static const char *const binary_names[] = {"add", "sub", "mul", "div"};

/* Shapes right-aligned to 4 dims, with element strides (0 on broadcast dims). */
typedef struct broadcast {
    int64_t shape[4]; /* output */
    int64_t sa[4], sb[4];
    bool same; /* a, b and the output have the same shape: one flat loop */
} broadcast;

static attn_status broadcast_plan(broadcast *p, const attn_tensor *a, const attn_tensor *b, const char *op,
                                  int *ndim_out)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t stride_a = 1, stride_b = 1;
    p->same = attn_same_shape(a, b);
    for (int d = 3; d >= 0; d--) {
        int ia = a->ndim - (4 - d), ib = b->ndim - (4 - d);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char x[64], y[64];
            return attn__fail(ATTN_ERR_SHAPE, "%s: shapes %s and %s cannot be broadcast", op, attn_shape_str(a, x, 64),
                              attn_shape_str(b, y, 64));
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
    case BIN_ADD:
        return x + y;
    case BIN_SUB:
        return x - y;
    case BIN_MUL:
        return x * y;
    case BIN_DIV:
        return x / y;
    }
    return 0.0f;
}

typedef struct binary_saved {
    broadcast plan;
    binary_kind kind;
} binary_saved;

/* Element offset of position i (4 dims) under strides st. */
static inline int64_t offset(const int64_t i[4], const int64_t st[4])
{
    return i[0] * st[0] + i[1] * st[1] + i[2] * st[2] + i[3] * st[3];
}

/* Element strides of the output (the broadcast shape, contiguous). */
static void out_strides(const broadcast *p, int64_t os[4])
{
    os[3] = 1;
    for (int d = 2; d >= 0; d--) os[d] = os[d + 1] * p->shape[d + 1];
}

/* d(a op b)/da and /db at one element, times dy. */
static inline void partials(binary_kind kind, float x, float y, float dy, float *dx, float *dyy)
{
    *dx = 0.0f;
    *dyy = 0.0f;
    switch (kind) {
    case BIN_ADD:
        *dx = dy;
        *dyy = dy;
        break;
    case BIN_SUB:
        *dx = dy;
        *dyy = -dy;
        break;
    case BIN_MUL:
        *dx = dy * y;
        *dyy = dy * x;
        break;
    case BIN_DIV:
        *dx = dy / y;
        *dyy = -dy * x / (y * y);
        break;
    }
}

/* Flat loops over [0, n) for the threaded callers' blocks of ATTN_FLAT_BLOCK elements: apply()
 * and partials() inlined with the kind a constant (the switch folds away and each loop
 * vectorises). */

static inline __attribute__((always_inline)) void apply_loop(binary_kind kind, float *out, const float *x,
                                                             const float *z, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = apply(kind, x[i], z[i]);
}

static void apply_flat(binary_kind kind, float *out, const float *x, const float *z, int64_t n)
{
#define KIND(k)                                                                                                        \
    case k:                                                                                                            \
        apply_loop(k, out, x, z, n);                                                                                   \
        break;
    switch (kind) {
        BIN_KINDS(KIND)
    }
#undef KIND
}

/* ga += partial in a, gb += partial in b (either may be NULL) */
static inline __attribute__((always_inline)) void partials_loop(binary_kind kind, float *ga, float *gb, const float *a,
                                                                const float *b, const float *dy, int64_t n)
{
    float dx, dyy;
    if (ga)
        for (int64_t i = 0; i < n; i++) {
            partials(kind, a[i], b[i], dy[i], &dx, &dyy);
            ga[i] += dx;
        }
    if (gb)
        for (int64_t i = 0; i < n; i++) {
            partials(kind, a[i], b[i], dy[i], &dx, &dyy);
            gb[i] += dyy;
        }
}

static void partials_flat(binary_kind kind, float *ga, float *gb, const float *a, const float *b, const float *dy,
                          int64_t n)
{
#define KIND(k)                                                                                                        \
    case k:                                                                                                            \
        partials_loop(k, ga, gb, a, b, dy, n);                                                                         \
        break;
    switch (kind) {
        BIN_KINDS(KIND)
    }
#undef KIND
}

/* Where the gradient is dy itself (add, and a of sub) and the operand is the output's trailing
 * block (x (..., L, E) against (1, L, E), or the whole output): g += dy summed over the leading
 * rows, as the general loop below sums it, in the same order. false: not that case. */
static bool trailing_block_grad(float *g, const int64_t *sx, const int64_t os[4], const broadcast *p, const float *dy,
                                int threads)
{
    int d0 = 4; /* the operand holds dims [d0, 4) whole and is 1 before */
    while (d0 > 0 && (p->shape[d0 - 1] == 1 || sx[d0 - 1] == os[d0 - 1])) d0--;
    for (int d = 0; d < d0; d++)
        if (sx[d] != 0 && p->shape[d] != 1) return false;
    const int64_t total = p->shape[0] * p->shape[1] * p->shape[2] * p->shape[3];
    const int64_t block = d0 == 0 ? total : os[d0 - 1], rows = block ? total / block : 0; /* (rows, block) */
    attn__col_sums_add(g, dy, rows, block, threads);
    return true;
}

/* g (operand a when which = 0, b when 1) += the operand's partial times dy, summed over the
 * dims the operand is broadcast along. One task per element of the operand; its outputs are
 * visited in the order of the output's own loop. */
static void broadcast_grad(float *g, int which, const binary_saved *s, const float *a, const float *b, const float *dy,
                           int threads)
{
    const broadcast *p = &s->plan;
    const int64_t *sx = which ? p->sb : p->sa;
    int64_t os[4], kept[4], reduced[4], n_kept = 1;
    out_strides(p, os);
    const bool identity = s->kind == BIN_ADD || (s->kind == BIN_SUB && which == 0); /* d/dx = dy */
    if (identity && trailing_block_grad(g, sx, os, p, dy, threads)) return;
    for (int d = 0; d < 4; d++) { /* each dim is the operand's own (kept) or summed over */
        bool summed = p->shape[d] > 1 && sx[d] == 0;
        kept[d] = summed ? 1 : p->shape[d];
        reduced[d] = summed ? p->shape[d] : 1;
        n_kept *= kept[d];
    }
#pragma omp parallel for schedule(static) num_threads(                                                                 \
    threads) if (n_kept > 1 && n_kept * reduced[0] * reduced[1] * reduced[2] * reduced[3] > ATTN_PARALLEL_MIN)
    for (int64_t e = 0; e < n_kept; e++) {
        int64_t k[4], i[4], rest = e;
        for (int d = 3; d >= 0; d--) k[d] = rest % kept[d], rest /= kept[d];
        const int64_t ix = offset(k, sx);
        float acc = g[ix];
        for (int64_t r0 = 0; r0 < reduced[0]; r0++)
            for (int64_t r1 = 0; r1 < reduced[1]; r1++)
                for (int64_t r2 = 0; r2 < reduced[2]; r2++)
                    for (int64_t r3 = 0; r3 < reduced[3]; r3++) {
                        i[0] = k[0] + r0, i[1] = k[1] + r1, i[2] = k[2] + r2, i[3] = k[3] + r3;
                        float dx, dyy;
                        partials(s->kind, a[offset(i, p->sa)], b[offset(i, p->sb)], dy[offset(i, os)], &dx, &dyy);
                        acc += which ? dyy : dx;
                    }
        g[ix] = acc;
    }
}

static attn_status binary_backward(attn_ctx *ctx, attn_node *node)
{
    const binary_saved *s = node->saved;
    const broadcast *p = &s->plan;
    float *ga = node->grad[0], *gb = node->grad[1];
    const float *a = node->in[0]->data, *b = node->in[1]->data, *dy = node->out->grad;
    const int64_t n = node->out->numel;
    if (p->same) {
        const int64_t blocks = (n + ATTN_FLAT_BLOCK - 1) / ATTN_FLAT_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
        for (int64_t blk = 0; blk < blocks; blk++) {
            const int64_t i0 = blk * ATTN_FLAT_BLOCK, len = n - i0 < ATTN_FLAT_BLOCK ? n - i0 : ATTN_FLAT_BLOCK;
            partials_flat(s->kind, ga ? ga + i0 : NULL, gb ? gb + i0 : NULL, a + i0, b + i0, dy + i0, len);
        }
        return ATTN_OK;
    }
    if (ga) broadcast_grad(ga, 0, s, a, b, dy, ctx->num_threads);
    if (gb) broadcast_grad(gb, 1, s, a, b, dy, ctx->num_threads);
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
        const int64_t blocks = (n + ATTN_FLAT_BLOCK - 1) / ATTN_FLAT_BLOCK;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
        for (int64_t blk = 0; blk < blocks; blk++) {
            const int64_t i0 = blk * ATTN_FLAT_BLOCK, len = n - i0 < ATTN_FLAT_BLOCK ? n - i0 : ATTN_FLAT_BLOCK;
            apply_flat(kind, out + i0, x + i0, z + i0, len);
        }
    } else { /* rows of the last dim, one task each */
        const int64_t rows = plan.shape[0] * plan.shape[1] * plan.shape[2], last = plan.shape[3];
        const float *x = a->data, *z = b->data;
        float *out = y->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (rows > 1 && y->numel > ATTN_PARALLEL_MIN)
        for (int64_t r = 0; r < rows; r++) {
            int64_t i[4] = {r / (plan.shape[1] * plan.shape[2]), r / plan.shape[2] % plan.shape[1], r % plan.shape[2],
                            0};
            const float *xr = x + offset(i, plan.sa), *zr = z + offset(i, plan.sb);
            for (int64_t c = 0; c < last; c++) out[r * last + c] = apply(kind, xr[c * plan.sa[3]], zr[c * plan.sb[3]]);
        }
    }
    attn_tensor *in[2] = {a, b};
    if (attn__needs_grad(ctx, in, 2)) {
        attn_node *node = attn__record(ctx, binary_names[kind], binary_backward, y, in, 2, sizeof(binary_saved));
        if (!node) return NULL;
        *(binary_saved *)node->saved = (binary_saved){plan, kind};
    }
    return y;
}

attn_tensor *attn_add(attn_ctx *ctx, attn_tensor *a, attn_tensor *b)
{
    return binary(ctx, a, b, BIN_ADD);
}
attn_tensor *attn_sub(attn_ctx *ctx, attn_tensor *a, attn_tensor *b)
{
    return binary(ctx, a, b, BIN_SUB);
}
attn_tensor *attn_mul(attn_ctx *ctx, attn_tensor *a, attn_tensor *b)
{
    return binary(ctx, a, b, BIN_MUL);
}
attn_tensor *attn_div(attn_ctx *ctx, attn_tensor *a, attn_tensor *b)
{
    return binary(ctx, a, b, BIN_DIV);
}

/* ---- scale: y = s * x,  dx += s * dy ---- */

static attn_status scale_backward(attn_ctx *ctx, attn_node *node)
{
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const float s = *(const float *)node->saved, *dy = node->out->grad;
    const int64_t n = node->out->numel;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) gx[i] += s * dy[i];
    return ATTN_OK;
}

attn_tensor *attn_scale(attn_ctx *ctx, attn_tensor *x, float s)
{
    if (!ctx || !x) return attn__null_input(__func__);
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    const float *xd = x->data;
    float *yd = y->data;
    const int64_t n = x->numel;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) yd[i] = s * xd[i];
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
    float *gx = node->grad[0], *gb = node->grad[1];
    const float *dy = node->out->grad;
    int64_t c = node->in[1]->numel, rows = c ? node->out->numel / c : 0;
    if (gx) attn__add_into(gx, dy, node->out->numel, ctx->num_threads);
    if (gb) attn__col_sums_add(gb, dy, rows, c, ctx->num_threads);
    return ATTN_OK;
}

attn_tensor *attn_bias_add(attn_ctx *ctx, attn_tensor *x, attn_tensor *bias)
{
    if (!ctx || !x || !bias) return attn__null_input(__func__);
    if (x->ndim < 1 || bias->ndim != 1 || bias->shape[0] != x->shape[x->ndim - 1]) {
        char a[64], b[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "bias_add: x %s and bias %s: bias must be 1-D of x's last size",
                               attn_shape_str(x, a, 64), attn_shape_str(bias, b, 64));
    }
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    const int64_t c = bias->numel, rows = c ? x->numel / c : 0;
    const float *xd = x->data, *bd = bias->data;
    float *yd = y->data;
#pragma omp parallel for schedule(static) num_threads(ctx->num_threads) if (rows * c > ATTN_PARALLEL_MIN)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < c; j++) yd[r * c + j] = xd[r * c + j] + bd[j];
    attn_tensor *in[2] = {x, bias};
    if (attn__needs_grad(ctx, in, 2) && !attn__record(ctx, "bias_add", bias_add_backward, y, in, 2, 0)) return NULL;
    return y;
}
