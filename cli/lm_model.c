/* attn lm: what its actions and files share: the model config as checkpoint metadata, its
 * ranges, the options a resumed run must keep, and the model built from options or loaded from a
 * checkpoint with its tokenizer. */
#include "lm.h"

#include <stddef.h>

/* ---- model config in checkpoints ---- */

_Static_assert(sizeof(attn_lm_style) == sizeof(int), "enums are read as int");
#define C(field) offsetof(attn_lm_config, field)
static const config_field config_fields[] = {
    {"style", CONFIG_INT, C(style), 0, ATTN_LM_LLAMA},
    {"vocab_size", CONFIG_I64, C(vocab_size), 257, 257 + ATTN_BPE_MAX_MERGES},
    {"context", CONFIG_I64, C(context), 2, 65536},
    {"d_model", CONFIG_I64, C(d_model), 2, 8192},
    {"num_layers", CONFIG_I64, C(num_layers), 1, 256},
    {"num_heads", CONFIG_I64, C(num_heads), 1, 256},
    {"num_kv_heads", CONFIG_I64, C(num_kv_heads), 1, 256},
    {"ffn_hidden", CONFIG_I64, C(ffn_hidden), 1, 262144},
    {"rope_base", CONFIG_F32, C(rope_base), 0, 100000000},
    {"untied", CONFIG_BOOL, C(untied), 0, 1},
    {"rope_interleaved", CONFIG_BOOL, C(rope_interleaved), 0, 1, .optional = true}, /* imported from llama2.c */
    {"norm_eps", CONFIG_F32, C(norm_eps), 0, 1, .optional = true, .absent = 1e-5f}, /* as attn_lm_init's */
};
#undef C
#define N_CONFIG_FIELDS (int)(sizeof config_fields / sizeof config_fields[0])
const config_schema lm_schema = {"lm", "attn-lm", "language model", config_fields, N_CONFIG_FIELDS, " (--context)"};

int lm_config_fits(const attn_lm_config *c, const char *path)
{
    for (int i = 0; i < N_CONFIG_FIELDS; i++) {
        const double v = config_value(&config_fields[i], c);
        if (v < (double)config_fields[i].min || v > (double)config_fields[i].max)
            return cli_fail(CLI_ERR_DATA, "lm", "%s: %s %.9g is past what attn lm keeps, [%ld, %ld]", path,
                            config_fields[i].key, v, config_fields[i].min, config_fields[i].max);
    }
    return CLI_OK;
}

const run_option *lm_run_options(const lm_options *o, int *n)
{
    static _Thread_local run_option opts[8];
    opts[0] = (run_option){"--seed", (double)o->train.seed};
    opts[1] = (run_option){"--lr", o->train.lr};
    opts[2] = (run_option){"--dropout", o->dropout};
    opts[3] = (run_option){"--warmup", (double)o->warmup};
    opts[4] = (run_option){"--weight-decay", o->weight_decay};
    opts[5] = (run_option){"--clip", o->clip};
    opts[6] = (run_option){"--matmul-precision", (double)o->train.matmul_precision};
    opts[7] = (run_option){"--epochs", (double)o->train.epochs}; /* the cosine's length */
    *n = 8;
    return opts;
}

/* The model of cfg; from: the checkpoint that sizes it (params_for), NULL for a new one */
int lm_build_model(lm_run *run, const attn_lm_config *cfg, const attn_st_file *from, const char *path)
{
    attn_rng rng;
    attn_rng_seed(&rng, (uint64_t)run->opt->train.seed);
    run->params = params_for(from);
    if (!run->params || attn_lm_init(&run->model, run->params, cfg, &rng) != ATTN_OK)
        return model_build_failed("lm", from, path);
    run->model_ready = true;
    return CLI_OK;
}

/* The model config and tokenizer of checkpoint f (path), the model built and loaded from it */
static int model_from(lm_run *run, attn_st_file *f, const char *path)
{
    attn_lm_config c = {0};
    int code = config_read(&lm_schema, f, path, &c);
    if (code == CLI_OK) code = lm_tok_from_checkpoint(&run->tok, f, path, c.vocab_size);
    if (code == CLI_OK) code = lm_build_model(run, &c, f, path);
    if (code == CLI_OK && attn_checkpoint_load_file(f, run->params, NULL, true) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    return code;
}

/* eval, generate, explain, export, train --init-from: the saved model and its tokenizer, from one
 * reading of the checkpoint */
int lm_load_model(lm_run *run, const char *path)
{
    attn_st_file *f = checkpoint_open("lm", path, " (train a model first: attn lm train)");
    if (!f) return CLI_ERR_DATA;
    int code = model_from(run, f, path);
    attn_st_close(f);
    return code;
}
