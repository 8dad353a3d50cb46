/* Parity of every differentiable op with PyTorch 1.13. For each case in
 * tests/golden/op_*.safetensors (written by tests/golden/make_golden.py) it runs the op on the
 * stored inputs, compares the output (values and shape) with torch's `out`, back-propagates
 * torch's random `grad_out` and compares the gradient of every float input with `grad.<input>`.
 *
 * Tolerance, per tensor: |got - ref| <= rtol |ref_i| + atol max_j |ref_j| (testkit.h), from
 * tk_tol_of(2, 32, 16, 8). Both sides are float32 (torch's own result is the golden) with
 * different summation orders (BLAS blocking, our reductions), so bit equality is not expected.
 * One op is one reduction: the longest here is n <= 32 terms (cross entropy: the mean of 6 rows'
 * log-sum-exp over 5 classes; sum_all over 24), so the worst case n u sum|terms| holds for each
 * side; sum|terms| <= 16 max|ref| (the largest ratio in these files is sum_all's, 19.6 / 2.29 =
 * 8.6); 8 roundings of an element's own (erf, tanh, exp within 2 ulps, the products around them).
 * So atol = 2 * 32 * 16 u = 6.1e-5 and rtol = 2 * 8 u = 9.5e-7 (before: 1e-5 absolute +
 * 1e-4 |ref_i|). An error of 2e-4 max|ref| in any one element fails it (checked every time).
 * Options of each case (dims, flags, eps) are fixed by its name, mirrored from make_golden.py.
 * Dropout has no golden case (torch's RNG cannot be matched); FD and statistical tests cover it. */
#include "testkit.h"

#include <stdlib.h>
#include <string.h>

/* The bound of every comparison (the header says why) */
#define TOL tk_tol_of(2, 32, 16, 8)
#define MAX_INPUTS 3
#define MAX_OUTPUTS 2

typedef struct golden_case golden_case;

/* One run of a case: inputs loaded, the forward fills outs[] and returns how many it made. */
typedef struct golden_run {
    const golden_case *c;
    attn_st_file *f;
    attn_ctx *ctx;
    attn_tensor *in[MAX_INPUTS];
    attn_tensor *outs[MAX_OUTPUTS];
    int64_t *ints; /* integer inputs (ids, targets) loaded by the forward; freed by the runner */
} golden_run;

typedef int (*forward_fn)(golden_run *r);
typedef attn_tensor *(*unary_op)(attn_ctx *, attn_tensor *);
typedef attn_tensor *(*binary_op)(attn_ctx *, attn_tensor *, attn_tensor *);
typedef attn_tensor *(*dim_op)(attn_ctx *, attn_tensor *, int);
typedef attn_tensor *(*reduce_op)(attn_ctx *, attn_tensor *, int, bool);

struct golden_case {
    const char *name; /* tests/golden/op_<name>.safetensors */
    forward_fn forward;
    const char *inputs[MAX_INPUTS]; /* float inputs, all differentiable */
    unary_op unary;
    binary_op binary;
    dim_op dim_fn;
    reduce_op reduce;
    int opt[2]; /* dim / keepdim / trans_a, trans_b / padding */
    float fopt; /* scale factor, label smoothing */
};

/* ---- forwards: one per call shape ---- */

static int fwd_unary(golden_run *r)
{
    r->outs[0] = r->c->unary(r->ctx, r->in[0]);
    return 1;
}

static int fwd_binary(golden_run *r)
{
    r->outs[0] = r->c->binary(r->ctx, r->in[0], r->in[1]);
    return 1;
}

static int fwd_dim(golden_run *r)
{
    r->outs[0] = r->c->dim_fn(r->ctx, r->in[0], r->c->opt[0]);
    return 1;
}

static int fwd_reduce(golden_run *r)
{
    r->outs[0] = r->c->reduce(r->ctx, r->in[0], r->c->opt[0], r->c->opt[1] != 0);
    return 1;
}

static int fwd_matmul(golden_run *r)
{
    r->outs[0] = attn_matmul(r->ctx, r->in[0], r->in[1], r->c->opt[0], r->c->opt[1]);
    return 1;
}

static int fwd_scale(golden_run *r)
{
    r->outs[0] = attn_scale(r->ctx, r->in[0], r->c->fopt);
    return 1;
}

static int fwd_layer_norm(golden_run *r)
{
    r->outs[0] = attn_layer_norm(r->ctx, r->in[0], r->in[1], r->in[2], 1e-5f);
    return 1;
}

static int fwd_linear(golden_run *r)
{
    r->outs[0] = attn_linear(r->ctx, r->in[0], r->in[1], r->in[2]);
    return 1;
}

static int fwd_conv1d(golden_run *r)
{
    r->outs[0] = attn_conv1d(r->ctx, r->in[0], r->in[1], r->in[2], r->c->opt[0]);
    return 1;
}

/* The integer tensor `name` into r->ints, with its shape. */
static bool load_ints(golden_run *r, const char *name, int *ndim, int64_t *shape)
{
    const attn_st_tensor *st = attn_st_find(r->f, name);
    int64_t n = 0;
    r->ints = attn_st_load_i64(r->f, name, &n);
    TK_CHECK(st && r->ints && st->ndim <= ATTN_MAX_DIMS, "%s: integer input %s: %s", r->c->name, name,
             attn_last_error());
    if (!st || !r->ints || st->ndim > ATTN_MAX_DIMS) return false;
    *ndim = st->ndim;
    memcpy(shape, st->shape, (size_t)st->ndim * sizeof *shape);
    return true;
}

static int fwd_embedding(golden_run *r)
{
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    if (!load_ints(r, "ids", &ndim, shape)) return 0;
    r->outs[0] = attn_embedding(r->ctx, r->in[0], r->ints, ndim, shape, 1 /* padding_idx */);
    return 1;
}

static int fwd_cross_entropy(golden_run *r)
{
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    if (!load_ints(r, "target", &ndim, shape)) return 0;
    r->outs[0] = attn_cross_entropy(r->ctx, r->in[0], r->ints, -100, r->c->fopt);
    return 1;
}

static int fwd_reshape(golden_run *r)
{
    const int64_t shape[] = {6, 4};
    r->outs[0] = attn_reshape(r->ctx, r->in[0], 2, shape);
    return 1;
}

static int fwd_transpose(golden_run *r)
{
    r->outs[0] = attn_transpose(r->ctx, r->in[0], 1, 2);
    return 1;
}

static int fwd_permute(golden_run *r)
{
    const int perm[] = {0, 2, 1, 3};
    r->outs[0] = attn_permute(r->ctx, r->in[0], perm);
    return 1;
}

static int fwd_concat(golden_run *r)
{
    r->outs[0] = attn_concat(r->ctx, r->in, 2, 1);
    return 1;
}

static int fwd_split(golden_run *r)
{
    const int64_t sizes[] = {2, 3};
    attn_status st = attn_split(r->ctx, r->in[0], 1, sizes, 2, r->outs);
    TK_CHECK(st == ATTN_OK, "%s: attn_split: %s", r->c->name, attn_last_error());
    return st == ATTN_OK ? 2 : 0;
}

static int fwd_split_heads(golden_run *r)
{
    r->outs[0] = attn_split_heads(r->ctx, r->in[0], 2);
    return 1;
}

/* ---- the cases (mirroring make_golden.py) ---- */

/* CASE(name, forward, inputs..., options...): designated initializers, the rest zero. */
#define CASE(nm, fw, ...)                                                                                              \
    {                                                                                                                  \
        .name = nm, .forward = fw, __VA_ARGS__                                                                         \
    }
#define IN(...) .inputs = {__VA_ARGS__}

#define BINARY_CASES(op)                                                                                               \
    CASE(#op "_bc1", fwd_binary, IN("a", "b"), .binary = attn_##op),                                                   \
        CASE(#op "_bc2", fwd_binary, IN("a", "b"), .binary = attn_##op),                                               \
        CASE(#op "_bc3", fwd_binary, IN("a", "b"), .binary = attn_##op),                                               \
        CASE(#op "_same", fwd_binary, IN("a", "b"), .binary = attn_##op)
#define MATMUL_CASE(tag, ta, tb) CASE("matmul_" tag, fwd_matmul, IN("a", "b"), .opt = {ta, tb})
#define DIM_CASES(op)                                                                                                  \
    CASE(#op "_last", fwd_dim, IN("x"), .dim_fn = attn_##op, .opt = {-1}),                                             \
        CASE(#op "_dim1", fwd_dim, IN("x"), .dim_fn = attn_##op, .opt = {1})
#define REDUCE_CASE(op, tag, dim, keep) CASE(#op "_" tag, fwd_reduce, IN("x"), .reduce = attn_##op, .opt = {dim, keep})
#define REDUCE_CASES(op)                                                                                               \
    REDUCE_CASE(op, "d0_drop", 0, 0), REDUCE_CASE(op, "d0_keep", 0, 1), REDUCE_CASE(op, "d1_drop", 1, 0),              \
        REDUCE_CASE(op, "d1_keep", 1, 1), REDUCE_CASE(op, "dlast_drop", -1, 0), REDUCE_CASE(op, "dlast_keep", -1, 1),  \
        CASE(#op "_all", fwd_unary, IN("x"), .unary = attn_##op##_all)

static const golden_case cases[] = {
    BINARY_CASES(add),
    BINARY_CASES(sub),
    BINARY_CASES(mul),
    BINARY_CASES(div),
    MATMUL_CASE("batched", 0, 0),
    MATMUL_CASE("ta", 1, 0),
    MATMUL_CASE("tb", 0, 1),
    MATMUL_CASE("tab", 1, 1),
    MATMUL_CASE("shared", 0, 0),
    MATMUL_CASE("shared_tb", 0, 1),
    MATMUL_CASE("2d", 0, 0),
    CASE("scale", fwd_scale, IN("x"), .fopt = 0.37f),
    CASE("bias_add", fwd_binary, IN("x", "bias"), .binary = attn_bias_add),
    CASE("relu", fwd_unary, IN("x"), .unary = attn_relu),
    CASE("gelu", fwd_unary, IN("x"), .unary = attn_gelu),
    CASE("tanh", fwd_unary, IN("x"), .unary = attn_tanh),
    CASE("sigmoid", fwd_unary, IN("x"), .unary = attn_sigmoid),
    CASE("exp", fwd_unary, IN("x"), .unary = attn_exp),
    DIM_CASES(softmax),
    DIM_CASES(log_softmax),
    CASE("layer_norm", fwd_layer_norm, IN("x", "weight", "bias")),
    CASE("layer_norm_noaffine", fwd_layer_norm, IN("x")),
    CASE("embedding", fwd_embedding, IN("weight")),
    CASE("linear", fwd_linear, IN("x", "weight", "bias")),
    CASE("linear_nobias", fwd_linear, IN("x", "weight")),
    CASE("conv1d_pad1", fwd_conv1d, IN("x", "weight", "bias"), .opt = {1}),
    CASE("conv1d_pad0", fwd_conv1d, IN("x", "weight", "bias"), .opt = {0}),
    CASE("conv1d_nobias", fwd_conv1d, IN("x", "weight"), .opt = {1}),
    REDUCE_CASES(sum),
    REDUCE_CASES(mean),
    CASE("reshape", fwd_reshape, IN("x")),
    CASE("transpose", fwd_transpose, IN("x")),
    CASE("permute", fwd_permute, IN("x")),
    CASE("concat", fwd_concat, IN("x0", "x1")),
    CASE("split", fwd_split, IN("x")),
    CASE("split_heads", fwd_split_heads, IN("x")),
    CASE("merge_heads", fwd_unary, IN("x"), .unary = attn_merge_heads),
    CASE("cross_entropy_ls0", fwd_cross_entropy, IN("logits"), .fopt = 0.0f),
    CASE("cross_entropy_ls01", fwd_cross_entropy, IN("logits"), .fopt = 0.1f),
    CASE("mse_loss", fwd_binary, IN("pred", "target"), .binary = attn_mse_loss),
};

/* ---- the runner ---- */

/* got (values and shape) against golden tensor `name`. */
static void compare(golden_run *r, const char *name, const attn_tensor *got, const float *values)
{
    attn_tensor *ref = tk_golden_tensor(r->f, name);
    if (!ref) return;
    char what[128], gs[64], rs[64];
    snprintf(what, sizeof what, "%s: %s", r->c->name, name);
    bool same = attn_same_shape(got, ref);
    TK_CHECK(same, "%s: shape %s, torch has %s", what, attn_shape_str(got, gs, sizeof gs),
             attn_shape_str(ref, rs, sizeof rs));
    if (same && values)
        tk_close_scaled(what, values, ref->data, ref->numel, TOL);
    else if (same)
        TK_CHECK(false, "%s: no gradient computed", what);
    attn_tensor_free(ref);
}

/* A golden tensor copied into the ctx arena (no grad). */
static attn_tensor *golden_in_ctx(golden_run *r, const char *name)
{
    attn_tensor *h = tk_golden_tensor(r->f, name);
    if (!h) return NULL;
    attn_tensor *t = attn_tensor_from(r->ctx, h->ndim, h->shape, h->data);
    attn_tensor_free(h);
    return t;
}

/* One output: backward from torch's grad_out. Two: loss = sum_i sum(out_i * grad_out_i). */
static attn_status backward(golden_run *r, int n_out)
{
    if (n_out == 1) {
        attn_tensor *g = tk_golden_tensor(r->f, "grad_out");
        if (!g) return ATTN_ERR_ARG;
        TK_CHECK(g->numel == r->outs[0]->numel, "%s: grad_out size", r->c->name);
        attn_status st =
            g->numel == r->outs[0]->numel ? attn_backward_from(r->ctx, r->outs[0], g->data) : ATTN_ERR_SHAPE;
        attn_tensor_free(g);
        return st;
    }
    attn_tensor *loss = NULL;
    for (int i = 0; i < n_out; i++) {
        char name[32];
        snprintf(name, sizeof name, "grad_out%d", i);
        attn_tensor *term = attn_sum_all(r->ctx, attn_mul(r->ctx, r->outs[i], golden_in_ctx(r, name)));
        loss = loss ? attn_add(r->ctx, loss, term) : term;
    }
    return loss ? attn_backward(r->ctx, loss) : ATTN_ERR_ARG;
}

static int run_forward(golden_run *r)
{
    int n_in = 0;
    for (; n_in < MAX_INPUTS && r->c->inputs[n_in]; n_in++) {
        r->in[n_in] = tk_golden_tensor(r->f, r->c->inputs[n_in]);
        if (!r->in[n_in]) return 0;
        attn_tensor_set_requires_grad(r->in[n_in], true);
    }
    int n_out = r->c->forward(r);
    for (int i = 0; i < n_out; i++) {
        TK_CHECK(r->outs[i] != NULL, "%s: output %d: %s", r->c->name, i, attn_last_error());
        if (!r->outs[i]) return 0;
    }
    return n_out;
}

static void run_case(const golden_case *c)
{
    char file[96];
    snprintf(file, sizeof file, "op_%s", c->name);
    golden_run r = {.c = c, .f = tk_golden(file), .ctx = attn_ctx_new(1)};
    TK_NOT_NULL(r.ctx);
    int n_out = r.f && r.ctx ? run_forward(&r) : 0;
    for (int i = 0; i < n_out; i++) {
        char name[16] = "out";
        if (n_out > 1) snprintf(name, sizeof name, "out%d", i);
        compare(&r, name, r.outs[i], r.outs[i]->data);
    }
    if (n_out > 0) {
        attn_status st = backward(&r, n_out);
        TK_CHECK(st == ATTN_OK, "%s: backward: %s", c->name, attn_last_error());
        for (int i = 0; st == ATTN_OK && i < MAX_INPUTS && c->inputs[i]; i++) {
            char name[64];
            snprintf(name, sizeof name, "grad.%s", c->inputs[i]);
            compare(&r, name, r.in[i], r.in[i]->grad);
        }
    }
    for (int i = 0; i < MAX_INPUTS; i++) attn_tensor_free(r.in[i]);
    free(r.ints);
    attn_ctx_free(r.ctx);
    if (r.f) attn_st_close(r.f);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
    printf("test_golden_ops: %zu golden cases\n", sizeof cases / sizeof cases[0]);
    return tk_finish("test_golden_ops");
}
