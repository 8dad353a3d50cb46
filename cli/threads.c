/* The program's thread count (--threads): the library keeps none of its own, so every ctx and
 * optimizer the program makes gets it here (cli.h). */
#include "cli.h"

static int threads; /* 0: the library's default */

void cli_set_threads(int n) { threads = n > 0 ? n : 0; }

int cli_threads(void) { return threads > 0 ? threads : attn_default_num_threads(); }

attn_ctx *cli_ctx_new(uint64_t seed)
{
    attn_ctx *ctx = attn_ctx_new(seed);
    if (ctx && attn_ctx_set_num_threads(ctx, threads) != ATTN_OK) {
        attn_ctx_free(ctx);
        return NULL;
    }
    return ctx;
}

attn_optim *cli_optim_new(attn_params *p, const attn_optim_config *cfg)
{
    attn_optim *opt = attn_optim_new(p, cfg);
    if (opt && attn_optim_set_num_threads(opt, threads) != ATTN_OK) {
        attn_optim_free(opt);
        return NULL;
    }
    return opt;
}
