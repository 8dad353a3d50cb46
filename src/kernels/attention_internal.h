/* Private: scaled dot-product attention kernels, no autograd.
 *   forward:  S = cap(mod(scale * Q K^T)) + alibi + mask,  P = softmax_rows(S),  O = dropout(P) V
 *             mod(s) = score_mod(s, b, h, i, j) on the pairs kept (identity without one); the
 *             mask includes the pairs that mask_mod and mask_block hide
 *             cap(s) = softcap tanh(s / softcap) when softcap > 0 (Gemma 2), else s (cap(-inf) =
 *             -inf: a pair that score_mod hides stays hidden);
 *             alibi_ij = -slope_bh |i + Lk - Lq - j| (ALiBi, FlashAttention's alignment)
 *             stats[i] = (m_i, 1 / l_i): m_i = max_j S[i, j], l_i = sum_j exp(S[i, j] - m_i)
 *             (+inf and 0 for a row whose keys are all masked), so P = exp(S - m) (1 / l)
 *   backward: dV = dropout(P)^T dO,  dP = dropout'(dO V^T),  D = rowsum(dO * O) = rowsum(P * dP),
 *             dS = P * (dP - D) * cap'(mod(s)) (1 - tanh^2 with softcap) * mod'(s)
 *             (score_mod_grad),  dQ = scale * dS K,
 *             dK = scale * dS^T Q
 * Two implementations of each: *_ref materialises S for a whole (b, h) and is the need_weights
 * path; *_fused tiles the work (FlashAttention-2 schedule: online softmax over key blocks,
 * backward recomputes P from stats) and never holds (Lq, Lk): a few tiles per thread in the
 * forward, plus Q^T and dO^T of one head (Lq (D + Dv)) per thread in the backward.
 * Q (B, H, Lq, D), K (B, Hkv, Lk, D), V (B, Hkv, Lk, Dv), O (B, H, Lq, Dv), all contiguous;
 * query head h reads key/value head h / (H / Hkv) (grouped-query attention; Hkv = H: one each).
 * Keys visible to query i: [sdpa_key_begin, sdpa_key_end) (causal top-left, valid_lens, and the
 * local window, bottom-right aligned as FlashAttention's), and the elementwise masks.
 * A fully masked query row gives O = 0, weights 0 and zero gradients. */
#ifndef ATTN_KERNELS_ATTENTION_H
#define ATTN_KERNELS_ATTENTION_H

#include "attention_names_internal.h" /* sdpa_* are attn__sdpa_* in the object files */

#include <stdbool.h>
#include <stdint.h>

#include "attn.h" /* attn_score_mods */

typedef struct sdpa_masks {
    bool causal;               /* key j visible to query i only when j <= i (top-left) */
    const int64_t *valid_lens; /* keys j >= valid_len masked: (B) or (B, Lq); NULL: none */
    bool valid_lens_per_query;
    const uint8_t *key_padding; /* (B, Lk), 1 = padding; NULL: none */
    const uint8_t *attend;      /* 1 = may attend, broadcast by attend_stride; NULL: none */
    int64_t attend_stride[4];   /* element strides for (b, h, i, j); 0 on broadcast dims */
    const uint8_t *blocked;     /* 1 = masked, broadcast by blocked_stride; NULL: none */
    int64_t blocked_stride[4];
    const float *additive; /* added to the scaled scores, broadcast by additive_stride */
    int64_t additive_stride[4];
} sdpa_masks;

/* Whose sums the fused attention's bf16 products have: VDPBF16PS's (attn__tile_gemm_bf16), AMX's
 * TDPBF16PS (attn__tile_gemm_amx) or Arm BFDOT's (attn__tile_gemm_bfdot). Each kernel runs at every
 * level, as its instructions where the level and CPU have them, else as its reference. */
typedef enum sdpa_sums {
    SDPA_SUMS_DPBF16,
    SDPA_SUMS_AMX,
    SDPA_SUMS_BFDOT,
    SDPA_SUMS_COUNT
} sdpa_sums;
/* The sums of this CPU's bf16 attention products at the chosen level (attn_bf16_attention): AMX's
 * where attn_bf16_amx, BFDOT's at neon_bf16, else VDPBF16PS's (dispatch.c) */
sdpa_sums attn__bf16_sums(void);

typedef struct sdpa_problem {
    int64_t batch, heads, lq, lk, d, dv;
    int64_t heads_kv; /* of K and V, dividing heads; 0: heads */
    float scale;
    sdpa_masks masks;
    bool windowed; /* key j visible to query i only when i + Lk - Lq - window_left <= j <=
                               i + Lk - Lq + window_right (a bound of -1: none on that side) */
    int64_t window_left, window_right;
    const float *alibi; /* slopes (B, H), batch stride alibi_batch_stride (0: (H) for every
                               batch); NULL: none */
    int64_t alibi_batch_stride;
    float softcap;         /* > 0: scores capped as cap() above; 0: none */
    attn_score_mods mods;  /* score_mod on the scaled scores before cap(), and the mask callbacks
                               (attn.h's order and contract); all NULL: none */
    int64_t mods_batch;    /* the callbacks see batch row b + mods_batch (attn_sdpa_varlen: the
                               sequence's index; its problem is one row); 0 otherwise */
    float dropout_p;       /* on P, 0 when not training */
    uint64_t dropout_seed; /* the mask is a hash of (seed, b, h, i, j): reproducible anywhere */
    int threads;           /* OpenMP threads of the (b, h) loops (the ctx's count); the scratch
                               holds one slice per thread */
    bool bf16;             /* the fused kernel's products (S = Q K^T, O += P V and the backward's)
                               take bf16 operands with float32 sums (attn__tile_gemm_bf16): MEDIUM
                               precision; softmax statistics, masks and dropout stay float32 */
    sdpa_sums sums;        /* with bf16: whose sums the products have (attn__bf16_sums) */
} sdpa_problem;

/* The key/value head of query head h. */
static inline int64_t sdpa_kv_head(const sdpa_problem *p, int64_t h)
{
    return p->heads_kv > 0 ? h / (p->heads / p->heads_kv) : h;
}
/* Keys [sdpa_key_begin, sdpa_key_end) of row (b, i) can be visible; the others are masked by
 * causal, valid_lens or the window (begin >= end: none). */
int64_t sdpa_key_begin(const sdpa_problem *p, int64_t i);
int64_t sdpa_key_end(const sdpa_problem *p, int64_t b, int64_t i);
/* The queries [*first, *last] that can see some key of [j0, j0 + cols) by causal and the window
 * (first > last: none). */
void sdpa_query_range(const sdpa_problem *p, int64_t j0, int64_t cols, int64_t *first, int64_t *last);
/* cap() on a tile of scaled scores (query i0 + r, key j0 + c at s[r * query_stride + c *
 * key_stride]); when slope is not NULL it receives 1 - tanh^2 at the same places, the cap's
 * derivative for the backward. Does nothing without softcap. */
void sdpa_softcap_tile(float *s, float *slope, int64_t query_stride, int64_t key_stride, const sdpa_problem *p,
                       int64_t rows, int64_t cols);
/* Adds ALiBi and the masks to a tile of capped scores (same layout); masked entries become -inf. */
void sdpa_mask_tile(float *s, int64_t query_stride, int64_t key_stride, const sdpa_problem *p, int64_t b, int64_t h,
                    int64_t i0, int64_t rows, int64_t j0, int64_t cols);
/* true when every tile needs sdpa_mask_tile: a mask or bias that the key range does not cover. */
bool sdpa_has_elementwise_mask(const sdpa_problem *p);
/* true when the problem is big enough to be worth a parallel region (on a loaded machine a
 * region waits for threads that are not running). */
bool sdpa_parallel(const sdpa_problem *p);
/* true when the problem has any of the score and mask callbacks */
static inline bool sdpa_mods_on(const sdpa_problem *p)
{
    return p->mods.score_mod || p->mods.mask_mod || p->mods.mask_block;
}
/* What mask_block says of the block (ATTN_MASK_BLOCK_Q x ATTN_MASK_BLOCK_KV, from (0, 0), cut at Lq
 * and Lk) that holds pair (i, j) of (b, h): ATTN_BLOCK_EMPTY, _FULL, or _PARTIAL (also without
 * mask_block, and for any other value it returns). */
int sdpa_mask_block(const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j);
/* Whether the mask callbacks keep pair (i, j) of (b, h), in a block of that kind (sdpa_mask_block):
 * EMPTY none, FULL all, PARTIAL as mask_mod says (all without it). The key range is the caller's. */
bool sdpa_mods_keep(const sdpa_problem *p, int block, int64_t b, int64_t h, int64_t i, int64_t j);
/* Dropout keep factor for element (b, h, i, j): 0 or 1/(1-p). */
float sdpa_dropout_scale(const sdpa_problem *p, int64_t b, int64_t h, int64_t i, int64_t j);

/* Reference: weights (B, H, Lq, Lk) receives P (before dropout); stats (B, H, Lq, 2). */
void sdpa_forward_ref(float *out, float *stats, float *weights, const float *q, const float *k, const float *v,
                      const sdpa_problem *p);
/* Accumulates into dq, dk, dv from the saved weights. scratch: sdpa_ref_scratch_floats. */
void sdpa_backward_ref(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                       const float *v, const float *out, const float *weights, float *scratch, const sdpa_problem *p);
int64_t sdpa_ref_scratch_floats(const sdpa_problem *p, int threads);

/* Fused: out and stats (B, H, Lq, 2) written; scratch: sdpa_fused_scratch_floats (per thread:
 * tiles, and in the backward Lq (D + Dv + 3) more; with bf16 the operands' pair words besides). */
void sdpa_forward_fused(float *out, float *stats, const float *q, const float *k, const float *v, float *scratch,
                        const sdpa_problem *p);
/* Accumulates into dq, dk, dv, recomputing P from stats. D: rowsum(P * dP) of the tile when a
 * head's keys fit one tile (as PyTorch's math path: each dS row sums to 0 up to one rounding),
 * else rowsum(dO * O) (FlashAttention). */
void sdpa_backward_fused(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                         const float *v, const float *out, const float *stats, float *scratch, const sdpa_problem *p);
int64_t sdpa_fused_scratch_floats(const sdpa_problem *p, int threads);

#endif
