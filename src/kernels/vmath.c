/* Vectorised exp for softmax rows (see vmath.h). The AVX2 version follows the classic
 * Cephes range reduction: x = n ln2 + r with |r| <= ln2/2 (ln2 split in two for exactness),
 * exp(r) by a degree-6 polynomial, 2^n by building the exponent bits. */
#include "vmath.h"

#include <math.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

float attn_exp_shift_sum_ref(float *y, const float *x, float shift, int64_t n)
{
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        y[i] = expf(x[i] - shift);
        sum += y[i];
    }
    return sum;
}

#ifdef __AVX2__
static inline __m256 exp256(__m256 x)
{
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365478515625f);
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 c1 = _mm256_set1_ps(0.693359375f), c2 = _mm256_set1_ps(-2.12194440e-4f);
    __m256 below = _mm256_cmp_ps(x, lo, _CMP_LT_OQ); /* also true for -inf */
    x = _mm256_min_ps(x, hi);
    x = _mm256_max_ps(x, lo);
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, c1, x);
    x = _mm256_fnmadd_ps(fx, c2, x);
    __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, x, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, z, x);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    __m256 r = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(below, r);
}

float attn_exp_shift_sum(float *y, const float *x, float shift, int64_t n)
{
    __m256 vs = _mm256_set1_ps(shift), acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, acc);
    float sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; i < n; i++) {
        y[i] = expf(x[i] - shift);
        sum += y[i];
    }
    return sum;
}

float attn_row_max(const float *x, int64_t n)
{
    __m256 m = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    float best = -INFINITY;
    for (int k = 0; k < 8; k++) best = lanes[k] > best ? lanes[k] : best;
    for (; i < n; i++) best = x[i] > best ? x[i] : best;
    return best;
}
#else
float attn_exp_shift_sum(float *y, const float *x, float shift, int64_t n)
{
    return attn_exp_shift_sum_ref(y, x, shift, n);
}

float attn_row_max(const float *x, int64_t n)
{
    float best = -INFINITY;
    for (int64_t i = 0; i < n; i++) best = x[i] > best ? x[i] : best;
    return best;
}
#endif
