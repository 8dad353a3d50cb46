/* What the training subcommands share: the common options, a progress line (a live line on a
 * terminal, plain log lines otherwise), and checkpoints that carry the run's position (epoch,
 * batch, RNG state) so a resumed run continues with the same losses. */
#ifndef ATTN_CLI_TRAIN_COMMON_H
#define ATTN_CLI_TRAIN_COMMON_H

#include "cli.h"

typedef struct train_options {
    long epochs, batch_size, max_len, seed, threads, checkpoint_every;
    double lr;
    const char *checkpoint, *plot_loss;
    bool resume;
} train_options;

/* Consumes argv[*i] (and its value) when it is a common option: 1 consumed, 0 not common,
 * -1 bad value (message printed). */
int train_options_parse(train_options *o, const char *cmd, int argc, char **argv, int *i);
void train_options_help(void);

typedef struct progress {
    const char *cmd;
    bool tty;
    double start, last_print;
    int64_t total_steps, done_steps;
    double tokens;
} progress;

void progress_start(progress *p, const char *cmd, int64_t total_steps, int64_t done_steps);
/* After one training step of `tokens` tokens. */
void progress_step(progress *p, long epoch, int64_t batch, int64_t batches, double loss,
                   double tokens);
void progress_end(progress *p);
double now_seconds(void);

/* Where a run is: batches [0, batch) of epoch `epoch` (from 0) are done; the ctx RNG state. */
typedef struct run_position {
    long epoch;
    int64_t batch;
    attn_rng rng;
} run_position;

/* Checkpoint with the run position and the caller's key/values (model config) as metadata. */
attn_status run_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt,
                                const run_position *pos, const char *const *kv, int n_kv);
attn_status run_checkpoint_load(const char *path, attn_params *p, attn_optim *opt,
                                run_position *pos);
/* A metadata value of a checkpoint as an integer (for the model config before building it). */
bool checkpoint_meta_long(const attn_st_file *f, const char *key, long *out);

#endif
