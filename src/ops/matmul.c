/* Batched matmul with transposes: C = op(A) @ op(B) over leading batch dims.
 *   forward:  C = A' B'            (A' = op(A) (M, K), B' = op(B) (K, N))
 *   backward: dA' += dC B'^T,  dB' += A'^T dC   (summed over the batch when B is shared)
 */
#include "gemm_internal.h"

#include "../autograd/tape_internal.h"
#include "../kernels/kernels_internal.h"

#include <stdlib.h>

bool attn__bf16(const attn_ctx *ctx)
{
    return ctx->matmul_precision == ATTN_PRECISION_MEDIUM && attn_bf16_products();
}

bool attn__bf16_attention(const attn_ctx *ctx)
{
    return ctx->matmul_precision == ATTN_PRECISION_MEDIUM && attn_bf16_attention();
}

/* The ctx's buffer for a MEDIUM GEMM's bf16 operands, grown to `words`; NULL when it cannot be */
static uint32_t *bf16_buffer(attn_ctx *ctx, int64_t words)
{
    if ((uint64_t)words > SIZE_MAX / sizeof(uint32_t)) return NULL;
    if ((size_t)words > ctx->bf16_cap) {
        uint32_t *grown = realloc(ctx->bf16_words, (size_t)words * sizeof(uint32_t));
        if (!grown) return NULL;
        ctx->bf16_words = grown, ctx->bf16_cap = (size_t)words;
    }
    return ctx->bf16_words;
}

attn_status attn__check_bias(const char *op, const attn_tensor *b, const attn_tensor *w)
{
    if (!b || (b->ndim == 1 && b->shape[0] == w->shape[0])) return ATTN_OK;
    char bs[64], ws[64];
    return attn__fail(ATTN_ERR_SHAPE, "%s: bias %s does not fit weight %s (expected (%lld))", op,
                      attn_shape_str(b, bs, sizeof bs), attn_shape_str(w, ws, sizeof ws), (long long)w->shape[0]);
}

void attn__ctx_gemm(attn_ctx *ctx, float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
                    int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta)
{
    if (attn__bf16(ctx) && (double)m * (double)n * (double)k >= 4096.0) {
        /* no buffer (out of memory): float32, which MEDIUM allows */
        uint32_t *words = bf16_buffer(ctx, attn__gemm_bf16_scratch_words(m, n, k, trans_a, trans_b));
        if (words &&
            attn__gemm_bf16(c, ldc, a, lda, b, ldb, m, n, k, trans_a, trans_b, alpha, beta, words, ctx->num_threads))
            return;
    }
    attn__gemm(c, ldc, a, lda, b, ldb, m, n, k, trans_a, trans_b, alpha, beta, ctx->num_threads);
}

typedef struct matmul_saved {
    int64_t batch, m, n, k;
    bool trans_a, trans_b, b_shared;
} matmul_saved;

static attn_status matmul_backward(attn_ctx *ctx, attn_node *node)
{
    const matmul_saved *s = node->saved;
    attn_tensor *a = node->in[0], *b = node->in[1];
    const float *dc = node->out->grad;
    float *da = node->grad[0], *db = node->grad[1];
    int64_t m = s->m, n = s->n, k = s->k;
    int64_t lda = s->trans_a ? m : k, ldb = s->trans_b ? k : n;
    int64_t sa = m * k, sb = s->b_shared ? 0 : k * n, sc = m * n;
    for (int64_t i = 0; i < s->batch; i++) {
        const float *ai = a->data + i * sa, *bi = b->data + i * sb, *dci = dc + i * sc;
        if (da) {
            if (!s->trans_a) /* dA (M, K) += dC (M, N) @ B'^T */
                attn__ctx_gemm(ctx, da + i * sa, lda, dci, n, bi, ldb, m, k, n, false, !s->trans_b, 1, 1);
            else /* dA (K, M) += B' (K, N) @ dC^T */
                attn__ctx_gemm(ctx, da + i * sa, lda, bi, ldb, dci, n, k, m, n, s->trans_b, true, 1, 1);
        }
        if (db) {
            if (!s->trans_b) /* dB (K, N) += A'^T @ dC */
                attn__ctx_gemm(ctx, db + i * sb, ldb, ai, lda, dci, n, k, n, m, !s->trans_a, false, 1, 1);
            else /* dB (N, K) += dC^T @ A' */
                attn__ctx_gemm(ctx, db + i * sb, ldb, dci, n, ai, lda, n, k, m, true, s->trans_a, 1, 1);
        }
    }
    return ATTN_OK;
}

attn_tensor *attn_matmul(attn_ctx *ctx, attn_tensor *a, attn_tensor *b, bool trans_a, bool trans_b)
{
    if (!ctx || !a || !b) return attn__null_input(__func__);
    char sa_buf[64], sb_buf[64];
    if (a->ndim < 2 || b->ndim < 2)
        return attn__fail_null(ATTN_ERR_SHAPE, "matmul: A %s and B %s need at least 2 dims",
                               attn_shape_str(a, sa_buf, 64), attn_shape_str(b, sb_buf, 64));
    int64_t m = a->shape[a->ndim - (trans_a ? 1 : 2)], ka = a->shape[a->ndim - (trans_a ? 2 : 1)];
    int64_t kb = b->shape[b->ndim - (trans_b ? 1 : 2)], n = b->shape[b->ndim - (trans_b ? 2 : 1)];
    bool b_shared = b->ndim == 2 && a->ndim > 2;
    bool batch_ok = b_shared || a->ndim == b->ndim;
    for (int i = 0; batch_ok && !b_shared && i < a->ndim - 2; i++) batch_ok = a->shape[i] == b->shape[i];
    if (ka != kb || !batch_ok)
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "matmul: A %s%s and B %s%s do not fit (inner sizes %lld and %lld; "
                               "batch dims must match or B be 2-D)",
                               attn_shape_str(a, sa_buf, 64), trans_a ? "^T" : "", attn_shape_str(b, sb_buf, 64),
                               trans_b ? "^T" : "", (long long)ka, (long long)kb);
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < a->ndim - 2; i++) shape[i] = a->shape[i];
    shape[a->ndim - 2] = m;
    shape[a->ndim - 1] = n;
    attn_tensor *c = attn_tensor_empty(ctx, a->ndim, shape);
    if (!c) return NULL;
    int64_t batch = attn__prod(a->shape, 0, a->ndim - 2);
    int64_t k = ka, lda = trans_a ? m : k, ldb = trans_b ? k : n;
    if (b_shared && !trans_a) /* fold the batch into M: one big GEMM */
        attn__ctx_gemm(ctx, c->data, n, a->data, lda, b->data, ldb, batch * m, n, k, false, trans_b, 1, 0);
    else
        for (int64_t i = 0; i < batch; i++)
            attn__ctx_gemm(ctx, c->data + i * m * n, n, a->data + i * m * k, lda, b->data + (b_shared ? 0 : i * k * n),
                           ldb, m, n, k, trans_a, trans_b, 1, 0);
    attn_tensor *in[2] = {a, b};
    if (attn__needs_grad(ctx, in, 2)) {
        attn_node *node = attn__record(ctx, "matmul", matmul_backward, c, in, 2, sizeof(matmul_saved));
        if (!node) return NULL;
        *(matmul_saved *)node->saved = (matmul_saved){batch, m, n, k, trans_a, trans_b, b_shared};
    }
    return c;
}
