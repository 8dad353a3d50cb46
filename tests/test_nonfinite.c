/* NaN in, NaN out (as PyTorch): a NaN in q makes its output row NaN, a NaN in k every row of
 * that head, in both SDPA kernels and in softmax; it is never mistaken for a fully masked row
 * (which still gives 0). So a diverging training run shows a NaN loss instead of training on.
 * attn_tensor_check_finite names the first non-finite element by its index. */
#include "testkit.h"

#include <math.h>
#include <string.h>

static bool all_nan(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i])) return false;
    return true;
}

static bool all_finite(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return false;
    return true;
}

int main(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    /* (1, 1, L, 2) with L = 70: more than one key block of the fused kernel */
    enum {
        L = 70,
        D = 2
    };
    const int64_t shape[4] = {1, 1, L, D};
    float qd[L * D], kd[L * D], vd[L * D];
    for (int i = 0; i < L * D; i++) {
        qd[i] = 0.01f * (float)(i % 17);
        kd[i] = 0.02f * (float)(i % 13);
        vd[i] = (float)(i % 5);
    }
    for (int impl = ATTN_SDPA_FUSED; impl <= ATTN_SDPA_REF; impl++) {
        const char *name = impl == ATTN_SDPA_FUSED ? "fused" : "ref";
        attn_sdpa_opts o = {.impl = (attn_sdpa_impl)impl};
        /* NaN in q row 3: row 3 NaN, the others finite */
        float q2[L * D];
        for (int i = 0; i < L * D; i++) q2[i] = qd[i];
        q2[3 * D] = NAN;
        attn_tensor *q = attn_tensor_from(ctx, 4, shape, q2), *k = attn_tensor_from(ctx, 4, shape, kd);
        attn_tensor *v = attn_tensor_from(ctx, 4, shape, vd);
        attn_tensor_set_requires_grad(q, true);
        attn_tensor *out = attn_sdpa(ctx, q, k, v, &o, NULL);
        TK_NOT_NULL(out);
        if (out) {
            TK_CHECK(all_nan(out->data + 3 * D, D), "%s: NaN in q row 3 gives a NaN row", name);
            TK_CHECK(all_finite(out->data, 3 * D) && all_finite(out->data + 4 * D, (L - 4) * D),
                     "%s: the other rows stay finite", name);
            TK_OK(attn_backward(ctx, attn_sum_all(ctx, out)));
            TK_CHECK(q->grad && all_nan(q->grad + 3 * D, D), "%s: its gradient is NaN", name);
        }
        attn_ctx_reset(ctx);
        /* NaN in k row 50 (the second key block): every output row NaN */
        float k2[L * D];
        for (int i = 0; i < L * D; i++) k2[i] = kd[i];
        k2[50 * D + 1] = NAN;
        q = attn_tensor_from(ctx, 4, shape, qd);
        k = attn_tensor_from(ctx, 4, shape, k2);
        v = attn_tensor_from(ctx, 4, shape, vd);
        out = attn_sdpa(ctx, q, k, v, &o, NULL);
        TK_CHECK(out && all_nan(out->data, L * D), "%s: NaN in k gives NaN everywhere", name);
        attn_ctx_reset(ctx);
        /* a fully masked row is still 0, not NaN */
        float q3[L * D];
        for (int i = 0; i < L * D; i++) q3[i] = qd[i];
        int64_t lens[1] = {0};
        o.mask.valid_lens = (attn_lens){lens, 1, {1}};
        q = attn_tensor_from(ctx, 4, shape, q3);
        k = attn_tensor_from(ctx, 4, shape, kd);
        v = attn_tensor_from(ctx, 4, shape, vd);
        out = attn_sdpa(ctx, q, k, v, &o, NULL);
        bool zero = out != NULL;
        for (int64_t i = 0; zero && i < L * D; i++) zero = out->data[i] == 0.0f;
        TK_CHECK(zero, "%s: fully masked rows give 0", name);
        attn_ctx_reset(ctx);
    }
    /* softmax: a row of NaN is NaN, a row of -inf is 0 */
    float x[8] = {NAN, NAN, NAN, NAN, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    attn_tensor *t = attn_tensor_from(ctx, 2, (int64_t[]){2, 4}, x);
    attn_tensor *s = attn_softmax(ctx, t, -1);
    TK_CHECK(s && all_nan(s->data, 4), "softmax of a NaN row is NaN");
    TK_CHECK(s && s->data[4] == 0.0f && s->data[7] == 0.0f, "softmax of a -inf row is 0");
    float y[4] = {1.0f, NAN, 2.0f, 3.0f};
    s = attn_softmax(ctx, attn_tensor_from(ctx, 1, (int64_t[]){4}, y), -1);
    TK_CHECK(s && all_nan(s->data, 4), "softmax of a row with one NaN is NaN");

    float z[2 * 3] = {0, 1, 2, 3, NAN, -INFINITY};
    attn_tensor *zt = attn_tensor_from(ctx, 2, (int64_t[]){2, 3}, z);
    TK_CHECK(attn_tensor_check_finite(zt, "x") == ATTN_ERR_NUMERIC &&
                 strstr(attn_last_error(), "tensor \"x\" has NaN at index (1, 1); expected finite values"),
             "check_finite names the first NaN: %s", attn_last_error());
    z[4] = 4.0f;
    zt = attn_tensor_from(ctx, 2, (int64_t[]){2, 3}, z);
    TK_CHECK(attn_tensor_check_finite(zt, NULL) == ATTN_ERR_NUMERIC &&
                 strstr(attn_last_error(), "tensor has -Inf at index (1, 2)"),
             "check_finite names -Inf, without a name: %s", attn_last_error());
    z[5] = 5.0f;
    zt = attn_tensor_from(ctx, 2, (int64_t[]){2, 3}, z);
    TK_CHECK(attn_tensor_check_finite(zt, "x") == ATTN_OK, "check_finite passes finite values");
    attn_ctx_free(ctx);
    return tk_finish("test_nonfinite");
}
