/* attn bench: validates each benchmarked kernel against its reference twin, then times it
 * (median of runs after a warm-up) and prints ms, GFLOP/s and the arena's peak memory.
 * Workloads mirror ../shared/bench/bench_torch.py so bench/compare_torch.sh can put both sides
 * in one table: peak (bench_peak.c: the float32 ceiling), sdpa, mha (train), encoder (train step
 * with Adam), classifier (train step); sgemm and gemm (the GEMM library) are in bench_gemm.c. */
#include "bench.h"
#include "bench_peak.h"
#include "options.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---- sdpa ---- */

/* --mods: the features as the callbacks a user would write (attn_score_mods), with a block
 * predicate for the masks; queries and keys are as many (L) */
typedef struct sdpa_mods {
    const float *slopes; /* (H) ALiBi's; NULL: none */
    float softcap;       /* 0: none */
    bool causal;
    attn_window window; /* bottom-right aligned; queries and keys are as many */
} sdpa_mods;

static float mods_score(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b;
    const sdpa_mods *m = user;
    if (m->softcap > 0.0f) s = m->softcap * tanhf(s / m->softcap);
    if (m->slopes) s -= m->slopes[h] * (float)(q > kv ? q - kv : kv - q);
    return s;
}

static float mods_score_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h, (void)q, (void)kv;
    const sdpa_mods *m = user;
    if (!(m->softcap > 0.0f)) return 1.0f;
    const float t = tanhf(s / m->softcap);
    return 1.0f - t * t;
}

static bool mods_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *user)
{
    (void)b, (void)h;
    const sdpa_mods *m = user;
    const attn_window *w = &m->window;
    return (!m->causal || kv <= q) &&
           (!w->on || ((w->left < 0 || kv >= q - w->left) && (w->right < 0 || kv <= q + w->right)));
}

/* the block's pairs have kv - q from k0 - (q1 - 1) to (k1 - 1) - q0; the mask keeps [lo, hi] */
static int mods_block(int64_t b, int64_t h, int64_t q0, int64_t q1, int64_t k0, int64_t k1, void *user)
{
    (void)b, (void)h;
    const sdpa_mods *m = user;
    const attn_window *w = &m->window;
    const int64_t lo = w->on && w->left >= 0 ? -w->left : INT64_MIN;
    int64_t hi = w->on && w->right >= 0 ? w->right : INT64_MAX;
    if (m->causal && hi > 0) hi = 0;
    if ((k1 - 1) - q0 < lo || k0 - (q1 - 1) > hi) return ATTN_BLOCK_EMPTY;
    return k0 - (q1 - 1) >= lo && (k1 - 1) - q0 <= hi ? ATTN_BLOCK_FULL : ATTN_BLOCK_PARTIAL;
}

typedef struct sdpa_state {
    attn_ctx *ctx;
    attn_tensor *q, *k, *v, *g;
    float *slopes; /* (H) ALiBi's */
    sdpa_mods mods;
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

/* The attention options of the bench arguments (ALiBi's slopes in slopes (heads)); with --mods the
 * features go through the callbacks, whose user data mods receives */
static attn_sdpa_opts sdpa_opts_of(const bench_args *a, attn_sdpa_impl impl, float *slopes, int64_t heads, bool gqa,
                                   sdpa_mods *mods)
{
    attn_sdpa_opts o = {.impl = impl, .enable_gqa = gqa};
    attn_score_features built_in = {0};
    const bool alibi = cli_features_apply(&a->features, slopes, heads, &built_in) && a->features.alibi;
    if (a->mods) {
        *mods = (sdpa_mods){alibi ? slopes : NULL, a->features.softcap, a->causal, a->features.window_parsed};
        o.features.mods.user = mods;
        if (alibi || a->features.softcap > 0.0f)
            o.features.mods.score_mod = mods_score, o.features.mods.score_mod_grad = mods_score_grad;
        if (a->causal || a->features.window)
            o.features.mods.mask_mod = mods_mask, o.features.mods.mask_block = mods_block;
        return o;
    }
    o.features = built_in;
    o.mask.causal = a->causal;
    return o;
}

/* The fused kernel against the reference on a (1, 2, min(L, 512), d) slice of the shape (K and V
 * with one head under GQA), with the workload's options: within
 * float32 roundings, or with bf16 products (MEDIUM), within the bound attn.h states besides: scores
 * within dS_i = scale (2u + (D + 2) 2^-24) max_j sum_d |q_id k_jd| (u = 2^-8), P within about
 * 2 dS_i relative, and O = P V rounding P and V again: |dO_ic| <= (2.1 dS_i + 2u + L 2^-24) max_j |v_jc|. */
static int sdpa_validate(const bench_args *a)
{
    const bool gqa = a->kv_heads > 0 && a->kv_heads != a->H;
    const int64_t L = a->L < 512 ? a->L : 512, D = a->d, shape[4] = {1, 2, L, D}, kv_shape[4] = {1, gqa ? 1 : 2, L, D};
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_tensor *t[3] = {bench_randn(&rng, 4, shape, false), bench_randn(&rng, 4, kv_shape, false),
                         bench_randn(&rng, 4, kv_shape, false)};
    attn_ctx *ctx = cli_ctx_new(0);
    float slopes[2];
    sdpa_mods mods;
    attn_sdpa_opts f = sdpa_opts_of(a, ATTN_SDPA_FUSED, slopes, 2, gqa, &mods);
    attn_sdpa_opts r = sdpa_opts_of(a, ATTN_SDPA_REF, slopes, 2, gqa, &mods);
    attn_tensor *x = ctx ? attn_sdpa(ctx, t[0], t[1], t[2], &f, NULL) : NULL;
    attn_tensor *y = ctx ? attn_sdpa(ctx, t[0], t[1], t[2], &r, NULL) : NULL;
    const bool bf16 = attn_ctx_matmul_precision(ctx) == ATTN_PRECISION_MEDIUM && attn_bf16_attention();
    double *ds = calloc((size_t)(2 * L), sizeof *ds),
           *vmax = calloc((size_t)(2 * D), sizeof *vmax); /* (2, L), (2, D) */
    bool ok = x && y && ds && vmax;
    const double u = 0x1p-8, scale = 1.0 / sqrt((double)D);
    for (int64_t h = 0; ok && bf16 && h < 2; h++) {
        const int64_t hk = gqa ? 0 : h;
        const float *q = t[0]->data + h * L * D, *k = t[1]->data + hk * L * D, *v = t[2]->data + hk * L * D;
        for (int64_t i = 0; i < L; i++)
            for (int64_t j = 0; j < L; j++) {
                double sum = 0.0;
                for (int64_t d = 0; d < D; d++) sum += fabs((double)q[i * D + d] * k[j * D + d]);
                ds[h * L + i] = fmax(ds[h * L + i], scale * (2 * u + (double)(D + 2) * 0x1p-24) * sum);
            }
        for (int64_t j = 0; j < L * D; j++) vmax[h * D + j % D] = fmax(vmax[h * D + j % D], fabs(v[j]));
    }
    for (int64_t i = 0; ok && i < x->numel; i++) {
        const int64_t row = i / D, head = row / L, c = i % D;
        const double bound = bf16 ? (2.1 * ds[row] + 2 * u + (double)L * 0x1p-24) * vmax[head * D + c] : 0.0;
        ok = fabsf(x->data[i] - y->data[i]) <= 2e-5f + 2e-4f * fabsf(y->data[i]) + bound;
    }
    free(ds), free(vmax);
    attn_ctx_free(ctx);
    for (int i = 0; i < 3; i++) attn_tensor_free(t[i]);
    return ok ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "sdpa: the fused kernel disagrees with the reference");
}

static int sdpa_setup(const bench_args *a, void **state, bench_result *r)
{
    int code = sdpa_validate(a);
    if (code != CLI_OK) return code;
    r->bf16 = r->bf16 && attn_bf16_attention(); /* the attention's own tiles alone */
    sdpa_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    const bool gqa = a->kv_heads > 0 && a->kv_heads != a->H;
    int64_t shape[4] = {a->B, a->H, a->L, a->d}, kv_shape[4] = {a->B, gqa ? a->kv_heads : a->H, a->L, a->d};
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    s->ctx = r->ctx = cli_ctx_new(0);
    s->backward = a->mode == 1;
    s->q = bench_randn(&rng, 4, shape, s->backward), s->k = bench_randn(&rng, 4, kv_shape, s->backward);
    s->v = bench_randn(&rng, 4, kv_shape, s->backward), s->g = bench_randn(&rng, 4, shape, false);
    s->slopes = malloc(sizeof(float) * (size_t)a->H);
    if (s->slopes) s->opts = sdpa_opts_of(a, (attn_sdpa_impl)a->impl, s->slopes, a->H, gqa, &s->mods);
    const double pairs = cli_features_pairs(&a->features, a->causal, a->L, a->L); /* the kernel's work */
    r->flop = 4.0 * a->B * a->H * pairs * a->d * (s->backward ? 3.5 : 1.0);
    return s->ctx && s->q && s->k && s->v && s->g && s->slopes ? CLI_OK
                                                               : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
}

static void sdpa_teardown(void *p)
{
    sdpa_state *s = p;
    if (!s) return;
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->q), attn_tensor_free(s->k), attn_tensor_free(s->v), attn_tensor_free(s->g);
    free(s->slopes);
    free(s);
}

/* ---- peak: the FMA loop of bench_peak.c on every thread, one case per level ---- */

#ifdef BENCH_PEAK_LEVELS_BUILT /* cli/CMakeLists.txt: a copy of the loop per level */
#include "bench_peak_levels.h"
#define PEAK_DECLARATION(name) extern const bench_peak_loop bench_peak_##name;
BENCH_PEAK_LEVELS(PEAK_DECLARATION)
#undef PEAK_DECLARATION
static const bench_peak_loop *const peak_loops[] = {
#define PEAK_ENTRY(name) &bench_peak_##name,
    BENCH_PEAK_LEVELS(PEAK_ENTRY)
#undef PEAK_ENTRY
};
#else
extern const bench_peak_loop bench_peak_build;
static const bench_peak_loop *const peak_loops[] = {&bench_peak_build};
#endif
enum {
    PEAK_LOOPS = (int)(sizeof peak_loops / sizeof peak_loops[0])
};

typedef struct peak_state {
    const bench_peak_loop *loop;
    int threads;
} peak_state;

static int peak_run(void *p)
{
    const peak_state *s = p;
    return s->loop->run(s->threads) ? CLI_OK
                                    : cli_fail(CLI_ERR_DATA, "bench", "peak: cannot start %d threads", s->threads);
}

/* a level this CPU can run (whatever ATTN_CPU_ISA says: every level's ceiling is measured); a
 * build without the levels has its one loop */
static bool peak_runs_case(const bench_args *a)
{
    return PEAK_LOOPS == 1 || attn_cpu_isa_supported(peak_loops[a->bench_case]->level);
}

static int peak_setup(const bench_args *a, void **state, bench_result *r)
{
    peak_state *s = malloc(sizeof *s);
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    s->loop = peak_loops[a->bench_case];
    s->threads = cli_threads() < BENCH_PEAK_MAX_THREADS ? cli_threads() : BENCH_PEAK_MAX_THREADS;
    *state = s;
    r->flop = s->loop->flop_per_thread * s->threads;
    r->isa = s->loop->level;
    return CLI_OK;
}

static void peak_teardown(void *p)
{
    free(p);
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
    attn_tensor *(*loss)(struct module_state *s); /* the workload's */
} module_state;

/* The step's loss: mha's output summed, the encoder's MSE, the classifier's cross-entropy */
static attn_tensor *mha_loss(module_state *s)
{
    attn_mha_opts o = {.impl = (attn_sdpa_impl)s->a->impl};
    return attn_sum_all(s->ctx, attn_mha_forward(s->ctx, &s->mha, s->x, s->x, s->x, &o, NULL));
}

static attn_tensor *encoder_loss(module_state *s)
{
    return attn_mse_loss(s->ctx, attn_encoder_layer_forward(s->ctx, &s->enc, s->x, NULL, NULL), s->target);
}

static attn_tensor *classifier_loss(module_state *s)
{
    attn_tensor *logits = attn_classifier_forward(s->ctx, &s->cls, s->ids, s->lengths, s->a->B, s->a->L, NULL);
    return attn_cross_entropy(s->ctx, logits, s->labels, -100, 0.0f);
}

/* Forward and backward, and with an optimizer (the encoder, the classifier) Adam's step */
static int module_run(void *p)
{
    module_state *s = p;
    attn_ctx_reset(s->ctx);
    if (s->opt) attn_params_zero_grad(s->params);
    attn_tensor *loss = s->loss(s);
    if (!loss || attn_backward(s->ctx, loss) != ATTN_OK || (s->opt && attn_optim_step(s->opt) != ATTN_OK))
        return cli_fail(CLI_ERR_DATA, "bench", "%s: %s", s->a->workload, attn_last_error());
    return CLI_OK;
}

/* flops of one self-attention layer's forward (projections, QK^T, PV) as bench_torch.py counts */
static double mha_flop(double B, double L, double E)
{
    return B * (8.0 * L * E * E + 4.0 * L * L * E);
}

static int module_setup(const bench_args *a, void **state, bench_result *r)
{
    module_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    s->a = a;
    s->ctx = r->ctx = cli_ctx_new(0);
    s->params = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_status st = s->ctx && s->params ? ATTN_OK : ATTN_ERR_NOMEM;
    const int64_t B = a->B, L = a->L;
    if (!strcmp(a->workload, "mha")) {
        const int64_t E = 512;
        s->loss = mha_loss;
        if (st == ATTN_OK) st = attn_mha_init(&s->mha, s->params, "", E, 8, 0, 0, true, 0.0f, &rng);
        s->x = bench_randn(&rng, 3, (int64_t[]){B, L, E}, true);
        r->flop = 3.0 * mha_flop((double)B, (double)L, (double)E);
        r->items = (double)(B * L), r->unit = "tokens/s";
    } else if (!strcmp(a->workload, "encoder")) {
        const int64_t E = 512;
        s->loss = encoder_loss;
        attn_transformer_config tc = {
            .d_model = E, .num_heads = 8, .dim_feedforward = 2048, .dropout = 0.1f, .ffn_dropout = true};
        if (st == ATTN_OK) st = attn_encoder_layer_init(&s->enc, s->params, "", &tc, &rng);
        s->x = bench_randn(&rng, 3, (int64_t[]){B, L, E}, false);
        s->target = bench_randn(&rng, 3, (int64_t[]){B, L, E}, false);
        r->flop = 3.0 * (mha_flop((double)B, (double)L, (double)E) + 4.0 * B * L * E * 2048.0);
        r->items = (double)(B * L), r->unit = "tokens/s";
    } else {
        attn_classifier_config cc = attn_classifier_defaults(20000);
        s->loss = classifier_loss;
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
    if (st != ATTN_OK || !inputs) return cli_fail(CLI_ERR_DATA, "bench", "%s: %s", a->workload, attn_last_error());
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

static const bench_workload bench_peak = {"peak",   "fma",         PEAK_LOOPS, peak_setup,
                                          peak_run, peak_teardown, NULL,       peak_runs_case};
static const bench_workload bench_sdpa = {"sdpa", NULL, 1, sdpa_setup, sdpa_run, sdpa_teardown, NULL};
static const bench_workload bench_mha = {"mha", "train", 1, module_setup, module_run, module_teardown, NULL};
static const bench_workload bench_encoder = {"encoder", "train", 1, module_setup, module_run, module_teardown, NULL};
static const bench_workload bench_classifier = {"classifier", "train",         1,   module_setup,
                                                module_run,   module_teardown, NULL};

static const bench_workload *const workloads[] = {&bench_peak, &bench_sdpa, &bench_varlen,  &bench_sgemm,
                                                  &bench_gemm, &bench_mha,  &bench_encoder, &bench_classifier};
enum {
    WORKLOADS = sizeof workloads / sizeof workloads[0]
};

static const char *const impl_names[] = {"auto", "fused", "ref", NULL}; /* attn_sdpa_impl order */

#define O(kind, field) CLI_OPT_AT(bench_args, kind, field)
static const cli_option options[] = {
    {"--L", "N", O(CLI_LONG, L), 1, 65536, NULL, NULL,
     "sequence length (sdpa, sgemm: 1024; mha, classifier: 512; encoder: 256)"},
    {"--B", "N", O(CLI_LONG, B), 1, 4096, NULL, NULL, "batch (classifier: 32, the others: 8)"},
    {"--H", "N", O(CLI_LONG, H), 1, 256, NULL, NULL, "heads (default 8)"},
    {"--d", "N", O(CLI_LONG, d), 1, 4096, NULL, NULL, "head width (default 64)"},
    {"--mode", NULL, O(CLI_CHOICE, mode), 0, 0, bench_mode_names, "fwd", "sdpa: forward, or forward and backward"},
    {"--causal", NULL, O(CLI_FLAG, causal), 0, 0, NULL, NULL, "sdpa: a causal mask"},
    {"--impl", NULL, O(CLI_CHOICE, impl), 0, 0, impl_names, "auto", "sdpa: the kernel"},
    {"--kv-heads", "N", O(CLI_LONG, kv_heads), 1, 256, NULL, NULL,
     "sdpa: grouped-query attention, K and V with N heads"},
    CLI_FEATURE_OPTIONS(bench_args, features, "sdpa", ""),
    {"--mods", NULL, O(CLI_FLAG, mods), 0, 0, NULL, NULL,
     "sdpa: --causal, --window, --alibi and --softcap as score and mask callbacks (attn_score_mods)"},
    {"--runs", "N", O(CLI_LONG, runs), 1, 1000, NULL, "5", "timed runs (the median is reported)"},
    {"--warmup", "N", O(CLI_LONG, warmup), 0, 100, NULL, "1", "untimed runs first"},
    {"--threads", "N", O(CLI_LONG, threads), 1, 1024, NULL, NULL, "threads (default: all cores)"},
    CLI_PRECISION_OPTION(bench_args, matmul_precision),
    {"--json", NULL, O(CLI_FLAG, json), 0, 0, NULL, NULL, "one JSON line per result (bench/compare_*.sh read them)"},
};
#undef O

const cli_spec bench_spec = {
    .cmd = "bench",
    .synopsis = "[WORKLOAD] [options]",
    .about = "Validates each kernel against its reference twin, then times it (median of runs after a\n"
             "warm-up) and prints ms, GFLOP/s and the arena's peak memory. With no WORKLOAD, all of them.",
    .actions = "  peak              fused multiply-adds from registers on every thread: the float32 ceiling\n"
               "  sdpa              scaled dot-product attention (B, H, L, d), --mode, --causal, --impl\n"
               "  varlen            sdpa over B sequences of L/B to L tokens: packed (attn_sdpa_varlen),\n"
               "                    then padded to L (valid_lens); sdpa's options\n"
               "  sgemm             the GEMM library on the QK^T shape (B*H times (L, d) @ (d, L))\n"
               "  gemm              the GEMM library on the models' linear layers: forward X W^T, backward\n"
               "                    dY W and dY^T X, one row each\n"
               "  mha               multi-head self-attention E=512, 8 heads: forward + backward\n"
               "  encoder           Transformer encoder layer d=512, 8 heads, FFN 2048: train step with Adam\n"
               "  classifier        seed 002's classifier (vocab 20000, E=128, 4 heads): train step with Adam\n",
    CLI_OPTIONS(options),
};

static bool known_workload(const char *name);
static void defaults_for(bench_args *a, const char *name);

static int parse(int argc, char **argv, bench_args *a)
{
    memset(a, 0, sizeof *a);
    const char **names = calloc((size_t)argc, sizeof *names);
    int n = 0;
    int code =
        names ? cli_parse(&bench_spec, a, argc, argv, 1, names, &n) : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    if (code == CLI_OK && n > 1) code = cli_fail(CLI_ERR_USAGE, "bench", "unexpected argument \"%s\"", names[1]);
    a->workload = code == CLI_OK && n == 1 ? names[0] : NULL;
    free(names);
    if (code != CLI_OK) return code;
    if (a->workload && !known_workload(a->workload))
        return cli_fail(CLI_ERR_USAGE, "bench", "unknown workload \"%s\" (see attn bench --help)", a->workload);
    const bool varlen = a->workload && !strcmp(a->workload, "varlen"); /* sdpa's options, packed */
    const bool sdpa = a->workload && (!strcmp(a->workload, "sdpa") || varlen),
               mha = a->workload && !strcmp(a->workload, "mha");
    if (varlen && a->mods)
        return cli_fail(CLI_ERR_USAGE, "bench", "--mods applies to sdpa only (varlen takes no callbacks)");
    if (a->workload && !sdpa && (a->causal || a->mode != 0))
        return cli_fail(CLI_ERR_USAGE, "bench", "%s applies to sdpa only", a->causal ? "--causal" : "--mode");
    if (a->workload && !sdpa && !mha && a->impl != 0)
        return cli_fail(CLI_ERR_USAGE, "bench", "--impl applies to sdpa and mha only");
    if (!sdpa && (a->kv_heads || cli_features_given(&a->features) || a->mods))
        return cli_fail(CLI_ERR_USAGE, "bench",
                        "--kv-heads, --window, --alibi, --softcap and --mods apply to sdpa only "
                        "(name it)");
    if ((code = cli_features_check("bench", &a->features)) != CLI_OK) return code;
    if (a->kv_heads && (a->H ? a->H : 8) % a->kv_heads != 0)
        return cli_fail(CLI_ERR_USAGE, "bench", "--kv-heads %ld does not divide the %ld heads", a->kv_heads,
                        a->H ? a->H : 8);
    if (a->threads) cli_set_threads((int)a->threads);
    cli_set_matmul_precision((attn_precision)a->matmul_precision);
    for (int i = 0; i < WORKLOADS; i++) {
        const char *name = workloads[i]->name;
        if ((a->workload && strcmp(a->workload, name)) || !strcmp(name, "peak") || !strcmp(name, "gemm"))
            continue; /* those two take none of B, H, L, d */
        bench_args w = *a;
        defaults_for(&w, name);
        char what[128];
        snprintf(what, sizeof what, "%s at --B %ld --H %ld --L %ld --d %ld", name, w.B, w.H, w.L, w.d);
        /* (B, H, L) rows of d: q, k, v, output and gradients; of L: the weights (and their gradient)
         * that the reference twin and sgemm's product make, where the fused kernel makes none */
        const double rows = (double)w.B * (double)w.H * (double)w.L;
        const double square = !strcmp(name, "sgemm") || w.impl == ATTN_SDPA_REF ? 2.0 * (double)w.L : 0.0;
        if (!cli_check_fits("bench", 4.0 * rows * (square + 8.0 * (double)w.d), what)) return CLI_ERR_USAGE;
    }
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

static void print_result(const bench_workload *w, const bench_args *a, const bench_result *r)
{
    const char *mode = w->mode ? w->mode : bench_mode_names[a->mode];
    if (a->json) {
        printf("{\"workload\":\"%s\",\"mode\":\"%s\",\"impl\":\"%s\",\"causal\":%s,\"B\":%ld,\"H\":%ld,\"L\":%ld,"
               "\"d\":%ld,\"kv_heads\":%ld,",
               w->name, mode, a->impl == ATTN_SDPA_REF ? "ref" : "fused", a->causal ? "true" : "false", a->B, a->H,
               a->L, a->d, a->kv_heads ? a->kv_heads : a->H);
        cli_features_json(&a->features);
        printf(",\"mods\":%s,\"threads\":%d,\"isa\":\"%s\",\"precision\":\"%s\",\"t_min\":%.6f,\"t_med\":%.6f,"
               "\"t_max\":%.6f,\"gflops_med\":%.2f,\"items_per_s_med\":%.2f,\"unit\":\"%s\",\"arena_peak_mib\":%.1f}\n",
               a->mods ? "true" : "false", cli_threads(), attn_isa_name(r->isa), cli_matmul_precision_text(), r->t_min,
               r->t_med, r->t_max, r->flop / r->t_med * 1e-9, r->items / r->t_med, r->unit, r->peak_bytes / 1048576.0);
    } else {
        printf("%-10s %-7s L=%-5ld B=%-3ld %s threads=%d %-11s %-7s  ms min/med/max %9.2f %9.2f %9.2f  GFLOP/s %6.1f",
               w->name, mode, a->L, a->B, a->causal ? "causal" : "      ", cli_threads(), attn_isa_name(r->isa),
               r->bf16 ? "bf16" : "float32", 1e3 * r->t_min, 1e3 * r->t_med, 1e3 * r->t_max, r->flop / r->t_med * 1e-9);
        if (r->items > 0) printf("  %.1f %s", r->items / r->t_med, r->unit);
        printf("  arena %.1f MiB", r->peak_bytes / 1048576.0);
        if (a->kv_heads && a->kv_heads != a->H) printf("  kv-heads %ld", a->kv_heads);
        cli_features_print(&a->features);
        if (a->mods) printf("  (as callbacks)");
        printf("\n");
    }
}

static int run_workload(const bench_workload *w, bench_args a)
{
    defaults_for(&a, w->name);
    a.workload = w->name;
    bench_result r = {.unit = "",
                      .isa = attn_cpu_isa(),
                      .bf16 = cli_matmul_precision() == ATTN_PRECISION_MEDIUM && attn_bf16_products()};
    void *state = NULL;
    double *t = malloc((size_t)a.runs * sizeof *t); /* (runs) seconds */
    int code = t ? w->setup(&a, &state, &r) : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    for (long i = 0; code == CLI_OK && i < a.warmup; i++) code = w->run(state);
    for (long i = 0; code == CLI_OK && i < a.runs; i++) {
        double t0 = seconds();
        code = w->run(state);
        t[i] = seconds() - t0;
    }
    if (code == CLI_OK) {
        qsort(t, (size_t)a.runs, sizeof *t, cmp_double);
        r.t_min = t[0], r.t_med = t[a.runs / 2], r.t_max = t[a.runs - 1];
        r.peak_bytes = r.ctx ? attn_ctx_bytes_peak(r.ctx) : 0;
        if (w->print)
            w->print(&a, state, &r);
        else
            print_result(w, &a, &r);
        fflush(stdout);
    }
    free(t);
    if (state) w->teardown(state);
    return code;
}

static bool known_workload(const char *name)
{
    for (int i = 0; i < WORKLOADS; i++)
        if (!strcmp(name, workloads[i]->name)) return true;
    return false;
}

int cmd_bench(int argc, char **argv)
{
    bench_args a;
    int code = parse(argc, argv, &a);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
    for (int i = 0; i < WORKLOADS; i++) {
        if (a.workload && strcmp(a.workload, workloads[i]->name)) continue;
        for (a.bench_case = 0; a.bench_case < workloads[i]->cases; a.bench_case++)
            if ((!workloads[i]->runs_case || workloads[i]->runs_case(&a)) &&
                (code = run_workload(workloads[i], a)) != CLI_OK)
                return code;
    }
    return CLI_OK;
}
