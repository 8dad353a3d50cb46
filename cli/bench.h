/* attn bench: what a workload is, shared by cmd_bench.c (the command, peak, sdpa, the modules)
 * and bench_gemm.c (the GEMM library on the QK^T shape and on the models' linear layers). */
#ifndef ATTN_CLI_BENCH_H
#define ATTN_CLI_BENCH_H

#include "cli.h"
#include "features.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct bench_args {
    const char *workload;
    long L, B, H, d, runs, warmup, threads;
    bool causal, json;
    int mode;              /* index into bench_mode_names */
    int impl;              /* an attn_sdpa_impl */
    int bench_case;        /* which of the workload's cases (gemm: layer and product) */
    int matmul_precision;  /* an attn_precision */
    long kv_heads;         /* sdpa: K and V's heads (0: H) */
    cli_features features; /* sdpa: --window, --alibi, --softcap */
    bool mods;             /* sdpa: causal, the window, ALiBi and softcap through attn_score_mods */
} bench_args;

extern const char *const bench_mode_names[]; /* "fwd", "fwdbwd", NULL */

typedef struct bench_result {
    double t_min, t_med, t_max; /* seconds */
    double flop;                /* per run */
    double items;               /* samples or tokens per run, 0 when not meaningful */
    const char *unit;
    attn_ctx *ctx;     /* the state's ctx, set by setup: its arena's peak is reported; NULL: none */
    size_t peak_bytes; /* arena peak */
    attn_isa isa;      /* the level of the kernels timed: attn_cpu_isa() unless setup says */
    bool bf16;         /* the products took bf16 operands (MEDIUM with bf16 products) */
} bench_result;

/* A workload: setup validates and allocates `state`, run is the timed call. */
typedef struct bench_workload {
    const char *name;
    const char *mode; /* printed as the mode; NULL: --mode's */
    int cases;        /* runs of the workload per `attn bench` call, each a result line */
    int (*setup)(const bench_args *a, void **state, bench_result *r);
    int (*run)(void *state);
    void (*teardown)(void *state);
    void (*print)(const bench_args *a, void *state, const bench_result *r); /* NULL: the common line */
    bool (*runs_case)(const bench_args *a); /* whether a->bench_case runs here; NULL: every case */
} bench_workload;

extern const bench_workload bench_sgemm, bench_gemm, bench_varlen; /* bench_varlen.c: sdpa on packed sequences */

/* A tensor of standard normal draws; NULL when out of memory. */
attn_tensor *bench_randn(attn_rng *rng, int ndim, const int64_t *shape, bool requires_grad);

#endif
