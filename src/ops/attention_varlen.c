/* attn_sdpa_varlen: scaled dot-product attention over packed sequences of different lengths
 * (FlashAttention's varlen call), as a differentiable op. Math in src/kernels/attention_internal.h.
 *
 * Layout: the caller's q (total_q, H, D) holds sequence b's queries in rows
 * [cu_seqlens_q[b], cu_seqlens_q[b+1]); k and v likewise with cu_seqlens_k. The kernels take one
 * sequence as a (1, H, L_b, .) problem, so each tensor is permuted once into "blocks": sequence b's
 * (H, L_b, width) block at offset cu[b] H width of a buffer as large as the tensor (no padding).
 * The forward writes its output in blocks and permutes it back; the backward permutes dO into
 * blocks, runs the kernels' backward per sequence into zeroed block gradients, and adds them back
 * into the caller's layout.
 *
 * Threads: with many sequences (at least 2 per thread) or sequences too short for the kernels'
 * own parallel regions, the sequences are the parallel loop (longest first, one thread each);
 * otherwise the sequences run one after another, each kernel over all threads (heads x query
 * blocks in the forward, heads in the backward). */
#include "../autograd/tape_internal.h"
#include "../kernels/attention_internal.h"
#include "gemm_internal.h"
#include "sdpa_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct varlen_saved {
    sdpa_problem base; /* every sequence's options: batch 1, lq and lk set per sequence */
    int64_t batch, heads, heads_kv, total_q;
    const int64_t *cu_q, *cu_k; /* (batch + 1) each, copies */
    const int64_t *order;       /* (batch) sequences by decreasing Lq_b Lk_b */
    bool fused, outer;          /* the kernel; the sequences as the parallel loop (file comment) */
    float *qb, *kb, *vb, *ob;   /* q, k, v, out in blocks: (H, Lq_b, D), (Hkv, Lk_b, D), ... */
    float *stats;               /* (H, Lq_b, 2) per sequence at 2 H cu_q[b] */
    float *weights;             /* reference path: (H, Lq_b, Lk_b) per sequence at weight_at[b] */
    const int64_t *weight_at;   /* (batch) */
} varlen_saved;

/* dst in blocks from src (total, heads, width), or src in blocks added into / copied to dst
 * (to_blocks false): sequence b's rows [cu[b], cu[b+1]) <-> its (heads, L_b, width) block */
static void permute(float *dst, const float *src, const int64_t *cu, int64_t batch, int64_t heads, int64_t width,
                    bool to_blocks, bool accumulate, int threads)
{
    (void)threads; /* read by the pragma alone: unused in a build without OpenMP */
#pragma omp parallel for schedule(dynamic, 1)                                                                          \
    num_threads(threads) if ((double)cu[batch] * (double)heads * (double)width >= 1e5)
    for (int64_t b = 0; b < batch; b++) {
        const int64_t L = cu[b + 1] - cu[b];
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < L; i++) {
                const int64_t packed = ((cu[b] + i) * heads + h) * width,
                              blocked = cu[b] * heads * width + (h * L + i) * width;
                if (to_blocks)
                    memcpy(dst + blocked, src + packed, (size_t)width * sizeof(float));
                else if (!accumulate)
                    memcpy(dst + packed, src + blocked, (size_t)width * sizeof(float));
                else
                    for (int64_t c = 0; c < width; c++) dst[packed + c] += src[blocked + c];
            }
    }
}

/* Sequence b's problem: one batch row of its own lengths, its slopes, its own dropout draws */
static sdpa_problem seq_problem(const varlen_saved *s, int64_t b, int threads)
{
    sdpa_problem p = s->base;
    p.lq = s->cu_q[b + 1] - s->cu_q[b], p.lk = s->cu_k[b + 1] - s->cu_k[b];
    p.threads = threads;
    if (p.alibi) p.alibi += b * p.alibi_batch_stride, p.alibi_batch_stride = 0;  /* (batch, H) slopes: its row */
    p.dropout_seed = s->base.dropout_seed + (uint64_t)b * 0x9E3779B97F4A7C15ull; /* hashed again by the kernels */
    p.mods_batch = b; /* the callbacks see the sequence's index */
    return p;
}

/* The largest sequence's problem (scratch sizes grow with Lq and Lk) */
static sdpa_problem largest_problem(const varlen_saved *s, int threads)
{
    sdpa_problem p = seq_problem(s, 0, threads);
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t lq = s->cu_q[b + 1] - s->cu_q[b], lk = s->cu_k[b + 1] - s->cu_k[b];
        p.lq = lq > p.lq ? lq : p.lq, p.lk = lk > p.lk ? lk : p.lk;
    }
    return p;
}

/* q (total_q, H, D), k (total_k, Hkv, D), v (total_k, Hkv, Dv); Hkv = H, or dividing it with gqa */
static attn_status check_shapes(const attn_tensor *q, const attn_tensor *k, const attn_tensor *v, bool gqa)
{
    bool ok = q->ndim == 3 && k->ndim == 3 && v->ndim == 3 && k->shape[0] == v->shape[0] &&
              k->shape[1] == v->shape[1] && q->shape[2] == k->shape[2] &&
              (q->shape[1] == k->shape[1] || (gqa && k->shape[1] > 0 && q->shape[1] % k->shape[1] == 0));
    const char *h = gqa ? "H_kv" : "H";
    return ok ? ATTN_OK
              : attn__fail_inputs("sdpa_varlen", (const char *const[]){"q", "k", "v"},
                                  (const attn_tensor *const[]){q, k, v},
                                  "q (total_q, H, D), k (total_k, %s, D), v (total_k, %s, Dv)", h, h);
}

/* The options into s->base after checking them; the slopes copied. grads: q, k or v needs a gradient */
static attn_status prepare(attn_ctx *ctx, varlen_saved *s, const attn_varlen_opts *o, bool grads)
{
    const attn_status checked = attn__sdpa_check_opts(o->dropout_p, o->scale, o->impl, "sdpa_varlen");
    if (checked != ATTN_OK) return checked;
    sdpa_problem *p = &s->base;
    p->batch = s->batch; /* ALiBi's (batch, H) slopes: a row per sequence; then each problem is one row */
    const attn_status st = attn__sdpa_prepare_features(ctx, p, &o->features, grads, "sdpa_varlen");
    p->batch = 1;
    if (st != ATTN_OK) return st;
    if (o->causal) { /* FlashAttention's, bottom-right per sequence: the window's right bound 0 */
        if (!p->windowed) p->window_left = -1;
        p->windowed = true, p->window_right = 0;
    }
    return ATTN_OK;
}

/* A sequence and its cost, Lq_b Lk_b (in double: no overflow) */
typedef struct seq_cost {
    double cost;
    int64_t seq;
} seq_cost;

/* Decreasing cost, then increasing index: the order is the same on every run */
static int by_cost(const void *a, const void *b)
{
    const seq_cost *x = a, *y = b;
    return x->cost != y->cost ? (x->cost < y->cost) - (x->cost > y->cost) : (x->seq > y->seq) - (x->seq < y->seq);
}

/* Copies of the offsets, the longest-first order and (the reference path, weights true) each
 * sequence's weights' place with their total; false with the error set */
static bool copy_offsets(attn_ctx *ctx, varlen_saved *s, const int64_t *cu_q, const int64_t *cu_k, bool weights,
                         int64_t *weights_total)
{
    const size_t n = (size_t)(s->batch + 1) * sizeof(int64_t);
    int64_t *q = attn__arena_alloc(&ctx->arena, n), *k = attn__arena_alloc(&ctx->arena, n);
    int64_t *order = attn__arena_alloc(&ctx->arena, (size_t)s->batch * sizeof(int64_t));
    int64_t *at = attn__arena_alloc(&ctx->arena, (size_t)s->batch * sizeof(int64_t));
    seq_cost *costs = attn__arena_alloc(&ctx->arena, (size_t)s->batch * sizeof(seq_cost));
    if (!q || !k || !order || !at || !costs) return false;
    memcpy(q, cu_q, n), memcpy(k, cu_k, n);
    int64_t sum = 0;
    for (int64_t b = 0; b < s->batch; b++) {
        int64_t size;
        at[b] = sum;
        costs[b] = (seq_cost){(double)(q[b + 1] - q[b]) * (double)(k[b + 1] - k[b]), b};
        if (weights && (!attn__mul_ok(q[b + 1] - q[b], k[b + 1] - k[b], &size) ||
                        !attn__mul_ok(size, s->heads, &size) || __builtin_add_overflow(sum, size, &sum))) {
            attn__fail(ATTN_ERR_NOMEM,
                       "sdpa_varlen: the reference path's weights of %lld sequences have more elements "
                       "than int64 holds",
                       (long long)s->batch);
            return false;
        }
    }
    qsort(costs, (size_t)s->batch, sizeof *costs, by_cost); /* the costly sequences start first */
    for (int64_t b = 0; b < s->batch; b++) order[b] = costs[b].seq;
    s->cu_q = q, s->cu_k = k, s->order = order, s->weight_at = at;
    *weights_total = sum;
    return true;
}

/* Sequence b's offsets, in floats, into the block buffers: qb (and dq's blocks), kb (dk), vb (dv),
 * ob (and dO's blocks), stats */
typedef struct seq_at {
    int64_t q, k, v, o, stats;
} seq_at;

static seq_at seq_offsets(const varlen_saved *s, int64_t b)
{
    const int64_t D = s->base.d, Dv = s->base.dv;
    return (seq_at){.q = s->cu_q[b] * s->heads * D,
                    .k = s->cu_k[b] * s->heads_kv * D,
                    .v = s->cu_k[b] * s->heads_kv * Dv,
                    .o = s->cu_q[b] * s->heads * Dv,
                    .stats = 2 * s->cu_q[b] * s->heads};
}

static void forward_seq(const varlen_saved *s, int64_t b, float *scratch, int threads)
{
    const sdpa_problem p = seq_problem(s, b, threads);
    const seq_at at = seq_offsets(s, b);
    if (p.lq == 0) return;
    if (p.lk == 0) { /* every query row fully masked: output 0 (zeroed already), P = 0 in the backward */
        for (int64_t r = 0; r < p.heads * p.lq; r++)
            s->stats[at.stats + 2 * r] = INFINITY, s->stats[at.stats + 2 * r + 1] = 0.0f;
        return;
    }
    if (s->fused)
        sdpa_forward_fused(s->ob + at.o, s->stats + at.stats, s->qb + at.q, s->kb + at.k, s->vb + at.v, scratch, &p);
    else
        sdpa_forward_ref(s->ob + at.o, s->stats + at.stats, s->weights + s->weight_at[b], s->qb + at.q, s->kb + at.k,
                         s->vb + at.v, &p);
}

static void backward_seq(const varlen_saved *s, int64_t b, float *dq, float *dk, float *dv, const float *dout,
                         float *scratch, int threads)
{
    const sdpa_problem p = seq_problem(s, b, threads);
    const seq_at at = seq_offsets(s, b);
    if (p.lq == 0 || p.lk == 0) return; /* no visible pair: no gradient */
    if (s->fused)
        sdpa_backward_fused(dq + at.q, dk + at.k, dv + at.v, dout + at.o, s->qb + at.q, s->kb + at.k, s->vb + at.v,
                            s->ob + at.o, s->stats + at.stats, scratch, &p);
    else
        sdpa_backward_ref(dq + at.q, dk + at.k, dv + at.v, dout + at.o, s->qb + at.q, s->kb + at.k, s->vb + at.v,
                          s->ob + at.o, s->weights + s->weight_at[b], scratch, &p);
}

/* The kernels' scratch for every sequence, from the arena: *per_thread floats for each thread
 * when the sequences are the parallel loop, else one kernel call's on all threads (its sizes grow
 * with Lq and Lk: the largest sequence's) */
static float *scratch_alloc(attn_ctx *ctx, const varlen_saved *s, int64_t *per_thread, const char *who)
{
    const int threads = s->base.threads, call_threads = s->outer ? 1 : threads;
    const sdpa_problem p = largest_problem(s, call_threads);
    const int64_t n =
        s->fused ? sdpa_fused_scratch_floats(&p, call_threads) : sdpa_ref_scratch_floats(&p, call_threads);
    int64_t total;
    if (n < 0 || __builtin_mul_overflow(n, s->outer ? (int64_t)threads : 1, &total) ||
        (uint64_t)total > SIZE_MAX / sizeof(float) - 1)
        return attn__fail_null(ATTN_ERR_NOMEM,
                               "%s: the kernel's scratch for Lq %lld, Lk %lld on %d threads does not "
                               "fit in memory",
                               who, (long long)p.lq, (long long)p.lk, threads);
    *per_thread = n;
    return attn__arena_alloc(&ctx->arena, (size_t)(total + 1) * sizeof(float));
}

/* Runs forward (dq NULL) or backward of every sequence: one after another over all threads, or
 * the sequences as the parallel loop, each on one thread with its own scratch slice */
static void each_sequence(const varlen_saved *s, float *scratch, int64_t per_thread, int threads, float *dq, float *dk,
                          float *dv, const float *dout)
{
    if (!s->outer) {
        for (int64_t b = 0; b < s->batch; b++)
            if (dq)
                backward_seq(s, b, dq, dk, dv, dout, scratch, threads);
            else
                forward_seq(s, b, scratch, threads);
        return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int64_t n = 0; n < s->batch; n++) {
        float *mine = scratch + (int64_t)attn__thread_num() * per_thread;
        if (dq)
            backward_seq(s, s->order[n], dq, dk, dv, dout, mine, 1);
        else
            forward_seq(s, s->order[n], mine, 1);
    }
}

static attn_status varlen_backward(attn_ctx *ctx, attn_node *node)
{
    const varlen_saved *s = node->saved;
    const int threads = s->base.threads;
    float *grads[3] = {node->grad[0], node->grad[1], node->grad[2]}; /* the caller's layout; NULL: no grad */
    int64_t per_thread;
    float *scratch = scratch_alloc(ctx, s, &per_thread, "sdpa_varlen backward");
    float *dout = attn__arena_alloc(&ctx->arena, (size_t)node->out->numel * sizeof(float) + 1);
    float *blocks[3]; /* dq, dk, dv in blocks, zeroed: the kernels accumulate */
    for (int i = 0; i < 3; i++)
        if (!(blocks[i] = attn__arena_calloc(&ctx->arena, (size_t)node->in[i]->numel * sizeof(float) + 1, threads)))
            return attn_last_status();
    if (!scratch || !dout) return attn_last_status();
    permute(dout, node->out->grad, s->cu_q, s->batch, s->heads, s->base.dv, true, false, threads);
    each_sequence(s, scratch, per_thread, threads, blocks[0], blocks[1], blocks[2], dout);
    const int64_t *cu[3] = {s->cu_q, s->cu_k, s->cu_k}, heads[3] = {s->heads, s->heads_kv, s->heads_kv};
    const int64_t width[3] = {s->base.d, s->base.d, s->base.dv};
    for (int i = 0; i < 3; i++)
        if (grads[i]) permute(grads[i], blocks[i], cu[i], s->batch, heads[i], width[i], false, true, threads);
    return ATTN_OK;
}

attn_tensor *attn_sdpa_varlen(attn_ctx *ctx, attn_tensor *q, attn_tensor *k, attn_tensor *v,
                              const int64_t *cu_seqlens_q, const int64_t *cu_seqlens_k, int64_t batch,
                              const attn_varlen_opts *opts)
{
    if (!ctx || !q || !k || !v) return attn__null_input(__func__);
    attn_varlen_opts defaults = {0};
    if (!opts) opts = &defaults;
    if (batch < 1)
        return attn__fail_null(ATTN_ERR_ARG, "sdpa_varlen: batch = %lld; expected >= 1 sequence", (long long)batch);
    if (check_shapes(q, k, v, opts->enable_gqa) != ATTN_OK ||
        attn__cu_seqlens_check(cu_seqlens_q, batch, q->shape[0], "sdpa_varlen", "cu_seqlens_q", "q") != ATTN_OK ||
        attn__cu_seqlens_check(cu_seqlens_k, batch, k->shape[0], "sdpa_varlen", "cu_seqlens_k", "k and v") != ATTN_OK)
        return NULL;
    varlen_saved s = {.batch = batch, .heads = q->shape[1], .heads_kv = k->shape[1], .total_q = q->shape[0]};
    s.base = (sdpa_problem){.batch = 1, .heads = s.heads, .heads_kv = s.heads_kv, .d = q->shape[2], .dv = v->shape[2]};
    /* (total_q, H, 2) statistics and the (total, H, .) blocks: sizes checked, since a tensor with
     * D = 0 holds no elements whatever total and H say */
    int64_t n_stats, n_out;
    if (attn__shape_numel(3, (int64_t[]){s.total_q, s.heads, 2}, &n_stats, "sdpa_varlen (total_q, H, 2)") != ATTN_OK ||
        attn__shape_numel(3, (int64_t[]){s.total_q, s.heads, s.base.dv}, &n_out, "sdpa_varlen out") != ATTN_OK ||
        prepare(ctx, &s, opts, attn__needs_grad(ctx, (attn_tensor *[3]){q, k, v}, 3)) != ATTN_OK)
        return NULL;
    sdpa_problem *p = &s.base;
    p->threads = ctx->num_threads;
    p->bf16 = attn__bf16_attention(ctx);
    p->sums = attn__bf16_sums();
    p->scale = opts->scale > 0.0f ? opts->scale : 1.0f / sqrtf((float)(p->d ? p->d : 1));
    p->dropout_p = attn_ctx_training(ctx) ? opts->dropout_p : 0.0f;
    if (p->dropout_p > 0.0f) { /* two draws in a fixed order: high half first */
        const uint64_t hi = attn_rng_u32(&ctx->rng);
        p->dropout_seed = hi << 32 | attn_rng_u32(&ctx->rng);
    }
    int64_t weights_total;
    s.fused = opts->impl != ATTN_SDPA_REF;
    if (!copy_offsets(ctx, &s, cu_seqlens_q, cu_seqlens_k, !s.fused, &weights_total)) return NULL;
    const int threads = p->threads;
    const sdpa_problem largest = largest_problem(&s, threads);
    /* the kernels run a sequence on all threads from 10^6 multiply-adds on (sdpa_parallel) */
    const double largest_work =
        (double)largest.heads * (double)largest.lq * (double)largest.lk * (double)(largest.d + largest.dv);
    s.outer = threads > 1 && (batch >= 2 * (int64_t)threads || largest_work < 1e6);
    attn_tensor *out = attn_tensor_empty(ctx, 3, (int64_t[]){s.total_q, s.heads, p->dv});
    if (!out) return NULL;
    s.qb = attn__arena_alloc(&ctx->arena, (size_t)q->numel * sizeof(float) + 1);
    s.kb = attn__arena_alloc(&ctx->arena, (size_t)k->numel * sizeof(float) + 1);
    s.vb = attn__arena_alloc(&ctx->arena, (size_t)v->numel * sizeof(float) + 1);
    s.ob = attn__arena_calloc(&ctx->arena, (size_t)n_out * sizeof(float) + 1, threads);
    s.stats = attn__arena_alloc(&ctx->arena, (size_t)n_stats * sizeof(float) + 1);
    if (!s.qb || !s.kb || !s.vb || !s.ob || !s.stats) return NULL;
    if (!s.fused) { /* the reference path's P of every sequence, for its backward */
        if ((uint64_t)weights_total > SIZE_MAX / sizeof(float) - 1)
            return attn__fail_null(ATTN_ERR_NOMEM, "sdpa_varlen: the weights' %lld floats do not fit in memory",
                                   (long long)weights_total);
        if (!(s.weights = attn__arena_alloc(&ctx->arena, (size_t)weights_total * sizeof(float) + 1))) return NULL;
    }
    int64_t per_thread = 0; /* the reference forward takes none */
    float *scratch = s.fused ? scratch_alloc(ctx, &s, &per_thread, "sdpa_varlen") : NULL;
    if (s.fused && !scratch) return NULL;
    permute(s.qb, q->data, s.cu_q, batch, s.heads, p->d, true, false, threads);
    permute(s.kb, k->data, s.cu_k, batch, s.heads_kv, p->d, true, false, threads);
    permute(s.vb, v->data, s.cu_k, batch, s.heads_kv, p->dv, true, false, threads);
    each_sequence(&s, scratch, per_thread, threads, NULL, NULL, NULL, NULL);
    permute(out->data, s.ob, s.cu_q, batch, s.heads, p->dv, false, false, threads);
    attn_tensor *in[3] = {q, k, v};
    if (attn__needs_grad(ctx, in, 3)) {
        attn_node *node = attn__record(ctx, "sdpa_varlen", varlen_backward, out, in, 3, sizeof(varlen_saved));
        if (!node) return NULL;
        *(varlen_saved *)node->saved = s;
    }
    return out;
}
