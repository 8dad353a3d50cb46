/* attn bench sgemm and gemm: the build's GEMM library (attn_gemm_backend) through attn_matmul.
 * sgemm: the QK^T shape, (L, d) @ (L, d)^T, B*H times. gemm: the models' linear layers,
 * Y (R, out) = X (R, in) W^T and both products of its backward, one result line each
 * (bench/compare_gemm.sh puts the builds of each library side by side). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- sgemm on the QK^T shape ---- */

/* Both workloads' state: a product's two operands in a ctx without gradients */
typedef struct gemm_state {
    attn_ctx *ctx;
    attn_tensor *a, *b; /* sgemm: Q and K (B*H, L, d); gemm: op(A) (M, K) and op(B) (K, N) as the layer's
                           product reads them */
    int64_t m, n, k;    /* gemm's */
    bool trans_a, trans_b;
} gemm_state;

static void gemm_teardown(void *p)
{
    gemm_state *s = p;
    if (!s) return;
    attn_ctx_free(s->ctx);
    attn_tensor_free(s->a), attn_tensor_free(s->b);
    free(s);
}

static int sgemm_run(void *p)
{
    gemm_state *s = p;
    attn_ctx_reset(s->ctx);
    return attn_matmul(s->ctx, s->a, s->b, false, true) ? CLI_OK
                                                        : cli_fail(CLI_ERR_DATA, "bench", "%s", attn_last_error());
}

static int sgemm_setup(const bench_args *a, void **state, bench_result *r)
{
    gemm_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    int64_t shape[3] = {a->B * a->H, a->L, a->d};
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    s->ctx = r->ctx = cli_ctx_new(0);
    if (s->ctx) attn_ctx_set_grad_enabled(s->ctx, false);
    s->a = bench_randn(&rng, 3, shape, false), s->b = bench_randn(&rng, 3, shape, false);
    r->flop = 2.0 * a->B * a->H * (double)a->L * a->L * a->d;
    return s->ctx && s->a && s->b ? CLI_OK : cli_fail(CLI_ERR_DATA, "bench", "out of memory");
}

const bench_workload bench_sgemm = {"sgemm", "fwd", 1, sgemm_setup, sgemm_run, gemm_teardown, NULL};

/* ---- gemm: the linear layers of the models ---- */

typedef struct gemm_shape {
    const char *layer;
    int64_t rows, out, in;
} gemm_shape;

/* The translator (attn translate train: d 256, FFN 512, 64 sentence pairs ~ 1024 target tokens,
 * 6434 French words), the classifier (batch 32 x 512 tokens, E 128) and the encoder workload
 * (B 8 x L 256, d 512, FFN 2048). */
static const gemm_shape gemm_shapes[] = {
    {"translator-proj", 1024, 256, 256},  {"translator-ffn1", 1024, 512, 256},
    {"translator-ffn2", 1024, 256, 512},  {"translator-generator", 1024, 6434, 256},
    {"classifier-proj", 16384, 128, 128}, {"encoder-proj", 2048, 512, 512},
    {"encoder-ffn1", 2048, 2048, 512},    {"encoder-ffn2", 2048, 512, 2048},
};
enum {
    GEMM_OPS = 3
}; /* forward Y = X W^T, dX = dY W, dW = dY^T X */
static const char *const gemm_ops[GEMM_OPS] = {"fwd", "bwd-data", "bwd-weight"};

static int gemm_run(void *p)
{
    gemm_state *s = p;
    attn_ctx_reset(s->ctx);
    return attn_matmul(s->ctx, s->a, s->b, s->trans_a, s->trans_b)
               ? CLI_OK
               : cli_fail(CLI_ERR_DATA, "bench", "%s", attn_last_error());
}

/* 64 entries of C against double sums: |C - ref| <= 1e-5 sum |a b| */
static int gemm_validate(gemm_state *s)
{
    attn_ctx_reset(s->ctx);
    attn_tensor *c = attn_matmul(s->ctx, s->a, s->b, s->trans_a, s->trans_b);
    if (!c) return cli_fail(CLI_ERR_DATA, "bench", "%s", attn_last_error());
    attn_rng rng;
    attn_rng_seed(&rng, 5);
    for (int t = 0; t < 64; t++) {
        int64_t i = attn_rng_below(&rng, (uint32_t)s->m), j = attn_rng_below(&rng, (uint32_t)s->n);
        double acc = 0.0, mag = 0.0;
        for (int64_t p = 0; p < s->k; p++) {
            double av = s->trans_a ? s->a->data[p * s->m + i] : s->a->data[i * s->k + p];
            double bv = s->trans_b ? s->b->data[j * s->k + p] : s->b->data[p * s->n + j];
            acc += av * bv, mag += fabs(av * bv);
        }
        if (!(fabs(c->data[i * s->n + j] - acc) <= 1e-5 * mag))
            return cli_fail(CLI_ERR_DATA, "bench", "gemm: C[%lld][%lld] = %g, expected %g", (long long)i, (long long)j,
                            (double)c->data[i * s->n + j], acc);
    }
    return CLI_OK;
}

static int gemm_setup(const bench_args *a, void **state, bench_result *r)
{
    const gemm_shape *g = &gemm_shapes[a->bench_case / GEMM_OPS];
    const int op = a->bench_case % GEMM_OPS;
    gemm_state *s = calloc(1, sizeof *s);
    *state = s;
    if (!s) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    if (a->bench_case == 0 && !a->json) printf("GEMM library: %s\n", attn_gemm_backend());
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    s->ctx = r->ctx = cli_ctx_new(0);
    if (s->ctx) attn_ctx_set_grad_enabled(s->ctx, false);
    /* forward: X (R, in) W (out, in)^T;  dX = dY (R, out) W (out, in);  dW = dY (R, out)^T X (R, in) */
    const int64_t a_shape[3][2] = {{g->rows, g->in}, {g->rows, g->out}, {g->rows, g->out}};
    const int64_t b_shape[3][2] = {{g->out, g->in}, {g->out, g->in}, {g->rows, g->in}};
    const int64_t mnk[3][3] = {{g->rows, g->out, g->in}, {g->rows, g->in, g->out}, {g->out, g->in, g->rows}};
    s->trans_a = op == 2, s->trans_b = op == 0;
    s->m = mnk[op][0], s->n = mnk[op][1], s->k = mnk[op][2];
    s->a = bench_randn(&rng, 2, a_shape[op], false), s->b = bench_randn(&rng, 2, b_shape[op], false);
    r->flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    if (!s->ctx || !s->a || !s->b) return cli_fail(CLI_ERR_DATA, "bench", "out of memory");
    return gemm_validate(s);
}

static void gemm_print(const bench_args *a, void *state, const bench_result *r)
{
    const gemm_state *s = state;
    const char *layer = gemm_shapes[a->bench_case / GEMM_OPS].layer, *op = gemm_ops[a->bench_case % GEMM_OPS];
    if (a->json)
        printf("{\"workload\":\"gemm\",\"layer\":\"%s\",\"mode\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld,"
               "\"trans_a\":%s,\"trans_b\":%s,\"backend\":\"%s\",\"threads\":%d,\"isa\":\"%s\",\"t_min\":%.6f,"
               "\"t_med\":%.6f,\"t_max\":%.6f,\"gflops_med\":%.2f}\n",
               layer, op, (long long)s->m, (long long)s->n, (long long)s->k, s->trans_a ? "true" : "false",
               s->trans_b ? "true" : "false", attn_gemm_backend(), cli_threads(), attn_isa_name(r->isa), r->t_min,
               r->t_med, r->t_max, r->flop / r->t_med * 1e-9);
    else
        printf("gemm %-20s %-10s M=%-5lld N=%-5lld K=%-5lld %-5s threads=%d %-11s  ms min/med/max %8.3f %8.3f %8.3f  "
               "GFLOP/s %6.1f\n",
               layer, op, (long long)s->m, (long long)s->n, (long long)s->k,
               s->trans_a   ? "A^T B"
               : s->trans_b ? "A B^T"
                            : "A B",
               cli_threads(), attn_isa_name(r->isa), 1e3 * r->t_min, 1e3 * r->t_med, 1e3 * r->t_max,
               r->flop / r->t_med * 1e-9);
}

const bench_workload bench_gemm = {
    "gemm",        NULL,       (int)(sizeof gemm_shapes / sizeof gemm_shapes[0]) * GEMM_OPS, gemm_setup, gemm_run,
    gemm_teardown, gemm_print,
};
