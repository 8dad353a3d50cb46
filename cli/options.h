/* Options as tables: one table per subcommand holds every option's name, value, range, default
 * and line of help, and drives the parsing, `attn <command> --help` and the man page
 * (`attn --man`, docs/attn.1), so none of them can drift from the others. */
#ifndef ATTN_CLI_OPTIONS_H
#define ATTN_CLI_OPTIONS_H

#include "cli.h"

#include <stddef.h>
#include <stdio.h>

typedef enum cli_opt_type {
    CLI_FLAG,   /* bool, no value */
    CLI_LONG,   /* long in [min, max] */
    CLI_INT64,  /* int64_t in [min, max] */
    CLI_INT,    /* int in [min, max] */
    CLI_DOUBLE, /* double in [min, max] */
    CLI_FLOAT,  /* float in [min, max] */
    CLI_TEXT,   /* const char *, as given (a title) */
    CLI_NAME,   /* const char *, as given, not empty (a name, a language, a list) */
    CLI_CHOICE, /* int: the index of the value in choices */
    /* Paths, const char * as given, each checked by its kind before any work (cli_check_paths): */
    CLI_IN_FILE,    /* a file the command reads: a readable regular file */
    CLI_IN_FILES,   /* files it reads, separated by commas: each one so */
    CLI_IN_DIR,     /* a folder it reads */
    CLI_OUT_FILE,   /* a file it writes (cli_check_output) */
    CLI_PICTURE,    /* a picture it writes: also .png, .svg or .pdf */
    CLI_OUT_DIR,    /* a folder it writes into, made when missing */
    CLI_CHECKPOINT, /* the model file: written by the action train (which reads it first with --resume,
                       where the table has that flag), read by every other action */
} cli_opt_type;

/* The C type each kind writes, and a row's destination offset checked against it: _Generic has a
 * branch for that type alone, so a row whose field has another type does not compile. */
#define CLI_FLAG_CTYPE bool
#define CLI_LONG_CTYPE long
#define CLI_INT64_CTYPE int64_t
#define CLI_INT_CTYPE int
#define CLI_DOUBLE_CTYPE double
#define CLI_FLOAT_CTYPE float
#define CLI_TEXT_CTYPE const char *
#define CLI_NAME_CTYPE const char *
#define CLI_CHOICE_CTYPE int
#define CLI_IN_FILE_CTYPE const char *
#define CLI_IN_FILES_CTYPE const char *
#define CLI_IN_DIR_CTYPE const char *
#define CLI_OUT_FILE_CTYPE const char *
#define CLI_PICTURE_CTYPE const char *
#define CLI_OUT_DIR_CTYPE const char *
#define CLI_CHECKPOINT_CTYPE const char *
#define CLI_AT(T, kind, field) _Generic(((T *)0)->field, kind##_CTYPE : offsetof(T, field))
/* A row's kind and destination, named once: {"--epochs", "N", CLI_OPT_AT(T, CLI_LONG, train.epochs), ...} */
#define CLI_OPT_AT(T, kind, field) kind, CLI_AT(T, kind, field)

typedef struct cli_option {
    const char *name;  /* "--epochs"; NULL: a heading line in --help (help = its text) */
    const char *value; /* what --help shows after the name ("N", "FILE"); NULL for flags */
    cli_opt_type type;
    size_t offset;              /* of the destination in the command's options struct */
    double min, max;            /* numbers: the accepted range */
    const char *const *choices; /* CLI_CHOICE: the accepted values, NULL-terminated */
    const char *def;            /* the default as it would be typed, or NULL (none, or set in code) */
    const char *help;           /* one line */
    const char *only;           /* the actions it applies to ("train eval"); NULL: every one */
} cli_option;

/* A subcommand as the user sees it. */
typedef struct cli_spec {
    const char *cmd;      /* "classify" */
    const char *synopsis; /* after "attn <cmd> " */
    const char *about;    /* what it does (a few lines) */
    const char *actions;  /* "  train  ...\n" lines, or NULL */
    const cli_option *options;
    size_t n_options;
    const char *notes; /* after the options, or NULL */
} cli_spec;

#define CLI_OPTIONS(table) .options = (table), .n_options = sizeof(table) / sizeof((table)[0])

/* --matmul-precision's values, attn_precision's order */
extern const char *const cli_precision_names[];
#define CLI_PRECISION_OPTION(T, FIELD)                                                                                 \
    {                                                                                                                  \
        "--matmul-precision", NULL, CLI_OPT_AT(T, CLI_CHOICE, FIELD), 0, 0, cli_precision_names, "highest",            \
            "products: highest (float32), high (the same here), medium (bf16 operands, float32 sums, "                 \
            "where the CPU has AVX512_BF16)"                                                                           \
    }

/* Rows for the options every training command shares (each command gives its own defaults). */
// one row a line
// clang-format off
#define CLI_TRAIN_OPTIONS(T, EPOCHS, BATCH, LR, MAX_LEN, CHECKPOINT)                                                 \
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "training:"},                                                               \
    {"--epochs", "N", CLI_OPT_AT(T, CLI_LONG, train.epochs), 1, 100000, NULL, EPOCHS, "epochs", "train"},            \
    {"--batch-size", "N", CLI_OPT_AT(T, CLI_LONG, train.batch_size), 1, 65536, NULL, BATCH,                          \
        "examples per step (per rank under mpirun: global batch = N x ranks)", "train"},                             \
    {"--lr", "X", CLI_OPT_AT(T, CLI_DOUBLE, train.lr), 1e-12, 10, NULL, LR, "learning rate", "train"},               \
    {"--max-len", "N", CLI_OPT_AT(T, CLI_LONG, train.max_len), 1, 100000, NULL, MAX_LEN,                             \
        "longest sequence kept (tokens)", "train"},                                                                  \
    {"--seed", "S", CLI_OPT_AT(T, CLI_LONG, train.seed), 0, 2147483647.0, NULL, "0",                                 \
        "seed for initialisation, shuffling and dropout", "train"},                                                  \
    {"--threads", "N", CLI_OPT_AT(T, CLI_LONG, train.threads), 1, 1024, NULL, NULL,                                  \
        "threads (default: all cores)"},                                                                             \
    CLI_PRECISION_OPTION(T, train.matmul_precision),                                                                 \
    {"--checkpoint", "PATH", CLI_OPT_AT(T, CLI_CHECKPOINT, train.checkpoint), 0, 0, NULL, CHECKPOINT,                \
        "the model file: written after every epoch (atomically) by train, read by the others"},                      \
    {"--checkpoint-every", "N", CLI_OPT_AT(T, CLI_LONG, train.checkpoint_every), 1, 1099511627776.0, NULL, NULL,     \
        "also save every N steps", "train"},                                                                         \
    {"--resume", NULL, CLI_OPT_AT(T, CLI_FLAG, train.resume), 0, 0, NULL, NULL,                                      \
        "continue the run saved at --checkpoint (same losses as without the stop)", "train"},                        \
    {"--max-steps", "N", CLI_OPT_AT(T, CLI_LONG, train.max_steps), 1, 1099511627776.0, NULL, NULL,                   \
        "stop after N steps in all (then evaluate, as at the end)", "train"},                                        \
    {"--log-steps", NULL, CLI_OPT_AT(T, CLI_FLAG, train.log_steps), 0, 0, NULL, NULL,                                \
        "print every step's loss in full precision", "train"},                                                       \
    {"--plot-loss", "FILE", CLI_OPT_AT(T, CLI_PICTURE, train.plot_loss), 0, 0, NULL, NULL,                           \
        "the training loss curve (.png, .svg or .pdf)", "train"}
// clang-format on

enum {
    CLI_HELP_SHOWN = -1
};

/* Sets every default of spec's table in opts, then reads argv[first..argc): options into opts,
 * other arguments into args (room for argc entries, may be NULL when none are allowed) and
 * *n_args. "--" ends the options. Returns CLI_OK, CLI_HELP_SHOWN (--help printed) or
 * CLI_ERR_USAGE (message printed, naming the option and what was expected). */
int cli_parse(const cli_spec *spec, void *opts, int argc, char **argv, int first, const char **args, int *n_args);
/* Every path option of spec that applies to action (NULL: a command without actions) and has a
 * value in opts, checked by its kind (cli_opt_type), then: no two outputs name one file, no output
 * is or lies inside what the run reads (cli_check_distinct, cli_check_apart), no folder written
 * lies inside a folder read. CLI_OK, or CLI_ERR_USAGE with the message printed. A command calls it
 * once its defaults are in opts, before any work. */
int cli_check_paths(const cli_spec *spec, const void *opts, const char *action);
/* Whether options of type t are paths (CLI_IN_FILE ... CLI_CHECKPOINT). */
bool cli_opt_is_path(cli_opt_type t);
/* Whether row o applies to action (its `only` names it; NULL action or `only`: every one). */
bool cli_option_applies(const cli_option *o, const char *action);
/* true when argv[first..argc) (as cli_parse read it) gives option `name` itself, not its default. */
bool cli_given(const cli_spec *spec, int argc, char **argv, int first, const char *name);
/* --recipe NAME of a command's train action: names[r] (NULL-ended; names[0] the default, which
 * applies when train gives none) stands for options[r], words separated by single spaces. *expanded
 * is argv with those words put after the action, before the command line's options, which thus
 * override them; the last --recipe given (before "--") names it, an unknown name leaves it to
 * cli_parse to refuse. *expanded (argv's pointers and the words, in *words) and *words are
 * malloc'd: the caller frees both, whatever is returned (CLI_OK or CLI_ERR_DATA). */
int cli_expand_recipe(const char *cmd, const char *const *names, const char *const *options, int argc, char **argv,
                      int *expanded_argc, char ***expanded, char **words);
/* `attn <cmd> --help` */
void cli_help(const cli_spec *spec, FILE *out);
/* For a command whose first argument is its action: with no argument (help on stderr, *code a
 * usage error) or --help/-h first (help on stdout, *code CLI_OK), true; else false */
bool cli_help_before_action(const cli_spec *spec, int argc, char **argv, int *code);
/* The command's part of the man page (roff). */
void cli_man(const cli_spec *spec, FILE *out);
/* s as roff text: \ and - escaped, a leading . or ' on a line protected. */
void cli_roff(FILE *out, const char *s);

/* Checks made before any work (paths.c), each printing "attn <cmd>: <option> <value>: <why>" and returning
 * false: a file the command will write (folder exists and is writable; not a folder), a picture
 * (also .png/.svg/.pdf), a file it will read (a readable regular file; hint, when not NULL, follows
 * the message), a folder it will read. */
bool cli_check_output(const char *cmd, const char *opt, const char *path);
/* cli_check_output, and an existing path must be a regular file that is empty or an attn
 * checkpoint (a training checkpoint is replaced whole and locked while a run trains it; another
 * file there is the user's, never replaced). */
bool cli_check_checkpoint(const char *cmd, const char *opt, const char *path);
/* true when the file at path starts as an attn checkpoint does (its header's metadata says
 * format attn-checkpoint; only the header is read): a file the program may replace or remove. */
bool cli_looks_like_checkpoint(const char *path);
/* false (CLI_ERR_USAGE: "<what> need about N GB of memory; this machine has M GB") when bytes,
 * a run's estimated memory, pass the machine's physical memory: sizes inside the options' ranges
 * that can never run are refused before any work. */
bool cli_check_fits(const char *cmd, double bytes, const char *what);
/* "<checkpoint><suffix>" (malloc'd), beside the file that holds the model: a checkpoint that is a
 * symlink has its vocabularies beside the link's target, whether it is trained or read through the
 * link or the target. */
char *cli_checkpoint_sibling(const char *checkpoint, const char *suffix);
bool cli_check_picture(const char *cmd, const char *opt, const char *path);
bool cli_check_input_file(const char *cmd, const char *opt, const char *path, const char *hint);
bool cli_check_input_dir(const char *cmd, const char *opt, const char *path);
/* A folder the command writes into: it exists and is writable, or it can be made (its nearest
 * existing parent is a writable folder); room is left for the names put in it. */
bool cli_check_output_dir(const char *cmd, const char *opt, const char *dir);
/* mkdir -p dir, after cli_check_output_dir said it can be done (CLI_ERR_DATA naming opt if not) */
int cli_make_dir(const char *cmd, const char *opt, const char *dir);

/* A path a command reads or writes, named by its option (a checkpoint's vocabulary by the
 * checkpoint's). */
typedef struct cli_path {
    const char *opt, *path; /* path NULL or empty: not given, skipped */
} cli_path;
/* false, with "attn <cmd>: <opt> <path>: the same file as <opt> <path>", when two of the n paths
 * name one regular file, or one new file (so that no output replaces an input or another output);
 * two outputs to one device or FIFO are allowed. */
bool cli_check_distinct(const char *cmd, const cli_path *paths, int n);
/* false, with a message naming both, when an output (n_out, written files) is one of the inputs
 * (n_in, files and folders the run reads) or lies inside an input folder, through symlinks and
 * hard links (device and inode): no output replaces or joins what the run reads. Devices and
 * FIFOs, written in place, are never in the way. */
bool cli_check_apart(const char *cmd, const cli_path *outputs, int n_out, const cli_path *inputs, int n_in);
/* The same for a folder the command writes into (which may not exist yet: it would be made in
 * its nearest existing parent): false, naming both, when it is or lies inside an input folder. */
bool cli_check_folder_apart(const char *cmd, const char *opt, const char *dir, const cli_path *inputs, int n_in);

#endif
