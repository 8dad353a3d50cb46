/* Private: numeric kernels with no autograd. Each fast kernel has a *_ref twin that is kept
 * forever and tested against it. Row-major throughout; outputs first, inputs, then sizes. */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

/* Elements below which an elementwise loop runs on one thread: forking costs more than the
 * threads save. (Row kernels whose elements cost more, softmax and layernorm, fork from half.) */
#define ATTN_PARALLEL_MIN 65536

/* C (M, N) = alpha * op(A) @ op(B) + beta * C. op(A) is (M, K): A is (M, K) with row stride lda,
 * or (K, M) when trans_a. op(B) is (K, N): B is (K, N) with row stride ldb, or (N, K) when
 * trans_b. beta = 0 never reads C. A large GEMM called outside a parallel region is split over
 * `threads` OpenMP threads (the ctx's count); inside one it runs on the calling thread. */
void attn__gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m, int64_t n,
                int64_t k, bool trans_a, bool trans_b, float alpha, float beta, int threads);
void attn__gemm_ref(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m,
                    int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta);
/* attn__gemm with A and B rounded to bf16 (round to nearest even) and float32 sums: MEDIUM
 * precision of the layers' products, through the GEMM library (oneDNN's bf16 matmul). scratch:
 * attn__gemm_bf16_scratch_words words for the bf16 copies. false when the library cannot (no bf16
 * GEMM in it, or it refused): C is untouched and the caller runs attn__gemm. */
bool attn__gemm_bf16(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb, int64_t m,
                     int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta, uint32_t *scratch,
                     int threads);
int64_t attn__gemm_bf16_scratch_words(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b);
/* C (M, N) = alpha * A @ B (+ C when accumulate) on small tiles that fit in cache, without
 * packing: A element (i, p) at a[i * a_rs + p * a_ks] (a transposed A is a_rs = 1), B (K, N)
 * row-major with row stride ldb, C row-major; a K past 128 summed in equal chunks (tile_gemm.c). The
 * micro-kernel of the fused attention. */
void attn__tile_gemm(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb,
                     int64_t m, int64_t n, int64_t k, float alpha, bool accumulate);
void attn__tile_gemm_ref(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks, const float *b, int64_t ldb,
                         int64_t m, int64_t n, int64_t k, float alpha, bool accumulate);

/* ---- bf16 products with float32 sums (bf16_internal.h's arithmetic): the fused attention at MEDIUM ----
 * Operands are pairs along K: A (M, K) as words a[i * a_rs + p * a_ks] = (A[i][2p], A[i][2p+1]),
 * B (K, N) as words b[p * ldb + j] = (B[2p][j], B[2p+1][j]); kp = ceil(K / 2), an odd K's last
 * pair padded with 0. C (M, N) = alpha * A @ B (+ C when accumulate), each element's pairs summed
 * in the order p = 0, 1, ... by VDPBF16PS's rule, then C = fma(alpha, sum, C or 0): the fast
 * kernel and the reference give the same bits. Sizes in elements (bf16) or words (pairs). */
void attn__tile_gemm_bf16(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                          int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);
void attn__tile_gemm_bf16_ref(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                              int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);
/* The same product as attn__tile_gemm_bf16 with TDPBF16PS's sums (tile_gemm_amx.c states them): the
 * pairs in chunks of 16, each chunk's even and odd products summed apart, then added to the
 * element's sum. Through AMX tiles where attn__amx_usable, else the reference; the same bits. */
void attn__tile_gemm_amx(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                         int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);
void attn__tile_gemm_amx_ref(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                             int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);
/* The same product with Arm BFDOT's sums (tile_gemm_bfdot.c states them): each pair's two products
 * added, then added to the element's sum, every addition rounded to odd. Through BFDOT at the
 * neon_bf16 level, else the reference; the same bits. */
void attn__tile_gemm_bfdot(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                           int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);
void attn__tile_gemm_bfdot_ref(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                               int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);
/* dst (rows, ceil(cols / 2)) words, row stride ld, pairing neighbours in each row of src (rows,
 * cols): dst[r][q] = (src[r][2q], src[r][2q + 1]), the missing element of an odd row 0 */
void attn__bf16_pack_row_pairs(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols);
void attn__bf16_pack_row_pairs_ref(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows,
                                   int64_t cols);
/* dst (ceil(rows / 2), cols) words, row stride ld, pairing consecutive rows of src (rows, cols):
 * dst[p][c] = (src[2p][c], src[2p + 1][c]), the missing row of an odd count 0 */
void attn__bf16_pack_col_pairs(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows, int64_t cols);
void attn__bf16_pack_col_pairs_ref(uint32_t *dst, int64_t ld, const float *src, int64_t ld_src, int64_t rows,
                                   int64_t cols);

/* ---- one new token of the cached language-model decoder (decode.c) ---- */

/* y[v, i] = (accumulate ? y[v, i] : 0) + (w[i, :] . x[v, :] + bias[i]) for the rows i in [r0, r1)
 * of w (rows, cols; row stride ldw) and the n vectors x (n, cols; stride ldx); y (n, ldy); bias
 * (rows) or NULL. On the calling thread: a caller splits the rows over its threads. */
void attn__gemv_rows(float *y, int64_t ldy, const float *w, int64_t ldw, const float *x, int64_t ldx, const float *bias,
                     int64_t n, int64_t r0, int64_t r1, int64_t cols, bool accumulate);
void attn__gemv_rows_ref(float *y, int64_t ldy, const float *w, int64_t ldw, const float *x, int64_t ldx,
                         const float *bias, int64_t n, int64_t r0, int64_t r1, int64_t cols, bool accumulate);
/* o (dh) = softmax(scale q K^T) V for one query q (dh) over n >= 1 keys and values, key j at
 * k + j ld and v + j ld (one head of a cache); scores (n) is scratch */
void attn__attend_one(float *o, float *scores, const float *q, const float *k, const float *v, int64_t ld, int64_t n,
                      int64_t dh, float scale);
void attn__attend_one_ref(float *o, float *scores, const float *q, const float *k, const float *v, int64_t ld,
                          int64_t n, int64_t dh, float scale);

/* ---- elementwise helpers, threaded over big blocks (threads: the caller's ctx's count); every
 * element summed in the same order whatever the thread count ---- */

/* y (n) += x (n) */
void attn__add_into(float *y, const float *x, int64_t n, int threads);
/* sums (cols) += sum over rows of x (rows, cols), each column in row order (bias gradients) */
void attn__col_sums_add(float *sums, const float *x, int64_t rows, int64_t cols, int threads);

/* splitmix64's finaliser: a good 64-bit mix of a counter, the dropout generator's hash */
static inline uint64_t attn_hash64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* ---- dropout masks: keep[i] = 1 when u_i = (attn_hash64(i ^ attn_hash64(key)) >> 40) / 2^24
 * is >= p, else 0, for i in [0, n). A pure function of (key, i): the same mask on any number of
 * threads. The fast one threads and vectorises; *_ref is the formula, one element at a time. */
void attn__dropout_mask(uint8_t *keep, int64_t n, uint64_t key, float p, int threads);
void attn__dropout_mask_ref(uint8_t *keep, int64_t n, uint64_t key, float p);

/* ---- cross-entropy with label smoothing eps over rows of logits z (rows, C), targets t ----
 *   m_i = max_c z_ic,  s_i = sum_c exp(z_ic - m_i),  lse_i = m_i + log s_i
 *   loss_i = (1 - eps) (lse_i - z_it) + eps / C sum_c (lse_i - z_ic)    (0 where t_i = ignore)
 *   backward: dz_ic += scale (exp(z_ic - m_i) / s_i - (1 - eps) [c = t_i] - eps / C)
 *             (rows with t_i = ignore get nothing)
 * max (rows) and sum (rows) are written by the forward for the backward. The fast pair runs rows
 * in parallel with simd_internal.h's exp (2 ulp) and float lanes for s; *_ref uses libm's exp in double. */
void attn__cross_entropy_rows(float *max, double *sum, double *loss, const float *z, const int64_t *t, int64_t rows,
                              int64_t classes, int64_t ignore_index, double eps, int threads);
void attn__cross_entropy_rows_ref(float *max, double *sum, double *loss, const float *z, const int64_t *t, int64_t rows,
                                  int64_t classes, int64_t ignore_index, double eps);
void attn__cross_entropy_rows_backward(float *dz, const float *z, const float *max, const double *sum, const int64_t *t,
                                       int64_t rows, int64_t classes, int64_t ignore_index, double eps, double scale,
                                       int threads);
void attn__cross_entropy_rows_backward_ref(float *dz, const float *z, const float *max, const double *sum,
                                           const int64_t *t, int64_t rows, int64_t classes, int64_t ignore_index,
                                           double eps, double scale);

/* ---- optimizer updates, torch.optim 1.13's float32 rules over a flat block of n parameters ----
 *   SGD:   d = g + wd p;  momentum: buf = d (first step) or mom buf + keep d,
 *          d = nesterov ? d + mom buf : buf;   p += neg_lr d
 *   Adam:  g += wd p (L2, not AdamW);  p *= decay (AdamW);  m = b1 m + a1 g;  v = b2 v + a2 g^2;
 *          p += neg_step m / (sqrt(v) / bc2_sqrt + eps)
 * The constants are float32 roundings of torch's Python doubles, made by the caller. The element
 * updates do not depend on the thread count. */
typedef struct attn_sgd_consts {
    float weight_decay, momentum, keep /* 1 - dampening */, neg_lr;
    bool first, nesterov; /* first: the momentum buffer starts as d */
} attn_sgd_consts;
typedef struct attn_adam_consts {
    float wd, decay, b1, a1, b2, a2, bc2_sqrt, eps, neg_step;
    bool adamw; /* decoupled decay (p *= decay) instead of L2 (g += wd p) */
} attn_adam_consts;
/* p, g (n); buf (n): the momentum buffer, read and written only when momentum != 0 */
void attn__sgd_update(float *p, float *buf, const float *g, int64_t n, const attn_sgd_consts *k, int threads);
/* p, g, m (exp_avg), v (exp_avg_sq) (n) */
void attn__adam_update(float *p, float *m, float *v, const float *g, int64_t n, const attn_adam_consts *k, int threads);

/* ---- softmax and log-softmax over the last dim of a (rows, cols) block ----
 *   softmax:     y = exp(x - max) / sum exp(x - max)      dx += y * (dy - sum(dy * y))
 *   log_softmax: y = x - max - log sum exp(x - max)       dx += dy - exp(y) * sum(dy)
 * A row of all -inf gives y = 0 (softmax) or -inf (log_softmax) and dx += 0. Outputs must not
 * overlap inputs; backward accumulates into dx. The fast kernels spread rows over `threads`
 * OpenMP threads; the results do not depend on the count. */
void attn__softmax_rows(float *y, const float *x, int64_t rows, int64_t cols, int threads);
void attn__softmax_rows_ref(float *y, const float *x, int64_t rows, int64_t cols);
void attn__softmax_rows_backward(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols, int threads);
void attn__softmax_rows_backward_ref(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols);
void attn__log_softmax_rows(float *y, const float *x, int64_t rows, int64_t cols, int threads);
void attn__log_softmax_rows_ref(float *y, const float *x, int64_t rows, int64_t cols);
void attn__log_softmax_rows_backward(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols,
                                     int threads);
void attn__log_softmax_rows_backward_ref(float *dx, const float *dy, const float *y, int64_t rows, int64_t cols);

/* ---- layer norm over the last dim of a (rows, cols) block ----
 *   forward:  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps) (biased var),
 *             y = xhat * w + b           (w, b (cols) or NULL: 1 and 0)
 *   backward: g = dy * w,  dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),
 *             dw += sum_rows dy * xhat,  db += sum_rows dy   (dx, dw, db may each be NULL)
 * mean (NULL: RMSNorm, layer norm without centring: mean 0, rstd = 1 / sqrt(mean(x^2) + eps),
 * and no mean(g) term) and rstd (rows) are written by the forward and read by the backward; row and column
 * sums are accumulated in double. The fast kernels spread rows (columns for dw, db) over
 * `threads` OpenMP threads; the results do not depend on the count. */
void attn__layernorm_rows(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t rows, int64_t cols, float eps, int threads);
void attn__layernorm_rows_ref(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                              int64_t rows, int64_t cols, float eps);
void attn__layernorm_rows_backward(float *dx, float *dw, float *db, const float *dy, const float *x, const float *mean,
                                   const float *rstd, const float *w, int64_t rows, int64_t cols, int threads);
void attn__layernorm_rows_backward_ref(float *dx, float *dw, float *db, const float *dy, const float *x,
                                       const float *mean, const float *rstd, const float *w, int64_t rows,
                                       int64_t cols);

#endif
