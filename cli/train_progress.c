/* The training subcommands' progress line and clock (train_common.h). */
#include "train_common.h"
#include "dist.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start(progress *p, const char *cmd, int64_t total_steps, int64_t done_steps, double deadline,
                    bool log_steps)
{
    const bool show = dist_rank() == 0;
    *p = (progress){.cmd = cmd,
                    .show = show,
                    .tty = show && isatty(STDERR_FILENO),
                    .log_steps = show && log_steps,
                    .start = now_seconds(),
                    .deadline = deadline,
                    .total_steps = total_steps,
                    .done_steps = done_steps,
                    .first_step = done_steps};
    p->last_print = p->start;
}

static void format_eta(char *buf, size_t n, double seconds)
{
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, n, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", s / 60, s % 60);
}

void progress_step(progress *p, long epoch, int64_t batch, int64_t batches, double loss, double tokens)
{
    p->done_steps++;
    p->tokens += tokens;
    if (p->log_steps) {
        printf("step %" PRId64 " (epoch %ld, batch %" PRId64 "/%" PRId64 "): loss %.9g\n", p->done_steps, epoch + 1,
               batch + 1, batches, loss);
        fflush(stdout);
    }
    double t = now_seconds(), elapsed = t - p->start;
    bool last = batch + 1 == batches;
    if (!p->show || (!last && t - p->last_print < (p->tty ? 0.25 : 30.0))) return;
    p->last_print = t;
    char eta[32];
    double left = elapsed / (double)(p->done_steps - p->first_step) * (double)(p->total_steps - p->done_steps);
    if (p->deadline > 0 && p->deadline - t < left) left = p->deadline - t > 0 ? p->deadline - t : 0;
    format_eta(eta, sizeof eta, left);
    fprintf(stderr, "%sattn %s: epoch %ld, step %" PRId64 "/%" PRId64 ", loss %.4f, %.0f tokens/s, ETA %s%s",
            p->tty ? "\r\033[K" : "", p->cmd, epoch + 1, batch + 1, batches, loss,
            elapsed > 0 ? p->tokens / elapsed : 0.0, eta, p->tty ? "" : "\n");
    p->line_open = p->tty;
    fflush(stderr);
}

void progress_end(progress *p)
{
    if (p->line_open) fputc('\n', stderr);
    p->line_open = false;
}
