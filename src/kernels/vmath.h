/* Private: vectorised math over rows. exp_row uses an AVX2 polynomial when the build targets
 * AVX2 (max error about 2 ulp against expf on [-87, 88]; exp(-inf) = 0, exp(x < -87.3) = 0 or a
 * subnormal flushed to 0) and the scalar reference elsewhere. */
#ifndef ATTN_VMATH_H
#define ATTN_VMATH_H

#include <stdint.h>

/* y[i] = exp(x[i] - shift); returns the sum of y in float. x and y may alias. */
float attn_exp_shift_sum(float *y, const float *x, float shift, int64_t n);
float attn_exp_shift_sum_ref(float *y, const float *x, float shift, int64_t n);
/* max of x[0..n), -INFINITY for n = 0 */
float attn_row_max(const float *x, int64_t n);

#endif
