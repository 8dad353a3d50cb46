/* Parity of attention with PyTorch 1.13, from tests/golden/attn_*.safetensors (written by
 * tests/golden/make_golden_attention.py; the file's docstring says what each tensor means):
 *   - sdpa_*: attn_sdpa against the tutorials' math (masked_fill(-inf), softmax, @ v) with no
 *     mask, causal (square and non-square, top-left), a bool attend mask, an additive mask with
 *     -inf, D2L valid_lens (B) and (B, Lq), key padding, a custom scale and 3-D inputs. Both
 *     kernels (ATTN_SDPA_REF, which also returns the weights, and ATTN_SDPA_FUSED) run against the
 *     same golden: out, weights (ref only), grad.q, grad.k, grad.v.
 *   - mha_*: attn_mha_forward against torch.nn.MultiheadAttention(16, 4, batch_first=True): the
 *     layer is built with attn_mha_init (prefix "") and every parameter is overwritten from the
 *     file by its state_dict name; the registry must hold exactly torch's state_dict names. Masks
 *     are stored in PyTorch's polarity and passed as they are (bool attn_mask true = not allowed:
 *     the mask's blocked field; 3-D masks (B*H, L, S) as stored). Compared: out, weights (averaged or per head), the gradient of every
 *     input and of every parameter. Both kernels again (weights only from the ref path).
 *   - wrong shapes fail with ATTN_ERR_SHAPE and a message.
 * The options of each case are in the table below, mirrored from the script, and cross-checked
 * with the file's metadata; the mask tensors the file must hold are listed per case too.
 *
 * Tolerance, per tensor: |got - ref| <= rtol |ref_i| + atol max_j |ref_j| (testkit.h) for every
 * output, weight and gradient. Both sides are float32 (torch's own result is the golden) with
 * different summation orders (torch scales q before the matmul, we scale the scores; the fused
 * kernel uses an online softmax). n, the roundings on the longest path:
 *   - sdpa (d 8, dv 6, Lq, Lk <= 7): q k^T (8), softmax (7), @ v (7); backward dv (7), dP (6),
 *     the softmax's row sum (7), dq (7), dk (7): n = 64, where the worst case n u is no larger
 *     than the probabilistic bound;
 *   - mha (E 16, 4 heads of 4, L, S <= 7, B 2): the in-projection (16), sdpa (~30 forward and
 *     backward), the out-projection (16) forward and back, dx summing the three projections'
 *     inputs (48), the weight gradients' sums over B * L (14): n = 160;
 *   - cond 4: a softmax-weighted mean of N(0, 1) values has sum |p_k v_k| <= max |v| (about 3),
 *     the outputs are O(1); the softmax backward P (dP - rowsum(P dP)) cancels within that;
 *   - 8 roundings of an element's own (exp, the scale, the last products).
 * So sdpa: tk_tol_of(2, 64, 4, 8) = 9.5e-7 |ref_i| + 3.1e-5 max|ref|, mha: tk_tol_of(2, 160, 4,
 * 8) = 9.5e-7 |ref_i| + 4.8e-5 max|ref| (before: 1e-5 absolute + 1e-4 |ref_i| for both). An error
 * of 2e-4 max|ref| in any one element fails them (checked every time).
 * Fully masked rows have no golden data: torch 1.13 gives NaN there, libattn 0 by design
 * (tests/test_attention.c checks that).
 * MEDIUM precision: every sdpa case once more through the fused kernel with bf16 products (where
 * the CPU has AVX512_BF16; float32 elsewhere, and the check holds the same), against the same
 * golden within the bound attn.h states (testkit_bf16.h, from the probabilities of the float32
 * reference kernel) plus the float32 tolerance above. (The mha cases' products are below 16^3
 * multiply-adds but their attention, which the sdpa cases cover.) */
#include "testkit.h"
#include "testkit_bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bounds (the header says why); test_cli_op uses the same for the same files */
#define SDPA_TOL tk_tol_of(2, 64, 4, 8)
#define MHA_TOL tk_tol_of(2, 160, 4, 8)
#define MHA_E 16
#define MHA_HEADS 4

/* The mask tensors a file must hold (and no other). */
enum {
    M_ATTEND = 1 << 0,      /* sdpa attend_mask: BOOL, true = may attend */
    M_ADDITIVE = 1 << 1,    /* sdpa additive_mask: F32 */
    M_LENS = 1 << 2,        /* sdpa valid_lens: I64 (B) or (B, Lq) */
    M_PAD = 1 << 3,         /* key_padding_mask: BOOL (B, Lk), true = padding */
    M_TORCH_BOOL = 1 << 4,  /* mha attn_mask: BOOL (L, S) or (B*H, L, S), true = blocked */
    M_TORCH_FLOAT = 1 << 5, /* mha attn_mask: F32 (L, S), added */
};

typedef enum {
    SDPA,
    MHA
} case_kind;

typedef struct golden_case {
    const char *name; /* tests/golden/attn_<name>.safetensors */
    case_kind kind;
    unsigned masks;
    bool causal;         /* sdpa */
    float scale;         /* sdpa: 0 = 1/sqrt(D) */
    int64_t kdim, vdim;  /* mha: 0 = E */
    bool no_bias, cross; /* mha: bias=False; cross-attention (else one tensor as q, k, v) */
    bool need_weights, average;
} golden_case;

#define SDPA_CASE(nm, ...)                                                                                             \
    {                                                                                                                  \
        .name = nm, .kind = SDPA, .need_weights = true, __VA_ARGS__                                                    \
    }
#define MHA_CASE(nm, ...)                                                                                              \
    {                                                                                                                  \
        .name = nm, .kind = MHA, __VA_ARGS__                                                                           \
    }

static const golden_case cases[] = {
    SDPA_CASE("sdpa_plain"),
    SDPA_CASE("sdpa_3d"),
    SDPA_CASE("sdpa_3d_masks", .masks = M_ATTEND | M_ADDITIVE), /* (B, Lq, Lk) additive mask */
    SDPA_CASE("sdpa_causal", .causal = true),
    SDPA_CASE("sdpa_causal_q7k5", .causal = true),
    SDPA_CASE("sdpa_causal_q5k7", .causal = true),
    SDPA_CASE("sdpa_attend", .masks = M_ATTEND),
    SDPA_CASE("sdpa_additive", .masks = M_ADDITIVE),
    SDPA_CASE("sdpa_lens_batch", .masks = M_LENS),
    SDPA_CASE("sdpa_lens_query", .masks = M_LENS),
    SDPA_CASE("sdpa_key_padding", .masks = M_PAD),
    SDPA_CASE("sdpa_scale", .scale = 0.3f),
    MHA_CASE("mha_self_kpm", .masks = M_PAD, .need_weights = true, .average = true),
    MHA_CASE("mha_self_bool", .masks = M_TORCH_BOOL),
    MHA_CASE("mha_self_bool3d", .masks = M_TORCH_BOOL, .need_weights = true),
    MHA_CASE("mha_self_float", .masks = M_TORCH_FLOAT | M_PAD, .need_weights = true),
    MHA_CASE("mha_self_causal", .masks = M_TORCH_FLOAT, .need_weights = true, .average = true),
    MHA_CASE("mha_cross", .masks = M_PAD, .cross = true, .need_weights = true, .average = true),
    MHA_CASE("mha_kvdim", .masks = M_PAD, .cross = true, .kdim = 12, .vdim = 10),
    MHA_CASE("mha_nobias", .masks = M_TORCH_BOOL | M_PAD, .no_bias = true, .need_weights = true),
    /* unbatched: query (L, E), key_padding_mask (S), attn_mask (H, L, S), weights (H, L, S) */
    MHA_CASE("mha_unbatched", .masks = M_TORCH_BOOL | M_PAD, .need_weights = true),
};

/* ---- one case, loaded ---- */

typedef struct golden_run {
    const golden_case *c;
    attn_st_file *f;
    const char *in_names[3];
    attn_tensor *in[3]; /* heap, requires_grad; self-attention uses in[0] three times */
    int n_in;
    attn_mask mask; /* pointing into the buffers below */
    uint8_t *attend, *pad;
    attn_tensor *additive;
    int64_t *lens;
    attn_params *params; /* mha */
    attn_mha_layer mha;
} golden_run;

static const char *impl_name(attn_sdpa_impl impl)
{
    return impl == ATTN_SDPA_REF ? "ref" : "fused";
}

/* A BOOL tensor's bytes (malloc'd), or NULL with a failed check. */
static uint8_t *load_bool(golden_run *r, const attn_st_tensor *st)
{
    TK_CHECK(st->dtype == ATTN_DTYPE_BOOL, "%s: %s is %s, expected BOOL", r->c->name, st->name,
             attn_dtype_name(st->dtype));
    uint8_t *b = malloc(st->nbytes ? st->nbytes : 1);
    if (st->dtype != ATTN_DTYPE_BOOL || !b) {
        free(b);
        return NULL;
    }
    memcpy(b, st->data, st->nbytes);
    return b;
}

/* A mask's shape as stored: a 3-D nn.MultiheadAttention mask (B*H, L, S) goes to the library as
 * it is, which reads it as PyTorch does. */
static void set_shape(int *ndim, int64_t shape[4], const attn_st_tensor *st)
{
    *ndim = st->ndim;
    for (int i = 0; i < st->ndim && i < 4; i++) shape[i] = st->shape[i];
}

static void load_additive(golden_run *r, const attn_st_tensor *st)
{
    r->additive = tk_golden_tensor(r->f, st->name);
    if (!r->additive) return;
    r->mask.additive = r->additive->data;
    set_shape(&r->mask.additive_ndim, r->mask.additive_shape, st);
}

/* Fills r->mask from the file; checks the file holds exactly the masks the table names. */
static bool load_masks(golden_run *r)
{
    static const struct {
        const char *name;
        unsigned flags;
    } known[] = {{"attend_mask", M_ATTEND},
                 {"additive_mask", M_ADDITIVE},
                 {"valid_lens", M_LENS},
                 {"key_padding_mask", M_PAD},
                 {"attn_mask", M_TORCH_BOOL | M_TORCH_FLOAT}};
    const unsigned want = r->c->masks;
    r->mask.causal = r->c->causal;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const attn_st_tensor *st = attn_st_find(r->f, known[i].name);
        bool expected = (want & known[i].flags) != 0;
        TK_CHECK((st != NULL) == expected, "%s: mask %s %s in the file", r->c->name, known[i].name,
                 st ? "unexpected" : "missing");
        if (!st || !expected) continue;
        switch (known[i].flags) {
        case M_ATTEND:
            if (!(r->attend = load_bool(r, st))) return false;
            r->mask.attend = r->attend;
            set_shape(&r->mask.attend_ndim, r->mask.attend_shape, st);
            break;
        case M_ADDITIVE:
            load_additive(r, st);
            if (!r->additive) return false;
            break;
        case M_LENS: {
            int64_t n = 0;
            r->lens = attn_st_load_i64(r->f, st->name, &n);
            TK_CHECK(r->lens != NULL, "%s: valid_lens: %s", r->c->name, attn_last_error());
            if (!r->lens) return false;
            r->mask.valid_lens = (attn_lens){r->lens, st->ndim, {st->shape[0], st->ndim == 2 ? st->shape[1] : 0}};
            break;
        }
        case M_PAD:
            if (!(r->pad = load_bool(r, st))) return false;
            r->mask.key_padding = r->pad; /* (B, Lk), or (Lk) unbatched: B = 1 */
            r->mask.key_padding_shape[0] = st->ndim == 2 ? st->shape[0] : 1;
            r->mask.key_padding_shape[1] = st->shape[st->ndim - 1];
            break;
        default: /* torch attn_mask as nn.MultiheadAttention takes it: bool (true = not allowed)
                    or float (added) */
            if (want & M_TORCH_BOOL) {
                if (!(r->attend = load_bool(r, st))) return false;
                r->mask.blocked = r->attend;
                set_shape(&r->mask.blocked_ndim, r->mask.blocked_shape, st);
            } else {
                TK_CHECK(st->dtype == ATTN_DTYPE_F32, "%s: attn_mask is %s, expected F32", r->c->name,
                         attn_dtype_name(st->dtype));
                load_additive(r, st);
                if (!r->additive) return false;
            }
        }
    }
    return true;
}

typedef struct meta_int {
    const char *key;
    long expected;
} meta_int;

/* The table's options against the file's metadata (the script writes them). */
static void check_metadata(const golden_run *r)
{
    const golden_case *c = r->c;
    const char *kind = attn_st_metadata(r->f, "kind");
    TK_CHECK(kind && strcmp(kind, c->kind == SDPA ? "sdpa" : "mha") == 0, "%s: metadata kind %s", c->name,
             kind ? kind : "(none)");
    meta_int ints[6];
    int n = 0;
    if (c->kind == SDPA) {
        ints[n++] = (meta_int){"causal", c->causal};
        const char *s = attn_st_metadata(r->f, "scale");
        bool ok = s && (c->scale == 0.0f ? strcmp(s, "default") == 0 : strtof(s, NULL) == c->scale);
        TK_CHECK(ok, "%s: metadata scale %s, table %g", c->name, s ? s : "(none)", c->scale);
    } else {
        ints[n++] = (meta_int){"kdim", (long)(c->kdim ? c->kdim : MHA_E)};
        ints[n++] = (meta_int){"vdim", (long)(c->vdim ? c->vdim : MHA_E)};
        ints[n++] = (meta_int){"bias", !c->no_bias};
        ints[n++] = (meta_int){"self_attention", !c->cross};
        ints[n++] = (meta_int){"need_weights", c->need_weights};
        if (c->need_weights) ints[n++] = (meta_int){"average_attn_weights", c->average};
    }
    for (int i = 0; i < n; i++) {
        const char *s = attn_st_metadata(r->f, ints[i].key);
        TK_CHECK(s && strtol(s, NULL, 10) == ints[i].expected, "%s: metadata %s = %s, table %ld", c->name, ints[i].key,
                 s ? s : "(none)", ints[i].expected);
    }
}

/* Builds the MHA layer and overwrites every parameter from the file by its state_dict name; every
 * file tensor that is not an input, a mask or a result must be a parameter of ours. */
static bool load_mha(golden_run *r)
{
    const golden_case *c = r->c;
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    r->params = attn_params_new();
    TK_NOT_NULL(r->params);
    if (!r->params) return false;
    attn_status st = attn_mha_init(&r->mha, r->params, "", MHA_E, MHA_HEADS, c->kdim, c->vdim, !c->no_bias, 0.0f, &rng);
    TK_CHECK(st == ATTN_OK, "%s: mha_init: %s", c->name, attn_last_error());
    if (st != ATTN_OK) return false;
    bool ok = true;
    for (size_t i = 0; i < attn_params_count(r->params); i++) {
        const char *name = attn_params_name(r->params, i);
        st = attn_st_copy_into(r->f, name, attn_params_at(r->params, i));
        TK_CHECK(st == ATTN_OK, "%s: parameter %s: %s", c->name, name, attn_last_error());
        ok = ok && st == ATTN_OK;
    }
    static const char *const not_params[] = {"query",     "key", "value",   "key_padding_mask",
                                             "attn_mask", "out", "weights", "grad_out"};
    for (size_t i = 0; i < attn_st_count(r->f); i++) {
        const char *name = attn_st_at(r->f, i)->name;
        bool other = strncmp(name, "grad.", 5) == 0;
        for (size_t j = 0; j < sizeof not_params / sizeof *not_params; j++)
            other = other || strcmp(name, not_params[j]) == 0;
        TK_CHECK(other || attn_params_get(r->params, name) != NULL,
                 "%s: torch parameter %s has no twin in our registry", c->name, name);
    }
    return ok;
}

static bool load_case(golden_run *r)
{
    static const char *const sdpa_in[3] = {"q", "k", "v"};
    static const char *const mha_in[3] = {"query", "key", "value"};
    const golden_case *c = r->c;
    r->n_in = c->kind == MHA && !c->cross ? 1 : 3;
    for (int i = 0; i < r->n_in; i++) {
        r->in_names[i] = c->kind == SDPA ? sdpa_in[i] : mha_in[i];
        if (!(r->in[i] = tk_golden_tensor(r->f, r->in_names[i]))) return false;
        attn_tensor_set_requires_grad(r->in[i], true);
    }
    check_metadata(r);
    if (!load_masks(r)) return false;
    return c->kind == MHA ? load_mha(r) : true;
}

static void free_run(golden_run *r)
{
    for (int i = 0; i < 3; i++) attn_tensor_free(r->in[i]);
    attn_tensor_free(r->additive);
    free(r->attend);
    free(r->pad);
    free(r->lens);
    if (r->params) attn_params_free(r->params);
    if (r->f) attn_st_close(r->f);
}

/* ---- comparison ---- */

/* got (values and shape) against golden tensor `name`. */
static void compare(const golden_run *r, attn_sdpa_impl impl, const char *name, const attn_tensor *got,
                    const float *values)
{
    attn_tensor *ref = tk_golden_tensor(r->f, name);
    if (!ref) return;
    char what[160], gs[64], rs[64];
    snprintf(what, sizeof what, "%s [%s]: %s", r->c->name, impl_name(impl), name);
    bool same = got && attn_same_shape(got, ref);
    TK_CHECK(same, "%s: shape %s, torch has %s", what, got ? attn_shape_str(got, gs, sizeof gs) : "none",
             attn_shape_str(ref, rs, sizeof rs));
    if (same && values)
        tk_close_scaled(what, values, ref->data, ref->numel, r->c->kind == SDPA ? SDPA_TOL : MHA_TOL);
    else if (same)
        TK_CHECK(false, "%s: no gradient computed", what);
    attn_tensor_free(ref);
}

/* Forward with one kernel, then backward from torch's grad_out; compares everything. */
static void run_impl(golden_run *r, attn_sdpa_impl impl)
{
    const golden_case *c = r->c;
    attn_ctx *ctx = attn_ctx_new(1);
    TK_NOT_NULL(ctx);
    if (!ctx) return;
    for (int i = 0; i < r->n_in; i++) attn_tensor_zero_grad(r->in[i]);
    if (r->params) attn_params_zero_grad(r->params);
    bool want_weights = c->need_weights && impl == ATTN_SDPA_REF;
    attn_tensor *w = NULL, *out;
    attn_tensor *q = r->in[0], *k = r->in[r->n_in > 1 ? 1 : 0], *v = r->in[r->n_in > 1 ? 2 : 0];
    if (c->kind == SDPA) {
        attn_sdpa_opts opts = {.scale = c->scale, .mask = r->mask, .impl = impl};
        out = attn_sdpa(ctx, q, k, v, &opts, want_weights ? &w : NULL);
    } else {
        attn_mha_opts opts = {.mask = r->mask, .average_weights = c->average, .impl = impl};
        out = attn_mha_forward(ctx, &r->mha, q, k, v, &opts, want_weights ? &w : NULL);
    }
    TK_CHECK(out != NULL, "%s [%s]: forward: %s", c->name, impl_name(impl), attn_last_error());
    if (out) {
        compare(r, impl, "out", out, out->data);
        if (want_weights) compare(r, impl, "weights", w, w ? w->data : NULL);
        attn_tensor *g = tk_golden_tensor(r->f, "grad_out");
        attn_status st = g && g->numel == out->numel ? attn_backward_from(ctx, out, g->data) : ATTN_ERR_SHAPE;
        TK_CHECK(st == ATTN_OK, "%s [%s]: backward: %s", c->name, impl_name(impl), attn_last_error());
        attn_tensor_free(g);
        char name[96];
        for (int i = 0; st == ATTN_OK && i < r->n_in; i++) {
            snprintf(name, sizeof name, "grad.%s", r->in_names[i]);
            compare(r, impl, name, r->in[i], r->in[i]->grad);
        }
        for (size_t i = 0; st == ATTN_OK && r->params && i < attn_params_count(r->params); i++) {
            attn_tensor *p = attn_params_at(r->params, i);
            snprintf(name, sizeof name, "grad.%s", attn_params_name(r->params, i));
            compare(r, impl, name, p, p->grad);
        }
    }
    attn_ctx_free(ctx);
}

static double medium_worst; /* the largest fraction of a MEDIUM bound used */

/* got within 1.1 bound + the float32 tolerance of golden `name` everywhere */
static void compare_bounded(const golden_run *r, const char *name, const float *got, const double *bound)
{
    attn_tensor *ref = tk_golden_tensor(r->f, name);
    if (!ref) return;
    double max_ref = 0.0, worst = 0.0;
    int64_t at = 0;
    for (int64_t i = 0; i < ref->numel; i++) max_ref = fmax(max_ref, fabs(ref->data[i]));
    const tk_tol tol = SDPA_TOL;
    for (int64_t i = 0; i < ref->numel; i++) {
        const double allowed = 1.1 * bound[i] + tol.rtol * fabs(ref->data[i]) + tol.atol * max_ref;
        const double used = fabs((double)got[i] - ref->data[i]) / allowed;
        if (!(used <= worst)) worst = used, at = i;
    }
    TK_CHECK(worst <= 1.0, "%s [fused, medium]: %s[%lld] got %.9g, torch %.9g, %.2f of the bound used", r->c->name,
             name, (long long)at, (double)got[at], (double)ref->data[at], worst);
    medium_worst = fmax(medium_worst, worst);
    attn_tensor_free(ref);
}

/* The fused kernel at MEDIUM (see the header), an sdpa case. */
static void run_medium(golden_run *r)
{
    const golden_case *c = r->c;
    attn_tensor *q = r->in[0], *k = r->in[1], *v = r->in[2];
    const int nd = q->ndim;
    const tk_head h = {q->shape[nd - 2], k->shape[nd - 2], q->shape[nd - 1], v->shape[nd - 1],
                       c->scale > 0.0f ? c->scale : 1.0 / sqrt((double)q->shape[nd - 1])};
    const int64_t heads = q->numel / (h.lq * h.d);
    attn_ctx *ctx = attn_ctx_new(1), *pctx = attn_ctx_new(1);
    attn_tensor *g = tk_golden_tensor(r->f, "grad_out"), *w = NULL;
    double *edq = calloc((size_t)q->numel, sizeof(double)), *edk = calloc((size_t)k->numel, sizeof(double));
    double *edv = calloc((size_t)v->numel, sizeof(double)), *P = calloc((size_t)(h.lq * h.lk), sizeof(double));
    bool ok = ctx && pctx && g && edq && edk && edv && P &&
              attn_ctx_set_matmul_precision(ctx, ATTN_PRECISION_MEDIUM) == ATTN_OK &&
              attn_ctx_set_grad_enabled(pctx, false) == ATTN_OK;
    for (int i = 0; ok && i < 3; i++) attn_tensor_zero_grad(r->in[i]);
    attn_sdpa_opts fused = {.scale = c->scale, .mask = r->mask, .impl = ATTN_SDPA_FUSED};
    attn_sdpa_opts ref = {.scale = c->scale, .mask = r->mask, .impl = ATTN_SDPA_REF};
    attn_tensor *out = ok ? attn_sdpa(ctx, q, k, v, &fused, NULL) : NULL;
    ok = out && out->numel == g->numel && attn_backward_from(ctx, out, g->data) == ATTN_OK &&
         attn_sdpa(pctx, q, k, v, &ref, &w) && w;
    TK_CHECK(ok, "%s [fused, medium]: forward, backward and the reference's weights: %s", c->name, attn_last_error());
    double *eo = ok ? calloc((size_t)out->numel, sizeof(double)) : NULL; /* like out, as edq like q ... */
    for (int64_t hd = 0; ok && eo && hd < heads; hd++) {
        for (int64_t i = 0; i < h.lq * h.lk; i++) P[i] = w->data[hd * h.lq * h.lk + i];
        ok = tk_sdpa_bf16_bound(&h, q->data + hd * h.lq * h.d, k->data + hd * h.lk * h.d, v->data + hd * h.lk * h.dv,
                                g->data + hd * h.lq * h.dv, P, eo + hd * h.lq * h.dv, edq + hd * h.lq * h.d,
                                edk + hd * h.lk * h.d, edv + hd * h.lk * h.dv);
    }
    if (ok && eo) {
        compare_bounded(r, "out", out->data, eo);
        compare_bounded(r, "grad.q", q->grad, edq);
        compare_bounded(r, "grad.k", k->grad, edk);
        compare_bounded(r, "grad.v", v->grad, edv);
    }
    free(eo), free(P), free(edq), free(edk), free(edv);
    attn_tensor_free(g);
    attn_ctx_free(ctx), attn_ctx_free(pctx);
}

static void run_case(const golden_case *c)
{
    char file[96];
    snprintf(file, sizeof file, "attn_%s", c->name);
    golden_run r = {.c = c, .f = tk_golden(file)};
    if (r.f && load_case(&r)) {
        run_impl(&r, ATTN_SDPA_REF);
        run_impl(&r, ATTN_SDPA_FUSED);
        if (c->kind == SDPA && r.n_in == 3) run_medium(&r);
    }
    free_run(&r);
}

/* ---- wrong shapes: ATTN_ERR_SHAPE and a message naming the op ---- */

typedef struct bad_call {
    const char *what;
    case_kind kind;
    int64_t q[4], k[4], v[4]; /* 4-D for sdpa, 3-D (last entry 0) for mha */
    int64_t attend_rows;      /* > 0: an attend mask (attend_rows, Lk) that cannot broadcast */
    int q_ndim, kv_ndim;      /* 0: as the kind; 2: mha unbatched */
} bad_call;

static const bad_call bad_calls[] = {
    {"sdpa: q and k head dims differ", SDPA, {2, 3, 5, 8}, {2, 3, 7, 7}, {2, 3, 7, 6}, 0, 0, 0},
    {"sdpa: k and v lengths differ", SDPA, {2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 6, 6}, 0, 0, 0},
    {"sdpa: mask rows neither 1 nor Lq", SDPA, {2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 6}, 4, 0, 0},
    {"mha: query width is not E", MHA, {2, 5, 15}, {2, 5, 16}, {2, 5, 16}, 0, 0, 0},
    {"mha: key and value lengths differ", MHA, {2, 5, 16}, {2, 6, 16}, {2, 7, 16}, 0, 0, 0},
    {"mha: unbatched query width is not E", MHA, {5, 15}, {5, 16}, {5, 16}, 0, 2, 2},
    {"mha: unbatched key and value lengths differ", MHA, {5, 16}, {6, 16}, {7, 16}, 0, 2, 2},
    {"mha: unbatched query, batched key and value", MHA, {5, 16}, {1, 5, 16}, {1, 5, 16}, 0, 2, 3},
};

static void wrong_shapes(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_mha_layer m;
    TK_OK(attn_mha_init(&m, p, "", MHA_E, MHA_HEADS, 0, 0, true, 0.0f, &rng));
    static uint8_t attend[4 * 7];
    memset(attend, 1, sizeof attend);
    for (size_t i = 0; ctx && i < sizeof bad_calls / sizeof *bad_calls; i++) {
        const bad_call *b = &bad_calls[i];
        int nd = b->kind == SDPA ? 4 : 3;
        attn_tensor *q = attn_tensor_zeros(ctx, b->q_ndim ? b->q_ndim : nd, b->q);
        attn_tensor *k = attn_tensor_zeros(ctx, b->kv_ndim ? b->kv_ndim : nd, b->k);
        attn_tensor *v = attn_tensor_zeros(ctx, b->kv_ndim ? b->kv_ndim : nd, b->v);
        attn_mask mask = {0};
        if (b->attend_rows) {
            mask.attend = attend;
            mask.attend_ndim = 2;
            mask.attend_shape[0] = b->attend_rows;
            mask.attend_shape[1] = b->k[nd - 2];
        }
        attn_clear_error();
        attn_tensor *out;
        if (b->kind == SDPA) {
            attn_sdpa_opts opts = {.mask = mask};
            out = attn_sdpa(ctx, q, k, v, &opts, NULL);
        } else {
            attn_mha_opts opts = {.mask = mask};
            out = attn_mha_forward(ctx, &m, q, k, v, &opts, NULL);
        }
        const char *msg = attn_last_error();
        const char *op = b->kind == SDPA ? "sdpa" : "mha";
        TK_CHECK(out == NULL && attn_last_status() == ATTN_ERR_SHAPE, "%s: expected a shape error", b->what);
        TK_CHECK(msg && strstr(msg, op) != NULL, "%s: message \"%s\" should name %s", b->what, msg ? msg : "(null)",
                 op);
    }
    attn_params_free(p);
    attn_ctx_free(ctx);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    wrong_shapes();
    printf("test_golden_attention: %zu golden cases, each with the ref and the fused kernel\n",
           sizeof cases / sizeof cases[0]);
    printf("test_golden_attention: the sdpa cases at MEDIUM (%s) used at most %.3f of attn.h's bf16 bound\n",
           attn_bf16_attention()  ? "bf16 products"
           : attn_bf16_products() ? "float32 here: bf16 dot products no faster than float32 FMAs"
                                  : "float32 here: no AVX512_BF16",
           medium_worst);
    return tk_finish("test_golden_attention");
}
