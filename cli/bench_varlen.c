/* attn bench varlen: attention over B sequences of different lengths, packed end to end
 * (attn_sdpa_varlen) against the same sequences padded to the longest (attn_sdpa on (B, H, L, d)
 * with valid_lens): one row each. Sequence b has L (b + 1) / B tokens rounded up, from L / B to L
 * (a mean of about L / 2, as a batch of reviews padded to its longest); self-attention, so the
 * padded call's alignments are the packed ones'. The options of sdpa apply to both (--causal,
 * --kv-heads, --window, --alibi, --softcap, --impl, --mode). GFLOP/s counts the pairs of each
 * sequence on both rows (the padded row's padding is work done for nothing); tokens/s counts the
 * sequences' tokens. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct varlen_state {
    attn_ctx *ctx;
    attn_tensor *q, *k, *v, *g; /* packed (total, H, d) or padded (B, H, L, d) */
    int64_t *cu;                /* (B + 1) offsets */
    int64_t *lens;              /* (B) lengths */
    float *slopes;              /* (H) ALiBi's */
    int64_t batch;
    bool packed, backward;
    attn_varlen_opts vo;
    attn_sdpa_opts so;
} varlen_state;

static const char *const case_names[] = {"packed", "padded"};

static int64_t seq_len(const bench_args *a, int64_t b)
{
    return (a->L * (b + 1) + a->B - 1) / a->B;
}

static void options_of(varlen_state *s, const bench_args *a, attn_sdpa_impl impl, int64_t heads)
{
    const bool gqa = a->kv_heads > 0 && a->kv_heads != heads;
    s->vo = (attn_varlen_opts){.causal = a->causal, .enable_gqa = gqa, .impl = impl};
    s->so = (attn_sdpa_opts){.enable_gqa = gqa, .impl = impl};
    s->so.mask.causal = a->causal; /* top-left: bottom-right too, as every sequence's Lq = Lk */
    s->so.mask.valid_lens = (attn_lens){s->lens, 1, {a->B, 0}};
    cli_features_apply(&a->features, s->slopes, heads, &s->vo.features);
    s->so.features = s->vo.features;
}

/* The fused kernel against its reference twin on packed sequences of the workload's options: 3
 * sequences of up to min(L, 300) tokens, 2 heads (K and V with one under GQA), in float32 */
static int validate(const bench_args *a)
{
    const bool gqa = a->kv_heads > 0 && a->kv_heads != a->H;
    const int64_t L = a->L < 300 ? a->L : 300, cu[4] = {0, L, L + (L + 2) / 3, 2 * L + (L + 2) / 3}, total = cu[3];
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_tensor *t[3] = {bench_randn(&rng, 3, (int64_t[]){total, 2, a->d}, false),
                         bench_randn(&rng, 3, (int64_t[]){total, gqa ? 1 : 2, a->d}, false),
                         bench_randn(&rng, 3, (int64_t[]){total, gqa ? 1 : 2, a->d}, false)};
    attn_ctx *ctx = cli_ctx_new(0);
    float slopes[2];
    int64_t lens[3];
    varlen_state f = {.slopes = slopes, .lens = lens}, r = {.slopes = slopes, .lens = lens};
    bench_args two = *a;
    two.B = 3, two.kv_heads = gqa ? 1 : 0;
    options_of(&f, &two, ATTN_SDPA_FUSED, 2), options_of(&r, &two, ATTN_SDPA_REF, 2);
    bool ok = ctx && t[0] && t[1] && t[2] && attn_ctx_set_matmul_precision(ctx, ATTN_PRECISION_HIGHEST) == ATTN_OK;
    attn_tensor *x = ok ? attn_sdpa_varlen(ctx, t[0], t[1], t[2], cu, cu, 3, &f.vo) : NULL;
    attn_tensor *y = ok ? attn_sdpa_varlen(ctx, t[0], t[1], t[2], cu, cu, 3, &r.vo) : NULL;
    ok = x && y;
    for (int64_t i = 0; ok && i < x->numel; i++)
        ok = fabsf(x->data[i] - y->data[i]) <= 2e-5f + 2e-4f * fabsf(y->data[i]);
    attn_ctx_free(ctx);
    for (int i = 0; i < 3; i++) attn_tensor_free(t[i]);
    return ok ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "varlen: the fused kernel disagrees with the reference");
}

static int varlen_setup(const bench_args *a, void **state, bench_result *r)
{
    int code = a->bench_case == 0 ? validate(a) : CLI_OK;
    if (code != CLI_OK) return code;
    r->bf16 = r->bf16 && attn_bf16_attention(); /* the attention's own tiles alone */
    varlen_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    s->packed = a->bench_case == 0, s->backward = a->mode == 1, s->batch = a->B;
    s->cu = malloc(sizeof(int64_t) * (size_t)(a->B + 1)), s->lens = malloc(sizeof(int64_t) * (size_t)a->B);
    s->slopes = malloc(sizeof(float) * (size_t)a->H);
    s->ctx = r->ctx = cli_ctx_new(0);
    if (!s->cu || !s->lens || !s->slopes || !s->ctx) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    double pairs = 0.0;
    s->cu[0] = 0;
    for (int64_t b = 0; b < a->B; b++) {
        s->lens[b] = seq_len(a, b);
        s->cu[b + 1] = s->cu[b] + s->lens[b];
        pairs += cli_features_pairs(&a->features, a->causal, s->lens[b], s->lens[b]); /* the kernels' work */
    }
    options_of(s, a, (attn_sdpa_impl)a->impl, a->H);
    const int64_t kv = a->kv_heads ? a->kv_heads : a->H, total = s->cu[a->B];
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    const int64_t q_shape[4] = {total, a->H, a->d}, kv_shape[4] = {total, kv, a->d};
    const int64_t pq_shape[4] = {a->B, a->H, a->L, a->d}, pkv_shape[4] = {a->B, kv, a->L, a->d};
    const int nd = s->packed ? 3 : 4;
    s->q = bench_randn(&rng, nd, s->packed ? q_shape : pq_shape, s->backward);
    s->k = bench_randn(&rng, nd, s->packed ? kv_shape : pkv_shape, s->backward);
    s->v = bench_randn(&rng, nd, s->packed ? kv_shape : pkv_shape, s->backward);
    s->g = bench_randn(&rng, nd, s->packed ? q_shape : pq_shape, false);
    r->flop = 4.0 * a->H * pairs * a->d * (s->backward ? 3.5 : 1.0);
    r->items = (double)total, r->unit = "tokens/s";
    return s->q && s->k && s->v && s->g ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
}

static int varlen_run(void *p)
{
    varlen_state *s = p;
    attn_ctx_reset(s->ctx);
    attn_ctx_set_grad_enabled(s->ctx, s->backward);
    attn_tensor *out = s->packed ? attn_sdpa_varlen(s->ctx, s->q, s->k, s->v, s->cu, s->cu, s->batch, &s->vo)
                                 : attn_sdpa(s->ctx, s->q, s->k, s->v, &s->so, NULL);
    if (!out || (s->backward && attn_backward_from(s->ctx, out, s->g->data) != ATTN_OK))
        return cli_fail(CLI_ERR_DATA, "bench", "varlen %s: %s", case_names[!s->packed], attn_last_error());
    return CLI_OK;
}

static void varlen_teardown(void *p)
{
    varlen_state *s = p;
    if (!s) return;
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->q), attn_tensor_free(s->k), attn_tensor_free(s->v), attn_tensor_free(s->g);
    free(s->cu), free(s->lens), free(s->slopes);
    free(s);
}

static void varlen_print(const bench_args *a, void *state, const bench_result *r)
{
    const varlen_state *s = state;
    const char *mode = bench_mode_names[a->mode], *layout = case_names[!s->packed];
    if (a->json) {
        printf("{\"workload\":\"varlen\",\"layout\":\"%s\",\"mode\":\"%s\",\"impl\":\"%s\",\"causal\":%s,\"B\":%ld,"
               "\"H\":%ld,\"L\":%ld,\"d\":%ld,\"tokens\":%lld,\"kv_heads\":%ld,",
               layout, mode, a->impl == ATTN_SDPA_REF ? "ref" : "fused", a->causal ? "true" : "false", a->B, a->H, a->L,
               a->d, (long long)s->cu[a->B], a->kv_heads ? a->kv_heads : a->H);
        cli_features_json(&a->features);
        printf(",\"threads\":%d,\"isa\":\"%s\",\"precision\":\"%s\",\"t_min\":%.6f,\"t_med\":%.6f,\"t_max\":%.6f,"
               "\"gflops_med\":%.2f,\"items_per_s_med\":%.2f,\"unit\":\"%s\",\"arena_peak_mib\":%.1f}\n",
               cli_threads(), attn_isa_name(r->isa), cli_matmul_precision_text(), r->t_min, r->t_med, r->t_max,
               r->flop / r->t_med * 1e-9, r->items / r->t_med, r->unit, r->peak_bytes / 1048576.0);
        return;
    }
    printf("%-10s %-7s %-6s L=%-5ld B=%-3ld %s threads=%d %-11s %-7s  ms min/med/max %9.2f %9.2f %9.2f  GFLOP/s %6.1f"
           "  %.1f %s  arena %.1f MiB",
           "varlen", mode, layout, a->L, a->B, a->causal ? "causal" : "      ", cli_threads(), attn_isa_name(r->isa),
           r->bf16 ? "bf16" : "float32", 1e3 * r->t_min, 1e3 * r->t_med, 1e3 * r->t_max, r->flop / r->t_med * 1e-9,
           r->items / r->t_med, r->unit, r->peak_bytes / 1048576.0);
    if (a->kv_heads && a->kv_heads != a->H) printf("  kv-heads %ld", a->kv_heads);
    cli_features_print(&a->features);
    printf("\n");
}

const bench_workload bench_varlen = {"varlen", NULL, 2, varlen_setup, varlen_run, varlen_teardown, varlen_print};
