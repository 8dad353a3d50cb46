/* The differential harness of the attention: seeded random draws over attn_sdpa's and
 * attn_sdpa_varlen's whole option space, each run through both kernels (fused and reference),
 * output and every gradient held to a float64 implementation of the definitions
 * (testkit_sdpa.h) by FlashAttention's criterion:
 *     max |kernel - float64| <= 2 max |plain float32 - float64| + u max mag
 * per tensor, where "plain float32" is the same formulas in float32 with every sum in index
 * order or in reverse (the worse of the two), with bf16 product operands where the kernel takes
 * them (MEDIUM on a CPU with attn_bf16_attention; the reference kernel stays float32), and
 * u max mag is one rounding (u = 2^-24, 2^-8 with bf16 operands) of every operation on the
 * result's path, to first order: the floor where the plain composition happens to be exact.
 * A draw covers: padded (4-D and 3-D) and packed sequences; Lq, Lk from 0 to a few hundred with
 * Lq > Lk, Lk = 1 and the tiles' edges (63, 64, 65, 127, 128, 129); head dims 1 to 256 (59, 111,
 * 224 among them); causal, valid lengths (B) and (B, Lq) with zeros and beyond Lk, key padding,
 * attend, blocked and additive masks in every broadcast shape (with -inf), together; windows
 * from (0, 0) to INT64_MAX, ALiBi (H) and (B, H) with negative slopes, softcap over its whole
 * accepted range, GQA and MQA, score_mod (affine, nonlinear, hiding pairs), mask_mod and
 * mask_block, dropout (its mask is a hash of (seed, b, h, i, j): the reference draws it too),
 * the score scale, large and small scores, HIGHEST and MEDIUM, 1 and 2 threads. The kernel level
 * is the process's (ctest runs the suite at every level, ATTN_CPU_ISA).
 * Before them, unless --seed is given: the causes issue 37 named, as draws of their own (rows that see
 * no key, softcap from FLT_MIN to 1e8, windows near INT64_MAX, d 192), and softcaps refused.
 * Usage: test_attention_differential [--draws N] [--seed S] [--verbose]: N draws from seeds S,
 * S + 1, ... (300 from 1 by default); a failure prints its draw and the line that repeats it. */
#include "kernels/kernels_internal.h" /* attn_hash64: the dropout draws */
#include "testkit.h"
#include "testkit_sdpa.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_SEQS = 8,
    MAX_B = 3,
    MAX_H = 6
};

/* A bool or float mask of its own shape, right-aligned against (B, H, Lq, Lk) (3-D: (B, Lq, Lk)) */
typedef struct mask_arg {
    int ndim; /* 0: none */
    int64_t shape[4];
    uint8_t *bits;     /* bool masks */
    float *values;     /* the additive mask */
    int64_t stride[4]; /* over (b, h, i, j), 0 on broadcast dims */
} mask_arg;

typedef struct draw {
    uint64_t seed;
    bool packed, three_d;
    int64_t batch, H, Hkv, D, Dv;
    int64_t lq[MAX_SEQS], lk[MAX_SEQS]; /* padded: [0] for every row */
    bool causal;
    int lens; /* 0 none, 1 (B), 2 (B, Lq) */
    int64_t *lens_data;
    bool key_padding;
    uint8_t *kpad;
    mask_arg attend, blocked, additive;
    bool window;
    int64_t left, right;
    int alibi; /* 0 none, 1 (H), 2 (B, H) */
    float slopes[MAX_SEQS * MAX_H];
    float softcap, scale, q_scale, dropout;
    int score_mod; /* 0 none, 1 affine, 2 nonlinear, 3 hides pairs */
    bool mask_mod, mask_block;
    bool medium;
    int threads;
} draw;

/* ---- the callbacks: the library's (float) and their float64 twins ---- */

static float mod_f32(float s, int64_t b, int64_t h, int64_t i, int64_t j, void *user)
{
    const int kind = *(const int *)user;
    if (kind == 1) return s * (1.0f + 0.25f * (float)h) - 0.05f * (float)(i > j ? i - j : j - i) + 0.1f * (float)b;
    if (kind == 2) return s + 0.5f * sinf(s);
    return (i + 2 * j + b) % 7 == 3 ? -INFINITY : s * 0.75f;
}
static float mod_grad_f32(float s, int64_t b, int64_t h, int64_t i, int64_t j, void *user)
{
    const int kind = *(const int *)user;
    if (kind == 1) return 1.0f + 0.25f * (float)h;
    if (kind == 2) return 1.0f + 0.5f * cosf(s);
    return (i + 2 * j + b) % 7 == 3 ? 0.0f : 0.75f;
}
static double mod_f64(double s, int64_t b, int64_t h, int64_t i, int64_t j, void *user)
{
    const int kind = *(const int *)user;
    if (kind == 1) return s * (1.0 + 0.25 * (double)h) - 0.05 * (double)(i > j ? i - j : j - i) + 0.1 * (double)b;
    if (kind == 2) return s + 0.5 * sin(s);
    return (i + 2 * j + b) % 7 == 3 ? -INFINITY : s * 0.75;
}
static double mod_d1(double s, int64_t b, int64_t h, int64_t i, int64_t j, void *user)
{
    const int kind = *(const int *)user;
    if (kind == 1) return 1.0 + 0.25 * (double)h;
    if (kind == 2) return 1.0 + 0.5 * cos(s);
    return (i + 2 * j + b) % 7 == 3 ? 0.0 : 0.75;
}
static double mod_d2(double s, int64_t b, int64_t h, int64_t i, int64_t j, void *user)
{
    (void)b, (void)h, (void)i, (void)j;
    return *(const int *)user == 2 ? -0.5 * sin(s) : 0.0;
}
static bool keep_f(int64_t b, int64_t h, int64_t i, int64_t j, void *user)
{
    (void)user;
    return (i * 7 + j * 3 + h + 5 * b) % 5 != 0;
}
static int block_f(int64_t b, int64_t h, int64_t i0, int64_t i1, int64_t j0, int64_t j1, void *user)
{
    (void)user, (void)i1, (void)j1;
    const uint64_t x = attn_hash64((uint64_t)(b * 131 + h * 17 + i0 * 3 + j0));
    return (int)(x % 3); /* ATTN_BLOCK_PARTIAL, _EMPTY, _FULL */
}

/* ---- drawing a problem ---- */

static int64_t pick(attn_rng *r, const int64_t *from, int n)
{
    return from[attn_rng_below(r, (uint32_t)n)];
}

static bool chance(attn_rng *r, float p)
{
    return attn_rng_uniform(r) < p;
}

static int64_t length(attn_rng *r, int64_t most)
{
    static const int64_t edges[] = {1, 1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 239, 256};
    const int64_t n = chance(r, 0.5f) ? pick(r, edges, 13) : 1 + attn_rng_below(r, (uint32_t)most);
    return n < most ? n : most;
}

static int64_t window_bound(attn_rng *r)
{
    static const int64_t bounds[] = {
        -1, -1, 0, 0, 1, 2, 5, 17, 64, 130, 300, INT64_MAX, INT64_MAX - 1, 4000000000000000000};
    return pick(r, bounds, 14);
}

/* a mask over the draw's (B, H, Lq, Lk) (3-D: (B, Lq, Lk)): a random broadcast shape */
static void draw_mask(attn_rng *r, mask_arg *m, const draw *d, bool bits)
{
    const int rank = d->three_d ? 3 : 4;
    const int64_t full4[4] = {d->batch, d->H, d->lq[0], d->lk[0]};
    static const int dims3[3] = {0, 2, 3}, dims4[4] = {0, 1, 2, 3};
    const int *dims = d->three_d ? dims3 : dims4;
    m->ndim = 1 + (int)attn_rng_below(r, (uint32_t)rank);
    int64_t n = 1, s = 1;
    memset(m->stride, 0, sizeof m->stride);
    for (int t = m->ndim - 1; t >= 0; t--) { /* dim t of the mask meets dim rank - ndim + t */
        const int dim = dims[rank - m->ndim + t];
        m->shape[t] = chance(r, 0.6f) ? full4[dim] : 1;
        m->stride[dim] = m->shape[t] == 1 ? 0 : s;
        s *= m->shape[t], n *= m->shape[t];
    }
    const float keep = bits ? (chance(r, 0.5f) ? 0.9f : 0.4f) : 0.0f;
    if (bits) {
        m->bits = malloc((size_t)(n ? n : 1));
        for (int64_t e = 0; e < n; e++) m->bits[e] = chance(r, keep);
    } else {
        m->values = malloc(sizeof(float) * (size_t)(n ? n : 1));
        const float size = chance(r, 0.5f) ? 1.0f : 4.0f;
        for (int64_t e = 0; e < n; e++) m->values[e] = chance(r, 0.1f) ? -INFINITY : size * attn_rng_normal(r);
    }
}

static uint8_t mask_bit(const mask_arg *m, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return m->bits[b * m->stride[0] + h * m->stride[1] + i * m->stride[2] + j * m->stride[3]];
}

static double mask_value(const mask_arg *m, int64_t b, int64_t h, int64_t i, int64_t j)
{
    return m->values[b * m->stride[0] + h * m->stride[1] + i * m->stride[2] + j * m->stride[3]];
}

/* the cost of the draw's float64 and float32 passes, in multiply-adds */
static double cost(const draw *d)
{
    double c = 0.0;
    for (int64_t s = 0; s < (d->packed ? d->batch : 1); s++)
        c += (double)(d->packed ? 1 : d->batch) * (double)d->H * (double)d->lq[s] * (double)d->lk[s] *
             (double)(d->D + d->Dv);
    return c;
}

static void make_draw(draw *d, uint64_t seed)
{
    attn_rng r;
    attn_rng_seed(&r, seed);
    memset(d, 0, sizeof *d);
    d->seed = seed;
    d->packed = chance(&r, 0.35f);
    d->three_d = !d->packed && chance(&r, 0.15f);
    static const int64_t heads[] = {1, 1, 2, 3, 4, 6}, dims[] = {1, 3, 8, 16, 32, 59, 64, 111, 128, 160, 192, 224, 256};
    d->H = d->three_d ? 1 : pick(&r, heads, 6);
    int64_t divisors[MAX_H], nd = 0;
    for (int64_t g = 1; g <= d->H; g++)
        if (d->H % g == 0) divisors[nd++] = g;
    d->Hkv = d->three_d || chance(&r, 0.5f) ? d->H : pick(&r, divisors, (int)nd);
    d->D = chance(&r, 0.3f) ? 1 + attn_rng_below(&r, 40) : pick(&r, dims, 13);
    d->Dv = chance(&r, 0.6f) ? d->D : pick(&r, dims, 13);
    d->batch = d->packed ? 1 + attn_rng_below(&r, MAX_SEQS) : 1 + attn_rng_below(&r, MAX_B);
    const int64_t most = d->D > 128 ? 140 : 300;
    for (int64_t s = 0; s < (d->packed ? d->batch : 1); s++) {
        d->lq[s] = d->packed && chance(&r, 0.1f) ? 0 : length(&r, most);
        d->lk[s] = chance(&r, 0.3f)                ? d->lq[s]
                   : chance(&r, 0.1f)              ? 1 /* Lq > Lk: rows before the diagonal see no key */
                   : d->packed && chance(&r, 0.1f) ? 0
                                                   : length(&r, most);
    }
    while (cost(d) > 3e6) /* the float64 pass in tens of milliseconds */
        for (int64_t s = 0; s < (d->packed ? d->batch : 1); s++)
            d->lq[s] = (d->lq[s] + 1) / 2, d->lk[s] = (d->lk[s] + 1) / 2;
    const int64_t Lq = d->lq[0], Lk = d->lk[0];
    d->causal = chance(&r, 0.3f);
    if (!d->packed) {
        d->lens = chance(&r, 0.25f) ? 1 + (int)attn_rng_below(&r, 2) : 0;
        if (d->lens) {
            const int64_t n = d->lens == 1 ? d->batch : d->batch * Lq;
            d->lens_data = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
            for (int64_t e = 0; e < n; e++) {
                static const int64_t far[] = {0, 0, 1, INT64_MAX};
                d->lens_data[e] = chance(&r, 0.3f) ? pick(&r, far, 4) : (int64_t)attn_rng_below(&r, (uint32_t)Lk + 3);
            }
        }
        d->key_padding = chance(&r, 0.2f);
        if (d->key_padding) {
            d->kpad = malloc((size_t)(d->batch * Lk + 1));
            const bool all = chance(&r, 0.2f); /* the first row all padding */
            for (int64_t e = 0; e < d->batch * Lk; e++) d->kpad[e] = (all && e < Lk) || chance(&r, 0.2f);
        }
        if (chance(&r, 0.2f)) draw_mask(&r, &d->attend, d, true);
        if (chance(&r, 0.15f)) draw_mask(&r, &d->blocked, d, true);
        if (chance(&r, 0.2f)) draw_mask(&r, &d->additive, d, false);
    }
    d->window = chance(&r, 0.4f);
    if (d->window) d->left = window_bound(&r), d->right = window_bound(&r);
    d->alibi = chance(&r, 0.25f) ? 1 + (int)attn_rng_below(&r, 2) : 0;
    for (int e = 0; e < MAX_SEQS * MAX_H; e++) d->slopes[e] = -0.5f + 1.5f * attn_rng_uniform(&r);
    if (chance(&r, 0.35f)) {
        static const float far[] = {1e20f, 1e30f, FLT_MAX, FLT_MIN, 1e-30f};
        d->softcap = chance(&r, 0.2f) ? far[attn_rng_below(&r, 5)] : powf(10.0f, -2.0f + 10.0f * attn_rng_uniform(&r));
    }
    d->scale = chance(&r, 0.3f) ? 0.05f + 2.0f * attn_rng_uniform(&r) : 0.0f;
    static const float q_scales[] = {1, 1, 1, 1, 0.1f, 4, 16};
    d->q_scale = q_scales[attn_rng_below(&r, 7)];
    d->score_mod = chance(&r, 0.25f) ? 1 + (int)attn_rng_below(&r, 3) : 0;
    d->mask_mod = chance(&r, 0.2f);
    d->mask_block = chance(&r, 0.15f);
    d->medium = chance(&r, 0.3f);
    d->threads = 1 + (int)attn_rng_below(&r, 2);
    static const float drops[] = {0.1f, 0.5f};
    d->dropout = chance(&r, 0.15f) ? drops[attn_rng_below(&r, 2)] : 0.0f;
}

static void free_draw(draw *d)
{
    free(d->lens_data), free(d->kpad);
    free(d->attend.bits), free(d->blocked.bits), free(d->additive.values);
}

static void describe(char *buf, size_t n, const draw *d)
{
    int w = snprintf(buf, n, "%s B%lld H%lld/%lld D%lld Dv%lld L",
                     d->packed    ? "packed"
                     : d->three_d ? "3-D"
                                  : "4-D",
                     (long long)d->batch, (long long)d->H, (long long)d->Hkv, (long long)d->D, (long long)d->Dv);
    for (int64_t s = 0; s < (d->packed ? d->batch : 1) && w < (int)n; s++)
        w += snprintf(buf + w, n - (size_t)w, " %lldx%lld", (long long)d->lq[s], (long long)d->lk[s]);
    if (w < (int)n)
        snprintf(buf + w, n - (size_t)w,
                 "%s%s%s%s%s%s%s window(%lld,%lld) alibi%d softcap %g scale %g q x%g mods %d%s%s %s t%d p%g",
                 d->causal ? " causal" : "",
                 d->lens == 1   ? " lens(B)"
                 : d->lens == 2 ? " lens(B,Lq)"
                                : "",
                 d->key_padding ? " key_padding" : "", d->attend.ndim ? " attend" : "",
                 d->blocked.ndim ? " blocked" : "", d->additive.ndim ? " additive" : "",
                 d->window ? "" : " (no window)", (long long)d->left, (long long)d->right, d->alibi, (double)d->softcap,
                 (double)d->scale, (double)d->q_scale, d->score_mod, d->mask_mod ? " mask_mod" : "",
                 d->mask_block ? " mask_block" : "", d->medium ? "medium" : "highest", d->threads, (double)d->dropout);
}

/* ---- the reference: each (sequence or batch row, head) a frame ---- */

/* the draw's tensors: inputs, and one set of results */
typedef struct tensors {
    int64_t nq, nk, nv, no; /* elements of q, k, v and out */
    float *q, *k, *v, *dout;
    int64_t cu_q[MAX_SEQS + 1], cu_k[MAX_SEQS + 1];
} tensors;

typedef struct results {
    double *o, *dq, *dk, *dv;
} results;

static bool results_alloc(results *r, const tensors *t)
{
    r->o = calloc((size_t)t->no + 1, sizeof(double)), r->dq = calloc((size_t)t->nq + 1, sizeof(double));
    r->dk = calloc((size_t)t->nk + 1, sizeof(double)), r->dv = calloc((size_t)t->nv + 1, sizeof(double));
    return r->o && r->dq && r->dk && r->dv;
}

static void results_free(results *r)
{
    free(r->o), free(r->dq), free(r->dk), free(r->dv);
}

/* the kernels' dropout factor of element (b, h, i, j) of a problem (heads, lq, lk) under seed */
static float dropout_factor(float p, uint64_t seed, int64_t b, int64_t heads, int64_t h, int64_t lq, int64_t i,
                            int64_t lk, int64_t j)
{
    const uint64_t idx =
        (((uint64_t)b * (uint64_t)heads + (uint64_t)h) * (uint64_t)lq + (uint64_t)i) * (uint64_t)lk + (uint64_t)j;
    const float u = (float)(attn_hash64(idx ^ attn_hash64(seed)) >> 40) * (1.0f / 16777216.0f);
    return u < p ? 0.0f : 1.0f / (1.0f - p);
}

/* whether the window (bottom-right aligned by shift = Lk - Lq) shows key j to query i, in 128 bits */
static bool in_window(const draw *d, int64_t i, int64_t j, int64_t shift)
{
    const __int128 diag = (__int128)i + shift;
    if (d->window && d->left >= 0 && (__int128)j < diag - d->left) return false;
    if (d->window && d->right >= 0 && (__int128)j > diag + d->right) return false;
    return true;
}

/* what mask_block and mask_mod say of pair (i, j) of (b, h) in a frame of lq x lk */
static bool mods_keep(const draw *d, int64_t b, int64_t h, int64_t i, int64_t j, int64_t lq, int64_t lk)
{
    if (d->mask_block) {
        const int64_t i0 = i / ATTN_MASK_BLOCK_Q * ATTN_MASK_BLOCK_Q, j0 = j / ATTN_MASK_BLOCK_KV * ATTN_MASK_BLOCK_KV;
        const int64_t i1 = i0 + ATTN_MASK_BLOCK_Q < lq ? i0 + ATTN_MASK_BLOCK_Q : lq;
        const int64_t j1 = j0 + ATTN_MASK_BLOCK_KV < lk ? j0 + ATTN_MASK_BLOCK_KV : lk;
        const int kind = block_f(b, h, i0, i1, j0, j1, NULL);
        if (kind == ATTN_BLOCK_EMPTY) return false;
        if (kind == ATTN_BLOCK_FULL) return true;
    }
    return !d->mask_mod || keep_f(b, h, i, j, NULL);
}

/* frame (s, h): s the batch row (padded) or the sequence (packed); hidden, bias and drop filled */
static tk_frame frame_of(const draw *d, const tensors *t, int64_t s, int64_t h, uint64_t drop_seed, uint8_t *hidden,
                         double *bias, float *drop, const tk_score_mod *mod)
{
    const int64_t H = d->H, Hkv = d->Hkv, hk = h / (H / Hkv), D = d->D, Dv = d->Dv;
    const int64_t Lq = d->packed ? d->lq[s] : d->lq[0], Lk = d->packed ? d->lk[s] : d->lk[0], shift = Lk - Lq;
    tk_frame f = {.lq = Lq,
                  .lk = Lk,
                  .d = D,
                  .dv = Dv,
                  .softcap = d->softcap,
                  .hidden = hidden,
                  .bias = bias,
                  .drop = d->dropout > 0.0f ? drop : NULL,
                  .mod = d->score_mod ? mod : NULL};
    f.scale = d->scale > 0.0f ? d->scale : 1.0f / sqrtf((float)D);
    if (d->packed) {
        f.q = t->q + (t->cu_q[s] * H + h) * D, f.dout = t->dout + (t->cu_q[s] * H + h) * Dv;
        f.k = t->k + (t->cu_k[s] * Hkv + hk) * D, f.v = t->v + (t->cu_k[s] * Hkv + hk) * Dv;
        f.q_rs = H * D, f.g_rs = H * Dv, f.k_rs = Hkv * D, f.v_rs = Hkv * Dv;
    } else {
        f.q = t->q + (s * H + h) * Lq * D, f.dout = t->dout + (s * H + h) * Lq * Dv;
        f.k = t->k + (s * Hkv + hk) * Lk * D, f.v = t->v + (s * Hkv + hk) * Lk * Dv;
        f.q_rs = D, f.g_rs = Dv, f.k_rs = D, f.v_rs = Dv;
    }
    const double slope = !d->alibi ? 0.0 : d->slopes[(d->alibi == 2 ? s * H : 0) + h];
    for (int64_t i = 0; i < Lq; i++)
        for (int64_t j = 0; j < Lk; j++) {
            bool seen = in_window(d, i, j, shift) && mods_keep(d, s, h, i, j, Lq, Lk);
            double add = d->alibi ? -slope * fabs((double)(i + shift - j)) : 0.0;
            if (d->packed)
                seen = seen && !(d->causal && j > i + shift);
            else {
                const int64_t len = d->lens == 1   ? d->lens_data[s]
                                    : d->lens == 2 ? d->lens_data[s * Lq + i]
                                                   : INT64_MAX;
                seen = seen && !(d->causal && j > i) && j < len && !(d->key_padding && d->kpad[s * Lk + j]);
                seen = seen && !(d->attend.ndim && !mask_bit(&d->attend, s, h, i, j)) &&
                       !(d->blocked.ndim && mask_bit(&d->blocked, s, h, i, j));
                if (d->additive.ndim) add += mask_value(&d->additive, s, h, i, j);
            }
            hidden[i * Lk + j] = !seen, bias[i * Lk + j] = add;
            drop[i * Lk + j] = d->dropout <= 0.0f ? 1.0f
                               : d->packed ? dropout_factor(d->dropout, drop_seed + (uint64_t)s * 0x9E3779B97F4A7C15ull,
                                                            0, H, h, Lq, i, Lk, j)
                                           : dropout_factor(d->dropout, drop_seed, s, H, h, Lq, i, Lk, j);
        }
    return f;
}

/* every frame of the draw in one arithmetic into r (and the sizes into mag when not NULL) */
static bool reference(const draw *d, const tensors *t, tk_arith arith, bool bf16, uint64_t drop_seed, results *r,
                      results *mag)
{
    int64_t most = 1;
    for (int64_t s = 0; s < (d->packed ? d->batch : 1); s++)
        most = d->lq[s] * d->lk[s] > most ? d->lq[s] * d->lk[s] : most;
    uint8_t *hidden = malloc((size_t)most);
    double *bias = malloc(sizeof(double) * (size_t)most);
    float *drop = malloc(sizeof(float) * (size_t)most);
    bool ok = hidden && bias && drop;
    int kind = d->score_mod;
    tk_score_mod mod = {mod_f32, mod_f64, mod_d1, mod_d2, &kind, 0, 0};
    for (int64_t s = 0; ok && s < d->batch; s++)
        for (int64_t h = 0; ok && h < d->H; h++) {
            mod.b = s, mod.h = d->three_d ? 0 : h;
            tk_frame f = frame_of(d, t, s, h, drop_seed, hidden, bias, drop, &mod);
            f.bf16 = bf16;
            const int64_t qo = f.q - t->q, ko = f.k - t->k, vo = f.v - t->v, go = f.dout - t->dout;
            tk_frame_out out = {r->o + go, r->dq + qo, r->dk + ko, r->dv + vo, NULL, NULL, NULL, NULL};
            if (mag) out.mo = mag->o + go, out.mdq = mag->dq + qo, out.mdk = mag->dk + ko, out.mdv = mag->dv + vo;
            ok = tk_sdpa_frame(&f, arith, &out);
        }
    free(hidden), free(bias), free(drop);
    return ok;
}

/* ---- the library's run ---- */

static void set_mask(const mask_arg *m, const uint8_t **bits, int *ndim, int64_t *shape)
{
    if (!m->ndim) return;
    *bits = m->bits, *ndim = m->ndim;
    memcpy(shape, m->shape, sizeof(int64_t) * 4);
}

/* One run of attn_sdpa or attn_sdpa_varlen with impl; out and the gradients as doubles into r,
 * the dropout seed it drew into *drop_seed; false (with the library's message) when it refused */
static bool run_library(const draw *d, const tensors *t, attn_sdpa_impl impl, results *r, uint64_t *drop_seed,
                        char *why, size_t why_n)
{
    attn_ctx *ctx = attn_ctx_new(d->seed);
    if (!ctx) return snprintf(why, why_n, "no ctx"), false;
    attn_ctx_set_num_threads(ctx, d->threads);
    attn_ctx_set_matmul_precision(ctx, d->medium ? ATTN_PRECISION_MEDIUM : ATTN_PRECISION_HIGHEST);
    attn_ctx_set_training(ctx, d->dropout > 0.0f);
    attn_rng before = *attn_ctx_rng(ctx); /* the two draws the op makes for its dropout seed */
    const uint64_t hi = attn_rng_u32(&before);
    *drop_seed = hi << 32 | attn_rng_u32(&before);
    const int64_t B = d->batch, H = d->H, Hkv = d->Hkv, Lq = d->lq[0], Lk = d->lk[0];
    int64_t sq[4], sk[4], sv[4];
    int nd = 4;
    if (d->packed) {
        nd = 3;
        memcpy(sq, (int64_t[]){t->cu_q[B], H, d->D}, 3 * sizeof(int64_t));
        memcpy(sk, (int64_t[]){t->cu_k[B], Hkv, d->D}, 3 * sizeof(int64_t));
        memcpy(sv, (int64_t[]){t->cu_k[B], Hkv, d->Dv}, 3 * sizeof(int64_t));
    } else if (d->three_d) {
        nd = 3;
        memcpy(sq, (int64_t[]){B, Lq, d->D}, 3 * sizeof(int64_t));
        memcpy(sk, (int64_t[]){B, Lk, d->D}, 3 * sizeof(int64_t));
        memcpy(sv, (int64_t[]){B, Lk, d->Dv}, 3 * sizeof(int64_t));
    } else {
        memcpy(sq, (int64_t[]){B, H, Lq, d->D}, sizeof sq);
        memcpy(sk, (int64_t[]){B, Hkv, Lk, d->D}, sizeof sk);
        memcpy(sv, (int64_t[]){B, Hkv, Lk, d->Dv}, sizeof sv);
    }
    attn_tensor *q = attn_tensor_from(ctx, nd, sq, t->q), *k = attn_tensor_from(ctx, nd, sk, t->k),
                *v = attn_tensor_from(ctx, nd, sv, t->v);
    bool ok = q && k && v;
    if (ok)
        attn_tensor_set_requires_grad(q, true), attn_tensor_set_requires_grad(k, true),
            attn_tensor_set_requires_grad(v, true);
    int kind = d->score_mod;
    const attn_score_mods mods = {d->score_mod ? mod_f32 : NULL, d->score_mod ? mod_grad_f32 : NULL,
                                  d->mask_mod ? keep_f : NULL, d->mask_block ? block_f : NULL, &kind};
    const attn_window window = {d->window, d->left, d->right};
    attn_tensor *out = NULL;
    if (ok && d->packed) {
        attn_varlen_opts o = {.scale = d->scale,
                              .causal = d->causal,
                              .features.window = window,
                              .enable_gqa = Hkv != H,
                              .features.softcap = d->softcap,
                              .dropout_p = d->dropout,
                              .impl = impl,
                              .features.mods = mods};
        if (d->alibi)
            o.features.alibi_slopes = d->slopes, o.features.alibi_ndim = d->alibi,
            o.features.alibi_shape[0] = d->alibi == 2 ? B : H, o.features.alibi_shape[1] = H;
        out = attn_sdpa_varlen(ctx, q, k, v, t->cu_q, t->cu_k, B, &o);
    } else if (ok) {
        attn_sdpa_opts o = {.scale = d->scale,
                            .dropout_p = d->dropout,
                            .impl = impl,
                            .enable_gqa = Hkv != H,
                            .features.window = window,
                            .features.softcap = d->softcap,
                            .features.mods = mods};
        o.mask.causal = d->causal;
        if (d->lens) o.mask.valid_lens = (attn_lens){d->lens_data, d->lens, {B, Lq}};
        if (d->key_padding)
            o.mask.key_padding = d->kpad, o.mask.key_padding_shape[0] = B, o.mask.key_padding_shape[1] = Lk;
        set_mask(&d->attend, &o.mask.attend, &o.mask.attend_ndim, o.mask.attend_shape);
        set_mask(&d->blocked, &o.mask.blocked, &o.mask.blocked_ndim, o.mask.blocked_shape);
        if (d->additive.ndim) {
            o.mask.additive = d->additive.values, o.mask.additive_ndim = d->additive.ndim;
            memcpy(o.mask.additive_shape, d->additive.shape, sizeof o.mask.additive_shape);
        }
        if (d->alibi)
            o.features.alibi_slopes = d->slopes, o.features.alibi_ndim = d->alibi,
            o.features.alibi_shape[0] = d->alibi == 2 ? B : H, o.features.alibi_shape[1] = H;
        out = attn_sdpa(ctx, q, k, v, &o, NULL);
    }
    ok = ok && out && attn_backward_from(ctx, out, t->dout) == ATTN_OK;
    if (!ok) snprintf(why, why_n, "refused: %s", attn_last_error());
    const attn_tensor *src[4] = {out, q, k, v};
    double *dst[4] = {r->o, r->dq, r->dk, r->dv};
    const int64_t n[4] = {t->no, t->nq, t->nk, t->nv};
    for (int x = 0; ok && x < 4; x++) {
        const float *from = x == 0 ? src[x]->data : src[x]->grad;
        for (int64_t e = 0; e < n[x]; e++) dst[x][e] = from ? from[e] : 0.0;
    }
    attn_ctx_free(ctx);
    return ok;
}

/* ---- the criterion ---- */

static double max_error(const double *got, const double *ref, int64_t n)
{
    double worst = 0.0;
    for (int64_t e = 0; e < n; e++) {
        const double err = fabs(got[e] - ref[e]);
        if (!(err <= worst)) worst = err; /* NaN stays */
    }
    return worst;
}

static double worst_margin[2][4]; /* [fused, reference kernel][out, dq, dk, dv] */

/* FlashAttention's criterion on one tensor; the margin (error / allowance) recorded */
static bool criterion(const char *kernel, int which, int x, const double *got, const double *ref, const double *plain_f,
                      const double *plain_r, const double *mag, int64_t n, double u, char *why, size_t why_n)
{
    static const char *names[4] = {"out", "dq", "dk", "dv"};
    const double e = max_error(got, ref, n);
    const double ep = fmax(max_error(plain_f, ref, n), max_error(plain_r, ref, n));
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, mag[i]);
    const double allowed = 2.0 * ep + u * m;
    const double margin = allowed > 0.0 ? e / allowed : e > 0.0 ? INFINITY : 0.0;
    if (!(margin <= worst_margin[which][x])) worst_margin[which][x] = margin;
    if (margin <= 1.0) return true;
    snprintf(why, why_n, "%s kernel's %s: max error %.3g against float64, plain float32's %.3g, allowed %.3g", kernel,
             names[x], e, ep, allowed);
    return false;
}

static float *randn(attn_rng *r, int64_t n, float scale)
{
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = scale * attn_rng_normal(r);
    return x;
}

/* one draw through both kernels; false with the reason when either fails */
static bool run_draw(const draw *d, char *why, size_t why_n)
{
    tensors t = {0};
    const int64_t B = d->batch, H = d->H, Hkv = d->Hkv;
    if (d->packed) {
        t.cu_q[0] = t.cu_k[0] = 0;
        for (int64_t s = 0; s < B; s++) t.cu_q[s + 1] = t.cu_q[s] + d->lq[s], t.cu_k[s + 1] = t.cu_k[s] + d->lk[s];
        t.nq = t.cu_q[B] * H * d->D, t.no = t.cu_q[B] * H * d->Dv;
        t.nk = t.cu_k[B] * Hkv * d->D, t.nv = t.cu_k[B] * Hkv * d->Dv;
    } else {
        t.nq = B * H * d->lq[0] * d->D, t.no = B * H * d->lq[0] * d->Dv;
        t.nk = B * Hkv * d->lk[0] * d->D, t.nv = B * Hkv * d->lk[0] * d->Dv;
    }
    attn_rng r;
    attn_rng_seed(&r, d->seed ^ 0x5eed);
    t.q = randn(&r, t.nq, d->q_scale), t.k = randn(&r, t.nk, 1.0f), t.v = randn(&r, t.nv, 1.0f);
    t.dout = randn(&r, t.no, 1.0f);
    bool ok = true;
    results ref = {0}, mag = {0}, plain_f = {0}, plain_r = {0}, got = {0};
    ok = results_alloc(&ref, &t) && results_alloc(&mag, &t) && results_alloc(&plain_f, &t) &&
         results_alloc(&plain_r, &t) && results_alloc(&got, &t);
    uint64_t seed = 0;
    bool bf16_before = false;
    ok = ok && run_library(d, &t, ATTN_SDPA_FUSED, &got, &seed, why, why_n);
    ok = ok && reference(d, &t, TK_F64, false, seed, &ref, &mag);
    for (int which = 0; ok && which < 2; which++) {
        const bool bf16 = which == 0 && d->medium && attn_bf16_attention(); /* the reference kernel stays float32 */
        const double u = bf16 ? 0x1p-8 : 0x1p-24;
        if (which == 0 || bf16_before) { /* the plain compositions of this kernel's arithmetic */
            memset(plain_f.dk, 0, sizeof(double) * (size_t)t.nk), memset(plain_f.dv, 0, sizeof(double) * (size_t)t.nv);
            memset(plain_r.dk, 0, sizeof(double) * (size_t)t.nk), memset(plain_r.dv, 0, sizeof(double) * (size_t)t.nv);
            ok = reference(d, &t, TK_F32, bf16, seed, &plain_f, NULL) &&
                 reference(d, &t, TK_F32_REVERSE, bf16, seed, &plain_r, NULL);
        }
        bf16_before = bf16;
        if (ok && which == 1) ok = run_library(d, &t, ATTN_SDPA_REF, &got, &seed, why, why_n);
        const double *g[4] = {got.o, got.dq, got.dk, got.dv}, *rf[4] = {ref.o, ref.dq, ref.dk, ref.dv};
        const double *pf[4] = {plain_f.o, plain_f.dq, plain_f.dk, plain_f.dv};
        const double *pr[4] = {plain_r.o, plain_r.dq, plain_r.dk, plain_r.dv}, *mg[4] = {mag.o, mag.dq, mag.dk, mag.dv};
        const int64_t n[4] = {t.no, t.nq, t.nk, t.nv};
        for (int x = 0; ok && x < 4; x++)
            ok = criterion(which ? "reference" : "fused", which, x, g[x], rf[x], pf[x], pr[x], mg[x], n[x], u, why,
                           why_n);
    }
    results_free(&ref), results_free(&mag), results_free(&plain_f), results_free(&plain_r), results_free(&got);
    free(t.q), free(t.k), free(t.v), free(t.dout);
    return ok;
}

/* The causes the issue named, as draws of their own (the random draws reach them too, less often) */
typedef struct named_case {
    const char *what;
    draw d;
} named_case;

static const named_case named[] = {
    {"rows that see no key: Lq 6, Lk 1, window (0, 0)",
     {.batch = 1, .H = 1, .Hkv = 1, .D = 8, .Dv = 8, .lq = {6}, .lk = {1}, .window = true, .q_scale = 1, .threads = 1}},
    {"packed, causal bottom-right, Lq 6, Lk 1",
     {.packed = true,
      .batch = 2,
      .H = 2,
      .Hkv = 1,
      .D = 16,
      .Dv = 16,
      .lq = {6, 70},
      .lk = {1, 3},
      .causal = true,
      .q_scale = 1,
      .threads = 2}},
    {"softcap 1e5, large scores",
     {.batch = 1,
      .H = 2,
      .Hkv = 2,
      .D = 64,
      .Dv = 64,
      .lq = {70},
      .lk = {130},
      .softcap = 1e5f,
      .q_scale = 16,
      .threads = 2}},
    {"softcap 1e7",
     {.batch = 1,
      .H = 2,
      .Hkv = 2,
      .D = 64,
      .Dv = 64,
      .lq = {70},
      .lk = {130},
      .softcap = 1e7f,
      .q_scale = 16,
      .threads = 1}},
    {"softcap 1e8",
     {.batch = 1,
      .H = 1,
      .Hkv = 1,
      .D = 32,
      .Dv = 32,
      .lq = {64},
      .lk = {64},
      .softcap = 1e8f,
      .q_scale = 16,
      .threads = 1}},
    {"softcap FLT_MIN (the smallest accepted)",
     {.batch = 1,
      .H = 1,
      .Hkv = 1,
      .D = 8,
      .Dv = 8,
      .lq = {9},
      .lk = {9},
      .softcap = FLT_MIN,
      .q_scale = 1,
      .threads = 1}},
    {"window (-1, INT64_MAX): hides nothing",
     {.batch = 2,
      .H = 1,
      .Hkv = 1,
      .D = 8,
      .Dv = 8,
      .lq = {65},
      .lk = {130},
      .window = true,
      .left = -1,
      .right = INT64_MAX,
      .q_scale = 1,
      .threads = 1}},
    {"window (INT64_MAX - 1, 0)",
     {.batch = 1,
      .H = 2,
      .Hkv = 1,
      .D = 8,
      .Dv = 8,
      .lq = {130},
      .lk = {65},
      .window = true,
      .left = INT64_MAX - 1,
      .right = 0,
      .q_scale = 1,
      .threads = 2}},
    {"d 192, dominant keys",
     {.batch = 1, .H = 2, .Hkv = 2, .D = 192, .Dv = 192, .lq = {64}, .lk = {64}, .q_scale = 4, .threads = 2}},
};

/* Every named case, and a denormal softcap refused by both calls (it made NaN) */
static void named_cases(void)
{
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
        draw d = named[i].d;
        char why[512] = "";
        const bool ok = run_draw(&d, why, sizeof why);
        TK_CHECK(ok, "%s: %s", named[i].what, why);
    }
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *x = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 1, 3, 4});
    attn_tensor *p = attn_tensor_zeros(ctx, 3, (int64_t[]){3, 1, 4});
    const float denormals[] = {1e-40f, -1.0f, INFINITY, NAN};
    for (size_t i = 0; i < sizeof denormals / sizeof *denormals; i++) {
        const attn_sdpa_opts o = {.features.softcap = denormals[i]};
        const attn_varlen_opts vo = {.features.softcap = denormals[i]};
        TK_CHECK(!attn_sdpa(ctx, x, x, x, &o, NULL) && attn_last_status() == ATTN_ERR_ARG &&
                     strstr(attn_last_error(), "softcap"),
                 "attn_sdpa refuses softcap %g: %s", (double)denormals[i], attn_last_error());
        TK_CHECK(!attn_sdpa_varlen(ctx, p, p, p, (int64_t[]){0, 3}, (int64_t[]){0, 3}, 1, &vo) &&
                     attn_last_status() == ATTN_ERR_ARG,
                 "attn_sdpa_varlen refuses softcap %g", (double)denormals[i]);
    }
    attn_ctx_free(ctx);
}

int main(int argc, char **argv)
{
    int64_t draws = 300;
    uint64_t first = 1;
    bool verbose = false, reproduce = false;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--draws") && a + 1 < argc)
            draws = strtoll(argv[++a], NULL, 10);
        else if (!strcmp(argv[a], "--seed") && a + 1 < argc)
            first = strtoull(argv[++a], NULL, 10), reproduce = true;
        else if (!strcmp(argv[a], "--verbose"))
            verbose = true;
        else {
            fprintf(stderr, "usage: %s [--draws N] [--seed S] [--verbose]\n", argv[0]);
            return 2;
        }
    }
    if (!reproduce) named_cases(); /* a reproduction (--seed) runs its draws alone */
    int64_t failed = 0;
    for (int64_t n = 0; n < draws; n++) {
        draw d;
        make_draw(&d, first + (uint64_t)n);
        char what[512], why[512] = "";
        describe(what, sizeof what, &d);
        const bool ok = run_draw(&d, why, sizeof why);
        if (verbose || !ok) printf("draw %llu: %s%s%s\n", (unsigned long long)d.seed, what, ok ? "" : ": ", why);
        if (!ok) {
            printf("  reproduce: ATTN_CPU_ISA=%s %s --seed %llu --draws 1\n", attn_isa_name(attn_cpu_isa()), argv[0],
                   (unsigned long long)d.seed);
            failed++;
        }
        TK_CHECK(ok, "draw %llu", (unsigned long long)d.seed);
        free_draw(&d);
    }
    printf("%lld draws from seed %llu at %s, %s: %lld failed\n", (long long)draws, (unsigned long long)first,
           attn_isa_name(attn_cpu_isa()), attn_bf16_attention() ? "MEDIUM with bf16 products" : "MEDIUM as float32",
           (long long)failed);
    static const char *names[4] = {"out", "dq", "dk", "dv"};
    for (int w = 0; w < 2; w++)
        for (int x = 0; x < 4; x++)
            printf("worst margin %s %s: %.3f\n", w ? "reference" : "fused", names[x], worst_margin[w][x]);
    return tk_finish("test_attention_differential");
}
