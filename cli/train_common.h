/* What the training subcommands share: the common options, a progress line (a live line on a
 * terminal, plain log lines otherwise; train_progress.c), checkpoints that carry the run's
 * position (epoch, batch, RNG state of every rank) so a resumed run continues with the same
 * losses (train_checkpoint.c), the model config as checkpoint metadata (train_config.c),
 * vocabularies in checkpoints and between ranks (train_vocab.c), the lock of a run on its
 * checkpoint (train_lock.c), and the shard of each batch that one rank of a data-parallel run
 * trains on (dist.h; train_common.c). */
#ifndef ATTN_CLI_TRAIN_COMMON_H
#define ATTN_CLI_TRAIN_COMMON_H

#include "cli.h"

/* The options every training command shares (rows: CLI_TRAIN_OPTIONS in options.h). */
typedef struct train_options {
    long epochs, batch_size, max_len, seed, threads, checkpoint_every;
    long max_steps;       /* 0: no limit */
    int matmul_precision; /* an attn_precision */
    double lr;
    const char *checkpoint, *plot_loss;
    bool resume, log_steps;
} train_options;

/* Shown on rank 0 only. */
typedef struct progress {
    const char *cmd;
    bool show, tty, log_steps;
    bool line_open; /* a live line is on the terminal, to be ended */
    double start, last_print;
    double deadline;                             /* now_seconds() when the time budget ends (0: none) */
    int64_t total_steps, done_steps, first_step; /* first_step: done when this process started */
    double tokens;
} progress;

/* log_steps: also one stdout line per step with its loss in full precision (--log-steps). The ETA
 * shown is that of the steps left at this process's pace, or of the deadline when it comes first. */
void progress_start(progress *p, const char *cmd, int64_t total_steps, int64_t done_steps, double deadline,
                    bool log_steps);
/* After one training step of `tokens` tokens (over all ranks). */
void progress_step(progress *p, long epoch, int64_t batch, int64_t batches, double loss, double tokens);
/* Ends the live line, if one is shown (again: nothing). */
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

/* Every rank, at the start of training: with resume, f (open on rank 0 only; path names it) is the
 * checkpoint rank 0 loads into p, opt and pos (its global batch must be pos->global_batch); then
 * every rank takes rank
 * 0's parameters, optimizer state and position, and its own RNG state from the checkpoint (kept
 * as given in pos->rng when the checkpoint has none for this rank). CLI_OK, or an exit status
 * with the message printed. */
int run_start(const char *cmd, bool resume, const attn_st_file *f, const char *path, attn_params *p, attn_optim *opt,
              run_position *pos);
/* A training option that decides the losses (--seed, --lr, --dropout, ...): kept in the checkpoint
 * as metadata "run.<name>" (run.seed) and held to on --resume. */
typedef struct run_option {
    const char *opt; /* "--seed" */
    double value;    /* as the run uses it */
} run_option;

/* What a training checkpoint carries beside the model config: the run's options and the
 * vocabularies as metadata (vocab_keys[i] = vocab_texts[i], attn_vocab_text's form), so that the
 * model and its vocabularies are one file, replaced at once. */
typedef struct checkpoint_extra {
    const run_option *options;
    int n_options;
    const char *const *vocab_keys, *const *vocab_texts;
    int n_vocabs;
} checkpoint_extra;

/* CLI_OK when a checkpoint of these arguments (at position pos) has a header a safetensors
 * reader takes (ATTN_ST_MAX_HEADER), with room for its numbers to grow; else the message names
 * path and the size. The same answer on every rank. */
int run_checkpoint_fits(const char *cmd, const char *path, const attn_params *p, const attn_optim *opt,
                        const run_position *pos, const char *const *kv, int n_kv, const checkpoint_extra *x);
/* Every rank: rank 0 writes the checkpoint with the run position, every rank's RNG state, the
 * thread count (run.threads), x (may be NULL) and the caller's key/values (model config) as
 * metadata; the other ranks return ATTN_OK. */
attn_status run_checkpoint_save(const char *path, const attn_params *p, const attn_optim *opt, const run_position *pos,
                                const char *const *kv, int n_kv, const checkpoint_extra *x);
/* --resume: CLI_ERR_USAGE naming every option of opts whose value differs from the one saved in f
 * (a checkpoint written before they were kept holds to nothing); a note when the thread count
 * differs (the losses may differ in their last bits). */
int run_options_check(const char *cmd, const attn_st_file *f, const char *path, const run_option *opts, int n);

/* Every rank: rank 0's text (NUL-terminated; NULL: none) as a malloc'd copy on every rank (NULL
 * where rank 0 had none, or when memory ran out on any rank). */
char *share_text(const char *text);
/* The vocabulary checkpoint f (path: its name in messages) carries as metadata `key`; one
 * written before the vocabularies went inside has none, and then the file `legacy` beside it
 * (may be NULL: none) is read, with a note. NULL with the message printed. */
attn_vocab *checkpoint_vocab(const char *cmd, const attn_st_file *f, const char *path, const char *key,
                             const char *legacy);
/* false, with the message printed, unless vocabulary v (which: "" or "source ", "target ") has
 * specials[0..n) at ids 0..n-1, as attn builds them: a vocabulary without <unk> would fail at the
 * first unknown word. */
bool vocab_has_specials(const char *cmd, const char *path, const char *which, const attn_vocab *v,
                        const char *const *specials, int n);

/* The advisory lock (flock) a training run holds on its checkpoint, in CHECKPOINT.lock beside
 * the file (through symlinks): a second run into the same checkpoint is refused while the first
 * runs. The lock file is created with O_EXCL and a marker line; a file of that name without the
 * marker is never used or removed. Released (and the file removed) at the end of the run; a
 * killed run leaves the file, which the next run takes over. Rank 0 only. */
typedef struct checkpoint_lock {
    int fd; /* -1: none held */
    char *path;
} checkpoint_lock;
int checkpoint_lock_take(const char *cmd, const char *checkpoint, checkpoint_lock *l);
void checkpoint_lock_release(checkpoint_lock *l);
/* Where a stopped run's last good checkpoint is, for its message: the --checkpoint file when it
 * exists, else a note that none was written. */
const char *train_last_good(const train_options *t);
/* A metadata value of a checkpoint as an integer. */
bool checkpoint_meta_long(const attn_st_file *f, const char *key, long *out);

/* A model's config as checkpoint metadata, one row per field: written by config_kv, read back by
 * config_read with every value range-checked before anything is built from it. */
typedef enum config_type {
    CONFIG_I64,
    CONFIG_INT, /* ints, enums */
    CONFIG_BOOL,
    CONFIG_F32, /* a float field that holds whole numbers (a rotary base) */
} config_type;
typedef struct config_field {
    const char *key;
    config_type type;
    size_t offset; /* in the config struct */
    long min, max;
    bool optional; /* may be absent (written before the field was): then `absent` */
    double absent;
} config_field;

enum {
    CONFIG_MAX_FIELDS = 16
};
/* A model's config in checkpoints: its fields and its names */
typedef struct config_schema {
    const char *cmd;            /* the command, in messages ("lm") */
    const char *model_name;     /* metadata model= ("attn-lm") */
    const char *what;           /* in messages ("language model") */
    const config_field *fields; /* (n_fields) */
    int n_fields;
    const char *max_len_note; /* follows a max_len value in config_check_resumed's message; NULL: none */
} config_schema;
/* The value of one field of cfg. */
double config_value(const config_field *field, const void *cfg);
/* "model" = s's model_name, then every field of cfg, as key/value pairs in static storage (*n pairs). */
const char *const *config_kv(const config_schema *s, const void *cfg, int *n);
/* The parameter registry of a model that f's metadata sizes: it holds no more elements than f's
 * tensors do (attn_params_set_max_numel), so an edited header cannot make it allocate more than
 * the file holds; f NULL: a new model, unbounded. NULL when out of memory. */
attn_params *params_for(const attn_st_file *f);
/* The message of a model's init that failed (CLI_ERR_DATA): with f, a model past params_for's
 * bound is named as metadata that does not fit the file at path. */
int model_build_failed(const char *cmd, const attn_st_file *f, const char *path);
/* The checkpoint at path, read once (every later read takes what this one holds); NULL with the
 * message printed, hint (may be NULL) after it. */
attn_st_file *checkpoint_open(const char *cmd, const char *path, const char *hint);
/* CLI_OK when f's metadata names s's model_name (a "what" checkpoint); else the message names what
 * it is instead. Before anything else is read from f. */
int checkpoint_model_check(const config_schema *s, const attn_st_file *f, const char *path);
/* Reads cfg from the metadata of checkpoint f (path: its name): model must be s's model_name (else
 * "PATH is not a WHAT checkpoint") and every field present (an optional one absent is its
 * `absent`), a number and in range; otherwise CLI_ERR_DATA with a message naming the key. */
int config_read(const config_schema *s, const attn_st_file *f, const char *path, void *cfg);

/* Resume: the model these options build (cfg) must be the one saved at path, read by config_read
 * into saved (a copy of cfg); a field no parameter's shape shows (num_heads, max_len) would
 * otherwise change unnoticed. CLI_ERR_USAGE naming the first field that differs. */
int config_check_resumed(const config_schema *s, const attn_st_file *f, const char *path, const void *cfg, void *saved);

/* The seed of this rank's dropout stream: seed + 17 on rank 0 (as a one-process run), another
 * stream on every other rank. */
uint64_t rank_dropout_seed(long seed);

/* This rank's rows of global batch b (split in shards of per_rank rows, rank r taking rows
 * [r * per_rank, (r + 1) * per_rank)): returns them and their count in *n (0 when a short last
 * batch leaves none for this rank). */
const int64_t *batch_shard(const attn_batches *batches, int64_t b, int64_t per_rank, int64_t *n);

#endif
