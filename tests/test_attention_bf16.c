/* The fused attention with bf16 products (MEDIUM precision, sdpa_problem.bf16) against float64,
 * forward and backward, within the bound attn.h states, at every level this CPU has (below
 * avx512_bf16 the bf16 tile GEMM is its reference: the same arithmetic, so the suite checks the
 * path on every host), with VDPBF16PS's sums, AMX's and Arm BFDOT's (sdpa_problem.sums: the AMX
 * tiles or BFDOT where this CPU and level have them, else their references). The bound is testkit_bf16.h's, carried through the computation to first
 * order; each element passes within 1.1 e + 1e-6 max|ref| (1e-6: the float32 floor of the
 * HIGHEST comparisons). The bound is a worst case (signs all aligned); the test prints the
 * fraction of it used. So that the check cannot pass by running float32, every tensor must also
 * be off float64 by more than float32 would be (10 times the floor) somewhere. Masked rows, NaN
 * and large scores behave as at HIGHEST: zeros, NaN in its row only, and finite outputs within
 * the values' range (at scores of hundreds, bf16's error in a score exceeds 1 and the bound says
 * nothing). */
#include "kernels/attention_internal.h"
#include "kernels/dispatch_internal.h"
#include "testkit.h"
#include "testkit_bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* how each sums' kind is named in a failure (sdpa_sums) */
static const char *const sums_names[SDPA_SUMS_COUNT] = {
    [SDPA_SUMS_DPBF16] = "", [SDPA_SUMS_AMX] = " AMX sums", [SDPA_SUMS_BFDOT] = " BFDOT sums"};

typedef struct shape {
    int64_t B, H, Lq, Lk, D, Dv;
    bool causal, lens; /* valid_lens: key j < len_b visible (len_b cycles through a few values) */
} shape;

typedef struct tensors {
    float *q, *k, *v, *dout;      /* inputs */
    double *o, *dq, *dk, *dv;     /* the float64 reference */
    double *eo, *edq, *edk, *edv; /* its bound */
} tensors;

static bool visible(const shape *s, const int64_t *lens, int64_t b, int64_t i, int64_t j)
{
    return (!s->causal || j <= i) && (!s->lens || j < lens[b]);
}

/* float64 forward and backward of one problem, and the bound (testkit_bf16.h), for every (b, h) */
static void reference(const shape *s, const int64_t *lens, float scale, tensors *t)
{
    const int64_t Lq = s->Lq, Lk = s->Lk, D = s->D, Dv = s->Dv;
    const tk_head head = {Lq, Lk, D, Dv, scale};
    double *S = malloc(sizeof(double) * Lq * Lk), *P = malloc(sizeof(double) * Lq * Lk);
    double *dS = malloc(sizeof(double) * Lq * Lk);
    for (int64_t bh = 0; bh < s->B * s->H; bh++) {
        const int64_t b = bh / s->H;
        const float *q = t->q + bh * Lq * D, *k = t->k + bh * Lk * D, *v = t->v + bh * Lk * Dv,
                    *dO = t->dout + bh * Lq * Dv;
        double *o = t->o + bh * Lq * Dv, *dq = t->dq + bh * Lq * D, *dk = t->dk + bh * Lk * D,
               *dv = t->dv + bh * Lk * Dv;
        for (int64_t i = 0; i < Lq; i++) {
            double m = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < Lk; j++) {
                double dot = 0.0;
                for (int64_t d = 0; d < D; d++) dot += (double)q[i * D + d] * k[j * D + d];
                S[i * Lk + j] = visible(s, lens, b, i, j) ? scale * dot : -INFINITY;
                m = fmax(m, S[i * Lk + j]);
            }
            for (int64_t j = 0; j < Lk; j++) sum += m == -INFINITY ? 0.0 : exp(S[i * Lk + j] - m);
            for (int64_t j = 0; j < Lk; j++) P[i * Lk + j] = sum > 0.0 ? exp(S[i * Lk + j] - m) / sum : 0.0;
            for (int64_t c = 0; c < Dv; c++) {
                double acc = 0.0;
                for (int64_t j = 0; j < Lk; j++) acc += P[i * Lk + j] * v[j * Dv + c];
                o[i * Dv + c] = acc;
            }
        }
        for (int64_t i = 0; i < Lq; i++) {
            double Di = 0.0;
            for (int64_t c = 0; c < Dv; c++) Di += (double)dO[i * Dv + c] * o[i * Dv + c];
            for (int64_t j = 0; j < Lk; j++) {
                double dP = 0.0;
                for (int64_t c = 0; c < Dv; c++) dP += (double)dO[i * Dv + c] * v[j * Dv + c];
                dS[i * Lk + j] = P[i * Lk + j] * (dP - Di);
            }
        }
        for (int64_t i = 0; i < Lq; i++)
            for (int64_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t j = 0; j < Lk; j++) acc += dS[i * Lk + j] * k[j * D + d];
                dq[i * D + d] = scale * acc;
            }
        for (int64_t j = 0; j < Lk; j++) {
            for (int64_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t i = 0; i < Lq; i++) acc += dS[i * Lk + j] * q[i * D + d];
                dk[j * D + d] = scale * acc;
            }
            for (int64_t c = 0; c < Dv; c++) {
                double acc = 0.0;
                for (int64_t i = 0; i < Lq; i++) acc += P[i * Lk + j] * dO[i * Dv + c];
                dv[j * Dv + c] = acc;
            }
        }
        tk_sdpa_bf16_bound(&head, q, k, v, dO, P, t->eo + bh * Lq * Dv, t->edq + bh * Lq * D, t->edk + bh * Lk * D,
                           t->edv + bh * Lk * Dv);
    }
    free(S), free(P), free(dS);
}

static double worst_margin; /* the largest fraction of a tolerance used, over every check */

/* got within 1.1 bound + 1e-6 max|ref| of ref everywhere, and off ref by more than 1e-5 max|ref|
 * somewhere (bf16 products, not float32). */
static void check(const char *what, const float *got, const double *ref, const double *bound, int64_t n)
{
    double max_ref = 0.0, worst = 0.0, off = 0.0;
    int64_t at = -1;
    for (int64_t i = 0; i < n; i++) max_ref = fmax(max_ref, fabs(ref[i]));
    for (int64_t i = 0; i < n; i++) {
        const double used = fabs(got[i] - ref[i]) / (1.1 * bound[i] + 1e-6 * max_ref);
        if (!(used <= worst)) worst = used, at = i;
        off = fmax(off, fabs(got[i] - ref[i]));
    }
    TK_CHECK(worst <= 1.0, "%s: [%lld] got %.9g, float64 %.9g, bound %.3g (%.2f of the tolerance used)", what,
             (long long)at, at >= 0 ? (double)got[at] : 0.0, at >= 0 ? ref[at] : 0.0, at >= 0 ? bound[at] : 0.0, worst);
    TK_CHECK(off > 1e-5 * max_ref || max_ref == 0.0,
             "%s: off float64 by %.3g, more than float32 would be (%.3g): bf16 ran", what, off, 1e-5 * max_ref);
    worst_margin = fmax(worst_margin, worst);
}

static float *randn(attn_rng *rng, int64_t n, float scale)
{
    float *x = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) x[i] = scale * attn_rng_normal(rng);
    return x;
}

/* scores of hundreds: every output finite and within the range of v's column (a convex
 * combination of bf16-rounded values: 1 + 2^-7 of it), every gradient finite */
static void large_scores(const attn__kernel_table *k, const char *level, const shape *s, const tensors *t,
                         const float *out, const float *dq, const float *dk, const float *dv)
{
    bool ok = true;
    for (int64_t bh = 0; bh < s->B * s->H; bh++)
        for (int64_t c = 0; c < s->Dv; c++) {
            double lo = INFINITY, hi = -INFINITY;
            for (int64_t j = 0; j < s->Lk; j++) {
                const double x = t->v[(bh * s->Lk + j) * s->Dv + c];
                lo = fmin(lo, x), hi = fmax(hi, x);
            }
            const double slack = 0x1p-7 * fmax(fabs(lo), fabs(hi));
            for (int64_t i = 0; i < s->Lq; i++) {
                const float o = out[(bh * s->Lq + i) * s->Dv + c];
                ok = ok && isfinite(o) && o >= lo - slack && o <= hi + slack;
            }
        }
    for (int64_t i = 0; i < s->B * s->H * s->Lq * s->D; i++) ok = ok && isfinite(dq[i]);
    for (int64_t i = 0; i < s->B * s->H * s->Lk * s->D; i++) ok = ok && isfinite(dk[i]);
    for (int64_t i = 0; i < s->B * s->H * s->Lk * s->Dv; i++) ok = ok && isfinite(dv[i]);
    TK_CHECK(ok, "%s: scores of hundreds: outputs finite and within v's range, gradients finite", level);
    (void)k;
}

static void run_case(const shape *s, float q_scale, uint64_t seed)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    const int64_t nq = s->B * s->H * s->Lq * s->D, nk = s->B * s->H * s->Lk * s->D, nv = s->B * s->H * s->Lk * s->Dv,
                  no = s->B * s->H * s->Lq * s->Dv;
    tensors t = {.q = randn(&rng, nq, q_scale),
                 .k = randn(&rng, nk, 1.0f),
                 .v = randn(&rng, nv, 1.0f),
                 .dout = randn(&rng, no, 1.0f)};
    double **d[] = {&t.o, &t.eo, &t.dq, &t.edq, &t.dk, &t.edk, &t.dv, &t.edv};
    const int64_t sizes[] = {no, no, nq, nq, nk, nk, nv, nv};
    for (int i = 0; i < 8; i++) *d[i] = calloc((size_t)(sizes[i] ? sizes[i] : 1), sizeof(double));
    int64_t lens[4];
    for (int64_t b = 0; b < s->B && b < 4; b++) lens[b] = (s->Lk * (b + 1)) / 4; /* the first batch sees a quarter */
    const float scale = 1.0f / sqrtf((float)s->D);
    reference(s, lens, scale, &t);
    for (int run = 0; run < SDPA_SUMS_COUNT * ATTN_ISA_COUNT; run++) {
        const int l = run / SDPA_SUMS_COUNT, sums = run % SDPA_SUMS_COUNT; /* each level, with each kind's sums */
        const attn__kernel_table *k = attn__kernels_at((attn_isa)l);
        if (!k) continue;
        sdpa_problem p = {.batch = s->B,
                          .heads = s->H,
                          .lq = s->Lq,
                          .lk = s->Lk,
                          .d = s->D,
                          .dv = s->Dv,
                          .scale = scale,
                          .threads = 2,
                          .bf16 = true,
                          .sums = (sdpa_sums)sums};
        p.masks.causal = s->causal;
        p.masks.valid_lens = s->lens ? lens : NULL;
        float *out = calloc((size_t)no, sizeof(float)),
              *stats = calloc((size_t)(2 * s->B * s->H * s->Lq), sizeof(float));
        float *dq = calloc((size_t)nq, sizeof(float)), *dk = calloc((size_t)nk, sizeof(float)),
              *dv = calloc((size_t)nv, sizeof(float));
        float *scratch = malloc(sizeof(float) * (size_t)k->sdpa_fused_scratch_floats(&p, p.threads));
        k->sdpa_forward_fused(out, stats, t.q, t.k, t.v, scratch, &p);
        k->sdpa_backward_fused(dq, dk, dv, t.dout, t.q, t.k, t.v, out, stats, scratch, &p);
        char what[160];
        const char *names[] = {"out", "dq", "dk", "dv"};
        const float *got[] = {out, dq, dk, dv};
        const double *ref[] = {t.o, t.dq, t.dk, t.dv}, *bound[] = {t.eo, t.edq, t.edk, t.edv};
        const int64_t n[] = {no, nq, nk, nv};
        for (int i = 0; q_scale == 1.0f && i < 4; i++) {
            snprintf(what, sizeof what, "%s%s B%lld H%lld Lq%lld Lk%lld D%lld Dv%lld%s%s q x%g %s",
                     attn_isa_name((attn_isa)l), sums_names[sums], (long long)s->B, (long long)s->H, (long long)s->Lq,
                     (long long)s->Lk, (long long)s->D, (long long)s->Dv, s->causal ? " causal" : "",
                     s->lens ? " lens" : "", (double)q_scale, names[i]);
            check(what, got[i], ref[i], bound[i], n[i]);
        }
        if (q_scale != 1.0f) large_scores(k, attn_isa_name((attn_isa)l), s, &t, out, dq, dk, dv);
        free(out), free(stats), free(dq), free(dk), free(dv), free(scratch);
    }
    for (int i = 0; i < 8; i++) free(*d[i]);
    free(t.q), free(t.k), free(t.v), free(t.dout);
}

/* A row with every key masked gives 0 and zero gradients; a NaN in q gives NaN in its row only; an
 * inf in V at a key the lengths hide (the odd key after the last visible one, which a bf16 pair
 * would join) stays out of every output. */
static void special_rows(void)
{
    const int64_t L = 9, D = 16;
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    float *q = randn(&rng, L * D, 1.0f), *k = randn(&rng, L * D, 1.0f), *v = randn(&rng, L * D, 1.0f),
          *g = randn(&rng, L * D, 1.0f);
    q[4 * D + 3] = NAN;
    int64_t lens[1] = {0}, odd[1] = {5}; /* every key of the batch masked, or the first 5 */
    for (int run = 0; run < SDPA_SUMS_COUNT * ATTN_ISA_COUNT; run++) {
        const int l = run / SDPA_SUMS_COUNT, sums = run % SDPA_SUMS_COUNT;
        const attn__kernel_table *t = attn__kernels_at((attn_isa)l);
        if (!t) continue;
        for (int masked = 0; masked < 3; masked++) {
            sdpa_problem p = {.batch = 1,
                              .heads = 1,
                              .lq = L,
                              .lk = L,
                              .d = D,
                              .dv = D,
                              .scale = 0.25f,
                              .threads = 1,
                              .bf16 = true,
                              .sums = (sdpa_sums)sums};
            p.masks.valid_lens = masked == 1 ? lens : masked == 2 ? odd : NULL; /* or none */
            v[5 * D + 2] = masked == 2 ? INFINITY : 1.0f;
            float out[9 * 16], stats[18], dq[9 * 16] = {0}, dk[9 * 16] = {0}, dv[9 * 16] = {0};
            float *scratch = malloc(sizeof(float) * (size_t)t->sdpa_fused_scratch_floats(&p, 1));
            t->sdpa_forward_fused(out, stats, q, k, v, scratch, &p);
            t->sdpa_backward_fused(dq, dk, dv, g, q, k, v, out, stats, scratch, &p);
            bool ok = true;
            for (int64_t i = 0; i < L * D; i++) {
                const bool nan_row = masked != 1 && i / D == 4;
                if (masked == 1)
                    ok = ok && out[i] == 0.0f && dq[i] == 0.0f && dk[i] == 0.0f && dv[i] == 0.0f;
                else
                    ok = ok && (isnan(out[i]) == nan_row) && (nan_row || isfinite(out[i]));
            }
            TK_CHECK(ok, "%s, bf16%s: %s", attn_isa_name((attn_isa)l), sums_names[sums],
                     masked == 1   ? "every key masked: output and gradients 0"
                     : masked == 2 ? "an inf in V past the first 5 keys reaches no output, a NaN in q its row only"
                                   : "a NaN in q: NaN in its output row only");
            free(scratch);
        }
    }
    free(q), free(k), free(v), free(g);
}

int main(void)
{
    static const shape shapes[] = {
        {1, 1, 1, 1, 8, 8, false, false},      {2, 3, 7, 5, 17, 9, false, false},
        {1, 2, 65, 129, 64, 64, false, false}, {2, 1, 130, 130, 64, 33, true, false},
        {3, 2, 40, 200, 32, 32, false, true},  {1, 1, 257, 64, 64, 64, true, false},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) run_case(&shapes[i], 1.0f, 100 + i);
    run_case(&shapes[2], 30.0f, 7); /* large scores: a peaked softmax */
    special_rows();
    printf("test_attention_bf16: worst margin %.2f (the largest fraction of a tolerance used)\n", worst_margin);
    return tk_finish("test_attention_bf16");
}
