/* Reference scaled dot-product attention: materialises the (Lq, Lk) weights of each (b, h) with
 * GEMMs and plain row loops. It is the need_weights path and the twin the fused kernel is
 * tested against. Math in attention_internal.h. */
#include "dispatch_internal.h"     /* built once per level (attn_cpu_isa) */
#include "../core/core_internal.h" /* attn__thread_num */
#include "attention_internal.h"
#include "kernels_internal.h"
#include "vmath_internal.h"

#include <math.h>
#include <string.h>

/* Softmax of one row of masked scores in place; stats (2) = max and 1 / sum exp(s - max)
 * (+inf and 0 for a fully masked row). */
static void softmax_row(float *stats, float *s, int64_t n)
{
    float m = attn__row_max(s, n);
    if (m == -INFINITY) {
        memset(s, 0, (size_t)n * sizeof(float));
        stats[0] = INFINITY, stats[1] = 0.0f;
        return;
    }
    float sum = attn__exp_shift_sum_ref(s, s, m, n);
    float inv = 1.0f / sum;
    for (int64_t j = 0; j < n; j++) s[j] *= inv;
    stats[0] = m, stats[1] = inv;
}

/* The key/value head (b, sdpa_kv_head(h)) as an index into (B, Hkv) */
static int64_t kv_index(const sdpa_problem *p, int64_t b, int64_t h)
{
    return b * (p->heads_kv > 0 ? p->heads_kv : p->heads) + sdpa_kv_head(p, h);
}

/* Whether the key range and the mask callbacks keep pair (i, j) of (b, h) */
static bool kept(const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return j >= sdpa_key_begin(p, i) && j < sdpa_key_end(p, b, i) &&
           sdpa_mods_keep(p, sdpa_mask_block(p, b, h, i, j), b, h, i, j);
}

/* score_mod on each kept pair of the scaled scores s (Lq, Lk) of head (b, h); grad (Lq, Lk), when
 * not NULL, receives score_mod_grad at the same scores there and 0 at the other pairs */
static void apply_score_mod(float *s, float *grad, const sdpa_problem *p, int64_t b, int64_t h)
{
    const attn_score_mods *m = &p->mods;
    for (int64_t i = 0; i < p->lq; i++)
        for (int64_t j = 0; j < p->lk; j++) {
            float *x = s + i * p->lk + j;
            const bool keep = kept(p, b, h, i, j);
            if (grad) grad[i * p->lk + j] = keep ? m->score_mod_grad(*x, b + p->mods_batch, h, i, j, m->user) : 0.0f;
            if (keep) *x = m->score_mod(*x, b + p->mods_batch, h, i, j, m->user);
        }
}

/* -inf at the pairs of s (Lq, Lk) that the mask callbacks hide (after the cap and the masks) */
static void apply_mask_mods(float *s, const sdpa_problem *p, int64_t b, int64_t h)
{
    for (int64_t i = 0; i < p->lq; i++)
        for (int64_t j = 0; j < p->lk; j++)
            if (!kept(p, b, h, i, j)) s[i * p->lk + j] = -INFINITY;
}

void sdpa_forward_ref(float *out, float *stats, float *weights, const float *q, const float *k, const float *v,
                      const sdpa_problem *p)
{
    const int64_t H = p->heads, Lq = p->lq, Lk = p->lk, D = p->d, Dv = p->dv;
#pragma omp parallel for schedule(dynamic, 1) num_threads(p->threads) if (sdpa_parallel(p))
    for (int64_t bh = 0; bh < p->batch * H; bh++) {
        int64_t b = bh / H, h = bh % H, bhk = kv_index(p, b, h);
        float *w = weights + bh * Lq * Lk; /* (Lq, Lk) */
        float *o = out + bh * Lq * Dv;     /* (Lq, Dv) */
        attn__gemm(w, Lk, q + bh * Lq * D, D, k + bhk * Lk * D, D, Lq, Lk, D, false, true, p->scale, 0, 1);
        if (p->mods.score_mod) apply_score_mod(w, NULL, p, b, h);
        sdpa_softcap_tile(w, NULL, Lk, 1, p, Lq, Lk);
        sdpa_mask_tile(w, Lk, 1, p, b, h, 0, Lq, 0, Lk);
        if (p->mods.mask_mod || p->mods.mask_block) apply_mask_mods(w, p, b, h);
        for (int64_t i = 0; i < Lq; i++) softmax_row(stats + 2 * (bh * Lq + i), w + i * Lk, Lk);
        if (p->dropout_p <= 0.0f) {
            attn__gemm(o, Dv, w, Lk, v + bhk * Lk * Dv, Dv, Lq, Dv, Lk, false, false, 1, 0, 1);
            continue;
        }
        memset(o, 0, (size_t)(Lq * Dv) * sizeof(float));
        for (int64_t i = 0; i < Lq; i++)
            for (int64_t j = 0; j < Lk; j++) {
                float pij = w[i * Lk + j] * sdpa_dropout_scale(p, b, h, i, j);
                if (pij == 0.0f) continue;
                const float *vj = v + (bhk * Lk + j) * Dv;
                for (int64_t c = 0; c < Dv; c++) o[i * Dv + c] += pij * vj[c];
            }
    }
}

int64_t sdpa_ref_scratch_floats(const sdpa_problem *p, int threads)
{
    int64_t total; /* 3 (Lq, Lk) per thread, 4 with score_mod; -1 when the size overflows: the caller
                      reports it */
    if (__builtin_mul_overflow((int64_t)threads * (p->mods.score_mod ? 4 : 3), p->lq, &total) ||
        __builtin_mul_overflow(total, p->lk, &total))
        return -1;
    return total;
}

void sdpa_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                       const float *v, const float *out, const float *weights, float *scratch, const sdpa_problem *p)
{
    const int64_t H = p->heads, Lq = p->lq, Lk = p->lk, D = p->d, Dv = p->dv;
    const int64_t group = p->heads_kv > 0 ? H / p->heads_kv : 1, per_thread = sdpa_ref_scratch_floats(p, 1);
    /* one task per key/value head: the query heads that share it add into its dK and dV in turn */
#pragma omp parallel for schedule(dynamic, 1) num_threads(p->threads) if (sdpa_parallel(p))
    for (int64_t bhk = 0; bhk < p->batch * (H / group); bhk++)
        for (int64_t g = 0; g < group; g++) {
            const int tid = attn__thread_num();
            const int64_t b = bhk / (H / group), h = bhk % (H / group) * group + g, bh = b * H + h;
            const float *P = weights + bh * Lq * Lk;                       /* (Lq, Lk) softmax */
            float *pd = scratch + (int64_t)tid * per_thread;               /* (Lq, Lk) dropout(P) */
            float *ds = pd + Lq * Lk;                                      /* (Lq, Lk) dP, then dS */
            float *slope = ds + Lq * Lk;                                   /* (Lq, Lk) cap'(s) (softcap) */
            float *mod_slope = p->mods.score_mod ? slope + Lq * Lk : NULL; /* (Lq, Lk) mod'(s) (score_mod) */
            const float *doh = dout + bh * Lq * Dv, *oh = out + bh * Lq * Dv;
            const float *qh = q + bh * Lq * D, *kh = k + bhk * Lk * D, *vh = v + bhk * Lk * Dv;
            const bool drop = p->dropout_p > 0.0f;
            if (drop)
                for (int64_t i = 0; i < Lq; i++)
                    for (int64_t j = 0; j < Lk; j++) pd[i * Lk + j] = P[i * Lk + j] * sdpa_dropout_scale(p, b, h, i, j);
            if (p->softcap > 0.0f || p->mods.score_mod) { /* the scaled scores again, for the derivatives */
                attn__gemm(ds, Lk, qh, D, kh, D, Lq, Lk, D, false, true, p->scale, 0, 1);
                if (p->mods.score_mod) apply_score_mod(ds, mod_slope, p, b, h);
                sdpa_softcap_tile(ds, slope, Lk, 1, p, Lq, Lk);
            }
            /* dV += dropout(P)^T dO */
            attn__gemm(dv + bhk * Lk * Dv, Dv, drop ? pd : P, Lk, doh, Dv, Lk, Dv, Lq, true, false, 1, 1, 1);
            /* dP = dropout'(dO V^T) */
            attn__gemm(ds, Lk, doh, Dv, vh, Dv, Lq, Lk, Dv, false, true, 1, 0, 1);
            for (int64_t i = 0; i < Lq; i++) {
                double dsum = 0.0; /* D_i = rowsum(dO * O) */
                for (int64_t c = 0; c < Dv; c++) dsum += (double)doh[i * Dv + c] * oh[i * Dv + c];
                for (int64_t j = 0; j < Lk; j++) {
                    float dp = ds[i * Lk + j];
                    if (drop) dp *= sdpa_dropout_scale(p, b, h, i, j);
                    ds[i * Lk + j] = P[i * Lk + j] * (dp - (float)dsum);
                    if (p->softcap > 0.0f) ds[i * Lk + j] *= slope[i * Lk + j];
                    if (p->mods.score_mod) ds[i * Lk + j] *= mod_slope[i * Lk + j];
                }
            }
            attn__gemm(dq + bh * Lq * D, D, ds, Lk, kh, D, Lq, D, Lk, false, false, p->scale, 1, 1);
            attn__gemm(dk + bhk * Lk * D, D, ds, Lk, qh, D, Lk, D, Lq, true, false, p->scale, 1, 1);
        }
}
