/* The fused ops of the Transformer layers (src/ops/fused_internal.h) against the chains of public ops
 * they replace, bit for bit: attn__linear_act_dropout against attn_dropout(attn_relu/gelu(
 * attn_linear(x, w, b)), p) and attn__add_dropout against attn_add(x, attn_dropout(b, p)), the
 * outputs, every input's gradient from one random dy, and the ctx RNG's state afterwards (the
 * same draws). Each chain's ops are held to the math elsewhere (test_ops_linear, test_ops_unary,
 * the dropout statistics in test_ops_norm; the layers to torch in test_golden_models), so
 * equality here carries those checks over. Every gradient starts from a non-zero value, so an op
 * that overwrote a gradient instead of adding to it fails. Cases: both activations, with and without bias, p in
 * {0, 0.3, 1}, training and eval, 1 and 2 threads, a small odd shape and one big enough for the
 * threaded loops, and NaN and inf inputs and gradients (NaN equals NaN here). No tolerance: the
 * fused loops perform the chain's float operations in its order (unary.c, dropout.c and linear.c
 * are built without FP contraction, so neither side fuses a product into an add on its own). */
#include "testkit.h"
#include "core/core_internal.h"
#include "ops/fused_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Sums of K <= 256 products of N(0, 1) pairs (|sum| up to ~50) reordered: about sqrt(K) eps
 * sqrt(sum of squares) ~ 3e-5 at most; gradients through attention add a few such sums. */
#define DW_ATOL 1e-4f
#define DW_RTOL 1e-5f

/* The public op that each fused activation stands for, and its name */
static attn_tensor *act_chain(attn_ctx *ctx, attn__act act, attn_tensor *h)
{
    return act == ATTN__ACT_RELU   ? attn_relu(ctx, h)
           : act == ATTN__ACT_GELU ? attn_gelu(ctx, h)
                                   : attn_gelu_tanh(ctx, h);
}
static const char *act_name(attn__act act)
{
    return act == ATTN__ACT_RELU ? "relu" : act == ATTN__ACT_GELU ? "gelu" : "gelu_tanh";
}

static bool same_float(float a, float b)
{
    return a == b || (isnan(a) && isnan(b));
}

/* One check: a and b hold the same values (NaN matching NaN); names the first that differs. */
static void check_same(const char *what, const float *a, const float *b, int64_t n)
{
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!same_float(a[i], b[i])) bad = i;
    TK_CHECK(bad < 0, "%s: element %lld is %.9g fused, %.9g chained", what, (long long)bad,
             bad < 0 ? 0.0 : (double)a[bad], bad < 0 ? 0.0 : (double)b[bad]);
}

/* t's gradient buffer filled with a fixed pattern (the same on both sides of a comparison), so
 * that the ops' backward must add to what is there */
static void seed_grad(attn_tensor *t)
{
    float *g = attn__grad(NULL, t); /* a heap or parameter tensor: malloc'd, no ctx needed */
    if (g)
        for (int64_t i = 0; i < t->numel; i++) g[i] = (float)(i * 7919 % 13) * 0.125f - 0.75f;
}

static attn_tensor *copy_of(const attn_tensor *t)
{
    attn_tensor *c = attn_tensor_alloc(t->ndim, t->shape);
    if (!c) return NULL;
    memcpy(c->data, t->data, (size_t)t->numel * sizeof(float));
    attn_tensor_set_requires_grad(c, true);
    seed_grad(c);
    return c;
}

typedef struct fused_case {
    attn__act act;
    bool bias, training;
    float p;
    int threads;
    int64_t rows_a, rows_b, in, out; /* x (rows_a, rows_b, in) */
    bool nonfinite;                  /* a NaN and an inf in x, an inf in dy */
} fused_case;

static attn_ctx *case_ctx(const fused_case *c)
{
    attn_ctx *ctx = attn_ctx_new(20261202);
    if (!ctx) return NULL;
    attn_ctx_set_training(ctx, c->training);
    attn_ctx_set_num_threads(ctx, c->threads);
    return ctx;
}

/* The end of one side's run: the RNG's next word when it ran (0 when not), the ctx and tensors freed */
static uint32_t finish_side(attn_ctx *ctx, bool ran, attn_tensor *const *tensors, int n)
{
    const uint32_t next = ran ? attn_rng_u32(attn_ctx_rng(ctx)) : 0;
    attn_ctx_free(ctx);
    for (int i = 0; i < n; i++) attn_tensor_free(tensors[i]);
    return next;
}

/* Runs one side (fused or chained) on its own copies of the inputs; the output and the gradients
 * land in y_out, gx, gw, gb (heap arrays the caller compares); returns the next RNG word. */
static uint32_t run_linear_act(const fused_case *c, bool fused, attn_tensor *const src[3], const float *dy,
                               float *y_out, float *gx, float *gw, float *gb)
{
    attn_tensor *x = copy_of(src[0]), *w = copy_of(src[1]), *b = c->bias ? copy_of(src[2]) : NULL;
    attn_ctx *ctx = case_ctx(c);
    attn_tensor *y = NULL;
    if (x && w && ctx && (b || !c->bias)) {
        if (fused) {
            y = attn__linear_act_dropout(ctx, x, w, b, c->act, c->p);
        } else {
            attn_tensor *h = attn_linear(ctx, x, w, b);
            h = act_chain(ctx, c->act, h);
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
    }
    return finish_side(ctx, y != NULL, (attn_tensor *[]){x, w, b}, 3);
}

static void test_linear_act(const fused_case *c, uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "linear_act %s%s p %.1f %s %d thr (%lld, %lld, %lld) -> %lld%s", act_name(c->act),
             c->bias ? " bias" : "", (double)c->p, c->training ? "train" : "eval", c->threads, (long long)c->rows_a,
             (long long)c->rows_b, (long long)c->in, (long long)c->out, c->nonfinite ? " nan/inf" : "");
    const int64_t rows = c->rows_a * c->rows_b, ny = rows * c->out;
    attn_tensor *src[3] = {tk_randn(seed, 3, (int64_t[]){c->rows_a, c->rows_b, c->in}),
                           tk_randn(seed + 1, 2, (int64_t[]){c->out, c->in}),
                           tk_randn(seed + 2, 1, (int64_t[]){c->out})};
    attn_tensor *dy = tk_randn(seed + 3, 1, (int64_t[]){ny});
    float *buf = calloc((size_t)(2 * (ny + src[0]->numel + src[1]->numel + c->out)), sizeof(float));
    TK_CHECK(src[0] && src[1] && src[2] && dy && buf, "%s: allocation", what);
    if (!(src[0] && src[1] && src[2] && dy && buf)) return;
    if (c->nonfinite) {
        src[0]->data[1] = NAN;              /* row 0 of h is NaN */
        src[0]->data[c->in + 2] = INFINITY; /* row 1: +-inf and NaN */
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
    TK_CHECK(next[0] == next[1], "%s: the RNG moved differently (next word %u fused, %u chained)", what, next[0],
             next[1]);
    free(buf);
    for (int i = 0; i < 3; i++) attn_tensor_free(src[i]);
    attn_tensor_free(dy);
}

static uint32_t run_add_dropout(const fused_case *c, bool fused, attn_tensor *const src[2], const float *ds,
                                float *s_out, float *gx, float *gb)
{
    attn_tensor *x = copy_of(src[0]), *b = copy_of(src[1]);
    attn_ctx *ctx = case_ctx(c);
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
    }
    return finish_side(ctx, s != NULL, (attn_tensor *[]){x, b}, 2);
}

static void test_add_dropout(const fused_case *c, uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "add_dropout p %.1f %s %d thr (%lld, %lld, %lld)%s", (double)c->p,
             c->training ? "train" : "eval", c->threads, (long long)c->rows_a, (long long)c->rows_b, (long long)c->out,
             c->nonfinite ? " nan/inf" : "");
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
    TK_CHECK(next[0] == next[1], "%s: the RNG moved differently (next word %u fused, %u chained)", what, next[0],
             next[1]);
    free(buf);
    attn_tensor_free(src[0]);
    attn_tensor_free(src[1]);
    attn_tensor_free(ds);
}

/* ---- the packed in-projection ---- */

/* attn__linear_blocks + attn__split_heads_block against, per block j, attn_split_heads(attn_linear(x,
 * rows j of W and b)), all blocks' heads concatenated and differentiated from one random gradient:
 * the forward GEMMs and dX's are the same calls, so the heads and dx are equal; dW is one GEMM
 * over all rows instead of n (each element the same K products summed in an order of the GEMM
 * library's choosing), and db's column sums are added into the gradient as they run instead of
 * into a block's own zeroed buffer first: both within float32 rounding of those sums. */
static void test_linear_blocks(int64_t B, int64_t L, int64_t E, int64_t H, int64_t n, int threads, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "linear_blocks (%lld, %lld, %lld) %lld heads %lld blocks %d thr", (long long)B,
             (long long)L, (long long)E, (long long)H, (long long)n, threads);
    attn_tensor *src[3] = {tk_randn(seed, 3, (int64_t[]){B, L, E}), tk_randn(seed + 1, 2, (int64_t[]){n * E, E}),
                           tk_randn(seed + 2, 1, (int64_t[]){n * E})};
    const int64_t nh = B * L * E;                                     /* elements of one block's heads */
    attn_tensor *dh = tk_randn(seed + 3, 1, (int64_t[]){2 * n * nh}); /* the heads', then y's */
    attn_tensor *x[2], *w[2], *b[2];
    float *heads[2];
    for (int fused = 0; fused < 2; fused++) {
        x[fused] = copy_of(src[0]), w[fused] = copy_of(src[1]), b[fused] = copy_of(src[2]);
        heads[fused] = malloc((size_t)(n * nh) * sizeof(float));
        attn_ctx *ctx = attn_ctx_new(1);
        TK_CHECK(x[fused] && w[fused] && b[fused] && heads[fused] && ctx, "%s: allocation", what);
        attn_ctx_set_num_threads(ctx, threads);
        attn_tensor *y = fused ? attn__linear_blocks(ctx, x[fused], w[fused], b[fused], n) : NULL;
        attn_tensor *lin[3] = {NULL, NULL, NULL}, *parts[4] = {NULL, NULL, NULL, NULL};
        for (int64_t j = 0; j < n; j++) {
            if (!fused)
                lin[j] =
                    attn_linear(ctx, x[0], attn_narrow(ctx, w[0], 0, j * E, E), attn_narrow(ctx, b[0], 0, j * E, E));
            attn_tensor *hj = fused ? attn__split_heads_block(ctx, y, j, n, H) : attn_split_heads(ctx, lin[j], H);
            parts[j] = hj ? attn_reshape(ctx, hj, 1, (int64_t[]){nh}) : NULL;
        }
        if (!fused) y = attn_concat(ctx, lin, (int)n, 2); /* (B, L, n E), the fused op's output */
        /* y also feeds the loss itself, so the heads' backward must add to its gradient */
        parts[n] = y ? attn_reshape(ctx, y, 1, (int64_t[]){n * nh}) : NULL;
        attn_tensor *all = attn_concat(ctx, parts, (int)n + 1, 0); /* every block's heads, then y */
        TK_NOT_NULL(all);
        if (all) {
            memcpy(heads[fused], all->data, (size_t)(n * nh) * sizeof(float));
            TK_OK(attn_backward_from(ctx, all, dh->data));
        }
        attn_ctx_free(ctx);
    }
    char part[200];
    snprintf(part, sizeof part, "%s: heads", what), check_same(part, heads[1], heads[0], n * nh);
    snprintf(part, sizeof part, "%s: dx", what), check_same(part, x[1]->grad, x[0]->grad, nh);
    snprintf(part, sizeof part, "%s: db", what), tk_close(part, b[1]->grad, b[0]->grad, n * E, DW_ATOL, DW_RTOL);
    snprintf(part, sizeof part, "%s: dW", what), tk_close(part, w[1]->grad, w[0]->grad, n * E * E, DW_ATOL, DW_RTOL);
    for (int i = 0; i < 2; i++) {
        attn_tensor_free(x[i]), attn_tensor_free(w[i]), attn_tensor_free(b[i]);
        free(heads[i]);
    }
    for (int i = 0; i < 3; i++) attn_tensor_free(src[i]);
    attn_tensor_free(dh);
}

/* attn_mha_forward with one tensor as query, key and value (self-attention: the packed projection)
 * or as key and value (cross-attention) against the same call with equal copies in those places
 * (separate projections): the same output, and the gradients of the input (the copies' summed)
 * and of the packed weight and bias within the reordered sums' rounding. */
static void test_mha_packed(bool cross, int threads, uint64_t seed)
{
    const int64_t B = 2, S = 7, L = cross ? 5 : S, E = 16, H = 4; /* query (B, L, E), key (B, S, E) */
    char what[80];
    snprintf(what, sizeof what, "mha %s, packed against copies, %d thr", cross ? "cross (k = v)" : "self", threads);
    attn_params *params[2];
    attn_mha_layer m[2];
    attn_tensor *q0 = tk_randn(seed, 3, (int64_t[]){B, L, E}), *kv0 = tk_randn(seed + 1, 3, (int64_t[]){B, S, E});
    attn_tensor *dy = tk_randn(seed + 2, 1, (int64_t[]){B * L * E});
    float *out[2] = {malloc((size_t)(B * L * E) * sizeof(float)), malloc((size_t)(B * L * E) * sizeof(float))};
    float *gin[2] = {calloc((size_t)(B * S * E), sizeof(float)), calloc((size_t)(B * S * E), sizeof(float))};
    for (int packed = 0; packed < 2; packed++) {
        attn_rng rng;
        attn_rng_seed(&rng, 5);
        params[packed] = attn_params_new();
        TK_OK(attn_mha_init(&m[packed], params[packed], "", E, H, 0, 0, true, 0.0f, &rng));
        seed_grad(m[packed].in_proj_weight);
        seed_grad(m[packed].in_proj_bias);
        attn_ctx *ctx = attn_ctx_new(1);
        attn_ctx_set_num_threads(ctx, threads);
        /* self: x as q, k, v (packed) or x, x', x'' ; cross: q with kv as k and v, or kv and kv' */
        attn_tensor *in[3] = {copy_of(cross ? q0 : kv0), copy_of(kv0), copy_of(kv0)};
        attn_tensor *q = in[0], *k = cross ? in[1] : (packed ? in[0] : in[1]), *v = packed ? k : in[2];
        attn_mha_opts opts = {.average_weights = true};
        attn_tensor *y = attn_mha_forward(ctx, &m[packed], q, k, v, &opts, NULL);
        TK_NOT_NULL(y);
        if (y) {
            memcpy(out[packed], y->data, (size_t)y->numel * sizeof(float));
            TK_OK(attn_backward_from(ctx, y, dy->data));
            /* the gradient that reached kv0 (self: x) through every place it was passed */
            for (int i = cross ? 1 : 0; i < 3; i++)
                if (in[i]->grad)
                    for (int64_t e = 0; e < B * S * E; e++) gin[packed][e] += in[i]->grad[e];
        }
        for (int i = 0; i < 3; i++) attn_tensor_free(in[i]);
        attn_ctx_free(ctx);
    }
    char part[160];
    snprintf(part, sizeof part, "%s: output", what), check_same(part, out[1], out[0], B * L * E);
    snprintf(part, sizeof part, "%s: d input", what), tk_close(part, gin[1], gin[0], B * S * E, DW_ATOL, DW_RTOL);
    snprintf(part, sizeof part, "%s: d in_proj_weight", what),
        tk_close(part, m[1].in_proj_weight->grad, m[0].in_proj_weight->grad, 3 * E * E, DW_ATOL, DW_RTOL);
    snprintf(part, sizeof part, "%s: d in_proj_bias", what),
        tk_close(part, m[1].in_proj_bias->grad, m[0].in_proj_bias->grad, 3 * E, DW_ATOL, DW_RTOL);
    for (int i = 0; i < 2; i++) attn_params_free(params[i]), free(out[i]), free(gin[i]);
    attn_tensor_free(q0);
    attn_tensor_free(kv0);
    attn_tensor_free(dy);
}

/* Inference (grad off): the fused op runs its pass in place over the GEMM's output; the same values */
static void test_linear_act_no_grad(attn__act act, uint64_t seed)
{
    attn_tensor *x = tk_randn(seed, 3, (int64_t[]){2, 9, 11}), *w = tk_randn(seed + 1, 2, (int64_t[]){17, 11});
    attn_tensor *b = tk_randn(seed + 2, 1, (int64_t[]){17});
    attn_ctx *ctx = attn_ctx_new(20261202);
    attn_ctx_set_grad_enabled(ctx, false);
    attn_ctx_set_training(ctx, true); /* dropout on: the mask applied in place too */
    attn_tensor *y = attn__linear_act_dropout(ctx, x, w, b, act, 0.5f);
    attn_rng_seed(attn_ctx_rng(ctx), 20261202); /* the chain draws the same mask */
    attn_tensor *h = attn_linear(ctx, x, w, b);
    attn_tensor *ref = attn_dropout(ctx, act_chain(ctx, act, h), 0.5f);
    TK_CHECK(y && ref && !y->requires_grad, "linear_act without grad: %s", attn_last_error());
    if (y && ref) check_same(act_name(act), y->data, ref->data, y->numel);
    attn_ctx_free(ctx);
    attn_tensor_free(x), attn_tensor_free(w), attn_tensor_free(b);
}

/* Every combination on the small shape; the big one (the threaded loops: 4 * 150 * 130 = 78,000
 * elements > ATTN_PARALLEL_MIN) for each activation with dropout on 1 and 2 threads. */
static void test_cases(void)
{
    const float ps[3] = {0.0f, 0.3f, 1.0f};
    uint64_t seed = 100;
    for (int act = 0; act < 3; act++)
        for (int bias = 0; bias < 2; bias++)
            for (int pi = 0; pi < 3; pi++)
                for (int training = 0; training < 2; training++)
                    for (int nonfinite = 0; nonfinite < 2; nonfinite++) {
                        fused_case c = {(attn__act)act, bias, training, ps[pi], 1, 3, 5, 7, 13, nonfinite};
                        test_linear_act(&c, seed += 10);
                        if (act == 0 && bias == 0) test_add_dropout(&c, seed += 10);
                    }
    for (int act = 0; act < 3; act++)
        for (int threads = 1; threads <= 2; threads++) {
            fused_case c = {(attn__act)act, true, true, 0.3f, threads, 4, 150, 16, 130, false};
            test_linear_act(&c, seed += 10);
            if (act == 0) test_add_dropout(&c, seed += 10);
        }
    /* self-attention (3 blocks) and cross-attention's key and value (2); odd sizes; one shape
     * past the GEMM's split (m n k > 2^21) on 2 threads */
    test_linear_blocks(2, 5, 12, 3, 3, 1, seed += 10);
    test_linear_blocks(3, 7, 8, 2, 2, 2, seed += 10);
    test_linear_blocks(1, 1, 4, 4, 3, 1, seed += 10);
    test_linear_blocks(4, 64, 96, 8, 3, 2, seed += 10);
    test_linear_blocks(2, 64, 96, 4, 2, 2, seed += 10);
    test_linear_act_no_grad(ATTN__ACT_RELU, seed += 10);
    test_linear_act_no_grad(ATTN__ACT_GELU, seed += 10);
    test_linear_act_no_grad(ATTN__ACT_GELU_TANH, seed += 10);
    for (int threads = 1; threads <= 2; threads++) {
        test_mha_packed(false, threads, seed += 10);
        test_mha_packed(true, threads, seed += 10);
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
    TK_CHECK(!attn__linear_blocks(ctx, x, w, NULL, 2) && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "2 blocks do not divide"),
             "linear_blocks of 2 blocks over 5 rows: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(!attn__split_heads_block(ctx, x, 0, 2, 1) && attn_last_status() == ATTN_ERR_SHAPE,
             "heads of a block of a 2-D x: %s", attn_last_error());
    attn_tensor *y3 = tk_randn(6, 3, (int64_t[]){2, 3, 12});
    TK_CHECK(!attn__split_heads_block(ctx, y3, 3, 3, 2) && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(block 3)"),
             "block 3 of 3: %s", attn_last_error());
    TK_CHECK(!attn__split_heads_block(ctx, y3, 0, 3, 3) && attn_last_status() == ATTN_ERR_SHAPE,
             "3 blocks of 3 heads over 12 columns: %s", attn_last_error());
    attn_tensor_free(y3);
    attn_clear_error();
    TK_CHECK(!attn__add_dropout(ctx, x, other, 0.1f) && attn_last_status() == ATTN_ERR_SHAPE &&
                 strstr(attn_last_error(), "(3, 4) and branch (4, 3)"),
             "add_dropout of two shapes: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(!attn__add_dropout(ctx, x, x, NAN) && attn_last_status() == ATTN_ERR_ARG &&
                 strstr(attn_last_error(), "dropout: p is nan"),
             "add_dropout with p NaN: %s", attn_last_error());
    attn_clear_error();
    TK_CHECK(!attn__add_dropout(ctx, x, NULL, 0.1f) && attn_last_status() == ATTN_ERR_ARG, "add_dropout of NULL: %s",
             attn_last_error());
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
