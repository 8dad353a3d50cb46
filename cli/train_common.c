/* Shared pieces of the training subcommands (see train_common.h). */
#include "train_common.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void train_options_help(void)
{
    printf("common training options:\n"
           "  --epochs N            epochs\n"
           "  --batch-size N        examples per step\n"
           "  --lr X                learning rate\n"
           "  --max-len N           longest sequence kept (tokens)\n"
           "  --seed S              seed for init, shuffling and dropout\n"
           "  --threads N           threads (default: all cores)\n"
           "  --checkpoint PATH     save the run there after every epoch (atomically)\n"
           "  --checkpoint-every N  also every N steps\n"
           "  --resume              continue the run saved at --checkpoint\n"
           "  --plot-loss FILE      the training loss curve (.png/.svg/.pdf)\n");
}

int train_options_parse(train_options *o, const char *cmd, int argc, char **argv, int *i)
{
    const char *opt = argv[*i], *v;
    if (!strcmp(opt, "--resume")) {
        o->resume = true;
        return 1;
    }
    const char **str = !strcmp(opt, "--checkpoint") ? &o->checkpoint : !strcmp(opt, "--plot-loss") ? &o->plot_loss : NULL;
    struct { const char *name; long *dst, min, max; } nums[] = {
        {"--epochs", &o->epochs, 1, 100000},       {"--batch-size", &o->batch_size, 1, 65536},
        {"--max-len", &o->max_len, 1, 100000},     {"--seed", &o->seed, 0, 2147483647L},
        {"--threads", &o->threads, 1, 1024},       {"--checkpoint-every", &o->checkpoint_every, 1, 1L << 40},
    };
    int num = -1;
    for (int k = 0; k < (int)(sizeof nums / sizeof nums[0]); k++)
        if (!strcmp(opt, nums[k].name)) num = k;
    if (!str && num < 0 && strcmp(opt, "--lr")) return 0;
    if (!(v = cli_value(cmd, argc, argv, i))) return -1;
    if (str) *str = v;
    else if (num >= 0) {
        if (!cli_parse_long(cmd, opt, v, nums[num].min, nums[num].max, nums[num].dst)) return -1;
    } else if (!cli_parse_float(cmd, opt, v, 1e-12, 10.0, &o->lr)) return -1;
    return 1;
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start(progress *p, const char *cmd, int64_t total_steps, int64_t done_steps)
{
    *p = (progress){.cmd = cmd, .tty = isatty(STDERR_FILENO), .start = now_seconds(),
                    .total_steps = total_steps, .done_steps = done_steps};
    p->last_print = p->start;
}

static void format_eta(char *buf, size_t n, double seconds)
{
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
}

void progress_step(progress *p, long epoch, int64_t batch, int64_t batches, double loss,
                   double tokens)
{
    p->done_steps++;
    p->tokens += tokens;
    double t = now_seconds(), elapsed = t - p->start;
    bool last = batch + 1 == batches;
    if (!last && t - p->last_print < (p->tty ? 0.25 : 30.0)) return;
    p->last_print = t;
    char eta[32];
    format_eta(eta, sizeof eta, elapsed / (double)p->done_steps * (double)(p->total_steps - p->done_steps));
    fprintf(stderr, "%sattn %s: epoch %ld, step %" PRId64 "/%" PRId64 ", loss %.4f, %.0f tokens/s, ETA %s%s",
            p->tty ? "\r\033[K" : "", p->cmd, epoch + 1, batch + 1, batches, loss,
            elapsed > 0 ? p->tokens / elapsed : 0.0, eta, p->tty ? "" : "\n");
    fflush(stderr);
}

void progress_end(progress *p)
{
    if (p->tty) fputc('\n', stderr);
}

attn_status run_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt,
                                const run_position *pos, const char *const *kv, int n_kv)
{
    enum { RUN_KEYS = 5, MAX_KV = 64 };
    if (n_kv + RUN_KEYS > MAX_KV) return ATTN_ERR_ARG;
    char vals[RUN_KEYS][32];
    snprintf(vals[0], 32, "%ld", pos->epoch);
    snprintf(vals[1], 32, "%" PRId64, pos->batch);
    snprintf(vals[2], 32, "%" PRIu64, pos->rng.state);
    snprintf(vals[3], 32, "%" PRIu64, pos->rng.inc);
    snprintf(vals[4], 32, "%d", pos->rng.has_spare);
    const char *all[2 * MAX_KV] = {"run.epoch", vals[0], "run.batch", vals[1], "run.rng_state", vals[2],
                                   "run.rng_inc", vals[3], "run.rng_has_spare", vals[4]};
    char spare[32];
    snprintf(spare, sizeof spare, "%a", (double)pos->rng.spare);
    all[2 * RUN_KEYS] = "run.rng_spare";
    all[2 * RUN_KEYS + 1] = spare;
    memcpy(all + 2 * (RUN_KEYS + 1), kv, (size_t)(2 * n_kv) * sizeof *kv);
    return attn_checkpoint_save(path, p, opt, all, RUN_KEYS + 1 + n_kv);
}

bool checkpoint_meta_long(const attn_st_file *f, const char *key, long *out)
{
    const char *v = attn_st_metadata(f, key);
    char *end;
    if (!v) return false;
    long x = strtol(v, &end, 10);
    if (end == v || *end) return false;
    *out = x;
    return true;
}

attn_status run_checkpoint_load(const char *path, attn_params *p, attn_optim *opt, run_position *pos)
{
    if (attn_checkpoint_load(path, p, opt, true) != ATTN_OK) return attn_last_status();
    attn_st_file *f = attn_st_open(path);
    if (!f) return attn_last_status();
    long epoch, has_spare;
    const char *batch = attn_st_metadata(f, "run.batch"), *state = attn_st_metadata(f, "run.rng_state");
    const char *inc = attn_st_metadata(f, "run.rng_inc"), *spare = attn_st_metadata(f, "run.rng_spare");
    attn_status st = ATTN_OK;
    if (!checkpoint_meta_long(f, "run.epoch", &epoch) || !batch || !state || !inc || !spare ||
        !checkpoint_meta_long(f, "run.rng_has_spare", &has_spare)) {
        fprintf(stderr, "attn: %s has no run position (run.epoch, run.batch, run.rng_*); it was not "
                        "written by a training command\n", path);
        st = ATTN_ERR_FORMAT;
    } else {
        pos->epoch = epoch;
        pos->batch = strtoll(batch, NULL, 10);
        pos->rng.state = strtoull(state, NULL, 10);
        pos->rng.inc = strtoull(inc, NULL, 10);
        pos->rng.has_spare = (int)has_spare;
        pos->rng.spare = (float)strtod(spare, NULL);
    }
    attn_st_close(f);
    return st;
}
