/* Private: numeric kernels with no autograd. Each fast kernel has a *_ref twin that is kept
 * forever and tested against it. Row-major throughout; outputs first, inputs, then sizes. */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include <stdbool.h>
#include <stdint.h>

/* C (M, N) = alpha * op(A) @ op(B) + beta * C. op(A) is (M, K): A is (M, K) with row stride lda,
 * or (K, M) when trans_a. op(B) is (K, N): B is (K, N) with row stride ldb, or (N, K) when
 * trans_b. beta = 0 never reads C. */
void attn_gemm(float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
               int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha,
               float beta);
void attn_gemm_ref(float *c, int64_t ldc, const float *a, int64_t lda, const float *b,
                   int64_t ldb, int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b,
                   float alpha, float beta);
/* C (M, N) = alpha * A @ B (+ C when accumulate) on small tiles that fit in cache, without
 * packing: A element (i, p) at a[i * a_rs + p * a_ks] (a transposed A is a_rs = 1), B (K, N)
 * row-major with row stride ldb, C row-major. The micro-kernel of the fused attention. */
void attn_tile_gemm(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks,
                    const float *b, int64_t ldb, int64_t m, int64_t n, int64_t k, float alpha,
                    bool accumulate);
void attn_tile_gemm_ref(float *c, int64_t ldc, const float *a, int64_t a_rs, int64_t a_ks,
                        const float *b, int64_t ldb, int64_t m, int64_t n, int64_t k, float alpha,
                        bool accumulate);
/* Sets the thread count over which the next attn_gemm calls made outside parallel regions split. */
void attn_gemm_set_threads(int n);

/* ---- softmax and log-softmax over the last dim of a (rows, cols) block ----
 *   softmax:     y = exp(x - max) / sum exp(x - max)      dx += y * (dy - sum(dy * y))
 *   log_softmax: y = x - max - log sum exp(x - max)       dx += dy - exp(y) * sum(dy)
 * A row of all -inf gives y = 0 (softmax) or -inf (log_softmax) and dx += 0. Outputs must not
 * overlap inputs; backward accumulates into dx. */
void attn_softmax_rows(float *y, const float *x, int64_t rows, int64_t cols);
void attn_softmax_rows_ref(float *y, const float *x, int64_t rows, int64_t cols);
void attn_softmax_rows_backward(float *dx, const float *dy, const float *y, int64_t rows,
                                int64_t cols);
void attn_softmax_rows_backward_ref(float *dx, const float *dy, const float *y, int64_t rows,
                                    int64_t cols);
void attn_log_softmax_rows(float *y, const float *x, int64_t rows, int64_t cols);
void attn_log_softmax_rows_ref(float *y, const float *x, int64_t rows, int64_t cols);
void attn_log_softmax_rows_backward(float *dx, const float *dy, const float *y, int64_t rows,
                                    int64_t cols);
void attn_log_softmax_rows_backward_ref(float *dx, const float *dy, const float *y,
                                        int64_t rows, int64_t cols);

/* ---- layer norm over the last dim of a (rows, cols) block ----
 *   forward:  xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps) (biased var),
 *             y = xhat * w + b           (w, b (cols) or NULL: 1 and 0)
 *   backward: g = dy * w,  dx += rstd * (g - mean(g) - xhat * mean(g * xhat)),
 *             dw += sum_rows dy * xhat,  db += sum_rows dy   (dx, dw, db may each be NULL)
 * mean and rstd (rows) are written by the forward and read by the backward; row and column
 * sums are accumulated in double. */
void attn_layernorm_rows(float *y, float *mean, float *rstd, const float *x, const float *w,
                         const float *b, int64_t rows, int64_t cols, float eps);
void attn_layernorm_rows_ref(float *y, float *mean, float *rstd, const float *x, const float *w,
                             const float *b, int64_t rows, int64_t cols, float eps);
void attn_layernorm_rows_backward(float *dx, float *dw, float *db, const float *dy,
                                  const float *x, const float *mean, const float *rstd,
                                  const float *w, int64_t rows, int64_t cols);
void attn_layernorm_rows_backward_ref(float *dx, float *dw, float *db, const float *dy,
                                      const float *x, const float *mean, const float *rstd,
                                      const float *w, int64_t rows, int64_t cols);

#endif
