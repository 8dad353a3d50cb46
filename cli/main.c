/* attn: the command-line program. Dispatches to one subcommand per file; started by mpirun, it
 * first joins the MPI job (dist.h) and leaves it with the subcommand's exit status. */
#include "cli.h"
#include "dist.h"

#include <stdio.h>
#include <string.h>

static const cli_command commands[] = {
    {"shapes", cmd_shapes, "seed 000's demo: scaled dot-product attention on random Q, K, V"},
    {"nw", cmd_nw, "seed 003: Nadaraya-Watson kernel regression trained with SGD, with its plot"},
    {"classify", cmd_classify, "seed 002: the self-attention IMDB classifier (train, eval, predict, explain)"},
    {"translate", cmd_translate, "translation with attention: Transformer or Bahdanau GRU, Multi30k en->fr, BLEU"},
    {"plot", cmd_plot, "draw a saved attention matrix (e.g. attn op's weights) as a heatmap"},
    {"bench", cmd_bench, "validate, then time the kernels and training steps (GFLOP/s, ms, memory)"},
    {"op", cmd_op, "run one attention mechanism on tensors from a safetensors file"},
    {"tour", cmd_tour, "every listing of the three tutorials, step by step, with its numbers and figures"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: attn <command> [options]   (attn <command> --help for its options)\n\n"
                 "attention mechanisms and small Transformers in C (libattn %s)\n\ncommands:\n",
            attn_version());
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
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
    if (!strcmp(argv[1], "--version")) {
        printf("attn %s\n", attn_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "attn: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return CLI_ERR_USAGE;
}

int main(int argc, char **argv)
{
    if (!dist_init(&argc, &argv)) return CLI_ERR_USAGE;
    return dist_finish(dispatch(argc, argv));
}
