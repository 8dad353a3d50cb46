/* The fused attention's products, four kinds (attention_fused_internal.h): float32 tiles through
 * attn__tile_gemm on operands read in place; bf16 pair words through attn__tile_gemm_bf16
 * (VDPBF16PS's sums) or attn__tile_gemm_bfdot (BFDOT's), in one layout; the same words through
 * attn__tile_gemm_amx, which loads its A operand by rows of pairs, so V^T and dS come transposed. Each function is one product of the fused passes'
 * formulas, with the packing its kind needs. */
#include "dispatch_internal.h" /* built once per level (attn_cpu_isa) */
#include "attention_fused_internal.h"
#include "kernels_internal.h"

#include <string.h>

/* dst (cols, ld_dst) = src (rows, cols)^T, of words */
static void transpose_words(uint32_t *dst, int64_t ld_dst, const uint32_t *src, int64_t ld_src, int64_t rows,
                            int64_t cols)
{
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) dst[c * ld_dst + r] = src[r * ld_src + c];
}

/* ---- float32 ---- */

static void forward_block_f32(fused_forward_tiles *t, const sdpa_problem *p, const float *k, const float *v,
                              int64_t bhk)
{
    (void)t;
    (void)p;
    (void)k;
    (void)v;
    (void)bhk;
}

static void forward_scores_f32(const fused_forward_tiles *t, const sdpa_problem *p, const float *kj, int64_t j0,
                               int64_t cols)
{
    (void)j0;
    attn__tile_gemm(t->st, t->qw, kj, p->d, 1, t->qt, t->qw, cols, t->qw, p->d, p->scale, false);
}

static void forward_values_f32(const fused_forward_tiles *t, const sdpa_problem *p, const float *vj, int64_t j0,
                               int64_t cols)
{
    (void)j0;
    attn__tile_gemm(t->ot, t->qw, vj, 1, p->dv, t->st, t->qw, p->dv, t->qw, cols, 1.0f, true);
}

static void backward_head_f32(const fused_backward_tiles *t, const sdpa_problem *p, const float *q, const float *dout,
                              int64_t bh)
{
    (void)t;
    (void)p;
    (void)q;
    (void)dout;
    (void)bh;
}

static void backward_keys_f32(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    (void)t;
    (void)p;
    (void)x;
}

static void backward_scores_f32(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    attn__tile_gemm(t->st, x->qw, x->kj, p->d, 1, t->qt + x->i0, t->ld, x->cols, x->qw, p->d, p->scale, false);
}

static void backward_probs_grad_f32(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    attn__tile_gemm(t->dpt, x->qw, x->vj, p->dv, 1, t->dot + x->i0, t->ld, x->cols, x->qw, p->dv, 1.0f, false);
}

static void backward_values_grad_f32(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x,
                                     const float *pt)
{
    (void)t;
    attn__tile_gemm(x->dvj, p->dv, pt, x->qw, 1, x->doi, p->dv, x->cols, p->dv, x->rows, 1.0f, true);
}

static void backward_qk_grad_f32(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    attn__tile_gemm(x->dqi, p->d, t->dpt, 1, x->qw, x->kj, p->d, x->rows, p->d, x->cols, p->scale, true);
    attn__tile_gemm(x->dkj, p->d, t->dpt, x->qw, 1, x->qi, p->d, x->cols, p->d, x->rows, p->scale, true);
}

/* ---- bf16 pairs, every sums' kind alike unless named (bf16: VDPBF16PS's and BFDOT's layout) ---- */

/* The block's Q^T in pairs, and the head's K and V when this thread's scratch holds another head:
 * true when they were packed now */
static bool forward_block_pairs(fused_forward_tiles *t, const sdpa_problem *p, const float *k, const float *v,
                                int64_t bhk)
{
    const int64_t D = p->d, Dv = p->dv, Lk = p->lk;
    attn__bf16_pack_col_pairs(t->qp, t->qw, t->qt, t->qw, D, t->qw);
    int64_t packed;
    memcpy(&packed, t->mark, sizeof packed);
    if (packed == bhk) return false; /* once per key/value head and thread, not once per query block */
    attn__bf16_pack_row_pairs(t->kh, sdpa_half_up(D), k + bhk * Lk * D, D, Lk, D);
    attn__bf16_pack_col_pairs(t->vh, Dv, v + bhk * Lk * Dv, Dv, Lk, Dv);
    memcpy(t->mark, &bhk, sizeof bhk);
    return true;
}

static void forward_block_bf16(fused_forward_tiles *t, const sdpa_problem *p, const float *k, const float *v,
                               int64_t bhk)
{
    forward_block_pairs(t, p, k, v, bhk);
}

static void forward_block_amx(fused_forward_tiles *t, const sdpa_problem *p, const float *k, const float *v,
                              int64_t bhk)
{
    const int64_t hLk = sdpa_half_up(p->lk);
    if (forward_block_pairs(t, p, k, v, bhk)) transpose_words(t->vt, hLk, t->vh, p->dv, hLk, p->dv);
}

static void forward_scores_pairs(const fused_forward_tiles *t, const sdpa_problem *p, const float *kj, int64_t j0,
                                 int64_t cols)
{
    (void)kj;
    const int64_t hD = sdpa_half_up(p->d);
    t->gemm(t->st, t->qw, t->kh + j0 * hD, hD, 1, t->qp, t->qw, cols, t->qw, hD, p->scale, false);
}

/* P^T's pairs in pp (unless online_softmax wrote them), and V_j's in vp when the tile is odd and
 * cut short by a mask: its last key paired with the hidden one after it, whose V (NaN, inf) must
 * not meet a 0 of P. True when vp holds V_j. */
static bool forward_values_pairs(const fused_forward_tiles *t, const sdpa_problem *p, const float *vj, int64_t j0,
                                 int64_t cols)
{
    const bool odd_cut = (cols & 1) && j0 + cols < p->lk;
    if (odd_cut) attn__bf16_pack_col_pairs(t->vp, p->dv, vj, p->dv, cols, p->dv);
    if (!t->pairs_from_softmax) attn__bf16_pack_col_pairs(t->pp, t->qw, t->st, t->qw, cols, t->qw);
    return odd_cut;
}

/* V^T's word (i, pair) by columns of vh (or vp) */
static void forward_values_bf16(const fused_forward_tiles *t, const sdpa_problem *p, const float *vj, int64_t j0,
                                int64_t cols)
{
    const int64_t Dv = p->dv;
    const uint32_t *va = forward_values_pairs(t, p, vj, j0, cols) ? t->vp : t->vh + j0 / 2 * Dv;
    t->gemm(t->ot, t->qw, va, 1, Dv, t->pp, t->qw, Dv, t->qw, sdpa_half_up(cols), 1.0f, true);
}

/* V^T's word (i, pair) by rows of vt (or vp transposed into vpt) */
static void forward_values_amx(const fused_forward_tiles *t, const sdpa_problem *p, const float *vj, int64_t j0,
                               int64_t cols)
{
    const int64_t Dv = p->dv, hc = sdpa_half_up(cols);
    const bool own = forward_values_pairs(t, p, vj, j0, cols);
    if (own) transpose_words(t->vpt, hc, t->vp, Dv, hc, Dv);
    const uint32_t *va = own ? t->vpt : t->vt + j0 / 2;
    attn__tile_gemm_amx(t->ot, t->qw, va, own ? hc : sdpa_half_up(p->lk), 1, t->pp, t->qw, Dv, t->qw, hc, 1.0f, true);
}

static void backward_head_pairs(const fused_backward_tiles *t, const sdpa_problem *p, const float *q, const float *dout,
                                int64_t bh)
{
    const int64_t D = p->d, Dv = p->dv, Lq = p->lq;
    attn__bf16_pack_col_pairs(t->qtp, t->ld, t->qt, t->ld, D, t->ld);
    attn__bf16_pack_col_pairs(t->dotp, t->ld, t->dot, t->ld, Dv, t->ld);
    attn__bf16_pack_col_pairs(t->qc, D, q + bh * Lq * D, D, Lq, D);
    attn__bf16_pack_col_pairs(t->doc, Dv, dout + bh * Lq * Dv, Dv, Lq, Dv);
}

static void backward_keys_pairs(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    const int64_t D = p->d, Dv = p->dv;
    attn__bf16_pack_row_pairs(t->kr, sdpa_half_up(D), x->kj, D, x->cols, D);
    attn__bf16_pack_col_pairs(t->kc, D, x->kj, D, x->cols, D);
    attn__bf16_pack_row_pairs(t->vr, sdpa_half_up(Dv), x->vj, Dv, x->cols, Dv);
}

static void backward_scores_pairs(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    const int64_t hD = sdpa_half_up(p->d);
    t->gemm(t->st, x->qw, t->kr, hD, 1, t->qtp + x->i0, t->ld, x->cols, x->qw, hD, p->scale, false);
}

static void backward_probs_grad_pairs(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    const int64_t hDv = sdpa_half_up(p->dv);
    t->gemm(t->dpt, x->qw, t->vr, hDv, 1, t->dotp + x->i0, t->ld, x->cols, x->qw, hDv, 1.0f, false);
}

static void backward_values_grad_pairs(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x,
                                       const float *pt)
{
    const int64_t Dv = p->dv;
    attn__bf16_pack_row_pairs(t->pr, SDPA_BR / 2, pt, x->qw, x->cols, x->rows);
    t->gemm(x->dvj, Dv, t->pr, SDPA_BR / 2, 1, t->doc + x->i0 / 2 * Dv, Dv, x->cols, Dv, sdpa_half_up(x->rows), 1.0f,
            true);
}

/* dK_j += scale dS^T Q_i, with dS^T's pairs by columns packed into dsc (dQ's operand) too */
static void key_grad_pairs(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    const int64_t D = p->d;
    attn__bf16_pack_col_pairs(t->dsc, x->qw, t->dpt, x->qw, x->cols, x->qw);
    attn__bf16_pack_row_pairs(t->dsr, SDPA_BR / 2, t->dpt, x->qw, x->cols, x->rows);
    t->gemm(x->dkj, D, t->dsr, SDPA_BR / 2, 1, t->qc + x->i0 / 2 * D, D, x->cols, D, sdpa_half_up(x->rows), p->scale,
            true);
}

/* dS's word (r, pair) by columns of dsc */
static void backward_qk_grad_bf16(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    const int64_t D = p->d;
    key_grad_pairs(t, p, x);
    t->gemm(x->dqi, D, t->dsc, 1, x->qw, t->kc, D, x->rows, D, sdpa_half_up(x->cols), p->scale, true);
}

/* dS's word (r, pair) by rows: dsc transposed into pr (read already) */
static void backward_qk_grad_amx(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x)
{
    const int64_t D = p->d, hc = sdpa_half_up(x->cols);
    key_grad_pairs(t, p, x);
    transpose_words(t->pr, hc, t->dsc, x->qw, hc, x->rows);
    attn__tile_gemm_amx(x->dqi, D, t->pr, hc, 1, t->kc, D, x->rows, D, hc, p->scale, true);
}

static const fused_products products_f32 = {
    .forward_block = forward_block_f32,
    .forward_scores = forward_scores_f32,
    .forward_values = forward_values_f32,
    .backward_head = backward_head_f32,
    .backward_keys = backward_keys_f32,
    .backward_scores = backward_scores_f32,
    .backward_probs_grad = backward_probs_grad_f32,
    .backward_values_grad = backward_values_grad_f32,
    .backward_qk_grad = backward_qk_grad_f32,
};
/* The pair kinds share all but their product and three layouts: AMX loads its A operand by rows
 * of pairs, so V^T and dS come transposed (forward_block, forward_values, backward_qk_grad) */
#define PAIR_PRODUCTS(GEMM, KIND)                                                                                      \
    {                                                                                                                  \
        .gemm = GEMM, .forward_block = forward_block_##KIND, .forward_scores = forward_scores_pairs,                   \
        .forward_values = forward_values_##KIND, .backward_head = backward_head_pairs,                                 \
        .backward_keys = backward_keys_pairs, .backward_scores = backward_scores_pairs,                                \
        .backward_probs_grad = backward_probs_grad_pairs, .backward_values_grad = backward_values_grad_pairs,          \
        .backward_qk_grad = backward_qk_grad_##KIND,                                                                   \
    }
static const fused_products products_bf16 = PAIR_PRODUCTS(attn__tile_gemm_bf16, bf16);
static const fused_products products_amx = PAIR_PRODUCTS(attn__tile_gemm_amx, amx);
static const fused_products products_bfdot = PAIR_PRODUCTS(attn__tile_gemm_bfdot, bf16);
#undef PAIR_PRODUCTS

const fused_products *sdpa_fused_products(const sdpa_problem *p)
{
    if (!p->bf16) return &products_f32;
    return p->sums == SDPA_SUMS_AMX ? &products_amx : p->sums == SDPA_SUMS_BFDOT ? &products_bfdot : &products_bf16;
}
