/* Masks, biases, soft-capping, the mask callbacks' blocks and dropout shared by the reference and fused attention kernels, so
 * both see exactly the same visible keys, the same scores and the same dropout mask. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "attention_internal.h"
#include "kernels_internal.h"

#include <math.h>

/* x clamped to [lo, hi]: the window's arithmetic runs in 128 bits, where bounds up to INT64_MAX
 * and lengths up to INT64_MAX cannot overflow */
static int64_t clamp_wide(__int128 x, int64_t lo, int64_t hi)
{
    return x < lo ? lo : x > hi ? hi : (int64_t)x;
}

int64_t sdpa_key_begin(const sdpa_problem *p, int64_t i)
{
    if (!p->windowed || p->window_left < 0) return 0;
    return clamp_wide((__int128)i + p->lk - p->lq - p->window_left, 0, p->lk);
}

int64_t sdpa_key_end(const sdpa_problem *p, int64_t b, int64_t i)
{
    int64_t end = p->lk;
    const sdpa_masks *m = &p->masks;
    if (m->causal && i + 1 < end) end = i + 1;
    if (p->windowed && p->window_right >= 0)
        end = clamp_wide((__int128)i + p->lk - p->lq + p->window_right + 1, 0, end);
    if (m->valid_lens) {
        int64_t len = m->valid_lens_per_query ? m->valid_lens[b * p->lq + i] : m->valid_lens[b];
        if (len < 0) len = 0;
        if (len < end) end = len;
    }
    return end;
}

void sdpa_query_range(const sdpa_problem *p, int64_t j0, int64_t cols, int64_t *first, int64_t *last)
{
    /* causal: i >= j0; the window: i from j0 - (Lk - Lq) - right to j0 + cols - 1 - (Lk - Lq) + left */
    const __int128 shift = (__int128)p->lk - p->lq;
    *first = p->masks.causal ? j0 : 0, *last = p->lq - 1;
    if (p->windowed && p->window_right >= 0) *first = clamp_wide(j0 - shift - p->window_right, *first, p->lq);
    if (p->windowed && p->window_left >= 0) *last = clamp_wide(j0 + cols - 1 - shift + p->window_left, -1, *last);
}

bool sdpa_has_elementwise_mask(const sdpa_problem *p)
{
    return p->masks.key_padding || p->masks.attend || p->masks.blocked || p->masks.additive || p->alibi;
}

void sdpa_softcap_tile(float *s, float *slope, int64_t query_stride, int64_t key_stride, const sdpa_problem *p,
                       int64_t rows, int64_t cols)
{
    if (p->softcap <= 0.0f) return;
    const double cap = p->softcap;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            float *x = s + r * query_stride + c * key_stride;
            if (*x == -INFINITY) { /* score_mod hid the pair: it stays hidden */
                if (slope) slope[r * query_stride + c * key_stride] = 0.0f;
                continue;
            }
            const double t = tanh((double)*x / cap); /* libm's, in double: the reference */
            *x = (float)(cap * t);
            if (slope) slope[r * query_stride + c * key_stride] = (float)(1.0 - t * t);
        }
}

void sdpa_mask_tile(float *s, int64_t query_stride, int64_t key_stride, const sdpa_problem *p, int64_t b, int64_t h,
                    int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    const sdpa_masks *m = &p->masks;
    const float slope = p->alibi ? p->alibi[b * p->alibi_batch_stride + h] : 0.0f;
    for (int64_t r = 0; r < rows; r++) {
        int64_t i = i0 + r;
        float *row = s + r * query_stride;
        int64_t end = sdpa_key_end(p, b, i) - j0;  /* cols at or after end are masked */
        int64_t begin = sdpa_key_begin(p, i) - j0; /* and cols before begin */
        if (begin > cols) begin = cols;
        for (int64_t c = 0; c < begin; c++) row[c * key_stride] = -INFINITY;
        for (int64_t c = end < 0 ? 0 : end; c < cols; c++) row[c * key_stride] = -INFINITY;
        if (!sdpa_has_elementwise_mask(p)) continue;
        int64_t visible = end < cols ? (end < 0 ? 0 : end) : cols;
        if (p->alibi) /* -slope |i + Lk - Lq - j|, on the visible keys (masked ones stay -inf) */
            for (int64_t c = begin > 0 ? begin : 0; c < visible; c++) {
                const int64_t dist = i + p->lk - p->lq - (j0 + c);
                row[c * key_stride] -= slope * (float)(dist < 0 ? -dist : dist);
            }
        if (m->key_padding) {
            const uint8_t *pad = m->key_padding + b * p->lk + j0;
            for (int64_t c = 0; c < visible; c++)
                if (pad[c]) row[c * key_stride] = -INFINITY;
        }
        if (m->attend) {
            const int64_t *st = m->attend_stride;
            const uint8_t *a = m->attend + b * st[0] + h * st[1] + i * st[2] + j0 * st[3];
            for (int64_t c = 0; c < visible; c++)
                if (!a[c * st[3]]) row[c * key_stride] = -INFINITY;
        }
        if (m->blocked) {
            const int64_t *st = m->blocked_stride;
            const uint8_t *a = m->blocked + b * st[0] + h * st[1] + i * st[2] + j0 * st[3];
            for (int64_t c = 0; c < visible; c++)
                if (a[c * st[3]]) row[c * key_stride] = -INFINITY;
        }
        if (m->additive) {
            const int64_t *st = m->additive_stride;
            const float *a = m->additive + b * st[0] + h * st[1] + i * st[2] + j0 * st[3];
            for (int64_t c = 0; c < visible; c++) row[c * key_stride] += a[c * st[3]];
        }
    }
}

int sdpa_mask_block(const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j)
{
    const attn_score_mods *m = &p->mods;
    if (!m->mask_block) return ATTN_BLOCK_PARTIAL;
    const int64_t i0 = i / ATTN_MASK_BLOCK_Q * ATTN_MASK_BLOCK_Q, j0 = j / ATTN_MASK_BLOCK_KV * ATTN_MASK_BLOCK_KV;
    const int64_t i1 = p->lq - i0 < ATTN_MASK_BLOCK_Q ? p->lq : i0 + ATTN_MASK_BLOCK_Q;
    const int64_t j1 = p->lk - j0 < ATTN_MASK_BLOCK_KV ? p->lk : j0 + ATTN_MASK_BLOCK_KV;
    const int kind = m->mask_block(b + p->mods_batch, h, i0, i1, j0, j1, m->user);
    return kind == ATTN_BLOCK_EMPTY || kind == ATTN_BLOCK_FULL ? kind : ATTN_BLOCK_PARTIAL;
}

bool sdpa_mods_keep(const sdpa_problem *p, int block, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (block != ATTN_BLOCK_PARTIAL) return block == ATTN_BLOCK_FULL;
    return !p->mods.mask_mod || p->mods.mask_mod(b + p->mods_batch, h, i, j, p->mods.user);
}

bool sdpa_parallel(const sdpa_problem *p)
{
    return (double)p->batch * (double)p->heads * (double)p->lq * (double)p->lk * (double)(p->d + p->dv) >= 1e6;
}

float sdpa_dropout_scale(const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j)
{
    if (p->dropout_p <= 0.0f) return 1.0f;
    if (p->dropout_p >= 1.0f) return 0.0f;
    uint64_t idx =
        (((uint64_t)b * (uint64_t)p->heads + (uint64_t)h) * (uint64_t)p->lq + (uint64_t)i) * (uint64_t)p->lk +
        (uint64_t)j;
    float u = (float)(attn_hash64(idx ^ attn_hash64(p->dropout_seed)) >> 40) * (1.0f / 16777216.0f);
    return u < p->dropout_p ? 0.0f : 1.0f / (1.0f - p->dropout_p);
}
