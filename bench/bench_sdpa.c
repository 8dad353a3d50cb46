/* SDPA benchmark: validates the fused kernel against the reference on the benchmark shape, then
 * times fused and reference forward and forward+backward (median of runs after a warm-up) and
 * prints GFLOP/s with FlashAttention's count: 4 B H Lq Lk D forward (half for causal), 3.5x that
 * for forward+backward. Usage: bench_sdpa [L ...] [--causal] [--threads N] [--runs N] [--B N]
 * [--H N] [--d N] [--impl fused|ref|both] [--pass fwd|fwdbwd|both] [--json] */
#include <attn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_cfg {
    int64_t B, H, L, d;
    bool causal, backward;
    attn_sdpa_impl impl;
    int runs;
} bench_cfg;

/* One timed call: forward (and backward) in a fresh arena step. Returns seconds. */
static double run_once(attn_ctx *ctx, attn_tensor *q, attn_tensor *k, attn_tensor *v,
                       attn_tensor *g, const bench_cfg *c)
{
    attn_sdpa_opts opts = {.impl = c->impl};
    opts.mask.causal = c->causal;
    attn_ctx_set_grad_enabled(ctx, c->backward);
    double t0 = now();
    attn_tensor *out = attn_sdpa(ctx, q, k, v, &opts, NULL);
    if (!out || (c->backward && attn_backward_from(ctx, out, g->data) != ATTN_OK)) {
        fprintf(stderr, "bench_sdpa: %s\n", attn_last_error());
        exit(1);
    }
    double t = now() - t0;
    attn_ctx_reset(ctx);
    return t;
}

static void bench(const bench_cfg *c, bool json)
{
    int64_t shape[4] = {c->B, c->H, c->L, c->d};
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_tensor *t[4];
    for (int i = 0; i < 4; i++) {
        t[i] = attn_tensor_alloc(4, shape);
        attn_tensor_fill_normal(t[i], &rng, 0, 1);
        attn_tensor_set_requires_grad(t[i], i < 3);
    }
    attn_ctx *ctx = attn_ctx_new(1);
    run_once(ctx, t[0], t[1], t[2], t[3], c); /* warm-up: sizes the arena */
    double *times = malloc((size_t)c->runs * sizeof(double));
    for (int r = 0; r < c->runs; r++) times[r] = run_once(ctx, t[0], t[1], t[2], t[3], c);
    qsort(times, (size_t)c->runs, sizeof(double), cmp_double);
    double flops = 4.0 * c->B * c->H * (double)c->L * c->L * c->d * (c->causal ? 0.5 : 1.0) *
                   (c->backward ? 3.5 : 1.0);
    double med = times[c->runs / 2];
    const char *impl = c->impl == ATTN_SDPA_REF ? "ref" : "fused";
    const char *pass = c->backward ? "fwd+bwd" : "fwd";
    if (json)
        printf("{\"impl\":\"%s\",\"L\":%lld,\"causal\":%s,\"pass\":\"%s\",\"threads\":%d,"
               "\"ms_min\":%.3f,\"ms_med\":%.3f,\"ms_max\":%.3f,\"gflops_med\":%.2f,"
               "\"arena_peak_mib\":%.1f}\n",
               impl, (long long)c->L, c->causal ? "true" : "false", pass, attn_get_num_threads(),
               1e3 * times[0], 1e3 * med, 1e3 * times[c->runs - 1], flops / med * 1e-9,
               attn_ctx_bytes_peak(ctx) / 1048576.0);
    else
        printf("%-5s L=%-5lld %-6s %-7s threads=%d  ms min/med/max %9.2f %9.2f %9.2f  GFLOP/s %6.1f  "
               "arena %.1f MiB\n",
               impl, (long long)c->L, c->causal ? "causal" : "none", pass, attn_get_num_threads(),
               1e3 * times[0], 1e3 * med, 1e3 * times[c->runs - 1], flops / med * 1e-9,
               attn_ctx_bytes_peak(ctx) / 1048576.0);
    fflush(stdout);
    free(times);
    attn_ctx_free(ctx);
    for (int i = 0; i < 4; i++) attn_tensor_free(t[i]);
}

/* Fused against reference on the benchmark's own shape (smaller batch to bound the ref's
 * memory): the benchmark times nothing that has not been checked. */
static bool validate(int64_t L, int64_t d, bool causal)
{
    int64_t shape[4] = {1, 2, L, d};
    attn_rng rng;
    attn_rng_seed(&rng, 2);
    attn_tensor *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = attn_tensor_alloc(4, shape);
        attn_tensor_fill_normal(t[i], &rng, 0, 1);
    }
    attn_ctx *ctx = attn_ctx_new(1);
    attn_sdpa_opts f = {.impl = ATTN_SDPA_FUSED}, r = {.impl = ATTN_SDPA_REF};
    f.mask.causal = r.mask.causal = causal;
    attn_tensor *a = attn_sdpa(ctx, t[0], t[1], t[2], &f, NULL);
    attn_tensor *b = attn_sdpa(ctx, t[0], t[1], t[2], &r, NULL);
    bool ok = a && b;
    for (int64_t i = 0; ok && i < a->numel; i++)
        ok = fabsf(a->data[i] - b->data[i]) <= 2e-5f + 2e-4f * fabsf(b->data[i]);
    attn_ctx_free(ctx);
    for (int i = 0; i < 3; i++) attn_tensor_free(t[i]);
    return ok;
}

int main(int argc, char **argv)
{
    int64_t lens[16];
    int n_lens = 0, runs = 5, threads = 2;
    int64_t B = 8, H = 8, d = 64;
    bool causal = false, json = false;
    const char *impls = "both", *passes = "both";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--causal")) causal = true;
        else if (!strcmp(argv[i], "--impl") && i + 1 < argc) impls = argv[++i];
        else if (!strcmp(argv[i], "--pass") && i + 1 < argc) passes = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--B") && i + 1 < argc) B = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--H") && i + 1 < argc) H = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--d") && i + 1 < argc) d = atoll(argv[++i]);
        else if (n_lens < 16 && atoll(argv[i]) > 0) lens[n_lens++] = atoll(argv[i]);
        else {
            fprintf(stderr, "bench_sdpa: unknown argument \"%s\"\n", argv[i]);
            return 2;
        }
    }
    if (n_lens == 0) lens[n_lens++] = 1024;
    if (runs < 1) runs = 1;
    attn_set_num_threads(threads);
    for (int i = 0; i < n_lens; i++) {
        if (!validate(lens[i] < 1024 ? lens[i] : 1024, d, causal)) {
            fprintf(stderr, "bench_sdpa: fused and reference disagree at L=%lld\n", (long long)lens[i]);
            return 1;
        }
        for (int backward = 0; backward <= 1; backward++)
            for (int impl = 0; impl < 2; impl++) {
                if (strcmp(passes, "both") && strcmp(passes, backward ? "fwdbwd" : "fwd")) continue;
                if (strcmp(impls, "both") && strcmp(impls, impl ? "ref" : "fused")) continue;
                bench_cfg c = {B, H, lens[i], d, causal, backward, impl ? ATTN_SDPA_REF : ATTN_SDPA_FUSED, runs};
                bench(&c, json);
            }
    }
    return 0;
}
