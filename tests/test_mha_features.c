/* The attention features of current models inside the layers: rotary positions
 * (attn_mha_opts.rope, attn_transformer_config.rope_*) and the window, ALiBi, soft-capping and
 * score/mask callbacks (attn_mha_opts.features):
 *   - attn_mha_forward with them against the same layer composed from public ops (the three
 *     projections, attn_split_heads, attn_rope on q and k with positions 0, 1, 2, ..., attn_sdpa
 *     with the features, attn_merge_heads, out_proj): self-attention (the packed projection) and
 *     cross-attention with Lq != Lk, both RoPE layouts, full and partial rotation, 4 heads and 2
 *     key/value heads, a window, ALiBi slopes (H), a softcap and a mask_mod with a score_mod;
 *     outputs and the gradients of the inputs and of every parameter;
 *   - finite differences through the MHA with rope and through an encoder layer with rope;
 *   - the encoder layer's setting is used (its output differs from the layer without it) and a
 *     shift of every position leaves the attention weights unchanged (RoPE's relative property);
 *   - refusals: a decoder layer with a bad base, an encoder layer with a bad base, layout or rotary_dim,
 *     and attn_mha_forward with a bad rope or bad features (ALiBi shape or NaN, softcap, window,
 *     a score_mod without its gradient): NULL with the error of attn_rope or attn_sdpa.
 * Tolerance: both sides are float32 runs of the same ops, the layer's projection a single GEMM
 * over the packed weight where the composition runs three: TK_TOL_MHA (two float32 sides, the
 * reach of an MHA's forward and backward: tests/golden/README.md). Finite differences as
 * test_ops_gradcheck's nonlinear ops: eps 1e-3, atol 2e-3 + rtol 2e-2. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    B = 2,
    E = 16,
    H = 4
};

static float *copy_floats(const float *x, int64_t n)
{
    float *c = x ? malloc((size_t)n * sizeof *c) : NULL;
    if (c) memcpy(c, x, (size_t)n * sizeof *c);
    return c;
}

typedef struct rope_case {
    const char *what;
    bool self;
    int64_t lq, lk, kv_heads;
    attn_rope_opts rope;                 /* base 0: none */
    const attn_score_features *features; /* NULL: none */
} rope_case;

/* Input i (0 q, 1 k, 2 v) of the layer projected by its rows of the weights and bias and split
 * into heads: (B, L, E) -> (B, H or num_kv_heads, L, E / H) */
static attn_tensor *projected_heads(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x, int i)
{
    const int64_t Ekv = E / H * m->num_kv_heads;
    attn_tensor *w = m->in_proj_weight ? attn_narrow(ctx, m->in_proj_weight, 0, i * E, E)
                     : i == 0          ? m->q_proj_weight
                     : i == 1          ? m->k_proj_weight
                                       : m->v_proj_weight;
    attn_tensor *b = attn_narrow(ctx, m->in_proj_bias, 0, i == 0 ? 0 : E + (i - 1) * Ekv, i == 0 ? E : Ekv);
    return attn_split_heads(ctx, attn_linear(ctx, x, w, b), i == 0 ? H : m->num_kv_heads);
}

/* The layer composed from public ops: out_proj(merge(sdpa(rope(q), rope(k), v))) */
static attn_tensor *composed(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query, attn_tensor *key,
                             attn_tensor *value, const attn_rope_opts *rope, const attn_score_features *features)
{
    attn_tensor *in[3] = {query, key, value}, *heads[3];
    for (int i = 0; i < 3; i++) heads[i] = projected_heads(ctx, m, in[i], i);
    attn_rope_opts r = *rope;
    r.position_dim = 2;
    attn_sdpa_opts so = {0};
    if (features) so.features = *features;
    so.enable_gqa = m->num_kv_heads != H;
    attn_tensor *q = rope->base > 0.0f ? attn_rope(ctx, heads[0], &r) : heads[0];
    attn_tensor *k = rope->base > 0.0f ? attn_rope(ctx, heads[1], &r) : heads[1];
    attn_tensor *o = attn_sdpa(ctx, q, k, heads[2], &so, NULL);
    return attn_linear_forward(ctx, &m->out_proj, attn_merge_heads(ctx, o));
}

/* sum(out * g): the same probe for both sides' backward */
static bool backward_probe(attn_ctx *ctx, attn_tensor *out, const attn_tensor *g)
{
    return out && out->numel == g->numel && attn_backward_from(ctx, out, g->data) == ATTN_OK;
}

static void against_composition(const rope_case *c)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    attn_mha_layer m;
    TK_OK(attn_mha_init_gqa(&m, p, "mha", E, H, c->kv_heads, E, E, true, 0.0f, &rng));
    const int64_t qs[3] = {B, c->lq, E}, ks[3] = {B, c->lk, E};
    attn_tensor *query = tk_randn(11, 3, qs), *key = c->self ? query : tk_randn(12, 3, ks);
    attn_tensor *value = c->self ? query : tk_randn(13, 3, ks), *g = tk_randn(14, 3, qs);
    attn_tensor *inputs[3] = {query, key, value};
    const int n_inputs = c->self ? 1 : 3;
    const size_t n_params = attn_params_count(p);
    float *got[3 + 8] = {0}; /* the layer's gradients: the inputs', then each parameter's */
    float *layer_out = NULL;
    for (int side = 0; side < 2; side++) {
        attn_ctx *ctx = attn_ctx_new(1);
        attn_params_zero_grad(p);
        for (int i = 0; i < n_inputs; i++) attn_tensor_zero_grad(inputs[i]);
        attn_mha_opts o = {.rope = c->rope.base > 0.0f ? &c->rope : NULL, .features = c->features};
        attn_tensor *out = side == 0 ? attn_mha_forward(ctx, &m, query, key, value, &o, NULL)
                                     : composed(ctx, &m, query, key, value, &c->rope, c->features);
        TK_CHECK(backward_probe(ctx, out, g), "%s: %s forward and backward: %s", c->what, side ? "composed" : "layer",
                 attn_last_error());
        if (!out) {
            attn_ctx_free(ctx);
            break;
        }
        char what[128];
        if (side == 0) {
            layer_out = copy_floats(out->data, out->numel);
            for (int i = 0; i < n_inputs; i++) got[i] = copy_floats(inputs[i]->grad, inputs[i]->numel);
            for (size_t j = 0; j < n_params && j < 8; j++) {
                attn_tensor *t = attn_params_at(p, j);
                got[3 + j] = copy_floats(t->grad, t->numel);
            }
        } else {
            snprintf(what, sizeof what, "%s: out", c->what);
            tk_close_scaled(what, layer_out, out->data, out->numel, TK_TOL_MHA);
            for (int i = 0; i < n_inputs; i++) {
                snprintf(what, sizeof what, "%s: grad of input %d", c->what, i);
                tk_close_scaled(what, got[i], inputs[i]->grad, inputs[i]->numel, TK_TOL_MHA);
            }
            for (size_t j = 0; j < n_params && j < 8; j++) {
                attn_tensor *t = attn_params_at(p, j);
                snprintf(what, sizeof what, "%s: grad of %s", c->what, attn_params_name(p, j));
                tk_close_scaled(what, got[3 + j], t->grad, t->numel, TK_TOL_MHA);
            }
        }
        attn_ctx_free(ctx);
    }
    for (int i = 0; i < 3 + 8; i++) free(got[i]);
    free(layer_out);
    for (int i = 0; i < n_inputs; i++) attn_tensor_free(inputs[i]);
    attn_tensor_free(g);
    attn_params_free(p);
}

typedef struct fd_user {
    const attn_mha_layer *mha;
    const attn_encoder_layer *encoder;
    const attn_rope_opts *rope;
} fd_user;

static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const fd_user *u = user;
    if (u->encoder) return attn_encoder_layer_forward(ctx, u->encoder, in[0], NULL, NULL);
    attn_mha_opts o = {.rope = u->rope};
    return attn_mha_forward(ctx, u->mha, in[0], in[0], in[0], &o, NULL);
}

static attn_transformer_config encoder_config(float base)
{
    return (attn_transformer_config){
        .d_model = E, .num_heads = H, .dim_feedforward = 24, .rope_base = base, .rope_layout = ATTN_ROPE_HALVES};
}

static void finite_differences_and_use(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_mha_layer m;
    TK_OK(attn_mha_init(&m, p, "mha", E, H, E, E, true, 0.0f, &rng));
    const attn_rope_opts rope = {.layout = ATTN_ROPE_INTERLEAVED, .base = 100.0f, .rotary_dim = 2};
    const int64_t xs[3] = {B, 5, E};
    attn_tensor *x = tk_randn(21, 3, xs);
    fd_user u = {.mha = &m, .rope = &rope};
    tk_gradcheck("mha with rope (interleaved, rotary_dim 2)", fd_forward, &x, 1, &u, 1e-3f, 2e-3f, 2e-2f);

    attn_encoder_layer with, without;
    attn_transformer_config cfg = encoder_config(10000.0f);
    TK_OK(attn_encoder_layer_init(&with, p, "with", &cfg, &rng));
    without = with;
    without.cfg.rope_base = 0.0f; /* the same parameters, no rotary positions */
    u = (fd_user){.encoder = &with};
    tk_gradcheck("encoder layer with rope (halves)", fd_forward, &x, 1, &u, 1e-3f, 2e-3f, 2e-2f);

    attn_ctx *ctx = attn_ctx_new(1);
    attn_ctx_set_grad_enabled(ctx, false);
    attn_tensor *a = attn_encoder_layer_forward(ctx, &with, x, NULL, NULL);
    attn_tensor *b = attn_encoder_layer_forward(ctx, &without, x, NULL, NULL);
    double diff = 0.0;
    for (int64_t i = 0; a && b && i < a->numel; i++) diff = fmax(diff, fabs(a->data[i] - b->data[i]));
    TK_CHECK(a && b && diff > 1e-3, "the encoder layer's rope is used: max |with - without| = %g", diff);

    /* every position shifted by 37: the same attention weights (scores depend on p_q - p_k) */
    attn_tensor *w0 = NULL, *w1 = NULL;
    attn_rope_opts r0 = {.layout = ATTN_ROPE_HALVES, .base = 10000.0f};
    attn_mha_opts o = {.rope = &r0, .average_weights = false};
    TK_CHECK(attn_mha_forward(ctx, &m, x, x, x, &o, &w0) != NULL, "weights at positions 0..: %s", attn_last_error());
    /* the same q, k, v rotated at positions 37, 38, ... through the op, then attended */
    int64_t pos[5];
    for (int i = 0; i < 5; i++) pos[i] = 37 + i;
    attn_rope_opts shifted = {
        .layout = ATTN_ROPE_HALVES, .base = 10000.0f, .position_dim = 2, .positions = pos, .n_positions = 5};
    attn_tensor *q = projected_heads(ctx, &m, x, 0), *k = projected_heads(ctx, &m, x, 1);
    attn_tensor *v = projected_heads(ctx, &m, x, 2);
    attn_sdpa_opts so = {.impl = ATTN_SDPA_REF};
    TK_CHECK(attn_sdpa(ctx, attn_rope(ctx, q, &shifted), attn_rope(ctx, k, &shifted), v, &so, &w1) != NULL,
             "weights at positions 37..: %s", attn_last_error());
    if (w0 && w1)
        tk_close_scaled("weights with every position shifted by 37", w0->data, w1->data, w0->numel, TK_TOL_MHA);
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    attn_params_free(p);
}

static float distance_bias(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user);

static void refusals(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    attn_decoder_layer d;
    attn_transformer_config cfg = encoder_config(0.5f);
    TK_CHECK(attn_decoder_layer_init(&d, p, "dec", &cfg, &rng) == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "rope_base"),
             "a decoder layer with rope base 0.5 is refused: %s", attn_last_error());
    const struct {
        const char *what;
        float base;
        int layout;
        int64_t dim;
    } bad[] = {{"base 0.5", 0.5f, 0, 0},
               {"base NaN", NAN, 0, 0},
               {"base inf", INFINITY, 0, 0},
               {"layout 7", 10000.0f, 7, 0},
               {"odd rope_dim", 10000.0f, 0, 3},
               {"rope_dim past the head", 10000.0f, 0, 6},
               {"negative rope_dim", 10000.0f, 0, -2}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        attn_encoder_layer e;
        cfg = encoder_config(bad[i].base);
        cfg.rope_layout = (attn_rope_layout)bad[i].layout, cfg.rope_dim = bad[i].dim;
        TK_CHECK(attn_encoder_layer_init(&e, p, "enc", &cfg, &rng) == ATTN_ERR_ARG && strstr(attn_last_error(), "rope"),
                 "an encoder layer with %s is refused: %s", bad[i].what, attn_last_error());
    }

    /* attn_mha_forward with bad rope or features: NULL with the error attn_rope or attn_sdpa gives */
    attn_mha_layer m;
    TK_OK(attn_mha_init(&m, p, "mha", E, H, E, E, true, 0.0f, &rng));
    const int64_t xs[3] = {B, 5, E};
    attn_tensor *x = tk_randn(31, 3, xs);
    static const float three_slopes[3] = {0.5f, 0.25f, 0.125f}, nan_slopes[H] = {0.5f, NAN, 0.1f, 0.1f};
    const attn_rope_opts rope_bad_base = {.base = 0.5f}, rope_odd = {.base = 100.0f, .rotary_dim = 3},
                         rope_bad_layout = {.layout = (attn_rope_layout)9, .base = 100.0f};
    const attn_score_features alibi_3 = {.alibi_slopes = three_slopes, .alibi_ndim = 1, .alibi_shape = {3}},
                              alibi_nan = {.alibi_slopes = nan_slopes, .alibi_ndim = 1, .alibi_shape = {H}},
                              cap_nan = {.softcap = NAN}, cap_neg = {.softcap = -1.0f},
                              window_bad = {.window = {.on = true, .left = -5, .right = 0}},
                              mod_no_grad = {.mods = {.score_mod = distance_bias}};
    const struct {
        const char *what;
        attn_mha_opts opts;
    } bad_opts[] = {
        {"rope base 0.5", {.rope = &rope_bad_base}},
        {"rope_dim 3", {.rope = &rope_odd}},
        {"rope layout 9", {.rope = &rope_bad_layout}},
        {"3 ALiBi slopes for 4 heads", {.features = &alibi_3}},
        {"a NaN ALiBi slope", {.features = &alibi_nan}},
        {"softcap NaN", {.features = &cap_nan}},
        {"softcap -1", {.features = &cap_neg}},
        {"window left -5", {.features = &window_bad}},
        {"score_mod without its gradient", {.features = &mod_no_grad}},
    };
    attn_ctx *ctx = attn_ctx_new(1);
    for (size_t i = 0; x && i < sizeof bad_opts / sizeof *bad_opts; i++) {
        attn_clear_error();
        attn_tensor *out = attn_mha_forward(ctx, &m, x, x, x, &bad_opts[i].opts, NULL);
        TK_CHECK(!out && attn_last_status() != ATTN_OK && attn_last_error() && *attn_last_error(),
                 "mha with %s is refused: %s", bad_opts[i].what, attn_last_error());
    }
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    attn_params_free(p);
}

/* FlexAttention-style callbacks: a score_mod (a per-head bias growing with the distance) and a
 * mask_mod keeping keys at even distance or within 2 */
static float distance_bias(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)user;
    return s - 0.1f * (float)(h + 1) * (float)llabs(q - kv);
}
static float distance_bias_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)s, (void)b, (void)h, (void)q, (void)kv, (void)user;
    return 1.0f;
}
static bool near_or_even(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)user;
    return llabs(q - kv) <= 2 || (q - kv) % 2 == 0;
}

int main(void)
{
    static const float slopes[H] = {0.5f, 0.25f, 0.125f, 0.0625f};
    const attn_score_features window = {.window = {.on = true, .left = 2, .right = 1}};
    const attn_score_features alibi_softcap = {
        .alibi_slopes = slopes, .alibi_ndim = 1, .alibi_shape = {H}, .softcap = 2.5f};
    const attn_score_features mods = {
        .mods = {.score_mod = distance_bias, .score_mod_grad = distance_bias_grad, .mask_mod = near_or_even}};
    const rope_case cases[] = {
        {"self, halves, full rotation", true, 6, 6, H, {.layout = ATTN_ROPE_HALVES, .base = 10000.0f}, NULL},
        {"cross Lq 5 Lk 7, interleaved, rotary_dim 2",
         false,
         5,
         7,
         H,
         {.layout = ATTN_ROPE_INTERLEAVED, .base = 500.0f, .rotary_dim = 2},
         NULL},
        {"cross, 2 key/value heads, halves", false, 5, 7, 2, {.layout = ATTN_ROPE_HALVES, .base = 10000.0f}, NULL},
        {"self, window (2, 1)", true, 6, 6, H, {0}, &window},
        {"cross Lq 5 Lk 7, ALiBi and softcap 2.5, 2 key/value heads", false, 5, 7, 2, {0}, &alibi_softcap},
        {"self, score_mod and mask_mod, with rope",
         true,
         6,
         6,
         H,
         {.layout = ATTN_ROPE_HALVES, .base = 10000.0f},
         &mods},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) against_composition(&cases[i]);
    finite_differences_and_use();
    refusals();
    return tk_finish("test_mha_features");
}
