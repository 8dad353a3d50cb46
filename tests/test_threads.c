/* Two threads train two models at once, each with its own ctx, parameters and optimizer, and
 * each ends bit-identical to the same training run alone: the library keeps no mutable state
 * that the two could share. Model A is seed 002's classifier with a Transformer block (GEMMs,
 * SDPA, layer norm, dropout, AdamW), model B the Bahdanau translator (GRU, additive attention,
 * SGD with momentum, gradient clipping); they use different thread counts (1 and 2), which
 * must not leak from one ctx to the other. Then two threads share one classifier's parameters
 * read-only (what attn.h allows): each runs inference with grad off in its own ctx, and gets the
 * logits of the serial run. Built with -DATTN_TSAN=ON (scripts/test.sh), the same runs are
 * checked by ThreadSanitizer. */
#include "testkit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum {
    STEPS = 3,
    BATCH = 8,
    LEN = 32,
    VOCAB = 64
};

typedef struct job {
    bool translator; /* model B; else model A */
    int threads;     /* the ctx's and the optimizer's count */
    float *final;    /* (numel) parameters after STEPS steps, malloc'd */
    int64_t numel;
    attn_status status;
    char error[256];
} job;

/* Token ids and lengths of step `step` of a job: fixed by the seed, shared by the two runs. */
static void make_batch(int64_t *ids, int64_t *lens, int64_t *labels, uint64_t seed, int step)
{
    attn_rng rng;
    attn_rng_seed(&rng, seed * 1000 + (uint64_t)step);
    for (int b = 0; b < BATCH; b++) {
        lens[b] = 4 + (int64_t)attn_rng_below(&rng, LEN - 4 + 1);
        labels[b] = attn_rng_below(&rng, 2);
        for (int t = 0; t < LEN; t++) ids[b * LEN + t] = t < lens[b] ? 4 + (int64_t)attn_rng_below(&rng, VOCAB - 4) : 1;
    }
}

static attn_tensor *classifier_loss(attn_ctx *ctx, const attn_classifier *m, int step)
{
    int64_t ids[BATCH * LEN], lens[BATCH], labels[BATCH];
    make_batch(ids, lens, labels, 1, step);
    attn_tensor *logits = attn_classifier_forward(ctx, m, ids, lens, BATCH, LEN, NULL);
    return attn_cross_entropy(ctx, logits, labels, -100, 0.0f);
}

static attn_tensor *translator_loss(attn_ctx *ctx, const attn_seq2seq *m, int step)
{
    int64_t src[BATCH * LEN], src_lens[BATCH], tgt[BATCH * LEN], tgt_lens[BATCH], unused[BATCH];
    make_batch(src, src_lens, unused, 2, step);
    make_batch(tgt, tgt_lens, unused, 3, step);
    attn_tensor *logits = attn_seq2seq_forward(ctx, m, src, src_lens, BATCH, LEN, tgt, tgt_lens, LEN, NULL);
    attn_tensor *flat = attn_reshape(ctx, logits, 2, (int64_t[]){BATCH * LEN, VOCAB});
    return attn_cross_entropy(ctx, flat, tgt, 1, 0.1f);
}

static void *train(void *arg)
{
    job *j = arg;
    attn_rng rng;
    attn_rng_seed(&rng, j->translator ? 7 : 5);
    attn_params *p = attn_params_new();
    attn_classifier cls = {0};
    attn_seq2seq s2s = {0};
    attn_status st = !p ? ATTN_ERR_NOMEM : ATTN_OK;
    if (st == ATTN_OK && !j->translator) {
        attn_classifier_config c = attn_classifier_defaults(VOCAB);
        c.embed_dim = 64, c.num_heads = 4, c.hidden_dim = 64, c.max_len = LEN, c.num_blocks = 1;
        st = attn_classifier_init(&cls, p, &c, &rng);
    } else if (st == ATTN_OK) {
        attn_seq2seq_config c = {.kind = ATTN_SEQ2SEQ_BAHDANAU,
                                 .src_vocab = VOCAB,
                                 .tgt_vocab = VOCAB,
                                 .d_model = 32,
                                 .enc_layers = 2,
                                 .dec_layers = 2,
                                 .dropout = 0.1f,
                                 .max_len = LEN,
                                 .pad_id = 1,
                                 .bos_id = 2,
                                 .eos_id = 3};
        st = attn_seq2seq_init(&s2s, p, &c, &rng);
    }
    attn_optim_config oc = attn_optim_defaults(j->translator ? ATTN_OPTIM_SGD : ATTN_OPTIM_ADAMW);
    if (j->translator) oc.lr = 0.05f, oc.momentum = 0.9f;
    attn_optim *opt = st == ATTN_OK ? attn_optim_new(p, &oc) : NULL;
    attn_ctx *ctx = opt ? attn_ctx_new(11) : NULL;
    if (!ctx) st = attn_last_status();
    if (st == ATTN_OK) st = attn_ctx_set_num_threads(ctx, j->threads);
    if (st == ATTN_OK) st = attn_optim_set_num_threads(opt, j->threads);
    for (int step = 0; st == ATTN_OK && step < STEPS; step++) {
        attn_params_zero_grad(p);
        attn_tensor *loss = j->translator ? translator_loss(ctx, &s2s, step) : classifier_loss(ctx, &cls, step);
        st = loss ? attn_backward(ctx, loss) : attn_last_status();
        if (st == ATTN_OK && j->translator) attn_clip_grad_norm(p, 1.0f);
        if (st == ATTN_OK) st = attn_optim_step(opt);
        attn_ctx_reset(ctx);
    }
    j->status = st;
    snprintf(j->error, sizeof j->error, "%s", st == ATTN_OK ? "" : attn_last_error());
    j->numel = st == ATTN_OK ? attn_params_numel(p) : 0;
    j->final = j->numel ? malloc((size_t)j->numel * sizeof(float)) : NULL;
    if (j->final) memcpy(j->final, attn_params_data_block(p), (size_t)j->numel * sizeof(float));
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    attn_classifier_free(&cls);
    attn_seq2seq_free(&s2s);
    attn_params_free(p);
    return NULL;
}

static bool same_run(const char *what, const job *alone, const job *together)
{
    TK_CHECK(alone->status == ATTN_OK, "%s alone: %s", what, alone->error);
    TK_CHECK(together->status == ATTN_OK, "%s in parallel: %s", what, together->error);
    bool same = alone->final && together->final && alone->numel == together->numel &&
                memcmp(alone->final, together->final, (size_t)alone->numel * sizeof(float)) == 0;
    TK_CHECK(same,
             "%s: the parameters after %d steps trained beside another model are "
             "bit-identical to those trained alone (%lld values)",
             what, STEPS, (long long)alone->numel);
    return same;
}

/* ---- shared parameters, read-only ---- */

typedef struct reader {
    const attn_classifier *model; /* shared */
    int first_step;               /* the batches it classifies: STEPS of them from here */
    float logits[STEPS][BATCH * 2];
    attn_status status;
} reader;

static void *classify(void *arg)
{
    reader *r = arg;
    attn_ctx *ctx = attn_ctx_new(3);
    r->status = ctx ? ATTN_OK : attn_last_status();
    if (ctx) attn_ctx_set_grad_enabled(ctx, false), attn_ctx_set_training(ctx, false);
    for (int s = 0; r->status == ATTN_OK && s < STEPS; s++) {
        int64_t ids[BATCH * LEN], lens[BATCH], labels[BATCH];
        make_batch(ids, lens, labels, 4, r->first_step + s);
        attn_tensor *logits = attn_classifier_forward(ctx, r->model, ids, lens, BATCH, LEN, NULL);
        if (logits)
            memcpy(r->logits[s], logits->data, sizeof r->logits[s]);
        else
            r->status = attn_last_status();
        attn_ctx_reset(ctx);
    }
    attn_ctx_free(ctx);
    return NULL;
}

static void shared_inference(void)
{
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    attn_params *p = attn_params_new();
    attn_classifier m = {0};
    attn_classifier_config c = attn_classifier_defaults(VOCAB);
    c.embed_dim = 64, c.num_heads = 4, c.hidden_dim = 64, c.max_len = LEN, c.num_blocks = 1;
    TK_OK(p ? attn_classifier_init(&m, p, &c, &rng) : ATTN_ERR_NOMEM);
    static reader alone[2], together[2]; /* static: the logits are large for a stack */
    for (int i = 0; i < 2; i++) {
        alone[i] = (reader){.model = &m, .first_step = i * STEPS};
        together[i] = alone[i];
        classify(&alone[i]);
    }
    pthread_t ids[2];
    int started = 0;
    for (int i = 0; i < 2; i++) started += pthread_create(&ids[i], NULL, classify, &together[i]) == 0;
    for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
    for (int i = 0; i < 2; i++)
        TK_CHECK(started == 2 && alone[i].status == ATTN_OK && together[i].status == ATTN_OK &&
                     memcmp(alone[i].logits, together[i].logits, sizeof alone[i].logits) == 0,
                 "reader %d of shared parameters: the serial run's logits, bit for bit", i);
    attn_classifier_free(&m);
    attn_params_free(p);
}

int main(void)
{
    if (getenv("ATTN_TEST_EMULATOR")) { /* qemu-user 7.2 hangs a process of two threads that wait on each other */
        printf("test_threads: two threads at once under %s: skipped\n", getenv("ATTN_TEST_EMULATOR"));
        return 77;
    }
    job alone[2] = {{.translator = false, .threads = 2}, {.translator = true, .threads = 1}};
    job together[2] = {alone[0], alone[1]};
    for (int i = 0; i < 2; i++) train(&alone[i]);
    pthread_t ids[2];
    int started = 0;
    for (int i = 0; i < 2; i++) started += pthread_create(&ids[i], NULL, train, &together[i]) == 0;
    TK_CHECK(started == 2, "two threads started");
    for (int i = 0; i < started; i++) pthread_join(ids[i], NULL);
    if (started == 2) {
        same_run("classifier (2 threads)", &alone[0], &together[0]);
        same_run("Bahdanau translator (1 thread)", &alone[1], &together[1]);
    }
    for (int i = 0; i < 2; i++) free(alone[i].final), free(together[i].final);
    shared_inference();
    return tk_finish("test_threads");
}
