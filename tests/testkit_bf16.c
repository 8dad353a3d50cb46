/* testkit_bf16.h: the first-order bound of attention with bf16 products. */
#include "testkit_bf16.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

bool tk_sdpa_bf16_bound(const tk_head *h, const float *q, const float *k, const float *v, const float *dO,
                        const double *P, double *eo, double *edq, double *edk, double *edv)
{
    const int64_t Lq = h->lq, Lk = h->lk, D = h->d, Dv = h->dv;
    const double u = 0x1p-8, w = 0x1p-24, scale = h->scale;
    const size_t n = Lq > 0 && Lk > 0 ? (size_t)(Lq * Lk) : 1;
    double *eP = malloc(n * sizeof *eP), *dP = malloc(n * sizeof *dP), *edP = malloc(n * sizeof *edP);
    double *dS = malloc(n * sizeof *dS), *edS = malloc(n * sizeof *edS), *o = malloc((size_t)(Lq * Dv + 1) * sizeof *o);
    const bool ok = eP && dP && edP && dS && edS && o;
    for (int64_t i = 0; ok && i < Lq; i++) {
        double mean_e = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            double mag = 0.0;
            for (int64_t d = 0; d < D; d++) mag += fabs((double)q[i * D + d] * k[j * D + d]);
            eP[i * Lk + j] = scale * (2 * u + (double)D * w) * mag; /* eS for now */
            mean_e += P[i * Lk + j] * eP[i * Lk + j];
        }
        for (int64_t j = 0; j < Lk; j++)
            eP[i * Lk + j] = P[i * Lk + j] * (eP[i * Lk + j] + mean_e + 4.0 * (double)Lk * w);
        for (int64_t c = 0; c < Dv; c++) {
            double acc = 0.0, e = 0.0;
            for (int64_t j = 0; j < Lk; j++) {
                acc += P[i * Lk + j] * v[j * Dv + c];
                e += (eP[i * Lk + j] + (2 * u + (double)Lk * w) * P[i * Lk + j]) * fabs(v[j * Dv + c]);
            }
            o[i * Dv + c] = acc, eo[i * Dv + c] = e;
        }
        double Di = 0.0, eD_o = 0.0, eD_p = 0.0, mag = 0.0;
        for (int64_t c = 0; c < Dv; c++) {
            Di += (double)dO[i * Dv + c] * o[i * Dv + c];
            eD_o += fabs(dO[i * Dv + c]) * eo[i * Dv + c];
            mag += fabs(dO[i * Dv + c] * o[i * Dv + c]);
        }
        for (int64_t j = 0; j < Lk; j++) {
            double acc = 0.0, e = 0.0;
            for (int64_t c = 0; c < Dv; c++)
                acc += (double)dO[i * Dv + c] * v[j * Dv + c], e += fabs((double)dO[i * Dv + c] * v[j * Dv + c]);
            dP[i * Lk + j] = acc, edP[i * Lk + j] = (2 * u + (double)Dv * w) * e;
            eD_p += eP[i * Lk + j] * fabs(acc) + P[i * Lk + j] * edP[i * Lk + j];
        }
        const double eD = fmax(eD_o, eD_p) + (double)Dv * w * mag;
        for (int64_t j = 0; j < Lk; j++) {
            dS[i * Lk + j] = P[i * Lk + j] * (dP[i * Lk + j] - Di);
            edS[i * Lk + j] = eP[i * Lk + j] * fabs(dP[i * Lk + j] - Di) + P[i * Lk + j] * (edP[i * Lk + j] + eD);
        }
    }
    for (int64_t i = 0; ok && i < Lq; i++)
        for (int64_t d = 0; d < D; d++) {
            double e = 0.0;
            for (int64_t j = 0; j < Lk; j++)
                e += (edS[i * Lk + j] + (2 * u + (double)Lk * w) * fabs(dS[i * Lk + j])) * fabs(k[j * D + d]);
            edq[i * D + d] = scale * e;
        }
    for (int64_t j = 0; ok && j < Lk; j++) {
        for (int64_t d = 0; d < D; d++) {
            double e = 0.0;
            for (int64_t i = 0; i < Lq; i++)
                e += (edS[i * Lk + j] + (2 * u + (double)Lq * w) * fabs(dS[i * Lk + j])) * fabs(q[i * D + d]);
            edk[j * D + d] = scale * e;
        }
        for (int64_t c = 0; c < Dv; c++) {
            double e = 0.0;
            for (int64_t i = 0; i < Lq; i++)
                e += (eP[i * Lk + j] + (2 * u + (double)Lq * w) * P[i * Lk + j]) * fabs(dO[i * Dv + c]);
            edv[j * Dv + c] = e;
        }
    }
    free(eP), free(dP), free(edP), free(dS), free(edS), free(o);
    return ok;
}
