/* The library in 30 lines: nn.MultiheadAttention(64, 8) over a padded batch, forward, backward
 * and one Adam step. Build: cc quickstart.c $(pkg-config --cflags --libs attn) */
#include <attn.h>
#include <stdio.h>

int main(void)
{
    attn_rng rng;
    attn_rng_seed(&rng, 0);
    attn_params *params = attn_params_new(); /* parameters under PyTorch's state_dict names */
    attn_mha_layer mha;
    attn_mha_init(&mha, params, "attn", 64, 8, 0, 0, true, 0.0f, &rng);
    attn_optim_config adam = attn_optim_defaults(ATTN_OPTIM_ADAM);
    attn_optim *opt = attn_optim_new(params, &adam);
    attn_ctx *ctx = attn_ctx_new(0);                                    /* activations and the autograd tape */
    attn_tensor *x = attn_tensor_empty(ctx, 3, (int64_t[]){2, 10, 64}); /* (B, L, E) */
    attn_tensor_fill_normal(x, &rng, 0.0f, 1.0f);
    uint8_t pad[2 * 10] = {0};                    /* key_padding_mask: true = padding */
    for (int j = 6; j < 10; j++) pad[10 + j] = 1; /* the second sequence has 6 tokens */
    attn_mha_opts o = {.mask = {.key_padding = pad, .key_padding_shape = {2, 10}},
                       .average_weights = true}; /* weights (B, L, L): the mean over heads */
    attn_tensor *weights = NULL, *y = attn_mha_forward(ctx, &mha, x, x, x, &o, &weights);
    attn_tensor *loss = attn_mean_all(ctx, attn_mul(ctx, y, y));
    if (!loss || attn_backward(ctx, loss) != ATTN_OK || attn_optim_step(opt) != ATTN_OK) {
        fprintf(stderr, "quickstart: %s\n", attn_last_error()); /* every failure says why */
        return 1;
    }
    char a[64], b[64];
    printf("out %s, weights %s, loss %.4f, weight on a padding key %g\n", attn_shape_str(y, a, 64),
           attn_shape_str(weights, b, 64), loss->data[0], weights->data[1 * 10 * 10 + 9]);
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    attn_params_free(params);
    return 0;
}
