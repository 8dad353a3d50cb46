/* attn_sdpa: scaled dot-product attention as a differentiable op. Validates shapes and masks
 * (copying mask arrays into the arena with broadcast strides), picks the fused or the reference
 * kernel, and records the backward. Math in src/kernels/attention_internal.h. */
#include "gemm_internal.h"
#include "../autograd/tape_internal.h"
#include "../kernels/attention_internal.h"
#include "sdpa_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

typedef struct sdpa_saved {
    sdpa_problem problem;
    bool fused;
    float *stats;   /* (B, H, Lq, 2) row max and 1 / sum of the softmax (attention_internal.h) */
    float *weights; /* (B, H, Lq, Lk) for the reference path */
} sdpa_saved;

/* Right-aligns a mask shape against the scores, as PyTorch broadcasts it: (B, H, Lq, Lk), or
 * (B, Lq, Lk) for 3-D inputs (one head: torch adds the mask to q @ k^T, which has no H dim). The
 * element strides are over (B, H, Lq, Lk) (0 where the mask has size 1 and along a missing H);
 * *count is the mask's element count. */
static attn_status broadcast_strides(int64_t stride[4], int64_t *count, int ndim, const int64_t *shape,
                                     const int64_t full[4], bool one_head, const char *what)
{
    static const int dims_4d[4] = {0, 1, 2, 3}, dims_3d[3] = {0, 2, 3}; /* into (B, H, Lq, Lk) */
    const int *dims = one_head ? dims_3d : dims_4d, rank = one_head ? 3 : 4;
    const char *names = one_head ? "(B, Lq, Lk)" : "(B, H, Lq, Lk)";
    int64_t scores[4];
    for (int i = 0; i < rank; i++) scores[i] = full[dims[i]];
    char got[64], want[64];
    attn__dims_str(want, sizeof want, rank, scores);
    if (ndim == 0)
        return attn__fail(ATTN_ERR_SHAPE,
                          "sdpa: %s_ndim and %s_shape are not set; expected a shape of 1 to %d "
                          "dims broadcastable to %s = %s",
                          what, what, rank, names, want);
    if (ndim < 0 || ndim > rank)
        return attn__fail(ATTN_ERR_SHAPE, "sdpa: %s has %d dims; expected 1 to %d, broadcastable to %s = %s%s", what,
                          ndim, rank, names, want, one_head ? " (q, k, v are 3-D)" : "");
    attn__dims_str(got, sizeof got, ndim, shape);
    for (int d = 0; d < 4; d++) stride[d] = 0;
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        int src = ndim - (rank - i);
        int64_t n = src >= 0 ? shape[src] : 1;
        if (n != 1 && n != scores[i])
            return attn__fail(ATTN_ERR_SHAPE,
                              "sdpa: %s mask has shape %s, which does not broadcast to "
                              "%s = %s",
                              what, got, names, want);
        stride[dims[i]] = n == 1 ? 0 : s;
        if (!attn__mul_ok(s, n, &s))
            return attn__fail(ATTN_ERR_NOMEM, "sdpa: %s has more elements than int64 holds", what);
    }
    *count = s;
    return ATTN_OK;
}

static void *arena_copy(attn_ctx *ctx, const void *src, size_t bytes)
{
    void *dst = attn__arena_alloc(&ctx->arena, bytes ? bytes : 1);
    if (dst && bytes) memcpy(dst, src, bytes);
    return dst;
}

/* A bool mask (attend or blocked) copied into the arena with its broadcast strides. */
static const uint8_t *copy_bool_mask(attn_ctx *ctx, int64_t stride[4], const uint8_t *src, int ndim,
                                     const int64_t *shape, const int64_t full[4], bool one_head, const char *what)
{
    int64_t n;
    if (broadcast_strides(stride, &n, ndim, shape, full, one_head, what) != ATTN_OK) return NULL;
    return arena_copy(ctx, src, (size_t)n);
}

/* Fills p->masks from the user's attn_mask (copies in the arena), after checking every shape;
 * one_head: q, k and v are 3-D. */
static attn_status prepare_masks(attn_ctx *ctx, sdpa_problem *p, const attn_mask *m, bool one_head)
{
    const int64_t full[4] = {p->batch, p->heads, p->lq, p->lk};
    sdpa_masks *out = &p->masks;
    memset(out, 0, sizeof *out);
    out->causal = m->causal;
    if (m->attend && !(out->attend = copy_bool_mask(ctx, out->attend_stride, m->attend, m->attend_ndim, m->attend_shape,
                                                    full, one_head, "attend")))
        return attn_last_status();
    if (m->blocked && !(out->blocked = copy_bool_mask(ctx, out->blocked_stride, m->blocked, m->blocked_ndim,
                                                      m->blocked_shape, full, one_head, "blocked")))
        return attn_last_status();
    if (m->additive) {
        int64_t n;
        if (broadcast_strides(out->additive_stride, &n, m->additive_ndim, m->additive_shape, full, one_head,
                              "additive") != ATTN_OK)
            return attn_last_status();
        float *copy = arena_copy(ctx, m->additive, (size_t)n * sizeof(float));
        if (!copy) return attn_last_status();
        for (int64_t i = 0; i < n; i++)
            if (isnan(copy[i]) || copy[i] == INFINITY)
                return attn__fail(ATTN_ERR_NUMERIC,
                                  "sdpa: additive mask element %lld is %g; expected a finite "
                                  "value or -inf",
                                  (long long)i, copy[i]);
        out->additive = copy;
    }
    if (attn__lens_check(&m->valid_lens, p->batch, p->lq, "sdpa") != ATTN_OK ||
        attn__key_padding_check(m, p->batch, p->lk, "sdpa") != ATTN_OK)
        return attn_last_status();
    if (m->valid_lens.data) {
        const int64_t n = m->valid_lens.ndim == 1 ? p->batch : p->batch * p->lq;
        if (!(out->valid_lens = arena_copy(ctx, m->valid_lens.data, (size_t)n * sizeof(int64_t))))
            return attn_last_status();
        out->valid_lens_per_query = m->valid_lens.ndim == 2;
    }
    if (m->key_padding && !(out->key_padding = arena_copy(ctx, m->key_padding, (size_t)(p->batch * p->lk))))
        return attn_last_status();
    return ATTN_OK;
}

/* gqa: k and v may have fewer heads than q, dividing them (enable_gqa) */
static attn_status check_shapes(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, bool gqa)
{
    int nd = q->ndim;
    bool ok = (nd == 3 || nd == 4) && k->ndim == nd && v->ndim == nd;
    for (int i = 0; ok && i < nd - 2; i++) {
        const bool heads = nd == 4 && i == 1;
        ok = k->shape[i] == v->shape[i] &&
             (q->shape[i] == k->shape[i] || (gqa && heads && k->shape[i] > 0 && q->shape[i] % k->shape[i] == 0));
    }
    ok = ok && q->shape[nd - 1] == k->shape[nd - 1] && k->shape[nd - 2] == v->shape[nd - 2];
    const char *h = gqa ? "H_kv" : "H";
    return ok ? ATTN_OK
              : attn__fail_inputs("sdpa", (const char *const[]){"q", "k", "v"}, (const attn_tensor *const[]){q, k, v},
                                  "q (B, H, Lq, D), k (B, %s, Lk, D), v (B, %s, Lk, Dv) (or 3-D without H)", h, h);
}

attn_status attn__sdpa_check_opts(float dropout_p, float scale, attn_sdpa_impl impl, const char *op)
{
    if (!(dropout_p >= 0.0f && dropout_p <= 1.0f))
        return attn__fail(ATTN_ERR_ARG, "%s: dropout_p = %g, expected in [0, 1]", op, dropout_p);
    if (!isfinite(scale) || scale < 0.0f)
        return attn__fail(ATTN_ERR_ARG, "%s: scale = %g, expected a finite value >= 0 (0: 1/sqrt(D))", op, scale);
    if (impl != ATTN_SDPA_AUTO && impl != ATTN_SDPA_FUSED && impl != ATTN_SDPA_REF)
        return attn__fail(ATTN_ERR_ARG, "%s: impl %d is none of ATTN_SDPA_AUTO, _FUSED, _REF", op, (int)impl);
    return ATTN_OK;
}

attn_status attn__sdpa_prepare_features(attn_ctx *ctx, sdpa_problem *p, const attn_score_features *f, bool grads,
                                        const char *op)
{
    const attn_window *w = &f->window;
    const attn_score_mods *m = &f->mods;
    if (w->on && (w->left < -1 || w->right < -1))
        return attn__fail(ATTN_ERR_ARG, "%s: window (%lld, %lld), expected bounds >= 0 or -1 (unbounded)", op,
                          (long long)w->left, (long long)w->right);
    if (f->softcap != 0.0f && !(f->softcap >= FLT_MIN && f->softcap <= FLT_MAX))
        return attn__fail(ATTN_ERR_ARG, "%s: softcap = %g, expected 0 (none) or a float32 normal value in [%g, %g]", op,
                          (double)f->softcap, (double)FLT_MIN, (double)FLT_MAX);
    if (m->score_mod_grad && !m->score_mod)
        return attn__fail(ATTN_ERR_ARG,
                          "%s: mods.score_mod_grad is set without mods.score_mod (the derivative of "
                          "no function); set both, or neither",
                          op);
    if (m->score_mod && !m->score_mod_grad && grads)
        return attn__fail(ATTN_ERR_ARG,
                          "%s: mods.score_mod without mods.score_mod_grad (d score_mod / d score), "
                          "which the backward needs: q, k or v requires a gradient. Give its derivative, or run "
                          "without gradients (attn_ctx_set_grad_enabled(ctx, false))",
                          op);
    p->windowed = w->on, p->window_left = w->left, p->window_right = w->right;
    p->softcap = f->softcap;
    p->mods = *m;
    if (!f->alibi_slopes) return ATTN_OK;
    const bool per_batch = f->alibi_ndim == 2;
    if ((f->alibi_ndim != 1 && !per_batch) || f->alibi_shape[per_batch] != p->heads ||
        (per_batch && f->alibi_shape[0] != p->batch))
        return attn__fail(ATTN_ERR_SHAPE,
                          "%s: alibi_slopes of %d dims (%lld, %lld), expected (H) = (%lld) or "
                          "(batch, H) = (%lld, %lld)",
                          op, f->alibi_ndim, (long long)f->alibi_shape[0], (long long)f->alibi_shape[1],
                          (long long)p->heads, (long long)p->batch, (long long)p->heads);
    const int64_t n = per_batch ? p->batch * p->heads : p->heads;
    float *slopes = arena_copy(ctx, f->alibi_slopes, (size_t)n * sizeof(float));
    if (!slopes) return attn_last_status();
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(slopes[i]))
            return attn__fail(ATTN_ERR_NUMERIC, "%s: alibi slope %lld is %g; expected a finite value", op, (long long)i,
                              slopes[i]);
    p->alibi = slopes, p->alibi_batch_stride = per_batch ? p->heads : 0;
    return ATTN_OK;
}

attn_status attn_alibi_slopes(float *slopes, int64_t heads)
{
    if (!slopes || heads < 1)
        return attn__fail(ATTN_ERR_ARG, "attn_alibi_slopes: slopes NULL or heads %lld < 1", (long long)heads);
    int64_t pow2 = 1;
    while (pow2 * 2 <= heads) pow2 *= 2;
    for (int64_t i = 0; i < pow2; i++) slopes[i] = (float)exp2(-8.0 * (double)(i + 1) / (double)pow2);
    /* the rest: the slopes of 2 pow2 heads, every other one, from the first */
    for (int64_t i = pow2; i < heads; i++)
        slopes[i] = (float)exp2(-8.0 * (double)(2 * (i - pow2) + 1) / (double)(2 * pow2));
    return ATTN_OK;
}

/* The kernels' scratch, n floats as the *_scratch_floats functions give it (-1: its size does not
 * fit in 64 bits), taken from the arena; NULL with the error set when it cannot be had. */
static float *scratch_alloc(attn_ctx *ctx, const char *who, const sdpa_problem *p, int64_t n)
{
    if (n < 0)
        return attn__fail_null(ATTN_ERR_NOMEM,
                               "%s: the kernel's scratch for Lq %lld, D %lld, Dv %lld on %d threads "
                               "does not fit in 64 bits",
                               who, (long long)p->lq, (long long)p->d, (long long)p->dv, p->threads);
    if ((uint64_t)n > SIZE_MAX / sizeof(float))
        return attn__fail_null(ATTN_ERR_NOMEM, "%s: scratch of %lld floats is too large", who, (long long)n);
    return attn__arena_alloc(&ctx->arena, (size_t)n * sizeof(float));
}

static attn_status sdpa_backward(attn_ctx *ctx, attn_node *node)
{
    const sdpa_saved *s = node->saved;
    const sdpa_problem *p = &s->problem;
    float *dq = node->grad[0], *dk = node->grad[1], *dv = node->grad[2];
    /* the kernels write all three; inputs without grad get a throwaway buffer */
    attn_tensor *in[3] = {node->in[0], node->in[1], node->in[2]};
    float **grads[3] = {&dq, &dk, &dv};
    for (int i = 0; i < 3; i++)
        if (!*grads[i] &&
            !(*grads[i] = attn__arena_calloc(&ctx->arena, (size_t)in[i]->numel * sizeof(float), ctx->num_threads)))
            return attn_last_status();
    int64_t n = s->fused ? sdpa_fused_scratch_floats(p, p->threads) : sdpa_ref_scratch_floats(p, p->threads);
    float *scratch = scratch_alloc(ctx, "sdpa backward", p, n);
    if (!scratch) return attn_last_status();
    const float *q = in[0]->data, *k = in[1]->data, *v = in[2]->data;
    if (s->fused)
        sdpa_backward_fused(dq, dk, dv, node->out->grad, q, k, v, node->out->data, s->stats, scratch, p);
    else
        sdpa_backward_ref(dq, dk, dv, node->out->grad, q, k, v, node->out->data, s->weights, scratch, p);
    return ATTN_OK;
}

attn_tensor *attn_sdpa(attn_ctx *ctx, attn_tensor *q, attn_tensor *k, attn_tensor *v, const attn_sdpa_opts *opts,
                       attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !q || !k || !v) return attn__null_input(__func__);
    attn_sdpa_opts defaults = {0};
    if (!opts) opts = &defaults;
    if (check_shapes(q, k, v, opts->enable_gqa) != ATTN_OK) return NULL;
    if (attn__sdpa_check_opts(opts->dropout_p, opts->scale, opts->impl, "sdpa") != ATTN_OK) return NULL;
    const int nd = q->ndim;
    sdpa_problem p = {
        .batch = q->shape[0],
        .heads = nd == 4 ? q->shape[1] : 1,
        .lq = q->shape[nd - 2],
        .lk = k->shape[nd - 2],
        .d = q->shape[nd - 1],
        .dv = v->shape[nd - 1],
        .heads_kv = nd == 4 ? k->shape[1] : 1,
    };
    /* (B, H, Lq) and (B, H, Lk) sized buffers follow: check them, since a tensor built by hand
     * with D = 0 holds no elements whatever B, H and L say */
    int64_t bhq, bhk;
    if (attn__shape_numel(3, (int64_t[]){p.batch, p.heads, p.lq}, &bhq, "sdpa (B, H, Lq)") != ATTN_OK ||
        attn__shape_numel(3, (int64_t[]){p.batch, p.heads, p.lk}, &bhk, "sdpa (B, H, Lk)") != ATTN_OK)
        return NULL;
    p.threads = ctx->num_threads;
    p.bf16 = attn__bf16_attention(ctx);
    p.sums = attn__bf16_sums();
    p.scale = opts->scale > 0.0f ? opts->scale : 1.0f / sqrtf((float)(p.d ? p.d : 1));
    p.dropout_p = attn_ctx_training(ctx) ? opts->dropout_p : 0.0f;
    if (p.dropout_p > 0.0f) { /* two draws in a fixed order: high half first */
        const uint64_t hi = attn_rng_u32(&ctx->rng);
        p.dropout_seed = hi << 32 | attn_rng_u32(&ctx->rng);
    }
    attn_tensor *in[3] = {q, k, v};
    const bool grads = attn__needs_grad(ctx, in, 3);
    if (prepare_masks(ctx, &p, &opts->mask, nd == 3) != ATTN_OK ||
        attn__sdpa_prepare_features(ctx, &p, &opts->features, grads, "sdpa") != ATTN_OK)
        return NULL;

    int64_t out_shape[4], w_shape[4], w_numel;
    memcpy(out_shape, q->shape, sizeof out_shape);
    out_shape[nd - 1] = p.dv;
    memcpy(w_shape, q->shape, sizeof w_shape);
    w_shape[nd - 1] = p.lk;
    attn_tensor *out = attn_tensor_empty(ctx, nd, out_shape);
    float *stats = attn__arena_alloc(&ctx->arena, 2 * (size_t)(bhq ? bhq : 1) * sizeof(float));
    if (!out || !stats) return NULL;
    bool fused = !weights && opts->impl != ATTN_SDPA_REF;
    attn_tensor *w = NULL;
    if (fused) {
        float *scratch = scratch_alloc(ctx, "sdpa", &p, sdpa_fused_scratch_floats(&p, p.threads));
        if (!scratch) return NULL;
        sdpa_forward_fused(out->data, stats, q->data, k->data, v->data, scratch, &p);
    } else {
        if (attn__shape_numel(nd, w_shape, &w_numel, "sdpa weights") != ATTN_OK) return NULL;
        if (!(w = attn_tensor_empty(ctx, nd, w_shape))) return NULL;
        sdpa_forward_ref(out->data, stats, w->data, q->data, k->data, v->data, &p);
    }
    if (grads) {
        attn_node *node = attn__record(ctx, "sdpa", sdpa_backward, out, in, 3, sizeof(sdpa_saved));
        if (!node) return NULL;
        *(sdpa_saved *)node->saved = (sdpa_saved){p, fused, stats, w ? w->data : NULL};
    }
    if (weights) *weights = w;
    return out;
}
