/* The program's thread count (--threads) and matmul precision (--matmul-precision): the library
 * keeps no process-wide setting, so every ctx and optimizer the program makes gets them here
 * (cli.h). */
#include "cli.h"

#include <stdio.h>

static int threads; /* 0: the library's default */
static attn_precision precision = ATTN_PRECISION_HIGHEST;

void cli_set_matmul_precision(attn_precision p)
{
    precision = p;
}

attn_precision cli_matmul_precision(void)
{
    return precision;
}

const char *cli_matmul_precision_text(void)
{
    if (precision != ATTN_PRECISION_MEDIUM) return attn_precision_name(precision);
    if (!attn_bf16_products()) return "medium (float32: no AVX512_BF16 here)";
    return attn_bf16_attention() ? "medium (bf16 products)" : "medium (bf16 linear layers, float32 attention here)";
}

void cli_set_threads(int n)
{
    threads = n > 0 ? n : 0;
}

int cli_threads(void)
{
    return threads > 0 ? threads : attn_default_num_threads();
}

/* The library's message about a thread count, naming the option that set it. */
static void name_threads_option(void)
{
    char why[1024];
    snprintf(why, sizeof why, "%s", attn_last_error());
    if (threads > 0)
        attn_set_error(attn_last_status(), "--threads %d: %s", threads, why);
    else
        attn_set_error(attn_last_status(), "%s (the default count; set one with --threads)", why);
}

attn_ctx *cli_ctx_new(uint64_t seed)
{
    attn_ctx *ctx = attn_ctx_new(seed);
    if (!ctx) name_threads_option();
    if (ctx && attn_ctx_set_num_threads(ctx, threads) != ATTN_OK) {
        name_threads_option();
        attn_ctx_free(ctx);
        return NULL;
    }
    if (ctx && attn_ctx_set_matmul_precision(ctx, precision) != ATTN_OK) {
        attn_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

attn_optim *cli_optim_new(attn_params *p, const attn_optim_config *cfg)
{
    attn_optim *opt = attn_optim_new(p, cfg);
    if (opt && attn_optim_set_num_threads(opt, threads) != ATTN_OK) {
        name_threads_option();
        attn_optim_free(opt);
        return NULL;
    }
    return opt;
}
