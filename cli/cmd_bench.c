/* attn bench: validates each benchmarked kernel against its reference twin, then times it
 * (median of runs after a warm-up) and prints ms, GFLOP/s and the arena's peak memory.
 * Workloads mirror ../shared/bench/bench_torch.py so bench/compare_torch.sh can put both sides
 * in one table: peak (bench_peak.c: the float32 ceiling), sdpa, sgemm (the
 * QK^T shape), mha (train), encoder (train step with Adam), classifier (train step); and gemm:
 * the GEMM library of this build on the models' own linear-layer shapes, forward and both
 * backward products (bench/compare_gemm.sh puts the builds of each library side by side). */
#include "bench_peak.h"
#include "options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct bench_args {
    const char *workload;
    long L, B, H, d, runs, warmup, threads;
    bool causal, json;
    int mode;      /* index into mode_names */
    int impl;      /* an attn_sdpa_impl */
    int gemm_case; /* gemm: index into gemm_cases */
} bench_args;

static const char *const mode_names[] = {"fwd", "fwdbwd", NULL};

typedef struct bench_result {
    double t_min, t_med, t_max; /* seconds */
    double flop;                /* per run */
    double items;               /* samples or tokens per run, 0 when not meaningful */
    const char *unit;
    size_t peak_bytes;          /* arena peak */
} bench_result;

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A workload: one timed call; `state` holds what it set up. */
typedef struct workload {
    const char *name;
    int (*setup)(const bench_args *a, void **state, bench_result *r);
    int (*run)(void *state);
    void (*teardown)(void *state);
} workload;

static attn_tensor *randn(attn_rng *rng, int ndim, const int64_t *shape, bool grad)
{
    attn_tensor *t = attn_tensor_alloc(ndim, shape);
    if (t) {
        attn_tensor_fill_normal(t, rng, 0, 1);
        attn_tensor_set_requires_grad(t, grad);
    }
    return t;
}

/* ---- sdpa ---- */

typedef struct sdpa_state {
    attn_ctx *ctx;
    attn_tensor *q, *k, *v, *g;
    attn_sdpa_opts opts;
    bool backward;
} sdpa_state;

static int sdpa_run(void *p)
{
    sdpa_state *s = p;
    attn_ctx_reset(s->ctx);
    attn_ctx_set_grad_enabled(s->ctx, s->backward);
    attn_tensor *out = attn_sdpa(s->ctx, s->q, s->k, s->v, &s->opts, NULL);
    if (!out || (s->backward && attn_backward_from(s->ctx, out, s->g->data) != ATTN_OK))
        return cli_fail(CLI_ERR_DATA, "bench", "sdpa: %s", attn_last_error());
    return CLI_OK;
}

/* The fused kernel against the reference on a (1, 2, min(L, 512), d) slice of the shape. */
static int sdpa_validate(const bench_args *a)
{
    int64_t L = a->L < 512 ? a->L : 512, shape[4] = {1, 2, L, a->d};
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_tensor *t[3] = {randn(&rng, 4, shape, false), randn(&rng, 4, shape, false), randn(&rng, 4, shape, false)};
    attn_ctx *ctx = cli_ctx_new(0);
    attn_sdpa_opts f = {.impl = ATTN_SDPA_FUSED}, r = {.impl = ATTN_SDPA_REF};
    f.mask.causal = r.mask.causal = a->causal;
    attn_tensor *x = ctx ? attn_sdpa(ctx, t[0], t[1], t[2], &f, NULL) : NULL;
    attn_tensor *y = ctx ? attn_sdpa(ctx, t[0], t[1], t[2], &r, NULL) : NULL;
    bool ok = x && y;
    for (int64_t i = 0; ok && i < x->numel; i++) ok = fabsf(x->data[i] - y->data[i]) <= 2e-5f + 2e-4f * fabsf(y->data[i]);
    attn_ctx_free(ctx);
    for (int i = 0; i < 3; i++) attn_tensor_free(t[i]);
    return ok ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "sdpa: the fused kernel disagrees with the reference");
}

static int sdpa_setup(const bench_args *a, void **state, bench_result *r)
{
    int code = sdpa_validate(a);
    if (code != CLI_OK) return code;
    sdpa_state *s = calloc(1, sizeof *s);
    int64_t shape[4] = {a->B, a->H, a->L, a->d};
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    s->ctx = cli_ctx_new(0);
    s->backward = a->mode == 1;
    s->q = randn(&rng, 4, shape, s->backward), s->k = randn(&rng, 4, shape, s->backward);
    s->v = randn(&rng, 4, shape, s->backward), s->g = randn(&rng, 4, shape, false);
    s->opts.impl = (attn_sdpa_impl)a->impl;
    s->opts.mask.causal = a->causal;
    *state = s;
    r->flop = 4.0 * a->B * a->H * (double)a->L * a->L * a->d * (a->causal ? 0.5 : 1.0) * (s->backward ? 3.5 : 1.0);
    return s->ctx && s->q && s->k && s->v && s->g ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
}

static void sdpa_teardown(void *p)
{
    sdpa_state *s = p;
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->q), attn_tensor_free(s->k), attn_tensor_free(s->v), attn_tensor_free(s->g);
    free(s);
}

/* ---- peak: the FMA loop of bench_peak.c on every thread ---- */

static int peak_run(void *p)
{
    const int threads = *(int *)p;
    return bench_peak_fma(threads) ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "peak: cannot start %d threads", threads);
}

static int peak_setup(const bench_args *a, void **state, bench_result *r)
{
    (void)a;
    int *threads = malloc(sizeof *threads);
    if (!threads) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    *threads = cli_threads() < BENCH_PEAK_MAX_THREADS ? cli_threads() : BENCH_PEAK_MAX_THREADS;
    *state = threads;
    r->flop = bench_peak_flop_per_thread() * *threads;
    return CLI_OK;
}

static void peak_teardown(void *p) { free(p); }

/* ---- sgemm on the QK^T shape: (L, d) @ (L, d)^T, B*H times ---- */

typedef struct gemm_state {
    attn_ctx *ctx;
    attn_tensor *q, *k;
} gemm_state;

static int gemm_run(void *p)
{
    gemm_state *s = p;
    attn_ctx_reset(s->ctx);
    return attn_matmul(s->ctx, s->q, s->k, false, true) ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "%s", attn_last_error());
}

static int gemm_setup(const bench_args *a, void **state, bench_result *r)
{
    gemm_state *s = calloc(1, sizeof *s);
    int64_t shape[3] = {a->B * a->H, a->L, a->d};
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    s->ctx = cli_ctx_new(0);
    attn_ctx_set_grad_enabled(s->ctx, false);
    s->q = randn(&rng, 3, shape, false), s->k = randn(&rng, 3, shape, false);
    *state = s;
    r->flop = 2.0 * a->B * a->H * (double)a->L * a->L * a->d;
    return s->ctx && s->q && s->k ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
}

static void gemm_teardown(void *p)
{
    gemm_state *s = p;
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->q), attn_tensor_free(s->k);
    free(s);
}

/* ---- gemm: the linear layers of the models, Y (R, out) = X (R, in) W^T and its backward ---- */

typedef struct gemm_shape {
    const char *layer;
    int64_t rows, out, in;
} gemm_shape;

/* The translator (attn translate train: d 256, FFN 512, 64 sentence pairs ~ 1024 target tokens,
 * 6434 French words), the classifier (batch 32 x 512 tokens, E 128) and the encoder workload
 * (B 8 x L 256, d 512, FFN 2048). */
static const gemm_shape gemm_shapes[] = {
    {"translator-proj", 1024, 256, 256},      {"translator-ffn1", 1024, 512, 256},
    {"translator-ffn2", 1024, 256, 512},      {"translator-generator", 1024, 6434, 256},
    {"classifier-proj", 16384, 128, 128},     {"encoder-proj", 2048, 512, 512},
    {"encoder-ffn1", 2048, 2048, 512},        {"encoder-ffn2", 2048, 512, 2048},
};
enum { GEMM_OPS = 3 }; /* forward Y = X W^T, dX = dY W, dW = dY^T X */
static const char *const gemm_ops[GEMM_OPS] = {"fwd", "bwd-data", "bwd-weight"};
#define GEMM_CASES ((int)(sizeof gemm_shapes / sizeof gemm_shapes[0]) * GEMM_OPS)

typedef struct gemm_prod_state {
    attn_ctx *ctx;
    attn_tensor *a, *b; /* op(A) (M, K) and op(B) (K, N) as the layer's product reads them */
    bool trans_a, trans_b;
    int64_t m, n, k;
} gemm_prod_state;

static int gemm_prod_run(void *p)
{
    gemm_prod_state *s = p;
    attn_ctx_reset(s->ctx);
    return attn_matmul(s->ctx, s->a, s->b, s->trans_a, s->trans_b) ? CLI_OK
                                                                    : cli_fail(CLI_ERR_DATA, "bench", "%s", attn_last_error());
}

/* 64 entries of C against double sums: |C - ref| <= 1e-5 sum |a b| */
static int gemm_prod_validate(gemm_prod_state *s)
{
    attn_ctx_reset(s->ctx);
    attn_tensor *c = attn_matmul(s->ctx, s->a, s->b, s->trans_a, s->trans_b);
    if (!c) return cli_fail(CLI_ERR_DATA, "bench", "%s", attn_last_error());
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    for (int t = 0; t < 64; t++) {
        int64_t i = attn_rng_below(&rng, (uint32_t)s->m), j = attn_rng_below(&rng, (uint32_t)s->n);
        double acc = 0.0, mag = 0.0;
        for (int64_t p = 0; p < s->k; p++) {
            double av = s->trans_a ? s->a->data[p * s->m + i] : s->a->data[i * s->k + p];
            double bv = s->trans_b ? s->b->data[j * s->k + p] : s->b->data[p * s->n + j];
            acc += av * bv, mag += fabs(av * bv);
        }
        if (!(fabs(c->data[i * s->n + j] - acc) <= 1e-5 * mag))
            return cli_fail(CLI_ERR_DATA, "bench", "gemm: C[%lld][%lld] = %g, expected %g", (long long)i,
                            (long long)j, (double)c->data[i * s->n + j], acc);
    }
    return CLI_OK;
}

static int gemm_prod_setup(const bench_args *a, void **state, bench_result *r)
{
    const gemm_shape *g = &gemm_shapes[a->gemm_case / GEMM_OPS];
    const int op = a->gemm_case % GEMM_OPS;
    gemm_prod_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    s->ctx = attn_ctx_new(0);
    if (s->ctx) attn_ctx_set_grad_enabled(s->ctx, false);
    /* forward: X (R, in) W (out, in)^T;  dX = dY (R, out) W (out, in);  dW = dY (R, out)^T X (R, in) */
    const int64_t a_shape[3][2] = {{g->rows, g->in}, {g->rows, g->out}, {g->rows, g->out}};
    const int64_t b_shape[3][2] = {{g->out, g->in}, {g->out, g->in}, {g->rows, g->in}};
    const int64_t mnk[3][3] = {{g->rows, g->out, g->in}, {g->rows, g->in, g->out}, {g->out, g->in, g->rows}};
    s->trans_a = op == 2, s->trans_b = op == 0;
    s->m = mnk[op][0], s->n = mnk[op][1], s->k = mnk[op][2];
    s->a = randn(&rng, 2, a_shape[op], false), s->b = randn(&rng, 2, b_shape[op], false);
    r->flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    if (!s->ctx || !s->a || !s->b) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    return gemm_prod_validate(s);
}

static void gemm_prod_teardown(void *p)
{
    gemm_prod_state *s = p;
    if (!s) return;
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->a), attn_tensor_free(s->b);
    free(s);
}

/* ---- modules: mha (train), encoder layer (train step), classifier (train step) ---- */

typedef struct module_state {
    const bench_args *a;
    attn_ctx *ctx;
    attn_params *params;
    attn_optim *opt;
    attn_mha_layer mha;
    attn_encoder_layer enc;
    attn_classifier cls;
    attn_tensor *x, *target;
    int64_t *ids, *lengths, *labels;
} module_state;

static int mha_run(void *p)
{
    module_state *s = p;
    attn_ctx_reset(s->ctx);
    attn_mha_opts o = {.impl = (attn_sdpa_impl)s->a->impl};
    attn_tensor *out = attn_mha_forward(s->ctx, &s->mha, s->x, s->x, s->x, &o, NULL);
    if (!out || attn_backward(s->ctx, attn_sum_all(s->ctx, out)) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "bench", "mha: %s", attn_last_error());
    return CLI_OK;
}

static int encoder_run(void *p)
{
    module_state *s = p;
    attn_ctx_reset(s->ctx);
    attn_params_zero_grad(s->params);
    attn_tensor *out = attn_encoder_layer_forward(s->ctx, &s->enc, s->x, NULL, NULL);
    attn_tensor *loss = attn_mse_loss(s->ctx, out, s->target);
    if (!loss || attn_backward(s->ctx, loss) != ATTN_OK || attn_optim_step(s->opt) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "bench", "encoder: %s", attn_last_error());
    return CLI_OK;
}

static int classifier_run(void *p)
{
    module_state *s = p;
    attn_ctx_reset(s->ctx);
    attn_params_zero_grad(s->params);
    attn_tensor *logits = attn_classifier_forward(s->ctx, &s->cls, s->ids, s->lengths, s->a->B, s->a->L, NULL);
    attn_tensor *loss = attn_cross_entropy(s->ctx, logits, s->labels, -100, 0.0f);
    if (!loss || attn_backward(s->ctx, loss) != ATTN_OK || attn_optim_step(s->opt) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "bench", "classifier: %s", attn_last_error());
    return CLI_OK;
}

/* flops of one self-attention layer's forward (projections, QK^T, PV) as bench_torch.py counts */
static double mha_flop(double B, double L, double E) { return B * (8.0 * L * E * E + 4.0 * L * L * E); }

static int module_setup(const bench_args *a, void **state, bench_result *r)
{
    module_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    s->a = a;
    s->ctx = cli_ctx_new(0);
    s->params = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_status st = s->ctx && s->params ? ATTN_OK : ATTN_ERR_NOMEM;
    const int64_t B = a->B, L = a->L;
    if (!strcmp(a->workload, "mha")) {
        const int64_t E = 512;
        if (st == ATTN_OK) st = attn_mha_init(&s->mha, s->params, "", E, 8, 0, 0, true, 0.0f, &rng);
        s->x = randn(&rng, 3, (int64_t[]){B, L, E}, true);
        r->flop = 3.0 * mha_flop((double)B, (double)L, (double)E);
        r->items = (double)(B * L), r->unit = "tokens/s";
    } else if (!strcmp(a->workload, "encoder")) {
        const int64_t E = 512;
        attn_transformer_config tc = {.d_model = E, .num_heads = 8, .dim_feedforward = 2048, .dropout = 0.1f, .ffn_dropout = true};
        if (st == ATTN_OK) st = attn_encoder_layer_init(&s->enc, s->params, "", &tc, &rng);
        s->x = randn(&rng, 3, (int64_t[]){B, L, E}, false);
        s->target = randn(&rng, 3, (int64_t[]){B, L, E}, false);
        r->flop = 3.0 * (mha_flop((double)B, (double)L, (double)E) + 4.0 * B * L * E * 2048.0);
        r->items = (double)(B * L), r->unit = "tokens/s";
    } else {
        attn_classifier_config cc = attn_classifier_defaults(20000);
        cc.max_len = L;
        cc.dropout = 0.1f;
        if (st == ATTN_OK) st = attn_classifier_init(&s->cls, s->params, &cc, &rng);
        s->ids = malloc((size_t)(B * L) * sizeof *s->ids);
        s->lengths = malloc((size_t)B * sizeof *s->lengths);
        s->labels = malloc((size_t)B * sizeof *s->labels);
        if (s->ids && s->lengths && s->labels) {
            for (int64_t i = 0; i < B * L; i++) s->ids[i] = attn_rng_below(&rng, 20000);
            for (int64_t b = 0; b < B; b++) s->lengths[b] = L, s->labels[b] = b % 2;
        }
        const double E = 128;
        r->flop = 3.0 * (mha_flop((double)B, (double)L, E) + 2.0 * B * (E * 256 + 256 * 2));
        r->items = (double)B, r->unit = "samples/s";
    }
    if (st == ATTN_OK && strcmp(a->workload, "mha")) {
        attn_optim_config oc = attn_optim_defaults(ATTN_OPTIM_ADAM);
        if (!(s->opt = cli_optim_new(s->params, &oc))) st = attn_last_status();
    }
    bool inputs = !strcmp(a->workload, "classifier") ? s->ids && s->lengths && s->labels
                  : !strcmp(a->workload, "encoder")  ? s->x && s->target
                                                     : s->x != NULL;
    if (st != ATTN_OK || !inputs)
        return cli_fail(CLI_ERR_DATA, "bench", "%s: %s", a->workload, attn_last_error());
    return CLI_OK;
}

static void module_teardown(void *p)
{
    module_state *s = p;
    if (!s) return;
    if (s->a && !strcmp(s->a->workload, "classifier")) attn_classifier_free(&s->cls);
    attn_optim_free(s->opt);
    attn_params_free(s->params);
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->x), attn_tensor_free(s->target);
    free(s->ids), free(s->lengths), free(s->labels);
    free(s);
}

static const workload workloads[] = {
    {"peak", peak_setup, peak_run, peak_teardown},
    {"sdpa", sdpa_setup, sdpa_run, sdpa_teardown},
    {"sgemm", gemm_setup, gemm_run, gemm_teardown},
    {"gemm", gemm_prod_setup, gemm_prod_run, gemm_prod_teardown},
    {"mha", module_setup, mha_run, module_teardown},
    {"encoder", module_setup, encoder_run, module_teardown},
    {"classifier", module_setup, classifier_run, module_teardown},
};

static size_t arena_peak(const workload *w, void *state)
{
    if (w->run == peak_run) return 0;
    if (w->run == sdpa_run) return attn_ctx_bytes_peak(((sdpa_state *)state)->ctx);
    if (w->run == gemm_run) return attn_ctx_bytes_peak(((gemm_state *)state)->ctx);
    if (w->run == gemm_prod_run) return attn_ctx_bytes_peak(((gemm_prod_state *)state)->ctx);
    return attn_ctx_bytes_peak(((module_state *)state)->ctx);
}

static const char *const impl_names[] = {"auto", "fused", "ref", NULL}; /* attn_sdpa_impl order */

#define O(field) offsetof(bench_args, field)
static const cli_option options[] = {
    {"--L", "N", CLI_LONG, O(L), 1, 65536, NULL, NULL, "sequence length (sdpa, sgemm: 1024; mha, classifier: 512; encoder: 256)"},
    {"--B", "N", CLI_LONG, O(B), 1, 4096, NULL, NULL, "batch (classifier: 32, the others: 8)"},
    {"--H", "N", CLI_LONG, O(H), 1, 256, NULL, NULL, "heads (default 8)"},
    {"--d", "N", CLI_LONG, O(d), 1, 4096, NULL, NULL, "head width (default 64)"},
    {"--mode", NULL, CLI_CHOICE, O(mode), 0, 0, mode_names, "fwd", "sdpa: forward, or forward and backward"},
    {"--causal", NULL, CLI_FLAG, O(causal), 0, 0, NULL, NULL, "sdpa: a causal mask"},
    {"--impl", NULL, CLI_CHOICE, O(impl), 0, 0, impl_names, "auto", "sdpa: the kernel"},
    {"--runs", "N", CLI_LONG, O(runs), 1, 1000, NULL, "5", "timed runs (the median is reported)"},
    {"--warmup", "N", CLI_LONG, O(warmup), 0, 100, NULL, "1", "untimed runs first"},
    {"--threads", "N", CLI_LONG, O(threads), 1, 1024, NULL, NULL, "threads (default: all cores)"},
    {"--json", NULL, CLI_FLAG, O(json), 0, 0, NULL, NULL, "one JSON line per result (bench/compare_*.sh read them)"},
};
#undef O

const cli_spec bench_spec = {
    .cmd = "bench",
    .synopsis = "[WORKLOAD] [options]",
    .about = "Validates each kernel against its reference twin, then times it (median of runs after a\n"
             "warm-up) and prints ms, GFLOP/s and the arena's peak memory. With no WORKLOAD, all of them.",
    .actions = "  peak              fused multiply-adds from registers on every thread: the float32 ceiling\n"
               "  sdpa              scaled dot-product attention (B, H, L, d), --mode, --causal, --impl\n"
               "  sgemm             the GEMM library on the QK^T shape (B*H times (L, d) @ (d, L))\n"
               "  gemm              the GEMM library on the models' linear layers: forward X W^T, backward\n"
               "                    dY W and dY^T X, one row each\n"
               "  mha               multi-head self-attention E=512, 8 heads: forward + backward\n"
               "  encoder           Transformer encoder layer d=512, 8 heads, FFN 2048: train step with Adam\n"
               "  classifier        seed 002's classifier (vocab 20000, E=128, 4 heads): train step with Adam\n",
    CLI_OPTIONS(options),
};

static bool known_workload(const char *name);

static int parse(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    const char **names = calloc((size_t)argc, sizeof *names);
    int n = 0;
    int code = names ? cli_parse(&bench_spec, a, argc, argv, 1, names, &n)
                     : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    if (code == CLI_OK && n > 1) code = cli_fail(CLI_ERR_USAGE, "bench", "unexpected argument \"%s\"", names[1]);
    a->workload = code == CLI_OK && n == 1 ? names[0] : NULL;
    free(names);
    if (code != CLI_OK) return code;
    if (a->workload && !known_workload(a->workload))
        return cli_fail(CLI_ERR_USAGE, "bench", "unknown workload \"%s\" (see attn bench --help)", a->workload);
    if (a->threads) cli_set_threads((int)a->threads);
    return CLI_OK;
}

static void defaults_for(bench_args *a, const char *name)
{
    bool model = !strcmp(name, "mha") || !strcmp(name, "encoder") || !strcmp(name, "classifier");
    if (!a->B) a->B = !strcmp(name, "classifier") ? 32 : 8;
    if (!a->L) a->L = !strcmp(name, "encoder") ? 256 : model ? 512 : 1024;
    if (!a->H) a->H = 8;
    if (!a->d) a->d = 64;
}

static int run_workload(const workload *w, bench_args a)
{
    defaults_for(&a, w->name);
    a.workload = w->name;
    bench_result r = {.unit = ""};
    void *state = NULL;
    int code = w->setup(&a, &state, &r);
    for (long i = 0; code == CLI_OK && i < a.warmup; i++) code = w->run(state);
    double *t = malloc((size_t)a.runs * sizeof *t);
    for (long i = 0; code == CLI_OK && i < a.runs; i++) {
        double t0 = seconds();
        code = w->run(state);
        t[i] = seconds() - t0;
    }
    if (code == CLI_OK) {
        qsort(t, (size_t)a.runs, sizeof *t, cmp_double);
        r.t_min = t[0], r.t_med = t[a.runs / 2], r.t_max = t[a.runs - 1];
        r.peak_bytes = arena_peak(w, state);
        const bool sdpa = !strcmp(w->name, "sdpa");
        const char *mode = sdpa ? mode_names[a.mode] : w->run == peak_run ? "fma" : w->run == gemm_run ? "fwd" : "train";
        if (w->run == gemm_prod_run) {
            const gemm_prod_state *s = state;
            const char *layer = gemm_shapes[a.gemm_case / GEMM_OPS].layer, *op = gemm_ops[a.gemm_case % GEMM_OPS];
            if (a.json)
                printf("{\"workload\":\"gemm\",\"layer\":\"%s\",\"mode\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld,"
                       "\"trans_a\":%s,\"trans_b\":%s,\"backend\":\"%s\",\"threads\":%d,\"t_min\":%.6f,"
                       "\"t_med\":%.6f,\"t_max\":%.6f,\"gflops_med\":%.2f}\n",
                       layer, op, (long long)s->m, (long long)s->n, (long long)s->k, s->trans_a ? "true" : "false",
                       s->trans_b ? "true" : "false", attn_gemm_backend(), cli_threads(), r.t_min, r.t_med,
                       r.t_max, r.flop / r.t_med * 1e-9);
            else
                printf("gemm %-20s %-10s M=%-5lld N=%-5lld K=%-5lld %-5s threads=%d  ms min/med/max %8.3f %8.3f %8.3f  "
                       "GFLOP/s %6.1f\n",
                       layer, op, (long long)s->m, (long long)s->n, (long long)s->k,
                       s->trans_a ? "A^T B" : s->trans_b ? "A B^T" : "A B", cli_threads(), 1e3 * r.t_min,
                       1e3 * r.t_med, 1e3 * r.t_max, r.flop / r.t_med * 1e-9);
        } else if (a.json)
            printf("{\"workload\":\"%s\",\"mode\":\"%s\",\"impl\":\"%s\",\"causal\":%s,\"B\":%ld,\"H\":%ld,\"L\":%ld,"
                   "\"d\":%ld,\"threads\":%d,\"t_min\":%.6f,\"t_med\":%.6f,\"t_max\":%.6f,\"gflops_med\":%.2f,"
                   "\"items_per_s_med\":%.2f,\"unit\":\"%s\",\"arena_peak_mib\":%.1f}\n",
                   w->name, mode, a.impl == ATTN_SDPA_REF ? "ref" : "fused",
                   a.causal ? "true" : "false", a.B, a.H, a.L, a.d, cli_threads(), r.t_min, r.t_med,
                   r.t_max, r.flop / r.t_med * 1e-9, r.items / r.t_med, r.unit, r.peak_bytes / 1048576.0);
        else {
            printf("%-10s %-7s L=%-5ld B=%-3ld %s threads=%d  ms min/med/max %9.2f %9.2f %9.2f  GFLOP/s %6.1f",
                   w->name, mode, a.L, a.B, a.causal ? "causal" : "      ",
                   cli_threads(), 1e3 * r.t_min, 1e3 * r.t_med, 1e3 * r.t_max, r.flop / r.t_med * 1e-9);
            if (r.items > 0) printf("  %.1f %s", r.items / r.t_med, r.unit);
            printf("  arena %.1f MiB\n", r.peak_bytes / 1048576.0);
        }
        fflush(stdout);
    }
    free(t);
    if (state) w->teardown(state);
    return code;
}

static bool known_workload(const char *name)
{
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++)
        if (!strcmp(name, workloads[i].name)) return true;
    return false;
}

int cmd_bench(int argc, char **argv)
{
    bench_args a;
    int code = parse(argc, argv, &a);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
    for (size_t i = 0; i < sizeof workloads / sizeof workloads[0]; i++) {
        if (a.workload && strcmp(a.workload, workloads[i].name)) continue;
        const bool gemm = workloads[i].run == gemm_prod_run;
        if (gemm && !a.json) printf("GEMM library: %s\n", attn_gemm_backend());
        for (a.gemm_case = 0; a.gemm_case < (gemm ? GEMM_CASES : 1); a.gemm_case++)
            if ((code = run_workload(&workloads[i], a)) != CLI_OK) return code;
    }
    return CLI_OK;
}
