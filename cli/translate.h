/* attn translate: sequence-to-sequence translation with attention (Multi30k en->fr by default):
 * the pieces shared by the command (cmd_translate.c), its training loop (translate_train.c), its
 * scoring (translate_eval.c) and its checkpoints (translate_checkpoint.c, translate_model.c). */
#ifndef ATTN_CLI_TRANSLATE_H
#define ATTN_CLI_TRANSLATE_H

#include "options.h"
#include "train_common.h"

typedef struct translate_options {
    train_options train;
    const char *data, *src_lang, *tgt_lang, *out, *split, *average;
    attn_seq2seq_config model;
    long warmup, beam, budget_min, min_freq, eval_limit, keep_epochs;
    long rope_base; /* --rope-base: the Transformer's rotary positions (0: sinusoidal) */
    double label_smoothing, length_penalty;
    bool average_heads;
    bool average_kept; /* --average-kept: train's closing BLEU of the mean of the kept epochs */
    bool no_pack;      /* --no-pack: the Transformer's training batches padded, not packed */
    int recipe;        /* --recipe: an index of its names (cmd_translate.c) */
    int model_kind;    /* --model: an attn_seq2seq_kind */
    int layers;        /* --layers: encoder and decoder each */
} translate_options;

/* Pairs encoded with the vocabularies (no specials added yet). */
typedef struct translate_split {
    attn_id_seqs src, tgt;
    attn_text_pairs text; /* the raw sentences (references for BLEU) */
} translate_split;

typedef struct translate_run {
    const translate_options *opt;
    attn_vocab *src_vocab, *tgt_vocab;
    attn_params *params;
    attn_seq2seq model;
    bool model_ready;
    char *vocab_text[2];  /* train: the source and target vocabularies as the checkpoint carries them */
    checkpoint_lock lock; /* train: held on the checkpoint for the run */
    attn_st_file *resume; /* train --resume: the checkpoint, read once (rank 0) */
    long last_kept_epoch; /* train --keep-epochs: the last epoch this process saved as CHECKPOINT.epochN */
} translate_run;

int translate_train(translate_run *run, const translate_split *train, const translate_split *val);
/* Decodes a split (greedy when --beam is 1, else beam search, batches of 100 sentences) and prints corpus BLEU (sacrebleu 13a on detokenised text, lowercased,
 * and on tokens); hyps (may be NULL) receives the detokenised outputs. Rank 0 only (dist.h). */
int translate_evaluate(translate_run *run, const translate_split *split, const char *name);
/* Mean label-smoothed loss per target token with teacher forcing (no dropout). Every rank
 * scores its share of the batches; every rank must call it. */
int translate_val_loss(translate_run *run, const translate_split *split, double *loss);
/* Batch buffers for rows of a split: src + <eos>, <bos> + tgt, tgt + <eos>, padded, and for a loss
 * on packed pairs (translate_packs) packed end to end too (the same sequences: each row's first
 * src_lens / tgt_lens ids; NULL otherwise). */
typedef struct translate_batch {
    int64_t *src, *src_lens, *tgt_in, *tgt_out, *tgt_lens; /* (B, S), (B), (B, T), (B, T), (B) */
    int64_t n, src_width, tgt_width, tokens;
    int64_t *cu_src, *cu_tgt;                             /* (B + 1) offsets of the packed sequences */
    int64_t *src_packed, *tgt_in_packed, *tgt_out_packed; /* (total_s), (total_t), (total_t) */
} translate_batch;
attn_status translate_batch_fill(translate_batch *b, const translate_run *run, const translate_split *split,
                                 const int64_t *rows, int64_t n, bool for_loss);
/* Whether the run's loss takes packed pairs: the Transformer, unless --no-pack */
bool translate_packs(const translate_run *run);
void translate_batch_free(translate_batch *b);
/* The target tokens of ids[0..n) (specials dropped) as a detokenised, malloc'd string. */
char *translate_detok(const translate_run *run, const int64_t *ids, int64_t n, attn_tokens *scratch);
/* Forward + label-smoothed cross-entropy of a batch (scalar tensor in ctx), on the packed
 * sequences unless --no-pack or the Bahdanau model. */
attn_tensor *translate_loss(attn_ctx *ctx, const translate_run *run, const translate_batch *b);
/* The model config's fields and names in checkpoints (config_kv, config_read, config_check_resumed) */
extern const config_schema translate_schema;
/* The config of a saved model (checkpoint f at path), range-checked and consistent before
 * anything is built from it: CLI_OK, or CLI_ERR_DATA with the message printed */
int translate_read_config(const attn_st_file *f, const char *path, attn_seq2seq_config *c);
/* Every field a checkpoint stores equal in a and b */
bool translate_same_config(const attn_seq2seq_config *a, const attn_seq2seq_config *b);
/* The specials every vocabulary puts first: <unk> <pad> <bos> <eos> */
extern const char *const translate_specials[4];
/* The metadata keys of the source and target vocabularies in a checkpoint */
extern const char *const translate_vocab_keys[2];
/* The model of o on the run's vocabularies (o->model takes their sizes and special ids); from: the
 * checkpoint that sizes it, NULL for a new one */
int translate_build_model(translate_run *run, translate_options *o, const attn_st_file *from);
/* --beam against the target vocabulary, before any work: exit 2 past its size */
int translate_check_beam(const translate_options *o, const translate_run *run);
/* eval/translate: the saved model and vocabularies of --checkpoint (then --average's mean) */
int translate_load_model(translate_run *run, translate_options *o);
/* train --average-kept: the parameters become the mean of the epoch files this run kept. Rank 0 */
int translate_average_kept(translate_run *run, const translate_options *o);
/* train --resume: the checkpoint read once on rank 0, checked against these options; the
 * vocabularies it carries go to every rank */
int translate_open_resumed(translate_run *run, translate_options *o);
/* "<checkpoint>.<side>.vocab" (side "src" or "tgt"), malloc'd, beside a symlinked checkpoint's target:
 * where checkpoints written before the vocabularies went inside them have them. */
char *translate_vocab_path(const char *checkpoint, const char *side);
/* The options of a training run that decide its losses, as kept in its checkpoints (*n of them). */
const run_option *translate_run_options(const translate_options *o, int *n);

#endif
