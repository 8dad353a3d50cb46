/* Scaled dot-product attention: the fused kernel against the reference on edge shapes and masks
 * (forward, lse-free outputs, and every gradient), finite-difference gradient checks of both,
 * fully masked rows (0, never NaN), dropout reproducibility, and the fused backward's P against
 * float64 where the scores are large.
 * Tolerance fused vs ref: atol 2e-5 + rtol 2e-4 (float32; the two sum in different orders and
 * the fused path uses a 2-ulp polynomial exp). Large scores: see large_scores. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct sdpa_case {
    const char *name;
    int64_t b, h, lq, lk, d, dv;
    bool causal;
    int lens_kind; /* 0 none, 1 valid_lens per batch, 2 per query, 3 key padding */
    bool attend;   /* a random (Lq, Lk) attend mask broadcast over B, H */
    bool additive; /* a random (B, 1, 1, Lk) additive mask with some -inf */
    float dropout;
} sdpa_case;

static const sdpa_case cases[] = {
    {"plain 2x3x17x17 d8", 2, 3, 17, 17, 8, 8, false, 0, false, false, 0},
    {"Lq=1", 2, 2, 1, 33, 16, 16, false, 0, false, false, 0},
    {"Lk=1", 2, 2, 9, 1, 16, 5, false, 0, false, false, 0},
    {"L not a tile multiple 67x130", 1, 2, 67, 130, 12, 10, false, 0, false, false, 0},
    {"d=1", 1, 2, 20, 21, 1, 1, false, 0, false, false, 0},
    {"d=128", 1, 1, 70, 70, 128, 128, false, 0, false, false, 0},
    {"causal square 131", 1, 2, 131, 131, 16, 16, true, 0, false, false, 0},
    {"causal Lq<Lk", 2, 1, 40, 150, 8, 8, true, 0, false, false, 0},
    {"causal Lq>Lk", 2, 1, 150, 40, 8, 8, true, 0, false, false, 0},
    {"valid_lens per batch (one 0)", 3, 2, 19, 140, 8, 8, false, 1, false, false, 0},
    {"valid_lens per query", 2, 2, 19, 23, 8, 8, false, 2, false, false, 0},
    {"key padding mixed lengths", 3, 2, 70, 140, 8, 8, false, 3, false, false, 0},
    {"attend mask", 2, 2, 30, 45, 8, 8, false, 0, true, false, 0},
    {"additive mask", 2, 2, 30, 45, 8, 8, false, 0, false, true, 0},
    {"causal + padding + additive", 2, 2, 66, 66, 8, 8, true, 3, false, true, 0},
    {"dropout 0.3", 2, 2, 65, 130, 8, 8, false, 1, false, false, 0.3f},
};

typedef struct sdpa_inputs {
    attn_sdpa_opts opts;
    int64_t lens[64];
    uint8_t pad[4096], attend[8192];
    float additive[4096];
} sdpa_inputs;

static void make_masks(sdpa_inputs *in, const sdpa_case *c)
{
    memset(in, 0, sizeof *in);
    attn_mask *m = &in->opts.mask;
    m->causal = c->causal;
    attn_rng rng;
    attn_rng_seed(&rng, 99);
    if (c->lens_kind == 1 || c->lens_kind == 2) {
        int64_t n = c->lens_kind == 1 ? c->b : c->b * c->lq;
        for (int64_t i = 0; i < n; i++) in->lens[i] = i == 0 ? 0 : 1 + attn_rng_below(&rng, (uint32_t)c->lk);
        m->valid_lens = (attn_lens){in->lens, c->lens_kind, {c->b, c->lq}};
    } else if (c->lens_kind == 3) {
        for (int64_t b = 0; b < c->b; b++) {
            int64_t len = b == 0 ? c->lk : 1 + c->lk / (b + 2);
            for (int64_t j = 0; j < c->lk; j++) in->pad[b * c->lk + j] = j >= len;
        }
        m->key_padding = in->pad;
        m->key_padding_shape[0] = c->b;
        m->key_padding_shape[1] = c->lk;
    }
    if (c->attend) {
        for (int64_t i = 0; i < c->lq * c->lk; i++) in->attend[i] = attn_rng_uniform(&rng) < 0.7f;
        for (int64_t j = 0; j < c->lk; j++) in->attend[3 * c->lk + j] = 0; /* row 3 fully blocked */
        m->attend = in->attend;
        m->attend_ndim = 2;
        m->attend_shape[0] = c->lq;
        m->attend_shape[1] = c->lk;
    }
    if (c->additive) {
        for (int64_t i = 0; i < c->b * c->lk; i++)
            in->additive[i] = attn_rng_uniform(&rng) < 0.2f ? -INFINITY : attn_rng_normal(&rng);
        m->additive = in->additive;
        m->additive_ndim = 4;
        int64_t shape[4] = {c->b, 1, 1, c->lk};
        memcpy(m->additive_shape, shape, sizeof shape);
    }
    in->opts.dropout_p = c->dropout;
}

typedef struct run_result {
    attn_tensor *out, *dq, *dk, *dv; /* heap copies */
} run_result;

static attn_tensor *copy_of(const attn_tensor *t, const float *data)
{
    attn_tensor *c = attn_tensor_alloc(t->ndim, t->shape);
    if (c && data) memcpy(c->data, data, (size_t)t->numel * sizeof(float));
    return c;
}

static run_result run(const sdpa_case *c, sdpa_inputs *in, attn_tensor *q, attn_tensor *k, attn_tensor *v,
                      attn_sdpa_impl impl, const float *gout)
{
    run_result r = {0};
    attn_ctx *ctx = attn_ctx_new(5);
    attn_tensor *t[3] = {q, k, v};
    for (int i = 0; i < 3; i++) attn_tensor_zero_grad(t[i]);
    in->opts.impl = impl;
    attn_tensor *out = attn_sdpa(ctx, q, k, v, &in->opts, NULL);
    TK_CHECK(out != NULL, "%s: sdpa failed: %s", c->name, attn_last_error());
    if (out) {
        TK_OK(attn_backward_from(ctx, out, gout));
        r.out = copy_of(out, out->data);
        r.dq = copy_of(q, q->grad);
        r.dk = copy_of(k, k->grad);
        r.dv = copy_of(v, v->grad);
    }
    attn_ctx_free(ctx);
    return r;
}

static void free_result(run_result *r)
{
    attn_tensor_free(r->out);
    attn_tensor_free(r->dq);
    attn_tensor_free(r->dk);
    attn_tensor_free(r->dv);
}

static bool all_finite(const attn_tensor *t)
{
    for (int64_t i = 0; i < t->numel; i++)
        if (!isfinite(t->data[i])) return false;
    return true;
}

static void fused_vs_ref(const sdpa_case *c)
{
    static sdpa_inputs in;
    make_masks(&in, c);
    attn_tensor *q = tk_randn(1, 4, (int64_t[]){c->b, c->h, c->lq, c->d});
    attn_tensor *k = tk_randn(2, 4, (int64_t[]){c->b, c->h, c->lk, c->d});
    attn_tensor *v = tk_randn(3, 4, (int64_t[]){c->b, c->h, c->lk, c->dv});
    attn_tensor *g = tk_randn(4, 4, (int64_t[]){c->b, c->h, c->lq, c->dv});
    run_result ref = run(c, &in, q, k, v, ATTN_SDPA_REF, g->data);
    run_result fused = run(c, &in, q, k, v, ATTN_SDPA_FUSED, g->data);
    if (ref.out && fused.out) {
        char what[160];
        const char *names[4] = {"out", "dq", "dk", "dv"};
        attn_tensor *a[4] = {fused.out, fused.dq, fused.dk, fused.dv};
        attn_tensor *b[4] = {ref.out, ref.dq, ref.dk, ref.dv};
        for (int i = 0; i < 4; i++) {
            snprintf(what, sizeof what, "%s: fused vs ref %s", c->name, names[i]);
            tk_close(what, a[i]->data, b[i]->data, a[i]->numel, 2e-5f, 2e-4f);
            TK_CHECK(all_finite(a[i]) && all_finite(b[i]), "%s: %s has NaN/Inf", c->name, names[i]);
        }
    }
    free_result(&ref);
    free_result(&fused);
    attn_tensor_free(q);
    attn_tensor_free(k);
    attn_tensor_free(v);
    attn_tensor_free(g);
}

/* dV (lk, d) = P^T dO of one head (no masks) in float64: the oracle of large_scores. */
static void sdpa_dv_f64(double *dv, const float *q, const float *k, const float *g, int64_t lq, int64_t lk, int64_t d)
{
    double *p = malloc((size_t)lk * sizeof *p);
    memset(dv, 0, (size_t)(lk * d) * sizeof *dv);
    for (int64_t i = 0; p && i < lq; i++) {
        double max = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < lk; j++) {
            p[j] = 0.0;
            for (int64_t c = 0; c < d; c++) p[j] += (double)q[i * d + c] * k[j * d + c];
            p[j] /= sqrt((double)d);
            if (p[j] > max) max = p[j];
        }
        for (int64_t j = 0; j < lk; j++) sum += p[j] = exp(p[j] - max);
        for (int64_t j = 0; j < lk; j++)
            for (int64_t c = 0; c < d; c++) dv[j * d + c] += p[j] / sum * g[i * d + c];
    }
    free(p);
}

/* max |got - want| / max |want| */
static double scaled_error(const float *got, const double *want, int64_t n)
{
    double err = 0.0, mag = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > err) err = fabs(got[i] - want[i]);
        if (fabs(want[i]) > mag) mag = fabs(want[i]);
    }
    return err / mag;
}

/* Small integers in [-3, 3] plus offset: products and sums of them are exact in float32. */
static attn_tensor *small_ints(uint64_t seed, int64_t rows, int64_t cols, float offset)
{
    attn_tensor *t = attn_tensor_alloc(4, (int64_t[]){1, 1, rows, cols});
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    for (int64_t i = 0; t && i < t->numel; i++) t->data[i] = (float)attn_rng_below(&rng, 7) - 3.0f + offset;
    return t;
}

/* Large scores, against float64: integer q and k (keys share a part 10) whose scores are exact
 * in float32 (d 16, scale 1/4) and up to ~200, so the fused backward's P = exp(S - m - log l)
 * has only the exp's and log's errors; from lse = m + log l rounded to float it would carry
 * |lse| 2^-24 more (measured: dV error 9.4e-7 (Lk 23) and 1.3e-6 (Lk 300) of its largest value
 * that way, 2.6e-7 and 3.6e-7 now, in the AVX2 and the portable builds); bound 6e-7 of dV's
 * largest value. dV = P^T dO shows P's error alone. */
static void large_scores(void)
{
    const int64_t lks[2] = {23, 300};
    const int64_t lq = 37, d = 16;
    for (int t = 0; t < 2; t++) {
        const int64_t lk = lks[t];
        attn_tensor *q = small_ints(11, lq, d, 0.0f), *k = small_ints(12, lk, d, 10.0f);
        attn_tensor *v = tk_randn(13, 4, (int64_t[]){1, 1, lk, d});
        attn_tensor *g = tk_randn(14, 4, (int64_t[]){1, 1, lq, d});
        attn_tensor_set_requires_grad(q, true), attn_tensor_set_requires_grad(k, true);
        double *want = malloc((size_t)(lk * d) * sizeof *want);
        if (want) sdpa_dv_f64(want, q->data, k->data, g->data, lq, lk, d);
        sdpa_case c = {.name = "large scores"};
        static sdpa_inputs in;
        make_masks(&in, &c);
        run_result fused = run(&c, &in, q, k, v, ATTN_SDPA_FUSED, g->data);
        if (fused.out && want) {
            double e = scaled_error(fused.dv->data, want, fused.dv->numel);
            TK_CHECK(e <= 6e-7, "large scores, Lk %lld: dv error %.3g of its largest value, expected <= 6e-7",
                     (long long)lk, e);
            printf("large scores, Lk %lld: dv error %.2e of its largest value\n", (long long)lk, e);
        }
        free_result(&fused);
        free(want);
        attn_tensor_free(q), attn_tensor_free(k), attn_tensor_free(v), attn_tensor_free(g);
    }
}

/* A fully masked row: output 0, and no gradient reaches q of that row or any k, v through it. */
static void fully_masked_row(void)
{
    int64_t lens[2] = {0, 3};
    attn_sdpa_opts opts = {0};
    opts.mask.valid_lens = (attn_lens){lens, 1, {2}};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        attn_tensor *q = tk_randn(1, 3, (int64_t[]){2, 4, 8});
        attn_tensor *k = tk_randn(2, 3, (int64_t[]){2, 5, 8});
        attn_tensor *v = tk_randn(3, 3, (int64_t[]){2, 5, 8});
        attn_ctx *ctx = attn_ctx_new(1);
        opts.impl = (attn_sdpa_impl)impl;
        attn_tensor *w = NULL;
        attn_tensor *out = attn_sdpa(ctx, q, k, v, &opts, impl == ATTN_SDPA_REF ? &w : NULL);
        TK_NOT_NULL(out);
        if (out) {
            bool zero = true;
            for (int64_t i = 0; i < 4 * 8; i++) zero = zero && out->data[i] == 0.0f;
            TK_CHECK(zero, "impl %d: a fully masked batch must give output 0", impl);
            TK_OK(attn_backward(ctx, attn_sum_all(ctx, out)));
            bool gzero = true;
            for (int64_t i = 0; i < 4 * 8; i++) gzero = gzero && q->grad[i] == 0.0f;
            for (int64_t i = 0; i < 5 * 8; i++) gzero = gzero && k->grad[i] == 0.0f && v->grad[i] == 0.0f;
            TK_CHECK(gzero, "impl %d: gradients through a fully masked batch must be 0", impl);
            for (int64_t i = 5 * 8; i < 10 * 8; i++) gzero = gzero && isfinite(k->grad[i]);
            TK_CHECK(gzero, "impl %d: gradients finite", impl);
        }
        if (w) {
            bool ok = true;
            for (int64_t i = 0; i < 4 * 5; i++) ok = ok && w->data[i] == 0.0f;
            double s = 0;
            for (int64_t j = 0; j < 5; j++) s += w->data[4 * 5 + j];
            TK_CHECK(ok && fabs(s - 1.0) < 1e-6, "ref weights: masked rows 0, visible rows sum to 1");
            TK_CHECK(w->data[4 * 5 + 3] == 0.0f && w->data[4 * 5 + 4] == 0.0f, "keys past valid_len get 0");
        }
        attn_ctx_free(ctx);
        attn_tensor_free(q);
        attn_tensor_free(k);
        attn_tensor_free(v);
    }
}

typedef struct fd_user {
    attn_sdpa_opts opts;
} fd_user;

static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_sdpa(ctx, in[0], in[1], in[2], &((fd_user *)user)->opts, NULL);
}

static void gradchecks(void)
{
    int64_t lens[2] = {4, 7};
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++)
        for (int variant = 0; variant < 3; variant++) {
            fd_user u = {0};
            u.opts.impl = (attn_sdpa_impl)impl;
            u.opts.mask.causal = variant == 1;
            if (variant == 2) {
                u.opts.mask.valid_lens = (attn_lens){lens, 1, {2}};
                u.opts.dropout_p = 0.25f;
            }
            attn_tensor *in[3] = {tk_randn(11, 4, (int64_t[]){2, 3, 5, 7}), tk_randn(12, 4, (int64_t[]){2, 3, 9, 7}),
                                  tk_randn(13, 4, (int64_t[]){2, 3, 9, 6})};
            char what[64];
            snprintf(what, sizeof what, "sdpa impl %d variant %d", impl, variant);
            /* float32 central differences, eps 1e-2: truncation ~1e-4, rounding ~1e-5/eps */
            tk_gradcheck(what, fd_forward, in, 3, &u, 1e-2f, 3e-3f, 2e-2f);
            for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
        }
}

static void bad_inputs(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *q = attn_tensor_zeros(ctx, 4, (int64_t[]){2, 2, 3, 8});
    attn_tensor *k = attn_tensor_zeros(ctx, 4, (int64_t[]){2, 2, 5, 7});
    attn_tensor *v = attn_tensor_zeros(ctx, 4, (int64_t[]){2, 2, 5, 8});
    TK_CHECK(attn_sdpa(ctx, q, k, v, NULL, NULL) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "mismatched D is a shape error");
    printf("message: %s\n", attn_last_error());
    k = attn_tensor_zeros(ctx, 4, (int64_t[]){2, 2, 5, 8});
    attn_sdpa_opts opts = {0};
    uint8_t mask[6] = {1, 1, 1, 1, 1, 1};
    opts.mask.attend = mask;
    opts.mask.attend_ndim = 2;
    opts.mask.attend_shape[0] = 2;
    opts.mask.attend_shape[1] = 3;
    TK_CHECK(attn_sdpa(ctx, q, k, v, &opts, NULL) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "a mask that does not broadcast is a shape error");
    printf("message: %s\n", attn_last_error());
    attn_ctx_free(ctx);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) fused_vs_ref(&cases[i]);
    fully_masked_row();
    large_scores();
    gradchecks();
    bad_inputs();
    return tk_finish("test_attention");
}
