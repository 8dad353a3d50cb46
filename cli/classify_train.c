/* attn classify train: seed 002's training loop (Adam, cross-entropy, batches of shuffled
 * reviews), with checkpoints that resume to the same losses and a test accuracy at the end.
 * Under mpirun each rank trains on its shard of every batch and the gradients are averaged
 * (weighted by examples) before the optimizer step, so R ranks x batch b train as one process
 * with batch R x b. */
#include "classify.h"
#include "train_loop.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct batch_buffers {
    int64_t *ids, *lengths, *labels; /* (bs, max_len), (bs), (bs) */
} batch_buffers;

static bool buffers_alloc(batch_buffers *b, int64_t bs, int64_t max_len)
{
    b->ids = malloc((size_t)(bs * max_len) * sizeof *b->ids);
    b->lengths = malloc((size_t)bs * sizeof *b->lengths);
    b->labels = malloc((size_t)bs * sizeof *b->labels);
    return b->ids && b->lengths && b->labels;
}

static void buffers_free(batch_buffers *b)
{
    free(b->ids);
    free(b->lengths);
    free(b->labels);
}

/* What the loop's hooks see: the run, its training and test splits, one batch's buffers. */
typedef struct classify_trainer {
    classify_run *run;
    const classify_split *train, *test;
    batch_buffers buf;
} classify_trainer;

/* Shuffled reviews. */
static attn_status epoch_batches(void *self, attn_rng *rng, int64_t global_batch, attn_batches *out)
{
    return attn_batches_plain(out, ((const classify_trainer *)self)->train->count, global_batch, rng);
}

/* The checkpoint carries the vocabulary and the run's options: one file, replaced at once, so
 * the model and its vocabulary are never from two runs. */
static const char *const *checkpoint_meta(void *self, int *n_kv, checkpoint_extra *x)
{
    const classify_run *run = ((const classify_trainer *)self)->run;
    static const char *const key = "vocab";
    int n_opts;
    const run_option *ro = classify_run_options(run->opt, &n_opts);
    *x = (checkpoint_extra){.options = ro,
                            .n_options = n_opts,
                            .vocab_keys = &key,
                            .vocab_texts = (const char *const *)&run->vocab_text,
                            .n_vocabs = 1};
    return config_kv(&classify_schema, &run->opt->model, n_kv);
}

/* This rank's forward and backward of its n rows: the loss is a mean over examples, and each
 * correct answer counts (TRAIN_SUM_OWN). */
static bool forward_backward(void *self, attn_ctx *ctx, const int64_t *rows, int64_t n, double *sums)
{
    classify_trainer *ct = self;
    const batch_buffers *b = &ct->buf;
    int64_t width = 0;
    if (classify_batch(ct->run, ct->train, rows, n, b->ids, b->lengths, b->labels, &width) != ATTN_OK) return false;
    attn_tensor *logits = attn_classifier_forward(ctx, &ct->run->model, b->ids, b->lengths, n, width, NULL);
    attn_tensor *loss = attn_cross_entropy(ctx, logits, b->labels, -100, 0.0f);
    if (!loss || attn_backward(ctx, loss) != ATTN_OK) return false;
    sums[TRAIN_SUM_LOSS] = loss->data[0] * (double)n;
    sums[TRAIN_SUM_WEIGHT] = (double)n;
    const int64_t C = logits->shape[1];
    for (int64_t i = 0; i < n; i++) {
        const float *row = logits->data + i * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++) best = row[c] > row[best] ? c : best;
        sums[TRAIN_SUM_OWN] += best == b->labels[i];
        sums[TRAIN_SUM_TOKENS] += (double)b->lengths[i];
    }
    return true;
}

static void epoch_line(void *self, const train_epoch *e)
{
    (void)self;
    const double seen = e->sums[TRAIN_SUM_WEIGHT];
    printf("train loss %.4f, train acc %.2f%%, %.1f samples/s", e->sums[TRAIN_SUM_LOSS] / seen,
           100.0 * e->sums[TRAIN_SUM_OWN] / seen, seen / e->seconds);
}

/* The test accuracy at the end; --validate: the held-out reviews' after every epoch. */
static int score(void *self)
{
    const classify_trainer *ct = self;
    const char *split = ct->run->opt->validate ? "validation" : "test";
    double acc, loss;
    int code = classify_evaluate(ct->run, ct->test, &acc, &loss);
    if (code == CLI_OK)
        printf("%s accuracy: %.2f%% (%lld reviews), %s loss %.4f\n", split, acc, (long long)ct->test->count, split,
               loss);
    return code;
}

int classify_train(classify_run *run, const classify_split *train, const classify_split *test)
{
    const classify_options *o = run->opt;
    classify_trainer ct = {.run = run, .train = train, .test = test};
    const int64_t bs = o->train.batch_size;
    if (!buffers_alloc(&ct.buf, bs, o->model.max_len)) {
        buffers_free(&ct.buf); /* the parts that were allocated */
        return cli_fail(CLI_ERR_DATA, "classify",
                        "out of memory for a batch of %lld x %lld token ids; lower --batch-size or --max-len",
                        (long long)bs, (long long)o->model.max_len);
    }
    train_model m = {.cmd = "classify",
                     .example = "examples",
                     .train = &o->train,
                     .params = run->params,
                     .resume = &run->resume,
                     .examples = train->count,
                     .optim = attn_optim_defaults(ATTN_OPTIM_ADAM),
                     .schedule = {.kind = ATTN_LR_CONSTANT, .base_lr = (float)o->train.lr},
                     .plot_title = "attn classify: training loss",
                     .plot_ylabel = "cross-entropy",
                     .self = &ct,
                     .batches = epoch_batches,
                     .forward_backward = forward_backward,
                     .epoch_line = epoch_line,
                     .epoch_end = o->validate ? score : NULL,
                     .checkpoint_meta = checkpoint_meta,
                     .finish = o->validate ? NULL : score};
    m.optim.lr = (float)o->train.lr;
    int code = train_run(&m);
    buffers_free(&ct.buf);
    return code;
}
