/* The training loop of every training command (see train_loop.h). */
#include "train_loop.h"
#include "dist.h"
#include "train_guard.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct train_state {
    const train_model *m;
    attn_optim *opt;
    attn_ctx *ctx;
    progress prog;
    char prog_name[48]; /* "classify train" */
    float *losses;      /* (cap_losses) each step's loss, for --plot-loss */
    int64_t n_losses, cap_losses;
    int64_t global_batch, per_epoch;
    double deadline; /* monotonic seconds; 0: none */
} train_state;

/* The run's checkpoint at position (epoch, batch): the model's config and metadata with it. */
static attn_status save(const train_state *s, long epoch, int64_t batch)
{
    const train_model *m = s->m;
    run_position pos = {.epoch = epoch, .batch = batch, .global_batch = s->global_batch, .rng = *attn_ctx_rng(s->ctx)};
    checkpoint_extra x = {0};
    int n_kv;
    const char *const *kv = m->checkpoint_meta(m->self, &n_kv, &x);
    return run_checkpoint_save(m->train->checkpoint, m->params, s->opt, &pos, kv, n_kv, &x);
}

/* Before the first step: the checkpoint this run writes can be read back (run_checkpoint_fits) */
static int checkpoint_fits(const train_state *s)
{
    const train_model *m = s->m;
    run_position pos = {.global_batch = s->global_batch, .rng = *attn_ctx_rng(s->ctx)};
    checkpoint_extra x = {0};
    int n_kv;
    const char *const *kv = m->checkpoint_meta(m->self, &n_kv, &x);
    return run_checkpoint_fits(m->cmd, m->train->checkpoint, m->params, s->opt, &pos, kv, n_kv, &x);
}

/* One step of every rank, this one on its n rows (0 when a short last batch left it none): the
 * step's learning rate, forward and backward, the sums over the ranks, the gradients averaged by
 * weight (every rank then holds the same, so each clips them alike), the update. Returns the mean loss over the global batch (NaN on failure on any rank;
 * the rank that failed has the message in attn_last_error); sums: the step's, over all ranks. */
static double step(train_state *s, const int64_t *rows, int64_t n, double sums[TRAIN_N_SUMS])
{
    const train_model *m = s->m;
    attn_optim_set_lr(s->opt, attn_lr_at(&m->schedule, attn_optim_step_count(s->opt) + 1));
    attn_params_zero_grad(m->params);
    if (n > 0 && !m->forward_backward(m->self, s->ctx, rows, n, sums)) sums[TRAIN_SUM_LOSS] = NAN;
    const double weight = sums[TRAIN_SUM_WEIGHT];
    dist_sum(sums, TRAIN_N_SUMS);
    const double loss = sums[TRAIN_SUM_LOSS] / sums[TRAIN_SUM_WEIGHT];
    if (!isfinite(loss)) return loss;
    dist_average_grads(attn_params_grad_block(m->params), attn_params_numel(m->params), weight, sums[TRAIN_SUM_WEIGHT]);
    if (m->clip_norm > 0 && !isfinite(attn_clip_grad_norm(m->params, m->clip_norm))) return NAN;
    return attn_optim_step(s->opt) == ATTN_OK ? loss : NAN;
}

/* Why the run stops before its next step (NULL: it goes on); the same answer on every rank. */
static const char *stop_reason(const train_state *s)
{
    const int64_t max_steps = s->m->train->max_steps;
    if (max_steps > 0 && attn_optim_step_count(s->opt) >= max_steps) return "--max-steps reached";
    if (s->deadline > 0 && dist_any(now_seconds() > s->deadline)) return "time budget reached";
    return NULL;
}

void train_epoch_line_tokens(void *self, const train_epoch *e)
{
    (void)self;
    printf("%lld steps, train loss %.4f, lr %.2e, %.0f tokens/s", (long long)e->steps,
           e->step_loss_sum / (double)e->steps, attn_optim_lr(e->opt), e->sums[TRAIN_SUM_TOKENS] / e->seconds);
}

/* The epoch's line, what the model does after it, and the checkpoint of where the run stands:
 * batch `next` of the epoch when it stopped early, else the end of the epoch. */
static int epoch_close(const train_state *s, const train_epoch *e, int64_t next, bool whole, const char *stopped)
{
    const train_model *m = s->m;
    if (e->steps > 0) {
        printf("epoch %ld", e->epoch + 1);
        if (stopped) printf(" (%s)", stopped);
        fputs(": ", stdout);
        m->epoch_line(m->self, e);
        putchar('\n');
    }
    int code = m->epoch_end ? m->epoch_end(m->self) : CLI_OK;
    fflush(stdout);
    if (code != CLI_OK || !m->train->checkpoint) return code;
    attn_status st = whole ? save(s, e->epoch + 1, 0) : save(s, e->epoch, next);
    if (st == ATTN_OK && whole && m->epoch_saved) st = m->epoch_saved(m->self, e->epoch + 1);
    return st == ATTN_OK ? CLI_OK : cli_fail(CLI_ERR_DATA, m->cmd, "%s", attn_last_error());
}

/* One epoch from batch `first`; *stopped says why when a stop rule ended it early. */
static int run_epoch(train_state *s, long epoch, int64_t first, const char **stopped)
{
    const train_model *m = s->m;
    const train_options *t = m->train;
    attn_batches batches = {0};
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)t->seed * 1000003u + (uint64_t)epoch + 1);
    if (m->batches(m->self, &rng, s->global_batch, &batches) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, m->cmd, "%s", attn_last_error());
    train_epoch e = {.epoch = epoch, .opt = s->opt};
    const double t0 = now_seconds();
    int code = CLI_OK;
    int64_t i = first;
    for (; code == CLI_OK && i < batches.count && !(*stopped = stop_reason(s)); i++) {
        int64_t n;
        const int64_t *rows = batch_shard(&batches, i, t->batch_size, &n);
        double sums[TRAIN_N_SUMS] = {0};
        const double loss = step(s, rows, n, sums);
        attn_ctx_reset(s->ctx);
        if (!isfinite(loss)) {
            progress_end(&s->prog);
            code = cli_fail(CLI_ERR_DATA, m->cmd, "epoch %ld, step %lld: %s; stopped, the last good checkpoint is %s",
                            epoch + 1, (long long)i + 1,
                            attn_last_status() != ATTN_OK ? attn_last_error() : "the loss is not finite",
                            train_last_good(t));
            break;
        }
        const int64_t done = attn_optim_step_count(s->opt);
        if (s->n_losses < s->cap_losses) s->losses[s->n_losses++] = (float)loss;
        for (int k = 0; k < TRAIN_N_SUMS; k++) e.sums[k] += sums[k];
        e.step_loss_sum += loss;
        e.steps++;
        train_guard_fault(m->params, done); /* test hook (ATTN_TEST_NAN_AFTER_STEP) */
        progress_step(&s->prog, epoch, i, batches.count, loss, sums[TRAIN_SUM_TOKENS]);
        if (t->checkpoint && t->checkpoint_every > 0 && done % t->checkpoint_every == 0 &&
            save(s, epoch, i + 1) != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, m->cmd, "%s", attn_last_error());
    }
    const bool whole = i == batches.count;
    attn_batches_free(&batches);
    progress_end(&s->prog);
    e.seconds = now_seconds() - t0;
    return code == CLI_OK ? epoch_close(s, &e, i, whole, *stopped) : code;
}

/* Every rank: the run's start (fresh or from its checkpoint) and its epochs. */
static int run_epochs(train_state *s)
{
    const train_model *m = s->m;
    const train_options *t = m->train;
    run_position pos = {.global_batch = s->global_batch, .per_epoch = s->per_epoch, .rng = *attn_ctx_rng(s->ctx)};
    int code = run_start(m->cmd, t->resume, *m->resume, t->checkpoint, m->params, s->opt, &pos);
    attn_st_close(*m->resume); /* read: its memory goes back */
    *m->resume = NULL;
    if (code != CLI_OK) return code;
    *attn_ctx_rng(s->ctx) = pos.rng;
    if (t->resume) printf("resumed %s at epoch %ld, step %lld\n", t->checkpoint, pos.epoch + 1, (long long)pos.batch);
    if (dist_size() > 1)
        printf("data-parallel: %d ranks x %lld %s per step\n", dist_size(), (long long)t->batch_size, m->example);
    s->deadline = m->budget_seconds > 0 ? now_seconds() + m->budget_seconds : 0;
    const int64_t all_steps = s->per_epoch * t->epochs;
    snprintf(s->prog_name, sizeof s->prog_name, "%s train", m->cmd);
    progress_start(&s->prog, s->prog_name, t->max_steps > 0 && t->max_steps < all_steps ? t->max_steps : all_steps,
                   attn_optim_step_count(s->opt), s->deadline, t->log_steps);
    const char *stopped = NULL;
    for (long epoch = pos.epoch; code == CLI_OK && !stopped && epoch < t->epochs && !(stopped = stop_reason(s));
         epoch++)
        code = run_epoch(s, epoch, epoch == pos.epoch ? pos.batch : 0, &stopped);
    return code;
}

/* The loss of every step as a picture (--plot-loss), rank 0. */
static int plot_losses(const train_state *s)
{
    const train_model *m = s->m;
    const char *path = m->train->plot_loss;
    if (!path || s->n_losses == 0 || dist_rank() != 0) return CLI_OK;
    attn_series series = {.label = "training loss (per step)", .y = s->losses, .n = s->n_losses};
    attn_lineplot_opts po = {.title = m->plot_title, .xlabel = "step", .ylabel = m->plot_ylabel};
    if (attn_plot_lines(path, &series, 1, &po) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, m->cmd, "%s", attn_last_error());
    printf("wrote %s\n", path);
    return CLI_OK;
}

int train_run(const train_model *m)
{
    const train_options *t = m->train;
    train_state s = {.m = m, .global_batch = t->batch_size * dist_size()};
    s.per_epoch = (m->examples + s.global_batch - 1) / s.global_batch;
    s.cap_losses = s.per_epoch * t->epochs;
    s.opt = cli_optim_new(m->params, &m->optim);
    s.ctx = cli_ctx_new(rank_dropout_seed(t->seed));
    s.losses = malloc((size_t)(s.cap_losses + 1) * sizeof *s.losses);
    int code = s.opt && s.ctx ? CLI_OK : cli_fail(CLI_ERR_DATA, m->cmd, "%s", attn_last_error());
    if (code == CLI_OK && !s.losses) code = cli_fail(CLI_ERR_DATA, m->cmd, "out of memory");
    if (code == CLI_OK && t->checkpoint) code = checkpoint_fits(&s);
    if (code == CLI_OK) code = run_epochs(&s);
    if (code == CLI_OK && m->finish) code = m->finish(m->self);
    if (code == CLI_OK) code = plot_losses(&s);
    free(s.losses);
    attn_ctx_free(s.ctx);
    attn_optim_free(s.opt);
    return code;
}
