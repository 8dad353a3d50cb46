/* Reductions (sum, mean, sum_all, mean_all) and shape ops (reshape, transpose, permute, concat,
 * split, split_heads, merge_heads): values against index arithmetic and double sums done here,
 * round trips (permute then its inverse, split then concat, split_heads then merge_heads give
 * the input back bit for bit), reshape sharing its input's data, gradients against central
 * finite differences on odd shapes and dims 0, 1, -1, and the errors for bad arguments.
 *
 * Tolerances: reductions atol 1e-5 + rtol 1e-6 (a double sum rounded once to float32 against
 * the same in double here). Shape ops move values and are compared exactly. Gradient checks use
 * eps 1e-2 with atol 2e-3 + rtol 1e-2: every op here is linear in its input, so the central
 * difference has no truncation error and only the float32 rounding of the probe loss
 * sum(y * r) (~1e-6 over ~100-200 outputs) divided by 2 eps remains. */
#include "testkit.h"
#include "core/core_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RED_ATOL 1e-5f
#define RED_RTOL 1e-6f
#define FD_EPS 1e-2f
#define FD_ATOL 2e-3f
#define FD_RTOL 1e-2f

static bool same_data(const attn_tensor *a, const attn_tensor *b)
{
    return a && b && a->numel == b->numel && memcmp(a->data, b->data, (size_t)a->numel * sizeof(float)) == 0;
}

static bool has_shape(const attn_tensor *t, int ndim, const int64_t *shape)
{
    if (!t || t->ndim != ndim) return false;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != shape[i]) return false;
    return true;
}

static bool failed_with(attn_status st, const char *needle)
{
    return attn_last_status() == st && strstr(attn_last_error(), needle) != NULL;
}

/* ---- reductions ---- */

/* sum (or mean) along d of x in double, into y (outer, inner). */
static void reduce_direct(float *y, const attn_tensor *x, int d, bool mean)
{
    int64_t outer = attn__prod(x->shape, 0, d), n = x->shape[d];
    int64_t inner = attn__prod(x->shape, d + 1, x->ndim);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double acc = 0.0;
            for (int64_t k = 0; k < n; k++) acc += x->data[(o * n + k) * inner + i];
            y[o * inner + i] = (float)(mean ? acc / n : acc);
        }
}

typedef struct red_case {
    int dim;
    bool keepdim, mean;
} red_case;

static attn_tensor *red_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const red_case *c = user;
    return c->mean ? attn_mean(ctx, in[0], c->dim, c->keepdim) : attn_sum(ctx, in[0], c->dim, c->keepdim);
}

static attn_tensor *sum_all_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return *(const bool *)user ? attn_mean_all(ctx, in[0]) : attn_sum_all(ctx, in[0]);
}

static void test_reduce(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7};
    attn_tensor *xs[2] = {tk_randn(81, 3, s3), tk_randn(82, 4, s4)};
    float ref[210];
    char what[80];
    for (int t = 0; t < 2; t++) {
        attn_tensor *x = xs[t];
        for (int dim = -1; dim < x->ndim; dim++)
            for (int keep = 0; keep <= 1; keep++)
                for (int mean = 0; mean <= 1; mean++) {
                    red_case c = {dim, keep, mean};
                    int d = dim < 0 ? x->ndim - 1 : dim;
                    attn_ctx *ctx = attn_ctx_new(0);
                    attn_tensor *y = red_fwd(ctx, &x, &c);
                    int64_t shape[4];
                    int nd = 0;
                    for (int i = 0; i < x->ndim; i++)
                        if (i != d || keep) shape[nd++] = i == d ? 1 : x->shape[i];
                    snprintf(what, sizeof what, "%s %dD dim %d keepdim %d", mean ? "mean" : "sum", x->ndim, dim, keep);
                    TK_CHECK(has_shape(y, nd, shape), "%s: output shape", what);
                    if (y) {
                        reduce_direct(ref, x, d, mean);
                        tk_close(what, y->data, ref, y->numel, RED_ATOL, RED_RTOL);
                    }
                    attn_ctx_free(ctx);
                    if (keep || dim == 1) /* gradients: every dim once, and both keepdims */
                        tk_gradcheck(what, red_fwd, &x, 1, &c, FD_EPS, FD_ATOL, FD_RTOL);
                }
        for (int mean = 0; mean <= 1; mean++) {
            bool m = mean;
            attn_ctx *ctx = attn_ctx_new(0);
            attn_tensor *y = sum_all_fwd(ctx, &x, &m);
            double acc = 0.0;
            for (int64_t i = 0; i < x->numel; i++) acc += x->data[i];
            float expect = (float)(m ? acc / x->numel : acc);
            TK_CHECK(y && y->ndim == 0 && y->numel == 1, "%s: a scalar", m ? "mean_all" : "sum_all");
            if (y) tk_close(m ? "mean_all" : "sum_all", y->data, &expect, 1, RED_ATOL, RED_RTOL);
            attn_ctx_free(ctx);
            snprintf(what, sizeof what, "%s %dD", m ? "mean_all" : "sum_all", x->ndim);
            tk_gradcheck(what, sum_all_fwd, &x, 1, &m, FD_EPS, FD_ATOL, FD_RTOL);
        }
    }
    attn_tensor_free(xs[0]);
    attn_tensor_free(xs[1]);
}

static void test_reduce_edges(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t s1[1] = {4}, s2[2] = {2, 3};
    attn_tensor *v = attn_tensor_from(ctx, 1, s1, (float[]){1, 2, 3, 4});
    attn_tensor *y = attn_sum(ctx, v, 0, false);
    TK_CHECK(y && y->ndim == 0 && y->data[0] == 10.0f, "sum of a 1-D tensor without keepdim is a scalar");
    y = attn_mean(ctx, v, -1, true);
    TK_CHECK(y && y->ndim == 1 && y->shape[0] == 1 && y->data[0] == 2.5f, "mean keepdim of a 1-D tensor");
    attn_tensor *x = attn_tensor_zeros(ctx, 2, s2);
    TK_CHECK(attn_sum(ctx, x, 2, false) == NULL && failed_with(ATTN_ERR_ARG, "sum"), "sum dim 2 of a 2-D tensor: %s",
             attn_last_error());
    TK_CHECK(attn_mean(ctx, x, -3, false) == NULL && failed_with(ATTN_ERR_ARG, "mean"),
             "mean dim -3 of a 2-D tensor: %s", attn_last_error());
    TK_CHECK(!attn_sum(ctx, NULL, 0, false) && !attn_mean(ctx, NULL, 0, false) && !attn_sum_all(ctx, NULL) &&
                 !attn_mean_all(ctx, NULL),
             "NULL in, NULL out");
    attn_ctx_free(ctx);
}

/* ---- reshape ---- */

typedef struct reshape_case {
    int ndim;
    int64_t shape[4];
} reshape_case;

static attn_tensor *reshape_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const reshape_case *c = user;
    return attn_reshape(ctx, in[0], c->ndim, c->shape);
}

/* reshape, then an op, so that the view's gradient passes through a real consumer */
static attn_tensor *reshape_tanh_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_tanh(ctx, reshape_fwd(ctx, in, user));
}

static void test_reshape(void)
{
    int64_t s3[3] = {3, 5, 7};
    attn_tensor *x = tk_randn(91, 3, s3);
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t to[2] = {15, -1}, want[2] = {15, 7};
    attn_tensor *y = attn_reshape(ctx, x, 2, to);
    TK_CHECK(has_shape(y, 2, want), "reshape (3, 5, 7) to (15, -1) gives (15, 7)");
    TK_CHECK(y && y->data == x->data && y->storage == ATTN_STORAGE_VIEW, "reshape shares its input's data (a view)");
    float dy[105];
    for (int i = 0; i < 105; i++) dy[i] = (float)i;
    attn_tensor_zero_grad(x);
    TK_CHECK(y && attn_backward_from(ctx, y, dy) == ATTN_OK && !y->grad && x->grad && x->grad != dy &&
                 memcmp(x->grad, dy, sizeof dy) == 0,
             "reshape: dy (lent to y for the sweep, not kept) added into x's own grad buffer");
    attn_ctx_reset(ctx);
    y = attn_reshape(ctx, x, 2, to);
    int64_t to4[4] = {-1, 1, 7, 1}, want4[4] = {15, 1, 7, 1};
    TK_CHECK(has_shape(attn_reshape(ctx, y, 4, to4), 4, want4), "reshape of a view, -1 first");
    int64_t one[1] = {1};
    attn_tensor *s = attn_reshape(ctx, attn_tensor_from(ctx, 1, one, (float[]){3.5f}), 0, NULL);
    TK_CHECK(s && s->ndim == 0 && s->numel == 1 && s->data[0] == 3.5f, "reshape (1) to a scalar");

    int64_t bad[2] = {4, -1}, two[2] = {-1, -1}, neg[2] = {-3, -35};
    TK_CHECK(!attn_reshape(ctx, x, 2, bad) && failed_with(ATTN_ERR_SHAPE, "(3, 5, 7)") &&
                 strstr(attn_last_error(), "(4, -1)"),
             "reshape (3, 5, 7) to (4, -1) names both shapes: %s", attn_last_error());
    int64_t wrong[2] = {10, 10};
    TK_CHECK(!attn_reshape(ctx, x, 2, wrong) && failed_with(ATTN_ERR_SHAPE, "(10, 10)"),
             "reshape to a different element count: %s", attn_last_error());
    TK_CHECK(!attn_reshape(ctx, x, 2, two) && failed_with(ATTN_ERR_SHAPE, "-1"), "reshape with two -1: %s",
             attn_last_error());
    TK_CHECK(!attn_reshape(ctx, x, 2, neg) && failed_with(ATTN_ERR_SHAPE, "reshape"),
             "reshape with a negative size: %s", attn_last_error());
    TK_CHECK(!attn_reshape(ctx, x, 5, s3) && failed_with(ATTN_ERR_ARG, "reshape"), "reshape to 5 dims: %s",
             attn_last_error());
    TK_CHECK(!attn_reshape(ctx, NULL, 2, to), "NULL in, NULL out");
    attn_ctx_free(ctx);

    reshape_case c = {4, {7, 1, 5, 3}};
    tk_gradcheck("reshape 3x5x7 -> 7x1x5x3", reshape_fwd, &x, 1, &c, FD_EPS, FD_ATOL, FD_RTOL);
    tk_gradcheck("reshape then tanh", reshape_tanh_fwd, &x, 1, &c, 1e-3f, FD_ATOL, 2e-2f);
    attn_tensor_free(x);
}

/* ---- permute and transpose ---- */

/* y = x permuted by perm, by index arithmetic (4-D) */
static void permute_direct(float *y, const attn_tensor *x, const int *perm)
{
    int64_t st[4], ys[4];
    for (int i = 3, s = 1; i >= 0; i--) {
        st[i] = s;
        s *= (int)x->shape[i];
    }
    for (int i = 0; i < 4; i++) ys[i] = x->shape[perm[i]];
    int64_t o = 0;
    for (int64_t a = 0; a < ys[0]; a++)
        for (int64_t b = 0; b < ys[1]; b++)
            for (int64_t c = 0; c < ys[2]; c++)
                for (int64_t d = 0; d < ys[3]; d++)
                    y[o++] = x->data[a * st[perm[0]] + b * st[perm[1]] + c * st[perm[2]] + d * st[perm[3]]];
}

static attn_tensor *permute_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_permute(ctx, in[0], user);
}

static attn_tensor *transpose_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const int *d = user;
    return attn_transpose(ctx, in[0], d[0], d[1]);
}

static void test_permute(void)
{
    int64_t s4[4] = {2, 3, 5, 7}, s3[3] = {3, 5, 7};
    attn_tensor *x = tk_randn(101, 4, s4), *x3 = tk_randn(102, 3, s3);
    static const int perms[4][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}, {0, 2, 1, 3}};
    float ref[210];
    char what[64];
    attn_ctx *ctx = attn_ctx_new(0);
    for (int k = 0; k < 4; k++) {
        const int *p = perms[k];
        int inv[4];
        for (int i = 0; i < 4; i++) inv[p[i]] = i;
        attn_tensor *y = attn_permute(ctx, x, p);
        int64_t want[4] = {s4[p[0]], s4[p[1]], s4[p[2]], s4[p[3]]};
        snprintf(what, sizeof what, "permute (%d, %d, %d, %d)", p[0], p[1], p[2], p[3]);
        TK_CHECK(has_shape(y, 4, want), "%s: shape", what);
        permute_direct(ref, x, p);
        TK_CHECK(y && memcmp(y->data, ref, sizeof ref) == 0, "%s: values", what);
        TK_CHECK(same_data(attn_permute(ctx, y, inv), x), "%s then its inverse is the identity", what);
        tk_gradcheck(what, permute_fwd, &x, 1, (void *)p, FD_EPS, FD_ATOL, FD_RTOL);
    }
    int p3[3] = {2, 0, 1}, neg[3] = {-1, 0, 1};
    TK_CHECK(same_data(attn_permute(ctx, x3, p3), attn_permute(ctx, x3, neg)), "permute takes negative entries");
    tk_gradcheck("permute 3x5x7 (2, 0, 1)", permute_fwd, &x3, 1, p3, FD_EPS, FD_ATOL, FD_RTOL);

    /* transpose = permute with two dims swapped */
    int pairs[3][2] = {{0, 2}, {1, -1}, {0, 1}};
    for (int k = 0; k < 3; k++) {
        int d0 = pairs[k][0] < 0 ? 2 : pairs[k][0], d1 = pairs[k][1] < 0 ? 2 : pairs[k][1];
        int p[3] = {0, 1, 2};
        p[d0] = d1;
        p[d1] = d0;
        snprintf(what, sizeof what, "transpose 3x5x7 (%d, %d)", pairs[k][0], pairs[k][1]);
        TK_CHECK(same_data(attn_transpose(ctx, x3, pairs[k][0], pairs[k][1]), attn_permute(ctx, x3, p)), "%s = permute",
                 what);
        tk_gradcheck(what, transpose_fwd, &x3, 1, pairs[k], FD_EPS, FD_ATOL, FD_RTOL);
    }
    TK_CHECK(same_data(attn_transpose(ctx, x3, 1, 1), x3), "transpose of a dim with itself copies");

    int dup[4] = {0, 1, 1, 3}, out_of_range[3] = {0, 1, 3};
    TK_CHECK(!attn_permute(ctx, x, dup) && failed_with(ATTN_ERR_ARG, "(2, 3, 5, 7)"), "permute with a repeated dim: %s",
             attn_last_error());
    TK_CHECK(!attn_permute(ctx, x3, out_of_range) && failed_with(ATTN_ERR_ARG, "permute"),
             "permute with dim 3 of 3: %s", attn_last_error());
    TK_CHECK(!attn_permute(ctx, x3, NULL) && failed_with(ATTN_ERR_ARG, "perm"), "permute with a NULL perm: %s",
             attn_last_error());
    TK_CHECK(!attn_transpose(ctx, x3, 0, 3) && failed_with(ATTN_ERR_ARG, "transpose"), "transpose dim 3 of 3: %s",
             attn_last_error());
    TK_CHECK(!attn_permute(ctx, NULL, p3) && !attn_transpose(ctx, NULL, 0, 1), "NULL in, NULL out");
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    attn_tensor_free(x3);
}

/* ---- split_heads and merge_heads ---- */

static attn_tensor *split_heads_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_split_heads(ctx, in[0], *(const int64_t *)user);
}

static attn_tensor *merge_heads_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    (void)user;
    return attn_merge_heads(ctx, in[0]);
}

static void test_heads(void)
{
    int64_t b = 2, l = 5, h = 3, d = 4, s3[3] = {2, 5, 12}, s4[4] = {2, 3, 5, 4};
    attn_tensor *x = tk_randn(111, 3, s3), *z = tk_randn(112, 4, s4);
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *y = attn_split_heads(ctx, x, h);
    TK_CHECK(has_shape(y, 4, s4), "split_heads (2, 5, 12) by 3 gives (2, 3, 5, 4)");
    bool ok = y != NULL;
    for (int64_t i = 0; ok && i < b * h * l * d; i++) { /* y[b, h, l, d] = x[b, l, h * D + d] */
        int64_t bi = i / (h * l * d), hi = i / (l * d) % h, li = i / d % l, di = i % d;
        ok = y->data[i] == x->data[(bi * l + li) * h * d + hi * d + di];
    }
    TK_CHECK(ok, "split_heads values");
    attn_tensor *m = attn_merge_heads(ctx, y);
    TK_CHECK(has_shape(m, 3, s3) && same_data(m, x), "merge_heads(split_heads(x)) = x");
    TK_CHECK(same_data(attn_split_heads(ctx, attn_merge_heads(ctx, z), h), z), "split_heads(merge_heads(z)) = z");
    tk_gradcheck("split_heads (2, 5, 12) H 3", split_heads_fwd, &x, 1, &h, FD_EPS, FD_ATOL, FD_RTOL);
    tk_gradcheck("merge_heads (2, 3, 5, 4)", merge_heads_fwd, &z, 1, NULL, FD_EPS, FD_ATOL, FD_RTOL);

    int64_t five = 5, zero = 0;
    TK_CHECK(!attn_split_heads(ctx, x, five) && failed_with(ATTN_ERR_SHAPE, "(2, 5, 12)"), "split_heads by 5 of 12: %s",
             attn_last_error());
    TK_CHECK(!attn_split_heads(ctx, x, zero) && failed_with(ATTN_ERR_ARG, "num_heads"), "split_heads by 0: %s",
             attn_last_error());
    TK_CHECK(!attn_split_heads(ctx, z, h) && failed_with(ATTN_ERR_SHAPE, "(2, 3, 5, 4)"),
             "split_heads of a 4-D tensor: %s", attn_last_error());
    TK_CHECK(!attn_merge_heads(ctx, x) && failed_with(ATTN_ERR_SHAPE, "(2, 5, 12)"), "merge_heads of a 3-D tensor: %s",
             attn_last_error());
    TK_CHECK(!attn_split_heads(ctx, NULL, h) && !attn_merge_heads(ctx, NULL), "NULL in, NULL out");
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    attn_tensor_free(z);
}

/* ---- concat and split ---- */

static attn_tensor *concat_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    return attn_concat(ctx, in, 3, *(const int *)user);
}

typedef struct split_case {
    int dim, part;
    int64_t sizes[3];
} split_case;

static attn_tensor *split_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const split_case *c = user;
    attn_tensor *outs[3];
    if (attn_split(ctx, in[0], c->dim, c->sizes, 3, outs) != ATTN_OK) return NULL;
    return outs[c->part];
}

static void test_concat(void)
{
    static const int dims[3] = {0, 1, -1};
    char what[64];
    for (int k = 0; k < 3; k++) {
        int d = dims[k] < 0 ? 2 : dims[k];
        attn_tensor *in[3];
        int64_t total = 0;
        for (int i = 0; i < 3; i++) {
            int64_t s[3] = {3, 5, 7};
            s[d] = i + 1 + (d == 2); /* 1, 2, 3 (or 2, 3, 4 along the last dim) */
            total += s[d];
            in[i] = tk_randn(120 + 3 * k + i, 3, s);
        }
        attn_ctx *ctx = attn_ctx_new(0);
        attn_tensor *y = concat_fwd(ctx, in, (void *)&dims[k]);
        int64_t want[3] = {3, 5, 7};
        want[d] = total;
        snprintf(what, sizeof what, "concat dim %d", dims[k]);
        TK_CHECK(has_shape(y, 3, want), "%s: shape", what);
        bool ok = y != NULL;
        int64_t off = 0;
        for (int i = 0; ok && i < 3; i++) { /* y[..., off + j, ...] = in[i][..., j, ...] */
            const attn_tensor *t = in[i];
            for (int64_t e = 0; ok && e < t->numel; e++) {
                int64_t idx[3] = {e / (t->shape[1] * t->shape[2]), e / t->shape[2] % t->shape[1], e % t->shape[2]};
                idx[d] += off;
                ok = y->data[(idx[0] * want[1] + idx[1]) * want[2] + idx[2]] == t->data[e];
            }
            off += t->shape[d];
        }
        TK_CHECK(ok, "%s: values", what);
        attn_tensor *parts[3];
        int64_t sizes[3] = {in[0]->shape[d], in[1]->shape[d], in[2]->shape[d]};
        TK_OK(attn_split(ctx, y, dims[k], sizes, 3, parts));
        TK_CHECK(same_data(parts[0], in[0]) && same_data(parts[1], in[1]) && same_data(parts[2], in[2]),
                 "split undoes %s", what);
        attn_ctx_free(ctx);
        tk_gradcheck(what, concat_fwd, in, 3, (void *)&dims[k], FD_EPS, FD_ATOL, FD_RTOL);
        attn_tensor_set_requires_grad(in[1], false);
        snprintf(what, sizeof what, "concat dim %d, middle without grad", dims[k]);
        tk_gradcheck(what, concat_fwd, in, 3, (void *)&dims[k], FD_EPS, FD_ATOL, FD_RTOL);
        for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
    }
}

/* narrow's range check: ranges outside the dim are refused without computing start + length
 * (it overflowed at INT64_MAX: UBSan) */
static void test_narrow_range(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *x = attn_tensor_zeros(ctx, 2, (int64_t[]){3, 4});
    const int64_t bad[5][2] = {{INT64_MAX, 1}, {1, INT64_MAX}, {5, 0}, {-1, 1}, {2, 3}};
    for (int i = 0; i < 5; i++)
        TK_CHECK(!attn_narrow(ctx, x, 1, bad[i][0], bad[i][1]) && attn_last_status() == ATTN_ERR_ARG,
                 "narrow start %lld length %lld of 4 is refused", (long long)bad[i][0], (long long)bad[i][1]);
    attn_tensor *y = attn_narrow(ctx, x, 1, 4, 0);
    TK_CHECK(y && y->shape[1] == 0, "an empty narrow at the end is fine");
    attn_ctx_free(ctx);
}

static void test_split(void)
{
    int64_t s3[3] = {3, 5, 7};
    attn_tensor *x = tk_randn(131, 3, s3);
    char what[64];
    split_case cases[3] = {{0, 0, {1, 0, 2}}, {1, 0, {2, 1, 2}}, {-1, 0, {3, 1, 3}}};
    for (int k = 0; k < 3; k++)
        for (int part = 0; part < 3; part++) {
            split_case c = cases[k];
            c.part = part;
            if (c.sizes[part] == 0) continue; /* an empty part has nothing to check */
            snprintf(what, sizeof what, "split dim %d part %d", c.dim, part);
            tk_gradcheck(what, split_fwd, &x, 1, &c, FD_EPS, FD_ATOL, FD_RTOL);
        }
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *outs[3];
    int64_t empty_mid[3] = {1, 0, 2}, s0[3] = {1, 5, 7};
    TK_OK(attn_split(ctx, x, 0, empty_mid, 3, outs));
    TK_CHECK(outs[1] && outs[1]->numel == 0 && outs[1]->shape[0] == 0, "split: a part of size 0");
    TK_CHECK(has_shape(outs[0], 3, s0) && memcmp(outs[0]->data, x->data, 35 * sizeof(float)) == 0,
             "split: the first part is the first slice");
    TK_CHECK(outs[0] && outs[0]->data != x->data, "split: parts are copies");
    attn_tensor *cat = attn_concat(ctx, outs, 3, 0);
    TK_CHECK(same_data(cat, x), "concat undoes split, empty part included");

    int64_t short_sizes[3] = {1, 1, 1}, neg_sizes[3] = {4, -1, 4};
    TK_CHECK(attn_split(ctx, x, -1, short_sizes, 3, outs) == ATTN_ERR_SHAPE &&
                 failed_with(ATTN_ERR_SHAPE, "(3, 5, 7)") && !outs[0],
             "split sizes summing to 3 of 7: %s", attn_last_error());
    TK_CHECK(attn_split(ctx, x, -1, neg_sizes, 3, outs) == ATTN_ERR_SHAPE, "split with a negative size: %s",
             attn_last_error());
    TK_CHECK(attn_split(ctx, x, 3, short_sizes, 3, outs) == ATTN_ERR_ARG, "split dim 3 of 3: %s", attn_last_error());
    TK_CHECK(attn_split(ctx, x, 0, short_sizes, 0, outs) == ATTN_ERR_ARG, "split into 0 parts: %s", attn_last_error());
    /* a NULL x from a failed op keeps that op's error */
    int64_t bad[2] = {4, 4};
    attn_tensor *none = attn_reshape(ctx, x, 2, bad);
    TK_CHECK(attn_split(ctx, none, 0, short_sizes, 3, outs) == ATTN_ERR_SHAPE && failed_with(ATTN_ERR_SHAPE, "reshape"),
             "split of a failed op's NULL keeps its error: %s", attn_last_error());

    int64_t other[3] = {3, 4, 7};
    attn_tensor *pair[2] = {x, attn_tensor_zeros(ctx, 3, other)};
    TK_CHECK(!attn_concat(ctx, pair, 2, 0) && failed_with(ATTN_ERR_SHAPE, "(3, 5, 7)") &&
                 strstr(attn_last_error(), "(3, 4, 7)"),
             "concat of mismatched shapes names both: %s", attn_last_error());
    TK_CHECK(!attn_concat(ctx, pair, 0, 0) && failed_with(ATTN_ERR_ARG, "concat"), "concat of no tensors: %s",
             attn_last_error());
    TK_CHECK(!attn_concat(ctx, pair, 2, 3) && failed_with(ATTN_ERR_ARG, "concat"), "concat dim 3 of 3: %s",
             attn_last_error());
    pair[1] = NULL;
    TK_CHECK(!attn_concat(ctx, pair, 2, 0), "concat with a NULL input is NULL");
    attn_ctx_free(ctx);
    attn_tensor_free(x);
}

int main(void)
{
    test_reduce();
    test_reduce_edges();
    test_reshape();
    test_permute();
    test_heads();
    test_concat();
    test_split();
    test_narrow_range();
    return tk_finish("test_ops_shape");
}
