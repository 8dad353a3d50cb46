/* Fused scaled dot-product attention (FlashAttention-2 schedule on the CPU). Math in
 * attention.h. Forward: one task per (b, h, query block of SDPA_BR rows); key blocks of SDPA_BC
 * columns stream through an online softmax (running max m and sum l per row, the output
 * accumulator rescaled when m grows); key blocks that causal or valid_lens hide from every row of
 * the query block are skipped. Backward: one task per (b, h); key blocks outermost so dK_j and
 * dV_j stay in cache, P recomputed from the saved lse. Extra memory: a few tiles per thread. */
#include "attention.h"
#include "kernels.h"
#include "vmath.h"

#include "attn.h"

#include <math.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

enum { SDPA_BR = 64, SDPA_BC = 128 };

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

int64_t sdpa_fused_scratch_floats(const sdpa_problem *p, int threads)
{
    /* fwd = BR BC + BR Dv + 2 BR, bwd = 3 BR BC + Lq; -1 when the size overflows (huge Lq or
     * Dv with no elements): the caller reports it */
    int64_t fwd, bwd, total;
    if (__builtin_mul_overflow((int64_t)SDPA_BR, p->dv, &fwd) ||
        __builtin_add_overflow(fwd, (int64_t)SDPA_BR * SDPA_BC + 2 * SDPA_BR, &fwd) ||
        __builtin_add_overflow((int64_t)3 * SDPA_BR * SDPA_BC, p->lq, &bwd) ||
        __builtin_mul_overflow((int64_t)threads, fwd > bwd ? fwd : bwd, &total))
        return -1;
    return total;
}

/* Largest key end over rows [i0, i0 + rows): keys at or after it are hidden from all rows. */
static int64_t block_key_end(const sdpa_problem *p, int64_t b, int64_t i0, int64_t rows)
{
    int64_t end = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t e = sdpa_key_end(p, b, i0 + r);
        if (e > end) end = e;
    }
    return end;
}

/* Smallest key end over the rows: tiles left of it need no causal/valid_lens masking. */
static int64_t block_key_min(const sdpa_problem *p, int64_t b, int64_t i0, int64_t rows)
{
    int64_t end = p->lk;
    for (int64_t r = 0; r < rows; r++) {
        int64_t e = sdpa_key_end(p, b, i0 + r);
        if (e < end) end = e;
    }
    return end;
}

static void apply_dropout(float *s, int64_t lds, const sdpa_problem *p, int64_t b, int64_t h,
                          int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            s[r * lds + c] *= sdpa_dropout_scale(p, b, h, i0 + r, j0 + c);
}

/* One query block: rows [i0, i0+rows) of head (b, h). */
static void forward_block(float *out, float *lse, const float *q, const float *k, const float *v,
                          float *scratch, const sdpa_problem *p, int64_t b, int64_t h, int64_t i0,
                          int64_t rows)
{
    const int64_t bh = b * p->heads + h, D = p->d, Dv = p->dv, Lk = p->lk;
    float *s = scratch;                 /* (BR, BC) scores, then probabilities */
    float *acc = s + SDPA_BR * SDPA_BC; /* (BR, Dv) unnormalised output */
    float *m = acc + SDPA_BR * Dv;      /* (BR) running max */
    float *l = m + SDPA_BR;             /* (BR) running sum */
    const float *qi = q + (bh * p->lq + i0) * D;
    memset(acc, 0, (size_t)(rows * Dv) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    const int64_t key_end = block_key_end(p, b, i0, rows), key_min = block_key_min(p, b, i0, rows);
    const bool elementwise = sdpa_has_elementwise_mask(p);
    for (int64_t j0 = 0; j0 < key_end; j0 += SDPA_BC) {
        int64_t cols = Lk - j0 < SDPA_BC ? Lk - j0 : SDPA_BC;
        attn_gemm(s, SDPA_BC, qi, D, k + (bh * Lk + j0) * D, D, rows, cols, D, false, true,
                  p->scale, 0);
        if (elementwise || j0 + cols > key_min) sdpa_mask_tile(s, SDPA_BC, p, b, h, i0, rows, j0, cols);
        for (int64_t r = 0; r < rows; r++) {
            float *sr = s + r * SDPA_BC;
            float mx = attn_row_max(sr, cols);
            if (mx == -INFINITY) { /* nothing visible to this row in this block */
                memset(sr, 0, (size_t)cols * sizeof(float));
                continue;
            }
            float m_new = mx > m[r] || isnan(mx) ? mx : m[r]; /* a NaN score makes the row NaN */
            float alpha = m[r] == -INFINITY ? 0.0f : expf(m[r] - m_new);
            l[r] = l[r] * alpha + attn_exp_shift_sum(sr, sr, m_new, cols);
            m[r] = m_new;
            if (alpha != 1.0f)
                for (int64_t c = 0; c < Dv; c++) acc[r * Dv + c] *= alpha;
        }
        if (p->dropout_p > 0.0f) apply_dropout(s, SDPA_BC, p, b, h, i0, rows, j0, cols);
        attn_gemm(acc, Dv, s, SDPA_BC, v + (bh * Lk + j0) * Dv, Dv, rows, Dv, cols, false, false, 1, 1);
    }
    for (int64_t r = 0; r < rows; r++) {
        float *o = out + (bh * p->lq + i0 + r) * Dv;
        if (l[r] > 0.0f || isnan(l[r])) { /* NaN in q or k: the row is NaN, as in PyTorch */
            float inv = 1.0f / l[r];
            for (int64_t c = 0; c < Dv; c++) o[c] = acc[r * Dv + c] * inv;
            lse[bh * p->lq + i0 + r] = m[r] + logf(l[r]);
        } else { /* every key masked: output 0, and exp(s - lse) = 0 in the backward */
            memset(o, 0, (size_t)Dv * sizeof(float));
            lse[bh * p->lq + i0 + r] = INFINITY;
        }
    }
}

void sdpa_forward_fused(float *out, float *lse, const float *q, const float *k, const float *v,
                        float *scratch, const sdpa_problem *p)
{
    const int64_t blocks = (p->lq + SDPA_BR - 1) / SDPA_BR, per_head = p->batch * p->heads;
    const int64_t per_thread = sdpa_fused_scratch_floats(p, 1);
    attn_gemm_set_threads(1);
    /* Late query blocks see more keys under a causal mask: hand them out first. */
#pragma omp parallel for schedule(dynamic, 1) num_threads(attn_get_num_threads()) if (sdpa_parallel(p))
    for (int64_t t = 0; t < per_head * blocks; t++) {
        int64_t blk = blocks - 1 - t / per_head, bh = t % per_head;
        int64_t i0 = blk * SDPA_BR, rows = p->lq - i0 < SDPA_BR ? p->lq - i0 : SDPA_BR;
        forward_block(out, lse, q, k, v, scratch + thread_id() * per_thread, p, bh / p->heads,
                      bh % p->heads, i0, rows);
    }
}

/* P = exp(S - lse) for a masked score tile; rows with lse = +inf give 0. */
static void probabilities(float *s, const float *lse, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        float *sr = s + r * SDPA_BC;
        if (lse[r] == INFINITY)
            memset(sr, 0, (size_t)cols * sizeof(float));
        else
            attn_exp_shift_sum(sr, sr, lse[r], cols);
    }
}

/* Backward of head (b, h); dsum (Lq) holds rowsum(dO * O). */
static void backward_head(float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *lse, const float *dsum,
                          float *scratch, const sdpa_problem *p, int64_t b, int64_t h)
{
    const int64_t bh = b * p->heads + h, D = p->d, Dv = p->dv, Lq = p->lq, Lk = p->lk;
    float *s = scratch;                   /* (BR, BC) scores, then P */
    float *ds = s + SDPA_BR * SDPA_BC;    /* (BR, BC) dP, then dS */
    float *pd = ds + SDPA_BR * SDPA_BC;   /* (BR, BC) dropout(P) */
    const bool drop = p->dropout_p > 0.0f, elementwise = sdpa_has_elementwise_mask(p);
    for (int64_t j0 = 0; j0 < Lk; j0 += SDPA_BC) {
        int64_t cols = Lk - j0 < SDPA_BC ? Lk - j0 : SDPA_BC;
        const float *kj = k + (bh * Lk + j0) * D, *vj = v + (bh * Lk + j0) * Dv;
        float *dkj = dk + (bh * Lk + j0) * D, *dvj = dv + (bh * Lk + j0) * Dv;
        int64_t first = p->masks.causal ? (j0 / SDPA_BR) * SDPA_BR : 0;
        for (int64_t i0 = first; i0 < Lq; i0 += SDPA_BR) {
            int64_t rows = Lq - i0 < SDPA_BR ? Lq - i0 : SDPA_BR;
            if (block_key_end(p, b, i0, rows) <= j0) continue; /* hidden from every row */
            const float *qi = q + (bh * Lq + i0) * D, *doi = dout + (bh * Lq + i0) * Dv;
            attn_gemm(s, SDPA_BC, qi, D, kj, D, rows, cols, D, false, true, p->scale, 0);
            if (elementwise || j0 + cols > block_key_min(p, b, i0, rows))
                sdpa_mask_tile(s, SDPA_BC, p, b, h, i0, rows, j0, cols);
            probabilities(s, lse + bh * Lq + i0, rows, cols);
            const float *pv = s;
            if (drop) {
                for (int64_t r = 0; r < rows; r++)
                    memcpy(pd + r * SDPA_BC, s + r * SDPA_BC, (size_t)cols * sizeof(float));
                apply_dropout(pd, SDPA_BC, p, b, h, i0, rows, j0, cols);
                pv = pd;
            }
            attn_gemm(dvj, Dv, pv, SDPA_BC, doi, Dv, cols, Dv, rows, true, false, 1, 1);
            attn_gemm(ds, SDPA_BC, doi, Dv, vj, Dv, rows, cols, Dv, false, true, 1, 0);
            if (drop) apply_dropout(ds, SDPA_BC, p, b, h, i0, rows, j0, cols);
            for (int64_t r = 0; r < rows; r++) {
                float di = dsum[i0 + r];
                float *dsr = ds + r * SDPA_BC;
                const float *sr = s + r * SDPA_BC;
                for (int64_t c = 0; c < cols; c++) dsr[c] = sr[c] * (dsr[c] - di);
            }
            attn_gemm(dq + (bh * Lq + i0) * D, D, ds, SDPA_BC, kj, D, rows, D, cols, false, false,
                      p->scale, 1);
            attn_gemm(dkj, D, ds, SDPA_BC, qi, D, cols, D, rows, true, false, p->scale, 1);
        }
    }
}

void sdpa_backward_fused(float *dq, float *dk, float *dv, const float *dout, const float *q,
                         const float *k, const float *v, const float *out, const float *lse,
                         float *scratch, const sdpa_problem *p)
{
    const int64_t per_thread = sdpa_fused_scratch_floats(p, 1), Lq = p->lq, Dv = p->dv;
    attn_gemm_set_threads(1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(attn_get_num_threads()) if (sdpa_parallel(p))
    for (int64_t bh = 0; bh < p->batch * p->heads; bh++) {
        float *mine = scratch + thread_id() * per_thread;
        float *dsum = mine + 3 * SDPA_BR * SDPA_BC; /* (Lq) */
        for (int64_t i = 0; i < Lq; i++) {
            const float *o = out + (bh * Lq + i) * Dv, *g = dout + (bh * Lq + i) * Dv;
            double acc = 0.0;
            for (int64_t c = 0; c < Dv; c++) acc += (double)o[c] * g[c];
            dsum[i] = (float)acc;
        }
        backward_head(dq, dk, dv, dout, q, k, v, lse, dsum, mine, p, bh / p->heads, bh % p->heads);
    }
}
