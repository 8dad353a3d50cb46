/* bf16 tile products through Intel AMX (TDPBF16PS), the fused attention's products at MEDIUM on CPUs
 * whose AMX tiles outrun their VDPBF16PS (kernels_internal.h: attn__tile_gemm_amx). TDPBF16PS sums
 * in its own order, measured to the bit on a Xeon with AMX (family 6, model 167 as a KVM guest
 * reports it) over random, denormal, zero, infinite, NaN and overflowing operands:
 *   each output lane, for each instruction (16 pairs of K at most):
 *     E = +0, O = +0;
 *     for each pair p in order: E = flush(E + a_even b_even), O = flush(O + a_odd b_odd)
 *     acc = flush(daz(acc) + flush(E + O))
 *   where a product is exact (no range limit: an overflow shows only when a sum is rounded),
 *   each + is rounded to a float32 (nearest even, overflow to infinity), flush turns a denormal
 *   into +0, and daz reads a denormal accumulator as a zero of its sign; bf16 inputs read as
 *   bf16_internal.h reads them (denormals as zero).
 * The reference below computes that in portable C; the AMX kernel equals it bit for bit, and at
 * levels without AMX (or on CPUs without it) attn__tile_gemm_amx is the reference. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "bf16_internal.h"
#include "kernels_internal.h"

#if (defined(ATTN_AMX) || defined(__AMX_BF16__)) && defined(__AVX512BF16__)
#include <immintrin.h>
#endif

enum {
    AMX_PAIRS = 16, /* K pairs per TDPBF16PS: 64 bytes of a tile row */
    AMX_ROWS = 16,  /* rows of a tile */
};

/* ---- reference ---- */

/* a denormal (or zero) as +0 */
static inline float flush_positive(float x)
{
    return (attn_f32_bits(x) & 0x7f800000u) == 0 ? 0.0f : x;
}

/* x + y rounded once to float32 (y exact in double: a bf16 product; x a float32), flushed */
static inline float sum_rounded(float x, double y)
{
    return flush_positive((float)((double)x + y));
}

/* One lane of one TDPBF16PS: acc and the pairs a[0..n), b[0..n) (strides as in the GEMM). */
static float amx_lane(float acc, const uint32_t *a, int64_t a_ks, const uint32_t *b, int64_t ldb, int64_t n)
{
    float even = 0.0f, odd = 0.0f;
    for (int64_t p = 0; p < n; p++) {
        const uint32_t x = a[p * a_ks], y = b[p * ldb];
        even = sum_rounded(even, (double)attn_f32_from_bf16((uint16_t)x) * attn_f32_from_bf16((uint16_t)y));
        odd =
            sum_rounded(odd, (double)attn_f32_from_bf16((uint16_t)(x >> 16)) * attn_f32_from_bf16((uint16_t)(y >> 16)));
    }
    return flush_positive(attn_flush_denormal(acc) + flush_positive(even + odd));
}

void attn__tile_gemm_amx_ref(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                             int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < kp; p += AMX_PAIRS)
                acc = amx_lane(acc, a + i * a_rs + p * a_ks, a_ks, b + p * ldb + j, ldb,
                               kp - p < AMX_PAIRS ? kp - p : AMX_PAIRS);
            c[i * ldc + j] = fmaf(alpha, acc, accumulate ? c[i * ldc + j] : 0.0f);
        }
}

#if (defined(ATTN_AMX) || defined(__AMX_BF16__)) && defined(__AVX512BF16__)

/* ---- AMX ---- */

/* The tile configuration of LDTILECFG, palette 1: tiles 0-3 accumulate a 32 x 32 block of C
 * (2 x 2 tiles of 16 x 16 floats), 4-5 hold two 16-row bands of A and 6-7 two 16-column panels
 * of B, each 16 rows of 64 bytes. */
typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

/* What a tile load reads for the (16, 16) block of words at src (row stride rs, element stride es
 * along a row, in words) of which rows x cols lie in the operand: src itself when the whole block
 * does and its elements are adjacent, else copy, filled with the block and zero past rows x cols.
 * *stride: the load's row stride in bytes. */
static const uint32_t *tile_source(uint32_t *copy, const uint32_t *src, int64_t rs, int64_t es, int64_t rows,
                                   int64_t cols, int64_t *stride)
{
    if (es == 1 && rows >= AMX_ROWS && cols >= AMX_PAIRS) {
        *stride = rs * 4;
        return src;
    }
    for (int64_t r = 0; r < AMX_ROWS; r++)
        for (int64_t q = 0; q < AMX_PAIRS; q++)
            copy[r * AMX_PAIRS + q] = r < rows && q < cols ? src[r * rs + q * es] : 0;
    *stride = AMX_PAIRS * 4;
    return copy;
}

/* 2 x 2 accumulator tiles over the pairs [0, kp) of the bands of A at rows i0, i0 + 16 and the
 * panels of B at columns j0, j0 + 16 (rows of B are pairs). */
__attribute__((target("amx-tile,amx-bf16"))) static void block(const uint32_t *a, int64_t a_rs, int64_t a_ks,
                                                               const uint32_t *b, int64_t ldb, int64_t m, int64_t n,
                                                               int64_t kp, int64_t i0, int64_t j0, float *acc)
{
    uint32_t copy[4][AMX_ROWS * AMX_PAIRS]; /* A band 0, A band 1, B panel 0, B panel 1 */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t p0 = 0; p0 < kp; p0 += AMX_PAIRS) {
        const int64_t pairs = kp - p0 < AMX_PAIRS ? kp - p0 : AMX_PAIRS;
        const uint32_t *a0 = a + i0 * a_rs + p0 * a_ks, *b0 = b + p0 * ldb + j0;
        int64_t stride[4];
        const uint32_t *src[4] = {
            tile_source(copy[0], a0, a_rs, a_ks, m - i0, pairs, &stride[0]),
            tile_source(copy[1], a0 + AMX_ROWS * a_rs, a_rs, a_ks, m - i0 - AMX_ROWS, pairs, &stride[1]),
            tile_source(copy[2], b0, ldb, 1, pairs, n - j0, &stride[2]),
            tile_source(copy[3], b0 + AMX_ROWS, ldb, 1, pairs, n - j0 - AMX_ROWS, &stride[3])};
        _tile_loadd(4, src[0], stride[0]);
        _tile_loadd(5, src[1], stride[1]);
        _tile_loadd(6, src[2], stride[2]);
        _tile_loadd(7, src[3], stride[3]);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, acc, 128);
    _tile_stored(1, acc + 16, 128);
    _tile_stored(2, acc + 16 * 32, 128);
    _tile_stored(3, acc + 16 * 32 + 16, 128);
}

__attribute__((target("amx-tile,amx-bf16"))) static void tile_gemm_amx(float *c, int64_t ldc, const uint32_t *a,
                                                                       int64_t a_rs, int64_t a_ks, const uint32_t *b,
                                                                       int64_t ldb, int64_t m, int64_t n, int64_t kp,
                                                                       float alpha, bool accumulate)
{
    /* static storage: the compiler sees no read of a local's stores in LDTILECFG and may drop them */
    static const tile_config cfg = {
        .palette = 1,
        .bytes_per_row = {64, 64, 64, 64, 64, 64, 64, 64},
        .rows = {AMX_ROWS, AMX_ROWS, AMX_ROWS, AMX_ROWS, AMX_ROWS, AMX_ROWS, AMX_ROWS, AMX_ROWS}};
    _tile_loadconfig(&cfg); /* every call: another library (oneDNN) may have loaded its own */
    float acc[32 * 32];     /* (32, 32) the block's sums */
    const __m512 va = _mm512_set1_ps(alpha);
    for (int64_t i0 = 0; i0 < m; i0 += 2 * AMX_ROWS)
        for (int64_t j0 = 0; j0 < n; j0 += 2 * AMX_ROWS) {
            block(a, a_rs, a_ks, b, ldb, m, n, kp, i0, j0, acc);
            for (int64_t r = 0; r < 2 * AMX_ROWS && i0 + r < m; r++)
                for (int64_t q = 0; q < 2 * AMX_ROWS && j0 + q < n; q += 16) {
                    const __mmask16 k = n - j0 - q >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j0 - q)) - 1);
                    float *cp = c + (i0 + r) * ldc + j0 + q;
                    const __m512 old = accumulate ? _mm512_maskz_loadu_ps(k, cp) : _mm512_setzero_ps();
                    _mm512_mask_storeu_ps(cp, k, _mm512_fmadd_ps(va, _mm512_loadu_ps(acc + r * 32 + q), old));
                }
        }
    _tile_release();
}

void attn__tile_gemm_amx(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                         int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    if (attn__amx_usable())
        tile_gemm_amx(c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate);
    else
        attn__tile_gemm_amx_ref(c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate);
}

#else /* no AMX at this level: the reference's bits */

void attn__tile_gemm_amx(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                         int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate)
{
    attn__tile_gemm_amx_ref(c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate);
}

#endif
