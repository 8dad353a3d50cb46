/* Linear, embedding and conv1d: forward values against direct double-precision loops, gradients
 * against central finite differences on odd shapes, and the error messages for bad input.
 *
 * Tolerances: forward atol 1e-5 + rtol 1e-5 (float32 sums of at most 21 products of N(0,1)
 * values against a double reference). Gradient checks use eps 1e-2 with atol 2e-3 + rtol 1e-2:
 * these ops are linear in each input, so the central difference has no truncation error and
 * only the float32 rounding of the probe loss (~1e-6 of ~10) divided by 2 eps remains. */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FWD_ATOL 1e-5f
#define FWD_RTOL 1e-5f
#define FD_EPS 1e-2f
#define FD_ATOL 2e-3f
#define FD_RTOL 1e-2f

/* ---- linear ---- */

static attn_tensor *linear_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    bool with_bias = *(const bool *)user;
    return attn_linear(ctx, in[0], in[1], with_bias ? in[2] : NULL);
}

/* y (rows, out) = x (rows, in) W^T + b, in double. */
static void linear_direct(float *y, const attn_tensor *x, const attn_tensor *w, const attn_tensor *b)
{
    int64_t in = w->shape[1], out = w->shape[0], rows = x->numel / in;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < out; o++) {
            double acc = b ? b->data[o] : 0.0;
            for (int64_t i = 0; i < in; i++) acc += (double)x->data[r * in + i] * w->data[o * in + i];
            y[r * out + o] = (float)acc;
        }
}

static void test_linear(void)
{
    int64_t xs[3] = {3, 5, 7}, ws[2] = {4, 7}, bs[1] = {4};
    attn_tensor *in[3] = {tk_randn(1, 3, xs), tk_randn(2, 2, ws), tk_randn(3, 1, bs)};
    for (int with_bias = 0; with_bias <= 1; with_bias++) {
        bool wb = with_bias;
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = linear_fwd(ctx, in, &wb);
        TK_NOT_NULL(y);
        if (y) {
            TK_CHECK(y->ndim == 3 && y->shape[0] == 3 && y->shape[1] == 5 && y->shape[2] == 4, "linear output shape");
            float ref[3 * 5 * 4];
            linear_direct(ref, in[0], in[1], wb ? in[2] : NULL);
            tk_close(wb ? "linear forward" : "linear forward (no bias)", y->data, ref, 60, FWD_ATOL, FWD_RTOL);
        }
        attn_ctx_free(ctx);
        tk_gradcheck(wb ? "linear" : "linear (no bias)", linear_fwd, in, wb ? 3 : 2, &wb, FD_EPS, FD_ATOL, FD_RTOL);
    }
    /* a 1-D x is one row */
    int64_t x1s[1] = {7};
    attn_tensor *in1[3] = {tk_randn(4, 1, x1s), in[1], in[2]};
    bool wb = true;
    tk_gradcheck("linear 1-D x", linear_fwd, in1, 3, &wb, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_free(in1[0]);
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
}

static void test_linear_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t xs[2] = {2, 6}, ws[2] = {4, 7}, bs[1] = {3};
    attn_tensor *x = attn_tensor_zeros(ctx, 2, xs), *w = attn_tensor_zeros(ctx, 2, ws);
    attn_tensor *b = attn_tensor_zeros(ctx, 1, bs);
    TK_CHECK(attn_linear(ctx, x, w, NULL) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(2, 6)") && strstr(attn_last_error(), "(4, 7)"),
             "linear in-size mismatch names both shapes: %s", attn_last_error());
    xs[1] = 7;
    x = attn_tensor_zeros(ctx, 2, xs);
    TK_CHECK(attn_linear(ctx, x, w, b) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(3)"),
             "linear bias mismatch: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(attn_linear(ctx, NULL, w, b) == NULL && attn_last_status() == ATTN_ERR_ARG,
             "linear of NULL returns NULL with ATTN_ERR_ARG");
    attn_linear(ctx, x, w, b); /* the bias mismatch again: a failure upstream */
    TK_CHECK(attn_linear(ctx, NULL, w, b) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "linear of a NULL from a failed op keeps that op's error");
    attn_ctx_free(ctx);
}

/* ---- embedding ---- */

typedef struct emb_case {
    const int64_t *ids;
    int ndim;
    const int64_t *shape;
    int64_t padding_idx;
} emb_case;

static attn_tensor *embedding_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const emb_case *c = user;
    return attn_embedding(ctx, in[0], c->ids, c->ndim, c->shape, c->padding_idx);
}

static void test_embedding(void)
{
    int64_t ws[2] = {6, 5}, shape[2] = {2, 3};
    int64_t ids[6] = {1, 4, 2, 4, 0, 2}; /* 4 repeats; 2 (padding) appears twice */
    attn_tensor *w = tk_randn(5, 2, ws);
    emb_case pad = {ids, 2, shape, 2}, nopad = {ids, 2, shape, -1};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *y = embedding_fwd(ctx, &w, &pad);
    TK_NOT_NULL(y);
    if (y) {
        TK_CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 5, "embedding output shape");
        float ref[30];
        for (int i = 0; i < 6; i++) memcpy(ref + i * 5, w->data + ids[i] * 5, 5 * sizeof(float));
        tk_close("embedding forward gathers rows (the padding row too)", y->data, ref, 30, 0, 0);
        float ones[30];
        for (int i = 0; i < 30; i++) ones[i] = 1.0f;
        attn_tensor_zero_grad(w);
        TK_OK(attn_backward_from(ctx, y, ones));
        float expect[30] = {0}; /* counts of each id, padding row 2 excluded */
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 5 && ids[i] != 2; j++) expect[ids[i] * 5 + j] += 1.0f;
        if (w->grad) tk_close("embedding backward counts ids, skips padding", w->grad, expect, 30, 0, 0);
    }
    attn_ctx_free(ctx);
    /* finite differences see the padding row (it is gathered), so check a padding_idx that the
     * ids do not use; the skip itself is checked exactly above */
    emb_case pad_unused = {ids, 2, shape, 5};
    tk_gradcheck("embedding padding_idx unused", embedding_fwd, &w, 1, &pad_unused, FD_EPS, FD_ATOL, FD_RTOL);
    tk_gradcheck("embedding no padding", embedding_fwd, &w, 1, &nopad, FD_EPS, FD_ATOL, FD_RTOL);
    int64_t id0 = 3; /* 0-D ids give one row (E) */
    emb_case scalar = {&id0, 0, NULL, -1};
    tk_gradcheck("embedding 0-D ids", embedding_fwd, &w, 1, &scalar, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_free(w);
}

static void test_embedding_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t ws[2] = {6, 5}, shape[2] = {2, 3};
    int64_t ids[6] = {1, 4, 2, 4, 6, 2};
    attn_tensor *w = attn_tensor_zeros(ctx, 2, ws);
    TK_CHECK(attn_embedding(ctx, w, ids, 2, shape, -1) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "id 6") && strstr(attn_last_error(), "[1, 1]") &&
                 strstr(attn_last_error(), "[0, 6)"),
             "embedding out-of-range id names id, position and V: %s", attn_last_error());
    ids[4] = -1;
    TK_CHECK(attn_embedding(ctx, w, ids, 2, shape, -1) == NULL && strstr(attn_last_error(), "id -1"),
             "embedding negative id: %s", attn_last_error());
    ids[4] = 0;
    TK_CHECK(attn_embedding(ctx, w, ids, 2, shape, 6) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "padding_idx 6"),
             "embedding padding_idx >= V: %s", attn_last_error());
    int64_t s1[1] = {6};
    attn_tensor *w1 = attn_tensor_zeros(ctx, 1, s1);
    TK_CHECK(attn_embedding(ctx, w1, ids, 2, shape, -1) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "embedding 1-D weight: %s", attn_last_error());
    int64_t s4[4] = {1, 1, 1, 1};
    TK_CHECK(attn_embedding(ctx, w, ids, 4, s4, -1) == NULL && attn_last_status() == ATTN_ERR_SHAPE,
             "embedding 4-D ids (output would be 5-D): %s", attn_last_error());
    attn_ctx_free(ctx);
}

/* ---- conv1d ---- */

typedef struct conv_case {
    int64_t padding;
    bool bias;
} conv_case;

static attn_tensor *conv1d_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const conv_case *c = user;
    return attn_conv1d(ctx, in[0], in[1], c->bias ? in[2] : NULL, c->padding);
}

/* y (B, Cout, Lout) by the definition, in double. */
static void conv1d_direct(float *y, const attn_tensor *x, const attn_tensor *w, const attn_tensor *b, int64_t pad)
{
    int64_t B = x->shape[0], cin = x->shape[1], L = x->shape[2];
    int64_t cout = w->shape[0], K = w->shape[2], lout = L + 2 * pad - K + 1;
    for (int64_t n = 0; n < B; n++)
        for (int64_t o = 0; o < cout; o++)
            for (int64_t t = 0; t < lout; t++) {
                double acc = b ? b->data[o] : 0.0;
                for (int64_t c = 0; c < cin; c++)
                    for (int64_t k = 0; k < K; k++) {
                        int64_t i = t + k - pad;
                        if (i >= 0 && i < L)
                            acc += (double)w->data[(o * cin + c) * K + k] * x->data[(n * cin + c) * L + i];
                    }
                y[(n * cout + o) * lout + t] = (float)acc;
            }
}

static void test_conv1d(void)
{
    int64_t xs[3] = {2, 3, 7}, ws[3] = {5, 3, 3}, bs[1] = {5};
    attn_tensor *in[3] = {tk_randn(6, 3, xs), tk_randn(7, 3, ws), tk_randn(8, 1, bs)};
    conv_case cases[4] = {{1, true}, {0, true}, {1, false}, {2, true}};
    const char *names[4] = {"conv1d padding 1", "conv1d padding 0", "conv1d no bias", "conv1d padding 2"};
    for (int c = 0; c < 4; c++) {
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = conv1d_fwd(ctx, in, &cases[c]);
        int64_t lout = 7 + 2 * cases[c].padding - 3 + 1;
        TK_NOT_NULL(y);
        if (y) {
            TK_CHECK(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 5 && y->shape[2] == lout, "%s output shape",
                     names[c]);
            float ref[2 * 5 * 11];
            conv1d_direct(ref, in[0], in[1], cases[c].bias ? in[2] : NULL, cases[c].padding);
            tk_close(names[c], y->data, ref, y->numel, FWD_ATOL, FWD_RTOL);
        }
        attn_ctx_free(ctx);
        tk_gradcheck(names[c], conv1d_fwd, in, cases[c].bias ? 3 : 2, &cases[c], FD_EPS, FD_ATOL, FD_RTOL);
    }
    /* K = L with no padding: a single output position */
    int64_t ws7[3] = {2, 3, 7};
    attn_tensor *in7[2] = {in[0], tk_randn(9, 3, ws7)};
    conv_case full = {0, false};
    tk_gradcheck("conv1d K = L", conv1d_fwd, in7, 2, &full, FD_EPS, FD_ATOL, FD_RTOL);
    attn_tensor_free(in7[1]);
    for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
}

static void test_conv1d_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t xs[3] = {2, 3, 4}, ws[3] = {5, 3, 7}, w2s[3] = {5, 4, 3}, bs[1] = {4};
    attn_tensor *x = attn_tensor_zeros(ctx, 3, xs), *w = attn_tensor_zeros(ctx, 3, ws);
    TK_CHECK(attn_conv1d(ctx, x, w, NULL, 1) == NULL && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "output length 0"),
             "conv1d kernel longer than the padded input: %s", attn_last_error());
    TK_CHECK(attn_conv1d(ctx, x, w, NULL, 2) != NULL, "conv1d padding 2 makes room for K = 7");
    attn_tensor *w2 = attn_tensor_zeros(ctx, 3, w2s), *b = attn_tensor_zeros(ctx, 1, bs);
    TK_CHECK(attn_conv1d(ctx, x, w2, NULL, 1) == NULL && strstr(attn_last_error(), "(2, 3, 4)") &&
                 strstr(attn_last_error(), "(5, 4, 3)"),
             "conv1d channel mismatch names both shapes: %s", attn_last_error());
    TK_CHECK(attn_conv1d(ctx, x, w, b, 2) == NULL && strstr(attn_last_error(), "bias (4)"), "conv1d bias mismatch: %s",
             attn_last_error());
    TK_CHECK(attn_conv1d(ctx, x, w, NULL, -1) == NULL && attn_last_status() == ATTN_ERR_ARG,
             "conv1d negative padding: %s", attn_last_error());
    attn_ctx_free(ctx);
}

int main(void)
{
    test_linear();
    test_linear_errors();
    test_embedding();
    test_embedding_errors();
    test_conv1d();
    test_conv1d_errors();
    return tk_finish("test_ops_linear");
}
