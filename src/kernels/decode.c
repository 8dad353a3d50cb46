/* One new token's arithmetic for the language model's cached decoder (models/lm_decode_step.c),
 * where every product is a matrix times a few vectors and the weights are read once per token:
 *   attn__gemv_rows:  y[v, i] = (accumulate ? y[v, i] : 0) + (w[i, :] . x[v, :] + bias[i])
 *                    for the rows i in [r0, r1) of w and the n vectors x[v]
 *   attn__attend_one: o = softmax(scale q K^T) V over the n keys and values of one head's cache
 * The weights stream once, in memory order: a row at a time, four accumulators over it (a row
 * of a few hundred floats is too short for the prefetcher to follow four rows at once, which
 * halved the bandwidth); the _ref twins sum in double. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"
#include "simd_internal.h"
#include "vmath_internal.h"

#include <math.h>

/* a . b over n floats: VF_LANES at a time, then the tail */
static float dot(const float *a, const float *b, int64_t n)
{
    vf acc = vf_set1(0.0f);
    int64_t k = 0;
    for (; k + VF_LANES <= n; k += VF_LANES) acc = vf_fma(vf_load(a + k), vf_load(b + k), acc);
    float s = vf_sum(acc);
    for (; k < n; k++) s += a[k] * b[k];
    return s;
}

/* y = (accumulate ? y : 0) + (dot_product + bias[i]) */
static void store(float *y, float dot_product, const float *bias, int64_t i, bool accumulate)
{
    const float value = dot_product + (bias ? bias[i] : 0.0f);
    *y = accumulate ? *y + value : value;
}

void attn__gemv_rows(float *y, int64_t ldy, const float *w, int64_t ldw, const float *x, int64_t ldx, const float *bias,
                     int64_t n, int64_t r0, int64_t r1, int64_t cols, bool accumulate)
{
    const int64_t unrolled_end = cols - cols % (4 * VF_LANES);
    for (int64_t i = r0; i < r1; i++) {
        const float *wi = w + i * ldw;
        for (int64_t v = 0; v < n; v++) {
            const float *xv = x + v * ldx;
            vf a0 = vf_set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
            int64_t k = 0;
            for (; k < unrolled_end; k += 4 * VF_LANES) {
                a0 = vf_fma(vf_load(wi + k), vf_load(xv + k), a0);
                a1 = vf_fma(vf_load(wi + k + VF_LANES), vf_load(xv + k + VF_LANES), a1);
                a2 = vf_fma(vf_load(wi + k + 2 * VF_LANES), vf_load(xv + k + 2 * VF_LANES), a2);
                a3 = vf_fma(vf_load(wi + k + 3 * VF_LANES), vf_load(xv + k + 3 * VF_LANES), a3);
            }
            for (; k + VF_LANES <= cols; k += VF_LANES) a0 = vf_fma(vf_load(wi + k), vf_load(xv + k), a0);
            float s = vf_sum(vf_add(vf_add(a0, a1), vf_add(a2, a3)));
            for (; k < cols; k++) s += wi[k] * xv[k];
            store(y + v * ldy + i, s, bias, i, accumulate);
        }
    }
}

void attn__gemv_rows_ref(float *y, int64_t ldy, const float *w, int64_t ldw, const float *x, int64_t ldx,
                         const float *bias, int64_t n, int64_t r0, int64_t r1, int64_t cols, bool accumulate)
{
    for (int64_t i = r0; i < r1; i++)
        for (int64_t v = 0; v < n; v++) {
            double s = 0.0;
            for (int64_t k = 0; k < cols; k++) s += (double)w[i * ldw + k] * x[v * ldx + k];
            store(y + v * ldy + i, (float)s, bias, i, accumulate);
        }
}

void attn__attend_one(float *o, float *scores, const float *q, const float *k, const float *v, int64_t ld, int64_t n,
                      int64_t dh, float scale)
{
    for (int64_t j = 0; j < n; j++) scores[j] = dot(q, k + j * ld, dh) * scale;
    const float sum = attn__exp_shift_sum(scores, scores, attn__row_max(scores, n), n);
    for (int64_t c = 0; c < dh; c++) o[c] = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        const float *vj = v + j * ld;
        const vf p = vf_set1(scores[j]);
        int64_t c = 0;
        for (; c + VF_LANES <= dh; c += VF_LANES) vf_store(o + c, vf_fma(p, vf_load(vj + c), vf_load(o + c)));
        for (; c < dh; c++) o[c] += scores[j] * vj[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < dh; c++) o[c] *= inv;
}

void attn__attend_one_ref(float *o, float *scores, const float *q, const float *k, const float *v, int64_t ld,
                          int64_t n, int64_t dh, float scale)
{
    double max = -INFINITY, sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        double s = 0.0;
        for (int64_t c = 0; c < dh; c++) s += (double)q[c] * k[j * ld + c];
        scores[j] = (float)(s * scale);
        max = scores[j] > max || isnan(scores[j]) ? scores[j] : max;
    }
    for (int64_t j = 0; j < n; j++) sum += exp((double)scores[j] - max);
    for (int64_t c = 0; c < dh; c++) {
        double acc = 0.0;
        for (int64_t j = 0; j < n; j++) acc += exp((double)scores[j] - max) * v[j * ld + c];
        o[c] = (float)(acc / sum);
    }
}
