/* GEMM on cache-resident tiles, the inner loop of the fused attention kernels, and its reference
 * twin. A register block of TILE_MR rows of C by up to 4 vectors of columns stays in registers
 * over the whole K loop: each step loads one row of B (the vectors) and broadcasts TILE_MR
 * elements of A. A is read through two strides, so a transposed A costs nothing, and no operand
 * is packed or copied (the callers lay their tiles out so that B rows are contiguous). */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"
#include "simd_internal.h"

#ifdef __ARM_FEATURE_SVE
#include <arm_sve.h>
#endif

/* rows of C per register block: 6 x 4 accumulators + 4 B vectors + 1 broadcast fit in the 32
 * registers of AVX-512 and of aarch64; 6 x 2 + 2 + 1 in 16 AVX2 or SSE ones */
enum {
    TILE_MR = 6,
#ifdef __aarch64__
    TILE_NV = 4,
#else
    TILE_NV = VF_LANES == 16 ? 4 : 2,
#endif
    TILE_KC = 128 /* the most terms of k one product sums in one chain (attn__tile_gemm) */
};

#ifdef __ARM_FEATURE_SVE
/* SVE, vector-length agnostic: C[0..mr) x [0..nv vectors of svcntw() lanes, whatever the CPU's
 * length) (+)= alpha A B over k, the columns past n (from b on) left out by the predicates, each
 * element the same chain of FMAs as the fixed-width block. The accumulators are named one by one (SVE types make no arrays). */
#define SVE_ROWS(F) F(0) F(1) F(2) F(3) F(4) F(5) /* the rows of a block, TILE_MR */
static inline __attribute__((always_inline)) void block(float *c, int64_t ldc, const float *a, int64_t a_rs,
                                                        int64_t a_ks, const float *b, int64_t ldb, int mr, int nv,
                                                        int64_t n, int64_t k, float alpha, bool accumulate)
{
    const int64_t vl = (int64_t)svcntw();
    const svbool_t p0 = svwhilelt_b32_s64(0, n), p1 = svwhilelt_b32_s64(vl, n), p2 = svwhilelt_b32_s64(2 * vl, n),
                   p3 = svwhilelt_b32_s64(3 * vl, n);
#define SVE_ROW_DECLARE(r)                                                                                             \
    svfloat32_t c##r##0 = svdup_n_f32(0.0f), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
    SVE_ROWS(SVE_ROW_DECLARE)
#undef SVE_ROW_DECLARE
    for (int64_t p = 0; p < k; p++) {
        const float *bp = b + p * ldb, *ap = a + p * a_ks;
        const svfloat32_t b0 = svld1_f32(p0, bp), b1 = nv > 1 ? svld1_f32(p1, bp + vl) : b0,
                          b2 = nv > 2 ? svld1_f32(p2, bp + 2 * vl) : b0, b3 = nv > 3 ? svld1_f32(p3, bp + 3 * vl) : b0;
#define SVE_ROW_FMA(r)                                                                                                 \
    if (mr > r) {                                                                                                      \
        const svfloat32_t av = svdup_n_f32(ap[r * a_rs]);                                                              \
        c##r##0 = svmla_f32_x(p0, c##r##0, av, b0);                                                                    \
        if (nv > 1) c##r##1 = svmla_f32_x(p1, c##r##1, av, b1);                                                        \
        if (nv > 2) c##r##2 = svmla_f32_x(p2, c##r##2, av, b2);                                                        \
        if (nv > 3) c##r##3 = svmla_f32_x(p3, c##r##3, av, b3);                                                        \
    }
        SVE_ROWS(SVE_ROW_FMA)
#undef SVE_ROW_FMA
    }
    const svfloat32_t va = svdup_n_f32(alpha), zero = svdup_n_f32(0.0f);
#define SVE_STORE(r, v)                                                                                                \
    if (mr > r && nv > v) {                                                                                            \
        float *cp = c + r * ldc + v * vl;                                                                              \
        svst1_f32(p##v, cp, svmla_f32_x(p##v, accumulate ? svld1_f32(p##v, cp) : zero, va, c##r##v));                  \
    }
#define SVE_ROW_STORE(r) SVE_STORE(r, 0) SVE_STORE(r, 1) SVE_STORE(r, 2) SVE_STORE(r, 3)
    SVE_ROWS(SVE_ROW_STORE)
#undef SVE_ROW_STORE
#undef SVE_STORE
}
#undef SVE_ROWS
#else
/* C[0..mr) x [0..nv vectors) (+)= alpha A B over k, the nv vectors whole (n, the columns from b
 * on, is SVE's). mr and nv are constants after inlining. */
static inline __attribute__((always_inline)) void block(float *c, int64_t ldc, const float *a, int64_t a_rs,
                                                        int64_t a_ks, const float *b, int64_t ldb, int mr, int nv,
                                                        int64_t n, int64_t k, float alpha, bool accumulate)
{
    (void)n;
    vf acc[TILE_MR][4];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = vf_set1(0.0f);
    for (int64_t p = 0; p < k; p++) {
        const float *bp = b + p * ldb, *ap = a + p * a_ks;
        vf bv[4];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = vf_load(bp + v * VF_LANES);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            vf av = vf_set1(ap[r * a_rs]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = vf_fma(av, bv[v], acc[r][v]);
        }
    }
    const vf va = vf_set1(alpha);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *cp = c + r * ldc + v * VF_LANES;
            vf old = accumulate ? vf_load(cp) : vf_set1(0.0f);
            vf_store(cp, vf_fma(va, acc[r][v], old));
        }
}

#endif

/* All m rows of one column panel of nv vectors (n: the columns from b on). */
static inline __attribute__((always_inline)) void panel(float *c, int64_t ldc, const float *a, int64_t a_rs,
                                                        int64_t a_ks, const float *b, int64_t ldb, int64_t m, int nv,
                                                        int64_t n, int64_t k, float alpha, bool accumulate)
{
    int64_t r = 0;
    for (; r + TILE_MR <= m; r += TILE_MR)
        block(c + r * ldc, ldc, a + r * a_rs, a_rs, a_ks, b, ldb, TILE_MR, nv, n, k, alpha, accumulate);
    const float *ar = a + r * a_rs;
    float *cr = c + r * ldc;
    /* the last rows with their count a constant: block's accumulators stay in registers */
#define ROWS(rows)                                                                                                     \
    case rows:                                                                                                         \
        block(cr, ldc, ar, a_rs, a_ks, b, ldb, rows, nv, n, k, alpha, accumulate);                                     \
        break;
    switch (m - r) {
        ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
    }
#undef ROWS
}

#ifdef __ARM_FEATURE_SVE
/* The product over all of k, each element summed in one chain: panels of 4 vectors while more
 * than 3 are needed, then 2 or 1 */
static void product(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb,
                    int64_t m, int64_t n, int64_t k, float alpha, bool accumulate)
{
    const int64_t vl = (int64_t)svcntw();
    int64_t j = 0;
    for (; n - j > 3 * vl; j += 4 * vl) panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 4, n - j, k, alpha, accumulate);
    for (; n - j > vl; j += 2 * vl) panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 2, n - j, k, alpha, accumulate);
    if (j < n) panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 1, n - j, k, alpha, accumulate);
}
#else
/* The product over all of k, each element summed in one chain */
static void product(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb,
                    int64_t m, int64_t n, int64_t k, float alpha, bool accumulate)
{
    int64_t j = 0;
    for (; j + TILE_NV * VF_LANES <= n; j += TILE_NV * VF_LANES)
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, TILE_NV, n - j, k, alpha, accumulate);
    if (TILE_NV > 2 && j + 2 * VF_LANES <= n) {
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 2, n - j, k, alpha, accumulate);
        j += 2 * VF_LANES;
    }
    for (; j + VF_LANES <= n; j += VF_LANES)
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 1, n - j, k, alpha, accumulate);
    if (j < n) /* the last columns, fewer than a vector (heads of d < VF_LANES): the reference,
                * whose double sums cost little at that size */
        attn__tile_gemm_ref(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, n - j, k, alpha, accumulate);
}
#endif

/* A K of more than TILE_KC terms is summed in the fewest equal chunks, each a product of its own
 * added into C: one chain of K roundings errs by up to K u sum |terms|, n chunks by (K / n + n) u,
 * so the scores of a head of d 192 (two chunks of 96) or 256 err by about half what one chain
 * does. A K up to TILE_KC (d 64 and 128, a tile of 128 keys) stays one chain, at no cost. */
void attn__tile_gemm(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb,
                     int64_t m, int64_t n, int64_t k, float alpha, bool accumulate)
{
    const int64_t chunks = (k + TILE_KC - 1) / TILE_KC;
    if (chunks <= 1) {
        product(c, ldc, a, a_rs, a_ks, b, ldb, m, n, k, alpha, accumulate);
        return;
    }
    const int64_t chunk = (k + chunks - 1) / chunks;
    for (int64_t p0 = 0; p0 < k; p0 += chunk)
        product(c, ldc, a + p0 * a_ks, a_rs, a_ks, b + p0 * ldb, ldb, m, n, k - p0 < chunk ? k - p0 : chunk, alpha,
                accumulate || p0 > 0);
}

void attn__tile_gemm_ref(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb,
                         int64_t m, int64_t n, int64_t k, float alpha, bool accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0.0;
            for (int64_t p = 0; p < k; p++) acc += (double)a[i * a_rs + p * a_ks] * b[p * ldb + j];
            c[i * ldc + j] = alpha * (float)acc + (accumulate ? c[i * ldc + j] : 0.0f);
        }
}
