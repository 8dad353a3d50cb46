/* attn__gemm (the GEMM library chosen at configure time, split over threads for big products)
 * against its reference twin attn__gemm_ref (double sums):
 *   - every transpose combination on odd shapes (m, n, k in 1..130), row strides wider than the
 *     rows (C's padding must stay untouched), alpha 0.37, beta 0, 1 and -0.5; K = 0 (C = beta C);
 *   - products big enough to be cut into blocks over 2 threads, by rows (m >= n) and by columns
 *     (m < n), each transposed both ways, and the same product called twice: bit-identical; and
 *     products of 1 to 4 rows past 2^16 m n k (a decoder's token), cut by columns;
 *   - calls from inside an OpenMP parallel region (the library then runs on that thread alone);
 *   - attn_gemm_backend names the library.
 * Tolerance: |fast - ref| <= 1e-5 + 1e-5 |ref| + 2e-6 (sum_p |a_ip b_pj| + |beta c_ij|): float
 * sums of k <= 700 products err by ~sqrt(k) 2^-24 of the magnitudes (~2e-7 at k = 700). */
#include "testkit.h"
#include "kernels/kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t state = 0x9e3779b97f4a7c15ULL;

static float uniform_pm1(void)
{
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

typedef struct gemm_case {
    int64_t m, n, k;
    bool trans_a, trans_b;
    float beta;
} gemm_case;

/* A (m, k) or (k, m), B (k, n) or (n, k), each with row stride 3 wider; C (m, n) with row
 * stride n + 2, starting from random values and padding 7.0. */
typedef struct gemm_data {
    float *a, *b, *c_fast, *c_ref, *c0;
    int64_t lda, ldb, ldc;
} gemm_data;

static gemm_data make_data(const gemm_case *g)
{
    gemm_data d;
    int64_t a_rows = g->trans_a ? g->k : g->m, a_cols = g->trans_a ? g->m : g->k;
    int64_t b_rows = g->trans_b ? g->n : g->k, b_cols = g->trans_b ? g->k : g->n;
    d.lda = a_cols + 3, d.ldb = b_cols + 3, d.ldc = g->n + 2;
    size_t na = (size_t)(a_rows * d.lda + 1), nb = (size_t)(b_rows * d.ldb + 1), nc = (size_t)(g->m * d.ldc);
    d.a = malloc(na * sizeof(float)), d.b = malloc(nb * sizeof(float));
    d.c_fast = malloc(nc * sizeof(float)), d.c_ref = malloc(nc * sizeof(float)), d.c0 = malloc(nc * sizeof(float));
    for (size_t i = 0; i < na; i++) d.a[i] = 1.7f * uniform_pm1();
    for (size_t i = 0; i < nb; i++) d.b[i] = 1.7f * uniform_pm1();
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < d.ldc; j++) d.c0[i * d.ldc + j] = j < g->n ? uniform_pm1() : 7.0f;
    memcpy(d.c_fast, d.c0, nc * sizeof(float));
    memcpy(d.c_ref, d.c0, nc * sizeof(float));
    return d;
}

static void free_data(gemm_data *d)
{
    free(d->a), free(d->b), free(d->c_fast), free(d->c_ref), free(d->c0);
}

/* Within the tolerance everywhere, and C's padding untouched. */
static bool gemm_close(const gemm_case *g, const gemm_data *d, const char *what)
{
    for (int64_t i = 0; i < g->m; i++) {
        for (int64_t j = 0; j < g->n; j++) {
            double mag = g->beta == 0.0f ? 0.0 : fabs((double)g->beta * d->c0[i * d->ldc + j]);
            for (int64_t p = 0; p < g->k; p++) {
                float av = g->trans_a ? d->a[p * d->lda + i] : d->a[i * d->lda + p];
                float bv = g->trans_b ? d->b[j * d->ldb + p] : d->b[p * d->ldb + j];
                mag += fabs((double)av * bv);
            }
            double got = d->c_fast[i * d->ldc + j], want = d->c_ref[i * d->ldc + j];
            if (!(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want) + 2e-6 * mag)) {
                fprintf(stderr, "%s: C[%lld][%lld] = %.9g, reference %.9g\n", what, (long long)i, (long long)j, got,
                        want);
                return false;
            }
        }
        for (int64_t j = g->n; j < d->ldc; j++)
            if (d->c_fast[i * d->ldc + j] != 7.0f) {
                fprintf(stderr, "%s: C's padding [%lld][%lld] overwritten\n", what, (long long)i, (long long)j);
                return false;
            }
    }
    return true;
}

static void describe(char *buf, size_t size, const gemm_case *g, const char *where)
{
    snprintf(buf, size, "gemm %s m %lld n %lld k %lld%s%s beta %g", where, (long long)g->m, (long long)g->n,
             (long long)g->k, g->trans_a ? " A^T" : "", g->trans_b ? " B^T" : "", (double)g->beta);
}

static bool run_case(const gemm_case *g, int threads)
{
    gemm_data d = make_data(g);
    attn__gemm(d.c_fast, d.ldc, d.a, d.lda, d.b, d.ldb, g->m, g->n, g->k, g->trans_a, g->trans_b, 0.37f, g->beta,
               threads);
    attn__gemm_ref(d.c_ref, d.ldc, d.a, d.lda, d.b, d.ldb, g->m, g->n, g->k, g->trans_a, g->trans_b, 0.37f, g->beta);
    char what[128];
    describe(what, sizeof what, g, threads > 1 ? "2 threads" : "1 thread");
    bool ok = gemm_close(g, &d, what);
    free_data(&d);
    return ok;
}

/* Odd shapes on one thread: every combination. */
static void odd_shapes(void)
{
    const int64_t sizes[] = {1, 2, 7, 17, 33, 130};
    const float betas[] = {0.0f, 1.0f, -0.5f};
    int passed = 0, total = 0;
    for (int mi = 0; mi < 6; mi++)
        for (int ni = 0; ni < 6; ni++)
            for (int ki = 0; ki < 6; ki += (mi + ni) % 2 + 1) /* about half the k values per (m, n) */
                for (int t = 0; t < 4; t++) {
                    gemm_case g = {sizes[mi], sizes[ni], sizes[ki], t & 1, t & 2, betas[(mi + ni + ki + t) % 3]};
                    passed += run_case(&g, 1);
                    total++;
                }
    TK_CHECK(passed == total, "odd shapes: %d of %d products within tolerance", passed, total);
}

/* K = 0: C = beta C exactly (beta = 0 ignores whatever C held, NaN included). */
static void empty_k(void)
{
    float c[6] = {1.0f, -2.0f, NAN, 4.0f, 5.0f, 6.0f}, a = 0.0f, b = 0.0f;
    attn__gemm(c, 3, &a, 1, &b, 3, 2, 3, 0, false, false, 1.0f, 0.0f, 1);
    bool zero = true;
    for (int i = 0; i < 6; i++) zero = zero && c[i] == 0.0f;
    TK_CHECK(zero, "k = 0, beta 0: C is not all zeros");
    float d[2] = {3.0f, -4.0f};
    attn__gemm(d, 2, &a, 1, &b, 2, 1, 2, 0, true, true, 1.0f, 0.5f, 1);
    TK_CHECK(d[0] == 1.5f && d[1] == -2.0f, "k = 0, beta 0.5: C = (%g, %g), expected (1.5, -2)", (double)d[0],
             (double)d[1]);
}

/* Products of at least 2^21 m n k (2^16 for at most 4 rows), split over 2 threads by rows and by
 * columns; the same product twice gives the same bits. */
static void split_products(void)
{
    const gemm_case cases[] = {
        {301, 170, 45, false, false, 0.0f}, {301, 170, 45, true, true, 1.0f},  {40, 700, 81, false, true, 0.0f},
        {40, 700, 81, true, false, -0.5f},  {64, 64, 700, true, false, 1.0f},  {1, 384, 384, false, true, 0.0f},
        {4, 1000, 70, false, true, 1.0f},   {3, 129, 700, true, false, -0.5f},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gemm_case *g = &cases[i];
        char what[128];
        describe(what, sizeof what, g, "2 threads");
        TK_CHECK(run_case(g, 2), "%s: differs from the reference", what);
        gemm_data d = make_data(g);
        float *again = malloc((size_t)(g->m * d.ldc) * sizeof(float));
        memcpy(again, d.c0, (size_t)(g->m * d.ldc) * sizeof(float));
        attn__gemm(d.c_fast, d.ldc, d.a, d.lda, d.b, d.ldb, g->m, g->n, g->k, g->trans_a, g->trans_b, 0.37f, g->beta,
                   2);
        attn__gemm(again, d.ldc, d.a, d.lda, d.b, d.ldb, g->m, g->n, g->k, g->trans_a, g->trans_b, 0.37f, g->beta, 2);
        TK_CHECK(!memcmp(again, d.c_fast, (size_t)(g->m * d.ldc) * sizeof(float)), "%s: two calls differ", what);
        free(again);
        free_data(&d);
    }
}

/* Two threads each multiply their own matrices from inside one parallel region. */
static void inside_parallel_region(void)
{
    const gemm_case g = {150, 90, 160, false, true, 1.0f};
    int ok[2] = {0, 0};
    gemm_data d[2] = {make_data(&g), make_data(&g)};
#pragma omp parallel for num_threads(2) schedule(static)
    for (int t = 0; t < 2; t++) {
        attn__gemm(d[t].c_fast, d[t].ldc, d[t].a, d[t].lda, d[t].b, d[t].ldb, g.m, g.n, g.k, g.trans_a, g.trans_b,
                   0.37f, g.beta, 2);
        attn__gemm_ref(d[t].c_ref, d[t].ldc, d[t].a, d[t].lda, d[t].b, d[t].ldb, g.m, g.n, g.k, g.trans_a, g.trans_b,
                       0.37f, g.beta);
    }
    for (int t = 0; t < 2; t++) {
        ok[t] = gemm_close(&g, &d[t], "gemm inside a parallel region");
        free_data(&d[t]);
    }
    TK_CHECK(ok[0] && ok[1], "gemm inside a parallel region differs from the reference");
}

int main(void)
{
    const char *backend = attn_gemm_backend();
    printf("GEMM library: %s\n", backend);
    TK_CHECK(strstr(backend, "dnnl_sgemm") || strstr(backend, "cblas_sgemm"),
             "attn_gemm_backend() is \"%s\", expected oneDNN's or OpenBLAS's sgemm", backend);
    odd_shapes();
    empty_k();
    split_products();
    inside_parallel_region();
    return tk_finish("test_kernels_gemm");
}
