/* attn_mha_forward with fewer key/value heads than query heads (attn_mha_init_gqa):
 *   - against PyTorch compositions (tests/golden/make_golden_mha_gqa.py: nn.MultiheadAttention's
 *     math with K and V projections num_kv_heads * head_dim wide, repeat_interleave'd over the
 *     query heads; float64 on float32 inputs), self- and cross-attention, multi-query attention,
 *     kdim and vdim, no bias, key padding and a bool attn_mask, and with the attention features
 *     (attn_mha_opts.features: a window with ALiBi, softcap, all three under multi-query
 *     attention; the feat_* cases): output, the inputs' gradients and every parameter's, with both
 *     kernels;
 *   - attn_mha_init_gqa with num_kv_heads = num_heads is attn_mha_init's layer (names, shapes and
 *     values from the same rng);
 *   - every refusal of num_kv_heads.
 * Tolerance: one float32 side against float64, the in-projection (16), sdpa (~30 forward and
 * backward roundings) and the out-projection (16) on the longest path, through the backward's sums
 * over the batch and positions: tk_tol_of(1, 160, 4, 8), TK_TOL_MHA's n and cond with one side
 * (test_golden_attention.c derives them). */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

static const char *meta_of(attn_st_file *f, const char *key)
{
    const char *v = attn_st_metadata(f, key);
    return v ? v : "";
}

static void golden_case(const char *name)
{
    char file[64];
    snprintf(file, sizeof file, "mha_gqa_%s", name);
    attn_st_file *f = tk_golden(file);
    if (!f) return;
    const int64_t H = atoll(meta_of(f, "num_heads")), Hkv = atoll(meta_of(f, "num_kv_heads"));
    const int64_t kdim = atoll(meta_of(f, "kdim")), vdim = atoll(meta_of(f, "vdim"));
    const bool bias = atoi(meta_of(f, "bias")) == 1, self = atoi(meta_of(f, "self_attention")) == 1;
    attn_tensor *query = tk_golden_tensor(f, "query"), *g = tk_golden_tensor(f, "grad_out");
    attn_tensor *key = self ? query : tk_golden_tensor(f, "key"), *value = self ? query : tk_golden_tensor(f, "value");
    attn_tensor *kpm = attn_st_find(f, "key_padding_mask") ? tk_golden_tensor(f, "key_padding_mask") : NULL;
    attn_tensor *mask = attn_st_find(f, "attn_mask") ? tk_golden_tensor(f, "attn_mask") : NULL;
    for (int impl = ATTN_SDPA_FUSED; query && key && value && g && impl <= ATTN_SDPA_REF; impl++) {
        attn_params *params = attn_params_new();
        attn_mha_layer m;
        const int64_t E = query->shape[2];
        TK_OK(attn_mha_init_gqa(&m, params, "", E, H, Hkv, kdim, vdim, bias, 0.0f, NULL));
        TK_CHECK(m.num_kv_heads == Hkv && m.in_proj_weight == NULL && m.k_proj_weight &&
                     m.k_proj_weight->shape[0] == Hkv * (E / H) &&
                     (!bias || m.in_proj_bias->shape[0] == E + 2 * Hkv * (E / H)),
                 "%s: K and V projections %lld wide", name, (long long)(Hkv * (E / H)));
        for (size_t i = 0; i < attn_params_count(params); i++)
            TK_CHECK(attn_st_copy_into(f, attn_params_name(params, i), attn_params_at(params, i)) == ATTN_OK,
                     "%s: parameter %s: %s", name, attn_params_name(params, i), attn_last_error());
        for (size_t i = 0; i < attn_st_count(f); i++) { /* every torch parameter has its twin */
            const char *t = attn_st_at(f, i)->name;
            bool other = !strncmp(t, "grad.", 5) || !strcmp(t, "query") || !strcmp(t, "key") || !strcmp(t, "value") ||
                         !strcmp(t, "out") || !strcmp(t, "grad_out") || !strcmp(t, "key_padding_mask") ||
                         !strcmp(t, "attn_mask");
            TK_CHECK(other || attn_params_get(params, t), "%s: torch parameter %s has a twin", name, t);
        }
        attn_tensor *in[3] = {query, key, value};
        for (int i = 0; i < 3; i++) attn_tensor_set_requires_grad(in[i], true), attn_tensor_zero_grad(in[i]);
        attn_params_zero_grad(params);
        attn_mha_opts o = {.impl = (attn_sdpa_impl)impl};
        attn_score_features feat = {.softcap = (float)atof(meta_of(f, "softcap"))}; /* the feat_* cases' metadata */
        float slopes[16];
        if (*meta_of(f, "window_left") && strcmp(meta_of(f, "window_left"), "none"))
            feat.window = (attn_window){true, atoll(meta_of(f, "window_left")), atoll(meta_of(f, "window_right"))};
        if (!strcmp(meta_of(f, "alibi"), "paper") && H <= 16 && attn_alibi_slopes(slopes, H) == ATTN_OK)
            feat.alibi_slopes = slopes, feat.alibi_ndim = 1, feat.alibi_shape[0] = H;
        o.features = &feat;
        uint8_t kpm_bytes[64], mask_bytes[64];
        if (kpm) {
            for (int64_t i = 0; i < kpm->numel; i++) kpm_bytes[i] = kpm->data[i] != 0.0f;
            o.mask.key_padding = kpm_bytes, o.mask.key_padding_shape[0] = kpm->shape[0],
            o.mask.key_padding_shape[1] = kpm->shape[1];
        }
        if (mask) {
            for (int64_t i = 0; i < mask->numel; i++) mask_bytes[i] = mask->data[i] != 0.0f;
            o.mask.blocked = mask_bytes, o.mask.blocked_ndim = 2;
            o.mask.blocked_shape[0] = mask->shape[0], o.mask.blocked_shape[1] = mask->shape[1];
        }
        attn_ctx *ctx = attn_ctx_new(1);
        attn_tensor *w = NULL,
                    *out = attn_mha_forward(ctx, &m, query, key, value, &o, impl == ATTN_SDPA_REF ? &w : NULL);
        char what[160];
        snprintf(what, sizeof what, "mha_gqa %s [%s]", name, impl == ATTN_SDPA_REF ? "ref" : "fused");
        TK_CHECK(out && attn_backward_from(ctx, out, g->data) == ATTN_OK, "%s: %s", what, attn_last_error());
        const tk_tol tol = tk_tol_of(1, 160, 4, 8);
        if (out) {
            tk_golden_close_scaled(f, "out", out->data, out->numel, tol);
            const char *names[3] = {"query", "key", "value"};
            for (int i = 0; i < (self ? 1 : 3); i++) {
                char ref[32];
                snprintf(ref, sizeof ref, "grad.%s", names[i]);
                tk_golden_close_scaled(f, ref, in[i]->grad, in[i]->numel, tol);
            }
            for (size_t i = 0; i < attn_params_count(params); i++) {
                char ref[96];
                snprintf(ref, sizeof ref, "grad.%s", attn_params_name(params, i));
                attn_tensor *t = attn_params_at(params, i);
                tk_golden_close_scaled(f, ref, t->grad, t->numel, tol);
            }
        }
        attn_ctx_free(ctx);
        attn_params_free(params);
    }
    if (!self) attn_tensor_free(key), attn_tensor_free(value);
    attn_tensor_free(query), attn_tensor_free(g), attn_tensor_free(kpm), attn_tensor_free(mask);
    attn_st_close(f);
}

/* num_kv_heads = num_heads: attn_mha_init's layer, parameter for parameter */
static void same_as_mha_init(void)
{
    attn_params *a = attn_params_new(), *b = attn_params_new();
    attn_mha_layer ma, mb;
    attn_rng ra, rb;
    attn_rng_seed(&ra, 5), attn_rng_seed(&rb, 5);
    TK_OK(attn_mha_init(&ma, a, "attn", 16, 4, 0, 0, true, 0.1f, &ra));
    TK_OK(attn_mha_init_gqa(&mb, b, "attn", 16, 4, 4, 0, 0, true, 0.1f, &rb));
    bool same = attn_params_count(a) == attn_params_count(b) && ma.num_kv_heads == 4 && mb.num_kv_heads == 4;
    for (size_t i = 0; same && i < attn_params_count(a); i++) {
        attn_tensor *x = attn_params_at(a, i), *y = attn_params_at(b, i);
        same = !strcmp(attn_params_name(a, i), attn_params_name(b, i)) && x->numel == y->numel &&
               !memcmp(x->data, y->data, sizeof(float) * (size_t)x->numel);
    }
    TK_CHECK(same, "attn_mha_init_gqa with 4 of 4 heads: attn_mha_init's names, shapes and values");
    attn_params_free(a), attn_params_free(b);
}

static void refusals(void)
{
    attn_params *p = attn_params_new();
    attn_mha_layer m;
    const int64_t bad[] = {0, -2, 3, 5};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        attn_status st = attn_mha_init_gqa(&m, p, "x", 16, 4, bad[i], 0, 0, true, 0.0f, NULL);
        TK_CHECK(st == ATTN_ERR_ARG && strstr(attn_last_error(), "num_kv_heads") && attn_params_count(p) == 0,
                 "num_kv_heads %lld of 4 heads refused, nothing registered (%s)", (long long)bad[i], attn_last_error());
    }
    attn_params_free(p);
}

int main(void)
{
    static const char *const cases[] = {
        "self_kpm",    "mqa_cross_mask", "nobias_kpm_mask", "feat_window_alibi_kpm", "feat_softcap_cross_mask",
        "feat_all_mqa"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) golden_case(cases[i]);
    same_as_mha_init();
    refusals();
    return tk_finish("test_mha_gqa");
}
