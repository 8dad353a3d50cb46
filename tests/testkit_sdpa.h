/* One head of scaled dot-product attention from its definition (attn.h), forward and backward, in
 * three arithmetics: float64 (the reference), and plain float32 with every sum taken in index
 * order or in reverse (what a user writing the formulas in float32 gets; the yardstick of
 * FlashAttention's criterion), with bf16 product operands for MEDIUM precision. The caller decides
 * every pair's fate (hidden, bias, dropout factor), so one routine serves every mask, the window,
 * ALiBi, the callbacks and packed sequences:
 *   r = scale q_i . k_j,  x = mod(r),  y = cap(x) = C tanh(x / C) (C > 0),  S = y + bias
 *   S = -inf where hidden (or where mod or bias give -inf),  P = softmax_j(S),  Pd = P drop
 *   O = Pd V;  dP = drop (dO V^T),  D = rowsum(P dP),  dS = P (dP - D) cap'(x) mod'(r)
 *   dQ = scale dS K,  dK += scale dS^T Q,  dV += Pd^T dO
 * A row with no visible key gets O = 0 and no gradient. The float64 pass also gives each result's
 * first-order size of one rounding of every operation on its path (the `mag` outputs): the floor
 * of the criterion, "one rounding of the terms' size". */
#ifndef ATTN_TESTKIT_SDPA_H
#define ATTN_TESTKIT_SDPA_H

#include <stdbool.h>
#include <stdint.h>

typedef enum tk_arith {
    TK_F64,         /* float64 throughout: the reference */
    TK_F32,         /* float32, every sum in index order */
    TK_F32_REVERSE, /* float32, every sum in reverse index order */
} tk_arith;

/* A score modifier as a pair of functions: the library's callback (float) for the float32
 * arithmetic, its float64 twin with first and second derivatives for the reference */
typedef struct tk_score_mod {
    float (*f32)(float s, int64_t b, int64_t h, int64_t i, int64_t j, void *user);
    double (*f64)(double s, int64_t b, int64_t h, int64_t i, int64_t j, void *user);
    double (*d1)(double s, int64_t b, int64_t h, int64_t i, int64_t j, void *user);
    double (*d2)(double s, int64_t b, int64_t h, int64_t i, int64_t j, void *user);
    void *user;
    int64_t b, h; /* the indices the callbacks see */
} tk_score_mod;

typedef struct tk_frame {
    int64_t lq, lk, d, dv;
    const float *q, *k, *v, *dout;  /* rows i of q (D) and dout (Dv), j of k (D) and v (Dv) */
    int64_t q_rs, k_rs, v_rs, g_rs; /* their row strides in floats */
    double scale, softcap;          /* softcap 0: none */
    const uint8_t *hidden;          /* (Lq, Lk) 1 = the pair is masked */
    const double *bias;             /* (Lq, Lk) added after the cap (ALiBi, additive); NULL: none */
    const float *drop;              /* (Lq, Lk) dropout's factor (0 or 1/(1-p)); NULL: none */
    const tk_score_mod *mod;        /* NULL: none */
    bool bf16;                      /* product operands rounded to bf16 (float32 arithmetics only) */
} tk_frame;

/* Results in the caller's layout, at the strides of the inputs (o and dq at g_rs and q_rs, dk and
 * dv at k_rs and v_rs): o and dq are written, dk and dv added to (the heads that share a key/value
 * head). In the float32 arithmetics the values are floats and the additions into dk and dv round
 * to float. The mag arrays (same layouts; NULL: not wanted) receive the float64 pass's sizes. */
typedef struct tk_frame_out {
    double *o, *dq, *dk, *dv;
    double *mo, *mdq, *mdk, *mdv;
} tk_frame_out;

/* false when out of memory */
bool tk_sdpa_frame(const tk_frame *f, tk_arith arith, const tk_frame_out *out);

/* x rounded to bf16 (nearest even), as a float */
float tk_bf16_round(float x);

#endif
