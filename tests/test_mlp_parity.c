/* End-to-end parity with PyTorch 1.13: Embedding(11, 8) -> Linear(8, 16) -> GELU ->
 * LayerNorm(16) -> Linear(16, 3) -> cross entropy over the 4x5 tokens, trained 10 steps with
 * AdamW(lr 1e-2, weight decay 0.01), starting from torch's initial parameters in
 * tests/golden/mlp_adamw.safetensors (written by tests/golden/make_golden.py).
 *
 * Both sides are float32 (torch's own run is the golden) with different summation orders. u =
 * 2^-24. A gradient here is reached through n ~ 130 roundings (forward: the linear layers' 8 and
 * 16 terms, GELU, LayerNorm's 16, the log-sum-exp over 3 and the mean over 20 tokens, ~60; as
 * much back; the weight gradients' sums over the 20 tokens).
 * Checks:
 *   - the 10 pre-step losses within a max relative difference of 1e-5 of torch's: a mean of 20
 *     positive cross-entropy terms (cond 1) ~60 roundings deep differs by at most 2 * 60 u =
 *     7.2e-6 relative on each step's parameters (and those differ by the bound below);
 *   - the final parameters, per tensor, within tk_tol_of(2, 130, 4, 10) on the scale of the
 *     distance AdamW can move them: a step is at most lr (1 - beta1) / sqrt(1 - beta2) = 3.16 lr
 *     (Kingma and Ba, 2.1), 10 steps 0.316; AdamW divides by sqrt(v), so a step carries its
 *     gradient's relative error (2 * 8 sqrt(130) * 4 u = 730 u with cond 4) and no more, and each
 *     side rounds a parameter once a step (rtol 2 * 10 u). Bound: 1.2e-6 |ref_i| + 1.4e-5
 *     absolute (before: 1e-4 |ref_i| + 1e-5). Adam turns a gradient that is mostly rounding noise
 *     into a full step of either sign; these data have none (the worst difference is 5 u of its
 *     tensor's largest value). An error of 2e-4 of a tensor's largest value fails it (checked
 *     every time; the smallest tensor, norm.bias, reaches 0.08: 1.6e-5). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>

#define STEPS 10
#define MAX_LOSS_REL 1e-5
#define LR 1e-2
#define BETA1 0.9
#define BETA2 0.999

typedef struct mlp {
    attn_embedding_layer emb;
    attn_linear_layer fc1, fc2;
    attn_layer_norm_layer norm;
} mlp;

static bool mlp_init(mlp *m, attn_params *p)
{
    attn_rng rng;
    attn_rng_seed(&rng, 0); /* overwritten from the golden file */
    return attn_embedding_init(&m->emb, p, "emb", 11, 8, -1, &rng) == ATTN_OK &&
           attn_linear_init(&m->fc1, p, "fc1", 8, 16, true, &rng) == ATTN_OK &&
           attn_layer_norm_init(&m->norm, p, "norm", 16, 1e-5f) == ATTN_OK &&
           attn_linear_init(&m->fc2, p, "fc2", 16, 3, true, &rng) == ATTN_OK;
}

/* Mean cross entropy of the (20, 3) logits, or NULL. */
static attn_tensor *mlp_loss(attn_ctx *ctx, const mlp *m, const int64_t *ids, const int64_t *targets)
{
    const int64_t ids_shape[] = {4, 5}, logits_shape[] = {-1, 3};
    attn_tensor *h = attn_embedding_forward(ctx, &m->emb, ids, 2, ids_shape);
    h = attn_gelu(ctx, attn_linear_forward(ctx, &m->fc1, h));
    h = attn_linear_forward(ctx, &m->fc2, attn_layer_norm_forward(ctx, &m->norm, h));
    return attn_cross_entropy(ctx, attn_reshape(ctx, h, 2, logits_shape), targets, -100, 0.0f);
}

/* Copies every registered parameter from the golden file, by its state_dict name. */
static bool copy_params(attn_st_file *f, attn_params *p, const char *prefix)
{
    bool ok = true;
    for (size_t i = 0; i < attn_params_count(p); i++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, attn_params_name(p, i));
        ok = ok && attn_st_copy_into(f, name, attn_params_at(p, i)) == ATTN_OK;
    }
    TK_CHECK(ok, "initial parameters from the golden file: %s", attn_last_error());
    return ok;
}

/* 10 training steps; losses[] gets the pre-step losses. */
static bool train(attn_st_file *f, const mlp *m, attn_params *p, float *losses)
{
    int64_t n_ids = 0, n_targets = 0;
    int64_t *ids = attn_st_load_i64(f, "ids", &n_ids);
    int64_t *targets = attn_st_load_i64(f, "targets", &n_targets);
    attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_ADAMW);
    cfg.lr = (float)LR;
    cfg.beta1 = (float)BETA1; /* torch's defaults, named for the bound */
    cfg.beta2 = (float)BETA2;
    cfg.weight_decay = 0.01f;
    attn_optim *opt = attn_optim_new(p, &cfg);
    attn_ctx *ctx = attn_ctx_new(0);
    bool ok = ids && n_ids == 20 && targets && n_targets == 20 && opt && ctx;
    TK_CHECK(ok, "set-up (ids, targets, optimizer, ctx): %s", attn_last_error());
    for (int step = 0; ok && step < STEPS; step++) {
        attn_params_zero_grad(p);
        attn_tensor *loss = mlp_loss(ctx, m, ids, targets);
        ok = loss && attn_backward(ctx, loss) == ATTN_OK && attn_optim_step(opt) == ATTN_OK;
        TK_CHECK(ok, "step %d: %s", step, attn_last_error());
        if (ok) losses[step] = loss->data[0];
        attn_ctx_reset(ctx);
    }
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    free(ids);
    free(targets);
    return ok;
}

static void check_losses(attn_st_file *f, const float *losses)
{
    attn_tensor *ref = tk_golden_tensor(f, "losses");
    if (!ref) return;
    double worst = 0.0;
    for (int i = 0; i < STEPS; i++) {
        double rel = fabs((double)losses[i] - ref->data[i]) / fabs((double)ref->data[i]);
        if (!(rel <= worst)) worst = rel; /* NaN sticks */
        printf("  step %2d: loss %.7f, torch %.7f\n", i, losses[i], ref->data[i]);
    }
    printf("test_mlp_parity: max relative loss difference over %d steps: %.3g\n", STEPS, worst);
    TK_CHECK(ref->numel == STEPS && worst <= MAX_LOSS_REL, "losses: max relative difference %.3g > %g", worst,
             MAX_LOSS_REL);
    attn_tensor_free(ref);
}

static void check_final(attn_st_file *f, const attn_params *p)
{
    for (size_t i = 0; i < attn_params_count(p); i++) {
        char name[128];
        snprintf(name, sizeof name, "final.%s", attn_params_name(p, i));
        const attn_tensor *t = attn_params_at(p, i);
        tk_tol tol = tk_tol_of(2, 130, 4, STEPS); /* the header says why */
        tol.scale = STEPS * LR * (1 - BETA1) / sqrt(1 - BETA2);
        tk_golden_close_scaled(f, name, t->data, t->numel, tol);
    }
}

int main(void)
{
    attn_st_file *f = tk_golden("mlp_adamw");
    attn_params *p = attn_params_new();
    mlp m;
    float losses[STEPS] = {0};
    bool ok = f && p && mlp_init(&m, p);
    TK_CHECK(ok, "model set-up: %s", attn_last_error());
    TK_CHECK(!ok || attn_params_count(p) == 7, "7 parameters, got %zu", attn_params_count(p));
    if (ok && copy_params(f, p, "") && train(f, &m, p, losses)) {
        check_losses(f, losses);
        check_final(f, p);
    }
    attn_params_free(p);
    if (f) attn_st_close(f);
    return tk_finish("test_mlp_parity");
}
