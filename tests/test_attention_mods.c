/* FlexAttention in C: attn_sdpa_opts.mods (score_mod with its derivative, mask_mod, mask_block).
 *   - causal, the local window, ALiBi and soft-capping, each expressed through the callbacks and all
 *     together, against the built-in forms: both kernels, output and every gradient, with GQA,
 *     Lq != Lk, valid lengths and dropout (the same draws), on shapes that cross the fused
 *     kernel's tiles; causal and the window with and without a block predicate;
 *   - the fused kernel against its reference twin with a nonlinear score_mod, an irregular mask_mod
 *     and a block predicate that hides blocks the mask_mod keeps (the predicate is part of the mask:
 *     the same result as a mask_mod that hides them too), and finite differences of both kernels;
 *   - the bf16 products (MEDIUM) at every level this CPU has: causal, the window and ALiBi through
 *     the callbacks against the built-in forms (the products take the same operands);
 *   - every refusal and edge: score_mod without its derivative when gradients are needed (and
 *     allowed without), a derivative alone, a predicate's unknown answers, a predicate alone, a
 *     query row that the callbacks hide whole, -inf from score_mod, the weights of the reference.
 * Tolerance: two float32 computations of the same attention (the callbacks' arithmetic is the
 * built-ins' up to the order of a few roundings: libm's tanhf against the fused kernel's own),
 * over the longest path of roundings: tk_tol_of(2, n, 4, 8), n = D + Lk + Dv + Lq + 16 (as
 * test_attention_features). */
#include "kernels/attention_internal.h"
#include "kernels/dispatch_internal.h"
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the built-in features as callbacks ---- */

typedef struct features {
    int64_t H, Lq, Lk;
    bool causal; /* top-left: kv <= q */
    bool window; /* q + Lk - Lq - left <= kv <= q + Lk - Lq + right, -1: open */
    int64_t left, right;
    const float *slopes; /* (H) ALiBi; NULL: none */
    float softcap;       /* 0: none */
} features;

static float score_mod(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b;
    const features *f = user;
    if (f->softcap > 0.0f) s = f->softcap * tanhf(s / f->softcap);
    const int64_t dist = q + f->Lk - f->Lq - kv;
    if (f->slopes) s -= f->slopes[h] * (float)(dist < 0 ? -dist : dist);
    return s;
}

static float score_mod_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)q, (void)kv;
    const features *f = user;
    if (!(f->softcap > 0.0f)) return 1.0f;
    const float t = tanhf(s / f->softcap);
    return 1.0f - t * t;
}

static bool mask_mod(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h;
    const features *f = user;
    const int64_t shift = f->Lk - f->Lq;
    if (f->causal && kv > q) return false;
    if (f->window && f->left >= 0 && kv < q + shift - f->left) return false;
    if (f->window && f->right >= 0 && kv > q + shift + f->right) return false;
    return true;
}

/* What mask_mod gives on the block: the pairs' kv - q run from k0 - (q1 - 1) to (k1 - 1) - q0 */
static int mask_block(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1, void *user)
{
    (void)b, (void)h;
    const features *f = user;
    const int64_t lo = k0 - (q1 - 1), hi = (k1 - 1) - q0, shift = f->Lk - f->Lq;
    int64_t min = INT64_MIN, max = INT64_MAX; /* the kept kv - q */
    if (f->causal) max = 0;
    if (f->window && f->left >= 0 && shift - f->left > min) min = shift - f->left;
    if (f->window && f->right >= 0 && shift + f->right < max) max = shift + f->right;
    if (hi < min || lo > max) return ATTN_BLOCK_EMPTY;
    return lo >= min && hi <= max ? ATTN_BLOCK_FULL : ATTN_BLOCK_PARTIAL;
}

typedef struct problem {
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    features f;
    bool lens;       /* valid_lens (B) = Lk - 5 b - 2, built in both forms */
    float dropout_p; /* the same draws in both forms (the ctx seed) */
} problem;

/* How a problem's features reach attn_sdpa */
enum form {
    BUILT_IN,
    CALLBACKS,
    CALLBACKS_BLOCKS
};
static const char *const form_names[] = {"built-in", "callbacks", "callbacks+blocks"};

static attn_sdpa_opts opts_of(const problem *p, features *f, const int64_t *lens, enum form form, attn_sdpa_impl impl)
{
    attn_sdpa_opts o = {.impl = impl, .enable_gqa = p->Hkv != p->H, .dropout_p = p->dropout_p};
    if (p->lens) o.mask.valid_lens = (attn_lens){lens, 1, {p->B, 0}};
    if (form == BUILT_IN) {
        o.mask.causal = f->causal, o.features.softcap = f->softcap;
        if (f->window) o.features.window = (attn_window){true, f->left, f->right};
        if (f->slopes) o.features.alibi_slopes = f->slopes, o.features.alibi_ndim = 1, o.features.alibi_shape[0] = p->H;
        return o;
    }
    o.features.mods.user = f;
    if (f->slopes || f->softcap > 0.0f)
        o.features.mods.score_mod = score_mod, o.features.mods.score_mod_grad = score_mod_grad;
    if (f->causal || f->window) o.features.mods.mask_mod = mask_mod;
    if (form == CALLBACKS_BLOCKS && o.features.mods.mask_mod) o.features.mods.mask_block = mask_block;
    return o;
}

typedef struct result {
    float *t[4]; /* out, dq, dk, dv */
    int64_t n[4];
} result;

static void result_free(result *r)
{
    for (int i = 0; i < 4; i++) free(r->t[i]), r->t[i] = NULL;
}

/* One forward and backward; false (a failed check) when attn_sdpa refuses */
static bool run(result *r, const char *what, attn_tensor *const in[3], const attn_tensor *g, const attn_sdpa_opts *o,
                attn_precision precision)
{
    attn_ctx *ctx = attn_ctx_new(7); /* the same seed: the same dropout draws */
    attn_ctx_set_matmul_precision(ctx, precision);
    attn_ctx_set_training(ctx, o->dropout_p > 0.0f);
    for (int i = 0; i < 3; i++) attn_tensor_zero_grad(in[i]);
    attn_tensor *w = NULL, *out = attn_sdpa(ctx, in[0], in[1], in[2], o, o->impl == ATTN_SDPA_REF ? &w : NULL);
    const bool ok = out && attn_backward_from(ctx, out, g->data) == ATTN_OK;
    TK_CHECK(ok, "%s: %s", what, attn_last_error());
    memset(r, 0, sizeof *r);
    const float *src[4] = {ok ? out->data : NULL, in[0]->grad, in[1]->grad, in[2]->grad};
    for (int i = 0; ok && i < 4; i++) {
        r->n[i] = i ? in[i - 1]->numel : out->numel;
        r->t[i] = malloc(sizeof(float) * (size_t)r->n[i]);
        memcpy(r->t[i], src[i], sizeof(float) * (size_t)r->n[i]);
    }
    attn_ctx_free(ctx);
    return ok;
}

static void compare(const char *what, const result *got, const result *ref, tk_tol tol)
{
    static const char *const names[4] = {"out", "dq", "dk", "dv"};
    for (int i = 0; got->t[0] && ref->t[0] && i < 4; i++) {
        char label[256];
        snprintf(label, sizeof label, "%s: %s", what, names[i]);
        tk_close_scaled(label, got->t[i], ref->t[i], got->n[i], tol);
    }
}

static void describe(char *buf, size_t n, const problem *p)
{
    const features *f = &p->f;
    int at = snprintf(buf, n, "B%lld H%lld/%lld Lq%lld Lk%lld D%lld", (long long)p->B, (long long)p->H,
                      (long long)p->Hkv, (long long)p->Lq, (long long)p->Lk, (long long)p->D);
    if (f->causal) at += snprintf(buf + at, n - (size_t)at, " causal");
    if (f->window)
        at += snprintf(buf + at, n - (size_t)at, " window(%lld,%lld)", (long long)f->left, (long long)f->right);
    if (f->slopes) at += snprintf(buf + at, n - (size_t)at, " alibi");
    if (f->softcap > 0.0f) at += snprintf(buf + at, n - (size_t)at, " softcap %g", (double)f->softcap);
    if (p->lens) at += snprintf(buf + at, n - (size_t)at, " lens");
    if (p->dropout_p > 0.0f) snprintf(buf + at, n - (size_t)at, " dropout %g", (double)p->dropout_p);
}

/* The callback forms against the built-in form, and the fused kernel against its twin, per form */
static void against_built_in(problem p)
{
    static const float slopes[8] = {0.5f, 0.25f, 0.125f, 0.0625f, 0.3f, 0.2f, 0.1f, 0.05f};
    if (p.f.slopes) p.f.slopes = slopes;
    p.f.H = p.H, p.f.Lq = p.Lq, p.f.Lk = p.Lk;
    attn_tensor *in[3] = {tk_randn(51, 4, (int64_t[]){p.B, p.H, p.Lq, p.D}),
                          tk_randn(52, 4, (int64_t[]){p.B, p.Hkv, p.Lk, p.D}),
                          tk_randn(53, 4, (int64_t[]){p.B, p.Hkv, p.Lk, p.Dv})};
    attn_tensor *g = tk_randn(54, 4, (int64_t[]){p.B, p.H, p.Lq, p.Dv});
    int64_t lens[8];
    for (int64_t b = 0; b < p.B; b++) lens[b] = p.Lk - 5 * b - 2;
    const tk_tol tol = tk_tol_of(2, (double)(p.D + p.Lk + p.Dv + p.Lq + 16), 4, 8);
    char desc[160], what[256];
    describe(desc, sizeof desc, &p);
    result built[2], r[2];
    for (int impl = 0; impl < 2; impl++) {
        attn_sdpa_opts o = opts_of(&p, &p.f, lens, BUILT_IN, impl ? ATTN_SDPA_REF : ATTN_SDPA_FUSED);
        snprintf(what, sizeof what, "%s, built-in [%s]", desc, impl ? "ref" : "fused");
        run(&built[impl], what, in, g, &o, ATTN_PRECISION_HIGHEST);
    }
    TK_CHECK(built[0].t[0] && tk_max_abs(built[0].t[0], built[0].n[0]) > 0.1, "%s: keys visible", desc);
    for (int form = CALLBACKS; form <= CALLBACKS_BLOCKS; form++) {
        if (form == CALLBACKS_BLOCKS && !p.f.causal && !p.f.window) continue;
        for (int impl = 0; impl < 2; impl++) {
            attn_sdpa_opts o = opts_of(&p, &p.f, lens, (enum form)form, impl ? ATTN_SDPA_REF : ATTN_SDPA_FUSED);
            snprintf(what, sizeof what, "%s, %s against built-in [%s]", desc, form_names[form], impl ? "ref" : "fused");
            if (run(&r[impl], what, in, g, &o, ATTN_PRECISION_HIGHEST)) compare(what, &r[impl], &built[impl], tol);
        }
        snprintf(what, sizeof what, "%s, %s: fused against ref", desc, form_names[form]);
        compare(what, &r[0], &r[1], tol);
        result_free(&r[0]), result_free(&r[1]);
    }
    result_free(&built[0]), result_free(&built[1]);
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
    attn_tensor_free(g);
}

/* ---- a nonlinear score_mod and an irregular mask: the twins, the block predicate, gradchecks ---- */

static float wavy(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)user;
    return s * (1.0f + 0.25f * tanhf(s)) - 0.005f * (float)(q - kv) + 0.1f * (float)(b + h);
}

static float wavy_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)q, (void)kv, (void)user;
    const float t = tanhf(s);
    return 1.0f + 0.25f * t + 0.25f * s * (1.0f - t * t);
}

static bool sparse(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)user;
    return (q * 7 + kv * 3 + b + 2 * h) % 5 != 0;
}

/* blocks whose block row and column add to an odd number hidden, the others left to mask_mod */
static int checkered(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1, void *user)
{
    (void)b, (void)h, (void)q1, (void)k1, (void)user;
    return (q0 / ATTN_MASK_BLOCK_Q + k0 / ATTN_MASK_BLOCK_KV) % 2 ? ATTN_BLOCK_EMPTY : ATTN_BLOCK_PARTIAL;
}

static bool sparse_checkered(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    return (q / ATTN_MASK_BLOCK_Q + kv / ATTN_MASK_BLOCK_KV) % 2 == 0 && sparse(b, h, q, kv, user);
}

typedef struct fd_user {
    attn_sdpa_opts opts;
} fd_user;

static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_sdpa(ctx, in[0], in[1], in[2], &((fd_user *)user)->opts, NULL);
}

static void nonlinear(void)
{
    const int64_t B = 2, H = 4, Hkv = 2, Lq = 150, Lk = 300, D = 16, Dv = 12;
    attn_tensor *in[3] = {tk_randn(61, 4, (int64_t[]){B, H, Lq, D}), tk_randn(62, 4, (int64_t[]){B, Hkv, Lk, D}),
                          tk_randn(63, 4, (int64_t[]){B, Hkv, Lk, Dv})};
    attn_tensor *g = tk_randn(64, 4, (int64_t[]){B, H, Lq, Dv});
    const tk_tol tol = tk_tol_of(2, (double)(D + Lk + Dv + Lq + 16), 4, 8);
    attn_sdpa_opts base = {
        .enable_gqa = true, .features.softcap = 3.0f, .features.mods = {wavy, wavy_grad, sparse, checkered, NULL}};
    result r[2], one_mask;
    for (int impl = 0; impl < 2; impl++) {
        attn_sdpa_opts o = base;
        o.impl = impl ? ATTN_SDPA_REF : ATTN_SDPA_FUSED;
        char what[160];
        snprintf(what, sizeof what, "nonlinear score_mod, sparse mask_mod, checkered blocks, softcap [%s]",
                 impl ? "ref" : "fused");
        run(&r[impl], what, in, g, &o, ATTN_PRECISION_HIGHEST);
    }
    compare("nonlinear score_mod, sparse mask_mod, checkered blocks, softcap: fused against ref", &r[0], &r[1], tol);
    attn_sdpa_opts o = base;
    o.impl = ATTN_SDPA_FUSED, o.features.mods.mask_mod = sparse_checkered, o.features.mods.mask_block = NULL;
    if (run(&one_mask, "the blocks in mask_mod", in, g, &o, ATTN_PRECISION_HIGHEST))
        compare("checkered blocks: as a mask_mod that hides them", &r[0], &one_mask, tol);
    TK_CHECK(r[0].t[0] && tk_max_abs(r[0].t[0], r[0].n[0]) > 0.1, "the nonlinear problem leaves keys visible");
    result_free(&r[0]), result_free(&r[1]), result_free(&one_mask);
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
    attn_tensor_free(g);
    /* finite differences through score_mod and the cap after it, a mask_mod and its blocks */
    for (int impl = 0; impl < 2; impl++) {
        fd_user u = {base};
        u.opts.impl = impl ? ATTN_SDPA_REF : ATTN_SDPA_FUSED;
        attn_tensor *x[3] = {tk_randn(71, 4, (int64_t[]){1, 4, 5, 6}), tk_randn(72, 4, (int64_t[]){1, 2, 9, 6}),
                             tk_randn(73, 4, (int64_t[]){1, 2, 9, 5})};
        char what[96];
        snprintf(what, sizeof what, "gradcheck %s: nonlinear score_mod, softcap 3, sparse mask_mod",
                 impl ? "ref" : "fused");
        tk_gradcheck(what, fd_forward, x, 3, &u, 1e-2f, 3e-3f, 2e-2f); /* as test_attention_features' */
        for (int i = 0; i < 3; i++) attn_tensor_free(x[i]);
    }
}

/* ---- bf16 products at every level: the kernels called directly ---- */

static void bf16_levels(void)
{
    const int64_t B = 1, H = 4, Lq = 150, Lk = 260, D = 32, Dv = 16;
    const int64_t nq = B * H * Lq * D, nk = B * H * Lk * D, nv = B * H * Lk * Dv, no = B * H * Lq * Dv;
    attn_tensor *t[4] = {tk_randn(81, 1, &nq), tk_randn(82, 1, &nk), tk_randn(83, 1, &nv), tk_randn(84, 1, &no)};
    static const float slopes[4] = {0.5f, 0.25f, 0.125f, 0.0625f};
    features f = {H, Lq, Lk, true, true, 70, 0, slopes, 0.0f};
    const tk_tol tol = tk_tol_of(2, (double)(D + Lk + Dv + Lq + 16), 4, 8);
    for (int l = 0; l < ATTN_ISA_COUNT; l++) {
        const attn__kernel_table *k = attn__kernels_at((attn_isa)l);
        if (!k) continue;
        result r[2];
        for (int form = 0; form < 2; form++) {
            sdpa_problem p = {.batch = B,
                              .heads = H,
                              .lq = Lq,
                              .lk = Lk,
                              .d = D,
                              .dv = Dv,
                              .scale = 1.0f / sqrtf((float)D),
                              .threads = 2,
                              .bf16 = true};
            if (form == BUILT_IN) {
                p.masks.causal = true, p.windowed = true, p.window_left = f.left, p.window_right = f.right;
                p.alibi = slopes;
            } else
                p.mods = (attn_score_mods){score_mod, score_mod_grad, mask_mod, mask_block, &f};
            const int64_t n[4] = {no, nq, nk, nv};
            for (int i = 0; i < 4; i++) r[form].t[i] = calloc((size_t)n[i], sizeof(float)), r[form].n[i] = n[i];
            float *stats = malloc(sizeof(float) * (size_t)(2 * B * H * Lq));
            float *scratch = malloc(sizeof(float) * (size_t)k->sdpa_fused_scratch_floats(&p, p.threads));
            k->sdpa_forward_fused(r[form].t[0], stats, t[0]->data, t[1]->data, t[2]->data, scratch, &p);
            k->sdpa_backward_fused(r[form].t[1], r[form].t[2], r[form].t[3], t[3]->data, t[0]->data, t[1]->data,
                                   t[2]->data, r[form].t[0], stats, scratch, &p);
            free(stats), free(scratch);
        }
        char what[160];
        snprintf(what, sizeof what, "bf16 products at %s: causal, window (70, 0), ALiBi through the callbacks",
                 attn_isa_name((attn_isa)l));
        compare(what, &r[1], &r[0], tol);
        result_free(&r[0]), result_free(&r[1]);
    }
    for (int i = 0; i < 4; i++) attn_tensor_free(t[i]);
}

/* ---- refusals and edges ---- */

static int answer_42(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1, void *user)
{
    (void)b, (void)h, (void)q0, (void)q1, (void)k0, (void)k1, (void)user;
    return 42;
}

static int all_empty(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1, void *user)
{
    (void)b, (void)h, (void)q0, (void)q1, (void)k0, (void)k1, (void)user;
    return ATTN_BLOCK_EMPTY;
}

static bool hide_row_3(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)kv, (void)user;
    return q != 3;
}

static float hide_even_keys(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)q, (void)user;
    return kv % 2 ? s : -INFINITY;
}

static float one(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)s, (void)b, (void)h, (void)q, (void)kv, (void)user;
    return 1.0f;
}

static bool odd_keys(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)q, (void)user;
    return kv % 2;
}

static bool head_0_only(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)q, (void)kv, (void)user;
    return h == 0;
}

static bool all_zero(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (x[i] != 0.0f) return false;
    return true;
}

static void refusals_and_edges(void)
{
    const int64_t shape[4] = {2, 3, 70, 8}, Lk = 70;
    attn_tensor *in[3] = {tk_randn(91, 4, shape), tk_randn(92, 4, shape), tk_randn(93, 4, shape)};
    attn_tensor *g = tk_randn(94, 4, shape);
    attn_ctx *ctx = attn_ctx_new(1);
    attn_sdpa_opts o = {.features.mods = {.score_mod = wavy}};
    TK_CHECK(!attn_sdpa(ctx, in[0], in[1], in[2], &o, NULL) && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "score_mod_grad"),
             "score_mod without its derivative, q requiring grad: refused, naming score_mod_grad (%s)",
             attn_last_error());
    attn_ctx_set_grad_enabled(ctx, false);
    TK_CHECK(attn_sdpa(ctx, in[0], in[1], in[2], &o, NULL) != NULL, "the same without gradients: %s",
             attn_last_error());
    attn_ctx_set_grad_enabled(ctx, true);
    attn_tensor *plain = attn_tensor_zeros(ctx, 4, shape);
    TK_CHECK(attn_sdpa(ctx, plain, plain, plain, &o, NULL) != NULL, "the same on inputs that need no gradient: %s",
             attn_last_error());
    o = (attn_sdpa_opts){.features.mods = {.score_mod_grad = wavy_grad}};
    TK_CHECK(!attn_sdpa(ctx, in[0], in[1], in[2], &o, NULL) && attn_last_status() == ATTN_ERR_ARG,
             "a derivative without score_mod refused (%s)", attn_last_error());
    attn_ctx_free(ctx);
    const tk_tol tol = tk_tol_of(2, (double)(8 + Lk + 8 + 70 + 16), 4, 8);
    for (int impl = 0; impl < 2; impl++) {
        const attn_sdpa_impl which = impl ? ATTN_SDPA_REF : ATTN_SDPA_FUSED;
        const char *name = impl ? "ref" : "fused";
        result a, b;
        /* an unknown answer of the predicate counts as PARTIAL */
        o = (attn_sdpa_opts){.impl = which, .features.mods = {.mask_mod = sparse}};
        attn_sdpa_opts o42 = o;
        o42.features.mods.mask_block = answer_42;
        if (run(&a, "sparse", in, g, &o, ATTN_PRECISION_HIGHEST) &&
            run(&b, "sparse, blocks answer 42", in, g, &o42, ATTN_PRECISION_HIGHEST)) {
            char what[96];
            snprintf(what, sizeof what, "a predicate answering 42 reads as PARTIAL [%s]", name);
            compare(what, &b, &a, tol);
        }
        result_free(&a), result_free(&b);
        /* a predicate alone, hiding everything: zeros, no NaN */
        o = (attn_sdpa_opts){.impl = which, .features.mods = {.mask_block = all_empty}};
        if (run(&a, "every block empty", in, g, &o, ATTN_PRECISION_HIGHEST))
            TK_CHECK(all_zero(a.t[0], a.n[0]) && all_zero(a.t[1], a.n[1]) && all_zero(a.t[2], a.n[2]) &&
                         all_zero(a.t[3], a.n[3]),
                     "every block empty (a predicate alone): output and gradients 0 [%s]", name);
        result_free(&a);
        /* a query row hidden whole: its output 0, the others not */
        o = (attn_sdpa_opts){.impl = which, .features.mods = {.mask_mod = hide_row_3}};
        if (run(&a, "row 3 hidden", in, g, &o, ATTN_PRECISION_HIGHEST)) {
            bool ok = true;
            for (int64_t bh = 0; bh < 6; bh++)
                ok = ok && all_zero(a.t[0] + (bh * 70 + 3) * 8, 8) && all_zero(a.t[1] + (bh * 70 + 3) * 8, 8);
            TK_CHECK(ok && !all_zero(a.t[0] + 4 * 8, 8), "a query row mask_mod hides whole: output and dq 0 there [%s]",
                     name);
        }
        result_free(&a);
        /* -inf from score_mod hides the pair, as mask_mod does (its derivative's value unused) */
        o = (attn_sdpa_opts){.impl = which, .features.mods = {.score_mod = hide_even_keys, .score_mod_grad = one}};
        attn_sdpa_opts odd = {.impl = which, .features.mods = {.mask_mod = odd_keys}};
        if (run(&a, "-inf from score_mod", in, g, &o, ATTN_PRECISION_HIGHEST) &&
            run(&b, "odd keys", in, g, &odd, ATTN_PRECISION_HIGHEST)) {
            char what[96];
            snprintf(what, sizeof what, "-inf from score_mod as mask_mod's false [%s]", name);
            compare(what, &a, &b, tol);
        }
        result_free(&a), result_free(&b);
    }
    /* 3-D inputs are one head: h is 0 */
    ctx = attn_ctx_new(1);
    attn_tensor *x = attn_tensor_alloc(3, (int64_t[]){2, 5, 4});
    for (int64_t i = 0; x && i < x->numel; i++) x->data[i] = 1.0f;
    o = (attn_sdpa_opts){.features.mods = {.mask_mod = head_0_only}};
    attn_tensor *y = x ? attn_sdpa(ctx, x, x, x, &o, NULL) : NULL;
    TK_CHECK(y && y->data[0] == 1.0f && y->data[y->numel - 1] == 1.0f, "3-D inputs: mask_mod sees head 0 (%s)",
             attn_last_error());
    /* the reference's weights: rows sum to 1 over the kept keys, 0 elsewhere */
    attn_tensor *w = NULL;
    o = (attn_sdpa_opts){.impl = ATTN_SDPA_REF, .features.mods = {.mask_mod = odd_keys}};
    attn_ctx_set_grad_enabled(ctx, false);
    y = attn_sdpa(ctx, in[0], in[1], in[2], &o, &w);
    bool ok = y && w;
    for (int64_t r = 0; ok && r < 2 * 3 * 70; r++) {
        double sum = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            ok = ok && (j % 2 || w->data[r * Lk + j] == 0.0f);
            sum += w->data[r * Lk + j];
        }
        ok = ok && fabs(sum - 1.0) < 1e-5;
    }
    TK_CHECK(ok, "need_weights: the weights of hidden keys 0, each row's sum 1 (%s)", attn_last_error());
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
    attn_tensor_free(g);
}

int main(void)
{
    static const float any = 1.0f; /* slopes: against_built_in's */
    static const problem problems[] = {
        /* B, H, Hkv, Lq, Lk, D, Dv, {H, Lq, Lk, causal, window, left, right, slopes, softcap}, lens, dropout */
        {2, 4, 2, 200, 200, 16, 16, {0, 0, 0, true, false, 0, 0, NULL, 0.0f}, false, 0.0f},   /* causal, GQA */
        {1, 3, 3, 130, 300, 16, 8, {0, 0, 0, false, true, 37, 5, NULL, 0.0f}, false, 0.0f},   /* window, Lq < Lk */
        {1, 2, 2, 200, 90, 16, 16, {0, 0, 0, false, true, 20, -1, NULL, 0.0f}, false, 0.0f},  /* window, Lq > Lk */
        {2, 4, 4, 70, 150, 16, 16, {0, 0, 0, false, false, 0, 0, &any, 0.0f}, true, 0.0f},    /* ALiBi, lens */
        {1, 3, 3, 80, 140, 32, 16, {0, 0, 0, false, false, 0, 0, NULL, 2.5f}, false, 0.0f},   /* softcap */
        {2, 8, 2, 257, 257, 32, 32, {0, 0, 0, true, true, 64, 3, &any, 4.0f}, true, 0.0f},    /* everything */
        {1, 4, 2, 200, 200, 16, 16, {0, 0, 0, true, true, 100, 0, &any, 3.0f}, false, 0.25f}, /* and dropout */
    };
    for (size_t i = 0; i < sizeof problems / sizeof *problems; i++) against_built_in(problems[i]);
    nonlinear();
    bf16_levels();
    refusals_and_edges();
    return tk_finish("test_attention_mods");
}
