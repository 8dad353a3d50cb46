/* attn_sdpa_varlen, packed sequences of different lengths (FlashAttention's varlen call):
 *   - both kernels against a float64 implementation written here from the definitions (attn.h:
 *     each sequence in its own (Lq_b, Lk_b) frame, causal and the window bottom-right aligned),
 *     output and every gradient, with GQA, the window, ALiBi (H) and (batch, H), soft-capping,
 *     empty sequences on either side, sequences that cross the fused kernel's tiles, and many
 *     short sequences on 2 threads (the sequences as the parallel loop) beside one long one
 *     (the kernel's own parallel loop);
 *   - the packed result against the padded one on the same sequences (attn_sdpa on (B, H, Lmax, .)
 *     with valid_lens), output and every gradient at the sequences' rows;
 *   - the fused kernel against its reference twin under dropout (the same draws), and finite
 *     differences of both, with and without dropout;
 *   - attn_mha_forward_packed (GQA 4/2, with and without causal) against attn_mha_forward on the
 *     same sequences padded with key_padding: output, dx and every parameter's gradient;
 *   - 6000 sequences of one token or none: out = v exactly (a query seeing its own key alone);
 *   - the score and mask callbacks (attn_varlen_opts.mods) in each sequence's frame: a score_mod
 *     written as ALiBi and a mask_mod written as the window, both from the sequence's own Lk_b - Lq_b
 *     (which only the sequence index b that the callbacks get can give), with a mask_block that
 *     skips the blocks the window leaves out, against the built-in ALiBi and window: output and
 *     every gradient, both kernels, 1 and 2 threads;
 *   - every refusal (offsets, shapes, options), each with the message naming what is wrong.
 * Tolerance: float32 against float64 (or two float32 sides) over the longest path of roundings,
 * testkit.h's tk_tol_of(2, n, 4, 8) with n = D + Lk + Dv + Lq + 16 of the longest sequence (the
 * products, the softmax's sum, the backward's sums over keys and queries), as
 * test_attention_features. */
#include "testkit.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_SEQS = 64
};

typedef struct vcase {
    const char *name;
    int64_t batch, H, Hkv, D, Dv;
    int64_t lq[MAX_SEQS], lk[MAX_SEQS]; /* lengths; lk[0] < 0: lk = lq (self-attention) */
    bool causal, window;
    int64_t left, right;
    bool alibi, alibi_per_seq;
    float softcap;
    int threads;
} vcase;

/* cu (batch + 1) from lengths; the total */
static int64_t offsets(int64_t *cu, const int64_t *len, int64_t batch)
{
    cu[0] = 0;
    for (int64_t b = 0; b < batch; b++) cu[b + 1] = cu[b] + len[b];
    return cu[batch];
}

static attn_varlen_opts opts_of(const vcase *c, const float *slopes, attn_sdpa_impl impl)
{
    attn_varlen_opts o = {
        .causal = c->causal, .enable_gqa = c->Hkv != c->H, .features.softcap = c->softcap, .impl = impl};
    if (c->window) o.features.window = (attn_window){true, c->left, c->right};
    if (c->alibi) {
        o.features.alibi_slopes = slopes, o.features.alibi_ndim = c->alibi_per_seq ? 2 : 1;
        o.features.alibi_shape[0] = c->alibi_per_seq ? c->batch : c->H, o.features.alibi_shape[1] = c->H;
    }
    return o;
}

/* float64 forward and backward from the definitions, in the packed layout: o (total_q, H, Dv),
 * dq (total_q, H, D), dk (total_k, Hkv, D), dv (total_k, Hkv, Dv) */
static void reference(const vcase *c, const int64_t *cu_q, const int64_t *cu_k, const float *slopes, const float *q,
                      const float *k, const float *v, const float *dout, double *o, double *dq, double *dk, double *dv)
{
    const int64_t H = c->H, Hkv = c->Hkv, G = H / Hkv, D = c->D, Dv = c->Dv;
    const double scale = 1.0 / sqrt((double)D);
    for (int64_t b = 0; b < c->batch; b++) {
        const int64_t Lq = cu_q[b + 1] - cu_q[b], Lk = cu_k[b + 1] - cu_k[b], shift = Lk - Lq;
        double *S = malloc(sizeof(double) * (size_t)(Lq * Lk + 1)), *P = malloc(sizeof(double) * (size_t)(Lq * Lk + 1));
        double *T = malloc(sizeof(double) * (size_t)(Lq * Lk + 1));
        for (int64_t h = 0; h < H; h++) {
            const int64_t hk = h / G;
            const double slope = c->alibi ? slopes[(c->alibi_per_seq ? b * H : 0) + h] : 0.0;
#define QROW(i) (q + ((cu_q[b] + (i)) * H + h) * D)
#define GROW(i) (dout + ((cu_q[b] + (i)) * H + h) * Dv)
#define KROW(j) (k + ((cu_k[b] + (j)) * Hkv + hk) * D)
#define VROW(j) (v + ((cu_k[b] + (j)) * Hkv + hk) * Dv)
            for (int64_t i = 0; i < Lq; i++) {
                double m = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < Lk; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++) s += (double)QROW(i)[d] * KROW(j)[d];
                    s *= scale;
                    T[i * Lk + j] = 0.0;
                    if (c->softcap > 0.0f) T[i * Lk + j] = tanh(s / c->softcap), s = c->softcap * T[i * Lk + j];
                    s -= slope * fabs((double)(i + shift - j));
                    bool seen = !(c->causal && j > i + shift);
                    if (c->window && c->left >= 0 && j < i + shift - c->left) seen = false;
                    if (c->window && c->right >= 0 && j > i + shift + c->right) seen = false;
                    S[i * Lk + j] = seen ? s : -INFINITY;
                    m = fmax(m, S[i * Lk + j]);
                }
                for (int64_t j = 0; j < Lk; j++) sum += m == -INFINITY ? 0.0 : exp(S[i * Lk + j] - m);
                for (int64_t j = 0; j < Lk; j++) P[i * Lk + j] = sum > 0.0 ? exp(S[i * Lk + j] - m) / sum : 0.0;
                for (int64_t e = 0; e < Dv; e++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < Lk; j++) acc += P[i * Lk + j] * VROW(j)[e];
                    o[((cu_q[b] + i) * H + h) * Dv + e] = acc;
                }
            }
            for (int64_t i = 0; i < Lq; i++) {
                double Di = 0.0;
                for (int64_t j = 0; j < Lk; j++) {
                    double dP = 0.0;
                    for (int64_t e = 0; e < Dv; e++) dP += (double)GROW(i)[e] * VROW(j)[e];
                    S[i * Lk + j] = dP; /* S holds dP from here */
                    Di += P[i * Lk + j] * dP;
                }
                for (int64_t j = 0; j < Lk; j++) {
                    double dS = P[i * Lk + j] * (S[i * Lk + j] - Di);
                    if (c->softcap > 0.0f) dS *= 1.0 - T[i * Lk + j] * T[i * Lk + j];
                    for (int64_t d = 0; d < D; d++) {
                        dq[((cu_q[b] + i) * H + h) * D + d] += scale * dS * KROW(j)[d];
                        dk[((cu_k[b] + j) * Hkv + hk) * D + d] += scale * dS * QROW(i)[d];
                    }
                    for (int64_t e = 0; e < Dv; e++)
                        dv[((cu_k[b] + j) * Hkv + hk) * Dv + e] += P[i * Lk + j] * GROW(i)[e];
                }
            }
#undef QROW
#undef GROW
#undef KROW
#undef VROW
        }
        free(S), free(P), free(T);
    }
}

/* The bound of a case: its longest sequences' path of roundings */
static tk_tol tol_of(const vcase *c, const int64_t *lk)
{
    int64_t lq_max = 0, lk_max = 0;
    for (int64_t b = 0; b < c->batch; b++) {
        lq_max = c->lq[b] > lq_max ? c->lq[b] : lq_max;
        lk_max = lk[b] > lk_max ? lk[b] : lk_max;
    }
    return tk_tol_of(2, (double)(c->D + lk_max + c->Dv + lq_max + 16), 4, 8);
}

static void against_float64(const vcase *c)
{
    const int64_t *lk = c->lk[0] < 0 ? c->lq : c->lk;
    int64_t cu_q[MAX_SEQS + 1], cu_k[MAX_SEQS + 1];
    const int64_t tq = offsets(cu_q, c->lq, c->batch), tk = offsets(cu_k, lk, c->batch);
    const int64_t nq = tq * c->H * c->D, nk = tk * c->Hkv * c->D, nv = tk * c->Hkv * c->Dv, no = tq * c->H * c->Dv;
    attn_tensor *q = tk_randn(51, 3, (int64_t[]){tq, c->H, c->D}), *k = tk_randn(52, 3, (int64_t[]){tk, c->Hkv, c->D});
    attn_tensor *v = tk_randn(53, 3, (int64_t[]){tk, c->Hkv, c->Dv}),
                *g = tk_randn(54, 3, (int64_t[]){tq, c->H, c->Dv});
    float slopes[MAX_SEQS * 8];
    for (int64_t i = 0; i < c->batch * c->H; i++) slopes[i] = 0.05f + 0.03f * (float)(i % 7);
    double *exact[4] = {calloc((size_t)no, sizeof(double)), calloc((size_t)nq, sizeof(double)),
                        calloc((size_t)nk, sizeof(double)), calloc((size_t)nv, sizeof(double))};
    reference(c, cu_q, cu_k, slopes, q->data, k->data, v->data, g->data, exact[0], exact[1], exact[2], exact[3]);
    double biggest = 0.0;
    for (int64_t i = 0; i < no; i++) biggest = fmax(biggest, fabs(exact[0][i]));
    TK_CHECK(biggest > 0.1, "%s: the problem leaves keys visible (the largest output is %g)", c->name, biggest);
    const int64_t n[4] = {no, nq, nk, nv};
    float *ref[4];
    for (int t = 0; t < 4; t++) {
        ref[t] = malloc(sizeof(float) * (size_t)(n[t] + 1));
        for (int64_t i = 0; i < n[t]; i++) ref[t][i] = (float)exact[t][i];
    }
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_ctx *ctx = attn_ctx_new(1);
        TK_OK(attn_ctx_set_num_threads(ctx, c->threads));
        attn_tensor *in[3] = {q, k, v};
        for (int i = 0; i < 3; i++) attn_tensor_zero_grad(in[i]);
        attn_varlen_opts o = opts_of(c, slopes, (attn_sdpa_impl)impl);
        attn_tensor *out = attn_sdpa_varlen(ctx, q, k, v, cu_q, cu_k, c->batch, &o);
        const char *impl_name = impl == ATTN_SDPA_REF ? "ref" : "fused";
        TK_CHECK(out && attn_backward_from(ctx, out, g->data) == ATTN_OK, "%s [%s]: forward and backward: %s", c->name,
                 impl_name, attn_last_error());
        if (out) {
            const float *got[4] = {out->data, q->grad, k->grad, v->grad};
            const char *names[4] = {"out", "dq", "dk", "dv"};
            for (int t = 0; t < 4; t++) {
                char what[160];
                snprintf(what, sizeof what, "%s [%s, %d threads]: %s against float64", c->name, impl_name, c->threads,
                         names[t]);
                tk_close_scaled(what, got[t], ref[t], n[t], tol_of(c, lk));
            }
        }
        attn_ctx_free(ctx);
    }
    for (int t = 0; t < 4; t++) free(ref[t]), free(exact[t]);
    attn_tensor_free(q), attn_tensor_free(k), attn_tensor_free(v), attn_tensor_free(g);
}

/* ---- packed against padded on the same sequences ---- */

/* x (B, heads, Lmax, w) of the padded call <-> rows of the packed (total, heads, w) */
static void padded_rows(float *packed, const float *padded, const int64_t *cu, int64_t batch, int64_t heads,
                        int64_t lmax, int64_t w)
{
    for (int64_t b = 0; b < batch; b++)
        for (int64_t i = 0; i < cu[b + 1] - cu[b]; i++)
            for (int64_t h = 0; h < heads; h++)
                memcpy(packed + ((cu[b] + i) * heads + h) * w, padded + ((b * heads + h) * lmax + i) * w,
                       sizeof(float) * (size_t)w);
}

/* Self-attention lengths padded to the longest with valid_lens (B): the padded keys masked, the
 * padded queries' rows left out of the comparison (their dO is 0, so they add no gradient); with
 * Lq = Lk in every sequence and the padded batch, attn_sdpa's alignments meet the varlen ones */
static void against_padded(const vcase *c)
{
    int64_t cu[MAX_SEQS + 1], lmax = 0;
    const int64_t total = offsets(cu, c->lq, c->batch);
    for (int64_t b = 0; b < c->batch; b++) lmax = c->lq[b] > lmax ? c->lq[b] : lmax;
    const int64_t B = c->batch, H = c->H, Hkv = c->Hkv, D = c->D, Dv = c->Dv;
    attn_tensor *pq = tk_randn(61, 4, (int64_t[]){B, H, lmax, D}), *pk = tk_randn(62, 4, (int64_t[]){B, Hkv, lmax, D});
    attn_tensor *pv = tk_randn(63, 4, (int64_t[]){B, Hkv, lmax, Dv}),
                *pg = tk_randn(64, 4, (int64_t[]){B, H, lmax, Dv});
    for (int64_t b = 0; b < B; b++) /* no upstream gradient on the padding's query rows */
        for (int64_t h = 0; h < H; h++)
            memset(pg->data + ((b * H + h) * lmax + c->lq[b]) * Dv, 0,
                   sizeof(float) * (size_t)((lmax - c->lq[b]) * Dv));
    attn_tensor *q = tk_randn(1, 3, (int64_t[]){total, H, D}), *k = tk_randn(1, 3, (int64_t[]){total, Hkv, D});
    attn_tensor *v = tk_randn(1, 3, (int64_t[]){total, Hkv, Dv});
    float *g = malloc(sizeof(float) * (size_t)(total * H * Dv + 1));
    padded_rows(q->data, pq->data, cu, B, H, lmax, D), padded_rows(k->data, pk->data, cu, B, Hkv, lmax, D);
    padded_rows(v->data, pv->data, cu, B, Hkv, lmax, Dv), padded_rows(g, pg->data, cu, B, H, lmax, Dv);
    float slopes[8];
    for (int64_t i = 0; i < H; i++) slopes[i] = 0.3f / (float)(i + 1);
    const int64_t n[4] = {total * H * Dv, total * H * D, total * Hkv * D, total * Hkv * Dv};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_ctx *ctx = attn_ctx_new(1), *pctx = attn_ctx_new(1); /* one graph each */
        TK_OK(attn_ctx_set_num_threads(ctx, c->threads));
        TK_OK(attn_ctx_set_num_threads(pctx, c->threads));
        attn_tensor *all[6] = {pq, pk, pv, q, k, v};
        for (int i = 0; i < 6; i++) attn_tensor_zero_grad(all[i]);
        attn_sdpa_opts po = {.impl = (attn_sdpa_impl)impl, .enable_gqa = Hkv != H, .features.softcap = c->softcap};
        po.mask.causal = c->causal; /* top-left, the same as bottom-right when Lq = Lk */
        po.mask.valid_lens = (attn_lens){c->lq, 1, {B, 0}};
        if (c->window) po.features.window = (attn_window){true, c->left, c->right};
        if (c->alibi) po.features.alibi_slopes = slopes, po.features.alibi_ndim = 1, po.features.alibi_shape[0] = H;
        attn_varlen_opts vo = opts_of(c, slopes, (attn_sdpa_impl)impl);
        attn_tensor *pout = attn_sdpa(pctx, pq, pk, pv, &po, NULL);
        attn_tensor *out = attn_sdpa_varlen(ctx, q, k, v, cu, cu, B, &vo);
        const char *impl_name = impl == ATTN_SDPA_REF ? "ref" : "fused";
        TK_CHECK(pout && out && attn_backward_from(pctx, pout, pg->data) == ATTN_OK &&
                     attn_backward_from(ctx, out, g) == ATTN_OK,
                 "%s [%s]: padded and packed forward and backward: %s", c->name, impl_name, attn_last_error());
        if (pout && out && pq->grad && q->grad) {
            float *want[4] = {malloc(sizeof(float) * (size_t)(n[0] + 1)), malloc(sizeof(float) * (size_t)(n[1] + 1)),
                              malloc(sizeof(float) * (size_t)(n[2] + 1)), malloc(sizeof(float) * (size_t)(n[3] + 1))};
            padded_rows(want[0], pout->data, cu, B, H, lmax, Dv), padded_rows(want[1], pq->grad, cu, B, H, lmax, D);
            padded_rows(want[2], pk->grad, cu, B, Hkv, lmax, D), padded_rows(want[3], pv->grad, cu, B, Hkv, lmax, Dv);
            const float *got[4] = {out->data, q->grad, k->grad, v->grad};
            const char *names[4] = {"out", "dq", "dk", "dv"};
            for (int t = 0; t < 4; t++) {
                char what[160];
                snprintf(what, sizeof what, "%s [%s]: packed %s against padded", c->name, impl_name, names[t]);
                tk_close_scaled(what, got[t], want[t], n[t], tol_of(c, c->lq));
                free(want[t]);
            }
        }
        attn_ctx_free(ctx), attn_ctx_free(pctx);
    }
    free(g);
    attn_tensor *all[8] = {pq, pk, pv, pg, q, k, v, NULL};
    for (int i = 0; all[i]; i++) attn_tensor_free(all[i]);
}

/* ---- dropout (the fused kernel against its twin) and finite differences ---- */

typedef struct fd_user {
    attn_varlen_opts opts;
    const int64_t *cu_q, *cu_k;
    int64_t batch;
} fd_user;

static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const fd_user *u = user;
    return attn_sdpa_varlen(ctx, in[0], in[1], in[2], u->cu_q, u->cu_k, u->batch, &u->opts);
}

static void twins_and_gradchecks(void)
{
    /* dropout 0.3: the same draws in both kernels, each sequence its own */
    const vcase c = {"dropout", 4,  4,    2,    16,   12, {70, 3, 150, 40}, {90, 0, 150, 41}, true, true,
                     50,        -1, true, true, 3.0f, 2};
    int64_t cu_q[5], cu_k[5];
    const int64_t tq = offsets(cu_q, c.lq, c.batch), tk = offsets(cu_k, c.lk, c.batch);
    float slopes[16];
    for (int i = 0; i < 16; i++) slopes[i] = 0.5f / (float)(i + 1);
    attn_tensor *in[3] = {tk_randn(71, 3, (int64_t[]){tq, c.H, c.D}), tk_randn(72, 3, (int64_t[]){tk, c.Hkv, c.D}),
                          tk_randn(73, 3, (int64_t[]){tk, c.Hkv, c.Dv})};
    attn_tensor *g = tk_randn(74, 3, (int64_t[]){tq, c.H, c.Dv});
    float *got[2][4] = {{NULL}};
    const int64_t n[4] = {tq * c.H * c.Dv, tq * c.H * c.D, tk * c.Hkv * c.D, tk * c.Hkv * c.Dv};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_ctx *ctx = attn_ctx_new(9); /* the same seed: the same dropout draws */
        TK_OK(attn_ctx_set_num_threads(ctx, 2));
        for (int i = 0; i < 3; i++) attn_tensor_zero_grad(in[i]);
        attn_varlen_opts o = opts_of(&c, slopes, (attn_sdpa_impl)impl);
        o.dropout_p = 0.3f;
        attn_tensor *out = attn_sdpa_varlen(ctx, in[0], in[1], in[2], cu_q, cu_k, c.batch, &o);
        TK_CHECK(out && attn_backward_from(ctx, out, g->data) == ATTN_OK, "dropout, impl %d: %s", impl,
                 attn_last_error());
        const float *res[4] = {out ? out->data : NULL, in[0]->grad, in[1]->grad, in[2]->grad};
        for (int t = 0; out && t < 4; t++) {
            got[impl - ATTN_SDPA_FUSED][t] = malloc(sizeof(float) * (size_t)n[t]);
            memcpy(got[impl - ATTN_SDPA_FUSED][t], res[t], sizeof(float) * (size_t)n[t]);
        }
        attn_ctx_free(ctx);
    }
    const char *names[4] = {"out", "dq", "dk", "dv"};
    for (int t = 0; t < 4; t++) {
        char what[128];
        snprintf(what, sizeof what, "dropout 0.3 with GQA, causal, window, ALiBi, softcap: fused %s against ref",
                 names[t]);
        if (got[0][t] && got[1][t]) tk_close_scaled(what, got[0][t], got[1][t], n[t], tol_of(&c, c.lk));
        free(got[0][t]), free(got[1][t]);
    }
    /* the draws differ between sequences: two equal sequences packed together get different outputs */
    {
        attn_ctx *ctx = attn_ctx_new(3);
        const int64_t cu[3] = {0, 8, 16};
        attn_tensor *x = tk_randn(75, 3, (int64_t[]){16, 1, 4});
        memcpy(x->data + 32, x->data, sizeof(float) * 32); /* sequence 1 = sequence 0 */
        attn_varlen_opts o = {.dropout_p = 0.5f};
        attn_tensor *out = attn_sdpa_varlen(ctx, x, x, x, cu, cu, 2, &o);
        TK_CHECK(out && memcmp(out->data, out->data + 32, sizeof(float) * 32) != 0,
                 "dropout: two equal sequences get draws of their own");
        attn_ctx_free(ctx);
        attn_tensor_free(x);
    }
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
    attn_tensor_free(g);
    /* finite differences: 3 sequences, one without queries, one without keys */
    const int64_t fq[4] = {0, 3, 3, 7}, fk[4] = {0, 4, 6, 6};
    const vcase s = {"fd", 3, 4, 2, 6, 5, {3, 0, 4}, {4, 2, 0}, true, true, 2, 1, true, true, 2.0f, 1};
    for (int drop = 0; drop < 2; drop++)
        for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
            fd_user u = {opts_of(&s, slopes, (attn_sdpa_impl)impl), fq, fk, 3};
            u.opts.dropout_p = drop ? 0.2f : 0.0f;
            attn_tensor *x[3] = {tk_randn(81, 3, (int64_t[]){7, 4, 6}), tk_randn(82, 3, (int64_t[]){6, 2, 6}),
                                 tk_randn(83, 3, (int64_t[]){6, 2, 5})};
            char what[128];
            snprintf(what, sizeof what, "gradcheck %s%s: GQA 4/2, causal, window (2, 1), ALiBi (batch, H), softcap 2",
                     impl == ATTN_SDPA_REF ? "ref" : "fused", drop ? ", dropout 0.2" : "");
            tk_gradcheck(what, fd_forward, x, 3, &u, 1e-2f, 3e-3f, 2e-2f); /* as test_attention's */
            for (int i = 0; i < 3; i++) attn_tensor_free(x[i]);
        }
}

/* ---- attn_mha_forward_packed against attn_mha_forward on the same sequences padded ---- */

/* A layer of 4 query heads over 2 key/value heads: the packed self-attention equals the padded one
 * with key_padding at the sequences' rows, output and the gradients of x and of every parameter;
 * two float32 sides through the projections, sdpa and the weight gradients' sums:
 * tk_tol_of(2, 160, 4, 8) (TK_TOL_MHA, test_golden_attention.c's derivation) */
static void mha_packed(bool causal)
{
    enum {
        NB = 3,
        LMAX = 9,
        E = 16
    };
    const int64_t lens[NB] = {5, 1, 9}, cu[NB + 1] = {0, 5, 6, 15}, total = 15;
    attn_params *params = attn_params_new();
    attn_mha_layer m;
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    TK_OK(attn_mha_init_gqa(&m, params, "", E, 4, 2, 0, 0, true, 0.0f, &rng));
    for (size_t i = 0; i < attn_params_count(params); i++) /* biases too, which init zeroes */
        attn_tensor_fill_normal(attn_params_at(params, i), &rng, 0.0f, 0.3f);
    attn_tensor *xp = tk_randn(91, 3, (int64_t[]){NB, LMAX, E}), *gp = tk_randn(92, 3, (int64_t[]){NB, LMAX, E});
    attn_tensor *x = tk_randn(1, 2, (int64_t[]){total, E});
    float *g = malloc(sizeof(float) * total * E);
    uint8_t pad[NB * LMAX];
    for (int64_t b = 0; b < NB; b++)
        for (int64_t i = 0; i < LMAX; i++) {
            pad[b * LMAX + i] = i >= lens[b];
            if (i >= lens[b])
                memset(gp->data + (b * LMAX + i) * E, 0, sizeof(float) * E);
            else {
                memcpy(x->data + (cu[b] + i) * E, xp->data + (b * LMAX + i) * E, sizeof(float) * E);
                memcpy(g + (cu[b] + i) * E, gp->data + (b * LMAX + i) * E, sizeof(float) * E);
            }
        }
    const size_t np = attn_params_count(params);
    float *padded_grads[8] = {NULL};
    attn_ctx *ctx = attn_ctx_new(1);
    attn_mha_opts o = {.mask = {.causal = causal, .key_padding = pad, .key_padding_shape = {NB, LMAX}}};
    attn_params_zero_grad(params);
    attn_tensor *want = attn_mha_forward(ctx, &m, xp, xp, xp, &o, NULL);
    TK_CHECK(want && attn_backward_from(ctx, want, gp->data) == ATTN_OK, "padded mha: %s", attn_last_error());
    for (size_t i = 0; want && i < np && i < 8; i++) {
        attn_tensor *t = attn_params_at(params, i);
        padded_grads[i] = malloc(sizeof(float) * (size_t)t->numel);
        memcpy(padded_grads[i], t->grad, sizeof(float) * (size_t)t->numel);
    }
    attn_params_zero_grad(params);
    attn_ctx *pctx = attn_ctx_new(1);
    attn_tensor *got = attn_mha_forward_packed(pctx, &m, x, cu, NB, causal);
    TK_CHECK(got && attn_backward_from(pctx, got, g) == ATTN_OK, "packed mha: %s", attn_last_error());
    if (want && got) {
        float *rows[2] = {malloc(sizeof(float) * total * E), malloc(sizeof(float) * total * E)};
        for (int64_t b = 0; b < NB; b++)
            for (int64_t i = 0; i < lens[b]; i++) {
                memcpy(rows[0] + (cu[b] + i) * E, want->data + (b * LMAX + i) * E, sizeof(float) * E);
                memcpy(rows[1] + (cu[b] + i) * E, xp->grad + (b * LMAX + i) * E, sizeof(float) * E);
            }
        char what[128];
        const tk_tol tol = tk_tol_of(2, 160, 4, 8);
        snprintf(what, sizeof what, "mha packed%s: out against padded", causal ? ", causal" : "");
        tk_close_scaled(what, got->data, rows[0], total * E, tol);
        snprintf(what, sizeof what, "mha packed%s: dx against padded", causal ? ", causal" : "");
        tk_close_scaled(what, x->grad, rows[1], total * E, tol);
        for (size_t i = 0; i < np && i < 8; i++) {
            attn_tensor *t = attn_params_at(params, i);
            snprintf(what, sizeof what, "mha packed%s: grad %s against padded", causal ? ", causal" : "",
                     attn_params_name(params, i));
            tk_close_scaled(what, t->grad, padded_grads[i], t->numel, tol);
        }
        free(rows[0]), free(rows[1]);
    }
    TK_CHECK(!attn_mha_forward_packed(pctx, &m, xp, cu, NB, causal) && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "expected (total_q, 16)"),
             "a 3-D x refused: %s", attn_last_error());
    for (size_t i = 0; i < 8; i++) free(padded_grads[i]);
    free(g);
    attn_ctx_free(ctx), attn_ctx_free(pctx);
    attn_tensor_free(xp), attn_tensor_free(gp), attn_tensor_free(x);
    attn_params_free(params);
}

/* ---- many short sequences: 6000, every sixth empty, the others of one token ---- */

/* A one-token sequence's query sees its own key alone: P = exp(0) / 1 = 1 exactly, so out = v
 * exactly, in both kernels (the order of the sequences among the threads changes nothing) */
static void one_token_sequences(void)
{
    enum {
        NSEQ = 6000
    };
    int64_t *cu = malloc(sizeof(int64_t) * (NSEQ + 1));
    cu[0] = 0;
    for (int64_t b = 0; b < NSEQ; b++) cu[b + 1] = cu[b] + (b % 6 != 5);
    const int64_t total = cu[NSEQ];
    attn_tensor *q = tk_randn(95, 3, (int64_t[]){total, 2, 4}), *k = tk_randn(96, 3, (int64_t[]){total, 2, 4});
    attn_tensor *v = tk_randn(97, 3, (int64_t[]){total, 2, 3});
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_ctx *ctx = attn_ctx_new(1);
        TK_OK(attn_ctx_set_num_threads(ctx, 2));
        attn_varlen_opts o = {.causal = true, .impl = (attn_sdpa_impl)impl};
        attn_tensor *out = attn_sdpa_varlen(ctx, q, k, v, cu, cu, NSEQ, &o);
        TK_CHECK(out && !memcmp(out->data, v->data, sizeof(float) * (size_t)v->numel),
                 "%d one-token sequences [%s]: out = v exactly (%s)", (int)total,
                 impl == ATTN_SDPA_REF ? "ref" : "fused", attn_last_error());
        attn_ctx_free(ctx);
    }
    attn_tensor_free(q), attn_tensor_free(k), attn_tensor_free(v);
    free(cu);
}

/* ---- score and mask callbacks ---- */

/* What the callbacks read: the offsets (a sequence's Lk_b - Lq_b), the slopes, the window */
typedef struct seq_frames {
    const int64_t *cu_q, *cu_k;
    const float *slopes;
    int64_t left, right;
} seq_frames;

static int64_t frame_shift(const seq_frames *f, int64_t b) /* Lk_b - Lq_b */
{
    return (f->cu_k[b + 1] - f->cu_k[b]) - (f->cu_q[b + 1] - f->cu_q[b]);
}

static float alibi_mod(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    const seq_frames *f = user;
    return s - f->slopes[h] * (float)llabs(q + frame_shift(f, b) - kv);
}

static float alibi_mod_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)s, (void)b, (void)h, (void)q, (void)kv, (void)user;
    return 1.0f;
}

static bool window_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    const seq_frames *f = user;
    (void)h;
    const int64_t at = q + frame_shift(f, b);
    return kv >= at - f->left && kv <= at + f->right;
}

/* EMPTY where no query of the block reaches its keys through the window, else PARTIAL */
static int window_blocks(int64_t b, int64_t h, int64_t q_begin, int64_t q_end, int64_t kv_begin, int64_t kv_end,
                         void *user)
{
    const seq_frames *f = user;
    (void)h;
    const int64_t lo = q_begin + frame_shift(f, b) - f->left, hi = q_end - 1 + frame_shift(f, b) + f->right;
    return kv_end - 1 < lo || kv_begin > hi ? ATTN_BLOCK_EMPTY : ATTN_BLOCK_PARTIAL;
}

static void callbacks_as_built_ins(int threads)
{
    enum {
        NB = 4,
        H = 4,
        HKV = 2,
        D = 16
    };
    const int64_t lq[NB] = {70, 200, 1, 9}, lk[NB] = {150, 40, 6, 9};
    int64_t cq[NB + 1], ck[NB + 1];
    const int64_t tq = offsets(cq, lq, NB), tk = offsets(ck, lk, NB);
    float slopes[H];
    TK_OK(attn_alibi_slopes(slopes, H));
    seq_frames frames = {.cu_q = cq, .cu_k = ck, .slopes = slopes, .left = 30, .right = 3};
    attn_tensor *q = tk_randn(71, 3, (int64_t[]){tq, H, D}), *k = tk_randn(72, 3, (int64_t[]){tk, HKV, D});
    attn_tensor *v = tk_randn(73, 3, (int64_t[]){tk, HKV, D}), *g = tk_randn(74, 3, (int64_t[]){tq, H, D});
    attn_tensor *in[3] = {q, k, v};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        float *res[2][4] = {{NULL}};
        for (int form = 0; form < 2; form++) { /* 0: built in, 1: callbacks */
            attn_ctx *ctx = attn_ctx_new(1);
            TK_OK(attn_ctx_set_num_threads(ctx, threads));
            attn_varlen_opts o = {.enable_gqa = true, .impl = (attn_sdpa_impl)impl};
            if (form == 0) {
                o.features.window = (attn_window){true, frames.left, frames.right};
                o.features.alibi_slopes = slopes, o.features.alibi_ndim = 1, o.features.alibi_shape[0] = H;
            } else {
                o.features.mods = (attn_score_mods){.score_mod = alibi_mod,
                                                    .score_mod_grad = alibi_mod_grad,
                                                    .mask_mod = window_mask,
                                                    .mask_block = window_blocks,
                                                    .user = &frames};
            }
            for (int i = 0; i < 3; i++) attn_tensor_zero_grad(in[i]);
            attn_tensor *out = attn_sdpa_varlen(ctx, q, k, v, cq, ck, NB, &o);
            TK_CHECK(out && attn_backward_from(ctx, out, g->data) == ATTN_OK, "callbacks: form %d: %s", form,
                     attn_last_error());
            if (out) {
                res[form][0] = malloc(sizeof(float) * (size_t)out->numel);
                memcpy(res[form][0], out->data, sizeof(float) * (size_t)out->numel);
                for (int i = 0; i < 3; i++) {
                    res[form][i + 1] = malloc(sizeof(float) * (size_t)in[i]->numel);
                    memcpy(res[form][i + 1], in[i]->grad, sizeof(float) * (size_t)in[i]->numel);
                }
            }
            attn_ctx_free(ctx);
        }
        const char *names[4] = {"out", "dq", "dk", "dv"};
        const int64_t n[4] = {tq * H * D, q->numel, k->numel, v->numel};
        for (int i = 0; i < 4 && res[0][i] && res[1][i]; i++) {
            char what[160];
            snprintf(what, sizeof what,
                     "varlen callbacks as ALiBi and the window [%s, %d threads]: %s against the built-ins",
                     impl == ATTN_SDPA_REF ? "ref" : "fused", threads, names[i]);
            tk_close_scaled(what, res[1][i], res[0][i], n[i], tk_tol_of(2, D + 150 + D + 200 + 16, 4, 8));
        }
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < 4; i++) free(res[f][i]);
    }
    attn_tensor_free(q), attn_tensor_free(k), attn_tensor_free(v), attn_tensor_free(g);
}

/* ---- refusals ---- */

static void refused(attn_tensor *out, attn_status want, const char *needle, const char *what)
{
    TK_CHECK(!out && attn_last_status() == want && strstr(attn_last_error(), needle),
             "%s: refused with %s naming \"%s\" (got %s: %s)", what, attn_status_name(want), needle,
             out ? "a result" : attn_status_name(attn_last_status()), attn_last_error());
}

static void refusals(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *q = attn_tensor_zeros(ctx, 3, (int64_t[]){5, 4, 8}),
                *k = attn_tensor_zeros(ctx, 3, (int64_t[]){7, 2, 8});
    attn_tensor *v = attn_tensor_zeros(ctx, 3, (int64_t[]){7, 2, 3}),
                *k4 = attn_tensor_zeros(ctx, 3, (int64_t[]){7, 4, 8});
    attn_tensor *v6 = attn_tensor_zeros(ctx, 3, (int64_t[]){6, 2, 3}),
                *k5 = attn_tensor_zeros(ctx, 3, (int64_t[]){7, 2, 5});
    attn_tensor *k3 = attn_tensor_zeros(ctx, 3, (int64_t[]){7, 3, 8}),
                *v3 = attn_tensor_zeros(ctx, 3, (int64_t[]){7, 3, 3});
    attn_tensor *q4 = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 5, 4, 8});
    const int64_t cq[3] = {0, 2, 5}, ck[3] = {0, 3, 7};
    attn_varlen_opts gqa = {.enable_gqa = true};
    TK_CHECK(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &gqa) != NULL, "valid offsets and GQA 4/2: %s",
             attn_last_error());
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 0, &gqa), ATTN_ERR_ARG, "batch = 0", "no sequence");
    refused(attn_sdpa_varlen(ctx, q, k, v, NULL, ck, 2, &gqa), ATTN_ERR_ARG, "cu_seqlens_q is NULL", "NULL offsets");
    refused(attn_sdpa_varlen(ctx, q, k, v, (int64_t[]){1, 2, 5}, ck, 2, &gqa), ATTN_ERR_ARG, "cu_seqlens_q[0] = 1",
            "a first offset of 1");
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, (int64_t[]){0, 8, 7}, 2, &gqa), ATTN_ERR_ARG,
            "cu_seqlens_k[2] = 7 < cu_seqlens_k[1] = 8", "decreasing offsets");
    refused(attn_sdpa_varlen(ctx, q, k, v, (int64_t[]){0, -3, 5}, ck, 2, &gqa), ATTN_ERR_ARG, "cu_seqlens_q[1] = -3",
            "a negative offset");
    refused(attn_sdpa_varlen(ctx, q, k, v, (int64_t[]){0, INT64_MAX, 5}, ck, 2, &gqa), ATTN_ERR_ARG,
            "cu_seqlens_q[2] = 5", "an offset past every row");
    refused(attn_sdpa_varlen(ctx, q, k, v, (int64_t[]){0, 2, 4}, ck, 2, &gqa), ATTN_ERR_SHAPE, "q's 5 rows",
            "a last offset short of the rows");
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 1, &gqa), ATTN_ERR_SHAPE, "cu_seqlens_q[1] = 2",
            "a batch that leaves rows out");
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, NULL), ATTN_ERR_SHAPE, "k (total_k, H, D)",
            "fewer key heads without enable_gqa");
    refused(attn_sdpa_varlen(ctx, q, k3, v3, cq, ck, 2, &gqa), ATTN_ERR_SHAPE, "(total_k, H_kv, D)",
            "3 key heads for 4");
    refused(attn_sdpa_varlen(ctx, q, k, v6, cq, ck, 2, &gqa), ATTN_ERR_SHAPE, "v (6, 2, 3)",
            "v with other rows than k");
    refused(attn_sdpa_varlen(ctx, q, k5, v, cq, ck, 2, &gqa), ATTN_ERR_SHAPE, "k (7, 2, 5)", "k of another D");
    refused(attn_sdpa_varlen(ctx, q4, k4, k4, cq, ck, 2, NULL), ATTN_ERR_SHAPE, "q (1, 5, 4, 8)", "4-D q");
    attn_varlen_opts o = {.enable_gqa = true, .features.window = {true, -2, 0}};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG, "window (-2, 0)", "a window bound of -2");
    o = (attn_varlen_opts){.enable_gqa = true, .dropout_p = 1.5f};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG, "dropout_p = 1.5", "dropout 1.5");
    o = (attn_varlen_opts){.enable_gqa = true, .features.softcap = -1.0f};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG, "softcap = -1", "a negative softcap");
    o = (attn_varlen_opts){.enable_gqa = true, .scale = NAN};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG, "scale = nan", "a NaN scale");
    o = (attn_varlen_opts){.enable_gqa = true, .impl = (attn_sdpa_impl)7};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG, "impl 7", "an unknown kernel");
    float slopes[8] = {0.5f, 0.25f, NAN, 0.1f, 0.1f, 0.1f, 0.1f, 0.1f};
    o = (attn_varlen_opts){
        .enable_gqa = true, .features.alibi_slopes = slopes, .features.alibi_ndim = 1, .features.alibi_shape = {3}};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_SHAPE, "expected (H) = (4)",
            "slopes of 3 heads for 4");
    o.features.alibi_ndim = 2, o.features.alibi_shape[0] = 3, o.features.alibi_shape[1] = 4;
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_SHAPE, "(batch, H) = (2, 4)",
            "slopes of 3 sequences for 2");
    o.features.alibi_ndim = 1, o.features.alibi_shape[0] = 4;
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_NUMERIC, "alibi slope 2 is nan", "a NaN slope");
    o = (attn_varlen_opts){.enable_gqa = true, .features.mods = {.score_mod = alibi_mod}};
    attn_tensor_set_requires_grad(q, true);
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG,
            "sdpa_varlen: mods.score_mod without "
            "mods.score_mod_grad",
            "a score_mod without its derivative, q needing a gradient");
    o.features.mods = (attn_score_mods){.score_mod_grad = alibi_mod_grad};
    refused(attn_sdpa_varlen(ctx, q, k, v, cq, ck, 2, &o), ATTN_ERR_ARG, "score_mod_grad is set without",
            "a derivative alone");
    attn_ctx_free(ctx);
}

int main(void)
{
    static const vcase cases[] = {
        /* name, batch, H, Hkv, D, Dv, lq, lk (-1: lq), causal, window, left, right, alibi, per seq, softcap, threads */
        {"self, causal", 5, 4, 4, 16, 16, {70, 1, 130, 0, 200}, {-1}, true, false, 0, 0, false, false, 0.0f, 1},
        {"cross, causal bottom-right, GQA",
         4,
         6,
         2,
         32,
         24,
         {5, 130, 0, 64},
         {9, 200, 3, 0},
         true,
         false,
         0,
         0,
         false,
         false,
         0.0f,
         1},
        {"cross, Lq > Lk, window",
         3,
         2,
         2,
         16,
         8,
         {150, 40, 7},
         {90, 60, 2},
         false,
         true,
         20,
         0,
         false,
         false,
         0.0f,
         1},
        {"ALiBi (batch, H), window, softcap",
         3,
         4,
         4,
         16,
         16,
         {70, 129, 33},
         {150, 129, 60},
         false,
         true,
         37,
         5,
         true,
         true,
         2.5f,
         1},
        {"everything, one long sequence, 2 threads",
         1,
         8,
         2,
         32,
         32,
         {300},
         {-1},
         true,
         true,
         64,
         3,
         true,
         false,
         4.0f,
         2},
        {"40 short sequences, 2 threads",
         40,
         4,
         1,
         16,
         16,
         {1, 17, 33, 49, 2, 18, 34, 50, 3, 19, 35, 51, 4, 20, 36, 52, 5,  21, 37, 53,
          6, 22, 38, 54, 7, 23, 39, 55, 8, 24, 40, 56, 9, 25, 41, 57, 10, 26, 42, 58},
         {-1},
         true,
         false,
         0,
         0,
         true,
         false,
         0.0f,
         2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) against_float64(&cases[i]);
    static const vcase padded[] = {
        {"padded: plain", 4, 4, 4, 16, 12, {70, 1, 200, 33}, {-1}, false, false, 0, 0, false, false, 0.0f, 1},
        {"padded: causal, GQA, window, ALiBi, softcap",
         4,
         4,
         2,
         16,
         16,
         {70, 1, 200, 0},
         {-1},
         true,
         true,
         40,
         -1,
         true,
         false,
         3.0f,
         2},
    };
    for (size_t i = 0; i < sizeof padded / sizeof *padded; i++) against_padded(&padded[i]);
    twins_and_gradchecks();
    mha_packed(false);
    mha_packed(true);
    one_token_sequences();
    callbacks_as_built_ins(1);
    callbacks_as_built_ins(2);
    refusals();
    return tk_finish("test_attention_varlen");
}
