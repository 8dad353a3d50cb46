/* testkit_sdpa.h: one head of attention from its definition in float64 and in plain float32. */
#include "testkit_sdpa.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float tk_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u += 0x7fffu + ((u >> 16) & 1u); /* nearest even; inf, NaN kept */
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The arithmetic of one pass: rounding after every operation in float32, operands of products
 * rounded to bf16 with f->bf16, sums in index order or reversed */
typedef struct pass {
    bool f32, reverse, bf16;
} pass;

static double rd(const pass *a, double x)
{
    return a->f32 ? (double)(float)x : x;
}

/* an operand of a product */
static double opnd(const pass *a, double x)
{
    return a->bf16 ? (double)tk_bf16_round((float)x) : x;
}

/* the t-th index of a sum over n terms */
static int64_t at(const pass *a, int64_t t, int64_t n)
{
    return a->reverse ? n - 1 - t : t;
}

/* sum_t x[t xs] y[t ys] over n terms */
static double dot(const pass *a, const float *x, int64_t xs, const float *y, int64_t ys, int64_t n)
{
    double acc = 0.0;
    for (int64_t t = 0; t < n; t++) {
        const int64_t e = at(a, t, n);
        acc = rd(a, acc + rd(a, opnd(a, x[e * xs]) * opnd(a, y[e * ys])));
    }
    return acc;
}

/* the per-pair state of one frame: (Lq, Lk) each */
typedef struct pairs {
    double *S, *P, *G, *G2, *dP, *dS, *mS, *mP, *mdS, *qk;
} pairs;

static void pairs_free(pairs *w)
{
    double **all[] = {&w->S, &w->P, &w->G, &w->G2, &w->dP, &w->dS, &w->mS, &w->mP, &w->mdS, &w->qk};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) free(*all[i]);
}

static bool pairs_alloc(pairs *w, int64_t n)
{
    memset(w, 0, sizeof *w);
    double **all[] = {&w->S, &w->P, &w->G, &w->G2, &w->dP, &w->dS, &w->mS, &w->mP, &w->mdS, &w->qk};
    bool ok = true;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        ok = (*all[i] = calloc((size_t)(n ? n : 1), sizeof(double))) && ok;
    if (!ok) pairs_free(w);
    return ok;
}

/* S, G = cap'(x) mod'(r), G2 = dG/dr and qk = scale sum_d |q k| of every pair */
static void scores(const tk_frame *f, const pass *a, pairs *w)
{
    const tk_score_mod *m = f->mod;
    const double C = f->softcap;
    for (int64_t i = 0; i < f->lq; i++)
        for (int64_t j = 0; j < f->lk; j++) {
            const int64_t e = i * f->lk + j;
            w->S[e] = -INFINITY, w->G[e] = w->G2[e] = 0.0;
            if (f->hidden[e]) continue;
            const float *q = f->q + i * f->q_rs, *k = f->k + j * f->k_rs;
            const double r = rd(a, f->scale * dot(a, q, 1, k, 1, f->d));
            double x = r, g = 1.0, g2 = 0.0;
            if (m) {
                x = a->f32 ? (double)m->f32((float)r, m->b, m->h, i, j, m->user) : m->f64(r, m->b, m->h, i, j, m->user);
                g = m->d1(r, m->b, m->h, i, j, m->user), g2 = m->d2(r, m->b, m->h, i, j, m->user);
            }
            double y = x;
            if (C > 0.0 && isfinite(x)) {
                const double t = a->f32 ? (double)tanhf((float)(x / C)) : tanh(x / C), slope = 1.0 - t * t;
                y = rd(a, C * t);
                g2 = g2 * slope + g * g * (-2.0 * t * slope / C); /* d/dr of cap'(mod(r)) mod'(r) */
                g *= slope;
            }
            if (f->bias) y = rd(a, y + f->bias[e]);
            if (y == -INFINITY) continue; /* hidden by the modifier or the bias */
            w->S[e] = y, w->G[e] = g, w->G2[e] = g2;
            double mag = 0.0;
            for (int64_t d = 0; d < f->d; d++) mag += fabs((double)q[d] * k[d]);
            w->qk[e] = f->scale * mag;
        }
}

/* P from S, row by row; false for a row with no visible key (P 0) */
static void softmax(const tk_frame *f, const pass *a, pairs *w)
{
    for (int64_t i = 0; i < f->lq; i++) {
        const double *s = w->S + i * f->lk;
        double m = -INFINITY, l = 0.0;
        for (int64_t j = 0; j < f->lk; j++) m = fmax(m, s[j]);
        for (int64_t t = 0; t < f->lk && m > -INFINITY; t++) l = rd(a, l + rd(a, exp(rd(a, s[at(a, t, f->lk)] - m))));
        for (int64_t j = 0; j < f->lk; j++)
            w->P[i * f->lk + j] = m > -INFINITY ? rd(a, rd(a, exp(rd(a, s[j] - m))) / l) : 0.0;
    }
}

static double factor(const tk_frame *f, int64_t e)
{
    return f->drop ? (double)f->drop[e] : 1.0;
}

bool tk_sdpa_frame(const tk_frame *f, tk_arith arith, const tk_frame_out *out)
{
    const pass a = {arith != TK_F64, arith == TK_F32_REVERSE, arith != TK_F64 && f->bf16};
    const bool mags = arith == TK_F64 && out->mo;
    const int64_t Lq = f->lq, Lk = f->lk, D = f->d, Dv = f->dv;
    pairs w;
    if (!pairs_alloc(&w, Lq * Lk)) return false;
    scores(f, &a, &w);
    softmax(f, &a, &w);
    /* first-order sizes of one rounding: a score, then a probability through the softmax */
    for (int64_t i = 0; mags && i < Lq; i++) {
        double mean = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            const int64_t e = i * Lk + j;
            w.mS[e] = w.P[e] > 0.0 ? fabs(w.G[e]) * w.qk[e] + fabs(w.S[e]) : 0.0;
            mean += w.P[e] * w.mS[e];
        }
        for (int64_t j = 0; j < Lk; j++) w.mP[i * Lk + j] = w.P[i * Lk + j] * (w.mS[i * Lk + j] + mean + 1.0);
    }
    for (int64_t i = 0; i < Lq; i++) /* O = Pd V */
        for (int64_t c = 0; c < Dv; c++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t t = 0; t < Lk; t++) {
                const int64_t j = at(&a, t, Lk), e = i * Lk + j;
                const double pd = rd(&a, w.P[e] * factor(f, e)), vj = f->v[j * f->v_rs + c];
                acc = rd(&a, acc + rd(&a, opnd(&a, pd) * opnd(&a, vj)));
                if (mags) mag += (w.mP[e] * factor(f, e) + pd) * fabs(vj);
            }
            out->o[i * f->g_rs + c] = acc;
            if (mags) out->mo[i * f->g_rs + c] = mag;
        }
    /* dP = drop (dO V^T), D = rowsum(P dP), dS = P (dP - D) G */
    for (int64_t i = 0; i < Lq; i++) {
        const float *g = f->dout + i * f->g_rs;
        double Di = 0.0, mD = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            const int64_t e = i * Lk + j;
            w.dP[e] = rd(&a, dot(&a, g, 1, f->v + j * f->v_rs, 1, Dv) * factor(f, e));
            if (!mags) continue;
            double mag = 0.0;
            for (int64_t c = 0; c < Dv; c++) mag += fabs((double)g[c] * f->v[j * f->v_rs + c]);
            w.mdS[e] = mag * factor(f, e); /* mdP for now */
        }
        for (int64_t t = 0; t < Lk; t++) {
            const int64_t e = i * Lk + at(&a, t, Lk);
            Di = rd(&a, Di + rd(&a, w.P[e] * w.dP[e]));
            if (mags) mD += (w.mP[e] + w.P[e]) * fabs(w.dP[e]) + w.P[e] * w.mdS[e];
        }
        for (int64_t j = 0; j < Lk; j++) {
            const int64_t e = i * Lk + j;
            const double core = rd(&a, w.P[e] * rd(&a, w.dP[e] - Di));
            w.dS[e] = rd(&a, core * w.G[e]);
            if (mags)
                w.mdS[e] = fabs(w.G[e]) * (w.mP[e] * fabs(w.dP[e] - Di) + w.P[e] * (w.mdS[e] + mD)) +
                           fabs(core * w.G2[e]) * w.qk[e] + fabs(w.dS[e]);
        }
    }
    for (int64_t i = 0; i < Lq; i++) /* dQ = scale dS K */
        for (int64_t d = 0; d < D; d++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t t = 0; t < Lk; t++) {
                const int64_t j = at(&a, t, Lk), e = i * Lk + j;
                const double kj = f->k[j * f->k_rs + d];
                acc = rd(&a, acc + rd(&a, opnd(&a, w.dS[e]) * opnd(&a, kj)));
                if (mags) mag += (w.mdS[e] + fabs(w.dS[e])) * fabs(kj);
            }
            out->dq[i * f->q_rs + d] = rd(&a, f->scale * acc);
            if (mags) out->mdq[i * f->q_rs + d] = f->scale * mag;
        }
    for (int64_t j = 0; j < Lk; j++) { /* dK += scale dS^T Q, dV += Pd^T dO */
        for (int64_t d = 0; d < D; d++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t t = 0; t < Lq; t++) {
                const int64_t i = at(&a, t, Lq), e = i * Lk + j;
                const double qi = f->q[i * f->q_rs + d];
                acc = rd(&a, acc + rd(&a, opnd(&a, w.dS[e]) * opnd(&a, qi)));
                if (mags) mag += (w.mdS[e] + fabs(w.dS[e])) * fabs(qi);
            }
            double *dk = out->dk + j * f->k_rs + d;
            *dk = rd(&a, *dk + rd(&a, f->scale * acc));
            if (mags) out->mdk[j * f->k_rs + d] += f->scale * mag;
        }
        for (int64_t c = 0; c < Dv; c++) {
            double acc = 0.0, mag = 0.0;
            for (int64_t t = 0; t < Lq; t++) {
                const int64_t i = at(&a, t, Lq), e = i * Lk + j;
                const double pd = rd(&a, w.P[e] * factor(f, e)), gi = f->dout[i * f->g_rs + c];
                acc = rd(&a, acc + rd(&a, opnd(&a, pd) * opnd(&a, gi)));
                if (mags) mag += (w.mP[e] * factor(f, e) + pd) * fabs(gi);
            }
            double *dv = out->dv + j * f->v_rs + c;
            *dv = rd(&a, *dv + acc);
            if (mags) out->mdv[j * f->v_rs + c] += mag;
        }
    }
    pairs_free(&w);
    return true;
}
