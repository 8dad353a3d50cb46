/* Softmax and log-softmax along any dim (dy = the output's gradient, sums along dim):
 *   softmax:     y = exp(x - max) / sum exp(x - max)      dx += y * (dy - sum(dy * y))
 *   log_softmax: y = x - max - log sum exp(x - max)       dx += dy - exp(y) * sum(dy)
 * An all -inf slice gives 0 (softmax) or -inf (log_softmax) and gradient 0.
 * x is seen as (outer, n, inner) with n along dim. For inner = 1 the row kernels run on x
 * directly; otherwise the data go through a buffer transposed to (outer, inner, n). */
#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

typedef void (*rows_forward_fn)(float *y, const float *x, int64_t rows, int64_t cols, int threads);
typedef void (*rows_backward_fn)(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols, int threads);

typedef struct softmax_kind {
    const char *name;
    rows_forward_fn forward;
    rows_backward_fn backward;
} softmax_kind;

static const softmax_kind kind_softmax = {"softmax", attn__softmax_rows, attn__softmax_rows_backward};
static const softmax_kind kind_log_softmax = {"log_softmax", attn__log_softmax_rows, attn__log_softmax_rows_backward};

typedef struct softmax_saved {
    const softmax_kind *kind;
    int64_t outer, n, inner;
} softmax_saved;

/* out (outer, b, a) = in (outer, a, b) transposed in its last two dims; += when acc. */
static void swap_last2(float *out, const float *in, int64_t outer, int64_t a, int64_t b, bool acc, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (outer > 1 && outer * a * b > ATTN_PARALLEL_MIN)
    for (int64_t o = 0; o < outer; o++) {
        const float *src = in + o * a * b;
        float *dst = out + o * a * b;
        for (int64_t j = 0; j < b; j++)
            for (int64_t i = 0; i < a; i++) {
                float v = src[i * b + j];
                dst[j * a + i] = acc ? dst[j * a + i] + v : v;
            }
    }
}

static float *scratch(attn_ctx *ctx, int64_t numel)
{
    return attn__arena_alloc(&ctx->arena, (size_t)(numel ? numel : 1) * sizeof(float));
}

static attn_status softmax_backward(attn_ctx *ctx, attn_node *node)
{
    const softmax_saved *s = node->saved;
    float *gx = node->grad[0];
    if (!gx) return ATTN_OK;
    const float *y = node->out->data, *dy = node->out->grad;
    int64_t rows = s->outer * s->inner, numel = node->out->numel;
    if (s->inner == 1) {
        s->kind->backward(gx, dy, y, rows, s->n, ctx->num_threads);
        return ATTN_OK;
    }
    float *yt = scratch(ctx, numel);  /* (outer, inner, n) */
    float *dyt = scratch(ctx, numel); /* (outer, inner, n) */
    float *dxt = attn__arena_calloc(&ctx->arena, (size_t)(numel ? numel : 1) * sizeof(float), ctx->num_threads);
    if (!yt || !dyt || !dxt) return attn_last_status();
    const int threads = ctx->num_threads;
    swap_last2(yt, y, s->outer, s->n, s->inner, false, threads);
    swap_last2(dyt, dy, s->outer, s->n, s->inner, false, threads);
    s->kind->backward(dxt, dyt, yt, rows, s->n, threads);
    swap_last2(gx, dxt, s->outer, s->inner, s->n, true, threads);
    return ATTN_OK;
}

static attn_tensor *softmax_op(attn_ctx *ctx, attn_tensor *x, int dim, const softmax_kind *kind)
{
    if (!ctx || !x) return attn__null_input(kind->name);
    int d = attn__dim(dim, x->ndim, kind->name);
    if (d < 0) return NULL;
    int64_t outer = attn__prod(x->shape, 0, d), n = x->shape[d];
    int64_t inner = attn__prod(x->shape, d + 1, x->ndim);
    attn_tensor *y = attn__empty_like(ctx, x);
    if (!y) return NULL;
    if (inner == 1) {
        kind->forward(y->data, x->data, outer, n, ctx->num_threads);
    } else {
        float *xt = scratch(ctx, x->numel); /* (outer, inner, n) */
        float *yt = scratch(ctx, x->numel); /* (outer, inner, n) */
        if (!xt || !yt) return NULL;
        swap_last2(xt, x->data, outer, n, inner, false, ctx->num_threads);
        kind->forward(yt, xt, outer * inner, n, ctx->num_threads);
        swap_last2(y->data, yt, outer, inner, n, false, ctx->num_threads);
    }
    if (attn__needs_grad(ctx, &x, 1)) {
        attn_node *node = attn__record(ctx, kind->name, softmax_backward, y, &x, 1, sizeof(softmax_saved));
        if (!node) return NULL;
        *(softmax_saved *)node->saved = (softmax_saved){kind, outer, n, inner};
    }
    return y;
}

attn_tensor *attn_softmax(attn_ctx *ctx, attn_tensor *x, int dim)
{
    return softmax_op(ctx, x, dim, &kind_softmax);
}

attn_tensor *attn_log_softmax(attn_ctx *ctx, attn_tensor *x, int dim)
{
    return softmax_op(ctx, x, dim, &kind_log_softmax);
}
