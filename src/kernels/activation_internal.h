/* Private: the scalar activations shared by the unary ops (ops/unary.c) and the linear layer's
 * fused epilogue (ops/linear.c), so that both compute the same bits:
 *   relu: y = max(x, 0), NaN stays NaN   derivative: a select, x <= 0 ? 0 : dy (torch's
 *                                        threshold_backward: NaN x passes dy)
 *   gelu: y = x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
 *         dy/dx = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi)
 *   gelu_tanh (GPT-2's, torch's approximate='tanh'): y = x (1 + tanh(u)) / 2,
 *         u = sqrt(2 / pi) (x + 0.044715 x^3)
 *         dy/dx = (1 + t) / 2 + x (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2) / 2,  t = tanh(u)
 *   silu (Llama's SwiGLU gate): y = x sigmoid(x),  dy/dx = s (1 + x (1 - s)),  s = sigmoid(x) */
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

#define ATTN_GELU_TANH_C 0.044715f
#define ATTN_SQRT_2_OVER_PI 0.7978845608028654f

static inline float attn_gelu_tanh_f(float x)
{
    return 0.5f * x * (1.0f + tanhf(ATTN_SQRT_2_OVER_PI * (x + ATTN_GELU_TANH_C * x * x * x)));
}

static inline float attn_gelu_tanh_df(float x)
{
    float t = tanhf(ATTN_SQRT_2_OVER_PI * (x + ATTN_GELU_TANH_C * x * x * x));
    return 0.5f * (1.0f + t) +
           0.5f * x * (1.0f - t * t) * ATTN_SQRT_2_OVER_PI * (1.0f + 3.0f * ATTN_GELU_TANH_C * x * x);
}

/* sigmoid through exp of a non-positive argument only: no overflow for large |x| */
static inline float attn_sigmoid_f(float x)
{
    if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

static inline float attn_silu_f(float x)
{
    return x * attn_sigmoid_f(x);
}

static inline float attn_silu_df(float x)
{
    float s = attn_sigmoid_f(x);
    return s * (1.0f + x * (1.0f - s));
}

#endif
