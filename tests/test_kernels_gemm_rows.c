/* attn_gemm_rows (Y = X W^T for a few rows, no packing) against attn_gemm_rows_ref on every
 * combination of m 1..9 (blocks of 4 rows and the remainders), n in {1, 2, 3, 63, 64, 65, 130}
 * (pairs of W rows, the odd one, the column chunks of 64 and past them) and k in {1, 7, 8, 9, 16,
 * 33, 256} (whole vectors, the tail under one); that a row of Y is the same bits whatever m is;
 * and attn_linear on 1..12 rows (the kernel up to ATTN_GEMM_ROWS_MAX rows, the BLAS beyond) against
 * the reference with its bias.
 * Tolerance: |fast - ref| <= 1e-5 + 1e-5 |ref| + 2e-6 sum_p |x_ip w_jp|: float lanes against a
 * double sum (see test_kernels_tile.c for the bound). */
#include "testkit.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float uniform_pm1(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static bool close_rows(const float *fast, const float *ref, const float *x, const float *w, int64_t m,
                       int64_t n, int64_t k, const char *what)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double mag = 0.0;
            for (int64_t p = 0; p < k; p++) mag += fabs((double)x[i * k + p] * w[j * k + p]);
            double err = fabs((double)fast[i * n + j] - ref[i * n + j]);
            if (!(err <= 1e-5 + 1e-5 * fabs(ref[i * n + j]) + 2e-6 * mag)) {
                TK_CHECK(false, "%s: y[%lld, %lld] = %.9g, reference %.9g", what, (long long)i, (long long)j,
                         fast[i * n + j], ref[i * n + j]);
                return false;
            }
        }
    return true;
}

int main(void)
{
    const int64_t ns[] = {1, 2, 3, 63, 64, 65, 130}, ks[] = {1, 7, 8, 9, 16, 33, 256};
    uint64_t state = 42;
    float *x = malloc(9 * 256 * sizeof *x), *w = malloc(130 * 256 * sizeof *w);
    float *y = malloc(9 * 130 * sizeof *y), *ref = malloc(9 * 130 * sizeof *ref), *one = malloc(130 * sizeof *one);
    for (int i = 0; i < 9 * 256; i++) x[i] = 1.7f * uniform_pm1(&state);
    for (int i = 0; i < 130 * 256; i++) w[i] = 1.7f * uniform_pm1(&state);
    int cases = 0, same_bits = 1;
    for (int64_t m = 1; m <= 9; m++)
        for (int a = 0; a < 7; a++)
            for (int b = 0; b < 7; b++) {
                const int64_t n = ns[a], k = ks[b];
                attn_gemm_rows(y, x, w, m, n, k, 2);
                attn_gemm_rows_ref(ref, x, w, m, n, k);
                char what[64];
                snprintf(what, sizeof what, "gemm_rows m %lld n %lld k %lld", (long long)m, (long long)n, (long long)k);
                cases += close_rows(y, ref, x, w, m, n, k, what);
                attn_gemm_rows(one, x + (m - 1) * k, w, 1, n, k, 1); /* the last row alone */
                same_bits = same_bits && !memcmp(one, y + (m - 1) * n, (size_t)n * sizeof *one);
            }
    TK_CHECK(cases == 9 * 7 * 7, "gemm_rows: %d of %d cases within tolerance", cases, 9 * 7 * 7);
    TK_CHECK(same_bits, "gemm_rows: a row alone differs from the same row among others");

    /* attn_linear across the threshold, with a bias */
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *wt = attn_tensor_from(ctx, 2, (int64_t[]){65, 33}, w);
    attn_tensor *bias = attn_tensor_from(ctx, 1, (int64_t[]){65}, w + 65 * 33);
    for (int64_t rows = 1; rows <= 12; rows++) {
        float *xs = malloc((size_t)(rows * 33) * sizeof *xs);
        for (int64_t i = 0; i < rows * 33; i++) xs[i] = 1.7f * uniform_pm1(&state);
        attn_tensor *xt = attn_tensor_from(ctx, 2, (int64_t[]){rows, 33}, xs);
        attn_tensor *out = attn_linear(ctx, xt, wt, bias);
        TK_NOT_NULL(out);
        float *want = malloc((size_t)(rows * 65) * sizeof *want);
        attn_gemm_rows_ref(want, xs, w, rows, 65, 33);
        for (int64_t i = 0; i < rows * 65; i++) want[i] += bias->data[i % 65];
        char what[64];
        snprintf(what, sizeof what, "attn_linear, %lld rows", (long long)rows);
        if (out) close_rows(out->data, want, xs, w, rows, 65, 33, what);
        free(xs);
        free(want);
    }
    attn_ctx_free(ctx);
    free(x);
    free(w);
    free(y);
    free(ref);
    free(one);
    return tk_finish("test_kernels_gemm_rows");
}
