/* GEMM: one row-major signature over the GEMM library chosen at configure time (ATTN_GEMM:
 * oneDNN's dnnl_sgemm by default, OpenBLAS's cblas_sgemm on request; bench/compare_gemm.sh
 * measures both on the models' shapes), and the triple loop it is tested against.
 * One thread pool: the library always runs on the calling thread alone, and a large GEMM called
 * outside a parallel region is cut into row (or column) blocks over the caller's OpenMP threads
 * (the ctx's count, passed in). Two pools
 * on two cores (OpenMP workers spinning while the library's threads run) cost more than a third
 * of a training step in the scheduler; and a split fixed by the thread count keeps every sum in
 * the same order, so the same seed and thread count repeat a run bit for bit. */
#include "kernels_internal.h"

#include "attn.h" /* attn_gemm_backend is public: its declaration gives it default visibility */

#include <pthread.h>
#include <stdio.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(ATTN_GEMM_DNNL)
#include <oneapi/dnnl/dnnl.h>
#elif defined(ATTN_GEMM_OPENBLAS)
#include <cblas.h>
#else
#error "no GEMM library: configure with -DATTN_GEMM=dnnl or -DATTN_GEMM=openblas"
#endif

#define SPLIT_MIN_WORK (1 << 21) /* m n k below which one thread does the whole GEMM */
/* the same for a product of a few rows (a decoder's token): the weights' bytes, not the
 * arithmetic, cost it, and two threads read them at twice the rate of one */
#define SPLIT_MIN_WORK_FEW_ROWS (1 << 16)
#define FEW_ROWS 4

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static char backend_name[128];

/* Once per process: OpenBLAS's own pool off; the name attn_gemm_backend reports. */
static void blas_init(void)
{
#if defined(ATTN_GEMM_DNNL)
    const dnnl_version_t *v = dnnl_version();
    snprintf(backend_name, sizeof backend_name, "oneDNN %d.%d.%d dnnl_sgemm", v->major, v->minor, v->patch);
#else
    openblas_set_num_threads(1);
    snprintf(backend_name, sizeof backend_name, "OpenBLAS cblas_sgemm (%s kernels)", openblas_get_corename());
#endif
}

const char *attn_gemm_backend(void)
{
    pthread_once(&blas_once, blas_init);
    return backend_name;
}

static void sgemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m, int64_t n,
                  int64_t k, bool trans_a, bool trans_b, float alpha, float beta)
{
#if defined(ATTN_GEMM_DNNL)
    /* dnnl_sgemm spreads over omp_get_max_threads() threads unless it is called inside an active
     * parallel region: outside ours, this thread's OpenMP thread count is 1 for the call. */
#ifdef _OPENMP
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    if (threads > 1) omp_set_num_threads(1);
#endif
    dnnl_status_t st =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#ifdef _OPENMP
    if (threads > 1) omp_set_num_threads(threads);
#endif
    /* with valid arguments it fails only when it cannot allocate its packing buffers, before
     * it writes C: the loop below gives the same product without memory */
    if (st != dnnl_success) attn__gemm_ref(c, ldc, a, lda, b, ldb, m, n, k, trans_a, trans_b, alpha, beta);
#else
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, (blasint)m,
                (blasint)n, (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c, (blasint)ldc);
#endif
}

void attn__gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m, int64_t n,
                int64_t k, bool trans_a, bool trans_b, float alpha, float beta, int threads)
{
    if (m == 0 || n == 0) return;
    if (k == 0) { /* sgemm skips C when K = 0 only for beta = 1; make beta = 0 exact */
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    pthread_once(&blas_once, blas_init);
#ifdef _OPENMP
    if (omp_in_parallel()) threads = 1;
#endif
    const double min_work = m <= FEW_ROWS ? SPLIT_MIN_WORK_FEW_ROWS : SPLIT_MIN_WORK;
    if (threads < 2 || (double)m * (double)n * (double)k < min_work) {
        sgemm(c, ldc, a, lda, b, ldb, m, n, k, trans_a, trans_b, alpha, beta);
        return;
    }
    /* blocks of C's rows (columns when C is wide), multiples of 16 */
    const bool by_rows = m >= n;
    const int64_t extent = by_rows ? m : n;
    const int64_t chunk = ((extent + threads - 1) / threads + 15) / 16 * 16;
    const int64_t blocks = (extent + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t t = 0; t < blocks; t++) {
        int64_t s = t * chunk, len = extent - s < chunk ? extent - s : chunk;
        if (by_rows) /* rows of op(A): rows of A, or columns of A^T */
            sgemm(c + s * ldc, ldc, trans_a ? a + s : a + s * lda, lda, b, ldb, len, n, k, trans_a, trans_b, alpha,
                  beta);
        else /* columns of op(B): columns of B, or rows of B^T */
            sgemm(c + s, ldc, a, lda, trans_b ? b + s * ldb : b + s, ldb, m, len, k, trans_a, trans_b, alpha, beta);
    }
}

void attn__gemm_ref(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m,
                    int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta)
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
