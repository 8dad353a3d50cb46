/* A user's program that links the static libraries and defines, for its own use, names the
 * libraries once used for private functions (transformer_init in libattn.a, plot_text in
 * libattn_plot.a: "multiple definition" at link time, or worse, the library calling the user's
 * function). Built by CMake as test_static_link_user_names: that it links at all is the first
 * check; then the library's own code must run (a model initialised, a picture written) without
 * calling the user's functions. */
#include "attn.h"
#ifdef ATTN_TEST_PLOT
#include "attn_plot.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int user_calls; /* how often the library reached the user's functions */

/* The user's own functions, with signatures of the user's choosing. */
int transformer_init(const char *what)
{
    user_calls++;
    return what ? (int)strlen(what) : 0;
}

void plot_text(const char *text)
{
    user_calls++;
    fputs(text, stderr);
}

static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        failures++;
        fprintf(stderr, "FAIL %s (%s)\n", what, attn_last_error());
    }
}

int main(void)
{
    attn_params *params = attn_params_new();
    attn_rng rng;
    attn_rng_seed(&rng, 1);
    const attn_seq2seq_config cfg = {.kind = ATTN_SEQ2SEQ_TRANSFORMER,
                                     .src_vocab = 11,
                                     .tgt_vocab = 13,
                                     .d_model = 8,
                                     .num_heads = 2,
                                     .dim_feedforward = 16,
                                     .enc_layers = 1,
                                     .dec_layers = 1,
                                     .max_len = 16,
                                     .pad_id = 0,
                                     .bos_id = 1,
                                     .eos_id = 2};
    attn_seq2seq model;
    check(attn_seq2seq_init(&model, params, &cfg, &rng) == ATTN_OK, "attn_seq2seq_init (Transformer)");
    check(attn_params_count(params) > 0, "the Transformer has parameters");
    attn_seq2seq_free(&model);
    attn_params_free(params);
#ifdef ATTN_TEST_PLOT
    char path[] = "/tmp/attn_user_names_XXXXXX.svg";
    int fd = mkstemps(path, 4);
    check(fd >= 0, "a temporary file");
    if (fd >= 0) close(fd);
    const float weights[6] = {0.1f, 0.2f, 0.7f, 0.5f, 0.25f, 0.25f};
    const attn_heatmap_opts opts = {.title = "user names"};
    check(attn_plot_heatmap(path, weights, 2, 3, &opts) == ATTN_OK, "attn_plot_heatmap");
    FILE *f = fopen(path, "rb");
    char head[64] = {0};
    check(f && fread(head, 1, sizeof head - 1, f) > 0 && strstr(head, "<?xml") != NULL, "the heatmap is an SVG file");
    if (f) fclose(f);
    remove(path);
#endif
    check(user_calls == 0, "the libraries never call the user's transformer_init or plot_text");
    printf("static link with the user's transformer_init and plot_text: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
