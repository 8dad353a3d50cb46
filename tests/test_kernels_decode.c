/* The cached decoder's kernels (kernels/decode.c) against their double-precision twins:
 *   - attn__gemv_rows over widths around the vector and unroll lengths (1 to 200 columns), 1 to 3
 *     vectors, row slices [r0, r1) of a weight with a wider row stride, with and without a bias,
 *     writing and accumulating; rows outside the slice and columns past n untouched;
 *   - attn__attend_one over 1 to 300 keys of head widths 4 to 130, a cache row stride wider than
 *     the head, scores from -60 to 60 (one key far ahead: a softmax of one), and a NaN key giving
 *     NaN.
 * Bounds (testkit.h): a K-term dot product summed in another order, one float32 side against a
 * double reference rounded once: tk_tol_of(1, K + 2, 1, 2) with the scale sum_k |w_k x_k| (plus
 * |y| and |bias| when they are added), the error's real size whatever the cancellation. The
 * attention's output is a sum of n terms p_j v_j with weights p summing to 1, so its error is
 * counted against S = max over columns of sum_j p_j |v_j| (the scale): n + 1 roundings of the sum,
 * n of the weights' normalisation, the exp's 2 ulps, and a score's error, up to (dh + 1) u C
 * absolute for C = max_j sum_c |q_c k_jc|, moves its weight by as much relative:
 * tk_tol_of(1, 2 n + 8 + (dh + 1) max(C, 1), 1, 8). */
#include "testkit.h"
#include "kernels/kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float *randn(attn_rng *rng, int64_t n, float std)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; v && i < n; i++) v[i] = std * attn_rng_normal(rng);
    return v;
}

static void gemv_case(attn_rng *rng, int64_t rows, int64_t cols, int64_t n, bool bias, bool accumulate)
{
    const int64_t ldw = cols + 3, ldx = cols + 1, ldy = rows + 2, r0 = rows / 3, r1 = rows - rows / 4;
    float *w = randn(rng, rows * ldw, 1.0f), *x = randn(rng, n * ldx, 1.0f), *b = randn(rng, rows, 1.0f);
    float *y = randn(rng, n * ldy, 1.0f), *ref = malloc((size_t)(n * ldy) * sizeof *ref);
    memcpy(ref, y, (size_t)(n * ldy) * sizeof *ref);
    attn__gemv_rows(y, ldy, w, ldw, x, ldx, bias ? b : NULL, n, r0, r1, cols, accumulate);
    attn__gemv_rows_ref(ref, ldy, w, ldw, x, ldx, bias ? b : NULL, n, r0, r1, cols, accumulate);
    int64_t outside = 0, untouched = 0;
    for (int64_t v = 0; v < n; v++)
        for (int64_t i = 0; i < ldy; i++) {
            const int64_t at = v * ldy + i;
            if (i < r0 || i >= r1) {
                untouched += y[at] == ref[at];
                continue;
            }
            double scale = accumulate ? fabs(ref[at]) : 0.0; /* ref[at] holds the sum; add its parts */
            for (int64_t k = 0; k < cols; k++) scale += fabs((double)w[i * ldw + k] * x[v * ldx + k]);
            scale += bias ? fabs(b[i]) : 0.0;
            const tk_tol tol = tk_tol_of(1, (double)cols + 2, 1, 2);
            outside += fabs((double)y[at] - ref[at]) > tol.rtol * fabs(ref[at]) + tol.atol * scale;
        }
    TK_CHECK(outside == 0, "gemv_rows %lld x %lld, %lld vectors, bias %d, accumulate %d: %lld outside the bound",
             (long long)rows, (long long)cols, (long long)n, bias, accumulate, (long long)outside);
    TK_CHECK(untouched == n * (ldy - (r1 - r0)), "gemv_rows %lld x %lld: an element outside the slice changed",
             (long long)rows, (long long)cols);
    free(w), free(x), free(b), free(y), free(ref);
}

static void gemv(void)
{
    attn_rng rng;
    attn_rng_seed(&rng, 41);
    const int64_t widths[] = {1, 3, 15, 16, 17, 63, 64, 65, 127, 200};
    for (int wi = 0; wi < 10; wi++)
        for (int64_t n = 1; n <= 3; n++)
            for (int mode = 0; mode < 4; mode++) gemv_case(&rng, 13 + wi, widths[wi], n, mode & 1, mode & 2);
}

static void attend_case(attn_rng *rng, int64_t n, int64_t dh, float score_std, bool nan_key)
{
    const int64_t ld = dh + 5;
    float *q = randn(rng, dh, score_std / sqrtf((float)dh)), *k = randn(rng, n * ld, 1.0f),
          *v = randn(rng, n * ld, 1.0f);
    float *o = malloc((size_t)dh * sizeof *o), *ref = malloc((size_t)dh * sizeof *ref);
    float *scores = malloc((size_t)n * sizeof *scores);
    if (nan_key) k[(n / 2) * ld] = NAN;
    attn__attend_one(o, scores, q, k, v, ld, n, dh, 1.0f);
    attn__attend_one_ref(ref, scores, q, k, v, ld, n, dh, 1.0f);
    char what[96];
    snprintf(what, sizeof what, "attend_one %lld keys of width %lld%s", (long long)n, (long long)dh,
             nan_key ? ", a NaN key" : "");
    if (nan_key) {
        int nans = 0;
        for (int64_t c = 0; c < dh; c++) nans += isnan(o[c]) && isnan(ref[c]);
        TK_CHECK(nans == dh, "%s: %d of %lld outputs NaN in both", what, nans, (long long)dh);
    } else { /* the bound's terms (file comment): the weights p in double, S and C */
        double max = -INFINITY, sum = 0.0, size = 0.0, weighted = 0.0;
        for (int64_t j = 0; j < n; j++) {
            double s = 0.0, terms = 0.0;
            for (int64_t c = 0; c < dh; c++)
                s += (double)q[c] * k[j * ld + c], terms += fabs((double)q[c] * k[j * ld + c]);
            scores[j] = (float)s, max = s > max ? s : max, size = terms > size ? terms : size;
        }
        for (int64_t j = 0; j < n; j++) sum += exp(scores[j] - max);
        for (int64_t c = 0; c < dh; c++) {
            double column = 0.0;
            for (int64_t j = 0; j < n; j++) column += exp(scores[j] - max) / sum * fabs(v[j * ld + c]);
            weighted = column > weighted ? column : weighted;
        }
        tk_tol tol = tk_tol_of(1, (double)(2 * n + 8) + (double)(dh + 1) * (size > 1.0 ? size : 1.0), 1, 8);
        tol.scale = weighted;
        tk_close_scaled(what, o, ref, dh, tol);
    }
    free(q), free(k), free(v), free(o), free(ref), free(scores);
}

static void attend(void)
{
    attn_rng rng;
    attn_rng_seed(&rng, 42);
    const int64_t keys[] = {1, 2, 15, 17, 64, 300}, widths[] = {4, 8, 16, 33, 64, 130};
    for (int ki = 0; ki < 6; ki++)
        for (int wi = 0; wi < 6; wi++) {
            attend_case(&rng, keys[ki], widths[wi], 1.0f, false);
            attend_case(&rng, keys[ki], widths[wi], 60.0f, false);
        }
    attend_case(&rng, 17, 16, 1.0f, true);
}

int main(void)
{
    gemv();
    attend();
    return tk_finish("test_kernels_decode");
}
