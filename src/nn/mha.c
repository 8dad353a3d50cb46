/* Multi-head attention (torch.nn.MultiheadAttention, batch first):
 *   q = query Wq^T + bq,  k = key Wk^T + bk,  v = value Wv^T + bv       (Wq, Wk, Wv rows of
 *   in_proj_weight, or the separate q/k/v_proj_weight when kdim/vdim differ from E or the layer
 *   has fewer key/value heads)
 *   heads: q (B, L, E) -> (B, H, L, E/H), k and v (B, L, Hkv E/H) -> (B, Hkv, L, E/H);
 *   o = sdpa(q, k, v, mask, dropout) (grouped-query attention when Hkv < H)
 *   out = merge_heads(o) Wo^T + bo */
#include "../ops/fused_internal.h"
#include "nn_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static attn_tensor *add_param(attn_params *p, const char *prefix, const char *name, int ndim, int64_t d0, int64_t d1)
{
    char full[256];
    attn__param_name(full, sizeof full, prefix, name);
    int64_t shape[2] = {d0, d1};
    return attn_params_add(p, full, ndim, shape);
}

static void xavier_uniform(attn_tensor *w, int64_t fan_in, int64_t fan_out, attn_rng *rng)
{
    float bound = sqrtf(6.0f / (float)(fan_in + fan_out));
    if (rng) attn_tensor_fill_uniform(w, rng, -bound, bound); /* NULL: no random init */
}

static attn_status init_mha(attn_mha_layer *m, attn_params *p, const char *prefix, int64_t embed_dim, int64_t num_heads,
                            int64_t num_kv_heads, int64_t kdim, int64_t vdim, bool bias, float dropout, attn_rng *rng)
{
    if (!m || !p || !prefix) return attn__fail(ATTN_ERR_ARG, "mha_init: NULL argument");
    if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0)
        return attn__fail(ATTN_ERR_ARG, "mha_init: embed_dim %lld must be a positive multiple of num_heads %lld",
                          (long long)embed_dim, (long long)num_heads);
    if (num_kv_heads < 1 || num_heads % num_kv_heads != 0)
        return attn__fail(ATTN_ERR_ARG, "mha_init: num_kv_heads %lld must be a positive divisor of num_heads %lld",
                          (long long)num_kv_heads, (long long)num_heads);
    if (!(dropout >= 0.0f && dropout <= 1.0f))
        return attn__fail(ATTN_ERR_ARG, "mha_init: dropout %g, expected in [0, 1]", dropout);
    if (kdim < 0 || vdim < 0)
        return attn__fail(ATTN_ERR_ARG, "mha_init: kdim %lld and vdim %lld; expected >= 0 (0: embed_dim)",
                          (long long)kdim, (long long)vdim);
    const int64_t E = embed_dim, Ekv = embed_dim / num_heads * num_kv_heads; /* K and V's width */
    *m = (attn_mha_layer){.embed_dim = E,
                          .num_heads = num_heads,
                          .kdim = kdim > 0 ? kdim : E,
                          .vdim = vdim > 0 ? vdim : E,
                          .dropout = dropout,
                          .num_kv_heads = num_kv_heads};
    if (m->kdim == E && m->vdim == E && Ekv == E) {
        if (!(m->in_proj_weight = add_param(p, prefix, "in_proj_weight", 2, 3 * E, E))) return attn_last_status();
        xavier_uniform(m->in_proj_weight, E, 3 * E, rng);
    } else {
        if (!(m->q_proj_weight = add_param(p, prefix, "q_proj_weight", 2, E, E)) ||
            !(m->k_proj_weight = add_param(p, prefix, "k_proj_weight", 2, Ekv, m->kdim)) ||
            !(m->v_proj_weight = add_param(p, prefix, "v_proj_weight", 2, Ekv, m->vdim)))
            return attn_last_status();
        xavier_uniform(m->q_proj_weight, E, E, rng);
        xavier_uniform(m->k_proj_weight, m->kdim, Ekv, rng);
        xavier_uniform(m->v_proj_weight, m->vdim, Ekv, rng);
    }
    if (bias && !(m->in_proj_bias = add_param(p, prefix, "in_proj_bias", 1, E + 2 * Ekv, 0))) return attn_last_status();
    char out_prefix[256];
    attn__param_name(out_prefix, sizeof out_prefix, prefix, "out_proj");
    attn_status st = attn_linear_init(&m->out_proj, p, out_prefix, E, E, bias, rng);
    if (st == ATTN_OK && m->out_proj.bias) /* PyTorch zeroes it in _reset_parameters */
        for (int64_t i = 0; i < E; i++) m->out_proj.bias->data[i] = 0.0f;
    return st;
}

attn_status attn_mha_init(attn_mha_layer *m, attn_params *p, const char *prefix, int64_t embed_dim, int64_t num_heads,
                          int64_t kdim, int64_t vdim, bool bias, float dropout, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(p, n0,
                               init_mha(m, p, prefix, embed_dim, num_heads, num_heads, kdim, vdim, bias, dropout, rng));
}

attn_status attn_mha_init_gqa(attn_mha_layer *m, attn_params *p, const char *prefix, int64_t embed_dim,
                              int64_t num_heads, int64_t num_kv_heads, int64_t kdim, int64_t vdim, bool bias,
                              float dropout, attn_rng *rng)
{
    const size_t n0 = p ? attn_params_count(p) : 0;
    return attn__params_settle(
        p, n0, init_mha(m, p, prefix, embed_dim, num_heads, num_kv_heads, kdim, vdim, bias, dropout, rng));
}

/* The key/value heads of m (0, in a layer not made by attn_mha_init*: num_heads) */
static int64_t kv_heads(const attn_mha_layer *m)
{
    return m->num_kv_heads > 0 ? m->num_kv_heads : m->num_heads;
}

/* One projection (nn_internal.h): input @ W_i^T + b_i, W_i = rows [i E, (i+1) E) of
 * in_proj_weight or its own; b_i the rows of in_proj_bias after the projections before it (E for
 * q, Hkv E/H for k and v). */
attn_tensor *attn__mha_project(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x, int i)
{
    const int64_t E = m->embed_dim, Ekv = m->num_heads > 0 ? E / m->num_heads * kv_heads(m) : E;
    const int64_t width = i == 0 ? E : Ekv;
    attn_tensor *w = m->in_proj_weight ? attn_narrow(ctx, m->in_proj_weight, 0, i * E, E)
                     : i == 0          ? m->q_proj_weight
                     : i == 1          ? m->k_proj_weight
                                       : m->v_proj_weight;
    attn_tensor *b =
        m->in_proj_bias ? attn_narrow(ctx, m->in_proj_bias, 0, i == 0 ? 0 : E + (i - 1) * Ekv, width) : NULL;
    if (!w || (m->in_proj_bias && !b)) return NULL;
    return attn_linear(ctx, x, w, b);
}

/* One projection y as attention takes it: (B, L, width) split into heads (B, heads, L, E/H), or
 * packed (total, width) read as (total, heads, E/H) */
static attn_tensor *as_heads(attn_ctx *ctx, attn_tensor *y, int64_t heads, int64_t dh, bool packed)
{
    if (!y) return NULL;
    return packed ? attn_reshape(ctx, y, 3, (int64_t[]){y->shape[0], heads, dh}) : attn_split_heads(ctx, y, heads);
}

/* The inputs (query, key, value) projected and split into heads (as_heads). With the packed
 * in_proj_weight, consecutive inputs that are one tensor (self-attention's three, cross-attention's
 * key and value) share one projection op whose weight gradient is one GEMM (fused_internal.h), as torch's
 * packed path. */
static attn_status project_heads(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *const in[3],
                                 attn_tensor *heads[3], bool packed)
{
    const int64_t E = m->embed_dim, H = m->num_heads, Dh = E / H;
    for (int i = 0, n; i < 3; i += n) {
        for (n = 1; m->in_proj_weight && i + n < 3 && in[i + n] == in[i];) n++;
        if (n == 1) {
            heads[i] = as_heads(ctx, attn__mha_project(ctx, m, in[i], i), i == 0 ? H : kv_heads(m), Dh, packed);
            if (!heads[i]) return attn_last_status();
            continue;
        }
        const bool all = n == 3; /* rows [i E, (i + n) E) of the packed weight: a view unless all */
        attn_tensor *w = all ? m->in_proj_weight : attn_narrow(ctx, m->in_proj_weight, 0, i * E, n * E);
        attn_tensor *b = !m->in_proj_bias || all ? m->in_proj_bias : attn_narrow(ctx, m->in_proj_bias, 0, i * E, n * E);
        attn_tensor *y = w && (b || !m->in_proj_bias) ? attn__linear_blocks(ctx, in[i], w, b, n) : NULL;
        const int64_t T = y ? y->shape[0] : 0; /* packed: (T, n E) as (1, T, n E), each block one "head" */
        if (packed) y = attn_reshape(ctx, y, 3, (int64_t[]){1, T, n * E});
        for (int j = 0; j < n; j++) {
            heads[i + j] = attn__split_heads_block(ctx, y, j, n, packed ? 1 : H);
            if (packed) heads[i + j] = attn_reshape(ctx, heads[i + j], 3, (int64_t[]){T, H, Dh});
            if (!heads[i + j]) return attn_last_status();
        }
    }
    return ATTN_OK;
}

attn_tensor *attn__mha_output(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *o)
{
    return attn_linear_forward(ctx, &m->out_proj, attn_merge_heads(ctx, o));
}

/* query (B, Lq, E), key (B, Lk, kdim), value (B, Lk, vdim), batch first, or all three without B
 * (unbatched) */
static attn_status check_inputs(const attn_mha_layer *m, const attn_tensor *q, const attn_tensor *k,
                                const attn_tensor *v)
{
    const int nd = q->ndim;
    bool ok = (nd == 2 || nd == 3) && k->ndim == nd && v->ndim == nd &&
              (nd == 2 || (q->shape[0] == k->shape[0] && k->shape[0] == v->shape[0])) &&
              k->shape[nd - 2] == v->shape[nd - 2] && q->shape[nd - 1] == m->embed_dim && k->shape[nd - 1] == m->kdim &&
              v->shape[nd - 1] == m->vdim;
    return ok ? ATTN_OK
              : attn__fail_inputs("mha", (const char *const[]){"query", "key", "value"},
                                  (const attn_tensor *const[]){q, k, v},
                                  "(B, Lq, %lld), (B, Lk, %lld), (B, Lk, %lld) (batch first), or the three "
                                  "without B (unbatched)",
                                  (long long)m->embed_dim, (long long)m->kdim, (long long)m->vdim);
}

/* nn.MultiheadAttention's 3-D masks are (B*H, Lq, Lk), one per batch row and head: as 4-D
 * (B, H, Lq, Lk) they broadcast like every other mask. Any other 3-D shape is refused, as
 * PyTorch refuses it (read as attn_sdpa would, a (B, Lq, Lk) mask with B == H would silently
 * give head h the mask of batch row h). */
static attn_status per_head_4d(const char *kind, int *ndim, int64_t shape[4], int64_t batch, int64_t heads, int64_t lq,
                               int64_t lk)
{
    if (*ndim != 3) return ATTN_OK;
    if (shape[0] != batch * heads || shape[1] != lq || shape[2] != lk)
        return attn__fail(ATTN_ERR_SHAPE,
                          "mha: the 3-D %s mask is (%lld, %lld, %lld); expected (B*H, Lq, Lk) = "
                          "(%lld, %lld, %lld), or a 2-D (Lq, Lk) or 4-D mask",
                          kind, (long long)shape[0], (long long)shape[1], (long long)shape[2],
                          (long long)(batch * heads), (long long)lq, (long long)lk);
    shape[3] = shape[2];
    shape[2] = shape[1];
    shape[0] = batch;
    shape[1] = heads;
    *ndim = 4;
    return ATTN_OK;
}

/* x (L, width) as (1, L, width): a batch of one */
static attn_tensor *batch_of_one(attn_ctx *ctx, attn_tensor *x)
{
    return attn_reshape(ctx, x, 3, (int64_t[]){1, x->shape[0], x->shape[1]});
}

/* nn.MultiheadAttention's unbatched call, 2-D query (Lq, E), key (Lk, kdim) and value (Lk, vdim)
 * (checked): a batch of one (the masks as for B = 1), and the batch dim taken off the output
 * (Lq, E) and the weights, (Lq, Lk) or (H, Lq, Lk). */
static attn_tensor *mha_unbatched(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query, attn_tensor *key,
                                  attn_tensor *value, const attn_mha_opts *opts, attn_tensor **weights)
{
    attn_tensor *q = batch_of_one(ctx, query);
    attn_tensor *k = key == query ? q : batch_of_one(ctx, key);
    attn_tensor *v = value == key ? k : batch_of_one(ctx, value);
    if (!q || !k || !v) return NULL;
    attn_tensor *out = attn_mha_forward(ctx, m, q, k, v, opts, weights);
    if (!out) return NULL;
    if (weights) {
        attn_tensor *w = *weights;
        *weights = attn_reshape(ctx, w, w->ndim - 1, w->shape + 1);
        if (!*weights) return NULL;
    }
    return attn_reshape(ctx, out, 2, out->shape + 1);
}

attn_tensor *attn_mha_forward(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query, attn_tensor *key,
                              attn_tensor *value, const attn_mha_opts *opts, attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !m || !query || !key || !value) return attn__null_input(__func__);
    if (check_inputs(m, query, key, value) != ATTN_OK) return NULL;
    if (query->ndim == 2) return mha_unbatched(ctx, m, query, key, value, opts, weights);
    attn_mha_opts defaults = {.average_weights = true};
    if (!opts) opts = &defaults;
    attn_sdpa_opts so = {
        .mask = opts->mask, .dropout_p = m->dropout, .impl = opts->impl, .enable_gqa = kv_heads(m) != m->num_heads};
    if (opts->features) so.features = *opts->features;
    const int64_t B = query->shape[0], H = m->num_heads, Lq = query->shape[1], Lk = key->shape[1];
    if (per_head_4d("attend", &so.mask.attend_ndim, so.mask.attend_shape, B, H, Lq, Lk) != ATTN_OK ||
        per_head_4d("blocked", &so.mask.blocked_ndim, so.mask.blocked_shape, B, H, Lq, Lk) != ATTN_OK ||
        per_head_4d("additive", &so.mask.additive_ndim, so.mask.additive_shape, B, H, Lq, Lk) != ATTN_OK)
        return NULL;
    attn_tensor *heads[3]; /* q, k, v: (B, H, L, E/H) */
    if (project_heads(ctx, m, (attn_tensor *[3]){query, key, value}, heads, false) != ATTN_OK) return NULL;
    attn_tensor *q = heads[0], *k = heads[1], *v = heads[2];
    if (opts->rope) { /* each head's q and k rotated by its sequence positions 0, 1, 2, ... */
        attn_rope_opts r = *opts->rope;
        r.position_dim = 2, r.positions = NULL, r.n_positions = 0;
        if (!(q = attn_rope(ctx, q, &r)) || !(k = attn_rope(ctx, k, &r))) return NULL;
    }
    attn_tensor *w = NULL;
    attn_tensor *out = attn__mha_output(ctx, m, attn_sdpa(ctx, q, k, v, &so, weights ? &w : NULL));
    if (!out) return NULL;
    if (weights) {
        bool grad = attn_ctx_grad_enabled(ctx);
        attn_ctx_set_grad_enabled(ctx, false); /* the weights are not differentiable */
        *weights = opts->average_weights ? attn_mean(ctx, w, 1, false) : w;
        attn_ctx_set_grad_enabled(ctx, grad);
        if (!*weights) return NULL;
    }
    return out;
}

/* Packed self- or cross-attention: query (Tq, E) as sequences at cu_q, memory (Tk, E) at cu_k
 * (for self-attention the same tensor and offsets); rope (NULL: none) at each row's place in its
 * sequence. */
static attn_tensor *mha_varlen(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query, attn_tensor *memory,
                               const int64_t *cu_q, const int64_t *cu_k, int64_t batch, bool causal,
                               const attn_rope_opts *rope, const char *op)
{
    char a[64], b[64];
    if (query->ndim != 2 || memory->ndim != 2 || query->shape[1] != m->embed_dim || memory->shape[1] != m->kdim ||
        m->kdim != m->vdim || m->num_heads < 1)
        return attn__fail_null(ATTN_ERR_SHAPE,
                               "%s: query %s, memory %s; expected (total_q, %lld) and (total_k, %lld) "
                               "of a layer whose kdim and vdim are equal",
                               op, attn_shape_str(query, a, 64), attn_shape_str(memory, b, 64), (long long)m->embed_dim,
                               (long long)m->kdim);
    if (batch < 1)
        return attn__fail_null(ATTN_ERR_ARG, "%s: batch = %lld; expected >= 1 sequence", op, (long long)batch);
    if (attn__cu_seqlens_check(cu_q, batch, query->shape[0], op, "cu_seqlens_q", "query") != ATTN_OK ||
        attn__cu_seqlens_check(cu_k, batch, memory->shape[0], op, "cu_seqlens_k", "memory") != ATTN_OK)
        return NULL;
    const int64_t Tq = query->shape[0], E = m->embed_dim, H = m->num_heads, Hkv = kv_heads(m);
    attn_tensor *heads[3]; /* q (Tq, H, E/H), k and v (Tk, Hkv, E/H) */
    if (project_heads(ctx, m, (attn_tensor *[3]){query, memory, memory}, heads, true) != ATTN_OK) return NULL;
    attn_tensor *q = heads[0], *k = heads[1], *v = heads[2];
    if (rope) {
        attn_rope_opts r = *rope;
        r.position_dim = 0;
        r.positions = attn__cu_positions(ctx, cu_q, batch), r.n_positions = Tq;
        if (!r.positions || !(q = attn_rope(ctx, q, &r))) return NULL;
        r.positions = cu_k == cu_q ? r.positions : attn__cu_positions(ctx, cu_k, batch),
        r.n_positions = memory->shape[0];
        if (!r.positions || !(k = attn_rope(ctx, k, &r))) return NULL;
    }
    const attn_varlen_opts o = {.causal = causal, .enable_gqa = Hkv != H, .dropout_p = m->dropout};
    attn_tensor *o_heads = attn_sdpa_varlen(ctx, q, k, v, cu_q, cu_k, batch, &o); /* (Tq, H, E/H) */
    return o_heads ? attn_linear_forward(ctx, &m->out_proj, attn_reshape(ctx, o_heads, 2, (int64_t[]){Tq, E})) : NULL;
}

attn_tensor *attn_mha_forward_packed(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x, const int64_t *cu_seqlens,
                                     int64_t batch, bool causal)
{
    if (!ctx || !m || !x) return attn__null_input(__func__);
    return mha_varlen(ctx, m, x, x, cu_seqlens, cu_seqlens, batch, causal, NULL, "mha_packed");
}

attn_tensor *attn_mha_forward_packed_cross(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *query,
                                           attn_tensor *memory, const int64_t *cu_seqlens_q,
                                           const int64_t *cu_seqlens_k, int64_t batch)
{
    if (!ctx || !m || !query || !memory) return attn__null_input(__func__);
    return mha_varlen(ctx, m, query, memory, cu_seqlens_q, cu_seqlens_k, batch, false, NULL, "mha_packed_cross");
}

attn_tensor *attn__mha_forward_packed_rope(attn_ctx *ctx, const attn_mha_layer *m, attn_tensor *x,
                                           const int64_t *cu_seqlens, int64_t batch, bool causal,
                                           const attn_rope_opts *rope)
{
    if (!ctx || !m || !x) return attn__null_input(__func__);
    return mha_varlen(ctx, m, x, x, cu_seqlens, cu_seqlens, batch, causal, rope, "layer_packed");
}
