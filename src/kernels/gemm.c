/* GEMM: OpenBLAS sgemm behind one row-major signature, and the triple loop it is tested against. */
#include "kernels.h"

#include <cblas.h>

static int blas_threads = 0;

void attn_gemm_set_threads(int n)
{
    if (n < 1) n = 1;
    if (n != blas_threads) {
        openblas_set_num_threads(n);
        blas_threads = n;
    }
}

void attn_gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
               int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
               float beta)
{
    if (m == 0 || n == 0) return;
    if (k == 0) { /* sgemm skips C when K = 0 only for beta = 1; make beta = 0 exact */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n, (blasint)k, alpha, a,
                (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
}

void attn_gemm_ref(float *c, int64_t ldc, const float *a, int64_t lda, const float *b,
                   int64_t ldb, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                   float alpha, float beta)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; p++) {
                float av = trans_a ? a[p * lda + i] : a[i * lda + p];
                float bv = trans_b ? b[j * ldb + p] : b[p * ldb + j];
                acc += (double)av * bv;
            }
            float prev = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
            c[i * ldc + j] = alpha * (float)acc + prev;
        }
}
