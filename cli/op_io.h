/* attn op: the mechanisms it runs and the file plumbing they share (inputs by name, masks,
 * parameters under state_dict names with seed 002's MHA naming as an alias, outputs). */
#ifndef ATTN_CLI_OP_IO_H
#define ATTN_CLI_OP_IO_H

#include "cli.h"

typedef struct op_args {
    const char *name, *in_path, *out_path;
    bool causal, need_weights, average_weights, batch_first, shen;
    float scale;
    long num_heads;
    attn_sdpa_impl impl;
} op_args;

typedef struct op_run {
    const op_args *args;
    attn_st_file *file;
    attn_ctx *ctx;
    attn_params *params;
    attn_st_writer *writer;
    attn_mask mask;       /* from attn_mask, key_padding_mask, valid_lens, --causal */
    void *mask_storage[3];/* malloc'd copies behind mask */
    attn_tensor *inputs[3];
    const char *input_grad_names[3]; /* "dq"... written when grad_out is given */
    int n_inputs;
} op_run;

typedef struct op_mechanism {
    const char *name;
    /* Builds the module in run->params, loads its inputs, returns out (weights via *weights). */
    attn_tensor *(*forward)(op_run *run, attn_tensor **weights);
} op_mechanism;

const op_mechanism *op_find(const char *name);
/* Runs the mechanism, the backward when grad_out is present, and fills run->writer. Returns a
 * CLI exit code (the message already printed). */
int op_execute(op_run *run, const op_mechanism *mech);
void op_run_free(op_run *run);
/* false (with a message naming the tensor and the index) when t holds NaN or Inf. */
bool op_check_finite(const attn_tensor *t, const char *name);

#endif
