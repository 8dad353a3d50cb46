/* attn translate train|eval|translate: attention-based translation (Transformer or Bahdanau
 * GRU) on Multi30k en->fr by default, corpus BLEU on test_2016_flickr, cross-attention
 * heatmaps of single translations. */
#include "translate.h"
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const model_names[] = {"transformer", "bahdanau", NULL};
/* --recipe: options put before the command line's, which override them (docs/results.md measures
 * "best" on Multi30k: chosen on val) */
#define RECIPE_BEST                                                                                                    \
    "--rope-base 10000 --matmul-precision medium --epochs 30 --budget-min 60 --keep-epochs 5 --average-kept"
static const char *const recipe_names[] = {"seed", "best", NULL};
static const char *const recipe_options[] = {"", RECIPE_BEST}; /* of recipe_names[i] */
_Static_assert(sizeof recipe_options / sizeof *recipe_options + 1 == sizeof recipe_names / sizeof *recipe_names,
               "a recipe's options for each name");
static const char *const action_names[] = {"train", "eval", "translate", NULL};
enum {
    TRAIN,
    EVAL,
    TRANSLATE
};

#define O(kind, field) CLI_OPT_AT(translate_options, kind, field)
static const cli_option options[] = {
    {"--model", NULL, O(CLI_CHOICE, model_kind), 0, 0, model_names, "transformer",
     "the Transformer (seed 003 / D2L) or D2L's GRU encoder-decoder with Bahdanau attention", "train"},
    {"--recipe", NULL, O(CLI_CHOICE, recipe), 0, 0, recipe_names, "seed",
     "a preset of options, which those given override: seed (the seed's settings) or best (the Transformer: "
     "\"" RECIPE_BEST "\")",
     "train"},
    {"--data", "DIR", O(CLI_IN_DIR, data), 0, 0, NULL, NULL,
     "folder with <split>.<lang>.gz files (default the shipped multi30k, found as --data of classify)", "train eval"},
    {"--src", "LANG", O(CLI_NAME, src_lang), 0, 0, NULL, "en", "source language", "train eval"},
    {"--tgt", "LANG", O(CLI_NAME, tgt_lang), 0, 0, NULL, "fr", "target language", "train eval"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "model (train; the others read it from the checkpoint):"},
    {"--d-model", "N", O(CLI_INT64, model.d_model), 2, 8192, NULL, "256",
     "model width (Bahdanau: embedding and hidden size)", "train"},
    {"--heads", "N", O(CLI_INT64, model.num_heads), 1, 256, NULL, "8", "attention heads (must divide --d-model)",
     "train"},
    {"--ffn", "N", O(CLI_INT64, model.dim_feedforward), 1, 65536, NULL, "512", "feed-forward width", "train"},
    {"--layers", "N", O(CLI_INT, layers), 1, 64, NULL, "3", "encoder and decoder layers each", "train"},
    {"--dropout", "X", O(CLI_FLOAT, model.dropout), 0, 0.99, NULL, "0.1", "dropout", "train"},
    {"--rope-base", "B", O(CLI_LONG, rope_base), 2, 10000000, NULL, NULL,
     "rotary positions with base B in every self-attention instead of the sinusoidal table (Transformer)", "train"},
    {"--min-freq", "N", O(CLI_LONG, min_freq), 1, 1000000, NULL, "2", "vocabulary: tokens seen at least N times",
     "train"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "training schedule:"},
    {"--warmup", "N", O(CLI_LONG, warmup), 1, 1000000, NULL, "800", "warm-up steps of the inverse-square-root schedule",
     "train"},
    {"--label-smoothing", "X", O(CLI_DOUBLE, label_smoothing), 0, 0.99, NULL, "0.1", "label smoothing", "train"},
    {"--budget-min", "M", O(CLI_LONG, budget_min), 1, 100000, NULL, NULL,
     "stop training after M minutes (then evaluate)", "train"},
    {"--no-pack", NULL, O(CLI_FLAG, no_pack), 0, 0, NULL, NULL,
     "the Transformer's batches padded to their longest pair; by default each batch's pairs are packed end to end, "
     "no padding computed (the same model)",
     "train"},
    {"--keep-epochs", "K", O(CLI_LONG, keep_epochs), 1, 1000, NULL, NULL,
     "also keep the parameters of the last K epochs as CHECKPOINT.epochN (for --average)", "train"},
    {"--average-kept", NULL, O(CLI_FLAG, average_kept), 0, 0, NULL, NULL,
     "the closing BLEU scores the mean of the epochs --keep-epochs kept (eval --checkpoint on the last of those "
     "files and --average on the others gives the same), not the final parameters",
     "train"},
    {NULL, NULL, 0, 0, 0, 0, NULL, NULL, "evaluation and translation:"},
    {"--split", "NAME", O(CLI_NAME, split), 0, 0, NULL, "test_2016_flickr",
     "the split train and eval score with BLEU (val: tune decoding without touching the test set)", "train eval"},
    {"--eval-limit", "N", O(CLI_LONG, eval_limit), 1, 100000000, NULL, NULL,
     "score only the first N sentences of that split", "train eval"},
    {"--beam", "N", O(CLI_LONG, beam), 1, ATTN_BEAM_MAX, NULL, "4", "beam size (1 = greedy, batched)"},
    {"--length-penalty", "A", O(CLI_DOUBLE, length_penalty), 0, 10, NULL, "0.6",
     "beam score = log p / ((5 + length) / 6)^A"},
    {"--average", "A,B,...", O(CLI_IN_FILES, average), 0, 0, NULL, NULL,
     "eval, translate: the mean of the parameters of --checkpoint and these checkpoints of the same run",
     "eval translate"},
    {"--out", "FILE", O(CLI_PICTURE, out), 0, 0, NULL, "cross_attention.png",
     "translate: the cross-attention heatmap of the first sentence", "translate"},
    {"--average-heads", NULL, O(CLI_FLAG, average_heads), 0, 0, NULL, NULL,
     "one panel averaged over heads instead of one per head", "translate"},
    CLI_TRAIN_OPTIONS(translate_options, "30", "64", NULL, "64", "translator.safetensors"),
};
#undef O

const cli_spec translate_spec = {
    .cmd = "translate",
    .synopsis = "train|eval|translate [options] [SENTENCE ...]",
    .about = "Translation with attention (Multi30k en->fr by default): train, corpus BLEU, and\n"
             "translations with their cross-attention.",
    .actions = "  train             train on DATA/train.SRC.gz -> train.TGT.gz, validation loss on val,\n"
               "                    BLEU on --split at the end\n"
               "  eval              BLEU of a saved model on --split\n"
               "  translate [TEXT]  translate sentences (arguments, or lines of stdin), and draw the\n"
               "                    cross-attention of the first one\n",
    CLI_OPTIONS(options),
    .notes = "--lr is the factor of d^-0.5 min(s^-0.5, s w^-1.5) for the Transformer (default 1), the\n"
             "constant rate for Bahdanau (default 1e-3).\n",
};

/* --keep-epochs: every epoch's file (CHECKPOINT.epochN), checked as --checkpoint is. */
static bool check_kept(const translate_options *o, const cli_path *inputs, int n_in)
{
    size_t n = strlen(o->train.checkpoint) + 32;
    char *path = malloc(n);
    bool ok = path != NULL;
    if (!ok) cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    for (long epoch = 1; ok && epoch <= o->train.epochs; epoch++) {
        snprintf(path, n, "%s.epoch%ld", o->train.checkpoint, epoch);
        ok = cli_check_checkpoint("translate", "--keep-epochs", path) &&
             cli_check_apart("translate", (const cli_path[]){{"--keep-epochs", path}}, 1, inputs, n_in);
    }
    free(path);
    return ok;
}

/* The files the action reads and writes, and the model's shape, checked before any work.
 * given: the options the command line gives (not their defaults) among --heads and --ffn. */
static int validate(const translate_options *o, int action, int n_texts, const char *given)
{
    if (action != TRANSLATE && n_texts)
        return cli_fail(CLI_ERR_USAGE, "translate", "%s takes no SENTENCE arguments", action_names[action]);
    if (cli_check_paths(&translate_spec, o, action_names[action]) != CLI_OK) return CLI_ERR_USAGE;
    const cli_path data = {"--data", o->data};
    if (action == TRAIN && o->keep_epochs && !check_kept(o, &data, 1)) return CLI_ERR_USAGE;
    if (action != TRAIN) return CLI_OK;
    if (o->recipe && o->model.kind == ATTN_SEQ2SEQ_BAHDANAU)
        return cli_fail(CLI_ERR_USAGE, "translate", "--recipe %s is a recipe for the Transformer, not --model bahdanau",
                        recipe_names[o->recipe]);
    if (o->average_kept && !o->keep_epochs)
        return cli_fail(CLI_ERR_USAGE, "translate", "--average-kept needs --keep-epochs K (the epochs it averages)");
    if (o->model.kind == ATTN_SEQ2SEQ_BAHDANAU && o->layers > ATTN_GRU_MAX_LAYERS)
        return cli_fail(CLI_ERR_USAGE, "translate", "--layers %d: the Bahdanau GRU has at most %d layers", o->layers,
                        ATTN_GRU_MAX_LAYERS);
    if (o->model.kind == ATTN_SEQ2SEQ_BAHDANAU && o->rope_base)
        return cli_fail(CLI_ERR_USAGE, "translate",
                        "--rope-base applies to the Transformer (the Bahdanau GRU has no "
                        "positions)");
    if (o->model.kind == ATTN_SEQ2SEQ_BAHDANAU && o->no_pack)
        return cli_fail(CLI_ERR_USAGE, "translate",
                        "--no-pack applies to the Transformer (the Bahdanau GRU's batches "
                        "are padded)");
    if (o->model.kind == ATTN_SEQ2SEQ_BAHDANAU && *given)
        return cli_fail(CLI_ERR_USAGE, "translate",
                        "%s: the Bahdanau GRU has no attention heads or feed-forward "
                        "layers; it would be stored and ignored",
                        given);
    if (o->model.kind == ATTN_SEQ2SEQ_TRANSFORMER && o->model.d_model % 2 != 0)
        return cli_fail(CLI_ERR_USAGE, "translate",
                        "--d-model %lld: the Transformer's sinusoidal positions need an "
                        "even width",
                        (long long)o->model.d_model);
    if (o->model.kind == ATTN_SEQ2SEQ_TRANSFORMER && o->model.d_model % o->model.num_heads != 0)
        return cli_fail(CLI_ERR_USAGE, "translate", "--heads %lld must divide --d-model %lld",
                        (long long)o->model.num_heads, (long long)o->model.d_model);
    if (o->model.kind == ATTN_SEQ2SEQ_TRANSFORMER && o->rope_base && (o->model.d_model / o->model.num_heads) % 2)
        return cli_fail(CLI_ERR_USAGE, "translate",
                        "--rope-base: rotary positions turn pairs of each head's dims; "
                        "the head width --d-model / --heads = %lld is odd",
                        (long long)(o->model.d_model / o->model.num_heads));
    return CLI_OK;
}

static int parse(int argc, char **argv, translate_options *o, int *action, const char ***texts, int *n_texts)
{
    memset(o, 0, sizeof *o);
    *texts = calloc((size_t)argc, sizeof **texts);
    if (!*texts) return cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    for (*action = 0; action_names[*action] && strcmp(argv[1], action_names[*action]); ++*action) {}
    if (!action_names[*action])
        return cli_fail(CLI_ERR_USAGE, "translate", "unknown action \"%s\"; expected train, eval or translate",
                        argv[1]);
    int code = cli_parse(&translate_spec, o, argc, argv, 2, *texts, n_texts);
    if (code != CLI_OK) return code;
    if (!o->data) o->data = cli_default_data("multi30k");
    o->model.kind = (attn_seq2seq_kind)o->model_kind;
    o->model.enc_layers = o->model.dec_layers = o->layers;
    o->model.rope_base = (float)o->rope_base; /* whole numbers up to 1e7: exact */
    if (o->train.lr == 0) o->train.lr = o->model.kind == ATTN_SEQ2SEQ_TRANSFORMER ? 1.0 : 1e-3;
    o->model.max_len = o->train.max_len + 2; /* <bos>/<eos> */
    char given[32] = "";                     /* model options the Bahdanau model has no use for */
    if (cli_given(&translate_spec, argc, argv, 2, "--heads")) strcat(given, "--heads");
    if (cli_given(&translate_spec, argc, argv, 2, "--ffn")) strcat(given, *given ? " and --ffn" : "--ffn");
    if ((code = validate(o, *action, *n_texts, given)) != CLI_OK) return code;
    if (o->train.threads > 0) cli_set_threads((int)o->train.threads);
    cli_set_matmul_precision((attn_precision)o->train.matmul_precision);
    return CLI_OK;
}

/* ---- data ---- */

static char *data_path(const translate_options *o, const char *split, const char *lang)
{
    size_t n = strlen(o->data) + strlen(split) + strlen(lang) + 8;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s.%s.gz", o->data, split, lang);
    return p;
}

static attn_status load_pairs(attn_text_pairs *out, const translate_options *o, const char *split)
{
    char *s = data_path(o, split, o->src_lang), *t = data_path(o, split, o->tgt_lang);
    attn_status st = s && t ? attn_pairs_load(out, s, t) : ATTN_ERR_NOMEM;
    free(s);
    free(t);
    return st;
}

static attn_vocab *build_vocab(const translate_options *o, char *const *texts, int64_t n)
{
    attn_counter *c = attn_counter_new();
    attn_tokens toks = {0};
    attn_status st = c ? ATTN_OK : attn_last_status();
    for (int64_t i = 0; st == ATTN_OK && i < n; i++) {
        attn_tokens_clear(&toks);
        st = attn_tokenize(&toks, ATTN_TOKENIZER_WORDS, texts[i], strlen(texts[i]));
        if (st == ATTN_OK) st = attn_counter_add(c, toks.items, toks.count);
    }
    attn_vocab *v = st == ATTN_OK ? attn_vocab_build(c, translate_specials, 4, o->min_freq, 0) : NULL;
    attn_tokens_free(&toks);
    attn_counter_free(c);
    return v;
}

static int load_split(translate_split *out, const translate_run *run, const char *split, long limit)
{
    memset(out, 0, sizeof *out);
    if (load_pairs(&out->text, run->opt, split) != ATTN_OK)
        return cli_fail(CLI_ERR_DATA, "translate", "--data %s: %s", run->opt->data, attn_last_error());
    attn_status st = ATTN_OK;
    /* the first `limit` pairs are used; text keeps them all, so that it frees them all */
    const int64_t n = limit > 0 && out->text.count > limit ? limit : out->text.count;
    if (st == ATTN_OK)
        st = attn_encode_texts(&out->src, run->src_vocab, ATTN_TOKENIZER_WORDS, (const char *const *)out->text.src, n);
    if (st == ATTN_OK)
        st = attn_encode_texts(&out->tgt, run->tgt_vocab, ATTN_TOKENIZER_WORDS, (const char *const *)out->text.tgt, n);
    return st == ATTN_OK ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
}

static void free_split(translate_split *s)
{
    attn_id_seqs_free(&s->src);
    attn_id_seqs_free(&s->tgt);
    attn_text_pairs_free(&s->text);
}

/* ---- actions ---- */

static int do_train(translate_run *run, translate_options *o)
{
    translate_split train = {0}, val = {0}, test = {0};
    attn_text_pairs pairs = {0};
    if (checkpoint_lock_take("translate", o->train.checkpoint, &run->lock) != CLI_OK) return CLI_ERR_DATA;
    double t0 = now_seconds();
    int code = CLI_OK;
    if (o->train.resume) {
        code = translate_open_resumed(run, o);
    } else {
        if (load_pairs(&pairs, o, "train") != ATTN_OK)
            return cli_fail(CLI_ERR_DATA, "translate", "--data %s: %s", o->data, attn_last_error());
        run->src_vocab = build_vocab(o, pairs.src, pairs.count);
        run->tgt_vocab = run->src_vocab ? build_vocab(o, pairs.tgt, pairs.count) : NULL;
        attn_text_pairs_free(&pairs);
        size_t len;
        for (int i = 0; i < 2 && run->tgt_vocab; i++)
            run->vocab_text[i] = attn_vocab_text(i ? run->tgt_vocab : run->src_vocab, &len);
        if (!run->vocab_text[1]) code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    }
    if (code == CLI_OK) code = translate_check_beam(o, run);
    if (code == CLI_OK) code = translate_build_model(run, o, run->resume);
    if (code == CLI_OK) code = load_split(&train, run, "train", 0);
    if (code == CLI_OK) code = load_split(&val, run, "val", 0);
    if (code == CLI_OK) code = load_split(&test, run, o->split, o->eval_limit);
    if (code == CLI_OK) {
        printf("data: %lld train / %lld val / %lld test pairs (%s -> %s), vocabularies %lld / %lld (%.1f s)\n",
               (long long)train.src.count, (long long)val.src.count, (long long)test.src.count, o->src_lang,
               o->tgt_lang, (long long)attn_vocab_size(run->src_vocab), (long long)attn_vocab_size(run->tgt_vocab),
               now_seconds() - t0);
        printf("model: %s, %lld parameters\n", o->model.kind == ATTN_SEQ2SEQ_TRANSFORMER ? "transformer" : "bahdanau",
               (long long)attn_params_numel(run->params));
        if (cli_matmul_precision() != ATTN_PRECISION_HIGHEST) /* decoding stays float32 (attn.h) */
            printf("matmul precision: %s in training\n", cli_matmul_precision_text());
        code = translate_train(run, &train, &val);
    }
    if (code == CLI_OK && o->average_kept && dist_rank() == 0) code = translate_average_kept(run, o);
    if (code == CLI_OK) code = translate_evaluate(run, &test, o->split);
    free_split(&train);
    free_split(&val);
    free_split(&test);
    return code;
}

static int do_eval(translate_run *run, translate_options *o)
{
    translate_split test = {0};
    int code = translate_load_model(run, o);
    if (code == CLI_OK) code = load_split(&test, run, o->split, o->eval_limit);
    if (code == CLI_OK) code = translate_evaluate(run, &test, o->split);
    free_split(&test);
    return code;
}

/* Draws the cross-attention (heads, T, S) of one translation. */
static int draw(const translate_options *o, const attn_tensor *w, const attn_tokens *src, const int64_t *out,
                int64_t n_out, const translate_run *run)
{
    const int64_t H = w->shape[0], T = w->shape[1], S = w->shape[2];
    const char **ylabels = malloc((size_t)T * sizeof *ylabels), **xlabels = malloc((size_t)S * sizeof *xlabels);
    float *mean = malloc((size_t)(T * S) * sizeof *mean);
    int code = ylabels && xlabels && mean ? CLI_OK : cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    if (code == CLI_OK) {
        for (int64_t s = 0; s < S; s++) xlabels[s] = s < src->count ? src->items[s] : "<eos>";
        for (int64_t t = 0; t < T; t++) /* the query at step t predicts output t */
            ylabels[t] = t < n_out ? attn_vocab_token(run->tgt_vocab, out[t]) : "<eos>";
        for (int64_t i = 0; i < T * S; i++) {
            double acc = 0;
            for (int64_t h = 0; h < H; h++) acc += w->data[h * T * S + i];
            mean[i] = (float)(acc / (double)H);
        }
        attn_heatmap_opts ho = {
            .xlabel = "source (keys)", .ylabel = "output (queries)", .xticks = xlabels, .yticks = ylabels};
        attn_status st;
        if (o->average_heads || H == 1) {
            ho.title = "cross-attention, mean over heads";
            st = attn_plot_heatmap(o->out, mean, T, S, &ho);
        } else {
            ho.title = "cross-attention per head (last decoder layer)";
            st = attn_plot_heatmap_heads(o->out, w->data, H, T, S, NULL, &ho);
        }
        if (st != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
        else
            printf("wrote %s\n", o->out);
    }
    free(ylabels);
    free(xlabels);
    free(mean);
    return code;
}

static int translate_one(translate_run *run, const translate_options *o, attn_ctx *ctx, const char *text, bool first)
{
    attn_tokens toks = {0}, scratch = {0};
    int64_t *src = NULL, out[256], n_out = 0;
    int code = CLI_OK;
    if (attn_tokenize(&toks, ATTN_TOKENIZER_WORDS, text, strlen(text)) != ATTN_OK)
        code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
    int64_t n = toks.count < o->model.max_len - 1 ? toks.count : o->model.max_len - 1;
    if (code == CLI_OK && !(src = malloc((size_t)(n + 1) * sizeof *src)))
        code = cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    if (code == CLI_OK) {
        toks.count = n;
        attn_tensor *w = NULL;
        const int64_t src_len = n + 1;
        const attn_seq2seq_decode_opts dopts = {
            .beam_size = (int)o->beam, .length_penalty = (float)o->length_penalty, .cross_weights = first ? &w : NULL};
        if (attn_vocab_encode(run->src_vocab, src, toks.items, n) != ATTN_OK || (src[n] = o->model.eos_id, false) ||
            attn_seq2seq_decode(ctx, &run->model, src, &src_len, 1, src_len, &dopts, n + 10 < 255 ? n + 10 : 255, out,
                                &n_out) != ATTN_OK)
            code = cli_fail(CLI_ERR_DATA, "translate", "%s", attn_last_error());
        char *hyp = code == CLI_OK ? translate_detok(run, out, n_out, &scratch) : NULL;
        if (hyp) printf("%s\n", hyp);
        free(hyp);
        if (code == CLI_OK && first && w) code = draw(o, w, &toks, out, n_out, run);
    }
    free(src);
    attn_tokens_free(&toks);
    attn_tokens_free(&scratch);
    return code;
}

static int do_translate(translate_run *run, translate_options *o, const char **texts, int n_texts)
{
    int code = translate_load_model(run, o);
    attn_ctx *ctx = cli_ctx_new(0);
    if (code == CLI_OK && !ctx) code = cli_fail(CLI_ERR_DATA, "translate", "out of memory");
    for (int i = 0; code == CLI_OK && i < n_texts; i++) code = translate_one(run, o, ctx, texts[i], i == 0);
    char *line = NULL;
    size_t cap = 0;
    for (long line_no = 1;
         code == CLI_OK && n_texts == 0 && cli_stdin_line("translate", &line, &cap, line_no, &code) > 0; line_no++)
        code = translate_one(run, o, ctx, line, line_no == 1);
    free(line);
    attn_ctx_free(ctx);
    return code;
}

int cmd_translate(int argc, char **argv)
{
    int code;
    if (cli_help_before_action(&translate_spec, argc, argv, &code)) return code;
    translate_options o;
    const char **texts = NULL;
    int n_texts = 0, action = 0, expanded_argc = 0;
    char **expanded = NULL, *recipe_words = NULL;
    code = cli_expand_recipe("translate", recipe_names, recipe_options, argc, argv, &expanded_argc, &expanded,
                             &recipe_words);
    if (code == CLI_OK) code = parse(expanded_argc, expanded, &o, &action, &texts, &n_texts);
    translate_run run = {.opt = &o, .lock = {.fd = -1}};
    if (code == CLI_OK) {
        if (action == TRAIN)
            code = do_train(&run, &o);
        else if (action == EVAL)
            code = do_eval(&run, &o);
        else
            code = do_translate(&run, &o, texts, n_texts);
    }
    free(texts);
    free(expanded);
    free(recipe_words);
    if (run.model_ready) attn_seq2seq_free(&run.model);
    attn_params_free(run.params);
    attn_vocab_free(run.src_vocab);
    attn_vocab_free(run.tgt_vocab);
    free(run.vocab_text[0]);
    free(run.vocab_text[1]);
    attn_st_close(run.resume);
    checkpoint_lock_release(&run.lock);
    return code == CLI_HELP_SHOWN ? CLI_OK : code;
}
