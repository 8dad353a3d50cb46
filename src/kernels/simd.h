/* Private: one SIMD vector of floats and the few operations the tile kernels need. 16 lanes
 * with AVX-512, 8 with AVX2 + FMA, 4 elsewhere (GCC's vector extension: SSE2, NEON, or plain
 * scalar code). Loads and stores are unaligned. */
#ifndef ATTN_SIMD_H
#define ATTN_SIMD_H

#include "vmath.h"
#include <math.h>

#if defined(__AVX512F__)
#include <immintrin.h>

enum { VF_LANES = 16 };
typedef __m512 vf;

static inline vf vf_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void vf_store(float *p, vf x) { _mm512_storeu_ps(p, x); }
static inline vf vf_set1(float x) { return _mm512_set1_ps(x); }
static inline vf vf_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); } /* a b + c */
/* max(a, b); a NaN in b is ignored, a NaN in a kept */
static inline vf vf_max(vf a, vf b) { return _mm512_max_ps(b, a); }
/* lanes of a where a == -inf become b */
static inline vf vf_neginf_to(vf a, vf b)
{
    return _mm512_mask_mov_ps(a, _mm512_cmp_ps_mask(a, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ), b);
}
/* attn_exp_nonpos on every lane (NaN stays NaN) */
static inline vf vf_exp(vf x)
{
    const vf lo = _mm512_set1_ps(-87.33654f);
    __mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ); /* x >= lo, or NaN */
    x = _mm512_max_ps(lo, x);                                 /* NaN passes through */
    vf n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    vf p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(keep, _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}

#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

enum { VF_LANES = 8 };
typedef __m256 vf;

static inline vf vf_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void vf_store(float *p, vf x) { _mm256_storeu_ps(p, x); }
static inline vf vf_set1(float x) { return _mm256_set1_ps(x); }
static inline vf vf_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vf_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vf_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vf_fma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vf_max(vf a, vf b) { return _mm256_max_ps(b, a); }
static inline vf vf_neginf_to(vf a, vf b)
{
    return _mm256_blendv_ps(a, b, _mm256_cmp_ps(a, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
}
static inline vf vf_exp(vf x)
{
    const vf lo = _mm256_set1_ps(-87.33654f);
    vf below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, x);
    vf n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    vf p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(below, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

#else
#include <math.h>

enum { VF_LANES = 4 };
typedef float vf __attribute__((vector_size(16)));

static inline vf vf_load(const float *p)
{
    vf x;
    memcpy(&x, p, sizeof x);
    return x;
}
static inline void vf_store(float *p, vf x) { memcpy(p, &x, sizeof x); }
static inline vf vf_set1(float x) { return (vf){x, x, x, x}; }
static inline vf vf_add(vf a, vf b) { return a + b; }
static inline vf vf_sub(vf a, vf b) { return a - b; }
static inline vf vf_mul(vf a, vf b) { return a * b; }
static inline vf vf_fma(vf a, vf b, vf c) { return a * b + c; }
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
static inline vf vf_exp(vf x)
{
    for (int i = 0; i < VF_LANES; i++) x[i] = attn_exp_nonpos(x[i]);
    return x;
}
#endif

#endif
