/* The bound attn.h states for attention with bf16 products (MEDIUM precision), carried through
 * one head's forward and backward in float64 to first order, from the probabilities P. With
 * u = 2^-8 for each rounding to bf16 and w = 2^-24 for float32 (a product's sum of K terms: K w):
 *   eS_ij = scale (2u + D w) sum_d |q_id k_jd|                      a score
 *   eP_ij = P_ij (eS_ij + sum_k P_ik eS_ik) + 4 Lk w P_ij            a probability (softmax)
 *   eO_ic = sum_j (eP_ij + (2u + Lk w) P_ij) |v_jc|                  P and V rounded again
 *   edP_ij = (2u + Dv w) sum_c |dO_ic v_jc|
 *   eD_i  = max(sum_c |dO_ic| eO_ic, sum_j eP_ij |dP_ij| + P_ij edP_ij) + Dv w sum_c |dO_ic O_ic|
 *   edS_ij = eP_ij |dP_ij - D_i| + P_ij (edP_ij + eD_i)
 *   edQ_id = scale sum_j (edS_ij + (2u + Lk w) |dS_ij|) |k_jd|;  dK likewise over i with |q_id|
 *   edV_jc = sum_i (eP_ij + (2u + Lq w) P_ij) |dO_ic|
 * (masked scores have P = 0 and add nothing). A result passes within 1.1 e + its float32 tolerance
 * (1.1: the second-order terms). */
#ifndef ATTN_TESTKIT_BF16_H
#define ATTN_TESTKIT_BF16_H

#include <stdbool.h>
#include <stdint.h>

typedef struct tk_head {
    int64_t lq, lk, d, dv;
    double scale;
} tk_head;

/* One head: q (Lq, D), k (Lk, D), v (Lk, Dv), dout (Lq, Dv), P (Lq, Lk) the probabilities. Writes
 * the bounds eo (Lq, Dv), edq (Lq, D), edk (Lk, D), edv (Lk, Dv); false when out of memory. */
bool tk_sdpa_bf16_bound(const tk_head *h, const float *q, const float *k, const float *v, const float *dout,
                        const double *P, double *eo, double *edq, double *edk, double *edv);

#endif
