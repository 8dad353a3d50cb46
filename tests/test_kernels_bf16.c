/* bf16 arithmetic (src/kernels/bf16_internal.h) and the bf16 kernels (tile_gemm_bf16.c):
 *   - the reference conversion against a rounding written another way (the nearer of the two bf16
 *     neighbours, ties to the even one), on edge cases and random floats;
 *   - the reference pair dot takes the odd product first (a case where the order changes the bits);
 *   - every level's packing and tile GEMM equal the references bit for bit (the avx512_bf16
 *     level runs VCVTNEPS2BF16 and VDPBF16PS: this holds the hardware to the documented rule);
 *   - the tile GEMM against float64 sums of the same bf16 values, within float32's rounding of K
 *     terms: the reference is a dot product;
 *   - the AMX tile GEMM (tile_gemm_amx.c) equals its reference bit for bit at every level, on
 *     ordinary values and on denormals, overflowing products, zeros, infinities and NaN (where this
 *     CPU has AMX: this holds TDPBF16PS to the rule measured), and its reference differs from
 *     VDPBF16PS's where the rule says it must;
 *   - the BFDOT tile GEMM (tile_gemm_bfdot.c) likewise, on values whose products and sums land
 *     on both sides of float32's least normal and of 2^128 (at the neon_bf16 level under
 *     qemu-aarch64 this holds the emulator's BFDOT, whose code is not ours, to the Arm ARM's rule
 *     as the reference writes it), and its reference rounds to odd, flushes, overflows and makes
 *     NaN as that rule says, on cases worked by hand. */
#include "kernels/bf16_internal.h"
#include "kernels/dispatch_internal.h"
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bf16 nearest x, another way: the two bf16 neighbours that bracket |x| by truncation, the
 * nearer one in double, ties to the even significand. Normal, finite x only. */
static uint16_t nearest_bf16(float x)
{
    uint32_t u = attn_f32_bits(x);
    uint16_t down = (uint16_t)(u >> 16), up = (uint16_t)(down + 1);
    double dd = fabs((double)x - (double)attn_f32_from_bits((uint32_t)down << 16));
    double du = fabs((double)attn_f32_from_bits((uint32_t)up << 16) - (double)x);
    if ((up & 0x7f80u) == 0x7f80u) /* up is inf: x rounds there past half an ulp of the largest */
        du = fabs(ldexp(1.0, 128) - fabs((double)x));
    if (dd < du) return down;
    if (du < dd) return up;
    return (down & 1) ? up : down;
}

static void conversion_reference(void)
{
    const struct {
        float x;
        uint16_t want;
    } edge[] = {
        {1.0f, 0x3f80},
        {1.0f + 0x1p-8f, 0x3f80},            /* a tie: to the even 1.0 */
        {1.0f + 3 * 0x1p-8f, 0x3f82},        /* a tie: to the even 1 + 2^-6 */
        {1.0f + 0x1p-8f + 0x1p-20f, 0x3f81}, /* past the tie: up */
        {-2.5f, 0xc020},
        {0x1.fffffep+127f, 0x7f80}, /* FLT_MAX rounds to inf */
        {0x1.fep+127f, 0x7f7f},     /* the largest bf16 */
        {INFINITY, 0x7f80},
        {-INFINITY, 0xff80},
        {0x1p-130f, 0x0000},  /* a denormal: zero */
        {-0x1p-130f, 0x8000}, /* of its sign */
        {0.0f, 0x0000},
        {-0.0f, 0x8000},
    };
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        TK_CHECK(attn_bf16_from_f32(edge[i].x) == edge[i].want, "bf16(%a) = %#06x, expected %#06x", (double)edge[i].x,
                 attn_bf16_from_f32(edge[i].x), edge[i].want);
    uint16_t nan = attn_bf16_from_f32(attn_f32_from_bits(0x7f800001u)); /* a signalling NaN */
    TK_CHECK((nan & 0x7f80u) == 0x7f80u && (nan & 0x0040u), "a NaN stays a NaN, quiet: %#06x", nan);
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        /* random bits over the normal range, both signs */
        uint32_t u = attn_rng_u32(&rng);
        if ((u & 0x7f800000u) == 0 || (u & 0x7f800000u) == 0x7f800000u) continue;
        float x = attn_f32_from_bits(u);
        if (attn_bf16_from_f32(x) != nearest_bf16(x) && bad++ < 5)
            printf("bf16(%a): %#06x, nearest %#06x\n", (double)x, attn_bf16_from_f32(x), nearest_bf16(x));
    }
    TK_CHECK(bad == 0, "the conversion is round-to-nearest-even on 200000 random floats (%d differ)", bad);
}

static void dot_order(void)
{
    /* acc 1, odd product 2^-24 (half an ulp of 1: lost, ties to even), even product -1: odd first
     * gives 0; even first would give 2^-24 */
    uint32_t a = attn_bf16_pair(-1.0f, 0x1p-12f), b = attn_bf16_pair(1.0f, 0x1p-12f);
    TK_CHECK(attn_dpbf16_lane(1.0f, a, b) == 0.0f, "the pair's odd product is added first: got %a",
             (double)attn_dpbf16_lane(1.0f, a, b));
}

/* n floats: N(0, 1) with a few far larger and smaller, and, when `special`, NaN, inf and denormals */
static void fill(float *x, int64_t n, attn_rng *rng, bool special)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = attn_rng_normal(rng) * (i % 7 == 3 ? 1e3f : i % 11 == 5 ? 1e-3f : 1.0f);
        if (special && i % 13 == 6) x[i] = (i / 13) % 3 == 0 ? NAN : (i / 13) % 3 == 1 ? -INFINITY : 0x1p-140f;
    }
}

static void conversions_every_level(void)
{
    enum {
        ROWS = 9,
        COLS = 37,
        LD = 40
    };
    float src[ROWS * COLS];
    attn_rng rng;
    attn_rng_seed(&rng, 6);
    fill(src, ROWS * COLS, &rng, true);
    for (int l = 0; l < ATTN_ISA_COUNT; l++) {
        const attn__kernel_table *k = attn__kernels_at((attn_isa)l);
        if (!k) continue;
        for (int64_t cols = 1; cols <= COLS; cols += 4) {
            uint32_t got[ROWS * LD], want[ROWS * LD];
            memset(got, 0xab, sizeof got), memset(want, 0xab, sizeof want);
            k->attn__bf16_pack_row_pairs(got, LD, src, COLS, ROWS, cols);
            k->attn__bf16_pack_row_pairs_ref(want, LD, src, COLS, ROWS, cols);
            TK_CHECK(!memcmp(got, want, sizeof got),
                     "%s: pack_row_pairs of %d x %lld equals the reference (padding included)",
                     attn_isa_name((attn_isa)l), ROWS, (long long)cols);
            uint32_t pgot[5 * LD], pwant[5 * LD];
            for (int64_t rows = 1; rows <= ROWS; rows += 3) {
                memset(pgot, 0xab, sizeof pgot), memset(pwant, 0xab, sizeof pwant);
                k->attn__bf16_pack_col_pairs(pgot, LD, src, COLS, rows, cols);
                k->attn__bf16_pack_col_pairs_ref(pwant, LD, src, COLS, rows, cols);
                TK_CHECK(!memcmp(pgot, pwant, sizeof pgot), "%s: pack_col_pairs of %lld x %lld equals the reference",
                         attn_isa_name((attn_isa)l), (long long)rows, (long long)cols);
            }
        }
    }
}

typedef void bf16_gemm_fn(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                          int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);

/* A (m, k) and B (k, n) floats, packed: A pairs along k in rows (a_rs = kp, a_ks = 1) or in
 * columns (a_rs = 1, a_ks = m); B pairs of rows. */
static void gemm_every_level(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1},     {6, 16, 2},  {5, 17, 3},    {13, 64, 64}, {7, 65, 31},
                                        {12, 48, 128}, {3, 100, 9}, {64, 128, 64}, {1, 33, 128}, {11, 15, 5}};
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], kp = (k + 1) / 2;
        float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
              *at = malloc(sizeof(float) * k * m);
        float *c0 = malloc(sizeof(float) * m * n), *want = malloc(sizeof(float) * m * n),
              *got = malloc(sizeof(float) * m * n);
        uint32_t *ar = malloc(sizeof(uint32_t) * m * kp);
        uint32_t *ac = malloc(sizeof(uint32_t) * kp * m), *bp = malloc(sizeof(uint32_t) * kp * n);
        fill(a, m * k, &rng, false), fill(b, k * n, &rng, false), fill(c0, m * n, &rng, false);
        for (int64_t i = 0; i < m; i++)
            for (int64_t p = 0; p < k; p++) at[p * m + i] = a[i * k + p];
        attn__bf16_pack_row_pairs_ref(ar, kp, a, k, m, k);
        attn__bf16_pack_col_pairs_ref(ac, m, at, m, k, m);
        attn__bf16_pack_col_pairs_ref(bp, n, b, n, k, n);
        const uint32_t *a_rows = ar;
        for (int l = 0; l < ATTN_ISA_COUNT; l++) {
            const attn__kernel_table *t = attn__kernels_at((attn_isa)l);
            if (!t) continue;
            /* the two sums, each a fast kernel and its reference */
            const struct {
                const char *name;
                bf16_gemm_fn *fast, *ref;
            } pairs[] = {{"bf16 (VDPBF16PS)", t->attn__tile_gemm_bf16, t->attn__tile_gemm_bf16_ref},
                         {attn__amx_usable() ? "AMX (tiles)" : "AMX (no AMX here: the reference)",
                          t->attn__tile_gemm_amx, t->attn__tile_gemm_amx_ref},
                         {"BFDOT", t->attn__tile_gemm_bfdot, t->attn__tile_gemm_bfdot_ref}};
            for (size_t f = 0; f < sizeof pairs / sizeof *pairs; f++)
                for (int acc = 0; acc < 2; acc++)
                    for (int layout = 0; layout < 2; layout++) {
                        const uint32_t *ap = layout ? ac : a_rows;
                        const int64_t a_rs = layout ? 1 : kp, a_ks = layout ? m : 1;
                        memcpy(want, c0, sizeof(float) * m * n), memcpy(got, c0, sizeof(float) * m * n);
                        pairs[f].ref(want, n, ap, a_rs, a_ks, bp, n, m, n, kp, 0.75f, acc);
                        pairs[f].fast(got, n, ap, a_rs, a_ks, bp, n, m, n, kp, 0.75f, acc);
                        TK_CHECK(!memcmp(got, want, sizeof(float) * m * n),
                                 "%s: %s tile GEMM %lld x %lld x %lld (%s, A %s) equals its reference bit for bit",
                                 attn_isa_name((attn_isa)l), pairs[f].name, (long long)m, (long long)n, (long long)k,
                                 acc ? "accumulate" : "overwrite", layout ? "by columns" : "by rows");
                    }
        }
        /* each reference against float64 sums of the same bf16 values: a float32 sum of 2 kp terms,
         * in any order, rounded to nearest is within 2 kp u sum|a b| (u = 2^-24) of the exact one;
         * BFDOT's kp pair sums and kp additions, each rounded to odd (2u), within 2 (kp + 1) u
         * sum|a b|; alpha rounds once more */
        bf16_gemm_fn *const refs[] = {attn__tile_gemm_bf16_ref, attn__tile_gemm_amx_ref, attn__tile_gemm_bfdot_ref};
        const char *const ref_names[] = {"bf16", "AMX", "BFDOT"};
        for (int f = 0; f < 3; f++) {
            refs[f](got, n, a_rows, kp, 1, bp, n, m, n, kp, 0.75f, false);
            const double roundings = refs[f] == attn__tile_gemm_bfdot_ref ? 2.0 * (double)(kp + 1) : 2.0 * (double)kp;
            int bad = 0;
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double exact = 0.0, mag = 0.0;
                    for (int64_t p = 0; p < k; p++) {
                        double x = attn_f32_from_bf16(attn_bf16_from_f32(a[i * k + p])) *
                                   (double)attn_f32_from_bf16(attn_bf16_from_f32(b[p * n + j]));
                        exact += x, mag += fabs(x);
                    }
                    double tol = 0.75 * (roundings * 0x1p-24 * mag) + 0x1p-24 * fabs(0.75 * exact);
                    if (fabs(got[i * n + j] - 0.75 * exact) > tol) bad++;
                }
            TK_CHECK(bad == 0,
                     "%s tile GEMM %lld x %lld x %lld: the float32 sums within %g u sum|a b| of float64 (%d outside)",
                     ref_names[f], (long long)m, (long long)n, (long long)k, roundings, bad);
        }
        free(a), free(b), free(at), free(c0), free(want), free(got), free(ar), free(ac), free(bp);
    }
}

/* attn__gemm_bf16 (the GEMM library's bf16 matmul) against float64 sums of the same bf16 values,
 * every transpose, alpha and beta, odd sizes and strides: its float32 sums of K terms in any order
 * are within K u sum|a b| (u = 2^-24), and alpha and beta round twice more. When the library has
 * no bf16 GEMM (OpenBLAS), it must say so and leave C alone. */
static void library_gemm(void)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {128, 96, 256}, {300, 70, 129}};
    attn_rng rng;
    attn_rng_seed(&rng, 8);
    int ran = 0, declined = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int variant = 0; variant < 8; variant++) {
            const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const bool ta = variant & 1, tb = variant & 2;
            const float alpha = variant & 4 ? 0.5f : 1.0f, beta = variant & 4 ? 1.0f : 0.0f;
            const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2; /* padded rows */
            float *a = malloc(sizeof(float) * (ta ? k : m) * lda), *b = malloc(sizeof(float) * (tb ? n : k) * ldb);
            float *c = malloc(sizeof(float) * m * ldc), *c0 = malloc(sizeof(float) * m * ldc);
            uint32_t *scratch = malloc(sizeof(uint32_t) * (size_t)attn__gemm_bf16_scratch_words(m, n, k, ta, tb));
            fill(a, (ta ? k : m) * lda, &rng, false), fill(b, (tb ? n : k) * ldb, &rng, false),
                fill(c0, m * ldc, &rng, false);
            memcpy(c, c0, sizeof(float) * m * ldc);
            if (!attn__gemm_bf16(c, ldc, a, lda, b, ldb, m, n, k, ta, tb, alpha, beta, scratch, 2)) {
                declined++;
                TK_CHECK(!memcmp(c, c0, sizeof(float) * m * ldc), "a declined bf16 GEMM leaves C as it was");
            } else {
                ran++;
                int bad = 0;
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double exact = 0.0, mag = 0.0;
                        for (int64_t p = 0; p < k; p++) {
                            const float x = ta ? a[p * lda + i] : a[i * lda + p],
                                        y = tb ? b[j * ldb + p] : b[p * ldb + j];
                            const double xy = attn_f32_from_bf16(attn_bf16_from_f32(x)) *
                                              (double)attn_f32_from_bf16(attn_bf16_from_f32(y));
                            exact += xy, mag += fabs(xy);
                        }
                        const double want = alpha * exact + beta * c0[i * ldc + j];
                        const double tol = alpha * (double)k * 0x1p-24 * mag +
                                           3 * 0x1p-24 * (fabs(want) + fabs(beta * c0[i * ldc + j]));
                        if (fabs(c[i * ldc + j] - want) > tol) bad++;
                    }
                for (int64_t i = 0; i < m; i++) /* the padding past N untouched */
                    for (int64_t j = n; j < ldc; j++) bad += c[i * ldc + j] != c0[i * ldc + j];
                TK_CHECK(bad == 0,
                         "bf16 GEMM %lld x %lld x %lld%s%s alpha %g beta %g: within K u sum|ab| of float64 "
                         "(%d outside)",
                         (long long)m, (long long)n, (long long)k, ta ? " A^T" : "", tb ? " B^T" : "", (double)alpha,
                         (double)beta, bad);
            }
            free(a), free(b), free(c), free(c0), free(scratch);
        }
    printf("test_kernels_bf16: the GEMM library's bf16 matmul ran %d cases%s\n", ran,
           declined ? ", declined others (no bf16 GEMM in it)" : "");
}

/* Values where the AMX rule shows: denormals, products that underflow or overflow float32,
 * signed zeros, infinities and NaN among ordinary values. */
static void fill_edges(float *x, int64_t n, attn_rng *rng)
{
    static const float edges[] = {0x1p-130f, -0x1p-128f, 0x1p-66f, -0x1p-64f, 0x1p120f, -0x1p121f,
                                  0.0f,      -0.0f,      INFINITY, -INFINITY, NAN};
    for (int64_t i = 0; i < n; i++) {
        x[i] = attn_rng_normal(rng);
        if (attn_rng_u32(rng) % 4 == 0) x[i] = edges[attn_rng_u32(rng) % (sizeof edges / sizeof *edges)];
    }
}

static bool same_or_nan(const float *x, const float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(&x[i], &y[i], sizeof(float)) != 0 && !(isnan(x[i]) && isnan(y[i]))) return false;
    return true;
}

/* The AMX rule against the pair-by-pair VDPBF16PS rule: a case where they differ (the even and
 * odd products summed apart), and the AMX kernel against its reference on edge values (every NaN
 * counts as one). */
static void amx_rule(void)
{
    /* the pairs (1, 2^-24), (1, 2^-24), (0, 2^-24) against (1, 1) each: VDPBF16PS adds each 2^-24
     * to a sum of 0, 1 or 2 (lost but the first), then the 1: 2. AMX sums the evens (2) and the
     * odds (3 x 2^-24, exact) apart, and 2 + 3 x 2^-24 rounds to 2 + 2^-22 */
    const uint32_t a[3] = {attn_bf16_pair(1.0f, 0x1p-24f), attn_bf16_pair(1.0f, 0x1p-24f),
                           attn_bf16_pair(0.0f, 0x1p-24f)};
    const uint32_t b[3] = {attn_bf16_pair(1.0f, 1.0f), attn_bf16_pair(1.0f, 1.0f), attn_bf16_pair(1.0f, 1.0f)};
    float vdp = 0.0f, amx = 0.0f;
    attn__tile_gemm_bf16_ref(&vdp, 1, a, 3, 1, b, 1, 1, 1, 3, 1.0f, false);
    attn__tile_gemm_amx_ref(&amx, 1, a, 3, 1, b, 1, 1, 1, 3, 1.0f, false);
    TK_CHECK(vdp == 2.0f && amx == 2.0f + 0x1p-22f,
             "three pairs whose odd products are 2^-24: VDPBF16PS's rule gives 2 (got %a), AMX's 2 + 2^-22 (got %a)",
             (double)vdp, (double)amx);
    static const int64_t shapes[][3] = {{16, 16, 32}, {37, 19, 9}, {64, 64, 128}, {5, 40, 70}};
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], kp = (k + 1) / 2;
        float *x = malloc(sizeof(float) * m * k), *y = malloc(sizeof(float) * k * n);
        float *want = malloc(sizeof(float) * m * n), *got = malloc(sizeof(float) * m * n);
        uint32_t *ap = malloc(sizeof(uint32_t) * m * kp), *bp = malloc(sizeof(uint32_t) * kp * n);
        fill_edges(x, m * k, &rng), fill_edges(y, k * n, &rng);
        attn__bf16_pack_row_pairs_ref(ap, kp, x, k, m, k);
        attn__bf16_pack_col_pairs_ref(bp, n, y, n, k, n);
        for (int l = 0; l < ATTN_ISA_COUNT; l++) {
            const attn__kernel_table *t = attn__kernels_at((attn_isa)l);
            if (!t) continue;
            fill_edges(want, m * n, &rng);
            memcpy(got, want, sizeof(float) * m * n);
            t->attn__tile_gemm_amx_ref(want, n, ap, kp, 1, bp, n, m, n, kp, 1.0f, true);
            t->attn__tile_gemm_amx(got, n, ap, kp, 1, bp, n, m, n, kp, 1.0f, true);
            TK_CHECK(same_or_nan(got, want, m * n),
                     "%s: AMX tile GEMM %lld x %lld x %lld on denormals, overflows, zeros, inf and NaN equals its "
                     "reference (%s)",
                     attn_isa_name((attn_isa)l), (long long)m, (long long)n, (long long)k,
                     attn__amx_usable() ? "AMX tiles" : "no AMX here: the reference");
        }
        free(x), free(y), free(want), free(got), free(ap), free(bp);
    }
}

/* One element of the BFDOT reference: the sum over pairs of a_p b_p from 0, alpha 1, added to a C
 * of -0 (which keeps the sign of any sum) */
static float bfdot_sum(const uint32_t *a, const uint32_t *b, int64_t kp)
{
    float c = -0.0f;
    attn__tile_gemm_bfdot_ref(&c, 1, a, kp, 1, b, 1, 1, 1, kp, 1.0f, true);
    return c;
}

/* Operands for BFDOT's edges: ordinary values of scattered exponents (sums that round), and values
 * whose products fall on either side of 2^-126 (a flush) and of 2^128 (an infinity), with the
 * denormals, zeros, infinities and NaN of fill_edges */
static void fill_bfdot_edges(float *x, int64_t n, attn_rng *rng)
{
    static const float edges[] = {0x1p-63f,  0x1.8p-63f, -0x1.04p-63f, 0x1.fep-64f, 0x1p64f,   0x1.fep63f, -0x1.8p63f,
                                  0x1p-130f, 0.0f,       -0.0f,        INFINITY,    -INFINITY, NAN};
    for (int64_t i = 0; i < n; i++) {
        x[i] = ldexpf(attn_rng_normal(rng), (int)(attn_rng_u32(rng) % 49) - 24);
        if (attn_rng_u32(rng) % 2 == 0) x[i] = edges[attn_rng_u32(rng) % (sizeof edges / sizeof *edges)];
    }
}

/* BFDOT's rule on cases worked by hand, then the kernel of every level against the reference on
 * fill_bfdot_edges' values */
static void bfdot_rule(void)
{
    const uint32_t one_one = attn_bf16_pair(1.0f, 1.0f);
    /* 1, then the pair (1, 2^-24): 1 + 2^-24 rounds to odd 1 + 2^-23, and 2 + 2^-23 to odd 2 + 2^-22;
     * VDPBF16PS's nearest-even sums give 2 */
    const uint32_t a[2] = {attn_bf16_pair(1.0f, 0.0f), attn_bf16_pair(1.0f, 0x1p-24f)}, b[2] = {one_one, one_one};
    float vdp = 0.0f;
    attn__tile_gemm_bf16_ref(&vdp, 1, a, 2, 1, b, 1, 1, 1, 2, 1.0f, false);
    TK_CHECK(bfdot_sum(a, b, 2) == 2.0f + 0x1p-22f && vdp == 2.0f,
             "1 + (1 + 2^-24): BFDOT's rule gives 2 + 2^-22 (got %a), VDPBF16PS's 2 (got %a)",
             (double)bfdot_sum(a, b, 2), (double)vdp);
    /* two pairs each, the second 0 where unused; from a sum of +0, so no result is -0 unless a
     * negative sum under 2^-126 is flushed */
    const struct {
        const char *what;
        float a[4], b[4]; /* pair 0's even and odd, pair 1's */
        uint32_t want;    /* bits */
    } cases[] = {
        {"2^-63 2^-64: under 2^-126, flushed", {0x1p-63f}, {0x1p-64f}, 0x00000000u},
        {"2^-63 2^-63: 2^-126, normal", {0x1p-63f}, {0x1p-63f}, 0x00800000u},
        {"2^-126, then -1.5 2^-126: under 2^-126 though exact, flushed to -0",
         {0x1p-63f, 0.0f, -0x1.8p-63f},
         {0x1p-63f, 0.0f, 0x1p-63f},
         0x80000000u},
        {"1.5 2^-126 - 2^-126 in one pair: flushed to +0", {0x1.8p-63f, -0x1p-63f}, {0x1p-63f, 0x1p-63f}, 0x00000000u},
        {"2^64 2^64: 2^128 overflows", {0x1p64f}, {0x1p64f}, 0x7f800000u},
        {"2 (2^128 - 2^120): infinity", {0x1.fep63f, 0x1.fep63f}, {0x1p64f, 0x1p64f}, 0x7f800000u},
        {"2^128 - 2^120 + 2^103: truncated, then odd: 2^128 - 2^120 + 2^104",
         {0x1.fep63f, 0x1p52f},
         {0x1p64f, 0x1p51f},
         0x7f7f0001u},
        {"2^128 - 2^120, then 2^120 - 2^103: over the largest float32, under 2^128: the largest",
         {0x1.fep63f, 0.0f, 0x1p60f, -0x1p52f},
         {0x1p64f, 0.0f, 0x1p60f, 0x1p51f},
         0x7f7fffffu},
        {"1 - 1: +0", {1.0f, -1.0f}, {1.0f, 1.0f}, 0x00000000u},
        {"a NaN: the default NaN", {-NAN, 1.0f}, {1.0f, 1.0f}, 0x7fc00000u},
        {"inf 0: the default NaN", {INFINITY}, {0.0f}, 0x7fc00000u},
        {"inf - inf: the default NaN", {INFINITY, INFINITY}, {1.0f, -1.0f}, 0x7fc00000u},
        {"a denormal operand reads as 0", {0x1p-130f, 1.0f}, {0x1p100f, 0.5f}, 0x3f000000u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const float *x = cases[i].a, *y = cases[i].b;
        const uint32_t ap[2] = {attn_bf16_pair(x[0], x[1]), attn_bf16_pair(x[2], x[3])},
                       bp[2] = {attn_bf16_pair(y[0], y[1]), attn_bf16_pair(y[2], y[3])};
        const uint32_t got = attn_f32_bits(bfdot_sum(ap, bp, 2));
        TK_CHECK(got == cases[i].want, "BFDOT's rule: %s: %#010x, expected %#010x", cases[i].what, got, cases[i].want);
    }
    static const int64_t shapes[][3] = {{16, 16, 32}, {37, 19, 9}, {64, 64, 128}, {5, 40, 70}, {6, 17, 33}};
    attn_rng rng;
    attn_rng_seed(&rng, 10);
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], kp = (k + 1) / 2;
        float *x = malloc(sizeof(float) * m * k), *y = malloc(sizeof(float) * k * n);
        float *want = malloc(sizeof(float) * m * n), *got = malloc(sizeof(float) * m * n);
        uint32_t *ap = malloc(sizeof(uint32_t) * m * kp), *bp = malloc(sizeof(uint32_t) * kp * n);
        fill_bfdot_edges(x, m * k, &rng), fill_bfdot_edges(y, k * n, &rng);
        attn__bf16_pack_row_pairs_ref(ap, kp, x, k, m, k);
        attn__bf16_pack_col_pairs_ref(bp, n, y, n, k, n);
        for (int l = 0; l < ATTN_ISA_COUNT; l++) {
            const attn__kernel_table *t = attn__kernels_at((attn_isa)l);
            if (!t) continue;
            t->attn__tile_gemm_bfdot_ref(want, n, ap, kp, 1, bp, n, m, n, kp, 1.0f, false);
            t->attn__tile_gemm_bfdot(got, n, ap, kp, 1, bp, n, m, n, kp, 1.0f, false);
            TK_CHECK(!memcmp(got, want, sizeof(float) * m * n),
                     "%s: BFDOT tile GEMM %lld x %lld x %lld on flushes, overflows, zeros, inf and NaN equals its "
                     "reference bit for bit (%s)",
                     attn_isa_name((attn_isa)l), (long long)m, (long long)n, (long long)k,
                     l == ATTN_ISA_NEON_BF16 ? "BFDOT" : "the reference at this level");
        }
        free(x), free(y), free(want), free(got), free(ap), free(bp);
    }
}

int main(void)
{
    conversion_reference();
    dot_order();
    conversions_every_level();
    gemm_every_level();
    amx_rule();
    bfdot_rule();
    library_gemm();
    const attn__kernel_table *bf16 = attn__kernels_at(ATTN_ISA_AVX512_BF16);
    printf("test_kernels_bf16: the AVX512_BF16 kernels %s; AMX tiles %s; BFDOT %s\n",
           bf16 ? "ran against the references on this CPU" : "are not on this CPU: the references alone",
           bf16 && attn__amx_usable() ? "ran against their reference" : "are not here: the reference alone",
           attn__kernels_at(ATTN_ISA_NEON_BF16) ? "ran against its reference" : "is not here: the reference alone");
    return tk_finish("test_kernels_bf16");
}
