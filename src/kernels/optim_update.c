/* The optimizers' element updates (kernels_internal.h): torch.optim 1.13's float32 kernels, rounding where
 * they round. torch's vectorised add-with-alpha and addcmul are one fused multiply-add on a CPU
 * capability with FMA (AVX2 and up) and a product and a sum below it (ATen's default
 * capability); FMA() does the same at each of our levels, and nothing else fuses (this file is
 * built with -ffp-contract=off), so the avx2 and avx512 levels give torch's bits on any CPU that
 * runs them (test_optim checks the bits). One formula per optimizer, written once: it is its own
 * reference. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "kernels_internal.h"

#include <math.h>

#ifdef __FMA__
#define FMA(a, b, c) fmaf((a), (b), (c))
#else
#define FMA(a, b, c) ((a) * (b) + (c))
#endif

/* Elements per block of the threads' share, fixed so that the split does not depend on the count */
enum {
    UPDATE_BLOCK = 16384
};

void attn__sgd_update(float *p, float *buf, const float *g, int64_t n, const attn_sgd_consts *k, int threads)
{
    const float wd = k->weight_decay, mom = k->momentum, keep = k->keep, neg_lr = k->neg_lr;
    const bool first = k->first, nesterov = k->nesterov, use_wd = wd != 0.0f;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t i = 0; i < n; i++) {
        float d = use_wd ? FMA(p[i], wd, g[i]) : g[i];
        if (mom != 0.0f) {
            buf[i] = first ? d : FMA(d, keep, buf[i] * mom);
            d = nesterov ? FMA(buf[i], mom, d) : buf[i];
        }
        p[i] = FMA(d, neg_lr, p[i]);
    }
}

/* One Adam update of p[0..n); l2 and adamw are constants where it is inlined, so each variant's
 * loop has no branch and vectorises. */
static inline __attribute__((always_inline)) void adam_block(float *p, const float *g, float *m, float *v, int64_t n,
                                                             const attn_adam_consts *k, bool l2, bool adamw)
{
    for (int64_t i = 0; i < n; i++) {
        float gi = l2 ? FMA(p[i], k->wd, g[i]) : g[i];
        float pi = adamw ? p[i] * k->decay : p[i];
        m[i] = FMA(gi, k->a1, m[i] * k->b1);
        v[i] = FMA(k->a2 * gi, gi, v[i] * k->b2);
        float denom = sqrtf(v[i]) / k->bc2_sqrt + k->eps;
        p[i] = pi + k->neg_step * m[i] / denom;
    }
}

void attn__adam_update(float *p, float *m, float *v, const float *g, int64_t n, const attn_adam_consts *k, int threads)
{
    const bool adamw = k->adamw, l2 = !adamw && k->wd != 0.0f;
    const int64_t blocks = (n + UPDATE_BLOCK - 1) / UPDATE_BLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) if (n > ATTN_PARALLEL_MIN)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const int64_t i0 = blk * UPDATE_BLOCK, len = n - i0 < UPDATE_BLOCK ? n - i0 : UPDATE_BLOCK;
        if (adamw)
            adam_block(p + i0, g + i0, m + i0, v + i0, len, k, false, true);
        else if (l2)
            adam_block(p + i0, g + i0, m + i0, v + i0, len, k, true, false);
        else
            adam_block(p + i0, g + i0, m + i0, v + i0, len, k, false, false);
    }
}
