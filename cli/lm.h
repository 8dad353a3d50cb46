/* attn lm: a decoder-only language model (attn_lm, GPT-2 or Llama style) with a byte-level BPE
 * tokenizer trained on the corpus: the pieces shared by the corpus (lm_corpus.c), the training
 * loop (lm_train.c), sampling and pictures (lm_generate.c) and the rest (cmd_lm.c). */
#ifndef ATTN_CLI_LM_H
#define ATTN_CLI_LM_H

#include "options.h"
#include "train_common.h"

/* export's --format: the llama2.c versions are the numbers its files carry */
typedef enum lm_format {
    LM_LLAMA2C_V0, /* llama2.c's checkpoint, version 0 (run.c's) and 1 */
    LM_LLAMA2C_V1,
    LM_LLMC, /* llm.c's GPT-2 checkpoint (version 3) */
    LM_HF    /* Hugging Face's GPT2LMHeadModel or LlamaForCausalLM folder */
} lm_format;

typedef struct lm_options {
    train_options train;
    const char *data, *text, *out, *export_tokens, *model_out, *tokenizer_out, *model_in, *tokenizer_in, *init_from,
        *hf_out, *hf_in;
    int style;  /* --style: an attn_lm_style */
    int format; /* --format: an lm_format */
    long vocab, d_model, layers, heads, kv_heads, ffn, rope_base, warmup, budget_min, val_tokens;
    long max_new_tokens, top_k, sample_seed;
    double dropout, weight_decay, clip, temperature, top_p;
    bool untied, greedy, truncate, ids;
} lm_options;

/* A corpus as one stream of token ids: each document is <|endoftext|> then its tokens (so a
 * sequence starts at each <|endoftext|>), documents end to end; bytes counts the text's bytes. */
typedef struct lm_stream {
    int32_t *ids; /* (n) */
    int64_t n, bytes, docs;
} lm_stream;

/* The model's tokenizer (lm_tokenizer.c): attn's byte-level BPE, learnt by train, or a llama2.c
 * tokenizer.bin, brought in by import; text is either as the checkpoint keeps it under
 * lm_tok_key (tokenizer.bpe: "attn-bpe 1\n" then "A B\n" per merge; tokenizer.llama2c:
 * "attn-llama2c 1\n" then the file's bytes in hexadecimal). */
typedef struct lm_tokenizer {
    attn_bpe *bpe;
    attn_llama2c_vocab *l2c;
    char *text;
} lm_tokenizer;
const char *lm_tok_key(const lm_tokenizer *t);
int64_t lm_tok_size(const lm_tokenizer *t);
/* The id each document starts after and generation stops at: <|endoftext|>, or llama2.c's BOS (1) */
int64_t lm_tok_start(const lm_tokenizer *t);
/* text's ids without the start (room for len + 1: llama2.c's dummy space); -1 on error */
int64_t lm_tok_encode(const lm_tokenizer *t, const char *text, size_t len, int64_t *ids);
/* Token id's bytes after token prev (the start: none); NULL for an id outside the vocabulary */
const char *lm_tok_bytes(const lm_tokenizer *t, int64_t prev, int64_t id, size_t *len);
/* The BPE learnt (or, learnt NULL, the one text holds; path names it in messages) */
int lm_tok_set_bpe(lm_tokenizer *t, const attn_bpe *learnt, const char *text, const char *path);
/* A llama2.c tokenizer.bin of vocab ids */
int lm_tok_set_llama2c(lm_tokenizer *t, const char *file, int64_t vocab);
/* The tokenizer checkpoint f carries, with exactly vocab ids */
int lm_tok_from_checkpoint(lm_tokenizer *t, const attn_st_file *f, const char *path, int64_t vocab);
/* As llama2.c's tokenizer.bin at path (NULL: none), and the order of the model's ids that goes with
 * it (lm_tok_size entries: attn_bpe_llama2c_order's, or the same ids); attn_last_error() on failure */
int lm_tok_save_llama2c(const lm_tokenizer *t, const char *path, int64_t *token_order);
void lm_tok_free(lm_tokenizer *t);

typedef struct lm_run {
    const lm_options *opt;
    lm_tokenizer tok;
    attn_params *params;
    attn_lm model;
    bool model_ready;
    checkpoint_lock lock; /* train: held on the checkpoint for the run */
    attn_st_file *resume; /* train --resume: the checkpoint, read once (rank 0) */
} lm_run;

/* ---- the corpus (lm_corpus.c) ---- */

/* The documents of `split` ("train" or "test"): from --data DIR, an aclImdb folder's reviews
 * (train: train/{neg,pos} and train/unsup when there; test: test/{neg,pos}); from any other
 * folder, every .txt file under it in name order, or from --text FILE, its paragraphs (blocks of
 * lines between empty lines): the first 95% train, the rest test. "<br />" becomes a newline.
 * Every text is malloc'd. */
typedef struct lm_docs {
    char **text;
    size_t *len;
    int64_t count;
    size_t bytes;
} lm_docs;
int lm_docs_load(lm_docs *out, const lm_options *o, const char *split);
void lm_docs_free(lm_docs *d);
/* The stream of docs under tokenizer t, the documents encoded on --threads threads */
int lm_stream_build(lm_stream *out, const lm_tokenizer *t, const lm_docs *docs);
void lm_stream_free(lm_stream *s);
/* llm.c's token files of the two streams in dir: train.bin and val.bin (a 256-int32 header: magic
 * 20240520, version 1, the count; then uint16 ids), token_bytes.bin (int32 per id: its byte count,
 * <|endoftext|> 0) and vocab_bytes.bin (every id's bytes back to back), so that another program
 * trains on the same tokens and reads its samples */
int lm_export_tokens(const char *dir, const lm_tokenizer *t, const lm_stream *train, const lm_stream *val);

/* ---- training and evaluation (lm_train.c) ---- */

int lm_train(lm_run *run, const lm_stream *train, const lm_stream *val);
/* Mean loss per token (nats) and bits per byte of the model over up to `limit` tokens of s
 * (0: all), in chunks of the context; every rank scores its share. */
int lm_score(lm_run *run, const lm_stream *s, int64_t limit, double *loss, double *bpb, int64_t *tokens);

/* ---- the model, its config in checkpoints (lm_model.c) ---- */

/* The options of a training run that decide its losses (*n of them) */
const run_option *lm_run_options(const lm_options *o, int *n);
/* The model config's fields and names in checkpoints (config_kv, config_read, config_check_resumed) */
extern const config_schema lm_schema;
/* The model of cfg in run (run->params, run->model); from: the checkpoint that sizes it
 * (params_for), NULL for a new one */
int lm_build_model(lm_run *run, const attn_lm_config *cfg, const attn_st_file *from, const char *path);
/* The model and tokenizer of checkpoint path, from one reading of it */
int lm_load_model(lm_run *run, const char *path);
/* CLI_OK when every field of c is within what an attn lm checkpoint keeps; else a message naming
 * path and the field */
int lm_config_fits(const attn_lm_config *c, const char *path);

/* ---- export and import (lm_exchange.c) ---- */

int lm_export(lm_run *run, const lm_options *o);
int lm_import(lm_run *run, const lm_options *o);

/* ---- generation and pictures (lm_generate.c) ---- */

int lm_generate(lm_run *run, const char *prompt, size_t len);
int lm_explain(lm_run *run, const char *prompt, size_t len);

#endif
