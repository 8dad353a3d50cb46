/* bf16 products with float32 sums on cache-resident tiles (kernels_internal.h), the fused attention's
 * products at ATTN_PRECISION_MEDIUM, and the conversions that make their operands. With
 * AVX512_BF16 (the avx512_bf16 level) VDPBF16PS does two multiply-adds per float32 lane and
 * instruction; at the other levels every function here is its reference (bf16_internal.h), which gives the
 * same bits, only slower: MEDIUM runs float32 products there, and the tests use these. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "bf16_internal.h"
#include "kernels_internal.h"

#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

/* ---- reference ---- */

void attn__bf16_pack_row_pairs_ref(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows,
                                   int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < (cols + 1) / 2; q++) {
            const float *s = src + r * ld_src + 2 * q;
            dst[r * ld + q] = attn_bf16_pair(s[0], 2 * q + 1 < cols ? s[1] : 0.0f);
        }
}

void attn__bf16_pack_col_pairs_ref(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows,
                                   int64_t cols)
{
    for (int64_t p = 0; p < (rows + 1) / 2; p++)
        for (int64_t c = 0; c < cols; c++)
            dst[p * ld + c] =
                attn_bf16_pair(src[2 * p * ld_src + c], 2 * p + 1 < rows ? src[(2 * p + 1) * ld_src + c] : 0.0f);
}

void attn__tile_gemm_bf16_ref(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                              int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < kp; p++) acc = attn_dpbf16_lane(acc, a[i * a_rs + p * a_ks], b[p * ldb + j]);
            c[i * ldc + j] = fmaf(alpha, acc, accumulate ? c[i * ldc + j] : 0.0f);
        }
}

#ifdef __AVX512BF16__

/* ---- AVX512_BF16 ---- */

/* 16 floats -> 16 bf16 (VCVTNEPS2BF16), zero-extended to 32-bit lanes */
static inline __m512i bf16_lanes(__m512 x)
{
    return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x));
}

void attn__bf16_pack_row_pairs(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *s = src + r * ld_src;
        uint32_t *d = dst + r * ld; /* 16 bf16 in order are 8 pair words, the even element low */
        int64_t c = 0;
        for (; c + 16 <= cols; c += 16)
            _mm256_storeu_si256((__m256i *)(d + c / 2), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + c)));
        if (c < cols) { /* the last columns, and a zero to finish the last pair */
            const __mmask16 in = (__mmask16)((1u << (cols - c)) - 1);
            const __mmask8 out = (__mmask8)((1u << ((cols - c + 1) / 2)) - 1);
            _mm256_mask_storeu_epi32(d + c / 2, out, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(in, s + c)));
        }
    }
}

void attn__bf16_pack_col_pairs(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols)
{
    for (int64_t p = 0; p < (rows + 1) / 2; p++) {
        const float *even = src + 2 * p * ld_src, *odd = 2 * p + 1 < rows ? even + ld_src : NULL;
        uint32_t *d = dst + p * ld;
        for (int64_t c = 0; c < cols; c += 16) {
            const __mmask16 k = cols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - c)) - 1);
            __m512i lo = bf16_lanes(_mm512_maskz_loadu_ps(k, even + c));
            __m512i hi =
                odd ? _mm512_slli_epi32(bf16_lanes(_mm512_maskz_loadu_ps(k, odd + c)), 16) : _mm512_setzero_si512();
            _mm512_mask_storeu_epi32(d + c, k, _mm512_or_si512(lo, hi));
        }
    }
}

/* rows of C per register block and column vectors per block: 6 x 4 accumulators, 4 B vectors and
 * a broadcast pair in the 32 registers, as the float32 kernel (tile_gemm.c) */
enum {
    BF16_MR = 6,
    BF16_NV = 4
};

/* C[0..mr) x [0..nv vectors) (+)= alpha A B over kp pairs; the last vector's columns under `last`.
 * mr and nv are constants after inlining. */
static inline __attribute__((always_inline)) void block(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs,
                                                        int64_t a_ks, const uint32_t *b, int64_t ldb, int mr, int nv,
                                                        __mmask16 last, int64_t kp, float alpha, bool accumulate)
{
    __m512 acc[BF16_MR][BF16_NV];
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++) {
        const uint32_t *bp = b + p * ldb, *ap = a + p * a_ks;
        __m512bh bv[BF16_NV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            bv[v] =
                (__m512bh)(v == nv - 1 ? _mm512_maskz_loadu_epi32(last, bp + 16 * v) : _mm512_loadu_si512(bp + 16 * v));
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            const __m512bh av = (__m512bh)_mm512_set1_epi32((int)ap[r * a_rs]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, bv[v]);
        }
    }
    const __m512 va = _mm512_set1_ps(alpha);
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            float *cp = c + r * ldc + 16 * v;
            const __mmask16 k = v == nv - 1 ? last : (__mmask16)0xffff;
            __m512 old = accumulate ? _mm512_maskz_loadu_ps(k, cp) : _mm512_setzero_ps();
            _mm512_mask_storeu_ps(cp, k, _mm512_fmadd_ps(va, acc[r][v], old));
        }
}

/* All m rows of one column panel of nv vectors. */
static inline __attribute__((always_inline)) void panel(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs,
                                                        int64_t a_ks, const uint32_t *b, int64_t ldb, int64_t m, int nv,
                                                        __mmask16 last, int64_t kp, float alpha, bool accumulate)
{
    int64_t r = 0;
    for (; r + BF16_MR <= m; r += BF16_MR)
        block(c + r * ldc, ldc, a + r * a_rs, a_rs, a_ks, b, ldb, BF16_MR, nv, last, kp, alpha, accumulate);
    const uint32_t *ar = a + r * a_rs;
    float *cr = c + r * ldc;
    /* the last rows with their count a constant: block's accumulators stay in registers */
#define ROWS(n)                                                                                                        \
    case n:                                                                                                            \
        block(cr, ldc, ar, a_rs, a_ks, b, ldb, n, nv, last, kp, alpha, accumulate);                                    \
        break;
    switch (m - r) {
        ROWS(5) ROWS(4) ROWS(3) ROWS(2) ROWS(1)
    }
#undef ROWS
}

void attn__tile_gemm_bf16(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                          int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    const __mmask16 all = 0xffff;
    int64_t j = 0;
    for (; j + 16 * BF16_NV <= n; j += 16 * BF16_NV)
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, BF16_NV, all, kp, alpha, accumulate);
    if (j + 32 <= n) {
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 2, all, kp, alpha, accumulate);
        j += 32;
    }
    for (; j + 16 <= n; j += 16) panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 1, all, kp, alpha, accumulate);
    if (j < n) /* the last columns, fewer than a vector */
        panel(c + j, ldc, a, a_rs, a_ks, b + j, ldb, m, 1, (__mmask16)((1u << (n - j)) - 1), kp, alpha, accumulate);
}

#else /* no bf16 instructions at this level: the references' bits */

void attn__bf16_pack_row_pairs(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols)
{
    attn__bf16_pack_row_pairs_ref(dst, ld, src, ld_src, rows, cols);
}

void attn__bf16_pack_col_pairs(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols)
{
    attn__bf16_pack_col_pairs_ref(dst, ld, src, ld_src, rows, cols);
}

void attn__tile_gemm_bf16(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                          int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    attn__tile_gemm_bf16_ref(c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate);
}

#endif
