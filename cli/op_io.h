/* attn op: the mechanisms it runs and the file plumbing they share (inputs by name, masks,
 * parameters under state_dict names with seed 002's MHA naming as an alias, outputs). */
#ifndef ATTN_CLI_OP_IO_H
#define ATTN_CLI_OP_IO_H

#include "features.h"
#include "options.h"

typedef struct op_args {
    const char *name, *in_path, *out_path;
    bool causal, need_weights, per_head_weights, batch_first, shen;
    bool enable_gqa;       /* sdpa: k, v with fewer heads */
    cli_features features; /* sdpa, mha: --window, --alibi, --softcap */
    float scale;           /* 0: 1/sqrt(D) */
    long num_heads, threads;
    int matmul_precision; /* an attn_precision */
    int impl;             /* an attn_sdpa_impl */
    float rope_base;      /* sdpa, mha: rotary positions on q and k (> 1); 0: none */
    int rope_layout;      /* an index of --rope-layout's names: halves, interleaved */
    long rope_dim;        /* the dims rotated (even); 0: all of a head */
} op_args;

/* --rope-base, --rope-layout and --rope-dim as attn_rope takes them (positions 0, 1, ... of each
 * sequence along position_dim); false when --rope-base is not given */
bool op_rope(const op_args *a, int position_dim, attn_rope_opts *out);

/* The masks a mechanism takes from the input file, and whose conventions a bool attn_mask
 * follows: F.scaled_dot_product_attention (true = may attend) or nn.MultiheadAttention (true =
 * not allowed). A mask tensor a mechanism does not take is refused, never ignored. */
enum {
    OP_ATTN_MASK = 1 << 0,   /* attn_mask: BOOL or a float dtype (added to the scores) */
    OP_KEY_PADDING = 1 << 1, /* key_padding_mask: BOOL (B, Lk), true = padding */
    OP_VALID_LENS = 1 << 2,  /* valid_lens: an integer dtype, (B) or (B, Lq) */
    OP_CAUSAL = 1 << 3,      /* --causal */
};
typedef enum op_mask_api {
    OP_SDPA_POLARITY,
    OP_MHA_POLARITY
} op_mask_api;

typedef struct op_mechanism op_mechanism;

typedef struct op_run {
    const op_args *args;
    const op_mechanism *mech;
    attn_st_file *file;
    attn_ctx *ctx;
    attn_params *params;
    attn_st_writer *writer;
    attn_rng rng;          /* the layers' initialisation (seed 0) before the file's parameters replace it */
    attn_mask mask;        /* from attn_mask, key_padding_mask, valid_lens, --causal */
    void *mask_storage[4]; /* malloc'd arrays behind mask: attn_mask, key_padding, additive, lengths */
    attn_tensor *inputs[3];
    const char *input_grad_names[3]; /* "dq"... written when grad_out is given */
    int n_inputs;
} op_run;

struct op_mechanism {
    const char *name;
    /* Builds the module in run->params, loads its inputs, returns out (weights via *weights). */
    attn_tensor *(*forward)(op_run *run, attn_tensor **weights);
    unsigned masks;       /* OP_* it takes */
    op_mask_api mask_api; /* the PyTorch API whose mask conventions it follows */
};

const op_mechanism *op_find(const char *name);
/* Reads the masks, runs the mechanism, the backward when grad_out is present, and fills
 * run->writer. Returns a CLI exit code (the message already printed). */
int op_execute(op_run *run, const op_mechanism *mech);
void op_run_free(op_run *run);
/* Reads the masks mech takes (all optional) into run->mask; a mask it does not take, a dtype its
 * PyTorch API refuses or a shape that cannot apply is an error naming the tensor. */
attn_status op_load_masks(op_run *run, const op_mechanism *mech);
/* Whether the input file packs sequences (cu_seqlens_q or cu_seqlens_k in it): sdpa then runs
 * op_sdpa_varlen (op_varlen.c), attn_sdpa_varlen with the options of o; a mask or weights there
 * are refused, as are offsets of another dtype or count. NULL with the message printed. */
bool op_varlen_in(const op_run *run);
attn_tensor *op_sdpa_varlen(op_run *run, attn_tensor *q, attn_tensor *k, attn_tensor *v, const attn_sdpa_opts *o,
                            attn_tensor **weights);
/* false (with a message naming the tensor and the index) when t holds NaN or Inf. */
bool op_check_finite(const attn_tensor *t, const char *name);
/* F32, F64, F16 or BF16: what PyTorch lets take gradients (and be added to scores). */
bool op_float_dtype(attn_dtype t);

#endif
