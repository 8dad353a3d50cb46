/* Y = X W^T for a few rows of X, as in step-by-step decoding (a handful of beams through every
 * Linear layer), and its reference twin:
 *   Y (m, n) = X (m, k) @ W (n, k)^T
 * A BLAS GEMM packs W into panels at every call, which for a few rows costs several times the
 * products themselves (perf: 55% of beam-4 decoding in OpenBLAS's packing, 13% in its kernel).
 * Here each row of W is read in place, once per block of GEMM_ROWS_MR rows of X (which stay in
 * L1), and dotted with those rows along k in vectors: lane-wise partial sums, then the lanes
 * added in order. Every element is summed the same way whatever m is, so a row of Y does not
 * depend on the other rows. */
#include "kernels.h"
#include "simd.h"

enum { GEMM_ROWS_MR = 4, GEMM_ROWS_NR = 2 }; /* 8 accumulators, 2 W vectors, 1 X vector */

/* sum of the lanes of x, in lane order */
static inline float lanes_sum(vf x)
{
    float l[VF_LANES];
    vf_store(l, x);
    float s = l[0];
    for (int i = 1; i < VF_LANES; i++) s += l[i];
    return s;
}

/* Y[0..mr) x [j, j + nr) for rows of X at x (row stride k) and rows j.. of W. */
static inline __attribute__((always_inline)) void block(float *y, int64_t ldy, const float *x,
                                                        const float *w, int mr, int nr, int64_t k)
{
    vf acc[GEMM_ROWS_MR][GEMM_ROWS_NR];
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int c = 0; c < nr; c++) acc[r][c] = vf_set1(0.0f);
    const int64_t kv = k / VF_LANES * VF_LANES;
    for (int64_t p = 0; p < kv; p += VF_LANES) {
        vf wv[GEMM_ROWS_NR];
#pragma GCC unroll 2
        for (int c = 0; c < nr; c++) wv[c] = vf_load(w + c * k + p);
#pragma GCC unroll 4
        for (int r = 0; r < mr; r++) {
            vf xv = vf_load(x + r * k + p);
#pragma GCC unroll 2
            for (int c = 0; c < nr; c++) acc[r][c] = vf_fma(xv, wv[c], acc[r][c]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 2
        for (int c = 0; c < nr; c++) {
            float s = lanes_sum(acc[r][c]);
            for (int64_t p = kv; p < k; p++) s += x[r * k + p] * w[c * k + p];
            y[r * ldy + c] = s;
        }
}

/* rows [r0, r0 + mr) of Y, columns [j0, j1) */
static void row_block(float *y, const float *x, const float *w, int64_t r0, int mr, int64_t j0,
                      int64_t j1, int64_t n, int64_t k)
{
    int64_t j = j0;
    for (; j + GEMM_ROWS_NR <= j1; j += GEMM_ROWS_NR) switch (mr) {
        case 4: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 4, 2, k); break;
        case 3: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 3, 2, k); break;
        case 2: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 2, 2, k); break;
        default: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 1, 2, k); break;
        }
    if (j < j1) switch (mr) {
        case 4: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 4, 1, k); break;
        case 3: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 3, 1, k); break;
        case 2: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 2, 1, k); break;
        default: block(y + r0 * n + j, n, x + r0 * k, w + j * k, 1, 1, k); break;
        }
}

void attn_gemm_rows(float *y, const float *x, const float *w, int64_t m, int64_t n, int64_t k,
                    int threads)
{
    /* columns in chunks, over the threads when the product is worth a parallel region */
    enum { CHUNK = 64 };
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) num_threads(threads) \
    if ((double)m * (double)n * (double)k >= (double)(1 << 21))
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t j0 = c * CHUNK, j1 = j0 + CHUNK < n ? j0 + CHUNK : n;
        for (int64_t r0 = 0; r0 < m; r0 += GEMM_ROWS_MR)
            row_block(y, x, w, r0, m - r0 < GEMM_ROWS_MR ? (int)(m - r0) : GEMM_ROWS_MR, j0, j1, n, k);
    }
}

void attn_gemm_rows_ref(float *y, const float *x, const float *w, int64_t m, int64_t n, int64_t k)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; p++) acc += (double)x[i * k + p] * w[j * k + p];
            y[i * n + j] = (float)acc;
        }
}
