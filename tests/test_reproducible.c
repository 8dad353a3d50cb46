/* Same seed + same thread count => bit-identical training run: a small Transformer seq2seq
 * (d 64, 4 heads, FFN 256, 2 + 2 layers, dropout 0.1, label smoothing 0.1, Adam) trains 4 steps
 * on 2 threads, twice from scratch; every loss and every parameter afterwards must be equal bit for
 * bit. The sizes make the library take its threaded paths: GEMMs of 2^21 and more multiply-adds
 * (split over the threads), dropout over enough elements to be drawn in parallel, and attention
 * big enough for its parallel region. A third run on 1 thread must train too (losses finite and
 * within 1e-3 of the 2-thread run: the split changes summation orders, not the model). */
#include "testkit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    BATCH = 12,
    SRC_LEN = 23,
    TGT_LEN = 21,
    VOCAB = 97,
    STEPS = 4
};

typedef struct run_result {
    float loss[STEPS];
    float *params; /* a copy of every parameter after the last step */
    int64_t n_params;
} run_result;

static run_result train(int threads)
{
    run_result r = {{0}, NULL, 0};
    attn_seq2seq_config cfg = {.kind = ATTN_SEQ2SEQ_TRANSFORMER,
                               .src_vocab = VOCAB,
                               .tgt_vocab = VOCAB,
                               .d_model = 64,
                               .num_heads = 4,
                               .dim_feedforward = 256,
                               .enc_layers = 2,
                               .dec_layers = 2,
                               .dropout = 0.1f,
                               .max_len = 32,
                               .pad_id = 1,
                               .bos_id = 2,
                               .eos_id = 3};
    attn_params *p = attn_params_new();
    attn_seq2seq m;
    attn_rng rng;
    attn_rng_seed(&rng, 7);
    TK_OK(attn_seq2seq_init(&m, p, &cfg, &rng));
    attn_optim_config oc = attn_optim_defaults(ATTN_OPTIM_ADAM);
    oc.lr = 1e-3f;
    attn_optim *opt = attn_optim_new(p, &oc);
    attn_ctx *ctx = attn_ctx_new(11);
    TK_OK(attn_ctx_set_num_threads(ctx, threads));
    TK_OK(attn_optim_set_num_threads(opt, threads));
    int64_t src[BATCH * SRC_LEN], tgt_in[BATCH * TGT_LEN], tgt_out[BATCH * TGT_LEN];
    int64_t src_lens[BATCH], tgt_lens[BATCH];
    for (int64_t b = 0; b < BATCH; b++) {
        src_lens[b] = SRC_LEN - b % 5, tgt_lens[b] = TGT_LEN - b % 4;
        for (int64_t t = 0; t < SRC_LEN; t++)
            src[b * SRC_LEN + t] = t < src_lens[b] ? 4 + attn_rng_below(&rng, VOCAB - 4) : cfg.pad_id;
        for (int64_t t = 0; t < TGT_LEN; t++) {
            tgt_in[b * TGT_LEN + t] = t == 0            ? cfg.bos_id
                                      : t < tgt_lens[b] ? 4 + attn_rng_below(&rng, VOCAB - 4)
                                                        : cfg.pad_id;
            tgt_out[b * TGT_LEN + t] = t < tgt_lens[b] ? 4 + attn_rng_below(&rng, VOCAB - 4) : cfg.pad_id;
        }
    }
    for (int s = 0; p && opt && ctx && s < STEPS; s++) {
        attn_ctx_reset(ctx);
        attn_params_zero_grad(p);
        attn_tensor *logits =
            attn_seq2seq_forward(ctx, &m, src, src_lens, BATCH, SRC_LEN, tgt_in, tgt_lens, TGT_LEN, NULL);
        attn_tensor *flat = attn_reshape(ctx, logits, 2, (int64_t[]){BATCH * TGT_LEN, VOCAB});
        attn_tensor *loss = attn_cross_entropy(ctx, flat, tgt_out, cfg.pad_id, 0.1f);
        TK_NOT_NULL(loss);
        if (!loss) break;
        r.loss[s] = loss->data[0];
        TK_OK(attn_backward(ctx, loss));
        TK_OK(attn_optim_step(opt));
    }
    r.n_params = attn_params_numel(p);
    r.params = malloc((size_t)r.n_params * sizeof(float));
    if (r.params) memcpy(r.params, attn_params_data_block(p), (size_t)r.n_params * sizeof(float));
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    attn_seq2seq_free(&m);
    attn_params_free(p);
    return r;
}

int main(void)
{
    run_result a = train(2), b = train(2), one = train(1);
    bool same_loss = !memcmp(a.loss, b.loss, sizeof a.loss);
    TK_CHECK(same_loss, "2 threads: losses differ between two runs (step 0: %.9g vs %.9g)", (double)a.loss[0],
             (double)b.loss[0]);
    TK_CHECK(a.params && b.params && a.n_params == b.n_params &&
                 !memcmp(a.params, b.params, (size_t)a.n_params * sizeof(float)),
             "2 threads: parameters differ between two runs after %d steps", STEPS);
    for (int s = 0; s < STEPS; s++) {
        printf("step %d: loss %.9g (2 threads), %.9g (1 thread)\n", s, (double)a.loss[s], (double)one.loss[s]);
        TK_CHECK(isfinite(one.loss[s]) && fabsf(one.loss[s] - a.loss[s]) <= 1e-3f,
                 "step %d: 1 thread %.9g, 2 threads %.9g", s, (double)one.loss[s], (double)a.loss[s]);
    }
    TK_CHECK(a.loss[STEPS - 1] < a.loss[0], "the loss did not go down: %g -> %g", (double)a.loss[0],
             (double)a.loss[STEPS - 1]);
    free(a.params), free(b.params), free(one.params);
    return tk_finish("test_reproducible");
}
