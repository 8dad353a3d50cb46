/* relu, gelu, gelu_tanh, silu, tanh, sigmoid, exp: forward values against the formulas evaluated in double here,
 * extreme inputs that must stay finite, gradients against central finite differences on odd
 * shapes (3x5x7 and 2x3x5x7), and NULL propagation.
 *
 * Tolerances: forward atol 1e-6 + rtol 1e-5 (one float32 libm call against double: a few ulp).
 * Gradient checks use eps 1e-3 with atol 2e-3 + rtol 2e-2: float32 central differences of
 * loss = sum(y * r) over ~100-200 outputs carry ~1e-6 of rounding, divided by 2 eps ~ 5e-4,
 * and the truncation error eps^2 f''' / 6 is below 1e-6 for these functions on N(0,1) inputs. */
#include "testkit.h"

#include <math.h>
#include <string.h>

#define FWD_ATOL 1e-6f
#define FWD_RTOL 1e-5f
#define FD_EPS 1e-3f
#define FD_ATOL 2e-3f
#define FD_RTOL 2e-2f

typedef attn_tensor *(*unary_fn)(attn_ctx *, attn_tensor *);

typedef struct unary_case {
    const char *name;
    unary_fn fn;
    double (*ref)(double x);
} unary_case;

static double relu_ref(double x)
{
    return x > 0 ? x : 0;
}
static double gelu_ref(double x)
{
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double gelu_tanh_ref(double x) /* torch's F.gelu(x, approximate='tanh') */
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double silu_ref(double x)
{
    return x / (1.0 + exp(-x));
}
static double tanh_ref(double x)
{
    return tanh(x);
}
static double sigmoid_ref(double x)
{
    return 1.0 / (1.0 + exp(-x));
}
static double exp_ref(double x)
{
    return exp(x);
}

static const unary_case cases[] = {
    {"relu", attn_relu, relu_ref},          {"gelu", attn_gelu, gelu_ref}, {"tanh", attn_tanh, tanh_ref},
    {"sigmoid", attn_sigmoid, sigmoid_ref}, {"exp", attn_exp, exp_ref},    {"gelu_tanh", attn_gelu_tanh, gelu_tanh_ref},
    {"silu", attn_silu, silu_ref},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static attn_tensor *unary_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return ((const unary_case *)user)->fn(ctx, in[0]);
}

/* Moves values off relu's kink at 0 so that x +- eps stays on one side. */
static void away_from_zero(attn_tensor *t)
{
    for (int64_t i = 0; i < t->numel; i++)
        if (fabsf(t->data[i]) < 0.05f) t->data[i] = t->data[i] < 0 ? -0.05f : 0.05f;
}

static void test_forward(void)
{
    int64_t shape[3] = {3, 5, 7};
    attn_tensor *x = tk_randn(11, 3, shape);
    x->data[0] = 0.0f;
    x->data[1] = -4.0f;
    x->data[2] = 6.5f;
    attn_ctx *ctx = attn_ctx_new(0);
    float ref[105];
    for (int c = 0; c < N_CASES; c++) {
        attn_tensor *y = cases[c].fn(ctx, x);
        TK_NOT_NULL(y);
        if (!y) continue;
        TK_CHECK(attn_same_shape(x, y) && y != x, "%s keeps the shape in a new tensor", cases[c].name);
        for (int64_t i = 0; i < 105; i++) ref[i] = (float)cases[c].ref(x->data[i]);
        tk_close(cases[c].name, y->data, ref, 105, FWD_ATOL, FWD_RTOL);
    }
    attn_ctx_free(ctx);
    attn_tensor_free(x);
}

/* Large |x|: sigmoid and tanh saturate without NaN, gelu goes to x and 0, exp to inf and 0. */
static void test_extremes(void)
{
    float xs[6] = {-100.0f, -30.0f, -10.0f, 10.0f, 30.0f, 100.0f};
    int64_t shape[1] = {6};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *x = attn_tensor_from(ctx, 1, shape, xs);
    for (int c = 0; c < N_CASES; c++) {
        attn_tensor *y = cases[c].fn(ctx, x);
        TK_NOT_NULL(y);
        if (!y) continue;
        float ref[6];
        for (int i = 0; i < 6; i++) ref[i] = (float)cases[c].ref(xs[i]);
        tk_close(cases[c].name, y->data, ref, 6, FWD_ATOL, FWD_RTOL);
        for (int i = 0; i < 6; i++) TK_CHECK(!isnan(y->data[i]), "%s(%g) is not NaN", cases[c].name, (double)xs[i]);
    }
    attn_tensor *s = attn_sigmoid(ctx, x);
    TK_CHECK(s && s->data[0] >= 0.0f && s->data[0] < 1e-30f && s->data[5] == 1.0f, "sigmoid saturates to 0 and 1");
    attn_ctx_free(ctx);
}

static void test_gradients(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7};
    attn_tensor *x3 = tk_randn(21, 3, s3), *x4 = tk_randn(22, 4, s4);
    away_from_zero(x3);
    away_from_zero(x4);
    char what[64];
    for (int c = 0; c < N_CASES; c++) {
        void *user = (void *)&cases[c];
        snprintf(what, sizeof what, "%s 3x5x7", cases[c].name);
        tk_gradcheck(what, unary_fwd, &x3, 1, user, FD_EPS, FD_ATOL, FD_RTOL);
        snprintf(what, sizeof what, "%s 2x3x5x7", cases[c].name);
        tk_gradcheck(what, unary_fwd, &x4, 1, user, FD_EPS, FD_ATOL, FD_RTOL);
    }
    attn_tensor_free(x3);
    attn_tensor_free(x4);
}

/* The derivative formulas at chosen points, against the formulas in double. */
static void test_derivative_values(void)
{
    float xs[5] = {-3.0f, -0.7f, 0.3f, 1.2f, 4.0f}, dy[5] = {1, 1, 1, 1, 1};
    int64_t shape[1] = {5};
    for (int c = 0; c < N_CASES; c++) {
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *x = attn_tensor_from(ctx, 1, shape, xs);
        attn_tensor_set_requires_grad(x, true);
        attn_tensor *y = cases[c].fn(ctx, x);
        TK_OK(attn_backward_from(ctx, y, dy));
        float ref[5];
        for (int i = 0; i < 5; i++) { /* central difference in double: exact to ~1e-10 */
            double h = 1e-5;
            ref[i] = (float)((cases[c].ref(xs[i] + h) - cases[c].ref(xs[i] - h)) / (2 * h));
        }
        if (x->grad) tk_close(cases[c].name, x->grad, ref, 5, 1e-5f, 1e-5f);
        attn_ctx_free(ctx);
    }
}

/* ReLU's backward is a select, as torch's threshold_backward (torch 1.13 on x = [NaN, -1, 2, 0],
 * dy = [1, NaN, 3, 5]: y = [NaN, 0, 2, 0], dx = [1, 0, 3, 0]) */
static void test_relu_nonfinite(void)
{
    float xs[4] = {NAN, -1.0f, 2.0f, 0.0f}, dy[4] = {1.0f, NAN, 3.0f, 5.0f}, want[4] = {1, 0, 3, 0};
    int64_t shape[1] = {4};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *x = attn_tensor_from(ctx, 1, shape, xs);
    attn_tensor_set_requires_grad(x, true);
    attn_tensor *y = attn_relu(ctx, x);
    TK_CHECK(y && isnan(y->data[0]) && y->data[1] == 0.0f && y->data[2] == 2.0f && y->data[3] == 0.0f,
             "relu([NaN, -1, 2, 0]) is [NaN, 0, 2, 0]");
    TK_OK(attn_backward_from(ctx, y, dy));
    TK_CHECK(x->grad && !memcmp(x->grad, want, sizeof want), "relu backward: dx = [1, 0, 3, 0] as in torch");
    attn_ctx_free(ctx);
}

static void test_null(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    for (int c = 0; c < N_CASES; c++) TK_CHECK(cases[c].fn(ctx, NULL) == NULL, "%s(NULL) is NULL", cases[c].name);
    attn_ctx_free(ctx);
}

int main(void)
{
    test_forward();
    test_extremes();
    test_gradients();
    test_derivative_values();
    test_relu_nonfinite();
    test_null();
    return tk_finish("test_ops_unary");
}
