/* Cross entropy (ignore_index, label smoothing) and MSE: values against the formulas evaluated
 * in double here, gradients against central finite differences, and the error cases.
 *
 * Tolerances: values atol 1e-6 + rtol 1e-6 (the op accumulates in double and rounds once to
 * float32, so only that rounding, ~6e-8 relative, separates them). Gradient checks use eps
 * 1e-2, atol 1e-3 + rtol 1e-2: the losses are smooth with O(1) curvature, so the central
 * difference is off by ~eps^2 = 1e-4, plus float32 rounding of the loss (~1e-7 / 2 eps). */
#include "testkit.h"

#include <math.h>
#include <string.h>

#define VAL_ATOL 1e-6f
#define VAL_RTOL 1e-6f
#define FD_EPS 1e-2f
#define FD_ATOL 1e-3f
#define FD_RTOL 1e-2f

typedef struct ce_case {
    const int64_t *target;
    int64_t ignore_index;
    float smoothing;
} ce_case;

static attn_tensor *ce_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const ce_case *c = user;
    return attn_cross_entropy(ctx, in[0], c->target, c->ignore_index, c->smoothing);
}

/* torch.nn.functional.cross_entropy(reduction='mean') by its definition, in double. */
static double ce_direct(const attn_tensor *z, const ce_case *c)
{
    int64_t n = z->shape[0], classes = z->shape[1], kept = 0;
    double total = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (c->target[i] == c->ignore_index) continue;
        const float *zi = z->data + i * classes;
        double sum = 0.0;
        for (int64_t k = 0; k < classes; k++) sum += exp((double)zi[k]);
        double lse = log(sum), smooth = 0.0;
        for (int64_t k = 0; k < classes; k++) smooth += lse - zi[k];
        total += (1.0 - c->smoothing) * (lse - zi[c->target[i]]) + c->smoothing / classes * smooth;
        kept++;
    }
    return kept ? total / (double)kept : 0.0;
}

static void test_cross_entropy(void)
{
    int64_t zs[2] = {5, 7};
    attn_tensor *z = tk_randn(11, 2, zs);
    int64_t target[5] = {3, -100, 0, 6, 2}, target0[5] = {3, 0, 0, 6, 2};
    ce_case cases[4] = {{target, -100, 0.0f}, {target, -100, 0.1f}, {target0, 0, 0.25f}, {target, -100, 1.0f}};
    const char *names[4] = {"cross_entropy ls 0", "cross_entropy ls 0.1", "cross_entropy ignore_index 0, ls 0.25",
                            "cross_entropy ls 1"};
    for (int c = 0; c < 4; c++) {
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = ce_fwd(ctx, &z, &cases[c]);
        TK_NOT_NULL(y);
        if (y) {
            TK_CHECK(y->ndim == 0 && y->numel == 1, "%s is a scalar", names[c]);
            float ref = (float)ce_direct(z, &cases[c]);
            tk_close(names[c], y->data, &ref, 1, VAL_ATOL, VAL_RTOL);
        }
        attn_ctx_free(ctx);
        tk_gradcheck(names[c], ce_fwd, &z, 1, &cases[c], FD_EPS, FD_ATOL, FD_RTOL);
    }
    /* large logits: the max subtraction keeps exp from overflowing */
    for (int64_t i = 0; i < z->numel; i++) z->data[i] = 100.0f * z->data[i] + 1000.0f;
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *y = ce_fwd(ctx, &z, &cases[1]);
    TK_CHECK(y && isfinite(y->data[0]), "cross_entropy of logits near 1000 is finite");
    attn_ctx_free(ctx);
    attn_tensor_free(z);
}

/* Every row ignored: torch 1.13 gives a NaN loss and a zero gradient (F.cross_entropy of a
 * (2, 3) z with targets [-100, -100], label_smoothing 0 or 0.1: tensor(nan), grad zeros). */
static void test_cross_entropy_all_ignored(void)
{
    int64_t zs[2] = {3, 4};
    attn_tensor *z = tk_randn(12, 2, zs);
    int64_t target[3] = {-1, -1, -1};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *y = attn_cross_entropy(ctx, z, target, -1, 0.1f);
    TK_CHECK(y && isnan(y->data[0]), "cross_entropy with every row ignored is NaN, as torch's");
    if (y) TK_OK(attn_backward(ctx, y));
    float zero[12] = {0};
    if (z->grad) tk_close("cross_entropy all ignored: gradient 0", z->grad, zero, 12, 0, 0);
    attn_ctx_free(ctx);
    attn_tensor_free(z);
}

static void test_cross_entropy_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t zs[2] = {3, 4}, z3s[3] = {3, 4, 1};
    attn_tensor *z = attn_tensor_zeros(ctx, 2, zs);
    int64_t target[3] = {0, 4, -100};
    TK_CHECK(attn_cross_entropy(ctx, z, target, -100, 0.0f) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "target 4") && strstr(attn_last_error(), "row 1") &&
                 strstr(attn_last_error(), "[0, 4)"),
             "cross_entropy target out of range: %s", attn_last_error());
    target[1] = -5;
    TK_CHECK(attn_cross_entropy(ctx, z, target, -100, 0.0f) == NULL && strstr(attn_last_error(), "target -5"),
             "cross_entropy negative target that is not ignore_index: %s", attn_last_error());
    target[1] = 1;
    TK_CHECK(attn_cross_entropy(ctx, z, target, -100, 1.5f) == NULL && attn_last_status() == ATTN_ERR_ARG,
             "cross_entropy label_smoothing 1.5: %s", attn_last_error());
    TK_CHECK(attn_cross_entropy(ctx, z, target, -100, NAN) == NULL, "cross_entropy label_smoothing NaN");
    attn_tensor *z3 = attn_tensor_zeros(ctx, 3, z3s);
    TK_CHECK(attn_cross_entropy(ctx, z3, target, -100, 0.0f) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(3, 4, 1)"),
             "cross_entropy 3-D logits: %s", attn_last_error());
    attn_ctx_free(ctx);
}

static attn_tensor *mse_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    (void)user;
    return attn_mse_loss(ctx, in[0], in[1]);
}

static void test_mse(void)
{
    int64_t s[3] = {3, 5, 7};
    attn_tensor *in[2] = {tk_randn(13, 3, s), tk_randn(14, 3, s)};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *y = mse_fwd(ctx, in, NULL);
    TK_NOT_NULL(y);
    if (y) {
        double sum = 0.0;
        for (int64_t i = 0; i < in[0]->numel; i++) {
            double d = (double)in[0]->data[i] - in[1]->data[i];
            sum += d * d;
        }
        float ref = (float)(sum / (double)in[0]->numel);
        TK_CHECK(y->ndim == 0, "mse_loss is a scalar");
        tk_close("mse_loss value", y->data, &ref, 1, VAL_ATOL, VAL_RTOL);
    }
    int64_t other[2] = {15, 7};
    attn_tensor *t2 = attn_tensor_zeros(ctx, 2, other);
    TK_CHECK(attn_mse_loss(ctx, in[0], t2) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(3, 5, 7)") && strstr(attn_last_error(), "(15, 7)"),
             "mse_loss shape mismatch names both: %s", attn_last_error());
    attn_ctx_free(ctx);
    tk_gradcheck("mse_loss (pred and target)", mse_fwd, in, 2, NULL, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_set_requires_grad(in[1], false);
    tk_gradcheck("mse_loss (pred only)", mse_fwd, in, 2, NULL, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_free(in[0]);
    attn_tensor_free(in[1]);
}

int main(void)
{
    test_cross_entropy();
    test_cross_entropy_all_ignored();
    test_cross_entropy_errors();
    test_mse();
    return tk_finish("test_ops_losses");
}
