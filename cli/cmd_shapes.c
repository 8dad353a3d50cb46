/* attn shapes: seed 000's example. Q, K, V ~ N(0, 1) of shape (batch, len, d_k); prints the
 * shapes of softmax(Q K^T / sqrt(d_k)) V and of the attention weights. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void help(void)
{
    printf("usage: attn shapes [--batch N] [--len L] [--dk D] [--seed S]\n\n"
           "Seed 000's demo: scaled dot-product attention on random Q, K, V of shape\n"
           "(batch, len, dk); prints the shapes of the output and of the weights.\n"
           "Defaults: batch 2, len 10, dk 64, seed 0.\n");
}

int cmd_shapes(int argc, char **argv)
{
    long batch = 2, len = 10, dk = 64, seed = 0;
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *v;
        long *target = !strcmp(opt, "--batch") ? &batch
                       : !strcmp(opt, "--len") ? &len
                       : !strcmp(opt, "--dk")  ? &dk
                       : !strcmp(opt, "--seed") ? &seed
                                               : NULL;
        if (!strcmp(opt, "--help") || !strcmp(opt, "-h")) {
            help();
            return CLI_OK;
        }
        if (!target) return cli_fail(CLI_ERR_USAGE, "shapes", "unknown option \"%s\" (see --help)", opt);
        if (!(v = cli_value("shapes", argc, argv, &i))) return CLI_ERR_USAGE;
        long max = target == &seed ? 2147483647L : 4096;
        if (!cli_parse_long("shapes", opt, v, target == &seed ? 0 : 1, max, target))
            return CLI_ERR_USAGE;
    }
    attn_ctx *ctx = cli_ctx_new((uint64_t)seed);
    if (!ctx) return cli_fail(CLI_ERR_DATA, "shapes", "%s", attn_last_error());
    attn_ctx_set_grad_enabled(ctx, false);
    int64_t shape[3] = {batch, len, dk};
    attn_tensor *q = attn_tensor_empty(ctx, 3, shape), *k = attn_tensor_empty(ctx, 3, shape),
                *v = attn_tensor_empty(ctx, 3, shape);
    int code = CLI_OK;
    if (!q || !k || !v) {
        code = cli_fail(CLI_ERR_DATA, "shapes", "%s", attn_last_error());
        goto done;
    }
    attn_tensor_fill_normal(q, attn_ctx_rng(ctx), 0, 1);
    attn_tensor_fill_normal(k, attn_ctx_rng(ctx), 0, 1);
    attn_tensor_fill_normal(v, attn_ctx_rng(ctx), 0, 1);
    attn_tensor *scores = attn_scale(ctx, attn_matmul(ctx, q, k, false, true), 1.0f / sqrtf((float)dk));
    attn_tensor *weights = attn_softmax(ctx, scores, -1);
    attn_tensor *out = attn_matmul(ctx, weights, v, false, false);
    if (!out) {
        code = cli_fail(CLI_ERR_DATA, "shapes", "%s", attn_last_error());
        goto done;
    }
    char a[64], b[64];
    printf("输出形状 (output shape): %s\n", attn_shape_str(out, a, sizeof a));
    printf("注意力权重形状 (attention weights shape): %s\n", attn_shape_str(weights, b, sizeof b));
done:
    attn_ctx_free(ctx);
    return code;
}
