/* The language model (attn_lm) against PyTorch 1.13, from tests/golden/lm_*.safetensors (written
 * by tests/golden/make_golden_lm.py, which composes GPT-2 and Llama from their definitions):
 *   - forward: attn_lm_forward over three sequences packed end to end gives the logits torch gives
 *     each sequence run alone (so packed equals each sequence by itself: positions from 0, no
 *     attention across sequences); the mean cross-entropy of the next tokens; every parameter's
 *     gradient of it (a tied output's two uses summed into the embedding);
 *   - the same with 2 threads and with one sequence at a time;
 *   - decoding: attn_lm_decoder fed the sequences as three rows, in prompts and single steps of
 *     different sizes per row (counts of 0 too), gives at each feed each row's last logits, equal to
 *     the golden row of that position;
 *   - attn_lm_forward_weights: the same logits for one sequence, and per-layer, per-head weights that
 *     are causal (0 above the diagonal) and sum to 1 per row;
 *   - finite differences: every parameter's gradient of a tiny model of each style (GQA and untied
 *     for Llama) over two packed sequences, central differences with eps 1e-3 within 2e-3 + 2e-2
 *     relative (test_ops_norm's bound: float32 differences of a probe loss over ~100 outputs of size
 *     ~1, which weights of N(0, 0.2) give; at 0.4 the logits grow to ~5 and the differences' own
 *     rounding, |loss| u / eps, reaches the bound);
 *   - attn_lm_init's refusals, each naming its field.
 * Every parameter is overwritten from the file by its name; the registry must hold exactly the
 * file's parameter names.
 *
 * The reference is torch in float64 on the float32 values, rounded to float32: one side. Bound per
 * tensor tk_tol_of(1, n, 4, 8) (testkit.h) with n the roundings on the longest path through the
 * model, forward and backward: per layer, the projections' sums (3 E), the FFN's (F), and the
 * attention's over the head width and the keys (2 context), twice (the backward retraces them),
 * plus the head's sums (2 E) and a weight gradient's sum over the tokens:
 *   n = 2 layers (3 E + F + 2 context) + 2 E + total
 * (gpt2 746, llama_gqa_untied 779, llama_mqa 731); cond 4 and 8 roundings of an element's own as
 * in test_golden_models.c. The decoder's logits are the same model's in another grouping of the
 * same sums (one row's keys at a time): the same bound. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const CASES[] = {"lm_gpt2", "lm_llama_gqa_untied", "lm_llama_mqa_tied_interleaved"};

typedef struct lm_run {
    const char *name;
    attn_st_file *f;
    attn_params *params;
    attn_lm m;
    int64_t *ids, *targets, *cu, total, batch;
    tk_tol tol;
} lm_run;

static int64_t meta_i64(attn_st_file *f, const char *key)
{
    const char *s = attn_st_metadata(f, key);
    TK_CHECK(s != NULL, "metadata %s present", key);
    return s ? strtoll(s, NULL, 10) : 0;
}

static float meta_f32(attn_st_file *f, const char *key)
{
    const char *s = attn_st_metadata(f, key);
    TK_CHECK(s != NULL, "metadata %s present", key);
    return s ? strtof(s, NULL) : 0.0f;
}

static bool is_data(const char *name)
{
    static const char *const data[] = {"ids", "targets", "cu_seqlens", "logits", "loss"};
    for (size_t i = 0; i < sizeof data / sizeof *data; i++)
        if (!strcmp(name, data[i])) return true;
    return !strncmp(name, "grad.", 5);
}

static bool open_run(lm_run *r, const char *name)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    if (!(r->f = tk_golden(name))) return false;
    const char *style = attn_st_metadata(r->f, "style");
    attn_lm_config c = {.style = style && !strcmp(style, "llama") ? ATTN_LM_LLAMA : ATTN_LM_GPT2,
                        .vocab_size = meta_i64(r->f, "vocab_size"),
                        .context = meta_i64(r->f, "context"),
                        .d_model = meta_i64(r->f, "d_model"),
                        .num_layers = meta_i64(r->f, "num_layers"),
                        .num_heads = meta_i64(r->f, "num_heads"),
                        .ffn_hidden = meta_i64(r->f, "ffn_hidden"),
                        .norm_eps = meta_f32(r->f, "norm_eps"),
                        .rope_base = meta_f32(r->f, "rope_base"),
                        .rope_interleaved = meta_i64(r->f, "rope_interleaved"),
                        .untied = meta_i64(r->f, "untied")};
    if (c.style == ATTN_LM_LLAMA) c.num_kv_heads = meta_i64(r->f, "num_kv_heads");
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    r->params = attn_params_new();
    attn_status st = attn_lm_init(&r->m, r->params, &c, &rng);
    TK_CHECK(st == ATTN_OK, "%s: init: %s", name, attn_last_error());
    if (st != ATTN_OK) return false;
    bool ok = true;
    for (size_t i = 0; i < attn_params_count(r->params); i++) {
        st = attn_st_copy_into(r->f, attn_params_name(r->params, i), attn_params_at(r->params, i));
        TK_CHECK(st == ATTN_OK, "%s: parameter %s: %s", name, attn_params_name(r->params, i), attn_last_error());
        ok = ok && st == ATTN_OK;
    }
    for (size_t i = 0; i < attn_st_count(r->f); i++) {
        const char *t = attn_st_at(r->f, i)->name;
        TK_CHECK(is_data(t) || attn_params_get(r->params, t), "%s: torch tensor %s has no twin in our registry", name,
                 t);
    }
    int64_t n_cu, n_targets;
    r->ids = attn_st_load_i64(r->f, "ids", &r->total);
    r->targets = attn_st_load_i64(r->f, "targets", &n_targets);
    r->cu = attn_st_load_i64(r->f, "cu_seqlens", &n_cu);
    ok = ok && r->ids && r->targets && r->cu && n_targets == r->total && n_cu >= 2;
    TK_CHECK(ok, "%s: ids, targets and cu_seqlens load", name);
    r->batch = n_cu - 1;
    const double n = 2.0 * (double)c.num_layers * (3.0 * c.d_model + (double)r->m.cfg.ffn_hidden + 2.0 * c.context) +
                     2.0 * c.d_model + (double)r->total;
    r->tol = tk_tol_of(1, n, 4, 8);
    return ok;
}

static void close_run(lm_run *r)
{
    attn_lm_free(&r->m);
    attn_params_free(r->params);
    free(r->ids), free(r->targets), free(r->cu);
    attn_st_close(r->f);
}

/* Forward, loss and backward over the packed batch on `threads`; compares all. */
static void check_training(lm_run *r, int threads)
{
    char what[160];
    attn_ctx *ctx = attn_ctx_new(0);
    attn_ctx_set_num_threads(ctx, threads);
    attn_params_zero_grad(r->params);
    attn_tensor *logits = attn_lm_forward(ctx, &r->m, r->ids, r->cu, r->batch);
    TK_CHECK(logits != NULL, "%s: forward: %s", r->name, attn_last_error());
    if (!logits) {
        attn_ctx_free(ctx);
        return;
    }
    snprintf(what, sizeof what, "%s logits (%d threads)", r->name, threads);
    tk_golden_close_scaled(r->f, "logits", logits->data, logits->numel, r->tol);
    attn_tensor *loss = attn_cross_entropy(ctx, logits, r->targets, -100, 0.0f);
    TK_CHECK(loss && attn_backward(ctx, loss) == ATTN_OK, "%s: loss and backward: %s", r->name, attn_last_error());
    if (loss) tk_golden_close_scaled(r->f, "loss", loss->data, 1, r->tol);
    for (size_t i = 0; loss && i < attn_params_count(r->params); i++) {
        attn_tensor *p = attn_params_at(r->params, i);
        snprintf(what, sizeof what, "grad.%s", attn_params_name(r->params, i));
        TK_CHECK(p->grad != NULL, "%s: %s reached", r->name, what);
        if (p->grad) tk_golden_close_scaled(r->f, what, p->grad, p->numel, r->tol);
    }
    attn_ctx_free(ctx);
}

/* Each sequence alone (batch 1): its rows of the golden logits. */
static void check_alone(lm_run *r)
{
    attn_tensor *ref = tk_golden_tensor(r->f, "logits");
    if (!ref) return;
    const int64_t V = r->m.cfg.vocab_size;
    for (int64_t b = 0; b < r->batch; b++) {
        attn_ctx *ctx = attn_ctx_new(0);
        const int64_t n = r->cu[b + 1] - r->cu[b], cu[2] = {0, n};
        attn_tensor *logits = attn_lm_forward(ctx, &r->m, r->ids + r->cu[b], cu, 1);
        TK_CHECK(logits && logits->numel == n * V, "%s: sequence %lld alone: %s", r->name, (long long)b,
                 attn_last_error());
        char what[96];
        snprintf(what, sizeof what, "%s sequence %lld alone", r->name, (long long)b);
        if (logits) tk_close_scaled(what, logits->data, ref->data + r->cu[b] * V, n * V, r->tol);
        attn_ctx_free(ctx);
    }
    attn_tensor_free(ref);
}

/* The decoder fed in steps: at step s row b gets plan[b][s] tokens. */
static void check_decoder(lm_run *r)
{
    attn_tensor *ref = tk_golden_tensor(r->f, "logits");
    if (!ref || r->batch != 3) {
        attn_tensor_free(ref);
        return;
    }
    const int64_t V = r->m.cfg.vocab_size, R = r->batch;
    int64_t cap = 0;
    for (int64_t b = 0; b < R; b++) cap = r->cu[b + 1] - r->cu[b] > cap ? r->cu[b + 1] - r->cu[b] : cap;
    attn_lm_decoder *d = attn_lm_decoder_new(&r->m, R, cap), *first = d;
    TK_CHECK(d != NULL, "%s: decoder: %s", r->name, attn_last_error());
    float *logits = malloc((size_t)(R * V) * sizeof *logits);
    int64_t *tokens = malloc((size_t)r->total * sizeof *tokens);
    int64_t fed[3] = {0, 0, 0};
    int steps = 0;
    for (bool more = true; d && logits && tokens && more; steps++) {
        int64_t counts[3], at = 0;
        more = false;
        for (int64_t b = 0; b < R; b++) {
            const int64_t left = r->cu[b + 1] - r->cu[b] - fed[b];
            /* row 0: a prompt of 2, then 1 per step; row 1: all at once at step 1; row 2: 1 per
             * step, resting at step 2 */
            int64_t want = b == 0 ? (steps == 0 ? 2 : 1) : b == 1 ? (steps == 1 ? left : 0) : (steps == 2 ? 0 : 1);
            counts[b] = want < left ? want : left;
            memcpy(tokens + at, r->ids + r->cu[b] + fed[b], (size_t)counts[b] * sizeof *tokens);
            at += counts[b];
        }
        attn_status st = attn_lm_decoder_feed(d, logits, tokens, counts);
        TK_CHECK(st == ATTN_OK, "%s: decoder step %d: %s", r->name, steps, attn_last_error());
        if (st != ATTN_OK) break;
        for (int64_t b = 0; b < R; b++) {
            fed[b] += counts[b];
            TK_CHECK(attn_lm_decoder_length(d, b) == fed[b], "%s: row %lld holds %lld tokens", r->name, (long long)b,
                     (long long)fed[b]);
            more = more || fed[b] < r->cu[b + 1] - r->cu[b];
            char what[96];
            snprintf(what, sizeof what, "%s decoder step %d row %lld (%lld tokens)", r->name, steps, (long long)b,
                     (long long)fed[b]);
            if (fed[b]) tk_close_scaled(what, logits + b * V, ref->data + (r->cu[b] + fed[b] - 1) * V, V, r->tol);
        }
    }
    /* past the capacity (the longest row is full): refused, and the decoder as it was; a token
     * outside the vocabulary alike */
    int64_t full = 0;
    for (int64_t b = 0; b < R; b++) full = fed[b] == cap ? b : full;
    if (d && logits) {
        int64_t counts[3] = {0, 0, 0}, one = 0;
        counts[full] = 1;
        TK_CHECK(attn_lm_decoder_feed(d, logits, &one, counts) == ATTN_ERR_ARG && strstr(attn_last_error(), "capacity"),
                 "%s: a token past the capacity is refused: %s", r->name, attn_last_error());
        TK_CHECK(attn_lm_decoder_length(d, full) == cap, "%s: the refused feed changed nothing", r->name);
        d = attn_lm_decoder_new(&r->m, R, cap);
        int64_t bad = r->m.cfg.vocab_size, counts1[3] = {0, 1, 0};
        TK_CHECK(d && attn_lm_decoder_feed(d, logits, &bad, counts1) == ATTN_ERR_ARG &&
                     strstr(attn_last_error(), "vocabulary") && attn_lm_decoder_length(d, 1) == 0,
                 "%s: a token outside the vocabulary is refused: %s", r->name, attn_last_error());
        TK_CHECK(!attn_lm_decoder_new(&r->m, R, r->m.cfg.context + 1) && strstr(attn_last_error(), "context"),
                 "%s: a capacity past the context is refused: %s", r->name, attn_last_error());
    }
    if (d != first) attn_lm_decoder_free(first);
    attn_lm_decoder_free(d);
    free(logits), free(tokens);
    attn_tensor_free(ref);
}

static void check_weights(lm_run *r)
{
    attn_tensor *ref = tk_golden_tensor(r->f, "logits");
    if (!ref) return;
    const int64_t V = r->m.cfg.vocab_size, n = r->cu[2] - r->cu[1], L = r->m.cfg.num_layers, H = r->m.cfg.num_heads;
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *w = NULL;
    attn_tensor *logits = attn_lm_forward_weights(ctx, &r->m, r->ids + r->cu[1], n, &w);
    TK_CHECK(logits && w && w->ndim == 4 && w->shape[0] == L && w->shape[1] == H && w->shape[2] == n &&
                 w->shape[3] == n,
             "%s: forward with weights (L, H, n, n): %s", r->name, attn_last_error());
    if (logits && w) {
        char what[96];
        snprintf(what, sizeof what, "%s forward_weights logits", r->name);
        tk_close_scaled(what, logits->data, ref->data + r->cu[1] * V, n * V, r->tol);
        double worst = 0.0;
        bool causal = true;
        for (int64_t row = 0; row < L * H * n; row++) {
            const float *p = w->data + row * n;
            double sum = 0.0;
            for (int64_t j = 0; j < n; j++) {
                sum += p[j];
                if (j > row % n && p[j] != 0.0f) causal = false;
            }
            worst = fmax(worst, fabs(sum - 1.0));
        }
        TK_CHECK(causal && worst < 1e-5, "%s: weights causal (%d) and rows summing to 1 (worst %g)", r->name, causal,
                 worst);
    }
    attn_ctx_free(ctx);
    attn_tensor_free(ref);
}

typedef struct fd_model {
    attn_lm *m;
    const int64_t *ids, *cu;
} fd_model;

/* The model's logits; its parameters are tk_gradcheck's inputs, perturbed in place */
static attn_tensor *fd_forward(attn_ctx *ctx, attn_tensor **in, void *user)
{
    (void)in;
    const fd_model *f = user;
    return attn_lm_forward(ctx, f->m, f->ids, f->cu, 2);
}

static void check_finite_differences(attn_lm_style style)
{
    attn_lm_config c = {.style = style,
                        .vocab_size = 13,
                        .context = 6,
                        .d_model = 8,
                        .num_layers = 2,
                        .num_heads = 2,
                        .ffn_hidden = 12};
    if (style == ATTN_LM_LLAMA) c.num_kv_heads = 1, c.untied = true, c.rope_base = 100.0f;
    attn_params *p = attn_params_new();
    attn_lm m;
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    TK_CHECK(attn_lm_init(&m, p, &c, &rng) == ATTN_OK, "tiny model: %s", attn_last_error());
    attn_tensor *in[32];
    const int n = (int)attn_params_count(p);
    for (int i = 0; i < n && i < 32; i++) { /* random norms and biases too, so that none is at a special point */
        const char *name = attn_params_name(p, i);
        const bool norm = strstr(name, "norm") || strstr(name, "ln_");
        in[i] = attn_params_at(p, i);
        attn_tensor_fill_normal(in[i], &rng, norm ? 1.0f : 0.0f, 0.2f);
    }
    const int64_t ids[9] = {1, 5, 12, 0, 7, 7, 3, 11, 2}, cu[3] = {0, 5, 9};
    fd_model f = {&m, ids, cu};
    tk_gradcheck(style == ATTN_LM_GPT2 ? "lm gpt2 finite differences" : "lm llama (GQA, untied) finite differences",
                 fd_forward, in, n < 32 ? n : 32, &f, 1e-3f, 2e-3f, 2e-2f);
    attn_lm_free(&m);
    attn_params_free(p);
}

/* Refusals of attn_lm_init, each naming its field, and a struct of garbage left freeable */
static void check_init_refusals(void)
{
    static const struct {
        attn_lm_config cfg;
        const char *needle;
    } bad[] = {
        {{.style = ATTN_LM_GPT2, .vocab_size = 10, .context = 4, .d_model = 6, .num_layers = 1, .num_heads = 4},
         "multiple of num_heads"},
        {{.style = ATTN_LM_LLAMA,
          .vocab_size = 10,
          .context = 4,
          .d_model = 8,
          .num_layers = 1,
          .num_heads = 4,
          .num_kv_heads = 3},
         "num_kv_heads"},
        {{.style = ATTN_LM_GPT2,
          .vocab_size = 10,
          .context = 4,
          .d_model = 8,
          .num_layers = 1,
          .num_heads = 4,
          .untied = true},
         "tied"},
        {{.style = ATTN_LM_LLAMA, .vocab_size = 10, .context = 4, .d_model = 12, .num_layers = 1, .num_heads = 4},
         "even head width"},
        {{.style = ATTN_LM_GPT2,
          .vocab_size = 10,
          .context = 4,
          .d_model = 8,
          .num_layers = 1,
          .num_heads = 4,
          .dropout = 1.0f},
         "dropout"},
        {{.style = ATTN_LM_LLAMA,
          .vocab_size = 10,
          .context = 4,
          .d_model = 8,
          .num_layers = 1,
          .num_heads = 4,
          .rope_base = 0.5f},
         "rope_base"},
        {{.style = (attn_lm_style)7, .vocab_size = 10, .context = 4, .d_model = 8, .num_layers = 1, .num_heads = 4},
         "style"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        attn_params *p = attn_params_new();
        attn_lm m;
        memset(&m, 0xA5, sizeof m);
        TK_CHECK(attn_lm_init(&m, p, &bad[i].cfg, NULL) == ATTN_ERR_ARG && strstr(attn_last_error(), bad[i].needle) &&
                     attn_params_count(p) == 0,
                 "lm_init refusal %zu names %s and registers nothing: %s", i, bad[i].needle, attn_last_error());
        attn_lm_free(&m);
        attn_params_free(p);
    }
    attn_lm m;
    memset(&m, 0xA5, sizeof m);
    TK_CHECK(attn_lm_init(&m, NULL, &bad[0].cfg, NULL) == ATTN_ERR_ARG, "lm_init without a registry");
    attn_lm_free(&m); /* a struct of garbage before the call: freeable after it */
}

int main(void)
{
    check_init_refusals();
    check_finite_differences(ATTN_LM_GPT2);
    check_finite_differences(ATTN_LM_LLAMA);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        lm_run r;
        if (open_run(&r, CASES[i])) {
            check_training(&r, 1);
            check_training(&r, 2);
            check_alone(&r);
            check_decoder(&r);
            check_weights(&r);
        }
        close_run(&r);
    }
    return tk_finish("test_golden_lm");
}
