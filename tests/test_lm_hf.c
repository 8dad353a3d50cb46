/* Hugging Face's layouts (attn_lm_load_hf, attn_lm_save_hf) against folders laid out from the
 * transformers library's GPT2LMHeadModel and LlamaForCausalLM (tests/golden/make_golden_hf.py:
 * Conv1D weights (in, out), old causal-mask buffers, GPT2Model's bare names, GQA, rotate_half,
 * tied and untied, rope_theta 500000, eps 1e-6):
 *   - loaded, the logits, the loss and every parameter's gradient of torch's composition, within
 *     test_golden_lm's bound (one side);
 *   - saved and loaded again: every parameter bit for bit, and every tensor of the saved
 *     model.safetensors bit for bit the golden folder's tensor of that name (a round trip);
 *   - a model of rotary pairs saved (its q and k rows reordered into HF's halves) and loaded (now
 *     rotating halves): the same logits up to the head sums' order;
 *   - refusals naming what, the registry as it was: config fields attn does not implement (another
 *     model_type, rope_scaling, hidden_act, attention_bias, a bias-free GPT-2 scaling, a cross-
 *     attention GPT-2), a config that claims more parameters than the file holds, a missing tensor,
 *     an unknown tensor, a tensor of another shape, an integer tensor, a NaN weight, a missing folder. */
#include "testkit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static double rounds_of(const attn_lm_config *c, int64_t n)
{
    return 2.0 * (double)c->num_layers * (3.0 * c->d_model + (double)c->ffn_hidden + 2.0 * n) + 2.0 * c->d_model + n;
}

static void test_case(const char *name)
{
    char folder[96], golden[96];
    snprintf(folder, sizeof folder, "tests/golden/hf_%s", name);
    snprintf(golden, sizeof golden, "hf_%s", name);
    attn_st_file *g = tk_golden(golden);
    attn_params *p = attn_params_new();
    attn_lm m;
    attn_status st = attn_lm_load_hf(&m, p, folder);
    TK_CHECK(st == ATTN_OK, "%s: load: %s", name, attn_last_error());
    int64_t n = 0, nt = 0;
    int64_t *ids = g ? attn_st_load_i64(g, "ids", &n) : NULL, *targets = g ? attn_st_load_i64(g, "targets", &nt) : NULL;
    if (st != ATTN_OK || !ids || !targets) {
        free(ids), free(targets);
        attn_params_free(p);
        attn_st_close(g);
        return;
    }
    const tk_tol tol = tk_tol_of(1, rounds_of(&m.cfg, n), 4, 8);
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *logits = attn_lm_forward(ctx, &m, ids, (int64_t[]){0, n}, 1);
    attn_tensor *loss = logits ? attn_cross_entropy(ctx, logits, targets, -100, 0.0f) : NULL;
    TK_CHECK(loss && attn_backward(ctx, loss) == ATTN_OK, "%s: forward and backward: %s", name, attn_last_error());
    if (loss) {
        tk_golden_close_scaled(g, "logits", logits->data, logits->numel, tol);
        tk_golden_close_scaled(g, "loss", loss->data, 1, tol);
        for (size_t i = 0; i < attn_params_count(p); i++) {
            char key[160];
            snprintf(key, sizeof key, "grad.%s", attn_params_name(p, i));
            const attn_tensor *t = attn_params_at(p, i);
            TK_CHECK(attn_st_find(g, key) != NULL, "%s: %s in the golden file", name, key);
            if (attn_st_find(g, key)) tk_golden_close_scaled(g, key, t->grad, t->numel, tol);
        }
    }
    attn_ctx_free(ctx);

    /* saved and loaded again */
    char out[128], weights[160], theirs[160];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    mkdir(out, 0700);
    TK_CHECK(attn_lm_save_hf(&m, out) == ATTN_OK, "%s: save: %s", name, attn_last_error());
    attn_params *q = attn_params_new();
    attn_lm back;
    TK_CHECK(attn_lm_load_hf(&back, q, out) == ATTN_OK, "%s: load what was saved: %s", name, attn_last_error());
    bool same = attn_params_count(q) == attn_params_count(p);
    for (size_t i = 0; same && i < attn_params_count(p); i++) {
        const attn_tensor *x = attn_params_at(p, i), *y = attn_params_get(q, attn_params_name(p, i));
        same = y && y->numel == x->numel && !memcmp(x->data, y->data, sizeof(float) * (size_t)x->numel);
    }
    TK_CHECK(same, "%s: every parameter back bit for bit", name);
    snprintf(weights, sizeof weights, "%s/model.safetensors", out);
    snprintf(theirs, sizeof theirs, "%s/model.safetensors", folder);
    attn_st_file *a = attn_st_open(weights), *b = attn_st_open(theirs);
    int matched = 0, differ = 0;
    for (size_t i = 0; a && b && i < attn_st_count(a); i++) {
        const attn_st_tensor *x = attn_st_at(a, i);
        const attn_st_tensor *y = attn_st_find(b, x->name);
        if (!y && !strncmp(x->name, "transformer.", 12)) y = attn_st_find(b, x->name + 12);
        if (!y) {
            differ++;
            continue;
        }
        matched++;
        differ += x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes) || x->ndim != y->ndim ||
                  memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim);
    }
    TK_CHECK(a && b && matched == (int)attn_params_count(p) && differ == 0,
             "%s: the saved file's %d tensors are the golden folder's, bit for bit and shape for shape (%d differ)",
             name, matched, differ);
    attn_st_close(a), attn_st_close(b);
    char config[160];
    snprintf(config, sizeof config, "%s/config.json", out);
    remove(weights), remove(config), rmdir(out);
    attn_lm_free(&back), attn_params_free(q);
    free(ids), free(targets);
    attn_lm_free(&m);
    attn_params_free(p);
    attn_st_close(g);
}

/* A model of rotary pairs saved as HF's halves and loaded: the same logits */
static void test_pairs(void)
{
    attn_lm_config c = {.style = ATTN_LM_LLAMA,
                        .vocab_size = 40,
                        .context = 12,
                        .d_model = 24,
                        .num_layers = 2,
                        .num_heads = 4,
                        .num_kv_heads = 2,
                        .rope_interleaved = true,
                        .untied = true};
    attn_rng rng;
    attn_rng_seed(&rng, 9);
    attn_params *p = attn_params_new(), *q = attn_params_new();
    attn_lm m, back;
    TK_CHECK(attn_lm_init(&m, p, &c, &rng) == ATTN_OK, "init: %s", attn_last_error());
    for (size_t i = 0; i < attn_params_count(p); i++) attn_tensor_fill_normal(attn_params_at(p, i), &rng, 0.0f, 0.3f);
    char out[128];
    snprintf(out, sizeof out, "%s/pairs", dir);
    mkdir(out, 0700);
    TK_CHECK(attn_lm_save_hf(&m, out) == ATTN_OK, "pairs: save: %s", attn_last_error());
    TK_CHECK(attn_lm_load_hf(&back, q, out) == ATTN_OK && !back.cfg.rope_interleaved, "pairs: load as halves: %s",
             attn_last_error());
    const int64_t ids[10] = {1, 5, 9, 39, 0, 17, 17, 2, 30, 8};
    attn_ctx *ctx = attn_ctx_new(0);
    attn_tensor *x = attn_lm_forward(ctx, &m, ids, (int64_t[]){0, 10}, 1),
                *y = attn_lm_forward(ctx, &back, ids, (int64_t[]){0, 10}, 1);
    TK_CHECK(x && y, "forward: %s", attn_last_error());
    if (x && y)
        tk_close_scaled("pairs saved as halves: logits", y->data, x->data, x->numel,
                        tk_tol_of(2, rounds_of(&c, 10), 4, 8));
    attn_ctx_free(ctx);
    char path[160];
    snprintf(path, sizeof path, "%s/model.safetensors", out), remove(path);
    snprintf(path, sizeof path, "%s/config.json", out), remove(path);
    rmdir(out);
    attn_lm_free(&m), attn_lm_free(&back);
    attn_params_free(p), attn_params_free(q);
}

/* A copy of golden folder `from` in dir/bad: config.json with `find` replaced by `put` (NULL: as
 * it is), model.safetensors as it is or rewritten by edit (NULL: copied) */
static void bad_copy(const char *from, const char *find, const char *put,
                     void (*edit)(attn_st_writer *, attn_st_file *))
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s/bad && mkdir %s/bad && cp tests/golden/hf_%s/* %s/bad/", dir, dir, from, dir);
    TK_CHECK(system(cmd) == 0, "copy %s", from);
    char path[160];
    snprintf(path, sizeof path, "%s/bad/config.json", dir);
    char *text = tk_read_text(path);
    if (text && find) {
        char *at = strstr(text, find);
        TK_CHECK(at != NULL, "config of %s holds %s", from, find);
        if (at) {
            FILE *f = fopen(path, "w");
            fprintf(f, "%.*s%s%s", (int)(at - text), text, put, at + strlen(find));
            fclose(f);
        }
    }
    free(text);
    if (edit) {
        snprintf(path, sizeof path, "%s/bad/model.safetensors", dir);
        attn_st_file *f = attn_st_open(path);
        attn_st_writer *w = attn_st_writer_new();
        edit(w, f);
        attn_st_close(f);
        TK_CHECK(attn_st_writer_save(w, path) == ATTN_OK, "rewrite: %s", attn_last_error());
        attn_st_writer_free(w);
    }
}

static const char *edit_skip, *edit_rename, *edit_nan, *edit_int;
static bool edit_add;

static void editor(attn_st_writer *w, attn_st_file *f)
{
    if (edit_add)
        attn_st_writer_add(w, "model.layers.0.mlp.extra.weight", ATTN_DTYPE_F32, 1, (int64_t[]){1}, (float[]){1});
    for (size_t i = 0; f && i < attn_st_count(f); i++) {
        const attn_st_tensor *t = attn_st_at(f, i);
        if (edit_skip && !strcmp(t->name, edit_skip)) continue;
        const char *name = edit_rename && !strcmp(t->name, edit_rename) ? "model.layers.0.mlp.extra.weight" : t->name;
        if (edit_int && !strcmp(t->name, edit_int)) { /* the same shape, as integers */
            int64_t *v = calloc((size_t)t->numel, sizeof *v);
            attn_st_writer_add(w, name, ATTN_DTYPE_I64, t->ndim, t->shape, v);
            free(v);
        } else if (edit_nan && !strcmp(t->name, edit_nan)) {
            unsigned char *v = malloc(t->nbytes);
            const unsigned char nan_le[4] = {0, 0, 0xc0, 0x7f}; /* the file's bytes: little-endian float32 */
            memcpy(v, t->data, t->nbytes);
            memcpy(v + 3 * 4, nan_le, sizeof nan_le);
            attn_st_writer_add(w, name, t->dtype, t->ndim, t->shape, v);
            free(v);
        } else
            attn_st_writer_add(w, name, t->dtype, t->ndim, t->shape, t->data);
    }
}

static void expect_refused(const char *what, attn_status want, const char *needle)
{
    char path[128];
    snprintf(path, sizeof path, "%s/bad", dir);
    attn_params *p = attn_params_new();
    attn_params_add(p, "kept", 1, (int64_t[]){2});
    attn_lm m;
    attn_status st = attn_lm_load_hf(&m, p, path);
    TK_CHECK(st == want && strstr(attn_last_error(), needle) && attn_params_count(p) == 1,
             "%s: status %d (want %d), \"%s\" (want \"%s\"), the registry as it was", what, (int)st, (int)want,
             attn_last_error(), needle);
    attn_params_free(p);
}

static void test_refusals(void)
{
    static const struct {
        const char *from, *find, *put, *needle;
    } configs[] = {
        {"llama", "\"model_type\": \"llama\"", "\"model_type\": \"mistral\"", "model_type"},
        {"llama", "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}",
         "rope_scaling"},
        {"llama", "\"hidden_act\": \"silu\"", "\"hidden_act\": \"gelu\"", "hidden_act"},
        {"llama", "\"attention_bias\": false", "\"attention_bias\": true", "attention_bias"},
        {"llama", "\"vocab_size\": 43", "\"vocab_size\": 4300000", "parameters"},
        {"llama", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": -2", "num_hidden_layers"},
        {"llama", "\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": \"small\"", "rms_norm_eps"},
        {"gpt2", "\"scale_attn_weights\": true", "\"scale_attn_weights\": false", "scale_attn_weights"},
        {"gpt2", "\"activation_function\": \"gelu_new\"", "\"activation_function\": \"relu\"", "activation_function"},
        {"gpt2", "\"n_embd\": 32", "\"n_embd\": 36", "parameters"},
        {"llama", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 1", "k_proj.weight is"},
    };
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        bad_copy(configs[i].from, configs[i].find, configs[i].put, NULL);
        expect_refused(configs[i].put, strstr(configs[i].needle, " is") ? ATTN_ERR_SHAPE : ATTN_ERR_FORMAT,
                       configs[i].needle);
    }
    edit_skip = "model.layers.1.mlp.up_proj.weight";
    bad_copy("llama", NULL, NULL, editor);
    expect_refused("a tensor too few", ATTN_ERR_FORMAT, "holds");
    edit_skip = NULL, edit_rename = "lm_head.weight";
    bad_copy("llama", NULL, NULL, editor);
    expect_refused("a missing tensor (another in its place)", ATTN_ERR_FORMAT, "no tensor lm_head.weight");
    edit_rename = NULL, edit_add = true;
    bad_copy("llama", NULL, NULL, editor);
    expect_refused("an unknown tensor", ATTN_ERR_FORMAT, "model.layers.0.mlp.extra.weight is no parameter");
    edit_add = false;
    edit_rename = NULL, edit_nan = "model.layers.0.self_attn.k_proj.weight";
    bad_copy("llama", NULL, NULL, editor);
    expect_refused("a NaN weight", ATTN_ERR_NUMERIC, "NaN");
    edit_nan = NULL, edit_int = "model.norm.weight";
    bad_copy("llama", NULL, NULL, editor);
    expect_refused("an integer weight", ATTN_ERR_FORMAT, "model.norm.weight is I64");
    edit_int = NULL;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s/bad", dir);
    TK_CHECK(system(cmd) == 0, "clean");
    expect_refused("a missing folder", ATTN_ERR_IO, "config.json");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/attn-hf-XXXXXX");
    if (!mkdtemp(dir)) return perror("mkdtemp"), 1;
    static const char *const cases[] = {"gpt2", "gpt2_bare", "llama", "llama_tied"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) test_case(cases[i]);
    test_pairs();
    test_refusals();
    TK_CHECK(rmdir(dir) == 0, "the test left files in %s", dir);
    return tk_finish("test_lm_hf");
}
