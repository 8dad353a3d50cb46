/* Seeded random numbers with explicit state: PCG32 (XSH RR, 64-bit state), Box-Muller normals.
 * The same seed gives the same sequence on every platform. */
#include "core_internal.h"

#include <math.h>

#define PCG_MULT 6364136223846793005ULL

attn_status attn_rng_seed(attn_rng *rng, uint64_t seed)
{
    if (!rng) return attn__null_arg("attn_rng_seed");
    rng->state = 0;
    rng->inc = (seed << 1u) | 1u;
    attn_rng_u32(rng);
    rng->state += 0x853c49e6748fea9bULL ^ seed;
    attn_rng_u32(rng);
    rng->has_spare = 0;
    rng->spare = 0.0f;
    return ATTN_OK;
}

uint32_t attn_rng_u32(attn_rng *rng)
{
    if (!rng) {
        attn__null_arg("attn_rng_u32");
        return 0;
    }
    uint64_t old = rng->state;
    rng->state = old * PCG_MULT + rng->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

uint32_t attn_rng_below(attn_rng *rng, uint32_t n)
{
    if (!rng) {
        attn__null_arg("attn_rng_below");
        return 0;
    }
    if (n == 0) return 0;
    uint32_t threshold = -n % n; /* rejection removes the modulo bias */
    for (;;) {
        uint32_t r = attn_rng_u32(rng);
        if (r >= threshold) return r % n;
    }
}

float attn_rng_uniform(attn_rng *rng)
{
    if (!rng) {
        attn__null_arg("attn_rng_uniform");
        return NAN;
    }
    return (float)(attn_rng_u32(rng) >> 8) * (1.0f / 16777216.0f); /* 24 bits: exact in float */
}

float attn_rng_normal(attn_rng *rng)
{
    if (!rng) {
        attn__null_arg("attn_rng_normal");
        return NAN;
    }
    if (rng->has_spare) {
        rng->has_spare = 0;
        return rng->spare;
    }
    double u1, u2;
    do {
        u1 = (attn_rng_u32(rng) + 1.0) / 4294967297.0; /* (0, 1] keeps log finite */
    } while (u1 <= 0.0);
    u2 = attn_rng_u32(rng) / 4294967296.0;
    double r = sqrt(-2.0 * log(u1));
    double th = 2.0 * M_PI * u2;
    rng->spare = (float)(r * sin(th));
    rng->has_spare = 1;
    return (float)(r * cos(th));
}

bool attn_rng_bernoulli(attn_rng *rng, float p)
{
    if (!rng) {
        attn__null_arg("attn_rng_bernoulli");
        return false;
    }
    return attn_rng_uniform(rng) < p;
}

attn_status attn_rng_shuffle(attn_rng *rng, int64_t *items, int64_t n)
{
    if (!rng || (!items && n > 0)) return attn__null_arg("attn_rng_shuffle");
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)attn_rng_below(rng, (uint32_t)(i + 1));
        int64_t t = items[i];
        items[i] = items[j];
        items[j] = t;
    }
    return ATTN_OK;
}
