/* GRU (torch.nn.GRU, batch first; math and names in attn.h), built from differentiable ops: the
 * input projections of a whole layer are one GEMM, then one hidden projection per step. */
#include "../core/core_internal.h"

#include <math.h>
#include <stdio.h>

static attn_status init_gru(attn_gru_layer *m, attn_params *p, const char *prefix, int64_t input_size,
                            int64_t hidden_size, int num_layers, float dropout, attn_rng *rng)
{
    if (!m || !p || !prefix) return attn__fail(ATTN_ERR_ARG, "gru_init: NULL argument");
    if (input_size < 1 || hidden_size < 1 || num_layers < 1 || num_layers > ATTN_GRU_MAX_LAYERS ||
        !(dropout >= 0.0f && dropout < 1.0f))
        return attn__fail(ATTN_ERR_ARG, "gru_init: sizes >= 1, 1 to %d layers and dropout in [0, 1) expected",
                          ATTN_GRU_MAX_LAYERS);
    *m = (attn_gru_layer){
        .input_size = input_size, .hidden_size = hidden_size, .num_layers = num_layers, .dropout = dropout};
    const int64_t H = hidden_size;
    const float bound = 1.0f / sqrtf((float)H);
    const char *dot = *prefix ? "." : "";
    for (int l = 0; l < num_layers; l++) {
        char name[256];
        int64_t in = l == 0 ? input_size : H;
        attn_tensor **slots[4] = {&m->w_ih[l], &m->w_hh[l], &m->b_ih[l], &m->b_hh[l]};
        const char *kinds[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
        int64_t shapes[4][2] = {{3 * H, in}, {3 * H, H}, {3 * H, 0}, {3 * H, 0}};
        for (int i = 0; i < 4; i++) {
            snprintf(name, sizeof name, "%s%s%s_l%d", prefix, dot, kinds[i], l);
            if (!(*slots[i] = attn_params_add(p, name, i < 2 ? 2 : 1, shapes[i]))) return attn_last_status();
            if (rng) attn_tensor_fill_uniform(*slots[i], rng, -bound, bound);
        }
    }
    return ATTN_OK;
}

attn_status attn_gru_init(attn_gru_layer *m, attn_params *p, const char *prefix, int64_t input_size,
                          int64_t hidden_size, int num_layers, float dropout, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_gru(m, p, prefix, input_size, hidden_size, num_layers, dropout, rng));
}

/* One step: h (B, H), gi (B, 3H) = x W_ih^T + b_ih for this step. */
static attn_tensor *cell(attn_ctx *ctx, const attn_gru_layer *m, int l, attn_tensor *gi, attn_tensor *h)
{
    const int64_t H = m->hidden_size;
    attn_tensor *gh = attn_linear(ctx, h, m->w_hh[l], m->b_hh[l]); /* (B, 3H) */
    attn_tensor *r = attn_sigmoid(ctx, attn_add(ctx, attn_narrow(ctx, gi, 1, 0, H), attn_narrow(ctx, gh, 1, 0, H)));
    attn_tensor *z = attn_sigmoid(ctx, attn_add(ctx, attn_narrow(ctx, gi, 1, H, H), attn_narrow(ctx, gh, 1, H, H)));
    attn_tensor *n = attn_tanh(
        ctx, attn_add(ctx, attn_narrow(ctx, gi, 1, 2 * H, H), attn_mul(ctx, r, attn_narrow(ctx, gh, 1, 2 * H, H))));
    /* h' = n + z * (h - n) = (1 - z) n + z h */
    return attn_add(ctx, n, attn_mul(ctx, z, attn_sub(ctx, h, n)));
}

attn_tensor *attn_gru_forward(attn_ctx *ctx, const attn_gru_layer *m, attn_tensor *x, attn_tensor *h0,
                              attn_tensor **h_n)
{
    if (h_n) *h_n = NULL;
    if (!ctx || !m || !x) return attn__null_input(__func__);
    const int64_t H = m->hidden_size;
    if (x->ndim != 3 || x->shape[2] != m->input_size || x->shape[1] < 1 ||
        (h0 && (h0->ndim != 3 || h0->shape[0] != m->num_layers || h0->shape[1] != x->shape[0] || h0->shape[2] != H))) {
        char a[64], b[64];
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "gru: x %s, h0 %s; expected x (B, T, %lld) with T >= 1 and h0 (%d, B, %lld)",
                               attn_shape_str(x, a, 64), h0 ? attn_shape_str(h0, b, 64) : "none",
                               (long long)m->input_size, m->num_layers, (long long)H);
    }
    const int64_t B = x->shape[0], T = x->shape[1];
    attn_tensor *finals[ATTN_GRU_MAX_LAYERS];
    attn_tensor *layer_in = x;
    for (int l = 0; l < m->num_layers; l++) {
        if (l > 0) layer_in = attn_dropout(ctx, layer_in, m->dropout);
        attn_tensor *gi = attn_linear(ctx, layer_in, m->w_ih[l], m->b_ih[l]); /* (B, T, 3H) */
        attn_tensor *h = h0 ? attn_reshape(ctx, attn_narrow(ctx, h0, 0, l, 1), 2, (int64_t[]){B, H})
                            : attn_tensor_zeros(ctx, 2, (int64_t[]){B, H});
        attn_tensor **steps = attn__arena_alloc(&ctx->arena, (size_t)T * sizeof *steps); /* (T) outputs (B, 1, H) */
        if (!steps) return NULL;
        for (int64_t t = 0; t < T && h; t++) {
            attn_tensor *gi_t = attn_reshape(ctx, attn_narrow(ctx, gi, 1, t, 1), 2, (int64_t[]){B, 3 * H});
            h = cell(ctx, m, l, gi_t, h);
            steps[t] = h ? attn_reshape(ctx, h, 3, (int64_t[]){B, 1, H}) : NULL;
        }
        if (!h) return NULL;
        finals[l] = attn_reshape(ctx, h, 3, (int64_t[]){1, B, H});
        layer_in = attn_concat(ctx, steps, (int)T, 1); /* (B, T, H) */
        if (!layer_in) return NULL;
    }
    if (h_n && !(*h_n = attn_concat(ctx, finals, m->num_layers, 0))) return NULL;
    return layer_in;
}
