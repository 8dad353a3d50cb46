/* The one training loop of the program: start or resume, the epochs and their batches, the
 * stop rules (--epochs, --max-steps, a time budget), the NaN stop, the checkpoint cadence, the
 * loss curve and the data-parallel sums. A model supplies what is its own as a train_model:
 * its batches, the forward and backward of one rank's rows, its epoch line and what follows an
 * epoch (validation), and the metadata its checkpoints carry. */
#ifndef ATTN_CLI_TRAIN_LOOP_H
#define ATTN_CLI_TRAIN_LOOP_H

#include "train_common.h"

/* What a step sums over the ranks: the loss times its weight (the examples or target tokens it
 * is a mean over), that weight, the tokens seen (source and target), and one count of the
 * model's own (the classifier's correct answers). The gradients are averaged by weight. */
enum {
    TRAIN_SUM_LOSS,
    TRAIN_SUM_WEIGHT,
    TRAIN_SUM_TOKENS,
    TRAIN_SUM_OWN,
    TRAIN_N_SUMS
};

/* One epoch as its line reports it. */
typedef struct train_epoch {
    long epoch; /* from 0 */
    int64_t steps;
    double sums[TRAIN_N_SUMS]; /* over its steps and all ranks */
    double step_loss_sum;      /* the steps' mean losses, summed */
    double seconds;
    const attn_optim *opt; /* its learning rate */
} train_epoch;

typedef struct train_model {
    const char *cmd;     /* in messages: "classify" */
    const char *example; /* "examples", "pairs": the data-parallel line */
    const train_options *train;
    attn_params *params;
    attn_st_file **resume; /* --resume: the checkpoint (rank 0), closed once read */
    int64_t examples;      /* in the training split */
    attn_optim_config optim;
    attn_lr_schedule schedule; /* the learning rate of each step */
    float clip_norm;           /* > 0: the gradients' global norm clipped to it before each update */
    double budget_seconds;     /* 0: no time budget */
    const char *plot_title, *plot_ylabel;
    void *self; /* the model's run, passed to each hook */

    /* The global batches of an epoch, each of global_batch examples, drawn with rng: its state
     * depends only on (--seed, epoch), so a resumed run and every rank draw the same. */
    attn_status (*batches)(void *self, attn_rng *rng, int64_t global_batch, attn_batches *out);
    /* This rank's forward and backward of its n > 0 rows of the training split; sums[] its part of
     * TRAIN_SUM_*. false with the message in attn_last_error(). */
    bool (*forward_backward)(void *self, attn_ctx *ctx, const int64_t *rows, int64_t n, double sums[TRAIN_N_SUMS]);
    /* The rest of an epoch's line after "epoch N: ", without its newline. */
    void (*epoch_line)(void *self, const train_epoch *e);
    /* After an epoch's line (validation): CLI_OK or an exit status. May be NULL. */
    int (*epoch_end)(void *self);
    /* The model's part of a checkpoint: its config as key/values and the extra metadata. */
    const char *const *(*checkpoint_meta)(void *self, int *n_kv, checkpoint_extra *x);
    /* After the checkpoint of a whole epoch (`epochs_done` of them) was written. May be NULL. */
    attn_status (*epoch_saved)(void *self, long epochs_done);
    /* After the last step, before the loss curve is drawn (the test accuracy). May be NULL. */
    int (*finish)(void *self);
} train_model;

/* An epoch_line for the models trained on tokens: "N steps, train loss L, lr R, T tokens/s" */
void train_epoch_line_tokens(void *self, const train_epoch *e);

/* Trains m from its start or its checkpoint to the end of --epochs, --max-steps or the time
 * budget, whichever comes first. CLI_OK or an exit status with the message printed. Every rank
 * calls it. */
int train_run(const train_model *m);

#endif
