/* Central finite differences for the ops whose gradients were checked only against PyTorch's
 * (test_golden_ops, test_golden_mechanisms) or inside whole models (test_models_gradcheck):
 * attn_matmul (every transpose, batched, a shared B), attn_add, attn_sub, attn_mul, attn_div
 * (broadcast both ways), attn_scale, attn_bias_add, attn_narrow (dims 0, 1, -1) and
 * attn_additive_scores, on odd shapes.
 *
 * Tolerances: matmul, add, sub, mul, scale, bias_add and narrow are linear in each element of
 * each input, so the central difference has no truncation error; what remains is the float32
 * rounding of the outputs in the probe loss sum(y * r) (about 2^-24 |y| over up to ~200 outputs)
 * divided by 2 eps: eps 1e-2, atol 2e-3 + rtol 1e-2 as test_ops_shape. div (divisors kept in
 * [1.5, 3.5]) and additive_scores (tanh) are not: eps 1e-3 leaves a truncation error of order
 * eps^2 |f'''| ~ 1e-6, and the rounding term grows to ~1e-4: atol 2e-3 + rtol 2e-2, as
 * test_ops_softmax. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>

#define LIN_EPS 1e-2f
#define LIN_ATOL 2e-3f
#define LIN_RTOL 1e-2f
#define NL_EPS 1e-3f
#define NL_ATOL 2e-3f
#define NL_RTOL 2e-2f

typedef enum binary {
    ADD,
    SUB,
    MUL,
    DIV
} binary;
static const char *const binary_names[] = {"add", "sub", "mul", "div"};

static attn_tensor *binary_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    switch (*(const binary *)user) {
    case ADD:
        return attn_add(ctx, in[0], in[1]);
    case SUB:
        return attn_sub(ctx, in[0], in[1]);
    case MUL:
        return attn_mul(ctx, in[0], in[1]);
    default:
        return attn_div(ctx, in[0], in[1]);
    }
}

/* a ~ (2, 3, 5) against b of each broadcastable shape, and b broadcast against a */
static void binary_ops(void)
{
    const int64_t a_shape[3] = {2, 3, 5};
    const struct {
        int ndim;
        int64_t shape[3];
    } others[] = {{3, {2, 3, 5}}, {1, {5}}, {3, {2, 1, 5}}, {2, {3, 1}}};
    for (binary op = ADD; op <= DIV; op++)
        for (size_t i = 0; i < sizeof others / sizeof *others; i++)
            for (int swap = 0; swap <= 1; swap++) {
                attn_tensor *a = tk_randn(10 + i, 3, a_shape), *b = tk_randn(20 + i, others[i].ndim, others[i].shape);
                if (!a || !b) {
                    TK_CHECK(false, "inputs");
                    attn_tensor_free(a), attn_tensor_free(b);
                    return;
                }
                attn_tensor *in[2] = {swap ? b : a, swap ? a : b};
                if (op == DIV) /* divisors away from 0: |f'''| stays small */
                    for (int64_t j = 0; j < in[1]->numel; j++) in[1]->data[j] = 2.5f + tanhf(in[1]->data[j]);
                char what[96];
                snprintf(what, sizeof what, "%s (%s) with %d-D (%s)", binary_names[op], swap ? "broadcast" : "2x3x5",
                         others[i].ndim, swap ? "2x3x5" : "broadcast");
                const bool linear = op != DIV;
                tk_gradcheck(what, binary_fwd, in, 2, &op, linear ? LIN_EPS : NL_EPS, linear ? LIN_ATOL : NL_ATOL,
                             linear ? LIN_RTOL : NL_RTOL);
                attn_tensor_free(a), attn_tensor_free(b);
            }
}

typedef struct matmul_case {
    bool trans_a, trans_b;
} matmul_case;

static attn_tensor *matmul_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const matmul_case *c = user;
    return attn_matmul(ctx, in[0], in[1], c->trans_a, c->trans_b);
}

/* C (2, 3, 5) from A (2, 3, 7) and B (2, 7, 5) or a shared (7, 5), each transposed or not */
static void matmul(void)
{
    for (int shared = 0; shared <= 1; shared++)
        for (int ta = 0; ta <= 1; ta++)
            for (int tb = 0; tb <= 1; tb++) {
                const int64_t a_shape[3] = {2, ta ? 7 : 3, ta ? 3 : 7};
                const int64_t b_shape[3] = {2, tb ? 5 : 7, tb ? 7 : 5};
                attn_tensor *in[2] = {tk_randn(31, 3, a_shape), tk_randn(32, shared ? 2 : 3, b_shape + shared)};
                matmul_case c = {ta, tb};
                char what[80];
                snprintf(what, sizeof what, "matmul trans_a %d trans_b %d, B %s", ta, tb,
                         shared ? "shared" : "batched");
                if (in[0] && in[1])
                    tk_gradcheck(what, matmul_fwd, in, 2, &c, LIN_EPS, LIN_ATOL, LIN_RTOL);
                else
                    TK_CHECK(false, "%s: inputs", what);
                attn_tensor_free(in[0]), attn_tensor_free(in[1]);
            }
}

static attn_tensor *scale_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    (void)user;
    return attn_scale(ctx, in[0], -1.75f);
}

static attn_tensor *bias_add_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    (void)user;
    return attn_bias_add(ctx, in[0], in[1]);
}

typedef struct narrow_case {
    int dim;
    int64_t start, length;
} narrow_case;

static attn_tensor *narrow_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const narrow_case *c = user;
    return attn_narrow(ctx, in[0], c->dim, c->start, c->length);
}

static attn_tensor *additive_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    (void)user;
    return attn_additive_scores(ctx, in[0], in[1], in[2]);
}

static void unary_and_layers(void)
{
    const int64_t x_shape[3] = {3, 4, 7}, bias_shape[1] = {7};
    attn_tensor *x = tk_randn(41, 3, x_shape), *bias = tk_randn(42, 1, bias_shape);
    if (x) tk_gradcheck("scale by -1.75", scale_fwd, &x, 1, NULL, LIN_EPS, LIN_ATOL, LIN_RTOL);
    attn_tensor *xb[2] = {x, bias};
    if (x && bias) tk_gradcheck("bias_add (3, 4, 7) + (7)", bias_add_fwd, xb, 2, NULL, LIN_EPS, LIN_ATOL, LIN_RTOL);
    const narrow_case narrows[] = {{0, 1, 2}, {1, 1, 2}, {-1, 2, 4}};
    for (size_t i = 0; x && i < sizeof narrows / sizeof *narrows; i++) {
        char what[64];
        snprintf(what, sizeof what, "narrow dim %d start %lld length %lld", narrows[i].dim, (long long)narrows[i].start,
                 (long long)narrows[i].length);
        tk_gradcheck(what, narrow_fwd, &x, 1, (void *)&narrows[i], LIN_EPS, LIN_ATOL, LIN_RTOL);
    }
    attn_tensor_free(x), attn_tensor_free(bias);

    /* qp (2, 3, 5), kp (2, 4, 5), wv (5): s (2, 3, 4) */
    const int64_t qp_shape[3] = {2, 3, 5}, kp_shape[3] = {2, 4, 5}, wv_shape[1] = {5};
    attn_tensor *in[3] = {tk_randn(51, 3, qp_shape), tk_randn(52, 3, kp_shape), tk_randn(53, 1, wv_shape)};
    if (in[0] && in[1] && in[2])
        tk_gradcheck("additive_scores", additive_fwd, in, 3, NULL, NL_EPS, NL_ATOL, NL_RTOL);
    else
        TK_CHECK(false, "additive_scores: inputs");
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
}

int main(void)
{
    binary_ops();
    matmul();
    unary_and_layers();
    return tk_finish("test_ops_gradcheck");
}
