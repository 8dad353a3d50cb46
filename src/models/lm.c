/* The decoder-only language model (math and names in attn.h), GPT-2's style or Llama's:
 *   x = wte[ids] (+ wpe[pos]);  x = x + drop(attn(norm1 x));  x = x + drop(ffn(norm2 x));
 *   logits = norm_f(x) output^T
 * over sequences packed end to end, each attending causally to itself (attn_sdpa_varlen's fused
 * kernel through the packed multi-head attention). */
#include "../nn/nn_internal.h"
#include "../ops/fused_internal.h"
#include "lm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INIT_STD 0.02f

int64_t attn_lm_ffn_hidden(const attn_lm_config *cfg)
{
    if (!cfg) {
        attn__fail(ATTN_ERR_ARG, "lm_ffn_hidden: NULL config");
        return 0;
    }
    if (cfg->d_model < 1) return 0;
    if (cfg->ffn_hidden > 0) return cfg->ffn_hidden;
    if (cfg->style == ATTN_LM_GPT2) return 4 * cfg->d_model;
    const int64_t multiple = cfg->multiple_of > 0 ? cfg->multiple_of : 32, hidden = 2 * (4 * cfg->d_model) / 3;
    return multiple * ((hidden + multiple - 1) / multiple); /* llama2.c's model.py */
}

/* cfg with its zeros resolved, checked (ATTN_ERR_ARG naming the field) */
static attn_status resolve_config(attn_lm_config *c, const attn_lm_config *in)
{
    *c = *in;
    const char *bad = NULL;
    if ((unsigned)c->style > ATTN_LM_LLAMA)
        bad = "style is not an attn_lm_style";
    else if (c->vocab_size < 1 || c->context < 1 || c->d_model < 1 || c->num_layers < 1 || c->num_heads < 1)
        bad = "vocab_size, context, d_model, num_layers and num_heads must be >= 1";
    else if (c->d_model % c->num_heads)
        bad = "d_model must be a multiple of num_heads";
    else if (c->num_kv_heads < 0 || (c->num_kv_heads && c->num_heads % c->num_kv_heads))
        bad = "num_kv_heads must divide num_heads (0: num_heads)";
    else if (c->style == ATTN_LM_GPT2 && c->num_kv_heads && c->num_kv_heads != c->num_heads)
        bad = "GPT2 has as many key/value heads as heads (num_kv_heads 0)";
    else if (c->style == ATTN_LM_GPT2 && c->untied)
        bad = "GPT2's output is tied to its embedding";
    else if (c->ffn_hidden < 0 || c->multiple_of < 0)
        bad = "ffn_hidden and multiple_of must be >= 0";
    else if (!(c->norm_eps >= 0.0f) || !isfinite(c->norm_eps))
        bad = "norm_eps must be finite and >= 0";
    else if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        bad = "dropout must be in [0, 1)";
    else if (c->rope_base != 0.0f && !(c->rope_base > 1.0f && isfinite(c->rope_base)))
        bad = "rope_base must be finite and > 1 (0: 10000)";
    else if (c->style == ATTN_LM_LLAMA && (c->d_model / c->num_heads) % 2)
        bad = "LLAMA's rotary positions need an even head width (d_model / num_heads)";
    if (bad) return attn__fail(ATTN_ERR_ARG, "lm_init: %s", bad);
    if (c->context > ATTN_ROPE_MAX_DIM * 1024) /* positions index wpe and the caches: keep them sane */
        return attn__fail(ATTN_ERR_ARG, "lm_init: context %lld is past %d", (long long)c->context,
                          ATTN_ROPE_MAX_DIM * 1024);
    if (!c->num_kv_heads) c->num_kv_heads = c->num_heads;
    c->ffn_hidden = attn_lm_ffn_hidden(c);
    if (c->style == ATTN_LM_LLAMA && !c->multiple_of) c->multiple_of = 32;
    if (!c->norm_eps) c->norm_eps = 1e-5f;
    if (c->style == ATTN_LM_LLAMA && !c->rope_base) c->rope_base = 10000.0f;
    return ATTN_OK;
}

static attn_tensor *param(attn_params *p, attn_rng *rng, float std, int ndim, const int64_t *shape, const char *fmt,
                          int layer)
{
    char name[160];
    snprintf(name, sizeof name, fmt, layer);
    attn_tensor *t = attn_params_add(p, name, ndim, shape);
    if (t && rng && std > 0.0f) attn_tensor_fill_normal(t, rng, 0.0f, std);
    return t;
}

/* A linear layer "<fmt>.weight" (out, in) ~ N(0, std), with a zero bias "<fmt>.bias" when asked */
static attn_status linear(attn_linear_layer *l, attn_params *p, attn_rng *rng, float std, const char *fmt, int layer,
                          int64_t in, int64_t out, bool bias)
{
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.weight", fmt);
    snprintf(b, sizeof b, "%s.bias", fmt);
    *l = (attn_linear_layer){.in_features = in, .out_features = out};
    if (!(l->weight = param(p, rng, std, 2, (int64_t[]){out, in}, w, layer))) return attn_last_status();
    if (bias && !(l->bias = param(p, rng, 0.0f, 1, (int64_t[]){out}, b, layer))) return attn_last_status();
    return ATTN_OK;
}

/* A norm "<fmt>.weight" of ones (and "<fmt>.bias" of zeros for GPT2's LayerNorm) */
static attn_status norm(attn_layer_norm_layer *n, attn_params *p, const attn_lm_config *c, const char *fmt, int layer)
{
    char w[160], b[160];
    snprintf(w, sizeof w, "%s.weight", fmt);
    snprintf(b, sizeof b, "%s.bias", fmt);
    *n = (attn_layer_norm_layer){.dim = c->d_model, .eps = c->norm_eps};
    if (!(n->weight = param(p, NULL, 0.0f, 1, (int64_t[]){c->d_model}, w, layer))) return attn_last_status();
    for (int64_t i = 0; i < c->d_model; i++) n->weight->data[i] = 1.0f;
    if (c->style == ATTN_LM_GPT2 && !(n->bias = param(p, NULL, 0.0f, 1, (int64_t[]){c->d_model}, b, layer)))
        return attn_last_status();
    return ATTN_OK;
}

static attn_status init_gpt2_block(attn_lm_block *blk, attn_params *p, const attn_lm_config *c, int i, attn_rng *rng)
{
    const int64_t E = c->d_model, F = c->ffn_hidden;
    const float proj_std = INIT_STD / sqrtf(2.0f * (float)c->num_layers);
    attn_linear_layer c_attn;
    if (norm(&blk->norm1, p, c, "transformer.h.%d.ln_1", i) != ATTN_OK ||
        linear(&c_attn, p, rng, INIT_STD, "transformer.h.%d.attn.c_attn", i, E, 3 * E, true) != ATTN_OK ||
        linear(&blk->attn.out_proj, p, rng, proj_std, "transformer.h.%d.attn.c_proj", i, E, E, true) != ATTN_OK ||
        norm(&blk->norm2, p, c, "transformer.h.%d.ln_2", i) != ATTN_OK ||
        linear(&blk->w_in, p, rng, INIT_STD, "transformer.h.%d.mlp.c_fc", i, E, F, true) != ATTN_OK ||
        linear(&blk->w_out, p, rng, proj_std, "transformer.h.%d.mlp.c_proj", i, F, E, true) != ATTN_OK)
        return attn_last_status();
    blk->attn.in_proj_weight = c_attn.weight, blk->attn.in_proj_bias = c_attn.bias;
    return ATTN_OK;
}

static attn_status init_llama_block(attn_lm_block *blk, attn_params *p, const attn_lm_config *c, int i, attn_rng *rng)
{
    const int64_t E = c->d_model, F = c->ffn_hidden, Ekv = E / c->num_heads * c->num_kv_heads;
    const float proj_std = INIT_STD / sqrtf(2.0f * (float)c->num_layers); /* llama2.c: wo and w3 */
    attn_linear_layer wq, wk, wv;
    if (norm(&blk->norm1, p, c, "layers.%d.attention_norm", i) != ATTN_OK ||
        linear(&wq, p, rng, INIT_STD, "layers.%d.attention.wq", i, E, E, false) != ATTN_OK ||
        linear(&wk, p, rng, INIT_STD, "layers.%d.attention.wk", i, E, Ekv, false) != ATTN_OK ||
        linear(&wv, p, rng, INIT_STD, "layers.%d.attention.wv", i, E, Ekv, false) != ATTN_OK ||
        linear(&blk->attn.out_proj, p, rng, proj_std, "layers.%d.attention.wo", i, E, E, false) != ATTN_OK ||
        norm(&blk->norm2, p, c, "layers.%d.ffn_norm", i) != ATTN_OK ||
        linear(&blk->w_in, p, rng, INIT_STD, "layers.%d.feed_forward.w1", i, E, F, false) != ATTN_OK ||
        linear(&blk->w_out, p, rng, INIT_STD, "layers.%d.feed_forward.w2", i, F, E, false) != ATTN_OK ||
        linear(&blk->w_up, p, rng, proj_std, "layers.%d.feed_forward.w3", i, E, F, false) != ATTN_OK)
        return attn_last_status();
    blk->attn.q_proj_weight = wq.weight, blk->attn.k_proj_weight = wk.weight, blk->attn.v_proj_weight = wv.weight;
    return ATTN_OK;
}

static attn_status init_lm(attn_lm *m, attn_params *p, const attn_lm_config *cfg, attn_rng *rng)
{
    if (m) memset(m, 0, sizeof *m); /* attn_lm_free after a failure frees only what was made */
    if (!m || !p || !cfg) return attn__fail(ATTN_ERR_ARG, "lm_init: NULL argument");
    if (resolve_config(&m->cfg, cfg) != ATTN_OK) return attn_last_status();
    const attn_lm_config *c = &m->cfg;
    const bool gpt2 = c->style == ATTN_LM_GPT2;
    const int64_t V = c->vocab_size, E = c->d_model;
    if (!(m->wte = param(p, rng, INIT_STD, 2, (int64_t[]){V, E},
                         gpt2 ? "transformer.wte.weight" : "tok_embeddings.weight", 0)))
        return attn_last_status();
    if (gpt2 && !(m->wpe = param(p, rng, INIT_STD, 2, (int64_t[]){c->context, E}, "transformer.wpe.weight", 0)))
        return attn_last_status();
    if (!(m->blocks = calloc((size_t)c->num_layers, sizeof *m->blocks)))
        return attn__fail(ATTN_ERR_NOMEM, "lm_init: out of memory");
    for (int i = 0; i < c->num_layers; i++) {
        attn_lm_block *blk = &m->blocks[i];
        if ((gpt2 ? init_gpt2_block : init_llama_block)(blk, p, c, i, rng) != ATTN_OK) return attn_last_status();
        blk->attn.embed_dim = E, blk->attn.num_heads = c->num_heads, blk->attn.num_kv_heads = c->num_kv_heads;
        blk->attn.kdim = blk->attn.vdim = E, blk->attn.dropout = c->dropout;
    }
    if (norm(&m->norm_f, p, c, gpt2 ? "transformer.ln_f" : "norm", 0) != ATTN_OK) return attn_last_status();
    m->output = m->wte;
    if (c->untied && !(m->output = param(p, rng, INIT_STD, 2, (int64_t[]){V, E}, "output.weight", 0)))
        return attn_last_status();
    return ATTN_OK;
}

attn_status attn_lm_init(attn_lm *m, attn_params *p, const attn_lm_config *cfg, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    attn_status st = attn__params_settle(p, n0, init_lm(m, p, cfg, rng));
    if (st != ATTN_OK && m) attn_lm_free(m);
    return st;
}

void attn_lm_free(attn_lm *m)
{
    if (!m) return;
    free(m->blocks);
    m->blocks = NULL;
}

attn_tensor *attn__lm_norm(attn_ctx *ctx, const attn_lm *m, const attn_layer_norm_layer *n, attn_tensor *x)
{
    return m->cfg.style == ATTN_LM_GPT2 ? attn_layer_norm(ctx, x, n->weight, n->bias, n->eps)
                                        : attn_rms_norm(ctx, x, n->weight, n->eps);
}

attn_tensor *attn__lm_ffn(attn_ctx *ctx, const attn_lm *m, const attn_lm_block *blk, attn_tensor *x)
{
    if (m->cfg.style == ATTN_LM_GPT2) {
        attn_tensor *h = attn__linear_act_dropout(ctx, x, blk->w_in.weight, blk->w_in.bias, ATTN__ACT_GELU_TANH, 0.0f);
        return attn_linear(ctx, h, blk->w_out.weight, blk->w_out.bias);
    }
    attn_tensor *gate = attn_silu(ctx, attn_linear(ctx, x, blk->w_in.weight, NULL));
    attn_tensor *up = attn_linear(ctx, x, blk->w_up.weight, NULL);
    return attn_linear(ctx, attn_mul(ctx, gate, up), blk->w_out.weight, NULL);
}

const attn_rope_opts *attn__lm_rope(const attn_lm *m, attn_rope_opts *out)
{
    if (m->cfg.style != ATTN_LM_LLAMA) return NULL;
    *out = (attn_rope_opts){.layout = m->cfg.rope_interleaved ? ATTN_ROPE_INTERLEAVED : ATTN_ROPE_HALVES,
                            .base = m->cfg.rope_base};
    return out;
}

attn_tensor *attn__lm_embed(attn_ctx *ctx, const attn_lm *m, const int64_t *ids, const int64_t *positions, int64_t n)
{
    attn_tensor *x = attn_embedding(ctx, m->wte, ids, 1, (int64_t[]){n}, -1); /* (n, E) */
    if (m->wpe) x = attn_add(ctx, x, attn_embedding(ctx, m->wpe, positions, 1, (int64_t[]){n}, -1));
    return x;
}

attn_tensor *attn__lm_head(attn_ctx *ctx, const attn_lm *m, attn_tensor *x)
{
    return attn_linear(ctx, attn__lm_norm(ctx, m, &m->norm_f, x), m->output, NULL);
}

/* ids of `batch` sequences at cu: each of 1..context tokens (0 tokens allowed), every id in [0, V) */
static attn_status check_ids(const attn_lm *m, const int64_t *ids, const int64_t *cu, int64_t batch)
{
    if (!ids || !cu || batch < 1)
        return attn__fail(ATTN_ERR_ARG, "lm_forward: ids and cu_seqlens must be given, batch >= 1 (got %lld)",
                          (long long)batch);
    if (cu[0] != 0) return attn__fail(ATTN_ERR_ARG, "lm_forward: cu_seqlens[0] is %lld, not 0", (long long)cu[0]);
    for (int64_t b = 0; b < batch; b++)
        if (cu[b + 1] < cu[b] || cu[b + 1] - cu[b] > m->cfg.context)
            return attn__fail(ATTN_ERR_ARG,
                              "lm_forward: sequence %lld spans cu_seqlens %lld..%lld; expected 0 to %lld tokens "
                              "(the context)",
                              (long long)b, (long long)cu[b], (long long)cu[b + 1], (long long)m->cfg.context);
    for (int64_t i = 0; i < cu[batch]; i++)
        if (ids[i] < 0 || ids[i] >= m->cfg.vocab_size)
            return attn__fail(ATTN_ERR_ARG, "lm_forward: ids[%lld] = %lld is outside the vocabulary [0, %lld)",
                              (long long)i, (long long)ids[i], (long long)m->cfg.vocab_size);
    return ATTN_OK;
}

attn_tensor *attn_lm_forward(attn_ctx *ctx, const attn_lm *m, const int64_t *ids, const int64_t *cu_seqlens,
                             int64_t batch)
{
    if (!ctx || !m) return attn__null_input(__func__);
    if (check_ids(m, ids, cu_seqlens, batch) != ATTN_OK) return NULL;
    const int64_t total = cu_seqlens[batch];
    if (total == 0) return attn__fail_null(ATTN_ERR_ARG, "lm_forward: the batch holds no tokens");
    const int64_t *positions = attn__cu_positions(ctx, cu_seqlens, batch); /* (total) */
    if (!positions) return NULL;
    const float p = m->cfg.dropout;
    attn_tensor *x = attn_dropout(ctx, attn__lm_embed(ctx, m, ids, positions, total), p); /* (total, E) */
    attn_rope_opts rope_buf;
    const attn_rope_opts *rope = attn__lm_rope(m, &rope_buf);
    for (int64_t i = 0; i < m->cfg.num_layers && x; i++) {
        const attn_lm_block *blk = &m->blocks[i];
        attn_tensor *a = attn__mha_forward_packed_rope(ctx, &blk->attn, attn__lm_norm(ctx, m, &blk->norm1, x),
                                                       cu_seqlens, batch, true, rope);
        x = attn__add_dropout(ctx, x, a, p);
        x = attn__add_dropout(ctx, x, attn__lm_ffn(ctx, m, blk, attn__lm_norm(ctx, m, &blk->norm2, x)), p);
    }
    return x ? attn__lm_head(ctx, m, x) : NULL; /* (total, V) */
}

attn_tensor *attn_lm_forward_weights(attn_ctx *ctx, const attn_lm *m, const int64_t *ids, int64_t n,
                                     attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !m) return attn__null_input(__func__);
    const int64_t cu[2] = {0, n};
    if (check_ids(m, ids, cu, 1) != ATTN_OK) return NULL;
    if (n == 0) return attn__fail_null(ATTN_ERR_ARG, "lm_forward_weights: no tokens");
    const int64_t L = m->cfg.num_layers, H = m->cfg.num_heads, E = m->cfg.d_model;
    const int64_t *positions = attn__cu_positions(ctx, cu, 1);
    attn_tensor *all = weights ? attn_tensor_zeros(ctx, 4, (int64_t[]){L, H, n, n}) : NULL; /* (L, H, n, n) */
    if (!positions || (weights && !all)) return NULL;
    const float p = m->cfg.dropout;
    attn_tensor *x = attn_dropout(ctx, attn__lm_embed(ctx, m, ids, positions, n), p);
    x = attn_reshape(ctx, x, 3, (int64_t[]){1, n, E}); /* (1, n, E) */
    attn_rope_opts rope_buf;
    attn_mha_opts opts = {.mask = {.causal = true}, .rope = attn__lm_rope(m, &rope_buf)};
    for (int64_t i = 0; i < L && x; i++) {
        const attn_lm_block *blk = &m->blocks[i];
        attn_tensor *h = attn__lm_norm(ctx, m, &blk->norm1, x), *w = NULL;
        attn_tensor *a = h ? attn_mha_forward(ctx, &blk->attn, h, h, h, &opts, weights ? &w : NULL) : NULL;
        if (a && w) memcpy(all->data + i * H * n * n, w->data, (size_t)(H * n * n) * sizeof(float));
        x = attn__add_dropout(ctx, x, a, p);
        x = attn__add_dropout(ctx, x, attn__lm_ffn(ctx, m, blk, attn__lm_norm(ctx, m, &blk->norm2, x)), p);
    }
    attn_tensor *logits = x ? attn__lm_head(ctx, m, attn_reshape(ctx, x, 2, (int64_t[]){n, E})) : NULL;
    if (logits && weights) *weights = all;
    return logits; /* (n, V) */
}
