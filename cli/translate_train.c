/* attn translate train: Adam with the inverse-square-root warm-up of "Attention Is All You
 * Need", label-smoothed cross-entropy, length-bucketed batches, a time budget, checkpoints that
 * resume to the same losses, validation loss per epoch and test BLEU at the end. Under mpirun
 * each rank trains on its shard of every batch and the gradients are averaged weighted by target
 * tokens (the loss is a mean over them), so R ranks x batch b train as one process with batch
 * R x b. */
#include "translate.h"
#include "dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool translate_packs(const translate_run *run)
{
    return run->model.cfg.kind == ATTN_SEQ2SEQ_TRANSFORMER && !run->opt->no_pack;
}

attn_tensor *translate_loss(attn_ctx *ctx, const translate_run *run, const translate_batch *b)
{
    const attn_seq2seq_config *c = &run->model.cfg;
    if (translate_packs(run)) {
        attn_tensor *logits = attn_seq2seq_forward_packed(ctx, &run->model, b->src_packed, b->cu_src, b->tgt_in_packed,
                                                          b->cu_tgt, b->n); /* (total_t, V) */
        return attn_cross_entropy(ctx, logits, b->tgt_out_packed, c->pad_id, (float)run->opt->label_smoothing);
    }
    attn_tensor *logits = attn_seq2seq_forward(ctx, &run->model, b->src, b->src_lens, b->n, b->src_width, b->tgt_in,
                                               b->tgt_lens, b->tgt_width, NULL);
    attn_tensor *flat = attn_reshape(ctx, logits, 2, (int64_t[]){b->n * b->tgt_width, c->tgt_vocab});
    return attn_cross_entropy(ctx, flat, b->tgt_out, c->pad_id, (float)run->opt->label_smoothing);
}

static attn_status epoch_batches(attn_batches *out, const translate_run *run, const translate_split *s, long epoch)
{
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)run->opt->train.seed * 1000003u + (uint64_t)epoch + 1);
    return attn_batches_bucketed(out, &s->src, &s->tgt, run->opt->train.batch_size * dist_size(), 100, &rng);
}

/* The checkpoint, with the vocabularies and the run's options inside: one file, replaced at once,
 * so the model and its vocabularies are never from two runs. (A checkpoint is a regular file,
 * locked for the run: cli_check_checkpoint, checkpoint_lock_take.) */
static const char *const vocab_keys[2] = {"vocab.src", "vocab.tgt"};

static attn_status save(translate_run *run, const attn_optim *opt, attn_ctx *ctx, long epoch, int64_t batch)
{
    const char *ck = run->opt->train.checkpoint;
    run_position pos = {.epoch = epoch,
                        .batch = batch,
                        .global_batch = run->opt->train.batch_size * dist_size(),
                        .rng = *attn_ctx_rng(ctx)};
    int n, n_opts;
    const char *const *kv = translate_config_kv(&run->model.cfg, &n);
    const run_option *ro = translate_run_options(run->opt, &n_opts);
    const checkpoint_extra x = {.options = ro,
                                .n_options = n_opts,
                                .vocab_keys = vocab_keys,
                                .vocab_texts = (const char *const *)run->vocab_text,
                                .n_vocabs = 2};
    return run_checkpoint_save(ck, run->params, opt, &pos, kv, n, &x);
}

/* --keep-epochs K: the parameters at the end of epoch `epoch` (1-based) as CHECKPOINT.epochN,
 * the file of epoch N - K removed, for `attn translate eval --average`. Rank 0 writes. */
static attn_status keep_epoch(const translate_run *run, long epoch)
{
    const long keep = run->opt->keep_epochs;
    if (keep <= 0 || dist_rank() != 0) return ATTN_OK;
    size_t n = strlen(run->opt->train.checkpoint) + 40;
    char *path = malloc(n);
    if (!path) return ATTN_ERR_NOMEM;
    int n_kv;
    const char *const *kv = translate_config_kv(&run->model.cfg, &n_kv);
    snprintf(path, n, "%s.epoch%ld", run->opt->train.checkpoint, epoch);
    /* the vocabularies go with the parameters here too: an average is taken of one run's files */
    const char **all = malloc((size_t)(2 * (n_kv + 2)) * sizeof *all);
    attn_status st = all ? ATTN_OK : ATTN_ERR_NOMEM;
    if (all) {
        memcpy(all, kv, (size_t)(2 * n_kv) * sizeof *all);
        for (int i = 0; i < 2; i++) all[2 * (n_kv + i)] = vocab_keys[i], all[2 * (n_kv + i) + 1] = run->vocab_text[i];
        st = attn_checkpoint_save(path, run->params, NULL, all, n_kv + 2);
    }
    free(all);
    snprintf(path, n, "%s.epoch%ld", run->opt->train.checkpoint, epoch - keep);
    if (st == ATTN_OK && epoch > keep && cli_looks_like_checkpoint(path)) remove(path); /* ours alone */
    free(path);
    return st;
}

typedef struct train_state {
    float *losses; /* (steps) per-step training loss, for --plot-loss */
    int64_t n_losses, cap_losses;
    attn_optim *opt;
    attn_ctx *ctx;
    attn_lr_schedule schedule;
    double deadline;   /* monotonic seconds; 0: none */
    int64_t max_steps; /* 0: none */
    progress prog;
    int64_t per_epoch;
} train_state;

/* What a step sums over the ranks. */
enum {
    SUM_LOSS,
    SUM_TARGETS,
    SUM_TOKENS,
    N_SUMS
}; /* loss x target tokens, target tokens, all tokens */

/* This rank's forward and backward of its batch; fills its part of sums. */
static bool forward_backward(translate_run *run, attn_ctx *ctx, const translate_batch *b, double *sums)
{
    attn_tensor *loss = translate_loss(ctx, run, b);
    if (!loss || attn_backward(ctx, loss) != ATTN_OK) return false;
    int64_t targets = 0; /* the loss is a mean over the target tokens that are not padding */
    for (int64_t i = 0; i < b->n * b->tgt_width; i++) targets += b->tgt_out[i] != run->model.cfg.pad_id;
    sums[SUM_LOSS] = loss->data[0] * (double)targets;
    sums[SUM_TARGETS] = (double)targets;
    sums[SUM_TOKENS] = (double)b->tokens;
    return true;
}

/* One step of every rank, this one on its batch b of n pairs (0 when a short last batch left it
 * none). Returns the mean loss over the global batch's target tokens (NaN on failure on any
 * rank; the rank that failed has the message in attn_last_error); *tokens: the step's tokens
 * over all ranks. */
static double step(translate_run *run, train_state *ts, const translate_batch *b, int64_t n, double *tokens)
{
    attn_optim_set_lr(ts->opt, attn_lr_at(&ts->schedule, attn_optim_step_count(ts->opt) + 1));
    attn_params_zero_grad(run->params);
    double sums[N_SUMS] = {0};
    if (n > 0 && !forward_backward(run, ts->ctx, b, sums)) sums[SUM_LOSS] = NAN;
    const double targets = sums[SUM_TARGETS];
    dist_sum(sums, N_SUMS);
    double value = sums[SUM_LOSS] / sums[SUM_TARGETS];
    if (!isfinite(value)) return value;
    dist_average_grads(attn_params_grad_block(run->params), attn_params_numel(run->params), targets, sums[SUM_TARGETS]);
    if (attn_optim_step(ts->opt) != ATTN_OK) return NAN;
    *tokens = sums[SUM_TOKENS];
    return value;
}

/* Why the run stops before its next step (NULL: it goes on); the same answer on every rank. */
static const char *stop_reason(const train_state *ts)
{
    if (ts->max_steps > 0 && attn_optim_step_count(ts->opt) >= ts->max_steps) return "--max-steps reached";
    if (ts->deadline > 0 && dist_any(now_seconds() > ts->deadline)) return "time budget reached";
    return NULL;
}

/* One epoch from batch `first`; *stopped says why when it ended early (time budget, max steps). */
static int run_epoch(translate_run *run, train_state *ts, const translate_split *train, long epoch, int64_t first,
                     const char **stopped)
{
    const translate_options *o = run->opt;
    attn_batches batches = {0};
    translate_batch b = {0};
    if (epoch_batches(&batches, run, train, epoch) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    double loss_sum = 0, tokens = 0, t0 = now_seconds();
    int64_t steps = 0;
    int code = CLI_OK;
    for (int64_t i = first; code == CLI_OK && i < batches.count; i++) {
        if ((*stopped = stop_reason(ts))) {
            if (o->train.checkpoint && save(run, ts->opt, ts->ctx, epoch, i) != ATTN_OK)
                code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
            break;
        }
        int64_t n;
        const int64_t *rows = batch_shard(&batches, i, o->train.batch_size, &n);
        if (n > 0 && translate_batch_fill(&b, run, train, rows, n, true) != ATTN_OK) {
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
            break;
        }
        double step_tokens = 0, value = step(run, ts, &b, n, &step_tokens);
        attn_ctx_reset(ts->ctx);
        if (!isfinite(value)) {
            progress_end(&ts->prog);
            code = cli_fail(CLI_ERR_DATA, "translate",
                            "epoch %ld, step %lld: %s; stopped, the last good "
                            "checkpoint is %s",
                            epoch + 1, (long long)i + 1,
                            attn_last_status() != ATTN_OK ? attn_last_error() : "the loss is not finite",
                            train_last_good(&o->train));
            break;
        }
        if (ts->n_losses < ts->cap_losses) ts->losses[ts->n_losses++] = (float)value;
        loss_sum += value;
        tokens += step_tokens;
        steps++;
        progress_step(&ts->prog, epoch, i, batches.count, value, step_tokens);
        long every = o->train.checkpoint_every;
        if (o->train.checkpoint && every > 0 && attn_optim_step_count(ts->opt) % every == 0 &&
            save(run, ts->opt, ts->ctx, epoch, i + 1) != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    }
    progress_end(&ts->prog);
    char note[48] = "";
    if (*stopped) snprintf(note, sizeof note, " (%s)", *stopped);
    if (code == CLI_OK && steps > 0)
        printf("epoch %ld%s: %lld steps, train loss %.4f, lr %.2e, %.0f tokens/s\n", epoch + 1, note, (long long)steps,
               loss_sum / (double)steps, attn_optim_lr(ts->opt), tokens / (now_seconds() - t0));
    translate_batch_free(&b);
    attn_batches_free(&batches);
    return code;
}

int translate_train(translate_run *run, const translate_split *train, const translate_split *val)
{
    const translate_options *o = run->opt;
    const attn_seq2seq_config *c = &run->model.cfg;
    attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_ADAM);
    cfg.beta2 = 0.98f;
    cfg.eps = 1e-9f;
    train_state ts = {.opt = cli_optim_new(run->params, &cfg),
                      .ctx = cli_ctx_new(rank_dropout_seed(o->train.seed)),
                      .max_steps = o->train.max_steps};
    ts.schedule = (attn_lr_schedule){.kind = c->kind == ATTN_SEQ2SEQ_TRANSFORMER ? ATTN_LR_INV_SQRT : ATTN_LR_CONSTANT,
                                     .base_lr = (float)o->train.lr,
                                     .warmup_steps = o->warmup,
                                     .d_model = c->d_model};
    if (!ts.opt || !ts.ctx) return cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    const int64_t global = o->train.batch_size * dist_size();
    ts.per_epoch = (train->src.count + global - 1) / global;
    run_position pos = {.global_batch = global, .per_epoch = ts.per_epoch, .rng = *attn_ctx_rng(ts.ctx)};
    int code = run_start("translate", o->train.resume, run->resume, o->train.checkpoint, run->params, ts.opt, &pos);
    attn_st_close(run->resume); /* read: its memory goes back */
    run->resume = NULL;
    if (code == CLI_OK) {
        *attn_ctx_rng(ts.ctx) = pos.rng;
        if (o->train.resume)
            printf("resumed %s at epoch %ld, step %lld\n", o->train.checkpoint, pos.epoch + 1, (long long)pos.batch);
        if (dist_size() > 1)
            printf("data-parallel: %d ranks x %lld pairs per step\n", dist_size(), (long long)o->train.batch_size);
    }
    ts.cap_losses = ts.per_epoch * o->train.epochs;
    if (!(ts.losses = malloc((size_t)ts.cap_losses * sizeof *ts.losses)))
        code = cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    ts.deadline = o->budget_min > 0 ? now_seconds() + 60.0 * (double)o->budget_min : 0;
    const int64_t all_steps = ts.per_epoch * o->train.epochs;
    progress_start(&ts.prog, "translate train", ts.max_steps > 0 && ts.max_steps < all_steps ? ts.max_steps : all_steps,
                   attn_optim_step_count(ts.opt), o->train.log_steps);
    const char *stopped = NULL;
    for (long epoch = pos.epoch; code == CLI_OK && !stopped && epoch < o->train.epochs && !(stopped = stop_reason(&ts));
         epoch++) {
        code = run_epoch(run, &ts, train, epoch, epoch == pos.epoch ? pos.batch : 0, &stopped);
        double vloss;
        if (code == CLI_OK && val->src.count && (code = translate_val_loss(run, val, &vloss)) == CLI_OK)
            printf("  validation loss %.4f (label smoothing %.2f)\n", vloss, o->label_smoothing);
        fflush(stdout);
        if (code == CLI_OK && !stopped && o->train.checkpoint &&
            (save(run, ts.opt, ts.ctx, epoch + 1, 0) != ATTN_OK || keep_epoch(run, epoch + 1) != ATTN_OK))
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    }
    if (code == CLI_OK && o->train.plot_loss && ts.n_losses > 0 && dist_rank() == 0) {
        attn_series s = {.label = "training loss (per step)", .y = ts.losses, .n = ts.n_losses};
        attn_lineplot_opts po = {
            .title = "attn translate: training loss", .xlabel = "step", .ylabel = "label-smoothed cross-entropy"};
        if (attn_plot_lines(o->train.plot_loss, &s, 1, &po) != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
        else
            printf("wrote %s\n", o->train.plot_loss);
    }
    free(ts.losses);
    attn_ctx_free(ts.ctx);
    attn_optim_free(ts.opt);
    return code;
}
