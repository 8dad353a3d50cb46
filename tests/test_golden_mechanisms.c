/* Parity of the attention mechanisms beyond SDPA/MHA with PyTorch 1.13, from
 * tests/golden/mech_*.safetensors (written by tests/golden/make_golden_mechanisms.py; its
 * docstring says what every tensor means):
 *   - additive_*: attn_additive_forward against D2L's AdditiveAttention with valid_lens (B) and
 *     (B, Lq) (D2L's masked_softmax, -1e6 fill);
 *   - nw_*: attn_nw_forward against seed 003's NWKernelRegression with a learned width w (a
 *     0-dim parameter "w") and with the fixed kernel (w NULL); attn_nw_leave_one_out must
 *     rebuild the stored keys and values from x_train and y_train exactly;
 *   - linear_*: attn_linear_attention_forward against seed 002's EfficientAttention, its Shen
 *     variant, and key padding;
 *   - conv_attention*: attn_conv_attention_forward against seed 002's ConvAttention (with the
 *     seed's own MultiHeadAttention), per-head weights; once with the parameters converted to
 *     nn.MultiheadAttention's names, once with the seed's names (attention.Wq.weight...), whose
 *     rows this test copies into in_proj_weight/in_proj_bias itself. Run with both SDPA kernels
 *     (weights only from the reference one).
 * Every module is built by its init into an attn_params with prefix "", every parameter is
 * overwritten from the file (attn_st_copy_into), and every parameter tensor in the file must land
 * in one. Compared: out, weights, the gradient of every input and of every parameter after a
 * backward from torch's grad_out.
 *
 * Tolerance, per tensor: |got - ref| <= rtol |ref_i| + atol max_j |ref_j| (testkit.h), the same
 * for every case: TK_TOL_MECH = tk_tol_of(2, 160, 4, 8) = 9.5e-7 |ref_i| + 4.8e-5 max|ref|
 * (before: 1e-5 absolute + 1e-4 |ref_i|). Both sides are float32 (torch's own result is the
 * golden) with different summation orders. n = 160 roundings on the longest path, conv_attention's
 * (x (2, 5, 8)): the conv1d (3 taps x 8 channels = 24), the in-projection (8), scores over a head
 * of 4, softmax and @ v over 5 positions, the out-projection (8), the same back, dx summing the
 * three projections' inputs (24) and conv's taps (24), the weight gradients' sums over B * L = 10;
 * the additive (q 5, k 4, hidden 7, 6 keys, weight sums over 2 * 3 * 6 = 36), NW (11 keys) and
 * linear attention (8 channels, 5 positions) paths are shorter. cond 4: softmax-weighted means of
 * O(1) values, whose sum |p_k v_k| <= max |v| is about 3 times the largest output; 8 roundings of
 * an element's own (exp, tanh, the last products). A key bias's gradient is 0 in exact arithmetic
 * (to_key.bias, the seed's Wk.bias): its bound takes the scale of its weight's gradient
 * (tk_key_bias_scale says why). An error of 2e-4 max|ref| in any one element (of that scale for a
 * key bias) fails them (checked every time). */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

/* Sizes, mirrored from the script. */
#define ADD_HIDDENS 7
#define CONV_E 8
#define CONV_HEADS 2
#define CONV_KERNEL 3

typedef enum {
    ADDITIVE,
    NW,
    LINEAR,
    CONV
} mech_kind;

typedef struct mech_case {
    const char *name; /* tests/golden/mech_<name>.safetensors */
    mech_kind kind;
    bool learned_w;  /* nw: the parameter "w" */
    bool shen;       /* linear: ATTN_LINEAR_ATTENTION_SHEN */
    bool seed_names; /* conv: the file names the MHA as seed 002 (Wq, Wk, Wv, fc_out) */
} mech_case;

static const mech_case cases[] = {
    {.name = "additive_lens_batch", .kind = ADDITIVE},
    {.name = "additive_lens_query", .kind = ADDITIVE},
    {.name = "nw_learned", .kind = NW, .learned_w = true},
    {.name = "nw_fixed", .kind = NW},
    {.name = "linear_efficient", .kind = LINEAR},
    {.name = "linear_shen", .kind = LINEAR, .shen = true},
    {.name = "linear_padding", .kind = LINEAR},
    {.name = "conv_attention", .kind = CONV},
    {.name = "conv_attention_seed", .kind = CONV, .seed_names = true},
};

/* Seed 002's MHA names -> parts of ours: block i of `ours` holds `seed`. */
static const struct {
    const char *ours, *seed;
    int block;
} seed_aliases[] = {
    {"in_proj_weight", "Wq.weight", 0},      {"in_proj_weight", "Wk.weight", 1},  {"in_proj_weight", "Wv.weight", 2},
    {"in_proj_bias", "Wq.bias", 0},          {"in_proj_bias", "Wk.bias", 1},      {"in_proj_bias", "Wv.bias", 2},
    {"out_proj.weight", "fc_out.weight", 0}, {"out_proj.bias", "fc_out.bias", 0},
};
#define SEED_PREFIX "attention."

/* File tensors that are not parameters. */
static const char *const not_params[] = {"q",       "k",       "v",   "x",       "valid_lens", "key_padding_mask",
                                         "x_train", "y_train", "out", "weights", "grad_out"};

typedef struct mech_run {
    const mech_case *c;
    attn_st_file *f;
    attn_params *params;
    const char *in_names[3];
    attn_tensor *in[3]; /* heap, requires_grad */
    int n_in;
    attn_lens lens; /* additive: valid_lens (data malloc'd) or none */
    attn_mask mask; /* linear: key_padding_mask (malloc'd) or none */
    attn_additive_layer additive;
    attn_tensor *w; /* nw: the parameter, or NULL */
    attn_linear_attention_layer linear;
    attn_conv_attention_layer conv;
} mech_run;

/* One part of a parameter: the file tensor `name` holds elements [offset, offset + numel). */
typedef struct param_part {
    char name[128];
    int64_t offset;
} param_part;

/* The file tensors that make up parameter i (3 at most): itself, or seed-named blocks. */
static int param_parts(const mech_run *r, size_t i, param_part parts[3])
{
    const char *name = attn_params_name(r->params, i);
    int n = 0;
    if (r->c->seed_names && strncmp(name, SEED_PREFIX, strlen(SEED_PREFIX)) == 0) {
        int64_t block = attn_params_at(r->params, i)->numel;
        block /= strcmp(name + strlen(SEED_PREFIX), "in_proj_weight") == 0 ||
                         strcmp(name + strlen(SEED_PREFIX), "in_proj_bias") == 0
                     ? 3
                     : 1;
        for (size_t a = 0; a < sizeof seed_aliases / sizeof *seed_aliases; a++)
            if (strcmp(name + strlen(SEED_PREFIX), seed_aliases[a].ours) == 0) {
                snprintf(parts[n].name, sizeof parts[n].name, SEED_PREFIX "%s", seed_aliases[a].seed);
                parts[n++].offset = seed_aliases[a].block * block;
            }
        if (n > 0) return n;
    }
    snprintf(parts[0].name, sizeof parts[0].name, "%s", name);
    parts[0].offset = 0;
    return 1;
}

/* Overwrites every parameter from the file; checks every file parameter was used. */
static bool load_params(mech_run *r)
{
    bool ok = true;
    size_t used = 0;
    for (size_t i = 0; i < attn_params_count(r->params); i++) {
        attn_tensor *p = attn_params_at(r->params, i);
        param_part parts[3];
        int n = param_parts(r, i, parts);
        used += (size_t)n;
        if (n == 1 && parts[0].offset == 0) {
            attn_status st = attn_st_copy_into(r->f, parts[0].name, p);
            TK_CHECK(st == ATTN_OK, "%s: parameter %s: %s", r->c->name, parts[0].name, attn_last_error());
            ok = ok && st == ATTN_OK;
            continue;
        }
        int64_t covered = 0;
        for (int j = 0; j < n; j++) { /* seed-named blocks, copied by hand */
            attn_tensor *src = tk_golden_tensor(r->f, parts[j].name);
            bool fits = src && parts[j].offset + src->numel <= p->numel;
            TK_CHECK(!src || fits, "%s: %s does not fit in %s", r->c->name, parts[j].name,
                     attn_params_name(r->params, i));
            if (fits) {
                memcpy(p->data + parts[j].offset, src->data, (size_t)src->numel * sizeof(float));
                covered += src->numel;
            }
            attn_tensor_free(src);
        }
        TK_CHECK(covered == p->numel, "%s: the seed's tensors fill %lld of %lld values of %s", r->c->name,
                 (long long)covered, (long long)p->numel, attn_params_name(r->params, i));
        ok = ok && covered == p->numel;
    }
    size_t in_file = 0;
    for (size_t i = 0; i < attn_st_count(r->f); i++) {
        const char *name = attn_st_at(r->f, i)->name;
        bool other = strncmp(name, "grad.", 5) == 0;
        for (size_t j = 0; j < sizeof not_params / sizeof *not_params; j++)
            other = other || strcmp(name, not_params[j]) == 0;
        in_file += !other;
    }
    TK_CHECK(in_file == used, "%s: the file has %zu parameter tensors, our registry used %zu", r->c->name, in_file,
             used);
    return ok;
}

/* Builds the module of the case into r->params (prefix ""). */
static bool build(mech_run *r)
{
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_status st = ATTN_OK;
    const attn_tensor *x = r->in[0];
    switch (r->c->kind) {
    case ADDITIVE:
        st = attn_additive_init(&r->additive, r->params, "", r->in[0]->shape[2], r->in[1]->shape[2], ADD_HIDDENS, 0.0f,
                                &rng);
        break;
    case NW:
        if (r->c->learned_w && !(r->w = attn_params_add(r->params, "w", 0, (int64_t[]){1}))) st = attn_last_status();
        break;
    case LINEAR:
        st =
            attn_linear_attention_init(&r->linear, r->params, "", x->shape[2],
                                       r->c->shen ? ATTN_LINEAR_ATTENTION_SHEN : ATTN_LINEAR_ATTENTION_EFFICIENT, &rng);
        break;
    case CONV:
        st = attn_conv_attention_init(&r->conv, r->params, "", CONV_E, CONV_HEADS, CONV_KERNEL, &rng);
        break;
    }
    TK_CHECK(st == ATTN_OK, "%s: init: %s", r->c->name, attn_last_error());
    return st == ATTN_OK && load_params(r);
}

/* valid_lens and key_padding_mask, when the file has them. */
static bool load_masks(mech_run *r)
{
    const attn_st_tensor *lens = attn_st_find(r->f, "valid_lens");
    if (lens) {
        int64_t n;
        r->lens.data = attn_st_load_i64(r->f, "valid_lens", &n);
        r->lens.ndim = lens->ndim;
        memcpy(r->lens.shape, lens->shape, (size_t)lens->ndim * sizeof(int64_t));
        TK_CHECK(r->lens.data != NULL && lens->dtype == ATTN_DTYPE_I64, "%s: valid_lens: %s", r->c->name,
                 attn_last_error());
        if (!r->lens.data) return false;
    }
    const attn_st_tensor *pad = attn_st_find(r->f, "key_padding_mask");
    if (pad) {
        TK_CHECK(pad->dtype == ATTN_DTYPE_BOOL && pad->ndim == 2, "%s: key_padding_mask must be BOOL (B, L)",
                 r->c->name);
        uint8_t *bytes = malloc(pad->nbytes);
        if (!bytes) return false;
        memcpy(bytes, pad->data, pad->nbytes);
        r->mask.key_padding = bytes;
        memcpy(r->mask.key_padding_shape, pad->shape, sizeof r->mask.key_padding_shape);
    }
    return true;
}

static bool load_case(mech_run *r)
{
    static const char *const qkv[3] = {"q", "k", "v"};
    static const char *const x[1] = {"x"};
    bool seq = r->c->kind == LINEAR || r->c->kind == CONV;
    r->n_in = seq ? 1 : 3;
    for (int i = 0; i < r->n_in; i++) {
        r->in_names[i] = seq ? x[i] : qkv[i];
        if (!(r->in[i] = tk_golden_tensor(r->f, r->in_names[i]))) return false;
        attn_tensor_set_requires_grad(r->in[i], true);
    }
    r->params = attn_params_new();
    TK_NOT_NULL(r->params);
    return r->params && load_masks(r) && build(r);
}

static void free_run(mech_run *r)
{
    for (int i = 0; i < 3; i++) attn_tensor_free(r->in[i]);
    free((void *)r->lens.data);
    free((void *)r->mask.key_padding);
    attn_params_free(r->params);
    attn_st_close(r->f);
}

/* ---- comparison ---- */

static const char *impl_name(attn_sdpa_impl impl)
{
    return impl == ATTN_SDPA_REF ? "ref" : "fused";
}

/* Ours (values + offset, as many as the golden tensor `name` has) against it; whole: got is the
 * whole tensor, so the shapes must match, else a block of it at offset. */
static void compare(const mech_run *r, attn_sdpa_impl impl, const char *name, const attn_tensor *got,
                    const float *values, int64_t offset, bool whole)
{
    attn_tensor *ref = tk_golden_tensor(r->f, name);
    if (!ref) return;
    char what[200], gs[64], rs[64];
    snprintf(what, sizeof what, "%s [%s]: %s", r->c->name, impl_name(impl), name);
    bool fits = got && (whole ? attn_same_shape(got, ref) : offset + ref->numel <= got->numel);
    TK_CHECK(fits, "%s: shape %s, torch has %s", what, got ? attn_shape_str(got, gs, sizeof gs) : "none",
             attn_shape_str(ref, rs, sizeof rs));
    if (fits && values)
        tk_close_scaled(what, values + offset, ref->data, ref->numel,
                        (tk_tol){TK_TOL_MECH.rtol, TK_TOL_MECH.atol, tk_key_bias_scale(r->f, name)});
    else if (fits)
        TK_CHECK(false, "%s: nothing computed", what);
    attn_tensor_free(ref);
}

static attn_tensor *forward(mech_run *r, attn_ctx *ctx, attn_sdpa_impl impl, attn_tensor **w)
{
    attn_tensor **in = r->in;
    switch (r->c->kind) {
    case ADDITIVE:
        return attn_additive_forward(ctx, &r->additive, in[0], in[1], in[2], &r->lens, w);
    case NW:
        return attn_nw_forward(ctx, r->w, in[0], in[1], in[2], w);
    case LINEAR:
        return attn_linear_attention_forward(ctx, &r->linear, in[0], &r->mask);
    case CONV: {
        attn_mha_opts opts = {.average_weights = false, .impl = impl}; /* the seed's per head */
        return attn_conv_attention_forward(ctx, &r->conv, in[0], &opts, w);
    }
    }
    return NULL;
}

/* Forward (SDPA kernel impl where one is used), backward from torch's grad_out, compare all. */
static void run_impl(mech_run *r, attn_sdpa_impl impl)
{
    attn_ctx *ctx = attn_ctx_new(1);
    TK_NOT_NULL(ctx);
    if (!ctx) return;
    attn_ctx_set_training(ctx, false);
    for (int i = 0; i < r->n_in; i++) attn_tensor_zero_grad(r->in[i]);
    attn_params_zero_grad(r->params);
    bool has_weights = attn_st_find(r->f, "weights") != NULL;
    bool want_weights = has_weights && impl == ATTN_SDPA_REF;
    TK_CHECK(has_weights == (r->c->kind != LINEAR), "%s: weights %s in the file", r->c->name,
             has_weights ? "unexpected" : "missing");
    attn_tensor *w = NULL;
    attn_tensor *out = forward(r, ctx, impl, want_weights ? &w : NULL);
    TK_CHECK(out != NULL, "%s [%s]: forward: %s", r->c->name, impl_name(impl), attn_last_error());
    if (out) {
        compare(r, impl, "out", out, out->data, 0, true);
        if (want_weights) compare(r, impl, "weights", w, w ? w->data : NULL, 0, true);
        attn_tensor *g = tk_golden_tensor(r->f, "grad_out");
        attn_status st = g && g->numel == out->numel ? attn_backward_from(ctx, out, g->data) : ATTN_ERR_SHAPE;
        TK_CHECK(st == ATTN_OK, "%s [%s]: backward: %s", r->c->name, impl_name(impl), attn_last_error());
        attn_tensor_free(g);
        char name[512];
        for (int i = 0; st == ATTN_OK && i < r->n_in; i++) {
            snprintf(name, sizeof name, "grad.%s", r->in_names[i]);
            compare(r, impl, name, r->in[i], r->in[i]->grad, 0, true);
        }
        for (size_t i = 0; st == ATTN_OK && i < attn_params_count(r->params); i++) {
            attn_tensor *p = attn_params_at(r->params, i);
            param_part parts[3];
            int n = param_parts(r, i, parts);
            for (int j = 0; j < n; j++) {
                snprintf(name, sizeof name, "grad.%s", parts[j].name);
                compare(r, impl, name, p, p->grad, parts[j].offset, n == 1);
            }
        }
    }
    attn_ctx_free(ctx);
}

/* nw: the stored leave-one-out keys/values are attn_nw_leave_one_out of x_train/y_train. */
static void check_leave_one_out(const mech_run *r)
{
    static const char *const pairs[2][2] = {{"x_train", "k"}, {"y_train", "v"}};
    attn_ctx *ctx = attn_ctx_new(1);
    for (int i = 0; ctx && i < 2; i++) {
        attn_tensor *src = tk_golden_tensor(r->f, pairs[i][0]);
        attn_tensor *loo = attn_nw_leave_one_out(ctx, src);
        const attn_tensor *ref = r->in[i + 1];
        char what[96];
        snprintf(what, sizeof what, "%s: leave_one_out(%s) = %s", r->c->name, pairs[i][0], pairs[i][1]);
        TK_CHECK(loo && attn_same_shape(loo, ref), "%s: shape", what);
        if (loo && attn_same_shape(loo, ref)) tk_close(what, loo->data, ref->data, ref->numel, 0, 0);
        attn_tensor_free(src);
    }
    attn_ctx_free(ctx);
}

static void run_case(const mech_case *c)
{
    char file[96];
    snprintf(file, sizeof file, "mech_%s", c->name);
    mech_run r = {.c = c, .f = tk_golden(file)};
    if (r.f && load_case(&r)) {
        run_impl(&r, ATTN_SDPA_REF);
        if (c->kind == CONV) run_impl(&r, ATTN_SDPA_FUSED); /* the only one with an SDPA inside */
        if (c->kind == NW) check_leave_one_out(&r);
    }
    free_run(&r);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    printf("test_golden_mechanisms: %zu golden cases\n", sizeof cases / sizeof cases[0]);
    return tk_finish("test_golden_mechanisms");
}
