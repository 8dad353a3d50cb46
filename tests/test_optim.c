/* Optimizers, gradient clipping and schedules against hand-written double-precision references
 * of torch 1.13's rules, on two small parameters (so the packed layout and state names are
 * exercised), three steps with fixed gradients.
 *
 * Tolerance: atol 1e-6 + rtol 1e-6. The library works in float32 as torch does; parameters are
 * O(1) and three steps of float32 arithmetic (relative error ~6e-8 per op, a few ops per step)
 * stay well below 1e-6, while any slip in the rule (a missing bias correction, wd in the wrong
 * place, dampening on the first step) moves values by 1e-4 or more. */
#include "testkit.h"

#include <math.h>
#include <string.h>

#define ATOL 1e-6f
#define RTOL 1e-6f
#define N 5 /* elements: "a" (2) then "b.weight" (3) */
#define STEPS 3

static const float init[N] = {0.5f, -1.25f, 2.0f, 0.0f, -0.3f};
static const float grads[STEPS][N] = {
    {0.1f, -0.2f, 0.3f, 1.5f, -0.05f}, {-0.4f, 0.25f, 0.0f, 1.0f, 0.2f}, {0.3f, 0.3f, -0.6f, -2.0f, 0.01f}};

static attn_params *make_params(void)
{
    attn_params *p = attn_params_new();
    int64_t sa[1] = {2}, sb[1] = {3};
    attn_tensor *a = attn_params_add(p, "a", 1, sa), *b = attn_params_add(p, "b.weight", 1, sb);
    memcpy(a->data, init, 2 * sizeof(float));
    memcpy(b->data, init + 2, 3 * sizeof(float));
    return p;
}

/* ---- references in double ---- */

/* Hyper-parameters as written in the source (torch sees these Python doubles; the library gets
 * their float32 roundings and recovers the decimals). */
typedef struct hyper {
    attn_optim_kind kind;
    double lr, weight_decay, momentum, dampening;
    bool nesterov;
    double beta1, beta2, eps;
} hyper;

static attn_optim_config config_of(const hyper *h)
{
    return (attn_optim_config){
        h->kind,     (float)h->lr,    (float)h->weight_decay, (float)h->momentum, (float)h->dampening,
        h->nesterov, (float)h->beta1, (float)h->beta2,        (float)h->eps};
}

typedef struct ref_state {
    double p[N], buf[N], m[N], v[N];
} ref_state;

static void ref_sgd(ref_state *s, const hyper *c, int t, const float *g)
{
    double lr = c->lr, wd = c->weight_decay, mom = c->momentum, damp = c->dampening;
    for (int i = 0; i < N; i++) {
        double d = g[i] + wd * s->p[i];
        if (mom != 0.0) {
            s->buf[i] = t == 1 ? d : mom * s->buf[i] + (1.0 - damp) * d;
            d = c->nesterov ? d + mom * s->buf[i] : s->buf[i];
        }
        s->p[i] -= lr * d;
    }
}

static void ref_adam(ref_state *s, const hyper *c, int t, const float *g)
{
    double lr = c->lr, wd = c->weight_decay, b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    bool adamw = c->kind == ATTN_OPTIM_ADAMW;
    for (int i = 0; i < N; i++) {
        double gi = g[i];
        if (adamw)
            s->p[i] *= 1.0 - lr * wd;
        else
            gi += wd * s->p[i];
        s->m[i] = b1 * s->m[i] + (1.0 - b1) * gi;
        s->v[i] = b2 * s->v[i] + (1.0 - b2) * gi * gi;
        double bc1 = 1.0 - pow(b1, t), bc2 = 1.0 - pow(b2, t);
        s->p[i] -= lr / bc1 * s->m[i] / (sqrt(s->v[i]) / sqrt(bc2) + eps);
    }
}

static void to_float(float *out, const double *in)
{
    for (int i = 0; i < N; i++) out[i] = (float)in[i];
}

/* Runs STEPS steps of cfg against the reference; checks params and state after each. */
static void run_case(const char *what, const hyper *cfg)
{
    attn_params *p = make_params();
    attn_optim_config c = config_of(cfg);
    attn_optim *opt = attn_optim_new(p, &c);
    TK_NOT_NULL(opt);
    if (!opt) {
        attn_params_free(p);
        return;
    }
    ref_state s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < N; i++) s.p[i] = init[i];
    float *data = attn_params_data_block(p), *grad = attn_params_grad_block(p);
    char label[128];
    float expect[N];
    for (int t = 1; t <= STEPS; t++) {
        memcpy(grad, grads[t - 1], sizeof grads[0]);
        TK_OK(attn_optim_step(opt));
        if (cfg->kind == ATTN_OPTIM_SGD)
            ref_sgd(&s, cfg, t, grads[t - 1]);
        else
            ref_adam(&s, cfg, t, grads[t - 1]);
        snprintf(label, sizeof label, "%s step %d params", what, t);
        to_float(expect, s.p);
        tk_close(label, data, expect, N, ATOL, RTOL);
    }
    TK_CHECK(attn_optim_step_count(opt) == STEPS, "%s step count", what);
    /* state tensors: names, sizes, and values after the last step */
    size_t per_param = cfg->kind != ATTN_OPTIM_SGD ? 2 : cfg->momentum != 0.0 ? 1 : 0;
    TK_CHECK(attn_optim_state_count(opt) == 2 * per_param, "%s state count %zu", what, attn_optim_state_count(opt));
    for (size_t i = 0; i < attn_optim_state_count(opt); i++) {
        const char *name;
        float *buf;
        int64_t numel;
        TK_OK(attn_optim_state_at(opt, i, &name, &buf, &numel));
        size_t param = i / per_param, which = i % per_param;
        const char *kind = per_param == 1 ? "momentum_buffer" : which ? "exp_avg_sq" : "exp_avg";
        char expect_name[64];
        snprintf(expect_name, sizeof expect_name, "%s.%s", kind, param ? "b.weight" : "a");
        TK_CHECK(strcmp(name, expect_name) == 0 && numel == (param ? 3 : 2), "%s state %zu is %s (%lld), expected %s",
                 what, i, name, (long long)numel, expect_name);
        const double *ref = per_param == 1 ? s.buf : which ? s.v : s.m;
        float e[3];
        for (int64_t j = 0; j < numel; j++) e[j] = (float)ref[(param ? 2 : 0) + j];
        snprintf(label, sizeof label, "%s state %s", what, expect_name);
        tk_close(label, buf, e, numel, ATOL, RTOL);
    }
    attn_optim_free(opt);
    attn_params_free(p);
}

static void test_sgd(void)
{
    attn_optim_config c = attn_optim_defaults(ATTN_OPTIM_SGD);
    TK_CHECK(isnan(c.lr) && c.momentum == 0.0f && c.dampening == 0.0f && !c.nesterov && c.weight_decay == 0.0f,
             "SGD defaults: lr unset (NaN), momentum 0, dampening 0, nesterov off, wd 0");
    hyper h = {ATTN_OPTIM_SGD, 0.1, 0.0, 0.0, 0.0, false, 0.0, 0.0, 0.0};
    run_case("SGD plain", &h);
    h.momentum = 0.9;
    h.dampening = 0.1;
    run_case("SGD momentum + dampening", &h);
    h.dampening = 0.0;
    h.nesterov = true;
    run_case("SGD nesterov", &h);
    h.nesterov = false;
    h.weight_decay = 0.01;
    run_case("SGD momentum + weight decay", &h);
    h.momentum = 0.0;
    run_case("SGD weight decay", &h);
}

static void test_adam(void)
{
    attn_optim_config c = attn_optim_defaults(ATTN_OPTIM_ADAM);
    TK_CHECK(c.lr == 1e-3f && c.beta1 == 0.9f && c.beta2 == 0.999f && c.eps == 1e-8f && c.weight_decay == 0.0f,
             "Adam defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, wd 0");
    hyper h = {ATTN_OPTIM_ADAM, 0.05, 0.0, 0.0, 0.0, false, 0.9, 0.999, 1e-8};
    run_case("Adam", &h);
    h.weight_decay = 0.1;
    run_case("Adam L2 weight decay", &h);
    attn_optim_config w = attn_optim_defaults(ATTN_OPTIM_ADAMW);
    TK_CHECK(w.lr == 1e-3f && w.weight_decay == 0.01f && w.beta1 == 0.9f && w.beta2 == 0.999f,
             "AdamW defaults: Adam's, with weight decay 0.01");
    h.kind = ATTN_OPTIM_ADAMW;
    run_case("AdamW", &h);
    h.beta1 = 0.5;
    h.beta2 = 0.75;
    h.eps = 1e-3;
    run_case("AdamW betas (0.5, 0.75), eps 1e-3", &h);
}

/* set_lr takes effect on the next step; a bad lr is refused; step count can be restored. */
static void test_lr_and_steps(void)
{
    attn_params *p = make_params();
    attn_optim_config c = attn_optim_defaults(ATTN_OPTIM_SGD);
    c.lr = 0.1f;
    attn_optim *opt = attn_optim_new(p, &c);
    float *data = attn_params_data_block(p), *grad = attn_params_grad_block(p);
    for (int i = 0; i < N; i++) grad[i] = 1.0f;
    attn_optim_set_lr(opt, 0.5f);
    TK_CHECK(attn_optim_lr(opt) == 0.5f, "attn_optim_lr returns the lr set");
    TK_OK(attn_optim_step(opt));
    float expect[N];
    for (int i = 0; i < N; i++) expect[i] = init[i] - 0.5f;
    tk_close("SGD step with the lr set", data, expect, N, ATOL, RTOL);
    attn_optim_set_lr(opt, -1.0f);
    TK_CHECK(attn_optim_lr(opt) == 0.5f && attn_last_status() == ATTN_ERR_ARG, "a negative lr is refused: %s",
             attn_last_error());
    attn_optim_set_step_count(opt, 42);
    TK_CHECK(attn_optim_step_count(opt) == 42, "step count restored");
    TK_OK(attn_optim_set_step_count(opt, INT64_MAX));
    float before = data[0];
    TK_CHECK(attn_optim_step(opt) == ATTN_ERR_STATE && data[0] == before && attn_optim_step_count(opt) == INT64_MAX,
             "a step past INT64_MAX steps is refused before any update (it overflowed)");
    attn_optim_set_step_count(opt, 42);
    TK_CHECK(attn_optim_state_at(opt, 0, NULL, NULL, NULL) == ATTN_ERR_ARG, "plain SGD has no state: %s",
             attn_last_error());
    TK_CHECK(attn_params_add(p, "late", 1, (int64_t[]){1}) == NULL && attn_last_status() == ATTN_ERR_STATE,
             "no parameter can be added after the optimizer packed the registry");
    attn_optim_free(opt);
    attn_params_free(p);
}

static void test_config_errors(void)
{
    attn_params *p = make_params();
    struct {
        const char *what;
        attn_optim_config c;
    } bad[10];
    int n = 0;
    attn_optim_config sgd = attn_optim_defaults(ATTN_OPTIM_SGD);
    bad[n].what = "SGD without lr", bad[n++].c = sgd;
    sgd.lr = 0.1f;
    bad[n].what = "SGD nesterov without momentum", bad[n].c = sgd, bad[n++].c.nesterov = true;
    bad[n].what = "SGD nesterov with dampening", bad[n].c = sgd, bad[n].c.nesterov = true, bad[n].c.momentum = 0.9f,
    bad[n++].c.dampening = 0.1f;
    bad[n].what = "SGD negative momentum", bad[n].c = sgd, bad[n++].c.momentum = -0.5f;
    bad[n].what = "SGD negative weight decay", bad[n].c = sgd, bad[n++].c.weight_decay = -1e-4f;
    attn_optim_config adam = attn_optim_defaults(ATTN_OPTIM_ADAM);
    bad[n].what = "Adam negative lr", bad[n].c = adam, bad[n++].c.lr = -1e-3f;
    bad[n].what = "Adam beta1 = 1", bad[n].c = adam, bad[n++].c.beta1 = 1.0f;
    bad[n].what = "Adam negative beta2", bad[n].c = adam, bad[n++].c.beta2 = -0.1f;
    bad[n].what = "AdamW negative eps", bad[n].c = attn_optim_defaults(ATTN_OPTIM_ADAMW), bad[n++].c.eps = -1e-8f;
    bad[n].what = "unknown kind", bad[n].c = adam, bad[n++].c.kind = (attn_optim_kind)7;
    for (int i = 0; i < n; i++) {
        attn_clear_error();
        attn_optim *opt = attn_optim_new(p, &bad[i].c);
        TK_CHECK(opt == NULL && attn_last_status() == ATTN_ERR_ARG, "%s is refused: %s", bad[i].what,
                 attn_last_error());
        attn_optim_free(opt);
    }
    attn_params_free(p);
}

/* torch.nn.utils.clip_grad_norm_: norm over all grads; scale min(1, max / (norm + 1e-6)). */
static void test_clip(void)
{
    attn_params *p = make_params();
    attn_optim_config c = attn_optim_defaults(ATTN_OPTIM_SGD);
    c.lr = 0.1f;
    attn_optim *opt = attn_optim_new(p, &c);
    float *grad = attn_params_grad_block(p);
    const float g[N] = {3.0f, 4.0f, 0.0f, 0.0f, 12.0f}; /* norm 13 across both parameters */
    memcpy(grad, g, sizeof g);
    float norm = attn_clip_grad_norm(p, 100.0f);
    TK_CHECK(fabsf(norm - 13.0f) <= 1e-6f * 13.0f, "clip returns the norm 13, got %.9g", norm);
    tk_close("clip above the norm leaves grads", grad, g, N, 0, 0);
    norm = attn_clip_grad_norm(p, 6.5f);
    TK_CHECK(fabsf(norm - 13.0f) <= 1e-6f * 13.0f, "clip returns the norm before clipping");
    float expect[N], coef = (float)(6.5 / (13.0 + 1e-6));
    for (int i = 0; i < N; i++) expect[i] = g[i] * coef;
    tk_close("clip to 6.5 halves the grads", grad, expect, N, ATOL, RTOL);
    norm = attn_clip_grad_norm(p, 1e9f);
    TK_CHECK(fabsf(norm - 6.5f) <= 1e-5f, "the clipped norm is max_norm, got %.9g", norm);
    attn_optim_free(opt);
    attn_params_free(p);

    attn_params *fresh = make_params(); /* unpacked, no grads yet: norm 0, nothing to scale */
    TK_CHECK(attn_clip_grad_norm(fresh, 1.0f) == 0.0f, "clip without grads returns 0");
    attn_params_free(fresh);
}

static float custom_lr(int64_t step, void *user)
{
    return *(const float *)user / (float)step;
}

static void test_schedules(void)
{
    attn_lr_schedule s = {ATTN_LR_CONSTANT, 3e-4f, 0, 0, NULL, NULL};
    TK_CHECK(attn_lr_at(&s, 1) == 3e-4f && attn_lr_at(&s, 1000) == 3e-4f, "constant schedule");
    s = (attn_lr_schedule){ATTN_LR_LINEAR_WARMUP, 1e-3f, 10, 0, NULL, NULL};
    float got[5] = {attn_lr_at(&s, 0), attn_lr_at(&s, 1), attn_lr_at(&s, 5), attn_lr_at(&s, 10), attn_lr_at(&s, 50)};
    float want[5] = {1e-4f, 1e-4f, 5e-4f, 1e-3f, 1e-3f};
    tk_close("linear warmup at steps 0 (as 1), 1, 5, 10, 50", got, want, 5, 0, 1e-6f);
    s = (attn_lr_schedule){ATTN_LR_INV_SQRT, 1.0f, 4000, 512, NULL, NULL};
    float inv[4] = {attn_lr_at(&s, 1), attn_lr_at(&s, 2000), attn_lr_at(&s, 4000), attn_lr_at(&s, 16000)};
    double d = 1.0 / sqrt(512.0);
    float inv_want[4] = {(float)(d * 1.0 * pow(4000.0, -1.5)), (float)(d * 2000.0 * pow(4000.0, -1.5)),
                         (float)(d / sqrt(4000.0)), (float)(d / sqrt(16000.0))};
    tk_close("inverse sqrt (Vaswani) at steps 1, 2000, 4000, 16000", inv, inv_want, 4, 0, 1e-6f);
    s.base_lr = 2.0f;
    float scaled = attn_lr_at(&s, 16000), scaled_want = 2.0f * inv_want[3];
    tk_close("inverse sqrt times base_lr", &scaled, &scaled_want, 1, 0, 1e-6f);
    float base = 0.6f;
    s = (attn_lr_schedule){ATTN_LR_CUSTOM, 0.0f, 0, 0, custom_lr, &base};
    TK_CHECK(attn_lr_at(&s, 3) == 0.6f / 3.0f, "custom schedule calls fn(step, user)");
    s.fn = NULL;
    TK_CHECK(isnan(attn_lr_at(&s, 3)) && attn_last_status() == ATTN_ERR_ARG, "custom schedule without fn: %s",
             attn_last_error());
    s = (attn_lr_schedule){ATTN_LR_INV_SQRT, 1.0f, 4000, 0, NULL, NULL};
    TK_CHECK(isnan(attn_lr_at(&s, 3)), "inverse sqrt without d_model: %s", attn_last_error());
}

/* torch.optim's own float32 results (tests/golden/optim_torch_steps.safetensors, written by
 * make_golden_optim.py): one parameter of 1031 elements, three steps. The library rounds where
 * torch's CPU kernels round and fuses where they fuse (kernels/optim_update.c), but which products
 * torch fuses depends on the CPU capability its kernels were chosen for, and ours on the ISA
 * level: so the file, made on another machine, is compared within a bound, and how many elements
 * are torch's bits exactly is printed. Bound per tensor (testkit.h): two float32 sides; a step is elementwise,
 * ~10 roundings (weight decay, momentum or the moments, bias corrections, sqrt, the division), 3
 * steps: n = 30 on the scale of the largest step, 0.15 (SGD: lr 0.01 x (|g| <= 4 plus momentum
 * <= 10); Adam: 3.16 lr = 3.2e-3); and each side rounds the parameter once a step (rtol 2 * 3 u).
 * tk_tol_of(2, 30, 1, 3) on scale 0.15: 3.6e-7 |ref_i| + 5.4e-7 (before: 1e-6 + 1e-6 |ref_i|,
 * or bit for bit when built with FMA). An error of 2e-4 max|p| fails it (checked every time). */
#define TORCH_STEP_MAX 0.15
static void test_torch_bits(void)
{
    static const struct {
        const char *name;
        hyper h;
    } cases[] = {
        {"sgd_momentum", {ATTN_OPTIM_SGD, 0.01, 0.01, 0.9, 0.1, false, 0.0, 0.0, 0.0}},
        {"sgd_nesterov", {ATTN_OPTIM_SGD, 0.01, 0.01, 0.9, 0.0, true, 0.0, 0.0, 0.0}},
        {"adam_l2", {ATTN_OPTIM_ADAM, 0.001, 0.01, 0.0, 0.0, false, 0.9, 0.98, 1e-9}},
        {"adamw", {ATTN_OPTIM_ADAMW, 0.001, 0.1, 0.0, 0.0, false, 0.9, 0.999, 1e-8}},
    };
    attn_st_file *f = tk_golden("optim_torch_steps");
    attn_tensor *p0 = f ? tk_golden_tensor(f, "p0") : NULL;
    for (size_t c = 0; p0 && c < sizeof cases / sizeof cases[0]; c++) {
        attn_params *p = attn_params_new();
        attn_tensor *w = attn_params_add(p, "w", 1, p0->shape);
        memcpy(w->data, p0->data, (size_t)p0->numel * sizeof(float));
        attn_optim_config cfg = config_of(&cases[c].h);
        attn_optim *opt = attn_optim_new(p, &cfg);
        TK_NOT_NULL(opt);
        for (int t = 1; opt && t <= STEPS; t++) {
            char name[64];
            snprintf(name, sizeof name, "grad_%d", t);
            attn_tensor *g = tk_golden_tensor(f, name);
            if (!g) break;
            memcpy(attn_params_grad_block(p), g->data, (size_t)g->numel * sizeof(float));
            attn_tensor_free(g);
            TK_OK(attn_optim_step(opt));
            snprintf(name, sizeof name, "%s.p_%d", cases[c].name, t);
            attn_tensor *want = tk_golden_tensor(f, name);
            if (!want) break;
            char label[96];
            snprintf(label, sizeof label, "%s step %d against torch", cases[c].name, t);
            tk_tol tol = tk_tol_of(2, STEPS * 10, 1, STEPS);
            tol.scale = TORCH_STEP_MAX;
            tk_close_scaled(label, w->data, want->data, want->numel, tol);
            int64_t same = 0;
            for (int64_t i = 0; i < want->numel; i++) same += memcmp(&w->data[i], &want->data[i], sizeof(float)) == 0;
            printf("%s: %lld of %lld elements are torch's bits\n", label, (long long)same, (long long)want->numel);
            attn_tensor_free(want);
        }
        attn_optim_free(opt);
        attn_params_free(p);
    }
    attn_tensor_free(p0);
    if (f) attn_st_close(f);
}

int main(void)
{
    test_sgd();
    test_adam();
    test_torch_bits();
    test_lr_and_steps();
    test_config_errors();
    test_clip();
    test_schedules();
    return tk_finish("test_optim");
}
