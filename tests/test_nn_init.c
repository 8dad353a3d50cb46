/* Module init: parameter names (state_dict style), PyTorch 1.13's init distributions, and the
 * forwards' shapes.
 *
 * Statistical tolerances, for n samples: a U(-b, b) sample mean has sd b / sqrt(3n) and its
 * variance (b^2 / 3) an estimate with relative sd ~ sqrt(0.8 / n); N(0, 1) has mean sd 1/sqrt(n)
 * and variance relative sd sqrt(2 / n). The bounds below are at least 6 sd wide; variances must
 * be within 5% as asked (more than 10 sd for the sizes used). Ranges are exact. */
#include "testkit.h"

#include <math.h>
#include <string.h>

static void moments(const float *x, int64_t n, double *mean, double *var)
{
    double s = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    *var = s2 / (double)n;
}

static bool within(const float *x, int64_t n, float bound)
{
    for (int64_t i = 0; i < n; i++)
        if (!(x[i] >= -bound && x[i] <= bound)) return false;
    return true;
}

/* U(-b, b): inside the range, mean ~0, variance b^2/3 within 5%. */
static void check_uniform(const char *what, const attn_tensor *t, double bound, double mean_tol)
{
    double mean, var;
    moments(t->data, t->numel, &mean, &var);
    TK_CHECK(within(t->data, t->numel, (float)bound), "%s inside +-%g", what, bound);
    TK_CHECK(fabs(mean) < mean_tol * bound, "%s mean %g, expected ~0", what, mean);
    double expect = bound * bound / 3.0;
    TK_CHECK(fabs(var - expect) < 0.05 * expect, "%s variance %g, expected %g", what, var, expect);
}

static void test_linear_init(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_linear_layer fc;
    TK_OK(attn_linear_init(&fc, p, "fc", 500, 300, true, &rng));
    TK_CHECK(attn_params_count(p) == 2 && strcmp(attn_params_name(p, 0), "fc.weight") == 0 &&
                 strcmp(attn_params_name(p, 1), "fc.bias") == 0,
             "Linear names fc.weight, fc.bias in that order");
    TK_CHECK(fc.weight->ndim == 2 && fc.weight->shape[0] == 300 && fc.weight->shape[1] == 500 && fc.bias->ndim == 1 &&
                 fc.bias->shape[0] == 300 && fc.in_features == 500 && fc.out_features == 300,
             "Linear(500, 300) shapes: weight (out, in), bias (out)");
    /* 150000 weights: mean sd 0.0015 b, so 0.01 b is ~7 sd */
    check_uniform("Linear(500,300).weight", fc.weight, 1.0 / sqrt(500.0), 0.01);
    /* 300 biases: range and mean (sd 0.033 b) only; the variance is too noisy at n = 300 */
    TK_CHECK(within(fc.bias->data, 300, (float)(1.0 / sqrt(500.0))), "Linear bias inside +-1/sqrt(in)");
    double mean, var;
    moments(fc.bias->data, 300, &mean, &var);
    TK_CHECK(fabs(mean) < 0.2 / sqrt(500.0) && var > 0.5 / (3.0 * 500.0),
             "Linear bias mean %g, variance %g look like U(+-1/sqrt(in))", mean, var);
    TK_CHECK(fc.weight->requires_grad && fc.bias->requires_grad, "Linear parameters require grad");

    attn_linear_layer bare, nobias;
    TK_OK(attn_linear_init(&bare, p, "", 3, 2, true, &rng));
    TK_OK(attn_linear_init(&nobias, p, "proj", 3, 2, false, &rng));
    TK_CHECK(attn_params_get(p, "weight") == bare.weight && attn_params_get(p, "bias") == bare.bias,
             "an empty prefix gives the bare names weight, bias");
    TK_CHECK(nobias.bias == NULL && attn_params_get(p, "proj.weight") && !attn_params_get(p, "proj.bias"),
             "bias = false registers no bias");
    attn_linear_layer dup;
    TK_CHECK(attn_linear_init(&dup, p, "fc", 2, 2, true, &rng) != ATTN_OK && strstr(attn_last_error(), "fc.weight"),
             "a duplicate prefix fails naming the parameter: %s", attn_last_error());
    TK_CHECK(attn_linear_init(&dup, p, "zero", 0, 2, true, &rng) == ATTN_ERR_ARG, "Linear with 0 inputs: %s",
             attn_last_error());

    attn_params *q = attn_params_new();
    attn_rng_seed(&rng, 1);
    attn_linear_layer again;
    TK_OK(attn_linear_init(&again, q, "fc", 500, 300, true, &rng));
    TK_CHECK(memcmp(again.weight->data, fc.weight->data, 150000 * sizeof(float)) == 0 &&
                 memcmp(again.bias->data, fc.bias->data, 300 * sizeof(float)) == 0,
             "the same seed gives the same Linear");
    attn_params_free(q);
    attn_params_free(p);
}

static void test_embedding_init(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 2);
    attn_embedding_layer emb;
    TK_OK(attn_embedding_init(&emb, p, "tok", 1000, 64, 3, &rng));
    TK_CHECK(attn_params_count(p) == 1 && strcmp(attn_params_name(p, 0), "tok.weight") == 0,
             "Embedding registers tok.weight only");
    TK_CHECK(emb.weight->shape[0] == 1000 && emb.weight->shape[1] == 64 && emb.padding_idx == 3,
             "Embedding(1000, 64) shape and padding_idx");
    bool pad_zero = true;
    for (int j = 0; j < 64; j++) pad_zero = pad_zero && emb.weight->data[3 * 64 + j] == 0.0f;
    TK_CHECK(pad_zero, "the padding row is zero");
    /* 64000 N(0, 1) draws: mean sd 0.004 (bound 0.03 = 7.5 sd), variance rel sd 0.0056 */
    double mean, var;
    moments(emb.weight->data, emb.weight->numel, &mean, &var);
    TK_CHECK(fabs(mean) < 0.03, "Embedding mean %g, expected ~0", mean);
    TK_CHECK(fabs(var - 1.0) < 0.05, "Embedding variance %g, expected ~1", var);
    attn_embedding_layer bad;
    TK_CHECK(attn_embedding_init(&bad, p, "bad", 10, 4, 10, &rng) == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "padding_idx 10"),
             "Embedding padding_idx >= num: %s", attn_last_error());
    attn_embedding_layer nopad;
    TK_OK(attn_embedding_init(&nopad, p, "pos", 5, 4, -7, &rng));
    TK_CHECK(nopad.padding_idx == -1, "a negative padding_idx means none");

    attn_ctx *ctx = attn_ctx_new(0);
    int64_t ids[6] = {3, 1, 999, 0, 3, 5}, shape[2] = {2, 3};
    attn_tensor *y = attn_embedding_forward(ctx, &emb, ids, 2, shape);
    TK_CHECK(y && y->ndim == 3 && y->shape[2] == 64 && y->data[0] == 0.0f &&
                 y->data[2 * 64] == emb.weight->data[999 * 64],
             "Embedding forward gathers rows");
    attn_ctx_free(ctx);
    attn_params_free(p);
}

static void test_layer_norm_init(void)
{
    attn_params *p = attn_params_new();
    attn_layer_norm_layer ln;
    TK_OK(attn_layer_norm_init(&ln, p, "enc.norm1", 6, 1e-5f));
    TK_CHECK(attn_params_count(p) == 2 && strcmp(attn_params_name(p, 0), "enc.norm1.weight") == 0 &&
                 strcmp(attn_params_name(p, 1), "enc.norm1.bias") == 0,
             "LayerNorm names enc.norm1.weight, enc.norm1.bias");
    float ones[6] = {1, 1, 1, 1, 1, 1}, zeros[6] = {0};
    tk_close("LayerNorm weight ones", ln.weight->data, ones, 6, 0, 0);
    tk_close("LayerNorm bias zeros", ln.bias->data, zeros, 6, 0, 0);
    TK_CHECK(ln.dim == 6 && ln.eps == 1e-5f, "LayerNorm dim and eps kept");
    attn_layer_norm_layer bad;
    TK_CHECK(attn_layer_norm_init(&bad, p, "bad", 4, -1.0f) == ATTN_ERR_ARG, "LayerNorm negative eps: %s",
             attn_last_error());

    attn_ctx *ctx = attn_ctx_new(0);
    int64_t xs[2] = {3, 6};
    float xd[18];
    for (int i = 0; i < 18; i++) xd[i] = (float)(i % 7) - 2.5f;
    attn_tensor *x = attn_tensor_from(ctx, 2, xs, xd);
    attn_tensor *y = attn_layer_norm_forward(ctx, &ln, x);
    TK_CHECK(y && y->ndim == 2 && y->shape[0] == 3 && y->shape[1] == 6, "LayerNorm forward keeps the shape: %s",
             y ? "" : attn_last_error());
    attn_ctx_free(ctx);
    attn_params_free(p);
}

static void test_conv1d_init(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 3);
    attn_conv1d_layer conv;
    TK_OK(attn_conv1d_init(&conv, p, "conv", 100, 200, 3, 1, true, &rng));
    TK_CHECK(attn_params_count(p) == 2 && strcmp(attn_params_name(p, 0), "conv.weight") == 0 &&
                 strcmp(attn_params_name(p, 1), "conv.bias") == 0,
             "Conv1d names conv.weight, conv.bias");
    TK_CHECK(conv.weight->ndim == 3 && conv.weight->shape[0] == 200 && conv.weight->shape[1] == 100 &&
                 conv.weight->shape[2] == 3 && conv.bias->shape[0] == 200,
             "Conv1d(100, 200, 3) shapes: weight (out, in, k), bias (out)");
    /* fan_in = in * k = 300; 60000 weights: mean sd 0.0024 b */
    check_uniform("Conv1d(100,200,3).weight", conv.weight, 1.0 / sqrt(300.0), 0.015);
    TK_CHECK(within(conv.bias->data, 200, (float)(1.0 / sqrt(300.0))), "Conv1d bias inside +-1/sqrt(in*k)");
    attn_conv1d_layer bad;
    TK_CHECK(attn_conv1d_init(&bad, p, "bad", 2, 2, 0, 0, true, &rng) == ATTN_ERR_ARG, "Conv1d kernel 0: %s",
             attn_last_error());

    attn_ctx *ctx = attn_ctx_new(0);
    int64_t xs[3] = {2, 100, 9};
    attn_tensor *x = attn_tensor_zeros(ctx, 3, xs);
    attn_tensor *y = attn_conv1d_forward(ctx, &conv, x);
    TK_CHECK(y && y->shape[0] == 2 && y->shape[1] == 200 && y->shape[2] == 9 && y->data[0] == conv.bias->data[0],
             "Conv1d forward with k 3, padding 1 keeps the length");
    attn_ctx_free(ctx);
    attn_params_free(p);
}

/* Arguments no module can be built from are refused at init, naming them, instead of being
 * accepted and failing later, or silently replaced (a NaN eps became 1e-5 in the norms while the
 * config kept NaN; a negative kdim became E). Draws with a negative std or lo > hi are refused as
 * torch refuses them. */
static void test_refused_configs(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    attn_encoder_layer enc;
    const float bad_eps[3] = {NAN, INFINITY, -1.0f};
    for (int i = 0; i < 3; i++) {
        attn_transformer_config c = {.d_model = 8, .num_heads = 2, .dim_feedforward = 16, .eps = bad_eps[i]};
        TK_CHECK(attn_encoder_layer_init(&enc, p, "enc", &c, &rng) == ATTN_ERR_ARG, "transformer eps %g is refused",
                 (double)bad_eps[i]);
    }
    attn_learned_pe pe;
    TK_CHECK(attn_learned_pe_init(&pe, p, "pe0", 0, 4, &rng) == ATTN_ERR_ARG &&
                 attn_learned_pe_init(&pe, p, "pe1", 4, 0, &rng) == ATTN_ERR_ARG,
             "learned positions of max_len 0 or dim 0 are refused");
    attn_mha_layer mha;
    TK_CHECK(attn_mha_init(&mha, p, "mha", 8, 2, -1, 0, true, 0.0f, &rng) == ATTN_ERR_ARG &&
                 attn_mha_init(&mha, p, "mha", 8, 2, 0, -5, true, 0.0f, &rng) == ATTN_ERR_ARG,
             "mha kdim or vdim < 0 is refused");
    attn_classifier cls;
    attn_classifier_config cc = attn_classifier_defaults(50);
    cc.attention = ATTN_CLASSIFIER_ADDITIVE;
    cc.additive_hidden = -1;
    TK_CHECK(attn_classifier_init(&cls, p, &cc, &rng) == ATTN_ERR_ARG, "classifier additive_hidden -1 is refused");
    cc = attn_classifier_defaults(50);
    cc.sinusoidal = true;
    cc.embed_dim = 7;
    cc.num_heads = 7;
    TK_CHECK(attn_classifier_init(&cls, p, &cc, &rng) == ATTN_ERR_ARG,
             "classifier with sinusoidal positions and an odd embed_dim is refused at init");
    attn_ctx *ctx = attn_ctx_new(1);
    TK_CHECK(!attn_sinusoidal_table(ctx, 4, 4, (attn_pe_layout)9) && attn_last_status() == ATTN_ERR_ARG,
             "sinusoidal layout 9 is refused");
    attn_tensor *t = attn_tensor_zeros(ctx, 1, (int64_t[]){8});
    TK_CHECK(attn_tensor_fill_normal(t, &rng, 0.0f, -1.0f) == ATTN_ERR_ARG &&
                 attn_tensor_fill_normal(t, &rng, 0.0f, NAN) == ATTN_ERR_ARG &&
                 attn_tensor_fill_uniform(t, &rng, 1.0f, 0.0f) == ATTN_ERR_ARG && t->data[0] == 0.0f,
             "normal std < 0 or NaN and uniform lo > hi are refused, the tensor unchanged");
    TK_OK(attn_tensor_fill_uniform(t, &rng, 2.0f, 2.0f));
    TK_CHECK(t->data[7] == 2.0f, "uniform over [2, 2] gives 2");
    attn_tensor *x = attn_tensor_zeros(ctx, 3, (int64_t[]){1, 2, 5});
    attn_tensor *w = attn_tensor_zeros(ctx, 3, (int64_t[]){3, 2, 0});
    TK_CHECK(!attn_conv1d(ctx, x, w, NULL, 0) && attn_last_status() == ATTN_ERR_SHAPE,
             "conv1d with a kernel of size 0 is refused (torch: kernel size should be greater than zero)");
    attn_ctx_free(ctx);
    attn_params_free(p);
}

/* A module init that fails part way takes back what it registered: a failed classifier (3 heads
 * do not divide 128) left "embedding.weight" and "pos_encoding" in the registry, and the retry
 * with a good config then failed on a name that exists, hiding the real error. */
static void test_failed_init_rolls_back(void)
{
    attn_params *p = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 10);
    attn_classifier cls;
    attn_classifier_config cc = attn_classifier_defaults(50);
    cc.num_heads = 3;
    TK_CHECK(attn_classifier_init(&cls, p, &cc, &rng) == ATTN_ERR_ARG && attn_params_count(p) == 0,
             "a failed classifier init leaves no parameter (%zu)", attn_params_count(p));
    cc.num_heads = 4;
    TK_OK(attn_classifier_init(&cls, p, &cc, &rng));
    const size_t n = attn_params_count(p);
    attn_encoder_layer enc;
    attn_transformer_config tc = {.d_model = 8, .num_heads = 2, .dim_feedforward = 16};
    TK_OK(attn_encoder_layer_init(&enc, p, "layer", &tc, &rng));
    TK_CHECK(attn_encoder_layer_init(&enc, p, "layer", &tc, &rng) == ATTN_ERR_ARG && attn_params_count(p) == n + 12,
             "a second layer of the same name fails and takes back its parameters (%zu of %zu)", attn_params_count(p),
             n + 12);
    attn_classifier_free(&cls);
    attn_params_free(p);
}

int main(void)
{
    test_refused_configs();
    test_failed_init_rolls_back();
    test_linear_init();
    test_embedding_init();
    test_layer_norm_init();
    test_conv1d_init();
    return tk_finish("test_nn_init");
}
