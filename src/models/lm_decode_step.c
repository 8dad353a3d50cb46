/* The cached decoder's step of one token per row (attn__lm_decode_step, lm_internal.h): the n new
 * tokens x (n, E) through the whole model in one parallel region, each product a few vectors
 * against a weight that is read once, its rows shared out among the threads:
 *   x = wte[t] (+ wpe[p]);  per layer:
 *     h = norm1(x);  q, k, v = h W^T (+ b);  rope(q, k) at p;  k, v -> cache row p;
 *     o_h = softmax(q_h K_h^T / sqrt(Dh)) V_h over the row's p + 1 keys;  x += o Wo^T (+ bo)
 *     h = norm2(x);  x += ffn(h)  (GPT2 c_proj gelu_tanh(c_fc h); LLAMA w2 (silu(w1 h) * w3 h))
 *   logits = norm_f(x) output^T
 * The same model as lm_decode.c's feed through the ops (its reference), with its norms, rotary
 * table and activations; the products and the attention sum in another order (kernels/decode.c).
 * Each thread computes the norms for itself (n E floats), so that only the products and the
 * attention need the team to meet: five barriers a layer. */
#include "../kernels/activation_internal.h"
#include "../kernels/kernels_internal.h"
#include "../ops/rope_internal.h"
#include "lm_internal.h"

#include <math.h>
#include <string.h>

/* Rows of a weight stacked as one: the rows [0, rows) of w (row stride = cols), bias or NULL */
typedef struct stacked {
    const float *w, *bias;
    int64_t rows;
} stacked;

typedef struct step {
    const attn_lm *m;
    const attn_lm_decoder *d;
    int64_t n, E, Ekv, F, V, H, Hkv, Dh;
    const int64_t *row, *pos; /* (n) each token's cache row and position */
    float *x;                 /* (n, E) the residual stream */
    float *qkv;               /* (n, E + 2 Ekv) the projections */
    float *o;                 /* (n, E) the heads' attention */
    float *a, *up;            /* (n, F) the FFN's hidden units (LLAMA: silu(w1 h), w3 h) */
    float *logits;            /* (n, V) */
    float *h, *stats;         /* per thread: (threads, n, E), (threads, 2, n) the norm's mean and rstd */
    float *scores, *q_rot;    /* per thread: (threads, cap), (threads, Dh) */
} step;

/* This thread's share [*r0, *r1) of `rows`, the threads' runs equal within one row */
static void share(int64_t rows, int t, int threads, int64_t *r0, int64_t *r1)
{
    *r0 = rows * t / threads;
    *r1 = rows * (t + 1) / threads;
}

/* y (n, ldy) columns of the stacked weights' rows, for this thread's share, from x (n, cols) */
static void product(float *y, int64_t ldy, const stacked *parts, int n_parts, const float *x, int64_t n, int64_t cols,
                    bool accumulate, int t, int threads)
{
    int64_t rows = 0, r0, r1, at = 0;
    for (int i = 0; i < n_parts; i++) rows += parts[i].rows;
    share(rows, t, threads, &r0, &r1);
    for (int i = 0; i < n_parts; at += parts[i++].rows) {
        const int64_t lo = r0 > at ? r0 - at : 0, hi = r1 - at < parts[i].rows ? r1 - at : parts[i].rows;
        if (lo < hi)
            attn__gemv_rows(y + at, ldy, parts[i].w, cols, x, cols, parts[i].bias, n, lo, hi, cols, accumulate);
    }
}

/* h (n, E) = the style's norm of x (n, E) (lm.c's attn__lm_norm), on the calling thread */
static void norm(const step *s, const attn_layer_norm_layer *nl, float *h, float *stats, const float *x)
{
    const bool gpt2 = s->m->cfg.style == ATTN_LM_GPT2;
    attn__layernorm_rows(h, gpt2 ? stats : NULL, stats + s->n, x, nl->weight->data,
                         gpt2 && nl->bias ? nl->bias->data : NULL, s->n, s->E, nl->eps, 1);
}

/* The keys and values of token i, kv head g, rotated and written to the cache */
static void cache_token(const step *s, int64_t layer, int64_t i, int64_t g)
{
    const int64_t slot = (s->row[i] * s->d->cap + s->pos[i]) * s->Ekv + g * s->Dh;
    const float *k = s->qkv + i * (s->E + 2 * s->Ekv) + s->E + g * s->Dh, *v = k + s->Ekv;
    float *kc = s->d->k[layer]->data + slot, *vc = s->d->v[layer]->data + slot;
    if (s->d->rope_cs)
        attn__rope_rotate_row(kc, k, s->d->rope_cs + s->pos[i] * s->Dh, s->Dh, s->Dh,
                              s->m->cfg.rope_interleaved ? ATTN_ROPE_INTERLEAVED : ATTN_ROPE_HALVES, false);
    else
        memcpy(kc, k, (size_t)s->Dh * sizeof *kc);
    memcpy(vc, v, (size_t)s->Dh * sizeof *vc);
}

/* Token i's query head hd over its row's cache, into o */
static void attend(const step *s, int64_t layer, int64_t i, int64_t hd, float *scores, float *q_rot)
{
    const int64_t g = hd / (s->H / s->Hkv), first = s->row[i] * s->d->cap * s->Ekv + g * s->Dh;
    const float *q = s->qkv + i * (s->E + 2 * s->Ekv) + hd * s->Dh;
    if (s->d->rope_cs) {
        attn__rope_rotate_row(q_rot, q, s->d->rope_cs + s->pos[i] * s->Dh, s->Dh, s->Dh,
                              s->m->cfg.rope_interleaved ? ATTN_ROPE_INTERLEAVED : ATTN_ROPE_HALVES, false);
        q = q_rot;
    }
    attn__attend_one(s->o + i * s->E + hd * s->Dh, scores, q, s->d->k[layer]->data + first,
                     s->d->v[layer]->data + first, s->Ekv, s->pos[i] + 1, s->Dh, 1.0f / sqrtf((float)s->Dh));
}

static void layer(const step *s, int64_t l, int t, int threads)
{
    const attn_lm_block *blk = &s->m->blocks[l];
    const attn_mha_layer *at = &blk->attn;
    const int64_t n = s->n, E = s->E, Ekv = s->Ekv, F = s->F;
    float *h = s->h + t * n * E, *stats = s->stats + t * 2 * n;
    const float *b = at->in_proj_bias ? at->in_proj_bias->data : NULL;
    const stacked qkv[3] = {
        {at->in_proj_weight ? at->in_proj_weight->data : at->q_proj_weight->data, b, E},
        {at->in_proj_weight ? at->in_proj_weight->data + E * E : at->k_proj_weight->data, b ? b + E : NULL, Ekv},
        {at->in_proj_weight ? at->in_proj_weight->data + 2 * E * E : at->v_proj_weight->data, b ? b + 2 * E : NULL,
         Ekv}};
    norm(s, &blk->norm1, h, stats, s->x);
    product(s->qkv, E + 2 * Ekv, qkv, 3, h, n, E, false, t, threads);
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t ig = 0; ig < n * s->Hkv; ig++) cache_token(s, l, ig / s->Hkv, ig % s->Hkv);
#pragma omp for schedule(static)
    for (int64_t ih = 0; ih < n * s->H; ih++)
        attend(s, l, ih / s->H, ih % s->H, s->scores + t * s->d->cap, s->q_rot + t * s->Dh);
    const stacked out = {at->out_proj.weight->data, at->out_proj.bias ? at->out_proj.bias->data : NULL, E};
    product(s->x, E, &out, 1, s->o, n, E, true, t, threads);
#pragma omp barrier
    norm(s, &blk->norm2, h, stats, s->x);
    int64_t f0, f1;
    share(F, t, threads, &f0, &f1);
    const stacked w_in = {blk->w_in.weight->data, blk->w_in.bias ? blk->w_in.bias->data : NULL, F};
    product(s->a, F, &w_in, 1, h, n, E, false, t, threads);
    if (s->m->cfg.style == ATTN_LM_GPT2)
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = f0; j < f1; j++) s->a[i * F + j] = attn_gelu_tanh_f(s->a[i * F + j]);
    else {
        const stacked w_up = {blk->w_up.weight->data, NULL, F};
        product(s->up, F, &w_up, 1, h, n, E, false, t, threads);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = f0; j < f1; j++) s->a[i * F + j] = attn_silu_f(s->a[i * F + j]) * s->up[i * F + j];
    }
#pragma omp barrier
    const stacked w_out = {blk->w_out.weight->data, blk->w_out.bias ? blk->w_out.bias->data : NULL, E};
    product(s->x, E, &w_out, 1, s->a, n, F, true, t, threads);
#pragma omp barrier
}

static void run(const step *s, int threads_asked)
{
#pragma omp parallel num_threads(threads_asked)
    {
        const int t = attn__thread_num(), threads = attn__team_size();
        for (int64_t l = 0; l < s->m->cfg.num_layers; l++) layer(s, l, t, threads);
        float *h = s->h + t * s->n * s->E;
        norm(s, &s->m->norm_f, h, s->stats + t * 2 * s->n, s->x);
        const stacked head = {s->m->output->data, NULL, s->V};
        product(s->logits, s->V, &head, 1, h, s->n, s->E, false, t, threads);
    }
}

attn_status attn__lm_decode_step(attn_lm_decoder *d, const int64_t *tokens, const int64_t *counts)
{
    const attn_lm *m = d->m;
    const attn_lm_config *c = &m->cfg;
    const int threads = d->work->num_threads;
    step s = {.m = m,
              .d = d,
              .E = c->d_model,
              .F = c->ffn_hidden,
              .V = c->vocab_size,
              .H = c->num_heads,
              .Hkv = c->num_kv_heads};
    s.Dh = s.E / s.H, s.Ekv = s.Dh * s.Hkv;
    for (int64_t r = 0; r < d->rows; r++) s.n += counts[r];
    const int64_t n = s.n, shared = n * (3 * s.E + 2 * s.Ekv + 2 * s.F + s.V),
                  own = n * s.E + 2 * n + d->cap + s.Dh; /* floats in all, and each thread's */
    int64_t *row = attn__arena_alloc(&d->work->arena, (size_t)(2 * n) * sizeof *row); /* (2, n) rows, positions */
    float *buf = attn__arena_alloc(&d->work->arena, (size_t)(shared + threads * own) * sizeof *buf);
    if (!row || !buf) return attn_last_status();
    s.row = row, s.pos = row + n;
    s.x = buf, s.qkv = s.x + n * s.E, s.o = s.qkv + n * (s.E + 2 * s.Ekv), s.a = s.o + n * s.E, s.up = s.a + n * s.F;
    s.logits = s.up + n * s.F, s.h = s.logits + n * s.V, s.stats = s.h + threads * n * s.E;
    s.scores = s.stats + threads * 2 * n, s.q_rot = s.scores + threads * d->cap;
    for (int64_t r = 0, i = 0; r < d->rows; r++) {
        if (!counts[r]) continue;
        row[i] = r, row[n + i] = d->len[r];
        const float *te = m->wte->data + tokens[i] * s.E, *pe = m->wpe ? m->wpe->data + d->len[r] * s.E : NULL;
        for (int64_t j = 0; j < s.E; j++) s.x[i * s.E + j] = pe ? te[j] + pe[j] : te[j];
        i++;
    }
    run(&s, threads);
    for (int64_t i = 0; i < n; i++) memcpy(d->last + row[i] * s.V, s.logits + i * s.V, (size_t)s.V * sizeof(float));
    return ATTN_OK;
}
