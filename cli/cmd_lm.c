/* attn lm train|eval|generate|explain: a decoder-only language model (GPT-2 or Llama style) and
 * the byte-level BPE tokenizer it is trained with, saved together in one checkpoint. */
#include "lm.h"
#include "dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const style_names[] = {"gpt2", "llama", NULL};
static const char *const action_names[] = {"train", "eval", "generate", "explain", "export", "import", NULL};
static const char *const format_names[] = {"llama2c", "llama2c-v1", "llmc", "hf", NULL}; /* lm_format */
enum {
    TRAIN,
    EVAL,
    GENERATE,
    EXPLAIN,
    EXPORT,
    IMPORT
};

#define O(kind, field) CLI_OPT_AT(lm_options, kind, field)
static const cli_option options[] = {
    {"--data", "DIR", O(CLI_IN_DIR, data), 0, 0, NULL, NULL,
     "an aclImdb folder (its reviews: train, and test to validate) or a folder of .txt files (each a document; "
     "the last 5% validate); default the shipped aclImdb_mini",
     "train eval"},
    {"--text", "FILE", O(CLI_IN_FILE, text), 0, 0, NULL, NULL,
     "a text file instead, its paragraphs (blocks between empty lines) the documents", "train eval"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "model (train; the others read it from the checkpoint):"},
    {"--style", NULL, O(CLI_CHOICE, style), 0, 0, style_names, "gpt2",
     "gpt2 (learned positions, LayerNorm, GELU, tied output) or llama (RoPE, RMSNorm, SwiGLU, GQA)", "train"},
    {"--vocab", "N", O(CLI_LONG, vocab), 257, 257 + ATTN_BPE_MAX_MERGES, NULL, "4096",
     "tokenizer size: 256 bytes, the merges learnt from the training text, <|endoftext|>", "train"},
    {"--context", "N", O(CLI_LONG, train.max_len), 2, 65536, NULL, "128", "tokens a sequence holds", "train"},
    {"--d-model", "N", O(CLI_LONG, d_model), 2, 8192, NULL, "192", "model width", "train"},
    {"--layers", "N", O(CLI_LONG, layers), 1, 256, NULL, "4", "Transformer blocks", "train"},
    {"--heads", "N", O(CLI_LONG, heads), 1, 256, NULL, "6", "attention heads (must divide --d-model)", "train"},
    {"--kv-heads", "N", O(CLI_LONG, kv_heads), 1, 256, NULL, NULL,
     "llama: key/value heads, dividing --heads (grouped-query attention; default --heads)", "train"},
    {"--ffn", "N", O(CLI_LONG, ffn), 1, 262144, NULL, NULL,
     "feed-forward width (default gpt2 4 x --d-model; llama 2/3 of that, rounded up to 32)", "train"},
    {"--rope-base", "B", O(CLI_LONG, rope_base), 2, 100000000, NULL, "10000", "llama: the rotary positions' base",
     "train"},
    {"--untied", NULL, O(CLI_FLAG, untied), 0, 0, NULL, NULL, "llama: an output projection of its own", "train"},
    {"--dropout", "X", O(CLI_DOUBLE, dropout), 0, 0.9, NULL, "0", "dropout (embeddings, attention, residuals)",
     "train"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "optimisation (AdamW, betas 0.9 and 0.95):"},
    {"--warmup", "N", O(CLI_LONG, warmup), 1, 1000000, NULL, "100",
     "linear warm-up steps, then a cosine down to a tenth of --lr", "train"},
    {"--weight-decay", "X", O(CLI_DOUBLE, weight_decay), 0, 10, NULL, "0.01", "AdamW's decoupled weight decay",
     "train"},
    {"--clip", "X", O(CLI_DOUBLE, clip), 0, 1e6, NULL, "1", "gradient norm clipping (0: none)", "train"},
    {"--budget-min", "M", O(CLI_LONG, budget_min), 1, 100000, NULL, NULL, "stop training after M minutes", "train"},
    {"--export-tokens", "DIR", O(CLI_OUT_DIR, export_tokens), 0, 0, NULL, NULL,
     "also write the token streams as llm.c's train.bin and val.bin (and token_bytes.bin) into DIR", "train"},
    {"--val-tokens", "N", O(CLI_LONG, val_tokens), 0, 1099511627776.0, NULL, "131072",
     "validate on the first N tokens of the held-out text (0: all of it)", "train eval"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "generation (generate, explain; the prompt: arguments or stdin):"},
    {"--max-new-tokens", "N", O(CLI_LONG, max_new_tokens), 0, 1000000, NULL, "100",
     "stop after N tokens (or at <|endoftext|>, or a full context)", "generate"},
    {"--greedy", NULL, O(CLI_FLAG, greedy), 0, 0, NULL, NULL, "take the most likely token each time", "generate"},
    {"--temperature", "T", O(CLI_DOUBLE, temperature), 0, 100, NULL, "0.8", "sampling temperature (0: greedy)",
     "generate"},
    {"--top-k", "K", O(CLI_LONG, top_k), 0, 1000000000, NULL, "0", "sample among the K most likely (0: all)",
     "generate"},
    {"--top-p", "P", O(CLI_DOUBLE, top_p), 1e-6, 1, NULL, "0.95", "nucleus: among the most likely whose mass reaches P",
     "generate"},
    {"--sample-seed", "S", O(CLI_LONG, sample_seed), 0, 2147483647.0, NULL, "0", "the same seed, the same text",
     "generate"},
    {"--ids", NULL, O(CLI_FLAG, ids), 0, 0, NULL, NULL,
     "print token ids (the prompt's after the start, then each new one) instead of text", "generate"},
    {"--truncate", NULL, O(CLI_FLAG, truncate), 0, 0, NULL, NULL,
     "a prompt longer than the context keeps its last tokens (default: an error)", "generate explain"},
    {"--out", "FILE", O(CLI_PICTURE, out), 0, 0, NULL, "lm_attention.png",
     "explain: every layer's and head's attention over the prompt", "explain"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "export (the model to another program's files):"},
    {"--format", NULL, O(CLI_CHOICE, format), 0, 0, format_names, "llama2c",
     "a llama-style model as llama2c (llama2.c's run.c reads it: version 0) or llama2c-v1 (its export.py's "
     "version 1); a gpt2-style one as llmc (llm.c's train_gpt2.c and test_gpt2.c read it); either as hf "
     "(Hugging Face's GPT2LMHeadModel or LlamaForCausalLM: config.json and model.safetensors in --hf-out)",
     "export"},
    {"--hf-out", "DIR", O(CLI_OUT_DIR, hf_out), 0, 0, NULL, NULL, "--format hf: the folder (made if missing)",
     "export"},
    {"--model-out", "FILE", O(CLI_OUT_FILE, model_out), 0, 0, NULL, NULL,
     "the model's file (required, but with --format hf)", "export"},
    {"--tokenizer-out", "FILE", O(CLI_OUT_FILE, tokenizer_out), 0, 0, NULL, NULL,
     "the tokenizer as llama2.c's tokenizer.bin (the model's ids are laid out for it either way) or llm.c's "
     "gpt2_tokenizer.bin",
     "export"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL,
     "import (another program's files to a checkpoint; train --init-from tunes it):"},
    {"--model-in", "FILE", O(CLI_IN_FILE, model_in), 0, 0, NULL, NULL, "a llama2.c checkpoint, version 0 or 1",
     "import"},
    {"--hf-in", "DIR", O(CLI_IN_DIR, hf_in), 0, 0, NULL, NULL,
     "or a Hugging Face LlamaForCausalLM folder (config.json, model.safetensors)", "import"},
    {"--tokenizer-in", "FILE", O(CLI_IN_FILE, tokenizer_in), 0, 0, NULL, NULL,
     "its tokenizer as llama2.c's tokenizer.bin (required): llama2.c's own, one its tokenizer.py made from a "
     "model's tokenizer.model, or one attn lm export wrote",
     "import"},
    {"--init-from", "FILE", O(CLI_IN_FILE, init_from), 0, 0, NULL, NULL,
     "train: start from this checkpoint's model and tokenizer (fine-tuning; its config, not the options above)",
     "train"},
    CLI_TRAIN_OPTIONS(lm_options, "2", "16", "0.001", "128", "lm.safetensors"),
};
#undef O

const cli_spec lm_spec = {
    .cmd = "lm",
    .synopsis = "train|eval|generate|explain|export|import [options] [PROMPT ...]",
    .about = "A decoder-only language model (the masked self-attention of seed 002 and of seed 003's\n"
             "decoder, stacked): GPT-2 or Llama style, with a byte-level BPE tokenizer learnt from\n"
             "the training text; model and tokenizer are one checkpoint.",
    .actions = "  train             learn the tokenizer, then the model, on --data (the shipped reviews by\n"
               "                    default); validation loss and bits per byte after each epoch\n"
               "  eval              loss, perplexity and bits per byte on the held-out text\n"
               "  generate [TEXT]   continue a prompt (arguments, or all of stdin), streamed\n"
               "  explain [TEXT]    draw the attention of every layer and head over a prompt\n"
               "  export            write the model and its tokenizer as llama2.c's or llm.c's files\n"
               "  import            a llama2.c or Hugging Face llama model and a tokenizer.bin as a checkpoint\n",
    CLI_OPTIONS(options),
    .notes = "--max-len is --context here. Bits per byte: the loss in bits over the UTF-8 bytes of the\n"
             "predicted tokens (<|endoftext|> counts no bytes). Weight decay applies to every parameter.\n",
};

/* The config --style and the sizes give, for a tokenizer of vocab ids */
static attn_lm_config config_of(const lm_options *o, int64_t vocab)
{
    attn_lm_config c = {.style = (attn_lm_style)o->style,
                        .vocab_size = vocab,
                        .context = o->train.max_len,
                        .d_model = o->d_model,
                        .num_layers = o->layers,
                        .num_heads = o->heads,
                        .num_kv_heads = o->kv_heads ? o->kv_heads : o->heads,
                        .ffn_hidden = o->ffn,
                        .norm_eps = 1e-5f, /* attn_lm_init's default, as the checkpoint keeps it */
                        .rope_base = o->style == ATTN_LM_LLAMA ? (float)o->rope_base : 0.0f,
                        .untied = o->untied,
                        .dropout = (float)o->dropout};
    c.ffn_hidden = attn_lm_ffn_hidden(&c);
    return c;
}

/* ---- actions ---- */

static int load_stream(lm_stream *s, const lm_run *run, const lm_options *o, const char *split)
{
    lm_docs docs;
    int code = lm_docs_load(&docs, o, split);
    if (code == CLI_OK) code = lm_stream_build(s, &run->tok, &docs);
    lm_docs_free(&docs);
    return code;
}

/* A new tokenizer learnt from the training documents, the same on every rank (rank 0 learns it) */
static int learn_tokenizer(lm_run *run, const lm_options *o, const lm_docs *docs)
{
    lm_tokenizer learnt = {0};
    if (dist_rank() == 0) {
        double t0 = now_seconds();
        attn_bpe_trainer *t = attn_bpe_trainer_new();
        attn_status st = t ? ATTN_OK : attn_last_status();
        for (int64_t i = 0; st == ATTN_OK && i < docs->count; i++)
            st = attn_bpe_trainer_add(t, docs->text[i], docs->len[i]);
        attn_bpe *b = st == ATTN_OK ? attn_bpe_trainer_finish(t, o->vocab) : NULL;
        attn_bpe_trainer_free(t);
        if (b && lm_tok_set_bpe(&learnt, b, NULL, "the new tokenizer") == CLI_OK)
            printf("tokenizer: %lld ids (%lld merges) from %.1f MB in %.1f s\n", (long long)attn_bpe_vocab_size(b),
                   (long long)attn_bpe_vocab_size(b) - 257, (double)docs->bytes / 1e6, now_seconds() - t0);
        else if (!b)
            cli_fail(CLI_ERR_DATA, "lm", "tokenizer: %s", attn_last_error());
        attn_bpe_free(b);
    }
    char *text = share_text(learnt.text);
    lm_tok_free(&learnt);
    int code = text ? lm_tok_set_bpe(&run->tok, NULL, text, "the new tokenizer") : CLI_ERR_DATA;
    free(text);
    return code;
}

/* --resume: the checkpoint (rank 0 reads it) must hold the model this run builds (the options', or
 * --init-from's), and the run, and a tokenizer: --init-from's, or one that goes to every rank */
static int open_resumed(lm_run *run, const lm_options *o, attn_lm_config *cfg)
{
    const char *ck = o->train.checkpoint;
    lm_tokenizer saved = {0};
    int code = CLI_OK;
    if (dist_rank() == 0) {
        long vocab = 0;
        if (!(run->resume = checkpoint_open("lm", ck, NULL))) return CLI_ERR_DATA;
        if ((code = checkpoint_model_check(&lm_schema, run->resume, ck)) != CLI_OK) return code;
        if (!checkpoint_meta_long(run->resume, "vocab_size", &vocab))
            return cli_fail(CLI_ERR_DATA, "lm", "%s: metadata vocab_size is missing or not an integer", ck);
        if ((code = lm_tok_from_checkpoint(&saved, run->resume, ck, vocab)) != CLI_OK) return code;
        if (o->init_from && strcmp(saved.text, run->tok.text))
            code = cli_fail(CLI_ERR_USAGE, "lm", "%s holds another tokenizer than --init-from %s", ck, o->init_from);
        else if (!o->init_from && saved.l2c)
            code = cli_fail(CLI_ERR_USAGE, "lm", "%s was tuned from an imported model: resume it with --init-from", ck);
        *cfg = o->init_from ? run->model.cfg : config_of(o, lm_tok_size(&saved));
        attn_lm_config wanted = *cfg;
        int n;
        const run_option *ro = lm_run_options(o, &n);
        if (code == CLI_OK) code = config_check_resumed(&lm_schema, run->resume, ck, cfg, &wanted);
        if (code == CLI_OK) code = run_options_check("lm", run->resume, ck, ro, n);
        if (code != CLI_OK) {
            lm_tok_free(&saved);
            return code;
        }
    }
    if (o->init_from) { /* every rank has its tokenizer and model already */
        lm_tok_free(&saved);
        *cfg = run->model.cfg;
        return CLI_OK;
    }
    char *text = share_text(saved.text);
    lm_tok_free(&saved);
    code = text ? lm_tok_set_bpe(&run->tok, NULL, text, ck) : CLI_ERR_DATA;
    free(text);
    if (code == CLI_OK) *cfg = config_of(o, lm_tok_size(&run->tok));
    return code;
}

static int do_train(lm_run *run, const lm_options *o)
{
    if (checkpoint_lock_take("lm", o->train.checkpoint, &run->lock) != CLI_OK) return CLI_ERR_DATA;
    const double t0 = now_seconds();
    lm_docs docs = {0};
    lm_stream train = {0}, val = {0};
    attn_lm_config cfg;
    int code = o->init_from ? lm_load_model(run, o->init_from) : CLI_OK; /* the model and tokenizer to tune */
    if (code == CLI_OK && o->init_from) {                                /* its config, with this run's dropout */
        run->model.cfg.dropout = (float)o->dropout;
        for (int64_t i = 0; i < run->model.cfg.num_layers; i++) run->model.blocks[i].attn.dropout = (float)o->dropout;
    }
    if (code == CLI_OK) code = o->train.resume ? open_resumed(run, o, &cfg) : lm_docs_load(&docs, o, "train");
    if (code == CLI_OK && !o->train.resume) {
        if (!o->init_from) code = learn_tokenizer(run, o, &docs);
        cfg = o->init_from ? run->model.cfg : config_of(o, lm_tok_size(&run->tok));
    }
    if (code == CLI_OK && o->train.resume) code = lm_docs_load(&docs, o, "train");
    if (code == CLI_OK) code = lm_stream_build(&train, &run->tok, &docs);
    lm_docs_free(&docs);
    if (code == CLI_OK) code = load_stream(&val, run, o, "test");
    if (code == CLI_OK && o->export_tokens && dist_rank() == 0)
        code = lm_export_tokens(o->export_tokens, &run->tok, &train, &val);
    if (code == CLI_OK && !o->init_from) code = lm_build_model(run, &cfg, run->resume, o->train.checkpoint);
    if (code == CLI_OK) {
        printf("data: %lld documents, %lld tokens (%.2f bytes each) to train on, %lld documents, %lld tokens held "
               "out (%.1f s)\n",
               (long long)train.docs, (long long)train.n, (double)train.bytes / (double)train.n, (long long)val.docs,
               (long long)val.n, now_seconds() - t0);
        printf("model: %s, %lld layers, d %lld, %lld heads (%lld key/value), ffn %lld, context %lld, %lld "
               "parameters\n",
               style_names[cfg.style], (long long)cfg.num_layers, (long long)cfg.d_model, (long long)cfg.num_heads,
               (long long)run->model.cfg.num_kv_heads, (long long)run->model.cfg.ffn_hidden, (long long)cfg.context,
               (long long)attn_params_numel(run->params));
        fflush(stdout);
        code = lm_train(run, &train, &val);
    }
    lm_stream_free(&train);
    lm_stream_free(&val);
    return code;
}

static int do_eval(lm_run *run, const lm_options *o)
{
    lm_stream s = {0};
    int code = lm_load_model(run, o->train.checkpoint);
    if (code == CLI_OK) code = load_stream(&s, run, o, "test");
    double loss, bpb;
    int64_t tokens;
    if (code == CLI_OK) code = lm_score(run, &s, o->val_tokens, &loss, &bpb, &tokens);
    if (code == CLI_OK)
        printf("%lld tokens held out: loss %.4f, perplexity %.2f, %.4f bits per byte\n", (long long)tokens, loss,
               exp(loss), bpb);
    lm_stream_free(&s);
    return code;
}

/* The prompt: the arguments joined by spaces, or all of standard input */
static char *prompt_text(const char **args, int n, size_t *len)
{
    size_t cap = 1, at = 0;
    for (int i = 0; i < n; i++) cap += strlen(args[i]) + 1;
    char *text = malloc(cap);
    if (!text) return NULL;
    for (int i = 0; i < n; i++) at += (size_t)sprintf(text + at, "%s%s", i ? " " : "", args[i]);
    if (n == 0) {
        size_t got;
        char buf[65536];
        while ((got = fread(buf, 1, sizeof buf, stdin)) > 0) {
            char *more = realloc(text, at + got + 1);
            if (!more) {
                free(text);
                return NULL;
            }
            text = more;
            memcpy(text + at, buf, got);
            at += got;
        }
        if (ferror(stdin)) {
            free(text);
            cli_fail(CLI_ERR_DATA, "lm", "standard input: read failed");
            return NULL;
        }
    }
    text[at] = '\0';
    *len = at;
    return text;
}

static int validate(const lm_options *o, int action, int n_args)
{
    if ((action == TRAIN || action == EVAL || action == EXPORT || action == IMPORT) && n_args)
        return cli_fail(CLI_ERR_USAGE, "lm", "%s takes no PROMPT arguments", action_names[action]);
    if (action == EXPORT && o->format != LM_HF && !o->model_out)
        return cli_fail(CLI_ERR_USAGE, "lm", "export needs --model-out FILE");
    if (action == EXPORT && o->format == LM_HF && (!o->hf_out || o->model_out || o->tokenizer_out))
        return cli_fail(CLI_ERR_USAGE, "lm", "export --format hf writes --hf-out DIR alone");
    if (action == EXPORT && o->format != LM_HF && o->hf_out)
        return cli_fail(CLI_ERR_USAGE, "lm", "--hf-out goes with --format hf");
    if (action == IMPORT && (!o->model_in == !o->hf_in || !o->tokenizer_in))
        return cli_fail(CLI_ERR_USAGE, "lm",
                        "import needs --model-in FILE or --hf-in DIR (one), and --tokenizer-in FILE");
    if (cli_check_paths(&lm_spec, o, action_names[action]) != CLI_OK) return CLI_ERR_USAGE;
    if (o->data && o->text) return cli_fail(CLI_ERR_USAGE, "lm", "--data and --text: give one of them");
    if (action != TRAIN || o->init_from) return CLI_OK; /* --init-from: the model's options are its */
    if (o->d_model % o->heads)
        return cli_fail(CLI_ERR_USAGE, "lm", "--heads %ld must divide --d-model %ld", o->heads, o->d_model);
    if (o->style == ATTN_LM_GPT2 && (o->kv_heads || o->untied))
        return cli_fail(CLI_ERR_USAGE, "lm",
                        "%s: GPT-2 style has as many key/value heads as heads and a tied output "
                        "(--style llama has both)",
                        o->kv_heads ? "--kv-heads" : "--untied");
    if (o->kv_heads && o->heads % o->kv_heads)
        return cli_fail(CLI_ERR_USAGE, "lm", "--kv-heads %ld must divide --heads %ld", o->kv_heads, o->heads);
    if (o->style == ATTN_LM_LLAMA && (o->d_model / o->heads) % 2)
        return cli_fail(CLI_ERR_USAGE, "lm",
                        "--style llama: rotary positions turn pairs of dims; the head width "
                        "--d-model / --heads = %ld is odd",
                        o->d_model / o->heads);
    return CLI_OK;
}

int cmd_lm(int argc, char **argv)
{
    int code;
    if (cli_help_before_action(&lm_spec, argc, argv, &code)) return code;
    lm_options o;
    memset(&o, 0, sizeof o);
    int action = 0, n_args = 0;
    for (; action_names[action] && strcmp(argv[1], action_names[action]); action++) {}
    if (!action_names[action])
        return cli_fail(CLI_ERR_USAGE, "lm",
                        "unknown action \"%s\"; expected train, eval, generate, explain, export or import", argv[1]);
    const char **args = calloc((size_t)argc, sizeof *args);
    code = args ? cli_parse(&lm_spec, &o, argc, argv, 2, args, &n_args) : cli_fail(CLI_ERR_DATA, "lm", "out of memory");
    if (code == CLI_OK && !o.data && !o.text) o.data = cli_default_data("aclImdb_mini");
    if (code == CLI_OK) code = validate(&o, action, n_args);
    if (code == CLI_OK && o.train.threads > 0) cli_set_threads((int)o.train.threads);
    cli_set_matmul_precision((attn_precision)o.train.matmul_precision);
    lm_run run = {.opt = &o, .lock = {.fd = -1}};
    if (code == CLI_OK && action == TRAIN) code = do_train(&run, &o);
    if (code == CLI_OK && action == EVAL) code = do_eval(&run, &o);
    if (code == CLI_OK && action == EXPORT) code = lm_export(&run, &o);
    if (code == CLI_OK && action == IMPORT) code = lm_import(&run, &o);
    if (code == CLI_OK && (action == GENERATE || action == EXPLAIN)) {
        size_t len = 0;
        char *prompt = NULL;
        code = lm_load_model(&run, o.train.checkpoint);
        if (code == CLI_OK && !(prompt = prompt_text(args, n_args, &len))) code = CLI_ERR_DATA;
        if (code == CLI_OK) code = action == GENERATE ? lm_generate(&run, prompt, len) : lm_explain(&run, prompt, len);
        free(prompt);
    }
    free(args);
    if (run.model_ready) attn_lm_free(&run.model);
    attn_params_free(run.params);
    lm_tok_free(&run.tok);
    attn_st_close(run.resume);
    checkpoint_lock_release(&run.lock);
    return code == CLI_HELP_SHOWN ? CLI_OK : code;
}
