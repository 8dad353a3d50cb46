/* Transformer encoder and decoder layers with torch.nn.TransformerEncoderLayer/DecoderLayer names
 * (math in attn.h): multi-head attention, a position-wise FFN (linear1, activation, linear2),
 * dropout on each residual branch and Add & Norm, post-LN or pre-LN. The decoder layer also runs
 * one position at a time over cached keys and values (attn__decoder_layer_step, for decoding). */
#include "../ops/fused_internal.h"
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static attn_status check_config(const attn_transformer_config *c)
{
    if (!c || c->d_model < 1 || c->num_heads < 1 || c->dim_feedforward < 1 ||
        !(c->dropout >= 0.0f && c->dropout < 1.0f) || !(c->eps >= 0.0f && isfinite(c->eps)))
        return attn__fail(ATTN_ERR_ARG, "transformer layer: expected d_model, num_heads, dim_feedforward >= 1, "
                                        "dropout in [0, 1) and a finite eps >= 0");
    const int64_t head = c->d_model / c->num_heads;
    if (c->rope_base != 0.0f &&
        (!(c->rope_base > 1.0f && isfinite(c->rope_base)) || (unsigned)c->rope_layout > ATTN_ROPE_HALVES ||
         c->rope_dim < 0 || c->rope_dim % 2 || c->rope_dim > head || (c->rope_dim == 0 && head % 2)))
        return attn__fail(ATTN_ERR_ARG,
                          "transformer layer: rope_base %g, rope_layout %d, rope_dim %lld; expected a finite base > 1 "
                          "(0: no rotary positions), a layout of attn_rope_layout and an even rope_dim <= the head "
                          "width %lld (0: all of an even one)",
                          (double)c->rope_base, (int)c->rope_layout, (long long)c->rope_dim, (long long)head);
    return ATTN_OK;
}

const attn_rope_opts *attn__layer_rope(const attn_transformer_config *c, attn_rope_opts *out)
{
    *out = (attn_rope_opts){.layout = c->rope_layout, .base = c->rope_base, .rotary_dim = c->rope_dim};
    return c->rope_base > 0.0f ? out : NULL;
}

/* The parts both layers share: FFN and norms 1..n_norms. */
static attn_status init_ffn_norms(attn_linear_layer *l1, attn_linear_layer *l2, attn_layer_norm_layer *norms,
                                  int n_norms, attn_params *p, const char *prefix, const attn_transformer_config *c,
                                  attn_rng *rng)
{
    char name[256];
    attn__param_name(name, sizeof name, prefix, "linear1");
    if (attn_linear_init(l1, p, name, c->d_model, c->dim_feedforward, true, rng) != ATTN_OK) return attn_last_status();
    attn__param_name(name, sizeof name, prefix, "linear2");
    if (attn_linear_init(l2, p, name, c->dim_feedforward, c->d_model, true, rng) != ATTN_OK) return attn_last_status();
    for (int i = 0; i < n_norms; i++) {
        char norm[16];
        snprintf(norm, sizeof norm, "norm%d", i + 1);
        attn__param_name(name, sizeof name, prefix, norm);
        if (attn_layer_norm_init(&norms[i], p, name, c->d_model, c->eps > 0 ? c->eps : 1e-5f) != ATTN_OK)
            return attn_last_status();
    }
    return ATTN_OK;
}

static attn_status init_mha(attn_mha_layer *m, attn_params *p, const char *prefix, const char *name,
                            const attn_transformer_config *c, attn_rng *rng)
{
    char full[256];
    attn__param_name(full, sizeof full, prefix, name);
    return attn_mha_init(m, p, full, c->d_model, c->num_heads, 0, 0, true, c->dropout, rng);
}

static attn_status init_encoder_layer(attn_encoder_layer *m, attn_params *p, const char *prefix,
                                      const attn_transformer_config *cfg, attn_rng *rng)
{
    if (!m || !prefix) return attn__fail(ATTN_ERR_ARG, "transformer layer init: NULL argument");
    if (check_config(cfg) != ATTN_OK) return attn_last_status();
    m->cfg = *cfg;
    if (init_mha(&m->self_attn, p, prefix, "self_attn", cfg, rng) != ATTN_OK) return attn_last_status();
    attn_layer_norm_layer norms[2];
    if (init_ffn_norms(&m->linear1, &m->linear2, norms, 2, p, prefix, cfg, rng) != ATTN_OK) return attn_last_status();
    m->norm1 = norms[0];
    m->norm2 = norms[1];
    return ATTN_OK;
}

attn_status attn_encoder_layer_init(attn_encoder_layer *m, attn_params *p, const char *prefix,
                                    const attn_transformer_config *cfg, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_encoder_layer(m, p, prefix, cfg, rng));
}

static attn_status init_decoder_layer(attn_decoder_layer *m, attn_params *p, const char *prefix,
                                      const attn_transformer_config *cfg, attn_rng *rng)
{
    if (!m || !prefix) return attn__fail(ATTN_ERR_ARG, "transformer layer init: NULL argument");
    if (check_config(cfg) != ATTN_OK) return attn_last_status();
    m->cfg = *cfg;
    if (init_mha(&m->self_attn, p, prefix, "self_attn", cfg, rng) != ATTN_OK ||
        init_mha(&m->multihead_attn, p, prefix, "multihead_attn", cfg, rng) != ATTN_OK)
        return attn_last_status();
    attn_layer_norm_layer norms[3];
    if (init_ffn_norms(&m->linear1, &m->linear2, norms, 3, p, prefix, cfg, rng) != ATTN_OK) return attn_last_status();
    m->norm1 = norms[0];
    m->norm2 = norms[1];
    m->norm3 = norms[2];
    return ATTN_OK;
}

attn_status attn_decoder_layer_init(attn_decoder_layer *m, attn_params *p, const char *prefix,
                                    const attn_transformer_config *cfg, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0, init_decoder_layer(m, p, prefix, cfg, rng));
}

/* linear2(drop?(act(linear1(x)))) */
static attn_tensor *ffn(attn_ctx *ctx, const attn_transformer_config *c, const attn_linear_layer *l1,
                        const attn_linear_layer *l2, attn_tensor *x)
{
    attn_tensor *h = attn__linear_act_dropout(ctx, x, l1->weight, l1->bias, c->gelu ? ATTN__ACT_GELU : ATTN__ACT_RELU,
                                              c->ffn_dropout ? c->dropout : 0.0f);
    return attn_linear_forward(ctx, l2, h);
}

/* One residual sub-layer: post-LN norm(x + drop(f(x))), or pre-LN x + drop(f(norm(x))).
 * The branch f is given as its output on the right input: callers compute it from `in`. */
typedef struct sublayer {
    const attn_transformer_config *cfg;
    const attn_layer_norm_layer *norm;
} sublayer;

static attn_tensor *branch_input(attn_ctx *ctx, sublayer s, attn_tensor *x)
{
    return s.cfg->norm_first ? attn_layer_norm_forward(ctx, s.norm, x) : x;
}

static attn_tensor *residual(attn_ctx *ctx, sublayer s, attn_tensor *x, attn_tensor *branch)
{
    attn_tensor *sum = attn__add_dropout(ctx, x, branch, s.cfg->dropout);
    return s.cfg->norm_first ? sum : attn_layer_norm_forward(ctx, s.norm, sum);
}

attn_tensor *attn_encoder_layer_forward(attn_ctx *ctx, const attn_encoder_layer *m, attn_tensor *x,
                                        const attn_mask *mask, attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !m || !x) return attn__null_input(__func__);
    attn_rope_opts rope;
    attn_mha_opts opts = {.average_weights = false, .rope = attn__layer_rope(&m->cfg, &rope)};
    if (mask) opts.mask = *mask;
    sublayer s1 = {&m->cfg, &m->norm1}, s2 = {&m->cfg, &m->norm2};
    attn_tensor *in = branch_input(ctx, s1, x);
    x = residual(ctx, s1, x, attn_mha_forward(ctx, &m->self_attn, in, in, in, &opts, weights));
    in = branch_input(ctx, s2, x);
    return residual(ctx, s2, x, ffn(ctx, &m->cfg, &m->linear1, &m->linear2, in));
}

attn_tensor *attn_decoder_layer_forward(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *x, attn_tensor *memory,
                                        const attn_mask *self_mask, const attn_mask *cross_mask,
                                        attn_tensor **self_weights, attn_tensor **cross_weights)
{
    if (self_weights) *self_weights = NULL;
    if (cross_weights) *cross_weights = NULL;
    if (!ctx || !m || !x || !memory) return attn__null_input(__func__);
    attn_rope_opts rope;
    attn_mha_opts so = {.average_weights = false, .rope = attn__layer_rope(&m->cfg, &rope)};
    attn_mha_opts co = {.average_weights = false};
    if (self_mask) so.mask = *self_mask;
    if (cross_mask) co.mask = *cross_mask;
    sublayer s1 = {&m->cfg, &m->norm1}, s2 = {&m->cfg, &m->norm2}, s3 = {&m->cfg, &m->norm3};
    attn_tensor *in = branch_input(ctx, s1, x);
    x = residual(ctx, s1, x, attn_mha_forward(ctx, &m->self_attn, in, in, in, &so, self_weights));
    in = branch_input(ctx, s2, x);
    x = residual(ctx, s2, x, attn_mha_forward(ctx, &m->multihead_attn, in, memory, memory, &co, cross_weights));
    in = branch_input(ctx, s3, x);
    return residual(ctx, s3, x, ffn(ctx, &m->cfg, &m->linear1, &m->linear2, in));
}

attn_tensor *attn_encoder_layer_forward_packed(attn_ctx *ctx, const attn_encoder_layer *m, attn_tensor *x,
                                               const int64_t *cu_seqlens, int64_t batch)
{
    if (!ctx || !m || !x) return attn__null_input(__func__);
    attn_rope_opts rope;
    sublayer s1 = {&m->cfg, &m->norm1}, s2 = {&m->cfg, &m->norm2};
    attn_tensor *in = branch_input(ctx, s1, x);
    x = residual(ctx, s1, x,
                 attn__mha_forward_packed_rope(ctx, &m->self_attn, in, cu_seqlens, batch, false,
                                               attn__layer_rope(&m->cfg, &rope)));
    in = branch_input(ctx, s2, x);
    return residual(ctx, s2, x, ffn(ctx, &m->cfg, &m->linear1, &m->linear2, in));
}

attn_tensor *attn_decoder_layer_forward_packed(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *x,
                                               const int64_t *cu_seqlens_t, attn_tensor *memory,
                                               const int64_t *cu_seqlens_s, int64_t batch)
{
    if (!ctx || !m || !x || !memory) return attn__null_input(__func__);
    attn_rope_opts rope;
    sublayer s1 = {&m->cfg, &m->norm1}, s2 = {&m->cfg, &m->norm2}, s3 = {&m->cfg, &m->norm3};
    attn_tensor *in = branch_input(ctx, s1, x);
    x = residual(ctx, s1, x,
                 attn__mha_forward_packed_rope(ctx, &m->self_attn, in, cu_seqlens_t, batch, true,
                                               attn__layer_rope(&m->cfg, &rope)));
    in = branch_input(ctx, s2, x);
    x = residual(ctx, s2, x,
                 attn_mha_forward_packed_cross(ctx, &m->multihead_attn, in, memory, cu_seqlens_t, cu_seqlens_s, batch));
    in = branch_input(ctx, s3, x);
    return residual(ctx, s3, x, ffn(ctx, &m->cfg, &m->linear1, &m->linear2, in));
}

/* ---- The decoder layer one position at a time, over cached keys and values ---- */

attn_status attn__decoder_layer_cache_memory(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *memory,
                                             decoder_layer_cache *c)
{
    const attn_mha_layer *a = &m->multihead_attn;
    c->cross_k = attn_split_heads(ctx, attn__mha_project(ctx, a, memory, 1), a->num_heads); /* (B, H, S, Dh) */
    c->cross_v = attn_split_heads(ctx, attn__mha_project(ctx, a, memory, 2), a->num_heads);
    return c->cross_k && c->cross_v ? ATTN_OK : attn_last_status();
}

/* cache[:, :, pos] = x[:, 0] for x (R, 1, E) and cache (R, H, cap, Dh) */
static void cache_put(attn_tensor *cache, const attn_tensor *x, int64_t pos)
{
    const int64_t R = cache->shape[0], H = cache->shape[1], cap = cache->shape[2], dh = cache->shape[3];
    for (int64_t rh = 0; rh < R * H; rh++)
        memcpy(cache->data + (rh * cap + pos) * dh, x->data + rh * dh, (size_t)dh * sizeof(float));
}

/* The newest position attends to itself and to every earlier one: the cache's first pos + 1
 * positions, read in place (SDPA skips the keys past valid_lens). A causal mask would be wrong
 * here: top-left aligned, it shows query 0 key 0 alone. */
static attn_tensor *self_attention_step(attn_ctx *ctx, const attn_mha_layer *m, const attn_rope_opts *rope,
                                        attn_tensor *x, decoder_layer_cache *c, int64_t pos)
{
    const int64_t R = x->shape[0];
    attn_tensor *q = attn_split_heads(ctx, attn__mha_project(ctx, m, x, 0), m->num_heads);  /* (R, H, 1, Dh) */
    attn_tensor *k = attn__mha_project(ctx, m, x, 1), *v = attn__mha_project(ctx, m, x, 2); /* (R, 1, E) */
    if (rope && k) { /* q and k rotated at position pos: q's heads (R, H, 1, Dh), k's (R, 1, H, Dh) */
        attn_rope_opts r = *rope;
        r.positions = &pos, r.n_positions = 1;
        r.position_dim = 2, q = attn_rope(ctx, q, &r);
        r.position_dim = 1,
        k = attn_rope(ctx, attn_reshape(ctx, k, 4, (int64_t[]){R, 1, m->num_heads, k->shape[2] / m->num_heads}), &r);
    }
    int64_t *lens = attn__arena_alloc(&ctx->arena, (size_t)R * sizeof *lens);
    if (!q || !k || !v || !lens) return NULL;
    cache_put(c->self_k, k, pos);
    cache_put(c->self_v, v, pos);
    for (int64_t r = 0; r < R; r++) lens[r] = pos + 1;
    attn_sdpa_opts so = {.dropout_p = m->dropout, .mask.valid_lens = {.data = lens, .ndim = 1, .shape = {R}}};
    return attn__mha_output(ctx, m, attn_sdpa(ctx, q, c->self_k, c->self_v, &so, NULL));
}

/* The beams of one memory item are its queries: x (R, 1, E) read as (B, beams, E) attends to the
 * item's cached (B, H, S, Dh) keys and values. */
static attn_tensor *cross_attention_step(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x,
                                         const decoder_layer_cache *c)
{
    if (!x) return NULL;
    const int64_t R = x->shape[0], E = x->shape[2];
    attn_tensor *q = attn_reshape(ctx, x, 3, (int64_t[]){R / c->beams, c->beams, E});
    q = attn_split_heads(ctx, attn__mha_project(ctx, m, q, 0), m->num_heads); /* (B, H, beams, Dh) */
    attn_sdpa_opts so = {.mask = c->cross_mask, .dropout_p = m->dropout};
    attn_tensor *o = attn__mha_output(ctx, m, attn_sdpa(ctx, q, c->cross_k, c->cross_v, &so, NULL));
    return attn_reshape(ctx, o, 3, (int64_t[]){R, 1, E});
}

attn_tensor *attn__decoder_layer_step(attn_ctx *ctx, const attn_decoder_layer *m, attn_tensor *x,
                                      decoder_layer_cache *c, int64_t pos)
{
    if (!ctx || !m || !x || !c) return NULL;
    const int64_t R = x->shape[0];
    if (x->ndim != 3 || x->shape[1] != 1 || c->beams < 1 || R % c->beams || pos < 0 || pos >= c->self_k->shape[2] ||
        c->self_k->shape[0] != R) {
        char buf[64];
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "decoder layer step: x %s at position %lld; expected "
                               "(%lld, 1, E) and a position below %lld",
                               attn_shape_str(x, buf, sizeof buf), (long long)pos, (long long)c->self_k->shape[0],
                               (long long)c->self_k->shape[2]);
    }
    sublayer s1 = {&m->cfg, &m->norm1}, s2 = {&m->cfg, &m->norm2}, s3 = {&m->cfg, &m->norm3};
    attn_tensor *in = branch_input(ctx, s1, x);
    attn_rope_opts rope;
    x = residual(ctx, s1, x, self_attention_step(ctx, &m->self_attn, attn__layer_rope(&m->cfg, &rope), in, c, pos));
    in = branch_input(ctx, s2, x);
    x = residual(ctx, s2, x, cross_attention_step(ctx, &m->multihead_attn, in, c));
    in = branch_input(ctx, s3, x);
    return residual(ctx, s3, x, ffn(ctx, &m->cfg, &m->linear1, &m->linear2, in));
}
