/* Dropout keep masks from a counter-based generator: element i of a mask drawn with key k is
 * kept when the top 24 bits of attn_hash64(i ^ attn_hash64(k)), read as u in [0, 1), are >= p:
 * a pure function of (key, i), so any number of threads draws the same mask, and the fused
 * attention draws its (b, h, i, j) masks the same way (attention_mask.c). The fast kernel hashes
 * blocks of DROP_BLOCK indices in a fixed-count loop (-O2 vectorises it) on every thread. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"

#include <math.h>

#define DROP_BLOCK 64

/* keep iff the 24-bit draw k satisfies k / 2^24 >= p, i.e. k >= ceil(p 2^24) (exact in float) */
static uint32_t keep_threshold(float p)
{
    return (uint32_t)ceilf(p * 16777216.0f);
}

void attn__dropout_mask_ref(uint8_t *keep, int64_t n, uint64_t key, float p)
{
    const uint64_t mixed = attn_hash64(key);
    for (int64_t i = 0; i < n; i++) {
        float u = (float)(attn_hash64((uint64_t)i ^ mixed) >> 40) * (1.0f / 16777216.0f);
        keep[i] = u >= p;
    }
}

void attn__dropout_mask(uint8_t *keep, int64_t n, uint64_t key, float p, int threads)
{
    const uint64_t mixed = attn_hash64(key);
    const uint32_t thr = keep_threshold(p);
    const int64_t blocks = n / DROP_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        uint8_t *kb = keep + blk * DROP_BLOCK;
        const uint64_t i0 = (uint64_t)(blk * DROP_BLOCK);
        for (int k = 0; k < DROP_BLOCK; k++) kb[k] = (uint32_t)(attn_hash64((i0 + (uint64_t)k) ^ mixed) >> 40) >= thr;
    }
    for (int64_t i = blocks * DROP_BLOCK; i < n; i++)
        keep[i] = (uint32_t)(attn_hash64((uint64_t)i ^ mixed) >> 40) >= thr;
}
