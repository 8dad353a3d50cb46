/* Private: one SIMD vector of floats and the few operations the tile kernels need. 16 lanes
 * with AVX-512, 8 with AVX2 + FMA, 4 in AdvSIMD intrinsics on aarch64, 4 elsewhere and with
 * ATTN_PORTABLE_SIMD (the baseline level): GCC's vector extension, which the compiler lowers to
 * SSE, NEON or scalar code. The AdvSIMD branch gives the portable one's bits, NaNs included, but
 * for vf_fma, which fuses. Loads and stores are unaligned. */
#ifndef ATTN_SIMD_H
#define ATTN_SIMD_H

#include "bf16_internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__) && !defined(ATTN_PORTABLE_SIMD)
#include <immintrin.h>

enum {
    VF_LANES = 16
};
typedef __m512 vf;

static inline vf vf_load(const float *p)
{
    return _mm512_loadu_ps(p);
}
static inline void vf_store(float *p, vf x)
{
    _mm512_storeu_ps(p, x);
}
static inline vf vf_set1(float x)
{
    return _mm512_set1_ps(x);
}
static inline vf vf_add(vf a, vf b)
{
    return _mm512_add_ps(a, b);
}
static inline vf vf_sub(vf a, vf b)
{
    return _mm512_sub_ps(a, b);
}
static inline vf vf_mul(vf a, vf b)
{
    return _mm512_mul_ps(a, b);
}
static inline vf vf_div(vf a, vf b)
{
    return _mm512_div_ps(a, b);
}
static inline vf vf_fma(vf a, vf b, vf c)
{
    return _mm512_fmadd_ps(a, b, c);
} /* a b + c */
/* |a|, and |a| with b's sign */
static inline vf vf_abs(vf a)
{
    return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(INT32_MIN), _mm512_castps_si512(a)));
}
static inline vf vf_copysign(vf a, vf b)
{
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(a)),
                                               _mm512_and_si512(sign, _mm512_castps_si512(b))));
}
/* max(a, b); a NaN in b is ignored, a NaN in a kept */
static inline vf vf_max(vf a, vf b)
{
    return _mm512_max_ps(b, a);
}
/* lanes of a where a == -inf become b */
static inline vf vf_neginf_to(vf a, vf b)
{
    return _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(a, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), b);
}
/* x rounded to the nearest integer (ties to even) */
static inline vf vf_round(vf x)
{
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
/* 2^n for integer-valued n in [-126, 127], built in the exponent bits */
static inline vf vf_pow2(vf n)
{
    __m512i biased = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(biased, 23));
}
/* lanes of y where x < lo become 0 */
static inline vf vf_zero_below(vf y, vf x, vf lo)
{
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y); /* NaN x: kept */
}
/* lanes of y where x is outside [lo, hi) become -inf */
static inline vf vf_neginf_outside(vf y, vf x, vf lo, vf hi)
{
    const __mmask16 out = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ) | _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ);
    return _mm512_mask_mov_ps(y, out, _mm512_set1_ps(-INFINITY));
}
/* a where x < lim, else b (NaN x: b) */
static inline vf vf_select_lt(vf a, vf b, vf x, vf lim)
{
    return _mm512_mask_mov_ps(b, _mm512_cmp_ps_mask(x, lim, _CMP_LT_OQ), a);
}
/* whether every lane of x is below lim (a NaN lane is not) */
static inline bool vf_all_lt(vf x, vf lim)
{
    return _mm512_cmp_ps_mask(x, lim, _CMP_LT_OQ) == 0xffff;
}
/* the sum of x's lanes */
static inline float vf_sum(vf x)
{
    return _mm512_reduce_add_ps(x);
}

#elif defined(__AVX2__) && defined(__FMA__) && !defined(ATTN_PORTABLE_SIMD)
#include <immintrin.h>

enum {
    VF_LANES = 8
};
typedef __m256 vf;

static inline vf vf_load(const float *p)
{
    return _mm256_loadu_ps(p);
}
static inline void vf_store(float *p, vf x)
{
    _mm256_storeu_ps(p, x);
}
static inline vf vf_set1(float x)
{
    return _mm256_set1_ps(x);
}
static inline vf vf_add(vf a, vf b)
{
    return _mm256_add_ps(a, b);
}
static inline vf vf_sub(vf a, vf b)
{
    return _mm256_sub_ps(a, b);
}
static inline vf vf_mul(vf a, vf b)
{
    return _mm256_mul_ps(a, b);
}
static inline vf vf_div(vf a, vf b)
{
    return _mm256_div_ps(a, b);
}
static inline vf vf_fma(vf a, vf b, vf c)
{
    return _mm256_fmadd_ps(a, b, c);
}
static inline vf vf_abs(vf a)
{
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a);
}
static inline vf vf_copysign(vf a, vf b)
{
    const vf sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
}
static inline vf vf_max(vf a, vf b)
{
    return _mm256_max_ps(b, a);
}
static inline vf vf_neginf_to(vf a, vf b)
{
    return _mm256_blendv_ps(a, b, _mm256_cmp_ps(a, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
}
static inline vf vf_round(vf x)
{
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
static inline vf vf_pow2(vf n)
{
    __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
}
static inline vf vf_zero_below(vf y, vf x, vf lo)
{
    return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), y);
}
static inline vf vf_neginf_outside(vf y, vf x, vf lo, vf hi)
{
    const vf out = _mm256_or_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    return _mm256_blendv_ps(y, _mm256_set1_ps(-INFINITY), out);
}
static inline vf vf_select_lt(vf a, vf b, vf x, vf lim)
{
    return _mm256_blendv_ps(b, a, _mm256_cmp_ps(x, lim, _CMP_LT_OQ));
}
static inline bool vf_all_lt(vf x, vf lim)
{
    return _mm256_movemask_ps(_mm256_cmp_ps(x, lim, _CMP_LT_OQ)) == 0xff;
}
static inline float vf_sum(vf x)
{
    const __m128 quad = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)));
}

#elif defined(__aarch64__) && defined(__ARM_NEON) && !defined(ATTN_PORTABLE_SIMD)
#include <arm_neon.h>

enum {
    VF_LANES = 4
};
typedef float32x4_t vf;

static inline vf vf_load(const float *p)
{
    return vld1q_f32(p);
}
static inline void vf_store(float *p, vf x)
{
    vst1q_f32(p, x);
}
static inline vf vf_set1(float x)
{
    return vdupq_n_f32(x);
}
static inline vf vf_add(vf a, vf b)
{
    return vaddq_f32(a, b);
}
static inline vf vf_sub(vf a, vf b)
{
    return vsubq_f32(a, b);
}
static inline vf vf_mul(vf a, vf b)
{
    return vmulq_f32(a, b);
}
static inline vf vf_div(vf a, vf b)
{
    return vdivq_f32(a, b);
}
static inline vf vf_fma(vf a, vf b, vf c)
{
    return vfmaq_f32(c, a, b);
}
static inline vf vf_abs(vf a)
{
    return vabsq_f32(a);
}
static inline vf vf_copysign(vf a, vf b)
{
    return vbslq_f32(vdupq_n_u32(0x80000000u), b, a);
}
/* b > a ? b : a, as the x86 max (FMAX would return a NaN of b) */
static inline vf vf_max(vf a, vf b)
{
    return vbslq_f32(vcgtq_f32(b, a), b, a);
}
static inline vf vf_neginf_to(vf a, vf b)
{
    return vbslq_f32(vceqq_f32(a, vdupq_n_f32(-INFINITY)), b, a);
}
static inline vf vf_round(vf x)
{
    return vrndnq_f32(x);
}
static inline vf vf_pow2(vf n)
{
    const int32x4_t biased = vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127));
    return vreinterpretq_f32_s32(vshlq_n_s32(biased, 23));
}
static inline vf vf_zero_below(vf y, vf x, vf lo)
{
    return vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), y); /* NaN x: kept */
}
static inline vf vf_neginf_outside(vf y, vf x, vf lo, vf hi)
{
    const uint32x4_t out = vorrq_u32(vcltq_f32(x, lo), vcgeq_f32(x, hi));
    return vbslq_f32(out, vdupq_n_f32(-INFINITY), y);
}
static inline vf vf_select_lt(vf a, vf b, vf x, vf lim)
{
    return vbslq_f32(vcltq_f32(x, lim), a, b);
}
static inline bool vf_all_lt(vf x, vf lim)
{
    return vminvq_u32(vcltq_f32(x, lim)) == 0xffffffffu;
}
/* (x0 + x2) + (x1 + x3), the portable branch's order */
static inline float vf_sum(vf x)
{
    const float32x2_t pair = vadd_f32(vget_low_f32(x), vget_high_f32(x));
    return vget_lane_f32(pair, 0) + vget_lane_f32(pair, 1);
}

#else
#include <math.h>

enum {
    VF_LANES = 4
};
typedef float vf __attribute__((vector_size(16)));

static inline vf vf_load(const float *p)
{
    vf x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline void vf_store(float *p, vf x)
{
    memcpy(p, &x, sizeof x);
}
static inline vf vf_set1(float x)
{
    return (vf){x, x, x, x};
}
static inline vf vf_add(vf a, vf b)
{
    return a + b;
}
static inline vf vf_sub(vf a, vf b)
{
    return a - b;
}
static inline vf vf_mul(vf a, vf b)
{
    return a * b;
}
static inline vf vf_div(vf a, vf b)
{
    return a / b;
}
static inline vf vf_fma(vf a, vf b, vf c)
{
    return a * b + c;
}
static inline vf vf_abs(vf a)
{
    for (int i = 0; i < VF_LANES; i++) a[i] = fabsf(a[i]);
    return a;
}
static inline vf vf_copysign(vf a, vf b)
{
    for (int i = 0; i < VF_LANES; i++) a[i] = copysignf(a[i], b[i]);
    return a;
}
static inline vf vf_max(vf a, vf b)
{
    for (int i = 0; i < VF_LANES; i++) a[i] = b[i] > a[i] ? b[i] : a[i];
    return a;
}
static inline vf vf_neginf_to(vf a, vf b)
{
    for (int i = 0; i < VF_LANES; i++) a[i] = a[i] == -INFINITY ? b[i] : a[i];
    return a;
}
static inline vf vf_round(vf x)
{
    for (int i = 0; i < VF_LANES; i++) x[i] = nearbyintf(x[i]);
    return x;
}
static inline vf vf_pow2(vf n)
{
    uint32_t bits[VF_LANES];
    for (int i = 0; i < VF_LANES; i++) {
        int32_t e = isfinite(n[i]) ? (int32_t)n[i] : 0; /* NaN or inf: p is NaN anyway */
        bits[i] = (uint32_t)(e + 127) << 23;
    }
    vf y;
    memcpy(&y, bits, sizeof y);
    return y;
}
static inline vf vf_zero_below(vf y, vf x, vf lo)
{
    for (int i = 0; i < VF_LANES; i++) y[i] = x[i] < lo[i] ? 0.0f : y[i];
    return y;
}
static inline vf vf_neginf_outside(vf y, vf x, vf lo, vf hi)
{
    for (int i = 0; i < VF_LANES; i++) y[i] = x[i] < lo[i] || x[i] >= hi[i] ? -INFINITY : y[i];
    return y;
}
static inline vf vf_select_lt(vf a, vf b, vf x, vf lim)
{
    for (int i = 0; i < VF_LANES; i++) b[i] = x[i] < lim[i] ? a[i] : b[i];
    return b;
}
static inline bool vf_all_lt(vf x, vf lim)
{
    bool all = true;
    for (int i = 0; i < VF_LANES; i++) all = all && x[i] < lim[i];
    return all;
}
static inline float vf_sum(vf x)
{
    return (x[0] + x[2]) + (x[1] + x[3]);
}
#endif

/* dst[i] = (bf16(even[i]), bf16(odd[i])) for every lane: bf16_internal.h's rounding and pair words */
static inline void vf_store_bf16_pairs(uint32_t *dst, vf even, vf odd)
{
#if defined(__AVX512BF16__)
    const __m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(even));
    const __m512i hi = _mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(odd)), 16);
    _mm512_storeu_si512(dst, _mm512_or_si512(lo, hi));
#else
    float e[VF_LANES], o[VF_LANES];
    vf_store(e, even), vf_store(o, odd);
    for (int i = 0; i < VF_LANES; i++) dst[i] = attn_bf16_pair(e[i], o[i]);
#endif
}

/* attn_exp_nonpos on every lane: x = n ln2 + r, a degree-6 polynomial in r times 2^n; below
 * -87.34 (and -inf) 0, NaN stays NaN */
static inline vf vf_exp(vf x)
{
    const vf lo = vf_set1(-87.33654f);
    vf xc = vf_max(x, lo); /* NaN passes through */
    vf n = vf_round(vf_mul(xc, vf_set1(1.44269504088896341f)));
    vf r = vf_fma(n, vf_set1(-0.693359375f), xc);
    r = vf_fma(n, vf_set1(2.12194440e-4f), r);
    vf p = vf_set1(1.9875691500e-4f);
    p = vf_fma(p, r, vf_set1(1.3981999507e-3f));
    p = vf_fma(p, r, vf_set1(8.3334519073e-3f));
    p = vf_fma(p, r, vf_set1(4.1665795894e-2f));
    p = vf_fma(p, r, vf_set1(1.6666665459e-1f));
    p = vf_fma(p, r, vf_set1(5.0000001201e-1f));
    p = vf_add(vf_fma(vf_mul(p, r), r, r), vf_set1(1.0f));
    return vf_zero_below(vf_mul(p, vf_pow2(n)), x, lo);
}

#endif
