/* Cross-entropy rows with label smoothing (math in kernels_internal.h), forward and backward side by
 * side. The reference is the formula in double with libm's exp; the fast pair runs rows in
 * parallel, exp on simd_internal.h's vectors (attn__exp_shift_sum) with the row max from attn__row_max,
 * and the backward's probabilities as exp(z - m) / s: z - m is exact near the max, where the
 * probabilities are large (exp(z - lse) with lse rounded to float would carry |lse| 2^-24). */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"
#include "simd_internal.h"
#include "vmath_internal.h"

#include <math.h>

/* ---- reference ---- */

void attn__cross_entropy_rows_ref(float *max, double *sum, double *loss, const float *z, const int64_t *t, int64_t rows,
                                  int64_t classes, int64_t ignore_index, double eps)
{
    for (int64_t i = 0; i < rows; i++) {
        const float *zi = z + i * classes;
        double m = -INFINITY, s = 0.0, sum_z = 0.0;
        for (int64_t c = 0; c < classes; c++) m = zi[c] > m ? zi[c] : m;
        for (int64_t c = 0; c < classes && m > -INFINITY; c++) s += exp((double)zi[c] - m);
        max[i] = (float)m, sum[i] = s, loss[i] = 0.0;
        if (t[i] == ignore_index) continue;
        double lse = m + log(s);
        for (int64_t c = 0; c < classes; c++) sum_z += zi[c];
        loss[i] = (1.0 - eps) * (lse - zi[t[i]]) + eps / (double)classes * ((double)classes * lse - sum_z);
    }
}

void attn__cross_entropy_rows_backward_ref(float *dz, const float *z, const float *max, const double *sum,
                                           const int64_t *t, int64_t rows, int64_t classes, int64_t ignore_index,
                                           double eps, double scale)
{
    const double off = eps / (double)classes, hit = 1.0 - eps;
    for (int64_t i = 0; i < rows; i++) {
        if (t[i] == ignore_index) continue;
        for (int64_t c = 0; c < classes; c++) {
            double p = exp((double)z[i * classes + c] - max[i]) / sum[i];
            dz[i * classes + c] += (float)(scale * (p - (c == t[i] ? hit : 0.0) - off));
        }
    }
}

/* ---- fast ---- */

/* sum of x (n) in double, LANES partial sums (vectorised without reassociation) */
static double row_sum(const float *x, int64_t n)
{
    enum {
        LANES = 8
    };
    double a[LANES] = {0}, s = 0.0;
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) a[k] += x[c + k];
    for (; c < n; c++) a[0] += x[c];
    for (int k = 0; k < LANES; k++) s += a[k];
    return s;
}

void attn__cross_entropy_rows(float *max, double *sum, double *loss, const float *z, const int64_t *t, int64_t rows,
                              int64_t classes, int64_t ignore_index, double eps, int threads)
{
#pragma omp parallel for schedule(static) num_threads(threads) if (rows * classes > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *zi = z + i * classes;
        float m = attn__row_max(zi, classes); /* NaN when a logit is: the loss is NaN */
        max[i] = m;
        sum[i] = m > -INFINITY || isnan(m) ? attn__exp_shift_sum(NULL, zi, m, classes) : 0.0;
        loss[i] = 0.0;
        if (t[i] == ignore_index) continue;
        double lse = m + log(sum[i]);
        loss[i] =
            (1.0 - eps) * (lse - zi[t[i]]) + eps / (double)classes * ((double)classes * lse - row_sum(zi, classes));
    }
}

void attn__cross_entropy_rows_backward(float *dz, const float *z, const float *max, const double *sum, const int64_t *t,
                                       int64_t rows, int64_t classes, int64_t ignore_index, double eps, double scale,
                                       int threads)
{
    const double off = scale * eps / (double)classes, hit = scale * (1.0 - eps);
#pragma omp parallel for schedule(static) num_threads(threads) if (rows * classes > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < rows; i++) {
        if (t[i] == ignore_index) continue;
        const float *zi = z + i * classes;
        float *dzi = dz + i * classes;
        const float w = (float)(scale / sum[i]), target_dz = dzi[t[i]];
        const vf m = vf_set1(max[i]), wv = vf_set1(w), o = vf_set1((float)off);
        int64_t c = 0;
        for (; c + VF_LANES <= classes; c += VF_LANES) /* dz += w exp(z - m) - off */
            vf_store(dzi + c, vf_add(vf_load(dzi + c), vf_sub(vf_mul(wv, vf_exp(vf_sub(vf_load(zi + c), m))), o)));
        for (; c < classes; c++) dzi[c] += w * attn_exp_nonpos(zi[c] - max[i]) - (float)off;
        /* the target, in double as one sum: w p and hit nearly cancel when the model is right */
        dzi[t[i]] = target_dz + (float)(scale / sum[i] * attn_exp_nonpos(zi[t[i]] - max[i]) - hit - off);
    }
}
