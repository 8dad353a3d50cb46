/* attn translate train: Adam with the inverse-square-root warm-up of "Attention Is All You
 * Need", label-smoothed cross-entropy, length-bucketed batches, a time budget, checkpoints that
 * resume to the same losses, validation loss per epoch and test BLEU at the end. Under mpirun
 * each rank trains on its shard of every batch and the gradients are averaged weighted by target
 * tokens (the loss is a mean over them), so R ranks x batch b train as one process with batch
 * R x b. */
#include "translate.h"
#include "dist.h"
#include "train_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the loop's hooks see: the run, its training and validation splits, one batch's buffers. */
typedef struct translate_trainer {
    translate_run *run;
    const translate_split *train, *val;
    translate_batch batch;
} translate_trainer;

/* Length-bucketed pairs: pools of 100 batches, sorted by length. */
static attn_status epoch_batches(void *self, attn_rng *rng, int64_t global_batch, attn_batches *out)
{
    const translate_split *train = ((const translate_trainer *)self)->train;
    return attn_batches_bucketed(out, &train->src, &train->tgt, global_batch, 100, rng);
}

/* The checkpoint carries the vocabularies and the run's options: one file, replaced at once, so
 * the model and its vocabularies are never from two runs. */
static const char *const *checkpoint_meta(void *self, int *n_kv, checkpoint_extra *x)
{
    const translate_run *run = ((const translate_trainer *)self)->run;
    int n_opts;
    const run_option *ro = translate_run_options(run->opt, &n_opts);
    *x = (checkpoint_extra){.options = ro,
                            .n_options = n_opts,
                            .vocab_keys = translate_vocab_keys,
                            .vocab_texts = (const char *const *)run->vocab_text,
                            .n_vocabs = 2};
    return config_kv(&translate_schema, &run->model.cfg, n_kv);
}

/* --keep-epochs K: the parameters at the end of epoch `epoch` (1-based) as CHECKPOINT.epochN,
 * the file of epoch N - K removed, for `attn translate eval --average`. Rank 0 writes. */
static attn_status keep_epoch(void *self, long epoch)
{
    translate_run *run = ((translate_trainer *)self)->run;
    const long keep = run->opt->keep_epochs;
    if (keep <= 0 || dist_rank() != 0) return ATTN_OK;
    size_t n = strlen(run->opt->train.checkpoint) + 40;
    char *path = malloc(n);
    if (!path) return ATTN_ERR_NOMEM;
    int n_kv;
    const char *const *kv = config_kv(&translate_schema, &run->model.cfg, &n_kv);
    snprintf(path, n, "%s.epoch%ld", run->opt->train.checkpoint, epoch);
    /* the vocabularies go with the parameters here too: an average is taken of one run's files */
    const char **all = malloc((size_t)(2 * (n_kv + 2)) * sizeof *all);
    attn_status st = all ? ATTN_OK : ATTN_ERR_NOMEM;
    if (all) {
        memcpy(all, kv, (size_t)(2 * n_kv) * sizeof *all);
        for (int i = 0; i < 2; i++)
            all[2 * (n_kv + i)] = translate_vocab_keys[i], all[2 * (n_kv + i) + 1] = run->vocab_text[i];
        st = attn_checkpoint_save(path, run->params, NULL, all, n_kv + 2);
    }
    free(all);
    snprintf(path, n, "%s.epoch%ld", run->opt->train.checkpoint, epoch - keep);
    if (st == ATTN_OK && epoch > keep && cli_looks_like_checkpoint(path)) remove(path); /* ours alone */
    if (st == ATTN_OK) run->last_kept_epoch = epoch;
    free(path);
    return st;
}

/* This rank's forward and backward of its n pairs: the loss is a mean over the target tokens that
 * are not padding. */
static bool forward_backward(void *self, attn_ctx *ctx, const int64_t *rows, int64_t n, double *sums)
{
    translate_trainer *tt = self;
    const translate_batch *b = &tt->batch;
    if (translate_batch_fill(&tt->batch, tt->run, tt->train, rows, n, true) != ATTN_OK) return false;
    attn_tensor *loss = translate_loss(ctx, tt->run, b);
    if (!loss || attn_backward(ctx, loss) != ATTN_OK) return false;
    int64_t targets = 0;
    for (int64_t i = 0; i < b->n * b->tgt_width; i++) targets += b->tgt_out[i] != tt->run->model.cfg.pad_id;
    sums[TRAIN_SUM_LOSS] = loss->data[0] * (double)targets;
    sums[TRAIN_SUM_WEIGHT] = (double)targets;
    sums[TRAIN_SUM_TOKENS] = (double)b->tokens;
    return true;
}

/* The validation loss after each epoch. */
static int validate(void *self)
{
    translate_trainer *tt = self;
    double loss;
    if (!tt->val->src.count) return CLI_OK;
    int code = translate_val_loss(tt->run, tt->val, &loss);
    if (code == CLI_OK) printf("  validation loss %.4f (label smoothing %.2f)\n", loss, tt->run->opt->label_smoothing);
    return code;
}

int translate_train(translate_run *run, const translate_split *train, const translate_split *val)
{
    const translate_options *o = run->opt;
    const attn_seq2seq_config *c = &run->model.cfg;
    translate_trainer tt = {.run = run, .train = train, .val = val};
    train_model m = {.cmd = "translate",
                     .example = "pairs",
                     .train = &o->train,
                     .params = run->params,
                     .resume = &run->resume,
                     .examples = train->src.count,
                     .optim = attn_optim_defaults(ATTN_OPTIM_ADAM),
                     .schedule = {.kind = c->kind == ATTN_SEQ2SEQ_TRANSFORMER ? ATTN_LR_INV_SQRT : ATTN_LR_CONSTANT,
                                  .base_lr = (float)o->train.lr,
                                  .warmup_steps = o->warmup,
                                  .d_model = c->d_model},
                     .budget_seconds = 60.0 * (double)o->budget_min,
                     .plot_title = "attn translate: training loss",
                     .plot_ylabel = "label-smoothed cross-entropy",
                     .self = &tt,
                     .batches = epoch_batches,
                     .forward_backward = forward_backward,
                     .epoch_line = train_epoch_line_tokens,
                     .epoch_end = validate,
                     .checkpoint_meta = checkpoint_meta,
                     .epoch_saved = keep_epoch};
    m.optim.beta2 = 0.98f;
    m.optim.eps = 1e-9f;
    int code = train_run(&m);
    translate_batch_free(&tt.batch);
    return code;
}
