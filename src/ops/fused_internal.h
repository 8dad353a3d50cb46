/* Private: fused ops that the Transformer layers call in place of chains of public ones: one pass
 * over memory where the chain makes three, one GEMM where it makes three of a weaker shape. Each
 * gives its chain's values bit for bit (the same GEMMs, the same float operations in the same
 * order, the same RNG draws), but for the packed projection's weight and bias gradients, whose
 * elements are the chain's sums in another order; test_ops_fused holds them to their chains. */
#ifndef ATTN_OPS_FUSED_H
#define ATTN_OPS_FUSED_H

#include "../core/core_internal.h"

typedef enum attn__act {
    ATTN__ACT_RELU,
    ATTN__ACT_GELU,
    ATTN__ACT_GELU_TANH
} attn__act;

/* attn_dropout(act(attn_linear(x, weight, bias)), p): x (..., in), weight (out, in), bias (out)
 * or NULL -> (..., out). Keeps the GEMM's product (without the bias) and the keep mask for the
 * backward, which forms dh = dy * keep / (1 - p) * act'(h + bias) in one pass before the GEMMs. */
attn_tensor *attn__linear_act_dropout(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias,
                                      attn__act act, float p);

/* attn_add(x, attn_dropout(branch, p)) for x and branch of one shape (a residual connection). */
attn_tensor *attn__add_dropout(attn_ctx *ctx, attn_tensor *x, attn_tensor *branch, float p);

/* Multi-head attention's packed input projection, x (..., in) @ weight (n E, in)^T + bias (n E):
 * attn_linear with the forward run as n GEMMs into the output's column blocks (the GEMMs of n
 * separate linears over weight's row blocks, the same values) and dW as one GEMM (not n, which
 * only reorders each element's sum; db's column sums go straight into the gradient, not through a
 * block's zeroed buffer first). n (blocks) must divide weight's rows. */
attn_tensor *attn__linear_blocks(attn_ctx *ctx, attn_tensor *x, attn_tensor *weight, attn_tensor *bias, int64_t blocks);
/* attn_split_heads of x's columns [block E, (block + 1) E) for x (B, L, blocks E): (B, H, L, E/H) */
attn_tensor *attn__split_heads_block(attn_ctx *ctx, attn_tensor *x, int64_t block, int64_t blocks, int64_t num_heads);

/* What attn_dropout draws: NULL when no mask is due (eval mode or p == 0), else a keep mask of n
 * bytes in the arena under a key drawn from the ctx RNG, with *scale = 1 / (1 - p) (0 when
 * p == 1). p outside [0, 1] is an error (NULL, *status set) naming `op`. */
uint8_t *attn__dropout_keep(attn_ctx *ctx, int64_t n, float p, float *scale, const char *op, attn_status *status);

#endif
