/* Softmax and log-softmax: the fast row kernels against their _ref twins on odd and edge shapes
 * (cols = 1, cols not a multiple of the vector width, rows with -inf entries, a fully -inf row,
 * a block big enough for the threaded path); the ops along dims 0, 1, -1 against softmax
 * computed in double here; fully masked slices give 0 / -inf and gradient 0, never NaN;
 * gradients against central finite differences; bad dims.
 *
 * Tolerances:
 *   fast vs _ref forward: atol 1e-6 + rtol 1e-5 (the fast exp is within 2 ulp of expf, and sums
 *     in 8 float lanes against double: a few ulp of values <= 1, or of |log-softmax| <= ~40);
 *   fast vs _ref backward: atol 1e-5 + rtol 1e-5 (the fast row sum of up to 1000 N(0,1)
 *     gradients is in float lanes: ~1e-6 relative of a sum ~30);
 *   op vs double: atol 1e-6 + rtol 1e-5 (float32 results of a double formula);
 *   gradient checks: eps 1e-3, atol 2e-3 + rtol 2e-2 (float32 central differences: the probe
 *     loss sum(y * r) over ~100-200 outputs has ~1e-6 rounding, / 2 eps ~ 5e-4). */
#include "testkit.h"
#include "kernels/kernels_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KFWD_ATOL 1e-6f
#define KFWD_RTOL 1e-5f
#define KBWD_ATOL 1e-5f
#define KBWD_RTOL 1e-5f
#define FWD_ATOL 1e-6f
#define FWD_RTOL 1e-5f
#define FD_EPS 1e-3f
#define FD_ATOL 2e-3f
#define FD_RTOL 2e-2f

static float *randn_buf(uint64_t seed, int64_t n, float scale)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed);
    float *p = malloc((size_t)(n ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = scale * attn_rng_normal(&rng);
    return p;
}

static bool any_nan(const float *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (isnan(p[i])) return true;
    return false;
}

/* ---- kernels: fast against _ref ---- */

typedef void (*fwd_kernel)(float *, const float *, int64_t, int64_t, int threads);
typedef void (*fwd_kernel_ref)(float *, const float *, int64_t, int64_t);
typedef void (*bwd_kernel)(float *, const float *, const float *, int64_t, int64_t, int threads);
typedef void (*bwd_kernel_ref)(float *, const float *, const float *, int64_t, int64_t);

enum {
    KERNEL_THREADS = 2
}; /* the fast kernels' parallel loops run (on large shapes) */

static void kernel_pair(const char *name, fwd_kernel fast, fwd_kernel_ref ref, bwd_kernel bfast, bwd_kernel_ref bref,
                        int64_t rows, int64_t cols, bool masked)
{
    int64_t n = rows * cols;
    float *x = randn_buf(rows * 1000 + cols, n, 3.0f);
    if (masked) { /* row 0 fully masked, every third element of the others too */
        for (int64_t i = 0; i < n; i++)
            if (i < cols || (i % 3 == 1 && i % cols != 0)) x[i] = -INFINITY;
    }
    float *y = malloc((size_t)n * sizeof(float)), *y_ref = malloc((size_t)n * sizeof(float));
    fast(y, x, rows, cols, KERNEL_THREADS);
    ref(y_ref, x, rows, cols);
    char what[96];
    snprintf(what, sizeof what, "%s forward fast vs ref %lldx%lld%s", name, (long long)rows, (long long)cols,
             masked ? " masked" : "");
    tk_close(what, y, y_ref, n, KFWD_ATOL, KFWD_RTOL);
    TK_CHECK(!any_nan(y, n) && !any_nan(y_ref, n), "%s: no NaN", what);

    float *dy = randn_buf(7 + n, n, 1.0f);
    float *dx = randn_buf(9 + n, n, 1.0f), *dx_ref = malloc((size_t)n * sizeof(float));
    memcpy(dx_ref, dx, (size_t)n * sizeof(float)); /* same start: both must accumulate */
    bfast(dx, dy, y_ref, rows, cols, KERNEL_THREADS);
    bref(dx_ref, dy, y_ref, rows, cols);
    snprintf(what, sizeof what, "%s backward fast vs ref %lldx%lld%s", name, (long long)rows, (long long)cols,
             masked ? " masked" : "");
    tk_close(what, dx, dx_ref, n, KBWD_ATOL, KBWD_RTOL);
    TK_CHECK(!any_nan(dx, n) && !any_nan(dx_ref, n), "%s: no NaN", what);
    if (masked) { /* the fully masked row: accumulated nothing */
        float *start = randn_buf(9 + n, cols, 1.0f);
        tk_close("fully masked row: dx unchanged (fast)", dx, start, cols, 0.0f, 0.0f);
        tk_close("fully masked row: dx unchanged (ref)", dx_ref, start, cols, 0.0f, 0.0f);
        free(start);
    }
    free(x), free(y), free(y_ref), free(dy), free(dx), free(dx_ref);
}

static void test_kernels(void)
{
    static const int64_t shapes[][2] = {{1, 1}, {3, 1}, {3, 7}, {4, 8}, {5, 9}, {2, 33}, {7, 1000}, {300, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int masked = 0; masked <= 1; masked++) {
            int64_t r = shapes[s][0], c = shapes[s][1];
            if (masked && r < 2) continue;
            kernel_pair("softmax", attn__softmax_rows, attn__softmax_rows_ref, attn__softmax_rows_backward,
                        attn__softmax_rows_backward_ref, r, c, masked);
            kernel_pair("log_softmax", attn__log_softmax_rows, attn__log_softmax_rows_ref,
                        attn__log_softmax_rows_backward, attn__log_softmax_rows_backward_ref, r, c, masked);
        }
}

/* Exact values where the answer is known: a single column is 1 (log 0); equal entries share;
 * huge entries do not overflow; -inf entries get 0. */
static void test_kernel_values(void)
{
    float x[8] = {5.0f, 5.0f, 5.0f, 5.0f, 1000.0f, -INFINITY, 1000.0f, -1000.0f}, y[8];
    float expect[8] = {0.25f, 0.25f, 0.25f, 0.25f, 0.5f, 0.0f, 0.5f, 0.0f};
    attn__softmax_rows(y, x, 2, 4, 1);
    tk_close("softmax known rows (fast)", y, expect, 8, 1e-7f, 0.0f);
    attn__softmax_rows_ref(y, x, 2, 4);
    tk_close("softmax known rows (ref)", y, expect, 8, 1e-7f, 0.0f);
    float one = 3.0f, out;
    attn__softmax_rows(&out, &one, 1, 1, 1);
    TK_CHECK(out == 1.0f, "softmax of one column is 1, got %g", (double)out);
    attn__log_softmax_rows(&out, &one, 1, 1, 1);
    TK_CHECK(out == 0.0f, "log_softmax of one column is 0, got %g", (double)out);
}

/* ---- ops: values along any dim ---- */

/* softmax (or log-softmax) along d of x in double, into y. */
static void softmax_direct(float *y, const attn_tensor *x, int d, bool log_space)
{
    int64_t outer = 1, inner = 1, n = x->shape[d];
    for (int i = 0; i < d; i++) outer *= x->shape[i];
    for (int i = d + 1; i < x->ndim; i++) inner *= x->shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *src = x->data + o * n * inner + i;
            double max = -INFINITY, sum = 0.0;
            for (int64_t k = 0; k < n; k++) max = fmax(max, src[k * inner]);
            for (int64_t k = 0; k < n; k++) sum += exp(src[k * inner] - max);
            for (int64_t k = 0; k < n; k++) {
                double v = src[k * inner] - max;
                y[o * n * inner + k * inner + i] = (float)(log_space ? v - log(sum) : exp(v) / sum);
            }
        }
}

static void test_op_values(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7};
    attn_tensor *xs[2] = {tk_randn(31, 3, s3), tk_randn(32, 4, s4)};
    attn_ctx *ctx = attn_ctx_new(0);
    float ref[210];
    char what[64];
    for (int t = 0; t < 2; t++) {
        attn_tensor *x = xs[t];
        for (int dim = -1; dim < x->ndim; dim++) {
            int d = dim < 0 ? x->ndim - 1 : dim;
            attn_tensor *y = attn_softmax(ctx, x, dim), *ly = attn_log_softmax(ctx, x, dim);
            TK_NOT_NULL(y);
            TK_NOT_NULL(ly);
            if (!y || !ly) continue;
            TK_CHECK(attn_same_shape(x, y) && attn_same_shape(x, ly), "softmax keeps the shape");
            softmax_direct(ref, x, d, false);
            snprintf(what, sizeof what, "softmax %dD dim %d", x->ndim, dim);
            tk_close(what, y->data, ref, x->numel, FWD_ATOL, FWD_RTOL);
            softmax_direct(ref, x, d, true);
            snprintf(what, sizeof what, "log_softmax %dD dim %d", x->ndim, dim);
            tk_close(what, ly->data, ref, x->numel, FWD_ATOL, FWD_RTOL);
            /* the slices along dim sum to 1: summed over dim, every entry is 1 */
            attn_tensor *s = attn_sum(ctx, y, dim, false);
            bool ok = s != NULL;
            for (int64_t i = 0; ok && i < s->numel; i++) ok = fabsf(s->data[i] - 1.0f) < 1e-5f;
            TK_CHECK(ok, "softmax %dD dim %d: slices sum to 1", x->ndim, dim);
        }
    }
    attn_ctx_free(ctx);
    attn_tensor_free(xs[0]);
    attn_tensor_free(xs[1]);
}

/* A fully -inf slice along a non-last dim (column 1 of a (4, 3) along dim 0) and along the last
 * dim: output 0 / -inf, gradient 0; the other slices as usual, nothing NaN. */
static void test_op_masked(void)
{
    int64_t shape[2] = {4, 3};
    for (int dim = 0; dim <= 1; dim++)
        for (int lg = 0; lg <= 1; lg++) {
            attn_ctx *ctx = attn_ctx_new(0);
            attn_tensor *x = attn_tensor_alloc(2, shape);
            attn_rng rng;
            attn_rng_seed(&rng, 5);
            attn_tensor_fill_normal(x, &rng, 0.0f, 1.0f);
            for (int k = 0; k < (dim == 0 ? 4 : 3); k++) /* column 1 or row 1 */
                x->data[dim == 0 ? k * 3 + 1 : 3 + k] = -INFINITY;
            attn_tensor_set_requires_grad(x, true);
            attn_tensor *y = lg ? attn_log_softmax(ctx, x, dim) : attn_softmax(ctx, x, dim);
            float dy[12];
            for (int i = 0; i < 12; i++) dy[i] = (float)(i % 5) - 2.0f;
            TK_OK(attn_backward_from(ctx, y, dy));
            bool ok = y && x->grad;
            for (int k = 0; ok && k < (dim == 0 ? 4 : 3); k++) {
                int64_t i = dim == 0 ? k * 3 + 1 : 3 + k;
                ok = (lg ? y->data[i] == -INFINITY : y->data[i] == 0.0f) && x->grad[i] == 0.0f;
            }
            TK_CHECK(ok, "%s dim %d: a fully -inf slice gives %s and gradient 0", lg ? "log_softmax" : "softmax", dim,
                     lg ? "-inf" : "0");
            TK_CHECK(y && x->grad && !any_nan(y->data, 12) && !any_nan(x->grad, 12),
                     "%s dim %d with a masked slice: no NaN", lg ? "log_softmax" : "softmax", dim);
            attn_tensor_free(x);
            attn_ctx_free(ctx);
        }
}

/* ---- gradients ---- */

typedef struct sm_case {
    int dim;
    bool log_space;
} sm_case;

static attn_tensor *sm_fwd(attn_ctx *ctx, attn_tensor **in, void *user)
{
    const sm_case *c = user;
    return c->log_space ? attn_log_softmax(ctx, in[0], c->dim) : attn_softmax(ctx, in[0], c->dim);
}

static void test_gradients(void)
{
    int64_t s3[3] = {3, 5, 7}, s4[4] = {2, 3, 5, 7};
    attn_tensor *x3 = tk_randn(41, 3, s3), *x4 = tk_randn(42, 4, s4);
    static const int dims3[3] = {0, 1, -1}, dims4[4] = {0, 1, 2, -1};
    char what[64];
    for (int lg = 0; lg <= 1; lg++) {
        for (int i = 0; i < 3; i++) {
            sm_case c = {dims3[i], lg};
            snprintf(what, sizeof what, "%s 3x5x7 dim %d", lg ? "log_softmax" : "softmax", c.dim);
            tk_gradcheck(what, sm_fwd, &x3, 1, &c, FD_EPS, FD_ATOL, FD_RTOL);
        }
        for (int i = 0; i < 4; i++) {
            sm_case c = {dims4[i], lg};
            snprintf(what, sizeof what, "%s 2x3x5x7 dim %d", lg ? "log_softmax" : "softmax", c.dim);
            tk_gradcheck(what, sm_fwd, &x4, 1, &c, FD_EPS, FD_ATOL, FD_RTOL);
        }
    }
    attn_tensor_free(x3);
    attn_tensor_free(x4);
}

static void test_errors(void)
{
    attn_ctx *ctx = attn_ctx_new(0);
    int64_t shape[2] = {2, 3};
    attn_tensor *x = attn_tensor_zeros(ctx, 2, shape);
    TK_CHECK(attn_softmax(ctx, x, 2) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "softmax") && strstr(attn_last_error(), "dim 2"),
             "softmax dim 2 of a 2-D tensor: %s", attn_last_error());
    TK_CHECK(attn_log_softmax(ctx, x, -3) == NULL && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "log_softmax"),
             "log_softmax dim -3 of a 2-D tensor: %s", attn_last_error());
    TK_CHECK(attn_softmax(ctx, NULL, 0) == NULL && attn_log_softmax(ctx, NULL, 0) == NULL, "NULL in, NULL out");
    attn_ctx_free(ctx);
}

int main(void)
{
    test_kernels();
    test_kernel_values();
    test_op_values();
    test_op_masked();
    test_gradients();
    test_errors();
    return tk_finish("test_ops_softmax");
}
