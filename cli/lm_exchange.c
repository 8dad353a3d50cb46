/* attn lm export and import: the model and its tokenizer to and from other programs' files
 * (llama2.c's checkpoint and tokenizer.bin, llm.c's checkpoint and gpt2_tokenizer.bin, Hugging
 * Face's folders; the formats are the library's, attn.h and attn_data.h). An export writes the
 * tokenizer first and the model second, after every refusal that can be known before writing. */
#include "lm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A tokenizer file written for a model that then failed: removed, when it is a regular file (a
 * device or FIFO keeps what it took) */
static void remove_written(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) remove(path);
}

/* A gpt2-style model and its tokenizer as llm.c's files (attn's ids as they are) */
static int export_llmc(lm_run *run, const lm_options *o)
{
    if (run->model.cfg.style != ATTN_LM_GPT2 || !run->tok.bpe)
        return cli_fail(CLI_ERR_DATA, "lm", "%s: a llama-style model; llm.c runs gpt2-style ones (--format llmc)",
                        o->train.checkpoint);
    bool tokenizer_written = false;
    int code = CLI_OK;
    if (o->tokenizer_out) {
        if (attn_bpe_save_llmc(run->tok.bpe, o->tokenizer_out) == ATTN_OK)
            tokenizer_written = true;
        else
            code = cli_fail(CLI_ERR_DATA, "lm", "export: %s", attn_last_error());
    }
    if (code == CLI_OK && attn_lm_save_llmc(&run->model, o->model_out) != ATTN_OK) {
        code = cli_fail(CLI_ERR_DATA, "lm", "export: %s", attn_last_error());
        if (tokenizer_written) remove_written(o->tokenizer_out);
    }
    if (code == CLI_OK)
        printf("%s: llm.c version 3, %lld ids%s%s\n", o->model_out, (long long)lm_tok_size(&run->tok),
               o->tokenizer_out ? "; tokenizer " : "", o->tokenizer_out ? o->tokenizer_out : "");
    return code;
}

/* The model and its tokenizer as llama2.c's files, the ids in llama2.c's order for both (attn's BPE
 * laid out for llama2.c, or the imported tokenizer as it was), or as llm.c's. What the other
 * program cannot hold is refused before either file is written; the tokenizer is written first,
 * and removed (when a regular file) if the model then fails. */
int lm_export(lm_run *run, const lm_options *o)
{
    int code = lm_load_model(run, o->train.checkpoint);
    if (code != CLI_OK) return code;
    if (o->format == LM_LLMC) return export_llmc(run, o);
    if (o->format == LM_HF) {
        if (cli_make_dir("lm", "--hf-out", o->hf_out) != CLI_OK) return CLI_ERR_DATA;
        if (attn_lm_save_hf(&run->model, o->hf_out) != ATTN_OK)
            return cli_fail(CLI_ERR_DATA, "lm", "export: %s", attn_last_error());
        printf("%s: config.json and model.safetensors (%s), %lld ids; the tokenizer stays in %s\n", o->hf_out,
               run->model.cfg.style == ATTN_LM_GPT2 ? "GPT2LMHeadModel" : "LlamaForCausalLM",
               (long long)lm_tok_size(&run->tok), o->train.checkpoint);
        return CLI_OK;
    }
    const attn_lm_config *c = &run->model.cfg;
    if (c->style != ATTN_LM_LLAMA || c->rope_base != 10000.0f)
        return cli_fail(CLI_ERR_DATA, "lm", "%s: %s; llama2.c runs llama-style models of --rope-base 10000%s",
                        o->train.checkpoint, c->style != ATTN_LM_LLAMA ? "a gpt2-style model" : "another rotary base",
                        c->style != ATTN_LM_LLAMA ? " (--format llmc writes llm.c's files)" : "");
    const int64_t V = lm_tok_size(&run->tok);
    int64_t *order = malloc(sizeof *order * (size_t)V);
    if (!order) return cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    if (lm_tok_save_llama2c(&run->tok, NULL, order) != CLI_OK) /* the order alone: refusals before writing */
        code = cli_fail(CLI_ERR_DATA, "lm", "export: %s", attn_last_error());
    bool tokenizer_written = false;
    if (code == CLI_OK && o->tokenizer_out) {
        if (lm_tok_save_llama2c(&run->tok, o->tokenizer_out, order) == CLI_OK)
            tokenizer_written = true;
        else
            code = cli_fail(CLI_ERR_DATA, "lm", "export: %s", attn_last_error());
    }
    if (code == CLI_OK && attn_lm_save_llama2c(&run->model, o->model_out, o->format, order) != ATTN_OK) {
        code = cli_fail(CLI_ERR_DATA, "lm", "export: %s", attn_last_error());
        if (tokenizer_written) remove_written(o->tokenizer_out);
    }
    free(order);
    if (code == CLI_OK)
        printf("%s: llama2.c version %d, %lld ids%s%s\n", o->model_out, o->format, (long long)V,
               o->tokenizer_out ? "; tokenizer " : "", o->tokenizer_out ? o->tokenizer_out : "");
    return code;
}

/* A llama2.c or Hugging Face llama model and a tokenizer.bin as an attn checkpoint (the model's
 * config, its tokenizer) */
int lm_import(lm_run *run, const lm_options *o)
{
    const char *ck = o->train.checkpoint;
    if (checkpoint_lock_take("lm", ck, &run->lock) != CLI_OK) return CLI_ERR_DATA;
    if (!(run->params = attn_params_new())) return cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    if ((o->hf_in ? attn_lm_load_hf(&run->model, run->params, o->hf_in)
                  : attn_lm_load_llama2c(&run->model, run->params, o->model_in, NULL)) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    run->model_ready = true;
    if (run->model.cfg.style != ATTN_LM_LLAMA)
        return cli_fail(CLI_ERR_DATA, "lm",
                        "%s: a GPT2LMHeadModel; attn imports llama models alone (their tokenizer as llama2.c's "
                        "tokenizer.bin), as it does not read GPT-2's vocab.json and merges.txt",
                        o->hf_in);
    int code = lm_config_fits(&run->model.cfg, o->hf_in ? o->hf_in : o->model_in); /* a checkpoint holds it */
    if (code == CLI_OK) code = lm_tok_set_llama2c(&run->tok, o->tokenizer_in, run->model.cfg.vocab_size);
    if (code != CLI_OK) return code;
    int n_kv;
    const char *const *cfg = config_kv(&lm_schema, &run->model.cfg, &n_kv);
    const char *kv[2 * (CONFIG_MAX_FIELDS + 2)];
    memcpy(kv, cfg, sizeof *kv * (size_t)(2 * n_kv));
    kv[2 * n_kv] = lm_tok_key(&run->tok), kv[2 * n_kv + 1] = run->tok.text;
    if (attn_checkpoint_save(ck, run->params, NULL, kv, n_kv + 1) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "lm", "%s", attn_last_error());
    const attn_lm_config *c = &run->model.cfg;
    printf("%s: llama, %lld layers, d %lld, %lld heads (%lld key/value), ffn %lld, context %lld, %lld ids%s, "
           "%lld parameters\n",
           ck, (long long)c->num_layers, (long long)c->d_model, (long long)c->num_heads, (long long)c->num_kv_heads,
           (long long)c->ffn_hidden, (long long)c->context, (long long)c->vocab_size, c->untied ? ", untied" : "",
           (long long)attn_params_numel(run->params));
    return CLI_OK;
}
