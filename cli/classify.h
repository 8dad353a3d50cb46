/* attn classify: seed 002's self-attention IMDB classifier. The pieces shared by the training
 * loop (classify_train.c) and the rest of the subcommand (cmd_classify.c). */
#ifndef ATTN_CLI_CLASSIFY_H
#define ATTN_CLI_CLASSIFY_H

#include "options.h"
#include "train_common.h"

typedef struct classify_options {
    train_options train;
    const char *data, *out;
    attn_classifier_config model;
    int attention;           /* --attention: an attn_classifier_attention */
    bool seed_style_explain; /* explain from embeddings alone, as seed 002's visualize_attention */
    bool no_pack;            /* --no-pack: mask_padding batches padded, not packed (attn_classifier_config.pack) */
    bool validate;           /* --validate: train on the first 90% of each label's reviews, score the rest */
    int recipe;              /* --recipe: an index of cmd_classify.c's recipe_names (its options were put in argv) */
} classify_options;

/* A split encoded with the vocabulary: ids per review and its label. */
typedef struct classify_split {
    attn_id_seqs ids;
    int32_t *labels;
    int64_t count;
} classify_split;

/* The model and everything it needs, built for training or loaded from a checkpoint. */
typedef struct classify_run {
    const classify_options *opt;
    attn_vocab *vocab;
    attn_params *params;
    attn_classifier model;
    bool model_ready;
    char *vocab_text;     /* train: the vocabulary as the checkpoint carries it (metadata "vocab") */
    checkpoint_lock lock; /* train: held on the checkpoint for the run */
    attn_st_file *resume; /* train --resume: the checkpoint, read once (rank 0) */
} classify_run;

/* "<checkpoint>.vocab", malloc'd, beside a symlinked checkpoint's target (cli_checkpoint_sibling):
 * where checkpoints written before the vocabulary went inside them have it. */
char *classify_vocab_path(const char *checkpoint);
/* The options of a training run that decide its losses, as kept in its checkpoints (*n of them). */
const run_option *classify_run_options(const classify_options *o, int *n);

/* Trains (resuming when asked), saves checkpoints, prints the test accuracy at the end. */
int classify_train(classify_run *run, const classify_split *train, const classify_split *test);
/* Accuracy (%) and mean loss of the model on a split, in batches, without dropout. Every rank
 * scores its share of the batches; every rank must call it. */
int classify_evaluate(classify_run *run, const classify_split *split, double *accuracy, double *loss);
/* A padded (n, width) batch of rows of split with labels; widths per the model config. */
attn_status classify_batch(const classify_run *run, const classify_split *split, const int64_t *rows, int64_t n,
                           int64_t *ids, int64_t *lengths, int64_t *labels, int64_t *width);
/* The model config's fields and names in checkpoints (config_kv, config_read, config_check_resumed) */
extern const config_schema classify_schema;
/* o->model from a saved model's metadata, range-checked before anything is built from it (the
 * message printed): CLI_OK or CLI_ERR_DATA. */
int classify_load_config(classify_options *o, const attn_st_file *f);

#endif
