/* attn shapes: seed 000's example. Q, K, V ~ N(0, 1) of shape (batch, len, d_k); prints the
 * shapes of softmax(Q K^T / sqrt(d_k)) V and of the attention weights. */
#include "options.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct shapes_options {
    long batch, len, dk, seed;
} shapes_options;

static const cli_option options[] = {
    {"--batch", "N", CLI_OPT_AT(shapes_options, CLI_LONG, batch), 1, 4096, NULL, "2", "batch size"},
    {"--len", "L", CLI_OPT_AT(shapes_options, CLI_LONG, len), 1, 4096, NULL, "10", "sequence length"},
    {"--dk", "D", CLI_OPT_AT(shapes_options, CLI_LONG, dk), 1, 4096, NULL, "64", "query/key width d_k"},
    {"--seed", "S", CLI_OPT_AT(shapes_options, CLI_LONG, seed), 0, 2147483647.0, NULL, "0", "seed of Q, K, V"},
};

const cli_spec shapes_spec = {
    .cmd = "shapes",
    .synopsis = "[options]",
    .about = "Seed 000's demo: scaled dot-product attention on random Q, K, V of shape\n"
             "(batch, len, dk); prints the shapes of the output and of the weights.",
    CLI_OPTIONS(options),
};

int cmd_shapes(int argc, char **argv)
{
    shapes_options o;
    int code = cli_parse(&shapes_spec, &o, argc, argv, 1, NULL, NULL);
    if (code != CLI_OK) return code == CLI_HELP_SHOWN ? CLI_OK : code;
    const long batch = o.batch, len = o.len, dk = o.dk, seed = o.seed;
    char what[96]; /* Q, K, V and the output (batch, len, dk); scores and weights (batch, len, len) */
    snprintf(what, sizeof what, "--batch %ld --len %ld --dk %ld", batch, len, dk);
    if (!cli_check_fits("shapes", 4.0 * batch * len * (4.0 * dk + 2.0 * len), what)) return CLI_ERR_USAGE;
    attn_ctx *ctx = cli_ctx_new((uint64_t)seed);
    if (!ctx) return cli_fail(CLI_ERR_DATA, "shapes", "%s", attn_last_error());
    attn_ctx_set_grad_enabled(ctx, false);
    int64_t shape[3] = {batch, len, dk};
    attn_tensor *q = attn_tensor_empty(ctx, 3, shape), *k = attn_tensor_empty(ctx, 3, shape),
                *v = attn_tensor_empty(ctx, 3, shape);
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
