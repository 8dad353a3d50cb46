/* Our side of bench/compare_ort.sh: one forward on the inputs ONNX Runtime gets, written out
 * for the cross-check, then timed (median of runs after a warm-up). Public header only.
 *   bench_ort sdpa IN OUT [--causal] [--runs N] [--threads N] [--matmul-precision P]
 *       IN holds q, k, v (B, H, L, d); OUT gets out (B, H, L, d): attn_sdpa, fused kernel
 *   bench_ort encoder IN OUT [--runs N] [--threads N] [--matmul-precision P]
 *       IN holds x (B, L, E) and nn.TransformerEncoderLayer(E, H, F)'s state_dict (post-LN,
 *       ReLU; H from the metadata key num_heads); OUT gets out (B, L, E): eval mode, no grad
 * Prints one JSON line: {"what", "L", "causal", "threads", "t_min", "t_med", "t_max"} (seconds). */
#include <attn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct job {
    bool encoder, causal;
    attn_ctx *ctx;
    attn_tensor *q, *k, *v, *x;
    attn_encoder_layer enc;
} job;

static attn_tensor *forward(job *j)
{
    attn_ctx_reset(j->ctx);
    if (j->encoder) return attn_encoder_layer_forward(j->ctx, &j->enc, j->x, NULL, NULL);
    attn_sdpa_opts o = {.impl = ATTN_SDPA_FUSED};
    o.mask.causal = j->causal;
    return attn_sdpa(j->ctx, j->q, j->k, j->v, &o, NULL);
}

static int fail(const char *what)
{
    fprintf(stderr, "bench_ort: %s: %s\n", what, attn_last_error());
    return 1;
}

/* The encoder layer sized by the file's tensors, every parameter copied from it. */
static attn_status load_encoder(job *j, attn_params *p, const attn_st_file *f)
{
    const attn_st_tensor *w1 = attn_st_find(f, "linear1.weight"), *x = attn_st_find(f, "x");
    const char *heads = attn_st_metadata(f, "num_heads");
    if (!w1 || !x || !heads || w1->ndim != 2 || x->ndim != 3) {
        fprintf(stderr, "bench_ort: the encoder file needs x (B, L, E), linear1.weight and num_heads\n");
        return ATTN_ERR_ARG;
    }
    attn_transformer_config cfg = {.d_model = x->shape[2], .num_heads = atoll(heads), .dim_feedforward = w1->shape[0]};
    attn_rng rng;
    attn_rng_seed(&rng, 0);
    attn_status st = attn_encoder_layer_init(&j->enc, p, "", &cfg, &rng);
    for (size_t i = 0; st == ATTN_OK && i < attn_params_count(p); i++)
        st = attn_st_copy_into(f, attn_params_name(p, i), attn_params_at(p, i));
    return st;
}

int main(int argc, char **argv)
{
    if (argc < 4 || (strcmp(argv[1], "sdpa") && strcmp(argv[1], "encoder"))) {
        fprintf(stderr,
                "usage: bench_ort sdpa|encoder IN.safetensors OUT.safetensors [--causal] [--runs N] [--threads N]\n");
        return 2;
    }
    job j = {.encoder = !strcmp(argv[1], "encoder")};
    long runs = 10, threads = 2;
    attn_precision precision = ATTN_PRECISION_HIGHEST;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--causal"))
            j.causal = true;
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atol(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atol(argv[++i]);
        else if (!strcmp(argv[i], "--matmul-precision") && i + 1 < argc &&
                 attn_precision_from_name(argv[i + 1], &precision) == ATTN_OK)
            i++;
        else {
            fprintf(stderr, "bench_ort: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (runs < 1 || runs > 1000 || threads < 1 || threads > 1024) {
        fprintf(stderr, "bench_ort: --runs must be in [1, 1000] and --threads in [1, 1024]\n");
        return 2;
    }
    attn_st_file *f = attn_st_open(argv[2]);
    attn_params *p = attn_params_new();
    j.ctx = attn_ctx_new(0);
    if (!f || !p || !j.ctx || attn_ctx_set_num_threads(j.ctx, (int)threads) != ATTN_OK ||
        attn_ctx_set_matmul_precision(j.ctx, precision) != ATTN_OK)
        return fail(argv[2]);
    attn_ctx_set_grad_enabled(j.ctx, false);
    attn_ctx_set_training(j.ctx, false);
    if (j.encoder) {
        if (load_encoder(&j, p, f) != ATTN_OK || !(j.x = attn_st_load(f, "x", NULL))) return fail(argv[2]);
    } else if (!(j.q = attn_st_load(f, "q", NULL)) || !(j.k = attn_st_load(f, "k", NULL)) ||
               !(j.v = attn_st_load(f, "v", NULL))) {
        return fail(argv[2]);
    }
    attn_tensor *out = forward(&j);
    attn_st_writer *w = attn_st_writer_new();
    if (!out || !w || attn_st_writer_add_tensor(w, "out", out) != ATTN_OK || attn_st_writer_save(w, argv[3]) != ATTN_OK)
        return fail("forward");
    attn_st_writer_free(w);
    double *t = malloc((size_t)runs * sizeof *t);
    forward(&j); /* warm-up */
    for (long r = 0; t && r < runs; r++) {
        double t0 = now();
        if (!forward(&j)) return fail("forward");
        t[r] = now() - t0;
    }
    if (!t) return fail("out of memory");
    qsort(t, (size_t)runs, sizeof *t, cmp_double);
    const attn_tensor *shape_of = j.encoder ? j.x : j.q;
    printf("{\"what\":\"%s\",\"L\":%lld,\"causal\":%s,\"threads\":%ld,\"precision\":\"%s\",\"t_min\":%.6f,\"t_med\":%."
           "6f,\"t_max\":%.6f}\n",
           argv[1], (long long)shape_of->shape[shape_of->ndim - 2], j.causal ? "true" : "false", threads,
           attn_precision_name(precision), t[0], t[runs / 2], t[runs - 1]);
    free(t);
    if (j.encoder) attn_tensor_free(j.x);
    attn_tensor_free(j.q), attn_tensor_free(j.k), attn_tensor_free(j.v);
    attn_ctx_free(j.ctx);
    attn_params_free(p);
    attn_st_close(f);
    return 0;
}
