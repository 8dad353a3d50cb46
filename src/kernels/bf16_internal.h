/* Private: bfloat16 arithmetic as the AVX512_BF16 instructions do it, in portable C: the reference
 * that the bf16 kernels equal bit for bit (Intel SDM, VCVTNEPS2BF16 and VDPBF16PS).
 *   bf16: the upper 16 bits of a float32 (8 significand bits, float32's exponent range);
 *         unit roundoff 2^-8.
 *   convert: round to nearest even; a float32 denormal becomes a zero of its sign (the
 *            instruction treats input denormals as zero), a NaN stays a NaN (quiet bit set).
 *   dot of a pair into a float32 lane: acc += a_odd b_odd, then acc += a_even b_even, each a
 *            fused multiply-add rounded to nearest even, denormal inputs read as zero and denormal
 *            results flushed to zero. (The product of two bf16 values is exact in float32, so
 *            the order of the two additions is what the bits depend on.)
 * A pair is one 32-bit word: the even element in the low half, the odd one in the high half. */
#ifndef ATTN_KERNELS_BF16_H
#define ATTN_KERNELS_BF16_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t attn_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float attn_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* x with a denormal (or zero) turned into a zero of its sign */
static inline float attn_flush_denormal(float x)
{
    uint32_t u = attn_f32_bits(x);
    return (u & 0x7f800000u) == 0 ? attn_f32_from_bits(u & 0x80000000u) : x;
}

/* float32 -> bf16, as VCVTNEPS2BF16 */
static inline uint16_t attn_bf16_from_f32(float x)
{
    uint32_t u = attn_f32_bits(x);
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u);          /* zero, denormal */
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: quiet */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                   /* nearest even; overflows to inf */
}

/* bf16 -> float32, exact; a denormal reads as zero, as the instructions read their inputs */
static inline float attn_f32_from_bf16(uint16_t h)
{
    return attn_flush_denormal(attn_f32_from_bits((uint32_t)h << 16));
}

/* two bf16 values as one pair word: even in the low half */
static inline uint32_t attn_bf16_pair(float even, float odd)
{
    return (uint32_t)attn_bf16_from_f32(even) | (uint32_t)attn_bf16_from_f32(odd) << 16;
}

/* one lane of VDPBF16PS: acc + a.odd b.odd + a.even b.even, in that order */
static inline float attn_dpbf16_lane(float acc, uint32_t a, uint32_t b)
{
    acc = attn_flush_denormal(acc);
    acc = attn_flush_denormal(
        fmaf(attn_f32_from_bf16((uint16_t)(a >> 16)), attn_f32_from_bf16((uint16_t)(b >> 16)), acc));
    return attn_flush_denormal(fmaf(attn_f32_from_bf16((uint16_t)a), attn_f32_from_bf16((uint16_t)b), acc));
}

#endif
