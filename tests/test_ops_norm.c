/* Layer norm, RMSNorm and dropout.
 * Layer norm and RMSNorm (the kernels with mean NULL): the fast row kernels against their _ref twins (cols = 1, odd cols, a block big
 * enough for the threaded path, weight/bias present or NULL, each gradient present or NULL,
 * accumulation into non-zero gradients); the op against mean/variance computed in double here;
 * gradients of x, weight and bias against central finite differences; bad shapes and eps.
 * Dropout: the fraction dropped on a big tensor, the 1/(1-p) scale, eval and p = 0 return the
 * input itself, the same seed gives the same mask, p = 1, the gradient, bad p.
 *
 * Tolerances:
 *   layer norm fast vs _ref: atol 1e-5 + rtol 1e-5 (float32 arithmetic against double per
 *     element; row sums are double in both);
 *   layer norm op vs double: atol 1e-5 + rtol 1e-5 (the same float32 against double);
 *   gradient checks: eps 1e-3, atol 2e-3 + rtol 2e-2 (float32 central differences: the probe
 *     loss sum(y * r) over ~100-200 outputs of size ~1 has ~1e-6 rounding, / 2 eps ~ 5e-4;
 *     layer norm's curvature adds eps^2 |f'''| / 6 ~ 1e-6). */
#include "testkit.h"
#include "kernels/kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define K_ATOL 1e-5f
#define K_RTOL 1e-5f
#define FWD_ATOL 1e-5f
#define FWD_RTOL 1e-5f
#define FD_EPS 1e-3f
#define FD_ATOL 2e-3f
#define FD_RTOL 2e-2f
#define LN_EPS 1e-5f

static float *randn_buf(uint64_t seed, int64_t n, float mean, float std)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = mean + std * attn_rng_normal(&rng);
    return p;
}

static float *copy_buf(const float *p, int64_t n)
{
    float *q = malloc((size_t)(n ? n : 1) * sizeof(float));
    memcpy(q, p, (size_t)n * sizeof(float));
    return q;
}

/* ---- layer norm kernels: fast against _ref ---- */

static void layernorm_pair(int64_t rows, int64_t cols, bool affine, bool grads, bool centred)
{
    int64_t n = rows * cols;
    float *x = randn_buf(rows * 100 + cols, n, 0.5f, 2.0f);
    float *w = affine ? randn_buf(3, cols, 1.0f, 0.3f) : NULL;
    float *b_buf = affine ? randn_buf(4, cols, 0.0f, 0.3f) : NULL, *b = b_buf;
    float *y = malloc((size_t)n * sizeof(float)), *y_ref = malloc((size_t)n * sizeof(float));
    float *mean = centred ? malloc((size_t)rows * sizeof(float)) : NULL; /* NULL: RMSNorm */
    float *rstd = malloc((size_t)rows * sizeof(float));
    float *mean_ref = centred ? malloc((size_t)rows * sizeof(float)) : NULL;
    float *rstd_ref = malloc((size_t)rows * sizeof(float));
    if (!centred) b = NULL;
    attn__layernorm_rows(y, mean, rstd, x, w, b, rows, cols, LN_EPS, 2);
    attn__layernorm_rows_ref(y_ref, mean_ref, rstd_ref, x, w, b, rows, cols, LN_EPS);
    char what[96];
    const char *name = centred ? "layernorm" : "rmsnorm";
    snprintf(what, sizeof what, "%s %lldx%lld%s", name, (long long)rows, (long long)cols, affine ? " affine" : "");
    tk_close(what, y, y_ref, n, K_ATOL, K_RTOL);
    if (centred) tk_close("layernorm mean", mean, mean_ref, rows, K_ATOL, K_RTOL);
    tk_close("layernorm rstd", rstd, rstd_ref, rows, K_ATOL, K_RTOL);

    float *dy = randn_buf(5 + n, n, 0.0f, 1.0f);
    float *dx = randn_buf(6, n, 0.0f, 1.0f), *dw = randn_buf(7, cols, 0.0f, 1.0f);
    float *db = randn_buf(8, cols, 0.0f, 1.0f);
    float *dx_ref = copy_buf(dx, n), *dw_ref = copy_buf(dw, cols), *db_ref = copy_buf(db, cols);
    /* grads: all three; otherwise dx only, then dw and db only */
    attn__layernorm_rows_backward(dx, grads ? dw : NULL, grads ? db : NULL, dy, x, mean_ref, rstd_ref, w, rows, cols,
                                  2);
    attn__layernorm_rows_backward_ref(dx_ref, grads ? dw_ref : NULL, grads ? db_ref : NULL, dy, x, mean_ref, rstd_ref,
                                      w, rows, cols);
    if (!grads) {
        attn__layernorm_rows_backward(NULL, dw, db, dy, x, mean_ref, rstd_ref, w, rows, cols, 2);
        attn__layernorm_rows_backward_ref(NULL, dw_ref, db_ref, dy, x, mean_ref, rstd_ref, w, rows, cols);
    }
    snprintf(what, sizeof what, "%s backward %lldx%lld%s%s", name, (long long)rows, (long long)cols,
             affine ? " affine" : "", grads ? "" : " (split calls)");
    tk_close(what, dx, dx_ref, n, K_ATOL, K_RTOL);
    tk_close("layernorm dw", dw, dw_ref, cols, K_ATOL, K_RTOL);
    tk_close("layernorm db", db, db_ref, cols, K_ATOL, K_RTOL);
    free(x), free(w), free(y), free(y_ref), free(mean), free(rstd), free(mean_ref);
    free(b_buf);
    free(rstd_ref), free(dy), free(dx), free(dw), free(db), free(dx_ref), free(dw_ref);
    free(db_ref);
}

static void test_layernorm_kernels(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 1}, {3, 7}, {4, 8}, {5, 33}, {2, 130}, {300, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int affine = 0; affine <= 1; affine++)
            for (int grads = 0; grads <= 1; grads++)
                for (int centred = 0; centred <= 1; centred++)
                    layernorm_pair(shapes[s][0], shapes[s][1], affine, grads, centred);
}

/* ---- layer norm op ---- */

/* y = (x - mean) / sqrt(var + eps) * w + b per row of the last dim, in double. */
static void layernorm_direct(float *y, const attn_tensor *x, const attn_tensor *w, const attn_tensor *b, float eps)
{
    int64_t c = x->shape[x->ndim - 1], rows = x->numel / c;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * c;
        double mu = 0.0, var = 0.0;
        for (int64_t j = 0; j < c; j++) mu += xr[j];
        mu /= (double)c;
        for (int64_t j = 0; j < c; j++) var += (xr[j] - mu) * (xr[j] - mu);
        var /= (double)c;
        for (int64_t j = 0; j < c; j++) {
            double v = (xr[j] - mu) / sqrt(var + eps);
            y[r * c + j] = (float)(v * (w ? w->data[j] : 1.0) + (b ? b->data[j] : 0.0));
        }
    }
}

typedef struct ln_case {
    bool weight, bias;
} ln_case;

static attn_tensor *ln_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const ln_case *c = user;
    return attn_layer_norm(ctx, in[0], c->weight ? in[1] : NULL, c->bias ? in[2] : NULL, LN_EPS);
}

static void test_layernorm_op(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7}, sc[1] = {7};
    attn_tensor *in3[3] = {tk_randn(51, 3, s3), tk_randn(52, 1, sc), tk_randn(53, 1, sc)};
    attn_tensor *in4[3] = {tk_randn(54, 4, s4), in3[1], in3[2]};
    static const ln_case cases[4] = {{true, true}, {true, false}, {false, true}, {false, false}};
    float ref[210];
    char what[64];
    for (int k = 0; k < 4; k++) {
        const ln_case *c = &cases[k];
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = ln_fwd(ctx, in4, (void *)c);
        TK_NOT_NULL(y);
        if (y) {
            layernorm_direct(ref, in4[0], c->weight ? in4[1] : NULL, c->bias ? in4[2] : NULL, LN_EPS);
            snprintf(what, sizeof what, "layer_norm 2x3x5x7 weight %d bias %d", c->weight, c->bias);
            tk_close(what, y->data, ref, 210, FWD_ATOL, FWD_RTOL);
        }
        attn_ctx_free(ctx);
        snprintf(what, sizeof what, "layer_norm 3x5x7 weight %d bias %d", c->weight, c->bias);
        tk_gradcheck(what, ln_fwd, in3, 1 + c->weight + c->bias, (void *)c, FD_EPS, FD_ATOL, FD_RTOL);
        snprintf(what, sizeof what, "layer_norm 2x3x5x7 weight %d bias %d", c->weight, c->bias);
        tk_gradcheck(what, ln_fwd, in4, 1 + c->weight + c->bias, (void *)c, FD_EPS, FD_ATOL, FD_RTOL);
    }
    /* weight/bias that require grad while x does not */
    attn_tensor_set_requires_grad(in3[0], false);
    ln_case both = {true, true};
    tk_gradcheck("layer_norm weight and bias only", ln_fwd, in3, 3, &both, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_free(in3[0]);
    attn_tensor_free(in3[1]);
    attn_tensor_free(in3[2]);
    attn_tensor_free(in4[0]);
}

/* ---- RMSNorm op ---- */

/* y = x / sqrt(mean(x^2) + eps) * w per row of the last dim, in double (Llama's RMSNorm). */
static void rmsnorm_direct(float *y, const attn_tensor *x, const attn_tensor *w, float eps)
{
    int64_t c = x->shape[x->ndim - 1], rows = x->numel / c;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * c;
        double ms = 0.0;
        for (int64_t j = 0; j < c; j++) ms += (double)xr[j] * xr[j];
        ms /= (double)c;
        for (int64_t j = 0; j < c; j++) y[r * c + j] = (float)(xr[j] / sqrt(ms + eps) * (w ? w->data[j] : 1.0));
    }
}

static attn_tensor *rms_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_rms_norm(ctx, in[0], *(const bool *)user ? in[1] : NULL, LN_EPS);
}

static void test_rmsnorm_op(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7}, sc[1] = {7};
    attn_tensor *in3[2] = {tk_randn(61, 3, s3), tk_randn(62, 1, sc)};
    attn_tensor *in4[2] = {tk_randn(64, 4, s4), in3[1]};
    float ref[210];
    char what[64];
    for (int k = 0; k < 2; k++) {
        bool weight = k;
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = rms_fwd(ctx, in4, &weight);
        TK_NOT_NULL(y);
        if (y) {
            rmsnorm_direct(ref, in4[0], weight ? in4[1] : NULL, LN_EPS);
            snprintf(what, sizeof what, "rms_norm 2x3x5x7 weight %d", weight);
            tk_close(what, y->data, ref, 210, FWD_ATOL, FWD_RTOL);
        }
        attn_ctx_free(ctx);
        snprintf(what, sizeof what, "rms_norm 3x5x7 weight %d", weight);
        tk_gradcheck(what, rms_fwd, in3, 1 + weight, &weight, FD_EPS, FD_ATOL, FD_RTOL);
        snprintf(what, sizeof what, "rms_norm 2x3x5x7 weight %d", weight);
        tk_gradcheck(what, rms_fwd, in4, 1 + weight, &weight, FD_EPS, FD_ATOL, FD_RTOL);
    }
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t xs[2] = {2, 6}, ws[1] = {5};
    attn_tensor *x = attn_tensor_zeros(ctx, 2, xs), *w = attn_tensor_zeros(ctx, 1, ws);
    TK_CHECK(attn_rms_norm(ctx, x, w, LN_EPS) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "rms_norm") && strstr(attn_last_error(), "(5)"),
             "rms_norm weight of the wrong size names it: %s", attn_last_error());
    TK_CHECK(attn_rms_norm(ctx, x, NULL, -1.0f) == NULL && attn_last_status() == ATTN_ERR_ARG,
             "rms_norm negative eps: %s", attn_last_error());
    /* a zero row: 0 / sqrt(eps) = 0, and finite gradients */
    attn_tensor *y0 = attn_rms_norm(ctx, x, NULL, LN_EPS);
    TK_CHECK(y0 && y0->data[0] == 0.0f && y0->data[11] == 0.0f, "rms_norm of zeros is zeros");
    attn_ctx_free(ctx);
    attn_tensor_free(in3[0]);
    attn_tensor_free(in3[1]);
    attn_tensor_free(in4[0]);
}

/* Without weight and bias every row has mean 0 and variance var / (var + eps) ~ 1. */
static void test_layernorm_stats(void)
{
    int64_t shape[2] = {4, 9};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *x = attn_tensor_alloc(2, shape);
    attn_rng rng;
    attn_rng_seed(&rng, 6);
    attn_tensor_fill_normal(x, &rng, 3.0f, 5.0f);
    attn_tensor *y = attn_layer_norm(ctx, x, NULL, NULL, LN_EPS);
    bool ok = y != NULL;
    for (int64_t r = 0; ok && r < 4; r++) {
        double mu = 0.0, var = 0.0;
        for (int j = 0; j < 9; j++) mu += y->data[r * 9 + j] / 9.0;
        for (int j = 0; j < 9; j++) {
            double dev = y->data[r * 9 + j] - mu;
            var += dev * dev / 9.0;
        }
        ok = fabs(mu) < 1e-6 && fabs(var - 1.0) < 1e-5;
    }
    TK_CHECK(ok, "layer_norm rows have mean 0 and variance 1");
    /* one column: xhat = 0, the output is the bias */
    int64_t s1[2] = {3, 1}, sb[1] = {1};
    attn_tensor *x1 = attn_tensor_from(ctx, 2, s1, (float[]){1.0f, -2.0f, 7.0f});
    attn_tensor *b1 = attn_tensor_from(ctx, 1, sb, (float[]){0.25f});
    attn_tensor *y1 = attn_layer_norm(ctx, x1, NULL, b1, LN_EPS);
    TK_CHECK(y1 && y1->data[0] == 0.25f && y1->data[1] == 0.25f && y1->data[2] == 0.25f,
             "layer_norm over one column gives the bias");
    /* and no gradient reaches x, exactly (torch: 0): dy * w - mean(dy * w) = 0 for any dy and w,
     * though rstd = 1/sqrt(eps) = 1e6 magnifies any rounding of it (it gave -7.7e-3) */
    attn_tensor *xg = attn_tensor_alloc(2, s1), *wg = attn_tensor_alloc(1, sb);
    memcpy(xg->data, (float[]){1.0f, -2.0f, 7.0f}, 3 * sizeof(float));
    wg->data[0] = 0.7310586f;
    attn_tensor_set_requires_grad(xg, true);
    attn_tensor_set_requires_grad(wg, true);
    attn_tensor *yg = attn_layer_norm(ctx, xg, wg, NULL, 1e-12f);
    attn_tensor *dy = attn_tensor_from(ctx, 2, s1, (float[]){0.3f, -1.1f, 2.9f});
    attn_tensor *loss = yg && dy ? attn_sum_all(ctx, attn_mul(ctx, yg, dy)) : NULL;
    bool zero = loss && attn_backward(ctx, loss) == ATTN_OK && xg->grad;
    for (int i = 0; zero && i < 3; i++) zero = xg->grad[i] == 0.0f;
    TK_CHECK(zero, "layer_norm over one column, eps 1e-12: dx exactly 0 (got %g %g %g)", xg->grad ? xg->grad[0] : NAN,
             xg->grad ? xg->grad[1] : NAN, xg->grad ? xg->grad[2] : NAN);
    attn_tensor_free(xg);
    attn_tensor_free(wg);
    attn_tensor_free(x);
    attn_ctx_free(ctx);
}

static void test_layernorm_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t xs[2] = {2, 6}, ws[1] = {5}, w2[2] = {1, 6}, good[1] = {6};
    attn_tensor *x = attn_tensor_zeros(ctx, 2, xs), *w = attn_tensor_zeros(ctx, 1, ws);
    attn_tensor *w2d = attn_tensor_zeros(ctx, 2, w2), *g = attn_tensor_zeros(ctx, 1, good);
    TK_CHECK(attn_layer_norm(ctx, x, w, NULL, LN_EPS) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(2, 6)") && strstr(attn_last_error(), "(5)"),
             "layer_norm weight of the wrong size names both shapes: %s", attn_last_error());
    TK_CHECK(attn_layer_norm(ctx, x, g, w2d, LN_EPS) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(1, 6)"),
             "layer_norm 2-D bias: %s", attn_last_error());
    TK_CHECK(attn_layer_norm(ctx, x, g, g, -1.0f) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "eps"),
             "layer_norm negative eps: %s", attn_last_error());
    TK_CHECK(attn_layer_norm(ctx, x, g, g, NAN) == NULL && attn_last_status() == ATTN_ERR_ARG, "layer_norm NaN eps: %s",
             attn_last_error());
    attn_tensor *s = attn_tensor_zeros(ctx, 0, NULL);
    TK_CHECK(attn_layer_norm(ctx, s, NULL, NULL, LN_EPS) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "layer_norm of a scalar: %s", attn_last_error());
    TK_CHECK(attn_layer_norm(ctx, NULL, g, g, LN_EPS) == NULL, "NULL in, NULL out");
    attn_ctx_free(ctx);
}

/* ---- dropout ---- */

static void test_dropout_statistics(void)
{
    int64_t shape[2] = {400, 250}; /* 100000 elements: the dropped fraction has sd 0.0015 */
    attn_ctx *ctx = attn_ctx_new(123);
    attn_tensor *x = attn_tensor_alloc(2, shape);
    for (int64_t i = 0; i < x->numel; i++) x->data[i] = 1.0f + (float)(i % 7);
    float ps[3] = {0.1f, 0.3f, 0.75f};
    for (int k = 0; k < 3; k++) {
        float p = ps[k];
        attn_tensor *y = attn_dropout(ctx, x, p);
        TK_NOT_NULL(y);
        if (!y) continue;
        int64_t zeros = 0, bad_scale = 0;
        for (int64_t i = 0; i < y->numel; i++) {
            if (y->data[i] == 0.0f)
                zeros++;
            else if (fabsf(y->data[i] - x->data[i] / (1.0f - p)) > 1e-6f * y->data[i])
                bad_scale++;
        }
        double frac = (double)zeros / (double)y->numel;
        TK_CHECK(fabs(frac - p) < 0.01, "dropout p %g dropped a fraction %g", (double)p, frac);
        TK_CHECK(bad_scale == 0, "dropout p %g: %lld kept values not scaled by 1/(1-p)", (double)p,
                 (long long)bad_scale);
    }
    attn_tensor_free(x);
    attn_ctx_free(ctx);
}

static void test_dropout_modes(void)
{
    int64_t shape[3] = {3, 5, 7};
    attn_tensor *x = tk_randn(61, 3, shape);
    attn_ctx *ctx = attn_ctx_new(1);
    TK_CHECK(attn_dropout(ctx, x, 0.0f) == x, "dropout p = 0 returns the input itself");
    attn_ctx_set_training(ctx, false);
    TK_CHECK(attn_dropout(ctx, x, 0.5f) == x, "dropout in eval mode returns the input itself");
    attn_ctx_set_training(ctx, true);

    /* p = 1: everything zero, and no gradient flows */
    attn_tensor *y = attn_dropout(ctx, x, 1.0f);
    bool all_zero = y != NULL && y != x;
    for (int64_t i = 0; all_zero && i < y->numel; i++) all_zero = y->data[i] == 0.0f;
    TK_CHECK(all_zero, "dropout p = 1 zeroes everything");
    attn_tensor_zero_grad(x);
    TK_OK(attn_backward(ctx, attn_sum_all(ctx, y)));
    bool grad_zero = x->grad != NULL;
    for (int64_t i = 0; grad_zero && i < x->numel; i++) grad_zero = x->grad[i] == 0.0f;
    TK_CHECK(grad_zero, "dropout p = 1: gradient 0");

    /* the gradient is the mask times 1/(1-p) */
    attn_ctx_reset(ctx);
    attn_tensor_zero_grad(x);
    y = attn_dropout(ctx, x, 0.4f);
    TK_OK(attn_backward(ctx, attn_sum_all(ctx, y)));
    bool mask_ok = y && x->grad;
    for (int64_t i = 0; mask_ok && i < x->numel; i++)
        mask_ok = fabsf(x->grad[i] - (y->data[i] != 0.0f ? 1.0f / 0.6f : 0.0f)) < 1e-6f;
    TK_CHECK(mask_ok, "dropout gradient = kept / (1 - p)");

    /* a product, as torch.nn.functional.dropout computes it: dropped NaN and inf give NaN */
    attn_ctx_reset(ctx);
    attn_tensor *bad = attn_tensor_alloc(3, shape);
    for (int64_t i = 0; bad && i < bad->numel; i++) bad->data[i] = i % 2 ? NAN : INFINITY;
    y = bad ? attn_dropout(ctx, bad, 0.5f) : NULL;
    int64_t nan = 0, inf = 0;
    for (int64_t i = 0; y && i < y->numel; i++) nan += isnan(y->data[i]), inf += isinf(y->data[i]);
    TK_CHECK(y && nan + inf == y->numel && nan > y->numel / 2 && inf > 0,
             "dropout of NaN/inf: %lld NaN and %lld inf of %lld (dropped NaN and inf are NaN, kept inf inf)",
             (long long)nan, (long long)inf, y ? (long long)y->numel : 0LL);
    attn_tensor_free(bad);
    attn_ctx_free(ctx);

    /* same seed, same mask; another seed, another mask */
    attn_ctx *a = attn_ctx_new(99), *b = attn_ctx_new(99), *c = attn_ctx_new(100);
    attn_tensor *ya = attn_dropout(a, x, 0.5f), *yb = attn_dropout(b, x, 0.5f);
    attn_tensor *yc = attn_dropout(c, x, 0.5f);
    TK_CHECK(ya && yb && memcmp(ya->data, yb->data, (size_t)x->numel * sizeof(float)) == 0,
             "dropout: the same seed gives the same mask");
    TK_CHECK(ya && yc && memcmp(ya->data, yc->data, (size_t)x->numel * sizeof(float)) != 0,
             "dropout: another seed gives another mask");
    attn_tensor *ya2 = attn_dropout(a, x, 0.5f);
    TK_CHECK(ya2 && memcmp(ya->data, ya2->data, (size_t)x->numel * sizeof(float)) != 0,
             "dropout: the next call draws a new mask");
    attn_ctx_free(a);
    attn_ctx_free(b);
    attn_ctx_free(c);
    attn_tensor_free(x);
}

static attn_tensor *dropout_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_dropout(ctx, in[0], *(const float *)user);
}

static void test_dropout_gradients(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7};
    attn_tensor *x3 = tk_randn(71, 3, s3), *x4 = tk_randn(72, 4, s4);
    float p = 0.4f;
    tk_gradcheck("dropout 3x5x7", dropout_fwd, &x3, 1, &p, FD_EPS, FD_ATOL, FD_RTOL);
    tk_gradcheck("dropout 2x3x5x7", dropout_fwd, &x4, 1, &p, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_free(x3);
    attn_tensor_free(x4);
}

static void test_dropout_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t shape[1] = {4};
    attn_tensor *x = attn_tensor_zeros(ctx, 1, shape);
    float bad[3] = {-0.1f, 1.5f, NAN};
    for (int k = 0; k < 3; k++)
        TK_CHECK(attn_dropout(ctx, x, bad[k]) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                     strstr(attn_last_error(), "dropout"),
                 "dropout p = %g: %s", (double)bad[k], attn_last_error());
    attn_ctx_set_training(ctx, false);
    TK_CHECK(attn_dropout(ctx, x, 2.0f) == NULL && attn_last_status() == ATTN_ERR_ARG,
             "dropout checks p in eval mode too");
    TK_CHECK(attn_dropout(ctx, NULL, 0.5f) == NULL, "NULL in, NULL out");
    attn_ctx_free(ctx);
}

int main(void)
{
    test_layernorm_kernels();
    test_layernorm_op();
    test_rmsnorm_op();
    test_layernorm_stats();
    test_layernorm_errors();
    test_dropout_statistics();
    test_dropout_modes();
    test_dropout_gradients();
    test_dropout_errors();
    return tk_finish("test_ops_norm");
}
