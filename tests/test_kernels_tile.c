/* The fused attention's building blocks against their reference twins: attn__tile_gemm (register
 * blocks of 6 rows by 4, 2 or 1 vectors, the row remainders 1..5 and the column tail under one
 * vector) against attn__tile_gemm_ref on every combination of m 1..13, n in {1, 3, 8, 15, 16, 17,
 * 24, 32, 40, 48, 64, 65, 80, 100}, k in {0, 1, 7, 64}, A read straight or transposed, with and
 * without accumulation into C, alpha 0.37; and vf_exp (simd_internal.h) lane by lane against
 * attn_exp_nonpos on normal values, the clamp at -87.34, -inf (0), 0 and small positive values
 * (exact), and NaN (NaN).
 *
 * Tolerances: tile GEMM |fast - ref| <= 1e-5 + 1e-5 |ref| + 2e-6 sum_p |a_ip b_pj|: the kernel
 * sums k <= 64 products in float with FMAs, the reference in double; the float error of such a
 * sum is typically sqrt(k) 2^-24 sum|ab| ~ 5e-7 sum|ab|. vf_exp against attn_exp_nonpos: the
 * same reduction and polynomial, FMA-fused here and there: within 2 ulp (rtol 2.4e-7). */
#include "testkit.h"
#include "kernels/kernels_internal.h"
#include "kernels/simd_internal.h"
#include "kernels/vmath_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float uniform_pm1(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void fill(float *x, int64_t n, uint64_t *state)
{
    for (int64_t i = 0; i < n; i++) x[i] = 1.7f * uniform_pm1(state);
}

/* |fast - ref| <= 1e-5 + 1e-5 |ref| + 2e-6 sum_p |a_ip b_pj| for every element */
static bool gemm_close(const float *fast, const float *ref, const float *a, int64_t a_rs, int64_t a_ks, const float *b,
                       int64_t ldb, int64_t ldc, int64_t m, int64_t n, int64_t k, const char *what)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double mag = 0.0;
            for (int64_t p = 0; p < k; p++) mag += fabs((double)a[i * a_rs + p * a_ks] * b[p * ldb + j]);
            double got = fast[i * ldc + j], want = ref[i * ldc + j];
            if (!(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want) + 2e-6 * mag)) {
                fprintf(stderr, "%s: C[%lld][%lld] = %.9g, reference %.9g\n", what, (long long)i, (long long)j, got,
                        want);
                return false;
            }
        }
    return true;
}

/* One shape: A (m, k) with row stride k + 2, or stored transposed as (k, m + 1); B (k, n) with
 * row stride n + 5; C (m, n) with row stride n + 3, whose padding must stay untouched. */
static bool tile_gemm_case(int64_t m, int64_t n, int64_t k, bool trans, bool accumulate, uint64_t *state)
{
    const int64_t ldc = n + 3, ldb = n + 5, k1 = k > 0 ? k : 1;
    const int64_t a_rs = trans ? 1 : k + 2, a_ks = trans ? m + 1 : 1;
    const int64_t a_len = trans ? k1 * (m + 1) : m * (k + 2);
    float *a = malloc((size_t)a_len * sizeof(float)), *b = malloc((size_t)(k1 * ldb) * sizeof(float));
    float *c_fast = malloc((size_t)(m * ldc) * sizeof(float));
    float *c_ref = malloc((size_t)(m * ldc) * sizeof(float));
    fill(a, a_len, state);
    fill(b, k1 * ldb, state);
    fill(c_fast, m * ldc, state);
    memcpy(c_ref, c_fast, (size_t)(m * ldc) * sizeof(float));
    attn__tile_gemm(c_fast, ldc, a, a_rs, a_ks, b, ldb, m, n, k, 0.37f, accumulate);
    attn__tile_gemm_ref(c_ref, ldc, a, a_rs, a_ks, b, ldb, m, n, k, 0.37f, accumulate);
    char what[96];
    snprintf(what, sizeof what, "tile gemm m %lld n %lld k %lld%s%s", (long long)m, (long long)n, (long long)k,
             trans ? " A^T" : "", accumulate ? " C +=" : "");
    bool ok = gemm_close(c_fast, c_ref, a, a_rs, a_ks, b, ldb, ldc, m, n, k, what);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = n; j < ldc; j++) ok = ok && c_fast[i * ldc + j] == c_ref[i * ldc + j];
    TK_CHECK(ok, "%s: wrote past column n or disagrees with the reference", what);
    free(a);
    free(b);
    free(c_fast);
    free(c_ref);
    return ok;
}

static void test_tile_gemm(void)
{
    static const int64_t ns[] = {1, 3, 8, 15, 16, 17, 24, 32, 40, 48, 64, 65, 80, 100};
    static const int64_t ks[] = {0, 1, 7, 64};
    uint64_t state = 42;
    int cases = 0, passed = 0;
    for (int64_t m = 1; m <= 13; m++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                for (int variant = 0; variant < 4; variant++) {
                    cases++;
                    passed += tile_gemm_case(m, ns[ni], ks[ki], variant & 1, variant & 2, &state);
                }
    printf("  tile gemm: %d of %d shapes agree (%d-lane vectors)\n", passed, cases, VF_LANES);
}

static void test_vf_exp(void)
{
    float x[64], want[64], got[64];
    uint64_t state = 7;
    for (int i = 0; i < 48; i++) x[i] = -90.0f * (uniform_pm1(&state) + 1.0f) * 0.5f;
    const float edges[16] = {-INFINITY, -87.33654f, -87.4f, -87.3f, -1e-30f, 0.0f,   -0.0f,  1e-7f,
                             2e-6f,     -88.0f,     NAN,    -0.5f,  -1.0f,   -20.0f, -60.0f, -86.0f};
    memcpy(x + 48, edges, sizeof edges);
    for (int i = 0; i < 64; i++) want[i] = attn_exp_nonpos(x[i]);
    for (int i = 0; i < 64; i += VF_LANES) vf_store(got + i, vf_exp(vf_load(x + i)));
    tk_close("vf_exp vs attn_exp_nonpos", got, want, 64, 0.0f, 2.4e-7f);
    TK_CHECK(isnan(got[58]), "vf_exp(NaN) = %g, expected NaN", got[58]);
    TK_CHECK(got[48] == 0.0f, "vf_exp(-inf) = %g, expected 0", got[48]);
}

int main(void)
{
    test_tile_gemm();
    test_vf_exp();
    return tk_finish("test_kernels_tile");
}
