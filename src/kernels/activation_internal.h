/* Private: the scalar activations shared by the unary ops (ops/unary.c) and the linear layer's
 * fused epilogue (ops/linear.c), so that both compute the same bits:
 *   relu: y = max(x, 0), NaN stays NaN   derivative: a select, x <= 0 ? 0 : dy (torch's
 *                                        threshold_backward: NaN x passes dy)
 *   gelu: y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *         dy/dx = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi) */
#ifndef ATTN_ACTIVATION_H
#define ATTN_ACTIVATION_H

#include <math.h>

static inline float attn_relu_f(float x)
{
    return x < 0.0f ? 0.0f : x;
}

/* dy * relu'(x) */
static inline float attn_relu_grad(float x, float dy)
{
    return x <= 0.0f ? 0.0f : dy;
}

static inline float attn_gelu_f(float x)
{
    return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2));
}

static inline float attn_gelu_df(float x)
{
    float phi = expf(-0.5f * x * x) * (float)(0.5 * M_2_SQRTPI * M_SQRT1_2); /* 1/sqrt(2 pi) */
    return 0.5f * (1.0f + erff(x * (float)M_SQRT1_2)) + x * phi;
}

#endif
