/* The attention of current models in attn_sdpa: grouped-query attention (enable_gqa), the local
 * window (FlashAttention's, bottom-right aligned), ALiBi and logit soft-capping, alone and
 * together, with causal, valid lengths and dropout:
 *   - both kernels against a float64 implementation written here from the definitions (attn.h),
 *     output and every gradient, on shapes that cross the fused kernel's tiles (Lk 200 > 128,
 *     Lq 130 > 64) and with Lq != Lk (where the window's alignment shows);
 *   - the fused kernel against its reference twin under dropout (the same mask), and finite
 *     differences of both on small shapes;
 *   - attn_alibi_slopes against the paper's formula; every refusal (shapes, bounds, values);
 *   - PyTorch's compositions of each feature (tests/golden/make_golden_features.py:
 *     repeat_interleave for GQA, explicit masks and biases, torch.tanh; float64 on float32 inputs),
 *     both kernels, output and every gradient, within tk_tol_of(1, 64, 4, 8) (one float32 side).
 * Tolerance: float32 against float64 over the longest path of roundings (testkit.h's
 * tk_tol_of(2, n, 4, 8) with n = D + Lk + Dv + Lq + 16: the products, the softmax's sum, the
 * backward's sums over keys and queries). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct problem {
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    bool causal, lens; /* lens: valid_lens (B) = Lk - 3 b - 1 */
    bool window;
    int64_t left, right;
    bool alibi, alibi_per_batch;
    float softcap;
} problem;

static bool visible(const problem *p, const int64_t *lens, int64_t b, int64_t i, int64_t j)
{
    const int64_t shift = p->Lk - p->Lq;
    if (p->causal && j > i) return false;
    if (p->lens && j >= lens[b]) return false;
    if (p->window && p->left >= 0 && j < i + shift - p->left) return false;
    if (p->window && p->right >= 0 && j > i + shift + p->right) return false;
    return true;
}

/* float64 forward and backward from the definitions; outputs as floats beside doubles */
static void reference(const problem *p, const int64_t *lens, const float *slopes, const float *q, const float *k,
                      const float *v, const float *dout, double *o, double *dq, double *dk, double *dv)
{
    const int64_t G = p->H / p->Hkv, Lq = p->Lq, Lk = p->Lk, D = p->D, Dv = p->Dv;
    const double scale = 1.0 / sqrt((double)D);
    double *S = malloc(sizeof(double) * Lq * Lk), *P = malloc(sizeof(double) * Lq * Lk),
           *T = malloc(sizeof(double) * Lq * Lk);
    memset(dk, 0, sizeof(double) * p->B * p->Hkv * Lk * D), memset(dv, 0, sizeof(double) * p->B * p->Hkv * Lk * Dv);
    for (int64_t b = 0; b < p->B; b++)
        for (int64_t h = 0; h < p->H; h++) {
            const int64_t bh = b * p->H + h, bhk = b * p->Hkv + h / G;
            const float *qh = q + bh * Lq * D, *kh = k + bhk * Lk * D, *vh = v + bhk * Lk * Dv,
                        *gh = dout + bh * Lq * Dv;
            const double slope = p->alibi ? slopes[(p->alibi_per_batch ? b * p->H : 0) + h] : 0.0;
            for (int64_t i = 0; i < Lq; i++) {
                double m = -INFINITY, sum = 0.0;
                for (int64_t j = 0; j < Lk; j++) {
                    double s = 0.0;
                    for (int64_t d = 0; d < D; d++) s += (double)qh[i * D + d] * kh[j * D + d];
                    s *= scale;
                    T[i * Lk + j] = 0.0;
                    if (p->softcap > 0.0f) T[i * Lk + j] = tanh(s / p->softcap), s = p->softcap * T[i * Lk + j];
                    s -= slope * fabs((double)(i + Lk - Lq - j));
                    S[i * Lk + j] = visible(p, lens, b, i, j) ? s : -INFINITY;
                    m = fmax(m, S[i * Lk + j]);
                }
                for (int64_t j = 0; j < Lk; j++) sum += m == -INFINITY ? 0.0 : exp(S[i * Lk + j] - m);
                for (int64_t j = 0; j < Lk; j++) P[i * Lk + j] = sum > 0.0 ? exp(S[i * Lk + j] - m) / sum : 0.0;
                for (int64_t c = 0; c < Dv; c++) {
                    double acc = 0.0;
                    for (int64_t j = 0; j < Lk; j++) acc += P[i * Lk + j] * vh[j * Dv + c];
                    o[(bh * Lq + i) * Dv + c] = acc;
                }
            }
            for (int64_t i = 0; i < Lq; i++) {
                double Di = 0.0;
                for (int64_t j = 0; j < Lk; j++) {
                    double dP = 0.0;
                    for (int64_t c = 0; c < Dv; c++) dP += (double)gh[i * Dv + c] * vh[j * Dv + c];
                    S[i * Lk + j] = dP; /* S holds dP from here */
                    Di += P[i * Lk + j] * dP;
                }
                for (int64_t j = 0; j < Lk; j++) {
                    double dS = P[i * Lk + j] * (S[i * Lk + j] - Di);
                    if (p->softcap > 0.0f) dS *= 1.0 - T[i * Lk + j] * T[i * Lk + j];
                    for (int64_t d = 0; d < D; d++) {
                        dq[(bh * Lq + i) * D + d] += scale * dS * kh[j * D + d];
                        dk[(bhk * Lk + j) * D + d] += scale * dS * qh[i * D + d];
                    }
                    for (int64_t c = 0; c < Dv; c++) dv[(bhk * Lk + j) * Dv + c] += P[i * Lk + j] * gh[i * Dv + c];
                }
            }
        }
    free(S), free(P), free(T);
}

static attn_sdpa_opts opts_of(const problem *p, const int64_t *lens, const float *slopes, attn_sdpa_impl impl)
{
    attn_sdpa_opts o = {.impl = impl, .enable_gqa = p->Hkv != p->H, .features.softcap = p->softcap};
    o.mask.causal = p->causal;
    if (p->lens) o.mask.valid_lens = (attn_lens){lens, 1, {p->B, 0}};
    if (p->window) o.features.window = (attn_window){true, p->left, p->right};
    if (p->alibi) {
        o.features.alibi_slopes = slopes;
        o.features.alibi_ndim = p->alibi_per_batch ? 2 : 1;
        o.features.alibi_shape[0] = p->alibi_per_batch ? p->B : p->H, o.features.alibi_shape[1] = p->H;
    }
    return o;
}

static void describe(char *buf, size_t n, const problem *p, const char *impl)
{
    snprintf(buf, n, "%s B%lld H%lld/%lld Lq%lld Lk%lld D%lld%s%s", impl, (long long)p->B, (long long)p->H,
             (long long)p->Hkv, (long long)p->Lq, (long long)p->Lk, (long long)p->D, p->causal ? " causal" : "",
             p->lens ? " lens" : "");
    size_t at = strlen(buf);
    if (p->window)
        at += (size_t)snprintf(buf + at, n - at, " window(%lld,%lld)", (long long)p->left, (long long)p->right);
    if (p->alibi) at += (size_t)snprintf(buf + at, n - at, " alibi%s", p->alibi_per_batch ? "(B,H)" : "");
    if (p->softcap > 0.0f) snprintf(buf + at, n - at, " softcap %g", (double)p->softcap);
}

static void against_float64(const problem *p)
{
    const int64_t nq = p->B * p->H * p->Lq * p->D, nk = p->B * p->Hkv * p->Lk * p->D,
                  nv = p->B * p->Hkv * p->Lk * p->Dv, no = p->B * p->H * p->Lq * p->Dv;
    attn_tensor *q = tk_randn(21, 4, (int64_t[]){p->B, p->H, p->Lq, p->D});
    attn_tensor *k = tk_randn(22, 4, (int64_t[]){p->B, p->Hkv, p->Lk, p->D});
    attn_tensor *v = tk_randn(23, 4, (int64_t[]){p->B, p->Hkv, p->Lk, p->Dv});
    attn_tensor *g = tk_randn(24, 4, (int64_t[]){p->B, p->H, p->Lq, p->Dv});
    int64_t lens[8];
    for (int64_t b = 0; b < p->B; b++) lens[b] = p->Lk - 3 * b - 1;
    float slopes[64];
    for (int64_t i = 0; i < p->B * p->H; i++) slopes[i] = 0.05f + 0.03f * (float)(i % 7);
    double *o = calloc((size_t)no, sizeof(double)), *dq = calloc((size_t)nq, sizeof(double));
    double *dk = calloc((size_t)nk, sizeof(double)), *dv = calloc((size_t)nv, sizeof(double));
    reference(p, lens, slopes, q->data, k->data, v->data, g->data, o, dq, dk, dv);
    double biggest = 0.0;
    for (int64_t i = 0; i < no; i++) biggest = fmax(biggest, fabs(o[i]));
    TK_CHECK(biggest > 0.1, "the problem leaves keys visible (the largest output is %g)", biggest);
    float *ref[4] = {malloc(sizeof(float) * no), malloc(sizeof(float) * nq), malloc(sizeof(float) * nk),
                     malloc(sizeof(float) * nv)};
    const double *exact[4] = {o, dq, dk, dv};
    const int64_t n[4] = {no, nq, nk, nv};
    for (int t = 0; t < 4; t++)
        for (int64_t i = 0; i < n[t]; i++) ref[t][i] = (float)exact[t][i];
    const tk_tol tol = tk_tol_of(2, (double)(p->D + p->Lk + p->Dv + p->Lq + 16), 4, 8);
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_ctx *ctx = attn_ctx_new(1);
        attn_tensor *in[3] = {q, k, v};
        for (int i = 0; i < 3; i++) attn_tensor_zero_grad(in[i]);
        attn_sdpa_opts opts = opts_of(p, lens, slopes, (attn_sdpa_impl)impl);
        attn_tensor *w = NULL, *out = attn_sdpa(ctx, q, k, v, &opts, impl == ATTN_SDPA_REF ? &w : NULL);
        char what[200], name[240];
        describe(what, sizeof what, p, impl == ATTN_SDPA_REF ? "ref" : "fused");
        TK_CHECK(out && attn_backward_from(ctx, out, g->data) == ATTN_OK, "%s: forward and backward: %s", what,
                 attn_last_error());
        if (out) {
            const float *got[4] = {out->data, q->grad, k->grad, v->grad};
            const char *names[4] = {"out", "dq", "dk", "dv"};
            for (int t = 0; t < 4; t++) {
                snprintf(name, sizeof name, "%s: %s against float64", what, names[t]);
                tk_close_scaled(name, got[t], ref[t], n[t], tol);
            }
        }
        attn_ctx_free(ctx);
    }
    for (int t = 0; t < 4; t++) free(ref[t]);
    free(o), free(dq), free(dk), free(dv);
    attn_tensor_free(q), attn_tensor_free(k), attn_tensor_free(v), attn_tensor_free(g);
}

/* ---- dropout (the fused kernel against its twin) and finite differences ---- */

typedef struct fd_user {
    attn_sdpa_opts opts;
} fd_user;

static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_sdpa(ctx, in[0], in[1], in[2], &((fd_user *)user)->opts, NULL);
}

static void twins_and_gradchecks(void)
{
    const problem p = {2, 4, 2, 70, 150, 16, 12, true, false, true, 40, 20, true, false, 3.0f};
    float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
    attn_tensor *q = tk_randn(31, 4, (int64_t[]){p.B, p.H, p.Lq, p.D}),
                *k = tk_randn(32, 4, (int64_t[]){p.B, p.Hkv, p.Lk, p.D});
    attn_tensor *v = tk_randn(33, 4, (int64_t[]){p.B, p.Hkv, p.Lk, p.Dv});
    float *outs[2] = {NULL, NULL};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_ctx *ctx = attn_ctx_new(9); /* the same seed: the same dropout draws */
        attn_sdpa_opts o = opts_of(&p, NULL, slopes, (attn_sdpa_impl)impl);
        o.dropout_p = 0.3f;
        attn_tensor *w = NULL, *out = attn_sdpa(ctx, q, k, v, &o, impl == ATTN_SDPA_REF ? &w : NULL);
        TK_CHECK(out != NULL, "dropout, impl %d: %s", impl, attn_last_error());
        if (out) {
            outs[impl - ATTN_SDPA_FUSED] = malloc(sizeof(float) * (size_t)out->numel);
            memcpy(outs[impl - ATTN_SDPA_FUSED], out->data, sizeof(float) * (size_t)out->numel);
        }
        attn_ctx_free(ctx);
    }
    if (outs[0] && outs[1])
        tk_close_scaled("dropout 0.3 with GQA, window, ALiBi, softcap: fused against ref", outs[0], outs[1],
                        p.B * p.H * p.Lq * p.Dv, tk_tol_of(2, (double)(p.D + p.Lk + 16), 4, 8));
    free(outs[0]), free(outs[1]);
    attn_tensor_free(q), attn_tensor_free(k), attn_tensor_free(v);
    /* finite differences on a small problem with everything on */
    const problem s = {1, 4, 2, 5, 9, 6, 5, true, false, true, 2, 1, true, true, 2.0f};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        fd_user u = {opts_of(&s, NULL, slopes, (attn_sdpa_impl)impl)};
        u.opts.features.alibi_shape[0] = 1; /* (B, H) with B = 1 */
        attn_tensor *in[3] = {tk_randn(41, 4, (int64_t[]){1, 4, 5, 6}), tk_randn(42, 4, (int64_t[]){1, 2, 9, 6}),
                              tk_randn(43, 4, (int64_t[]){1, 2, 9, 5})};
        char what[96];
        snprintf(what, sizeof what, "gradcheck %s: GQA 4/2, window (2, 1), causal, ALiBi (B, H), softcap 2",
                 impl == ATTN_SDPA_REF ? "ref" : "fused");
        tk_gradcheck(what, fd_forward, in, 3, &u, 1e-2f, 3e-3f, 2e-2f); /* as test_attention's */
        for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
    }
}

/* ---- ALiBi's slopes and the refusals ---- */

static void slopes_and_refusals(void)
{
    float s[12];
    TK_OK(attn_alibi_slopes(s, 8));
    bool ok = true;
    for (int i = 0; i < 8; i++) ok = ok && s[i] == ldexpf(1.0f, -(i + 1)); /* 2^(-8 (i+1) / 8) */
    TK_CHECK(ok, "8 heads: slopes 1/2, 1/4, ..., 1/256");
    TK_OK(attn_alibi_slopes(s, 12)); /* 8 heads' slopes, then 16 heads' 1st, 3rd, 5th, 7th */
    ok = true;
    for (int i = 0; i < 8; i++) ok = ok && s[i] == ldexpf(1.0f, -(i + 1));
    for (int i = 0; i < 4; i++) ok = ok && fabsf(s[8 + i] - exp2f(-0.5f * (float)(2 * i + 1))) <= 1e-7f;
    TK_CHECK(ok, "12 heads: the 8 heads' slopes, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5");
    TK_CHECK(attn_alibi_slopes(s, 0) == ATTN_ERR_ARG, "0 heads refused");

    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *q = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 6, 3, 4}),
                *k4 = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 4, 3, 4});
    attn_tensor *k2 = attn_tensor_zeros(ctx, 4, (int64_t[]){1, 2, 3, 4});
    attn_sdpa_opts o = {0};
    TK_CHECK(!attn_sdpa(ctx, q, k2, k2, &o, NULL) && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "H_kv") == NULL,
             "fewer key heads without enable_gqa: a shape error (%s)", attn_last_error());
    o.enable_gqa = true;
    TK_CHECK(attn_sdpa(ctx, q, k2, k2, &o, NULL) != NULL, "6 query heads over 2 key heads with enable_gqa");
    TK_CHECK(!attn_sdpa(ctx, q, k4, k4, &o, NULL) && attn_last_status() == ATTN_ERR_SHAPE,
             "4 key heads do not divide 6");
    o = (attn_sdpa_opts){.features.window = {true, -2, 0}};
    TK_CHECK(!attn_sdpa(ctx, q, q, q, &o, NULL) && attn_last_status() == ATTN_ERR_ARG, "a window bound of -2 refused");
    o = (attn_sdpa_opts){.features.softcap = NAN};
    TK_CHECK(!attn_sdpa(ctx, q, q, q, &o, NULL) && attn_last_status() == ATTN_ERR_ARG, "a NaN softcap refused");
    float bad[6] = {0.5f, NAN, 0.1f, 0.1f, 0.1f, 0.1f};
    o = (attn_sdpa_opts){.features.alibi_slopes = bad, .features.alibi_ndim = 1, .features.alibi_shape = {6}};
    TK_CHECK(!attn_sdpa(ctx, q, q, q, &o, NULL) && attn_last_status() == ATTN_ERR_NUMERIC, "a NaN slope refused");
    o.features.alibi_shape[0] = 4;
    TK_CHECK(!attn_sdpa(ctx, q, q, q, &o, NULL) && attn_last_status() == ATTN_ERR_SHAPE,
             "slopes of 4 heads for 6 refused");
    attn_ctx_free(ctx);
}

/* ---- PyTorch's compositions: feat_<name>.safetensors, the options as the script's table ---- */

typedef struct golden_case {
    const char *name;
    int64_t window_left, window_right; /* both 0 and !window: none */
    bool window, causal;
    float softcap;
} golden_case;

static void against_torch(void)
{
    static const golden_case cases[] = {
        {"gqa", 0, 0, false, false, 0.0f},         {"mqa_causal", 0, 0, false, true, 0.0f},
        {"window", 2, 1, true, false, 0.0f},       {"window_left_only", 1, -1, true, false, 0.0f},
        {"window_causal", 3, 0, true, true, 0.0f}, {"alibi", 0, 0, false, false, 0.0f},
        {"alibi_bh", 0, 0, false, true, 0.0f},     {"softcap", 0, 0, false, false, 1.5f},
        {"all", 3, 2, true, false, 2.0f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char file[64];
        snprintf(file, sizeof file, "feat_%s", cases[c].name);
        attn_st_file *f = tk_golden(file);
        if (!f) continue;
        attn_tensor *in[3] = {tk_golden_tensor(f, "q"), tk_golden_tensor(f, "k"), tk_golden_tensor(f, "v")};
        attn_tensor *g = tk_golden_tensor(f, "grad_out"), *slopes = NULL;
        if (attn_st_find(f, "alibi_slopes")) slopes = tk_golden_tensor(f, "alibi_slopes");
        for (int impl = ATTN_SDPA_FUSED; in[0] && in[1] && in[2] && g && impl <= ATTN_SDPA_REF; impl++) {
            for (int i = 0; i < 3; i++) attn_tensor_set_requires_grad(in[i], true), attn_tensor_zero_grad(in[i]);
            attn_sdpa_opts o = {.impl = (attn_sdpa_impl)impl,
                                .enable_gqa = in[1]->shape[1] != in[0]->shape[1],
                                .features.softcap = cases[c].softcap};
            o.mask.causal = cases[c].causal;
            if (cases[c].window) o.features.window = (attn_window){true, cases[c].window_left, cases[c].window_right};
            if (slopes) {
                o.features.alibi_slopes = slopes->data, o.features.alibi_ndim = slopes->ndim;
                for (int i = 0; i < slopes->ndim; i++) o.features.alibi_shape[i] = slopes->shape[i];
            }
            attn_ctx *ctx = attn_ctx_new(1);
            attn_tensor *w = NULL, *out = attn_sdpa(ctx, in[0], in[1], in[2], &o, impl == ATTN_SDPA_REF ? &w : NULL);
            char what[128];
            snprintf(what, sizeof what, "torch %s [%s]", cases[c].name, impl == ATTN_SDPA_REF ? "ref" : "fused");
            TK_CHECK(out && attn_backward_from(ctx, out, g->data) == ATTN_OK, "%s: %s", what, attn_last_error());
            const char *names[4] = {"out", "grad.q", "grad.k", "grad.v"};
            const float *got[4] = {out ? out->data : NULL, in[0]->grad, in[1]->grad, in[2]->grad};
            for (int t = 0; out && t < 4; t++) {
                char label[160];
                snprintf(label, sizeof label, "%s: %s", what, names[t]);
                attn_tensor *ref = tk_golden_tensor(f, names[t]);
                if (ref && got[t]) tk_close_scaled(label, got[t], ref->data, ref->numel, tk_tol_of(1, 64, 4, 8));
                attn_tensor_free(ref);
            }
            attn_ctx_free(ctx);
        }
        for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
        attn_tensor_free(g), attn_tensor_free(slopes);
        attn_st_close(f);
    }
}

int main(void)
{
    static const problem problems[] = {
        /* B, H, Hkv, Lq, Lk, D, Dv, causal, lens, window, left, right, alibi, per batch, softcap */
        {2, 6, 2, 130, 200, 32, 24, false, false, false, 0, 0, false, false, 0.0f}, /* GQA */
        {1, 4, 1, 65, 65, 16, 16, true, false, false, 0, 0, false, false, 0.0f},    /* MQA, causal */
        {2, 3, 3, 130, 200, 16, 16, false, false, true, 37, 5, false, false, 0.0f}, /* window, Lq < Lk */
        {1, 2, 2, 150, 90, 16, 8, false, false, true, 20, 0, false, false, 0.0f},   /* window, Lq > Lk */
        {1, 2, 2, 100, 260, 16, 16, false, false, true, -1, 0, false, false, 0.0f}, /* FlashAttention's causal */
        {2, 4, 4, 70, 150, 16, 16, false, true, false, 0, 0, true, false, 0.0f},    /* ALiBi (H), lens */
        {2, 4, 4, 70, 150, 16, 16, true, false, false, 0, 0, true, true, 0.0f},     /* ALiBi (B, H), causal */
        {1, 3, 3, 80, 140, 32, 16, false, false, false, 0, 0, false, false, 2.5f},  /* softcap */
        {2, 8, 2, 257, 257, 32, 32, true, true, true, 64, 3, true, false,
         4.0f}, /* everything (Lq = Lk: causal and the window meet) */
        {1, 4, 2, 129, 257, 32, 16, false, true, true, 64, 3, true, true, 4.0f}, /* all but causal, Lq < Lk */
    };
    for (size_t i = 0; i < sizeof problems / sizeof *problems; i++) against_float64(&problems[i]);
    twins_and_gradchecks();
    slopes_and_refusals();
    against_torch();
    return tk_finish("test_attention_features");
}
