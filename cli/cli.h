/* The attn program: one file per subcommand, shared option parsing. Exit status: 0 success,
 * 1 a data or runtime error, 2 a usage error (unknown option, bad value). */
#ifndef ATTN_CLI_H
#define ATTN_CLI_H

#include "attn.h"
#include "attn_data.h" /* the program uses the whole library: data loading and pictures too */
#include "attn_plot.h"

#include <stdbool.h>

enum {
    CLI_OK = 0,
    CLI_ERR_DATA = 1,
    CLI_ERR_USAGE = 2
};

typedef struct cli_spec cli_spec; /* a subcommand's options table (options.h) */

/* A subcommand (cli/main.c lists them: one row each). */
typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
    const char *summary;
    const cli_spec *spec; /* its options, --help and man page section */
} cli_command;

/* [-]digits: the one integer form options take (strtol alone also takes spaces and "+"). */
bool cli_integer_form(const char *s);
/* Prints "attn <cmd>: <message>" to stderr; returns code. */
int cli_fail(int code, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Parses value of option opt as an integer in [min, max]; false (with a message) if it is not a
 * number or out of range (for values inside an option's value; options.h parses options). */
bool cli_parse_long(const char *cmd, const char *opt, const char *value, long min, long max, long *out);

/* The next line of standard input into *line (getline's buffer, *cap), its line end removed:
 * 1 a line, 0 the end of the input; -1 when it cannot be read (an I/O error, standard input a
 * folder) or holds a NUL byte, with the message printed ("standard input, line N: ...") and *code
 * set. Every command reads its lines so, so that none takes an error for the end, or cuts a line. */
int cli_stdin_line(const char *cmd, char **line, size_t *cap, long line_no, int *code);

/* The shipped data set `name` (e.g. "aclImdb_mini"): in $ATTN_DATA_DIR when it is set;
 * else the first folder that has it of data/ beside the program (the build tree), ../share/attn
 * beside it (an installed bin/attn) and the configured install folder; else data/<name>
 * relative to the current folder. The string lives as long as the process. */
const char *cli_default_data(const char *name);

/* --threads: the count every ctx and optimizer made below gets (n <= 0: the library default,
 * attn_default_num_threads()). NULL from the constructors with attn_last_error() set. */
void cli_set_threads(int n);
int cli_threads(void); /* the count in effect */
/* --matmul-precision: the precision of every ctx made below (attn_ctx_set_matmul_precision) */
void cli_set_matmul_precision(attn_precision p);
attn_precision cli_matmul_precision(void);
/* "medium (bf16 products)", "medium (float32: no AVX512_BF16 here)", "highest", ...: what the
 * setting does on this CPU, for log and bench lines */
const char *cli_matmul_precision_text(void);
attn_ctx *cli_ctx_new(uint64_t seed);
attn_optim *cli_optim_new(attn_params *p, const attn_optim_config *cfg);

#endif
