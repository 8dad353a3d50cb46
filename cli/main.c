/* attn: the command-line program. Dispatches to one subcommand per file; started by mpirun, it
 * first joins the MPI job (dist.h) and leaves it with the subcommand's exit status. */
#include "dist.h"
#include "options.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The commands, one row each: NAME names cli/cmd_NAME.c's `int cmd_NAME(int argc, char **argv)`
 * and its `const cli_spec NAME_spec`, declared here from the row; the text is attn --help's. */
// one row a line
// clang-format off
#define COMMANDS(X)                                                                                                    \
    X(shapes, "seed 000's demo: scaled dot-product attention on random Q, K, V")                                       \
    X(nw, "seed 003: Nadaraya-Watson kernel regression trained with SGD, with its plot")                               \
    X(classify, "seed 002: the self-attention IMDB classifier (train, eval, predict, explain)")                        \
    X(translate, "translation with attention: Transformer or Bahdanau GRU, Multi30k en->fr, BLEU")                     \
    X(lm, "a GPT-2 or Llama style language model with its BPE tokenizer (train, eval, generate, explain)")            \
    X(plot, "draw a saved attention matrix (e.g. attn op's weights) as a heatmap")                                     \
    X(bench, "validate, then time the kernels and training steps (GFLOP/s, ms, memory)")                               \
    X(op, "run one attention mechanism on tensors from a safetensors file")                                            \
    X(tour, "every listing of the three tutorials, step by step, with its numbers and figures")
// clang-format on

#define COMMAND_DECLARE(NAME, SUMMARY)                                                                                 \
    extern const cli_spec NAME##_spec;                                                                                 \
    int cmd_##NAME(int argc, char **argv);
COMMANDS(COMMAND_DECLARE)

#define COMMAND_ROW(NAME, SUMMARY) {#NAME, cmd_##NAME, SUMMARY, &NAME##_spec},
static const cli_command commands[] = {COMMANDS(COMMAND_ROW)};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out)
{
    fprintf(out,
            "usage: attn <command> [options]   (attn <command> --help for its options)\n\n"
            "attention mechanisms and small Transformers in C (libattn %s)\n\ncommands:\n",
            attn_version());
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* The man page, docs/attn.1: made from the commands' option tables, so it lists every command and
 * option as --help does (a test compares the file with this output). */
static void man_page(FILE *out)
{
    fprintf(out, ".TH ATTN 1 \"\" \"attn %s\" \"User Commands\"\n", attn_version());
    fputs(".SH NAME\nattn \\- attention mechanisms and small Transformers: demos, training, translation, "
          "benchmarks\n.SH SYNOPSIS\n",
          out);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        fprintf(out, ".B attn %s\n", commands[i].name);
        cli_roff(out, commands[i].spec->synopsis);
        fputs("\n.br\n", out);
    }
    fputs(".SH DESCRIPTION\n.B attn\nruns the programs of three attention tutorials in C: the shape demo of "
          "scaled dot\\-product\nattention, Nadaraya\\-Watson kernel regression as attention pooling, a "
          "self\\-attention IMDB\nsentiment classifier, and translation with a Transformer or a "
          "Bahdanau\\-attention GRU. It is built\non\n.BR libattn ,\nwhose results are checked against "
          "PyTorch 1.13. Every command prints its options with\n.BR \\-\\-help .\n.SH COMMANDS\n",
          out);
    for (size_t i = 0; i < N_COMMANDS; i++) {
        cli_man(commands[i].spec, out);
    }
    fputs(
        ".SH DATA-PARALLEL TRAINING\nStarted by\n.BR mpirun ,\n.B classify train\nand\n.B translate train\n"
        "train data\\-parallel: each rank takes\n.B \\-\\-batch\\-size\nexamples of every step, gradients "
        "are averaged with one all\\-reduce, and rank 0 alone prints,\nwrites checkpoints and plots. Long runs "
        "show a progress line (epoch, step, loss, tokens/s, ETA) on a\nterminal and plain log lines otherwise.\n"
        ".SH FILES\nPictures: the extension of the output path chooses PNG, SVG or PDF. Tensors: safetensors\n"
        "(F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL), validated on reading. Every output file appears\n"
        "complete or not at all: a regular file is written beside itself and renamed; a symlink's\ntarget is "
        "replaced, not the link; a device or FIFO is written in place (a FIFO that no reader opens within\n"
        "2 s fails); /dev/stdout, /dev/stderr and /dev/fd/N are written through the descriptor itself,\n"
        "so a pipe gets the bytes and a log opened with >> is appended to.\n"
        ".SH ENVIRONMENT\n.TP\n.B ATTN_DATA_DIR\nthe folder holding the shipped data sets (aclImdb_mini, multi30k); "
        "without it the program\n"
        "looks in data/ beside itself (the build tree), then in ../share/attn (an installed program).\n"
        ".TP\n.B OMP_NUM_THREADS\nthe default thread count where a command has no\n.BR \\-\\-threads .\n"
        ".TP\n.B ATTN_CPU_ISA\nbaseline, or on x86-64 avx2, avx512 or avx512_bf16, on aarch64 neon, sve or neon_bf16: "
        "the\nhighest level of the library's kernels to run (they run at the highest this CPU supports at or\n"
        "under it; the best when unset);\n.B attn \\-\\-version\nsays which runs and which this CPU has.\n"
        ".SH EXIT STATUS\n0 on success, 1 on a data or runtime error, 2 on a usage error (unknown option, bad "
        "value, a\nfile option that names nothing usable), reported before any work. Messages name the option or "
        "file\nand what was expected.\n"
        ".SH NOTES\nA query whose keys are all masked gets output 0, weight 0 and gradient 0; PyTorch 1.13 gives "
        "NaN\nthere.\n.SH SEE ALSO\nThe README of the project, and\n.I include/attn.h\nfor the library.\n",
        out);
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_ERR_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    if (!strcmp(argv[1], "--man")) {
        man_page(stdout);
        return CLI_OK;
    }
    const char *isa = getenv("ATTN_CPU_ISA");
    attn_isa cap;
    if (isa && *isa && (attn_isa_from_name(isa, &cap) != ATTN_OK || !attn_isa_this_arch(cap))) {
        fprintf(stderr, "attn: ATTN_CPU_ISA is \"%s\": expected one of this architecture's levels:", isa);
        for (int l = 0; l < ATTN_ISA_COUNT; l++)
            if (attn_isa_this_arch((attn_isa)l)) fprintf(stderr, " %s", attn_isa_name((attn_isa)l));
        fputc('\n', stderr);
        return CLI_ERR_USAGE;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("attn %s\nkernels: %s (of", attn_version(), attn_isa_name(attn_cpu_isa()));
        for (int l = 0; l < ATTN_ISA_COUNT; l++)
            if (attn_cpu_isa_supported((attn_isa)l)) printf(" %s", attn_isa_name((attn_isa)l));
        printf(" here; ATTN_CPU_ISA caps the choice)\nGEMM: %s\n", attn_gemm_backend());
        printf("--matmul-precision medium: %s%s\n",
               attn_bf16_products() ? "bf16 operands, float32 sums" : "float32 (this level has no bf16 products)",
               !attn_bf16_products() ? ""
               : attn_bf16_amx()     ? "; the fused attention's products on AMX tiles"
               : attn_bf16_attention() && attn_cpu_isa() == ATTN_ISA_NEON_BF16
                   ? "; the fused attention's products with BFDOT (sums rounded to odd)"
               : attn_bf16_attention() ? "; the fused attention's products with VDPBF16PS"
                                       : "; the fused attention's products float32 (this CPU's bf16 dot products "
                                         "run no faster than its float32 FMAs)");
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "attn: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return CLI_ERR_USAGE;
}

/* code, or CLI_ERR_DATA when what the command printed did not all reach standard output (a full
 * disk, a closed pipe): said on stderr, as a run whose output is lost has failed. */
static int check_stdout(int code)
{
    errno = 0;
    bool failed = ferror(stdout) != 0;
    if (fflush(stdout) != 0 || failed) {
        const char *why = errno ? strerror(errno) : "a write failed; the output is incomplete";
        fprintf(stderr, "attn: standard output: %s\n", why);
        if (code == CLI_OK) code = CLI_ERR_DATA;
    }
    return code;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* a log file or pipe gets every line as it is printed */
    if (!dist_init(&argc, &argv)) return CLI_ERR_USAGE;
    return dist_finish(check_stdout(dispatch(argc, argv)));
}
