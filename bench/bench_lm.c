/* The language model's speed (attn_lm): a training step (forward, cross-entropy, backward, gradient
 * clipping, AdamW) on random tokens, batch B sequences of the whole context packed end to end, and
 * decoding with the key/value cache at batch 1 (a prompt of 1 token, then one token per step up to
 * the context). Validates first (the loss of the first step is near ln V for an untrained model),
 * then prints one JSON line: median and min step ms over --steps after 2 warm-ups, tokens/s, and
 * decode tokens/s (median of 3 runs). bench/torch/lm.py times the same model in PyTorch;
 * bench/compare_lm.sh runs both. With --llama2c FILE the model is that llama2.c checkpoint, no step
 * is timed, and decoding is timed as llama2.c's run.c times it (from the second token on: tokens - 1
 * over the time after the first), for bench/llama2c.sh.
 *   bench_lm [--style gpt2|llama] [--layers 6] [--d-model 384] [--heads 6] [--context 256]
 *            [--batch 8] [--vocab 4096] [--steps 10] [--threads 2] [--llama2c FILE] */
#include <attn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    long layers = 6, d = 384, heads = 6, context = 256, batch = 8, vocab = 4096, steps = 10, threads = 2;
    int style = ATTN_LM_GPT2;
    const char *llama2c = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = atol(argv[i + 1]);
        if (!strcmp(argv[i], "--llama2c"))
            llama2c = argv[i + 1];
        else if (!strcmp(argv[i], "--style"))
            style = !strcmp(argv[i + 1], "llama") ? ATTN_LM_LLAMA : ATTN_LM_GPT2;
        else if (!strcmp(argv[i], "--layers"))
            layers = v;
        else if (!strcmp(argv[i], "--d-model"))
            d = v;
        else if (!strcmp(argv[i], "--heads"))
            heads = v;
        else if (!strcmp(argv[i], "--context"))
            context = v;
        else if (!strcmp(argv[i], "--batch"))
            batch = v;
        else if (!strcmp(argv[i], "--vocab"))
            vocab = v;
        else if (!strcmp(argv[i], "--steps"))
            steps = v;
        else if (!strcmp(argv[i], "--threads"))
            threads = v;
        else {
            fprintf(stderr, "bench_lm: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    attn_lm_config cfg = {.style = (attn_lm_style)style,
                          .vocab_size = vocab,
                          .context = context,
                          .d_model = d,
                          .num_layers = layers,
                          .num_heads = heads};
    attn_params *p = attn_params_new();
    attn_lm m;
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    if ((llama2c ? attn_lm_load_llama2c(&m, p, llama2c, NULL) : attn_lm_init(&m, p, &cfg, &rng)) != ATTN_OK) {
        fprintf(stderr, "bench_lm: %s\n", attn_last_error());
        return 1;
    }
    if (llama2c) { /* its sizes, no training step */
        style = ATTN_LM_LLAMA, layers = m.cfg.num_layers, d = m.cfg.d_model, heads = m.cfg.num_heads;
        context = m.cfg.context, vocab = m.cfg.vocab_size, steps = 0;
    }
    attn_optim_config oc = attn_optim_defaults(ATTN_OPTIM_ADAMW);
    oc.lr = 1e-4f, oc.beta2 = 0.95f;
    attn_optim *opt = attn_optim_new(p, &oc);
    attn_ctx *ctx = attn_ctx_new(1);
    attn_ctx_set_num_threads(ctx, (int)threads);
    attn_optim_set_num_threads(opt, (int)threads);
    const int64_t T = context, n = batch * T;
    int64_t *ids = malloc((size_t)(n + 1) * sizeof *ids), *cu = malloc((size_t)(batch + 1) * sizeof *cu);
    for (int64_t i = 0; i <= n; i++) ids[i] = attn_rng_below(&rng, (uint32_t)vocab);
    for (int64_t b = 0; b <= batch; b++) cu[b] = b * T;
    double *ms = malloc((size_t)(steps + 2) * sizeof *ms), first_loss = NAN;
    for (long s = 0; !llama2c && s < steps + 2; s++) {
        const double t0 = now();
        attn_params_zero_grad(p);
        attn_tensor *logits = attn_lm_forward(ctx, &m, ids, cu, batch);
        attn_tensor *loss = logits ? attn_cross_entropy(ctx, logits, ids + 1, -100, 0.0f) : NULL;
        if (!loss || attn_backward(ctx, loss) != ATTN_OK) {
            fprintf(stderr, "bench_lm: %s\n", attn_last_error());
            return 1;
        }
        if (s == 0) first_loss = loss->data[0];
        attn_clip_grad_norm(p, 1.0f);
        attn_optim_step(opt);
        attn_ctx_reset(ctx);
        ms[s] = 1e3 * (now() - t0);
    }
    if (!llama2c &&
        !(fabs(first_loss - log((double)vocab)) < 0.5)) { /* validation: an untrained model is near uniform */
        fprintf(stderr, "bench_lm: the first loss %.4f is far from ln V = %.4f\n", first_loss, log((double)vocab));
        return 1;
    }
    qsort(ms + 2, (size_t)steps, sizeof *ms, by_value);
    const double med = llama2c ? 0.0 : ms[2 + steps / 2]; /* (with --llama2c no step ran) */
    /* decoding: a prompt of one token, then one token per step to the end of the context */
    double dec[3];
    float *logits = malloc((size_t)vocab * sizeof *logits);
    for (int r = 0; r < 3; r++) {
        attn_lm_decoder *dd = attn_lm_decoder_new(&m, 1, T);
        attn_lm_decoder_set_num_threads(dd, (int)threads);
        int64_t tok = llama2c ? 1 : 0, one = 1; /* llama2.c's BOS */
        double t0 = now();
        for (int64_t t = 0; t < T; t++) {
            if (attn_lm_decoder_feed(dd, logits, &tok, &one) != ATTN_OK) return 1;
            int64_t best = 0;
            for (int64_t v = 1; v < vocab; v++) best = logits[v] > logits[best] ? v : best;
            tok = best;
            if (llama2c && t == 0) t0 = now();
        }
        dec[r] = (double)(llama2c ? T - 1 : T) / (now() - t0);
        attn_lm_decoder_free(dd);
    }
    qsort(dec, 3, sizeof *dec, by_value);
    if (llama2c)
        printf("{\"bench\": \"lm_decode\", \"impl\": \"attn\", \"model\": \"%s\", \"layers\": %ld, \"d_model\": %ld, "
               "\"context\": %ld, \"vocab\": %ld, \"threads\": %ld, \"decode_tokens_s\": %.1f}\n",
               llama2c, layers, d, context, vocab, threads, dec[1]);
    else
        printf("{\"bench\": \"lm\", \"impl\": \"attn\", \"style\": \"%s\", \"layers\": %ld, \"d_model\": %ld, "
               "\"heads\": %ld, "
               "\"context\": %ld, \"batch\": %ld, \"vocab\": %ld, \"threads\": %ld, \"params\": %lld, \"first_loss\": "
               "%.4f, "
               "\"step_ms_med\": %.2f, \"step_ms_min\": %.2f, \"train_tokens_s\": %.0f, \"decode_tokens_s\": %.1f}\n",
               style == ATTN_LM_LLAMA ? "llama" : "gpt2", layers, d, heads, context, batch, vocab, threads,
               (long long)attn_params_numel(p), first_loss, med, ms[2], (double)n / med * 1e3, dec[1]);
    free(ms), free(ids), free(cu), free(logits);
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    attn_lm_free(&m);
    attn_params_free(p);
    return 0;
}
