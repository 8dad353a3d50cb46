/* attn tour: every code listing of the three tutorials in ../shared/seeds/, one step each, run
 * with deterministic weights and inputs, printing what the listing prints and drawing what it
 * draws. The step table is in cmd_tour.c; the steps in tour_seed000.c, tour_seed002*.c and
 * tour_seed003*.c; what they share is here.
 *
 * Weights: every Linear / Conv1d weight and bias of a step is drawn U(-b, b), b = 1/sqrt(fan_in)
 * (PyTorch's default init distribution) as (2u - 1) b from a PCG32 stream (attn_rng) seeded with
 * TOUR_SEED at the start of the step, in the order of the seed module's named_parameters().
 * LayerNorm weights are 1 and biases 0, as in PyTorch. tests/golden/make_golden_tour.py draws the
 * same numbers in Python, feeds them to the tutorial's own PyTorch code and saves the results;
 * tests/test_tour.c holds `attn tour --save` against them. */
#ifndef ATTN_CLI_TOUR_H
#define ATTN_CLI_TOUR_H

#include "options.h"

#define TOUR_SEED 0

typedef struct tour_run {
    const char *step;        /* the running step's id, for messages */
    const char *out_dir;     /* figures go here */
    const char *data_dir;    /* aclImdb root (seed 002 section 6) */
    bool data_given;         /* --data was on the command line */
    attn_ctx *ctx;           /* reset before every step; grad off unless a step turns it on */
    attn_rng rng;            /* seeded with TOUR_SEED before every step */
    attn_st_writer *saved;   /* the step's tensors when --save is given, else NULL */
    attn_status save_status; /* the first failure while collecting them */
    bool zh;                 /* --lang zh-CN (or a zh locale): the notes in Chinese */
} tour_run;

/* The text of a note in the run's language: TOUR_TR(t, "English", "中文"). */
#define TOUR_TR(t, en, zh_text) ((t)->zh ? (zh_text) : (en))
/* printf of a note in the run's language; both formats are literals, so both are checked. */
#define TOUR_PRINTF(t, en_fmt, zh_fmt, ...) ((t)->zh ? printf(zh_fmt, __VA_ARGS__) : printf(en_fmt, __VA_ARGS__))
/* A note without arguments. */
#define TOUR_SAY(t, en, zh_text) fputs(TOUR_TR(t, en, zh_text), stdout)

typedef struct tour_step {
    const char *id;          /* "002/3.2": seed / section, or seed / topic for seed 003 */
    const char *title;       /* the section's title as the tutorial names it, and in English */
    const char *title_zh;    /* the same, all in Chinese (--lang zh-CN) */
    int (*run)(tour_run *t); /* CLI_OK, or a CLI error code after printing the message */
} tour_step;

/* ---- the steps (one function each) ---- */

int tour_000_demo(tour_run *t);
int tour_002_qkv(tour_run *t);
int tour_002_sdpa(tour_run *t);
int tour_002_heatmap(tour_run *t);
int tour_002_mha(tour_run *t);
int tour_002_heads(tour_run *t);
int tour_002_modes(tour_run *t);
int tour_002_block(tour_run *t);
int tour_002_conv(tour_run *t);
int tour_002_efficient(tour_run *t);
int tour_002_data(tour_run *t);
int tour_002_model(tour_run *t);
int tour_002_train(tour_run *t);
int tour_003_nw_data(tour_run *t);
int tour_003_nw_fixed(tour_run *t);
int tour_003_nw_train(tour_run *t);
int tour_003_masked_softmax(tour_run *t);
int tour_003_additive(tour_run *t);
int tour_003_dot(tour_run *t);
int tour_003_sqrt_d(tour_run *t);
int tour_003_bahdanau(tour_run *t);
int tour_003_multihead(tour_run *t);
int tour_003_positional(tour_run *t);
int tour_003_transformer(tour_run *t);

/* ---- shared helpers (tour_common.c) ---- */

/* dst[i] = (2u - 1) / sqrt(fan_in), u = attn_rng_uniform(rng): n draws. */
void tour_uniform(float *dst, int64_t n, int64_t fan_in, attn_rng *rng);
/* A Linear's weight, then its bias (when it has one), with fan_in = in_features. */
void tour_init_linear(attn_linear_layer *l, attn_rng *rng);
/* Seed 002's MultiHeadAttention order: Wq (weight, bias), Wk, Wv, fc_out, drawn into the rows of
 * in_proj_weight / in_proj_bias and into out_proj. Without biases (D2L's bias=False), weights
 * only and the biases set to 0. */
void tour_init_mha(attn_mha_layer *m, bool bias, attn_rng *rng);
/* The same layer's parameters under seed 002's names (<prefix>Wq.weight, ...) for --save. */
void tour_keep_mha(tour_run *t, const char *prefix, const attn_mha_layer *m);

/* The error of a failed library call, "attn tour <step>: <message>"; returns CLI_ERR_DATA. */
int tour_fail(const tour_run *t);
/* "label: (1, 4, 8)". */
void tour_print_shape(const char *label, const attn_tensor *x);
/* A (rows, cols) matrix, one row a line, %.4f; row_labels / col_labels may be NULL. */
void tour_print_matrix(const float *m, int64_t rows, int64_t cols, const char *const *row_labels,
                       const char *const *col_labels);
/* Adds a tensor (or raw floats of a shape) to the step's --save file; no-op without --save. */
void tour_keep(tour_run *t, const char *name, const attn_tensor *x);
void tour_keep_raw(tour_run *t, const char *name, const float *data, int ndim, const int64_t *shape);
/* path = out_dir/name (false with a message when too long). */
bool tour_figure_path(const tour_run *t, const char *name, char *path, size_t len);
/* After a plot call: "wrote <name>" or the error. */
int tour_wrote(const tour_run *t, attn_status st, const char *name);
/* A heatmap of one matrix into out_dir/name. */
int tour_heatmap(const tour_run *t, const char *name, const float *m, int64_t rows, int64_t cols,
                 const attn_heatmap_opts *opts);
/* Lines into out_dir/name. */
int tour_lines(const tour_run *t, const char *name, const attn_series *s, int n, const attn_lineplot_opts *opts);

/* D2L's valid_lens: the one place the tour passes lengths to the library. */
attn_tensor *tour_masked_softmax(attn_ctx *ctx, attn_tensor *scores, const int64_t *valid_lens, int ndim);
attn_tensor *tour_additive_forward(attn_ctx *ctx, const attn_additive_layer *m, attn_tensor *q, attn_tensor *k,
                                   attn_tensor *v, const int64_t *valid_lens, attn_tensor **weights);
/* valid_lens (B) as an additive mask (B, 1, 1, Lk): 0 for keys j < len, -inf after. */
void tour_lens_mask(float *mask, const int64_t *valid_lens, int64_t batch, int64_t lk);

#endif
