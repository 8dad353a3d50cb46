/* Fused scaled dot-product attention (FlashAttention-2 schedule on the CPU). Math in
 * attention_internal.h. Tiles are kept transposed, queries along the vector lanes: S^T (keys, queries), so
 * the online softmax's per-query max and sum are lane-wise vector operations, and every product
 * is an attn__tile_gemm on operands read in place (only Q^T and dO^T are transposed, once).
 * Forward: one task per (b, h, query block of SDPA_BR rows); key blocks of SDPA_BC columns
 * stream through an online softmax (running max m and sum l per query, the output accumulator
 * rescaled when m grows); key blocks that causal, valid_lens, the window or the mask callbacks
 * (mask_block, mask_mod) hide from every query of the block are skipped. Backward: one task per
 * (b, h); key blocks outermost so dK_j and dV_j stay in cache, P recomputed from the saved row
 * statistics. Extra memory: a few tiles per thread in the
 * forward, Q^T and dO^T of one head per thread in the backward. */
#include "dispatch_internal.h"     /* built once per level (attn_cpu_isa) */
#include "../core/core_internal.h" /* attn__thread_num */
#include "attention_fused_internal.h"
#include "kernels_internal.h"
#include "simd_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* floats of a tile of bytes (SDPA_BC, SDPA_BR): the mask callbacks' keep flags */
enum {
    KEEP_FLOATS = SDPA_BC * SDPA_BR / 4
};

static int64_t round_up(int64_t n, int64_t to)
{
    return (n + to - 1) / to * to;
}

int64_t sdpa_fused_scratch_floats(const sdpa_problem *p, int threads)
{
    /* per thread: forward BR (D + BC + Dv + 2) + BC BR / 4, backward (Lq' + 16) (D + Dv) + 3 Lq' +
     * 5 BC BR + BC BR / 4 (BC BR / 4: the keep flags' bytes) with Lq' = Lq rounded up to BR (at
     * least the backward's head_ld and its Lq rounded up to vectors); with bf16 the pair words (one float each) of forward_block's and backward_head's
     * operands besides. -1 when the size overflows (huge Lq or D with no elements): the caller
     * reports it */
    if (p->d < 0 || p->dv < 0 || p->lq < 0 || p->lk < 0 || threads < 0) return -1;
    const unsigned __int128 D = (uint64_t)p->d, Dv = (uint64_t)p->dv, BR = SDPA_BR, BC = SDPA_BC;
    const unsigned __int128 lqp = ((uint64_t)p->lq + SDPA_BR - 1) / SDPA_BR * SDPA_BR;
    const unsigned __int128 hD = (D + 1) / 2, hDv = (Dv + 1) / 2;
    unsigned __int128 fwd = BR * (D + BC + Dv + 2) + KEEP_FLOATS;
    unsigned __int128 bwd = (lqp + 16) * (D + Dv) + 3 * lqp + 5 * BC * BR + KEEP_FLOATS;
    if (p->bf16) {
        const unsigned __int128 lk = (uint64_t)p->lk;
        fwd += hD * BR + BC / 2 * Dv + BC / 2 * BR + 2 + lk * hD + (lk + 1) / 2 * Dv;
        if (p->sums == SDPA_SUMS_AMX)
            fwd += (lk + 1) / 2 * Dv + BC / 2 * Dv; /* V's pairs by its columns (forward_block) */
        bwd += (hD + hDv) * (lqp + 16) + (lqp / 2) * (D + Dv) + BC * hD + BC / 2 * D + BC * hDv + BC * BR + BC / 2 * BR;
    }
    const unsigned __int128 total = (unsigned __int128)(uint64_t)threads * (fwd > bwd ? fwd : bwd);
    return total > INT64_MAX ? -1 : (int64_t)total;
}

/* The visible keys of rows [i0, i0 + rows): every row's lie in [begin_min, end_max) (the rows
 * that see some key); tiles inside [begin_max, end_min) need no key-range masking for any row,
 * which a row that sees no key leaves empty (its begin >= end). */
typedef struct key_range {
    int64_t begin_min, begin_max, end_min, end_max;
} key_range;

static key_range block_keys(const sdpa_problem *p, int64_t b, int64_t i0, int64_t rows)
{
    key_range k = {p->lk, 0, p->lk, 0};
    for (int64_t r = 0; r < rows; r++) {
        const int64_t begin = sdpa_key_begin(p, i0 + r), end = sdpa_key_end(p, b, i0 + r);
        k.begin_max = begin > k.begin_max ? begin : k.begin_max, k.end_min = end < k.end_min ? end : k.end_min;
        if (begin >= end) continue; /* nothing visible: it widens no loop range */
        k.begin_min = begin < k.begin_min ? begin : k.begin_min, k.end_max = end > k.end_max ? end : k.end_max;
    }
    if (k.end_max == 0) k.begin_min = 0; /* nothing visible: an empty range */
    return k;
}

/* Whether a tile of keys [j0, j0 + cols) needs its key range masked for these rows */
static bool tile_crosses_range(const key_range *k, int64_t j0, int64_t cols)
{
    return j0 < k->begin_max || j0 + cols > k->end_min;
}

/* The masks of a transposed tile st (cols, qw) of rows [i0, i0 + rows), keys [j0, j0 + cols):
 * sdpa_mask_tile where there are elementwise masks or biases; the key range alone (causal, valid
 * lengths, the window: most of a local window's tiles cross it) in vectors, each lane's range
 * compared with the key (exact in float below 2^24 keys) */
static void mask_tiles(float *st, int64_t qw, const sdpa_problem *p, const key_range *k, int64_t b, int64_t h,
                       int64_t i0, int64_t rows, int64_t j0, int64_t cols)
{
    if (sdpa_has_elementwise_mask(p)) {
        sdpa_mask_tile(st, 1, qw, p, b, h, i0, rows, j0, cols);
        return;
    }
    if (!tile_crosses_range(k, j0, cols)) return;
    float begin[SDPA_BR], end[SDPA_BR]; /* (qw) each lane's visible keys [begin, end); padding lanes all */
    for (int64_t r = 0; r < qw; r++) {
        begin[r] = r < rows ? (float)sdpa_key_begin(p, i0 + r) : 0.0f;
        end[r] = r < rows ? (float)sdpa_key_end(p, b, i0 + r) : (float)p->lk;
    }
    for (int64_t v = 0; v < qw; v += VF_LANES) {
        const vf lo = vf_load(begin + v), hi = vf_load(end + v);
        for (int64_t c = 0; c < cols; c++)
            vf_store(st + c * qw + v, vf_neginf_outside(vf_load(st + c * qw + v), vf_set1((float)(j0 + c)), lo, hi));
    }
}

/* cap() on transposed tiles st (cols, qw) (attention_internal.h), y = s / softcap (s times
 * 1/softcap where that is a normal float), within 3.5 ulp of softcap tanh(y) for any softcap (3.37
 * at worst, measured at softcaps 1e-30 to FLT_MAX; the reference takes libm's tanh in double):
 *   |y| < 0.55: softcap tanh(y) = s (1 + z P(z)), z = y^2, P the degree-4 polynomial fitted here to
 *     (tanh(y) / y - 1) / z on [0, 0.3025] (0.75 ulp; exact in s where y is tiny: a huge softcap
 *     gives s back);
 *   else tanh|y| = 1 - r, r = 2e / (1 + e) with e = exp(-2 |y|) <= 1/3 (no cancellation), s's sign,
 *     and 1 - t^2 = r (2 - r) (no cancellation near |t| = 1).
 * A vector whose every |y| is below 0.55 (softcap well above the scores, the usual case) takes the
 * polynomial alone. A score of -inf (score_mod hid the pair) stays -inf. slope (cols, qw), when not
 * NULL, receives 1 - t^2. */
static void softcap_tiles(float *st, float *slope, int64_t qw, int64_t cols, float softcap)
{
    const vf cap = vf_set1(softcap), one = vf_set1(1.0f), two = vf_set1(2.0f), small = vf_set1(0.55f);
    const bool recip = softcap <= 1.0f / FLT_MIN; /* 1/softcap a normal float: a product for the division */
    const vf inv = vf_set1(1.0f / softcap);
    for (int64_t i = 0; i < cols * qw; i += VF_LANES) {
        const vf x = vf_load(st + i), y = recip ? vf_mul(x, inv) : vf_div(x, cap), ay = vf_abs(y), z = vf_mul(y, y);
        vf p = vf_set1(-6.272607483e-03f);
        p = vf_fma(p, z, vf_set1(2.107025310e-02f));
        p = vf_fma(p, z, vf_set1(-5.385186523e-02f));
        p = vf_fma(p, z, vf_set1(1.333258003e-01f));
        p = vf_fma(p, z, vf_set1(-3.333331645e-01f));
        const vf zp = vf_mul(z, p), t_small = vf_fma(y, zp, y), capped_small = vf_fma(x, zp, x);
        const vf slope_small = vf_sub(one, vf_mul(t_small, t_small));
        if (vf_all_lt(ay, small)) { /* the usual case, scores well inside the cap: no exp */
            vf_store(st + i, capped_small);
            if (slope) vf_store(slope + i, slope_small);
            continue;
        }
        const vf e = vf_exp(vf_mul(ay, vf_set1(-2.0f))), r = vf_div(vf_mul(two, e), vf_add(one, e));
        const vf capped = vf_select_lt(capped_small, vf_mul(cap, vf_copysign(vf_sub(one, r), x)), ay, small);
        vf_store(st + i, vf_select_lt(x, capped, x, vf_set1(-FLT_MAX))); /* -inf (hidden by score_mod) stays */
        if (slope) vf_store(slope + i, vf_select_lt(slope_small, vf_mul(r, vf_sub(two, r)), ay, small));
    }
}

/* What the mask callbacks make of a tile */
enum tile_mods {
    TILE_SKIP,     /* they hide every pair (mask_block's EMPTY, or mask_mod false everywhere) */
    TILE_MASK,     /* mask_mod decides pairs: keep holds them, hide_unkept after the other masks */
    TILE_KEEP_ALL, /* they hide none (mask_block's FULL, or no mask_mod) */
};

/* The mask callbacks on the tile of rows [i0, i0 + rows), keys [j0, j0 + cols) of (b, h), a block of
 * mask_block's grid. keep (cols, qw) receives 1 where the key range and the callbacks keep the pair, 0
 * elsewhere (and on the padding lanes), when mask_mod decides pairs or score_mod needs it. */
static enum tile_mods mods_tile(uint8_t *keep, int64_t qw, const sdpa_problem *p, int64_t b, int64_t h, int64_t i0,
                                int64_t rows, int64_t j0, int64_t cols)
{
    const int block = sdpa_mask_block(p, b, h, i0, j0);
    if (block == ATTN_BLOCK_EMPTY) return TILE_SKIP;
    const bool masking = block == ATTN_BLOCK_PARTIAL && p->mods.mask_mod;
    if (!masking && !p->mods.score_mod) return TILE_KEEP_ALL;
    memset(keep, 0, (size_t)(cols * qw));
    int64_t kept = 0;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t begin = sdpa_key_begin(p, i0 + r), end = sdpa_key_end(p, b, i0 + r);
        for (int64_t j = begin > j0 ? begin : j0; j < end && j < j0 + cols; j++) {
            const bool k = !masking || sdpa_mods_keep(p, block, b, h, i0 + r, j);
            keep[(j - j0) * qw + r] = k;
            kept += k;
        }
    }
    return kept == 0 ? TILE_SKIP : masking ? TILE_MASK : TILE_KEEP_ALL;
}

/* score_mod on the kept scores of st (cols, qw) (mods_tile); grad (cols, qw), when not NULL,
 * receives score_mod_grad at the same scores there and 0 elsewhere */
static void score_mod_tiles(float *st, float *grad, const uint8_t *keep, int64_t qw, const sdpa_problem *p, int64_t b,
                            int64_t h, int64_t i0, int64_t j0, int64_t cols)
{
    const attn_score_mods *m = &p->mods;
    for (int64_t c = 0; c < cols; c++)
        for (int64_t r = 0; r < qw; r++) {
            float *x = st + c * qw + r;
            const bool k = keep[c * qw + r];
            if (grad)
                grad[c * qw + r] = k ? m->score_mod_grad(*x, b + p->mods_batch, h, i0 + r, j0 + c, m->user) : 0.0f;
            if (k) *x = m->score_mod(*x, b + p->mods_batch, h, i0 + r, j0 + c, m->user);
        }
}

/* -inf at the n scores of st that keep (the same layout) does not keep */
static void hide_unkept(float *st, const uint8_t *keep, int64_t n)
{
    for (int64_t e = 0; e < n; e++)
        if (!keep[e]) st[e] = -INFINITY;
}

/* The scaled scores of tile st (cols, qw) through the features in their order (attn.h's
 * attn_score_features): score_mod, softcap, ALiBi and the masks, then the pairs mask_mod hides;
 * mod_slope and cap_slope (cols, qw), when not NULL (the backward), receive score_mod's and
 * softcap's derivatives. Both passes call it, so that they score a pair alike. */
static void features_tile(float *st, float *mod_slope, float *cap_slope, const uint8_t *keep, enum tile_mods tile,
                          const sdpa_problem *p, const key_range *keys, int64_t qw, int64_t b, int64_t h, int64_t i0,
                          int64_t rows, int64_t j0, int64_t cols)
{
    if (p->mods.score_mod) score_mod_tiles(st, mod_slope, keep, qw, p, b, h, i0, j0, cols);
    if (p->softcap > 0.0f) softcap_tiles(st, cap_slope, qw, cols, p->softcap);
    mask_tiles(st, qw, p, keys, b, h, i0, rows, j0, cols);
    if (tile == TILE_MASK) hide_unkept(st, keep, cols * qw);
}

/* Dropout on transposed tiles of qw <= SDPA_BR query lanes (query i0 + r, key j0 + c at
 * [c * qw + r]): dst = src times the keep factors (src may be dst), and `also`, when not NULL,
 * times the same factors in place (the backward's dP, with one draw per element for both). The
 * draws of sdpa_dropout_scale (u < p drops), the seed's hash taken once per tile; those of one
 * key column hashed in a loop of a fixed SDPA_BR count, which -O2 vectorises (the 64-bit
 * multiplies too), and applied a vector at a time: the padding lanes past the block's rows get
 * draws of their own, unused. */
static void dropout_tiles(float *dst, const float *src, float *also, int64_t qw, const sdpa_problem *p, int64_t b,
                          int64_t h, int64_t i0, int64_t j0, int64_t cols)
{
    const uint64_t key = attn_hash64(p->dropout_seed), lk = (uint64_t)p->lk;
    const uint32_t keep_from = (uint32_t)ceilf(p->dropout_p * 16777216.0f); /* u >= p: 24-bit draw >= p 2^24 */
    const float scale = p->dropout_p < 1.0f ? 1.0f / (1.0f - p->dropout_p) : 0.0f;
    const uint64_t row0 = ((uint64_t)b * (uint64_t)p->heads + (uint64_t)h) * (uint64_t)p->lq + (uint64_t)i0;
    float keep[SDPA_BR]; /* (SDPA_BR) 1 / (1 - p) or 0 for each query of one key column */
    for (int64_t c = 0; c < cols; c++) {
        const uint64_t idx0 = row0 * lk + (uint64_t)(j0 + c);
        for (int r = 0; r < SDPA_BR; r++)
            keep[r] = (uint32_t)(attn_hash64((idx0 + (uint64_t)r * lk) ^ key) >> 40) >= keep_from ? scale : 0.0f;
        const int64_t at = c * qw;
        for (int64_t r = 0; r < qw; r += VF_LANES) {
            const vf f = vf_load(keep + r);
            vf_store(dst + at + r, vf_mul(vf_load(src + at + r), f));
            if (also) vf_store(also + at + r, vf_mul(vf_load(also + at + r), f));
        }
    }
}

/* Leading dimension of the backward's Q^T and dO^T (Lq wide): Lq rounded up to a whole number of
 * 64-byte lines, and an odd number of them. Their tiles are read down D rows; with a row length
 * of a power of two (Lq 512, 1024: 2 KiB, 4 KiB) those rows fall in a handful of the L1 cache's
 * sets and evict one another, a 10% slower backward. */
static int64_t head_ld(int64_t lq)
{
    const int64_t lines = (lq + 15) / 16;
    return (lines % 2 ? lines : lines + 1) * 16;
}

/* dst (cols, ld) = src (rows, cols)^T, and dst's columns rows..ld zero. */
static void transpose_padded(float *dst, int64_t ld, const float *src, int64_t rows, int64_t cols)
{
    for (int64_t c = 0; c < cols; c++) {
        float *d = dst + c * ld;
        for (int64_t r = 0; r < rows; r++) d[r] = src[r * cols + c];
        memset(d + rows, 0, (size_t)(ld - rows) * sizeof(float));
    }
}

/* One online-softmax step over a block of cols keys for qw queries: st (cols, qw) scores become
 * exp(s - m_new), and per query m = m_new, l = l alpha + sum, ot (Dv, qw) *= alpha with
 * alpha = exp(m - m_new). With pp, the exponentials go to pp ((cols + 1) / 2, qw) as bf16 pairs of
 * rows (attn__bf16_pack_col_pairs' layout, the odd count's last row paired with 0) instead of st:
 * the bf16 product's operand in the same pass.
 * A query with nothing visible so far keeps m = -inf and gets zeros; a NaN score gives NaN
 * through exp (and so a NaN output, as in PyTorch). */
static void online_softmax(float *st, uint32_t *pp, float *ot, float *m, float *l, int64_t qw, int64_t cols, int64_t dv)
{
    for (int64_t v = 0; v < qw; v += VF_LANES) {
        vf m_old = vf_load(m + v), m_new = m_old;
        for (int64_t c = 0; c < cols; c++) m_new = vf_max(m_new, vf_load(st + c * qw + v));
        vf shift = vf_neginf_to(m_new, vf_set1(0.0f)); /* exp(-inf - 0) = 0 */
        vf alpha = vf_exp(vf_sub(m_old, shift)), sum = vf_set1(0.0f);
        for (int64_t c = 0; c < cols; c += 2) { /* a pair of keys at a time, summed in key order */
            const vf e0 = vf_exp(vf_sub(vf_load(st + c * qw + v), shift));
            sum = vf_add(sum, e0);
            vf e1 = vf_set1(0.0f);
            if (c + 1 < cols) {
                e1 = vf_exp(vf_sub(vf_load(st + (c + 1) * qw + v), shift));
                sum = vf_add(sum, e1);
            }
            if (pp)
                vf_store_bf16_pairs(pp + c / 2 * qw + v, e0, e1);
            else {
                vf_store(st + c * qw + v, e0);
                if (c + 1 < cols) vf_store(st + (c + 1) * qw + v, e1);
            }
        }
        vf_store(l + v, vf_fma(vf_load(l + v), alpha, sum));
        vf_store(m + v, m_new);
        for (int64_t c = 0; c < dv; c++) vf_store(ot + c * qw + v, vf_mul(vf_load(ot + c * qw + v), alpha));
    }
}

/* Where forward_block keeps the head its bf16 K and V hold, in floats from its scratch */
static int64_t forward_packed_at(const sdpa_problem *p)
{
    return SDPA_BR * (p->d + SDPA_BC + p->dv + 2) + KEEP_FLOATS + sdpa_half_up(p->d) * SDPA_BR + SDPA_BC / 2 * p->dv +
           SDPA_BC / 2 * SDPA_BR;
}

/* One query block: rows [i0, i0+rows) of head (b, h), in tiles qw = rows rounded up to whole
 * vectors wide (a short block, as in step-by-step decoding, computes no padding lanes beyond),
 * through products of the kind x. */
static void forward_block(float *out, float *stats, const float *q, const float *k, const float *v, float *scratch,
                          const sdpa_problem *p, const fused_products *x, int64_t b, int64_t h, int64_t i0,
                          int64_t rows)
{
    const int64_t bh = b * p->heads + h, D = p->d, Dv = p->dv, Lk = p->lk;
    const int64_t bhk = b * (p->heads_kv > 0 ? p->heads_kv : p->heads) + sdpa_kv_head(p, h); /* K, V's head */
    const int64_t qw = round_up(rows, VF_LANES), hD = sdpa_half_up(D), hLk = sdpa_half_up(Lk);
    const bool drop = p->dropout_p > 0.0f;
    fused_forward_tiles t = {.qw = qw, .gemm = x->gemm, .qt = scratch, .pairs_from_softmax = p->bf16 && !drop};
    t.st = t.qt + D * SDPA_BR;
    t.ot = t.st + SDPA_BC * SDPA_BR;
    float *m = t.ot + Dv * SDPA_BR;           /* (qw) running max */
    float *l = m + SDPA_BR;                   /* (qw) running sum */
    uint8_t *keep = (uint8_t *)(l + SDPA_BR); /* (BC, qw) the pairs the mask callbacks keep */
    t.qp = (uint32_t *)(l + SDPA_BR + KEEP_FLOATS);
    t.vp = t.qp + hD * SDPA_BR;
    t.pp = t.vp + SDPA_BC / 2 * Dv;
    t.mark = scratch + forward_packed_at(p);
    t.kh = (uint32_t *)(t.mark + 2);
    t.vh = t.kh + Lk * hD;
    t.vt = t.vh + hLk * Dv;
    t.vpt = t.vt + Dv * hLk;
    transpose_padded(t.qt, qw, q + (bh * p->lq + i0) * D, rows, D);
    x->forward_block(&t, p, k, v, bhk);
    memset(t.ot, 0, (size_t)(Dv * qw) * sizeof(float));
    for (int64_t r = 0; r < qw; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    const key_range keys = block_keys(p, b, i0, rows);
    const bool mods = sdpa_mods_on(p);
    /* tiles of keys outside [begin_min, end_max) are hidden from every row, and so are those the
     * mask callbacks hide whole: skipped */
    for (int64_t j0 = keys.begin_min / SDPA_BC * SDPA_BC; j0 < keys.end_max; j0 += SDPA_BC) {
        const int64_t cols = keys.end_max - j0 < SDPA_BC ? keys.end_max - j0 : SDPA_BC;
        const enum tile_mods tile = mods ? mods_tile(keep, qw, p, b, h, i0, rows, j0, cols) : TILE_KEEP_ALL;
        if (tile == TILE_SKIP) continue;
        const float *kj = k + (bhk * Lk + j0) * D, *vj = v + (bhk * Lk + j0) * Dv;
        x->forward_scores(&t, p, kj, j0, cols); /* S^T = scale K_j Q^T */
        features_tile(t.st, NULL, NULL, keep, tile, p, &keys, qw, b, h, i0, rows, j0, cols);
        online_softmax(t.st, t.pairs_from_softmax ? t.pp : NULL, t.ot, m, l, qw, cols, Dv);
        if (drop) dropout_tiles(t.st, t.st, NULL, qw, p, b, h, i0, j0, cols);
        x->forward_values(&t, p, vj, j0, cols); /* O^T += V_j^T P^T */
    }
    for (int64_t r = 0; r < rows; r++) {
        float *o = out + (bh * p->lq + i0 + r) * Dv, *st_r = stats + 2 * (bh * p->lq + i0 + r);
        if (l[r] > 0.0f || isnan(l[r])) { /* NaN in q or k: the row is NaN, as in PyTorch */
            float inv = 1.0f / l[r];
            for (int64_t c = 0; c < Dv; c++) o[c] = t.ot[c * qw + r] * inv;
            st_r[0] = m[r], st_r[1] = inv;
        } else { /* every key masked: output 0, and P = exp(s - inf) = 0 in the backward */
            memset(o, 0, (size_t)Dv * sizeof(float));
            st_r[0] = INFINITY, st_r[1] = 0.0f;
        }
    }
}

void sdpa_forward_fused(float *out, float *stats, const float *q, const float *k, const float *v, float *scratch,
                        const sdpa_problem *p)
{
    const int64_t blocks = (p->lq + SDPA_BR - 1) / SDPA_BR, per_head = p->batch * p->heads;
    const int64_t per_thread = sdpa_fused_scratch_floats(p, 1);
    const fused_products *x = sdpa_fused_products(p);
    if (p->bf16) /* no head's bf16 K and V packed yet in any thread's scratch (forward_block) */
        for (int t = 0; t < p->threads; t++) {
            const int64_t none = -1;
            memcpy(scratch + t * per_thread + forward_packed_at(p), &none, sizeof none);
        }
    /* The blocks of one key/value head run one after another, so its K and V stay in cache, and
     * the query heads that share it (grouped-query attention) take each block in turn; late query
     * blocks see more keys under a causal mask: each head hands them out first. */
    const int64_t group = p->heads_kv > 0 ? p->heads / p->heads_kv : 1;
    /* With bf16 products each thread packs the K and V of every key/value head it works on: with
     * heads enough for every thread, a thread takes all of a head's tasks (one packing per head). */
    const int64_t kv_heads = per_head / group;
    const int chunk = p->bf16 && kv_heads >= 2 * (int64_t)p->threads ? (int)(group * blocks) : 1;
    (void)chunk; /* read by the pragma alone: unused in a build without OpenMP */
#pragma omp parallel for schedule(dynamic, chunk) num_threads(p->threads) if (sdpa_parallel(p))
    for (int64_t t = 0; t < per_head * blocks; t++) {
        const int64_t g = t % group, blk = blocks - 1 - t / group % blocks, bhk = t / group / blocks;
        const int64_t b = bhk / (p->heads / group), h = bhk % (p->heads / group) * group + g;
        int64_t i0 = blk * SDPA_BR, rows = p->lq - i0 < SDPA_BR ? p->lq - i0 : SDPA_BR;
        forward_block(out, stats, q, k, v, scratch + attn__thread_num() * per_thread, p, x, b, h, i0, rows);
    }
}

/* st (cols, qw) scores become P^T = exp(S^T - m) / l, as exp(S^T - m) times 1/l (0 where m = +inf
 * and 1/l = 0: a fully masked query). S - m is exact near the max, where P is large, and the
 * product rounds once, as the forward's normalisation: exp((S - m) - log l) would carry log l's
 * rounding, |log l| 2^-24 relative on every P of the row (5 times float32's 2^-24 at l = 239). */
static void probabilities(float *st, int64_t qw, const float *m, const float *inv_l, int64_t cols)
{
    for (int64_t v = 0; v < qw; v += VF_LANES) {
        vf max = vf_load(m + v), inv = vf_load(inv_l + v);
        for (int64_t c = 0; c < cols; c++)
            vf_store(st + c * qw + v, vf_mul(vf_exp(vf_sub(vf_load(st + c * qw + v), max)), inv));
    }
}

/* dsum (qw) = rowsum(P * dP) over a tile of cols keys that holds every key of its queries: D
 * from the very P and dP that dS = P (dP - D) uses, so each row of dS sums to 0 up to one
 * rounding (rowsum(dO * O) differs from it by the roundings of O and dP, which dQ and dK then
 * carry times the keys' and queries' common part) */
static void tile_rowsum(float *dsum, const float *pt, const float *dpt, int64_t qw, int64_t cols)
{
    for (int64_t v = 0; v < qw; v += VF_LANES) {
        vf acc = vf_set1(0.0f);
        for (int64_t c = 0; c < cols; c++) acc = vf_fma(vf_load(pt + c * qw + v), vf_load(dpt + c * qw + v), acc);
        vf_store(dsum + v, acc);
    }
}

/* dpt (cols, qw): dP^T becomes dS^T = P^T * (dP^T - D) */
static void score_gradient(float *dpt, const float *pt, int64_t qw, const float *dsum, int64_t cols)
{
    for (int64_t v = 0; v < qw; v += VF_LANES) {
        vf d = vf_load(dsum + v);
        for (int64_t c = 0; c < cols; c++) {
            float *g = dpt + c * qw + v;
            vf_store(g, vf_mul(vf_load(pt + c * qw + v), vf_sub(vf_load(g), d)));
        }
    }
}

/* Backward of head (b, h), through products of the kind x. */
static void backward_head(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                          const float *v, const float *out, const float *stats, float *scratch, const sdpa_problem *p,
                          const fused_products *x, int64_t b, int64_t h)
{
    const int64_t bh = b * p->heads + h, D = p->d, Dv = p->dv, Lq = p->lq, Lk = p->lk;
    const int64_t bhk = b * (p->heads_kv > 0 ? p->heads_kv : p->heads) + sdpa_kv_head(p, h); /* K, V's head */
    const int64_t Lqp = round_up(Lq, VF_LANES), ld = head_ld(Lq), hD = sdpa_half_up(D), hDv = sdpa_half_up(Dv);
    fused_backward_tiles t = {.ld = ld, .gemm = x->gemm, .qt = scratch};
    t.dot = t.qt + D * ld;
    float *m = t.dot + Dv * ld; /* (Lq') row max of S, +inf past Lq (Lq' = Lq rounded up to vectors) */
    float *inv_l = m + Lqp;     /* (Lq') 1 / sum exp(S - m), 0 past Lq */
    float *dsum = inv_l + Lqp;  /* (Lq') D = rowsum(dO * O), 0 past Lq */
    t.st = dsum + Lqp;          /* qw = rows rounded up to vectors */
    t.dpt = t.st + SDPA_BC * SDPA_BR;
    float *pd = t.dpt + SDPA_BC * SDPA_BR;                      /* (BC, qw) dropout(P)^T */
    float *cap_slope = pd + SDPA_BC * SDPA_BR;                  /* (BC, qw) cap'(s) = 1 - tanh^2 (softcap) */
    float *mod_slope = cap_slope + SDPA_BC * SDPA_BR;           /* (BC, qw) mod'(s) (score_mod_grad) */
    uint8_t *keep = (uint8_t *)(mod_slope + SDPA_BC * SDPA_BR); /* (BC, qw) the pairs the mask callbacks keep */
    t.qtp = (uint32_t *)(mod_slope + SDPA_BC * SDPA_BR + KEEP_FLOATS);
    t.dotp = t.qtp + hD * ld;
    t.qc = t.dotp + hDv * ld;
    t.doc = t.qc + sdpa_half_up(Lq) * D;
    t.kr = t.doc + sdpa_half_up(Lq) * Dv;
    t.kc = t.kr + SDPA_BC * hD;
    t.vr = t.kc + SDPA_BC / 2 * D;
    t.pr = t.vr + SDPA_BC * hDv;
    t.dsr = t.pr + SDPA_BC * SDPA_BR / 2;
    t.dsc = t.dsr + SDPA_BC * SDPA_BR / 2;
    transpose_padded(t.qt, ld, q + bh * Lq * D, Lq, D);
    transpose_padded(t.dot, ld, dout + bh * Lq * Dv, Lq, Dv);
    x->backward_head(&t, p, q, dout, bh);
    const bool one_key_block = Lk <= SDPA_BC; /* D then comes from the tile (tile_rowsum) */
    for (int64_t i = 0; i < Lqp; i++) {
        m[i] = i < Lq ? stats[2 * (bh * Lq + i)] : INFINITY;
        inv_l[i] = i < Lq ? stats[2 * (bh * Lq + i) + 1] : 0.0f;
        double acc = 0.0;
        for (int64_t c = 0; !one_key_block && i < Lq && c < Dv; c++)
            acc += (double)out[(bh * Lq + i) * Dv + c] * dout[(bh * Lq + i) * Dv + c];
        dsum[i] = (float)acc;
    }
    const bool drop = p->dropout_p > 0.0f, mods = sdpa_mods_on(p);
    for (int64_t j0 = 0; j0 < Lk; j0 += SDPA_BC) {
        fused_tile at = {.j0 = j0, .cols = Lk - j0 < SDPA_BC ? Lk - j0 : SDPA_BC};
        at.kj = k + (bhk * Lk + j0) * D, at.vj = v + (bhk * Lk + j0) * Dv;
        at.dkj = dk + (bhk * Lk + j0) * D, at.dvj = dv + (bhk * Lk + j0) * Dv;
        x->backward_keys(&t, p, &at);
        int64_t first, last; /* the queries that can see these keys */
        sdpa_query_range(p, j0, at.cols, &first, &last);
        for (int64_t i0 = first / SDPA_BR * SDPA_BR; i0 <= last; i0 += SDPA_BR) {
            const int64_t rows = Lq - i0 < SDPA_BR ? Lq - i0 : SDPA_BR, qw = round_up(rows, VF_LANES), cols = at.cols;
            const key_range keys = block_keys(p, b, i0, rows);
            if (keys.end_max <= j0 || keys.begin_min >= j0 + cols) continue; /* hidden from every row */
            const enum tile_mods tile = mods ? mods_tile(keep, qw, p, b, h, i0, rows, j0, cols) : TILE_KEEP_ALL;
            if (tile == TILE_SKIP) continue; /* or by the callbacks */
            at.i0 = i0, at.rows = rows, at.qw = qw;
            at.qi = q + (bh * Lq + i0) * D, at.doi = dout + (bh * Lq + i0) * Dv, at.dqi = dq + (bh * Lq + i0) * D;
            x->backward_scores(&t, p, &at); /* S^T = scale K_j Q_i^T */
            features_tile(t.st, mod_slope, cap_slope, keep, tile, p, &keys, qw, b, h, i0, rows, j0, cols);
            probabilities(t.st, qw, m + i0, inv_l + i0, cols);
            x->backward_probs_grad(&t, p, &at); /* dP^T = V_j dO_i^T */
            /* under dropout dropout(P)^T and dropout'(dP)^T in one pass */
            if (drop) dropout_tiles(pd, t.st, t.dpt, qw, p, b, h, i0, j0, cols);
            x->backward_values_grad(&t, p, &at, drop ? pd : t.st); /* dV_j += dropout(P)^T dO_i */
            if (one_key_block) tile_rowsum(dsum + i0, t.st, t.dpt, qw, cols);
            score_gradient(t.dpt, t.st, qw, dsum + i0, cols);
            if (p->softcap > 0.0f) /* through the cap: dS *= 1 - tanh^2 */
                for (int64_t e = 0; e < cols * qw; e += VF_LANES)
                    vf_store(t.dpt + e, vf_mul(vf_load(t.dpt + e), vf_load(cap_slope + e)));
            if (p->mods.score_mod) /* through score_mod: dS *= score_mod_grad */
                for (int64_t e = 0; e < cols * qw; e += VF_LANES)
                    vf_store(t.dpt + e, vf_mul(vf_load(t.dpt + e), vf_load(mod_slope + e)));
            x->backward_qk_grad(&t, p, &at); /* dQ_i += scale dS K_j;  dK_j += scale dS^T Q_i */
        }
    }
}

void sdpa_backward_fused(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                         const float *v, const float *out, const float *stats, float *scratch, const sdpa_problem *p)
{
    /* one task per key/value head: the query heads that share it add into its dK and dV in turn */
    const int64_t per_thread = sdpa_fused_scratch_floats(p, 1), group = p->heads_kv > 0 ? p->heads / p->heads_kv : 1;
    const fused_products *x = sdpa_fused_products(p);
#pragma omp parallel for schedule(dynamic, 1) num_threads(p->threads) if (sdpa_parallel(p))
    for (int64_t bhk = 0; bhk < p->batch * (p->heads / group); bhk++)
        for (int64_t g = 0; g < group; g++)
            backward_head(dq, dk, dv, dout, q, k, v, out, stats, scratch + attn__thread_num() * per_thread, p, x,
                          bhk / (p->heads / group), bhk % (p->heads / group) * group + g);
}
