/* attn lm train: AdamW with linear warm-up and cosine decay to a tenth of --lr, gradient clipping,
 * batches of chunks of the token stream packed end to end (each chunk cut at every
 * <|endoftext|>: no attention across documents, no padding), the validation loss and bits per
 * byte after each epoch; checkpoints, resume, time budget and data parallelism from the one
 * training loop (train_loop.h). */
#include "lm.h"
#include "dist.h"
#include "train_loop.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_LR_FRACTION 0.1

/* One batch's buffers: n chunks of T inputs packed, their next tokens, the sequences' offsets */
typedef struct lm_batch {
    int64_t *ids, *targets, *cu; /* (n T), (n T), (n T + 1) */
    int64_t cap, batch;          /* rows of room; sequences in cu */
} lm_batch;

static void batch_free(lm_batch *b)
{
    free(b->ids), free(b->targets), free(b->cu);
    memset(b, 0, sizeof *b);
}

/* Chunks rows[0..n) of s (chunk c: tokens [c T, c T + T], inputs and their next tokens) into b: a
 * sequence starts at each chunk's start and at each <|endoftext|> inside it */
static attn_status batch_fill(lm_batch *b, const lm_stream *s, const int64_t *rows, int64_t n, int64_t T, int64_t eot)
{
    if (n * T > b->cap) {
        batch_free(b);
        b->ids = malloc((size_t)(n * T) * sizeof *b->ids);
        b->targets = malloc((size_t)(n * T) * sizeof *b->targets);
        b->cu = malloc((size_t)(n * T + 1) * sizeof *b->cu);
        if (!b->ids || !b->targets || !b->cu) return attn_set_error(ATTN_ERR_NOMEM, "lm: out of memory for a batch");
        b->cap = n * T;
    }
    b->batch = 0;
    b->cu[0] = 0;
    for (int64_t r = 0; r < n; r++) {
        const int32_t *c = s->ids + rows[r] * T;
        for (int64_t t = 0; t < T; t++) {
            if (t > 0 && c[t] == eot) b->cu[++b->batch] = r * T + t;
            b->ids[r * T + t] = c[t], b->targets[r * T + t] = c[t + 1];
        }
        b->cu[++b->batch] = (r + 1) * T;
    }
    return ATTN_OK;
}

/* Chunks of T + 1 tokens a stream holds (each chunk's last token is the next chunk's first) */
static int64_t chunks_of(const lm_stream *s, int64_t T, int64_t limit)
{
    const int64_t n = limit > 0 && limit < s->n ? limit : s->n;
    return n > 1 ? (n - 1) / T : 0;
}

typedef struct lm_trainer {
    lm_run *run;
    const lm_stream *train, *val;
    lm_batch batch;
    int64_t total_steps; /* of the schedule */
} lm_trainer;

static attn_status epoch_batches(void *self, attn_rng *rng, int64_t global_batch, attn_batches *out)
{
    const lm_trainer *t = self;
    return attn_batches_plain(out, chunks_of(t->train, t->run->model.cfg.context, 0), global_batch, rng);
}

static bool forward_backward(void *self, attn_ctx *ctx, const int64_t *rows, int64_t n, double *sums)
{
    lm_trainer *t = self;
    const attn_lm *m = &t->run->model;
    const int64_t T = m->cfg.context;
    if (batch_fill(&t->batch, t->train, rows, n, T, lm_tok_start(&t->run->tok)) != ATTN_OK) return false;
    attn_tensor *logits = attn_lm_forward(ctx, m, t->batch.ids, t->batch.cu, t->batch.batch);
    attn_tensor *loss = logits ? attn_cross_entropy(ctx, logits, t->batch.targets, -100, 0.0f) : NULL;
    if (!loss || attn_backward(ctx, loss) != ATTN_OK) return false;
    sums[TRAIN_SUM_LOSS] = loss->data[0] * (double)(n * T);
    sums[TRAIN_SUM_WEIGHT] = (double)(n * T);
    sums[TRAIN_SUM_TOKENS] = (double)(n * T);
    return true;
}

int lm_score(lm_run *run, const lm_stream *s, int64_t limit, double *loss, double *bpb, int64_t *tokens)
{
    const attn_lm *m = &run->model;
    const int64_t T = m->cfg.context, chunks = chunks_of(s, T, limit), per = 8, eot = lm_tok_start(&run->tok);
    attn_ctx *ctx = cli_ctx_new(0);
    lm_batch b = {0};
    int64_t *rows = malloc((size_t)per * sizeof *rows);
    double sums[3] = {0, 0, 0}; /* nats, tokens, bytes of the predicted tokens */
    int code = ctx && rows ? CLI_OK : cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    if (ctx) attn_ctx_set_grad_enabled(ctx, false);
    for (int64_t first = (int64_t)dist_rank() * per; code == CLI_OK && first < chunks; first += per * dist_size()) {
        const int64_t n = chunks - first < per ? chunks - first : per;
        for (int64_t i = 0; i < n; i++) rows[i] = first + i;
        attn_tensor *logits =
            batch_fill(&b, s, rows, n, T, eot) == ATTN_OK ? attn_lm_forward(ctx, m, b.ids, b.cu, b.batch) : NULL;
        attn_tensor *l = logits ? attn_cross_entropy(ctx, logits, b.targets, -100, 0.0f) : NULL;
        if (!l) {
            code = cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
            break;
        }
        sums[0] += l->data[0] * (double)(n * T), sums[1] += (double)(n * T);
        for (int64_t i = 0; i < n * T; i++) {
            size_t len = 0;
            if (b.targets[i] != eot) lm_tok_bytes(&run->tok, b.ids[i], b.targets[i], &len);
            sums[2] += (double)len;
        }
        attn_ctx_reset(ctx);
    }
    dist_sum(sums, 3);
    *loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
    *bpb = sums[2] > 0 ? sums[0] / log(2.0) / sums[2] : NAN;
    *tokens = (int64_t)sums[1];
    batch_free(&b);
    free(rows);
    attn_ctx_free(ctx);
    return code;
}

static int validate(void *self)
{
    lm_trainer *t = self;
    double loss, bpb;
    int64_t tokens;
    if (!t->val || chunks_of(t->val, t->run->model.cfg.context, t->run->opt->val_tokens) == 0) return CLI_OK;
    int code = lm_score(t->run, t->val, t->run->opt->val_tokens, &loss, &bpb, &tokens);
    if (code == CLI_OK)
        printf("  validation loss %.4f, perplexity %.2f, %.4f bits per byte (%lld tokens)\n", loss, exp(loss), bpb,
               (long long)tokens);
    fflush(stdout);
    return code;
}

/* Linear warm-up over the first steps, then a cosine from --lr down to a tenth of it at the last
 * step of --epochs (the stop rules, --max-steps and the time budget, end a run without changing
 * its rates: a run resumed to the same step takes the same steps) */
static float warmup_cosine(int64_t step, void *user)
{
    const lm_trainer *t = user;
    const double base = t->run->opt->train.lr, warm = (double)t->run->opt->warmup, total = (double)t->total_steps;
    if ((double)step <= warm) return (float)(base * (double)step / warm);
    const double progress = total > warm ? fmin(1.0, ((double)step - warm) / (total - warm)) : 1.0;
    return (float)(base * (MIN_LR_FRACTION + (1.0 - MIN_LR_FRACTION) * 0.5 * (1.0 + cos(M_PI * progress))));
}

static const char *const *checkpoint_meta(void *self, int *n_kv, checkpoint_extra *x)
{
    const lm_run *run = ((const lm_trainer *)self)->run;
    static _Thread_local const char *key[1];
    key[0] = lm_tok_key(&run->tok);
    int n_opts;
    const run_option *ro = lm_run_options(run->opt, &n_opts);
    *x = (checkpoint_extra){.options = ro,
                            .n_options = n_opts,
                            .vocab_keys = key,
                            .vocab_texts = (const char *const *)&run->tok.text,
                            .n_vocabs = 1};
    return config_kv(&lm_schema, &run->model.cfg, n_kv);
}

int lm_train(lm_run *run, const lm_stream *train, const lm_stream *val)
{
    const lm_options *o = run->opt;
    lm_trainer t = {.run = run, .train = train, .val = val};
    const int64_t examples = chunks_of(train, run->model.cfg.context, 0);
    const int64_t global = o->train.batch_size * dist_size(), per_epoch = (examples + global - 1) / global;
    t.total_steps = per_epoch * o->train.epochs; /* --max-steps and the budget stop a run, never reshape it */
    if (examples < 1)
        return cli_fail(CLI_ERR_DATA, "lm", "the training text holds %lld tokens: not one chunk of --context %lld",
                        (long long)train->n, (long long)run->model.cfg.context);
    train_model m = {.cmd = "lm",
                     .example = "chunks",
                     .train = &o->train,
                     .params = run->params,
                     .resume = &run->resume,
                     .examples = examples,
                     .optim = attn_optim_defaults(ATTN_OPTIM_ADAMW),
                     .schedule = {.kind = ATTN_LR_CUSTOM, .fn = warmup_cosine, .user = &t},
                     .clip_norm = (float)o->clip,
                     .budget_seconds = 60.0 * (double)o->budget_min,
                     .plot_title = "attn lm: training loss",
                     .plot_ylabel = "cross-entropy (nats per token)",
                     .self = &t,
                     .batches = epoch_batches,
                     .forward_backward = forward_backward,
                     .epoch_line = train_epoch_line_tokens,
                     .epoch_end = validate,
                     .checkpoint_meta = checkpoint_meta};
    m.optim.beta2 = 0.95f; /* GPT-2's, nanoGPT's and llama2.c's */
    m.optim.weight_decay = (float)o->weight_decay;
    int code = train_run(&m);
    batch_free(&t.batch);
    return code;
}
