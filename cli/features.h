/* The attention features op and bench take alike (attn_score_features): one table of options,
 * one parser, one translation into the library's struct. */
#ifndef ATTN_CLI_FEATURES_H
#define ATTN_CLI_FEATURES_H

#include "options.h"

#include <float.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cli_features {
    const char *window;        /* "LEFT,RIGHT" (FlashAttention's window_size); NULL: none */
    bool alibi;                /* ALiBi with the paper's slopes */
    float softcap;             /* 0: none */
    attn_window window_parsed; /* window's bounds, by cli_features_check */
} cli_features;

/* The rows of --window, --alibi and --softcap for a command's options table: T its arguments'
 * struct, FIELD its cli_features member, WHERE the mechanisms they apply to ("sdpa, mha"),
 * ALIBI_MORE text after --alibi's help ("" for none) */
// one row a line
// clang-format off
#define CLI_FEATURE_OPTIONS(T, FIELD, WHERE, ALIBI_MORE)                                                             \
    {"--window", "LEFT,RIGHT", CLI_OPT_AT(T, CLI_NAME, FIELD.window), 0, 0, NULL, NULL,                              \
        WHERE ": FlashAttention's local window, bottom-right aligned (-1: unbounded; W keys: W-1,0)"},              \
    {"--alibi", NULL, CLI_OPT_AT(T, CLI_FLAG, FIELD.alibi), 0, 0, NULL, NULL,                                        \
        WHERE ": ALiBi with the paper's slopes" ALIBI_MORE},                                                         \
    {"--softcap", "C", CLI_OPT_AT(T, CLI_FLOAT, FIELD.softcap), FLT_MIN, FLT_MAX, NULL, NULL,                        \
        WHERE ": scores become C tanh(s / C)"}
// clang-format on

/* Whether any of them is given */
bool cli_features_given(const cli_features *f);
/* Parses --window into window_parsed: CLI_OK, or CLI_ERR_USAGE with the message (cmd's) */
int cli_features_check(const char *cmd, cli_features *f);
/* The window and softcap into out, and with --alibi the paper's slopes for `heads` query heads,
 * written into slopes (heads) that out then points to. false (the library's error set) when the
 * slopes cannot be made. */
bool cli_features_apply(const cli_features *f, float *slopes, int64_t heads, attn_score_features *out);
/* The (query, key) pairs that the window and a causal mask (top-left, PyTorch's) leave visible
 * in an (lq, lk) problem: the kernels' work, for GFLOP/s */
double cli_features_pairs(const cli_features *f, bool causal, int64_t lq, int64_t lk);
/* The given ones for a line of text ("  window 255,0  alibi  softcap 30") */
void cli_features_print(const cli_features *f);
/* The three as JSON members ("window":"255,0" or null, "alibi", "softcap"), no braces */
void cli_features_json(const cli_features *f);

#endif
