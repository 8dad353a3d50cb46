/* Private: the ops' matrix products at their ctx's precision (attn_ctx_set_matmul_precision). */
#ifndef ATTN_OPS_GEMM_H
#define ATTN_OPS_GEMM_H

#include "../core/core_internal.h"

/* Whether the ctx's products take bf16 operands: MEDIUM, and the kernels at the avx512_bf16 level. */
bool attn__bf16(const attn_ctx *ctx);
/* ... and in the fused attention's tiles (attn_bf16_attention) */
bool attn__bf16_attention(const attn_ctx *ctx);

/* attn__gemm (kernels_internal.h) over the ctx's threads and at its precision: with bf16 products, a GEMM of
 * at least 16^3 multiply-adds (PyTorch's threshold for its oneDNN path) takes bf16 operands,
 * through the GEMM library's bf16 matmul when it has one; anything else is float32. */
void attn__ctx_gemm(attn_ctx *ctx, float *c, int64_t ldc, const float *a, int64_t lda, const float *b, int64_t ldb,
                    int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b, float alpha, float beta);

/* ATTN_ERR_SHAPE unless the bias b, when given, is (Cout) for a weight w (Cout, ...) */
attn_status attn__check_bias(const char *op, const attn_tensor *b, const attn_tensor *w);

#endif
