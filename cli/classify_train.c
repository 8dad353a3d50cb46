/* attn classify train: seed 002's training loop (Adam, cross-entropy, batches of shuffled
 * reviews), with checkpoints that resume to the same losses and a test accuracy at the end.
 * Under mpirun each rank trains on its shard of every batch and the gradients are averaged
 * (weighted by examples) before the optimizer step, so R ranks x batch b train as one process
 * with batch R x b. */
#include "classify.h"
#include "dist.h"
#include "train_guard.h"

#include <math.h>
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

/* The per-epoch shuffle depends only on (seed, epoch), so a resumed run and every rank see the
 * same order; batches are global (batch size x ranks). */
static attn_status epoch_batches(attn_batches *out, const classify_options *o, int64_t n, long epoch)
{
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)o->train.seed * 1000003u + (uint64_t)epoch + 1);
    return attn_batches_plain(out, n, o->train.batch_size * dist_size(), &rng);
}

/* The checkpoint, with the vocabulary and the run's options inside: one file, replaced at once, so
 * the model and its vocabulary are never from two runs. (A checkpoint is a regular file, locked
 * for the run: cli_check_checkpoint, checkpoint_lock_take.) */
static attn_status save(classify_run *run, const attn_optim *opt, attn_ctx *ctx, long epoch, int64_t batch)
{
    const char *ck = run->opt->train.checkpoint;
    run_position pos = {.epoch = epoch,
                        .batch = batch,
                        .global_batch = run->opt->train.batch_size * dist_size(),
                        .rng = *attn_ctx_rng(ctx)};
    int n, n_opts;
    const char *const *kv = classify_config_kv(&run->opt->model, &n);
    const run_option *ro = classify_run_options(run->opt, &n_opts);
    const char *key = "vocab", *text = run->vocab_text;
    const checkpoint_extra x = {
        .options = ro, .n_options = n_opts, .vocab_keys = &key, .vocab_texts = &text, .n_vocabs = 1};
    return run_checkpoint_save(ck, run->params, opt, &pos, kv, n, &x);
}

typedef struct epoch_stats {
    double loss_sum;
    int64_t correct, seen;
} epoch_stats;

/* What a step sums over the ranks. */
enum {
    SUM_LOSS,
    SUM_SEEN,
    SUM_CORRECT,
    SUM_TOKENS,
    N_SUMS
}; /* loss x examples, ... */

/* This rank's forward and backward of n examples; fills its part of sums. */
static bool forward_backward(classify_run *run, attn_ctx *ctx, const batch_buffers *b, int64_t n, int64_t width,
                             double *sums)
{
    attn_tensor *logits = attn_classifier_forward(ctx, &run->model, b->ids, b->lengths, n, width, NULL);
    attn_tensor *loss = attn_cross_entropy(ctx, logits, b->labels, -100, 0.0f);
    if (!loss || attn_backward(ctx, loss) != ATTN_OK) return false;
    sums[SUM_LOSS] = loss->data[0] * (double)n;
    const int64_t C = logits->shape[1];
    for (int64_t i = 0; i < n; i++) {
        const float *row = logits->data + i * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; c++) best = row[c] > row[best] ? c : best;
        sums[SUM_CORRECT] += best == b->labels[i];
        sums[SUM_TOKENS] += (double)b->lengths[i];
    }
    return true;
}

/* One step of every rank, this one on its n examples (0 when a short last batch left it none).
 * Returns the mean loss over the global batch (NaN on failure on any rank; the rank that failed
 * has the message in attn_last_error); *tokens: the step's tokens over all ranks. */
static double step(classify_run *run, attn_optim *opt, attn_ctx *ctx, const batch_buffers *b, int64_t n, int64_t width,
                   epoch_stats *st, double *tokens)
{
    attn_params_zero_grad(run->params);
    double sums[N_SUMS] = {[SUM_SEEN] = (double)n};
    if (n > 0 && !forward_backward(run, ctx, b, n, width, sums)) sums[SUM_LOSS] = NAN;
    dist_sum(sums, N_SUMS);
    double value = sums[SUM_LOSS] / sums[SUM_SEEN];
    if (!isfinite(value)) return value;
    dist_average_grads(attn_params_grad_block(run->params), attn_params_numel(run->params), (double)n, sums[SUM_SEEN]);
    if (attn_optim_step(opt) != ATTN_OK) return NAN;
    st->correct += (int64_t)sums[SUM_CORRECT];
    st->seen += (int64_t)sums[SUM_SEEN];
    st->loss_sum += sums[SUM_LOSS];
    *tokens = sums[SUM_TOKENS];
    return value;
}

static int finish(classify_run *run, const classify_split *test, const float *losses, int64_t n_losses)
{
    const classify_options *o = run->opt;
    double acc, loss;
    int code = classify_evaluate(run, test, &acc, &loss);
    if (code != CLI_OK) return code;
    printf("test accuracy: %.2f%% (%lld reviews), test loss %.4f\n", acc, (long long)test->count, loss);
    if (o->train.plot_loss && n_losses > 0 && dist_rank() == 0) {
        attn_series s = {.label = "training loss (per step)", .y = losses, .n = n_losses};
        attn_lineplot_opts po = {.title = "attn classify: training loss", .xlabel = "step", .ylabel = "cross-entropy"};
        if (attn_plot_lines(o->train.plot_loss, &s, 1, &po) != ATTN_OK)
            return cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
        printf("wrote %s\n", o->train.plot_loss);
    }
    return CLI_OK;
}

/* Steps of the whole run: the epochs, or --max-steps when it comes first. */
static int64_t step_limit(const train_options *t, int64_t per_epoch)
{
    const int64_t all = per_epoch * t->epochs;
    return t->max_steps > 0 && t->max_steps < all ? t->max_steps : all;
}

static int train_loop(classify_run *run, attn_optim *opt, attn_ctx *ctx, run_position pos, const classify_split *train,
                      float *losses, int64_t *n_losses)
{
    const classify_options *o = run->opt;
    const int64_t bs = o->train.batch_size, per_epoch = (train->count + pos.global_batch - 1) / pos.global_batch;
    const int64_t limit = step_limit(&o->train, per_epoch);
    int64_t done = per_epoch * pos.epoch + pos.batch;
    batch_buffers buf;
    if (!buffers_alloc(&buf, bs, o->model.max_len)) {
        buffers_free(&buf); /* the parts that were allocated */
        return cli_fail(CLI_ERR_DATA, "classify",
                        "out of memory for a batch of %lld x %lld token ids; "
                        "lower --batch-size or --max-len",
                        (long long)bs, (long long)o->model.max_len);
    }
    progress prog;
    progress_start(&prog, "classify train", limit, done, o->train.log_steps);
    int code = CLI_OK;
    for (long epoch = pos.epoch; code == CLI_OK && epoch < o->train.epochs && done < limit; epoch++) {
        attn_batches batches = {0};
        if (epoch_batches(&batches, o, train->count, epoch) != ATTN_OK) {
            code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
            break;
        }
        epoch_stats st = {0};
        double t0 = now_seconds();
        int64_t b = epoch == pos.epoch ? pos.batch : 0;
        for (; code == CLI_OK && b < batches.count && done < limit; b++, done++) {
            int64_t n, width = 0;
            const int64_t *rows = batch_shard(&batches, b, bs, &n);
            if (n > 0 && classify_batch(run, train, rows, n, buf.ids, buf.lengths, buf.labels, &width) != ATTN_OK) {
                code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
                break;
            }
            double tokens = 0, loss = step(run, opt, ctx, &buf, n, width, &st, &tokens);
            attn_ctx_reset(ctx);
            if (!isfinite(loss)) {
                progress_end(&prog);
                code = cli_fail(CLI_ERR_DATA, "classify",
                                "epoch %ld, step %lld: %s; stopped, the last good checkpoint is %s", epoch + 1,
                                (long long)b + 1,
                                attn_last_status() != ATTN_OK ? attn_last_error() : "the loss is not finite",
                                train_last_good(&o->train));
                break;
            }
            losses[(*n_losses)++] = (float)loss;
            train_guard_fault(run->params, done + 1); /* test hook (ATTN_TEST_NAN_AFTER_STEP) */
            progress_step(&prog, epoch, b, batches.count, loss, tokens);
            long every = o->train.checkpoint_every;
            if (o->train.checkpoint && every > 0 && (done + 1) % every == 0 &&
                save(run, opt, ctx, epoch, b + 1) != ATTN_OK)
                code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
        }
        const bool whole = b == batches.count;
        attn_batches_free(&batches);
        if (code != CLI_OK) break;
        progress_end(&prog);
        double secs = now_seconds() - t0;
        if (st.seen > 0)
            printf("epoch %ld%s: train loss %.4f, train acc %.2f%%, %.1f samples/s\n", epoch + 1,
                   whole ? "" : " (stopped at --max-steps)", st.loss_sum / (double)st.seen,
                   100.0 * (double)st.correct / (double)st.seen, (double)st.seen / secs);
        fflush(stdout);
        if (o->train.checkpoint && save(run, opt, ctx, whole ? epoch + 1 : epoch, whole ? 0 : b) != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    }
    buffers_free(&buf);
    return code;
}

int classify_train(classify_run *run, const classify_split *train, const classify_split *test)
{
    const classify_options *o = run->opt;
    attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_ADAM);
    cfg.lr = (float)o->train.lr;
    attn_optim *opt = cli_optim_new(run->params, &cfg);
    attn_ctx *ctx = cli_ctx_new(rank_dropout_seed(o->train.seed));
    const int64_t global = o->train.batch_size * dist_size(), per_epoch = (train->count + global - 1) / global;
    float *losses = malloc((size_t)(per_epoch * o->train.epochs + 1) * sizeof *losses);
    int64_t n_losses = 0;
    int code = opt && ctx && losses ? CLI_OK : cli_fail(CLI_ERR_DATA, "classify", "%s", attn_last_error());
    run_position pos = {.global_batch = global, .per_epoch = per_epoch};
    if (code == CLI_OK) {
        pos.rng = *attn_ctx_rng(ctx);
        code = run_start("classify", o->train.resume, run->resume, o->train.checkpoint, run->params, opt, &pos);
    }
    attn_st_close(run->resume); /* read: its memory goes back */
    run->resume = NULL;
    if (code == CLI_OK) {
        *attn_ctx_rng(ctx) = pos.rng;
        if (o->train.resume)
            printf("resumed %s at epoch %ld, step %lld\n", o->train.checkpoint, pos.epoch + 1, (long long)pos.batch);
        if (dist_size() > 1)
            printf("data-parallel: %d ranks x %lld examples per step\n", dist_size(), (long long)o->train.batch_size);
    }
    if (code == CLI_OK) code = train_loop(run, opt, ctx, pos, train, losses, &n_losses);
    if (code == CLI_OK) code = finish(run, test, losses, n_losses);
    free(losses);
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    return code;
}
