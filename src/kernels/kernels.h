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
/* Sets the OpenBLAS thread count for the next attn_gemm calls made outside parallel regions. */
void attn_gemm_set_threads(int n);

#endif
