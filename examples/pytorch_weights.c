/* PyTorch modules run in C from their weights: nn.MultiheadAttention, nn.TransformerEncoderLayer
 * and a 2-layer nn.TransformerEncoder, each saved by torch as a state_dict and converted to
 * safetensors (torch 1.13 has no safetensors package; the converter needs only numpy):
 *     torch.save(mha.state_dict(), "mha.pt")
 *     python3 tools/safetensors_convert.py mha.pt sd_mha.safetensors
 * The modules are built without random init (rng NULL) and loaded strictly; each output is
 * compared with PyTorch's on the same input (sd_io.safetensors). The files of
 * tests/golden/make_golden_state_dict.py:
 *     cc pytorch_weights.c $(pkg-config --cflags --libs attn) -lm
 *     ./pytorch_weights tests/golden      (exit 0 when every output is within 1e-5)
 * With a second folder it also writes the modules back (attn_params_save) as mha.safetensors
 * and encoder_layer.safetensors, files torch's load_state_dict takes again (through
 * tools/safetensors_convert.py on torch 1.13): tests/state_dict_roundtrip.py checks that. */
#include <attn.h>

#include <math.h>
#include <stdio.h>

#define TOLERANCE 1e-5f /* absolute, on outputs of order 1 */

enum {
    EMBED = 16,
    HEADS = 4,
    FFN = 32
};

/* Largest |a - b| over n values. */
static float max_diff(const float *a, const float *b, int64_t n)
{
    float worst = 0.0f;
    for (int64_t i = 0; i < n; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
    return worst;
}

/* Prints how far out is from PyTorch's tensor `name`; true when within the tolerance. */
static bool compare(const char *what, const attn_tensor *out, const attn_st_file *io, const char *name)
{
    attn_tensor *ref = attn_st_load(io, name, NULL);
    if (!out || !ref || ref->numel != out->numel) {
        fprintf(stderr, "%s: %s\n", what, out && ref ? "shapes differ" : attn_last_error());
        attn_tensor_free(ref);
        return false;
    }
    float d = max_diff(out->data, ref->data, out->numel);
    printf("%-30s max |C - PyTorch| = %.2e\n", what, (double)d);
    attn_tensor_free(ref);
    return d <= TOLERANCE;
}

/* "<dir>/<file>" into buf. */
static const char *path_of(char *buf, size_t len, const char *dir, const char *file)
{
    snprintf(buf, len, "%s/%s", dir, file);
    return buf;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "tests/golden";
    char path[4096];
    attn_st_file *io = attn_st_open(path_of(path, sizeof path, dir, "sd_io.safetensors"));
    attn_ctx *ctx = attn_ctx_new(0);
    attn_params *mha_p = attn_params_new(), *layer_p = attn_params_new();
    attn_params *enc_p[2] = {attn_params_new(), attn_params_new()};
    if (!io || !ctx || !mha_p || !layer_p || !enc_p[0] || !enc_p[1]) {
        fprintf(stderr, "%s\n", attn_last_error());
        return 1;
    }
    attn_ctx_set_grad_enabled(ctx, false);       /* inference: no tape */
    attn_ctx_set_training(ctx, false);           /* eval(): no dropout */
    attn_tensor *x = attn_st_load(io, "x", ctx); /* (2, 5, 16) */

    /* nn.MultiheadAttention(16, 4, batch_first=True): names in_proj_weight, ... */
    attn_mha_layer mha;
    bool ok = x && attn_mha_init(&mha, mha_p, "", EMBED, HEADS, 0, 0, true, 0.0f, NULL) == ATTN_OK &&
              attn_params_load(mha_p, path_of(path, sizeof path, dir, "sd_mha.safetensors"), NULL, true) == ATTN_OK;
    attn_tensor *weights = NULL;
    attn_mha_opts opts = {.mask.causal = true, .average_weights = true};
    attn_tensor *mha_out = ok ? attn_mha_forward(ctx, &mha, x, x, x, &opts, &weights) : NULL;
    ok = compare("MultiheadAttention output", mha_out, io, "mha_out") &&
         compare("MultiheadAttention weights", weights, io, "mha_weights");

    /* nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True): post-LN, ReLU */
    attn_transformer_config post = {
        .d_model = EMBED, .num_heads = HEADS, .dim_feedforward = FFN, .dropout = 0.1f, .ffn_dropout = true};
    attn_encoder_layer layer;
    ok = ok && attn_encoder_layer_init(&layer, layer_p, "", &post, NULL) == ATTN_OK &&
         attn_params_load(layer_p, path_of(path, sizeof path, dir, "sd_encoder_layer.safetensors"), NULL, true) ==
             ATTN_OK &&
         compare("TransformerEncoderLayer", attn_encoder_layer_forward(ctx, &layer, x, NULL, NULL), io, "layer_out");

    /* nn.TransformerEncoder, 2 pre-LN GELU layers: each loaded from its prefix "layers.<i>." */
    attn_transformer_config pre = post;
    pre.norm_first = true, pre.gelu = true;
    attn_encoder_layer enc[2];
    attn_tensor *h = x;
    for (int i = 0; ok && i < 2; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "layers.%d.", i);
        ok = attn_encoder_layer_init(&enc[i], enc_p[i], "", &pre, NULL) == ATTN_OK &&
             attn_params_load(enc_p[i], path_of(path, sizeof path, dir, "sd_encoder.safetensors"), prefix, true) ==
                 ATTN_OK;
        h = ok ? attn_encoder_layer_forward(ctx, &enc[i], h, NULL, NULL) : NULL;
    }
    ok = ok && compare("TransformerEncoder (2 layers)", h, io, "encoder_out");

    if (ok && argc > 2)
        ok = attn_params_save(mha_p, path_of(path, sizeof path, argv[2], "mha.safetensors"), NULL) == ATTN_OK &&
             attn_params_save(layer_p, path_of(path, sizeof path, argv[2], "encoder_layer.safetensors"), NULL) ==
                 ATTN_OK;
    if (!ok && attn_last_status() != ATTN_OK) fprintf(stderr, "%s\n", attn_last_error());
    attn_params_free(mha_p), attn_params_free(layer_p);
    attn_params_free(enc_p[0]), attn_params_free(enc_p[1]);
    attn_ctx_free(ctx);
    attn_st_close(io);
    return ok ? 0 : 1;
}
