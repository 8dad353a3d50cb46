/* Nadaraya-Watson kernel regression as attention pooling (seed 003; math in attn.h), composed
 * from differentiable ops so the learnable width w gets its gradient by autograd. */
#include "../core/core_internal.h"

#include <string.h>

attn_tensor *attn_nw_forward(attn_ctx *ctx, attn_tensor *w, attn_tensor *queries, attn_tensor *keys,
                             attn_tensor *values, attn_tensor **weights)
{
    if (weights) *weights = NULL;
    if (!ctx || !queries || !keys || !values) return attn__null_input(__func__);
    if (queries->ndim != 1 || keys->ndim != 2 || !attn_same_shape(keys, values) ||
        keys->shape[0] != queries->shape[0] || (w && w->numel != 1)) {
        attn__fail_inputs("nw", (const char *const[]){"queries", "keys", "values"},
                          (const attn_tensor *const[]){queries, keys, values},
                          "(n), (n, m), (n, m) and a one-element w");
        return NULL;
    }
    attn_tensor *q = attn_reshape(ctx, queries, 2, (int64_t[]){queries->shape[0], 1});
    attn_tensor *dis = attn_sub(ctx, q, keys); /* (n, m) */
    attn_tensor *wd = w ? attn_mul(ctx, attn_reshape(ctx, w, 1, (int64_t[]){1}), dis) : dis;
    attn_tensor *scores = attn_scale(ctx, attn_mul(ctx, wd, wd), -0.5f);
    attn_tensor *a = attn_softmax(ctx, scores, 1);
    if (weights) *weights = a;
    return attn_sum(ctx, attn_mul(ctx, a, values), 1, false); /* (n) */
}

attn_tensor *attn_nw_leave_one_out(attn_ctx *ctx, const attn_tensor *x)
{
    if (!ctx || !x) return attn__null_input(__func__);
    if (x->ndim != 1 || x->shape[0] < 2) {
        char a[64];
        return attn__fail_null(ATTN_ERR_SHAPE, "nw_leave_one_out: x %s, expected (n) with n >= 2",
                               attn_shape_str(x, a, 64));
    }
    const int64_t n = x->shape[0];
    attn_tensor *out = attn_tensor_empty(ctx, 2, (int64_t[]){n, n - 1});
    if (!out) return NULL;
    for (int64_t i = 0; i < n; i++) {
        float *row = out->data + i * (n - 1);
        memcpy(row, x->data, (size_t)i * sizeof(float));
        memcpy(row + i, x->data + i + 1, (size_t)(n - 1 - i) * sizeof(float));
    }
    return out;
}
