/* Private: the fused attention's tiles and its products (attention_fused.c), of one kind per
 * call (attention_fused_products.c): float32 tiles read in place; bf16 pairs packed from them and
 * summed as VDPBF16PS, BFDOT or AMX sums them (sdpa_problem's bf16 and sums). The
 * fused passes pick the kind once, sdpa_fused_products, and name each product by its formula. */
#ifndef ATTN_KERNELS_ATTENTION_FUSED_H
#define ATTN_KERNELS_ATTENTION_FUSED_H

#include "attention_internal.h"

#include <stdbool.h>
#include <stdint.h>

#define sdpa_fused_products attn__sdpa_fused_products

/* SDPA_BR queries (a multiple of every VF_LANES) by SDPA_BC keys: the blocks that mask_block
 * answers for (attn.h) */
enum {
    SDPA_BR = ATTN_MASK_BLOCK_Q,
    SDPA_BC = ATTN_MASK_BLOCK_KV
};

static inline int64_t sdpa_half_up(int64_t n)
{
    return (n + 1) / 2;
}

/* A product of bf16 pair words with float32 sums: attn__tile_gemm_bf16's, _amx's or _bfdot's */
typedef void fused_pairs_gemm(float *c, int64_t ldc, const uint32_t *a, int64_t a_rs, int64_t a_ks, const uint32_t *b,
                              int64_t ldb, int64_t m, int64_t n, int64_t kp, float alpha, bool accumulate);

/* One query block's tiles in a thread's scratch (forward_block); qw query lanes, the block's rows
 * rounded up to whole vectors. The pair words (bf16 kinds alone) hold two rows or two columns of
 * bf16 in a 32-bit word (bf16_internal.h). */
typedef struct fused_forward_tiles {
    int64_t qw;
    fused_pairs_gemm *gemm;  /* the pair kinds' product (fused_products.gemm) */
    float *qt;               /* (D, qw) Q^T of the block, zero past its rows */
    float *st;               /* (BC, qw) scores S^T, then probabilities P^T */
    float *ot;               /* (Dv, qw) unnormalised O^T */
    bool pairs_from_softmax; /* online_softmax writes P^T's pairs to pp (bf16 kinds without dropout) */
    uint32_t *qp;            /* (D/2, qw) of Q^T's rows */
    uint32_t *vp;            /* (BC/2, Dv) of one tile of V's rows */
    uint32_t *pp;            /* (BC/2, qw) of P^T's rows */
    float *mark;             /* (2) the key/value head kh and vh hold, -1: none */
    uint32_t *kh;            /* (Lk, D/2) in K's rows, the whole head */
    uint32_t *vh;            /* (Lk/2, Dv) of V's rows, the whole head */
    uint32_t *vt;            /* amx: (Dv, Lk/2) vh transposed (AMX loads A by rows of pairs) */
    uint32_t *vpt;           /* amx: (Dv, BC/2) vp transposed */
} fused_forward_tiles;

/* One head's tiles in a thread's scratch (backward_head); ld >= Lq the leading dimension of Q^T
 * and dO^T. */
typedef struct fused_backward_tiles {
    int64_t ld;
    fused_pairs_gemm *gemm; /* the pair kinds' product (fused_products.gemm) */
    float *qt;              /* (D, ld) Q^T of the head */
    float *dot;             /* (Dv, ld) dO^T */
    float *st;              /* (BC, qw) S^T, then P^T */
    float *dpt;             /* (BC, qw) dP^T, then dS^T */
    uint32_t *qtp;          /* (D/2, ld) of Q^T's rows */
    uint32_t *dotp;         /* (Dv/2, ld) of dO^T's rows */
    uint32_t *qc;           /* (Lq/2, D) of Q's rows */
    uint32_t *doc;          /* (Lq/2, Dv) of dO's rows */
    uint32_t *kr;           /* (BC, D/2) in K_j's rows */
    uint32_t *kc;           /* (BC/2, D) of K_j's rows */
    uint32_t *vr;           /* (BC, Dv/2) in V_j's rows */
    uint32_t *pr;           /* (BC, qw/2) in dropout(P)^T's rows */
    uint32_t *dsr;          /* (BC, qw/2) in dS^T's rows */
    uint32_t *dsc;          /* (BC/2, qw) of dS^T's rows */
} fused_backward_tiles;

/* A tile of the backward: queries [i0, i0 + rows) (qw lanes), keys [j0, j0 + cols) of one head,
 * and where their rows start in the tensors */
typedef struct fused_tile {
    int64_t i0, rows, qw, j0, cols;
    const float *qi, *doi, *kj, *vj; /* Q_i, dO_i (rows, D / Dv); K_j, V_j (cols, D / Dv) */
    float *dqi, *dkj, *dvj;          /* their gradients, accumulated */
} fused_tile;

/* The products of one kind. The pair kinds pack the operands they read (at the points named);
 * float32 reads them in place and packs nothing. */
typedef struct fused_products {
    fused_pairs_gemm *gemm; /* the pair kinds' product; NULL: float32 */
    /* forward_block, once per query block, with t->qt filled: the block's and its key/value head
     * bhk's operands (the head's K and V once per head and thread: t->mark) */
    void (*forward_block)(fused_forward_tiles *t, const sdpa_problem *p, const float *k, const float *v, int64_t bhk);
    /* S^T (cols, qw) = scale K_j Q^T, keys [j0, j0 + cols); kj = K_j's rows */
    void (*forward_scores)(const fused_forward_tiles *t, const sdpa_problem *p, const float *kj, int64_t j0,
                           int64_t cols);
    /* O^T (Dv, qw) += V_j^T P^T */
    void (*forward_values)(const fused_forward_tiles *t, const sdpa_problem *p, const float *vj, int64_t j0,
                           int64_t cols);
    /* backward_head, once per head bh, with t->qt and t->dot filled: Q's and dO's operands */
    void (*backward_head)(const fused_backward_tiles *t, const sdpa_problem *p, const float *q, const float *dout,
                          int64_t bh);
    /* once per key block: K_j's and V_j's operands */
    void (*backward_keys)(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x);
    /* S^T = scale K_j Q_i^T */
    void (*backward_scores)(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x);
    /* dP^T = V_j dO_i^T */
    void (*backward_probs_grad)(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x);
    /* dV_j += P'^T dO_i, P'^T (cols, qw) the probabilities after dropout */
    void (*backward_values_grad)(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x,
                                 const float *pt);
    /* dQ_i += scale dS K_j and dK_j += scale dS^T Q_i, dS^T in t->dpt */
    void (*backward_qk_grad)(const fused_backward_tiles *t, const sdpa_problem *p, const fused_tile *x);
} fused_products;

/* The kind of p's products: float32, or bf16 pairs with p->sums */
const fused_products *sdpa_fused_products(const sdpa_problem *p);

#endif
