/* The Transformer layers' fused ops, measured in one process: a training step (forward and
 * backward from a fixed random output gradient) of a torch-default encoder layer (post-LN, dropout
 * 0.1 inside the FFN and on both residuals) run as the library runs it (attn_encoder_layer_forward:
 * the packed q/k/v projection, whose weight gradient is one GEMM; the FFN's linear, activation and
 * dropout in one pass; each residual's dropout and add in one) and as the same layer written from
 * public ops as it ran before them (attention with key and value passed as views of x, so that
 * each gets its own projection; attn_linear, attn_relu or attn_gelu, attn_dropout, attn_add), in
 * turns. Both draw the same dropout masks, so the outputs must be equal and the gradients equal but
 * for reordered sums (the packed weight's, x's); the program checks that before timing (exit 1 if
 * the outputs differ, or a parameter's or x's gradient by more than 1e-4 of that tensor's largest).
 * Prints one JSON line: the medians of each, chain / fused and the largest relative gap.
 *   bench_fusion [--B 8] [--L 256] [--E 512] [--ffn 2048] [--gelu] [--threads 2] [--rounds 15] */
#include <attn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    long B, L, E, ffn, threads, rounds;
    bool gelu;
} options;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int parse(options *o, int argc, char **argv)
{
    *o = (options){.B = 8, .L = 256, .E = 512, .ffn = 2048, .threads = 2, .rounds = 15};
    static const char *names[] = {"--B", "--L", "--E", "--ffn", "--threads", "--rounds"};
    long *vals[] = {&o->B, &o->L, &o->E, &o->ffn, &o->threads, &o->rounds};
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i];
        bool known = !strcmp(opt, "--gelu");
        if (known) o->gelu = true;
        for (int k = 0; k < 6 && !known; k++)
            if (!strcmp(opt, names[k]) && i + 1 < argc) {
                char *end;
                *vals[k] = strtol(argv[++i], &end, 10);
                known = *end == '\0' && *vals[k] >= 1 && *vals[k] <= 1 << 20;
            }
        if (!known) {
            fprintf(stderr,
                    "bench_fusion: %s: unknown option, or its value is missing or not in [1, 2^20] "
                    "(see the comment at the top of bench/bench_fusion.c)\n",
                    opt);
            return 2;
        }
    }
    if (o->E % 8) {
        fprintf(stderr, "bench_fusion: --E must be a multiple of 8 (8 heads)\n");
        return 2;
    }
    return 0;
}

/* post-LN encoder layer from public ops, the draws in attn_encoder_layer_forward's order */
static attn_tensor *layer_chain(attn_ctx *ctx, const attn_encoder_layer *m, attn_tensor *x)
{
    const float p = m->cfg.dropout;
    attn_mha_opts opts = {.average_weights = false};
    attn_tensor *k = attn_reshape(ctx, x, x->ndim, x->shape), *v = attn_reshape(ctx, x, x->ndim, x->shape);
    attn_tensor *a = attn_mha_forward(ctx, &m->self_attn, x, k, v, &opts, NULL);
    x = attn_layer_norm_forward(ctx, &m->norm1, attn_add(ctx, x, attn_dropout(ctx, a, p)));
    attn_tensor *h = attn_linear(ctx, x, m->linear1.weight, m->linear1.bias);
    h = attn_dropout(ctx, m->cfg.gelu ? attn_gelu(ctx, h) : attn_relu(ctx, h), p);
    h = attn_linear(ctx, h, m->linear2.weight, m->linear2.bias);
    return attn_layer_norm_forward(ctx, &m->norm2, attn_add(ctx, x, attn_dropout(ctx, h, p)));
}

/* One training step (params' grads zeroed first); its output copied to out when out != NULL. */
static double step(attn_ctx *ctx, attn_params *params, const attn_encoder_layer *m, attn_tensor *x, const float *dout,
                   bool fused, float *out)
{
    attn_ctx_reset(ctx);
    attn_rng_seed(attn_ctx_rng(ctx), 7);
    attn_params_zero_grad(params);
    double t0 = now_s();
    attn_tensor *y = fused ? attn_encoder_layer_forward(ctx, m, x, NULL, NULL) : layer_chain(ctx, m, x);
    if (!y || attn_backward_from(ctx, y, dout) != ATTN_OK) return -1.0;
    double t = now_s() - t0;
    if (out) memcpy(out, y->data, (size_t)y->numel * sizeof *out);
    return t;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The largest difference between the two sides' gradients of t (side 0 saved in g0 before side 1
 * ran) relative to t's largest gradient, and the worst tensor so far in *worst */
static double grad_gap(const attn_tensor *t, const float *g0, double gap, const char *name, const char **worst)
{
    double big = 0.0, diff = 0.0;
    for (int64_t i = 0; i < t->numel; i++) {
        const double g1 = t->grad ? t->grad[i] : 0.0;
        big = fmax(big, fabs(g0[i]));
        diff = fmax(diff, fabs(g0[i] - g1));
    }
    const double rel = diff / fmax(big, 1e-30);
    if (rel > gap) *worst = name;
    return rel > gap ? rel : gap;
}

/* Every gradient (the params', then x's) concatenated into g (NULL: the count) */
static size_t grads(attn_params *params, const attn_tensor *x, float *g)
{
    size_t n = 0;
    for (size_t i = 0; i <= attn_params_count(params); i++) {
        const attn_tensor *t = i < attn_params_count(params) ? attn_params_at(params, i) : x;
        if (g && t->grad)
            memcpy(g + n, t->grad, (size_t)t->numel * sizeof *g);
        else if (g)
            memset(g + n, 0, (size_t)t->numel * sizeof *g);
        n += (size_t)t->numel;
    }
    return n;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse(&o, argc, argv);
    if (rc) return rc;
    attn_ctx *ctx = attn_ctx_new(1);
    attn_params *params = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_encoder_layer m;
    attn_transformer_config tc = {.d_model = o.E,
                                  .num_heads = 8,
                                  .dim_feedforward = o.ffn,
                                  .dropout = 0.1f,
                                  .ffn_dropout = true,
                                  .gelu = o.gelu,
                                  .eps = 1e-5f};
    attn_tensor *x = attn_tensor_alloc(3, (int64_t[]){o.B, o.L, o.E});
    const size_t n_out = (size_t)(o.B * o.L * o.E);
    float *dout = malloc(n_out * sizeof *dout);
    float *out[2] = {malloc(n_out * sizeof(float)), malloc(n_out * sizeof(float))};
    double *t[2] = {malloc((size_t)o.rounds * sizeof(double)), malloc((size_t)o.rounds * sizeof(double))};
    if (!ctx || !params || !x || !dout || !out[0] || !out[1] || !t[0] || !t[1] ||
        attn_encoder_layer_init(&m, params, "", &tc, &rng) != ATTN_OK ||
        attn_ctx_set_num_threads(ctx, (int)o.threads) != ATTN_OK) {
        fprintf(stderr, "bench_fusion: setup: %s\n", attn_last_error());
        return 1;
    }
    attn_ctx_set_training(ctx, true);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = attn_rng_normal(&rng);
    attn_tensor_set_requires_grad(x, true); /* dX too: the packed projection's is summed otherwise */
    for (size_t i = 0; i < n_out; i++) dout[i] = attn_rng_normal(&rng);

    /* the same computation: outputs equal, every gradient (each parameter's and x's) but for
     * reordered sums, within 1e-4 of that tensor's largest (NaN never appears here) */
    float *g0 = malloc(grads(params, x, NULL) * sizeof(float));
    double gap = 0.0;
    const char *worst = "none";
    for (int fused = 0; fused < 2; fused++) {
        attn_tensor_zero_grad(x);
        if (!g0 || step(ctx, params, &m, x, dout, fused, out[fused]) < 0) {
            fprintf(stderr, "bench_fusion: step: %s\n", attn_last_error());
            return 1;
        }
        if (!fused) grads(params, x, g0);
    }
    size_t bad_out = 0, off = 0;
    for (size_t i = 0; i < n_out; i++) bad_out += out[0][i] != out[1][i];
    for (size_t i = 0; i <= attn_params_count(params); i++) {
        const bool is_x = i == attn_params_count(params);
        const attn_tensor *t = is_x ? x : attn_params_at(params, i);
        gap = grad_gap(t, g0 + off, gap, is_x ? "x" : attn_params_name(params, i), &worst);
        off += (size_t)t->numel;
    }
    if (bad_out || !(gap <= 1e-4)) {
        fprintf(stderr,
                "bench_fusion: fused and chained differ in %zu of %zu outputs; gradients by up to %g of "
                "their tensor's largest (%s)\n",
                bad_out, n_out, gap, worst);
        return 1;
    }

    for (long r = 0; r < o.rounds; r++)
        for (int fused = 1; fused >= 0; fused--) t[fused][r] = step(ctx, params, &m, x, dout, fused, NULL);
    const double fused_s = median(t[1], o.rounds), chain_s = median(t[0], o.rounds);
    printf("{\"bench\":\"fusion\",\"B\":%ld,\"L\":%ld,\"E\":%ld,\"ffn\":%ld,\"act\":\"%s\",\"threads\":%ld,"
           "\"rounds\":%ld,\"fused_ms\":%.2f,\"chain_ms\":%.2f,\"speedup\":%.3f,\"outputs_equal\":true,"
           "\"grad_rel_gap\":%.3g,\"grad_gap_tensor\":\"%s\"}\n",
           o.B, o.L, o.E, o.ffn, o.gelu ? "gelu" : "relu", o.threads, o.rounds, 1e3 * fused_s, 1e3 * chain_s,
           chain_s / fused_s, gap, worst);
    for (int i = 0; i < 2; i++) free(out[i]), free(t[i]);
    free(g0);
    free(dout);
    attn_tensor_free(x);
    attn_params_free(params);
    attn_ctx_free(ctx);
    return 0;
}
