/* The fused ops of the Transformer layers (src/ops/fused.h) against the chains of public ops
 * they replace, bit for bit: attn__linear_act_dropout against attn_dropout(attn_relu/gelu(
 * attn_linear(x, w, b)), p) and attn__add_dropout against attn_add(x, attn_dropout(b, p)), the
 * outputs, every input's gradient from one random dy, and the ctx RNG's state afterwards (the
 * same draws). Each chain's ops are held to the math elsewhere (test_ops_linear, test_ops_unary,
 * the dropout statistics in test_ops_shape; the layers to torch in test_golden_models), so
 * equality here carries those checks over. Cases: both activations, with and without bias, p in
 * {0, 0.3, 1}, training and eval, 1 and 2 threads, a small odd shape and one big enough for the
 * threaded loops, and NaN and inf inputs and gradients (NaN equals NaN here). No tolerance: the
 * fused loops perform the chain's float operations in its order (unary.c, dropout.c and linear.c
 * are built without FP contraction, so neither side fuses a product into an add on its own). */
#include "testkit.h"
#include "ops/fused.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool same_float(float a, float b) { return a == b || (isnan(a) && isnan(b)); }

/* One check: a and b hold the same values (NaN matching NaN); names the first that differs. */
static void check_same(const char *what, const float *a, const float *b, int64_t n)
{
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!same_float(a[i], b[i])) bad = i;
    TK_CHECK(bad < 0, "%s: element %lld is %.9g fused, %.9g chained", what, (long long)bad,
             bad < 0 ? 0.0 : (double)a[bad], bad < 0 ? 0.0 : (double)b[bad]);
}

static attn_tensor *copy_of(const attn_tensor *t)
{
    attn_tensor *c = attn_tensor_alloc(t->ndim, t->shape);
    if (!c) return NULL;
    memcpy(c->data, t->data, (size_t)t->numel * sizeof(float));
    attn_tensor_set_requires_grad(c, true);
    return c;
}

typedef struct fused_case {
    attn__act act;
    bool bias, training;
    float p;
    int threads;
    int64_t rows_a, rows_b, in, out; /* x (rows_a, rows_b, in) */
    bool nonfinite;                 /* a NaN and an inf in x, an inf in dy */
} fused_case;

static attn_ctx *case_ctx(const fused_case *c)
{
    attn_ctx *ctx = attn_ctx_new(20261202);
    if (!ctx) return NULL;
    attn_ctx_set_training(ctx, c->training);
    attn_ctx_set_num_threads(ctx, c->threads);
    return ctx;
}

/* Runs one side (fused or chained) on its own copies of the inputs; the output and the gradients
 * land in y_out, gx, gw, gb (heap arrays the caller compares); returns the next RNG word. */
static uint32_t run_linear_act(const fused_case *c, bool fused, attn_tensor *const src[3], const float *dy,
                               float *y_out, float *gx, float *gw, float *gb)
{
    attn_tensor *x = copy_of(src[0]), *w = copy_of(src[1]), *b = c->bias ? copy_of(src[2]) : NULL;
    attn_ctx *ctx = case_ctx(c);
    uint32_t next = 0;
    attn_tensor *y = NULL;
    if (x && w && ctx && (b || !c->bias)) {
        if (fused) {
            y = attn__linear_act_dropout(ctx, x, w, b, c->act, c->p);
        } else {
            attn_tensor *h = attn_linear(ctx, x, w, b);
            h = c->act == ATTN__ACT_RELU ? attn_relu(ctx, h) : attn_gelu(ctx, h);
            y = attn_dropout(ctx, h, c->p);
        }
        TK_NOT_NULL(y);
    }
    if (y) {
        memcpy(y_out, y->data, (size_t)y->numel * sizeof(float));
        TK_OK(attn_backward_from(ctx, y, dy));
        memcpy(gx, x->grad, (size_t)x->numel * sizeof(float));
        memcpy(gw, w->grad, (size_t)w->numel * sizeof(float));
        if (b) memcpy(gb, b->grad, (size_t)b->numel * sizeof(float));
        next = attn_rng_u32(attn_ctx_rng(ctx));
    }
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    attn_tensor_free(w);
    attn_tensor_free(b);
    return next;
}

static void test_linear_act(const fused_case *c, uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "linear_act %s%s p %.1f %s %d thr (%lld, %lld, %lld) -> %lld%s",
             c->act == ATTN__ACT_RELU ? "relu" : "gelu", c->bias ? " bias" : "", (double)c->p,
             c->training ? "train" : "eval", c->threads, (long long)c->rows_a, (long long)c->rows_b,
             (long long)c->in, (long long)c->out, c->nonfinite ? " nan/inf" : "");
    const int64_t rows = c->rows_a * c->rows_b, ny = rows * c->out;
    attn_tensor *src[3] = {tk_randn(seed, 3, (int64_t[]){c->rows_a, c->rows_b, c->in}),
                           tk_randn(seed + 1, 2, (int64_t[]){c->out, c->in}),
                           tk_randn(seed + 2, 1, (int64_t[]){c->out})};
    attn_tensor *dy = tk_randn(seed + 3, 1, (int64_t[]){ny});
    float *buf = calloc((size_t)(2 * (ny + src[0]->numel + src[1]->numel + c->out)), sizeof(float));
    TK_CHECK(src[0] && src[1] && src[2] && dy && buf, "%s: allocation", what);
    if (!(src[0] && src[1] && src[2] && dy && buf)) return;
    if (c->nonfinite) {
        src[0]->data[1] = NAN;                    /* row 0 of h is NaN */
        src[0]->data[c->in + 2] = INFINITY;       /* row 1: +-inf and NaN */
        dy->data[ny - 1] = INFINITY;
    }
    float *y[2], *gx[2], *gw[2], *gb[2], *p = buf;
    uint32_t next[2];
    for (int side = 0; side < 2; side++) {
        y[side] = p, p += ny;
        gx[side] = p, p += src[0]->numel;
        gw[side] = p, p += src[1]->numel;
        gb[side] = p, p += c->out;
        next[side] = run_linear_act(c, side == 0, src, dy->data, y[side], gx[side], gw[side], gb[side]);
    }
    char part[200];
    snprintf(part, sizeof part, "%s: y", what), check_same(part, y[0], y[1], ny);
    snprintf(part, sizeof part, "%s: dx", what), check_same(part, gx[0], gx[1], src[0]->numel);
    snprintf(part, sizeof part, "%s: dW", what), check_same(part, gw[0], gw[1], src[1]->numel);
    if (c->bias) snprintf(part, sizeof part, "%s: db", what), check_same(part, gb[0], gb[1], c->out);
    TK_CHECK(next[0] == next[1], "%s: the RNG moved differently (next word %u fused, %u chained)", what,
             next[0], next[1]);
    free(buf);
    for (int i = 0; i < 3; i++) attn_tensor_free(src[i]);
    attn_tensor_free(dy);
}

static uint32_t run_add_dropout(const fused_case *c, bool fused, attn_tensor *const src[2], const float *ds,
                                float *s_out, float *gx, float *gb)
{
    attn_tensor *x = copy_of(src[0]), *b = copy_of(src[1]);
    attn_ctx *ctx = case_ctx(c);
    uint32_t next = 0;
    attn_tensor *s = NULL;
    if (x && b && ctx) {
        s = fused ? attn__add_dropout(ctx, x, b, c->p) : attn_add(ctx, x, attn_dropout(ctx, b, c->p));
        TK_NOT_NULL(s);
    }
    if (s) {
        memcpy(s_out, s->data, (size_t)s->numel * sizeof(float));
        TK_OK(attn_backward_from(ctx, s, ds));
        memcpy(gx, x->grad, (size_t)x->numel * sizeof(float));
        memcpy(gb, b->grad, (size_t)b->numel * sizeof(float));
        next = attn_rng_u32(attn_ctx_rng(ctx));
    }
    attn_ctx_free(ctx);
    attn_tensor_free(x);
    attn_tensor_free(b);
    return next;
}

static void test_add_dropout(const fused_case *c, uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "add_dropout p %.1f %s %d thr (%lld, %lld, %lld)%s", (double)c->p,
             c->training ? "train" : "eval", c->threads, (long long)c->rows_a, (long long)c->rows_b,
             (long long)c->out, c->nonfinite ? " nan/inf" : "");
    const int64_t shape[3] = {c->rows_a, c->rows_b, c->out}, n = shape[0] * shape[1] * shape[2];
    attn_tensor *src[2] = {tk_randn(seed, 3, shape), tk_randn(seed + 1, 3, shape)};
    attn_tensor *ds = tk_randn(seed + 2, 1, (int64_t[]){n});
    float *buf = calloc((size_t)(6 * n), sizeof(float));
    TK_CHECK(src[0] && src[1] && ds && buf, "%s: allocation", what);
    if (!(src[0] && src[1] && ds && buf)) return;
    if (c->nonfinite) {
        src[1]->data[0] = NAN, src[1]->data[1] = INFINITY, src[0]->data[2] = -INFINITY;
        ds->data[3] = INFINITY;
    }
    uint32_t next[2];
    for (int side = 0; side < 2; side++)
        next[side] = run_add_dropout(c, side == 0, src, ds->data, buf + side * 3 * n, buf + side * 3 * n + n,
                                     buf + side * 3 * n + 2 * n);
    char part[200];
    snprintf(part, sizeof part, "%s: s", what), check_same(part, buf, buf + 3 * n, n);
    snprintf(part, sizeof part, "%s: dx", what), check_same(part, buf + n, buf + 4 * n, n);
    snprintf(part, sizeof part, "%s: dbranch", what), check_same(part, buf + 2 * n, buf + 5 * n, n);
    TK_CHECK(next[0] == next[1], "%s: the RNG moved differently (next word %u fused, %u chained)", what,
             next[0], next[1]);
    free(buf);
    attn_tensor_free(src[0]);
    attn_tensor_free(src[1]);
    attn_tensor_free(ds);
}

/* Every combination on the small shape; the big one (the threaded loops: 4 * 150 * 130 = 78,000
 * elements > ATTN_PARALLEL_MIN) for each activation with dropout on 1 and 2 threads. */
static void test_cases(void)
{
    const float ps[3] = {0.0f, 0.3f, 1.0f};
    uint64_t seed = 100;
    for (int act = 0; act < 2; act++)
        for (int bias = 0; bias < 2; bias++)
            for (int pi = 0; pi < 3; pi++)
                for (int training = 0; training < 2; training++)
                    for (int nonfinite = 0; nonfinite < 2; nonfinite++) {
                        fused_case c = {(attn__act)act, bias, training, ps[pi], 1, 3, 5, 7, 13, nonfinite};
                        test_linear_act(&c, seed += 10);
                        if (act == 0 && bias == 0) test_add_dropout(&c, seed += 10);
                    }
    for (int act = 0; act < 2; act++)
        for (int threads = 1; threads <= 2; threads++) {
            fused_case c = {(attn__act)act, true, true, 0.3f, threads, 4, 150, 16, 130, false};
            test_linear_act(&c, seed += 10);
            if (act == 0) test_add_dropout(&c, seed += 10);
        }
}

static void test_refusals(void)
{
    attn_ctx *ctx = attn_ctx_new(1);
    attn_tensor *x = tk_randn(1, 2, (int64_t[]){3, 4}), *w = tk_randn(2, 2, (int64_t[]){5, 4});
    attn_tensor *w_bad = tk_randn(3, 2, (int64_t[]){5, 6}), *b_bad = tk_randn(4, 1, (int64_t[]){4});
    attn_tensor *other = tk_randn(5, 2, (int64_t[]){4, 3});
    TK_CHECK(!attn__linear_act_dropout(ctx, x, w_bad, NULL, ATTN__ACT_RELU, 0.1f) &&
                 attn_last_status() == ATTN_ERR_SHAPE && strstr(attn_last_error(), "linear: x (3, 4)"),
             "linear_act with a weight that does not fit: %s", attn_last_error());
    TK_CHECK(!attn__linear_act_dropout(ctx, x, w, b_bad, ATTN__ACT_GELU, 0.1f) &&
                 attn_last_status() == ATTN_ERR_SHAPE && strstr(attn_last_error(), "bias (4)"),
             "linear_act with a bias that does not fit: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(!attn__linear_act_dropout(ctx, x, w, NULL, ATTN__ACT_RELU, 1.5f) && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "dropout: p is 1.5"),
             "linear_act with p 1.5: %s", attn_last_error());
    TK_CHECK(!attn__add_dropout(ctx, x, other, 0.1f) && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(3, 4) and branch (4, 3)"),
             "add_dropout of two shapes: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(!attn__add_dropout(ctx, x, x, NAN) && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "dropout: p is nan"),
             "add_dropout with p NaN: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(!attn__add_dropout(ctx, x, NULL, 0.1f) && attn_last_status() == ATTN_ERR_ARG,
             "add_dropout of NULL: %s", attn_last_error());
    attn_clear_error();
    attn_tensor *tensors[] = {x, w, w_bad, b_bad, other};
    for (int i = 0; i < 5; i++) attn_tensor_free(tensors[i]);
    attn_ctx_free(ctx);
}

int main(void)
{
    test_cases();
    test_refusals();
    return tk_finish("test_ops_fused");
}
