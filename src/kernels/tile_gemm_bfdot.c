/* bf16 tile products through Arm's BFDOT (FEAT_BF16, the neon_bf16 level), the fused attention's
 * products at MEDIUM on aarch64 (kernels_internal.h: attn__tile_gemm_bfdot). Without FEAT_EBF16,
 * BFDOT ignores FPCR and sums as the Arm ARM's BFDotAdd does:
 *   each output lane, for each pair p in order:
 *     acc = add(daz(acc), add(mul(a_even, b_even), mul(a_odd, b_odd)))
 *   where each mul and add is rounded to float32 by round to odd (an inexact result takes the
 *   neighbour whose last significand bit is 1), a result below 2^-126 in magnitude (before
 *   rounding) becomes a zero of its sign, one of 2^128 or more an infinity of its sign, an exact
 *   zero sum of opposite signs +0, and any NaN the default NaN (0x7fc00000); inputs read as
 *   bf16_internal.h reads them (denormals as zero), the accumulator likewise.
 * A product of two bf16 values is exact in float32 but for that range, so the bits depend on the
 * round-to-odd sums. Each sum errs by less than 2^-23 of itself (twice round to nearest), so K
 * terms in K / 2 pairs err by at most (K 2^-24 + 2^-23) sum |a b|: the bound attn.h states for
 * MEDIUM. The reference below computes that in portable C (float64 arithmetic, each sum's exact
 * error from Knuth's two-sum); the BFDOT kernel equals it bit for bit (test_kernels_bf16, under
 * qemu-aarch64 at the neon_bf16 level), and at the other levels attn__tile_gemm_bfdot is the
 * reference. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "bf16_internal.h"
#include "kernels_internal.h"

#ifdef __ARM_FEATURE_BF16_VECTOR_ARITHMETIC
#include <arm_neon.h>
#endif

/* ---- reference ---- */

#define DEFAULT_NAN 0x7fc00000u

/* The exact value s + e (s = s + e rounded to nearest in float64, |e| at most half s's last
 * place; s not zero) rounded to float32 as BFDOT rounds */
static float round_odd(double s, double e)
{
    const double mag = fabs(s);
    const bool inside = e != 0.0 && (e < 0.0) != (s < 0.0); /* the exact value just under |s| */
    float r;
    if (mag < 0x1p-126 || (mag == 0x1p-126 && inside))
        r = 0.0f;
    else if (mag > 0x1p128 || (mag == 0x1p128 && !inside))
        r = INFINITY;
    else if (mag > 0x1.fffffep127)
        r = 0x1.fffffep127f; /* truncated to the largest float32, whose last bit is 1 */
    else {
        float t = (float)mag; /* |s| truncated: rounded (in range), then stepped down if it went up */
        if ((double)t > mag) t = nextafterf(t, 0.0f);
        uint32_t bits = attn_f32_bits(t);
        if ((double)t == mag && inside) bits -= 1;    /* the exact value's truncation */
        if ((double)t != mag || e != 0.0) bits |= 1u; /* inexact: the odd neighbour */
        r = attn_f32_from_bits(bits);
    }
    return s < 0.0 ? -r : r;
}

/* a + b as BFDOT adds: NaN and infinities first, exact zeros, else the exact sum rounded to odd */
static float add_odd(float a, float b)
{
    if (isnan(a) || isnan(b) || (isinf(a) && isinf(b) && (a < 0) != (b < 0))) return attn_f32_from_bits(DEFAULT_NAN);
    if (isinf(a) || isinf(b)) return isinf(a) ? a : b;
    const double s = (double)a + (double)b, bb = s - a, e = (a - (s - bb)) + (b - bb); /* two-sum */
    if (s == 0.0) return a == 0.0f && b == 0.0f && signbit(a) && signbit(b) ? -0.0f : 0.0f;
    return round_odd(s, e);
}

/* a b of two bf16 values (float32, denormals read as zero) as BFDOT multiplies */
static float mul_odd(float a, float b)
{
    if (isnan(a) || isnan(b) || (isinf(a) && b == 0.0f) || (a == 0.0f && isinf(b)))
        return attn_f32_from_bits(DEFAULT_NAN);
    const double p = (double)a * (double)b; /* exact: 8 + 8 significand bits */
    if (isinf(a) || isinf(b) || p == 0.0) return (float)p;
    return round_odd(p, 0.0);
}

/* one lane of BFDOT: acc + (a.even b.even + a.odd b.odd) */
static float bfdot_lane(float acc, uint32_t a, uint32_t b)
{
    const float even = mul_odd(attn_f32_from_bf16((uint16_t)a), attn_f32_from_bf16((uint16_t)b));
    const float odd = mul_odd(attn_f32_from_bf16((uint16_t)(a >> 16)), attn_f32_from_bf16((uint16_t)(b >> 16)));
    return add_odd(attn_flush_denormal(acc), add_odd(even, odd));
}

void attn__tile_gemm_bfdot_ref(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                               int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < kp; p++) acc = bfdot_lane(acc, a[i * a_rs + p * a_ks], b[p * ldb + j]);
            c[i * ldc + j] = fmaf(alpha, acc, accumulate ? c[i * ldc + j] : 0.0f);
        }
}

#ifdef __ARM_FEATURE_BF16_VECTOR_ARITHMETIC

/* ---- BFDOT ---- */

/* rows of C per register block and column vectors (4 lanes) per block: 6 x 4 accumulators, 4 B
 * vectors and a broadcast pair in the 32 registers, as the float32 kernel on aarch64 (tile_gemm.c) */
enum {
    BFDOT_MR = 6,
    BFDOT_NV = 4
};

/* C[0..mr) x [0..nv vectors) (+)= alpha A B over kp pairs. mr and nv are constants after inlining. */
static inline __attribute__((always_inline)) void block(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs,
                                                        int64_t a_ks, const uint32_t *b, int64_t ldb, int mr, int nv,
                                                        int64_t kp, float alpha, bool accumulate)
{
    float32x4_t acc[BFDOT_MR][BFDOT_NV];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = vdupq_n_f32(0.0f);
    for (int64_t p = 0; p < kp; p++) {
        const uint32_t *bp = b + p * ldb, *ap = a + p * a_ks;
        bfloat16x8_t bv[BFDOT_NV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = vreinterpretq_bf16_u32(vld1q_u32(bp + 4 * v));
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const bfloat16x8_t av = vreinterpretq_bf16_u32(vdupq_n_u32(ap[r * a_rs]));
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = vbfdotq_f32(acc[r][v], av, bv[v]);
        }
    }
    const float32x4_t va = vdupq_n_f32(alpha);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *cp = c + r * ldc + 4 * v;
            const float32x4_t old = accumulate ? vld1q_f32(cp) : vdupq_n_f32(0.0f);
            vst1q_f32(cp, vfmaq_f32(old, va, acc[r][v]));
        }
}

/* All m rows of one column panel of nv vectors. */
static inline __attribute__((always_inline)) void panel(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs,
                                                        int64_t a_ks, const uint32_t *b, int64_t ldb, int64_t m, int nv,
                                                        int64_t kp, float alpha, bool accumulate)
{
    int64_t r = 0;
    for (; r + BFDOT_MR <= m; r += BFDOT_MR)
        block(c + r * ldc, ldc, a + r * a_rs, a_rs, a_ks, b, ldb, BFDOT_MR, nv, kp, alpha, accumulate);
    const uint32_t *ar = a + r * a_rs;
    float *cr = c + r * ldc;
    /* the last rows with their count a constant: block's accumulators stay in registers */
#define ROWS(n)                                                                                                        \
    case n:                                                                                                            \
        block(cr, ldc, ar, a_rs, a_ks, b, ldb, n, nv, kp, alpha, accumulate);                                          \
        break;
    switch (m - r) {
        ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
    }
#undef ROWS
}

void attn__tile_gemm_bfdot(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                           int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    int64_t j = 0;
    for (; j + 4 * BFDOT_NV <= n; j += 4 * BFDOT_NV)
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, BFDOT_NV, kp, alpha, accumulate);
    if (j + 8 <= n) {
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 2, kp, alpha, accumulate);
        j += 8;
    }
    for (; j + 4 <= n; j += 4) panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 1, kp, alpha, accumulate);
    if (j < n) /* the last columns, fewer than a vector: the reference (the same bits) */
        attn__tile_gemm_bfdot_ref(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, n - j, kp, alpha, accumulate);
}

#else /* no BFDOT at this level: the reference's bits */

void attn__tile_gemm_bfdot(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                           int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    attn__tile_gemm_bfdot_ref(c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate);
}

#endif
