/* Private: kernels chosen at run time. On x86-64 and aarch64 (unless ATTN_NATIVE), every kernel
 * file of this folder but gemm.c, gemm_bf16.c and dispatch.c is compiled once per level of
 * attn_cpu_isa that the architecture has (levels_internal.h, the one list of them: x86-64's
 * baseline = x86-64-v2, avx2 = x86-64-v3, avx512 = x86-64-v4, avx512_bf16 = v4 + AVX512_BF16;
 * aarch64's baseline, neon, sve and neon_bf16) into one library, each level's copy defining its names with the level's suffix
 * (attn_softmax_rows_avx512). dispatch.c defines the plain names: each calls the chosen level's
 * copy through a table, the level picked once, at the first call (dispatch.c). A level's kernels
 * call one another directly, inside the level.
 *
 * The two lists below name every global function of those files (the linker refuses a name left
 * out: each level would define it). X(return type, name, (parameters), (arguments)):
 *   ATTN_KERNELS        called from outside the kernels (ops, tests): dispatched;
 *   ATTN_KERNEL_HELPERS shared by the kernel files of one level only: renamed, never dispatched.
 * The parameters repeat the declarations in kernels_internal.h, attention_internal.h,
 * attention_fused_internal.h and vmath_internal.h, and the compiler
 * holds the copies equal (a redeclaration that differs is an error). */
#ifndef ATTN_KERNELS_DISPATCH_H
#define ATTN_KERNELS_DISPATCH_H

#include "attention_fused_internal.h"
#include "attention_internal.h"
#include "kernels_internal.h"
#include "vmath_internal.h"

#include "attn.h" /* attn_cpu_isa */

#define ATTN_KERNELS(X)                                                                                                \
    X(void, attn__tile_gemm,                                                                                           \
      (float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb, int64_t m,      \
       int64_t n, int64_t k, float alpha, bool accumulate),                                                            \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, k, alpha, accumulate))                                                     \
    X(void, attn__tile_gemm_ref,                                                                                       \
      (float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb, int64_t m,      \
       int64_t n, int64_t k, float alpha, bool accumulate),                                                            \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, k, alpha, accumulate))                                                     \
    X(void, attn__tile_gemm_bf16,                                                                                      \
      (float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b, int64_t ldb,           \
       int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate),                                                \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate))                                                    \
    X(void, attn__tile_gemm_bf16_ref,                                                                                  \
      (float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b, int64_t ldb,           \
       int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate),                                                \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate))                                                    \
    X(void, attn__tile_gemm_amx,                                                                                       \
      (float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b, int64_t ldb,           \
       int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate),                                                \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate))                                                    \
    X(void, attn__tile_gemm_amx_ref,                                                                                   \
      (float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b, int64_t ldb,           \
       int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate),                                                \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate))                                                    \
    X(void, attn__tile_gemm_bfdot_ref,                                                                                 \
      (float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b, int64_t ldb,           \
       int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate),                                                \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate))                                                    \
    X(void, attn__tile_gemm_bfdot,                                                                                     \
      (float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b, int64_t ldb,           \
       int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate),                                                \
      (c, ldc, a, a_rs, a_ks, b, ldb, m, n, kp, alpha, accumulate))                                                    \
    X(void, attn__bf16_pack_row_pairs,                                                                                 \
      (uint32_t * dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols),                      \
      (dst, ld, src, ld_src, rows, cols))                                                                              \
    X(void, attn__bf16_pack_row_pairs_ref,                                                                             \
      (uint32_t * dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols),                      \
      (dst, ld, src, ld_src, rows, cols))                                                                              \
    X(void, attn__bf16_pack_col_pairs,                                                                                 \
      (uint32_t * dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols),                      \
      (dst, ld, src, ld_src, rows, cols))                                                                              \
    X(void, attn__bf16_pack_col_pairs_ref,                                                                             \
      (uint32_t * dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols),                      \
      (dst, ld, src, ld_src, rows, cols))                                                                              \
    X(void, attn__gemv_rows,                                                                                           \
      (float *y, int64_t ldy, const float *w, int64_t ldw, const float *x, int64_t ldx, const float *bias, int64_t n,  \
       int64_t r0, int64_t r1, int64_t cols, bool accumulate),                                                         \
      (y, ldy, w, ldw, x, ldx, bias, n, r0, r1, cols, accumulate))                                                     \
    X(void, attn__gemv_rows_ref,                                                                                       \
      (float *y, int64_t ldy, const float *w, int64_t ldw, const float *x, int64_t ldx, const float *bias, int64_t n,  \
       int64_t r0, int64_t r1, int64_t cols, bool accumulate),                                                         \
      (y, ldy, w, ldw, x, ldx, bias, n, r0, r1, cols, accumulate))                                                     \
    X(void, attn__attend_one,                                                                                          \
      (float *o, float *scores, const float *q, const float *k, const float *v, int64_t ld, int64_t n, int64_t dh,     \
       float scale),                                                                                                   \
      (o, scores, q, k, v, ld, n, dh, scale))                                                                          \
    X(void, attn__attend_one_ref,                                                                                      \
      (float *o, float *scores, const float *q, const float *k, const float *v, int64_t ld, int64_t n, int64_t dh,     \
       float scale),                                                                                                   \
      (o, scores, q, k, v, ld, n, dh, scale))                                                                          \
    X(void, attn__add_into, (float *y, const float *x, int64_t n, int threads), (y, x, n, threads))                    \
    X(void, attn__col_sums_add, (float *sums, const float *x, int64_t rows, int64_t cols, int threads),                \
      (sums, x, rows, cols, threads))                                                                                  \
    X(void, attn__dropout_mask, (uint8_t * keep, int64_t n, uint64_t key, float p, int threads),                       \
      (keep, n, key, p, threads))                                                                                      \
    X(void, attn__dropout_mask_ref, (uint8_t * keep, int64_t n, uint64_t key, float p), (keep, n, key, p))             \
    X(void, attn__cross_entropy_rows,                                                                                  \
      (float *max, double *sum, double *loss, const float *z, const int64_t *t, int64_t rows, int64_t classes,         \
       int64_t ignore_index, double eps, int threads),                                                                 \
      (max, sum, loss, z, t, rows, classes, ignore_index, eps, threads))                                               \
    X(void, attn__cross_entropy_rows_ref,                                                                              \
      (float *max, double *sum, double *loss, const float *z, const int64_t *t, int64_t rows, int64_t classes,         \
       int64_t ignore_index, double eps),                                                                              \
      (max, sum, loss, z, t, rows, classes, ignore_index, eps))                                                        \
    X(void, attn__cross_entropy_rows_backward,                                                                         \
      (float *dz, const float *z, const float *max, const double *sum, const int64_t *t, int64_t rows,                 \
       int64_t classes, int64_t ignore_index, double eps, double scale, int threads),                                  \
      (dz, z, max, sum, t, rows, classes, ignore_index, eps, scale, threads))                                          \
    X(void, attn__cross_entropy_rows_backward_ref,                                                                     \
      (float *dz, const float *z, const float *max, const double *sum, const int64_t *t, int64_t rows,                 \
       int64_t classes, int64_t ignore_index, double eps, double scale),                                               \
      (dz, z, max, sum, t, rows, classes, ignore_index, eps, scale))                                                   \
    X(void, attn__softmax_rows, (float *y, const float *x, int64_t rows, int64_t cols, int threads),                   \
      (y, x, rows, cols, threads))                                                                                     \
    X(void, attn__softmax_rows_ref, (float *y, const float *x, int64_t rows, int64_t cols), (y, x, rows, cols))        \
    X(void, attn__softmax_rows_backward,                                                                               \
      (float *dx, const float *dy, const float *y, int64_t rows, int64_t cols, int threads),                           \
      (dx, dy, y, rows, cols, threads))                                                                                \
    X(void, attn__softmax_rows_backward_ref, (float *dx, const float *dy, const float *y, int64_t rows, int64_t cols), \
      (dx, dy, y, rows, cols))                                                                                         \
    X(void, attn__log_softmax_rows, (float *y, const float *x, int64_t rows, int64_t cols, int threads),               \
      (y, x, rows, cols, threads))                                                                                     \
    X(void, attn__log_softmax_rows_ref, (float *y, const float *x, int64_t rows, int64_t cols), (y, x, rows, cols))    \
    X(void, attn__log_softmax_rows_backward,                                                                           \
      (float *dx, const float *dy, const float *y, int64_t rows, int64_t cols, int threads),                           \
      (dx, dy, y, rows, cols, threads))                                                                                \
    X(void, attn__log_softmax_rows_backward_ref,                                                                       \
      (float *dx, const float *dy, const float *y, int64_t rows, int64_t cols), (dx, dy, y, rows, cols))               \
    X(void, attn__layernorm_rows,                                                                                      \
      (float *y, float *mean, float *rstd, const float *x, const float *w, const float *b, int64_t rows, int64_t cols, \
       float eps, int threads),                                                                                        \
      (y, mean, rstd, x, w, b, rows, cols, eps, threads))                                                              \
    X(void, attn__layernorm_rows_ref,                                                                                  \
      (float *y, float *mean, float *rstd, const float *x, const float *w, const float *b, int64_t rows, int64_t cols, \
       float eps),                                                                                                     \
      (y, mean, rstd, x, w, b, rows, cols, eps))                                                                       \
    X(void, attn__layernorm_rows_backward,                                                                             \
      (float *dx, float *dw, float *db, const float *dy, const float *x, const float *mean, const float *rstd,         \
       const float *w, int64_t rows, int64_t cols, int threads),                                                       \
      (dx, dw, db, dy, x, mean, rstd, w, rows, cols, threads))                                                         \
    X(void, attn__layernorm_rows_backward_ref,                                                                         \
      (float *dx, float *dw, float *db, const float *dy, const float *x, const float *mean, const float *rstd,         \
       const float *w, int64_t rows, int64_t cols),                                                                    \
      (dx, dw, db, dy, x, mean, rstd, w, rows, cols))                                                                  \
    X(void, attn__sgd_update,                                                                                          \
      (float *p, float *buf, const float *g, int64_t n, const attn_sgd_consts *k, int threads),                        \
      (p, buf, g, n, k, threads))                                                                                      \
    X(void, attn__adam_update,                                                                                         \
      (float *p, float *m, float *v, const float *g, int64_t n, const attn_adam_consts *k, int threads),               \
      (p, m, v, g, n, k, threads))                                                                                     \
    X(void, sdpa_forward_ref,                                                                                          \
      (float *out, float *stats, float *weights, const float *q, const float *k, const float *v,                       \
       const sdpa_problem *p),                                                                                         \
      (out, stats, weights, q, k, v, p))                                                                               \
    X(void, sdpa_backward_ref,                                                                                         \
      (float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,             \
       const float *out, const float *weights, float *scratch, const sdpa_problem *p),                                 \
      (dq, dk, dv, dout, q, k, v, out, weights, scratch, p))                                                           \
    X(int64_t, sdpa_ref_scratch_floats, (const sdpa_problem *p, int threads), (p, threads))                            \
    X(void, sdpa_forward_fused,                                                                                        \
      (float *out, float *stats, const float *q, const float *k, const float *v, float *scratch,                       \
       const sdpa_problem *p),                                                                                         \
      (out, stats, q, k, v, scratch, p))                                                                               \
    X(void, sdpa_backward_fused,                                                                                       \
      (float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,             \
       const float *out, const float *stats, float *scratch, const sdpa_problem *p),                                   \
      (dq, dk, dv, dout, q, k, v, out, stats, scratch, p))                                                             \
    X(int64_t, sdpa_fused_scratch_floats, (const sdpa_problem *p, int threads), (p, threads))                          \
    X(float, sdpa_dropout_scale, (const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j), (p, b, h, i, j))

#define ATTN_KERNEL_HELPERS(X)                                                                                         \
    X(int64_t, sdpa_key_begin, (const sdpa_problem *p, int64_t i), (p, i))                                             \
    X(int64_t, sdpa_key_end, (const sdpa_problem *p, int64_t b, int64_t i), (p, b, i))                                 \
    X(void, sdpa_query_range, (const sdpa_problem *p, int64_t j0, int64_t cols, int64_t *first, int64_t *last),        \
      (p, j0, cols, first, last))                                                                                      \
    X(void, sdpa_softcap_tile,                                                                                         \
      (float *s, float *slope, int64_t query_stride, int64_t key_stride, const sdpa_problem *p, int64_t rows,          \
       int64_t cols),                                                                                                  \
      (s, slope, query_stride, key_stride, p, rows, cols))                                                             \
    X(void, sdpa_mask_tile,                                                                                            \
      (float *s, int64_t query_stride, int64_t key_stride, const sdpa_problem *p, int64_t b, int64_t h, int64_t i0,    \
       int64_t rows, int64_t j0, int64_t cols),                                                                        \
      (s, query_stride, key_stride, p, b, h, i0, rows, j0, cols))                                                      \
    X(bool, sdpa_has_elementwise_mask, (const sdpa_problem *p), (p))                                                   \
    X(int, sdpa_mask_block, (const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j), (p, b, h, i, j))      \
    X(bool, sdpa_mods_keep, (const sdpa_problem *p, int block, int64_t b, int64_t h, int64_t i, int64_t j),            \
      (p, block, b, h, i, j))                                                                                          \
    X(bool, sdpa_parallel, (const sdpa_problem *p), (p))                                                               \
    X(const fused_products *, sdpa_fused_products, (const sdpa_problem *p), (p))                                       \
    X(float, attn__exp_shift_sum, (float *y, const float *x, float shift, int64_t n), (y, x, shift, n))                \
    X(float, attn__exp_shift_sum_ref, (float *y, const float *x, float shift, int64_t n), (y, x, shift, n))            \
    X(float, attn__row_max, (const float *x, int64_t n), (x, n))

/* One level's kernels. */
#define ATTN_KERNEL_POINTER(ret, name, params, args) ret(*name) params;
typedef struct attn__kernel_table {
    ATTN_KERNELS(ATTN_KERNEL_POINTER)
} attn__kernel_table;
#undef ATTN_KERNEL_POINTER

#define ATTN_STRING_(x) #x
#define ATTN_STRING(x) ATTN_STRING_(x)
#define ATTN_PASTE_(a, b) a##b
#define ATTN_PASTE(a, b) ATTN_PASTE_(a, b)

#ifdef ATTN_ISA
/* Compiled as the level ATTN_ISA (a name of levels_internal.h; -DATTN_ISA=...): the
 * listed names become <name>_<level> in the object file (a GNU C asm label on a redeclaration,
 * so the definitions and calls keep their plain names; <name> after attention_names_internal.h's
 * macros, so sdpa_forward_ref becomes attn__sdpa_forward_ref_avx2), and this level's table is
 * attn__kernels_<level>. */
#define ATTN_KERNEL_RENAME(ret, name, params, args)                                                                    \
    ret name params __asm__(ATTN_STRING(__USER_LABEL_PREFIX__) ATTN_STRING(name) "_" ATTN_STRING(ATTN_ISA));
ATTN_KERNELS(ATTN_KERNEL_RENAME)
ATTN_KERNEL_HELPERS(ATTN_KERNEL_RENAME)
#undef ATTN_KERNEL_RENAME
#define ATTN_ISA_TABLE ATTN_PASTE(attn__kernels_, ATTN_ISA)
extern const attn__kernel_table ATTN_ISA_TABLE;
#endif

/* aarch64: the levels Linux's AT_HWCAP and AT_HWCAP2 words allow, bit l for level l (a pure
 * function of them, for tests). */
unsigned attn__isa_levels_from_hwcap(uint64_t hwcap, uint64_t hwcap2);
/* The highest level of a set (bit l for level l) at or under max: the level chosen under a cap;
 * the baseline when none. */
attn_isa attn__isa_highest(unsigned levels, int max);

/* x86: the cpuid words that decide the level: leaf 1 ECX, leaf 7 subleaf 0 EBX and EDX, leaf 7 subleaf
 * 1 EAX, leaf 0x80000001 ECX, and XCR0 (0 when the OS has not set OSXSAVE). */
typedef struct attn__cpuid_words {
    uint32_t leaf1_ecx, leaf7_ebx, leaf7_edx, leaf7_1_eax, ext1_ecx;
    uint64_t xcr0;
    char vendor[13]; /* leaf 0's "AuthenticAMD", "GenuineIntel", ... */
} attn__cpuid_words;
/* The highest level these words allow. */
attn_isa attn__isa_from_cpuid(const attn__cpuid_words *w);
/* Whether the CPU of these words runs VDPBF16PS faster than float32 FMAs (attn_bf16_attention) */
bool attn__bf16_dot_fast_from_cpuid(const attn__cpuid_words *w);
/* Whether these words show AMX tiles with bf16 products that the OS saves (AMX-TILE, AMX-BF16,
 * XCR0's XTILECFG and XTILEDATA). */
bool attn__amx_from_cpuid(const attn__cpuid_words *w);
/* Whether this process may run AMX instructions: attn__amx_from_cpuid of this CPU and, on Linux,
 * the permission asked for once (arch_prctl ARCH_REQ_XCOMP_PERM) granted. Read by the kernels of
 * every level (tile_gemm_amx.c) at run time. */
bool attn__amx_usable(void);

/* The table of a level, NULL when this build or this CPU (and OS) lacks it: for tests that hold
 * one level's kernels against another's. ATTN_CPU_ISA does not cap it. Builds without dispatch
 * (ATTN_NATIVE, other architectures) have one table, at the level attn_cpu_isa() reports. */
const attn__kernel_table *attn__kernels_at(attn_isa level);
/* The chosen level's table (attn_cpu_isa()). */
const attn__kernel_table *attn__kernels(void);

#endif
