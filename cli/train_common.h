/* What the training subcommands share: the common options, a progress line (a live line on a
 * terminal, plain log lines otherwise), checkpoints that carry the run's position (epoch,
 * batch, RNG state of every rank) so a resumed run continues with the same losses, and the
 * shard of each batch that one rank of a data-parallel run trains on (dist.h). */
#ifndef ATTN_CLI_TRAIN_COMMON_H
#define ATTN_CLI_TRAIN_COMMON_H

#include "cli.h"

/* The options every training command shares (rows: CLI_TRAIN_OPTIONS in options.h). */
typedef struct train_options {
    long epochs, batch_size, max_len, seed, threads, checkpoint_every;
    long max_steps; /* 0: no limit */
    int matmul_precision; /* an attn_precision */
    double lr;
    const char *checkpoint, *plot_loss;
    bool resume, log_steps;
} train_options;


/* Shown on rank 0 only. */
typedef struct progress {
    const char *cmd;
    bool show, tty, log_steps;
    double start, last_print;
    int64_t total_steps, done_steps;
    double tokens;
} progress;

/* log_steps: also one stdout line per step with its loss in full precision (--log-steps). */
void progress_start(progress *p, const char *cmd, int64_t total_steps, int64_t done_steps,
                    bool log_steps);
/* After one training step of `tokens` tokens (over all ranks). */
void progress_step(progress *p, long epoch, int64_t batch, int64_t batches, double loss,
                   double tokens);
void progress_end(progress *p);
double now_seconds(void);

/* Where a run is: batches [0, batch) of epoch `epoch` (from 0) are done, each of global_batch
 * examples (--batch-size x ranks); rng is this rank's ctx RNG state (dropout). */
typedef struct run_position {
    long epoch;
    int64_t batch, global_batch;
    int64_t per_epoch; /* batches in an epoch: a resumed position must lie inside one */
    attn_rng rng;
} run_position;

/* Every rank, at the start of training: resume (when not NULL) is the checkpoint rank 0 loads
 * into p, opt and pos (its global batch must be pos->global_batch); then every rank takes rank
 * 0's parameters, optimizer state and position, and its own RNG state from the checkpoint (kept
 * as given in pos->rng when the checkpoint has none for this rank). CLI_OK, or an exit status
 * with the message printed. */
int run_start(const char *cmd, const char *resume, attn_params *p, attn_optim *opt,
              run_position *pos);
/* Every rank: rank 0 writes the checkpoint with the run position, every rank's RNG state and
 * the caller's key/values (model config) as metadata; the other ranks return ATTN_OK. */
attn_status run_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt,
                                const run_position *pos, const char *const *kv, int n_kv);
/* After the first checkpoint at path is written: the vocabularies vocabs[i] at paths[i] (NULL: out
 * of memory) beside it; if one cannot be written, the checkpoint and those already written are
 * removed, as a checkpoint without its vocabularies cannot be used. */
attn_status save_vocabs_beside(const char *path, const attn_vocab *const *vocabs, char *const *paths, int n);
/* Where a stopped run's last good checkpoint is, for its message: the --checkpoint file when it
 * exists, else a note that none was written. */
const char *train_last_good(const train_options *t);
/* A metadata value of a checkpoint as an integer. */
bool checkpoint_meta_long(const attn_st_file *f, const char *key, long *out);

/* A model's config as checkpoint metadata, one row per field: written by config_kv, read back by
 * config_read with every value range-checked before anything is built from it. */
typedef enum config_type { CONFIG_I64, CONFIG_INT, CONFIG_BOOL } config_type; /* CONFIG_INT: ints, enums */
typedef struct config_field {
    const char *key;
    config_type type;
    size_t offset; /* in the config struct */
    long min, max;
} config_field;

enum { CONFIG_MAX_FIELDS = 16 };
/* The value of one field of cfg. */
long config_value(const config_field *field, const void *cfg);
/* "model" = model_name, then every field of cfg, as key/value pairs in static storage (*n pairs). */
const char *const *config_kv(const char *model_name, const config_field *fields, int n_fields, const void *cfg,
                             int *n);
/* Reads cfg from the metadata of the checkpoint at path: model must be model_name (else "PATH is not
 * a WHAT checkpoint") and every field present, an integer and in range; otherwise CLI_ERR_DATA
 * with a message naming the key. hint follows a message about the file itself. */
int config_read(const char *cmd, const char *path, const char *hint, const char *model_name, const char *what,
                const config_field *fields, int n_fields, void *cfg);

/* Resume: the model these options build (cfg) must be the one saved at path, read by config_read
 * into saved (a copy of cfg); a field no parameter's shape shows (num_heads, max_len) would
 * otherwise change unnoticed. CLI_ERR_USAGE naming the first field that differs; max_len_note (may
 * be NULL) follows a max_len value. */
int config_check_resumed(const char *cmd, const char *path, const char *model_name, const char *what,
                         const config_field *fields, int n_fields, const void *cfg, void *saved,
                         const char *max_len_note);

/* The seed of this rank's dropout stream: seed + 17 on rank 0 (as a one-process run), another
 * stream on every other rank. */
uint64_t rank_dropout_seed(long seed);

/* This rank's rows of global batch b (split in shards of per_rank rows, rank r taking rows
 * [r * per_rank, (r + 1) * per_rank)): returns them and their count in *n (0 when a short last
 * batch leaves none for this rank). */
const int64_t *batch_shard(const attn_batches *batches, int64_t b, int64_t per_rank, int64_t *n);

#endif
