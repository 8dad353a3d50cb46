/* attn's side of the comparison with llm.c (bench/llmc.sh): a GPT-2 in llm.c's checkpoint format and
 * the first batch of an llm.c token file, run as llm.c's train_gpt2.c runs them (B rows of T tokens,
 * each row one causal sequence from position 0; the targets the next tokens; the mean
 * cross-entropy):
 *   llmc_oracle state MODEL.bin TOKENS.bin B T OUT.bin   test_gpt2.c's debug state of that batch:
 *                                                        logits, loss, every gradient
 *   llmc_oracle steps MODEL.bin TOKENS.bin B T N WD      N AdamW steps on that batch at llm.c's
 *                                                        settings (lr 1e-4, betas 0.9 and 0.999, eps
 *                                                        1e-8, weight decay WD), "step K: loss L"
 *   llmc_oracle time MODEL.bin TOKENS.bin B T N          N training steps as above (after 2), their
 *                                                        median ms as one JSON line
 * Token files: int32 x 256 (20240520, 1, count, ...), then count uint16 ids. */
#include <attn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t *read_tokens(const char *path, int64_t want)
{
    FILE *f = fopen(path, "rb");
    int32_t head[256];
    if (!f || fread(head, 4, 256, f) != 256 || head[0] != 20240520 || head[1] != 1 || head[2] < want) {
        fprintf(stderr, "llmc_oracle: %s is not an llm.c token file of %lld tokens or more\n", path, (long long)want);
        if (f) fclose(f);
        return NULL;
    }
    uint16_t *raw = malloc(sizeof *raw * (size_t)want);
    int64_t *ids = malloc(sizeof *ids * (size_t)want);
    const bool ok = raw && ids && fread(raw, 2, (size_t)want, f) == (size_t)want;
    for (int64_t i = 0; ok && i < want; i++) ids[i] = raw[i];
    fclose(f);
    free(raw);
    if (!ok) free(ids);
    return ok ? ids : NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 7 || (strcmp(argv[1], "state") && strcmp(argv[1], "steps") && strcmp(argv[1], "time"))) {
        fprintf(stderr, "usage: llmc_oracle state|steps|time MODEL.bin TOKENS.bin B T OUT|N [WD]\n");
        return 2;
    }
    const int64_t B = atol(argv[4]), T = atol(argv[5]);
    attn_params *p = attn_params_new();
    attn_lm m;
    if (B < 1 || T < 1 || attn_lm_load_llmc(&m, p, argv[2]) != ATTN_OK) {
        fprintf(stderr, "llmc_oracle: %s\n", B < 1 || T < 1 ? "B and T must be >= 1" : attn_last_error());
        return 1;
    }
    int64_t *tokens = read_tokens(argv[3], B * T + 1), *cu = malloc(sizeof *cu * (size_t)(B + 1));
    if (!tokens || !cu) return 1;
    for (int64_t b = 0; b <= B; b++) cu[b] = b * T;
    attn_ctx *ctx = attn_ctx_new(0);
    attn_ctx_set_num_threads(ctx, 2);
    const bool state = !strcmp(argv[1], "state"), timing = !strcmp(argv[1], "time");
    const long steps = state ? 1 : atol(argv[6]);
    attn_optim_config oc = attn_optim_defaults(ATTN_OPTIM_ADAMW);
    oc.lr = 1e-4f, oc.beta1 = 0.9f, oc.beta2 = 0.999f, oc.eps = 1e-8f;
    oc.weight_decay = argc > 7 ? (float)atof(argv[7]) : 0.0f;
    attn_optim *opt = attn_optim_new(p, &oc);
    attn_optim_set_num_threads(opt, 2);
    double *ms = malloc(sizeof *ms * (size_t)(steps + 2));
    int code = 0;
    for (long s = 0; s < steps + (timing ? 2 : 0) && code == 0; s++) {
        const double t0 = now();
        attn_params_zero_grad(p);
        attn_tensor *logits = attn_lm_forward(ctx, &m, tokens, cu, B);
        attn_tensor *loss = logits ? attn_cross_entropy(ctx, logits, tokens + 1, -100, 0.0f) : NULL;
        if (!loss || attn_backward(ctx, loss) != ATTN_OK) {
            fprintf(stderr, "llmc_oracle: %s\n", attn_last_error());
            code = 1;
        } else if (state) {
            if (attn_lm_save_llmc_state(&m, argv[6], tokens, tokens + 1, B, T, logits->data, loss->data[0]) !=
                ATTN_OK) {
                fprintf(stderr, "llmc_oracle: %s\n", attn_last_error());
                code = 1;
            } else
                printf("loss %f\n", (double)loss->data[0]);
        } else {
            if (!timing) printf("step %ld: loss %f\n", s, (double)loss->data[0]);
            attn_optim_step(opt);
        }
        attn_ctx_reset(ctx);
        ms[s] = 1e3 * (now() - t0);
    }
    if (timing && code == 0) {
        qsort(ms + 2, (size_t)steps, sizeof *ms, by_value);
        printf(
            "{\"bench\": \"llmc_step\", \"impl\": \"attn\", \"B\": %lld, \"T\": %lld, \"layers\": %lld, \"channels\": "
            "%lld, \"threads\": 2, \"step_ms_med\": %.2f}\n",
            (long long)B, (long long)T, (long long)m.cfg.num_layers, (long long)m.cfg.d_model, ms[2 + steps / 2]);
    }
    free(ms), free(tokens), free(cu);
    attn_optim_free(opt);
    attn_ctx_free(ctx);
    attn_lm_free(&m);
    attn_params_free(p);
    return code;
}
