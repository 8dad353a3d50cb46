/* Vectorised row math (see vmath_internal.h). The exp runs on simd_internal.h's vectors (the Cephes reduction and
 * polynomial of attn_exp_nonpos, in intrinsics with AVX2 or AVX-512); the row max is written in
 * AVX2 intrinsics where there are some, elsewhere in portable loops. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "vmath_internal.h"
#include "simd_internal.h"

#include <math.h>
#include <stdbool.h>

#ifdef __AVX2__
#include <immintrin.h>
#endif

float attn__exp_shift_sum_ref(float *y, const float *x, float shift, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - shift);
        if (y) y[i] = e;
        sum += e;
    }
    return (float)sum;
}

float attn__exp_shift_sum(float *y, const float *x, float shift, int64_t n)
{
    vf vs = vf_set1(shift), acc = vf_set1(0.0f);
    int64_t i = 0;
    for (; i + VF_LANES <= n; i += VF_LANES) {
        vf e = vf_exp(vf_sub(vf_load(x + i), vs));
        if (y) vf_store(y + i, e);
        acc = vf_add(acc, e);
    }
    float lanes[VF_LANES], sum = 0.0f;
    vf_store(lanes, acc);
    for (int k = 0; k < VF_LANES; k++) sum += lanes[k];
    for (; i < n; i++) {
        float e = attn_exp_nonpos(x[i] - shift);
        if (y) y[i] = e;
        sum += e;
    }
    return sum;
}

#ifdef __AVX2__
float attn__row_max(const float *x, int64_t n)
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
float attn__row_max(const float *x, int64_t n)
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
