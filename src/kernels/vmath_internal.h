/* Private: vectorisable math over rows, shared by the softmax and attention kernels. Rows are
 * processed in VMATH_LANES independent partial sums and maxima with fixed-count inner loops,
 * which -O2 vectorises without reassociating anything (no -ffast-math), and exp is plain
 * arithmetic (attn_exp_nonpos) so that it vectorises too. */
#ifndef ATTN_VMATH_H
#define ATTN_VMATH_H

#include <stdint.h>
#include <string.h>

#define VMATH_LANES 8

/* exp(x) for x <= 0 (Cephes expf: x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial, 2^n built
 * in the exponent bits), within 2 ulp of expf. Below the normal range it gives 0 (expf gives a
 * denormal, < 1.2e-38); -inf gives 0; NaN stays NaN. Small positive x (rounding) stay exact. */
static inline float attn_exp_nonpos(float x)
{
    const float lo = -87.33654f, magic = 12582912.0f; /* 1.5 * 2^23: rounds to an integer */
    float xc = x < lo ? lo : x;
    float t = xc * 1.44269504088896341f + magic;
    float n = t - magic;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    uint32_t tb, pow2;
    memcpy(&tb, &t, sizeof tb);
    pow2 = (tb - 0x4B400000u + 127u) << 23; /* t's low mantissa bits hold n */
    float scale;
    memcpy(&scale, &pow2, sizeof scale);
    return x < lo ? 0.0f : p * scale;
}

/* y[i] = exp(x[i] - shift) with shift >= max x; returns the sum. y may be NULL (sum only) or
 * equal to x (in place). */
float attn__exp_shift_sum(float *y, const float *x, float shift, int64_t n);
/* The same with libm's expf and a double sum: the reference twin. */
float attn__exp_shift_sum_ref(float *y, const float *x, float shift, int64_t n);
/* max of x[0..n), -INFINITY for n = 0; NaN when an element is NaN (as torch.max), so a row
 * with a NaN score softmaxes to NaN instead of passing for a fully masked row */
float attn__row_max(const float *x, int64_t n);

#endif
