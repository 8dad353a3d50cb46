/* A small program that uses only the public header: fits y = 2x - 1 with one Linear layer and
 * SGD, then runs softmax attention over three tokens. Built against the installed library:
 *   cc train_tiny.c $(pkg-config --cflags --libs attn) -lm */
#include <attn.h>

#include <math.h>
#include <stdio.h>

int main(void)
{
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    attn_params *params = attn_params_new();
    attn_linear_layer fc;
    if (!params || attn_linear_init(&fc, params, "fc", 1, 1, true, &rng) != ATTN_OK) {
        fprintf(stderr, "init: %s\n", attn_last_error());
        return 1;
    }
    attn_optim_config cfg = attn_optim_defaults(ATTN_OPTIM_SGD);
    cfg.lr = 0.1f;
    attn_optim *opt = attn_optim_new(params, &cfg);
    attn_ctx *ctx = attn_ctx_new(1);
    float xs[8], ys[8];
    for (int i = 0; i < 8; i++) {
        xs[i] = (float)i / 8.0f;
        ys[i] = 2.0f * xs[i] - 1.0f;
    }
    float loss_value = INFINITY;
    for (int step = 0; step < 300 && opt && ctx; step++) {
        attn_params_zero_grad(params);
        attn_tensor *x = attn_tensor_from(ctx, 2, (int64_t[]){8, 1}, xs);
        attn_tensor *y = attn_tensor_from(ctx, 2, (int64_t[]){8, 1}, ys);
        attn_tensor *loss = attn_mse_loss(ctx, attn_linear_forward(ctx, &fc, x), y);
        if (!loss || attn_backward(ctx, loss) != ATTN_OK || attn_optim_step(opt) != ATTN_OK) {
            fprintf(stderr, "step %d: %s\n", step, attn_last_error());
            return 1;
        }
        loss_value = loss->data[0];
        attn_ctx_reset(ctx);
    }
    printf("fit y = %.3f x + %.3f (true 2x - 1), final loss %.2e\n", fc.weight->data[0], fc.bias->data[0], loss_value);
    float scores[3] = {1.0f, 2.0f, 3.0f};
    attn_tensor *w = attn_softmax(ctx, attn_tensor_from(ctx, 1, (int64_t[]){3}, scores), 0);
    if (w) printf("softmax(1, 2, 3) = %.4f %.4f %.4f\n", w->data[0], w->data[1], w->data[2]);
    int ok = w && loss_value < 1e-4f;
    attn_ctx_free(ctx);
    attn_optim_free(opt);
    attn_params_free(params);
    return ok ? 0 : 1;
}
